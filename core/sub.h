/*
 * sub.h - following the log: a subscription, for reporting contexts.
 *
 * A subscriber reads events in sequence order from a position and
 * waits, with a deadline, for the next one.  It works from any process
 * while tallyd and the CLI append: it reads through short LMDB read
 * transactions (readers never block the writer) and sleeps on inotify
 * (IN_MODIFY on the log directory: LMDB writes data.mdb with pwrite,
 * the meta page last, so every commit of every process wakes it; a
 * wakeup that shows nothing yet is followed by a few quick looks, since
 * LMDB publishes the new transaction to readers just after that write).
 * It looks once a second anyway; without inotify it polls every 50 ms.
 *
 * Positions.  A subscription starts at a sequence number (o->from, the
 * first event wanted) or at a checkpoint the subscriber owns: with
 * o->checkpoint = "NAME" it starts after the log's checkpoint
 * "sub:NAME" (or at o->from when that does not exist yet), and
 * tl_sub_commit() moves that checkpoint to the last event examined.
 * The "sub:" prefix keeps subscribers from moving a reactor's
 * checkpoint; `tally stats` lists them with their lag.  A subscriber
 * that keeps its position in its own store (the pattern of
 * docs/reporting.md) opens at that position + 1 and needs no write
 * access to the log at all.
 *
 * Guarantees: events come in order, each once, with no gap: every
 * sequence number is examined, and each event's prev hash must be the
 * stored hash of the one before (TL_ECORRUPT otherwise).  A type
 * filter skips events but still moves the position past them.
 *
 * Lifetimes: the event filled by tl_sub_next() (its body and raw
 * bytes) is valid until the next call on the subscription.  A
 * subscription belongs to one thread.
 */
#ifndef TL_SUB_H
#define TL_SUB_H

#include <stdint.h>

#include "log.h"

struct tl_sub;

#define TL_SUB_CKPT_PREFIX	"sub:"
#define TL_SUB_NAME_MAX		(TL_CKPT_NAME_MAX - 4)

/* tl_sub_opts flags */
#define TL_SUB_RDONLY	0x1	/* open the log read-only (no commit) */

struct tl_sub_opts {
	uint64_t	 from;		/* first seq wanted; 0 or 1: the start */
	const char	*checkpoint;	/* NAME of sub:NAME, or NULL */
	const char	*type;		/* fnmatch(3) glob on the type, or NULL */
	unsigned	 flags;
};
#define TL_SUB_OPTS_INIT	{ 0, NULL, NULL, 0 }

/* Deadlines are absolute, in ns of CLOCK_MONOTONIC. */
#define TL_SUB_NOWAIT	0
#define TL_SUB_FOREVER	UINT64_MAX
uint64_t tl_sub_clock(void);
/* tl_sub_clock() + ms, saturating. */
uint64_t tl_sub_deadline(uint64_t ms);

/*
 * Opens a subscription on the log in directory logdir (opening the log
 * itself: read-only with TL_SUB_RDONLY).  Errors: those of
 * tl_log_open(), TL_EINVAL for a bad checkpoint name.
 */
int	tl_sub_open(const char *logdir, const struct tl_sub_opts *o,
	    struct tl_sub **out);
/* The same on a log the caller has open and keeps open longer. */
int	tl_sub_attach(struct tl_log *log, const struct tl_sub_opts *o,
	    struct tl_sub **out);
void	tl_sub_close(struct tl_sub *s);

/*
 * The next event after the position, waiting until deadline for one.
 * 0 with *ev filled; TL_ETIMEDOUT when the deadline passed (at once
 * with TL_SUB_NOWAIT once caught up); EINTR when a signal interrupted
 * the wait (the subscription stays usable); TL_ECORRUPT for a gap or a
 * broken link (the position stays before it); other log errors.
 */
int	tl_sub_next(struct tl_sub *s, uint64_t deadline, struct tl_event *ev);

/*
 * Moves the checkpoint sub:NAME to the position: "everything returned
 * so far is done with".  Ends the validity of the last event returned.
 * TL_EINVAL without a checkpoint name or on a read-only log.
 */
int	tl_sub_commit(struct tl_sub *s);

/*
 * Ends the read transaction the subscription holds, and with it the
 * validity of the last event returned, so that the caller may write to
 * the same log (a write may grow the map, which LMDB allows only with
 * no transaction open in the process).  The next tl_sub_next() goes on
 * from the position.  Never fails.
 */
void	tl_sub_release(struct tl_sub *s);

/* The last sequence number examined (0: none yet). */
uint64_t tl_sub_position(const struct tl_sub *s);
/* The last sequence number in the log as of the latest look. */
uint64_t tl_sub_head(const struct tl_sub *s);
/*
 * A descriptor that becomes readable when the log may have changed
 * (for callers that multiplex it with their own with poll(2)); -1
 * when inotify is unavailable.  Reading it is tl_sub_next's business.
 */
int	tl_sub_fd(const struct tl_sub *s);

#endif
