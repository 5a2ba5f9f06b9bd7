/*
 * rebuild.c - folding a range of the log, on two threads when it is
 * long: the catch-up to the head, a rebuild, and the whole log again
 * in steps.  Each event goes through tl_proj_apply (proj.c).
 *
 * A rebuild reads a million events and writes a few million records.
 * Reading (walking the log, decoding and checking each envelope) needs
 * only a read transaction, so a second thread does it into a ring of
 * decoded events while the caller's thread folds them into the write
 * transaction; LMDB allows one writer beside any number of readers.
 * The reader also holds each event to the catalogue (tl_proj_check),
 * which needs no table, so the folder is left the folds alone.
 * The reader's transaction is begun and ended inside each fold, so the
 * event pointers it hands over stay valid exactly as long as they are
 * used, and a map grown between steps is never under a live reader.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "proj-internal.h"

#define RING	4096		/* decoded events in flight */
#define BATCH	256		/* handed over at once: one lock per batch */
#define THREADED 4096		/* shorter ranges: not worth a thread */
#define PREFETCH_MAX 1024	/* of the next event's body */

/* An event read, and tl_proj_check's verdict on it. */
struct slot {
	struct tl_event			 ev;
	const struct tl_cat_event	*e;
	int				 rc;
};

struct feed {
	struct tl_txn	*rt;		/* the reader's transaction */
	uint64_t	 from, to;
	pthread_mutex_t	 mu;
	pthread_cond_t	 filled, drained;
	struct slot	*ring;
	uint64_t	 head;		/* events published */
	uint64_t	 tail;		/* events taken */
	int		 eof;		/* nothing after head */
	int		 rc;		/* why the reader stopped */
	uint64_t	 errseq;	/* the event it refers to */
	int		 stop;		/* the folder gave up */
};

static void *
reader(void *arg)
{
	struct feed *f = arg;
	struct tl_filter flt = { 0 };
	struct tl_iter *it;
	uint64_t mine, room;
	int rc, stop = 0;

	flt.from = f->from;
	flt.to = f->to;
	flt.chain = 1;		/* nothing is folded past a bad event */
	if ((rc = tl_iter_open(f->rt, &flt, &it)) != 0)
		goto out;
	mine = 0;
	rc = 0;
	while (rc == 0 && !stop) {
		/* Fill up to a batch of free slots without the lock. */
		pthread_mutex_lock(&f->mu);
		while ((room = RING - (mine - f->tail)) == 0 && !f->stop)
			pthread_cond_wait(&f->drained, &f->mu);
		stop = f->stop;
		pthread_mutex_unlock(&f->mu);
		if (room > BATCH)
			room = BATCH;
		while (!stop && room-- > 0 && (rc = tl_iter_next(it,
		    &f->ring[mine % RING].ev)) == 0) {
			struct slot *sl = &f->ring[mine % RING];

			sl->rc = tl_proj_check(&sl->ev, &sl->e);
			mine++;
		}
		pthread_mutex_lock(&f->mu);
		f->head = mine;
		pthread_cond_signal(&f->filled);
		pthread_mutex_unlock(&f->mu);
	}
	if (rc != 0 && rc != TL_EEOF)
		f->errseq = tl_iter_errseq(it);
	tl_iter_close(it);
out:
	pthread_mutex_lock(&f->mu);
	f->rc = rc == TL_EEOF ? 0 : rc;
	f->eof = 1;
	pthread_cond_signal(&f->filled);
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

/* The same on the caller's thread, from t itself. */
static int
fold_here(struct tl_txn *t, const struct tl_proj *p, uint64_t from,
    uint64_t to, uint64_t *atp, uint64_t *badp)
{
	struct tl_filter f = { 0 };
	struct tl_iter *it;
	struct tl_event ev;
	int rc;

	f.from = from;
	f.to = to;
	f.chain = 1;		/* nothing is folded past a bad event */
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		if ((rc = tl_proj_apply(t, p, &ev)) != 0) {
			*badp = ev.seq;
			break;
		}
		*atp = ev.seq;
	}
	if (rc != 0 && rc != TL_EEOF && *badp == 0)
		*badp = tl_iter_errseq(it);
	tl_iter_close(it);
	return rc == TL_EEOF ? 0 : rc;
}

int
tl_proj_fold(struct tl_txn *t, const struct tl_proj *p, uint64_t from,
    uint64_t to, uint64_t *atp, uint64_t *badp)
{
	struct feed f;
	pthread_t th;
	uint64_t avail, got = 0, seen = 0;
	int rc, eof;

	if (to < from)
		return 0;
	if (to - from < THREADED)
		return fold_here(t, p, from, to, atp, badp);
	memset(&f, 0, sizeof(f));
	f.from = from;
	f.to = to;
	if ((rc = tl_log_begin(tl_txn_log(t), TL_TXN_RDONLY, &f.rt)) != 0)
		return rc;
	/*
	 * Events appended in t itself are not in the reader's snapshot:
	 * then the whole range is read here.
	 */
	if ((rc = tl_log_last(f.rt, &seen, NULL)) != 0 || seen < to ||
	    (f.ring = calloc(RING, sizeof(*f.ring))) == NULL) {
		tl_log_abort(f.rt);
		if (rc != 0)
			return rc;
		return fold_here(t, p, from, to, atp, badp);
	}
	pthread_mutex_init(&f.mu, NULL);
	pthread_cond_init(&f.filled, NULL);
	pthread_cond_init(&f.drained, NULL);
	if (pthread_create(&th, NULL, reader, &f) != 0) {
		/* No thread to be had: this one reads too. */
		rc = fold_here(t, p, from, to, atp, badp);
		goto out;
	}
	for (;;) {
		pthread_mutex_lock(&f.mu);
		f.tail = got;
		pthread_cond_signal(&f.drained);
		while ((avail = f.head - got) == 0 && !f.eof)
			pthread_cond_wait(&f.filled, &f.mu);
		eof = f.eof && avail == 0;
		pthread_mutex_unlock(&f.mu);
		if (eof)
			break;
		for (; avail > 0; avail--, got++) {
			const struct slot *sl = &f.ring[got % RING];
			const struct tl_event *ev = &sl->ev;

			/*
			 * The reader's core read the next body (in the map),
			 * not this one: ask for its lines while this event
			 * folds.
			 */
			if (avail > 1) {
				const struct tl_event *nx =
				    &f.ring[(got + 1) % RING].ev;
				size_t off;

				for (off = 0; off < nx->body_len &&
				    off < PREFETCH_MAX; off += 64)
					__builtin_prefetch(nx->body + off);
			}
			if ((rc = sl->rc) != 0 ||
			    (rc = tl_proj_apply_checked(t, p, ev, sl->e)) != 0) {
				*badp = ev->seq;
				break;
			}
			*atp = ev->seq;
		}
		if (rc != 0)
			break;
	}
	pthread_mutex_lock(&f.mu);
	f.stop = 1;
	pthread_cond_signal(&f.drained);
	pthread_mutex_unlock(&f.mu);
	pthread_join(th, NULL);
	if (rc == 0 && (rc = f.rc) != 0)
		*badp = f.errseq;
out:
	pthread_cond_destroy(&f.drained);
	pthread_cond_destroy(&f.filled);
	pthread_mutex_destroy(&f.mu);
	tl_log_abort(f.rt);
	free(f.ring);
	return rc;
}

struct step_arg {
	struct tl_log	*log;
	uint64_t	 step;
	uint64_t	 base;		/* the checkpoint the step began at */
	uint64_t	 at, last;
	uint64_t	 bad;
};

static int
drop_cb(struct tl_txn *t, void *arg)
{
	int rc;

	(void)arg;
	if ((rc = tl_kv_drop_all(t)) != 0)
		return rc;
	return tl_ckpt_set(t, TL_PROJ_CKPT, 0);
}

static int
step_cb(struct tl_txn *t, void *arg)
{
	struct step_arg *sa = arg;
	struct tl_proj p;
	uint64_t at = 0, to;
	int rc;

	/* Read again each step: a reader may have folded the rest. */
	if ((rc = tl_ckpt_get(t, TL_PROJ_CKPT, &at)) != 0 &&
	    rc != TL_ENOTFOUND)
		return rc;
	if ((rc = tl_log_last(t, &sa->last, NULL)) != 0)
		return rc;
	sa->base = sa->at = at;
	if (at >= sa->last)
		return tl_proj_catchup(t, 0);	/* opens the tables */
	to = sa->last - at > sa->step ? at + sa->step : sa->last;
	if ((rc = tl_proj_open(t, &p)) != 0 ||
	    (rc = tl_proj_fold(t, &p, at + 1, to, &sa->at, &sa->bad)) != 0)
		return rc;
	if (sa->at == at)
		return TL_ECORRUPT;	/* the head is past events not there */
	return tl_ckpt_set(t, TL_PROJ_CKPT, sa->at);
}

int
tl_proj_rebuild_log(struct tl_log *log, uint64_t step, uint64_t *countp,
    uint64_t *badp)
{
	struct step_arg sa;
	int rc;

	memset(&sa, 0, sizeof(sa));
	sa.log = log;
	sa.step = step == 0 ? TL_PROJ_REBUILD_STEP : step;
	if (countp != NULL)
		*countp = 0;
	if (badp != NULL)
		*badp = 0;
	if ((rc = tl_log_write(log, drop_cb, NULL)) != 0)
		return rc;
	do {
		if ((rc = tl_log_write(log, step_cb, &sa)) != 0) {
			/* What the last commit holds; nothing after it. */
			sa.at = sa.base;
			break;
		}
	} while (sa.at < sa.last);
	if (countp != NULL)
		*countp = sa.at;
	if (badp != NULL)
		*badp = sa.bad;
	return rc;
}

static int
catchup_cb(struct tl_txn *t, void *arg)
{
	(void)arg;
	return tl_proj_catchup(t, 0);
}

int
tl_proj_current(struct tl_log *log)
{
	struct tl_txn *t;
	uint64_t ck = 0, last = 0;
	int rc;

	if ((rc = tl_log_begin(log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if ((rc = tl_ckpt_get(t, TL_PROJ_CKPT, &ck)) == TL_ENOTFOUND)
		rc = 0;
	if (rc == 0)
		rc = tl_log_last(t, &last, NULL);
	tl_log_abort(t);
	if (rc != 0 || ck >= last)
		return rc;
	return tl_log_write(log, catchup_cb, NULL);
}

int
tl_proj_catchup(struct tl_txn *t, uint64_t upto)
{
	struct tl_proj p;
	uint64_t at = 0, last = 0, bad = 0;
	int rc;

	if ((rc = tl_ckpt_get(t, TL_PROJ_CKPT, &at)) != 0 &&
	    rc != TL_ENOTFOUND)
		return rc;
	if ((rc = tl_log_last(t, &last, NULL)) != 0)
		return rc;
	/* Opening creates the tables, so readers find them even when empty. */
	if ((rc = tl_proj_open(t, &p)) != 0)
		return rc;
	if (upto == 0 || upto > last)
		upto = last;
	if (at >= upto)
		return at == 0 ? tl_ckpt_set(t, TL_PROJ_CKPT, 0) : 0;
	if ((rc = tl_proj_fold(t, &p, at + 1, upto, &at, &bad)) != 0)
		return rc;
	return tl_ckpt_set(t, TL_PROJ_CKPT, at);
}

int
tl_proj_rebuild(struct tl_txn *t, uint64_t upto, uint64_t *countp)
{
	uint64_t after = 0;
	int rc;

	if ((rc = tl_kv_drop_all(t)) != 0)
		return rc;
	if ((rc = tl_ckpt_set(t, TL_PROJ_CKPT, 0)) != 0)
		return rc;
	if ((rc = tl_proj_catchup(t, upto)) != 0)
		return rc;
	if (countp != NULL) {
		if ((rc = tl_ckpt_get(t, TL_PROJ_CKPT, &after)) != 0)
			return rc;
		*countp = after;
	}
	return 0;
}
