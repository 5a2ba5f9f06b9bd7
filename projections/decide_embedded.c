/*
 * decide_embedded.c - an embedded private instance's credential.
 *
 * docs/manifest.md: an embedded instance is never a provider, but tally
 * still generates its credential, so the module's password is not a
 * constant in its image.  The credential travels as a grant of its own
 * (scope embedded, no provider): the same intent, sealing and delivery
 * as any grant's, with no driver call, since the module's own instance
 * takes the password from its environment.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "ctx.h"
#include "decide_embedded.h"
#include "events.h"
#include "grant.h"
#include "graph.h"

#define EMB_MAX	64	/* instances read per module (the loader's map) */

int
tl_dec_embedded_request(struct tl_ctx *c, const char *module,
    const char *node)
{
	struct tl_rec m;
	struct tl_bnode arr;
	char name[EMB_MAX][64], type[EMB_MAX][64];
	char k[TL_KEY_MAX], gkey[TL_KEY_MAX], stream[TL_KEY_MAX];
	struct tl_body b;
	size_t i, n = 0;
	int rc;

	if ((rc = tl_key(k, "m/%s", module)) != 0 ||
	    (rc = tl_rec_get(c->t, c->p.graph, k, &m)) != 0)
		return rc;
	/* Copied out first: emitting may move the pages m points into. */
	if (tl_bn_get(m.m, "embedded", &arr) == 0)
		for (i = 0; i < tl_bn_len(arr) && n < EMB_MAX; i++) {
			struct tl_bnode e = tl_bn_at(arr, i);

			name[n][0] = type[n][0] = '\0';
			tl_bn_getstr(e, "name", name[n], sizeof(name[n]));
			tl_bn_getstr(e, "type", type[n], sizeof(type[n]));
			if (name[n][0] != '\0')
				n++;
		}
	tl_rec_close(&m);
	for (i = 0; i < n; i++) {
		if ((rc = tl_grant_key(gkey, module, name[i], node)) != 0 ||
		    (rc = tl_key(k, "g/%s", gkey)) != 0)
			return rc;
		if (tl_rec_exists(c->t, c->p.grants, k))
			continue;	/* one credential per instance */
		if ((rc = tl_key(stream, "grant/%s", gkey)) != 0)
			return rc;
		tl_body_init(&b);
		tl_body_str(&b, "grant", gkey);
		tl_body_str(&b, "module", module);
		tl_body_str(&b, "req", name[i]);
		tl_body_str(&b, "node", node);
		tl_body_str(&b, "scope", TL_GRANT_SCOPE_EMBEDDED);
		tl_body_str(&b, "type", type[i]);
		tl_body_str(&b, "provider", "");
		tl_body_str(&b, "resource", name[i]);
		rc = tl_emit(c, TL_EV_GRANT_REQUESTED, stream, &b, NULL);
		tl_body_free(&b);
		if (rc != 0)
			return rc;
	}
	return 0;
}
