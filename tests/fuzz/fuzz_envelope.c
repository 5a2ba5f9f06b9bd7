/*
 * fuzz_envelope.c - libFuzzer target for the envelope decoder.
 *
 * Decodes the input; when that succeeds the event is encoded again and
 * the encoding decoded once more: every field must come back the same,
 * and encoding the second decode must give the same bytes (encoding is
 * canonical).  The decoder's fast path must agree with its general
 * one.  Anything else traps.
 *
 *   make fuzz FUZZ_TIME=600
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/envelope.h"
#include "core/error.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
same(const struct tl_event *a, const struct tl_event *b)
{
	return a->format == b->format && a->seq == b->seq &&
	    a->ts == b->ts && a->version == b->version &&
	    a->cause == b->cause &&
	    memcmp(a->id, b->id, TL_ID_LEN) == 0 &&
	    memcmp(a->corr, b->corr, TL_ID_LEN) == 0 &&
	    memcmp(a->prev, b->prev, TL_HASH_LEN) == 0 &&
	    strcmp(a->type, b->type) == 0 &&
	    strcmp(a->stream, b->stream) == 0 &&
	    strcmp(a->actor, b->actor) == 0 &&
	    a->body_len == b->body_len &&
	    (a->body_len == 0 || memcmp(a->body, b->body, a->body_len) == 0);
}

/*
 * Headers as tl_env_encode writes them (a fixmap of 11 keys in its
 * order) take a fast path; the same header with a map16 size takes the
 * general one.  Both must agree.
 */
static void
differential(const uint8_t *data, size_t size)
{
	struct tl_event a, b;
	uint8_t *q;
	int ra, rb;

	if (size == 0 || data[0] != 0x8b || (q = malloc(size + 2)) == NULL)
		return;
	q[0] = 0xde;
	q[1] = 0x00;
	q[2] = 0x0b;
	if (size > 1)
		memcpy(q + 3, data + 1, size - 1);
	ra = tl_env_decode(data, size, &a, NULL);
	rb = tl_env_decode(q, size + 2, &b, NULL);
	if (ra != rb || (ra == 0 && !same(&a, &b)))
		__builtin_trap();
	free(q);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tl_event ev, ev2;
	char why[TL_WHY_MAX];
	uint8_t *enc, *enc2;
	size_t len, len2;
	int rc;

	differential(data, size);
	rc = tl_env_decode(data, size, &ev, why);
	if (rc != 0) {
		/* A failure is one of the documented codes, with a reason. */
		if (rc != TL_EMALFORMED && rc != TL_ETOOBIG && rc != TL_ENEWER)
			__builtin_trap();
		if (why[0] == '\0' || memchr(why, '\0', TL_WHY_MAX) == NULL)
			__builtin_trap();
		/* tl_env_check_map must not crash on anything either. */
		(void)tl_env_check_map(data, size);
		return 0;
	}
	if (ev.raw != data || ev.raw_len != size ||
	    ev.body < data || ev.body + ev.body_len != data + size)
		__builtin_trap();
	if (tl_env_check_map(ev.body, ev.body_len) != 0)
		__builtin_trap();

	/* Ask for the size first: the encoder must say what it needs. */
	if (tl_env_encode(&ev, ev.body, ev.body_len, NULL, 0, &len) !=
	    TL_ETOOBIG)
		__builtin_trap();
	if ((enc = malloc(len)) == NULL)
		return 0;
	if (tl_env_encode(&ev, ev.body, ev.body_len, enc, len, &len2) != 0 ||
	    len2 != len)
		__builtin_trap();
	if (tl_env_decode(enc, len, &ev2, why) != 0)
		__builtin_trap();
	if (!same(&ev, &ev2))
		__builtin_trap();
	if ((enc2 = malloc(len)) == NULL) {
		free(enc);
		return 0;
	}
	if (tl_env_encode(&ev2, ev2.body, ev2.body_len, enc2, len, &len2) !=
	    0 || len2 != len || memcmp(enc, enc2, len) != 0)
		__builtin_trap();
	free(enc2);
	free(enc);
	return 0;
}
