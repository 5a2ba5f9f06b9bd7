/*
 * check_drv_util.c - the helpers every driver shares (drivers/util.h):
 * the bytes a composed URI gets for every byte of a name, where the
 * output ends when it is full, which setting a vector yields, reasons
 * cut at TL_WHY_MAX and joined with "; ", a bounded statement, and
 * a secret copy; the admin's client certificate (a PEM key setting, the
 * pair checked, a key in memory as a file, on an SSL_CTX) with the
 * harness's CA fixtures (tests/harness/ca.sh).  Needs no server.
 */
#define _GNU_SOURCE

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "core/error.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "drivers/tlsclient.h"
#include "drivers/util.h"
#include "tests/lib/tl_test.h"
#include "tests/lib/tl_pemtest.h"

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
	char why[TL_WHY_MAX];

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
	char why[TL_WHY_MAX], big[TL_WHY_MAX * 2];

	ck_assert_int_eq(tl_drv_why(NULL, TL_EAUTH, "x %d", 1), TL_EAUTH);
	ck_assert_int_eq(tl_drv_why(why, TL_EDRIVER, "user %s: %d", "u", 7),
	    TL_EDRIVER);
	ck_assert_str_eq(why, "user u: 7");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_int_eq(tl_drv_why(why, 0, "%s", big), 0);
	ck_assert_uint_eq(strlen(why), TL_WHY_MAX - 1);

	why[0] = '\0';
	tl_drv_why_add(why, "first %d", 1);
	ck_assert_str_eq(why, "first 1");
	tl_drv_why_add(why, "second");
	ck_assert_str_eq(why, "first 1; second");
	/* Full: cut, then nothing more. */
	tl_drv_why_add(why, "%s", big);
	ck_assert_uint_eq(strlen(why), TL_WHY_MAX - 1);
	ck_assert(strncmp(why, "first 1; second; xxx", 20) == 0);
	tl_drv_why_add(why, "more");
	ck_assert_uint_eq(strlen(why), TL_WHY_MAX - 1);
	ck_assert_ptr_null(strstr(why, "more"));
}
END_TEST

START_TEST(test_sqlf)
{
	char buf[16], why[TL_WHY_MAX];

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

/* The harness's CA fixtures in a fresh directory: its path. */
static char *
fixtures(void)
{
	char *dir = tl_test_tmpdir("drv_util_ca"), cmd[8192];
	const char *src = getenv("TALLY_SRC");

	snprintf(cmd, sizeof(cmd), "sh '%s/tests/harness/ca.sh' make '%s' "
	    ">/dev/null", src != NULL ? src : ".", dir);
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
	return dir;
}

static char *
fixture(const char *dir, const char *name)
{
	char *p = tl_test_path(dir, name), *b = tl_test_slurp(p);

	free(p);
	return b;
}

/*
 * A PEM key setting (TL_DRV_PEM_KEY, admin-key): one unencrypted key
 * block, nothing of it in why when refused.
 */
START_TEST(test_pem_key_setting)
{
	static const struct tl_drv_setting k = { "admin-key", "", 1,
	    TL_DRV_PEM_KEY, "key", 0, 0, TL_DRV_USE_ADMIN_KEY };
	char *dir = fixtures(), *key = fixture(dir, "client.key");
	char *cert = fixture(dir, "client.pem"), *two, *big, *ctl;
	char why[TL_WHY_MAX], b64[16];
	size_t n = strlen(key);

	/* The second line's first bytes: key material, never in why. */
	snprintf(b64, sizeof(b64), "%.12s", strchr(key, '\n') + 1);
	ck_assert_int_eq(tl_drv_setting_check(&k, key, why), 0);
	ck_assert_int_eq(tl_drv_setting_check(&k, cert, why), TL_EINVAL);
	ck_assert_msg(strstr(why, "not one PEM private key") != NULL, "%s",
	    why);
	ck_assert_int_eq(tl_drv_setting_check(&k, "-----BEGIN ENCRYPTED "
	    "PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
	    why), TL_EINVAL);
	ck_assert_msg(strstr(why, "encrypted") != NULL, "%s", why);
	two = calloc(1, 2 * n + 1);
	ck_assert_ptr_nonnull(two);
	memcpy(two, key, n);
	memcpy(two + n, key, n);
	ck_assert_int_eq(tl_drv_setting_check(&k, two, why), TL_EINVAL);
	ck_assert_ptr_null(strstr(why, b64));
	ctl = strdup(key);
	ck_assert_ptr_nonnull(ctl);
	ctl[40] = '\r';
	ck_assert_int_eq(tl_drv_setting_check(&k, ctl, why), TL_EINVAL);
	ck_assert_ptr_null(strstr(why, b64));
	big = calloc(1, TL_DRV_KEY_MAX + 2);
	ck_assert_ptr_nonnull(big);
	memcpy(big, key, n);
	memset(big + n, 'A', TL_DRV_KEY_MAX + 1 - n);
	ck_assert_int_eq(tl_drv_setting_check(&k, big, why), TL_EINVAL);
	ck_assert_msg(strstr(why, "8192") != NULL, "%s", why);
	ck_assert_str_eq(tl_drv_kind_name(TL_DRV_PEM_KEY), "PEM key");
	free(big);
	free(ctl);
	free(two);
	free(cert);
	free(key);
	tl_test_tmpdir_done(dir);
}
END_TEST

/*
 * The pair as tl_drv_admin carries it: none, one without the other,
 * another's key, an encrypted key, a certificate that is no PEM are
 * refused before any connection; the right pair is installed on an
 * SSL_CTX, and a key given as a file lives only in memory (a memfd of
 * mode 0600, gone with its descriptor).
 */
START_TEST(test_client_cert)
{
	char *dir = fixtures(), *cert = fixture(dir, "client.pem");
	char *key = fixture(dir, "client.key");
	char *okey = fixture(dir, "client-other.key"), *enc, cmd[8192];
	char why[TL_WHY_MAX], subj[512], path[64], b64[16], *back;
	struct stat st;
	SSL_CTX *ctx;
	int have = -1, fd = -1, before;

	snprintf(b64, sizeof(b64), "%.12s", strchr(key, '\n') + 1);
	ck_assert_int_eq(tl_drv_client_cert_check(NULL, NULL, &have, why), 0);
	ck_assert_int_eq(have, 0);
	ck_assert_int_eq(tl_drv_client_cert_check("", "", &have, why), 0);
	ck_assert_int_eq(have, 0);
	ck_assert_int_eq(tl_drv_client_cert_check(cert, NULL, &have, why),
	    TL_EINVAL);
	ck_assert_msg(strstr(why, "--secret admin-key") != NULL, "%s", why);
	ck_assert_int_eq(tl_drv_client_cert_check(NULL, key, &have, why),
	    TL_EINVAL);
	ck_assert_msg(strstr(why, "admin-cert=FILE") != NULL, "%s", why);
	ck_assert_int_eq(tl_drv_client_cert_check(cert, okey, &have, why),
	    TL_EINVAL);
	ck_assert_msg(strstr(why, "not the private key") != NULL, "%s", why);
	ck_assert_int_eq(tl_drv_client_cert_check("-----BEGIN CERTIFICATE"
	    "-----\nnope\n-----END CERTIFICATE-----\n", key, &have, why),
	    TL_EINVAL);
	ck_assert_msg(strstr(why, "no PEM certificate") != NULL, "%s", why);
	snprintf(cmd, sizeof(cmd), "openssl pkey -in '%s/client.key' "
	    "-aes256 -passout pass:secret -out '%s/enc.key' 2>/dev/null",
	    dir, dir);
	ck_assert_int_eq(system(cmd), 0);
	enc = fixture(dir, "enc.key");
	ck_assert_int_eq(tl_drv_client_cert_check(cert, enc, &have, why),
	    TL_EINVAL);
	ck_assert_msg(strstr(why, "unencrypted") != NULL, "%s", why);
	ck_assert_int_eq(have, 0);
	ck_assert_int_eq(tl_drv_client_cert_check(cert, key, &have, why), 0);
	ck_assert_int_eq(have, 1);
	ck_assert_int_eq(tl_drv_client_cert_subject(cert, subj,
	    sizeof(subj)), 0);
	ck_assert_msg(strstr(subj, "CN=tally_cert_admin") != NULL, "%s",
	    subj);

	ctx = SSL_CTX_new(TLS_client_method());
	ck_assert_ptr_nonnull(ctx);
	ck_assert_int_eq(tl_drv_client_cert_ctx(ctx, cert, okey, why),
	    TL_EINVAL);
	ck_assert_int_eq(tl_drv_client_cert_ctx(ctx, cert, key, why), 0);
	ck_assert_int_eq(SSL_CTX_check_private_key(ctx), 1);
	SSL_CTX_free(ctx);

	before = tl_test_fds();
	ck_assert_int_eq(tl_drv_pem_memfd(key, "admin-key", &fd, path,
	    sizeof(path), why), 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	/* Opened by name, as a library does: what was written. */
	back = tl_test_slurp(path);
	ck_assert_str_eq(back, key);
	free(back);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(fd);
	ck_assert_int_eq(tl_test_fds(), before);
	ck_assert_int_ne(access(path, F_OK), 0);
	ck_assert_ptr_null(strstr(why, b64));

	free(enc);
	free(okey);
	free(key);
	free(cert);
	tl_test_tmpdir_done(dir);
}
END_TEST

/*
 * The password policy (issue 28, item 4): each driver whose credential
 * tally generates declares password-length and password-alphabet; a
 * password has the length asked for, only the alphabet's characters,
 * every character of it in a large enough sample (uniform, no bias a
 * test this size sees), one of each class for symbols; what assign
 * refuses is refused here too.
 */
START_TEST(test_password_policy)
{
	static const char *const drivers[] = { "postgres", "mariadb",
	    "rabbitmq", "redis", "ceph-rgw" };
	static const struct {
		const char *alphabet, *chars;
	} al[] = {
		{ "base64url", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
		    "vwxyz0123456789-_" },
		{ "alnum", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxy"
		    "z0123456789" },
		{ "hex", "0123456789abcdef" },
		{ "symbols", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuv"
		    "wxyz0123456789-_.~" },
	};
	char pw[TL_PASSWORD_MAX + 1], why[TL_WHY_MAX], len[8];
	const struct tl_drv_decl *d;
	size_t i, a, k;

	for (i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++) {
		d = tl_drv_decl_find(drivers[i]);
		ck_assert_ptr_nonnull(d);
		ck_assert_msg(tl_drv_setting_find(d->settings,
		    "password-length") != NULL && tl_drv_setting_find(
		    d->settings, "password-alphabet") != NULL,
		    "%s declares no password policy", drivers[i]);
		/* The default: what every grant had before the policy. */
		ck_assert_int_eq(tl_drv_password(d, NULL, pw, why), 0);
		ck_assert_uint_eq(strlen(pw), 32);
		ck_assert_uint_eq(strspn(pw, al[0].chars), 32);
	}
	/* A driver tally does not generate a credential for: none. */
	d = tl_drv_decl_find("oidc");
	ck_assert_ptr_null(tl_drv_setting_find(d->settings, "password-length"));

	d = tl_drv_decl_find("postgres");
	for (a = 0; a < sizeof(al) / sizeof(al[0]); a++) {
		int seen[256] = { 0 };
		size_t nchars = strlen(al[a].chars), rounds;

		for (rounds = 0; rounds < 200; rounds++) {
			const char *sv[] = { "password-length", "128",
			    "password-alphabet", al[a].alphabet, NULL };
			int cl = 0;

			ck_assert_int_eq(tl_drv_password(d, sv, pw, why), 0);
			ck_assert_uint_eq(strlen(pw), 128);
			ck_assert_msg(strspn(pw, al[a].chars) == 128,
			    "%s: a character outside it in %s", al[a].alphabet,
			    pw);
			for (k = 0; k < 128; k++) {
				unsigned char c = (unsigned char)pw[k];

				seen[c]++;
				cl |= c >= 'a' && c <= 'z' ? 1 : c >= 'A' &&
				    c <= 'Z' ? 2 : c >= '0' && c <= '9' ? 4 : 8;
			}
			if (strcmp(al[a].alphabet, "symbols") == 0)
				ck_assert_int_eq(cl, 15);
		}
		/* 25,600 draws: each char about 25600 / n times, none absent. */
		for (k = 0; k < nchars; k++)
			ck_assert_msg(seen[(unsigned char)al[a].chars[k]] >
			    (int)(25600 / nchars / 2), "%s: '%c' drawn %d times "
			    "of 25600", al[a].alphabet, al[a].chars[k],
			    seen[(unsigned char)al[a].chars[k]]);
	}
	/* Symbols at the shortest length still hold every class. */
	for (k = 0; k < 2000; k++) {
		const char *sv[] = { "password-length", "24",
		    "password-alphabet", "symbols", NULL };

		ck_assert_int_eq(tl_drv_password(d, sv, pw, why), 0);
		ck_assert_uint_eq(strlen(pw), 24);
		ck_assert_msg(strpbrk(pw, "-_.~") != NULL &&
		    strpbrk(pw, "0123456789") != NULL &&
		    strpbrk(pw, "abcdefghijklmnopqrstuvwxyz") != NULL &&
		    strpbrk(pw, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != NULL,
		    "symbols without one of each class: %s", pw);
	}
	/* Out of bounds: refused, with the setting and the range named. */
	for (k = 0; k < 4; k++) {
		const char *bad[] = { "23", "129", "x", "0" };
		const char *sv[] = { "password-length", bad[k], NULL };

		ck_assert_int_eq(tl_drv_password(d, sv, pw, why), TL_EINVAL);
		ck_assert_str_eq(pw, "");
		ck_assert_msg(strstr(why, "password-length") != NULL &&
		    strstr(why, "24-128") != NULL, "why: %s", why);
		ck_assert_int_ne(tl_drv_setting_check(tl_drv_setting_find(
		    d->settings, "password-length"), bad[k], why), 0);
	}
	{
		const char *sv[] = { "password-alphabet", "emoji", NULL };

		ck_assert_int_eq(tl_drv_password(d, sv, pw, why), TL_EINVAL);
		ck_assert_msg(strstr(why, "expected base64url, alnum, hex or "
		    "symbols") != NULL, "why: %s", why);
	}
	snprintf(len, sizeof(len), "%d", TL_DRV_PASSWORD_MIN);
	{
		const char *sv[] = { "password-length", len,
		    "password-alphabet", "hex", NULL };

		ck_assert_int_eq(tl_drv_password(d, sv, pw, why), 0);
		ck_assert_uint_eq(strlen(pw), TL_DRV_PASSWORD_MIN);
	}
	/* The generator itself refuses what would bias or overflow. */
	ck_assert_int_eq(tl_secret_password_of(pw, 10, "aa", 0), TL_EINVAL);
	ck_assert_int_eq(tl_secret_password_of(pw, 10, "a", 0), TL_EINVAL);
	ck_assert_int_eq(tl_secret_password_of(pw, TL_PASSWORD_MAX + 1, "ab",
	    0), TL_EINVAL);
	ck_assert_int_eq(tl_secret_password_of(pw, 0, "ab", 0), TL_EINVAL);
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
	tcase_add_test(tc, test_pem_key_setting);
	tcase_add_test(tc, test_client_cert);
	tcase_add_test(tc, test_password_policy);
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
