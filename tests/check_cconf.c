/*
 * check_cconf.c - a cluster home's configuration (core/cconf.h): what
 * tally init --etcd writes is what tallyd reads; a file that does not
 * parse or holds a field out of range is refused naming the file, the
 * line or the field; the file is 0600 and never written over.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cconf.h"
#include "core/error.h"
#include "core/log.h"
#include "tests/lib/tl_test.h"

static void
put(const char *dir, const char *text)
{
	char *p = tl_test_path(dir, TL_CLUSTER_FILE);
	FILE *f = fopen(p, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	free(p);
}

START_TEST(test_round_trip)
{
	char *dir = tl_test_tmpdir("cconf-rt"), *p, why[TL_WHY_MAX];
	struct tl_cconf c, r;
	struct stat st;

	ck_assert_int_eq(tl_cconf_load(dir, &r, why), TL_ENOTFOUND);
	tl_cconf_init(&c);
	ck_assert_uint_eq(strlen(c.id), TL_CCONF_ID_LEN);
	snprintf(c.endpoints, sizeof(c.endpoints), "https://127.0.0.1:2379,"
	    "https://127.0.0.1:2380");
	snprintf(c.ca, sizeof(c.ca), "/etc/tally/ca.pem");
	memset(c.mesh, 'a', 32);
	c.mesh[32] = '\0';
	c.ttl = 4;
	c.margin_ms = 1333;
	c.keep = 10;
	ck_assert_int_eq(tl_cconf_write(dir, &c), 0);
	p = tl_test_path(dir, TL_CLUSTER_FILE);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	free(p);
	ck_assert_int_eq(tl_cconf_load(dir, &r, why), 0);
	ck_assert_str_eq(r.endpoints, c.endpoints);
	ck_assert_str_eq(r.ca, c.ca);
	ck_assert_str_eq(r.cert, "");
	ck_assert_str_eq(r.mesh, c.mesh);
	ck_assert_str_eq(r.id, c.id);
	ck_assert_uint_eq(r.ttl, 4);
	ck_assert_uint_eq(r.margin_ms, 1333);
	ck_assert_uint_eq(r.keep, 10);
	ck_assert_uint_eq(r.max_ops, TL_CCONF_MAX_OPS);
	/* Never written over. */
	ck_assert_int_eq(tl_cconf_write(dir, &c), TL_EEXIST);
	tl_test_tmpdir_done(dir);
}
END_TEST

START_TEST(test_refused)
{
	static const struct {
		const char *text, *says;
	} bad[] = {
		{ "{\"endpoints\": \"https://x\",\n  \"mesh\": }", ":2: " },
		{ "{\"mesh\": \"" "0123456789abcdef0123456789abcdef" "\", \"id\": \""
		    "0123456789abcdef0123456789abcdef" "\"}",
		    "field \"endpoints\": missing" },
		{ "{\"endpoints\": 7}", "field \"endpoints\"" },
		{ "{\"endpoints\": \"https://x\", \"mesh\": \"xyz\", \"id\": "
		    "\"0123456789abcdef0123456789abcdef\"}", "\"id\" or \"mesh\"" },
		{ "{\"endpoints\": \"https://x\", \"mesh\": "
		    "\"0123456789abcdef0123456789abcdef\", \"id\": "
		    "\"0123456789abcdef0123456789abcdef\", \"lease-ttl\": 1}",
		    "lease-ttl 1" },
		{ "{\"endpoints\": \"https://x\", \"mesh\": "
		    "\"0123456789abcdef0123456789abcdef\", \"id\": "
		    "\"0123456789abcdef0123456789abcdef\", \"lease-ttl\": 4, "
		    "\"lease-margin-ms\": 3000}", "lease-margin" },
		{ "{\"endpoints\": \"https://x\", \"mesh\": "
		    "\"0123456789abcdef0123456789abcdef\", \"id\": "
		    "\"0123456789abcdef0123456789abcdef\", \"keep\": -1}",
		    "field \"keep\": not a count" },
		{ "{\"endpoints\": \"https://x\", \"endpoints\": \"y\"}", ":1: " },
	};
	char *dir = tl_test_tmpdir("cconf-bad"), why[TL_WHY_MAX];
	struct tl_cconf c;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put(dir, bad[i].text);
		ck_assert_int_eq(tl_cconf_load(dir, &c, why), TL_EMANIFEST);
		ck_assert_msg(strstr(why, TL_CLUSTER_FILE) != NULL &&
		    strstr(why, bad[i].says) != NULL, "%zu: %s (wanted %s)", i,
		    why, bad[i].says);
	}
	tl_test_tmpdir_done(dir);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("cconf");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
