/*
 * envelope.c - encoding and validating one event with msgpack-c.
 */
#include <errno.h>
#include <msgpack.h>
#include <stdio.h>
#include <string.h>

#include "envelope.h"
#include "error.h"

/* A msgpack_packer sink over a caller's fixed buffer: no allocation. */
struct fixbuf {
	uint8_t	*p;
	size_t	 cap;
	size_t	 len;	/* may exceed cap: then it is the size needed */
};

static int
fixbuf_write(void *data, const char *buf, size_t len)
{
	struct fixbuf *fb = data;

	if (fb->len + len <= fb->cap)
		memcpy(fb->p + fb->len, buf, len);
	fb->len += len;
	return 0;
}

static void
pack_key(msgpack_packer *pk, const char *k)
{
	size_t n = strlen(k);

	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, k, n);
}

static void
pack_str(msgpack_packer *pk, const char *k, const char *v, size_t n)
{
	pack_key(pk, k);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, v, n);
}

static void
pack_bin(msgpack_packer *pk, const char *k, const uint8_t *v, size_t n)
{
	pack_key(pk, k);
	msgpack_pack_bin(pk, n);
	msgpack_pack_bin_body(pk, v, n);
}

static void
pack_u64(msgpack_packer *pk, const char *k, uint64_t v)
{
	pack_key(pk, k);
	msgpack_pack_uint64(pk, v);
}

int
tl_env_encode(const struct tl_event *ev, const void *body, size_t body_len,
    uint8_t *out, size_t cap, size_t *lenp)
{
	static const uint8_t empty_map = 0x80;
	struct fixbuf fb = { out, cap, 0 };
	msgpack_packer pk;
	size_t tl, sl, al;

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

	msgpack_packer_init(&pk, &fb, fixbuf_write);
	msgpack_pack_map(&pk, 11);
	pack_u64(&pk, "fmt", ev->format ? ev->format : TL_ENV_FORMAT);
	pack_u64(&pk, "seq", ev->seq);
	pack_u64(&pk, "ts", ev->ts);
	pack_str(&pk, "type", ev->type, tl);
	pack_str(&pk, "stream", ev->stream, sl);
	pack_u64(&pk, "ver", ev->version);
	pack_bin(&pk, "id", ev->id, TL_ID_LEN);
	pack_u64(&pk, "cause", ev->cause);
	pack_bin(&pk, "corr", ev->corr, TL_ID_LEN);
	pack_str(&pk, "actor", ev->actor, al);
	pack_bin(&pk, "prev", ev->prev, TL_HASH_LEN);
	fixbuf_write(&fb, body, body_len);
	*lenp = fb.len;
	return fb.len <= cap ? 0 : TL_ETOOBIG;
}

/* Header keys, so that decoding can tell which ones were seen. */
enum {
	K_FMT = 1 << 0, K_SEQ = 1 << 1, K_TS = 1 << 2, K_TYPE = 1 << 3,
	K_STREAM = 1 << 4, K_VER = 1 << 5, K_ID = 1 << 6, K_CAUSE = 1 << 7,
	K_CORR = 1 << 8, K_ACTOR = 1 << 9, K_PREV = 1 << 10,
	K_ALL = (1 << 11) - 1
};

static int
key_is(const msgpack_object *k, const char *s)
{
	size_t n = strlen(s);

	return k->via.str.size == n && memcmp(k->via.str.ptr, s, n) == 0;
}

#define FAIL(code, ...) do {						\
	if (why != NULL)						\
		snprintf(why, TL_WHY_MAX, __VA_ARGS__);			\
	rc = (code);							\
	goto out;							\
} while (0)

static int
get_u64(const msgpack_object *v, uint64_t *out)
{
	if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return -1;
	*out = v->via.u64;
	return 0;
}

static int
get_str(const msgpack_object *v, char *out, size_t max, int allow_empty)
{
	if (v->type != MSGPACK_OBJECT_STR)
		return -1;
	if (v->via.str.size > max)
		return -2;
	if (v->via.str.size == 0 && !allow_empty)
		return -1;
	if (memchr(v->via.str.ptr, '\0', v->via.str.size) != NULL)
		return -1;
	memcpy(out, v->via.str.ptr, v->via.str.size);
	out[v->via.str.size] = '\0';
	return 0;
}

static int
get_bin(const msgpack_object *v, uint8_t *out, size_t n)
{
	if (v->type != MSGPACK_OBJECT_BIN || v->via.bin.size != n)
		return -1;
	memcpy(out, v->via.bin.ptr, n);
	return 0;
}

int
tl_env_check_map(const void *buf, size_t len)
{
	msgpack_zone z;
	msgpack_object o;
	size_t off = 0;
	int rc = TL_EMALFORMED;

	if (len == 0 || len > TL_BODY_MAX)
		return len ? TL_ETOOBIG : TL_EMALFORMED;
	/* An empty map is the common body: no need for a zone. */
	if (len == 1 && *(const uint8_t *)buf == 0x80)
		return 0;
	if (!msgpack_zone_init(&z, 1024))
		return ENOMEM;
	if (msgpack_unpack(buf, len, &off, &z, &o) == MSGPACK_UNPACK_SUCCESS &&
	    o.type == MSGPACK_OBJECT_MAP)
		rc = 0;
	msgpack_zone_destroy(&z);
	return rc;
}

int
tl_env_decode(const void *buf, size_t len, struct tl_event *ev, char *why)
{
	msgpack_zone z;
	msgpack_object h;
	msgpack_unpack_return ur;
	size_t off = 0;
	unsigned seen = 0;
	uint64_t fmt = 0;
	uint32_t i;
	int rc = 0, r;

	if (why != NULL)
		why[0] = '\0';
	if (len == 0) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "empty record");
		return TL_EMALFORMED;
	}
	if (len > TL_BODY_MAX + 4096) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "record of %zu bytes", len);
		return TL_ETOOBIG;
	}
	if (!msgpack_zone_init(&z, 1024))
		return ENOMEM;

	ur = msgpack_unpack(buf, len, &off, &z, &h);
	if (ur != MSGPACK_UNPACK_SUCCESS && ur != MSGPACK_UNPACK_EXTRA_BYTES)
		FAIL(TL_EMALFORMED, "header is not valid msgpack");
	if (h.type != MSGPACK_OBJECT_MAP)
		FAIL(TL_EMALFORMED, "header is not a map");

	/* The format decides how to read the rest: find it first. */
	for (i = 0; i < h.via.map.size; i++) {
		const msgpack_object *k = &h.via.map.ptr[i].key;

		if (k->type == MSGPACK_OBJECT_STR && key_is(k, "fmt")) {
			if (get_u64(&h.via.map.ptr[i].val, &fmt) != 0)
				FAIL(TL_EMALFORMED, "fmt is not an integer");
			break;
		}
	}
	if (fmt == 0)
		FAIL(TL_EMALFORMED, "no format version");
	if (fmt > TL_ENV_FORMAT)
		FAIL(TL_ENEWER, "event format %llu is newer than this tally "
		    "reads (%d): upgrade tally", (unsigned long long)fmt,
		    TL_ENV_FORMAT);
	ev->format = (uint32_t)fmt;
	seen |= K_FMT;

	for (i = 0; i < h.via.map.size; i++) {
		const msgpack_object *k = &h.via.map.ptr[i].key;
		const msgpack_object *v = &h.via.map.ptr[i].val;
		unsigned bit;

		if (k->type != MSGPACK_OBJECT_STR)
			FAIL(TL_EMALFORMED, "header key is not a string");
		if (key_is(k, "fmt"))
			continue;
		else if (key_is(k, "seq")) {
			bit = K_SEQ;
			r = get_u64(v, &ev->seq);
			if (r == 0 && ev->seq == 0)
				r = -1;
		} else if (key_is(k, "ts")) {
			bit = K_TS;
			r = get_u64(v, &ev->ts);
		} else if (key_is(k, "type")) {
			bit = K_TYPE;
			r = get_str(v, ev->type, TL_TYPE_MAX, 0);
		} else if (key_is(k, "stream")) {
			bit = K_STREAM;
			r = get_str(v, ev->stream, TL_STREAM_MAX, 0);
		} else if (key_is(k, "ver")) {
			bit = K_VER;
			r = get_u64(v, &ev->version);
			if (r == 0 && ev->version == 0)
				r = -1;
		} else if (key_is(k, "id")) {
			bit = K_ID;
			r = get_bin(v, ev->id, TL_ID_LEN);
		} else if (key_is(k, "cause")) {
			bit = K_CAUSE;
			r = get_u64(v, &ev->cause);
		} else if (key_is(k, "corr")) {
			bit = K_CORR;
			r = get_bin(v, ev->corr, TL_ID_LEN);
		} else if (key_is(k, "actor")) {
			bit = K_ACTOR;
			r = get_str(v, ev->actor, TL_ACTOR_MAX, 1);
		} else if (key_is(k, "prev")) {
			bit = K_PREV;
			r = get_bin(v, ev->prev, TL_HASH_LEN);
		} else
			continue;	/* a newer writer's field */
		if (seen & bit)
			FAIL(TL_EMALFORMED, "duplicate header field %.*s",
			    (int)k->via.str.size, k->via.str.ptr);
		if (r == -2)
			FAIL(TL_ETOOBIG, "header field %.*s is too long",
			    (int)k->via.str.size, k->via.str.ptr);
		if (r != 0)
			FAIL(TL_EMALFORMED, "header field %.*s has a bad "
			    "type or value", (int)k->via.str.size,
			    k->via.str.ptr);
		seen |= bit;
	}
	if (seen != K_ALL)
		FAIL(TL_EMALFORMED, "header lacks a required field");
	if (ev->cause >= ev->seq)
		FAIL(TL_EMALFORMED, "cause %llu is not before seq %llu",
		    (unsigned long long)ev->cause,
		    (unsigned long long)ev->seq);

	ev->body = (const uint8_t *)buf + off;
	ev->body_len = len - off;
	ev->raw = buf;
	ev->raw_len = len;
	memset(ev->hash, 0, sizeof(ev->hash));

	/* The body must be one map filling the rest of the record. */
	if (ev->body_len == 0)
		FAIL(TL_EMALFORMED, "no body");
	msgpack_zone_clear(&z);
	{
		msgpack_object b;
		size_t boff = 0;

		ur = msgpack_unpack((const char *)ev->body, ev->body_len,
		    &boff, &z, &b);
		if (ur == MSGPACK_UNPACK_EXTRA_BYTES)
			FAIL(TL_EMALFORMED, "bytes after the body");
		if (ur != MSGPACK_UNPACK_SUCCESS)
			FAIL(TL_EMALFORMED, "body is not valid msgpack");
		if (b.type != MSGPACK_OBJECT_MAP)
			FAIL(TL_EMALFORMED, "body is not a map");
	}
out:
	msgpack_zone_destroy(&z);
	return rc;
}
