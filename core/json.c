/*
 * json.c - events and bodies as JSON, through jansson.
 */
#include <msgpack.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "json.h"

static json_t *
hex(const void *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *b = p;
	json_t *j;
	char *s;
	size_t i;

	if ((s = malloc(n * 2 + 1)) == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		s[2 * i] = digits[b[i] >> 4];
		s[2 * i + 1] = digits[b[i] & 15];
	}
	s[2 * n] = '\0';
	j = json_string(s);
	free(s);
	return j;
}

static json_t *
from_obj(const msgpack_object *o, int depth)
{
	json_t *j;
	uint32_t i;

	if (depth > 64)
		return NULL;
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return json_null();
	case MSGPACK_OBJECT_BOOLEAN:
		return json_boolean(o->via.boolean);
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		if (o->via.u64 > (uint64_t)INT64_MAX) {
			char buf[24];

			snprintf(buf, sizeof(buf), "%llu",
			    (unsigned long long)o->via.u64);
			return json_string(buf);
		}
		return json_integer((json_int_t)o->via.u64);
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return json_integer((json_int_t)o->via.i64);
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return json_real(o->via.f64);
	case MSGPACK_OBJECT_STR:
		/* Not UTF-8: show the bytes rather than lose the event. */
		if ((j = json_stringn(o->via.str.ptr, o->via.str.size)) ==
		    NULL)
			j = hex(o->via.str.ptr, o->via.str.size);
		return j;
	case MSGPACK_OBJECT_BIN:
		return hex(o->via.bin.ptr, o->via.bin.size);
	case MSGPACK_OBJECT_EXT:
		/* Secrets and anything we do not know: never the bytes. */
		return json_string(TL_REDACTED);
	case MSGPACK_OBJECT_ARRAY:
		if ((j = json_array()) == NULL)
			return NULL;
		for (i = 0; i < o->via.array.size; i++) {
			json_t *e = from_obj(&o->via.array.ptr[i], depth + 1);

			if (e == NULL || json_array_append_new(j, e) != 0)
				goto fail;
		}
		return j;
	case MSGPACK_OBJECT_MAP:
		if ((j = json_object()) == NULL)
			return NULL;
		for (i = 0; i < o->via.map.size; i++) {
			const msgpack_object *k = &o->via.map.ptr[i].key;
			char key[256];
			json_t *v;

			if (k->type != MSGPACK_OBJECT_STR ||
			    k->via.str.size >= sizeof(key))
				goto fail;
			memcpy(key, k->via.str.ptr, k->via.str.size);
			key[k->via.str.size] = '\0';
			v = from_obj(&o->via.map.ptr[i].val, depth + 1);
			if (v == NULL || json_object_set_new(j, key, v) != 0)
				goto fail;
		}
		return j;
	default:
		return json_string(TL_REDACTED);
	}
fail:
	json_decref(j);
	return NULL;
}

json_t *
tl_json_body(const void *body, size_t len)
{
	msgpack_zone z;
	msgpack_object o;
	size_t off = 0;
	json_t *j = NULL;

	/* Checked first: msgpack-c trusts a container's claimed size. */
	if (tl_env_check_map(body, len) != 0)
		return NULL;
	if (!msgpack_zone_init(&z, 2048))
		return NULL;
	if (msgpack_unpack(body, len, &off, &z, &o) ==
	    MSGPACK_UNPACK_SUCCESS && o.type == MSGPACK_OBJECT_MAP)
		j = from_obj(&o, 0);
	msgpack_zone_destroy(&z);
	return j;
}

void
tl_json_time(uint64_t ns, char buf[64])
{
	time_t s = (time_t)(ns / 1000000000u);
	struct tm tm;

	gmtime_r(&s, &tm);
	snprintf(buf, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%09uZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, (unsigned)(ns % 1000000000u));
}

json_t *
tl_json_event(const struct tl_event *ev)
{
	char ts[64];
	json_t *body, *j;

	if ((body = tl_json_body(ev->body, ev->body_len)) == NULL)
		return NULL;
	tl_json_time(ev->ts, ts);
	j = json_pack("{s:I,s:s,s:s,s:s,s:I,s:s,s:I,s:o,s:o,s:o}",
	    "seq", (json_int_t)ev->seq, "ts", ts, "type", ev->type,
	    "stream", ev->stream, "version", (json_int_t)ev->version,
	    "actor", ev->actor, "cause", (json_int_t)ev->cause,
	    "id", hex(ev->id, TL_ID_LEN), "corr", hex(ev->corr, TL_ID_LEN),
	    "body", body);
	return j;
}
