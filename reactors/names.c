/*
 * names.c - a grant's names on its provider, as its driver derives them.
 *
 * The scheme, the provider's limits and what its objects are (a
 * resource, an owner, a login per credential version) are the driver's
 * (decl->names; drivers/naming.c holds the injective scheme drivers
 * share).  What is the reactors' is which scheme a grant follows: the
 * one its first intent recorded (g->naming), the resource name its
 * provisioning recorded, which the grant keeps, and the mesh's naming
 * key (from rx's master key) for a driver whose names are keyed, and
 * the mesh id (rx->mesh) that scheme 4, every other new grant's, is
 * keyed by; and the names a grant adopted by their mark, which its
 * driver gives back (tl_drv_name_in.adopted).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "epoch.h"
#include "rx-internal.h"

void
tl_rx_grant_origin(const struct tl_grant *g, char out[TL_GRANT_ID_MAX + 1])
{
	const char *tilde = strrchr(g->id, '~');
	size_t n = strlen(g->id);

	/*
	 * Grant ids are made of [a-z0-9-/@] only: "~" appears in the id of
	 * the old resource a move left (projections/rebind.c) and nowhere
	 * else.  Its objects were made for, named after and marked with the
	 * grant that moved, so every name and mark is derived from that.
	 */
	if (tilde != NULL && tilde > g->id && tilde[1] == 'v' &&
	    strspn(tilde + 2, "0123456789") == strlen(tilde + 2) &&
	    tilde[2] != '\0')
		n = (size_t)(tilde - g->id);
	memcpy(out, g->id, n);
	out[n] = '\0';
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
	return g->version != 0 ? 1 : tl_drv_naming(tl_drv_decl_for_type(g->type));
}

uint64_t
tl_rx_grant_scheme(const struct tl_rx *rx, const struct tl_grant *g)
{
	uint64_t s = tl_rx_grant_naming(g);

	if (g->naming == 0 && s == TL_DRV_NAMING &&
	    (tl_mesh_ok(g->adopt_from) ||
	    (rx != NULL && tl_mesh_ok(rx->mesh))))
		return TL_DRV_NAMING_MESH;
	return s;
}

const char *
tl_rx_grant_adopt(const struct tl_grant *g)
{
	return g->adopt_pending && g->adopt_from[0] != '\0' ?
	    g->adopt_from : NULL;
}

int
tl_rx_grant_adopting(const struct tl_grant *g)
{
	uint64_t v = g->version != 0 ? g->version : 1;

	return g->adopt_version != 0 && v == g->adopt_version;
}

int
tl_rx_grant_adopted_login(const struct tl_grant *g)
{
	return tl_rx_grant_adopting(g) && g->adopt_login[0] != '\0';
}

/*
 * The names g adopted, found by their mark (tally adopt recorded them):
 * 1 with a filled, else 0.
 */
static int
adopted_names(const struct tl_grant *g, struct tl_drv_names *a)
{
	_Static_assert(sizeof(g->adopt_login) == TL_DRV_NAME_MAX, "names");
	if (g->adopt_login[0] == '\0' || g->adopt_version != 0)
		return 0;
	memcpy(a->resource, g->adopt_resource, TL_DRV_NAME_MAX);
	memcpy(a->owner, g->adopt_owner, TL_DRV_NAME_MAX);
	memcpy(a->login, g->adopt_login, TL_DRV_NAME_MAX);
	return 1;
}

/*
 * The driver's names.  A refusal of the driver (a name it reserves)
 * still fills the names: the driver refuses them again, with its
 * reason, when it is asked to act on them, and the reactor records that.
 */
static void
names(const struct tl_rx *rx, const struct tl_grant *g, uint64_t version,
    int move, char res[64], char owner[64], char login[64])
{
	char origin[TL_GRANT_ID_MAX + 1];
	uint8_t key[TL_NAMING_KEY_LEN];
	struct tl_drv_name_in in = {
		.grant = origin, .resource = g->resource, .node = g->node,
		/*
		 * An adopted object's name is not the scheme's: the owner
		 * and logins stay the scheme's, whatever was recorded.
		 */
		.recorded = g->adopt_version != 0 || g->access != 0 ? "" :
		    g->object,
		/* A certificate keeps its login: the first version's. */
		.version = g->cert_login != 0 ? g->cert_login : version,
		.scheme = tl_rx_grant_scheme(rx, g), .move = move,
		/* An adopted grant lives in the names its old mesh gave. */
		.mesh = g->adopt_from[0] != '\0' ? g->adopt_from :
		    rx != NULL ? rx->mesh : NULL,
	};
	const struct tl_drv_decl *d = tl_drv_decl_for_type(g->type);
	struct tl_drv_names out, adopted;
	char why[TL_WHY_MAX];

	_Static_assert(TL_NAMING_KEY_LEN == TL_DRV_NAME_KEY_LEN, "naming key");
	if (adopted_names(g, &adopted))
		in.adopted = &adopted;
	if (in.scheme == TL_DRV_NAMING_KEYED && rx != NULL &&
	    tl_secret_naming_key(&rx->key, key) == 0)
		in.key = key;
	tl_rx_grant_origin(g, origin);
	memset(&out, 0, sizeof(out));
	(void)tl_drv_name(d, &in, &out, why);
	tl_secret_wipe(key, sizeof(key));
	/*
	 * An object tally adopt took over keeps its name, and the version
	 * adopted logs in as the login it had; every other version is a
	 * login of the grant's own scheme (the rotation's), except where
	 * every version shares one login (MULTI_PASSWORD: a password per
	 * version on the adopted login).
	 */
	if (g->adopt_version != 0) {
		memcpy(out.resource, g->adopt_resource, TL_DRV_NAME_MAX);
		if (g->adopt_login[0] != '\0' && (in.version ==
		    g->adopt_version || (d != NULL && d->credential.kind ==
		    TL_DRV_CRED_MULTI_PASSWORD)))
			memcpy(out.login, g->adopt_login, TL_DRV_NAME_MAX);
	}
	/*
	 * A login below ownership: the resource and owner are the other
	 * grant's (recorded at its first intent), the login its own.
	 */
	if (g->access != 0) {
		_Static_assert(sizeof(g->of_resource) == TL_DRV_NAME_MAX, "of");
		memcpy(out.resource, g->of_resource, TL_DRV_NAME_MAX);
		memcpy(out.owner, g->of_owner, TL_DRV_NAME_MAX);
	}
	memcpy(res, out.resource, TL_DRV_NAME_MAX);
	memcpy(owner, out.owner, TL_DRV_NAME_MAX);
	memcpy(login, out.login, TL_DRV_NAME_MAX);
}

void
tl_rx_grant_names(const struct tl_rx *rx, const struct tl_grant *g,
    uint64_t version, char db[64], char owner[64], char login[64])
{
	names(rx, g, version, 0, db, owner, login);
}

void
tl_rx_move_names(const struct tl_rx *rx, const struct tl_grant *g,
    uint64_t version, char db[64], char owner[64], char login[64])
{
	names(rx, g, version, 1, db, owner, login);
}

int
tl_rx_grant_params(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, const char *driver, char **out)
{
	const struct tl_drv_decl *d = driver != NULL ?
	    tl_drv_decl_find(driver) : tl_drv_decl_for_type(g->type);
	char *buf;
	int rc;

	*out = NULL;
	if (d == NULL || d->params == NULL)
		return 0;
	if ((buf = malloc(TL_DRV_PARAMS_MAX)) == NULL)
		return ENOMEM;
	if ((rc = tl_grant_params(t, p, g, buf, TL_DRV_PARAMS_MAX)) != 0 ||
	    buf[0] == '\0') {
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}
