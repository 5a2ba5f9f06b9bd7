/*
 * check_drv_util.c - the helpers every driver shares (drivers/util.h):
 * the bytes a composed URI gets for every byte of a name, where the
 * output ends when it is full, which setting a vector yields, reasons
 * cut at TL_DRV_WHY_MAX and joined with "; ", a bounded statement, and
 * a secret copy.  Needs no server.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "drivers/util.h"

static int
unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

START_TEST(test_pct_every_byte)
{
	char in[2], out[8], want[8];
	size_t off;
	int c;

	/* Each byte alone: unreserved as it is, any other %XX upper-case. */
	for (c = 1; c < 256; c++) {
		in[0] = (char)c;
		in[1] = '\0';
		off = 0;
		ck_assert_int_eq(tl_drv_pct_append(out, sizeof(out), &off, in),
		    0);
		if (unreserved((unsigned char)c))
			snprintf(want, sizeof(want), "%c", c);
		else
			snprintf(want, sizeof(want), "%%%02X", c);
		ck_assert_str_eq(out, want);
		ck_assert_uint_eq(off, strlen(want));
	}
}
END_TEST

/*
 * A declared setting's limits are checked with its kind, so a value the
 * driver cannot take (a derived gid-base=4294967295) is refused before
 * it reaches the driver, as the driver itself would refuse it.
 */
START_TEST(test_setting_limits)
{
	const struct tl_drv_decl *dir = tl_drv_decl_find("directory");
	const struct tl_drv_setting *base, *range;
	char why[TL_DRV_WHY_MAX];

	ck_assert_ptr_nonnull(dir);
	ck_assert_ptr_nonnull(base = tl_drv_setting_find(dir->settings,
	    "gid-base"));
	ck_assert_ptr_nonnull(range = tl_drv_setting_find(dir->settings,
	    "gid-range"));
	ck_assert_int_eq(tl_drv_setting_check(base, "4294967295", why),
	    TL_EINVAL);
	ck_assert_msg(strstr(why, "1-4294967294") != NULL, "%s", why);
	ck_assert_int_eq(tl_drv_setting_check(base, "0", why), TL_EINVAL);
	ck_assert_int_eq(tl_drv_setting_check(range, "99999999999999999999",
	    why), TL_EINVAL);
	ck_assert_int_eq(tl_drv_setting_check(base, "1", why), 0);
	ck_assert_int_eq(tl_drv_setting_check(base, "4294967294", why), 0);
	ck_assert_int_eq(tl_drv_setting_check(range, "64000", why), 0);
	/* Each within its limits, not together: the declaration says so. */
	ck_assert_ptr_nonnull(dir->settings_check);
	{
		const char *const both[] = { "gid-base", "4000000000", NULL };
		const char *const fits[] = { "gid-base", "4000000000",
		    "gid-range", "100", NULL };

		ck_assert_int_eq(dir->settings_check(both, why), TL_EINVAL);
		ck_assert_msg(strstr(why, "pass 4294967295") != NULL, "%s", why);
		ck_assert_int_eq(dir->settings_check(fits, why), 0);
	}
}
END_TEST

START_TEST(test_pct_appends)
{
	char out[64] = "redis://";
	size_t off = strlen(out);

	ck_assert_int_eq(tl_drv_pct_append(out, sizeof(out), &off,
	    "u@h:1/p w%"), 0);
	ck_assert_str_eq(out, "redis://u%40h%3A1%2Fp%20w%25");
	ck_assert_uint_eq(off, strlen(out));
	/* An empty string adds nothing and keeps the terminator. */
	ck_assert_int_eq(tl_drv_pct_append(out, sizeof(out), &off, ""), 0);
	ck_assert_str_eq(out, "redis://u%40h%3A1%2Fp%20w%25");
}
END_TEST

START_TEST(test_pct_full)
{
	char out[5];
	size_t off = 0;

	/* "abcd" needs 5 bytes with its NUL: it fits exactly. */
	ck_assert_int_eq(tl_drv_pct_append(out, sizeof(out), &off, "abcd"),
	    0);
	ck_assert_str_eq(out, "abcd");
	off = 0;
	ck_assert_int_eq(tl_drv_pct_append(out, sizeof(out), &off, "abcde"),
	    TL_ETOOBIG);
	ck_assert_uint_eq(off, 4);
	/* An escape is written whole or not at all. */
	off = 0;
	ck_assert_int_eq(tl_drv_pct_append(out, sizeof(out), &off, "ab/"),
	    TL_ETOOBIG);
	ck_assert_uint_eq(off, 2);
	off = 0;
	ck_assert_int_eq(tl_drv_pct_append(out, sizeof(out), &off, "a/"), 0);
	ck_assert_str_eq(out, "a%2F");
}
END_TEST

START_TEST(test_setting_get)
{
	const char *sv[] = { "host", "h1", "port", "p", "host", "h2", NULL };
	const char *cut[] = { "a", "1", "b", NULL, "c", "3", NULL };

	ck_assert_str_eq(tl_drv_setting_get(sv, "host"), "h1");
	ck_assert_str_eq(tl_drv_setting_get(sv, "port"), "p");
	ck_assert_ptr_null(tl_drv_setting_get(sv, "hos"));
	ck_assert_ptr_null(tl_drv_setting_get(sv, "h1"));
	ck_assert_ptr_null(tl_drv_setting_get(NULL, "host"));
	/* A pair without its value ends the vector. */
	ck_assert_str_eq(tl_drv_setting_get(cut, "a"), "1");
	ck_assert_ptr_null(tl_drv_setting_get(cut, "b"));
	ck_assert_ptr_null(tl_drv_setting_get(cut, "c"));
}
END_TEST

START_TEST(test_why)
{
	char why[TL_DRV_WHY_MAX], big[TL_DRV_WHY_MAX * 2];

	ck_assert_int_eq(tl_drv_why(NULL, TL_EAUTH, "x %d", 1), TL_EAUTH);
	ck_assert_int_eq(tl_drv_why(why, TL_EDRIVER, "user %s: %d", "u", 7),
	    TL_EDRIVER);
	ck_assert_str_eq(why, "user u: 7");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_int_eq(tl_drv_why(why, 0, "%s", big), 0);
	ck_assert_uint_eq(strlen(why), TL_DRV_WHY_MAX - 1);

	why[0] = '\0';
	tl_drv_why_add(why, "first %d", 1);
	ck_assert_str_eq(why, "first 1");
	tl_drv_why_add(why, "second");
	ck_assert_str_eq(why, "first 1; second");
	/* Full: cut, then nothing more. */
	tl_drv_why_add(why, "%s", big);
	ck_assert_uint_eq(strlen(why), TL_DRV_WHY_MAX - 1);
	ck_assert(strncmp(why, "first 1; second; xxx", 20) == 0);
	tl_drv_why_add(why, "more");
	ck_assert_uint_eq(strlen(why), TL_DRV_WHY_MAX - 1);
	ck_assert_ptr_null(strstr(why, "more"));
}
END_TEST

START_TEST(test_sqlf)
{
	char buf[16], why[TL_DRV_WHY_MAX];

	ck_assert_int_eq(tl_drv_sqlf(buf, sizeof(buf), why, "DROP %s", "x"),
	    0);
	ck_assert_str_eq(buf, "DROP x");
	/* 15 characters fit in 16 bytes, 16 do not. */
	ck_assert_int_eq(tl_drv_sqlf(buf, sizeof(buf), why, "%s",
	    "123456789012345"), 0);
	why[0] = '\0';
	ck_assert_int_eq(tl_drv_sqlf(buf, sizeof(buf), why, "%s",
	    "1234567890123456"), TL_EINVAL);
	ck_assert_str_eq(why, "statement too long");
}
END_TEST

START_TEST(test_grant_named_and_secret_dup)
{
	struct tl_drv_grant g;
	char *d;

	memset(&g, 0, sizeof(g));
	ck_assert_int_eq(tl_drv_grant_named(&g), 0);
	g.grant = "";
	ck_assert_int_eq(tl_drv_grant_named(&g), 0);
	g.grant = "g-1";
	ck_assert_int_eq(tl_drv_grant_named(&g), 1);

	d = tl_drv_secret_dup("s3cr3t");
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d, "s3cr3t");
	tl_secret_free(d);
	d = tl_drv_secret_dup("");
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d, "");
	tl_secret_free(d);
}
END_TEST

static Suite *
util_suite(void)
{
	Suite *s = suite_create("drv_util");
	TCase *tc = tcase_create("util");

	tcase_add_test(tc, test_pct_every_byte);
	tcase_add_test(tc, test_pct_appends);
	tcase_add_test(tc, test_setting_limits);
	tcase_add_test(tc, test_pct_full);
	tcase_add_test(tc, test_setting_get);
	tcase_add_test(tc, test_why);
	tcase_add_test(tc, test_sqlf);
	tcase_add_test(tc, test_grant_named_and_secret_dup);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(util_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
