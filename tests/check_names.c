/*
 * check_names.c - a grant's provider names (reactors/names.c).
 *
 * The current scheme is injective: grants built to collide under a
 * scheme that joins names or cuts them to 63 bytes (separators in the
 * names, per-instance against shared, one name under two types, names
 * longer than the limit, a 63-character name equal to a shortened one)
 * get pairwise different databases, and roles (owner roles and the
 * logins of every version, which share one namespace on the server)
 * that differ from every other grant's, all within 63 bytes.  A grant
 * recorded under the scheme of before keeps its names, and a grant that
 * moved names the logins of its new database.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "projections/grant.h"
#include "reactors/rx-internal.h"

static void
grant(struct tl_grant *g, const char *module, const char *req,
    const char *node, const char *resource, uint64_t naming)
{
	memset(g, 0, sizeof(*g));
	ck_assert_int_eq(tl_grant_key(g->id, module, req, node), 0);
	snprintf(g->module, sizeof(g->module), "%s", module);
	snprintf(g->req, sizeof(g->req), "%s", req);
	snprintf(g->node, sizeof(g->node), "%s", node != NULL ? node : "");
	snprintf(g->resource, sizeof(g->resource), "%s", resource);
	g->naming = naming;
}

/* The digest as the shell computes it: b2sum -l 128, 16 hex digits. */
static void
digest(const char *id, char out[17])
{
	unsigned char h[16];
	int i;

	crypto_generichash(h, sizeof(h), (const unsigned char *)id,
	    strlen(id), NULL, 0);
	for (i = 0; i < 8; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/*
 * tally adopt --resource (grant.adopted): the adopted object's name for
 * every version, whatever was recorded; the version adopted logs in as
 * the login taken over, every other as the scheme says, under the
 * scheme's owner; and that version alone is the one nothing is
 * delivered of.
 */
START_TEST(test_adopted_object)
{
	struct tl_grant g, plain;
	char db[64], own[64], log[64], pdb[64], pown[64], plog[64];

	grant(&plain, "app", "db", NULL, "x", TL_GRANT_NAMING);
	grant(&g, "app", "db", NULL, "x", TL_GRANT_NAMING);
	snprintf(g.adopt_resource, sizeof(g.adopt_resource), "legacydb");
	snprintf(g.adopt_login, sizeof(g.adopt_login), "legacy");
	g.adopt_version = 1;
	ck_assert(tl_rx_grant_adopting(&g));	/* before provisioning */
	ck_assert(tl_rx_grant_adopted_login(&g));
	ck_assert(!tl_rx_grant_adopting(&plain));
	tl_rx_grant_names(NULL, &g, 1, db, own, log);
	tl_rx_grant_names(NULL, &plain, 1, pdb, pown, plog);
	ck_assert_str_eq(db, "legacydb");
	ck_assert_str_eq(log, "legacy");
	ck_assert_str_eq(own, pown);
	/* Provisioned: the object is recorded; the names do not follow it. */
	snprintf(g.object, sizeof(g.object), "legacydb");
	g.version = plain.version = 1;
	tl_rx_grant_names(NULL, &g, 2, db, own, log);
	tl_rx_grant_names(NULL, &plain, 2, pdb, pown, plog);
	ck_assert_str_eq(db, "legacydb");
	ck_assert_str_eq(own, pown);
	ck_assert_str_eq(log, plog);
	ck_assert_str_ne(log, "legacy");
	/* Rotated: v2 is tally's own, delivered and verified. */
	g.version = 2;
	ck_assert(!tl_rx_grant_adopting(&g));
	ck_assert(!tl_rx_grant_adopted_login(&g));
	/* No login adopted (a directory): taken over, nothing withheld. */
	g.adopt_login[0] = '\0';
	g.version = 0;
	ck_assert(tl_rx_grant_adopting(&g));
	ck_assert(!tl_rx_grant_adopted_login(&g));
}
END_TEST

START_TEST(test_shape)
{
	struct tl_grant g;
	char db[64], own[64], log[64], want[64], d[17], dd[17];

	grant(&g, "app", "db", "node-a", "x", 0);
	digest("app/db@node-a", d);
	tl_drv_name_digest(g.id, dd);
	ck_assert_str_eq(d, dd);
	tl_rx_grant_names(NULL, &g, 1, db, own, log);
	snprintf(want, sizeof(want), "x-node-a_%s", d);
	ck_assert_str_eq(db, want);
	ck_assert_str_eq(own, want);
	snprintf(want, sizeof(want), "x-node-a_%s_v1", d);
	ck_assert_str_eq(log, want);
	ck_assert_uint_eq(tl_rx_grant_naming(&g), TL_GRANT_NAMING);

	/* A move: _mV, and the moved grant's next logins follow it. */
	g.naming = 2;
	tl_rx_move_names(NULL, &g, 5, db, own, log);
	snprintf(want, sizeof(want), "x-node-a_%s_m5", d);
	ck_assert_str_eq(db, want);
	ck_assert_str_eq(own, want);
	snprintf(want, sizeof(want), "x-node-a_%s_m5_v5", d);
	ck_assert_str_eq(log, want);
	snprintf(g.object, sizeof(g.object), "%s", db);
	tl_rx_grant_names(NULL, &g, 6, db, own, log);
	snprintf(want, sizeof(want), "x-node-a_%s_m5", d);
	ck_assert_str_eq(db, want);
	snprintf(want, sizeof(want), "x-node-a_%s_m5_v6", d);
	ck_assert_str_eq(log, want);
}
END_TEST

/* Scheme 1 (recorded, or a record from before the field): unchanged. */
START_TEST(test_recorded_scheme)
{
	static const char lng[] =
	    "llllllllllllllllllllllllllllllllllllllllllllllllllllllllll-res";
	struct tl_grant g;
	char db[64], own[64], log[64];
	uint64_t naming;

	for (naming = 0; naming <= 1; naming++) {
		grant(&g, "app", "db", "node-a", "x", naming);
		g.version = 3;		/* provisioned before */
		ck_assert_uint_eq(tl_rx_grant_naming(&g), 1);
		tl_rx_grant_names(NULL, &g, 3, db, own, log);
		ck_assert_str_eq(db, "x-node-a");
		ck_assert_str_eq(own, "x-node-a");
		ck_assert_str_eq(log, "x-node-a_v3");
		tl_rx_move_names(NULL, &g, 4, db, own, log);
		ck_assert_str_eq(db, "x-node-a_m4");
		ck_assert_str_eq(log, "x-node-a_m4_v4");
	}
	grant(&g, "app", "db", "node-a", lng, 1);
	tl_rx_grant_names(NULL, &g, 1, db, own, log);
	ck_assert_str_eq(db,
	    "llllllllllllllllllllllllllllllllllllllllllllllllllllll-60cc03b7");
	/* A recorded database wins (a grant that moved). */
	grant(&g, "app", "db", NULL, "x", 1);
	snprintf(g.object, sizeof(g.object), "x_m7");
	tl_rx_grant_names(NULL, &g, 8, db, own, log);
	ck_assert_str_eq(db, "x_m7");
	ck_assert_str_eq(log, "x_m7_v8");
}
END_TEST

/*
 * The old resource a move leaves is the revoked grant GRANT~vN
 * (projections/rebind.c: the grant's fields, its old database and
 * version): its names are exactly those GRANT had at version N, under
 * either scheme, moved before or not, so a purge drops those and no
 * other; its objects are marked with GRANT.
 */
START_TEST(test_left_behind)
{
	struct tl_grant g, old;
	char db[64], own[64], log[64], odb[64], oown[64], olog[64];
	char origin[TL_GRANT_ID_MAX + 1];
	uint64_t naming;
	int moved;

	for (naming = 1; naming <= 2; naming++)
		for (moved = 0; moved <= 1; moved++) {
			grant(&g, "app", "db", "node-a", "x", naming);
			g.version = 3;
			if (moved)
				tl_rx_move_names(NULL, &g, 3, db, own, log);
			else
				tl_rx_grant_names(NULL, &g, 3, db, own, log);
			snprintf(g.object, sizeof(g.object), "%s", db);
			old = g;
			ck_assert_int_lt(snprintf(old.id, sizeof(old.id),
			    "%.190s~v3", g.id), (int)sizeof(old.id));
			tl_rx_grant_origin(&old, origin);
			ck_assert_str_eq(origin, g.id);
			tl_rx_grant_names(NULL, &old, old.version, odb, oown, olog);
			ck_assert_str_eq(odb, db);
			ck_assert_str_eq(oown, own);
			ck_assert_str_eq(olog, log);
			/* The grant moved on, to names of its own. */
			tl_rx_move_names(NULL, &g, 4, odb, oown, olog);
			ck_assert_str_ne(odb, db);
			ck_assert_str_ne(olog, log);
		}
	/* Only "~v" and digits at the end make an id a left-behind one. */
	grant(&g, "app", "db", NULL, "x", 2);
	tl_rx_grant_origin(&g, origin);
	ck_assert_str_eq(origin, "app/db");
	snprintf(g.id, sizeof(g.id), "app/db~vx");
	tl_rx_grant_origin(&g, origin);
	ck_assert_str_eq(origin, "app/db~vx");
	snprintf(g.id, sizeof(g.id), "app/db~v");
	tl_rx_grant_origin(&g, origin);
	ck_assert_str_eq(origin, "app/db~v");
}
END_TEST

#define MAXN	4096

struct seen {
	char	name[MAXN][64];
	char	owner[MAXN][TL_GRANT_ID_MAX + 1];
	size_t	n;
};

static void
add(struct seen *s, const char *name, const char *grant_id)
{
	size_t i;

	ck_assert_msg(strlen(name) <= 63, "%s: %zu bytes", name, strlen(name));
	for (i = 0; i < s->n; i++)
		if (strcmp(s->name[i], name) == 0)
			ck_assert_msg(strcmp(s->owner[i], grant_id) == 0,
			    "%s is both %s's and %s's", name, s->owner[i],
			    grant_id);
	ck_assert_uint_lt(s->n, MAXN);
	snprintf(s->name[s->n], 64, "%s", name);
	snprintf(s->owner[s->n], sizeof(s->owner[0]), "%s", grant_id);
	s->n++;
}

START_TEST(test_injective)
{
	static const char *const modules[] = { "x", "x-node", "x-node-a", "m" };
	static const char *const reqs[] = { "db", "a", "node-a-db" };
	static const char *const nodes[] = { NULL, "node-a", "a", "b-node-a" };
	char l62[64], l63[64], l60[64];
	const char *resources[8];
	struct seen *dbs = calloc(1, sizeof(*dbs)), *roles = calloc(1,
	    sizeof(*roles));
	size_t m, r, n, k, nres = 0;
	uint64_t v;

	memset(l62, 'l', 62);
	l62[62] = '\0';
	memset(l63, 'l', 63);
	l63[63] = '\0';
	memset(l60, 'l', 60);
	l60[60] = '\0';
	resources[nres++] = "x";
	resources[nres++] = "x-node-a";
	resources[nres++] = "x-node-a-db";
	resources[nres++] = l60;
	resources[nres++] = l62;
	resources[nres++] = l63;
	for (m = 0; m < 4; m++)
		for (r = 0; r < 3; r++)
			for (n = 0; n < 4; n++)
				for (k = 0; k < nres; k++) {
					struct tl_grant g;
					char db[64], own[64], log[64];

					grant(&g, modules[m], reqs[r], nodes[n],
					    resources[k], 2);
					/*
					 * One name under two types or two
					 * providers is the same grant id only
					 * for the same requirement: distinct
					 * requirements are distinct grants.
					 */
					if (k != (m + r + n) % nres)
						continue;
					for (v = 1; v <= 3; v++) {
						tl_rx_grant_names(NULL, &g, v, db,
						    own, log);
						if (v == 1) {
							add(dbs, db, g.id);
							add(roles, own, g.id);
						}
						add(roles, log, g.id);
						tl_rx_move_names(NULL, &g, v + 3, db,
						    own, log);
						add(dbs, db, g.id);
						add(roles, own, g.id);
						add(roles, log, g.id);
					}
				}
	/* Each grant's own names are distinct among themselves, too. */
	for (m = 0; m < roles->n; m++)
		for (n = m + 1; n < roles->n; n++)
			if (strcmp(roles->name[m], roles->name[n]) == 0)
				ck_assert_msg(0, "role %s twice (%s)",
				    roles->name[m], roles->owner[m]);
	ck_assert_uint_gt(dbs->n, 40);
	free(dbs);
	free(roles);
}
END_TEST

/* The collisions of the issue, name by name. */
START_TEST(test_issue_pairs)
{
	struct tl_grant a, b;
	char da[64], db[64], oa[64], ob[64], la[64], lb[64], l62[64];
	char shortened[64];

	grant(&a, "sep-shared", "db", NULL, "x-node-a", 0);
	grant(&b, "sep-inst", "db", "node-a", "x", 0);
	tl_rx_grant_names(NULL, &a, 1, da, oa, la);
	tl_rx_grant_names(NULL, &b, 1, db, ob, lb);
	ck_assert_str_ne(da, db);
	ck_assert_str_ne(la, lb);

	/* The same resource under two types: two requirements. */
	grant(&a, "type-a", "db", NULL, "dup", 0);
	grant(&b, "type-b", "db", NULL, "dup", 0);
	tl_rx_grant_names(NULL, &a, 1, da, oa, la);
	tl_rx_grant_names(NULL, &b, 1, db, ob, lb);
	ck_assert_str_ne(da, db);

	/* A 63-character shared name equal to a shortened one. */
	memset(l62, 'l', 58);
	memcpy(l62 + 58, "-res", 5);
	grant(&a, "long-inst", "db", "node-a", l62, 0);
	tl_rx_grant_names(NULL, &a, 1, da, oa, la);
	ck_assert_uint_le(strlen(da), 63);
	snprintf(shortened, sizeof(shortened), "%s", da);
	grant(&b, "long-shared", "db", NULL, "x", 0);
	snprintf(b.resource, sizeof(b.resource), "%.63s", shortened);
	tl_rx_grant_names(NULL, &b, 1, db, ob, lb);
	ck_assert_str_ne(da, db);
	ck_assert_str_ne(la, lb);
	ck_assert_str_ne(oa, lb);
	ck_assert_str_ne(la, ob);
}
END_TEST

/* An rx holding a fresh master key, as tallyd and the CLI load one. */
static void
rx_with_key(struct tl_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
	rx->key.k = sodium_malloc(TL_KEY_LEN);
	ck_assert_ptr_nonnull(rx->key.k);
	randombytes_buf(rx->key.k, TL_KEY_LEN);
}

/*
 * Issue 21 item 29: a driver whose names share a namespace consumers
 * create in (RGW buckets) names new grants by scheme 3, the digest keyed
 * by the mesh's naming key: not the unkeyed digest anyone can compute,
 * different in two meshes, the same every time in one, and nothing at
 * all without the key.  Grants recorded under scheme 2 keep their names.
 */
START_TEST(test_keyed)
{
	struct tl_rx r1, r2;
	struct tl_grant g;
	char db1[64], o1[64], l1[64], db2[64], o2[64], l2[64], d[17], *p;

	rx_with_key(&r1);
	rx_with_key(&r2);
	grant(&g, "app", "files", NULL, "files", 0);
	snprintf(g.type, sizeof(g.type), "s3-bucket");
	ck_assert_uint_eq(tl_rx_grant_naming(&g), TL_DRV_NAMING_KEYED);
	g.naming = tl_rx_grant_naming(&g);
	digest("app/files", d);

	tl_rx_grant_names(&r1, &g, 1, db1, o1, l1);
	ck_assert_msg(strncmp(db1, "files-", 6) == 0 && strlen(db1) == 22,
	    "bucket %s", db1);
	ck_assert_msg(strstr(db1, d) == NULL && strstr(l1, d) == NULL,
	    "bucket %s / user %s carry the unkeyed digest %s", db1, l1, d);
	tl_rx_grant_names(&r2, &g, 1, db2, o2, l2);
	ck_assert_str_ne(db1, db2);
	ck_assert_str_ne(l1, l2);
	/* The same mesh, again, and at a later version: the same names. */
	tl_rx_grant_names(&r1, &g, 1, db2, o2, l2);
	ck_assert_str_eq(db1, db2);
	ck_assert_str_eq(l1, l2);
	tl_rx_grant_names(&r1, &g, 4, db2, o2, l2);
	ck_assert_str_eq(db1, db2);
	ck_assert_str_eq(l1, l2);
	/* Without the key: no name, never the guessable one. */
	tl_rx_grant_names(NULL, &g, 1, db2, o2, l2);
	ck_assert_str_eq(db2, "");
	ck_assert_str_eq(l2, "");
	/* Recorded, the resource is what was recorded, key or not. */
	snprintf(g.object, sizeof(g.object), "%s", db1);
	g.version = 1;
	tl_rx_grant_names(&r2, &g, 2, db2, o2, l2);
	ck_assert_str_eq(db2, db1);

	/* A bucket grant first provisioned under scheme 2 keeps its names. */
	grant(&g, "old", "files", NULL, "files", TL_DRV_NAMING);
	snprintf(g.type, sizeof(g.type), "s3-bucket");
	g.version = 1;
	ck_assert_uint_eq(tl_rx_grant_naming(&g), TL_DRV_NAMING);
	digest("old/files", d);
	tl_rx_grant_names(&r1, &g, 1, db1, o1, l1);
	ck_assert_msg((p = strstr(db1, d)) != NULL, "bucket %s", db1);
	tl_rx_grant_names(&r2, &g, 1, db2, o2, l2);
	ck_assert_str_eq(db1, db2);

	/* Drivers whose namespace consumers cannot create in: unkeyed. */
	grant(&g, "app", "db", NULL, "x", 0);
	snprintf(g.type, sizeof(g.type), "postgres-database");
	ck_assert_uint_eq(tl_rx_grant_naming(&g), TL_DRV_NAMING);
	tl_secret_key_free(&r1.key);
	tl_secret_key_free(&r2.key);
}
END_TEST

/*
 * Scheme 4 (issue 22): the digest keyed by the mesh id, so two meshes
 * on one server never share a name for the same grant; one mesh always
 * gives the same names; a missing or malformed mesh id gives none.
 */
START_TEST(test_mesh_scheme)
{
	struct tl_drv_name_in in = { "app/db", "db", "", "", 1,
	    TL_DRV_NAMING_MESH, 0, NULL, "00112233445566778899aabbccddeeff" };
	struct tl_drv_names a, b, c;
	char d[17];

	tl_drv_name_scheme(&in, 63, &a);
	ck_assert_msg(strncmp(a.resource, "db_", 3) == 0 &&
	    strlen(a.resource) == 19, "resource %s", a.resource);
	digest("app/db", d);
	ck_assert_msg(strstr(a.resource, d) == NULL,
	    "%s carries the mesh-less digest", a.resource);
	tl_drv_name_scheme(&in, 63, &b);
	ck_assert_str_eq(a.resource, b.resource);
	ck_assert_str_eq(a.login, b.login);
	in.mesh = "ffeeddccbbaa99887766554433221100";
	tl_drv_name_scheme(&in, 63, &c);
	ck_assert_str_ne(a.resource, c.resource);
	ck_assert_str_ne(a.login, c.login);
	in.mesh = "not-a-mesh-id";
	tl_drv_name_scheme(&in, 63, &c);
	ck_assert_str_eq(c.resource, "");
	ck_assert_str_eq(c.login, "");
	in.mesh = NULL;
	tl_drv_name_scheme(&in, 63, &c);
	ck_assert_str_eq(c.resource, "");
}
END_TEST

/*
 * Issue 22 item 2: in a home with a mesh id a new grant of a driver
 * without keyed names is named by scheme 4, so two meshes on one server
 * get two names for the same grant; what a grant recorded keeps its
 * scheme; keyed drivers keep scheme 3.
 */
START_TEST(test_new_grants_mesh)
{
	struct tl_rx r1, r2;
	struct tl_grant g;
	char db1[64], o1[64], l1[64], db2[64], o2[64], l2[64], d[17];

	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	snprintf(r1.mesh, sizeof(r1.mesh), "00112233445566778899aabbccddeeff");
	snprintf(r2.mesh, sizeof(r2.mesh), "ffeeddccbbaa99887766554433221100");
	grant(&g, "app", "db", NULL, "db", 0);
	snprintf(g.type, sizeof(g.type), "postgres-database");
	digest("app/db", d);
	tl_rx_grant_names(&r1, &g, 1, db1, o1, l1);
	tl_rx_grant_names(&r2, &g, 1, db2, o2, l2);
	ck_assert_msg(strncmp(db1, "db_", 3) == 0 && strlen(db1) == 19,
	    "resource %s", db1);
	ck_assert_msg(strstr(db1, d) == NULL, "mesh 1 names %s with the "
	    "mesh-less digest %s", db1, d);
	ck_assert_msg(strcmp(db1, db2) != 0 && strcmp(l1, l2) != 0,
	    "two meshes name app/db %s / %s", db1, db2);
	/* Scheme 4 is what the first intent records. */
	ck_assert_uint_eq(tl_rx_grant_scheme(&r1, &g), TL_DRV_NAMING_MESH);
	g.naming = tl_rx_grant_scheme(&r1, &g);
	g.version = 1;
	tl_rx_grant_names(&r1, &g, 2, db2, o2, l2);
	ck_assert_str_eq(db1, db2);
	/* No mesh id (a home of before): scheme 2, as before. */
	grant(&g, "app", "db", NULL, "db", 0);
	snprintf(g.type, sizeof(g.type), "postgres-database");
	r2.mesh[0] = '\0';
	ck_assert_uint_eq(tl_rx_grant_scheme(&r2, &g), TL_DRV_NAMING);
	ck_assert_uint_eq(tl_rx_grant_scheme(NULL, &g), TL_DRV_NAMING);
	tl_rx_grant_names(&r2, &g, 1, db2, o2, l2);
	ck_assert_msg(strstr(db2, d) != NULL, "no mesh: %s", db2);
	/* Recorded under scheme 2: kept in a mesh. */
	g.naming = TL_DRV_NAMING;
	g.version = 1;
	ck_assert_uint_eq(tl_rx_grant_scheme(&r1, &g), TL_DRV_NAMING);
	tl_rx_grant_names(&r1, &g, 1, db1, o1, l1);
	ck_assert_str_eq(db1, db2);
	/* A keyed driver keeps scheme 3. */
	grant(&g, "app", "files", NULL, "files", 0);
	snprintf(g.type, sizeof(g.type), "s3-bucket");
	ck_assert_uint_eq(tl_rx_grant_scheme(&r1, &g), TL_DRV_NAMING_KEYED);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("names");
	TCase *tc = tcase_create("names");

	tcase_add_test(tc, test_shape);
	tcase_add_test(tc, test_recorded_scheme);
	tcase_add_test(tc, test_left_behind);
	tcase_add_test(tc, test_injective);
	tcase_add_test(tc, test_issue_pairs);
	tcase_add_test(tc, test_keyed);
	tcase_add_test(tc, test_mesh_scheme);
	tcase_add_test(tc, test_new_grants_mesh);
	tcase_add_test(tc, test_adopted_object);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	if (sodium_init() < 0)
		return 1;
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
