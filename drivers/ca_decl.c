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
 * What it signs for a requirement (a certificate per holder, its key
 * made on the holder's node) is not built yet: not_granted says so,
 * and tally apply refuses a requirement of x509-certificate with it.
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

/* What a holder will map (issue 25): paths on its node, and the expiry. */
static const struct tl_drv_field ca_fields[] = {
	{ "certificate", 0 }, { "private-key", 0 }, { "ca-cert", 0 },
	{ "not-after", 0 }, { NULL, 0 }
};

static const struct tl_drv_setting ca_settings[] = {
	{ "ca-cert", "", 0, TL_DRV_PEM, "the CA's certificate (a PEM file, "
	    "read at assign and kept in the log); made at assign, with its "
	    "key, when neither is given", 0, 0, TL_DRV_USE_ADMIN_CERT },
	{ "ca-key", "", 1, TL_DRV_PEM_KEY, "the CA's private key (PEM, "
	    "unencrypted, read from standard input up to its END line and "
	    "sealed in the log); with ca-cert", 0, 0, TL_DRV_USE_ADMIN_KEY },
	{ "lifetime", "24h", 0, TL_DRV_DURATION, "how long a certificate it "
	    "issues is valid", 300, 397ULL * 86400, TL_DRV_USE_PLAIN },
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
	.revoke = "no certificate is signed for the grant again",
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
	.credential = { .kind = TL_DRV_CRED_NONE },
	.revocation = &ca_revocation,
	.fencing = &ca_fencing,
	.caps = 0,
	.name_max = CA_NAME_MAX,
	.prepared = ca_prepared,
	.instances = "one-per-mesh",
	.not_granted = "certificates for requirements (keys made on the "
	    "holder's node, signed by the mesh CA) are not issued yet: the "
	    "ca provider is the mesh's CA alone",
};
