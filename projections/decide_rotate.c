/*
 * decide_rotate.c - starting rotations and acknowledging credentials.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "decide_rotate.h"
#include "grant.h"
#include "graph.h"
#include "rebind.h"
#include "rotation.h"

int
tl_dec_rotate(struct tl_ctx *c, const char *grant, uint64_t deadline_ns,
    const char *reason)
{
	struct tl_grant g;
	struct tl_rotation r;
	struct tl_rebind mv;
	struct tl_body b;
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_grant_find(c, grant, &g)) != 0)
		return rc;
	/* The module sets it on its own instance: tally cannot switch it. */
	if (TL_GRANT_IS_EMBEDDED(&g))
		return tl_refuse(c, TL_EREFUSED, "%s is embedded instance %s's "
		    "credential: the module sets it on its own instance, so "
		    "tally does not rotate it", grant, g.req);
	if (tl_rot_get(c->t, &c->p, grant, &r) == 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is already rotating "
		    "v%llu → v%llu (%s): a second rotation is refused until it "
		    "completes; see tally status %s", grant,
		    (unsigned long long)r.from, (unsigned long long)r.to,
		    r.state, g.module);
	if (tl_mv_get(c->t, &c->p, grant, &mv) == 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is moving to %s (%s): "
		    "a rotation waits until the move ends; see tally status %s",
		    grant, mv.to, mv.state, g.module);
	if (strcmp(g.state, TL_GRANT_PROVISIONED) != 0)
		return tl_refuse(c, TL_EREFUSED, "grant %s is %s: only a "
		    "provisioned grant can be rotated", grant, g.state);
	if ((rc = tl_key(stream, "grant/%s", grant)) != 0)
		return rc;
	c->cause = g.state_seq;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, grant);
	tl_body_u64(&b, TL_F_FROM, g.version);
	tl_body_u64(&b, TL_F_TO, g.version + 1);
	tl_body_u64(&b, TL_F_DEADLINE_NS, deadline_ns);
	tl_body_str(&b, TL_F_REASON, reason);
	rc = tl_emit(c, TL_EV_ROT_STARTED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

struct ack_arg {
	struct tl_ctx	*c;
	const char	*node;
	uint64_t	 version;
	size_t		 n;
	size_t		 seen;
	size_t		 matched;	/* grants at that version */
	char		 have[256];	/* the versions held, for a refusal */
};

static int
ack_one(const struct tl_grant *g, void *arg)
{
	struct ack_arg *aa = arg;
	struct tl_body b;
	char holder[140];
	char stream[TL_KEY_MAX];
	int rc;

	if (g->node[0] != '\0' && strcmp(g->node, aa->node) != 0)
		return 0;
	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0)
		return 0;
	aa->seen++;
	if (g->version != aa->version) {
		size_t l = strlen(aa->have);

		if (l < sizeof(aa->have))
			snprintf(aa->have + l, sizeof(aa->have) - l, "%s%s v%llu",
			    l ? ", " : "", g->id, (unsigned long long)g->version);
		return 0;
	}
	aa->matched++;
	snprintf(holder, sizeof(holder), "%s@%s", g->module, aa->node);
	if (tl_rot_acked(aa->c->t, &aa->c->p, g->id, aa->version, holder))
		return 0;
	if ((rc = tl_key(stream, "grant/%s", g->id)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, g->id);
	tl_body_str(&b, TL_F_HOLDER, holder);
	tl_body_u64(&b, TL_F_VERSION, aa->version);
	rc = tl_emit(aa->c, TL_EV_CRED_ACKED, stream, &b, NULL);
	tl_body_free(&b);
	if (rc == 0)
		aa->n++;
	return rc;
}

int
tl_dec_ack(struct tl_ctx *c, const char *node, const char *module,
    uint64_t version, size_t *acked)
{
	struct ack_arg aa = { c, node, version, 0, 0, 0, "" };
	char k[TL_KEY_MAX];
	int rc;

	*acked = 0;
	if ((rc = tl_key(k, "a/%s@%s", module, node)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "%s is not assigned to %s",
		    module, node);
	/* Collect-free: acks write keys the grant scan does not read. */
	if ((rc = tl_grant_each_of_module(c->t, &c->p, module, ack_one,
	    &aa)) != 0)
		return rc;
	if (aa.seen == 0)
		return tl_refuse(c, TL_ENOTFOUND, "%s on %s holds no "
		    "provisioned grant", module, node);
	/*
	 * A version no grant has (a typo, a stale or early ack) is not
	 * silently taken: the rotation would wait on while the holder
	 * believes it acknowledged.
	 */
	if (aa.matched == 0)
		return tl_refuse(c, TL_EREFUSED, "%s on %s holds no credential "
		    "v%llu: its grants are at %s", module, node,
		    (unsigned long long)version, aa.have);
	*acked = aa.n;
	return 0;
}

int
tl_dec_rotate_admin(struct tl_ctx *c, const char *provider)
{
	struct tl_body b;
	uint64_t started, issued;
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "p/%s", provider)) != 0 ||
	    (rc = tl_key(stream, "provider/%s", provider)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "no provider %s (providers "
		    "are named NODE/MODULE)", provider);
	if (tl_adm_get(c->t, &c->p, provider, &started, &issued) == 0)
		return tl_refuse(c, TL_EREFUSED, "the admin credential of %s "
		    "is already rotating (since seq %llu): refused until it "
		    "completes", provider, (unsigned long long)started);
	tl_body_init(&b);
	tl_body_str(&b, TL_F_ID, provider);
	rc = tl_emit(c, TL_EV_ADM_STARTED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}
