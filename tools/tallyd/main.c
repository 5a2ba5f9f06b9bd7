/*
 * tallyd - the reactor daemon.
 *
 * Runs in the foreground (a supervisor or systemd keeps it), logs to
 * stderr, and drives providers toward the log: each pass provisions,
 * delivers and revokes (reactors/provision.c).  It wakes within
 * milliseconds of an event appended by any process (inotify on the
 * log's data file: LMDB writes it with pwrite, no polling), and
 * periodically regardless, so that it is level-triggered: whatever a
 * missed wakeup or a crash left undone is found again.
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "core/sub.h"
#include "core/version.h"
#include "reactors/ack.h"
#include "reactors/epoch.h"
#include "reactors/rx.h"
#include "reactors/follow.h"
#include "helper.h"
#include "reactors/metrics.h"
#include "tools/tallyd/cluster.h"
#include "tools/exit.h"

/* One table with tally's (tools/exit.h), printed by --help. */
#define EXIT_OK		TL_EXIT_OK
#define EXIT_FAIL	TL_EXIT_FAIL
#define EXIT_USAGE	TL_EXIT_USAGE
#define EXIT_NOTFOUND	TL_EXIT_NOTFOUND
#define EXIT_REFUSED	TL_EXIT_REFUSED
#define EXIT_CORRUPT	TL_EXIT_CORRUPT
#define EXIT_UNHEALTHY	TL_EXIT_UNHEALTHY
#define EXIT_LOCKED	TL_EXIT_LOCKED
#define EXIT_DEPOSED	TL_EXIT_DEPOSED

static const char usage[] =
"usage: tallyd [--home DIR] [--once [--json]] [--interval SECONDS]\n"
"              [--workers N] [--once-timeout SECONDS] [--metrics ADDR]\n"
"              [-v]\n"
"       tallyd --follow --amqp URL --stream NAME [--user U --secret password]\n"
"              [--amqp-ca FILE] [--report-to QUEUE]\n"
"       tallyd --version\n"
"\n"
"The reactor daemon: provisions requested grants on their providers,\n"
"delivers credentials to every holder, revokes what was revoked.  Runs\n"
"in the foreground and logs to stderr; SIGTERM or SIGINT finish the\n"
"step in flight and exit.  One tallyd per log (a lock on its data file;\n"
"HOME/tallyd.lock names the holder).\n"
"\n"
"  --once          reconcile until nothing is left to do, then exit\n"
"                  (exit 6 if work remains after --once-timeout, 60 s,\n"
"                  or if anything is unhealthy then, as tally status)\n"
"  --loss MODULE   what removing MODULE would lose now, asked of its\n"
"                  providers (what tally remove runs; JSON lines)\n"
"  --find-adopt MESH [GRANT...]\n"
"                  the objects mesh MESH made for these grants (none:\n"
"                  every grant whose names are keyed), found on their\n"
"                  providers by their mark (what tally adopt runs; JSON\n"
"                  lines)\n"
"  --prepare DRIVER  what tally assign records beyond what it is given:\n"
"                  a provider's settings made or checked by its driver\n"
"                  (the mesh CA's key and certificate; lines on stdin\n"
"                  and stdout, values in hex)\n"
"  --check [--grant G | --provider P] [--actor A]\n"
"                  verify now and exit, beside a running daemon: what\n"
"                  tally check runs (one JSON line per finding on stdout,\n"
"                  then {\"checked\", \"unhealthy\"}); deposed: exit 9\n"
"  --json          with --once: its verdict as one JSON line on stdout\n"
"                  ({\"exit\", \"verified\", \"unhealthy\"}: grants checked\n"
"                  by the closing verification, and how many were not\n"
"                  healthy)\n"
"  --interval S    level-triggered resync period (default 5)\n"
"  --verify-interval S  how often each grant is verified (default 30)\n"
"  --verify-login-every N  with a bulk check, each grant still logs in\n"
"                  as its consumer every N-th check (default 30)\n"
"  --workers N     driver sessions per provider in parallel (default 4)\n"
"  --max-rotations N  scheduled rotations at once per provider (default 4;\n"
"                  certificate renewals, which call no provider, are not held)\n"
"  --follow        on a standby's home (tally init --standby): copy the\n"
"                  leader's record from the RabbitMQ stream NAME into\n"
"                  this log, checking every link; no reconciling.  Stops\n"
"                  (exit 5) at a gap, a broken link or a rewritten past,\n"
"                  naming the event.  With the master key in the home,\n"
"                  a message without the leader's authenticator is\n"
"                  refused and passed over.  --secret password reads the\n"
"                  broker password from standard input (default user guest);\n"
"                  every 5 s the standby reports its position (the head\n"
"                  and its hash) to the leader's acks queue, QUEUE (default\n"
"                  tally.acks; \"\" reports nothing), for tally status and\n"
"                  the board;\n"
"                  an amqps:// URL is TLS, the broker verified against\n"
"                  --amqp-ca FILE (else the system's CAs) and its name\n"
"  --metrics ADDR  serve GET /metrics (the Prometheus text format) on\n"
"                  ADDR, HOST:PORT or PORT (127.0.0.1): grants by provider\n"
"                  and state, providers up, pass durations, verification\n"
"                  age, drift, rotations and acks waiting, refusals, the\n"
"                  log's head and size, the epoch (tallyd(8))\n"
"  --commit        what the CLI runs in a cluster's home: commits the\n"
"                  events of one write transaction (stdin) on etcd, if\n"
"                  this control plane leads (exit 7 naming the leader\n"
"                  if not)\n"
"  -v              debug logging\n"
"\n"
"In a cluster's home (tally init --etcd; HOME/cluster.json) tallyd\n"
"follows the record on etcd and campaigns for the leader key; once it\n"
"wins, it applies what is left, records control-plane.promoted at the\n"
"key's revision (the epoch) and leads: every commit is an etcd\n"
"transaction first, and no provider is called once the lease could\n"
"lapse (docs/standby.md).\n"
"\n"
"Deposed (exit 9): a provider is fenced at a higher epoch (checked at\n"
"start, every resync, every provider session), or the stream holds a\n"
"later promotion (at start): another control plane was promoted (tally\n"
"promote), and this one stops.  In a cluster: its lease lapsed or\n"
"another holds the leader key.\n";

static volatile sig_atomic_t stop;
static int sigpipe_w = -1;
/* A cluster's leader (tallyd/cluster.h); NULL in an embedded home. */
static struct tl_tallyd_cluster *clu;
/* --metrics: the server, and the figures only this loop keeps. */
static struct tl_mx *mx;
static struct tl_mx_state mxst;
static int verbose;
/* The lowest level shown when not verbose: a helper mode shows warnings. */
static int quiet_below = TL_RX_INFO;

static void
on_signal(int sig)
{
	int saved = errno;

	(void)sig;
	stop = 1;
	if (sigpipe_w >= 0 && write(sigpipe_w, "x", 1) < 0) {
		/* the pipe is full: the loop wakes anyway */
	}
	errno = saved;
}

static void
vlog(int level, const char *fmt, va_list ap)
{
	static const char *const names[] = { "debug", "info", "warn", "error" };
	struct timespec ts;
	struct tm tm;
	char when[32];

	if (level < quiet_below && !verbose)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	/* One line whole: the verifier's thread logs too (verify.c). */
	flockfile(stderr);
	fprintf(stderr, "%s.%03ldZ tallyd[%ld] %s: ", when,
	    ts.tv_nsec / 1000000, (long)getpid(), names[level & 3]);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	funlockfile(stderr);
}

static void
logx(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
logx(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

/*
 * One daemon per log.  The exclusion is the kernel's lock on the log's
 * data file (tl_log_lock_daemon), held for life in *datafd: removing
 * tallyd.lock cannot let a second daemon in.  tallyd.lock only names
 * the holder for people and scripts.
 */
static int
take_lock(const char *home, int *datafd)
{
	char path[1200], logdir[1200], buf[32];
	ssize_t n;
	long holder = 0;
	int fd, rc;

	snprintf(logdir, sizeof(logdir), "%s/log", home);
	rc = tl_log_lock_daemon(logdir, datafd, &holder);
	if (rc == TL_ELOCKED) {
		snprintf(buf, sizeof(buf), "%ld", holder);
		logx(TL_RX_ERR, "another tallyd (pid %s) holds the log at %s: "
		    "one daemon per log", holder ? buf : "?", logdir);
		return -2;
	}
	if (rc != 0 && rc != TL_ENOTFOUND) {
		logx(TL_RX_ERR, "cannot lock %s/data.mdb: %s", logdir,
		    tl_strerror(rc));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/tallyd.lock", home);
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
		logx(TL_RX_ERR, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		logx(TL_RX_ERR, "another tallyd (pid %s) holds %s: one daemon "
		    "per log", buf[0] ? buf : "?", path);
		close(fd);
		return -2;
	}
	if (ftruncate(fd, 0) == 0) {
		n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
		if (pwrite(fd, buf, (size_t)n, 0) != n)
			logx(TL_RX_WARN, "cannot write pid to %s", path);
	}
	return fd;	/* held until exit */
}

/*
 * Removes HOME/deliver, where a tally of before wrote every holder's
 * plaintext credentials (and, half-written, NAME.env.tmp.PID): tally
 * writes none any more (the nodes' agents do, on the nodes), and files
 * that nothing maintains would keep valid credentials on the control
 * plane's disk.  With the home's lock held nothing else writes there.
 */
static void
sweep_deliveries(const char *home)
{
	char dir[1200], sub[1500], path[2600];
	struct dirent *n, *f;
	DIR *dd, *fd;
	unsigned files = 0;

	snprintf(dir, sizeof(dir), "%s/deliver", home);
	if ((dd = opendir(dir)) == NULL)
		return;
	while ((n = readdir(dd)) != NULL) {
		if (strcmp(n->d_name, ".") == 0 || strcmp(n->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, n->d_name);
		if ((fd = opendir(sub)) != NULL) {
			while ((f = readdir(fd)) != NULL) {
				if (strcmp(f->d_name, ".") == 0 ||
				    strcmp(f->d_name, "..") == 0)
					continue;
				snprintf(path, sizeof(path), "%s/%s", sub,
				    f->d_name);
				if (unlink(path) == 0)
					files++;
			}
			closedir(fd);
			if (rmdir(sub) != 0)
				logx(TL_RX_WARN, "cannot remove %s: %s", sub,
				    strerror(errno));
		} else if (unlink(sub) == 0)
			files++;
	}
	closedir(dd);
	if (rmdir(dir) != 0)
		logx(TL_RX_WARN, "cannot remove %s: %s", dir, strerror(errno));
	else
		logx(TL_RX_INFO, "removed %s (%u file(s)): the control plane "
		    "keeps no plaintext credential; the nodes' agents write "
		    "them (tally-node)", dir, files);
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

/*
 * The log verified up to its head, from where it was verified before:
 * the whole log at start (before the first provider call), then only
 * the events appended since (one hash each).  Events appended after this check are checked again as
 * the pass folds them (the fold checks the chain too).
 */
static int
verify_chain(struct tl_log *log, struct tl_chain *c)
{
	struct tl_txn *t;
	uint64_t bad = 0;
	char why[TL_WHY_MAX] = "";
	int rc;

	if ((rc = tl_log_begin(log, TL_TXN_RDONLY, &t)) != 0)
		return 0;	/* the pass reports it */
	rc = tl_log_verify_more(t, c, &bad, why);
	tl_log_abort(t);
	if (rc != 0)
		logx(TL_RX_ERR, "the log (%s/data.mdb) does not verify at "
		    "event %llu (%s): refusing to act on it or anything after "
		    "it; see tally verify", tl_log_dir(log),
		    (unsigned long long)bad, why[0] ? why : tl_strerror(rc));
	return rc;
}

/* tallyd moves the verified record every this many events it checked. */
#define RECORD_EVERY	1024
static uint64_t verified_rec;	/* where it last moved it */

/*
 * Moves the log's verified record (log.h) to where this daemon has
 * verified, so that the CLI's cheap check walks only what came after:
 * when it is RECORD_EVERY events behind, or with force (after the walk
 * at start, and when stopping).  Best effort: one small write.
 */
static void
note_verified(struct tl_log *log, const struct tl_chain *c, uint64_t *rec,
    int force)
{
	struct tl_txn *t;

	if (c->seq == 0 || c->seq == *rec ||
	    (!force && c->seq < *rec + RECORD_EVERY))
		return;
	if (tl_log_begin(log, 0, &t) != 0)
		return;
	if (tl_log_set_verified(t, c) != 0) {
		tl_log_abort(t);
		return;
	}
	if (tl_log_commit(t) == 0)
		*rec = c->seq;
}

static int
mesh_cb(struct tl_txn *t, void *arg)
{
	return tl_mesh_ensure(t, "tallyd", arg, NULL);
}

/*
 * The epoch's fence on every provider (reactors/epoch.h), before the
 * first pass and then once per resync period: 1 when this tallyd is
 * deposed and must stop, 0 otherwise.
 */
static int
fence_check(struct tl_rx *rx, uint64_t *epochp, int first)
{
	unsigned fenced = 0, unfenced = 0;
	int deposed = 0, rc;

	/*
	 * Past its lease's margin a cluster's leader calls no provider (the
	 * first check, which learns the epoch's leader, runs just after
	 * the election, well within it).
	 */
	if (!first && clu != NULL &&
	    tl_cl_now_ms() >= tl_cl_act_until(clu->cl))
		return 0;
	if ((rc = tl_ep_fence(rx, epochp, first, &deposed, &fenced,
	    &unfenced)) != 0) {
		logx(TL_RX_ERR, "fence: %s", tl_strerror(rc));
		return 0;
	}
	if (deposed)
		return 1;
	if (first)
		logx(TL_RX_INFO, "epoch %llu: fenced %u provider(s)%s",
		    (unsigned long long)*epochp, fenced, unfenced ?
		    " (some could not be: see above)" : "");
	return 0;
}

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * The reactors, in the order a round runs them (the shape of Redis's
 * serverCron: one table, one clock, one place that computes the next
 * wake-up).  Each has one signature (tl_rx_run_fn, reactors/rx.h) and
 * a period; a reactor is due when its period or its own wish (a
 * backoff's end, a copy to look at) comes, and, with R_EVENTS, when the
 * log's head moved.  The chain (R_CHAIN) is the reconciliation: when
 * any of it did work, all of it is due again at once (a provisioned
 * grant has migrations, a moved binding a grant to create), and the
 * other reactors wait for the round where it rests.  A failed
 * provisioner pass (R_GATE) holds the rest of the chain for the round.
 * --once runs no R_DAEMON reactor: its verification is one forced pass
 * at the end.
 */
enum {
	R_EVENTS = 0x1,		/* due when the head moved */
	R_CHAIN = 0x2,		/* part of the reconciliation */
	R_GATE = 0x4,		/* its failure holds the chain */
	R_DAEMON = 0x8,		/* not in --once */
	R_LASTERR = 0x10,	/* its errors name the log's last error */
	/*
	 * Not held while the chain is busy: the record goes out while work
	 * goes on, so a standby following the stream is not a whole burst
	 * behind.
	 */
	R_NOHOLD = 0x20
};

struct reactor {
	const char		*name;	/* in its error messages */
	const char		*metric;	/* its label in --metrics */
	tl_rx_run_fn		 run;
	unsigned		 flags;
	uint64_t		 period_ms;	/* 0: none (wishes, events) */
	uint64_t		 due_ms;	/* next run, monotonic */
	int			 rc;		/* of its last run */
	struct tl_rx_result	 last;
};

static struct reactor reactors[] = {
	{ "pass failed", "provision", tl_rx_run_provision, R_EVENTS |
	    R_CHAIN | R_GATE | R_LASTERR, 0, 0, 0, { 0 } },
	{ "acks", "acks", tl_rx_run_acks, R_EVENTS | R_CHAIN, 0, 0, 0,
	    { 0 } },
	{ "certificates", "certificates", tl_rx_run_issue, R_EVENTS |
	    R_CHAIN, 0, 0, 0, { 0 } },
	{ "revocation list", "crl", tl_rx_run_crl, R_EVENTS | R_CHAIN, 0, 0,
	    0, { 0 } },
	{ "migrations", "migrations", tl_rx_run_migrate, R_EVENTS | R_CHAIN,
	    0, 0, 0, { 0 } },
	{ "rotation", "rotation", tl_rx_run_rotate, R_EVENTS | R_CHAIN, 0, 0,
	    0, { 0 } },
	{ "admin rotation", "admin_rotation", tl_rx_run_rotate_admin,
	    R_EVENTS | R_CHAIN, 0, 0, 0, { 0 } },
	{ "rebind", "rebind", tl_rx_run_rebind, R_EVENTS | R_CHAIN, 0, 0, 0,
	    { 0 } },
	{ "verification failed", "verification", tl_rx_run_verify, R_DAEMON,
	    0, 0, 0, { 0 } },
	{ "publisher", "publisher", tl_rx_run_publish, R_EVENTS | R_LASTERR |
	    R_NOHOLD, 0, 0, 0, { 0 } },
};
#define NREACTORS	(sizeof(reactors) / sizeof(reactors[0]))
/* Each reactor's pass durations, for --metrics. */
static struct tl_mx_hist passhist[NREACTORS];
static const char *passname[NREACTORS];

/*
 * A scrape waits (metrics.h): the figures now, in this thread, which
 * alone may read the log beside its writes.
 */
static void
metrics_serve(struct tl_rx *rx)
{
	char *text;
	size_t len;
	int rc;

	if (mx == NULL || !tl_mx_wanted(mx))
		return;
	if ((rc = tl_mx_text(rx, &mxst, &text, &len)) != 0) {
		logx(TL_RX_WARN, "--metrics: %s", tl_strerror(rc));
		return;
	}
	tl_mx_publish(mx, text, len);
}

/* When r runs next: its period, or sooner if it asked. */
static void
reschedule(struct reactor *r, uint64_t now)
{
	uint64_t wish = r->last.wake_ns ? now + (r->last.wake_ns +
	    999999) / 1000000 : UINT64_MAX;

	r->due_ms = r->period_ms ? now + r->period_ms : UINT64_MAX;
	if (wish < r->due_ms)
		r->due_ms = wish;
}

/* What one reactor's run says in the log, as tallyd always said it. */
static void
report(struct tl_rx *rx, const struct reactor *r)
{
	if (r->rc != 0) {
		if (r->flags & R_LASTERR)
			logx(TL_RX_ERR, "%s: %s (%s)", r->name,
			    tl_strerror(r->rc), tl_log_lasterr(rx->log));
		else
			logx(TL_RX_ERR, "%s: %s", r->name, tl_strerror(r->rc));
	} else if (r->run == tl_rx_run_verify && r->last.checked > 0)
		logx(TL_RX_DEBUG, "verified %u grant(s), %u not healthy",
		    r->last.checked, r->last.unhealthy);
	else if (r->run == tl_rx_run_publish && r->last.done > 0)
		logx(TL_RX_DEBUG, "published %u event(s)", r->last.done);
}

/*
 * Does the chain rest?  Every part's last run did nothing, left
 * nothing waiting or running, and the provisioner's did not fail.
 */
static int
chain_rests(void)
{
	size_t i;

	for (i = 0; i < NREACTORS; i++) {
		const struct reactor *r = &reactors[i];

		if (!(r->flags & R_CHAIN))
			continue;
		if (r->last.done > 0 || r->last.pending > 0 ||
		    r->last.running > 0 || ((r->flags & R_GATE) && r->rc))
			return 0;
	}
	return 1;
}

/* What --once's verdict found, for --json. */
static unsigned once_checked, once_bad;

/* --once's end: one forced verification, and the mesh's health. */
static int
once_verdict(struct tl_rx *rx)
{
	struct tl_rx_verify_opts vo;
	unsigned checked = 0, bad = 0, blocked = 0;
	uint64_t vn;
	size_t i;
	int rc, hl = 0, ex = EXIT_OK;


	memset(&vo, 0, sizeof(vo));
	vo.interval_ns = rx->verify_interval_ns;
	vo.force = 1;
	vo.login_all = 1;	/* a verdict proves every login */
	for (i = 0; i < NREACTORS; i++)
		blocked += reactors[i].last.blocked;
	rc = tl_rx_verify(rx, &vo, &checked, &bad, &vn);
	if (rc != 0)
		logx(TL_RX_ERR, "verification failed: %s", tl_strerror(rc));
	else
		logx(TL_RX_INFO, "verified %u grant(s), %u not healthy",
		    checked, bad);
	once_checked = checked;
	once_bad = bad;
	if (blocked > 0)
		logx(TL_RX_WARN, "%u grant(s) with migrations blocked (see "
		    "tally status)", blocked);
	if (rc != 0 || bad > 0 || blocked > 0)
		ex = EXIT_UNHEALTHY;
	/* As tally status: a missing grant is not checked. */
	if (ex == EXIT_OK && (tl_rx_healthy(rx, &hl) != 0 || !hl)) {
		logx(TL_RX_WARN, "not everything is healthy (see tally "
		    "status)");
		ex = EXIT_UNHEALTHY;
	}
	return ex;
}

/*
 * The loop: a round runs every reactor that is due, in table order;
 * then, unless the chain must go on at once, the one next wake-up is
 * the earliest due time (bounded by --once-timeout), and poll() waits
 * for it, an append (inotify) or a signal.  Returns the exit code.
 */
static int
run_loop(struct tl_rx *rx, struct tl_chain *chain, uint64_t *epoch,
    int once, unsigned interval, unsigned vinterval, unsigned once_timeout,
    int ino, int sigfd)
{
	uint64_t last_head = UINT64_MAX, started = mono_ms();
	uint64_t next_fence = started + (uint64_t)interval * 1000;
	uint64_t deadline = started + (uint64_t)once_timeout * 1000;
	size_t i;

	for (i = 0; i < NREACTORS; i++) {
		struct reactor *r = &reactors[i];

		r->due_ms = 0;
		r->period_ms = r->flags & R_CHAIN ? (uint64_t)interval * 1000 :
		    r->run == tl_rx_run_verify ? (uint64_t)vinterval * 1000 : 0;
	}
	while (!stop) {
		uint64_t now, h = head(rx->log), next = UINT64_MAX;
		unsigned chain_done = 0;
		int moved = h != last_head, chain_ran = 0, gated = 0, timeout;
		int cx, npf;
		uint64_t t0;
		struct pollfd pf[3];

		/* Nothing is acted on past an event that is bad. */
		if (moved && verify_chain(rx->log, chain) != 0)
			return EXIT_CORRUPT;
		metrics_serve(rx);
		/* A leader whose lease lapsed, or was taken: stop now. */
		if (clu != NULL && (cx = tl_tallyd_cluster_round(rx, clu,
		    h)) != 0) {
			if (cx == EXIT_CORRUPT)
				return EXIT_CORRUPT;
			tl_ep_stop(rx);
			return EXIT_DEPOSED;
		}
		note_verified(rx->log, chain, &verified_rec, 0);
		/* Deposed before the loop (the re-verification's sessions). */
		if (atomic_load(&rx->deposed)) {
			tl_ep_stop(rx);
			return EXIT_DEPOSED;
		}
		/*
		 * A later epoch's fence on a provider: deposed, stop.  Not
		 * while the verifier's checks run: they read the epoch and
		 * the leader this rewrites (the next round, then).
		 */
		if (mono_ms() >= next_fence && !tl_rx_verify_running(rx)) {
			if (fence_check(rx, epoch, 0))
				return EXIT_DEPOSED;
			next_fence = mono_ms() + (uint64_t)interval * 1000;
		}
		for (i = 0; i < NREACTORS && !stop; i++) {
			struct reactor *r = &reactors[i];

			if (once && (r->flags & R_DAEMON))
				continue;
			if (!(moved && (r->flags & R_EVENTS)) &&
			    mono_ms() < r->due_ms)
				continue;
			/* Held: due still, it runs in the next round. */
			if (((r->flags & R_CHAIN) && gated) ||
			    (!(r->flags & (R_CHAIN | R_NOHOLD)) &&
			    chain_done > 0))
				continue;
			t0 = tl_sub_clock();
			r->rc = r->run(rx, &r->last);
			tl_mx_observe(&passhist[i], (double)(tl_sub_clock() - t0) /
			    1e9);
			if (r->run == tl_rx_run_verify) {
				mxst.verified += r->last.checked;
				mxst.unhealthy += r->last.unhealthy;
			}
			/*
			 * A session found a provider fenced above our epoch:
			 * nothing more is acted on or published.
			 */
			if (atomic_load(&rx->deposed)) {
				tl_ep_stop(rx);
				return EXIT_DEPOSED;
			}
			/* A fold that met a bad event: not acted on. */
			if (r->rc == TL_ECORRUPT) {
				logx(TL_RX_ERR, "%s: the log does not verify "
				    "(%s); stopping", r->name,
				    tl_log_lasterr(rx->log));
				return EXIT_CORRUPT;
			}
			report(rx, r);
			reschedule(r, mono_ms());
			if (r->flags & R_CHAIN) {
				chain_ran = 1;
				chain_done += r->last.done;
				if ((r->flags & R_GATE) && r->rc != 0)
					gated = 1;
			}
		}
		if (stop)
			break;
		/*
		 * The head as the round began: an event another process
		 * appended meanwhile is seen next time round (our own cost
		 * one more, idle, round).
		 */
		last_head = h;
		if (chain_done > 0) {
			/* Whatever keeps passes busy, --once-timeout bounds it. */
			if (once && mono_ms() > deadline) {
				logx(TL_RX_WARN, "--once: still busy after %u s "
				    "(see tally status)", once_timeout);
				return EXIT_UNHEALTHY;
			}
			for (i = 0; i < NREACTORS; i++)
				if (reactors[i].flags & R_CHAIN)
					reactors[i].due_ms = 0;
			continue;	/* more may have become due */
		}
		if (once && chain_ran && chain_rests())
			return once_verdict(rx);
		if (once && mono_ms() > deadline) {
			unsigned waiting = 0;

			for (i = 0; i < NREACTORS; i++)
				waiting += reactors[i].last.pending +
				    reactors[i].last.running;
			logx(TL_RX_WARN, "--once: %u grant(s) still waiting "
			    "after %u s (see tally status)", waiting,
			    once_timeout);
			return EXIT_UNHEALTHY;
		}
		/* The next wake-up, computed once, on the monotonic clock. */
		for (i = 0; i < NREACTORS; i++)
			if (!(once && (reactors[i].flags & R_DAEMON)) &&
			    reactors[i].due_ms < next)
				next = reactors[i].due_ms;
		/* --once: the next round (and its timeout check) by then. */
		if (once && next > deadline)
			next = deadline;
		/* A cluster's leader looks at its lease every second. */
		if (clu != NULL && next > mono_ms() + 1000)
			next = mono_ms() + 1000;
		now = mono_ms();
		timeout = next == UINT64_MAX ? -1 : next <= now ? 0 :
		    next - now > INT32_MAX ? INT32_MAX : (int)(next - now);
		pf[0].fd = ino;
		pf[0].events = POLLIN;
		pf[1].fd = sigfd;
		pf[1].events = POLLIN;
		npf = 2;
		if (mx != NULL) {
			pf[2].fd = tl_mx_fd(mx);
			pf[2].events = POLLIN;
			npf = 3;
		}
		if (poll(pf, (nfds_t)npf, timeout) > 0) {
			char buf[4096];

			while (ino >= 0 && read(ino, buf, sizeof(buf)) > 0)
				;
			while (read(sigfd, buf, sizeof(buf)) > 0)
				;
		}
	}
	return EXIT_OK;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "home", required_argument, NULL, 'H' },
		{ "once", no_argument, NULL, 'o' },
		{ "once-timeout", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "check", no_argument, NULL, 'C' },
		{ "grant", required_argument, NULL, 'g' },
		{ "provider", required_argument, NULL, 'p' },
		{ "actor", required_argument, NULL, 'a' },
		{ "loss", required_argument, NULL, 'l' },
		{ "find-adopt", required_argument, NULL, 'D' },
		{ "prepare", required_argument, NULL, 'r' },
		{ "interval", required_argument, NULL, 'i' },
		{ "verify-interval", required_argument, NULL, 'V' },
		{ "verify-login-every", required_argument, NULL, 'L' },
		{ "workers", required_argument, NULL, 'w' },
		{ "max-rotations", required_argument, NULL, 'R' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'W' },
		{ "follow", no_argument, NULL, 'F' },
		{ "amqp", required_argument, NULL, 'A' },
		{ "amqp-ca", required_argument, NULL, 'c' },
		{ "stream", required_argument, NULL, 'S' },
		{ "user", required_argument, NULL, 'U' },
		{ "secret", required_argument, NULL, 'P' },
		{ "commit", no_argument, NULL, 'K' },
		{ "metrics", required_argument, NULL, 'M' },
		{ "report-to", required_argument, NULL, 'Q' },
		{ NULL, 0, NULL, 0 }
	};
	struct tl_rx rx;
	struct sigaction sa;
	char logdir[1200], keypath[1200], why[TL_WHY_MAX] = "";
	const char *home = getenv("TALLY_HOME");
	int once = 0, json = 0, c, rc, lockfd = -1, datafd = -1, ino = -1;
	int check = 0, reportset = 0;
	char sbyname[TL_EP_STANDBY_NAME + 1];
	const char *cgrant = NULL, *cprovider = NULL, *lmodule = NULL;
	const char *amesh = NULL, *prepare = NULL, *maddr = NULL;
	int pfd[2] = { -1, -1 };
	struct tl_chain chain = TL_CHAIN_INIT;
	char lwhy[TL_WHY_MAX];
	int ex = EXIT_OK;
	unsigned interval = 5, once_timeout = 60, vinterval = 30;
	struct tl_follow_opts fo;
	int follow = 0, standby = 0, commit = 0, clustered;
	char cpath[1200];
	struct tl_tallyd_cluster tclu;
	uint64_t epoch = 1;
	int deposed = 0;

	/* The master key and passwords in memory never reach a dump. */
	tl_secret_harden();
	tl_log_fault_exit("tallyd", EXIT_CORRUPT);
	tl_rx_init(&rx);
	memset(&fo, 0, sizeof(fo));
	while ((c = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			home = optarg;
			break;
		case 'o':
			once = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'C':
			check = 1;
			quiet_below = TL_RX_WARN;
			break;
		case 'g':
			cgrant = optarg;
			break;
		case 'p':
			cprovider = optarg;
			break;
		case 'a':
			rx.actor = optarg;
			break;
		case 'l':
			lmodule = optarg;
			check = 1;	/* a helper: no lock, quiet */
			quiet_below = TL_RX_WARN;
			break;
		case 'D':
			amesh = optarg;
			check = 1;	/* a helper: no lock, quiet */
			quiet_below = TL_RX_WARN;
			break;
		case 'r':
			prepare = optarg;
			break;
		case 'T':
			once_timeout = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'i':
			interval = (unsigned)strtoul(optarg, NULL, 10);
			if (interval == 0)
				interval = 1;
			break;
		case 'V':
			vinterval = (unsigned)strtoul(optarg, NULL, 10);
			if (vinterval == 0)
				vinterval = 1;
			break;
		case 'L':
			rx.verify_login_every = (unsigned)strtoul(optarg,
			    NULL, 10);
			if (rx.verify_login_every == 0)
				rx.verify_login_every = 1;
			break;
		case 'R':
			rx.max_rotations = (unsigned)strtoul(optarg, NULL, 10);
			if (rx.max_rotations == 0)
				rx.max_rotations = 1;
			break;
		case 'w':
			rx.workers = atoi(optarg);
			if (rx.workers < 1 || rx.workers > 64) {
				fprintf(stderr, "tallyd: --workers 1..64\n");
				return EXIT_USAGE;
			}
			break;
		case 'W':
			printf("tallyd %s\n", TL_VERSION_STRING);
			return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
		case 'F':
			follow = 1;
			break;
		case 'M': {
			char mwhy[TL_WHY_MAX];

			if (tl_mx_addr_ok(optarg, mwhy) != 0) {
				fprintf(stderr, "tallyd: %s\n", mwhy);
				return EXIT_USAGE;
			}
			maddr = optarg;
			break;
		}
		case 'K':
			commit = 1;
			quiet_below = TL_RX_WARN;
			break;
		case 'A':
			fo.url = optarg;
			break;
		case 'c':
			fo.ca = optarg;
			break;
		case 'S':
			fo.stream = optarg;
			break;
		case 'Q':
			fo.report_to = *optarg ? optarg : NULL;
			reportset = 1;
			break;
		case 'U':
			fo.user = optarg;
			break;
		case 'P':
			if (strcmp(optarg, "password") != 0) {
				fprintf(stderr, "tallyd: --secret: the only "
				    "secret is 'password'\n");
				return EXIT_USAGE;
			}
			fo.secret = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'h':
			fputs(usage, stdout);
			putchar('\n');
			tl_exit_print(stdout, TL_EXIT_BY_TALLYD);
			return EXIT_OK;
		default:
			fputs(usage, stderr);
			return EXIT_USAGE;
		}
	}
	/* Only --find-adopt takes operands: the grants. */
	if (optind != argc && amesh == NULL) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	if (home == NULL || *home == '\0')
		home = geteuid() == 0 ? "/var/lib/tally" : NULL;
	if (home == NULL) {
		logx(TL_RX_ERR, "no home: use --home DIR or TALLY_HOME");
		return EXIT_USAGE;
	}
	snprintf(rx.home, sizeof(rx.home), "%s", home);
	snprintf(logdir, sizeof(logdir), "%s/log", home);
	snprintf(keypath, sizeof(keypath), "%s/master.key", home);
	rx.logf = vlog;

	/* A helper of tally assign: no log, no session, no lock. */
	if (prepare != NULL)
		return tl_tallyd_prepare(prepare);
	if (follow && (fo.url == NULL || fo.stream == NULL ||
	    *fo.stream == '\0')) {
		logx(TL_RX_ERR, "--follow needs --amqp URL and --stream NAME");
		return EXIT_USAGE;
	}
	/* Before any lock file is made: nothing is created in its place. */
	if (access(keypath, F_OK) != 0 && access(logdir, F_OK) != 0) {
		logx(TL_RX_ERR, "no tally home at %s; tally init first (tally "
		    "init --home %s, or tally init --standby for a standby)",
		    home, home);
		return EXIT_NOTFOUND;
	}
	snprintf(cpath, sizeof(cpath), "%s/%s", home, TL_CLUSTER_FILE);
	clustered = access(cpath, F_OK) == 0;
	if (commit && !clustered) {
		logx(TL_RX_ERR, "--commit: %s is not a cluster's home", home);
		return EXIT_REFUSED;
	}
	if (clustered && follow) {
		logx(TL_RX_ERR, "%s is a cluster's home: tallyd follows the "
		    "record on etcd by itself (no --follow)", home);
		return EXIT_USAGE;
	}
	if (clustered)
		standby = 0;
	else if ((rc = tl_follow_is_standby(home, &standby)) != 0) {
		logx(TL_RX_ERR, "cannot read the standing of %s: %s", home,
		    tl_strerror(rc));
		return EXIT_FAIL;
	}
	if (follow != standby) {
		logx(TL_RX_ERR, follow ? "%s is not a standby's home (tally "
		    "init --standby makes one): refusing to follow into it" :
		    "%s is a standby's home: it follows the leader (tallyd "
		    "--follow) until tally promote makes it the leader", home);
		return EXIT_REFUSED;
	}
	/* A check runs beside the daemon, as the daemon's verifier does. */
	if (!check && !commit && (lockfd = take_lock(home, &datafd)) < 0)
		return lockfd == -2 ? EXIT_LOCKED : EXIT_FAIL;
	if (follow) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
		signal(SIGPIPE, SIG_IGN);
		fo.home = home;
		fo.logf = vlog;
		/* Its name in its reports: where it runs, and its home. */
		if (!reportset)
			fo.report_to = "tally.acks";
		if (gethostname(sbyname, sizeof(sbyname) - 1) != 0)
			snprintf(sbyname, sizeof(sbyname), "?");
		sbyname[sizeof(sbyname) - 1] = '\0';
		snprintf(sbyname + strlen(sbyname), sizeof(sbyname) -
		    strlen(sbyname), ":%s", home);
		fo.name = sbyname;
		ex = tl_follow_run(&fo, &stop);
		close(lockfd);
		if (datafd >= 0)
			close(datafd);
		return ex;
	}
	if (!check)
		sweep_deliveries(home);
	if ((rc = tl_secret_load(keypath, &rx.key, why)) != 0) {
		logx(TL_RX_ERR, "master key: %s%s", why[0] ? why :
		    tl_strerror(rc), clustered ? " (every control plane of "
		    "a cluster holds the mesh's master key: copy it here out "
		    "of band, mode 0600)" : "");
		return EXIT_FAIL;
	}
	/* The CLI's commit: no log, no lock, no session. */
	if (commit) {
		ex = tl_tallyd_commit(&rx);
		tl_rx_free(&rx);
		return ex;
	}
	if ((rc = tl_log_open_opts(logdir, &(struct tl_log_opts){ .why = lwhy },
	    &rx.log)) != 0) {
		logx(TL_RX_ERR, "cannot open the log at %s: %s", logdir,
		    rc == TL_ECORRUPT && lwhy[0] ? lwhy : tl_strerror(rc));
		tl_rx_free(&rx);
		return rc == TL_ENOTFOUND ? EXIT_NOTFOUND : rc == TL_ECORRUPT ?
		    EXIT_CORRUPT : EXIT_FAIL;
	}
	if (clustered) {
		if ((ex = tl_tallyd_cluster_open(&rx, &tclu)) != 0)
			goto out;
		clu = &tclu;
		/* A helper commits as the CLI does: if this one leads. */
		if (check)
			tl_log_set_commit(rx.log, tl_cl_commit, tclu.cl);
	}
	if (lmodule != NULL) {
		ex = tl_tallyd_loss(&rx, lmodule);
		goto out;
	}
	if (amesh != NULL) {
		ex = tl_tallyd_find_adopt(&rx, amesh, argv + optind,
		    (size_t)(argc - optind));
		goto out;
	}

	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) != 0) {
		logx(TL_RX_ERR, "pipe: %s", strerror(errno));
		ex = EXIT_FAIL;
		goto out;
	}
	sigpipe_w = pfd[1];
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/*
	 * IN_MODIFY alone can miss a commit: LMDB's last write (the meta
	 * page) precedes the moment readers see the transaction, so the
	 * wakeup may find the old head and nothing comes after it.  A
	 * writer closing the file (every tally command does, at exit)
	 * comes after its commit.
	 */
	if ((ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 ||
	    inotify_add_watch(ino, logdir,
	    IN_MODIFY | IN_CLOSE_WRITE) < 0)
		logx(TL_RX_WARN, "inotify unavailable (%s): polling every "
		    "%u s", strerror(errno), interval);
	logx(TL_RX_INFO, "started on %s%s (workers %d, resync %u s)", home,
	    once ? " once" : "", rx.workers, interval);

	rx.verify_interval_ns = (uint64_t)vinterval * 1000000000u;
	/*
	 * A cluster's: follow until elected (signals end it), then lead
	 * with every commit made on etcd first.
	 */
	if (clu != NULL) {
		clu->once = once;
		if ((ex = tl_tallyd_cluster_lead(&rx, clu, &stop)) != 0 ||
		    stop)
			goto out;
	}
	/*
	 * The whole log, once, before anything reads the replication stream
	 * or calls a provider: an event changed anywhere (an address, a
	 * setting) is never acted on, not even by the fence.  Then only
	 * what is appended, from where this walk ended.
	 */
	if (verify_chain(rx.log, &chain) != 0) {
		ex = EXIT_CORRUPT;
		goto out;
	}
	note_verified(rx.log, &chain, &verified_rec, 1);
	/* A leader's home made before meshes had ids gets one now. */
	if ((rc = tl_log_write(rx.log, mesh_cb, rx.mesh)) != 0) {
		logx(TL_RX_ERR, "cannot record the mesh id: %s",
		    tl_strerror(rc));
		ex = EXIT_FAIL;
		goto out;
	}
	logx(TL_RX_INFO, "mesh %s", rx.mesh);
	/*
	 * Before anything is acted on: a later promotion in the replication
	 * stream, then this epoch's fence on every provider, or deposed.
	 */
	if ((rc = tl_ep_stream_check(&rx, &deposed)) != 0)
		logx(TL_RX_ERR, "epoch: %s", tl_strerror(rc));
	if (deposed) {
		ex = EXIT_DEPOSED;
		goto out;
	}
	/* A promotion acts only once the stream says it was the first. */
	if (clu == NULL && (rc = tl_ep_arbitrate(&rx, &deposed)) != 0) {
		if (rc != TL_EUNREACH)
			logx(TL_RX_ERR, "epoch: %s", tl_strerror(rc));
		ex = EXIT_FAIL;
		goto out;
	}
	if (deposed) {
		ex = EXIT_DEPOSED;
		goto out;
	}
	if (fence_check(&rx, &epoch, 1)) {
		ex = EXIT_DEPOSED;
		goto out;
	}
	if (check) {
		ex = tl_tallyd_check(&rx, cgrant, cprovider);
		goto out;
	}
	if (epoch > 1) {
		struct tl_rx_verify_opts vo;
		unsigned checked = 0, bad = 0;
		uint64_t vn = 0;

		/*
		 * After a failover the old leader's last events may not
		 * have reached the stream: every grant is checked (and
		 * repaired) before the first pass of work.
		 */
		memset(&vo, 0, sizeof(vo));
		vo.force = 1;
		vo.interval_ns = rx.verify_interval_ns;
		if ((rc = tl_rx_verify(&rx, &vo, &checked, &bad, &vn)) != 0)
			logx(TL_RX_ERR, "re-verification failed: %s",
			    tl_strerror(rc));
		else
			logx(TL_RX_INFO, "epoch %llu: re-verified %u grant(s) "
			    "before the first pass, %u not healthy",
			    (unsigned long long)epoch, checked, bad);
	}
	if (maddr != NULL) {
		char mwhy[TL_WHY_MAX];
		size_t i;

		if ((rc = tl_mx_start(maddr, &mx, mwhy)) != 0) {
			logx(TL_RX_ERR, "%s", mwhy);
			ex = rc == TL_EINVAL ? EXIT_USAGE : EXIT_FAIL;
			goto out;
		}
		for (i = 0; i < NREACTORS; i++)
			passname[i] = reactors[i].metric;
		mxst.pass_names = passname;
		mxst.pass = passhist;
		mxst.npass = NREACTORS;
		if (clu != NULL) {
			mxst.extra = tl_tallyd_cluster_metrics;
			mxst.extra_arg = clu;
		}
		logx(TL_RX_INFO, "metrics on http://%s/metrics", maddr);
	}
	ex = run_loop(&rx, &chain, &epoch, once, interval, vinterval,
	    once_timeout, ino, pfd[0]);
	if (ex != EXIT_CORRUPT)
		note_verified(rx.log, &chain, &verified_rec, 1);
	logx(TL_RX_INFO, "stopping");
out:
	tl_mx_stop(mx);
	mx = NULL;
	if (ino >= 0)
		close(ino);
	if (pfd[0] >= 0) {
		close(pfd[0]);
		close(pfd[1]);
	}
	tl_rx_publish_stop(&rx);
	if (clu != NULL) {
		/* Stopped, not deposed: the next leader need not wait. */
		if (ex == EXIT_OK && tl_cl_epoch(clu->cl) != 0)
			tl_cl_resign(clu->cl);
		tl_tallyd_cluster_close(clu);
		clu = NULL;
	}
	tl_log_close(rx.log);
	tl_rx_free(&rx);
	if (lockfd >= 0)
		close(lockfd);
	if (datafd >= 0)
		close(datafd);
	/* The verdict for a program that ran us (tally bootstrap). */
	if (once && json)
		printf("{\"exit\":%d,\"verified\":%u,\"unhealthy\":%u}\n",
		    ex, once_checked, once_bad);
	return ex;
}
