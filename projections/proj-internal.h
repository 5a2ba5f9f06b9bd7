/*
 * proj-internal.h - rebuild.c's fold of a range, for the catch-up and
 * the rebuilds.  In the caller's write transaction, keeping nothing
 * past the call; errors are tl_proj_apply's (proj.h), and the caller
 * aborts the transaction on one.
 */
#ifndef TL_PROJ_INTERNAL_H
#define TL_PROJ_INTERNAL_H

#include <errno.h>

#include "catalogue.h"
#include "proj.h"

/*
 * tl_proj_apply in two (proj.c), so rebuild.c's reader thread does the
 * first: tl_proj_check finds the event's catalogue entry (*ep, NULL for
 * a type tally never appends) and holds the event to its limits
 * (TL_ETOOBIG, TL_EMALFORMED) touching no table; tl_proj_apply_checked
 * folds an event that passed, given that entry.
 */
int	tl_proj_check(const struct tl_event *ev,
	    const struct tl_cat_event **ep);
int	tl_proj_apply_checked(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_event *ev, const struct tl_cat_event *e);

/*
 * Folds events from..to into t (rebuild.c): a long range is read on a
 * second thread.  *atp: the last event folded; *badp: the one an error
 * refers to.  Does not move the checkpoint.
 */
int	tl_proj_fold(struct tl_txn *t, const struct tl_proj *p, uint64_t from,
	    uint64_t to, uint64_t *atp, uint64_t *badp);

#endif
