/*
 * fencing.c - how each provider of the record is fenced and reached
 * (fencing.h): what tally status and tally-board show of providers.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/decl.h"
#include "drivers/util.h"
#include "projections/record.h"
#include "reactors/fencing.h"
#include "reactors/mesh_ca.h"

static int
fence_id(const char *rest, const void *val, size_t vlen, void *arg)
{
	(void)val;
	(void)vlen;
	/* Provider ids are NODE/MODULE: every key under "p/" is one. */
	json_array_append_new(arg, json_string(rest));
	return 0;
}

/*
 * How tallyd reaches provider pid of driver dd (decl.h: the settings tls
 * and ca, admin-cert and admin-key), as {host, tls, ca, client_cert,
 * warning}: the admin host by the settings'
 * use, else the node's routable name; the mode its setting says, else
 * off on loopback and verify elsewhere.  NULL for a driver that reaches
 * nothing over a network (no setting tls).
 */
static json_t *
transport(struct tl_txn *t, const struct tl_proj *p, struct tl_rec *pr,
    const struct tl_drv_decl *dd)
{
	const struct tl_drv_setting *st;
	struct tl_rec r;
	struct tl_bnode n;
	char k[TL_KEY_MAX], node[64] = "", module[64] = "", host[256] = "";
	char where[256], v[640], vals[8][256];
	const char *sv[2 * 8 + 1];
	enum tl_drv_tls mode;
	const char *tls;
	int ca = 0, cc = 0, ck = 0, mesh_ca = 0;
	size_t i, nv = 0;
	json_t *o;

	if (tl_drv_setting_find(dd->settings, "tls") == NULL)
		return NULL;
	tl_bn_getstr(pr->m, "node", node, sizeof(node));
	tl_bn_getstr(pr->m, "module", module, sizeof(module));
	if (tl_key(k, "a/%s@%s", module, node) == 0 &&
	    tl_rec_get(t, p->graph, k, &r) == 0) {
		if (tl_bn_get(r.m, "settings", &n) == 0) {
			for (i = 0; host[0] == '\0' && (st = tl_drv_setting_for(dd,
			    TL_DRV_USE_ADMIN_HOST, i)) != NULL; i++)
				tl_bn_getstr(n, st->name, host, sizeof(host));
			ca = tl_bn_get(n, "ca", &(struct tl_bnode){ 0 }) == 0;
			if ((st = tl_drv_setting_for(dd, TL_DRV_USE_ADMIN_CERT,
			    0)) != NULL)
				cc = tl_bn_get(n, st->name,
				    &(struct tl_bnode){ 0 }) == 0;
			/* What the driver's reach reads: the plain settings. */
			for (st = dd->settings; st->name != NULL && nv < 8;
			    st++)
				if (!st->secret && st->kind != TL_DRV_PEM &&
				    tl_bn_getstr(n, st->name, vals[nv],
				    sizeof(vals[nv])) == 0 &&
				    vals[nv][0] != '\0') {
					sv[2 * nv] = st->name;
					sv[2 * nv + 1] = vals[nv];
					nv++;
				}
		}
		if (tl_bn_get(r.m, "secrets", &n) == 0 &&
		    (st = tl_drv_setting_for(dd, TL_DRV_USE_ADMIN_KEY, 0)) !=
		    NULL)
			ck = tl_bn_get(n, st->name, &(struct tl_bnode){ 0 }) ==
			    0;
		tl_rec_close(&r);
	}
	sv[2 * nv] = NULL;
	if (host[0] == '\0' && tl_key(k, "n/%s", node) == 0 &&
	    tl_rec_get(t, p->graph, k, &r) == 0) {
		tl_bn_getstr(r.m, "routable", host, sizeof(host));
		tl_rec_close(&r);
	}
	mode = tl_drv_reach(dd, sv, host, where, sizeof(where));
	snprintf(host, sizeof(host), "%s", where);
	/* tls=verify without a ca: the mesh CA's (reactors/session.c). */
	if (!ca && mode == TL_DRV_TLS_VERIFY &&
	    dd->credential.kind != TL_DRV_CRED_CERTIFICATE &&
	    tl_drv_setting_find(dd->settings, "ca") != NULL &&
	    (tls = tl_drv_setting_get(sv, "tls")) != NULL &&
	    strcmp(tls, "verify") == 0) {
		char *pem = malloc(TL_DRV_PEM_MAX + 1);

		mesh_ca = pem != NULL && tl_rx_mesh_ca(t, p, pem,
		    TL_DRV_PEM_MAX + 1) == 0;
		free(pem);
		ca = mesh_ca;
	}
	o = json_pack("{s:s,s:s,s:b,s:b,s:b}", "host", host, "tls",
	    tl_drv_tls_name(mode), "ca", ca, "client_cert", cc && ck,
	    "mesh_ca", mesh_ca);
	v[0] = '\0';
	if (cc != ck)
		snprintf(v, sizeof(v), "%s is set but not %s: tallyd refuses "
		    "to open a session", cc ? "admin-cert" : "admin-key",
		    cc ? "admin-key (--secret admin-key)" :
		    "admin-cert (--set admin-cert=FILE)");
	else if (cc && mode == TL_DRV_TLS_OFF)
		snprintf(v, sizeof(v), "admin-cert is set but tls is off: "
		    "tallyd refuses to open a session (a client certificate "
		    "is presented over TLS only)");
	else if (!tl_drv_host_loopback(host) && mode == TL_DRV_TLS_OFF)
		snprintf(v, sizeof(v), "plaintext to %s, not a loopback "
		    "address: admin credentials cross the network in clear",
		    host);
	else if (!tl_drv_host_loopback(host) && mode == TL_DRV_TLS_REQUIRE)
		snprintf(v, sizeof(v), "TLS to %s not verified: anyone on "
		    "the path can pose as the provider", host);
	else if (mode == TL_DRV_TLS_VERIFY && !ca && !dd->tls_system_ca)
		snprintf(v, sizeof(v), "tls is verify but no ca is set: "
		    "tallyd refuses to connect (--set ca=FILE)");
	if (v[0] != '\0')
		json_object_set_new(o, "warning", json_string(v));
	return o;
}

int
tl_rx_fencing(struct tl_txn *t, const struct tl_proj *p, json_t **out)
{
	json_t *ids = json_array(), *all = json_object(), *id;
	size_t i, k;
	int rc = ENOMEM;

	*out = NULL;
	if (ids == NULL || all == NULL ||
	    (rc = tl_rec_scan(t, p->graph, "p/", fence_id, ids)) != 0)
		goto out;
	json_array_foreach(ids, i, id) {
		const char *pid = json_string_value(id);
		struct tl_bnode types;
		struct tl_rec r;
		char key[TL_KEY_MAX];
		json_t *one = json_array();

		if (one == NULL || tl_key(key, "p/%s", pid) != 0 ||
		    tl_rec_get(t, p->graph, key, &r) != 0) {
			json_decref(one);
			continue;
		}
		for (k = 0; tl_bn_get(r.m, "types", &types) == 0 &&
		    k < tl_bn_len(types); k++) {
			char driver[64] = "";
			const struct tl_drv_decl *dd;
			const struct tl_drv_fence_decl *fd;
			json_t *e, *tr;

			tl_bn_getstr(tl_bn_at(types, k), "driver", driver,
			    sizeof(driver));
			dd = tl_drv_decl_find(driver);
			fd = dd != NULL ? dd->fencing : NULL;
			tr = dd != NULL ? transport(t, p, &r, dd) : NULL;
			e = json_pack("{s:s,s:s,s:s,s:s}",
			    "driver", driver, "kind", tl_drv_fencing_name(fd ?
			    fd->kind : TL_DRV_FENCE_NONE), "how", fd && fd->how ?
			    fd->how : "the driver declares no fence", "window",
			    fd && fd->window ? fd->window : "a deposed leader's "
			    "calls are not refused by the provider");
			if (tr != NULL)
				json_object_set_new(e, "transport", tr);
			json_array_append_new(one, e);
		}
		tl_rec_close(&r);
		json_object_set_new(all, pid, one);
	}
	*out = all;
	all = NULL;
	rc = 0;
out:
	json_decref(all);
	json_decref(ids);
	return rc;
}
