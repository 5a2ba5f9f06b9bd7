/*
 * bench_mariadb.c - MariaDB grants through tally against the same SQL
 * issued directly, in the same run, on the same throwaway server
 * (tests/harness/mariadb.sh).  Prints figures; never asserts.
 *
 *   direct, the driver's SQL   one libmariadb connection issuing, per
 *                              grant, what drivers/mariadb.c issues for
 *                              a new one, in its order: the marks and
 *                              existence lookups, the two marks, CREATE
 *                              DATABASE, CREATE USER and ALTER USER with
 *                              the password's hash, the other-host
 *                              lookup, GRANT, the lookup of what the
 *                              user holds beyond it, ACCOUNT UNLOCK
 *   tally --workers W          one tally assign of the slice's modules
 *                              (one CLI process, one transaction: how
 *                              an operator places a batch) with tallyd
 *                              running as a daemon; a slice ends when
 *                              the last of its
 *                              grants is delivered: its
 *                              credential.delivered event (the credential
 *                              sealed to the node) committed in the log,
 *                              polled every 2 ms (the control plane
 *                              writes no env file; a node's agent does)
 *
 * In rounds, the two taking turns (the machine is shared).  Then the
 * same number of requests already in the log of a second home when
 * tallyd starts (tally's pipeline without a CLI process per grant).  And a
 * forced verification pass over the grants in this process
 * (tl_rx_verify, as tally check --all runs it: its CPU is what tallyd
 * spends on the same pass), without sample logins and with the default
 * sample (the first pass logs in with every credential, as the verifier
 * does once per new credential): driver calls, the statements the server counted (Questions,
 * less this program's own two), wall time and CPU per grant.
 *
 * Env: TALLY_BIN, TALLY_SRC, TALLY_TMP (as make bench sets them);
 * BENCH_MDB_GRANTS (100), BENCH_MDB_ROUNDS (5), BENCH_MDB_WORKERS (4).
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <mysql.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "drivers/mariadb-internal.h"
#include "reactors/mesh.h"
#include "reactors/rx-internal.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME	"bench_mariadb"

static const char *bin, *src;
static char *scratch, sdir[4200], home[4200], clilog[4300], dlog[4300];
static char port[16], user[64], pw[256], pwfile[4200];
static int started;
static pid_t dpid = -1;
static MYSQL *conn;

static void
cleanup(void)
{
	tl_bench_tallyd_stop(&dpid);
	if (conn != NULL)
		mysql_close(conn);
	conn = NULL;
	if (started)
		tl_bench_harness(src, "mariadb.sh", "stop", sdir, NULL);
	started = 0;
}

static int
execf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
execf(const char *fmt, ...)
{
	char sql[2048];
	va_list ap;
	MYSQL_RES *r;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	if (mysql_query(conn, sql) != 0) {
		fprintf(stderr, ME ": %.80s: %s\n", sql, mysql_error(conn));
		return -1;
	}
	if ((r = mysql_store_result(conn)) != NULL)
		mysql_free_result(r);
	return 0;
}

static long
questions(void)
{
	MYSQL_RES *r;
	MYSQL_ROW row;
	long q = -1;

	if (mysql_query(conn, "SHOW GLOBAL STATUS LIKE 'Questions'") != 0 ||
	    (r = mysql_store_result(conn)) == NULL)
		return -1;
	if ((row = mysql_fetch_row(r)) != NULL && row[1] != NULL)
		q = atol(row[1]);
	mysql_free_result(r);
	return q;
}

static int
server_start(void)
{
	unsigned proto = MYSQL_PROTOCOL_TCP;
	FILE *fp;
	int p, tries;

	snprintf(sdir, sizeof(sdir), "%s/mariadb", scratch);
	p = 57700 + (int)(getpid() % 200);
	for (tries = 0; tries < 30; tries++, p++) {
		if (!tl_test_port_free(p))
			continue;
		snprintf(port, sizeof(port), "%d", p);
		if (tl_bench_harness(src, "mariadb.sh", "start", sdir,
		    port) == 0)
			break;
	}
	if (tries == 30)
		return -1;
	started = 1;
	if (tl_test_env_get(sdir, "TALLY_TEST_MARIADB_USER", user,
	    sizeof(user)) != 0 || tl_test_env_get(sdir,
	    "TALLY_TEST_MARIADB_PWFILE", pwfile, sizeof(pwfile)) != 0 ||
	    (fp = fopen(pwfile, "r")) == NULL)
		return -1;
	if (fgets(pw, sizeof(pw), fp) == NULL)
		pw[0] = '\0';
	fclose(fp);
	pw[strcspn(pw, "\r\n")] = '\0';
	conn = mysql_init(NULL);
	mysql_options(conn, MYSQL_OPT_PROTOCOL, &proto);
	if (mysql_real_connect(conn, "127.0.0.1", user, pw, NULL,
	    (unsigned)atoi(port), NULL, 0) == NULL) {
		fprintf(stderr, ME ": connect: %s\n", mysql_error(conn));
		return -1;
	}
	/* tally's own database, as the driver makes it on first use. */
	return execf("CREATE DATABASE IF NOT EXISTS tally") ||
	    execf("CREATE TABLE IF NOT EXISTS tally.marks (kind CHAR(1) NOT "
	    "NULL, name VARCHAR(80) NOT NULL, grant_id VARCHAR(255) NOT NULL, "
	    "PRIMARY KEY (kind, name)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
	    "COLLATE=utf8mb4_bin") ? -1 : 0;
}

/* What drivers/mariadb.c sends for a new grant (mdb_create). */
static int
direct_one(int i)
{
	char db[64], pat[80], u[80], hash[42], pwd[TL_PASSWORD_MAX + 1];
	int k;

	snprintf(db, sizeof(db), "direct-%04d_0123456789abcdef", i);
	snprintf(pat, sizeof(pat), "direct-%04d\\\\_0123456789abcdef", i);
	snprintf(u, sizeof(u), "%s_v1", db);
	tl_secret_password(pwd);
	tl_drv_mdb_hash(pwd, hash);
	tl_secret_wipe(pwd, sizeof(pwd));
	for (k = 0; k < 2; k++) {
		const char *name = k == 0 ? db : u;

		if (execf("SELECT grant_id FROM tally.marks WHERE kind = '%c' "
		    "AND name = '%s'", k == 0 ? 'd' : 'u', name) ||
		    (k == 0 ? execf("SELECT 1 FROM information_schema.SCHEMATA "
		    "WHERE SCHEMA_NAME = '%s'", name) : execf("SELECT 1 FROM "
		    "mysql.global_priv WHERE User = '%s' AND Host = '%%'",
		    name)) ||
		    execf("INSERT INTO tally.marks (kind, name, grant_id) VALUES "
		    "('%c', '%s', 'bench/%04d') ON DUPLICATE KEY UPDATE grant_id "
		    "= VALUES(grant_id)", k == 0 ? 'd' : 'u', name, i))
			return -1;
	}
	return execf("CREATE DATABASE IF NOT EXISTS `%s` CHARACTER SET utf8mb4",
	    db) ||
	    execf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED VIA "
	    "mysql_native_password USING '%s'", u, hash) ||
	    execf("ALTER USER '%s'@'%%' IDENTIFIED VIA mysql_native_password "
	    "USING '%s' ACCOUNT UNLOCK", u, hash) ||
	    execf("SELECT Host FROM mysql.global_priv WHERE User = '%s' AND "
	    "Host <> '%%'", u) ||
	    execf("GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'%%'", pat, u) ||
	    execf("SELECT 'g', '', '', '', 0 FROM mysql.global_priv WHERE "
	    "User = '%s' AND Host = '%%' AND COALESCE(JSON_VALUE(Priv, "
	    "'$.access'), 0) <> 0 UNION ALL SELECT 'd', Db, '', '', Db = '%s' "
	    "FROM mysql.db WHERE User = '%s' AND Host = '%%' AND (Db <> '%s' "
	    "OR Grant_priv = 'Y' OR 0) UNION ALL SELECT 't', Db, Table_name, "
	    "'', 0 FROM mysql.tables_priv WHERE User = '%s' AND Host = '%%' "
	    "UNION ALL SELECT 'r', Db, Routine_name, Routine_type, 0 FROM "
	    "mysql.procs_priv WHERE User = '%s' AND Host = '%%'", u, pat, u,
	    pat, u, u) ||
	    execf("ALTER USER '%s'@'%%' ACCOUNT UNLOCK", u) ? -1 : 0;
}

/* A home with the provider and modules PFX0001..; tallyd if start. */
static int
tally_setup(int n, int workers, char pfx, int start)
{
	char mf[4400], pmf[4400], set1[64], set2[128], w[16], key[4400];
	FILE *fp;
	int i;

	/* The node's key, outside the home (tally node add refuses it). */
	snprintf(key, sizeof(key), "%s/node-a.%c.key", scratch, pfx);
	snprintf(mf, sizeof(mf), "%s/consumers.yaml", scratch);
	snprintf(pmf, sizeof(pmf), "%s/provider.yaml", scratch);
	if ((fp = fopen(pmf, "w")) == NULL)
		return -1;
	fprintf(fp, "module: mariadb\nprovides:\n  mariadb-database:\n"
	    "    driver: mariadb\n    revoke: retain\n");
	fclose(fp);
	if ((fp = fopen(mf, "w")) == NULL)
		return -1;
	for (i = 1; i <= n; i++)
		fprintf(fp, "---\nmodule: %c%04d\nenv: {DB_NAME: \"\", DB_USER: "
		    "\"\", DB_PASSWORD: \"\"}\nrequires:\n  db:\n    type: "
		    "mariadb-database\n    from: mariadb\n    env: {database: "
		    "DB_NAME, user: DB_USER, password: DB_PASSWORD}\n", pfx, i);
	fclose(fp);
	snprintf(set1, sizeof(set1), "port=%s", port);
	snprintf(set2, sizeof(set2), "admin-user=%s", user);
	snprintf(w, sizeof(w), "%d", workers);
	if (tl_bench_tally(bin, home, NULL, clilog, "init", NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "node", "add", "node-a",
	    "--routable-name=127.0.0.1", "--key-out", key, NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "apply", pmf, mf,
	    NULL) != 0 ||
	    tl_bench_tally(bin, home, pwfile, clilog, "assign", "mariadb",
	    "node-a", "--set", set1, "--set", set2, "--secret",
	    "admin-password", NULL) != 0)
		return -1;
	if (!start)
		return 0;
	dpid = tl_bench_tallyd_start(bin, home, dlog, "--workers", w, NULL);
	return dpid > 0 ? 0 : -1;
}

static double
self_cpu(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void
verify_section(int n)
{
	static const char *const what[3] = { "first pass (each new credential "
	    "logs in)", "bulk, no sample login", "bulk, default sample (1 in "
	    "30)" };
	struct tl_rx rx;
	char logdir[4300], path[4300], why[TL_WHY_MAX] = "";
	int i, rc;

	tl_rx_init(&rx);
	rx.actor = "bench";
	snprintf(rx.home, sizeof(rx.home), "%.1000s", home);
	snprintf(logdir, sizeof(logdir), "%s/log", home);
	snprintf(path, sizeof(path), "%s/master.key", home);
	/* The home's mesh: the drivers refuse another mesh's objects. */
	if ((rc = tl_log_open(logdir, 0, &rx.log)) != 0 ||
	    (rc = tl_mesh_load(rx.log, rx.mesh)) != 0 ||
	    (rc = tl_secret_load(path, &rx.key, why)) != 0) {
		fprintf(stderr, ME ": cannot open the home: %s %s\n",
		    tl_strerror(rc), why);
		return;
	}
	printf("\na forced verification pass over %d grants (in this "
	    "process, as tally check --all)\n", n);
	printf("  %-40s %7s %5s %6s %9s %8s %8s %11s\n", "", "checked",
	    "bad", "calls", "queries", "wall", "CPU", "CPU/grant");
	for (i = 0; i < 3; i++) {
		struct tl_rx_verify_opts o;
		unsigned checked = 0, bad = 0, calls = 0;
		uint64_t next;
		double t, c;
		long q0, q1;

		memset(&o, 0, sizeof(o));
		o.force = 1;
		o.interval_ns = 30000000000u;
		o.login_every = i == 2 ? 0 : UINT_MAX;
		o.calls = &calls;
		q0 = questions();
		t = tl_bench_now();
		c = self_cpu();
		rc = tl_rx_verify(&rx, &o, &checked, &bad, &next);
		c = self_cpu() - c;
		t = tl_bench_now() - t;
		q1 = questions();
		if (rc != 0)
			fprintf(stderr, ME ": pass: %s\n", tl_strerror(rc));
		printf("  %-40s %7u %5u %6u %9ld %6.0f ms %6.0f ms %8.3f ms\n",
		    what[i], checked, bad, calls, q1 - q0 - 1, t * 1000,
		    c * 1000, checked ? c * 1000 / checked : 0);
	}
	printf("  (calls: driver calls; queries: statements the server "
	    "counted during the pass,\n   including each session's "
	    "set-up and each sample login's own)\n");
	tl_rx_free(&rx);
	tl_log_close(rx.log);
}

int
main(void)
{
	struct tl_bench_dlv dl = { 0 };
	int n, rounds, workers, r, i, k;
	char wn[16];
	double td = 0, tt = 0, tc = 0, t;

	tl_bench_dirs(&src, &bin);
	n = tl_bench_envint("BENCH_MDB_GRANTS", 100, 1, 5000);
	rounds = tl_bench_envint("BENCH_MDB_ROUNDS", 5, 1, n);
	workers = tl_bench_envint("BENCH_MDB_WORKERS", 4, 1, 64);
	snprintf(wn, sizeof(wn), "%d", workers);
	scratch = tl_test_tmpdir("bench_mariadb");
	snprintf(home, sizeof(home), "%s/home", scratch);
	snprintf(clilog, sizeof(clilog), "%s/cli.log", scratch);
	snprintf(dlog, sizeof(dlog), "%s/tallyd.log", scratch);
	tl_bench_atexit(cleanup);
	printf(ME ": %d grants in %d rounds on one throwaway MariaDB; tally "
	    "from %s\n", n, rounds, bin);
	fflush(stdout);
	if (server_start() != 0 || tally_setup(n, workers, 'c', 1) != 0 ||
	    tl_bench_dlv_open(&dl, home) != 0) {
		fprintf(stderr, ME ": set-up failed (see %s)\n", scratch);
		return 1;
	}
	for (r = 0; r < rounds; r++) {
		int first = n * r / rounds + 1, last = n * (r + 1) / rounds;

		t = tl_bench_now();
		for (i = first; i <= last; i++)
			if (direct_one(i) != 0) {
				fprintf(stderr, ME ": direct grant %d failed\n",
				    i);
				return 1;
			}
		td += tl_bench_now() - t;
		t = tl_bench_now();
		if (tl_bench_assign_batch(bin, home, clilog, "c", first, last,
		    "node-a") != 0) {
			fprintf(stderr, ME ": tally assign c%04d..c%04d "
			    "failed\n", first, last);
			return 1;
		}
		tc += tl_bench_now() - t;
		while ((k = tl_bench_dlv_count(&dl, NULL)) < last) {
			if (k < 0 || tl_bench_now() - t > 600 ||
			    waitpid(dpid, NULL, WNOHANG) == dpid) {
				fprintf(stderr, ME ": %d of %d delivered (see "
				    "%s)\n", k, last, dlog);
				return 1;
			}
			tl_bench_msleep(2);
		}
		tt += tl_bench_now() - t;
	}
	printf("\n%d grants, request -> credential ready (sum of the slices)\n",
	    n);
	printf("  %-28s %7.2f s %6.1f ms/grant\n", "direct, the driver's SQL",
	    td, td * 1000 / n);
	printf("  tally --workers %-12d %7.2f s %6.1f ms/grant  x%.2f the "
	    "direct SQL (target <= x1.5)\n", workers, tt, tt * 1000 / n,
	    td > 0 ? tt / td : 0);
	tl_bench_target("mariadb: tally assign -> ready / the direct SQL",
	    "<= x1.5", td > 0 && tt / td <= 1.5, "x%.2f", td > 0 ? tt / td : 0);
	printf("  (of which its %d tally assign processes, one a slice of "
	    "%d: %.2f s, %.1f ms each)\n", rounds, n / rounds, tc,
	    tc * 1000 / rounds);
	fflush(stdout);
	tl_bench_tallyd_stop(&dpid);
	tl_bench_dlv_close(&dl);	/* verify_section opens this log */
	verify_section(n);
	fflush(stdout);

	/*
	 * The same requests already in the log (another home, modules
	 * b0001..): tallyd started, until every one is delivered.  No
	 * CLI process per grant: tally's own pipeline against the SQL.
	 */
	snprintf(home, sizeof(home), "%s/home2", scratch);
	if (tally_setup(n, workers, 'b', 0) != 0) {
		fprintf(stderr, ME ": backlog set-up failed (see %s)\n",
		    clilog);
		return 1;
	}
	for (i = 1; i <= n; i++) {
		char m[16];

		snprintf(m, sizeof(m), "b%04d", i);
		if (tl_bench_tally(bin, home, NULL, clilog, "assign", m,
		    "node-a", NULL) != 0)
			return 1;
	}
	if (tl_bench_dlv_open(&dl, home) != 0)
		return 1;
	t = tl_bench_now();
	if ((dpid = tl_bench_tallyd_start(bin, home, dlog, "--workers", wn,
	    NULL)) <= 0)
		return 1;
	while ((k = tl_bench_dlv_count(&dl, NULL)) < n) {
		if (k < 0 || tl_bench_now() - t > 600 ||
		    waitpid(dpid, NULL, WNOHANG) == dpid) {
			fprintf(stderr, ME ": backlog: %d of %d delivered\n",
			    k, n);
			return 1;
		}
		tl_bench_msleep(2);
	}
	t = tl_bench_now() - t;
	tl_bench_dlv_close(&dl);
	printf("\na backlog of %d requests in the log, tallyd --workers %d "
	    "started: all delivered in %.2f s, %.1f ms/grant, x%.2f the direct "
	    "SQL\n", n, workers, t, t * 1000 / n, td > 0 ? t / td : 0);
	fflush(stdout);
	cleanup();
	tl_test_tmpdir_done(scratch);
	return 0;
}
