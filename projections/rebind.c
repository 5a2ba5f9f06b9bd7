/*
 * rebind.c - the fold of moves: a binding moving to another provider
 * (with its data), and a provider moving to another node.  See
 * rebind.h for the sagas.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/vec.h"
#include "core/window.h"
#include "events.h"
#include "grant.h"
#include "graph.h"
#include "rebind.h"

#define MV_STR(X)	X(grant) X(state) X(from) X(to) X(db) X(owner) \
			X(user) X(old_db) X(old_owner) X(old_user) X(host) \
			X(port) X(step) X(reason) X(from_host) X(from_port)
#define MV_U64(X)	X(version) X(old_version) X(started_seq) \
			X(started_ns) X(issued_seq) X(copied_seq) X(tables) \
			X(rows)

static int
mv_put(struct tl_txn *t, const struct tl_proj *p, const char *prefix,
    uint64_t seq, const struct tl_rebind *r)
{
	struct tl_body b;
	const void *enc;
	size_t len;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "%s/%s", prefix, r->grant)) != 0)
		return rc;
	tl_body_init(&b);
#define PS(f) tl_body_str(&b, #f, r->f);
#define PU(f) tl_body_u64(&b, #f, r->f);
	MV_STR(PS)
	MV_U64(PU)
	if ((rc = tl_body_finish(&b, &enc, &len)) == 0)
		rc = tl_rec_put(t, p->grants, k, seq, enc, len);
	tl_body_free(&b);
	return rc;
}

static void
mv_decode(struct tl_bnode m, struct tl_rebind *r)
{
	memset(r, 0, sizeof(*r));
#define GS(f) tl_bn_getstr(m, #f, r->f, sizeof(r->f));
#define GU(f) r->f = tl_bn_getu64(m, #f, 0);
	MV_STR(GS)
	MV_U64(GU)
}

static int
mv_read(struct tl_txn *t, const struct tl_proj *p, const char *prefix,
    const char *grant, struct tl_rebind *r)
{
	struct tl_rec rec;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "%s/%s", prefix, grant)) != 0)
		return rc;
	if ((rc = tl_rec_get(t, p->grants, k, &rec)) != 0)
		return rc;
	mv_decode(rec.m, r);
	tl_rec_close(&rec);
	return 0;
}

int
tl_mv_get(struct tl_txn *t, const struct tl_proj *p, const char *grant,
    struct tl_rebind *r)
{
	return mv_read(t, p, "mv", grant, r);
}

int
tl_mv_failed(struct tl_txn *t, const struct tl_proj *p, const char *grant,
    struct tl_rebind *r)
{
	return mv_read(t, p, "mvf", grant, r);
}

struct each {
	tl_mv_fn	 fn;
	void		*arg;
};

static int
each_one(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct each *e = arg;
	struct tl_rebind r;
	struct tl_rec rec;
	int rc;

	(void)rest;
	if ((rc = tl_rec_open(val, vlen, &rec)) != 0)
		return rc;
	mv_decode(rec.m, &r);
	tl_rec_close(&rec);
	return e->fn(&r, e->arg);
}

int
tl_mv_each(struct tl_txn *t, const struct tl_proj *p, tl_mv_fn fn, void *arg)
{
	struct each e = { fn, arg };

	return tl_rec_scan(t, p->grants, "mv/", each_one, &e);
}

int
tl_provider_of(struct tl_txn *t, const struct tl_proj *p, const char *module,
    const char *node, char *id)
{
	struct tl_rec r;
	const void *v;
	size_t n;
	char pnode[64] = "";
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "pa/%s@%s", module, node)) != 0)
		return rc;
	if (tl_kv_get(t, p->graph, k, strlen(k), &v, &n) == 0) {
		if (n >= TL_KEY_MAX)
			return TL_ECORRUPT;
		memcpy(id, v, n);
		id[n] = '\0';
		return 0;
	}
	if ((rc = tl_provider_id(id, node, module)) != 0 ||
	    (rc = tl_key(k, "p/%s", id)) != 0)
		return rc;
	if (tl_rec_get(t, p->graph, k, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "node", pnode, sizeof(pnode));
	tl_rec_close(&r);
	return strcmp(pnode, node) == 0 ? 0 : TL_EEXIST;
}

/* The grants a provider serves, collected before any is rewritten. */
struct ids {
	char	(*v)[TL_GRANT_ID_MAX + 1];
	size_t	 n, cap;
};

static int
collect_id(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct ids *ids = arg;

	(void)val;
	(void)vlen;
	if (tl_vec_grow(&ids->v, &ids->cap, ids->n + 1,
	    sizeof(ids->v[0])) != 0)
		return ENOMEM;
	snprintf(ids->v[ids->n++], TL_GRANT_ID_MAX + 1, "%s", rest);
	return 0;
}

/* provider.moved: its grants' connection fields are the new address. */
static int
readdress(struct tl_txn *t, const struct tl_proj *p, uint64_t seq,
    const char *id, struct tl_bnode body)
{
	struct ids ids = { NULL, 0, 0 };
	struct tl_grant g;
	char host[256] = "", port[8] = "";
	char k[TL_KEY_MAX];
	size_t i;
	int rc;

	if (tl_bn_getstr(body, "host", host, sizeof(host)) == TL_ETOOBIG ||
	    tl_bn_getstr(body, "port", port, sizeof(port)) == TL_ETOOBIG)
		return TL_ETOOBIG;	/* never cut or emptied */
	if ((rc = tl_key(k, "gp/%s/", id)) != 0 ||
	    (rc = tl_rec_scan(t, p->grants, k, collect_id, &ids)) != 0)
		goto out;
	for (i = 0; i < ids.n; i++) {
		if ((rc = tl_grant_get(t, p, ids.v[i], &g, NULL)) != 0)
			break;
		snprintf(g.host, sizeof(g.host), "%s", host);
		if (port[0] != '\0')
			snprintf(g.port, sizeof(g.port), "%s", port);
		if ((rc = tl_grant_put(t, p, seq, &g)) != 0)
			break;
	}
out:
	free(ids.v);
	return rc;
}

/*
 * provider.moved: the record (as provider_body in decide_assign.c
 * builds it, so a later re-registration finds it unchanged) with the
 * new node, and pa/ mapping the new assignment to the id.
 */
static int
fold_provider_moved(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	char id[130], module[64], from[64], to[64], derived[TL_KEY_MAX];
	struct tl_bnode types;
	struct tl_body b;
	struct tl_rec r;
	const void *enc;
	size_t len, i;
	char k[TL_KEY_MAX];
	int rc;

	if (tl_bn_getstr(body, "id", id, sizeof(id)) != 0 ||
	    tl_bn_getstr(body, "module", module, sizeof(module)) != 0 ||
	    tl_bn_getstr(body, "from", from, sizeof(from)) != 0 ||
	    tl_bn_getstr(body, "to", to, sizeof(to)) != 0)
		return TL_EMALFORMED;
	if ((rc = tl_key(k, "p/%s", id)) != 0)
		return rc;
	if ((rc = tl_rec_get(t, p->graph, k, &r)) == TL_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_ID, id);
	tl_body_str(&b, TL_F_MODULE, module);
	tl_body_str(&b, TL_F_NODE, to);
	tl_body_arr(&b, TL_F_TYPES);
	if (tl_bn_get(r.m, "types", &types) == 0)
		for (i = 0; i < tl_bn_len(types); i++) {
			struct tl_bnode e = tl_bn_at(types, i);
			char type[64] = "", driver[64] = "", revoke[16] = "";
			char window[TL_WIN_SPEC_MAX + 1] = "";

			tl_bn_getstr(e, "type", type, sizeof(type));
			tl_bn_getstr(e, "driver", driver, sizeof(driver));
			tl_bn_getstr(e, "revoke", revoke, sizeof(revoke));
			tl_body_map(&b, NULL);
			tl_body_str(&b, TL_F_TYPE, type);
			tl_body_str(&b, TL_F_DRIVER, driver);
			tl_body_str(&b, TL_F_REVOKE, revoke);
			tl_body_u64(&b, TL_F_MAX_AGE, tl_bn_getu64(e, "max_age",
			    0));
			if (tl_bn_getstr(e, "window", window,
			    sizeof(window)) == 0 && window[0] != '\0')
				tl_body_str(&b, TL_F_WINDOW, window);
			tl_body_end(&b);
		}
	tl_body_end(&b);
	tl_rec_close(&r);
	if ((rc = tl_body_finish(&b, &enc, &len)) == 0)
		rc = tl_rec_put(t, p->graph, k, ev->seq, enc, len);
	tl_body_free(&b);
	if (rc != 0)
		return rc;
	if ((rc = tl_key(k, "pa/%s@%s", module, from)) != 0 ||
	    (rc = tl_kv_del(t, p->graph, k, strlen(k))) != 0 ||
	    (rc = tl_key(k, "pa/%s@%s", module, to)) != 0 ||
	    (rc = tl_provider_id(derived, to, module)) != 0)
		return rc;
	if (strcmp(derived, id) == 0)	/* moved back home: no alias */
		rc = tl_kv_del(t, p->graph, k, strlen(k));
	else
		rc = tl_kv_put(t, p->graph, k, strlen(k), id, strlen(id));
	if (rc != 0)
		return rc;
	return readdress(t, p, ev->seq, id, body);
}

/* binding.moved: the grant is the new one from here on. */
static int
switch_grant(struct tl_txn *t, const struct tl_proj *p, uint64_t seq,
    const struct tl_rebind *r)
{
	struct tl_grant g, old;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_grant_get(t, p, r->grant, &g, NULL)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	old = g;
	if (g.provider[0] != '\0') {
		if ((rc = tl_key(k, "gp/%s/%s", g.provider, g.id)) != 0 ||
		    (rc = tl_kv_del(t, p->grants, k, strlen(k))) != 0)
			return rc;
	}
	snprintf(g.provider, sizeof(g.provider), "%s", r->to);
	if ((rc = tl_key(k, "gp/%s/%s", g.provider, g.id)) != 0 ||
	    (rc = tl_kv_put(t, p->grants, k, strlen(k), "", 0)) != 0)
		return rc;
	g.version = r->version;
	g.intent_seq = r->issued_seq;
	snprintf(g.user, sizeof(g.user), "%s", r->user);
	snprintf(g.object, sizeof(g.object), "%s", r->db);
	snprintf(g.host, sizeof(g.host), "%s", r->host);
	snprintf(g.port, sizeof(g.port), "%s", r->port);
	/* What was found wrong with the old resource is not the new one's. */
	g.drift[0] = g.drift_reason[0] = '\0';
	/* Consolidated: a grant of the node's provider from now on. */
	if (TL_GRANT_IS_EMBEDDED(&g))
		snprintf(g.scope, sizeof(g.scope), "%s",
		    TL_GRANT_SCOPE_CONSOLIDATED);
	/* Its work (if any) is on the new provider, its credential new. */
	if ((rc = tl_grant_work_index(t, p, &old, &g, 1)) != 0)
		return rc;
	return tl_grant_put(t, p, seq, &g);
}

/*
 * rebind.completed: the old resource, kept (retain) on the old provider,
 * becomes a revoked grant of its own, GRANT~vOLD_VERSION, so that tally
 * grants --revoked lists it with its size and tally purge destroys it
 * like any retained grant.  It cannot be restored (its data lives on in
 * the moved grant): reason says so, and the restore decider refuses.
 */
static int
left_behind(struct tl_txn *t, const struct tl_proj *p, uint64_t seq,
    const struct tl_rebind *r, struct tl_bnode body)
{
	struct tl_grant g, old;
	char k[TL_KEY_MAX];
	int rc;

	/* An embedded source is the module's own, not a grant to list. */
	if (strcmp(r->state, TL_MV_MOVED) != 0 || r->old_db[0] == '\0' ||
	    r->from[0] == '\0')
		return 0;
	if ((rc = tl_grant_get(t, p, r->grant, &g, NULL)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	old = g;
	if (snprintf(old.id, sizeof(old.id), "%s~v%llu", r->grant,
	    (unsigned long long)r->old_version) >= (int)sizeof(old.id))
		return 0;	/* no room for the name: left unlisted */
	snprintf(old.provider, sizeof(old.provider), "%s", r->from);
	snprintf(old.object, sizeof(old.object), "%s", r->old_db);
	snprintf(old.user, sizeof(old.user), "%s", r->old_user);
	snprintf(old.policy, sizeof(old.policy), "retain");
	snprintf(old.state, sizeof(old.state), TL_GRANT_REVOKED);
	snprintf(old.reason, sizeof(old.reason), "%s %s", TL_MV_LEFT, r->to);
	old.version = r->old_version;
	old.state_seq = seq;
	old.retained_bytes = tl_bn_getu64(body, "size", 0);
	old.drift[0] = old.drift_reason[0] = old.blocked[0] = '\0';
	old.host[0] = old.port[0] = '\0';
	if ((rc = tl_key(k, "gp/%s/%s", old.provider, old.id)) != 0 ||
	    (rc = tl_kv_put(t, p->grants, k, strlen(k), "", 0)) != 0)
		return rc;
	return tl_grant_put(t, p, seq, &old);
}

static int
put_u64(struct tl_txn *t, tl_kv kv, const char *key, uint64_t v)
{
	uint8_t b[8];

	tl_put_be64(b, v);
	return tl_kv_put(t, kv, key, strlen(key), b, 8);
}

static int
fold_rebind_all(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body, int *big)
{
	struct tl_rebind r;
	char grant[201];
	char k[TL_KEY_MAX];
	int rc;

	if (strcmp(ev->type, TL_EV_PROVIDER_MOVED) == 0)
		return fold_provider_moved(t, p, ev, body);
	if (strcmp(ev->type, TL_EV_ASSIGN_REMOVED) == 0) {
		char module[64], node[64];

		/* An alias lives as long as its assignment. */
		if (tl_bn_getstr(body, "module", module, sizeof(module)) != 0 ||
		    tl_bn_getstr(body, "node", node, sizeof(node)) != 0)
			return 0;
		if ((rc = tl_key(k, "pa/%s@%s", module, node)) != 0)
			return rc;
		return tl_kv_del(t, p->graph, k, strlen(k));
	}
	if (strncmp(ev->type, "rebind.", 7) != 0 &&
	    strcmp(ev->type, TL_EV_BINDING_MOVED) != 0)
		return 0;
	if (tl_bn_getstr(body, "grant", grant, sizeof(grant)) != 0)
		return TL_EMALFORMED;

	if (strcmp(ev->type, TL_EV_REBIND_STARTED) == 0) {
		memset(&r, 0, sizeof(r));
		snprintf(r.grant, sizeof(r.grant), "%s", grant);
		snprintf(r.state, sizeof(r.state), TL_MV_STARTED);
		tl_rec_getstr(body, "from", r.from, sizeof(r.from), big);
		tl_rec_getstr(body, "to", r.to, sizeof(r.to), big);
		r.version = tl_bn_getu64(body, "version", 0);
		r.old_version = tl_bn_getu64(body, "old_version", 0);
		/* An embedded source (rebind.h): the names are the module's. */
		tl_rec_getstr(body, "from_host", r.from_host,
		    sizeof(r.from_host), big);
		tl_rec_getstr(body, "from_port", r.from_port,
		    sizeof(r.from_port), big);
		tl_rec_getstr(body, "from_resource", r.old_db, sizeof(r.old_db),
		    big);
		tl_rec_getstr(body, "from_user", r.old_user, sizeof(r.old_user),
		    big);
		r.started_seq = ev->seq;
		r.started_ns = ev->ts;
		if ((rc = tl_key(k, "mvf/%s", grant)) != 0 ||
		    (rc = tl_kv_del(t, p->grants, k, strlen(k))) != 0)
			return rc;
		return mv_put(t, p, "mv", ev->seq, &r);
	}
	if ((rc = tl_mv_get(t, p, grant, &r)) == TL_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	if (strcmp(ev->type, TL_EV_REBIND_ISSUED) == 0) {
		snprintf(r.state, sizeof(r.state), TL_MV_ISSUED);
		r.issued_seq = ev->seq;
		tl_rec_getstr(body, "resource", r.db, sizeof(r.db), big);
		tl_rec_getstr(body, "owner", r.owner, sizeof(r.owner), big);
		tl_rec_getstr(body, "user", r.user, sizeof(r.user), big);
		tl_rec_getstr(body, "from_resource", r.old_db, sizeof(r.old_db),
		    big);
		tl_rec_getstr(body, "from_owner", r.old_owner,
		    sizeof(r.old_owner), big);
		tl_rec_getstr(body, "from_user", r.old_user, sizeof(r.old_user),
		    big);
		if ((rc = tl_key(k, "cv/%s/%llu", grant,
		    (unsigned long long)r.version)) != 0 ||
		    (rc = put_u64(t, p->grants, k, ev->seq)) != 0)
			return rc;
		return mv_put(t, p, "mv", ev->seq, &r);
	}
	if (strcmp(ev->type, TL_EV_REBIND_COPIED) == 0) {
		struct tl_bnode tables, kn, vn;
		size_t i;
		uint64_t rows;

		r.copied_seq = ev->seq;
		tl_rec_getstr(body, "host", r.host, sizeof(r.host), big);
		tl_rec_getstr(body, "port", r.port, sizeof(r.port), big);
		r.tables = r.rows = 0;
		if (tl_bn_get(body, "tables", &tables) == 0)
			for (i = 0; i < tl_bn_len(tables); i++) {
				if (tl_bn_entry(tables, i, &kn, &vn) != 0 ||
				    tl_bn_u64(vn, &rows) != 0)
					continue;
				r.tables++;
				r.rows += rows;
			}
		return mv_put(t, p, "mv", ev->seq, &r);
	}
	if (strcmp(ev->type, TL_EV_BINDING_MOVED) == 0) {
		if (strcmp(r.state, TL_MV_ISSUED) != 0 || r.copied_seq == 0)
			return 0;	/* only a verified copy is switched to */
		snprintf(r.state, sizeof(r.state), TL_MV_MOVED);
		if ((rc = mv_put(t, p, "mv", ev->seq, &r)) != 0)
			return rc;
		return switch_grant(t, p, ev->seq, &r);
	}
	if (strcmp(ev->type, TL_EV_REBIND_FAILED) == 0) {
		snprintf(r.state, sizeof(r.state), TL_MV_FAILED);
		tl_rec_getstr(body, "step", r.step, sizeof(r.step), big);
		tl_rec_getstr(body, "reason", r.reason, sizeof(r.reason), big);
		return mv_put(t, p, "mv", ev->seq, &r);
	}
	if (strcmp(ev->type, TL_EV_REBIND_COMPLETED) == 0 &&
	    (rc = left_behind(t, p, ev->seq, &r, body)) != 0)
		return rc;
	if (strcmp(ev->type, TL_EV_REBIND_REVERTED) == 0 ||
	    strcmp(ev->type, TL_EV_REBIND_COMPLETED) == 0) {
		if (ev->type[7] == 'r' &&
		    (rc = mv_put(t, p, "mvf", ev->seq, &r)) != 0)
			return rc;
		if ((rc = tl_key(k, "mv/%s", grant)) != 0)
			return rc;
		return tl_kv_del(t, p->grants, k, strlen(k));
	}
	return 0;
}

/*
 * A string too long for the field that keeps it is never cut or
 * emptied: the fold fails (TL_ETOOBIG) and its transaction with it.
 */
int
tl_fold_rebind(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	int big = 0, rc;

	rc = fold_rebind_all(t, p, ev, body, &big);
	return rc != 0 ? rc : big ? TL_ETOOBIG : 0;
}
