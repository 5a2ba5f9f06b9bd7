/*
 * rebind.c - the rebinder: drives each running move of a binding (tally
 * rebind --migrate) one step further.
 *
 * Steps, each an intent or an outcome (projections/rebind.h):
 *   started -> rebind.issued (the fresh resource's names and the new
 *              password, encrypted)                                intent
 *   issued  -> create it on the new provider, freeze the old database,
 *              copy, count rows on both sides (driver); then, in one
 *              transaction, rebind.copied + binding.moved + one
 *              credential.delivered per holder — or rebind.failed
 *                                                                  outcome
 *   moved   -> once every holder acknowledged the new version: revoke
 *              the old grant, data retained (driver); rebind.completed
 *   failed  -> thaw the old database, drop the partial copy (driver);
 *              rebind.reverted
 * A crash between any two steps resumes at the recorded one: create is
 * idempotent (and sets the password again), freezing is, and the copy
 * replaces what an interrupted one left.  A failure before the switch
 * ends the move (the operator runs it again); after the switch nothing
 * can undo it, so revoking the old grant is retried until it is done.
 *
 * A consolidation (tally assign --consolidate, projections/rebind.h) is
 * the same saga from an embedded instance: the from side is reached at
 * the address the operator gave, as the instance's user with the
 * credential tally delivered to it; nothing is revoked there after the
 * switch (the instance is the module's own, left read-only).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "core/vec.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/rebind.h"
#include "projections/rotation.h"
#include "backoff.h"
#include "credential.h"
#include "deliver.h"
#include "epoch.h"
#include "pass.h"
#include "rx-internal.h"
#include "session.h"

#define TABLES_MAX	65536	/* the copy's counts, as JSON */

enum { OP_ISSUE = 1, OP_COPY, OP_RETIRE, OP_REVERT, OP_FAIL, OP_WAIT };

struct mstep {
	struct tl_rebind	 r;
	struct tl_grant		 g;
	int			 op;
	char			 password[TL_PASSWORD_MAX + 1];
	char			 db[64], owner[64], login[64];	/* new */
	char			 odb[64], oowner[64], ologin[64]; /* old */
	struct tl_rx_prov	 from, to;
	int			 loaded;	/* from and to */
	int			 from_gone;	/* the old provider is no more */
	int			 rc;
	uint64_t		 bytes;		/* the old data kept, retired */
	int			 have_bytes;
	char			 step[16];
	char			 fromname[300];	/* for the reasons */
	char			 why[TL_WHY_MAX];
	char			 cleanup[TL_WHY_MAX];
	char			*tables;
	int			 ran;		/* the driver was called */
};

/*
 * A copy runs on a thread of its own, with its own copy of the step:
 * it may take minutes, and tallyd's other work (provisioning, rotation,
 * verification) goes on meanwhile.  The pass that finds it finished
 * records its outcome; a tallyd stopped during one leaves it to the
 * next, which copies again (the copy replaces what it finds).
 */
struct tl_rx_copy {
	struct tl_rx_job	 job;		/* first: on the pool's long lane */
	struct mstep		 st;
	int			 taken;		/* by this pass */
	struct tl_rx_copy	*next;
};

/* A reason, truncated quietly (why texts are bounded, not exact). */
static void
say(char *dst, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
say(char *dst, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dst, TL_WHY_MAX, fmt, ap);
	va_end(ap);
}

struct mpass {
	struct tl_rx	*rx;
	struct mstep	*s;
	size_t		 n, cap;
	uint64_t	 now;
	int		 issue;		/* a step issues its intent */
	unsigned	 steps, running;	/* what the pass says */
};

/*
 * An embedded instance as the from side: its address as given, its
 * user, and the credential tally delivered to it (the grant's current
 * version, the one the instance runs with).  Not fenced: the fence is a
 * provider's, and the instance is none.
 */
static int
load_embedded(struct mpass *ps, struct tl_txn *t, struct mstep *st)
{
	struct tl_rx_prov *pv = &st->from;
	int rc;

	memset(pv, 0, sizeof(*pv));
	snprintf(pv->id, sizeof(pv->id), "embedded/%.63s", st->g.req);
	snprintf(pv->host, sizeof(pv->host), "%s", st->r.from_host);
	snprintf(pv->routable, sizeof(pv->routable), "%s", st->r.from_host);
	snprintf(pv->port, sizeof(pv->port), "%s", st->r.from_port);
	snprintf(pv->user, sizeof(pv->user), "%s", st->r.old_user);
	snprintf(pv->node, sizeof(pv->node), "%s", st->g.node);
	snprintf(pv->expose, sizeof(pv->expose), "none");
	pv->decl = tl_drv_decl_for_type(st->g.type);
	pv->ops = tl_drv_ops_of(pv->decl);
	if ((rc = tl_rx_intent_password(ps->rx, t, &st->g, pv->password)) != 0)
		return rc;
	return pv->ops != NULL ? 0 : TL_EDRIVER;
}

static int
load_sides(struct mpass *ps, struct tl_txn *t, const struct tl_proj *p,
    struct mstep *st)
{
	char driver[64];
	int drop, rc;

	if (st->loaded)
		return 0;
	snprintf(st->step, sizeof(st->step), "start");
	if (st->r.from[0] == '\0') {
		/* The instance is only the source: nothing to fence there. */
		if ((rc = load_embedded(ps, t, st)) != 0) {
			st->rc = TL_EDRIVER;
			say(st->why, "%s: %s", st->fromname, rc == TL_EDRIVER ?
			    "no usable driver" : "cannot read the credential "
			    "delivered to it");
		}
		rc = tl_rx_load_provider(t, p, ps->rx, st->r.to, st->g.type,
		    &st->to, driver, &drop);
		if (rc != 0 || st->to.ops == NULL) {
			st->to.ops = NULL;
			if (st->op == OP_COPY) {
				st->rc = TL_EDRIVER;
				say(st->why, "provider %s: %s", st->r.to,
				    rc == TL_ENOTFOUND ? "gone" : rc != 0 ?
				    tl_strerror(rc) : "no usable driver");
			}
		}
		tl_ep_arm(ps->rx, &st->to);
		st->loaded = 1;
		return 0;
	}
	rc = tl_rx_load_provider(t, p, ps->rx, st->r.from, st->g.type,
	    &st->from, driver, &drop);
	if (rc == TL_ENOTFOUND && st->op != OP_COPY)
		st->from_gone = 1;
	else if (rc != 0 || st->from.ops == NULL) {
		st->rc = TL_EDRIVER;
		say(st->why, "provider %s: %s", st->r.from,
		    rc == TL_ENOTFOUND ? "gone" : rc != 0 ? tl_strerror(rc) :
		    "no usable driver");
	}
	if (st->op != OP_RETIRE) {
		rc = tl_rx_load_provider(t, p, ps->rx, st->r.to, st->g.type,
		    &st->to, driver, &drop);
		if (rc != 0 || st->to.ops == NULL) {
			/* Reverting only drops the copy there: said, not fatal. */
			st->to.ops = NULL;
			if (st->op == OP_COPY) {
				st->rc = TL_EDRIVER;
				say(st->why, "provider %s: "
				    "%s", st->r.to, rc == TL_ENOTFOUND ? "gone" :
				    rc != 0 ? tl_strerror(rc) :
				    "no usable driver");
			}
		}
	}
	tl_ep_arm(ps->rx, &st->from);
	tl_ep_arm(ps->rx, &st->to);
	st->loaded = 1;
	return 0;
}

/* Has every holder of g acknowledged version? */
static int
all_acked(struct tl_txn *t, const struct tl_proj *p, const struct tl_grant *g,
    uint64_t version)
{
	struct tl_nodelist nl;
	char holder[140];
	size_t i;
	int all = 1;

	if (tl_rx_grant_holders(t, p, g, &nl) != 0)
		return 0;
	for (i = 0; i < nl.n && all; i++) {
		snprintf(holder, sizeof(holder), "%s@%s", g->module, nl.v[i]);
		if (!tl_rot_acked(t, p, g->id, version, holder))
			all = 0;
	}
	tl_nodelist_free(&nl);
	return all;
}

/* Not before the provider's backoff says so (retried steps only). */
static int
backed_off(struct mpass *ps, const char *id)
{
	struct tl_rx_backoff *bo = tl_rx_backoff_find(ps->rx, id, 0);

	return bo != NULL && bo->next_ns > ps->now;
}

struct gather_arg {
	struct mpass		*ps;
	struct tl_txn		*t;
	const struct tl_proj	*p;
};

static int
gather_one(const struct tl_rebind *r, void *arg)
{
	struct gather_arg *ga = arg;
	struct mpass *ps = ga->ps;
	struct mstep *st;
	int provisioned;

	if (tl_vec_grow_secret(&ps->s, &ps->cap, ps->n + 1,
	    sizeof(ps->s[0])) != 0)
		return ENOMEM;
	st = &ps->s[ps->n];
	memset(st, 0, sizeof(*st));
	st->r = *r;
	if (tl_grant_get(ga->t, ga->p, r->grant, &st->g, NULL) != 0)
		return 0;	/* no grant: nothing to move */
	if (r->from[0] != '\0')
		snprintf(st->fromname, sizeof(st->fromname), "%s", r->from);
	else
		snprintf(st->fromname, sizeof(st->fromname), "embedded "
		    "instance %s at %.200s:%s", st->g.req, r->from_host,
		    r->from_port);
	provisioned = strcmp(st->g.state, TL_GRANT_PROVISIONED) == 0;
	snprintf(st->db, sizeof(st->db), "%s", r->db);
	snprintf(st->owner, sizeof(st->owner), "%s", r->owner);
	snprintf(st->login, sizeof(st->login), "%s", r->user);
	snprintf(st->odb, sizeof(st->odb), "%s", r->old_db);
	snprintf(st->oowner, sizeof(st->oowner), "%s", r->old_owner);
	snprintf(st->ologin, sizeof(st->ologin), "%s", r->old_user);

	if (strcmp(r->state, TL_MV_STARTED) == 0 ||
	    strcmp(r->state, TL_MV_ISSUED) == 0) {
		if (!provisioned) {
			st->op = OP_FAIL;
			snprintf(st->step, sizeof(st->step), "start");
			say(st->why, "grant %s became %s "
			    "during the move", r->grant, st->g.state);
		} else if (strcmp(r->state, TL_MV_STARTED) == 0) {
			st->op = OP_ISSUE;
			/* An embedded source keeps the names it was given. */
			if (r->from[0] != '\0')
				tl_rx_grant_names(ps->rx, &st->g, st->g.version,
				    st->odb, st->oowner, st->ologin);
			tl_rx_move_names(ps->rx, &st->g, r->version, st->db, st->owner,
			    st->login);
		} else {
			struct tl_grant tmp = st->g;

			st->op = OP_COPY;
			tmp.version = r->version;
			tmp.intent_seq = r->issued_seq;
			if (tl_rx_intent_password(ps->rx, ga->t, &tmp,
			    st->password) != 0) {
				st->op = OP_FAIL;
				snprintf(st->step, sizeof(st->step), "create");
				say(st->why, "cannot read "
				    "the new credential's intent");
			} else
				load_sides(ps, ga->t, ga->p, st);
		}
	} else if (strcmp(r->state, TL_MV_MOVED) == 0) {
		/* A grant revoked since has no holders left to wait for. */
		if (provisioned && !all_acked(ga->t, ga->p, &st->g, r->version))
			st->op = OP_WAIT;
		else if (backed_off(ps, r->from))
			st->op = OP_WAIT;
		else {
			st->op = OP_RETIRE;
			load_sides(ps, ga->t, ga->p, st);
		}
	} else if (strcmp(r->state, TL_MV_FAILED) == 0) {
		if (backed_off(ps, r->from))
			st->op = OP_WAIT;
		else {
			st->op = OP_REVERT;
			load_sides(ps, ga->t, ga->p, st);
		}
	}
	if (st->op == 0)
		return 0;
	ps->n++;
	return 0;
}

static int
issue(void *arg, struct tl_ctx *cp)
{
	struct mpass *ps = arg;
	struct tl_ctx c = *cp;
	struct tl_txn *t = c.t;
	size_t i;
	int rc;

	for (i = 0; i < ps->n; i++) {
		struct mstep *st = &ps->s[i];
		uint8_t ct[TL_PASSWORD_MAX + TL_BOX_OVERHEAD];
		size_t ctlen;
		struct tl_rebind cur;
		struct tl_body b;
		uint64_t seq;
		char stream[TL_KEY_MAX];

		if (st->op != OP_ISSUE)
			continue;
		if (tl_mv_get(t, &c.p, st->r.grant, &cur) != 0 ||
		    strcmp(cur.state, TL_MV_STARTED) != 0) {
			st->op = OP_WAIT;
			continue;
		}
		tl_rx_prov_password(ps->rx, st->to.ops != NULL ? &st->to :
		    NULL, st->password);
		ctlen = tl_rx_seal_credential(ps->rx, st->g.id, st->r.version,
		    st->password, ct);
		if ((rc = tl_key(stream, "grant/%s", st->g.id)) != 0)
			return rc;
		c.cause = st->r.started_seq;
		c.have_corr = 0;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, st->g.id);
		tl_body_u64(&b, TL_F_VERSION, st->r.version);
		tl_body_str(&b, TL_F_PROVIDER, st->r.to);
		tl_body_str(&b, TL_F_RESOURCE, st->db);
		tl_body_str(&b, TL_F_OWNER, st->owner);
		tl_body_str(&b, TL_F_USER, st->login);
		tl_body_secret(&b, TL_F_PASSWORD, ct, ctlen);
		tl_body_str(&b, TL_F_FROM_RESOURCE, st->odb);
		tl_body_str(&b, TL_F_FROM_OWNER, st->oowner);
		tl_body_str(&b, TL_F_FROM_USER, st->ologin);
		rc = tl_emit(&c, TL_EV_REBIND_ISSUED, stream, &b, &seq);
		tl_body_free(&b);
		tl_secret_wipe(ct, sizeof(ct));
		if (rc != 0)
			return rc;
		st->r.issued_seq = seq;
		st->op = OP_COPY;	/* this pass goes on to copy */
	}
	*cp = c;
	return 0;
}

/* Opens pv's admin side and runs one operation on it. */
enum { DO_CREATE, DO_FREEZE, DO_THAW, DO_REVOKE, DO_DROP };

static int
on_provider(const struct tl_rx_prov *pv, int what,
    const struct tl_drv_grant *dg, char *why)
{
	const struct tl_drv_ops *ops = pv->ops;
	struct tl_drv_admin a;
	struct tl_drv_fence f;
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	void *h = NULL;
	int rc;

	tl_rx_prov_admin(pv, sv, &f, &a);
	if ((rc = ops->open(&a, &h, why)) != 0)
		return rc;
	if ((rc = tl_ep_session(pv, h, why)) != 0) {
		ops->close(h);
		return rc;
	}
	switch (what) {
	case DO_CREATE:
		rc = ops->create(h, dg, why);	/* sets the password */
		break;
	case DO_FREEZE:
	case DO_THAW:
		rc = ops->freeze(h, dg, what == DO_FREEZE, why);
		break;
	case DO_REVOKE:
	case DO_DROP:
		rc = ops->revoke(h, dg, what == DO_DROP, why);
		break;
	}
	ops->close(h);
	return rc;
}

/* The size of dg's data on pv (best effort: a listing, not a step). */
static int
size_on(const struct tl_rx_prov *pv, const struct tl_drv_grant *dg,
    uint64_t *bytes, char *why)
{
	const struct tl_drv_ops *ops = pv->ops;
	struct tl_drv_admin a;
	struct tl_drv_fence f;
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	void *h = NULL;
	int rc;

	if (ops->size == NULL)
		return TL_EINVAL;
	tl_rx_prov_admin(pv, sv, &f, &a);
	if ((rc = ops->open(&a, &h, why)) != 0)
		return rc;
	if ((rc = tl_ep_session(pv, h, why)) == 0)
		rc = ops->size(h, dg, bytes, why);
	ops->close(h);
	return rc;
}

static void
call_driver(struct mstep *st)
{
	int unnamed = tl_rx_grant_naming(&st->g) == 1;
	struct tl_drv_grant gnew = { st->db, st->owner, st->login,
	    st->password, st->g.id, unnamed };
	/* An embedded source is not tally's: no owner or login of its. */
	int emb = st->r.from[0] == '\0';
	struct tl_drv_grant gold = { st->odb, emb ? "" : st->oowner,
	    emb ? "" : st->ologin, "", st->g.id, unnamed };
	struct tl_drv_admin af, at;
	struct tl_drv_fence ff, ft;
	const char *svf[2 * TL_RX_SETTINGS_MAX + 1];
	const char *svt[2 * TL_RX_SETTINGS_MAX + 1];
	char why[TL_WHY_MAX], thawed[TL_WHY_MAX];

	if (st->rc != 0)
		return;
	switch (st->op) {
	case OP_COPY:
		if (st->to.ops->copy == NULL || st->from.ops->freeze == NULL) {
			snprintf(st->step, sizeof(st->step), "start");
			st->rc = TL_EDRIVER;
			say(st->why, "driver %s cannot "
			    "move data", st->to.ops->decl->name);
			return;
		}
		snprintf(st->step, sizeof(st->step), "create");
		if ((st->rc = on_provider(&st->to, DO_CREATE, &gnew,
		    why)) != 0) {
			say(st->why, "creating \"%s\" on "
			    "%s: %s", st->db, st->r.to, why);
			return;
		}
		snprintf(st->step, sizeof(st->step), "freeze");
		if ((st->rc = on_provider(&st->from, DO_FREEZE, &gold,
		    why)) != 0) {
			say(st->why, "making \"%s\" on %s "
			    "read-only: %s", st->odb, st->fromname, why);
			return;
		}
		snprintf(st->step, sizeof(st->step), "copy");
		if ((st->tables = malloc(TABLES_MAX)) == NULL) {
			st->rc = ENOMEM;
			say(st->why, "out of memory");
			return;
		}
		tl_rx_prov_admin(&st->from, svf, &ff, &af);
		tl_rx_prov_admin(&st->to, svt, &ft, &at);
		if ((st->rc = st->to.ops->copy(&af, &gold, &at, &gnew,
		    st->tables, TABLES_MAX, why)) != 0)
			say(st->why, "copying \"%s\" on "
			    "%s to \"%s\" on %s: %s", st->odb, st->fromname,
			    st->db, st->r.to, why);
		else
			say(st->why, "%s", why);
		break;
	case OP_RETIRE:
		if (st->r.from[0] == '\0') {
			say(st->cleanup, "%s is the module's own: left "
			    "read-only with its data, nothing revoked there",
			    st->fromname);
			return;
		}
		if (st->from_gone) {
			say(st->cleanup, "provider %s "
			    "is gone: nothing to revoke there", st->r.from);
			return;
		}
		if ((st->rc = on_provider(&st->from, DO_REVOKE, &gold,
		    why)) != 0)
			say(st->why, "revoking \"%s\" on "
			    "%s: %s", st->ologin, st->r.from, why);
		else {
			say(st->cleanup, "%s", why);
			/* What is kept, for tally grants --revoked. */
			st->have_bytes = size_on(&st->from, &gold, &st->bytes,
			    why) == 0;
		}
		break;
	case OP_REVERT:
		if (st->r.issued_seq == 0) {
			say(st->cleanup, "nothing was "
			    "made or frozen");
			return;
		}
		snprintf(thawed, sizeof(thawed), "\"%s\" writable again",
		    st->odb);
		/*
		 * The old grant serving again is what matters: retried.  An
		 * embedded instance is not frozen before the freeze step, and
		 * one tally cannot reach again (a wrong --from) is said, not
		 * retried: it is the module's, and the move must end.
		 */
		if (emb && (st->from.ops == NULL ||
		    strcmp(st->r.step, "start") == 0 ||
		    strcmp(st->r.step, "create") == 0))
			snprintf(thawed, sizeof(thawed), "\"%s\" never frozen",
			    st->odb);
		else if (!st->from_gone && st->from.ops->freeze != NULL &&
		    (st->rc = on_provider(&st->from, DO_THAW, &gold,
		    why)) != 0) {
			say(st->why, "making \"%s\" on %s "
			    "writable again: %s", st->odb, st->fromname, why);
			if (!emb)
				return;
			st->rc = 0;
			say(thawed, "\"%s\" on %s NOT made writable again "
			    "(%.200s): reset default_transaction_read_only "
			    "there", st->odb, st->fromname, why);
		}
		/* The partial copy: best effort, said if left behind. */
		if (st->to.ops == NULL)
			snprintf(why, sizeof(why), "provider %s is not usable",
			    st->r.to);
		if (st->to.ops == NULL ||
		    on_provider(&st->to, DO_DROP, &gnew, why) != 0)
			say(st->cleanup, "%s; the partial copy \"%s\" on %s "
			    "was not dropped: %s", thawed, st->db, st->r.to,
			    why);
		else
			say(st->cleanup, "%s; the partial copy \"%s\" on %s "
			    "dropped", thawed, st->db, st->r.to);
		break;
	}
}

/* The copy's counts (JSON from the driver) as a body map. */
static void
tables_body(struct tl_body *b, const char *json)
{
	json_t *j = json != NULL ? json_loads(json, 0, NULL) : NULL;
	const char *k;
	json_t *v;

	tl_body_map(b, TL_F_TABLES);
	if (j != NULL && json_is_object(j))
		json_object_foreach(j, k, v)
			if (json_is_integer(v) && json_integer_value(v) >= 0)
				tl_body_u64(b, k,
				    (uint64_t)json_integer_value(v));
	tl_body_end(b);
	json_decref(j);
}

static int
outcomes(void *arg, struct tl_ctx *cp)
{
	struct mpass *ps = arg;
	struct tl_ctx c = *cp;
	struct tl_txn *t = c.t;
	size_t i;
	int rc;

	for (i = 0; i < ps->n; i++) {
		struct mstep *st = &ps->s[i];
		struct tl_rebind cur;
		struct tl_body b;
		char stream[TL_KEY_MAX];
		int pre;

		if (st->op == OP_WAIT || st->op == OP_ISSUE)
			continue;
		/* Still the same step?  (An operator may have acted.) */
		if (tl_mv_get(t, &c.p, st->r.grant, &cur) != 0)
			continue;
		pre = strcmp(cur.state, TL_MV_STARTED) == 0 ||
		    strcmp(cur.state, TL_MV_ISSUED) == 0;
		if ((rc = tl_key(stream, "grant/%s", st->g.id)) != 0)
			return rc;
		c.cause = cur.issued_seq ? cur.issued_seq : cur.started_seq;
		c.have_corr = 0;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, st->g.id);
		if ((st->op == OP_FAIL || (st->op == OP_COPY && st->rc != 0)) &&
		    pre) {
			tl_body_str(&b, TL_F_STEP, st->step);
			tl_body_str(&b, TL_F_REASON, st->why);
			rc = tl_emit(&c, TL_EV_REBIND_FAILED, stream, &b, NULL);
		} else if (st->op == OP_COPY && st->rc == 0 &&
		    strcmp(cur.state, TL_MV_ISSUED) == 0) {
			tl_body_u64(&b, TL_F_VERSION, cur.version);
			tables_body(&b, st->tables);
			tl_body_str(&b, TL_F_HOST, st->to.routable);
			tl_body_str(&b, TL_F_PORT, st->to.port);
			tl_body_str(&b, TL_GRANT_OBJECT_KEY, st->db);
			tl_body_str(&b, TL_F_USER, st->login);
			rc = tl_emit(&c, TL_EV_REBIND_COPIED, stream, &b, NULL);
			/* The switch: only now, after a verified copy. */
			if (rc == 0)
				rc = tl_key(stream, "binding/%s", st->g.id);
			if (rc == 0) {
				tl_body_reset(&b);
				tl_body_str(&b, TL_F_GRANT, st->g.id);
				tl_body_str(&b, TL_F_MODULE, st->g.module);
				tl_body_str(&b, TL_F_REQ, st->g.req);
				tl_body_str(&b, TL_F_NODE, st->g.node);
				tl_body_str(&b, TL_F_TYPE, st->g.type);
				tl_body_str(&b, TL_F_PROVIDER, cur.to);
				tl_body_str(&b, TL_F_FROM, cur.from);
				tl_body_str(&b, TL_F_REASON,
				    cur.from[0] == '\0' ? TL_BIND_CONSOLIDATED :
				    TL_BIND_MOVED);
				tl_body_str(&b, TL_F_STATE, "bound");
				rc = tl_emit(&c, TL_EV_BINDING_MOVED, stream, &b,
				    NULL);
			}
			if (rc == 0)
				rc = tl_rx_deliver(ps->rx, &c, st->g.id);
		} else if (st->op == OP_RETIRE && st->rc == 0 &&
		    strcmp(cur.state, TL_MV_MOVED) == 0) {
			tl_body_u64(&b, TL_F_VERSION, cur.version);
			tl_body_str(&b, TL_F_PROVIDER, cur.from);
			tl_body_str(&b, TL_F_RESOURCE, cur.old_db);
			tl_body_str(&b, TL_F_USER, cur.old_user);
			tl_body_str(&b, TL_F_POLICY, "retain");
			tl_body_str(&b, TL_F_HOW, st->cleanup);
			if (st->have_bytes)
				tl_body_u64(&b, TL_F_SIZE, st->bytes);
			rc = tl_emit(&c, TL_EV_REBIND_COMPLETED, stream, &b, NULL);
		} else if (st->op == OP_REVERT && st->rc == 0 &&
		    strcmp(cur.state, TL_MV_FAILED) == 0) {
			tl_body_str(&b, TL_F_CLEANUP, st->cleanup);
			rc = tl_emit(&c, TL_EV_REBIND_REVERTED, stream, &b, NULL);
		}
		tl_body_free(&b);
		if (rc != 0)
			return rc;
	}
	*cp = c;
	return 0;
}

static void
step_free(struct mstep *st)
{
	tl_secret_wipe(st->password, sizeof(st->password));
	tl_rx_prov_wipe(&st->from);
	tl_rx_prov_wipe(&st->to);
	free(st->tables);
	st->tables = NULL;
}

/* A move's copy, as a job on the pool's long lane (pass.h). */
static void
copy_run(struct tl_rx_job *j)
{
	struct tl_rx_copy *cp = (struct tl_rx_copy *)j;

	call_driver(&cp->st);
	cp->st.ran = 1;
}

static int
copy_done(struct tl_rx_copy *cp)
{
	return tl_rx_job_done(&cp->job);
}

/* Unlinks cp (finished) and frees it, its step's secrets wiped. */
static void
copy_drop(struct tl_rx *rx, struct tl_rx_copy *cp)
{
	struct tl_rx_copy **pp;

	for (pp = &rx->copies; *pp != NULL; pp = &(*pp)->next)
		if (*pp == cp) {
			*pp = cp->next;
			break;
		}
	step_free(&cp->st);
	tl_secret_free(cp);
}

/*
 * The copy steps of this pass: one running goes on waiting; one
 * finished hands its result to the step, whose outcome this pass
 * records; otherwise a thread is started for it.  *running: copies
 * still under way.
 */
static void
copies(struct tl_rx *rx, struct mpass *ps, unsigned *running)
{
	struct tl_rx_copy *cp, *next;
	size_t i;

	for (cp = rx->copies; cp != NULL; cp = cp->next)
		cp->taken = 0;
	for (i = 0; i < ps->n; i++) {
		struct mstep *st = &ps->s[i];

		if (st->op != OP_COPY || st->rc != 0)
			continue;
		for (cp = rx->copies; cp != NULL; cp = cp->next)
			if (strcmp(cp->st.g.id, st->g.id) == 0 &&
			    cp->st.r.version == st->r.version)
				break;
		if (cp != NULL && !copy_done(cp)) {
			cp->taken = 1;
			st->op = OP_WAIT;
			(*running)++;
			continue;
		}
		if (cp != NULL) {
			step_free(st);
			*st = cp->st;		/* its tables are the step's now */
			cp->st.tables = NULL;
			copy_drop(rx, cp);
			continue;
		}
		if ((cp = tl_secret_calloc(1, sizeof(*cp))) == NULL)
			continue;	/* copied on this thread instead */
		cp->st = *st;
		cp->job.run = copy_run;
		cp->job.lane = TL_RX_LANE_LONG;
		snprintf(cp->job.key, sizeof(cp->job.key), "%s", st->r.to);
		if (tl_rx_pool_submit(rx, &cp->job) != 0) {
			step_free(&cp->st);	/* a copy of the secrets */
			tl_secret_free(cp);
			continue;
		}
		st->tables = NULL;
		cp->taken = 1;
		cp->next = rx->copies;
		rx->copies = cp;
		tl_rx_log(rx, TL_RX_INFO, "move of %s to %s: creating \"%s\", "
		    "freezing and copying \"%s\"", st->g.id, st->r.to, st->db,
		    st->odb);
		st->op = OP_WAIT;
		(*running)++;
	}
	/* Finished copies no move asks for any more (it moved on). */
	for (cp = rx->copies; cp != NULL; cp = next) {
		next = cp->next;
		if (!cp->taken && copy_done(cp))
			copy_drop(rx, cp);
	}
}

void
tl_rx_copies_free(struct tl_rx *rx)
{
	struct tl_rx_copy *cp, *next;

	for (cp = rx->copies; cp != NULL; cp = next) {
		next = cp->next;
		/* Under way at exit: the process ends it (not freed). */
		if (copy_done(cp))
			copy_drop(rx, cp);
	}
	rx->copies = NULL;
}

/* Phase 1 (pass.h): every move under way, and its next step. */
static int
gather(void *arg, struct tl_txn *t, const struct tl_proj *p,
    unsigned *phases)
{
	struct mpass *ps = arg;
	struct gather_arg ga = { ps, t, p };
	size_t i;
	int rc;

	if ((rc = tl_mv_each(t, p, gather_one, &ga)) != 0)
		return rc;
	for (i = 0; i < ps->n; i++)
		if (ps->s[i].op == OP_ISSUE)
			ps->issue = 1;
	if (ps->issue)
		*phases |= TL_RX_INTENTS;
	/* Always: finished copies are collected even with no move. */
	*phases |= TL_RX_CALLS | TL_RX_OUTCOMES;
	return 0;
}

/* A step other than the copy (retire, revert), as a pass job. */
struct step_job {
	struct tl_rx_job	 job;	/* first */
	struct mstep		*st;
};

static void
step_run(struct tl_rx_job *j)
{
	call_driver(((struct step_job *)j)->st);
}

/*
 * Phase 3: copies start on the pool's long lane (minutes, maybe) or
 * hand over their results; the other steps run on the pass lane.
 */
static void
calls(void *arg, unsigned *phases)
{
	struct mpass *ps = arg;
	struct tl_rx *rx = ps->rx;
	struct step_job *sj;
	struct tl_rx_job **jobs;
	size_t i, n = 0;
	int work = 0;

	if (ps->issue) {
		struct tl_txn *t;
		struct tl_proj p;

		/* Issued in this pass: the providers' admin sides now. */
		if (tl_log_begin(rx->log, TL_TXN_RDONLY, &t) == 0) {
			if (tl_proj_open(t, &p) == 0)
				for (i = 0; i < ps->n; i++)
					if (ps->s[i].op == OP_COPY) {
						ps->steps++;
						load_sides(ps, t, &p, &ps->s[i]);
					}
			tl_log_abort(t);
		}
	}
	copies(rx, ps, &ps->running);
	sj = calloc(ps->n + 1, sizeof(*sj));
	jobs = calloc(ps->n + 1, sizeof(*jobs));
	for (i = 0; i < ps->n; i++) {
		struct mstep *st = &ps->s[i];

		if (st->op == OP_WAIT || st->op == OP_ISSUE)
			continue;
		work = 1;
		if (st->op == OP_FAIL)
			continue;
		if (st->op == OP_COPY && !st->ran)
			tl_rx_log(rx, TL_RX_INFO, "move of %s to %s: creating "
			    "\"%s\", freezing and copying \"%s\"", st->g.id,
			    st->r.to, st->db, st->odb);
		if (st->ran)
			continue;
		if (sj == NULL || jobs == NULL) {
			call_driver(st);	/* no memory for a job: here */
			continue;
		}
		sj[n].st = st;
		sj[n].job.run = step_run;
		snprintf(sj[n].job.key, sizeof(sj[n].job.key), "%s",
		    st->r.from);
		jobs[n] = &sj[n].job;
		n++;
	}
	tl_rx_pass_jobs(rx, jobs, n);
	free(sj);
	free(jobs);
	for (i = 0; i < ps->n; i++) {
		struct mstep *st = &ps->s[i];

		if (st->op == OP_WAIT || st->op == OP_ISSUE ||
		    st->op == OP_FAIL)
			continue;
		if (st->rc != 0) {
			tl_rx_log(rx, TL_RX_WARN, "move of %s to %s: %s",
			    st->g.id, st->r.to, st->why);
			if (st->op != OP_COPY)
				tl_rx_backoff_fail(rx, st->r.from);
		} else {
			if (st->op != OP_COPY)
				tl_rx_backoff_ok(rx, st->r.from);
			tl_rx_log(rx, TL_RX_INFO, "move of %s to %s: %s",
			    st->g.id, st->r.to, st->op == OP_COPY ? st->why :
			    st->op == OP_RETIRE ? "old grant revoked, data "
			    "retained" : st->cleanup);
		}
	}
	if (!work)
		*phases &= ~TL_RX_OUTCOMES;
}

static const struct tl_rx_pass_def rebind_pass = {
	gather, issue, calls, outcomes
};

int
tl_rx_rebind(struct tl_rx *rx, unsigned *steps, unsigned *running)
{
	struct mpass ps;
	size_t i;
	int rc;

	memset(&ps, 0, sizeof(ps));
	ps.rx = rx;
	ps.now = tl_rx_now();
	*steps = 0;
	*running = 0;
	rc = tl_rx_pass_run(rx, &rebind_pass, &ps);
	*running = ps.running;
	if (rc != 0)
		goto out;
	*steps = ps.steps;
	for (i = 0; i < ps.n; i++) {
		struct mstep *st = &ps.s[i];

		if (st->op == OP_FAIL || (st->op == OP_COPY) ||
		    ((st->op == OP_RETIRE || st->op == OP_REVERT) &&
		    st->rc == 0))
			(*steps)++;
	}
	rc = 0;
out:
	for (i = 0; i < ps.n; i++)
		step_free(&ps.s[i]);
	tl_secret_free(ps.s);
	return rc;
}
