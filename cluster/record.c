/*
 * record.c - the record's commit on etcd and its application to a home
 * (cluster.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/envelope.h"
#include "core/error.h"
#include "cluster/cluster-internal.h"

#define MAGIC		"tlc1"
#define HDR_LEN		24		/* magic, epoch, first, count */
#define SIG_OFF		HDR_LEN
#define EV_OFF		(HDR_LEN + TL_SIGN_LEN)
#define HEAD_LEN	(8 + TL_HASH_LEN)
/*
 * A chunk's size: large enough that a transaction of a thousand events
 * is a handful of keys, small enough that etcd's values stay modest.
 */
#define CHUNK_MAX	(128 * 1024)
/* What base64, JSON and the compares add to a request, at most. */
#define REQ_SLACK	(16 * 1024)
/* Chunks read per range while catching up. */
#define CATCH_CHUNKS	32

size_t
tl_cl_key(const struct tl_cl *cl, const char *rest, char *buf)
{
	int n = snprintf(buf, TL_CL_KEY_MAX, "%s%s", cl->prefix, rest);

	return n < 0 ? 0 : (size_t)n;
}

size_t
tl_cl_log_key(const struct tl_cl *cl, uint64_t seq, char *buf)
{
	int n = snprintf(buf, TL_CL_KEY_MAX, "%slog/%020llu", cl->prefix,
	    (unsigned long long)seq);

	return n < 0 ? 0 : (size_t)n;
}

void
tl_cl_err(struct tl_cl *cl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cl->lasterr, sizeof(cl->lasterr), fmt, ap);
	va_end(ap);
}

const char *
tl_cl_lasterr(const struct tl_cl *cl)
{
	return cl->lasterr;
}

uint64_t
tl_cl_epoch(const struct tl_cl *cl)
{
	return cl->epoch;
}

static int
cl_head_(struct tl_cl *cl, uint64_t *seqp, uint8_t hash[TL_HASH_LEN],
    int64_t *revp)
{
	struct tl_etcd_range r;
	char k[TL_CL_KEY_MAX];
	size_t kl = tl_cl_key(cl, "head", k);
	int rc;

	*seqp = 0;
	memset(hash, 0, TL_HASH_LEN);
	rc = tl_etcd_range(cl->e, k, kl, NULL, 0, 1, 0, 0, &r);
	if (rc != 0) {
		tl_cl_err(cl, "reading the cluster's head: %s",
		    tl_etcd_lasterr(cl->e));
		tl_etcd_range_free(&r);
		return rc;
	}
	if (revp != NULL)
		*revp = r.rev;
	cl->rev = r.rev;
	if (r.n == 1) {
		if (r.kvs[0].val_len != HEAD_LEN) {
			tl_cl_err(cl, "the cluster's head key holds %zu bytes, "
			    "not %d", r.kvs[0].val_len, HEAD_LEN);
			tl_etcd_range_free(&r);
			return TL_ECORRUPT;
		}
		*seqp = tl_get_be64(r.kvs[0].val);
		memcpy(hash, r.kvs[0].val + 8, TL_HASH_LEN);
	}
	tl_etcd_range_free(&r);
	return 0;
}

/* The signed bytes: the mesh id, the header, the events. */
static void
chunk_sign(const struct tl_cl *cl, uint8_t *ch, size_t len)
{
	uint8_t *m = malloc(32 + len);

	/* ENOMEM: a zero signature, which no follower accepts. */
	if (m == NULL) {
		memset(ch + SIG_OFF, 0, TL_SIGN_LEN);
		return;
	}
	memcpy(m, cl->c->mesh, 32);
	memcpy(m + 32, ch, HDR_LEN);
	memcpy(m + 32 + HDR_LEN, ch + EV_OFF, len - EV_OFF);
	tl_secret_sign(cl->sign_sk, m, 32 + len - TL_SIGN_LEN, ch + SIG_OFF);
	free(m);
}

static int
chunk_verify(const struct tl_cl *cl, const uint8_t *ch, size_t len)
{
	uint8_t *m;
	int rc;

	if ((m = malloc(32 + len)) == NULL)
		return ENOMEM;
	memcpy(m, cl->c->mesh, 32);
	memcpy(m + 32, ch, HDR_LEN);
	memcpy(m + 32 + HDR_LEN, ch + EV_OFF, len - EV_OFF);
	rc = tl_secret_verify(cl->sign_pk, m, 32 + len - TL_SIGN_LEN,
	    ch + SIG_OFF);
	free(m);
	return rc;
}

struct batch {
	struct tl_etcd_op *ops;
	uint8_t		**bufs;
	char		(*keys)[TL_CL_KEY_MAX];
	size_t		 n, cap;
};

static void
batch_free(struct batch *b)
{
	size_t i;

	for (i = 0; i < b->n; i++)
		free(b->bufs[i]);
	free(b->ops);
	free(b->bufs);
	free(b->keys);
	memset(b, 0, sizeof(*b));
}

static int
batch_add(struct batch *b)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 8;
		struct tl_etcd_op *o = realloc(b->ops, cap * sizeof(*o));
		uint8_t **u;
		char (*k)[TL_CL_KEY_MAX];

		if (o == NULL)
			return ENOMEM;
		b->ops = o;
		if ((u = realloc(b->bufs, cap * sizeof(*u))) == NULL)
			return ENOMEM;
		b->bufs = u;
		if ((k = realloc(b->keys, cap * sizeof(*k))) == NULL)
			return ENOMEM;
		b->keys = k;
		b->cap = cap;
	}
	memset(&b->ops[b->n], 0, sizeof(b->ops[0]));
	b->bufs[b->n] = NULL;
	b->n++;
	return 0;
}

/*
 * The chunks of events [0, count) into b (keys, signed values), and
 * the new head into head.  *bytes what the values weigh.
 */
static int
make_chunks(struct tl_cl *cl, uint64_t epoch, uint64_t first,
    const uint8_t prev[TL_HASH_LEN], const uint8_t *const *raws,
    const size_t *lens, size_t count, struct batch *b, uint8_t *head,
    size_t *bytes)
{
	uint8_t h[TL_HASH_LEN];
	size_t i = 0, j, len, total = 0;
	int rc;

	memcpy(h, prev, TL_HASH_LEN);
	while (i < count) {
		uint8_t *ch;

		/* Events i..j-1: as many as fit, at least one. */
		len = EV_OFF;
		for (j = i; j < count; j++) {
			if (j > i && len + 4 + lens[j] > CHUNK_MAX)
				break;
			if (lens[j] > UINT32_MAX - 8)
				return TL_ETOOBIG;
			len += 4 + lens[j];
		}
		if ((rc = batch_add(b)) != 0)
			return rc;
		if ((ch = malloc(len)) == NULL)
			return ENOMEM;
		b->bufs[b->n - 1] = ch;
		memcpy(ch, MAGIC, 4);
		tl_put_be64(ch + 4, epoch);
		tl_put_be64(ch + 12, first + i);
		ch[20] = (uint8_t)((j - i) >> 24);
		ch[21] = (uint8_t)((j - i) >> 16);
		ch[22] = (uint8_t)((j - i) >> 8);
		ch[23] = (uint8_t)(j - i);
		len = EV_OFF;
		for (; i < j; i++) {
			ch[len] = (uint8_t)(lens[i] >> 24);
			ch[len + 1] = (uint8_t)(lens[i] >> 16);
			ch[len + 2] = (uint8_t)(lens[i] >> 8);
			ch[len + 3] = (uint8_t)lens[i];
			memcpy(ch + len + 4, raws[i], lens[i]);
			len += 4 + lens[i];
			tl_log_chain_hash(h, raws[i], lens[i], h);
		}
		chunk_sign(cl, ch, len);
		b->ops[b->n - 1].kind = TL_ETCD_PUT;
		b->ops[b->n - 1].key = b->keys[b->n - 1];
		b->ops[b->n - 1].key_len = tl_cl_log_key(cl,
		    tl_get_be64(ch + 12), b->keys[b->n - 1]);
		b->ops[b->n - 1].val = ch;
		b->ops[b->n - 1].val_len = len;
		total += len;
	}
	tl_put_be64(head, first + count - 1);
	memcpy(head + 8, h, TL_HASH_LEN);
	*bytes = total;
	return 0;
}

/* After a transaction that did not hold: deposed, or behind. */
static int
why_not(struct tl_cl *cl, uint64_t epoch, uint64_t first)
{
	struct tl_cl_leader who;
	uint8_t hash[TL_HASH_LEN];
	uint64_t seq;
	int rc;

	if ((rc = tl_cl_leader(cl, &who)) != 0)
		return rc;
	if (who.epoch != epoch || strcmp(who.id, cl->c->id) != 0) {
		if (who.id[0] == '\0')
			tl_cl_err(cl, "deposed: no control plane leads now "
			    "(this one led at epoch %llu)",
			    (unsigned long long)epoch);
		else
			tl_cl_err(cl, "deposed: the leader is %s (%s, "
			    "control plane %.12s) at epoch %llu, not this "
			    "one at epoch %llu", who.name, who.home, who.id,
			    (unsigned long long)who.epoch,
			    (unsigned long long)epoch);
		return TL_ENOTLEADER;
	}
	if ((rc = tl_cl_head(cl, &seq, hash, NULL)) != 0)
		return rc;
	tl_cl_err(cl, "the cluster's record is at event %llu and this "
	    "home's at %llu: this home is behind it (tallyd applies the "
	    "rest; try again)", (unsigned long long)seq,
	    (unsigned long long)(first - 1));
	return TL_EUNAVAIL;
}

static int
cl_commit_raw_(struct tl_cl *cl, uint64_t first,
    const uint8_t prev[TL_HASH_LEN], const uint8_t *const *raws,
    const size_t *lens, size_t count)
{
	struct batch b = { 0 };
	struct tl_etcd_cmp cmp[2];
	uint8_t head[HEAD_LEN], ohead[HEAD_LEN];
	char lk[TL_CL_KEY_MAX], hk[TL_CL_KEY_MAX];
	size_t bytes = 0;
	uint64_t epoch = cl->epoch;
	int64_t rev;
	int rc, ok = 0;

	if (count == 0)
		return 0;
	cl->lasterr[0] = '\0';
	/* tallyd --commit: the CLI commits under its own leader's epoch. */
	if (epoch == 0) {
		struct tl_cl_leader who;

		if ((rc = tl_cl_leader(cl, &who)) != 0) {
			char m[sizeof(cl->lasterr)];

			snprintf(m, sizeof(m), "%s", cl->lasterr);
			tl_cl_err(cl, "the cluster cannot commit now (no etcd "
			    "quorum, or no member answers): nothing was "
			    "recorded (%.400s)", m);
			return rc;
		}
		if (strcmp(who.id, cl->c->id) != 0) {
			if (who.id[0] == '\0')
				tl_cl_err(cl, "no control plane leads the "
				    "cluster now: nothing is committed (start "
				    "tallyd, or wait for an election)");
			else
				tl_cl_err(cl, "this control plane does not "
				    "lead: the leader is %s (home %s, control "
				    "plane %.12s, epoch %llu); run the command "
				    "there", who.name, who.home, who.id,
				    (unsigned long long)who.epoch);
			return TL_ENOTLEADER;
		}
		epoch = who.epoch;
	}
	if ((rc = make_chunks(cl, epoch, first, prev, raws, lens, count, &b,
	    head, &bytes)) != 0)
		goto out;
	if (b.n + 1 > cl->c->max_ops ||
	    bytes / 3 * 4 + REQ_SLACK + b.n * 256 > cl->c->max_request) {
		tl_cl_err(cl, "%zu events (%zu bytes) are more than one etcd "
		    "request carries (max-txn-ops %u, max-request-bytes %u in "
		    "%s/cluster.json, as etcd is started with)", count, bytes,
		    cl->c->max_ops, cl->c->max_request, cl->home);
		rc = TL_ETOOBIG;
		goto out;
	}
	if ((rc = batch_add(&b)) != 0)
		goto out;
	b.ops[b.n - 1].kind = TL_ETCD_PUT;
	b.ops[b.n - 1].key = hk;
	b.ops[b.n - 1].key_len = tl_cl_key(cl, "head", hk);
	b.ops[b.n - 1].val = head;
	b.ops[b.n - 1].val_len = HEAD_LEN;
	memset(cmp, 0, sizeof(cmp));
	cmp[0].key = lk;
	cmp[0].key_len = tl_cl_key(cl, "leader", lk);
	cmp[0].target = TL_ETCD_CREATE;
	cmp[0].result = TL_ETCD_EQ;
	cmp[0].num = (int64_t)epoch;
	cmp[1].key = hk;
	cmp[1].key_len = b.ops[b.n - 1].key_len;
	if (first == 1) {
		cmp[1].target = TL_ETCD_CREATE;
		cmp[1].result = TL_ETCD_EQ;
		cmp[1].num = 0;
	} else {
		tl_put_be64(ohead, first - 1);
		memcpy(ohead + 8, prev, TL_HASH_LEN);
		cmp[1].target = TL_ETCD_VALUE;
		cmp[1].result = TL_ETCD_EQ;
		cmp[1].val = ohead;
		cmp[1].val_len = HEAD_LEN;
	}
	rc = tl_etcd_txn(cl->e, cmp, 2, b.ops, b.n, NULL, 0, &ok, &rev);
	if (rc != 0) {
		tl_cl_err(cl, "the cluster did not say it committed events "
		    "%llu-%llu%s: %.400s", (unsigned long long)first,
		    (unsigned long long)(first + count - 1), rc == TL_EUNAVAIL ?
		    " (no etcd quorum, or no member answers; if it did, "
		    "tallyd applies them)" : "", tl_etcd_lasterr(cl->e));
		goto out;
	}
	if (!ok) {
		rc = why_not(cl, epoch, first);
		goto out;
	}
	cl->rev = rev;
out:
	batch_free(&b);
	return rc;
}

int
tl_cl_commit(struct tl_txn *txn, uint64_t first,
    const uint8_t prev[TL_HASH_LEN], uint64_t last, void *arg)
{
	struct tl_cl *cl = arg;
	const uint8_t **raws;
	size_t *lens, n = (size_t)(last - first + 1), i;
	struct tl_event ev;
	int rc = 0;

	raws = calloc(n, sizeof(*raws));
	lens = calloc(n, sizeof(*lens));
	if (raws == NULL || lens == NULL) {
		rc = ENOMEM;
		goto out;
	}
	/* In place, in the map: valid until the transaction ends. */
	for (i = 0; i < n; i++) {
		if ((rc = tl_log_get(txn, first + i, &ev)) != 0)
			goto out;
		raws[i] = ev.raw;
		lens[i] = ev.raw_len;
	}
	rc = tl_cl_commit_raw(cl, first, prev, raws, lens, n);
out:
	free(raws);
	free(lens);
	return rc;
}

struct apply_arg {
	struct tl_cl		*cl;
	const struct tl_etcd_range *r;
	uint64_t		 head;
	int			 rc;
};

/* One range of chunks in one write transaction. */
static int
apply_cb(struct tl_txn *t, void *arg)
{
	struct apply_arg *aa = arg;
	struct tl_cl *cl = aa->cl;
	char why[TL_WHY_MAX];
	uint64_t head, seq;
	size_t i;
	int rc;

	if ((rc = tl_log_last(t, &head, NULL)) != 0)
		return rc;
	for (i = 0; i < aa->r->n; i++) {
		const struct tl_etcd_kv *kv = &aa->r->kvs[i];
		const uint8_t *ch = kv->val;
		uint64_t cfirst;
		uint32_t cnt, k, len;
		size_t off;

		if (kv->val_len < EV_OFF || memcmp(ch, MAGIC, 4) != 0) {
			tl_cl_err(cl, "%.*s: not a chunk of events",
			    (int)kv->key_len, (const char *)kv->key);
			return TL_ECORRUPT;
		}
		cfirst = tl_get_be64(ch + 12);
		cnt = (uint32_t)ch[20] << 24 | (uint32_t)ch[21] << 16 |
		    (uint32_t)ch[22] << 8 | ch[23];
		/* Committed here meanwhile (by this home's CLI): held. */
		if (cnt > 0 && cfirst <= head && cfirst + cnt - 1 <= head)
			continue;
		if (cfirst != head + 1) {
			tl_cl_err(cl, "the cluster's chunk %.*s starts at "
			    "event %llu; this home's next is %llu: %s",
			    (int)kv->key_len, (const char *)kv->key,
			    (unsigned long long)cfirst,
			    (unsigned long long)(head + 1), cfirst > head + 1 ?
			    "this home is behind the trimmed tail" :
			    "the chunks overlap");
			return cfirst > head + 1 ? TL_ECOMPACTED :
			    TL_ECORRUPT;
		}
		if (chunk_verify(cl, ch, kv->val_len) != 0) {
			tl_cl_err(cl, "the cluster's chunk of events %llu.. "
			    "does not carry the control plane's signature: "
			    "nothing of it is applied",
			    (unsigned long long)cfirst);
			return TL_ECORRUPT;
		}
		for (k = 0, off = EV_OFF; k < cnt; k++) {
			if (off + 4 > kv->val_len)
				goto short_;
			len = (uint32_t)ch[off] << 24 |
			    (uint32_t)ch[off + 1] << 16 |
			    (uint32_t)ch[off + 2] << 8 | ch[off + 3];
			off += 4;
			if (len > kv->val_len - off)
				goto short_;
			rc = tl_log_append_raw(t, ch + off, len, NULL, &seq,
			    why);
			if (rc != 0) {
				tl_cl_err(cl, "event %llu of the cluster's "
				    "record: %s", (unsigned long long)seq,
				    why[0] ? why : tl_strerror(rc));
				return rc == TL_ECONFLICT ? TL_ECORRUPT : rc;
			}
			off += len;
			head = seq;
		}
		if (off != kv->val_len)
			goto short_;
	}
	aa->head = head;
	return 0;
short_:
	tl_cl_err(cl, "the cluster's chunk %.*s is cut short or overlong",
	    (int)aa->r->kvs[i].key_len, (const char *)aa->r->kvs[i].key);
	return TL_ECORRUPT;
}

static int
local_head(struct tl_log *log, uint64_t *seqp, uint8_t hash[TL_HASH_LEN])
{
	struct tl_txn *t;
	int rc;

	if ((rc = tl_log_begin(log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	rc = tl_log_last(t, seqp, hash);
	tl_log_abort(t);
	return rc;
}

static int
cl_catch_up_(struct tl_cl *cl, struct tl_log *log, uint64_t *appliedp)
{
	struct tl_etcd_range r;
	struct apply_arg aa;
	uint8_t lhash[TL_HASH_LEN], chash[TL_HASH_LEN];
	uint8_t end[TL_CL_KEY_MAX];
	char from[TL_CL_KEY_MAX], pfx[TL_CL_KEY_MAX];
	uint64_t lseq, cseq;
	size_t fl, el;
	int rc;

again:
	/*
	 * This home's head first: a commit landing meanwhile (the CLI's,
	 * in this very home) is on etcd before it is here, so the
	 * cluster's head read second is never behind it.
	 */
	if ((rc = local_head(log, &lseq, lhash)) != 0)
		return rc;
	if ((rc = tl_cl_head(cl, &cseq, chash, NULL)) != 0)
		return rc;
	if (appliedp != NULL)
		*appliedp = lseq;
	/* An empty cluster: the founding home's leader pushes its record. */
	if (cseq == 0)
		return 0;
	if (cseq < lseq) {
		tl_cl_err(cl, "this home holds events up to %llu, the "
		    "cluster's record only up to %llu: this home is not a "
		    "copy of the cluster's (another mesh's, or the cluster "
		    "was made anew)", (unsigned long long)lseq,
		    (unsigned long long)cseq);
		return TL_ECORRUPT;
	}
	if (cseq == lseq) {
		if (memcmp(chash, lhash, TL_HASH_LEN) != 0) {
			tl_cl_err(cl, "event %llu differs between this home "
			    "and the cluster's record", (unsigned long long)
			    lseq);
			return TL_ECORRUPT;
		}
		return 0;
	}
	fl = tl_cl_log_key(cl, lseq + 1, from);
	tl_etcd_prefix_end(pfx, tl_cl_key(cl, "log/", pfx), end, &el);
	rc = tl_etcd_range(cl->e, from, fl, end, el, CATCH_CHUNKS, 0, 0, &r);
	if (rc != 0) {
		tl_cl_err(cl, "reading the cluster's record from event %llu: "
		    "%s", (unsigned long long)(lseq + 1),
		    tl_etcd_lasterr(cl->e));
		tl_etcd_range_free(&r);
		return rc;
	}
	cl->rev = r.rev;
	if (r.n == 0) {
		tl_etcd_range_free(&r);
		tl_cl_err(cl, "this home is behind the trimmed tail: it holds "
		    "events up to %llu and the cluster no longer holds the "
		    "next (its head is %llu); restore it from a snapshot of "
		    "a peer's home (tally snapshot, tally init "
		    "--from-snapshot)", (unsigned long long)lseq,
		    (unsigned long long)cseq);
		return TL_ECOMPACTED;
	}
	memset(&aa, 0, sizeof(aa));
	aa.cl = cl;
	aa.r = &r;
	rc = tl_log_write(log, apply_cb, &aa);
	tl_etcd_range_free(&r);
	if (rc == TL_ECOMPACTED) {
		char m[sizeof(cl->lasterr)];

		snprintf(m, sizeof(m), "%s", cl->lasterr);
		tl_cl_err(cl, "%.300s (restore it from a snapshot of a peer's "
		    "home: tally snapshot, tally init --from-snapshot)", m);
	}
	if (rc != 0)
		return rc;
	if (appliedp != NULL)
		*appliedp = aa.head;
	/* More, or the head moved meanwhile: the next round. */
	goto again;
}

static int
cl_push_(struct tl_cl *cl, struct tl_log *log)
{
	struct tl_txn *t;
	struct tl_event ev;
	uint8_t chash[TL_HASH_LEN], prev[TL_HASH_LEN];
	const uint8_t **raws = NULL;
	size_t *lens = NULL, n, bytes, cap = 0;
	uint64_t cseq, lseq, s;
	int rc;

	if ((rc = tl_cl_head(cl, &cseq, chash, NULL)) != 0)
		return rc;
	if ((rc = tl_log_begin(log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if ((rc = tl_log_last(t, &lseq, NULL)) != 0)
		goto out;
	if (cseq > lseq) {
		tl_cl_err(cl, "the cluster's record is ahead of this home "
		    "(%llu, %llu here): catch up first",
		    (unsigned long long)cseq, (unsigned long long)lseq);
		rc = TL_EUNAVAIL;
		goto out;
	}
	memset(prev, 0, sizeof(prev));
	if (cseq > 0) {
		if ((rc = tl_log_get(t, cseq, &ev)) != 0)
			goto out;
		if (memcmp(ev.hash, chash, TL_HASH_LEN) != 0) {
			tl_cl_err(cl, "event %llu differs between this home "
			    "and the cluster's record", (unsigned long long)
			    cseq);
			rc = TL_ECORRUPT;
			goto out;
		}
		memcpy(prev, ev.hash, TL_HASH_LEN);
	}
	s = cseq + 1;
	while (s <= lseq) {
		uint64_t first = s;

		/* As many as one request carries, by a conservative sum. */
		for (n = 0, bytes = 0; s <= lseq; s++, n++) {
			if ((rc = tl_log_get(t, s, &ev)) != 0)
				goto out;
			if (n > 0 && ((bytes + ev.raw_len + 4) / 3 * 4 +
			    2 * REQ_SLACK >= cl->c->max_request ||
			    (bytes + ev.raw_len) / CHUNK_MAX + 3 >=
			    cl->c->max_ops))
				break;
			if (n == cap) {
				size_t nc = cap ? 2 * cap : 256;
				const uint8_t **r2 = realloc(raws,
				    nc * sizeof(*r2));
				size_t *l2;

				if (r2 == NULL) {
					rc = ENOMEM;
					goto out;
				}
				raws = r2;
				if ((l2 = realloc(lens, nc * sizeof(*l2))) ==
				    NULL) {
					rc = ENOMEM;
					goto out;
				}
				lens = l2;
				cap = nc;
			}
			raws[n] = ev.raw;
			lens[n] = ev.raw_len;
			bytes += ev.raw_len + 4;
		}
		if ((rc = tl_cl_commit_raw(cl, first, prev, raws, lens,
		    n)) != 0)
			goto out;
		if ((rc = tl_log_get(t, first + n - 1, &ev)) != 0)
			goto out;
		memcpy(prev, ev.hash, TL_HASH_LEN);
	}
out:
	tl_log_abort(t);
	free(raws);
	free(lens);
	return rc;
}

static int
cl_wait_(struct tl_cl *cl, long ms)
{
	uint8_t end[TL_CL_KEY_MAX];
	size_t el;
	int64_t rev = 0;
	int rc;

	tl_etcd_prefix_end(cl->prefix, cl->plen, end, &el);
	rc = tl_etcd_watch(cl->e, cl->prefix, cl->plen, end, el, cl->rev + 1,
	    ms, &rev);
	/* Compacted past what we last read: read again now. */
	if (rc == TL_ECOMPACTED)
		return 0;
	if (rc != 0 && rc != TL_ETIMEDOUT)
		tl_cl_err(cl, "watching the cluster: %s",
		    tl_etcd_lasterr(cl->e));
	return rc;
}

/*
 * The caller's etcd handle is one connection: whichever thread commits
 * (the loop's, the publisher's) takes it in turn (cl->mu, recursive).
 */

int
tl_cl_head(struct tl_cl *cl, uint64_t *seqp, uint8_t hash[TL_HASH_LEN],
    int64_t *revp)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_head_(cl, seqp, hash, revp);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

int
tl_cl_commit_raw(struct tl_cl *cl, uint64_t first,
    const uint8_t prev[TL_HASH_LEN], const uint8_t *const *raws,
    const size_t *lens, size_t count)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_commit_raw_(cl, first, prev, raws, lens, count);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

int
tl_cl_catch_up(struct tl_cl *cl, struct tl_log *log, uint64_t *appliedp)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_catch_up_(cl, log, appliedp);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

int
tl_cl_push(struct tl_cl *cl, struct tl_log *log)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_push_(cl, log);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

int
tl_cl_wait(struct tl_cl *cl, long ms)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = cl_wait_(cl, ms);
	pthread_mutex_unlock(&cl->mu);
	return rc;
}
