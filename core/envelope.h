/*
 * envelope.h - the encoding of one event.
 *
 * An event's encoding is two consecutive msgpack objects: a header map
 * (format, seq, ts, type, stream, ver, id, cause, corr, actor, prev)
 * followed by the body, which is always a msgpack map.  Keeping the
 * body a separate object lets a reader hand out the body's bytes
 * without re-encoding them and lets the hash cover exactly what was
 * written.  A reader ignores header keys it does not know (a newer
 * writer may add some) and refuses a format newer than TL_ENV_FORMAT.
 *
 * Secrets inside bodies are msgpack ext objects of type TL_EXT_SECRET
 * (ciphertext); anything that renders a body shows them as redacted.
 */
#ifndef TL_ENVELOPE_H
#define TL_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define TL_ENV_FORMAT	1

#define TL_TYPE_MAX	63	/* "grant.provisioned" */
#define TL_STREAM_MAX	255	/* "binding/MODULE/REQ@NODE" */
#define TL_ACTOR_MAX	127	/* "cli:root@host", "tallyd:provisioner" */
#define TL_BODY_MAX	(16u << 20)
/*
 * The largest encoded event (envelope and body) the log holds, so the
 * largest message a leader publishes on the replication stream: a
 * follower drops a larger one unread.
 */
#define TL_ENV_MAX	(TL_BODY_MAX + 4096u)
#define TL_ID_LEN	16
#define TL_HASH_LEN	32

#define TL_EXT_SECRET	1	/* msgpack ext type of an encrypted value */

/*
 * A decoded event.  Strings are copied and NUL-terminated; body and raw
 * point into the buffer that was decoded (for events read from the log:
 * valid until the end of the read transaction).
 */
struct tl_event {
	uint32_t	 format;
	uint64_t	 seq;
	uint64_t	 ts;		/* ns since the epoch, UTC */
	uint64_t	 version;	/* within its stream, from 1 */
	uint64_t	 cause;		/* seq that caused it, 0 if none */
	uint8_t		 id[TL_ID_LEN];
	uint8_t		 corr[TL_ID_LEN];
	uint8_t		 prev[TL_HASH_LEN];
	uint8_t		 hash[TL_HASH_LEN];	/* filled by the log reader */
	char		 type[TL_TYPE_MAX + 1];
	char		 stream[TL_STREAM_MAX + 1];
	char		 actor[TL_ACTOR_MAX + 1];
	const uint8_t	*body;
	size_t		 body_len;
	const uint8_t	*raw;		/* the whole encoding */
	size_t		 raw_len;
};

/*
 * Encodes ev (all fields but hash, body and raw) followed by body into
 * out[0..cap).  body must be one msgpack map of body_len bytes, or NULL
 * for an empty map.  *lenp receives the encoded length; TL_ETOOBIG when
 * cap is too small (*lenp then holds the size needed) or a field is
 * over its limit.  Encoding is allocation-free.
 */
int	tl_env_encode(const struct tl_event *ev, const void *body,
	    size_t body_len, uint8_t *out, size_t cap, size_t *lenp);

/*
 * Decodes and validates buf[0..len).  Every field is checked for type
 * and range; the body must be a well-formed map spanning the rest of
 * the buffer.  Returns TL_EMALFORMED (with a reason in why, if why is
 * not NULL), TL_ETOOBIG, or TL_ENEWER for a format this reader does
 * not know.  why, when given, must hold TL_WHY_MAX bytes.
 */
int	tl_env_decode(const void *buf, size_t len, struct tl_event *ev,
	    char *why);

/* Checks that buf[0..len) is exactly one well-formed msgpack map. */
int	tl_env_check_map(const void *buf, size_t len);

#endif
