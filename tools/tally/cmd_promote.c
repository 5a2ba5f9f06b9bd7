/*
 * cmd_promote.c - tally promote: a standby becomes the leader.
 *
 * Appends control-plane.promoted {epoch N+1, head, head_hash} to the
 * standby's log (the head it took over at: what it had copied from the
 * stream) and removes the standby marker, so that tallyd then runs
 * there as the leader: it raises the new epoch's fence on every
 * provider before its first pass (reactors/epoch.h), and a leader of a
 * lower epoch refuses to act on a fenced provider.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/body.h"
#include "core/error.h"
#include "core/secret.h"
#include "reactors/epoch.h"
#include "tally.h"

static const char usage[] =
"usage: tally promote [--home DIR] [--yes]\n"
"\n"
"Makes this standby (tally init --standby, filled by tallyd --follow)\n"
"the leader: appends control-plane.promoted with the next epoch and the\n"
"head it takes over at, and removes DIR/standby.  Stop tallyd --follow\n"
"first and make sure the old leader is down: the new leader's tallyd\n"
"fences every provider at the new epoch before it acts, and a tallyd of\n"
"an older epoch then refuses to act on them.  Refuses without the\n"
"leader's master key in DIR/master.key (0600, copied out of band).\n"
"Without --yes it only says what it would do.\n";

struct promote_arg {
	struct tl_cli	*cli;
	char		why[TL_WHY_MAX + 256];
	uint64_t	epoch;
	uint64_t	head;
	uint64_t	seq;
	char		hash[2 * TL_HASH_LEN + 1];
};

static int
promote_cb(struct tl_txn *t, void *arg)
{
	struct promote_arg *pa = arg;
	struct tl_append a;
	struct tl_body b;
	uint8_t h[TL_HASH_LEN];
	const void *body;
	size_t len, i;
	int rc;

	/* A standby takes over only a log that verifies. */
	if ((rc = cli_check_log(pa->cli, t, NULL, pa->why,
	    sizeof(pa->why))) != 0)
		return rc;
	if ((rc = tl_ep_current(t, &pa->epoch, NULL)) != 0 ||
	    (rc = tl_log_last(t, &pa->head, h)) != 0)
		return rc;
	pa->epoch++;
	for (i = 0; i < TL_HASH_LEN; i++)
		snprintf(pa->hash + 2 * i, 3, "%02x", h[i]);
	tl_body_init(&b);
	tl_body_u64(&b, "epoch", pa->epoch);
	tl_body_u64(&b, "head", pa->head);
	tl_body_str(&b, "head_hash", pa->hash);
	if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
		memset(&a, 0, sizeof(a));
		a.type = TL_EV_CP_PROMOTED;
		a.stream = TL_CP_STREAM;
		a.expect = TL_VER_ANY;
		a.actor = "cli:promote";
		a.body = body;
		a.body_len = len;
		rc = tl_append(t, &a, &pa->seq, NULL);
	}
	tl_body_free(&b);
	return rc;
}

int
cmd_promote(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "yes", no_argument, NULL, 'y' },
		{ 0 }
	};
	struct promote_arg pa;
	struct tl_key key;
	char path[1200], why[160] = "";
	long holder = 0;
	int c, rc, yes = 0, fd = -1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'y':
			yes = 1;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (!tl_ep_is_standby(cli->home)) {
		cli_errx("%s is not a standby (no %s/" TL_STANDBY_FILE "): "
		    "nothing to promote", cli->home, cli->home);
		return TL_EXIT_REFUSED;
	}
	snprintf(path, sizeof(path), "%s/master.key", cli->home);
	if ((rc = tl_secret_load(path, &key, why)) != 0) {
		cli_errx("refusing to promote without the master key: %s (copy "
		    "the leader's master.key to %s out of band, mode 0600)",
		    why[0] ? why : tl_strerror(rc), path);
		return TL_EXIT_REFUSED;
	}
	tl_secret_key_free(&key);
	/* tallyd --follow holds the log: it must be stopped first. */
	rc = tl_log_lock_daemon(cli->logdir, &fd, &holder);
	if (rc == TL_ELOCKED) {
		cli_errx("a tallyd (pid %ld) runs on %s: stop tallyd --follow "
		    "before promoting", holder, cli->home);
		return TL_EXIT_LOCKED;
	}
	if (rc != 0)
		return cli_fail(cli, rc, "lock the log");
	if ((rc = cli_open_log(cli, 0)) != 0)
		goto out;
	if (!yes) {
		printf("would promote %s to the leader (the next epoch, at its "
		    "head); run again with --yes\n", cli->home);
		rc = TL_EXIT_REFUSED;
		goto out;
	}
	memset(&pa, 0, sizeof(pa));
	pa.cli = cli;
	if ((rc = tl_log_write(cli->log, promote_cb, &pa)) != 0) {
		if (pa.why[0] != '\0') {
			cli_errx("%s", pa.why);
			rc = cli_exit_for(rc);
		} else
			rc = cli_fail(cli, rc, "append control-plane.promoted");
		goto out;
	}
	snprintf(path, sizeof(path), "%s/" TL_STANDBY_FILE, cli->home);
	if (unlink(path) != 0 && errno != ENOENT) {
		cli_errx("promoted (event %llu), but cannot remove %s: %s",
		    (unsigned long long)pa.seq, path, strerror(errno));
		rc = TL_EXIT_FAIL;
		goto out;
	}
	if (cli->json)
		cli_json_done(cli, json_pack("{s:I,s:I,s:I,s:s}", "epoch",
		    (json_int_t)pa.epoch, "seq", (json_int_t)pa.seq, "head",
		    (json_int_t)pa.head, "head_hash", pa.hash));
	else
		printf("promoted: epoch %llu from event %llu (head %llu, "
		    "%.16s...); start tallyd here\n",
		    (unsigned long long)pa.epoch, (unsigned long long)pa.seq,
		    (unsigned long long)pa.head, pa.hash);
	rc = TL_EXIT_OK;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}
