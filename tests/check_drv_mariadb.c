/*
 * check_drv_mariadb.c - the MariaDB driver against a real server.
 *
 * The server: TALLY_TEST_MARIADB_HOST, _PORT, _USER and _PWFILE when set
 * (an admin with every privilege WITH GRANT OPTION); otherwise this suite
 * starts its own with tests/harness/mariadb.sh under $TALLY_TMP on a free
 * port, once per run (an unchecked fixture: a server that cannot start
 * fails every case, never skips it), and stops it before exiting.
 *
 * Out-of-band changes (an operator's GRANT, a consumer's session) go
 * through libmariadb directly; the driver is reached only through its
 * ops table.
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "lib/tl_fence.h"
#include "lib/tl_test.h"
#include "tests/lib/tl_pemtest.h"

static char	 s_host[256], s_port[16], s_user[64], s_pw[256];
static char	*s_dir;
static int	 s_tried, s_ok;
static char	 s_err[9000];
static pid_t	 s_parent;

static int
env_get(const char *file, const char *name, char *out, size_t n)
{
	char line[4096], *v, *o;
	size_t nl = strlen(name);
	FILE *f;
	int found = -1;

	if ((f = fopen(file, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		v = line;
		if (strncmp(v, "export ", 7) == 0)
			v += 7;
		if (strncmp(v, name, nl) != 0 || v[nl] != '=')
			continue;
		v += nl + 1;
		for (o = out; *v != '\0' && (size_t)(o - out) + 1 < n; v++)
			if (*v != '\'')
				*o++ = *v;
		*o = '\0';
		found = 0;
		break;
	}
	fclose(f);
	return found;
}

static int
server_start(void)
{
	const char *h = getenv("TALLY_TEST_MARIADB_HOST");
	const char *p = getenv("TALLY_TEST_MARIADB_PORT");
	const char *u = getenv("TALLY_TEST_MARIADB_USER");
	const char *pwf = getenv("TALLY_TEST_MARIADB_PWFILE");
	char envf[4096], pwfile[4096], port[16];
	int pn;

	if (h != NULL && *h != '\0' && p != NULL && *p != '\0' &&
	    pwf != NULL && *pwf != '\0') {
		snprintf(s_host, sizeof(s_host), "%s", h);
		snprintf(s_port, sizeof(s_port), "%s", p);
		snprintf(s_user, sizeof(s_user), "%s", u != NULL && *u ?
		    u : "root");
		if (tl_test_read_line(pwf, s_pw, sizeof(s_pw)) != 0) {
			snprintf(s_err, sizeof(s_err), "cannot read %s", pwf);
			return -1;
		}
		return 0;
	}
	if ((pn = tl_test_free_port()) <= 0) {
		snprintf(s_err, sizeof(s_err), "no port for MariaDB");
		return -1;
	}
	snprintf(port, sizeof(port), "%d", pn);
	s_dir = tl_test_tmpdir("mdbdrv");
	if (tl_test_harness_run("mariadb.sh", "start", s_dir, port) != 0) {
		snprintf(s_err, sizeof(s_err), "%s start %s %s failed (see "
		    "its messages above)", tl_test_harness("mariadb.sh"), s_dir,
		    port);
		return -1;
	}
	snprintf(envf, sizeof(envf), "%s/env", s_dir);
	if (env_get(envf, "TALLY_TEST_MARIADB_HOST", s_host, sizeof(s_host)) ||
	    env_get(envf, "TALLY_TEST_MARIADB_PORT", s_port, sizeof(s_port)) ||
	    env_get(envf, "TALLY_TEST_MARIADB_USER", s_user, sizeof(s_user)) ||
	    env_get(envf, "TALLY_TEST_MARIADB_PWFILE", pwfile,
	    sizeof(pwfile)) ||
	    tl_test_read_line(pwfile, s_pw, sizeof(s_pw)) != 0) {
		snprintf(s_err, sizeof(s_err), "cannot read %s", envf);
		return -1;
	}
	return 0;
}

static void
server_stop(void)
{
	if (s_dir == NULL || getpid() != s_parent)
		return;
	if (tl_test_harness_run("mariadb.sh", "stop", s_dir, NULL) != 0)
		fprintf(stderr, "check_drv_mariadb: mariadb.sh stop %s failed\n",
		    s_dir);
	free(s_dir);
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
		ck_abort_msg("no MariaDB to test against: %s", s_err);
}

/* --- helpers ------------------------------------------------------------ */

static const struct tl_drv_ops *drv;

#define ck_rc(rc, want, why) do {					\
	int rc_ = (rc), want_ = (want);					\
	ck_assert_msg(rc_ == want_, "%s:%d: rc %d (%s), wanted %d (%s); "\
	    "why: %s", __FILE__, __LINE__, rc_, tl_strerror(rc_), want_,	\
	    tl_strerror(want_), (why));					\
} while (0)

struct grant {
	char	res[64], own[64], log[64], id[128], pw[TL_PASSWORD_MAX + 1];
	struct tl_drv_grant g;
};

static void
grant_init(struct grant *gr, const char *tag)
{
	static int n;

	memset(&gr->g, 0, sizeof(gr->g));	/* posture, handle: none */
	n++;
	snprintf(gr->res, sizeof(gr->res), "db_%s_%d_%d", tag, (int)getpid(),
	    n);
	snprintf(gr->own, sizeof(gr->own), "%s", gr->res);
	snprintf(gr->log, sizeof(gr->log), "u_%s_%d_%d_v1", tag,
	    (int)getpid(), n);
	snprintf(gr->id, sizeof(gr->id), "mod/%s-%d-%d", tag, (int)getpid(),
	    n);
	tl_secret_password(gr->pw);
	gr->g.resource = gr->res;
	gr->g.owner = gr->own;
	gr->g.login = gr->log;
	gr->g.password = gr->pw;
	gr->g.grant = gr->id;
	gr->g.adopt_unnamed = 0;
	gr->g.adopt_mesh = NULL;
}

static const char *secrets[256];

static void
ck_why(const char *why)
{
	size_t i;

	for (i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
		if (secrets[i] != NULL && *secrets[i] != '\0')
			ck_assert_msg(strstr(why, secrets[i]) == NULL,
			    "a password leaked into why: %s", why);
}

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
}

static void *
drv_open(void)
{
	struct tl_drv_admin a = { s_host, s_port, s_user, s_pw, NULL };
	char why[TL_WHY_MAX];
	void *h = NULL;
	int rc;

	secret_add(s_pw);
	rc = drv->open(&a, &h, why);
	ck_why(why);
	ck_rc(rc, 0, why);
	return h;
}

static void
do_create(void *h, struct grant *gr)
{
	char why[TL_WHY_MAX];
	int rc;

	secret_add(gr->pw);
	rc = drv->create(h, &gr->g, why);
	ck_why(why);
	ck_rc(rc, 0, why);
}

static enum tl_drv_drift
do_check(void *h, struct grant *gr, char *out)
{
	struct tl_drv_endpoint ep = { s_host, s_port, NULL };
	enum tl_drv_drift d = (enum tl_drv_drift)-1;
	char why[TL_WHY_MAX];
	int rc;

	secret_add(gr->pw);
	rc = drv->check(h, &gr->g, &ep, &d, why);
	ck_why(why);
	ck_rc(rc, 0, why);
	if (out != NULL)
		snprintf(out, TL_WHY_MAX, "%s", why);
	return d;
}

static enum tl_drv_drift
do_bulk1(void *h, struct grant *gr)
{
	enum tl_drv_drift d = (enum tl_drv_drift)-1;
	char why[1][TL_WHY_MAX];
	int rc;

	rc = drv->check_bulk(h, &gr->g, 1, &d, why);
	ck_why(why[0]);
	ck_rc(rc, 0, why[0]);
	return d;
}

#define ck_drift(h, gr, want) do {					\
	char w_[TL_WHY_MAX];					\
	enum tl_drv_drift d_ = do_check((h), (gr), w_);			\
	ck_assert_msg(d_ == (want), "%s:%d: drift %d, wanted %d: %s",	\
	    __FILE__, __LINE__, (int)d_, (int)(want), w_);		\
	d_ = do_bulk1((h), (gr));					\
	ck_assert_msg(d_ == (want), "%s:%d: bulk drift %d, wanted %d",	\
	    __FILE__, __LINE__, (int)d_, (int)(want));			\
} while (0)

static MYSQL *
my_connect(const char *user, const char *pw, const char *db, char *err,
    size_t en)
{
	unsigned proto = MYSQL_PROTOCOL_TCP, to = 5;
	MYSQL *c = mysql_init(NULL);

	mysql_options(c, MYSQL_OPT_PROTOCOL, &proto);
	mysql_options(c, MYSQL_OPT_CONNECT_TIMEOUT, &to);
	if (mysql_real_connect(c, s_host, user, pw, db,
	    (unsigned)atoi(s_port), NULL, 0) != NULL)
		return c;
	snprintf(err, en, "%u %s", mysql_errno(c), mysql_error(c));
	mysql_close(c);
	return NULL;
}

static MYSQL *
admin(void)
{
	char err[512];
	MYSQL *c = my_connect(s_user, s_pw, NULL, err, sizeof(err));

	ck_assert_msg(c != NULL, "admin connection: %s", err);
	return c;
}

static void
sql(MYSQL *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
sql(MYSQL *c, const char *fmt, ...)
{
	char q[4096];
	va_list ap;
	MYSQL_RES *r;

	va_start(ap, fmt);
	vsnprintf(q, sizeof(q), fmt, ap);
	va_end(ap);
	ck_assert_msg(mysql_query(c, q) == 0, "%s: %s", q, mysql_error(c));
	if ((r = mysql_store_result(c)) != NULL)
		mysql_free_result(r);
}

/* 0 if the statement succeeds, else its error number. */
static unsigned
try_sql(MYSQL *c, const char *q)
{
	MYSQL_RES *r;

	if (mysql_query(c, q) != 0)
		return mysql_errno(c);
	if ((r = mysql_store_result(c)) != NULL)
		mysql_free_result(r);
	return 0;
}

static long
sql_long(MYSQL *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static long
sql_long(MYSQL *c, const char *fmt, ...)
{
	char q[4096];
	va_list ap;
	MYSQL_RES *r;
	MYSQL_ROW row;
	long v = -1;

	va_start(ap, fmt);
	vsnprintf(q, sizeof(q), fmt, ap);
	va_end(ap);
	ck_assert_msg(mysql_query(c, q) == 0, "%s: %s", q, mysql_error(c));
	r = mysql_store_result(c);
	ck_assert_ptr_nonnull(r);
	if ((row = mysql_fetch_row(r)) != NULL && row[0] != NULL)
		v = atol(row[0]);
	mysql_free_result(r);
	return v;
}

static int
can_login(struct grant *gr, const char *db)
{
	char err[512];
	MYSQL *c = my_connect(gr->log, gr->pw, db, err, sizeof(err));

	if (c == NULL)
		return 0;
	mysql_close(c);
	return 1;
}

/* --- create ----------------------------------------------------------- */

START_TEST(test_create_use)
{
	struct grant gr;
	char err[512];
	void *h = drv_open();
	MYSQL *c;

	grant_init(&gr, "use");
	do_create(h, &gr);
	do_create(h, &gr);	/* idempotent */
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "consumer login: %s", err);
	sql(c, "CREATE TABLE t (id INT PRIMARY KEY, v TEXT)");
	sql(c, "INSERT INTO t VALUES (1, 'x')");
	ck_assert_int_eq(sql_long(c, "SELECT COUNT(*) FROM t"), 1);
	/* Nothing beyond its own database. */
	ck_assert_uint_ne(try_sql(c, "CREATE DATABASE other_db_x"), 0);
	ck_assert_uint_ne(try_sql(c, "SELECT COUNT(*) FROM mysql.user"), 0);
	ck_assert_uint_ne(try_sql(c, "GRANT SELECT ON t TO 'root'@'localhost'"),
	    0);
	mysql_close(c);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

START_TEST(test_create_half_done)
{
	struct grant gr;
	void *h = drv_open();
	MYSQL *a = admin();

	grant_init(&gr, "half");
	do_create(h, &gr);
	/* A crash after the database, before the user. */
	sql(a, "DROP USER '%s'@'%%'", gr.log);
	do_create(h, &gr);
	ck_assert(can_login(&gr, gr.res));
	/* And after the marks, before anything was made. */
	sql(a, "DROP USER '%s'@'%%'", gr.log);
	sql(a, "DROP DATABASE `%s`", gr.res);
	do_create(h, &gr);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	mysql_close(a);
	drv->close(h);
}
END_TEST

START_TEST(test_create_sets_password)
{
	struct grant gr;
	void *h = drv_open();

	grant_init(&gr, "pw");
	do_create(h, &gr);
	tl_secret_password(gr.pw);	/* a crash lost the first password */
	do_create(h, &gr);
	ck_assert(can_login(&gr, gr.res));
	drv->close(h);
}
END_TEST

START_TEST(test_refuses_foreign)
{
	struct grant gr, gu, a1, b1;
	char why[TL_WHY_MAX];
	void *h = drv_open();
	MYSQL *a = admin();

	/* A database tally did not make. */
	grant_init(&gr, "fdb");
	sql(a, "CREATE DATABASE `%s`", gr.res);
	ck_rc(drv->create(h, &gr.g, why), TL_EINVAL, why);
	ck_assert_ptr_nonnull(strstr(why, "not made by tally"));
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM mysql.global_priv "
	    "WHERE User = '%s'", gr.log), 0);
	/* Revoke and purge leave it alone. */
	ck_rc(drv->revoke(h, &gr.g, 1, why), 0, why);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM information_schema."
	    "SCHEMATA WHERE SCHEMA_NAME = '%s'", gr.res), 1);
	/* A user tally did not make. */
	grant_init(&gu, "fu");
	sql(a, "CREATE USER '%s'@'%%' IDENTIFIED BY 'operator'", gu.log);
	ck_rc(drv->create(h, &gu.g, why), TL_EINVAL, why);
	ck_rc(drv->set_password(h, &gu.g, why), TL_EINVAL, why);
	ck_rc(drv->fix_privileges(h, &gu.g, why), TL_EINVAL, why);
	/* Another grant's objects under the same names. */
	grant_init(&a1, "oth");
	do_create(h, &a1);
	b1 = a1;
	snprintf(b1.id, sizeof(b1.id), "mod/another");
	b1.g.grant = b1.id;
	b1.g.resource = b1.res;
	b1.g.login = b1.log;
	b1.g.password = b1.pw;
	ck_rc(drv->create(h, &b1.g, why), TL_EINVAL, why);
	ck_assert_ptr_nonnull(strstr(why, a1.id));
	{
		enum tl_drv_drift d;
		struct tl_drv_endpoint ep = { s_host, s_port, NULL };

		ck_rc(drv->check(h, &b1.g, &ep, &d, why), TL_EINVAL, why);
	}
	ck_rc(drv->revoke(h, &b1.g, 1, why), 0, why);
	ck_assert(can_login(&a1, a1.res));	/* untouched */
	mysql_close(a);
	drv->close(h);
}
END_TEST

START_TEST(test_isolation)
{
	struct grant ga, gb;
	char err[512];
	void *h = drv_open();
	MYSQL *c;

	grant_init(&ga, "isoa");
	grant_init(&gb, "isob");
	do_create(h, &ga);
	do_create(h, &gb);
	c = my_connect(gb.log, gb.pw, gb.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	sql(c, "CREATE TABLE secret (v INT)");
	mysql_close(c);
	/* A cannot connect to B's database, nor read it from its own. */
	ck_assert_ptr_null(my_connect(ga.log, ga.pw, gb.res, err, sizeof(err)));
	c = my_connect(ga.log, ga.pw, ga.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	{
		char q[256];

		snprintf(q, sizeof(q), "SELECT * FROM `%s`.secret", gb.res);
		ck_assert_uint_ne(try_sql(c, q), 0);
		snprintf(q, sizeof(q), "USE `%s`", gb.res);
		ck_assert_uint_ne(try_sql(c, q), 0);
	}
	mysql_close(c);
	drv->close(h);
}
END_TEST

/* GRANT ON `a_b`.* would be a pattern: it must not reach `aXb`. */
START_TEST(test_underscore_is_not_a_wildcard)
{
	struct grant gr;
	char err[512], other[64];
	void *h = drv_open();
	MYSQL *a = admin(), *c;

	grant_init(&gr, "wild");
	do_create(h, &gr);
	snprintf(other, sizeof(other), "%s", gr.res);
	other[2] = 'X';		/* db_... -> dbX... matches db_ as a pattern */
	sql(a, "CREATE DATABASE `%s`", other);
	sql(a, "CREATE TABLE `%s`.t (v INT)", other);
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	{
		char q[256];

		snprintf(q, sizeof(q), "SELECT * FROM `%s`.t", other);
		ck_assert_uint_ne(try_sql(c, q), 0);
	}
	mysql_close(c);
	sql(a, "DROP DATABASE `%s`", other);
	mysql_close(a);
	drv->close(h);
}
END_TEST

START_TEST(test_hostile_names)
{
	static const char *const ids[] = {
		"m/a`b", "m/a'b", "m/a;b", "m/a\"b", "m/a\\b",
		"m/x'; DROP DATABASE mysql; --", "m/x`; DROP DATABASE mysql; #",
	};
	struct tl_drv_names nm[sizeof(ids) / sizeof(ids[0])];
	char why[TL_WHY_MAX];
	void *h = drv_open();
	MYSQL *a = admin();
	size_t i, j;

	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		struct tl_drv_name_in in = { ids[i], "r", "", "", 1, 2,
		    0 };
		struct grant gr;

		ck_rc(tl_drv_name(drv->decl, &in, &nm[i], why), 0, why);
		for (j = 0; j < i; j++) {
			ck_assert_str_ne(nm[i].resource, nm[j].resource);
			ck_assert_str_ne(nm[i].login, nm[j].login);
		}
		grant_init(&gr, "h");
		snprintf(gr.res, sizeof(gr.res), "%.63s", nm[i].resource);
		snprintf(gr.log, sizeof(gr.log), "%.63s", nm[i].login);
		snprintf(gr.id, sizeof(gr.id), "%.100s", ids[i]);
		do_create(h, &gr);
		ck_drift(h, &gr, TL_DRIFT_NONE);
		{
			char lit[300];

			mysql_real_escape_string(a, lit, ids[i],
			    (unsigned long)strlen(ids[i]));
			/* The mark holds the id byte for byte. */
			ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM "
			    "tally.marks WHERE grant_id = '%s' AND name IN "
			    "('%s', '%s')", lit, gr.res, gr.log), 2);
		}
		ck_rc(drv->revoke(h, &gr.g, 1, why), 0, why);
	}
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM information_schema."
	    "SCHEMATA WHERE SCHEMA_NAME = 'mysql'"), 1);
	/* Names that are not the scheme's are refused, not escaped. */
	{
		struct grant gr;

		grant_init(&gr, "bad");
		snprintf(gr.res, sizeof(gr.res), "a`; DROP DATABASE mysql; --");
		ck_rc(drv->create(h, &gr.g, why), TL_EINVAL, why);
		grant_init(&gr, "bad");
		snprintf(gr.log, sizeof(gr.log), "u'@'%%");
		ck_rc(drv->create(h, &gr.g, why), TL_EINVAL, why);
		grant_init(&gr, "bad");
		snprintf(gr.res, sizeof(gr.res), "mysql");
		ck_rc(drv->create(h, &gr.g, why), TL_EINVAL, why);
	}
	mysql_close(a);
	drv->close(h);
}
END_TEST

/* The server's general log sees every statement: no plaintext password. */
START_TEST(test_no_plaintext_in_server_log)
{
	struct grant gr;
	char why[TL_WHY_MAX], path[4096], line[8192];
	void *h;
	MYSQL *a = admin();
	FILE *f;
	int seen = 0;

	snprintf(path, sizeof(path), "/tmp/tally-mdb-general-%d.log",
	    (int)getpid());
	sql(a, "SET GLOBAL general_log_file = '%s'", path);
	sql(a, "SET GLOBAL general_log = 1");
	h = drv_open();
	grant_init(&gr, "log");
	do_create(h, &gr);
	ck_rc(drv->set_password(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	sql(a, "SET GLOBAL general_log = 0");
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "no general log at %s", path);
	while (fgets(line, sizeof(line), f) != NULL) {
		ck_assert_msg(strstr(line, gr.pw) == NULL, "plaintext password "
		    "in the server log: %s", line);
		if (strstr(line, gr.log) != NULL)
			seen = 1;
	}
	fclose(f);
	unlink(path);
	ck_assert_msg(seen, "the general log did not see the statements");
	mysql_close(a);
	drv->close(h);
}
END_TEST

START_TEST(test_types_are_distinct)
{
	const struct tl_drv_ops *pg = tl_drv_find("postgres");
	size_t i, j;

	ck_assert_ptr_eq(tl_drv_decl_for_type("mariadb-database"), drv->decl);
	ck_assert_ptr_ne(tl_drv_decl_for_type("postgres-database"), drv->decl);
	ck_assert_ptr_nonnull(pg);
	for (i = 0; drv->decl->types[i] != NULL; i++)
		for (j = 0; pg->decl->types[j] != NULL; j++)
			ck_assert_str_ne(drv->decl->types[i],
			    pg->decl->types[j]);
	ck_assert(tl_drv_has_tag(drv->decl, "database"));
	ck_assert(tl_drv_has_tag(drv->decl, "sql"));
	ck_assert_str_eq(drv->decl->migrate_dialect, "sql/mariadb");
	ck_assert(tl_drv_field_secret(drv->decl, "password"));
	ck_assert(tl_drv_field_secret(drv->decl, "uri"));
	ck_assert(!tl_drv_field_secret(drv->decl, "user"));
	ck_assert_str_eq(tl_drv_setting_default(drv->decl, "port"), "3306");
}
END_TEST

START_TEST(test_compose)
{
	struct tl_drv_endpoint ep = { "db.mesh.test", "3307", NULL };
	struct tl_drv_grant g = { "shop_1", "shop_1", "shop_1_v2",
	    "p@ss:w/rd%", NULL, 0 };
	char out[TL_DRV_VALUE_MAX + 1];

	ck_rc(tl_drv_compose(drv->decl, "uri", &ep, &g, out, sizeof(out)), 0,
	    "");
	/* A host not on loopback, no tls set: verified, no CA file. */
	ck_assert_str_eq(out, "mariadb://shop_1_v2:p%40ss%3Aw%2Frd%25@"
	    "db.mesh.test:3307/shop_1?ssl_mode=VERIFY_IDENTITY");
	ck_rc(tl_drv_compose(drv->decl, "database", &ep, &g, out,
	    sizeof(out)), 0, "");
	ck_assert_str_eq(out, "shop_1");
	g.password = NULL;
	ck_rc(tl_drv_compose(drv->decl, "uri", &ep, &g, out, sizeof(out)),
	    TL_EINVAL, "");
	ck_rc(tl_drv_compose(drv->decl, "nope", &ep, &g, out, sizeof(out)),
	    TL_ENOTFOUND, "");
	g.password = "x";
	ck_rc(tl_drv_compose(drv->decl, "uri", &ep, &g, out, 20), TL_ETOOBIG,
	    "");
}
END_TEST

/* What a consumer verifies the server with, for each mode. */
START_TEST(test_compose_tls)
{
	static const char tok[] = "@@tally-ca:mdb-1@@";
	static const char *const verify[] = { "tls", "verify", NULL };
	static const char *const require[] = { "tls", "require", NULL };
	static const char *const off[] = { "tls", "off", NULL };
	struct tl_drv_endpoint ep = { "db.mesh.test", "3307", verify, NULL,
	    tok };
	struct tl_drv_grant g = { "shop_1", "shop_1", "shop_1_v2", "pw",
	    NULL, 0 };
	char out[TL_DRV_VALUE_MAX + 1];
	static const struct { const char *const *sv; const char *uri, *mode,
	    *tls; } want[] = {
		{ verify, "mariadb://shop_1_v2:pw@db.mesh.test:3307/shop_1"
		    "?ssl_mode=VERIFY_IDENTITY&ssl_ca=@@tally-ca:mdb-1@@",
		    "VERIFY_IDENTITY", "true" },
		{ require, "mariadb://shop_1_v2:pw@db.mesh.test:3307/shop_1"
		    "?ssl_mode=REQUIRED", "REQUIRED", "true" },
		{ off, "mariadb://shop_1_v2:pw@db.mesh.test:3307/shop_1",
		    "DISABLED", "false" },
	};
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ep.settings = want[i].sv;
		ck_rc(tl_drv_compose(drv->decl, "uri", &ep, &g, out,
		    sizeof(out)), 0, "");
		ck_assert_str_eq(out, want[i].uri);
		ck_rc(tl_drv_compose(drv->decl, "ssl_mode", &ep, &g, out,
		    sizeof(out)), 0, "");
		ck_assert_str_eq(out, want[i].mode);
		ck_rc(tl_drv_compose(drv->decl, "tls", &ep, &g, out,
		    sizeof(out)), 0, "");
		ck_assert_str_eq(out, want[i].tls);
		ck_rc(tl_drv_compose(drv->decl, "ssl_ca", &ep, &g, out,
		    sizeof(out)), 0, "");
		ck_assert_str_eq(out, tok);
	}
	ck_assert(!tl_drv_field_secret(drv->decl, "ssl_ca"));
	ck_assert(!tl_drv_field_secret(drv->decl, "ssl_mode"));
	ck_assert(!tl_drv_field_secret(drv->decl, "tls"));
	/* No CA file: left out of the URI, the field "". */
	ep.settings = verify;
	ep.ca_path = NULL;
	ck_rc(tl_drv_compose(drv->decl, "uri", &ep, &g, out, sizeof(out)), 0,
	    "");
	ck_assert_str_eq(out, "mariadb://shop_1_v2:pw@db.mesh.test:3307/"
	    "shop_1?ssl_mode=VERIFY_IDENTITY");
	ck_rc(tl_drv_compose(drv->decl, "ssl_ca", &ep, &g, out, sizeof(out)),
	    0, "");
	ck_assert_str_eq(out, "");
	/* The query does not fit: refused, the password wiped. */
	ep.ca_path = tok;
	ck_rc(tl_drv_compose(drv->decl, "uri", &ep, &g, out, 60), TL_ETOOBIG,
	    "");
	ck_assert_str_eq(out, "");
}
END_TEST

/* --- check and repair ------------------------------------------------ */

START_TEST(test_drift_privileges)
{
	struct grant gr;
	char why[TL_WHY_MAX];
	void *h = drv_open();
	MYSQL *a = admin();

	grant_init(&gr, "dp");
	do_create(h, &gr);
	/* Widened: a global privilege, another database, GRANT OPTION. */
	sql(a, "GRANT PROCESS ON *.* TO '%s'@'%%'", gr.log);
	ck_drift(h, &gr, TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	sql(a, "GRANT SELECT ON mysql.* TO '%s'@'%%'", gr.log);
	ck_drift(h, &gr, TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM mysql.db WHERE "
	    "User = '%s' AND Db = 'mysql'", gr.log), 0);
	/* A table's, a column's and a routine's, elsewhere. */
	sql(a, "CREATE DATABASE IF NOT EXISTS drift_side");
	sql(a, "CREATE TABLE IF NOT EXISTS drift_side.t (x INT, y INT)");
	sql(a, "CREATE PROCEDURE IF NOT EXISTS drift_side.p() SELECT 1");
	sql(a, "GRANT INSERT ON drift_side.t TO '%s'@'%%'", gr.log);
	sql(a, "GRANT SELECT (y) ON drift_side.t TO '%s'@'%%'", gr.log);
	sql(a, "GRANT EXECUTE ON PROCEDURE drift_side.p TO '%s'@'%%' WITH "
	    "GRANT OPTION", gr.log);
	ck_drift(h, &gr, TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	ck_assert_int_eq(sql_long(a, "SELECT (SELECT COUNT(*) FROM "
	    "mysql.tables_priv WHERE User = '%s') + (SELECT COUNT(*) FROM "
	    "mysql.columns_priv WHERE User = '%s') + (SELECT COUNT(*) FROM "
	    "mysql.procs_priv WHERE User = '%s')", gr.log, gr.log, gr.log), 0);
	sql(a, "GRANT ALL ON `%s`.* TO '%s'@'%%' WITH GRANT OPTION", gr.res,
	    gr.log);
	ck_drift(h, &gr, TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	/* Narrowed (the grant is on the name as a pattern, _ escaped). */
	{
		char pat[140];
		size_t i, o = 0;

		for (i = 0; gr.res[i] != '\0'; i++) {
			if (gr.res[i] == '_')
				pat[o++] = '\\';
			pat[o++] = gr.res[i];
		}
		pat[o] = '\0';
		sql(a, "REVOKE INSERT, DELETE ON `%s`.* FROM '%s'@'%%'", pat,
		    gr.log);
	}
	ck_drift(h, &gr, TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	/* A shadowing account on another host. */
	sql(a, "CREATE USER '%s'@'localhost' IDENTIFIED BY 'x'", gr.log);
	ck_drift(h, &gr, TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	mysql_close(a);
	drv->close(h);
}
END_TEST

/*
 * The harness's CA (what signed the server's certificate) into out: 1,
 * or 0 when the server is not the harness's and TALLY_TEST_CA is unset.
 */
static int
test_ca(char *out, size_t n)
{
	char envf[4096];
	const char *e = getenv("TALLY_TEST_CA");

	if (s_dir != NULL) {
		snprintf(envf, sizeof(envf), "%s/env", s_dir);
		if (env_get(envf, "TALLY_TEST_MARIADB_CA", out, n) == 0)
			return 1;
	}
	if (e != NULL && *e != '\0') {
		snprintf(out, n, "%s", e);
		return 1;
	}
	return 0;
}

/*
 * Issue 24 item 3: consumers held to TLS.  Under tls verify (require
 * without the harness's CA) every user is REQUIRE SSL: a plaintext
 * login is refused, check's own login (over TLS with the CA, as a
 * consumer's) authenticates, REQUIRE NONE set by hand is privileges
 * drift (one by one and in bulk) that fix_privileges repairs; under tls
 * off a user is REQUIRE NONE.
 */
START_TEST(test_require_ssl)
{
	static const char *const sv_verify[] = { "tls", "verify", NULL };
	static const char *const sv_require[] = { "tls", "require", NULL };
	struct tl_drv_admin a0 = { s_host, s_port, s_user, s_pw, NULL };
	struct grant gr;
	char why[TL_WHY_MAX], err[512], ca[4096];
	void *h = NULL;
	MYSQL *a = admin(), *c;
	int rc;

	if (test_ca(ca, sizeof(ca))) {
		a0.settings = sv_verify;
		a0.ca_file = ca;
	} else
		a0.settings = sv_require;
	secret_add(s_pw);
	rc = drv->open(&a0, &h, why);
	ck_rc(rc, 0, why);
	grant_init(&gr, "tls");
	do_create(h, &gr);
	ck_assert_int_eq(sql_long(a, "SELECT JSON_VALUE(Priv, '$.ssl_type') "
	    "FROM mysql.global_priv WHERE User = '%s' AND Host = '%%'",
	    gr.log), 1);
	/* A consumer without TLS is refused; check's login is not. */
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c == NULL && strstr(err, "1045") != NULL,
	    "a plaintext login of a REQUIRE SSL user: %s", err);
	ck_drift(h, &gr, TL_DRIFT_NONE);

	/* Someone takes it away: drift, and repaired. */
	sql(a, "ALTER USER '%s'@'%%' REQUIRE NONE", gr.log);
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "plaintext after REQUIRE NONE: %s", err);
	mysql_close(c);
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_PRIVILEGES);
	ck_assert_msg(strstr(why, "without TLS") != NULL, "%s", why);
	ck_assert_int_eq(do_bulk1(h, &gr), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_assert_int_eq(sql_long(a, "SELECT JSON_VALUE(Priv, '$.ssl_type') "
	    "FROM mysql.global_priv WHERE User = '%s' AND Host = '%%'",
	    gr.log), 1);
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c == NULL, "plaintext after the repair");
	ck_drift(h, &gr, TL_DRIFT_NONE);
	/* A client certificate asked for is not what consumers have. */
	sql(a, "ALTER USER '%s'@'%%' REQUIRE X509", gr.log);
	ck_assert_int_eq(do_bulk1(h, &gr), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	drv->close(h);

	/* tls off (loopback): REQUIRE NONE is what is wanted, and set. */
	h = drv_open();
	ck_assert_int_eq(do_bulk1(h, &gr), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	ck_assert_int_eq(sql_long(a, "SELECT JSON_VALUE(Priv, '$.ssl_type') "
	    "FROM mysql.global_priv WHERE User = '%s' AND Host = '%%'",
	    gr.log), 0);
	mysql_close(a);
	drv->close(h);
}
END_TEST

/*
 * Issue 21 item 21: a resource limit set on the account by hand.  The
 * consumer is then refused with 1226, which is not a wrong password:
 * check names the limit (one by one and in bulk), reports privileges
 * (not credential), and fix_privileges removes it.
 */
START_TEST(test_drift_resource_limits)
{
	struct grant gr;
	char why[TL_WHY_MAX], err[512];
	void *h = drv_open();
	MYSQL *a = admin(), *held, *c2;
	size_t i;
	static const char *const limit[][2] = {
		{ "MAX_USER_CONNECTIONS 1", "MAX_USER_CONNECTIONS 1" },
		{ "MAX_QUERIES_PER_HOUR 5", "MAX_QUERIES_PER_HOUR 5" },
		{ "MAX_UPDATES_PER_HOUR 7", "MAX_UPDATES_PER_HOUR 7" },
		{ "MAX_CONNECTIONS_PER_HOUR 9", "MAX_CONNECTIONS_PER_HOUR 9" },
		{ "MAX_STATEMENT_TIME 0.001", "MAX_STATEMENT_TIME 0.001" },
	};

	grant_init(&gr, "rl");
	do_create(h, &gr);
	for (i = 0; i < sizeof(limit) / sizeof(limit[0]); i++) {
		sql(a, "ALTER USER '%s'@'%%' WITH %s", gr.log, limit[i][0]);
		ck_assert_msg(do_check(h, &gr, why) == TL_DRIFT_PRIVILEGES,
		    "after %s: %s", limit[i][0], why);
		ck_assert_msg(strstr(why, limit[i][1]) != NULL,
		    "after %s: why lacks it: %s", limit[i][0], why);
		ck_assert_int_eq(do_bulk1(h, &gr), TL_DRIFT_PRIVILEGES);
		ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
		ck_drift(h, &gr, TL_DRIFT_NONE);
	}

	/* The limit in force: one session held, the check's is refused. */
	sql(a, "ALTER USER '%s'@'%%' WITH MAX_USER_CONNECTIONS 1", gr.log);
	held = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(held != NULL, "first session: %s", err);
	c2 = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c2 == NULL && strstr(err, "1226") != NULL,
	    "a second session under MAX_USER_CONNECTIONS 1: %s", err);
	ck_assert_msg(do_check(h, &gr, why) == TL_DRIFT_PRIVILEGES,
	    "the consumer refused with 1226: %s", why);
	ck_assert_msg(strstr(why, "MAX_USER_CONNECTIONS") != NULL, "%s", why);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	c2 = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c2 != NULL, "a second session after the repair: %s",
	    err);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	mysql_close(c2);
	mysql_close(held);
	mysql_close(a);
	drv->close(h);
}
END_TEST

START_TEST(test_drift_credential)
{
	struct grant gr;
	char why[TL_WHY_MAX];
	void *h = drv_open();
	MYSQL *a = admin();

	grant_init(&gr, "dc");
	do_create(h, &gr);
	sql(a, "SET PASSWORD FOR '%s'@'%%' = PASSWORD('changed-by-hand')",
	    gr.log);
	ck_drift(h, &gr, TL_DRIFT_CREDENTIAL);
	ck_rc(drv->set_password(h, &gr.g, why), 0, why);
	ck_rc(drv->set_password(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	ck_assert(can_login(&gr, gr.res));
	mysql_close(a);
	drv->close(h);
}
END_TEST

START_TEST(test_drift_missing)
{
	struct grant gr, gu;
	char why[TL_WHY_MAX];
	void *h = drv_open();
	MYSQL *a = admin();

	grant_init(&gr, "dm");
	do_create(h, &gr);
	sql(a, "DROP DATABASE `%s`", gr.res);
	ck_drift(h, &gr, TL_DRIFT_MISSING);
	/* Flagged, never recreated by a repair. */
	ck_rc(drv->fix_privileges(h, &gr.g, why), TL_EDRIVER, why);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM information_schema."
	    "SCHEMATA WHERE SCHEMA_NAME = '%s'", gr.res), 0);
	grant_init(&gu, "dmu");
	do_create(h, &gu);
	sql(a, "DROP USER '%s'@'%%'", gu.log);
	ck_drift(h, &gu, TL_DRIFT_MISSING);
	ck_rc(drv->set_password(h, &gu.g, why), TL_EDRIVER, why);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM mysql.global_priv "
	    "WHERE User = '%s'", gu.log), 0);
	mysql_close(a);
	drv->close(h);
}
END_TEST

START_TEST(test_check_bulk)
{
	enum { N = 6 };
	struct grant gr[N];
	struct tl_drv_grant gs[N];
	enum tl_drv_drift d[N];
	char why[N][TL_WHY_MAX];
	void *h = drv_open();
	MYSQL *a = admin();
	int i;

	for (i = 0; i < N; i++) {
		grant_init(&gr[i], "bulk");
		do_create(h, &gr[i]);
	}
	sql(a, "GRANT SELECT ON mysql.* TO '%s'@'%%'", gr[1].log);
	sql(a, "SET PASSWORD FOR '%s'@'%%' = PASSWORD('other')", gr[2].log);
	sql(a, "DROP DATABASE `%s`", gr[3].res);
	sql(a, "DROP USER '%s'@'%%'", gr[4].log);
	tl_secret_password(gr[5].pw);	/* tally's idea differs */
	for (i = 0; i < N; i++)
		gs[i] = gr[i].g;
	ck_rc(drv->check_bulk(h, gs, N, d, why), 0, why[0]);
	ck_assert_int_eq(d[0], TL_DRIFT_NONE);
	ck_assert_int_eq(d[1], TL_DRIFT_PRIVILEGES);
	ck_assert_int_eq(d[2], TL_DRIFT_CREDENTIAL);
	ck_assert_int_eq(d[3], TL_DRIFT_MISSING);
	ck_assert_int_eq(d[4], TL_DRIFT_MISSING);
	ck_assert_int_eq(d[5], TL_DRIFT_CREDENTIAL);
	for (i = 0; i < N; i++)
		ck_why(why[i]);
	mysql_close(a);
	drv->close(h);
}
END_TEST

/* --- rotation, revocation ------------------------------------------- */

START_TEST(test_rotation_beside)
{
	struct grant v1, v2;
	char why[TL_WHY_MAX], err[512];
	unsigned n = 99;
	void *h = drv_open();
	MYSQL *c1, *c2;

	grant_init(&v1, "rot");
	do_create(h, &v1);
	v2 = v1;
	snprintf(v2.log, sizeof(v2.log), "%.60s2", v1.log);
	tl_secret_password(v2.pw);
	v2.g.login = v2.log;
	v2.g.password = v2.pw;
	v2.g.resource = v2.res;
	v2.g.grant = v2.id;
	secret_add(v2.pw);
	ck_rc(drv->add_credential(h, &v2.g, why), 0, why);
	ck_rc(drv->add_credential(h, &v2.g, why), 0, why);
	c1 = my_connect(v1.log, v1.pw, v1.res, err, sizeof(err));
	ck_assert_msg(c1 != NULL, "%s", err);
	sql(c1, "CREATE TABLE t (v INT)");
	sql(c1, "INSERT INTO t VALUES (1)");
	c2 = my_connect(v2.log, v2.pw, v2.res, err, sizeof(err));
	ck_assert_msg(c2 != NULL, "%s", err);
	ck_assert_int_eq(sql_long(c2, "SELECT COUNT(*) FROM t"), 1);
	sql(c2, "INSERT INTO t VALUES (2)");
	ck_rc(drv->sessions(h, &v1.g, &n, why), 0, why);
	ck_assert_uint_eq(n, 1);
	ck_rc(drv->retire_credential(h, &v1.g, why), 0, why);
	ck_rc(drv->retire_credential(h, &v1.g, why), 0, why);
	/* The old session is gone, the old login too; the new one works. */
	ck_assert_uint_ne(try_sql(c1, "SELECT 1"), 0);
	ck_assert(!can_login(&v1, v1.res));
	ck_rc(drv->sessions(h, &v1.g, &n, why), 0, why);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(sql_long(c2, "SELECT COUNT(*) FROM t"), 2);
	ck_drift(h, &v2, TL_DRIFT_NONE);
	mysql_close(c1);
	mysql_close(c2);
	drv->close(h);
}
END_TEST

START_TEST(test_revoke_retain_restore)
{
	struct grant gr;
	char why[TL_WHY_MAX], err[512];
	uint64_t bytes = 0;
	void *h = drv_open();
	MYSQL *c, *a = admin();

	grant_init(&gr, "ret");
	do_create(h, &gr);
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	sql(c, "CREATE TABLE t (v INT) ENGINE=InnoDB");
	sql(c, "INSERT INTO t VALUES (7)");
	ck_rc(drv->size(h, &gr.g, &bytes, why), 0, why);
	ck_assert_uint_gt(bytes, 0);
	ck_rc(drv->revoke(h, &gr.g, 0, why), 0, why);
	ck_rc(drv->revoke(h, &gr.g, 0, why), 0, why);
	ck_assert_uint_ne(try_sql(c, "SELECT 1"), 0);	/* killed */
	mysql_close(c);
	ck_assert(!can_login(&gr, gr.res));		/* locked */
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM `%s`.t", gr.res),
	    1);
	/* restore: create again unlocks it, on the kept data. */
	do_create(h, &gr);
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(sql_long(c, "SELECT v FROM t"), 7);
	mysql_close(c);
	/* purge */
	ck_rc(drv->revoke(h, &gr.g, 1, why), 0, why);
	ck_rc(drv->revoke(h, &gr.g, 1, why), 0, why);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM information_schema."
	    "SCHEMATA WHERE SCHEMA_NAME = '%s'", gr.res), 0);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM mysql.global_priv "
	    "WHERE User = '%s'", gr.log), 0);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM tally.marks WHERE "
	    "name IN ('%s', '%s')", gr.res, gr.log), 0);
	ck_rc(drv->size(h, &gr.g, &bytes, why), 0, why);
	ck_assert_uint_eq(bytes, 0);
	mysql_close(a);
	drv->close(h);
}
END_TEST

/* Purge also drops the grant's other users (a rotation interrupted). */
START_TEST(test_purge_drops_every_login)
{
	struct grant v1, v2;
	char why[TL_WHY_MAX];
	void *h = drv_open();
	MYSQL *a = admin();

	grant_init(&v1, "pall");
	do_create(h, &v1);
	v2 = v1;
	snprintf(v2.log, sizeof(v2.log), "%.60s2", v1.log);
	v2.g.login = v2.log;
	v2.g.resource = v2.res;
	v2.g.password = v2.pw;
	v2.g.grant = v2.id;
	ck_rc(drv->add_credential(h, &v2.g, why), 0, why);
	ck_rc(drv->revoke(h, &v2.g, 1, why), 0, why);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM mysql.global_priv "
	    "WHERE User IN ('%s', '%s')", v1.log, v2.log), 0);
	mysql_close(a);
	drv->close(h);
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
 * The server drops the admin session (KILL CONNECTION, as a restart
 * would): at most the next operation fails, TL_EUNREACH, and the one
 * after reconnects, without a second long wait.
 */
START_TEST(test_reconnect)
{
	struct grant gr;
	char why[TL_WHY_MAX], q[256];
	void *h = drv_open();
	MYSQL *a = admin();
	MYSQL_RES *r;
	MYSQL_ROW row;
	int rc, killed = 0;

	grant_init(&gr, "rec");
	do_create(h, &gr);
	snprintf(q, sizeof(q), "SELECT ID FROM information_schema.PROCESSLIST "
	    "WHERE USER = '%.40s' AND ID <> CONNECTION_ID()", s_user);
	ck_assert_int_eq(mysql_query(a, q), 0);
	r = mysql_store_result(a);
	while ((row = mysql_fetch_row(r)) != NULL) {
		snprintf(q, sizeof(q), "KILL CONNECTION %s", row[0]);
		if (try_sql(a, q) == 0)
			killed++;
	}
	mysql_free_result(r);
	ck_assert_int_ge(killed, 1);
	rc = drv->create(h, &gr.g, why);
	ck_assert_msg(rc == 0 || rc == TL_EUNREACH, "rc %d: %s", rc, why);
	ck_rc(drv->create(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	mysql_close(a);
	drv->close(h);
}
END_TEST

/* tally rotate --admin: the new password logs in, the old does not. */
START_TEST(test_admin_password)
{
	struct tl_drv_admin a = { s_host, s_port, "tally_adm2", "first-pw",
	    NULL };
	char why[TL_WHY_MAX], np[TL_PASSWORD_MAX + 1];
	struct grant gr;
	void *h = NULL, *h2 = NULL;
	MYSQL *c = admin();

	sql(c, "CREATE USER IF NOT EXISTS 'tally_adm2'@'%%' IDENTIFIED BY "
	    "'first-pw'");
	sql(c, "GRANT ALL PRIVILEGES ON *.* TO 'tally_adm2'@'%%' WITH GRANT "
	    "OPTION");
	ck_rc(drv->open(&a, &h, why), 0, why);
	tl_secret_password(np);
	secret_add(np);
	ck_rc(drv->set_admin_password(h, "tally_adm2", np, why), 0, why);
	ck_why(why);
	/* The handle keeps working (and reconnects with the new one). */
	grant_init(&gr, "adm");
	do_create(h, &gr);
	ck_rc(drv->open(&a, &h2, why), TL_EAUTH, why);
	a.password = np;
	ck_rc(drv->open(&a, &h2, why), 0, why);
	drv->close(h2);
	drv->close(h);
	sql(c, "DROP USER 'tally_adm2'@'%%'");
	mysql_close(c);
}
END_TEST

START_TEST(test_open_errors)
{
	struct tl_drv_admin a = { s_host, s_port, s_user, "wrong", NULL };
	struct tl_drv_admin u = { "127.0.0.1", "1", s_user, s_pw, NULL };
	char why[TL_WHY_MAX];
	void *h = NULL;

	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	ck_rc(drv->open(&u, &h, why), TL_EUNREACH, why);
	ck_why(why);
}
END_TEST

/* --- migrations ---------------------------------------------------- */

static int
migrate(struct grant *gr, const char *file, const char *text,
    unsigned timeout, atomic_int *cancel, int *already, char *why,
    int *line)
{
	struct tl_drv_endpoint ep = { s_host, s_port, NULL };
	struct tl_drv_migration m = { file, NULL, text, strlen(text), timeout,
	    cancel };
	unsigned char h[32];
	char sum[65];
	int i;

	crypto_generichash(h, sizeof(h), (const unsigned char *)text,
	    strlen(text), NULL, 0);
	for (i = 0; i < 32; i++)
		snprintf(sum + 2 * i, 3, "%02x", h[i]);
	m.checksum = sum;
	return drv->migrate(&ep, &gr->g, &m, already, why, line);
}

START_TEST(test_migrate_apply)
{
	static const char text[] =
	    "-- a comment; with a semicolon\n"
	    "CREATE TABLE a (id INT PRIMARY KEY, s TEXT);\n"
	    "INSERT INTO a VALUES (1, 'it''s; fine'), (2, \"x;\\\"y\");\n"
	    "/* block; comment */ INSERT INTO `a` VALUES (3, '#not');\n"
	    "# hash comment ;\n"
	    "CREATE TABLE `b;c` (v INT)\n";
	struct grant gr;
	char why[TL_WHY_MAX], err[512];
	int already = -1, line = -1;
	void *h = drv_open();
	MYSQL *c;

	grant_init(&gr, "mig");
	do_create(h, &gr);
	ck_rc(migrate(&gr, "001_a.sql", text, 0, NULL, &already, why, &line),
	    0, why);
	ck_assert_int_eq(already, 0);
	ck_rc(migrate(&gr, "001_a.sql", text, 0, NULL, &already, why, &line),
	    0, why);
	ck_assert_int_eq(already, 1);
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(sql_long(c, "SELECT COUNT(*) FROM a"), 3);
	ck_assert_int_eq(sql_long(c, "SELECT COUNT(*) FROM a WHERE s = "
	    "'it''s; fine'"), 1);
	ck_assert_int_eq(sql_long(c, "SELECT COUNT(*) FROM `b;c`"), 0);
	ck_assert_int_eq(sql_long(c, "SELECT COUNT(*) FROM "
	    "tally_schema_history WHERE file = '001_a.sql' AND state = "
	    "'done'"), 5);
	/* An edited file is refused. */
	ck_rc(migrate(&gr, "001_a.sql", "SELECT 1", 0, NULL, &already, why,
	    &line), TL_EDRIVER, why);
	mysql_close(c);
	drv->close(h);
}
END_TEST

/* A file that fails half way resumes there, never repeating a statement. */
START_TEST(test_migrate_resume)
{
	static const char text[] =
	    "CREATE TABLE one (v INT);\n"
	    "INSERT INTO one VALUES (1);\n"
	    "\n"
	    "INSERT INTO two SELECT v FROM one;\n"
	    "CREATE TABLE three (v INT);\n";
	struct grant gr;
	char why[TL_WHY_MAX], err[512];
	int already, line = 0;
	void *h = drv_open();
	MYSQL *c;

	grant_init(&gr, "res");
	do_create(h, &gr);
	ck_rc(migrate(&gr, "002_r.sql", text, 0, NULL, &already, why, &line),
	    TL_EDRIVER, why);
	ck_assert_int_eq(line, 4);
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	sql(c, "CREATE TABLE two (v INT)");	/* what it lacked */
	ck_rc(migrate(&gr, "002_r.sql", text, 0, NULL, &already, why, &line),
	    0, why);
	ck_assert_int_eq(already, 0);
	/* CREATE TABLE one again would have failed; INSERT twice, 2 rows. */
	ck_assert_int_eq(sql_long(c, "SELECT COUNT(*) FROM one"), 1);
	ck_assert_int_eq(sql_long(c, "SELECT COUNT(*) FROM two"), 1);
	ck_assert_int_eq(sql_long(c, "SELECT COUNT(*) FROM three"), 0);
	/* A DDL interrupted while it ran is refused, never repeated. */
	sql(c, "INSERT INTO tally_schema_history (file, checksum, stmt, state) "
	    "SELECT '003_x.sql', checksum, 1, 'started' FROM "
	    "tally_schema_history WHERE file = '002_r.sql' AND stmt = 0");
	mysql_close(c);
	{
		int line2 = 0;

		ck_rc(migrate(&gr, "003_x.sql", text, 0, NULL, &already, why,
		    &line2), TL_EDRIVER, why);
		ck_assert_ptr_nonnull(strstr(why, "interrupted"));
		ck_assert_int_eq(line2, 1);
	}
	drv->close(h);
}
END_TEST

START_TEST(test_migrate_refused)
{
	static const struct { const char *sql; int line; } bad[] = {
		{ "SELECT 1;\nDELIMITER //\nSELECT 2//\n", 2 },
		{ "CREATE TABLE x (v INT);\n\nCREATE PROCEDURE p() BEGIN "
		  "SELECT 1; END;\n", 3 },
		{ "START TRANSACTION;\n", 1 },
		{ "SELECT 1;\n/*!50000 SELECT 2 */;\n", 2 },
		{ "SELECT 1;\nSELECT 'never ends;\n", 2 },
		{ "SELECT 1;\nUSE mysql;\n", 2 },
	};
	struct grant gr;
	char why[TL_WHY_MAX], err[512];
	int already, line;
	size_t i;
	void *h = drv_open();
	MYSQL *c;

	grant_init(&gr, "ref");
	do_create(h, &gr);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		line = 0;
		ck_rc(migrate(&gr, "009_bad.sql", bad[i].sql, 0, NULL,
		    &already, why, &line), TL_EDRIVER, why);
		ck_assert_msg(line == bad[i].line, "case %zu: line %d, wanted "
		    "%d: %s", i, line, bad[i].line, why);
	}
	/* Refused before anything ran. */
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_uint_ne(try_sql(c, "SELECT * FROM x"), 0);
	mysql_close(c);
	drv->close(h);
}
END_TEST

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(test_migrate_timeout)
{
	struct grant gr;
	char why[TL_WHY_MAX];
	int already, line;
	double t0;
	void *h = drv_open();

	grant_init(&gr, "tmo");
	do_create(h, &gr);
	t0 = now_s();
	ck_rc(migrate(&gr, "010_slow.sql", "CREATE TABLE s (v INT);\n"
	    "SELECT SLEEP(20);\n", 1, NULL, &already, why, &line), TL_EDRIVER,
	    why);
	ck_assert_msg(now_s() - t0 < 4, "took %.1f s", now_s() - t0);
	ck_assert_ptr_nonnull(strstr(why, "time limit"));
	ck_assert_int_eq(line, 2);
	drv->close(h);
}
END_TEST

static void *
cancel_later(void *arg)
{
	struct timespec ts = { 0, 400 * 1000000L };

	nanosleep(&ts, NULL);
	atomic_store((atomic_int *)arg, 1);
	return NULL;
}

START_TEST(test_migrate_cancel)
{
	struct grant gr;
	char why[TL_WHY_MAX], err[512];
	int already, line;
	atomic_int cancel = 0;
	pthread_t th;
	double t0;
	void *h = drv_open();
	MYSQL *c;

	grant_init(&gr, "can");
	do_create(h, &gr);
	t0 = now_s();
	pthread_create(&th, NULL, cancel_later, &cancel);
	ck_rc(migrate(&gr, "011_c.sql", "CREATE TABLE c1 (v INT);\n"
	    "INSERT INTO c1 SELECT SLEEP(20);\nCREATE TABLE c2 (v INT);\n",
	    60, &cancel, &already, why, &line), TL_EDRIVER, why);
	pthread_join(th, NULL);
	ck_assert_msg(now_s() - t0 < 3, "took %.1f s", now_s() - t0);
	ck_assert_ptr_nonnull(strstr(why, "cancel"));
	c = my_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(sql_long(c, "SELECT COUNT(*) FROM c1"), 0);
	ck_assert_uint_ne(try_sql(c, "SELECT * FROM c2"), 0);
	mysql_close(c);
	drv->close(h);
}
END_TEST

/* --- meshes and fences ------------------------------------------------ */

static void
hex_id(char out[33])
{
	unsigned char b[16];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, 33, b, sizeof(b));
}

/* A session of mesh (and under fence; NULL: a reader's). */
static void *
drv_open_mesh(const char *mesh, const struct tl_drv_fence *fence)
{
	struct tl_drv_admin a = { s_host, s_port, s_user, s_pw, NULL };
	char why[TL_WHY_MAX];
	void *h = NULL;
	int rc;

	a.mesh = mesh;
	a.fence = fence;
	secret_add(s_pw);
	rc = drv->open(&a, &h, why);
	ck_rc(rc, 0, why);
	return h;
}

/* The mesh the mark of (kind, name) names ("-": no mark). */
static void
mark_mesh(MYSQL *a, char kind, const char *name, char *out, size_t n)
{
	char q[512];
	MYSQL_RES *r;
	MYSQL_ROW row;

	snprintf(q, sizeof(q), "SELECT mesh FROM tally.marks WHERE kind = "
	    "'%c' AND name = '%s'", kind, name);
	ck_assert_msg(mysql_query(a, q) == 0, "%s: %s", q, mysql_error(a));
	r = mysql_store_result(a);
	ck_assert_ptr_nonnull(r);
	row = mysql_fetch_row(r);
	snprintf(out, n, "%s", row != NULL && row[0] != NULL ? row[0] : "-");
	mysql_free_result(r);
}

#define ck_refused(call, needle) do {					\
	int r_ = (call);						\
	ck_why(why);							\
	ck_rc(r_, TL_EREFUSED, why);					\
	ck_assert_msg(strstr(why, (needle)) != NULL, "%s:%d: %s lacks %s",\
	    __FILE__, __LINE__, why, (needle));				\
} while (0)

/*
 * Two meshes on one server, the same grant id and (forced) the same
 * names: the second is refused everything, naming the first, and the
 * first's objects and login are as they were; adopt_mesh takes them
 * over on purpose; a mark from before marks named meshes is ours.
 */
START_TEST(test_two_meshes)
{
	struct grant g1, g2, g2v2, g3;
	char m1[33], m2[33], owned1[64], owned2[64], why[TL_WHY_MAX],
	    mk[80];
	struct tl_drv_endpoint ep = { s_host, s_port, NULL };
	enum tl_drv_drift d;
	MYSQL *a = admin();
	void *h1, *h2;

	hex_id(m1);
	hex_id(m2);
	snprintf(owned1, sizeof(owned1), "owned by mesh %.12s", m1);
	snprintf(owned2, sizeof(owned2), "owned by mesh %.12s", m2);
	h1 = drv_open_mesh(m1, NULL);
	h2 = drv_open_mesh(m2, NULL);
	grant_init(&g1, "mesh");
	do_create(h1, &g1);
	mark_mesh(a, 'd', g1.res, mk, sizeof(mk));
	ck_assert_str_eq(mk, m1);
	mark_mesh(a, 'u', g1.log, mk, sizeof(mk));
	ck_assert_str_eq(mk, m1);

	g2 = g1;
	g2.g.resource = g2.res;
	g2.g.owner = g2.own;
	g2.g.login = g2.log;
	g2.g.grant = g2.id;
	tl_secret_password(g2.pw);
	g2.g.password = g2.pw;
	secret_add(g2.pw);
	ck_refused(drv->create(h2, &g2.g, why), owned1);
	ck_refused(drv->set_password(h2, &g2.g, why), owned1);
	ck_refused(drv->fix_privileges(h2, &g2.g, why), owned1);
	g2v2 = g2;
	snprintf(g2v2.log, sizeof(g2v2.log), "%.60s2", g2.log);
	g2v2.g.login = g2v2.log;
	g2v2.g.resource = g2v2.res;
	g2v2.g.grant = g2v2.id;
	g2v2.g.password = g2v2.pw;
	ck_refused(drv->add_credential(h2, &g2v2.g, why), owned1);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM mysql.global_priv "
	    "WHERE User = '%s'", g2v2.log), 0);
	ck_refused(drv->retire_credential(h2, &g2.g, why), owned1);
	ck_refused(drv->revoke(h2, &g2.g, 0, why), owned1);
	ck_refused(drv->revoke(h2, &g2.g, 1, why), owned1);
	d = TL_DRIFT_NONE;
	ck_rc(drv->check(h2, &g2.g, &ep, &d, why), 0, why);
	ck_assert_msg(d != TL_DRIFT_NONE && strstr(why, owned1) != NULL,
	    "check: drift %d: %s", (int)d, why);
	{
		enum tl_drv_drift bd = TL_DRIFT_NONE;
		char bw[1][TL_WHY_MAX];

		ck_rc(drv->check_bulk(h2, &g2.g, 1, &bd, bw), 0, bw[0]);
		ck_assert_msg(bd != TL_DRIFT_NONE && strstr(bw[0], owned1) !=
		    NULL, "check_bulk: drift %d: %s", (int)bd, bw[0]);
	}
	/* The first mesh's: untouched, its login works. */
	ck_assert(can_login(&g1, g1.res));
	ck_assert(!can_login(&g2, g2.res));
	mark_mesh(a, 'u', g1.log, mk, sizeof(mk));
	ck_assert_str_eq(mk, m1);
	ck_drift(h1, &g1, TL_DRIFT_NONE);

	/* Taken over on purpose, and marked with the second mesh. */
	g2.g.adopt_mesh = m1;
	ck_rc(drv->set_password(h2, &g2.g, why), 0, why);
	mark_mesh(a, 'd', g2.res, mk, sizeof(mk));
	ck_assert_str_eq(mk, m2);
	mark_mesh(a, 'u', g2.log, mk, sizeof(mk));
	ck_assert_str_eq(mk, m2);
	ck_assert(can_login(&g2, g2.res));
	g2.g.adopt_mesh = NULL;
	ck_drift(h2, &g2, TL_DRIFT_NONE);
	ck_refused(drv->set_password(h1, &g1.g, why), owned2);

	/* A mark of before marks named meshes: ours, marked again. */
	grant_init(&g3, "nomesh");
	sql(a, "INSERT INTO tally.marks (kind, name, grant_id, mesh) VALUES "
	    "('u', '%s', '%s', '')", g3.log, g3.id);
	do_create(h2, &g3);
	mark_mesh(a, 'u', g3.log, mk, sizeof(mk));
	ck_assert_str_eq(mk, m2);
	ck_assert(can_login(&g3, g3.res));

	ck_rc(drv->revoke(h2, &g2.g, 1, why), 0, why);
	ck_rc(drv->revoke(h2, &g3.g, 1, why), 0, why);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM information_schema."
	    "SCHEMATA WHERE SCHEMA_NAME = '%s'", g1.res), 0);
	mysql_close(a);
	drv->close(h1);
	drv->close(h2);
}
END_TEST

/*
 * A session whose fence another leader overtook is refused its next
 * change ("deposed"), and nothing changes on the server; the new
 * leader's session and a reader's (no fence) work.
 */
START_TEST(test_deposed)
{
	struct grant g, g2, gv2;
	char m[33], la[33], lb[33], why[TL_WHY_MAX];
	struct tl_drv_fence fa, fb;
	struct tl_drv_fence_held held;
	struct tl_drv_endpoint ep = { s_host, s_port, NULL };
	enum tl_drv_drift d;
	MYSQL *a = admin();
	void *ha, *hb, *hr;

	hex_id(m);
	hex_id(la);
	hex_id(lb);
	fa = (struct tl_drv_fence){ m, 2, la };
	fb = (struct tl_drv_fence){ m, 3, lb };
	ha = drv_open_mesh(m, &fa);
	ck_rc(drv->fence(ha, &fa, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fa, &held));
	grant_init(&g, "depose");
	do_create(ha, &g);
	hb = drv_open_mesh(m, &fb);
	ck_rc(drv->fence(hb, &fb, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fb, &held));

	grant_init(&g2, "depose");
	secret_add(g2.pw);
	ck_refused(drv->create(ha, &g2.g, why), "deposed");
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM information_schema."
	    "SCHEMATA WHERE SCHEMA_NAME = '%s'", g2.res), 0);
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM mysql.global_priv "
	    "WHERE User = '%s'", g2.log), 0);
	{
		char oldpw[TL_PASSWORD_MAX + 1];

		memcpy(oldpw, g.pw, sizeof(oldpw));
		tl_secret_password(g.pw);
		secret_add(g.pw);
		ck_refused(drv->set_password(ha, &g.g, why), "deposed");
		memcpy(g.pw, oldpw, sizeof(oldpw));
	}
	gv2 = g;
	snprintf(gv2.log, sizeof(gv2.log), "%.60s2", g.log);
	gv2.g.login = gv2.log;
	gv2.g.resource = gv2.res;
	gv2.g.grant = gv2.id;
	gv2.g.password = gv2.pw;
	ck_refused(drv->add_credential(ha, &gv2.g, why), "deposed");
	ck_assert_int_eq(sql_long(a, "SELECT COUNT(*) FROM mysql.global_priv "
	    "WHERE User = '%s'", gv2.log), 0);
	ck_refused(drv->fix_privileges(ha, &g.g, why), "deposed");
	ck_refused(drv->retire_credential(ha, &g.g, why), "deposed");
	ck_refused(drv->revoke(ha, &g.g, 0, why), "deposed");
	ck_refused(drv->revoke(ha, &g.g, 1, why), "deposed");
	ck_refused(drv->set_admin_password(ha, s_user, s_pw, why),
	    "deposed");
	ck_assert(can_login(&g, g.res));

	hr = drv_open_mesh(m, NULL);
	d = TL_DRIFT_MISSING;
	ck_rc(drv->check(hr, &g.g, &ep, &d, why), 0, why);
	ck_assert_msg(d == TL_DRIFT_NONE, "%s", why);
	ck_rc(drv->fix_privileges(hb, &g.g, why), 0, why);
	ck_rc(drv->revoke(hb, &g.g, 1, why), 0, why);
	ck_assert(!can_login(&g, g.res));
	mysql_close(a);
	drv->close(ha);
	drv->close(hb);
	drv->close(hr);
}
END_TEST

/*
 * The session that holds the fence is kept with the handle: ended by
 * the server between two calls, the fence raised meanwhile, the
 * handle's next call makes it again and is refused.
 */
START_TEST(test_deposed_kept_session)
{
	struct grant g;
	char m[33], la[33], lb[33], why[TL_WHY_MAX], q[256];
	struct tl_drv_fence fa, fb;
	struct tl_drv_fence_held held;
	MYSQL *a = admin();
	MYSQL_RES *r;
	MYSQL_ROW row;
	void *ha, *hb;

	hex_id(m);
	hex_id(la);
	hex_id(lb);
	fa = (struct tl_drv_fence){ m, 2, la };
	fb = (struct tl_drv_fence){ m, 3, lb };
	ha = drv_open_mesh(m, &fa);
	ck_rc(drv->fence(ha, &fa, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fa, &held));
	grant_init(&g, "kept");
	do_create(ha, &g);
	ck_rc(drv->fix_privileges(ha, &g.g, why), 0, why);

	/* Every other session of the admin's ended: both of ha's. */
	snprintf(q, sizeof(q), "SELECT ID FROM information_schema.PROCESSLIST "
	    "WHERE ID <> CONNECTION_ID() AND USER = '%s'", s_user);
	ck_assert_int_eq(mysql_query(a, q), 0);
	ck_assert_ptr_nonnull(r = mysql_store_result(a));
	while ((row = mysql_fetch_row(r)) != NULL) {
		snprintf(q, sizeof(q), "KILL CONNECTION %s", row[0]);
		(void)try_sql(a, q);	/* gone already: as good */
	}
	mysql_free_result(r);

	hb = drv_open_mesh(m, &fb);
	ck_rc(drv->fence(hb, &fb, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fb, &held));
	ck_refused(drv->revoke(ha, &g.g, 1, why), "deposed");
	ck_assert(can_login(&g, g.res));
	ck_refused(drv->fix_privileges(ha, &g.g, why), "deposed");
	ck_rc(drv->revoke(hb, &g.g, 1, why), 0, why);
	ck_assert(!can_login(&g, g.res));
	mysql_close(a);
	drv->close(ha);
	drv->close(hb);
}
END_TEST

/* --- the admin's client certificate ------------------------------- */

/*
 * The harness's client certificates (tests/harness/ca.sh): client.pem
 * and .key, subject /O=tally tests/CN=tally_cert_admin, of the CA the
 * server's ssl-ca names; client-other.*, the same subject of an
 * unrelated CA.  cert_up makes CERT_USER, no password, REQUIRE SUBJECT
 * that certificate's, with what the driver's admin needs (every
 * privilege WITH GRANT OPTION), and CERT_WRONG, REQUIRE SUBJECT another
 * one; cert_down drops both.
 */
#define CERT_USER	"tally_cert_admin"
#define CERT_WRONG	"tally_cert_wrong"
#define CERT_SUBJECT	"/O=tally tests/CN=" CERT_USER

/* The value of var in the harness's env (or the environment): a path. */
static void
cert_path(const char *var, char *out, size_t n)
{
	char envf[4096];
	const char *e = getenv(var);

	if (s_dir != NULL) {
		snprintf(envf, sizeof(envf), "%s/env", s_dir);
		if (env_get(envf, var, out, n) == 0)
			return;
	}
	ck_assert_msg(e != NULL && *e != '\0', "no %s: the server is not the "
	    "harness's and the environment does not name it", var);
	snprintf(out, n, "%s", e);
}

/* The text of the file var names (malloc'd; the test frees it). */
static char *
pem_of(const char *var)
{
	char path[4096], *buf;
	FILE *f;
	long len;

	cert_path(var, path, sizeof(path));
	ck_assert_msg((f = fopen(path, "r")) != NULL, "%s: %s", path,
	    strerror(errno));
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)len + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	return buf;
}

/* Unchecked fixture (after server_up): the users. */
static void
cert_up(void)
{
	MYSQL *a;

	if (!s_ok)
		return;
	a = admin();
	sql(a, "DROP USER IF EXISTS '" CERT_USER "'@'%%', '" CERT_WRONG
	    "'@'%%'");
	sql(a, "CREATE USER '" CERT_USER "'@'%%' REQUIRE SUBJECT '"
	    CERT_SUBJECT "'");
	sql(a, "GRANT ALL PRIVILEGES ON *.* TO '" CERT_USER "'@'%%' WITH "
	    "GRANT OPTION");
	sql(a, "CREATE USER '" CERT_WRONG "'@'%%' REQUIRE SUBJECT "
	    "'/O=tally tests/CN=someone_else'");
	mysql_close(a);
}

static void
cert_down(void)
{
	MYSQL *a;

	if (!s_ok || getpid() != s_parent)
		return;
	a = admin();
	sql(a, "DROP USER IF EXISTS '" CERT_USER "'@'%%', '" CERT_WRONG
	    "'@'%%'");
	mysql_close(a);
}

/* Over verified TLS, as CERT_USER with no password: cert and key. */
static const char *const c_verify[] = { "tls", "verify", NULL };

static void
cert_admin(struct tl_drv_admin *a, char *ca, size_t n, const char *cert,
    const char *key)
{
	cert_path("TALLY_TEST_CA", ca, n);
	memset(a, 0, sizeof(*a));
	a->host = s_host;
	a->port = s_port;
	a->user = CERT_USER;
	a->settings = c_verify;
	a->ca_file = ca;
	a->client_cert = cert;
	a->client_key = key;
}

/*
 * Issue 24 item 1: the admin account logs in by its client certificate
 * alone (REQUIRE SUBJECT, no password) over verified TLS, and the
 * driver does all of its work so, under a fence (its second session,
 * the fence's, presents it too): create, check (the consumer's login,
 * no certificate), a reconnect after the server killed the sessions
 * (libmariadb opens the files again), retire, purge.  The key is only
 * ever in a memfd while the handle lives and in no descriptor after
 * close; no reason holds a byte of it.
 */
START_TEST(test_cert_admin)
{
	struct tl_drv_admin a;
	struct tl_drv_fence f;
	struct grant gr;
	char why[TL_WHY_MAX], ca[4096], mesh[33], leader[33], q[256];
	char *cert = pem_of("TALLY_TEST_CA_CLIENT_CERT");
	char *key = pem_of("TALLY_TEST_CA_CLIENT_KEY");
	MYSQL *ad = admin();
	MYSQL_RES *r;
	MYSQL_ROW row;
	void *h = NULL;
	int n0, i, killed = 0;

	cert_admin(&a, ca, sizeof(ca), cert, key);
	/* Once first: what the libraries open for good on first use. */
	ck_rc(drv->open(&a, &h, why), 0, why);
	drv->close(h);
	h = NULL;
	n0 = tl_test_fds();

	hex_id(mesh);
	hex_id(leader);
	f.mesh = mesh;
	f.epoch = 1;
	f.leader = leader;
	a.mesh = mesh;
	a.fence = &f;
	ck_rc(drv->open(&a, &h, why), 0, why);
	ck_no_key(why, key);
	ck_assert_msg(strstr(why, "with client certificate") != NULL &&
	    strstr(why, "CN=" CERT_USER) != NULL, "%s", why);
	ck_assert_int_eq(tl_test_fds_named("/memfd:admin-key"), 1);
	ck_assert_int_eq(tl_test_fds_named("/memfd:admin-cert"), 1);
	/* The session's socket and the two memfds. */
	ck_assert_int_eq(tl_test_fds(), n0 + 3);

	grant_init(&gr, "crt");
	gr.g.adopt_mesh = NULL;
	do_create(h, &gr);
	ck_no_key(why, key);
	/* Both admin sessions, the fence's too, are the cert user's. */
	ck_assert_int_eq(sql_long(ad, "SELECT COUNT(*) FROM "
	    "information_schema.PROCESSLIST WHERE USER = '" CERT_USER "'"), 2);
	ck_drift(h, &gr, TL_DRIFT_NONE);

	/* The server ends both sessions: the next call makes them again. */
	snprintf(q, sizeof(q), "SELECT ID FROM information_schema.PROCESSLIST "
	    "WHERE USER = '" CERT_USER "'");
	ck_assert_int_eq(mysql_query(ad, q), 0);
	r = mysql_store_result(ad);
	while ((row = mysql_fetch_row(r)) != NULL) {
		snprintf(q, sizeof(q), "KILL CONNECTION %s", row[0]);
		if (try_sql(ad, q) == 0)
			killed++;
	}
	mysql_free_result(r);
	ck_assert_int_ge(killed, 1);
	for (i = 0; i < 3; i++)
		if (drv->fix_privileges(h, &gr.g, why) == 0)
			break;
	ck_assert_msg(i < 3, "after the sessions ended: %s", why);
	ck_no_key(why, key);
	ck_drift(h, &gr, TL_DRIFT_NONE);

	ck_rc(drv->retire_credential(h, &gr.g, why), 0, why);
	ck_no_key(why, key);
	ck_assert_int_eq(sql_long(ad, "SELECT COUNT(*) FROM mysql.global_priv "
	    "WHERE User = '%s'", gr.log), 0);
	ck_rc(drv->revoke(h, &gr.g, 1, why), 0, why);
	ck_assert_int_eq(sql_long(ad, "SELECT COUNT(*) FROM "
	    "information_schema.SCHEMATA WHERE SCHEMA_NAME = '%s'", gr.res), 0);
	drv->close(h);
	ck_assert_int_eq(tl_test_fds_named("/memfd:admin-"), 0);
	ck_assert_int_eq(tl_test_fds(), n0);
	mysql_close(ad);
	free(cert);
	free(key);
}
END_TEST

/*
 * Who we are, refused (TL_EAUTH): the cert user without a certificate
 * (1045, and the reason says what such an account needs), an account
 * REQUIRE SUBJECT another subject with ours (the reason names ours), and
 * the cert user with another CA's certificate of the same subject (the
 * server's ssl-ca refuses it in the handshake: refused, not an
 * unreachable or untrusted server); no reason holds the key, no
 * descriptor is left.
 */
START_TEST(test_cert_refused)
{
	struct tl_drv_admin a;
	char why[TL_WHY_MAX], ca[4096];
	char *cert = pem_of("TALLY_TEST_CA_CLIENT_CERT");
	char *key = pem_of("TALLY_TEST_CA_CLIENT_KEY");
	char *ocert = pem_of("TALLY_TEST_CA_CLIENT_OTHER_CERT");
	char *okey = pem_of("TALLY_TEST_CA_CLIENT_OTHER_KEY");
	void *h = NULL;
	int n0;

	cert_admin(&a, ca, sizeof(ca), NULL, NULL);
	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	ck_assert_ptr_null(h);
	ck_assert_msg(strstr(why, "1045") != NULL &&
	    strstr(why, "admin-cert") != NULL, "%s", why);

	cert_admin(&a, ca, sizeof(ca), cert, key);
	a.user = CERT_WRONG;
	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	ck_no_key(why, key);
	ck_assert_msg(strstr(why, "1045") != NULL &&
	    strstr(why, "admin-cert presented") != NULL &&
	    strstr(why, "CN=" CERT_USER) != NULL, "%s", why);

	cert_admin(&a, ca, sizeof(ca), ocert, okey);
	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	n0 = tl_test_fds();
	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	ck_assert_ptr_null(h);
	ck_assert_int_eq(tl_test_fds(), n0);
	ck_no_key(why, okey);
	ck_assert_msg(strstr(why, "refused the client certificate in the "
	    "TLS handshake") != NULL && strstr(why, "admin-cert presented")
	    != NULL, "%s", why);
	free(cert);
	free(key);
	free(ocert);
	free(okey);
}
END_TEST

/*
 * A certificate that cannot be used is refused (TL_EINVAL) before any
 * connection: a key that is not the certificate's, an encrypted key,
 * one without the other, what is not PEM, and a certificate under tls
 * off.  The admin host is a port that listens and never accepts: not
 * one connection reaches its queue.
 */
START_TEST(test_cert_invalid)
{
	struct tl_drv_admin a;
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	struct pollfd pfd;
	char why[TL_WHY_MAX], ca[4096], port[16];
	char *cert = pem_of("TALLY_TEST_CA_CLIENT_CERT");
	char *key = pem_of("TALLY_TEST_CA_CLIENT_KEY");
	char *okey = pem_of("TALLY_TEST_CA_CLIENT_OTHER_KEY");
	char *enc = tl_test_key_encrypted(key);
	static const char *const off[] = { "tls", "off", NULL };
	struct {
		const char *cert, *key, *says;
	} bad[] = {
		{ cert, okey, "not the private key of admin-cert" },
		{ cert, enc, "not an unencrypted PEM private key" },
		{ cert, NULL, "admin-key is not" },
		{ NULL, key, "admin-cert is not" },
		{ "not a certificate", key, "no PEM certificate" },
		{ cert, "not a key", "not an unencrypted PEM" },
	};
	void *h = NULL;
	size_t i;
	int fd, n0;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(port, sizeof(port), "%d", ntohs(sa.sin_port));
	n0 = tl_test_fds();
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cert_admin(&a, ca, sizeof(ca), bad[i].cert, bad[i].key);
		a.host = "127.0.0.1";
		a.port = port;
		ck_rc(drv->open(&a, &h, why), TL_EINVAL, why);
		ck_assert_ptr_null(h);
		ck_assert_msg(strstr(why, bad[i].says) != NULL, "case %zu: %s",
		    i, why);
		ck_no_key(why, key);
		ck_no_key(why, okey);
		ck_no_key(why, enc);
	}
	cert_admin(&a, ca, sizeof(ca), cert, key);
	a.host = "127.0.0.1";
	a.port = port;
	a.settings = off;
	ck_rc(drv->open(&a, &h, why), TL_EINVAL, why);
	ck_assert_msg(strstr(why, "admin-cert needs tls verify or require") !=
	    NULL, "%s", why);
	ck_assert_int_eq(tl_test_fds(), n0);
	pfd.fd = fd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	ck_assert_msg(poll(&pfd, 1, 200) == 0, "a connection was made");
	close(fd);
	free(cert);
	free(key);
	free(okey);
	free(enc);
}
END_TEST

/* --- the suite ---------------------------------------------------------- */

static TCase *
tcase(Suite *s, const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_add_checked_fixture(tc, secrets_reset, NULL);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return tc;
}

static Suite *
suite(void)
{
	Suite *s = suite_create("drv_mariadb");
	TCase *tc;

	tc = tcase(s, "create");
	tcase_add_test(tc, test_create_use);
	tcase_add_test(tc, test_create_half_done);
	tcase_add_test(tc, test_create_sets_password);
	tcase_add_test(tc, test_refuses_foreign);
	tcase_add_test(tc, test_isolation);
	tcase_add_test(tc, test_underscore_is_not_a_wildcard);
	tcase_add_test(tc, test_hostile_names);
	tcase_add_test(tc, test_no_plaintext_in_server_log);
	tcase_add_test(tc, test_types_are_distinct);
	tcase_add_test(tc, test_compose);
	tcase_add_test(tc, test_compose_tls);

	tc = tcase(s, "check");
	tcase_add_test(tc, test_drift_privileges);
	tcase_add_test(tc, test_require_ssl);
	tcase_add_test(tc, test_drift_credential);
	tcase_add_test(tc, test_drift_missing);
	tcase_add_test(tc, test_check_bulk);

	tc = tcase(s, "drift");
	tcase_add_test(tc, test_drift_resource_limits);

	tc = tcase(s, "revoke");
	tcase_add_test(tc, test_rotation_beside);
	tcase_add_test(tc, test_revoke_retain_restore);
	tcase_add_test(tc, test_purge_drops_every_login);
	tcase_add_test(tc, test_fence);
	tcase_add_test(tc, test_two_meshes);
	tcase_add_test(tc, test_deposed);
	tcase_add_test(tc, test_deposed_kept_session);
	tcase_add_test(tc, test_open_errors);
	tcase_add_test(tc, test_admin_password);
	tcase_add_test(tc, test_reconnect);

	tc = tcase(s, "cert");
	tcase_add_unchecked_fixture(tc, cert_up, cert_down);
	tcase_add_test(tc, test_cert_admin);
	tcase_add_test(tc, test_cert_refused);
	tcase_add_test(tc, test_cert_invalid);

	tc = tcase(s, "migrate");
	tcase_add_test(tc, test_migrate_apply);
	tcase_add_test(tc, test_migrate_resume);
	tcase_add_test(tc, test_migrate_refused);
	tcase_add_test(tc, test_migrate_timeout);
	tcase_add_test(tc, test_migrate_cancel);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	s_parent = getpid();
	if ((drv = tl_drv_find("mariadb")) == NULL) {
		fprintf(stderr, "no mariadb driver registered\n");
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
