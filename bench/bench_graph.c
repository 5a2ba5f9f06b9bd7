/*
 * bench_graph.c - the graph at mesh scale: a log of ~1,000,000 events
 * describing 100,000 modules on 1,000 nodes, then whole `tally`
 * processes against it.  Prints figures; never asserts.
 *
 * The mesh, built through the deciders in-process (tl_log_write +
 * tl_ctx_begin / tl_dec_* / tl_ctx_end, as the CLI runs them, 1,000
 * commands per write transaction, the log opened with TL_LOG_NOSYNC:
 * a bulk load that can be redone):
 *
 *   1,000 nodes
 *   postgres  (postgres-database) on every 10th node: 100 providers
 *   broker    (amqp-vhost) on 4 nodes
 *   files     (directory) on one node
 *   terminal  on one node
 *   100,000 consumer modules, each with
 *     db     postgres-database, shared: co-located, else named in the
 *            manifest (provider: NODE/postgres, the nearest one)
 *     files  directory, per-instance: the only candidate
 *     term   presence of terminal
 *     queue  amqp-vhost, shared (one module in 4): co-located or named
 *   and assigned to one node (one module in 10 to a second node too).
 *
 * Then, timing whole processes of $TALLY_BIN/tally (fork/exec, wait4):
 * `tally status MODULE` and `tally explain MODULE` (one warm-up run, then
 * several, median and max; target under 20 ms), `tally rebuild` (events/s;
 * target >= 300,000) and the peak RSS of each (ru_maxrss).
 *
 * Then tally-board over the same log (issue 27): catching up from
 * nothing (wall, CPU, peak RSS), and following it with --serve while
 * events are committed one at a time: commit -> the change announced
 * on /events (the page and the view rendered again and published;
 * target under 2 s), its CPU per change and peak RSS.
 *
 * Env: TALLY_BIN, TALLY_TMP; BENCH_SCALE (a float multiplying the
 * module count), BENCH_RUNS (runs of status and explain, default 21),
 * BENCH_KEEP=1 keeps the home and prints where it is.
 */
#define _GNU_SOURCE	/* memmem */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/body.h"
#include "core/error.h"
#include "core/log.h"
#include "projections/decide.h"
#include "reactors/metrics.h"
#include "reactors/rx.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define NODES		1000
#define MODULES		100000
#define PER_TXN		1000	/* commands per write transaction */
#define PG_EVERY	10	/* a postgres on every 10th node */

static const int broker_nodes[4] = { 1, 251, 501, 751 };

static void
die(const char *what, int rc)
{
	fprintf(stderr, "bench_graph: %s: %s\n", what, tl_strerror(rc));
	exit(1);
}

/* Bodies, as tools/tally/cmd_apply.c encodes them. */

struct breq {
	const char	*name, *kind, *target, *type, *scope;
	char		 provider[64];
};

static void
enc_module(struct tl_body *b, const char *name, const char *provides)
{
	tl_body_str(b, "name", name);
	tl_body_str(b, "digest", "");
	tl_body_map(b, "env");
	if (provides == NULL) {
		tl_body_str(b, "DB_URL", "");
		tl_body_str(b, "LOG_LEVEL", "info");
	}
	tl_body_end(b);
	tl_body_arr(b, "provides");
	if (provides != NULL) {
		tl_body_map(b, NULL);
		tl_body_str(b, "type", provides);
		tl_body_str(b, "driver", "postgres");
		tl_body_str(b, "revoke", "retain");
		tl_body_u64(b, "max_age", 0);
		tl_body_end(b);
	}
	tl_body_end(b);
	tl_body_arr(b, "embedded");
	tl_body_end(b);
}

static void
enc_req(struct tl_body *b, const char *module, const struct breq *r)
{
	char res[160];

	tl_body_str(b, "module", module);
	tl_body_str(b, "name", r->name);
	tl_body_str(b, "kind", r->kind);
	tl_body_str(b, "target", r->target);
	if (strcmp(r->kind, "instantiation") != 0)
		return;
	snprintf(res, sizeof(res), "%s-%s", module, r->name);
	tl_body_str(b, "type", r->type);
	tl_body_str(b, "scope", r->scope);
	tl_body_str(b, "provider", r->provider);
	tl_body_str(b, "resource", res);
	tl_body_map(b, "env");
	if (strcmp(r->name, "db") == 0)
		tl_body_str(b, "url", "DB_URL");
	tl_body_end(b);
	tl_body_str(b, "migrations", "");
	tl_body_u64(b, "max_age", 0);
}

static int
apply(struct tl_ctx *c, const char *name, const char *provides,
    const struct breq *reqs, size_t nreqs)
{
	struct tl_body mb, rb[4];
	struct tl_decl_req dr[4];
	struct tl_decl d;
	size_t i;
	int rc;

	memset(dr, 0, sizeof(dr));
	memset(&d, 0, sizeof(d));
	tl_body_init(&mb);
	enc_module(&mb, name, provides);
	rc = tl_body_finish(&mb, &d.body, &d.len);
	d.name = name;
	d.file = "bench.yaml";
	d.line = 1;
	for (i = 0; i < nreqs; i++) {
		tl_body_init(&rb[i]);
		enc_req(&rb[i], name, &reqs[i]);
		if (rc == 0)
			rc = tl_body_finish(&rb[i], &dr[i].body, &dr[i].len);
		dr[i].name = reqs[i].name;
		dr[i].file = "bench.yaml";
		dr[i].line = (int)i + 2;
	}
	d.reqs = dr;
	d.nreqs = nreqs;
	if (rc == 0)
		rc = tl_dec_apply(c, &d);
	for (i = 0; i < nreqs; i++)
		tl_body_free(&rb[i]);
	tl_body_free(&mb);
	return rc;
}

/* Each decider call is one command: its own correlation and cause. */
static void
next_command(struct tl_ctx *c)
{
	c->cause = 0;
	c->have_corr = 0;
}

static void
node_name(char *buf, size_t cap, int i)
{
	snprintf(buf, cap, "n%04d", i);
}

static void
module_name(char *buf, size_t cap, long i)
{
	snprintf(buf, cap, "app%06ld", i);
}

struct load {
	long	 first, count;	/* consumer modules of this transaction */
	long	 modules;
	int	 setup;		/* the nodes and providers */
	char	 why[2 * TL_WHY_MAX];
};

static int
load_setup(struct tl_ctx *c)
{
	uint8_t pk[32] = { 0 };
	char node[16];
	int i, rc;

	for (i = 0; i < NODES; i++) {
		node_name(node, sizeof(node), i);
		pk[0] = (uint8_t)i;
		pk[1] = (uint8_t)(i >> 8);
		next_command(c);
		if ((rc = tl_dec_node_add(c, node, "host.mesh.test", pk, NULL,
		    NULL)) != 0)
			return rc;
	}
	next_command(c);
	if ((rc = apply(c, "postgres", "postgres-database", NULL, 0)) != 0)
		return rc;
	next_command(c);
	if ((rc = apply(c, "broker", "amqp-vhost", NULL, 0)) != 0)
		return rc;
	next_command(c);
	if ((rc = apply(c, "files", "directory", NULL, 0)) != 0)
		return rc;
	next_command(c);
	if ((rc = apply(c, "terminal", NULL, NULL, 0)) != 0)
		return rc;
	for (i = 0; i < NODES; i += PG_EVERY) {
		node_name(node, sizeof(node), i);
		next_command(c);
		if ((rc = tl_dec_assign(c, "postgres", node,
		    &(struct tl_assign){ .expose = "network" })) != 0)
			return rc;
	}
	for (i = 0; i < 4; i++) {
		node_name(node, sizeof(node), broker_nodes[i]);
		next_command(c);
		if ((rc = tl_dec_assign(c, "broker", node, &(struct tl_assign){
		    .expose = "network" })) != 0)
			return rc;
	}
	next_command(c);
	if ((rc = tl_dec_assign(c, "files", "n0000", &(struct tl_assign){
	    .expose = "local" })) != 0)
		return rc;
	next_command(c);
	return tl_dec_assign(c, "terminal", "n0000", &(struct tl_assign){
	    .expose = "public" });
}

static int
load_consumer(struct tl_ctx *c, long i)
{
	struct breq reqs[4];
	char name[32], node[16], node2[16];
	int at = (int)(i % NODES), k, rc;
	size_t n = 0;

	module_name(name, sizeof(name), i);
	node_name(node, sizeof(node), at);
	memset(reqs, 0, sizeof(reqs));
	reqs[n].name = "db";
	reqs[n].kind = "instantiation";
	reqs[n].target = "postgres";
	reqs[n].type = "postgres-database";
	reqs[n].scope = "shared";
	if (at % PG_EVERY != 0)
		snprintf(reqs[n].provider, sizeof(reqs[n].provider),
		    "n%04d/postgres", at - at % PG_EVERY);
	n++;
	reqs[n].name = "files";
	reqs[n].kind = "instantiation";
	reqs[n].target = "files";
	reqs[n].type = "directory";
	reqs[n].scope = "per-instance";
	n++;
	if (i % 4 == 0) {
		reqs[n].name = "queue";
		reqs[n].kind = "instantiation";
		reqs[n].target = "broker";
		reqs[n].type = "amqp-vhost";
		reqs[n].scope = "shared";
		for (k = 0; k < 4 && broker_nodes[k] != at; k++)
			;
		if (k == 4)
			snprintf(reqs[n].provider, sizeof(reqs[n].provider),
			    "n%04d/broker", broker_nodes[i / 4 % 4]);
		n++;
	}
	reqs[n].name = "term";
	reqs[n].kind = "presence";
	reqs[n].target = "terminal";
	n++;

	next_command(c);
	if ((rc = apply(c, name, NULL, reqs, n)) != 0)
		return rc;
	next_command(c);
	if ((rc = tl_dec_assign(c, name, node, &(struct tl_assign){
	    .expose = "local" })) != 0)
		return rc;
	if (i % 10 == 0) {
		node_name(node2, sizeof(node2), (at + NODES / 2) % NODES);
		next_command(c);
		if ((rc = tl_dec_assign(c, name, node2, &(struct tl_assign){
		    .expose = "local" })) != 0)
			return rc;
	}
	return 0;
}

static int
load_cb(struct tl_txn *t, void *arg)
{
	struct load *l = arg;
	struct tl_ctx c;
	long i;
	int rc;

	l->why[0] = '\0';
	if ((rc = tl_ctx_begin(&c, t, "bench")) != 0)
		return rc;
	if (l->setup)
		rc = load_setup(&c);
	for (i = l->first; rc == 0 && i < l->first + l->count; i++)
		rc = load_consumer(&c, i);
	if (rc == 0)
		rc = tl_ctx_end(&c);
	snprintf(l->why, sizeof(l->why), "%s", c.why);
	return rc;
}

/* One whole tally process: wall time, peak RSS, exit code, output. */
struct proc {
	double	secs;
	double	cpu;		/* user + system, seconds */
	long	maxrss_kb;
	int	code;
};

static struct proc
run_tally(const char *bin, const char *home, const char *outfile,
    char *const argv[])
{
	struct proc pr = { 0, 0, 0, -1 };
	struct rusage ru;
	double t0;
	pid_t pid;
	int st;

	fflush(NULL);
	t0 = tl_bench_now();
	if ((pid = fork()) == 0) {
		int in = open("/dev/null", O_RDONLY);
		int out = open(outfile ? outfile : "/dev/null",
		    O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(in, 0);
		dup2(out, 1);
		dup2(out, 2);
		setenv("TALLY_HOME", home, 1);
		execv(bin, argv);
		_exit(127);
	}
	if (pid < 0)
		return pr;
	memset(&ru, 0, sizeof(ru));
	if (wait4(pid, &st, 0, &ru) != pid)
		return pr;
	pr.secs = tl_bench_now() - t0;
	pr.cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	pr.maxrss_kb = ru.ru_maxrss;
	pr.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return pr;
}

/* Runs argv runs times; prints median, max, peak RSS. */
static void
time_command(const char *label, const char *bin, const char *home,
    char *const argv[], int runs, double target_ms)
{
	double *t = calloc((size_t)runs, sizeof(double));
	double *c = calloc((size_t)runs, sizeof(double));
	long rss = 0;
	int i, codes = -1;

	if (t == NULL || c == NULL)
		die("calloc", ENOMEM);
	run_tally(bin, home, NULL, argv);	/* warm-up, not counted */
	for (i = 0; i < runs; i++) {
		struct proc pr = run_tally(bin, home, NULL, argv);

		t[i] = pr.secs * 1e3;
		c[i] = pr.cpu * 1e3;
		if (pr.maxrss_kb > rss)
			rss = pr.maxrss_kb;
		if (codes == -1)
			codes = pr.code;
		else if (codes != pr.code)
			codes = -2;
	}
	qsort(t, (size_t)runs, sizeof(double), tl_bench_cmp_double);
	qsort(c, (size_t)runs, sizeof(double), tl_bench_cmp_double);
	printf("  %-30s wall median %6.2f ms max %6.2f ms; cpu median %5.2f "
	    "ms; peak RSS %5.1f MiB; exit %d  [target < %.0f ms: %s]\n",
	    label, t[runs / 2], t[runs - 1], c[runs / 2],
	    (double)rss / 1024.0, codes, target_ms,
	    t[runs / 2] < target_ms && t[runs - 1] < target_ms ? "met" :
	    t[runs / 2] < target_ms ? "median met, max missed" : "MISSED");
	{
		char what[96], tg[32];

		snprintf(what, sizeof(what), "graph: %s, median", label);
		snprintf(tg, sizeof(tg), "< %.0f ms", target_ms);
		tl_bench_target(what, tg, t[runs / 2] < target_ms, "%.2f ms",
		    t[runs / 2]);
	}
	free(t);
	free(c);
}

/*
 * What one scrape of tallyd --metrics costs at this size: the text
 * built as the daemon's loop builds it (reactors/metrics.c), the first
 * call (which only notes the head) untimed, then BENCH_RUNS timed.
 */
static void
scrape_cost(struct tl_log *log)
{
	struct tl_rx rx;
	struct tl_mx_state st;
	double t[64], t0;
	char *text = NULL;
	size_t len = 0, grants = 0;
	const char *p;
	int i, runs = 9, rc;

	tl_rx_init(&rx);
	rx.log = log;
	memset(&st, 0, sizeof(st));
	for (i = -1; i < runs; i++) {
		free(text);
		text = NULL;
		t0 = tl_bench_now();
		if ((rc = tl_mx_text(&rx, &st, &text, &len)) != 0) {
			printf("  metrics: FAILED (%s)\n", tl_strerror(rc));
			tl_rx_free(&rx);
			return;
		}
		if (i >= 0)
			t[i] = (tl_bench_now() - t0) * 1000;
	}
	for (p = text; (p = strstr(p, "\ntally_grants{")) != NULL; p++)
		grants += strtoull(strchr(p, '}') + 2, NULL, 10);
	printf("  tallyd --metrics, one scrape at %zu grants: median %.1f ms "
	    "(%zu bytes of text)  [target < 500 ms]\n", grants,
	    tl_bench_median(t, runs), len);
	tl_bench_target("metrics: one scrape at the mesh's size", "< 500 ms",
	    tl_bench_median(t, runs) < 500, "%.1f ms at %zu grants",
	    tl_bench_median(t, runs), grants);
	free(text);
	tl_rx_free(&rx);
}


/* --- tally-board at this size ------------------------------------------ */

/* VmHWM and CPU seconds of a live process (from /proc). */
static void
proc_usage(pid_t pid, long *hwm_kb, double *cpu)
{
	char path[64], line[256];
	unsigned long ut = 0, st = 0;
	FILE *fp;

	*hwm_kb = 0;
	*cpu = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((fp = fopen(path, "r")) != NULL) {
		while (fgets(line, sizeof(line), fp) != NULL)
			if (strncmp(line, "VmHWM:", 6) == 0)
				*hwm_kb = atol(line + 6);
		fclose(fp);
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fp = fopen(path, "r")) != NULL) {
		if (fgets(line, sizeof(line), fp) != NULL) {
			const char *p = strrchr(line, ')');
			int f;

			/* Fields 14 and 15 (utime, stime), after the name. */
			for (f = 2; p != NULL && f < 14; f++)
				p = strchr(p + 1, ' ');
			if (p != NULL)
				sscanf(p + 1, "%lu %lu", &ut, &st);
		}
		fclose(fp);
	}
	*cpu = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Reads the events stream until the next "event: change", at most ms. */
static int
next_change(int fd, int ms)
{
	static char buf[8192];
	static size_t have;
	double end = tl_bench_now() + ms / 1000.0;
	struct pollfd pfd = { fd, POLLIN, 0 };
	char *p;
	ssize_t n;

	for (;;) {
		if ((p = memmem(buf, have, "event: change\n", 14)) != NULL) {
			size_t used = (size_t)(p - buf) + 14;

			memmove(buf, buf + used, have - used);
			have -= used;
			return 0;
		}
		if (have > sizeof(buf) / 2) {
			memmove(buf, buf + have - 64, 64);
			have = 64;
		}
		if (tl_bench_now() >= end ||
		    poll(&pfd, 1, (int)((end - tl_bench_now()) * 1000) + 1) <= 0)
			return -1;
		if ((n = read(fd, buf + have, sizeof(buf) - have)) <= 0)
			return -1;
		have += (size_t)n;
	}
}

/*
 * tally-board over this log: catching up from nothing (one process:
 * the copy of the log, the projections over it, the view, one
 * rendering), then following with --serve, idle, while events are
 * committed one at a time: from each commit to the "change" its
 * /events stream announces (the page and the view rendered again and
 * published), and the process's memory and CPU.
 */
static void
board_cost(const char *bin, const char *home)
{
	char board[4200], store[4200], addr[64], req[128];
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	double lat[7], cpu0, cpu1;
	long hwm;
	pid_t pid;
	int s, fd = -1, port, i, nlat = 0, rc;
	struct proc pr;

	snprintf(board, sizeof(board), "%.*s/tally-board",
	    (int)(strrchr(bin, '/') - bin), bin);
	snprintf(store, sizeof(store), "%s/board", home);
	{
		char *ca[] = { board, "--home", (char *)home, "--store", store,
		    "--quiet", NULL };

		pr = run_tally(board, home, NULL, ca);
	}
	printf("  tally-board, catching up from nothing: %.2f s wall, %.2f s "
	    "cpu, peak RSS %.1f MiB, exit %d\n", pr.secs, pr.cpu,
	    (double)pr.maxrss_kb / 1024.0, pr.code);
	if (pr.code != 0)
		return;
	/* A free port, then the board on it. */
	if ((s = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    getsockname(s, (struct sockaddr *)&sa, &sl) != 0) {
		close(s);
		return;
	}
	port = ntohs(sa.sin_port);
	close(s);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	fflush(NULL);
	if ((pid = fork()) == 0) {
		int nul = open("/dev/null", O_RDWR);

		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		execl(board, board, "--home", home, "--store", store,
		    "--serve", addr, "--quiet", (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 300 && fd < 0; i++) {
		if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
			break;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			close(fd);
			fd = -1;
			poll(NULL, 0, 100);
		}
	}
	snprintf(req, sizeof(req), "GET /events HTTP/1.1\r\nHost: x\r\n\r\n");
	if (fd < 0 || write(fd, req, strlen(req)) < 0 ||
	    next_change(fd, 60000) != 0) {
		printf("  tally-board --serve: no events stream\n");
		goto out;
	}
	proc_usage(pid, &hwm, &cpu0);
	for (i = 0; i < 7; i++) {
		struct tl_log *lg;
		struct tl_txn *t;
		struct tl_body b;
		struct tl_append a;
		const void *body;
		size_t blen;
		double t0;

		/* A provider down, then up: each a change on the page. */
		if ((rc = tl_log_open(tl_test_path(home, "log"), 0, &lg)) != 0)
			break;
		tl_body_init(&b);
		tl_body_str(&b, "id", "n0000/postgres");
		if (i % 2 == 0) {
			tl_body_str(&b, "reason", "bench: down");
			tl_body_str(&b, "kind", "provider-unreachable");
		}
		tl_body_finish(&b, &body, &blen);
		memset(&a, 0, sizeof(a));
		a.type = i % 2 == 0 ? "provider.unreachable" :
		    "provider.recovered";
		a.stream = "provider/n0000/postgres";
		a.expect = TL_VER_ANY;
		a.actor = "bench";
		a.body = body;
		a.body_len = blen;
		if ((rc = tl_log_begin(lg, 0, &t)) == 0 &&
		    (rc = tl_append(t, &a, NULL, NULL)) == 0)
			rc = tl_log_commit(t);
		tl_body_free(&b);
		tl_log_close(lg);
		if (rc != 0)
			break;
		t0 = tl_bench_now();
		if (next_change(fd, 60000) != 0)
			break;
		lat[nlat++] = (tl_bench_now() - t0) * 1e3;
		poll(NULL, 0, 300);	/* past the board's throttle */
	}
	proc_usage(pid, &hwm, &cpu1);
	if (nlat > 0) {
		qsort(lat, (size_t)nlat, sizeof(double), tl_bench_cmp_double);
		printf("  tally-board --serve following, one event committed "
		    "-> the page published (its /events change), %d "
		    "samples: median %.0f ms, max %.0f ms; %.2f s cpu for "
		    "them (%.0f ms each); peak RSS %.1f MiB\n", nlat,
		    lat[nlat / 2], lat[nlat - 1], cpu1 - cpu0,
		    (cpu1 - cpu0) * 1e3 / nlat, (double)hwm / 1024.0);
		tl_bench_target("graph: tally-board, commit -> page at the "
		    "mesh's size, median", "< 2000 ms", lat[nlat / 2] < 2000,
		    "%.0f ms", lat[nlat / 2]);
	} else
		printf("  tally-board --serve: no change announced\n");
out:
	if (fd >= 0)
		close(fd);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

int
main(void)
{
	const char *b = getenv("TALLY_BIN"), *e;
	double scale = (e = getenv("BENCH_SCALE")) ? atof(e) : 1.0, t0, secs;
	int runs = (e = getenv("BENCH_RUNS")) ? atoi(e) : 21;
	long modules = (long)(MODULES * (scale > 0 ? scale : 1.0)), done = 0;
	char bin[4096], *home, *logdir, *out, mod[32], mod2[32];
	struct tl_log *log;
	struct tl_txn *t;
	struct load l;
	uint64_t last = 0, used = 0, map = 0;
	int rc;

	if (runs < 1)
		runs = 1;
	snprintf(bin, sizeof(bin), "%s/tally", b && *b ? b : "build/bin");
	if (access(bin, X_OK) != 0) {
		fprintf(stderr, "bench_graph: no tally at %s (set TALLY_BIN)\n",
		    bin);
		return 1;
	}
	home = tl_test_tmpdir("bench-graph");
	logdir = tl_test_path(home, "log");
	out = tl_test_path(home, "rebuild.out");
	if (mkdir(logdir, 0700) != 0)
		die(logdir, errno);

	printf("bench_graph: %d nodes, %ld consumer modules; bulk load "
	    "through the deciders, %d commands per write transaction, log "
	    "opened with TL_LOG_NOSYNC (a bulk load: commits are not synced; "
	    "a crash would lose them, which a benchmark can redo)\n", NODES,
	    modules, PER_TXN);
	fflush(stdout);
	if ((rc = tl_log_open_opts(logdir, &(struct tl_log_opts){
	    .flags = TL_LOG_CREATE | TL_LOG_NOSYNC,
	    .mapsize = (size_t)4 << 30 }, &log)) != 0)
		die("open", rc);
	t0 = tl_bench_now();
	memset(&l, 0, sizeof(l));
	l.setup = 1;
	if ((rc = tl_log_write(log, load_cb, &l)) != 0) {
		fprintf(stderr, "bench_graph: setup: %s (%s)\n",
		    tl_strerror(rc), l.why);
		return 1;
	}
	l.setup = 0;
	while (done < modules) {
		l.first = done;
		l.count = modules - done < PER_TXN ? modules - done : PER_TXN;
		if ((rc = tl_log_write(log, load_cb, &l)) != 0) {
			fprintf(stderr, "bench_graph: modules %ld..: %s (%s)\n",
			    done, tl_strerror(rc), l.why);
			return 1;
		}
		done += l.count;
		if (done % (modules / 10 > 0 ? modules / 10 : 1) == 0) {
			fprintf(stderr, "  ... %ld modules, %.1f s\n", done,
			    tl_bench_now() - t0);
		}
	}
	secs = tl_bench_now() - t0;
	if ((rc = tl_log_begin(log, TL_TXN_RDONLY, &t)) != 0)
		die("begin", rc);
	tl_log_last(t, &last, NULL);
	tl_log_abort(t);
	tl_log_size(log, &used, &map);
	scrape_cost(log);
	tl_log_close(log);
	/*
	 * The bulk load did not sync: write it out now, so that the
	 * commands below are not timed against the kernel's writeback.
	 */
	t0 = tl_bench_now();
	sync();
	fprintf(stderr, "  ... sync %.1f s\n", tl_bench_now() - t0);
	printf("  bulk load: %llu events in %.1f s: "
	    "%.0f events/s (%.0f commands/s); log %.0f MiB\n",
	    (unsigned long long)last, secs, (double)last / secs,
	    (double)(NODES + modules * 2 + modules / 10) / secs,
	    (double)used / (1 << 20));
	fflush(stdout);

	/* A module with two assignments and a queue, and a plain one. */
	module_name(mod, sizeof(mod), modules / 2 - (modules / 2) % 20);
	module_name(mod2, sizeof(mod2), modules / 2 + 7);
	printf("  whole processes of %s (%d runs each):\n", bin, runs);
	{
		char *sa[] = { bin, "status", mod, NULL };
		char *sb[] = { bin, "status", mod2, NULL };
		char *ea[] = { bin, "explain", mod, NULL };
		char *eb[] = { bin, "explain", mod2, NULL };
		char *sj[] = { bin, "status", mod, "--json", NULL };
		char la[64], lb[64], lc[64], ld[64], le[64];

		snprintf(la, sizeof(la), "tally status %s", mod);
		snprintf(lb, sizeof(lb), "tally status %s", mod2);
		snprintf(lc, sizeof(lc), "tally explain %s", mod);
		snprintf(ld, sizeof(ld), "tally explain %s", mod2);
		snprintf(le, sizeof(le), "tally status %s --json", mod);
		time_command(la, bin, home, sa, runs, 20);
		time_command(lb, bin, home, sb, runs, 20);
		time_command(le, bin, home, sj, runs, 20);
		time_command(lc, bin, home, ea, runs, 20);
		time_command(ld, bin, home, eb, runs, 20);
	}
	{
		char *rb[] = { bin, "rebuild", "--json", NULL };
		int i;

		for (i = 0; i < 2; i++) {
			struct proc pr = run_tally(bin, home, out, rb);
			unsigned long long ev = 0;
			double s = 0;
			char buf[512] = "";
			FILE *fp = fopen(out, "r");
			const char *p;

			if (fp != NULL) {
				size_t n = fread(buf, 1, sizeof(buf) - 1, fp);

				buf[n] = '\0';
				fclose(fp);
			}
			if ((p = strstr(buf, "\"events\":")) != NULL)
				ev = strtoull(p + 9, NULL, 10);
			if ((p = strstr(buf, "\"seconds\":")) != NULL)
				s = atof(p + 10);
			printf("  tally rebuild (run %d): %llu events; process "
			    "%.2f s wall, %.2f s cpu (two threads): %.0f "
			    "events/s (%.0f per cpu second); replay and commits "
			    "%.2f s; peak RSS %.1f MiB (the log's mapped pages "
			    "count); exit %d  [target >= 300000 events/s: "
			    "%s]\n", i + 1, ev, pr.secs, pr.cpu, pr.secs > 0 ?
			    (double)ev / pr.secs : 0, pr.cpu > 0 ?
			    (double)ev / pr.cpu : 0, s,
			    (double)pr.maxrss_kb / 1024.0, pr.code,
			    pr.secs > 0 && (double)ev / pr.secs >= 300000 ?
			    "met" : "MISSED");
			tl_bench_target("graph: tally rebuild", ">= 300000 "
			    "events/s", pr.secs > 0 && (double)ev / pr.secs >=
			    300000, "%.0f events/s (run %d)", pr.secs > 0 ?
			    (double)ev / pr.secs : 0, i + 1);
			if (pr.code != 0)
				printf("    output: %s\n", buf);
		}
	}
	board_cost(bin, home);
	if ((e = getenv("BENCH_KEEP")) != NULL && *e == '1')
		printf("  kept: TALLY_HOME=%s\n", home);
	else
		tl_test_tmpdir_done(home), home = NULL;
	free(home);
	free(logdir);
	free(out);
	return 0;
}
