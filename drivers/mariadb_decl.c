/*
 * mariadb_decl.c - the MariaDB driver's declaration (decl.h): its
 * type, settings, fields, revocation and fencing, and the pure
 * functions names and compose.  The operations, over libmariadb, are
 * mariadb.c's (which states what a grant is on the server).
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/secret.h"
#include "decl.h"
#include "mariadb_decl.h"
#include "util.h"

/* The server's own databases, and tally's: never a grant's. */
const char *const tl_drv_mdb_reserved[] = {
	"mysql", "information_schema", "performance_schema", "sys", MDB_META,
	NULL
};

static const char *const mdb_types[] = { "mariadb-database", NULL };
static const char *const mdb_tags[] = { "database", "sql", NULL };
static const struct tl_drv_field mdb_fields[] = {
	{ "host", 0 }, { "port", 0 }, { "database", 0 }, { "user", 0 },
	{ "password", 1 }, { "uri", 1 },
	/* What a client verifies the server with (decl.h ca_path). */
	{ "ssl_mode", 0 }, { "ssl_ca", 0 }, { "tls", 0 },
	/*
	 * A login by certificate (credential: certificate): the paths of
	 * the certificate and the key made on the consumer's node; "" else.
	 */
	{ "ssl_cert", 0 }, { "ssl_key", 0 }, { NULL, 0 }
};

/*
 * The consumer's TLS mode is the provider's (the setting tls), in the
 * words of --ssl-mode / ssl_mode (MySQL's client and Connector/J's
 * sslMode aliases, mysqlclient's ssl_mode): VERIFY_IDENTITY is the
 * mariadb client's --ssl --ssl-verify-server-cert --ssl-ca=FILE.
 */
static const char *
mdb_ssl_mode(const struct tl_drv_endpoint *ep)
{
	switch (tl_drv_tls_mode(ep->settings, ep->host)) {
	case TL_DRV_TLS_OFF:		return "DISABLED";
	case TL_DRV_TLS_REQUIRE:	return "REQUIRED";
	case TL_DRV_TLS_VERIFY:		break;
	}
	return "VERIFY_IDENTITY";
}

/*
 * The connection fields.  uri is mariadb://USER:PASSWORD@HOST:PORT/DB,
 * percent-encoded, with ?ssl_mode=...&ssl_ca=... as SQLAlchemy's
 * mariadb:// dialect hands them to mysqlclient (no query when tls is
 * off); ssl_ca is the CA file's path token, copied as it is (the
 * deliverer finds it there), "" without one.
 */
static int
mdb_compose(const char *field, const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, char *out, size_t cap)
{
	const char *mode = mdb_ssl_mode(ep);
	const char *ca = ep->ca_path != NULL ? ep->ca_path : "";
	size_t o = 0;
	int n = 0, rc = 0;

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
	else if (strcmp(field, "ssl_mode") == 0)
		n = snprintf(out, cap, "%s", mode);
	else if (strcmp(field, "ssl_ca") == 0)
		n = snprintf(out, cap, "%s", ca);
	else if (strcmp(field, "ssl_cert") == 0 || strcmp(field, "ssl_key") == 0)
		n = snprintf(out, cap, "%s", !g->cert_login ? "" :
		    strcmp(field, "ssl_cert") == 0 ? (ep->cert_path ?
		    ep->cert_path : "") : (ep->key_path ? ep->key_path : ""));
	else if (strcmp(field, "tls") == 0)
		n = snprintf(out, cap, "%s", strcmp(mode, "DISABLED") == 0 ?
		    "false" : "true");
	else if (strcmp(field, "password") == 0) {
		if (g->password == NULL)
			return TL_EINVAL;
		n = snprintf(out, cap, "%s", g->password);
	} else if (strcmp(field, "uri") == 0) {
		if (g->password == NULL)
			return TL_EINVAL;
		n = snprintf(out, cap, "mariadb://");
		o = (size_t)n;
		/* By certificate: no password in it (the account has none). */
		if ((size_t)n >= cap ||
		    (rc = tl_drv_pct_append(out, cap, &o, g->login)) != 0 ||
		    (!g->cert_login && (o + 1 >= cap ||
		    (out[o++] = ':', 0) ||
		    (rc = tl_drv_pct_append(out, cap, &o, g->password)) != 0)))
			goto toobig;
		n = snprintf(out + o, cap - o, "@%s:%s/", ep->host, ep->port);
		if (n < 0 || (size_t)n >= cap - o)
			goto toobig;
		o += (size_t)n;
		if ((rc = tl_drv_pct_append(out, cap, &o, g->resource)) != 0)
			goto toobig;
		if (g->cert_login) {
			/* The certificate goes over TLS, whatever tls says. */
			n = snprintf(out + o, cap - o, "?ssl_mode=%s&ssl_cert=%s"
			    "&ssl_key=%s%s%s", strcmp(mode, "DISABLED") == 0 ?
			    "REQUIRED" : mode, ep->cert_path ? ep->cert_path :
			    "", ep->key_path ? ep->key_path : "",
			    strcmp(mode, "VERIFY_IDENTITY") == 0 && *ca != '\0' ?
			    "&ssl_ca=" : "", strcmp(mode, "VERIFY_IDENTITY") ==
			    0 ? ca : "");
			if (n < 0 || (size_t)n >= cap - o)
				goto toobig;
			return 0;
		}
		if (strcmp(mode, "DISABLED") == 0)
			return 0;
		n = snprintf(out + o, cap - o, "?ssl_mode=%s%s%s", mode,
		    strcmp(mode, "VERIFY_IDENTITY") == 0 && *ca != '\0' ?
		    "&ssl_ca=" : "", strcmp(mode, "VERIFY_IDENTITY") == 0 ?
		    ca : "");
		if (n < 0 || (size_t)n >= cap - o)
			goto toobig;
		return 0;
	} else
		return TL_ENOTFOUND;
	if (n < 0 || (size_t)n >= cap)
		goto toobig;
	return 0;
toobig:
	tl_secret_wipe(out, cap);
	out[0] = '\0';
	return TL_ETOOBIG;
}

/*
 * Names: the shared scheme within TL_DRV_NAME_MAX - 1 = 63 bytes, under
 * both of MariaDB's limits (database names 64 characters, user names 80
 * in 10.11).  The login is RESOURCE_vN, one per credential version.
 */
static int
mdb_names(const struct tl_drv_name_in *in, struct tl_drv_names *out,
    char *why)
{
	size_t i;

	tl_drv_name_scheme(in, MDB_DB_MAX, out);
	for (i = 0; tl_drv_mdb_reserved[i] != NULL; i++)
		if (strcmp(out->resource, tl_drv_mdb_reserved[i]) == 0)
			return tl_drv_why(why, TL_EINVAL,
			    "database \"%s\" is the server's own",
			    out->resource);
	return 0;
}

static const struct tl_drv_revocation mdb_revocation = {
	.destroys = 0,
	.retain = 1,
	.revoke = "the users are locked (ACCOUNT LOCK) and their connections "
	    "killed",
	.retain_means = "the database is kept, its user locked (tally restore "
	    "unlocks it)",
	.purge = "drops the database and its users: the data is gone",
};

static const struct tl_drv_setting mdb_settings[] = {
	{ "host", "", 0, TL_DRV_HOST, "where tallyd connects as the admin "
	    "(default: the node's routable name)",
	    .use = TL_DRV_USE_ADMIN_HOST },
	{ "port", "3306", 0, TL_DRV_PORT, "the server's port, for the admin "
	    "and for consumers",
	    .use = TL_DRV_USE_PORT },
	{ "admin-user", "root", 0, TL_DRV_STRING, "the user tallyd logs in "
	    "as (every privilege WITH GRANT OPTION)",
	    .use = TL_DRV_USE_ADMIN_USER },
	{ "admin-password", "", 1, TL_DRV_STRING, "the admin user's password "
	    "(--secret; none for an account that REQUIREs a certificate)",
	    .use = TL_DRV_USE_ADMIN_SECRET },
	TL_DRV_TLS_SETTINGS,
	/* For an admin account REQUIRE X509, SUBJECT or ISSUER. */
	TL_DRV_CLIENT_CERT_SETTINGS,
	{ "migration-timeout", "5m", 0, TL_DRV_DURATION, "the time limit of "
	    "one migration file",
	    .use = TL_DRV_USE_PLAIN },
	TL_DRV_PASSWORD_SETTINGS(TL_DRV_PASSWORD_MIN, TL_DRV_PASSWORD_MAX),
	{ NULL, NULL, 0, TL_DRV_STRING, NULL, 0, 0, TL_DRV_USE_PLAIN }
};

static const struct tl_drv_fence_decl mdb_fencing = {
	TL_DRV_FENCE_ATOMIC,
	"a row per mesh in tally.fences, raised by compare-and-set on every "
	"session tallyd opens and held LOCK IN SHARE MODE by a second admin "
	"session, kept with the handle, for the whole of each changing call",
	"none while that session lives: should the server end it during a "
	"call, the rest of that one call may land after a promotion's raise"
};

static const char *const mdb_words[] = { "mariadb", "mysql", "3306", NULL };

const struct tl_drv_decl tl_drv_mariadb_decl = {
	.name = "mariadb",
	.words = mdb_words,
	.types = mdb_types,
	.tags = mdb_tags,
	.settings = mdb_settings,
	.fields = mdb_fields,
	.credential = {
		.kind = TL_DRV_CRED_LOGIN_BESIDE,
		.cert_login = "REQUIRE SUBJECT '/CN=LOGIN' AND ISSUER (the mesh "
		    "CA's subject): the server checks the certificate's "
		    "subject and issuer on top of password authentication, "
		    "which community editions keep; the account's password "
		    "is empty, so the certificate alone logs in; one-time "
		    "server set-up: ssl-ca the mesh CA",
	},
	.revocation = &mdb_revocation,
	.fencing = &mdb_fencing,
	.caps = TL_DRV_CAP_BIT(TL_DRV_CAP_MIGRATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SIZE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ADMIN_ROTATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ROTATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK_BULK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SESSIONS) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ADOPT) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_TRY_PASSWORD) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ACCESS),
	.migrate_dialect = "sql/mariadb",
	.name_max = MDB_DB_MAX,
	.names = mdb_names,
	.compose = mdb_compose,
};
