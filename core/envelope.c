/*
 * envelope.c - encoding and validating one event (msgpack, by hand).
 */
#include <stdio.h>
#include <string.h>

#include "envelope.h"
#include "error.h"

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

static uint8_t *
put_be(uint8_t *p, uint64_t v, int n)
{
	int i;

	for (i = n - 1; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
	return p + n;
}

static uint8_t *
put_uint(uint8_t *p, uint64_t v)
{
	if (v < 0x80) {
		*p++ = (uint8_t)v;
		return p;
	}
	if (v <= 0xff) {
		*p++ = 0xcc;
		return put_be(p, v, 1);
	}
	if (v <= 0xffff) {
		*p++ = 0xcd;
		return put_be(p, v, 2);
	}
	if (v <= 0xffffffffULL) {
		*p++ = 0xce;
		return put_be(p, v, 4);
	}
	*p++ = 0xcf;
	return put_be(p, v, 8);
}

static uint8_t *
put_str(uint8_t *p, const char *s, size_t n)
{
	if (n < 32)
		*p++ = (uint8_t)(0xa0 | n);
	else if (n <= 0xff) {
		*p++ = 0xd9;
		p = put_be(p, n, 1);
	} else if (n <= 0xffff) {
		*p++ = 0xda;
		p = put_be(p, n, 2);
	} else {
		*p++ = 0xdb;
		p = put_be(p, n, 4);
	}
	memcpy(p, s, n);
	return p + n;
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
	p = put_uint(p, fmt);
	p = PUT_KEY(p, "\xa3" "seq");
	p = put_uint(p, ev->seq);
	p = PUT_KEY(p, "\xa2" "ts");
	p = put_uint(p, ev->ts);
	p = PUT_KEY(p, "\xa4" "type");
	p = put_str(p, ev->type, tl);
	p = PUT_KEY(p, "\xa6" "stream");
	p = put_str(p, ev->stream, sl);
	p = PUT_KEY(p, "\xa3" "ver");
	p = put_uint(p, ev->version);
	p = PUT_KEY(p, "\xa2" "id");
	p = put_bin8(p, ev->id, TL_ID_LEN);
	p = PUT_KEY(p, "\xa5" "cause");
	p = put_uint(p, ev->cause);
	p = PUT_KEY(p, "\xa4" "corr");
	p = put_bin8(p, ev->corr, TL_ID_LEN);
	p = PUT_KEY(p, "\xa5" "actor");
	p = put_str(p, ev->actor, al);
	p = PUT_KEY(p, "\xa4" "prev");
	p = put_bin8(p, ev->prev, TL_HASH_LEN);
	memcpy(p, body, body_len);
	return 0;
}

/*
 * A small msgpack reader for validation and decoding: no allocation.
 *
 * msgpack-c's unpacker allocates each container's entries before it
 * knows whether the bytes are there, so five bytes claiming a map of
 * 2^32 entries make it ask for 192 GiB.  Records and bodies are read
 * here instead, with every count bounded by the bytes left.  It accepts
 * what msgpack-c accepts, including its limit of MP_DEPTH open
 * containers, so that a body that passes here opens with tl_bview_open.
 */
#define MP_DEPTH	32	/* msgpack-c's MSGPACK_EMBED_STACK_SIZE */

enum mp_kind {
	MP_NIL, MP_BOOL, MP_UINT, MP_NINT, MP_FLOAT, MP_STR, MP_BIN, MP_EXT,
	MP_ARR, MP_MAP
};

struct mp_item {
	enum mp_kind	 kind;
	uint64_t	 u;	/* MP_UINT: the value; MP_ARR, MP_MAP: count */
	const uint8_t	*ptr;	/* MP_STR, MP_BIN, MP_EXT: the payload */
	size_t		 len;
};

static uint64_t
mp_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	while (n-- > 0)
		v = (v << 8) | *p++;
	return v;
}

/*
 * Reads one item at *pp (for str, bin and ext its payload too; for
 * containers only the header) and advances *pp past it.  -1 if it is
 * not msgpack or does not fit before end.
 */
static int
mp_read(const uint8_t **pp, const uint8_t *end, struct mp_item *it)
{
	const uint8_t *p = *pp;
	size_t left = (size_t)(end - p), hdr = 1, w = 0, n = 0;
	uint8_t c;

	if (left == 0)
		return -1;
	c = p[0];
	it->u = 0;
	it->ptr = NULL;
	it->len = 0;
	if (c <= 0x7f) {
		it->kind = MP_UINT;
		it->u = c;
	} else if (c <= 0x8f) {
		it->kind = MP_MAP;
		it->u = c & 0x0f;
	} else if (c <= 0x9f) {
		it->kind = MP_ARR;
		it->u = c & 0x0f;
	} else if (c <= 0xbf) {
		it->kind = MP_STR;
		n = c & 0x1f;
	} else if (c >= 0xe0) {
		it->kind = MP_NINT;
	} else {
		switch (c) {
		case 0xc0:
			it->kind = MP_NIL;
			break;
		case 0xc2: case 0xc3:
			it->kind = MP_BOOL;
			it->u = c & 1;
			break;
		case 0xc4: case 0xc5: case 0xc6:	/* bin 8/16/32 */
			it->kind = MP_BIN;
			w = (size_t)1 << (c - 0xc4);
			break;
		case 0xc7: case 0xc8: case 0xc9:	/* ext 8/16/32 */
			it->kind = MP_EXT;
			w = (size_t)1 << (c - 0xc7);
			break;
		case 0xca:
			it->kind = MP_FLOAT;
			hdr = 5;
			break;
		case 0xcb:
			it->kind = MP_FLOAT;
			hdr = 9;
			break;
		case 0xcc: case 0xcd: case 0xce: case 0xcf:
			it->kind = MP_UINT;
			hdr = 1 + ((size_t)1 << (c - 0xcc));
			break;
		case 0xd0: case 0xd1: case 0xd2: case 0xd3:
			it->kind = MP_UINT;	/* or MP_NINT, below */
			hdr = 1 + ((size_t)1 << (c - 0xd0));
			break;
		case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
			it->kind = MP_EXT;	/* fixext: type, then data */
			hdr = 2;
			n = (size_t)1 << (c - 0xd4);
			break;
		case 0xd9: case 0xda: case 0xdb:	/* str 8/16/32 */
			it->kind = MP_STR;
			w = (size_t)1 << (c - 0xd9);
			break;
		case 0xdc: case 0xdd:
			it->kind = MP_ARR;
			w = c == 0xdc ? 2 : 4;
			break;
		case 0xde: case 0xdf:
			it->kind = MP_MAP;
			w = c == 0xde ? 2 : 4;
			break;
		default:				/* 0xc1: never used */
			return -1;
		}
	}
	if (w > 0) {
		/* A length or count of w bytes follows the type byte. */
		hdr = 1 + w + (it->kind == MP_EXT);
		if (left < hdr)
			return -1;
		if (it->kind == MP_ARR || it->kind == MP_MAP)
			it->u = mp_be(p + 1, w);
		else
			n = (size_t)mp_be(p + 1, w);
	} else if (left < hdr)
		return -1;
	if (c >= 0xcc && c <= 0xd3) {
		it->u = mp_be(p + 1, hdr - 1);
		/* Signed and negative: msgpack-c's NEGATIVE_INTEGER. */
		if (c >= 0xd0 && (p[1] & 0x80))
			it->kind = MP_NINT;
	}
	if (n > left - hdr)
		return -1;
	it->ptr = p + hdr;
	it->len = n;
	*pp = p + hdr + n;
	return 0;
}

/*
 * Skips one whole item at *pp, checking it all.  *kind (if not NULL)
 * receives the kind of the outer item.  -1 if it is not msgpack, is
 * nested too deeply or does not fit before end.
 */
static int
mp_skip(const uint8_t **pp, const uint8_t *end, enum mp_kind *kind)
{
	uint64_t stack[MP_DEPTH], todo = 1;
	struct mp_item it;
	int top = 0;

	for (;;) {
		if (mp_read(pp, end, &it) != 0)
			return -1;
		if (kind != NULL) {
			*kind = it.kind;
			kind = NULL;
		}
		todo--;
		if (it.kind == MP_ARR || it.kind == MP_MAP) {
			uint64_t n = it.kind == MP_MAP ? it.u * 2 : it.u;

			if (top == MP_DEPTH)
				return -1;
			/* Every entry takes a byte at least. */
			if (n > (uint64_t)(end - *pp))
				return -1;
			if (n > 0) {
				stack[top++] = todo;
				todo = n;
			}
		}
		while (todo == 0) {
			if (top == 0)
				return 0;
			todo = stack[--top];
		}
	}
}

/* Header keys, so that decoding can tell which ones were seen. */
enum {
	K_FMT = 1 << 0, K_SEQ = 1 << 1, K_TS = 1 << 2, K_TYPE = 1 << 3,
	K_STREAM = 1 << 4, K_VER = 1 << 5, K_ID = 1 << 6, K_CAUSE = 1 << 7,
	K_CORR = 1 << 8, K_ACTOR = 1 << 9, K_PREV = 1 << 10,
	K_ALL = (1 << 11) - 1
};

static int
key_is(const struct mp_item *k, const char *s, size_t n)
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
get_u64(const struct mp_item *v, uint64_t *out)
{
	if (v->kind != MP_UINT)
		return -1;
	*out = v->u;
	return 0;
}

static int
get_str(const struct mp_item *v, char *out, size_t max, int allow_empty)
{
	if (v->kind != MP_STR)
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
get_bin(const struct mp_item *v, uint8_t *out, size_t n)
{
	if (v->kind != MP_BIN || v->len != n)
		return -1;
	memcpy(out, v->ptr, n);
	return 0;
}

int
tl_env_check_map(const void *buf, size_t len)
{
	const uint8_t *p = buf, *end = p + len;
	enum mp_kind kind;

	if (len == 0 || len > TL_BODY_MAX)
		return len ? TL_ETOOBIG : TL_EMALFORMED;
	if (mp_skip(&p, end, &kind) != 0 || kind != MP_MAP || p != end)
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
	struct mp_item v;
	uint64_t fmt;

#define KEY(lit) do {							\
	if ((size_t)(end - p) < sizeof(lit) - 1 ||			\
	    memcmp(p, lit, sizeof(lit) - 1) != 0)			\
		return NULL;						\
	p += sizeof(lit) - 1;						\
	if (mp_read(&p, end, &v) != 0)					\
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
	struct mp_item h, k, v;
	enum mp_kind kind;
	unsigned seen = 0;
	uint64_t fmt = 0, i;
	int r;

	/* The whole header first: it must be well-formed msgpack. */
	p = start;
	if (mp_skip(&p, end, &kind) != 0)
		FAIL(TL_EMALFORMED, "header is not valid msgpack");
	if (kind != MP_MAP)
		FAIL(TL_EMALFORMED, "header is not a map");
	hend = p;
	p = start;
	mp_read(&p, hend, &h);

	/* The format decides how to read the rest: find it first. */
	for (i = 0; i < h.u; i++) {
		mp_read(&p, hend, &k);
		if (k.kind == MP_STR && KEY_IS(&k, "fmt")) {
			mp_read(&p, hend, &v);
			if (get_u64(&v, &fmt) != 0)
				FAIL(TL_EMALFORMED, "fmt is not an integer");
			break;
		}
		mp_skip(&p, hend, NULL);
	}
	if (fmt == 0)
		FAIL(TL_EMALFORMED, "no format version");
	if (fmt > TL_ENV_FORMAT)
		FAIL(TL_ENEWER, "event format %llu is newer than this tally "
		    "reads (%d): upgrade tally", (unsigned long long)fmt,
		    TL_ENV_FORMAT);
	ev->format = (uint32_t)fmt;

	p = start;
	mp_read(&p, hend, &h);
	for (i = 0; i < h.u; i++) {
		unsigned bit;

		mp_read(&p, hend, &k);
		if (k.kind != MP_STR)
			FAIL(TL_EMALFORMED, "header key is not a string");
		/* Values are read whole here; unknown ones skipped below. */
		switch (k.len) {
		case 2:
			if (KEY_IS(&k, "ts")) {
				mp_read(&p, hend, &v);
				bit = K_TS;
				r = get_u64(&v, &ev->ts);
			} else if (KEY_IS(&k, "id")) {
				mp_read(&p, hend, &v);
				bit = K_ID;
				r = get_bin(&v, ev->id, TL_ID_LEN);
			} else
				goto unknown;
			break;
		case 3:
			if (KEY_IS(&k, "fmt")) {
				/* Read above; but only once. */
				mp_skip(&p, hend, NULL);
				bit = K_FMT;
				r = 0;
			} else if (KEY_IS(&k, "seq")) {
				mp_read(&p, hend, &v);
				bit = K_SEQ;
				r = get_u64(&v, &ev->seq);
				if (r == 0 && ev->seq == 0)
					r = -1;
			} else if (KEY_IS(&k, "ver")) {
				mp_read(&p, hend, &v);
				bit = K_VER;
				r = get_u64(&v, &ev->version);
				if (r == 0 && ev->version == 0)
					r = -1;
			} else
				goto unknown;
			break;
		case 4:
			if (KEY_IS(&k, "type")) {
				mp_read(&p, hend, &v);
				bit = K_TYPE;
				r = get_str(&v, ev->type, TL_TYPE_MAX, 0);
			} else if (KEY_IS(&k, "corr")) {
				mp_read(&p, hend, &v);
				bit = K_CORR;
				r = get_bin(&v, ev->corr, TL_ID_LEN);
			} else if (KEY_IS(&k, "prev")) {
				mp_read(&p, hend, &v);
				bit = K_PREV;
				r = get_bin(&v, ev->prev, TL_HASH_LEN);
			} else
				goto unknown;
			break;
		case 5:
			if (KEY_IS(&k, "cause")) {
				mp_read(&p, hend, &v);
				bit = K_CAUSE;
				r = get_u64(&v, &ev->cause);
			} else if (KEY_IS(&k, "actor")) {
				mp_read(&p, hend, &v);
				bit = K_ACTOR;
				r = get_str(&v, ev->actor, TL_ACTOR_MAX, 1);
			} else
				goto unknown;
			break;
		case 6:
			if (KEY_IS(&k, "stream")) {
				mp_read(&p, hend, &v);
				bit = K_STREAM;
				r = get_str(&v, ev->stream, TL_STREAM_MAX, 0);
			} else
				goto unknown;
			break;
		default:
		unknown:
			/* A newer writer's field. */
			mp_skip(&p, hend, NULL);
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
	enum mp_kind kind;
	int rc;

	if (why != NULL)
		why[0] = '\0';
	if (len == 0)
		FAIL(TL_EMALFORMED, "empty record");
	if (len > TL_BODY_MAX + 4096)
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
	if (mp_skip(&p, end, &kind) != 0)
		FAIL(TL_EMALFORMED, "body is not valid msgpack");
	if (p != end)
		FAIL(TL_EMALFORMED, "bytes after the body");
	if (kind != MP_MAP)
		FAIL(TL_EMALFORMED, "body is not a map");
	return 0;
}
