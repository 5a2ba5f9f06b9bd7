/*
 * check_pass.c - the reactors' worker pool (reactors/pass.h): the cap
 * of rx->workers running per provider and lane, the long lane never
 * holding up a pass's sessions, jobs taken in the order queued, and a
 * pool freed with nothing left running.  Jobs here are plain functions:
 * the pool knows nothing of drivers.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static Suite *
suite(void)
{
	Suite *s = suite_create("pass");
	TCase *tc = tcase_create("pool");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_cap_per_provider);
	tcase_add_test(tc, test_long_lane_does_not_block);
	tcase_add_test(tc, test_fifo_per_provider);
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
