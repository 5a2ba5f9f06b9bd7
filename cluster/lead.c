/*
 * lead.c - the leadership of a cluster (cluster.h): the lease and the
 * thread that renews it, the campaign, the followers' marks and the
 * trimming of the tail.
 *
 * The lease is what makes a leader's authority expire by itself: the
 * leader key is bound to it, and etcd deletes the key once the lease
 * lapses.  A leader acts (calls a provider) only until the moment the
 * lease could lapse, less a margin, counted on its own monotonic clock
 * from when it SENT the last renewal that succeeded: etcd extends the
 * lease from when it receives the request, later, so the leader's
 * reckoning is never behind etcd's.  The one assumption: the two
 * clocks run at the same rate to within the margin over a TTL (no
 * common time is needed).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/error.h"
#include "cluster/cluster-internal.h"

uint64_t
tl_cl_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int
tl_cl_open(const struct tl_cconf *c, const struct tl_key *key,
    const char *home, struct tl_cl **out)
{
	struct tl_etcd_conf ec;
	struct tl_cl *cl;
	int rc;

	*out = NULL;
	if ((cl = calloc(1, sizeof(*cl))) == NULL)
		return ENOMEM;
	cl->c = c;
	cl->key = key;
	{
		pthread_mutexattr_t ma;

		pthread_mutexattr_init(&ma);
		pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
		pthread_mutex_init(&cl->mu, &ma);
		pthread_mutexattr_destroy(&ma);
	}
	snprintf(cl->home, sizeof(cl->home), "%s", home);
	if (gethostname(cl->name, sizeof(cl->name) - 1) != 0)
		snprintf(cl->name, sizeof(cl->name), "?");
	cl->plen = (size_t)snprintf(cl->prefix, sizeof(cl->prefix),
	    "/tally/%s/", c->mesh);
	memset(&ec, 0, sizeof(ec));
	ec.endpoints = c->endpoints;
	ec.ca = c->ca[0] ? c->ca : NULL;
	ec.cert = c->cert[0] ? c->cert : NULL;
	ec.key = c->key[0] ? c->key : NULL;
	if ((rc = tl_etcd_open(&ec, &cl->e)) != 0 ||
	    (rc = tl_etcd_open(&ec, &cl->ka)) != 0) {
		tl_cl_close(cl);
		return rc;
	}
	if (key != NULL) {
		if ((cl->sign_sk = tl_secret_alloc(TL_SIGN_SECLEN)) == NULL) {
			tl_cl_close(cl);
			return ENOMEM;
		}
		tl_secret_cp_keypair(key, cl->sign_pk, cl->sign_sk);
	}
	*out = cl;
	return 0;
}

void
tl_cl_close(struct tl_cl *cl)
{
	if (cl == NULL)
		return;
	if (cl->thr_started) {
		atomic_store(&cl->stop, 1);
		pthread_join(cl->thr, NULL);
	}
	if (cl->sign_sk != NULL)
		tl_secret_free(cl->sign_sk);
	tl_etcd_close(cl->e);
	tl_etcd_close(cl->ka);
	pthread_mutex_destroy(&cl->mu);
	free(cl);
}

uint64_t
tl_cl_act_until(const struct tl_cl *cl)
{
	return atomic_load(&cl->act_until);
}

const _Atomic uint64_t *
tl_cl_act_until_ptr(const struct tl_cl *cl)
{
	return &cl->act_until;
}

int
tl_cl_lost(const struct tl_cl *cl)
{
	return atomic_load(&cl->lost);
}

static void
extend(struct tl_cl *cl, uint64_t sent, int64_t ttl)
{
	uint64_t until = sent + (uint64_t)ttl * 1000u;

	until = until > cl->c->margin_ms ? until - cl->c->margin_ms : 0;
	/* Only a leader that still holds it acts: never past a loss. */
	if (!atomic_load(&cl->lost))
		atomic_store(&cl->act_until, until);
}

/* A leader's lease that expired is lost for good. */
static void
lose(struct tl_cl *cl)
{
	atomic_store(&cl->lost, 1);
	atomic_store(&cl->act_until, 0);
}

static int
cl_renew_(struct tl_cl *cl)
{
	uint64_t sent = tl_cl_now_ms();
	int64_t ttl;
	int rc;

	rc = tl_etcd_lease_keepalive(cl->e, atomic_load(&cl->lease), &ttl);
	if (rc == 0)
		extend(cl, sent, ttl);
	else if (rc == TL_ENOTFOUND && cl->epoch != 0)
		lose(cl);
	return rc;
}

/*
 * Renews every TTL/4.  A lease found expired is lost for good when
 * this control plane led on it (deposed: tallyd exits); a follower's
 * is simply granted again.  A renewal that fails otherwise (etcd away)
 * extends nothing, so the time to act runs out by itself.
 */
static void *
renew_main(void *arg)
{
	struct tl_cl *cl = arg;
	uint64_t every = (uint64_t)cl->c->ttl * 1000u / 4, next;
	int64_t ttl, id;
	int rc;

	next = tl_cl_now_ms() + every;
	while (!atomic_load(&cl->stop)) {
		uint64_t now = tl_cl_now_ms(), sent;

		if (now < next) {
			struct timespec ts = { 0, 50 * 1000000L };

			nanosleep(&ts, NULL);
			continue;
		}
		sent = now;
		rc = tl_etcd_lease_keepalive(cl->ka, atomic_load(&cl->lease),
		    &ttl);
		if (rc == 0)
			extend(cl, sent, ttl);
		else if (rc == TL_ENOTFOUND) {
			if (cl->epoch != 0) {
				lose(cl);
				break;
			}
			if (tl_etcd_lease_grant(cl->ka, cl->c->ttl, &id,
			    &ttl) == 0)
				atomic_store(&cl->lease, id);
		}
		/* Failed: try again soon, the lease may still be alive. */
		next = tl_cl_now_ms() + (rc == 0 ? every : every / 4 + 1);
	}
	return NULL;
}

static int
cl_lease_start_(struct tl_cl *cl)
{
	int64_t id, ttl;
	int rc;

	uint64_t sent = tl_cl_now_ms();

	if (cl->thr_started)
		return 0;
	if ((rc = tl_etcd_lease_grant(cl->e, cl->c->ttl, &id, &ttl)) != 0) {
		tl_cl_err(cl, "cannot take a lease from the cluster: %s",
		    tl_etcd_lasterr(cl->e));
		return rc;
	}
	atomic_store(&cl->lease, id);
	/* Granted: it runs from no earlier than the request was sent. */
	extend(cl, sent, ttl);
	if ((rc = pthread_create(&cl->thr, NULL, renew_main, cl)) != 0)
		return rc;
	cl->thr_started = 1;
	return 0;
}

static int
cl_leader_(struct tl_cl *cl, struct tl_cl_leader *who)
{
	struct tl_etcd_range r;
	char k[TL_CL_KEY_MAX];
	size_t kl = tl_cl_key(cl, "leader", k);
	json_t *o;
	int rc;

	memset(who, 0, sizeof(*who));
	if ((rc = tl_etcd_range(cl->e, k, kl, NULL, 0, 1, 0, 0, &r)) != 0) {
		tl_cl_err(cl, "reading who leads: %s", tl_etcd_lasterr(cl->e));
		tl_etcd_range_free(&r);
		return rc;
	}
	if (r.n == 1 && (o = json_loadb((const char *)r.kvs[0].val,
	    r.kvs[0].val_len, 0, NULL)) != NULL) {
		const char *id = json_string_value(json_object_get(o, "id"));
		const char *nm = json_string_value(json_object_get(o, "name"));
		const char *hm = json_string_value(json_object_get(o, "home"));

		snprintf(who->id, sizeof(who->id), "%s", id ? id : "?");
		snprintf(who->name, sizeof(who->name), "%s", nm ? nm : "?");
		snprintf(who->home, sizeof(who->home), "%s", hm ? hm : "?");
		who->epoch = (uint64_t)r.kvs[0].create_rev;
		json_decref(o);
	} else if (r.n == 1) {
		snprintf(who->id, sizeof(who->id), "?");
		who->epoch = (uint64_t)r.kvs[0].create_rev;
	}
	tl_etcd_range_free(&r);
	return 0;
}

static int
cl_campaign_(struct tl_cl *cl, int *won, uint64_t *epochp)
{
	struct tl_etcd_cmp cmp;
	struct tl_etcd_op op;
	struct tl_cl_leader who;
	char k[TL_CL_KEY_MAX], *v;
	json_t *o;
	int64_t rev = 0;
	int rc, ok = 0;

	*won = 0;
	*epochp = 0;
	if (atomic_load(&cl->lost)) {
		tl_cl_err(cl, "the lease was lost");
		return TL_ENOTLEADER;
	}
	o = json_pack("{s:s,s:s,s:s}", "id", cl->c->id, "name", cl->name,
	    "home", cl->home);
	v = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) :
	    NULL;
	json_decref(o);
	if (v == NULL)
		return ENOMEM;
	memset(&cmp, 0, sizeof(cmp));
	memset(&op, 0, sizeof(op));
	cmp.key = k;
	cmp.key_len = tl_cl_key(cl, "leader", k);
	cmp.target = TL_ETCD_CREATE;
	cmp.result = TL_ETCD_EQ;
	cmp.num = 0;
	op.kind = TL_ETCD_PUT;
	op.key = k;
	op.key_len = cmp.key_len;
	op.val = v;
	op.val_len = strlen(v);
	op.lease = atomic_load(&cl->lease);
	rc = tl_etcd_txn(cl->e, &cmp, 1, &op, 1, NULL, 0, &ok, &rev);
	free(v);
	if (rc != 0) {
		tl_cl_err(cl, "campaigning: %s", tl_etcd_lasterr(cl->e));
		return rc;
	}
	if (ok) {
		/* The put's revision is the key's create_revision. */
		/*
		 * The put renewed nothing: the time to act is still what
		 * the last renewal that succeeded gave.
		 */
		cl->epoch = (uint64_t)rev;
		*won = 1;
		*epochp = cl->epoch;
		return 0;
	}
	if ((rc = tl_cl_leader(cl, &who)) != 0)
		return rc;
	*epochp = who.epoch;
	return 0;
}

static int
cl_resign_(struct tl_cl *cl)
{
	struct tl_etcd_cmp cmp;
	struct tl_etcd_op op;
	char k[TL_CL_KEY_MAX];
	int ok = 0, rc;

	if (cl->epoch == 0)
		return 0;
	atomic_store(&cl->act_until, 0);
	memset(&cmp, 0, sizeof(cmp));
	memset(&op, 0, sizeof(op));
	cmp.key = op.key = k;
	cmp.key_len = op.key_len = tl_cl_key(cl, "leader", k);
	cmp.target = TL_ETCD_CREATE;
	cmp.result = TL_ETCD_EQ;
	cmp.num = (int64_t)cl->epoch;
	op.kind = TL_ETCD_DEL;
	rc = tl_etcd_txn(cl->e, &cmp, 1, &op, 1, NULL, 0, &ok, NULL);
	cl->epoch = 0;
	return rc;
}

static int
cl_register_(struct tl_cl *cl, uint64_t seq)
{
	struct tl_etcd_op op;
	struct tl_etcd_cmp cmp;
	char k[TL_CL_KEY_MAX], rest[64];
	uint8_t v[8];
	int ok = 0, rc;

	/* Again under a lease granted anew: the old one took the mark. */
	if (seq == cl->registered && atomic_load(&cl->lease) == cl->reg_lease)
		return 0;
	snprintf(rest, sizeof(rest), "applied/%s", cl->c->id);
	memset(&op, 0, sizeof(op));
	memset(&cmp, 0, sizeof(cmp));
	op.kind = TL_ETCD_PUT;
	op.key = k;
	op.key_len = tl_cl_key(cl, rest, k);
	tl_put_be64(v, seq);
	op.val = v;
	op.val_len = sizeof(v);
	op.lease = atomic_load(&cl->lease);
	/* Unconditional: one txn of one put (the client has no bare put). */
	rc = tl_etcd_txn(cl->e, NULL, 0, &op, 1, NULL, 0, &ok, NULL);
	if (rc == 0) {
		cl->registered = seq;
		cl->reg_lease = op.lease;
	}
	return rc;
}

static int
cl_trim_(struct tl_cl *cl, uint64_t head, uint64_t *belowp)
{
	struct tl_etcd_range r;
	struct tl_etcd_op op;
	struct tl_etcd_cmp cmp;
	uint8_t end[TL_CL_KEY_MAX];
	char pfx[TL_CL_KEY_MAX], lk[TL_CL_KEY_MAX], bk[TL_CL_KEY_MAX];
	uint64_t bound, low = head, start = 0;
	size_t pl, el, i;
	int64_t rev = 0;
	int rc, ok = 0;

	if (belowp != NULL)
		*belowp = 0;
	/* The lowest mark of a follower still alive (its lease). */
	pl = tl_cl_key(cl, "applied/", pfx);
	tl_etcd_prefix_end(pfx, pl, end, &el);
	if ((rc = tl_etcd_range(cl->e, pfx, pl, end, el, 0, 0, 0, &r)) != 0)
		goto etcd;
	/* Not the leader's own, left from when it followed. */
	for (i = 0; i < r.n; i++)
		if (r.kvs[i].val_len == 8 && tl_get_be64(r.kvs[i].val) < low &&
		    strcmp((const char *)r.kvs[i].key + pl, cl->c->id) != 0)
			low = tl_get_be64(r.kvs[i].val);
	tl_etcd_range_free(&r);
	bound = low + 1;
	if (head + 1 < cl->c->keep)
		return 0;
	if (head + 1 - cl->c->keep < bound)
		bound = head + 1 - cl->c->keep;
	/* The chunk that holds bound stays: delete those before it. */
	pl = tl_cl_key(cl, "log/", pfx);
	tl_etcd_prefix_end(pfx, pl, end, &el);
	rc = tl_etcd_range(cl->e, pfx, pl, bk, tl_cl_log_key(cl, bound + 1,
	    bk), 0, 0, 1, &r);
	if (rc != 0)
		goto etcd;
	if (r.n >= 2)
		start = strtoull((const char *)r.kvs[r.n - 1].key + pl, NULL,
		    10);
	tl_etcd_range_free(&r);
	if (start == 0)
		return 0;
	memset(&op, 0, sizeof(op));
	memset(&cmp, 0, sizeof(cmp));
	op.kind = TL_ETCD_DEL;
	op.key = pfx;
	op.key_len = pl;
	op.end = lk;
	op.end_len = tl_cl_log_key(cl, start, lk);
	/* Only a leader trims: the delete holds only at its epoch. */
	cmp.key = bk;
	cmp.key_len = tl_cl_key(cl, "leader", bk);
	cmp.target = TL_ETCD_CREATE;
	cmp.result = TL_ETCD_EQ;
	cmp.num = (int64_t)cl->epoch;
	if ((rc = tl_etcd_txn(cl->e, &cmp, 1, &op, 1, NULL, 0, &ok,
	    &rev)) != 0)
		goto etcd;
	if (!ok)
		return TL_ENOTLEADER;
	/* The history of the deleted keys goes too: etcd stays small. */
	if ((rc = tl_etcd_compact(cl->e, rev, 0)) != 0 &&
	    rc != TL_ECOMPACTED)
		goto etcd;
	if (belowp != NULL)
		*belowp = start;
	return 0;
etcd:
	tl_cl_err(cl, "trimming the tail: %s", tl_etcd_lasterr(cl->e));
	tl_etcd_range_free(&r);
	return rc;
}

/*
 * The caller's etcd handle is one connection: whichever thread commits
 * (the loop's, the publisher's) takes it in turn (cl->mu, recursive).
 */

int
tl_cl_renew(struct tl_cl *cl)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_renew_(cl);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

int
tl_cl_lease_start(struct tl_cl *cl)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_lease_start_(cl);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

int
tl_cl_leader(struct tl_cl *cl, struct tl_cl_leader *who)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_leader_(cl, who);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

int
tl_cl_campaign(struct tl_cl *cl, int *won, uint64_t *epochp)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_campaign_(cl, won, epochp);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

int
tl_cl_resign(struct tl_cl *cl)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_resign_(cl);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

int
tl_cl_register(struct tl_cl *cl, uint64_t seq)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_register_(cl, seq);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

int
tl_cl_marks(struct tl_cl *cl, tl_cl_mark_fn fn, void *arg)
{
	struct tl_etcd_range r;
	uint8_t end[TL_CL_KEY_MAX];
	char pfx[TL_CL_KEY_MAX], id[TL_CL_KEY_MAX];
	size_t pl, el, i, n;
	int rc;

	pthread_mutex_lock(&cl->mu);
	pl = tl_cl_key(cl, "applied/", pfx);
	tl_etcd_prefix_end(pfx, pl, end, &el);
	rc = tl_etcd_range(cl->e, pfx, pl, end, el, 0, 0, 0, &r);
	pthread_mutex_unlock(&cl->mu);
	if (rc != 0)
		return rc;
	for (i = 0; rc == 0 && i < r.n; i++) {
		if (r.kvs[i].val_len != 8 || r.kvs[i].key_len <= pl ||
		    (n = r.kvs[i].key_len - pl) >= sizeof(id))
			continue;
		memcpy(id, (const char *)r.kvs[i].key + pl, n);
		id[n] = '\0';
		if (strcmp(id, cl->c->id) != 0)
			rc = fn(id, tl_get_be64(r.kvs[i].val), arg);
	}
	tl_etcd_range_free(&r);
	return rc;
}

int
tl_cl_trim(struct tl_cl *cl, uint64_t head, uint64_t *belowp)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_trim_(cl, head, belowp);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}
