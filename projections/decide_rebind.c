/*
 * decide_rebind.c - moving a binding with its data (tally rebind), and
 * moving a provider to another node (tally provider move).  The sagas
 * and their events are in rebind.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "core/vec.h"
#include "drivers/decl.h"
#include "binder.h"
#include "decide_assign.h"
#include "decide_instances.h"
#include "decide_rebind.h"
#include "decide_rotate.h"
#include "events.h"
#include "exposure.h"
#include "grant.h"
#include "graph.h"
#include "rebind.h"
#include "rotation.h"

/* "node-a/shop, node-b/shop": who holds g, for the explanations. */
static void
holders_text(struct tl_ctx *c, const struct tl_grant *g, char *out,
    size_t cap)
{
	struct tl_nodelist nl;
	size_t i, o = 0;

	out[0] = '\0';
	if (tl_graph_module_nodes(c->t, &c->p, g->module, &nl) != 0)
		return;
	for (i = 0; i < nl.n && o < cap; i++) {
		if (g->node[0] != '\0' && strcmp(g->node, nl.v[i]) != 0)
			continue;
		o += (size_t)snprintf(out + o, cap - o, "%s%s/%s",
		    o ? ", " : "", nl.v[i], g->module);
	}
	tl_nodelist_free(&nl);
	if (out[0] == '\0')
		snprintf(out, cap, "none");
}

int
tl_dec_rebind(struct tl_ctx *c, const char *grant, const char *provider,
    int migrate)
{
	struct tl_grant g;
	struct tl_rotation rot;
	struct tl_rebind mv;
	struct tl_rec r;
	struct tl_body b;
	char pmodule[64] = "", target[64] = "", holders[300];
	char why[TL_WHY_MAX];
	const struct tl_drv_decl *dd;
	uint64_t version;
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_grant_find(c, grant, &g)) != 0)
		return rc;
	if (TL_GRANT_IS_EMBEDDED(&g))
		return tl_refuse(c, TL_EREFUSED, "%s is embedded instance %s's "
		    "credential, on no provider: tally assign %s %s "
		    "--consolidate %s moves it onto its node's provider", grant,
		    g.req, g.module, g.node, g.req);
	if ((rc = tl_key(k, "p/%s", provider)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return tl_refuse(c, TL_ENOTFOUND, "no provider %s (providers "
		    "are named NODE/MODULE: see tally graph)", provider);
	tl_bn_getstr(r.m, "module", pmodule, sizeof(pmodule));
	tl_rec_close(&r);
	if ((rc = tl_key(k, "pt/%s/%s", g.type, provider)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_EREFUSED, "provider %s does not grant "
		    "%s", provider, g.type);
	if ((rc = tl_key(k, "r/%s/%s", g.module, g.req)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &r) == 0) {
		tl_bn_getstr(r.m, "target", target, sizeof(target));
		tl_rec_close(&r);
	}
	if (target[0] != '\0' && strcmp(target, pmodule) != 0)
		return tl_refuse(c, TL_EREFUSED, "provider %s is module %s's, "
		    "but %s takes %s from %s", provider, pmodule, grant,
		    g.type, target);
	if (strcmp(g.provider, provider) == 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is already bound "
		    "to %s", grant, provider);
	if (!tl_exposure_serves(c->t, &c->p, provider, g.module, g.node,
	    why))
		return tl_refuse(c, TL_EREFUSED, "%s cannot move to %s: %s",
		    grant, provider, why);
	if (tl_mv_get(c->t, &c->p, grant, &mv) == 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is already moving "
		    "to %s (%s): a second move is refused until it ends; see "
		    "tally status %s", grant, mv.to, mv.state, g.module);
	if (tl_rot_get(c->t, &c->p, grant, &rot) == 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is rotating v%llu → "
		    "v%llu (%s): a move waits until the rotation completes; "
		    "see tally status %s", grant, (unsigned long long)rot.from,
		    (unsigned long long)rot.to, rot.state, g.module);
	if (strcmp(g.state, TL_GRANT_REQUESTED) == 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is only requested: "
		    "nothing to move yet; tally bind %s %s changes its binding",
		    grant, grant, provider);
	if (strcmp(g.state, TL_GRANT_LOST) == 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is lost: its data "
		    "was on %s, whose node is gone for good, so there is "
		    "nothing to copy; tally rebind %s %s --empty gives it a "
		    "new, empty resource there", grant, g.provider, grant,
		    provider);
	if (strcmp(g.state, TL_GRANT_PROVISIONED) != 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is %s: only a "
		    "provisioned grant is moved with its data", grant,
		    g.state);
	/*
	 * The new credential's version, which also names the fresh database
	 * (rebind.h): past any attempt that failed, so that a retry never
	 * copies into what a failed one may have left behind.
	 */
	version = g.version;
	if (tl_mv_failed(c->t, &c->p, grant, &mv) == 0 && mv.version > version)
		version = mv.version;
	version++;
	/* A driver that cannot move data is refused now, with the reason. */
	if ((dd = tl_drv_decl_for_type(g.type)) != NULL &&
	    !tl_drv_can(dd, TL_DRV_CAP_MOVE, why))
		return tl_refuse(c, TL_EREFUSED, "moving %s from %s to %s "
		    "moves its data, and %s", grant, g.provider, provider, why);
	if (!migrate) {
		holders_text(c, &g, holders, sizeof(holders));
		return tl_refuse(c, TL_EREFUSED, "moving %s from %s to %s moves "
		    "its data: a migration, not a configuration change, so it "
		    "is done only with --migrate.  tallyd would then create a "
		    "fresh resource on %s with a new credential (v%llu), make "
		    "the current one read-only and end its sessions, copy it "
		    "(driver %s) and compare every table's row count; only a "
		    "verified copy is switched to: the binding moves and the "
		    "new values are delivered to every holder (%s).  Once each "
		    "has acknowledged (tally ack NODE %s %llu), the old login "
		    "is disabled and the old resource kept (retained).  Until "
		    "the switch, a failure leaves the old grant serving; from "
		    "the copy until a holder switches, it can read but not "
		    "write.", grant, g.provider, provider, provider,
		    (unsigned long long)version, dd != NULL ? dd->name :
		    "(none)", holders, g.module, (unsigned long long)version);
	}
	if ((rc = tl_key(stream, "grant/%s", grant)) != 0)
		return rc;
	c->cause = g.state_seq;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, grant);
	tl_body_str(&b, TL_F_FROM, g.provider);
	tl_body_str(&b, TL_F_TO, provider);
	tl_body_u64(&b, TL_F_VERSION, version);
	tl_body_u64(&b, TL_F_OLD_VERSION, g.version);
	rc = tl_emit(c, TL_EV_REBIND_STARTED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

/* Provider move: the grants it serves, and whether one is busy. */
struct pgrants {
	struct tl_ctx	*c;
	char		(*ids)[TL_GRANT_ID_MAX + 1];
	size_t		 n, cap;
	char		 busy[TL_GRANT_ID_MAX + 1];
	char		 why[TL_WHY_MAX];
};

static int
collect_served(const struct tl_grant *g, void *arg)
{
	struct pgrants *pg = arg;
	struct tl_rotation rot;
	struct tl_rebind mv;

	if (tl_rot_get(pg->c->t, &pg->c->p, g->id, &rot) == 0 ||
	    tl_mv_get(pg->c->t, &pg->c->p, g->id, &mv) == 0) {
		snprintf(pg->busy, sizeof(pg->busy), "%s", g->id);
		snprintf(pg->why, sizeof(pg->why), "%s", tl_rot_get(pg->c->t,
		    &pg->c->p, g->id, &rot) == 0 ? "rotating" : "moving");
		return 1;
	}
	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0)
		return 0;
	if (tl_vec_grow(&pg->ids, &pg->cap, pg->n + 1,
	    sizeof(pg->ids[0])) != 0)
		return ENOMEM;
	snprintf(pg->ids[pg->n++], TL_GRANT_ID_MAX + 1, "%s", g->id);
	return 0;
}

/* A move into or out of provider id is running. */
struct mv_touch {
	const char	*id;
	char		 grant[TL_GRANT_ID_MAX + 1];
};

static int
touches(const struct tl_rebind *r, void *arg)
{
	struct mv_touch *mt = arg;

	if (strcmp(r->from, mt->id) != 0 && strcmp(r->to, mt->id) != 0)
		return 0;
	snprintf(mt->grant, sizeof(mt->grant), "%s", r->grant);
	return 1;
}

/* The module's own per-instance grants on node would be stranded. */
struct stranded {
	const char	*node;
	char		 grant[TL_GRANT_ID_MAX + 1];
};

static int
own_instance(const struct tl_grant *g, void *arg)
{
	struct stranded *st = arg;

	if (strcmp(g->node, st->node) != 0 ||
	    strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0)
		return 0;
	snprintf(st->grant, sizeof(st->grant), "%s", g->id);
	return 1;
}

int
tl_dec_provider_move(struct tl_ctx *c, const char *id, const char *node,
    const char *expose, const struct tl_setting *set, size_t nset)
{
	struct pgrants pg = { c, NULL, 0, 0, "", "" };
	struct mv_touch mt = { id, "" };
	struct stranded st = { NULL, "" };
	char module[64] = "", from[64] = "", routable[256] = "";
	const char *port = "";
	struct tl_body b;
	struct tl_rec r;
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	size_t i;
	int rc;

	if ((rc = tl_key(k, "p/%s", id)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return tl_refuse(c, TL_ENOTFOUND, "no provider %s (providers "
		    "are named NODE/MODULE: see tally graph)", id);
	tl_bn_getstr(r.m, "module", module, sizeof(module));
	tl_bn_getstr(r.m, "node", from, sizeof(from));
	{
		/* Without --set port, the port its driver declares. */
		struct tl_bnode types;
		char driver[64] = "";
		const char *d;

		if (tl_bn_get(r.m, "types", &types) == 0 &&
		    tl_bn_len(types) > 0)
			tl_bn_getstr(tl_bn_at(types, 0), "driver", driver,
			    sizeof(driver));
		if ((d = tl_drv_setting_default(tl_drv_decl_find(driver),
		    "port")) != NULL)
			port = d;
	}
	tl_rec_close(&r);
	if ((rc = tl_key(k, "n/%s", node)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return tl_refuse(c, TL_ENOTFOUND, "no node %s (tally node add "
		    "%s --routable-name HOST)", node, node);
	tl_bn_getstr(r.m, "routable", routable, sizeof(routable));
	tl_rec_close(&r);
	/* --set is checked against the driver's settings, as by assign. */
	if ((rc = tl_dec_settings_check(c, module, set, nset)) != 0)
		return rc;
	for (i = 0; i < nset; i++)
		if (set[i].secret == NULL && strcmp(set[i].key, "port") == 0 &&
		    set[i].value[0] != '\0')
			port = set[i].value;
	if (strcmp(from, node) == 0)
		return tl_refuse(c, TL_EREFUSED, "provider %s is already on %s",
		    id, node);
	if ((rc = tl_key(k, "a/%s@%s", module, node)) != 0)
		return rc;
	if (tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_EREFUSED, "%s already runs on %s: a "
		    "node runs one instance of a module, so provider %s cannot "
		    "move there", module, node, id);
	if ((rc = tl_key(k, "a/%s@%s", module, from)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "provider %s has no "
		    "assignment %s@%s to move", id, module, from);
	if ((rc = tl_dec_instances_check(c, module, node, from)) != 0)
		return rc;
	if ((rc = tl_dec_node_live(c, node)) != 0)
		return rc;
	st.node = from;
	if ((rc = tl_grant_each_of_module(c->t, &c->p, module, own_instance,
	    &st)) != 0 && rc != 1)
		return rc;
	if (st.grant[0] != '\0')
		return tl_refuse(c, TL_EREFUSED, "%s on %s holds its own "
		    "per-instance grant %s, which belongs to that assignment: "
		    "revoke it before moving the provider", module, from,
		    st.grant);
	if ((rc = tl_mv_each(c->t, &c->p, touches, &mt)) != 0 && rc != 1)
		return rc;
	if (mt.grant[0] != '\0')
		return tl_refuse(c, TL_EREFUSED, "grant %s is moving into or "
		    "out of %s: the provider moves once that ends (see tally "
		    "status)", mt.grant, id);
	if ((rc = tl_grant_each_of_provider(c->t, &c->p, id, collect_served,
	    &pg)) != 0 && rc != 1)
		goto out;
	if (pg.busy[0] != '\0') {
		rc = tl_refuse(c, TL_EREFUSED, "grant %s of %s is %s: the "
		    "provider moves once that completes (see tally status)",
		    pg.busy, id, pg.why);
		goto out;
	}

	/* The fact, then the assignment that goes with it. */
	if ((rc = tl_key(stream, "provider/%s", id)) != 0)
		goto out;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_ID, id);
	tl_body_str(&b, TL_F_MODULE, module);
	tl_body_str(&b, TL_F_FROM, from);
	tl_body_str(&b, TL_F_TO, node);
	tl_body_str(&b, TL_F_HOST, routable);
	tl_body_str(&b, TL_F_PORT, port);
	rc = tl_emit(c, TL_EV_PROVIDER_MOVED, stream, &b, NULL);
	if (rc == 0 && (rc = tl_key(stream, "assignment/%s@%s", module,
	    from)) == 0) {
		tl_body_reset(&b);
		tl_body_str(&b, TL_F_MODULE, module);
		tl_body_str(&b, TL_F_NODE, from);
		rc = tl_emit(c, TL_EV_ASSIGN_REMOVED, stream, &b, NULL);
	}
	if (rc == 0 && (rc = tl_key(stream, "assignment/%s@%s", module,
	    node)) == 0) {
		tl_body_reset(&b);
		tl_body_str(&b, TL_F_MODULE, module);
		tl_body_str(&b, TL_F_NODE, node);
		tl_body_str(&b, TL_F_EXPOSE, expose);
		tl_body_map(&b, TL_F_SETTINGS);
		for (i = 0; i < nset; i++)
			if (set[i].secret == NULL)
				tl_body_str(&b, set[i].key, set[i].value);
		tl_body_end(&b);
		tl_body_map(&b, TL_F_SECRETS);
		for (i = 0; i < nset; i++)
			if (set[i].secret != NULL)
				tl_body_secret(&b, set[i].key, set[i].secret,
				    set[i].secret_len);
		tl_body_end(&b);
		rc = tl_emit(c, TL_EV_ASSIGN_CREATED, stream, &b, NULL);
	}
	tl_body_free(&b);
	/*
	 * Every grant it serves is re-delivered with the new routable name:
	 * a rotation (a new credential at the new address, acknowledged by
	 * every holder) is the generation change that does it.
	 */
	for (i = 0; rc == 0 && i < pg.n; i++) {
		c->cause = 0;
		rc = tl_dec_rotate(c, pg.ids[i], 0, "provider moved");
	}
	if (rc == 0)
		rc = tl_binder_run(c, NULL);
out:
	free(pg.ids);
	return rc;
}

int
tl_dec_rebind_empty(struct tl_ctx *c, const char *grant, const char *provider)
{
	struct tl_grant g;
	struct tl_rec r;
	struct tl_body b;
	char pmodule[64] = "", target[64] = "", resource[64] = "";
	char why[TL_WHY_MAX];
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	uint64_t seq;
	int rc;

	if ((rc = tl_grant_find(c, grant, &g)) != 0)
		return rc;
	if (strcmp(g.state, TL_GRANT_LOST) != 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is %s, not lost: "
		    "--empty is for a grant whose data is gone with its node "
		    "(tally node lost); a grant with data moves with it: "
		    "tally rebind %s %s --migrate", grant, g.state, grant,
		    provider);
	if ((rc = tl_key(k, "p/%s", provider)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return tl_refuse(c, TL_ENOTFOUND, "no provider %s (providers "
		    "are named NODE/MODULE: see tally providers)", provider);
	tl_bn_getstr(r.m, "module", pmodule, sizeof(pmodule));
	tl_rec_close(&r);
	if ((rc = tl_key(k, "pt/%s/%s", g.type, provider)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_EREFUSED, "provider %s does not grant "
		    "%s", provider, g.type);
	if ((rc = tl_key(k, "r/%s/%s", g.module, g.req)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return tl_refuse(c, TL_ENOTFOUND, "module %s no longer "
		    "declares %s: nothing to rebind", g.module, g.req);
	tl_bn_getstr(r.m, "target", target, sizeof(target));
	tl_bn_getstr(r.m, "resource", resource, sizeof(resource));
	tl_rec_close(&r);
	if (target[0] != '\0' && strcmp(target, pmodule) != 0)
		return tl_refuse(c, TL_EREFUSED, "provider %s is module %s's, "
		    "but %s takes %s from %s", provider, pmodule, grant,
		    g.type, target);
	if (!tl_exposure_serves(c->t, &c->p, provider, g.module, g.node, why))
		return tl_refuse(c, TL_EREFUSED, "%s cannot be bound to %s: "
		    "%s", grant, provider, why);

	/* The binding, then a fresh request: nothing is copied. */
	if ((rc = tl_key(stream, "binding/%s", grant)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, grant);
	tl_body_str(&b, TL_F_MODULE, g.module);
	tl_body_str(&b, TL_F_REQ, g.req);
	tl_body_str(&b, TL_F_NODE, g.node);
	tl_body_str(&b, TL_F_TYPE, g.type);
	tl_body_str(&b, TL_F_PROVIDER, provider);
	tl_body_str(&b, TL_F_REASON, TL_BIND_EMPTY);
	tl_body_str(&b, TL_F_STATE, "bound");
	rc = tl_emit(c, TL_EV_BINDING_MADE, stream, &b, &seq);
	if (rc == 0 && (rc = tl_key(stream, "grant/%s", grant)) == 0) {
		c->cause = seq;
		tl_body_reset(&b);
		tl_body_str(&b, TL_F_GRANT, grant);
		tl_body_str(&b, TL_F_MODULE, g.module);
		tl_body_str(&b, TL_F_REQ, g.req);
		tl_body_str(&b, TL_F_NODE, g.node);
		tl_body_str(&b, TL_F_SCOPE, g.scope);
		tl_body_str(&b, TL_F_TYPE, g.type);
		tl_body_str(&b, TL_F_PROVIDER, provider);
		tl_body_str(&b, TL_F_RESOURCE, resource[0] ? resource :
		    g.resource);
		rc = tl_emit(c, TL_EV_GRANT_REQUESTED, stream, &b, NULL);
	}
	tl_body_free(&b);
	return rc;
}
