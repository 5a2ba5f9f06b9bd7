/*
 * naming.c - the injective naming scheme drivers share, and the
 * helpers of the contract that read a driver's declarations.
 *
 * Names must be injective: two different grants never get the same
 * resource, owner or login, whatever their module, requirement,
 * resource and node names.  Joining names with a separator or cutting
 * them to the provider's identifier limit is not (a shared "x-node-a"
 * and a per-instance "x" on node-a were one resource; so were one name
 * under two resource types of a provider, and a name of the limit's
 * length and the shortened form of a longer one).  So every name of
 * the current scheme (TL_DRV_NAMING, 2) is
 *
 *	PREFIX "_" DIGEST SUFFIX
 *
 * DIGEST is the first 16 hex digits of BLAKE2b-128 of the whole grant
 * id (MODULE/REQ or MODULE/REQ@NODE), which differs between any two
 * grants; PREFIX is the readable RESOURCE or RESOURCE-NODE, cut so that
 * the whole fits; SUFFIX is "" for the resource and owner, "_vN" for
 * the login of credential version N, "_mV" before it for the resource a
 * move (tally rebind) made at version V.  Names are [a-z0-9-], so read
 * from the right the suffix, then the digest, are recovered from any
 * such name: names of different grants differ in the digest, names of
 * one grant in the suffix, and none equals a name of scheme 1, which
 * never has "_" before a hex digit.
 *
 * Scheme 3 is scheme 2 with DIGEST keyed by the mesh's naming key (a
 * subkey of its master key, in->key): for drivers whose names share a
 * namespace in which consumers create names of their own (keyed_names),
 * where an unkeyed digest would let a consumer compute a future grant's
 * name and take it first.  Two meshes name the same grant differently;
 * one mesh names it the same way every time, and records the resource
 * name in the grant's first intent anyway.  Without the key scheme 3
 * gives no name at all ("") rather than a predictable one.
 *
 * Scheme 4 is scheme 2 with DIGEST keyed by the mesh id (in->mesh, 16
 * bytes): two meshes administering one server name the same grant
 * differently, so neither can take the other's objects by name.  The
 * id is not secret; keyed_names drivers keep scheme 3.
 *
 * A grant keeps the scheme it was first provisioned with (recorded in
 * its grant.provisioning): its objects exist under those names.  The
 * code below was reactors/names.c (the limit was PostgreSQL's, 63);
 * with max 63 it gives the same names byte for byte.
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "core/error.h"
#include "driver.h"

#define DIGEST_HEX	16

/* --- scheme 1 (grants provisioned before names carried a digest) --- */

/* Fits base + suffix, a 32-bit hash of base replacing its tail. */
static void
fit_v1(char out[TL_DRV_NAME_MAX], size_t max, const char *base,
    const char *suffix)
{
	size_t bl = strlen(base), sl = strlen(suffix), i;
	uint32_t h = 2166136261u;

	if (bl + sl <= max) {
		memcpy(out, base, bl);
		memcpy(out + bl, suffix, sl + 1);
		return;
	}
	for (i = 0; i < bl; i++)
		h = (h ^ (uint8_t)base[i]) * 16777619u;
	snprintf(out, TL_DRV_NAME_MAX, "%.*s-%08x%s", (int)(max - 9 - sl),
	    base, h, suffix);
}

static void
names_v1(const struct tl_drv_name_in *in, size_t max,
    struct tl_drv_names *o)
{
	char suffix[24], base[140];

	if (in->recorded[0] != '\0' && !in->move)
		snprintf(o->resource, TL_DRV_NAME_MAX, "%s", in->recorded);
	else {
		if (in->node[0] != '\0') {
			snprintf(base, sizeof(base), "%s-%s", in->resource,
			    in->node);
			fit_v1(o->resource, max, base, "");
		} else
			fit_v1(o->resource, max, in->resource, "");
		if (in->move) {
			snprintf(base, sizeof(base), "%s", o->resource);
			snprintf(suffix, sizeof(suffix), "_m%llu",
			    (unsigned long long)in->version);
			fit_v1(o->resource, max, base, suffix);
		}
	}
	snprintf(o->owner, TL_DRV_NAME_MAX, "%s", o->resource);
	snprintf(suffix, sizeof(suffix), "_v%llu",
	    (unsigned long long)in->version);
	fit_v1(o->login, max, o->resource, suffix);
}

/* --- scheme 2 ------------------------------------------------------- */

static void
keyed_digest(const char *grant, const uint8_t *key, char out[DIGEST_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char h[16];
	size_t i;

	crypto_generichash(h, sizeof(h), (const unsigned char *)grant,
	    strlen(grant), key, key != NULL ? TL_DRV_NAME_KEY_LEN : 0);
	for (i = 0; i < DIGEST_HEX / 2; i++) {
		out[2 * i] = hex[h[i] >> 4];
		out[2 * i + 1] = hex[h[i] & 15];
	}
	out[DIGEST_HEX] = '\0';
}

void
tl_drv_name_digest(const char *grant, char out[DIGEST_HEX + 1])
{
	keyed_digest(grant, NULL, out);
}

void
tl_drv_name_digest_keyed(const char *grant, const uint8_t *key,
    char out[DIGEST_HEX + 1])
{
	keyed_digest(grant, key, out);
}

/* Scheme 4's: keyed by the mesh id's 16 bytes (mesh_ok checked it). */
static void
mesh_digest(const char *grant, const char *mesh, char out[DIGEST_HEX + 1])
{
	uint8_t key[TL_DRV_NAME_KEY_LEN] = { 0 };
	size_t n = 0;

	sodium_hex2bin(key, 16, mesh, 32, NULL, &n, NULL);
	keyed_digest(grant, key, out);
	sodium_memzero(key, sizeof(key));
}

static int
mesh_ok(const char *mesh)
{
	return mesh != NULL && strlen(mesh) == 32 &&
	    strspn(mesh, "0123456789abcdef") == 32;
}

/* PREFIX (cut to fit) "_" DIGEST SUFFIX; suffix is at most 44 bytes. */
static void
fit_v2(char out[TL_DRV_NAME_MAX], size_t max, const char *prefix,
    const char *digest, const char *suffix)
{
	size_t sl = strlen(suffix), pl = strlen(prefix), room;

	if (sl > max - 1 - DIGEST_HEX)
		sl = max - 1 - DIGEST_HEX;	/* not reached */
	room = max - 1 - DIGEST_HEX - sl;
	if (pl > room)
		pl = room;
	memcpy(out, prefix, pl);
	out[pl] = '_';
	memcpy(out + pl + 1, digest, DIGEST_HEX);
	memcpy(out + pl + 1 + DIGEST_HEX, suffix, sl);
	out[pl + 1 + DIGEST_HEX + sl] = '\0';
}

static void
names_v2(const struct tl_drv_name_in *in, size_t max,
    struct tl_drv_names *o)
{
	char digest[DIGEST_HEX + 1], prefix[140], mv[24] = "", suffix[48];
	const char *at;

	if (in->scheme == TL_DRV_NAMING_KEYED)
		tl_drv_name_digest_keyed(in->grant, in->key, digest);
	else if (in->scheme == TL_DRV_NAMING_MESH)
		mesh_digest(in->grant, in->mesh, digest);
	else
		tl_drv_name_digest(in->grant, digest);
	if (in->node[0] != '\0')
		snprintf(prefix, sizeof(prefix), "%s-%s", in->resource,
		    in->node);
	else
		snprintf(prefix, sizeof(prefix), "%s", in->resource);
	if (in->move)
		snprintf(mv, sizeof(mv), "_m%llu",
		    (unsigned long long)in->version);
	else if (in->recorded[0] != '\0' &&
	    (at = strstr(in->recorded, digest)) != NULL &&
	    at > in->recorded && at[-1] == '_')
		/* A grant that moved lives in the resource it names. */
		snprintf(mv, sizeof(mv), "%s", at + DIGEST_HEX);
	fit_v2(o->resource, max, prefix, digest, mv);
	if (!in->move && in->recorded[0] != '\0')
		snprintf(o->resource, TL_DRV_NAME_MAX, "%s", in->recorded);
	snprintf(o->owner, TL_DRV_NAME_MAX, "%s", o->resource);
	snprintf(suffix, sizeof(suffix), "%s_v%llu", mv,
	    (unsigned long long)in->version);
	fit_v2(o->login, max, prefix, digest, suffix);
}

void
tl_drv_name_scheme(const struct tl_drv_name_in *in, size_t max,
    struct tl_drv_names *out)
{
	if (max >= TL_DRV_NAME_MAX)
		max = TL_DRV_NAME_MAX - 1;
	memset(out, 0, sizeof(*out));
	if (in->scheme == 1)
		names_v1(in, max, out);
	else if (in->scheme == TL_DRV_NAMING_MESH) {
		if (mesh_ok(in->mesh))
			names_v2(in, max, out);
	} else if (in->scheme != TL_DRV_NAMING_KEYED || in->key != NULL)
		names_v2(in, max, out);
}

uint64_t
tl_drv_naming(const struct tl_drv_ops *ops)
{
	return ops != NULL && ops->keyed_names ? TL_DRV_NAMING_KEYED :
	    TL_DRV_NAMING;
}

/* --- reading a driver's declarations -------------------------------- */

int
tl_drv_name(const struct tl_drv_ops *ops, const struct tl_drv_name_in *in,
    struct tl_drv_names *out, char *why)
{
	if (ops != NULL && ops->names != NULL)
		return ops->names(in, out, why);
	tl_drv_name_scheme(in, TL_DRV_NAME_MAX - 1, out);
	return 0;
}

int
tl_drv_compose(const struct tl_drv_ops *ops, const char *field,
    const struct tl_drv_endpoint *ep, const struct tl_drv_grant *g,
    char *out, size_t cap)
{
	const char *v = NULL;

	if (ops != NULL && ops->compose != NULL)
		return ops->compose(field, ep, g, out, cap);
	if (cap > 0)
		out[0] = '\0';
	if (strcmp(field, "host") == 0)
		v = ep->host;
	else if (strcmp(field, "port") == 0)
		v = ep->port;
	if (v == NULL)
		return TL_ENOTFOUND;
	if ((size_t)snprintf(out, cap, "%s", v) >= cap)
		return TL_ETOOBIG;
	return 0;
}

int
tl_drv_field_secret(const struct tl_drv_ops *ops, const char *field)
{
	const struct tl_drv_field *f;

	for (f = ops->field_info; f != NULL && f->name != NULL; f++)
		if (strcmp(f->name, field) == 0)
			return f->secret;
	return 0;
}

int
tl_drv_has_tag(const struct tl_drv_ops *ops, const char *tag)
{
	size_t i;

	for (i = 0; ops->tags != NULL && ops->tags[i] != NULL; i++)
		if (strcmp(ops->tags[i], tag) == 0)
			return 1;
	return 0;
}

const char *
tl_drv_setting_default(const struct tl_drv_ops *ops, const char *name)
{
	const struct tl_drv_setting *s;

	if (ops == NULL ||
	    (s = tl_drv_setting_find(ops->settings, name)) == NULL)
		return NULL;
	return s->dflt;
}

int
tl_drv_can(const struct tl_drv_ops *ops, enum tl_drv_cap cap, char *why)
{
	const char *lack = NULL, *what = "";

	switch (cap) {
	case TL_DRV_CAP_MIGRATE:
		what = "run migrations";
		if (ops->migrate == NULL)
			lack = "migrate";
		break;
	case TL_DRV_CAP_MOVE:
		what = "move data";
		if (ops->copy == NULL)
			lack = "copy";
		else if (ops->freeze == NULL)
			lack = "freeze";
		break;
	case TL_DRV_CAP_SIZE:
		what = "measure data";
		if (ops->size == NULL)
			lack = "size";
		break;
	case TL_DRV_CAP_ADMIN_ROTATE:
		what = "rotate an admin credential";
		if (ops->set_admin_password == NULL)
			lack = "set_admin_password";
		break;
	case TL_DRV_CAP_CHECK:
		what = "verify grants";
		if (ops->check == NULL)
			lack = "check";
		break;
	case TL_DRV_CAP_CHECK_BULK:
		what = "verify grants in bulk";
		if (ops->check_bulk == NULL)
			lack = "check_bulk";
		break;
	case TL_DRV_CAP_ROTATE:
		what = "rotate credentials";
		if (ops->credential == TL_DRV_CRED_NONE)
			lack = "credential (its grants have none)";
		else if (ops->add_credential == NULL)
			lack = "add_credential";
		else if (ops->retire_credential == NULL)
			lack = "retire_credential";
		break;
	case TL_DRV_CAP_FIND_MARKED:
		what = "find another mesh's objects by their mark";
		if (ops->find_marked == NULL)
			lack = "find_marked";
		break;
	}
	if (lack == NULL)
		return 1;
	if (why != NULL)
		snprintf(why, TL_DRV_WHY_MAX, "driver %s cannot %s: it has no "
		    "%s", ops->name, what, lack);
	return 0;
}
