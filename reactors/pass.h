/*
 * pass.h - the pass every reactor runs, and the worker pool its driver
 * calls run on.  Internal to reactors/.
 *
 * A pass has four phases, always in this order:
 *   1. gather    in a read transaction: what needs doing, with the
 *                provider admin sides it needs (tl_rx_load_provider);
 *   2. intents   in one write transaction: each action's intent, with
 *                the encrypted credential it will use;
 *   3. calls     with NO transaction open: the driver calls, on the
 *                shared pool, each provider's calls on up to
 *                rx->workers sessions of its own (a slow call holds up
 *                only its own session);
 *   4. outcomes  in one write transaction: what the calls did, and the
 *                reactor's checkpoint.
 *
 * The crash rule, once for every reactor: a crash before (2) commits
 * leaves the state that made the work, and the next pass gathers it
 * again; a crash after (2) and before (4) leaves the intent, and the
 * next pass repeats the call with the same intent (same names, same
 * credential), which is safe because every driver operation is
 * idempotent; after (4) nothing is left to do.  So nothing may be
 * decided in (3) that (2) did not record, and (4) re-reads the state it
 * decides from (an operator may have acted meanwhile).
 *
 * The pool (struct tl_rx_pool, in rx->pool, made on first use) runs
 * jobs on threads that outlive passes.  Jobs are in three lanes, each
 * capped at rx->workers running per provider: TL_RX_LANE_PASS, the
 * sessions of a pass (the pass waits for them); TL_RX_LANE_LONG, calls
 * that outlive the pass that starts them (a migration, a move's copy):
 * a later pass finds them done and records their outcome, so a slow
 * file or copy never holds up grants of the same provider; and
 * TL_RX_LANE_VERIFY, the verifier's sessions, which give way to the
 * pass lane: one starts only while no pass-lane job of its provider is
 * queued or running, and one running takes no further call once such
 * a job comes (tl_rx_call.yielded), so a request never waits for
 * checks, and the provider's capacity goes to it first.  It gives way
 * for rx->verify_yield_max_ns at most: a session queued longer starts
 * all the same and makes all its calls, so that verification under
 * constant provisioning is late, never starved.  A job touches no log
 * and no rx: only what it was given.
 *
 * Ownership: a job, a call and the arrays given to tl_rx_pass_calls
 * (the providers' admin sides, the calls) are the reactor's and must
 * outlive the call that runs them; the pool opens each session for a
 * batch of calls and closes it before it returns (no session outlives
 * a pass's phase 3).  Passwords in the admin sides are the reactor's to
 * wipe.  Errors: tl_rx_pool_submit's are stated there; a driver's
 * failure is its call's rc and why, never the pass's; tl_rx_pass_run
 * returns the first error of a phase callback or of a transaction
 * (core/error.h codes, LMDB's, ENOMEM).
 */
#ifndef TL_RX_PASS_H
#define TL_RX_PASS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rx-internal.h"
#include "session.h"

enum { TL_RX_LANE_PASS, TL_RX_LANE_LONG, TL_RX_LANE_VERIFY };

/*
 * A job: run is called once on a pool thread.  The caller owns the
 * memory; after tl_rx_job_done() says 1 the pool never touches it
 * again, so it may be freed.  TL_RX_JOB_INIT (or zeroed memory, then
 * run/key/lane) makes one.
 */
struct tl_rx_job {
	void			(*run)(struct tl_rx_job *j);
	char			 key[140];	/* the provider */
	int			 lane;
	atomic_int		 done;
	struct tl_rx_job	*next;		/* the pool's queue */
	/* The pool's: when queued; started past the verify lane's bound. */
	uint64_t		 queued_ns;
	int			 insist;
};

/*
 * Queues j (ENOMEM, EAGAIN if no thread could be started: j did not
 * run and may be reused).  It runs as soon as its provider's lane has
 * room.
 */
int	tl_rx_pool_submit(struct tl_rx *rx, struct tl_rx_job *j);
int	tl_rx_job_done(struct tl_rx_job *j);
/* Waits until j is done. */
void	tl_rx_job_wait(struct tl_rx *rx, struct tl_rx_job *j);
/*
 * Makes the pool now, on the calling thread (ENOMEM), for a thread of a
 * reactor's own that submits to it later (verify.c).
 */
int	tl_rx_pool_ready(struct tl_rx *rx);
/* Jobs of provider key in lane, queued or running. */
unsigned tl_rx_pool_busy(struct tl_rx *rx, const char *key, int lane);
/*
 * Ends the pool's threads (tl_rx_free calls it, after the reactors'
 * own frees have cancelled their long jobs): idle ones are joined; one
 * still inside a job (a connect that hangs) is left to the process's
 * exit, and so is the pool's memory then.
 */
void	tl_rx_pool_free(struct tl_rx *rx);

/*
 * One driver call of a pass (phase 3).  provider names the entry of the
 * pass's providers whose sessions make it; item is the reactor's.  On
 * return rc is the call's result and why its reason; admin says the
 * session could not be opened (rc and why are then the session's);
 * yielded that the call was not made, its sessions having given way to
 * the pass lane (TL_RX_LANE_VERIFY only; rc is then untouched).
 */
struct tl_rx_call {
	const char	*provider;
	void		*item;
	int		 rc;
	int		 admin;
	int		 yielded;
	char		*why;		/* TL_WHY_MAX, the item's */
};

/*
 * Makes call c with session h open on pv's admin side, on a pool
 * thread: touches only c, c->item and what arg says is the thread's.
 */
typedef void (*tl_rx_call_fn)(void *arg, const struct tl_rx_prov *pv,
	    void *h, struct tl_rx_call *c);

/*
 * Phase 3: every call of calls[] on its provider's sessions (pv[] by
 * id; a call whose provider is not there, or has no ops, is skipped:
 * rc stays as it was), in the order given (the reactor's: oldest
 * first), each provider on up to rx->workers sessions (fewer when its
 * driver declares sessions_max), and no more
 * than one per min_calls calls (opening a session is a login: the
 * verifier's checks are cheaper than that), on lane (TL_RX_LANE_PASS,
 * or TL_RX_LANE_VERIFY, whose calls may be yielded); returns when all
 * are made or yielded.  pv[i].ok is set when a session of it opened.
 */
void	tl_rx_pass_calls(struct tl_rx *rx, struct tl_rx_prov *pv, size_t npv,
	    struct tl_rx_call *calls, size_t ncalls, size_t min_calls,
	    int lane, tl_rx_call_fn fn, void *arg);

/*
 * Phase 3 for a reactor whose sessions are its own (the admin rotation
 * opens with the old password, then the new): runs every job on the
 * pool's pass lane and returns when all are done.
 */
void	tl_rx_pass_jobs(struct tl_rx *rx, struct tl_rx_job **jobs, size_t n);

/* What a pass's gather asks of the rest of it. */
#define TL_RX_INTENTS	0x1u
#define TL_RX_CALLS	0x2u
#define TL_RX_OUTCOMES	0x4u

/*
 * A reactor's pass, as callbacks on its own state (arg).  gather runs in
 * a read transaction of projections brought to the head and sets
 * *phases to the phases this pass needs (0: nothing to do, the pass
 * ends); intents and outcomes run inside tl_ctx_begin/tl_ctx_end of one
 * write transaction each (their error aborts it: nothing is appended);
 * calls runs with no transaction open and may clear TL_RX_OUTCOMES
 * (nothing came of the calls that is worth a commit).  Any may be NULL.
 */
struct tl_rx_pass_def {
	int	(*gather)(void *arg, struct tl_txn *t, const struct tl_proj *p,
		    unsigned *phases);
	int	(*intents)(void *arg, struct tl_ctx *c);
	void	(*calls)(void *arg, unsigned *phases);
	int	(*outcomes)(void *arg, struct tl_ctx *c);
};

/*
 * Runs one pass: the phases in order, stopping at the first error
 * (returned).  A failed intents phase skips the calls; a failed outcomes
 * phase leaves the intents for the next pass (the crash rule).
 */
int	tl_rx_pass_run(struct tl_rx *rx, const struct tl_rx_pass_def *d,
	    void *arg);
/*
 * tl_rx_pass_run in two halves, for a reactor whose calls run beside
 * the loop (the verifier's, verify.c): _begin runs gather and intents
 * and says in *phases what is left; the caller makes the calls (on a
 * thread of its own, which touches only arg) and then, on the loop's
 * thread, _end records the outcomes (none if deposed meanwhile:
 * TL_EREFUSED).
 */
int	tl_rx_pass_begin(struct tl_rx *rx, const struct tl_rx_pass_def *d,
	    void *arg, unsigned *phases);
int	tl_rx_pass_end(struct tl_rx *rx, const struct tl_rx_pass_def *d,
	    void *arg, unsigned phases);

#endif
