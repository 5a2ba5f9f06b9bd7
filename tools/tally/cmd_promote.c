/*
 * cmd_promote.c - tally promote: a standby becomes the leader.
 *
 * Takes over only a log every event of which is authenticated: each
 * one was copied from the stream with the leader's signature, kept
 * beside it (core/log.h, tl_log_sig_put), and is verified here again
 * with the control plane's public key (derived from the master key)
 * before anything is appended; the first that is not is named and
 * nothing is done.  Then, in ONE write transaction, appends
 * control-plane.promoted {epoch N+1, head, head_hash} (the head it
 * took over at), keeps the promotion's own signature beside it, and
 * records the home's standing as the leader (reactors/epoch.h,
 * tl_ep_standing), so a promote killed anywhere has either done nothing or
 * done all of it.  The marker file DIR/standby is removed after the
 * commit (the compatibility marker older tallys read); a promote that
 * finds the standing already the leader's, and the marker still there,
 * finishes by removing it and appends nothing.
 *
 * TALLY_TEST_PROMOTE_PAUSE_MS, a debugging hook for tests only
 * (tests/integration/91_promote_killed.sh): when set, promote sleeps
 * that many milliseconds between its steps (after taking the lock,
 * after the checks, after the append before the commit, after the
 * commit, after removing the marker), so a test can kill it at each.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/body.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/secret.h"
#include "reactors/epoch.h"
#include "tally.h"

static const char usage[] =
"usage: tally promote [--home DIR] [--yes]\n"
"\n"
"Makes this standby (tally init --standby, filled by tallyd --follow)\n"
"the leader: verifies the leader's signature of every event it takes\n"
"over (refusing a log with one that is not authenticated, naming it),\n"
"then appends control-plane.promoted with the next epoch and the head it\n"
"takes over at and records this home as the leader, in one transaction,\n"
"and removes DIR/standby.  Stop tallyd --follow first and make sure the\n"
"old leader is down: the new leader's tallyd fences every provider at\n"
"the new epoch before it acts, and a tallyd of an older epoch then\n"
"refuses to act on them.  Refuses without the leader's master key in\n"
"DIR/master.key (0600, copied out of band).  Run again after it was\n"
"interrupted, it finishes what it did (never promotes twice).\n"
"Without --yes it only says what it would do.\n";

struct promote_arg {
	struct tl_cli	*cli;
	const uint8_t	*cp_sk;		/* guarded memory, the caller's */
	uint8_t		 cp_pk[TL_SIGN_PUBLEN];
	char		 why[TL_WHY_MAX + 2048];
	uint64_t	 epoch;
	uint64_t	 head;
	uint64_t	 seq;
	uint64_t	 checked;
	char		 hash[2 * TL_HASH_LEN + 1];
};

/* The debugging hook (above); nothing when the variable is unset. */
static void
pause_step(void)
{
	const char *v = getenv("TALLY_TEST_PROMOTE_PAUSE_MS");
	long ms;
	struct timespec ts;

	if (v == NULL || (ms = strtol(v, NULL, 10)) <= 0)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

/*
 * Every event, chain and signature: 0, or TL_ESECRET / TL_ECORRUPT with
 * the first one that fails named in pa->why.
 */
static int
verify_all(struct promote_arg *pa, struct tl_txn *t)
{
	struct tl_filter f = { 0 };
	struct tl_iter *it = NULL;
	struct tl_event ev;
	struct tl_log_sig ls;
	struct tl_stream_auth sa;
	const char *what = NULL;
	int rc;

	f.chain = 1;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		rc = tl_log_sig_get(t, ev.seq, &ls);
		if (rc == TL_ENOTFOUND)
			what = "no signature of the leader's is kept with it "
			    "(it was not copied from the leader's stream by a "
			    "follower that checked one)";
		else if (rc == TL_ECORRUPT)
			what = "the signature kept with it is not one this "
			    "tally wrote";
		else if (rc != 0)
			break;
		else {
			sa.seq = ev.seq;
			sa.epoch = ls.epoch;
			sa.hash = ev.hash;
			sa.body = ev.raw;
			sa.len = ev.raw_len;
			rc = tl_secret_stream_verify(pa->cp_pk, &sa, ls.sig);
			if (rc == TL_ESECRET)
				what = "its signature does not verify with the "
				    "leader's signing key (of the master key in "
				    "this home)";
			else if (rc != 0)
				break;
		}
		if (what != NULL) {
			snprintf(pa->why, sizeof(pa->why), "refusing to promote "
			    "%s: event %llu (%s on %s) is not authenticated: "
			    "%s; nothing was appended", pa->cli->home,
			    (unsigned long long)ev.seq, ev.type, ev.stream,
			    what);
			rc = TL_ESECRET;
			break;
		}
		pa->checked++;
	}
	if (rc == TL_ECORRUPT && what == NULL)
		snprintf(pa->why, sizeof(pa->why), "refusing to promote %s: "
		    "event %llu does not verify in the chain; nothing was "
		    "appended", pa->cli->home,
		    (unsigned long long)tl_iter_errseq(it));
	tl_iter_close(it);
	return rc == TL_EEOF ? 0 : rc;
}

static int
promote_cb(struct tl_txn *t, void *arg)
{
	struct promote_arg *pa = arg;
	struct tl_append a;
	struct tl_body b;
	struct tl_event ev;
	struct tl_log_sig ls;
	struct tl_stream_auth sa;
	uint8_t h[TL_HASH_LEN];
	const void *body;
	size_t len, i;
	int rc;

	pa->checked = 0;
	/* A standby takes over only a log that verifies. */
	if ((rc = cli_check_log(pa->cli, t, NULL, pa->why,
	    sizeof(pa->why))) != 0)
		return rc;
	if ((rc = verify_all(pa, t)) != 0)
		return rc;
	pause_step();
	if ((rc = tl_ep_current(t, &pa->epoch, NULL)) != 0 ||
	    (rc = tl_log_last(t, &pa->head, h)) != 0)
		return rc;
	pa->epoch++;
	for (i = 0; i < TL_HASH_LEN; i++)
		snprintf(pa->hash + 2 * i, 3, "%02x", h[i]);
	tl_body_init(&b);
	tl_body_u64(&b, TL_F_EPOCH, pa->epoch);
	tl_body_u64(&b, TL_F_HEAD, pa->head);
	tl_body_str(&b, TL_F_HEAD_HASH, pa->hash);
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
	if (rc != 0)
		return rc;
	/*
	 * Signed as the leader signs what it publishes, so that this log
	 * stays one every event of which is authenticated.
	 */
	if ((rc = tl_log_get(t, pa->seq, &ev)) != 0)
		return rc;
	sa.seq = ev.seq;
	sa.epoch = pa->epoch;
	sa.hash = ev.hash;
	sa.body = ev.raw;
	sa.len = ev.raw_len;
	ls.epoch = pa->epoch;
	if ((rc = tl_secret_stream_sign(pa->cp_sk, &sa, ls.sig)) != 0 ||
	    (rc = tl_log_sig_put(t, pa->seq, &ls)) != 0)
		return rc;
	/* The end of standby-ness, with the promotion: one commit. */
	if ((rc = tl_ep_standing_put(t, 0, pa->seq)) != 0)
		return rc;
	pause_step();
	return 0;
}

/* The standing the log records; 0 or an exit code (said). */
static int
standing(struct tl_cli *cli, int *standby, uint64_t *promoted)
{
	struct tl_txn *t;
	int rc;

	if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY, &t)) != 0)
		return cli_fail(cli, rc, "read the log");
	rc = tl_ep_standing(t, cli->home, standby, promoted);
	tl_log_abort(t);
	return rc != 0 ? cli_fail(cli, rc, "read the home's standing") : 0;
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
	struct tl_key key = { NULL };
	uint8_t *sk = NULL;
	char path[1200], why[TL_WHY_MAX] = "";
	uint64_t promoted = 0;
	long holder = 0;
	int c, rc, yes = 0, fd = -1, standby = 0;

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
	/* No marker: no standby, nothing left to finish (epoch.h). */
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
	memset(&pa, 0, sizeof(pa));
	pa.cli = cli;
	if ((sk = tl_secret_alloc(TL_SIGN_SECLEN)) == NULL) {
		tl_secret_key_free(&key);
		return cli_fail(cli, ENOMEM, "load the signing key");
	}
	tl_secret_cp_keypair(&key, pa.cp_pk, sk);
	tl_secret_key_free(&key);
	pa.cp_sk = sk;
	/* tallyd --follow holds the log: it must be stopped first. */
	rc = tl_log_lock_daemon(cli->logdir, &fd, &holder);
	if (rc == TL_ELOCKED) {
		cli_errx("a tallyd (pid %ld) runs on %s: stop tallyd --follow "
		    "before promoting", holder, cli->home);
		rc = TL_EXIT_LOCKED;
		goto out;
	}
	if (rc != 0) {
		rc = cli_fail(cli, rc, "lock the log");
		goto out;
	}
	pause_step();
	if ((rc = cli_open_log(cli, 0)) != 0)
		goto out;
	if (tl_log_clustered(cli->log)) {
		cli_errx("%s is a cluster's home: the cluster elects its "
		    "leader (tallyd takes over by itself when the leader's "
		    "lease lapses); nothing to promote", cli->home);
		rc = TL_EXIT_REFUSED;
		goto out;
	}
	if ((rc = standing(cli, &standby, &promoted)) != 0)
		goto out;
	if (!standby)
		goto finish;	/* promoted, killed before the marker went */
	if (!yes) {
		printf("would promote %s to the leader (the next epoch, at its "
		    "head); run again with --yes\n", cli->home);
		rc = TL_EXIT_REFUSED;
		goto out;
	}
	if ((rc = tl_log_write(cli->log, promote_cb, &pa)) != 0) {
		if (pa.why[0] != '\0') {
			cli_errx("%s", pa.why);
			rc = rc == TL_ESECRET ? TL_EXIT_REFUSED : cli_exit_for(rc);
		} else
			rc = cli_fail(cli, rc, "append control-plane.promoted");
		goto out;
	}
	pause_step();
finish:
	snprintf(path, sizeof(path), "%s/" TL_STANDBY_FILE, cli->home);
	if (unlink(path) != 0 && errno != ENOENT) {
		cli_errx("promoted, but cannot remove %s: %s (the log records "
		    "this home as the leader; run tally promote again to "
		    "finish)", path, strerror(errno));
		rc = TL_EXIT_FAIL;
		goto out;
	}
	pause_step();
	if (!standby) {
		if (cli->json)
			cli_json_done(cli, json_pack("{s:I,s:b}", "seq",
			    (json_int_t)promoted, "finished", 1));
		else
			printf("already promoted (event %llu); finished: "
			    "removed %s\n", (unsigned long long)promoted, path);
	} else if (cli->json)
		cli_json_done(cli, json_pack("{s:I,s:I,s:I,s:s,s:I}", "epoch",
		    (json_int_t)pa.epoch, "seq", (json_int_t)pa.seq, "head",
		    (json_int_t)pa.head, "head_hash", pa.hash, "verified",
		    (json_int_t)pa.checked));
	else
		printf("promoted: epoch %llu from event %llu (head %llu, "
		    "%.16s...; %llu event(s) verified against the leader's "
		    "signatures); start tallyd here\n",
		    (unsigned long long)pa.epoch, (unsigned long long)pa.seq,
		    (unsigned long long)pa.head, pa.hash,
		    (unsigned long long)pa.checked);
	rc = TL_EXIT_OK;
out:
	if (fd >= 0)
		close(fd);
	tl_secret_free(sk);
	return rc;
}
