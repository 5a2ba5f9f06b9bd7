/*
 * envelope.c - encoding and validating one event (msgpack, by hand).
 */
#include <stdio.h>
#include <string.h>

#include "envelope.h"
#include "error.h"
#include "mp.h"

/*
 * Writing: the header is small and fixed in shape, so it is written
 * here directly, with the smallest msgpack form of every value (the
 * same bytes msgpack-c's packer writes), after its size is known.
 */
static size_t
uint_len(uint64_t v)
{
	return v < 0x80 ? 1 : v <= 0xff ? 2 : v <= 0xffff ? 3 :
	    v <= 0xffffffffULL ? 5 : 9;
}

static size_t
str_len(size_t n)
{
	return (n < 32 ? 1 : n <= 0xff ? 2 : n <= 0xffff ? 3 : 5) + n;
}

/* For ids and hashes: always under 256 bytes. */
static uint8_t *
put_bin8(uint8_t *p, const uint8_t *b, size_t n)
{
	*p++ = 0xc4;
	*p++ = (uint8_t)n;
	memcpy(p, b, n);
	return p + n;
}

#define HDR_KEYS_LEN	(sizeof("\xa3" "fmt" "\xa3" "seq" "\xa2" "ts"	\
	"\xa4" "type" "\xa6" "stream" "\xa3" "ver" "\xa2" "id" "\xa5" "cause"	\
	"\xa4" "corr" "\xa5" "actor" "\xa4" "prev") - 1)
#define PUT_KEY(p, lit)	(memcpy((p), (lit), sizeof(lit) - 1),		\
	(p) + sizeof(lit) - 1)

int
tl_env_encode(const struct tl_event *ev, const void *body, size_t body_len,
    uint8_t *out, size_t cap, size_t *lenp)
{
	static const uint8_t empty_map = 0x80;
	uint64_t fmt = ev->format ? ev->format : TL_ENV_FORMAT;
	size_t tl, sl, al, len;
	uint8_t *p;

	tl = strnlen(ev->type, TL_TYPE_MAX + 1);
	sl = strnlen(ev->stream, TL_STREAM_MAX + 1);
	al = strnlen(ev->actor, TL_ACTOR_MAX + 1);
	if (tl == 0 || sl == 0 || tl > TL_TYPE_MAX || sl > TL_STREAM_MAX ||
	    al > TL_ACTOR_MAX)
		return TL_ETOOBIG;
	if (body == NULL) {
		body = &empty_map;
		body_len = 1;
	}
	if (body_len > TL_BODY_MAX)
		return TL_ETOOBIG;

	/* The map, the keys, the values, the body. */
	len = 1 + HDR_KEYS_LEN + uint_len(fmt) + uint_len(ev->seq) +
	    uint_len(ev->ts) + str_len(tl) + str_len(sl) + uint_len(ev->version) +
	    2 + TL_ID_LEN + uint_len(ev->cause) + 2 + TL_ID_LEN +
	    str_len(al) + 2 + TL_HASH_LEN + body_len;
	*lenp = len;
	if (len > cap)
		return TL_ETOOBIG;

	p = out;
	*p++ = 0x8b;					/* a map of 11 */
	p = PUT_KEY(p, "\xa3" "fmt");
	p = tl_mp_put_uint(p, fmt);
	p = PUT_KEY(p, "\xa3" "seq");
	p = tl_mp_put_uint(p, ev->seq);
	p = PUT_KEY(p, "\xa2" "ts");
	p = tl_mp_put_uint(p, ev->ts);
	p = PUT_KEY(p, "\xa4" "type");
	p = tl_mp_put_str(p, ev->type, tl);
	p = PUT_KEY(p, "\xa6" "stream");
	p = tl_mp_put_str(p, ev->stream, sl);
	p = PUT_KEY(p, "\xa3" "ver");
	p = tl_mp_put_uint(p, ev->version);
	p = PUT_KEY(p, "\xa2" "id");
	p = put_bin8(p, ev->id, TL_ID_LEN);
	p = PUT_KEY(p, "\xa5" "cause");
	p = tl_mp_put_uint(p, ev->cause);
	p = PUT_KEY(p, "\xa4" "corr");
	p = put_bin8(p, ev->corr, TL_ID_LEN);
	p = PUT_KEY(p, "\xa5" "actor");
	p = tl_mp_put_str(p, ev->actor, al);
	p = PUT_KEY(p, "\xa4" "prev");
	p = put_bin8(p, ev->prev, TL_HASH_LEN);
	memcpy(p, body, body_len);
	return 0;
}

/* Header keys, so that decoding can tell which ones were seen. */
enum {
	K_FMT = 1 << 0, K_SEQ = 1 << 1, K_TS = 1 << 2, K_TYPE = 1 << 3,
	K_STREAM = 1 << 4, K_VER = 1 << 5, K_ID = 1 << 6, K_CAUSE = 1 << 7,
	K_CORR = 1 << 8, K_ACTOR = 1 << 9, K_PREV = 1 << 10,
	K_ALL = (1 << 11) - 1
};

static int
key_is(const struct tl_mp_item *k, const char *s, size_t n)
{
	return k->len == n && memcmp(k->ptr, s, n) == 0;
}
#define KEY_IS(k, lit)	key_is((k), (lit), sizeof(lit) - 1)

#define FAIL(code, ...) do {						\
	if (why != NULL)						\
		snprintf(why, TL_WHY_MAX, __VA_ARGS__);			\
	return (code);							\
} while (0)

static int
get_u64(const struct tl_mp_item *v, uint64_t *out)
{
	if (v->kind != TL_MP_UINT)
		return -1;
	*out = v->u;
	return 0;
}

static int
get_str(const struct tl_mp_item *v, char *out, size_t max, int allow_empty)
{
	if (v->kind != TL_MP_STR)
		return -1;
	if (v->len > max)
		return -2;
	if (v->len == 0 && !allow_empty)
		return -1;
	if (memchr(v->ptr, '\0', v->len) != NULL)
		return -1;
	memcpy(out, v->ptr, v->len);
	out[v->len] = '\0';
	return 0;
}

static int
get_bin(const struct tl_mp_item *v, uint8_t *out, size_t n)
{
	if (v->kind != TL_MP_BIN || v->len != n)
		return -1;
	memcpy(out, v->ptr, n);
	return 0;
}

int
tl_env_check_map(const void *buf, size_t len)
{
	const uint8_t *p = buf, *end = p + len;
	enum tl_mp_kind kind;

	if (len == 0 || len > TL_BODY_MAX)
		return len ? TL_ETOOBIG : TL_EMALFORMED;
	if (tl_mp_skip(&p, end, &kind) != 0 || kind != TL_MP_MAP || p != end)
		return TL_EMALFORMED;
	return 0;
}

/*
 * The layout tl_env_encode writes: the header's keys, in its order.
 * Read straight through it decodes in one pass.  Anything else, right
 * or wrong, returns NULL and goes the general way (decode_header), which
 * accepts whatever this accepts, with the same result, and explains
 * what it refuses.
 */
static const uint8_t *
decode_canonical(const uint8_t *p, const uint8_t *end, struct tl_event *ev)
{
	struct tl_mp_item v;
	uint64_t fmt;

#define KEY(lit) do {							\
	if ((size_t)(end - p) < sizeof(lit) - 1 ||			\
	    memcmp(p, lit, sizeof(lit) - 1) != 0)			\
		return NULL;						\
	p += sizeof(lit) - 1;						\
	if (tl_mp_read(&p, end, &v) != 0)					\
		return NULL;						\
} while (0)

	if (p == end || *p++ != 0x8b)		/* a map of 11 */
		return NULL;
	KEY("\xa3" "fmt");
	if (get_u64(&v, &fmt) != 0 || fmt == 0 || fmt > TL_ENV_FORMAT)
		return NULL;
	KEY("\xa3" "seq");
	if (get_u64(&v, &ev->seq) != 0 || ev->seq == 0)
		return NULL;
	KEY("\xa2" "ts");
	if (get_u64(&v, &ev->ts) != 0)
		return NULL;
	KEY("\xa4" "type");
	if (get_str(&v, ev->type, TL_TYPE_MAX, 0) != 0)
		return NULL;
	KEY("\xa6" "stream");
	if (get_str(&v, ev->stream, TL_STREAM_MAX, 0) != 0)
		return NULL;
	KEY("\xa3" "ver");
	if (get_u64(&v, &ev->version) != 0 || ev->version == 0)
		return NULL;
	KEY("\xa2" "id");
	if (get_bin(&v, ev->id, TL_ID_LEN) != 0)
		return NULL;
	KEY("\xa5" "cause");
	if (get_u64(&v, &ev->cause) != 0 || ev->cause >= ev->seq)
		return NULL;
	KEY("\xa4" "corr");
	if (get_bin(&v, ev->corr, TL_ID_LEN) != 0)
		return NULL;
	KEY("\xa5" "actor");
	if (get_str(&v, ev->actor, TL_ACTOR_MAX, 1) != 0)
		return NULL;
	KEY("\xa4" "prev");
	if (get_bin(&v, ev->prev, TL_HASH_LEN) != 0)
		return NULL;
#undef KEY
	ev->format = (uint32_t)fmt;
	return p;
}

/* Any header: checked whole, then read by key. */
static int
decode_header(const uint8_t *start, const uint8_t *end, struct tl_event *ev,
    char *why, const uint8_t **hendp)
{
	const uint8_t *p, *hend;
	struct tl_mp_item h, k, v;
	enum tl_mp_kind kind;
	unsigned seen = 0;
	uint64_t fmt = 0, i;
	int r;

	/* The whole header first: it must be well-formed msgpack. */
	p = start;
	if (tl_mp_skip(&p, end, &kind) != 0)
		FAIL(TL_EMALFORMED, "header is not valid msgpack");
	if (kind != TL_MP_MAP)
		FAIL(TL_EMALFORMED, "header is not a map");
	hend = p;
	p = start;
	tl_mp_read(&p, hend, &h);

	/* The format decides how to read the rest: find it first. */
	for (i = 0; i < h.u; i++) {
		tl_mp_read(&p, hend, &k);
		if (k.kind == TL_MP_STR && KEY_IS(&k, "fmt")) {
			tl_mp_read(&p, hend, &v);
			if (get_u64(&v, &fmt) != 0)
				FAIL(TL_EMALFORMED, "fmt is not an integer");
			break;
		}
		tl_mp_skip(&p, hend, NULL);
	}
	if (fmt == 0)
		FAIL(TL_EMALFORMED, "no format version");
	if (fmt > TL_ENV_FORMAT)
		FAIL(TL_ENEWER, "event format %llu is newer than this tally "
		    "reads (%d): upgrade tally", (unsigned long long)fmt,
		    TL_ENV_FORMAT);
	ev->format = (uint32_t)fmt;

	p = start;
	tl_mp_read(&p, hend, &h);
	for (i = 0; i < h.u; i++) {
		unsigned bit;

		tl_mp_read(&p, hend, &k);
		if (k.kind != TL_MP_STR)
			FAIL(TL_EMALFORMED, "header key is not a string");
		/* Values are read whole here; unknown ones skipped below. */
		switch (k.len) {
		case 2:
			if (KEY_IS(&k, "ts")) {
				tl_mp_read(&p, hend, &v);
				bit = K_TS;
				r = get_u64(&v, &ev->ts);
			} else if (KEY_IS(&k, "id")) {
				tl_mp_read(&p, hend, &v);
				bit = K_ID;
				r = get_bin(&v, ev->id, TL_ID_LEN);
			} else
				goto unknown;
			break;
		case 3:
			if (KEY_IS(&k, "fmt")) {
				/* Read above; but only once. */
				tl_mp_skip(&p, hend, NULL);
				bit = K_FMT;
				r = 0;
			} else if (KEY_IS(&k, "seq")) {
				tl_mp_read(&p, hend, &v);
				bit = K_SEQ;
				r = get_u64(&v, &ev->seq);
				if (r == 0 && ev->seq == 0)
					r = -1;
			} else if (KEY_IS(&k, "ver")) {
				tl_mp_read(&p, hend, &v);
				bit = K_VER;
				r = get_u64(&v, &ev->version);
				if (r == 0 && ev->version == 0)
					r = -1;
			} else
				goto unknown;
			break;
		case 4:
			if (KEY_IS(&k, "type")) {
				tl_mp_read(&p, hend, &v);
				bit = K_TYPE;
				r = get_str(&v, ev->type, TL_TYPE_MAX, 0);
			} else if (KEY_IS(&k, "corr")) {
				tl_mp_read(&p, hend, &v);
				bit = K_CORR;
				r = get_bin(&v, ev->corr, TL_ID_LEN);
			} else if (KEY_IS(&k, "prev")) {
				tl_mp_read(&p, hend, &v);
				bit = K_PREV;
				r = get_bin(&v, ev->prev, TL_HASH_LEN);
			} else
				goto unknown;
			break;
		case 5:
			if (KEY_IS(&k, "cause")) {
				tl_mp_read(&p, hend, &v);
				bit = K_CAUSE;
				r = get_u64(&v, &ev->cause);
			} else if (KEY_IS(&k, "actor")) {
				tl_mp_read(&p, hend, &v);
				bit = K_ACTOR;
				r = get_str(&v, ev->actor, TL_ACTOR_MAX, 1);
			} else
				goto unknown;
			break;
		case 6:
			if (KEY_IS(&k, "stream")) {
				tl_mp_read(&p, hend, &v);
				bit = K_STREAM;
				r = get_str(&v, ev->stream, TL_STREAM_MAX, 0);
			} else
				goto unknown;
			break;
		default:
		unknown:
			/* A newer writer's field. */
			tl_mp_skip(&p, hend, NULL);
			continue;
		}
		if (seen & bit)
			FAIL(TL_EMALFORMED, "duplicate header field %.*s",
			    (int)k.len, (const char *)k.ptr);
		if (r == -2)
			FAIL(TL_ETOOBIG, "header field %.*s is too long",
			    (int)k.len, (const char *)k.ptr);
		if (r != 0)
			FAIL(TL_EMALFORMED, "header field %.*s has a bad "
			    "type or value", (int)k.len, (const char *)k.ptr);
		seen |= bit;
	}
	if (seen != K_ALL)
		FAIL(TL_EMALFORMED, "header lacks a required field");
	if (ev->cause >= ev->seq)
		FAIL(TL_EMALFORMED, "cause %llu is not before seq %llu",
		    (unsigned long long)ev->cause,
		    (unsigned long long)ev->seq);
	*hendp = hend;
	return 0;
}

int
tl_env_decode(const void *buf, size_t len, struct tl_event *ev, char *why)
{
	const uint8_t *start = buf, *end = start + len, *p, *hend;
	enum tl_mp_kind kind;
	int rc;

	if (why != NULL)
		why[0] = '\0';
	if (len == 0)
		FAIL(TL_EMALFORMED, "empty record");
	if (len > TL_ENV_MAX)
		FAIL(TL_ETOOBIG, "record of %zu bytes", len);
	if ((hend = decode_canonical(start, end, ev)) == NULL &&
	    (rc = decode_header(start, end, ev, why, &hend)) != 0)
		return rc;

	ev->body = hend;
	ev->body_len = (size_t)(end - hend);
	ev->raw = buf;
	ev->raw_len = len;
	memset(ev->hash, 0, sizeof(ev->hash));

	/* The body must be one map filling the rest of the record. */
	if (ev->body_len == 0)
		FAIL(TL_EMALFORMED, "no body");
	if (ev->body_len > TL_BODY_MAX)
		FAIL(TL_ETOOBIG, "body of %zu bytes", ev->body_len);
	p = hend;
	if (tl_mp_skip(&p, end, &kind) != 0)
		FAIL(TL_EMALFORMED, "body is not valid msgpack");
	if (p != end)
		FAIL(TL_EMALFORMED, "bytes after the body");
	if (kind != TL_MP_MAP)
		FAIL(TL_EMALFORMED, "body is not a map");
	return 0;
}
