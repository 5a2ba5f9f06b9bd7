/*
 * bench_log.c - how fast the log appends and replays, against peers
 * measured in the same run.  Prints figures; never asserts.
 *
 * The workload: 200-byte bodies; each transaction's events spread over
 * streams as reactors write them (10 consecutive events per stream);
 * every commit durable.  It is run through
 *
 *   tally      tl_log_write + tl_append: envelope, chain, stream index
 *   raw LMDB   8-byte big-endian key, the 200-byte body, MDB_APPEND,
 *              no envelope, hash or index; synced commits
 *   PostgreSQL an events table (seq bigserial, type text, stream text,
 *              body bytea), synchronous_commit on: COPY (binary, via
 *              PQputCopyData) per transaction, and one-row INSERTs;
 *              on a throwaway server from tests/harness/pg.sh
 *
 * at 1, 100 and 1,000 events per transaction, then replays the log:
 * every event iterated and decoded, and tl_log_verify (decode + chain).
 *
 * Env: TALLY_TMP (scratch, default build/tmp), TALLY_SRC (to find
 * tests/harness/pg.sh), BENCH_SCALE (a float multiplying the counts),
 * BENCH_NO_PG=1 to leave PostgreSQL out.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <libpq-fe.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define BODY_LEN	200
#define PER_STREAM	10
#define TYPE		"test.event"
#define ME_PG		"bench_log: pg"

#define MAXROUNDS	32

/*
 * One figure: the workload in slices, taking turns with its peers so
 * that all of them see the same machine (this one is shared and its
 * disk is noisy); the figure is all events over all the time.
 */
struct result {
	const char	*what;
	unsigned	 per_txn;
	uint64_t	 n;		/* events, all rounds */
	int		 rounds;
	double		 rate[MAXROUNDS];	/* events/s, first rounds */
	double		 secs;		/* all rounds */
	int		 failed;
};

static void
add_round(struct result *r, uint64_t n, double secs)
{
	if (r->rounds < MAXROUNDS && secs > 0)
		r->rate[r->rounds] = (double)n / secs;
	r->rounds++;
	r->n += n;
	r->secs += secs;
}

static double
best(const struct result *r)
{
	double b = 0;
	int i;

	for (i = 0; i < r->rounds && i < MAXROUNDS; i++)
		if (r->rate[i] > b)
			b = r->rate[i];
	return b;
}

static double
rate(const struct result *r)
{
	if (r->failed || r->secs <= 0)
		return 0;
	return (double)r->n / r->secs;
}

static void
report(const struct result *r)
{
	double lo = 0, hi = 0;
	int i;

	if (r->failed || r->rounds == 0) {
		printf("  %-22s %5u/txn  not measured\n", r->what, r->per_txn);
		return;
	}
	for (i = 0; i < r->rounds && i < MAXROUNDS; i++) {
		if (i == 0 || r->rate[i] < lo)
			lo = r->rate[i];
		if (r->rate[i] > hi)
			hi = r->rate[i];
	}
	printf("  %-22s %5u/txn %8llu events %7.2f s %9.0f/s  (%d slices, "
	    "%.0f..%.0f/s)\n", r->what, r->per_txn,
	    (unsigned long long)r->n, r->secs, rate(r), r->rounds, lo, hi);
	fflush(stdout);
}

/* --- tally -------------------------------------------------------------- */

static int
run_tally(struct tl_log *log, uint64_t first, uint64_t n, unsigned per_txn,
    struct result *r)
{
	struct tl_test_load l;
	double t0;
	int rc;

	memset(&l, 0, sizeof(l));
	l.n = n;
	l.first = first;
	l.per_txn = per_txn;
	l.per_stream = PER_STREAM;
	l.body_len = BODY_LEN;
	l.tag = 1;
	l.type = TYPE;
	t0 = tl_bench_now();
	rc = tl_test_load(log, &l);
	if (rc != 0) {
		fprintf(stderr, "bench_log: tally: %s (%s)\n", tl_strerror(rc),
		    tl_log_lasterr(log));
		r->failed = 1;
		return rc;
	}
	add_round(r, n, tl_bench_now() - t0);
	return 0;
}

/* --- raw LMDB ----------------------------------------------------------- */

struct rawlmdb {
	MDB_env	*env;
	size_t	 mapsize;
	uint64_t seq;
};

static int
lmdb_open(struct rawlmdb *db, const char *dir)
{
	int rc;

	memset(db, 0, sizeof(*db));
	db->mapsize = (size_t)64 << 20;
	if ((rc = mdb_env_create(&db->env)) != 0)
		return rc;
	mdb_env_set_mapsize(db->env, db->mapsize);
	if ((rc = mdb_env_open(db->env, dir, MDB_NOTLS, 0600)) != 0) {
		mdb_env_close(db->env);
		db->env = NULL;
	}
	return rc;
}

static int
run_lmdb(struct rawlmdb *db, uint64_t n, unsigned per_txn, struct result *r)
{
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k, v;
	uint8_t key[8], body[BODY_LEN];
	uint64_t done = 0, i;
	unsigned j, cnt;
	double t0;
	int rc, b;

	t0 = tl_bench_now();
	while (done < n) {
		cnt = n - done < per_txn ? (unsigned)(n - done) : per_txn;
		if ((rc = mdb_txn_begin(db->env, NULL, 0, &txn)) != 0)
			goto out;
		if ((rc = mdb_dbi_open(txn, NULL, 0, &dbi)) != 0)
			goto abort;
		for (j = 0; j < cnt; j++) {
			i = db->seq + j + 1;
			tl_test_body(body, sizeof(body), sizeof(body), 1, i - 1,
			    cnt);
			for (b = 7; b >= 0; b--)
				key[7 - b] = (uint8_t)(i >> (8 * b));
			k.mv_data = key;
			k.mv_size = 8;
			v.mv_data = body;
			v.mv_size = sizeof(body);
			if ((rc = mdb_put(txn, dbi, &k, &v, MDB_APPEND)) != 0)
				goto abort;
		}
		if ((rc = mdb_txn_commit(txn)) != 0)
			goto full;
		db->seq += cnt;
		done += cnt;
		continue;
abort:
		mdb_txn_abort(txn);
full:
		/* Grow the map as tally does, and redo the transaction. */
		if (rc != MDB_MAP_FULL)
			goto out;
		db->mapsize *= 2;
		if ((rc = mdb_env_set_mapsize(db->env, db->mapsize)) != 0)
			goto out;
	}
	add_round(r, n, tl_bench_now() - t0);
	return 0;
out:
	fprintf(stderr, "bench_log: lmdb: %s\n", mdb_strerror(rc));
	r->failed = 1;
	return rc;
}

/* --- PostgreSQL --------------------------------------------------------- */

struct pg {
	char	 dir[4096];
	char	 script[4096];
	int	 started;
	PGconn	*conn;
};

static int
sh(const char *script, const char *a1, const char *a2, const char *a3)
{
	pid_t pid;
	int st;

	fflush(stdout);
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		dup2(2, 1);	/* keep the figures on stdout clean */
		execl("/bin/sh", "sh", script, a1, a2, a3, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
pg_start(struct pg *pg, const char *scratch)
{
	const char *src = getenv("TALLY_SRC");
	char host[256], port[16], user[64], pwfile[4096], pw[256];
	char conninfo[1024];
	FILE *fp;
	int tries, p;

	snprintf(pg->script, sizeof(pg->script), "%s/tests/harness/pg.sh",
	    src && *src ? src : ".");
	if (access(pg->script, R_OK) != 0) {
		fprintf(stderr, "bench_log: no %s\n", pg->script);
		return -1;
	}
	snprintf(pg->dir, sizeof(pg->dir), "%s/pg", scratch);
	for (tries = 0; tries < 5; tries++) {
		p = 20000 + (int)((getpid() * 7919u + (unsigned)tries * 104729u)
		    % 20000);
		snprintf(port, sizeof(port), "%d", p);
		if (sh(pg->script, "start", pg->dir, port) == 0)
			break;
	}
	if (tries == 5)
		return -1;
	pg->started = 1;
	if (tl_test_env_get(pg->dir, "TALLY_TEST_PG_HOST", host, sizeof(host)) != 0 ||
	    tl_test_env_get(pg->dir, "TALLY_TEST_PG_PORT", port, sizeof(port)) != 0 ||
	    tl_test_env_get(pg->dir, "TALLY_TEST_PG_USER", user, sizeof(user)) != 0 ||
	    tl_test_env_get(pg->dir, "TALLY_TEST_PG_PWFILE", pwfile,
	    sizeof(pwfile)) != 0) {
		fprintf(stderr, "bench_log: %s/env is incomplete\n", pg->dir);
		return -1;
	}
	if ((fp = fopen(pwfile, "r")) == NULL ||
	    fgets(pw, sizeof(pw), fp) == NULL) {
		if (fp != NULL)
			fclose(fp);
		fprintf(stderr, "bench_log: cannot read %s\n", pwfile);
		return -1;
	}
	fclose(fp);
	pw[strcspn(pw, "\r\n")] = '\0';
	snprintf(conninfo, sizeof(conninfo), "host=%s port=%s user=%s "
	    "password=%s dbname=postgres", host, port, user, pw);
	pg->conn = PQconnectdb(conninfo);
	if (PQstatus(pg->conn) != CONNECTION_OK) {
		fprintf(stderr, "bench_log: pg: %s", PQerrorMessage(pg->conn));
		return -1;
	}
	return tl_bench_pg_exec(pg->conn, ME_PG,
	    "SET synchronous_commit = on") ||
	    tl_bench_pg_exec(pg->conn, ME_PG,
	    "SET client_min_messages = warning") ||
	    tl_bench_pg_exec(pg->conn, ME_PG, "DROP TABLE IF EXISTS events") ||
	    tl_bench_pg_exec(pg->conn, ME_PG, "CREATE TABLE events (seq "
	    "bigserial, type text, stream text, body bytea)") ? -1 : 0;
}

static void
pg_stop(struct pg *pg)
{
	if (pg->conn != NULL)
		PQfinish(pg->conn);
	pg->conn = NULL;
	if (pg->started)
		sh(pg->script, "stop", pg->dir, NULL);
	pg->started = 0;
}

static uint8_t *
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return p + 2;
}

static uint8_t *
put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
	return p + 4;
}

static uint8_t *
put_field(uint8_t *p, const void *v, size_t n)
{
	p = put32(p, (uint32_t)n);
	memcpy(p, v, n);
	return p + n;
}

/* One COPY (one transaction) per per_txn rows, binary format. */
static int
run_pg_copy(PGconn *c, uint64_t first, uint64_t n, unsigned per_txn,
    struct result *r)
{
	static const uint8_t sig[] = "PGCOPY\n\377\r\n";	/* + NUL */
	size_t rowmax = 2 + 3 * 4 + sizeof(TYPE) + 64 + BODY_LEN;
	uint8_t *buf, *p, body[BODY_LEN];
	char stream[64];
	uint64_t done = 0, i;
	unsigned j, cnt;
	PGresult *res;
	double t0;
	int rc = -1;

	if ((buf = malloc(19 + (size_t)per_txn * rowmax + 2)) == NULL)
		return -1;
	t0 = tl_bench_now();
	while (done < n) {
		cnt = n - done < per_txn ? (unsigned)(n - done) : per_txn;
		p = buf;
		memcpy(p, sig, 11);
		p += 11;
		p = put32(p, 0);		/* flags */
		p = put32(p, 0);		/* header extension */
		for (j = 0; j < cnt; j++) {
			i = first + done + j;
			snprintf(stream, sizeof(stream), "s/1/%llu",
			    (unsigned long long)(i / PER_STREAM));
			tl_test_body(body, sizeof(body), sizeof(body), 1, i,
			    cnt);
			p = put16(p, 3);
			p = put_field(p, TYPE, sizeof(TYPE) - 1);
			p = put_field(p, stream, strlen(stream));
			p = put_field(p, body, sizeof(body));
		}
		p = put16(p, 0xffff);		/* trailer */
		res = PQexec(c, "COPY events (type, stream, body) FROM STDIN "
		    "(FORMAT binary)");
		if (PQresultStatus(res) != PGRES_COPY_IN) {
			fprintf(stderr, "bench_log: pg copy: %s",
			    PQerrorMessage(c));
			PQclear(res);
			goto out;
		}
		PQclear(res);
		if (PQputCopyData(c, (const char *)buf, (int)(p - buf)) != 1 ||
		    PQputCopyEnd(c, NULL) != 1)
			goto out;
		res = PQgetResult(c);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			fprintf(stderr, "bench_log: pg copy: %s",
			    PQerrorMessage(c));
			PQclear(res);
			goto out;
		}
		PQclear(res);
		while ((res = PQgetResult(c)) != NULL)
			PQclear(res);
		done += cnt;
	}
	add_round(r, n, tl_bench_now() - t0);
	rc = 0;
out:
	if (rc != 0)
		r->failed = 1;
	free(buf);
	return rc;
}

/* One INSERT, one transaction, per event. */
static int
run_pg_single(PGconn *c, uint64_t first, uint64_t n, int *prepared,
    struct result *r)
{
	const char *vals[3];
	int lens[3], fmts[3] = { 0, 0, 1 };
	uint8_t body[BODY_LEN];
	char stream[64];
	PGresult *res;
	uint64_t i;
	double t0;

	if (!*prepared) {
		res = PQprepare(c, "ins", "INSERT INTO events (type, stream, "
		    "body) VALUES ($1, $2, $3)", 3, NULL);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			fprintf(stderr, "bench_log: pg: %s",
			    PQerrorMessage(c));
			PQclear(res);
			r->failed = 1;
			return -1;
		}
		PQclear(res);
		*prepared = 1;
	}
	t0 = tl_bench_now();
	for (i = first; i < first + n; i++) {
		snprintf(stream, sizeof(stream), "s/1/%llu",
		    (unsigned long long)(i / PER_STREAM));
		tl_test_body(body, sizeof(body), sizeof(body), 1, i, 1);
		vals[0] = TYPE;
		vals[1] = stream;
		vals[2] = (const char *)body;
		lens[0] = lens[1] = 0;
		lens[2] = sizeof(body);
		res = PQexecPrepared(c, "ins", 3, vals, lens, fmts, 0);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			fprintf(stderr, "bench_log: pg insert: %s",
			    PQerrorMessage(c));
			PQclear(res);
			r->failed = 1;
			return -1;
		}
		PQclear(res);
	}
	add_round(r, n, tl_bench_now() - t0);
	return 0;
}

/* --- replay ------------------------------------------------------------ */

static int
run_replay(struct tl_log *log, struct result *iter, struct result *verify)
{
	struct tl_txn *t;
	struct tl_iter *it;
	struct tl_event ev;
	uint64_t n = 0, bad = 0, sum = 0;
	char why[TL_WHY_MAX];
	double t0;
	int rc;

	if ((rc = tl_log_begin(log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	/* Iterate and decode every event, as a projection rebuild does. */
	t0 = tl_bench_now();
	if ((rc = tl_iter_open(t, NULL, &it)) != 0)
		goto abort;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		sum += ev.version + ev.body_len;
		n++;
	}
	tl_iter_close(it);
	if (rc != TL_EEOF || sum == 0) {
		iter->failed = 1;
		goto abort;
	}
	add_round(iter, n, tl_bench_now() - t0);
	/* Decode and check the whole chain. */
	t0 = tl_bench_now();
	rc = tl_log_verify(t, &n, &bad, why);
	if (rc != 0) {
		fprintf(stderr, "bench_log: verify: %s at %llu: %s\n",
		    tl_strerror(rc), (unsigned long long)bad, why);
		verify->failed = 1;
	} else
		add_round(verify, n, tl_bench_now() - t0);
abort:
	tl_log_abort(t);
	return rc == TL_EEOF ? 0 : rc;
}

/* --- main ---------------------------------------------------------------- */

static char *
subdir(const char *scratch, const char *name)
{
	char *p = tl_test_path(scratch, name);

	if (mkdir(p, 0755) != 0) {
		fprintf(stderr, "bench_log: mkdir %s: %s\n", p,
		    strerror(errno));
		exit(1);
	}
	return p;
}

static void
ratio(const char *what, const struct result *a, const struct result *b,
    const char *target, double want, int as_times)
{
	double x;

	if (rate(a) == 0 || rate(b) == 0) {
		printf("  %-40s    n/a\n", what);
		return;
	}
	x = rate(a) / rate(b);
	if (want > 0) {
		char what2[96];

		snprintf(what2, sizeof(what2), "log: %s", what);
		if (as_times)
			tl_bench_target(what2, target, x >= want, "%.2fx", x);
		else
			tl_bench_target(what2, target, x >= want, "%.1f%%",
			    x * 100);
	}
	if (as_times)
		printf("  %-40s %6.2fx  %s%s\n", what, x, target,
		    want > 0 ? (x >= want ? "  met" : "  MISSED") : "");
	else
		printf("  %-40s %6.1f%%  %s%s\n", what, x * 100, target,
		    want > 0 ? (x >= want ? "  met" : "  MISSED") : "");
}

/*
 * One size of transaction: tally, raw LMDB and PostgreSQL append the
 * same events slice by slice, taking turns to go first.
 */
static void
appends(const char *scratch, PGconn *pgc, uint64_t n, unsigned per_txn,
    int slices, struct result *tr, struct result *lr, struct result *pr,
    struct tl_log **keep)
{
	char tn[64], ln[64], *td, *ld;
	struct tl_log *log = NULL;
	struct rawlmdb db;
	uint64_t each = n / (uint64_t)slices, first = 0;
	int sl, k, rc, prepared = 0;

	snprintf(tn, sizeof(tn), "tally-%u", per_txn);
	snprintf(ln, sizeof(ln), "lmdb-%u", per_txn);
	td = subdir(scratch, tn);
	ld = subdir(scratch, ln);
	if ((rc = tl_log_open(td, TL_LOG_CREATE, &log)) != 0) {
		fprintf(stderr, "bench_log: %s: %s\n", td, tl_strerror(rc));
		tr->failed = 1;
		log = NULL;
	}
	if ((rc = lmdb_open(&db, ld)) != 0) {
		fprintf(stderr, "bench_log: %s: %s\n", ld, mdb_strerror(rc));
		lr->failed = 1;
	}
	if (pgc == NULL)
		pr->failed = 1;
	else if (tl_bench_pg_exec(pgc, ME_PG, "TRUNCATE events") != 0)
		pr->failed = 1;
	for (sl = 0; sl < slices; sl++, first += each) {
		for (k = 0; k < 3; k++) {
			switch ((sl + k) % 3) {
			case 0:
				if (!tr->failed)
					run_tally(log, first, each, per_txn,
					    tr);
				break;
			case 1:
				if (!lr->failed)
					run_lmdb(&db, each, per_txn, lr);
				break;
			case 2:
				if (pr->failed)
					break;
				if (per_txn == 1)
					run_pg_single(pgc, first, each,
					    &prepared, pr);
				else
					run_pg_copy(pgc, first, each, per_txn,
					    pr);
				break;
			}
		}
	}
	report(tr);
	report(lr);
	if (pgc != NULL)
		report(pr);
	if (db.env != NULL)
		mdb_env_close(db.env);
	tl_test_rmtree(ld);
	if (pgc != NULL && prepared)
		tl_bench_pg_exec(pgc, ME_PG, "DEALLOCATE ins");
	if (keep != NULL && !tr->failed)
		*keep = log;
	else {
		tl_log_close(log);
		tl_test_rmtree(td);
	}
	free(td);
	free(ld);
}

int
main(void)
{
	const char *e = getenv("BENCH_SCALE");
	double scale = e ? atof(e) : 1.0;
	uint64_t n1000 = (uint64_t)(1000000 * scale);
	uint64_t n100 = (uint64_t)(200000 * scale);
	uint64_t n1 = (uint64_t)(4500 * scale);
	struct result tb = { "tally", 1000 }, tm = { "tally", 100 };
	struct result ts = { "tally", 1 };
	struct result lb = { "raw LMDB", 1000 }, lm = { "raw LMDB", 100 };
	struct result ls = { "raw LMDB", 1 };
	struct result pb = { "PostgreSQL COPY", 1000 };
	struct result pm = { "PostgreSQL COPY", 100 };
	struct result ps = { "PostgreSQL INSERT", 1 };
	struct result ri = { "replay: decode", 1000 };
	struct result rv = { "replay: decode+chain", 1000 };
	struct tl_log *big = NULL;
	struct pg pg;
	char *scratch;
	double t0 = tl_bench_now();
	int r;

	memset(&pg, 0, sizeof(pg));
	if (n1000 < 10000)
		n1000 = 10000;
	if (n100 < 1000)
		n100 = 1000;
	if (n1 < 150)
		n1 = 150;
	scratch = tl_test_tmpdir("bench_log");
	printf("bench_log: %d-byte bodies, %d consecutive events per stream, "
	    "durable commits\n", BODY_LEN, PER_STREAM);
	printf("  scratch %s\n", scratch);

	e = getenv("BENCH_NO_PG");
	if (e != NULL && *e == '1')
		printf("  PostgreSQL: left out (BENCH_NO_PG=1)\n");
	else if (pg_start(&pg, scratch) != 0) {
		printf("  PostgreSQL: could not start a server; not measured\n");
		pg_stop(&pg);
	}

	appends(scratch, pg.conn, n1000, 1000, 10, &tb, &lb, &pb, &big);
	appends(scratch, pg.conn, n100, 100, 10, &tm, &lm, &pm, NULL);
	appends(scratch, pg.conn, n1, 1, 15, &ts, &ls, &ps, NULL);
	pg_stop(&pg);

	/* Replays are CPU-bound: the best of three. */
	if (big != NULL) {
		struct result i3 = ri, v3 = rv;

		for (r = 0; r < 3; r++)
			run_replay(big, &i3, &v3);
		ri.n = i3.n / 3;
		ri.secs = ri.n / best(&i3);
		ri.rounds = 1;
		ri.rate[0] = best(&i3);
		rv.n = v3.n / 3;
		rv.secs = rv.n / best(&v3);
		rv.rounds = 1;
		rv.rate[0] = best(&v3);
		ri.failed = i3.failed;
		rv.failed = v3.failed;
		tl_log_close(big);
	}
	report(&ri);
	report(&rv);

	printf("ratios:\n");
	ratio("tally/raw LMDB, 1000 per txn", &tb, &lb,
	    "target >= 35%, aim 50%", 0.35, 0);
	ratio("tally/raw LMDB, 100 per txn", &tm, &lm, "", 0, 0);
	ratio("tally/raw LMDB, 1 per txn", &ts, &ls, "target >= 80%", 0.80,
	    0);
	ratio("tally/PostgreSQL COPY, 1000 per txn", &tb, &pb,
	    "target >= 1.5x", 1.5, 1);
	ratio("tally/PostgreSQL COPY, 100 per txn", &tm, &pm, "", 0, 1);
	ratio("tally/PostgreSQL INSERT, 1 per txn", &ts, &ps, "", 0, 1);
	if (rate(&rv) > 0)
		printf("  %-40s %6.2fM/s  target >= 1M/s, aim 2M/s%s\n",
		    "replay, decode + chain check", rate(&rv) / 1e6,
		    rate(&rv) >= 1e6 ? "  met" : "  MISSED");
	if (rate(&rv) > 0)
		tl_bench_target("log: replay, decode + chain check",
		    "target >= 1M/s", rate(&rv) >= 1e6, "%.2fM/s",
		    rate(&rv) / 1e6);
	if (rate(&ri) > 0)
		printf("  %-40s %6.2fM/s\n", "replay, decode only",
		    rate(&ri) / 1e6);
	printf("bench_log: %.1f s in all\n", tl_bench_now() - t0);

	tl_test_tmpdir_done(scratch);
	return 0;
}
