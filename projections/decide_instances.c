/*
 * decide_instances.c - how many instances of a module the mesh runs
 * (a manifest's instances:, recorded in module.declared).
 *
 * What a module is does not say how many of it should exist (the
 * registry is one thing, a database server one per node), so it is declared,
 * and every path that makes an assignment (assign, provider move) and
 * every declaration that changes it (apply) is checked here, in the
 * write transaction, against the graph as it is.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "ctx.h"
#include "decide_instances.h"
#include "graph.h"

/* The instances: of a module record: "any" when absent. */
static void
instances_of(struct tl_bnode m, char out[16])
{
	out[0] = '\0';
	tl_bn_getstr(m, "instances", out, 16);
	if (out[0] == '\0')
		snprintf(out, 16, "any");
}

/* A type both module records provide, into type; 0 when none. */
static int
shared_type(struct tl_bnode a, struct tl_bnode b, char type[64])
{
	struct tl_bnode pa, pb;
	size_t i, j;

	if (tl_bn_get(a, "provides", &pa) != 0 ||
	    tl_bn_get(b, "provides", &pb) != 0)
		return 0;
	for (i = 0; i < tl_bn_len(pa); i++) {
		char ta[64] = "";

		tl_bn_getstr(tl_bn_at(pa, i), "type", ta, sizeof(ta));
		for (j = 0; j < tl_bn_len(pb); j++) {
			char tb[64] = "";

			tl_bn_getstr(tl_bn_at(pb, j), "type", tb, sizeof(tb));
			if (ta[0] != '\0' && strcmp(ta, tb) == 0) {
				snprintf(type, 64, "%s", ta);
				return 1;
			}
		}
	}
	return 0;
}

struct beside {
	struct tl_ctx	*c;
	const char	*module;
	struct tl_bnode	 m;
	const char	*inst;
	const char	*node;
	int		 rc;
};

/* One module already on the node: is it the same kind, one-per-node? */
static int
one_beside(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct beside *bs = arg;
	struct tl_rec o;
	char k[TL_KEY_MAX], oinst[16], type[64];
	int rc;

	(void)val;
	(void)vlen;
	if (strcmp(rest, bs->module) == 0)
		return 0;
	if ((rc = tl_key(k, "m/%s", rest)) != 0)
		return rc;
	if (tl_rec_get(bs->c->t, bs->c->p.graph, k, &o) != 0)
		return 0;
	instances_of(o.m, oinst);
	rc = 0;
	if ((strcmp(bs->inst, "one-per-node") == 0 ||
	    strcmp(oinst, "one-per-node") == 0) &&
	    shared_type(bs->m, o.m, type)) {
		if (strcmp(bs->inst, "one-per-node") == 0)
			rc = tl_refuse(bs->c, TL_EREFUSED, "%s is declared "
			    "instances: one-per-node and %s already has one: "
			    "%s@%s provides %s too", bs->module, bs->node,
			    rest, bs->node, type);
		else
			rc = tl_refuse(bs->c, TL_EREFUSED, "%s on %s is "
			    "declared instances: one-per-node and provides "
			    "%s, which %s provides too: %s already has one",
			    rest, bs->node, type, bs->module, bs->node);
	}
	tl_rec_close(&o);
	return rc;
}

/* module (record m) on node beside what the node runs already. */
static int
check_node(struct tl_ctx *c, const char *module, struct tl_bnode m,
    const char *node)
{
	struct beside bs = { c, module, m, NULL, node, 0 };
	struct tl_bnode pr;
	char inst[16];
	char k[TL_KEY_MAX];
	int rc;

	/*
	 * Only two modules that provide one type can be in each other's
	 * way: a module that provides nothing (most of them: consumers) is
	 * not compared with every module on the node, which made each
	 * assign cost O(modules on the node).
	 */
	if (tl_bn_get(m, "provides", &pr) != 0 || tl_bn_len(pr) == 0)
		return 0;
	instances_of(m, inst);
	bs.inst = inst;
	if ((rc = tl_key(k, "an/%s/", node)) != 0)
		return rc;
	return tl_rec_scan(c->t, c->p.graph, k, one_beside, &bs);
}

int
tl_dec_instances_check(struct tl_ctx *c, const char *module,
    const char *node, const char *leaving)
{
	struct tl_nodelist nl;
	struct tl_rec m;
	char k[TL_KEY_MAX], inst[16];
	size_t i;
	int rc;

	if ((rc = tl_key(k, "m/%s", module)) != 0)
		return rc;
	if ((rc = tl_rec_get(c->t, c->p.graph, k, &m)) != 0)
		return rc;
	instances_of(m.m, inst);
	if (strcmp(inst, "one-per-mesh") == 0) {
		if ((rc = tl_graph_module_nodes(c->t, &c->p, module,
		    &nl)) != 0)
			goto out;
		for (i = 0; i < nl.n; i++) {
			if (strcmp(nl.v[i], node) == 0 || (leaving != NULL &&
			    strcmp(nl.v[i], leaving) == 0))
				continue;
			rc = tl_refuse(c, TL_EREFUSED, "%s is declared "
			    "instances: one-per-mesh and already runs on %s "
			    "(%s@%s): a second assignment is refused (tally "
			    "provider move or tally unassign it first)",
			    module, nl.v[i], module, nl.v[i]);
			break;
		}
		tl_nodelist_free(&nl);
		if (rc != 0)
			goto out;
	}
	rc = check_node(c, module, m.m, node);
out:
	tl_rec_close(&m);
	return rc;
}

int
tl_dec_instances_declared(struct tl_ctx *c, const char *module,
    const void *body, size_t len)
{
	struct tl_nodelist nl;
	struct tl_bview v;
	char inst[16];
	size_t i;
	int rc;

	if ((rc = tl_bview_open(&v, body, len)) != 0)
		return rc;
	instances_of(v.root, inst);
	if ((rc = tl_graph_module_nodes(c->t, &c->p, module, &nl)) != 0)
		goto out;
	if (strcmp(inst, "one-per-mesh") == 0 && nl.n > 1)
		rc = tl_refuse(c, TL_EREFUSED, "%s: instances: one-per-mesh, "
		    "but it runs on %s and %s already (%zu assignments): "
		    "unassign all but one first", module, nl.v[0], nl.v[1],
		    nl.n);
	for (i = 0; rc == 0 && i < nl.n; i++)
		rc = check_node(c, module, v.root, nl.v[i]);
	tl_nodelist_free(&nl);
out:
	tl_bview_close(&v);
	return rc;
}
