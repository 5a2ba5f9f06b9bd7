/*
 * tl_bench.c - the process and timing harness the benchmarks share.
 */
#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tl_bench.h"

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
