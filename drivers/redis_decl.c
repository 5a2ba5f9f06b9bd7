/*
 * redis_decl.c - the redis driver's declaration (decl.h): its type,
 * settings, fields, revocation and fencing, and the pure functions
 * names and compose.  The operations, over hiredis (and OpenSSL for
 * TLS, redis_conn.c), are redis.c's
 * (which states what a grant is on the server).
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "core/error.h"
#include "decl.h"
#include "redis-internal.h"
#include "util.h"

int
tl_drv_rd_valid_name(const char *s)
{
	size_t i, n;

	if (s == NULL || (n = strlen(s)) == 0 || n > RD_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		    s[i] == '-'))
			return 0;
	return 1;
}

static const struct tl_drv_fence_decl rd_fencing = {
	TL_DRV_FENCE_ATOMIC,
	"a hash per mesh, tally:fence:MESH, raised by a compare-and-set "
	"script; every change runs under WATCH of it and the user's marks, "
	"compared, then MULTI/EXEC",
	"none for a grant's objects: a promotion that raises the fence "
	"after the WATCH aborts the EXEC, and the change is read again and "
	"refused"
};

static int
rd_compose(const char *field, const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, char *out, size_t cap)
{
	const char *v = NULL;
	size_t off = 0;
	int n, rc;

	if (cap == 0)
		return TL_ETOOBIG;
	out[0] = '\0';
	if (strcmp(field, "host") == 0)
		v = ep->host;
	else if (strcmp(field, "port") == 0)
		v = ep->port;
	else if (strcmp(field, "user") == 0)
		v = g->login;
	else if (strcmp(field, "tls") == 0)
		v = tl_drv_consumer_tls(&tl_drv_redis_decl, ep) !=
		    TL_DRV_TLS_OFF ? "true" : "false";
	else if (strcmp(field, "ca") == 0)
		return tl_drv_compose_ca(ep, out, cap);
	else if (strcmp(field, "prefix") == 0) {
		if (g->resource == NULL)
			return TL_EINVAL;
		n = snprintf(out, cap, "%s:", g->resource);
		if (n < 0 || (size_t)n >= cap) {
			out[0] = '\0';
			return TL_ETOOBIG;
		}
		return 0;
	} else if (strcmp(field, "password") == 0) {
		if (g->password == NULL)
			return TL_EINVAL;
		v = g->password;
	} else if (strcmp(field, "uri") == 0) {
		const char *host = ep->host != NULL ? ep->host : "";
		int v6 = strchr(host, ':') != NULL;

		if (g->password == NULL || g->login == NULL)
			return TL_EINVAL;
		/*
		 * rediss:// to the port (the server's tls-port whenever
		 * tallyd itself speaks TLS to it): no CA in the URI, which
		 * has no standard parameter for one (the field ca).
		 */
		n = snprintf(out, cap, "%s://", tl_drv_consumer_tls(
		    &tl_drv_redis_decl, ep) != TL_DRV_TLS_OFF ? "rediss" :
		    "redis");
		off = (size_t)n;
		if ((rc = tl_drv_pct_append(out, cap, &off, g->login)) != 0 ||
		    off + 1 >= cap)
			goto big;
		out[off++] = ':';
		if ((rc = tl_drv_pct_append(out, cap, &off, g->password)) != 0)
			goto big;
		n = snprintf(out + off, cap - off, "@%s%s%s:%s", v6 ? "[" : "",
		    host, v6 ? "]" : "", ep->port != NULL ? ep->port : "");
		if (n < 0 || (size_t)n >= cap - off)
			goto big;
		return 0;
	} else
		return TL_ENOTFOUND;
	if (v == NULL)
		return TL_EINVAL;
	if ((size_t)snprintf(out, cap, "%s", v) >= cap) {
		out[0] = '\0';
		return TL_ETOOBIG;
	}
	return 0;
big:
	sodium_memzero(out, cap);
	out[0] = '\0';
	return TL_ETOOBIG;
}

/*
 * Names: the shared scheme at 63 bytes; the user and the prefix are the
 * resource's name for every version (MULTI_PASSWORD), no owner.  Only
 * [a-z0-9_-] (the scheme's own alphabet when the requirement's names
 * are tally's) may become an ACL rule: anything else is refused.
 */
static int
rd_names(const struct tl_drv_name_in *in, struct tl_drv_names *out,
    char *why)
{
	struct tl_drv_names n;

	tl_drv_name_scheme(in, RD_NAME_MAX, &n);
	memset(out, 0, sizeof(*out));
	memcpy(out->resource, n.resource, sizeof(out->resource));
	memcpy(out->login, n.resource, sizeof(out->login));
	if (!tl_drv_rd_valid_name(out->resource))
		return tl_drv_why(why, TL_EINVAL, "resource \"%.64s\": a redis "
		    "user name is [a-z0-9_-] only", in->resource);
	return 0;
}

static const char *const rd_types[] = { "redis-user", NULL };
static const struct tl_drv_field rd_fields[] = {
	{ "host", 0 }, { "port", 0 }, { "user", 0 }, { "password", 1 },
	{ "prefix", 0 }, { "uri", 1 }, { "tls", 0 }, { "ca", 0 },
	{ NULL, 0 }
};
static const char *const rd_tags[] = { "cache", "kv", NULL };

static const struct tl_drv_revocation rd_revocation = {
	.destroys = 0,
	.retain = 1,
	.revoke = "the ACL user is turned off and its clients killed",
	.retain_means = "its keys are kept under its prefix, nobody able to "
	    "log in as it (tally restore turns it on again)",
	.purge = "deletes every key under its prefix and the ACL user",
};

static const struct tl_drv_setting rd_settings[] = {
	{ "host", "", 0, TL_DRV_HOST, "where tallyd connects as the admin "
	    "(default: the node's routable name)",
	    .use = TL_DRV_USE_ADMIN_HOST },
	{ "admin-host", "", 0, TL_DRV_HOST, "the same as host, its first "
	    "name (host wins when both are set)",
	    .use = TL_DRV_USE_ADMIN_HOST },
	{ "port", "6379", 0, TL_DRV_PORT, "the server's port, for the admin "
	    "and for consumers (its tls-port unless tls is off)",
	    .use = TL_DRV_USE_PORT },
	{ "admin-user", "default", 0, TL_DRV_STRING, "the ACL user tallyd "
	    "logs in as (needs +@all on ~* &*)",
	    .use = TL_DRV_USE_ADMIN_USER },
	{ "admin-password", "", 1, TL_DRV_STRING, "the admin user's password "
	    "(--secret)",
	    .use = TL_DRV_USE_ADMIN_SECRET },
	TL_DRV_TLS_SETTINGS,
	TL_DRV_CLIENT_CERT_SETTINGS,
	{ "acl-save", "yes", 0, TL_DRV_BOOL, "ACL SAVE after every change, so "
	    "the users survive a restart (a server without --aclfile: not "
	    "asked)",
	    .use = TL_DRV_USE_PLAIN },
	TL_DRV_PASSWORD_SETTINGS(TL_DRV_PASSWORD_MIN, TL_DRV_PASSWORD_MAX),
	{ NULL, NULL, 0, TL_DRV_STRING, NULL, 0, 0, TL_DRV_USE_PLAIN }
};

static const char *const rd_words[] = { "redis", "6379", NULL };

const struct tl_drv_decl tl_drv_redis_decl = {
	.name = "redis",
	.words = rd_words,
	.types = rd_types,
	.tags = rd_tags,
	.settings = rd_settings,
	.fields = rd_fields,
	.credential = {
		.kind = TL_DRV_CRED_MULTI_PASSWORD,
		.cert_none = "Redis 7 cannot map a client certificate to an "
		    "ACL user (tls-auth-clients checks the certificate, AUTH "
		    "still names the user by password)",
	},
	.revocation = &rd_revocation,
	.fencing = &rd_fencing,
	.caps = TL_DRV_CAP_BIT(TL_DRV_CAP_SIZE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ROTATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK_BULK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SESSIONS) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ADOPT) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_TRY_PASSWORD) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ACCESS),
	.name_max = RD_NAME_MAX,
	.names = rd_names,
	.compose = rd_compose,
};
