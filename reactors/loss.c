/*
 * loss.c - what revoking a grant would lose now, asked of its driver
 * before a command acts (tally remove shows it and wants --yes).
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
tl_rx_loss(struct tl_rx *rx, struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, int force_drop, int *loses, int *drop,
    char *what)
{
	char driver[64], res[64], own[64], login[64];
	char origin[TL_GRANT_ID_MAX + 1];
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	struct tl_drv_admin a;
	struct tl_drv_fence fence;
	struct tl_drv_grant dg;
	struct tl_rx_prov pv;
	void *h = NULL;
	int rc, pdrop = 0;

	*loses = 0;
	*drop = force_drop;
	what[0] = '\0';
	if ((rc = tl_rx_load_provider(t, p, rx, g->provider, g->type, &pv,
	    driver, &pdrop)) != 0)
		goto out;
	/* An adopted object is retained (provision.c), but by tally purge. */
	*drop = force_drop || (pdrop && g->adopt_version == 0);
	if (pv.ops == NULL || pv.ops->loss == NULL) {
		rc = TL_ENOTFOUND;
		goto out;
	}
	tl_rx_prov_admin(&pv, sv, &fence, &a);
	if ((rc = pv.ops->open(&a, &h, what)) != 0)
		goto out;
	tl_rx_grant_names(rx, g, g->version, res, own, login);
	tl_rx_grant_origin(g, origin);
	memset(&dg, 0, sizeof(dg));
	dg.resource = res;
	dg.owner = own;
	dg.login = login;
	dg.grant = origin;
	dg.adopt_unnamed = tl_rx_grant_naming(g) == 1;
	dg.adopt_mesh = tl_rx_grant_adopt(g);
	dg.adopted = g->adopt_version != 0;
	dg.access = (int)g->access;
	rc = pv.ops->loss(h, &dg, *drop, loses, what);
	pv.ops->close(h);
out:
	tl_rx_prov_wipe(&pv);
	return rc;
}
