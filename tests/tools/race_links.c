/*
 * race_links.c - a module's user racing tally-node for its files, for
 * tests/integration/88_node_files.sh: run as that user, it plants
 * symbolic and hard links to a canary at every name the agent writes
 * or wrote (the files, their temporary names of before, NAME.tmp.PID
 * for the next pids the kernel will hand out, the module's directory),
 * as fast as system calls go, until STOPFILE exists and at least MIN
 * tries are made; prints "TRIES WON" (WON: links that took).
 *
 * Usage: race_links DIR MODULE CANARY STOPFILE MIN
 *
 * The shell loop it replaces forked some forty processes a try, which
 * made 1,000 tries take a quarter of an hour on a loaded machine; the
 * same system calls from one process make more tries in a second.
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The last pid the kernel handed out (0 when it cannot be read). */
static long
last_pid(void)
{
	FILE *fp = fopen("/proc/sys/kernel/ns_last_pid", "r");
	long p = 0;

	if (fp != NULL) {
		if (fscanf(fp, "%ld", &p) != 1)
			p = 0;
		fclose(fp);
	}
	return p;
}

/* Every link planted at path f (a file the agent writes). */
static unsigned long
plant(const char *f, const char *canary, long p)
{
	char t[PATH_MAX];
	unsigned long won = 0;
	int q;

	for (q = 1; q <= 8; q++) {
		snprintf(t, sizeof(t), "%s.tmp.%ld", f, p + q);
		won += symlink(canary, t) == 0;
	}
	snprintf(t, sizeof(t), "%s.tmp.%ld", f, p + 1);
	won += link(canary, t) == 0;
	won += unlink(f) == 0 && symlink(canary, f) == 0;
	return won;
}

int
main(int argc, char **argv)
{
	const char *dir, *mod, *canary, *stop;
	char md[PATH_MAX], old[PATH_MAX], f[PATH_MAX];
	unsigned long tries = 0, won = 0, min;
	struct dirent *e;
	DIR *d;

	if (argc != 6) {
		fprintf(stderr, "usage: race_links DIR MODULE CANARY STOPFILE "
		    "MIN\n");
		return 2;
	}
	dir = argv[1];
	mod = argv[2];
	canary = argv[3];
	stop = argv[4];
	min = strtoul(argv[5], NULL, 10);
	snprintf(md, sizeof(md), "%s/%s", dir, mod);
	snprintf(old, sizeof(old), "%s/%s.old", dir, mod);
	while (tries < min || access(stop, F_OK) != 0) {
		long p = last_pid();

		tries++;
		if ((d = opendir(md)) != NULL) {
			while ((e = readdir(d)) != NULL) {
				if (e->d_name[0] == '.')
					continue;
				if ((size_t)snprintf(f, sizeof(f), "%s/%s", md,
				    e->d_name) < sizeof(f))
					won += plant(f, canary, p);
			}
			closedir(d);
		}
		snprintf(f, sizeof(f), "%s/%s.env", dir, mod);
		won += plant(f, canary, p);
		won += rename(md, old) == 0 && symlink(canary, md) == 0;
		if ((size_t)snprintf(f, sizeof(f), "%s/link", md) < sizeof(f))
			won += symlink(canary, f) == 0;
	}
	printf("%lu %lu\n", tries, won);
	return 0;
}
