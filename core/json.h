/*
 * json.h - events as JSON, the one shape tally prints everywhere
 * (tally log --json, tally tail --json, the AMQP publisher):
 *
 *   {"seq":N,"ts":"2026-11-29T15:30:00.123456789Z","type":"…",
 *    "stream":"…","version":N,"actor":"…","cause":N,"id":"hex",
 *    "corr":"hex","body":{…}}
 *
 * Secrets (TL_EXT_SECRET values) are rendered as the string
 * "<redacted>", never as ciphertext; binary values as lowercase hex.
 *
 * The documents returned are new references the caller releases with
 * json_decref; they copy what they need, so they outlive the event and
 * its transaction.  Failure is NULL (a body that does not decode, or
 * ENOMEM): nothing is then left to free.  tl_json_time writes buf and
 * cannot fail.
 */
#ifndef TL_JSON_H
#define TL_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "envelope.h"

#define TL_REDACTED	"<redacted>"

/* A new reference, or NULL if the body cannot be decoded or on ENOMEM. */
json_t	*tl_json_body(const void *body, size_t len);
json_t	*tl_json_event(const struct tl_event *ev);

/* Formats ns since the epoch as RFC 3339 UTC with nanoseconds. */
void	 tl_json_time(uint64_t ns, char buf[64]);

#endif
