/*
 * names.c - the one place where a grant's provider names are derived.
 *
 * Names must be injective: two different grants never get the same
 * database, owner role or login, whatever their module, requirement,
 * resource and node names.  Joining names with a separator or cutting
 * them to the provider's identifier limit is not (a shared "x-node-a"
 * and a per-instance "x" on node-a were one database; so were one name
 * under two resource types of a provider, and a 63-character name and
 * the shortened form of a longer one).  So every name of the current
 * scheme (TL_GRANT_NAMING) is
 *
 *	PREFIX "_" DIGEST SUFFIX
 *
 * DIGEST is the first 16 hex digits of BLAKE2b-128 of the whole grant
 * id (MODULE/REQ or MODULE/REQ@NODE), which differs between any two
 * grants; PREFIX is the readable RESOURCE or RESOURCE-NODE, cut so that
 * the whole fits; SUFFIX is "" for the database and owner role, "_vN"
 * for the login of credential version N, "_mV" before it for the
 * resource a move (tally rebind) made at version V.  Names are
 * [a-z0-9-], so read from the right the suffix, then the digest, are
 * recovered from any such name: names of different grants differ in the
 * digest, names of one grant in the suffix, and none equals a name of
 * the earlier scheme, which never has "_" before a hex digit.
 *
 * A grant keeps the scheme it was first provisioned with (g->naming,
 * recorded in grant.provisioning): its objects exist under those names.
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "rx-internal.h"

/*
 * The provider's identifier limit: PostgreSQL keeps 63 bytes of a
 * name (NAMEDATALEN - 1) and would silently cut a longer one.
 */
#define NAME_MAX_BYTES	63
#define DIGEST_HEX	16

/* --- scheme 1 (grants provisioned before names carried a digest) --- */

/* Fits base + suffix, a 32-bit hash of base replacing its tail. */
static void
fit_v1(char out[64], const char *base, const char *suffix)
{
	size_t bl = strlen(base), sl = strlen(suffix), i;
	uint32_t h = 2166136261u;

	if (bl + sl <= NAME_MAX_BYTES) {
		memcpy(out, base, bl);
		memcpy(out + bl, suffix, sl + 1);
		return;
	}
	for (i = 0; i < bl; i++)
		h = (h ^ (uint8_t)base[i]) * 16777619u;
	snprintf(out, 64, "%.*s-%08x%s", (int)(NAME_MAX_BYTES - 9 - sl), base,
	    h, suffix);
}

static void
names_v1(const struct tl_grant *g, uint64_t version, int move, char db[64],
    char owner[64], char login[64])
{
	char suffix[24], base[140];

	if (g->database[0] != '\0' && !move)
		snprintf(db, 64, "%s", g->database);
	else {
		if (g->node[0] != '\0') {
			snprintf(base, sizeof(base), "%s-%s", g->resource,
			    g->node);
			fit_v1(db, base, "");
		} else
			fit_v1(db, g->resource, "");
		if (move) {
			snprintf(base, sizeof(base), "%s", db);
			snprintf(suffix, sizeof(suffix), "_m%llu",
			    (unsigned long long)version);
			fit_v1(db, base, suffix);
		}
	}
	snprintf(owner, 64, "%s", db);
	snprintf(suffix, sizeof(suffix), "_v%llu", (unsigned long long)version);
	fit_v1(login, db, suffix);
}

/* --- scheme 2 ------------------------------------------------------- */

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

void
tl_rx_name_digest(const char *grant, char out[DIGEST_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char h[16];
	size_t i;

	crypto_generichash(h, sizeof(h), (const unsigned char *)grant,
	    strlen(grant), NULL, 0);
	for (i = 0; i < DIGEST_HEX / 2; i++) {
		out[2 * i] = hex[h[i] >> 4];
		out[2 * i + 1] = hex[h[i] & 15];
	}
	out[DIGEST_HEX] = '\0';
}

/* PREFIX (cut to fit) "_" DIGEST SUFFIX; suffix is at most 44 bytes. */
static void
fit_v2(char out[64], const char *prefix, const char *digest,
    const char *suffix)
{
	size_t sl = strlen(suffix), pl = strlen(prefix), room;

	if (sl > NAME_MAX_BYTES - 1 - DIGEST_HEX)
		sl = NAME_MAX_BYTES - 1 - DIGEST_HEX;	/* not reached */
	room = NAME_MAX_BYTES - 1 - DIGEST_HEX - sl;
	if (pl > room)
		pl = room;
	memcpy(out, prefix, pl);
	out[pl] = '_';
	memcpy(out + pl + 1, digest, DIGEST_HEX);
	memcpy(out + pl + 1 + DIGEST_HEX, suffix, sl);
	out[pl + 1 + DIGEST_HEX + sl] = '\0';
}

static void
names_v2(const struct tl_grant *g, uint64_t version, int move, char db[64],
    char owner[64], char login[64])
{
	char digest[DIGEST_HEX + 1], prefix[140], mv[24] = "", suffix[48];
	char origin[TL_GRANT_ID_MAX + 1];
	const char *at;

	tl_rx_grant_origin(g, origin);
	tl_rx_name_digest(origin, digest);
	if (g->node[0] != '\0')
		snprintf(prefix, sizeof(prefix), "%s-%s", g->resource, g->node);
	else
		snprintf(prefix, sizeof(prefix), "%s", g->resource);
	if (move)
		snprintf(mv, sizeof(mv), "_m%llu", (unsigned long long)version);
	else if (g->database[0] != '\0' &&
	    (at = strstr(g->database, digest)) != NULL && at > g->database &&
	    at[-1] == '_')
		/* A grant that moved lives in the database it names. */
		snprintf(mv, sizeof(mv), "%s", at + DIGEST_HEX);
	fit_v2(db, prefix, digest, mv);
	if (!move && g->database[0] != '\0')
		snprintf(db, 64, "%s", g->database);
	snprintf(owner, 64, "%s", db);
	snprintf(suffix, sizeof(suffix), "%s_v%llu", mv,
	    (unsigned long long)version);
	fit_v2(login, prefix, digest, suffix);
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

void
tl_rx_grant_names(const struct tl_grant *g, uint64_t version, char db[64],
    char owner[64], char login[64])
{
	if (tl_rx_grant_naming(g) == 1)
		names_v1(g, version, 0, db, owner, login);
	else
		names_v2(g, version, 0, db, owner, login);
}

void
tl_rx_move_names(const struct tl_grant *g, uint64_t version, char db[64],
    char owner[64], char login[64])
{
	if (tl_rx_grant_naming(g) == 1)
		names_v1(g, version, 1, db, owner, login);
	else
		names_v2(g, version, 1, db, owner, login);
}
