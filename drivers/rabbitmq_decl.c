/*
 * rabbitmq_decl.c - the RabbitMQ driver's declaration (decl.h): its
 * type, settings, fields, revocation and fencing, and compose.  The
 * operations, over the management API, are rabbitmq.c's (which states
 * what a grant is on the broker); names are the shared scheme
 * (drivers/naming.c).
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/secret.h"
#include "decl.h"
#include "util.h"

/* Appends s to out at *off as it is (tl_drv_pct_append's contract). */
static int
raw_append(char *out, size_t cap, size_t *off, const char *s)
{
	size_t n = strlen(s);

	if (*off + n >= cap)
		return TL_ETOOBIG;
	memcpy(out + *off, s, n + 1);
	*off += n;
	return 0;
}

extern const struct tl_drv_decl tl_drv_rabbitmq_decl;

/* The defaults of port and amqps-port: IANA's AMQP and AMQP over TLS. */
#define RMQ_AMQP_PORT	"5672"
#define RMQ_AMQPS_PORT	"5671"

/*
 * The port a consumer connects to: the setting amqps-port (the broker's
 * TLS listener) when consumers get TLS, else ep's (the setting port, or
 * the port the grant recorded), except a recorded port that is the
 * AMQPS one (a grant provisioned under TLS, its provider's tls turned
 * off since), which gives way to the setting port.
 */
static const char *
consumer_port(const struct tl_drv_endpoint *ep, enum tl_drv_tls mode)
{
	const char *const *sv = ep != NULL ? ep->settings : NULL;
	const char *tls = tl_drv_setting_get(sv, "amqps-port");
	const char *p = ep != NULL && ep->port != NULL ? ep->port : "";

	if (tls == NULL || *tls == '\0')
		tls = RMQ_AMQPS_PORT;
	if (mode != TL_DRV_TLS_OFF)
		return tls;
	if (strcmp(p, tls) == 0) {
		p = tl_drv_setting_get(sv, "port");
		return p != NULL && *p != '\0' ? p : RMQ_AMQP_PORT;
	}
	return p;
}

static int
rmq_compose(const char *field, const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, char *out, size_t cap)
{
	const char *host = ep != NULL && ep->host != NULL ? ep->host : "";
	enum tl_drv_tls mode = tl_drv_consumer_tls(&tl_drv_rabbitmq_decl, ep);
	const char *port = consumer_port(ep, mode);
	int v6, n, rc = 0;
	size_t off = 0;

	if (cap == 0)
		return TL_ETOOBIG;
	out[0] = '\0';
	if (strcmp(field, "host") == 0)
		n = snprintf(out, cap, "%s", host);
	else if (strcmp(field, "port") == 0)
		n = snprintf(out, cap, "%s", port);
	else if (strcmp(field, "tls") == 0)
		n = snprintf(out, cap, "%s", mode != TL_DRV_TLS_OFF ? "true" :
		    "false");
	else if (strcmp(field, "ca") == 0)
		return tl_drv_compose_ca(ep, out, cap);
	else if (strcmp(field, "cert") == 0 || strcmp(field, "key") == 0)
		n = snprintf(out, cap, "%s", !g->cert_login || ep == NULL ? "" :
		    strcmp(field, "cert") == 0 ? (ep->cert_path != NULL ?
		    ep->cert_path : "") : (ep->key_path != NULL ?
		    ep->key_path : ""));
	else if (strcmp(field, "vhost") == 0)
		n = snprintf(out, cap, "%s", g->resource);
	else if (strcmp(field, "user") == 0)
		n = snprintf(out, cap, "%s", g->login);
	else if (strcmp(field, "password") == 0) {
		if (g->password == NULL)
			return TL_EINVAL;
		n = snprintf(out, cap, "%s", g->password);
	} else if (strcmp(field, "url") == 0) {
		if (g->password == NULL)
			return TL_EINVAL;
		/*
		 * Each part percent-encoded: a vhost "/" is %2F.  Under TLS,
		 * amqps:// to amqps-port; verified, with the RabbitMQ URI
		 * spec's TLS query parameters: the CA file's path (the token,
		 * as it is: the deliverer replaces it) and verify_peer.
		 */
		v6 = strchr(host, ':') != NULL;
		if (g->cert_login) {
			/*
			 * By certificate: amqps always, no password, the
			 * EXTERNAL mechanism with the certificate and key.
			 */
			if (mode == TL_DRV_TLS_OFF) {
				mode = TL_DRV_TLS_REQUIRE;
				port = consumer_port(ep, mode);
			}
			if ((rc = raw_append(out, cap, &off, "amqps://")) != 0 ||
			    (rc = tl_drv_pct_append(out, cap, &off,
			    g->login)) != 0)
				goto out;
		} else if ((rc = raw_append(out, cap, &off, mode !=
		    TL_DRV_TLS_OFF ? "amqps://" : "amqp://")) != 0 ||
		    (rc = tl_drv_pct_append(out, cap, &off, g->login)) != 0 ||
		    (rc = raw_append(out, cap, &off, ":")) != 0 ||
		    (rc = tl_drv_pct_append(out, cap, &off,
		    g->password)) != 0)
			goto out;
		if ((rc = raw_append(out, cap, &off, v6 ? "@[" : "@")) != 0 ||
		    (rc = raw_append(out, cap, &off, host)) != 0 ||
		    (rc = raw_append(out, cap, &off, v6 ? "]:" : ":")) != 0 ||
		    (rc = raw_append(out, cap, &off, port)) != 0 ||
		    (rc = raw_append(out, cap, &off, "/")) != 0 ||
		    (rc = tl_drv_pct_append(out, cap, &off, g->resource)) != 0)
			goto out;
		if (mode == TL_DRV_TLS_VERIFY && ep != NULL &&
		    ep->ca_path != NULL &&
		    ((rc = raw_append(out, cap, &off, "?cacertfile=")) != 0 ||
		    (rc = raw_append(out, cap, &off, ep->ca_path)) != 0))
			goto out;
		if (mode == TL_DRV_TLS_VERIFY && (rc = raw_append(out, cap,
		    &off, ep != NULL && ep->ca_path != NULL ?
		    "&verify=verify_peer" : "?verify=verify_peer")) != 0)
			goto out;
		if (g->cert_login && ep != NULL && ep->cert_path != NULL &&
		    ep->key_path != NULL && ((rc = raw_append(out, cap, &off,
		    strchr(out, '?') != NULL ? "&certfile=" :
		    "?certfile=")) != 0 ||
		    (rc = raw_append(out, cap, &off, ep->cert_path)) != 0 ||
		    (rc = raw_append(out, cap, &off, "&keyfile=")) != 0 ||
		    (rc = raw_append(out, cap, &off, ep->key_path)) != 0 ||
		    (rc = raw_append(out, cap, &off,
		    "&auth_mechanism=external")) != 0))
			goto out;
		n = (int)off;
	} else
		return TL_ENOTFOUND;
	if (n < 0 || (size_t)n >= cap)
		rc = TL_ETOOBIG;
out:
	if (rc != 0) {
		tl_secret_wipe(out, cap);
		out[0] = '\0';
	}
	return rc;
}

static const char *const rmq_types[] = { "rabbitmq-vhost", NULL };
static const char *const rmq_tags[] = { "broker", "amqp", NULL };
static const struct tl_drv_field rmq_fields[] = {
	{ "host", 0 }, { "port", 0 }, { "vhost", 0 }, { "user", 0 },
	{ "password", 1 }, { "url", 1 }, { "tls", 0 }, { "ca", 0 },
	/*
	 * A login by certificate (credential: certificate): the paths of
	 * the certificate and the key made on the consumer's node; "" else.
	 */
	{ "cert", 0 }, { "key", 0 }, { NULL, 0 }
};

static const struct tl_drv_revocation rmq_revocation = {
	.destroys = 1,
	.retain = 1,
	.revoke = "the vhost's users are deleted and their connections "
	    "closed, which deletes their exclusive and auto-delete queues "
	    "and the messages in them",
	.retain_means = "the vhost is kept with its durable queues and "
	    "their messages, nobody able to log in (tally restore makes the "
	    "user again)",
	.purge = "deletes the vhost with every queue and message in it",
};

static const struct tl_drv_fence_decl rmq_fencing = {
	TL_DRV_FENCE_BEFORE_CALL,
	"a global parameter per mesh, tally-fence-MESH {epoch, leader}, "
	"through the management API (no compare-and-set there: raised by "
	"read, compare, write, read back), read before every changing "
	"request",
	"a call already sent when the promotion raised the fence lands; of "
	"two candidates raising at once, the one the read back does not "
	"show stands down"
};

static const struct tl_drv_setting rmq_settings[] = {
	{ "host", "", 0, TL_DRV_HOST, "where tallyd reaches the management "
	    "API (default: the admin-host, else the node's routable name)",
	    .use = TL_DRV_USE_ADMIN_HOST },
	{ "admin-host", "", 0, TL_DRV_HOST, "the same, as other drivers "
	    "name it (host wins)", .use = TL_DRV_USE_ADMIN_HOST },
	{ "port", RMQ_AMQP_PORT, 0, TL_DRV_PORT, "the AMQP port consumers connect "
	    "to when tls is off", .use = TL_DRV_USE_PORT },
	{ "amqps-port", RMQ_AMQPS_PORT, 0, TL_DRV_PORT, "the AMQPS (TLS) port "
	    "consumers connect to unless tls is off", .use = TL_DRV_USE_PLAIN },
	{ "management-port", "15672", 0, TL_DRV_PORT, "the management HTTP "
	    "API's port (tallyd's admin path: never AMQP; its https "
	    "listener's unless tls is off)", .use = TL_DRV_USE_PLAIN },
	{ "admin-user", "guest", 0, TL_DRV_STRING, "the management user "
	    "tallyd acts as (tag administrator)",
	    .use = TL_DRV_USE_ADMIN_USER },
	{ "admin-password", "", 1, TL_DRV_STRING, "its password (--secret)",
	    .use = TL_DRV_USE_ADMIN_SECRET },
	TL_DRV_TLS_SETTINGS,
	TL_DRV_CLIENT_CERT_SETTINGS,
	TL_DRV_PASSWORD_SETTINGS(TL_DRV_PASSWORD_MIN, TL_DRV_PASSWORD_MAX),
	{ NULL, NULL, 0, TL_DRV_STRING, NULL, 0, 0, TL_DRV_USE_PLAIN }
};

static const char *const rmq_words[] = { "15672", NULL };

const struct tl_drv_decl tl_drv_rabbitmq_decl = {
	.name = "rabbitmq",
	.words = rmq_words,
	.types = rmq_types,
	.tags = rmq_tags,
	.settings = rmq_settings,
	.fields = rmq_fields,
	.credential = {
		.kind = TL_DRV_CRED_LOGIN_BESIDE,
		.cert_login = "the EXTERNAL mechanism: the user, which has no "
		    "password, is the certificate's common name; one-time "
		    "broker set-up: the rabbitmq_auth_mechanism_ssl plugin, "
		    "EXTERNAL among auth_mechanisms, ssl_cert_login_from = "
		    "common_name, ssl_options.verify = verify_peer and "
		    "ssl_options.cacertfile the mesh CA",
	},
	.revocation = &rmq_revocation,
	.fencing = &rmq_fencing,
	.caps = TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK_BULK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SIZE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ROTATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SESSIONS) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_LOSS) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ADOPT) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_TRY_PASSWORD) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ACCESS),
	.compose = rmq_compose,
};
