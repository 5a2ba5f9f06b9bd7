/*
 * tl_bench.c - the process and timing harness the benchmarks share.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "projections/events.h"
#include "tl_bench.h"
#include "tl_test.h"

static void (*bench_exit_fn)(void);

double
tl_bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t
tl_bench_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
tl_bench_msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int
tl_bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double
tl_bench_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), tl_bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void
tl_bench_print_list(const double *v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		printf("%s%.0f", i ? ", " : "", v[i]);
}

int
tl_bench_envint(const char *name, int def, int lo, int hi)
{
	const char *s = getenv(name);
	int v;

	if (s == NULL || *s == '\0')
		return def;
	v = atoi(s);
	return v < lo ? lo : v > hi ? hi : v;
}

void
tl_bench_dirs(const char **src, const char **bin)
{
	static char buf[4096];

	*src = getenv("TALLY_SRC");
	if (*src == NULL || **src == '\0')
		*src = ".";
	*bin = getenv("TALLY_BIN");
	if (*bin == NULL || **bin == '\0') {
		snprintf(buf, sizeof(buf), "%s/build/bin", *src);
		*bin = buf;
	}
}

static void
bench_on_signal(int sig)
{
	if (bench_exit_fn != NULL)
		bench_exit_fn();
	signal(sig, SIG_DFL);
	raise(sig);
}

void
tl_bench_atexit(void (*fn)(void))
{
	bench_exit_fn = fn;
	atexit(fn);
	signal(SIGINT, bench_on_signal);
	signal(SIGTERM, bench_on_signal);
	signal(SIGPIPE, SIG_IGN);
}

/* Forks argv with tl_bench_run's environment and files: its pid, or -1. */
static pid_t
bench_spawn(const char *home, const char *in, const char *out,
    const char *err, char *const argv[])
{
	pid_t pid;
	int fd;

	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) != 0)
		return pid;
	if (home != NULL)
		setenv("TALLY_HOME", home, 1);
	if ((fd = open(in ? in : "/dev/null", O_RDONLY)) >= 0) {
		dup2(fd, 0);
		close(fd);
	}
	if ((fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_APPEND,
	    0600)) >= 0) {
		dup2(fd, 1);
		if (err == NULL)
			dup2(fd, 2);
		close(fd);
	}
	if (err != NULL && (fd = open(err, O_WRONLY | O_CREAT | O_APPEND,
	    0600)) >= 0) {
		dup2(fd, 2);
		close(fd);
	}
	execv(argv[0], argv);
	_exit(127);
}

int
tl_bench_run(const char *home, const char *in, const char *out,
    const char *err, char *const argv[])
{
	pid_t pid;
	int st;

	if ((pid = bench_spawn(home, in, out, err, argv)) < 0)
		return -1;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * argv = BIN/PROG, then the arguments in ap up to a NULL; path holds
 * argv[0].  0, or -1 if there are more than TL_BENCH_MAXARGS.
 */
static int
bench_argv(char *argv[TL_BENCH_MAXARGS + 2], char *path, size_t cap,
    const char *bin, const char *prog, va_list ap)
{
	int n = 0;
	char *a;

	snprintf(path, cap, "%s/%s", bin, prog);
	argv[n++] = path;
	while ((a = va_arg(ap, char *)) != NULL) {
		if (n > TL_BENCH_MAXARGS)
			return -1;
		argv[n++] = a;
	}
	argv[n] = NULL;
	return 0;
}

int
tl_bench_tally(const char *bin, const char *home, const char *in,
    const char *out, ...)
{
	char path[4096], *argv[TL_BENCH_MAXARGS + 2];
	va_list ap;
	int rc;

	va_start(ap, out);
	rc = bench_argv(argv, path, sizeof(path), bin, "tally", ap);
	va_end(ap);
	if (rc != 0)
		return -1;
	return tl_bench_run(home, in, out, NULL, argv);
}

int
tl_bench_assign_batch(const char *bin, const char *home, const char *out,
    const char *pfx, int first, int last, const char *node)
{
	char path[4096], **argv, *names;
	size_t n = last >= first ? (size_t)(last - first + 1) : 0, i;
	int rc = -1;

	argv = calloc(n + 4, sizeof(*argv));
	names = calloc(n + 1, 64);
	if (argv == NULL || names == NULL || n == 0)
		goto out;
	snprintf(path, sizeof(path), "%s/tally", bin);
	argv[0] = path;
	argv[1] = "assign";
	for (i = 0; i < n; i++) {
		snprintf(names + i * 64, 64, "%s%04d", pfx, first + (int)i);
		argv[2 + i] = names + i * 64;
	}
	argv[2 + n] = (char *)node;
	rc = tl_bench_run(home, NULL, out, NULL, argv);
out:
	free(argv);
	free(names);
	return rc;
}

double
tl_bench_through_tally(const char *bin, const char *home, const char *clilog,
    const char *dlog, const char *pfx, int n, int batch, double *cli)
{
	struct tl_bench_dlv dl;
	char m[16];
	double t0, t1, end, t = -1;
	pid_t dpid;
	int i, k;

	if (tl_bench_dlv_open(&dl, home) != 0)
		return -1;
	if ((dpid = tl_bench_tallyd_start(bin, home, dlog, "--interval", "1",
	    NULL)) < 0)
		goto out;
	t0 = tl_bench_now();
	if (batch && tl_bench_assign_batch(bin, home, clilog, pfx, 1, n,
	    "node-a") != 0)
		goto out;
	for (i = 1; !batch && i <= n; i++) {
		snprintf(m, sizeof(m), "%s%04d", pfx, i);
		if (tl_bench_tally(bin, home, NULL, clilog, "assign", m,
		    "node-a", NULL) != 0)
			goto out;
	}
	t1 = tl_bench_now();
	*cli = t1 - t0;
	end = t1 + 600;
	while ((k = tl_bench_dlv_count(&dl, NULL)) < n) {
		if (k < 0 || tl_bench_now() > end)
			goto out;
		tl_bench_msleep(1);
	}
	t = tl_bench_now() - t0;
out:
	tl_bench_dlv_close(&dl);
	tl_bench_tallyd_stop(&dpid);
	return t;
}

int
tl_bench_harness(const char *src, const char *script, const char *a1,
    const char *a2, const char *a3)
{
	char path[4096];
	char *argv[6];

	snprintf(path, sizeof(path), "%s/tests/harness/%s", src, script);
	argv[0] = "/bin/sh";
	argv[1] = path;
	argv[2] = (char *)a1;
	argv[3] = (char *)a2;
	argv[4] = (char *)a3;
	argv[5] = NULL;
	return tl_bench_run(NULL, NULL, NULL, NULL, argv);
}

int
tl_bench_pg_start(const char *src, const char *dir, int hint, char *port,
    size_t cap)
{
	int p, tries;

	for (p = hint, tries = 0; tries < 30; tries++, p++) {
		if (!tl_test_port_free(p))
			continue;
		snprintf(port, cap, "%d", p);
		if (tl_bench_harness(src, "pg.sh", "start", dir, port) == 0)
			return 0;
	}
	return -1;
}

pid_t
tl_bench_tallyd_start(const char *bin, const char *home, const char *log,
    ...)
{
	char path[4096], lock[4400], buf[32], *argv[TL_BENCH_MAXARGS + 2];
	va_list ap;
	pid_t pid;
	ssize_t n;
	int i, fd, rc;

	va_start(ap, log);
	rc = bench_argv(argv, path, sizeof(path), bin, "tallyd", ap);
	va_end(ap);
	if (rc != 0)
		return -1;
	snprintf(lock, sizeof(lock), "%s/tallyd.lock", home);
	if ((pid = bench_spawn(home, NULL, log, NULL, argv)) < 0)
		return -1;
	/* An earlier tallyd's lock names another pid: only ours counts. */
	for (i = 0; i < 1000; i++) {
		if ((fd = open(lock, O_RDONLY)) >= 0) {
			n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			buf[n > 0 ? n : 0] = '\0';
			if (atol(buf) == (long)pid)
				return pid;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		tl_bench_msleep(5);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

void
tl_bench_tallyd_stop(pid_t *pid)
{
	int i;

	if (*pid <= 0)
		return;
	kill(*pid, SIGTERM);
	for (i = 0; i < 3000; i++) {
		if (waitpid(*pid, NULL, WNOHANG) == *pid) {
			*pid = -1;
			return;
		}
		tl_bench_msleep(10);
	}
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, 0);
	*pid = -1;
}

int
tl_bench_pg_exec(PGconn *c, const char *who, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
	    PQresultStatus(r) == PGRES_TUPLES_OK;

	if (!ok)
		fprintf(stderr, "%s: %.80s: %s", who, sql, PQerrorMessage(c));
	PQclear(r);
	return ok ? 0 : -1;
}

int
tl_bench_dlv_open(struct tl_bench_dlv *d, const char *home)
{
	char dir[4400];

	memset(d, 0, sizeof(*d));
	d->next = 1;
	snprintf(dir, sizeof(dir), "%s/log", home);
	if (tl_log_open(dir, TL_LOG_RDONLY, &d->log) != 0) {
		d->log = NULL;
		return -1;
	}
	return 0;
}

int
tl_bench_dlv_count(struct tl_bench_dlv *d, const char *stream)
{
	struct tl_filter f = { 0 };
	struct tl_txn *t;
	struct tl_iter *it;
	struct tl_event ev;
	uint64_t next = d->next;
	int n = 0, rc;

	if (d->log == NULL || tl_log_begin(d->log, TL_TXN_RDONLY, &t) != 0)
		return -1;
	/* Not by type: every event read moves next on, a match or not. */
	f.stream = stream;
	f.from = stream == NULL ? d->next : 0;
	if (tl_iter_open(t, &f, &it) != 0) {
		n = -1;
		goto out_txn;
	}
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		if (strcmp(ev.type, d->type != NULL ? d->type :
		    TL_EV_CRED_DELIVERED) == 0)
			n++;
		next = ev.seq + 1;
	}
	tl_iter_close(it);
	if (rc != TL_EEOF)
		n = -1;
	else if (stream == NULL) {
		d->next = next;
		n = d->n += n;
	}
out_txn:
	tl_log_abort(t);
	return n;
}

void
tl_bench_dlv_close(struct tl_bench_dlv *d)
{
	if (d->log != NULL)
		tl_log_close(d->log);
	d->log = NULL;
}

void
tl_bench_wait_type(const char *me, const char *home, const char *type,
    int n, double timeout_s)
{
	struct tl_bench_dlv d;
	double end = tl_bench_now() + timeout_s;
	int k;

	if (tl_bench_dlv_open(&d, home) != 0) {
		fprintf(stderr, "%s: cannot open %s/log\n", me, home);
		exit(1);
	}
	d.type = type;
	while ((k = tl_bench_dlv_count(&d, NULL)) < n) {
		if (k < 0 || tl_bench_now() > end) {
			fprintf(stderr, "%s: %d of %d %s\n", me, k, n, type);
			exit(1);
		}
		tl_bench_msleep(2);
	}
	tl_bench_dlv_close(&d);
}

int
tl_bench_delivered(const char *home, const char *stream)
{
	struct tl_bench_dlv d;
	int n;

	if (tl_bench_dlv_open(&d, home) != 0)
		return -1;
	n = tl_bench_dlv_count(&d, stream);
	tl_bench_dlv_close(&d);
	return n;
}

int
tl_bench_env(const char *bin, const char *home, const char *node,
    const char *module, const char *key, const char *err, char *buf,
    size_t cap)
{
	char path[4096];
	char *argv[] = { path, "env", (char *)node, (char *)module,
	    "--node-key", (char *)key, NULL };
	size_t len = 0;
	ssize_t n;
	pid_t pid;
	int fd[2], efd, st, full = 0, rc = -1;

	if (cap == 0)
		return -1;
	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s/tally", bin);
	if (pipe(fd) != 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0) {
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	if (pid == 0) {
		setenv("TALLY_HOME", home, 1);
		close(fd[0]);
		dup2(fd[1], 1);
		close(fd[1]);
		if ((efd = open(err ? err : "/dev/null", O_WRONLY | O_CREAT |
		    O_APPEND, 0600)) >= 0) {
			dup2(efd, 2);
			close(efd);
		}
		if ((efd = open("/dev/null", O_RDONLY)) >= 0) {
			dup2(efd, 0);
			close(efd);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	close(fd[1]);
	/* Read to the end even past cap, so that the child never blocks. */
	for (;;) {
		char sink[512];

		if (len + 1 < cap)
			n = read(fd[0], buf + len, cap - 1 - len);
		else {
			if ((n = read(fd[0], sink, sizeof(sink))) > 0)
				full = 1;
			tl_secret_wipe(sink, sizeof(sink));
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (!full)
			len += (size_t)n;
	}
	close(fd[0]);
	if (waitpid(pid, &st, 0) == pid && WIFEXITED(st))
		rc = WEXITSTATUS(st);
	if (full)
		rc = -1;
	if (rc < 0) {
		tl_secret_wipe(buf, cap);
		buf[0] = '\0';
	} else
		buf[len] = '\0';
	return rc;
}

int
tl_bench_envval(const char *env, const char *name, char *val, size_t cap)
{
	size_t nl = strlen(name), vl;
	const char *p = env, *e;

	if (cap == 0)
		return -1;
	val[0] = '\0';
	for (; *p != '\0'; p = *e ? e + 1 : e) {
		e = p + strcspn(p, "\n");
		if ((size_t)(e - p) <= nl || strncmp(p, name, nl) != 0 ||
		    p[nl] != '=')
			continue;
		if ((vl = (size_t)(e - p) - nl - 1) >= cap)
			return -1;
		memcpy(val, p + nl + 1, vl);
		val[vl] = '\0';
		return 0;
	}
	return -1;
}

void
tl_bench_target(const char *what, const char *target, int met,
    const char *figure, ...)
{
	extern char *program_invocation_short_name;
	const char *path = getenv("TALLY_BENCH_SUMMARY");
	char fig[256];
	va_list ap;
	FILE *f;

	va_start(ap, figure);
	vsnprintf(fig, sizeof(fig), figure, ap);
	va_end(ap);
	printf("  [target] %s: %s (%s): %s\n", what, fig, target,
	    met ? "met" : "MISSED");
	fflush(stdout);
	if (path == NULL || *path == '\0' || (f = fopen(path, "a")) == NULL)
		return;
	fprintf(f, "%-16s %s: %s (%s): %s\n", program_invocation_short_name,
	    what, fig, target, met ? "met" : "MISSED");
	fclose(f);
}
