/*
 * proj.c - the fold dispatch: each event to the folds, the checkpoint.
 */
#include <errno.h>
#include <string.h>

#include "core/error.h"
#include "catalogue.h"
#include "grant.h"
#include "graph.h"
#include "proj-internal.h"
#include "rebind.h"
#include "rotation.h"

int
tl_proj_apply(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev)
{
	struct tl_bview v;
	int rc;

	const struct tl_cat_event *e = tl_cat_find(ev->type);
	const char *field;
	size_t max, len;

	/* Not tally's, or no fold takes it (catalogue.c says why). */
	if (e == NULL || e->folds == 0)
		return 0;
	/* tl_env_decode checked the body when the event was read. */
	if ((rc = tl_bview_open_valid(&v, ev->body, ev->body_len)) != 0)
		return rc;
	/*
	 * A string longer than the field a fold keeps it in would be cut
	 * or emptied there: fail loudly instead.  tl_emit refuses such a
	 * value when it is decided, so only a writer past the deciders
	 * (an older tally, a foreign log) gets here.
	 */
	if ((rc = tl_cat_check(e, v.root, &field, &max, &len)) != 0) {
		tl_bview_close(&v);
		return rc;
	}
	rc = tl_fold_graph(t, p, ev, v.root);
	if (rc == 0)
		rc = tl_fold_grants(t, p, ev, v.root);
	if (rc == 0)
		rc = tl_fold_rotation(t, p, ev, v.root);
	if (rc == 0)
		rc = tl_fold_rebind(t, p, ev, v.root);
	tl_bview_close(&v);
	return rc;
}

int
tl_proj_catchup(struct tl_txn *t, uint64_t upto)
{
	struct tl_proj p;
	uint64_t at = 0, last = 0, bad = 0;
	int rc;

	if ((rc = tl_ckpt_get(t, TL_PROJ_CKPT, &at)) != 0 &&
	    rc != TL_ENOTFOUND)
		return rc;
	if ((rc = tl_log_last(t, &last, NULL)) != 0)
		return rc;
	/* Opening creates the tables, so readers find them even when empty. */
	if ((rc = tl_proj_open(t, &p)) != 0)
		return rc;
	if (upto == 0 || upto > last)
		upto = last;
	if (at >= upto)
		return at == 0 ? tl_ckpt_set(t, TL_PROJ_CKPT, 0) : 0;
	if ((rc = tl_proj_fold(t, &p, at + 1, upto, &at, &bad)) != 0)
		return rc;
	return tl_ckpt_set(t, TL_PROJ_CKPT, at);
}

int
tl_proj_rebuild(struct tl_txn *t, uint64_t upto, uint64_t *countp)
{
	uint64_t after = 0;
	int rc;

	if ((rc = tl_kv_drop_all(t)) != 0)
		return rc;
	if ((rc = tl_ckpt_set(t, TL_PROJ_CKPT, 0)) != 0)
		return rc;
	if ((rc = tl_proj_catchup(t, upto)) != 0)
		return rc;
	if (countp != NULL) {
		if ((rc = tl_ckpt_get(t, TL_PROJ_CKPT, &after)) != 0)
			return rc;
		*countp = after;
	}
	return 0;
}
