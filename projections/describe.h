/*
 * describe.h - an event in domain words.
 *
 * tl_describe writes one event as a person reads it ("grant G
 * provisioned v1 on P", "app/db bound to node-a/postgres
 * (co-located)"), NUL-terminated, cut to cap bytes; an event type it
 * does not know is written as its type and body.  Pure: it reads the
 * event alone.  Shared by tally history, diff and replay and by
 * tally-board's history page.
 */
#ifndef TL_DESCRIBE_H
#define TL_DESCRIBE_H

#include <stddef.h>

#include "core/envelope.h"

void	tl_describe(const struct tl_event *ev, char *buf, size_t cap);

#endif
