/*
 * status.c - assignment status with the reason for everything unmet.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "events.h"
#include "exposure.h"
#include "grant.h"
#include "graph.h"
#include "status.h"
#include "rebind.h"
#include "rotation.h"
#include "core/json.h"
#include "core/log.h"
#include "core/window.h"
#include "drivers/decl.h"

int
tl_checks_get(struct tl_txn *t, const char *grant, uint64_t *last_ns,
    uint64_t *count)
{
	const uint8_t *v;
	const void *vp;
	size_t n;
	tl_kv kv;
	int rc;

	*last_ns = *count = 0;
	if ((rc = tl_kv_open_scratch(t, "checks", &kv)) != 0)
		return rc;
	if (tl_kv_get(t, kv, grant, strlen(grant), &vp, &n) != 0 || n != 24)
		return TL_ENOTFOUND;
	v = vp;
	*last_ns = tl_get_be64(v);
	*count = tl_get_be64(v + 8);
	return 0;
}

/*
 * What the drivers of module, a provider, say its settings on node leave
 * open (tl_drv_decl.settings_note), into note; 1 when one does.  Only
 * the operator's settings are read: a driver's note is about a choice
 * the operator made.
 */
#define NOTE_SETTINGS	16
static int
settings_note(struct tl_txn *t, const struct tl_proj *p, const char *module,
    const char *node, char note[TL_WHY_MAX])
{
	struct tl_rec r;
	struct tl_bnode prov, n, kn, vn;
	char keys[NOTE_SETTINGS][64], vals[NOTE_SETTINGS][256];
	const char *sv[2 * NOTE_SETTINGS + 1];
	const struct tl_drv_decl *dd[8];
	char k[TL_KEY_MAX], driver[64];
	size_t i, nd = 0, ns = 0;
	const char *ks;
	size_t kl;
	int found = 0;

	if (tl_key(k, "m/%s", module) != 0 ||
	    tl_rec_get(t, p->graph, k, &r) != 0)
		return 0;
	if (tl_bn_get(r.m, "provides", &prov) == 0)
		for (i = 0; i < tl_bn_len(prov) && nd < 8; i++) {
			driver[0] = '\0';
			tl_bn_getstr(tl_bn_at(prov, i), "driver", driver,
			    sizeof(driver));
			if ((dd[nd] = tl_drv_decl_find(driver)) != NULL &&
			    dd[nd]->settings_note != NULL)
				nd++;
		}
	tl_rec_close(&r);
	if (nd == 0 || tl_key(k, "a/%s@%s", module, node) != 0 ||
	    tl_rec_get(t, p->graph, k, &r) != 0)
		return 0;
	if (tl_bn_get(r.m, "settings", &n) == 0)
		for (i = 0; i < tl_bn_len(n) && ns < NOTE_SETTINGS; i++)
			if (tl_bn_entry(n, i, &kn, &vn) == 0 &&
			    tl_bn_str(kn, &ks, &kl) == 0 && kl < 64 &&
			    memchr(ks, '\0', kl) == NULL &&
			    tl_bn_strcpy(vn, vals[ns], sizeof(vals[ns])) == 0) {
				memcpy(keys[ns], ks, kl);
				keys[ns][kl] = '\0';
				sv[2 * ns] = keys[ns];
				sv[2 * ns + 1] = vals[ns];
				ns++;
			}
	tl_rec_close(&r);
	sv[2 * ns] = NULL;
	for (i = 0; i < nd && !found; i++)
		found = dd[i]->settings_note(sv, note) == 1;
	return found;
}

static int
module_provides(struct tl_txn *t, const struct tl_proj *p, const char *module,
    const char *type, int *embedded_only, int *declared)
{
	struct tl_rec m;
	struct tl_bnode arr;
	char k[TL_KEY_MAX];
	size_t i;
	int found = 0;

	*embedded_only = 0;
	*declared = 0;
	if (tl_key(k, "m/%s", module) != 0 ||
	    tl_rec_get(t, p->graph, k, &m) != 0)
		return 0;
	*declared = 1;
	if (tl_bn_get(m.m, "provides", &arr) == 0)
		for (i = 0; i < tl_bn_len(arr) && !found; i++) {
			char ty[64];

			if (tl_bn_getstr(tl_bn_at(arr, i), "type", ty,
			    sizeof(ty)) == 0 && strcmp(ty, type) == 0)
				found = 1;
		}
	if (!found && tl_bn_get(m.m, "embedded", &arr) == 0)
		for (i = 0; i < tl_bn_len(arr); i++) {
			char ty[64];

			if (tl_bn_getstr(tl_bn_at(arr, i), "type", ty,
			    sizeof(ty)) == 0 && strcmp(ty, type) == 0)
				*embedded_only = 1;
		}
	tl_rec_close(&m);
	return found;
}

static int
first_key(const char *rest, const void *val, size_t vlen, void *arg)
{
	(void)val;
	(void)vlen;
	snprintf(arg, TL_KEY_MAX, "%s", rest);
	return 1;
}

static int
module_assigned(struct tl_txn *t, const struct tl_proj *p, const char *module)
{
	char first[TL_KEY_MAX] = "";
	char k[TL_KEY_MAX];

	if (tl_key(k, "ao/%s/", module) != 0)
		return 0;
	tl_rec_scan(t, p->graph, k, first_key, first);
	return first[0] != '\0';
}

struct reach_arg {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	const char		*target, *module, *node;
	size_t			 seen;
	char			 why[TL_WHY_MAX];
};

/* One provider of the type: the first one's reason it does not serve. */
static int
one_unreached(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct reach_arg *ra = arg;
	struct tl_rec r;
	char module[64] = "", k[TL_KEY_MAX];

	(void)val;
	(void)vlen;
	if (tl_key(k, "p/%s", rest) != 0 ||
	    tl_rec_get(ra->t, ra->p->graph, k, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "module", module, sizeof(module));
	tl_rec_close(&r);
	if (strcmp(module, ra->target) != 0)
		return 0;
	if (ra->seen++ == 0)
		tl_exposure_serves(ra->t, ra->p, rest, ra->module, ra->node,
		    ra->why);
	return 0;
}

/* Why an instance with no binding is unbound. */
static void
unbound_reason(struct tl_txn *t, const struct tl_proj *p, struct tl_bnode r,
    const char *module, const char *node, char *out, size_t cap)
{
	char type[64] = "", target[64] = "", prov[130] = "";
	int emb, decl;
	char k[TL_KEY_MAX];

	tl_bn_getstr(r, "type", type, sizeof(type));
	tl_bn_getstr(r, "target", target, sizeof(target));
	tl_bn_getstr(r, "provider", prov, sizeof(prov));
	if (prov[0] != '\0') {
		char why[TL_WHY_MAX];

		if (tl_key(k, "p/%s", prov) == 0 &&
		    !tl_rec_exists(t, p->graph, k))
			snprintf(out, cap, "provider %s not assigned to any "
			    "node (the manifest names it)", prov);
		else if (!tl_exposure_serves(t, p, prov, module, node, why))
			snprintf(out, cap, "the manifest names provider %s, "
			    "which does not serve it: %s", prov, why);
		else
			snprintf(out, cap, "provider %s does not grant %s from "
			    "%s", prov, type, target);
		return;
	}
	if (!module_provides(t, p, target, type, &emb, &decl)) {
		if (!decl)
			snprintf(out, cap, "no provider of type %s (module %s "
			    "is not declared)", type, target);
		else if (emb)
			snprintf(out, cap, "no provider of type %s: %s's is an "
			    "embedded private instance", type, target);
		else
			snprintf(out, cap, "no driver for %s: module %s does "
			    "not provide it", type, target);
		return;
	}
	if (!module_assigned(t, p, target)) {
		snprintf(out, cap, "provider %s not assigned to any node",
		    target);
		return;
	}
	{
		struct reach_arg ra = { t, p, target, module, node, 0, "" };

		/* Registered, but none whose exposure reaches the consumer. */
		if (tl_key(k, "pt/%s/", type) == 0)
			tl_rec_scan(t, p->graph, k, one_unreached, &ra);
		if (ra.seen > 0) {
			snprintf(out, cap, "no provider of type %s from %s "
			    "serves it (%zu registered, none whose exposure "
			    "reaches it): %s", type, target, ra.seen, ra.why);
			return;
		}
	}
	snprintf(out, cap, "no provider of type %s from %s is registered",
	    type, target);
}

struct answer_arg {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	const struct tl_grant	*g;
	const char		*target;
	json_t			*cmds;
};

/* One provider of the lost grant's type that would serve it now. */
static int
one_answer(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct answer_arg *aa = arg;
	struct tl_rec r;
	char module[64] = "", k[TL_KEY_MAX], cmd[TL_KEY_MAX + 300];

	(void)val;
	(void)vlen;
	if (tl_key(k, "p/%s", rest) != 0 ||
	    tl_rec_get(aa->t, aa->p->graph, k, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "module", module, sizeof(module));
	tl_rec_close(&r);
	if ((aa->target[0] != '\0' && strcmp(module, aa->target) != 0) ||
	    !tl_exposure_serves(aa->t, aa->p, rest, aa->g->module,
	    aa->g->node, NULL))
		return 0;
	snprintf(cmd, sizeof(cmd), "tally rebind %s %s --empty", aa->g->id,
	    rest);
	return json_array_append_new(aa->cmds, json_string(cmd)) == 0 ? 0 :
	    ENOMEM;
}

/*
 * A lost grant is a question somebody can be asked (seed 000), not a
 * failure at connect time: what happened, and the commands that answer
 * it, said plainly (a new resource is empty: the data is gone).
 */
static void
lost_question(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, const char *target, json_t *j, char *reason,
    size_t cap)
{
	struct answer_arg aa = { t, p, g, target, json_array() };
	char k[TL_KEY_MAX];
	size_t i, off;

	if (tl_key(k, "pt/%s/", g->type) == 0)
		tl_rec_scan(t, p->graph, k, one_answer, &aa);
	off = (size_t)snprintf(reason, cap, "lost: %s.  A question for you, "
	    "not a failure: ", g->reason);
	if (json_array_size(aa.cmds) == 0) {
		if (off < cap)
			snprintf(reason + off, cap - off, "no provider of %s "
			    "from %s serves it now; assign one (tally assign "
			    "%s NODE), then tally rebind %s NODE/%s --empty "
			    "gives it a new, EMPTY resource (nothing can bring "
			    "the old data back)", g->type, target, target,
			    g->id, target);
	} else {
		if (off < cap)
			off += (size_t)snprintf(reason + off, cap - off, "give "
			    "it a new, EMPTY resource elsewhere (the old data "
			    "is not copied: it is gone): ");
		for (i = 0; i < json_array_size(aa.cmds) && off < cap; i++)
			off += (size_t)snprintf(reason + off, cap - off,
			    "%s%s", i ? " or " : "", json_string_value(
			    json_array_get(aa.cmds, i)));
	}
	json_object_set_new(j, "question", json_pack("{s:s,s:o}", "lost",
	    g->reason, "commands", aa.cmds));
}

/* Worst first: a headline is the worst of its parts. */
static const char *const order[] = {
	TL_ST_UNHEALTHY, TL_ST_PENDING, TL_ST_BOUND, TL_ST_PROVISIONED, TL_ST_MIGRATED,
	TL_ST_READY
};

static int
rank(const char *s)
{
	size_t i;

	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (strcmp(order[i], s) == 0)
			return (int)i;
	return 0;
}

/*
 * The old login's sessions the rotator last counted while the rotation
 * waits (TL_ROT_SESSIONS_TABLE), when they are of this rotation's old
 * version: "old_sessions" on rot.
 */
static void
old_sessions(struct tl_txn *t, const char *grant, uint64_t from, json_t *rot)
{
	unsigned long long v, n;
	const void *val;
	char buf[64];
	size_t vl;
	tl_kv kv;

	if (tl_kv_open_scratch(t, TL_ROT_SESSIONS_TABLE, &kv) != 0 ||
	    tl_kv_get(t, kv, grant, strlen(grant), &val, &vl) != 0 ||
	    vl >= sizeof(buf))
		return;
	memcpy(buf, val, vl);
	buf[vl] = '\0';
	if (sscanf(buf, "%llu %llu", &v, &n) != 2 || v != from)
		return;
	json_object_set_new(rot, "old_sessions", json_integer((json_int_t)n));
}

/* A running rotation: versions, and the holders it still waits on. */
static void
rotation_status(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, json_t *j)
{
	struct tl_rotation r;
	struct tl_nodelist nl;
	json_t *rot, *waiting;
	size_t i;

	if (tl_rot_get(t, p, g->id, &r) != 0)
		return;
	waiting = json_array();
	/*
	 * The holders the rotator waits on (reactors/deliver.c): the
	 * assignments that install the requirement's part, not every one.
	 */
	if (strcmp(r.state, TL_ROT_ACTIVE) == 0 &&
	    tl_graph_req_nodes(t, p, g->module, g->req, &nl) == 0) {
		for (i = 0; i < nl.n; i++) {
			char holder[140];

			if (g->node[0] != '\0' && strcmp(g->node, nl.v[i]) != 0)
				continue;
			snprintf(holder, sizeof(holder), "%s@%s", g->module,
			    nl.v[i]);
			if (!tl_rot_acked(t, p, g->id, r.to, holder)) {
				char who[140];

				snprintf(who, sizeof(who), "%s/%s", nl.v[i],
				    g->module);
				json_array_append_new(waiting,
				    json_string(who));
			}
		}
		tl_nodelist_free(&nl);
	}
	rot = json_pack("{s:I,s:I,s:s,s:I,s:I,s:o,s:s}", "from",
	    (json_int_t)r.from, "to", (json_int_t)r.to, "step", r.state,
	    "started_ns", (json_int_t)r.started_ns, "deadline_ns",
	    (json_int_t)r.deadline_ns, "waiting_on", waiting, "reason",
	    r.reason);
	if (strcmp(r.state, TL_ROT_ACTIVE) == 0)
		old_sessions(t, g->id, r.from, rot);
	json_object_set_new(j, "rotation", rot);
}

/*
 * A move of the binding (tally rebind): where to, the step in words
 * ("copying", "waiting", "retiring the old grant", "failed: reverting"),
 * and after the switch the holders that have not acknowledged; or the
 * last move that failed, with why ("rebind_failed").
 */
static void
rebind_status(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, json_t *j)
{
	struct tl_rebind r;
	struct tl_nodelist nl;
	const char *step;
	json_t *mv, *waiting;
	size_t i;

	if (tl_mv_get(t, p, g->id, &r) != 0) {
		if (tl_mv_failed(t, p, g->id, &r) == 0)
			json_object_set_new(j, "rebind_failed", json_pack(
			    "{s:s,s:s,s:s,s:s}", "from", r.from, "to", r.to,
			    "step", r.step, "reason", r.reason));
		return;
	}
	waiting = json_array();
	if (strcmp(r.state, TL_MV_MOVED) == 0 &&
	    tl_graph_module_nodes(t, p, g->module, &nl) == 0) {
		for (i = 0; i < nl.n; i++) {
			char holder[140], who[140];

			if (g->node[0] != '\0' && strcmp(g->node, nl.v[i]) != 0)
				continue;
			snprintf(holder, sizeof(holder), "%s@%s", g->module,
			    nl.v[i]);
			if (tl_rot_acked(t, p, g->id, r.version, holder))
				continue;
			snprintf(who, sizeof(who), "%s/%s", nl.v[i], g->module);
			json_array_append_new(waiting, json_string(who));
		}
		tl_nodelist_free(&nl);
	}
	if (strcmp(r.state, TL_MV_MOVED) == 0)
		step = json_array_size(waiting) > 0 ? "waiting" :
		    "retiring the old grant";
	else if (strcmp(r.state, TL_MV_FAILED) == 0)
		step = "failed: reverting";
	else
		step = "copying";
	mv = json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:o}", "from", r.from,
	    "to", r.to, "state", r.state, "step", step, "version",
	    (json_int_t)r.version, "started_ns", (json_int_t)r.started_ns,
	    "rows", (json_int_t)r.rows, "waiting_on", waiting);
	if (r.copied_seq != 0)
		json_object_set_new(mv, "tables", json_integer(
		    (json_int_t)r.tables));
	if (r.reason[0] != '\0')
		json_object_set_new(mv, "reason", json_string(r.reason));
	json_object_set_new(j, "rebind", mv);
}

/* Has every migration the requirement declares been applied to g? */
static int
migrations_done(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, struct tl_bnode r)
{
	struct tl_bnode list;
	size_t i;

	if (tl_bn_get(r, "migrations", &list) != 0)
		return 1;
	for (i = 0; i < tl_bn_len(list); i++) {
		char file[64] = "", sum[65] = "";
		const void *v;
		size_t n;
		char k[TL_KEY_MAX];

		tl_bn_getstr(tl_bn_at(list, i), "file", file, sizeof(file));
		tl_bn_getstr(tl_bn_at(list, i), "checksum", sum, sizeof(sum));
		if (tl_key(k, "ma/%s/%s", g->id, file) != 0 ||
		    tl_kv_get(t, p->grants, k, strlen(k), &v, &n) != 0 ||
		    n != strlen(sum) || memcmp(v, sum, n) != 0)
			return 0;
	}
	return 1;
}

/*
 * What makes a provisioned grant unhealthy though it exists: drift not
 * repaired, migrations blocked, this node's holder cut off by a forced
 * rotation.  Returns TL_ST_UNHEALTHY with the reason, or st as it was.
 */
static const char *
grant_trouble(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, struct tl_bnode r, const char *node, json_t *j,
    char *reason, size_t cap, const char *st)
{
	char holder[140];
	uint64_t v;

	if (g->drift[0] != '\0') {
		snprintf(reason, cap, "drift %s not repaired: %s", g->drift,
		    g->drift_reason);
		return TL_ST_UNHEALTHY;
	}
	if (g->blocked[0] != '\0' && !migrations_done(t, p, g, r)) {
		snprintf(reason, cap, "migrations blocked: %s", g->blocked);
		return TL_ST_UNHEALTHY;
	}
	snprintf(holder, sizeof(holder), "%s@%s", g->module, node);
	if ((v = tl_rot_cut_off(t, p, g->id, holder)) != 0) {
		snprintf(reason, cap, "cut off by a forced rotation: %s/%s "
		    "has not acknowledged v%llu, and the old credential is "
		    "gone (deliver it, then tally ack %s %s %llu)", node,
		    g->module, (unsigned long long)v, node, g->module,
		    (unsigned long long)v);
		json_object_set_new(j, "cut_off", json_integer((json_int_t)v));
		return TL_ST_UNHEALTHY;
	}
	return st;
}

static json_t *
req_status(struct tl_txn *t, const struct tl_proj *p, const char *module,
    const char *req, struct tl_bnode r, const char *node, const char **state)
{
	char kind[16] = "", target[64] = "", scope[16] = "", reason[1400] = "";
	char gkey[TL_KEY_MAX];
	const char *st;
	json_t *j;
	char k[TL_KEY_MAX];

	tl_bn_getstr(r, "kind", kind, sizeof(kind));
	tl_bn_getstr(r, "target", target, sizeof(target));
	tl_bn_getstr(r, "scope", scope, sizeof(scope));
	j = json_pack("{s:s,s:s}", "name", req, "kind", kind);
	if (strcmp(kind, "presence") == 0) {
		if (tl_key(k, "m/%s", target) != 0 ||
		    !tl_rec_exists(t, p->graph, k)) {
			st = TL_ST_PENDING;
			snprintf(reason, sizeof(reason), "module %s is not "
			    "declared", target);
		} else if (!module_assigned(t, p, target)) {
			st = TL_ST_PENDING;
			snprintf(reason, sizeof(reason), "module %s is not "
			    "assigned to any node", target);
		} else
			st = TL_ST_READY;
		json_object_set_new(j, "target", json_string(target));
		goto done;
	}

	tl_grant_key(gkey, module, req,
	    strcmp(scope, "per-instance") == 0 ? node : NULL);
	json_object_set_new(j, "grant", json_string(gkey));
	{
		/* What the provider leaves possible between its consumers. */
		const struct tl_drv_decl *dd;
		char type[64] = "";

		tl_bn_getstr(r, "type", type, sizeof(type));
		if ((dd = tl_drv_decl_for_type(type)) != NULL &&
		    dd->isolation_note != NULL)
			json_object_set_new(j, "isolation_note",
			    json_string(dd->isolation_note));
	}
	{
		/* What it declares for its driver (params), lists as lists. */
		struct tl_bnode pm, pk, pv;
		struct tl_bn_iter it;
		const char *ks, *vs, *nl;
		size_t kl, vl;
		char kb[64];
		json_t *o, *a;

		if (tl_bn_get(r, "params", &pm) == 0 && tl_bn_iter(pm,
		    &it) == 0 && (o = json_object()) != NULL) {
			while (tl_bn_iter_next(&it, &pk, &pv) == 1) {
				if (tl_bn_str(pk, &ks, &kl) != 0 || kl >=
				    sizeof(kb) || tl_bn_str(pv, &vs, &vl) != 0 ||
				    (a = json_array()) == NULL)
					continue;
				memcpy(kb, ks, kl);
				kb[kl] = '\0';
				while (vl > 0) {
					nl = memchr(vs, '\n', vl);
					json_array_append_new(a, json_stringn(vs,
					    nl != NULL ? (size_t)(nl - vs) : vl));
					if (nl == NULL)
						break;
					vl -= (size_t)(nl - vs) + 1;
					vs = nl + 1;
				}
				json_object_set_new(o, kb, a);
			}
			json_object_set_new(j, "params", o);
		}
	}
	{
		struct tl_rec b;
		char bstate[16] = "", prov[130] = "", why[TL_WHY_MAX] = "";

		if (tl_key(k, "b/%s", gkey) != 0 ||
		    tl_rec_get(t, p->graph, k, &b) != 0) {
			st = TL_ST_PENDING;
			unbound_reason(t, p, r, module,
			    strcmp(scope, "per-instance") == 0 ? node : NULL,
			    reason, sizeof(reason));
			goto done;
		}
		tl_bn_getstr(b.m, "state", bstate, sizeof(bstate));
		tl_bn_getstr(b.m, "provider", prov, sizeof(prov));
		tl_bn_getstr(b.m, "reason", why, sizeof(why));
		if (strcmp(bstate, "ambiguous") == 0) {
			struct tl_bnode c;
			size_t i, off;

			tl_bn_get(b.m, "candidates", &c);
			off = (size_t)snprintf(reason, sizeof(reason),
			    "ambiguous: candidates ");
			for (i = 0; i < tl_bn_len(c) && off < sizeof(reason);
			    i++) {
				const char *s;
				size_t n;

				if (tl_bn_str(tl_bn_at(c, i), &s, &n) != 0)
					continue;
				off += (size_t)snprintf(reason + off,
				    sizeof(reason) - off, "%s%.*s",
				    i ? ", " : "", (int)n, s);
			}
			if (off < sizeof(reason))
				snprintf(reason + off, sizeof(reason) - off,
				    " — run tally bind %s PROVIDER", gkey);
			st = TL_ST_PENDING;
			tl_rec_close(&b);
			goto done;
		}
		json_object_set_new(j, "provider", json_string(prov));
		{
			char ex[16], pn[64];

			tl_exposure_of(t, p, prov, ex, pn);
			if (ex[0] != '\0')
				json_object_set_new(j, "provider_expose",
				    json_string(ex));
		}
		json_object_set_new(j, "bound_by", json_string(why));
		json_object_set_new(j, "bound_seq", json_integer(
		    (json_int_t)b.seq));
		tl_rec_close(&b);
	}
	{
		struct tl_grant g;

		if (tl_grant_get(t, p, gkey, &g, NULL) != 0) {
			st = TL_ST_BOUND;
			goto done;
		}
		json_object_set_new(j, "grant_state", json_string(g.state));
		if (g.access != 0)
			json_object_set_new(j, "access", json_pack("{s:s,s:s}",
			    "of", g.of, "access", g.access ==
			    TL_GRANT_ACCESS_READ ? "read" : "read-write"));
		if (g.adopt_version != 0) {
			/* What tally adopt took over, for good. */
			json_t *a = json_pack("{s:s,s:I}", "resource",
			    g.adopt_resource, "version",
			    (json_int_t)g.adopt_version);

			if (a != NULL && g.adopt_login[0] != '\0')
				json_object_set_new(a, "login",
				    json_string(g.adopt_login));
			if (a != NULL && g.adopt_migrated[0] != '\0')
				json_object_set_new(a, "migrated_through",
				    json_string(g.adopt_migrated));
			if (a != NULL && g.adopt_holders != 0)
				json_object_set_new(a, "holders", json_string(
				    g.adopt_holders == TL_GRANT_HOLDERS_WORKING ?
				    "working" : "failing"));
			if (a != NULL)
				json_object_set_new(j, "adopted", a);
		}
		{
			struct tl_bnode env;

			/* It has an env file to be delivered (tally status checks). */
			if (tl_bn_get(r, "env", &env) == 0 && tl_bn_len(env) > 0)
				json_object_set_new(j, "delivers", json_true());
		}
		if (g.drift[0] != '\0') {
			json_object_set_new(j, "drift", json_string(g.drift));
			json_object_set_new(j, "drift_reason",
			    json_string(g.drift_reason));
		}
		/* Healthy, but a person should know (not held to TLS). */
		if (g.warning[0] != '\0')
			json_object_set_new(j, "warning",
			    json_string(g.warning));
		{
			uint64_t last = 0, count = 0;

			if (tl_checks_get(t, gkey, &last, &count) == 0) {
				char ts[64];

				tl_json_time(last, ts);
				json_object_set_new(j, "last_verified",
				    json_string(ts));
				json_object_set_new(j, "checks", json_integer(
				    (json_int_t)count));
			}
		}
		/* A block whose cause has gone since is not news. */
		if (g.blocked[0] != '\0' && !migrations_done(t, p, &g, r))
			json_object_set_new(j, "migrations_blocked",
			    json_string(g.blocked));
		rotation_status(t, p, &g, j);
		rebind_status(t, p, &g, j);
		if (strcmp(g.state, TL_GRANT_PROVISIONED) == 0)
			st = migrations_done(t, p, &g, r) ? TL_ST_MIGRATED :
			    TL_ST_PROVISIONED;
		else if (strcmp(g.state, TL_GRANT_MISSING) == 0) {
			st = TL_ST_UNHEALTHY;
			snprintf(reason, sizeof(reason), "%s — not recreated "
			    "(that would hide data loss); tally repair %s "
			    "recreates it", g.drift_reason, gkey);
		} else if (strcmp(g.state, TL_GRANT_REPAIRING) == 0) {
			st = TL_ST_BOUND;
			snprintf(reason, sizeof(reason), "being recreated "
			    "(tally repair)");
		}
		else if (strcmp(g.state, TL_GRANT_FAILED) == 0) {
			st = TL_ST_UNHEALTHY;
			snprintf(reason, sizeof(reason), "%s", g.reason);
		} else if (strcmp(g.state, TL_GRANT_REVOKED) == 0 &&
		    strcmp(g.policy, "retain") == 0) {
			st = TL_ST_PENDING;
			snprintf(reason, sizeof(reason), "a retained grant "
			    "exists: %s is revoked (data retained, %.1f MiB); "
			    "tally restore %s takes it back with new "
			    "credentials, or tally purge %s destroys the data",
			    gkey, (double)g.retained_bytes / 1048576.0, gkey,
			    gkey);
		} else if (strcmp(g.state, TL_GRANT_LOST) == 0) {
			st = TL_ST_UNHEALTHY;
			lost_question(t, p, &g, target, j, reason,
			    sizeof(reason));
		} else if (strcmp(g.state, TL_GRANT_REVOKING) == 0 ||
		    strcmp(g.state, TL_GRANT_REVOKED) == 0 ||
		    strcmp(g.state, TL_GRANT_PURGING) == 0 ||
		    strcmp(g.state, TL_GRANT_PURGED) == 0) {
			st = TL_ST_PENDING;
			snprintf(reason, sizeof(reason), "grant %s is %s",
			    gkey, g.state);
		} else
			st = TL_ST_BOUND;
		if (strcmp(st, TL_ST_BOUND) == 0 ||
		    strcmp(st, TL_ST_PROVISIONED) == 0 ||
		    strcmp(st, TL_ST_MIGRATED) == 0 ||
		    strcmp(g.state, TL_GRANT_FAILED) == 0) {
			struct tl_rec pu;
			char why[TL_WHY_MAX] = "", pukind[32] = "";

			if (tl_key(k, "pu/%s", g.provider) == 0 &&
			    tl_rec_get(t, p->graph, k, &pu) == 0) {
				tl_bn_getstr(pu.m, "reason", why, sizeof(why));
				tl_bn_getstr(pu.m, "kind", pukind, sizeof(pukind));
				tl_rec_close(&pu);
				/* A refused admin login is no outage. */
				snprintf(reason, sizeof(reason), "provider %s"
				    "%s: %s", g.provider, strstr(pukind, "auth") ?
				    " refused tally's admin login" : strcmp(
				    pukind, TL_PROVIDER_UNRESOLVED) == 0 ? "" :
				    strcmp(pukind, TL_PROVIDER_UNTRUSTED) == 0 ?
				    " not trusted (TLS)" : " unreachable", why);
				json_object_set_new(j, "provider_down",
				    json_true());
				st = TL_ST_UNHEALTHY;
			}
		}
		if (strcmp(st, TL_ST_PROVISIONED) == 0 ||
		    strcmp(st, TL_ST_MIGRATED) == 0)
			st = grant_trouble(t, p, &g, r, node, j, reason,
			    sizeof(reason), st);
	}
done:
	json_object_set_new(j, "state", json_string(st));
	if (reason[0] != '\0')
		json_object_set_new(j, "reason", json_string(reason));
	*state = st;
	return j;
}

/* A record's array of names as JSON. */
static json_t *
parts_json(struct tl_bnode arr)
{
	json_t *j = json_array();
	char name[64];
	size_t i;

	for (i = 0; i < tl_bn_len(arr); i++) {
		name[0] = '\0';
		tl_bn_strcpy(tl_bn_at(arr, i), name, sizeof(name));
		json_array_append_new(j, json_string(name));
	}
	return j;
}

struct req_arg {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	const char		*module;
	const char		*node;
	json_t			*arr;
	int			 worst;
	int			 n;
	int			 inst;	/* instantiation requirements */
	json_t			*skipped;	/* of parts not installed here */
};

static int
one_req(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct req_arg *ra = arg;
	struct tl_rec r;
	const char *st;
	json_t *j;
	int rc;

	char part[64] = "";

	if ((rc = tl_rec_open(val, vlen, &r)) != 0)
		return rc;
	tl_bn_getstr(r.m, "part", part, sizeof(part));
	if (part[0] != '\0' && !tl_graph_installs(ra->t, ra->p, ra->module,
	    ra->node, part)) {
		/* Not provisioned here: said, and no part of the state. */
		tl_rec_close(&r);
		return json_array_append_new(ra->skipped, json_pack(
		    "{s:s,s:s}", "name", rest, "part", part)) == 0 ? 0 : ENOMEM;
	}
	j = req_status(ra->t, ra->p, ra->module, rest, r.m, ra->node, &st);
	tl_rec_close(&r);
	if (j == NULL)
		return ENOMEM;
	if (part[0] != '\0')
		json_object_set_new(j, "part", json_string(part));
	if (json_object_get(j, "grant") != NULL)
		ra->inst++;
	json_array_append_new(ra->arr, j);
	if (rank(st) < ra->worst)
		ra->worst = rank(st);
	ra->n++;
	return 0;
}

/*
 * module's embedded instances on node (decide_embedded.h): each with its
 * credential's grant, and where its need is served: "its own instance",
 * or "consolidated onto PROVIDER" (tally assign --consolidate), with a
 * consolidation that runs or failed.  NULL on ENOMEM.
 */
static json_t *
embedded_status(struct tl_txn *t, const struct tl_proj *p,
    const char *module, const char *node)
{
	struct tl_rec m;
	struct tl_bnode arr;
	json_t *out = json_array();
	char k[TL_KEY_MAX], gkey[TL_KEY_MAX];
	size_t i;

	if (out == NULL || tl_key(k, "m/%s", module) != 0 ||
	    tl_rec_get(t, p->graph, k, &m) != 0)
		return out;
	if (tl_bn_get(m.m, "embedded", &arr) == 0)
		for (i = 0; i < tl_bn_len(arr); i++) {
			struct tl_bnode e = tl_bn_at(arr, i);
			struct tl_grant g;
			struct tl_rebind mv;
			char name[64] = "", type[64] = "", where[300];
			json_t *j;

			tl_bn_getstr(e, "name", name, sizeof(name));
			tl_bn_getstr(e, "type", type, sizeof(type));
			if (tl_grant_key(gkey, module, name, node) != 0)
				continue;
			j = json_pack("{s:s,s:s,s:s}", "name", name, "type",
			    type, "grant", gkey);
			if (j == NULL)
				continue;
			if (tl_grant_get(t, p, gkey, &g, NULL) != 0) {
				json_object_set_new(j, "serves",
				    json_string("its own instance"));
				json_object_set_new(j, "grant_state",
				    json_string("not requested"));
			} else {
				if (TL_GRANT_IS_EMBEDDED(&g))
					snprintf(where, sizeof(where), "its own "
					    "instance");
				else
					snprintf(where, sizeof(where),
					    "consolidated onto %s", g.provider);
				json_object_set_new(j, "serves",
				    json_string(where));
				if (!TL_GRANT_IS_EMBEDDED(&g))
					json_object_set_new(j, "provider",
					    json_string(g.provider));
				json_object_set_new(j, "grant_state",
				    json_string(g.state));
				json_object_set_new(j, "version",
				    json_integer((json_int_t)g.version));
			}
			if (tl_mv_get(t, p, gkey, &mv) == 0 &&
			    mv.from[0] == '\0')
				json_object_set_new(j, "consolidating",
				    json_pack("{s:s,s:s}", "to", mv.to, "state",
				    mv.state));
			else if (tl_mv_failed(t, p, gkey, &mv) == 0 &&
			    mv.from[0] == '\0' && tl_grant_get(t, p, gkey, &g,
			    NULL) == 0 && TL_GRANT_IS_EMBEDDED(&g))
				json_object_set_new(j, "consolidation_failed",
				    json_pack("{s:s,s:s,s:s}", "to", mv.to,
				    "step", mv.step, "reason", mv.reason));
			json_array_append_new(out, j);
		}
	tl_rec_close(&m);
	return out;
}

int
tl_status_module(struct tl_txn *t, const struct tl_proj *p, const char *module,
    json_t **out)
{
	struct tl_nodelist nl;
	json_t *doc, *asgs;
	char k[TL_KEY_MAX];
	size_t i;
	int rc, worst = rank(TL_ST_READY), any = 0, nothing = 0;

	*out = NULL;
	if ((rc = tl_key(k, "m/%s", module)) != 0)
		return rc;
	if (!tl_rec_exists(t, p->graph, k))
		return TL_ENOTFOUND;
	if ((rc = tl_graph_module_nodes(t, p, module, &nl)) != 0)
		return rc;
	doc = json_pack("{s:s}", "module", module);
	asgs = json_array();
	for (i = 0; i < nl.n; i++) {
		struct req_arg ra = { t, p, module, nl.v[i], json_array(),
		    rank(TL_ST_READY), 0, 0, json_array() };
		const char *st;

		if ((rc = tl_key(k, "r/%s/", module)) != 0 ||
		    (rc = tl_rec_scan(t, p->graph, k, one_req, &ra)) != 0) {
			json_decref(ra.arr);
			json_decref(ra.skipped);
			goto fail;
		}
		if (ra.n == 0) {
			st = TL_ST_NOTHING;
			nothing = 1;
		} else {
			/* Ready once announced, and only while it holds. */
			if (ra.inst > 0 && ra.worst >= rank(TL_ST_MIGRATED)) {
				ra.worst = rank(TL_ST_MIGRATED);
				if (tl_key(k, "ar/%s@%s", module,
				    nl.v[i]) == 0 &&
				    tl_rec_exists(t, p->graph, k))
					ra.worst = rank(TL_ST_READY);
			}
			st = order[ra.worst];
		}
		if (ra.n > 0 && ra.worst < worst)
			worst = ra.worst;
		any = 1;
		{
			json_t *a = json_pack("{s:s,s:s,s:o}", "node",
			    nl.v[i], "state", st, "requirements", ra.arr);

			struct tl_rec ar;
			struct tl_bnode pa;

			char note[TL_WHY_MAX];

			if (settings_note(t, p, module, nl.v[i], note))
				json_object_set_new(a, "settings_note",
				    json_string(note));
			/* The parts it installs: absent is every one. */
			if (tl_key(k, "a/%s@%s", module, nl.v[i]) == 0 &&
			    tl_rec_get(t, p->graph, k, &ar) == 0) {
				if (tl_bn_get(ar.m, "parts", &pa) == 0)
					json_object_set_new(a, "parts",
					    parts_json(pa));
				tl_rec_close(&ar);
			}
			if (json_array_size(ra.skipped) > 0)
				json_object_set(a, "not_installed",
				    ra.skipped);
			/* What was composed from the node's inventory. */
			if (tl_key(k, "ad/%s@%s", module, nl.v[i]) == 0 &&
			    tl_rec_get(t, p->graph, k, &ar) == 0) {
				json_t *dj = tl_json_body(ar.raw, ar.rawlen);

				tl_rec_close(&ar);
				if (dj != NULL) {
					json_object_del(dj, "module");
					json_object_del(dj, "node");
					json_object_set_new(a, "derived", dj);
				}
			}
			json_decref(ra.skipped);
			json_object_set_new(a, "embedded", embedded_status(t,
			    p, module, nl.v[i]));
			json_array_append_new(asgs, a);
		}
	}
	json_object_set_new(doc, "state", json_string(!any ? TL_ST_UNASSIGNED :
	    nothing && worst == rank(TL_ST_READY) ? TL_ST_NOTHING : order[worst]));
	json_object_set_new(doc, "assignments", asgs);
	{
		struct tl_rec m;
		char inst[16] = "";

		/* Declared, or any (absent from the declaration). */
		if (tl_key(k, "m/%s", module) == 0 &&
		    tl_rec_get(t, p->graph, k, &m) == 0) {
			struct tl_bnode pa;

			tl_bn_getstr(m.m, "instances", inst, sizeof(inst));
			if (tl_bn_get(m.m, "parts", &pa) == 0)
				json_object_set_new(doc, "parts",
				    parts_json(pa));
			tl_rec_close(&m);
		}
		json_object_set_new(doc, "instances", json_string(inst[0] ?
		    inst : "any"));
	}
	tl_nodelist_free(&nl);
	*out = doc;
	return 0;
fail:
	tl_nodelist_free(&nl);
	json_decref(asgs);
	json_decref(doc);
	return rc;
}

struct all_arg {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	json_t			*arr;
};

static int
one_module(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct all_arg *aa = arg;
	json_t *j;
	int rc;

	(void)val;
	(void)vlen;
	if ((rc = tl_status_module(aa->t, aa->p, rest, &j)) != 0)
		return rc;
	return json_array_append_new(aa->arr, j) == 0 ? 0 : ENOMEM;
}

int
tl_status_all(struct tl_txn *t, const struct tl_proj *p, json_t **out)
{
	struct all_arg aa = { t, p, json_array() };
	int rc;

	*out = NULL;
	if ((rc = tl_rec_scan(t, p->graph, "m/", one_module, &aa)) != 0) {
		json_decref(aa.arr);
		return rc;
	}
	*out = json_pack("{s:o}", "modules", aa.arr);
	return 0;
}

static int
module_healthy(const json_t *m)
{
	const char *st = json_string_value(json_object_get(m, "state"));
	const json_t *a, *r;
	size_t i, j;

	json_array_foreach(json_object_get(m, "assignments"), i, a) {
		json_array_foreach(json_object_get(a, "requirements"), j, r)
			if (json_object_get(r, "drift") != NULL ||
			    json_object_get(r, "provider_down") != NULL ||
			    json_object_get(r, "migrations_blocked") != NULL)
				return 0;
	}
	return st != NULL && (strcmp(st, TL_ST_READY) == 0 ||
	    strcmp(st, TL_ST_NOTHING) == 0 || strcmp(st, TL_ST_UNASSIGNED) == 0);
}

int
tl_status_healthy(const json_t *st)
{
	const json_t *mods = json_object_get(st, "modules"), *m;
	size_t i;

	if (mods == NULL)
		return module_healthy(st);
	json_array_foreach(mods, i, m)
		if (!module_healthy(m))
			return 0;
	return 1;
}

struct attn_arg {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	uint64_t		 now_ns;
	json_t			*retained, *waiting, *cut, *overdue;
	json_t			*residual;	/* TL_ATTN_CLOCK, else NULL */
};

static int
attn_one(const struct tl_grant *g, void *arg)
{
	struct attn_arg *aa = arg;
	struct tl_nodelist nl;
	struct tl_rotation r;
	struct tl_event ev;
	uint64_t age, v;
	size_t i;
	int rc;

	if (aa->residual != NULL && (rc = tl_status_residual(aa->t, aa->p, g,
	    aa->now_ns, aa->residual)) != 0)
		return rc;
	if ((strcmp(g->state, TL_GRANT_REVOKED) == 0 &&
	    strcmp(g->policy, "retain") == 0) ||
	    strcmp(g->state, TL_GRANT_PURGING) == 0) {
		json_array_append_new(aa->retained, json_pack(
		    "{s:s,s:s,s:s,s:s,s:I}", "grant", g->id, "state", g->state,
		    "provider", g->provider, TL_GRANT_OBJECT_KEY, g->object, "bytes",
		    (json_int_t)g->retained_bytes));
		return 0;
	}
	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0)
		return 0;
	if (tl_rot_get(aa->t, aa->p, g->id, &r) == 0) {
		json_t *j = json_object(), *rot;

		rotation_status(aa->t, aa->p, g, j);
		rot = json_object_get(j, "rotation");
		if (rot != NULL && json_array_size(json_object_get(rot,
		    "waiting_on")) > 0)
			json_array_append_new(aa->waiting, json_pack(
			    "{s:s,s:O,s:O,s:O,s:O}", "grant", g->id, "from",
			    json_object_get(rot, "from"), "to",
			    json_object_get(rot, "to"), "started_ns",
			    json_object_get(rot, "started_ns"), "waiting_on",
			    json_object_get(rot, "waiting_on")));
		json_decref(j);
	} else if ((age = tl_rot_max_age(aa->t, aa->p, g)) != 0 &&
	    g->intent_seq != 0 && tl_log_get(aa->t, g->intent_seq, &ev) == 0 &&
	    ev.ts + age * 1000000000u <= aa->now_ns)
	{
		/*
		 * Due, and no rotation started: tallyd not running, capped,
		 * or held until its rotation window opens.
		 */
		char spec[TL_WIN_SPEC_MAX + 1], why[TL_WHY_MAX];
		struct tl_win w;
		json_t *o = json_pack("{s:s,s:I,s:I}", "grant", g->id, "age_s",
		    (json_int_t)((aa->now_ns - ev.ts) / 1000000000u),
		    "max_age_s", (json_int_t)age);

		tl_grant_window(aa->t, aa->p, g, spec, sizeof(spec));
		if (o != NULL && spec[0] != '\0' &&
		    tl_win_parse(spec, &w, why) == 0) {
			int64_t now = (int64_t)(aa->now_ns / 1000000000u);
			int64_t next = tl_win_next(&w, now);

			json_object_set_new(o, "window", json_string(spec));
			if (next > now)
				json_object_set_new(o, "window_opens_s",
				    json_integer(next));
		}
		json_array_append_new(aa->overdue, o);
	}
	if (tl_graph_module_nodes(aa->t, aa->p, g->module, &nl) != 0)
		return 0;
	for (i = 0; i < nl.n; i++) {
		char holder[140];

		if (g->node[0] != '\0' && strcmp(g->node, nl.v[i]) != 0)
			continue;
		snprintf(holder, sizeof(holder), "%s@%s", g->module, nl.v[i]);
		if ((v = tl_rot_cut_off(aa->t, aa->p, g->id, holder)) != 0) {
			char who[140];

			snprintf(who, sizeof(who), "%s/%s", nl.v[i], g->module);
			json_array_append_new(aa->cut, json_pack(
			    "{s:s,s:s,s:I}", "grant", g->id, "holder", who,
			    "version", (json_int_t)v));
		}
	}
	tl_nodelist_free(&nl);
	return 0;
}

struct rots_arg {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	json_t			*a;
};

static int
rots_one(const struct tl_rotation *r, void *arg)
{
	struct rots_arg *ra = arg;
	struct tl_grant g;
	json_t *j, *rot;

	if (tl_grant_get(ra->t, ra->p, r->grant, &g, NULL) != 0 ||
	    (j = json_object()) == NULL)
		return 0;
	rotation_status(ra->t, ra->p, &g, j);
	if ((rot = json_object_get(j, "rotation")) != NULL) {
		json_object_set_new(rot, "grant", json_string(g.id));
		json_array_append(ra->a, rot);
	}
	json_decref(j);
	return 0;
}

int
tl_status_rotations(struct tl_txn *t, const struct tl_proj *p, json_t **out)
{
	struct rots_arg ra = { t, p, json_array() };
	int rc;

	*out = NULL;
	if (ra.a == NULL)
		return ENOMEM;
	if ((rc = tl_rot_each(t, p, rots_one, &ra)) != 0) {
		json_decref(ra.a);
		return rc;
	}
	*out = ra.a;
	return 0;
}

struct held_arg {
	struct tl_txn	*t;
	json_t		*a;
};

/* A removal held for its confirmation (graph rh/MODULE). */
static int
held_one(const char *module, const void *val, size_t len, void *arg)
{
	struct held_arg *ha = arg;
	struct tl_event ev;
	struct tl_rec r;
	char what[1024] = "", when[64] = "";
	json_t *o;

	if (tl_rec_open(val, len, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "what", what, sizeof(what));
	if (tl_log_get(ha->t, r.seq, &ev) == 0)
		tl_json_time(ev.ts, when);
	o = json_pack("{s:s,s:s,s:I,s:s}", "module", module, "what", what,
	    "seq", (json_int_t)r.seq, "since", when);
	tl_rec_close(&r);
	return o == NULL ? ENOMEM : json_array_append_new(ha->a, o) == 0 ? 0 :
	    ENOMEM;
}

int
tl_status_attention(struct tl_txn *t, const struct tl_proj *p,
    uint64_t now_ns, unsigned flags, json_t **out)
{
	struct attn_arg aa = { t, p, now_ns, json_array(), json_array(),
	    json_array(), json_array(), (flags & TL_ATTN_CLOCK) ?
	    json_array() : NULL };
	int rc;

	*out = NULL;
	if ((rc = tl_grant_each(t, p, attn_one, &aa)) == 0)
		*out = json_pack("{s:o,s:o,s:o,s:o}", "retained", aa.retained,
		    "rotations_waiting", aa.waiting, "cut_off", aa.cut,
		    "rotations_overdue", aa.overdue);
	else {
		json_decref(aa.retained);
		json_decref(aa.waiting);
		json_decref(aa.cut);
		json_decref(aa.overdue);
	}
	if (rc == 0 && *out == NULL)
		rc = ENOMEM;
	if (rc == 0 && aa.residual != NULL) {
		if (json_array_size(aa.residual) > 0)
			json_object_set(*out, "residual", aa.residual);
		rc = tl_status_lagging(t, p, now_ns, *out);
	}
	json_decref(aa.residual);
	if (rc == 0) {
		struct held_arg ha = { t, json_array() };

		if (ha.a == NULL)
			rc = ENOMEM;
		else if ((rc = tl_rec_scan(t, p->graph, "rh/", held_one,
		    &ha)) == 0)
			json_object_set(*out, "removals_held", ha.a);
		json_decref(ha.a);
	}
	if (rc != 0) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}
