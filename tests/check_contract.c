/*
 * check_contract.c - the driver contract: a declaration (drivers/decl.h)
 * and its operations (drivers/driver.h), and the postgres driver's
 * declaration on it; no server (the operations against a real
 * PostgreSQL are tests/check_drv_postgres.c).
 *
 * Names: every name the driver derives now is byte for byte the name
 * reactors/names.c derived before it moved into the driver (the table
 * below was printed by that code, commit 4c594c3), through the driver's
 * names op and through reactors' tl_rx_grant_names; a log of before
 * keeps naming the same objects.  Compose: the delivery values,
 * URI included, are what reactors composed before; a secret field is
 * never composed without the credential.  Capabilities: every driver
 * declares exactly the operations it has, and a declaration that lacks
 * one is refused with the reason.  Roles: the admin view's settings are
 * found by use.  The fault wrapper keeps the declaration.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "core/error.h"
#include "drivers/driver.h"
#include "projections/grant.h"
#include "reactors/rx-internal.h"
#include "reactors/session.h"

static const struct tl_drv_decl *pg;
static const struct tl_drv_ops *pgops;

struct vec {
	const char	*id, *resource, *node, *recorded;
	uint64_t	 naming, version;
	const char	*res, *owner, *login, *mres, *mlogin;
};

/* id, resource, node, recorded, scheme, version -> names, move names. */
static const struct vec vecs[] = {
	{ "shop/db", "shop-db", "", "", 2, 1,
	    "shop-db_c47e7e9e05d1826f", "shop-db_c47e7e9e05d1826f", "shop-db_c47e7e9e05d1826f_v1", "shop-db_c47e7e9e05d1826f_m2", "shop-db_c47e7e9e05d1826f_m2_v2" },
	{ "game/db@node-a", "game", "node-a", "", 2, 3,
	    "game-node-a_3cc5782185753efb", "game-node-a_3cc5782185753efb", "game-node-a_3cc5782185753efb_v3", "game-node-a_3cc5782185753efb_m4", "game-node-a_3cc5782185753efb_m4_v4" },
	{ "long/db", "a-very-long-resource-name-that-goes-on-and-on-past-the-limit-of-names", "", "", 2, 12,
	    "a-very-long-resource-name-that-goes-on-and-on-_8fcd621bdc4b07a6", "a-very-long-resource-name-that-goes-on-and-on-_8fcd621bdc4b07a6", "a-very-long-resource-name-that-goes-on-and_8fcd621bdc4b07a6_v12", "a-very-long-resource-name-that-goes-on-and_8fcd621bdc4b07a6_m13", "a-very-long-resource-name-that-goes-on_8fcd621bdc4b07a6_m13_v13" },
	{ "long/db@node-with-a-long-name-b", "a-very-long-resource-name-that-goes-on-and-on-past-the-limit-of-names", "node-with-a-long-name-b", "", 2, 7,
	    "a-very-long-resource-name-that-goes-on-and-on-_56f0f0acea898cc6", "a-very-long-resource-name-that-goes-on-and-on-_56f0f0acea898cc6", "a-very-long-resource-name-that-goes-on-and-_56f0f0acea898cc6_v7", "a-very-long-resource-name-that-goes-on-and-_56f0f0acea898cc6_m8", "a-very-long-resource-name-that-goes-on-a_56f0f0acea898cc6_m8_v8" },
	{ "shop/db", "shop-db", "", "shop-db_6f1c4b0e2a9d3c57_m4", 2, 5,
	    "shop-db_6f1c4b0e2a9d3c57_m4", "shop-db_6f1c4b0e2a9d3c57_m4", "shop-db_c47e7e9e05d1826f_v5", "shop-db_c47e7e9e05d1826f_m6", "shop-db_c47e7e9e05d1826f_m6_v6" },
	{ "old/db", "old-db", "", "", 1, 2,
	    "old-db", "old-db", "old-db_v2", "old-db_m3", "old-db_m3_v3" },
	{ "old/db@n1", "a-very-long-resource-name-that-goes-on-and-on-past-the-limit-of-names", "n1", "", 1, 9,
	    "a-very-long-resource-name-that-goes-on-and-on-past-the-acf9a3b5", "a-very-long-resource-name-that-goes-on-and-on-past-the-acf9a3b5", "a-very-long-resource-name-that-goes-on-and-on-past--fd3c45da_v9", "a-very-long-resource-name-that-goes-on-and-on-past-fd3c45da_m10", "a-very-long-resource-name-that-goes-on-and-on-past-1be44d01_v10" },
	{ "old/db", "old-db", "", "old-db_m3", 1, 4,
	    "old-db_m3", "old-db_m3", "old-db_m3_v4", "old-db_m5", "old-db_m5_v5" },
	{ "x/y", "x", "", "", 0, 0,
	    "x_1ddfdbe71555e011", "x_1ddfdbe71555e011", "x_1ddfdbe71555e011_v0", "x_1ddfdbe71555e011_m1", "x_1ddfdbe71555e011_m1_v1" },
	{ "x/y", "x", "", "", 0, 2,
	    "x", "x", "x_v2", "x_m3", "x_m3_v3" },
};
#define NVEC	(sizeof(vecs) / sizeof(vecs[0]))

static void
grant_of(const struct vec *v, const char *type, struct tl_grant *g)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->id, sizeof(g->id), "%s", v->id);
	snprintf(g->resource, sizeof(g->resource), "%s", v->resource);
	snprintf(g->node, sizeof(g->node), "%s", v->node);
	snprintf(g->object, sizeof(g->object), "%s", v->recorded);
	snprintf(g->type, sizeof(g->type), "%s", type);
	g->naming = v->naming;
	g->version = v->version;
}

/* Through the reactors, for a typed grant and for one of no driver. */
START_TEST(test_names_unchanged)
{
	static const char *const types[] = { "postgres-database", "" };
	char d[64], o[64], l[64];
	struct tl_grant g;
	size_t i, t;

	for (t = 0; t < 2; t++)
		for (i = 0; i < NVEC; i++) {
			grant_of(&vecs[i], types[t], &g);
			tl_rx_grant_names(NULL, &g, vecs[i].version, d, o, l);
			ck_assert_str_eq(d, vecs[i].res);
			ck_assert_str_eq(o, vecs[i].owner);
			ck_assert_str_eq(l, vecs[i].login);
			tl_rx_move_names(NULL, &g, vecs[i].version + 1, d, o, l);
			ck_assert_str_eq(d, vecs[i].mres);
			ck_assert_str_eq(o, vecs[i].mres);
			ck_assert_str_eq(l, vecs[i].mlogin);
		}
}
END_TEST

/* The driver's op itself: the limit is PostgreSQL's, 63 bytes. */
START_TEST(test_names_op)
{
	struct tl_drv_name_in in;
	struct tl_drv_names n;
	char why[TL_WHY_MAX];
	size_t i;

	ck_assert_ptr_nonnull(pg->names);
	for (i = 0; i < NVEC; i++) {
		struct tl_grant g;

		grant_of(&vecs[i], "postgres-database", &g);
		memset(&in, 0, sizeof(in));
		/* As a grant record holds them (resource cut to 63). */
		in.grant = g.id;
		in.resource = g.resource;
		in.node = g.node;
		in.recorded = g.object;
		in.version = vecs[i].version;
		in.scheme = tl_rx_grant_naming(&g);
		ck_assert_int_eq(pg->names(&in, &n, why), 0);
		ck_assert_str_eq(n.resource, vecs[i].res);
		ck_assert_str_eq(n.login, vecs[i].login);
		ck_assert_uint_le(strlen(n.resource), 63);
		ck_assert_uint_le(strlen(n.login), 63);
	}
	/* pg_ names are reserved: refused, the names filled still. */
	memset(&in, 0, sizeof(in));
	in.grant = "a/b";
	in.resource = "pg_x";
	in.node = in.recorded = "";
	in.version = 1;
	in.scheme = 2;
	ck_assert_int_eq(pg->names(&in, &n, why), TL_EINVAL);
	ck_assert_msg(strstr(why, "reserved") != NULL, "%s", why);
	ck_assert_str_ne(n.login, "");
}
END_TEST

START_TEST(test_compose)
{
	struct tl_drv_endpoint ep = { "db.mesh.test", "6543" };
	struct tl_drv_grant g = { "shop_1", "shop_1", "shop_1_v2", "pw-secret",
	    "shop/db", 0 };
	char out[256];
	size_t i;

	ck_assert_int_eq(tl_drv_compose(pg, "url", &ep, &g, out, sizeof(out)),
	    0);
	/* A host not on loopback, no tls set: verified, and no CA file. */
	ck_assert_str_eq(out, "postgresql://shop_1_v2:pw-secret@db.mesh.test:"
	    "6543/shop_1?sslmode=verify-full");
	ck_assert_int_eq(tl_drv_compose(pg, "host", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "db.mesh.test");
	ck_assert_int_eq(tl_drv_compose(pg, "port", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "6543");
	ck_assert_int_eq(tl_drv_compose(pg, "database", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "shop_1");
	ck_assert_int_eq(tl_drv_compose(pg, "user", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "shop_1_v2");
	ck_assert_int_eq(tl_drv_compose(pg, "password", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "pw-secret");
	/* Not produced; too long; a secret without the credential. */
	ck_assert_int_eq(tl_drv_compose(pg, "vhost", &ep, &g, out,
	    sizeof(out)), TL_ENOTFOUND);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(tl_drv_compose(pg, "url", &ep, &g, out, 20),
	    TL_ETOOBIG);
	ck_assert_msg(strstr(out, "pw-secret") == NULL, "%s", out);
	g.password = NULL;
	ck_assert_int_eq(tl_drv_compose(pg, "url", &ep, &g, out,
	    sizeof(out)), TL_EINVAL);
	ck_assert_int_eq(tl_drv_compose(pg, "password", &ep, &g, out,
	    sizeof(out)), TL_EINVAL);
	/* Every declared field is composed, secret ones flagged. */
	g.password = "pw-secret";
	for (i = 0; pg->fields[i].name != NULL; i++) {
		ck_assert_int_eq(tl_drv_compose(pg, pg->fields[i].name, &ep,
		    &g, out, sizeof(out)), 0);
		ck_assert_int_eq(tl_drv_field_secret(pg, pg->fields[i].name),
		    strstr(out, "pw-secret") != NULL);
		ck_assert(tl_drv_has_field(pg, pg->fields[i].name));
	}
	ck_assert(!tl_drv_has_field(pg, "vhost"));
	/* A driver without compose: host and port only. */
	{
		struct tl_drv_decl bare = { .name = "bare" };

		ck_assert_int_eq(tl_drv_compose(&bare, "port", &ep, &g, out,
		    sizeof(out)), 0);
		ck_assert_str_eq(out, "6543");
		ck_assert_int_eq(tl_drv_compose(&bare, "user", &ep, &g, out,
		    sizeof(out)), TL_ENOTFOUND);
	}
}
END_TEST

/*
 * What a consumer verifies the server with: the provider's mode, the
 * CA path token where the path belongs (and nowhere when there is no
 * token), and no URL under verify that libpq would take unverified.
 */
START_TEST(test_compose_tls)
{
	static const char tok[] = "@@tally-ca:pg-1@@";
	static const char *const verify[] = { "tls", "verify", NULL };
	static const char *const require[] = { "tls", "require", NULL };
	static const char *const off[] = { "tls", "off", NULL };
	struct tl_drv_endpoint ep = { "db.mesh.test", "6543", verify, NULL,
	    tok };
	struct tl_drv_grant g = { "shop_1", "shop_1", "shop_1_v2", "pw-secret",
	    "shop/db", 0 };
	char out[TL_DRV_VALUE_MAX + 1];

	ck_assert_int_eq(tl_drv_compose(pg, "url", &ep, &g, out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "postgresql://shop_1_v2:pw-secret@db.mesh.test:"
	    "6543/shop_1?sslmode=verify-full&sslrootcert=@@tally-ca:pg-1@@");
	ck_assert_int_eq(tl_drv_compose(pg, "sslmode", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "verify-full");
	ck_assert_int_eq(tl_drv_compose(pg, "sslrootcert", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, tok);
	ck_assert(!tl_drv_field_secret(pg, "sslmode"));
	ck_assert(!tl_drv_field_secret(pg, "sslrootcert"));
	/* Not secret: composed without the credential. */
	g.password = NULL;
	ck_assert_int_eq(tl_drv_compose(pg, "sslrootcert", &ep, &g, out,
	    sizeof(out)), 0);
	g.password = "pw-secret";

	/* No CA file: the path left out, the field "". */
	ep.ca_path = NULL;
	ck_assert_int_eq(tl_drv_compose(pg, "url", &ep, &g, out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "postgresql://shop_1_v2:pw-secret@db.mesh.test:"
	    "6543/shop_1?sslmode=verify-full");
	ck_assert_int_eq(tl_drv_compose(pg, "sslrootcert", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "");

	/* require: encrypted, no root certificate asked for. */
	ep.settings = require;
	ep.ca_path = tok;
	ck_assert_int_eq(tl_drv_compose(pg, "url", &ep, &g, out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "postgresql://shop_1_v2:pw-secret@db.mesh.test:"
	    "6543/shop_1?sslmode=require");
	ck_assert_int_eq(tl_drv_compose(pg, "sslmode", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "require");

	/* off: the URL of before. */
	ep.settings = off;
	ck_assert_int_eq(tl_drv_compose(pg, "url", &ep, &g, out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "postgresql://shop_1_v2:pw-secret@db.mesh.test:"
	    "6543/shop_1");
	ck_assert_int_eq(tl_drv_compose(pg, "sslmode", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "disable");

	/* No tls set: verify, except at a loopback host. */
	ep.settings = NULL;
	ep.host = "127.0.0.1";
	ck_assert_int_eq(tl_drv_compose(pg, "sslmode", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "disable");
	ep.host = "db.mesh.test";
	ck_assert_int_eq(tl_drv_compose(pg, "sslmode", &ep, &g, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "verify-full");

	/* Too long with the token: refused, nothing of the password left. */
	ep.settings = verify;
	ck_assert_int_eq(tl_drv_compose(pg, "url", &ep, &g, out, 70),
	    TL_ETOOBIG);
	ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_declarations)
{
	ck_assert_ptr_eq(tl_drv_decl_for_type("postgres-database"), pg);
	ck_assert_ptr_eq(pgops->decl, pg);
	ck_assert_ptr_eq(tl_drv_ops_of(pg), pgops);
	ck_assert(tl_drv_has_tag(pg, "database"));
	ck_assert(tl_drv_has_tag(pg, "sql"));
	ck_assert(!tl_drv_has_tag(pg, "queue"));
	ck_assert_str_eq(tl_drv_setting_default(pg, "port"), "5432");
	ck_assert_str_eq(tl_drv_setting_default(pg, "admin-user"),
	    "postgres");
	ck_assert_str_eq(tl_drv_setting_default(pg, "admin-db"), "postgres");
	ck_assert_ptr_null(tl_drv_setting_default(pg, "no-such"));
	ck_assert_int_eq(pg->credential.kind, TL_DRV_CRED_LOGIN_BESIDE);
	ck_assert_ptr_nonnull(pg->revocation);
	ck_assert(pg->revocation->retain);
	ck_assert(!pg->revocation->destroys);
	ck_assert_ptr_nonnull(pg->revocation->purge);
	ck_assert_ptr_nonnull(pg->migrate_dialect);
}
END_TEST

START_TEST(test_capabilities)
{
	static const enum tl_drv_cap all[] = { TL_DRV_CAP_MIGRATE,
	    TL_DRV_CAP_MOVE, TL_DRV_CAP_SIZE, TL_DRV_CAP_ADMIN_ROTATE,
	    TL_DRV_CAP_CHECK, TL_DRV_CAP_ROTATE, TL_DRV_CAP_CHECK_BULK,
	    TL_DRV_CAP_SESSIONS };
	struct tl_drv_decl less;
	char why[TL_WHY_MAX];
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		ck_assert_msg(tl_drv_can(pg, all[i], why), "%s", why);
	ck_assert(!tl_drv_can(pg, TL_DRV_CAP_LOSS, why));
	ck_assert_str_eq(why, "driver postgres cannot tell what a revocation "
	    "loses");
	less = *pg;
	less.name = "less";
	less.caps &= ~TL_DRV_CAP_BIT(TL_DRV_CAP_MOVE);
	ck_assert(!tl_drv_can(&less, TL_DRV_CAP_MOVE, why));
	ck_assert_str_eq(why, "driver less cannot move data");
	less.caps &= ~TL_DRV_CAP_BIT(TL_DRV_CAP_ROTATE);
	less.credential.kind = TL_DRV_CRED_NONE;
	ck_assert(!tl_drv_can(&less, TL_DRV_CAP_ROTATE, why));
	ck_assert_str_eq(why, "driver less cannot rotate credentials: its "
	    "grants have no credential");
	ck_assert(tl_drv_can(&less, TL_DRV_CAP_SIZE, NULL));
	/* Only a driver whose names are keyed needs to find them by a mark. */
	ck_assert(!tl_drv_can(pg, TL_DRV_CAP_FIND_MARKED, why));
	ck_assert_str_eq(why, "driver postgres cannot find another mesh's "
	    "objects by their mark");
	ck_assert(tl_drv_can(tl_drv_decl_find("ceph-rgw"),
	    TL_DRV_CAP_FIND_MARKED, NULL));
}
END_TEST

/*
 * Every driver declares exactly the capabilities its operations have:
 * a declared capability has its operations, an undeclared one none, so
 * what the CLI and the deciders read of a declaration is what tallyd
 * can do.
 */
START_TEST(test_caps_are_the_ops)
{
	const char *const *names = tl_drv_names();
	const struct tl_drv_decl *d;
	const struct tl_drv_ops *o;
	size_t i;

	for (i = 0; names[i] != NULL; i++) {
		int has[TL_DRV_CAP_FIND_MARKED + 1];
		int c;

		d = tl_drv_decl_find(names[i]);
		o = tl_drv_find(names[i]);
		ck_assert_msg(d != NULL && o != NULL, "driver %s", names[i]);
		ck_assert_ptr_eq(o->decl, d);
		ck_assert_str_eq(d->name, names[i]);
		has[TL_DRV_CAP_MIGRATE] = o->migrate != NULL;
		has[TL_DRV_CAP_MOVE] = o->freeze != NULL && o->copy != NULL;
		has[TL_DRV_CAP_SIZE] = o->size != NULL;
		has[TL_DRV_CAP_ADMIN_ROTATE] = o->set_admin_password != NULL;
		has[TL_DRV_CAP_CHECK] = o->check != NULL;
		has[TL_DRV_CAP_ROTATE] = o->add_credential != NULL &&
		    o->retire_credential != NULL &&
		    d->credential.kind != TL_DRV_CRED_NONE;
		has[TL_DRV_CAP_CHECK_BULK] = o->check_bulk != NULL;
		has[TL_DRV_CAP_LOSS] = o->loss != NULL;
		has[TL_DRV_CAP_SESSIONS] = o->sessions != NULL;
		has[TL_DRV_CAP_FIND_MARKED] = o->find_marked != NULL;
		for (c = 0; c <= TL_DRV_CAP_FIND_MARKED; c++)
			ck_assert_msg(tl_drv_can(d, (enum tl_drv_cap)c, NULL) ==
			    has[c], "driver %s: capability %d declared %d, "
			    "operations %d", d->name, c,
			    tl_drv_can(d, (enum tl_drv_cap)c, NULL), has[c]);
		ck_assert_msg((d->migrate_dialect != NULL) ==
		    has[TL_DRV_CAP_MIGRATE], "driver %s: dialect", d->name);
		/*
		 * A holders' password is tried by check, on a login the
		 * driver took over, whose credential is a password alone.
		 */
		if (tl_drv_can(d, TL_DRV_CAP_TRY_PASSWORD, NULL))
			ck_assert_msg(has[TL_DRV_CAP_CHECK] &&
			    tl_drv_can(d, TL_DRV_CAP_ADOPT, NULL) &&
			    d->credential.kind != TL_DRV_CRED_NONE &&
			    d->credential.kind != TL_DRV_CRED_CERTIFICATE &&
			    !d->credential.handle_model, "driver %s: "
			    "try_password", d->name);
		/* Settings prepared at assign are an operation's work. */
		ck_assert_msg((o->prepare != NULL) == (d->prepared != NULL),
		    "driver %s: prepare", d->name);
		/* A stored fence is an operation; an epoch check is not. */
		ck_assert_msg((o->fence != NULL) == (d->fencing != NULL &&
		    (d->fencing->kind == TL_DRV_FENCE_ATOMIC ||
		    d->fencing->kind == TL_DRV_FENCE_BEFORE_CALL)),
		    "driver %s: fence", d->name);
	}
}
END_TEST

/*
 * The admin view is built from uses: every driver with a provider to
 * log in to names where (ADMIN_HOST, or a plain setting it reads
 * itself), at most one admin secret, which is a secret setting, and the
 * host uses come before anything else of theirs in order.
 */
START_TEST(test_uses)
{
	const char *const *names = tl_drv_names();
	const struct tl_drv_decl *d;
	const struct tl_drv_setting *st;
	size_t i;

	for (i = 0; names[i] != NULL; i++) {
		d = tl_drv_decl_find(names[i]);
		ck_assert_ptr_null(tl_drv_setting_for(d,
		    TL_DRV_USE_ADMIN_SECRET, 1));
		if ((st = tl_drv_setting_for(d, TL_DRV_USE_ADMIN_SECRET,
		    0)) != NULL)
			ck_assert_msg(st->secret, "%s: %s", d->name, st->name);
		for (st = d->settings; st != NULL && st->name != NULL; st++)
			if (st->secret)
				ck_assert_msg(st->use == TL_DRV_USE_ADMIN_SECRET ||
				    st->use == TL_DRV_USE_ADMIN_KEY ||
				    st->use == TL_DRV_USE_PLAIN, "%s: %s",
				    d->name, st->name);
		/*
		 * The client certificate: both or neither, the key a
		 * secret PEM key, the certificate a public PEM, one each.
		 */
		ck_assert_ptr_null(tl_drv_setting_for(d,
		    TL_DRV_USE_ADMIN_KEY, 1));
		ck_assert_ptr_null(tl_drv_setting_for(d,
		    TL_DRV_USE_ADMIN_CERT, 1));
		ck_assert_msg((tl_drv_setting_for(d, TL_DRV_USE_ADMIN_KEY,
		    0) == NULL) == (tl_drv_setting_for(d,
		    TL_DRV_USE_ADMIN_CERT, 0) == NULL), "%s: half a pair",
		    d->name);
		if ((st = tl_drv_setting_for(d, TL_DRV_USE_ADMIN_KEY, 0)) !=
		    NULL)
			ck_assert_msg(st->secret && st->kind == TL_DRV_PEM_KEY,
			    "%s: %s", d->name, st->name);
		if ((st = tl_drv_setting_for(d, TL_DRV_USE_ADMIN_CERT, 0)) !=
		    NULL)
			ck_assert_msg(!st->secret && st->kind == TL_DRV_PEM,
			    "%s: %s", d->name, st->name);
	}
	/* The client certificate where a provider may ask for one. */
	ck_assert_ptr_nonnull(tl_drv_setting_find(tl_drv_decl_find("redis")->
	    settings, "admin-key"));
	ck_assert_ptr_nonnull(tl_drv_setting_find(tl_drv_decl_find(
	    "rabbitmq")->settings, "admin-cert"));
	ck_assert_ptr_nonnull(tl_drv_setting_find(pg->settings, "admin-key"));
	ck_assert_ptr_nonnull(tl_drv_setting_find(tl_drv_decl_find(
	    "mariadb")->settings, "admin-cert"));
	/* PostgreSQL: host before admin-host; its own words are plain. */
	ck_assert_str_eq(tl_drv_setting_for(pg, TL_DRV_USE_ADMIN_HOST,
	    0)->name, "host");
	ck_assert_str_eq(tl_drv_setting_for(pg, TL_DRV_USE_ADMIN_HOST,
	    1)->name, "admin-host");
	ck_assert_str_eq(tl_drv_setting_for(pg, TL_DRV_USE_PORT, 0)->name,
	    "port");
	ck_assert_str_eq(tl_drv_setting_for(pg, TL_DRV_USE_ADMIN_USER,
	    0)->name, "admin-user");
	ck_assert_str_eq(tl_drv_setting_for(pg, TL_DRV_USE_ADMIN_SECRET,
	    0)->name, "admin-password");
	ck_assert_int_eq(tl_drv_setting_find(pg->settings, "admin-db")->use,
	    TL_DRV_USE_PLAIN);
	/* An identity provider's secret is its initial access token. */
	ck_assert_str_eq(tl_drv_setting_for(tl_drv_decl_find("oidc"),
	    TL_DRV_USE_ADMIN_SECRET, 0)->name, "initial-access-token");
}
END_TEST

/* What settings valid alone leave open, said by the driver (status). */
START_TEST(test_settings_note)
{
	static const char *const off[] = { "port", "5433",
		"revoke-public-connect", "no", NULL };
	static const char *const on[] = { "revoke-public-connect", "yes",
		NULL };
	static const char *const none[] = { NULL };
	char note[TL_WHY_MAX];

	ck_assert_ptr_nonnull(pg->settings_note);
	ck_assert_int_eq(pg->settings_note(off, note), 1);
	ck_assert_msg(strstr(note, "revoke-public-connect is off") == note,
	    "%s", note);
	ck_assert_int_eq(pg->settings_note(on, note), 0);
	ck_assert_int_eq(pg->settings_note(none, note), 0);
}
END_TEST

/* Under TALLY_FAULT the driver found is a wrapper: it keeps the contract. */
START_TEST(test_fault_keeps_contract)
{
	const struct tl_drv_ops *f;
	char why[TL_WHY_MAX];

	f = tl_drv_fault_wrap_spec(pgops, "create:fail", why);
	ck_assert_msg(f != NULL, "%s", why);
	ck_assert_ptr_eq(f->decl->tags, pg->tags);
	ck_assert_ptr_eq(f->decl->fields, pg->fields);
	ck_assert_ptr_eq(f->decl->compose, pg->compose);
	ck_assert_ptr_eq(f->decl->names, pg->names);
	ck_assert_ptr_eq(f->decl->revocation, pg->revocation);
	ck_assert_int_eq(f->decl->credential.kind, pg->credential.kind);
	/* A rule on check is grant by grant: no bulk, declared so. */
	ck_assert_ptr_null(f->check_bulk);
	ck_assert(!tl_drv_can(f->decl, TL_DRV_CAP_CHECK_BULK, NULL));
	ck_assert(tl_drv_can(pg, TL_DRV_CAP_CHECK_BULK, NULL));
	/* These take the wrapper's handle: wrapped, never the real ones. */
	ck_assert_ptr_nonnull(f->add_credential);
	ck_assert_ptr_nonnull(f->retire_credential);
	ck_assert_ptr_ne(f->add_credential, pgops->add_credential);
	ck_assert_ptr_ne(f->retire_credential, pgops->retire_credential);
}
END_TEST

/*
 * The optional loss op (what revoking loses now, tally remove) takes a
 * handle, so the wrapper wraps it where the driver has it, and leaves it
 * NULL where it has not; every driver declares a revocation.
 */
START_TEST(test_loss_and_declarations)
{
	const char *const *names = tl_drv_names();
	const struct tl_drv_ops *d, *f;
	char why[TL_WHY_MAX];
	size_t i;

	for (i = 0; names[i] != NULL; i++) {
		d = tl_drv_find(names[i]);
		ck_assert_msg(d != NULL, "driver %s listed, not found",
		    names[i]);
		ck_assert_ptr_nonnull(d->decl->revocation);
		f = tl_drv_fault_wrap_spec(d, "create:fail", why);
		ck_assert_msg(f != NULL, "%s", why);
		if (d->loss == NULL)
			ck_assert_ptr_null(f->loss);
		else {
			ck_assert_ptr_nonnull(f->loss);
			ck_assert_ptr_ne(f->loss, d->loss);
		}
	}
	d = tl_drv_find("rabbitmq");
	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(d->loss);
	ck_assert(d->decl->revocation->destroys);
	ck_assert_ptr_null(pgops->loss);
}
END_TEST

/* A provider as tl_rx_load_provider fills one, settings in setbuf. */
static void
prov(struct tl_rx_prov *pv, const char *type, const char *expose,
    const char *const *set)
{
	size_t i, n;

	memset(pv, 0, sizeof(*pv));
	snprintf(pv->node, sizeof(pv->node), "node-a");
	snprintf(pv->routable, sizeof(pv->routable), "store.lan");
	snprintf(pv->host, sizeof(pv->host), "admin.lan");
	snprintf(pv->port, sizeof(pv->port), "7480");
	snprintf(pv->expose, sizeof(pv->expose), "%s", expose);
	for (i = 0; set != NULL && set[i] != NULL; i++) {
		n = strlen(set[i]) + 1;
		ck_assert_uint_lt(pv->setlen + n, sizeof(pv->setbuf));
		memcpy(pv->setbuf + pv->setlen, set[i], n);
		pv->setlen += n;
	}
	pv->decl = tl_drv_decl_for_type(type);
	ck_assert_ptr_nonnull(pv->decl);
	pv->ops = tl_drv_ops_of(pv->decl);
}

/* The field as the driver composes it at the endpoint who gets. */
static void
field_for(const struct tl_rx_prov *pv, const struct tl_grant *g,
    enum tl_rx_ep_for who, const char *node, const char *field,
    char out[TL_DRV_VALUE_MAX + 1])
{
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	char host[256];
	struct tl_drv_endpoint ep;
	struct tl_drv_grant dg;

	memset(&dg, 0, sizeof(dg));
	dg.resource = "b";
	dg.owner = "";
	dg.login = "u";
	tl_rx_consumer_endpoint(pv, g, who, node, sv, host, &ep);
	ck_assert_int_eq(tl_drv_compose(pv->decl, field, &ep, &dg, out,
	    TL_DRV_VALUE_MAX + 1), 0);
}

/*
 * Issue 21 item 16: the consumer's endpoint is one rule.  An RGW given
 * by its endpoint setting is that endpoint for a holder, in the record
 * and for the check (which logged in at routable:7480); a provider
 * exposed network is the same host and port in all three.
 */
START_TEST(test_consumer_endpoint)
{
	static const char *const rgw_set[] = { "endpoint",
		"http://10.0.0.7:9000", "region", "default", NULL };
	static const enum tl_rx_ep_for who[] = { TL_RX_EP_HOLDER,
		TL_RX_EP_HOLDER, TL_RX_EP_RECORD, TL_RX_EP_CHECK };
	static const char *const node[] = { "node-a", "node-b", NULL, NULL };
	struct tl_rx_prov pv;
	struct tl_grant g;
	char v[TL_DRV_VALUE_MAX + 1], first[TL_DRV_VALUE_MAX + 1];
	size_t i;

	memset(&g, 0, sizeof(g));
	prov(&pv, "s3-bucket", "network", rgw_set);
	for (i = 0; i < sizeof(who) / sizeof(who[0]); i++) {
		field_for(&pv, &g, who[i], node[i], "endpoint", v);
		ck_assert_msg(strcmp(v, "http://10.0.0.7:9000") == 0,
		    "path %zu: endpoint %s", i, v);
	}
	/* Without the setting, from host and port, the same everywhere. */
	prov(&pv, "postgres-database", "network", NULL);
	field_for(&pv, &g, who[0], node[0], "port", first);
	for (i = 0; i < sizeof(who) / sizeof(who[0]); i++) {
		field_for(&pv, &g, who[i], node[i], "host", v);
		ck_assert_str_eq(v, "store.lan");
		field_for(&pv, &g, who[i], node[i], "port", v);
		ck_assert_str_eq(v, first);
	}
	/* A recorded port is what holders and the check use. */
	snprintf(g.port, sizeof(g.port), "6543");
	field_for(&pv, &g, TL_RX_EP_HOLDER, "node-b", "port", v);
	ck_assert_str_eq(v, "6543");
	field_for(&pv, &g, TL_RX_EP_CHECK, NULL, "port", v);
	ck_assert_str_eq(v, "6543");
	/* Exposed local: loopback on its node, the admin host for the check. */
	prov(&pv, "postgres-database", "local", NULL);
	field_for(&pv, &g, TL_RX_EP_HOLDER, "node-a", "host", v);
	ck_assert_str_eq(v, "127.0.0.1");
	field_for(&pv, &g, TL_RX_EP_CHECK, NULL, "host", v);
	ck_assert_str_eq(v, "admin.lan");
	field_for(&pv, &g, TL_RX_EP_RECORD, NULL, "host", v);
	ck_assert_str_eq(v, "store.lan");
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("contract");
	TCase *tc = tcase_create("contract");

	tcase_add_test(tc, test_names_unchanged);
	tcase_add_test(tc, test_names_op);
	tcase_add_test(tc, test_compose);
	tcase_add_test(tc, test_compose_tls);
	tcase_add_test(tc, test_declarations);
	tcase_add_test(tc, test_capabilities);
	tcase_add_test(tc, test_caps_are_the_ops);
	tcase_add_test(tc, test_uses);
	tcase_add_test(tc, test_settings_note);
	tcase_add_test(tc, test_fault_keeps_contract);
	tcase_add_test(tc, test_loss_and_declarations);
	tcase_add_test(tc, test_consumer_endpoint);
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
	unsetenv("TALLY_FAULT");
	if ((pg = tl_drv_decl_find("postgres")) == NULL ||
	    (pgops = tl_drv_find("postgres")) == NULL)
		return 1;
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
