/*
 * check_pass.c - the reactors' worker pool (reactors/pass.h): the cap
 * of rx->workers running per provider and lane, the long lane never
 * holding up a pass's sessions, jobs taken in the order queued, and a
 * pool freed with nothing left running.  Jobs here are plain functions:
 * the pool knows nothing of drivers.  And the fence on every session
 * (reactors/epoch.h: tl_ep_session), with a driver made of counters:
 * no call on a session whose provider is fenced above rx->epoch.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/secret.h"
#include "reactors/epoch.h"
#include "reactors/pass.h"

struct tjob {
	struct tl_rx_job	 job;	/* first */
	atomic_int		*running, *max, *release;
	atomic_int		*order;	/* the next position */
	int			 pos;	/* where this one ran */
};

static void
nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Counts how many run at once; holds until *release (if given). */
static void
tjob_run(struct tl_rx_job *j)
{
	struct tjob *t = (struct tjob *)j;
	int now = atomic_fetch_add(t->running, 1) + 1, m;

	while ((m = atomic_load(t->max)) < now &&
	    !atomic_compare_exchange_weak(t->max, &m, now))
		;
	if (t->order != NULL)
		t->pos = atomic_fetch_add(t->order, 1);
	if (t->release != NULL)
		while (!atomic_load(t->release))
			nap(2);
	else
		nap(20);
	atomic_fetch_sub(t->running, 1);
}

static void
tjob_init(struct tjob *t, const char *key, int lane, atomic_int *running,
    atomic_int *max, atomic_int *release, atomic_int *order)
{
	memset(t, 0, sizeof(*t));
	t->job.run = tjob_run;
	t->job.lane = lane;
	strcpy(t->job.key, key);
	t->running = running;
	t->max = max;
	t->release = release;
	t->order = order;
}

/* Ten jobs of one provider with --workers 2: never more than 2 at once. */
START_TEST(test_cap_per_provider)
{
	struct tl_rx rx;
	struct tjob j[10], other[2];
	atomic_int run = 0, max = 0, orun = 0, omax = 0;
	size_t i;

	tl_rx_init(&rx);
	rx.workers = 2;
	for (i = 0; i < 10; i++) {
		tjob_init(&j[i], "node-a/pg", TL_RX_LANE_PASS, &run, &max,
		    NULL, NULL);
		ck_assert_int_eq(tl_rx_pool_submit(&rx, &j[i].job), 0);
	}
	/* Another provider's are not held up by the first's cap. */
	for (i = 0; i < 2; i++) {
		tjob_init(&other[i], "node-b/pg", TL_RX_LANE_PASS, &orun,
		    &omax, NULL, NULL);
		ck_assert_int_eq(tl_rx_pool_submit(&rx, &other[i].job), 0);
	}
	for (i = 0; i < 2; i++)
		tl_rx_job_wait(&rx, &other[i].job);
	ck_assert_int_eq(atomic_load(&omax), 2);
	for (i = 0; i < 10; i++)
		tl_rx_job_wait(&rx, &j[i].job);
	ck_assert_int_eq(atomic_load(&max), 2);
	ck_assert_int_eq(atomic_load(&run), 0);
	ck_assert_uint_eq(tl_rx_pool_busy(&rx, "node-a/pg", TL_RX_LANE_PASS),
	    0);
	tl_rx_free(&rx);
}
END_TEST

/*
 * Two slow calls (migrations) fill the provider's long lane: a pass's
 * session of the same provider still runs and finishes at once.
 */
START_TEST(test_long_lane_does_not_block)
{
	struct tl_rx rx;
	struct tjob slow[2], pass;
	atomic_int run = 0, max = 0, release = 0, prun = 0, pmax = 0;
	size_t i;
	int k;

	tl_rx_init(&rx);
	rx.workers = 2;
	for (i = 0; i < 2; i++) {
		tjob_init(&slow[i], "node-a/pg", TL_RX_LANE_LONG, &run, &max,
		    &release, NULL);
		ck_assert_int_eq(tl_rx_pool_submit(&rx, &slow[i].job), 0);
	}
	tjob_init(&pass, "node-a/pg", TL_RX_LANE_PASS, &prun, &pmax, NULL,
	    NULL);
	ck_assert_int_eq(tl_rx_pool_submit(&rx, &pass.job), 0);
	for (k = 0; k < 200 && !tl_rx_job_done(&pass.job); k++)
		nap(5);
	ck_assert_msg(tl_rx_job_done(&pass.job), "a pass's session waited "
	    "for the long lane");
	ck_assert_int_eq(tl_rx_job_done(&slow[0].job), 0);
	ck_assert_uint_eq(tl_rx_pool_busy(&rx, "node-a/pg", TL_RX_LANE_LONG),
	    2);
	atomic_store(&release, 1);
	for (i = 0; i < 2; i++)
		tl_rx_job_wait(&rx, &slow[i].job);
	ck_assert_int_eq(atomic_load(&max), 2);
	tl_rx_free(&rx);
}
END_TEST

/* With one worker, a provider's jobs run in the order they were queued. */
START_TEST(test_fifo_per_provider)
{
	struct tl_rx rx;
	struct tjob j[8];
	atomic_int run = 0, max = 0, order = 0;
	size_t i;

	tl_rx_init(&rx);
	rx.workers = 1;
	for (i = 0; i < 8; i++) {
		tjob_init(&j[i], "node-a/pg", TL_RX_LANE_PASS, &run, &max,
		    NULL, &order);
		ck_assert_int_eq(tl_rx_pool_submit(&rx, &j[i].job), 0);
	}
	for (i = 0; i < 8; i++)
		tl_rx_job_wait(&rx, &j[i].job);
	for (i = 0; i < 8; i++)
		ck_assert_int_eq(j[i].pos, (int)i);
	ck_assert_int_eq(atomic_load(&max), 1);
	tl_rx_free(&rx);
}
END_TEST

/* --- the fence on each session ------------------------------------- */

static atomic_int f_opens, f_fences, f_calls;
static uint64_t f_cur;		/* the provider's fence */
static int f_rc;		/* the fence op's result */

static int
f_open(const struct tl_drv_admin *a, void **h, char *why)
{
	(void)a;
	(void)why;
	atomic_fetch_add(&f_opens, 1);
	*h = &f_opens;
	return 0;
}

static void
f_close(void *h)
{
	(void)h;
}

static int
f_fence(void *h, const struct tl_drv_fence *want,
    struct tl_drv_fence_held *held, char *why)
{
	(void)h;
	atomic_fetch_add(&f_fences, 1);
	if (f_rc != 0) {
		snprintf(why, TL_WHY_MAX, "fence table refused");
		return f_rc;
	}
	/* The held fence is another leader's once it is above ours. */
	held->epoch = want->epoch > f_cur ? want->epoch : f_cur;
	snprintf(held->leader, sizeof(held->leader), "%s",
	    held->epoch == want->epoch ? want->leader : "another");
	return 0;
}

/*
 * pv as a provider id on the counters' driver (ops over decl, opening
 * and closing by f_open and f_close), fenced by f_fence when fenced.
 */
static void
counters_prov(struct tl_drv_ops *ops, const struct tl_drv_decl *decl,
    int fenced, struct tl_rx_prov *pv, const char *id)
{
	memset(ops, 0, sizeof(*ops));
	ops->decl = decl;
	ops->open = f_open;
	ops->close = f_close;
	if (fenced)
		ops->fence = f_fence;
	memset(pv, 0, sizeof(*pv));
	snprintf(pv->id, sizeof(pv->id), "%s", id);
	pv->ops = ops;
}

static void
f_call(void *arg, const struct tl_rx_prov *pv, void *h,
    struct tl_rx_call *c)
{
	(void)arg;
	(void)pv;
	(void)h;
	atomic_fetch_add(&f_calls, 1);
	c->rc = 0;
}

/* 12 calls on one provider (2 sessions) at epoch; the calls made. */
static int
run_fenced(struct tl_rx *rx, uint64_t epoch, uint64_t cur, int rc,
    struct tl_rx_call *cl, char (*why)[TL_WHY_MAX])
{
	static struct tl_drv_ops ops;
	static const struct tl_drv_decl decl = { .name = "counters" };
	struct tl_rx_prov pv;
	size_t i;

	counters_prov(&ops, &decl, 1, &pv, "node-a/db");
	rx->epoch = epoch;
	f_cur = cur;
	f_rc = rc;
	atomic_store(&f_opens, 0);
	atomic_store(&f_fences, 0);
	atomic_store(&f_calls, 0);
	for (i = 0; i < 12; i++) {
		memset(&cl[i], 0, sizeof(cl[i]));
		cl[i].provider = "node-a/db";
		cl[i].rc = -1;
		cl[i].why = why[i];
		why[i][0] = '\0';
	}
	tl_rx_pass_calls(rx, &pv, 1, cl, 12, 6, TL_RX_LANE_PASS, f_call,
	    NULL);
	return atomic_load(&f_calls);
}

/* --- the verifier's lane gives way ---------------------------------- */

static atomic_int v_calls;

static void
v_call(void *arg, const struct tl_rx_prov *pv, void *h,
    struct tl_rx_call *c)
{
	(void)arg;
	(void)pv;
	(void)h;
	nap(60);
	atomic_fetch_add(&v_calls, 1);
	c->rc = 0;
}

struct vrun {
	struct tl_rx		*rx;
	struct tl_rx_prov	*pv;
	struct tl_rx_call	 cl[12];
	char			 why[12][TL_WHY_MAX];
	atomic_int		 done;
};

static void *
vrun_main(void *arg)
{
	struct vrun *v = arg;
	size_t i;

	for (i = 0; i < 12; i++) {
		memset(&v->cl[i], 0, sizeof(v->cl[i]));
		v->cl[i].provider = "node-a/db";
		v->cl[i].rc = -1;
		v->cl[i].why = v->why[i];
	}
	tl_rx_pass_calls(v->rx, v->pv, 1, v->cl, 12, 12, TL_RX_LANE_VERIFY,
	    v_call, NULL);
	atomic_store(&v->done, 1);
	return NULL;
}

/* 12 checks of pv on rx's verify lane, on a thread of their own (*th). */
static void
vrun_start(struct vrun *v, struct tl_rx *rx, struct tl_rx_prov *pv,
    pthread_t *th)
{
	memset(v, 0, sizeof(*v));
	v->rx = rx;
	v->pv = pv;
	atomic_store(&v_calls, 0);
	ck_assert_int_eq(pthread_create(th, NULL, vrun_main, v), 0);
}

/*
 * --workers 1: a verifier's session making 12 slow checks (60 ms each)
 * holds the provider's one slot of its own lane, not the pass lane's:
 * a pass's job starts at once, and the verifier's session takes no
 * further call once it is there (the rest yielded, untouched).  And a
 * verifier's session does not start while a pass's job of its provider
 * runs.
 */
START_TEST(test_verify_gives_way)
{
	static struct tl_drv_ops ops;
	static const struct tl_drv_decl decl = { .name = "counters" };
	struct tl_rx rx;
	struct tl_rx_prov pv;
	struct vrun v;
	struct tjob pass;
	atomic_int run = 0, max = 0, release = 0;
	pthread_t th;
	double t0;
	int i, made, yielded;

	counters_prov(&ops, &decl, 0, &pv, "node-a/db");
	tl_rx_init(&rx);
	rx.workers = 1;
	ck_assert_int_eq(tl_rx_pool_ready(&rx), 0);
	vrun_start(&v, &rx, &pv, &th);
	while (atomic_load(&v_calls) < 2)
		nap(1);
	t0 = now_ms();
	tjob_init(&pass, "node-a/db", TL_RX_LANE_PASS, &run, &max, &release,
	    NULL);
	ck_assert_int_eq(tl_rx_pool_submit(&rx, &pass.job), 0);
	while (atomic_load(&run) == 0 && now_ms() - t0 < 2000)
		nap(1);
	/* At once, not after the 600 ms of checks left. */
	ck_assert_msg(now_ms() - t0 < 300, "the pass's job waited %.0f ms",
	    now_ms() - t0);
	/* The check in flight ends; no other starts while the job runs. */
	nap(200);
	i = atomic_load(&v_calls);
	nap(100);
	ck_assert_int_eq(atomic_load(&v_calls), i);
	atomic_store(&release, 1);
	tl_rx_job_wait(&rx, &pass.job);
	atomic_store(&release, 0);
	pthread_join(th, NULL);
	made = atomic_load(&v_calls);
	for (i = 0, yielded = 0; i < 12; i++) {
		if (v.cl[i].yielded) {
			yielded++;
			ck_assert_int_eq(v.cl[i].rc, -1);
		} else
			ck_assert_int_eq(v.cl[i].rc, 0);
	}
	ck_assert_int_eq(made + yielded, 12);
	ck_assert_int_ge(yielded, 6);

	/* A pass's job running: the verifier's session waits for it. */
	tjob_init(&pass, "node-a/db", TL_RX_LANE_PASS, &run, &max, &release,
	    NULL);
	ck_assert_int_eq(tl_rx_pool_submit(&rx, &pass.job), 0);
	while (atomic_load(&run) == 0)
		nap(1);
	vrun_start(&v, &rx, &pv, &th);
	nap(100);
	ck_assert_int_eq(atomic_load(&v_calls), 0);
	atomic_store(&release, 1);
	pthread_join(th, NULL);
	tl_rx_job_wait(&rx, &pass.job);
	ck_assert_int_eq(atomic_load(&v_calls), 12);
	for (i = 0; i < 12; i++)
		ck_assert_int_eq(v.cl[i].yielded, 0);
	tl_rx_free(&rx);
}
END_TEST

/*
 * The verify lane gives way for rx->verify_yield_max_ns at most: with
 * a pass's job that never ends, the verifier's session starts once it
 * has waited that long, and then makes every check (it no longer gives
 * way), so verification is late under constant provisioning, never
 * starved.
 */
START_TEST(test_verify_not_starved)
{
	static struct tl_drv_ops ops;
	static const struct tl_drv_decl decl = { .name = "counters" };
	struct tl_rx rx;
	struct tl_rx_prov pv;
	struct vrun v;
	struct tjob pass;
	atomic_int run = 0, max = 0, release = 0;
	pthread_t th;
	double t0;
	int i;

	counters_prov(&ops, &decl, 0, &pv, "node-a/db");
	tl_rx_init(&rx);
	rx.workers = 1;
	rx.verify_yield_max_ns = 200000000u;	/* 200 ms */
	ck_assert_int_eq(tl_rx_pool_ready(&rx), 0);
	tjob_init(&pass, "node-a/db", TL_RX_LANE_PASS, &run, &max, &release,
	    NULL);
	ck_assert_int_eq(tl_rx_pool_submit(&rx, &pass.job), 0);
	while (atomic_load(&run) == 0)
		nap(1);
	t0 = now_ms();
	vrun_start(&v, &rx, &pv, &th);
	nap(100);
	ck_assert_int_eq(atomic_load(&v_calls), 0);
	while (!atomic_load(&v.done) && now_ms() - t0 < 5000)
		nap(5);
	ck_assert_msg(atomic_load(&v.done), "the checks waited for the pass's "
	    "job past the bound");
	ck_assert_int_eq(atomic_load(&v_calls), 12);
	for (i = 0; i < 12; i++)
		ck_assert_int_eq(v.cl[i].yielded, 0);
	atomic_store(&release, 1);
	pthread_join(th, NULL);
	tl_rx_job_wait(&rx, &pass.job);
	tl_rx_free(&rx);
}
END_TEST

START_TEST(test_session_fence)
{
	struct tl_rx rx;
	struct tl_rx_call cl[12];
	char why[12][TL_WHY_MAX];
	size_t i;

	tl_rx_init(&rx);
	rx.workers = 2;
	/* At our epoch: every call, each session fenced once first. */
	ck_assert_int_eq(run_fenced(&rx, 2, 2, 0, cl, why), 12);
	ck_assert_int_eq(atomic_load(&f_fences), atomic_load(&f_opens));
	ck_assert_int_eq(atomic_load(&rx.deposed), 0);
	/* Epoch 0 (not known): no fence is read, the calls are made. */
	ck_assert_int_eq(run_fenced(&rx, 0, 5, 0, cl, why), 12);
	ck_assert_int_eq(atomic_load(&f_fences), 0);
	/* The fence cannot be raised: no call, the driver's reason. */
	ck_assert_int_eq(run_fenced(&rx, 2, 0, TL_EDRIVER, cl, why), 0);
	for (i = 0; i < 12; i++) {
		ck_assert_int_eq(cl[i].rc, TL_EDRIVER);
		ck_assert_str_eq(why[i], "fence table refused");
	}
	ck_assert_int_eq(atomic_load(&rx.deposed), 0);
	/* Fenced above us: no call at all, deposed, the epochs named. */
	ck_assert_int_eq(run_fenced(&rx, 2, 3, 0, cl, why), 0);
	ck_assert_int_ge(atomic_load(&f_fences), 1);
	ck_assert_int_eq(atomic_load(&rx.deposed), 1);
	for (i = 0; i < 12; i++) {
		ck_assert_int_eq(cl[i].rc, TL_EREFUSED);
		ck_assert_ptr_nonnull(strstr(why[i], "deposed"));
	}
	ck_assert_ptr_nonnull(strstr(rx.deposed_msg, "provider node-a/db is "
	    "fenced at epoch 3 by leader another and this control plane is "
	    "at epoch 2"));
	/* Once deposed, a later pass makes no call either. */
	ck_assert_int_eq(run_fenced(&rx, 2, 2, 0, cl, why), 0);
	tl_rx_pool_free(&rx);
}
END_TEST

/*
 * A cluster's leader (rx->act_until set) makes no call past its lease,
 * and raises no fence before it knows its leader's name: a fence with
 * an empty leader would depose the leader that raises the next.
 * Outside a cluster (test_session_fence) an unnamed leader fences.
 */
START_TEST(test_cluster_gates)
{
	struct tl_rx rx;
	struct tl_rx_call cl[12];
	char why[12][TL_WHY_MAX];
	struct timespec ts;
	_Atomic uint64_t until;
	uint64_t now;
	size_t i;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	tl_rx_init(&rx);
	rx.workers = 2;
	rx.act_until = &until;
	/* The lease held, the leader not known: no fence, no call. */
	atomic_store(&until, now + 60000u);
	ck_assert_int_eq(run_fenced(&rx, 2, 2, 0, cl, why), 0);
	ck_assert_int_eq(atomic_load(&f_fences), 0);
	for (i = 0; i < 12; i++) {
		ck_assert_int_eq(cl[i].rc, TL_EUNREACH);
		ck_assert_ptr_nonnull(strstr(why[i], "not known yet"));
	}
	/* The leader known: fenced once per session, every call made. */
	snprintf(rx.leader, sizeof(rx.leader), "%s", "0123456789abcdef");
	ck_assert_int_eq(run_fenced(&rx, 2, 2, 0, cl, why), 12);
	ck_assert_int_eq(atomic_load(&f_fences), atomic_load(&f_opens));
	/* The lease past its margin: no session, no call. */
	atomic_store(&until, now > 1000u ? now - 1000u : 0);
	ck_assert_int_eq(run_fenced(&rx, 2, 2, 0, cl, why), 0);
	for (i = 0; i < 12; i++)
		ck_assert_ptr_nonnull(strstr(why[i], "lease was not renewed"));
	ck_assert_int_eq(atomic_load(&rx.deposed), 0);
	tl_rx_pool_free(&rx);
}
END_TEST

/*
 * A provider that refuses a call itself ("deposed: ...": its fence
 * moved during the session, drivers/driver.h) deposes the control
 * plane as a fenced session does: no later call on any session, and
 * rx->deposed set with the provider's words, so the pass records no
 * outcome and tallyd stops (before: the refusal was a grant.failed and
 * every other call was still made).
 */
static void
d_call(void *arg, const struct tl_rx_prov *pv, void *h,
    struct tl_rx_call *c)
{
	(void)arg;
	(void)pv;
	(void)h;
	atomic_fetch_add(&f_calls, 1);
	c->rc = TL_EREFUSED;
	snprintf(c->why, TL_WHY_MAX, "deposed: the fence moved under this "
	    "session");
}

static const struct tl_drv_decl counters_decl = { .name = "counters" };

START_TEST(test_provider_deposed)
{
	static struct tl_drv_ops ops;
	struct tl_rx rx;
	struct tl_rx_prov pv;
	struct tl_rx_call cl[12];
	char why[12][TL_WHY_MAX];
	size_t i;

	tl_rx_init(&rx);
	rx.workers = 2;
	rx.epoch = 2;
	counters_prov(&ops, &counters_decl, 1, &pv, "node-a/db");
	f_cur = 2;
	f_rc = 0;
	atomic_store(&f_calls, 0);
	for (i = 0; i < 12; i++) {
		memset(&cl[i], 0, sizeof(cl[i]));
		cl[i].provider = "node-a/db";
		cl[i].rc = -1;
		cl[i].why = why[i];
		why[i][0] = '\0';
	}
	tl_rx_pass_calls(&rx, &pv, 1, cl, 12, 6, TL_RX_LANE_PASS, d_call,
	    NULL);
	ck_assert_int_eq(atomic_load(&rx.deposed), 1);
	/* At most the one call each session had under way. */
	ck_assert_int_le(atomic_load(&f_calls), 2);
	for (i = 0; i < 12; i++) {
		ck_assert_int_eq(cl[i].rc, TL_EREFUSED);
		ck_assert_ptr_nonnull(strstr(why[i], "deposed"));
	}
	ck_assert_ptr_nonnull(strstr(rx.deposed_msg, "the fence moved"));
	tl_rx_pool_free(&rx);
}
END_TEST

/*
 * A driver that declares sessions_max (the directory: every change under
 * its root's one lock) gets no more sessions than that from a pass, at
 * any --workers; one that declares none gets one per worker.
 */
static atomic_int m_now, m_max;

static void
m_call(void *arg, const struct tl_rx_prov *pv, void *h,
    struct tl_rx_call *c)
{
	int now = atomic_fetch_add(&m_now, 1) + 1, m;

	(void)arg;
	(void)pv;
	(void)h;
	while ((m = atomic_load(&m_max)) < now &&
	    !atomic_compare_exchange_weak(&m_max, &m, now))
		;
	nap(5);
	atomic_fetch_sub(&m_now, 1);
	c->rc = 0;
}

static void
run_max(unsigned sessions_max, struct tl_rx_call *cl,
    char (*why)[TL_WHY_MAX])
{
	static struct tl_drv_ops ops;
	static struct tl_drv_decl decl = { .name = "one-lock" };
	struct tl_rx rx;
	struct tl_rx_prov pv;
	size_t i;

	tl_rx_init(&rx);
	rx.workers = 4;
	decl.sessions_max = sessions_max;
	counters_prov(&ops, &decl, 0, &pv, "node-a/files");
	atomic_store(&f_opens, 0);
	atomic_store(&m_max, 0);
	for (i = 0; i < 12; i++) {
		memset(&cl[i], 0, sizeof(cl[i]));
		cl[i].provider = "node-a/files";
		cl[i].rc = -1;
		cl[i].why = why[i];
	}
	tl_rx_pass_calls(&rx, &pv, 1, cl, 12, 1, TL_RX_LANE_PASS, m_call,
	    NULL);
	for (i = 0; i < 12; i++)
		ck_assert_int_eq(cl[i].rc, 0);
	tl_rx_free(&rx);
}

START_TEST(test_sessions_max)
{
	struct tl_rx_call cl[12];
	char why[12][TL_WHY_MAX];

	run_max(1, cl, why);
	ck_assert_int_eq(atomic_load(&f_opens), 1);
	ck_assert_int_eq(atomic_load(&m_max), 1);
	run_max(0, cl, why);
	ck_assert_int_eq(atomic_load(&f_opens), 4);
	ck_assert_int_gt(atomic_load(&m_max), 1);
	/* The directory driver declares its one lock. */
	ck_assert_uint_eq(tl_drv_decl_find("directory")->sessions_max, 1);
}
END_TEST

/* --- the epoch, checked before calls (TL_DRV_FENCE_EPOCH_CHECK) --- */

static const struct tl_drv_fence_decl e_fencing = {
	TL_DRV_FENCE_EPOCH_CHECK, "nothing on the provider", "10 s"
};

static uint64_t
mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A call that lets the epoch's reading go stale after it (arg: rx). */
static void
e_call(void *arg, const struct tl_rx_prov *pv, void *h,
    struct tl_rx_call *c)
{
	struct tl_rx *rx = arg;

	(void)pv;
	(void)h;
	atomic_fetch_add(&f_calls, 1);
	if (rx != NULL)
		atomic_store(&rx->epoch_read_ns, mono_now() -
		    (uint64_t)(TL_DRV_EPOCH_CHECK_S + 1) * 1000000000u);
	c->rc = 0;
}

/* 12 calls on one provider fenced by epoch check: the calls made. */
static int
run_epoch(struct tl_rx *rx, int stale_after_one, struct tl_rx_call *cl,
    char (*why)[TL_WHY_MAX])
{
	static struct tl_drv_ops ops;
	static const struct tl_drv_decl decl = { .name = "idp",
		.fencing = &e_fencing };
	struct tl_rx_prov pv;
	size_t i;

	counters_prov(&ops, &decl, 0, &pv, "node-a/idp");
	atomic_store(&f_calls, 0);
	for (i = 0; i < 12; i++) {
		memset(&cl[i], 0, sizeof(cl[i]));
		cl[i].provider = "node-a/idp";
		cl[i].rc = -1;
		cl[i].why = why[i];
		why[i][0] = '\0';
	}
	tl_rx_pass_calls(rx, &pv, 1, cl, 12, 12, TL_RX_LANE_PASS, e_call,
	    stale_after_one ? rx : NULL);
	return atomic_load(&f_calls);
}

START_TEST(test_epoch_check)
{
	struct tl_rx rx;
	struct tl_rx_call cl[12];
	char why[12][TL_WHY_MAX];
	size_t i;

	tl_rx_init(&rx);
	rx.workers = 1;
	rx.epoch = 2;
	/* Read from the stream just now: every call is made. */
	atomic_store(&rx.epoch_read_ns, mono_now());
	ck_assert_int_eq(run_epoch(&rx, 0, cl, why), 12);
	/*
	 * The reading goes stale during the pass: no call after that
	 * (TL_EUNREACH, retried once the stream is read again).
	 */
	ck_assert_int_eq(run_epoch(&rx, 1, cl, why), 1);
	for (i = 1; i < 12; i++) {
		ck_assert_int_eq(cl[i].rc, TL_EUNREACH);
		ck_assert_msg(strstr(why[i], "last confirmed") != NULL,
		    "why: %s", why[i]);
	}
	/* Deposed: no call at all, though the provider keeps no fence. */
	atomic_store(&rx.epoch_read_ns, mono_now());
	atomic_store(&rx.deposed, 1);
	ck_assert_int_eq(run_epoch(&rx, 0, cl, why), 0);
	for (i = 0; i < 12; i++)
		ck_assert_int_eq(cl[i].rc, TL_EREFUSED);
	tl_rx_pool_free(&rx);
}
END_TEST

/* The stream's authenticator: the key's, of these bytes only. */
START_TEST(test_stream_mac)
{
	char dir[] = "/tmp/check_pass.XXXXXX", path[64], why[TL_WHY_MAX];
	struct tl_key k1 = { NULL }, k2 = { NULL };
	uint8_t h[32], mac[TL_STREAM_MAC_LEN], mac2[TL_STREAM_MAC_LEN];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/k1", dir);
	ck_assert_int_eq(tl_secret_keygen(path), 0);
	ck_assert_int_eq(tl_secret_load(path, &k1, why), 0);
	unlink(path);
	snprintf(path, sizeof(path), "%s/k2", dir);
	ck_assert_int_eq(tl_secret_keygen(path), 0);
	ck_assert_int_eq(tl_secret_load(path, &k2, why), 0);
	unlink(path);
	rmdir(dir);
	memset(h, 7, sizeof(h));
	tl_secret_stream_mac(&k1, h, sizeof(h), mac);
	tl_secret_stream_mac(&k1, h, sizeof(h), mac2);
	ck_assert_int_eq(memcmp(mac, mac2, sizeof(mac)), 0);
	ck_assert_int_eq(tl_secret_stream_mac_ok(&k1, h, sizeof(h), mac), 1);
	ck_assert_int_eq(tl_secret_stream_mac_ok(&k2, h, sizeof(h), mac), 0);
	h[31] ^= 1;
	ck_assert_int_eq(tl_secret_stream_mac_ok(&k1, h, sizeof(h), mac), 0);
	tl_secret_key_free(&k1);
	tl_secret_key_free(&k2);
}
END_TEST

/*
 * Format 2 covers the whole message: any change to seq, epoch, hash,
 * body or its length fails; the bytes are those core/secret.h states
 * (the expected MAC computed apart, by tests/harness/stream_auth.py,
 * for the key 00 01 .. 1f).
 */
START_TEST(test_stream_auth)
{
	static const uint8_t kat[TL_STREAM_MAC_LEN] = {
		0xe2, 0x06, 0xda, 0x1f, 0x44, 0xd8, 0x3a, 0x9f, 0xab, 0xb8,
		0x9b, 0xff, 0x42, 0x5e, 0x63, 0x22, 0xe4, 0xde, 0xd4, 0xc9,
		0x4b, 0xea, 0x29, 0x21, 0x20, 0xee, 0xe3, 0x67, 0x08, 0x87,
		0xaa, 0xf4,
	};
	char dir[] = "/tmp/check_pass.XXXXXX", path[64], why[TL_WHY_MAX];
	struct tl_key k = { NULL };
	struct tl_stream_auth m;
	uint8_t raw[32], h[32], mac[TL_STREAM_MAC_LEN];
	char body[] = "hello", other[] = "hellp";
	FILE *f;
	int i;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/k", dir);
	for (i = 0; i < 32; i++)
		raw[i] = (uint8_t)i;
	ck_assert_ptr_nonnull(f = fopen(path, "wb"));
	ck_assert_int_eq(fwrite(raw, 1, sizeof(raw), f), sizeof(raw));
	fclose(f);
	chmod(path, 0600);
	ck_assert_int_eq(tl_secret_load(path, &k, why), 0);
	unlink(path);
	rmdir(dir);
	memset(h, 7, sizeof(h));
	m = (struct tl_stream_auth){ 5, 2, h, body, 5 };
	tl_secret_stream_auth(&k, &m, mac);
	ck_assert_int_eq(memcmp(mac, kat, sizeof(mac)), 0);
	ck_assert_int_eq(tl_secret_stream_auth_ok(&k, &m, mac), 1);
	m.seq = 6;
	ck_assert_int_eq(tl_secret_stream_auth_ok(&k, &m, mac), 0);
	m.seq = 5, m.epoch = 1;
	ck_assert_int_eq(tl_secret_stream_auth_ok(&k, &m, mac), 0);
	m.epoch = 2, m.body = other;
	ck_assert_int_eq(tl_secret_stream_auth_ok(&k, &m, mac), 0);
	m.body = body, m.len = 4;
	ck_assert_int_eq(tl_secret_stream_auth_ok(&k, &m, mac), 0);
	m.len = 5, h[0] ^= 1;
	ck_assert_int_eq(tl_secret_stream_auth_ok(&k, &m, mac), 0);
	h[0] ^= 1;
	ck_assert_int_eq(tl_secret_stream_auth_ok(&k, &m, mac), 1);
	/* Not format 1's MAC of the same hash: no header moves across. */
	tl_secret_stream_mac(&k, h, sizeof(h), mac);
	ck_assert_int_eq(tl_secret_stream_auth_ok(&k, &m, mac), 0);
	tl_secret_key_free(&k);
}
END_TEST

/*
 * The stream's signature: Ed25519 by the control plane's key over the
 * authenticator's bytes, pinned against a signature computed apart
 * from tally (Python's cryptography, from core/secret.h's description:
 * the seed is the master key's KDF subkey 1 of context "tlcpsign").
 */
START_TEST(test_stream_sig)
{
	static const uint8_t kat[TL_SIGN_LEN] = {
		0xb5, 0xe6, 0xeb, 0x2c, 0x01, 0x36, 0x00, 0xcc, 0x26, 0x82,
		0xfc, 0xc9, 0x11, 0x4d, 0x5d, 0xa3, 0xfe, 0x18, 0xcd, 0xa3,
		0xf2, 0x1b, 0x75, 0x23, 0x9e, 0x73, 0xa4, 0x15, 0xcb, 0x5f,
		0x8c, 0x46, 0xb9, 0x42, 0x5a, 0x78, 0x8b, 0x32, 0xcc, 0x2e,
		0x67, 0x7f, 0xda, 0x5b, 0x5c, 0xfe, 0x98, 0xcd, 0x91, 0xea,
		0x66, 0x06, 0xa1, 0x72, 0x43, 0x50, 0x3f, 0x94, 0xd0, 0xd9,
		0x5a, 0x58, 0xc3, 0x06,
	};
	static const uint8_t pk8[8] = {
		0x0b, 0x89, 0x54, 0x24, 0x6d, 0x75, 0x42, 0x8d,
	};
	char dir[] = "/tmp/check_pass.XXXXXX", path[64], why[TL_WHY_MAX];
	char hexk[80];
	struct tl_key k = { NULL };
	struct tl_stream_auth m;
	uint8_t raw[32], h[32], pk[TL_SIGN_PUBLEN], pk2[TL_SIGN_PUBLEN];
	uint8_t sk[TL_SIGN_SECLEN], sig[TL_SIGN_LEN];
	char body[] = "hello", other[] = "hellp";
	FILE *f;
	int i;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/k", dir);
	for (i = 0; i < 32; i++)
		raw[i] = (uint8_t)i;
	ck_assert_ptr_nonnull(f = fopen(path, "wb"));
	ck_assert_int_eq(fwrite(raw, 1, sizeof(raw), f), sizeof(raw));
	fclose(f);
	chmod(path, 0600);
	ck_assert_int_eq(tl_secret_load(path, &k, why), 0);
	unlink(path);
	tl_secret_cp_keypair(&k, pk, sk);
	tl_secret_key_free(&k);
	ck_assert_int_eq(memcmp(pk, pk8, sizeof(pk8)), 0);
	memset(h, 7, sizeof(h));
	m = (struct tl_stream_auth){ 5, 2, h, body, 5 };
	ck_assert_int_eq(tl_secret_stream_sign(sk, &m, sig), 0);
	ck_assert_int_eq(memcmp(sig, kat, sizeof(sig)), 0);
	ck_assert_int_eq(tl_secret_stream_verify(pk, &m, sig), 0);
	m.seq = 6;
	ck_assert_int_eq(tl_secret_stream_verify(pk, &m, sig), TL_ESECRET);
	m.seq = 5, m.epoch = 1;
	ck_assert_int_eq(tl_secret_stream_verify(pk, &m, sig), TL_ESECRET);
	m.epoch = 2, m.body = other;
	ck_assert_int_eq(tl_secret_stream_verify(pk, &m, sig), TL_ESECRET);
	m.body = body, m.len = 4;
	ck_assert_int_eq(tl_secret_stream_verify(pk, &m, sig), TL_ESECRET);
	m.len = 5, h[0] ^= 1;
	ck_assert_int_eq(tl_secret_stream_verify(pk, &m, sig), TL_ESECRET);
	h[0] ^= 1;
	sig[0] ^= 1;
	ck_assert_int_eq(tl_secret_stream_verify(pk, &m, sig), TL_ESECRET);
	sig[0] ^= 1;
	ck_assert_int_eq(tl_secret_stream_verify(pk, &m, sig), 0);
	/* The operator's form of the public key: 64 hex digits. */
	for (i = 0; i < TL_SIGN_PUBLEN; i++)
		snprintf(hexk + 2 * i, 3, "%02x", pk[i]);
	ck_assert_int_eq(tl_secret_leader_key_parse(hexk, pk2), 0);
	ck_assert_int_eq(memcmp(pk, pk2, sizeof(pk)), 0);
	strcat(hexk, "\n");
	ck_assert_int_eq(tl_secret_leader_key_parse(hexk, pk2), 0);
	hexk[63] = '\0';
	ck_assert_int_eq(tl_secret_leader_key_parse(hexk, pk2), TL_EINVAL);
	hexk[0] = 'g';
	ck_assert_int_eq(tl_secret_leader_key_parse(hexk, pk2), TL_EINVAL);
	rmdir(dir);
	tl_secret_wipe(sk, sizeof(sk));
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("pass");
	TCase *tc = tcase_create("pool");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_cap_per_provider);
	tcase_add_test(tc, test_long_lane_does_not_block);
	tcase_add_test(tc, test_fifo_per_provider);
	tcase_add_test(tc, test_verify_gives_way);
	tcase_add_test(tc, test_verify_not_starved);
	suite_add_tcase(s, tc);
	tc = tcase_create("fence");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_session_fence);
	tcase_add_test(tc, test_provider_deposed);
	tcase_add_test(tc, test_cluster_gates);
	tcase_add_test(tc, test_sessions_max);
	tcase_add_test(tc, test_epoch_check);
	tcase_add_test(tc, test_stream_mac);
	tcase_add_test(tc, test_stream_auth);
	tcase_add_test(tc, test_stream_sig);
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
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
