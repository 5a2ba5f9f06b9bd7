/*
 * bench_verify.c - the verifier over real grants on one real provider.
 * Prints figures; never asserts.
 *
 * One throwaway PostgreSQL (tests/harness/pg.sh), one tally home, the
 * postgres provider and BENCH_VERIFY_GRANTS (300) consumer modules,
 * provisioned by tallyd --once in two steps: first BENCH_VERIFY_SMALL
 * (30), then the rest.  At each size:
 *
 *   tally check --all     a verification pass over every grant, as the
 *                         operator runs it (one process, 4 admin
 *                         sessions: the verifier's default), wall time
 *                         of BENCH_VERIFY_REPS (3) runs, median;
 *   tally check GRANT     one grant, the same process otherwise;
 *
 * so a check's cost is shown three ways: the pass over the grant count,
 * the marginal cost ((all - one) / (n - 1): no process start-up or key
 * loading), and one check alone; and the ratio of each at 300 to 30:
 * the cost of one check must not grow with the number of grants in the
 * log.  Then tallyd --once over 300 (a whole daemon pass: provisioning,
 * migrations, rotations, verification).
 *
 * Detection delay.  Every grant is checked once per interval in its own
 * slot, a hash of its id (reactors/verify.c); the first check comes in
 * the first slot after the daemon sees the grant.  From the ids of the
 * grants here: how the slots spread over the default 30 s interval
 * (largest gap, passes per interval), and the expected delay of a drift
 * at a random moment (interval / 2 on average, the interval at worst).
 * Then for real, with a shorter interval (BENCH_VERIFY_INTERVAL, 4 s),
 * tallyd running as a daemon: BENCH_VERIFY_SAMPLES (8) times, a random
 * grant's password is changed at a random moment (ALTER ROLE as the
 * admin) and the time to its grant.drifted is read from the log, beside
 * the delay its slot predicts; the difference (the pass's own latency)
 * does not scale with the interval, the wait for the slot does: both
 * are scaled to 30 s, saying so.  And the daemon's passes per interval
 * and CPU per check while it verifies 300 grants (beside its CPU idle,
 * with nothing due).
 *
 *
 * Verification at scale (last): the log grows to BENCH_VERIFY_BULK
 * (2000) grants, provisioned by tallyd --once --workers 4, and this
 * process runs the verifier itself (tl_rx_verify, as tally check does,
 * so its CPU is tallyd's for the same pass: getrusage over all its
 * threads), forced over every grant, in one run:
 *   - with a real login per grant (today's check, login_all);
 *   - in bulk, the SCRAM cache cold (the first pass after a start:
 *     each stored verifier recomputed once), with no sample logins;
 *   - in bulk, warm, no sample logins: the steady state;
 *   - in bulk, warm, with the default sample (1 check in 30 logs in);
 * each with its provider calls (a bulk call is one; its SQL is two
 * statements, the catalogue query and the maintenance databases),
 * wall time and CPU per grant.  BENCH_VERIFY_BULK_ONLY=1 skips the
 * sections above (set-up and this only).
 *
 * Env: TALLY_BIN, TALLY_SRC, TALLY_TMP (as make bench sets them);
 * BENCH_VERIFY_GRANTS, BENCH_VERIFY_SMALL, BENCH_VERIFY_REPS,
 * BENCH_VERIFY_INTERVAL, BENCH_VERIFY_SAMPLES, BENCH_VERIFY_BULK,
 * BENCH_VERIFY_BULK_ONLY.
 */
#define _POSIX_C_SOURCE 200809L

#include <libpq-fe.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/envelope.h"
#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "reactors/mesh.h"
#include "reactors/rx-internal.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME		"bench_verify"
#define MAXREPS		16
#define MAXSAMPLES	64
#define DEFAULT_IV	30.0	/* tallyd's --verify-interval default, s */

static const char *bin, *src;
static char *scratch, home[4200], clilog[4200], dlog[4200];
static pid_t dpid = -1;

static double
mean(const double *v, int n)
{
	double s = 0;
	int i;

	for (i = 0; i < n; i++)
		s += v[i];
	return n > 0 ? s / n : 0;
}

static double
maxof(const double *v, int n)
{
	double m = 0;
	int i;

	for (i = 0; i < n; i++)
		if (i == 0 || v[i] > m)
			m = v[i];
	return m;
}

/* --- processes ------------------------------------------------------- */

/* tallyd --once --workers 4; its exit status. */
static int
tallyd_once(void)
{
	char path[4096];
	char *argv[] = { path, "--once", "--once-timeout", "1800",
	    "--workers", "4", NULL };

	snprintf(path, sizeof(path), "%s/tallyd", bin);
	return tl_bench_run(home, NULL, dlog, NULL, argv);
}

/* CPU seconds (user + system) of pid so far; -1 if unknown. */
static double
cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *fp;
	int i;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return -1;
	if (fgets(buf, sizeof(buf), fp) == NULL) {
		fclose(fp);
		return -1;
	}
	fclose(fp);
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	/* after ") ": state is field 3; utime 14, stime 15 */
	for (i = 3, p += 2; i < 14 && p != NULL; i++)
		if ((p = strchr(p, ' ')) != NULL)
			p++;
	if (p == NULL || sscanf(p, "%lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* How many "verified N grant(s)" lines tallyd's log has, and N summed. */
static void
verified_lines(long *passes, long *grants)
{
	char line[2048], *p;
	FILE *fp;

	*passes = *grants = 0;
	if ((fp = fopen(dlog, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), fp) != NULL)
		if ((p = strstr(line, "debug: verified ")) != NULL) {
			(*passes)++;
			*grants += atol(p + 16);
		}
	fclose(fp);
}

/* --- PostgreSQL ------------------------------------------------------ */

static char pgdir[4200], pgport[16], pwfile[4096], pguser[64], pgpw[256];
static int pg_started;
static PGconn *admin;

static int
pg_start(int port)
{
	const char *kw[] = { "host", "port", "user", "password", "dbname",
	    NULL };
	const char *val[] = { "127.0.0.1", pgport, pguser, pgpw, "postgres",
	    NULL };
	FILE *fp;

	snprintf(pgdir, sizeof(pgdir), "%s/pg", scratch);
	if (tl_bench_pg_start(src, pgdir, port, pgport, sizeof(pgport)) != 0) {
		fprintf(stderr, ME ": PostgreSQL could not be started\n");
		return -1;
	}
	pg_started = 1;
	if (tl_test_env_get(pgdir, "TALLY_TEST_PG_USER", pguser, sizeof(pguser)) ||
	    tl_test_env_get(pgdir, "TALLY_TEST_PG_PWFILE", pwfile, sizeof(pwfile)) ||
	    (fp = fopen(pwfile, "r")) == NULL)
		return -1;
	if (fgets(pgpw, sizeof(pgpw), fp) == NULL)
		pgpw[0] = '\0';
	fclose(fp);
	pgpw[strcspn(pgpw, "\r\n")] = '\0';
	admin = PQconnectdbParams(kw, val, 0);
	if (PQstatus(admin) != CONNECTION_OK) {
		fprintf(stderr, ME ": %s", PQerrorMessage(admin));
		return -1;
	}
	return 0;
}

static void
cleanup(void)
{
	tl_bench_tallyd_stop(&dpid);
	if (admin != NULL)
		PQfinish(admin);
	admin = NULL;
	if (pg_started)
		tl_bench_harness(src, "pg.sh", "stop", pgdir, NULL);
	pg_started = 0;
}

/* --- the verifier's schedule (as reactors/verify.c) ------------------ */

static uint64_t
slot_at(const char *grant, uint64_t t, uint64_t interval)
{
	uint64_t h = 1469598103934665603u, ph, r;
	const char *s;

	for (s = grant; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211u;
	ph = h % interval;
	r = t % interval;
	return t + (ph >= r ? ph - r : interval - r + ph);
}

/* --- the log --------------------------------------------------------- */

/*
 * The first event of type on stream after seq 'after', polling up to
 * timeout s: its timestamp (ns) and seq; 0 if none came.
 */
static uint64_t
wait_event(struct tl_log *log, uint64_t after, const char *type,
    const char *stream, double timeout, uint64_t *seqp)
{
	double end = tl_bench_now() + timeout;
	uint64_t s = after, last;
	struct tl_event ev;
	struct tl_txn *t;

	for (;;) {
		if (tl_log_begin(log, TL_TXN_RDONLY, &t) != 0)
			return 0;
		if (tl_log_last(t, &last, NULL) == 0)
			for (; s < last; s++)
				if (tl_log_get(t, s + 1, &ev) == 0 &&
				    strcmp(ev.type, type) == 0 &&
				    strcmp(ev.stream, stream) == 0) {
					tl_log_abort(t);
					*seqp = s + 1;
					return ev.ts;
				}
		tl_log_abort(t);
		if (tl_bench_now() > end)
			return 0;
		tl_bench_msleep(5);
	}
}

static uint64_t
head(struct tl_log *log)
{
	struct tl_txn *t;
	uint64_t seq = 0;

	if (tl_log_begin(log, TL_TXN_RDONLY, &t) == 0) {
		tl_log_last(t, &seq, NULL);
		tl_log_abort(t);
	}
	return seq;
}

/* --- set-up and passes ----------------------------------------------- */

static int
setup(int nmod)
{
	char mf[4400], pgmf[4200], set1[64], set2[128], key[4400];
	FILE *fp;
	int i;

	snprintf(mf, sizeof(mf), "%s/consumers.yaml", scratch);
	/* The node's key, outside the home (tally node add refuses it). */
	snprintf(key, sizeof(key), "%s/node-a.key", scratch);
	if ((fp = fopen(mf, "w")) == NULL)
		return -1;
	for (i = 1; i <= nmod; i++)
		fprintf(fp, "---\nmodule: v%04d\n"
		    "env: {DB_HOST: \"\", DB_PORT: \"\", DB_NAME: \"\", "
		    "DB_USER: \"\", DB_PASSWORD: \"\"}\n"
		    "requires:\n  db:\n    type: postgres-database\n"
		    "    from: postgres\n"
		    "    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME,"
		    " user: DB_USER, password: DB_PASSWORD}\n", i);
	if (fclose(fp) != 0)
		return -1;
	snprintf(pgmf, sizeof(pgmf), "%s/examples/postgres.yaml", src);
	snprintf(set1, sizeof(set1), "port=%s", pgport);
	snprintf(set2, sizeof(set2), "admin-user=%s", pguser);
	if (tl_bench_tally(bin, home, NULL, clilog, "init", NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "node", "add", "node-a",
	    "--routable-name=127.0.0.1", "--key-out", key, NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "apply", pgmf, mf,
	    NULL) != 0 ||
	    tl_bench_tally(bin, home, pwfile, clilog, "assign", "postgres",
	    "node-a", "--set", set1, "--set", set2, "--secret",
	    "admin-password", NULL) != 0)
		return -1;
	return 0;
}

/* Assigns v(from..to) and provisions them with tallyd --once: seconds. */
static double
grow(int from, int to)
{
	char m[16];
	double t;
	int i;

	for (i = from; i <= to; i++) {
		snprintf(m, sizeof(m), "v%04d", i);
		if (tl_bench_tally(bin, home, NULL, clilog, "assign", m,
		    "node-a", NULL) != 0) {
			fprintf(stderr, ME ": tally assign %s failed (see %s)\n",
			    m, clilog);
			return -1;
		}
	}
	t = tl_bench_now();
	if (tallyd_once() != 0) {
		fprintf(stderr, ME ": tallyd --once did not finish (see %s)\n",
		    dlog);
		return -1;
	}
	return tl_bench_now() - t;
}

struct size_fig {
	int	 n;
	double	 all[MAXREPS];	/* tally check --all, s */
	double	 one[MAXREPS];	/* tally check GRANT, s */
	double	 mall, mone;	/* medians */
	int	 checked;	/* by the last --all */
	int	 bad;
	double	 once;		/* tallyd --once, s (at the larger size) */
};

/* "checked N grant(s): M not healthy" from a tally check output. */
static void
checked_of(const char *path, int *n, int *bad)
{
	char line[1024];
	FILE *fp;

	*n = *bad = -1;
	if ((fp = fopen(path, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), fp) != NULL)
		sscanf(line, "checked %d grant(s): %d not healthy", n, bad);
	fclose(fp);
}

static int
measure(struct size_fig *f, int reps)
{
	char out[4400];
	double t;
	int i, ex;

	snprintf(out, sizeof(out), "%s/check.out", scratch);
	for (i = 0; i < reps; i++) {
		unlink(out);
		t = tl_bench_now();
		ex = tl_bench_tally(bin, home, NULL, out, "check", "--all",
		    NULL);
		f->all[i] = tl_bench_now() - t;
		checked_of(out, &f->checked, &f->bad);
		if (ex != 0)
			fprintf(stderr, ME ": tally check --all exited %d at %d "
			    "grants\n", ex, f->n);
		t = tl_bench_now();
		ex = tl_bench_tally(bin, home, NULL, clilog, "check",
		    "v0001/db", NULL);
		f->one[i] = tl_bench_now() - t;
		if (ex != 0)
			fprintf(stderr, ME ": tally check v0001/db exited %d\n",
			    ex);
	}
	f->mall = tl_bench_median(f->all, reps);
	f->mone = tl_bench_median(f->one, reps);
	return 0;
}

/* --- verification at scale ------------------------------------------ */

/* CPU seconds of this process so far, all threads. */
static double
self_cpu(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

struct bulk_fig {
	const char	*what;
	unsigned	 checked, bad, calls;
	double		 wall, cpu;
};

/* One forced verification pass in this process. */
static int
bulk_pass(struct tl_rx *rx, int login_all, unsigned every,
    struct bulk_fig *f)
{
	struct tl_rx_verify_opts o;
	uint64_t next;
	double t, c;
	int rc;

	memset(&o, 0, sizeof(o));
	o.force = 1;
	o.interval_ns = 30000000000u;
	o.login_all = login_all;
	o.login_every = every;
	o.calls = &f->calls;
	f->calls = 0;
	t = tl_bench_now();
	c = self_cpu();
	rc = tl_rx_verify(rx, &o, &f->checked, &f->bad, &next);
	f->cpu = self_cpu() - c;
	f->wall = tl_bench_now() - t;
	return rc;
}

static void
bulk_section(int have, int n)
{
	struct bulk_fig f[4] = { { "a login per grant (today)" },
	    { "bulk, cache cold, no sample" }, { "bulk, warm, no sample" },
	    { "bulk, warm, sample 1 in 30" } };
	struct tl_rx rx;
	char logdir[4300], path[4300], why[TL_WHY_MAX] = "";
	double tp = 0;
	int i, rc;

	if (have < n && (tp = grow(have + 1, n)) < 0)
		return;
	printf("\nverification at scale: %d grants on one PostgreSQL "
	    "(provisioned: %d by tallyd --once --workers 4 in %.1f s)\n", n,
	    n - have, tp);
	fflush(stdout);
	tl_rx_init(&rx);
	rx.actor = "bench";
	if (strlen(home) >= sizeof(rx.home))
		return;
	memcpy(rx.home, home, strlen(home) + 1);
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
	for (i = 0; i < 4; i++) {
		rc = bulk_pass(&rx, i == 0, i == 3 ? 0 : UINT_MAX, &f[i]);
		if (rc != 0)
			fprintf(stderr, ME ": pass %d: %s\n", i, tl_strerror(rc));
	}
	printf("  %-30s %8s %6s %7s %9s %9s %12s\n", "a forced pass over "
	    "all", "checked", "bad", "calls", "wall", "CPU", "CPU / grant");
	for (i = 0; i < 4; i++)
		printf("  %-30s %8u %6u %7u %7.0f ms %7.0f ms %9.3f ms\n",
		    f[i].what, f[i].checked, f[i].bad, f[i].calls,
		    f[i].wall * 1000, f[i].cpu * 1000, f[i].checked ?
		    f[i].cpu * 1000 / f[i].checked : 0);
	printf("  (calls: driver calls on the provider: a bulk call is one, "
	    "two SQL statements;\n   a login check is one login plus one "
	    "catalogue query; sessions: up to %d, each a login)\n",
	    rx.workers);
	if (f[0].checked > 0 && f[2].checked > 0)
		printf("  steady state: %.3f ms of CPU per grant in bulk, "
		    "%.3f ms with a login each (x%.0f)\n",
		    f[2].cpu * 1000 / f[2].checked,
		    f[0].cpu * 1000 / f[0].checked,
		    f[2].cpu > 0 ? f[0].cpu / f[2].cpu : 0);
	fflush(stdout);
	tl_rx_free(&rx);
	tl_log_close(rx.log);
}

/* --- main ------------------------------------------------------------ */

int
main(void)
{
	struct size_fig fs[2];
	int n, small, reps, vi, ns, i, k, sizes[2], bulk, bulk_only;
	char logdir[4300];
	double tprov[2];
	uint64_t seed = 0x5eed;
	struct tl_log *log = NULL;

	tl_bench_dirs(&src, &bin);
	n = tl_bench_envint("BENCH_VERIFY_GRANTS", 300, 2, 5000);
	small = tl_bench_envint("BENCH_VERIFY_SMALL", 30, 1, n - 1);
	reps = tl_bench_envint("BENCH_VERIFY_REPS", 3, 1, MAXREPS);
	vi = tl_bench_envint("BENCH_VERIFY_INTERVAL", 4, 1, 60);
	ns = tl_bench_envint("BENCH_VERIFY_SAMPLES", 8, 1, MAXSAMPLES);
	bulk = tl_bench_envint("BENCH_VERIFY_BULK", 2000, 0, 20000);
	bulk_only = tl_bench_envint("BENCH_VERIFY_BULK_ONLY", 0, 0, 1);
	sizes[0] = small;
	sizes[1] = n;

	scratch = tl_test_tmpdir("bench_verify");
	snprintf(home, sizeof(home), "%s/home", scratch);
	snprintf(clilog, sizeof(clilog), "%s/cli.log", scratch);
	snprintf(dlog, sizeof(dlog), "%s/tallyd.log", scratch);
	tl_bench_atexit(cleanup);

	if (bulk_only)
		printf(ME ": verification at scale only, %d real grants on "
		    "one PostgreSQL; tally from %s\n", bulk, bin);
	else
		printf(ME ": verification of %d and %d real grants on one "
		    "PostgreSQL, then %d; tally from %s\n", small, n, bulk,
		    bin);
	printf("  (a few minutes: provisioning %d databases comes first)\n",
	    bulk_only ? bulk : n);
	fflush(stdout);
	if (pg_start(57400 + (int)(getpid() % 300)) != 0 ||
	    setup(n > bulk ? n : bulk) != 0) {
		fprintf(stderr, ME ": set-up failed (see %s)\n", scratch);
		return 1;
	}

	if (bulk_only) {
		bulk_section(0, bulk);
		cleanup();
		tl_test_tmpdir_done(scratch);
		return 0;
	}
	memset(fs, 0, sizeof(fs));
	for (k = 0; k < 2; k++) {
		fs[k].n = sizes[k];
		if ((tprov[k] = grow(k ? small + 1 : 1, sizes[k])) < 0)
			return 1;
		measure(&fs[k], reps);
	}
	{
		double t = tl_bench_now();

		if (tallyd_once() != 0)
			fprintf(stderr, ME ": tallyd --once exited non-zero\n");
		fs[1].once = tl_bench_now() - t;
	}

	printf("\nprovisioning (tallyd --once --workers 4, not the subject "
	    "here): %d grants %.1f s, then %d more %.1f s\n", small, tprov[0],
	    n - small, tprov[1]);
	printf("\na verification pass (the verifier's 4 admin sessions per "
	    "provider; medians of %d runs)\n", reps);
	printf("  %-34s %10s %10s   %s\n", "", "30-ish", "300-ish", "ratio");
	printf("  %-34s %10d %10d\n", "grants in the log", fs[0].n, fs[1].n);
	printf("  %-34s %10d %10d\n", "checked by tally check --all",
	    fs[0].checked, fs[1].checked);
	printf("  %-34s %8.0f ms %7.0f ms   x%.2f\n",
	    "tally check --all, wall", fs[0].mall * 1000, fs[1].mall * 1000,
	    fs[1].mall / fs[0].mall);
	{
		double p0 = fs[0].mall / fs[0].n * 1000,
		    p1 = fs[1].mall / fs[1].n * 1000,
		    m0 = (fs[0].mall - fs[0].mone) / (fs[0].n - 1) * 1000,
		    m1 = (fs[1].mall - fs[1].mone) / (fs[1].n - 1) * 1000;

		printf("  %-34s %8.2f ms %7.2f ms   x%.2f\n",
		    "  per check (wall / grants)", p0, p1, p1 / p0);
		printf("  %-34s %8.2f ms %7.2f ms   x%.2f\n",
		    "  per check, marginal", m0, m1, m0 > 0 ? m1 / m0 : 0);
		printf("  %-34s %8.0f ms %7.0f ms   x%.2f\n",
		    "tally check ONE grant, wall", fs[0].mone * 1000,
		    fs[1].mone * 1000, fs[1].mone / fs[0].mone);
	}
	printf("  %-34s %10s %7.0f ms\n", "tallyd --once (a whole pass)", "",
	    fs[1].once * 1000);
	printf("  (marginal = (all - one) / (n - 1): a check without the "
	    "process start; one check\n   logs in as the consumer (SCRAM) "
	    "and runs one catalogue query as the admin)\n");
	printf("  runs, --all: ");
	for (k = 0; k < 2; k++)
		for (i = 0; i < reps; i++)
			printf("%s%.0f", i ? ", " : k ? "  |  " : "",
			    fs[k].all[i] * 1000);
	printf(" ms\n");
	fflush(stdout);

	/* --- the spread of the slots, at the default interval ----------- */
	{
		double off[5000], gaps[5000], iv = DEFAULT_IV * 1e9;
		uint64_t t0 = tl_bench_ns(CLOCK_REALTIME);
		char g[32];
		int windows = 0;
		double lastw = -1;

		for (i = 0; i < n; i++) {
			snprintf(g, sizeof(g), "v%04d/db", i + 1);
			off[i] = (double)(slot_at(g, t0, (uint64_t)iv) - t0) /
			    1e9;
		}
		qsort(off, (size_t)n, sizeof(off[0]), tl_bench_cmp_double);
		for (i = 0; i < n; i++) {
			gaps[i] = (i + 1 < n ? off[i + 1] : off[0] +
			    DEFAULT_IV) - off[i];
			/* passes: grants within 1 s (iv/30) go together */
			if (lastw < 0 || off[i] > lastw + DEFAULT_IV / 30) {
				windows++;
				lastw = off[i];
			}
		}
		printf("\nthe slots of these %d grants at the default interval "
		    "(%.0f s), from their ids:\n", n, DEFAULT_IV);
		printf("  first checks after the daemon sees them: from %.2f "
		    "to %.2f s, mean %.1f s\n", off[0], off[n - 1],
		    mean(off, n));
		printf("  gap between consecutive slots: mean %.0f ms, largest "
		    "%.0f ms; about %d passes per interval (%.1f grants each)"
		    "\n", mean(gaps, n) * 1000, maxof(gaps, n) * 1000, windows,
		    (double)n / windows);
		printf("  expected delay of a drift at a random moment: the "
		    "wait for its grant's slot,\n  uniform over the interval: "
		    "%.1f s on average, %.0f s at worst, plus a pass's "
		    "latency\n", DEFAULT_IV / 2, DEFAULT_IV);
	}
	fflush(stdout);

	/* --- detection, for real, with a shorter interval -------------- */
	{
		double meas[MAXSAMPLES], pred[MAXSAMPLES], late[MAXSAMPLES];
		double c0, c1, t0, t1, idle = 0;
		char vis[16];
		long p0, g0, p1, g1 = 0;
		int got = 0;

		snprintf(logdir, sizeof(logdir), "%s/log", home);
		/* What tallyd costs idle with these grants: nothing due. */
		if ((dpid = tl_bench_tallyd_start(bin, home, dlog, "-v",
		    "--workers", "4", "--interval", "5", "--verify-interval",
		    "3600", NULL)) > 0) {
			tl_bench_msleep(2000);
			c0 = cpu_s(dpid);
			t0 = tl_bench_now();
			tl_bench_msleep((unsigned)(vi * 2000));
			c1 = cpu_s(dpid);
			t1 = tl_bench_now();
			verified_lines(&p1, &g1);
			tl_bench_tallyd_stop(&dpid);
			if (c0 >= 0 && c1 >= 0)
				idle = (c1 - c0) / (t1 - t0);
			printf("\ntallyd idle with %d grants (--verify-interval "
			    "3600: %ld checked in its first %.0f s): %.2f%% of "
			    "one core\n", n, g1, t1 - t0 + 2, idle * 100);
		}
		snprintf(vis, sizeof(vis), "%d", vi);
		if ((dpid = tl_bench_tallyd_start(bin, home, dlog, "-v",
		    "--workers", "4", "--interval", "5", "--verify-interval",
		    vis, NULL)) <= 0 ||
		    tl_log_open(logdir, 0, &log) != 0) {
			fprintf(stderr, ME ": cannot start tallyd (see %s)\n",
			    dlog);
			return 1;
		}
		/* Every grant into its slot (tally check left them on 30 s slots;
		 * the first pass moves each to its slot in this interval). */
		tl_bench_msleep((unsigned)(vi * 2000 + 1000));
		verified_lines(&p0, &g0);
		c0 = cpu_s(dpid);
		t0 = tl_bench_now();
		tl_bench_msleep((unsigned)(vi * 2000));
		verified_lines(&p1, &g1);
		c1 = cpu_s(dpid);
		t1 = tl_bench_now();
		printf("\ntallyd as a daemon, --verify-interval %d, %d grants, "
		    "nothing wrong, over %.1f s:\n", vi, n, t1 - t0);
		printf("  %ld verification passes (%.1f per interval), %ld "
		    "checks (%.0f per interval: %d expected)\n", p1 - p0,
		    (double)(p1 - p0) / ((t1 - t0) / vi), g1 - g0,
		    (double)(g1 - g0) / ((t1 - t0) / vi), n);
		if (c0 >= 0 && c1 >= 0 && g1 > g0)
			printf("  tallyd CPU: %.2f s, %.2f ms per check (%.1f%% "
			    "of one core; less idle: %.2f ms per check)\n",
			    c1 - c0, (c1 - c0) * 1000 / (double)(g1 - g0),
			    (c1 - c0) * 100 / (t1 - t0), (c1 - c0 - idle *
			    (t1 - t0)) * 1000 / (double)(g1 - g0));

		char mesh[TL_MESH_LEN + 1] = "";

		/* Grants are named by scheme 4, keyed by the mesh id. */
		(void)tl_mesh_load(log, mesh);
		for (i = 0; i < ns; i++) {
			char g[32], stream[48], sql[256], res[32];
			struct tl_drv_name_in in;
			struct tl_drv_names nm;
			int m = 1 + (int)(tl_test_rand(&seed) % (uint64_t)n);
			unsigned wait = (unsigned)(tl_test_rand(&seed) %
			    (uint64_t)(vi * 1000));
			uint64_t after, td, ts, seq;

			snprintf(g, sizeof(g), "v%04d/db", m);
			snprintf(stream, sizeof(stream), "grant/%s", g);
			/* Its first login (reactors/names.c, scheme 4). */
			snprintf(res, sizeof(res), "v%04d-db", m);
			memset(&in, 0, sizeof(in));
			in.grant = g;
			in.resource = res;
			in.node = "";
			in.recorded = "";
			in.version = 1;
			in.scheme = mesh[0] ? TL_DRV_NAMING_MESH : TL_DRV_NAMING;
			in.mesh = mesh;
			tl_drv_name_scheme(&in, 63, &nm);
			snprintf(sql, sizeof(sql), "ALTER ROLE \"%s\" PASSWORD "
			    "'bench-drift-%d'", nm.login, i);
			tl_bench_msleep(wait);
			after = head(log);
			td = tl_bench_ns(CLOCK_REALTIME);
			if (tl_bench_pg_exec(admin, ME, sql) != 0)
				break;
			ts = wait_event(log, after, "grant.drifted", stream,
			    vi * 3 + 10, &seq);
			if (ts == 0) {
				fprintf(stderr, ME ": %s: no grant.drifted "
				    "within %d s\n", g, vi * 3 + 10);
				break;
			}
			meas[got] = (double)(ts - td) / 1e6;
			pred[got] = (double)(slot_at(g, td,
			    (uint64_t)vi * 1000000000u) - td) / 1e6;
			late[got] = meas[got] - pred[got];
			got++;
			/* the repair, before the next sample */
			wait_event(log, seq, "grant.repaired", stream, 10, &seq);
		}
		printf("\ndetection of a changed password (ALTER ROLE as the "
		    "admin) -> grant.drifted, %d samples,\nat --verify-interval "
		    "%d s (ms; predicted = the wait for the grant's slot):\n",
		    got, vi);
		printf("  measured:  ");
		tl_bench_print_list(meas, got);
		printf("\n  predicted: ");
		tl_bench_print_list(pred, got);
		printf("\n  measured - predicted (a pass's latency; negative: "
		    "batched up to %.0f ms early): ", vi * 1000.0 / 30);
		tl_bench_print_list(late, got);
		if (got > 0) {
			double ml, mm = mean(meas, got), mp = mean(pred, got);

			printf("\n  mean measured %.0f ms = %.2f of the interval "
			    "(predicted %.2f; a random moment: 0.50)\n", mm,
			    mm / (vi * 1000.0), mp / (vi * 1000.0));
			ml = tl_bench_median(late, got);
			printf("  scaled to the default %.0f s (the wait for the "
			    "slot scales with the interval,\n  the pass latency "
			    "does not): expected %.1f s on average, %.1f s at "
			    "worst\n  (%.0f s / 2 + median latency %.0f ms; %.0f "
			    "s + the largest latency seen)\n", DEFAULT_IV,
			    DEFAULT_IV / 2 + ml / 1000, DEFAULT_IV +
			    maxof(late, got) / 1000, DEFAULT_IV, ml, DEFAULT_IV);
			printf("  the samples scaled directly (measured x %.1f): "
			    "mean %.1f s\n", DEFAULT_IV / vi, mm / 1000 *
			    DEFAULT_IV / vi);
		} else
			printf("\n  FAILED (see stderr)\n");
	}
	printf("\n");
	fflush(stdout);
	if (log != NULL)
		tl_log_close(log);
	log = NULL;
	tl_bench_tallyd_stop(&dpid);
	if (bulk > 0)
		bulk_section(n, bulk);
	cleanup();
	tl_test_tmpdir_done(scratch);
	return 0;
}
