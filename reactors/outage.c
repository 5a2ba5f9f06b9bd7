/*
 * outage.c - a provider's outage, recorded once by whichever reactor
 * meets it first, and its recovery.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/proj.h"
#include "rx-internal.h"
#include "session.h"

void
tl_rx_auth_reason(const struct tl_rx_prov *pv, const char *why, char *out,
    size_t cap)
{
	const struct tl_drv_setting *s;
	char names[200] = "";
	size_t n = 0;

	for (s = pv->ops != NULL ? pv->ops->decl->settings : NULL; s != NULL &&
	    s->name != NULL; s++)
		if (s->secret && n < sizeof(names))
			n += (size_t)snprintf(names + n, sizeof(names) - n,
			    "%s--secret %s", n ? " " : "", s->name);
	if (n >= sizeof(names))
		names[sizeof(names) - 1] = '\0';
	snprintf(out, cap, "the admin secret is missing or refused (%s): "
	    "give it with tally assign %s %s %s < FILE (the rest of the "
	    "assignment is kept)", why, pv->module,
	    pv->node, names[0] != '\0' ? names : "--secret NAME");
}

/*
 * Is provider id recorded down, and of which kind (TL_RX_DOWN_*)?  The
 * recorded reason into why (cap bytes) when why is not NULL.
 */
static int
recorded_down(struct tl_ctx *c, const char *id, int *auth, char *why,
    size_t cap)
{
	char k[TL_KEY_MAX], kind[32] = "";
	struct tl_rec r;

	if (tl_key(k, "pu/%s", id) != 0 ||
	    tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "kind", kind, sizeof(kind));
	if (why != NULL)
		tl_bn_getstr(r.m, "reason", why, cap);
	tl_rec_close(&r);
	/* Older records said "auth-failed" and "unreachable". */
	*auth = strstr(kind, "auth") != NULL ? TL_RX_DOWN_AUTH :
	    strcmp(kind, TL_PROVIDER_UNRESOLVED) == 0 ? TL_RX_DOWN_UNRESOLVED :
	    strcmp(kind, TL_PROVIDER_UNTRUSTED) == 0 ? TL_RX_DOWN_UNTRUSTED :
	    TL_RX_DOWN_UNREACH;
	return 1;
}

static int
emit(struct tl_ctx *c, const char *type, const char *id, const char *reason,
    const char *kind)
{
	char stream[TL_KEY_MAX];
	struct tl_body b;
	int rc;

	if ((rc = tl_key(stream, "provider/%s", id)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_ID, id);
	if (reason != NULL) {
		tl_body_str(&b, TL_F_REASON, reason);
		tl_body_str(&b, TL_F_KIND, kind);
	}
	c->cause = 0;
	c->have_corr = 0;
	rc = tl_emit(c, type, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

int
tl_rx_provider_down(struct tl_ctx *c, const char *id, int auth,
    const char *reason)
{
	char was[1024] = "";
	int was_auth = 0;

	/*
	 * Once per outage: not again when only the wording changes
	 * ("shutting down", then "connection refused"), nor when the other
	 * reactor meets the same outage.  A certificate that does not
	 * verify is said again when the reason changes: that is a change
	 * of settings (another ca, another host), not of wording.
	 */
	if (recorded_down(c, id, &was_auth, was, sizeof(was)) &&
	    was_auth == auth && (auth != TL_RX_DOWN_UNTRUSTED ||
	    strncmp(was, reason != NULL ? reason : "", sizeof(was) - 1) == 0))
		return 0;
	return emit(c, TL_EV_PROVIDER_UNREACHABLE, id, reason,
	    auth == TL_RX_DOWN_AUTH ? TL_PROVIDER_AUTH_FAILED :
	    auth == TL_RX_DOWN_UNRESOLVED ? TL_PROVIDER_UNRESOLVED :
	    auth == TL_RX_DOWN_UNTRUSTED ? TL_PROVIDER_UNTRUSTED :
	    TL_PROVIDER_UNREACHABLE);
}

int
tl_rx_provider_up(struct tl_ctx *c, const char *id)
{
	int auth;

	if (!recorded_down(c, id, &auth, NULL, 0))
		return 0;
	return emit(c, TL_EV_PROVIDER_RECOVERED, id, NULL, NULL);
}
