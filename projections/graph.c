/*
 * graph.c - the graph fold: nodes, modules, requirements, assignments,
 * providers, bindings, and which requirement instances wait for one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/vec.h"
#include "events.h"
#include "grant.h"
#include "graph.h"
#include "rotation.h"

int
tl_grant_key(char *buf, const char *module, const char *req, const char *node)
{
	if (node != NULL && *node != '\0')
		return tl_key(buf, "%s/%s@%s", module, req, node);
	return tl_key(buf, "%s/%s", module, req);
}

static int
put_body(struct tl_txn *t, tl_kv kv, const char *key,
    const struct tl_event *ev)
{
	return tl_rec_put(t, kv, key, ev->seq, ev->body, ev->body_len);
}

static int
del(struct tl_txn *t, tl_kv kv, const char *key)
{
	return tl_kv_del(t, kv, key, strlen(key));
}

static int
mark(struct tl_txn *t, tl_kv kv, const char *key)
{
	return tl_kv_put(t, kv, key, strlen(key), "", 0);
}

/* Requirement fields the fold needs, copied out of a record. */
struct reqinfo {
	char	kind[16];
	char	type[64];
	char	scope[16];
	char	target[64];
	char	resource[64];
	char	part[64];	/* "" for a requirement of every part */
};

static int
req_info(struct tl_bnode m, struct reqinfo *ri)
{
	/* In the order tally apply writes them. */
	static const char *const keys[] = {
		"kind", "target", "type", "scope", "resource", "part"
	};
	struct tl_bnode v[6];

	memset(ri, 0, sizeof(*ri));
	if (tl_bn_pick(m, keys, 6, v) != 0)
		return 0;
	tl_bn_strcpy(v[0], ri->kind, sizeof(ri->kind));
	tl_bn_strcpy(v[1], ri->target, sizeof(ri->target));
	tl_bn_strcpy(v[2], ri->type, sizeof(ri->type));
	tl_bn_strcpy(v[3], ri->scope, sizeof(ri->scope));
	tl_bn_strcpy(v[4], ri->resource, sizeof(ri->resource));
	tl_bn_strcpy(v[5], ri->part, sizeof(ri->part));
	return strcmp(ri->kind, "instantiation") == 0;
}

/* Sets or clears the waiting mark of one requirement instance. */
static int
wait_sync(struct tl_txn *t, const struct tl_proj *p, const char *type,
    const char *gkey)
{
	char bk[TL_KEY_MAX];
	char wk[TL_KEY_MAX];
	int rc;

	struct tl_rec b;
	char state[16] = "";

	if ((rc = tl_key(bk, "b/%s", gkey)) != 0 ||
	    (rc = tl_key(wk, "w/%s/%s", type, gkey)) != 0)
		return rc;
	if ((rc = tl_rec_get(t, p->graph, bk, &b)) == 0) {
		tl_bn_getstr(b.m, "state", state, sizeof(state));
		tl_rec_close(&b);
	} else if (rc != TL_ENOTFOUND)
		return rc;
	if (strcmp(state, "bound") == 0)
		return del(t, p->graph, wk);
	return mark(t, p->graph, wk);
}

int
tl_provider_id(char *buf, const char *node, const char *module)
{
	return tl_key(buf, "%s/%s", node, module);
}

void
tl_nodelist_free(struct tl_nodelist *nl)
{
	free(nl->v);
	nl->v = NULL;
	nl->n = nl->cap = 0;
}

static int
nodelist_add(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct tl_nodelist *nl = arg;

	(void)rest;
	if (vlen >= 64)
		return TL_ECORRUPT;
	if (tl_vec_grow(&nl->v, &nl->cap, nl->n + 1, sizeof(nl->v[0])) != 0)
		return ENOMEM;
	memcpy(nl->v[nl->n], val, vlen);
	nl->v[nl->n][vlen] = '\0';
	nl->n++;
	return 0;
}

int
tl_graph_module_nodes(struct tl_txn *t, const struct tl_proj *p,
    const char *module, struct tl_nodelist *nl)
{
	char pfx[TL_KEY_MAX];
	int rc;

	memset(nl, 0, sizeof(*nl));
	if ((rc = tl_key(pfx, "ao/%s/", module)) != 0)
		return rc;
	if ((rc = tl_rec_scan(t, p->graph, pfx, nodelist_add, nl)) != 0)
		tl_nodelist_free(nl);
	return rc;
}

int
tl_graph_installs(struct tl_txn *t, const struct tl_proj *p,
    const char *module, const char *node, const char *part)
{
	struct tl_rec a;
	struct tl_bnode parts;
	char k[TL_KEY_MAX], name[64];
	size_t i;
	int yes = 1;

	if (tl_key(k, "a/%s@%s", module, node) != 0 ||
	    tl_rec_get(t, p->graph, k, &a) != 0)
		return 0;
	if (part != NULL && part[0] != '\0' &&
	    tl_bn_get(a.m, "parts", &parts) == 0) {
		yes = 0;
		for (i = 0; !yes && i < tl_bn_len(parts); i++) {
			name[0] = '\0';
			tl_bn_strcpy(tl_bn_at(parts, i), name, sizeof(name));
			yes = strcmp(name, part) == 0;
		}
	}
	tl_rec_close(&a);
	return yes;
}

int
tl_graph_req_part(struct tl_txn *t, const struct tl_proj *p,
    const char *module, const char *req, char part[64])
{
	struct tl_rec r;
	char k[TL_KEY_MAX];
	int rc;

	part[0] = '\0';
	if ((rc = tl_key(k, "r/%s/%s", module, req)) != 0)
		return rc;
	if ((rc = tl_rec_get(t, p->graph, k, &r)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	tl_bn_getstr(r.m, "part", part, 64);
	tl_rec_close(&r);
	return 0;
}

/* Keeps the nodes of nl that install part, in order. */
static void
keep_installing(struct tl_txn *t, const struct tl_proj *p,
    const char *module, const char *part, struct tl_nodelist *nl)
{
	size_t i, j;

	if (part[0] == '\0')
		return;
	for (i = j = 0; i < nl->n; i++)
		if (tl_graph_installs(t, p, module, nl->v[i], part))
			memmove(nl->v[j++], nl->v[i], 64);
	nl->n = j;
}

int
tl_graph_req_nodes(struct tl_txn *t, const struct tl_proj *p,
    const char *module, const char *req, struct tl_nodelist *nl)
{
	char part[64];
	int rc;

	memset(nl, 0, sizeof(*nl));
	if ((rc = tl_graph_req_part(t, p, module, req, part)) != 0 ||
	    (rc = tl_graph_module_nodes(t, p, module, nl)) != 0)
		return rc;
	keep_installing(t, p, module, part, nl);
	return 0;
}

/*
 * Recomputes (or with clear, removes) the waiting marks of every
 * instance of requirement req of module: one for a shared requirement
 * once the module has an assignment, one per assignment otherwise.
 */
static int
req_waits(struct tl_txn *t, const struct tl_proj *p, const char *module,
    const char *req, const struct reqinfo *ri, int clear)
{
	struct tl_nodelist nl;
	char g[TL_KEY_MAX];
	char wk[TL_KEY_MAX];
	size_t i;
	int rc;

	if ((rc = tl_graph_module_nodes(t, p, module, &nl)) != 0)
		return rc;
	/* A part's requirement waits only where the part is installed. */
	if (!clear && strcmp(ri->scope, "per-instance") == 0 &&
	    ri->part[0] != '\0') {
		for (i = 0; rc == 0 && i < nl.n; i++)
			if (!tl_graph_installs(t, p, module, nl.v[i], ri->part) &&
			    (rc = tl_grant_key(g, module, req, nl.v[i])) == 0 &&
			    (rc = tl_key(wk, "w/%s/%s", ri->type, g)) == 0)
				rc = del(t, p->graph, wk);
		if (rc != 0)
			goto out;
	}
	keep_installing(t, p, module, ri->part, &nl);
	if (strcmp(ri->scope, "per-instance") == 0) {
		for (i = 0; rc == 0 && i < nl.n; i++) {
			if ((rc = tl_grant_key(g, module, req, nl.v[i])) != 0)
				break;
			if (clear) {
				if ((rc = tl_key(wk, "w/%s/%s", ri->type,
				    g)) == 0)
					rc = del(t, p->graph, wk);
			} else
				rc = wait_sync(t, p, ri->type, g);
		}
	} else if ((rc = tl_grant_key(g, module, req, NULL)) == 0 &&
	    (rc = tl_key(wk, "w/%s/%s", ri->type, g)) == 0) {
		/* A shared requirement waits only once there is a consumer. */
		if (clear || nl.n == 0)
			rc = del(t, p->graph, wk);
		else
			rc = wait_sync(t, p, ri->type, g);
	}
out:
	tl_nodelist_free(&nl);
	return rc;
}

struct req_each {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	const char		*module;
	const char		*node;		/* the assignment's node */
	int			 gone;		/* it was just removed */
	int			 left;		/* assignments remaining */
};

/*
 * The marks of one requirement after module's assignment on node came
 * or went.  Only that instance (per-instance) or the module's shared
 * instance can change: every other mark is kept current by the events
 * that concern it (requirement, binding, its own assignment), so it is
 * not recomputed here.
 */
static int
req_rewait(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct req_each *re = arg;
	struct reqinfo ri;
	struct tl_rec r;
	char g[TL_KEY_MAX];
	char wk[TL_KEY_MAX];
	int rc, inst, per;

	if ((rc = tl_rec_open(val, vlen, &r)) != 0)
		return rc;
	inst = req_info(r.m, &ri);
	tl_rec_close(&r);
	if (!inst)
		return 0;
	per = strcmp(ri.scope, "per-instance") == 0;
	if ((rc = tl_grant_key(g, re->module, rest, per ? re->node :
	    NULL)) != 0 || (rc = tl_key(wk, "w/%s/%s", ri.type, g)) != 0)
		return rc;
	if (per) {
		/* Gone, or no longer installing the part that needs it. */
		if (re->gone || !tl_graph_installs(re->t, re->p, re->module,
		    re->node, ri.part))
			return del(re->t, re->p->graph, wk);
		return wait_sync(re->t, re->p, ri.type, g);
	}
	/* A shared requirement waits only while one of its consumers is. */
	if (ri.part[0] == '\0') {
		if (!re->gone || re->left)
			return re->gone ? 0 : wait_sync(re->t, re->p, ri.type, g);
		return del(re->t, re->p->graph, wk);
	}
	{
		struct tl_nodelist nl;
		size_t n;

		if ((rc = tl_graph_module_nodes(re->t, re->p, re->module,
		    &nl)) != 0)
			return rc;
		keep_installing(re->t, re->p, re->module, ri.part, &nl);
		n = nl.n;
		tl_nodelist_free(&nl);
		if (n == 0)
			return del(re->t, re->p->graph, wk);
		return wait_sync(re->t, re->p, ri.type, g);
	}
}

static int
any_key(const char *rest, const void *val, size_t vlen, void *arg)
{
	(void)rest;
	(void)val;
	(void)vlen;
	*(int *)arg = 1;
	return 1;
}

static int
module_rewait(struct tl_txn *t, const struct tl_proj *p, const char *module,
    const char *node, int gone)
{
	struct req_each re = { t, p, module, node, gone, 1 };
	char pfx[TL_KEY_MAX];
	int rc;

	if (gone) {
		re.left = 0;
		if ((rc = tl_key(pfx, "ao/%s/", module)) != 0 ||
		    (rc = tl_rec_scan(t, p->graph, pfx, any_key,
		    &re.left)) < 0)
			return rc;
	}
	if ((rc = tl_key(pfx, "r/%s/", module)) != 0)
		return rc;
	return tl_rec_scan(t, p->graph, pfx, req_rewait, &re);
}

static int
fold_requirement(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body, int withdrawn)
{
	char module[64], name[64];
	struct reqinfo ri;
	struct tl_rec old;
	char rk[TL_KEY_MAX];
	char ck[TL_KEY_MAX];
	int rc;

	if (tl_bn_getstr(body, "module", module, sizeof(module)) != 0 ||
	    tl_bn_getstr(body, "name", name, sizeof(name)) != 0)
		return TL_EMALFORMED;
	if ((rc = tl_key(rk, "r/%s/%s", module, name)) != 0)
		return rc;
	rc = tl_rec_get(t, p->graph, rk, &old);
	if (rc == 0) {
		int inst = req_info(old.m, &ri);

		tl_rec_close(&old);
		if (inst) {
			if ((rc = tl_key(ck, "rn/%s/%s/%s", ri.target, ri.type,
			    ri.resource)) != 0 ||
			    (rc = del(t, p->graph, ck)) != 0 ||
			    (rc = req_waits(t, p, module, name, &ri, 1)) != 0)
				return rc;
		}
	} else if (rc != TL_ENOTFOUND)
		return rc;
	if (withdrawn)
		return del(t, p->graph, rk);

	if ((rc = put_body(t, p->graph, rk, ev)) != 0)
		return rc;
	if (!req_info(body, &ri))
		return 0;
	if ((rc = tl_key(ck, "rn/%s/%s/%s", ri.target, ri.type,
	    ri.resource)) != 0 ||
	    (rc = tl_kv_put(t, p->graph, ck, strlen(ck), module,
	    strlen(module))) != 0)
		return rc;
	return req_waits(t, p, module, name, &ri, 0);
}

struct find_node {
	const char	*node;
	char		 key[TL_KEY_MAX];
};

static int
find_order(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct find_node *fn = arg;

	if (vlen == strlen(fn->node) && memcmp(val, fn->node, vlen) == 0) {
		snprintf(fn->key, sizeof(fn->key), "%s", rest);
		return 1;
	}
	return 0;
}

static void
be64put(char out[17], uint64_t v)
{
	/* Hex keeps order keys printable and sortable. */
	snprintf(out, 17, "%016llx", (unsigned long long)v);
}

static int
fold_assignment(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	char module[64], node[64], ord[17];
	char ak[TL_KEY_MAX];
	char k[TL_KEY_MAX];
	int rc;

	if (tl_bn_getstr(body, "module", module, sizeof(module)) != 0 ||
	    tl_bn_getstr(body, "node", node, sizeof(node)) != 0)
		return TL_EMALFORMED;
	if ((rc = tl_key(ak, "a/%s@%s", module, node)) != 0)
		return rc;

	if (strcmp(ev->type, TL_EV_ASSIGN_CREATED) == 0) {
		be64put(ord, ev->seq);
		if ((rc = put_body(t, p->graph, ak, ev)) != 0 ||
		    (rc = tl_key(k, "ao/%s/%s", module, ord)) != 0 ||
		    (rc = tl_kv_put(t, p->graph, k, strlen(k), node,
		    strlen(node))) != 0 ||
		    (rc = tl_key(k, "an/%s/%s", node, module)) != 0 ||
		    (rc = mark(t, p->graph, k)) != 0)
			return rc;
		return module_rewait(t, p, module, node, 0);
	}
	if (strcmp(ev->type, TL_EV_ASSIGN_DERIVED) == 0) {
		/* ad/MODULE@NODE: what was composed, for tally explain. */
		if ((rc = tl_key(k, "ad/%s@%s", module, node)) != 0)
			return rc;
		return put_body(t, p->graph, k, ev);
	}
	if (strcmp(ev->type, TL_EV_ASSIGN_CONFIGURED) == 0) {
		/* Its parts may have changed: so may what waits for it. */
		if ((rc = put_body(t, p->graph, ak, ev)) != 0)
			return rc;
		return module_rewait(t, p, module, node, 0);
	}
	if (strcmp(ev->type, TL_EV_ASSIGN_REMOVED) == 0) {
		struct find_node fn = { node, "" };

		if ((rc = del(t, p->graph, ak)) != 0 ||
		    (rc = tl_key(k, "an/%s/%s", node, module)) != 0 ||
		    (rc = del(t, p->graph, k)) != 0 ||
		    (rc = tl_key(k, "ao/%s/", module)) != 0)
			return rc;
		rc = tl_rec_scan(t, p->graph, k, find_order, &fn);
		if (rc < 0)
			return rc;
		if (fn.key[0] != '\0') {
			if ((rc = tl_key(k, "ao/%s/%s", module, fn.key)) != 0 ||
			    (rc = del(t, p->graph, k)) != 0)
				return rc;
		}
		if ((rc = tl_key(k, "ar/%s@%s", module, node)) != 0 ||
		    (rc = del(t, p->graph, k)) != 0 ||
		    (rc = tl_key(k, "ad/%s@%s", module, node)) != 0 ||
		    (rc = del(t, p->graph, k)) != 0)
			return rc;
		return module_rewait(t, p, module, node, 1);
	}
	return 0;
}

/* Removes the type index entries of provider id's current record. */
static int
provider_unindex(struct tl_txn *t, const struct tl_proj *p, const char *id)
{
	struct tl_rec r;
	struct tl_bnode types;
	char module[64], (*tv)[64] = NULL;
	char k[TL_KEY_MAX];
	size_t i, n = 0;
	int rc;

	if ((rc = tl_key(k, "p/%s", id)) != 0)
		return rc;
	if ((rc = tl_rec_get(t, p->graph, k, &r)) == TL_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	/*
	 * The record points into the map: a write may move or reuse its
	 * page, so every type is copied out before the first delete.
	 */
	tl_bn_getstr(r.m, "module", module, sizeof(module));
	if (tl_bn_get(r.m, "types", &types) == 0 &&
	    (n = tl_bn_len(types)) > 0 &&
	    (tv = calloc(n, sizeof(*tv))) == NULL)
		rc = ENOMEM;
	for (i = 0; rc == 0 && tv != NULL && i < n; i++)
		tl_bn_getstr(tl_bn_at(types, i), "type", tv[i], sizeof(tv[i]));
	tl_rec_close(&r);
	for (i = 0; rc == 0 && tv != NULL && i < n; i++)
		if (tv[i][0] != '\0' &&
		    (rc = tl_key(k, "pt/%s/%s", tv[i], id)) == 0)
			rc = del(t, p->graph, k);
	free(tv);
	if (rc == 0 && (rc = tl_key(k, "pm/%s/%s", module, id)) == 0)
		rc = del(t, p->graph, k);
	return rc;
}

static int
fold_provider(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	struct tl_bnode types;
	char id[130], module[64];
	char k[TL_KEY_MAX];
	size_t i;
	int rc;

	if (tl_bn_getstr(body, "id", id, sizeof(id)) != 0)
		return TL_EMALFORMED;
	if (strcmp(ev->type, TL_EV_PROVIDER_REGISTERED) == 0) {
		if (tl_bn_getstr(body, "module", module, sizeof(module)) != 0 ||
		    tl_bn_get(body, "types", &types) != 0)
			return TL_EMALFORMED;
		if ((rc = provider_unindex(t, p, id)) != 0 ||
		    (rc = tl_key(k, "p/%s", id)) != 0 ||
		    (rc = put_body(t, p->graph, k, ev)) != 0 ||
		    (rc = tl_key(k, "pm/%s/%s", module, id)) != 0 ||
		    (rc = mark(t, p->graph, k)) != 0)
			return rc;
		for (i = 0; i < tl_bn_len(types); i++) {
			char type[64];

			if (tl_bn_getstr(tl_bn_at(types, i), "type", type,
			    sizeof(type)) != 0)
				return TL_EMALFORMED;
			if ((rc = tl_key(k, "pt/%s/%s", type, id)) != 0 ||
			    (rc = mark(t, p->graph, k)) != 0)
				return rc;
		}
		return 0;
	}
	if (strcmp(ev->type, TL_EV_PROVIDER_UNREACHABLE) == 0) {
		if ((rc = tl_key(k, "pu/%s", id)) != 0)
			return rc;
		return put_body(t, p->graph, k, ev);
	}
	if (strcmp(ev->type, TL_EV_PROVIDER_RECOVERED) == 0) {
		if ((rc = tl_key(k, "pu/%s", id)) != 0)
			return rc;
		return del(t, p->graph, k);
	}
	if (strcmp(ev->type, TL_EV_PROVIDER_RETIRED) == 0) {
		if ((rc = provider_unindex(t, p, id)) != 0 ||
		    (rc = tl_key(k, "p/%s", id)) != 0)
			return rc;
		return del(t, p->graph, k);
	}
	return 0;
}

static int
fold_binding(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	char grant[TL_KEY_MAX], type[64], state[16] = "";
	char k[TL_KEY_MAX];
	int rc;

	if (tl_bn_getstr(body, "grant", grant, sizeof(grant)) != 0 ||
	    tl_bn_getstr(body, "type", type, sizeof(type)) != 0)
		return TL_EMALFORMED;
	if (tl_bn_getstr(body, "state", state, sizeof(state)) == TL_ETOOBIG)
		return TL_ETOOBIG;	/* never cut or emptied */
	if ((rc = tl_key(k, "b/%s", grant)) != 0 ||
	    (rc = put_body(t, p->graph, k, ev)) != 0)
		return rc;
	/* As wait_sync() would find it, without reading it back. */
	if ((rc = tl_key(k, "w/%s/%s", type, grant)) != 0)
		return rc;
	if (strcmp(state, "bound") == 0)
		return del(t, p->graph, k);
	return mark(t, p->graph, k);
}

/* nk/NAME: the node's signing public key (32 bytes), when it has one. */
static int
fold_signkey(struct tl_txn *t, const struct tl_proj *p, const char *name,
    struct tl_bnode body)
{
	struct tl_bnode n;
	const void *pk;
	size_t len;
	char k[TL_KEY_MAX];
	int rc;

	if (tl_bn_get(body, "signkey", &n) != 0)
		return 0;
	if (tl_bn_bin(n, &pk, &len) != 0 || len != 32)
		return TL_EMALFORMED;
	if ((rc = tl_key(k, "nk/%s", name)) != 0)
		return rc;
	return tl_kv_put(t, p->graph, k, strlen(k), pk, len);
}

/*
 * ad: u64be, the latest offer (credential.ack-offered,
 * node.report-offered) the ack pass decided, from the cause of its
 * decisions (actor node:NODE).  The pass decides offers in log order,
 * so every offer up to it was decided, on whichever machine.
 */
#define ACKS_DECIDED_KEY	"ad"

static int
fold_decided(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev)
{
	uint8_t v[8];
	uint64_t cur = 0;

	if (strncmp(ev->actor, "node:", 5) != 0 || ev->cause == 0)
		return 0;
	if (tl_graph_acks_decided(t, p, &cur) != 0 || cur >= ev->cause)
		return 0;
	tl_put_be64(v, ev->cause);
	return tl_kv_put(t, p->graph, ACKS_DECIDED_KEY,
	    strlen(ACKS_DECIDED_KEY), v, sizeof(v));
}

int
tl_graph_acks_decided(struct tl_txn *t, const struct tl_proj *p,
    uint64_t *seq)
{
	const void *v;
	size_t vl;

	*seq = 0;
	if (tl_kv_get(t, p->graph, ACKS_DECIDED_KEY, strlen(ACKS_DECIDED_KEY),
	    &v, &vl) != 0 || vl != 8)
		return 0;
	*seq = tl_get_be64(v);
	return 0;
}



int
tl_fold_graph(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	char name[64];
	char k[TL_KEY_MAX], k2[TL_KEY_MAX];
	int rc;

	if (strcmp(ev->type, TL_EV_CRED_ACKED) == 0 ||
	    strcmp(ev->type, TL_EV_ACK_REFUSED) == 0 ||
	    strcmp(ev->type, TL_EV_REPORT_REFUSED) == 0)
		return fold_decided(t, p, ev);

	if (strcmp(ev->type, TL_EV_NODE_ADDED) == 0 ||
	    strcmp(ev->type, TL_EV_NODE_REMOVED) == 0) {
		if (tl_bn_getstr(body, "name", name, sizeof(name)) != 0)
			return TL_EMALFORMED;
		if ((rc = tl_key(k, "n/%s", name)) != 0)
			return rc;
		if (ev->type[5] == 'a') {
			if ((rc = put_body(t, p->graph, k, ev)) != 0)
				return rc;
			return fold_signkey(t, p, name, body);
		}
		if ((rc = tl_key(k, "nk/%s", name)) != 0 ||
		    (rc = del(t, p->graph, k)) != 0 ||
		    (rc = tl_key(k, "ni/%s", name)) != 0 ||
		    (rc = del(t, p->graph, k)) != 0 ||
		    (rc = tl_key(k, "nr/%s", name)) != 0 ||
		    (rc = del(t, p->graph, k)) != 0 ||
		    (rc = tl_key(k, "nl/%s", name)) != 0 ||
		    (rc = del(t, p->graph, k)) != 0)
			return rc;
		if ((rc = tl_key(k, "n/%s", name)) != 0)
			return rc;
		return del(t, p->graph, k);
	}
	if (strcmp(ev->type, TL_EV_CERT_ISSUED) == 0 ||
	    strcmp(ev->type, TL_EV_CERT_REFUSED) == 0) {
		/*
		 * ci/GRANT/HOLDER: the latest certificate issued, whole;
		 * cr/GRANT/HOLDER: the latest request refused.
		 */
		char grant[TL_GRANT_ID_MAX + 1], holder[140];

		if (tl_bn_getstr(body, "grant", grant, sizeof(grant)) != 0 ||
		    tl_bn_getstr(body, "holder", holder, sizeof(holder)) != 0)
			return TL_EMALFORMED;
		if ((rc = tl_key(k, strcmp(ev->type, TL_EV_CERT_ISSUED) == 0 ?
		    "ci/%s/%s" : "cr/%s/%s", grant, holder)) != 0)
			return rc;
		return put_body(t, p->graph, k, ev);
	}
	if (strcmp(ev->type, TL_EV_NODE_INVENTORIED) == 0) {
		/* ni/NAME: the latest inventory, whole. */
		if (tl_bn_getstr(body, "node", name, sizeof(name)) != 0)
			return TL_EMALFORMED;
		if ((rc = tl_key(k, "ni/%s", name)) != 0)
			return rc;
		return put_body(t, p->graph, k, ev);
	}
	if (strcmp(ev->type, TL_EV_NODE_LOST) == 0) {
		/* nl/NAME: gone for good (tally node lost), until node rm. */
		if (tl_bn_getstr(body, "name", name, sizeof(name)) != 0)
			return TL_EMALFORMED;
		if ((rc = tl_key(k, "nl/%s", name)) != 0)
			return rc;
		return put_body(t, p->graph, k, ev);
	}
	if (strcmp(ev->type, TL_EV_NODE_REPORTED) == 0) {
		const char *rep;
		size_t rl;
		struct tl_bnode n;
		uint8_t *v;

		if (tl_bn_getstr(body, "node", name, sizeof(name)) != 0 ||
		    tl_bn_get(body, "report", &n) != 0 ||
		    tl_bn_str(n, &rep, &rl) != 0)
			return TL_EMALFORMED;
		if ((rc = tl_key(k, "nr/%s", name)) != 0)
			return rc;
		if ((v = malloc(8 + rl)) == NULL)
			return ENOMEM;
		tl_put_be64(v, ev->ts);
		memcpy(v + 8, rep, rl);
		rc = tl_kv_put(t, p->graph, k, strlen(k), v, 8 + rl);
		free(v);
		return rc == 0 ? fold_decided(t, p, ev) : rc;
	}
	if (strcmp(ev->type, TL_EV_NODE_KEY_ADDED) == 0) {
		if (tl_bn_getstr(body, "name", name, sizeof(name)) != 0)
			return TL_EMALFORMED;
		return fold_signkey(t, p, name, body);
	}
	if (strcmp(ev->type, TL_EV_MODULE_DECLARED) == 0 ||
	    strcmp(ev->type, TL_EV_MODULE_REMOVED) == 0) {
		if (tl_bn_getstr(body, "name", name, sizeof(name)) != 0)
			return TL_EMALFORMED;
		if ((rc = tl_key(k, "m/%s", name)) != 0)
			return rc;
		if (ev->type[7] == 'd')
			return put_body(t, p->graph, k, ev);
		/* Removed: a removal held for it is done. */
		if ((rc = tl_key(k2, "rh/%s", name)) != 0 ||
		    ((rc = del(t, p->graph, k2)) != 0 && rc != TL_ENOTFOUND))
			return rc;
		return del(t, p->graph, k);
	}
	/* A removal waiting for its confirmation (tally remove). */
	if (strcmp(ev->type, TL_EV_REMOVAL_HELD) == 0 ||
	    strcmp(ev->type, TL_EV_REMOVAL_CANCELLED) == 0) {
		if (tl_bn_getstr(body, "module", name, sizeof(name)) != 0)
			return TL_EMALFORMED;
		if ((rc = tl_key(k, "rh/%s", name)) != 0)
			return rc;
		if (strcmp(ev->type, TL_EV_REMOVAL_HELD) == 0)
			return put_body(t, p->graph, k, ev);
		rc = del(t, p->graph, k);
		return rc == TL_ENOTFOUND ? 0 : rc;
	}
	if (strcmp(ev->type, TL_EV_REQ_DECLARED) == 0)
		return fold_requirement(t, p, ev, body, 0);
	if (strcmp(ev->type, TL_EV_REQ_WITHDRAWN) == 0)
		return fold_requirement(t, p, ev, body, 1);
	if (strncmp(ev->type, "assignment.", 11) == 0 &&
	    strcmp(ev->type, TL_EV_ASSIGN_READY) != 0)
		return fold_assignment(t, p, ev, body);
	if (strncmp(ev->type, "provider.", 9) == 0)
		return fold_provider(t, p, ev, body);
	if (strncmp(ev->type, "binding.", 8) == 0)
		return fold_binding(t, p, ev, body);
	if (strcmp(ev->type, TL_EV_MIGRATION_STORED) == 0) {
		char sum[80];
		uint8_t v[8];
		/* Where the content is: the event itself, by checksum. */
		if (tl_bn_getstr(body, "checksum", sum, sizeof(sum)) != 0)
			return TL_EMALFORMED;
		tl_put_be64(v, ev->seq);
		if ((rc = tl_key(k, "ms/%s", sum)) != 0)
			return rc;
		return tl_kv_put(t, p->graph, k, strlen(k), v, 8);
	}
	if (strcmp(ev->type, TL_EV_ASSIGN_READY) == 0) {
		char module[64], node[64];

		if (tl_bn_getstr(body, "module", module, sizeof(module)) != 0 ||
		    tl_bn_getstr(body, "node", node, sizeof(node)) != 0)
			return TL_EMALFORMED;
		if ((rc = tl_key(k, "ar/%s@%s", module, node)) != 0)
			return rc;
		return put_body(t, p->graph, k, ev);
	}
	return 0;
}
