/*
 * bench_tls.c - what verified TLS costs: the same PostgreSQL grants
 * provisioned and verified through tally with tls=verify against
 * tls=off, in one run, on one throwaway server (tests/harness/pg.sh,
 * which offers TLS on its one port with the harness's CA).  Prints
 * figures; exits 1 when the set-up or a contender fails.
 *
 * Two homes, the same postgres provider on the same server:
 *
 *   off      host 127.0.0.1, tls=off: plaintext
 *   verify   host localhost, tls=verify, ca=the harness CA: every admin
 *            session and every consumer login a verified TLS session
 *
 * Provisioning: BENCH_TLS_GRANTS (40) grants per home, in
 * BENCH_TLS_ROUNDS (4) slices, the homes taking turns (the order
 * swapped every round: CREATE DATABASE swings with other disk traffic,
 * so both see the same machine); a slice is assigned untimed, then one
 * tallyd --once provisions and delivers it, timed.
 *
 * Verification: passes in this process (tl_rx_verify, as tally check
 * does; CPU by getrusage, what tallyd's would be), forced over every
 * grant of a home, the homes taking turns; bulk: the mean of 30 passes,
 * one whole cycle of the login sample (each grant logs in once, on both
 * sides), with a login per grant: the median of BENCH_TLS_REPS (3):
 *   bulk      the verifier's steady state: one catalogue query per
 *             provider, a consumer login for the default sample (1 in
 *             30): one admin session for the pass, reused
 *   login     a consumer login per grant (tally check --all): a TLS
 *             handshake per grant under verify
 *
 * The verify home's server is first as the harness starts it: its
 * pg_hba.conf lets every role log in without TLS too, which the check
 * reports (a plaintext warning) and, while the warning stands, asks
 * again at each login it makes, by a plaintext probe; the bulk passes
 * are measured so ("warning standing").  Then the bench does the
 * operator's one-time set-up the warning names (docs/manifest.md): a
 * 'hostnossl all ROLE all reject' line for each login of the verify
 * home, and a reload; one pass with a login per grant clears the
 * warnings, and every pass after is measured on the server set up as
 * tls=verify asks (the probe is then asked once an hour).
 *
 * Target (issue 24): bulk verification under tls=verify, on the server
 * set up, within x1.2 of tls=off, wall time per pass.  Provisioning,
 * the per-login pass and the bulk pass with the warning standing are
 * shown beside it, without a target.
 *
 * Env: TALLY_BIN, TALLY_SRC, TALLY_TMP (as make bench sets them);
 * BENCH_TLS_GRANTS, BENCH_TLS_ROUNDS, BENCH_TLS_REPS.
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sodium.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "reactors/mesh.h"
#include "reactors/rx.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME	"bench_tls"
#define MAXREPS	9
/*
 * Bulk passes per measurement: one whole cycle of the login sample (a
 * grant logs in on every CYCLE-th check of it), so each grant is logged
 * into exactly once in each home, the same work on both sides.
 */
#define CYCLE	30

enum { OFF = 0, VERIFY = 1, NHOMES };
static const char *const mode_name[NHOMES] = { "off", "verify" };

static const char *bin, *src;
static char *scratch, pgdir[4200], pgport[16], pguser[64], pwfile[4300],
    cafile[4300], clilog[4300], dlog[4300];
static char home[NHOMES][4300];
static int started;

static void
cleanup(void)
{
	if (started) {
		tl_bench_harness(src, "pg.sh", "stop", pgdir, NULL);
		started = 0;
	}
}

/* VALUE of "export NAME=VALUE" in pg.sh's env file, unquoted. */
static int
env_get(const char *name, char *out, size_t cap)
{
	char path[4300], line[4400];
	size_t nl = strlen(name);
	FILE *fp;
	int found = 0;

	snprintf(path, sizeof(path), "%s/env", pgdir);
	if ((fp = fopen(path, "r")) == NULL)
		return -1;
	while (!found && fgets(line, sizeof(line), fp) != NULL) {
		char *v;
		size_t len;

		if (strncmp(line, "export ", 7) != 0 ||
		    strncmp(line + 7, name, nl) != 0 || line[7 + nl] != '=')
			continue;
		v = line + 8 + nl;
		v[strcspn(v, "\n")] = '\0';
		len = strlen(v);
		if (len >= 2 && v[0] == '\'' && v[len - 1] == '\'') {
			v[len - 1] = '\0';
			v++;
		}
		snprintf(out, cap, "%s", v);
		found = 1;
	}
	fclose(fp);
	return found ? 0 : -1;
}

/* A home with the postgres provider reached as mode says, n consumers. */
static int
setup(int mode, int n)
{
	char mf[4400], key[4400], sport[32], suser[128], sca[4400];
	const char *h = home[mode];
	FILE *fp;
	int i;

	snprintf(key, sizeof(key), "%s/node-a.%s.key", scratch,
	    mode_name[mode]);
	snprintf(mf, sizeof(mf), "%s/%s-consumers.yaml", scratch,
	    mode_name[mode]);
	if ((fp = fopen(mf, "w")) == NULL)
		return -1;
	for (i = 1; i <= n; i++)
		fprintf(fp, "---\nmodule: c%04d\n"
		    "env: {DB_USER: \"\", DB_PASSWORD: \"\"}\n"
		    "requires:\n  db:\n    type: postgres-database\n"
		    "    from: postgres\n    env: {user: DB_USER, "
		    "password: DB_PASSWORD}\n", i);
	if (fclose(fp) != 0)
		return -1;
	snprintf(sport, sizeof(sport), "port=%s", pgport);
	snprintf(suser, sizeof(suser), "admin-user=%s", pguser);
	snprintf(sca, sizeof(sca), "ca=%s", cafile);
	if (tl_bench_tally(bin, h, NULL, clilog, "init", NULL) != 0 ||
	    tl_bench_tally(bin, h, NULL, clilog, "node", "add", "node-a",
	    "--routable-name", mode == VERIFY ? "localhost" : "127.0.0.1",
	    "--key-out", key, NULL) != 0)
		return -1;
	{
		char *p = tl_test_path(src, "examples/postgres.yaml");
		int rc = tl_bench_tally(bin, h, NULL, clilog, "apply", p, mf,
		    NULL);

		free(p);
		if (rc != 0)
			return -1;
	}
	if (mode == VERIFY)
		return tl_bench_tally(bin, h, pwfile, clilog, "assign",
		    "postgres", "node-a", "--set", "host=localhost", "--set",
		    sport, "--set", suser, "--set", "tls=verify", "--set", sca,
		    "--secret", "admin-password", NULL);
	return tl_bench_tally(bin, h, pwfile, clilog, "assign", "postgres",
	    "node-a", "--set", "host=127.0.0.1", "--set", sport, "--set",
	    suser, "--set", "tls=off", "--secret", "admin-password", NULL);
}

/* Assigns consumers [first, last] of mode's home, then times --once. */
static double
slice(int mode, int first, int last)
{
	char path[4400], m[16], *argv[] = { NULL, "--once", "--once-timeout",
	    "600", NULL };
	double t0;
	int i;

	for (i = first; i <= last; i++) {
		snprintf(m, sizeof(m), "c%04d", i);
		if (tl_bench_tally(bin, home[mode], NULL, clilog, "assign", m,
		    "node-a", NULL) != 0)
			return -1;
	}
	snprintf(path, sizeof(path), "%s/tallyd", bin);
	argv[0] = path;
	t0 = tl_bench_now();
	if (tl_bench_run(home[mode], NULL, dlog, NULL, argv) != 0)
		return -1;
	return tl_bench_now() - t0;
}

static double
self_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* One forced pass over mode's home: wall seconds, *cpu, -1 on failure. */
static double
verify_pass(int mode, int login_all, double *cpu, unsigned *checked)
{
	char logdir[4400], path[4400], why[TL_WHY_MAX] = "";
	struct tl_rx rx;
	struct tl_rx_verify_opts o;
	unsigned bad = 0;
	uint64_t next;
	double t = -1, c;
	int rc;

	tl_rx_init(&rx);
	rx.actor = "bench";
	snprintf(rx.home, sizeof(rx.home), "%s", home[mode]);
	snprintf(logdir, sizeof(logdir), "%s/log", home[mode]);
	snprintf(path, sizeof(path), "%s/master.key", home[mode]);
	if ((rc = tl_log_open(logdir, 0, &rx.log)) != 0 ||
	    (rc = tl_mesh_load(rx.log, rx.mesh)) != 0 ||
	    (rc = tl_secret_load(path, &rx.key, why)) != 0) {
		fprintf(stderr, ME ": cannot open the %s home: %s %s\n",
		    mode_name[mode], tl_strerror(rc), why);
		goto out;
	}
	memset(&o, 0, sizeof(o));
	o.force = 1;
	o.interval_ns = 30000000000u;
	o.login_all = login_all;
	o.login_every = CYCLE;
	c = self_cpu();
	t = tl_bench_now();
	rc = tl_rx_verify(&rx, &o, checked, &bad, &next);
	t = tl_bench_now() - t;
	*cpu = self_cpu() - c;
	if (rc != 0 || bad != 0) {
		fprintf(stderr, ME ": %s pass: %s, %u bad\n", mode_name[mode],
		    tl_strerror(rc), bad);
		t = -1;
	}
out:
	tl_rx_free(&rx);
	if (rx.log != NULL)
		tl_log_close(rx.log);
	return t;
}

/*
 * The operator's set-up for the verify home (the line its plaintext
 * warning names, for each of its logins): 0, or -1 said on stderr.
 */
static int
hold_to_tls(void)
{
	char ci[600], pw[256] = "", mesh[33], q[400], hba[4200], *old = NULL;
	PGresult *r = NULL;
	PGconn *c = NULL;
	FILE *fp = NULL;
	long len;
	int i, rc = -1;

	{
		char logdir[4400];
		struct tl_log *lg = NULL;

		snprintf(logdir, sizeof(logdir), "%s/log", home[VERIFY]);
		if (tl_log_open(logdir, 0, &lg) != 0 ||
		    tl_mesh_load(lg, mesh) != 0 || mesh[0] == '\0') {
			if (lg != NULL)
				tl_log_close(lg);
			fprintf(stderr, ME ": no mesh id in %s\n", logdir);
			return -1;
		}
		tl_log_close(lg);
	}
	if ((fp = fopen(pwfile, "r")) == NULL ||
	    fgets(pw, sizeof(pw), fp) == NULL) {
		fprintf(stderr, ME ": cannot read %s\n", pwfile);
		goto out;
	}
	fclose(fp);
	fp = NULL;
	pw[strcspn(pw, "\n")] = '\0';
	snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%s user=%s "
	    "dbname=postgres sslmode=disable password=%s", pgport, pguser, pw);
	sodium_memzero(pw, sizeof(pw));
	c = PQconnectdb(ci);
	sodium_memzero(ci, sizeof(ci));
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, ME ": admin connection: %s", PQerrorMessage(c));
		goto out;
	}
	r = PQexec(c, "SHOW hba_file");
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		fprintf(stderr, ME ": SHOW hba_file: %s",
		    PQresultErrorMessage(r));
		goto out;
	}
	snprintf(hba, sizeof(hba), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if ((fp = fopen(hba, "r")) == NULL || fseek(fp, 0, SEEK_END) != 0 ||
	    (len = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0 ||
	    (old = calloc(1, (size_t)len + 1)) == NULL ||
	    fread(old, 1, (size_t)len, fp) != (size_t)len) {
		fprintf(stderr, ME ": cannot read %s\n", hba);
		r = NULL;
		goto out;
	}
	fclose(fp);
	/* The verify home's logins: their mark names its mesh. */
	snprintf(q, sizeof(q), "SELECT rolname FROM pg_roles WHERE "
	    "rolcanlogin AND shobj_description(oid, 'pg_authid') LIKE "
	    "'%%of mesh %s%%' ORDER BY 1", mesh);
	r = PQexec(c, q);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) == 0) {
		fprintf(stderr, ME ": no login of the verify home: %s",
		    PQresultErrorMessage(r));
		fp = NULL;
		goto out;
	}
	if ((fp = fopen(hba, "w")) == NULL) {
		fprintf(stderr, ME ": cannot write %s\n", hba);
		goto out;
	}
	for (i = 0; i < PQntuples(r); i++)
		fprintf(fp, "hostnossl all \"%s\" all reject\n",
		    PQgetvalue(r, i, 0));
	fputs(old, fp);
	if (fclose(fp) != 0) {
		fp = NULL;
		fprintf(stderr, ME ": cannot write %s\n", hba);
		goto out;
	}
	fp = NULL;
	printf("  the verify home's server set up: %d 'hostnossl all ROLE "
	    "all reject' lines\n", PQntuples(r));
	rc = tl_bench_pg_exec(c, ME, "SELECT pg_reload_conf()");
out:
	if (fp != NULL)
		fclose(fp);
	PQclear(r);
	PQfinish(c);
	free(old);
	return rc;
}

static double
mean(const double *v, int n)
{
	double s = 0;
	int i;

	for (i = 0; i < n; i++)
		s += v[i];
	return s / n;
}

/*
 * reps passes of each home (the order swapped every rep), as login_all
 * says: wall and CPU of each in wall[k][r], cpu[k][r]; 0, or -1 when a
 * pass failed.
 */
static int
passes(int reps, int login_all, double wall[NHOMES][CYCLE],
    double cpu[NHOMES][CYCLE], unsigned checked[NHOMES])
{
	int r, k, failed = 0;

	for (r = 0; r < reps; r++)
		for (k = 0; k < NHOMES; k++) {
			int mode = (r + k) % NHOMES;
			double t = verify_pass(mode, login_all, &cpu[mode][r],
			    &checked[mode]);

			if (t < 0)
				failed = 1;
			wall[mode][r] = t;
		}
	return failed ? -1 : 0;
}

int
main(void)
{
	/* [0] bulk, [1] a login per grant, [2] bulk, warning standing */
	double prov[NHOMES] = { 0, 0 }, wall[3][NHOMES][CYCLE],
	    cpu[3][NHOMES][CYCLE], med[3][NHOMES], cmed[3][NHOMES];
	unsigned checked[NHOMES] = { 0, 0 };
	int n, rounds, reps, per, r, k, m, failed = 0;
	char port[16];

	if (sodium_init() < 0)
		return 1;
	tl_bench_dirs(&src, &bin);
	n = tl_bench_envint("BENCH_TLS_GRANTS", 40, 2, 2000);
	rounds = tl_bench_envint("BENCH_TLS_ROUNDS", 4, 1, 50);
	reps = tl_bench_envint("BENCH_TLS_REPS", 3, 1, MAXREPS);
	if (rounds > n)
		rounds = n;
	per = (n + rounds - 1) / rounds;
	scratch = tl_test_tmpdir("bench_tls");
	snprintf(pgdir, sizeof(pgdir), "%s/pg", scratch);
	snprintf(home[OFF], sizeof(home[OFF]), "%s/home-off", scratch);
	snprintf(home[VERIFY], sizeof(home[VERIFY]), "%s/home-verify",
	    scratch);
	snprintf(clilog, sizeof(clilog), "%s/cli.log", scratch);
	snprintf(dlog, sizeof(dlog), "%s/tallyd.log", scratch);
	tl_bench_atexit(cleanup);
	if (tl_bench_pg_start(src, pgdir, 39100 + (int)(getpid() % 300) * 3,
	    port, sizeof(port)) != 0) {
		fprintf(stderr, ME ": PostgreSQL could not be started\n");
		return 1;
	}
	started = 1;
	if (env_get("TALLY_TEST_PG_PORT", pgport, sizeof(pgport)) != 0 ||
	    env_get("TALLY_TEST_PG_USER", pguser, sizeof(pguser)) != 0 ||
	    env_get("TALLY_TEST_PG_PWFILE", pwfile, sizeof(pwfile)) != 0 ||
	    env_get("TALLY_TEST_PG_CA", cafile, sizeof(cafile)) != 0) {
		fprintf(stderr, ME ": cannot read %s/env\n", pgdir);
		return 1;
	}
	printf(ME ": %d PostgreSQL grants per home, tls=off against "
	    "tls=verify, on one throwaway server (port %s); tally from %s\n",
	    n, pgport, bin);
	fflush(stdout);
	if (setup(OFF, n) != 0 || setup(VERIFY, n) != 0) {
		fprintf(stderr, ME ": set-up failed (see %s)\n", clilog);
		return 1;
	}

	for (r = 0; r < rounds; r++) {
		int first = r * per + 1, last = (r + 1) * per;

		if (last > n)
			last = n;
		if (first > last)
			break;
		for (k = 0; k < NHOMES; k++) {
			int mode = (r + k) % NHOMES;
			double t = slice(mode, first, last);

			if (t < 0) {
				fprintf(stderr, ME ": %s: tallyd --once failed "
				    "(see %s, %s)\n", mode_name[mode], clilog,
				    dlog);
				return 1;
			}
			prov[mode] += t;
		}
	}
	for (k = 0; k < NHOMES; k++)
		if (tl_bench_delivered(home[k], NULL) < n) {
			fprintf(stderr, ME ": %s: not every grant delivered "
			    "(see %s)\n", mode_name[k], dlog);
			return 1;
		}
	printf("\nprovisioning %d grants (tallyd --once, %d slices)   total   "
	    "per grant\n", n, rounds);
	for (k = 0; k < NHOMES; k++)
		printf("  tls=%-6s                          %8.1f ms %7.2f ms%s\n",
		    mode_name[k], prov[k] * 1000, prov[k] * 1000 / n,
		    k == VERIFY ? "" : "");
	printf("  verify / off: x%.2f\n", prov[VERIFY] / prov[OFF]);

	/* The first pass of each home is the SCRAM cache's cold one. */
	for (k = 0; k < NHOMES; k++) {
		double c;
		unsigned ck;

		if (verify_pass(k, 0, &c, &ck) < 0)
			return 1;
	}
	/* The server as the harness starts it: the warning standing. */
	if (passes(CYCLE, 0, wall[2], cpu[2], checked) != 0)
		failed = 1;
	if (hold_to_tls() != 0)
		return 1;
	/* One login per grant asks each whether it is held now. */
	{
		double c;
		unsigned ck;

		if (verify_pass(VERIFY, 1, &c, &ck) < 0)
			return 1;
	}
	for (m = 0; m < 2; m++)
		if (passes(m == 0 ? CYCLE : reps, m, wall[m], cpu[m],
		    checked) != 0)
			failed = 1;
	for (m = 0; m < 3; m++)
		for (k = 0; k < NHOMES; k++) {
			med[m][k] = m == 1 ? tl_bench_median(wall[m][k], reps) :
			    mean(wall[m][k], CYCLE);
			cmed[m][k] = m == 1 ? tl_bench_median(cpu[m][k], reps) :
			    mean(cpu[m][k], CYCLE);
		}
	printf("\nverification: forced passes in this process (tallyd's "
	    "code); bulk: the mean of %d passes (a whole cycle of the login "
	    "sample),\na login per grant: the median of %d\n", CYCLE, reps);
	printf("  %-40s %8s %10s %10s %12s\n", "", "checked", "wall", "CPU",
	    "wall / grant");
	for (m = 0; m < 3; m++)
		for (k = 0; k < NHOMES; k++) {
			static const char *const what[3] = {
			    "bulk, default sample",
			    "a consumer login per grant",
			    "bulk, warning standing" };

			if (m == 2 && k == OFF)
				continue;	/* off has no warning */
			printf("  %-33s %-6s %8u %7.1f ms %7.1f ms %9.3f ms\n",
			    what[m], mode_name[k], checked[k],
			    med[m][k] * 1000, cmed[m][k] * 1000,
			    checked[k] ? med[m][k] * 1000 / checked[k] : 0);
		}
	printf("  verify / off: bulk x%.2f (CPU x%.2f), a login per grant "
	    "x%.2f (CPU x%.2f);\n  bulk with the plaintext warning standing "
	    "(a probe at each sampled login) x%.2f\n",
	    med[0][VERIFY] / med[0][OFF], cmed[0][VERIFY] / cmed[0][OFF],
	    med[1][VERIFY] / med[1][OFF], cmed[1][VERIFY] / cmed[1][OFF],
	    med[2][VERIFY] / med[0][OFF]);
	tl_bench_target("tls: bulk verification, tls=verify / tls=off",
	    "<= x1.2", !failed && med[0][VERIFY] <= 1.2 * med[0][OFF],
	    "x%.2f", med[0][VERIFY] / med[0][OFF]);
	fflush(stdout);
	return failed;
}
