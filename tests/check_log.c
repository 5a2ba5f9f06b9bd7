/*
 * check_log.c - the LMDB event log, its checkpoints and the projection
 * tables (kv) that live in the same environment.
 *
 * A few tests reach under the log with LMDB itself, to make logs that
 * tally would never write (a newer format, a newer writer's record, a
 * gap); the log is always closed while they do.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <lmdb.h>
#include <signal.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/body.h"
#include "core/error.h"
#include "core/kv.h"
#include "core/log.h"
#include "lib/tl_test.h"

#define ck_rc(rc, want) do {						\
	int rc_ = (rc), want_ = (want);					\
	ck_assert_msg(rc_ == want_, "%s: %d (%s), wanted %d (%s)", #rc,	\
	    rc_, tl_strerror(rc_), want_, tl_strerror(want_));		\
} while (0)
#define ck_ok(rc)	ck_rc((rc), 0)

static char *
newdir(const char *tag)
{
	return tl_test_tmpdir(tag);
}

static struct tl_log *
newlog(char **dirp, const char *tag)
{
	*dirp = newdir(tag);
	return tl_test_log_create(*dirp, 0);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static uint64_t
count_events(struct tl_log *log)
{
	uint64_t n = 0, bad = 0;
	char why[TL_WHY_MAX];

	ck_ok(tl_test_verify(log, &n, &bad, why));
	return n;
}

static struct tl_append
app(const char *type, const char *stream, uint64_t expect)
{
	struct tl_append a;

	memset(&a, 0, sizeof(a));
	a.type = type;
	a.stream = stream;
	a.expect = expect;
	a.actor = "test";
	return a;
}

/* The hash of an event as the chain defines it. */
static void
chain_hash(const uint8_t prev[TL_HASH_LEN], const void *raw, size_t len,
    uint8_t out[TL_HASH_LEN])
{
	crypto_generichash_blake2b_state hs;

	crypto_generichash_blake2b_init(&hs, NULL, 0, TL_HASH_LEN);
	crypto_generichash_blake2b_update(&hs, prev, TL_HASH_LEN);
	crypto_generichash_blake2b_update(&hs, raw, len);
	crypto_generichash_blake2b_final(&hs, out, TL_HASH_LEN);
}

/* --- raw LMDB, for logs tally would not write ------------------------ */

static void
raw_open(const char *dir, MDB_env **envp, MDB_txn **txnp)
{
	ck_ok(mdb_env_create(envp));
	ck_ok(mdb_env_set_maxdbs(*envp, 64));
	ck_ok(mdb_env_set_mapsize(*envp, (size_t)1 << 30));
	ck_ok(mdb_env_open(*envp, dir, 0, 0600));
	ck_ok(mdb_txn_begin(*envp, NULL, 0, txnp));
}

static void
raw_close(MDB_env *env, MDB_txn *txn)
{
	ck_ok(mdb_txn_commit(txn));
	mdb_env_close(env);
}

static void
raw_put_flags(MDB_txn *txn, const char *db, unsigned flags, const void *k,
    size_t klen, const void *v, size_t vlen)
{
	MDB_dbi dbi;
	MDB_val mk = { klen, (void *)k }, mv = { vlen, (void *)v };

	ck_ok(mdb_dbi_open(txn, db, MDB_CREATE | flags, &dbi));
	ck_ok(mdb_put(txn, dbi, &mk, &mv, 0));
}

static void
raw_put(MDB_txn *txn, const char *db, const void *k, size_t klen,
    const void *v, size_t vlen)
{
	MDB_dbi dbi;
	MDB_val mk = { klen, (void *)k }, mv = { vlen, (void *)v };

	ck_ok(mdb_dbi_open(txn, db, MDB_CREATE, &dbi));
	ck_ok(mdb_put(txn, dbi, &mk, &mv, 0));
}

static void
be64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* Reads event seq's record (hash || encoding) into a malloc'd buffer. */
static uint8_t *
raw_get_event(MDB_txn *txn, uint64_t seq, size_t *lenp)
{
	MDB_dbi dbi;
	MDB_val k, v;
	uint8_t key[8], *p;

	be64(key, seq);
	k.mv_data = key;
	k.mv_size = 8;
	ck_ok(mdb_dbi_open(txn, "events", 0, &dbi));
	ck_ok(mdb_get(txn, dbi, &k, &v));
	p = malloc(v.mv_size);
	ck_assert_ptr_nonnull(p);
	memcpy(p, v.mv_data, v.mv_size);
	*lenp = v.mv_size;
	return p;
}

/* Puts a record for seq: the chain hash over prev, then the encoding. */
static void
raw_put_event(MDB_txn *txn, uint64_t seq, const uint8_t prev[TL_HASH_LEN],
    const uint8_t *enc, size_t len, uint8_t hash_out[TL_HASH_LEN])
{
	uint8_t key[8], *rec = malloc(TL_HASH_LEN + len);

	ck_assert_ptr_nonnull(rec);
	chain_hash(prev, enc, len, rec);
	memcpy(rec + TL_HASH_LEN, enc, len);
	be64(key, seq);
	raw_put(txn, "events", key, 8, rec, TL_HASH_LEN + len);
	if (hash_out != NULL)
		memcpy(hash_out, rec, TL_HASH_LEN);
	free(rec);
}

/* --- opening --------------------------------------------------------- */

START_TEST(test_open_missing)
{
	char *dir = newdir("missing"), *sub = tl_test_path(dir, "nope");
	struct tl_log *log = (struct tl_log *)1;

	ck_rc(tl_log_open(sub, 0, &log), TL_ENOTFOUND);
	ck_assert_ptr_null(log);
	ck_rc(tl_log_open(sub, TL_LOG_RDONLY, &log), TL_ENOTFOUND);
	/* An empty directory holds no log either. */
	ck_rc(tl_log_open(dir, 0, &log), TL_ENOTFOUND);
	/* Creating needs the directory. */
	ck_rc(tl_log_open(sub, TL_LOG_CREATE, &log), TL_ENOTFOUND);
	ck_assert_ptr_nonnull(strstr(tl_strerror(TL_ENOTFOUND),
	    "TL_ENOTFOUND"));
	free(sub);
	tl_test_tmpdir_done(dir);
}
END_TEST

START_TEST(test_open_not_a_log)
{
	char *dir = newdir("notlog"), *file, *sub, *mdb;
	struct tl_log *log;
	MDB_env *env;
	MDB_txn *txn;
	FILE *fp;
	int i;

	/* A regular file. */
	file = tl_test_path(dir, "file");
	fp = fopen(file, "w");
	fputs("hello\n", fp);
	fclose(fp);
	ck_rc(tl_log_open(file, 0, &log), TL_ENOTLOG);
	ck_assert_ptr_null(log);

	/* A directory whose data.mdb is not LMDB at all. */
	sub = tl_test_path(dir, "garbage");
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	mdb = tl_test_path(sub, "data.mdb");
	fp = fopen(mdb, "w");
	for (i = 0; i < 4096; i++)
		fputs("not lmdb ", fp);
	fclose(fp);
	ck_rc(tl_log_open(sub, 0, &log), TL_ENOTLOG);
	ck_rc(tl_log_open(sub, TL_LOG_RDONLY, &log), TL_ENOTLOG);
	free(mdb);
	free(sub);

	/* An LMDB environment tally did not make. */
	sub = tl_test_path(dir, "foreign");
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	raw_open(sub, &env, &txn);
	raw_put(txn, NULL, "k", 1, "v", 1);
	raw_close(env, txn);
	ck_rc(tl_log_open(sub, 0, &log), TL_ENOTLOG);
	ck_rc(tl_log_open(sub, TL_LOG_RDONLY, &log), TL_ENOTLOG);
	free(sub);

	/* One with a "meta" table but not tally's magic. */
	sub = tl_test_path(dir, "magic");
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	raw_open(sub, &env, &txn);
	raw_put(txn, "meta", "magic", 5, "other-app", 10);
	raw_close(env, txn);
	ck_rc(tl_log_open(sub, 0, &log), TL_ENOTLOG);
	free(sub);
	ck_assert_ptr_nonnull(strstr(tl_strerror(TL_ENOTLOG), "TL_ENOTLOG"));

	free(file);
	tl_test_tmpdir_done(dir);
}
END_TEST

START_TEST(test_open_newer)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "newer");
	MDB_env *env;
	MDB_txn *txn;

	tl_log_close(log);
	raw_open(dir, &env, &txn);
	raw_put(txn, "meta", "format", 6, "\x00\x00\x00\x02", 4);
	raw_close(env, txn);
	ck_rc(tl_log_open(dir, 0, &log), TL_ENEWER);
	ck_assert_ptr_null(log);
	ck_rc(tl_log_open(dir, TL_LOG_RDONLY, &log), TL_ENEWER);
	ck_assert_ptr_nonnull(strstr(tl_strerror(TL_ENEWER), "newer"));

	/* The current format opens again. */
	raw_open(dir, &env, &txn);
	raw_put(txn, "meta", "format", 6, "\x00\x00\x00\x01", 4);
	raw_close(env, txn);
	ck_ok(tl_log_open(dir, 0, &log));
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

START_TEST(test_open_twice)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "twice"), *log2;

	ck_rc(tl_log_open(dir, TL_LOG_CREATE, &log2), TL_EEXIST);
	ck_assert_ptr_nonnull(tl_log_dir(log));
	ck_assert_str_eq(tl_log_dir(log), dir);
	ck_assert_ptr_nonnull(tl_log_lasterr(log));
	tl_log_close(log);
	tl_log_close(NULL);
	ck_rc(tl_log_open(dir, TL_LOG_CREATE, &log2), TL_EEXIST);
	tl_test_tmpdir_done(dir);
}
END_TEST

static int
append_one_fn(struct tl_txn *t, void *arg)
{
	struct tl_append a = app("test.event", arg ? arg : "s", TL_VER_ANY);

	return tl_append(t, &a, NULL, NULL);
}

/*
 * A follower's copy: every event of one log appended to another with
 * tl_log_append_raw gives the same bytes and the same head hash; an
 * event again, a gap, a broken link and altered bytes are refused and
 * nothing is written.
 */
START_TEST(test_append_raw)
{
	struct tl_log *a, *b;
	struct tl_txn *ta, *tb;
	struct tl_event ev, ev2;
	char *da, *db, why[TL_WHY_MAX];
	uint8_t ha[TL_HASH_LEN], hb[TL_HASH_LEN], *bad;
	uint64_t seq, sa = 0, sb = 0, s;
	int i;

	a = newlog(&da, "raw-a");
	b = newlog(&db, "raw-b");
	for (i = 0; i < 50; i++)
		ck_ok(tl_log_write(a, append_one_fn, i % 3 ? "x" : "y"));
	ck_ok(tl_log_begin(a, TL_TXN_RDONLY, &ta));
	ck_ok(tl_log_begin(b, 0, &tb));
	for (seq = 1; seq <= 40; seq++) {
		ck_ok(tl_log_get(ta, seq, &ev));
		ck_ok(tl_log_append_raw(tb, ev.raw, ev.raw_len, ev.hash, &s,
		    why));
		ck_assert_uint_eq(s, seq);
	}
	ck_ok(tl_log_commit(tb));
	ck_ok(tl_log_begin(b, 0, &tb));
	/* Again: TL_EEXIST, the caller compares. */
	ck_ok(tl_log_get(ta, 40, &ev));
	ck_rc(tl_log_append_raw(tb, ev.raw, ev.raw_len, ev.hash, &s, why),
	    TL_EEXIST);
	ck_assert_uint_eq(s, 40);
	/* A gap: 42 after 40. */
	ck_ok(tl_log_get(ta, 42, &ev));
	ck_rc(tl_log_append_raw(tb, ev.raw, ev.raw_len, ev.hash, &s, why),
	    TL_ECONFLICT);
	ck_assert_msg(strstr(why, "42") != NULL, "%s", why);
	/* 41 with a byte of its body changed: its hash does not match. */
	ck_ok(tl_log_get(ta, 41, &ev));
	bad = malloc(ev.raw_len);
	memcpy(bad, ev.raw, ev.raw_len);
	{
		/* The body is {}: alter the actor, "test". */
		size_t j;

		for (j = 0; j + 4 <= ev.raw_len; j++)
			if (memcmp(bad + j, "test", 4) == 0)
				break;
		ck_assert_uint_lt(j + 4, ev.raw_len + 1);
		bad[j] = 'b';
	}
	ck_rc(tl_log_append_raw(tb, bad, ev.raw_len, ev.hash, &s, why),
	    TL_ECORRUPT);
	ck_assert_msg(strstr(why, "41") != NULL, "%s", why);
	/* ... and without a hash to compare, the next event's link breaks. */
	ck_ok(tl_log_append_raw(tb, bad, ev.raw_len, NULL, &s, why));
	ck_ok(tl_log_get(ta, 42, &ev2));
	ck_rc(tl_log_append_raw(tb, ev2.raw, ev2.raw_len, ev2.hash, &s, why),
	    TL_ECORRUPT);
	ck_assert_msg(strstr(why, "42") != NULL, "%s", why);
	free(bad);
	tl_log_abort(tb);
	/* The rest, for real, in a new transaction. */
	ck_ok(tl_log_begin(b, 0, &tb));
	for (seq = 41; seq <= 50; seq++) {
		ck_ok(tl_log_get(ta, seq, &ev));
		ck_ok(tl_log_append_raw(tb, ev.raw, ev.raw_len, ev.hash, &s,
		    why));
	}
	ck_ok(tl_log_commit(tb));
	ck_ok(tl_log_last(ta, &sa, ha));
	tl_log_abort(ta);
	ck_ok(tl_log_begin(b, TL_TXN_RDONLY, &tb));
	ck_ok(tl_log_last(tb, &sb, hb));
	ck_assert_uint_eq(tl_stream_version(tb, "y", &s), 0);
	ck_assert_uint_eq(s, 17);
	tl_log_abort(tb);
	ck_assert_uint_eq(sa, sb);
	ck_assert(memcmp(ha, hb, TL_HASH_LEN) == 0);
	ck_assert_uint_eq(count_events(b), 50);
	tl_log_close(a);
	tl_log_close(b);
	tl_test_tmpdir_done(da);
	tl_test_tmpdir_done(db);
}
END_TEST

/*
 * The signatures table: a signature put in the transaction of its
 * event's append commits with it and is gone with it when that
 * transaction aborts; one never put is TL_ENOTFOUND (also in a log
 * that never had the table); a read transaction cannot put.
 */
START_TEST(test_signatures)
{
	struct tl_log *a, *b;
	struct tl_txn *ta, *tb;
	struct tl_event ev;
	struct tl_log_sig ls, got;
	char *da, *db, why[TL_WHY_MAX];
	uint64_t s;

	a = newlog(&da, "sig-a");
	b = newlog(&db, "sig-b");
	ck_ok(tl_log_write(a, append_one_fn, "x"));
	ck_ok(tl_log_write(a, append_one_fn, "x"));
	ck_ok(tl_log_begin(b, TL_TXN_RDONLY, &tb));
	ck_rc(tl_log_sig_get(tb, 1, &got), TL_ENOTFOUND);
	ck_rc(tl_log_sig_put(tb, 1, &ls), TL_EINVAL);
	tl_log_abort(tb);
	ck_ok(tl_log_begin(a, TL_TXN_RDONLY, &ta));
	memset(ls.sig, 0xa5, sizeof(ls.sig));
	ls.epoch = 3;
	ck_ok(tl_log_begin(b, 0, &tb));
	ck_ok(tl_log_get(ta, 1, &ev));
	ck_ok(tl_log_append_raw(tb, ev.raw, ev.raw_len, ev.hash, &s, why));
	ck_ok(tl_log_sig_put(tb, s, &ls));
	ck_ok(tl_log_commit(tb));
	/* Event 2 and its signature, aborted: neither is there. */
	ck_ok(tl_log_begin(b, 0, &tb));
	ck_ok(tl_log_get(ta, 2, &ev));
	ck_ok(tl_log_append_raw(tb, ev.raw, ev.raw_len, ev.hash, &s, why));
	ck_ok(tl_log_sig_put(tb, s, &ls));
	tl_log_abort(tb);
	tl_log_abort(ta);
	ck_ok(tl_log_begin(b, TL_TXN_RDONLY, &tb));
	ck_ok(tl_log_sig_get(tb, 1, &got));
	ck_assert_uint_eq(got.epoch, 3);
	ck_assert(memcmp(got.sig, ls.sig, sizeof(ls.sig)) == 0);
	ck_rc(tl_log_sig_get(tb, 2, &got), TL_ENOTFOUND);
	ck_ok(tl_log_last(tb, &s, NULL));
	ck_assert_uint_eq(s, 1);
	tl_log_abort(tb);
	tl_log_close(a);
	tl_log_close(b);
	tl_test_tmpdir_done(da);
	tl_test_tmpdir_done(db);
}
END_TEST

START_TEST(test_rdonly)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "rdonly"), *ro;
	struct tl_txn *t;
	struct tl_append a = app("test.event", "s", TL_VER_ANY);
	uint64_t seq;

	ck_ok(tl_log_write(log, append_one_fn, NULL));
	tl_log_close(log);
	ck_ok(tl_log_open(dir, TL_LOG_RDONLY, &ro));
	ck_rc(tl_log_begin(ro, 0, &t), TL_EINVAL);
	ck_rc(tl_log_write(ro, append_one_fn, NULL), TL_EINVAL);
	ck_ok(tl_log_begin(ro, TL_TXN_RDONLY, &t));
	ck_rc(tl_append(t, &a, NULL, NULL), TL_EINVAL);
	ck_ok(tl_log_last(t, &seq, NULL));
	ck_assert_uint_eq(seq, 1);
	tl_log_abort(t);
	tl_log_abort(NULL);
	tl_log_close(ro);
	tl_test_tmpdir_done(dir);
}
END_TEST

/*
 * A writer that died inside its write transaction, holding LMDB's
 * writer lock: the next writer proceeds (robust mutex), and nothing of
 * the dead transaction is in the log.
 */
static void
die_in_txn(const char *dir, int readers_too)
{
	struct tl_log *log;
	struct tl_txn *t, *rt;
	struct tl_append a = app("test.dying", "dying", TL_VER_ANY);
	int i;

	if (tl_log_open(dir, 0, &log) != 0)
		_exit(2);
	if (readers_too && tl_log_begin(log, TL_TXN_RDONLY, &rt) != 0)
		_exit(3);
	if (tl_log_begin(log, 0, &t) != 0)
		_exit(4);
	for (i = 0; i < 5; i++)
		if (tl_append(t, &a, NULL, NULL) != 0)
			_exit(5);
	raise(SIGKILL);
	_exit(6);
}

static void
stale_lock(int parent_keeps_open)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "stale");
	uint64_t t0;
	pid_t pid;
	int st, k;

	ck_ok(tl_log_write(log, append_one_fn, NULL));
	if (!parent_keeps_open) {
		tl_log_close(log);
		log = NULL;
	}
	for (k = 0; k < 2; k++) {
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			die_in_txn(dir, k);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		    "the child did not die in its transaction (status %d)",
		    st);
	}
	if (log == NULL)
		ck_ok(tl_log_open(dir, 0, &log));
	t0 = now_ns();
	ck_ok(tl_log_write(log, append_one_fn, NULL));
	ck_ok(tl_log_write(log, append_one_fn, NULL));
	ck_assert_msg(now_ns() - t0 < 5000000000ULL, "the writer waited");
	ck_assert_uint_eq(count_events(log), 3);
	{
		struct tl_txn *t;
		uint64_t v;

		ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
		ck_ok(tl_stream_version(t, "dying", &v));
		ck_assert_uint_eq(v, 0);
		tl_log_abort(t);
	}
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}

START_TEST(test_stale_lock)
{
	stale_lock(0);
}
END_TEST

START_TEST(test_stale_lock_open)
{
	stale_lock(1);
}
END_TEST

/* The map fills up: it grows, and the writer never sees it. */
START_TEST(test_map_grows)
{
	char *dir = newdir("grow");
	struct tl_log *log = tl_test_log_create(dir, (size_t)1 << 20);
	struct tl_test_load l;
	struct tl_txn *t;
	struct tl_event ev;
	uint64_t used, map, total = 0, tag, i, n;
	const size_t body = 64 * 1024;
	int k;

	ck_ok(tl_log_size(log, &used, &map));
	ck_assert_uint_eq(map, (uint64_t)1 << 20);
	memset(&l, 0, sizeof(l));
	l.body_len = body;
	l.per_stream = 7;
	l.tag = 1;
	/* Ten transactions of 5 MB, each bigger than the first map. */
	for (k = 0; k < 10; k++) {
		l.n = 80;
		l.per_txn = 80;
		l.first = (uint64_t)k * 80;
		ck_ok(tl_test_load(log, &l));
		total += l.n * body;
	}
	ck_assert_uint_ge(total, 50u << 20);
	ck_ok(tl_log_size(log, &used, &map));
	ck_assert_uint_ge(used, total);
	ck_assert_uint_ge(map, used);
	ck_assert_uint_eq(count_events(log), 800);
	tl_log_close(log);

	/* Reopened with the default map: the file's larger size wins. */
	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_size(log, &used, &map));
	ck_assert_uint_ge(map, used);
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_log_get(t, 800, &ev));
	ck_assert_uint_eq(ev.body_len, body);
	ck_ok(tl_test_body_read(ev.body, ev.body_len, &tag, &i, &n));
	ck_assert_uint_eq(i, 799);
	tl_log_abort(t);
	/* And it keeps growing from there. */
	l.n = 200;
	l.per_txn = 200;
	l.first = 800;
	ck_ok(tl_test_load(log, &l));
	ck_assert_uint_eq(count_events(log), 1000);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* --- appending and reading ------------------------------------------- */

START_TEST(test_append_read)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "append");
	struct tl_txn *t;
	struct tl_event ev[4], x;
	struct tl_append a;
	struct tl_body b;
	const void *body;
	size_t blen;
	uint8_t zero[TL_HASH_LEN] = { 0 }, h[TL_HASH_LEN], corr[TL_ID_LEN];
	uint64_t seq, ver, t0, t1, last;
	char why[TL_WHY_MAX];
	int i;

	/* Empty. */
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_log_last(t, &seq, h));
	ck_assert_uint_eq(seq, 0);
	ck_assert_mem_eq(h, zero, TL_HASH_LEN);
	ck_rc(tl_log_get(t, 1, &x), TL_ENOTFOUND);
	ck_ok(tl_log_verify(t, &seq, &last, why));
	ck_assert_uint_eq(seq, 0);
	tl_log_abort(t);

	tl_body_init(&b);
	tl_body_str(&b, "user", "alice");
	tl_body_secret(&b, "password", "\x01\x02", 2);
	ck_ok(tl_body_finish(&b, &body, &blen));
	memset(corr, 0xc0, sizeof(corr));

	t0 = now_ns();
	ck_ok(tl_log_begin(log, 0, &t));
	a = app("grant.requested", "grant/web/alice", TL_VER_NONE);
	a.body = body;
	a.body_len = blen;
	a.actor = "cli:root@host";
	ck_ok(tl_append(t, &a, &seq, &ver));
	ck_assert_uint_eq(seq, 1);
	ck_assert_uint_eq(ver, 1);
	a = app("grant.provisioned", "grant/web/alice", 1);
	a.cause = 1;
	a.corr = corr;
	a.actor = NULL;
	ck_ok(tl_append(t, &a, &seq, &ver));
	ck_assert_uint_eq(seq, 2);
	ck_assert_uint_eq(ver, 2);
	a = app("module.declared", "module/web", TL_VER_ANY);
	ck_ok(tl_append(t, &a, &seq, &ver));
	ck_assert_uint_eq(seq, 3);
	ck_assert_uint_eq(ver, 1);
	/* Inside the transaction the head is already known. */
	ck_ok(tl_log_last(t, &seq, NULL));
	ck_assert_uint_eq(seq, 3);
	ck_ok(tl_log_commit(t));
	t1 = now_ns();

	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	for (i = 1; i <= 3; i++) {
		ck_ok(tl_log_get(t, (uint64_t)i, &ev[i]));
		ck_assert_uint_eq(ev[i].seq, (uint64_t)i);
		ck_assert_uint_eq(ev[i].format, TL_ENV_FORMAT);
		ck_assert_uint_ge(ev[i].ts, t0);
		ck_assert_uint_le(ev[i].ts, t1);
		chain_hash(i == 1 ? zero : ev[i - 1].hash, ev[i].raw,
		    ev[i].raw_len, h);
		ck_assert_mem_eq(h, ev[i].hash, TL_HASH_LEN);
		ck_assert_mem_eq(ev[i].prev, i == 1 ? zero : ev[i - 1].hash,
		    TL_HASH_LEN);
	}
	ck_assert_str_eq(ev[1].type, "grant.requested");
	ck_assert_str_eq(ev[1].stream, "grant/web/alice");
	ck_assert_str_eq(ev[1].actor, "cli:root@host");
	ck_assert_uint_eq(ev[1].version, 1);
	ck_assert_uint_eq(ev[1].cause, 0);
	ck_assert_uint_eq(ev[1].body_len, blen);
	ck_assert_mem_eq(ev[1].body, body, blen);
	/* No corr given: the event starts its own correlation. */
	ck_assert_mem_eq(ev[1].corr, ev[1].id, TL_ID_LEN);
	ck_assert_str_eq(ev[2].type, "grant.provisioned");
	ck_assert_str_eq(ev[2].actor, "");
	ck_assert_uint_eq(ev[2].version, 2);
	ck_assert_uint_eq(ev[2].cause, 1);
	ck_assert_mem_eq(ev[2].corr, corr, TL_ID_LEN);
	/* No body: {}. */
	ck_assert_uint_eq(ev[3].body_len, 1);
	ck_assert_uint_eq(ev[3].body[0], 0x80);
	/* Ids are fresh. */
	ck_assert(memcmp(ev[1].id, ev[2].id, TL_ID_LEN) != 0);
	ck_assert(memcmp(ev[2].id, ev[3].id, TL_ID_LEN) != 0);
	ck_assert(memcmp(ev[1].id, zero, TL_ID_LEN) != 0);

	ck_ok(tl_log_last(t, &seq, h));
	ck_assert_uint_eq(seq, 3);
	ck_assert_mem_eq(h, ev[3].hash, TL_HASH_LEN);
	ck_rc(tl_log_get(t, 4, &x), TL_ENOTFOUND);
	ck_rc(tl_log_get(t, 0, &x), TL_ENOTFOUND);
	ck_rc(tl_log_get(t, UINT64_MAX, &x), TL_ENOTFOUND);
	ck_ok(tl_stream_version(t, "grant/web/alice", &ver));
	ck_assert_uint_eq(ver, 2);
	ck_ok(tl_stream_version(t, "module/web", &ver));
	ck_assert_uint_eq(ver, 1);
	ck_ok(tl_stream_version(t, "absent", &ver));
	ck_assert_uint_eq(ver, 0);
	ck_ok(tl_log_verify(t, &seq, &last, why));
	ck_assert_uint_eq(seq, 3);
	tl_log_abort(t);

	/* The next transaction continues the chain. */
	ck_ok(tl_log_write(log, append_one_fn, NULL));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_log_get(t, 4, &x));
	ck_ok(tl_log_get(t, 3, &ev[0]));
	ck_assert_mem_eq(x.prev, ev[0].hash, TL_HASH_LEN);
	tl_log_abort(t);
	tl_body_free(&b);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

START_TEST(test_append_invalid)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "invalid");
	struct tl_txn *t;
	struct tl_append a;
	char big[TL_STREAM_MAX + 2];
	uint64_t seq = 99;

	ck_ok(tl_log_begin(log, 0, &t));
	a = app(NULL, "s", TL_VER_ANY);
	ck_rc(tl_append(t, &a, &seq, NULL), TL_EINVAL);
	a = app("t", NULL, TL_VER_ANY);
	ck_rc(tl_append(t, &a, &seq, NULL), TL_EINVAL);
	a = app("", "s", TL_VER_ANY);
	ck_rc(tl_append(t, &a, &seq, NULL), TL_EINVAL);
	memset(big, 't', sizeof(big));
	big[TL_TYPE_MAX + 1] = '\0';
	a = app(big, "s", TL_VER_ANY);
	ck_rc(tl_append(t, &a, &seq, NULL), TL_ETOOBIG);
	big[TL_TYPE_MAX] = '\0';
	memset(big, 's', sizeof(big));
	big[TL_STREAM_MAX + 1] = '\0';
	a = app("t", big, TL_VER_ANY);
	ck_assert_int_ne(tl_append(t, &a, &seq, NULL), 0);
	a = app("t", "", TL_VER_ANY);
	ck_assert_int_ne(tl_append(t, &a, &seq, NULL), 0);
	memset(big, 'a', sizeof(big));
	big[TL_ACTOR_MAX + 1] = '\0';
	a = app("t", "s", TL_VER_ANY);
	a.actor = big;
	ck_rc(tl_append(t, &a, &seq, NULL), TL_ETOOBIG);
	a = app("t", "s", TL_VER_ANY);
	a.body = "\x90";			/* an array */
	a.body_len = 1;
	ck_rc(tl_append(t, &a, &seq, NULL), TL_EMALFORMED);
	a.body = "\x80\x80";			/* two maps */
	a.body_len = 2;
	ck_rc(tl_append(t, &a, &seq, NULL), TL_EMALFORMED);
	a.body = "\x81\xa1" "a";		/* truncated */
	a.body_len = 3;
	ck_rc(tl_append(t, &a, &seq, NULL), TL_EMALFORMED);
	a.body = "\x80";
	a.body_len = 0;
	ck_rc(tl_append(t, &a, &seq, NULL), TL_EMALFORMED);
	a = app("t", "s", TL_VER_ANY);
	a.cause = 1;				/* not written yet */
	ck_rc(tl_append(t, &a, &seq, NULL), TL_EINVAL);
	ck_assert_uint_eq(seq, 99);		/* untouched on failure */

	/* None of that wrote anything; the transaction is still good. */
	memset(big, 't', sizeof(big));
	big[TL_TYPE_MAX] = '\0';
	a = app(big, "s", TL_VER_NONE);
	ck_ok(tl_append(t, &a, &seq, NULL));
	ck_assert_uint_eq(seq, 1);
	a = app("t", "s", 1);
	a.cause = 1;
	ck_ok(tl_append(t, &a, &seq, NULL));
	ck_assert_uint_eq(seq, 2);
	ck_ok(tl_log_commit(t));
	ck_assert_uint_eq(count_events(log), 2);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

START_TEST(test_conflict)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "conflict");
	struct tl_txn *t;
	struct tl_append a;
	uint64_t seq, ver, last;

	ck_ok(tl_log_begin(log, 0, &t));
	a = app("t", "a", TL_VER_NONE);
	ck_ok(tl_append(t, &a, &seq, &ver));
	ck_assert_uint_eq(ver, 1);
	ck_rc(tl_append(t, &a, &seq, &ver), TL_ECONFLICT);
	a.expect = 1;
	ck_ok(tl_append(t, &a, &seq, &ver));
	ck_assert_uint_eq(ver, 2);
	ck_rc(tl_append(t, &a, &seq, &ver), TL_ECONFLICT);	/* stale */
	a.expect = 5;
	ck_rc(tl_append(t, &a, &seq, &ver), TL_ECONFLICT);	/* ahead */
	/* Interleaved streams: each keeps its own version. */
	a = app("t", "b", TL_VER_NONE);
	ck_ok(tl_append(t, &a, &seq, &ver));
	ck_assert_uint_eq(ver, 1);
	a = app("t", "a", 2);
	ck_ok(tl_append(t, &a, &seq, &ver));
	ck_assert_uint_eq(ver, 3);
	a = app("t", "b", 2);
	ck_rc(tl_append(t, &a, &seq, &ver), TL_ECONFLICT);
	a.expect = 1;
	ck_ok(tl_append(t, &a, &seq, &ver));
	ck_assert_uint_eq(ver, 2);
	a = app("t", "a", TL_VER_ANY);
	ck_ok(tl_append(t, &a, &seq, &ver));
	ck_assert_uint_eq(ver, 4);
	ck_assert_uint_eq(seq, 6);
	ck_ok(tl_log_commit(t));

	/* In a later transaction, from the index. */
	ck_ok(tl_log_begin(log, 0, &t));
	ck_ok(tl_stream_version(t, "a", &ver));
	ck_assert_uint_eq(ver, 4);
	ck_ok(tl_stream_version(t, "b", &ver));
	ck_assert_uint_eq(ver, 2);
	a = app("t", "a", 3);
	ck_rc(tl_append(t, &a, &seq, &ver), TL_ECONFLICT);
	a = app("t", "b", TL_VER_NONE);
	ck_rc(tl_append(t, &a, &seq, &ver), TL_ECONFLICT);
	/* A conflict wrote nothing. */
	ck_ok(tl_log_last(t, &last, NULL));
	ck_assert_uint_eq(last, 6);
	a = app("t", "b", 2);
	ck_ok(tl_append(t, &a, &seq, &ver));
	ck_assert_uint_eq(seq, 7);
	ck_assert_uint_eq(ver, 3);
	ck_ok(tl_log_commit(t));
	ck_assert_uint_eq(count_events(log), 7);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

static int
fail_fn(struct tl_txn *t, void *arg)
{
	struct tl_append a = app("t", "s", TL_VER_ANY);
	int rc;

	(void)arg;
	if ((rc = tl_append(t, &a, NULL, NULL)) != 0)
		return rc;
	if ((rc = tl_ckpt_set(t, "reactor", 1)) != 0)
		return rc;
	return TL_EREFUSED;
}

static int
ckpt_fn(struct tl_txn *t, void *arg)
{
	struct tl_append a = app("t", "s", TL_VER_ANY);
	uint64_t seq;
	int rc;

	(void)arg;
	if ((rc = tl_append(t, &a, &seq, NULL)) != 0)
		return rc;
	return tl_ckpt_set(t, "reactor", seq);
}

struct ckpt_seen {
	int	 n;
	char	 names[4][32];
	uint64_t seqs[4];
};

static int
ckpt_each_fn(const char *name, uint64_t seq, void *arg)
{
	struct ckpt_seen *s = arg;

	if (s->n >= 4)
		return -1;
	snprintf(s->names[s->n], sizeof(s->names[0]), "%s", name);
	s->seqs[s->n++] = seq;
	return 0;
}

/* Checkpoints commit with the events of their transaction, or not at all. */
START_TEST(test_checkpoints)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "ckpt");
	struct tl_txn *t;
	struct tl_append a = app("t", "s", TL_VER_ANY);
	struct ckpt_seen seen;
	char name[TL_CKPT_NAME_MAX + 2];
	uint64_t seq;

	ck_ok(tl_log_begin(log, 0, &t));
	ck_rc(tl_ckpt_get(t, "provisioner", &seq), TL_ENOTFOUND);
	ck_ok(tl_append(t, &a, NULL, NULL));
	ck_ok(tl_append(t, &a, NULL, NULL));
	ck_ok(tl_ckpt_set(t, "provisioner", 2));
	ck_ok(tl_ckpt_get(t, "provisioner", &seq));
	ck_assert_uint_eq(seq, 2);
	tl_log_abort(t);
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_rc(tl_ckpt_get(t, "provisioner", &seq), TL_ENOTFOUND);
	ck_ok(tl_log_last(t, &seq, NULL));
	ck_assert_uint_eq(seq, 0);
	tl_log_abort(t);

	/* Through tl_log_write: fn fails, neither is written. */
	ck_rc(tl_log_write(log, fail_fn, NULL), TL_EREFUSED);
	ck_assert_uint_eq(count_events(log), 0);
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_rc(tl_ckpt_get(t, "reactor", &seq), TL_ENOTFOUND);
	tl_log_abort(t);

	/* fn succeeds: both are. */
	ck_ok(tl_log_write(log, ckpt_fn, NULL));
	ck_ok(tl_log_write(log, ckpt_fn, NULL));
	ck_ok(tl_log_begin(log, 0, &t));
	ck_ok(tl_ckpt_get(t, "reactor", &seq));
	ck_assert_uint_eq(seq, 2);
	ck_ok(tl_ckpt_set(t, "publisher", 1));
	ck_ok(tl_ckpt_set(t, "publisher", 2));	/* overwrites */
	memset(name, 'n', sizeof(name));
	name[TL_CKPT_NAME_MAX] = '\0';
	ck_ok(tl_ckpt_set(t, name, 7));
	name[TL_CKPT_NAME_MAX] = 'n';
	name[TL_CKPT_NAME_MAX + 1] = '\0';
	ck_rc(tl_ckpt_set(t, name, 7), TL_EINVAL);
	ck_rc(tl_ckpt_get(t, name, &seq), TL_EINVAL);
	ck_rc(tl_ckpt_set(t, "", 7), TL_EINVAL);
	ck_ok(tl_log_commit(t));

	ck_ok(tl_log_begin(log, 0, &t));
	memset(&seen, 0, sizeof(seen));
	ck_ok(tl_ckpt_each(t, ckpt_each_fn, &seen));
	ck_assert_int_eq(seen.n, 3);
	ck_assert_str_eq(seen.names[1], "publisher");
	ck_assert_uint_eq(seen.seqs[1], 2);
	ck_assert_str_eq(seen.names[2], "reactor");
	ck_assert_uint_eq(seen.seqs[2], 2);
	ck_ok(tl_ckpt_del(t, "publisher"));
	ck_rc(tl_ckpt_get(t, "publisher", &seq), TL_ENOTFOUND);
	memset(&seen, 0, sizeof(seen));
	ck_ok(tl_ckpt_each(t, ckpt_each_fn, &seen));
	ck_assert_int_eq(seen.n, 2);
	ck_ok(tl_log_commit(t));
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* --- reading with filters -------------------------------------------- */

#define NF	30
static const char *const ftypes[] = { "grant.requested",
	"grant.provisioned", "module.declared", "grantee.added" };
static const char *const fstreams[] = { "s1", "s2", "s3" };

static const char *
ftype(int i)
{
	return ftypes[i % 4];
}

static const char *
fstream(int i)
{
	return fstreams[(i / 2) % 3];
}

static int
filter_fn(struct tl_txn *t, void *arg)
{
	struct tl_append a;
	int i, rc;

	(void)arg;
	for (i = 0; i < NF; i++) {
		a = app(ftype(i), fstream(i), TL_VER_ANY);
		if ((rc = tl_append(t, &a, NULL, NULL)) != 0)
			return rc;
	}
	return 0;
}

struct fcase {
	uint64_t	 from, to;
	const char	*stream, *type;
};

static const struct fcase fcases[] = {
	{ 0, 0, NULL, NULL },
	{ 1, 0, NULL, NULL },
	{ 5, 0, NULL, NULL },
	{ 0, 7, NULL, NULL },
	{ 5, 7, NULL, NULL },
	{ 7, 7, NULL, NULL },
	{ 30, 30, NULL, NULL },
	{ 31, 0, NULL, NULL },
	{ 8, 3, NULL, NULL },
	{ 0, 1000, NULL, NULL },
	{ 0, 0, "s2", NULL },
	{ 10, 0, "s2", NULL },
	{ 0, 10, "s2", NULL },
	{ 10, 20, "s2", NULL },
	{ 11, 11, "s2", NULL },		/* s2 holds 11 */
	{ 0, 0, "absent", NULL },
	{ 0, 0, NULL, "grant.*" },
	{ 0, 0, NULL, "grant*" },
	{ 0, 0, NULL, "module.declared" },
	{ 0, 0, NULL, "nomatch.*" },
	{ 3, 25, NULL, "grant.*" },
	{ 0, 0, "s1", "grant.*" },
	{ 4, 20, "s3", "*.declared" },
};

START_TEST(test_filters)
{
	char *dir;
	struct tl_log *log;
	const struct fcase *c = &fcases[_i];
	struct tl_filter f;
	struct tl_iter *it;
	struct tl_txn *t;
	struct tl_event ev;
	uint64_t want[NF], lastver = 0;
	int nwant = 0, ngot = 0, i, rc;

	log = newlog(&dir, "filter");
	ck_ok(tl_log_write(log, filter_fn, NULL));
	for (i = 0; i < NF; i++) {
		uint64_t seq = (uint64_t)i + 1;

		if (seq < c->from || (c->to != 0 && seq > c->to))
			continue;
		if (c->stream != NULL && strcmp(c->stream, fstream(i)) != 0)
			continue;
		if (c->type != NULL && fnmatch(c->type, ftype(i), 0) != 0)
			continue;
		want[nwant++] = seq;
	}

	memset(&f, 0, sizeof(f));
	f.from = c->from;
	f.to = c->to;
	f.stream = c->stream;
	f.type = c->type;
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_iter_open(t, &f, &it));
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		ck_assert_msg(ngot < nwant, "case %d: more than %d events",
		    _i, nwant);
		ck_assert_msg(ev.seq == want[ngot], "case %d: #%d is seq "
		    "%llu, wanted %llu", _i, ngot,
		    (unsigned long long)ev.seq,
		    (unsigned long long)want[ngot]);
		ck_assert_str_eq(ev.type, ftype((int)ev.seq - 1));
		ck_assert_str_eq(ev.stream, fstream((int)ev.seq - 1));
		if (c->stream != NULL && c->type == NULL && c->from <= 1) {
			/* A whole stream: versions 1, 2, 3, ... */
			ck_assert_uint_eq(ev.version, lastver + 1);
			lastver = ev.version;
		}
		ngot++;
	}
	ck_rc(rc, TL_EEOF);
	ck_rc(tl_iter_next(it, &ev), TL_EEOF);		/* stays at the end */
	ck_assert_msg(ngot == nwant, "case %d: %d events, wanted %d", _i,
	    ngot, nwant);
	tl_iter_close(it);
	tl_iter_close(NULL);
	tl_log_abort(t);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* A NULL filter is the whole log; a filter is copied at open. */
START_TEST(test_iter_whole)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "iter");
	struct tl_filter f;
	struct tl_iter *it, *it2;
	struct tl_txn *t;
	struct tl_event ev;
	char stream[8] = "s2", type[16] = "grant.*";
	uint64_t n = 0;
	int rc;

	ck_ok(tl_log_write(log, filter_fn, NULL));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_iter_open(t, NULL, &it));
	while ((rc = tl_iter_next(it, &ev)) == 0)
		ck_assert_uint_eq(ev.seq, ++n);
	ck_rc(rc, TL_EEOF);
	ck_assert_uint_eq(n, NF);
	tl_iter_close(it);

	memset(&f, 0, sizeof(f));
	f.stream = stream;
	f.type = type;
	ck_ok(tl_iter_open(t, &f, &it));
	ck_ok(tl_iter_open(t, NULL, &it2));	/* two at once */
	strcpy(stream, "s1");
	strcpy(type, "module.*");
	n = 0;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		ck_assert_str_eq(ev.stream, "s2");
		ck_assert_int_eq(strncmp(ev.type, "grant.", 6), 0);
		n++;
	}
	ck_rc(rc, TL_EEOF);
	ck_assert_uint_gt(n, 0);
	ck_ok(tl_iter_next(it2, &ev));
	ck_assert_uint_eq(ev.seq, 1);
	tl_iter_close(it2);
	tl_iter_close(it);
	tl_log_abort(t);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* --- a newer writer -------------------------------------------------- */

/*
 * Encodes ev with an extra header field a newer tally might write, the
 * way tl_env_encode would otherwise: fixmap 11 -> 12.
 */
static uint8_t *
encode_newer(const struct tl_event *ev, size_t *lenp)
{
	static const char extra[] = "\xa6" "future" "\x92\xa3yes\x80";
	uint8_t buf[1024], *p;
	size_t len;

	ck_ok(tl_env_encode(ev, NULL, 0, buf, sizeof(buf), &len));
	ck_assert_uint_eq(buf[0], 0x8b);
	p = malloc(len + sizeof(extra) - 1);
	ck_assert_ptr_nonnull(p);
	p[0] = 0x8c;
	memcpy(p + 1, extra, sizeof(extra) - 1);
	memcpy(p + sizeof(extra), buf + 1, len - 1);
	*lenp = len + sizeof(extra) - 1;
	return p;
}

START_TEST(test_newer_writer)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "newerw");
	struct tl_txn *t;
	struct tl_event ev, got;
	struct tl_iter *it;
	MDB_env *env;
	MDB_txn *txn;
	uint8_t head[TL_HASH_LEN], *enc, *rec;
	uint64_t seq, n, bad;
	size_t len, rlen;
	char why[TL_WHY_MAX];
	int rc;

	ck_ok(tl_log_write(log, append_one_fn, NULL));
	ck_ok(tl_log_write(log, append_one_fn, NULL));
	tl_log_close(log);

	/* Seq 3, by a newer writer of the same format: extra fields. */
	raw_open(dir, &env, &txn);
	rec = raw_get_event(txn, 2, &rlen);
	memcpy(head, rec, TL_HASH_LEN);
	free(rec);
	memset(&ev, 0, sizeof(ev));
	ev.format = TL_ENV_FORMAT;
	ev.seq = 3;
	ev.ts = now_ns();
	ev.version = 3;
	ev.cause = 2;
	memset(ev.id, 7, TL_ID_LEN);
	memset(ev.corr, 7, TL_ID_LEN);
	memcpy(ev.prev, head, TL_HASH_LEN);
	strcpy(ev.type, "test.event");
	strcpy(ev.stream, "s");
	strcpy(ev.actor, "tally 9");
	enc = encode_newer(&ev, &len);
	raw_put_event(txn, 3, head, enc, len, head);
	raw_put_flags(txn, "streams", MDB_DUPSORT | MDB_DUPFIXED, "s", 1,
	    "\0\0\0\0\0\0\0\3", 8);
	free(enc);
	raw_close(env, txn);

	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_log_get(t, 3, &got));
	ck_assert_str_eq(got.actor, "tally 9");
	ck_assert_uint_eq(got.cause, 2);
	ck_assert_mem_eq(got.hash, head, TL_HASH_LEN);
	ck_ok(tl_log_verify(t, &n, &bad, why));
	ck_assert_uint_eq(n, 3);
	tl_log_abort(t);
	/* We append after it; the chain holds. */
	ck_ok(tl_log_write(log, append_one_fn, NULL));
	ck_assert_uint_eq(count_events(log), 4);
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_log_get(t, 4, &got));
	ck_assert_uint_eq(got.version, 4);
	ck_assert_mem_eq(got.prev, head, TL_HASH_LEN);
	memcpy(head, got.hash, TL_HASH_LEN);
	tl_log_abort(t);
	tl_log_close(log);

	/* Seq 5 in a newer format: refused as newer, not as corrupt. */
	raw_open(dir, &env, &txn);
	ev.format = TL_ENV_FORMAT + 1;
	ev.seq = 5;
	ev.version = 5;
	memcpy(ev.prev, head, TL_HASH_LEN);
	enc = encode_newer(&ev, &len);
	raw_put_event(txn, 5, head, enc, len, NULL);
	free(enc);
	raw_close(env, txn);

	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_log_get(t, 4, &got));
	ck_rc(tl_log_get(t, 5, &got), TL_ENEWER);
	ck_ok(tl_iter_open(t, NULL, &it));
	for (seq = 1; (rc = tl_iter_next(it, &got)) == 0; seq++)
		ck_assert_uint_eq(got.seq, seq);
	ck_rc(rc, TL_ENEWER);
	ck_assert_uint_eq(seq, 5);
	ck_assert_uint_eq(tl_iter_errseq(it), 5);
	tl_iter_close(it);
	rc = tl_log_verify(t, &n, &bad, why);
	ck_rc(rc, TL_ENEWER);
	ck_assert_uint_eq(bad, 5);
	ck_assert_uint_eq(n, 4);
	ck_assert_ptr_nonnull(strstr(why, "newer"));
	tl_log_abort(t);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* --- verification ---------------------------------------------------- */

START_TEST(test_verify_tamper)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "tamper");
	struct tl_test_load l;
	struct tl_txn *t;
	struct tl_event ev;
	char *mdb = tl_test_path(dir, "data.mdb"), why[TL_WHY_MAX];
	uint8_t pat[11];
	uint64_t n, bad;

	memset(&l, 0, sizeof(l));
	l.n = 10000;
	l.per_txn = 1000;
	l.body_len = 100;
	l.tag = 77;
	ck_ok(tl_test_load(log, &l));
	ck_assert_uint_eq(count_events(log), 10000);
	tl_log_close(log);

	/* One byte of event 5000's body (index 4999): a pad byte. */
	tl_test_body_marker(pat, 4999);
	ck_assert_int_ge(tl_test_patch_file(mdb, pat, sizeof(pat), 11 + 20, 'y'), 1);
	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	/* Still an event: only the chain can tell. */
	ck_ok(tl_log_get(t, 5000, &ev));
	bad = 0;
	ck_rc(tl_log_verify(t, &n, &bad, why), TL_ECORRUPT);
	ck_assert_uint_eq(bad, 5000);
	ck_assert_uint_eq(n, 4999);
	ck_assert_ptr_nonnull(strstr(why, "hash"));
	tl_log_abort(t);
	tl_log_close(log);

	/* Put it back: sound again.  Then break event 7001. */
	ck_assert_int_ge(tl_test_patch_file(mdb, pat, sizeof(pat), 11 + 20, 'x'), 1);
	ck_ok(tl_log_open(dir, 0, &log));
	ck_assert_uint_eq(count_events(log), 10000);
	tl_log_close(log);
	tl_test_body_marker(pat, 7000);
	ck_assert_int_ge(tl_test_patch_file(mdb, pat, sizeof(pat), 11 + 17 + 50, 'w'),
	    1);
	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_rc(tl_log_verify(t, &n, &bad, why), TL_ECORRUPT);
	ck_assert_uint_eq(bad, 7001);
	ck_assert_uint_eq(n, 7000);
	tl_log_abort(t);
	tl_log_close(log);

	/* Two at once (verify hashes in batches): the first one counts. */
	tl_test_body_marker(pat, 9499);
	ck_assert_int_ge(tl_test_patch_file(mdb, pat, sizeof(pat), 11 + 20, 'z'), 1);
	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_rc(tl_log_verify(t, &n, &bad, why), TL_ECORRUPT);
	ck_assert_uint_eq(bad, 7001);
	tl_log_abort(t);
	tl_log_close(log);
	tl_test_body_marker(pat, 7000);
	ck_assert_int_ge(tl_test_patch_file(mdb, pat, sizeof(pat), 11 + 17 + 50, 'x'),
	    1);
	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_rc(tl_log_verify(t, &n, &bad, why), TL_ECORRUPT);
	ck_assert_uint_eq(bad, 9500);
	ck_assert_uint_eq(n, 9499);
	tl_log_abort(t);
	tl_log_close(log);
	free(mdb);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* tl_log_check in a transaction of its own; *checkedp as it says. */
static int
check_in(struct tl_log *log, unsigned flags, uint64_t *checkedp,
    uint64_t *badp)
{
	struct tl_txn *t;
	char why[TL_WHY_MAX];
	int rc;

	ck_ok(tl_log_begin(log, flags, &t));
	rc = tl_log_check(t, checkedp, badp, why);
	if (rc == 0 && !(flags & TL_TXN_RDONLY))
		ck_ok(tl_log_commit(t));
	else
		tl_log_abort(t);
	return rc;
}

/*
 * The cheap check: from the verified record, which a write moves to
 * the head it checked, so that a write checks only what was appended
 * since (its cost does not grow with the log); a read checks but does
 * not move it.  A change after the record is found, naming the event;
 * one before it only by the full walk (log.h says so).
 */
START_TEST(test_check_record)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "check");
	struct tl_test_load l;
	struct tl_chain c;
	struct tl_txn *t;
	char *mdb = tl_test_path(dir, "data.mdb"), why[TL_WHY_MAX];
	uint8_t pat[11];
	uint64_t n, bad, i;

	memset(&l, 0, sizeof(l));
	l.n = 100000;
	l.per_txn = 1000;
	l.body_len = 100;
	l.tag = 21;
	ck_ok(tl_test_load(log, &l));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_rc(tl_log_verified(t, &c), TL_ENOTFOUND);
	tl_log_abort(t);
	/* No record: the whole log once; a read leaves no record. */
	ck_ok(check_in(log, TL_TXN_RDONLY, &n, &bad));
	ck_assert_uint_eq(n, 100000);
	ck_ok(check_in(log, 0, &n, &bad));
	ck_assert_uint_eq(n, 100000);
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_log_verified(t, &c));
	tl_log_abort(t);
	ck_assert_uint_eq(c.seq, 100000);
	/* Then each write checks what came since, and moves the record. */
	for (i = 0; i < 3; i++) {
		ck_ok(tl_log_write(log, append_one_fn, NULL));
		ck_ok(check_in(log, 0, &n, &bad));
		ck_assert_uint_eq(n, 1);
		ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
		ck_ok(tl_log_verified(t, &c));
		tl_log_abort(t);
		ck_assert_uint_eq(c.seq, 100001 + i);
	}
	ck_ok(check_in(log, 0, &n, &bad));
	ck_assert_uint_eq(n, 0);
	{
		/* The measurement: a checked write on 100,000 events and on 100. */
		char *dir2;
		struct tl_log *small = newlog(&dir2, "check-small");
		uint64_t t0, big_ns, small_ns;
		struct tl_test_load l2;

		memset(&l2, 0, sizeof(l2));
		l2.n = 100;
		l2.body_len = 100;
		l2.tag = 22;
		ck_ok(tl_test_load(small, &l2));
		ck_ok(check_in(small, 0, &n, &bad));
		t0 = now_ns();
		for (i = 0; i < 50; i++) {
			ck_ok(tl_log_write(log, append_one_fn, NULL));
			ck_ok(check_in(log, 0, &n, &bad));
			ck_assert_uint_eq(n, 1);
		}
		big_ns = (now_ns() - t0) / 50;
		t0 = now_ns();
		for (i = 0; i < 50; i++) {
			ck_ok(tl_log_write(small, append_one_fn, NULL));
			ck_ok(check_in(small, 0, &n, &bad));
			ck_assert_uint_eq(n, 1);
		}
		small_ns = (now_ns() - t0) / 50;
		printf("check_log: append + checked write: %.1f us on 100,000 "
		    "events, %.1f us on 100 (the checks walked 1 event each)\n",
		    big_ns / 1e3, small_ns / 1e3);
		tl_log_close(small);
		tl_test_tmpdir_done(dir2);
	}
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_log_verified(t, &c));
	tl_log_abort(t);
	tl_log_close(log);

	/* After the record: found, naming it; the record stays. */
	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_write(log, append_one_fn, "zzmark"));
	ck_ok(tl_log_write(log, append_one_fn, "zzmark"));
	tl_log_close(log);
	{
		/* The two events on stream zzmark, after the record. */
		const char *typ = "zzmark";

		ck_assert_int_ge(tl_test_patch_file(mdb, (const uint8_t *)typ,
		    strlen(typ), 2, 'Q'), 1);
		ck_ok(tl_log_open(dir, 0, &log));
		bad = 0;
		ck_rc(check_in(log, 0, &n, &bad), TL_ECORRUPT);
		ck_assert_uint_eq(bad, c.seq + 1);
		ck_rc(check_in(log, TL_TXN_RDONLY, &n, &bad), TL_ECORRUPT);
		ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
		{
			struct tl_chain c2;

			ck_ok(tl_log_verified(t, &c2));
			ck_assert_uint_eq(c2.seq, c.seq);
		}
		tl_log_abort(t);
		tl_log_close(log);
		ck_assert_int_ge(tl_test_patch_file(mdb, (const uint8_t *)"zzQark",
		    6, 2, 'm'), 1);
	}
	/* Before the record: only the full walk finds it. */
	tl_test_body_marker(pat, 50000);
	ck_assert_int_ge(tl_test_patch_file(mdb, pat, sizeof(pat), 11 + 20, 'y'), 1);
	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(check_in(log, 0, &n, &bad));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_rc(tl_log_verify(t, &n, &bad, why), TL_ECORRUPT);
	ck_assert_uint_eq(bad, 50001);
	tl_log_abort(t);
	tl_log_close(log);
	free(mdb);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* How far verify_more got, in a fresh read transaction. */
static int
more(struct tl_log *log, struct tl_chain *c, uint64_t *badp, char *why)
{
	struct tl_txn *t;
	int rc;

	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	rc = tl_log_verify_more(t, c, badp, why);
	tl_log_abort(t);
	return rc;
}

/* The chain checked where it is used: in steps, while iterating, at append. */
START_TEST(test_verify_incremental)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "more");
	struct tl_test_load l;
	struct tl_chain c = TL_CHAIN_INIT;
	struct tl_filter f;
	struct tl_iter *it;
	struct tl_txn *t;
	struct tl_event ev;
	char *mdb = tl_test_path(dir, "data.mdb"), why[TL_WHY_MAX];
	uint8_t pat[11];
	uint64_t bad = 0, n;
	int rc;

	memset(&l, 0, sizeof(l));
	l.n = 2000;
	l.per_txn = 500;
	l.body_len = 100;
	l.tag = 5;
	ck_ok(tl_test_load(log, &l));
	ck_ok(more(log, &c, &bad, why));
	ck_assert_uint_eq(c.seq, 2000);
	l.n = 500;
	l.first = 2000;
	ck_ok(tl_test_load(log, &l));
	tl_log_close(log);

	/* Event 2201 changed: the step stops there and c stays put. */
	tl_test_body_marker(pat, 2200);
	ck_assert_int_ge(tl_test_patch_file(mdb, pat, sizeof(pat), 11 + 20,
	    'y'), 1);
	ck_ok(tl_log_open(dir, 0, &log));
	ck_rc(more(log, &c, &bad, why), TL_ECORRUPT);
	ck_assert_uint_eq(bad, 2201);
	ck_assert_uint_eq(c.seq, 2000);

	/* A walk with the chain stops at it; one without does not see it. */
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	memset(&f, 0, sizeof(f));
	f.from = 1500;
	f.chain = 1;
	ck_ok(tl_iter_open(t, &f, &it));
	for (n = 0; (rc = tl_iter_next(it, &ev)) == 0; n++)
		;
	ck_rc(rc, TL_ECORRUPT);
	ck_assert_uint_eq(tl_iter_errseq(it), 2201);
	ck_assert_uint_eq(n, 2201 - 1500);
	ck_assert_ptr_nonnull(strstr(tl_log_lasterr(log), "event 2201"));
	tl_iter_close(it);
	f.chain = 0;
	ck_ok(tl_iter_open(t, &f, &it));
	for (n = 0; (rc = tl_iter_next(it, &ev)) == 0; n++)
		;
	ck_rc(rc, TL_EEOF);
	ck_assert_uint_eq(n, 1001);
	tl_iter_close(it);
	tl_log_abort(t);

	/* The head still verifies: an append is fine. */
	ck_ok(tl_log_write(log, append_one_fn, NULL));
	tl_log_close(log);
	/* Now the head (2501, made by append_one_fn) differs: no append. */
	{
		MDB_env *env;
		MDB_txn *txn;
		size_t len;
		uint8_t *rec;

		raw_open(dir, &env, &txn);
		rec = raw_get_event(txn, 2501, &len);
		rec[len - 1] ^= 1;	/* the body's last byte */
		{
			uint8_t key[8];

			be64(key, 2501);
			raw_put(txn, "events", key, 8, rec, len);
		}
		free(rec);
		raw_close(env, txn);
	}
	ck_ok(tl_log_open(dir, 0, &log));
	ck_rc(tl_log_write(log, append_one_fn, NULL), TL_ECORRUPT);
	ck_assert_ptr_nonnull(strstr(tl_log_lasterr(log), "event 2501"));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_log_last(t, &n, NULL));
	ck_assert_uint_eq(n, 2501);	/* nothing was appended */
	tl_log_abort(t);

	/* Event 2000, verified before, changed since. */
	tl_test_body_marker(pat, 1999);
	ck_assert_int_ge(tl_test_patch_file(mdb, pat, sizeof(pat), 11 + 20,
	    'z'), 1);
	ck_rc(more(log, &c, &bad, why), TL_ECORRUPT);
	ck_assert_uint_eq(bad, 2000);
	ck_assert_ptr_nonnull(strstr(why, "changed"));
	tl_log_close(log);
	free(mdb);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* LMDB's counts against the head: a stream entry with no event. */
START_TEST(test_append_counts)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "counts");
	struct tl_txn *t;
	uint64_t n, bad;
	char why[TL_WHY_MAX];
	MDB_env *env;
	MDB_txn *txn;
	uint8_t key[8];

	ck_ok(tl_log_write(log, append_one_fn, NULL));
	ck_ok(tl_log_write(log, append_one_fn, NULL));
	tl_log_close(log);
	raw_open(dir, &env, &txn);
	be64(key, 3);
	raw_put_flags(txn, "streams", MDB_DUPSORT | MDB_DUPFIXED, "s", 1, key,
	    8);
	raw_close(env, txn);
	ck_ok(tl_log_open(dir, 0, &log));
	ck_rc(tl_log_write(log, append_one_fn, NULL), TL_ECORRUPT);
	ck_assert_ptr_nonnull(strstr(tl_log_lasterr(log), "nothing was "
	    "appended"));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_rc(tl_log_verify(t, &n, &bad, why), TL_ECORRUPT);
	ck_assert_uint_eq(n, 2);
	ck_assert_ptr_nonnull(strstr(why, "stream index"));
	tl_log_abort(t);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* A data file cut short or empty: refused before LMDB maps it. */
START_TEST(test_open_damaged)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "damaged");
	struct tl_test_load l;
	char *mdb = tl_test_path(dir, "data.mdb"), why[TL_WHY_MAX];

	memset(&l, 0, sizeof(l));
	l.n = 500;
	l.per_txn = 100;
	ck_ok(tl_test_load(log, &l));
	tl_log_close(log);
	ck_assert_int_eq(truncate(mdb, 8192), 0);
	ck_rc(tl_log_open_opts(dir, &(struct tl_log_opts){
	    .flags = TL_LOG_RDONLY, .why = why }, &log), TL_ECORRUPT);
	ck_assert_ptr_null(log);
	ck_assert_ptr_nonnull(strstr(why, "cut short"));
	ck_assert_int_eq(truncate(mdb, 0), 0);
	ck_rc(tl_log_open_opts(dir, &(struct tl_log_opts){ .why = why }, &log),
	    TL_ECORRUPT);
	ck_assert_ptr_nonnull(strstr(why, "empty"));
	free(mdb);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* Gaps, records under the wrong key, broken records, a broken link. */
START_TEST(test_verify_structure)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "structure");
	struct tl_test_load l;
	struct tl_txn *t;
	struct tl_iter *it;
	struct tl_event ev;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k;
	uint8_t key[8], *rec;
	uint64_t n, bad;
	size_t rlen;
	char why[TL_WHY_MAX];
	int rc;

	memset(&l, 0, sizeof(l));
	l.n = 10;
	l.per_txn = 10;
	ck_ok(tl_test_load(log, &l));
	tl_log_close(log);

	/* A copy of record 3 under key 11. */
	raw_open(dir, &env, &txn);
	rec = raw_get_event(txn, 3, &rlen);
	raw_put(txn, "events", "\0\0\0\0\0\0\0\x0b", 8, rec, rlen);
	free(rec);
	/* A gap at 5. */
	ck_ok(mdb_dbi_open(txn, "events", 0, &dbi));
	be64(key, 5);
	k.mv_data = key;
	k.mv_size = 8;
	ck_ok(mdb_del(txn, dbi, &k, NULL));
	raw_close(env, txn);

	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_rc(tl_log_verify(t, &n, &bad, why), TL_ECORRUPT);
	ck_assert_uint_eq(bad, 5);
	ck_assert_uint_eq(n, 4);
	ck_assert_ptr_nonnull(strstr(why, "gap"));
	ck_rc(tl_log_get(t, 11, &ev), TL_ECORRUPT);
	ck_ok(tl_iter_open(t, &(struct tl_filter){ .from = 6 }, &it));
	for (n = 6; (rc = tl_iter_next(it, &ev)) == 0; n++)
		ck_assert_uint_eq(ev.seq, n);
	ck_rc(rc, TL_ECORRUPT);
	ck_assert_uint_eq(tl_iter_errseq(it), 11);
	tl_iter_close(it);
	tl_log_abort(t);
	tl_log_close(log);

	/* Put 5 back as a copy of 6: the link from 4 breaks at 5. */
	raw_open(dir, &env, &txn);
	rec = raw_get_event(txn, 6, &rlen);
	raw_put(txn, "events", key, 8, rec, rlen);
	free(rec);
	ck_ok(mdb_dbi_open(txn, "events", 0, &dbi));
	be64(key, 11);
	ck_ok(mdb_del(txn, dbi, &k, NULL));
	raw_close(env, txn);
	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_assert_int_ne(tl_log_verify(t, &n, &bad, why), 0);
	ck_assert_uint_eq(bad, 5);
	tl_log_abort(t);
	tl_log_close(log);

	/* A record too short to hold a hash. */
	raw_open(dir, &env, &txn);
	be64(key, 5);
	raw_put(txn, "events", key, 8, "short", 5);
	raw_close(env, txn);
	ck_ok(tl_log_open(dir, 0, &log));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_rc(tl_log_verify(t, &n, &bad, why), TL_ECORRUPT);
	ck_assert_uint_eq(bad, 5);
	ck_rc(tl_log_get(t, 5, &ev), TL_ECORRUPT);
	tl_log_abort(t);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* --- processes ------------------------------------------------------- */

/* Runs a workload in a child; exits 0 when it all went in. */
static void
child_load(const char *dir, int gate, uint64_t tag, uint64_t n,
    unsigned per_txn)
{
	struct tl_log *log;
	struct tl_test_load l;
	char c;
	int rc;

	if (read(gate, &c, 1) < 0)
		_exit(10);
	if ((rc = tl_log_open(dir, 0, &log)) != 0)
		_exit(11);
	memset(&l, 0, sizeof(l));
	l.n = n;
	l.per_txn = per_txn;
	l.tag = tag;
	rc = tl_test_load(log, &l);
	if (rc != 0)
		fprintf(stderr, "child %llu: %s (%s)\n",
		    (unsigned long long)tag, tl_strerror(rc),
		    tl_log_lasterr(log));
	tl_log_close(log);
	_exit(rc == 0 ? 0 : 12);
}

/*
 * Two processes append 10,000 events each at once: afterwards exactly
 * 20,000 events, contiguous, a sound chain, each writer's events all
 * there in its order, and each transaction's events adjacent.
 */
START_TEST(test_two_writers)
{
	enum { N = 10000, PER = 10 };
	char *dir;
	struct tl_log *log = newlog(&dir, "two");
	struct tl_txn *t;
	struct tl_iter *it;
	struct tl_event ev;
	uint64_t next[3] = { 0, 0, 0 }, lastseq[3] = { 0, 0, 0 };
	uint64_t n, bad, tag, i, per, switches = 0, prevtag = 0;
	char why[TL_WHY_MAX];
	pid_t pids[2];
	int gate[2], k, st, rc;

	tl_log_close(log);
	ck_assert_int_eq(pipe(gate), 0);
	for (k = 0; k < 2; k++) {
		pids[k] = fork();
		ck_assert_int_ge(pids[k], 0);
		if (pids[k] == 0) {
			close(gate[1]);
			child_load(dir, gate[0], (uint64_t)k + 1, N, PER);
		}
	}
	close(gate[0]);
	close(gate[1]);		/* both start now */
	for (k = 0; k < 2; k++) {
		ck_assert_int_eq(waitpid(pids[k], &st, 0), pids[k]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		    "writer %d failed (status %d)", k + 1, st);
	}

	ck_ok(tl_log_open(dir, TL_LOG_RDONLY, &log));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	rc = tl_log_verify(t, &n, &bad, why);
	ck_assert_msg(rc == 0, "verify: %s at %llu: %s", tl_strerror(rc),
	    (unsigned long long)bad, why);
	ck_assert_uint_eq(n, 2 * N);
	ck_ok(tl_iter_open(t, NULL, &it));
	for (n = 0; (rc = tl_iter_next(it, &ev)) == 0; n++) {
		ck_ok(tl_test_body_read(ev.body, ev.body_len, &tag, &i,
		    &per));
		ck_assert(tag == 1 || tag == 2);
		ck_assert_msg(i == next[tag], "writer %llu: event %llu "
		    "after %llu", (unsigned long long)tag,
		    (unsigned long long)i, (unsigned long long)next[tag]);
		/* Within a transaction, nobody else's events. */
		if (i % PER != 0)
			ck_assert_uint_eq(ev.seq, lastseq[tag] + 1);
		ck_assert_uint_eq(ev.version, i % 10 + 1);
		next[tag] = i + 1;
		lastseq[tag] = ev.seq;
		if (prevtag != 0 && tag != prevtag)
			switches++;
		prevtag = tag;
	}
	ck_rc(rc, TL_EEOF);
	ck_assert_uint_eq(n, 2 * N);
	ck_assert_uint_eq(next[1], N);
	ck_assert_uint_eq(next[2], N);
	fprintf(stderr, "test_two_writers: the writers took turns %llu "
	    "times\n", (unsigned long long)switches);
	tl_iter_close(it);
	tl_log_abort(t);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* Appends transactions of 1-50 events forever; each names its txn. */
struct kill_txn {
	uint64_t	 tag;
	unsigned	 n;
	uint8_t		 body[64];
};

static int
kill_fn(struct tl_txn *t, void *arg)
{
	struct kill_txn *k = arg;
	struct tl_append a = app("test.kill", "k", TL_VER_ANY);
	char stream[32];
	unsigned j;
	int rc;

	a.stream = stream;
	a.body = k->body;
	a.body_len = sizeof(k->body);
	snprintf(stream, sizeof(stream), "k/%llu",
	    (unsigned long long)k->tag);
	for (j = 0; j < k->n; j++) {
		tl_test_body(k->body, sizeof(k->body), sizeof(k->body),
		    k->tag, j, k->n);
		a.expect = j;		/* each txn's own stream */
		if ((rc = tl_append(t, &a, NULL, NULL)) != 0)
			return rc;
	}
	return 0;
}

static void
child_kill_loop(const char *dir, uint64_t round, uint64_t seed)
{
	struct tl_log *log;
	struct kill_txn k;
	uint64_t s = seed, txn;

	if (tl_log_open(dir, 0, &log) != 0)
		_exit(11);
	for (txn = 0;; txn++) {
		k.tag = round << 32 | txn;
		k.n = 1 + (unsigned)(tl_test_rand(&s) % 50);
		if (tl_log_write(log, kill_fn, &k) != 0)
			_exit(12);
	}
}

/* Every transaction present is whole: n events, i = 0..n-1, in a row. */
static uint64_t
check_whole(struct tl_log *log, uint64_t *txns)
{
	struct tl_txn *t;
	struct tl_iter *it;
	struct tl_event ev;
	uint64_t n, bad, cur = UINT64_MAX, expect_i = 0, cur_n = 0;
	uint64_t tag, i, per, events = 0;
	char why[TL_WHY_MAX];
	int rc;

	*txns = 0;
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	rc = tl_log_verify(t, &n, &bad, why);
	ck_assert_msg(rc == 0, "verify: %s at %llu: %s", tl_strerror(rc),
	    (unsigned long long)bad, why);
	ck_ok(tl_iter_open(t, NULL, &it));
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		ck_ok(tl_test_body_read(ev.body, ev.body_len, &tag, &i,
		    &per));
		if (tag != cur) {
			ck_assert_msg(cur == UINT64_MAX || expect_i == cur_n,
			    "txn %llx has %llu of its %llu events",
			    (unsigned long long)cur,
			    (unsigned long long)expect_i,
			    (unsigned long long)cur_n);
			ck_assert_msg(cur == UINT64_MAX || tag > cur,
			    "txn %llx after %llx", (unsigned long long)tag,
			    (unsigned long long)cur);
			cur = tag;
			cur_n = per;
			expect_i = 0;
			(*txns)++;
		}
		ck_assert_uint_eq(i, expect_i);
		ck_assert_uint_eq(per, cur_n);
		ck_assert_uint_eq(ev.version, i + 1);
		expect_i++;
		events++;
	}
	ck_rc(rc, TL_EEOF);
	ck_assert_msg(cur == UINT64_MAX || expect_i == cur_n,
	    "the last txn has %llu of its %llu events",
	    (unsigned long long)expect_i, (unsigned long long)cur_n);
	ck_assert_uint_eq(events, n);
	tl_iter_close(it);
	tl_log_abort(t);
	return events;
}

/*
 * A child appending in a loop is killed with SIGKILL at random moments:
 * afterwards the log verifies and holds only whole transactions.
 */
START_TEST(test_sigkill)
{
	enum { ROUNDS = 12 };
	char *dir;
	struct tl_log *log = newlog(&dir, "sigkill");
	uint64_t seed = tl_test_seed("test_sigkill"), s = seed;
	uint64_t events = 0, prev = 0, txns;
	pid_t pid;
	int r, st;

	tl_log_close(log);
	for (r = 1; r <= ROUNDS; r++) {
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			child_kill_loop(dir, (uint64_t)r, tl_test_rand(&s));
		sleep_ms(20 + (unsigned)(tl_test_rand(&s) % 200));
		ck_assert_int_eq(kill(pid, SIGKILL), 0);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		    "round %d: the child stopped by itself (status %d)", r,
		    st);
		ck_ok(tl_log_open(dir, 0, &log));
		events = check_whole(log, &txns);
		ck_assert_uint_ge(events, prev);
		prev = events;
		tl_log_close(log);
	}
	fprintf(stderr, "test_sigkill: %llu events in %llu transactions "
	    "survived %d kills\n", (unsigned long long)events,
	    (unsigned long long)txns, ROUNDS);
	ck_assert_uint_gt(events, 0);
	tl_test_tmpdir_done(dir);
}
END_TEST

/* --- kv ---------------------------------------------------------------- */

struct scan_seen {
	int	 n;
	char	 keys[8][16];
	int	 stop_at;
};

static int
scan_fn(const void *key, size_t klen, const void *val, size_t vlen,
    void *arg)
{
	struct scan_seen *s = arg;

	(void)val;
	(void)vlen;
	if (s->n >= 8 || klen >= sizeof(s->keys[0]))
		return -1;
	memcpy(s->keys[s->n], key, klen);
	s->keys[s->n][klen] = '\0';
	s->n++;
	return s->n == s->stop_at ? 1 : 0;
}

struct digests {
	int		 n;
	char		 names[4][TL_KV_NAME_MAX + 1];
	unsigned char	 d[4][32];
	size_t		 entries[4];
};

static int
digest_fn(const char *name, const unsigned char digest[32], size_t entries,
    void *arg)
{
	struct digests *ds = arg;

	if (ds->n >= 4)
		return -1;
	snprintf(ds->names[ds->n], sizeof(ds->names[0]), "%s", name);
	memcpy(ds->d[ds->n], digest, 32);
	ds->entries[ds->n++] = entries;
	return 0;
}

static void
digest_all(struct tl_log *log, struct digests *ds)
{
	struct tl_txn *t;

	memset(ds, 0, sizeof(*ds));
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_kv_digest_all(t, digest_fn, ds));
	tl_log_abort(t);
}

START_TEST(test_kv)
{
	char *dir;
	struct tl_log *log = newlog(&dir, "kv");
	struct tl_txn *t;
	struct scan_seen seen;
	struct digests d1, d2;
	tl_kv grants, mods, other;
	const void *val;
	size_t vlen;
	char key[600];
	uint64_t seq;

	ck_ok(tl_log_write(log, append_one_fn, NULL));
	ck_ok(tl_log_begin(log, 0, &t));
	ck_ok(tl_kv_open(t, "grants", &grants));
	ck_ok(tl_kv_open(t, "modules", &mods));
	ck_rc(tl_kv_open(t, "", &other), TL_EINVAL);
	memset(key, 'k', sizeof(key));
	key[TL_KV_NAME_MAX + 1] = '\0';
	ck_rc(tl_kv_open(t, key, &other), TL_EINVAL);

	ck_ok(tl_kv_put(t, grants, "user/alice", 10, "A", 1));
	ck_ok(tl_kv_put(t, grants, "user/bob", 8, "B", 1));
	ck_ok(tl_kv_put(t, grants, "user/carol", 10, "C", 1));
	ck_ok(tl_kv_put(t, grants, "role/admin", 10, "R", 1));
	ck_ok(tl_kv_put(t, grants, "users", 5, "S", 1));
	ck_ok(tl_kv_put(t, mods, "web", 3, "", 0));
	ck_rc(tl_kv_put(t, grants, "", 0, "x", 1), TL_EINVAL);
	ck_rc(tl_kv_put(t, grants, key, 512, "x", 1), TL_EINVAL);
	ck_ok(tl_kv_put(t, grants, key, 511, "x", 1));
	ck_ok(tl_kv_del(t, grants, key, 511));

	ck_ok(tl_kv_get(t, grants, "user/bob", 8, &val, &vlen));
	ck_assert_uint_eq(vlen, 1);
	ck_assert_mem_eq(val, "B", 1);
	ck_ok(tl_kv_put(t, grants, "user/bob", 8, "BB", 2));
	ck_ok(tl_kv_get(t, grants, "user/bob", 8, &val, &vlen));
	ck_assert_uint_eq(vlen, 2);
	ck_assert_mem_eq(val, "BB", 2);
	ck_rc(tl_kv_get(t, grants, "user/dave", 9, &val, &vlen),
	    TL_ENOTFOUND);
	ck_rc(tl_kv_get(t, mods, "user/bob", 8, &val, &vlen), TL_ENOTFOUND);
	ck_ok(tl_kv_get(t, mods, "web", 3, &val, &vlen));
	ck_assert_uint_eq(vlen, 0);

	/* Prefix scans, in key order; a non-zero return stops them. */
	memset(&seen, 0, sizeof(seen));
	ck_ok(tl_kv_scan(t, grants, "user/", 5, scan_fn, &seen));
	ck_assert_int_eq(seen.n, 3);
	ck_assert_str_eq(seen.keys[0], "user/alice");
	ck_assert_str_eq(seen.keys[1], "user/bob");
	ck_assert_str_eq(seen.keys[2], "user/carol");
	memset(&seen, 0, sizeof(seen));
	seen.stop_at = 2;
	ck_assert_int_eq(tl_kv_scan(t, grants, "user/", 5, scan_fn, &seen),
	    1);
	ck_assert_int_eq(seen.n, 2);
	memset(&seen, 0, sizeof(seen));
	ck_ok(tl_kv_scan(t, grants, NULL, 0, scan_fn, &seen));
	ck_assert_int_eq(seen.n, 5);
	ck_assert_str_eq(seen.keys[0], "role/admin");
	ck_assert_str_eq(seen.keys[4], "users");
	memset(&seen, 0, sizeof(seen));
	ck_ok(tl_kv_scan(t, grants, "zzz", 3, scan_fn, &seen));
	ck_assert_int_eq(seen.n, 0);

	ck_ok(tl_kv_del(t, grants, "user/carol", 10));
	ck_ok(tl_kv_del(t, grants, "user/carol", 10));	/* absent: fine */
	ck_rc(tl_kv_get(t, grants, "user/carol", 10, &val, &vlen),
	    TL_ENOTFOUND);
	ck_ok(tl_ckpt_set(t, "projector", 1));
	ck_ok(tl_log_commit(t));

	/* Digests: one per table, by content. */
	digest_all(log, &d1);
	ck_assert_int_eq(d1.n, 2);
	ck_assert_str_eq(d1.names[0], "grants");
	ck_assert_uint_eq(d1.entries[0], 4);
	ck_assert_str_eq(d1.names[1], "modules");
	ck_assert_uint_eq(d1.entries[1], 1);
	digest_all(log, &d2);
	ck_assert_mem_eq(d1.d[0], d2.d[0], 32);
	ck_ok(tl_log_begin(log, 0, &t));
	ck_ok(tl_kv_open(t, "grants", &grants));
	ck_ok(tl_kv_put(t, grants, "user/bob", 8, "BC", 2));
	ck_ok(tl_log_commit(t));
	digest_all(log, &d2);
	ck_assert(memcmp(d1.d[0], d2.d[0], 32) != 0);
	ck_assert_mem_eq(d1.d[1], d2.d[1], 32);
	/* Boundaries count: "ab"+"c" is not "a"+"bc". */
	ck_ok(tl_log_begin(log, 0, &t));
	ck_ok(tl_kv_open(t, "t1", &other));
	ck_ok(tl_kv_put(t, other, "ab", 2, "c", 1));
	ck_ok(tl_kv_open(t, "t2", &other));
	ck_ok(tl_kv_put(t, other, "a", 1, "bc", 2));
	ck_ok(tl_log_commit(t));
	digest_all(log, &d2);
	ck_assert_int_eq(d2.n, 4);
	ck_assert_str_eq(d2.names[2], "t1");
	ck_assert(memcmp(d2.d[2], d2.d[3], 32) != 0);

	/* A read transaction opens existing tables only. */
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_kv_open(t, "grants", &grants));
	ck_ok(tl_kv_get(t, grants, "user/alice", 10, &val, &vlen));
	ck_assert_int_ne(tl_kv_open(t, "never", &other), 0);
	ck_rc(tl_kv_drop_all(t), TL_EINVAL);
	tl_log_abort(t);

	/* drop_all empties every table, and nothing of the log's. */
	ck_ok(tl_log_begin(log, 0, &t));
	ck_ok(tl_kv_drop_all(t));
	ck_ok(tl_kv_open(t, "grants", &grants));
	ck_rc(tl_kv_get(t, grants, "user/alice", 10, &val, &vlen),
	    TL_ENOTFOUND);
	ck_ok(tl_log_commit(t));
	digest_all(log, &d2);
	ck_assert_int_eq(d2.n, 4);
	ck_assert_uint_eq(d2.entries[0], 0);
	ck_assert_uint_eq(d2.entries[1], 0);
	ck_assert_mem_eq(d2.d[0], d2.d[1], 32);	/* both empty */
	ck_assert_uint_eq(count_events(log), 1);
	ck_ok(tl_log_begin(log, TL_TXN_RDONLY, &t));
	ck_ok(tl_ckpt_get(t, "projector", &seq));
	ck_assert_uint_eq(seq, 1);
	tl_log_abort(t);
	tl_log_close(log);
	/* Still a tally log. */
	ck_ok(tl_log_open(dir, 0, &log));
	ck_assert_uint_eq(count_events(log), 1);
	tl_log_close(log);
	tl_test_tmpdir_done(dir);
}
END_TEST

static Suite *
log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc;

	tc = tcase_create("open");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_open_missing);
	tcase_add_test(tc, test_open_not_a_log);
	tcase_add_test(tc, test_open_newer);
	tcase_add_test(tc, test_open_twice);
	tcase_add_test(tc, test_rdonly);
	tcase_add_test(tc, test_stale_lock);
	tcase_add_test(tc, test_stale_lock_open);
	tcase_add_test(tc, test_map_grows);
	suite_add_tcase(s, tc);

	tc = tcase_create("append");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_append_read);
	tcase_add_test(tc, test_append_invalid);
	tcase_add_test(tc, test_conflict);
	tcase_add_test(tc, test_checkpoints);
	tcase_add_loop_test(tc, test_filters, 0,
	    (int)(sizeof(fcases) / sizeof(fcases[0])));
	tcase_add_test(tc, test_iter_whole);
	tcase_add_test(tc, test_newer_writer);
	tcase_add_test(tc, test_append_raw);
	tcase_add_test(tc, test_signatures);
	suite_add_tcase(s, tc);

	tc = tcase_create("verify");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_verify_tamper);
	tcase_add_test(tc, test_check_record);
	tcase_add_test(tc, test_verify_structure);
	tcase_add_test(tc, test_verify_incremental);
	tcase_add_test(tc, test_append_counts);
	tcase_add_test(tc, test_open_damaged);
	suite_add_tcase(s, tc);

	tc = tcase_create("processes");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_two_writers);
	tcase_add_test(tc, test_sigkill);
	suite_add_tcase(s, tc);

	tc = tcase_create("kv");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_kv);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(log_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
