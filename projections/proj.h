/*
 * proj.h - projections: pure folds from events to the current graph.
 *
 * The tables and their records are record.h's.  This is the fold
 * dispatch above them: tl_proj_apply gives an event to each fold
 * (graph.c, certs.c, grants.c, rotation.c, rebind.c, in catalogue.h's
 * order).
 * The fold is (state, event) -> state: no clock, no randomness, no
 * I/O, so replaying the log rebuilds the tables byte for byte.
 *
 * The checkpoint "projections" is the last sequence number folded; it is
 * moved in the same transaction as the events it covers.
 *
 * Every function takes the caller's write transaction (tl_proj_current
 * and tl_proj_rebuild_log their own) and keeps nothing past the call;
 * the event given to tl_proj_apply is borrowed.  An error leaves the
 * transaction holding part of a fold: the caller aborts it (a fold's
 * writes are never committed half done).  Errors are core/error.h
 * codes: TL_ETOOBIG (a string longer than the catalogue's limit for
 * its field, or a key past TL_KEY_MAX), TL_ECORRUPT and TL_EMALFORMED
 * (a record or body that does not decode), ENOMEM, LMDB's.
 */
#ifndef TL_PROJ_H
#define TL_PROJ_H

#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "record.h"

#define TL_PROJ_CKPT	"projections"

/* Folds one event; events of types it does not know are ignored. */
int	tl_proj_apply(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_event *ev);

/*
 * Folds every event after the checkpoint up to the head (or up to
 * upto, when not 0) and moves the checkpoint.  Write transactions only.
 */
int	tl_proj_catchup(struct tl_txn *t, uint64_t upto);

/* Empties the tables and folds the log again up to upto (0: all). */
int	tl_proj_rebuild(struct tl_txn *t, uint64_t upto, uint64_t *countp);

/*
 * The same over the whole log, committed every step events (0: the
 * default), the events read and decoded on a second thread.  Each
 * commit holds the fold of a prefix of the log with its checkpoint, so
 * a crash or a reader in between sees a true past state and the next
 * catch-up carries on from it; one transaction over a million events
 * would instead hold every page it dirtied in memory and make LMDB
 * search and spill an ever longer dirty list.  *countp: the events the
 * committed tables hold, also after an error; *badp: the event an error
 * refers to (0: none), which nothing after was folded past.
 */
#define TL_PROJ_REBUILD_STEP	100000

/*
 * Brings the tables up to the head when they are behind it: after a
 * bare append, or between the steps of a rebuild (whose committed
 * prefix is a true past state, not the present).  Readers that act on
 * what they read (the reactors) call this first; a no-op costs one read
 * transaction.
 */
int	tl_proj_current(struct tl_log *log);
int	tl_proj_rebuild_log(struct tl_log *log, uint64_t step,
	    uint64_t *countp, uint64_t *badp);

#endif
