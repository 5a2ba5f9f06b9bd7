/*
 * binder.c - which provider serves a requirement, decided once.
 *
 * The rule, in order: a provider named explicitly (manifest or tally
 * bind) > the candidate co-located with the consumer (its first
 * assignment for a shared requirement, its own node per instance) >
 * the only candidate in the mesh > ambiguous, waiting for tally bind.
 * A candidate is a provider whose exposure serves the consumer
 * (exposure.h: local serves only its own node, none nobody); one that
 * does not is never bound, whoever names it.
 * A binding is an event and is never recomputed: only instances that
 * wait (the w/ keys) are looked at, so a provider that appears later
 * moves nothing already bound.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "core/vec.h"
#include "binder.h"
#include "events.h"
#include "exposure.h"
#include "grant.h"
#include "graph.h"

struct keylist {
	char	(*v)[TL_KEY_MAX];
	size_t	 n, cap;
};

static int
keylist_add(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct keylist *kl = arg;

	(void)val;
	(void)vlen;
	if (tl_vec_grow(&kl->v, &kl->cap, kl->n + 1, sizeof(kl->v[0])) != 0)
		return ENOMEM;
	snprintf(kl->v[kl->n++], TL_KEY_MAX, "%s", rest);
	return 0;
}

/* Splits a grant key M/R[@N]; node is "" for a shared instance. */
static int
split_grant(const char *g, char module[64], char req[64], char node[64])
{
	const char *slash = strchr(g, '/'), *at;
	size_t n;

	if (slash == NULL || (n = (size_t)(slash - g)) == 0 || n >= 64)
		return TL_EINVAL;
	memcpy(module, g, n);
	module[n] = '\0';
	at = strchr(slash + 1, '@');
	n = at ? (size_t)(at - slash - 1) : strlen(slash + 1);
	if (n == 0 || n >= 64 || strchr(slash + 1, '/') != NULL)
		return TL_EINVAL;
	memcpy(req, slash + 1, n);
	req[n] = '\0';
	if (at != NULL) {
		if (strlen(at + 1) == 0 || strlen(at + 1) >= 64)
			return TL_EINVAL;
		snprintf(node, 64, "%s", at + 1);
	} else
		node[0] = '\0';
	return 0;
}

struct reqview {
	char	kind[16], type[64], target[64], scope[16], provider[130],
		resource[64];
};

static int
load_req(struct tl_ctx *c, const char *module, const char *req,
    struct reqview *rv)
{
	struct tl_rec r;
	char k[TL_KEY_MAX];
	int rc;

	memset(rv, 0, sizeof(*rv));
	if ((rc = tl_key(k, "r/%s/%s", module, req)) != 0)
		return rc;
	if ((rc = tl_rec_get(c->t, c->p.graph, k, &r)) != 0)
		return rc;
	tl_bn_getstr(r.m, "kind", rv->kind, sizeof(rv->kind));
	tl_bn_getstr(r.m, "type", rv->type, sizeof(rv->type));
	tl_bn_getstr(r.m, "target", rv->target, sizeof(rv->target));
	tl_bn_getstr(r.m, "scope", rv->scope, sizeof(rv->scope));
	tl_bn_getstr(r.m, "provider", rv->provider, sizeof(rv->provider));
	tl_bn_getstr(r.m, "resource", rv->resource, sizeof(rv->resource));
	tl_rec_close(&r);
	return 0;
}

/* Does provider id exist, grant type, and belong to module target? */
static int
provider_fits(struct tl_ctx *c, const char *id, const char *type,
    const char *target, char node[64])
{
	struct tl_rec r;
	char module[64];
	char k[TL_KEY_MAX];
	int ok;

	if (tl_key(k, "pt/%s/%s", type, id) != 0 ||
	    !tl_rec_exists(c->t, c->p.graph, k))
		return 0;
	if (tl_key(k, "p/%s", id) != 0 ||
	    tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "module", module, sizeof(module));
	if (node != NULL)
		tl_bn_getstr(r.m, "node", node, 64);
	tl_rec_close(&r);
	ok = target == NULL || strcmp(module, target) == 0;
	return ok;
}

static int
bind(struct tl_ctx *c, const char *gkey, const char *module, const char *req,
    const char *node, const struct reqview *rv, const char *provider,
    const char *reason)
{
	struct tl_body b;
	char stream[TL_KEY_MAX];
	char k[TL_KEY_MAX];
	uint64_t seq, cause = c->cause;
	int rc;

	if ((rc = tl_key(stream, "binding/%s", gkey)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, gkey);
	tl_body_str(&b, TL_F_MODULE, module);
	tl_body_str(&b, TL_F_REQ, req);
	tl_body_str(&b, TL_F_NODE, node);
	tl_body_str(&b, TL_F_TYPE, rv->type);
	tl_body_str(&b, TL_F_PROVIDER, provider);
	tl_body_str(&b, TL_F_REASON, reason);
	tl_body_str(&b, TL_F_STATE, "bound");
	rc = tl_emit(c, TL_EV_BINDING_MADE, stream, &b, &seq);
	tl_body_free(&b);
	if (rc != 0)
		return rc;

	if ((rc = tl_key(k, "g/%s", gkey)) != 0)
		return rc;
	if (tl_rec_exists(c->t, c->p.grants, k))
		return 0;	/* the grant follows its binding */
	if ((rc = tl_key(stream, "grant/%s", gkey)) != 0)
		return rc;
	c->cause = seq;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, gkey);
	tl_body_str(&b, TL_F_MODULE, module);
	tl_body_str(&b, TL_F_REQ, req);
	tl_body_str(&b, TL_F_NODE, node);
	tl_body_str(&b, TL_F_SCOPE, rv->scope);
	tl_body_str(&b, TL_F_TYPE, rv->type);
	tl_body_str(&b, TL_F_PROVIDER, provider);
	tl_body_str(&b, TL_F_RESOURCE, rv->resource);
	rc = tl_emit(c, TL_EV_GRANT_REQUESTED, stream, &b, NULL);
	tl_body_free(&b);
	c->cause = cause;
	return rc;
}

/* Has the same ambiguity already been recorded? */
static int
same_ambiguity(struct tl_ctx *c, const char *gkey, const struct keylist *cand)
{
	struct tl_rec r;
	struct tl_bnode arr;
	char state[16] = "";
	char k[TL_KEY_MAX];
	size_t i;
	int same = 0;

	if (tl_key(k, "b/%s", gkey) != 0 ||
	    tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "state", state, sizeof(state));
	if (strcmp(state, "ambiguous") == 0 &&
	    tl_bn_get(r.m, "candidates", &arr) == 0 &&
	    tl_bn_len(arr) == cand->n) {
		same = 1;
		for (i = 0; i < cand->n && same; i++) {
			const char *s;
			size_t n;

			if (tl_bn_str(tl_bn_at(arr, i), &s, &n) != 0 ||
			    n != strlen(cand->v[i]) ||
			    memcmp(s, cand->v[i], n) != 0)
				same = 0;
		}
	}
	tl_rec_close(&r);
	return same;
}

static int
decide_one(struct tl_ctx *c, const char *type, const char *gkey)
{
	struct reqview rv;
	struct keylist all = { NULL, 0, 0 }, cand = { NULL, 0, 0 };
	char module[64], req[64], node[64], where[64] = "";
	/* An index, not a pointer: cand.v moves as it grows. */
	size_t colocated = SIZE_MAX;
	struct tl_nodelist nl;
	char k[TL_KEY_MAX];
	size_t i;
	int rc;

	if ((rc = split_grant(gkey, module, req, node)) != 0)
		return rc;
	if ((rc = load_req(c, module, req, &rv)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	if (strcmp(rv.type, type) != 0)
		return 0;
	/* Where the consumer is: its node, or its first assignment's. */
	if (node[0] != '\0')
		snprintf(where, sizeof(where), "%s", node);
	else {
		/* The first assignment that installs the requirement's part. */
		if ((rc = tl_graph_req_nodes(c->t, &c->p, module, req,
		    &nl)) != 0)
			return rc;
		if (nl.n > 0)
			snprintf(where, sizeof(where), "%s", nl.v[0]);
		tl_nodelist_free(&nl);
		if (where[0] == '\0')
			return 0;
	}

	if (rv.provider[0] != '\0') {
		if (provider_fits(c, rv.provider, rv.type, rv.target, NULL) &&
		    tl_exposure_serves(c->t, &c->p, rv.provider, module, node,
		    NULL))
			return bind(c, gkey, module, req, node, &rv,
			    rv.provider, TL_BIND_EXPLICIT_MANIFEST);
		return 0;	/* waits for the named provider, visibly */
	}

	if ((rc = tl_key(k, "pt/%s/", rv.type)) != 0 ||
	    (rc = tl_rec_scan(c->t, c->p.graph, k, keylist_add, &all)) != 0)
		goto out;
	for (i = 0; i < all.n; i++) {
		char pnode[64] = "";

		if (!provider_fits(c, all.v[i], rv.type, rv.target, pnode) ||
		    !tl_exposure_serves(c->t, &c->p, all.v[i], module, node,
		    NULL))
			continue;
		if ((rc = keylist_add(all.v[i], NULL, 0, &cand)) != 0)
			goto out;
		if (strcmp(pnode, where) == 0 && colocated == SIZE_MAX)
			colocated = cand.n - 1;
	}
	if (colocated != SIZE_MAX) {
		char id[TL_KEY_MAX];

		snprintf(id, sizeof(id), "%s", cand.v[colocated]);
		rc = bind(c, gkey, module, req, node, &rv, id, TL_BIND_COLOCATED);
	} else if (cand.n == 1) {
		rc = bind(c, gkey, module, req, node, &rv, cand.v[0],
		    TL_BIND_ONLY_CANDIDATE);
	} else if (cand.n > 1 && !same_ambiguity(c, gkey, &cand)) {
		struct tl_body b;
		char stream[TL_KEY_MAX];

		if ((rc = tl_key(stream, "binding/%s", gkey)) != 0)
			goto out;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, gkey);
		tl_body_str(&b, TL_F_MODULE, module);
		tl_body_str(&b, TL_F_REQ, req);
		tl_body_str(&b, TL_F_NODE, node);
		tl_body_str(&b, TL_F_TYPE, rv.type);
		tl_body_str(&b, TL_F_STATE, "ambiguous");
		tl_body_arr(&b, TL_F_CANDIDATES);
		for (i = 0; i < cand.n; i++)
			tl_body_str(&b, NULL, cand.v[i]);
		tl_body_end(&b);
		rc = tl_emit(c, TL_EV_BINDING_AMBIGUOUS, stream, &b, NULL);
		tl_body_free(&b);
	}
out:
	free(all.v);
	free(cand.v);
	return rc;
}

int
tl_binder_run(struct tl_ctx *c, const char *type)
{
	struct keylist kl = { NULL, 0, 0 };
	char pfx[TL_KEY_MAX];
	size_t i;
	int rc;

	if ((rc = tl_key(pfx, type ? "w/%s/" : "w/", type ? type : "")) != 0)
		return rc;
	/* Collect first: binding changes the keys being scanned. */
	if ((rc = tl_rec_scan(c->t, c->p.graph, pfx, keylist_add, &kl)) != 0)
		goto out;
	for (i = 0; i < kl.n; i++) {
		char t[64];
		const char *gkey;

		if (type != NULL) {
			snprintf(t, sizeof(t), "%s", type);
			gkey = kl.v[i];
		} else {
			const char *slash = strchr(kl.v[i], '/');

			if (slash == NULL || (size_t)(slash - kl.v[i]) >=
			    sizeof(t)) {
				rc = TL_ECORRUPT;
				break;
			}
			memcpy(t, kl.v[i], (size_t)(slash - kl.v[i]));
			t[slash - kl.v[i]] = '\0';
			gkey = slash + 1;
		}
		if ((rc = decide_one(c, t, gkey)) != 0)
			break;
	}
out:
	free(kl.v);
	return rc;
}

/* The waits of keys "w/TYPE/..." under pfx, decided in turn. */
static int
run_prefix(struct tl_ctx *c, const char *type, const char *pfx)
{
	struct keylist kl = { NULL, 0, 0 };
	size_t i;
	int rc;

	/* Collect first: binding changes the keys being scanned. */
	if ((rc = tl_rec_scan(c->t, c->p.graph, pfx, keylist_add, &kl)) != 0)
		goto out;
	for (i = 0; rc == 0 && i < kl.n; i++) {
		char gkey[TL_KEY_MAX];

		/* rest is MODULE/REQ[@NODE] past "w/TYPE/": prefix it back. */
		snprintf(gkey, sizeof(gkey), "%s%s", pfx + strlen(type) + 3,
		    kl.v[i]);
		rc = decide_one(c, type, gkey);
	}
out:
	free(kl.v);
	return rc;
}

int
tl_binder_run_module(struct tl_ctx *c, const char *module)
{
	struct keylist reqs = { NULL, 0, 0 };
	struct tl_rec m;
	struct tl_bnode prov;
	char k[TL_KEY_MAX], type[64];
	size_t i;
	int rc;

	/* What it provides may serve any instance waiting for that type. */
	if ((rc = tl_key(k, "m/%s", module)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &m) == 0) {
		struct keylist types = { NULL, 0, 0 };

		rc = 0;
		if (tl_bn_get(m.m, "provides", &prov) == 0)
			for (i = 0; rc == 0 && i < tl_bn_len(prov); i++) {
				type[0] = '\0';
				tl_bn_getstr(tl_bn_at(prov, i), "type", type,
				    sizeof(type));
				if (type[0] != '\0')
					rc = keylist_add(type, NULL, 0, &types);
			}
		tl_rec_close(&m);
		for (i = 0; rc == 0 && i < types.n; i++)
			rc = tl_binder_run(c, types.v[i]);
		free(types.v);
		if (rc != 0)
			return rc;
	}
	/* Its own instances, whatever type each waits for. */
	if ((rc = tl_key(k, "r/%s/", module)) != 0 ||
	    (rc = tl_rec_scan(c->t, c->p.graph, k, keylist_add, &reqs)) != 0)
		goto out;
	for (i = 0; rc == 0 && i < reqs.n; i++) {
		struct reqview rv;
		char pfx[TL_KEY_MAX];

		if (load_req(c, module, reqs.v[i], &rv) != 0 ||
		    strcmp(rv.kind, "instantiation") != 0 || rv.type[0] == '\0')
			continue;
		if ((rc = tl_key(pfx, "w/%s/%s/%s", rv.type, module,
		    reqs.v[i])) != 0)
			break;
		rc = run_prefix(c, rv.type, pfx);
	}
out:
	free(reqs.v);
	return rc;
}

int
tl_dec_bind(struct tl_ctx *c, const char *gkey, const char *provider)
{
	struct reqview rv;
	struct tl_grant g;
	char module[64], req[64], node[64];
	struct tl_rec b;
	char k[TL_KEY_MAX];
	int rc;

	if (split_grant(gkey, module, req, node) != 0)
		return tl_refuse(c, TL_EINVAL, "%s: expected MODULE/REQUIREMENT"
		    " (or MODULE/REQUIREMENT@NODE for a per-instance one)",
		    gkey);
	if ((rc = load_req(c, module, req, &rv)) == TL_ENOTFOUND)
		return tl_refuse(c, TL_ENOTFOUND, "module %s has no "
		    "requirement %s", module, req);
	if (rc != 0)
		return rc;
	if (strcmp(rv.kind, "instantiation") != 0)
		return tl_refuse(c, TL_EREFUSED, "%s/%s is a presence "
		    "requirement: nothing is bound or granted for it", module,
		    req);
	if (strcmp(rv.scope, "per-instance") == 0 && node[0] == '\0')
		return tl_refuse(c, TL_EINVAL, "%s/%s is per-instance: name "
		    "the instance as %s/%s@NODE", module, req, module, req);
	if (strcmp(rv.scope, "per-instance") != 0 && node[0] != '\0')
		return tl_refuse(c, TL_EINVAL, "%s/%s is shared: bind it as "
		    "%s/%s", module, req, module, req);
	if (node[0] != '\0') {
		if ((rc = tl_key(k, "a/%s@%s", module, node)) != 0)
			return rc;
		if (!tl_rec_exists(c->t, c->p.graph, k))
			return tl_refuse(c, TL_ENOTFOUND, "%s is not assigned "
			    "to %s", module, node);
	}
	if ((rc = tl_key(k, "p/%s", provider)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "no provider %s (providers "
		    "are named NODE/MODULE)", provider);
	if (!provider_fits(c, provider, rv.type, rv.target, NULL))
		return tl_refuse(c, TL_EREFUSED, "provider %s does not grant "
		    "%s from %s", provider, rv.type, rv.target);
	{
		char why[TL_WHY_MAX];

		if (!tl_exposure_serves(c->t, &c->p, provider, module, node,
		    why))
			return tl_refuse(c, TL_EREFUSED, "%s cannot be bound "
			    "to %s: %s", gkey, provider, why);
	}

	rc = tl_grant_get(c->t, &c->p, gkey, &g, NULL);
	if (rc == 0 && strcmp(g.state, TL_GRANT_REQUESTED) != 0 &&
	    strcmp(g.provider, provider) != 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is %s on %s: "
		    "changing its binding moves data, which is a migration: "
		    "tally rebind %s %s --migrate", gkey, g.state, g.provider,
		    gkey, provider);
	if (rc != 0 && rc != TL_ENOTFOUND)
		return rc;
	if ((rc = tl_key(k, "b/%s", gkey)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &b) == 0) {
		char state[16] = "", prov[130] = "";

		tl_bn_getstr(b.m, "state", state, sizeof(state));
		tl_bn_getstr(b.m, "provider", prov, sizeof(prov));
		tl_rec_close(&b);
		if (strcmp(state, "bound") == 0 && strcmp(prov, provider) == 0)
			return 0;	/* already so: nothing to record */
	}
	return bind(c, gkey, module, req, node, &rv, provider,
	    TL_BIND_EXPLICIT_OPERATOR);
}
