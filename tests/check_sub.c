/*
 * check_sub.c - subscriptions (core/sub.h): order, no gap, deadlines,
 * wakeups from other processes, checkpoints across restarts, and a
 * subscriber in another process following a 100,000-event run.
 *
 * Writers and subscribers that run in other processes open the log
 * themselves after fork() (LMDB handles do not cross a fork).  Child
 * processes report through their exit status and stderr.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <errno.h>
#include <lmdb.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/sub.h"
#include "lib/tl_test.h"

#define ck_rc(rc, want) do {						\
	int rc_ = (rc), want_ = (want);					\
	ck_assert_msg(rc_ == want_, "%s: %d (%s), wanted %d (%s)", #rc,	\
	    rc_, tl_strerror(rc_), want_, tl_strerror(want_));		\
} while (0)
#define ck_ok(rc)	ck_rc((rc), 0)

/* A fresh log in a fresh directory, closed again; returns its path. */
static char *
fresh(char **dirp, const char *tag)
{
	char *ld;

	*dirp = tl_test_tmpdir(tag);
	if ((ld = strdup(*dirp)) == NULL)
		abort();
	tl_log_close(tl_test_log_create(ld, 0));
	return ld;
}

static struct tl_log *
open_log(const char *ld, unsigned flags)
{
	struct tl_log *log;
	int rc = tl_log_open(ld, flags, &log);

	if (rc != 0) {
		fprintf(stderr, "open %s: %s\n", ld, tl_strerror(rc));
		abort();
	}
	return log;
}

static void
load(struct tl_log *log, uint64_t first, uint64_t n, unsigned per_txn,
    const char *type)
{
	struct tl_test_load l = { 0 };

	l.n = n;
	l.per_txn = per_txn;
	l.first = first;
	l.tag = 7;
	l.type = type;
	ck_ok(tl_test_load(log, &l));
}

/* The workload index of an event appended by load(). */
static uint64_t
index_of(const struct tl_event *ev)
{
	uint64_t tag, i, n;

	if (tl_test_body_read(ev->body, ev->body_len, &tag, &i, &n) != 0)
		return UINT64_MAX;
	return i;
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Waits for pid with a timeout; returns its exit status or -1. */
static int
reap(pid_t pid, unsigned seconds)
{
	int st;
	unsigned i;

	for (i = 0; i < seconds * 100; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 +
			    WTERMSIG(st);
		sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

START_TEST(test_order_and_nowait)
{
	char *dir, *ld = fresh(&dir, "sub-order");
	struct tl_log *log = open_log(ld, 0);
	struct tl_sub *s;
	struct tl_event ev;
	uint64_t i;

	ck_ok(tl_sub_attach(log, NULL, &s));
	ck_rc(tl_sub_next(s, TL_SUB_NOWAIT, &ev), TL_ETIMEDOUT);
	ck_assert_uint_eq(tl_sub_position(s), 0);
	load(log, 0, 50, 7, NULL);
	for (i = 1; i <= 50; i++) {
		ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
		ck_assert_uint_eq(ev.seq, i);
		ck_assert_uint_eq(index_of(&ev), i - 1);
		ck_assert_str_eq(ev.type, "test.event");
	}
	ck_assert_uint_eq(tl_sub_position(s), 50);
	ck_assert_uint_eq(tl_sub_head(s), 50);
	ck_rc(tl_sub_next(s, TL_SUB_NOWAIT, &ev), TL_ETIMEDOUT);
	/* More after the end: seen by the next call, no wait needed. */
	load(log, 50, 3, 1, NULL);
	ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
	ck_assert_uint_eq(ev.seq, 51);
	/* No checkpoint name: nothing to commit. */
	ck_rc(tl_sub_commit(s), TL_EINVAL);
	tl_sub_close(s);
	tl_log_close(log);
	free(ld);
	tl_test_tmpdir_done(dir);
}
END_TEST

START_TEST(test_from_and_type)
{
	char *dir, *ld = fresh(&dir, "sub-from");
	struct tl_log *log = open_log(ld, 0);
	struct tl_sub_opts o = TL_SUB_OPTS_INIT;
	struct tl_sub *s;
	struct tl_event ev;
	uint64_t i;

	load(log, 0, 10, 10, "a.one");
	load(log, 10, 10, 10, "b.two");
	load(log, 20, 10, 10, "a.three");
	o.from = 15;
	ck_ok(tl_sub_attach(log, &o, &s));
	for (i = 15; i <= 30; i++) {
		ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
		ck_assert_uint_eq(ev.seq, i);
	}
	ck_rc(tl_sub_next(s, TL_SUB_NOWAIT, &ev), TL_ETIMEDOUT);
	tl_sub_close(s);

	/* A filter skips events but moves the position past them. */
	o.from = 0;
	o.type = "a.*";
	ck_ok(tl_sub_attach(log, &o, &s));
	for (i = 1; i <= 30; i++) {
		if (i > 10 && i <= 20)
			continue;
		ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
		ck_assert_uint_eq(ev.seq, i);
		ck_assert_msg(ev.type[0] == 'a', "type %s", ev.type);
	}
	ck_rc(tl_sub_next(s, TL_SUB_NOWAIT, &ev), TL_ETIMEDOUT);
	ck_assert_uint_eq(tl_sub_position(s), 30);
	load(log, 30, 5, 5, "b.two");
	ck_rc(tl_sub_next(s, TL_SUB_NOWAIT, &ev), TL_ETIMEDOUT);
	ck_assert_uint_eq(tl_sub_position(s), 35);
	tl_sub_close(s);

	/* Starting beyond the head waits for that sequence number. */
	o.type = NULL;
	o.from = 40;
	ck_ok(tl_sub_attach(log, &o, &s));
	ck_rc(tl_sub_next(s, TL_SUB_NOWAIT, &ev), TL_ETIMEDOUT);
	load(log, 35, 6, 6, NULL);
	ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
	ck_assert_uint_eq(ev.seq, 40);
	ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
	ck_assert_uint_eq(ev.seq, 41);
	tl_sub_close(s);
	tl_log_close(log);
	free(ld);
	tl_test_tmpdir_done(dir);
}
END_TEST

START_TEST(test_deadline)
{
	char *dir, *ld = fresh(&dir, "sub-deadline");
	struct tl_sub *s;
	struct tl_event ev;
	uint64_t t0, dt;

	ck_ok(tl_sub_open(ld, NULL, &s));
	ck_assert_int_ge(tl_sub_fd(s), 0);	/* inotify works here */
	t0 = tl_sub_clock();
	ck_rc(tl_sub_next(s, tl_sub_deadline(150), &ev), TL_ETIMEDOUT);
	dt = (tl_sub_clock() - t0) / 1000000u;
	ck_assert_msg(dt >= 145 && dt < 1000, "waited %llu ms for 150",
	    (unsigned long long)dt);
	/* A deadline in the past: at once. */
	t0 = tl_sub_clock();
	ck_rc(tl_sub_next(s, 1, &ev), TL_ETIMEDOUT);
	ck_assert_uint_lt((tl_sub_clock() - t0) / 1000000u, 50);
	tl_sub_close(s);
	free(ld);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* Another process appends after a while; the waiting subscriber wakes. */
START_TEST(test_wakeup_other_process)
{
	char *dir, *ld = fresh(&dir, "sub-wake");
	struct tl_sub *s;
	struct tl_event ev;
	uint64_t t0, dt;
	pid_t pid;
	int i;

	ck_ok(tl_sub_open(ld, NULL, &s));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct tl_log *log;
		struct tl_test_load l = { 0 };

		for (i = 0; i < 5; i++) {
			sleep_ms(200);
			log = open_log(ld, 0);
			l.n = 1;
			l.first = (uint64_t)i;
			if (tl_test_load(log, &l) != 0)
				_exit(1);
			tl_log_close(log);
		}
		_exit(0);
	}
	for (i = 1; i <= 5; i++) {
		t0 = tl_sub_clock();
		ck_ok(tl_sub_next(s, tl_sub_deadline(10000), &ev));
		dt = (tl_sub_clock() - t0) / 1000000u;
		ck_assert_uint_eq(ev.seq, (uint64_t)i);
		/* It came from the append, not from a poll or a timeout. */
		ck_assert_msg(dt < 600, "event %d took %llu ms", i,
		    (unsigned long long)dt);
	}
	ck_assert_int_eq(reap(pid, 30), 0);
	tl_sub_close(s);
	free(ld);
	tl_test_tmpdir_done(dir);
}
END_TEST

/*
 * The acceptance test: a subscriber in another process receives every
 * event of a 100,000-event run, in order, with no gap, while the run
 * is being appended (transactions of 100, the map growing under it).
 */
#define BIG	100000u

static int
follow_all(const char *ld, uint64_t n)
{
	struct tl_sub *s;
	struct tl_event ev;
	uint64_t want = 1;
	int rc;

	if ((rc = tl_sub_open(ld, NULL, &s)) != 0) {
		fprintf(stderr, "subscriber: open: %s\n", tl_strerror(rc));
		return 2;
	}
	while (want <= n) {
		rc = tl_sub_next(s, tl_sub_deadline(30000), &ev);
		if (rc != 0) {
			fprintf(stderr, "subscriber: after %llu: %s\n",
			    (unsigned long long)(want - 1), tl_strerror(rc));
			tl_sub_close(s);
			return 3;
		}
		if (ev.seq != want || index_of(&ev) != want - 1) {
			fprintf(stderr, "subscriber: wanted %llu, got seq "
			    "%llu index %llu\n", (unsigned long long)want,
			    (unsigned long long)ev.seq,
			    (unsigned long long)index_of(&ev));
			tl_sub_close(s);
			return 4;
		}
		want++;
	}
	/* And nothing after the last one. */
	rc = tl_sub_next(s, tl_sub_deadline(200), &ev);
	tl_sub_close(s);
	if (rc != TL_ETIMEDOUT) {
		fprintf(stderr, "subscriber: an event after the last (%s)\n",
		    tl_strerror(rc));
		return 5;
	}
	return 0;
}

START_TEST(test_100k_other_process)
{
	char *dir, *ld = fresh(&dir, "sub-100k");
	struct tl_log *log;
	pid_t pid;

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(follow_all(ld, BIG));
	log = open_log(ld, TL_LOG_NOSYNC);
	load(log, 0, BIG, 100, NULL);
	tl_log_close(log);
	ck_assert_int_eq(reap(pid, 300), 0);
	free(ld);
	tl_test_tmpdir_done(dir);
}
END_TEST

/*
 * Restarts from a checkpoint, while another process appends: each
 * subscriber reads a random number of events, commits after some of
 * them, reads a few more without committing, and goes away (closed, or
 * killed).  The next one must start exactly after the checkpoint:
 * nothing missed, nothing past it repeated.
 */
#define RESTART_N	20000u

static int
one_round(const char *ld, uint64_t *seed, uint64_t *committed, int die)
{
	struct tl_sub_opts o = TL_SUB_OPTS_INIT;
	struct tl_sub *s;
	struct tl_event ev;
	uint64_t k, m, i, expect = *committed + 1;
	int rc;

	o.checkpoint = "restart";
	if ((rc = tl_sub_open(ld, &o, &s)) != 0)
		return rc;
	if (tl_sub_position(s) != *committed) {
		fprintf(stderr, "opened at %llu, committed %llu\n",
		    (unsigned long long)tl_sub_position(s),
		    (unsigned long long)*committed);
		tl_sub_close(s);
		return TL_ECORRUPT;
	}
	k = 1 + tl_test_rand(seed) % 1500;
	m = tl_test_rand(seed) % (k + 1);
	for (i = 0; i < k && expect <= RESTART_N; i++) {
		if ((rc = tl_sub_next(s, tl_sub_deadline(30000), &ev)) != 0)
			break;
		if (ev.seq != expect || index_of(&ev) != expect - 1) {
			fprintf(stderr, "wanted %llu, got %llu\n",
			    (unsigned long long)expect,
			    (unsigned long long)ev.seq);
			rc = TL_ECORRUPT;
			break;
		}
		expect++;
		if (i + 1 == m) {
			if ((rc = tl_sub_commit(s)) != 0)
				break;
			*committed = ev.seq;
		}
	}
	if (die && rc == 0)
		kill(getpid(), SIGKILL);	/* no cleanup at all */
	tl_sub_close(s);
	return rc;
}

START_TEST(test_checkpoint_restarts)
{
	char *dir, *ld = fresh(&dir, "sub-restart");
	struct tl_sub_opts o = TL_SUB_OPTS_INIT;
	struct tl_sub *s;
	struct tl_event ev;
	struct tl_log *log;
	struct tl_txn *t;
	uint64_t seed = tl_test_seed("checkpoint restarts"), committed = 0;
	uint64_t ck;
	pid_t writer;
	int rounds = 0, rc;

	writer = fork();
	ck_assert_int_ge(writer, 0);
	if (writer == 0) {
		struct tl_test_load l = { 0 };
		uint64_t done = 0;

		log = open_log(ld, TL_LOG_NOSYNC);
		while (done < RESTART_N) {
			l.n = 50;
			l.per_txn = 50;
			l.first = done;
			if (tl_test_load(log, &l) != 0)
				_exit(1);
			done += 50;
			sleep_ms(1);
		}
		tl_log_close(log);
		_exit(0);
	}
	while (committed < RESTART_N && rounds < 10000) {
		int die = rounds % 3 == 2;

		rounds++;
		if (die) {
			/* A subscriber process that is killed mid-stream. */
			pid_t p = fork();
			int st;

			ck_assert_int_ge(p, 0);
			if (p == 0) {
				uint64_t c = committed;

				int r = one_round(ld, &seed, &c, 1);

				if (r != 0)
					fprintf(stderr, "killed round: %s\n",
					    tl_strerror(r));
				_exit(r == 0 ? 0 : 1);
			}
			waitpid(p, &st, 0);
			ck_assert_msg(WIFSIGNALED(st) || (WIFEXITED(st) &&
			    WEXITSTATUS(st) == 0), "killed round failed");
			tl_test_rand(&seed);	/* the child's draws differ */
			log = open_log(ld, TL_LOG_RDONLY);
			ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
			ck = 0;
			tl_ckpt_get(t, "sub:restart", &ck);
			tl_log_abort(t);
			tl_log_close(log);
			ck_assert_uint_ge(ck, committed);
			committed = ck;
			continue;
		}
		rc = one_round(ld, &seed, &committed, 0);
		ck_assert_msg(rc == 0, "round %d: %s", rounds, tl_strerror(rc));
	}
	ck_assert_int_eq(reap(writer, 120), 0);
	ck_assert_uint_eq(committed, RESTART_N);
	ck_assert_int_gt(rounds, 5);
	/* Past the last commit there is nothing: nothing repeated. */
	o.checkpoint = "restart";
	ck_ok(tl_sub_open(ld, &o, &s));
	ck_rc(tl_sub_next(s, TL_SUB_NOWAIT, &ev), TL_ETIMEDOUT);
	tl_sub_close(s);
	free(ld);
	tl_test_tmpdir_done(dir);
}
END_TEST

START_TEST(test_checkpoint_rules)
{
	char *dir, *ld = fresh(&dir, "sub-ckrules");
	struct tl_sub_opts o = TL_SUB_OPTS_INIT;
	struct tl_sub *s;
	struct tl_event ev;
	struct tl_log *log = open_log(ld, 0);
	struct tl_txn *t;
	uint64_t seq;

	load(log, 0, 20, 20, NULL);
	/* A new checkpoint starts at from; commit names it sub:NAME. */
	o.checkpoint = "board";
	o.from = 5;
	ck_ok(tl_sub_attach(log, &o, &s));
	ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
	ck_assert_uint_eq(ev.seq, 5);
	ck_ok(tl_sub_commit(s));
	tl_sub_close(s);
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_ckpt_get(t, "sub:board", &seq));
	ck_assert_uint_eq(seq, 5);
	ck_rc(tl_ckpt_get(t, "board", &seq), TL_ENOTFOUND);
	tl_log_abort(t);
	/* An existing checkpoint wins over from. */
	o.from = 2;
	ck_ok(tl_sub_attach(log, &o, &s));
	ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
	ck_assert_uint_eq(ev.seq, 6);
	tl_sub_close(s);
	/* Names: no spaces, no control characters, not too long. */
	o.checkpoint = "two words";
	ck_rc(tl_sub_attach(log, &o, &s), TL_EINVAL);
	ck_assert_ptr_null(s);
	o.checkpoint = "";
	ck_rc(tl_sub_attach(log, &o, &s), TL_EINVAL);
	tl_log_close(log);
	/* A read-only subscriber cannot commit. */
	o.checkpoint = "board";
	o.flags = TL_SUB_RDONLY;
	ck_ok(tl_sub_open(ld, &o, &s));
	ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
	ck_assert_uint_eq(ev.seq, 6);
	ck_rc(tl_sub_commit(s), TL_EINVAL);
	tl_sub_close(s);
	/* No log there. */
	{
		char *none = tl_test_path(dir, "none");

		ck_rc(tl_sub_open(none, NULL, &s), TL_ENOTFOUND);
		free(none);
	}
	free(ld);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* A record removed under the log: the subscriber names the gap. */
START_TEST(test_gap_detected)
{
	char *dir, *ld = fresh(&dir, "sub-gap");
	struct tl_log *log = open_log(ld, 0);
	struct tl_sub *s;
	struct tl_event ev;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k;
	uint8_t key[8] = { 0, 0, 0, 0, 0, 0, 0, 3 };

	load(log, 0, 5, 5, NULL);
	tl_log_close(log);
	ck_ok(mdb_env_create(&env));
	ck_ok(mdb_env_set_maxdbs(env, 64));
	ck_ok(mdb_env_open(env, ld, 0, 0600));
	ck_ok(mdb_txn_begin(env, NULL, 0, &txn));
	ck_ok(mdb_dbi_open(txn, "events", 0, &dbi));
	k.mv_data = key;
	k.mv_size = 8;
	ck_ok(mdb_del(txn, dbi, &k, NULL));
	ck_ok(mdb_txn_commit(txn));
	mdb_env_close(env);

	ck_ok(tl_sub_open(ld, NULL, &s));
	ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
	ck_assert_uint_eq(ev.seq, 1);
	ck_ok(tl_sub_next(s, TL_SUB_NOWAIT, &ev));
	ck_assert_uint_eq(ev.seq, 2);
	ck_rc(tl_sub_next(s, TL_SUB_NOWAIT, &ev), TL_ECORRUPT);
	ck_assert_uint_eq(tl_sub_position(s), 2);
	/* It stays there: never silently past a hole. */
	ck_rc(tl_sub_next(s, TL_SUB_NOWAIT, &ev), TL_ECORRUPT);
	tl_sub_close(s);
	free(ld);
	tl_test_tmpdir_done(dir);
}
END_TEST

static Suite *
sub_suite(void)
{
	Suite *s = suite_create("sub");
	TCase *tc;

	tc = tcase_create("basics");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_order_and_nowait);
	tcase_add_test(tc, test_from_and_type);
	tcase_add_test(tc, test_deadline);
	tcase_add_test(tc, test_checkpoint_rules);
	tcase_add_test(tc, test_gap_detected);
	suite_add_tcase(s, tc);

	tc = tcase_create("processes");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_wakeup_other_process);
	tcase_add_test(tc, test_100k_other_process);
	tcase_add_test(tc, test_checkpoint_restarts);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(sub_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
