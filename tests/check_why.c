/*
 * check_why.c - the one "why" convention (core/error.h): a function
 * that takes "char *why" and no length writes at most TL_WHY_MAX bytes
 * there, NUL included, however long what it quotes.  Each case hands a
 * buffer of exactly TL_WHY_MAX bytes from the heap (one byte more is
 * an overflow the sanitizer build reports) and an input that makes the
 * reason longer than that: the reason is there, ends within the
 * buffer, and still says what was wrong.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/amqp.h"
#include "core/cconf.h"
#include "core/envelope.h"
#include "core/error.h"
#include "core/httpd.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/secret.h"
#include "core/window.h"
#include "core/x509.h"
#include "tests/lib/tl_test.h"

/* A heap buffer of exactly TL_WHY_MAX bytes, filled with junk. */
static char *
why_new(void)
{
	char *w = malloc(TL_WHY_MAX);

	ck_assert_ptr_nonnull(w);
	memset(w, 'J', TL_WHY_MAX);
	return w;
}

/* The reason is one string within the buffer and says what it must. */
static void
why_check(char *w, const char *says)
{
	size_t n = strnlen(w, TL_WHY_MAX);

	ck_assert_msg(n < TL_WHY_MAX, "the reason is not terminated");
	ck_assert_msg(n > 0, "no reason given");
	ck_assert_msg(strstr(w, says) != NULL, "\"%s\" does not say \"%s\"",
	    w, says);
	free(w);
}

/* A string of n copies of c (malloc'd). */
static char *
run_of(char c, size_t n)
{
	char *s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/*
 * A directory under the test's scratch whose path is longer than a
 * why: three levels of 200-byte names.
 */
static char *
deep_dir(const char *top)
{
	char *d = malloc(4096), *seg = run_of('d', 200);
	size_t i;

	ck_assert_ptr_nonnull(d);
	snprintf(d, 4096, "%s", top);
	for (i = 0; i < 3; i++) {
		strncat(d, "/", 4096 - strlen(d) - 1);
		strncat(d, seg, 4096 - strlen(d) - 1);
		ck_assert_int_eq(mkdir(d, 0700), 0);
	}
	free(seg);
	ck_assert_uint_gt(strlen(d), TL_WHY_MAX);
	return d;
}

/* dir/name holding text. */
static void
put_file(const char *dir, const char *name, const char *text)
{
	char *path = malloc(4200);
	FILE *fp;

	ck_assert_ptr_nonnull(path);
	snprintf(path, 4200, "%s/%s", dir, name);
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	fputs(text, fp);
	ck_assert_int_eq(fclose(fp), 0);
	free(path);
}

START_TEST(test_secret_load)
{
	char *top = tl_test_tmpdir("why-secret"), *d = deep_dir(top);
	char *path = malloc(4200), *w = why_new();
	struct tl_key k;

	snprintf(path, 4200, "%s/master.key", d);
	ck_assert_int_eq(tl_secret_load(path, &k, w), TL_ESECRET);
	why_check(w, "dddd");
	free(path);
	free(d);
	tl_test_tmpdir_done(top);
}
END_TEST

START_TEST(test_cconf)
{
	char *top = tl_test_tmpdir("why-cconf"), *d = deep_dir(top);
	char *w = why_new();
	struct tl_cconf c;

	put_file(d, TL_CLUSTER_FILE, "{ not json");
	ck_assert_int_eq(tl_cconf_load(d, &c, w), TL_EMANIFEST);
	why_check(w, "dddd");
	tl_cconf_init(&c);
	c.ttl = 1;
	w = why_new();
	ck_assert_int_eq(tl_cconf_check(&c, w), TL_EINVAL);
	why_check(w, "lease-ttl");
	free(d);
	tl_test_tmpdir_done(top);
}
END_TEST

START_TEST(test_listen_addresses)
{
	char *host = run_of('h', 3000), *addr = malloc(3100), *w = why_new();

	snprintf(addr, 3100, "%s:80x", host);
	ck_assert_int_ne(tl_httpd_addr_ok("--serve", addr, w), 0);
	why_check(w, "--serve");
	w = why_new();
	ck_assert_int_ne(tl_mx_addr_ok(addr, w), 0);
	why_check(w, "hhhh");
	free(addr);
	free(host);
}
END_TEST

START_TEST(test_log_open)
{
	char *top = tl_test_tmpdir("why-log"), *d = deep_dir(top);
	char *w = why_new();
	struct tl_log *log = NULL;

	/* An empty data.mdb: refused, the reason naming the file. */
	put_file(d, "data.mdb", "");
	ck_assert_int_ne(tl_log_open_opts(d, &(struct tl_log_opts){ .why = w },
	    &log), 0);
	ck_assert_ptr_null(log);
	why_check(w, "dddd");
	free(d);
	tl_test_tmpdir_done(top);
}
END_TEST

START_TEST(test_envelope_and_window)
{
	static const unsigned char junk[] = { 0x8b, 0xa3, 'f', 'm', 't', 0xcc };
	struct tl_event ev;
	struct tl_win win;
	char *spec = run_of('z', 2000), *w = why_new();

	ck_assert_int_ne(tl_env_decode(junk, sizeof(junk), &ev, w), 0);
	why_check(w, "");
	w = why_new();
	ck_assert_int_eq(tl_win_parse(spec, &win, w), TL_EINVAL);
	why_check(w, "");
	free(spec);
}
END_TEST

START_TEST(test_x509_request)
{
	char *cn = run_of('c', 3000), *key = NULL, *csr = NULL, *w = why_new();

	ck_assert_int_ne(tl_x509_request(cn, NULL, 0, &key, &csr, w), 0);
	ck_assert_ptr_null(key);
	ck_assert_ptr_null(csr);
	why_check(w, "");
	free(cn);
}
END_TEST

START_TEST(test_amqp_connect)
{
	struct tl_amqp_conf c;
	struct tl_amqp *a = NULL;
	char *w = why_new();

	/* Nothing listens on port 1 of the loopback. */
	memset(&c, 0, sizeof(c));
	snprintf(c.host, sizeof(c.host), "127.0.0.1");
	c.port = 1;
	c.timeout_ms = 2000;
	ck_assert_int_ne(tl_amqp_connect(&c, &a, w), 0);
	ck_assert_ptr_null(a);
	why_check(w, "");
}
END_TEST

static Suite *
why_suite(void)
{
	Suite *s = suite_create("why");
	TCase *tc = tcase_create("convention");

	tcase_add_test(tc, test_secret_load);
	tcase_add_test(tc, test_cconf);
	tcase_add_test(tc, test_listen_addresses);
	tcase_add_test(tc, test_log_open);
	tcase_add_test(tc, test_envelope_and_window);
	tcase_add_test(tc, test_x509_request);
	tcase_add_test(tc, test_amqp_connect);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(why_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
