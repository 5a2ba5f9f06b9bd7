/*
 * session.c - a provider's admin side for a pass: its endpoint,
 * settings (with the driver's declared defaults) and its decrypted
 * admin password, loaded from the graph (session.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "core/error.h"
#include "drivers/util.h"
#include "projections/grant.h"
#include "projections/graph.h"
#include "mesh.h"
#include "mesh_ca.h"
#include "rx.h"
#include "session.h"

/*
 * The setting ca, public, as a file (pv->ca_file): HOME/tls/ca-DIGEST.pem,
 * named by the BLAKE2b of its bytes, so it is written once and a changed
 * ca is another file; written to a temporary name and renamed, so no
 * reader sees half of it.
 */
static int
ca_file(const struct tl_rx *rx, struct tl_rx_prov *pv)
{
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	const char *pem;
	unsigned char h[16];
	char hex[33], dir[1100], tmp[1300];
	size_t n, off = 0;
	ssize_t w;
	int fd, rc = 0;

	pv->ca_file[0] = '\0';
	tl_rx_prov_settings(pv, sv);
	if ((pem = tl_drv_setting_get(sv, "ca")) == NULL || *pem == '\0' ||
	    rx == NULL || rx->home[0] == '\0')
		return 0;
	n = strlen(pem);
	crypto_generichash(h, sizeof(h), (const unsigned char *)pem, n, NULL,
	    0);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	if ((size_t)snprintf(dir, sizeof(dir), "%s/tls", rx->home) >=
	    sizeof(dir) || (size_t)snprintf(pv->ca_file, sizeof(pv->ca_file),
	    "%s/ca-%s.pem", dir, hex) >= sizeof(pv->ca_file))
		return TL_ETOOBIG;
	if (access(pv->ca_file, R_OK) == 0)
		return 0;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return errno;
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", pv->ca_file, (long)getpid());
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0644)) < 0)
		return errno;
	while (off < n && (w = write(fd, pem + off, n - off)) > 0)
		off += (size_t)w;
	if (off < n || fsync(fd) != 0)
		rc = errno != 0 ? errno : EIO;
	if (close(fd) != 0 && rc == 0)
		rc = errno;
	if (rc == 0 && rename(tmp, pv->ca_file) != 0)
		rc = errno;
	if (rc != 0) {
		unlink(tmp);
		pv->ca_file[0] = '\0';
	}
	return rc;
}

/*
 * The value of the first setting for use that is set (the operator's or
 * derived, in pv->setbuf), else the first declared default for that use
 * that is not empty, into v; v is left as it is when there is neither.
 */
static void
use_value(const struct tl_rx_prov *pv, enum tl_drv_use use, char *v,
    size_t cap)
{
	const struct tl_drv_setting *st;
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	const char *x;
	size_t i;

	tl_rx_prov_settings(pv, sv);
	for (i = 0; (st = tl_drv_setting_for(pv->decl, use, i)) != NULL;
	    i++)
		if ((x = tl_drv_setting_get(sv, st->name)) != NULL &&
		    x[0] != '\0') {
			snprintf(v, cap, "%s", x);
			return;
		}
	for (i = 0; (st = tl_drv_setting_for(pv->decl, use, i)) != NULL;
	    i++)
		if (st->dflt != NULL && st->dflt[0] != '\0') {
			snprintf(v, cap, "%s", st->dflt);
			return;
		}
}

/* Is key among the settings already in pv->setbuf (the operator's)? */
static int
setbuf_has(const struct tl_rx_prov *pv, const char *key, size_t kl)
{
	size_t off = 0, n;

	while (off < pv->setlen) {
		n = strlen(pv->setbuf + off);
		if (n == kl && memcmp(pv->setbuf + off, key, kl) == 0)
			return 1;
		off += n + 1;
		off += strlen(pv->setbuf + off) + 1;
	}
	return 0;
}

/*
 * The settings composed from the node's inventory (assignment.derived,
 * ad/MODULE@NODE) that the driver declares, after the assignment's own
 * (which win): a driver receives only the settings it declares, the
 * others are shown by tally explain and go no further.
 */
static void
derived_settings(struct tl_txn *t, const struct tl_proj *p,
    struct tl_rx_prov *pv)
{
	struct tl_rec d;
	struct tl_bnode n, kn, vn;
	const char *ks, *vs;
	char k[TL_KEY_MAX], name[64];
	size_t i, kl, vl;

	if (pv->decl == NULL || pv->decl->settings == NULL ||
	    tl_key(k, "ad/%s@%s", pv->module, pv->node) != 0 ||
	    tl_rec_get(t, p->graph, k, &d) != 0)
		return;
	if (tl_bn_get(d.m, "settings", &n) == 0)
		for (i = 0; i < tl_bn_len(n) && i < TL_RX_SETTINGS_MAX; i++) {
			if (tl_bn_entry(n, i, &kn, &vn) != 0 ||
			    tl_bn_str(kn, &ks, &kl) != 0 ||
			    tl_bn_str(vn, &vs, &vl) != 0 || kl >= sizeof(name) ||
			    memchr(ks, '\0', kl) != NULL ||
			    memchr(vs, '\0', vl) != NULL ||
			    pv->setlen + kl + vl + 2 > sizeof(pv->setbuf))
				continue;
			memcpy(name, ks, kl);
			name[kl] = '\0';
			if (tl_drv_setting_find(pv->decl->settings, name) ==
			    NULL || setbuf_has(pv, ks, kl))
				continue;
			memcpy(pv->setbuf + pv->setlen, ks, kl);
			pv->setlen += kl;
			pv->setbuf[pv->setlen++] = '\0';
			memcpy(pv->setbuf + pv->setlen, vs, vl);
			pv->setlen += vl;
			pv->setbuf[pv->setlen++] = '\0';
		}
	tl_rec_close(&d);
}

/*
 * tls=verify set and no ca: the mesh CA's certificate is the ca, so a
 * provider whose server certificate the mesh CA issued needs no file
 * of its own.  Only when verify is asked for in so many words: a
 * provider that verifies by its reach alone keeps its own rule.
 */
static void
mesh_ca_setting(struct tl_txn *t, const struct tl_proj *p,
    struct tl_rx_prov *pv)
{
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	const char *tls, *ca;
	char pem[TL_DRV_PEM_MAX + 1];
	size_t n;

	if (pv->decl == NULL ||
	    tl_drv_setting_find(pv->decl->settings, "ca") == NULL ||
	    pv->decl->credential.kind == TL_DRV_CRED_CERTIFICATE)
		return;
	tl_rx_prov_settings(pv, sv);
	tls = tl_drv_setting_get(sv, "tls");
	ca = tl_drv_setting_get(sv, "ca");
	/* A ca set, even empty, is the operator's. */
	if (tls == NULL || strcmp(tls, "verify") != 0 || ca != NULL ||
	    tl_rx_mesh_ca(t, p, pem, sizeof(pem)) != 0)
		return;
	n = strlen(pem);
	if (pv->setlen + sizeof("ca") + n + 1 > sizeof(pv->setbuf))
		return;
	memcpy(pv->setbuf + pv->setlen, "ca", sizeof("ca"));
	pv->setlen += sizeof("ca");
	memcpy(pv->setbuf + pv->setlen, pem, n + 1);
	pv->setlen += n + 1;
}

int
tl_rx_load_provider(struct tl_txn *t, const struct tl_proj *p, struct tl_rx *rx,
    const char *id, const char *type, struct tl_rx_prov *pv, char *driver,
    int *drop)
{
	struct tl_rec r;
	struct tl_bnode types, n;
	char k[TL_KEY_MAX];
	size_t i;
	int rc;

	memset(pv, 0, sizeof(*pv));
	snprintf(pv->id, sizeof(pv->id), "%s", id);
	/* Its admin view names our mesh: rx's, else the log's (a CLI's). */
	if (rx != NULL && rx->mesh[0] != '\0')
		snprintf(pv->mesh, sizeof(pv->mesh), "%s", rx->mesh);
	else if ((rc = tl_mesh_get(t, pv->mesh)) != 0)
		return rc;
	if ((rc = tl_key(k, "p/%s", id)) != 0 ||
	    (rc = tl_rec_get(t, p->graph, k, &r)) != 0)
		return rc;
	tl_bn_getstr(r.m, "node", pv->node, sizeof(pv->node));
	tl_bn_getstr(r.m, "module", pv->module, sizeof(pv->module));
	driver[0] = '\0';
	if (tl_bn_get(r.m, "types", &types) == 0)
		for (i = 0; i < tl_bn_len(types); i++) {
			char ty[64] = "", rv[16] = "";

			tl_bn_getstr(tl_bn_at(types, i), "type", ty,
			    sizeof(ty));
			if (strcmp(ty, type) != 0)
				continue;
			tl_bn_getstr(tl_bn_at(types, i), "driver", driver, 64);
			tl_bn_getstr(tl_bn_at(types, i), "revoke", rv,
			    sizeof(rv));
			*drop = strcmp(rv, "drop") == 0;
		}
	tl_rec_close(&r);

	if ((rc = tl_key(k, "n/%s", pv->node)) != 0 ||
	    (rc = tl_rec_get(t, p->graph, k, &r)) != 0)
		return rc;
	tl_bn_getstr(r.m, "routable", pv->routable, sizeof(pv->routable));
	tl_rec_close(&r);

	if ((rc = tl_key(k, "a/%s@%s", pv->module, pv->node)) != 0 ||
	    (rc = tl_rec_get(t, p->graph, k, &r)) != 0)
		return rc;
	tl_bn_getstr(r.m, "expose", pv->expose, sizeof(pv->expose));
	if (tl_bn_get(r.m, "settings", &n) == 0) {
		/* Every setting, for the driver to read its own. */
		for (i = 0; i < tl_bn_len(n) && i < TL_RX_SETTINGS_MAX; i++) {
			struct tl_bnode kn, vn;
			const char *ks, *vs;
			size_t kl, vl;

			tl_bn_entry(n, i, &kn, &vn);
			if (tl_bn_str(kn, &ks, &kl) != 0 ||
			    tl_bn_str(vn, &vs, &vl) != 0 ||
			    memchr(ks, '\0', kl) != NULL ||
			    memchr(vs, '\0', vl) != NULL ||
			    pv->setlen + kl + vl + 2 > sizeof(pv->setbuf))
				continue;
			memcpy(pv->setbuf + pv->setlen, ks, kl);
			pv->setlen += kl;
			pv->setbuf[pv->setlen++] = '\0';
			memcpy(pv->setbuf + pv->setlen, vs, vl);
			pv->setlen += vl;
			pv->setbuf[pv->setlen++] = '\0';
		}
	}
	/* What is not set is the driver's declared default (decl.h). */
	pv->decl = tl_drv_decl_find(driver);
	pv->ops = tl_drv_ops_of(pv->decl);
	derived_settings(t, p, pv);
	mesh_ca_setting(t, p, pv);
	/* The admin view, by what each setting is for (decl.h). */
	use_value(pv, TL_DRV_USE_ADMIN_HOST, pv->host, sizeof(pv->host));
	if (pv->host[0] == '\0')
		snprintf(pv->host, sizeof(pv->host), "%s", pv->routable);
	use_value(pv, TL_DRV_USE_PORT, pv->port, sizeof(pv->port));
	use_value(pv, TL_DRV_USE_ADMIN_USER, pv->user, sizeof(pv->user));
	{
		const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
		const char *mt;
		uint64_t secs = 0;

		/*
		 * Seconds per migration file; assign checked the value, so
		 * 0 (the default) only for a log older than the check.
		 */
		tl_rx_prov_settings(pv, sv);
		if ((mt = tl_drv_setting_get(sv, "migration-timeout")) !=
		    NULL && tl_drv_duration(mt, &secs) == 0 &&
		    secs <= UINT32_MAX)
			pv->mig_timeout = (unsigned)secs;
	}
	if ((rc = ca_file(rx, pv)) != 0) {
		tl_rec_close(&r);
		return rc;
	}
	if (tl_bn_get(r.m, "secrets", &n) == 0) {
		struct tl_bnode s;
		const void *ct;
		size_t len;
		char ad[TL_KEY_MAX];
		const struct tl_drv_setting *st =
		    tl_drv_setting_for(pv->decl, TL_DRV_USE_ADMIN_SECRET, 0);
		const char *sname = st != NULL ? st->name : "";

		if (st != NULL && tl_bn_get(n, sname, &s) == 0 &&
		    tl_bn_secret(s, &ct, &len) == 0 &&
		    len > TL_BOX_OVERHEAD &&
		    len - TL_BOX_OVERHEAD < sizeof(pv->password)) {
			snprintf(ad, sizeof(ad), "assignment/%s@%s:%s",
			    pv->module, pv->node, sname);
			if (tl_secret_decrypt(&rx->key, ad, strlen(ad), ct,
			    len, (uint8_t *)pv->password) != 0) {
				tl_rec_close(&r);
				return TL_ESECRET;
			}
			pv->password[len - TL_BOX_OVERHEAD] = '\0';
		}
		st = tl_drv_setting_for(pv->decl, TL_DRV_USE_ADMIN_KEY, 0);
		sname = st != NULL ? st->name : "";
		if (st != NULL && tl_bn_get(n, sname, &s) == 0 &&
		    tl_bn_secret(s, &ct, &len) == 0 &&
		    len > TL_BOX_OVERHEAD &&
		    len - TL_BOX_OVERHEAD < sizeof(pv->client_key)) {
			snprintf(ad, sizeof(ad), "assignment/%s@%s:%s",
			    pv->module, pv->node, sname);
			if (tl_secret_decrypt(&rx->key, ad, strlen(ad), ct,
			    len, (uint8_t *)pv->client_key) != 0) {
				tl_rec_close(&r);
				return TL_ESECRET;
			}
			pv->client_key[len - TL_BOX_OVERHEAD] = '\0';
		}
	}
	tl_rec_close(&r);
	return 0;
}

void
tl_rx_consumer_endpoint(const struct tl_rx_prov *pv, const struct tl_grant *g,
    enum tl_rx_ep_for who, const char *node,
    const char *sv[2 * TL_RX_SETTINGS_MAX + 1], char host[256],
    struct tl_drv_endpoint *ep)
{
	const char *h = pv->routable;

	if (strcmp(pv->expose, "local") == 0) {
		if (who == TL_RX_EP_HOLDER && node != NULL &&
		    strcmp(node, pv->node) == 0)
			h = "127.0.0.1";
		else if (who == TL_RX_EP_CHECK)
			h = pv->host;
	}
	snprintf(host, 256, "%s", h);
	memset(ep, 0, sizeof(*ep));
	ep->host = host;
	ep->port = who != TL_RX_EP_RECORD && g != NULL && g->port[0] != '\0' ?
	    g->port : pv->port;
	ep->settings = tl_rx_prov_settings(pv, sv);
	ep->ca_file = pv->ca_file[0] != '\0' ? pv->ca_file : NULL;
}

const char *const *
tl_rx_prov_settings(const struct tl_rx_prov *pv,
    const char *sv[2 * TL_RX_SETTINGS_MAX + 1])
{
	size_t off = 0, n = 0;

	while (off < pv->setlen && n < 2 * TL_RX_SETTINGS_MAX) {
		sv[n++] = pv->setbuf + off;
		off += strlen(pv->setbuf + off) + 1;
	}
	sv[n & ~(size_t)1] = NULL;
	return sv;
}

void
tl_rx_prov_admin(const struct tl_rx_prov *pv,
    const char *sv[2 * TL_RX_SETTINGS_MAX + 1], struct tl_drv_fence *f,
    struct tl_drv_admin *a)
{
	memset(a, 0, sizeof(*a));
	a->host = pv->host;
	a->port = pv->port;
	a->user = pv->user;
	a->password = pv->password;
	a->settings = tl_rx_prov_settings(pv, sv);
	a->ca_file = pv->ca_file[0] != '\0' ? pv->ca_file : NULL;
	{
		const struct tl_drv_setting *st = tl_drv_setting_for(pv->decl,
		    TL_DRV_USE_ADMIN_CERT, 0);

		a->client_cert = st != NULL ? tl_drv_setting_get(a->settings,
		    st->name) : NULL;
	}
	a->client_key = pv->client_key[0] != '\0' ? pv->client_key : NULL;
	a->mesh = pv->mesh;
	if (pv->epoch != 0) {
		f->mesh = pv->mesh;
		f->epoch = pv->epoch;
		f->leader = pv->leader;
		a->fence = f;
	}
}

void
tl_rx_prov_wipe(struct tl_rx_prov *pv)
{
	tl_secret_wipe(pv->password, sizeof(pv->password));
	tl_secret_wipe(pv->client_key, sizeof(pv->client_key));
}

void
tl_rx_prov_password(struct tl_rx *rx, const struct tl_rx_prov *pv, char *pw)
{
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	char why[TL_WHY_MAX];

	if (pv == NULL || pv->decl == NULL) {
		tl_secret_password(pw);
		return;
	}
	if (tl_drv_password(pv->decl, tl_rx_prov_settings(pv, sv), pw,
	    why) != 0) {
		tl_rx_log(rx, TL_RX_WARN, "provider %s: %s; a password of the "
		    "default policy instead", pv->id, why);
		tl_secret_password(pw);
	}
}
