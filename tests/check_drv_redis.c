/*
 * check_drv_redis.c - the redis driver against a real Redis 7.
 *
 * The server: TALLY_TEST_REDIS_HOST, _PORT, _USER and _PWFILE when set;
 * otherwise this suite starts its own with tests/harness/redis.sh under
 * $TALLY_TMP on a free port, once per run (an unchecked fixture: a
 * server that cannot start fails every case), and stops it at exit.
 *
 * The server's TLS listener (redis.sh's TLSPORT, certificates of
 * tests/harness/ca.sh): TALLY_TEST_REDIS_TLS_PORT, TALLY_TEST_CA (its
 * CA) and TALLY_TEST_CA_OTHER (an unrelated CA) from the environment
 * with the rest, else from the started server's DIR/env.  The TLS cases
 * fail, never skip, when there is none.
 *
 * The test talks to the server with hiredis directly for what happens
 * out of band (an operator's ACL SETUSER, a consumer's commands); the
 * driver is reached only through its ops table.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "drivers/redis.h"
#include "lib/tl_fence.h"
#include "lib/tl_test.h"
#include "tests/lib/tl_pemtest.h"

static char	 s_host[256], s_port[16], s_user[64], s_pw[256];
static char	 s_tls_port[16], s_ca[4200], s_ca_other[4200];
static char	 s_wh_cert[4200], s_wh_key[4200];
static char	 s_imp_cert[4200], s_imp_key[4200];
/* The client certificates of ca.sh: files (ours, another CA's). */
static char	 s_cli_cert[4200], s_cli_key[4200];
static char	 s_cli_ocert[4200], s_cli_okey[4200];
static char	*s_dir;
static int	 s_tried, s_ok;
static char	 s_err[9000];
static pid_t	 s_parent;
static const struct tl_drv_ops *drv;

/* --- the server ------------------------------------------------------ */

static int
server_start(void)
{
	const char *h = getenv("TALLY_TEST_REDIS_HOST");
	const char *p = getenv("TALLY_TEST_REDIS_PORT");
	const char *u = getenv("TALLY_TEST_REDIS_USER");
	const char *pwf = getenv("TALLY_TEST_REDIS_PWFILE");
	char pwfile[4200], port[16];
	int pn;

	if (h != NULL && *h != '\0' && p != NULL && *p != '\0' &&
	    pwf != NULL && *pwf != '\0') {
		snprintf(s_host, sizeof(s_host), "%s", h);
		snprintf(s_port, sizeof(s_port), "%s", p);
		snprintf(s_user, sizeof(s_user), "%s", u != NULL ? u : "admin");
		if (tl_test_read_line(pwf, s_pw, sizeof(s_pw)) != 0) {
			snprintf(s_err, sizeof(s_err), "cannot read %s", pwf);
			return -1;
		}
		snprintf(s_tls_port, sizeof(s_tls_port), "%s",
		    getenv("TALLY_TEST_REDIS_TLS_PORT") != NULL ?
		    getenv("TALLY_TEST_REDIS_TLS_PORT") : "");
		snprintf(s_ca, sizeof(s_ca), "%s", getenv("TALLY_TEST_CA") !=
		    NULL ? getenv("TALLY_TEST_CA") : "");
		snprintf(s_ca_other, sizeof(s_ca_other), "%s",
		    getenv("TALLY_TEST_CA_OTHER") != NULL ?
		    getenv("TALLY_TEST_CA_OTHER") : "");
#define ENVS(var, name) snprintf(var, sizeof(var), "%s", getenv(name) != \
    NULL ? getenv(name) : "")
		ENVS(s_wh_cert, "TALLY_TEST_CA_WRONGHOST_CERT");
		ENVS(s_wh_key, "TALLY_TEST_CA_WRONGHOST_KEY");
		ENVS(s_imp_cert, "TALLY_TEST_CA_IMPOSTOR_CERT");
		ENVS(s_imp_key, "TALLY_TEST_CA_IMPOSTOR_KEY");
		ENVS(s_cli_cert, "TALLY_TEST_CA_CLIENT_CERT");
		ENVS(s_cli_key, "TALLY_TEST_CA_CLIENT_KEY");
		ENVS(s_cli_ocert, "TALLY_TEST_CA_CLIENT_OTHER_CERT");
		ENVS(s_cli_okey, "TALLY_TEST_CA_CLIENT_OTHER_KEY");
#undef ENVS
		return 0;
	}
	if ((pn = tl_test_free_port()) <= 0) {
		snprintf(s_err, sizeof(s_err), "no free port");
		return -1;
	}
	snprintf(port, sizeof(port), "%d", pn);
	s_dir = tl_test_tmpdir("redisdrv");
	if (tl_test_harness_run("redis.sh", "start", s_dir, port) != 0) {
		snprintf(s_err, sizeof(s_err), "%s start %s %s failed",
		    tl_test_harness("redis.sh"), s_dir, port);
		return -1;
	}
	snprintf(s_host, sizeof(s_host), "127.0.0.1");
	snprintf(s_port, sizeof(s_port), "%s", port);
	snprintf(s_user, sizeof(s_user), "admin");
	snprintf(pwfile, sizeof(pwfile), "%s/admin.pw", s_dir);
	if (tl_test_read_line(pwfile, s_pw, sizeof(s_pw)) != 0) {
		snprintf(s_err, sizeof(s_err), "cannot read %s", pwfile);
		return -1;
	}
	(void)tl_test_env_get(s_dir, "TALLY_TEST_REDIS_TLS_PORT", s_tls_port,
	    sizeof(s_tls_port));
	(void)tl_test_env_get(s_dir, "TALLY_TEST_CA", s_ca, sizeof(s_ca));
	(void)tl_test_env_get(s_dir, "TALLY_TEST_CA_OTHER", s_ca_other,
	    sizeof(s_ca_other));
	(void)tl_test_env_get(s_dir, "TALLY_TEST_CA_WRONGHOST_CERT", s_wh_cert,
	    sizeof(s_wh_cert));
	(void)tl_test_env_get(s_dir, "TALLY_TEST_CA_WRONGHOST_KEY", s_wh_key,
	    sizeof(s_wh_key));
	(void)tl_test_env_get(s_dir, "TALLY_TEST_CA_IMPOSTOR_CERT", s_imp_cert,
	    sizeof(s_imp_cert));
	(void)tl_test_env_get(s_dir, "TALLY_TEST_CA_IMPOSTOR_KEY", s_imp_key,
	    sizeof(s_imp_key));
	(void)tl_test_env_get(s_dir, "TALLY_TEST_CA_CLIENT_CERT", s_cli_cert,
	    sizeof(s_cli_cert));
	(void)tl_test_env_get(s_dir, "TALLY_TEST_CA_CLIENT_KEY", s_cli_key,
	    sizeof(s_cli_key));
	(void)tl_test_env_get(s_dir, "TALLY_TEST_CA_CLIENT_OTHER_CERT",
	    s_cli_ocert, sizeof(s_cli_ocert));
	(void)tl_test_env_get(s_dir, "TALLY_TEST_CA_CLIENT_OTHER_KEY",
	    s_cli_okey, sizeof(s_cli_okey));
	return 0;
}

static void
server_stop(void)
{
	if (s_dir == NULL || getpid() != s_parent)
		return;
	if (tl_test_harness_run("redis.sh", "stop", s_dir, NULL) != 0)
		fprintf(stderr, "check_drv_redis: redis.sh stop %s failed\n",
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
		ck_abort_msg("no Redis to test against: %s", s_err);
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

/* No reason may hold a password the test used, nor its hash. */
static void
ck_why(const char *why)
{
	unsigned char h[32];
	char hex[65];
	size_t i;

	for (i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
		if (secrets[i] == NULL || *secrets[i] == '\0')
			continue;
		ck_assert_msg(strstr(why, secrets[i]) == NULL,
		    "a password leaked into why: %s", why);
		crypto_hash_sha256(h, (const unsigned char *)secrets[i],
		    strlen(secrets[i]));
		sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
		ck_assert_msg(strstr(why, hex) == NULL,
		    "a password hash leaked into why: %s", why);
	}
}

struct grant {
	char	id[128], name[64], pw[TL_PASSWORD_MAX + 1];
	struct tl_drv_grant g;
};

/* A grant named as the driver names it, from a unique id. */
static void
grant_init(struct grant *gr, const char *tag)
{
	static int n;
	struct tl_drv_name_in in;
	struct tl_drv_names out;
	char why[TL_WHY_MAX];

	n++;
	snprintf(gr->id, sizeof(gr->id), "app-%s-%d-%d/cache", tag,
	    (int)getpid(), n);
	memset(&in, 0, sizeof(in));
	in.grant = gr->id;
	in.resource = "cache";
	in.node = "";
	in.recorded = "";
	in.version = 1;
	in.scheme = TL_DRV_NAMING;
	ck_rc(drv->decl->names(&in, &out, why), 0, why);
	snprintf(gr->name, sizeof(gr->name), "%s", out.login);
	tl_secret_password(gr->pw);
	secret_add(gr->pw);
	memset(&gr->g, 0, sizeof(gr->g));
	gr->g.resource = gr->name;
	gr->g.owner = "";
	gr->g.login = gr->name;
	gr->g.password = gr->pw;
	gr->g.grant = gr->id;
	gr->g.adopt_unnamed = 0;
}

static void *
drv_open(void)
{
	struct tl_drv_admin a = { s_host, s_port, s_user, s_pw, NULL };
	char why[TL_WHY_MAX];
	void *h = NULL;

	secret_add(s_pw);
	ck_rc(drv->open(&a, &h, why), 0, why);
	ck_why(why);
	return h;
}

/* A session of mesh (NULL: none) acting under fence (NULL: a reader's). */
static void *
drv_open_as(const char *mesh, const struct tl_drv_fence *fence)
{
	struct tl_drv_admin a = { s_host, s_port, s_user, s_pw, NULL, mesh,
	    fence };
	char why[TL_WHY_MAX];
	void *h = NULL;

	secret_add(s_pw);
	ck_rc(drv->open(&a, &h, why), 0, why);
	ck_why(why);
	return h;
}

/* 32 random hex digits: a mesh id or a leader. */
static void
hex32(char out[33])
{
	unsigned char b[16];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, 33, b, sizeof(b));
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
	/* The bulk form finds the same (without the login). */
	ck_rc(drv->check_bulk(h, g, 1, &db, wb), 0, wb[0]);
	ck_why(wb[0]);
	if (d != TL_DRIFT_CREDENTIAL || db != TL_DRIFT_NONE)
		ck_assert_msg(d == db, "check %d (%s), check_bulk %d (%s)", d,
		    why, db, wb[0]);
	return d;
}

/* A connection as user (NULL: the admin); NULL when AUTH is refused. */
static redisContext *
conn(const char *user, const char *pw)
{
	redisContext *c = redisConnect(s_host, atoi(s_port));
	redisReply *r;

	ck_assert_msg(c != NULL && c->err == 0, "connect: %s",
	    c != NULL ? c->errstr : "?");
	r = redisCommand(c, "AUTH %s %s", user != NULL ? user : s_user,
	    user != NULL ? pw : s_pw);
	ck_assert_ptr_nonnull(r);
	if (r->type == REDIS_REPLY_ERROR) {
		freeReplyObject(r);
		redisFree(c);
		return NULL;
	}
	freeReplyObject(r);
	return c;
}

static int
can_auth(const char *user, const char *pw)
{
	redisContext *c = conn(user, pw);

	if (c == NULL)
		return 0;
	redisFree(c);
	return 1;
}

/* A command's reply type (and its text into out when a string/error). */
static int
q(redisContext *c, char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	redisReply *r;
	int t;

	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	if (r == NULL)
		return -1;
	t = r->type;
	if (out != NULL && cap > 0) {
		out[0] = '\0';
		if (r->type == REDIS_REPLY_STRING ||
		    r->type == REDIS_REPLY_ERROR ||
		    r->type == REDIS_REPLY_STATUS)
			snprintf(out, cap, "%s", r->str);
	}
	freeReplyObject(r);
	return t;
}

/* The admin runs fmt; it must not fail. */
static void
admin(const char *fmt, ...)
{
	redisContext *c = conn(NULL, NULL);
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	ck_assert_msg(r != NULL && r->type != REDIS_REPLY_ERROR, "admin %s: %s",
	    fmt, r != NULL ? r->str : c->errstr);
	freeReplyObject(r);
	redisFree(c);
}

static int
user_exists(const char *u)
{
	redisContext *c = conn(NULL, NULL);
	int t = q(c, NULL, 0, "ACL GETUSER %s", u);

	redisFree(c);
	return t == REDIS_REPLY_ARRAY;
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
	char why[TL_WHY_MAX], v[64];
	redisContext *c;
	void *h = drv_open();

	grant_init(&a, "twice");
	create_ok(h, &a.g);
	create_ok(h, &a.g);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	c = conn(a.name, a.pw);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(q(c, NULL, 0, "SET %s:k hello", a.name),
	    REDIS_REPLY_STATUS);
	ck_assert_int_eq(q(c, v, sizeof(v), "GET %s:k", a.name),
	    REDIS_REPLY_STRING);
	ck_assert_str_eq(v, "hello");
	redisFree(c);
	/* A new password on create: the old one goes, the new works. */
	tl_secret_password(a.pw);
	create_ok(h, &a.g);
	ck_assert(can_auth(a.name, a.pw));
	drv->close(h);
}
END_TEST

START_TEST(test_half_done)
{
	struct grant a, b;
	char why[TL_WHY_MAX];
	void *h = drv_open();

	/* Marked, no user yet (a crash between the two). */
	grant_init(&a, "half");
	admin("SET tally:owner:%s %s", a.name, a.id);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_MISSING);
	create_ok(h, &a.g);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	/* The user made, its passwords mark not yet. */
	grant_init(&b, "half");
	create_ok(h, &b.g);
	admin("DEL tally:pw:%s", b.name);
	ck_assert_int_eq(check(h, &b.g, why), TL_DRIFT_CREDENTIAL);
	create_ok(h, &b.g);
	ck_assert_int_eq(check(h, &b.g, why), TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

START_TEST(test_foreign_refused)
{
	struct grant a, b;
	char why[TL_WHY_MAX];
	enum tl_drv_drift d;
	uint64_t bytes;
	void *h = drv_open();

	/* A user tally did not make, under the name a grant would have. */
	grant_init(&a, "foreign");
	admin("ACL SETUSER %s on >x ~* +@all", a.name);
	ck_rc(drv->create(h, &a.g, why), TL_EINVAL, why);
	ck_assert_ptr_nonnull(strstr(why, "not made by tally"));
	ck_rc(drv->revoke(h, &a.g, 1, why), TL_EINVAL, why);
	ck_rc(drv->set_password(h, &a.g, why), TL_EINVAL, why);
	ck_rc(drv->fix_privileges(h, &a.g, why), TL_EINVAL, why);
	ck_rc(drv->check(h, &a.g, &ep, &d, why), TL_EINVAL, why);
	ck_assert(user_exists(a.name));
	ck_assert(can_auth(a.name, "x"));	/* untouched */
	/* A user of another grant. */
	grant_init(&b, "other");
	create_ok(h, &b.g);
	b.g.grant = "someone-else/cache";
	ck_rc(drv->create(h, &b.g, why), TL_EINVAL, why);
	ck_assert_ptr_nonnull(strstr(why, "another grant"));
	ck_rc(drv->revoke(h, &b.g, 1, why), TL_EINVAL, why);
	ck_rc(drv->add_credential(h, &b.g, why), TL_EINVAL, why);
	ck_rc(drv->retire_credential(h, &b.g, why), TL_EINVAL, why);
	ck_assert(user_exists(b.name));
	b.g.grant = b.id;
	ck_assert_int_eq(check(h, &b.g, why), TL_DRIFT_NONE);
	/* An unnamed mark is taken only with adopt_unnamed. */
	admin("SET tally:owner:%s %s", b.name, "");
	ck_rc(drv->create(h, &b.g, why), TL_EINVAL, why);
	b.g.adopt_unnamed = 1;
	create_ok(h, &b.g);
	b.g.adopt_unnamed = 0;
	ck_assert_int_eq(check(h, &b.g, why), TL_DRIFT_NONE);
	ck_rc(drv->size(h, &b.g, &bytes, why), 0, why);
	drv->close(h);
}
END_TEST

START_TEST(test_hostile_names)
{
	static const char *const res[] = { "a b", "a~b", "a&b", "a>b", "a#b",
	    "a*", "a:b", "A", "a\nb", NULL };
	static const char *const ids[] = { "m/r", "m/r@n", "m /r", "m~/r",
	    "m&/r", "m>/r", "m#/r", "m*/r", NULL };
	char seen[16][64], why[TL_WHY_MAX];
	struct tl_drv_name_in in;
	struct tl_drv_names out;
	struct tl_drv_grant g;
	size_t i, j;
	void *h = drv_open();

	memset(&in, 0, sizeof(in));
	in.node = "";
	in.recorded = "";
	in.version = 1;
	in.scheme = TL_DRV_NAMING;
	for (i = 0; res[i] != NULL; i++) {
		in.grant = "m/r";
		in.resource = res[i];
		ck_rc(drv->decl->names(&in, &out, why), TL_EINVAL, why);
	}
	/* Grant ids of any bytes give [a-z0-9_-] names, all different. */
	in.resource = "cache";
	for (i = 0; ids[i] != NULL; i++) {
		in.grant = ids[i];
		ck_rc(drv->decl->names(&in, &out, why), 0, why);
		ck_assert_str_eq(out.login, out.resource);
		ck_assert_uint_eq(strspn(out.login,
		    "abcdefghijklmnopqrstuvwxyz0123456789_-"),
		    strlen(out.login));
		for (j = 0; j < i; j++)
			ck_assert_str_ne(seen[j], out.login);
		snprintf(seen[i], sizeof(seen[i]), "%s", out.login);
		/* Every version has the same user. */
		in.version = 7;
		{
			struct tl_drv_names o7;

			ck_rc(drv->decl->names(&in, &o7, why), 0, why);
			ck_assert_str_eq(o7.login, out.login);
		}
		in.version = 1;
	}
	/* The operations refuse names that are not tally's. */
	for (i = 0; res[i] != NULL; i++) {
		memset(&g, 0, sizeof(g));
		g.resource = res[i];
		g.login = res[i];
		g.owner = "";
		g.password = "pw-not-used";
		g.grant = "m/r";
		ck_rc(drv->create(h, &g, why), TL_EINVAL, why);
		ck_rc(drv->revoke(h, &g, 1, why), TL_EINVAL, why);
		ck_assert(!user_exists(res[i]));
	}
	drv->close(h);
}
END_TEST

START_TEST(test_exclusive)
{
	struct grant a, b;
	char v[512];
	redisContext *ca, *cb, *sub;
	redisReply *r;
	void *h = drv_open();

	grant_init(&a, "exa");
	grant_init(&b, "exb");
	create_ok(h, &a.g);
	create_ok(h, &b.g);
	ca = conn(a.name, a.pw);
	cb = conn(b.name, b.pw);
	ck_assert_ptr_nonnull(ca);
	ck_assert_ptr_nonnull(cb);
	ck_assert_int_eq(q(cb, NULL, 0, "SET %s:secret b-data", b.name),
	    REDIS_REPLY_STATUS);
	ck_assert_int_eq(q(ca, NULL, 0, "SET %s:mine a-data", a.name),
	    REDIS_REPLY_STATUS);
	/* A cannot read, write or delete B's keys. */
	ck_assert_int_eq(q(ca, v, sizeof(v), "GET %s:secret", b.name),
	    REDIS_REPLY_ERROR);
	ck_assert_ptr_nonnull(strstr(v, "NOPERM"));
	ck_assert_int_eq(q(ca, NULL, 0, "SET %s:secret x", b.name),
	    REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "DEL %s:secret", b.name),
	    REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "COPY %s:secret %s:copy", b.name,
	    a.name), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "SET tally:owner:%s x", a.name),
	    REDIS_REPLY_ERROR);
	/* Nothing enumerates the key or channel space. */
	ck_assert_int_eq(q(ca, NULL, 0, "KEYS *"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "SCAN 0"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "SCAN 0 MATCH %s:*", b.name),
	    REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "RANDOMKEY"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "DBSIZE"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "PUBSUB CHANNELS"), REDIS_REPLY_ERROR);
	/* No server-wide or dangerous command. */
	ck_assert_int_eq(q(ca, NULL, 0, "FLUSHALL"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "FLUSHDB"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "CONFIG GET *"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "ACL LIST"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "ACL SETUSER %s ~*", a.name),
	    REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "EVAL %s 0", "return 1"),
	    REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "FUNCTION FLUSH"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "SELECT 1"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "CLIENT LIST"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "CLIENT TRACKING on BCAST"),
	    REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "MONITOR"), REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "DEBUG SLEEP 0"), REDIS_REPLY_ERROR);
	/* Channels: B's are closed to A, A's own open. */
	ck_assert_int_eq(q(ca, NULL, 0, "PUBLISH %s:ch hi", b.name),
	    REDIS_REPLY_ERROR);
	ck_assert_int_eq(q(ca, NULL, 0, "PUBLISH %s:ch hi", a.name),
	    REDIS_REPLY_INTEGER);
	sub = conn(a.name, a.pw);
	r = redisCommand(sub, "SUBSCRIBE %s:ch", b.name);
	ck_assert_msg(r != NULL && r->type == REDIS_REPLY_ERROR,
	    "A subscribed to B's channel");
	freeReplyObject(r);
	r = redisCommand(sub, "PSUBSCRIBE *");
	ck_assert_msg(r != NULL && r->type == REDIS_REPLY_ERROR,
	    "A subscribed to every channel");
	freeReplyObject(r);
	redisFree(sub);
	/* B's data is as B left it. */
	ck_assert_int_eq(q(cb, v, sizeof(v), "GET %s:secret", b.name),
	    REDIS_REPLY_STRING);
	ck_assert_str_eq(v, "b-data");
	ck_assert_int_eq(q(ca, v, sizeof(v), "GET %s:mine", a.name),
	    REDIS_REPLY_STRING);
	ck_assert_str_eq(v, "a-data");
	redisFree(ca);
	redisFree(cb);
	drv->close(h);
}
END_TEST

START_TEST(test_drift)
{
	struct grant a;
	char why[TL_WHY_MAX];
	void *h = drv_open();

	grant_init(&a, "drift");
	create_ok(h, &a.g);
	/* Rules widened: privileges, fixed, twice. */
	admin("ACL SETUSER %s +@all", a.name);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	admin("ACL SETUSER %s allkeys", a.name);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	admin("ACL SETUSER %s &other:*", a.name);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	admin("ACL SETUSER %s (~* +get)", a.name);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	admin("ACL SETUSER %s off", a.name);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &a.g, why), 0, why);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert(can_auth(a.name, a.pw));
	/* The password replaced: credential, set again, twice. */
	admin("ACL SETUSER %s resetpass >intruder", a.name);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_CREDENTIAL);
	ck_rc(drv->set_password(h, &a.g, why), 0, why);
	ck_rc(drv->set_password(h, &a.g, why), 0, why);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert(can_auth(a.name, a.pw));
	ck_assert(!can_auth(a.name, "intruder"));
	/* A password beside tally's, and nopass: credential too. */
	admin("ACL SETUSER %s >intruder", a.name);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_CREDENTIAL);
	ck_rc(drv->set_password(h, &a.g, why), 0, why);
	ck_assert(!can_auth(a.name, "intruder"));
	admin("ACL SETUSER %s nopass", a.name);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_CREDENTIAL);
	ck_rc(drv->set_password(h, &a.g, why), 0, why);
	ck_assert(!can_auth(a.name, "anything"));
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	/* Gone: missing, flagged, never recreated by the repairs. */
	admin("ACL DELUSER %s", a.name);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_MISSING);
	ck_rc(drv->set_password(h, &a.g, why), TL_EDRIVER, why);
	ck_rc(drv->fix_privileges(h, &a.g, why), TL_EDRIVER, why);
	ck_rc(drv->add_credential(h, &a.g, why), TL_EDRIVER, why);
	ck_assert(!user_exists(a.name));
	/* Only create (tally repair) makes it again. */
	create_ok(h, &a.g);
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

START_TEST(test_bulk)
{
	struct grant gr[6];
	struct tl_drv_grant gs[6];
	enum tl_drv_drift d[6];
	char why[6][TL_WHY_MAX];
	size_t i;
	void *h = drv_open();

	for (i = 0; i < 6; i++) {
		grant_init(&gr[i], "bulk");
		create_ok(h, &gr[i].g);
		gs[i] = gr[i].g;
	}
	admin("ACL SETUSER %s +flushall", gr[1].name);
	admin("ACL SETUSER %s resetpass >x", gr[2].name);
	admin("ACL DELUSER %s", gr[3].name);
	ck_rc(drv->check_bulk(h, gs, 6, d, why), 0, why[0]);
	for (i = 0; i < 6; i++)
		ck_why(why[i]);
	ck_assert_int_eq(d[0], TL_DRIFT_NONE);
	ck_assert_int_eq(d[1], TL_DRIFT_PRIVILEGES);
	ck_assert_int_eq(d[2], TL_DRIFT_CREDENTIAL);
	ck_assert_int_eq(d[3], TL_DRIFT_MISSING);
	ck_assert_int_eq(d[4], TL_DRIFT_NONE);
	ck_assert_int_eq(d[5], TL_DRIFT_NONE);
	/* A foreign user among them: refused, the session still usable. */
	admin("DEL tally:owner:%s", gr[4].name);
	ck_rc(drv->check_bulk(h, gs, 6, d, why), TL_EINVAL, why[4]);
	ck_rc(drv->check_bulk(h, gs, 1, d, why), 0, why[0]);
	ck_assert_int_eq(d[0], TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

START_TEST(test_rotation)
{
	struct grant a;
	char why[TL_WHY_MAX], pw1[TL_PASSWORD_MAX + 1];
	char pw2[TL_PASSWORD_MAX + 1];
	struct tl_drv_grant old;
	void *h = drv_open();

	grant_init(&a, "rot");
	create_ok(h, &a.g);
	snprintf(pw1, sizeof(pw1), "%s", a.pw);
	tl_secret_password(pw2);
	secret_add(pw1);
	secret_add(pw2);
	a.g.password = pw2;
	ck_rc(drv->add_credential(h, &a.g, why), 0, why);
	ck_why(why);
	ck_rc(drv->add_credential(h, &a.g, why), 0, why);
	/* Between add and retire both work, and nothing drifted. */
	ck_assert(can_auth(a.name, pw1));
	ck_assert(can_auth(a.name, pw2));
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	old = a.g;
	old.password = pw1;
	ck_assert_int_eq(check(h, &old, why), TL_DRIFT_NONE);
	/* Retire needs the old password. */
	old.password = "";
	ck_rc(drv->retire_credential(h, &old, why), TL_EINVAL, why);
	old.password = pw1;
	ck_rc(drv->retire_credential(h, &old, why), 0, why);
	ck_why(why);
	ck_rc(drv->retire_credential(h, &old, why), 0, why);
	ck_assert(!can_auth(a.name, pw1));
	ck_assert(can_auth(a.name, pw2));
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert_int_eq(check(h, &old, why), TL_DRIFT_CREDENTIAL);
	drv->close(h);
}
END_TEST

/* sha256 hex of pw into hex[65]. */
static void
hash_of(const char *pw, char hex[65])
{
	unsigned char h[32];

	crypto_hash_sha256(h, (const unsigned char *)pw, strlen(pw));
	sodium_bin2hex(hex, 65, h, sizeof(h));
}

START_TEST(test_rotation_half_done)
{
	struct grant a;
	char why[TL_WHY_MAX], pw1[TL_PASSWORD_MAX + 1];
	char pw2[TL_PASSWORD_MAX + 1], hex[65];
	struct tl_drv_grant old;
	void *h = drv_open();

	grant_init(&a, "rothalf");
	create_ok(h, &a.g);
	snprintf(pw1, sizeof(pw1), "%s", a.pw);
	tl_secret_password(pw2);
	secret_add(pw1);
	secret_add(pw2);
	/* add cut short after the mark, before the user had the hash. */
	hash_of(pw2, hex);
	admin("SADD tally:pw:%s %s", a.name, hex);
	ck_assert(!can_auth(a.name, pw2));
	a.g.password = pw2;
	ck_rc(drv->add_credential(h, &a.g, why), 0, why);
	ck_assert(can_auth(a.name, pw1));
	ck_assert(can_auth(a.name, pw2));
	/* retire cut short after the user lost the hash, before the mark. */
	hash_of(pw1, hex);
	admin("ACL SETUSER %s !%s", a.name, hex);
	old = a.g;
	old.password = pw1;
	ck_rc(drv->retire_credential(h, &old, why), 0, why);
	ck_assert(!can_auth(a.name, pw1));
	ck_assert(can_auth(a.name, pw2));
	{
		redisContext *c = conn(NULL, NULL);
		redisReply *r = redisCommand(c, "SISMEMBER tally:pw:%s %s",
		    a.name, hex);

		ck_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
		ck_assert_msg(r->integer == 0, "the retired hash is still in "
		    "the passwords mark");
		freeReplyObject(r);
		redisFree(c);
	}
	ck_assert_int_eq(check(h, &a.g, why), TL_DRIFT_NONE);
	/* A purged grant: retiring is done already. */
	ck_rc(drv->revoke(h, &a.g, 1, why), 0, why);
	ck_rc(drv->retire_credential(h, &old, why), 0, why);
	drv->close(h);
}
END_TEST

START_TEST(test_revoke_restore_purge)
{
	struct grant a, b;
	char why[TL_WHY_MAX], v[64];
	redisContext *c, *cb, *ad;
	redisReply *r;
	unsigned n;
	int i;
	void *h = drv_open();

	grant_init(&a, "rev");
	grant_init(&b, "bystander");
	create_ok(h, &a.g);
	create_ok(h, &b.g);
	c = conn(a.name, a.pw);
	cb = conn(b.name, b.pw);
	ck_assert_int_eq(q(c, NULL, 0, "SET %s:kept v1", a.name),
	    REDIS_REPLY_STATUS);
	ck_assert_int_eq(q(cb, NULL, 0, "SET %s:other b", b.name),
	    REDIS_REPLY_STATUS);
	/* More keys than one SCAN batch, for purge. */
	ad = conn(NULL, NULL);
	for (i = 0; i < 2500; i++)
		redisAppendCommand(ad, "SET %s:n%d x", a.name, i);
	for (i = 0; i < 2500; i++) {
		ck_assert_int_eq(redisGetReply(ad, (void **)&r), REDIS_OK);
		freeReplyObject(r);
	}
	ck_rc(drv->sessions(h, &a.g, &n, why), 0, why);
	ck_assert_uint_eq(n, 1);
	/* Retain: off, its client killed, its keys kept; twice. */
	ck_rc(drv->revoke(h, &a.g, 0, why), 0, why);
	ck_rc(drv->revoke(h, &a.g, 0, why), 0, why);
	ck_why(why);
	ck_assert_int_ne(q(c, NULL, 0, "GET %s:kept", a.name),
	    REDIS_REPLY_STRING);
	redisFree(c);
	ck_assert(!can_auth(a.name, a.pw));
	ck_rc(drv->sessions(h, &a.g, &n, why), 0, why);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(q(ad, v, sizeof(v), "GET %s:kept", a.name),
	    REDIS_REPLY_STRING);
	ck_assert_str_eq(v, "v1");
	/* Restore (create): on again, the keys there. */
	create_ok(h, &a.g);
	c = conn(a.name, a.pw);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(q(c, v, sizeof(v), "GET %s:kept", a.name),
	    REDIS_REPLY_STRING);
	ck_assert_str_eq(v, "v1");
	/* Purge: keys, user and marks gone; twice; B untouched. */
	ck_rc(drv->revoke(h, &a.g, 1, why), 0, why);
	ck_rc(drv->revoke(h, &a.g, 1, why), 0, why);
	redisFree(c);
	ck_assert(!user_exists(a.name));
	ck_assert_int_eq(q(ad, NULL, 0, "EXISTS %s:kept", a.name),
	    REDIS_REPLY_INTEGER);
	r = redisCommand(ad, "SCAN 0 MATCH %s:* COUNT 100000", a.name);
	ck_assert_uint_eq(r->element[1]->elements, 0);
	freeReplyObject(r);
	ck_assert_int_eq(q(ad, NULL, 0, "GET tally:owner:%s", a.name),
	    REDIS_REPLY_NIL);
	ck_assert_int_eq(q(cb, v, sizeof(v), "GET %s:other", b.name),
	    REDIS_REPLY_STRING);
	ck_assert_str_eq(v, "b");
	redisFree(cb);
	redisFree(ad);
	drv->close(h);
}
END_TEST

/* What tally changed is in the ACL file: ACL LOAD (a restart) keeps it. */
START_TEST(test_acl_saved)
{
	struct grant a, b;
	char why[TL_WHY_MAX], pw2[TL_PASSWORD_MAX + 1];
	void *h = drv_open();

	grant_init(&a, "saved");
	grant_init(&b, "saved");
	create_ok(h, &a.g);
	create_ok(h, &b.g);
	admin("ACL LOAD");
	ck_assert(can_auth(a.name, a.pw));
	ck_assert_msg(check(h, &a.g, why) == TL_DRIFT_NONE, "%s", why);
	tl_secret_password(pw2);
	secret_add(pw2);
	{
		struct tl_drv_grant g2 = a.g;

		g2.password = pw2;
		ck_rc(drv->add_credential(h, &g2, why), 0, why);
	}
	ck_rc(drv->revoke(h, &b.g, 0, why), 0, why);
	admin("ACL LOAD");
	ck_assert(can_auth(a.name, a.pw));
	ck_assert(can_auth(a.name, pw2));
	ck_assert(!can_auth(b.name, b.pw));
	ck_assert(user_exists(b.name));
	ck_rc(drv->revoke(h, &b.g, 1, why), 0, why);
	admin("ACL LOAD");
	ck_assert(!user_exists(b.name));
	drv->close(h);
}
END_TEST

START_TEST(test_fence_size_compose)
{
	struct grant a;
	struct tl_drv_endpoint e = { "127.0.0.1", "6390", NULL };
	char why[TL_WHY_MAX], out[512];
	uint64_t bytes = 0;
	redisContext *c;
	void *h = drv_open();

	const char *bad;
	void *h2 = drv_open();

	why[0] = '\0';
	bad = tl_test_fence_contract(drv, h, h2, why);
	ck_assert_msg(bad == NULL, "%s (%s)", bad, why);
	drv->close(h2);
	grant_init(&a, "size");
	create_ok(h, &a.g);
	ck_rc(drv->size(h, &a.g, &bytes, why), 0, why);
	ck_assert_uint_eq(bytes, 0);
	c = conn(a.name, a.pw);
	ck_assert_int_eq(q(c, NULL, 0, "SET %s:big %b", a.name,
	    (char[4096]){ 0 }, (size_t)4096), REDIS_REPLY_STATUS);
	redisFree(c);
	ck_rc(drv->size(h, &a.g, &bytes, why), 0, why);
	ck_assert_uint_ge(bytes, 4096);
	/* Fields; the uri percent-encodes. */
	a.g.password = "p@ss:w/rd%";
	ck_rc(drv->decl->compose("uri", &e, &a.g, out, sizeof(out)), 0, "");
	snprintf(why, sizeof(why), "redis://%s:p%%40ss%%3Aw%%2Frd%%25@"
	    "127.0.0.1:6390", a.name);
	ck_assert_str_eq(out, why);
	ck_rc(drv->decl->compose("prefix", &e, &a.g, out, sizeof(out)), 0, "");
	snprintf(why, sizeof(why), "%s:", a.name);
	ck_assert_str_eq(out, why);
	ck_rc(drv->decl->compose("user", &e, &a.g, out, sizeof(out)), 0, "");
	ck_assert_str_eq(out, a.name);
	ck_rc(drv->decl->compose("nope", &e, &a.g, out, sizeof(out)),
	    TL_ENOTFOUND, "");
	a.g.password = NULL;
	ck_rc(drv->decl->compose("uri", &e, &a.g, out, sizeof(out)),
	    TL_EINVAL, "");
	ck_assert(tl_drv_field_secret(drv->decl, "uri"));
	ck_assert(tl_drv_field_secret(drv->decl, "password"));
	ck_assert(!tl_drv_field_secret(drv->decl, "prefix"));
	drv->close(h);
}
END_TEST

/* The server's description of user u (ACL LIST's line) into out. */
static void
acl_line(const char *u, char *out, size_t cap)
{
	redisContext *c = conn(NULL, NULL);
	redisReply *r = redisCommand(c, "ACL LIST");
	char pfx[96];
	size_t i;

	out[0] = '\0';
	snprintf(pfx, sizeof(pfx), "user %s ", u);
	ck_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
	for (i = 0; i < r->elements; i++)
		if (strncmp(r->element[i]->str, pfx, strlen(pfx)) == 0)
			snprintf(out, cap, "%s", r->element[i]->str);
	freeReplyObject(r);
	redisFree(c);
}

static void
get_key(const char *key, char *out, size_t cap)
{
	redisContext *c = conn(NULL, NULL);

	q(c, out, cap, "GET %s", key);
	redisFree(c);
}

/*
 * Two meshes on one server, the same names: the second's every change
 * is refused naming the first, check reports it, nothing of the first's
 * changes; adopt_mesh takes it over; a mark made before marks named a
 * mesh is ours.
 */
START_TEST(test_two_meshes)
{
	struct grant a;
	char m1[33], m2[33], why[TL_WHY_MAX], want[128], v[64];
	char before[1024], after[1024];
	enum tl_drv_drift d, db;
	char wb[1][TL_WHY_MAX];
	struct tl_drv_grant g2;
	redisContext *c;
	void *h1, *h2;

	hex32(m1);
	hex32(m2);
	h1 = drv_open_as(m1, NULL);
	h2 = drv_open_as(m2, NULL);
	grant_init(&a, "mesh");
	create_ok(h1, &a.g);
	c = conn(a.name, a.pw);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(q(c, NULL, 0, "SET %s:k first", a.name),
	    REDIS_REPLY_STATUS);
	acl_line(a.name, before, sizeof(before));
	snprintf(want, sizeof(want), "owned by mesh %.12s", m1);
	/* The second mesh, same grant id, same names, its own password. */
	g2 = a.g;
	g2.password = "another-mesh-password";
	secret_add(g2.password);
	ck_rc(drv->create(h2, &g2, why), TL_EREFUSED, why);
	ck_assert_msg(strstr(why, want) != NULL, "why: %s", why);
	ck_assert_msg(strstr(why, "not this one") != NULL, "why: %s", why);
	ck_rc(drv->set_password(h2, &g2, why), TL_EREFUSED, why);
	ck_assert_msg(strstr(why, want) != NULL, "why: %s", why);
	ck_rc(drv->fix_privileges(h2, &g2, why), TL_EREFUSED, why);
	ck_assert_msg(strstr(why, want) != NULL, "why: %s", why);
	ck_rc(drv->add_credential(h2, &g2, why), TL_EREFUSED, why);
	ck_assert_msg(strstr(why, want) != NULL, "why: %s", why);
	g2.password = a.pw;
	ck_rc(drv->retire_credential(h2, &g2, why), TL_EREFUSED, why);
	ck_assert_msg(strstr(why, want) != NULL, "why: %s", why);
	ck_rc(drv->revoke(h2, &g2, 0, why), TL_EREFUSED, why);
	ck_assert_msg(strstr(why, want) != NULL, "why: %s", why);
	ck_rc(drv->revoke(h2, &g2, 1, why), TL_EREFUSED, why);
	ck_assert_msg(strstr(why, want) != NULL, "why: %s", why);
	/* check: a drift naming the owner, in both forms. */
	ep.host = s_host;
	ep.port = s_port;
	ck_rc(drv->check(h2, &g2, &ep, &d, why), 0, why);
	ck_assert_int_ne(d, TL_DRIFT_NONE);
	ck_assert_msg(strstr(why, want) != NULL, "why: %s", why);
	ck_rc(drv->check_bulk(h2, &g2, 1, &db, wb), 0, wb[0]);
	ck_assert_int_ne(db, TL_DRIFT_NONE);
	ck_assert_msg(strstr(wb[0], want) != NULL, "why: %s", wb[0]);
	/* The first mesh's user, data and consumer are as they were. */
	acl_line(a.name, after, sizeof(after));
	ck_assert_str_eq(before, after);
	ck_assert_int_eq(q(c, v, sizeof(v), "GET %s:k", a.name),
	    REDIS_REPLY_STRING);
	ck_assert_str_eq(v, "first");
	redisFree(c);
	ck_assert(can_auth(a.name, a.pw));
	ck_assert_int_eq(check(h1, &a.g, why), TL_DRIFT_NONE);
	/* adopt_mesh: the second takes it over on purpose, and marks it. */
	g2.password = "adopted-password";
	secret_add(g2.password);
	g2.adopt_mesh = m1;
	ck_rc(drv->create(h2, &g2, why), 0, why);
	ck_assert(can_auth(a.name, "adopted-password"));
	snprintf(want, sizeof(want), "tally:mesh:%s", a.name);
	get_key(want, v, sizeof(v));
	ck_assert_str_eq(v, m2);
	g2.adopt_mesh = NULL;
	ck_assert_int_eq(check(h2, &g2, why), TL_DRIFT_NONE);
	/* Now the first is refused, naming the second. */
	snprintf(want, sizeof(want), "owned by mesh %.12s", m2);
	ck_rc(drv->create(h1, &a.g, why), TL_EREFUSED, why);
	ck_assert_msg(strstr(why, want) != NULL, "why: %s", why);
	/* A mark without a mesh (made before marks named one): ours. */
	admin("DEL tally:mesh:%s", a.name);
	create_ok(h1, &a.g);
	snprintf(want, sizeof(want), "tally:mesh:%s", a.name);
	get_key(want, v, sizeof(v));
	ck_assert_str_eq(v, m1);
	ck_assert_int_eq(check(h1, &a.g, why), TL_DRIFT_NONE);
	/* Purge by the owner takes its marks too. */
	ck_rc(drv->revoke(h1, &a.g, 1, why), 0, why);
	ck_assert(!user_exists(a.name));
	{
		redisContext *ad = conn(NULL, NULL);

		ck_assert_int_eq(q(ad, NULL, 0, "GET tally:mesh:%s", a.name),
		    REDIS_REPLY_NIL);
		redisFree(ad);
	}
	drv->close(h1);
	drv->close(h2);
}
END_TEST

/*
 * A session whose fence was overtaken (a standby promoted and raised
 * it) is refused on its next change, "deposed", and changes nothing.
 */
START_TEST(test_deposed)
{
	struct grant a, b;
	char m[33], la[33], lb[33], why[TL_WHY_MAX];
	char before[1024], after[1024], pw2[TL_PASSWORD_MAX + 1];
	struct tl_drv_fence fa, fb;
	struct tl_drv_fence_held held;
	struct tl_drv_grant g;
	void *ha, *hb;

	hex32(m);
	hex32(la);
	hex32(lb);
	fa = (struct tl_drv_fence){ m, 1, la };
	fb = (struct tl_drv_fence){ m, 2, lb };
	ha = drv_open_as(m, &fa);
	ck_rc(drv->fence(ha, &fa, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fa, &held));
	grant_init(&a, "dep");
	create_ok(ha, &a.g);
	/* B promoted: epoch 2 raised on the server. */
	hb = drv_open_as(m, &fb);
	ck_rc(drv->fence(hb, &fb, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fb, &held));
	acl_line(a.name, before, sizeof(before));
	/* A, still running: every change refused, nothing changed. */
	grant_init(&b, "dep");
	ck_rc(drv->create(ha, &b.g, why), TL_EREFUSED, why);
	ck_assert_msg(strncmp(why, "deposed: ", 9) == 0, "why: %s", why);
	ck_assert(!user_exists(b.name));
	ck_rc(drv->create(ha, &a.g, why), TL_EREFUSED, why);
	ck_assert_msg(strncmp(why, "deposed: ", 9) == 0, "why: %s", why);
	ck_rc(drv->set_password(ha, &a.g, why), TL_EREFUSED, why);
	ck_rc(drv->fix_privileges(ha, &a.g, why), TL_EREFUSED, why);
	tl_secret_password(pw2);
	secret_add(pw2);
	g = a.g;
	g.password = pw2;
	ck_rc(drv->add_credential(ha, &g, why), TL_EREFUSED, why);
	ck_assert(!can_auth(a.name, pw2));
	ck_rc(drv->retire_credential(ha, &a.g, why), TL_EREFUSED, why);
	ck_rc(drv->revoke(ha, &a.g, 0, why), TL_EREFUSED, why);
	ck_rc(drv->revoke(ha, &a.g, 1, why), TL_EREFUSED, why);
	ck_assert_msg(strncmp(why, "deposed: ", 9) == 0, "why: %s", why);
	acl_line(a.name, after, sizeof(after));
	ck_assert_str_eq(before, after);
	ck_assert(can_auth(a.name, a.pw));
	/* A reader session (no fence) still checks. */
	{
		void *hr = drv_open_as(m, NULL);

		ck_assert_int_eq(check(hr, &a.g, why), TL_DRIFT_NONE);
		drv->close(hr);
	}
	/* B acts. */
	ck_rc(drv->add_credential(hb, &g, why), 0, why);
	ck_assert(can_auth(a.name, pw2));
	ck_rc(drv->revoke(hb, &a.g, 1, why), 0, why);
	ck_assert(!user_exists(a.name));
	drv->close(ha);
	drv->close(hb);
}
END_TEST

/*
 * A TCP relay between the driver and the server that, armed, raises
 * the fence (as a promoted leader's script does) just before it passes
 * on the first EXEC it sees: the promotion lands between the driver's
 * reads and its EXEC, the race WATCH is there for.
 */
struct relay {
	int		 lfd, port;
	pthread_t	 th;
	const char	*key, *leader;	/* the fence to raise */
	int		 armed, fired;
};

static void
relay_fire(struct relay *rl)
{
	redisContext *c = conn(NULL, NULL);
	redisReply *r = redisCommand(c, "HSET %s epoch 2 leader %s", rl->key,
	    rl->leader);

	freeReplyObject(r);
	redisFree(c);
	rl->fired++;
}

static int
has_bytes(const char *b, size_t n, const char *pat, size_t pn)
{
	size_t i;

	for (i = 0; i + pn <= n; i++)
		if (memcmp(b + i, pat, pn) == 0)
			return 1;
	return 0;
}

static void *
relay_run(void *arg)
{
	static const char exec[] = "*1\r\n$4\r\nEXEC\r\n";
	struct relay *rl = arg;
	struct sockaddr_in sa;
	struct pollfd pf[2];
	char buf[65536 + 16], tail[16] = "";
	size_t tl = 0, tot;
	int cfd, sfd;
	ssize_t n;

	if ((cfd = accept(rl->lfd, NULL, NULL)) < 0)
		return NULL;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)atoi(s_port));
	inet_pton(AF_INET, s_host, &sa.sin_addr);
	if ((sfd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(sfd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(cfd);
		return NULL;
	}
	pf[0] = (struct pollfd){ cfd, POLLIN, 0 };
	pf[1] = (struct pollfd){ sfd, POLLIN, 0 };
	while (poll(pf, 2, 30000) > 0) {
		if (pf[0].revents != 0) {
			/* The last bytes before too: EXEC split over reads. */
			memcpy(buf, tail, tl);
			if ((n = read(cfd, buf + tl, sizeof(buf) - 16)) <= 0)
				break;
			tot = tl + (size_t)n;
			if (rl->armed && has_bytes(buf, tot, exec,
			    sizeof(exec) - 1)) {
				rl->armed = 0;
				relay_fire(rl);
			}
			if (write(sfd, buf + tl, (size_t)n) != n)
				break;
			tl = tot < sizeof(tail) ? tot : sizeof(tail);
			memcpy(tail, buf + tot - tl, tl);
		}
		if (pf[1].revents != 0) {
			if ((n = read(sfd, buf, sizeof(buf))) <= 0 ||
			    write(cfd, buf, (size_t)n) != n)
				break;
		}
	}
	close(cfd);
	close(sfd);
	return NULL;
}

static void
relay_start(struct relay *rl)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert((rl->lfd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	ck_assert(bind(rl->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	ck_assert(listen(rl->lfd, 1) == 0);
	ck_assert(getsockname(rl->lfd, (struct sockaddr *)&sa, &sl) == 0);
	rl->port = ntohs(sa.sin_port);
	ck_assert(pthread_create(&rl->th, NULL, relay_run, rl) == 0);
}

/*
 * The fence raised by another leader after the driver read it and
 * before its EXEC: EXEC runs nothing, the change is read again and
 * refused "deposed"; nothing of it is on the server.
 */
START_TEST(test_fence_raced)
{
	struct relay rl = { -1, 0, 0, NULL, NULL, 0, 0 };
	char m[33], la[33], lb[33], key[64], port[16];
	char why[TL_WHY_MAX];
	struct tl_drv_fence fa;
	struct tl_drv_fence_held held;
	struct tl_drv_admin a;
	struct grant g, g2;
	void *h = NULL;

	hex32(m);
	hex32(la);
	hex32(lb);
	snprintf(key, sizeof(key), "tally:fence:%s", m);
	rl.key = key;
	rl.leader = lb;
	relay_start(&rl);
	snprintf(port, sizeof(port), "%d", rl.port);
	fa = (struct tl_drv_fence){ m, 1, la };
	a = (struct tl_drv_admin){ .host = "127.0.0.1", .port = port,
	    .user = s_user, .password = s_pw, .mesh = m, .fence = &fa };
	secret_add(s_pw);
	ck_rc(drv->open(&a, &h, why), 0, why);
	ck_rc(drv->fence(h, &fa, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fa, &held));
	/* Unarmed, a change goes through the relay as usual. */
	grant_init(&g2, "raced");
	create_ok(h, &g2.g);
	rl.armed = 1;
	grant_init(&g, "raced");
	ck_rc(drv->create(h, &g.g, why), TL_EREFUSED, why);
	ck_assert_msg(strncmp(why, "deposed: ", 9) == 0, "why: %s", why);
	ck_assert_int_eq(rl.fired, 1);
	ck_assert(!user_exists(g.name));
	{
		redisContext *c = conn(NULL, NULL);

		ck_assert_int_eq(q(c, NULL, 0, "GET tally:owner:%s", g.name),
		    REDIS_REPLY_NIL);
		redisFree(c);
	}
	drv->close(h);
	pthread_join(rl.th, NULL);
	close(rl.lfd);
}
END_TEST

/* --- TLS --------------------------------------------------------------- */

static void
tls_up(void)
{
	ck_assert_msg(s_tls_port[0] != '\0' && s_ca[0] != '\0' &&
	    s_ca_other[0] != '\0', "no TLS listener to test against "
	    "(TALLY_TEST_REDIS_TLS_PORT, TALLY_TEST_CA, TALLY_TEST_CA_OTHER)");
}

/*
 * open on the TLS port with tls (NULL: the default) and ca: its rc,
 * the handle into *hp.
 */
static int
tls_open(const char *tls, const char *ca, const char *mesh,
    const struct tl_drv_fence *fence, void **hp, char *why)
{
	const char *settings[] = { "tls", tls, NULL };
	struct tl_drv_admin a = { s_host, s_tls_port, s_user, s_pw,
	    tls != NULL ? settings : NULL, mesh, fence, ca };

	*hp = NULL;
	secret_add(s_pw);
	return drv->open(&a, hp, why);
}

/* check through h, the consumer's login at the TLS port. */
static enum tl_drv_drift
tls_check(void *h, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_endpoint e = { s_host, s_tls_port, NULL };
	enum tl_drv_drift d = TL_DRIFT_NONE;

	ck_rc(drv->check(h, g, &e, &d, why), 0, why);
	ck_why(why);
	return d;
}

/*
 * Verified TLS with the server's CA: the whole life of a grant (create,
 * check with a consumer's login over TLS, rotation, retain, purge) and
 * the fence contract.  The TLS port speaks nothing else, so a driver
 * that did not do TLS fails here.
 */
START_TEST(test_tls_verified)
{
	struct grant a;
	struct tl_drv_grant old;
	char why[TL_WHY_MAX], pw1[TL_PASSWORD_MAX + 1];
	char pw2[TL_PASSWORD_MAX + 1], mesh[33], leader[33];
	struct tl_drv_fence f = { mesh, 1, leader };
	const char *bad;
	void *h, *h2;

	tls_up();
	ck_rc(tls_open("verify", s_ca, NULL, NULL, &h, why), 0, why);
	ck_why(why);
	ck_assert_msg(strstr(why, "TLS, verified") != NULL, "open: %s", why);
	grant_init(&a, "tls");
	create_ok(h, &a.g);
	create_ok(h, &a.g);
	ck_assert(user_exists(a.name));
	ck_assert(can_auth(a.name, a.pw));
	ck_assert_int_eq(tls_check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert_msg(strstr(why, "logs in") != NULL, "check: %s", why);
	/* A wrong password is seen by the consumer's login over TLS too. */
	old = a.g;
	tl_secret_password(pw1);
	secret_add(pw1);
	old.password = pw1;
	ck_assert_int_eq(tls_check(h, &old, why), TL_DRIFT_CREDENTIAL);
	/* Rotation: the new password beside the old, then the old retired. */
	snprintf(pw1, sizeof(pw1), "%s", a.pw);
	tl_secret_password(pw2);
	secret_add(pw2);
	a.g.password = pw2;
	ck_rc(drv->add_credential(h, &a.g, why), 0, why);
	ck_why(why);
	ck_assert(can_auth(a.name, pw1));
	ck_assert(can_auth(a.name, pw2));
	old = a.g;
	old.password = pw1;
	ck_rc(drv->retire_credential(h, &old, why), 0, why);
	ck_why(why);
	ck_assert(!can_auth(a.name, pw1));
	ck_assert(can_auth(a.name, pw2));
	ck_assert_int_eq(tls_check(h, &a.g, why), TL_DRIFT_NONE);
	/* Revoke, retaining; then purge. */
	ck_rc(drv->revoke(h, &a.g, 0, why), 0, why);
	ck_why(why);
	ck_assert(!can_auth(a.name, pw2));
	ck_assert(user_exists(a.name));
	ck_rc(drv->revoke(h, &a.g, 1, why), 0, why);
	ck_why(why);
	ck_assert(!user_exists(a.name));
	ck_assert_int_eq(tls_check(h, &a.g, why), TL_DRIFT_MISSING);
	/* The fence contract, both sessions over verified TLS. */
	ck_rc(tls_open("verify", s_ca, NULL, NULL, &h2, why), 0, why);
	why[0] = '\0';
	bad = tl_test_fence_contract(drv, h, h2, why);
	ck_assert_msg(bad == NULL, "%s (%s)", bad, why);
	drv->close(h2);
	drv->close(h);
	/* A fenced session over TLS changes a user under its fence. */
	hex32(mesh);
	hex32(leader);
	ck_rc(tls_open("verify", s_ca, mesh, &f, &h, why), 0, why);
	{
		struct tl_drv_fence_held held;

		ck_rc(drv->fence(h, &f, &held, why), 0, why);
		ck_assert_uint_eq(held.epoch, 1);
	}
	grant_init(&a, "tlsf");
	create_ok(h, &a.g);
	ck_assert(can_auth(a.name, a.pw));
	ck_rc(drv->revoke(h, &a.g, 1, why), 0, why);
	drv->close(h);
}
END_TEST

/*
 * A server whose certificate chains to another CA is refused before
 * anything is sent (TL_EUNTRUSTED, naming OpenSSL's reason); verify
 * without a ca is refused saying how to give one; require takes the
 * same server unverified.
 */
START_TEST(test_tls_untrusted)
{
	char why[TL_WHY_MAX];
	void *h = NULL;

	tls_up();
	ck_rc(tls_open("verify", s_ca_other, NULL, NULL, &h, why),
	    TL_EUNTRUSTED, why);
	ck_assert_ptr_null(h);
	ck_why(why);
	/* OpenSSL's reason follows (the chain ends in a CA not trusted). */
	ck_assert_msg(strstr(why, "certificate verify failed: ") != NULL &&
	    (strstr(why, "certificate in certificate chain") != NULL ||
	    strstr(why, "issuer certificate") != NULL), "why: %s", why);
	ck_rc(tls_open("verify", NULL, NULL, NULL, &h, why), TL_EUNTRUSTED,
	    why);
	ck_assert_msg(strstr(why, "no ca") != NULL, "why: %s", why);
	ck_rc(tls_open("require", s_ca_other, NULL, NULL, &h, why), 0, why);
	ck_assert_msg(strstr(why, "TLS, not verified") != NULL, "open: %s",
	    why);
	drv->close(h);
}
END_TEST

/*
 * A TLS server of one connection on a free loopback port, presenting
 * cert: it counts the bytes of the protocol it is sent after the
 * handshake (none, when the driver refuses the certificate).
 */
struct fake_tls {
	int		 lfd, port;
	pthread_t	 th;
	const char	*cert, *key;
	size_t		 got;
	char		 seen[64];
};

static void *
fake_tls_run(void *arg)
{
	struct fake_tls *ft = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	SSL *ssl = NULL;
	char buf[4096];
	int cfd, n;

	if ((cfd = accept(ft->lfd, NULL, NULL)) < 0)
		goto out;
	if (ctx == NULL || SSL_CTX_use_certificate_chain_file(ctx,
	    ft->cert) != 1 || SSL_CTX_use_PrivateKey_file(ctx, ft->key,
	    SSL_FILETYPE_PEM) != 1 || (ssl = SSL_new(ctx)) == NULL ||
	    SSL_set_fd(ssl, cfd) != 1 || SSL_accept(ssl) != 1)
		goto out;
	while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0) {
		if (ft->got == 0)
			snprintf(ft->seen, sizeof(ft->seen), "%.*s", n < 20 ?
			    n : 20, buf);
		ft->got += (size_t)n;
		/* Anything at all: enough said; the driver then fails. */
		break;
	}
out:
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	if (cfd >= 0)
		close(cfd);
	return NULL;
}

static void
fake_tls_start(struct fake_tls *ft, const char *cert, const char *key)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	memset(ft, 0, sizeof(*ft));
	ft->cert = cert;
	ft->key = key;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert((ft->lfd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	ck_assert(bind(ft->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	ck_assert(listen(ft->lfd, 1) == 0);
	ck_assert(getsockname(ft->lfd, (struct sockaddr *)&sa, &sl) == 0);
	ft->port = ntohs(sa.sin_port);
	ck_assert(pthread_create(&ft->th, NULL, fake_tls_run, ft) == 0);
}

/* open against ft with tls and the harness CA: its rc; ft is done. */
static int
fake_tls_open(struct fake_tls *ft, const char *host, const char *tls,
    char *why)
{
	const char *settings[] = { "tls", tls, NULL };
	char port[16];
	struct tl_drv_admin a = { host, port, s_user, s_pw, settings, NULL,
	    NULL, s_ca };
	void *h = NULL;
	int rc;

	snprintf(port, sizeof(port), "%d", ft->port);
	secret_add(s_pw);
	rc = drv->open(&a, &h, why);
	drv->close(h);
	pthread_join(ft->th, NULL);
	close(ft->lfd);
	return rc;
}

/*
 * A certificate of the right CA for another host, and one for this
 * host from another CA (an impostor): refused, naming why, and the
 * server is sent nothing after the handshake (no AUTH, no password).
 * With tls=require the same server gets the AUTH: what it counts is
 * what it would have seen.
 */
START_TEST(test_tls_wrong_server)
{
	struct fake_tls ft;
	char why[TL_WHY_MAX];

	tls_up();
	ck_assert_msg(s_wh_cert[0] != '\0' && s_imp_cert[0] != '\0',
	    "no TALLY_TEST_CA_WRONGHOST_CERT / _IMPOSTOR_CERT (ca.sh)");
	fake_tls_start(&ft, s_wh_cert, s_wh_key);
	ck_rc(fake_tls_open(&ft, "127.0.0.1", "verify", why), TL_EUNTRUSTED,
	    why);
	ck_assert_msg(strstr(why, "IP address mismatch") != NULL, "why: %s",
	    why);
	ck_assert_msg(ft.got == 0, "the server was sent %zu bytes (%s)",
	    ft.got, ft.seen);
	fake_tls_start(&ft, s_wh_cert, s_wh_key);
	ck_rc(fake_tls_open(&ft, "localhost", "verify", why), TL_EUNTRUSTED,
	    why);
	ck_assert_msg(strstr(why, "hostname mismatch") != NULL, "why: %s",
	    why);
	ck_assert_uint_eq(ft.got, 0);
	fake_tls_start(&ft, s_imp_cert, s_imp_key);
	ck_rc(fake_tls_open(&ft, "localhost", "verify", why), TL_EUNTRUSTED,
	    why);
	ck_assert_msg(strstr(why, "certificate verify failed") != NULL,
	    "why: %s", why);
	ck_assert_uint_eq(ft.got, 0);
	ck_why(why);
	/* The control: unverified, the impostor is sent the AUTH. */
	fake_tls_start(&ft, s_imp_cert, s_imp_key);
	ck_rc(fake_tls_open(&ft, "localhost", "require", why), TL_EUNREACH,
	    why);
	ck_assert_msg(ft.got > 0 && strstr(ft.seen, "AUTH") != NULL,
	    "the control server saw %zu bytes (%s)", ft.got, ft.seen);
}
END_TEST

START_TEST(test_open_refused)
{
	struct tl_drv_admin a = { s_host, s_port, s_user, "wrong", NULL };
	struct tl_drv_admin down = { "127.0.0.1", "1", s_user, s_pw, NULL };
	char why[TL_WHY_MAX];
	void *h = NULL;

	secret_add(s_pw);
	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	ck_assert_ptr_null(h);
	ck_rc(drv->open(&down, &h, why), TL_EUNREACH, why);
	ck_why(why);
}
END_TEST

/*
 * The plaintext-listener probe (reported, never configured): the
 * harness's server has a plaintext port beside its tls-port, so
 * consumers can connect without TLS there, and the probe says so with
 * the port; with port 0 (set for the test through a connection made
 * before, then put back) it says TLS only.  Asked over a verified TLS
 * session, as tallyd would.
 */
START_TEST(test_plaintext_probe)
{
	static const char *const ver[] = { "tls", "verify", NULL };
	static const char *const off[] = { "tls", "off", NULL };
	struct tl_drv_endpoint e = { s_host, s_tls_port, ver, NULL, NULL };
	struct tl_drv_endpoint plain = { s_host, s_tls_port, off, NULL, NULL };
	enum tl_drv_drift d = TL_DRIFT_NONE;
	char why[TL_WHY_MAX], why2[TL_WHY_MAX], want[64];
	struct grant a;
	redisContext *c;
	redisReply *r;
	void *h;
	int open = -1, rc;

	tls_up();
	ck_rc(tls_open("verify", s_ca, NULL, NULL, &h, why), 0, why);
	ck_rc(tl_drv_rd_plaintext(h, &open, why), 0, why);
	ck_assert_int_eq(open, 1);
	snprintf(want, sizeof(want), "without TLS on port %s: set port 0",
	    s_port);
	ck_assert_msg(strstr(why, want) != NULL, "probe: %s", why);
	/* check: a grant whose consumers get TLS is warned of it... */
	grant_init(&a, "plain");
	create_ok(h, &a.g);
	/* Not asked (tl_drv_grant.posture 0): no warning. */
	ck_rc(drv->check(h, &a.g, &e, &d, why), 0, why);
	ck_assert_msg(d == TL_DRIFT_NONE, "check, not asked: drift %d: %s",
	    (int)d, why);
	a.g.posture = 1;
	ck_rc(drv->check(h, &a.g, &e, &d, why), 0, why);
	ck_assert_msg(d == TL_DRIFT_PLAINTEXT && strstr(why, want) != NULL,
	    "check: drift %d: %s", (int)d, why);
	/* ...and one whose consumers connect in plaintext is not. */
	ck_rc(drv->check(h, &a.g, &plain, &d, why), 0, why);
	ck_assert_msg(d == TL_DRIFT_NONE, "check, tls off: drift %d: %s",
	    (int)d, why);
	c = conn(NULL, NULL);
	r = redisCommand(c, "CONFIG SET port 0");
	ck_assert_msg(r != NULL && r->type == REDIS_REPLY_STATUS, "CONFIG SET "
	    "port 0: %s", r != NULL ? r->str : c->errstr);
	freeReplyObject(r);
	open = -1;
	ck_rc(tl_drv_rd_plaintext(h, &open, why), 0, why);
	d = TL_DRIFT_MISSING;
	rc = drv->check(h, &a.g, &e, &d, why2);
	r = redisCommand(c, "CONFIG SET port %s", s_port);
	ck_assert_msg(r != NULL && r->type == REDIS_REPLY_STATUS, "CONFIG SET "
	    "port back: %s", r != NULL ? r->str : c->errstr);
	freeReplyObject(r);
	redisFree(c);
	ck_assert_int_eq(open, 0);
	ck_assert_msg(strstr(why, "TLS only") != NULL, "probe: %s", why);
	ck_assert_msg(rc == 0 && d == TL_DRIFT_NONE, "check, TLS only: rc %d "
	    "drift %d: %s", rc, (int)d, why2);
	ck_assert(can_auth(s_user, s_pw));
	drv->close(h);
}
END_TEST

/*
 * What a consumer gets for TLS, without a server: the fields tls and ca
 * and the uri's scheme follow the provider's mode at its admin host;
 * the ca token is copied as it is, "" without one.
 */
START_TEST(test_consumer_tls_fields)
{
	static const char *const none[] = { NULL };
	static const char *const ver[] = { "tls", "verify", NULL };
	static const char *const req[] = { "tls", "require", NULL };
	static const char *const off[] = { "tls", "off", NULL };
	static const char *const dflt_ca[] = { "ca", "-----BEGIN "
	    "CERTIFICATE-----\n", NULL };
	static const char *const lo[] = { "host", "127.0.0.1", NULL };
	static const struct {
		const char *const *sv;
		const char *ca_path, *tls, *uri, *ca;
	} t[] = {
		/* verify by default, no ca: tallyd cannot open it; kept */
		{ none, NULL, "false", "redis://", "" },
		{ ver, "@CA@", "true", "rediss://", "@CA@" },
		{ ver, NULL, "true", "rediss://", "" },
		{ req, "@CA@", "true", "rediss://", "@CA@" },
		{ off, "@CA@", "false", "redis://", "@CA@" },
		{ dflt_ca, "@CA@", "true", "rediss://", "@CA@" },
		/* a loopback admin host is off by default */
		{ lo, NULL, "false", "redis://", "" },
	};
	struct tl_drv_grant g;
	struct tl_drv_endpoint e = { "cache.example", "6380", NULL, NULL,
	    NULL };
	char out[256], want[256];
	size_t i;

	memset(&g, 0, sizeof(g));
	g.resource = g.login = "app_cache";
	g.password = "pw";
	ck_assert(tl_drv_has_field(drv->decl, "tls"));
	ck_assert(tl_drv_has_field(drv->decl, "ca"));
	ck_assert(!tl_drv_field_secret(drv->decl, "ca"));
	ck_assert(!tl_drv_field_secret(drv->decl, "tls"));
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		e.settings = t[i].sv;
		e.ca_path = t[i].ca_path;
		ck_rc(drv->decl->compose("tls", &e, &g, out, sizeof(out)), 0,
		    "");
		ck_assert_msg(strcmp(out, t[i].tls) == 0, "%zu: tls %s", i,
		    out);
		ck_rc(drv->decl->compose("ca", &e, &g, out, sizeof(out)), 0,
		    "");
		ck_assert_msg(strcmp(out, t[i].ca) == 0, "%zu: ca %s", i, out);
		ck_rc(drv->decl->compose("uri", &e, &g, out, sizeof(out)), 0,
		    "");
		snprintf(want, sizeof(want), "%sapp_cache:pw@cache.example:6380",
		    t[i].uri);
		ck_assert_msg(strcmp(out, want) == 0, "%zu: uri %s", i, out);
		/* Not secret: composed without the credential. */
		g.password = NULL;
		ck_rc(drv->decl->compose("ca", &e, &g, out, sizeof(out)), 0,
		    "");
		g.password = "pw";
	}
	e.ca_path = "@CA@";
	ck_rc(drv->decl->compose("ca", &e, &g, out, 4), TL_ETOOBIG, "");
	ck_assert_str_eq(out, "");
}
END_TEST

/* --- the admin's client certificate ------------------------------------ */

/*
 * The server's tls-auth-clients (and tls-protocols) as the harness
 * starts it: put back after each case and at the end of the case's
 * TCase (an unchecked teardown, so a case that failed half-way leaves
 * no server asking every later TLS case for a certificate).  Plain
 * hiredis, no assertion: it also runs in the runner's own process.
 */
static int
cert_server_reset(void)
{
	redisContext *c = redisConnect(s_host, atoi(s_port));
	redisReply *r;
	int ok = 0;

	if (c == NULL || c->err)
		goto out;
	if ((r = redisCommand(c, "AUTH %s %s", s_user, s_pw)) == NULL)
		goto out;
	freeReplyObject(r);
	if ((r = redisCommand(c, "CONFIG SET tls-auth-clients no")) == NULL)
		goto out;
	ok = r->type == REDIS_REPLY_STATUS;
	freeReplyObject(r);
	if ((r = redisCommand(c, "CONFIG SET tls-protocols %s",
	    "TLSv1.2 TLSv1.3")) == NULL) {
		ok = 0;
		goto out;
	}
	ok = ok && r->type == REDIS_REPLY_STATUS;
	freeReplyObject(r);
out:
	if (c != NULL)
		redisFree(c);
	return ok ? 0 : -1;
}

static void
cert_teardown(void)
{
	if (s_ok && cert_server_reset() != 0)
		fprintf(stderr, "check_drv_redis: tls-auth-clients not put "
		    "back to no\n");
}

/* The whole of a PEM file into out (cap bytes). */
static void
slurp(const char *path, char *out, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n;

	ck_assert_msg(f != NULL, "cannot open %s", path);
	n = fread(out, 1, cap - 1, f);
	ck_assert_msg(feof(f) && n > 0, "%s: empty or too long", path);
	out[n] = '\0';
	fclose(f);
}

struct pems {
	char	cert[8192], key[8192];	/* ours (the harness CA's) */
	char	ocert[8192], okey[8192];	/* another CA's, same CN */
};

static void
pems_load(struct pems *p)
{
	tls_up();
	ck_assert_msg(s_cli_cert[0] != '\0' && s_cli_ocert[0] != '\0',
	    "no TALLY_TEST_CA_CLIENT_CERT / _CLIENT_OTHER_CERT (ca.sh)");
	slurp(s_cli_cert, p->cert, sizeof(p->cert));
	slurp(s_cli_key, p->key, sizeof(p->key));
	slurp(s_cli_ocert, p->ocert, sizeof(p->ocert));
	slurp(s_cli_okey, p->okey, sizeof(p->okey));
}

/* open on the TLS port with tls, the harness CA and cert/key (NULL: none). */
static int
cert_open(const char *tls, const char *port, const char *cert,
    const char *key, void **hp, char *why)
{
	const char *settings[] = { "tls", tls, NULL };
	struct tl_drv_admin a = { s_host, port != NULL ? port : s_tls_port,
	    s_user, s_pw, settings, NULL, NULL, s_ca, cert, key };
	int rc;

	*hp = NULL;
	secret_add(s_pw);
	why[0] = '\0';
	rc = drv->open(&a, hp, why);
	ck_why(why);
	if (key != NULL)
		ck_no_key(why, key);
	return rc;
}

/*
 * A server that asks every client for a certificate (tls-auth-clients
 * yes): with ours the admin opens over verified TLS, presenting it (the
 * subject in why, nothing of the key), and a grant lives its life
 * (create, check, rotation, revocation, purge); a session the server
 * killed is dialled again with the certificate.  The consumer's login
 * of check presents none (it is refused for it, and check says the
 * login is not judged).  Without a certificate, or with one of another
 * CA, the open is TL_EAUTH saying so.  With tls-auth-clients optional
 * the admin's certificate still works, the consumer logs in without
 * one, and another CA's is still refused.
 */
START_TEST(test_cert_admin)
{
	struct pems p;
	struct grant a;
	struct tl_drv_grant old;
	char why[TL_WHY_MAX], pw1[TL_PASSWORD_MAX + 1];
	void *h, *h2;

	pems_load(&p);
	admin("CONFIG SET tls-auth-clients yes");
	ck_rc(cert_open("verify", NULL, p.cert, p.key, &h, why), 0, why);
	ck_assert_msg(strstr(why, "TLS, verified, client certificate") !=
	    NULL && strstr(why, "CN=tally_cert_admin") != NULL, "open: %s",
	    why);
	grant_init(&a, "cert");
	create_ok(h, &a.g);
	ck_assert(user_exists(a.name));
	ck_assert(can_auth(a.name, a.pw));
	/* The consumer's login presents nothing, so this server refuses it. */
	ck_assert_int_eq(tls_check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert_msg(strstr(why, "the login is not judged") != NULL &&
	    strstr(why, "none was presented") != NULL, "check: %s", why);
	ck_no_key(why, p.key);
	/* A session the server ended is dialled again, certificate and all. */
	admin("CLIENT KILL USER %s", s_user);
	snprintf(pw1, sizeof(pw1), "%s", a.pw);
	tl_secret_password(a.pw);
	secret_add(a.pw);
	ck_rc(drv->add_credential(h, &a.g, why), 0, why);
	ck_why(why);
	old = a.g;
	old.password = pw1;
	ck_rc(drv->retire_credential(h, &old, why), 0, why);
	ck_assert(!can_auth(a.name, pw1));
	ck_assert(can_auth(a.name, a.pw));
	ck_rc(drv->revoke(h, &a.g, 0, why), 0, why);
	ck_assert(!can_auth(a.name, a.pw));
	ck_rc(drv->revoke(h, &a.g, 1, why), 0, why);
	ck_assert(!user_exists(a.name));
	ck_why(why);
	drv->close(h);
	/* Without one: refused for it, saying how to give one. */
	ck_rc(cert_open("verify", NULL, NULL, NULL, &h, why), TL_EAUTH, why);
	ck_assert_ptr_null(h);
	ck_assert_msg(strstr(why, "asks for a client certificate") != NULL &&
	    strstr(why, "--secret admin-key") != NULL, "why: %s", why);
	/* Another CA's, same name: refused, saying the server refused it. */
	ck_rc(cert_open("verify", NULL, p.ocert, p.okey, &h, why), TL_EAUTH,
	    why);
	ck_assert_ptr_null(h);
	ck_assert_msg(strstr(why, "refused the client certificate") != NULL &&
	    strstr(why, "unknown ca") != NULL, "why: %s", why);
	/* tls=require presents it all the same. */
	ck_rc(cert_open("require", NULL, p.cert, p.key, &h, why), 0, why);
	ck_assert_msg(strstr(why, "TLS, not verified, client certificate") !=
	    NULL, "open: %s", why);
	drv->close(h);
	/* optional: the certificate is checked when presented. */
	admin("CONFIG SET tls-auth-clients optional");
	ck_rc(cert_open("verify", NULL, p.cert, p.key, &h, why), 0, why);
	ck_rc(cert_open("verify", NULL, NULL, NULL, &h2, why), 0, why);
	drv->close(h2);
	ck_rc(cert_open("verify", NULL, p.ocert, p.okey, &h2, why), TL_EAUTH,
	    why);
	ck_assert_msg(strstr(why, "unknown ca") != NULL, "why: %s", why);
	grant_init(&a, "certo");
	create_ok(h, &a.g);
	ck_assert_int_eq(tls_check(h, &a.g, why), TL_DRIFT_NONE);
	ck_assert_msg(strstr(why, "logs in") != NULL, "check: %s", why);
	ck_rc(drv->revoke(h, &a.g, 1, why), 0, why);
	drv->close(h);
	ck_assert_int_eq(cert_server_reset(), 0);
}
END_TEST

/*
 * The same refusals from a TLS 1.2 server, which gives its verdict in
 * the handshake itself (TLS 1.3's comes at the first reply): another
 * CA's certificate, and none at all, are TL_EAUTH, said the same way.
 */
START_TEST(test_cert_tls12)
{
	struct pems p;
	char why[TL_WHY_MAX];
	void *h;

	pems_load(&p);
	admin("CONFIG SET tls-protocols TLSv1.2");
	admin("CONFIG SET tls-auth-clients yes");
	ck_rc(cert_open("verify", NULL, p.cert, p.key, &h, why), 0, why);
	drv->close(h);
	ck_rc(cert_open("verify", NULL, p.ocert, p.okey, &h, why), TL_EAUTH,
	    why);
	ck_assert_msg(strstr(why, "refused the client certificate") != NULL &&
	    strstr(why, "unknown ca") != NULL, "why: %s", why);
	ck_rc(cert_open("verify", NULL, NULL, NULL, &h, why), TL_EAUTH, why);
	ck_assert_msg(strstr(why, "asks for a client certificate") != NULL,
	    "why: %s", why);
	ck_assert_int_eq(cert_server_reset(), 0);
}
END_TEST

/*
 * A pair that cannot be presented is refused before anything is
 * dialled: TL_EINVAL (not TL_EUNREACH) against a port where nothing
 * listens; why names the fault and holds no byte of a key.  A
 * certificate with tls off is refused the same way.
 */
START_TEST(test_cert_pairing)
{
	struct pems p;
	char why[TL_WHY_MAX], *enc;
	void *h;

	pems_load(&p);
	enc = tl_test_key_encrypted(p.key);
	ck_rc(cert_open("verify", "1", p.cert, NULL, &h, why), TL_EINVAL, why);
	ck_assert_msg(strstr(why, "admin-key is not") != NULL, "why: %s", why);
	ck_rc(cert_open("verify", "1", NULL, p.key, &h, why), TL_EINVAL, why);
	ck_assert_msg(strstr(why, "admin-cert is not") != NULL, "why: %s",
	    why);
	ck_rc(cert_open("verify", "1", p.cert, p.okey, &h, why), TL_EINVAL,
	    why);
	ck_assert_msg(strstr(why, "not the private key") != NULL, "why: %s",
	    why);
	ck_no_key(why, p.okey);
	ck_rc(cert_open("verify", "1", p.cert, enc, &h, why), TL_EINVAL, why);
	ck_assert_msg(strstr(why, "not an unencrypted") != NULL, "why: %s",
	    why);
	ck_rc(cert_open("verify", "1", p.key, p.key, &h, why), TL_EINVAL, why);
	ck_assert_msg(strstr(why, "no PEM certificate") != NULL, "why: %s",
	    why);
	ck_rc(cert_open("off", "1", p.cert, p.key, &h, why), TL_EINVAL, why);
	ck_assert_msg(strstr(why, "needs tls verify or require") != NULL,
	    "why: %s", why);
	ck_assert_ptr_null(h);
	/* The control: the same port without a certificate is dialled. */
	ck_rc(cert_open("off", "1", NULL, NULL, &h, why), TL_EUNREACH, why);
	free(enc);
}
END_TEST

/*
 * Sessions with a certificate leave no descriptor behind: opened and
 * closed (one refused too), /proc/self/fd counts what it did before.
 */
START_TEST(test_cert_no_fd_leak)
{
	struct pems p;
	char why[TL_WHY_MAX];
	struct grant a;
	void *h;
	int before, i;

	pems_load(&p);
	admin("CONFIG SET tls-auth-clients yes");
	/* Once first: what OpenSSL and hiredis open for good is opened. */
	ck_rc(cert_open("verify", NULL, p.cert, p.key, &h, why), 0, why);
	drv->close(h);
	before = tl_test_fds();
	for (i = 0; i < 3; i++) {
		ck_rc(cert_open("verify", NULL, p.cert, p.key, &h, why), 0,
		    why);
		grant_init(&a, "certfd");
		create_ok(h, &a.g);
		(void)tls_check(h, &a.g, why);
		ck_rc(drv->revoke(h, &a.g, 1, why), 0, why);
		drv->close(h);
		ck_rc(cert_open("verify", NULL, p.ocert, p.okey, &h, why),
		    TL_EAUTH, why);
	}
	ck_assert_int_eq(tl_test_fds(), before);
	ck_assert_int_eq(cert_server_reset(), 0);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("drv_redis");
	TCase *tc = tcase_create("redis");

	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_add_checked_fixture(tc, secrets_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_twice);
	tcase_add_test(tc, test_half_done);
	tcase_add_test(tc, test_foreign_refused);
	tcase_add_test(tc, test_hostile_names);
	tcase_add_test(tc, test_exclusive);
	tcase_add_test(tc, test_drift);
	tcase_add_test(tc, test_bulk);
	tcase_add_test(tc, test_rotation);
	tcase_add_test(tc, test_rotation_half_done);
	tcase_add_test(tc, test_revoke_restore_purge);
	tcase_add_test(tc, test_acl_saved);
	tcase_add_test(tc, test_fence_size_compose);
	tcase_add_test(tc, test_open_refused);
	tcase_add_test(tc, test_two_meshes);
	tcase_add_test(tc, test_deposed);
	tcase_add_test(tc, test_fence_raced);
	tcase_add_test(tc, test_tls_verified);
	tcase_add_test(tc, test_tls_untrusted);
	tcase_add_test(tc, test_tls_wrong_server);
	tcase_add_test(tc, test_plaintext_probe);
	suite_add_tcase(s, tc);
	/* Last among the server's: they change its tls-auth-clients. */
	tc = tcase_create("client_cert");
	tcase_add_unchecked_fixture(tc, server_up, cert_teardown);
	tcase_add_checked_fixture(tc, secrets_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_cert_pairing);
	tcase_add_test(tc, test_cert_admin);
	tcase_add_test(tc, test_cert_tls12);
	tcase_add_test(tc, test_cert_no_fd_leak);
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

	if (sodium_init() < 0)
		return 1;
	s_parent = getpid();
	if ((drv = tl_drv_find("redis")) == NULL) {
		fprintf(stderr, "no redis driver registered\n");
		return 1;
	}
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	server_stop();
	tl_secret_wipe(s_pw, sizeof(s_pw));
	return failed == 0 ? 0 : 1;
}
