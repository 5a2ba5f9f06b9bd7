/*
 * check_drv_postgres.c - the PostgreSQL driver against a real server.
 *
 * The server: TALLY_TEST_PG_HOST, _PORT, _USER and _PWFILE when set (as
 * tests/harness/with-servers.sh exports them); otherwise this suite
 * starts its own with tests/harness/pg.sh under $TALLY_TMP, on
 * $TALLY_TEST_PG_PORT or a free port, once per run (an unchecked
 * fixture, so a server that cannot start fails every test case rather
 * than skipping it), and stops it before exiting.
 *
 * The test talks to the server with libpq directly for what happens out
 * of band (an operator's ALTER ROLE, a consumer's session); the driver
 * is reached only through its ops table.
 *
 * TL_PG_MEASURE_N (default 20) sets how many grants the measure case
 * creates, checks and drops; it prints the times per operation.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "lib/tl_fence.h"
#include "drivers/pg_scram.h"
#include "lib/tl_test.h"
#include "tests/lib/tl_pemtest.h"

/* --- the server (set up in the parent, read in the forked tests) ---- */

/* drivers/postgres.c marks what it makes with this role comment. */
#define MARK "made by tally for a grant; do not edit"

static char	 s_host[256], s_port[16], s_user[64], s_pw[256];
static char	*s_dir;			/* ours to stop; NULL if external */
/*
 * The admin's settings: PUBLIC's CONNECT on the maintenance databases
 * left as it is (test_revoke_drop connects there as a login).
 */
static const char *const s_settings[] = { "revoke-public-connect", "no",
	NULL };
static int	 s_tried, s_ok;
static char	 s_err[9000];
static pid_t	 s_parent;

/* Reads one "export NAME=VALUE" (VALUE maybe sh-single-quoted). */
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
		for (o = out; *v != '\0' && (size_t)(o - out) + 1 < n; v++) {
			if (*v == '\'') {	/* '...' with '\'' escapes */
				for (v++; *v != '\0' && *v != '\'' &&
				    (size_t)(o - out) + 1 < n; v++)
					*o++ = *v;
				if (*v == '\0')
					break;
			} else if (*v == '\\' && v[1] != '\0')
				*o++ = *++v;
			else
				*o++ = *v;
		}
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
	const char *h = getenv("TALLY_TEST_PG_HOST");
	const char *p = getenv("TALLY_TEST_PG_PORT");
	const char *u = getenv("TALLY_TEST_PG_USER");
	const char *pwf = getenv("TALLY_TEST_PG_PWFILE");
	char envf[4096], pwfile[4096], port[16];
	int pn;

	if (h != NULL && *h != '\0' && p != NULL && *p != '\0' &&
	    pwf != NULL && *pwf != '\0') {
		snprintf(s_host, sizeof(s_host), "%s", h);
		snprintf(s_port, sizeof(s_port), "%s", p);
		snprintf(s_user, sizeof(s_user), "%s",
		    u != NULL && *u != '\0' ? u : "postgres");
		if (tl_test_read_line(pwf, s_pw, sizeof(s_pw)) != 0) {
			snprintf(s_err, sizeof(s_err), "cannot read "
			    "TALLY_TEST_PG_PWFILE=%s", pwf);
			return -1;
		}
		fprintf(stderr, "check_drv_postgres: using the server at "
		    "%s:%s\n", s_host, s_port);
		return 0;
	}
	pn = p != NULL && *p != '\0' ? atoi(p) : tl_test_free_port();
	if (pn <= 0) {
		snprintf(s_err, sizeof(s_err), "no port for PostgreSQL");
		return -1;
	}
	snprintf(port, sizeof(port), "%d", pn);
	s_dir = tl_test_tmpdir("pgdrv");
	if (tl_test_harness_run("pg.sh", "start", s_dir, port) != 0) {
		snprintf(s_err, sizeof(s_err), "%s start %s %s failed (see "
		    "its messages above)", tl_test_harness("pg.sh"), s_dir,
		    port);
		return -1;
	}
	snprintf(envf, sizeof(envf), "%s/env", s_dir);
	if (env_get(envf, "TALLY_TEST_PG_HOST", s_host, sizeof(s_host)) ||
	    env_get(envf, "TALLY_TEST_PG_PORT", s_port, sizeof(s_port)) ||
	    env_get(envf, "TALLY_TEST_PG_USER", s_user, sizeof(s_user)) ||
	    env_get(envf, "TALLY_TEST_PG_PWFILE", pwfile, sizeof(pwfile)) ||
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
	if (tl_test_harness_run("pg.sh", "stop", s_dir, NULL) != 0)
		fprintf(stderr, "check_drv_postgres: pg.sh stop %s failed\n",
		    s_dir);
	free(s_dir);
	s_dir = NULL;
}

/* Unchecked fixture: the first one starts the server for the run. */
static void
server_up(void)
{
	if (!s_tried) {
		s_tried = 1;
		s_ok = server_start() == 0;
	}
	if (!s_ok)
		ck_abort_msg("no PostgreSQL to test against: %s", s_err);
}

/* --- helpers -------------------------------------------------------- */

static const struct tl_drv_ops *drv;

#define ck_rc(rc, want, why) do {					\
	int rc_ = (rc), want_ = (want);					\
	ck_assert_msg(rc_ == want_, "%s:%d: rc %d (%s), wanted %d (%s); "\
	    "why: %s", __FILE__, __LINE__, rc_, tl_strerror(rc_), want_,	\
	    tl_strerror(want_), (why));					\
} while (0)

/* A grant with fresh names (tagged, unique per process) and password. */
struct grant {
	char	res[64], own[64], log[64], pw[TL_PASSWORD_MAX + 1];
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
	snprintf(gr->own, sizeof(gr->own), "own_%s_%d_%d", tag, (int)getpid(),
	    n);
	snprintf(gr->log, sizeof(gr->log), "log_%s_%d_%d", tag, (int)getpid(),
	    n);
	tl_secret_password(gr->pw);
	gr->g.resource = gr->res;
	gr->g.owner = gr->own;
	gr->g.login = gr->log;
	gr->g.password = gr->pw;
	gr->g.grant = NULL;
	gr->g.adopt_unnamed = 0;
	gr->g.adopt_mesh = NULL;
}

/* Every reason must be free of every password the test used. */
static const char *secrets[1024];

static void
ck_why(const char *why)
{
	size_t i;

	ck_assert_ptr_nonnull(why);
	for (i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
		if (secrets[i] != NULL && *secrets[i] != '\0')
			ck_assert_msg(strstr(why, secrets[i]) == NULL,
			    "a password leaked into why: %s", why);
}

/* Checked fixture: a test's passwords live on its own stack. */
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

static void *
drv_open(void)
{
	struct tl_drv_admin a = { s_host, s_port, s_user, s_pw, s_settings };
	char why[TL_WHY_MAX];
	void *h = NULL;
	int rc;

	secret_add(s_pw);
	rc = drv->open(&a, &h, why);
	ck_why(why);
	ck_rc(rc, 0, why);
	ck_assert_ptr_nonnull(h);
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

/* Runs check and returns the drift; rc must be 0; why into out. */
static enum tl_drv_drift
do_check(void *h, struct grant *gr, char *out)
{
	struct tl_drv_endpoint ep = { s_host, s_port };
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

#define ck_drift(h, gr, want) do {					\
	char w_[TL_WHY_MAX];					\
	enum tl_drv_drift d_ = do_check((h), (gr), w_);			\
	ck_assert_msg(d_ == (want), "%s:%d: drift %d, wanted %d: %s",	\
	    __FILE__, __LINE__, (int)d_, (int)(want), w_);		\
} while (0)

/* Connects with libpq; NULL with the message in err on failure. */
static PGconn *
pq_connect(const char *user, const char *pw, const char *db, char *err,
    size_t errn)
{
	const char *kw[] = { "host", "port", "user", "password", "dbname",
	    "connect_timeout", "application_name", NULL };
	const char *val[] = { s_host, s_port, user, pw, db, "5",
	    "check_drv_postgres", NULL };
	PGconn *c = PQconnectdbParams(kw, val, 0);

	if (c != NULL && PQstatus(c) == CONNECTION_OK)
		return c;
	snprintf(err, errn, "%s", c != NULL ? PQerrorMessage(c) : "no memory");
	PQfinish(c);
	return NULL;
}

static PGconn *
admin(const char *db)
{
	char err[512];
	PGconn *c = pq_connect(s_user, s_pw, db != NULL ? db : "postgres",
	    err, sizeof(err));

	ck_assert_msg(c != NULL, "admin connection: %s", err);
	return c;
}

/* Runs sql (printf format); fails the test unless it succeeds. */
static void
sql(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
sql(PGconn *c, const char *fmt, ...)
{
	char q[2048];
	va_list ap;
	PGresult *r;
	ExecStatusType s;

	va_start(ap, fmt);
	vsnprintf(q, sizeof(q), fmt, ap);
	va_end(ap);
	r = PQexec(c, q);
	s = PQresultStatus(r);
	ck_assert_msg(s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK,
	    "%s: %s", q, PQresultErrorMessage(r));
	PQclear(r);
}

/* The single value of a one-parameter query, as a long (-1: no row). */
static long
sql_long(PGconn *c, const char *q, const char *param)
{
	const char *vals[1] = { param };
	PGresult *r;
	long v = -1;

	r = PQexecParams(c, q, param != NULL ? 1 : 0, NULL, vals, NULL, NULL,
	    0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", q,
	    PQresultErrorMessage(r));
	if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) {
		const char *s = PQgetvalue(r, 0, 0);

		v = strcmp(s, "t") == 0 ? 1 : strcmp(s, "f") == 0 ? 0 :
		    atol(s);
	}
	PQclear(r);
	return v;
}

static char *
qid(PGconn *c, const char *name)
{
	char *q = PQescapeIdentifier(c, name, strlen(name));

	ck_assert_ptr_nonnull(q);
	return q;
}

static long
role_count(PGconn *c, const char *name)
{
	return sql_long(c, "SELECT count(*) FROM pg_roles WHERE rolname = $1",
	    name);
}

static long
db_count(PGconn *c, const char *name)
{
	return sql_long(c, "SELECT count(*) FROM pg_database"
	    " WHERE datname = $1", name);
}

/* Whether user/pw can open db; err gets the message when not. */
static int
can_login(const char *user, const char *pw, const char *db, char *err,
    size_t n)
{
	PGconn *c = pq_connect(user, pw, db, err, n);

	if (c == NULL)
		return 0;
	PQfinish(c);
	return 1;
}

/* tmpl with {d}, {l}, {o} replaced by d, l, o. */
static const char *
subst(char *out, size_t n, const char *tmpl, const char *d, const char *l,
    const char *o)
{
	size_t k = 0;
	const char *p, *v;

	for (p = tmpl; *p != '\0'; p++) {
		v = NULL;
		if (p[0] == '{' && p[1] != '\0' && p[2] == '}')
			v = p[1] == 'd' ? d : p[1] == 'l' ? l : p[1] == 'o' ?
			    o : NULL;
		if (v != NULL) {
			ck_assert_uint_lt(k + strlen(v), n);
			memcpy(out + k, v, strlen(v));
			k += strlen(v);
			p += 2;
		} else {
			ck_assert_uint_lt(k + 1, n);
			out[k++] = *p;
		}
	}
	out[k] = '\0';
	return out;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* --- migrations ------------------------------------------------------ */

/*
 * Runs sql through ops->migrate as gr's consumer, as file (a name of
 * its own per call when NULL: the database records each file applied);
 * its rc.  *already (if not NULL) says the database had it.
 */
static int
migrate_file(struct grant *gr, const char *file, const char *sql,
    unsigned timeout_s, atomic_int *cancel, int *already, char *why,
    int *line)
{
	static unsigned seq;
	struct tl_drv_endpoint ep = { s_host, s_port };
	char name[64], sum[65];
	unsigned char h[32];
	struct tl_drv_migration m;
	int ignored;

	if (file == NULL) {
		snprintf(name, sizeof(name), "%03u_test.sql", ++seq);
		file = name;
	}
	crypto_generichash(h, sizeof(h), (const unsigned char *)sql,
	    strlen(sql), NULL, 0);
	sodium_bin2hex(sum, sizeof(sum), h, sizeof(h));
	m.file = file;
	m.checksum = sum;
	m.sql = sql;
	m.len = strlen(sql);
	m.timeout_s = timeout_s;
	m.cancel = cancel;
	return drv->migrate(&ep, &gr->g, &m, already ? already : &ignored,
	    why, line);
}

static int
migrate(struct grant *gr, const char *sql, char *why, int *line)
{
	return migrate_file(gr, NULL, sql, 0, NULL, NULL, why, line);
}

static long
has_table(PGconn *a, const char *name)
{
	return sql_long(a, "SELECT count(*) FROM pg_tables WHERE tablename "
	    "= $1", name);
}

/*
 * A file runs in one transaction of tally's: one that would end it half
 * way is refused before it runs, naming the line; savepoints, quoted and
 * commented words, and the BEGIN ATOMIC ... END body of a routine are
 * not transaction control, and the line of a failure counts statements
 * as the server does.
 */
START_TEST(test_migrate_transactions)
{
	static const struct {
		const char	*sql;
		const char	*word;
		int		 line;
	} refused[] = {
		{ "CREATE TABLE m_a (x int);\nCOMMIT;\nCREATE TABLE m_b (x int);",
		  "COMMIT", 2 },
		{ "BEGIN;\nCREATE TABLE m_a (x int);\nCOMMIT;", "BEGIN", 1 },
		{ "CREATE TABLE m_a (x int);\n\n  end ;", "END", 3 },
		{ "CREATE TABLE m_a (x int);\nStart Transaction;", "START", 2 },
		{ "CREATE TABLE m_a (x int); ROLLBACK;", "ROLLBACK", 1 },
		{ "CREATE TABLE m_a (x int);\n/* one */ abort;", "ABORT", 2 },
		{ "PREPARE TRANSACTION 'x';", "PREPARE", 1 },
	};
	struct grant gr;
	char why[TL_WHY_MAX];
	int line;
	size_t i;
	PGconn *a;
	void *h = drv_open();

	ck_assert_ptr_nonnull(drv->migrate);
	grant_init(&gr, "mig");
	do_create(h, &gr);
	a = admin(gr.res);
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		line = -1;
		ck_assert_int_eq(migrate(&gr, refused[i].sql, why, &line),
		    TL_EDRIVER);
		ck_assert_msg(strncmp(why, refused[i].word,
		    strlen(refused[i].word)) == 0 &&
		    strstr(why, "inside a migration") != NULL,
		    "case %zu: %s", i, why);
		ck_assert_int_eq(line, refused[i].line);
		ck_assert_int_eq(has_table(a, "m_a"), 0);
	}
	/* Savepoints stay inside the transaction. */
	ck_assert_int_eq(migrate(&gr, "SAVEPOINT s;\nCREATE TABLE m_b (x int);\n"
	    "ROLLBACK TO SAVEPOINT s;\nrollback work to s;\n"
	    "RELEASE SAVEPOINT s;\nCREATE TABLE m_c (x int);", why, &line), 0);
	ck_assert_int_eq(has_table(a, "m_b"), 0);
	ck_assert_int_eq(has_table(a, "m_c"), 1);
	/* The words in strings, comments and dollar quotes are text. */
	ck_assert_int_eq(migrate(&gr, "-- COMMIT; then END;\n"
	    "CREATE TABLE m_d (x text DEFAULT 'commit; end;');\n"
	    "/* ROLLBACK; */ CREATE FUNCTION m_f() RETURNS int LANGUAGE "
	    "plpgsql AS $$ BEGIN RETURN 1; END; $$;\n"
	    "DO 'BEGIN PERFORM 1; END';", why, &line), 0);
	ck_assert_int_eq(has_table(a, "m_d"), 1);
	/*
	 * A SQL-standard body holds semicolons and an END: one statement.
	 * The file then fails on line 7 (m_c exists; no server position),
	 * and nothing of it stays.
	 */
	line = 0;
	ck_assert_int_eq(migrate(&gr, "CREATE FUNCTION m_g(x int) RETURNS int\n"
	    "LANGUAGE sql\nBEGIN ATOMIC\n  SELECT 1;\n"
	    "  SELECT CASE WHEN x > 0 THEN 2 ELSE 3 END;\nEND;\n"
	    "CREATE TABLE m_c (x int);", why, &line), TL_EDRIVER);
	ck_assert_msg(strstr(why, "42P07") != NULL, "%s", why);
	ck_assert_int_eq(line, 7);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM pg_proc WHERE "
	    "proname = 'm_g'", NULL), 0);
	PQfinish(a);
	drv->close(h);
}
END_TEST

/*
 * Exactly once: the database records each file in the transaction that
 * runs it (tally.schema_history, outside the consumer's search_path);
 * the same file again is found there and not run; the same name with
 * other content is refused with both checksums; a file that fails
 * leaves no record.
 */
START_TEST(test_migrate_history)
{
	struct grant gr;
	char why[TL_WHY_MAX];
	int line, already;
	PGconn *a;
	void *h = drv_open();
	const char *ins = "CREATE TABLE IF NOT EXISTS h_rows (x int);\n"
	    "INSERT INTO h_rows VALUES (1);";

	grant_init(&gr, "mighist");
	do_create(h, &gr);
	a = admin(gr.res);
	ck_assert_int_eq(migrate_file(&gr, "001_rows.sql", ins, 0, NULL,
	    &already, why, &line), 0);
	ck_assert_int_eq(already, 0);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM h_rows", NULL), 1);
	/* Again (a crash came before the log recorded it): not run. */
	ck_assert_int_eq(migrate_file(&gr, "001_rows.sql", ins, 0, NULL,
	    &already, why, &line), 0);
	ck_assert_int_eq(already, 1);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM h_rows", NULL), 1);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM "
	    "tally.schema_history WHERE file = $1", "001_rows.sql"), 1);
	/* Not in the consumer's way: not in public, owned by the owner. */
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM pg_tables WHERE "
	    "schemaname = 'public' AND tablename = 'schema_history'", NULL), 0);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM pg_tables WHERE "
	    "schemaname = 'tally' AND tableowner = $1", gr.g.owner), 1);
	/* The same name, edited: refused, nothing run. */
	ck_assert_int_eq(migrate_file(&gr, "001_rows.sql", "INSERT INTO "
	    "h_rows VALUES (2);", 0, NULL, &already, why, &line), TL_EDRIVER);
	ck_assert_msg(strstr(why, "001_rows.sql") != NULL &&
	    strstr(why, "checksum") != NULL, "%s", why);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM h_rows", NULL), 1);
	/* A failing file: no record, so it runs when fixed. */
	ck_assert_int_eq(migrate_file(&gr, "002_bad.sql", "INSERT INTO "
	    "h_rows VALUES (3);\nSELECT 1/0;", 0, NULL, &already, why, &line),
	    TL_EDRIVER);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM "
	    "tally.schema_history WHERE file = $1", "002_bad.sql"), 0);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM h_rows", NULL), 1);
	PQfinish(a);
	drv->close(h);
}
END_TEST

/*
 * A file may not lift its time limit or leave the consumer's session:
 * refused before it runs, naming the line; the limit itself is the
 * server's (statement_timeout), and a cancel stops a running file at
 * once.
 */
START_TEST(test_migrate_escapes)
{
	static const struct {
		const char	*sql;
		int		 line;
	} refused[] = {
		{ "CREATE TABLE e_a (x int);\nSET statement_timeout = 0;", 2 },
		{ "SET SESSION statement_timeout TO 0;", 1 },
		{ "CREATE TABLE e_a (x int);\n\nset local statement_timeout "
		  "= '1h';", 3 },
		{ "RESET statement_timeout;", 1 },
		{ "CREATE TABLE e_a (x int);\nRESET ALL;", 2 },
		{ "SET ROLE postgres;", 1 },
		{ "RESET ROLE;", 1 },
		{ "SET SESSION AUTHORIZATION postgres;", 1 },
		{ "SET session_authorization = 'postgres';", 1 },
		{ "DISCARD ALL;", 1 },
		{ "CREATE TABLE e_a (x int);\nSELECT set_config(\n"
		  "  'statement_timeout', '0', false);", 3 },
		{ "SELECT set_config('role', 'postgres', false);", 1 },
		{ "CREATE FUNCTION e_f() RETURNS int LANGUAGE sql\n"
		  "  SET statement_timeout = 0 AS 'SELECT 1';", 2 },
		{ "SET idle_in_transaction_session_timeout = 0;", 1 },
	};
	struct grant gr;
	char why[TL_WHY_MAX];
	int line;
	size_t i;
	PGconn *a;
	void *h = drv_open();
	double t0;
	atomic_int cancel;

	grant_init(&gr, "migesc");
	do_create(h, &gr);
	a = admin(gr.res);
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		line = -1;
		ck_assert_int_eq(migrate(&gr, refused[i].sql, why, &line),
		    TL_EDRIVER);
		ck_assert_msg(strstr(why, "inside a migration") != NULL &&
		    strstr(why, "time limit") != NULL, "case %zu: %s", i, why);
		ck_assert_msg(line == refused[i].line, "case %zu: line %d, "
		    "want %d: %s", i, line, refused[i].line, why);
		ck_assert_int_eq(has_table(a, "e_a"), 0);
	}
	/* Other settings are the file's business. */
	ck_assert_int_eq(migrate(&gr, "SET search_path = public;\n"
	    "SET LOCAL work_mem = '8MB';\nCREATE TABLE e_b (x int);", why,
	    &line), 0);
	ck_assert_int_eq(has_table(a, "e_b"), 1);
	/* The limit: the server cancels the statement. */
	t0 = now_s();
	ck_assert_int_eq(migrate_file(&gr, NULL, "CREATE TABLE e_c (x int);\n"
	    "SELECT pg_sleep(30);", 1, NULL, NULL, why, &line), TL_EDRIVER);
	ck_assert_msg(now_s() - t0 < 5, "took %.1f s", now_s() - t0);
	ck_assert_msg(strstr(why, "57014") != NULL && strstr(why, "1 s") !=
	    NULL, "%s", why);
	ck_assert_int_eq(line, 2);
	ck_assert_int_eq(has_table(a, "e_c"), 0);
	/* A cancel (tallyd stopping): stops at once, nothing kept. */
	atomic_init(&cancel, 1);
	t0 = now_s();
	ck_assert_int_eq(migrate_file(&gr, NULL, "CREATE TABLE e_d (x int);\n"
	    "SELECT pg_sleep(30);", 0, &cancel, NULL, why, &line), TL_EDRIVER);
	ck_assert_msg(now_s() - t0 < 3, "took %.1f s", now_s() - t0);
	ck_assert_int_eq(has_table(a, "e_d"), 0);
	/* Its backend is gone (it exits a moment after the session). */
	t0 = now_s();
	while (sql_long(a, "SELECT count(*) FROM pg_stat_activity WHERE "
	    "application_name = 'tally-migrate'", NULL) != 0) {
		ck_assert_msg(now_s() - t0 < 2, "a migration's backend is "
		    "still there 2 s after the session ended");
		usleep(10000);
	}
	PQfinish(a);
	drv->close(h);
}
END_TEST

/* --- create --------------------------------------------------------- */

START_TEST(test_create_use)
{
	struct grant gr;
	char err[512], *t;
	PGconn *c, *a;
	void *h = drv_open();

	grant_init(&gr, "use");
	do_create(h, &gr);

	/* The consumer logs in and makes a table... */
	c = pq_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "consumer login: %s", err);
	sql(c, "CREATE TABLE t (x int)");
	sql(c, "INSERT INTO t VALUES (1), (2)");
	sql(c, "CREATE TEMP TABLE tt (x int)");
	/* ...as the owner role (SET role = owner at session start). */
	a = admin(gr.res);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM pg_tables"
	    " WHERE tablename = 't' AND tableowner = $1", gr.own), 1);
	ck_assert_int_eq(sql_long(c, "SELECT current_user = $1", gr.own), 1);
	ck_assert_int_eq(sql_long(c, "SELECT session_user = $1", gr.log), 1);
	/* schema public is the owner's; PUBLIC has nothing on it. */
	ck_assert_int_eq(sql_long(a, "SELECT pg_get_userbyid(nspowner) = $1"
	    " FROM pg_namespace WHERE nspname = 'public'", gr.own), 1);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM pg_namespace,"
	    " aclexplode(nspacl) x WHERE nspname = 'public'"
	    " AND x.grantee = 0", NULL), 0);
	/* The database is the owner's. */
	t = qid(a, gr.res);
	ck_assert_int_eq(sql_long(a, "SELECT pg_get_userbyid(datdba) = $1"
	    " FROM pg_database WHERE datname = current_database()", gr.own), 1);
	PQfreemem(t);
	PQfinish(a);
	PQfinish(c);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

/*
 * The fence: a compare-and-set per mesh (tests/lib/tl_fence.h), in
 * tally_fences; the old mesh-less tally_fence is not what is raised.
 */
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
 * A create that meets the CREATE DATABASE of a session it does not know
 * of, at the same moment: a killed tallyd's backend still making the
 * grant's database (with its owner) while the restarted tallyd's create
 * retries (38_consolidate_kills in CI: 23505 on pg_database's name
 * index, and the move stopped for good).  The create succeeds, one
 * database, ours.
 */
struct racer {
	struct grant	*gr;
	int		 rc;
};

static void *
race_raw(void *arg)
{
	struct racer *r = arg;
	PGconn *c = admin(NULL);
	char q[512];
	PGresult *res;

	snprintf(q, sizeof(q), "CREATE DATABASE \"%s\" OWNER \"%s\" "
	    "TEMPLATE template0", r->gr->res, r->gr->own);
	res = PQexec(c, q);
	r->rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : 1;
	PQclear(res);
	PQfinish(c);
	return NULL;
}

START_TEST(test_create_racing)
{
	struct grant gr;
	struct racer r;
	pthread_t th;
	char tag[32], why[TL_WHY_MAX];
	PGconn *a;
	void *h = drv_open();
	int round, rc;

	for (round = 0; round < 8; round++) {
		snprintf(tag, sizeof(tag), "race%d", round);
		grant_init(&gr, tag);
		do_create(h, &gr);
		/* The roles stay; the database goes, as before a move. */
		a = admin(NULL);
		sql(a, "DROP DATABASE \"%s\"", gr.res);
		PQfinish(a);
		r.gr = &gr;
		r.rc = -1;
		ck_assert_int_eq(pthread_create(&th, NULL, race_raw, &r), 0);
		why[0] = '\0';
		rc = drv->create(h, &gr.g, why);
		pthread_join(th, NULL);
		ck_rc(rc, 0, why);
		a = admin(NULL);
		ck_assert_int_eq(db_count(a, gr.res), 1);
		PQfinish(a);
	}
	drv->close(h);
}
END_TEST

START_TEST(test_create_twice)
{
	struct grant gr;
	char err[512];
	PGconn *a;
	void *h = drv_open();

	grant_init(&gr, "twice");
	do_create(h, &gr);
	do_create(h, &gr);
	do_create(h, &gr);
	a = admin(NULL);
	ck_assert_int_eq(db_count(a, gr.res), 1);
	ck_assert_int_eq(role_count(a, gr.own), 1);
	ck_assert_int_eq(role_count(a, gr.log), 1);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM pg_auth_members m"
	    " JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = $1",
	    gr.log), 1);
	PQfinish(a);
	ck_assert_msg(can_login(gr.log, gr.pw, gr.res, err, sizeof(err)),
	    "%s", err);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

START_TEST(test_create_half_done)
{
	struct grant g1, g2;
	char err[512], *o, *l;
	PGconn *a;
	void *h = drv_open();

	/*
	 * Owner made by hand as create makes it, mark included (as if
	 * create died right after it).
	 */
	grant_init(&g1, "half");
	a = admin(NULL);
	o = qid(a, g1.own);
	sql(a, "CREATE ROLE %s NOLOGIN; COMMENT ON ROLE %s IS '%s'", o, o,
	    MARK);
	PQfreemem(o);
	do_create(h, &g1);
	ck_assert_int_eq(db_count(a, g1.res), 1);
	ck_assert_msg(can_login(g1.log, g1.pw, g1.res, err, sizeof(err)),
	    "%s", err);
	ck_drift(h, &g1, TL_DRIFT_NONE);

	/* Both roles made, with another password, no database. */
	grant_init(&g2, "half");
	o = qid(a, g2.own);
	l = qid(a, g2.log);
	sql(a, "CREATE ROLE %s NOLOGIN; COMMENT ON ROLE %s IS '%s'", o, o,
	    MARK);
	sql(a, "CREATE ROLE %s LOGIN PASSWORD 'something else'; "
	    "COMMENT ON ROLE %s IS '%s'", l, l, MARK);
	PQfreemem(o);
	PQfreemem(l);
	do_create(h, &g2);
	ck_assert_int_eq(db_count(a, g2.res), 1);
	ck_assert_msg(can_login(g2.log, g2.pw, g2.res, err, sizeof(err)),
	    "%s", err);
	ck_drift(h, &g2, TL_DRIFT_NONE);
	PQfinish(a);
	drv->close(h);
}
END_TEST

/* What tally did not make it never takes over: roles, databases. */
START_TEST(test_create_refuses_foreign)
{
	struct grant g1, g2;
	char why[TL_WHY_MAX], *o, *d;
	PGconn *a;
	void *h = drv_open();
	int rc;

	grant_init(&g1, "foreign");
	a = admin(NULL);
	o = qid(a, g1.own);
	sql(a, "CREATE ROLE %s NOLOGIN", o);	/* someone else's */
	PQfreemem(o);
	secret_add(g1.pw);
	rc = drv->create(h, &g1.g, why);
	ck_why(why);
	ck_rc(rc, TL_EDRIVER, why);
	ck_assert_ptr_nonnull(strstr(why, "not made by tally"));
	ck_assert_int_eq(db_count(a, g1.res), 0);

	/* A database of the same name, owned by another role. */
	grant_init(&g2, "foreign");
	d = qid(a, g2.res);
	sql(a, "CREATE DATABASE %s", d);
	PQfreemem(d);
	secret_add(g2.pw);
	rc = drv->create(h, &g2.g, why);
	ck_why(why);
	ck_rc(rc, TL_EDRIVER, why);
	ck_assert_ptr_nonnull(strstr(why, "belongs to someone else"));
	PQfinish(a);
	drv->close(h);
}
END_TEST

/*
 * Whatever the names, what tally made for one grant it never hands to
 * another: a second grant given the same database, owner and login is
 * refused, cannot reset the first's password or privileges, and its
 * revocation leaves the first's objects.  An object with the mark of a
 * tally before marks named grants is only for a grant made then.
 */
START_TEST(test_create_refuses_other_grant)
{
	struct grant g1, g2, g3;
	char why[TL_WHY_MAX], err[512], *o;
	PGconn *a;
	void *h = drv_open();
	int rc;

	grant_init(&g1, "mine");
	g1.g.grant = "one/db";
	do_create(h, &g1);
	a = admin(NULL);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM pg_roles WHERE"
	    " rolname = $1 AND shobj_description(oid, 'pg_authid') ="
	    " 'made by tally for grant one/db; do not edit'", g1.own), 1);

	g2 = g1;
	g2.g.grant = "two/db";
	tl_secret_password(g2.pw);
	g2.g.password = g2.pw;
	secret_add(g2.pw);
	rc = drv->create(h, &g2.g, why);
	ck_why(why);
	ck_rc(rc, TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "made by tally for grant one/db") != NULL,
	    "%s", why);
	rc = drv->set_password(h, &g2.g, why);
	ck_rc(rc, TL_EDRIVER, why);
	rc = drv->fix_privileges(h, &g2.g, why);
	ck_rc(rc, TL_EDRIVER, why);
	/* Even adopting unnamed marks, a named one is another grant's. */
	g2.g.adopt_unnamed = 1;
	rc = drv->create(h, &g2.g, why);
	ck_rc(rc, TL_EDRIVER, why);
	ck_assert_int_eq(drv->revoke(h, &g2.g, 1, why), 0);
	ck_assert_int_eq(db_count(a, g1.res), 1);
	ck_assert_msg(can_login(g1.log, g1.pw, g1.res, err, sizeof(err)),
	    "the first grant's login after the second's attempts: %s", err);
	ck_drift(h, &g1, TL_DRIFT_NONE);

	/* An unnamed mark: refused for a grant of today, adopted (and
	 * marked with its id) for a grant made before marks named grants. */
	grant_init(&g3, "unnamed");
	o = qid(a, g3.own);
	sql(a, "CREATE ROLE %s NOLOGIN; COMMENT ON ROLE %s IS '%s'", o, o,
	    MARK);
	PQfreemem(o);
	g3.g.grant = "three/db";
	secret_add(g3.pw);
	rc = drv->create(h, &g3.g, why);
	ck_why(why);
	ck_rc(rc, TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "earlier tally") != NULL, "%s", why);
	ck_assert_int_eq(db_count(a, g3.res), 0);
	g3.g.adopt_unnamed = 1;
	do_create(h, &g3);
	ck_assert_int_eq(sql_long(a, "SELECT count(*) FROM pg_roles WHERE"
	    " rolname = $1 AND shobj_description(oid, 'pg_authid') ="
	    " 'made by tally for grant three/db; do not edit'", g3.own), 1);
	PQfinish(a);
	drv->close(h);
}
END_TEST

/*
 * Two grants of before marks named grants that were given the same
 * names (both adopt the unnamed mark): the first to set its password
 * marks the roles with its id, and the other can no longer reset it.
 */
START_TEST(test_claim_unnamed)
{
	struct grant g1, g2;
	char why[TL_WHY_MAX], err[512];
	void *h = drv_open();
	int rc;

	grant_init(&g1, "claim");
	do_create(h, &g1);		/* unnamed: the mark of before */
	g2 = g1;
	tl_secret_password(g2.pw);
	g2.g.password = g2.pw;
	secret_add(g2.pw);
	g1.g.grant = "one/db@node-a";
	g1.g.adopt_unnamed = 1;
	g2.g.grant = "one-node-a/db";
	g2.g.adopt_unnamed = 1;
	ck_rc(drv->set_password(h, &g1.g, why), 0, why);
	rc = drv->set_password(h, &g2.g, why);
	ck_why(why);
	ck_rc(rc, TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "for grant one/db@node-a") != NULL, "%s",
	    why);
	ck_assert_msg(can_login(g1.log, g1.pw, g1.res, err, sizeof(err)),
	    "%s", err);
	ck_drift(h, &g1, TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

START_TEST(test_isolation)
{
	struct grant a, b;
	char err[512], out[64], *o;
	PGconn *c;
	void *h = drv_open();

	grant_init(&a, "isoa");
	grant_init(&b, "isob");
	do_create(h, &a);
	do_create(h, &b);
	/* A's credential opens A's database, not B's. */
	ck_assert(can_login(a.log, a.pw, a.res, err, sizeof(err)));
	ck_assert(!can_login(a.log, a.pw, b.res, err, sizeof(err)));
	ck_assert_msg(strstr(err, "permission denied") != NULL, "%s", err);
	ck_assert(!can_login(b.log, b.pw, a.res, err, sizeof(err)));

	/* A role that is no one's (only PUBLIC's privileges) cannot either. */
	c = admin(NULL);
	snprintf(out, sizeof(out), "outsider_%d", (int)getpid());
	o = qid(c, out);
	sql(c, "CREATE ROLE %s LOGIN PASSWORD 'outsider-pw'", o);
	ck_assert(!can_login(out, "outsider-pw", a.res, err, sizeof(err)));
	ck_assert_msg(strstr(err, "permission denied") != NULL, "%s", err);
	ck_assert(can_login(out, "outsider-pw", "postgres", err, sizeof(err)));
	sql(c, "DROP ROLE %s", o);
	PQfreemem(o);

	/* PUBLIC holds nothing on either database. */
	ck_assert_int_eq(sql_long(c, "SELECT count(*) FROM pg_database d,"
	    " aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) x"
	    " WHERE d.datname = $1 AND x.grantee = 0", a.res), 0);
	ck_assert_int_eq(sql_long(c, "SELECT count(*) FROM pg_database d,"
	    " aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) x"
	    " WHERE d.datname = $1 AND x.grantee = 0", b.res), 0);
	/* Nor is B's login a member of anything of A's. */
	ck_assert_int_eq(sql_long(c, "SELECT count(*) FROM pg_auth_members m"
	    " JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = $1",
	    b.log), 1);
	PQfinish(c);
	drv->close(h);
}
END_TEST

START_TEST(test_role_attributes)
{
	struct grant gr;
	PGconn *a;
	void *h = drv_open();
	const char *q = "SELECT (rolsuper OR rolcreatedb OR rolcreaterole OR"
	    " rolreplication OR rolbypassrls)::int FROM pg_roles"
	    " WHERE rolname = $1";

	grant_init(&gr, "attrs");
	do_create(h, &gr);
	a = admin(NULL);
	ck_assert_int_eq(sql_long(a, q, gr.own), 0);
	ck_assert_int_eq(sql_long(a, q, gr.log), 0);
	ck_assert_int_eq(sql_long(a, "SELECT rolcanlogin FROM pg_roles"
	    " WHERE rolname = $1", gr.own), 0);
	ck_assert_int_eq(sql_long(a, "SELECT rolcanlogin FROM pg_roles"
	    " WHERE rolname = $1", gr.log), 1);
	/* The stored password is a SCRAM verifier. */
	ck_assert_int_eq(sql_long(a, "SELECT rolpassword LIKE"
	    " 'SCRAM-SHA-256$%' FROM pg_authid WHERE rolname = $1", gr.log), 1);
	PQfinish(a);
	drv->close(h);
}
END_TEST

START_TEST(test_injection)
{
	static const char *const res[] = {
	    "x\"; DROP ROLE postgres; --", "a'b", "a\\'; DROP DATABASE "
	    "postgres; --", "Mixed Case \"quoted\" db", "ünïcødé-ďb",
	    "d12345678901234567890123456789012345678901234567890123456789012" };
	static const char *const own[] = {
	    "o\"; DROP ROLE postgres; --", "o'b", "o\\' OR 1=1 --",
	    "Owner \"Q\"", "öwnér",
	    "o12345678901234567890123456789012345678901234567890123456789012" };
	static const char *const log[] = {
	    "l\"; ALTER ROLE postgres NOLOGIN; --", "l'b", "l\\'\"\\",
	    "Login \"Q\"", "łógïn",
	    "l12345678901234567890123456789012345678901234567890123456789012" };
	char err[512], why[TL_WHY_MAX];
	struct tl_drv_grant g;
	char pw[TL_PASSWORD_MAX + 1];
	PGconn *a, *c;
	size_t i;
	void *h = drv_open();

	memset(&g, 0, sizeof(g));
	a = admin(NULL);
	for (i = 0; i < sizeof(res) / sizeof(res[0]); i++) {
		tl_secret_password(pw);
		secret_add(pw);
		g.resource = res[i];
		g.owner = own[i];
		g.login = log[i];
		g.password = pw;
		ck_rc(drv->create(h, &g, why), 0, why);
		ck_why(why);
		ck_assert_int_eq(db_count(a, res[i]), 1);
		ck_assert_int_eq(role_count(a, own[i]), 1);
		ck_assert_int_eq(role_count(a, log[i]), 1);
		c = pq_connect(log[i], pw, res[i], err, sizeof(err));
		ck_assert_msg(c != NULL, "login %s: %s", log[i], err);
		sql(c, "CREATE TABLE t (x int)");
		PQfinish(c);
		{
			struct tl_drv_endpoint ep = { s_host, s_port };
			enum tl_drv_drift d;

			ck_rc(drv->check(h, &g, &ep, &d, why), 0, why);
			ck_why(why);
			ck_assert_msg(d == TL_DRIFT_NONE, "%s", why);
		}
		/* Nothing escaped its quotes. */
		ck_assert_int_eq(role_count(a, "postgres"), 1);
		ck_assert_int_eq(sql_long(a, "SELECT rolcanlogin AND rolsuper"
		    " FROM pg_roles WHERE rolname = $1", "postgres"), 1);
		ck_assert_int_eq(db_count(a, "postgres"), 1);
		ck_rc(drv->revoke(h, &g, 1, why), 0, why);
		ck_why(why);
		ck_assert_int_eq(db_count(a, res[i]), 0);
		ck_assert_int_eq(role_count(a, own[i]), 0);
		ck_assert_int_eq(role_count(a, log[i]), 0);
	}
	PQfinish(a);
	tl_secret_wipe(pw, sizeof(pw));
	drv->close(h);
}
END_TEST

/*
 * With every statement logged, the server log holds verifiers, never a
 * plaintext password.  The log is where tests/harness/pg.sh puts it
 * (DIR/data beside DIR/log/server.log); read through the server.
 */
START_TEST(test_no_plaintext_in_server_log)
{
	static const char logq[] = "SELECT pg_read_file(regexp_replace("
	    "current_setting('data_directory'), '/data$', '/log/server.log'))";
	struct grant gr;
	char why[TL_WHY_MAX];
	PGconn *a;
	PGresult *r;
	void *h;

	a = admin(NULL);
	sql(a, "ALTER SYSTEM SET log_statement = 'all'");
	sql(a, "SELECT pg_reload_conf()");
	nanosleep(&(struct timespec){ 0, 300000000L }, NULL);
	h = drv_open();
	grant_init(&gr, "plainlog");
	do_create(h, &gr);
	ck_rc(drv->set_password(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	drv->close(h);
	sql(a, "ALTER SYSTEM RESET log_statement");
	sql(a, "SELECT pg_reload_conf()");
	r = PQexec(a, logq);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "reading the "
	    "server log: %s", PQresultErrorMessage(r));
	ck_assert_msg(strstr(PQgetvalue(r, 0, 0), "SCRAM-SHA-256$") != NULL,
	    "the log shows no statement: is log_statement working?");
	ck_assert_msg(strstr(PQgetvalue(r, 0, 0), gr.pw) == NULL,
	    "the plaintext password is in the server log");
	PQclear(r);
	PQfinish(a);
}
END_TEST

/* Names the driver refuses whatever validation ran before it. */
START_TEST(test_refused_names)
{
	static const char long_name[] = "a1234567890123456789012345678901"
	    "23456789012345678901234567890123";		/* 64 bytes */
	struct grant gr;
	char why[TL_WHY_MAX];
	void *h = drv_open();
	struct {
		const char *res, *own, *log;
	} bad[] = {
		{ long_name, "o_ok", "l_ok" },
		{ "db_ok", long_name, "l_ok" },
		{ "db_ok", "o_ok", "" },
		{ "db_ok", "pg_monitor", "l_ok" },
		{ "db_ok", "o_ok", "pg_x" },
		{ "db_ok", "same", "same" },
		{ "db_ok", s_user, "l_ok" },
		{ "db_ok", "o_ok", s_user },
		{ "template1", "o_ok", "l_ok" },
		{ "template0", "o_ok", "l_ok" },
		{ "postgres", "o_ok", "l_ok" },
	};
	size_t i;
	PGconn *a;

	grant_init(&gr, "refuse");
	secret_add(gr.pw);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		gr.g.resource = bad[i].res;
		gr.g.owner = bad[i].own;
		gr.g.login = bad[i].log;
		ck_rc(drv->create(h, &gr.g, why), TL_EINVAL, why);
		ck_why(why);
		ck_rc(drv->revoke(h, &gr.g, 1, why), TL_EINVAL, why);
		ck_rc(drv->fix_privileges(h, &gr.g, why), TL_EINVAL, why);
	}
	a = admin(NULL);
	ck_assert_int_eq(role_count(a, "o_ok"), 0);
	ck_assert_int_eq(db_count(a, "db_ok"), 0);
	ck_assert_int_eq(sql_long(a, "SELECT rolsuper AND rolcanlogin"
	    " FROM pg_roles WHERE rolname = $1", s_user), 1);
	PQfinish(a);
	drv->close(h);
}
END_TEST

/* --- check ---------------------------------------------------------- */

START_TEST(test_check_credential)
{
	struct grant gr;
	char why[TL_WHY_MAX], *l;
	PGconn *a;
	void *h = drv_open();

	grant_init(&gr, "cred");
	do_create(h, &gr);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	a = admin(NULL);
	l = qid(a, gr.log);
	sql(a, "ALTER ROLE %s PASSWORD 'changed-out-of-band'", l);
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_CREDENTIAL);
	ck_assert_msg(strstr(why, "28P01") != NULL, "%s", why);
	ck_rc(drv->set_password(h, &gr.g, why), 0, why);
	ck_why(why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	/* A frozen password that is also NULL (no password at all). */
	sql(a, "ALTER ROLE %s PASSWORD NULL", l);
	ck_drift(h, &gr, TL_DRIFT_CREDENTIAL);
	ck_rc(drv->set_password(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	PQfreemem(l);
	PQfinish(a);
	drv->close(h);
}
END_TEST

START_TEST(test_check_privileges)
{
	struct grant gr;
	char why[TL_WHY_MAX], q[1024], *d, *l, *o;
	PGconn *a;
	void *h = drv_open();
	size_t i;
	/* Each: an out-of-band change, then what why must mention. */
	static const char *const change[][2] = {
		{ "GRANT CONNECT ON DATABASE {d} TO PUBLIC", "PUBLIC" },
		{ "GRANT TEMPORARY ON DATABASE {d} TO PUBLIC", "TEMPORARY" },
		{ "ALTER ROLE {l} SUPERUSER", "SUPERUSER" },
		{ "ALTER ROLE {l} CREATEDB CREATEROLE", "CREATEROLE" },
		{ "ALTER ROLE {o} REPLICATION BYPASSRLS", "BYPASSRLS" },
		{ "ALTER ROLE {o} LOGIN", "has LOGIN" },
		{ "REVOKE {o} FROM {l}", "not a member" },
		{ "ALTER ROLE {l} RESET role", "SET role" },
		{ "ALTER DATABASE {d} OWNER TO postgres", "owned by" },
		{ "GRANT pg_read_all_data TO {l}", "pg_read_all_data" },
		{ "GRANT pg_monitor TO {o}", "pg_monitor" },
		{ "GRANT CONNECT ON DATABASE {d} TO pg_monitor", "pg_monitor" },
		{ "ALTER ROLE {l} NOLOGIN", "NOLOGIN" },
		{ "ALTER ROLE {l} CONNECTION LIMIT 0", "CONNECTION LIMIT" },
		{ "ALTER ROLE {l} VALID UNTIL '2000-01-01'", "VALID UNTIL" },
		/* No expiry backstop: a future expiry is not tally's either. */
		{ "ALTER ROLE {l} VALID UNTIL '2999-01-01'", "no expiry backstop" },
		{ "ALTER ROLE {l} NOINHERIT", "NOINHERIT" },
		{ "ALTER DATABASE {d} ALLOW_CONNECTIONS false", "allow" },
	};

	grant_init(&gr, "priv");
	do_create(h, &gr);
	a = admin(NULL);
	d = qid(a, gr.res);
	l = qid(a, gr.log);
	o = qid(a, gr.own);
	for (i = 0; i < sizeof(change) / sizeof(change[0]); i++) {
		sql(a, "%s", subst(q, sizeof(q), change[i][0], d, l, o));
		ck_assert_msg(do_check(h, &gr, why) == TL_DRIFT_PRIVILEGES,
		    "after %s: %s", change[i][0], why);
		ck_assert_msg(strstr(why, change[i][1]) != NULL,
		    "after %s: why lacks '%s': %s", change[i][0], change[i][1],
		    why);
		ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
		ck_why(why);
		ck_assert_msg(do_check(h, &gr, why) == TL_DRIFT_NONE,
		    "after %s and fix_privileges: %s", change[i][0], why);
	}
	/* Many at once, all named. */
	sql(a, "GRANT CONNECT ON DATABASE %s TO PUBLIC", d);
	sql(a, "ALTER ROLE %s SUPERUSER", l);
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_PRIVILEGES);
	ck_assert_msg(strstr(why, "PUBLIC") && strstr(why, "SUPERUSER"), "%s",
	    why);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	/* Schema public handed back to PUBLIC is reset too. */
	{
		PGconn *c = admin(gr.res);

		sql(c, "GRANT CREATE ON SCHEMA public TO PUBLIC");
		sql(c, "ALTER SCHEMA public OWNER TO postgres");
		ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
		ck_assert_int_eq(sql_long(c, "SELECT count(*) FROM"
		    " pg_namespace, aclexplode(nspacl) x WHERE"
		    " nspname = 'public' AND x.grantee = 0", NULL), 0);
		ck_assert_int_eq(sql_long(c, "SELECT pg_get_userbyid(nspowner)"
		    " = $1 FROM pg_namespace WHERE nspname = 'public'", gr.own),
		    1);
		PQfinish(c);
	}
	PQfreemem(d);
	PQfreemem(l);
	PQfreemem(o);
	PQfinish(a);
	drv->close(h);
}
END_TEST

/* The drift check_bulk finds for one grant (it must answer). */
static enum tl_drv_drift
bulk_drift(void *h, struct grant *gr, char *out)
{
	enum tl_drv_drift d = (enum tl_drv_drift)-1;
	char (*why)[TL_WHY_MAX] = calloc(1, sizeof(*why));
	int rc;

	ck_assert_ptr_nonnull(why);
	secret_add(gr->pw);
	rc = drv->check_bulk(h, &gr->g, 1, &d, why);
	ck_why(why[0]);
	ck_rc(rc, 0, why[0]);
	snprintf(out, TL_WHY_MAX, "%s", why[0]);
	free(why);
	return d;
}

/*
 * Issue 21 item 19: settings put on the login role (or on its database)
 * by hand change every session of the consumer; check names them (one
 * by one and in bulk) and fix_privileges removes them, keeping the
 * role = owner tally set and the read-only flag of a frozen database.
 */
START_TEST(test_check_role_settings)
{
	struct grant gr;
	char why[TL_WHY_MAX], q[1024], err[512], *d, *l, *o;
	PGconn *a, *c;
	void *h = drv_open();
	size_t i;
	static const char *const change[][2] = {
		{ "ALTER ROLE {l} SET statement_timeout = '1ms'",
		    "statement_timeout=1ms" },
		{ "ALTER ROLE {l} SET search_path = 'evil'",
		    "search_path=evil" },
		{ "ALTER ROLE {l} IN DATABASE {d} SET work_mem = '64kB'",
		    "work_mem=64kB" },
		{ "ALTER DATABASE {d} SET statement_timeout = '1ms'",
		    "database-wide statement_timeout=1ms" },
	};

	grant_init(&gr, "rset");
	do_create(h, &gr);
	a = admin(NULL);
	d = qid(a, gr.res);
	l = qid(a, gr.log);
	o = qid(a, gr.own);
	for (i = 0; i < sizeof(change) / sizeof(change[0]); i++) {
		sql(a, "%s", subst(q, sizeof(q), change[i][0], d, l, o));
		ck_assert_msg(do_check(h, &gr, why) == TL_DRIFT_PRIVILEGES,
		    "after %s: %s", change[i][0], why);
		ck_assert_msg(strstr(why, change[i][1]) != NULL,
		    "after %s: why lacks '%s': %s", change[i][0], change[i][1],
		    why);
		ck_assert_msg(bulk_drift(h, &gr, why) == TL_DRIFT_PRIVILEGES,
		    "bulk, after %s: %s", change[i][0], why);
		ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
		ck_assert_msg(do_check(h, &gr, why) == TL_DRIFT_NONE,
		    "after %s and fix_privileges: %s", change[i][0], why);
		ck_assert_msg(bulk_drift(h, &gr, why) == TL_DRIFT_NONE,
		    "bulk, after %s and fix_privileges: %s", change[i][0],
		    why);
	}
	/* The consumer's sessions are as tally made them. */
	c = pq_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "consumer login: %s", err);
	sql(c, "SELECT pg_sleep(0.05)");
	ck_assert_int_eq(sql_long(c, "SELECT current_setting("
	    "'statement_timeout') = '0'", NULL), 1);
	ck_assert_int_eq(sql_long(c, "SELECT current_user = $1", gr.own), 1);
	PQfinish(c);
	/* A frozen database stays frozen through a repair. */
	ck_rc(drv->freeze(h, &gr.g, 1, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	sql(a, "ALTER DATABASE %s SET statement_timeout = '1ms'", d);
	ck_drift(h, &gr, TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	c = pq_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "consumer login: %s", err);
	ck_assert_int_eq(sql_long(c, "SELECT current_setting("
	    "'default_transaction_read_only') = 'on'", NULL), 1);
	PQfinish(c);
	ck_rc(drv->freeze(h, &gr.g, 0, why), 0, why);
	PQfreemem(d);
	PQfreemem(l);
	PQfreemem(o);
	PQfinish(a);
	drv->close(h);
}
END_TEST

/*
 * Issue 21 item 20: each database privilege of the owner role, and its
 * schema public, revoked by hand; check says so, and after
 * fix_privileges the consumer has every one of them again (it creates a
 * schema, a temporary table and a table in public).
 */
START_TEST(test_check_owner_privileges)
{
	struct grant gr;
	char why[TL_WHY_MAX], q[1024], err[512], *d, *l, *o;
	PGconn *a, *c;
	void *h = drv_open();
	size_t i;
	/* Each: what is revoked, in which database ({d}: the grant's). */
	static const char *const change[][3] = {
		{ NULL, "REVOKE CREATE ON DATABASE {d} FROM {o}", "CREATE" },
		{ NULL, "REVOKE TEMPORARY ON DATABASE {d} FROM {o}",
		    "TEMPORARY" },
		{ NULL, "REVOKE CONNECT ON DATABASE {d} FROM {o}",
		    "CONNECT" },
		{ NULL, "REVOKE ALL ON DATABASE {d} FROM {o}",
		    "lacks CONNECT, CREATE, TEMPORARY" },
		{ "{d}", "REVOKE CREATE ON SCHEMA public FROM {o}",
		    "lacks CREATE on schema public" },
		{ "{d}", "REVOKE ALL ON SCHEMA public FROM {o}",
		    "lacks CREATE, USAGE on schema public" },
		{ "{d}", "GRANT USAGE ON SCHEMA public TO pg_monitor",
		    "pg_monitor also hold privileges on schema public" },
	};

	grant_init(&gr, "opriv");
	do_create(h, &gr);
	a = admin(NULL);
	d = qid(a, gr.res);
	l = qid(a, gr.log);
	o = qid(a, gr.own);
	for (i = 0; i < sizeof(change) / sizeof(change[0]); i++) {
		PGconn *x = change[i][0] != NULL ? admin(gr.res) : a;

		sql(x, "%s", subst(q, sizeof(q), change[i][1], d, l, o));
		if (x != a)
			PQfinish(x);
		ck_assert_msg(do_check(h, &gr, why) != TL_DRIFT_NONE,
		    "after %s: %s", change[i][1], why);
		ck_assert_msg(strstr(why, change[i][2]) != NULL,
		    "after %s: why lacks '%s': %s", change[i][1], change[i][2],
		    why);
		ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
		ck_assert_msg(do_check(h, &gr, why) == TL_DRIFT_NONE,
		    "after %s and fix_privileges: %s", change[i][1], why);

		c = pq_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
		ck_assert_msg(c != NULL, "after %s and fix_privileges, "
		    "consumer login: %s", change[i][1], err);
		snprintf(q, sizeof(q), "s%zu", i);
		sql(c, "CREATE SCHEMA %s", q);
		sql(c, "CREATE TEMP TABLE t%zu (x int)", i);
		sql(c, "CREATE TABLE public.p%zu (x int)", i);
		PQfinish(c);
	}
	PQfreemem(d);
	PQfreemem(l);
	PQfreemem(o);
	PQfinish(a);
	drv->close(h);
}
END_TEST

START_TEST(test_check_missing)
{
	struct grant gr;
	char why[TL_WHY_MAX], *d, *l;
	PGconn *a;
	void *h = drv_open();

	grant_init(&gr, "miss");
	do_create(h, &gr);
	a = admin(NULL);
	d = qid(a, gr.res);
	l = qid(a, gr.log);
	sql(a, "DROP DATABASE %s", d);
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_MISSING);
	ck_assert_msg(strstr(why, gr.res) != NULL, "%s", why);
	do_create(h, &gr);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	sql(a, "DROP ROLE %s", l);
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_MISSING);
	ck_assert_msg(strstr(why, gr.log) != NULL && strstr(why, gr.res) ==
	    NULL, "%s", why);
	do_create(h, &gr);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	PQfreemem(d);
	PQfreemem(l);
	PQfinish(a);
	drv->close(h);
}
END_TEST

/* Missing beats credential beats privileges. */
START_TEST(test_check_worst_wins)
{
	struct grant gr;
	char why[TL_WHY_MAX], *d, *l;
	PGconn *a;
	void *h = drv_open();

	grant_init(&gr, "worst");
	do_create(h, &gr);
	a = admin(NULL);
	d = qid(a, gr.res);
	l = qid(a, gr.log);
	sql(a, "ALTER ROLE %s SUPERUSER PASSWORD 'other'", l);
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_CREDENTIAL);
	ck_assert_msg(strstr(why, "SUPERUSER") != NULL, "%s", why);
	sql(a, "DROP DATABASE %s", d);
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_MISSING);
	ck_assert_msg(strstr(why, "SUPERUSER") != NULL, "%s", why);
	do_create(h, &gr);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	PQfreemem(d);
	PQfreemem(l);
	PQfinish(a);
	drv->close(h);
}
END_TEST

/*
 * The bulk check: a changed password, a dropped role and a granted
 * privilege among healthy grants, all found by one call, each on its own
 * grant; a password set again out of band to the same value (a new salt)
 * is no drift; the cache emptied changes no answer.
 */
START_TEST(test_check_bulk)
{
	enum { N = 6 };
	struct grant gr[N];
	struct tl_drv_grant gs[N];
	enum tl_drv_drift d[N];
	char (*why)[TL_WHY_MAX];
	char *q;
	PGconn *a;
	void *h = drv_open();
	int pass, i;

	ck_assert_ptr_nonnull(drv->check_bulk);
	ck_assert_int_eq(tl_drv_can(drv->decl, TL_DRV_CAP_CHECK_BULK, NULL), 1);
	why = calloc(N, sizeof(*why));
	ck_assert_ptr_nonnull(why);
	for (i = 0; i < N; i++) {
		grant_init(&gr[i], "bulk");
		do_create(h, &gr[i]);
		gs[i] = gr[i].g;
	}
	for (pass = 0; pass < 2; pass++) {
		/* Pass 1: nothing cached, every verifier recomputed. */
		if (pass == 1)
			tl_pg_scram_forget();
		ck_rc(drv->check_bulk(h, gs, N, d, why), 0, why[0]);
		for (i = 0; i < N; i++) {
			ck_why(why[i]);
			ck_assert_msg(d[i] == TL_DRIFT_NONE, "grant %d: %s", i,
			    why[i]);
		}
	}
	a = admin(NULL);
	q = qid(a, gr[1].log);
	sql(a, "ALTER ROLE %s PASSWORD 'changed-out-of-band'", q);
	PQfreemem(q);
	q = qid(a, gr[2].log);
	sql(a, "DROP ROLE %s", q);
	PQfreemem(q);
	q = qid(a, gr[3].res);
	sql(a, "GRANT CONNECT ON DATABASE %s TO PUBLIC", q);
	PQfreemem(q);
	q = qid(a, gr[4].log);
	sql(a, "ALTER ROLE %s PASSWORD NULL", q);
	PQfreemem(q);
	/* The same password with the server's own salt: no drift. */
	q = qid(a, gr[5].log);
	sql(a, "ALTER ROLE %s PASSWORD '%s'", q, gr[5].pw);
	PQfreemem(q);
	memset(why, 0, N * sizeof(*why));
	ck_rc(drv->check_bulk(h, gs, N, d, why), 0, why[0]);
	for (i = 0; i < N; i++)
		ck_why(why[i]);
	ck_assert_msg(d[0] == TL_DRIFT_NONE, "%s", why[0]);
	ck_assert_msg(d[1] == TL_DRIFT_CREDENTIAL, "%s", why[1]);
	ck_assert_msg(strstr(why[1], gr[1].log) != NULL, "%s", why[1]);
	ck_assert_msg(d[2] == TL_DRIFT_MISSING, "%s", why[2]);
	ck_assert_msg(strstr(why[2], gr[2].log) != NULL, "%s", why[2]);
	ck_assert_msg(d[3] == TL_DRIFT_PRIVILEGES, "%s", why[3]);
	ck_assert_msg(strstr(why[3], "PUBLIC") != NULL, "%s", why[3]);
	ck_assert_msg(d[4] == TL_DRIFT_CREDENTIAL, "%s", why[4]);
	ck_assert_msg(d[5] == TL_DRIFT_NONE, "%s", why[5]);
	/* What one-by-one check finds agrees, grant by grant. */
	for (i = 0; i < N; i++) {
		char w[TL_WHY_MAX];

		ck_assert_msg(do_check(h, &gr[i], w) == d[i], "grant %d: "
		    "check %s; bulk %s", i, w, why[i]);
	}
	/* Repaired as today, then clean in bulk again. */
	ck_rc(drv->set_password(h, &gs[1], why[1]), 0, why[1]);
	ck_rc(drv->set_password(h, &gs[4], why[4]), 0, why[4]);
	ck_rc(drv->fix_privileges(h, &gs[3], why[3]), 0, why[3]);
	do_create(h, &gr[2]);
	ck_rc(drv->check_bulk(h, gs, N, d, why), 0, why[0]);
	for (i = 0; i < N; i++)
		ck_assert_msg(d[i] == TL_DRIFT_NONE, "grant %d after repair: "
		    "%s", i, why[i]);
	PQfinish(a);
	free(why);
	drv->close(h);
}
END_TEST

/*
 * An admin that is not a superuser cannot read pg_authid: the bulk check
 * says so (TL_EDRIVER, naming it) instead of calling every credential
 * healthy, and the verifier then checks one by one.
 */
START_TEST(test_check_bulk_not_superuser)
{
	struct tl_drv_admin ad = { s_host, s_port, "bulk_admin", NULL,
	    s_settings };
	struct grant gr;
	enum tl_drv_drift d = TL_DRIFT_NONE;
	char why[1][TL_WHY_MAX], pw[TL_PASSWORD_MAX + 1];
	void *h = drv_open(), *h2 = NULL;
	PGconn *a = admin(NULL);
	int rc;

	grant_init(&gr, "bulkns");
	do_create(h, &gr);
	tl_secret_password(pw);
	secret_add(pw);
	sql(a, "DROP ROLE IF EXISTS bulk_admin");
	sql(a, "CREATE ROLE bulk_admin LOGIN CREATEROLE CREATEDB PASSWORD '%s'",
	    pw);
	ad.password = pw;
	rc = drv->open(&ad, &h2, why[0]);
	ck_rc(rc, 0, why[0]);
	why[0][0] = '\0';
	rc = drv->check_bulk(h2, &gr.g, 1, &d, why);
	ck_why(why[0]);
	ck_rc(rc, TL_EDRIVER, why[0]);
	ck_assert_msg(strstr(why[0], "pg_authid") != NULL, "%s", why[0]);
	drv->close(h2);
	sql(a, "DROP ROLE bulk_admin");
	PQfinish(a);
	drv->close(h);
}
END_TEST

/* The consumer's endpoint is unreachable: an error, not a drift. */
START_TEST(test_check_endpoint_unreachable)
{
	struct grant gr;
	char why[TL_WHY_MAX], port[16];
	enum tl_drv_drift d;
	struct tl_drv_endpoint ep = { NULL, NULL, NULL, NULL, NULL };
	void *h = drv_open();
	double t0;
	int rc;

	grant_init(&gr, "epun");
	do_create(h, &gr);
	snprintf(port, sizeof(port), "%d", tl_test_free_port());
	ep.host = "127.0.0.1";
	ep.port = port;
	t0 = now_s();
	rc = drv->check(h, &gr.g, &ep, &d, why);
	ck_why(why);
	ck_rc(rc, TL_EUNREACH, why);
	ck_assert_msg(now_s() - t0 < 3.5, "took %.2f s", now_s() - t0);
	ck_assert_msg(strstr(why, port) != NULL, "%s", why);
	drv->close(h);
}
END_TEST

/* --- admin-side failures -------------------------------------------- */

START_TEST(test_open_wrong_password)
{
	static const char *const nodb[] = { "revoke-public-connect", "no",
		"admin-db", "no_such_db", NULL };
	struct tl_drv_admin a = { s_host, s_port, s_user, "not-the-password",
	    s_settings };
	char why[TL_WHY_MAX];
	void *h = (void *)1;
	int rc;

	secret_add(a.password);
	secret_add(s_pw);
	rc = drv->open(&a, &h, why);
	ck_why(why);
	ck_rc(rc, TL_EAUTH, why);
	ck_assert_ptr_null(h);
	ck_assert_msg(strstr(why, "28P01") != NULL, "%s", why);
	/* An unknown admin role reads the same (the server hides which). */
	a.user = "no_such_admin";
	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	ck_why(why);
	/* A maintenance database that does not exist is a driver error. */
	a.user = s_user;
	a.password = s_pw;
	a.settings = nodb;
	ck_rc(drv->open(&a, &h, why), TL_EDRIVER, why);
	ck_assert_msg(strstr(why, "3D000") != NULL, "%s", why);
	ck_why(why);
}
END_TEST

START_TEST(test_open_unreachable)
{
	struct tl_drv_admin a = { "127.0.0.1", NULL, s_user, s_pw,
	    s_settings };
	char why[TL_WHY_MAX], port[16];
	void *h = (void *)1;
	double t0, dt;
	int rc;

	secret_add(s_pw);
	snprintf(port, sizeof(port), "%d", tl_test_free_port());
	a.port = port;
	t0 = now_s();
	rc = drv->open(&a, &h, why);
	dt = now_s() - t0;
	ck_why(why);
	ck_rc(rc, TL_EUNREACH, why);
	ck_assert_ptr_null(h);
	ck_assert_msg(dt < 1.0, "refused took %.2f s", dt);
	/*
	 * Off loopback the default is verified TLS: with no ca, refused
	 * before anything is sent (TL_EUNTRUSTED).  In plaintext, a name
	 * that does not resolve is unreachable.
	 */
	a.host = "no-such-host.invalid";
	ck_rc(drv->open(&a, &h, why), TL_EUNTRUSTED, why);
	ck_assert_msg(strstr(why, "no ca") != NULL, "%s", why);
	{
		static const char *const plain[] = { "revoke-public-connect",
		    "no", "tls", "off", NULL };

		a.settings = plain;
		ck_rc(drv->open(&a, &h, why), TL_EUNREACH, why);
		ck_why(why);
	}
}
END_TEST

/* A port that accepts TCP but never answers: the deadline ends it. */
START_TEST(test_open_timeout)
{
	struct tl_drv_admin a = { "127.0.0.1", NULL, s_user, s_pw,
	    s_settings };
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	char why[TL_WHY_MAX], port[16];
	void *h = NULL;
	double t0, dt;
	int fd, rc;

	secret_add(s_pw);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(port, sizeof(port), "%d", ntohs(sa.sin_port));
	a.port = port;
	t0 = now_s();
	rc = drv->open(&a, &h, why);
	dt = now_s() - t0;
	close(fd);
	ck_why(why);
	ck_rc(rc, TL_EUNREACH, why);
	ck_assert_msg(dt > 2.5 && dt < 4.5, "timeout took %.2f s", dt);
	ck_assert_msg(strstr(why, "timeout") != NULL, "%s", why);
}
END_TEST

/* The admin session dies under the driver: the next call reconnects. */
START_TEST(test_reconnect)
{
	struct grant gr;
	char why[TL_WHY_MAX];
	PGconn *a;
	void *h = drv_open();
	int rc;

	grant_init(&gr, "reco");
	do_create(h, &gr);
	a = admin(NULL);
	ck_assert_int_ge(sql_long(a, "SELECT count(pg_terminate_backend(pid,"
	    " 5000)) FROM pg_stat_activity WHERE application_name = $1",
	    "tallyd"), 1);
	PQfinish(a);
	rc = drv->check(h, &gr.g, NULL, &(enum tl_drv_drift){ 0 }, why);
	ck_why(why);
	ck_assert_msg(rc == 0 || rc == TL_EUNREACH, "rc %d: %s", rc, why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

/* --- revoke --------------------------------------------------------- */

START_TEST(test_revoke_retain)
{
	struct grant gr;
	char err[512], why[TL_WHY_MAX];
	PGconn *c, *a;
	PGresult *r;
	void *h = drv_open();

	grant_init(&gr, "retain");
	do_create(h, &gr);
	c = pq_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	sql(c, "CREATE TABLE kept (x int)");
	sql(c, "INSERT INTO kept VALUES (42)");

	ck_rc(drv->revoke(h, &gr.g, 0, why), 0, why);
	ck_why(why);
	ck_assert_msg(strstr(why, "1 session") != NULL, "%s", why);
	/* The open session is gone... */
	r = PQexec(c, "SELECT 1");
	ck_assert_msg(PQresultStatus(r) != PGRES_TUPLES_OK,
	    "session survived revoke");
	PQclear(r);
	PQfinish(c);
	/* ...no new one starts... */
	ck_assert(!can_login(gr.log, gr.pw, gr.res, err, sizeof(err)));
	/* ...and the data is still there. */
	a = admin(gr.res);
	ck_assert_int_eq(sql_long(a, "SELECT x FROM kept", NULL), 42);
	PQfinish(a);
	/* check sees a revoked login as NOLOGIN. */
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_PRIVILEGES);
	ck_assert_msg(strstr(why, "NOLOGIN") != NULL, "%s", why);
	/* Idempotent. */
	ck_rc(drv->revoke(h, &gr.g, 0, why), 0, why);
	/* create restores it, with the data. */
	do_create(h, &gr);
	c = pq_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(sql_long(c, "SELECT x FROM kept", NULL), 42);
	PQfinish(c);
	drv->close(h);
}
END_TEST

START_TEST(test_revoke_drop)
{
	struct grant gr;
	char err[512], why[TL_WHY_MAX];
	PGconn *c, *c2, *a;
	PGresult *r;
	void *h = drv_open();

	grant_init(&gr, "drop");
	do_create(h, &gr);
	c = pq_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	sql(c, "CREATE TABLE t (x int)");
	/* An object owned by the login itself, not the owner role. */
	sql(c, "RESET ROLE");
	sql(c, "CREATE TABLE mine (x int)");
	/* A session of the login's elsewhere (PUBLIC may connect there). */
	c2 = pq_connect(gr.log, gr.pw, "postgres", err, sizeof(err));
	ck_assert_msg(c2 != NULL, "%s", err);

	ck_rc(drv->revoke(h, &gr.g, 1, why), 0, why);
	ck_why(why);
	r = PQexec(c, "SELECT 1");
	ck_assert(PQresultStatus(r) != PGRES_TUPLES_OK);
	PQclear(r);
	r = PQexec(c2, "SELECT 1");
	ck_assert(PQresultStatus(r) != PGRES_TUPLES_OK);
	PQclear(r);
	PQfinish(c);
	PQfinish(c2);
	a = admin(NULL);
	ck_assert_int_eq(db_count(a, gr.res), 0);
	ck_assert_int_eq(role_count(a, gr.own), 0);
	ck_assert_int_eq(role_count(a, gr.log), 0);
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_MISSING);
	/* Idempotent, and retain after drop is fine too. */
	ck_rc(drv->revoke(h, &gr.g, 1, why), 0, why);
	ck_rc(drv->revoke(h, &gr.g, 0, why), 0, why);
	ck_why(why);
	PQfinish(a);
	drv->close(h);
}
END_TEST

/*
 * Rotation: a second login beside the first, on the same owner and
 * database; it sees and owns what the first made; retiring the first
 * leaves the second working.
 */
START_TEST(test_rotation_beside)
{
	struct grant g1, g2;
	char err[512], why[TL_WHY_MAX];
	PGconn *c;
	void *h = drv_open();

	grant_init(&g1, "rot");
	do_create(h, &g1);
	c = pq_connect(g1.log, g1.pw, g1.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	sql(c, "CREATE TABLE t (x int)");
	sql(c, "INSERT INTO t VALUES (7)");
	PQfinish(c);

	g2 = g1;
	snprintf(g2.log, sizeof(g2.log), "%.56s_v2", g1.log);
	tl_secret_password(g2.pw);
	g2.g.resource = g2.res;
	g2.g.owner = g2.own;
	g2.g.login = g2.log;
	g2.g.password = g2.pw;
	do_create(h, &g2);
	ck_drift(h, &g1, TL_DRIFT_NONE);
	ck_drift(h, &g2, TL_DRIFT_NONE);
	c = pq_connect(g2.log, g2.pw, g2.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	sql(c, "INSERT INTO t VALUES (8)");
	sql(c, "ALTER TABLE t ADD COLUMN y int");	/* owner's rights */
	PQfinish(c);

	ck_rc(drv->revoke(h, &g1.g, 0, why), 0, why);
	ck_assert(!can_login(g1.log, g1.pw, g1.res, err, sizeof(err)));
	c = pq_connect(g2.log, g2.pw, g2.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(sql_long(c, "SELECT sum(x) FROM t", NULL), 15);
	PQfinish(c);
	ck_drift(h, &g2, TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

/*
 * create promises the password (driver.h): a login whose password was
 * changed out of band authenticates with the grant's again after
 * create alone, so no reactor calls set_password after it.
 */
START_TEST(test_create_sets_password)
{
	struct grant gr;
	char err[512];
	PGconn *a;
	char *q;
	void *h = drv_open();

	grant_init(&gr, "cpw");
	do_create(h, &gr);
	a = admin(NULL);
	q = qid(a, gr.log);
	sql(a, "ALTER ROLE %s PASSWORD 'changed-out-of-band'", q);
	PQfreemem(q);
	PQfinish(a);
	ck_assert(!can_login(gr.log, gr.pw, gr.res, err, sizeof(err)));
	do_create(h, &gr);
	ck_assert_msg(can_login(gr.log, gr.pw, gr.res, err, sizeof(err)),
	    "%s", err);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

/*
 * The rotation saga's generic steps: add_credential puts a second login
 * beside the first (same data, same owner), retire_credential removes
 * the old one, what it owned going to the owner; both idempotent.
 */
START_TEST(test_credential_beside)
{
	struct grant g1, g2;
	char err[512], why[TL_WHY_MAX];
	PGconn *c;
	void *h = drv_open();

	ck_assert_int_eq(drv->decl->credential.kind, TL_DRV_CRED_LOGIN_BESIDE);
	grant_init(&g1, "cred");
	do_create(h, &g1);
	c = pq_connect(g1.log, g1.pw, g1.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	sql(c, "CREATE TABLE t (x int)");
	sql(c, "INSERT INTO t VALUES (7)");
	PQfinish(c);

	g2 = g1;
	snprintf(g2.log, sizeof(g2.log), "%.56s_v2", g1.log);
	tl_secret_password(g2.pw);
	g2.g.resource = g2.res;
	g2.g.owner = g2.own;
	g2.g.login = g2.log;
	g2.g.password = g2.pw;
	secret_add(g2.pw);
	ck_rc(drv->add_credential(h, &g2.g, why), 0, why);
	ck_why(why);
	ck_rc(drv->add_credential(h, &g2.g, why), 0, why);
	ck_assert(can_login(g1.log, g1.pw, g1.res, err, sizeof(err)));
	ck_assert_msg(can_login(g2.log, g2.pw, g2.res, err, sizeof(err)),
	    "%s", err);

	ck_rc(drv->retire_credential(h, &g1.g, why), 0, why);
	ck_why(why);
	ck_rc(drv->retire_credential(h, &g1.g, why), 0, why);
	c = admin(NULL);
	ck_assert_int_eq(role_count(c, g1.log), 0);
	PQfinish(c);
	c = pq_connect(g2.log, g2.pw, g2.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(sql_long(c, "SELECT sum(x) FROM t", NULL), 7);
	PQfinish(c);
	ck_drift(h, &g2, TL_DRIFT_NONE);
	drv->close(h);
}
END_TEST

/* --- measure -------------------------------------------------------- */

START_TEST(test_measure)
{
	const char *e = getenv("TL_PG_MEASURE_N");
	int n = e != NULL ? atoi(e) : 20, i;
	struct grant *gr;
	char why[TL_WHY_MAX];
	double t0, tc, ta, tk, tr;
	void *h = drv_open();

	if (n <= 0)
		n = 1;
	gr = calloc((size_t)n, sizeof(*gr));
	ck_assert_ptr_nonnull(gr);
	for (i = 0; i < n; i++)
		grant_init(&gr[i], "m");
	t0 = now_s();
	for (i = 0; i < n; i++)
		do_create(h, &gr[i]);
	tc = now_s() - t0;
	t0 = now_s();
	for (i = 0; i < n; i++)
		do_create(h, &gr[i]);		/* a retry: all exists */
	ta = now_s() - t0;
	t0 = now_s();
	for (i = 0; i < n; i++)
		ck_drift(h, &gr[i], TL_DRIFT_NONE);
	tk = now_s() - t0;
	t0 = now_s();
	for (i = 0; i < n; i++)
		ck_rc(drv->revoke(h, &gr[i].g, 1, why), 0, why);
	tr = now_s() - t0;
	fprintf(stderr, "check_drv_postgres: %d grants: create %.1f ms, "
	    "create again %.1f ms, check %.1f ms, revoke+drop %.1f ms each\n",
	    n, tc * 1e3 / n, ta * 1e3 / n, tk * 1e3 / n, tr * 1e3 / n);
	free(gr);
	drv->close(h);
}
END_TEST

/* --- the fault-injecting wrapper, around this driver ---------------- */

START_TEST(test_fault_spec)
{
	static const char *const bad[] = { "create", "create:", "nope:fail",
	    "create:explode", "create:fail=2", "create:fail=x",
	    "create:fail-after", "create:fail-after=-1", "create:delay=",
	    "create:drift=missing", "check:drift=worse", "check:fail-last=1",
	    "*:drift=missing" };
	char why[TL_WHY_MAX];
	size_t i;

	unsetenv("TALLY_FAULT");
	ck_assert_ptr_eq(tl_drv_fault_wrap(drv), drv);
	ck_assert_ptr_eq(tl_drv_fault_wrap_spec(drv, "", why), drv);
	ck_assert_ptr_null(tl_drv_fault_wrap_spec(NULL, "create:fail", why));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(tl_drv_fault_wrap_spec(drv, bad[i], why) == NULL,
		    "accepted '%s'", bad[i]);
		ck_assert_msg(strstr(why, "TALLY_FAULT") != NULL, "%s: %s",
		    bad[i], why);
	}
	setenv("TALLY_FAULT", "create:fail", 1);
	{
		const struct tl_drv_ops *f = tl_drv_fault_wrap(drv);

		ck_assert_ptr_nonnull(f);
		ck_assert_ptr_ne(f, drv);
		ck_assert_str_eq(f->decl->name, "postgres");
		ck_assert_ptr_eq(f->decl->types, drv->decl->types);
	}
	unsetenv("TALLY_FAULT");
}
END_TEST

/*
 * lost: the provider acted, the caller saw TL_EUNREACH; the real
 * driver's retry completes.  fail-after, unreach, drift as documented.
 */
START_TEST(test_fault_wrap)
{
	const struct tl_drv_ops *f;
	struct tl_drv_admin a = { s_host, s_port, s_user, s_pw, s_settings };
	struct tl_drv_endpoint ep = { s_host, s_port };
	enum tl_drv_drift d;
	struct grant gr;
	char why[TL_WHY_MAX];
	void *h;
	PGconn *c;

	f = tl_drv_fault_wrap_spec(drv, "create:lost-first=1,"
	    "create:fail-after=2,check:unreach-first=1,check:drift=privileges,"
	    "revoke:delay=50", why);
	ck_assert_msg(f != NULL, "%s", why);
	secret_add(s_pw);
	ck_rc(f->open(&a, &h, why), 0, why);
	grant_init(&gr, "fault");
	secret_add(gr.pw);

	/* Call 1: lost — done on the server, reported as unreachable. */
	ck_rc(f->create(h, &gr.g, why), TL_EUNREACH, why);
	ck_assert_msg(strstr(why, "fault injected") != NULL, "%s", why);
	c = admin(NULL);
	ck_assert_int_eq(db_count(c, gr.res), 1);
	/* Call 2 passes (idempotent); call 3 fails without acting. */
	ck_rc(f->create(h, &gr.g, why), 0, why);
	ck_rc(f->create(h, &gr.g, why), TL_EDRIVER, why);
	ck_why(why);

	/* check: the first is unreachable, later ones at least PRIVILEGES. */
	ck_rc(f->check(h, &gr.g, &ep, &d, why), TL_EUNREACH, why);
	ck_rc(f->check(h, &gr.g, &ep, &d, why), 0, why);
	ck_assert_int_eq(d, TL_DRIFT_PRIVILEGES);
	ck_assert_msg(strstr(why, "drift=privileges") != NULL, "%s", why);
	/* The real driver still says it is fine. */
	{
		void *rh = drv_open();

		ck_rc(drv->check(rh, &gr.g, &ep, &d, why), 0, why);
		ck_assert_int_eq(d, TL_DRIFT_NONE);
		drv->close(rh);
	}

	{
		double t0 = now_s();

		ck_rc(f->revoke(h, &gr.g, 1, why), 0, why);
		ck_assert(now_s() - t0 >= 0.05);
	}
	ck_assert_int_eq(db_count(c, gr.res), 0);
	PQfinish(c);
	f->close(h);
}
END_TEST

START_TEST(test_fault_probability)
{
	const struct tl_drv_ops *f;
	struct tl_drv_admin a = { s_host, s_port, s_user, s_pw, s_settings };
	struct grant gr;
	char why[TL_WHY_MAX];
	int i, failed = 0, rc;
	void *h;

	setenv("TALLY_FAULT_SEED", "42", 1);
	f = tl_drv_fault_wrap_spec(drv, "revoke:auth=0.3", why);
	ck_assert_msg(f != NULL, "%s", why);
	secret_add(s_pw);
	ck_rc(f->open(&a, &h, why), 0, why);
	grant_init(&gr, "prob");
	for (i = 0; i < 100; i++) {
		rc = f->revoke(h, &gr.g, 0, why);	/* nothing to revoke */
		ck_assert_msg(rc == 0 || rc == TL_EAUTH, "%d %s", rc, why);
		failed += rc != 0;
	}
	ck_assert_msg(failed > 10 && failed < 50, "%d of 100 failed", failed);
	f->close(h);
	unsetenv("TALLY_FAULT_SEED");
}
END_TEST

/* --- meshes and fences ------------------------------------------------ */

/* A random mesh or leader id, 32 hex digits. */
static void
hex_id(char out[33])
{
	unsigned char b[16];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, 33, b, sizeof(b));
}

/* A session of mesh (and under fence, NULL: a reader's). */
static void *
drv_open_mesh(const char *mesh, const struct tl_drv_fence *fence)
{
	struct tl_drv_admin a = { s_host, s_port, s_user, s_pw, s_settings };
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

/* The role's mark (its comment), into out ("" when none). */
static void
role_comment(PGconn *a, const char *role, char *out, size_t n)
{
	const char *vals[1] = { role };
	PGresult *r = PQexecParams(a, "SELECT shobj_description(oid, "
	    "'pg_authid') FROM pg_roles WHERE rolname = $1", 1, NULL, vals,
	    NULL, NULL, 0);

	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	snprintf(out, n, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
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
	struct grant g1, g2, g3, g1v2;
	char m1[33], m2[33], owned1[64], owned2[64], why[TL_WHY_MAX],
	    err[512], c1[512], c2[512], want[512], *o;
	enum tl_drv_drift d;
	struct tl_drv_endpoint ep = { s_host, s_port };
	PGconn *a;
	void *h1, *h2;

	hex_id(m1);
	hex_id(m2);
	snprintf(owned1, sizeof(owned1), "owned by mesh %.12s", m1);
	snprintf(owned2, sizeof(owned2), "owned by mesh %.12s", m2);
	h1 = drv_open_mesh(m1, NULL);
	h2 = drv_open_mesh(m2, NULL);
	a = admin(NULL);

	grant_init(&g1, "mesh");
	g1.g.grant = "one/db";
	do_create(h1, &g1);
	snprintf(want, sizeof(want), "made by tally for grant one/db of mesh "
	    "%s; do not edit", m1);
	role_comment(a, g1.own, c1, sizeof(c1));
	ck_assert_str_eq(c1, want);
	role_comment(a, g1.log, c1, sizeof(c1));
	ck_assert_str_eq(c1, want);

	g2 = g1;			/* the same names, the other mesh */
	g2.g.resource = g2.res;
	g2.g.owner = g2.own;
	g2.g.login = g2.log;
	tl_secret_password(g2.pw);
	g2.g.password = g2.pw;
	secret_add(g2.pw);
	ck_refused(drv->create(h2, &g2.g, why), owned1);
	ck_refused(drv->set_password(h2, &g2.g, why), owned1);
	ck_refused(drv->fix_privileges(h2, &g2.g, why), owned1);
	g1v2 = g2;			/* a rotation's new login */
	snprintf(g1v2.log, sizeof(g1v2.log), "%.40s_v2", g2.log);
	g1v2.g.login = g1v2.log;
	ck_refused(drv->add_credential(h2, &g1v2.g, why), owned1);
	ck_assert_int_eq(role_count(a, g1v2.log), 0);
	ck_refused(drv->retire_credential(h2, &g2.g, why), owned1);
	ck_refused(drv->freeze(h2, &g2.g, 1, why), owned1);
	ck_refused(drv->revoke(h2, &g2.g, 0, why), owned1);
	ck_refused(drv->revoke(h2, &g2.g, 1, why), owned1);
	/* check reports it, changing nothing. */
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
	/* The first mesh's objects: untouched, its login works. */
	ck_assert_int_eq(db_count(a, g1.res), 1);
	role_comment(a, g1.log, c1, sizeof(c1));
	ck_assert_str_eq(c1, want);
	ck_assert_msg(can_login(g1.log, g1.pw, g1.res, err, sizeof(err)),
	    "the first mesh's login after the second's attempts: %s", err);
	ck_assert(!can_login(g2.log, g2.pw, g2.res, err, sizeof(err)));
	ck_drift(h1, &g1, TL_DRIFT_NONE);

	/* Taken over on purpose: re-marked with the second mesh. */
	g2.g.adopt_mesh = m1;
	ck_rc(drv->set_password(h2, &g2.g, why), 0, why);
	snprintf(want, sizeof(want), "made by tally for grant one/db of mesh "
	    "%s; do not edit", m2);
	role_comment(a, g2.own, c2, sizeof(c2));
	ck_assert_str_eq(c2, want);
	role_comment(a, g2.log, c2, sizeof(c2));
	ck_assert_str_eq(c2, want);
	ck_assert_msg(can_login(g2.log, g2.pw, g2.res, err, sizeof(err)),
	    "after adopt: %s", err);
	g2.g.adopt_mesh = NULL;
	ck_drift(h2, &g2, TL_DRIFT_NONE);
	/* ...and now the first mesh is the stranger. */
	ck_refused(drv->set_password(h1, &g1.g, why), owned2);
	d = TL_DRIFT_NONE;
	ck_rc(drv->check(h1, &g1.g, &ep, &d, why), 0, why);
	ck_assert_msg(d != TL_DRIFT_NONE && strstr(why, owned2) != NULL,
	    "check: drift %d: %s", (int)d, why);

	/* A mark of before marks named meshes: ours, and re-marked. */
	grant_init(&g3, "nomesh");
	g3.g.grant = "three/db";
	o = qid(a, g3.own);
	sql(a, "CREATE ROLE %s NOLOGIN; COMMENT ON ROLE %s IS 'made by tally "
	    "for grant three/db; do not edit'", o, o);
	PQfreemem(o);
	do_create(h2, &g3);
	snprintf(want, sizeof(want), "made by tally for grant three/db of "
	    "mesh %s; do not edit", m2);
	role_comment(a, g3.own, c2, sizeof(c2));
	ck_assert_str_eq(c2, want);
	ck_assert_msg(can_login(g3.log, g3.pw, g3.res, err, sizeof(err)),
	    "%s", err);

	ck_rc(drv->revoke(h2, &g2.g, 1, why), 0, why);
	ck_rc(drv->revoke(h2, &g3.g, 1, why), 0, why);
	ck_assert_int_eq(db_count(a, g1.res), 0);
	PQfinish(a);
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
	char m[33], la[33], lb[33], why[TL_WHY_MAX], err[512];
	struct tl_drv_fence fa, fb;
	struct tl_drv_fence_held held;
	enum tl_drv_drift d;
	struct tl_drv_endpoint ep = { s_host, s_port };
	PGconn *a;
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
	g.g.grant = "dep/db";
	do_create(ha, &g);

	hb = drv_open_mesh(m, &fb);	/* the promoted standby */
	ck_rc(drv->fence(hb, &fb, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fb, &held));

	/* A, still running: every change refused, none lands. */
	a = admin(NULL);
	grant_init(&g2, "depose");
	g2.g.grant = "dep2/db";
	secret_add(g2.pw);
	ck_refused(drv->create(ha, &g2.g, why), "deposed");
	ck_assert_int_eq(db_count(a, g2.res), 0);
	ck_assert_int_eq(role_count(a, g2.own), 0);
	{
		char oldpw[TL_PASSWORD_MAX + 1];

		memcpy(oldpw, g.pw, sizeof(oldpw));
		tl_secret_password(g.pw);
		secret_add(g.pw);
		ck_refused(drv->set_password(ha, &g.g, why), "deposed");
		memcpy(g.pw, oldpw, sizeof(oldpw));
	}
	gv2 = g;
	gv2.g.resource = gv2.res;
	gv2.g.owner = gv2.own;
	snprintf(gv2.log, sizeof(gv2.log), "%.40s_v2", g.log);
	gv2.g.login = gv2.log;
	gv2.g.password = gv2.pw;
	ck_refused(drv->add_credential(ha, &gv2.g, why), "deposed");
	ck_assert_int_eq(role_count(a, gv2.log), 0);
	ck_refused(drv->fix_privileges(ha, &g.g, why), "deposed");
	ck_refused(drv->retire_credential(ha, &g.g, why), "deposed");
	ck_refused(drv->freeze(ha, &g.g, 1, why), "deposed");
	ck_refused(drv->revoke(ha, &g.g, 0, why), "deposed");
	ck_refused(drv->revoke(ha, &g.g, 1, why), "deposed");
	ck_refused(drv->set_admin_password(ha, s_user, s_pw, why),
	    "deposed");
	ck_assert_int_eq(db_count(a, g.res), 1);
	ck_assert_msg(can_login(g.log, g.pw, g.res, err, sizeof(err)),
	    "the login after the deposed leader's attempts: %s", err);

	/* A reader (no fence) checks; the new leader acts. */
	hr = drv_open_mesh(m, NULL);
	d = TL_DRIFT_MISSING;
	ck_rc(drv->check(hr, &g.g, &ep, &d, why), 0, why);
	ck_assert_msg(d == TL_DRIFT_NONE, "%s", why);
	ck_rc(drv->fix_privileges(hb, &g.g, why), 0, why);
	ck_rc(drv->revoke(hb, &g.g, 1, why), 0, why);
	ck_assert_int_eq(db_count(a, g.res), 0);
	PQfinish(a);
	drv->close(ha);
	drv->close(hb);
	drv->close(hr);
}
END_TEST

/*
 * One handle kept open across calls, as a pass keeps it.  A call in
 * flight when another leader raises the fence lands before the raise
 * (the raise waits for it), and the handle's next call is refused; a
 * handle whose session the server ended between calls, the fence
 * raised meanwhile, is refused its next call too.
 */
struct bg_call {
	void				*h;
	const struct tl_drv_fence	*want;	/* fence; else create */
	struct tl_drv_grant		*g;
	struct tl_drv_fence_held	 held;
	int				 rc;
	int				 done;
	char				 why[TL_WHY_MAX];
};

static void *
bg_run(void *arg)
{
	struct bg_call *b = arg;

	b->rc = b->want != NULL ? drv->fence(b->h, b->want, &b->held, b->why) :
	    drv->create(b->h, b->g, b->why);
	__atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Waits (10 s at most) until n of the driver's sessions wait for a lock. */
static void
wait_lock_waiters(PGconn *c, long n)
{
	int i;

	for (i = 0; i < 1000; i++) {
		if (sql_long(c, "SELECT count(*) FROM pg_stat_activity WHERE "
		    "application_name = $1 AND wait_event_type = 'Lock'",
		    "tallyd") == n)
			return;
		usleep(10000);
	}
	ck_abort_msg("%ld of the driver's sessions never waited for a lock", n);
}

START_TEST(test_deposed_kept_handle)
{
	struct grant g, g2;
	char m[33], la[33], lb[33], lc[33], why[TL_WHY_MAX];
	struct tl_drv_fence fa, fb, fc;
	struct tl_drv_fence_held held;
	struct bg_call call = { 0 }, raise = { 0 };
	pthread_t tc, tr;
	PGconn *a, *blocker;
	void *ha, *hb, *hc;

	hex_id(m);
	hex_id(la);
	hex_id(lb);
	hex_id(lc);
	fa = (struct tl_drv_fence){ m, 2, la };
	fb = (struct tl_drv_fence){ m, 3, lb };
	fc = (struct tl_drv_fence){ m, 4, lc };
	ha = drv_open_mesh(m, &fa);
	ck_rc(drv->fence(ha, &fa, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fa, &held));
	grant_init(&g2, "kept");
	g2.g.grant = "kept0/db";
	do_create(ha, &g2);		/* the handle has made a call */

	/* The owner's name taken by an open transaction: create waits. */
	a = admin(NULL);
	blocker = admin(NULL);
	grant_init(&g, "kept");
	g.g.grant = "kept1/db";
	secret_add(g.pw);
	sql(blocker, "BEGIN");
	sql(blocker, "CREATE ROLE \"%s\" NOLOGIN", g.own);
	call.h = ha;
	call.g = &g.g;
	ck_assert_int_eq(pthread_create(&tc, NULL, bg_run, &call), 0);
	wait_lock_waiters(a, 1);

	/* The promoted standby raises while that create is in flight. */
	hb = drv_open_mesh(m, &fb);
	raise.h = hb;
	raise.want = &fb;
	ck_assert_int_eq(pthread_create(&tr, NULL, bg_run, &raise), 0);
	wait_lock_waiters(a, 2);
	usleep(200000);
	ck_assert_msg(!__atomic_load_n(&raise.done, __ATOMIC_SEQ_CST),
	    "the raise did not wait for the call in flight");
	ck_assert(!__atomic_load_n(&call.done, __ATOMIC_SEQ_CST));
	sql(blocker, "ROLLBACK");
	pthread_join(tc, NULL);
	pthread_join(tr, NULL);
	ck_why(call.why);
	ck_rc(call.rc, 0, call.why);
	ck_rc(raise.rc, 0, raise.why);
	ck_assert(tl_drv_fence_ours(&fb, &raise.held));
	ck_assert_int_eq(db_count(a, g.res), 1);

	/* The same handle's next call: refused, nothing changes. */
	ck_refused(drv->fix_privileges(ha, &g.g, why), "deposed");
	ck_refused(drv->revoke(ha, &g.g, 1, why), "deposed");
	ck_assert_int_eq(db_count(a, g.res), 1);

	/*
	 * The server ends every session of the driver's; a third leader
	 * raises; B's handle, made again by its next call, is refused.
	 */
	ck_rc(drv->fix_privileges(hb, &g.g, why), 0, why);
	(void)sql_long(a, "SELECT count(pg_terminate_backend(pid)) FROM "
	    "pg_stat_activity WHERE application_name = $1", "tallyd");
	hc = drv_open_mesh(m, &fc);
	ck_rc(drv->fence(hc, &fc, &held, why), 0, why);
	ck_assert(tl_drv_fence_ours(&fc, &held));
	ck_refused(drv->revoke(hb, &g.g, 1, why), "deposed");
	ck_assert_int_eq(db_count(a, g.res), 1);
	ck_rc(drv->revoke(hc, &g.g, 1, why), 0, why);
	ck_rc(drv->revoke(hc, &g2.g, 1, why), 0, why);
	ck_assert_int_eq(db_count(a, g.res), 0);
	PQfinish(blocker);
	PQfinish(a);
	drv->close(ha);
	drv->close(hb);
	drv->close(hc);
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
		if (env_get(envf, "TALLY_TEST_PG_CA", out, n) == 0)
			return 1;
	}
	if (e != NULL && *e != '\0') {
		snprintf(out, n, "%s", e);
		return 1;
	}
	return 0;
}

/* Whether user can log in with pw at sslmode mode (err: why not). */
static int
pq_can(const char *user, const char *pw, const char *db, const char *mode,
    char *err, size_t errn)
{
	const char *kw[] = { "host", "port", "user", "password", "dbname",
	    "connect_timeout", "sslmode", "gssencmode", NULL };
	const char *val[] = { s_host, s_port, user, pw, db, "5", mode,
	    "disable", NULL };
	PGconn *c = PQconnectdbParams(kw, val, 0);
	int ok = c != NULL && PQstatus(c) == CONNECTION_OK;

	snprintf(err, errn, "%s", ok ? "" : c != NULL ? PQerrorMessage(c) :
	    "no memory");
	PQfinish(c);
	return ok;
}

/* The server's pg_hba.conf, its text into *text (the caller frees). */
static void
hba_read(PGconn *a, char *path, size_t n, char **text)
{
	PGresult *r = PQexec(a, "SHOW hba_file");
	FILE *f;
	long len;

	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "SHOW hba_file: "
	    "%s", PQresultErrorMessage(r));
	snprintf(path, n, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	ck_assert_msg((f = fopen(path, "r")) != NULL, "%s: %s", path,
	    strerror(errno));
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	*text = calloc(1, (size_t)len + 1);
	ck_assert_ptr_nonnull(*text);
	ck_assert_int_eq(fread(*text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
}

/* Writes pg_hba.conf as first then rest, and has the server reload it. */
static void
hba_write(PGconn *a, const char *path, const char *first, const char *rest)
{
	FILE *f = fopen(path, "w");

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	fprintf(f, "%s%s", first, rest);
	ck_assert_int_eq(fclose(f), 0);
	sql(a, "SELECT pg_reload_conf()");
}

/*
 * Issue 24 item 3: PostgreSQL consumers held to TLS are the operator's
 * pg_hba.conf; tally reports.  Over TLS, check logs in as the consumer
 * over TLS (with the CA) and asks, by a plaintext connection that sends
 * no password, whether the login could log in without TLS: with the
 * harness's pg_hba.conf (host ... scram-sha-256) it can, reported as
 * TL_DRIFT_PLAINTEXT with the line to add; a worse finding wins; the
 * line, added as the reason says and reloaded, holds the login to TLS
 * (a plaintext login refused, a TLS one not) and the finding goes.
 * Under tls off nothing is asked.
 */
START_TEST(test_check_plaintext_login)
{
	static const char *const sv_verify[] = { "revoke-public-connect",
	    "no", "tls", "verify", NULL };
	static const char *const sv_require[] = { "revoke-public-connect",
	    "no", "tls", "require", NULL };
	struct tl_drv_admin a0 = { s_host, s_port, s_user, s_pw, NULL };
	struct grant gr;
	char why[TL_WHY_MAX], err[512], ca[4096], path[4096], line[200];
	char *hba = NULL, *q, *e;
	enum tl_drv_drift d = TL_DRIFT_NONE;
	PGconn *a = admin(NULL);
	void *h = NULL;
	int i;

	if (test_ca(ca, sizeof(ca))) {
		a0.settings = sv_verify;
		a0.ca_file = ca;
	} else
		a0.settings = sv_require;
	secret_add(s_pw);
	ck_rc(drv->open(&a0, &h, why), 0, why);
	grant_init(&gr, "ptx");
	do_create(h, &gr);

	/* Not asked (tl_drv_grant.posture 0): no probe, no warning. */
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_NONE);
	gr.g.posture = 1;
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_PLAINTEXT);
	ck_assert_msg(strstr(why, "without TLS") != NULL, "%s", why);
	snprintf(line, sizeof(line), "'hostnossl all %s all reject'", gr.log);
	ck_assert_msg(strstr(why, line) != NULL, "no %s in: %s", line, why);
	ck_assert_msg(pq_can(gr.log, gr.pw, gr.res, "disable", err,
	    sizeof(err)), "the harness lets a plaintext login in: %s", err);
	/* The bulk check asks nothing of TLS: it logs in as no one. */
	{
		char w1[1][TL_WHY_MAX];

		ck_rc(drv->check_bulk(h, &gr.g, 1, &d, w1), 0, w1[0]);
		ck_assert_int_eq(d, TL_DRIFT_NONE);
	}
	/* A worse finding is not hidden behind it. */
	{
		char *ql = qid(a, gr.log);

		sql(a, "ALTER ROLE %s CONNECTION LIMIT 7", ql);
		PQfreemem(ql);
	}
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &gr.g, why), 0, why);
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_PLAINTEXT);

	/* The line the reason names, added first, and reloaded. */
	q = strstr(why, "'hostnossl");
	ck_assert_ptr_nonnull(q);
	e = strchr(q + 1, '\'');
	ck_assert_ptr_nonnull(e);
	snprintf(line, sizeof(line), "%.*s\n", (int)(e - q - 1), q + 1);
	hba_read(a, path, sizeof(path), &hba);
	hba_write(a, path, line, hba);
	for (i = 0; i < 50; i++) {
		if ((d = do_check(h, &gr, why)) == TL_DRIFT_NONE)
			break;
		usleep(100 * 1000);
	}
	ck_assert_msg(d == TL_DRIFT_NONE, "after adding %s: %d: %s", line,
	    (int)d, why);
	ck_assert_msg(strstr(why, "only over TLS") != NULL, "%s", why);
	ck_assert_msg(!pq_can(gr.log, gr.pw, gr.res, "disable", err,
	    sizeof(err)), "a plaintext login after %s", line);
	ck_assert_msg(strstr(err, "no encryption") != NULL ||
	    strstr(err, "rejects") != NULL, "%s", err);
	ck_assert_msg(pq_can(gr.log, gr.pw, gr.res, "require", err,
	    sizeof(err)), "a TLS login after %s: %s", line, err);
	hba_write(a, path, "", hba);
	drv->close(h);

	/* tls off: plaintext is what the provider is reached by, not asked. */
	h = drv_open();
	ck_assert_int_eq(do_check(h, &gr, why), TL_DRIFT_NONE);
	drv->close(h);
	free(hba);
	PQfinish(a);
}
END_TEST

/* --- the admin's client certificate --------------------------------- */

/*
 * The harness's client certificates (tests/harness/ca.sh): client.pem
 * and .key, CN tally_cert_admin, of the CA in the server's ssl_ca_file;
 * client-other.*, the same CN of an unrelated CA.  cert_up gives that
 * CN a SUPERUSER role that logs in only by pg_hba.conf's cert method
 * (CERT_HBA, above the harness's lines) for the case, cert_down puts
 * pg_hba.conf back and drops the role.
 */
#define CERT_ROLE	"tally_cert_admin"
#define CERT_WRONG	"tally_cert_wrong"	/* not the CN: refused */
#define CERT_HBA	"hostssl all " CERT_ROLE " 127.0.0.1/32 cert\n" \
			"hostssl all " CERT_ROLE " ::1/128 cert\n" \
			"hostssl all " CERT_WRONG " 127.0.0.1/32 cert\n"

static char	 c_hbapath[4096];
static char	*c_hba;			/* pg_hba.conf before cert_up */

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

/* Whether the cert role logs in with the harness's client certificate. */
static int
cert_login(char *err, size_t n)
{
	char ca[4096], crt[4096], key[4096];
	const char *kw[] = { "host", "port", "user", "dbname",
	    "connect_timeout", "sslmode", "sslrootcert", "sslcert", "sslkey",
	    NULL };
	const char *val[] = { s_host, s_port, CERT_ROLE, "postgres", "5",
	    "verify-full", ca, crt, key, NULL };
	PGconn *c;
	int ok;

	cert_path("TALLY_TEST_CA", ca, sizeof(ca));
	cert_path("TALLY_TEST_CA_CLIENT_CERT", crt, sizeof(crt));
	cert_path("TALLY_TEST_CA_CLIENT_KEY", key, sizeof(key));
	c = PQconnectdbParams(kw, val, 0);
	ok = c != NULL && PQstatus(c) == CONNECTION_OK;
	snprintf(err, n, "%s", ok ? "" : c != NULL ? PQerrorMessage(c) :
	    "no memory");
	PQfinish(c);
	return ok;
}

/* Unchecked fixture (after server_up): the role and its pg_hba lines. */
static void
cert_up(void)
{
	char err[512];
	PGconn *a;
	int i;

	if (!s_ok)
		return;
	a = admin(NULL);
	sql(a, "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname "
	    "= '" CERT_ROLE "') THEN CREATE ROLE " CERT_ROLE " LOGIN "
	    "SUPERUSER; END IF; END$$");
	hba_read(a, c_hbapath, sizeof(c_hbapath), &c_hba);
	hba_write(a, c_hbapath, CERT_HBA, c_hba);
	PQfinish(a);
	/* The reload is a signal: the lines hold once a login passes them. */
	for (i = 0; i < 100 && !cert_login(err, sizeof(err)); i++)
		usleep(100 * 1000);
	ck_assert_msg(i < 100, "the cert role cannot log in with the "
	    "harness's client certificate: %s", err);
}

static void
cert_down(void)
{
	PGresult *r;
	PGconn *a;

	if (c_hba == NULL || getpid() != s_parent)
		return;
	a = admin(NULL);
	hba_write(a, c_hbapath, "", c_hba);
	free(c_hba);
	c_hba = NULL;
	/* What the role made in the maintenance database (tally_fences). */
	r = PQexec(a, "REASSIGN OWNED BY " CERT_ROLE " TO CURRENT_USER; "
	    "DROP OWNED BY " CERT_ROLE "; DROP ROLE " CERT_ROLE);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		fprintf(stderr, "check_drv_postgres: dropping %s: %s",
		    CERT_ROLE, PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(a);
}

/* Over verified TLS, as CERT_ROLE with no password: cert and key. */
static const char *const c_verify[] = { "revoke-public-connect", "no",
	"tls", "verify", NULL };

static void
cert_admin(struct tl_drv_admin *a, char *ca, size_t n, const char *cert,
    const char *key)
{
	cert_path("TALLY_TEST_CA", ca, n);
	memset(a, 0, sizeof(*a));
	a->host = s_host;
	a->port = s_port;
	a->user = CERT_ROLE;
	a->settings = c_verify;
	a->ca_file = ca;
	a->client_cert = cert;
	a->client_key = key;
}

/*
 * Issue 24 item 1: the admin role logs in by its client certificate
 * alone (pg_hba.conf's cert method, no password) over verified TLS, and
 * the driver does all of its work so: create (the grant's own database
 * too), check (the consumer's login, no certificate), a reconnect after
 * the server ended the session (libpq reads the key again), retire
 * (the grant's database once more), revoke.  The server sees the
 * certificate (pg_stat_ssl.client_dn); the key is only ever in a memfd
 * while the handle lives and in no descriptor after close; no reason
 * holds a byte of it.
 */
START_TEST(test_cert_admin)
{
	struct tl_drv_admin a;
	struct grant gr;
	char why[TL_WHY_MAX], ca[4096], err[512];
	char *cert = pem_of("TALLY_TEST_CA_CLIENT_CERT");
	char *key = pem_of("TALLY_TEST_CA_CLIENT_KEY");
	PGconn *pa = admin(NULL), *c;
	void *h = NULL;
	int n0, i;

	cert_admin(&a, ca, sizeof(ca), cert, key);
	/* Once first: what the libraries open for good on first use. */
	ck_rc(drv->open(&a, &h, why), 0, why);
	drv->close(h);
	h = NULL;
	n0 = tl_test_fds();

	ck_rc(drv->open(&a, &h, why), 0, why);
	ck_no_key(why, key);
	ck_assert_msg(strstr(why, "TLS, verified") != NULL &&
	    strstr(why, "client certificate") != NULL &&
	    strstr(why, "CN=" CERT_ROLE) != NULL, "%s", why);
	ck_assert_int_eq(tl_test_fds_named("/memfd:admin-key"), 1);
	ck_assert_int_eq(tl_test_fds_named("/memfd:admin-cert"), 1);
	/* The session's socket and the two memfds. */
	ck_assert_int_eq(tl_test_fds(), n0 + 3);
	ck_assert_int_ge(sql_long(pa, "SELECT count(*) FROM pg_stat_ssl s "
	    "JOIN pg_stat_activity USING (pid) WHERE usename = $1 AND "
	    "application_name = 'tallyd' AND s.client_dn LIKE "
	    "'%CN=" CERT_ROLE "'", CERT_ROLE), 1);

	grant_init(&gr, "crt");
	do_create(h, &gr);
	ck_why(why);
	ck_drift(h, &gr, TL_DRIFT_NONE);
	c = pq_connect(gr.log, gr.pw, gr.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	sql(c, "CREATE TABLE t (x int)");
	PQfinish(c);

	/* The server ends the admin session: the next call makes another. */
	ck_assert_int_ge(sql_long(pa, "SELECT count(pg_terminate_backend(pid, "
	    "5000)) FROM pg_stat_activity WHERE usename = $1", CERT_ROLE), 1);
	for (i = 0; i < 2; i++)
		if (drv->fix_privileges(h, &gr.g, why) == 0)
			break;
	ck_assert_msg(i < 2, "after the session ended: %s", why);
	ck_no_key(why, key);
	ck_drift(h, &gr, TL_DRIFT_NONE);

	ck_rc(drv->retire_credential(h, &gr.g, why), 0, why);
	ck_no_key(why, key);
	ck_assert_int_eq(role_count(pa, gr.log), 0);
	ck_rc(drv->revoke(h, &gr.g, 1, why), 0, why);
	ck_assert_int_eq(db_count(pa, gr.res), 0);
	drv->close(h);
	ck_assert_int_eq(tl_test_fds_named("/memfd:admin-"), 0);
	ck_assert_int_eq(tl_test_fds(), n0);
	PQfinish(pa);
	free(cert);
	free(key);
}
END_TEST

/*
 * Who we are, refused: the cert role without a certificate (pg_hba.conf
 * asks for one: TL_EAUTH, the reason says so and how to give one),
 * another role with the certificate (its CN is not that role's), and
 * the cert role with another CA's certificate of the same CN (the server's
 * ssl_ca_file refuses it in the handshake: TL_EAUTH, not an untrusted
 * server); no reason holds the key, no descriptor is left.
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
	ck_assert_msg(strstr(why, "28000") != NULL &&
	    strstr(why, "client certificate") != NULL &&
	    strstr(why, "admin-cert") != NULL, "%s", why);

	/* The certificate of another role (its CN is not this one). */
	cert_admin(&a, ca, sizeof(ca), cert, key);
	a.user = CERT_WRONG;
	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	ck_no_key(why, key);
	ck_assert_msg(strstr(why, "certificate authentication failed") !=
	    NULL && strstr(why, "CN to be the role") != NULL, "%s", why);

	cert_admin(&a, ca, sizeof(ca), ocert, okey);
	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	n0 = tl_test_fds();
	ck_rc(drv->open(&a, &h, why), TL_EAUTH, why);
	ck_assert_ptr_null(h);
	ck_assert_int_eq(tl_test_fds(), n0);
	ck_no_key(why, okey);
	ck_assert_msg(strstr(why, "refused admin-cert") != NULL &&
	    strstr(why, "handshake") != NULL &&
	    strstr(why, "CN=" CERT_ROLE) != NULL, "%s", why);
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
	static const char *const off[] = { "revoke-public-connect", "no",
	    "tls", "off", NULL };
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

/*
 * A move's copy (ops->copy: pg_dump piped into pg_restore, the row
 * counts on both sides) as the cert role on both sides: libpq's own
 * sessions and the children's present the certificate (no password
 * could let them in), the rows arrive, no descriptor is left; a side
 * whose pair does not match is refused before anything runs.
 */
START_TEST(test_cert_copy)
{
	struct tl_drv_admin a, b;
	struct grant g1, g2;
	char why[TL_WHY_MAX], ca[4096], err[512], tables[512];
	char *cert = pem_of("TALLY_TEST_CA_CLIENT_CERT");
	char *key = pem_of("TALLY_TEST_CA_CLIENT_KEY");
	char *okey = pem_of("TALLY_TEST_CA_CLIENT_OTHER_KEY");
	PGconn *c;
	void *h = NULL;
	int n0;

	cert_admin(&a, ca, sizeof(ca), cert, key);
	ck_rc(drv->open(&a, &h, why), 0, why);
	grant_init(&g1, "cpa");
	grant_init(&g2, "cpb");
	do_create(h, &g1);
	do_create(h, &g2);
	c = pq_connect(g1.log, g1.pw, g1.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	sql(c, "CREATE TABLE t (x int)");
	sql(c, "INSERT INTO t VALUES (1), (2), (3)");
	PQfinish(c);

	b = a;
	b.client_key = okey;
	ck_rc(drv->copy(&a, &g1.g, &b, &g2.g, tables, sizeof(tables), why),
	    TL_EINVAL, why);
	ck_assert_msg(strstr(why, "target") != NULL, "%s", why);
	ck_no_key(why, okey);

	n0 = tl_test_fds();
	ck_rc(drv->copy(&a, &g1.g, &a, &g2.g, tables, sizeof(tables), why), 0,
	    why);
	ck_no_key(why, key);
	ck_assert_msg(strstr(tables, "\"public.t\":3") != NULL, "%s", tables);
	ck_assert_int_eq(tl_test_fds(), n0);
	c = pq_connect(g2.log, g2.pw, g2.res, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(sql_long(c, "SELECT sum(x) FROM t", NULL), 6);
	PQfinish(c);

	ck_rc(drv->revoke(h, &g1.g, 1, why), 0, why);
	ck_rc(drv->revoke(h, &g2.g, 1, why), 0, why);
	drv->close(h);
	free(cert);
	free(key);
	free(okey);
}
END_TEST

/* --- the suite ------------------------------------------------------ */

static TCase *
tcase(Suite *s, const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_add_checked_fixture(tc, secrets_reset, NULL);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	return tc;
}

static Suite *
suite(void)
{
	Suite *s = suite_create("drv_postgres");
	TCase *tc;

	tc = tcase(s, "create");
	tcase_add_test(tc, test_create_use);
	tcase_add_test(tc, test_migrate_transactions);
	tcase_add_test(tc, test_migrate_history);
	tcase_add_test(tc, test_migrate_escapes);
	tcase_add_test(tc, test_create_twice);
	tcase_add_test(tc, test_create_racing);
	tcase_add_test(tc, test_create_half_done);
	tcase_add_test(tc, test_create_refuses_foreign);
	tcase_add_test(tc, test_create_refuses_other_grant);
	tcase_add_test(tc, test_claim_unnamed);
	tcase_add_test(tc, test_isolation);
	tcase_add_test(tc, test_role_attributes);
	tcase_add_test(tc, test_injection);
	tcase_add_test(tc, test_refused_names);
	tcase_add_test(tc, test_no_plaintext_in_server_log);

	tc = tcase(s, "check");
	tcase_add_test(tc, test_check_credential);
	tcase_add_test(tc, test_check_privileges);
	tcase_add_test(tc, test_check_missing);
	tcase_add_test(tc, test_check_worst_wins);
	tcase_add_test(tc, test_check_bulk);
	tcase_add_test(tc, test_check_bulk_not_superuser);
	tcase_add_test(tc, test_check_endpoint_unreachable);
	tcase_add_test(tc, test_check_plaintext_login);

	tc = tcase(s, "drift");
	tcase_add_test(tc, test_check_role_settings);
	tcase_add_test(tc, test_check_owner_privileges);

	tc = tcase(s, "admin");
	tcase_add_test(tc, test_open_wrong_password);
	tcase_add_test(tc, test_open_unreachable);
	tcase_add_test(tc, test_open_timeout);
	tcase_add_test(tc, test_reconnect);
	tcase_add_test(tc, test_fence);
	tcase_add_test(tc, test_two_meshes);
	tcase_add_test(tc, test_deposed);
	tcase_add_test(tc, test_deposed_kept_handle);

	tc = tcase(s, "revoke");
	tcase_add_test(tc, test_revoke_retain);
	tcase_add_test(tc, test_revoke_drop);
	tcase_add_test(tc, test_rotation_beside);
	tcase_add_test(tc, test_create_sets_password);
	tcase_add_test(tc, test_credential_beside);

	tc = tcase(s, "cert");
	tcase_add_unchecked_fixture(tc, cert_up, cert_down);
	tcase_add_test(tc, test_cert_admin);
	tcase_add_test(tc, test_cert_refused);
	tcase_add_test(tc, test_cert_invalid);
	tcase_add_test(tc, test_cert_copy);

	tc = tcase(s, "fault");
	tcase_add_test(tc, test_fault_spec);
	tcase_add_test(tc, test_fault_wrap);
	tcase_add_test(tc, test_fault_probability);

	tc = tcase(s, "measure");
	tcase_add_test(tc, test_measure);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	s_parent = getpid();
	drv = tl_drv_find("postgres");
	if (drv == NULL) {
		fprintf(stderr, "no postgres driver registered\n");
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
