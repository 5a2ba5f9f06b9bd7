/*
 * ca_decl.c - the mesh CA's declaration: a provider whose objects are
 * the certificates it signs, in tallyd's own process, with a key that
 * lives sealed in the log like any admin secret.
 *
 * A mesh has one (instances: one-per-mesh).  At assign the operations
 * (ca.c) make its key and self-signed certificate, or check the pair an
 * organisation's CA gave (--secret ca-key, --set ca-cert=FILE), so that
 * a mesh may sit under that CA; the certificate is public and kept in
 * the log, so every standby has it.
 *
 * A requirement of x509-certificate gets a certificate per holder
 * (TL_DRV_CRED_CERTIFICATE): its common name the grant's login, its
 * alternative names what the requirement's params declare (sans), for
 * a key the holder's node makes and never sends.  The grant holds
 * nothing at the CA: create and revoke have nothing to do.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "decl.h"
#include "util.h"

/* A certificate's common name holds at most 64 bytes (ub-common-name). */
#define CA_NAME_MAX	63

static const char *const ca_types[] = { "x509-certificate", NULL };
static const char *const ca_tags[] = { "pki", NULL };

/*
 * What a holder maps: paths on its node, and when its certificate
 * expires (RFC 3339 UTC, filled on the node from the certificate it
 * holds).  None is secret: the key's path is not the key, which never
 * leaves the node.
 */
static const struct tl_drv_field ca_fields[] = {
	{ "certificate", 0 }, { "private-key", 0 }, { "ca-cert", 0 },
	{ "not-after", 0 }, { NULL, 0 }
};

static const char *const ca_yesno[] = { "yes", "no", NULL };

static const struct tl_drv_param ca_params[] = {
	{ "sans", 1, NULL, "the certificate's subject alternative names: "
	    "host names or IP addresses" },
	{ "server-auth", 0, ca_yesno, "yes: the certificate also serves a "
	    "TLS server (extended key usage serverAuth); no (default): a "
	    "client's only" },
	{ NULL, 0, NULL, NULL }
};

/* Each alternative name a host name or an address, at most 16. */
static int
ca_params_check(const char *const *pv, char *why)
{
	const char *sans = tl_drv_setting_get(pv, "sans"), *p, *nl;
	size_t n, count = 0;

	for (p = sans; p != NULL && *p != '\0'; p = nl != NULL ? nl + 1 :
	    p + n) {
		nl = strchr(p, '\n');
		n = nl != NULL ? (size_t)(nl - p) : strlen(p);
		if (n == 0 || n > 253 || strspn(p, "abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:*") < n)
			return tl_drv_why(why, TL_EINVAL, "sans: %.*s is not a "
			    "host name or an IP address", (int)(n > 80 ? 80 :
			    n), p);
		if (++count > 16)
			return tl_drv_why(why, TL_EINVAL, "sans: more than 16 "
			    "names");
		if (nl == NULL)
			break;
	}
	return 0;
}

/*
 * The grant's one name, the certificates' common name: the login, the
 * same for every version (a renewed certificate keeps the name a
 * provider knows the holder by), and the resource, which it names.
 */
static int
ca_names(const struct tl_drv_name_in *in, struct tl_drv_names *out,
    char *why)
{
	tl_drv_name_scheme(in, CA_NAME_MAX, out);
	out->owner[0] = '\0';
	memcpy(out->login, out->resource, sizeof(out->login));
	if (out->login[0] == '\0')
		return tl_drv_why(why, TL_EINVAL, "no name for %s", in->grant);
	return 0;
}

/* The three paths and the not-after, as the deliverer's tokens (decl.h). */
static int
ca_compose(const char *field, const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, char *out, size_t cap)
{
	const char *v = NULL;

	(void)g;
	if (strcmp(field, "certificate") == 0)
		v = ep->cert_path;
	else if (strcmp(field, "private-key") == 0)
		v = ep->key_path;
	else if (strcmp(field, "ca-cert") == 0)
		v = ep->ca_path;
	else if (strcmp(field, "not-after") == 0)
		v = ep->not_after;
	else {
		out[0] = '\0';
		return TL_ENOTFOUND;
	}
	if (v == NULL)
		v = "";
	if (strlen(v) >= cap)
		return TL_ETOOBIG;
	memcpy(out, v, strlen(v) + 1);
	return 0;
}

static const struct tl_drv_setting ca_settings[] = {
	{ "ca-cert", "", 0, TL_DRV_PEM, "the CA's certificate (a PEM file, "
	    "read at assign and kept in the log); made at assign, with its "
	    "key, when neither is given", 0, 0, TL_DRV_USE_ADMIN_CERT },
	{ "ca-key", "", 1, TL_DRV_PEM_KEY, "the CA's private key (PEM, "
	    "unencrypted, read from standard input up to its END line and "
	    "sealed in the log); with ca-cert", 0, 0, TL_DRV_USE_ADMIN_KEY },
	{ "lifetime", "24h", 0, TL_DRV_DURATION, "how long a certificate it "
	    "issues is valid", 60, 397ULL * 86400, TL_DRV_USE_PLAIN },
	{ "renew-at", "66", 0, TL_DRV_INT, "when a holder renews, in "
	    "percent of the lifetime", 10, 90, TL_DRV_USE_PLAIN },
	{ "key-type", "ecdsa-p256", 0, TL_DRV_STRING, "the holders' keys: "
	    "ecdsa-p256 (the one kind tally-node makes)", 0, 0,
	    TL_DRV_USE_PLAIN },
	{ "ca-lifetime", "1825d", 0, TL_DRV_DURATION, "how long a CA made at "
	    "assign is valid", 86400, 36500ULL * 86400, TL_DRV_USE_PLAIN },
	{ NULL, NULL, 0, TL_DRV_STRING, NULL, 0, 0, TL_DRV_USE_PLAIN }
};

/* Made or checked at assign (ca.c: ca_prepare). */
static const char *const ca_prepared[] = { "ca-cert", "ca-key", NULL };

static int
ca_settings_check(const char *const *sv, char *why)
{
	const char *kt = tl_drv_setting_get(sv, "key-type");

	if (kt != NULL && *kt != '\0' && strcmp(kt, "ecdsa-p256") != 0)
		return tl_drv_why(why, TL_EINVAL, "key-type %s: the holders' "
		    "keys are ecdsa-p256 (the one kind tally-node makes)", kt);
	return 0;
}

static const struct tl_drv_revocation ca_revocation = {
	.destroys = 0,
	.retain = 0,
	.revoke = "no certificate is signed for the grant again (the CA "
	    "keeps nothing per grant)",
	.retain_means = "nothing: a certificate holds no data",
	.purge = "forgets the grant",
	.residual = "the certificates already issued stay valid until they "
	    "expire",
	.residual_setting = "lifetime",
};

static const struct tl_drv_fence_decl ca_fencing = {
	TL_DRV_FENCE_EPOCH_CHECK,
	"nothing outside tallyd: the CA signs in the control plane's own "
	"process, which reads its epoch from the replication stream",
	"a deposed leader may sign for at most 10 s after it last read its "
	"epoch"
};

const struct tl_drv_decl tl_drv_ca_decl = {
	.name = "ca",
	.types = ca_types,
	.tags = ca_tags,
	.settings = ca_settings,
	.settings_check = ca_settings_check,
	.fields = ca_fields,
	.credential = { .kind = TL_DRV_CRED_CERTIFICATE },
	.params = ca_params,
	.params_check = ca_params_check,
	.revocation = &ca_revocation,
	.fencing = &ca_fencing,
	.caps = TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK),
	.name_max = CA_NAME_MAX,
	.names = ca_names,
	.compose = ca_compose,
	.prepared = ca_prepared,
	.instances = "one-per-mesh",
};
