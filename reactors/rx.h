/*
 * rx.h - reactors: loops that read the log and drive providers.
 *
 * A reactor pass is level-triggered: it compares the projections with
 * what should be true and acts on the difference, so a pass after a
 * crash, after a restart or after a missed wakeup does the same thing
 * as the pass that was interrupted.  The shape of every action is the
 * rule of DESIGN.md: append the intent (with the encrypted credential
 * it will use) and commit; call the driver outside any transaction;
 * append the outcome and move the reactor's checkpoint in one
 * transaction.  Drivers are idempotent, so repeating an intent is safe.
 *
 * Reactors never print: they report through rx->logf, which tallyd
 * points at stderr.  No message ever contains a secret.
 *
 * Lifetimes and ownership: struct tl_rx is the caller's (tallyd's, or
 * tally check's).  tl_rx_init sets its defaults; the caller then sets
 * log (borrowed: it must outlive rx), key (loaded into rx, which owns
 * it from then on), home and logf.  What reactors keep between passes
 * (backoffs, running copies and migrations, the pool's threads, the
 * publisher's connection) hangs off rx and is rx's: tl_rx_publish_stop
 * ends the publisher's, then tl_rx_free ends the rest and wipes the
 * key; rx may then be initialised again.  Strings handed to callbacks
 * (struct tl_rx_finding) are borrowed for the call.
 *
 * Threads: every function here is called from one thread at a time,
 * the one that owns rx (tallyd's scheduler); a pass is not reentrant.
 * The threads a pass starts (pass.h) touch no log and no rx.
 *
 * Errors: a pass returns 0 or a core/error.h code (LMDB's translated by
 * core/log.c, errno, ENOMEM), and then has changed nothing its next
 * pass would not redo (the crash rule of pass.h).  A provider that
 * refuses or cannot be reached is not an error of the pass: that is
 * recorded (grant.failed, provider.unreachable) and backed off, and
 * the pass goes on with the rest.
 */
#ifndef TL_RX_H
#define TL_RX_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/log.h"
#include "core/secret.h"

enum { TL_RX_DEBUG, TL_RX_INFO, TL_RX_WARN, TL_RX_ERR };

struct tl_rx_backoff;
struct tl_rx_pub;
struct tl_rx_copy;
struct tl_rx_mig;
struct tl_rx_pool;
struct tl_dlv_enc;

struct tl_rx {
	struct tl_log		*log;
	struct tl_key		 key;		/* the master key */
	char			 home[1024];
	const char		*actor;		/* "tallyd" */
	int			 workers;	/* driver sessions per provider */
	/*
	 * How long the verify lane gives way to the pass lane at most
	 * (pass.h); 0: TL_RX_VERIFY_YIELD_MAX_NS.
	 */
	uint64_t		 verify_yield_max_ns;
	unsigned		 max_rotations;	/* scheduled, per provider */
	void			(*logf)(int level, const char *fmt, va_list ap);
	/* Providers that failed, and when to try them again. */
	struct tl_rx_backoff	*bo;
	size_t			 nbo, capbo;
	struct tl_rx_pub	*pub;		/* the publisher's (publish.c) */
	struct tl_rx_copy	*copies;	/* moves' copies (rebind.c) */
	struct tl_rx_mig	*migs;		/* migrations running (migrate.c) */
	uint64_t		 verify_interval_ns;	/* between checks */
	/* With a bulk check, a grant logs in every N-th check (0: 30). */
	unsigned		 verify_login_every;
	/*
	 * Where a bounded verification pass stopped (the last grant id it
	 * took; NULL: from the first): the next one goes on from there, so
	 * that under a backlog every grant has its turn (verify.c).
	 */
	char			*verify_resume;
	/* tallyd's verification pass in flight (verify.c); NULL: none. */
	struct tl_rx_vrun	*vrun;
	struct tl_rx_pool	*pool;		/* driver calls (pass.h) */
	/*
	 * When the provisioner's one sweep of every grant ran, in its
	 * first pass (0: not yet); every later pass reads the work index
	 * alone (provision.c).
	 */
	uint64_t		 swept_ns;
	/*
	 * Grants the gathers of the provisioner, the migrator and the
	 * rotator have read since tl_rx_init: what their passes cost in
	 * grants, for tests and benches.
	 */
	uint64_t		 gathered;
	/*
	 * The projections lack the migrator's and the rotator's indexes
	 * (grant.h: built by an older tally) and that was logged.
	 */
	int			 unindexed_said;
	/*
	 * The deliveries' encoder (deliver.c): its guarded buffer made
	 * once and wiped after each delivery; tl_rx_free ends it.
	 */
	struct tl_dlv_enc	*dlv;
	/*
	 * The provisioner's work array (provision.c), in guarded memory,
	 * kept from pass to pass: made again each pass, its growth cost a
	 * guarded allocation, a fill and an unmap per doubling, more than
	 * the rest of the gather.  Wiped after each pass; tl_rx_free frees
	 * it.
	 */
	void			*prov_w;
	size_t			 prov_capw;
	/*
	 * The epoch this tallyd acts at (reactors/epoch.h: tl_ep_fence
	 * sets it; 0: not known, and no session checks the fence), and
	 * whether a provider session found its provider fenced above it
	 * (tl_ep_session): then that session made no call, the pass
	 * records no outcome, and tallyd stops deposed.  deposed_msg is
	 * written once, by whoever set deposed from 0.
	 */
	uint64_t		 epoch;
	/*
	 * Who leads that epoch and of which mesh (tl_ep_leader; both hex,
	 * "" when not known yet): the fence every session carries.
	 */
	char			 leader[33];
	char			 mesh[33];
	atomic_int		 deposed;
	char			 deposed_msg[1024];
	/*
	 * A cluster's leader (cluster/cluster.h): until when it may act,
	 * in ms of CLOCK_MONOTONIC (the lease renewed, less the margin),
	 * kept by the thread that renews the lease; NULL outside a
	 * cluster.  Every provider session and call is refused past it
	 * (epoch.c), and no stream is read for the epoch: the lease is
	 * the epoch's confirmation.
	 */
	const _Atomic uint64_t	*act_until;
	/*
	 * When tl_ep_check_epoch last found no later promotion on the
	 * replication stream (CLOCK_MONOTONIC, ns; 0: never): calls on a
	 * provider fenced by epoch check are made only within
	 * TL_DRV_EPOCH_CHECK_S of it.
	 */
	atomic_ullong		 epoch_read_ns;
};

/* Sets defaults; the caller fills log, key, home, logf. */
void	tl_rx_init(struct tl_rx *rx);
void	tl_rx_free(struct tl_rx *rx);
void	tl_rx_log(struct tl_rx *rx, int level, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/* Nanoseconds since the epoch (CLOCK_REALTIME). */
uint64_t tl_rx_now(void);
/*
 * Logs once per rx that the projections predate the migrator's and
 * the rotator's indexes (their passes read every grant meanwhile).
 */
void	tl_rx_unindexed(struct tl_rx *rx);

/*
 * Before a pass that reads the events of type (an fnmatch glob) after
 * its checkpoint ckpt, in a read transaction of its own: *due 1 when
 * one was appended since, or when the checkpoint lags the head by
 * TL_RX_CKPT_LAG events or more (it can wait, but not so long that
 * each look walks a long tail of the log); else 0, and the pass need
 * not take the write lock.  Errors: the log's.
 */
#define TL_RX_CKPT_LAG	4096
int	tl_rx_due_since(struct tl_rx *rx, const char *ckpt, const char *type,
	    int *due);

/*
 * One provisioning pass: provisions requested grants (resuming any
 * intent left by a crash), delivers credentials to every holder,
 * revokes grants whose revocation was requested, and rewrites missing
 * delivery files.  *pending receives the number of grants still
 * waiting (for a provider in backoff, say); *next_ns the earliest time
 * a retry is due (0: none).
 */
int	tl_rx_provision(struct tl_rx *rx, unsigned *done, unsigned *pending,
	    uint64_t *next_ns);
/* Frees the provisioner's kept work array (rx->prov_w); tl_rx_free. */
void	tl_rx_provision_free(struct tl_rx *rx);

/*
 * One rotation pass: every running rotation one step further (issue the
 * new credential, create and deliver it, retire the old one once every
 * holder acknowledged or the deadline passed), and rotations started
 * for credentials older than their max-credential-age.
 */
int	tl_rx_rotate(struct tl_rx *rx, unsigned *steps, unsigned *waiting);
/* One pass of the admin-credential rotations (tally rotate --admin). */
int	tl_rx_rotate_admin(struct tl_rx *rx, unsigned *steps);

/*
 * One rebinder pass (reactors/rebind.c): every running move of a
 * binding (tally rebind --migrate) one step further — issue the fresh
 * resource and credential, create, freeze, copy and verify, switch and
 * deliver; revoke the old grant (data retained) once every holder
 * acknowledged; or, after a failure, thaw the old and drop the copy.
 * *steps counts the steps taken.  The copy runs on a thread of its
 * own: *running counts copies still under way, whose outcome a later
 * pass records (call again soon).
 */
int	tl_rx_rebind(struct tl_rx *rx, unsigned *steps, unsigned *running);
/* Ends what the rebinder keeps between passes (tl_rx_free calls it). */
void	tl_rx_copies_free(struct tl_rx *rx);

/*
 * One migration pass: applies the declared migrations of provisioned
 * grants that are not applied yet, records blocks, and appends
 * assignment.ready for assignments that have become ready.  A grant's
 * files run on a thread of their own (at most rx->workers at once per
 * provider), so a slow file holds up only its grant: the pass starts
 * them, and the pass that finds them finished records what they did.
 * *running counts grants whose files are still running (call again
 * soon).
 */
int	tl_rx_migrate(struct tl_rx *rx, unsigned *applied, unsigned *blocked,
	    unsigned *running);
/*
 * Cancels the migrations still running (the server stops the running
 * statement, the file's transaction is rolled back) and waits for them
 * for at most 3 s; tl_rx_free calls it.
 */
void	tl_rx_migs_free(struct tl_rx *rx);

/*
 * One publisher pass (reactors/publish.c): connects to the broker that
 * the last publisher.configured names if needed (with backoff while it
 * is away: that is logged, not an error), publishes every event after
 * the checkpoint "publisher" with confirms, moves the checkpoint over
 * what the broker confirmed, and turns messages of the acks queue into
 * credential.acknowledged.  *published counts events confirmed; *next_ns
 * is when the next pass is due (0: on the next append; "now" when more
 * remains; the backoff's end while the broker is away; a second later
 * when the acks queue is to be polled).  A pass publishes for 250 ms at
 * most; waiting for the last confirms or a connection attempt can take
 * up to the 5 s timeout.
 * tl_rx_publish_stop closes the connection and frees the state.
 */
int	tl_rx_publish(struct tl_rx *rx, unsigned *published, uint64_t *next_ns);
/*
 * Write-ahead over the replication stream: with a stream configured and
 * the broker connected, publishes up to the head and waits for its
 * confirms (at most a few seconds), so that the intents a pass has just
 * written are on the stream before its driver calls act on them (a
 * standby promoted after a crash then resumes them, and nothing the old
 * leader made on a provider is unknown to it).  Best effort: a broker
 * that is away or slow never holds the pass (the publisher's own runs
 * report it).
 */
void	tl_rx_publish_ahead(struct tl_rx *rx);
/*
 * Reads the configured replication stream from its first message to
 * its end (a second with nothing new; 30 s at most) on a connection of
 * its own, and puts the highest epoch of a control-plane.promoted in it
 * into *seen (0: none), where says which stream (cap bytes).
 * TL_ENOTFOUND: no stream is configured; a broker error (logged, *seen
 * as far as it read).  The witness a restarted leader reads before it
 * acts (epoch.h: tl_ep_stream_check).
 */
int	tl_rx_publish_epoch_seen(struct tl_rx *rx, uint64_t *seen, char *where,
	    size_t cap);
/*
 * The arbiter of a promotion without etcd (epoch.h, tl_ep_arbitrate):
 * publishes event at (this home's control-plane.promoted to epoch) to
 * the configured replication stream and waits for its confirm, then
 * reads the stream from its first message, on a connection of its own,
 * until the first control-plane.promoted to epoch that the master key
 * authenticates (or its end: a second with nothing new; 30 s at most).
 * *found 1 and that message's chain hash in first, or 0.  TL_ENOTFOUND:
 * no stream is configured; a broker error (logged): nothing decided.
 */
int	tl_rx_publish_arbiter(struct tl_rx *rx, uint64_t at, uint64_t epoch,
	    int *found, uint8_t first[TL_HASH_LEN], char *where, size_t cap);
void	tl_rx_publish_stop(struct tl_rx *rx);

/*
 * One verification pass over the provisioned grants that are due (or,
 * with force, over every one o selects), with the repairs the drift
 * policies call for, recorded only when something changed.  *checked
 * and *unhealthy count this pass; *next_ns is when the next is due.
 */
/*
 * What one check found and what was done about it (tally check prints
 * it).  drift: "" healthy, a drift kind (credential-mismatch,
 * privileges-changed, missing-resource), or "unchecked" when the
 * provider could not be asked; reason: the driver's words (never a
 * secret); action: what was done, "" for nothing; repaired: the drift
 * was repaired and the grant is healthy now.  Borrowed for the call.
 */
struct tl_rx_finding {
	const char	*grant;
	const char	*provider;
	const char	*drift;
	const char	*reason;
	const char	*action;
	int		 repaired;
};

struct tl_rx_verify_opts {
	const char	*grant;		/* only this grant */
	const char	*provider;	/* only this provider's grants */
	int		 force;		/* due or not */
	uint64_t	 interval_ns;	/* between checks of one grant */
	/*
	 * 1: every grant checked logs in as its consumer (tally check,
	 * tallyd --once).  0: a driver with a bulk check is asked about a
	 * provider's grants in one call, and only the grants whose login
	 * is due log in (reactors/verify.c says which).
	 */
	int		 login_all;
	/* The sample: a login every N-th check of a grant; 0: 30. */
	unsigned	 login_every;
	/*
	 * Bounds on one pass, 0: none.  Grants due beyond them stay due
	 * and *next_ns says now: the daemon's passes stay short, so that
	 * what they find is recorded soon, and the next goes on from
	 * where this one stopped (TL_RX_VERIFY_RUN_*).
	 */
	unsigned	 max_checks;	/* grants checked */
	unsigned	 max_logins;	/* of them, checks that may log in */
	/* NULL, or: += the provider calls made (a bulk call counts one). */
	unsigned	*calls;
	/* Each grant checked, once its outcome is recorded; NULL: none. */
	void		(*report)(void *arg, const struct tl_rx_finding *f);
	void		*report_arg;
};
/*
 * tallyd's bounds on one verification pass, whose checks run beside
 * its loop (tl_rx_verify_aside) and whose findings are recorded when
 * the last of them ends: a bulk check of 256 grants costs PostgreSQL
 * about 60 ms, a new credential's first login (the login and the
 * posture question) about 50 ms on a loaded machine, so a pass ends
 * within a second or so even under a backlog.
 */
#define TL_RX_VERIFY_RUN_CHECKS	256
#define TL_RX_VERIFY_RUN_LOGINS	16
int	tl_rx_verify(struct tl_rx *rx, const struct tl_rx_verify_opts *o,
	    unsigned *checked, unsigned *unhealthy, uint64_t *next_ns);
/*
 * tl_rx_verify for tallyd's loop, which must not wait for checks: a
 * call starts a pass (gather in the caller's thread), whose checks run
 * on a thread of their own, and returns with *running 1; later calls
 * return at once while they run, and the first after they end records
 * what they found (on the caller's thread: the loop's) and returns it
 * as tl_rx_verify does.  *next_ns: when to call again (soon while a
 * pass is in flight).  One pass at a time per rx; tl_rx_verify_free
 * (tl_rx_free calls it) waits for one in flight and drops its findings.
 */
#define TL_RX_VERIFY_POLL_NS	5000000u	/* 5 ms */
#define TL_RX_VERIFY_YIELD_MAX_NS	30000000000u	/* 30 s */
int	tl_rx_verify_aside(struct tl_rx *rx,
	    const struct tl_rx_verify_opts *o, unsigned *checked,
	    unsigned *unhealthy, uint64_t *next_ns, unsigned *running);
void	tl_rx_verify_free(struct tl_rx *rx);
/* 1 while a pass of tl_rx_verify_aside has checks in flight. */
int	tl_rx_verify_running(const struct tl_rx *rx);

/*
 * Every reactor behind one signature, for tallyd's table
 * (reactors/table.c): run one pass, say what it did and when it wants
 * to run again.  wake_ns is relative (nanoseconds from the pass's end;
 * 0: no wish beyond its period), so the scheduler puts every wish on
 * its one monotonic clock whatever clock the reactor keeps (backoff and
 * verification times are wall-clock: they outlive a restart).
 */
struct tl_rx_result {
	unsigned	 done;		/* steps taken: work was done */
	unsigned	 pending;	/* work that waits (a backoff) */
	unsigned	 running;	/* driver calls still under way */
	unsigned	 blocked;	/* grants with migrations blocked */
	unsigned	 checked;	/* grants verified */
	unsigned	 unhealthy;	/* of those, not healthy */
	uint64_t	 wake_ns;
};
typedef int (*tl_rx_run_fn)(struct tl_rx *rx, struct tl_rx_result *res);

/* tl_rx_provision, tl_rx_migrate, ... behind tl_rx_run_fn. */
int	tl_rx_run_provision(struct tl_rx *rx, struct tl_rx_result *res);
/* Nodes' acknowledgement offers (ack.h), before the rotator reads acks. */
int	tl_rx_run_acks(struct tl_rx *rx, struct tl_rx_result *res);
/*
 * Certificates for the requests in nodes' reports (issue.c), after the
 * acks (which record the reports) and before the rotator.
 */
int	tl_rx_run_issue(struct tl_rx *rx, struct tl_rx_result *res);
/* The mesh CA's revocation list, when a revocation wants one (crl.c). */
int	tl_rx_run_crl(struct tl_rx *rx, struct tl_rx_result *res);
int	tl_rx_run_migrate(struct tl_rx *rx, struct tl_rx_result *res);
int	tl_rx_run_rotate(struct tl_rx *rx, struct tl_rx_result *res);
int	tl_rx_run_rotate_admin(struct tl_rx *rx, struct tl_rx_result *res);
int	tl_rx_run_rebind(struct tl_rx *rx, struct tl_rx_result *res);
/* Grants that are due, every rx->verify_interval_ns. */
int	tl_rx_run_verify(struct tl_rx *rx, struct tl_rx_result *res);
int	tl_rx_run_publish(struct tl_rx *rx, struct tl_rx_result *res);

/*
 * Is the whole mesh healthy, as tally status says (tallyd --once's
 * exit code)?  *healthy is 0 on an error too.
 */
int	tl_rx_healthy(struct tl_rx *rx, int *healthy);

struct tl_proj;
struct tl_grant;

/*
 * What revoking grant g would lose on its provider now, as its driver's
 * loss operation says (drivers/driver.h), for a command to show before
 * it acts: drop as the provider's policy for g's type says (or 1 for a
 * purge, force_drop).  0 with *loses and what (TL_WHY_MAX bytes, one
 * line, never a secret); TL_ENOTFOUND when the driver cannot tell (no
 * loss operation, or no such provider); the driver's error (what saying
 * why) when the provider cannot be asked.  Opens one admin session with
 * the assignment's credential (rx->key decrypts it); t is a read
 * transaction, p the projections.
 */
int	tl_rx_loss(struct tl_rx *rx, struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g, int force_drop, int *loses, int *drop,
	    char *what);

struct tl_drv_names;

/*
 * The objects mesh from (32 hex digits) made for grant g on its
 * provider, found by their mark (the driver's find_marked), for tally
 * adopt to record: 0 with out and what (TL_WHY_MAX bytes, one line,
 * never a secret) saying what was found; TL_ENOTFOUND (what) when none
 * carries that mark; TL_EINVAL (what) when g's driver cannot find
 * objects by their mark (TL_DRV_CAP_FIND_MARKED) or is not in this
 * build; the driver's or the load's error otherwise.  Reads only: one
 * admin session with the assignment's credential, no fence raised; t a
 * read transaction, p the projections.
 */
int	tl_rx_find_marked(struct tl_rx *rx, struct tl_txn *t,
	    const struct tl_proj *p, const struct tl_grant *g, const char *from,
	    struct tl_drv_names *out, char *what);

#endif
