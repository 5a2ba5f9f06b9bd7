/*
 * check_delivery.c - the node's wire format of a delivery (core/
 * delivery.h): format 3 round trips every byte value in names' values,
 * truncated and overlong frames are refused at every length, the
 * format 2 text is read strictly (a value's newline cannot forge a
 * header), and env-file lines are refused or quoted by systemd's rules.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/delivery.h"
#include "core/error.h"

static const uint8_t proof[TL_DLV_PROOF_LEN] = {
	1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32
};

/* A delivery with every byte value, alone and all together. */
static void
build(struct tl_dlv_enc *e, uint8_t *all)
{
	char name[16];
	int b;

	tl_dlv_enc_begin(e, "game/db", "game@node-a", 7, proof);
	tl_dlv_enc_var(e, 1, "LOG_LEVEL", 9, "info", 4);
	for (b = 0; b < 256; b++) {
		uint8_t v = (uint8_t)b;

		all[b] = v;
		snprintf(name, sizeof(name), "V%03d", b);
		tl_dlv_enc_var(e, 0, name, 4, &v, 1);
	}
	tl_dlv_enc_var(e, 0, "ALL", 3, all, 256);
	tl_dlv_enc_var(e, 0, "EMPTY", 5, "", 0);
}

START_TEST(test_round_trip)
{
	struct tl_dlv_enc e;
	struct tl_dlv d;
	uint8_t all[256];
	const uint8_t *p;
	size_t len, i;

	build(&e, all);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), 0);
	ck_assert_int_eq(tl_dlv_decode(p, len, &d), 0);
	ck_assert_int_eq(d.format, 3);
	ck_assert_str_eq(d.grant, "game/db");
	ck_assert_str_eq(d.holder, "game@node-a");
	ck_assert_uint_eq(d.version, 7);
	ck_assert_mem_eq(d.proof, proof, sizeof(proof));
	ck_assert_uint_eq(d.nvars, 1 + 256 + 2);
	ck_assert_int_eq(d.vars[0].is_default, 1);
	ck_assert_uint_eq(d.vars[0].name_len, 9);
	ck_assert_mem_eq(d.vars[0].value, "info", 4);
	for (i = 0; i < 256; i++) {
		char name[32];

		snprintf(name, sizeof(name), "V%03zu", i);
		ck_assert_int_eq(d.vars[1 + i].is_default, 0);
		ck_assert_mem_eq(d.vars[1 + i].name, name, 4);
		ck_assert_uint_eq(d.vars[1 + i].value_len, 1);
		ck_assert_uint_eq(d.vars[1 + i].value[0], i);
	}
	ck_assert_uint_eq(d.vars[257].value_len, 256);
	ck_assert_mem_eq(d.vars[257].value, all, 256);
	ck_assert_uint_eq(d.vars[258].value_len, 0);
	tl_dlv_free(&d);
	tl_dlv_enc_free(&e);
}
END_TEST

START_TEST(test_truncated_and_overlong)
{
	struct tl_dlv_enc e;
	struct tl_dlv d;
	uint8_t all[256], *buf;
	const uint8_t *p;
	size_t len, n;

	build(&e, all);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), 0);
	/* Every prefix is refused: no length is trusted past the end. */
	for (n = 0; n < len; n++)
		ck_assert_int_eq(tl_dlv_decode(p, n, &d), TL_EMALFORMED);
	/* One byte more, or a whole frame more: refused. */
	ck_assert_ptr_nonnull(buf = malloc(len + 16));
	memcpy(buf, p, len);
	buf[len] = 0;
	ck_assert_int_eq(tl_dlv_decode(buf, len + 1, &d), TL_EMALFORMED);
	memcpy(buf + len, "v\0\1X\0\0\0\0", 8);
	ck_assert_int_eq(tl_dlv_decode(buf, len + 8, &d), TL_EMALFORMED);
	/* A count larger than the frames given. */
	memcpy(buf, p, len);
	buf[4 + 2 + 7 + 2 + 11 + 8 + TL_DLV_PROOF_LEN + 3] += 1;
	ck_assert_int_eq(tl_dlv_decode(buf, len, &d), TL_EMALFORMED);
	/* A value's length beyond the end (the last one, "EMPTY"). */
	memcpy(buf, p, len);
	buf[len - 1] = 1;
	ck_assert_int_eq(tl_dlv_decode(buf, len, &d), TL_EMALFORMED);
	/* A kind that is neither 'd' nor 'v'. */
	memcpy(buf, p, len);
	buf[4 + 2 + 7 + 2 + 11 + 8 + TL_DLV_PROOF_LEN + 4] = 'x';
	ck_assert_int_eq(tl_dlv_decode(buf, len, &d), TL_EMALFORMED);
	free(buf);
	tl_dlv_enc_free(&e);
}
END_TEST

START_TEST(test_encoder_refuses)
{
	struct tl_dlv_enc e;
	const uint8_t *p;
	size_t len;

	tl_dlv_enc_begin(&e, "game/db", "game@node-a", 0, proof);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_free(&e);
	tl_dlv_enc_begin(&e, "game/db", "game@node-a", 1, proof);
	tl_dlv_enc_var(&e, 0, "A\0B", 3, "x", 1);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_free(&e);
	tl_dlv_enc_begin(&e, "", "game@node-a", 1, proof);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_free(&e);
}
END_TEST

#define PROOF2 "#proof 0102030405060708090a0b0c0d0e0f10" \
	"1112131415161718191a1b1c1d1e1f20\n"

START_TEST(test_v2_strict)
{
	static const char ok[] = "#tally grant=game/db holder=game@node-a "
	    "version=3\n" PROOF2 "#default LOG_LEVEL=info\nDB_URI=pg://u:p@h/d?"
	    "a=b\nEMPTY=\n";
	/* What a client id "id\n#tally ..." made of a delivery of before. */
	static const char forged[] = "#tally grant=game/db holder=game@node-a "
	    "version=3\n" PROOF2 "ID=id\n#tally grant=other/db holder="
	    "other@node-a version=99\n";
	static const char nonl[] = "#tally grant=game/db holder=game@node-a "
	    "version=3\n" PROOF2 "ID=id\nMODULE other\n";
	static const char late[] = "ID=x\n#tally grant=game/db holder="
	    "game@node-a version=3\n" PROOF2;
	static const char *bad[] = {
		"#tally grant=game/db holder=game@node-a version=0\n" PROOF2,
		"#tally grant=game/db holder=game@node-a version=3 x=1\n" PROOF2,
		"#tally grant=game/db version=3\n" PROOF2,
		"#tally grant=game/db holder=game@node-a version=3\n#proof 01\n",
		"#tally grant=game/db holder=game@node-a version=3\n" PROOF2
		    "A=1",
		"#tally grant=game/db holder=game@node-a version=3\n" PROOF2
		    "=1\n",
		"#tally grant=game/db holder=game@node-a version=3\n" PROOF2
		    PROOF2,
	};
	struct tl_dlv d;
	size_t i;

	ck_assert_int_eq(tl_dlv_decode(ok, sizeof(ok) - 1, &d), 0);
	ck_assert_int_eq(d.format, 2);
	ck_assert_str_eq(d.grant, "game/db");
	ck_assert_str_eq(d.holder, "game@node-a");
	ck_assert_uint_eq(d.version, 3);
	ck_assert_mem_eq(d.proof, proof, sizeof(proof));
	ck_assert_uint_eq(d.nvars, 3);
	ck_assert_int_eq(d.vars[0].is_default, 1);
	ck_assert_mem_eq(d.vars[1].value, "pg://u:p@h/d?a=b", 16);
	ck_assert_uint_eq(d.vars[1].value_len, 16);
	ck_assert_uint_eq(d.vars[2].value_len, 0);
	tl_dlv_free(&d);
	ck_assert_int_eq(tl_dlv_decode(forged, sizeof(forged) - 1, &d),
	    TL_EMALFORMED);
	ck_assert_int_eq(tl_dlv_decode(nonl, sizeof(nonl) - 1, &d),
	    TL_EMALFORMED);
	ck_assert_int_eq(tl_dlv_decode(late, sizeof(late) - 1, &d),
	    TL_EMALFORMED);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(tl_dlv_decode(bad[i], strlen(bad[i]), &d) ==
		    TL_EMALFORMED, "accepted: %s", bad[i]);
}
END_TEST

/* Reads back a line as systemd's EnvironmentFile= does, for our output. */
static size_t
systemd_read(const char *line, char *out)
{
	const char *p = strchr(line, '=') + 1;
	size_t o = 0;

	if (*p != '"') {
		while (*p != '\n')
			out[o++] = *p++;
		return o;
	}
	for (p++; *p != '"'; p++) {
		if (*p == '\\' && strchr("\"\\`$", p[1]) != NULL)
			p++;
		out[o++] = *p;
	}
	ck_assert_str_eq(p, "\"\n");
	return o;
}

START_TEST(test_env_lines)
{
	const char *why;
	char out[128], back[128];
	static const char *refused[] = {
		"id\nMODULE other", "a\rb", "a\0b", "\x01", "a\x7f",
		"\xff", "\xc0\x80", "\xed\xa0\x80", "\xef\xbb\xbf",
		"\xef\xb7\x90", "\xf4\x90\x80\x80", "\xe2\x82",
	};
	static const char *kept[] = {
		"", "plain", "pg://u:p@h:5432/d?sslmode=verify-full",
		" lead", "trail ", "a b", "tab\there", "q\"uote", "'single'",
		"back\\slash", "$HOME", "`cmd`", "caf\xc3\xa9", "#hash",
		"\xf0\x9f\x94\x91",
	};
	size_t i, n, lens[] = { 15, 3, 3, 1, 2, 1, 2, 3, 3, 3, 4, 2 };

	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		ck_assert_msg(tl_dlv_env_check("X", 1, refused[i], lens[i],
		    &why) == TL_EINVAL, "kept refused[%zu]", i);
	ck_assert_int_eq(tl_dlv_env_check("1X", 2, "a", 1, &why), TL_EINVAL);
	ck_assert_int_eq(tl_dlv_env_check("X-Y", 3, "a", 1, &why), TL_EINVAL);
	ck_assert_int_eq(tl_dlv_env_check("", 0, "a", 1, &why), TL_EINVAL);
	for (i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		size_t vl = strlen(kept[i]);

		ck_assert_int_eq(tl_dlv_env_check("X_1", 3, kept[i], vl, &why),
		    0);
		ck_assert_uint_le(tl_dlv_env_size(3, vl), sizeof(out));
		n = tl_dlv_env_format("X_1", 3, kept[i], vl, out);
		ck_assert_uint_eq(n, strlen(out));
		ck_assert_int_eq(strncmp(out, "X_1=", 4), 0);
		ck_assert_int_eq(out[n - 1], '\n');
		ck_assert_uint_eq(systemd_read(out, back), vl);
		ck_assert_mem_eq(back, kept[i], vl);
	}
	n = tl_dlv_env_format("X", 1, "plain", 5, out);
	ck_assert_str_eq(out, "X=plain\n");
	n = tl_dlv_env_format("X", 1, "a $b", 4, out);
	ck_assert_str_eq(out, "X=\"a \\$b\"\n");
}
END_TEST

static Suite *
delivery_suite(void)
{
	Suite *s = suite_create("delivery");
	TCase *tc = tcase_create("codec");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_truncated_and_overlong);
	tcase_add_test(tc, test_encoder_refuses);
	tcase_add_test(tc, test_v2_strict);
	tcase_add_test(tc, test_env_lines);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(delivery_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
