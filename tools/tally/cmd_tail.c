/*
 * cmd_tail.c - tally tail: follow the events, as a subscriber would
 * (core/sub.h): from a sequence number, from a checkpoint it owns, or
 * the last few; waiting for new ones with --follow.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/sub.h"
#include "tally.h"

static const char usage[] =
"usage: tally tail [--from SEQ | --checkpoint NAME] [-n N] [--type PATTERN]\n"
"                  [--follow] [--json]\n"
"\n"
"Prints events in order, one per line: readable text, or with --json the\n"
"JSON lines of `tally log --json` (secrets always \"<redacted>\").\n"
"\n"
"  --from SEQ         start at event SEQ\n"
"  --checkpoint NAME  start after the checkpoint sub:NAME (from --from, or\n"
"                     the first event, the first time) and move it as\n"
"                     lines are written out: run again, it goes on where\n"
"                     it stopped, repeating nothing and missing nothing\n"
"  -n, --lines N      without either: the last N events (default 10)\n"
"  --type PATTERN     only types matching a glob (\"grant.*\")\n"
"  -f, --follow       wait for new events; ends on SIGINT or SIGTERM, or\n"
"                     when the reader goes away, with status 0\n";

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* The first seq of the last n events matching type (head+1 if none). */
static int
last_n(struct tl_cli *cli, uint64_t n, const char *type, uint64_t *from)
{
	struct tl_txn *t;
	struct tl_iter *it = NULL;
	struct tl_filter f = { 0 };
	struct tl_event ev;
	uint64_t head = 0, *ring = NULL, seen = 0;
	int rc;

	if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	tl_log_last(t, &head, NULL);
	*from = head + 1;
	if (n == 0)
		goto out;
	if (type == NULL) {
		*from = head >= n ? head - n + 1 : 1;
		goto out;
	}
	if ((ring = calloc(n > 100000 ? 100000 : n, sizeof(*ring))) == NULL) {
		rc = ENOMEM;
		goto out;
	}
	if (n > 100000)
		n = 100000;
	f.type = type;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		goto out;
	while ((rc = tl_iter_next(it, &ev)) == 0)
		ring[seen++ % n] = ev.seq;
	if (rc == TL_EEOF) {
		rc = 0;
		if (seen > 0)
			*from = seen >= n ? ring[seen % n] : ring[0];
	}
out:
	free(ring);
	tl_iter_close(it);
	tl_log_abort(t);
	return rc;
}

/* A pipe whose reader has gone (head -n 3): nothing more to write to. */
static int
reader_gone(void)
{
	struct pollfd p = { STDOUT_FILENO, 0, 0 };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

/* Hands what was printed to the reader; 0, or EPIPE and friends. */
static int
flush_out(void)
{
	if (fflush(stdout) != 0 || ferror(stdout))
		return errno ? errno : EIO;
	return 0;
}

int
cmd_tail(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "from", required_argument, NULL, 'F' },
		{ "checkpoint", required_argument, NULL, 'c' },
		{ "lines", required_argument, NULL, 'n' },
		{ "type", required_argument, NULL, 'T' },
		{ "follow", no_argument, NULL, 'f' },
		{ 0 }
	};
	struct tl_sub_opts so = TL_SUB_OPTS_INIT;
	struct tl_sub *sub = NULL;
	struct tl_event ev;
	struct sigaction sa;
	uint64_t lines = 10, since_commit = 0;
	int c, rc, ex = TL_EXIT_OK, follow = 0, have_from = 0, dirty = 0;

	while ((c = getopt_long(argc, argv, "hfn:", opts, NULL)) != -1) {
		switch (c) {
		case 'F':
			if (cli_parse_u64(optarg, &so.from) != 0) {
				cli_errx("--from: not a sequence number: %s",
				    optarg);
				return TL_EXIT_USAGE;
			}
			have_from = 1;
			break;
		case 'c':
			so.checkpoint = optarg;
			break;
		case 'n':
			if (cli_parse_u64(optarg, &lines) != 0) {
				cli_errx("--lines: not a number: %s", optarg);
				return TL_EXIT_USAGE;
			}
			break;
		case 'T':
			so.type = optarg;
			break;
		case 'f':
			follow = 1;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (so.checkpoint != NULL && (strlen(so.checkpoint) == 0 ||
	    strlen(so.checkpoint) > TL_SUB_NAME_MAX)) {
		cli_errx("--checkpoint: a name of 1-%d characters",
		    TL_SUB_NAME_MAX);
		return TL_EXIT_USAGE;
	}
	if ((rc = cli_open_log(cli, so.checkpoint ? 0 : TL_LOG_RDONLY)) != 0)
		return rc;
	if (!have_from && so.checkpoint == NULL &&
	    (rc = last_n(cli, lines, so.type, &so.from)) != 0)
		return cli_fail(cli, rc, "read the log");
	if ((rc = tl_sub_attach(cli->log, &so, &sub)) != 0) {
		if (rc == TL_EINVAL)
			cli_errx("--checkpoint %s: use letters, digits and "
			    "-_.@/", so.checkpoint);
		return rc == TL_EINVAL ? TL_EXIT_USAGE :
		    cli_fail(cli, rc, "subscribe");
	}

	/* A reader that goes away or ^C ends the tail cleanly. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	while (!stop) {
		/*
		 * Lines not handed over yet: look without waiting, so they
		 * go out as soon as we are caught up.  Otherwise wait, in
		 * slices, so a signal between the check and the wait counts.
		 */
		rc = tl_sub_next(sub, follow && !dirty ? tl_sub_deadline(500) :
		    TL_SUB_NOWAIT, &ev);
		if (rc == 0) {
			if (cli->json) {
				if (cli_print_event_json(stdout, &ev) != 0 &&
				    !ferror(stdout)) {
					cli_errx("event %llu cannot be "
					    "rendered (run tally verify)",
					    (unsigned long long)ev.seq);
					ex = TL_EXIT_CORRUPT;
					break;
				}
			} else
				cli_print_event_text(stdout, &ev);
			if (ferror(stdout))
				break;	/* the reader went away */
			dirty = 1;
			if (so.checkpoint != NULL && ++since_commit >= 10000) {
				if (flush_out() != 0)
					break;
				if ((rc = tl_sub_commit(sub)) != 0) {
					ex = cli_fail(cli, rc, "checkpoint");
					break;
				}
				since_commit = 0;
				dirty = 0;
			}
			continue;
		}
		if (rc == EINTR)
			continue;
		if (rc != TL_ETIMEDOUT) {
			cli_errx("after event %llu: %s",
			    (unsigned long long)tl_sub_position(sub),
			    tl_strerror(rc));
			ex = cli_exit_for(rc);
			break;
		}
		/* Caught up: hand the lines over, then record the position. */
		if (flush_out() != 0)
			break;
		if (dirty) {
			if (so.checkpoint != NULL &&
			    (rc = tl_sub_commit(sub)) != 0) {
				ex = cli_fail(cli, rc, "checkpoint");
				break;
			}
			since_commit = 0;
			dirty = 0;
			if (follow)
				continue;	/* now wait */
		}
		if (!follow || reader_gone())
			break;
	}
	/* Whatever reached the reader is done with; nothing else. */
	if (flush_out() == 0 && so.checkpoint != NULL && dirty && ex == 0 &&
	    (rc = tl_sub_commit(sub)) != 0)
		ex = cli_fail(cli, rc, "checkpoint");
	if (ferror(stdout)) {
		/* The reader is gone: what is left in the buffer has no one to go to. */
		__fpurge(stdout);
		clearerr(stdout);
	}
	tl_sub_close(sub);
	return ex;
}
