/*
 * proj-internal.h - rebuild.c's fold of a range, for the catch-up and
 * the rebuilds.  In the caller's write transaction, keeping nothing
 * past the call; errors are tl_proj_apply's (proj.h), and the caller
 * aborts the transaction on one.
 */
#ifndef TL_PROJ_INTERNAL_H
#define TL_PROJ_INTERNAL_H

#include <errno.h>

#include "proj.h"

/*
 * Folds events from..to into t (rebuild.c): a long range is read on a
 * second thread.  *atp: the last event folded; *badp: the one an error
 * refers to.  Does not move the checkpoint.
 */
int	tl_proj_fold(struct tl_txn *t, const struct tl_proj *p, uint64_t from,
	    uint64_t to, uint64_t *atp, uint64_t *badp);

#endif
