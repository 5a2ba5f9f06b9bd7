/*
 * reminders.c - what tally status and tally-board remind of that
 * depends on the wall clock (status.h, TL_ATTN_CLOCK): the credentials a
 * revocation leaves valid, and the holders behind on a certificate's
 * renewal.
 *
 * Certificates are read from the graph: ci/GRANT/HOLDER (the latest
 * certificate issued to a holder) and cs/GRANT/SERIAL (every
 * certificate of the grant not yet expired when the grant last had one
 * issued: projections/graph.c).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "drivers/decl.h"
#include "grant.h"
#include "record.h"
#include "rotation.h"
#include "status.h"

/* The record at prefix + rest (a key tl_rec_keys collected). */
static int
get_at(struct tl_txn *t, const struct tl_proj *p, const char *prefix,
    const char *rest, struct tl_rec *r)
{
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "%s%s", prefix, rest)) != 0)
		return rc;
	return tl_rec_get(t, p->graph, k, r);
}

/*
 * The certificate holder runs with: of grant's certificates for holder
 * (cs/), the newest of a version it acknowledged.  0 and *out set; 1:
 * none.
 */
static int
in_use(struct tl_txn *t, const struct tl_proj *p, const char *grant,
    const char *holder, char serial[65], uint64_t *version,
    uint64_t *not_after)
{
	char prefix[TL_KEY_MAX];
	struct tl_rec_keys ks = { NULL, 0, 0 };
	size_t i;
	int found = 0;

	*version = 0;
	if (tl_key(prefix, "cs/%s/", grant) != 0 ||
	    tl_rec_keys(t, p->graph, prefix, &ks) != 0) {
		tl_rec_keys_free(&ks);
		return 1;
	}
	for (i = 0; i < ks.n; i++) {
		struct tl_rec r;
		char h[140] = "";
		uint64_t v;

		if (get_at(t, p, prefix, ks.v[i], &r) != 0)
			continue;
		tl_bn_getstr(r.m, "holder", h, sizeof(h));
		v = tl_bn_getu64(r.m, "version", 0);
		if (strcmp(h, holder) == 0 && v > *version &&
		    tl_rot_acked(t, p, grant, v, holder)) {
			*version = v;
			*not_after = tl_bn_getu64(r.m, "not_after", 0);
			snprintf(serial, 65, "%s", ks.v[i]);
			found = 1;
		}
		tl_rec_close(&r);
	}
	tl_rec_keys_free(&ks);
	return found ? 0 : 1;
}

static int
certs_lagging(struct tl_txn *t, const struct tl_proj *p, uint64_t now_ns,
    json_t *out)
{
	struct tl_rec_keys ks = { NULL, 0, 0 };
	size_t i;
	int rc;

	if ((rc = tl_rec_keys(t, p->graph, "ci/", &ks)) != 0) {
		tl_rec_keys_free(&ks);
		return rc;
	}
	for (i = 0; i < ks.n; i++) {
		char grant[TL_GRANT_ID_MAX + 1] = "", holder[140] = "";
		char serial[65];
		struct tl_grant g;
		struct tl_rec r;
		uint64_t v, renew, na, uv;

		if (get_at(t, p, "ci/", ks.v[i], &r) != 0)
			continue;
		tl_bn_getstr(r.m, "grant", grant, sizeof(grant));
		tl_bn_getstr(r.m, "holder", holder, sizeof(holder));
		v = tl_bn_getu64(r.m, "version", 0);
		renew = tl_bn_getu64(r.m, "renew_at", 0);
		tl_rec_close(&r);
		if (tl_grant_get(t, p, grant, &g, NULL) != 0 ||
		    strcmp(g.state, TL_GRANT_PROVISIONED) != 0)
			continue;
		/*
		 * Behind: its newest certificate is not the grant's version,
		 * or it has not acknowledged it, or the renewal point passed
		 * and no renewal started (tallyd not running?).
		 */
		if (v == g.version && tl_rot_acked(t, p, grant, v, holder) &&
		    (renew == 0 || now_ns < renew * 1000000000u))
			continue;
		if (in_use(t, p, grant, holder, serial, &uv, &na) != 0)
			continue;	/* none yet: the agents' lines say so */
		json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:I,s:I,"
		    "s:I,s:b}", "grant", grant, "holder", holder, "serial",
		    serial, "version", (json_int_t)uv, "not_after",
		    (json_int_t)na, "wanted", (json_int_t)g.version, "expired",
		    na * 1000000000u <= now_ns));
	}
	tl_rec_keys_free(&ks);
	return 0;
}

static int
certs_valid(struct tl_txn *t, const struct tl_proj *p, const char *grant,
    uint64_t now_ns, json_t *out, uint64_t *until_s)
{
	char prefix[TL_KEY_MAX];
	struct tl_rec_keys ks = { NULL, 0, 0 };
	size_t i;
	int rc;

	*until_s = 0;
	if ((rc = tl_key(prefix, "cs/%s/", grant)) != 0 ||
	    (rc = tl_rec_keys(t, p->graph, prefix, &ks)) != 0) {
		tl_rec_keys_free(&ks);
		return rc;
	}
	for (i = 0; i < ks.n; i++) {
		struct tl_rec r;
		char h[140] = "";
		uint64_t na;

		if (get_at(t, p, prefix, ks.v[i], &r) != 0)
			continue;
		tl_bn_getstr(r.m, "holder", h, sizeof(h));
		na = tl_bn_getu64(r.m, "not_after", 0);
		if (na * 1000000000u > now_ns) {
			json_array_append_new(out, json_pack("{s:s,s:s,s:I,"
			    "s:I}", "serial", ks.v[i],
			    "holder", h, "version", (json_int_t)
			    tl_bn_getu64(r.m, "version", 0), "not_after",
			    (json_int_t)na));
			if (na > *until_s)
				*until_s = na;
		}
		tl_rec_close(&r);
	}
	tl_rec_keys_free(&ks);
	return 0;
}

/*
 * A revoked grant whose driver declares that issued credentials outlive
 * the revocation (struct tl_drv_revocation, residual): while its
 * lifetime since the revocation has not passed, what stays valid, the
 * lifetime and until when.
 */
int
tl_status_residual(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, uint64_t now_ns, json_t *out)
{
	const struct tl_drv_decl *dd;
	const struct tl_drv_revocation *rv;
	const struct tl_drv_setting *st;
	struct tl_bnode types, n;
	struct tl_rec r;
	struct tl_event ev;
	char k[TL_KEY_MAX], driver[64] = "", module[64] = "", node[64] = "";
	char life[TL_DRV_SETTING_MAX + 1] = "";
	uint64_t secs, until;
	json_t *certs = NULL;
	size_t i;

	if ((strcmp(g->state, TL_GRANT_REVOKED) != 0 &&
	    strcmp(g->state, TL_GRANT_PURGED) != 0) ||
	    g->provider[0] == '\0' || tl_key(k, "p/%s", g->provider) != 0 ||
	    tl_rec_get(t, p->graph, k, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "module", module, sizeof(module));
	tl_bn_getstr(r.m, "node", node, sizeof(node));
	if (tl_bn_get(r.m, "types", &types) == 0)
		for (i = 0; i < tl_bn_len(types); i++) {
			char ty[64] = "";

			tl_bn_getstr(tl_bn_at(types, i), "type", ty,
			    sizeof(ty));
			if (strcmp(ty, g->type) == 0)
				tl_bn_getstr(tl_bn_at(types, i), "driver",
				    driver, sizeof(driver));
		}
	tl_rec_close(&r);
	if ((dd = tl_drv_decl_find(driver)) == NULL ||
	    (rv = dd->revocation) == NULL || rv->residual == NULL)
		return 0;
	if (rv->residual_setting != NULL) {
		/* The assignment may be gone (tally remove of the provider). */
		if (tl_key(k, "a/%s@%s", module, node) == 0 &&
		    tl_rec_get(t, p->graph, k, &r) == 0) {
			if (tl_bn_get(r.m, "settings", &n) == 0)
				tl_bn_getstr(n, rv->residual_setting, life,
				    sizeof(life));
			tl_rec_close(&r);
		}
		if (life[0] == '\0' && dd->settings != NULL &&
		    (st = tl_drv_setting_find(dd->settings,
		    rv->residual_setting)) != NULL && st->dflt != NULL)
			snprintf(life, sizeof(life), "%s", st->dflt);
	} else if (rv->residual_lifetime != NULL)
		snprintf(life, sizeof(life), "%s", rv->residual_lifetime);
	if (life[0] == '\0' || tl_drv_duration(life, &secs) != 0)
		return 0;
	if (dd->credential.kind == TL_DRV_CRED_CERTIFICATE) {
		/* Each certificate issued, until its own not-after. */
		uint64_t last;

		if ((certs = json_array()) == NULL || certs_valid(t,
		    p, g->id, now_ns, certs, &last) != 0 ||
		    json_array_size(certs) == 0) {
			json_decref(certs);
			return 0;
		}
		until = last * 1000000000u;
	} else {
		if (tl_log_get(t, g->state_seq, &ev) != 0)
			return 0;
		until = ev.ts + secs * 1000000000u;
		if (until <= now_ns)
			return 0;
	}
	json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,"
	    "s:o*}", "grant", g->id, "provider", g->provider, "residual",
	    rv->residual, "lifetime", life, "setting", rv->residual_setting ?
	    rv->residual_setting : "", "until_ns", (json_int_t)until,
	    "certificates", certs));
	return 0;
}

int
tl_status_lagging(struct tl_txn *t, const struct tl_proj *p, uint64_t now_ns,
    json_t *at)
{
	json_t *lag = json_array();
	int rc;

	if (lag == NULL)
		return ENOMEM;
	if ((rc = certs_lagging(t, p, now_ns, lag)) == 0 &&
	    json_array_size(lag) > 0)
		json_object_set(at, "certificates", lag);
	json_decref(lag);
	return rc;
}
