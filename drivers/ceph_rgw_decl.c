/*
 * ceph_rgw_decl.c - the Ceph RGW driver's declaration (decl.h): its
 * type, settings, fields, revocation and fencing, and names and compose,
 * with the pure helpers the operations share (ceph_rgw-internal.h).
 * The operations, over the admin ops API and S3, are ceph_rgw.c's
 * (which states what a grant is on the object store).
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "ceph_rgw-internal.h"
#include "decl.h"
#include "util.h"

/* --- names, keys ------------------------------------------------------ */

int
tl_drv_rgw_name_ok(const char *s, int bucket)
{
	size_t n = strlen(s), i;

	if (n < 3 || n > RGW_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '-' || (!bucket && s[i] == '_')))
			return 0;
	return s[0] != '-' && s[n - 1] != '-';
}

/* The access key of the key pair whose secret is password. */
void
tl_drv_rgw_access_key(const char *login, const char *password, char out[24])
{
	static const char hex[] = "0123456789ABCDEF";
	unsigned char h[RGW_AK_HEX / 2];
	crypto_generichash_state st;
	size_t i;

	crypto_generichash_init(&st, (const unsigned char *)"tally-rgw-ak",
	    12, sizeof(h));
	crypto_generichash_update(&st, (const unsigned char *)login,
	    strlen(login) + 1);
	crypto_generichash_update(&st, (const unsigned char *)password,
	    strlen(password));
	crypto_generichash_final(&st, h, sizeof(h));
	out[0] = 'T';
	out[1] = 'L';
	for (i = 0; i < sizeof(h); i++) {
		out[2 + 2 * i] = hex[h[i] >> 4];
		out[3 + 2 * i] = hex[h[i] & 15];
	}
	out[2 + RGW_AK_HEX] = '\0';
	sodium_memzero(&st, sizeof(st));
}


/* --- pure -------------------------------------------------------------- */

/*
 * An adopted grant's: the user find_marked found, for every version (one
 * user, its keys the versions), and the bucket named after it.
 */
static int
adopted_names(const struct tl_drv_names *a, struct tl_drv_names *out,
    char *why)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	memcpy(out->login, a->login, sizeof(out->login));
	out->login[sizeof(out->login) - 1] = '\0';
	memcpy(out->owner, out->login, sizeof(out->owner));
	memcpy(out->resource, out->login, sizeof(out->resource));
	for (i = 0; out->resource[i] != '\0'; i++)
		if (out->resource[i] == '_')
			out->resource[i] = '-';
	if (!tl_drv_rgw_name_ok(out->login, 0) ||
	    strcmp(out->resource, a->resource) != 0)
		return tl_drv_why(why, TL_EINVAL, "adopted user \"%.64s\" and "
		    "bucket \"%.64s\": not the names of one RGW grant",
		    a->login, a->resource);
	return 0;
}

static int
rgw_names(const struct tl_drv_name_in *in, struct tl_drv_names *out,
    char *why)
{
	struct tl_drv_names n;
	size_t i;

	if (in->adopted != NULL && in->adopted->login[0] != '\0')
		return adopted_names(in->adopted, out, why);
	tl_drv_name_scheme(in, RGW_NAME_MAX, &n);
	memset(out, 0, sizeof(*out));
	memcpy(out->login, n.resource, sizeof(out->login));
	/* The bucket's owner is the user: a reader's grant is told it. */
	memcpy(out->owner, n.resource, sizeof(out->owner));
	memcpy(out->resource, n.resource, sizeof(out->resource));
	/* The digest stays: "_" -> "-" keeps names of two grants apart. */
	for (i = 0; out->resource[i] != '\0'; i++)
		if (out->resource[i] == '_')
			out->resource[i] = '-';
	if (!tl_drv_rgw_name_ok(out->login, 0) ||
	    !tl_drv_rgw_name_ok(out->resource, 1))
		return tl_drv_why(why, TL_EINVAL, "resource \"%.64s\": an RGW "
		    "bucket and user are [a-z0-9-] only, 3-63", in->resource);
	return 0;
}

/*
 * How tallyd reaches the RGW: at the endpoint setting's host when one is
 * given, else at host; the setting tls, else verify for an https
 * endpoint, else off on loopback and verify elsewhere.  rgw_open refuses
 * an endpoint whose scheme the mode contradicts.
 */
static enum tl_drv_tls
rgw_reach(const char *const *settings, const char *host, char *where,
    size_t cap)
{
	const char *e = tl_drv_setting_get(settings, "endpoint");
	const char *t = tl_drv_setting_get(settings, "tls");
	int https = 0;

	if (e == NULL || *e == '\0' ||
	    tl_drv_url_host(e, &https, where, cap) != 0)
		snprintf(where, cap, "%s", host != NULL ? host : "");
	if ((t == NULL || *t == '\0') && https)
		return TL_DRV_TLS_VERIFY;
	return tl_drv_tls_mode(settings, where);
}

/*
 * Whether a consumer of the RGW of ep gets https: the mode at its admin
 * host is not off (tl_drv_consumer_tls), so a tls=verify provider only
 * ever delivers https; a provider that is verify by default and has no
 * ca (which tallyd refuses to open) keeps the http endpoint it had.
 */
static int
rgw_tls(const struct tl_drv_endpoint *ep)
{
	return tl_drv_consumer_tls(&tl_drv_ceph_rgw_decl, ep) !=
	    TL_DRV_TLS_OFF;
}

static int
rgw_compose(const char *field, const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, char *out, size_t cap)
{
	const char *host = ep != NULL && ep->host != NULL ? ep->host : "";
	const char *port = ep != NULL && ep->port != NULL ? ep->port : "";
	const char *e = ep != NULL ? tl_drv_setting_get(ep->settings,
	    "endpoint") : NULL;
	const char *region = ep != NULL ? tl_drv_setting_get(ep->settings,
	    "region") : NULL;
	char ak[24];
	int n;

	if (cap == 0)
		return TL_ETOOBIG;
	out[0] = '\0';
	if (strcmp(field, "endpoint") == 0) {
		if (e != NULL && *e != '\0')
			n = snprintf(out, cap, "%s", e);
		else
			/* https when tallyd reaches the RGW by TLS. */
			n = snprintf(out, cap, strchr(host, ':') != NULL ?
			    "%s://[%s]:%s" : "%s://%s:%s", rgw_tls(ep) ?
			    "https" : "http", host, port);
	} else if (strcmp(field, "ca") == 0)
		return tl_drv_compose_ca(ep, out, cap);
	else if (strcmp(field, "region") == 0)
		n = snprintf(out, cap, "%s", region != NULL && *region !=
		    '\0' ? region : "default");
	else if (strcmp(field, "bucket") == 0)
		n = snprintf(out, cap, "%s", g->resource);
	else if (strcmp(field, "access-key") == 0) {
		if (g->password == NULL)
			return TL_EINVAL;
		tl_drv_rgw_access_key(g->login, g->password, ak);
		n = snprintf(out, cap, "%s", ak);
	} else if (strcmp(field, "secret-key") == 0) {
		if (g->password == NULL)
			return TL_EINVAL;
		n = snprintf(out, cap, "%s", g->password);
	} else
		return TL_ENOTFOUND;
	if (n < 0 || (size_t)n >= cap) {
		tl_secret_wipe(out, cap);
		out[0] = '\0';
		return TL_ETOOBIG;
	}
	return 0;
}

static const char *const rgw_types[] = { "s3-bucket", NULL };
static const char *const rgw_tags[] = { "object-store", "s3", NULL };
/* access-key follows from the password (it is delivered, not recorded). */
static const struct tl_drv_field rgw_fields[] = {
	{ "endpoint", 0 }, { "region", 0 }, { "bucket", 0 },
	{ "access-key", 1 }, { "secret-key", 1 }, { "ca", 0 }, { NULL, 0 }
};

static const struct tl_drv_revocation rgw_revocation = {
	.destroys = 0,
	.retain = 1,
	.revoke = "the user is suspended: its keys stop working at once",
	.retain_means = "the bucket is kept with its objects, nobody able to "
	    "use it (tally restore lifts the suspension)",
	.purge = "deletes the bucket with every object in it, then the user "
	    "with its keys",
};

static const struct tl_drv_fence_decl rgw_fencing = {
	TL_DRV_FENCE_BEFORE_CALL,
	"an object per mesh, tally-fence-MESH in the admin's canary bucket, "
	"raised by compare-and-set (a PUT conditional on its ETag) and read "
	"before each changing call",
	"a deposed leader's call that passed its read of the fence just "
	"before the promotion raised it may still land: one call, at most "
	"the 30 s request timeout"
};

static const struct tl_drv_setting rgw_settings[] = {
	{ "endpoint", "", 0, TL_DRV_STRING, "the S3 endpoint URL, "
	    "http://HOST:PORT or https://HOST:PORT (TLS; default: from "
	    "host, port and tls)", .use = TL_DRV_USE_PLAIN },
	{ "host", "", 0, TL_DRV_HOST, "where tallyd reaches the RGW "
	    "(default: the admin-host, else the node's routable name)",
	    .use = TL_DRV_USE_ADMIN_HOST },
	{ "admin-host", "", 0, TL_DRV_HOST, "the same, as other drivers "
	    "name it (host wins)", .use = TL_DRV_USE_ADMIN_HOST },
	{ "port", "7480", 0, TL_DRV_PORT, "the RGW's HTTP port (its https "
	    "port unless tls is off)", .use = TL_DRV_USE_PORT },
	{ "region", "default", 0, TL_DRV_STRING, "the SigV4 region (the "
	    "zonegroup's api name)", .use = TL_DRV_USE_PLAIN },
	{ "admin-access-key", NULL, 0, TL_DRV_STRING, "the access key of an "
	    "RGW user with caps users=*;buckets=*",
	    .use = TL_DRV_USE_ADMIN_USER },
	{ "admin-secret-key", "", 1, TL_DRV_STRING, "its secret key "
	    "(--secret)", .use = TL_DRV_USE_ADMIN_SECRET },
	TL_DRV_TLS_SETTINGS_SAYING("verify (the default: off for a "
	    "loopback admin host, verify for an https endpoint), require "
	    "(encrypted, not verified) or off", "a PEM file of the CA "
	    "certificates the RGW's certificate must chain to (read at "
	    "assign, kept in the log)"),
	TL_DRV_PASSWORD_SETTINGS(TL_DRV_PASSWORD_MIN, TL_DRV_PASSWORD_MAX),
	{ NULL, NULL, 0, TL_DRV_STRING, NULL, 0, 0, TL_DRV_USE_PLAIN }
};

static const char *const rgw_words[] = {
	"ceph", "rgw", "radosgw", "bucket", NULL
};

const struct tl_drv_decl tl_drv_ceph_rgw_decl = {
	.name = "ceph-rgw",
	.words = rgw_words,
	.types = rgw_types,
	.tags = rgw_tags,
	.settings = rgw_settings,
	.fields = rgw_fields,
	.credential = { .kind = TL_DRV_CRED_MULTI_PASSWORD },
	.revocation = &rgw_revocation,
	.fencing = &rgw_fencing,
	.caps = TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK_BULK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SIZE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ROTATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_LOSS) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_FIND_MARKED) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ADOPT) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ACCESS),
	.name_max = RGW_NAME_MAX,
	.keyed_names = 1,
	.names = rgw_names,
	.compose = rgw_compose,
	.reach = rgw_reach,
};
