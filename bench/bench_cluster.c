/*
 * bench_cluster.c - cluster mode (cluster/cluster.h): what committing
 * through etcd costs, how long a failover takes, and how far a follower
 * lags.  On a throwaway three-member etcd over TLS
 * (tests/harness/etcd.sh).  Prints figures; never asserts; every phase
 * runs whatever the one before it did.
 *
 * Phase "commit": the same small events (150-byte bodies) appended
 * with tl_log_write + tl_append, in this process, to
 *
 *   embedded   a plain log (tl_log_open, no cluster);
 *   cluster    a home made by tally init --etcd, led by this process:
 *              tl_cl_open, tl_cl_lease_start, tl_cl_campaign (won: no
 *              tallyd runs), tl_cl_push, then tl_log_set_commit with
 *              tl_cl_commit, so every transaction is one etcd
 *              transaction before LMDB commits;
 *
 * at 1 and 1,000 events per transaction: events/s and the latency of a
 * transaction (p50, p99).
 *
 * Phase "follow": the cluster home above still led by this process, a
 * follower home (tally init --standby --mesh, the master key copied)
 * whose tallyd follows; events appended at RATE/s (what is due every
 * 10 ms, in one transaction) for SECONDS; append (the event's
 * timestamp) -> visible on the follower's log (core/sub.h, a thread of
 * this process): p50, p99.
 *
 * Phase "failover", at 300 grants and at a larger mesh (10,000, or
 * fewer when provisioning them would not fit the bench's time: printed
 * as used): home A founds a mesh (--lease-ttl 4) and leads with its
 * tallyd, the directory provider (examples/download.yaml) on node-a,
 * N consumers each granted a directory and provisioned; home B's
 * tallyd follows from the start (a follower that joins later than
 * head - keep is behind the trimmed tail).  Once B is at A's head,
 * A's tallyd is killed (SIGKILL); the time until B's
 * tallyd says "leading at epoch" (the election) and until it fences
 * the provider, its first provider call (the directory driver rewrites
 * ROOT/.tally-fence-MESH with the new epoch; polled every 1 ms).
 *
 * Env: TALLY_TMP, TALLY_SRC, TALLY_BIN, BENCH_SCALE (a float
 * multiplying the counts), TALLY_BENCH_SUMMARY (tl_bench_target).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "core/cconf.h"
#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "core/sub.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME		"bench_cluster"
#define BODY_LEN	150
#define PER_STREAM	10
#define FO_TTL		"4"
#define FO_TTL_S	4.0
#define MODS_PER_FILE	250
#define FO_BUDGET_S	240.0	/* provisioning the larger mesh, at most */

static const char *src, *bin;
static double scale = 1.0;

/* --- what the exit handler stops ----------------------------------------- */

#define MAXD	4
static pid_t daemons[MAXD] = { -1, -1, -1, -1 };
static char etcd_dir[4200];
static int etcd_up;

static void
etcd_stop(void)
{
	if (etcd_up)
		tl_bench_harness(src, "etcd.sh", "stop", etcd_dir, NULL);
	etcd_up = 0;
}

static void
cleanup(void)
{
	int i;

	for (i = 0; i < MAXD; i++)
		tl_bench_tallyd_stop(&daemons[i]);
	etcd_stop();
}

static void
warn(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs(ME ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* --- etcd ------------------------------------------------------------------ */

struct etcd {
	char	 ep[1024], ca[1024], cert[1024], key[1024];
};

static int
etcd_start(const char *dir, struct etcd *e)
{
	char port[16];
	int tries, rc = -1, p;

	snprintf(etcd_dir, sizeof(etcd_dir), "%s", dir);
	for (tries = 0; tries < 8; tries++) {
		p = 21000 + (int)((getpid() * 7919u + (unsigned)tries *
		    104729u) % 2000) * 13;
		snprintf(port, sizeof(port), "%d", p);
		etcd_up = 1;
		if ((rc = tl_bench_harness(src, "etcd.sh", "start", dir,
		    port)) == 0)
			break;
		etcd_stop();
		if (rc != 4)
			break;
	}
	if (rc != 0) {
		warn("etcd.sh start %s failed (%d)", dir, rc);
		return -1;
	}
	if (tl_test_env_get(dir, "TALLY_TEST_ETCD_ENDPOINTS", e->ep,
	    sizeof(e->ep)) != 0 ||
	    tl_test_env_get(dir, "TALLY_TEST_ETCD_CA", e->ca,
	    sizeof(e->ca)) != 0 ||
	    tl_test_env_get(dir, "TALLY_TEST_ETCD_CERT", e->cert,
	    sizeof(e->cert)) != 0 ||
	    tl_test_env_get(dir, "TALLY_TEST_ETCD_KEY", e->key,
	    sizeof(e->key)) != 0) {
		warn("%s/env is incomplete", dir);
		return -1;
	}
	return 0;
}

/* --- homes ------------------------------------------------------------------- */

static int
copy_file(const char *from, const char *to)
{
	char buf[4096];
	size_t n;
	FILE *a = fopen(from, "r"), *b;
	int ok = 1;

	if (a == NULL)
		return -1;
	umask(077);
	if ((b = fopen(to, "w")) == NULL) {
		fclose(a);
		return -1;
	}
	while ((n = fread(buf, 1, sizeof(buf), a)) > 0)
		ok &= fwrite(buf, 1, n, b) == n;
	fclose(a);
	ok &= fclose(b) == 0;
	return ok ? chmod(to, 0600) : -1;
}

/* tally init --etcd ... on home (a founder), ttl NULL: the default. */
static int
init_founder(const struct etcd *e, const char *home, const char *ttl,
    const char *out)
{
	if (ttl != NULL)
		return tl_bench_tally(bin, home, NULL, out, "init", "--etcd",
		    e->ep, "--etcd-ca", e->ca, "--etcd-cert", e->cert,
		    "--etcd-key", e->key, "--lease-ttl", ttl, NULL);
	return tl_bench_tally(bin, home, NULL, out, "init", "--etcd", e->ep,
	    "--etcd-ca", e->ca, "--etcd-cert", e->cert, "--etcd-key", e->key,
	    NULL);
}

/* A follower of founder's mesh: init --standby --mesh, the key copied. */
static int
init_follower(const struct etcd *e, const char *founder, const char *home,
    const char *ttl, const char *out)
{
	struct tl_cconf c;
	char why[TL_WHY_MAX], from[4400], to[4400];
	int rc;

	if ((rc = tl_cconf_load(founder, &c, why)) != 0) {
		warn("%s: %s", founder, why[0] ? why : tl_strerror(rc));
		return -1;
	}
	if (ttl != NULL)
		rc = tl_bench_tally(bin, home, NULL, out, "init", "--standby",
		    "--mesh", c.mesh, "--etcd", e->ep, "--etcd-ca", e->ca,
		    "--etcd-cert", e->cert, "--etcd-key", e->key,
		    "--lease-ttl", ttl, NULL);
	else
		rc = tl_bench_tally(bin, home, NULL, out, "init", "--standby",
		    "--mesh", c.mesh, "--etcd", e->ep, "--etcd-ca", e->ca,
		    "--etcd-cert", e->cert, "--etcd-key", e->key, NULL);
	if (rc != 0) {
		warn("tally init --standby on %s: exit %d (see %s)", home, rc,
		    out);
		return -1;
	}
	snprintf(from, sizeof(from), "%s/master.key", founder);
	snprintf(to, sizeof(to), "%s/master.key", home);
	if (copy_file(from, to) != 0) {
		warn("cannot copy %s", from);
		return -1;
	}
	return 0;
}

static uint64_t
head(struct tl_log *log)
{
	struct tl_txn *t;
	uint64_t s = 0;

	if (tl_log_begin(log, TL_TXN_RDONLY, &t) == 0) {
		tl_log_last(t, &s, NULL);
		tl_log_abort(t);
	}
	return s;
}

/* --- writing --------------------------------------------------------------- */

struct wr {
	unsigned	 n;	/* events in this transaction */
	uint64_t	 idx;	/* index of the first */
};

static int
append_cb(struct tl_txn *t, void *arg)
{
	struct wr *w = arg;
	struct tl_append a;
	uint8_t body[BODY_LEN + 16];
	char stream[64];
	unsigned i;
	size_t len;
	int rc;

	for (i = 0; i < w->n; i++) {
		uint64_t k = w->idx + i;

		len = tl_test_body(body, sizeof(body), BODY_LEN, 7, k, w->n);
		snprintf(stream, sizeof(stream), "bench/%llu",
		    (unsigned long long)(k / PER_STREAM));
		memset(&a, 0, sizeof(a));
		a.type = "bench.appended";
		a.stream = stream;
		a.expect = TL_VER_ANY;
		a.actor = "bench";
		a.body = body;
		a.body_len = len;
		if ((rc = tl_append(t, &a, NULL, NULL)) != 0)
			return rc;
	}
	return 0;
}

struct lat {
	const char	*what;
	unsigned	 per_txn;
	double		*v;	/* ms per transaction */
	int		 n;
	double		 secs;
	uint64_t	 events;
	int		 failed;
};

static double
pct(const struct lat *r, int p)
{
	if (r->n == 0)
		return 0;
	return r->v[(r->n * p) / 100 < r->n ? (r->n * p) / 100 : r->n - 1];
}

static double
lrate(const struct lat *r)
{
	return r->failed || r->secs <= 0 ? 0 : (double)r->events / r->secs;
}

static void
run_writes(struct tl_log *log, struct tl_cl *cl, uint64_t *idx, int ntxn,
    struct lat *r)
{
	struct wr w;
	double t0, t1, all;
	int i, rc;

	r->v = calloc((size_t)ntxn, sizeof(double));
	if (r->v == NULL || log == NULL) {
		r->failed = 1;
		return;
	}
	all = tl_bench_now();
	for (i = 0; i < ntxn; i++) {
		w.n = r->per_txn;
		w.idx = *idx;
		t0 = tl_bench_now();
		rc = tl_log_write(log, append_cb, &w);
		t1 = tl_bench_now();
		if (rc != 0) {
			warn("%s, %u/txn: transaction %d: %s (%s%s%s)", r->what,
			    r->per_txn, i, tl_strerror(rc),
			    tl_log_lasterr(log), cl ? "; cluster: " : "",
			    cl ? tl_cl_lasterr(cl) : "");
			r->failed = 1;
			break;
		}
		*idx += w.n;
		r->v[r->n++] = (t1 - t0) * 1000;
		r->events += w.n;
	}
	r->secs = tl_bench_now() - all;
	qsort(r->v, (size_t)r->n, sizeof(double), tl_bench_cmp_double);
}

static void
lat_report(const struct lat *r)
{
	if (r->n == 0) {
		printf("  %-9s %5u/txn  not measured\n", r->what, r->per_txn);
		return;
	}
	printf("  %-9s %5u/txn %4d txns %7llu events %6.2f s %9.0f events/s"
	    "  txn p50 %7.2f ms  p99 %7.2f ms%s\n", r->what, r->per_txn,
	    r->n, (unsigned long long)r->events, r->secs, lrate(r),
	    pct(r, 50), pct(r, 99), r->failed ? "  (FAILED part way)" : "");
	fflush(stdout);
}

/* --- a leader in this process ------------------------------------------------ */

struct leader {
	struct tl_cconf	 conf;
	struct tl_key	 key;
	struct tl_cl	*cl;
	struct tl_log	*log;
	uint64_t	 epoch;
};

static int
lead_open(const char *home, struct leader *L)
{
	char why[TL_WHY_MAX], path[4600];
	int rc, won = 0;

	memset(L, 0, sizeof(*L));
	why[0] = '\0';
	if ((rc = tl_cconf_load(home, &L->conf, why)) != 0) {
		warn("%s: %s", home, why[0] ? why : tl_strerror(rc));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/master.key", home);
	if ((rc = tl_secret_load(path, &L->key, why)) != 0) {
		warn("%s: %s", path, why);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/log", home);
	if ((rc = tl_log_open(path, 0, &L->log)) != 0) {
		warn("%s: %s", path, tl_strerror(rc));
		L->log = NULL;
		return -1;
	}
	if ((rc = tl_cl_open(&L->conf, &L->key, home, &L->cl)) != 0) {
		warn("tl_cl_open: %s", tl_strerror(rc));
		L->cl = NULL;
		return -1;
	}
	if ((rc = tl_cl_lease_start(L->cl)) != 0) {
		warn("tl_cl_lease_start: %s (%s)", tl_strerror(rc),
		    tl_cl_lasterr(L->cl));
		return -1;
	}
	if ((rc = tl_cl_campaign(L->cl, &won, &L->epoch)) != 0 || !won) {
		warn("tl_cl_campaign: %s (%s), won %d", tl_strerror(rc),
		    tl_cl_lasterr(L->cl), won);
		return -1;
	}
	if ((rc = tl_cl_push(L->cl, L->log)) != 0) {
		warn("tl_cl_push: %s (%s)", tl_strerror(rc),
		    tl_cl_lasterr(L->cl));
		return -1;
	}
	tl_log_set_commit(L->log, tl_cl_commit, L->cl);
	return 0;
}

static void
lead_close(struct leader *L)
{
	if (L->cl != NULL)
		tl_cl_resign(L->cl);
	if (L->log != NULL)
		tl_log_set_commit(L->log, NULL, NULL);
	tl_log_close(L->log);
	tl_cl_close(L->cl);
	tl_secret_key_free(&L->key);
	memset(L, 0, sizeof(*L));
}

/* --- phase: commit ----------------------------------------------------------- */

static void
phase_commit(const char *dir, struct leader *L, uint64_t *idx)
{
	int n1 = (int)(500 * scale), nk = (int)(20 * scale);
	struct lat e1 = { "embedded", 1 }, c1 = { "cluster", 1 };
	struct lat ek = { "embedded", 1000 }, ck = { "cluster", 1000 };
	struct tl_log *elog = NULL;
	char *edir = tl_test_path(dir, "embedded");
	uint64_t eidx = 0;
	struct lat warm = { "warm-up", 1 };
	double p50, r;
	int rc;

	if (n1 < 50)
		n1 = 50;
	if (nk < 3)
		nk = 3;
	printf("commit: %d-byte bodies; %d transactions of 1 event, %d of "
	    "1,000\n", BODY_LEN, n1, nk);
	if (mkdir(edir, 0700) != 0 ||
	    (rc = tl_log_open(edir, TL_LOG_CREATE, &elog)) != 0) {
		warn("%s: cannot open a log", edir);
		elog = NULL;
	}
	/* One transaction each first: connections, maps, pages. */
	run_writes(elog, NULL, &eidx, 1, &warm);
	free(warm.v);
	memset(&warm, 0, sizeof(warm));
	warm.what = "warm-up";
	warm.per_txn = 1;
	if (L->log != NULL)
		run_writes(L->log, L->cl, idx, 1, &warm);
	free(warm.v);

	run_writes(elog, NULL, &eidx, n1, &e1);
	lat_report(&e1);
	if (L->log != NULL)
		run_writes(L->log, L->cl, idx, n1, &c1);
	else
		c1.failed = 1;
	lat_report(&c1);
	run_writes(elog, NULL, &eidx, nk, &ek);
	lat_report(&ek);
	if (L->log != NULL)
		run_writes(L->log, L->cl, idx, nk, &ck);
	else
		ck.failed = 1;
	lat_report(&ck);
	tl_log_close(elog);

	if (lrate(&e1) > 0 && lrate(&c1) > 0)
		printf("  cluster/embedded events/s: %.3f at 1/txn, %.3f at "
		    "1,000/txn; txn p50 %.1fx and %.1fx the embedded\n",
		    lrate(&c1) / lrate(&e1), lrate(&ek) > 0 ? lrate(&ck) /
		    lrate(&ek) : 0, pct(&c1, 50) / pct(&e1, 50),
		    pct(&ek, 50) > 0 ? pct(&ck, 50) / pct(&ek, 50) : 0);
	if (c1.n > 0 && !c1.failed) {
		p50 = pct(&c1, 50);
		tl_bench_target("cluster: commit latency p50, 1 event/txn",
		    "target < 10 ms", p50 < 10, "%.2f ms", p50);
	} else
		tl_bench_target("cluster: commit latency p50, 1 event/txn",
		    "target < 10 ms", 0, "not measured");
	r = lrate(&ck);
	tl_bench_target("cluster: throughput, 1,000 events/txn",
	    "target >= 20,000 events/s", r >= 20000, "%.0f events/s", r);
	free(e1.v);
	free(c1.v);
	free(ek.v);
	free(ck.v);
	tl_test_rmtree(edir);
	free(edir);
}

/* --- phase: follow ------------------------------------------------------------- */

struct watcher {
	char		 logdir[4600];
	uint64_t	 from, last;	/* seq from..last recorded */
	uint64_t	*at;		/* wall ns seen, [seq - from] */
	_Atomic uint64_t seen;		/* the last seq seen */
	atomic_int	 stop;
	int		 err;
};

static void *
watch_main(void *arg)
{
	struct watcher *w = arg;
	struct tl_sub_opts o = TL_SUB_OPTS_INIT;
	struct tl_sub *s = NULL;
	struct tl_event ev;
	int rc;

	o.flags = TL_SUB_RDONLY;
	o.from = w->from;
	while (!atomic_load(&w->stop) &&
	    tl_sub_open(w->logdir, &o, &s) != 0)
		tl_bench_msleep(20);
	if (s == NULL)
		return NULL;
	while (!atomic_load(&w->stop)) {
		rc = tl_sub_next(s, tl_sub_deadline(200), &ev);
		if (rc == EINTR || rc == TL_ETIMEDOUT)
			continue;
		if (rc != 0) {
			w->err = rc;
			break;
		}
		if (ev.seq >= w->from && ev.seq <= w->last &&
		    w->at[ev.seq - w->from] == 0)
			w->at[ev.seq - w->from] = tl_bench_ns(CLOCK_REALTIME);
		atomic_store(&w->seen, ev.seq);
		if (ev.seq >= w->last)
			break;
	}
	tl_sub_close(s);
	return NULL;
}

static void
phase_follow(const char *dir, const struct etcd *e, const char *lhome,
    struct leader *L, uint64_t *idx)
{
	unsigned rate = 1000, secs = (unsigned)(10 * scale + 0.5);
	uint64_t total, sent = 0, base, last, s;
	struct watcher w;
	pthread_t th;
	struct tl_txn *t;
	struct tl_event ev;
	char fh[4400], out[4400], dlog[4400];
	double t0, tend = 0, *lag = NULL, p50, p99, rate_got = 0;
	int n = 0, miss = 0, rc, started = 0, fails = 0;
	unsigned tick;

	if (secs < 3)
		secs = 3;
	total = (uint64_t)rate * secs;
	printf("follow: a follower's tallyd; %u events/s for %u s, appended "
	    "by this process as leader (what is due every 10 ms, one "
	    "transaction)\n", rate, secs);
	if (L->log == NULL) {
		printf("  not measured: no leader\n");
		goto missed;
	}
	snprintf(fh, sizeof(fh), "%s/follower", dir);
	snprintf(out, sizeof(out), "%s/follower-cli.log", dir);
	snprintf(dlog, sizeof(dlog), "%s/tallyd-follower.log", dir);
	if (init_follower(e, lhome, fh, NULL, out) != 0)
		goto missed;
	if ((daemons[0] = tl_bench_tallyd_start(bin, fh, dlog, "--interval",
	    "1", NULL)) < 0) {
		warn("the follower's tallyd did not start (see %s)", dlog);
		goto missed;
	}
	base = head(L->log);
	last = base + total;
	memset(&w, 0, sizeof(w));
	snprintf(w.logdir, sizeof(w.logdir), "%s/log", fh);
	w.from = base;
	w.last = last;
	if ((w.at = calloc(total + 1, sizeof(*w.at))) == NULL)
		goto missed;
	if (pthread_create(&th, NULL, watch_main, &w) != 0) {
		free(w.at);
		goto missed;
	}
	started = 1;
	/* The follower first applies what the leader holds already. */
	t0 = tl_bench_now();
	while (atomic_load(&w.seen) < base && tl_bench_now() - t0 < 180)
		tl_bench_msleep(20);
	if (atomic_load(&w.seen) < base) {
		warn("the follower did not reach event %llu in 180 s (at %llu;"
		    " see %s)", (unsigned long long)base,
		    (unsigned long long)atomic_load(&w.seen), dlog);
		goto stop;
	}
	printf("  the follower applied the %llu events before in %.1f s\n",
	    (unsigned long long)base, tl_bench_now() - t0);
	t0 = tl_bench_now();
	for (tick = 1; sent < total; tick++) {
		uint64_t due = (uint64_t)tick * rate / 100;
		struct wr wr;

		while (tl_bench_now() < t0 + tick * 0.01)
			tl_bench_msleep(1);
		if (due > total)
			due = total;
		if (due <= sent)
			continue;
		wr.n = (unsigned)(due - sent);
		if (wr.n > 1000)
			wr.n = 1000;
		wr.idx = *idx;
		if ((rc = tl_log_write(L->log, append_cb, &wr)) != 0) {
			warn("follow: append: %s (%s; cluster: %s)",
			    tl_strerror(rc), tl_log_lasterr(L->log),
			    tl_cl_lasterr(L->cl));
			if (++fails > 5)
				break;
			continue;
		}
		sent += wr.n;
		*idx += wr.n;
	}
	tend = tl_bench_now();
	rate_got = (double)sent / (tend - t0);
	last = base + sent;
	t0 = tl_bench_now();
	while (atomic_load(&w.seen) < last && tl_bench_now() - t0 < 60)
		tl_bench_msleep(10);
stop:
	atomic_store(&w.stop, 1);
	pthread_join(th, NULL);
	if (w.err != 0)
		warn("follow: the follower's log: %s", tl_strerror(w.err));
	if (sent > 0 && (lag = calloc(sent, sizeof(double))) != NULL &&
	    tl_log_begin(L->log, TL_TXN_RDONLY, &t) == 0) {
		for (s = base + 1; s <= last; s++) {
			uint64_t at = w.at[s - base];

			if (tl_log_get(t, s, &ev) != 0 || at == 0 ||
			    at < ev.ts) {
				miss++;
				continue;
			}
			lag[n++] = (double)(at - ev.ts) / 1e6;
		}
		tl_log_abort(t);
	}
	free(w.at);
	tl_bench_tallyd_stop(&daemons[0]);
	if (n == 0) {
		printf("  not measured\n");
		free(lag);
		goto missed;
	}
	qsort(lag, (size_t)n, sizeof(double), tl_bench_cmp_double);
	p50 = lag[n / 2];
	p99 = lag[(n * 99) / 100];
	printf("  sustained %.0f events/s (%llu events in %.2f s); follower "
	    "lag p50 %.1f ms  p99 %.1f ms  max %.1f ms (%d events%s)\n",
	    rate_got, (unsigned long long)sent, sent ? (double)sent /
	    rate_got : 0, p50, p99, lag[n - 1], n,
	    miss ? ", some not seen" : "");
	if (miss)
		printf("  %d event(s) not seen on the follower within 60 s\n",
		    miss);
	tl_bench_target("cluster: follower lag p99 at 1,000 events/s",
	    "target < 500 ms", p99 < 500 && miss == 0 && rate_got >= 950,
	    "%.1f ms (p50 %.1f ms, %.0f events/s sustained%s)", p99, p50,
	    rate_got, miss ? ", events missing" : "");
	free(lag);
	return;
missed:
	if (started == 0)
		tl_bench_target("cluster: follower lag p99 at 1,000 events/s",
		    "target < 500 ms", 0, "not measured");
	tl_bench_tallyd_stop(&daemons[0]);
}

/* --- phase: failover ------------------------------------------------------------ */

/* The epoch in ROOT/.tally-fence-MESH, 0 when there is none. */
static uint64_t
fence_epoch(const char *path)
{
	char line[256];
	unsigned long long ep = 0;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return 0;
	if (fgets(line, sizeof(line), f) == NULL ||
	    sscanf(line, "tally-fence/1 %llu", &ep) != 1)
		ep = 0;
	fclose(f);
	return ep;
}

/* Whether the file holds needle past *off (moved to what was read). */
static int
file_grows_with(const char *path, long *off, const char *needle)
{
	char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;
	int found = 0;

	if (f == NULL)
		return 0;
	if (fseek(f, *off, SEEK_SET) == 0) {
		while (!found && fgets(buf, sizeof(buf), f) != NULL) {
			n = strlen(buf);
			if (n > 0 && buf[n - 1] != '\n')
				break;	/* a line being written: later */
			found = strstr(buf, needle) != NULL;
			*off += (long)n;
		}
	}
	fclose(f);
	return found;
}

/* The last lines of a daemon's log, to stderr: the scratch goes. */
static void
tail(const char *path)
{
	char lines[6][512];
	FILE *f = fopen(path, "r");
	int n = 0, i;

	if (f == NULL)
		return;
	while (fgets(lines[n % 6], sizeof(lines[0]), f) != NULL)
		n++;
	fclose(f);
	fprintf(stderr, "--- %s (last lines)\n", path);
	for (i = n > 6 ? n - 6 : 0; i < n; i++)
		fputs(lines[i % 6], stderr);
}

struct fo {
	int		 n;		/* grants */
	double		 prov_s;	/* apply + assign -> all provisioned */
	double		 lead_ms;	/* kill -> "leading at epoch" */
	double		 fence_ms;	/* kill -> the fence's new epoch */
	uint64_t	 e0, e1;
	int		 ok;
};

static int
write_manifests(const char *dir, int first, int last, char *path,
    size_t cap)
{
	FILE *f;
	int i;

	snprintf(path, cap, "%s/consumers-%05d.yaml", dir, first);
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	for (i = first; i <= last; i++)
		fprintf(f, "---\nmodule: c%04d\nenv: {FILES: \"\"}\n"
		    "requires:\n  files:\n    type: directory\n"
		    "    from: download\n    env: {path: FILES}\n", i);
	return fclose(f) == 0 ? 0 : -1;
}

static void
failover(const char *dir, int n, double prov_timeout, struct fo *r)
{
	char fdir[4200], edir[4400], ah[4400], bh[4400], root[4400];
	char alog[4400], blog[4400], cli[4400], nkey[4400], set[4500];
	char mf[4500], dl[4400], fence[4600], why[TL_WHY_MAX];
	struct tl_bench_dlv dlv = { 0 };
	struct tl_log *blg = NULL, *alg = NULL;
	struct tl_cconf conf;
	struct etcd e;
	long off = 0;
	double t0, tk, now;
	uint64_t ah_head, bh_head;
	int i, j, k, rc, got, st;

	memset(r, 0, sizeof(*r));
	r->n = n;
	snprintf(fdir, sizeof(fdir), "%s/failover-%d", dir, n);
	snprintf(edir, sizeof(edir), "%s/etcd", fdir);
	snprintf(ah, sizeof(ah), "%s/a", fdir);
	snprintf(bh, sizeof(bh), "%s/b", fdir);
	snprintf(root, sizeof(root), "%s/root", fdir);
	snprintf(alog, sizeof(alog), "%s/tallyd-a.log", fdir);
	snprintf(blog, sizeof(blog), "%s/tallyd-b.log", fdir);
	snprintf(cli, sizeof(cli), "%s/cli.log", fdir);
	snprintf(nkey, sizeof(nkey), "%s/node-a.key", fdir);
	snprintf(dl, sizeof(dl), "%s/examples/download.yaml", src);
	if (mkdir(fdir, 0755) != 0 || mkdir(root, 0755) != 0) {
		warn("mkdir %s: %s", fdir, strerror(errno));
		return;
	}
	if (etcd_start(edir, &e) != 0)
		return;
	if (init_founder(&e, ah, FO_TTL, cli) != 0) {
		warn("tally init --etcd (A) failed (see %s)", cli);
		goto out;
	}
	if (init_follower(&e, ah, bh, FO_TTL, cli) != 0)
		goto out;
	if (tl_cconf_load(ah, &conf, why) != 0) {
		warn("%s: %s", ah, why);
		goto out;
	}
	snprintf(fence, sizeof(fence), "%s/.tally-fence-%s", root, conf.mesh);
	if ((daemons[1] = tl_bench_tallyd_start(bin, ah, alog, "--interval",
	    "1", NULL)) < 0) {
		warn("A's tallyd did not start (see %s)", alog);
		goto out;
	}
	t0 = tl_bench_now();
	while (!file_grows_with(alog, &off, "leading at epoch")) {
		if (tl_bench_now() - t0 > 30) {
			warn("A does not lead after 30 s (see %s)", alog);
			goto out;
		}
		tl_bench_msleep(20);
	}
	/*
	 * B follows from the start: a follower registers what it applied,
	 * and the leader trims the record below head - keep (10,000) for
	 * no one else, so a home that joins a larger record later is
	 * behind its tail (it starts from a snapshot instead).
	 */
	if ((daemons[2] = tl_bench_tallyd_start(bin, bh, blog, "--interval",
	    "1", NULL)) < 0) {
		warn("B's tallyd did not start (see %s)", blog);
		goto out;
	}
	snprintf(set, sizeof(set), "root=%s", root);
	if (tl_bench_tally(bin, ah, NULL, cli, "node", "add", "node-a",
	    "--routable-name", "127.0.0.1", "--key-out", nkey, NULL) != 0 ||
	    tl_bench_tally(bin, ah, NULL, cli, "apply", dl, NULL) != 0 ||
	    tl_bench_tally(bin, ah, NULL, cli, "assign", "download", "node-a",
	    "--set", set, NULL) != 0) {
		warn("setting up node-a and the provider failed (see %s)", cli);
		goto out;
	}
	t0 = tl_bench_now();
	for (i = 1; i <= n; i += MODS_PER_FILE) {
		j = i + MODS_PER_FILE - 1 > n ? n : i + MODS_PER_FILE - 1;
		if (write_manifests(fdir, i, j, mf, sizeof(mf)) != 0 ||
		    tl_bench_tally(bin, ah, NULL, cli, "apply", mf, NULL) != 0) {
			warn("tally apply %s failed (see %s)", mf, cli);
			goto out;
		}
		/*
		 * A refused assign is said, with why, and asked again (as
		 * an operator would, and tests/integration's burst does):
		 * at most twice.
		 */
		for (k = 0; (rc = tl_bench_assign_batch(bin, ah, cli, "c", i,
		    j, "node-a")) != 0 && k < 2; k++) {
			warn("tally assign c%04d..c%04d: exit %d; asking again",
			    i, j, rc);
			tail(cli);
			tl_bench_msleep(200);
		}
		if (rc != 0) {
			warn("tally assign c%04d..c%04d failed (see %s)", i, j,
			    cli);
			goto out;
		}
	}
	now = tl_bench_now();
	if (tl_bench_dlv_open(&dlv, ah) != 0) {
		warn("cannot open %s/log", ah);
		goto out;
	}
	dlv.type = "grant.provisioned";
	for (;;) {
		got = tl_bench_dlv_count(&dlv, NULL);
		if (got >= n)
			break;
		if (got < 0 || tl_bench_now() - t0 > prov_timeout) {
			warn("%d of %d grants provisioned after %.0f s (see %s)",
			    got, n, tl_bench_now() - t0, alog);
			goto out;
		}
		tl_bench_msleep(100);
	}
	r->prov_s = tl_bench_now() - t0;
	printf("  %5d grants: declared and assigned in %.1f s, all "
	    "provisioned %.1f s after the first apply\n", n, now - t0,
	    r->prov_s);
	fflush(stdout);
	alg = dlv.log;
	if ((r->e0 = fence_epoch(fence)) == 0) {
		warn("no fence at %s", fence);
		goto out;
	}
	/* B has applied A's head. */
	snprintf(mf, sizeof(mf), "%s/log", bh);
	t0 = tl_bench_now();
	for (;;) {
		if (blg == NULL && tl_log_open(mf, TL_LOG_RDONLY, &blg) != 0)
			blg = NULL;
		ah_head = head(alg);
		bh_head = blg ? head(blg) : 0;
		if (bh_head >= ah_head && bh_head > 0)
			break;
		if (tl_bench_now() - t0 > 120) {
			warn("B at event %llu, A at %llu after 120 s (see %s)",
			    (unsigned long long)bh_head,
			    (unsigned long long)ah_head, blog);
			goto out;
		}
		tl_bench_msleep(50);
	}
	printf("  %5d grants: B at A's head (event %llu) %.1f s after all "
	    "were provisioned\n", n, (unsigned long long)ah_head,
	    tl_bench_now() - t0);
	tl_bench_dlv_close(&dlv);
	alg = NULL;
	tl_log_close(blg);
	blg = NULL;
	/* A settles: the follower's first round is behind it. */
	tl_bench_msleep(1500);
	off = 0;
	(void)file_grows_with(blog, &off, "\001");	/* to the end */
	tk = tl_bench_now();
	kill(daemons[1], SIGKILL);
	while (waitpid(daemons[1], &st, 0) < 0 && errno == EINTR)
		;
	daemons[1] = -1;
	for (;;) {
		now = tl_bench_now();
		if (r->lead_ms == 0 &&
		    file_grows_with(blog, &off, "leading at epoch"))
			r->lead_ms = (now - tk) * 1000;
		if (r->fence_ms == 0 && (r->e1 = fence_epoch(fence)) != 0 &&
		    r->e1 != r->e0)
			r->fence_ms = (now - tk) * 1000;
		if (r->fence_ms != 0 && r->lead_ms != 0)
			break;
		if (now - tk > 90) {
			warn("after 90 s: %s%s (see %s)", r->lead_ms ? "" :
			    "B does not lead; ", r->fence_ms ? "" :
			    "the fence is unchanged", blog);
			goto out;
		}
		tl_bench_msleep(1);
	}
	r->ok = 1;
	printf("  %5d grants: kill -9 of A's tallyd -> B \"leading at epoch\" "
	    "%.0f ms; -> B's first provider call (fence epoch %llu -> %llu) "
	    "%.0f ms; take-over after the election %.0f ms (lease TTL %.0f "
	    "s)\n", n, r->lead_ms, (unsigned long long)r->e0,
	    (unsigned long long)r->e1, r->fence_ms, r->fence_ms - r->lead_ms,
	    FO_TTL_S);
	fflush(stdout);
out:
	if (!r->ok) {
		tail(cli);
		tail(alog);
		tail(blog);
	}
	tl_bench_dlv_close(&dlv);
	tl_log_close(blg);
	tl_bench_tallyd_stop(&daemons[2]);
	tl_bench_tallyd_stop(&daemons[1]);
	etcd_stop();
}

static void
phase_failover(const char *dir)
{
	int n1 = 300, n2 = (int)(10000 * scale), cap;
	struct fo a, b;
	char fig[64];

	if (n2 < n1)
		n2 = n1;
	printf("failover: lease TTL %.0f s; leader's tallyd killed (SIGKILL)"
	    " -> the new leader's first provider call (its fence)\n",
	    FO_TTL_S);
	fflush(stdout);
	failover(dir, n1, 300, &a);
	if (a.ok)
		tl_bench_target("cluster: failover at 300 grants",
		    "target <= TTL + 5 s = 9000 ms",
		    a.fence_ms <= (FO_TTL_S + 5) * 1000, "%.0f ms (election "
		    "%.0f ms)", a.fence_ms, a.lead_ms);
	else
		tl_bench_target("cluster: failover at 300 grants",
		    "target <= TTL + 5 s = 9000 ms", 0, "not measured");
	/* The larger mesh, as many grants as provisioning fits the time. */
	if (a.prov_s > 0) {
		cap = (int)(FO_BUDGET_S / (a.prov_s / n1));
		if (cap < n2) {
			printf("  provisioning 300 grants took %.1f s: %d "
			    "grants would take about %.0f s; using %d "
			    "(the bench's budget is %.0f s)\n", a.prov_s, n2,
			    a.prov_s / n1 * n2, cap < n1 ? n1 : cap,
			    FO_BUDGET_S);
			n2 = cap < n1 ? n1 : cap;
		}
	}
	n2 = n2 / 100 * 100;
	failover(dir, n2, FO_BUDGET_S * 2, &b);
	snprintf(fig, sizeof(fig), "%d grants", n2);
	if (b.ok && a.ok)
		tl_bench_target("cluster: failover at the larger mesh vs 300",
		    "ratio near 1 (cost does not grow with the mesh)",
		    b.fence_ms / a.fence_ms < 1.5, "%.0f ms at %s, %.2fx the "
		    "300-grant figure", b.fence_ms, fig, b.fence_ms /
		    a.fence_ms);
	else
		tl_bench_target("cluster: failover at the larger mesh vs 300",
		    "ratio near 1", 0, "not measured at %s", fig);
}

/* --- main ------------------------------------------------------------------- */

int
main(void)
{
	const char *s = getenv("BENCH_SCALE");
	char *dir = tl_test_tmpdir("bench-cluster"), lh[4400], cli[4400];
	char ed[4400];
	struct leader L;
	struct etcd e;
	uint64_t idx = 0;
	double t0 = tl_bench_now();
	int up;

	if (s != NULL && *s && atof(s) > 0)
		scale = atof(s);
	tl_bench_dirs(&src, &bin);
	tl_bench_atexit(cleanup);
	memset(&L, 0, sizeof(L));
	printf("bench_cluster: cluster mode on a three-member etcd over TLS "
	    "(tests/harness/etcd.sh)%s\n", scale != 1.0 ? " (BENCH_SCALE)" :
	    "");
	printf("  scratch %s\n", dir);
	fflush(stdout);

	snprintf(ed, sizeof(ed), "%s/etcd", dir);
	snprintf(lh, sizeof(lh), "%s/leader", dir);
	snprintf(cli, sizeof(cli), "%s/leader-cli.log", dir);
	up = etcd_start(ed, &e) == 0;
	if (up && init_founder(&e, lh, NULL, cli) != 0) {
		warn("tally init --etcd failed (see %s)", cli);
		up = 0;
	}
	if (up && lead_open(lh, &L) != 0) {
		lead_close(&L);
		up = 0;
	}
	if (up)
		printf("  this process leads mesh %s at epoch %llu\n",
		    L.conf.mesh, (unsigned long long)L.epoch);
	phase_commit(dir, &L, &idx);
	if (up)
		phase_follow(dir, &e, lh, &L, &idx);
	else
		tl_bench_target("cluster: follower lag p99 at 1,000 events/s",
		    "target < 500 ms", 0, "not measured");
	lead_close(&L);
	etcd_stop();

	phase_failover(dir);

	cleanup();
	printf("bench_cluster: %.1f s in all\n", tl_bench_now() - t0);
	tl_test_tmpdir_done(dir);
	return 0;
}
