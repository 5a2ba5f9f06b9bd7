/*
 * json.c - events and bodies as JSON, through jansson.
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "body.h"
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
from_node(struct tl_bnode n, int depth)
{
	struct tl_bn_iter it;
	struct tl_bnode k, v;
	const void *p;
	const char *s;
	size_t len;
	uint64_t u;
	int64_t i;
	double d;
	int b, rc;
	json_t *j;

	if (depth > 64)
		return NULL;
	switch (tl_bn_kind(n)) {
	case TL_BN_NIL:
		return json_null();
	case TL_BN_BOOL:
		return tl_bn_bool(n, &b) == 0 ? json_boolean(b) : NULL;
	case TL_BN_UINT:
		if (tl_bn_u64(n, &u) != 0)
			return NULL;
		if (u > (uint64_t)INT64_MAX) {
			char buf[24];

			snprintf(buf, sizeof(buf), "%llu",
			    (unsigned long long)u);
			return json_string(buf);
		}
		return json_integer((json_int_t)u);
	case TL_BN_INT:
		return tl_bn_i64(n, &i) == 0 ? json_integer((json_int_t)i) :
		    NULL;
	case TL_BN_FLOAT:
		return tl_bn_f64(n, &d) == 0 ? json_real(d) : NULL;
	case TL_BN_STR:
		if (tl_bn_str(n, &s, &len) != 0)
			return NULL;
		/* Not UTF-8: show the bytes rather than lose the event. */
		if ((j = json_stringn(s, len)) == NULL)
			j = hex(s, len);
		return j;
	case TL_BN_BIN:
		return tl_bn_bin(n, &p, &len) == 0 ? hex(p, len) : NULL;
	case TL_BN_ARR:
		if (tl_bn_iter(n, &it) != 0 || (j = json_array()) == NULL)
			return NULL;
		while ((rc = tl_bn_iter_next(&it, &k, &v)) == 1) {
			json_t *e = from_node(v, depth + 1);

			if (e == NULL || json_array_append_new(j, e) != 0)
				goto fail;
		}
		if (rc != 0)
			goto fail;
		return j;
	case TL_BN_MAP:
		if (tl_bn_iter(n, &it) != 0 || (j = json_object()) == NULL)
			return NULL;
		while ((rc = tl_bn_iter_next(&it, &k, &v)) == 1) {
			char key[256];
			json_t *e;

			if (tl_bn_str(k, &s, &len) != 0 || len >= sizeof(key))
				goto fail;
			memcpy(key, s, len);
			key[len] = '\0';
			e = from_node(v, depth + 1);
			if (e == NULL || json_object_set_new(j, key, e) != 0)
				goto fail;
		}
		if (rc != 0)
			goto fail;
		return j;
	default:
		/* Secrets and anything we do not know: never the bytes. */
		return json_string(TL_REDACTED);
	}
fail:
	json_decref(j);
	return NULL;
}

json_t *
tl_json_body(const void *body, size_t len)
{
	struct tl_bview v;
	json_t *j;

	/* Checked whole first, as every body read from outside is. */
	if (tl_bview_open(&v, body, len) != 0)
		return NULL;
	j = from_node(v.root, 0);
	tl_bview_close(&v);
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
