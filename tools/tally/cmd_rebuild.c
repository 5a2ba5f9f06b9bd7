/*
 * cmd_rebuild.c - tally rebuild: drop every projection, replay the log.
 */
#include <errno.h>
#include <getopt.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "projections/proj.h"
#include "tally.h"

static const char usage[] =
"usage: tally rebuild [--check] [--step N] [--json]\n"
"\n"
"Empties every projection table and folds the whole log again: the\n"
"log is the only source of truth.  The fold is committed every N\n"
"events (default 100000), each commit a true past state: interrupted,\n"
"the next command carries on from it.  With --check nothing is kept:\n"
"the tables are rebuilt inside one transaction that is thrown away,\n"
"compared with the live ones byte for byte and each table's digest\n"
"printed (exit 5 if they differ).\n";

#define MAX_TABLES 32

struct digests {
	char		name[MAX_TABLES][40];
	unsigned char	d[MAX_TABLES][32];
	size_t		entries[MAX_TABLES];
	size_t		n;
};

static int
collect(const char *name, const unsigned char digest[32], size_t entries,
    void *arg)
{
	struct digests *ds = arg;

	if (ds->n == MAX_TABLES)
		return TL_ETOOBIG;
	snprintf(ds->name[ds->n], sizeof(ds->name[0]), "%s", name);
	memcpy(ds->d[ds->n], digest, 32);
	ds->entries[ds->n++] = entries;
	return 0;
}

struct rb_arg {
	int		 check;
	struct digests	 before, after;
	uint64_t	 events;
	uint64_t	 bad;		/* the event that stopped it */
	struct timespec	 t0, t1;	/* the replay alone */
};

#define CHECK_DONE (-31901)

static int
rebuild_cb(struct tl_txn *t, void *arg)
{
	struct rb_arg *ra = arg;
	int rc;

	memset(&ra->before, 0, sizeof(ra->before));
	memset(&ra->after, 0, sizeof(ra->after));
	/* Digests cost a pass over every table: only --check needs them. */
	if ((rc = tl_proj_catchup(t, 0)) != 0 ||
	    (rc = tl_kv_digest_all(t, collect, &ra->before)) != 0)
		return rc;
	clock_gettime(CLOCK_MONOTONIC, &ra->t0);
	if ((rc = tl_proj_rebuild(t, 0, &ra->events)) != 0)
		return rc;
	clock_gettime(CLOCK_MONOTONIC, &ra->t1);
	if ((rc = tl_kv_digest_all(t, collect, &ra->after)) != 0)
		return rc;
	return CHECK_DONE;
}

int
cmd_rebuild(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "check", no_argument, NULL, 'c' },
		{ "step", required_argument, NULL, 's' },
		{ 0 }
	};
	unsigned long long step = TL_PROJ_REBUILD_STEP;
	char *end;
	struct rb_arg ra;
	struct timespec t0, t1;
	uint64_t used = 0, map = 0;
	double secs, rsecs;
	size_t i;
	int c, rc, same = 1;

	memset(&ra, 0, sizeof(ra));
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			ra.check = 1;
			break;
		case 's':
			errno = 0;
			step = strtoull(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || step == 0 ||
			    optarg[0] == '-') {
				cli_errx("--step: want a positive number of "
				    "events, not '%s'", optarg);
				return TL_EXIT_USAGE;
			}
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if ((rc = cli_open_log(cli, 0)) != 0)
		return rc;
	/*
	 * --check writes the new tables beside the old ones in one
	 * transaction.  Without map room for both, the full map would abort
	 * the replay and tl_log_write() would run it all again in a grown
	 * map.  (Stepped, the dropped pages are free again after the first
	 * commit, and a full map re-runs one step.)
	 */
	if (ra.check && tl_log_size(cli->log, &used, &map) == 0 &&
	    map < used * 2) {
		cli_close(cli);
		if ((rc = tl_log_open_opts(cli->logdir, &(struct tl_log_opts){
		    .mapsize = (size_t)used * 2 }, &cli->log)) != 0)
			return cli_fail(cli, rc, "open the log");
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (ra.check)
		rc = tl_log_write(cli->log, rebuild_cb, &ra);
	else {
		ra.t0 = t0;
		rc = tl_proj_rebuild_log(cli->log, step, &ra.events,
		    &ra.bad);
		clock_gettime(CLOCK_MONOTONIC, &ra.t1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc != 0 && rc != CHECK_DONE && ra.bad != 0) {
		/* Stepped: the steps before it are committed and true. */
		char held[64] = "nothing";

		if (ra.events > 0)
			snprintf(held, sizeof(held), "events 1-%llu",
			    (unsigned long long)ra.events);
		cli_errx("rebuild stopped at event %llu: %s; the projections "
		    "hold %s (the log is untouched: `tally verify` checks "
		    "it)", (unsigned long long)ra.bad, tl_strerror(rc), held);
		return cli_exit_for(rc);
	}
	if (rc != 0 && rc != CHECK_DONE)
		return cli_fail(cli, rc, "rebuild");
	/* The whole command (commit included), and the replay alone. */
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	rsecs = (double)(ra.t1.tv_sec - ra.t0.tv_sec) +
	    (double)(ra.t1.tv_nsec - ra.t0.tv_nsec) / 1e9;
	if (ra.check && ra.before.n != ra.after.n)
		same = 0;
	for (i = 0; ra.check && i < ra.after.n; i++) {
		char hex[65];

		sodium_bin2hex(hex, sizeof(hex), ra.after.d[i], 32);
		if (i >= ra.before.n || memcmp(ra.before.d[i], ra.after.d[i],
		    32) != 0 || strcmp(ra.before.name[i], ra.after.name[i]))
			same = 0;
		if (!cli->json)
			printf("  %-10s %8zu entries  %s\n", ra.after.name[i],
			    ra.after.entries[i], hex);
	}
	if (cli->json)
		printf("{\"events\":%llu,\"seconds\":%.3f,"
		    "\"replay_seconds\":%.3f,%s\"kept\":%s}\n",
		    (unsigned long long)ra.events, secs, rsecs, !ra.check ? "" :
		    same ? "\"identical\":true," : "\"identical\":false,",
		    ra.check ? "false" : "true");
	else {
		printf("%s %llu events in %.3f s (replay %.3f s, %.0f "
		    "events/s)", ra.check ? "replayed" : "rebuilt from",
		    (unsigned long long)ra.events, secs, rsecs,
		    rsecs > 0 ? (double)ra.events / rsecs : 0.0);
		if (ra.check)
			printf("; tables %s the live ones", same ?
			    "identical to" : "DIFFER from");
		putchar('\n');
	}
	return same ? TL_EXIT_OK : TL_EXIT_CORRUPT;
}
