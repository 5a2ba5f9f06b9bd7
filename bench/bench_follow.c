/*
 * bench_follow.c - a standby following the record (issue 17).
 *
 * A leader home whose tallyd publishes to the RabbitMQ stream
 * bench.record (tally publish configure --stream) and a standby home
 * whose tallyd --follow copies it, on a throwaway RabbitMQ on loopback
 * (tests/harness/rabbit.sh).  The bench appends events to the leader's
 * log itself (tl_append, as a tally command would) and measures, in
 * the same run, two readers of the same stream:
 *
 *   tallyd --follow   append on the leader (the event's timestamp) ->
 *                     appended, committed and visible on the standby
 *                     (a subscriber on its log, core/sub.h, inotify);
 *   plain consumer    librabbitmq-c through core/amqp.c consuming
 *                     the stream from "first" with the same prefetch,
 *                     doing nothing with a message but acking it:
 *                     append -> received.
 *
 * Phase "sustained": RATE events/s for SECONDS; p50/p99 lag of each.
 * Phase "burst": BURST events appended as fast as possible; the events/s
 * each reader keeps up with (first to last of the burst).
 * Prints figures; never asserts.  Env: TALLY_TMP, TALLY_SRC, TALLY_BIN,
 * BENCH_SCALE, TALLY_TEST_AMQP_* to use a running broker (guest/guest).
 * Phase "promotion" (BENCH_NO_PROMOTE=1 leaves it out): a PostgreSQL
 * (tests/harness/pg.sh) and GRANTS (300) grants provisioned by the
 * leader and followed; both daemons stopped; then the time from
 * `tally promote --yes` to the new leader's tallyd having fenced the
 * provider and re-verified every grant (its first pass comes next, with
 * nothing left to do).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/sub.h"
#include "core/amqp.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define STREAM		"bench.record"
#define PREFETCH	2048

static void
die(const char *fmt, ...)
{
	va_list ap;

	fputs("bench_follow: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* --- the broker ---------------------------------------------------------- */

struct broker {
	char	 host[256], user[128], password[128];
	int	 port;
	char	 script[4096], dir[4200];
	int	 started;
};

static int
sh(const char *script, const char *a, const char *b, const char *c)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execl("/bin/sh", "sh", script, a, b, c, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
broker_start(struct broker *b, const char *scratch)
{
	const char *src = getenv("TALLY_SRC"), *e;
	char port[16];
	int tries;

	if ((e = getenv("TALLY_TEST_AMQP_PORT")) != NULL && *e) {
		b->port = atoi(e);
		snprintf(b->host, sizeof(b->host), "%s",
		    getenv("TALLY_TEST_AMQP_HOST") ? getenv(
		    "TALLY_TEST_AMQP_HOST") : "127.0.0.1");
		snprintf(b->user, sizeof(b->user), "%s",
		    getenv("TALLY_TEST_AMQP_USER") ? getenv(
		    "TALLY_TEST_AMQP_USER") : "guest");
		snprintf(b->password, sizeof(b->password), "%s",
		    getenv("TALLY_TEST_AMQP_PASSWORD") ? getenv(
		    "TALLY_TEST_AMQP_PASSWORD") : "guest");
		return 0;
	}
	snprintf(b->script, sizeof(b->script), "%s/tests/harness/rabbit.sh",
	    src && *src ? src : ".");
	if (access(b->script, R_OK) != 0) {
		fprintf(stderr, "bench_follow: no %s\n", b->script);
		return -1;
	}
	snprintf(b->dir, sizeof(b->dir), "%s/rmq", scratch);
	for (tries = 0; tries < 5; tries++) {
		int p = 30000 + (int)((getpid() * 7919u + (unsigned)tries *
		    104729u) % 1500) * 20;

		snprintf(port, sizeof(port), "%d", p);
		b->started = 1;
		if (sh(b->script, "start", b->dir, port) == 0)
			break;
	}
	if (tries == 5)
		return -1;
	if (tl_test_env_get(b->dir, "TALLY_TEST_AMQP_PORT", port, sizeof(port)) != 0 ||
	    tl_test_env_get(b->dir, "TALLY_TEST_AMQP_HOST", b->host,
	    sizeof(b->host)) != 0 ||
	    tl_test_env_get(b->dir, "TALLY_TEST_AMQP_USER", b->user,
	    sizeof(b->user)) != 0 ||
	    tl_test_env_get(b->dir, "TALLY_TEST_AMQP_PASSWORD", b->password,
	    sizeof(b->password)) != 0)
		return -1;
	b->port = atoi(port);
	return 0;
}

static void
broker_stop(struct broker *b)
{
	if (b->started)
		sh(b->script, "stop", b->dir, NULL);
	b->started = 0;
}


static uint64_t head(struct tl_log *log);

static struct broker B;
static char pgdir[4200];
static int pg_started;
static pid_t leader = -1, follower = -1;

static void
cleanup(void)
{
	tl_bench_tallyd_stop(&follower);
	tl_bench_tallyd_stop(&leader);
	broker_stop(&B);
	if (pg_started)
		tl_bench_harness(getenv("TALLY_SRC") ? getenv("TALLY_SRC") :
		    ".", "pg.sh", "stop", pgdir, NULL);
	pg_started = 0;
}

static uint64_t
count_type(struct tl_log *log, const char *type)
{
	struct tl_txn *t;
	struct tl_iter *it;
	struct tl_filter f = { 0 };
	struct tl_event ev;
	uint64_t n = 0;

	f.type = type;
	if (tl_log_begin(log, TL_TXN_RDONLY, &t) != 0)
		return 0;
	if (tl_iter_open(t, &f, &it) == 0) {
		while (tl_iter_next(it, &ev) == 0)
			n++;
		tl_iter_close(it);
	}
	tl_log_abort(t);
	return n;
}

static int
file_has(const char *path, const char *needle)
{
	char line[2048];
	FILE *f = fopen(path, "r");
	int found = 0;

	if (f == NULL)
		return 0;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

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

/* Promotion time at n grants; prints it. */
static void
promotion(const char *src, const char *bin, const char *dir,
    const char *lh, const char *fh, const char *dlog, int n)
{
	char mf[4400], pgmf[4200], set1[64], set2[160], pwfile[4200];
	char user[128], port[16], logdir[4400], key[4400], fkey[4400];
	char flog[4400], mod[32], nkey[4400];
	struct tl_log *ll, *fl;
	FILE *fp;
	double t0, t1;
	int i;

	snprintf(pgdir, sizeof(pgdir), "%s/pg", dir);
	if (tl_bench_pg_start(src, pgdir, 47000 + (int)(getpid() % 500) * 2,
	    port, sizeof(port)) != 0)
		die("PostgreSQL could not be started");
	pg_started = 1;
	if (tl_test_env_get(pgdir, "TALLY_TEST_PG_USER", user,
	    sizeof(user)) != 0 || tl_test_env_get(pgdir,
	    "TALLY_TEST_PG_PWFILE", pwfile, sizeof(pwfile)) != 0)
		die("%s/env is incomplete", pgdir);
	snprintf(mf, sizeof(mf), "%s/consumers.yaml", dir);
	if ((fp = fopen(mf, "w")) == NULL)
		die("%s", mf);
	for (i = 1; i <= n; i++)
		fprintf(fp, "---\nmodule: c%04d\n"
		    "env: {DB_HOST: \"\", DB_PORT: \"\", DB_NAME: \"\", "
		    "DB_USER: \"\", DB_PASSWORD: \"\"}\n"
		    "requires:\n  db:\n    type: postgres-database\n"
		    "    from: postgres\n"
		    "    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME,"
		    " user: DB_USER, password: DB_PASSWORD}\n", i);
	fclose(fp);
	snprintf(pgmf, sizeof(pgmf), "%s/examples/postgres.yaml", src);
	snprintf(set1, sizeof(set1), "port=%s", port);
	snprintf(set2, sizeof(set2), "admin-user=%s", user);
	/* The node's key, outside the homes (tally node add refuses it). */
	snprintf(nkey, sizeof(nkey), "%s/node-a.key", dir);
	if (tl_bench_tally(bin, lh, NULL, dlog, "node", "add", "node-a",
	    "--routable-name=127.0.0.1", "--key-out", nkey, NULL) != 0 ||
	    tl_bench_tally(bin, lh, NULL, dlog, "apply", pgmf, mf, NULL) != 0 ||
	    tl_bench_tally(bin, lh, pwfile, dlog, "assign", "postgres",
	    "node-a", "--set", set1, "--set", set2, "--secret",
	    "admin-password", NULL) != 0)
		die("setting up %d grants failed (see %s)", n, dlog);
	for (i = 1; i <= n; i++) {
		snprintf(mod, sizeof(mod), "c%04d", i);
		if (tl_bench_tally(bin, lh, NULL, dlog, "assign", mod,
		    "node-a", NULL) != 0)
			die("tally assign %s failed", mod);
	}
	snprintf(logdir, sizeof(logdir), "%s/log", lh);
	snprintf(flog, sizeof(flog), "%s/log", fh);
	if (tl_log_open(logdir, TL_LOG_RDONLY, &ll) != 0 ||
	    tl_log_open(flog, TL_LOG_RDONLY, &fl) != 0)
		die("cannot open the logs");
	t0 = tl_bench_now();
	while (count_type(ll, "grant.provisioned") < (uint64_t)n ||
	    head(fl) < head(ll)) {
		if (tl_bench_now() - t0 > 300)
			die("%d grants not provisioned and followed in 300 s", n);
		tl_bench_msleep(200);
	}
	tl_bench_tallyd_stop(&leader);
	tl_bench_msleep(1000);
	tl_bench_tallyd_stop(&follower);
	if (head(fl) != head(ll))
		die("the standby is at %llu, the leader at %llu",
		    (unsigned long long)head(fl), (unsigned long long)head(ll));
	tl_log_close(ll);
	tl_log_close(fl);
	snprintf(key, sizeof(key), "%s/master.key", lh);
	snprintf(fkey, sizeof(fkey), "%s/master.key", fh);
	if (copy_file(key, fkey) != 0)
		die("cannot copy the master key");
	snprintf(flog, sizeof(flog), "%s/promoted.log", dir);
	t0 = tl_bench_now();
	if (tl_bench_tally(bin, fh, NULL, flog, "promote", "--yes", NULL) != 0)
		die("tally promote failed (see %s)", flog);
	if ((follower = tl_bench_tallyd_start(bin, fh, flog, "--interval",
	    "5", NULL)) < 0)
		die("the new leader's tallyd did not start (see %s)", flog);
	while (!file_has(flog, "epoch 2: re-verified")) {
		if (tl_bench_now() - t0 > 300)
			die("no re-verification after 300 s (see %s)", flog);
		tl_bench_msleep(5);
	}
	t1 = tl_bench_now();
	printf("  promotion at %d grants: tally promote -> fenced and %d "
	    "grant(s) re-verified by the new leader: %.0f ms\n", n, n,
	    (t1 - t0) * 1000);
	tl_bench_tallyd_stop(&follower);
}

static uint64_t
wall(void)
{
	return tl_bench_ns(CLOCK_REALTIME);
}

/* Child: "SEQ NS" for every event of the standby's log up to last. */
static void
sub_child(const char *logdir, uint64_t last, const char *out)
{
	struct tl_sub_opts o = TL_SUB_OPTS_INIT;
	struct tl_sub *s = NULL;
	struct tl_event ev;
	FILE *f = fopen(out, "w");
	uint64_t end = tl_sub_deadline(300000);
	int rc;

	o.flags = TL_SUB_RDONLY;
	while (tl_sub_open(logdir, &o, &s) != 0 && tl_sub_clock() < end)
		tl_bench_msleep(20);
	if (f == NULL || s == NULL)
		_exit(1);
	for (;;) {
		rc = tl_sub_next(s, end, &ev);
		if (rc == EINTR)
			continue;
		if (rc != 0)
			break;
		fprintf(f, "%llu %llu\n", (unsigned long long)ev.seq,
		    (unsigned long long)wall());
		if (ev.seq >= last)
			break;
	}
	fclose(f);
	tl_sub_close(s);
	_exit(0);
}

/* Child: a plain consumer of the stream from "first". */
static void
amqp_child(uint64_t last, const char *out)
{
	struct tl_amqp_conf c;
	struct tl_amqp *a = NULL;
	struct tl_amqp_delivery d;
	char why[TL_WHY_MAX];
	FILE *f = fopen(out, "w");
	uint64_t end = tl_sub_deadline(300000), n = 0;
	int rc;

	memset(&c, 0, sizeof(c));
	snprintf(c.host, sizeof(c.host), "%s", B.host);
	c.port = B.port;
	snprintf(c.user, sizeof(c.user), "%s", B.user);
	c.password = B.password;
	c.timeout_ms = 5000;
	while (tl_sub_clock() < end) {
		if (tl_amqp_connect(&c, &a, why) == 0 &&
		    tl_amqp_consume_stream(a, STREAM, PREFETCH, -1) == 0)
			break;
		tl_amqp_close(a);
		a = NULL;
		tl_bench_msleep(100);
	}
	if (a == NULL || f == NULL)
		_exit(1);
	while (tl_sub_clock() < end) {
		rc = tl_amqp_next(a, tl_sub_deadline(1000), &d);
		if (rc == TL_ETIMEDOUT)
			continue;
		if (rc != 0)
			break;
		fprintf(f, "%lld %llu\n", (long long)d.seq,
		    (unsigned long long)wall());
		tl_amqp_delivery_free(&d);
		if (++n % 256 == 0)
			tl_amqp_ack(a, d.tag, 1);
		if (d.seq >= (int64_t)last)
			break;
	}
	fclose(f);
	tl_amqp_close(a);
	_exit(0);
}

static int
append_n(struct tl_txn *t, void *arg)
{
	unsigned n = *(unsigned *)arg, i;
	static const char body[] = "\x81\xa1" "k" "\xa3" "val";
	struct tl_append a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.type = "bench.appended";
	a.stream = "bench/follow";
	a.expect = TL_VER_ANY;
	a.actor = "bench";
	a.body = body;
	a.body_len = sizeof(body) - 1;
	for (i = 0; i < n; i++)
		if ((rc = tl_append(t, &a, NULL, NULL)) != 0)
			return rc;
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

/* Reads "SEQ NS" lines into at[seq] (first seen). */
static void
load_times(const char *path, uint64_t *at, uint64_t last)
{
	FILE *f = fopen(path, "r");
	unsigned long long s, ns;

	if (f == NULL)
		return;
	while (fscanf(f, "%llu %llu", &s, &ns) == 2)
		if (s <= last && at[s] == 0)
			at[s] = ns;
	fclose(f);
}

static void
report(const char *who, const uint64_t *ts, const uint64_t *at,
    uint64_t s0, uint64_t s1, uint64_t b0, uint64_t b1)
{
	double *lag = calloc(s1 - s0 + 1, sizeof(double));
	int n = 0, miss = 0;
	uint64_t s;
	double rate = 0;

	for (s = s0; s <= s1; s++) {
		if (at[s] == 0 || at[s] < ts[s]) {
			miss++;
			continue;
		}
		lag[n++] = (double)(at[s] - ts[s]) / 1e6;
	}
	qsort(lag, (size_t)n, sizeof(double), tl_bench_cmp_double);
	if (at[b1] > at[b0] && at[b0] != 0)
		rate = (double)(b1 - b0) / ((double)(at[b1] - ts[b0]) / 1e9);
	printf("    %-16s lag p50 %7.2f ms  p99 %7.2f ms  (%d events%s)  "
	    "burst %8.0f events/s\n", who, n ? lag[n / 2] : 0,
	    n ? lag[(n * 99) / 100] : 0, n, miss ? ", some missing" : "",
	    rate);
	free(lag);
}

int
main(void)
{
	const char *src, *bin;
	char *dir = tl_test_tmpdir("bench-follow");
	char lh[4200], fh[4200], url[512], pwf[4400], dlog[4400];
	char subout[4400], amqpout[4400], logdir[4400];
	int scale = tl_bench_envint("BENCH_SCALE", 1, 1, 100);
	unsigned rate = 1000, secs = 5, burst = 20000u * (unsigned)scale;
	unsigned step, i;
	uint64_t base, s0, s1, b0, b1, last, *ts, *fat, *pat;
	pid_t sp, ap;
	struct tl_log *log;
	struct tl_txn *t;
	struct tl_event ev;
	FILE *f;
	double t0;

	tl_bench_dirs(&src, &bin);
	tl_bench_atexit(cleanup);
	if (broker_start(&B, dir) != 0)
		die("cannot start RabbitMQ");
	snprintf(lh, sizeof(lh), "%s/leader", dir);
	snprintf(fh, sizeof(fh), "%s/standby", dir);
	snprintf(url, sizeof(url), "amqp://%s:%d/", B.host, B.port);
	snprintf(pwf, sizeof(pwf), "%s/pw", dir);
	snprintf(dlog, sizeof(dlog), "%s/tallyd.log", dir);
	if ((f = fopen(pwf, "w")) == NULL)
		die("%s: %s", pwf, strerror(errno));
	fprintf(f, "%s\n", B.password);
	fclose(f);
	if (tl_bench_tally(bin, lh, NULL, NULL, "init", NULL) != 0 ||
	    tl_bench_tally(bin, lh, pwf, NULL, "publish", "configure", "--url",
	    url, "--user", B.user, "--secret", "password", "--stream", STREAM,
	    "--no-acks", "--no-node-queues", NULL) != 0)
		die("tally init / publish configure failed");
	/*
	 * The standby is given the leader's public key, as an operator
	 * does (tally publish status prints it): then it keeps each
	 * event's signature, and tally promote accepts what it copied.
	 */
	{
		char st[1200], key[80] = "", buf[4096], *at;
		size_t n = 0;
		FILE *sf;

		snprintf(st, sizeof(st), "%s/publish-status.json", dir);
		if (tl_bench_tally(bin, lh, NULL, st, "publish", "status",
		    "--json", NULL) != 0 || (sf = fopen(st, "r")) == NULL)
			die("tally publish status failed");
		n = fread(buf, 1, sizeof(buf) - 1, sf);
		buf[n] = '\0';
		fclose(sf);
		if ((at = strstr(buf, "\"signing_key\":\"")) == NULL ||
		    sscanf(at + 15, "%64[0-9a-f]", key) != 1)
			die("no signing_key in tally publish status");
		if (tl_bench_tally(bin, fh, NULL, NULL, "init", "--standby",
		    "--leader-key", key, NULL) != 0)
			die("tally init --standby failed");
	}
	if ((leader = tl_bench_tallyd_start(bin, lh, dlog, "--interval", "5",
	    NULL)) < 0)
		die("the leader's tallyd did not start (see %s)", dlog);
	snprintf(logdir, sizeof(logdir), "%s/log", lh);
	if (tl_log_open(logdir, 0, &log) != 0)
		die("cannot open %s", logdir);
	/* The stream exists once the publisher has published. */
	t0 = tl_bench_now();
	while (tl_bench_now() - t0 < 30) {
		uint64_t ck = 0;

		if (tl_log_begin(log, TL_TXN_RDONLY, &t) == 0) {
			tl_ckpt_get(t, "publisher", &ck);
			tl_log_abort(t);
		}
		if (ck > 0 && ck == head(log))
			break;
		tl_bench_msleep(50);
	}
	if ((follower = tl_bench_tallyd_start(bin, fh, dlog, "--follow",
	    "--amqp", url, "--stream", STREAM, NULL)) < 0)
		die("tallyd --follow did not start (see %s)", dlog);

	base = head(log);
	s0 = base + 1;
	s1 = base + (uint64_t)rate * secs;
	b0 = s1 + 1;
	b1 = s1 + burst;
	last = b1;
	snprintf(subout, sizeof(subout), "%s/standby.times", dir);
	snprintf(amqpout, sizeof(amqpout), "%s/amqp.times", dir);
	fflush(stdout);
	fflush(stderr);
	if ((sp = fork()) == 0) {
		snprintf(logdir, sizeof(logdir), "%s/log", fh);
		sub_child(logdir, last, subout);
	}
	if ((ap = fork()) == 0)
		amqp_child(last, amqpout);
	tl_bench_msleep(500);

	printf("bench_follow: tallyd --follow vs a plain AMQP consumer of the "
	    "same stream (RabbitMQ on loopback)\n");
	printf("  sustained %u events/s for %u s, then a burst of %u\n", rate,
	    secs, burst);
	/* Sustained: 10 events every 10 ms. */
	step = rate / 100;
	t0 = tl_bench_now();
	for (i = 0; i < rate * secs / step; i++) {
		double due = t0 + (double)i * 0.01;

		while (tl_bench_now() < due)
			tl_bench_msleep(1);
		if (tl_log_write(log, append_n, &step) != 0)
			die("append failed");
	}
	/* Burst: as fast as the log takes them, 500 per transaction. */
	for (i = 0; i < burst; i += 500) {
		unsigned n = burst - i < 500 ? burst - i : 500;

		if (tl_log_write(log, append_n, &n) != 0)
			die("append failed");
	}
	waitpid(sp, NULL, 0);
	waitpid(ap, NULL, 0);

	ts = calloc(last + 1, sizeof(*ts));
	fat = calloc(last + 1, sizeof(*fat));
	pat = calloc(last + 1, sizeof(*pat));
	if (ts == NULL || fat == NULL || pat == NULL)
		die("out of memory");
	if (tl_log_begin(log, TL_TXN_RDONLY, &t) != 0)
		die("read");
	for (i = (unsigned)s0; i <= last; i++)
		if (tl_log_get(t, i, &ev) == 0)
			ts[i] = ev.ts;
	tl_log_abort(t);
	load_times(subout, fat, last);
	load_times(amqpout, pat, last);
	report("tallyd --follow", ts, fat, s0, s1, b0, b1);
	report("plain consumer", ts, pat, s0, s1, b0, b1);
	tl_log_close(log);
	free(ts);
	free(fat);
	free(pat);
	if (!getenv("BENCH_NO_PROMOTE"))
		promotion(src, bin, dir, lh, fh, dlog,
		    tl_bench_envint("GRANTS", 300, 1, 5000));
	cleanup();
	tl_test_tmpdir_done(dir);
	return 0;
}
