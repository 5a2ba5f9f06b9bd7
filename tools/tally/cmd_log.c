/*
 * cmd_log.c - tally log: print events, filtered.
 */
#include <getopt.h>
#include <stdio.h>

#include "tally.h"

static const char usage[] =
"usage: tally log [--home DIR] [--from SEQ] [--to SEQ] [--type PATTERN]\n"
"                 [--stream STREAM] [--json]\n"
"\n"
"Prints events in sequence order: readable text by default, JSON lines\n"
"with --json (seq, ts, type, stream, version, actor, cause, id, corr,\n"
"body).  PATTERN is a glob on the type (\"grant.*\").  Secrets are\n"
"always shown as \"<redacted>\".\n";

int
cmd_log(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 't' },
		{ "type", required_argument, NULL, 'T' },
		{ "stream", required_argument, NULL, 's' },
		{ 0 }
	};
	struct tl_filter f = { 0 };
	struct tl_txn *t = NULL;
	struct tl_iter *it = NULL;
	struct tl_event ev;
	int c, rc, ex = TL_EXIT_OK;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (cli_parse_u64(optarg, &f.from) != 0) {
				cli_errx("--from: not a sequence number: %s",
				    optarg);
				return TL_EXIT_USAGE;
			}
			break;
		case 't':
			if (cli_parse_u64(optarg, &f.to) != 0) {
				cli_errx("--to: not a sequence number: %s",
				    optarg);
				return TL_EXIT_USAGE;
			}
			break;
		case 'T':
			f.type = optarg;
			break;
		case 's':
			f.stream = optarg;
			break;
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
	if ((rc = tl_iter_open(t, &f, &it)) != 0) {
		ex = cli_fail(cli, rc, "read the log");
		goto out;
	}
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		if (cli->json) {
			if ((rc = cli_print_event_json(stdout, &ev)) != 0)
				break;
		} else
			cli_print_event_text(stdout, &ev);
	}
	if (rc != TL_EEOF) {
		cli_errx("event %llu: %s (run `tally verify`)%s%s",
		    (unsigned long long)tl_iter_errseq(it), tl_strerror(rc),
		    rc == TL_ECORRUPT ? ": " : "", rc == TL_ECORRUPT ?
		    tl_log_lasterr(cli->log) : "");
		ex = cli_exit_for(rc);
	}
out:
	tl_iter_close(it);
	tl_log_abort(t);
	return ex;
}
