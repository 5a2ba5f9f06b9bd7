/*
 * tally.h - the tally CLI's private header: the command table's
 * prototypes and the helpers every command shares, grouped by file.
 */
#ifndef TALLY_CLI_H
#define TALLY_CLI_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"
#include "core/log.h"
#include "projections/decide.h"

/* Exit codes: one table with tallyd's (tools/exit.h). */
#include "tools/exit.h"

struct tl_cli {
	char		 home[1024];	/* the tally home directory */
	char		 logdir[1100];	/* home/log */
	char		 actor[TL_ACTOR_MAX + 1];
	struct tl_log	*log;
	int		 json;
	int		 dry_run;	/* --json says would_append */
	/*
	 * With --json, the events cli_write appended ({seq,type,stream}),
	 * owned here; cli_json_done prints and drops them.  main prints
	 * them for a command that printed no document of its own.
	 */
	struct json_t	*appended;
	int		 json_done;	/* a --json document was printed */
	/* tallyd --commit started ahead (cluster.c); pid 0: none. */
	int		 cm_pid;
	int		 cm_in, cm_out;
};

/* main.c */
struct tl_cmd {
	const char	*name;
	int		(*fn)(struct tl_cli *, int, char **);
	const char	*summary;
};
extern const char *tl_prog;

/* names.c: lowercase [a-z0-9-], 1-63, no leading or trailing '-' */
int	 tl_name_ok(const char *s);

/* common.c */
void	 cli_init(struct tl_cli *cli);
int	 cli_set_home(struct tl_cli *cli, const char *home);
/*
 * Opens the log with TL_LOG_* flags; with CLI_OPEN_READER, for a command
 * that only reads (but may catch projections up), read-only when the
 * file system is.  Prints the error and returns an exit code.
 */
#define CLI_OPEN_READER	0x100
int	 cli_open_log(struct tl_cli *cli, unsigned flags);
void	 cli_close(struct tl_cli *cli);
/*
 * cluster.c: in a cluster's home (core/log.h, tl_log_clustered) every
 * commit of the log that appended goes through tallyd --commit first:
 * cli_cluster_commit is the hook (arg the tl_cli), which cli_open_log
 * sets from cli_commit_hook (main sets it: a pointer, so that common.c
 * calls nothing of cluster.c's).  Refused: TL_ENOTLEADER (exit 7: the
 * leader is named on stderr), TL_EUNAVAIL (exit 1), TL_ETOOBIG (4).
 */
int	 cli_cluster_commit(struct tl_txn *txn, uint64_t first,
	    const uint8_t prev[TL_HASH_LEN], uint64_t last, void *arg);
/*
 * cli_write starts tallyd --commit before its transaction (what it
 * costs to start, connect and shake hands with etcd is then not paid
 * with the log's write lock held) and ends it after: the hook gives
 * the started one its events, or starts one itself.  Errors are the
 * hook's to find; stop reaps one that was not given any.
 */
void	 cli_cluster_start(struct tl_cli *cli);
void	 cli_cluster_stop(struct tl_cli *cli);
extern tl_commit_fn cli_commit_hook;
int	 cli_exit_for(int err);
void	 cli_errx(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));
void	 cli_warnx(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));
/* Reports err for what (with LMDB's detail when there is one). */
int	 cli_fail(struct tl_cli *cli, int err, const char *what);
int	 cli_parse_u64(const char *s, uint64_t *out);
/*
 * A crash point for the tests: SIGKILLs the process when
 * $TALLY_FAULT_AT names point (tests/integration/14_node_key_kill.sh).
 */
void	 cli_fault_at(const char *point);
/*
 * Is h a node's routable name: a host name, an IPv4 address or an IPv6
 * literal, and never HOST:PORT (the port is each provider's setting)?
 * 1, or 0 with why (TL_WHY_MAX bytes) saying what is wrong with it.
 */
int	 cli_routable_ok(const char *h, char *why);
void	 cli_print_event_text(FILE *fp, const struct tl_event *ev);
int	 cli_print_event_json(FILE *fp, const struct tl_event *ev);

/*
 * The cheap check (tl_log_check) in t, the first thing every command
 * that acts does: 0, or the error with a sentence for the operator in
 * msg (naming the log's file and, for a log that does not verify, the
 * first bad sequence number).  *checkedp as tl_log_check's.
 */
int	 cli_check_log(struct tl_cli *cli, struct tl_txn *t,
	    uint64_t *checkedp, char *msg, size_t cap);

/*
 * Runs fn in one write transaction with a decider context: the log
 * checked (cli_check_log: exit 5 past an event that does not verify,
 * nothing appended), projections
 * caught up, fn's events appended and folded, committed when fn
 * returns 0 (or aborted for a dry run).  A refusal is printed with its
 * reason.  Returns an exit code.
 */
typedef int (*cli_decide_fn)(struct tl_ctx *c, void *arg);
struct cli_write_opts {
	int		 dry_run;
	tl_emit_fn	 on_emit;
	void		*emit_arg;
	size_t		 emitted;	/* out */
};
int	 cli_write(struct tl_cli *cli, cli_decide_fn fn, void *arg,
	    struct cli_write_opts *o);

/*
 * A standby never writes (tally promote makes it a leader): on a
 * standby's home, prints the refusal, naming the leader it follows, and
 * returns TL_EXIT_LOCKED; 0 elsewhere.  cli_write calls it first; a
 * command that appends or acts on providers by another way (check,
 * bootstrap, publish rewind) calls it before anything.  May open and
 * close cli->log.
 */
int	 cli_standby_refuse(struct tl_cli *cli);
/* Who the standby at t follows, in words, into buf (cap bytes). */
void	 cli_standby_leader(struct tl_txn *t, char *buf, size_t cap);

/*
 * Runs fn on the projections in a read transaction, after
 * cli_check_log (exit 5 past an event that does not verify), or, with
 * at != 0, on projections rebuilt up to seq at inside a transaction
 * that is then thrown away.  Returns an exit code.
 */
typedef int (*cli_read_fn)(struct tl_cli *cli, struct tl_txn *t,
	    const struct tl_proj *p, void *arg);
int	 cli_read(struct tl_cli *cli, uint64_t at, cli_read_fn fn, void *arg);

/*
 * --json of a command that writes: prints doc (NULL: an empty object;
 * the reference is taken) with "appended" set to the events cli_write
 * appended, as {seq, type, stream}, and marks the document printed.
 */
void	 cli_json_done(struct tl_cli *cli, struct json_t *doc);

/* Prints an emitted event as a dry run shows it. */
void	 cli_print_emitted(struct tl_ctx *c, uint64_t seq, const char *type,
	    const char *stream, const void *body, size_t len);

/* Reads a secret from standard input (one line, no echo on a tty). */
int	 cli_read_secret(const char *prompt, char *buf, size_t cap);
/*
 * Reads a PEM block from standard input as cli_read_secret reads a
 * line: blank lines skipped, then every line up to and with the first
 * "-----END " line, newlines kept.  0; EIO at the end of the input
 * before an END line; TL_ETOOBIG when it does not fit in cap.  What was
 * read is in buf (the caller wipes it) either way.
 */
int	 cli_read_secret_pem(const char *prompt, char *buf, size_t cap);
/*
 * Whether some driver declares the secret key a PEM key (decl.h:
 * TL_DRV_PEM_KEY): read up to its END line, not as one line.
 */
int	 cli_pem_key_setting(const char *key);
/*
 * Runs tallyd with args (NULL-terminated, after the program's name) on
 * cli's home, as git runs a remote helper: tallyd is the one program
 * that opens provider sessions.  It is found beside this program (make
 * install puts both in one directory), else on PATH; stdin the inlen
 * bytes of in (at most CLI_TALLYD_IN_MAX; NULL, 0: /dev/null), stderr
 * ours; each line of its stdout (without the newline, at most 64 KiB)
 * goes to line(arg) as it comes (NULL: discarded).  The lines may hold
 * secrets (tallyd --prepare): the buffer is wiped before it is freed.
 * Returns tallyd's exit code, or TL_EXIT_FAIL (said) when it cannot be
 * run or dies of a signal.
 */
#define CLI_TALLYD_IN_MAX	((size_t)64 << 20)
/* What tally assign gives tallyd --prepare at most (guarded memory). */
#define CLI_PREPARE_IN_MAX	65536
/* BIN/tallyd when this program is BIN/tally, else "tallyd" (PATH). */
void	 cli_tallyd_path(char *out, size_t cap);
int	 cli_tallyd(struct tl_cli *cli, const char *const *args,
	    const void *in, size_t inlen,
	    void (*line)(const char *s, void *arg), void *arg);

/*
 * What tally assign asks tallyd --prepare (prepare.c): the settings the
 * provider's driver prepares (drivers/decl.h: prepared).  A zeroed
 * struct with module and node set; cli_prep_begin (ENOMEM); then
 * cli_prep_add each setting this assign gives, secrets' plaintext too
 * (in is guarded memory, wiped; TL_ETOOBIG past CLI_PREPARE_IN_MAX);
 * then, in the write's transaction, cli_prep_decide (given: the names
 * this assign gives, NULL-terminated): dd stays NULL when the module's
 * driver prepares nothing, or records one of them already and this
 * assign gives none (kept); else cli_prep_run, which asks tallyd and
 * returns 0 with name/value[0..n) (secret: seal it; values in guarded
 * memory) and note, or TL_EREFUSED with error (printed by no one: the
 * caller refuses with it).  cli_prep_free always.
 */
#define CLI_PREP_MAX	4	/* TL_DRV_PREPARED_MAX (drivers/driver.h) */
struct cli_prep {
	const char	*module, *node;
	const struct tl_drv_decl *dd;
	int		 recorded;
	char		 mesh[64];
	char		*in;
	size_t		 inlen;
	size_t		 n;
	char		*name[CLI_PREP_MAX], *value[CLI_PREP_MAX];
	int		 secret[CLI_PREP_MAX];
	char		 note[512], error[512];
};
struct tl_proj;
int	 cli_prep_begin(struct cli_prep *pr);
int	 cli_prep_decide(struct cli_prep *pr, struct tl_txn *t,
	    const struct tl_proj *p, const char *const *given);
int	 cli_prep_wants(const struct cli_prep *pr, const char *name);
int	 cli_prep_add(struct cli_prep *pr, const char *name, const char *value);
int	 cli_prep_run(struct tl_cli *cli, struct cli_prep *pr);
void	 cli_prep_free(struct cli_prep *pr);

/*
 * Options every command takes: --home DIR, --json, --help.  Commands
 * add theirs after CLI_COMMON_OPTS in their getopt_long table, and
 * handle the common ones with CLI_COMMON_CASES.
 */
#define CLI_OPT_HOME	0x1000
#define CLI_OPT_JSON	0x1001
#define CLI_COMMON_OPTS							\
	{ "home", required_argument, NULL, CLI_OPT_HOME },		\
	{ "json", no_argument, NULL, CLI_OPT_JSON },			\
	{ "help", no_argument, NULL, 'h' }
#define CLI_COMMON_CASES(cli, usage)					\
	case CLI_OPT_HOME:						\
		if (cli_set_home((cli), optarg) != 0)			\
			return TL_EXIT_USAGE;				\
		break;							\
	case CLI_OPT_JSON:						\
		(cli)->json = 1;					\
		break;							\
	case 'h':							\
		fputs((usage), stdout);					\
		return TL_EXIT_OK;					\
	default:							\
		fputs((usage), stderr);					\
		return TL_EXIT_USAGE

/* One function per command, each in its own cmd_NAME.c. */
/*
 * tally status on certificates (status_certs.c): the lines of
 * tl_status_attention's "certificates" and of a residual's.
 */
void	 st_certs_print_lagging(const struct json_t *arr);
void	 st_certs_print_valid(const struct json_t *arr);

int	cmd_init(struct tl_cli *, int, char **);
int	cmd_bootstrap(struct tl_cli *, int, char **);
int	cmd_log(struct tl_cli *, int, char **);
int	cmd_verify(struct tl_cli *, int, char **);
int	cmd_promote(struct tl_cli *, int, char **);
int	cmd_stats(struct tl_cli *, int, char **);
int	cmd_node(struct tl_cli *, int, char **);
int	cmd_apply(struct tl_cli *, int, char **);
int	cmd_assign(struct tl_cli *, int, char **);
int	cmd_unassign(struct tl_cli *, int, char **);
int	cmd_remove(struct tl_cli *, int, char **);
int	cmd_bind(struct tl_cli *, int, char **);
int	cmd_status(struct tl_cli *, int, char **);
int	cmd_graph(struct tl_cli *, int, char **);
int	cmd_explain(struct tl_cli *, int, char **);
int	cmd_rebuild(struct tl_cli *, int, char **);
int	cmd_snapshot(struct tl_cli *, int, char **);
int	cmd_env(struct tl_cli *, int, char **);
int	cmd_check(struct tl_cli *, int, char **);
int	cmd_rotate(struct tl_cli *, int, char **);
int	cmd_rebind(struct tl_cli *, int, char **);
int	cmd_provider(struct tl_cli *, int, char **);
int	cmd_ack(struct tl_cli *, int, char **);
int	cmd_purge(struct tl_cli *, int, char **);
int	cmd_restore(struct tl_cli *, int, char **);
int	cmd_grants(struct tl_cli *, int, char **);
int	cmd_repair(struct tl_cli *, int, char **);
int	cmd_tail(struct tl_cli *, int, char **);
int	cmd_replay(struct tl_cli *, int, char **);
int	cmd_diff(struct tl_cli *, int, char **);
int	cmd_history(struct tl_cli *, int, char **);
int	cmd_publish(struct tl_cli *, int, char **);
int	cmd_nodes(struct tl_cli *, int, char **);
int	cmd_modules(struct tl_cli *, int, char **);
int	cmd_providers(struct tl_cli *, int, char **);
int	cmd_mesh(struct tl_cli *, int, char **);
int	cmd_crl(struct tl_cli *, int, char **);
int	cmd_adopt(struct tl_cli *, int, char **);
int	cmd_adopt_object(struct tl_cli *, int, char **);

/*
 * past.c: what the audit commands (history, replay, diff) share; an
 * event in domain words is projections/describe.h's.
 */
struct json_t;
/*
 * SEQ or RFC 3339 TIME -> the last seq at or before it (0: before the
 * first event).  Prints the error; returns an exit code.
 */
int	cli_resolve_point(struct tl_cli *cli, const char *s, uint64_t *seq);
/*
 * The documents as they were after event at, rebuilt in a transaction
 * that is thrown away: *out is an object with the parts asked for,
 * "status" (operational fields left out), "grants" and "graph"; the
 * caller owns it (NULL on failure).  Returns an exit code.
 */
#define CLI_PAST_STATUS	0x1
#define CLI_PAST_GRANTS	0x2
#define CLI_PAST_GRAPH	0x4
int	cli_past_at(struct tl_cli *cli, uint64_t at, unsigned parts,
	    struct json_t **out);
/* The status document after event at (0: before the first), no checks;
 * *out is the caller's. */
int	cli_status_at(struct tl_cli *cli, uint64_t at, struct json_t **out);
/*
 * How each provider of the record is fenced, as this build's drivers
 * declare it (decl->fencing), into doc's "fencing" {ID: [{driver, kind,
 * how, window}]}; print: also one text line per provider and type
 * (unless --json).  Shared by tally status and the replays, so that a
 * replay's status is the document status printed then.
 */
void	cli_status_fencing(struct tl_cli *cli, struct tl_txn *t,
	    const struct tl_proj *p, struct json_t *doc, int print);

#endif
