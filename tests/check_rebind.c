/*
 * check_rebind.c - moving a binding and moving a provider, in-process:
 * the deciders (tl_dec_rebind, tl_dec_provider_move, the refusals that
 * tie them to rotation) and the fold (projections/rebind.c), event by
 * event, then a rebuild that must give the same tables byte for byte.
 *
 * The mesh is made with the events the CLI and tallyd would append
 * (bodies as cmd_apply.c, decide_assign.c and provision.c build them);
 * no provider is contacted: reactors/rebind.c is exercised by
 * tests/integration/90_rebind.sh and 91_provider_move.sh.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/body.h"
#include "core/error.h"
#include "core/kv.h"
#include "core/log.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "projections/graph.h"
#include "projections/proj.h"
#include "projections/rebind.h"
#include "projections/rotation.h"
#include "tests/lib/tl_test.h"

static struct {
	char		*home;
	char		*logdir;
	struct tl_log	*log;
} R;

/* --- running commands as the CLI does -------------------------------- */

typedef int (*cmd_fn)(struct tl_ctx *c, void *arg);

struct run {
	cmd_fn	 fn;
	void	*arg;
	char	 why[2 * TL_WHY_MAX];
};

static int
run_cb(struct tl_txn *t, void *arg)
{
	struct run *r = arg;
	struct tl_ctx c;
	int rc;

	if ((rc = tl_ctx_begin(&c, t, "test")) != 0)
		return rc;
	rc = r->fn(&c, r->arg);
	snprintf(r->why, sizeof(r->why), "%s", c.why);
	if (rc != 0)
		return rc;
	return tl_ctx_end(&c);
}

/* Runs fn in one write transaction; a refusal appends nothing. */
static int
run(cmd_fn fn, void *arg, char *why, size_t cap)
{
	struct run r = { fn, arg, "" };
	int rc = tl_log_write(R.log, run_cb, &r);

	if (why != NULL)
		snprintf(why, cap, "%s", r.why);
	return rc;
}

/* One raw event: type, stream, then the body's key/value pairs. */
struct raw {
	const char	*type;
	const char	*stream;
	void		(*build)(struct tl_body *b, const void *arg);
	const void	*arg;
};

static int
emit_raw(struct tl_ctx *c, void *arg)
{
	const struct raw *rw = arg;
	struct tl_body b;
	int rc;

	tl_body_init(&b);
	rw->build(&b, rw->arg);
	rc = tl_emit(c, rw->type, rw->stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

static void
emit(const char *type, const char *stream,
    void (*build)(struct tl_body *, const void *), const void *arg)
{
	struct raw rw = { type, stream, build, arg };
	char why[2 * TL_WHY_MAX];

	ck_assert_msg(run(emit_raw, &rw, why, sizeof(why)) == 0, "%s %s: %s",
	    type, stream, why);
}

/* key=value pairs, all strings, NULL-terminated. */
static void
b_pairs(struct tl_body *b, const void *arg)
{
	const char *const *kv = arg;

	for (; kv[0] != NULL; kv += 2)
		tl_body_str(b, kv[0], kv[1]);
}

/* --- reading --------------------------------------------------------- */

struct view {
	struct tl_txn	*t;
	struct tl_proj	 p;
};

static void
view_open(struct view *v)
{
	ck_assert_int_eq(tl_log_begin(R.log, TL_TXN_RDONLY, &v->t), 0);
	ck_assert_int_eq(tl_proj_open(v->t, &v->p), 0);
}

static void
view_close(struct view *v)
{
	tl_log_abort(v->t);
}

static struct tl_grant
grant(const char *id)
{
	struct view v;
	struct tl_grant g;

	view_open(&v);
	ck_assert_int_eq(tl_grant_get(v.t, &v.p, id, &g, NULL), 0);
	view_close(&v);
	return g;
}

/* Is key in the grants table (grants) or the graph table? */
static int
has_key(int grants, const char *key)
{
	struct view v;
	int yes;

	view_open(&v);
	yes = tl_rec_exists(v.t, grants ? v.p.grants : v.p.graph, key);
	view_close(&v);
	return yes;
}

static int
mv(const char *grant_id, struct tl_rebind *r)
{
	struct view v;
	int rc;

	view_open(&v);
	rc = tl_mv_get(v.t, &v.p, grant_id, r);
	view_close(&v);
	return rc;
}

static uint64_t
count_type(const char *type)
{
	struct tl_txn *t;
	struct tl_filter f = { 0 };
	struct tl_iter *it;
	struct tl_event ev;
	uint64_t n = 0;

	ck_assert_int_eq(tl_log_begin(R.log, TL_TXN_RDONLY, &t), 0);
	f.from = 1;
	ck_assert_int_eq(tl_iter_open(t, &f, &it), 0);
	while (tl_iter_next(it, &ev) == 0)
		if (strcmp(ev.type, type) == 0)
			n++;
	tl_iter_close(it);
	tl_log_abort(t);
	return n;
}

/* --- the mesh -------------------------------------------------------- */

static void
b_node(struct tl_body *b, const void *arg)
{
	static const uint8_t pk[32] = { 1 };
	char routable[80];

	snprintf(routable, sizeof(routable), "%s.test", (const char *)arg);
	tl_body_str(b, "name", arg);
	tl_body_str(b, "routable", routable);
	tl_body_bin(b, "pubkey", pk, sizeof(pk));
}

static void
b_postgres(struct tl_body *b, const void *arg)
{
	(void)arg;
	tl_body_str(b, "name", "postgres");
	tl_body_str(b, "digest", "");
	tl_body_map(b, "env");
	tl_body_end(b);
	tl_body_arr(b, "provides");
	tl_body_map(b, NULL);
	tl_body_str(b, "type", "postgres-database");
	tl_body_str(b, "driver", "postgres");
	tl_body_str(b, "revoke", "retain");
	tl_body_u64(b, "max_age", 0);
	tl_body_end(b);
	tl_body_end(b);
	tl_body_arr(b, "embedded");
	tl_body_end(b);
}

static void
b_shop(struct tl_body *b, const void *arg)
{
	(void)arg;
	tl_body_str(b, "name", "shop");
	tl_body_str(b, "digest", "");
	tl_body_map(b, "env");
	tl_body_end(b);
	tl_body_arr(b, "provides");
	tl_body_end(b);
	tl_body_arr(b, "embedded");
	tl_body_end(b);
}

static void
b_req(struct tl_body *b, const void *arg)
{
	(void)arg;
	tl_body_str(b, "module", "shop");
	tl_body_str(b, "name", "db");
	tl_body_str(b, "kind", "instantiation");
	tl_body_str(b, "target", "postgres");
	tl_body_str(b, "type", "postgres-database");
	tl_body_str(b, "scope", "shared");
	tl_body_str(b, "provider", "");
	tl_body_str(b, "resource", "shop-db");
	tl_body_map(b, "env");
	tl_body_str(b, "host", "DB_HOST");
	tl_body_end(b);
}

struct assign_arg {
	const char	*module, *node;
};

static int
do_assign(struct tl_ctx *c, void *arg)
{
	struct assign_arg *a = arg;
	struct tl_setting set[2] = { { "port", "5432", NULL, 0 },
	    { "admin-user", "postgres", NULL, 0 } };
	struct tl_assign o = TL_ASSIGN_ZERO;

	o.expose = "network";
	if (strcmp(a->module, "postgres") == 0) {
		o.set = set;
		o.nset = 2;
	}
	return tl_dec_assign(c, a->module, a->node, &o);
}

static int
assign(const char *module, const char *node, char *why)
{
	struct assign_arg a = { module, node };

	return run(do_assign, &a, why, 1024);
}

static void
b_provisioning(struct tl_body *b, const void *arg)
{
	static const uint8_t ct[64] = { 7 };

	(void)arg;
	tl_body_str(b, "grant", "shop/db");
	tl_body_str(b, "provider", "node-a/postgres");
	tl_body_u64(b, "version", 1);
	tl_body_str(b, "resource", "shop-db");
	tl_body_str(b, "owner", "shop-db");
	tl_body_str(b, "user", "shop-db_v1");
	tl_body_secret(b, "password", ct, sizeof(ct));
}

static void
b_provisioned(struct tl_body *b, const void *arg)
{
	(void)arg;
	tl_body_str(b, "grant", "shop/db");
	tl_body_u64(b, "version", 1);
	tl_body_map(b, "fields");
	tl_body_str(b, "host", "127.0.0.1");
	tl_body_str(b, "port", "5432");
	tl_body_str(b, "database", "shop-db");
	tl_body_str(b, "user", "shop-db_v1");
	tl_body_end(b);
}

/*
 * node-a and node-b each run postgres (two providers); shop runs on
 * node-a, its shared grant shop/db bound co-located and provisioned v1.
 */
static void
setup(void)
{
	char why[2 * TL_WHY_MAX];

	memset(&R, 0, sizeof(R));
	R.home = tl_test_tmpdir("rebind");
	R.logdir = tl_test_path(R.home, "log");
	ck_assert_int_eq(mkdir(R.logdir, 0700), 0);
	ck_assert_int_eq(tl_log_open_opts(R.logdir, &(struct tl_log_opts){
	    .flags = TL_LOG_CREATE | TL_LOG_NOSYNC, .mapsize = 16u << 20 },
	    &R.log), 0);
	emit(TL_EV_NODE_ADDED, "node/node-a", b_node, "node-a");
	emit(TL_EV_NODE_ADDED, "node/node-b", b_node, "node-b");
	emit(TL_EV_NODE_ADDED, "node/node-c", b_node, "node-c");
	emit(TL_EV_MODULE_DECLARED, "module/postgres", b_postgres, NULL);
	emit(TL_EV_MODULE_DECLARED, "module/shop", b_shop, NULL);
	emit(TL_EV_REQ_DECLARED, "module/shop", b_req, NULL);
	ck_assert_msg(assign("postgres", "node-a", why) == 0, "%s", why);
	ck_assert_msg(assign("postgres", "node-b", why) == 0, "%s", why);
	ck_assert_msg(assign("shop", "node-a", why) == 0, "%s", why);
	ck_assert_str_eq(grant("shop/db").provider, "node-a/postgres");
	emit(TL_EV_GRANT_PROVISIONING, "grant/shop/db", b_provisioning, NULL);
	emit(TL_EV_GRANT_PROVISIONED, "grant/shop/db", b_provisioned, NULL);
	ck_assert_str_eq(grant("shop/db").state, TL_GRANT_PROVISIONED);
}

static void
teardown(void)
{
	tl_log_close(R.log);
	free(R.logdir);
	tl_test_tmpdir_done(R.home);
	memset(&R, 0, sizeof(R));
}

/* --- the deciders ---------------------------------------------------- */

struct rebind_arg {
	const char	*grant, *provider;
	int		 migrate;
};

static int
do_rebind(struct tl_ctx *c, void *arg)
{
	struct rebind_arg *a = arg;

	return tl_dec_rebind(c, a->grant, a->provider, a->migrate);
}

static int
rebind(const char *provider, int migrate, char *why)
{
	struct rebind_arg a = { "shop/db", provider, migrate };

	return run(do_rebind, &a, why, 1024);
}

static int
do_rotate(struct tl_ctx *c, void *arg)
{
	return tl_dec_rotate(c, arg, 0, "operator");
}

/* --- the saga's events, as reactors/rebind.c appends them ------------ */

static void
b_issued(struct tl_body *b, const void *arg)
{
	static const uint8_t ct[64] = { 9 };
	const uint64_t *version = arg;
	char db[64], user[96];

	snprintf(db, sizeof(db), "shop-db_m%llu", (unsigned long long)*version);
	snprintf(user, sizeof(user), "%s_v%llu", db,
	    (unsigned long long)*version);
	tl_body_str(b, "grant", "shop/db");
	tl_body_u64(b, "version", *version);
	tl_body_str(b, "provider", "node-b/postgres");
	tl_body_str(b, "resource", db);
	tl_body_str(b, "owner", db);
	tl_body_str(b, "user", user);
	tl_body_secret(b, "password", ct, sizeof(ct));
	tl_body_str(b, "from_resource", "shop-db");
	tl_body_str(b, "from_owner", "shop-db");
	tl_body_str(b, "from_user", "shop-db_v1");
}

static void
b_copied(struct tl_body *b, const void *arg)
{
	(void)arg;
	tl_body_str(b, "grant", "shop/db");
	tl_body_u64(b, "version", 2);
	tl_body_map(b, "tables");
	tl_body_u64(b, "public.items", 3);
	tl_body_u64(b, "public.notes", 2);
	tl_body_end(b);
	tl_body_str(b, "host", "node-b.test");
	tl_body_str(b, "port", "5433");
	tl_body_str(b, "database", "shop-db_m2");
	tl_body_str(b, "user", "shop-db_m2_v2");
}

static const char *const moved_kv[] = { "grant", "shop/db", "module", "shop",
	"req", "db", "node", "", "type", "postgres-database", "provider",
	"node-b/postgres", "from", "node-a/postgres", "reason", TL_BIND_MOVED,
	"state", "bound", NULL };

/* Every key and value of both tables, for byte-for-byte comparisons. */
struct dump {
	char	*p;
	size_t	 len, cap;
};

static int
dump_one(const void *key, size_t klen, const void *val, size_t vlen,
    void *arg)
{
	struct dump *d = arg;

	if (d->len + klen + vlen + 16 > d->cap) {
		d->cap = (d->cap + klen + vlen + 16) * 2;
		d->p = realloc(d->p, d->cap);
		ck_assert_ptr_nonnull(d->p);
	}
	memcpy(d->p + d->len, &klen, sizeof(klen));
	memcpy(d->p + d->len + 8, key, klen);
	memcpy(d->p + d->len + 8 + klen, &vlen, sizeof(vlen));
	memcpy(d->p + d->len + 16 + klen, val, vlen);
	d->len += klen + vlen + 16;
	return 0;
}

static void
dump_tables(struct tl_txn *t, struct dump *d)
{
	struct tl_proj p;

	memset(d, 0, sizeof(*d));
	ck_assert_int_eq(tl_proj_open(t, &p), 0);
	ck_assert_int_eq(tl_kv_scan(t, p.graph, "", 0, dump_one, d), 0);
	ck_assert_int_eq(tl_kv_scan(t, p.grants, "", 0, dump_one, d), 0);
}

static int
rebuild_cb(struct tl_txn *t, void *arg)
{
	struct dump before, after;
	int *same = arg;

	dump_tables(t, &before);
	ck_assert_int_eq(tl_proj_rebuild(t, 0, NULL), 0);
	dump_tables(t, &after);
	*same = before.len == after.len &&
	    memcmp(before.p, after.p, before.len) == 0;
	free(before.p);
	free(after.p);
	return TL_EREFUSED;	/* looked at, not kept */
}

static void
assert_rebuilds(void)
{
	int same = 0;

	ck_assert_int_eq(tl_log_write(R.log, rebuild_cb, &same), TL_EREFUSED);
	ck_assert_msg(same, "a rebuild gives other tables than the folds");
}

START_TEST(test_refusals)
{
	char why[2 * TL_WHY_MAX];
	struct tl_rebind r;

	ck_assert_int_eq(rebind("node-b/postgres", 0, why), TL_EREFUSED);
	ck_assert_msg(strstr(why, "--migrate") != NULL &&
	    strstr(why, "read-only") != NULL &&
	    strstr(why, "node-a/shop") != NULL, "%s", why);
	ck_assert_int_eq(mv("shop/db", &r), TL_ENOTFOUND);
	ck_assert_uint_eq(count_type(TL_EV_REBIND_STARTED), 0);
	ck_assert_int_eq(rebind("node-a/postgres", 1, why), TL_EREFUSED);
	ck_assert_msg(strstr(why, "already bound") != NULL, "%s", why);
	ck_assert_int_eq(rebind("node-z/postgres", 1, why), TL_ENOTFOUND);
	/* Rotating: no move; moving: no rotation, no second move. */
	ck_assert_int_eq(run(do_rotate, "shop/db", why, sizeof(why)), 0);
	ck_assert_int_eq(rebind("node-b/postgres", 1, why), TL_EREFUSED);
	ck_assert_msg(strstr(why, "rotating") != NULL, "%s", why);
}
END_TEST

START_TEST(test_move_saga)
{
	uint64_t v2 = 2;
	struct tl_rebind r;
	struct tl_grant g;
	char why[2 * TL_WHY_MAX];

	ck_assert_int_eq(rebind("node-b/postgres", 1, why), 0);
	ck_assert_int_eq(mv("shop/db", &r), 0);
	ck_assert_str_eq(r.state, TL_MV_STARTED);
	ck_assert_str_eq(r.from, "node-a/postgres");
	ck_assert_str_eq(r.to, "node-b/postgres");
	ck_assert_uint_eq(r.version, 2);
	ck_assert_uint_eq(r.old_version, 1);
	ck_assert_int_eq(run(do_rotate, "shop/db", why, sizeof(why)),
	    TL_EREFUSED);
	ck_assert_msg(strstr(why, "moving") != NULL, "%s", why);
	ck_assert_int_eq(rebind("node-b/postgres", 1, why), TL_EREFUSED);

	emit(TL_EV_REBIND_ISSUED, "grant/shop/db", b_issued, &v2);
	ck_assert_int_eq(mv("shop/db", &r), 0);
	ck_assert_str_eq(r.state, TL_MV_ISSUED);
	ck_assert_str_eq(r.db, "shop-db_m2");
	ck_assert_str_eq(r.old_user, "shop-db_v1");

	/* No switch without a verified copy. */
	emit(TL_EV_BINDING_MOVED, "binding/shop/db", b_pairs, moved_kv);
	g = grant("shop/db");
	ck_assert_str_eq(g.provider, "node-a/postgres");
	ck_assert_uint_eq(g.version, 1);

	emit(TL_EV_REBIND_COPIED, "grant/shop/db", b_copied, NULL);
	ck_assert_int_eq(mv("shop/db", &r), 0);
	ck_assert_uint_eq(r.tables, 2);
	ck_assert_uint_eq(r.rows, 5);
	emit(TL_EV_BINDING_MOVED, "binding/shop/db", b_pairs, moved_kv);
	ck_assert_int_eq(mv("shop/db", &r), 0);
	ck_assert_str_eq(r.state, TL_MV_MOVED);
	g = grant("shop/db");
	ck_assert_str_eq(g.provider, "node-b/postgres");
	ck_assert_str_eq(g.state, TL_GRANT_PROVISIONED);
	ck_assert_uint_eq(g.version, 2);
	ck_assert_uint_eq(g.intent_seq, r.issued_seq);
	ck_assert_str_eq(g.object, "shop-db_m2");
	ck_assert_str_eq(g.user, "shop-db_m2_v2");
	ck_assert_str_eq(g.port, "5433");
	ck_assert(has_key(1, "gp/node-b/postgres/shop/db"));
	ck_assert(!has_key(1, "gp/node-a/postgres/shop/db"));
	{
		struct view v;
		struct tl_rec b;
		char prov[130] = "", state[16] = "";

		view_open(&v);
		ck_assert_int_eq(tl_rec_get(v.t, v.p.graph, "b/shop/db", &b),
		    0);
		tl_bn_getstr(b.m, "provider", prov, sizeof(prov));
		tl_bn_getstr(b.m, "state", state, sizeof(state));
		tl_rec_close(&b);
		ck_assert(!tl_rec_exists(v.t, v.p.graph,
		    "w/postgres-database/shop/db"));
		view_close(&v);
		ck_assert_str_eq(prov, "node-b/postgres");
		ck_assert_str_eq(state, "bound");
	}
	{
		static const char *const kv[] = { "grant", "shop/db",
		    "provider", "node-a/postgres", "resource", "shop-db",
		    "user", "shop-db_v1", "policy", "retain", NULL };

		emit(TL_EV_REBIND_COMPLETED, "grant/shop/db", b_pairs, kv);
	}
	ck_assert_int_eq(mv("shop/db", &r), TL_ENOTFOUND);
	ck_assert(!has_key(1, "mvf/shop/db"));
	ck_assert_int_eq(run(do_rotate, "shop/db", why, sizeof(why)), 0);
	assert_rebuilds();
}
END_TEST

START_TEST(test_failed_move)
{
	uint64_t v2 = 2;
	struct tl_rebind r;
	struct view v;
	char why[2 * TL_WHY_MAX];
	static const char *const failed[] = { "grant", "shop/db", "step",
	    "copy", "reason", "row counts differ", NULL };
	static const char *const reverted[] = { "grant", "shop/db",
	    "cleanup", "dropped", NULL };

	ck_assert_int_eq(rebind("node-b/postgres", 1, why), 0);
	emit(TL_EV_REBIND_ISSUED, "grant/shop/db", b_issued, &v2);
	emit(TL_EV_REBIND_FAILED, "grant/shop/db", b_pairs, failed);
	ck_assert_int_eq(mv("shop/db", &r), 0);
	ck_assert_str_eq(r.state, TL_MV_FAILED);
	ck_assert_str_eq(r.reason, "row counts differ");
	emit(TL_EV_REBIND_REVERTED, "grant/shop/db", b_pairs, reverted);
	ck_assert_int_eq(mv("shop/db", &r), TL_ENOTFOUND);
	view_open(&v);
	ck_assert_int_eq(tl_mv_failed(v.t, &v.p, "shop/db", &r), 0);
	view_close(&v);
	ck_assert_str_eq(r.step, "copy");
	ck_assert_str_eq(r.to, "node-b/postgres");
	/* The old grant stays as it was. */
	ck_assert_str_eq(grant("shop/db").provider, "node-a/postgres");
	ck_assert_uint_eq(grant("shop/db").version, 1);
	/* A retry goes past the failed version: fresh names. */
	ck_assert_int_eq(rebind("node-b/postgres", 1, why), 0);
	ck_assert_int_eq(mv("shop/db", &r), 0);
	ck_assert_uint_eq(r.version, 3);
	ck_assert(!has_key(1, "mvf/shop/db"));
	assert_rebuilds();
}
END_TEST

/* --- moving a provider ------------------------------------------------ */

struct pmove_arg {
	const char	*id, *node;
};

static int
do_pmove(struct tl_ctx *c, void *arg)
{
	struct pmove_arg *a = arg;
	struct tl_setting set[2] = { { "port", "6543", NULL, 0 },
	    { "admin-user", "postgres", NULL, 0 } };

	return tl_dec_provider_move(c, a->id, a->node, "network", set, 2);
}

static int
pmove(const char *id, const char *node, char *why)
{
	struct pmove_arg a = { id, node };

	return run(do_pmove, &a, why, 1024);
}

static void
provider_node(const char *id, char *node)
{
	struct view v;
	struct tl_rec r;
	char k[TL_KEY_MAX];

	snprintf(k, sizeof(k), "p/%s", id);
	view_open(&v);
	ck_assert_int_eq(tl_rec_get(v.t, v.p.graph, k, &r), 0);
	tl_bn_getstr(r.m, "node", node, 64);
	tl_rec_close(&r);
	view_close(&v);
}

START_TEST(test_provider_move)
{
	char why[2 * TL_WHY_MAX], node[64], id[TL_KEY_MAX];
	uint64_t regs = count_type(TL_EV_PROVIDER_REGISTERED);
	struct tl_rotation rot;
	struct view v;

	ck_assert_int_eq(pmove("node-a/postgres", "node-b", why), TL_EREFUSED);
	ck_assert_msg(strstr(why, "already runs on node-b") != NULL, "%s", why);
	ck_assert_int_eq(pmove("node-a/postgres", "node-z", why), TL_ENOTFOUND);
	ck_assert_int_eq(pmove("node-a/postgres", "node-a", why), TL_EREFUSED);
	ck_assert_int_eq(pmove("node-z/postgres", "node-c", why), TL_ENOTFOUND);

	ck_assert_msg(pmove("node-a/postgres", "node-c", why) == 0, "%s", why);
	provider_node("node-a/postgres", node);
	ck_assert_str_eq(node, "node-c");
	ck_assert(!has_key(0, "a/postgres@node-a"));
	ck_assert(has_key(0, "a/postgres@node-c"));
	ck_assert(has_key(0, "pa/postgres@node-c"));
	ck_assert(has_key(0, "pt/postgres-database/node-a/postgres"));
	/* Bindings stay; the grant is at the new address, and rotates. */
	ck_assert_str_eq(grant("shop/db").provider, "node-a/postgres");
	ck_assert_str_eq(grant("shop/db").host, "node-c.test");
	ck_assert_str_eq(grant("shop/db").port, "6543");
	view_open(&v);
	ck_assert_int_eq(tl_rot_get(v.t, &v.p, "shop/db", &rot), 0);
	ck_assert_str_eq(rot.reason, "provider moved");
	ck_assert_int_eq(tl_provider_of(v.t, &v.p, "postgres", "node-c", id),
	    0);
	ck_assert_str_eq(id, "node-a/postgres");
	ck_assert_int_eq(tl_provider_of(v.t, &v.p, "postgres", "node-a", id),
	    TL_EEXIST);
	view_close(&v);
	/* While its grant rotates, it does not move again. */
	ck_assert_int_eq(pmove("node-a/postgres", "node-a", why), TL_EREFUSED);
	ck_assert_msg(strstr(why, "rotating") != NULL, "%s", why);
	/* Re-configured where it is: same id, nothing re-registered. */
	ck_assert_msg(assign("postgres", "node-c", why) == 0, "%s", why);
	ck_assert_uint_eq(count_type(TL_EV_PROVIDER_REGISTERED), regs);
	/* Its old node cannot take the id back. */
	ck_assert_int_eq(assign("postgres", "node-a", why), TL_EREFUSED);
	ck_assert_msg(strstr(why, "belongs to the provider that moved") !=
	    NULL, "%s", why);
	assert_rebuilds();
}
END_TEST

START_TEST(test_provider_move_back)
{
	static const char *const done[] = { "grant", "shop/db", NULL };
	char why[2 * TL_WHY_MAX], node[64], id[TL_KEY_MAX];
	struct view v;

	ck_assert_msg(pmove("node-a/postgres", "node-c", why) == 0, "%s", why);
	emit(TL_EV_ROT_COMPLETED, "grant/shop/db", b_pairs, done);
	ck_assert_msg(pmove("node-a/postgres", "node-a", why) == 0, "%s", why);
	provider_node("node-a/postgres", node);
	ck_assert_str_eq(node, "node-a");
	ck_assert(!has_key(0, "pa/postgres@node-c"));
	ck_assert(!has_key(0, "pa/postgres@node-a"));
	view_open(&v);
	ck_assert_int_eq(tl_provider_of(v.t, &v.p, "postgres", "node-a", id),
	    0);
	ck_assert_str_eq(id, "node-a/postgres");
	view_close(&v);
	assert_rebuilds();
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("rebind");
	TCase *tc = tcase_create("rebind");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_move_saga);
	tcase_add_test(tc, test_failed_move);
	tcase_add_test(tc, test_provider_move);
	tcase_add_test(tc, test_provider_move_back);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
