/*
 * adopt.c - another mesh's objects for a grant, found by their mark,
 * before tally adopt records them (tallyd --find-adopt asks, on the
 * CLI's behalf: the CLI opens no provider session).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "projections/grant.h"
#include "rx-internal.h"
#include "rx.h"
#include "session.h"

int
tl_rx_find_marked(struct tl_rx *rx, struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, const char *from, struct tl_drv_names *out,
    char *what)
{
	char driver[64], origin[TL_GRANT_ID_MAX + 1];
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	struct tl_drv_admin a;
	struct tl_drv_fence fence;
	struct tl_drv_name_in in;
	struct tl_rx_prov pv;
	void *h = NULL;
	int rc, drop = 0;

	memset(out, 0, sizeof(*out));
	what[0] = '\0';
	memset(&pv, 0, sizeof(pv));
	if ((rc = tl_rx_load_provider(t, p, rx, g->provider, g->type, &pv,
	    driver, &drop)) != 0) {
		snprintf(what, TL_WHY_MAX, "provider %s: %s", g->provider,
		    tl_strerror(rc));
		goto out;
	}
	if (pv.ops == NULL) {
		rc = TL_EINVAL;
		snprintf(what, TL_WHY_MAX, "no driver %s in this build",
		    driver);
		goto out;
	}
	if (!tl_drv_can(pv.decl, TL_DRV_CAP_FIND_MARKED, what)) {
		rc = TL_EINVAL;
		goto out;
	}
	tl_rx_prov_admin(&pv, sv, &fence, &a);
	if ((rc = pv.ops->open(&a, &h, what)) != 0)
		goto out;
	tl_rx_grant_origin(g, origin);
	memset(&in, 0, sizeof(in));
	in.grant = origin;
	in.resource = g->resource;
	in.node = g->node;
	in.recorded = "";
	in.version = 1;
	in.scheme = tl_drv_naming(pv.decl);
	in.mesh = from;
	rc = pv.ops->find_marked(h, &in, from, out, what);
	pv.ops->close(h);
out:
	tl_rx_prov_wipe(&pv);
	return rc;
}
