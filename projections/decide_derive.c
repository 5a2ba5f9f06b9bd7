/*
 * decide_derive.c - configuration derived from the node (seed 000: "a
 * declaration is composed per node from what the node reported").
 *
 * The node's inventory is an event (node.inventoried); a provider's
 * derived settings are structure in its declaration (from, times,
 * unit, min, max: no expression language), composed per assignment and
 * recorded as assignment.derived whenever an input changes: a new
 * inventory, the assignment's own settings (the operator's value wins,
 * recorded as overridden).  What is composed is kept in the record for
 * tally explain; a driver is handed only the settings it declares
 * (assignment settings, drivers/driver.h), so composing adds no words
 * about any provider here.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/vec.h"
#include "drivers/decl.h"
#include "ctx.h"
#include "decide_derive.h"
#include "events.h"
#include "graph.h"

static const char *const units[] = { "B", "KB", "MB", "GB", "TB", NULL };

static uint64_t
unit_bytes(const char *unit)
{
	size_t i;

	for (i = 0; units[i] != NULL; i++)
		if (strcmp(units[i], unit) == 0)
			return 1ULL << (10 * i);
	return 1;
}

struct modlist {
	char	(*v)[64];
	size_t	 n, cap;
};

/* an/NODE/MODULE: the rest of the key is the module. */
static int
collect_module(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct modlist *ml = arg;

	(void)val;
	(void)vlen;
	if (tl_vec_grow(&ml->v, &ml->cap, ml->n + 1, sizeof(ml->v[0])) != 0)
		return ENOMEM;
	snprintf(ml->v[ml->n++], 64, "%s", rest);
	return 0;
}

int
tl_dec_node_inventory(struct tl_ctx *c, const char *node,
    const struct tl_inventory *inv)
{
	struct tl_body b;
	struct modlist ml = { NULL, 0, 0 };
	char k[TL_KEY_MAX], stream[TL_KEY_MAX], pfx[TL_KEY_MAX];
	const void *enc, *old;
	size_t len, olen, i;
	uint64_t total = 0;
	int rc;

	if ((rc = tl_key(k, "n/%s", node)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "no node %s", node);
	if ((rc = tl_key(k, "nl/%s", node)) != 0)
		return rc;
	if (tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_EREFUSED, "node %s is lost: it reports "
		    "nothing any more", node);
	/*
	 * Refused rather than saturated: a total past 2^64-1 bytes is no
	 * disk anyone has, and a saturated one would be recorded as true.
	 */
	for (i = 0; i < inv->ndisks; i++) {
		if (inv->disks[i].size > UINT64_MAX - total)
			return tl_refuse(c, TL_EINVAL, "disks: the sizes add "
			    "up past 18446744073709551615 bytes (16 EiB); "
			    "disk %zu (%s) is where the total overflows", i,
			    inv->disks[i].path);
		total += inv->disks[i].size;
	}
	total = 0;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_NODE, node);
	tl_body_u64(&b, TL_F_MEMORY, inv->memory);
	tl_body_u64(&b, TL_F_CPUS, inv->cpus);
	tl_body_arr(&b, TL_F_DISKS);
	for (i = 0; i < inv->ndisks; i++) {
		tl_body_map(&b, NULL);
		tl_body_str(&b, TL_F_PATH, inv->disks[i].path);
		tl_body_u64(&b, TL_F_SIZE, inv->disks[i].size);
		tl_body_end(&b);
		total += inv->disks[i].size;
	}
	tl_body_end(&b);
	tl_body_u64(&b, TL_F_DISK, total);
	if ((rc = tl_body_finish(&b, &enc, &len)) != 0)
		goto out;
	if ((rc = tl_key(k, "ni/%s", node)) != 0)
		goto out;
	/* The same inventory again is no change. */
	if (tl_kv_get(c->t, c->p.graph, k, strlen(k), &old, &olen) == 0 &&
	    olen == len + 8 && memcmp((const uint8_t *)old + 8, enc, len) == 0)
		goto out;
	if ((rc = tl_key(stream, "node/%s", node)) != 0 ||
	    (rc = tl_emit_bytes(c, TL_EV_NODE_INVENTORIED, stream, enc, len,
	    &c->cause)) != 0)
		goto out;
	/* Collect first: recording derived settings writes the graph. */
	if ((rc = tl_key(pfx, "an/%s/", node)) != 0 ||
	    (rc = tl_rec_scan(c->t, c->p.graph, pfx, collect_module,
	    &ml)) != 0)
		goto out;
	for (i = 0; rc == 0 && i < ml.n; i++)
		rc = tl_dec_derive(c, ml.v[i], node);
out:
	free(ml.v);
	tl_body_free(&b);
	return rc;
}

/* The derivation of one key, on the inventory; its explanation in why. */
static int
compose(struct tl_bnode dv, struct tl_bnode inv, char *val, size_t vcap,
    char *why, size_t wcap)
{
	char from[16] = "", times[32] = "1", unit[8] = "";
	uint64_t src, min, max, mul, out;
	double f, x;

	tl_bn_getstr(dv, "from", from, sizeof(from));
	tl_bn_getstr(dv, "times", times, sizeof(times));
	tl_bn_getstr(dv, "unit", unit, sizeof(unit));
	min = tl_bn_getu64(dv, "min", 0);
	max = tl_bn_getu64(dv, "max", 0);
	src = tl_bn_getu64(inv, from, 0);
	f = strtod(times, NULL);
	x = floor((double)src * f);
	out = x >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)x;
	snprintf(why, wcap, "%s %llu x %s", from, (unsigned long long)src,
	    times);
	if (min != 0 && out < min) {
		out = min;
		snprintf(why + strlen(why), wcap - strlen(why), ", raised to "
		    "min");
	}
	if (max != 0 && out > max) {
		out = max;
		snprintf(why + strlen(why), wcap - strlen(why), ", cut to max");
	}
	mul = unit[0] != '\0' ? unit_bytes(unit) : 1;
	snprintf(val, vcap, "%llu%s", (unsigned long long)(out / mul), unit);
	return 0;
}

#define TOGETHER_MAX	32

/*
 * The derived values of provides entry prov that their settings accept
 * one by one, with the assignment's own settings, checked together by
 * the driver's settings_check: "" in why when it takes them (or has no
 * such rule), else why it does not.
 */
static void
check_together(const struct tl_drv_decl *dd, struct tl_bnode sets,
    struct tl_bnode inv, struct tl_bnode own, int have_own, char *why)
{
	char keys[TOGETHER_MAX][64], vals[TOGETHER_MAX][256];
	const char *sv[2 * TOGETHER_MAX + 1];
	struct tl_bnode kn, vn;
	const struct tl_drv_setting *ds;
	const char *ks;
	size_t i, kl, n = 0;

	why[0] = '\0';
	if (dd == NULL || dd->settings_check == NULL || dd->settings == NULL)
		return;
	for (i = 0; have_own && i < tl_bn_len(own) && n < TOGETHER_MAX; i++)
		if (tl_bn_entry(own, i, &kn, &vn) == 0 &&
		    tl_bn_str(kn, &ks, &kl) == 0 && kl < 64 &&
		    tl_bn_strcpy(vn, vals[n], sizeof(vals[n])) == 0) {
			memcpy(keys[n], ks, kl);
			keys[n][kl] = '\0';
			n++;
		}
	for (i = 0; i < tl_bn_len(sets) && n < TOGETHER_MAX; i++) {
		char whyc[TL_WHY_MAX], bad[TL_WHY_MAX];
		size_t j;
		int mine = 0;

		if (tl_bn_entry(sets, i, &kn, &vn) != 0 ||
		    tl_bn_str(kn, &ks, &kl) != 0 || kl >= 64)
			continue;
		memcpy(keys[n], ks, kl);
		keys[n][kl] = '\0';
		for (j = 0; j < n; j++)
			mine |= strcmp(keys[j], keys[n]) == 0;
		if (mine || (ds = tl_drv_setting_find(dd->settings,
		    keys[n])) == NULL)
			continue;	/* the operator's wins; undeclared: kept */
		compose(vn, inv, vals[n], sizeof(vals[n]), whyc, sizeof(whyc));
		if (tl_drv_setting_check(ds, vals[n], bad) == 0)
			n++;
	}
	for (i = 0; i < n; i++) {
		sv[2 * i] = keys[i];
		sv[2 * i + 1] = vals[i];
	}
	sv[2 * n] = NULL;
	if (dd->settings_check(sv, why) != 0 && why[0] == '\0')
		snprintf(why, TL_WHY_MAX, "refused taken together");
}

int
tl_dec_derive(struct tl_ctx *c, const char *module, const char *node)
{
	struct tl_rec m = { 0 }, a = { 0 }, ni = { 0 };
	struct tl_bnode prov, sets, own, inv;
	struct tl_body b;
	char k[TL_KEY_MAX], stream[TL_KEY_MAX];
	const void *enc, *old;
	size_t len, olen, i, j, nd = 0;
	uint64_t invseq = 0;
	int rc, have_inv;

	if ((rc = tl_key(k, "m/%s", module)) != 0)
		return rc;
	if ((rc = tl_rec_get(c->t, c->p.graph, k, &m)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	if ((rc = tl_key(k, "a/%s@%s", module, node)) != 0)
		goto done;
	if ((rc = tl_rec_get(c->t, c->p.graph, k, &a)) != 0) {
		rc = rc == TL_ENOTFOUND ? 0 : rc;
		goto done;
	}
	if (tl_bn_get(m.m, "provides", &prov) != 0)
		goto done;
	for (i = 0; i < tl_bn_len(prov); i++)
		if (tl_bn_get(tl_bn_at(prov, i), "settings", &sets) == 0)
			nd += tl_bn_len(sets);
	if (nd == 0)
		goto done;	/* derives nothing: records nothing */
	if ((rc = tl_key(k, "ni/%s", node)) != 0)
		goto done;
	have_inv = tl_rec_get(c->t, c->p.graph, k, &ni) == 0;
	if (have_inv) {
		inv = ni.m;
		invseq = ni.seq;
	}
	if (tl_bn_get(a.m, "settings", &own) != 0)
		own.p = NULL;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_MODULE, module);
	tl_body_str(&b, TL_F_NODE, node);
	tl_body_u64(&b, TL_F_INVENTORY, invseq);
	for (j = 0; j < 4; j++) {
		tl_body_map(&b, j == 0 ? "settings" : j == 1 ? "from" : j == 2 ?
		    "overridden" : "refused");
		for (i = 0; have_inv && i < tl_bn_len(prov); i++) {
			const struct tl_drv_decl *dd;
			char driver[64] = "", together[TL_WHY_MAX];
			size_t e;

			if (tl_bn_get(tl_bn_at(prov, i), "settings", &sets) != 0)
				continue;
			tl_bn_getstr(tl_bn_at(prov, i), "driver", driver,
			    sizeof(driver));
			dd = tl_drv_decl_find(driver);
			check_together(dd, sets, inv, own, own.p != NULL,
			    together);
			for (e = 0; e < tl_bn_len(sets); e++) {
				struct tl_bnode key, dv;
				const char *ks;
				size_t kl;
				char name[64], val[64], why[TL_WHY_MAX];
				char mine[256];
				char bad[TL_WHY_MAX];
				const struct tl_drv_setting *ds;

				if (tl_bn_entry(sets, e, &key, &dv) != 0 ||
				    tl_bn_str(key, &ks, &kl) != 0 || kl >= 64)
					continue;
				memcpy(name, ks, kl);
				name[kl] = '\0';
				compose(dv, inv, val, sizeof(val), why,
				    sizeof(why));
				mine[0] = '\0';
				if (own.p != NULL)
					tl_bn_getstr(own, name, mine,
					    sizeof(mine));
				/*
				 * A value the driver would refuse is never
				 * handed to it: recorded as refused, and
				 * the driver's own default stands.
				 */
				bad[0] = '\0';
				if (mine[0] == '\0' && dd != NULL &&
				    dd->settings != NULL &&
				    (ds = tl_drv_setting_find(dd->settings,
				    name)) != NULL &&
				    tl_drv_setting_check(ds, val, bad) == 0 &&
				    together[0] != '\0')
					/* Each one fits, not all at once. */
					snprintf(bad, sizeof(bad), "%s",
					    together);
				if (j == 0 && bad[0] == '\0')
					tl_body_str(&b, name, mine[0] ? mine :
					    val);
				else if (j == 1)
					tl_body_str(&b, name, why);
				else if (j == 2 && mine[0] != '\0')
					/* the operator's wins; what it hid */
					tl_body_str(&b, name, val);
				else if (j == 3 && bad[0] != '\0')
					tl_body_str(&b, name, bad);
			}
		}
		tl_body_end(&b);
	}
	if ((rc = tl_body_finish(&b, &enc, &len)) != 0)
		goto body;
	if ((rc = tl_key(k, "ad/%s@%s", module, node)) != 0)
		goto body;
	if (tl_kv_get(c->t, c->p.graph, k, strlen(k), &old, &olen) == 0 &&
	    olen == len + 8 && memcmp((const uint8_t *)old + 8, enc, len) == 0)
		goto body;
	tl_rec_close(&ni);
	tl_rec_close(&a);
	tl_rec_close(&m);
	if ((rc = tl_key(stream, "assignment/%s@%s", module, node)) == 0)
		rc = tl_emit_bytes(c, TL_EV_ASSIGN_DERIVED, stream, enc, len,
		    NULL);
body:
	tl_body_free(&b);
done:
	tl_rec_close(&ni);
	tl_rec_close(&a);
	tl_rec_close(&m);
	return rc;
}
