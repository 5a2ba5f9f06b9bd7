/*
 * postgres_decl.c - the PostgreSQL driver's declaration (decl.h): its
 * type, settings, fields, revocation and fencing, and the pure
 * functions names and compose.  The operations, over libpq, are
 * postgres.c's (which states what a grant is on the server).
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/secret.h"
#include "decl.h"
#include "postgres-internal.h"
#include "util.h"

static const char *const pg_types[] = { "postgres-database", NULL };
static const char *const pg_tags[] = { "database", "sql", NULL };
/*
 * What reactors/provision.c delivers for a grant (tl_rx_holder_lines),
 * composed by pg_compose.  The fields that are not secret are recorded
 * in grant.provisioned in this order (host, port, database, user): the
 * log of before this contract has exactly these.  sslrootcert is the
 * path of the provider's CA as a file on the consumer's node (libpq's
 * PGSSLROOTCERT): ep->ca_path, "" when there is none (and in the record,
 * which no node's path belongs in).
 */
static const struct tl_drv_field pg_fields[] = {
	{ "host", 0 }, { "port", 0 }, { "database", 0 }, { "user", 0 },
	{ "password", 1 }, { "url", 1 },
	/* What a libpq consumer verifies the server with (decl.h ca_path). */
	{ "sslmode", 0 }, { "sslrootcert", 0 },
	/*
	 * A login by certificate (credential: certificate): the paths of
	 * the certificate and the key made on the consumer's node; "" else.
	 */
	{ "sslcert", 0 }, { "sslkey", 0 }, { NULL, 0 }
};

/*
 * The connection fields.  url is postgresql://USER:PASSWORD@HOST:PORT/DB
 * as reactors composed it before: not percent-encoded, since the names
 * are [a-z0-9_-] and tally's passwords are of an alphabet a URI carries
 * as it is (core/secret.h).  The consumer reaches the server as tallyd
 * does (the provider's setting tls), so sslmode is the admin's
 * (tl_drv_pg_sslmode) and url carries it: under verify-full with
 * sslrootcert, the CA file's path token copied as it is (the deliverer
 * finds it there), so no URL that libpq would take without verifying
 * is ever delivered for a verified provider.
 */
static int
pg_compose(const char *field, const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, char *out, size_t cap)
{
	const char *mode = tl_drv_pg_sslmode(ep->settings, ep->host);
	const char *ca = ep->ca_path != NULL ? ep->ca_path : "";
	int n;

	if (cap == 0)
		return TL_ETOOBIG;
	out[0] = '\0';
	if (strcmp(field, "host") == 0)
		n = snprintf(out, cap, "%s", ep->host);
	else if (strcmp(field, "port") == 0)
		n = snprintf(out, cap, "%s", ep->port);
	else if (strcmp(field, "database") == 0)
		n = snprintf(out, cap, "%s", g->resource);
	else if (strcmp(field, "user") == 0)
		n = snprintf(out, cap, "%s", g->login);
	else if (strcmp(field, "sslmode") == 0)
		n = snprintf(out, cap, "%s", mode);
	else if (strcmp(field, "sslrootcert") == 0)
		n = snprintf(out, cap, "%s", ca);
	else if (strcmp(field, "sslcert") == 0 || strcmp(field, "sslkey") == 0)
		n = snprintf(out, cap, "%s", !g->cert_login ? "" :
		    strcmp(field, "sslcert") == 0 ? (ep->cert_path ?
		    ep->cert_path : "") : (ep->key_path ? ep->key_path : ""));
	else if (strcmp(field, "url") == 0 && g->cert_login) {
		/* No password: the certificate, the key, the server's CA. */
		const char *cp = ep->cert_path ? ep->cert_path : "";
		const char *kp = ep->key_path ? ep->key_path : "";

		n = snprintf(out, cap, "postgresql://%s@%s:%s/%s?sslmode=%s"
		    "&sslcert=%s&sslkey=%s%s%s", g->login, ep->host, ep->port,
		    g->resource, strcmp(mode, "disable") == 0 ? "require" :
		    mode, cp, kp, *ca != '\0' ? "&sslrootcert=" : "", ca);
	} else if (strcmp(field, "password") == 0 ||
	    strcmp(field, "url") == 0) {
		if (g->password == NULL)
			return TL_EINVAL;
		if (field[0] == 'p')
			n = snprintf(out, cap, "%s", g->password);
		else if (strcmp(mode, "disable") == 0)
			n = snprintf(out, cap, "postgresql://%s:%s@%s:%s/%s",
			    g->login, g->password, ep->host, ep->port,
			    g->resource);
		else
			n = snprintf(out, cap, "postgresql://%s:%s@%s:%s/%s"
			    "?sslmode=%s%s%s", g->login, g->password, ep->host,
			    ep->port, g->resource, mode, strcmp(mode,
			    "verify-full") == 0 && *ca != '\0' ?
			    "&sslrootcert=" : "", strcmp(mode, "verify-full") ==
			    0 ? ca : "");
	} else
		return TL_ENOTFOUND;
	if (n < 0 || (size_t)n >= cap) {
		tl_secret_wipe(out, cap);
		out[0] = '\0';
		return TL_ETOOBIG;
	}
	return 0;
}

/*
 * Names: the shared scheme (drivers/naming.c) within PostgreSQL's
 * identifier limit, 63 bytes (NAMEDATALEN - 1: a longer name would be
 * cut silently).  The database and the NOLOGIN owner role share the
 * resource's name; a login role is NAME_vN (scheme 2: PREFIX_DIGEST_vN)
 * beside it, one per credential version, so a rotation adds a login
 * and retires the old one.  Names that PostgreSQL reserves (pg_) are
 * refused here and again by grant_ok at every operation.
 */
static int
pg_names(const struct tl_drv_name_in *in, struct tl_drv_names *out,
    char *why)
{
	tl_drv_name_scheme(in, PG_NAME_MAX, out);
	if (strncmp(out->owner, "pg_", 3) == 0 ||
	    strncmp(out->login, "pg_", 3) == 0)
		return tl_drv_why(why, TL_EINVAL, "role names starting with "
		    "pg_ are reserved (resource \"%s\")", in->resource);
	return 0;
}

static const struct tl_drv_revocation pg_revocation = {
	.destroys = 0,
	.retain = 1,
	.revoke = "the logins are disabled and their sessions ended",
	.retain_means = "the database and its owner role are kept, nobody "
	    "able to log in (tally restore reopens it)",
	.purge = "drops the database and its roles: the data is gone",
};

/*
 * The settings of a postgres provider's assignment: those of a role,
 * what tallyd builds the admin view from (reactors/session.c: the
 * client certificate's too), and the driver's own, read here (admin-db,
 * revoke-public-connect) and by the migrator (migration-timeout, read
 * with tl_drv_duration; the migrator's default is the same 5 minutes),
 * with their defaults.
 */
static const struct tl_drv_setting pg_settings[] = {
	{ "host", "", 0, TL_DRV_HOST, "where tallyd connects as the admin "
	    "(default: the node's routable name)",
	    .use = TL_DRV_USE_ADMIN_HOST },
	{ "admin-host", "", 0, TL_DRV_HOST, "the same as host, its first "
	    "name (host wins when both are set)",
	    .use = TL_DRV_USE_ADMIN_HOST },
	{ "port", "5432", 0, TL_DRV_PORT, "the server's port, for the admin "
	    "and for consumers",
	    .use = TL_DRV_USE_PORT },
	{ "admin-user", "postgres", 0, TL_DRV_STRING, "the admin role "
	    "tallyd logs in as",
	    .use = TL_DRV_USE_ADMIN_USER },
	{ "admin-db", "postgres", 0, TL_DRV_STRING, "the maintenance "
	    "database tallyd connects to",
	    .use = TL_DRV_USE_PLAIN },
	{ "admin-password", "", 1, TL_DRV_STRING, "the admin role's "
	    "password (--secret; none: trust, peer or cert authentication)",
	    .use = TL_DRV_USE_ADMIN_SECRET },
	{ "revoke-public-connect", "yes", 0, TL_DRV_BOOL, "revoke CONNECT on "
	    "the maintenance databases from PUBLIC",
	    .use = TL_DRV_USE_PLAIN },
	TL_DRV_TLS_SETTINGS,
	/* pg_hba.conf's cert method (hostssl ... cert): the CN is the role. */
	TL_DRV_CLIENT_CERT_SETTINGS,
	{ "migration-timeout", "5m", 0, TL_DRV_DURATION, "the time limit of "
	    "one migration file",
	    .use = TL_DRV_USE_PLAIN },
	TL_DRV_PASSWORD_SETTINGS(TL_DRV_PASSWORD_MIN, TL_DRV_PASSWORD_MAX),
	/*
	 * At least two verification intervals of 30 s, so that one
	 * missed check does not let a login lapse.
	 */
	{ "expiry-backstop", "", 0, TL_DRV_DURATION, "keep each login's "
	    "VALID UNTIL this far ahead (verification moves it on), so a "
	    "credential outlives a dead control plane by at most this; "
	    "unset: no expiry", 120, 31536000, TL_DRV_USE_PLAIN },
	{ NULL, NULL, 0, TL_DRV_STRING, NULL, 0, 0, TL_DRV_USE_PLAIN }
};

const char *
tl_drv_pg_admin_db(const char *const *settings)
{
	const struct tl_drv_setting *s;
	const char *v = tl_drv_setting_get(settings, "admin-db");

	if (v != NULL && *v != '\0')
		return v;
	s = tl_drv_setting_find(pg_settings, "admin-db");
	return s != NULL && s->dflt != NULL && *s->dflt != '\0' ? s->dflt :
	    "postgres";
}

const char *
tl_drv_pg_sslmode(const char *const *settings, const char *host)
{
	switch (tl_drv_tls_mode(settings, host)) {
	case TL_DRV_TLS_OFF:		return "disable";
	case TL_DRV_TLS_REQUIRE:	return "require";
	case TL_DRV_TLS_VERIFY:		break;
	}
	return "verify-full";
}

int
tl_drv_pg_revoke_public_connect(const char *const *settings)
{
	const char *v = tl_drv_setting_get(settings, "revoke-public-connect");

	/* Anything but an explicit no keeps the safe default. */
	return v == NULL || !(strcmp(v, "no") == 0 ||
	    strcmp(v, "false") == 0 || strcmp(v, "off") == 0 ||
	    strcmp(v, "0") == 0);
}

uint64_t
tl_drv_pg_backstop(const char *const *settings)
{
	const char *v = tl_drv_setting_get(settings, "expiry-backstop");
	uint64_t s = 0;

	if (v == NULL || *v == '\0' || tl_drv_duration(v, &s) != 0)
		return 0;
	return s;
}

/*
 * What settings valid on their own leave open: with
 * revoke-public-connect off, every grant's login can connect to the
 * maintenance databases (and read the catalogs of the whole server);
 * with an expiry backstop, a control plane down longer than it locks
 * every consumer out.
 */
static int
pg_settings_note(const char *const *settings, char *note)
{
	const char *bs = tl_drv_setting_get(settings, "expiry-backstop");
	int open = !tl_drv_pg_revoke_public_connect(settings);
	int back = tl_drv_pg_backstop(settings) != 0;

	if (!open && !back)
		return 0;
	if (note != NULL)
		snprintf(note, TL_WHY_MAX, "%s%s%s%s%s", open ?
		    "revoke-public-connect is off: PUBLIC keeps CONNECT on "
		    "the provider's maintenance databases, so every grant's "
		    "login can connect to them" : "", open && back ? "; " : "",
		    back ? "expiry backstop " : "", back ? bs : "", back ?
		    ": each login's VALID UNTIL is kept that far ahead by "
		    "verification, so a control plane down longer locks every "
		    "consumer out" : "");
	return 1;
}

static const struct tl_drv_fence_decl pg_fencing = {
	TL_DRV_FENCE_ATOMIC,
	"a row per mesh in tally_fences in the maintenance database, raised "
	"by compare-and-set on every session tallyd opens under an exclusive "
	"advisory lock of the mesh, which the admin session holds shared "
	"for the whole of each changing call",
	"none while the admin session lives: should the server end it during "
	"a call, that call's statements on another session (the grant's "
	"database) may land after a promotion's raise"
};

static const char *const pg_words[] = {
	"postgres", "5432", "database", "role", "pg_", "libpq", NULL
};

const struct tl_drv_decl tl_drv_postgres_decl = {
	.name = "postgres",
	.words = pg_words,
	.types = pg_types,
	.tags = pg_tags,
	.settings = pg_settings,
	.settings_note = pg_settings_note,
	.fields = pg_fields,
	.credential = {
		.kind = TL_DRV_CRED_LOGIN_BESIDE,
		.cert_login = "cert authentication: the certificate's common "
		    "name is the login role, which has no password and is a "
		    "member of " PG_CERT_GROUP "; one-time server set-up: a "
		    "pg_hba.conf line 'hostssl all +" PG_CERT_GROUP " all "
		    "cert' before the others and ssl_ca_file the mesh CA",
	},
	.revocation = &pg_revocation,
	.fencing = &pg_fencing,
	.caps = TL_DRV_CAP_BIT(TL_DRV_CAP_MIGRATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_MOVE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SIZE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ADMIN_ROTATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ROTATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK_BULK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SESSIONS) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ADOPT) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_TRY_PASSWORD) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ACCESS),
	.migrate_dialect = "sql/postgres",
	.name_max = PG_NAME_MAX,
	.names = pg_names,
	.compose = pg_compose,
};
