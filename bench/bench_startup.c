/*
 * bench_startup - what a program costs before it does anything: the
 * dynamic loader, the libraries it links and their constructors.
 *
 * tally links core, the projections and the drivers' declarations, no
 * provider client (DESIGN.md rule 9); tally-node links core/ alone.
 * Both are run with --version, BENCH_STARTUP_N (300) times each,
 * interleaved so both see the same machine, and compared by the
 * median wall time of one fork, exec and wait; tallyd, which links
 * every provider's client, is measured beside them as the peer that
 * shows what the split saves.
 */
#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/tl_bench.h"

/* One run of path --version, output discarded: its wall time in ms. */
static double
once(const char *path)
{
	double t0 = tl_bench_now();
	pid_t pid;
	int st, fd;

	if ((pid = fork()) < 0) {
		perror("bench_startup: fork");
		exit(1);
	}
	if (pid == 0) {
		if ((fd = open("/dev/null", O_WRONLY)) >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(path, path, "--version", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		fprintf(stderr, "bench_startup: %s --version failed\n", path);
		exit(1);
	}
	return (tl_bench_now() - t0) * 1e3;
}

int
main(void)
{
	static const char *const prog[] = { "tally", "tally-node", "tallyd" };
	const char *src, *bin;
	char path[3][4096];
	double *t[3], med[3];
	int n = tl_bench_envint("BENCH_STARTUP_N", 300, 10, 100000);
	int i, j;

	tl_bench_dirs(&src, &bin);
	(void)src;
	for (j = 0; j < 3; j++) {
		snprintf(path[j], sizeof(path[j]), "%s/%s", bin, prog[j]);
		if ((t[j] = calloc((size_t)n, sizeof(double))) == NULL)
			return 1;
		(void)once(path[j]);	/* page cache warm */
	}
	for (i = 0; i < n; i++)
		for (j = 0; j < 3; j++)
			t[j][i] = once(path[j]);
	printf("startup: --version, %d runs each, interleaved (median ms)\n",
	    n);
	for (j = 0; j < 3; j++) {
		med[j] = tl_bench_median(t[j], n);
		printf("  %-10s %.3f ms\n", prog[j], med[j]);
	}
	printf("  tally / tally-node x%.2f, tallyd / tally-node x%.2f\n",
	    med[0] / med[1], med[2] / med[1]);
	tl_bench_target("startup: tally --version / tally-node --version",
	    "<= x1.5", med[0] <= 1.5 * med[1], "x%.2f (%.3f / %.3f ms)",
	    med[0] / med[1], med[0], med[1]);
	for (j = 0; j < 3; j++)
		free(t[j]);
	return 0;
}
