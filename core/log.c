/*
 * log.c - the append-only event log over LMDB.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <limits.h>
#include <unistd.h>

#include "error.h"
#include "log-internal.h"
#include "vec.h"

#define TL_LOG_MAGIC	"tally-log"
#define TL_LOG_FORMAT	1
#define TL_MAP_DEFAULT	((size_t)64 << 20)
#define TL_MAX_DBS	64

static void
put_be64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t
get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/*
 * The fault guard.  LMDB trusts its data file: a page number past the
 * end of a file cut short is a SIGBUS, a flipped byte in a page header
 * a wild read or an mdb assertion.  The checks below (the file against
 * its meta page on open, every value inside the file, the counts LMDB
 * keeps) catch what can be caught cheaply; whatever still faults while
 * this module reads the map is caught here.  A read that this module
 * runs is armed (guard_run): a SIGSEGV/SIGBUS or an LMDB assertion on
 * its thread jumps back and the read returns TL_ECORRUPT, the log's
 * lasterr naming the file and the offset.  A fault in the map outside
 * an armed read (projections reading their tables through kv.c) ends
 * the process with tl_log_fault_exit's code and message when a program
 * asked for it; every other fault goes to the handler that was there
 * before (the default, or a sanitizer's), so real bugs still crash.
 */
#define GUARD_LOGS	16

static struct tl_log *volatile guard_logs[GUARD_LOGS];
static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction guard_old_segv, guard_old_bus;
static const char *volatile guard_prog;
static volatile int guard_code = -1;

static _Thread_local sigjmp_buf *guard_jb;
/* Transactions open on this thread, and the log of the last one. */
static _Thread_local int guard_txns;
static _Thread_local struct tl_log *guard_txlog;
static _Thread_local int guard_sig;
static _Thread_local uintptr_t guard_addr;
static _Thread_local char guard_msg[120];

static void
guard_write(const char *s)
{
	size_t n = strlen(s);

	while (n > 0) {
		ssize_t w = write(2, s, n);

		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* The log whose map holds addr, or NULL. */
static struct tl_log *
guard_find(uintptr_t addr)
{
	int i;

	for (i = 0; i < GUARD_LOGS; i++) {
		struct tl_log *log = guard_logs[i];

		if (log != NULL && addr >= log->map_lo && addr < log->map_hi)
			return log;
	}
	return NULL;
}

/* Ends the process for a fault in a log outside an armed read. */
static void
guard_exit(struct tl_log *log, const char *what)
{
	guard_write(guard_prog != NULL ? guard_prog : "tally");
	guard_write(": ");
	if (log != NULL) {
		guard_write(log->dir);
		guard_write("/data.mdb: ");
	}
	guard_write(what);
	guard_write(": the data file is damaged (see tally verify; if it "
	    "finds the log sound, this is a bug in tally); nothing was "
	    "written\n");
	_exit(guard_code);
}

static void
guard_handler(int sig, siginfo_t *si, void *uc)
{
	struct sigaction *old = sig == SIGBUS ? &guard_old_bus :
	    &guard_old_segv;

	if (sig == SIGABRT) {
		/* Only the in-transaction exit below applies to it. */
		if (guard_txns > 0 && guard_code >= 0 && guard_jb == NULL)
			guard_exit(guard_txlog, "the C library found the heap "
			    "corrupted while the log was open (SIGABRT)");
		signal(SIGABRT, SIG_DFL);
		raise(SIGABRT);
		return;
	}
	struct tl_log *log = guard_find((uintptr_t)si->si_addr);

	if (guard_jb != NULL) {
		guard_sig = sig;
		guard_addr = (uintptr_t)si->si_addr;
		siglongjmp(*guard_jb, 1);
	}
	if (log != NULL && guard_code >= 0)
		guard_exit(log, sig == SIGBUS ? "read past the end of the "
		    "file (SIGBUS)" : "invalid read (SIGSEGV)");
	/*
	 * Outside the map but with a transaction open: a damaged page (a
	 * node offset, a size, a page number) led a read or LMDB's own
	 * copy of a page astray.  Nothing is committed: the process ends
	 * as for a fault in the map, saying how to tell damage from a bug.
	 */
	if (guard_txns > 0 && guard_code >= 0)
		guard_exit(guard_txlog, sig == SIGBUS ? "a read while the log "
		    "was open faulted (SIGBUS)" : "a read while the log was "
		    "open went out of the file (SIGSEGV)");
	if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction != NULL) {
		old->sa_sigaction(sig, si, uc);
		return;
	}
	/* Back to the default: the faulting access runs again and dies. */
	signal(sig, old->sa_handler == SIG_IGN ? SIG_DFL : old->sa_handler);
}

static void
guard_assert(MDB_env *env, const char *msg)
{
	size_t i;

	(void)env;
	for (i = 0; msg[i] != '\0' && i < sizeof(guard_msg) - 1; i++)
		guard_msg[i] = msg[i];
	guard_msg[i] = '\0';
	if (guard_jb != NULL) {
		guard_sig = 0;
		siglongjmp(*guard_jb, 1);
	}
	if (guard_code >= 0) {
		struct tl_log *log = NULL;
		int j;

		for (j = 0; j < GUARD_LOGS && log == NULL; j++)
			if (guard_logs[j] != NULL && guard_logs[j]->env == env)
				log = guard_logs[j];
		guard_exit(log, "LMDB found its pages inconsistent");
	}
	/* LMDB aborts when this returns. */
}

/*
 * Installs the handler, keeping the one before to pass other faults
 * to.  Again at every open if someone installed theirs over it since (a
 * runtime that sets its own after start-up, like libFuzzer's).
 */
static void
guard_install_one(int sig, struct sigaction *old)
{
	struct sigaction sa, cur;

	if (sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
	    cur.sa_sigaction == guard_handler)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = guard_handler;
	/* No mask to restore after the jump: sigsetjmp(, 0) stays cheap. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, old);
}

static void
guard_install(void)
{
	guard_install_one(SIGSEGV, &guard_old_segv);
	guard_install_one(SIGBUS, &guard_old_bus);
}

void
tl_log_fault_exit(const char *prog, int code)
{
	struct sigaction sa;

	pthread_mutex_lock(&guard_mu);
	guard_install();
	pthread_mutex_unlock(&guard_mu);
	/* abort() inside a transaction: the heap a damaged page wrecked. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = guard_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGABRT, &sa, NULL);
	guard_prog = prog;
	guard_code = code;
}

/* A mapping of dev:ino of size len in /proc/self/maps no other log has. */
static uintptr_t
map_find(dev_t dev, ino_t ino, size_t len, const struct tl_log *self)
{
	char line[512];
	FILE *fp;
	uintptr_t found = 0;

	if ((fp = fopen("/proc/self/maps", "re")) == NULL)
		return 0;
	while (found == 0 && fgets(line, sizeof(line), fp) != NULL) {
		unsigned long lo, hi, off;
		unsigned maj, min;
		unsigned long long in;
		int i, taken = 0;

		if (sscanf(line, "%lx-%lx %*s %lx %x:%x %llu", &lo, &hi, &off,
		    &maj, &min, &in) != 6 || in != (unsigned long long)ino ||
		    maj != major(dev) || min != minor(dev) || off != 0 ||
		    hi - lo != len)
			continue;
		for (i = 0; i < GUARD_LOGS; i++)
			if (guard_logs[i] != NULL && guard_logs[i] != self &&
			    guard_logs[i]->map_lo == lo)
				taken = 1;
		if (!taken)
			found = lo;
	}
	fclose(fp);
	return found;
}

/*
 * Where the map is now; after open, a grow and an adopted resize.
 * LMDB does not say (me_mapaddr is the fixed address a meta page asks
 * for, NULL): the kernel's list of this process's mappings does.
 */
static void
guard_track(struct tl_log *log)
{
	MDB_envinfo ei;
	MDB_stat ms;
	struct stat st;
	char path[4200];
	uintptr_t lo;

	if (mdb_env_info(log->env, &ei) != 0 || mdb_env_stat(log->env,
	    &ms) != 0)
		return;
	log->psize = ms.ms_psize;
	snprintf(path, sizeof(path), "%s/data.mdb", log->dir);
	if (stat(path, &st) != 0)
		return;
	pthread_mutex_lock(&guard_mu);
	lo = map_find(st.st_dev, st.st_ino, ei.me_mapsize, log);
	log->map_lo = lo;
	log->map_hi = lo ? lo + ei.me_mapsize : 0;
	pthread_mutex_unlock(&guard_mu);
}

static void
guard_add(struct tl_log *log)
{
	int i;

	pthread_mutex_lock(&guard_mu);
	guard_install();
	for (i = 0; i < GUARD_LOGS; i++)
		if (guard_logs[i] == NULL) {
			guard_logs[i] = log;
			break;
		}
	pthread_mutex_unlock(&guard_mu);
}

static void
guard_remove(struct tl_log *log)
{
	int i;

	pthread_mutex_lock(&guard_mu);
	for (i = 0; i < GUARD_LOGS; i++)
		if (guard_logs[i] == log)
			guard_logs[i] = NULL;
	pthread_mutex_unlock(&guard_mu);
}

/* What an armed read that faulted returns. */
static int
guard_failed(struct tl_log *log)
{
	if (guard_sig == 0)
		snprintf(log->lasterr, sizeof(log->lasterr), "%s/data.mdb: "
		    "LMDB found its pages inconsistent (%s)", log->dir,
		    guard_msg);
	else if (guard_addr >= log->map_lo && guard_addr < log->map_hi)
		snprintf(log->lasterr, sizeof(log->lasterr), "%s/data.mdb: "
		    "%s at offset %zu", log->dir, guard_sig == SIGBUS ?
		    "read past the end of the file" : "invalid read",
		    (size_t)(guard_addr - log->map_lo));
	else
		snprintf(log->lasterr, sizeof(log->lasterr), "%s/data.mdb: "
		    "a damaged page led a read out of the file", log->dir);
	return TL_ECORRUPT;
}

/*
 * Runs fn(arg) armed.  After a fault fn's own cleanup did not run: the
 * caller keeps what must be freed where it can free it.
 */
static int
guard_run(struct tl_log *log, int (*fn)(void *), void *arg)
{
	sigjmp_buf jb;
	sigjmp_buf *volatile saved = guard_jb;
	int rc;

	if (sigsetjmp(jb, 0) != 0) {
		guard_jb = saved;
		return guard_failed(log);
	}
	guard_jb = &jb;
	rc = fn(arg);
	guard_jb = saved;
	return rc;
}

/*
 * A value LMDB handed out lies inside the pages the transaction can
 * see.  One outside the map is on a page this write transaction made.
 */
static int
in_file(const struct tl_txn *t, const MDB_val *v)
{
	uintptr_t p = (uintptr_t)v->mv_data;

	if (t->log->map_lo == 0)
		return 1;	/* where the map is is not known */
	if (p < t->log->map_lo || p >= t->log->map_hi)
		return !(t->flags & TL_TXN_RDONLY);
	return p <= t->map_end && v->mv_size <= t->map_end - p;
}

static void chain_hash(const uint8_t prev[TL_HASH_LEN], const uint8_t *raw,
    size_t len, uint8_t out[TL_HASH_LEN]);
static int record_decode(const struct tl_txn *t, const MDB_val *k,
    const MDB_val *v, struct tl_event *ev, char *why);

int
tl_log_mdberr(struct tl_log *log, int rc, const char *what)
{
	if (rc == 0)
		return 0;
	if (rc == MDB_NOTFOUND)
		return TL_ENOTFOUND;
	if (rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ||
	    rc == MDB_CURSOR_FULL || rc == MDB_INVALID || rc == MDB_BAD_TXN ||
	    rc == MDB_PAGE_FULL) {
		/* MDB_BAD_TXN: an earlier read in it met a damaged page. */
		/* LMDB's own words for a damaged file. */
		snprintf(log->lasterr, sizeof(log->lasterr), "%s/data.mdb: "
		    "%s: %s", log->dir, what, mdb_strerror(rc));
		return TL_ECORRUPT;
	}
	snprintf(log->lasterr, sizeof(log->lasterr), "%s: %s", what,
	    mdb_strerror(rc));
	if (rc > 0)
		return rc;	/* an errno */
	return TL_ELMDB;
}

const char *
tl_log_lasterr(const struct tl_log *log)
{
	return log->lasterr;
}

int
tl_log_readonly(const struct tl_log *log)
{
	return (log->flags & TL_LOG_RDONLY) != 0;
}

const char *
tl_log_dir(const struct tl_log *log)
{
	return log->dir;
}

static int
file_exists(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >=
	    sizeof(path))
		return 0;
	return stat(path, &st) == 0;
}

/*
 * LMDB 0.9's meta page (lmdb.h does not export it): after the 16-byte
 * page header, magic, version, address and map size, then two MDB_db
 * records of 48 bytes (the free list's, whose md_pad is the page size,
 * and the main table's), the last page number and the transaction id.
 */
#define META_MAGIC	0xBEEFC0DEu
#define META_AT		16
#define META_DB		(META_AT + 24)
#define META_DBSZ	48
#define META_LASTPG	(META_DB + 2 * META_DBSZ)
#define META_TXNID	(META_LASTPG + 8)
#define META_END	(META_TXNID + 8)
#define P_META_FLAG	0x08

static uint64_t
get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n-- > 0)
		v = v << 8 | p[n];
	return v;
}

/*
 * Checks the data file against its own meta pages before LMDB maps it:
 * LMDB maps whatever the meta says and a page past the end of the file
 * is a SIGBUS on first touch.  0, or TL_ECORRUPT with why filled.  An
 * empty file is refused too: a writer's mdb_env_open would take it for
 * a new environment and a log would silently start again at 1.
 */
static int	check_file_once(const char *, char *);

/*
 * A meta page read while a writer rewrites it may be torn: what looks
 * damaged is looked at again before it is called so.
 */
static int
check_file(const char *dir, char *why)
{
	int rc, tries = 0;

	while ((rc = check_file_once(dir, why)) == TL_ECORRUPT &&
	    ++tries < 3) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	return rc;
}

static int
check_file_once(const char *dir, char *why)
{
	char path[4200];
	uint8_t m[2][META_END];
	uint64_t psize = 0, last, txnid[2], root, need;
	struct stat st;
	int fd, i, best = -1, rc = 0;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? TL_ENOTFOUND : errno;
	if (fstat(fd, &st) != 0) {
		rc = errno;
		goto out;
	}
	if (st.st_size == 0) {
		snprintf(why, TL_WHY_MAX, "%s/data.mdb is empty (0 bytes): not "
		    "a log any more; restore it from a copy", dir);
		rc = TL_ECORRUPT;
		goto out;
	}
	for (i = 0; i < 2; i++) {
		if (pread(fd, m[i], META_END, (off_t)(i * psize)) !=
		    META_END) {
			snprintf(why, TL_WHY_MAX, "%s/data.mdb is %lld bytes: "
			    "too short for LMDB's meta page %d", dir,
			    (long long)st.st_size, i);
			rc = TL_ECORRUPT;
			goto out;
		}
		if (get_le(m[i] + META_AT, 4) != META_MAGIC ||
		    get_le(m[i] + META_AT + 4, 4) != 1 ||
		    !(get_le(m[i] + 10, 2) & P_META_FLAG)) {
			if (i == 0 && get_le(m[i] + META_AT, 4) !=
			    META_MAGIC) {
				uint8_t m1[META_END];
				long ps = sysconf(_SC_PAGESIZE);

				/*
				 * Not LMDB at all, unless the second meta
				 * page (at the usual page size) is LMDB's:
				 * then the first one is damaged.
				 */
				if (ps > 0 && pread(fd, m1, META_END,
				    (off_t)ps) == META_END &&
				    get_le(m1 + META_AT, 4) == META_MAGIC) {
					snprintf(why, TL_WHY_MAX,
					    "%s/data.mdb: meta page 0 is "
					    "damaged", dir);
					rc = TL_ECORRUPT;
				} else
					rc = TL_ENOTLOG;
				goto out;
			}
			snprintf(why, TL_WHY_MAX, "%s/data.mdb: meta page %d "
			    "is damaged", dir, i);
			rc = TL_ECORRUPT;
			goto out;
		}
		if (i == 0) {
			psize = get_le(m[0] + META_DB, 4);
			if (psize < 512 || psize > 65536 ||
			    (psize & (psize - 1)) != 0) {
				snprintf(why, TL_WHY_MAX, "%s/data.mdb: meta "
				    "page 0 gives a page size of %llu", dir,
				    (unsigned long long)psize);
				rc = TL_ECORRUPT;
				goto out;
			}
		}
		/* LMDB takes the page size of the meta it picks: both. */
		if (get_le(m[i] + META_DB, 4) != psize) {
			snprintf(why, TL_WHY_MAX, "%s/data.mdb: meta page %d "
			    "gives a page size of %llu, meta page 0 %llu", dir,
			    i, (unsigned long long)get_le(m[i] + META_DB, 4),
			    (unsigned long long)psize);
			rc = TL_ECORRUPT;
			goto out;
		}
		txnid[i] = get_le(m[i] + META_TXNID, 8);
	}
	/* The meta LMDB will use: the newer one. */
	best = txnid[1] > txnid[0];
	last = get_le(m[best] + META_LASTPG, 8);
	if (last < 1 || last > ((uint64_t)1 << 40)) {
		snprintf(why, TL_WHY_MAX, "%s/data.mdb: meta page %d gives "
		    "last page %llu", dir, best, (unsigned long long)last);
		rc = TL_ECORRUPT;
		goto out;
	}
	need = (last + 1) * psize;
	/*
	 * Sized after the meta was read: a writer committing meanwhile
	 * grows the file before it writes the meta that names the pages.
	 */
	if (fstat(fd, &st) != 0) {
		rc = errno;
		goto out;
	}
	if ((uint64_t)st.st_size < need) {
		snprintf(why, TL_WHY_MAX, "%s/data.mdb is %lld bytes, but its "
		    "meta page says %llu pages of %llu (%llu bytes): the file "
		    "was cut short", dir, (long long)st.st_size,
		    (unsigned long long)(last + 1), (unsigned long long)psize,
		    (unsigned long long)need);
		rc = TL_ECORRUPT;
		goto out;
	}
	for (i = 0; i < 2; i++) {
		/* md_root is P_INVALID (all ones) for an empty table. */
		root = get_le(m[best] + META_DB + i * META_DBSZ + 40, 8);
		if (root != UINT64_MAX && (root < 2 || root > last)) {
			snprintf(why, TL_WHY_MAX, "%s/data.mdb: meta page %d "
			    "gives a root page %llu outside the file's %llu "
			    "pages", dir, best, (unsigned long long)root,
			    (unsigned long long)(last + 1));
			rc = TL_ECORRUPT;
			goto out;
		}
	}
out:
	close(fd);
	return rc;
}

/* Reads or, for a new log, writes the identity of the log. */
/*
 * After "meta" could not be read: whether the main table still names
 * tally's tables (or cannot be walked at all).  Then the file is a
 * damaged log (TL_ECORRUPT), not another program's LMDB environment.
 */
static int
damaged_log(struct tl_log *log, MDB_txn *txn)
{
	MDB_dbi main;
	MDB_cursor *c;
	MDB_val k, v;
	int rc, op = MDB_FIRST, found = 0;

	if (mdb_dbi_open(txn, NULL, 0, &main) != 0 ||
	    mdb_cursor_open(txn, main, &c) != 0)
		return 1;
	while ((rc = mdb_cursor_get(c, &k, &v, op)) == 0) {
		op = MDB_NEXT;
		if ((k.mv_size == 6 && memcmp(k.mv_data, "events", 6) == 0) ||
		    (k.mv_size == 7 && memcmp(k.mv_data, "streams", 7) == 0) ||
		    (k.mv_size == 11 &&
		    memcmp(k.mv_data, "checkpoints", 11) == 0) ||
		    (k.mv_size > 2 && memcmp(k.mv_data, "p:", 2) == 0)) {
			found = 1;
			break;
		}
	}
	mdb_cursor_close(c);
	if (found || (rc != 0 && rc != MDB_NOTFOUND)) {
		snprintf(log->lasterr, sizeof(log->lasterr), "%s/data.mdb: "
		    "its table of tables is damaged (tally's meta table cannot "
		    "be read)", log->dir);
		return 1;
	}
	return 0;
}

static int
check_meta(struct tl_log *log, int create)
{
	MDB_txn *txn = NULL;
	MDB_val k, v;
	uint8_t fmt[4];
	int rc;
	unsigned dbflags = create ? MDB_CREATE : 0;

	rc = mdb_txn_begin(log->env, NULL,
	    (log->flags & TL_LOG_RDONLY) ? MDB_RDONLY : 0, &txn);
	if (rc != 0)
		return tl_log_mdberr(log, rc, "begin");
	log->mtxn = txn;	/* aborted by the opener after a fault */

	rc = mdb_dbi_open(txn, "meta", dbflags, &log->meta);
	if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
		rc = damaged_log(log, txn) ? TL_ECORRUPT : TL_ENOTLOG;
		goto abort;
	}
	if (rc != 0)
		goto mdberr;
	k.mv_data = "magic";
	k.mv_size = 5;
	if (create) {
		v.mv_data = TL_LOG_MAGIC;
		v.mv_size = sizeof(TL_LOG_MAGIC);
		if ((rc = mdb_put(txn, log->meta, &k, &v,
		    MDB_NOOVERWRITE)) != 0) {
			if (rc == MDB_KEYEXIST) {
				rc = TL_EEXIST;
				goto abort;
			}
			goto mdberr;
		}
	} else {
		rc = mdb_get(txn, log->meta, &k, &v);
		if (rc != 0 && rc != MDB_NOTFOUND)
			goto mdberr;
		if (rc == MDB_NOTFOUND || v.mv_size != sizeof(TL_LOG_MAGIC) ||
		    memcmp(v.mv_data, TL_LOG_MAGIC, v.mv_size) != 0) {
			rc = damaged_log(log, txn) ? TL_ECORRUPT : TL_ENOTLOG;
			goto abort;
		}
	}

	k.mv_data = "format";
	k.mv_size = 6;
	if (create) {
		fmt[0] = fmt[1] = fmt[2] = 0;
		fmt[3] = TL_LOG_FORMAT;
		v.mv_data = fmt;
		v.mv_size = 4;
		if ((rc = mdb_put(txn, log->meta, &k, &v, 0)) != 0)
			goto mdberr;
	} else {
		const uint8_t *p;
		uint32_t f;

		if ((rc = mdb_get(txn, log->meta, &k, &v)) != 0 ||
		    v.mv_size != 4) {
			rc = damaged_log(log, txn) ? TL_ECORRUPT : TL_ENOTLOG;
			goto abort;
		}
		p = v.mv_data;
		f = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		    (uint32_t)p[2] << 8 | p[3];
		if (f > TL_LOG_FORMAT) {
			snprintf(log->lasterr, sizeof(log->lasterr),
			    "log format %u is newer than this tally reads "
			    "(%d): upgrade tally", f, TL_LOG_FORMAT);
			rc = TL_ENEWER;
			goto abort;
		}
	}
	if (create) {
		uint8_t ts[8];
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		put_be64(ts, (uint64_t)now.tv_sec * 1000000000u +
		    (uint64_t)now.tv_nsec);
		k.mv_data = "created";
		k.mv_size = 7;
		v.mv_data = ts;
		v.mv_size = 8;
		if ((rc = mdb_put(txn, log->meta, &k, &v, 0)) != 0)
			goto mdberr;
	}

	if ((rc = mdb_dbi_open(txn, "events", dbflags,
	    &log->events)) != 0)
		goto dbi;
	if ((rc = mdb_dbi_open(txn, "streams",
	    dbflags | MDB_DUPSORT | MDB_DUPFIXED, &log->streams)) != 0)
		goto dbi;
	if ((rc = mdb_dbi_open(txn, "checkpoints", dbflags,
	    &log->ckpts)) != 0)
		goto dbi;

	log->mtxn = NULL;
	if ((rc = mdb_txn_commit(txn)) != 0)
		return tl_log_mdberr(log, rc, "commit");
	return 0;
dbi:
	if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
		/* tally's meta table, without its events: a damaged log. */
		snprintf(log->lasterr, sizeof(log->lasterr), "%s/data.mdb: "
		    "the table of tables is damaged (tally's tables are "
		    "gone)", log->dir);
		rc = TL_ECORRUPT;
		goto abort;
	}
mdberr:
	rc = tl_log_mdberr(log, rc, "meta");
abort:
	log->mtxn = NULL;
	mdb_txn_abort(txn);
	return rc;
}

int
tl_log_open(const char *dir, unsigned flags, struct tl_log **out)
{
	struct tl_log_opts o = TL_LOG_OPTS_ZERO;

	o.flags = flags;
	return tl_log_open_opts(dir, &o, out);
}

struct meta_arg {
	struct tl_log	*log;
	int		 create;
};

struct envopen_arg {
	struct tl_log	*log;
	const char	*dir;
	unsigned	 flags;
};

/* mdb_env_open reads both meta pages through the map: guarded too. */
static int
envopen_fn(void *arg)
{
	struct envopen_arg *ea = arg;

	return mdb_env_open(ea->log->env, ea->dir, ea->flags, 0600);
}

static int
check_meta_fn(void *arg)
{
	struct meta_arg *ma = arg;

	return check_meta(ma->log, ma->create);
}

int
tl_log_open_opts(const char *dir, const struct tl_log_opts *o,
    struct tl_log **out)
{
	unsigned flags = o->flags;
	size_t mapsize = o->mapsize;
	char *why = o->why;
	struct tl_log *log;
	struct stat st;
	struct meta_arg ma;
	char fwhy[TL_WHY_MAX];
	unsigned eflags = MDB_NOTLS;
	int rc, dead;

	*out = NULL;
	fwhy[0] = '\0';
	if (why != NULL)
		why[0] = '\0';
	if (sodium_init() < 0)
		return TL_ESECRET;
	if (stat(dir, &st) != 0) {
		if (errno == ENOENT)
			return TL_ENOTFOUND;
		return errno;
	}
	if (!S_ISDIR(st.st_mode))
		return TL_ENOTLOG;
	if (flags & TL_LOG_CREATE) {
		if (file_exists(dir, "data.mdb"))
			return TL_EEXIST;
	} else if ((rc = check_file(dir, fwhy)) != 0) {
		if (why != NULL)
			memcpy(why, fwhy, sizeof(fwhy));
		return rc;
	}

	if ((log = calloc(1, sizeof(*log))) == NULL)
		return ENOMEM;
	log->flags = flags;
	log->rpos = TL_RAND_POOL;
	log->mapsize = mapsize ? mapsize : TL_MAP_DEFAULT;
	if ((log->dir = strdup(dir)) == NULL) {
		rc = ENOMEM;
		goto free;
	}
	if ((rc = mdb_env_create(&log->env)) != 0)
		goto mdberr;
	mdb_env_set_assert(log->env, guard_assert);
	mdb_env_set_maxdbs(log->env, TL_MAX_DBS);
	mdb_env_set_maxreaders(log->env, 254);
	if ((rc = mdb_env_set_mapsize(log->env, log->mapsize)) != 0)
		goto mdberr;
	if (flags & TL_LOG_RDONLY)
		eflags |= MDB_RDONLY;
	if (flags & TL_LOG_NOSYNC)
		eflags |= MDB_NOSYNC;
	{
		struct envopen_arg ea = { log, dir, eflags };

		pthread_mutex_lock(&guard_mu);
		guard_install();
		pthread_mutex_unlock(&guard_mu);
		rc = guard_run(log, envopen_fn, &ea);
	}
	if (rc == TL_ECORRUPT) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "%s", log->lasterr);
		goto close;
	}
	if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH) {
		rc = TL_ENOTLOG;
		goto close;
	}
	if (rc != 0)
		goto mdberr;
	/*
	 * Another process may have grown the map: adopt the file's size
	 * if it is larger than ours.
	 */
	{
		MDB_envinfo ei;
		MDB_stat ms;

		mdb_env_info(log->env, &ei);
		log->mapsize = ei.me_mapsize;
		/*
		 * LMDB maps a larger file at exactly its size, which leaves a
		 * writer no room: the first write would fill the map and be
		 * run again.  Leave room for the log to double.
		 */
		if (!(flags & TL_LOG_RDONLY) && mdb_env_stat(log->env,
		    &ms) == 0) {
			size_t used = (size_t)(ei.me_last_pgno + 1) *
			    ms.ms_psize;

			if (log->mapsize < used * 2 &&
			    mdb_env_set_mapsize(log->env, used * 2) == 0)
				log->mapsize = used * 2;
		}
	}
	guard_track(log);
	guard_add(log);
	/* Reader slots of processes that died would pin old pages. */
	mdb_reader_check(log->env, &dead);
	ma.log = log;
	ma.create = (flags & TL_LOG_CREATE) != 0;
	if ((rc = guard_run(log, check_meta_fn, &ma)) != 0) {
		if (log->mtxn != NULL)
			mdb_txn_abort(log->mtxn);
		log->mtxn = NULL;
		if (why != NULL && rc == TL_ECORRUPT)
			snprintf(why, TL_WHY_MAX, "%s", log->lasterr);
		goto close;
	}
	{
		char cj[PATH_MAX];
		int n = snprintf(cj, sizeof(cj), "%s/../%s", dir,
		    TL_CLUSTER_FILE);

		log->clustered = n > 0 && (size_t)n < sizeof(cj) &&
		    access(cj, F_OK) == 0;
	}
	*out = log;
	return 0;
mdberr:
	rc = tl_log_mdberr(log, rc, "open");
	if (why != NULL)
		snprintf(why, TL_WHY_MAX, "%s", log->lasterr);
close:
	guard_remove(log);
	if (log->env != NULL)
		mdb_env_close(log->env);
free:
	free(log->dir);
	free(log);
	return rc;
}

/* The pid holding a flock on the file (dev, ino), from /proc/locks. */
static long
flock_holder(dev_t dev, ino_t ino)
{
	char line[256];
	FILE *fp;
	long pid = 0;

	if ((fp = fopen("/proc/locks", "re")) == NULL)
		return 0;
	while (pid == 0 && fgets(line, sizeof(line), fp) != NULL) {
		unsigned maj, min;
		unsigned long long in;
		long p;
		char kind[16], mode[16];

		/* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" */
		if (sscanf(line, "%*d: %15s %*s %15s %ld %x:%x:%llu", kind, mode,
		    &p, &maj, &min, &in) != 6 || strcmp(kind, "FLOCK") != 0)
			continue;
		if (in == (unsigned long long)ino && maj == major(dev) &&
		    min == minor(dev))
			pid = p;
	}
	fclose(fp);
	return pid;
}

int
tl_log_lock_daemon(const char *dir, int *fdp, long *holderp)
{
	char path[4200];
	struct stat st;
	int fd, rc, tries;

	*fdp = -1;
	*holderp = 0;
	if ((size_t)snprintf(path, sizeof(path), "%s/data.mdb", dir) >=
	    sizeof(path))
		return ENAMETOOLONG;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? TL_ENOTFOUND : errno;
	/*
	 * A daemon just killed and reaped may hold it a moment longer:
	 * the kernel releases the lock of a dying process's file from a
	 * delayed work item, after its parent has seen it exit.  So a
	 * busy lock is tried again for a second before it is refused.
	 */
	for (tries = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; tries++) {
		if (errno == EWOULDBLOCK && tries < 100) {
			struct timespec ms10 = { 0, 10 * 1000 * 1000 };

			nanosleep(&ms10, NULL);
			continue;
		}
		rc = errno == EWOULDBLOCK ? TL_ELOCKED : errno;
		if (rc == TL_ELOCKED && fstat(fd, &st) == 0)
			*holderp = flock_holder(st.st_dev, st.st_ino);
		close(fd);
		return rc;
	}
	*fdp = fd;
	return 0;
}

void
tl_log_close(struct tl_log *log)
{
	if (log == NULL)
		return;
	guard_remove(log);
	/*
	 * LMDB frees the pages a write copied here: a damaged page header
	 * it copied by has wrecked the heap, and free() aborts.
	 */
	guard_txns++;
	guard_txlog = log;
	mdb_env_close(log->env);
	guard_txns--;
	guard_txlog = NULL;
	sodium_memzero(log->rpool, sizeof(log->rpool));
	free(log->dir);
	free(log);
}

int
tl_log_size(struct tl_log *log, uint64_t *usedp, uint64_t *mapp)
{
	MDB_envinfo ei;
	MDB_stat st;
	int rc;

	if ((rc = mdb_env_info(log->env, &ei)) != 0 ||
	    (rc = mdb_env_stat(log->env, &st)) != 0)
		return tl_log_mdberr(log, rc, "info");
	*usedp = (uint64_t)(ei.me_last_pgno + 1) * st.ms_psize;
	*mapp = ei.me_mapsize;
	return 0;
}

/* Grows the map; only safe with no transaction open in this process. */
static int
grow(struct tl_log *log)
{
	size_t want = log->mapsize * 2;
	int rc;

	if (want < log->mapsize)
		return ENOSPC;
	if ((rc = mdb_env_set_mapsize(log->env, want)) != 0)
		return tl_log_mdberr(log, rc, "grow map");
	log->mapsize = want;
	guard_track(log);
	return 0;
}

static int
begin(struct tl_log *log, unsigned flags, struct tl_txn **out)
{
	struct tl_txn *t;
	int rc, tries;

	*out = NULL;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return ENOMEM;
	t->log = log;
	t->flags = flags;
	for (tries = 0;; tries++) {
		rc = mdb_txn_begin(log->env, NULL,
		    (flags & TL_TXN_RDONLY) ? MDB_RDONLY : 0, &t->txn);
		if (rc != MDB_MAP_RESIZED || tries > 3)
			break;
		/* Another process grew the map: adopt its size. */
		mdb_env_set_mapsize(log->env, 0);
		{
			MDB_envinfo ei;

			mdb_env_info(log->env, &ei);
			log->mapsize = ei.me_mapsize;
		}
		guard_track(log);
	}
	if (rc != 0) {
		free(t);
		return tl_log_mdberr(log, rc, "begin");
	}
	guard_txns++;
	guard_txlog = log;
	{
		MDB_envinfo ei;

		/* What this snapshot can see is at most what is committed. */
		mdb_env_info(log->env, &ei);
		t->map_end = log->map_lo + (uintptr_t)(ei.me_last_pgno + 1) *
		    log->psize;
		if (t->map_end > log->map_hi)
			t->map_end = log->map_hi;
	}
	*out = t;
	return 0;
}

int
tl_log_begin(struct tl_log *log, unsigned flags, struct tl_txn **out)
{
	if ((log->flags & TL_LOG_RDONLY) && !(flags & TL_TXN_RDONLY))
		return TL_EINVAL;
	return begin(log, flags, out);
}

static void
txn_free(struct tl_txn *t)
{
	if (guard_txns > 0)
		guard_txns--;
	free(t->buf);
	free(t);
}

/*
 * LMDB turns a short write into EIO, and a full file system gives a
 * short write whenever part of a commit's pages still fit: with (about)
 * nothing left where the log lives, the I/O error is a full disk.
 */
#define FULL_BELOW	((uint64_t)1 << 20)

static int
full_disk(const struct tl_log *log, int rc)
{
	struct statvfs sv;
	uint64_t avail;

	if (rc != EIO || statvfs(log->dir, &sv) != 0)
		return rc;
	avail = (uint64_t)(geteuid() == 0 ? sv.f_bfree : sv.f_bavail) *
	    sv.f_frsize;
	return avail < FULL_BELOW ? ENOSPC : rc;
}

int
tl_log_commit(struct tl_txn *t)
{
	struct tl_log *log = t->log;
	int rc;

	/*
	 * Cluster mode: the cluster commits first, or nothing does.  A
	 * home whose cluster no hook speaks to appends nothing of its own.
	 */
	if (t->own_first != 0 && (log->commit_fn != NULL || log->clustered)) {
		if (log->commit_fn == NULL) {
			snprintf(log->lasterr, sizeof(log->lasterr), "%s is a "
			    "cluster's home: its commits go through the "
			    "cluster", log->dir);
			rc = TL_ENOTLEADER;
		} else
			rc = log->commit_fn(t, t->own_first, t->own_prev,
			    t->head_seq, log->commit_arg);
		if (rc != 0) {
			tl_log_abort(t);
			return rc;
		}
	}
	rc = mdb_txn_commit(t->txn);
	txn_free(t);
	if (rc == MDB_MAP_FULL)
		return rc;	/* tl_log_write grows and retries */
	return tl_log_mdberr(log, full_disk(log, rc), "commit");
}

void
tl_log_set_commit(struct tl_log *log, tl_commit_fn fn, void *arg)
{
	log->commit_fn = fn;
	log->commit_arg = arg;
}

int
tl_log_snapshot(struct tl_log *log, const char *path)
{
	int fd, rc;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0)
		return errno == EEXIST ? TL_EEXIST : errno;
	rc = mdb_env_copyfd2(log->env, fd, MDB_CP_COMPACT);
	if (rc != 0)
		rc = tl_log_mdberr(log, rc, "snapshot");
	else if (fsync(fd) != 0)
		rc = errno;
	if (close(fd) != 0 && rc == 0)
		rc = errno;
	if (rc != 0)
		unlink(path);
	return rc;
}

int
tl_log_clustered(const struct tl_log *log)
{
	return log->clustered;
}

struct tl_log *
tl_txn_log(struct tl_txn *t)
{
	return t->log;
}

void
tl_log_abort(struct tl_txn *t)
{
	if (t == NULL)
		return;
	mdb_txn_abort(t->txn);
	txn_free(t);
}

int
tl_log_write(struct tl_log *log, tl_write_fn fn, void *arg)
{
	struct tl_txn *t;
	int rc;

	for (;;) {
		if ((rc = tl_log_begin(log, 0, &t)) != 0)
			return rc;
		rc = fn(t, arg);
		if (rc == 0)
			rc = tl_log_commit(t);
		else
			tl_log_abort(t);
		if (rc != MDB_MAP_FULL)
			return rc;
		if ((rc = grow(log)) != 0)
			return rc;
	}
}

/*
 * Before the first append of a write transaction: the head is the real
 * last event.  LMDB counts the entries of every table in its records,
 * apart from the pages, so a damaged branch page that hides the events
 * after it (MDB_LAST would find an earlier one, and the append would
 * reuse a sequence number: a fork) shows as counts that disagree with
 * the head's sequence.  And the head itself verifies: it decodes,
 * links to the stored hash of the event before it and hashes to what
 * it stores.  One decode and one hash per write transaction.
 */
static int
prove_head(struct tl_txn *t, const MDB_val *k, const MDB_val *v)
{
	struct tl_log *log = t->log;
	struct tl_event ev;
	MDB_stat es, ss;
	MDB_val pk, pv;
	uint8_t key[8], prev[TL_HASH_LEN], h[TL_HASH_LEN];
	char why[TL_WHY_MAX] = "";
	const char *what = NULL;
	int rc;

	if ((rc = mdb_stat(t->txn, log->events, &es)) != 0 ||
	    (rc = mdb_stat(t->txn, log->streams, &ss)) != 0)
		return tl_log_mdberr(log, rc, "stat");
	if (es.ms_entries != t->head_seq || ss.ms_entries != t->head_seq) {
		snprintf(log->lasterr, sizeof(log->lasterr), "%s/data.mdb: "
		    "the last event found is %llu but LMDB counts %llu events "
		    "and %llu in the stream index: a damaged page hides "
		    "events; nothing was appended (see tally verify)",
		    log->dir, (unsigned long long)t->head_seq,
		    (unsigned long long)es.ms_entries,
		    (unsigned long long)ss.ms_entries);
		return TL_ECORRUPT;
	}
	if (t->head_seq == 0)
		return 0;
	if ((rc = record_decode(t, k, v, &ev, why)) != 0) {
		what = why;
		goto bad;
	}
	memset(prev, 0, sizeof(prev));
	if (t->head_seq > 1) {
		put_be64(key, t->head_seq - 1);
		pk.mv_data = key;
		pk.mv_size = 8;
		if (mdb_get(t->txn, log->events, &pk, &pv) != 0 ||
		    !in_file(t, &pv) || pv.mv_size < TL_HASH_LEN) {
			what = "the event before it cannot be read";
			goto bad;
		}
		memcpy(prev, pv.mv_data, TL_HASH_LEN);
	}
	if (memcmp(ev.prev, prev, TL_HASH_LEN) != 0) {
		what = "its link to the previous event does not match";
		goto bad;
	}
	chain_hash(prev, ev.raw, ev.raw_len, h);
	if (memcmp(h, ev.hash, TL_HASH_LEN) != 0) {
		what = "its hash does not match the content";
		goto bad;
	}
	return 0;
bad:
	snprintf(log->lasterr, sizeof(log->lasterr), "%s/data.mdb: the last "
	    "event, event %llu, does not verify (%.200s): nothing was "
	    "appended (see tally verify)", log->dir,
	    (unsigned long long)t->head_seq, what);
	return TL_ECORRUPT;
}

static int
load_head_fn(void *arg)
{
	struct tl_txn *t = arg;
	MDB_val k, v;
	int rc;

	/* load_head closes it, also after a fault. */
	if ((rc = mdb_cursor_open(t->txn, t->log->events, &t->hcur)) != 0)
		return tl_log_mdberr(t->log, rc, "cursor");
	rc = mdb_cursor_get(t->hcur, &k, &v, MDB_LAST);
	if (rc == MDB_NOTFOUND) {
		t->head_seq = 0;
		memset(t->head_hash, 0, TL_HASH_LEN);
		rc = 0;
	} else if (rc == 0) {
		if (k.mv_size != 8 || v.mv_size < TL_HASH_LEN ||
		    !in_file(t, &k) || !in_file(t, &v)) {
			snprintf(t->log->lasterr, sizeof(t->log->lasterr),
			    "%s/data.mdb: the last event's record is damaged",
			    t->log->dir);
			rc = TL_ECORRUPT;
		} else {
			t->head_seq = get_be64(k.mv_data);
			memcpy(t->head_hash, v.mv_data, TL_HASH_LEN);
		}
	} else
		rc = tl_log_mdberr(t->log, rc, "last");
	if (rc == 0 && !(t->flags & TL_TXN_RDONLY))
		rc = prove_head(t, &k, &v);
	return rc;
}

static int
load_head(struct tl_txn *t)
{
	int rc;

	t->hcur = NULL;
	rc = guard_run(t->log, load_head_fn, t);
	if (t->hcur != NULL)
		mdb_cursor_close(t->hcur);
	t->hcur = NULL;
	if (rc == 0)
		t->have_head = 1;
	return rc;
}

int
tl_log_last(struct tl_txn *t, uint64_t *seqp, uint8_t hash[TL_HASH_LEN])
{
	int rc;

	if (!t->have_head && (rc = load_head(t)) != 0)
		return rc;
	*seqp = t->head_seq;
	if (hash != NULL)
		memcpy(hash, t->head_hash, TL_HASH_LEN);
	return 0;
}

int
tl_stream_version(struct tl_txn *t, const char *stream, uint64_t *verp)
{
	MDB_cursor *c;
	MDB_val k, v;
	size_t n = 0;
	int rc;

	if (t->last_stream[0] != '\0' && strcmp(t->last_stream, stream) == 0) {
		*verp = t->last_ver;
		return 0;
	}
	k.mv_data = (void *)stream;
	k.mv_size = strlen(stream);
	if (k.mv_size == 0 || k.mv_size > TL_STREAM_MAX)
		return TL_EINVAL;
	if ((rc = mdb_cursor_open(t->txn, t->log->streams, &c)) != 0)
		return tl_log_mdberr(t->log, rc, "cursor");
	rc = mdb_cursor_get(c, &k, &v, MDB_SET);
	if (rc == 0)
		rc = mdb_cursor_count(c, &n);
	else if (rc == MDB_NOTFOUND)
		rc = 0;
	mdb_cursor_close(c);
	if (rc != 0)
		return tl_log_mdberr(t->log, rc, "stream");
	*verp = n;
	return 0;
}

static void
fresh_id(struct tl_log *log, uint8_t id[TL_ID_LEN])
{
	if (log->rpos + TL_ID_LEN > TL_RAND_POOL) {
		randombytes_buf(log->rpool, TL_RAND_POOL);
		log->rpos = 0;
	}
	memcpy(id, log->rpool + log->rpos, TL_ID_LEN);
	log->rpos += TL_ID_LEN;
}

int
tl_append(struct tl_txn *t, const struct tl_append *a, uint64_t *seqp,
    uint64_t *verp)
{
	struct tl_log *log = t->log;
	struct tl_event ev;
	struct timespec now;
	MDB_val k, v;
	uint8_t key[8], h[TL_HASH_LEN];
	uint64_t ver;
	size_t need, n;
	int rc;

	if (t->flags & TL_TXN_RDONLY)
		return TL_EINVAL;
	if (a->type == NULL || a->stream == NULL)
		return TL_EINVAL;
	if (a->body != NULL && (rc = tl_env_check_map(a->body,
	    a->body_len)) != 0)
		return rc;
	if (!t->have_head && (rc = load_head(t)) != 0)
		return rc;
	if ((rc = tl_stream_version(t, a->stream, &ver)) != 0)
		return rc;
	if (a->expect != TL_VER_ANY && a->expect != ver)
		return TL_ECONFLICT;
	if (a->cause > t->head_seq)
		return TL_EINVAL;

	memset(&ev, 0, sizeof(ev));
	ev.format = TL_ENV_FORMAT;
	ev.seq = t->head_seq + 1;
	clock_gettime(CLOCK_REALTIME, &now);
	ev.ts = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	ev.version = ver + 1;
	ev.cause = a->cause;
	fresh_id(log, ev.id);
	memcpy(ev.corr, a->corr != NULL ? a->corr : ev.id, TL_ID_LEN);
	memcpy(ev.prev, t->head_hash, TL_HASH_LEN);
	n = strlen(a->type);
	if (n == 0 || n > TL_TYPE_MAX)
		return n ? TL_ETOOBIG : TL_EINVAL;
	memcpy(ev.type, a->type, n + 1);
	n = strlen(a->stream);
	if (n > TL_STREAM_MAX)
		return TL_ETOOBIG;
	memcpy(ev.stream, a->stream, n + 1);
	n = a->actor != NULL ? strlen(a->actor) : 0;
	if (n > TL_ACTOR_MAX)
		return TL_ETOOBIG;
	memcpy(ev.actor, a->actor != NULL ? a->actor : "", n + 1);

	/* Encode after the hash slot so the record is written in one put. */
	for (;;) {
		rc = tl_env_encode(&ev, a->body, a->body_len,
		    t->buf ? t->buf + TL_HASH_LEN : NULL,
		    t->bufcap > TL_HASH_LEN ? t->bufcap - TL_HASH_LEN : 0,
		    &need);
		if (rc == 0)
			break;
		if (rc != TL_ETOOBIG || need + TL_HASH_LEN <= t->bufcap)
			return rc;
		if (tl_vec_grow(&t->buf, &t->bufcap, need + TL_HASH_LEN <
		    1024 ? 1024 : need + TL_HASH_LEN, 1) != 0)
			return ENOMEM;
	}
	/*
	 * The link: hash(prev || encoding).  With prev in the hash slot
	 * for a moment, one call covers both (cheaper than update twice).
	 */
	memcpy(t->buf, t->head_hash, TL_HASH_LEN);
	crypto_generichash_blake2b(h, TL_HASH_LEN, t->buf, TL_HASH_LEN + need,
	    NULL, 0);
	memcpy(t->buf, h, TL_HASH_LEN);

	if (t->ecur == NULL &&
	    (rc = mdb_cursor_open(t->txn, log->events, &t->ecur)) != 0)
		return tl_log_mdberr(log, rc, "cursor");
	if (t->scur == NULL &&
	    (rc = mdb_cursor_open(t->txn, log->streams, &t->scur)) != 0)
		return tl_log_mdberr(log, rc, "cursor");

	put_be64(key, ev.seq);
	k.mv_data = key;
	k.mv_size = 8;
	v.mv_data = t->buf;
	v.mv_size = need + TL_HASH_LEN;
	if ((rc = mdb_cursor_put(t->ecur, &k, &v, MDB_APPEND)) != 0)
		goto mdberr;
	k.mv_data = ev.stream;
	k.mv_size = strlen(ev.stream);
	v.mv_data = key;
	v.mv_size = 8;
	if ((rc = mdb_cursor_put(t->scur, &k, &v, MDB_NODUPDATA)) != 0)
		goto mdberr;

	if (t->own_first == 0) {
		t->own_first = ev.seq;
		memcpy(t->own_prev, t->head_hash, TL_HASH_LEN);
	}
	t->head_seq = ev.seq;
	memcpy(t->head_hash, t->buf, TL_HASH_LEN);
	memcpy(t->last_stream, ev.stream, k.mv_size + 1);
	t->last_ver = ev.version;
	if (seqp != NULL)
		*seqp = ev.seq;
	if (verp != NULL)
		*verp = ev.version;
	return 0;
mdberr:
	if (rc == MDB_MAP_FULL)
		return rc;
	return tl_log_mdberr(log, rc, "append");
}

int
tl_log_append_raw(struct tl_txn *t, const void *raw, size_t len,
    const uint8_t hash[TL_HASH_LEN], uint64_t *seqp, char *why)
{
	struct tl_log *log = t->log;
	struct tl_event ev;
	MDB_val k, v;
	uint8_t key[8], h[TL_HASH_LEN];
	uint64_t ver;
	int rc;

	if (why != NULL)
		why[0] = '\0';
	if (t->flags & TL_TXN_RDONLY)
		return TL_EINVAL;
	if ((rc = tl_env_decode(raw, len, &ev, why)) != 0)
		return rc;
	if (!t->have_head && (rc = load_head(t)) != 0)
		return rc;
	if (seqp != NULL)
		*seqp = ev.seq;
	if (ev.seq <= t->head_seq)
		return TL_EEXIST;
	if (ev.seq != t->head_seq + 1) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "event %llu follows %llu: "
			    "a gap", (unsigned long long)ev.seq,
			    (unsigned long long)t->head_seq);
		return TL_ECONFLICT;
	}
	if (memcmp(ev.prev, t->head_hash, TL_HASH_LEN) != 0) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "event %llu does not link "
			    "to event %llu", (unsigned long long)ev.seq,
			    (unsigned long long)t->head_seq);
		return TL_ECORRUPT;
	}
	chain_hash(t->head_hash, raw, len, h);
	if (hash != NULL && memcmp(h, hash, TL_HASH_LEN) != 0) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "event %llu does not hash "
			    "to the hash it came with",
			    (unsigned long long)ev.seq);
		return TL_ECORRUPT;
	}
	if ((rc = tl_stream_version(t, ev.stream, &ver)) != 0)
		return rc;
	if (ev.version != ver + 1) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "event %llu is version %llu "
			    "of %.48s, which is at %llu",
			    (unsigned long long)ev.seq,
			    (unsigned long long)ev.version, ev.stream,
			    (unsigned long long)ver);
		return TL_ECORRUPT;
	}
	if (t->bufcap < len + TL_HASH_LEN && tl_vec_grow(&t->buf, &t->bufcap,
	    len + TL_HASH_LEN < 1024 ? 1024 : len + TL_HASH_LEN, 1) != 0)
		return ENOMEM;
	memcpy(t->buf, h, TL_HASH_LEN);
	memcpy(t->buf + TL_HASH_LEN, raw, len);
	if (t->ecur == NULL &&
	    (rc = mdb_cursor_open(t->txn, log->events, &t->ecur)) != 0)
		return tl_log_mdberr(log, rc, "cursor");
	if (t->scur == NULL &&
	    (rc = mdb_cursor_open(t->txn, log->streams, &t->scur)) != 0)
		return tl_log_mdberr(log, rc, "cursor");
	put_be64(key, ev.seq);
	k.mv_data = key;
	k.mv_size = 8;
	v.mv_data = t->buf;
	v.mv_size = len + TL_HASH_LEN;
	if ((rc = mdb_cursor_put(t->ecur, &k, &v, MDB_APPEND)) != 0)
		goto mdberr;
	k.mv_data = ev.stream;
	k.mv_size = strlen(ev.stream);
	v.mv_data = key;
	v.mv_size = 8;
	if ((rc = mdb_cursor_put(t->scur, &k, &v, MDB_NODUPDATA)) != 0)
		goto mdberr;
	t->head_seq = ev.seq;
	memcpy(t->head_hash, h, TL_HASH_LEN);
	memcpy(t->last_stream, ev.stream, k.mv_size + 1);
	t->last_ver = ev.version;
	return 0;
mdberr:
	if (rc == MDB_MAP_FULL)
		return rc;
	return tl_log_mdberr(log, rc, "append");
}

static int
record_decode(const struct tl_txn *t, const MDB_val *k, const MDB_val *v,
    struct tl_event *ev, char *why)
{
	int rc;

	/* k may be the caller's own (mdb_get): only v is LMDB's here. */
	if (!in_file(t, v)) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "a damaged page puts the "
			    "record outside the file");
		return TL_ECORRUPT;
	}
	if (k->mv_size != 8 || v->mv_size <= TL_HASH_LEN) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "record of %zu bytes is "
			    "too short", (size_t)v->mv_size);
		return TL_ECORRUPT;
	}
	rc = tl_env_decode((const uint8_t *)v->mv_data + TL_HASH_LEN,
	    v->mv_size - TL_HASH_LEN, ev, why);
	if (rc != 0)
		return rc;
	memcpy(ev->hash, v->mv_data, TL_HASH_LEN);
	if (ev->seq != get_be64(k->mv_data)) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "record says seq %llu",
			    (unsigned long long)ev->seq);
		return TL_ECORRUPT;
	}
	return 0;
}

struct get_arg {
	struct tl_txn	*t;
	uint64_t	 seq;
	struct tl_event	*ev;
};

static int log_get(struct tl_txn *t, uint64_t seq, struct tl_event *ev);

static int
get_fn(void *arg)
{
	struct get_arg *ga = arg;

	return log_get(ga->t, ga->seq, ga->ev);
}

int
tl_log_get(struct tl_txn *t, uint64_t seq, struct tl_event *ev)
{
	struct get_arg ga = { t, seq, ev };

	return guard_run(t->log, get_fn, &ga);
}

static int
log_get(struct tl_txn *t, uint64_t seq, struct tl_event *ev)
{
	MDB_val k, v;
	uint8_t key[8];
	int rc;

	put_be64(key, seq);
	k.mv_data = key;
	k.mv_size = 8;
	if ((rc = mdb_get(t->txn, t->log->events, &k, &v)) != 0)
		return tl_log_mdberr(t->log, rc, "get");
	return record_decode(t, &k, &v, ev, NULL);
}

struct tl_iter {
	struct tl_txn	*t;
	MDB_cursor	*cur;
	struct tl_filter f;
	char		*stream;
	char		*type;
	int		 started;
	int		 done;
	uint64_t	 errseq;
	uint64_t	 lastseq;	/* the last record read */
	int		 have_prev;	/* chain: prev holds lastseq's hash */
	uint8_t		 prev[TL_HASH_LEN];
};

int
tl_iter_open(struct tl_txn *t, const struct tl_filter *f, struct tl_iter **out)
{
	struct tl_iter *it;
	int rc;

	*out = NULL;
	if ((it = calloc(1, sizeof(*it))) == NULL)
		return ENOMEM;
	it->t = t;
	if (f != NULL)
		it->f = *f;
	if (it->f.stream != NULL && (it->stream = strdup(it->f.stream)) == NULL)
		goto nomem;
	if (it->f.type != NULL && (it->type = strdup(it->f.type)) == NULL)
		goto nomem;
	rc = mdb_cursor_open(t->txn, it->stream ? t->log->streams :
	    t->log->events, &it->cur);
	if (rc != 0) {
		rc = tl_log_mdberr(t->log, rc, "cursor");
		tl_iter_close(it);
		return rc;
	}
	*out = it;
	return 0;
nomem:
	tl_iter_close(it);
	return ENOMEM;
}

void
tl_iter_close(struct tl_iter *it)
{
	if (it == NULL)
		return;
	if (it->cur != NULL)
		mdb_cursor_close(it->cur);
	free(it->stream);
	free(it->type);
	free(it);
}

uint64_t
tl_iter_errseq(const struct tl_iter *it)
{
	return it->errseq;
}

/* Positions on the next candidate record; fills k and v of the event. */
static int
iter_step(struct tl_iter *it, MDB_val *k, MDB_val *v)
{
	struct tl_log *log = it->t->log;
	uint8_t key[8];
	int rc;

	if (it->stream == NULL) {
		if (!it->started) {
			put_be64(key, it->f.from);
			k->mv_data = key;
			k->mv_size = 8;
			rc = mdb_cursor_get(it->cur, k, v, MDB_SET_RANGE);
		} else
			rc = mdb_cursor_get(it->cur, k, v, MDB_NEXT);
		it->started = 1;
		return rc;
	}

	/* By stream: walk the stream's duplicates, fetch each event. */
	for (;;) {
		MDB_val sk, sv;

		if (!it->started) {
			sk.mv_data = it->stream;
			sk.mv_size = strlen(it->stream);
			rc = mdb_cursor_get(it->cur, &sk, &sv, MDB_SET);
			if (rc == 0 && it->f.from > 0) {
				put_be64(key, it->f.from);
				sv.mv_data = key;
				sv.mv_size = 8;
				rc = mdb_cursor_get(it->cur, &sk, &sv,
				    MDB_GET_BOTH_RANGE);
			}
		} else
			rc = mdb_cursor_get(it->cur, &sk, &sv, MDB_NEXT_DUP);
		it->started = 1;
		if (rc != 0)
			return rc;
		if (sv.mv_size != 8)
			return MDB_CORRUPTED;
		k->mv_data = sv.mv_data;
		k->mv_size = 8;
		rc = mdb_get(it->t->txn, log->events, k, v);
		return rc == MDB_NOTFOUND ? MDB_CORRUPTED : rc;
	}
}

struct next_arg {
	struct tl_iter	*it;
	struct tl_event	*ev;
};

static int iter_next(struct tl_iter *it, struct tl_event *ev);

/*
 * The chain as the iterator walks: the event follows the last one read
 * (or, first, the stored hash of the event before it), links to it and
 * hashes to what it stores.  TL_ECORRUPT with lasterr saying why.
 */
static int
iter_chain(struct tl_iter *it, const MDB_val *k, const struct tl_event *ev)
{
	struct tl_log *log = it->t->log;
	uint8_t h[TL_HASH_LEN];
	const char *what = NULL;

	if (!it->have_prev) {
		if (ev->seq == 1)
			memset(it->prev, 0, TL_HASH_LEN);
		else {
			MDB_val pk, pv;
			uint8_t key[8];

			put_be64(key, ev->seq - 1);
			pk.mv_data = key;
			pk.mv_size = 8;
			if (mdb_get(it->t->txn, log->events, &pk, &pv) != 0 ||
			    !in_file(it->t, &pv) || pv.mv_size < TL_HASH_LEN) {
				what = "the event before it cannot be read";
				goto bad;
			}
			memcpy(it->prev, pv.mv_data, TL_HASH_LEN);
		}
		it->have_prev = 1;
	} else if (ev->seq != it->lastseq + 1)
		what = "a sequence gap before it";
	(void)k;
	if (what == NULL && memcmp(ev->prev, it->prev, TL_HASH_LEN) != 0)
		what = "its link to the previous event does not match";
	if (what == NULL) {
		chain_hash(it->prev, ev->raw, ev->raw_len, h);
		if (memcmp(h, ev->hash, TL_HASH_LEN) != 0)
			what = "its hash does not match the content";
	}
	if (what == NULL) {
		memcpy(it->prev, ev->hash, TL_HASH_LEN);
		return 0;
	}
bad:
	snprintf(log->lasterr, sizeof(log->lasterr), "%s/data.mdb: event "
	    "%llu does not verify: %s", log->dir, (unsigned long long)ev->seq,
	    what);
	it->errseq = ev->seq;
	return TL_ECORRUPT;
}

static int
next_fn(void *arg)
{
	struct next_arg *na = arg;

	return iter_next(na->it, na->ev);
}

int
tl_iter_next(struct tl_iter *it, struct tl_event *ev)
{
	struct next_arg na = { it, ev };
	int rc;

	if ((rc = guard_run(it->t->log, next_fn, &na)) == TL_ECORRUPT &&
	    it->errseq == 0)
		it->errseq = it->lastseq + 1;
	return rc;
}

static int
iter_next(struct tl_iter *it, struct tl_event *ev)
{
	MDB_val k, v;
	int rc;

	if (it->done)
		return TL_EEOF;
	for (;;) {
		rc = iter_step(it, &k, &v);
		if (rc == MDB_NOTFOUND) {
			it->done = 1;
			return TL_EEOF;
		}
		if (rc != 0)
			return tl_log_mdberr(it->t->log, rc, "iterate");
		if (k.mv_size == 8 && it->f.to != 0 &&
		    get_be64(k.mv_data) > it->f.to) {
			it->done = 1;
			return TL_EEOF;
		}
		if ((rc = record_decode(it->t, &k, &v, ev, NULL)) != 0) {
			it->errseq = k.mv_size == 8 ? get_be64(k.mv_data) : 0;
			if (it->errseq == 0)
				it->errseq = it->lastseq + 1;
			if (rc == TL_ECORRUPT || rc == TL_EMALFORMED)
				snprintf(it->t->log->lasterr,
				    sizeof(it->t->log->lasterr), "%s/data.mdb: "
				    "event %llu does not verify", it->t->log->dir,
				    (unsigned long long)it->errseq);
			return rc;
		}
		if (it->f.chain && it->stream == NULL &&
		    (rc = iter_chain(it, &k, ev)) != 0)
			return rc;
		it->lastseq = ev->seq;
		if (it->type != NULL && fnmatch(it->type, ev->type, 0) != 0)
			continue;
		return 0;
	}
}

/* hash(prev || raw), as tl_append computes it. */
static void
chain_hash(const uint8_t prev[TL_HASH_LEN], const uint8_t *raw,
    size_t len, uint8_t out[TL_HASH_LEN]);

void
tl_log_chain_hash(const uint8_t prev[TL_HASH_LEN], const void *raw,
    size_t len, uint8_t out[TL_HASH_LEN])
{
	chain_hash(prev, raw, len, out);
}

static void
chain_hash(const uint8_t prev[TL_HASH_LEN], const uint8_t *raw,
    size_t len, uint8_t out[TL_HASH_LEN])
{
	crypto_generichash_blake2b_state hs;
	uint8_t one[4096];

	/* One call over a copy beats two updates for the usual sizes. */
	if (len <= sizeof(one) - TL_HASH_LEN) {
		memcpy(one, prev, TL_HASH_LEN);
		memcpy(one + TL_HASH_LEN, raw, len);
		crypto_generichash_blake2b(out, TL_HASH_LEN, one,
		    TL_HASH_LEN + len, NULL, 0);
		return;
	}
	crypto_generichash_blake2b_init(&hs, NULL, 0, TL_HASH_LEN);
	crypto_generichash_blake2b_update(&hs, prev, TL_HASH_LEN);
	crypto_generichash_blake2b_update(&hs, raw, len);
	crypto_generichash_blake2b_final(&hs, out, TL_HASH_LEN);
}

/*
 * Verification hashes in parallel.  Every record stores its own hash,
 * so hash(stored hash of i-1 || encoding of i) can be checked for any i
 * independently; the links (prev == stored hash of i-1) are checked in
 * order, and together they are exactly the sequential chain check.  The
 * cursor and decoding stay on this thread (a transaction belongs to one
 * thread); helpers only read the map, which stays put for the
 * transaction.  Blake2b is most of the cost of a replay.
 */
#define VERIFY_BATCH	4096
#define VERIFY_THREADS	4

struct vjob {
	const uint8_t	*prev;		/* the stored hash before, in the map */
	const uint8_t	*raw;
	size_t		 len;
	const uint8_t	*hash;		/* stored */
	int		 ok;
};

struct vslice {
	struct vjob	*jobs;
	size_t		 n;
};

static void *
vhash(void *arg)
{
	struct vslice *s = arg;
	uint8_t h[TL_HASH_LEN];
	size_t i;

	for (i = 0; i < s->n; i++) {
		chain_hash(s->jobs[i].prev, s->jobs[i].raw, s->jobs[i].len, h);
		s->jobs[i].ok = memcmp(h, s->jobs[i].hash, TL_HASH_LEN) == 0;
	}
	return NULL;
}

/* Hashes jobs[0..n) on up to nthr threads, this one included. */
static void
vhash_all(struct vjob *jobs, size_t n, int nthr)
{
	struct vslice sl[VERIFY_THREADS];
	pthread_t tid[VERIFY_THREADS];
	int started[VERIFY_THREADS];
	size_t per, at = 0;
	int i;

	if (n < 256)
		nthr = 1;
	per = (n + (size_t)nthr - 1) / (size_t)nthr;
	for (i = 0; i < nthr; i++) {
		sl[i].jobs = jobs + at;
		sl[i].n = n - at < per ? n - at : per;
		at += sl[i].n;
		started[i] = i > 0 &&
		    pthread_create(&tid[i], NULL, vhash, &sl[i]) == 0;
	}
	vhash(&sl[0]);
	for (i = 1; i < nthr; i++) {
		if (started[i])
			pthread_join(tid[i], NULL);
		else
			vhash(&sl[i]);
	}
}

/*
 * One verification walk: events after `after` (whose stored hash is
 * prev0) to the end.  What it allocates is in the arg, so that the
 * caller frees it also when a fault jumped out of the walk.
 */
struct verify_arg {
	struct tl_txn	*t;
	uint64_t	 after;
	uint8_t		 prev0[TL_HASH_LEN];
	struct vjob	*jobs;
	MDB_cursor	*c;
	uint64_t	 n;		/* events checked */
	uint64_t	 at;		/* the event being read */
	uint64_t	 bad;
	uint8_t		 last[TL_HASH_LEN];	/* the last one's hash */
	char		 why[TL_WHY_MAX];
};

/* The events LMDB counts against those the walk found. */
static int
verify_counts(struct verify_arg *va, uint64_t head)
{
	MDB_stat es, ss;
	int rc;

	if ((rc = mdb_stat(va->t->txn, va->t->log->events, &es)) != 0 ||
	    (rc = mdb_stat(va->t->txn, va->t->log->streams, &ss)) != 0)
		return tl_log_mdberr(va->t->log, rc, "stat");
	if (es.ms_entries != head) {
		va->bad = head + 1;
		snprintf(va->why, sizeof(va->why), "the events table counts "
		    "%llu events but its pages lead to %llu: a damaged page "
		    "hides events", (unsigned long long)es.ms_entries,
		    (unsigned long long)head);
		return TL_ECORRUPT;
	}
	if (ss.ms_entries != head) {
		va->bad = head + 1;
		snprintf(va->why, sizeof(va->why), "the stream index counts "
		    "%llu events, the log %llu", (unsigned long long)
		    ss.ms_entries, (unsigned long long)head);
		return TL_ECORRUPT;
	}
	return 0;
}

static int
verify_fn(void *arg)
{
	struct verify_arg *va = arg;
	struct tl_txn *t = va->t;
	MDB_val k, v;
	struct tl_event ev;
	const uint8_t *prev = va->prev0;
	char ewhy[TL_WHY_MAX];
	uint8_t key[8];
	uint64_t expect = va->after + 1, ebad = 0;
	size_t nj, i;
	long ncpu;
	int rc, erc = 0, op = MDB_SET_RANGE, nthr, done = 0;

	ewhy[0] = '\0';
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	nthr = ncpu < 1 ? 1 : ncpu > VERIFY_THREADS ? VERIFY_THREADS :
	    (int)ncpu;
	if (va->after > 0) {
		/*
		 * The event it carries on from is still the one verified:
		 * the same stored hash, and its content still hashes to it.
		 */
		uint8_t before[TL_HASH_LEN], h[TL_HASH_LEN];
		MDB_val pv;

		memset(before, 0, sizeof(before));
		va->at = va->after;
		va->bad = va->after;
		snprintf(va->why, sizeof(va->why), "it changed after it was "
		    "verified");
		if (va->after > 1) {
			put_be64(key, va->after - 1);
			k.mv_data = key;
			k.mv_size = 8;
			if (mdb_get(t->txn, t->log->events, &k, &pv) != 0 ||
			    !in_file(t, &pv) || pv.mv_size < TL_HASH_LEN)
				return TL_ECORRUPT;
			memcpy(before, pv.mv_data, TL_HASH_LEN);
		}
		put_be64(key, va->after);
		k.mv_data = key;
		k.mv_size = 8;
		if ((rc = mdb_get(t->txn, t->log->events, &k, &v)) != 0 ||
		    record_decode(t, &k, &v, &ev, NULL) != 0 ||
		    memcmp(ev.hash, va->prev0, TL_HASH_LEN) != 0 ||
		    memcmp(ev.prev, before, TL_HASH_LEN) != 0)
			return TL_ECORRUPT;
		chain_hash(before, ev.raw, ev.raw_len, h);
		if (memcmp(h, ev.hash, TL_HASH_LEN) != 0)
			return TL_ECORRUPT;
		va->bad = 0;
		va->why[0] = '\0';
	}
	put_be64(key, expect);
	k.mv_data = key;
	k.mv_size = 8;
	while (!done) {
		/* A batch: read, decode and link in order. */
		for (nj = 0; nj < VERIFY_BATCH; nj++, op = MDB_NEXT) {
			ebad = va->at = expect + nj;
			rc = mdb_cursor_get(va->c, &k, &v, op);
			if (rc == MDB_NOTFOUND) {
				done = 1;
				break;
			}
			if (rc != 0) {
				erc = tl_log_mdberr(t->log, rc, "verify");
				snprintf(ewhy, sizeof(ewhy), "%s",
				    mdb_strerror(rc));
				if (erc != TL_ECORRUPT)
					erc = TL_ECORRUPT;
				break;
			}
			if (k.mv_size != 8 || !in_file(t, &k) ||
			    get_be64(k.mv_data) != ebad) {
				snprintf(ewhy, sizeof(ewhy), "sequence gap: "
				    "expected %llu", (unsigned long long)ebad);
				erc = TL_ECORRUPT;
				break;
			}
			if ((erc = record_decode(t, &k, &v, &ev,
			    ewhy)) != 0)
				break;
			if (memcmp(ev.prev, prev, TL_HASH_LEN) != 0) {
				snprintf(ewhy, sizeof(ewhy), "link to the "
				    "previous event does not match");
				erc = TL_ECORRUPT;
				break;
			}
			va->jobs[nj].prev = prev;
			va->jobs[nj].raw = ev.raw;
			va->jobs[nj].len = ev.raw_len;
			va->jobs[nj].hash = v.mv_data;
			prev = v.mv_data;
		}
		if (erc != 0)
			done = 1;
		/* Then the hashes; the first failure, in order, wins. */
		vhash_all(va->jobs, nj, nthr);
		for (i = 0; i < nj && va->jobs[i].ok; i++)
			;
		va->n += i;
		if (i < nj) {
			va->bad = expect + i;
			snprintf(va->why, sizeof(va->why), "hash does not "
			    "match the content");
			return TL_ECORRUPT;
		}
		if (nj > 0)
			memcpy(va->last, va->jobs[nj - 1].hash, TL_HASH_LEN);
		expect += nj;
	}
	if (erc != 0) {
		va->bad = ebad;
		memcpy(va->why, ewhy, TL_WHY_MAX);
		return erc;
	}
	return verify_counts(va, expect - 1);
}

static int
verify_run(struct tl_txn *t, struct verify_arg *va, uint64_t *badp,
    char *why)
{
	int rc;

	*badp = 0;
	if (why != NULL)
		why[0] = '\0';
	va->t = t;
	va->why[0] = '\0';
	memcpy(va->last, va->prev0, TL_HASH_LEN);
	if ((va->jobs = malloc(VERIFY_BATCH * sizeof(*va->jobs))) == NULL)
		return ENOMEM;
	if ((rc = mdb_cursor_open(t->txn, t->log->events, &va->c)) != 0) {
		free(va->jobs);
		return tl_log_mdberr(t->log, rc, "cursor");
	}
	rc = guard_run(t->log, verify_fn, va);
	if (rc != 0 && va->bad == 0) {
		/* A fault: the event being read is the first in doubt. */
		va->bad = va->at ? va->at : va->after + 1;
		{
			/* Past the directory: the why is short. */
			const char *w = strstr(t->log->lasterr, "data.mdb: ");

			w = w != NULL ? w + 10 : t->log->lasterr;
			memcpy(va->why, w, strnlen(w, sizeof(va->why) - 1));
			va->why[strnlen(w, sizeof(va->why) - 1)] = '\0';
		}
	}
	mdb_cursor_close(va->c);
	free(va->jobs);
	if (rc != 0) {
		*badp = va->bad;
		if (why != NULL)
			memcpy(why, va->why, TL_WHY_MAX);
	}
	return rc;
}

int
tl_log_verify(struct tl_txn *t, uint64_t *countp, uint64_t *badp, char *why)
{
	struct verify_arg va;
	int rc;

	memset(&va, 0, sizeof(va));
	rc = verify_run(t, &va, badp, why);
	if (countp != NULL)
		*countp = va.n;
	return rc;
}

int
tl_log_verify_more(struct tl_txn *t, struct tl_chain *c, uint64_t *badp,
    char *why)
{
	struct verify_arg va;
	int rc;

	memset(&va, 0, sizeof(va));
	va.after = c->seq;
	memcpy(va.prev0, c->hash, TL_HASH_LEN);
	if ((rc = verify_run(t, &va, badp, why)) == 0) {
		c->seq += va.n;
		memcpy(c->hash, va.last, TL_HASH_LEN);
	}
	return rc;
}

int
tl_ckpt_get(struct tl_txn *t, const char *name, uint64_t *seqp)
{
	MDB_val k, v;
	int rc;

	k.mv_data = (void *)name;
	k.mv_size = strlen(name);
	if (k.mv_size == 0 || k.mv_size > TL_CKPT_NAME_MAX)
		return TL_EINVAL;
	rc = mdb_get(t->txn, t->log->ckpts, &k, &v);
	if (rc == MDB_NOTFOUND) {
		*seqp = 0;
		return TL_ENOTFOUND;
	}
	if (rc != 0)
		return tl_log_mdberr(t->log, rc, "checkpoint");
	if (v.mv_size != 8)
		return TL_ECORRUPT;
	*seqp = get_be64(v.mv_data);
	return 0;
}

int
tl_ckpt_set(struct tl_txn *t, const char *name, uint64_t seq)
{
	MDB_val k, v;
	uint8_t val[8];
	int rc;

	k.mv_data = (void *)name;
	k.mv_size = strlen(name);
	if (k.mv_size == 0 || k.mv_size > TL_CKPT_NAME_MAX)
		return TL_EINVAL;
	put_be64(val, seq);
	v.mv_data = val;
	v.mv_size = 8;
	rc = mdb_put(t->txn, t->log->ckpts, &k, &v, 0);
	if (rc == MDB_MAP_FULL)
		return rc;
	return tl_log_mdberr(t->log, rc, "checkpoint");
}

int
tl_ckpt_del(struct tl_txn *t, const char *name)
{
	MDB_val k;

	k.mv_data = (void *)name;
	k.mv_size = strlen(name);
	return tl_log_mdberr(t->log, mdb_del(t->txn, t->log->ckpts, &k, NULL),
	    "checkpoint");
}

int
tl_ckpt_each(struct tl_txn *t, tl_ckpt_fn fn, void *arg)
{
	MDB_cursor *c;
	MDB_val k, v;
	char name[TL_CKPT_NAME_MAX + 1];
	int rc, mrc, op = MDB_FIRST;

	if ((rc = mdb_cursor_open(t->txn, t->log->ckpts, &c)) != 0)
		return tl_log_mdberr(t->log, rc, "cursor");
	for (rc = 0;; op = MDB_NEXT) {
		if ((mrc = mdb_cursor_get(c, &k, &v, op)) != 0)
			break;
		if (k.mv_size > TL_CKPT_NAME_MAX || v.mv_size != 8) {
			rc = TL_ECORRUPT;
			break;
		}
		memcpy(name, k.mv_data, k.mv_size);
		name[k.mv_size] = '\0';
		if ((rc = fn(name, get_be64(v.mv_data), arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	if (rc == 0 && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = tl_log_mdberr(t->log, mrc, "checkpoints");
	return rc;
}

/*
 * The verified record: meta "verified" = u64be seq || hash[32], how far
 * a check has walked the chain and the hash it found there.
 */
#define VERIFIED_KEY	"verified"
#define VERIFIED_LEN	(8 + TL_HASH_LEN)

int
tl_log_verified(struct tl_txn *t, struct tl_chain *c)
{
	MDB_val k, v;
	int rc;

	c->seq = 0;
	memset(c->hash, 0, TL_HASH_LEN);
	k.mv_data = VERIFIED_KEY;
	k.mv_size = sizeof(VERIFIED_KEY) - 1;
	rc = mdb_get(t->txn, t->log->meta, &k, &v);
	if (rc == MDB_NOTFOUND)
		return TL_ENOTFOUND;
	if (rc != 0)
		return tl_log_mdberr(t->log, rc, "verified record");
	if (v.mv_size != VERIFIED_LEN || !in_file(t, &v))
		return TL_EMALFORMED;
	c->seq = get_be64(v.mv_data);
	memcpy(c->hash, (const uint8_t *)v.mv_data + 8, TL_HASH_LEN);
	return 0;
}

static int
verified_put(struct tl_txn *t, const struct tl_chain *c)
{
	MDB_val k, v;
	uint8_t val[VERIFIED_LEN];
	int rc;

	put_be64(val, c->seq);
	memcpy(val + 8, c->hash, TL_HASH_LEN);
	k.mv_data = VERIFIED_KEY;
	k.mv_size = sizeof(VERIFIED_KEY) - 1;
	v.mv_data = val;
	v.mv_size = sizeof(val);
	rc = mdb_put(t->txn, t->log->meta, &k, &v, 0);
	if (rc == MDB_MAP_FULL)
		return rc;	/* tl_log_write grows and retries */
	return tl_log_mdberr(t->log, rc, "verified record");
}

int
tl_log_check(struct tl_txn *t, uint64_t *checkedp, uint64_t *badp,
    char *why)
{
	struct tl_chain c, was;
	uint64_t bad0;
	int rc;

	if (badp == NULL)
		badp = &bad0;
	if (checkedp != NULL)
		*checkedp = 0;
	/* No record (a log older than it) or a damaged one: from the start. */
	if (tl_log_verified(t, &c) != 0) {
		c.seq = 0;
		memset(c.hash, 0, TL_HASH_LEN);
	}
	was = c;
	if ((rc = tl_log_verify_more(t, &c, badp, why)) != 0)
		return rc;
	if (checkedp != NULL)
		*checkedp = c.seq - was.seq;
	if (!(t->flags & TL_TXN_RDONLY) && c.seq > was.seq)
		return verified_put(t, &c);
	return 0;
}

int
tl_log_set_verified(struct tl_txn *t, const struct tl_chain *c)
{
	struct tl_chain cur;
	MDB_val k, v;
	uint8_t key[8];
	int rc;

	if (t->flags & TL_TXN_RDONLY)
		return TL_EINVAL;
	if (tl_log_verified(t, &cur) == 0 && cur.seq >= c->seq)
		return 0;
	if (c->seq == 0)
		return 0;
	/* Still the event that was verified, as the walk left it. */
	put_be64(key, c->seq);
	k.mv_data = key;
	k.mv_size = 8;
	if ((rc = mdb_get(t->txn, t->log->events, &k, &v)) != 0)
		return rc == MDB_NOTFOUND ? TL_ECONFLICT :
		    tl_log_mdberr(t->log, rc, "verified record");
	if (v.mv_size < TL_HASH_LEN || !in_file(t, &v) ||
	    memcmp(v.mv_data, c->hash, TL_HASH_LEN) != 0)
		return TL_ECONFLICT;
	return verified_put(t, c);
}

/* --- signatures ---------------------------------------------------- */

#define SIG_TABLE	"signatures"
#define SIG_V		1		/* the record's first byte */
#define SIG_REC_LEN	(1 + 8 + TL_LOG_SIG_LEN)

static int
sig_table(struct tl_txn *t, MDB_dbi *dbi)
{
	int rc;

	rc = mdb_dbi_open(t->txn, SIG_TABLE,
	    (t->flags & TL_TXN_RDONLY) ? 0 : MDB_CREATE, dbi);
	if (rc == MDB_NOTFOUND)
		return TL_ENOTFOUND;
	if (rc == MDB_MAP_FULL)
		return rc;
	return tl_log_mdberr(t->log, rc, "signatures");
}

int
tl_log_sig_put(struct tl_txn *t, uint64_t seq, const struct tl_log_sig *s)
{
	MDB_dbi dbi;
	MDB_val k, v;
	uint8_t key[8], rec[SIG_REC_LEN];
	int rc;

	if (t->flags & TL_TXN_RDONLY)
		return TL_EINVAL;
	if ((rc = sig_table(t, &dbi)) != 0)
		return rc;
	put_be64(key, seq);
	rec[0] = SIG_V;
	put_be64(rec + 1, s->epoch);
	memcpy(rec + 9, s->sig, TL_LOG_SIG_LEN);
	k.mv_data = key;
	k.mv_size = 8;
	v.mv_data = rec;
	v.mv_size = sizeof(rec);
	rc = mdb_put(t->txn, dbi, &k, &v, 0);
	if (rc == MDB_MAP_FULL)
		return rc;
	return tl_log_mdberr(t->log, rc, "signature");
}

int
tl_log_sig_get(struct tl_txn *t, uint64_t seq, struct tl_log_sig *s)
{
	MDB_dbi dbi;
	MDB_val k, v;
	uint8_t key[8];
	const uint8_t *p;
	int rc;

	if ((rc = sig_table(t, &dbi)) != 0)
		return rc;
	put_be64(key, seq);
	k.mv_data = key;
	k.mv_size = 8;
	rc = mdb_get(t->txn, dbi, &k, &v);
	if (rc == MDB_NOTFOUND)
		return TL_ENOTFOUND;
	if (rc != 0)
		return tl_log_mdberr(t->log, rc, "signature");
	p = v.mv_data;
	if (v.mv_size != SIG_REC_LEN || p[0] != SIG_V)
		return TL_ECORRUPT;
	s->epoch = get_be64(p + 1);
	memcpy(s->sig, p + 9, TL_LOG_SIG_LEN);
	return 0;
}
