/*
 * cmd_snapshot.c - tally snapshot: a consistent copy of the home's log,
 * to start another home from (tally init --from-snapshot).
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

#include "core/error.h"
#include "tally.h"

static const char usage[] =
"usage: tally snapshot [--home DIR] [--json] FILE\n"
"\n"
"Writes a consistent copy of the log (every event, and the projections\n"
"derived from them) to FILE, a new file, mode 0600, while tallyd and\n"
"other commands go on.  It holds no secret in clear: the master key is\n"
"not in it.  A follower of a cluster that fell behind the tail etcd\n"
"still holds starts again from a peer's snapshot: tally init --standby\n"
"--etcd ... --from-snapshot FILE (docs/standby.md).\n";

int
cmd_snapshot(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ 0 }
	};
	struct tl_txn *t;
	uint64_t head = 0;
	int c, rc, ex;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 1 != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if ((ex = cli_open_log(cli, CLI_OPEN_READER)) != 0)
		return ex;
	if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY, &t)) == 0) {
		rc = tl_log_last(t, &head, NULL);
		tl_log_abort(t);
	}
	if (rc == 0)
		rc = tl_log_snapshot(cli->log, argv[optind]);
	if (rc == TL_EEXIST) {
		cli_errx("%s exists: refusing to write over it", argv[optind]);
		return TL_EXIT_REFUSED;
	}
	if (rc != 0)
		return cli_fail(cli, rc, "snapshot");
	if (cli->json)
		cli_json_done(cli, json_pack("{s:s,s:I}", "file",
		    argv[optind], "head", (json_int_t)head));
	else
		printf("snapshot of %s (through event %llu at least) in %s\n",
		    cli->home, (unsigned long long)head, argv[optind]);
	return TL_EXIT_OK;
}
