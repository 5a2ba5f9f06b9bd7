/*
 * check_drv_ceph.c - the ceph-rgw driver against a real Ceph RGW.
 *
 * The server: TALLY_TEST_RGW_ENDPOINT, _ACCESS and _SECRETFILE when set;
 * otherwise this suite starts its own with tests/harness/ceph.sh under
 * $TALLY_TMP on a free port, once per run (an unchecked fixture: a
 * server that cannot start fails every case), and stops it at exit.
 *
 * What happens out of band (an operator suspends a user, a consumer
 * reads another's bucket) goes over libcurl's SigV4 here, with the
 * admin's or the consumer's keys; the driver is reached only through
 * its ops table.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "lib/tl_fence.h"
#include "lib/tl_test.h"

static char	 s_endpoint[256], s_host[64], s_port[16], s_ak[128],
		 s_sk[256];
static char	*s_dir;
static int	 s_tried, s_ok;
static char	 s_err[9000];
static pid_t	 s_parent;
static const struct tl_drv_ops *drv;
static const char *s_settings[8];

/* --- the server ------------------------------------------------------ */

/* A port p with p..p+7 free (the harness takes PORT..PORT+7). */
static int
free_ports(void)
{
	struct sockaddr_in sa;
	int fd, base, i, ok;

	for (base = 20000 + (int)(getpid() % 20000); base < 65000;
	    base += 8) {
		ok = 1;
		/* PORT..PORT+6 (ceph.sh), PORT+7 (radosgw's TLS endpoint) */
		for (i = 0; i < 8 && ok; i++) {
			if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
				return -1;
			memset(&sa, 0, sizeof(sa));
			sa.sin_family = AF_INET;
			sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			sa.sin_port = htons((uint16_t)(base + i));
			ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
			close(fd);
		}
		if (ok)
			return base;
	}
	return -1;
}

static int
server_start(void)
{
	const char *e = getenv("TALLY_TEST_RGW_ENDPOINT");
	const char *a = getenv("TALLY_TEST_RGW_ACCESS");
	const char *sf = getenv("TALLY_TEST_RGW_SECRETFILE");
	const char *h = getenv("TALLY_TEST_RGW_HOST");
	const char *p = getenv("TALLY_TEST_RGW_PORT");
	char file[4200], port[16];
	int pn;

	if (e != NULL && *e != '\0' && a != NULL && sf != NULL && h != NULL &&
	    p != NULL) {
		snprintf(s_endpoint, sizeof(s_endpoint), "%s", e);
		snprintf(s_ak, sizeof(s_ak), "%s", a);
		snprintf(s_host, sizeof(s_host), "%s", h);
		snprintf(s_port, sizeof(s_port), "%s", p);
		if (tl_test_read_line(sf, s_sk, sizeof(s_sk)) != 0) {
			snprintf(s_err, sizeof(s_err), "cannot read %s", sf);
			return -1;
		}
		return 0;
	}
	if ((pn = free_ports()) <= 0) {
		snprintf(s_err, sizeof(s_err), "no free ports");
		return -1;
	}
	snprintf(port, sizeof(port), "%d", pn);
	s_dir = tl_test_tmpdir("cephdrv");
	if (tl_test_harness_run("ceph.sh", "start", s_dir, port) != 0) {
		snprintf(s_err, sizeof(s_err), "%s start %s %s failed",
		    tl_test_harness("ceph.sh"), s_dir, port);
		return -1;
	}
	snprintf(s_host, sizeof(s_host), "127.0.0.1");
	snprintf(s_port, sizeof(s_port), "%s", port);
	snprintf(s_endpoint, sizeof(s_endpoint), "http://127.0.0.1:%s", port);
	snprintf(file, sizeof(file), "%s/env", s_dir);
	{
		FILE *f = fopen(file, "r");
		char line[512];

		if (f == NULL) {
			snprintf(s_err, sizeof(s_err), "no %s", file);
			return -1;
		}
		while (fgets(line, sizeof(line), f) != NULL)
			if (strncmp(line, "export TALLY_TEST_RGW_ACCESS=", 29)
			    == 0) {
				line[strcspn(line, "\r\n")] = '\0';
				snprintf(s_ak, sizeof(s_ak), "%.100s", line + 29);
			}
		fclose(f);
	}
	snprintf(file, sizeof(file), "%s/admin.secret", s_dir);
	if (tl_test_read_line(file, s_sk, sizeof(s_sk)) != 0 ||
	    s_ak[0] == '\0') {
		snprintf(s_err, sizeof(s_err), "cannot read the admin key");
		return -1;
	}
	return 0;
}

static void
server_stop(void)
{
	if (s_dir == NULL || getpid() != s_parent)
		return;
	if (tl_test_harness_run("ceph.sh", "stop", s_dir, NULL) != 0)
		fprintf(stderr, "check_drv_ceph: ceph.sh stop %s failed\n",
		    s_dir);
	tl_test_tmpdir_done(s_dir);
	s_dir = NULL;
}

static void
server_up(void)
{
	if (!s_tried) {
		s_tried = 1;
		s_ok = server_start() == 0;
	}
	if (!s_ok)
		ck_abort_msg("no Ceph RGW to test against: %s", s_err);
	s_settings[0] = "admin-access-key";
	s_settings[1] = s_ak;
	s_settings[2] = "region";
	s_settings[3] = "default";
	s_settings[4] = NULL;
}

/* --- helpers --------------------------------------------------------- */

#define ck_rc(rc, want, why) do {					\
	int rc_ = (rc), want_ = (want);					\
	ck_assert_msg(rc_ == want_, "%s:%d: rc %d (%s), wanted %d (%s); "\
	    "why: %s", __FILE__, __LINE__, rc_, tl_strerror(rc_), want_,	\
	    tl_strerror(want_), (why));					\
} while (0)

static const char *secrets[256];

static void
secrets_reset(void)
{
	memset(secrets, 0, sizeof(secrets));
}

static void
secret_add(const char *pw)
{
	size_t i;

	for (i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
		if (secrets[i] == NULL || secrets[i] == pw) {
			secrets[i] = pw;
			return;
		}
	ck_abort_msg("too many secrets");
}

/* No reason may hold a secret key the test used. */
static void
ck_why(const char *why)
{
	size_t i;

	for (i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
		if (secrets[i] != NULL && *secrets[i] != '\0')
			ck_assert_msg(strstr(why, secrets[i]) == NULL,
			    "a secret leaked into why: %s", why);
}

struct grant {
	char	id[160], login[64], bucket[64], pw[TL_PASSWORD_MAX + 1],
		ak[64];
	struct tl_drv_grant g;
};

static void
grant_keys(struct grant *gr)
{
	static const struct tl_drv_endpoint e0 = { NULL, NULL, NULL };

	ck_assert_int_eq(drv->decl->compose("access-key", &e0, &gr->g, gr->ak,
	    sizeof(gr->ak)), 0);
}

static void
grant_init(struct grant *gr, const char *tag)
{
	static int n;
	struct tl_drv_name_in in;
	struct tl_drv_names out;
	char why[TL_WHY_MAX];

	n++;
	snprintf(gr->id, sizeof(gr->id), "app-%s-%d-%d/files", tag,
	    (int)getpid(), n);
	memset(&in, 0, sizeof(in));
	in.grant = gr->id;
	in.resource = "files";
	in.node = "";
	in.recorded = "";
	in.version = 1;
	in.scheme = TL_DRV_NAMING;
	ck_rc(drv->decl->names(&in, &out, why), 0, why);
	snprintf(gr->login, sizeof(gr->login), "%s", out.login);
	snprintf(gr->bucket, sizeof(gr->bucket), "%s", out.resource);
	tl_secret_password(gr->pw);
	secret_add(gr->pw);
	/* What a case does not set is zero (adopting, adopt_mesh, ...). */
	memset(&gr->g, 0, sizeof(gr->g));
	gr->g.resource = gr->bucket;
	gr->g.owner = "";
	gr->g.login = gr->login;
	gr->g.password = gr->pw;
	gr->g.grant = gr->id;
	gr->g.adopt_unnamed = 0;
	grant_keys(gr);
}

static void *
drv_open(void)
{
	struct tl_drv_admin a = { s_host, s_port, "", s_sk, s_settings };
	char why[TL_WHY_MAX];
	void *h = NULL;

	secret_add(s_sk);
	ck_rc(drv->open(&a, &h, why), 0, why);
	ck_why(why);
	return h;
}

static struct tl_drv_endpoint ep = { NULL, NULL, NULL };

static enum tl_drv_drift
check(void *h, const struct tl_drv_grant *g, char *why)
{
	enum tl_drv_drift d = TL_DRIFT_NONE, db = TL_DRIFT_NONE;
	char wb[1][TL_WHY_MAX];

	ep.host = s_host;
	ep.port = s_port;
	ck_rc(drv->check(h, g, &ep, &d, why), 0, why);
	ck_why(why);
	ck_rc(drv->check_bulk(h, g, 1, &db, wb), 0, wb[0]);
	ck_why(wb[0]);
	/* Bulk does not go as the consumer; otherwise the same finding. */
	if (d == db || (db == TL_DRIFT_NONE && d != TL_DRIFT_MISSING))
		return d;
	ck_abort_msg("check %d (%s), check_bulk %d (%s)", d, why, db, wb[0]);
	return d;
}

/* Up to two more request headers for the next http() (NULL: none). */
static const char *s_extra, *s_extra2;

struct body {
	char	buf[65536];
	size_t	len;
};

static size_t
on_body(char *d, size_t sz, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = sz * n;

	if (b->len + add >= sizeof(b->buf))
		add = sizeof(b->buf) - 1 - b->len;
	memcpy(b->buf + b->len, d, add);
	b->len += add;
	b->buf[b->len] = '\0';
	return sz * n;
}

/*
 * A signed request (query already sorted and escaped), as ak/sk (NULL:
 * the admin); body data (NULL: none).  The HTTP status.
 */
static long
http(const char *method, const char *pathq, const char *ak, const char *sk,
    const char *data, struct body *out)
{
	static struct body scratch;
	struct curl_slist *hd = NULL;
	char url[2048];
	long st = 0;
	CURL *c = curl_easy_init();

	ck_assert_ptr_nonnull(c);
	if (out == NULL)
		out = &scratch;
	out->len = 0;
	out->buf[0] = '\0';
	snprintf(url, sizeof(url), "%s%s", s_endpoint, pathq);
	hd = curl_slist_append(hd, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	if (s_extra != NULL)
		hd = curl_slist_append(hd, s_extra);
	if (s_extra2 != NULL)
		hd = curl_slist_append(hd, s_extra2);
	s_extra = s_extra2 = NULL;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, "aws:amz:default:s3");
	curl_easy_setopt(c, CURLOPT_USERNAME, ak != NULL ? ak : s_ak);
	curl_easy_setopt(c, CURLOPT_PASSWORD, sk != NULL ? sk : s_sk);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (data != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(data));
	}
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	curl_slist_free_all(hd);
	curl_easy_cleanup(c);
	return st;
}

/* The admin's request; it must succeed. */
static void
admin(const char *method, const char *pathq)
{
	struct body b;
	long st = http(method, pathq, NULL, NULL, NULL, &b);

	ck_assert_msg(st >= 200 && st < 300, "admin %s %s: %ld %s", method,
	    pathq, st, b.buf);
}

static long
as(const struct grant *gr, const char *method, const char *pathq,
    const char *data)
{
	return http(method, pathq, gr->ak, gr->pw, data, NULL);
}

static int
user_exists(const char *uid, struct body *b)
{
	char pq[256];

	snprintf(pq, sizeof(pq), "/admin/user?uid=%s", uid);
	return http("GET", pq, NULL, NULL, NULL, b) == 200;
}

static int
bucket_exists(const char *bucket)
{
	char pq[256];

	snprintf(pq, sizeof(pq), "/admin/bucket?bucket=%s", bucket);
	return http("GET", pq, NULL, NULL, NULL, NULL) == 200;
}

static void
create_ok(void *h, const struct tl_drv_grant *g)
{
	char why[TL_WHY_MAX];

	ck_rc(drv->create(h, g, why), 0, why);
	ck_why(why);
}

/* --- cases ----------------------------------------------------------- */

START_TEST(test_create_twice)
{
	struct grant a;
	struct body b;
	char why[TL_WHY_MAX], pq[256];
	void *h = drv_open();

	grant_init(&a, "twice");
	create_ok(h, &a.g);
	create_ok(h, &a.g);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert(user_exists(a.login, &b));
	ck_assert_msg(strstr(b.buf, a.id) != NULL, "no mark: %s", b.buf);
	ck_assert_ptr_nonnull(strstr(b.buf, "\"max_buckets\":1"));
	/* One key: the second create added nothing. */
	ck_assert_ptr_null(strstr(strstr(b.buf, "\"access_key\"") + 1,
	    "\"access_key\""));
	snprintf(pq, sizeof(pq), "/%s/hello.txt", a.bucket);
	ck_assert_int_eq(as(&a, "PUT", pq, "hello"), 200);
	ck_assert_int_eq(http("GET", pq, a.ak, a.pw, NULL, &b), 200);
	ck_assert_str_eq(b.buf, "hello");
	/* A consumer may not make a second bucket. */
	snprintf(pq, sizeof(pq), "/%s-2", a.bucket);
	ck_assert_int_ne(as(&a, "PUT", pq, NULL), 200);
	drv->close(h);
}
END_TEST

START_TEST(test_half_done)
{
	struct grant a, b;
	char why[TL_WHY_MAX], pq[512];
	void *h = drv_open();

	/* The user with its mark, no key, no bucket. */
	grant_init(&a, "half");
	{
		char mark[200], *e;

		snprintf(mark, sizeof(mark), "tally grant %s", a.id);
		e = curl_easy_escape(NULL, mark, 0);
		snprintf(pq, sizeof(pq), "/admin/user?display-name=%s&"
		    "generate-key=false&max-buckets=1&uid=%s", e, a.login);
		curl_free(e);
	}
	admin("PUT", pq);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_MISSING);
	create_ok(h, &a.g);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	/* User and key made, the bucket not: create completes it. */
	grant_init(&b, "half2");
	create_ok(h, &b.g);
	snprintf(pq, sizeof(pq), "/admin/bucket?bucket=%s&purge-objects=true",
	    b.bucket);
	admin("DELETE", pq);
	ck_assert_int_eq(check(h, &b.g, why), TL_DRIFT_MISSING);
	create_ok(h, &b.g);
	ck_assert_int_eq(check(h, &b.g, why), TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

START_TEST(test_foreign_refused)
{
	struct grant a, b, c;
	struct body bd;
	char why[TL_WHY_MAX], pq[512];
	enum tl_drv_drift d;
	void *h = drv_open();

	/* A user under the grant's uid that tally did not make. */
	grant_init(&a, "foreign");
	snprintf(pq, sizeof(pq), "/admin/user?display-name=somebody&uid=%s",
	    a.login);
	admin("PUT", pq);
	ck_rc(drv->create(h, &a.g, why), TL_EINVAL, why);
	ck_rc(drv->revoke(h, &a.g, 1, why), TL_EINVAL, why);
	ck_rc(drv->check(h, &a.g, &ep, &d, why), TL_EINVAL, why);
	ck_assert(user_exists(a.login, &bd));
	ck_assert_ptr_nonnull(strstr(bd.buf, "somebody"));
	ck_assert_ptr_null(strstr(bd.buf, a.ak));
	/* A user marked for another grant. */
	grant_init(&b, "other");
	create_ok(h, &b.g);
	grant_init(&c, "other2");
	c.g.login = b.login;
	ck_rc(drv->create(h, &c.g, why), TL_EINVAL, why);
	ck_rc(drv->retire_credential(h, &c.g, why), TL_EINVAL, why);
	ck_assert_int_eq(check(h, &b.g, why), TL_DRIFT_NONE);
	/* A bucket owned by someone else: c's own user, b's bucket. */
	c.g.login = c.login;
	c.g.resource = b.bucket;
	ck_rc(drv->create(h, &c.g, why), TL_EINVAL, why);
	ck_assert_int_eq(check(h, &b.g, why), TL_DRIFT_NONE);
	/* The unnamed mark is adopted only when asked. */
	grant_init(&c, "unnamed");
	snprintf(pq, sizeof(pq), "/admin/user?display-name=tally%%20grant&"
	    "uid=%s", c.login);
	admin("PUT", pq);
	ck_rc(drv->create(h, &c.g, why), TL_EINVAL, why);
	c.g.adopt_unnamed = 1;
	create_ok(h, &c.g);
	c.g.adopt_unnamed = 0;
	ck_assert_int_eq(check(h, &c.g, why), TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

START_TEST(test_hostile_names)
{
	static const char *const bad[] = { "a&uid=tally-admin", "../admin",
		"x y", "UPPER", "ab", "a/b", "a?b", NULL };
	struct tl_drv_name_in in;
	struct tl_drv_names out;
	struct grant a;
	struct body b;
	char why[TL_WHY_MAX], id[200];
	size_t i;
	void *h = drv_open();

	/* Logins and buckets that are not tally's names are refused. */
	grant_init(&a, "hostile");
	for (i = 0; bad[i] != NULL; i++) {
		a.g.login = bad[i];
		ck_rc(drv->create(h, &a.g, why), TL_EINVAL, why);
		a.g.login = a.login;
		a.g.resource = bad[i];
		ck_rc(drv->create(h, &a.g, why), TL_EINVAL, why);
		a.g.resource = a.bucket;
	}
	ck_assert(!user_exists("tally-admin-x", &b));
	/* A hostile requirement name gives a clean name, or a refusal. */
	memset(&in, 0, sizeof(in));
	in.grant = "m/r";
	in.resource = "Files&uid=x?/..";
	in.node = "";
	in.recorded = "";
	in.version = 1;
	in.scheme = TL_DRV_NAMING;
	if (drv->decl->names(&in, &out, why) == 0) {
		ck_assert_msg(strspn(out.resource,
		    "abcdefghijklmnopqrstuvwxyz0123456789-") ==
		    strlen(out.resource), "bucket %s", out.resource);
	}
	/* A hostile grant id reaches the mark escaped, byte for byte. */
	snprintf(id, sizeof(id), "m&uid=tally-admin%%20x=1;'\"/r-%d",
	    (int)getpid());
	a.g.grant = id;
	create_ok(h, &a.g);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert(user_exists(a.login, &b));
	ck_assert_msg(strstr(b.buf, "m&uid=tally-admin%20x=1;'\\\"/r-") !=
	    NULL, "mark: %s", b.buf);
	drv->close(h);
}
END_TEST

START_TEST(test_isolation)
{
	struct grant a, b;
	char why[TL_WHY_MAX], pq[256];
	void *h = drv_open();

	grant_init(&a, "iso-a");
	grant_init(&b, "iso-b");
	create_ok(h, &a.g);
	create_ok(h, &b.g);
	snprintf(pq, sizeof(pq), "/%s/secret.txt", b.bucket);
	ck_assert_int_eq(as(&b, "PUT", pq, "b's data"), 200);
	/* A's keys on B's bucket: read, list, write, delete. */
	ck_assert_int_eq(as(&a, "GET", pq, NULL), 403);
	ck_assert_int_eq(as(&a, "PUT", pq, "overwritten"), 403);
	ck_assert_int_eq(as(&a, "DELETE", pq, NULL), 403);
	snprintf(pq, sizeof(pq), "/%s", b.bucket);
	ck_assert_int_eq(as(&a, "GET", pq, NULL), 403);
	ck_assert_int_eq(as(&a, "HEAD", pq, NULL), 403);
	ck_assert_int_eq(as(&a, "DELETE", pq, NULL), 403);
	/* And B's object is intact. */
	snprintf(pq, sizeof(pq), "/%s/secret.txt", b.bucket);
	ck_assert_int_eq(as(&b, "GET", pq, NULL), 200);
	/* Both check clean, which includes the canary's 403. */
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert_ptr_nonnull(strstr(why, "canary"));
	ck_assert_int_eq(check(h, &b.g, why), TL_DRIFT_NONE);
	/* The canary made readable to all: A reaches it, a drift. */
	{
		unsigned char hh[8];
		char hx[17], canary[64];
		enum tl_drv_drift d;

		crypto_generichash(hh, sizeof(hh), (const unsigned char *)s_ak,
		    strlen(s_ak), NULL, 0);
		sodium_bin2hex(hx, sizeof(hx), hh, sizeof(hh));
		snprintf(canary, sizeof(canary), "tally-canary-%s", hx);
		snprintf(pq, sizeof(pq), "/%s", canary);
		ck_assert_int_eq(as(&a, "HEAD", pq, NULL), 403);
		snprintf(pq, sizeof(pq), "/%s?acl=", canary);
		s_extra = "x-amz-acl: public-read-write";
		ck_assert_int_eq(http("PUT", pq, NULL, NULL, "", NULL), 200);
		snprintf(pq, sizeof(pq), "/%s", canary);
		ck_assert_int_eq(as(&a, "HEAD", pq, NULL), 200);
		ep.host = s_host;
		ep.port = s_port;
		ck_rc(drv->check(h, &a.g, &ep, &d, why), 0, why);
		ck_assert_int_eq(d, TL_DRIFT_PRIVILEGES);
		ck_assert_ptr_nonnull(strstr(why, "canary"));
		snprintf(pq, sizeof(pq), "/%s?acl=", canary);
		s_extra = "x-amz-acl: private";
		ck_assert_int_eq(http("PUT", pq, NULL, NULL, "", NULL), 200);
		ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	}
	/* The consumer's requests go to the endpoint it was given. */
	{
		struct tl_drv_endpoint far = { "127.0.0.1", "1", NULL };
		enum tl_drv_drift d;

		ck_rc(drv->check(h, &a.g, &far, &d, why), TL_EUNREACH, why);
		ck_assert_ptr_nonnull(strstr(why, "127.0.0.1:1"));
		/* And the admin's session is back on its own. */
		ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	}
	drv->close(h);
}
END_TEST

START_TEST(test_drift)
{
	struct grant a;
	char why[TL_WHY_MAX], pq[512];
	void *h = drv_open();

	grant_init(&a, "drift");
	create_ok(h, &a.g);
	/* The key removed: a credential drift; set_password re-adds it. */
	snprintf(pq, sizeof(pq), "/admin/user?access-key=%s&key=&"
	    "key-type=s3&uid=%s", a.ak, a.login);
	admin("DELETE", pq);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_CREDENTIAL);
	ck_assert_ptr_nonnull(strstr(why, "no key"));
	ck_rc(drv->set_password(h, &a.g, why), 0, why);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	/* Suspended: privileges; fix_privileges lifts it. */
	snprintf(pq, sizeof(pq), "/admin/user?suspended=1&uid=%s", a.login);
	admin("POST", pq);
	snprintf(pq, sizeof(pq), "/%s", a.bucket);
	ck_assert_int_eq(as(&a, "HEAD", pq, NULL), 403);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_PRIVILEGES);
	ck_assert_ptr_nonnull(strstr(why, "suspended"));
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert_int_eq(as(&a, "HEAD", pq, NULL), 200);
	/* Caps given: privileges, removed by fix_privileges. */
	snprintf(pq, sizeof(pq), "/admin/user?caps=&uid=%s&"
	    "user-caps=users%%3D%%2A", a.login);
	admin("PUT", pq);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	/* A bucket policy: privileges (check only), fixed. */
	snprintf(pq, sizeof(pq), "/%s?policy=", a.bucket);
	{
		char pol[600];

		snprintf(pol, sizeof(pol), "{\"Version\":\"2012-10-17\","
		    "\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":"
		    "\"*\",\"Action\":\"s3:GetObject\",\"Resource\":"
		    "\"arn:aws:s3:::%s/*\"}]}", a.bucket);
		ck_assert_int_lt(as(&a, "PUT", pq, pol), 300);
	}
	{
		enum tl_drv_drift d;

		ep.host = s_host;
		ep.port = s_port;
		ck_rc(drv->check(h, &a.g, &ep, &d, why), 0, why);
		ck_assert_int_eq(d, TL_DRIFT_PRIVILEGES);
		ck_assert_ptr_nonnull(strstr(why, "policy"));
	}
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	/* The bucket deleted: missing, and no repair makes it again. */
	snprintf(pq, sizeof(pq), "/admin/bucket?bucket=%s&purge-objects=true",
	    a.bucket);
	admin("DELETE", pq);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_MISSING);
	ck_assert_ptr_nonnull(strstr(why, "gone"));
	ck_rc(drv->set_password(h, &a.g, why), 0, why);
	drv->fix_privileges(h, &a.g, why);
	ck_assert(!bucket_exists(a.bucket));
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_MISSING);
	drv->close(h);
}
END_TEST

/* An anonymous (unsigned) GET of pathq: its HTTP status. */
static long
anon_get(const char *pathq)
{
	struct body b;
	char url[2048];
	long st = 0;
	CURL *c = curl_easy_init();

	ck_assert_ptr_nonnull(c);
	b.len = 0;
	b.buf[0] = '\0';
	snprintf(url, sizeof(url), "%s%s", s_endpoint, pathq);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	curl_easy_cleanup(c);
	return st;
}

/*
 * Issue 21 item 22: a bucket ACL set by its owner, public-read (anyone
 * lists and reads it) or a READ grant to another consumer, is a
 * privileges drift that check names, and fix_privileges makes the ACL
 * private again: the anonymous client and the other consumer are
 * refused, the owner is not.
 */
START_TEST(test_acl)
{
	struct grant a, b;
	char why[TL_WHY_MAX], pq[512], hd[256], hd2[256];
	void *h = drv_open();
	enum tl_drv_drift d;

	grant_init(&a, "acl");
	grant_init(&b, "aclb");
	create_ok(h, &a.g);
	create_ok(h, &b.g);
	snprintf(pq, sizeof(pq), "/%s/o.txt", a.bucket);
	ck_assert_int_eq(as(&a, "PUT", pq, "a-data"), 200);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);

	/* public-read: an anonymous client lists the bucket. */
	snprintf(pq, sizeof(pq), "/%s?acl=", a.bucket);
	s_extra = "x-amz-acl: public-read";
	ck_assert_int_eq(as(&a, "PUT", pq, ""), 200);
	snprintf(pq, sizeof(pq), "/%s", a.bucket);
	ck_assert_int_eq(anon_get(pq), 200);
	ep.host = s_host;
	ep.port = s_port;
	ck_rc(drv->check(h, &a.g, &ep, &d, why), 0, why);
	ck_assert_msg(d == TL_DRIFT_PRIVILEGES, "public-read: %d %s", d, why);
	ck_assert_msg(strstr(why, "READ to group AllUsers") != NULL, "%s", why);
	/* The bulk check reads it on the admin side too. */
	{
		enum tl_drv_drift db = TL_DRIFT_NONE;
		char wb[1][TL_WHY_MAX];

		ck_rc(drv->check_bulk(h, &a.g, 1, &db, wb), 0, wb[0]);
		ck_assert_msg(db == TL_DRIFT_PRIVILEGES, "bulk: %d %s", db,
		    wb[0]);
		ck_assert_msg(strstr(wb[0], "AllUsers") != NULL, "%s", wb[0]);
	}
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert_int_eq(anon_get(pq), 403);
	snprintf(pq, sizeof(pq), "/%s/o.txt", a.bucket);
	ck_assert_int_eq(anon_get(pq), 403);
	ck_assert_int_eq(as(&a, "GET", pq, NULL), 200);

	/* READ to another consumer beside the owner's: b lists a's bucket. */
	snprintf(pq, sizeof(pq), "/%s?acl=", a.bucket);
	snprintf(hd, sizeof(hd), "x-amz-grant-read: id=\"%s\"", b.login);
	snprintf(hd2, sizeof(hd2), "x-amz-grant-full-control: id=\"%s\"",
	    a.login);
	s_extra = hd;
	s_extra2 = hd2;
	ck_assert_int_eq(as(&a, "PUT", pq, ""), 200);
	snprintf(pq, sizeof(pq), "/%s", a.bucket);
	ck_assert_int_eq(as(&b, "GET", pq, NULL), 200);
	ck_rc(drv->check(h, &a.g, &ep, &d, why), 0, why);
	ck_assert_msg(d == TL_DRIFT_PRIVILEGES, "READ to b: %d %s", d, why);
	ck_assert_msg(strstr(why, b.login) != NULL, "%s", why);
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert_int_eq(as(&b, "GET", pq, NULL), 403);
	ck_assert_int_eq(as(&a, "GET", pq, NULL), 200);
	drv->close(h);
}
END_TEST

START_TEST(test_bulk)
{
	struct grant g[5];
	struct tl_drv_grant gs[5];
	enum tl_drv_drift d[5];
	char why[5][TL_WHY_MAX], pq[512];
	size_t i;
	void *h = drv_open();

	for (i = 0; i < 5; i++) {
		grant_init(&g[i], "bulk");
		create_ok(h, &g[i].g);
		gs[i] = g[i].g;
	}
	snprintf(pq, sizeof(pq), "/admin/user?suspended=1&uid=%s", g[1].login);
	admin("POST", pq);
	snprintf(pq, sizeof(pq), "/admin/user?access-key=%s&key=&"
	    "key-type=s3&uid=%s", g[2].ak, g[2].login);
	admin("DELETE", pq);
	snprintf(pq, sizeof(pq), "/admin/bucket?bucket=%s&purge-objects=true",
	    g[3].bucket);
	admin("DELETE", pq);
	ck_rc(drv->check_bulk(h, gs, 5, d, why), 0, why[0]);
	ck_assert_int_eq(d[0], TL_DRIFT_NONE);
	ck_assert_int_eq(d[1], TL_DRIFT_PRIVILEGES);
	ck_assert_int_eq(d[2], TL_DRIFT_CREDENTIAL);
	ck_assert_int_eq(d[3], TL_DRIFT_MISSING);
	ck_assert_int_eq(d[4], TL_DRIFT_NONE);
	for (i = 0; i < 5; i++)
		ck_why(why[i]);
	drv->close(h);
}
END_TEST

START_TEST(test_rotation)
{
	struct grant a;
	char why[TL_WHY_MAX], pq[256], old_pw[TL_PASSWORD_MAX + 1],
	    old_ak[64];
	struct tl_drv_grant old;
	void *h = drv_open();

	ck_assert_int_eq(drv->decl->credential.kind,
	    TL_DRV_CRED_MULTI_PASSWORD);
	grant_init(&a, "rot");
	create_ok(h, &a.g);
	snprintf(pq, sizeof(pq), "/%s/o", a.bucket);
	ck_assert_int_eq(as(&a, "PUT", pq, "v1"), 200);
	memcpy(old_pw, a.pw, sizeof(old_pw));
	memcpy(old_ak, a.ak, sizeof(old_ak));
	tl_secret_password(a.pw);
	grant_keys(&a);
	ck_assert_str_ne(old_ak, a.ak);
	ck_rc(drv->add_credential(h, &a.g, why), 0, why);
	ck_rc(drv->add_credential(h, &a.g, why), 0, why);
	/* The overlap: both keys work on the same user's bucket. */
	ck_assert_int_eq(http("GET", pq, old_ak, old_pw, NULL, NULL), 200);
	ck_assert_int_eq(as(&a, "GET", pq, NULL), 200);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	old = a.g;
	old.password = old_pw;
	ck_assert_int_eq(check(h, &old, why), TL_DRIFT_NONE);
	ck_rc(drv->retire_credential(h, &old, why), 0, why);
	ck_rc(drv->retire_credential(h, &old, why), 0, why);
	ck_assert_int_eq(http("GET", pq, old_ak, old_pw, NULL, NULL), 403);
	ck_assert_int_eq(as(&a, "GET", pq, NULL), 200);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	tl_secret_wipe(old_pw, sizeof(old_pw));
	drv->close(h);
}
END_TEST

START_TEST(test_revoke_retain_purge)
{
	struct grant a;
	char why[TL_WHY_MAX], pq[256];
	uint64_t bytes = 0;
	int loses = -1;
	struct body b;
	void *h = drv_open();

	grant_init(&a, "revoke");
	create_ok(h, &a.g);
	snprintf(pq, sizeof(pq), "/%s/o1", a.bucket);
	ck_assert_int_eq(as(&a, "PUT", pq, "0123456789"), 200);
	ck_rc(drv->size(h, &a.g, &bytes, why), 0, why);
	ck_assert_uint_eq(bytes, 10);
	ck_rc(drv->loss(h, &a.g, 0, &loses, why), 0, why);
	ck_assert_int_eq(loses, 0);
	/* retain: the user suspended, the bucket kept with its object. */
	ck_rc(drv->revoke(h, &a.g, 0, why), 0, why);
	ck_rc(drv->revoke(h, &a.g, 0, why), 0, why);
	ck_assert_int_eq(as(&a, "GET", pq, NULL), 403);
	ck_assert(bucket_exists(a.bucket));
	ck_rc(drv->size(h, &a.g, &bytes, why), 0, why);
	ck_assert_uint_eq(bytes, 10);
	ck_assert_ptr_nonnull(strstr(why, "1 object"));
	/* Restored by create. */
	create_ok(h, &a.g);
	ck_assert_int_eq(http("GET", pq, a.ak, a.pw, NULL, &b), 200);
	ck_assert_str_eq(b.buf, "0123456789");
	/* purge: the objects, the bucket, the user. */
	ck_rc(drv->loss(h, &a.g, 1, &loses, why), 0, why);
	ck_assert_int_eq(loses, 1);
	ck_assert_ptr_nonnull(strstr(why, "1 object"));
	ck_rc(drv->revoke(h, &a.g, 1, why), 0, why);
	ck_rc(drv->revoke(h, &a.g, 1, why), 0, why);
	ck_assert(!bucket_exists(a.bucket));
	ck_assert(!user_exists(a.login, &b));
	ck_rc(drv->loss(h, &a.g, 1, &loses, why), 0, why);
	ck_assert_int_eq(loses, 0);
	drv->close(h);
}
END_TEST

START_TEST(test_compose_open_refused)
{
	struct tl_drv_admin a = { s_host, s_port, "", "wrong-secret",
	    s_settings };
	struct tl_drv_admin down = { "127.0.0.1", "1", "", s_sk,
	    s_settings };
	struct tl_drv_endpoint e = { "rgw.example", "7480", NULL };
	struct grant g;
	char why[TL_WHY_MAX], out[256];
	void *h = NULL;

	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	ck_assert_ptr_null(h);
	ck_rc(drv->open(&down, &h, why), TL_EUNREACH, why);
	grant_init(&g, "compose");
	ck_assert_int_eq(drv->decl->compose("endpoint", &e, &g.g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "http://rgw.example:7480");
	{
		/* https exactly when tallyd reaches the RGW by TLS. */
		static const char *const req[] = { "tls", "require", NULL };
		static const char *const ver[] = { "ca", "-----BEGIN "
		    "CERTIFICATE-----\n", NULL };
		static const char *const off[] = { "tls", "off", "ca",
		    "-----BEGIN CERTIFICATE-----\n", NULL };
		static const char *const lo[] = { "host", "127.0.0.1", "ca",
		    "-----BEGIN CERTIFICATE-----\n", NULL };
		struct tl_drv_endpoint t = { "rgw.example", "7487", req };

		ck_assert_int_eq(drv->decl->compose("endpoint", &t, &g.g, out,
		    sizeof(out)), 0);
		ck_assert_str_eq(out, "https://rgw.example:7487");
		t.settings = ver;
		ck_assert_int_eq(drv->decl->compose("endpoint", &t, &g.g, out,
		    sizeof(out)), 0);
		ck_assert_str_eq(out, "https://rgw.example:7487");
		t.settings = off;
		ck_assert_int_eq(drv->decl->compose("endpoint", &t, &g.g, out,
		    sizeof(out)), 0);
		ck_assert_str_eq(out, "http://rgw.example:7487");
		t.settings = lo;
		ck_assert_int_eq(drv->decl->compose("endpoint", &t, &g.g, out,
		    sizeof(out)), 0);
		ck_assert_str_eq(out, "http://rgw.example:7487");
	}
	ck_assert_int_eq(drv->decl->compose("bucket", &e, &g.g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, g.bucket);
	ck_assert_int_eq(drv->decl->compose("region", &e, &g.g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "default");
	ck_assert_int_eq(drv->decl->compose("secret-key", &e, &g.g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, g.pw);
	g.g.password = NULL;
	ck_assert_int_eq(drv->decl->compose("secret-key", &e, &g.g, out,
	    sizeof(out)), TL_EINVAL);
	ck_assert_int_eq(drv->decl->compose("access-key", &e, &g.g, out,
	    sizeof(out)), TL_EINVAL);
	ck_assert_int_eq(drv->decl->compose("nope", &e, &g.g, out,
	    sizeof(out)), TL_ENOTFOUND);
	ck_assert(tl_drv_field_secret(drv->decl, "secret-key"));
	ck_assert(!tl_drv_field_secret(drv->decl, "bucket"));
}
END_TEST

/* --- meshes and fences ---------------------------------------------- */

/* A session of mesh mesh ("": none) under fence f (NULL: none). */
static void *
drv_open_mesh(const char *mesh, const struct tl_drv_fence *f)
{
	struct tl_drv_admin a = { s_host, s_port, "", s_sk, s_settings,
	    mesh, f };
	char why[TL_WHY_MAX];
	void *h = NULL;

	secret_add(s_sk);
	ck_rc(drv->open(&a, &h, why), 0, why);
	return h;
}

static void
rand_hex(char out[33])
{
	unsigned char b[16];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, 33, b, sizeof(b));
}

/* The user's display-name (the mark) into out. */
static void
user_mark(const char *uid, char *out, size_t cap)
{
	struct body b;
	const char *p, *e;

	out[0] = '\0';
	ck_assert(user_exists(uid, &b));
	if ((p = strstr(b.buf, "\"display_name\":\"")) == NULL)
		return;
	p += 16;
	if ((e = strchr(p, '"')) != NULL)
		snprintf(out, cap, "%.*s", (int)(e - p), p);
}

static void
ck_owned_by(const char *why, const char *mesh)
{
	char want[64];

	snprintf(want, sizeof(want), "owned by mesh %.12s", mesh);
	ck_assert_msg(strstr(why, want) != NULL && strstr(why,
	    "not this one") != NULL, "why does not name mesh %.12s: %s",
	    mesh, why);
}

START_TEST(test_meshes)
{
	struct grant a, b, c;
	char m1[33], m2[33], why[TL_WHY_MAX], mark[300], want[300];
	char pq[512];
	struct body bd;
	enum tl_drv_drift d;
	void *ha, *hb;

	rand_hex(m1);
	rand_hex(m2);
	ha = drv_open_mesh(m1, NULL);
	hb = drv_open_mesh(m2, NULL);
	/* Mesh 1's grant; mesh 2's the same grant id and names, its own key. */
	grant_init(&a, "mesh");
	create_ok(ha, &a.g);
	user_mark(a.login, mark, sizeof(mark));
	snprintf(want, sizeof(want), "tally mesh %s grant %s", m1, a.id);
	ck_assert_str_eq(mark, want);
	b = a;
	tl_secret_password(b.pw);
	secret_add(b.pw);
	b.g.password = b.pw;
	b.g.login = b.login;
	b.g.resource = b.bucket;
	b.g.grant = b.id;
	grant_keys(&b);
	ck_rc(drv->create(hb, &b.g, why), TL_EREFUSED, why);
	ck_owned_by(why, m1);
	ck_rc(drv->check(hb, &b.g, &ep, &d, why), 0, why);
	ck_assert_int_eq(d, TL_DRIFT_MISSING);
	ck_owned_by(why, m1);
	{
		enum tl_drv_drift db[1];
		char wb[1][TL_WHY_MAX];

		ck_rc(drv->check_bulk(hb, &b.g, 1, db, wb), 0, wb[0]);
		ck_assert_int_eq(db[0], TL_DRIFT_MISSING);
		ck_owned_by(wb[0], m1);
	}
	ck_rc(drv->set_password(hb, &b.g, why), TL_EREFUSED, why);
	ck_owned_by(why, m1);
	ck_rc(drv->fix_privileges(hb, &b.g, why), TL_EREFUSED, why);
	ck_rc(drv->add_credential(hb, &b.g, why), TL_EREFUSED, why);
	ck_owned_by(why, m1);
	/* Mesh 2 retiring "its" old key: the one mesh 1 delivered. */
	b.g.password = a.pw;
	ck_rc(drv->retire_credential(hb, &b.g, why), TL_EREFUSED, why);
	ck_owned_by(why, m1);
	b.g.password = b.pw;
	ck_rc(drv->revoke(hb, &b.g, 0, why), TL_EREFUSED, why);
	ck_rc(drv->revoke(hb, &b.g, 1, why), TL_EREFUSED, why);
	ck_owned_by(why, m1);
	/* Mesh 1's objects as they were, and its consumer works. */
	ck_assert_int_eq(check(ha, &a.g, why), TL_DRIFT_NONE);
	ck_assert(user_exists(a.login, &bd));
	ck_assert_ptr_null(strstr(bd.buf, b.ak));
	ck_assert_ptr_null(strstr(bd.buf, "\"suspended\":1"));
	snprintf(pq, sizeof(pq), "/%s/m1.txt", a.bucket);
	ck_assert_int_eq(as(&a, "PUT", pq, "mesh one"), 200);
	ck_assert_int_eq(http("GET", pq, a.ak, a.pw, NULL, &bd), 200);
	ck_assert_str_eq(bd.buf, "mesh one");
	user_mark(a.login, mark, sizeof(mark));
	ck_assert_str_eq(mark, want);
	/* adopt_mesh naming mesh 1: mesh 2 takes it over and marks it. */
	b.g.adopt_mesh = m1;
	create_ok(hb, &b.g);
	b.g.adopt_mesh = NULL;
	user_mark(a.login, mark, sizeof(mark));
	snprintf(want, sizeof(want), "tally mesh %s grant %s", m2, a.id);
	ck_assert_str_eq(mark, want);
	ck_assert_int_eq(check(hb, &b.g, why), TL_DRIFT_NONE);
	ck_rc(drv->create(ha, &a.g, why), TL_EREFUSED, why);
	ck_owned_by(why, m2);
	/* An adopt_mesh naming a third mesh takes nothing. */
	{
		char m3[33];

		rand_hex(m3);
		a.g.adopt_mesh = m3;
		ck_rc(drv->create(ha, &a.g, why), TL_EREFUSED, why);
		a.g.adopt_mesh = NULL;
	}
	ck_rc(drv->revoke(hb, &b.g, 1, why), 0, why);
	/* Marked before marks named a mesh: ours, and marked again. */
	grant_init(&c, "premesh");
	{
		char *e, m[200];

		snprintf(m, sizeof(m), "tally grant %s", c.id);
		e = curl_easy_escape(NULL, m, 0);
		snprintf(pq, sizeof(pq), "/admin/user?display-name=%s&"
		    "generate-key=false&max-buckets=1&uid=%s", e, c.login);
		curl_free(e);
	}
	admin("PUT", pq);
	create_ok(ha, &c.g);
	user_mark(c.login, mark, sizeof(mark));
	snprintf(want, sizeof(want), "tally mesh %s grant %s", m1, c.id);
	ck_assert_str_eq(mark, want);
	ck_assert_int_eq(check(ha, &c.g, why), TL_DRIFT_NONE);
	ck_rc(drv->revoke(ha, &c.g, 1, why), 0, why);
	drv->close(ha);
	drv->close(hb);
}
END_TEST

/* gr's names from in (a random key for scheme 3: another mesh's). */
static void
grant_named(struct grant *gr, const char *id, const struct tl_drv_names *n)
{
	if (id != gr->id)
		snprintf(gr->id, sizeof(gr->id), "%s", id);
	snprintf(gr->login, sizeof(gr->login), "%s", n->login);
	snprintf(gr->bucket, sizeof(gr->bucket), "%s", n->resource);
	tl_secret_password(gr->pw);
	secret_add(gr->pw);
	memset(&gr->g, 0, sizeof(gr->g));
	gr->g.resource = gr->bucket;
	gr->g.owner = "";
	gr->g.login = gr->login;
	gr->g.password = gr->pw;
	gr->g.grant = gr->id;
	grant_keys(gr);
}

static void
find_in(struct tl_drv_name_in *in, const char *id)
{
	memset(in, 0, sizeof(*in));
	in->grant = id;
	in->resource = "files";
	in->node = "";
	in->recorded = "";
	in->version = 1;
	in->scheme = TL_DRV_NAMING_KEYED;
}

START_TEST(test_find_marked)
{
	struct grant a, b, d, c;
	struct tl_drv_name_in in;
	struct tl_drv_names n, found;
	uint8_t key[TL_DRV_NAME_KEY_LEN];
	char m1[33], m2[33], m3[33], why[TL_WHY_MAX], pq[512];
	char mark[300], want[300];
	struct body bd;
	void *h1, *h2, *h3;
	uint64_t v;

	ck_assert(tl_drv_can(drv->decl, TL_DRV_CAP_FIND_MARKED, why));
	rand_hex(m1);
	rand_hex(m2);
	rand_hex(m3);
	h1 = drv_open_mesh(m1, NULL);
	h2 = drv_open_mesh(m2, NULL);
	h3 = drv_open_mesh(m3, NULL);
	/* Mesh 1's grant, named by mesh 1's key, with data in its bucket. */
	grant_init(&a, "find");
	find_in(&in, a.id);
	randombytes_buf(key, sizeof(key));
	in.key = key;
	ck_rc(drv->decl->names(&in, &n, why), 0, why);
	grant_named(&a, a.id, &n);
	create_ok(h1, &a.g);
	snprintf(pq, sizeof(pq), "/%s/kept.txt", a.bucket);
	ck_assert_int_eq(as(&a, "PUT", pq, "mesh one's data"), 200);
	/* Mesh 2's objects for the same grant id, under its own key. */
	randombytes_buf(key, sizeof(key));
	ck_rc(drv->decl->names(&in, &n, why), 0, why);
	grant_named(&b, a.id, &n);
	ck_assert_str_ne(b.login, a.login);
	create_ok(h2, &b.g);
	/* Mesh 1's objects for another grant: the same shape of names. */
	grant_init(&d, "find");
	find_in(&in, d.id);
	in.key = key;
	ck_rc(drv->decl->names(&in, &n, why), 0, why);
	grant_named(&d, d.id, &n);
	create_ok(h1, &d.g);

	/* Mesh 3 finds each mesh's objects for the grant by their mark. */
	find_in(&in, a.id);
	ck_rc(drv->find_marked(h3, &in, m1, &found, why), 0, why);
	ck_why(why);
	ck_assert_str_eq(found.login, a.login);
	ck_assert_str_eq(found.resource, a.bucket);
	ck_assert_msg(strstr(why, a.login) != NULL && strstr(why, a.bucket) !=
	    NULL && strstr(why, "1 object(s)") != NULL, "why: %s", why);
	ck_rc(drv->find_marked(h3, &in, m2, &n, why), 0, why);
	ck_assert_str_eq(n.login, b.login);
	ck_assert_str_eq(n.resource, b.bucket);
	/* Not another grant's, not another mesh's, not the session's own. */
	find_in(&in, "app-none/files");
	ck_rc(drv->find_marked(h3, &in, m1, &n, why), TL_ENOTFOUND, why);
	ck_assert_str_eq(n.login, "");
	find_in(&in, a.id);
	ck_rc(drv->find_marked(h3, &in, m3, &n, why), TL_EINVAL, why);
	{
		char m4[33];

		rand_hex(m4);
		ck_rc(drv->find_marked(h3, &in, m4, &n, why), TL_ENOTFOUND,
		    why);
	}
	ck_rc(drv->find_marked(h3, &in, "not-a-mesh", &n, why), TL_EINVAL,
	    why);
	find_in(&in, d.id);
	ck_rc(drv->find_marked(h3, &in, m1, &n, why), 0, why);
	ck_assert_str_eq(n.login, d.login);

	/* The adopted names are the grant's for every version. */
	find_in(&in, a.id);
	randombytes_buf(key, sizeof(key));
	in.key = key;
	in.adopted = &found;
	for (v = 1; v <= 3; v++) {
		in.version = v;
		ck_rc(drv->decl->names(&in, &n, why), 0, why);
		ck_assert_str_eq(n.login, a.login);
		ck_assert_str_eq(n.resource, a.bucket);
	}
	/* Mesh 3 adopts them: marked again, the data kept. */
	grant_named(&c, a.id, &n);
	c.g.adopt_mesh = m1;
	create_ok(h3, &c.g);
	c.g.adopt_mesh = NULL;
	user_mark(a.login, mark, sizeof(mark));
	snprintf(want, sizeof(want), "tally mesh %s grant %s", m3, a.id);
	ck_assert_str_eq(mark, want);
	ck_assert_int_eq(as(&c, "GET", pq, NULL), 200);
	ck_assert_int_eq(http("GET", pq, c.ak, c.pw, NULL, &bd), 200);
	ck_assert_str_eq(bd.buf, "mesh one's data");
	/* What mesh 1 delivered opens nothing more. */
	ck_assert_int_eq(as(&a, "GET", pq, NULL), 403);
	ck_assert_int_eq(check(h3, &c.g, why), TL_DRIFT_NONE);
	/* Marked by mesh 3 now: mesh 1's mark is found no more. */
	in.adopted = NULL;
	in.key = NULL;
	in.version = 1;
	ck_rc(drv->find_marked(h2, &in, m1, &n, why), TL_ENOTFOUND, why);
	ck_rc(drv->find_marked(h2, &in, m3, &n, why), 0, why);
	ck_assert_str_eq(n.login, a.login);
	ck_rc(drv->create(h1, &a.g, why), TL_EREFUSED, why);
	ck_owned_by(why, m3);

	ck_rc(drv->revoke(h3, &c.g, 1, why), 0, why);
	ck_rc(drv->revoke(h2, &b.g, 1, why), 0, why);
	ck_rc(drv->revoke(h1, &d.g, 1, why), 0, why);
	drv->close(h1);
	drv->close(h2);
	drv->close(h3);
}
END_TEST

START_TEST(test_fence)
{
	char why[TL_WHY_MAX] = "";
	const char *bad;
	void *h = drv_open(), *h2 = drv_open();

	bad = tl_test_fence_contract(drv, h, h2, why);
	ck_assert_msg(bad == NULL, "%s (%s)", bad, why);
	drv->close(h);
	drv->close(h2);
}
END_TEST

/*
 * What the fence's compare-and-set rests on: this gateway refuses a PUT
 * whose If-Match is not the object's ETag, and If-None-Match: * when the
 * object exists (412), and takes the one whose ETag matches.
 */
START_TEST(test_conditional_put)
{
	char bucket[64], pq[128], hd[160], m[33];
	struct body b;

	rand_hex(m);
	snprintf(bucket, sizeof(bucket), "tally-cas-%.16s", m);
	snprintf(pq, sizeof(pq), "/%s", bucket);
	admin("PUT", pq);
	snprintf(pq, sizeof(pq), "/%s/f", bucket);
	s_extra = "If-None-Match: *";
	ck_assert_int_eq(http("PUT", pq, NULL, NULL, "one", NULL), 200);
	s_extra = "If-None-Match: *";
	ck_assert_int_eq(http("PUT", pq, NULL, NULL, "two", NULL), 412);
	s_extra = "If-Match: 00000000000000000000000000000000";
	ck_assert_int_eq(http("PUT", pq, NULL, NULL, "two", NULL), 412);
	/* md5("one"): the ETag of the object as it is. */
	snprintf(hd, sizeof(hd), "If-Match: f97c5d29941bfb1b2fdab0874906ab82");
	s_extra = hd;
	ck_assert_int_eq(http("PUT", pq, NULL, NULL, "three", NULL), 200);
	s_extra = hd;
	ck_assert_int_eq(http("PUT", pq, NULL, NULL, "four", NULL), 412);
	ck_assert_int_eq(http("GET", pq, NULL, NULL, NULL, &b), 200);
	ck_assert_str_eq(b.buf, "three");
	admin("DELETE", pq);
	snprintf(pq, sizeof(pq), "/%s", bucket);
	admin("DELETE", pq);
}
END_TEST

START_TEST(test_deposed)
{
	struct grant a, n, r;
	char m[33], la[33], lb[33], why[TL_WHY_MAX], pq[512];
	struct tl_drv_fence fa, fb;
	struct tl_drv_fence_held held;
	struct body before, after;
	void *ha, *hb;

	rand_hex(m);
	rand_hex(la);
	rand_hex(lb);
	fa = (struct tl_drv_fence){ m, 1, la };
	fb = (struct tl_drv_fence){ m, 2, lb };
	ck_assert_msg(drv->fence != NULL, "the driver declares no fence");
	ha = drv_open_mesh(m, &fa);
	ck_rc(drv->fence(ha, &fa, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fa, &held));
	grant_init(&a, "leader-a");
	create_ok(ha, &a.g);
	/* Leader B, promoted, raises the fence: A is deposed. */
	hb = drv_open_mesh(m, &fb);
	ck_rc(drv->fence(hb, &fb, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fb, &held));
	ck_assert(user_exists(a.login, &before));
	grant_init(&n, "leader-a-new");
	ck_rc(drv->create(ha, &n.g, why), TL_EREFUSED, why);
	ck_assert_msg(strncmp(why, "deposed", 7) == 0, "why: %s", why);
	ck_assert(!user_exists(n.login, &after));
	ck_assert(!bucket_exists(n.bucket));
	{
		r = a;
		tl_secret_password(r.pw);
		secret_add(r.pw);
		r.g.password = r.pw;
		r.g.login = r.login;
		r.g.resource = r.bucket;
		r.g.grant = r.id;
		ck_rc(drv->add_credential(ha, &r.g, why), TL_EREFUSED, why);
	}
	ck_rc(drv->retire_credential(ha, &a.g, why), TL_EREFUSED, why);
	ck_rc(drv->set_password(ha, &a.g, why), TL_EREFUSED, why);
	ck_rc(drv->fix_privileges(ha, &a.g, why), TL_EREFUSED, why);
	ck_rc(drv->revoke(ha, &a.g, 0, why), TL_EREFUSED, why);
	ck_rc(drv->revoke(ha, &a.g, 1, why), TL_EREFUSED, why);
	ck_assert_msg(strstr(why, "deposed") != NULL, "why: %s", why);
	/* Nothing changed: the user as it was, its consumer still in. */
	ck_assert(user_exists(a.login, &after));
	ck_assert_str_eq(before.buf, after.buf);
	snprintf(pq, sizeof(pq), "/%s/still.txt", a.bucket);
	ck_assert_int_eq(as(&a, "PUT", pq, "still"), 200);
	/* A reader (no fence) and leader B act. */
	ck_assert_int_eq(check(ha, &a.g, why), TL_DRIFT_NONE);
	ck_rc(drv->revoke(hb, &a.g, 1, why), 0, why);
	drv->close(ha);
	drv->close(hb);
}
END_TEST

/*
 * What a consumer gets for TLS, without a gateway: the field ca is the
 * token as it is ("" without one); an explicit tls=verify delivers only
 * https, even before a ca is given (tallyd refuses to open it then).
 */
/* --- tally adopt: what tally did not make ---------------------------- */

/* A user made by hand, as a live mesh's consumer: uid, S3 key ak/sk. */
static void
hand_user(const char *uid, const char *ak, const char *sk)
{
	char pq[512];

	snprintf(pq, sizeof(pq), "/admin/user?access-key=%s&display-name="
	    "legacy%%20app&secret-key=%s&uid=%s", ak, sk, uid);
	admin("PUT", pq);
}

/* How many keys, S3 and Swift, the user has. */
static int
keys_of(const char *uid)
{
	struct body b;
	const char *p;
	int n = 0;

	ck_assert(user_exists(uid, &b));
	for (p = b.buf; (p = strstr(p, "\"secret_key\"")) != NULL; p++)
		n++;
	return n;
}

/* The bucket's owner, as the admin API says, into out. */
static void
bucket_owner(const char *bucket, char *out, size_t cap)
{
	struct body b;
	char pq[256];
	const char *p, *e;

	out[0] = '\0';
	snprintf(pq, sizeof(pq), "/admin/bucket?bucket=%s", bucket);
	ck_assert_int_eq(http("GET", pq, NULL, NULL, NULL, &b), 200);
	if ((p = strstr(b.buf, "\"owner\":\"")) == NULL)
		return;
	p += 9;
	if ((e = strchr(p, '"')) != NULL)
		snprintf(out, cap, "%.*s", (int)(e - p), p);
}

/*
 * tally adopt --resource --login (adopting): a bucket and a user made by
 * hand are taken over with their object and keys, nothing of tally's
 * added, its public-read ACL and policy gone; the rotation's key goes
 * beside, and the retirement keeps it alone.  Refused, untouched: what
 * is missing, tally's for another grant, another mesh's, an admin, a
 * user with another bucket, another user's bucket with objects (an
 * empty one is linked).
 */
START_TEST(test_adopt)
{
	static char sk[] = "legacy-secret-key-0123456789abcdef";
	static char wrong[] = "not-the-new-versions-password-0123";
	struct grant a, o;
	struct tl_drv_grant keep;
	struct body bd;
	char m1[33], m2[33], why[TL_WHY_MAX], pq[512], uid[64], uid2[64],
	    adm[64], bucket[64], b2[64], ak[32], ak2[32], ak3[32], mark[300],
	    want[300], own[64];
	int pid = (int)getpid();
	void *h, *h2;

	rand_hex(m1);
	rand_hex(m2);
	h = drv_open_mesh(m1, NULL);
	secret_add(sk);
	secret_add(wrong);
	snprintf(uid, sizeof(uid), "legacy_%d", pid);
	snprintf(uid2, sizeof(uid2), "legacy2_%d", pid);
	snprintf(adm, sizeof(adm), "legacyadm_%d", pid);
	snprintf(bucket, sizeof(bucket), "legacy-%d", pid);
	snprintf(b2, sizeof(b2), "legacy-%d-2", pid);
	snprintf(ak, sizeof(ak), "LEGACY%dA", pid);
	snprintf(ak2, sizeof(ak2), "LEGACY%dB", pid);
	grant_init(&a, "adopt");
	a.g.login = uid;
	a.g.resource = bucket;
	a.g.adopting = 1;
	grant_keys(&a);

	/* Nothing to adopt: no bucket, then no user. */
	ck_rc(drv->create(h, &a.g, why), TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "does not exist on this gateway: nothing "
	    "to adopt") != NULL && strstr(why, bucket) != NULL, "%s", why);
	hand_user(uid, ak, sk);
	snprintf(pq, sizeof(pq), "/%s", bucket);
	ck_assert_int_eq(http("PUT", pq, ak, sk, NULL, NULL), 200);
	a.g.login = "nobody_here";
	ck_rc(drv->create(h, &a.g, why), TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "user \"nobody_here\" does not exist") !=
	    NULL, "%s", why);
	a.g.login = uid;
	/* An object; public-read and a policy; a subuser's Swift key. */
	snprintf(pq, sizeof(pq), "/%s/kept.txt", bucket);
	ck_assert_int_eq(http("PUT", pq, ak, sk, "kept", NULL), 200);
	snprintf(pq, sizeof(pq), "/%s?acl=", bucket);
	s_extra = "x-amz-acl: public-read";
	ck_assert_int_eq(http("PUT", pq, ak, sk, "", NULL), 200);
	snprintf(pq, sizeof(pq), "/%s?policy=", bucket);
	{
		char pol[600];

		snprintf(pol, sizeof(pol), "{\"Version\":\"2012-10-17\","
		    "\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":"
		    "\"*\",\"Action\":\"s3:GetObject\",\"Resource\":"
		    "\"arn:aws:s3:::%s/*\"}]}", bucket);
		ck_assert_int_lt(http("PUT", pq, ak, sk, pol, NULL), 300);
	}
	snprintf(pq, sizeof(pq), "/%s/kept.txt", bucket);
	ck_assert_int_eq(anon_get(pq), 200);
	snprintf(pq, sizeof(pq), "/admin/user?access=full&generate-secret="
	    "true&key-type=swift&subuser=%s%%3Aswift&uid=%s", uid, uid);
	admin("PUT", pq);
	ck_assert_int_eq(keys_of(uid), 2);

	/* An admin; a user that owns another bucket: refused, untouched. */
	snprintf(pq, sizeof(pq), "/admin/user?display-name=legacy%%20admin&"
	    "uid=%s&user-caps=users%%3Dread", adm);
	admin("PUT", pq);
	a.g.login = adm;
	ck_rc(drv->create(h, &a.g, why), TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "admin caps") != NULL, "%s", why);
	a.g.login = uid;
	snprintf(pq, sizeof(pq), "/%s", b2);
	ck_assert_int_eq(http("PUT", pq, ak, sk, NULL, NULL), 200);
	ck_rc(drv->create(h, &a.g, why), TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "owns other buckets too") != NULL &&
	    strstr(why, b2) != NULL, "%s", why);
	user_mark(uid, mark, sizeof(mark));
	ck_assert_str_eq(mark, "legacy app");
	snprintf(pq, sizeof(pq), "/admin/bucket?bucket=%s&purge-objects=true",
	    b2);
	admin("DELETE", pq);

	/* Taken over, twice: marked, the object and both keys kept. */
	create_ok(h, &a.g);
	ck_rc(drv->create(h, &a.g, why), 0, why);
	ck_assert_msg(strstr(why, "1 object(s)") != NULL &&
	    strstr(why, "2 key(s) kept") != NULL, "%s", why);
	user_mark(uid, mark, sizeof(mark));
	snprintf(want, sizeof(want), "tally mesh %s grant %s", m1, a.id);
	ck_assert_str_eq(mark, want);
	ck_assert(user_exists(uid, &bd));
	ck_assert_ptr_nonnull(strstr(bd.buf, "\"max_buckets\":1"));
	ck_assert_int_eq(keys_of(uid), 2);
	snprintf(pq, sizeof(pq), "/%s/kept.txt", bucket);
	ck_assert_int_eq(as(&a, "GET", pq, NULL), 403);
	ck_assert_int_eq(http("GET", pq, ak, sk, NULL, &bd), 200);
	ck_assert_str_eq(bd.buf, "kept");
	ck_assert_int_eq(anon_get(pq), 403);
	snprintf(pq, sizeof(pq), "/%s", bucket);
	ck_assert_int_eq(anon_get(pq), 403);

	/* Another mesh's now; tally's for a.id, not another grant's. */
	h2 = drv_open_mesh(m2, NULL);
	ck_rc(drv->create(h2, &a.g, why), TL_EREFUSED, why);
	ck_owned_by(why, m1);
	drv->close(h2);
	grant_init(&o, "adopt-other");
	o.g.login = uid;
	o.g.resource = bucket;
	o.g.adopting = 1;
	ck_rc(drv->create(h, &o.g, why), TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "made by tally for grant ") != NULL &&
	    strstr(why, a.id) != NULL, "%s", why);

	/* The rotation adds v2's key beside the adopted ones. */
	tl_secret_password(a.pw);
	grant_keys(&a);
	a.g.adopting = 0;
	ck_rc(drv->add_credential(h, &a.g, why), 0, why);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	snprintf(pq, sizeof(pq), "/%s/kept.txt", bucket);
	ck_assert_int_eq(http("GET", pq, a.ak, a.pw, NULL, &bd), 200);
	ck_assert_str_eq(bd.buf, "kept");
	ck_assert_int_eq(http("GET", pq, ak, sk, NULL, NULL), 200);
	/* Retiring keeps v2's key alone, and only when it is there. */
	keep = a.g;
	keep.adopting = 1;
	keep.password = wrong;
	ck_rc(drv->retire_credential(h, &keep, why), TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "the one to keep") != NULL, "%s", why);
	ck_assert_int_eq(keys_of(uid), 3);
	keep.password = a.pw;
	ck_rc(drv->retire_credential(h, &keep, why), 0, why);
	ck_why(why);
	ck_assert_msg(strstr(why, "2 adopted key(s) removed") != NULL, "%s",
	    why);
	ck_rc(drv->retire_credential(h, &keep, why), 0, why);
	ck_assert_int_eq(keys_of(uid), 1);
	ck_assert_int_eq(http("GET", pq, ak, sk, NULL, NULL), 403);
	ck_assert_int_eq(as(&a, "GET", pq, NULL), 200);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert(bucket_exists(bucket));

	/* Another user's bucket: linked when empty, refused with objects. */
	hand_user(uid2, ak2, sk);
	snprintf(pq, sizeof(pq), "/%s", b2);
	ck_assert_int_eq(http("PUT", pq, ak2, sk, NULL, NULL), 200);
	grant_init(&o, "adopt-link");
	snprintf(o.login, sizeof(o.login), "legacy3_%d", pid);
	snprintf(o.bucket, sizeof(o.bucket), "%s", b2);
	snprintf(ak3, sizeof(ak3), "LEGACY%dC", pid);
	hand_user(o.login, ak3, sk);
	o.g.adopting = 1;
	snprintf(pq, sizeof(pq), "/%s/theirs.txt", b2);
	ck_assert_int_eq(http("PUT", pq, ak2, sk, "theirs", NULL), 200);
	ck_rc(drv->create(h, &o.g, why), TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "holds 1 object(s) of its owner") != NULL,
	    "%s", why);
	bucket_owner(b2, own, sizeof(own));
	ck_assert_str_eq(own, uid2);
	ck_assert_int_eq(http("DELETE", pq, ak2, sk, NULL, NULL), 204);
	create_ok(h, &o.g);
	bucket_owner(b2, own, sizeof(own));
	ck_assert_str_eq(own, o.login);
	snprintf(pq, sizeof(pq), "/%s", b2);
	ck_assert_int_eq(http("GET", pq, ak2, sk, NULL, NULL), 403);
	drv->close(h);
}
END_TEST

START_TEST(test_consumer_tls_fields)
{
	static const char *const ver[] = { "tls", "verify", NULL };
	struct tl_drv_endpoint e = { "rgw.example", "7480", NULL, NULL,
	    NULL };
	struct tl_drv_grant g;
	char out[256];

	memset(&g, 0, sizeof(g));
	g.resource = g.login = "abc";
	ck_assert(tl_drv_has_field(drv->decl, "ca"));
	ck_assert(!tl_drv_field_secret(drv->decl, "ca"));
	ck_assert_int_eq(drv->decl->compose("ca", &e, &g, out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "");
	e.ca_path = "@CA@";
	ck_assert_int_eq(drv->decl->compose("ca", &e, &g, out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "@CA@");
	ck_assert_int_eq(drv->decl->compose("endpoint", &e, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "http://rgw.example:7480");
	e.settings = ver;
	ck_assert_int_eq(drv->decl->compose("endpoint", &e, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "https://rgw.example:7480");
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("drv_ceph");
	TCase *tc = tcase_create("ceph");

	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_add_checked_fixture(tc, secrets_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_twice);
	tcase_add_test(tc, test_half_done);
	tcase_add_test(tc, test_foreign_refused);
	tcase_add_test(tc, test_hostile_names);
	tcase_add_test(tc, test_isolation);
	tcase_add_test(tc, test_drift);
	tcase_add_test(tc, test_bulk);
	tcase_add_test(tc, test_rotation);
	tcase_add_test(tc, test_revoke_retain_purge);
	tcase_add_test(tc, test_compose_open_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("mesh");
	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_add_checked_fixture(tc, secrets_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_meshes);
	tcase_add_test(tc, test_find_marked);
	tcase_add_test(tc, test_fence);
	tcase_add_test(tc, test_conditional_put);
	tcase_add_test(tc, test_deposed);
	suite_add_tcase(s, tc);

	tc = tcase_create("drift");
	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_add_checked_fixture(tc, secrets_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_acl);
	suite_add_tcase(s, tc);

	tc = tcase_create("adopt");
	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_add_checked_fixture(tc, secrets_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_adopt);
	suite_add_tcase(s, tc);
	tc = tcase_create("consumer_tls");
	tcase_add_test(tc, test_consumer_tls_fields);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	if (sodium_init() < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		return 1;
	s_parent = getpid();
	if ((drv = tl_drv_find("ceph-rgw")) == NULL) {
		fprintf(stderr, "no ceph-rgw driver registered\n");
		return 1;
	}
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	server_stop();
	tl_secret_wipe(s_sk, sizeof(s_sk));
	curl_global_cleanup();
	return failed == 0 ? 0 : 1;
}
