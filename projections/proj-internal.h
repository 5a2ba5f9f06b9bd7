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

#endif
