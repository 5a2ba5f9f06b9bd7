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

static int
rmq_compose(const char *field, const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, char *out, size_t cap)
{
	const char *host = ep != NULL && ep->host != NULL ? ep->host : "";
	const char *port = ep != NULL && ep->port != NULL ? ep->port : "";
	int v6, n, rc = 0;
	size_t off = 0;

	if (cap == 0)
		return TL_ETOOBIG;
	out[0] = '\0';
	if (strcmp(field, "host") == 0)
		n = snprintf(out, cap, "%s", host);
	else if (strcmp(field, "port") == 0)
		n = snprintf(out, cap, "%s", port);
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
		/* Each part percent-encoded: a vhost "/" is %2F. */
		v6 = strchr(host, ':') != NULL;
		if ((rc = raw_append(out, cap, &off, "amqp://")) != 0 ||
		    (rc = tl_drv_pct_append(out, cap, &off, g->login)) != 0 ||
		    (rc = raw_append(out, cap, &off, ":")) != 0 ||
		    (rc = tl_drv_pct_append(out, cap, &off,
		    g->password)) != 0 ||
		    (rc = raw_append(out, cap, &off, v6 ? "@[" : "@")) != 0 ||
		    (rc = raw_append(out, cap, &off, host)) != 0 ||
		    (rc = raw_append(out, cap, &off, v6 ? "]:" : ":")) != 0 ||
		    (rc = raw_append(out, cap, &off, port)) != 0 ||
		    (rc = raw_append(out, cap, &off, "/")) != 0 ||
		    (rc = tl_drv_pct_append(out, cap, &off, g->resource)) != 0)
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
	{ "password", 1 }, { "url", 1 }, { NULL, 0 }
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
	{ "port", "5672", 0, TL_DRV_PORT, "the AMQP port consumers connect "
	    "to", .use = TL_DRV_USE_PORT },
	{ "management-port", "15672", 0, TL_DRV_PORT, "the management HTTP "
	    "API's port (tallyd's admin path: never AMQP; its https "
	    "listener's unless tls is off)", .use = TL_DRV_USE_PLAIN },
	{ "admin-user", "guest", 0, TL_DRV_STRING, "the management user "
	    "tallyd acts as (tag administrator)",
	    .use = TL_DRV_USE_ADMIN_USER },
	{ "admin-password", "", 1, TL_DRV_STRING, "its password (--secret)",
	    .use = TL_DRV_USE_ADMIN_SECRET },
	TL_DRV_TLS_SETTINGS,
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
	.credential = { .kind = TL_DRV_CRED_LOGIN_BESIDE },
	.revocation = &rmq_revocation,
	.fencing = &rmq_fencing,
	.caps = TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK_BULK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SIZE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_ROTATE) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SESSIONS) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_LOSS),
	.compose = rmq_compose,
};
