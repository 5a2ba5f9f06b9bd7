/*
 * pass.c - the pass every reactor runs and the worker pool its driver
 * calls run on (pass.h says what each guarantees).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/vec.h"
#include "projections/decide.h"
#include "epoch.h"
#include "pass.h"
#include "session.h"

/* Threads the pool keeps at most (jobs beyond wait in the queue). */
#define POOL_THREADS_MAX	256

struct lane_count {
	char		 key[140];
	int		 lane;
	unsigned	 n;		/* queued or running */
	unsigned	 running;
};

struct pool_thread {
	pthread_t		 th;
	struct tl_rx_pool	*pool;
	int			 busy;	/* inside a job */
};

struct tl_rx_pool {
	pthread_mutex_t		 mu;
	pthread_cond_t		 work;	/* a job queued, a slot freed */
	pthread_cond_t		 done;	/* a job finished */
	struct tl_rx_job	*head, *tail;
	size_t			 nq;
	struct lane_count	*lc;
	size_t			 nlc, caplc;
	struct pool_thread	*th[POOL_THREADS_MAX];
	size_t			 nth;
	size_t			 idle;
	unsigned		 cap;	/* running per provider and lane */
	uint64_t		 yield_max_ns;	/* the verify lane's bound */
	int			 shutdown;
};

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct lane_count *
lane_of(struct tl_rx_pool *pl, const char *key, int lane, int create)
{
	struct lane_count *nl;
	size_t i;

	for (i = 0; i < pl->nlc; i++)
		if (pl->lc[i].lane == lane && strcmp(pl->lc[i].key, key) == 0)
			return &pl->lc[i];
	if (!create)
		return NULL;
	if (tl_vec_grow(&pl->lc, &pl->caplc, pl->nlc + 1,
	    sizeof(pl->lc[0])) != 0)
		return NULL;
	nl = &pl->lc[pl->nlc++];
	memset(nl, 0, sizeof(*nl));
	snprintf(nl->key, sizeof(nl->key), "%s", key);
	nl->lane = lane;
	return nl;
}

/* The first queued job whose lane has room, unlinked; NULL: none. */
static struct tl_rx_job *
take_runnable(struct tl_rx_pool *pl)
{
	struct tl_rx_job **pp, *j;

	for (pp = &pl->head; (j = *pp) != NULL; pp = &j->next) {
		struct lane_count *lc = lane_of(pl, j->key, j->lane, 0);
		struct lane_count *fg;

		if (lc != NULL && lc->running >= pl->cap)
			continue;
		/*
		 * The verifier gives way to its provider's pass lane, for
		 * so long at most; past it, it no longer gives way.
		 */
		if (j->lane == TL_RX_LANE_VERIFY && (fg = lane_of(pl, j->key,
		    TL_RX_LANE_PASS, 0)) != NULL && fg->n > 0) {
			if (mono_ns() - j->queued_ns < pl->yield_max_ns)
				continue;
			j->insist = 1;
		}
		*pp = j->next;
		if (pl->tail == j) {
			/* The new tail is the one before j, if any. */
			struct tl_rx_job *t = pl->head;

			while (t != NULL && t->next != NULL)
				t = t->next;
			pl->tail = t;
		}
		j->next = NULL;
		pl->nq--;
		if (lc != NULL)
			lc->running++;
		return j;
	}
	return NULL;
}

static void *
pool_main(void *arg)
{
	struct pool_thread *pt = arg;
	struct tl_rx_pool *pl = pt->pool;
	struct tl_rx_job *j;

	pthread_mutex_lock(&pl->mu);
	for (;;) {
		if (pl->shutdown)
			break;
		if ((j = take_runnable(pl)) == NULL) {
			pl->idle++;
			if (pl->nq > 0) {
				/* Held back: its bound passes without a signal. */
				struct timespec ts;

				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_nsec += 50000000;	/* 50 ms */
				if (ts.tv_nsec >= 1000000000) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000;
				}
				pthread_cond_timedwait(&pl->work, &pl->mu, &ts);
			} else
				pthread_cond_wait(&pl->work, &pl->mu);
			pl->idle--;
			continue;
		}
		pt->busy = 1;
		pthread_mutex_unlock(&pl->mu);
		j->run(j);
		pthread_mutex_lock(&pl->mu);
		pt->busy = 0;
		{
			struct lane_count *lc = lane_of(pl, j->key, j->lane, 0);

			if (lc != NULL) {
				lc->running--;
				lc->n--;
			}
		}
		/* The last touch: after it the job is its owner's again. */
		atomic_store(&j->done, 1);
		pthread_cond_broadcast(&pl->done);
		pthread_cond_broadcast(&pl->work);	/* a slot is free */
	}
	pthread_mutex_unlock(&pl->mu);
	return NULL;
}

static struct tl_rx_pool *
pool_get(struct tl_rx *rx)
{
	struct tl_rx_pool *pl = rx->pool;

	if (pl != NULL)
		return pl;
	if ((pl = calloc(1, sizeof(*pl))) == NULL)
		return NULL;
	pthread_mutex_init(&pl->mu, NULL);
	pthread_cond_init(&pl->work, NULL);
	pthread_cond_init(&pl->done, NULL);
	rx->pool = pl;
	return pl;
}

int
tl_rx_pool_ready(struct tl_rx *rx)
{
	return pool_get(rx) != NULL ? 0 : ENOMEM;
}

int
tl_rx_pool_submit(struct tl_rx *rx, struct tl_rx_job *j)
{
	struct tl_rx_pool *pl = pool_get(rx);
	struct lane_count *lc;
	int rc = 0;

	if (pl == NULL)
		return ENOMEM;
	atomic_init(&j->done, 0);
	j->next = NULL;
	pthread_mutex_lock(&pl->mu);
	pl->cap = (unsigned)(rx->workers > 0 ? rx->workers : 1);
	pl->yield_max_ns = rx->verify_yield_max_ns > 0 ?
	    rx->verify_yield_max_ns : TL_RX_VERIFY_YIELD_MAX_NS;
	j->queued_ns = mono_ns();
	j->insist = 0;
	if ((lc = lane_of(pl, j->key, j->lane, 1)) == NULL) {
		rc = ENOMEM;
		goto out;
	}
	/* Enough threads for every job that could run now. */
	if (pl->idle < pl->nq + 1 && pl->nth < POOL_THREADS_MAX) {
		struct pool_thread *pt = calloc(1, sizeof(*pt));

		if (pt != NULL) {
			pt->pool = pl;
			if (pthread_create(&pt->th, NULL, pool_main, pt) == 0)
				pl->th[pl->nth++] = pt;
			else
				free(pt);
		}
	}
	if (pl->nth == 0) {
		rc = EAGAIN;
		goto out;
	}
	lc->n++;
	if (pl->tail != NULL)
		pl->tail->next = j;
	else
		pl->head = j;
	pl->tail = j;
	pl->nq++;
	pthread_cond_broadcast(&pl->work);
out:
	pthread_mutex_unlock(&pl->mu);
	return rc;
}

int
tl_rx_job_done(struct tl_rx_job *j)
{
	return atomic_load(&j->done);
}

void
tl_rx_job_wait(struct tl_rx *rx, struct tl_rx_job *j)
{
	struct tl_rx_pool *pl = rx->pool;

	if (pl == NULL)
		return;
	pthread_mutex_lock(&pl->mu);
	while (!atomic_load(&j->done))
		pthread_cond_wait(&pl->done, &pl->mu);
	pthread_mutex_unlock(&pl->mu);
}

unsigned
tl_rx_pool_busy(struct tl_rx *rx, const char *key, int lane)
{
	struct tl_rx_pool *pl = rx->pool;
	struct lane_count *lc;
	unsigned n = 0;

	if (pl == NULL)
		return 0;
	pthread_mutex_lock(&pl->mu);
	if ((lc = lane_of(pl, key, lane, 0)) != NULL)
		n = lc->n;
	pthread_mutex_unlock(&pl->mu);
	return n;
}

void
tl_rx_pool_free(struct tl_rx *rx)
{
	struct tl_rx_pool *pl = rx->pool;
	size_t i;
	int left = 0;

	if (pl == NULL)
		return;
	rx->pool = NULL;
	pthread_mutex_lock(&pl->mu);
	pl->shutdown = 1;
	pthread_cond_broadcast(&pl->work);
	pthread_mutex_unlock(&pl->mu);
	for (i = 0; i < pl->nth; i++) {
		int busy;

		pthread_mutex_lock(&pl->mu);
		busy = pl->th[i]->busy;
		pthread_mutex_unlock(&pl->mu);
		if (busy) {
			/* Stuck in a call: the process's exit ends it. */
			pthread_detach(pl->th[i]->th);
			left = 1;
			continue;
		}
		pthread_join(pl->th[i]->th, NULL);
		free(pl->th[i]);
		pl->th[i] = NULL;
	}
	if (left)
		return;		/* a thread still uses the pool */
	pthread_cond_destroy(&pl->work);
	pthread_cond_destroy(&pl->done);
	pthread_mutex_destroy(&pl->mu);
	free(pl->lc);
	free(pl);
}

/* One provider's calls of a pass, taken one at a time by its sessions. */
struct queue {
	pthread_mutex_t		 mu;
	struct tl_rx_prov	*pv;
	struct tl_rx_call	**c;
	size_t			 n, cap;
	size_t			 next;
	int			 open_rc;	/* a session that could not open */
	char			 open_why[TL_WHY_MAX];
	int			 ep_checked;	/* tl_ep_check_epoch, once */
	int			 ep_rc;
};

struct session {
	struct tl_rx_job	 job;	/* first: the pool hands it back */
	struct tl_rx		*rx;	/* its pool only, for the lane's rule */
	struct queue		*q;
	tl_rx_call_fn		 fn;
	void			*arg;
	int			 opened;
};

/* A verifier's session takes no call while its provider has pass work. */
static int
gives_way(const struct session *s)
{
	return s->job.lane == TL_RX_LANE_VERIFY && !s->job.insist &&
	    tl_rx_pool_busy(s->rx, s->job.key, TL_RX_LANE_PASS) > 0;
}

static struct tl_rx_call *
take(struct queue *q)
{
	struct tl_rx_call *c = NULL;

	pthread_mutex_lock(&q->mu);
	if (q->next < q->n)
		c = q->c[q->next++];
	pthread_mutex_unlock(&q->mu);
	return c;
}

/* A session: open the provider's admin side, make calls until none. */
static void
session_run(struct tl_rx_job *j)
{
	struct session *s = (struct session *)j;
	struct tl_rx_prov *pv = s->q->pv;
	struct tl_drv_admin a;
	struct tl_drv_fence fence;
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	struct tl_rx_call *c;
	char why[TL_WHY_MAX];
	void *h = NULL;
	int rc;

	tl_rx_prov_admin(pv, sv, &fence, &a);
	rc = pv->ops->open(&a, &h, why);
	/*
	 * On this very session, before any call: a leader deposed since
	 * the last resync makes none (epoch.h).
	 */
	if (rc == 0 && (rc = tl_ep_session(pv, h, why)) != 0)
		pv->ops->close(h);
	if (rc != 0) {
		/* What no session takes fails with this. */
		pthread_mutex_lock(&s->q->mu);
		s->q->open_rc = rc;
		snprintf(s->q->open_why, sizeof(s->q->open_why), "%s", why);
		pthread_mutex_unlock(&s->q->mu);
		return;
	}
	s->opened = 1;
	while (!gives_way(s) && (c = take(s->q)) != NULL) {
		/* Deposed meanwhile (any session): no more calls. */
		if (tl_ep_refused(pv, c->why)) {
			c->rc = TL_EREFUSED;
			continue;
		}
		/* Fenced by epoch check: not once the reading is stale. */
		if ((c->rc = tl_ep_epoch_fresh(pv, c->why)) != 0)
			continue;
		s->fn(s->arg, pv, h, c);
		/*
		 * The provider refused the call itself: its fence moved
		 * during this session (drivers/driver.h).  That deposes us
		 * as a fenced session does.
		 */
		if (c->rc == TL_EREFUSED && strncmp(c->why, "deposed", 7) == 0)
			tl_ep_provider_deposed(pv, c->why);
	}
	pv->ops->close(h);
}

void
tl_rx_pass_calls(struct tl_rx *rx, struct tl_rx_prov *pv, size_t npv,
    struct tl_rx_call *calls, size_t ncalls, size_t min_calls, int lane,
    tl_rx_call_fn fn, void *arg)
{
	size_t per = (size_t)(rx->workers > 0 ? rx->workers : 1);
	struct queue *qs;
	struct session *ss;
	size_t i, k, ns = 0;

	if (npv == 0 || ncalls == 0)
		return;
	qs = calloc(npv, sizeof(*qs));
	ss = calloc(npv * per, sizeof(*ss));
	if (qs == NULL || ss == NULL)
		goto nomem;
	for (i = 0; i < npv; i++) {
		pthread_mutex_init(&qs[i].mu, NULL);
		qs[i].pv = &pv[i];
		tl_ep_arm(rx, &pv[i]);
	}
	for (k = 0; k < ncalls; k++) {
		struct tl_rx_call *c = &calls[k];
		struct queue *q = NULL;

		for (i = 0; i < npv && q == NULL; i++)
			if (strcmp(pv[i].id, c->provider) == 0)
				q = &qs[i];
		if (q == NULL || q->pv->ops == NULL)
			continue;
		if (!q->ep_checked) {
			q->ep_checked = 1;
			q->ep_rc = tl_ep_check_epoch(rx, q->pv, q->open_why);
		}
		if (q->ep_rc != 0) {
			/* No call made: the epoch is not confirmed. */
			c->rc = q->ep_rc;
			c->admin = 1;
			snprintf(c->why, TL_WHY_MAX, "%s", q->open_why);
			continue;
		}
		if (tl_vec_grow(&q->c, &q->cap, q->n + 1,
		    sizeof(q->c[0])) != 0) {
			c->rc = ENOMEM;
			continue;
		}
		q->c[q->n++] = c;
	}
	for (i = 0; i < npv; i++) {
		size_t want = min_calls > 1 ? (qs[i].n + min_calls - 1) /
		    min_calls : qs[i].n;
		const struct tl_drv_decl *d = pv[i].ops != NULL ?
		    pv[i].ops->decl : NULL;
		size_t cap = per, nsess;

		/* A driver whose changes take one lock: no more sessions. */
		if (d != NULL && d->sessions_max != 0 && cap > d->sessions_max)
			cap = d->sessions_max;
		nsess = want < cap ? want : cap;

		for (k = 0; k < nsess; k++) {
			struct session *s = &ss[ns++];

			s->rx = rx;
			s->q = &qs[i];
			s->fn = fn;
			s->arg = arg;
			s->job.run = session_run;
			s->job.lane = lane;
			snprintf(s->job.key, sizeof(s->job.key), "%s",
			    pv[i].id);
			if (tl_rx_pool_submit(rx, &s->job) != 0) {
				/* No thread: this one runs here. */
				session_run(&s->job);
				atomic_store(&s->job.done, 1);
			}
		}
	}
	for (k = 0; k < ns; k++)
		tl_rx_job_wait(rx, &ss[k].job);
	for (k = 0; k < ns; k++)
		if (ss[k].opened)
			ss[k].q->pv->ok = 1;
	for (i = 0; i < npv; i++) {
		struct queue *q = &qs[i];

		/*
		 * No session opened to take these: the reason is its.
		 * Else they were left when the sessions gave way.
		 */
		for (k = q->next; k < q->n; k++) {
			if (q->open_rc == 0) {
				q->c[k]->yielded = 1;
				continue;
			}
			q->c[k]->rc = q->open_rc;
			q->c[k]->admin = 1;
			snprintf(q->c[k]->why, TL_WHY_MAX, "%s", q->open_why);
		}
		pthread_mutex_destroy(&q->mu);
		free(q->c);
	}
	free(qs);
	free(ss);
	return;
nomem:
	free(qs);
	free(ss);
	for (k = 0; k < ncalls; k++) {
		calls[k].rc = ENOMEM;
		snprintf(calls[k].why, TL_WHY_MAX, "%s", tl_strerror(ENOMEM));
	}
}

void
tl_rx_pass_jobs(struct tl_rx *rx, struct tl_rx_job **jobs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		jobs[i]->lane = TL_RX_LANE_PASS;
		if (tl_rx_pool_submit(rx, jobs[i]) != 0) {
			/* No thread: this one runs here. */
			jobs[i]->run(jobs[i]);
			atomic_store(&jobs[i]->done, 1);
		}
	}
	for (i = 0; i < n; i++)
		tl_rx_job_wait(rx, jobs[i]);
}

struct phase_arg {
	const struct tl_rx_pass_def	*d;
	struct tl_rx			*rx;
	void				*arg;
	int				 outcomes;
};

static int
write_phase(struct tl_txn *t, void *arg)
{
	struct phase_arg *pa = arg;
	struct tl_ctx c;
	int rc;

	if ((rc = tl_ctx_begin(&c, t, pa->rx->actor)) != 0)
		return rc;
	/* Every intent and outcome says which leader's epoch made it. */
	c.epoch = pa->rx->epoch;
	rc = pa->outcomes ? pa->d->outcomes(pa->arg, &c) :
	    pa->d->intents(pa->arg, &c);
	if (rc != 0)
		return rc;
	return tl_ctx_end(&c);
}

int
tl_rx_pass_begin(struct tl_rx *rx, const struct tl_rx_pass_def *d, void *arg,
    unsigned *phases)
{
	struct phase_arg pa = { d, rx, arg, 0 };
	struct tl_txn *t;
	struct tl_proj p;
	int rc;

	*phases = 0;
	/* Acting on a past state would undo what came after it. */
	if ((rc = tl_proj_current(rx->log)) != 0)
		return rc;
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if ((rc = tl_proj_open(t, &p)) == 0 && d->gather != NULL)
		rc = d->gather(arg, t, &p, phases);
	tl_log_abort(t);
	if (rc != 0)
		return rc;
	if ((*phases & TL_RX_INTENTS) && d->intents != NULL &&
	    (rc = tl_log_write(rx->log, write_phase, &pa)) != 0)
		return rc;
	/* The intents reach the standby before the calls act on them. */
	if ((*phases & TL_RX_INTENTS) && d->intents != NULL &&
	    (*phases & TL_RX_CALLS) && d->calls != NULL)
		tl_rx_publish_ahead(rx);
	return 0;
}

int
tl_rx_pass_end(struct tl_rx *rx, const struct tl_rx_pass_def *d, void *arg,
    unsigned phases)
{
	struct phase_arg pa = { d, rx, arg, 1 };

	/*
	 * Deposed during the calls: nothing more is recorded (the intents
	 * stay half done, as after a crash); tallyd stops.
	 */
	if (atomic_load(&rx->deposed))
		return TL_EREFUSED;
	if ((phases & TL_RX_OUTCOMES) && d->outcomes != NULL)
		return tl_log_write(rx->log, write_phase, &pa);
	return 0;
}

int
tl_rx_pass_run(struct tl_rx *rx, const struct tl_rx_pass_def *d, void *arg)
{
	unsigned phases = 0;
	int rc;

	if ((rc = tl_rx_pass_begin(rx, d, arg, &phases)) != 0)
		return rc;
	if ((phases & TL_RX_CALLS) && d->calls != NULL)
		d->calls(arg, &phases);
	return tl_rx_pass_end(rx, d, arg, phases);
}
