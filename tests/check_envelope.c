/*
 * check_envelope.c - the envelope: encoding, decoding, validation.
 *
 * Set TL_ENV_CORPUS_OUT=DIR to have test_seeds write the valid
 * encodings it builds into DIR (how tests/fuzz/corpus/envelope/ was
 * seeded).
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"
#include "core/envelope.h"
#include "core/error.h"
#include "lib/tl_test.h"

/* The header fields, in the order tl_env_encode writes them. */
enum { F_FMT, F_SEQ, F_TS, F_TYPE, F_STREAM, F_VER, F_ID, F_CAUSE, F_CORR,
	F_ACTOR, F_PREV, F_N };
static const char *const fname[F_N] = { "fmt", "seq", "ts", "type",
	"stream", "ver", "id", "cause", "corr", "actor", "prev" };

#define ck_rc(rc, want, why) ck_assert_msg((rc) == (want),		\
	"rc %d (%s), wanted %d (%s); why: %s", (rc), tl_strerror(rc),	\
	(want), tl_strerror(want), (why))

/* A sane event with every field set to something recognisable. */
static void
event_plain(struct tl_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->format = TL_ENV_FORMAT;
	ev->seq = 42;
	ev->ts = 1764430200123456789ULL;
	ev->version = 3;
	ev->cause = 41;
	memset(ev->id, 0x11, TL_ID_LEN);
	memset(ev->corr, 0x22, TL_ID_LEN);
	memset(ev->prev, 0x33, TL_HASH_LEN);
	strcpy(ev->type, "grant.requested");
	strcpy(ev->stream, "grant/web/alice@db1");
	strcpy(ev->actor, "cli:root@host");
}

static void
fill(char *s, size_t n, char c)
{
	memset(s, c, n);
	s[n] = '\0';
}

/* Every field at its lower bound. */
static void
event_min(struct tl_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->format = TL_ENV_FORMAT;
	ev->seq = 1;
	ev->version = 1;
	strcpy(ev->type, "t");
	strcpy(ev->stream, "s");
}

/* Every field at its upper bound. */
static void
event_max(struct tl_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->format = TL_ENV_FORMAT;
	ev->seq = UINT64_MAX;
	ev->ts = UINT64_MAX;
	ev->version = UINT64_MAX;
	ev->cause = UINT64_MAX - 1;
	memset(ev->id, 0xff, TL_ID_LEN);
	memset(ev->corr, 0xff, TL_ID_LEN);
	memset(ev->prev, 0xff, TL_HASH_LEN);
	fill(ev->type, TL_TYPE_MAX, 'T');
	fill(ev->stream, TL_STREAM_MAX, 'S');
	fill(ev->actor, TL_ACTOR_MAX, 'A');
}

/* A body with a bit of everything, secrets included. */
static const void *
body_rich(struct tl_body *b, size_t *len)
{
	const void *p;

	tl_body_init(b);
	tl_body_str(b, "module", "web");
	tl_body_u64(b, "n", UINT64_MAX);
	tl_body_i64(b, "neg", INT64_MIN);
	tl_body_bool(b, "yes", 1);
	tl_body_nil(b, "nothing");
	tl_body_bin(b, "bin", "\0\1\2", 3);
	tl_body_secret(b, "password", "ciphertext", 10);
	tl_body_map(b, "nested");
	tl_body_arr(b, "list");
	tl_body_u64(b, NULL, 1);
	tl_body_str(b, NULL, "two");
	tl_body_map(b, NULL);
	tl_body_end(b);
	tl_body_end(b);
	tl_body_end(b);
	ck_assert_int_eq(tl_body_finish(b, &p, len), 0);
	return p;
}

static void
assert_same(const struct tl_event *a, const struct tl_event *b,
    const void *body, size_t body_len)
{
	ck_assert_uint_eq(a->format ? a->format : TL_ENV_FORMAT, b->format);
	ck_assert_uint_eq(a->seq, b->seq);
	ck_assert_uint_eq(a->ts, b->ts);
	ck_assert_uint_eq(a->version, b->version);
	ck_assert_uint_eq(a->cause, b->cause);
	ck_assert_mem_eq(a->id, b->id, TL_ID_LEN);
	ck_assert_mem_eq(a->corr, b->corr, TL_ID_LEN);
	ck_assert_mem_eq(a->prev, b->prev, TL_HASH_LEN);
	ck_assert_str_eq(a->type, b->type);
	ck_assert_str_eq(a->stream, b->stream);
	ck_assert_str_eq(a->actor, b->actor);
	if (body == NULL) {
		ck_assert_uint_eq(b->body_len, 1);
		ck_assert_uint_eq(b->body[0], 0x80);
	} else {
		ck_assert_uint_eq(b->body_len, body_len);
		ck_assert_mem_eq(b->body, body, body_len);
	}
}

/*
 * Headers as tl_env_encode writes them decode on a fast path; written
 * any other way, on the general one.  The same header with its map
 * size as map16 instead of fixmap takes the general path: both must
 * give the same answer.
 */
static void
differential(const uint8_t *p, size_t len)
{
	struct tl_event a, b;
	char wa[TL_WHY_MAX], wb[TL_WHY_MAX];
	uint8_t *q;
	int ra, rb;

	if (len == 0 || p[0] != 0x8b)
		return;
	q = malloc(len + 2);
	ck_assert_ptr_nonnull(q);
	q[0] = 0xde;
	q[1] = 0x00;
	q[2] = 0x0b;
	memcpy(q + 3, p + 1, len - 1);
	ra = tl_env_decode(p, len, &a, wa);
	rb = tl_env_decode(q, len + 2, &b, wb);
	ck_assert_msg(ra == rb, "fast path %d (%s), general path %d (%s)",
	    ra, wa, rb, wb);
	if (ra == 0) {
		assert_same(&a, &b, a.body, a.body_len);
		ck_assert_uint_eq(b.raw_len, a.raw_len + 2);
	}
	free(q);
}

/* Encodes into an exactly sized heap buffer (so ASan sees overruns). */
static uint8_t *
encode(const struct tl_event *ev, const void *body, size_t body_len,
    size_t *lenp)
{
	uint8_t *p;
	size_t need, len;

	ck_assert_int_eq(tl_env_encode(ev, body, body_len, NULL, 0, &need),
	    TL_ETOOBIG);
	ck_assert_uint_gt(need, 0);
	p = malloc(need);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(tl_env_encode(ev, body, body_len, p, need, &len), 0);
	ck_assert_uint_eq(len, need);
	*lenp = len;
	return p;
}

static void
roundtrip(const struct tl_event *ev, const void *body, size_t body_len)
{
	struct tl_event out;
	char why[TL_WHY_MAX];
	uint8_t *p, *p2;
	size_t len, len2;
	int rc;

	p = encode(ev, body, body_len, &len);
	memset(&out, 0xa5, sizeof(out));
	rc = tl_env_decode(p, len, &out, why);
	ck_rc(rc, 0, why);
	assert_same(ev, &out, body, body_len);
	ck_assert_ptr_eq(out.raw, p);
	ck_assert_uint_eq(out.raw_len, len);
	ck_assert_ptr_eq(out.body + out.body_len, p + len);
	/* The encoding is canonical: the decoded event encodes the same. */
	p2 = encode(&out, out.body, out.body_len, &len2);
	ck_assert_uint_eq(len, len2);
	ck_assert_mem_eq(p, p2, len);
	free(p2);
	free(p);
}

START_TEST(test_roundtrip_plain)
{
	struct tl_event ev;
	struct tl_body b;
	const void *body;
	size_t blen;

	event_plain(&ev);
	roundtrip(&ev, NULL, 0);
	body = body_rich(&b, &blen);
	roundtrip(&ev, body, blen);
	tl_body_free(&b);
}
END_TEST

START_TEST(test_roundtrip_min)
{
	struct tl_event ev;

	event_min(&ev);
	roundtrip(&ev, NULL, 0);
	roundtrip(&ev, "\x80", 1);
	/* format 0 means "the current one" to the encoder. */
	ev.format = 0;
	roundtrip(&ev, NULL, 0);
}
END_TEST

START_TEST(test_roundtrip_max)
{
	struct tl_event ev;
	struct tl_body b;
	const void *body;
	size_t blen;

	event_max(&ev);
	roundtrip(&ev, NULL, 0);
	body = body_rich(&b, &blen);
	roundtrip(&ev, body, blen);
	tl_body_free(&b);
}
END_TEST

/* Integers and strings at every msgpack width boundary. */
START_TEST(test_roundtrip_widths)
{
	static const uint64_t ints[] = { 1, 0x7f, 0x80, 0xff, 0x100, 0xffff,
	    0x10000, 0xffffffffULL, 0x100000000ULL, UINT64_MAX - 1 };
	static const size_t lens[] = { 1, 31, 32, 63, 127, 255 };
	struct tl_event ev;
	size_t i, j;

	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		event_plain(&ev);
		ev.seq = ints[i] + 1;
		ev.ts = ints[i];
		ev.version = ints[i];
		ev.cause = ints[i];
		roundtrip(&ev, NULL, 0);
		ev.cause = 0;
		ev.seq = ints[i];
		roundtrip(&ev, NULL, 0);
	}
	for (j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
		event_plain(&ev);
		if (lens[j] <= TL_TYPE_MAX)
			fill(ev.type, lens[j], 'x');
		fill(ev.stream, lens[j], 'y');
		if (lens[j] <= TL_ACTOR_MAX)
			fill(ev.actor, lens[j], 'z');
		roundtrip(&ev, NULL, 0);
	}
}
END_TEST

/* A body of exactly TL_BODY_MAX bytes: {"b": bin32}. */
static uint8_t *
body_of(size_t total)
{
	uint8_t *p = malloc(total);
	size_t n = total - 8;

	ck_assert_ptr_nonnull(p);
	p[0] = 0x81;
	p[1] = 0xa1;
	p[2] = 'b';
	p[3] = 0xc6;
	p[4] = (uint8_t)(n >> 24);
	p[5] = (uint8_t)(n >> 16);
	p[6] = (uint8_t)(n >> 8);
	p[7] = (uint8_t)n;
	memset(p + 8, 0x5a, n);
	return p;
}

START_TEST(test_body_limit)
{
	struct tl_event ev;
	uint8_t *body, *buf;
	size_t len;

	event_plain(&ev);
	body = body_of(TL_BODY_MAX);
	ck_assert_int_eq(tl_env_check_map(body, TL_BODY_MAX), 0);
	roundtrip(&ev, body, TL_BODY_MAX);
	free(body);

	body = body_of(TL_BODY_MAX + 1);
	ck_assert_int_eq(tl_env_check_map(body, TL_BODY_MAX + 1), TL_ETOOBIG);
	ck_assert_int_eq(tl_env_encode(&ev, body, TL_BODY_MAX + 1, NULL, 0,
	    &len), TL_ETOOBIG);
	/* Hand-made, past the encoder: the decoder refuses it too. */
	{
		struct tl_event out;
		char why[TL_WHY_MAX];
		uint8_t *hdr;
		size_t hlen;
		int rc;

		hdr = encode(&ev, NULL, 0, &hlen);
		hlen--;			/* drop the empty body */
		buf = malloc(hlen + TL_BODY_MAX + 1);
		ck_assert_ptr_nonnull(buf);
		memcpy(buf, hdr, hlen);
		memcpy(buf + hlen, body, TL_BODY_MAX + 1);
		rc = tl_env_decode(buf, hlen + TL_BODY_MAX + 1, &out, why);
		ck_rc(rc, TL_ETOOBIG, why);
		free(buf);
		free(hdr);
	}
	free(body);
}
END_TEST

START_TEST(test_encode_limits)
{
	struct tl_event ev;
	uint8_t buf[1024];
	size_t len, need;

	event_plain(&ev);
	fill(ev.type, TL_TYPE_MAX + 1, 't');
	ck_assert_int_eq(tl_env_encode(&ev, NULL, 0, buf, sizeof(buf), &len),
	    TL_ETOOBIG);
	event_plain(&ev);
	ev.type[0] = '\0';
	ck_assert_int_ne(tl_env_encode(&ev, NULL, 0, buf, sizeof(buf), &len),
	    0);
	event_plain(&ev);
	/* The struct holds at most TL_STREAM_MAX: the encoder stops there. */
	memset(ev.stream, 's', sizeof(ev.stream));
	ck_assert_int_eq(tl_env_encode(&ev, NULL, 0, buf, sizeof(buf), &len),
	    TL_ETOOBIG);
	event_plain(&ev);
	ev.stream[0] = '\0';
	ck_assert_int_ne(tl_env_encode(&ev, NULL, 0, buf, sizeof(buf), &len),
	    0);
	event_plain(&ev);
	memset(ev.actor, 'a', sizeof(ev.actor));
	ck_assert_int_eq(tl_env_encode(&ev, NULL, 0, buf, sizeof(buf), &len),
	    TL_ETOOBIG);

	/* Too small a buffer: TL_ETOOBIG, the size needed, no overrun. */
	event_plain(&ev);
	ck_assert_int_eq(tl_env_encode(&ev, NULL, 0, buf, sizeof(buf), &need),
	    0);
	for (len = 0; len < need; len++) {
		uint8_t *p = malloc(len ? len : 1);
		size_t got = 0;

		ck_assert_int_eq(tl_env_encode(&ev, NULL, 0, p, len, &got),
		    TL_ETOOBIG);
		ck_assert_uint_eq(got, need);
		free(p);
	}
}
END_TEST

/*
 * Hand-made headers, to break one thing at a time.  Built with tl_body
 * (a canonical msgpack map writer), so an unmodified one is
 * byte-for-byte what tl_env_encode writes.
 */
struct mod {
	int		 omit;		/* field left out, -1: none */
	int		 dup;		/* field written twice, -1: none */
	int		 repl;		/* field whose value is raw, -1: none */
	const char	*raw;
	size_t		 raw_len;
	int		 extra;		/* unknown fields: 0 none, 1 first,
					   2 in the middle, 3 last */
};
#define MOD_NONE { -1, -1, -1, NULL, 0, 0 }

static void
extras(struct tl_body *b)
{
	tl_body_str(b, "zz.future", "a newer writer's field");
	tl_body_map(b, "x-new");
	tl_body_u64(b, "a", 1);
	tl_body_arr(b, "l");
	tl_body_nil(b, NULL);
	tl_body_secret(b, NULL, "s", 1);
	tl_body_map(b, NULL);
	tl_body_end(b);
	tl_body_end(b);
	tl_body_end(b);
	tl_body_i64(b, "neg", -5);
	tl_body_bin(b, "blob", "\0\1", 2);
	tl_body_str(b, "Seq", "not seq: keys are case-sensitive");
	tl_body_raw(b, "float", "\xcb\x40\x09\x21\xfb\x54\x44\x2d\x18", 9);
}

static void
put_field(struct tl_body *b, const struct tl_event *ev, int f)
{
	switch (f) {
	case F_FMT:	tl_body_u64(b, "fmt", ev->format); break;
	case F_SEQ:	tl_body_u64(b, "seq", ev->seq); break;
	case F_TS:	tl_body_u64(b, "ts", ev->ts); break;
	case F_TYPE:	tl_body_str(b, "type", ev->type); break;
	case F_STREAM:	tl_body_str(b, "stream", ev->stream); break;
	case F_VER:	tl_body_u64(b, "ver", ev->version); break;
	case F_ID:	tl_body_bin(b, "id", ev->id, TL_ID_LEN); break;
	case F_CAUSE:	tl_body_u64(b, "cause", ev->cause); break;
	case F_CORR:	tl_body_bin(b, "corr", ev->corr, TL_ID_LEN); break;
	case F_ACTOR:	tl_body_str(b, "actor", ev->actor); break;
	case F_PREV:	tl_body_bin(b, "prev", ev->prev, TL_HASH_LEN); break;
	}
}

/* Returns a malloc'd header + body; *lenp its length. */
static uint8_t *
craft(const struct tl_event *ev, const struct mod *m, const void *body,
    size_t body_len, size_t *lenp)
{
	struct tl_body b;
	const void *h;
	size_t hlen;
	uint8_t *p;
	int f;

	if (body == NULL) {
		body = "\x80";
		body_len = 1;
	}
	tl_body_init(&b);
	if (m->extra == 1)
		extras(&b);
	for (f = 0; f < F_N; f++) {
		if (f == m->omit)
			continue;
		if (f == m->repl)
			tl_body_raw(&b, fname[f], m->raw, m->raw_len);
		else
			put_field(&b, ev, f);
		if (f == m->dup)
			put_field(&b, ev, f);
		if (f == F_STREAM && m->extra == 2)
			extras(&b);
	}
	if (m->extra == 3)
		extras(&b);
	ck_assert_int_eq(tl_body_finish(&b, &h, &hlen), 0);
	p = malloc(hlen + body_len);
	ck_assert_ptr_nonnull(p);
	memcpy(p, h, hlen);
	memcpy(p + hlen, body, body_len);
	tl_body_free(&b);
	*lenp = hlen + body_len;
	return p;
}

/* Decodes buf[0..len) from an exact heap copy; returns the result. */
static int
decode_copy(const void *buf, size_t len, struct tl_event *ev, char *why)
{
	uint8_t *p = malloc(len ? len : 1);
	int rc;

	ck_assert_ptr_nonnull(p);
	memcpy(p, buf, len);
	rc = tl_env_decode(p, len, ev, why);
	free(p);
	return rc;
}

static int
decode_mod(const struct mod *m, const void *body, size_t body_len,
    char *why)
{
	struct tl_event ev, out;
	uint8_t *p;
	size_t len;
	int rc;

	event_plain(&ev);
	p = craft(&ev, m, body, body_len, &len);
	rc = decode_copy(p, len, &out, why);
	free(p);
	return rc;
}

/* tl_env_encode writes exactly what msgpack-c's packer would. */
static void
craft_is_encode(const struct tl_event *ev)
{
	struct mod m = MOD_NONE;
	uint8_t *a, *b;
	size_t alen, blen;

	a = encode(ev, NULL, 0, &alen);
	b = craft(ev, &m, NULL, 0, &blen);
	ck_assert_uint_eq(alen, blen);
	ck_assert_mem_eq(a, b, alen);
	free(a);
	free(b);
}

START_TEST(test_craft_is_encode)
{
	static const uint64_t ints[] = { 1, 0x7f, 0x80, 0xff, 0x100, 0xffff,
	    0x10000, 0xffffffffULL, 0x100000000ULL, UINT64_MAX - 1 };
	static const size_t lens[] = { 1, 31, 32, 63, 127, 255 };
	struct tl_event ev;
	size_t i;

	event_plain(&ev);
	craft_is_encode(&ev);
	event_min(&ev);
	craft_is_encode(&ev);
	event_max(&ev);
	craft_is_encode(&ev);
	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		event_plain(&ev);
		ev.seq = ints[i] + 1;
		ev.ts = ints[i];
		ev.version = ints[i];
		ev.cause = ints[i];
		ev.format = (uint32_t)(ints[i] > 0xffffffffu ? 7 : ints[i]);
		craft_is_encode(&ev);
	}
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		event_plain(&ev);
		if (lens[i] <= TL_TYPE_MAX)
			fill(ev.type, lens[i], 'x');
		fill(ev.stream, lens[i], 'y');
		if (lens[i] <= TL_ACTOR_MAX)
			fill(ev.actor, lens[i], 'z');
		craft_is_encode(&ev);
	}
}
END_TEST

/* Every prefix of a valid encoding is refused, without reading past it. */
static void
truncations(const struct tl_event *ev, const void *body, size_t body_len)
{
	struct tl_event out;
	char why[TL_WHY_MAX];
	uint8_t *p;
	size_t len, n;
	int rc;

	p = encode(ev, body, body_len, &len);
	for (n = 0; n < len; n++) {
		why[0] = 'X';
		why[1] = '\0';
		rc = decode_copy(p, n, &out, why);
		ck_assert_msg(rc == TL_EMALFORMED, "prefix %zu of %zu: rc %d "
		    "(%s) why %s", n, len, rc, tl_strerror(rc), why);
		ck_assert_msg(why[0] != '\0' && strcmp(why, "X") != 0,
		    "prefix %zu: no reason given", n);
	}
	rc = decode_copy(p, len, &out, why);
	ck_rc(rc, 0, why);
	differential(p, len);
	free(p);
}

START_TEST(test_truncated)
{
	struct tl_event ev;
	struct tl_body b;
	const void *body;
	size_t blen;

	body = body_rich(&b, &blen);
	event_min(&ev);
	truncations(&ev, NULL, 0);
	event_plain(&ev);
	truncations(&ev, body, blen);
	event_max(&ev);
	truncations(&ev, body, blen);
	tl_body_free(&b);
}
END_TEST

struct wrong {
	int		 field;
	const char	*raw;
	size_t		 len;
	int		 want;
};
#define W(f, s, want)	{ f, s, sizeof(s) - 1, want }

/* Values of the wrong type or out of range, field by field. */
static const struct wrong wrongs[] = {
	/* integers */
	W(F_SEQ, "\xa1" "1", TL_EMALFORMED),		/* a string */
	W(F_SEQ, "\xc0", TL_EMALFORMED),		/* nil */
	W(F_SEQ, "\xff", TL_EMALFORMED),		/* -1 */
	W(F_SEQ, "\xd3\xff\xff\xff\xff\xff\xff\xff\xfe", TL_EMALFORMED),
	W(F_SEQ, "\xcb\x40\x45\x00\x00\x00\x00\x00\x00", TL_EMALFORMED),
	W(F_SEQ, "\xc3", TL_EMALFORMED),		/* true */
	W(F_SEQ, "\x91\x2a", TL_EMALFORMED),		/* [42] */
	W(F_SEQ, "\x81\xa1" "a\x2a", TL_EMALFORMED),	/* {a: 42} */
	W(F_SEQ, "\xc4\x01\x2a", TL_EMALFORMED),	/* bin */
	W(F_SEQ, "\xd4\x01\x2a", TL_EMALFORMED),	/* fixext */
	W(F_SEQ, "\x00", TL_EMALFORMED),		/* seq 0 */
	W(F_SEQ, "\x29", TL_EMALFORMED),		/* 41 = cause */
	W(F_SEQ, "\x28", TL_EMALFORMED),		/* 40 < cause */
	W(F_TS, "\xa1" "1", TL_EMALFORMED),
	W(F_TS, "\xff", TL_EMALFORMED),
	W(F_TS, "\xc0", TL_EMALFORMED),
	W(F_VER, "\xa1" "1", TL_EMALFORMED),
	W(F_VER, "\x00", TL_EMALFORMED),		/* version 0 */
	W(F_VER, "\xe0", TL_EMALFORMED),		/* -32 */
	W(F_CAUSE, "\xa1" "1", TL_EMALFORMED),
	W(F_CAUSE, "\xff", TL_EMALFORMED),
	W(F_CAUSE, "\x2a", TL_EMALFORMED),		/* 42 = seq */
	W(F_CAUSE, "\xcf\xff\xff\xff\xff\xff\xff\xff\xff", TL_EMALFORMED),
	W(F_FMT, "\xa1" "1", TL_EMALFORMED),
	W(F_FMT, "\x00", TL_EMALFORMED),		/* no format */
	W(F_FMT, "\xff", TL_EMALFORMED),
	W(F_FMT, "\xc0", TL_EMALFORMED),
	W(F_FMT, "\x02", TL_ENEWER),
	W(F_FMT, "\xcc\x80", TL_ENEWER),
	W(F_FMT, "\xcf\xff\xff\xff\xff\xff\xff\xff\xff", TL_ENEWER),
	/* strings */
	W(F_TYPE, "\x01", TL_EMALFORMED),
	W(F_TYPE, "\xc4\x01" "t", TL_EMALFORMED),	/* bin, not str */
	W(F_TYPE, "\xc0", TL_EMALFORMED),
	W(F_TYPE, "\x91\xa1" "t", TL_EMALFORMED),
	W(F_TYPE, "\xa0", TL_EMALFORMED),		/* empty */
	W(F_TYPE, "\xa3" "a\0b", TL_EMALFORMED),	/* a NUL */
	W(F_STREAM, "\x01", TL_EMALFORMED),
	W(F_STREAM, "\xc4\x01" "s", TL_EMALFORMED),
	W(F_STREAM, "\xa0", TL_EMALFORMED),
	W(F_STREAM, "\xa2" "\0s", TL_EMALFORMED),
	W(F_ACTOR, "\x01", TL_EMALFORMED),
	W(F_ACTOR, "\xc0", TL_EMALFORMED),
	W(F_ACTOR, "\xa2" "a\0", TL_EMALFORMED),
	/* ids and hashes */
	W(F_ID, "\xb0" "0123456789abcdef", TL_EMALFORMED),	/* a str */
	W(F_ID, "\xc4\x0f" "0123456789abcde", TL_EMALFORMED),	/* 15 */
	W(F_ID, "\xc4\x11" "0123456789abcdefg", TL_EMALFORMED),	/* 17 */
	W(F_ID, "\xc4\x00", TL_EMALFORMED),
	W(F_ID, "\x01", TL_EMALFORMED),
	W(F_CORR, "\xc4\x0f" "0123456789abcde", TL_EMALFORMED),
	W(F_CORR, "\xc0", TL_EMALFORMED),
	W(F_PREV, "\xc4\x10" "0123456789abcdef", TL_EMALFORMED),
	W(F_PREV, "\xc4\x21" "0123456789abcdef0123456789abcdefX",
	    TL_EMALFORMED),
	W(F_PREV, "\xd8\x00" "0123456789abcdef", TL_EMALFORMED),
	/* oversized */
	W(F_TYPE, "\xd9\x40" "0123456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef", TL_ETOOBIG),
	W(F_ACTOR, "\xd9\x80" "0123456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef", TL_ETOOBIG),
	/* values that are fine, written other ways than the encoder's */
	W(F_SEQ, "\xd0\x2a", 0),			/* int8 42 */
	W(F_SEQ, "\xcf\x00\x00\x00\x00\x00\x00\x00\x2a", 0),
	W(F_TYPE, "\xd9\x01" "t", 0),			/* str8 */
	W(F_TYPE, "\xdb\x00\x00\x00\x01" "t", 0),	/* str32 */
	W(F_ACTOR, "\xa0", 0),				/* no actor */
	W(F_ID, "\xc5\x00\x10" "0123456789abcdef", 0),	/* bin16 */
	W(F_FMT, "\xd0\x01", 0),
};

START_TEST(test_wrong_types)
{
	const struct wrong *w = &wrongs[_i];
	struct mod m = MOD_NONE;
	char why[TL_WHY_MAX];
	int rc;

	m.repl = w->field;
	m.raw = w->raw;
	m.raw_len = w->len;
	why[0] = '\0';
	rc = decode_mod(&m, NULL, 0, why);
	ck_assert_msg(rc == w->want, "#%d field %s: rc %d (%s), wanted %d; "
	    "why: %s", _i, fname[w->field], rc, tl_strerror(rc), w->want,
	    why);
	if (rc != 0)
		ck_assert_msg(why[0] != '\0', "#%d: no reason", _i);
}
END_TEST

START_TEST(test_oversized_stream)
{
	struct mod m = MOD_NONE;
	char raw[3 + TL_STREAM_MAX + 1], why[TL_WHY_MAX];
	int rc;

	/* str16 of 256 bytes */
	raw[0] = (char)0xda;
	raw[1] = 0x01;
	raw[2] = 0x00;
	memset(raw + 3, 's', TL_STREAM_MAX + 1);
	m.repl = F_STREAM;
	m.raw = raw;
	m.raw_len = sizeof(raw);
	rc = decode_mod(&m, NULL, 0, why);
	ck_rc(rc, TL_ETOOBIG, why);
	/* 255 is fine. */
	raw[1] = 0;
	raw[2] = (char)0xff;
	m.raw_len--;
	rc = decode_mod(&m, NULL, 0, why);
	ck_rc(rc, 0, why);
}
END_TEST

START_TEST(test_missing_field)
{
	struct mod m = MOD_NONE;
	char why[TL_WHY_MAX];
	int rc;

	m.omit = _i;
	rc = decode_mod(&m, NULL, 0, why);
	ck_assert_msg(rc == TL_EMALFORMED, "without %s: rc %d (%s)",
	    fname[_i], rc, tl_strerror(rc));
}
END_TEST

START_TEST(test_duplicate_field)
{
	struct mod m = MOD_NONE;
	char why[TL_WHY_MAX];
	int rc;

	m.dup = _i;
	rc = decode_mod(&m, NULL, 0, why);
	ck_assert_msg(rc == TL_EMALFORMED, "%s twice: rc %d (%s)",
	    fname[_i], rc, tl_strerror(rc));
}
END_TEST

/* A newer writer's extra header fields are skipped, wherever they are. */
START_TEST(test_unknown_fields)
{
	struct tl_event ev, out;
	struct mod m = MOD_NONE;
	struct tl_body b;
	const void *body;
	char why[TL_WHY_MAX];
	uint8_t *p;
	size_t len, blen;
	int rc;

	body = body_rich(&b, &blen);
	event_plain(&ev);
	for (m.extra = 1; m.extra <= 3; m.extra++) {
		p = craft(&ev, &m, body, blen, &len);
		rc = tl_env_decode(p, len, &out, why);
		ck_rc(rc, 0, why);
		assert_same(&ev, &out, body, blen);
		free(p);
	}
	tl_body_free(&b);
}
END_TEST

/* A newer format is refused as such, even with fields we do not know. */
START_TEST(test_newer_format)
{
	struct tl_event ev, out;
	struct mod m = MOD_NONE;
	char why[TL_WHY_MAX];
	uint8_t *p;
	size_t len;
	int rc;

	event_plain(&ev);
	ev.format = TL_ENV_FORMAT + 1;
	m.extra = 2;
	m.omit = F_PREV;	/* a newer format may drop fields, too */
	p = craft(&ev, &m, NULL, 0, &len);
	rc = decode_copy(p, len, &out, why);
	ck_rc(rc, TL_ENEWER, why);
	ck_assert_ptr_nonnull(strstr(why, "newer"));
	free(p);
	/* fmt need not come first. */
	m.omit = F_FMT;
	m.extra = 3;
	{
		uint8_t *q;
		size_t qlen;

		p = craft(&ev, &m, NULL, 0, &qlen);
		/* bump the map size, then append "fmt": 2 before the body */
		q = malloc(qlen + 5);
		ck_assert_ptr_nonnull(q);
		ck_assert_uint_eq(p[0], 0xde);	/* map16: 10 + 6 extras */
		memcpy(q, p, qlen - 1);
		q[2]++;
		memcpy(q + qlen - 1, "\xa3" "fmt\x02\x80", 6);
		rc = decode_copy(q, qlen + 5, &out, why);
		ck_rc(rc, TL_ENEWER, why);
		free(q);
		free(p);
	}
}
END_TEST

struct rawcase {
	const char	*name;
	const char	*raw;
	size_t		 len;
};
#define R(n, s)	{ n, s, sizeof(s) - 1 }

/* Whole records that are not events. */
static const struct rawcase raws[] = {
	R("empty", ""),
	R("nil", "\xc0"),
	R("an array", "\x9b\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x80"),
	R("a string", "\xa3" "fmt\x80"),
	R("an empty header", "\x80\x80"),
	R("a reserved byte", "\xc1\x80"),
	R("a non-string key", "\x81\x01\x01\x80"),
	R("fmt only", "\x81\xa3" "fmt\x01\x80"),
	R("huge array in a header", "\x81\xa1" "x\xdd\xff\xff\xff\xff"),
	R("huge map in a header", "\x81\xa1" "x\xdf\xff\xff\xff\xff"),
	R("huge header", "\xdf\xff\xff\xff\xff"),
	R("huge str", "\x81\xa1" "x\xdb\xff\xff\xff\xff"),
	R("huge bin", "\x81\xa1" "x\xc6\xff\xff\xff\xff"),
	R("huge ext", "\x81\xa1" "x\xc9\xff\xff\xff\xff\x01"),
	R("map16 short", "\xde\x00"),
	R("array16 short", "\x81\xa1" "x\xdc\x00"),
};

START_TEST(test_not_events)
{
	const struct rawcase *c = &raws[_i];
	struct tl_event out;
	char why[TL_WHY_MAX];
	int rc;

	rc = decode_copy(c->raw, c->len, &out, why);
	ck_assert_msg(rc == TL_EMALFORMED, "%s: rc %d (%s)", c->name, rc,
	    tl_strerror(rc));
	ck_assert_msg(why[0] != '\0', "%s: no reason", c->name);
}
END_TEST

/* Bodies that are not one map filling the rest of the record. */
static const struct rawcase bad_bodies[] = {
	R("no body", ""),
	R("an array", "\x90"),
	R("a string", "\xa1" "x"),
	R("nil", "\xc0"),
	R("two maps", "\x80\x80"),
	R("a trailing byte", "\x81\xa1" "a\x01\x00"),
	R("truncated map", "\x82\xa1" "a\x01"),
	R("truncated str", "\x81\xa1" "a\xa5" "abc"),
	R("a reserved byte", "\x81\xa1" "a\xc1"),
	R("huge array", "\x81\xa1" "a\xdd\xff\xff\xff\xff"),
	R("huge map", "\x81\xa1" "a\xdf\x7f\xff\xff\xff"),
	R("huge map16", "\xde\xff\xff"),
	R("huge str32", "\x81\xa1" "a\xdb\x7f\xff\xff\xff" "abc"),
	R("ext8 short", "\x81\xa1" "a\xc7\x05\x01" "ab"),
	R("fixext16 short", "\x81\xa1" "a\xd8\x01" "abc"),
	R("float64 short", "\x81\xa1" "a\xcb\x00\x00"),
	R("uint64 short", "\x81\xa1" "a\xcf\x00"),
};

START_TEST(test_bad_bodies)
{
	const struct rawcase *c = &bad_bodies[_i];
	struct mod m = MOD_NONE;
	char why[TL_WHY_MAX];
	int rc;

	rc = decode_mod(&m, c->raw, c->len, why);
	ck_assert_msg(rc == TL_EMALFORMED, "%s: rc %d (%s)", c->name, rc,
	    tl_strerror(rc));
	ck_assert_int_ne(tl_env_check_map(c->raw, c->len), 0);
}
END_TEST

/* Deep nesting: as deep as msgpack-c reads is fine, deeper is refused. */
START_TEST(test_deep_body)
{
	struct mod m = MOD_NONE;
	char why[TL_WHY_MAX];
	uint8_t body[200];
	size_t n, depth;
	int rc;

	for (depth = 1; depth <= 40; depth++) {
		/* depth non-empty maps {"a":{"a":...{"a":1}}} */
		n = 0;
		for (size_t d = 0; d < depth; d++) {
			body[n++] = 0x81;
			body[n++] = 0xa1;
			body[n++] = 'a';
		}
		body[n++] = 0x01;
		rc = decode_mod(&m, body, n, why);
		if (depth <= 32) {
			ck_rc(rc, 0, why);
			ck_assert_int_eq(tl_env_check_map(body, n), 0);
			/* whatever decodes, the body reader can open */
			{
				struct tl_bview v;

				ck_assert_int_eq(tl_bview_open(&v, body, n), 0);
				tl_bview_close(&v);
			}
		} else {
			ck_rc(rc, TL_EMALFORMED, why);
			ck_assert_int_ne(tl_env_check_map(body, n), 0);
		}
	}
}
END_TEST

START_TEST(test_check_map)
{
	struct tl_body b;
	const void *p;
	size_t len;

	ck_assert_int_eq(tl_env_check_map("\x80", 1), 0);
	ck_assert_int_eq(tl_env_check_map("\x81\xa1" "a\x01", 4), 0);
	ck_assert_int_eq(tl_env_check_map("\xde\x00\x00", 3), 0);
	ck_assert_int_eq(tl_env_check_map("", 0), TL_EMALFORMED);
	ck_assert_int_eq(tl_env_check_map("\x90", 1), TL_EMALFORMED);
	ck_assert_int_eq(tl_env_check_map("\x80\x80", 2), TL_EMALFORMED);
	ck_assert_int_eq(tl_env_check_map("\x81\xa1" "a", 3), TL_EMALFORMED);
	p = body_rich(&b, &len);
	ck_assert_int_eq(tl_env_check_map(p, len), 0);
	ck_assert_int_eq(tl_env_check_map(p, len - 1), TL_EMALFORMED);
	tl_body_free(&b);
}
END_TEST

/*
 * Random bytes and random damage to valid encodings: never a crash
 * (ASan watches), always a documented result, and whatever decodes
 * survives a round trip.
 */
static void
fuzz_one(const uint8_t *buf, size_t len, int must_fail)
{
	struct tl_event ev, ev2;
	char why[TL_WHY_MAX];
	uint8_t *p, *q;
	size_t qlen;
	int rc;

	p = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(p);
	memcpy(p, buf, len);
	rc = tl_env_decode(p, len, &ev, why);
	ck_assert_msg(rc == 0 || rc == TL_EMALFORMED || rc == TL_ETOOBIG ||
	    rc == TL_ENEWER, "rc %d", rc);
	(void)tl_env_check_map(p, len);
	if (must_fail)
		ck_assert_msg(rc != 0, "random bytes decoded");
	differential(p, len);
	if (rc == 0) {
		q = encode(&ev, ev.body, ev.body_len, &qlen);
		rc = tl_env_decode(q, qlen, &ev2, why);
		ck_rc(rc, 0, why);
		assert_same(&ev, &ev2, ev.body, ev.body_len);
		free(q);
	} else
		ck_assert(why[0] != '\0');
	free(p);
}

START_TEST(test_random_bytes)
{
	uint64_t seed = tl_test_seed("test_random_bytes"), s = seed;
	uint8_t buf[512];
	int i;
	size_t len, j;

	for (i = 0; i < 100000; i++) {
		len = tl_test_rand(&s) % sizeof(buf);
		for (j = 0; j < len; j++)
			buf[j] = (uint8_t)tl_test_rand(&s);
		/* Half of them start like a header, to get further in. */
		if (len > 0 && (i & 1))
			buf[0] = 0x8b;
		fuzz_one(buf, len, 1);
	}
}
END_TEST

START_TEST(test_random_damage)
{
	uint64_t seed = tl_test_seed("test_random_damage"), s = seed;
	struct tl_event ev;
	struct tl_body b;
	const void *body;
	uint8_t *p, *q;
	size_t len, blen, k, nflip;
	int i, decoded = 0;

	body = body_rich(&b, &blen);
	event_plain(&ev);
	p = encode(&ev, body, blen, &len);
	q = malloc(len);
	ck_assert_ptr_nonnull(q);
	for (i = 0; i < 50000; i++) {
		memcpy(q, p, len);
		nflip = 1 + tl_test_rand(&s) % 4;
		for (k = 0; k < nflip; k++)
			q[tl_test_rand(&s) % len] = (uint8_t)tl_test_rand(&s);
		fuzz_one(q, len, 0);
		{
			struct tl_event out;

			decoded += tl_env_decode(q, len, &out, NULL) == 0;
		}
	}
	/* Damage to ids and strings still decodes: the test saw both. */
	ck_assert_int_gt(decoded, 0);
	ck_assert_int_lt(decoded, 50000);
	free(q);
	free(p);
	tl_body_free(&b);
}
END_TEST

static char *
srcpath(const char *rel)
{
	const char *src = getenv("TALLY_SRC");

	return tl_test_path(src && *src ? src : ".", rel);
}

/*
 * Every file in tests/data/envelope/: ok-* must decode, bad-* must
 * not; anything else (crash-*, oom-*, timeout-* from the fuzzer) must
 * just be handled, and survive a round trip if it decodes.
 */
START_TEST(test_regressions)
{
	char *dir = srcpath("tests/data/envelope");
	DIR *d;
	struct dirent *de;
	int nfiles = 0;

	d = opendir(dir);
	ck_assert_msg(d != NULL, "cannot open %s", dir);
	while ((de = readdir(d)) != NULL) {
		char *path;
		FILE *fp;
		uint8_t *buf;
		long n;
		struct tl_event ev;
		char why[TL_WHY_MAX];
		int rc;

		if (de->d_name[0] == '.')
			continue;
		path = tl_test_path(dir, de->d_name);
		fp = fopen(path, "rb");
		ck_assert_ptr_nonnull(fp);
		fseek(fp, 0, SEEK_END);
		n = ftell(fp);
		rewind(fp);
		buf = malloc(n ? (size_t)n : 1);
		ck_assert_ptr_nonnull(buf);
		ck_assert_uint_eq(fread(buf, 1, (size_t)n, fp), (size_t)n);
		fclose(fp);
		rc = tl_env_decode(buf, (size_t)n, &ev, why);
		if (strncmp(de->d_name, "ok-", 3) == 0)
			ck_assert_msg(rc == 0, "%s: rc %d (%s) %s", de->d_name,
			    rc, tl_strerror(rc), why);
		else if (strncmp(de->d_name, "bad-", 4) == 0)
			ck_assert_msg(rc != 0, "%s decoded", de->d_name);
		fuzz_one(buf, (size_t)n, 0);
		free(buf);
		free(path);
		nfiles++;
	}
	closedir(d);
	ck_assert_int_gt(nfiles, 0);
	free(dir);
}
END_TEST

/* The fuzzing seeds are valid; with TL_ENV_CORPUS_OUT, (re)write them. */
START_TEST(test_seeds)
{
	const char *out = getenv("TL_ENV_CORPUS_OUT");
	char *dir = srcpath("tests/fuzz/corpus/envelope");
	struct tl_event evs[4];
	struct tl_body b;
	const void *body;
	size_t blen;
	int i, nfiles = 0;
	DIR *d;
	struct dirent *de;

	body = body_rich(&b, &blen);
	event_min(&evs[0]);
	event_plain(&evs[1]);
	event_max(&evs[2]);
	event_plain(&evs[3]);
	evs[3].cause = 0;
	evs[3].actor[0] = '\0';
	for (i = 0; out != NULL && i < 8; i++) {
		char name[64], *path;
		uint8_t *p;
		size_t len;
		FILE *fp;

		p = encode(&evs[i % 4], i < 4 ? NULL : body, i < 4 ? 0 : blen,
		    &len);
		snprintf(name, sizeof(name), "seed-%d", i);
		path = tl_test_path(out, name);
		fp = fopen(path, "wb");
		ck_assert_ptr_nonnull(fp);
		ck_assert_uint_eq(fwrite(p, 1, len, fp), len);
		fclose(fp);
		free(path);
		free(p);
	}
	/* And two for the general path: unknown fields, a map16 header. */
	for (i = 8; out != NULL && i < 10; i++) {
		struct mod m = MOD_NONE;
		char name[64], *path;
		uint8_t *p, *q;
		size_t len;
		FILE *fp;

		m.extra = 2;
		if (i == 8)
			p = craft(&evs[1], &m, body, blen, &len);
		else {
			q = encode(&evs[1], NULL, 0, &len);
			p = malloc(len + 2);
			ck_assert_ptr_nonnull(p);
			memcpy(p, "\xde\x00\x0b", 3);
			memcpy(p + 3, q + 1, len - 1);
			len += 2;
			free(q);
		}
		snprintf(name, sizeof(name), "seed-%d", i);
		path = tl_test_path(out, name);
		fp = fopen(path, "wb");
		ck_assert_ptr_nonnull(fp);
		ck_assert_uint_eq(fwrite(p, 1, len, fp), len);
		fclose(fp);
		free(path);
		free(p);
	}
	tl_body_free(&b);

	d = opendir(dir);
	ck_assert_msg(d != NULL, "cannot open %s", dir);
	while ((de = readdir(d)) != NULL) {
		char *path, why[TL_WHY_MAX];
		uint8_t buf[4096];
		size_t n;
		FILE *fp;
		struct tl_event ev;
		int rc;

		if (strncmp(de->d_name, "seed-", 5) != 0)
			continue;
		path = tl_test_path(dir, de->d_name);
		fp = fopen(path, "rb");
		ck_assert_ptr_nonnull(fp);
		n = fread(buf, 1, sizeof(buf), fp);
		fclose(fp);
		rc = decode_copy(buf, n, &ev, why);
		ck_assert_msg(rc == 0, "%s: %s", de->d_name, why);
		free(path);
		nfiles++;
	}
	closedir(d);
	ck_assert_int_gt(nfiles, 0);
	free(dir);
}
END_TEST

static Suite *
envelope_suite(void)
{
	Suite *s = suite_create("envelope");
	TCase *tc;

	tc = tcase_create("roundtrip");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_roundtrip_plain);
	tcase_add_test(tc, test_roundtrip_min);
	tcase_add_test(tc, test_roundtrip_max);
	tcase_add_test(tc, test_roundtrip_widths);
	tcase_add_test(tc, test_body_limit);
	tcase_add_test(tc, test_encode_limits);
	tcase_add_test(tc, test_craft_is_encode);
	tcase_add_test(tc, test_unknown_fields);
	tcase_add_test(tc, test_seeds);
	suite_add_tcase(s, tc);

	tc = tcase_create("malformed");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_truncated);
	tcase_add_loop_test(tc, test_wrong_types, 0,
	    (int)(sizeof(wrongs) / sizeof(wrongs[0])));
	tcase_add_test(tc, test_oversized_stream);
	tcase_add_loop_test(tc, test_missing_field, 0, F_N);
	tcase_add_loop_test(tc, test_duplicate_field, 0, F_N);
	tcase_add_test(tc, test_newer_format);
	tcase_add_loop_test(tc, test_not_events, 0,
	    (int)(sizeof(raws) / sizeof(raws[0])));
	tcase_add_loop_test(tc, test_bad_bodies, 0,
	    (int)(sizeof(bad_bodies) / sizeof(bad_bodies[0])));
	tcase_add_test(tc, test_deep_body);
	tcase_add_test(tc, test_check_map);
	suite_add_tcase(s, tc);

	tc = tcase_create("random");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_random_bytes);
	tcase_add_test(tc, test_random_damage);
	tcase_add_test(tc, test_regressions);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(envelope_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
