/*
 * decide_embedded.c - an embedded private instance's credential.
 *
 * docs/manifest.md: an embedded instance is never a provider, but tally
 * still generates its credential, so the module's password is not a
 * constant in its image.  The credential travels as a grant of its own
 * (scope embedded, no provider): the same intent, sealing and delivery
 * as any grant's, with no driver call, since the module's own instance
 * takes the password from its environment.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "drivers/decl.h"
#include "ctx.h"
#include "decide_embedded.h"
#include "events.h"
#include "exposure.h"
#include "grant.h"
#include "graph.h"
#include "rebind.h"
#include "rotation.h"

#define EMB_MAX	64	/* instances read per module (the loader's map) */

int
tl_dec_embedded_request(struct tl_ctx *c, const char *module,
    const char *node)
{
	struct tl_rec m;
	struct tl_bnode arr;
	char name[EMB_MAX][64], type[EMB_MAX][64];
	char k[TL_KEY_MAX], gkey[TL_KEY_MAX], stream[TL_KEY_MAX];
	struct tl_body b;
	size_t i, n = 0;
	int rc;

	if ((rc = tl_key(k, "m/%s", module)) != 0 ||
	    (rc = tl_rec_get(c->t, c->p.graph, k, &m)) != 0)
		return rc;
	/* Copied out first: emitting may move the pages m points into. */
	if (tl_bn_get(m.m, "embedded", &arr) == 0)
		for (i = 0; i < tl_bn_len(arr) && n < EMB_MAX; i++) {
			struct tl_bnode e = tl_bn_at(arr, i);

			name[n][0] = type[n][0] = '\0';
			tl_bn_getstr(e, "name", name[n], sizeof(name[n]));
			tl_bn_getstr(e, "type", type[n], sizeof(type[n]));
			if (name[n][0] != '\0')
				n++;
		}
	tl_rec_close(&m);
	for (i = 0; i < n; i++) {
		struct tl_grant g;

		if ((rc = tl_grant_key(gkey, module, name[i], node)) != 0)
			return rc;
		/* One credential per instance; a new one once revoked. */
		if (tl_grant_get(c->t, &c->p, gkey, &g, NULL) == 0 &&
		    strcmp(g.state, TL_GRANT_REVOKED) != 0 &&
		    strcmp(g.state, TL_GRANT_PURGED) != 0)
			continue;
		if ((rc = tl_key(stream, "grant/%s", gkey)) != 0)
			return rc;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, gkey);
		tl_body_str(&b, TL_F_MODULE, module);
		tl_body_str(&b, TL_F_REQ, name[i]);
		tl_body_str(&b, TL_F_NODE, node);
		tl_body_str(&b, TL_F_SCOPE, TL_GRANT_SCOPE_EMBEDDED);
		tl_body_str(&b, TL_F_TYPE, type[i]);
		tl_body_str(&b, TL_F_PROVIDER, "");
		tl_body_str(&b, TL_F_RESOURCE, name[i]);
		rc = tl_emit(c, TL_EV_GRANT_REQUESTED, stream, &b, NULL);
		tl_body_free(&b);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* The embedded grants of a module, collected before any emit. */
struct emb_grants {
	char	(*id)[TL_GRANT_ID_MAX + 1];
	size_t	 n, cap;
};

static int
collect_embedded(const struct tl_grant *g, void *arg)
{
	struct emb_grants *eg = arg;
	void *nv;

	if (!TL_GRANT_IS_EMBEDDED(g) &&
	    strcmp(g->scope, TL_GRANT_SCOPE_CONSOLIDATED) != 0)
		return 0;
	if (strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_REVOKING) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGING) == 0 ||
	    strcmp(g->state, TL_GRANT_LOST) == 0)
		return 0;
	if (eg->n == eg->cap) {
		size_t cap = eg->cap ? 2 * eg->cap : 8;

		if ((nv = realloc(eg->id, cap * sizeof(*eg->id))) == NULL)
			return ENOMEM;
		eg->id = nv;
		eg->cap = cap;
	}
	snprintf(eg->id[eg->n++], sizeof(eg->id[0]), "%s", g->id);
	return 0;
}

/* Does module record m declare embedded instance name? */
static int
declares(struct tl_txn *t, const struct tl_proj *p, const char *module,
    const char *name)
{
	struct tl_rec m;
	struct tl_bnode arr;
	char k[TL_KEY_MAX], n[64];
	size_t i;
	int found = 0;

	if (tl_key(k, "m/%s", module) != 0 || tl_rec_get(t, p->graph, k, &m) != 0)
		return 0;
	if (tl_bn_get(m.m, "embedded", &arr) == 0)
		for (i = 0; i < tl_bn_len(arr) && !found; i++) {
			n[0] = '\0';
			tl_bn_getstr(tl_bn_at(arr, i), "name", n, sizeof(n));
			found = strcmp(n, name) == 0;
		}
	tl_rec_close(&m);
	return found;
}

int
tl_dec_embedded_sync(struct tl_ctx *c, const char *module)
{
	struct emb_grants eg = { NULL, 0, 0 };
	struct tl_nodelist nl;
	struct tl_grant g;
	struct tl_body b;
	char stream[TL_KEY_MAX];
	size_t i;
	int rc;

	if ((rc = tl_grant_each_of_module(c->t, &c->p, module,
	    collect_embedded, &eg)) != 0)
		goto out;
	/* An instance the declaration no longer has: nobody needs it. */
	for (i = 0; i < eg.n; i++) {
		if (tl_grant_get(c->t, &c->p, eg.id[i], &g, NULL) != 0 ||
		    declares(c->t, &c->p, module, g.req))
			continue;
		if ((rc = tl_key(stream, "grant/%s", g.id)) != 0)
			goto out;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, g.id);
		tl_body_str(&b, TL_F_REASON, "embedded instance withdrawn");
		rc = tl_emit(c, TL_EV_REVOCATION_REQUESTED, stream, &b, NULL);
		tl_body_free(&b);
		if (rc != 0)
			goto out;
	}
	if ((rc = tl_graph_module_nodes(c->t, &c->p, module, &nl)) != 0)
		goto out;
	for (i = 0; rc == 0 && i < nl.n; i++)
		rc = tl_dec_embedded_request(c, module, nl.v[i]);
	tl_nodelist_free(&nl);
out:
	free(eg.id);
	return rc;
}

/* The providers of a type on one node, for --consolidate. */
struct on_node {
	struct tl_ctx	*c;
	const char	*node;
	char		 first[130];
	char		 names[512];
	size_t		 n;
};

static int
one_provider(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct on_node *on = arg;
	struct tl_rec r;
	char k[TL_KEY_MAX], node[64] = "";
	size_t o;

	(void)val;
	(void)vlen;
	if (tl_key(k, "p/%s", rest) != 0 ||
	    tl_rec_get(on->c->t, on->c->p.graph, k, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "node", node, sizeof(node));
	tl_rec_close(&r);
	if (strcmp(node, on->node) != 0)
		return 0;
	if (on->n++ == 0)
		snprintf(on->first, sizeof(on->first), "%s", rest);
	o = strlen(on->names);
	if (o < sizeof(on->names))
		snprintf(on->names + o, sizeof(on->names) - o, "%s%s",
		    o ? ", " : "", rest);
	return 0;
}

int
tl_dec_consolidate(struct tl_ctx *c, const char *module, const char *node,
    const char *instance, const struct tl_dec_consolidation *from)
{
	struct on_node on;
	struct tl_grant g;
	struct tl_rebind mv;
	struct tl_rotation rot;
	const struct tl_drv_decl *dd;
	struct tl_body b;
	char why[TL_WHY_MAX], xwhy[TL_WHY_MAX];
	char gkey[TL_KEY_MAX], k[TL_KEY_MAX], stream[TL_KEY_MAX];
	uint64_t version;
	int rc;

	if ((rc = tl_grant_key(gkey, module, instance, node)) != 0)
		return rc;
	if (tl_grant_get(c->t, &c->p, gkey, &g, NULL) != 0 ||
	    strcmp(g.req, instance) != 0 || (!TL_GRANT_IS_EMBEDDED(&g) &&
	    strcmp(g.scope, TL_GRANT_SCOPE_CONSOLIDATED) != 0))
		return tl_refuse(c, TL_ENOTFOUND, "--consolidate %s: module "
		    "%s has no embedded instance %s on %s (its manifest's "
		    "embedded: names them)", instance, module, instance, node);
	if (!TL_GRANT_IS_EMBEDDED(&g))
		return tl_refuse(c, TL_EREFUSED, "--consolidate %s: %s is "
		    "already consolidated onto %s; that is reversible only as "
		    "another move (tally rebind %s PROVIDER --migrate)",
		    instance, gkey, g.provider, gkey);
	if (tl_mv_get(c->t, &c->p, gkey, &mv) == 0)
		return tl_refuse(c, TL_EREFUSED, "--consolidate %s: %s is "
		    "already being consolidated onto %s (%s); see tally status "
		    "%s", instance, gkey, mv.to, mv.state, module);
	if (tl_rot_get(c->t, &c->p, gkey, &rot) == 0)
		return tl_refuse(c, TL_EREFUSED, "--consolidate %s: %s is "
		    "rotating; consolidating waits until it completes",
		    instance, gkey);
	/* Its data is copied: a driver that cannot is refused now. */
	why[0] = '\0';
	if ((dd = tl_drv_decl_for_type(g.type)) == NULL ||
	    !tl_drv_can(dd, TL_DRV_CAP_MOVE, why))
		return tl_refuse(c, TL_EREFUSED, "--consolidate %s: "
		    "consolidating moves the instance's data onto the node's "
		    "provider, and %s", instance, dd == NULL ? "no driver of "
		    "this build grants its type" : why);
	if (strcmp(g.state, TL_GRANT_PROVISIONED) != 0)
		return tl_refuse(c, TL_EREFUSED, "--consolidate %s: %s is %s: "
		    "its credential must be issued and delivered first (tallyd "
		    "does that once the module is assigned), since tally "
		    "reaches the instance with it to copy its data", instance,
		    gkey, g.state);
	memset(&on, 0, sizeof(on));
	on.c = c;
	on.node = node;
	if ((rc = tl_key(k, "pt/%s/", g.type)) != 0 ||
	    (rc = tl_rec_scan(c->t, c->p.graph, k, one_provider, &on)) != 0)
		return rc;
	if (on.n == 0)
		return tl_refuse(c, TL_ENOTFOUND, "--consolidate %s: node %s "
		    "has no provider of %s to consolidate it onto", instance,
		    node, g.type);
	if (on.n > 1)
		return tl_refuse(c, TL_EREFUSED, "--consolidate %s: node %s "
		    "has %zu providers of %s (%s): tally rebind %s PROVIDER "
		    "--migrate names one", instance, node, on.n, g.type,
		    on.names, gkey);
	if (!tl_exposure_serves(c->t, &c->p, on.first, module, node, xwhy))
		return tl_refuse(c, TL_EREFUSED, "--consolidate %s: %s", instance,
		    xwhy);
	if (from == NULL || from->host == NULL || from->port == NULL ||
	    from->resource == NULL || from->user == NULL)
		return tl_refuse(c, TL_EINVAL, "--consolidate %s: where tally "
		    "reaches the instance to copy its data is required "
		    "(--from HOST:PORT --from-resource NAME --from-user USER)",
		    instance);
	version = g.version;
	if (tl_mv_failed(c->t, &c->p, gkey, &mv) == 0 && mv.version > version)
		version = mv.version;
	version++;
	if ((rc = tl_key(stream, "grant/%s", gkey)) != 0)
		return rc;
	c->cause = g.state_seq;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, gkey);
	tl_body_str(&b, TL_F_FROM, "");
	tl_body_str(&b, TL_F_TO, on.first);
	tl_body_u64(&b, TL_F_VERSION, version);
	tl_body_u64(&b, TL_F_OLD_VERSION, g.version);
	tl_body_str(&b, TL_F_CONSOLIDATE, instance);
	tl_body_str(&b, TL_F_FROM_HOST, from->host);
	tl_body_str(&b, TL_F_FROM_PORT, from->port);
	tl_body_str(&b, TL_F_FROM_RESOURCE, from->resource);
	tl_body_str(&b, TL_F_FROM_USER, from->user);
	rc = tl_emit(c, TL_EV_REBIND_STARTED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}
