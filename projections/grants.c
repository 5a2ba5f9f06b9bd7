/*
 * grants.c - the grants fold and the grant record.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/vec.h"
#include "events.h"
#include "grant.h"
#include "graph.h"

/* The record's field table: one place for encoding and decoding. */
#define STR_FIELDS(X, XK)						\
	X(id) X(module) X(req) X(node) X(scope) X(type) X(provider)	\
	X(resource) X(state) X(reason) X(host) X(port)			\
	XK(object, TL_GRANT_OBJECT_KEY) X(user)				\
	X(drift) X(drift_reason) X(migration) X(blocked) X(policy)
#define U64_FIELDS(X)							\
	X(state_seq) X(requested_seq) X(intent_seq) X(version) X(attempts) \
	X(retry_ns) X(drift_seq) X(migrated_seq) X(retained_bytes)
/* Written only when not 0: records of before it stay byte for byte. */
#define OPT_U64_FIELDS(X)						\
	X(naming) X(adopt_pending) X(cert_login) X(adopt_version) X(adopt_seq) \
	X(access) X(adopt_holders)
#define OPT_STR_FIELDS(X)						\
	X(path) X(adopt_from) X(adopt_resource) X(adopt_owner) X(adopt_login) \
	X(warning) X(adopt_migrated) X(of) X(of_resource) X(of_owner)

/*
 * What requirement module/req says of g's login, in one read: access:
 * and of: (a login below ownership) into g (access TL_GRANT_ACCESS_*, of
 * the owner grant's id); credential: certificate, the return value.
 */
static int
req_login(struct tl_txn *t, const struct tl_proj *p, struct tl_grant *g)
{
	static const char *const keys[] = { "access", "of", "credential" };
	struct tl_bnode v[3];
	struct tl_rec r;
	char k[TL_KEY_MAX], access[16] = "", cred[16] = "";

	g->access = 0;
	g->of[0] = '\0';
	if (tl_key(k, "r/%s/%s", g->module, g->req) != 0 ||
	    tl_rec_get(t, p->graph, k, &r) != 0)
		return 0;
	if (tl_bn_pick(r.m, keys, 3, v) == 0) {
		tl_bn_strcpy(v[0], access, sizeof(access));
		tl_bn_strcpy(v[2], cred, sizeof(cred));
		if (strcmp(access, "read") == 0 ||
		    strcmp(access, "read-write") == 0) {
			g->access = strcmp(access, "read") == 0 ?
			    TL_GRANT_ACCESS_READ : TL_GRANT_ACCESS_READ_WRITE;
			if (tl_bn_strcpy(v[1], g->of, sizeof(g->of)) != 0) {
				g->of[0] = '\0';
				g->access = 0;
			}
		}
	}
	tl_rec_close(&r);
	return strcmp(cred, "certificate") == 0;
}

int
tl_grant_put(struct tl_txn *t, const struct tl_proj *p, uint64_t seq,
    const struct tl_grant *g)
{
	struct tl_body b;
	const void *enc;
	size_t len;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "g/%s", g->id)) != 0)
		return rc;
	tl_body_init(&b);
#define PUT_STR(f) tl_body_str(&b, #f, g->f);
#define PUT_STRK(f, k) tl_body_str(&b, k, g->f);
#define PUT_U64(f) tl_body_u64(&b, #f, g->f);
#define PUT_OPT(f) if (g->f != 0) tl_body_u64(&b, #f, g->f);
	STR_FIELDS(PUT_STR, PUT_STRK)
	U64_FIELDS(PUT_U64)
	OPT_U64_FIELDS(PUT_OPT)
#define PUT_OPT_STR(f) if (g->f[0] != '\0') tl_body_str(&b, #f, g->f);
	OPT_STR_FIELDS(PUT_OPT_STR)
	if ((rc = tl_body_finish(&b, &enc, &len)) == 0)
		rc = tl_rec_put(t, p->grants, k, seq, enc, len);
	tl_body_free(&b);
	return rc;
}

#define NAME(f) #f,
#define NAMEK(f, k) k,
static const char *const grant_keys[] = {
	STR_FIELDS(NAME, NAMEK) U64_FIELDS(NAME) OPT_U64_FIELDS(NAME)
	OPT_STR_FIELDS(NAME)
};
#undef NAME
#undef NAMEK
#define NKEYS	(sizeof(grant_keys) / sizeof(grant_keys[0]))

static int
grant_decode(struct tl_bnode m, struct tl_grant *g)
{
	struct tl_bnode v[NKEYS];
	size_t i = 0;
	int rc;

	memset(g, 0, sizeof(*g));
	/* One walk: the record holds every field, in this order. */
	if ((rc = tl_bn_pick(m, grant_keys, NKEYS, v)) != 0)
		return rc;
#define GET_STR(f)							\
	if (tl_bn_strcpy(v[i++], g->f, sizeof(g->f)) == TL_ETOOBIG)	\
		return TL_ECORRUPT;
#define GET_STRK(f, k) GET_STR(f)
#define GET_U64(f)							\
	if (tl_bn_u64(v[i++], &g->f) != 0)				\
		g->f = 0;
	STR_FIELDS(GET_STR, GET_STRK)
	U64_FIELDS(GET_U64)
	OPT_U64_FIELDS(GET_U64)
	OPT_STR_FIELDS(GET_STR)
	return 0;
}

int
tl_grant_get(struct tl_txn *t, const struct tl_proj *p, const char *id,
    struct tl_grant *g, uint64_t *seqp)
{
	struct tl_rec r;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "g/%s", id)) != 0)
		return rc;
	if ((rc = tl_rec_get(t, p->grants, k, &r)) != 0)
		return rc;
	rc = grant_decode(r.m, g);
	if (seqp != NULL)
		*seqp = r.seq;
	tl_rec_close(&r);
	return rc;
}

struct each {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	tl_grant_fn		 fn;
	void			*arg;
	int			 direct;	/* values are records */
};

static int
each_one(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct each *e = arg;
	struct tl_grant g;
	int rc;

	if (e->direct) {
		struct tl_rec r;

		if ((rc = tl_rec_open(val, vlen, &r)) != 0)
			return rc;
		rc = grant_decode(r.m, &g);
		tl_rec_close(&r);
	} else
		rc = tl_grant_get(e->t, e->p, rest, &g, NULL);
	if (rc != 0)
		return rc;
	return e->fn(&g, e->arg);
}

int
tl_grant_each_of_module(struct tl_txn *t, const struct tl_proj *p,
    const char *module, tl_grant_fn fn, void *arg)
{
	struct each e = { t, p, fn, arg, 0 };
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "gm/%s/", module)) != 0)
		return rc;
	return tl_rec_scan(t, p->grants, k, each_one, &e);
}

int
tl_grant_each_reader(struct tl_txn *t, const struct tl_proj *p,
    const char *owner, tl_grant_fn fn, void *arg)
{
	struct each e = { t, p, fn, arg, 0 };
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "of/%s/", owner)) != 0)
		return rc;
	return tl_rec_scan(t, p->grants, k, each_one, &e);
}

int
tl_grant_each_of_provider(struct tl_txn *t, const struct tl_proj *p,
    const char *provider, tl_grant_fn fn, void *arg)
{
	struct each e = { t, p, fn, arg, 0 };
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "gp/%s/", provider)) != 0)
		return rc;
	return tl_rec_scan(t, p->grants, k, each_one, &e);
}

int
tl_grant_each(struct tl_txn *t, const struct tl_proj *p, tl_grant_fn fn,
    void *arg)
{
	struct each e = { t, p, fn, arg, 1 };

	return tl_rec_scan(t, p->grants, "g/", each_one, &e);
}

/* gw/PROVIDER SEQ ID: the space sorts before any character of an id. */
static int
work_key(char *k, const struct tl_grant *g)
{
	return tl_key(k, "gw/%s %016llx %s", g->provider,
	    (unsigned long long)g->state_seq, g->id);
}

struct work_each {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	tl_grant_fn		 fn;
	void			*arg;
};

static int
work_one(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct work_each *e = arg;
	const char *id = strchr(rest, ' ');
	struct tl_grant g;
	int rc;

	(void)val;
	(void)vlen;
	if (id == NULL)
		return TL_ECORRUPT;
	if ((rc = tl_grant_get(e->t, e->p, id + 1, &g, NULL)) != 0)
		return rc;
	return e->fn(&g, e->arg);
}

int
tl_grant_each_work_on(struct tl_txn *t, const struct tl_proj *p,
    const char *provider, tl_grant_fn fn, void *arg)
{
	struct work_each e = { t, p, fn, arg };
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "gw/%s ", provider)) != 0)
		return rc;
	return tl_rec_scan(t, p->grants, k, work_one, &e);
}

struct prov_each {
	tl_grant_provider_fn	 fn;
	void			*arg;
};

static int
prov_one(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct prov_each *e = arg;

	if (vlen != 8)
		return TL_ECORRUPT;
	return e->fn(rest, tl_get_be64(val), e->arg);
}

int
tl_grant_work_providers(struct tl_txn *t, const struct tl_proj *p,
    tl_grant_provider_fn fn, void *arg)
{
	struct prov_each e = { fn, arg };

	return tl_rec_scan(t, p->grants, "gwp/", prov_one, &e);
}

int
tl_grant_each_undelivered(struct tl_txn *t, const struct tl_proj *p,
    tl_grant_fn fn, void *arg)
{
	struct each e = { t, p, fn, arg, 0 };

	return tl_rec_scan(t, p->grants, "gd/", each_one, &e);
}

int
tl_grant_each_migrating(struct tl_txn *t, const struct tl_proj *p,
    tl_grant_fn fn, void *arg)
{
	struct each e = { t, p, fn, arg, 0 };

	return tl_rec_scan(t, p->grants, "gmw/", each_one, &e);
}

struct due_each {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	uint64_t		 now;
	tl_grant_fn		 fn;
	void			*arg;
	int			 past;	/* stopped at one not due */
};

/* grs/DUE GRANT, DUE 16 hex digits: in due order; stops past now. */
static int
due_one(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct due_each *e = arg;
	const char *id = strchr(rest, ' ');
	unsigned long long due;
	struct tl_grant g;
	int rc;

	(void)val;
	(void)vlen;
	if (id == NULL || id - rest != 16 || sscanf(rest, "%16llx", &due) != 1)
		return TL_ECORRUPT;
	if (due > e->now) {
		e->past = 1;
		return 1;
	}
	if ((rc = tl_grant_get(e->t, e->p, id + 1, &g, NULL)) != 0)
		return rc;
	return e->fn(&g, e->arg);
}

int
tl_grant_each_rotation_due(struct tl_txn *t, const struct tl_proj *p,
    uint64_t now, tl_grant_fn fn, void *arg)
{
	struct due_each e = { t, p, now, fn, arg, 0 };
	int rc;

	rc = tl_rec_scan(t, p->grants, "grs/", due_one, &e);
	return e.past ? 0 : rc;
}

int
tl_grant_due_indexed(struct tl_txn *t, const struct tl_proj *p)
{
	const void *v;
	size_t n;

	return tl_kv_get(t, p->grants, TL_GRANT_DUE_MARK,
	    strlen(TL_GRANT_DUE_MARK), &v, &n) == 0;
}

/* Is a grant in this state work for the provisioner's driver calls? */
static int
work_state(const char *state)
{
	static const char *const v[] = {
		TL_GRANT_REQUESTED, TL_GRANT_PROVISIONING, TL_GRANT_FAILED,
		TL_GRANT_REPAIRING, TL_GRANT_REVOKING, TL_GRANT_PURGING,
		TL_GRANT_RESTORING
	};
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (strcmp(state, v[i]) == 0)
			return 1;
	return 0;
}

/* gwp/PROVIDER: how many gw/PROVIDER entries; absent at none. */
static int
count_work(struct tl_txn *t, const struct tl_proj *p, const char *provider,
    int delta)
{
	const void *val;
	size_t n;
	uint64_t c = 0;
	uint8_t v[8];
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "gwp/%s", provider)) != 0)
		return rc;
	if (tl_kv_get(t, p->grants, k, strlen(k), &val, &n) == 0 && n == 8)
		c = tl_get_be64(val);
	if (delta < 0 && c == 0)
		return 0;	/* not counted: nothing to take off */
	c = delta < 0 ? c - 1 : c + 1;
	if (c == 0)
		return tl_kv_del(t, p->grants, k, strlen(k));
	tl_put_be64(v, c);
	return tl_kv_put(t, p->grants, k, strlen(k), v, 8);
}

static int
has_key(struct tl_txn *t, const struct tl_proj *p, const char *k)
{
	const void *v;
	size_t n;

	return tl_kv_get(t, p->grants, k, strlen(k), &v, &n) == 0;
}

/*
 * Does a holder of g (the graph's, folded before the grants: the nodes
 * of the module's assignments that install the requirement, g's own
 * node alone per instance) lack its credential version?  Into *lacks.
 */
static int
holder_lacks(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, int *lacks)
{
	struct tl_nodelist nl;
	char holder[140];
	size_t i;
	int rc;

	*lacks = 0;
	rc = tl_graph_req_nodes(t, p, g->module, g->req, &nl);
	if (rc == TL_ENOTFOUND)
		return 0;	/* no requirement: no holder */
	if (rc != 0)
		return rc;
	for (i = 0; i < nl.n && !*lacks; i++) {
		if (g->node[0] != '\0' && strcmp(nl.v[i], g->node) != 0)
			continue;
		snprintf(holder, sizeof(holder), "%s@%s", g->module, nl.v[i]);
		*lacks = tl_grant_delivered(t, p, g->id, holder) < g->version;
	}
	tl_nodelist_free(&nl);
	return 0;
}

/*
 * gd/GRANT exactly when g is provisioned and a holder lacks its
 * version: so the provisioner finds every delivery to make in the index
 * and never walks the grants at rest for one.
 */
static int
delivery_index(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g)
{
	char k[TL_KEY_MAX];
	int lacks = 0, rc;

	if ((rc = tl_key(k, "gd/%s", g->id)) != 0)
		return rc;
	if (strcmp(g->state, TL_GRANT_PROVISIONED) == 0 &&
	    (rc = holder_lacks(t, p, g, &lacks)) != 0)
		return rc;
	if (lacks)
		return tl_kv_put(t, p->grants, k, strlen(k), "", 0);
	return tl_kv_del(t, p->grants, k, strlen(k));
}

/*
 * Has the migrator work for g?  Provisioned, without drift, and a
 * holder's assignment not marked ready (ar/, the graph's) or a file of
 * its requirement's migrations not applied with its checksum (ma/):
 * what reactors/migrate.c looks for, so gmw/ holds exactly the grants
 * it would take.
 */
static int
migrator_work(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, int *work)
{
	struct tl_nodelist nl;
	struct tl_bnode list;
	struct tl_rec r;
	char k[TL_KEY_MAX];
	size_t i;
	int rc;

	*work = 0;
	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0 || g->drift[0] != '\0')
		return 0;
	rc = tl_graph_req_nodes(t, p, g->module, g->req, &nl);
	if (rc != 0 && rc != TL_ENOTFOUND)
		return rc;
	if (rc == 0) {
		for (i = 0; i < nl.n && !*work; i++) {
			if (g->node[0] != '\0' && strcmp(nl.v[i], g->node) != 0)
				continue;
			if (tl_key(k, "ar/%s@%s", g->module, nl.v[i]) == 0)
				*work = !tl_rec_exists(t, p->graph, k);
		}
		tl_nodelist_free(&nl);
	}
	if (*work || tl_key(k, "r/%s/%s", g->module, g->req) != 0 ||
	    tl_rec_get(t, p->graph, k, &r) != 0)
		return 0;
	if (tl_bn_get(r.m, "migrations", &list) == 0)
		for (i = 0; i < tl_bn_len(list) && !*work; i++) {
			struct tl_bnode e = tl_bn_at(list, i);
			char file[64] = "", sum[65] = "", mk[TL_KEY_MAX];
			const void *v;
			size_t n;

			tl_bn_getstr(e, "file", file, sizeof(file));
			tl_bn_getstr(e, "checksum", sum, sizeof(sum));
			*work = tl_key(mk, "ma/%s/%s", g->id, file) != 0 ||
			    tl_kv_get(t, p->grants, mk, strlen(mk), &v,
			    &n) != 0 || n != strlen(sum) ||
			    memcmp(v, sum, n) != 0;
		}
	tl_rec_close(&r);
	return 0;
}

/*
 * The entry of g's type in its provider's record (p/PROVIDER types[]):
 * 0 with r open (the caller closes it), else nonzero and nothing open.
 */
static int
provider_type(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, struct tl_rec *r, struct tl_bnode *entry)
{
	struct tl_bnode types;
	char k[TL_KEY_MAX];
	size_t i;

	if (tl_key(k, "p/%s", g->provider) != 0 ||
	    tl_rec_get(t, p->graph, k, r) != 0)
		return TL_ENOTFOUND;
	if (tl_bn_get(r->m, "types", &types) == 0)
		for (i = 0; i < tl_bn_len(types); i++) {
			char ty[64] = "";

			*entry = tl_bn_at(types, i);
			tl_bn_getstr(*entry, "type", ty, sizeof(ty));
			if (strcmp(ty, g->type) == 0)
				return 0;
		}
	tl_rec_close(r);
	return TL_ENOTFOUND;
}

uint64_t
tl_grant_max_age(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g)
{
	struct tl_rec r;
	struct tl_bnode e;
	uint64_t age = 0;
	char k[TL_KEY_MAX];

	/* The requirement's own age wins over the provider's default. */
	if (tl_key(k, "r/%s/%s", g->module, g->req) == 0 &&
	    tl_rec_get(t, p->graph, k, &r) == 0) {
		age = tl_bn_getu64(r.m, "max_age", 0);
		tl_rec_close(&r);
	}
	if (age != 0)
		return age;
	if (provider_type(t, p, g, &r, &e) == 0) {
		age = tl_bn_getu64(e, "max_age", 0);
		tl_rec_close(&r);
	}
	return age;
}

void
tl_grant_window(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, char *out, size_t cap)
{
	struct tl_rec r;
	struct tl_bnode e;
	char k[TL_KEY_MAX];

	out[0] = '\0';
	/* As the age: the requirement's own wins over the provider's. */
	if (tl_key(k, "r/%s/%s", g->module, g->req) == 0 &&
	    tl_rec_get(t, p->graph, k, &r) == 0) {
		if (tl_bn_getstr(r.m, "window", out, cap) != 0)
			out[0] = '\0';
		tl_rec_close(&r);
	}
	if (out[0] != '\0')
		return;
	if (provider_type(t, p, g, &r, &e) == 0) {
		if (tl_bn_getstr(e, "window", out, cap) != 0)
			out[0] = '\0';
		tl_rec_close(&r);
	}
}

int
tl_grant_params(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, char *out, size_t cap)
{
	struct tl_rec r;
	struct tl_bnode m, k, v;
	struct tl_bn_iter it;
	const char *ks, *vs;
	size_t kl, vl, off = 0;
	char key[TL_KEY_MAX];
	int rc;

	if (cap == 0)
		return TL_ETOOBIG;
	out[0] = '\0';
	if ((rc = tl_key(key, "r/%s/%s", g->module, g->req)) != 0)
		return rc;
	if ((rc = tl_rec_get(t, p->graph, key, &r)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	if (tl_bn_get(r.m, "params", &m) != 0 || tl_bn_iter(m, &it) != 0) {
		tl_rec_close(&r);
		return 0;
	}
	while ((rc = tl_bn_iter_next(&it, &k, &v)) == 1) {
		if (tl_bn_str(k, &ks, &kl) != 0 || tl_bn_str(v, &vs, &vl) != 0 ||
		    memchr(ks, '\0', kl) != NULL || memchr(vs, '\0', vl) != NULL)
			continue;	/* not a param apply writes */
		if (off + kl + vl + 3 > cap) {
			out[0] = '\0';
			tl_rec_close(&r);
			return TL_ETOOBIG;
		}
		memcpy(out + off, ks, kl);
		out[off + kl] = '\0';
		off += kl + 1;
		memcpy(out + off, vs, vl);
		out[off + vl] = '\0';
		off += vl + 1;
	}
	out[off] = '\0';
	tl_rec_close(&r);
	return rc;		/* 0 at the end, or TL_EMALFORMED */
}

int
tl_grant_renews_certificates(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g)
{
	char k[TL_KEY_MAX];

	return tl_key(k, "crn/%s", g->id) == 0 && has_key(t, p, k);
}

/*
 * (grant.h.)  The intent is an earlier event of the same log: its time
 * is the log's, so a rebuild computes the same; so is renew_at.
 */
int
tl_grant_rotation_due(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, uint64_t *due)
{
	struct tl_event ev;
	uint64_t age, at;
	const void *v;
	size_t n;
	char k[TL_KEY_MAX];

	*due = 0;
	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0 ||
	    g->intent_seq == 0 || TL_GRANT_IS_EMBEDDED(g))
		return 0;
	if (tl_key(k, "rot/%s", g->id) == 0 && tl_rec_exists(t, p->grants, k))
		return 0;
	/* A certificate's renewal point (rotation.c: fold_renewal). */
	if (tl_key(k, "crn/%s", g->id) == 0 && tl_kv_get(t, p->grants, k,
	    strlen(k), &v, &n) == 0 && n == 16 && tl_get_be64(v) ==
	    g->version)
		*due = tl_get_be64((const uint8_t *)v + 8);
	if ((age = tl_grant_max_age(t, p, g)) == 0 ||
	    tl_log_get(t, g->intent_seq, &ev) != 0)
		return 0;
	at = age > (UINT64_MAX - ev.ts) / 1000000000u ? UINT64_MAX :
	    ev.ts + age * 1000000000u;
	if (*due == 0 || at < *due)
		*due = at;
	return 0;
}

/*
 * fresh: g has no record yet (its first grant.requested), so no entry
 * keyed by its id exists (a grant's record is never deleted, and its
 * entries are written only beside it): none is looked up.  A third of
 * the lookups of a rebuild's grant.requested.
 */
static int
due_index(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, int fresh)
{
	const void *v;
	size_t n;
	uint64_t due, was = 0;
	uint8_t b[8];
	char k[TL_KEY_MAX];
	char kd[TL_KEY_MAX];
	int work, rc;

	if ((rc = migrator_work(t, p, g, &work)) != 0 ||
	    (rc = tl_key(k, "gmw/%s", g->id)) != 0)
		return rc;
	if ((fresh ? work : work != has_key(t, p, k)) && (rc = work ?
	    tl_kv_put(t, p->grants, k, strlen(k), "", 0) :
	    tl_kv_del(t, p->grants, k, strlen(k))) != 0)
		return rc;
	if ((rc = tl_grant_rotation_due(t, p, g, &due)) != 0 ||
	    (rc = tl_key(kd, "grd/%s", g->id)) != 0)
		return rc;
	if (!fresh && tl_kv_get(t, p->grants, kd, strlen(kd), &v, &n) == 0 &&
	    n == 8)
		was = tl_get_be64(v);
	if (was == due)
		return 0;
	if (was != 0 && ((rc = tl_key(k, "grs/%016llx %s",
	    (unsigned long long)was, g->id)) != 0 ||
	    (rc = tl_kv_del(t, p->grants, k, strlen(k))) != 0))
		return rc;
	if (due == 0)
		return tl_kv_del(t, p->grants, kd, strlen(kd));
	tl_put_be64(b, due);
	if ((rc = tl_key(k, "grs/%016llx %s", (unsigned long long)due,
	    g->id)) != 0 ||
	    (rc = tl_kv_put(t, p->grants, k, strlen(k), "", 0)) != 0)
		return rc;
	return tl_kv_put(t, p->grants, kd, strlen(kd), b, 8);
}

int
tl_grant_due_index(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g)
{
	return due_index(t, p, g, 0);
}

/*
 * An event that changes who holds a module's grants (an assignment
 * made, configured or removed, a requirement or the module declared
 * again): each of its grants' delivery entry again.  The grants are
 * collected first (their entries are written in the table walked).
 */
struct gvec {
	struct tl_grant	*v;
	size_t		 n, cap;
};

static int
collect_grant(const struct tl_grant *g, void *arg)
{
	struct gvec *gv = arg;

	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0)
		return 0;
	if (tl_vec_grow(&gv->v, &gv->cap, gv->n + 1, sizeof(gv->v[0])) != 0)
		return ENOMEM;
	gv->v[gv->n++] = *g;
	return 0;
}

/*
 * deliveries: the gd/ entries too (the holders changed), not only the
 * migrator's and the rotator's (an assignment ready, a requirement
 * withdrawn, a provider's max age changed).  Grants not provisioned
 * have none of them: their entries went as their state did.
 */
static int
reindex(struct tl_txn *t, const struct tl_proj *p, struct gvec *gv,
    int deliveries)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < gv->n && rc == 0; i++)
		if ((!deliveries ||
		    (rc = delivery_index(t, p, &gv->v[i])) == 0))
			rc = tl_grant_due_index(t, p, &gv->v[i]);
	free(gv->v);
	return rc;
}

static int
holders_changed(struct tl_txn *t, const struct tl_proj *p,
    const char *module, int deliveries)
{
	struct gvec gv = { NULL, 0, 0 };
	int rc;

	if ((rc = tl_grant_each_of_module(t, p, module, collect_grant,
	    &gv)) != 0) {
		free(gv.v);
		return rc;
	}
	return reindex(t, p, &gv, deliveries);
}

/*
 * provider.registered, .retired: when the max ages its types declare
 * change (gpa/PROVIDER keeps them, "TYPE=AGE " for each set), each of
 * its grants' due time again.
 */
static int
provider_ages(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	struct gvec gv = { NULL, 0, 0 };
	struct tl_bnode types;
	const void *v;
	size_t i, n, off = 0;
	char id[130], ages[2048] = "";
	char k[TL_KEY_MAX];
	int rc;

	if (tl_bn_getstr(body, "id", id, sizeof(id)) != 0)
		return 0;	/* the graph's fold refuses it */
	if (strcmp(ev->type, TL_EV_PROVIDER_REGISTERED) == 0 &&
	    tl_bn_get(body, "types", &types) == 0)
		for (i = 0; i < tl_bn_len(types) && off < sizeof(ages); i++) {
			char ty[64] = "";
			uint64_t age = tl_bn_getu64(tl_bn_at(types, i),
			    "max_age", 0);

			tl_bn_getstr(tl_bn_at(types, i), "type", ty,
			    sizeof(ty));
			if (age != 0)
				off += (size_t)snprintf(ages + off,
				    sizeof(ages) - off, "%s=%llu ", ty,
				    (unsigned long long)age);
		}
	if (off >= sizeof(ages))
		return TL_ETOOBIG;
	if ((rc = tl_key(k, "gpa/%s", id)) != 0)
		return rc;
	if (tl_kv_get(t, p->grants, k, strlen(k), &v, &n) != 0)
		n = 0;
	if (n == off && (n == 0 || memcmp(v, ages, n) == 0))
		return 0;
	if ((rc = off == 0 ? tl_kv_del(t, p->grants, k, strlen(k)) :
	    tl_kv_put(t, p->grants, k, strlen(k), ages, off)) != 0 ||
	    (rc = tl_grant_each_of_provider(t, p, id, collect_grant,
	    &gv)) != 0) {
		free(gv.v);
		return rc;
	}
	return reindex(t, p, &gv, 0);
}

int
tl_grant_work_index(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *old, const struct tl_grant *g, int undelivered)
{
	int was = old != NULL && work_state(old->state);
	int is = work_state(g->state);
	char ko[TL_KEY_MAX];
	char kn[TL_KEY_MAX];
	int rc;

	if (was && (rc = work_key(ko, old)) != 0)
		return rc;
	if (is && (rc = work_key(kn, g)) != 0)
		return rc;
	/*
	 * Counted as the entries come and go, not as states say: projections
	 * built before the index (no entries yet) stay consistent.
	 */
	if (was && (!is || strcmp(ko, kn) != 0) && has_key(t, p, ko)) {
		if ((rc = tl_kv_del(t, p->grants, ko, strlen(ko))) != 0 ||
		    (rc = count_work(t, p, old->provider, -1)) != 0)
			return rc;
	}
	if (is && (!was || strcmp(ko, kn) != 0) &&
	    (old == NULL || !has_key(t, p, kn))) {
		if ((rc = tl_kv_put(t, p->grants, kn, strlen(kn), "", 0)) !=
		    0 || (rc = count_work(t, p, g->provider, 1)) != 0)
			return rc;
	}
	/* A grant with no record had no gd/ entry (due_index: fresh). */
	if ((strcmp(g->state, TL_GRANT_PROVISIONED) != 0 || undelivered) &&
	    (old != NULL || strcmp(g->state, TL_GRANT_PROVISIONED) == 0) &&
	    (rc = delivery_index(t, p, g)) != 0)
		return rc;
	return due_index(t, p, g, old == NULL);
}

static int
set_provider_index(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, int on)
{
	char k[TL_KEY_MAX];
	int rc;

	if (g->provider[0] == '\0')
		return 0;
	if ((rc = tl_key(k, "gp/%s/%s", g->provider, g->id)) != 0)
		return rc;
	if (on)
		return tl_kv_put(t, p->grants, k, strlen(k), "", 0);
	return tl_kv_del(t, p->grants, k, strlen(k));
}

static void
set_state(struct tl_grant *g, const char *state, uint64_t seq)
{
	snprintf(g->state, sizeof(g->state), "%s", state);
	g->state_seq = seq;
}

/* Drops the record of applied migrations (ma/GRANT/...) of a grant. */
static int
forget_migrations(struct tl_txn *t, const struct tl_proj *p, const char *id)
{
	struct tl_rec_keys ks = { NULL, 0, 0 };
	char pfx[TL_KEY_MAX];
	char k[TL_KEY_MAX];
	size_t i;
	int rc;

	/* Collected first: deleting while a cursor walks them is unsafe. */
	if ((rc = tl_key(pfx, "ma/%s/", id)) != 0 ||
	    (rc = tl_rec_keys(t, p->grants, pfx, &ks)) != 0)
		goto out;
	for (i = 0; i < ks.n; i++)
		if ((rc = tl_key(k, "%s%s", pfx, ks.v[i])) != 0 ||
		    (rc = tl_kv_del(t, p->grants, k, strlen(k))) != 0)
			break;
out:
	tl_rec_keys_free(&ks);
	return rc;
}

static int
fold_delivered(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	char grant[TL_GRANT_ID_MAX + 1], holder[140];
	struct tl_grant g;
	uint8_t v[8];
	uint64_t ver;
	char k[TL_KEY_MAX];
	int rc;

	if (tl_bn_getstr(body, "grant", grant, sizeof(grant)) != 0 ||
	    tl_bn_getstr(body, "holder", holder, sizeof(holder)) != 0)
		return TL_EMALFORMED;
	ver = tl_bn_getu64(body, "version", 0);
	tl_put_be64(v, ver);
	if ((rc = tl_key(k, "d/%s/%s", grant, holder)) != 0)
		return rc;
	(void)ev;
	if ((rc = tl_kv_put(t, p->grants, k, strlen(k), v, 8)) != 0)
		return rc;
	/* Out of the index once every holder has its version. */
	if (tl_grant_get(t, p, grant, &g, NULL) == 0)
		return delivery_index(t, p, &g);
	return 0;
}

uint64_t
tl_grant_delivered(struct tl_txn *t, const struct tl_proj *p,
    const char *grant, const char *holder)
{
	const void *val;
	size_t n;
	uint64_t ver = 0;
	char k[TL_KEY_MAX];

	if (tl_key(k, "d/%s/%s", grant, holder) != 0 ||
	    tl_kv_get(t, p->grants, k, strlen(k), &val, &n) != 0 || n != 8)
		return 0;
	ver = tl_get_be64(val);
	return ver;
}

/*
 * A grant's entry in mesh.adopted with login (the driver found the
 * names by their mark): those names are the grant's for good.  Without
 * it, none: the names follow from the mesh id.
 */
static int
fold_adopted_names(struct tl_bnode e, struct tl_grant *g, int *big)
{
	g->adopt_resource[0] = g->adopt_owner[0] = g->adopt_login[0] = '\0';
	tl_rec_getstr(e, "login", g->adopt_login, sizeof(g->adopt_login), big);
	if (g->adopt_login[0] == '\0')
		return 0;
	tl_rec_getstr(e, "resource", g->adopt_resource,
	    sizeof(g->adopt_resource), big);
	tl_rec_getstr(e, "owner", g->adopt_owner, sizeof(g->adopt_owner), big);
	return 0;
}

/*
 * mesh.adopted {from, grants[{grant resource [owner login]}]}: each
 * grant adopts.
 */
static int
fold_adopted(struct tl_txn *t, const struct tl_proj *p, struct tl_bnode body,
    uint64_t seq, int *big)
{
	struct tl_bnode gs;
	struct tl_grant g;
	char from[sizeof(g.adopt_from)] = "", id[TL_GRANT_ID_MAX + 1];
	size_t i;
	int rc;

	tl_rec_getstr(body, "from", from, sizeof(from), big);
	if (from[0] == '\0' || tl_bn_get(body, "grants", &gs) != 0)
		return TL_EMALFORMED;
	for (i = 0; i < tl_bn_len(gs); i++) {
		if (tl_bn_getstr(tl_bn_at(gs, i), "grant", id, sizeof(id)) != 0)
			return TL_EMALFORMED;
		if ((rc = tl_grant_get(t, p, id, &g, NULL)) == TL_ENOTFOUND)
			continue;
		if (rc != 0)
			return rc;
		snprintf(g.adopt_from, sizeof(g.adopt_from), "%s", from);
		g.adopt_pending = 1;
		if ((rc = fold_adopted_names(tl_bn_at(gs, i), &g, big)) != 0)
			return rc;
		if ((rc = tl_grant_put(t, p, seq, &g)) != 0)
			return rc;
	}
	return 0;
}

/*
 * grant.adopted {grant resource login}: an object that is not tally's
 * becomes the grant's resource, its login the credential of the grant's
 * next version (reactors/names.c), which the rotation begun when it is
 * provisioned replaces (reactors/provision.c).  Before the grant exists
 * (tally adopt before tally assign: tallyd would provision at once) the
 * claim waits under adp/GRANT for its grant.requested.
 */
void
tl_grant_adopt_ad(char ad[TL_KEY_MAX], const char *grant, const char *field)
{
	/* The secret's, as first made: boxes in logs open as they did. */
	if (strcmp(field, "secret") == 0)
		snprintf(ad, TL_KEY_MAX, "grant/%s:adopted", grant);
	else
		snprintf(ad, TL_KEY_MAX, "grant/%s:adopted:%s", grant, field);
}

static int
fold_adopt(struct tl_grant *g, uint64_t seq, struct tl_bnode body, int *big)
{
	tl_rec_getstr(body, "resource", g->adopt_resource,
	    sizeof(g->adopt_resource), big);
	tl_rec_getstr(body, "login", g->adopt_login, sizeof(g->adopt_login),
	    big);
	tl_rec_getstr(body, "migrated", g->adopt_migrated,
	    sizeof(g->adopt_migrated), big);
	g->adopt_owner[0] = '\0';
	g->adopt_version = g->version + 1;
	g->adopt_seq = seq;
	return g->adopt_resource[0] == '\0' ? TL_EMALFORMED : 0;
}

static int
fold_grant_adopted(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, const char *id, struct tl_bnode body, int *big)
{
	struct tl_grant g;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_grant_get(t, p, id, &g, NULL)) == TL_ENOTFOUND) {
		if ((rc = tl_key(k, "adp/%s", id)) != 0)
			return rc;
		return tl_rec_put(t, p->grants, k, ev->seq, ev->body,
		    ev->body_len);
	}
	if (rc != 0)
		return rc;
	/* Only before the first provisioning: tally adopt refuses after. */
	if (g.version != 0 || g.adopt_from[0] != '\0')
		return 0;
	if ((rc = fold_adopt(&g, ev->seq, body, big)) != 0)
		return rc;
	return tl_grant_put(t, p, ev->seq, &g);
}

/* The claim of a tally adopt made before g was requested, taken. */
static int
take_adopt_claim(struct tl_txn *t, const struct tl_proj *p, struct tl_grant *g,
    int *big)
{
	struct tl_rec r;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "adp/%s", g->id)) != 0)
		return rc;
	if ((rc = tl_rec_get(t, p->grants, k, &r)) == TL_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	rc = g->version == 0 ? fold_adopt(g, r.seq, r.m, big) : 0;
	tl_rec_close(&r);
	if (rc == 0)
		rc = tl_kv_del(t, p->grants, k, strlen(k));
	return rc;
}

static int
fold_grants_all(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body, int *big)
{
	struct tl_grant g, old;
	char id[TL_GRANT_ID_MAX + 1];
	int had = 0;
	char k[TL_KEY_MAX];
	int rc;

	if (strcmp(ev->type, TL_EV_CRED_DELIVERED) == 0)
		return fold_delivered(t, p, ev, body);
	if (strcmp(ev->type, TL_EV_CRED_WITHDRAWN) == 0) {
		char grant[TL_GRANT_ID_MAX + 1], holder[140];

		/* No delivery of record to it any more (tl_grant_delivered). */
		if (tl_bn_getstr(body, "grant", grant, sizeof(grant)) != 0 ||
		    tl_bn_getstr(body, "holder", holder, sizeof(holder)) != 0)
			return TL_EMALFORMED;
		if ((rc = tl_key(k, "d/%s/%s", grant, holder)) != 0)
			return rc;
		rc = tl_kv_del(t, p->grants, k, strlen(k));
		if (rc != 0 && rc != TL_ENOTFOUND)
			return rc;
		if (tl_grant_get(t, p, grant, &g, NULL) == 0)
			return delivery_index(t, p, &g);
		return 0;
	}
	if (strcmp(ev->type, TL_EV_ASSIGN_CREATED) == 0 ||
	    strcmp(ev->type, TL_EV_ASSIGN_CONFIGURED) == 0 ||
	    strcmp(ev->type, TL_EV_ASSIGN_REMOVED) == 0 ||
	    strcmp(ev->type, TL_EV_REQ_DECLARED) == 0 ||
	    strcmp(ev->type, TL_EV_MODULE_DECLARED) == 0) {
		char module[64];

		if (tl_bn_getstr(body, strcmp(ev->type,
		    TL_EV_MODULE_DECLARED) == 0 ? "name" : "module", module,
		    sizeof(module)) != 0)
			return 0;	/* the graph's fold refuses it */
		return holders_changed(t, p, module, 1);
	}
	if (strcmp(ev->type, TL_EV_ASSIGN_READY) == 0 ||
	    strcmp(ev->type, TL_EV_REQ_WITHDRAWN) == 0) {
		char module[64];

		/* Ready (ar/), or the requirement's migrations and age gone. */
		if (tl_bn_getstr(body, "module", module, sizeof(module)) != 0)
			return 0;	/* the graph's fold refuses it */
		return holders_changed(t, p, module, 0);
	}
	if (strcmp(ev->type, TL_EV_PROVIDER_REGISTERED) == 0 ||
	    strcmp(ev->type, TL_EV_PROVIDER_RETIRED) == 0)
		return provider_ages(t, p, ev, body);
	if (strcmp(ev->type, TL_EV_MIGRATION_STORED) == 0)
		return 0;	/* the graph indexes the content */
	if (strcmp(ev->type, TL_EV_MESH_ADOPTED) == 0)
		return fold_adopted(t, p, body, ev->seq, big);
	if (strncmp(ev->type, "grant.", 6) != 0 &&
	    strncmp(ev->type, "migration.", 10) != 0 &&
	    strcmp(ev->type, TL_EV_BINDING_MADE) != 0 &&
	    strcmp(ev->type, TL_EV_REPAIR_REQUESTED) != 0 &&
	    strcmp(ev->type, TL_EV_PURGE_REQUESTED) != 0 &&
	    strcmp(ev->type, TL_EV_RESTORE_REQUESTED) != 0 &&
	    strcmp(ev->type, TL_EV_REVOCATION_REQUESTED) != 0)
		return 0;
	if (tl_bn_getstr(body, "grant", id, sizeof(id)) != 0)
		return TL_EMALFORMED;
	if (strcmp(ev->type, TL_EV_GRANT_ADOPTED) == 0)
		return fold_grant_adopted(t, p, ev, id, body, big);

	if (strcmp(ev->type, TL_EV_GRANT_REQUESTED) == 0) {
		uint64_t version = 0, naming = 0, pending = 0, aver = 0, aseq = 0;
		uint64_t aholders = 0;
		char from[sizeof(g.adopt_from)] = "";
		char ares[sizeof(g.adopt_resource)] = "";
		char aown[sizeof(g.adopt_owner)] = "";
		char alog[sizeof(g.adopt_login)] = "";
		char amig[sizeof(g.adopt_migrated)] = "";

		/*
		 * A grant requested again (its data was dropped) starts over,
		 * but its credential versions go on: every login name and
		 * every delivery stays distinct.
		 */
		if (tl_grant_get(t, p, id, &g, NULL) == 0) {
			old = g;
			had = 1;
			version = g.version;
			naming = g.naming;
			/* Adopted names stay the grant's (reactors/names.c). */
			memcpy(from, g.adopt_from, sizeof(from));
			memcpy(ares, g.adopt_resource, sizeof(ares));
			memcpy(aown, g.adopt_owner, sizeof(aown));
			memcpy(alog, g.adopt_login, sizeof(alog));
			memcpy(amig, g.adopt_migrated, sizeof(amig));
			pending = g.adopt_pending;
			aver = g.adopt_version;
			aseq = g.adopt_seq;
			aholders = g.adopt_holders;
			if ((rc = set_provider_index(t, p, &g, 0)) != 0 ||
			    (rc = forget_migrations(t, p, id)) != 0)
				return rc;
		}
		memset(&g, 0, sizeof(g));
		g.version = version;
		g.naming = naming;
		memcpy(g.adopt_from, from, sizeof(from));
		memcpy(g.adopt_resource, ares, sizeof(ares));
		memcpy(g.adopt_owner, aown, sizeof(aown));
		memcpy(g.adopt_login, alog, sizeof(alog));
		memcpy(g.adopt_migrated, amig, sizeof(amig));
		g.adopt_pending = pending;
		g.adopt_version = aver;
		g.adopt_seq = aseq;
		g.adopt_holders = aholders;
		snprintf(g.id, sizeof(g.id), "%s", id);
		tl_rec_getstr(body, "module", g.module, sizeof(g.module), big);
		tl_rec_getstr(body, "req", g.req, sizeof(g.req), big);
		tl_rec_getstr(body, "node", g.node, sizeof(g.node), big);
		tl_rec_getstr(body, "scope", g.scope, sizeof(g.scope), big);
		tl_rec_getstr(body, "type", g.type, sizeof(g.type), big);
		tl_rec_getstr(body, "provider", g.provider, sizeof(g.provider),
		    big);
		tl_rec_getstr(body, "resource", g.resource, sizeof(g.resource),
		    big);
		set_state(&g, TL_GRANT_REQUESTED, ev->seq);
		g.requested_seq = ev->seq;
		if (!had && (rc = take_adopt_claim(t, p, &g, big)) != 0)
			return rc;
		/*
		 * Logins by certificate: the login is the one of the first
		 * version of this request, for every version after it (a
		 * certificate keeps the name); a grant requested again
		 * gets another, so no certificate of before logs in.
		 */
		if (req_login(t, p, &g))
			g.cert_login = version + 1;
		/* of/OWNER/ID: the logins below an owner (its revocation's). */
		if (had && old.access != 0 && (g.access == 0 ||
		    strcmp(old.of, g.of) != 0) && (rc = tl_key(k, "of/%s/%s",
		    old.of, g.id)) == 0 && (rc = tl_kv_del(t, p->grants, k,
		    strlen(k))) != 0 && rc != TL_ENOTFOUND)
			return rc;
		if (g.access != 0 && ((rc = tl_key(k, "of/%s/%s", g.of,
		    g.id)) != 0 || (rc = tl_kv_put(t, p->grants, k, strlen(k),
		    "", 0)) != 0))
			return rc;
		if ((rc = tl_key(k, "gm/%s/%s", g.module, g.id)) != 0 ||
		    (rc = tl_kv_put(t, p->grants, k, strlen(k), "", 0)) != 0 ||
		    (rc = set_provider_index(t, p, &g, 1)) != 0 ||
		    (rc = tl_grant_work_index(t, p, had ? &old : NULL, &g,
		    0)) != 0)
			return rc;
		return tl_grant_put(t, p, ev->seq, &g);
	}

	rc = tl_grant_get(t, p, id, &g, NULL);
	if (rc == TL_ENOTFOUND)
		return 0;	/* a binding before its grant exists */
	if (rc != 0)
		return rc;
	old = g;
	/*
	 * Lost is final: its data is not reachable, so no late outcome of
	 * work begun before (a revocation retried, a create) changes it.
	 * Only a new grant.requested (tally rebind --empty) starts over.
	 */
	if (strcmp(g.state, TL_GRANT_LOST) == 0)
		return 0;

	if (strcmp(ev->type, TL_EV_BINDING_MADE) == 0) {
		char prov[sizeof(g.provider)];

		/* A re-bind before provisioning moves the request. */
		if (strcmp(g.state, TL_GRANT_REQUESTED) != 0)
			return 0;
		tl_rec_getstr(body, "provider", prov, sizeof(prov), big);
		if (strcmp(prov, g.provider) == 0)
			return 0;
		if ((rc = set_provider_index(t, p, &g, 0)) != 0)
			return rc;
		snprintf(g.provider, sizeof(g.provider), "%s", prov);
		if ((rc = set_provider_index(t, p, &g, 1)) != 0)
			return rc;
	} else if (strcmp(ev->type, TL_EV_GRANT_PROVISIONING) == 0) {
		/*
		 * A revocation is sticky: an intent, an outcome or a failure
		 * of work begun before it was requested records its facts
		 * but leaves the grant revoking, so the revocation is done
		 * next (never undone by a late create).
		 */
		if (strcmp(g.state, TL_GRANT_REVOKING) != 0)
			set_state(&g, TL_GRANT_PROVISIONING, ev->seq);
		g.intent_seq = ev->seq;
		g.version = tl_bn_getu64(body, "version", g.version);
		/*
		 * Intents from before names carried a digest name no scheme:
		 * 0 with a version is scheme 1 (reactors/names.c).
		 */
		g.naming = tl_bn_getu64(body, "naming", 0);
		tl_rec_getstr(body, "user", g.user, sizeof(g.user), big);
		/* A login below ownership: the owner's names, for good. */
		if (g.access != 0) {
			tl_rec_getstr(body, "resource", g.of_resource,
			    sizeof(g.of_resource), big);
			tl_rec_getstr(body, "owner", g.of_owner,
			    sizeof(g.of_owner), big);
		}
	} else if (strcmp(ev->type, TL_EV_GRANT_PROVISIONED) == 0) {
		struct tl_bnode f;

		if (strcmp(g.state, TL_GRANT_REVOKING) != 0)
			set_state(&g, TL_GRANT_PROVISIONED, ev->seq);
		g.version = tl_bn_getu64(body, "version", g.version);
		g.adopt_pending = 0;	/* its objects carry our marks now */
		{
			char h[16] = "";

			tl_rec_getstr(body, "holders", h, sizeof(h), big);
			if (strcmp(h, "working") == 0)
				g.adopt_holders = TL_GRANT_HOLDERS_WORKING;
			else if (strcmp(h, "failing") == 0)
				g.adopt_holders = TL_GRANT_HOLDERS_FAILING;
		}
		g.drift[0] = g.drift_reason[0] = '\0';
		g.attempts = 0;
		g.retry_ns = 0;
		g.reason[0] = '\0';
		if (tl_bn_get(body, "fields", &f) == 0) {
			tl_rec_getstr(f, "host", g.host, sizeof(g.host), big);
			tl_rec_getstr(f, "port", g.port, sizeof(g.port), big);
			tl_rec_getstr(f, TL_GRANT_OBJECT_KEY, g.object,
			    sizeof(g.object), big);
			tl_rec_getstr(f, "user", g.user, sizeof(g.user), big);
			tl_rec_getstr(f, "path", g.path, sizeof(g.path), big);
		}
	} else if (strcmp(ev->type, TL_EV_GRANT_FAILED) == 0) {
		/*
		 * The intent stands: provisioning is retried from it.  A
		 * failed revocation stays a revocation and is retried as one.
		 */
		char op[16] = "";

		tl_rec_getstr(body, "op", op, sizeof(op), big);
		tl_rec_getstr(body, "reason", g.reason, sizeof(g.reason), big);
		g.attempts++;
		g.retry_ns = tl_bn_getu64(body, "retry_ns", 0);
		if (strcmp(g.state, TL_GRANT_REVOKING) != 0 &&
		    strcmp(op, "revoke") != 0)
			set_state(&g, TL_GRANT_FAILED, ev->seq);
		else
			set_state(&g, TL_GRANT_REVOKING, ev->seq);
	} else if (strcmp(ev->type, TL_EV_GRANT_DRIFTED) == 0) {
		char kind[sizeof(g.drift)] = "";

		tl_rec_getstr(body, "kind", kind, sizeof(kind), big);
		if (strcmp(kind, TL_DRIFTK_PLAINTEXT) == 0)
			tl_rec_getstr(body, "reason", g.warning,
			    sizeof(g.warning), big);
		else {
			memcpy(g.drift, kind, sizeof(g.drift));
			tl_rec_getstr(body, "reason", g.drift_reason,
			    sizeof(g.drift_reason), big);
			g.drift_seq = ev->seq;
		}
	} else if (strcmp(ev->type, TL_EV_GRANT_REPAIRED) == 0) {
		char kind[sizeof(g.drift)] = "";

		tl_rec_getstr(body, "kind", kind, sizeof(kind), big);
		if (strcmp(kind, TL_DRIFTK_PLAINTEXT) == 0)
			g.warning[0] = '\0';
		else {
			g.drift[0] = g.drift_reason[0] = '\0';
			g.drift_seq = ev->seq;
			g.adopt_pending = 0;
		}
	} else if (strcmp(ev->type, TL_EV_GRANT_MISSING) == 0) {
		tl_rec_getstr(body, "reason", g.reason, sizeof(g.reason), big);
		snprintf(g.drift, sizeof(g.drift), "%s", TL_DRIFTK_MISSING);
		snprintf(g.drift_reason, sizeof(g.drift_reason), "%s",
		    g.reason);
		g.drift_seq = ev->seq;
		set_state(&g, TL_GRANT_MISSING, ev->seq);
	} else if (strcmp(ev->type, TL_EV_REPAIR_REQUESTED) == 0) {
		/* A recreated database is empty: its migrations run again. */
		if ((rc = forget_migrations(t, p, g.id)) != 0)
			return rc;
		g.blocked[0] = '\0';
		g.migration[0] = '\0';
		set_state(&g, TL_GRANT_REPAIRING, ev->seq);
	} else if (strcmp(ev->type, TL_EV_MIGRATION_APPLIED) == 0) {
		char sum[80] = "";

		tl_rec_getstr(body, "file", g.migration, sizeof(g.migration),
		    big);
		tl_rec_getstr(body, "checksum", sum, sizeof(sum), big);
		g.blocked[0] = '\0';
		g.migrated_seq = ev->seq;
		if ((rc = tl_key(k, "ma/%s/%s", g.id, g.migration)) != 0 ||
		    (rc = tl_kv_put(t, p->grants, k, strlen(k), sum,
		    strlen(sum))) != 0)
			return rc;
	} else if (strcmp(ev->type, TL_EV_MIGRATION_BLOCKED) == 0) {
		tl_rec_getstr(body, "reason", g.blocked, sizeof(g.blocked),
		    big);
	} else if (strcmp(ev->type, TL_EV_REVOCATION_REQUESTED) == 0) {
		tl_rec_getstr(body, "reason", g.reason, sizeof(g.reason), big);
		set_state(&g, TL_GRANT_REVOKING, ev->seq);
	} else if (strcmp(ev->type, TL_EV_GRANT_REVOKED) == 0) {
		tl_rec_getstr(body, "policy", g.policy, sizeof(g.policy), big);
		g.retained_bytes = tl_bn_getu64(body, "size", 0);
		set_state(&g, TL_GRANT_REVOKED, ev->seq);
	} else if (strcmp(ev->type, TL_EV_PURGE_REQUESTED) == 0) {
		set_state(&g, TL_GRANT_PURGING, ev->seq);
	} else if (strcmp(ev->type, TL_EV_GRANT_PURGED) == 0) {
		snprintf(g.policy, sizeof(g.policy), "drop");
		set_state(&g, TL_GRANT_PURGED, ev->seq);
	} else if (strcmp(ev->type, TL_EV_RESTORE_REQUESTED) == 0) {
		set_state(&g, TL_GRANT_RESTORING, ev->seq);
	} else if (strcmp(ev->type, TL_EV_GRANT_RESTORED) == 0) {
		g.policy[0] = '\0';
	} else if (strcmp(ev->type, TL_EV_GRANT_LOST) == 0) {
		char node[64] = "";

		tl_bn_getstr(body, "node", node, sizeof(node));
		snprintf(g.reason, sizeof(g.reason), "node %s is lost (tally "
		    "node lost): the data on %s is not reachable", node,
		    g.provider);
		set_state(&g, TL_GRANT_LOST, ev->seq);
	} else
		return 0;
	/* Just provisioned: its credential is for delivery. */
	if ((rc = tl_grant_work_index(t, p, &old, &g,
	    strcmp(ev->type, TL_EV_GRANT_PROVISIONED) == 0)) != 0)
		return rc;
	return tl_grant_put(t, p, ev->seq, &g);
}

/*
 * A string too long for the field that keeps it is never cut or
 * emptied: the fold fails (TL_ETOOBIG) and its transaction with it.
 */
int
tl_fold_grants(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	int big = 0, rc;

	rc = fold_grants_all(t, p, ev, body, &big);
	return rc != 0 ? rc : big ? TL_ETOOBIG : 0;
}
