/*
 * rotation.c - the rotation fold (see rotation.h for the saga).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "events.h"
#include "grant.h"
#include "rotation.h"

#define ROT_STR(X)	X(grant) X(state) X(reason)
#define ROT_U64(X)	X(from) X(to) X(started_seq) X(started_ns) \
			X(deadline_ns) X(issued_seq)

static int
rot_put(struct tl_txn *t, const struct tl_proj *p, uint64_t seq,
    const struct tl_rotation *r)
{
	struct tl_body b;
	const void *enc;
	size_t len;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "rot/%s", r->grant)) != 0)
		return rc;
	tl_body_init(&b);
#define PS(f) tl_body_str(&b, #f, r->f);
#define PU(f) tl_body_u64(&b, #f, r->f);
	ROT_STR(PS)
	ROT_U64(PU)
	if ((rc = tl_body_finish(&b, &enc, &len)) == 0)
		rc = tl_rec_put(t, p->grants, k, seq, enc, len);
	tl_body_free(&b);
	return rc;
}

static void
rot_decode(struct tl_bnode m, struct tl_rotation *r)
{
	memset(r, 0, sizeof(*r));
#define GS(f) tl_bn_getstr(m, #f, r->f, sizeof(r->f));
#define GU(f) r->f = tl_bn_getu64(m, #f, 0);
	ROT_STR(GS)
	ROT_U64(GU)
}

int
tl_rot_get(struct tl_txn *t, const struct tl_proj *p, const char *grant,
    struct tl_rotation *r)
{
	struct tl_rec rec;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "rot/%s", grant)) != 0)
		return rc;
	if ((rc = tl_rec_get(t, p->grants, k, &rec)) != 0)
		return rc;
	rot_decode(rec.m, r);
	tl_rec_close(&rec);
	return 0;
}

struct each {
	tl_rot_fn	 fn;
	void		*arg;
};

static int
each_one(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct each *e = arg;
	struct tl_rotation r;
	struct tl_rec rec;
	int rc;

	(void)rest;
	if ((rc = tl_rec_open(val, vlen, &rec)) != 0)
		return rc;
	rot_decode(rec.m, &r);
	tl_rec_close(&rec);
	return e->fn(&r, e->arg);
}

int
tl_rot_each(struct tl_txn *t, const struct tl_proj *p, tl_rot_fn fn,
    void *arg)
{
	struct each e = { fn, arg };

	return tl_rec_scan(t, p->grants, "rot/", each_one, &e);
}

int
tl_rot_acked(struct tl_txn *t, const struct tl_proj *p, const char *grant,
    uint64_t version, const char *holder)
{
	char k[TL_KEY_MAX];

	if (tl_key(k, "ack/%s/%llu/%s", grant, (unsigned long long)version,
	    holder) != 0)
		return 0;
	return tl_kv_get(t, p->grants, k, strlen(k), &(const void *){ NULL },
	    &(size_t){ 0 }) == 0;
}

static int
put_u64(struct tl_txn *t, tl_kv kv, const char *key, uint64_t v)
{
	uint8_t b[8];

	tl_put_be64(b, v);
	return tl_kv_put(t, kv, key, strlen(key), b, 8);
}

uint64_t
tl_rot_max_age(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g)
{
	return tl_grant_max_age(t, p, g);
}

uint64_t
tl_rot_cut_off(struct tl_txn *t, const struct tl_proj *p, const char *grant,
    const char *holder)
{
	const void *v;
	size_t n;
	char k[TL_KEY_MAX];

	if (tl_key(k, "co/%s/%s", grant, holder) != 0 ||
	    tl_kv_get(t, p->grants, k, strlen(k), &v, &n) != 0 || n != 8)
		return 0;
	return tl_get_be64(v);
}

int
tl_rot_version_intent(struct tl_txn *t, const struct tl_proj *p,
    const char *grant, uint64_t version, uint64_t *seq)
{
	const void *v;
	size_t n;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "cv/%s/%llu", grant,
	    (unsigned long long)version)) != 0)
		return rc;
	if ((rc = tl_kv_get(t, p->grants, k, strlen(k), &v, &n)) != 0)
		return rc;
	if (n != 8)
		return TL_ECORRUPT;
	*seq = tl_get_be64(v);
	return 0;
}

int
tl_adm_get(struct tl_txn *t, const struct tl_proj *p, const char *id,
    uint64_t *started_seq, uint64_t *issued_seq)
{
	const void *v;
	size_t n;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "adm/%s", id)) != 0)
		return rc;
	if ((rc = tl_kv_get(t, p->grants, k, strlen(k), &v, &n)) != 0)
		return rc;
	if (n != 16)
		return TL_ECORRUPT;
	*started_seq = tl_get_be64(v);
	*issued_seq = tl_get_be64((const uint8_t *)v + 8);
	return 0;
}

static int
fold_admin(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	char id[140];
	uint8_t v[16];
	uint64_t started, issued;
	char k[TL_KEY_MAX];
	int rc;

	if (tl_bn_getstr(body, "id", id, sizeof(id)) != 0)
		return TL_EMALFORMED;
	if ((rc = tl_key(k, "adm/%s", id)) != 0)
		return rc;
	if (strcmp(ev->type, TL_EV_ADM_STARTED) == 0) {
		tl_put_be64(v, ev->seq);
		tl_put_be64(v + 8, 0);
		return tl_kv_put(t, p->grants, k, strlen(k), v, 16);
	}
	if (strcmp(ev->type, TL_EV_ADM_ISSUED) == 0) {
		if (tl_adm_get(t, p, id, &started, &issued) != 0)
			return 0;
		tl_put_be64(v, started);
		tl_put_be64(v + 8, ev->seq);
		return tl_kv_put(t, p->grants, k, strlen(k), v, 16);
	}
	if (strcmp(ev->type, TL_EV_ADM_COMPLETED) == 0)
		return tl_kv_del(t, p->grants, k, strlen(k));
	return 0;
}

/* A rotation of grant began or ended: its due time again (grant.h). */
static int
reschedule(struct tl_txn *t, const struct tl_proj *p, const char *grant)
{
	struct tl_grant g;
	int rc;

	if ((rc = tl_grant_get(t, p, grant, &g, NULL)) == TL_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	return tl_grant_due_index(t, p, &g);
}

/*
 * A certificate issued: crn/GRANT, the version and the earliest
 * renewal point (renew_at, ns) of that version's certificates, which
 * makes the grant due (grants.c: rotation_due).  Older versions' do
 * not count: their renewal is the one that made the grant's version.
 */
static int
fold_renewal(struct tl_txn *t, const struct tl_proj *p, struct tl_bnode body)
{
	char grant[201], k[TL_KEY_MAX];
	uint64_t version = tl_bn_getu64(body, "version", 0), at, had_v = 0;
	/* Seconds; a time before the epoch (never written) is none. */
	uint64_t s = tl_bn_getu64(body, "renew_at", 0);
	const void *v;
	size_t n;
	uint8_t b[16];
	int rc;

	if (tl_bn_getstr(body, "grant", grant, sizeof(grant)) != 0)
		return TL_EMALFORMED;
	if (s == 0 || version == 0)
		return 0;	/* none said: never due for it */
	at = s > UINT64_MAX / 1000000000u ? UINT64_MAX : s * 1000000000u;
	if ((rc = tl_key(k, "crn/%s", grant)) != 0)
		return rc;
	if (tl_kv_get(t, p->grants, k, strlen(k), &v, &n) == 0 && n == 16) {
		had_v = tl_get_be64(v);
		if (had_v > version || (had_v == version &&
		    tl_get_be64((const uint8_t *)v + 8) <= at))
			return 0;
	}
	tl_put_be64(b, version);
	tl_put_be64(b + 8, at);
	if ((rc = tl_kv_put(t, p->grants, k, strlen(k), b, 16)) != 0)
		return rc;
	return reschedule(t, p, grant);
}

static int
fold_rotation_all(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body, int *big)
{
	struct tl_rotation r;
	char grant[201];
	char k[TL_KEY_MAX];
	int rc;

	if (strncmp(ev->type, "admin.", 6) == 0)
		return fold_admin(t, p, ev, body);
	if (strcmp(ev->type, TL_EV_CERT_ISSUED) == 0)
		return fold_renewal(t, p, body);

	if (strncmp(ev->type, "rotation.", 9) != 0 &&
	    strcmp(ev->type, TL_EV_CRED_ISSUED) != 0 &&
	    strcmp(ev->type, TL_EV_CRED_ACTIVATED) != 0 &&
	    strcmp(ev->type, TL_EV_CRED_ACKED) != 0 &&
	    strcmp(ev->type, TL_EV_CRED_RETIRED) != 0 &&
	    strcmp(ev->type, "grant.provisioning") != 0)
		return 0;
	if (tl_bn_getstr(body, "grant", grant, sizeof(grant)) != 0)
		return TL_EMALFORMED;

	if (strcmp(ev->type, "grant.provisioning") == 0) {
		/* Every version's intent, by version, for retirement. */
		if ((rc = tl_key(k, "cv/%s/%llu", grant, (unsigned long long)
		    tl_bn_getu64(body, "version", 0))) != 0)
			return rc;
		return put_u64(t, p->grants, k, ev->seq);
	}
	if (strcmp(ev->type, TL_EV_ROT_STARTED) == 0) {
		memset(&r, 0, sizeof(r));
		snprintf(r.grant, sizeof(r.grant), "%s", grant);
		snprintf(r.state, sizeof(r.state), TL_ROT_STARTED);
		tl_rec_getstr(body, "reason", r.reason, sizeof(r.reason), big);
		r.from = tl_bn_getu64(body, "from", 0);
		r.to = tl_bn_getu64(body, "to", 0);
		r.deadline_ns = tl_bn_getu64(body, "deadline_ns", 0);
		r.started_seq = ev->seq;
		r.started_ns = ev->ts;
		if ((rc = rot_put(t, p, ev->seq, &r)) != 0)
			return rc;
		return reschedule(t, p, grant);	/* running: not due */
	}
	if (strcmp(ev->type, TL_EV_CRED_ACKED) == 0) {
		char holder[140];

		if (tl_bn_getstr(body, "holder", holder, sizeof(holder)) != 0)
			return TL_EMALFORMED;
		uint64_t ver = tl_bn_getu64(body, "version", 0), co;

		if ((rc = tl_key(k, "ack/%s/%llu/%s", grant,
		    (unsigned long long)ver, holder)) != 0 ||
		    (rc = put_u64(t, p->grants, k, ev->seq)) != 0)
			return rc;
		/* A holder cut off is back once it runs with that version. */
		co = tl_rot_cut_off(t, p, grant, holder);
		if (co == 0 || ver < co)
			return 0;
		if ((rc = tl_key(k, "co/%s/%s", grant, holder)) != 0)
			return rc;
		return tl_kv_del(t, p->grants, k, strlen(k));
	}
	if ((rc = tl_rot_get(t, p, grant, &r)) == TL_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	if (strcmp(ev->type, TL_EV_CRED_ISSUED) == 0) {
		snprintf(r.state, sizeof(r.state), TL_ROT_ISSUED);
		r.issued_seq = ev->seq;
		if ((rc = tl_key(k, "cv/%s/%llu", grant,
		    (unsigned long long)r.to)) != 0 ||
		    (rc = put_u64(t, p->grants, k, ev->seq)) != 0)
			return rc;
		return rot_put(t, p, ev->seq, &r);
	}
	if (strcmp(ev->type, TL_EV_CRED_ACTIVATED) == 0) {
		struct tl_grant g;

		snprintf(r.state, sizeof(r.state), TL_ROT_ACTIVE);
		if ((rc = rot_put(t, p, ev->seq, &r)) != 0)
			return rc;
		/* From here on the grant's credential is the new one. */
		if ((rc = tl_grant_get(t, p, grant, &g, NULL)) != 0)
			return rc;
		g.version = r.to;
		g.intent_seq = r.issued_seq;
		tl_rec_getstr(body, "user", g.user, sizeof(g.user), big);
		/* A new credential to deliver (gd/, grant.h). */
		if ((rc = tl_grant_work_index(t, p, &g, &g, 1)) != 0)
			return rc;
		return tl_grant_put(t, p, ev->seq, &g);
	}
	if (strcmp(ev->type, TL_EV_ROT_COMPLETED) == 0 ||
	    strcmp(ev->type, TL_EV_ROT_ABANDONED) == 0) {
		if ((rc = tl_key(k, "rot/%s", grant)) != 0 ||
		    (rc = tl_kv_del(t, p->grants, k, strlen(k))) != 0)
			return rc;
		return reschedule(t, p, grant);	/* due again, from now on */
	}
	if (strcmp(ev->type, TL_EV_CRED_RETIRED) == 0) {
		struct tl_bnode arr, fb;
		size_t i;
		int forced = 0;

		/* Who was cut off, and which version they must take. */
		if (tl_bn_get(body, "forced", &fb) != 0 ||
		    tl_bn_bool(fb, &forced) != 0 || !forced ||
		    tl_bn_get(body, "cut_off", &arr) != 0)
			return 0;
		for (i = 0; i < tl_bn_len(arr); i++) {
			char holder[140];
			const char *h;
			size_t hl;

			if (tl_bn_str(tl_bn_at(arr, i), &h, &hl) != 0 ||
			    hl >= sizeof(holder))
				continue;
			memcpy(holder, h, hl);
			holder[hl] = '\0';
			if ((rc = tl_key(k, "co/%s/%s", grant, holder)) != 0 ||
			    (rc = put_u64(t, p->grants, k, r.to)) != 0)
				return rc;
		}
	}
	return 0;	/* otherwise credential.retired is a fact for history */
}

/*
 * A string too long for the field that keeps it is never cut or
 * emptied: the fold fails (TL_ETOOBIG) and its transaction with it.
 */
int
tl_fold_rotation(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	int big = 0, rc;

	rc = fold_rotation_all(t, p, ev, body, &big);
	return rc != 0 ? rc : big ? TL_ETOOBIG : 0;
}
