/*
 * fuzz_body.c - libFuzzer target for the in-place body reader.
 *
 * Opens the input as a body.  When it opens, msgpack-c must unpack it
 * too (the validator accepts only what msgpack-c accepts; that is safe
 * here because the validator bounded every count first), and walking
 * both trees must see the same kinds, values, entries and lookups; the
 * JSON tally renders (core/json.c, in place) must equal the JSON built
 * here from msgpack-c's tree, the way tally rendered it before.
 * Anything else traps.
 *
 *   make fuzz FUZZ_TIME=600
 */
#include <jansson.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"
#include "core/envelope.h"
#include "core/error.h"
#include "core/json.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)	do { if (!(c)) __builtin_trap(); } while (0)

/*
 * memcmp and memcpy with a length of 0 may still not be given NULL
 * (C11 7.24.1): msgpack hands out NULL for an empty str, bin or ext.
 */
static int
same_bytes(const void *a, const void *b, size_t len)
{
	return len == 0 || memcmp(a, b, len) == 0;
}

static void
copy_bytes(void *dst, const void *src, size_t len)
{
	if (len > 0)
		memcpy(dst, src, len);
}

static enum tl_bn_kind
kind_of(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:		return TL_BN_NIL;
	case MSGPACK_OBJECT_BOOLEAN:		return TL_BN_BOOL;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:	return TL_BN_UINT;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:	return TL_BN_INT;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:		return TL_BN_FLOAT;
	case MSGPACK_OBJECT_STR:		return TL_BN_STR;
	case MSGPACK_OBJECT_BIN:		return TL_BN_BIN;
	case MSGPACK_OBJECT_ARRAY:		return TL_BN_ARR;
	case MSGPACK_OBJECT_MAP:		return TL_BN_MAP;
	case MSGPACK_OBJECT_EXT:
		return o->via.ext.type == TL_EXT_SECRET ? TL_BN_SECRET :
		    TL_BN_OTHER;
	}
	return TL_BN_OTHER;
}

static void
same(struct tl_bnode n, const msgpack_object *o, int depth)
{
	const void *p;
	const char *s;
	size_t len, i;
	uint64_t u;
	int64_t v;
	int b;

	CHECK(depth < 64);
	CHECK(tl_bn_kind(n) == kind_of(o));
	switch (o->type) {
	case MSGPACK_OBJECT_BOOLEAN:
		CHECK(tl_bn_bool(n, &b) == 0 && b == o->via.boolean);
		break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		CHECK(tl_bn_u64(n, &u) == 0 && u == o->via.u64);
		CHECK(tl_bn_i64(n, &v) == (u <= INT64_MAX ? 0 :
		    TL_EMALFORMED));
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		CHECK(tl_bn_i64(n, &v) == 0 && v == o->via.i64);
		CHECK(tl_bn_u64(n, &u) == TL_EMALFORMED);
		break;
	case MSGPACK_OBJECT_STR:
		CHECK(tl_bn_str(n, &s, &len) == 0 && len == o->via.str.size &&
		    same_bytes(s, o->via.str.ptr, len));
		break;
	case MSGPACK_OBJECT_BIN:
		CHECK(tl_bn_bin(n, &p, &len) == 0 && len == o->via.bin.size &&
		    same_bytes(p, o->via.bin.ptr, len));
		break;
	case MSGPACK_OBJECT_EXT:
		if (o->via.ext.type == TL_EXT_SECRET)
			CHECK(tl_bn_secret(n, &p, &len) == 0 &&
			    len == o->via.ext.size &&
			    same_bytes(p, o->via.ext.ptr, len));
		break;
	case MSGPACK_OBJECT_ARRAY:
		CHECK(tl_bn_len(n) == o->via.array.size);
		for (i = 0; i < o->via.array.size && i < 64; i++)
			same(tl_bn_at(n, i), &o->via.array.ptr[i], depth + 1);
		CHECK(tl_bn_kind(tl_bn_at(n, o->via.array.size)) ==
		    TL_BN_NONE);
		break;
	case MSGPACK_OBJECT_MAP: {
		const char *keys[8];
		struct tl_bnode k, val, got[8];
		size_t nk = 0;

		CHECK(tl_bn_len(n) == o->via.map.size);
		for (i = 0; i < o->via.map.size && i < 64; i++) {
			const msgpack_object *ko = &o->via.map.ptr[i].key;

			CHECK(tl_bn_entry(n, i, &k, &val) == 0);
			same(k, ko, depth + 1);
			same(val, &o->via.map.ptr[i].val, depth + 1);
			/* A lookup finds the first entry with the key. */
			if (ko->type == MSGPACK_OBJECT_STR &&
			    ko->via.str.size < 32 &&
			    (ko->via.str.size == 0 ||
			    memchr(ko->via.str.ptr, '\0',
			    ko->via.str.size) == NULL)) {
				char key[32];
				size_t j;

				copy_bytes(key, ko->via.str.ptr, ko->via.str.size);
				key[ko->via.str.size] = '\0';
				for (j = 0; j < i; j++) {
					const msgpack_object *kj =
					    &o->via.map.ptr[j].key;

					if (kj->type == MSGPACK_OBJECT_STR &&
					    kj->via.str.size ==
					    ko->via.str.size &&
					    same_bytes(kj->via.str.ptr, key,
					    ko->via.str.size))
						break;
				}
				if (j == i) {
					CHECK(tl_bn_get(n, key, &val) == 0);
					same(val, &o->via.map.ptr[i].val,
					    depth + 1);
					if (nk < 8 && (keys[nk] = strdup(key)) !=
					    NULL)
						nk++;
				}
			}
		}
		CHECK(tl_bn_entry(n, o->via.map.size, &k, &val) == TL_EINVAL);
		/* Picked together, in reverse: the same nodes. */
		if (nk > 0) {
			const char *rev[8];

			for (i = 0; i < nk; i++)
				rev[i] = keys[nk - 1 - i];
			CHECK(tl_bn_pick(n, rev, nk, got) == 0);
			for (i = 0; i < nk; i++) {
				CHECK(tl_bn_get(n, rev[i], &val) == 0);
				CHECK(got[i].p == val.p);
			}
			for (i = 0; i < nk; i++)
				free((void *)keys[i]);
		}
		break;
	}
	default:
		break;
	}
}

static json_t *
hexj(const void *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *b = p;
	char *s = malloc(n * 2 + 1);
	json_t *j;
	size_t i;

	CHECK(s != NULL);
	for (i = 0; i < n; i++) {
		s[2 * i] = digits[b[i] >> 4];
		s[2 * i + 1] = digits[b[i] & 15];
	}
	s[2 * n] = '\0';
	j = json_string(s);
	free(s);
	return j;
}

/* JSON from msgpack-c's tree: the reference the renderer must equal. */
static json_t *
ref_json(const msgpack_object *o, int depth)
{
	json_t *j, *e;
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
		if ((j = json_stringn(o->via.str.ptr, o->via.str.size)) ==
		    NULL)
			j = hexj(o->via.str.ptr, o->via.str.size);
		return j;
	case MSGPACK_OBJECT_BIN:
		return hexj(o->via.bin.ptr, o->via.bin.size);
	case MSGPACK_OBJECT_ARRAY:
		j = json_array();
		for (i = 0; i < o->via.array.size; i++) {
			if ((e = ref_json(&o->via.array.ptr[i], depth + 1)) ==
			    NULL) {
				json_decref(j);
				return NULL;
			}
			json_array_append_new(j, e);
		}
		return j;
	case MSGPACK_OBJECT_MAP:
		j = json_object();
		for (i = 0; i < o->via.map.size; i++) {
			const msgpack_object *k = &o->via.map.ptr[i].key;
			char key[256];

			if (k->type != MSGPACK_OBJECT_STR ||
			    k->via.str.size >= sizeof(key) ||
			    (e = ref_json(&o->via.map.ptr[i].val,
			    depth + 1)) == NULL) {
				json_decref(j);
				return NULL;
			}
			copy_bytes(key, k->via.str.ptr, k->via.str.size);
			key[k->via.str.size] = '\0';
			if (json_object_set_new(j, key, e) != 0) {
				json_decref(j);
				return NULL;
			}
		}
		return j;
	default:
		return json_string(TL_REDACTED);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tl_bview v;
	msgpack_zone z;
	msgpack_object o;
	size_t off = 0;

	if (tl_bview_open(&v, data, size) != 0) {
		CHECK(tl_bn_kind(v.root) == TL_BN_NONE);
		return 0;
	}
	CHECK(msgpack_zone_init(&z, 2048));
	CHECK(msgpack_unpack((const char *)data, size, &off, &z, &o) ==
	    MSGPACK_UNPACK_SUCCESS && off == size);
	same(v.root, &o, 0);
	{
		json_t *got = tl_json_body(data, size), *want = ref_json(&o, 0);

		CHECK((got == NULL) == (want == NULL));
		CHECK(got == NULL || json_equal(got, want));
		json_decref(got);
		json_decref(want);
	}
	msgpack_zone_destroy(&z);
	tl_bview_close(&v);
	return 0;
}
