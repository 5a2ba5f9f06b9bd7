/*
 * proj.c - the fold dispatch: one event to each fold (catch-ups and
 * rebuilds, which fold ranges, are rebuild.c's).
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
tl_proj_check(const struct tl_event *ev, const struct tl_cat_event **ep)
{
	const struct tl_cat_event *e = *ep = tl_cat_find(ev->type);
	const char *field;
	size_t max, len;
	struct tl_bview v;
	int rc;

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
	rc = tl_cat_check(e, v.root, &field, &max, &len);
	tl_bview_close(&v);
	return rc;
}

int
tl_proj_apply_checked(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, const struct tl_cat_event *e)
{
	struct tl_bview v;
	int rc = 0;

	/*
	 * Folded from the first event, the migrator's and the rotator's
	 * indexes are whole (grant.h): a home whose projections an older
	 * tally built lacks the mark until tally rebuild, and their passes
	 * walk every grant meanwhile (tl_grant_due_indexed).
	 */
	if (ev->seq == 1 && (rc = tl_kv_put(t, p->grants, TL_GRANT_DUE_MARK,
	    strlen(TL_GRANT_DUE_MARK), "", 0)) != 0)
		return rc;
	if (e == NULL || e->folds == 0)
		return 0;
	if ((rc = tl_bview_open_valid(&v, ev->body, ev->body_len)) != 0)
		return rc;
	/*
	 * Only the folds the catalogue names (check_catalogue holds it to
	 * every type each fold names, both ways).
	 */
	if (e->folds & TL_FOLD_GRAPH)
		rc = tl_fold_graph(t, p, ev, v.root);
	if (rc == 0 && (e->folds & TL_FOLD_CERTS))
		rc = tl_fold_certs(t, p, ev, v.root);
	if (rc == 0 && (e->folds & TL_FOLD_GRANTS))
		rc = tl_fold_grants(t, p, ev, v.root);
	if (rc == 0 && (e->folds & TL_FOLD_ROTATION))
		rc = tl_fold_rotation(t, p, ev, v.root);
	if (rc == 0 && (e->folds & TL_FOLD_REBIND))
		rc = tl_fold_rebind(t, p, ev, v.root);
	tl_bview_close(&v);
	return rc;
}

int
tl_proj_apply(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev)
{
	const struct tl_cat_event *e;
	int rc;

	if ((rc = tl_proj_check(ev, &e)) != 0)
		return rc;
	return tl_proj_apply_checked(t, p, ev, e);
}
