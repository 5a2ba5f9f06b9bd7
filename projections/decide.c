/*
 * decide.c - the deciders of nodes and declarations; repair, purge, restore.
 */
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "core/vec.h"
#include "catalogue.h"
#include "decide.h"
#include "decide_embedded.h"
#include "events.h"
#include "rebind.h"
#include "grant.h"
#include "graph.h"

/* Nodes. */

int
tl_dec_node_add(struct tl_ctx *c, const char *name, const char *routable,
    const uint8_t pubkey[32], const uint8_t signkey[32],
    const uint8_t cpkey[32])
{
	struct tl_body b;
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "n/%s", name)) != 0 ||
	    (rc = tl_key(stream, "node/%s", name)) != 0)
		return rc;
	if (tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_EREFUSED, "node %s already exists",
		    name);
	tl_body_init(&b);
	tl_body_str(&b, TL_F_NAME, name);
	tl_body_str(&b, TL_F_ROUTABLE, routable);
	tl_body_bin(&b, TL_F_PUBKEY, pubkey, 32);
	if (signkey != NULL)
		tl_body_bin(&b, TL_F_SIGNKEY, signkey, 32);
	if (cpkey != NULL)
		tl_body_bin(&b, TL_F_CPKEY, cpkey, 32);
	rc = tl_emit(c, TL_EV_NODE_ADDED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

int
tl_dec_node_key_add(struct tl_ctx *c, const char *name,
    const uint8_t signkey[32], const uint8_t cpkey[32])
{
	struct tl_body b;
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "n/%s", name)) != 0 ||
	    (rc = tl_key(stream, "node/%s", name)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "no node %s", name);
	tl_body_init(&b);
	tl_body_str(&b, TL_F_NAME, name);
	if (signkey != NULL)
		tl_body_bin(&b, TL_F_SIGNKEY, signkey, 32);
	if (cpkey != NULL)
		tl_body_bin(&b, TL_F_CPKEY, cpkey, 32);
	rc = tl_emit(c, TL_EV_NODE_KEY_ADDED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

int
tl_dec_node_rm(struct tl_ctx *c, const char *name)
{
	struct tl_body b;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "n/%s", name)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "no node %s", name);
	/* Every module and grant still there, named (decide_assign.c). */
	if ((rc = tl_dec_node_rm_check(c, name)) != 0)
		return rc;
	if ((rc = tl_key(k, "node/%s", name)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_NAME, name);
	rc = tl_emit(c, TL_EV_NODE_REMOVED, k, &b, NULL);
	tl_body_free(&b);
	return rc;
}

/* Modules. */

/* The grant-shaping fields of a requirement: changing them moves data. */
struct shape {
	char	kind[16], type[64], target[64], scope[16], provider[130],
		resource[64];
};

static void
shape_of(struct tl_bnode m, struct shape *s)
{
	memset(s, 0, sizeof(*s));
	tl_bn_getstr(m, "kind", s->kind, sizeof(s->kind));
	tl_bn_getstr(m, "type", s->type, sizeof(s->type));
	tl_bn_getstr(m, "target", s->target, sizeof(s->target));
	tl_bn_getstr(m, "scope", s->scope, sizeof(s->scope));
	tl_bn_getstr(m, "provider", s->provider, sizeof(s->provider));
	tl_bn_getstr(m, "resource", s->resource, sizeof(s->resource));
}

struct live_arg {
	const char	*req;
	char		 grant[TL_GRANT_ID_MAX + 1];
	char		 state[16];
	int		 requested;	/* a mere request counts too */
};

static int
live_grant(const struct tl_grant *g, void *arg)
{
	struct live_arg *la = arg;

	if (strcmp(g->req, la->req) != 0)
		return 0;
	if ((strcmp(g->state, TL_GRANT_REQUESTED) == 0 && !la->requested) ||
	    strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0)
		return 0;
	snprintf(la->grant, sizeof(la->grant), "%s", g->id);
	snprintf(la->state, sizeof(la->state), "%s", g->state);
	return 1;
}

/* Does module target keep an embedded instance of type, and not provide it? */
static int
embedded_only(struct tl_ctx *c, const char *target, const char *type,
    char *ename, size_t ecap)
{
	struct tl_rec m;
	struct tl_bnode emb, prov;
	size_t i;
	int found = 0;
	char k[TL_KEY_MAX];

	if (tl_key(k, "m/%s", target) != 0 ||
	    tl_rec_get(c->t, c->p.graph, k, &m) != 0)
		return 0;
	if (tl_bn_get(m.m, "provides", &prov) == 0) {
		for (i = 0; i < tl_bn_len(prov); i++) {
			char pt[64];

			if (tl_bn_getstr(tl_bn_at(prov, i), "type", pt,
			    sizeof(pt)) == 0 && strcmp(pt, type) == 0)
				goto out;
		}
	}
	if (tl_bn_get(m.m, "embedded", &emb) == 0) {
		for (i = 0; i < tl_bn_len(emb); i++) {
			char et[64];

			if (tl_bn_getstr(tl_bn_at(emb, i), "type", et,
			    sizeof(et)) == 0 && strcmp(et, type) == 0) {
				tl_bn_getstr(tl_bn_at(emb, i), "name", ename,
				    ecap);
				found = 1;
				break;
			}
		}
	}
out:
	tl_rec_close(&m);
	return found;
}

struct emb_owner {
	const char	*name;
	char		 owner[64];
};

static int
emb_named(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct emb_owner *eo = arg;
	struct tl_rec v;
	struct tl_bnode emb;
	size_t i;
	int rc, found = 0;

	if ((rc = tl_rec_open(val, vlen, &v)) != 0)
		return rc;
	if (tl_bn_get(v.m, "embedded", &emb) == 0)
		for (i = 0; i < tl_bn_len(emb) && !found; i++) {
			char en[64];

			if (tl_bn_getstr(tl_bn_at(emb, i), "name", en,
			    sizeof(en)) == 0 && strcmp(en, eo->name) == 0)
				found = 1;
		}
	tl_rec_close(&v);
	if (found)
		snprintf(eo->owner, sizeof(eo->owner), "%s", rest);
	return found;
}

/*
 * Does target name another module's embedded instance (and no module)?
 * Only an undeclared target is looked for, so the scan is rare.
 */
static int
embedded_named(struct tl_ctx *c, const char *self, const char *target,
    char owner[64])
{
	struct emb_owner eo = { target, "" };
	char k[TL_KEY_MAX];

	if (tl_key(k, "m/%s", target) != 0 ||
	    tl_rec_exists(c->t, c->p.graph, k))
		return 0;
	if (tl_rec_scan(c->t, c->p.graph, "m/", emb_named, &eo) < 0)
		return 0;
	if (eo.owner[0] == '\0' || strcmp(eo.owner, self) == 0)
		return 0;
	snprintf(owner, 64, "%s", eo.owner);
	return 1;
}

/* Reshaping a grant that exists would move data (or leave it behind). */
static int
check_reshape(struct tl_ctx *c, const struct tl_decl *d,
    const struct tl_decl_req *r, const struct shape *sp)
{
	struct shape old;
	struct tl_rec prev;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "r/%s/%s", d->name, r->name)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &prev) == 0) {
		shape_of(prev.m, &old);
		tl_rec_close(&prev);
		if (memcmp(&old, sp, sizeof(old)) != 0) {
			struct live_arg la = { r->name, "", "", 1 };

			tl_grant_each_of_module(c->t, &c->p, d->name,
			    live_grant, &la);
			if (la.grant[0] != '\0' &&
			    strcmp(la.state, TL_GRANT_REQUESTED) == 0)
				/*
				 * Its binding and the request keep the old
				 * shape (bindings are never recomputed): tallyd
				 * would make the old resource.
				 */
				return tl_refuse(c, TL_EREFUSED, "%s:%d: "
				    "requires.%s: grant %s is already requested "
				    "as declared before; changing its type, "
				    "provider, scope or resource name would not "
				    "change the request: declare the changed "
				    "requirement under a new name (the request "
				    "of the old one is then withdrawn)", r->file,
				    r->line, r->name, la.grant);
			if (la.grant[0] != '\0')
				return tl_refuse(c, TL_EREFUSED, "%s:%d: "
				    "requires.%s: grant %s is %s; changing its "
				    "type, provider, scope or resource name "
				    "would move data, which is a migration "
				    "(tally rebind --migrate), not a manifest "
				    "change", r->file, r->line, r->name,
				    la.grant, la.state);
		}
	}
	return 0;
}

static int
check_req(struct tl_ctx *c, const struct tl_decl *d,
    const struct tl_decl_req *r, struct tl_bnode m)
{
	struct shape s;
	char ename[64], owner[64];
	char k[TL_KEY_MAX];
	int rc;

	shape_of(m, &s);
	if (embedded_named(c, d->name, s.target, owner))
		return tl_refuse(c, TL_EMANIFEST, "%s:%d: requires.%s.%s: "
		    "'%s' is module %s's embedded private instance: nothing "
		    "may bind to it", r->file, r->line, r->name,
		    strcmp(s.kind, "presence") == 0 ? "presence" : "from",
		    s.target, owner);
	/* Also from instantiation to presence: the grant would be left. */
	if ((rc = check_reshape(c, d, r, &s)) != 0)
		return rc;
	if (strcmp(s.kind, "instantiation") != 0)
		return 0;
	if (embedded_only(c, s.target, s.type, ename, sizeof(ename)))
		return tl_refuse(c, TL_EMANIFEST, "%s:%d: requires.%s.from: "
		    "%s's %s is an embedded private instance: nothing may "
		    "bind to it", r->file, r->line, r->name, s.target, ename);
	/* Exclusive ownership: one resource, one consumer. */
	if ((rc = tl_key(k, "rn/%s/%s/%s", s.target, s.type,
	    s.resource)) != 0)
		return rc;
	{
		const void *v;
		size_t n;

		if (tl_kv_get(c->t, c->p.graph, k, strlen(k), &v, &n) == 0 &&
		    (n != strlen(d->name) || memcmp(v, d->name, n) != 0))
			return tl_refuse(c, TL_EMANIFEST, "%s:%d: requires.%s."
			    "name: %s '%s' from %s belongs to module %.*s: a "
			    "grant has exactly one consumer (no shared "
			    "resources, no read-only logins); follow the event "
			    "stream for cross-module reporting", r->file,
			    r->line, r->name, s.type, s.resource, s.target,
			    (int)n, (const char *)v);
	}
	return 0;
}

struct old_req {
	char	(*names)[64];
	size_t	 n, cap;
};

static int
collect_req(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct old_req *o = arg;

	(void)val;
	(void)vlen;
	if (tl_vec_grow(&o->names, &o->cap, o->n + 1,
	    sizeof(o->names[0])) != 0)
		return ENOMEM;
	snprintf(o->names[o->n++], 64, "%s", rest);
	return 0;
}

struct req_grants {
	const char	*req;
	char		(*ids)[TL_GRANT_ID_MAX + 1];
	size_t		 n, cap;
};

static int
requested_of(const struct tl_grant *g, void *arg)
{
	struct req_grants *rg = arg;

	/* Everything not already on its way out is revoked with it. */
	if (strcmp(g->req, rg->req) != 0 ||
	    strcmp(g->state, TL_GRANT_REVOKING) == 0 ||
	    strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGING) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0)
		return 0;
	if (tl_vec_grow(&rg->ids, &rg->cap, rg->n + 1,
	    sizeof(rg->ids[0])) != 0)
		return ENOMEM;
	snprintf(rg->ids[rg->n++], sizeof(rg->ids[0]), "%s", g->id);
	return 0;
}

/*
 * Requests revocation of the grants of module's requirement req that
 * are only requested: withdrawn, the requirement would otherwise leave
 * them for tallyd to provision for nobody.
 */
static int
cancel_requests(struct tl_ctx *c, const char *module, const char *req)
{
	struct req_grants rg = { req, NULL, 0, 0 };
	struct tl_body b;
	char stream[TL_KEY_MAX];
	size_t i;
	int rc;

	/* Collect first: emitting rewrites the records being scanned. */
	rc = tl_grant_each_of_module(c->t, &c->p, module, requested_of, &rg);
	for (i = 0; rc == 0 && i < rg.n; i++) {
		if ((rc = tl_key(stream, "grant/%s", rg.ids[i])) != 0)
			break;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, rg.ids[i]);
		tl_body_str(&b, TL_F_REASON, "requirement withdrawn");
		rc = tl_emit(c, TL_EV_REVOCATION_REQUESTED, stream, &b, NULL);
		tl_body_free(&b);
	}
	free(rg.ids);
	return rc;
}

/*
 * Requirement req of module was declared again, perhaps of another part:
 * a grant no assignment that installs the part holds any more is
 * revoked (a per-instance one whose node does not install it, a shared
 * one once none does), as when the part is taken from an assignment.
 */
static int
part_unneeded(struct tl_ctx *c, const char *module, const char *req)
{
	struct req_grants rg = { req, NULL, 0, 0 };
	struct tl_nodelist nl;
	struct tl_grant g;
	struct tl_body b;
	char part[64], why[TL_WHY_MAX], stream[TL_KEY_MAX];
	size_t i, left;
	int rc;

	if ((rc = tl_graph_req_part(c->t, &c->p, module, req, part)) != 0 ||
	    part[0] == '\0')
		return rc;
	rc = tl_grant_each_of_module(c->t, &c->p, module, requested_of, &rg);
	for (i = 0; rc == 0 && i < rg.n; i++) {
		if ((rc = tl_grant_get(c->t, &c->p, rg.ids[i], &g, NULL)) != 0)
			break;
		if (strcmp(g.state, TL_GRANT_LOST) == 0)
			continue;
		if (g.node[0] != '\0') {
			if (tl_graph_installs(c->t, &c->p, module, g.node, part))
				continue;
			snprintf(why, sizeof(why), "part %s is not installed on "
			    "%s", part, g.node);
		} else {
			if ((rc = tl_graph_req_nodes(c->t, &c->p, module, req,
			    &nl)) != 0)
				break;
			left = nl.n;
			tl_nodelist_free(&nl);
			if (left > 0)
				continue;
			snprintf(why, sizeof(why), "part %s is installed "
			    "nowhere", part);
		}
		if ((rc = tl_key(stream, "grant/%s", g.id)) != 0)
			break;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, g.id);
		tl_body_str(&b, TL_F_REASON, why);
		rc = tl_emit(c, TL_EV_REVOCATION_REQUESTED, stream, &b, NULL);
		tl_body_free(&b);
	}
	free(rg.ids);
	return rc;
}

static int
same_bytes(struct tl_ctx *c, const char *key, const void *body, size_t len)
{
	const void *v;
	size_t n;

	if (tl_kv_get(c->t, c->p.graph, key, strlen(key), &v, &n) != 0)
		return 0;
	return n == len + 8 && memcmp((const uint8_t *)v + 8, body, len) == 0;
}

/*
 * An applied migration must not change: the log knows what was applied
 * to each grant (ma/GRANT/FILE -> checksum), so an edit is refused here,
 * when the operator can still undo it, not found later by tallyd.
 */
struct edited_arg {
	struct tl_ctx			*c;
	const struct tl_decl_req	*r;
	char				 grant[TL_GRANT_ID_MAX + 1];
	const struct tl_decl_mig	*mg;
	char				 was[80];
};

static int
edited_one(const struct tl_grant *g, void *arg)
{
	struct edited_arg *ea = arg;
	const void *v;
	size_t i, n;
	char k[TL_KEY_MAX];

	if (strcmp(g->req, ea->r->name) != 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0)	/* nothing left of it */
		return 0;
	for (i = 0; i < ea->r->nmigs; i++) {
		const struct tl_decl_mig *mg = &ea->r->migs[i];

		if (tl_key(k, "ma/%s/%s", g->id, mg->file) != 0 ||
		    tl_kv_get(ea->c->t, ea->c->p.grants, k, strlen(k), &v,
		    &n) != 0 || n >= sizeof(ea->was))
			continue;
		if (n == strlen(mg->checksum) && memcmp(v, mg->checksum,
		    n) == 0)
			continue;
		memcpy(ea->was, v, n);
		ea->was[n] = '\0';
		snprintf(ea->grant, sizeof(ea->grant), "%s", g->id);
		ea->mg = mg;
		return 1;
	}
	return 0;
}

static int
check_migrations(struct tl_ctx *c, const struct tl_decl *d,
    const struct tl_decl_req *r)
{
	struct edited_arg ea;
	int rc;

	if (r->nmigs == 0)
		return 0;
	memset(&ea, 0, sizeof(ea));
	ea.c = c;
	ea.r = r;
	/* edited_one stops the walk with 1: found. */
	if ((rc = tl_grant_each_of_module(c->t, &c->p, d->name, edited_one,
	    &ea)) != 0 && rc != 1)
		return rc;
	if (ea.mg == NULL)
		return 0;
	return tl_refuse(c, TL_EREFUSED, "%s:%d: requires.%s.migrations: %s "
	    "was applied to grant %s with checksum %s; the file now has "
	    "checksum %s: an applied migration must not change (restore it, "
	    "and put the change in a new file)", r->file, r->line, r->name,
	    ea.mg->file, ea.grant, ea.was, ea.mg->checksum);
}

int
tl_dec_apply(struct tl_ctx *c, const struct tl_decl *d)
{
	struct old_req old = { NULL, 0, 0 };
	struct tl_body b;
	char stream[TL_KEY_MAX];
	char k[TL_KEY_MAX];
	size_t i, j;
	int rc = 0, types_touched = 0;

	if ((rc = tl_key(stream, "module/%s", d->name)) != 0)
		return rc;

	/* Validate everything before appending anything. */
	for (i = 0; i < d->nreqs; i++) {
		struct tl_bview v;

		if ((rc = tl_bview_open(&v, d->reqs[i].body,
		    d->reqs[i].len)) != 0)
			return rc;
		rc = check_req(c, d, &d->reqs[i], v.root);
		tl_bview_close(&v);
		if (rc == 0)
			rc = check_migrations(c, d, &d->reqs[i]);
		if (rc != 0)
			return rc;
	}
	if ((rc = tl_key(k, "r/%s/", d->name)) != 0 ||
	    (rc = tl_rec_scan(c->t, c->p.graph, k, collect_req, &old)) != 0)
		goto out;
	/*
	 * A requirement dropped from the manifest has its grants revoked
	 * (cancel_requests, below), like a removed consumer: the provider's
	 * policy keeps or drops the data, and purge stays explicit.
	 */
	if ((rc = tl_key(k, "m/%s", d->name)) != 0)
		goto out;
	if (!same_bytes(c, k, d->body, d->len)) {
		if ((rc = tl_dec_instances_declared(c, d->name, d->body,
		    d->len)) != 0)
			goto out;
		if ((rc = tl_emit_bytes(c, TL_EV_MODULE_DECLARED, stream, d->body,
		    d->len, NULL)) != 0 ||
		    (rc = tl_dec_embedded_sync(c, d->name)) != 0)
			goto out;
		types_touched = 1;
		/* Its derived settings may have changed with it. */
		{
			struct tl_nodelist nl;
			size_t n;

			if ((rc = tl_graph_module_nodes(c->t, &c->p, d->name,
			    &nl)) != 0)
				goto out;
			for (n = 0; rc == 0 && n < nl.n; n++)
				rc = tl_dec_derive(c, d->name, nl.v[n]);
			tl_nodelist_free(&nl);
			if (rc != 0)
				goto out;
		}
	}
	/* Migration content first: requirements refer to it by checksum. */
	for (i = 0; i < d->nreqs; i++)
		for (j = 0; j < d->reqs[i].nmigs; j++) {
			const struct tl_decl_mig *mg = &d->reqs[i].migs[j];

			if ((rc = tl_key(k, "ms/%s", mg->checksum)) != 0)
				goto out;
			if (tl_rec_exists(c->t, c->p.graph, k))
				continue;
			tl_body_init(&b);
			tl_body_str(&b, TL_F_MODULE, d->name);
			tl_body_str(&b, TL_F_REQ, d->reqs[i].name);
			tl_body_str(&b, TL_F_FILE, mg->file);
			tl_body_str(&b, TL_F_CHECKSUM, mg->checksum);
			tl_body_bin(&b, TL_F_CONTENT, mg->content, mg->len);
			rc = tl_emit(c, TL_EV_MIGRATION_STORED, stream, &b, NULL);
			tl_body_free(&b);
			if (rc != 0)
				goto out;
		}
	for (i = 0; i < d->nreqs; i++) {
		if ((rc = tl_key(k, "r/%s/%s", d->name, d->reqs[i].name)) != 0)
			goto out;
		if (same_bytes(c, k, d->reqs[i].body, d->reqs[i].len))
			continue;
		if ((rc = tl_emit_bytes(c, TL_EV_REQ_DECLARED, stream,
		    d->reqs[i].body, d->reqs[i].len, NULL)) != 0 ||
		    (rc = part_unneeded(c, d->name, d->reqs[i].name)) != 0)
			goto out;
		types_touched = 1;
	}
	for (j = 0; j < old.n; j++) {
		for (i = 0; i < d->nreqs; i++)
			if (strcmp(d->reqs[i].name, old.names[j]) == 0)
				break;
		if (i < d->nreqs)
			continue;
		/* Nobody needs what was only requested for it any more. */
		if ((rc = cancel_requests(c, d->name, old.names[j])) != 0)
			goto out;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_MODULE, d->name);
		tl_body_str(&b, TL_F_NAME, old.names[j]);
		rc = tl_emit(c, TL_EV_REQ_WITHDRAWN, stream, &b, NULL);
		tl_body_free(&b);
		if (rc != 0)
			goto out;
		types_touched = 1;
	}
	/* A module that now provides more may serve waiting consumers. */
	if (types_touched) {
		if ((rc = tl_provider_refresh(c, d->name)) != 0)
			goto out;
		rc = tl_binder_run_module(c, d->name);
	}
out:
	free(old.names);
	return rc;
}

int
tl_dec_repair(struct tl_ctx *c, const char *grant)
{
	struct tl_grant g;
	struct tl_body b;
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_grant_find(c, grant, &g)) != 0)
		return rc;
	if (strcmp(g.state, TL_GRANT_MISSING) != 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is %s, not missing: "
		    "there is nothing to recreate", grant, g.state);
	if ((rc = tl_key(stream, "grant/%s", grant)) != 0)
		return rc;
	c->cause = g.state_seq;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, grant);
	rc = tl_emit(c, TL_EV_REPAIR_REQUESTED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

int
tl_dec_purge(struct tl_ctx *c, const char *grant)
{
	struct tl_grant g;
	struct tl_body b;
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_grant_find(c, grant, &g)) != 0)
		return rc;
	if (strcmp(g.state, TL_GRANT_REVOKED) != 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is %s: only a "
		    "revoked grant's retained data can be purged (remove its "
		    "consumer first)", grant, g.state);
	if (strcmp(g.policy, "drop") == 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s was revoked with "
		    "policy drop: its data is already gone", grant);
	if ((rc = tl_key(stream, "grant/%s", grant)) != 0)
		return rc;
	c->cause = g.state_seq;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, grant);
	rc = tl_emit(c, TL_EV_PURGE_REQUESTED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

int
tl_dec_restore(struct tl_ctx *c, const char *grant)
{
	struct tl_grant g;
	struct tl_body b;
	char stream[TL_KEY_MAX];
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_grant_find(c, grant, &g)) != 0)
		return rc;
	if (strcmp(g.state, TL_GRANT_REVOKED) != 0 ||
	    strcmp(g.policy, "retain") != 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is %s%s%s: only a "
		    "revoked grant whose data was retained can be restored",
		    grant, g.state, g.policy[0] ? ", policy " : "", g.policy);
	if (strncmp(g.reason, TL_MV_LEFT, strlen(TL_MV_LEFT)) == 0)
		return tl_refuse(c, TL_EREFUSED, "%s is the %s: its data "
		    "lives on in the moved grant; it can only be purged "
		    "(tally purge %s)", grant, g.reason, grant);
	if ((rc = tl_key(k, "r/%s/%s", g.module, g.req)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_EREFUSED, "module %s does not declare "
		    "requirement %s any more: apply its manifest first", g.module,
		    g.req);
	if ((rc = tl_key(stream, "grant/%s", grant)) != 0)
		return rc;
	c->cause = g.state_seq;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, grant);
	rc = tl_emit(c, TL_EV_RESTORE_REQUESTED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}
