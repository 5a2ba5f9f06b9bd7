/*
 * names.c - a grant's names on its provider, as its driver derives them.
 *
 * The scheme, the provider's limits and what its objects are (a
 * resource, an owner, a login per credential version) are the driver's
 * (ops->names; drivers/naming.c holds the injective scheme drivers
 * share).  What is the reactors' is which scheme a grant follows: the
 * one its first intent recorded (g->naming), and the resource name its
 * provisioning recorded, which the grant keeps.
 */
#include <stdio.h>
#include <string.h>

#include "rx-internal.h"

void
tl_rx_name_digest(const char *grant, char out[17])
{
	tl_drv_name_digest(grant, out);
}

uint64_t
tl_rx_grant_naming(const struct tl_grant *g)
{
	if (g->naming != 0)
		return g->naming;
	/*
	 * A grant with a credential version but no scheme is a record the
	 * tables kept from before the scheme was folded (they are not
	 * rebuilt on upgrade): its intents named no scheme, so scheme 1.
	 */
	return g->version != 0 ? 1 : TL_GRANT_NAMING;
}

/*
 * The driver's names.  A refusal of the driver (a name it reserves)
 * still fills the names: the driver refuses them again, with its
 * reason, when it is asked to act on them, and the reactor records that.
 */
static void
names(const struct tl_grant *g, uint64_t version, int move, char res[64],
    char owner[64], char login[64])
{
	struct tl_drv_name_in in = {
		.grant = g->id, .resource = g->resource, .node = g->node,
		.recorded = g->object, .version = version,
		.scheme = tl_rx_grant_naming(g), .move = move,
	};
	struct tl_drv_names out;
	char why[TL_DRV_WHY_MAX];

	memset(&out, 0, sizeof(out));
	(void)tl_drv_name(tl_drv_for_type(g->type), &in, &out, why);
	memcpy(res, out.resource, TL_DRV_NAME_MAX);
	memcpy(owner, out.owner, TL_DRV_NAME_MAX);
	memcpy(login, out.login, TL_DRV_NAME_MAX);
}

void
tl_rx_grant_names(const struct tl_grant *g, uint64_t version, char db[64],
    char owner[64], char login[64])
{
	names(g, version, 0, db, owner, login);
}

void
tl_rx_move_names(const struct tl_grant *g, uint64_t version, char db[64],
    char owner[64], char login[64])
{
	names(g, version, 1, db, owner, login);
}
