/*
 * proj-internal.h - the folds, shared by proj.c and the per-table files.
 */
#ifndef TL_PROJ_INTERNAL_H
#define TL_PROJ_INTERNAL_H

#include <errno.h>

#include "proj.h"

int	tl_fold_graph(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_event *ev, struct tl_bnode body);
int	tl_fold_grants(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_event *ev, struct tl_bnode body);

/*
 * Folds events from..to into t (rebuild.c): a long range is read on a
 * second thread.  *atp: the last event folded; *badp: the one an error
 * refers to.  Does not move the checkpoint.
 */
int	tl_proj_fold(struct tl_txn *t, const struct tl_proj *p, uint64_t from,
	    uint64_t to, uint64_t *atp, uint64_t *badp);

#endif
