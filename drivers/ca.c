/*
 * ca.c - the mesh CA's operations; its declaration is ca_decl.c's.
 *
 * The "provider" is a key and a certificate, held in tallyd's memory
 * for a session (the key in guarded memory, wiped at close) and never
 * written to a disk: the log keeps the key sealed under the master key
 * (the setting ca-key) and the certificate in clear (ca-cert: public).
 *
 * prepare (at assign): with neither setting given, a new P-256 CA whose
 * common name carries the mesh id (its mark: two meshes' CAs are never
 * mistaken for each other), valid for ca-lifetime; with both given, the
 * pair is checked (tl_x509_ca_check: the key is the certificate's, a
 * CA's, valid now) and kept as given, so a mesh may sit under an
 * organisation's CA; one without the other is refused.
 *
 * open checks the pair again (a CA that expired since assign is
 * unreachable, with why), so tally status and the verifier show it.
 * A grant holds nothing at the CA: create and revoke do nothing, check
 * finds the CA able to sign (it opened).  sign issues a holder's
 * certificate for its request under the policy the grant makes: CN the
 * login, SANs the requirement's sans, serverAuth with server-auth: yes,
 * valid for the setting lifetime.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/secret.h"
#include "core/x509.h"
#include "driver.h"
#include "util.h"

extern const struct tl_drv_decl tl_drv_ca_decl;

struct ca {
	struct tl_x509_ca *x;	/* parsed once per session */
	uint64_t	 lifetime_s;
	unsigned	 renew_pct;	/* renew-at */
	int64_t		 not_after;	/* the CA certificate's */
};

/* t as 2031-12-02T10:19:54Z. */
static void
utc(int64_t t, char out[32])
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL ||
	    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(out, 32, "%lld", (long long)t);
}

/* The duration setting name, its declared default when not given. */
static int
duration(const char *const *given, const char *name, uint64_t *s, char *why)
{
	const char *v = tl_drv_setting_get(given, name);

	if (v == NULL || *v == '\0')
		v = tl_drv_setting_default(&tl_drv_ca_decl, name);
	if (tl_drv_duration(v, s) != 0)
		return tl_drv_why(why, TL_EINVAL, "%s %s: not a duration",
		    name, v);
	return 0;
}

static int
ca_prepare(const char *const *given, const char *mesh,
    struct tl_drv_prepared *out, char *why)
{
	const char *cert = tl_drv_setting_get(given, "ca-cert");
	const char *key = tl_drv_setting_get(given, "ca-key");
	struct tl_x509_info info;
	char cn[TL_X509_CN_MAX + 1], xwhy[TL_WHY_MAX], until[32];
	char *kp = NULL, *cp = NULL;
	uint64_t life;
	int rc;

	memset(out, 0, sizeof(*out));
	if (cert != NULL && *cert == '\0')
		cert = NULL;
	if (key != NULL && *key == '\0')
		key = NULL;
	if ((cert == NULL) != (key == NULL))
		return tl_drv_why(why, TL_EINVAL, "ca-cert and ca-key go "
		    "together: give both (an existing CA: --set ca-cert=FILE "
		    "--secret ca-key) or neither (a CA is made)");
	if (cert != NULL) {
		if ((rc = tl_x509_ca_check(key, cert, (int64_t)time(NULL),
		    &info, xwhy)) != 0)
			return tl_drv_why(why, rc, "%s", xwhy);
		utc(info.not_after, until);
		snprintf(out->note, sizeof(out->note), "the CA CN=%s, valid "
		    "until %s, as given", info.cn, until);
		return 0;
	}
	if ((rc = duration(given, "ca-lifetime", &life, why)) != 0)
		return rc;
	if (mesh == NULL || strlen(mesh) != 32)
		return tl_drv_why(why, TL_EINVAL, "no mesh id: a mesh CA is "
		    "made for a mesh (tally mesh)");
	/* The mark: the mesh id in the name, as every object carries it. */
	snprintf(cn, sizeof(cn), "tally mesh CA %s", mesh);
	if ((rc = tl_x509_ca_make(cn, (unsigned)(life / 86400), &kp, &cp,
	    xwhy)) != 0)
		return tl_drv_why(why, rc, "%s", xwhy);
	if ((rc = tl_x509_info(cp, &info, xwhy)) != 0) {
		tl_secret_free(kp);
		free(cp);
		return tl_drv_why(why, rc, "%s", xwhy);
	}
	out->name[0] = "ca-cert";
	out->value[0] = cp;
	out->name[1] = "ca-key";
	out->value[1] = kp;
	out->secret[1] = 1;
	out->n = 2;
	utc(info.not_after, until);
	snprintf(out->note, sizeof(out->note), "made the mesh CA CN=%s, "
	    "ECDSA P-256, valid until %s", cn, until);
	return 0;
}

static int
ca_open(const struct tl_drv_admin *a, void **hp, char *why)
{
	struct tl_x509_info info;
	char xwhy[TL_WHY_MAX];
	const char *rp;
	uint64_t life;
	struct ca *h;
	int rc;

	*hp = NULL;
	if (a->client_cert == NULL || a->client_key == NULL)
		return tl_drv_why(why, TL_EINVAL, "no CA: ca-cert and ca-key "
		    "are recorded at assign (tally assign)");
	if ((rc = tl_x509_ca_check(a->client_key, a->client_cert,
	    (int64_t)time(NULL), &info, xwhy)) != 0)
		return tl_drv_why(why, rc == TL_EREFUSED ? TL_EUNREACH : rc,
		    "%s", xwhy);
	if ((rc = duration(a->settings, "lifetime", &life, why)) != 0)
		return rc;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	if ((rc = tl_x509_ca_load(a->client_key, a->client_cert, &h->x,
	    xwhy)) != 0) {
		free(h);
		return tl_drv_why(why, rc, "%s", xwhy);
	}
	h->lifetime_s = life;
	h->not_after = info.not_after;
	h->renew_pct = 66;
	if ((rp = tl_drv_setting_get(a->settings, "renew-at")) != NULL &&
	    *rp != '\0')
		h->renew_pct = (unsigned)strtoul(rp, NULL, 10);
	if (h->renew_pct < 10 || h->renew_pct > 90)
		h->renew_pct = 66;
	if (why != NULL) {
		char until[32];

		utc(info.not_after, until);
		snprintf(why, TL_WHY_MAX, "the CA CN=%s, valid until %s",
		    info.cn, until);
	}
	*hp = h;
	return 0;
}

static void
ca_close(void *hp)
{
	struct ca *h = hp;

	if (h == NULL)
		return;
	tl_x509_ca_free(h->x);
	free(h);
}

/* Nothing is kept at the CA for a grant. */
static int
ca_nothing(void *h, const struct tl_drv_grant *g, char *why)
{
	(void)h;
	(void)g;
	if (why != NULL)
		why[0] = '\0';
	return 0;
}

static int
ca_revoke(void *h, const struct tl_drv_grant *g, int drop, char *why)
{
	(void)drop;
	return ca_nothing(h, g, why);
}

/* The session opened: the CA can sign.  Nothing else to look at. */
static int
ca_check(void *h, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	(void)ep;
	*drift = TL_DRIFT_NONE;
	return ca_nothing(h, g, why);
}

static int
ca_sign(void *hp, const struct tl_drv_grant *g, const char *csr,
    char **cert, struct tl_drv_cert *info, char *why)
{
	struct ca *h = hp;
	const char *sans[TL_X509_SANS_MAX], *p, *nl;
	char buf[TL_DRV_PARAM_VALUE_MAX * TL_DRV_PARAM_ITEMS + 1];
	const char *list = g->params != NULL ? tl_drv_setting_get(g->params,
	    "sans") : NULL;
	const char *srv = g->params != NULL ? tl_drv_setting_get(g->params,
	    "server-auth") : NULL;
	struct tl_x509_policy pol;
	struct tl_x509_info xi;
	char xwhy[TL_WHY_MAX];
	size_t n = 0;
	int rc;

	*cert = NULL;
	/* The list's items, NUL-separated in a copy. */
	snprintf(buf, sizeof(buf), "%s", list != NULL ? list : "");
	for (p = buf; *p != '\0' && n < TL_X509_SANS_MAX; p = nl + 1) {
		sans[n++] = p;
		if ((nl = strchr(p, '\n')) == NULL)
			break;
		*(char *)nl = '\0';
	}
	memset(&pol, 0, sizeof(pol));
	pol.cn = g->login;
	pol.sans = sans;
	pol.nsans = n;
	pol.lifetime_s = h->lifetime_s;
	pol.server = srv != NULL && strcmp(srv, "yes") == 0;
	if ((rc = tl_x509_ca_sign(h->x, csr, &pol, cert, &xi, xwhy)) != 0)
		return tl_drv_why(why, rc, "%s", xwhy);
	snprintf(info->serial, sizeof(info->serial), "%s", xi.serial);
	info->not_before = xi.not_before;
	info->not_after = xi.not_after;
	/* From its issue (not_before allows for clock skew before it). */
	info->renew_at = xi.not_after - (int64_t)h->lifetime_s +
	    (int64_t)h->lifetime_s * (int64_t)h->renew_pct / 100;
	if (why != NULL)
		snprintf(why, TL_WHY_MAX, "issued serial %s for CN=%s",
		    xi.serial, xi.cn);
	return 0;
}

/*
 * A revocation list is current until the CA itself expires: verifiers
 * (a server's CRL file) refuse an expired list, and the operator copies
 * it by hand, so it does not lapse between revocations; tallyd signs
 * the next at once when a grant is revoked (reactors/crl.c) and appends
 * nothing while the mesh is idle.
 */
static int
ca_crl(void *hp, const char *const *serials, size_t n, uint64_t number,
    char **crl, struct tl_drv_crl *info, char *why)
{
	struct ca *h = hp;
	char xwhy[TL_WHY_MAX];
	int64_t now = (int64_t)time(NULL);
	int rc;

	info->this_update = now;
	info->next_update = h->not_after > now ? h->not_after : now + 1;
	if ((rc = tl_x509_ca_crl(h->x, serials, n, number, now,
	    info->next_update, crl, xwhy)) != 0)
		return tl_drv_why(why, rc, "%s", xwhy);
	if (why != NULL)
		snprintf(why, TL_WHY_MAX, "CRL %llu listing %zu certificate(s)",
		    (unsigned long long)number, n);
	return 0;
}

const struct tl_drv_ops tl_drv_ca = {
	.decl = &tl_drv_ca_decl,
	.open = ca_open,
	.close = ca_close,
	.create = ca_nothing,
	.check = ca_check,
	.set_password = ca_nothing,
	.fix_privileges = ca_nothing,
	.revoke = ca_revoke,
	.prepare = ca_prepare,
	.sign = ca_sign,
	.crl = ca_crl,
};
