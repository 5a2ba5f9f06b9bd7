/*
 * bench_provision.c - grants through tally against the same work done
 * directly on PostgreSQL in the same run.  Prints figures; never asserts.
 *
 * Contenders, each with its own throwaway server (tests/harness/pg.sh):
 *
 *   direct, 4 statements    over one libpq connection, per grant:
 *                           CREATE ROLE owner NOLOGIN; CREATE ROLE login
 *                           LOGIN PASSWORD <SCRAM verifier> IN ROLE owner;
 *                           CREATE DATABASE ... OWNER owner TEMPLATE
 *                           template0 (the server's default strategy,
 *                           WAL_LOG since PostgreSQL 15, as the driver);
 *                           REVOKE ALL ON DATABASE ... FROM PUBLIC
 *   direct, driver's SQL    what drivers/postgres.c runs for a new grant,
 *                           in its order: existence checks, both roles,
 *                           the database, the privileges transaction, then
 *                           schema public from a connection to the new
 *                           database (one admin connection throughout)
 *   tally --workers W       one tally assign of the slice's modules (one
 *                           CLI process, one transaction: how an operator
 *                           places a batch) with tallyd running as a
 *                           daemon; a slice ends when the last of its
 *                           grants is delivered: its credential.delivered
 *                           event (the credential sealed to the node)
 *                           committed in the log, which this program
 *                           polls every 2 ms (the control plane writes
 *                           no env file; a node's agent does)
 *
 * The grants are made in rounds, each contender doing one slice per
 * round in turn (the order rotates), so that all of them see the same
 * machine: this one is shared, and CREATE DATABASE, which writes the
 * template's pages to the WAL and syncs them, swings by an order of
 * magnitude with other disk traffic.
 *
 * Then, with BASE grants provisioned and tallyd idle: one more request
 * at a time, from `tally assign` to its credential.delivered event
 * committed (polled every 1 ms), beside the driver's time for it
 * (tallyd's log) and that grant's own CREATE DATABASE (the server's log, log_min_duration_statement = 0).  And
 * tallyd's peak RSS (VmHWM) in every run.
 *
 * Env: TALLY_BIN, TALLY_SRC, TALLY_TMP (as make bench sets them);
 * BENCH_GRANTS (200), BENCH_ROUNDS (10), BENCH_WORKERS ("1,4,8"),
 * BENCH_LAT_BASE (300), BENCH_LAT_SAMPLES (5).
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/secret.h"
#include "reactors/rx-internal.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME		"bench_provision"
#define MAXW		6
#define MAXC		(MAXW + 2)
#define MAXSAMPLES	64

static const char *bin, *src;
static char *scratch;

/* --- processes ------------------------------------------------------- */

/* VmHWM of pid in KiB (0 if unknown). */
static long
hwm_kb(pid_t pid)
{
	char path[64], line[256];
	FILE *fp;
	long kb = 0;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (strncmp(line, "VmHWM:", 6) == 0)
			kb = atol(line + 6);
	fclose(fp);
	return kb;
}

/* --- PostgreSQL ------------------------------------------------------ */

struct pg {
	char	 dir[4096];
	char	 port[16];
	char	 pwfile[4096];
	char	 user[64];
	char	 pw[256];
	int	 started;
	PGconn	*conn;
};

/* A connection over TCP with the admin's password, as tallyd makes one. */
static PGconn *
pg_connect(const struct pg *pg, const char *db)
{
	const char *kw[] = { "host", "port", "user", "password", "dbname",
	    NULL };
	const char *val[] = { "127.0.0.1", pg->port, pg->user, pg->pw, db,
	    NULL };
	PGconn *c = PQconnectdbParams(kw, val, 0);

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, ME ": connect to %s: %s", db,
		    PQerrorMessage(c));
		PQfinish(c);
		return NULL;
	}
	return c;
}

static int
execf(PGconn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
execf(PGconn *c, const char *fmt, ...)
{
	char sql[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	return tl_bench_pg_exec(c, ME, sql);
}

/* A query with one or two text parameters, as the driver's checks. */
static int
query2(PGconn *c, const char *sql, const char *p1, const char *p2)
{
	const char *v[2] = { p1, p2 };
	PGresult *r = PQexecParams(c, sql, p2 ? 2 : 1, NULL, v, NULL, NULL, 0);
	int ok = PQresultStatus(r) == PGRES_TUPLES_OK;

	if (!ok)
		fprintf(stderr, ME ": %.60s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	return ok ? 0 : -1;
}

static int
pg_start(struct pg *pg, const char *dir, int port_hint)
{
	FILE *fp;

	memset(pg, 0, sizeof(*pg));
	snprintf(pg->dir, sizeof(pg->dir), "%s", dir);
	if (tl_bench_pg_start(src, pg->dir, port_hint, pg->port,
	    sizeof(pg->port)) != 0) {
		fprintf(stderr, ME ": PostgreSQL could not be started in %s\n",
		    dir);
		return -1;
	}
	pg->started = 1;
	if (tl_test_env_get(pg->dir, "TALLY_TEST_PG_USER", pg->user,
	    sizeof(pg->user)) != 0 ||
	    tl_test_env_get(pg->dir, "TALLY_TEST_PG_PWFILE", pg->pwfile,
	    sizeof(pg->pwfile)) != 0) {
		fprintf(stderr, ME ": %s/env is incomplete\n", pg->dir);
		return -1;
	}
	if ((fp = fopen(pg->pwfile, "r")) == NULL ||
	    fgets(pg->pw, sizeof(pg->pw), fp) == NULL) {
		if (fp != NULL)
			fclose(fp);
		fprintf(stderr, ME ": cannot read %s\n", pg->pwfile);
		return -1;
	}
	fclose(fp);
	pg->pw[strcspn(pg->pw, "\r\n")] = '\0';
	if ((pg->conn = pg_connect(pg, "postgres")) == NULL)
		return -1;
	/* Every run starts from a clean checkpoint, not initdb's pages. */
	return tl_bench_pg_exec(pg->conn, ME, "CHECKPOINT");
}

static void
pg_stop(struct pg *pg)
{
	if (pg->conn != NULL)
		PQfinish(pg->conn);
	pg->conn = NULL;
	if (pg->started)
		tl_bench_harness(src, "pg.sh", "stop", pg->dir, NULL);
	pg->started = 0;
}

/*
 * How long the server took for the CREATE DATABASE of the database whose
 * name begins with db, from its log
 * (log_min_duration_statement = 0); -1 if not found.
 */
static double
server_createdb_ms(const struct pg *pg, const char *db)
{
	char path[4400], real[4096] = "", line[4096], want[128];
	FILE *fp;
	double ms = -1;
	char *p;

	snprintf(path, sizeof(path), "%s/realdir", pg->dir);
	if ((fp = fopen(path, "r")) != NULL) {
		if (fgets(real, sizeof(real), fp) == NULL)
			real[0] = '\0';
		fclose(fp);
		real[strcspn(real, "\n")] = '\0';
	}
	snprintf(path, sizeof(path), "%s/log/server.log", real[0] ? real :
	    pg->dir);
	snprintf(want, sizeof(want), "statement: CREATE DATABASE \"%s", db);
	if ((fp = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (strstr(line, want) != NULL &&
		    (p = strstr(line, "duration: ")) != NULL)
			ms = atof(p + 10);
	fclose(fp);
	return ms;
}

/* --- contenders ------------------------------------------------------ */

enum { C_MIN, C_FULL, C_TALLY };

struct contender {
	int		 kind;
	int		 workers;
	char		 name[48];
	char		 dir[4200];
	char		 home[4300];
	char		 log[4300];	/* the CLI's output */
	char		 dlog[4300];	/* tallyd's stderr */
	struct pg	 pg;
	pid_t		 dpid;
	int		 done;		/* grants made */
	double		 secs;		/* in its slices */
	double		 cli;		/* tally assign processes */
	double		*cdb;		/* ms per CREATE DATABASE (direct) */
	double		 slice_ms[256];	/* ms per grant, each slice */
	int		 nslice;
	long		 hwm;		/* KiB */
	int		 failed;
};

static struct contender cs[MAXC];
static int ncs;

static void
cleanup(void)
{
	int i;

	for (i = 0; i < ncs; i++) {
		tl_bench_tallyd_stop(&cs[i].dpid);
		pg_stop(&cs[i].pg);
	}
}

#define ATTRS "NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"

/* The SCRAM verifier of a fresh password, quoted; PQfreemem it. */
static char *
verifier(PGconn *c, const char *login)
{
	char pw[TL_PASSWORD_MAX + 1], *v, *lit;

	tl_secret_password(pw);
	v = PQencryptPasswordConn(c, pw, login, "scram-sha-256");
	tl_secret_wipe(pw, sizeof(pw));
	if (v == NULL)
		return NULL;
	lit = PQescapeLiteral(c, v, strlen(v));
	PQfreemem(v);
	return lit;
}

static int
direct_one(struct pg *pg, int i, int full, double *createdb_ms)
{
	PGconn *c = pg->conn, *dc;
	char db[64], login[80], *v;
	double t;
	int rc;

	snprintf(db, sizeof(db), "c%04d-db", i);
	snprintf(login, sizeof(login), "%s_v1", db);
	if ((v = verifier(c, login)) == NULL)
		return -1;
	if (!full) {
		rc = execf(c, "CREATE ROLE \"%s\" NOLOGIN", db) ||
		    execf(c, "CREATE ROLE \"%s\" LOGIN PASSWORD %s IN ROLE "
		    "\"%s\"", login, v, db);
		PQfreemem(v);
		if (rc)
			return -1;
		t = tl_bench_now();
		if (execf(c, "CREATE DATABASE \"%s\" OWNER \"%s\" TEMPLATE "
		    "template0", db, db))
			return -1;
		*createdb_ms = (tl_bench_now() - t) * 1000;
		return execf(c, "REVOKE ALL ON DATABASE \"%s\" FROM PUBLIC",
		    db);
	}
	/* pg_create: ensure_owner, ensure_login, ensure_db */
	rc = query2(c, "SELECT 1 FROM pg_roles WHERE rolname = $1", db, NULL) ||
	    execf(c, "CREATE ROLE \"%s\" NOLOGIN " ATTRS, db) ||
	    query2(c, "SELECT 1 FROM pg_roles WHERE rolname = $1", login,
	    NULL) ||
	    execf(c, "CREATE ROLE \"%s\" LOGIN INHERIT " ATTRS " PASSWORD %s",
	    login, v) ||
	    query2(c, "SELECT 1 FROM pg_database WHERE datname = $1", db,
	    NULL);
	PQfreemem(v);
	if (rc)
		return -1;
	t = tl_bench_now();
	if (execf(c, "CREATE DATABASE \"%s\" OWNER \"%s\" TEMPLATE template0",
	    db, db))
		return -1;
	*createdb_ms = (tl_bench_now() - t) * 1000;
	/* apply_cluster: one transaction */
	if (tl_bench_pg_exec(c, ME, "BEGIN") ||
	    execf(c, "ALTER ROLE \"%s\" NOLOGIN " ATTRS, db) ||
	    execf(c, "ALTER ROLE \"%s\" LOGIN INHERIT " ATTRS
	    " CONNECTION LIMIT -1 VALID UNTIL 'infinity'", login) ||
	    execf(c, "GRANT \"%s\" TO \"%s\"", db, login) ||
	    execf(c, "ALTER ROLE \"%s\" SET role = \"%s\"", login, db) ||
	    query2(c, "SELECT g.rolname FROM pg_auth_members m"
	    " JOIN pg_roles g ON g.oid = m.roleid"
	    " JOIN pg_roles u ON u.oid = m.member"
	    " WHERE u.rolname = $1 AND g.rolname <> $2", login, db) ||
	    query2(c, "SELECT g.rolname FROM pg_auth_members m"
	    " JOIN pg_roles g ON g.oid = m.roleid"
	    " JOIN pg_roles u ON u.oid = m.member"
	    " WHERE u.rolname = $1 AND g.rolname <> $2", db, "") ||
	    execf(c, "ALTER DATABASE \"%s\" OWNER TO \"%s\"", db, db) ||
	    execf(c, "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS true", db) ||
	    execf(c, "REVOKE ALL ON DATABASE \"%s\" FROM PUBLIC", db) ||
	    query2(c, "SELECT DISTINCT r.rolname FROM pg_database d,"
	    " aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a"
	    " JOIN pg_roles r ON r.oid = a.grantee"
	    " WHERE d.datname = $1 AND a.grantee <> d.datdba"
	    " AND r.rolname <> $2", db, db) ||
	    execf(c, "GRANT CONNECT, TEMPORARY ON DATABASE \"%s\" TO \"%s\"",
	    db, db) ||
	    tl_bench_pg_exec(c, ME, "COMMIT"))
		return -1;
	/* apply_schema: from a connection to the new database */
	if ((dc = pg_connect(pg, db)) == NULL)
		return -1;
	rc = query2(dc, "SELECT 1 FROM pg_namespace WHERE nspname = $1",
	    "public", NULL) ||
	    execf(dc, "ALTER SCHEMA public OWNER TO \"%s\"", db) ||
	    tl_bench_pg_exec(dc, ME, "REVOKE ALL ON SCHEMA public FROM "
	    "PUBLIC");
	PQfinish(dc);
	return rc ? -1 : 0;
}

/* The postgres provider and modules c0001..cNNNN, declared, not assigned. */
static int
tally_setup(struct contender *c, int nmod)
{
	char mf[4400], pgmf[4200], set1[64], set2[128], key[4400];
	FILE *fp;
	int i;

	snprintf(mf, sizeof(mf), "%s/consumers.yaml", c->dir);
	snprintf(key, sizeof(key), "%s/node-a.key", c->dir);
	if ((fp = fopen(mf, "w")) == NULL)
		return -1;
	for (i = 1; i <= nmod; i++)
		fprintf(fp, "---\nmodule: c%04d\n"
		    "env: {DB_HOST: \"\", DB_PORT: \"\", DB_NAME: \"\", "
		    "DB_USER: \"\", DB_PASSWORD: \"\"}\n"
		    "requires:\n  db:\n    type: postgres-database\n"
		    "    from: postgres\n"
		    "    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME,"
		    " user: DB_USER, password: DB_PASSWORD}\n", i);
	if (fclose(fp) != 0)
		return -1;
	snprintf(pgmf, sizeof(pgmf), "%s/examples/postgres.yaml", src);
	snprintf(set1, sizeof(set1), "port=%s", c->pg.port);
	snprintf(set2, sizeof(set2), "admin-user=%s", c->pg.user);
	if (tl_bench_tally(bin, c->home, NULL, c->log, "init", NULL) != 0 ||
	    tl_bench_tally(bin, c->home, NULL, c->log, "node", "add", "node-a",
	    "--routable-name=127.0.0.1", "--key-out", key, NULL) != 0 ||
	    tl_bench_tally(bin, c->home, NULL, c->log, "apply", pgmf, mf,
	    NULL) != 0 ||
	    tl_bench_tally(bin, c->home, c->pg.pwfile, c->log, "assign",
	    "postgres", "node-a", "--set", set1, "--set", set2, "--secret",
	    "admin-password", NULL) != 0)
		return -1;
	return 0;
}

static int
wait_delivered(struct contender *c, int want, double timeout)
{
	double end = tl_bench_now() + timeout;
	struct tl_bench_dlv d;
	int n, rc = 0;

	if (tl_bench_dlv_open(&d, c->home) != 0)
		return -1;
	while ((n = tl_bench_dlv_count(&d, NULL)) < want) {
		if (n < 0 || tl_bench_now() > end ||
		    waitpid(c->dpid, NULL, WNOHANG) == c->dpid) {
			fprintf(stderr, ME ": %s: %d of %d delivered (see %s)\n",
			    c->name, n, want, c->dlog);
			rc = -1;
			break;
		}
		tl_bench_msleep(2);
	}
	tl_bench_dlv_close(&d);
	return rc;
}

/* Grants first..last (1-based), timed into c->secs. */
static void
slice(struct contender *c, int first, int last)
{
	double t0, t1;
	int i;

	if (c->failed)
		return;
	t0 = tl_bench_now();
	for (i = first; c->kind != C_TALLY && i <= last; i++)
		if (direct_one(&c->pg, i, c->kind == C_FULL,
		    &c->cdb[i - 1]) != 0) {
			c->failed = 1;
			return;
		}
	if (c->kind == C_TALLY && tl_bench_assign_batch(bin, c->home, c->log,
	    "c", first, last, "node-a") != 0) {
		fprintf(stderr, ME ": tally assign c%04d..c%04d failed (see "
		    "%s)\n", first, last, c->log);
		c->failed = 1;
		return;
	}
	t1 = tl_bench_now();
	if (c->kind == C_TALLY) {
		c->cli += t1 - t0;
		if (wait_delivered(c, last, 1800) != 0) {
			c->failed = 1;
			return;
		}
		t1 = tl_bench_now();
		if (hwm_kb(c->dpid) > c->hwm)
			c->hwm = hwm_kb(c->dpid);
	}
	c->secs += t1 - t0;
	if (c->nslice < 256)
		c->slice_ms[c->nslice++] = (t1 - t0) * 1000 / (last - first + 1);
	c->done = last;
}

static int
contender_start(struct contender *c, int n, int nmod, int port)
{
	char w[16];

	if (c->kind == C_TALLY)
		snprintf(c->name, sizeof(c->name), "tally --workers %d",
		    c->workers);
	else
		snprintf(c->name, sizeof(c->name), "direct, %s",
		    c->kind == C_MIN ? "4 statements" : "the driver's SQL");
	snprintf(c->dir, sizeof(c->dir), "%s/%s%d", scratch,
	    c->kind == C_TALLY ? "tally-w" : "direct-", c->kind == C_TALLY ?
	    c->workers : c->kind);
	snprintf(c->home, sizeof(c->home), "%s/home", c->dir);
	snprintf(c->log, sizeof(c->log), "%s/cli.log", c->dir);
	snprintf(c->dlog, sizeof(c->dlog), "%s/tallyd.log", c->dir);
	c->dpid = -1;
	if ((c->cdb = calloc((size_t)n, sizeof(double))) == NULL ||
	    pg_start(&c->pg, c->dir, port) != 0)
		return -1;
	if (c->kind != C_TALLY)
		return 0;
	snprintf(w, sizeof(w), "%d", c->workers);
	if (tally_setup(c, nmod) != 0 || (c->dpid = tl_bench_tallyd_start(bin,
	    c->home, c->dlog, "--workers", w, NULL)) <= 0) {
		fprintf(stderr, ME ": setting up %s failed (see %s)\n",
		    c->name, c->dir);
		return -1;
	}
	return 0;
}

/* --- one more grant at a time, with many provisioned ----------------- */

struct latency {
	int	 n;
	int	 base;
	double	 e2e[MAXSAMPLES];	/* ms */
	double	 drv[MAXSAMPLES];	/* ms, the driver call (tallyd's log) */
	double	 own[MAXSAMPLES];	/* ms, its CREATE DATABASE (server) */
	int	 failed;
};

/* The driver's time for grant module/db, from tallyd's log (ms; -1). */
static double
driver_ms(const char *log, const char *module)
{
	char line[2048], want[128];
	FILE *fp;
	double ms = -1;
	char *p;

	snprintf(want, sizeof(want), "provisioned grant %s/db on ", module);
	if ((fp = fopen(log, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (strstr(line, want) != NULL &&
		    (p = strrchr(line, '(')) != NULL)
			ms = atof(p + 1);
	fclose(fp);
	return ms;
}

static void
latency_run(struct contender *c, struct latency *lat)
{
	char m[16], stream[4500], db[64];
	struct tl_bench_dlv dl = { 0 };
	int i, k;
	double t;

	if (c->failed) {
		lat->failed = 1;
		return;
	}
	/* On to base grants, untimed. */
	for (k = c->done + 1; k <= lat->base; k++) {
		snprintf(m, sizeof(m), "c%04d", k);
		if (tl_bench_tally(bin, c->home, NULL, c->log, "assign", m,
		    "node-a", NULL) != 0) {
			lat->failed = 1;
			return;
		}
	}
	if (lat->base > c->done && wait_delivered(c, lat->base, 1800) != 0) {
		lat->failed = 1;
		return;
	}
	if (lat->base < c->done)
		lat->base = c->done;
	if (tl_bench_pg_exec(c->pg.conn, ME, "ALTER SYSTEM SET "
	    "log_min_duration_statement = 0") ||
	    tl_bench_pg_exec(c->pg.conn, ME, "SELECT pg_reload_conf()")) {
		lat->failed = 1;
		return;
	}
	if (tl_bench_dlv_open(&dl, c->home) != 0) {
		lat->failed = 1;
		return;
	}
	for (i = 0; i < lat->n; i++) {
		k = lat->base + i + 1;
		tl_bench_msleep(1000);	/* idle */
		snprintf(m, sizeof(m), "c%04d", k);
		snprintf(stream, sizeof(stream), "grant/%s/db", m);
		t = tl_bench_now();
		if (tl_bench_tally(bin, c->home, NULL, c->log, "assign", m,
		    "node-a", NULL) != 0) {
			lat->failed = 1;
			goto out;
		}
		while (tl_bench_dlv_count(&dl, stream) < 1) {
			if (tl_bench_now() - t > 120) {
				lat->failed = 1;
				goto out;
			}
			tl_bench_msleep(1);
		}
		lat->e2e[i] = (tl_bench_now() - t) * 1000;
		tl_bench_msleep(50);	/* the log line follows the event */
		lat->drv[i] = driver_ms(c->dlog, m);
		/*
		 * The grant's database: MODULE-db_DIGEST (reactors/names.c),
		 * the digest keyed by the mesh id, so found by its prefix.
		 */
		snprintf(db, sizeof(db), "%s-db_", m);
		lat->own[i] = server_createdb_ms(&c->pg, db);
	}
	if (hwm_kb(c->dpid) > c->hwm)
		c->hwm = hwm_kb(c->dpid);
out:
	tl_bench_dlv_close(&dl);
}

/* --- main ------------------------------------------------------------ */

static int
parse_workers(const char *s, int *w)
{
	int n = 0;
	char *end;
	long v;

	while (*s != '\0' && n < MAXW) {
		v = strtol(s, &end, 10);
		if (end == s || v < 1 || v > 64)
			break;
		w[n++] = (int)v;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

int
main(void)
{
	struct latency lat;
	int workers[MAXW], nw, n, rounds, r, i, j, lw = -1, nmod, bad = 0;
	const char *ws = getenv("BENCH_WORKERS");
	double tfull = 0, tmin = 0, mfull = 0, mmin = 0, med;
	long hwm = 0;

	tl_bench_dirs(&src, &bin);
	n = tl_bench_envint("BENCH_GRANTS", 200, 1, 9000);
	rounds = tl_bench_envint("BENCH_ROUNDS", 10, 1, n);
	nw = parse_workers(ws != NULL && *ws != '\0' ? ws : "1,4,8", workers);
	memset(&lat, 0, sizeof(lat));
	lat.base = tl_bench_envint("BENCH_LAT_BASE", 300, 0, 9000);
	lat.n = tl_bench_envint("BENCH_LAT_SAMPLES", 5, 1, MAXSAMPLES);
	nmod = (lat.base > n ? lat.base : n) + lat.n;

	scratch = tl_test_tmpdir("bench_provision");
	tl_bench_atexit(cleanup);

	printf(ME ": %d grants in %d rounds; tally from %s\n", n, rounds, bin);
	printf("  (each contender on its own throwaway PostgreSQL; taking "
	    "turns; a few minutes)\n");
	fflush(stdout);

	cs[ncs++].kind = C_MIN;
	cs[ncs++].kind = C_FULL;
	for (i = 0; i < nw; i++) {
		cs[ncs].kind = C_TALLY;
		cs[ncs].workers = workers[i];
		if (lw < 0 || workers[i] > cs[lw].workers)
			lw = ncs;
		ncs++;
	}
	for (i = 0; i < ncs; i++)
		if (contender_start(&cs[i], n, nmod, 57000 + (int)(getpid() %
		    300) + 20 * i) != 0) {
			fprintf(stderr, ME ": %s: cannot start\n", cs[i].name);
			cs[i].failed = 1;
		}

	for (r = 0; r < rounds; r++) {
		int first = n * r / rounds + 1, last = n * (r + 1) / rounds;

		for (j = 0; j < ncs; j++)
			slice(&cs[(r + j) % ncs], first, last);
	}

	printf("\n%d grants, request -> credential ready: the sum of each "
	    "contender's slices;\nin brackets the median slice, per grant "
	    "(less sensitive to a slow disk moment)\n", n);
	for (i = 0; i < ncs; i++) {
		struct contender *c = &cs[i];

		if (c->failed) {
			printf("  %-26s FAILED (see stderr)\n", c->name);
			continue;
		}
		med = tl_bench_median(c->slice_ms, c->nslice);
		printf("  %-26s %7.2f s  %6.1f ms/grant [%5.1f]", c->name,
		    c->secs, c->secs * 1000 / n, med);
		if (c->kind == C_MIN) {
			tmin = c->secs;
			mmin = med;
		}
		if (c->kind == C_FULL) {
			tfull = c->secs;
			mfull = med;
		}
		if (c->kind != C_TALLY) {
			double s = 0;

			for (j = 0; j < n; j++)
				s += c->cdb[j] / 1000;
			printf("  (CREATE DATABASE: %.1f s in all, median %.0f "
			    "ms)\n", s, tl_bench_median(c->cdb, n));
			continue;
		}
		printf("  x%.2f [x%.2f] the driver's SQL, x%.2f [x%.2f] the 4 "
		    "statements  (its %d tally assign, one a slice: %.2f s)\n",
		    tfull > 0 ?
		    c->secs / tfull : 0, mfull > 0 ? med / mfull : 0,
		    tmin > 0 ? c->secs / tmin : 0, mmin > 0 ? med / mmin : 0,
		    c->nslice, c->cli);
		{
			char what[96];

			snprintf(what, sizeof(what), "provision: %s / the 4 "
			    "statements", c->name);
			tl_bench_target(what, "<= x1.25", tmin > 0 &&
			    c->secs / tmin <= 1.25, "x%.2f", tmin > 0 ?
			    c->secs / tmin : 0);
		}
	}
	printf("  target: tally <= x1.25 the direct statements\n");
	fflush(stdout);

	if (lw >= 0) {
		double over[MAXSAMPLES], mine[MAXSAMPLES];

		latency_run(&cs[lw], &lat);
		printf("\none more grant with %d provisioned, tallyd --workers %d "
		    "idle (%d samples)\n", lat.base, cs[lw].workers, lat.n);
		if (lat.failed)
			printf("  FAILED (see stderr)\n");
		else {
			for (i = 0; i < lat.n; i++) {
				over[i] = lat.e2e[i] - lat.own[i];
				mine[i] = lat.e2e[i] - lat.drv[i];
			}
			printf("  request -> delivered:           ");
			tl_bench_print_list(lat.e2e, lat.n);
			printf(" ms (median %.0f)\n",
			    tl_bench_median(lat.e2e, lat.n));
			printf("  its CREATE DATABASE (server):   ");
			tl_bench_print_list(lat.own, lat.n);
			printf(" ms (median %.0f)\n",
			    tl_bench_median(lat.own, lat.n));
			printf("  the whole driver call (tallyd): ");
			tl_bench_print_list(lat.drv, lat.n);
			printf(" ms (median %.0f)\n",
			    tl_bench_median(lat.drv, lat.n));
			printf("  request -> delivered less its CREATE DATABASE: ");
			tl_bench_print_list(over, lat.n);
			printf(" ms (median %.0f; target < 100 ms)\n",
			    tl_bench_median(over, lat.n));
			tl_bench_target("provision: request -> delivered less "
			    "its CREATE DATABASE", "< 100 ms",
			    tl_bench_median(over, lat.n) < 100, "%.0f ms median",
			    tl_bench_median(over, lat.n));
			printf("  less the whole driver call (tally's own part): ");
			tl_bench_print_list(mine, lat.n);
			printf(" ms (median %.0f)\n",
			    tl_bench_median(mine, lat.n));
		}
	}

	for (i = 0; i < ncs; i++)
		if (cs[i].kind == C_TALLY && cs[i].hwm > hwm)
			hwm = cs[i].hwm;
	tl_bench_target("provision: tallyd peak RSS", "< 32 MiB",
	    hwm < 32 * 1024, "%.1f MiB", (double)hwm / 1024);
	printf("\ntallyd peak RSS (VmHWM), highest of the runs: %.1f MiB "
	    "(target < 32 MiB):", (double)hwm / 1024);
	for (i = 0; i < ncs; i++)
		if (cs[i].kind == C_TALLY && !cs[i].failed)
			printf(" --workers %d %.1f MiB%s", cs[i].workers,
			    (double)cs[i].hwm / 1024, i == lw ?
			    " (after the latency run)" : "");
	printf("\n");
	fflush(stdout);
	cleanup();
	/* What did run is printed; a failed contender still fails the run. */
	for (i = 0; i < ncs; i++) {
		bad |= cs[i].failed;
		free(cs[i].cdb);
	}
	bad |= lw >= 0 && lat.failed;
	tl_test_tmpdir_done(scratch);
	return bad ? 1 : 0;
}
