/*
 * check_body.c - event bodies: the builder, the reader, JSON rendering.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <jansson.h>
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"
#include "core/envelope.h"
#include "core/error.h"
#include "core/json.h"

static const uint8_t cipher[] = { 0xde, 0xad, 0xbe, 0xef, 0x53, 0x45, 0x43,
	0x52, 0x45, 0x54 };	/* ends in "SECRET" */

/* One of everything, nested. */
static void
build_rich(struct tl_body *b)
{
	tl_body_init(b);
	tl_body_str(b, "module", "web");
	tl_body_strn(b, "node", "db1-and-more", 3);
	tl_body_u64(b, "big", UINT64_MAX);
	tl_body_u64(b, "small", 7);
	tl_body_i64(b, "neg", -42);
	tl_body_i64(b, "min", INT64_MIN);
	tl_body_bool(b, "yes", 1);
	tl_body_bool(b, "no", 0);
	tl_body_nil(b, "nothing");
	tl_body_bin(b, "bin", "\x00\x01\xab", 3);
	tl_body_secret(b, "password", cipher, sizeof(cipher));
	tl_body_map(b, "spec");
	tl_body_str(b, "db", "app");
	tl_body_arr(b, "privs");
	tl_body_str(b, NULL, "SELECT");
	tl_body_str(b, NULL, "INSERT");
	tl_body_map(b, NULL);
	tl_body_secret(b, "token", cipher, 4);
	tl_body_end(b);
	tl_body_arr(b, NULL);
	tl_body_end(b);
	tl_body_end(b);
	tl_body_end(b);
	tl_body_raw(b, "raw", "\x92\x01\xa1x", 4);	/* [1, "x"] */
}

static void
str_is(struct tl_bnode n, const char *want)
{
	const char *s;
	size_t len;

	ck_assert_int_eq(tl_bn_kind(n), TL_BN_STR);
	ck_assert_int_eq(tl_bn_str(n, &s, &len), 0);
	ck_assert_uint_eq(len, strlen(want));
	ck_assert_mem_eq(s, want, len);
}

START_TEST(test_roundtrip)
{
	struct tl_body b;
	struct tl_bview v;
	struct tl_bnode n, spec, privs, m, k, val;
	const void *p;
	const uint8_t *bp;
	size_t len, blen;
	uint64_t u;
	int64_t i;
	int yes;

	build_rich(&b);
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), 0);
	ck_assert_int_eq(tl_env_check_map(p, len), 0);
	ck_assert_int_eq(tl_bview_open(&v, p, len), 0);
	ck_assert_int_eq(tl_bn_kind(v.root), TL_BN_MAP);
	ck_assert_uint_eq(tl_bn_len(v.root), 13);

	ck_assert_int_eq(tl_bn_get(v.root, "module", &n), 0);
	str_is(n, "web");
	ck_assert_int_eq(tl_bn_get(v.root, "node", &n), 0);
	str_is(n, "db1");
	ck_assert_int_eq(tl_bn_get(v.root, "big", &n), 0);
	ck_assert_int_eq(tl_bn_kind(n), TL_BN_UINT);
	ck_assert_int_eq(tl_bn_u64(n, &u), 0);
	ck_assert_uint_eq(u, UINT64_MAX);
	/* Too big for an int64. */
	ck_assert_int_eq(tl_bn_i64(n, &i), TL_EMALFORMED);
	ck_assert_int_eq(tl_bn_get(v.root, "small", &n), 0);
	ck_assert_int_eq(tl_bn_i64(n, &i), 0);
	ck_assert_int_eq(i, 7);
	ck_assert_int_eq(tl_bn_get(v.root, "neg", &n), 0);
	ck_assert_int_eq(tl_bn_kind(n), TL_BN_INT);
	ck_assert_int_eq(tl_bn_i64(n, &i), 0);
	ck_assert_int_eq(i, -42);
	ck_assert_int_eq(tl_bn_u64(n, &u), TL_EMALFORMED);
	ck_assert_int_eq(tl_bn_get(v.root, "min", &n), 0);
	ck_assert_int_eq(tl_bn_i64(n, &i), 0);
	ck_assert(i == INT64_MIN);
	ck_assert_int_eq(tl_bn_get(v.root, "yes", &n), 0);
	ck_assert_int_eq(tl_bn_bool(n, &yes), 0);
	ck_assert_int_eq(yes, 1);
	ck_assert_int_eq(tl_bn_get(v.root, "no", &n), 0);
	ck_assert_int_eq(tl_bn_kind(n), TL_BN_BOOL);
	ck_assert_int_eq(tl_bn_bool(n, &yes), 0);
	ck_assert_int_eq(yes, 0);
	ck_assert_int_eq(tl_bn_get(v.root, "nothing", &n), 0);
	ck_assert_int_eq(tl_bn_kind(n), TL_BN_NIL);
	ck_assert_int_eq(tl_bn_get(v.root, "bin", &n), 0);
	ck_assert_int_eq(tl_bn_kind(n), TL_BN_BIN);
	ck_assert_int_eq(tl_bn_bin(n, (const void **)&bp, &blen), 0);
	ck_assert_uint_eq(blen, 3);
	ck_assert_mem_eq(bp, "\x00\x01\xab", 3);

	/* A secret is an ext: readable only as a secret. */
	ck_assert_int_eq(tl_bn_get(v.root, "password", &n), 0);
	ck_assert_int_eq(tl_bn_kind(n), TL_BN_SECRET);
	ck_assert_int_eq(tl_bn_secret(n, (const void **)&bp, &blen), 0);
	ck_assert_uint_eq(blen, sizeof(cipher));
	ck_assert_mem_eq(bp, cipher, sizeof(cipher));
	ck_assert_int_eq(tl_bn_str(n, (const char **)&bp, &blen),
	    TL_EMALFORMED);
	ck_assert_int_eq(tl_bn_bin(n, (const void **)&bp, &blen),
	    TL_EMALFORMED);

	/* Nesting. */
	ck_assert_int_eq(tl_bn_get(v.root, "spec", &spec), 0);
	ck_assert_int_eq(tl_bn_kind(spec), TL_BN_MAP);
	ck_assert_uint_eq(tl_bn_len(spec), 2);
	ck_assert_int_eq(tl_bn_get(spec, "db", &n), 0);
	str_is(n, "app");
	ck_assert_int_eq(tl_bn_get(spec, "privs", &privs), 0);
	ck_assert_int_eq(tl_bn_kind(privs), TL_BN_ARR);
	ck_assert_uint_eq(tl_bn_len(privs), 4);
	str_is(tl_bn_at(privs, 0), "SELECT");
	str_is(tl_bn_at(privs, 1), "INSERT");
	m = tl_bn_at(privs, 2);
	ck_assert_int_eq(tl_bn_kind(m), TL_BN_MAP);
	ck_assert_int_eq(tl_bn_get(m, "token", &n), 0);
	ck_assert_int_eq(tl_bn_kind(n), TL_BN_SECRET);
	ck_assert_int_eq(tl_bn_kind(tl_bn_at(privs, 3)), TL_BN_ARR);
	ck_assert_uint_eq(tl_bn_len(tl_bn_at(privs, 3)), 0);
	ck_assert_int_eq(tl_bn_kind(tl_bn_at(privs, 4)), TL_BN_NONE);
	ck_assert_int_eq(tl_bn_kind(tl_bn_at(spec, 0)), TL_BN_NONE);

	ck_assert_int_eq(tl_bn_get(v.root, "raw", &n), 0);
	ck_assert_int_eq(tl_bn_kind(n), TL_BN_ARR);
	ck_assert_int_eq(tl_bn_u64(tl_bn_at(n, 0), &u), 0);
	ck_assert_uint_eq(u, 1);
	str_is(tl_bn_at(n, 1), "x");

	/* Entries come back in the order they were given. */
	ck_assert_int_eq(tl_bn_entry(v.root, 0, &k, &val), 0);
	str_is(k, "module");
	ck_assert_int_eq(tl_bn_entry(v.root, 12, &k, &val), 0);
	str_is(k, "raw");
	ck_assert_int_eq(tl_bn_entry(v.root, 13, &k, &val), TL_EINVAL);
	ck_assert_int_eq(tl_bn_entry(privs, 0, &k, &val), TL_EINVAL);

	/* Absent keys, wrong kinds. */
	ck_assert_int_eq(tl_bn_get(v.root, "absent", &n), TL_ENOTFOUND);
	ck_assert_int_eq(tl_bn_kind(n), TL_BN_NONE);
	ck_assert_int_eq(tl_bn_get(privs, "x", &n), TL_EMALFORMED);
	ck_assert_int_eq(tl_bn_u64(n, &u), TL_EMALFORMED);
	ck_assert_uint_eq(tl_bn_len(n), 0);

	tl_bview_close(&v);
	tl_bview_close(&v);	/* twice is harmless */
	tl_bview_close(NULL);
	tl_body_free(&b);
	tl_body_free(&b);
	tl_body_free(NULL);
}
END_TEST

START_TEST(test_conveniences)
{
	struct tl_body b;
	struct tl_bview v;
	const void *p;
	size_t len;
	char buf[8];

	tl_body_init(&b);
	tl_body_str(&b, "short", "abc");
	tl_body_str(&b, "seven", "1234567");
	tl_body_str(&b, "eight", "12345678");
	tl_body_u64(&b, "n", 99);
	tl_body_i64(&b, "neg", -1);
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), 0);
	ck_assert_int_eq(tl_bview_open(&v, p, len), 0);

	ck_assert_int_eq(tl_bn_getstr(v.root, "short", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "abc");
	ck_assert_int_eq(tl_bn_getstr(v.root, "seven", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "1234567");
	ck_assert_int_eq(tl_bn_getstr(v.root, "eight", buf, sizeof(buf)),
	    TL_ETOOBIG);
	ck_assert_int_eq(tl_bn_getstr(v.root, "absent", buf, sizeof(buf)),
	    TL_ENOTFOUND);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(tl_bn_getstr(v.root, "n", buf, sizeof(buf)),
	    TL_EMALFORMED);
	ck_assert_uint_eq(tl_bn_getu64(v.root, "n", 5), 99);
	ck_assert_uint_eq(tl_bn_getu64(v.root, "absent", 5), 5);
	ck_assert_uint_eq(tl_bn_getu64(v.root, "neg", 5), 5);
	ck_assert_uint_eq(tl_bn_getu64(v.root, "short", 5), 5);
	tl_bview_close(&v);
	tl_body_free(&b);
}
END_TEST

/* Same calls, same bytes; every header the smallest msgpack allows. */
START_TEST(test_canonical)
{
	struct tl_body a, b;
	const void *pa, *pb;
	const uint8_t *p;
	size_t la, lb, i;
	char key[16];

	build_rich(&a);
	build_rich(&b);
	ck_assert_int_eq(tl_body_finish(&a, &pa, &la), 0);
	ck_assert_int_eq(tl_body_finish(&b, &pb, &lb), 0);
	ck_assert_uint_eq(la, lb);
	ck_assert_mem_eq(pa, pb, la);
	tl_body_free(&a);
	tl_body_free(&b);

	/* {} and {"a":1} exactly. */
	tl_body_init(&a);
	ck_assert_int_eq(tl_body_finish(&a, &pa, &la), 0);
	ck_assert_uint_eq(la, 1);
	ck_assert_mem_eq(pa, "\x80", 1);
	tl_body_free(&a);
	tl_body_init(&a);
	tl_body_u64(&a, "a", 1);
	ck_assert_int_eq(tl_body_finish(&a, &pa, &la), 0);
	ck_assert_uint_eq(la, 4);
	ck_assert_mem_eq(pa, "\x81\xa1" "a\x01", 4);
	tl_body_free(&a);

	/* 15 entries: fixmap; 16: map16.  Arrays alike, nested. */
	for (i = 15; i <= 16; i++) {
		size_t j;

		tl_body_init(&a);
		tl_body_arr(&a, "l");
		for (j = 0; j < i; j++)
			tl_body_u64(&a, NULL, j);
		tl_body_end(&a);
		for (j = 1; j < i; j++) {
			snprintf(key, sizeof(key), "k%zu", j);
			tl_body_nil(&a, key);
		}
		ck_assert_int_eq(tl_body_finish(&a, &pa, &la), 0);
		p = pa;
		if (i == 15) {
			ck_assert_uint_eq(p[0], 0x8f);
			ck_assert_uint_eq(p[3], 0x9f);
		} else {
			ck_assert_uint_eq(p[0], 0xde);
			ck_assert_uint_eq(p[1], 0x00);
			ck_assert_uint_eq(p[2], 0x10);
			ck_assert_uint_eq(p[5], 0xdc);
			ck_assert_uint_eq(p[6], 0x00);
			ck_assert_uint_eq(p[7], 0x10);
		}
		ck_assert_int_eq(tl_env_check_map(pa, la), 0);
		tl_body_free(&a);
	}

	/* 65536 entries: map32. */
	tl_body_init(&a);
	for (i = 0; i < 65536; i++) {
		snprintf(key, sizeof(key), "%zx", i);
		tl_body_nil(&a, key);
	}
	ck_assert_int_eq(tl_body_finish(&a, &pa, &la), 0);
	p = pa;
	ck_assert_mem_eq(p, "\xdf\x00\x01\x00\x00", 5);
	ck_assert_int_eq(tl_env_check_map(pa, la), 0);
	tl_body_free(&a);
}
END_TEST

/*
 * The writer is core/mp.h's, by hand: every form must be the bytes
 * msgpack-c's packer writes for the same value, and read back.
 */
static void
pack_key(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	msgpack_pack_str(pk, 1);
	msgpack_pack_str_body(pk, "k", 1);
}

static void
same_bytes(struct tl_body *b, msgpack_sbuffer *sb, const char *what,
    long long v, const void **pp, size_t *lenp)
{
	const void *p;
	size_t len;

	ck_assert_int_eq(tl_body_finish(b, &p, &len), 0);
	if (pp != NULL) {
		*pp = p;
		*lenp = len;
	}
	ck_assert_msg(len == sb->size && memcmp(p, sb->data, len) == 0,
	    "%s %lld: %zu bytes, msgpack-c %zu", what, v, len, sb->size);
	ck_assert_int_eq(tl_env_check_map(p, len), 0);
}

START_TEST(test_same_bytes_as_msgpack_c)
{
	static const uint64_t uv[] = { 0, 1, 127, 128, 255, 256, 65535,
	    65536, 0xffffffffULL, 0x100000000ULL, UINT64_MAX };
	static const int64_t iv[] = { 0, 5, 127, 128, 200, 70000, INT64_MAX,
	    -1, -31, -32, -33, -127, -128, -129, -32767, -32768, -32769,
	    INT32_MIN, (int64_t)INT32_MIN - 1, INT64_MIN };
	static const size_t lens[] = { 0, 1, 2, 3, 4, 8, 15, 16, 17, 31, 32,
	    255, 256, 65535, 65536, 70000 };
	static char big[70000];
	msgpack_sbuffer sb;
	msgpack_packer pk;
	struct tl_body b;
	struct tl_bview v;
	struct tl_bnode n;
	const void *p, *bp;
	const char *sp;
	size_t i, j, len, blen;
	uint64_t u;
	int64_t s;

	memset(big, 'x', sizeof(big));
	for (i = 0; i < sizeof(uv) / sizeof(uv[0]); i++) {
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		pack_key(&pk);
		msgpack_pack_uint64(&pk, uv[i]);
		tl_body_init(&b);
		tl_body_u64(&b, "k", uv[i]);
		same_bytes(&b, &sb, "u64", (long long)uv[i], &p, &len);
		ck_assert_int_eq(tl_bview_open(&v, p, len), 0);
		ck_assert_uint_eq(tl_bn_getu64(v.root, "k", 9), uv[i]);
		tl_body_free(&b);
		msgpack_sbuffer_destroy(&sb);
	}
	for (i = 0; i < sizeof(iv) / sizeof(iv[0]); i++) {
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		pack_key(&pk);
		msgpack_pack_int64(&pk, iv[i]);
		tl_body_init(&b);
		tl_body_i64(&b, "k", iv[i]);
		same_bytes(&b, &sb, "i64", (long long)iv[i], &p, &len);
		ck_assert_int_eq(tl_bview_open(&v, p, len), 0);
		ck_assert_int_eq(tl_bn_get(v.root, "k", &n), 0);
		ck_assert_int_eq(tl_bn_i64(n, &s), 0);
		ck_assert_msg(s == iv[i], "read %lld for %lld", (long long)s,
		    (long long)iv[i]);
		ck_assert_int_eq(tl_bn_kind(n), iv[i] < 0 ? TL_BN_INT :
		    TL_BN_UINT);
		tl_body_free(&b);
		msgpack_sbuffer_destroy(&sb);
	}
	/* Signed forms holding positive values: msgpack-c may read them. */
	for (i = 0; i < 4; i++) {
		static const uint8_t enc[4][12] = {
			{ 0x81, 0xa1, 'k', 0xd0, 0x05 },
			{ 0x81, 0xa1, 'k', 0xd1, 0x01, 0x00 },
			{ 0x81, 0xa1, 'k', 0xd2, 0x00, 0x01, 0x00, 0x00 },
			{ 0x81, 0xa1, 'k', 0xd3, 0, 0, 0, 1, 0, 0, 0, 0 },
		};
		static const size_t elen[4] = { 5, 6, 8, 12 };
		static const uint64_t want[4] = { 5, 256, 65536,
		    0x100000000ULL };

		ck_assert_int_eq(tl_bview_open(&v, enc[i], elen[i]), 0);
		ck_assert_int_eq(tl_bn_get(v.root, "k", &n), 0);
		ck_assert_int_eq(tl_bn_u64(n, &u), 0);
		ck_assert_uint_eq(u, want[i]);
		ck_assert_int_eq(tl_bn_i64(n, &s), 0);
		ck_assert_int_eq(s, (int64_t)want[i]);
	}
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (j = 0; j < 3; j++) {
			msgpack_sbuffer_init(&sb);
			msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
			pack_key(&pk);
			tl_body_init(&b);
			if (j == 0) {
				msgpack_pack_str(&pk, lens[i]);
				msgpack_pack_str_body(&pk, big, lens[i]);
				tl_body_strn(&b, "k", big, lens[i]);
			} else if (j == 1) {
				msgpack_pack_bin(&pk, lens[i]);
				msgpack_pack_bin_body(&pk, big, lens[i]);
				tl_body_bin(&b, "k", big, lens[i]);
			} else {
				if (lens[i] == 0) {
					tl_body_free(&b);
					msgpack_sbuffer_destroy(&sb);
					continue;
				}
				msgpack_pack_ext(&pk, lens[i], TL_EXT_SECRET);
				msgpack_pack_ext_body(&pk, big, lens[i]);
				tl_body_secret(&b, "k", big, lens[i]);
			}
			same_bytes(&b, &sb, j == 0 ? "str" : j == 1 ? "bin" :
			    "ext", (long long)lens[i], &p, &len);
			ck_assert_int_eq(tl_bview_open(&v, p, len), 0);
			ck_assert_int_eq(tl_bn_get(v.root, "k", &n), 0);
			if (j == 0) {
				ck_assert_int_eq(tl_bn_str(n, &sp, &blen), 0);
				bp = sp;
			} else if (j == 1)
				ck_assert_int_eq(tl_bn_bin(n, &bp, &blen), 0);
			else
				ck_assert_int_eq(tl_bn_secret(n, &bp, &blen),
				    0);
			ck_assert_uint_eq(blen, lens[i]);
			ck_assert_ptr_eq(bp, (const uint8_t *)p + len - blen);
			tl_body_free(&b);
			msgpack_sbuffer_destroy(&sb);
		}
	}
	/* nil, bools, and containers of 15, 16 and 65536 entries. */
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str(&pk, 1);
	msgpack_pack_str_body(&pk, "n", 1);
	msgpack_pack_nil(&pk);
	msgpack_pack_str(&pk, 1);
	msgpack_pack_str_body(&pk, "t", 1);
	msgpack_pack_true(&pk);
	msgpack_pack_str(&pk, 1);
	msgpack_pack_str_body(&pk, "f", 1);
	msgpack_pack_false(&pk);
	tl_body_init(&b);
	tl_body_nil(&b, "n");
	tl_body_bool(&b, "t", 1);
	tl_body_bool(&b, "f", 0);
	same_bytes(&b, &sb, "nil/bool", 0, NULL, NULL);
	tl_body_free(&b);
	msgpack_sbuffer_destroy(&sb);
	for (i = 0; i < 3; i++) {
		static const uint32_t cn[3] = { 15, 16, 65536 };

		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 2);
		msgpack_pack_str(&pk, 1);
		msgpack_pack_str_body(&pk, "a", 1);
		msgpack_pack_array(&pk, cn[i]);
		tl_body_init(&b);
		tl_body_arr(&b, "a");
		for (j = 0; j < cn[i]; j++) {
			msgpack_pack_uint64(&pk, j);
			tl_body_u64(&b, NULL, j);
		}
		tl_body_end(&b);
		msgpack_pack_str(&pk, 1);
		msgpack_pack_str_body(&pk, "m", 1);
		msgpack_pack_map(&pk, cn[i]);
		tl_body_map(&b, "m");
		for (j = 0; j < cn[i]; j++) {
			char key[24];

			snprintf(key, sizeof(key), "%zx", j);
			msgpack_pack_str(&pk, strlen(key));
			msgpack_pack_str_body(&pk, key, strlen(key));
			msgpack_pack_nil(&pk);
			tl_body_nil(&b, key);
		}
		tl_body_end(&b);
		same_bytes(&b, &sb, "containers", cn[i], NULL, NULL);
		tl_body_free(&b);
		msgpack_sbuffer_destroy(&sb);
	}
}
END_TEST

/* Several fields in one walk: present, absent, duplicate, any order. */
START_TEST(test_pick)
{
	static const char *const keys[] = { "c", "a", "zz", "b" };
	struct tl_bnode out[4];
	struct tl_body b;
	struct tl_bview v;
	const void *p;
	size_t len;
	char buf[8];
	uint64_t u;

	tl_body_init(&b);
	tl_body_str(&b, "a", "one");
	tl_body_map(&b, "nested");
	tl_body_str(&b, "b", "inner");	/* not the top-level b */
	tl_body_end(&b);
	tl_body_u64(&b, "b", 2);
	tl_body_str(&b, "c", "three");
	tl_body_str(&b, "a", "dup");	/* the first one counts */
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), 0);
	ck_assert_int_eq(tl_bview_open(&v, p, len), 0);
	ck_assert_int_eq(tl_bn_pick(v.root, keys, 4, out), 0);
	ck_assert_int_eq(tl_bn_strcpy(out[0], buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "three");
	ck_assert_int_eq(tl_bn_strcpy(out[1], buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "one");
	ck_assert_int_eq(tl_bn_kind(out[2]), TL_BN_NONE);
	ck_assert_int_eq(tl_bn_strcpy(out[2], buf, sizeof(buf)),
	    TL_ENOTFOUND);
	ck_assert_int_eq(tl_bn_u64(out[3], &u), 0);
	ck_assert_uint_eq(u, 2);
	ck_assert_int_eq(tl_bn_strcpy(out[3], buf, sizeof(buf)),
	    TL_EMALFORMED);
	ck_assert_int_eq(tl_bn_strcpy(out[0], buf, 5), TL_ETOOBIG);
	/* Not a map. */
	ck_assert_int_eq(tl_bn_pick(out[0], keys, 4, out), TL_EMALFORMED);
	tl_body_free(&b);
}
END_TEST

START_TEST(test_reset)
{
	struct tl_body b;
	const void *p1, *p2;
	size_t l1, l2;

	tl_body_init(&b);
	tl_body_str(&b, "a", "first");
	ck_assert_int_eq(tl_body_finish(&b, &p1, &l1), 0);
	tl_body_reset(&b);
	tl_body_str(&b, "b", "second");
	ck_assert_int_eq(tl_body_finish(&b, &p2, &l2), 0);
	ck_assert_ptr_eq(p1, p2);		/* the memory was kept */
	ck_assert_uint_eq(l2, 10);
	ck_assert_mem_eq(p2, "\x81\xa1" "b\xa6" "second", 10);
	/* A reset also clears an error. */
	tl_body_reset(&b);
	tl_body_end(&b);
	ck_assert_int_eq(tl_body_finish(&b, &p2, &l2), TL_EINVAL);
	tl_body_reset(&b);
	ck_assert_int_eq(tl_body_finish(&b, &p2, &l2), 0);
	ck_assert_uint_eq(l2, 1);
	tl_body_free(&b);
}
END_TEST

/* Misuse: reported by tl_body_finish, and sticky. */
START_TEST(test_misuse)
{
	struct tl_body b;
	const void *p;
	size_t len;
	int d;

	tl_body_init(&b);
	tl_body_str(&b, NULL, "no key in a map");
	tl_body_str(&b, "fine", "after the error");
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), TL_EINVAL);
	tl_body_free(&b);

	tl_body_init(&b);
	tl_body_arr(&b, "l");
	tl_body_u64(&b, "key", 1);	/* a key in an array */
	tl_body_end(&b);
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), TL_EINVAL);
	tl_body_free(&b);

	tl_body_init(&b);
	tl_body_end(&b);		/* nothing open */
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), TL_EINVAL);
	tl_body_free(&b);

	tl_body_init(&b);
	tl_body_map(&b, "m");		/* never closed */
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), TL_EINVAL);
	tl_body_free(&b);

	/* TL_BODY_DEPTH levels are fine; one more is too deep. */
	tl_body_init(&b);
	for (d = 0; d < TL_BODY_DEPTH; d++)
		tl_body_map(&b, "m");
	for (d = 0; d < TL_BODY_DEPTH; d++)
		tl_body_end(&b);
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), 0);
	tl_body_free(&b);
	tl_body_init(&b);
	for (d = 0; d <= TL_BODY_DEPTH; d++)
		tl_body_arr(&b, d == 0 ? "a" : NULL);
	for (d = 0; d <= TL_BODY_DEPTH; d++)
		tl_body_end(&b);
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), TL_ETOOBIG);
	tl_body_free(&b);

	/* Finished: anything more is an error, and finish says so. */
	tl_body_init(&b);
	tl_body_u64(&b, "a", 1);
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), 0);
	tl_body_u64(&b, "b", 2);
	ck_assert_int_ne(tl_body_finish(&b, &p, &len), 0);
	tl_body_free(&b);
}
END_TEST

START_TEST(test_too_big)
{
	struct tl_body b;
	const void *p;
	size_t len, n = (size_t)TL_BODY_MAX * 2 + 1;
	uint8_t *big = calloc(1, n);

	ck_assert_ptr_nonnull(big);
	tl_body_init(&b);
	tl_body_bin(&b, "big", big, n);
	tl_body_u64(&b, "after", 1);
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), TL_ETOOBIG);
	tl_body_free(&b);
	free(big);
}
END_TEST

START_TEST(test_bview_bad)
{
	static const struct { const char *s; size_t n; } bad[] = {
		{ "", 0 },
		{ "\x90", 1 },				/* an array */
		{ "\xa1" "a", 2 },			/* a string */
		{ "\x80\x80", 2 },			/* two maps */
		{ "\x81\xa1" "a", 3 },			/* truncated */
		{ "\x81\xa1" "a\xc1", 4 },		/* reserved byte */
		{ "\xdf\xff\xff\xff\xff", 5 },		/* claims 4G entries */
		{ "\x81\xa1" "a\xdd\xff\xff\xff\xff", 8 },
	};
	struct tl_bview v;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v.root.p = (const uint8_t *)bad[i].s;	/* must be reset */
		ck_assert_msg(tl_bview_open(&v, bad[i].s, bad[i].n) != 0,
		    "case %zu opened", i);
		ck_assert_ptr_null(v.root.p);
		ck_assert_int_eq(tl_bn_kind(v.root), TL_BN_NONE);
		tl_bview_close(&v);
		ck_assert_ptr_null(tl_json_body(bad[i].s, bad[i].n));
	}
}
END_TEST

/* JSON: everything shown, secrets never. */
START_TEST(test_json_body)
{
	struct tl_body b;
	const void *p;
	size_t len;
	json_t *j, *x;
	char *s;

	build_rich(&b);
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), 0);
	j = tl_json_body(p, len);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(j, "module")),
	    "web");
	ck_assert_str_eq(json_string_value(json_object_get(j, "node")),
	    "db1");
	/* Beyond int64: a decimal string rather than a wrong number. */
	ck_assert_str_eq(json_string_value(json_object_get(j, "big")),
	    "18446744073709551615");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "small")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "neg")), -42);
	ck_assert(json_is_true(json_object_get(j, "yes")));
	ck_assert(json_is_false(json_object_get(j, "no")));
	ck_assert(json_is_null(json_object_get(j, "nothing")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "bin")),
	    "0001ab");
	ck_assert_str_eq(json_string_value(json_object_get(j, "password")),
	    TL_REDACTED);
	x = json_object_get(json_object_get(j, "spec"), "privs");
	ck_assert(json_is_array(x));
	ck_assert_uint_eq(json_array_size(x), 4);
	ck_assert_str_eq(json_string_value(json_array_get(x, 1)), "INSERT");
	ck_assert_str_eq(json_string_value(json_object_get(
	    json_array_get(x, 2), "token")), TL_REDACTED);
	/* The ciphertext appears nowhere, in any form. */
	s = json_dumps(j, JSON_COMPACT);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_null(strstr(s, "SECRET"));
	ck_assert_ptr_null(strstr(s, "deadbeef"));
	ck_assert_ptr_null(strstr(s, "3q2+7"));		/* base64 */
	free(s);
	json_decref(j);
	tl_body_free(&b);
}
END_TEST

START_TEST(test_json_odd_values)
{
	json_t *j;

	/* {"f": 1.5} */
	j = tl_json_body("\x81\xa1" "f\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00",
	    12);
	ck_assert_ptr_nonnull(j);
	ck_assert(json_real_value(json_object_get(j, "f")) == 1.5);
	json_decref(j);
	/* {"g": -2.25 as a float32, "a": [1, [2], {}]} */
	j = tl_json_body("\x82\xa1" "g\xca\xc0\x10\x00\x00"
	    "\xa1" "a\x93\x01\x91\x02\x80", 15);
	ck_assert_ptr_nonnull(j);
	ck_assert(json_real_value(json_object_get(j, "g")) == -2.25);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "a")), 3);
	ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(
	    json_object_get(j, "a"), 1), 0)), 2);
	json_decref(j);
	/* Not UTF-8: shown as hex rather than lost. */
	j = tl_json_body("\x81\xa1" "s\xa2\xff\xfe", 6);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(j, "s")), "fffe");
	json_decref(j);
	/* An ext that is not a secret: still never the bytes. */
	j = tl_json_body("\x81\xa1" "e\xd5\x07\xab\xcd", 7);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(j, "e")),
	    TL_REDACTED);
	json_decref(j);
	/* A key that is not a string cannot be JSON. */
	ck_assert_ptr_null(tl_json_body("\x81\x01\x02", 3));
	/* An empty body. */
	j = tl_json_body("\x80", 1);
	ck_assert_ptr_nonnull(j);
	ck_assert_uint_eq(json_object_size(j), 0);
	json_decref(j);
}
END_TEST

START_TEST(test_json_time)
{
	char buf[64];

	tl_json_time(0, buf);
	ck_assert_str_eq(buf, "1970-01-01T00:00:00.000000000Z");
	tl_json_time(1764430200123456789ULL, buf);
	ck_assert_str_eq(buf, "2025-11-29T15:30:00.123456789Z");
	tl_json_time(1000000001, buf);
	ck_assert_str_eq(buf, "1970-01-01T00:00:01.000000001Z");
}
END_TEST

START_TEST(test_json_event)
{
	struct tl_event ev;
	struct tl_body b;
	const void *p;
	size_t len;
	json_t *j;
	char *s;

	memset(&ev, 0, sizeof(ev));
	ev.format = 1;
	ev.seq = 12;
	ev.ts = 1764430200123456789ULL;
	ev.version = 2;
	ev.cause = 11;
	memset(ev.id, 0xab, TL_ID_LEN);
	memset(ev.corr, 0x01, TL_ID_LEN);
	strcpy(ev.type, "grant.requested");
	strcpy(ev.stream, "grant/web/alice@db1");
	strcpy(ev.actor, "cli:root@host");
	tl_body_init(&b);
	tl_body_str(&b, "user", "alice");
	tl_body_secret(&b, "password", cipher, sizeof(cipher));
	ck_assert_int_eq(tl_body_finish(&b, &p, &len), 0);
	ev.body = p;
	ev.body_len = len;

	j = tl_json_event(&ev);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "seq")), 12);
	ck_assert_str_eq(json_string_value(json_object_get(j, "ts")),
	    "2025-11-29T15:30:00.123456789Z");
	ck_assert_str_eq(json_string_value(json_object_get(j, "type")),
	    "grant.requested");
	ck_assert_str_eq(json_string_value(json_object_get(j, "stream")),
	    "grant/web/alice@db1");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "version")),
	    2);
	ck_assert_str_eq(json_string_value(json_object_get(j, "actor")),
	    "cli:root@host");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "cause")), 11);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")),
	    "abababababababababababababababab");
	ck_assert_str_eq(json_string_value(json_object_get(j, "corr")),
	    "01010101010101010101010101010101");
	ck_assert_str_eq(json_string_value(json_object_get(
	    json_object_get(j, "body"), "user")), "alice");
	ck_assert_str_eq(json_string_value(json_object_get(
	    json_object_get(j, "body"), "password")), TL_REDACTED);
	s = json_dumps(j, JSON_COMPACT);
	ck_assert_ptr_null(strstr(s, "SECRET"));
	ck_assert_ptr_null(strstr(s, "deadbeef"));
	free(s);
	json_decref(j);

	/* A body that does not decode: no JSON rather than a wrong one. */
	ev.body = (const uint8_t *)"\x81";
	ev.body_len = 1;
	ck_assert_ptr_null(tl_json_event(&ev));
	tl_body_free(&b);
}
END_TEST

static Suite *
body_suite(void)
{
	Suite *s = suite_create("body");
	TCase *tc;

	tc = tcase_create("builder");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_conveniences);
	tcase_add_test(tc, test_canonical);
	tcase_add_test(tc, test_same_bytes_as_msgpack_c);
	tcase_add_test(tc, test_pick);
	tcase_add_test(tc, test_reset);
	tcase_add_test(tc, test_misuse);
	tcase_add_test(tc, test_too_big);
	tcase_add_test(tc, test_bview_bad);
	suite_add_tcase(s, tc);

	tc = tcase_create("json");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_json_body);
	tcase_add_test(tc, test_json_odd_values);
	tcase_add_test(tc, test_json_time);
	tcase_add_test(tc, test_json_event);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(body_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
