/*
 * write.c - running deciders and readers for the commands.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "core/json.h"
#include "reactors/epoch.h"
#include "tally.h"

/* A dry run's way out of tl_log_write: abort, but report success. */
#define DRY_RUN_DONE	(-31900)

/* A reader that checked this many events moves the verified record. */
#define READ_ADVANCE	1024

int
cli_check_log(struct tl_cli *cli, struct tl_txn *t, uint64_t *checkedp,
    char *msg, size_t cap)
{
	char why[TL_WHY_MAX] = "";
	uint64_t bad = 0;
	int rc;

	msg[0] = '\0';
	if ((rc = tl_log_check(t, checkedp, &bad, why)) == 0)
		return 0;
	if (rc == TL_ECORRUPT || rc == TL_EMALFORMED)
		snprintf(msg, cap, "the log (%s/data.mdb) does not verify at "
		    "event %llu (%s): refusing to act on it or to append "
		    "after it; see tally verify", cli->logdir,
		    (unsigned long long)bad, why[0] ? why : tl_strerror(rc));
	else
		snprintf(msg, cap, "cannot check the log (%s/data.mdb): %s",
		    cli->logdir, tl_strerror(rc));
	return rc;
}

struct write_arg {
	struct tl_cli		*cli;
	cli_decide_fn		 fn;
	void			*arg;
	struct cli_write_opts	*o;
	size_t			 had;	/* entries of cli->appended before */
	char			 why[2 * TL_WHY_MAX];	/* tl_ctx's */
};

/*
 * Every event a write appends is noted for --json (seq, type, stream:
 * never a body, which may hold ciphertext), then handed to the
 * command's own on_emit, if any, with the command's argument.
 */
static void
note_emit(struct tl_ctx *c, uint64_t seq, const char *type,
    const char *stream, const void *body, size_t len)
{
	struct write_arg *wa = c->arg;

	if (wa->cli->appended != NULL)
		json_array_append_new(wa->cli->appended, json_pack(
		    "{s:I,s:s,s:s}", "seq", (json_int_t)seq, "type", type,
		    "stream", stream));
	if (wa->o != NULL && wa->o->on_emit != NULL) {
		c->arg = wa->o->emit_arg;
		wa->o->on_emit(c, seq, type, stream, body, len);
		c->arg = wa;
	}
}

static int
write_cb(struct tl_txn *t, void *arg)
{
	struct write_arg *wa = arg;
	struct tl_ctx c;
	int rc;

	wa->why[0] = '\0';
	/* Nothing is appended after an event that does not verify. */
	if ((rc = cli_check_log(wa->cli, t, NULL, wa->why,
	    sizeof(wa->why))) != 0)
		return rc;
	/* tl_log_write may run this again: forget the last attempt's. */
	while (wa->cli->appended != NULL &&
	    json_array_size(wa->cli->appended) > wa->had)
		json_array_remove(wa->cli->appended,
		    json_array_size(wa->cli->appended) - 1);
	/*
	 * A home made before meshes had ids gets one with its first write
	 * (a standby never comes here: cli_standby_refuse).
	 */
	if (wa->o == NULL || !wa->o->dry_run) {
		char mesh[TL_MESH_LEN + 1];
		uint64_t seq = 0;

		if ((rc = tl_mesh_ensure(t, wa->cli->actor, mesh,
		    &seq)) != 0) {
			/* A retry after the map grew starts with no why. */
			snprintf(wa->why, sizeof(wa->why), "cannot read or "
			    "record the mesh id in the log (%.400s/data.mdb): %s; "
			    "nothing was appended (see tally verify)",
			    wa->cli->logdir, tl_strerror(rc));
			return rc;
		}
		if (seq != 0 && wa->cli->appended != NULL)
			json_array_append_new(wa->cli->appended, json_pack(
			    "{s:I,s:s,s:s}", "seq", (json_int_t)seq, "type",
			    TL_EV_MESH_CREATED, "stream", TL_CP_STREAM));
	}
	if ((rc = tl_ctx_begin(&c, t, wa->cli->actor)) != 0)
		return rc;
	c.on_emit = note_emit;
	c.arg = wa;
	rc = wa->fn(&c, wa->arg);
	if (rc == 0)
		rc = tl_ctx_end(&c);
	if (wa->o != NULL)
		wa->o->emitted = c.emitted;
	snprintf(wa->why, sizeof(wa->why), "%s", c.why);
	if (rc == 0 && wa->o != NULL && wa->o->dry_run)
		return DRY_RUN_DONE;
	return rc;
}

/* The follow record's stream, when only its checkpoint says it. */
static int
follow_ckpt(const char *name, uint64_t seq, void *arg)
{
	struct tl_ep_follow *f = arg;

	(void)seq;
	if (strncmp(name, "follow:", 7) != 0)
		return 0;
	snprintf(f->stream, sizeof(f->stream), "%s", name + 7);
	return 1;
}

void
cli_standby_leader(struct tl_txn *t, char *buf, size_t cap)
{
	struct tl_ep_follow f;

	if (tl_ep_follow_get(t, &f) != 0) {
		memset(&f, 0, sizeof(f));
		tl_ckpt_each(t, follow_ckpt, &f);
	}
	if (f.stream[0] != '\0' && f.url[0] != '\0')
		snprintf(buf, cap, "the leader publishing stream %s at %s",
		    f.stream, f.url);
	else if (f.stream[0] != '\0')
		snprintf(buf, cap, "the leader publishing stream %s",
		    f.stream);
	else
		snprintf(buf, cap, "a leader it has not yet heard from "
		    "(tallyd --follow has not run here)");
}

int
cli_standby_refuse(struct tl_cli *cli)
{
	struct tl_txn *t;
	char leader[900] = "a leader";
	int mine = cli->log == NULL, standby;

	/*
	 * No marker: not a standby (epoch.h: tally init --standby makes it
	 * before it records the standing, tally promote removes it after).
	 * With one, the standing the log records decides.
	 */
	if (!(standby = tl_ep_is_standby(cli->home)))
		return 0;
	if (!mine || cli_open_log(cli, CLI_OPEN_READER | TL_LOG_RDONLY) == 0) {
		if (tl_log_begin(cli->log, TL_TXN_RDONLY, &t) == 0) {
			if (tl_ep_standing(t, cli->home, &standby, NULL) != 0)
				standby = 1;	/* unreadable: refuse */
			if (standby)
				cli_standby_leader(t, leader, sizeof(leader));
			tl_log_abort(t);
		}
		if (mine)
			cli_close(cli);
	}
	if (!standby)
		return 0;
	cli_errx("%s is a standby's home: it follows %s, and only what that "
	    "leader published is appended here (a write of its own would "
	    "fork this log from the leader's); nothing was appended.  Write "
	    "on the leader, or make this home the leader: stop tallyd "
	    "--follow, then tally promote --yes", cli->home, leader);
	return TL_EXIT_LOCKED;
}

int
cli_write(struct tl_cli *cli, cli_decide_fn fn, void *arg,
    struct cli_write_opts *o)
{
	struct write_arg wa = { cli, fn, arg, o, 0, "" };
	int rc;

	/* A dry run appends nothing, so a standby may show one. */
	if ((o == NULL || !o->dry_run) && (rc = cli_standby_refuse(cli)) != 0)
		return rc;
	if (cli->log == NULL && (rc = cli_open_log(cli, 0)) != 0)
		return rc;
	if (cli->json && cli->appended == NULL &&
	    (cli->appended = json_array()) == NULL)
		return TL_EXIT_FAIL;
	wa.had = cli->appended ? json_array_size(cli->appended) : 0;
	if (tl_log_clustered(cli->log) && (o == NULL || !o->dry_run))
		cli_cluster_start(cli);
	rc = tl_log_write(cli->log, write_cb, &wa);
	cli_cluster_stop(cli);
	if (rc == DRY_RUN_DONE || rc == 0)
		return TL_EXIT_OK;
	if (wa.why[0] != '\0') {
		cli_errx("%s", wa.why);
		return cli_exit_for(rc);
	}
	if (rc == TL_ENOTFOUND) {
		/*
		 * A refusal says what is not found (tl_refuse); a lookup of
		 * the log's own records that misses without one is a damaged
		 * page LMDB cannot tell from an absent key.
		 */
		cli_errx("the log (%s/data.mdb) is damaged: a record the log "
		    "holds was not found; nothing was appended (see tally "
		    "verify)", cli->logdir);
		return TL_EXIT_CORRUPT;
	}
	if (rc > 0) {
		/* The system refused the write (ENOSPC, EIO, EROFS, ...). */
		cli_errx("cannot append to the log (%s/data.mdb): %s%s; the "
		    "transaction was rolled back and nothing was appended",
		    cli->logdir, strerror(rc), rc == EIO ? " (with space "
		    "left: the disk failed, or a damaged page made LMDB write "
		    "nonsense; tally verify says which)" : "");
		return TL_EXIT_FAIL;
	}
	return cli_fail(cli, rc, "write");
}

/* Moves the verified record to where a read checked (its long tail). */
static int
advance_cb(struct tl_txn *t, void *arg)
{
	int rc = tl_log_set_verified(t, arg);

	return rc == TL_ECONFLICT ? 0 : rc;
}

static int
catchup_cb(struct tl_txn *t, void *arg)
{
	(void)arg;
	return tl_proj_catchup(t, 0);
}

struct rebuild_arg {
	struct tl_cli	*cli;
	uint64_t	 at;
	cli_read_fn	 fn;
	void		*arg;
	int		 ex;
};

static int
at_cb(struct tl_txn *t, void *arg)
{
	struct rebuild_arg *ra = arg;
	struct tl_proj p;
	char msg[TL_WHY_MAX + 256];
	int rc;

	if ((rc = cli_check_log(ra->cli, t, NULL, msg, sizeof(msg))) != 0) {
		if (rc != TL_ECORRUPT && rc != TL_EMALFORMED)
			return rc;	/* a full map is grown, and run again */
		cli_errx("%s", msg);
		ra->ex = cli_exit_for(rc);
		return DRY_RUN_DONE;
	}
	if ((rc = tl_proj_rebuild(t, ra->at, NULL)) != 0 ||
	    (rc = tl_proj_open(t, &p)) != 0)
		return rc;
	ra->ex = ra->fn(ra->cli, t, &p, ra->arg);
	return DRY_RUN_DONE;	/* the past is looked at, never kept */
}

int
cli_read(struct tl_cli *cli, uint64_t at, cli_read_fn fn, void *arg)
{
	struct tl_txn *t;
	struct tl_proj p;
	uint64_t ck = 0, last = 0;
	int rc, ex;

	if (cli->log == NULL && (rc = cli_open_log(cli, CLI_OPEN_READER)) != 0)
		return rc;
	if (at != 0) {
		struct rebuild_arg ra = { cli, at, fn, arg, 0 };

		rc = tl_log_write(cli->log, at_cb, &ra);
		if (rc != DRY_RUN_DONE)
			return cli_fail(cli, rc, "replay");
		return ra.ex;
	}
	if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY, &t)) != 0)
		return cli_fail(cli, rc, "read");
	tl_ckpt_get(t, TL_PROJ_CKPT, &ck);
	tl_log_last(t, &last, NULL);
	if (ck < last || (rc = tl_proj_open(t, &p)) != 0) {
		/* Behind (a bare appender) or never built: fold first. */
		tl_log_abort(t);
		if (tl_log_readonly(cli->log)) {
			cli_errx("the projections are behind the log at %s and "
			    "it is on a read-only file system: cannot bring "
			    "them up to date", cli->logdir);
			return TL_EXIT_FAIL;
		}
		if ((rc = tl_log_write(cli->log, catchup_cb, NULL)) != 0)
			return cli_fail(cli, rc, "update projections");
		if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY, &t)) != 0)
			return cli_fail(cli, rc, "read");
		if ((rc = tl_proj_open(t, &p)) != 0) {
			tl_log_abort(t);
			return cli_fail(cli, rc, "open projections");
		}
	}
	{
		char msg[TL_WHY_MAX + 256];
		uint64_t n = 0;

		/* Nothing is shown or acted on past an event that is bad. */
		if ((rc = cli_check_log(cli, t, &n, msg, sizeof(msg))) != 0) {
			tl_log_abort(t);
			cli_errx("%s", msg);
			return cli_exit_for(rc);
		}
		if (n >= READ_ADVANCE && !tl_log_readonly(cli->log)) {
			struct tl_chain c;

			/*
			 * A long tail (a bare appender's, or tallyd's before
			 * it moved the record): the next reader need not
			 * walk it again.  Best effort: a reader that cannot
			 * write still reads.
			 */
			tl_log_last(t, &c.seq, c.hash);
			tl_log_abort(t);
			tl_log_write(cli->log, advance_cb, &c);
			if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY,
			    &t)) != 0)
				return cli_fail(cli, rc, "read");
			if ((rc = tl_proj_open(t, &p)) != 0) {
				tl_log_abort(t);
				return cli_fail(cli, rc, "open projections");
			}
		}
	}
	ex = fn(cli, t, &p, arg);
	tl_log_abort(t);
	return ex;
}

void
cli_json_done(struct tl_cli *cli, json_t *doc)
{
	if (doc == NULL)
		doc = json_object();
	if (doc == NULL)
		return;
	/* A dry run appended nothing: what it would have is "would". */
	json_object_set_new(doc, cli->dry_run ? "would_append" : "appended",
	    cli->appended ? json_incref(cli->appended) : json_array());
	json_dumpf(doc, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(doc);
	json_decref(cli->appended);
	cli->appended = NULL;
	cli->json_done = 1;
}

void
cli_print_emitted(struct tl_ctx *c, uint64_t seq, const char *type,
    const char *stream, const void *body, size_t len)
{
	json_t *j = tl_json_body(body, len);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	(void)c;
	printf("  %llu %s %s %s\n", (unsigned long long)seq, type, stream,
	    s ? s : "{}");
	free(s);
	json_decref(j);
}

int
cli_read_secret(const char *prompt, char *buf, size_t cap)
{
	struct termios old, noecho;
	int tty = isatty(STDIN_FILENO), restore = 0;
	static int unbuffered;
	size_t n;

	/*
	 * stdio's buffer would keep a copy of every secret read, unwiped,
	 * in ordinary heap: unbuffered, fgets reads straight into buf.
	 * Nothing reads stdin before the first secret.
	 */
	if (!unbuffered) {
		setvbuf(stdin, NULL, _IONBF, 0);
		unbuffered = 1;
	}
	if (tty) {
		if (prompt[0] != '\0')
			fprintf(stderr, "%s: ", prompt);
		if (tcgetattr(STDIN_FILENO, &old) == 0) {
			noecho = old;
			noecho.c_lflag &= ~(tcflag_t)ECHO;
			restore = tcsetattr(STDIN_FILENO, TCSAFLUSH,
			    &noecho) == 0;
		}
	}
	if (fgets(buf, (int)cap, stdin) == NULL) {
		if (restore)
			tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		return EIO;
	}
	if (restore) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	return n == 0 ? TL_EINVAL : 0;
}

int
cli_read_secret_pem(const char *prompt, char *buf, size_t cap)
{
	char p[128];
	size_t n = 0, len;
	int rc;

	if (cap < 2)
		return TL_ETOOBIG;
	buf[0] = '\0';
	snprintf(p, sizeof(p), "%s (PEM, up to its END line)", prompt);
	for (;;) {
		/* A line at a time, straight into buf (no stdio copy). */
		if (cap - n < 2)
			return TL_ETOOBIG;
		rc = cli_read_secret(n == 0 ? p : "", buf + n, cap - n);
		if (rc == EIO)
			return EIO;
		len = strlen(buf + n);
		if (rc == TL_EINVAL || len == 0) {
			if (n == 0)
				continue;	/* blank lines before it */
			if (cap - n < 2)
				return TL_ETOOBIG;
			buf[n++] = '\n';
			buf[n] = '\0';
			continue;
		}
		/* A line longer than the room left was cut: too big. */
		if (n + len + 1 >= cap)
			return TL_ETOOBIG;
		if (strncmp(buf + n, "-----END ", 9) == 0) {
			n += len;
			buf[n++] = '\n';
			buf[n] = '\0';
			return 0;
		}
		n += len;
		buf[n++] = '\n';
		buf[n] = '\0';
	}
}
