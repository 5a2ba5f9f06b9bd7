/*
 * oidc_decl.c - the oidc driver's declaration (decl.h): its type,
 * settings, fields, credential model (the provider's secret handle),
 * revocation, fencing and isolation note, and names and compose, with
 * the pure helpers the operations share (oidc-internal.h: the handle's
 * reader, the client names).  The operations, over RFC 7591/7592 with
 * libcurl, are oidc.c's (which states what a grant is at the provider).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "decl.h"
#include "oidc-internal.h"
#include "util.h"

/* --- the handle ------------------------------------------------------ */

int
tl_drv_oi_str(const json_t *j, const char *key, char *out, size_t cap)
{
	const char *s = json_string_value(json_object_get(j, key));

	if (s == NULL || *s == '\0' || strlen(s) >= cap)
		return -1;
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

/*
 * g->handle into k: 0, TL_ENOTFOUND (none recorded), TL_EINVAL.  The
 * handle is JSON (hnd_write, oidc.c), read with jansson, which the
 * programs that read declarations link anyway.
 */
int
tl_drv_oi_hnd_read(const struct tl_drv_grant *g, struct oi_hnd *k, char *why)
{
	json_t *j;
	int rc = 0;

	memset(k, 0, sizeof(*k));
	if (g->handle == NULL || g->handle[0] == '\0')
		return TL_ENOTFOUND;
	if ((j = json_loads(g->handle, 0, NULL)) == NULL)
		return tl_drv_why(why, TL_EINVAL,
		    "the recorded client of grant "
		    "%.200s is unreadable", g->grant ? g->grant : "");
	if (tl_drv_oi_str(j, "client_id", k->id, sizeof(k->id)) != 0 ||
	    tl_drv_oi_str(j, "client_secret", k->secret, sizeof(k->secret)) != 0 ||
	    tl_drv_oi_str(j, "registration_access_token", k->rat,
	    sizeof(k->rat)) != 0 ||
	    tl_drv_oi_str(j, "registration_client_uri", k->uri,
	    sizeof(k->uri)) != 0 ||
	    tl_drv_oi_str(j, "token_endpoint", k->token, sizeof(k->token)) != 0)
		rc = tl_drv_why(why, TL_EINVAL, "the recorded client of grant "
		    "%.200s lacks a member", g->grant ? g->grant : "");
	else if (json_object_get(j, "adopted_auth_method") != NULL &&
	    tl_drv_oi_str(j, "adopted_auth_method", k->adopted,
	    sizeof(k->adopted)) != 0)
		rc = tl_drv_why(why, TL_EINVAL, "the recorded client of grant "
		    "%.200s has an unreadable adopted_auth_method",
		    g->grant ? g->grant : "");
	json_decref(j);
	if (rc != 0)
		sodium_memzero(k, sizeof(*k));
	return rc;
}

/* --- what tally registers -------------------------------------------- */

int
tl_drv_oi_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > OI_NAME_MAX)
		return 0;
	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		    *s == '_' || *s == '-'))
			return 0;
	return 1;
}

/* --- pure ------------------------------------------------------------ */

static int
oi_compose(const char *field, const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, char *out, size_t cap)
{
	struct oi_hnd k;
	const char *v = NULL;
	int rc = 0, n;

	if (cap == 0)
		return TL_ETOOBIG;
	out[0] = '\0';
	if (strcmp(field, "issuer") == 0) {
		v = tl_drv_setting_get(ep != NULL ? ep->settings : NULL,
		    "issuer");
		n = snprintf(out, cap, "%s", v != NULL ? v : "");
		return n < 0 || (size_t)n >= cap ? TL_ETOOBIG : 0;
	}
	/* "" without a ca: the system's CAs verify a public issuer. */
	if (strcmp(field, "ca") == 0)
		return tl_drv_compose_ca(ep, out, cap);
	if (strcmp(field, "client-id") != 0 &&
	    strcmp(field, "client-secret") != 0 &&
	    strcmp(field, "token-endpoint") != 0)
		return TL_ENOTFOUND;
	if (g == NULL || tl_drv_oi_hnd_read(g, &k, NULL) != 0)
		return TL_EINVAL;
	v = strcmp(field, "client-id") == 0 ? k.id :
	    strcmp(field, "client-secret") == 0 ? k.secret : k.token;
	n = snprintf(out, cap, "%s", v);
	if (n < 0 || (size_t)n >= cap) {
		sodium_memzero(out, cap);
		out[0] = '\0';
		rc = TL_ETOOBIG;
	}
	sodium_memzero(&k, sizeof(k));
	return rc;
}

static int
oi_names(const struct tl_drv_name_in *in, struct tl_drv_names *out,
    char *why)
{
	struct tl_drv_names n;

	tl_drv_name_scheme(in, OI_NAME_MAX, &n);
	memset(out, 0, sizeof(*out));
	memcpy(out->resource, n.resource, sizeof(out->resource));
	memcpy(out->login, n.login, sizeof(out->login));
	if (!tl_drv_oi_name_ok(out->login))
		return tl_drv_why(why, TL_EINVAL, "resource \"%.64s\": an oidc "
		    "client name is [a-z0-9_-] only", in->resource);
	return 0;
}

static const char *const oi_types[] = { "oidc-client", NULL };
static const char *const oi_tags[] = { "identity", "oauth", NULL };
static const struct tl_drv_field oi_fields[] = {
	{ "issuer", 0 }, { "client-id", 0 }, { "client-secret", 1 },
	{ "token-endpoint", 0 }, { "ca", 0 }, { NULL, 0 }
};

static const struct tl_drv_revocation oi_revocation = {
	.destroys = 0,
	.retain = 0,
	.revoke = "the client is deleted (RFC 7592): it gets no new token; "
	    "tokens already issued stay valid until they expire (the "
	    "provider's access-token lifetime, setting token-lifetime, "
	    "default 10 minutes) at "
	    "resource servers that check them locally",
	.retain_means = "nothing to retain: a client holds no data",
	.purge = "the same as revoke: the client is deleted",
	.residual = "access tokens issued to the client stay valid until "
	    "they expire at resource servers that check them locally",
	.residual_setting = "token-lifetime",
};

/*
 * How tallyd reaches the issuer: at the issuer's host; the setting tls,
 * else verify for an https issuer and off for an http one (which open
 * takes on loopback only).
 */
static enum tl_drv_tls
oi_reach(const char *const *settings, const char *host, char *where,
    size_t cap)
{
	const char *iss = tl_drv_setting_get(settings, "issuer");
	const char *t = tl_drv_setting_get(settings, "tls");
	int https = 0;

	if (iss == NULL || tl_drv_url_host(iss, &https, where, cap) != 0)
		snprintf(where, cap, "%s", host != NULL ? host : "");
	if (t != NULL && *t != '\0')
		return tl_drv_tls_mode(settings, where);
	return https ? TL_DRV_TLS_VERIFY : TL_DRV_TLS_OFF;
}

static const struct tl_drv_setting oi_settings[] = {
	{ "issuer", NULL, 0, TL_DRV_STRING, "the issuer's URL (https; http "
	    "only on loopback); endpoints come from its discovery document",
	    .use = TL_DRV_USE_PLAIN },
	{ "initial-access-token", "", 1, TL_DRV_STRING, "the initial "
	    "access token for RFC 7591 registration (--secret): the admin's "
	    "credential", .use = TL_DRV_USE_ADMIN_SECRET },
	{ "token-lifetime", "10m", 0, TL_DRV_DURATION, "the provider's "
	    "access-token lifetime, shown as how long issued tokens outlive "
	    "a revocation (tally changes nothing at the provider with it)",
	    .use = TL_DRV_USE_PLAIN },
	TL_DRV_TLS_SETTINGS_SAYING("verify (the default for an https "
	    "issuer), require (encrypted, not verified) or off (the default "
	    "for an http issuer, on loopback only)", "a PEM file of the CA "
	    "certificates the issuer's certificate must chain to (read at "
	    "assign, kept in the log); none: the system's CAs, for an "
	    "issuer on the public web"),
	{ NULL, NULL, 0, TL_DRV_STRING, NULL, 0, 0, TL_DRV_USE_PLAIN }
};

/*
 * What a requirement of type oidc-client may declare: the client's
 * metadata for signing users in (RFC 7591 section 2, OpenID Connect
 * RP-Initiated Logout).  Left out, a client is client_credentials only,
 * as before params existed.  Only confidential clients: a public one
 * (token_endpoint_auth_method none) has no credential for tally to
 * deliver, verify or rotate.
 */
static const char *const oi_grant_types[] = { "authorization_code",
	"refresh_token", "client_credentials", NULL };
static const char *const oi_response_types[] = { "code", NULL };
static const char *const oi_auth_methods[] = { "client_secret_basic",
	"client_secret_post", NULL };

static const struct tl_drv_param oi_params[] = {
	{ "redirect-uris", 1, NULL, "where the identity provider may send a "
	    "user back with a code: absolute https URIs (http only on "
	    "loopback), no fragment" },
	{ "grant-types", 1, oi_grant_types, "authorization_code, "
	    "refresh_token, client_credentials (default: client_credentials)" },
	{ "response-types", 1, oi_response_types, "code (the default with "
	    "authorization_code)" },
	{ "post-logout-redirect-uris", 1, NULL, "where a user may be sent "
	    "after signing out: as redirect-uris" },
	{ "token-endpoint-auth-method", 0, oi_auth_methods,
	    "client_secret_basic (default) or client_secret_post" },
	{ NULL, 0, NULL, NULL }
};

/* Is the authority a (the URI's after "http://", alen bytes) loopback? */
static int
loopback(const char *a, size_t alen)
{
	static const char *const hosts[] = { "127.0.0.1", "localhost",
		"[::1]", NULL };
	const char *const *h;
	size_t n;

	/* A userinfo would put the loopback name before the real host. */
	if (memchr(a, '@', alen) != NULL)
		return 0;
	for (h = hosts; *h != NULL; h++) {
		n = strlen(*h);
		/* The host alone, or with a port of the client's. */
		if (alen >= n && strncmp(a, *h, n) == 0 && (alen == n ||
		    a[n] == ':'))
			return 1;
	}
	return 0;
}

/* Each of the '\n'-joined URIs of v: https, or http on loopback. */
static int
uris_ok(const char *name, const char *v, char *why)
{
	char u[TL_DRV_PARAM_VALUE_MAX + 1];
	const char *nl;
	size_t n;

	for (; v != NULL; v = nl != NULL ? nl + 1 : NULL) {
		nl = strchr(v, '\n');
		n = nl != NULL ? (size_t)(nl - v) : strlen(v);
		if (n >= sizeof(u))
			n = sizeof(u) - 1;
		memcpy(u, v, n);
		u[n] = '\0';
		if (strchr(u, '#') != NULL || strchr(u, ' ') != NULL)
			return tl_drv_why(why, TL_EINVAL, "%s: %.200s has a "
			    "fragment or a space", name, u);
		if (strncmp(u, "https://", 8) == 0 && u[8] != '\0' &&
		    u[8] != '/')
			continue;
		if (strncmp(u, "http://", 7) != 0)
			return tl_drv_why(why, TL_EINVAL, "%s: %.200s is not "
			    "an absolute https URI", name, u);
		if (!loopback(u + 7, strcspn(u + 7, "/?")))
			return tl_drv_why(why, TL_EINVAL, "%s: %.200s is http "
			    "to a host that is not loopback (https only: RFC "
			    "8252, the OAuth security BCP)", name, u);
	}
	return 0;
}

/* Has the '\n'-joined list v the item it? */
static int
has_item(const char *v, const char *it)
{
	size_t n = strlen(it);

	for (; v != NULL; v = strchr(v, '\n'), v = v != NULL ? v + 1 : NULL)
		if (strncmp(v, it, n) == 0 && (v[n] == '\0' || v[n] == '\n'))
			return 1;
	return 0;
}

static int
oi_params_check(const char *const *pv, char *why)
{
	const char *gt = tl_drv_setting_get(pv, "grant-types"),
	    *ru = tl_drv_setting_get(pv, "redirect-uris"),
	    *rt = tl_drv_setting_get(pv, "response-types"),
	    *lo = tl_drv_setting_get(pv, "post-logout-redirect-uris");
	int code = gt != NULL && has_item(gt, "authorization_code");
	int rc;

	if ((ru != NULL && (rc = uris_ok("redirect-uris", ru, why)) != 0) ||
	    (lo != NULL && (rc = uris_ok("post-logout-redirect-uris", lo,
	    why)) != 0))
		return rc;
	if (code && ru == NULL)
		return tl_drv_why(why, TL_EINVAL, "grant-types: "
		    "authorization_code needs redirect-uris");
	if (!code && (ru != NULL || rt != NULL || lo != NULL))
		return tl_drv_why(why, TL_EINVAL, "%s serves only the "
		    "authorization_code grant, which grant-types does not "
		    "name", ru != NULL ? "redirect-uris" : rt != NULL ?
		    "response-types" : "post-logout-redirect-uris");
	if (gt != NULL && has_item(gt, "refresh_token") && !code)
		return tl_drv_why(why, TL_EINVAL, "grant-types: refresh_token "
		    "follows a user's authorization_code grant, which it does "
		    "not name");
	return 0;
}

int
tl_drv_oi_has(const struct tl_drv_grant *g, const char *param,
    const char *item, const char *dflt)
{
	const char *v = g != NULL ? tl_drv_setting_get(g->params, param) :
	    NULL;

	return has_item(v != NULL ? v : dflt, item);
}

#define OI_STR(x)	#x
#define OI_XSTR(x)	OI_STR(x)

/*
 * RFC 7591/7592 give tally nothing a second control plane must respect:
 * any holder of the initial access token registers, any holder of a
 * client's registration access token changes or deletes it.  So the
 * control plane checks its own epoch before each call instead.
 */
static const struct tl_drv_fence_decl oi_fencing = {
	TL_DRV_FENCE_EPOCH_CHECK,
	"nothing on the identity provider: before each call tallyd reads the "
	"replication stream for a later promotion (at most every "
	OI_XSTR(TL_DRV_EPOCH_CHECK_S) " s) and makes no call it cannot "
	"confirm",
	"a deposed leader may still start calls for up to "
	OI_XSTR(TL_DRV_EPOCH_CHECK_S) " s after the promotion reached the "
	"stream, each finishing within the 15 s request timeout; a promotion "
	"the stream does not hold yet is not seen"
};

static const char *const oi_words[] = { "oidc", "openid", NULL };

const struct tl_drv_decl tl_drv_oidc_decl = {
	.name = "oidc",
	.words = oi_words,
	.types = oi_types,
	.tags = oi_tags,
	.settings = oi_settings,
	.reach = oi_reach,
	.tls_system_ca = 1,
	.fields = oi_fields,
	.credential = {
		.kind = TL_DRV_CRED_LOGIN_BESIDE,
		.handle_model = 1,
		.rotation_note = "a rotation registers a second client: the "
		    "client-id changes with the secret (RFC 7592 allows one "
		    "secret per client, chosen by the provider)",
	},
	.revocation = &oi_revocation,
	.fencing = &oi_fencing,
	.params = oi_params,
	.params_check = oi_params_check,
	.caps = TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ROTATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ADOPT),
	.name_max = OI_NAME_MAX,
	.isolation_note = "any client of the identity provider may "
	    "introspect (RFC 7662) another client's token and read its "
	    "client_id, scope and expiry: RFC 7591/7592 register nothing "
	    "that limits introspection (oidc-provider has one "
	    "deployment-wide features.introspection.allowedPolicy, "
	    "Keycloak lets every confidential client of the realm "
	    "introspect); limit it in the provider's own configuration",
	.names = oi_names,
	.compose = oi_compose,
};
