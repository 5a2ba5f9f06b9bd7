/*
 * cmd_verify.c - tally verify: every envelope, every link, every hash.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

#include "tally.h"

static const char usage[] =
"usage: tally verify [--home DIR] [--json]\n"
"\n"
"Walks the whole log, decoding every envelope and recomputing the hash\n"
"chain.  Exits 0 when everything is sound; otherwise exits 5 and names\n"
"the first sequence number that does not verify: the event that was\n"
"changed, not its successor.  Nothing before it is affected.\n";

int
cmd_verify(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	struct tl_txn *t;
	char why[TL_WHY_MAX];
	uint64_t n = 0, bad = 0;
	int c, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if ((rc = cli_open_log(cli, TL_LOG_RDONLY)) != 0)
		return rc;
	if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY, &t)) != 0)
		return cli_fail(cli, rc, "read the log");
	rc = tl_log_verify(t, &n, &bad, why);
	tl_log_abort(t);
	if (rc == 0) {
		if (cli->json)
			printf("{\"ok\":true,\"events\":%llu}\n",
			    (unsigned long long)n);
		else
			printf("ok: %llu events, chain sound\n",
			    (unsigned long long)n);
		return TL_EXIT_OK;
	}
	if (bad == 0)
		return cli_fail(cli, rc, "verify");
	if (cli->json) {
		json_t *j = json_pack("{s:b,s:I,s:I,s:s}", "ok", 0, "events",
		    (json_int_t)n, "bad_seq", (json_int_t)bad, "reason",
		    why[0] ? why : tl_strerror(rc));

		json_dumpf(j, stdout, JSON_COMPACT);
		putchar('\n');
		json_decref(j);
	} else
		printf("BAD at seq %llu: %s (%llu events before it verify)\n",
		    (unsigned long long)bad, why[0] ? why : tl_strerror(rc),
		    (unsigned long long)n);
	cli_errx("the log (%s/data.mdb) does not verify from seq %llu on: %s",
	    cli->logdir, (unsigned long long)bad, why[0] ? why :
	    tl_strerror(rc));
	return TL_EXIT_CORRUPT;
}
