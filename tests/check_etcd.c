/*
 * check_etcd.c - cluster/etcd.c against a real three-member etcd 3.4.
 *
 * The cluster: TALLY_TEST_ETCD_ENDPOINTS, _CA, _CERT, _KEY and _DIR
 * (tests/harness/etcd.sh's env) when set; otherwise this suite starts
 * its own with tests/harness/etcd.sh under $TALLY_TMP on free ports,
 * once per run (an unchecked fixture: a cluster that cannot start fails
 * every case, never skips one), and stops it at exit.  The other CA
 * (TALLY_TEST_CA_OTHER) and the limits (TALLY_TEST_ETCD_MAX_TXN_OPS)
 * come from the same place.
 *
 * Every case writes under its own prefix (check_etcd/PID/), so cases
 * share the cluster without seeing each other's keys; test_compact
 * compacts the whole store, which the others survive (they read only
 * revisions they made after it).  The member case (kill one of three,
 * read and write with two, start it again) runs last, in its own case.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/etcd.h"
#include "core/error.h"
#include "lib/tl_test.h"

static char	 s_eps[1024], s_ca[4200], s_cert[4200], s_key[4200];
static char	 s_ca_other[4200], s_cdir[4200], s_max_ops[32];
static char	*s_dir;
static int	 s_tried, s_ok;
static char	 s_err[9000];
static pid_t	 s_parent;

/* --- the cluster ----------------------------------------------------- */

#define ENVS(var, name) snprintf(var, sizeof(var), "%s", getenv(name) != \
    NULL ? getenv(name) : "")
#define DIRENV(var, name) (void)tl_test_env_get(s_dir, name, var, sizeof(var))

/*
 * A base port with base..+2 and base+10..+12 free now, below the
 * ephemeral range (32768-): a member killed and restarted must find its
 * ports free, not taken by some client's connection meanwhile.
 */
static int
free_base(void)
{
	int i, p, k;

	for (i = 0; i < 50; i++) {
		p = 12000 + (int)(((unsigned)getpid() * 7919u +
		    (unsigned)i * 131u) % 8000u);
		for (k = 0; k <= 12; k++)
			if ((k < 3 || k >= 10) && !tl_test_port_free(p + k))
				break;
		if (k > 12)
			return p;
	}
	return -1;
}

static int
server_start(void)
{
	const char *eps = getenv("TALLY_TEST_ETCD_ENDPOINTS");
	char port[16];
	int tries, rc = -1, base;

	if (eps != NULL && *eps != '\0') {
		ENVS(s_eps, "TALLY_TEST_ETCD_ENDPOINTS");
		ENVS(s_ca, "TALLY_TEST_ETCD_CA");
		ENVS(s_cert, "TALLY_TEST_ETCD_CERT");
		ENVS(s_key, "TALLY_TEST_ETCD_KEY");
		ENVS(s_cdir, "TALLY_TEST_ETCD_DIR");
		ENVS(s_max_ops, "TALLY_TEST_ETCD_MAX_TXN_OPS");
		ENVS(s_ca_other, "TALLY_TEST_CA_OTHER");
		return 0;
	}
	s_dir = tl_test_tmpdir("etcd");
	/* A port taken between the look and the bind: exit 4, again. */
	for (tries = 0; tries < 3; tries++) {
		if ((base = free_base()) < 0) {
			snprintf(s_err, sizeof(s_err), "no free ports");
			return -1;
		}
		snprintf(port, sizeof(port), "%d", base);
		if ((rc = tl_test_harness_run("etcd.sh", "start", s_dir,
		    port)) != 4)
			break;
	}
	if (rc != 0) {
		snprintf(s_err, sizeof(s_err), "%s start %s %s failed (exit "
		    "%d)", tl_test_harness("etcd.sh"), s_dir, port, rc);
		return -1;
	}
	DIRENV(s_eps, "TALLY_TEST_ETCD_ENDPOINTS");
	DIRENV(s_ca, "TALLY_TEST_ETCD_CA");
	DIRENV(s_cert, "TALLY_TEST_ETCD_CERT");
	DIRENV(s_key, "TALLY_TEST_ETCD_KEY");
	DIRENV(s_cdir, "TALLY_TEST_ETCD_DIR");
	DIRENV(s_max_ops, "TALLY_TEST_ETCD_MAX_TXN_OPS");
	DIRENV(s_ca_other, "TALLY_TEST_CA_OTHER");
	return 0;
}

static void
server_stop(void)
{
	if (s_dir == NULL || getpid() != s_parent)
		return;
	if (tl_test_harness_run("etcd.sh", "stop", s_dir, NULL) != 0)
		fprintf(stderr, "check_etcd: etcd.sh stop %s failed\n", s_dir);
	tl_test_tmpdir_done(s_dir);
	s_dir = NULL;
}

static void
server_up(void)
{
	if (!s_tried) {
		s_tried = 1;
		s_ok = server_start() == 0;
	}
	if (!s_ok)
		ck_abort_msg("no etcd cluster to test against: %s", s_err);
}

/* --- helpers --------------------------------------------------------- */

#define ck_rc(rc, want, e) do {						\
	int rc_ = (rc), want_ = (want);					\
	ck_assert_msg(rc_ == want_, "%s:%d: rc %d (%s), wanted %d (%s); "\
	    "lasterr: %s", __FILE__, __LINE__, rc_, tl_strerror(rc_),	\
	    want_, tl_strerror(want_), tl_etcd_lasterr(e));		\
} while (0)

static struct tl_etcd *
h_open_with(const char *eps, const char *ca, const char *cert,
    const char *key)
{
	struct tl_etcd_conf c = { eps, ca, cert, key, 5000 };
	struct tl_etcd *e;

	ck_assert_int_eq(tl_etcd_open(&c, &e), 0);
	return e;
}

static struct tl_etcd *
h_open(void)
{
	return h_open_with(s_eps, s_ca, s_cert, s_key);
}

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* This case's key NAME: check_etcd/PID/NAME (each case is a fork). */
static const char *
k(const char *name)
{
	static char buf[8][256];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof(buf[i]), "check_etcd/%d/%s", (int)getpid(),
	    name);
	return buf[i];
}

static int64_t
put(struct tl_etcd *e, const char *key, const char *val, int64_t lease)
{
	struct tl_etcd_op op = { TL_ETCD_PUT, key, strlen(key), NULL, 0, val,
	    strlen(val), lease };
	int64_t rev;
	int ok;

	ck_rc(tl_etcd_txn(e, NULL, 0, &op, 1, NULL, 0, &ok, &rev), 0, e);
	ck_assert_int_eq(ok, 1);
	ck_assert_int_gt(rev, 0);
	return rev;
}

/* The value of key ("" when absent: n is then 0). */
static size_t
get(struct tl_etcd *e, const char *key, char *out, size_t cap)
{
	struct tl_etcd_range r;
	size_t n;

	ck_rc(tl_etcd_range(e, key, strlen(key), NULL, 0, 0, 0, 0, &r), 0, e);
	n = r.n;
	out[0] = '\0';
	if (n > 0)
		snprintf(out, cap, "%s", (const char *)r.kvs[0].val);
	tl_etcd_range_free(&r);
	return n;
}

/* --- cases ----------------------------------------------------------- */

START_TEST(test_put_range)
{
	struct tl_etcd *e = h_open();
	struct tl_etcd_range r;
	uint8_t end[256];
	size_t end_len;
	const char *pfx = k("r/");
	char v[64];
	int64_t rev1;

	rev1 = put(e, k("r/a"), "one", 0);
	put(e, k("r/b"), "two", 0);
	put(e, k("r/c"), "three", 0);
	put(e, k("r/a"), "uno", 0);
	put(e, k("rz"), "outside", 0);
	ck_assert_uint_eq(get(e, k("r/a"), v, sizeof(v)), 1);
	ck_assert_str_eq(v, "uno");
	ck_assert_uint_eq(get(e, k("r/none"), v, sizeof(v)), 0);
	ck_assert_ptr_nonnull(tl_etcd_endpoint(e));

	/* The prefix, two at a time: in key order, more said. */
	tl_etcd_prefix_end(pfx, strlen(pfx), end, &end_len);
	ck_rc(tl_etcd_range(e, pfx, strlen(pfx), end, end_len, 2, 0, 0, &r),
	    0, e);
	ck_assert_uint_eq(r.n, 2);
	ck_assert_int_eq(r.more, 1);
	ck_assert_str_eq((char *)r.kvs[0].key, k("r/a"));
	ck_assert_str_eq((char *)r.kvs[1].key, k("r/b"));
	ck_assert_str_eq((char *)r.kvs[0].val, "uno");
	ck_assert_int_eq(r.kvs[0].version, 2);
	ck_assert_int_eq(r.kvs[0].create_rev, rev1);
	ck_assert_int_gt(r.kvs[0].mod_rev, rev1);
	ck_assert_int_ge(r.rev, r.kvs[0].mod_rev);
	tl_etcd_range_free(&r);

	/* All of it, keys only; rz is not under "r/". */
	ck_rc(tl_etcd_range(e, pfx, strlen(pfx), end, end_len, 0, 0, 1, &r),
	    0, e);
	ck_assert_uint_eq(r.n, 3);
	ck_assert_int_eq(r.more, 0);
	ck_assert_ptr_null(r.kvs[2].val);
	ck_assert_str_eq((char *)r.kvs[2].key, k("r/c"));
	tl_etcd_range_free(&r);

	/* At the first revision: the first value. */
	ck_rc(tl_etcd_range(e, k("r/a"), strlen(k("r/a")), NULL, 0, 0, rev1,
	    0, &r), 0, e);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_str_eq((char *)r.kvs[0].val, "one");
	tl_etcd_range_free(&r);

	/* "\0" as the end: every key from there on (ours and later). */
	ck_rc(tl_etcd_range(e, k("r/c"), strlen(k("r/c")), "", 1, 0, 0, 1,
	    &r), 0, e);
	ck_assert_uint_ge(r.n, 2);
	tl_etcd_range_free(&r);

	ck_rc(tl_etcd_range(e, "", 0, NULL, 0, 0, 0, 0, &r), TL_EINVAL, e);
	tl_etcd_range_free(&r);
	tl_etcd_close(e);
}
END_TEST

START_TEST(test_txn)
{
	struct tl_etcd *e = h_open();
	const char *a = k("t/a"), *b = k("t/b"), *f = k("t/fail");
	struct tl_etcd_op pa = { TL_ETCD_PUT, a, strlen(a), NULL, 0, "A", 1,
	    0 };
	struct tl_etcd_op pf = { TL_ETCD_PUT, f, strlen(f), NULL, 0, "F", 1,
	    0 };
	struct tl_etcd_op db = { TL_ETCD_DEL, b, strlen(b), NULL, 0, NULL, 0,
	    0 };
	struct tl_etcd_cmp c = { a, strlen(a), TL_ETCD_CREATE, TL_ETCD_EQ,
	    NULL, 0, 0 };
	struct tl_etcd_range r;
	int64_t rev, rev2;
	char v[64];
	int ok;

	/* Absent: create_revision == 0 holds, the success branch runs. */
	ck_rc(tl_etcd_txn(e, &c, 1, &pa, 1, &pf, 1, &ok, &rev), 0, e);
	ck_assert_int_eq(ok, 1);
	ck_assert_uint_eq(get(e, f, v, sizeof(v)), 0);
	ck_rc(tl_etcd_range(e, a, strlen(a), NULL, 0, 0, 0, 0, &r), 0, e);
	ck_assert_int_eq(r.kvs[0].mod_rev, rev);
	tl_etcd_range_free(&r);
	/* Present now: the failure branch runs, and nothing else. */
	ck_rc(tl_etcd_txn(e, &c, 1, &pa, 1, &pf, 1, &ok, &rev2), 0, e);
	ck_assert_int_eq(ok, 0);
	ck_assert_int_eq(rev2, rev + 1);
	ck_assert_uint_eq(get(e, f, v, sizeof(v)), 1);

	/* The value. */
	c.target = TL_ETCD_VALUE;
	c.val = "A";
	c.val_len = 1;
	ck_rc(tl_etcd_txn(e, &c, 1, NULL, 0, NULL, 0, &ok, NULL), 0, e);
	ck_assert_int_eq(ok, 1);
	c.val = "B";
	ck_rc(tl_etcd_txn(e, &c, 1, NULL, 0, NULL, 0, &ok, NULL), 0, e);
	ck_assert_int_eq(ok, 0);
	c.result = TL_ETCD_NE;
	ck_rc(tl_etcd_txn(e, &c, 1, NULL, 0, NULL, 0, &ok, NULL), 0, e);
	ck_assert_int_eq(ok, 1);

	/* The mod revision: equal, then older than now. */
	c.target = TL_ETCD_MOD;
	c.result = TL_ETCD_EQ;
	c.num = rev;
	ck_rc(tl_etcd_txn(e, &c, 1, NULL, 0, NULL, 0, &ok, NULL), 0, e);
	ck_assert_int_eq(ok, 1);
	c.num = rev - 1;
	ck_rc(tl_etcd_txn(e, &c, 1, NULL, 0, NULL, 0, &ok, NULL), 0, e);
	ck_assert_int_eq(ok, 0);
	c.result = TL_ETCD_GT;
	ck_rc(tl_etcd_txn(e, &c, 1, NULL, 0, NULL, 0, &ok, NULL), 0, e);
	ck_assert_int_eq(ok, 1);
	c.result = TL_ETCD_LT;
	c.num = rev + 1000;
	ck_rc(tl_etcd_txn(e, &c, 1, NULL, 0, NULL, 0, &ok, NULL), 0, e);
	ck_assert_int_eq(ok, 1);

	/* The version; and a delete in the success branch. */
	put(e, b, "x", 0);
	c.target = TL_ETCD_VERSION;
	c.result = TL_ETCD_EQ;
	c.num = 1;
	ck_rc(tl_etcd_txn(e, &c, 1, &db, 1, NULL, 0, &ok, NULL), 0, e);
	ck_assert_int_eq(ok, 1);
	ck_assert_uint_eq(get(e, b, v, sizeof(v)), 0);

	/* Two comparisons: both must hold. */
	{
		struct tl_etcd_cmp two[2] = {
			{ a, strlen(a), TL_ETCD_VALUE, TL_ETCD_EQ, "A", 1, 0 },
			{ b, strlen(b), TL_ETCD_CREATE, TL_ETCD_GT, NULL, 0,
			    0 },
		};

		ck_rc(tl_etcd_txn(e, two, 2, NULL, 0, NULL, 0, &ok, NULL), 0,
		    e);
		ck_assert_int_eq(ok, 0);
		two[1].result = TL_ETCD_EQ;
		ck_rc(tl_etcd_txn(e, two, 2, NULL, 0, NULL, 0, &ok, NULL), 0,
		    e);
		ck_assert_int_eq(ok, 1);
	}
	tl_etcd_close(e);
}
END_TEST

START_TEST(test_lease)
{
	struct tl_etcd *e = h_open();
	struct tl_etcd_range r;
	int64_t id, ttl, left, id2;
	long deadline;
	const char *lk = k("l/leased"), *rk = k("l/revoked");
	char v[64];

	ck_rc(tl_etcd_lease_grant(e, 2, &id, &ttl), 0, e);
	ck_assert_int_ne(id, 0);
	/* etcd raises a TTL below its minimum (1.5 election timeouts). */
	ck_assert_int_ge(ttl, 2);
	put(e, lk, "held", id);
	ck_rc(tl_etcd_range(e, lk, strlen(lk), NULL, 0, 0, 0, 0, &r), 0, e);
	ck_assert_int_eq(r.kvs[0].lease, id);
	tl_etcd_range_free(&r);
	ck_rc(tl_etcd_lease_keepalive(e, id, &left), 0, e);
	ck_assert_int_gt(left, 0);
	ck_assert_int_le(left, ttl);

	/* Revoked: its key goes at once; a second revoke is no error. */
	ck_rc(tl_etcd_lease_grant(e, 30, &id2, NULL), 0, e);
	put(e, rk, "gone soon", id2);
	ck_rc(tl_etcd_lease_revoke(e, id2), 0, e);
	ck_assert_uint_eq(get(e, rk, v, sizeof(v)), 0);
	ck_rc(tl_etcd_lease_revoke(e, id2), 0, e);
	ck_rc(tl_etcd_lease_keepalive(e, id2, &left), TL_ENOTFOUND, e);

	/* Expiry: the key goes within the TTL (and the leader's tick). */
	deadline = now_ms() + (ttl + 5) * 1000;
	while (get(e, lk, v, sizeof(v)) != 0) {
		ck_assert_msg(now_ms() < deadline, "the leased key outlived "
		    "its lease by 5 s");
		usleep(200 * 1000);
	}
	ck_rc(tl_etcd_lease_keepalive(e, id, &left), TL_ENOTFOUND, e);
	ck_assert_int_eq(left, 0);
	ck_rc(tl_etcd_lease_grant(e, 0, &id, NULL), TL_EINVAL, e);
	tl_etcd_close(e);
}
END_TEST

struct later {
	const char	*key;
	int64_t		 rev;
};

/* Puts key after 300 ms from a second handle (one thread each). */
static void *
put_later(void *arg)
{
	struct later *l = arg;
	struct tl_etcd *e = h_open();

	usleep(300 * 1000);
	l->rev = put(e, l->key, "changed", 0);
	tl_etcd_close(e);
	return NULL;
}

START_TEST(test_watch)
{
	struct tl_etcd *e = h_open();
	struct tl_etcd_status st;
	struct later l;
	pthread_t t;
	const char *wk = k("w/key");
	int64_t rev, r0, seen;
	long t0, took;
	uint8_t end[256];
	size_t end_len;

	/* A change already made at start: seen at once. */
	rev = put(e, wk, "v1", 0);
	ck_rc(tl_etcd_watch(e, wk, strlen(wk), NULL, 0, rev, 2000, &seen), 0,
	    e);
	ck_assert_int_eq(seen, rev);

	/* A change made while it waits (on the prefix). */
	ck_rc(tl_etcd_status(e, &st), 0, e);
	r0 = st.rev + 1;
	l.key = wk;
	l.rev = 0;
	ck_assert_int_eq(pthread_create(&t, NULL, put_later, &l), 0);
	tl_etcd_prefix_end(k("w/"), strlen(k("w/")), end, &end_len);
	t0 = now_ms();
	ck_rc(tl_etcd_watch(e, k("w/"), strlen(k("w/")), end, end_len, r0,
	    10000, &seen), 0, e);
	took = now_ms() - t0;
	pthread_join(t, NULL);
	ck_assert_int_eq(seen, l.rev);
	ck_assert_msg(took < 5000, "the change took %ld ms to be seen", took);

	/* Nothing: TL_ETIMEDOUT after wait_ms, not much later. */
	ck_rc(tl_etcd_status(e, &st), 0, e);
	t0 = now_ms();
	ck_rc(tl_etcd_watch(e, k("w/quiet"), strlen(k("w/quiet")), NULL, 0,
	    st.rev + 1, 700, &seen), TL_ETIMEDOUT, e);
	took = now_ms() - t0;
	ck_assert_msg(took >= 650 && took < 700 + 1500,
	    "timed out after %ld ms, waited 700", took);
	/* The handle works after an aborted and a timed-out stream. */
	ck_assert_int_gt(put(e, wk, "v3", 0), l.rev);
	ck_rc(tl_etcd_watch(e, wk, strlen(wk), NULL, 0, 0, 0, &seen),
	    TL_EINVAL, e);
	tl_etcd_close(e);
}
END_TEST

START_TEST(test_compact)
{
	struct tl_etcd *e = h_open();
	struct tl_etcd_range r;
	const char *ck = k("c/key");
	int64_t r1, r2, seen;

	r1 = put(e, ck, "old", 0);
	r2 = put(e, ck, "new", 0);
	ck_rc(tl_etcd_compact(e, r2, 1), 0, e);
	/* Below the compaction: gone, for a range and for a watch. */
	ck_rc(tl_etcd_range(e, ck, strlen(ck), NULL, 0, 0, r1, 0, &r),
	    TL_ECOMPACTED, e);
	tl_etcd_range_free(&r);
	ck_rc(tl_etcd_watch(e, ck, strlen(ck), NULL, 0, r1, 3000, &seen),
	    TL_ECOMPACTED, e);
	/* At it: still there. */
	ck_rc(tl_etcd_range(e, ck, strlen(ck), NULL, 0, 0, r2, 0, &r), 0, e);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_str_eq((char *)r.kvs[0].val, "new");
	tl_etcd_range_free(&r);
	/* Twice, and a revision not yet written. */
	ck_rc(tl_etcd_compact(e, r1, 0), TL_ECOMPACTED, e);
	ck_rc(tl_etcd_range(e, ck, strlen(ck), NULL, 0, 0, r2 + 100000, 0,
	    &r), TL_EINVAL, e);
	tl_etcd_range_free(&r);
	tl_etcd_close(e);
}
END_TEST

START_TEST(test_status)
{
	struct tl_etcd *e = h_open();
	struct tl_etcd_status st;

	ck_assert_ptr_null(tl_etcd_endpoint(e));
	ck_rc(tl_etcd_status(e, &st), 0, e);
	ck_assert_msg(strncmp(st.version, "3.4.", 4) == 0, "version %s",
	    st.version);
	ck_assert_int_gt(st.db_size, 0);
	ck_assert_uint_ne(st.leader, 0);
	ck_assert_uint_ne(st.member, 0);
	ck_assert_int_gt(st.rev, 0);
	ck_assert_msg(strstr(s_eps, tl_etcd_endpoint(e)) == s_eps,
	    "the first endpoint answers: %s", tl_etcd_endpoint(e));
	tl_etcd_close(e);
}
END_TEST

START_TEST(test_binary)
{
	struct tl_etcd *e = h_open();
	struct tl_etcd_range r;
	uint8_t key[64], val[300], end[64];
	size_t kl, i, end_len;
	struct tl_etcd_op op;
	int ok;

	kl = (size_t)snprintf((char *)key, sizeof(key), "%s", k("b/"));
	key[kl++] = 0x00;
	key[kl++] = 0xff;
	key[kl++] = 'x';
	key[kl++] = 0x00;
	for (i = 0; i < sizeof(val); i++)
		val[i] = (uint8_t)(i * 7 + (i % 3 == 0 ? 0 : 0xf0));
	val[0] = 0x00;
	val[1] = 0xff;
	memset(&op, 0, sizeof(op));
	op.kind = TL_ETCD_PUT;
	op.key = key;
	op.key_len = kl;
	op.val = val;
	op.val_len = sizeof(val);
	ck_rc(tl_etcd_txn(e, NULL, 0, &op, 1, NULL, 0, &ok, NULL), 0, e);
	ck_rc(tl_etcd_range(e, key, kl, NULL, 0, 0, 0, 0, &r), 0, e);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_uint_eq(r.kvs[0].key_len, kl);
	ck_assert_mem_eq(r.kvs[0].key, key, kl);
	ck_assert_uint_eq(r.kvs[0].key[kl], 0);
	ck_assert_uint_eq(r.kvs[0].val_len, sizeof(val));
	ck_assert_mem_eq(r.kvs[0].val, val, sizeof(val));
	ck_assert_uint_eq(r.kvs[0].val[sizeof(val)], 0);
	tl_etcd_range_free(&r);

	/* An empty value is "", not NULL. */
	op.val_len = 0;
	ck_rc(tl_etcd_txn(e, NULL, 0, &op, 1, NULL, 0, &ok, NULL), 0, e);
	ck_rc(tl_etcd_range(e, key, kl, NULL, 0, 0, 0, 0, &r), 0, e);
	ck_assert_uint_eq(r.kvs[0].val_len, 0);
	ck_assert_ptr_nonnull(r.kvs[0].val);
	tl_etcd_range_free(&r);

	/* prefix_end: the last byte below 0xff goes up, what follows goes. */
	tl_etcd_prefix_end("ab\xff\xff", 4, end, &end_len);
	ck_assert_uint_eq(end_len, 2);
	ck_assert_mem_eq(end, "ac", 2);
	tl_etcd_prefix_end("\xff\xff", 2, end, &end_len);
	ck_assert_uint_eq(end_len, 1);
	ck_assert_uint_eq(end[0], 0);
	/* The range of key's prefix (ending in 0x00 0xff x 0x00) has it. */
	tl_etcd_prefix_end(key, kl - 2, end, &end_len);
	ck_rc(tl_etcd_range(e, key, kl - 2, end, end_len, 0, 0, 1, &r), 0, e);
	ck_assert_uint_eq(r.n, 1);
	tl_etcd_range_free(&r);
	tl_etcd_close(e);
}
END_TEST

START_TEST(test_failover)
{
	struct tl_etcd *e;
	struct tl_etcd_range r;
	char eps[2048], v[64], first[1024];
	int ok;
	int port = tl_test_free_port();
	const char *fk = k("f/key");

	/* The first endpoint: a port nobody listens on. */
	snprintf(eps, sizeof(eps), "https://127.0.0.1:%d,%s", port, s_eps);
	snprintf(first, sizeof(first), "%s", s_eps);
	first[strcspn(first, ",")] = '\0';
	e = h_open_with(eps, s_ca, s_cert, s_key);
	/* A transaction: refused before anything was sent, so moved on. */
	put(e, fk, "via the second", 0);
	ck_assert_str_eq(tl_etcd_endpoint(e), first);
	ck_assert_uint_eq(get(e, fk, v, sizeof(v)), 1);
	ck_assert_str_eq(v, "via the second");
	ck_assert_msg(strstr(tl_etcd_lasterr(e), "127.0.0.1") != NULL,
	    "lasterr names the endpoint that failed: %s", tl_etcd_lasterr(e));
	tl_etcd_close(e);

	/* Nobody at all. */
	snprintf(eps, sizeof(eps), "https://127.0.0.1:%d", port);
	e = h_open_with(eps, s_ca, s_cert, s_key);
	ck_rc(tl_etcd_range(e, fk, strlen(fk), NULL, 0, 0, 0, 0, &r),
	    TL_EUNAVAIL, e);
	tl_etcd_range_free(&r);
	ck_rc(tl_etcd_txn(e, NULL, 0, NULL, 0, NULL, 0, &ok, NULL),
	    TL_EUNAVAIL, e);
	tl_etcd_close(e);
	{
		struct tl_etcd_conf bad = { "ftp://x", NULL, NULL, NULL, 0 };

		ck_assert_int_eq(tl_etcd_open(&bad, &e), TL_EINVAL);
		ck_assert_ptr_null(e);
		bad.endpoints = s_eps;
		bad.cert = s_cert;	/* without its key */
		ck_assert_int_eq(tl_etcd_open(&bad, &e), TL_EINVAL);
	}
}
END_TEST

START_TEST(test_tls_refused)
{
	struct tl_etcd *e;
	struct tl_etcd_range r;
	const char *tk = k("tls");
	int rc;

	ck_assert_msg(s_ca_other[0] != '\0', "no TALLY_TEST_CA_OTHER");
	/* Members whose certificate is not of our CA. */
	e = h_open_with(s_eps, s_ca_other, s_cert, s_key);
	ck_rc(tl_etcd_range(e, tk, strlen(tk), NULL, 0, 0, 0, 0, &r),
	    TL_EUNTRUSTED, e);
	tl_etcd_range_free(&r);
	tl_etcd_close(e);
	/* No client certificate: refused (in TLS 1.3 the refusal may only
	 * show as a reset, hence TL_EUNAVAIL too). */
	e = h_open_with(s_eps, s_ca, NULL, NULL);
	rc = tl_etcd_range(e, tk, strlen(tk), NULL, 0, 0, 0, 0, &r);
	ck_assert_msg(rc == TL_EAUTH || rc == TL_EUNAVAIL, "rc %d (%s): %s",
	    rc, tl_strerror(rc), tl_etcd_lasterr(e));
	tl_etcd_range_free(&r);
	tl_etcd_close(e);
}
END_TEST

START_TEST(test_too_big)
{
	struct tl_etcd *e = h_open();
	struct tl_etcd_op *ops;
	size_t n = (size_t)atoi(s_max_ops) + 1, i;
	char (*keys)[64];
	static const char secret[] = "SEKRETVALUE-must-not-leak";
	char *big;
	int ok;

	ck_assert_uint_gt(n, 1);
	ops = calloc(n, sizeof(*ops));
	keys = calloc(n, sizeof(*keys));
	ck_assert_ptr_nonnull(ops);
	ck_assert_ptr_nonnull(keys);
	for (i = 0; i < n; i++) {
		snprintf(keys[i], sizeof(keys[i]), "%s%zu", k("big/"), i);
		ops[i].kind = TL_ETCD_PUT;
		ops[i].key = keys[i];
		ops[i].key_len = strlen(keys[i]);
		ops[i].val = secret;
		ops[i].val_len = sizeof(secret) - 1;
	}
	ck_rc(tl_etcd_txn(e, NULL, 0, ops, n, NULL, 0, &ok, NULL), TL_ETOOBIG,
	    e);
	ck_assert_msg(strstr(tl_etcd_lasterr(e), "SEKRET") == NULL &&
	    strstr(tl_etcd_lasterr(e), "check_etcd") == NULL,
	    "lasterr has a key or value: %s", tl_etcd_lasterr(e));
	/* At the limit: fine. */
	ck_rc(tl_etcd_txn(e, NULL, 0, ops, n - 1, NULL, 0, &ok, NULL), 0, e);
	/* One value over --max-request-bytes (4 MiB). */
	big = malloc(5 << 20);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', 5 << 20);
	ops[0].val = big;
	ops[0].val_len = 5 << 20;
	ck_rc(tl_etcd_txn(e, NULL, 0, ops, 1, NULL, 0, &ok, NULL), TL_ETOOBIG,
	    e);
	free(big);
	free(ops);
	free(keys);
	tl_etcd_close(e);
}
END_TEST

/* The harness's etcd.sh ARGS... ; its first line of output into out. */
static int
harness_out(const char *args, char *out, size_t cap)
{
	char cmd[9000];
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "sh '%s' %s", tl_test_harness("etcd.sh"),
	    args);
	if ((p = popen(cmd, "r")) == NULL)
		return -1;
	out[0] = '\0';
	if (fgets(out, (int)cap, p) != NULL)
		out[strcspn(out, "\n")] = '\0';
	st = pclose(p);
	return st;
}

START_TEST(test_member_down)
{
	struct tl_etcd *e;
	char out[64], args[4400], eps[1024], *ep[3], *save = NULL;
	char order[2048], v[64];
	const char *mk = k("m/key");
	int leader, down, n = 0, ok;
	struct tl_etcd_cmp c = { mk, strlen(mk), TL_ETCD_CREATE, TL_ETCD_EQ,
	    NULL, 0, 0 };
	struct tl_etcd_op op = { TL_ETCD_PUT, mk, strlen(mk), NULL, 0, "two",
	    3, 0 };

	ck_assert_msg(s_cdir[0] != '\0', "no TALLY_TEST_ETCD_DIR");
	snprintf(args, sizeof(args), "leader '%s'", s_cdir);
	ck_assert_int_eq(harness_out(args, out, sizeof(out)), 0);
	leader = atoi(out);
	ck_assert_int_ge(leader, 1);
	/* A follower: no election to wait out, the test is about failover. */
	down = leader == 1 ? 2 : 1;
	snprintf(eps, sizeof(eps), "%s", s_eps);
	for (char *t = strtok_r(eps, ",", &save); t != NULL && n < 3;
	    t = strtok_r(NULL, ",", &save))
		ep[n++] = t;
	ck_assert_int_eq(n, 3);
	/* The member that is down first: every call fails over. */
	snprintf(order, sizeof(order), "%s,%s,%s", ep[down - 1],
	    ep[down == 1 ? 1 : 0], ep[2]);
	e = h_open_with(order, s_ca, s_cert, s_key);
	put(e, mk, "one", 0);

	snprintf(out, sizeof(out), "%d", down);
	ck_assert_int_eq(tl_test_harness_run("etcd.sh", "kill", s_cdir, out),
	    0);
	ck_assert_uint_eq(get(e, mk, v, sizeof(v)), 1);
	ck_assert_str_eq(v, "one");
	ck_assert_str_ne(tl_etcd_endpoint(e), ep[down - 1]);
	c.target = TL_ETCD_VALUE;
	c.val = "one";
	c.val_len = 3;
	ck_rc(tl_etcd_txn(e, &c, 1, &op, 1, NULL, 0, &ok, NULL), 0, e);
	ck_assert_int_eq(ok, 1);
	tl_etcd_close(e);

	/* A fresh handle, the dead member first: the same. */
	e = h_open_with(order, s_ca, s_cert, s_key);
	ck_assert_uint_eq(get(e, mk, v, sizeof(v)), 1);
	ck_assert_str_eq(v, "two");
	tl_etcd_close(e);

	snprintf(out, sizeof(out), "%d", down);
	ck_assert_int_eq(tl_test_harness_run("etcd.sh", "restart", s_cdir,
	    out), 0);
	/* It caught up: read from it alone. */
	e = h_open_with(ep[down - 1], s_ca, s_cert, s_key);
	ck_assert_uint_eq(get(e, mk, v, sizeof(v)), 1);
	ck_assert_str_eq(v, "two");
	tl_etcd_close(e);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("etcd");
	TCase *tc = tcase_create("etcd");

	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_status);
	tcase_add_test(tc, test_put_range);
	tcase_add_test(tc, test_txn);
	tcase_add_test(tc, test_binary);
	tcase_add_test(tc, test_lease);
	tcase_add_test(tc, test_watch);
	tcase_add_test(tc, test_compact);
	tcase_add_test(tc, test_failover);
	tcase_add_test(tc, test_tls_refused);
	tcase_add_test(tc, test_too_big);
	suite_add_tcase(s, tc);

	tc = tcase_create("member_down");
	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_member_down);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	s_parent = getpid();
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	server_stop();
	return failed == 0 ? 0 : 1;
}
