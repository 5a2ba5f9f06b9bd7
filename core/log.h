/*
 * log.h - tally's append-only event log over LMDB.
 *
 * The log is one LMDB environment (a directory) with these
 * sub-databases, all owned by this module:
 *
 *   events       u64be seq -> hash[32] || encoding      (MDB_APPEND)
 *   streams      stream -> u64be seq, one duplicate per event, in
 *                order; the count of duplicates is the stream's version
 *   checkpoints  name -> u64be seq
 *   meta         "magic", "format", "created"
 *
 * Projections keep their own sub-databases in the same environment
 * (see kv.h), so that a command can read them, decide and append in one
 * write transaction.
 *
 * Concurrency is LMDB's: one writer at a time across every process,
 * readers never blocked.  A transaction handle belongs to one thread.
 * All memory handed out by a read (event strings aside, which are
 * copied) points into the map and is valid until the transaction ends.
 */
#ifndef TL_LOG_H
#define TL_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "envelope.h"

struct tl_log;
struct tl_txn;

/* tl_log_open flags */
#define TL_LOG_CREATE	0x1	/* create a new log; TL_EEXIST if one exists */
#define TL_LOG_RDONLY	0x2
#define TL_LOG_NOSYNC	0x4	/* bulk import only: a crash may lose commits */

/* tl_log_begin flags */
#define TL_TXN_RDONLY	0x1

/* Expected-version values for tl_append */
#define TL_VER_ANY	UINT64_MAX	/* no check */
#define TL_VER_NONE	0		/* the stream must not exist yet */

/*
 * Opens (or with TL_LOG_CREATE creates) the log in directory dir.
 * Errors: TL_ENOTFOUND (no log there), TL_ENOTLOG (an LMDB environment
 * that tally did not create, or something else entirely), TL_ENEWER (a
 * newer format), TL_EEXIST (TL_LOG_CREATE on an existing log), errno.
 * Stale reader slots of dead processes are cleared on open; a writer
 * that died holding the lock is recovered by LMDB's robust mutex.
 */
int	tl_log_open(const char *dir, unsigned flags, struct tl_log **out);
/*
 * As tl_log_open, with what else an opener may say (s6's *_ZERO idiom:
 * start from TL_LOG_OPTS_ZERO, or a designated initialiser, and set
 * what differs; o is read during the call only).
 */
struct tl_log_opts {
	unsigned	 flags;		/* TL_LOG_*, as tl_log_open's */
	size_t		 mapsize;	/* the initial map size; 0: the default */
	/*
	 * NULL, or TL_WHY_MAX bytes that receive what is wrong with the
	 * file when the result is TL_ECORRUPT: a data file that is empty,
	 * cut short of what its meta page says, or whose meta or pages are
	 * damaged ("DIR/data.mdb: ...").  Nothing is written to such a
	 * file.  With TL_LOG_RDONLY on a read-only file system LMDB reads
	 * without its lock file (safe: nothing can write there).
	 */
	char		*why;
};
#define TL_LOG_OPTS_ZERO	{ 0, 0, NULL }
int	tl_log_open_opts(const char *dir, const struct tl_log_opts *o,
	    struct tl_log **out);
void	tl_log_close(struct tl_log *log);

/*
 * Damaged pages.  LMDB 0.9 trusts its pages (node offsets, sizes, page
 * numbers, a page's lower and upper bounds), so tally does three things,
 * and not a fourth:
 *
 * - it refuses, at open, files that fail the checks LMDB would skip: a
 *   meta page that is not LMDB's (the other one being LMDB's), a file
 *   cut short of its last page, roots outside it, and a main table
 *   that no longer leads to tally's tables (TL_ECORRUPT, not
 *   TL_ENOTLOG: another program's LMDB file does not name them);
 * - it guards reads: those of this module (tl_log_verify, tl_iter_next,
 *   tl_log_get, tl_log_last, opening) are armed, and a SIGSEGV or SIGBUS
 *   from the map, or an LMDB assertion, makes them return TL_ECORRUPT
 *   with the file and the offset in tl_log_lasterr.  The guard is a
 *   process-wide SIGSEGV/SIGBUS handler installed by the first open;
 *   faults outside the map go to the handler that was there before;
 * - a program that reads its projections (kv.h) too calls
 *   tl_log_fault_exit once: then a fault outside an armed read ends the
 *   process with _exit(code) and "PROG: DIR/data.mdb: ...: the data
 *   file is damaged (see tally verify; if it finds the log sound, this
 *   is a bug in tally)" when it is in the map, and also when it is
 *   anywhere while this thread has a transaction open (a damaged page
 *   leads reads, and LMDB's own copies of pages, outside the map), or
 *   is an abort() from the C library's heap checks then or while the
 *   log closes (LMDB copied a page by a damaged header).  Nothing is
 *   committed by then.  The cost: a real bug inside a transaction of
 *   such a program is reported as a damaged file with exit code, which
 *   the message says how to tell apart.  LMDB's codes for damage that
 *   reach the top untranslated (MDB_PAGE_NOTFOUND, MDB_BAD_TXN after
 *   one, ...) are tl_err_corrupt().
 *
 * Not done: validating every page's header before LMDB uses it (LMDB
 * offers no hook, and a walk of every tree per command would cost what
 * the log weighs).  So a damaged index or projection page can make a
 * lookup miss (a wrong "not found", exit 3), and a writer misled by a
 * damaged header fails with EIO (exit 1) rather than 5.  Under
 * AddressSanitizer such a writer is seen reading or moving bytes past
 * LMDB's own copy of the page before it ends (check_corrupt's page
 * sweep counts those runs and allows only them: the writer, inside
 * liblmdb); the chain check finds what it may have written.
 */
void	tl_log_fault_exit(const char *prog, int code);

/*
 * One daemon per log: an exclusive flock(2) on the data file itself
 * (LMDB takes none there), held on *fdp until it is closed or the
 * process dies, when the kernel drops it: nothing stale to clean up,
 * and no file whose removal would let a second daemon in (removing
 * data.mdb removes the log).  TL_ELOCKED when another process holds it,
 * *holderp its pid when /proc/locks says (else 0); TL_ENOTFOUND when
 * there is no log; errno.
 */
int	tl_log_lock_daemon(const char *dir, int *fdp, long *holderp);
const char *tl_log_dir(const struct tl_log *log);
/* Whether it was opened TL_LOG_RDONLY (writes are TL_EINVAL). */
int	tl_log_readonly(const struct tl_log *log);

/* The last error LMDB reported, for logs; never NULL. */
const char *tl_log_lasterr(const struct tl_log *log);

/*
 * Transactions.  Prefer tl_log_write(), which retries after growing
 * the map.  tl_log_commit() and tl_log_abort() free the handle.  A
 * commit the file system cannot hold is ENOSPC: LMDB's EIO for a short
 * write is reported as ENOSPC when less than 1 MiB is free where the
 * log lives (a short write there is a full disk).
 */
int	tl_log_begin(struct tl_log *log, unsigned flags, struct tl_txn **out);
int	tl_log_commit(struct tl_txn *txn);
void	tl_log_abort(struct tl_txn *txn);
/* The log a transaction is on (to read beside it on another thread). */
struct tl_log *tl_txn_log(struct tl_txn *txn);

/*
 * Runs fn(txn, arg) in a write transaction and commits it when fn
 * returns 0; aborts and returns fn's result otherwise.  When the map
 * fills up (inside fn or at commit) the transaction is aborted, the map
 * grown and fn run again from the start: fn must not have effects
 * outside the transaction.
 */
typedef int (*tl_write_fn)(struct tl_txn *txn, void *arg);
int	tl_log_write(struct tl_log *log, tl_write_fn fn, void *arg);

/*
 * Cluster mode (cluster/cluster.h; docs/standby.md).  A home whose
 * directory holds cluster.json (beside DIR, the log's directory) is a
 * cluster's: the cluster commits its record first.  With a commit
 * hook set, tl_log_commit calls fn(txn, first, prev, last, arg) before
 * LMDB commits a transaction that appended events of its own
 * (tl_append: first..last, prev the hash first links to; events
 * copied with tl_log_append_raw are the cluster's already and call
 * nothing): fn reads them in txn, commits them in the cluster, and
 * returns 0, or an error and the transaction is aborted (TL_ENOTLEADER:
 * this control plane does not lead; TL_EUNAVAIL: the cluster cannot
 * commit, or did not say whether it did).  Without a hook, such a
 * home's transaction that appended is aborted with TL_ENOTLEADER, so
 * no program that does not speak to the cluster writes to it.  The
 * hook runs in the thread that commits, with the write lock held.
 */
#define TL_CLUSTER_FILE	"cluster.json"
typedef int (*tl_commit_fn)(struct tl_txn *txn, uint64_t first,
	    const uint8_t prev[TL_HASH_LEN], uint64_t last, void *arg);
void	tl_log_set_commit(struct tl_log *log, tl_commit_fn fn, void *arg);
/*
 * A consistent copy of the log's data file (LMDB's compacting copy, in
 * a read transaction: writers go on meanwhile) into a new file at path
 * (mode 0600; never over an existing file or a link: TL_EEXIST,
 * ELOOP).  What tally init --from-snapshot starts a home from.  The
 * file is removed again on an error.  Errors: errno, the log's.
 */
int	tl_log_snapshot(struct tl_log *log, const char *path);
/* Whether the log is a cluster's (cluster.json beside it). */
int	tl_log_clustered(const struct tl_log *log);

/* What a caller gives to append one event. */
struct tl_append {
	const char	*type;
	const char	*stream;
	uint64_t	 expect;	/* TL_VER_ANY, TL_VER_NONE or a version */
	uint64_t	 cause;		/* 0 if none */
	const uint8_t	*corr;		/* TL_ID_LEN bytes, NULL: a fresh id */
	const char	*actor;
	const void	*body;		/* one msgpack map, NULL: {} */
	size_t		 body_len;
};

/*
 * Appends one event in txn.  On success *seqp (if not NULL) holds its
 * sequence number and *verp (if not NULL) its stream version.
 * TL_ECONFLICT when expect does not match the stream's version: the
 * transaction is still usable (nothing was written), and the caller
 * may re-read and retry.  The id and timestamp are generated here.
 */
int	tl_append(struct tl_txn *txn, const struct tl_append *a,
	    uint64_t *seqp, uint64_t *verp);

/*
 * The chain hash of an encoded event raw[0..len) whose predecessor's
 * hash is prev: what the log stores with it, and what tl_log_append_raw
 * checks.  Pure.
 */
void	tl_log_chain_hash(const uint8_t prev[TL_HASH_LEN], const void *raw,
	    size_t len, uint8_t out[TL_HASH_LEN]);

/*
 * Appends an event encoded elsewhere, byte for byte (a follower copying
 * the leader's log, so that the chain and the head hash are the same):
 * raw[0..len) must decode, carry sequence head+1 and its stream's next
 * version, link to the head's hash and, when hash is not NULL, hash to
 * it.  *seqp (if not NULL) receives the event's sequence number once it
 * decodes.  TL_EEXIST when that is at or before the head (the caller
 * compares it with what it has); TL_ECONFLICT when it is past head+1 (a
 * gap); TL_ECORRUPT when the link, the hash or the version does not
 * match; the decoder's errors.  why (TL_WHY_MAX bytes, may be NULL)
 * says which.  Nothing is written on an error; the transaction stays
 * usable.
 */
int	tl_log_append_raw(struct tl_txn *txn, const void *raw, size_t len,
	    const uint8_t hash[TL_HASH_LEN], uint64_t *seqp, char *why);

/*
 * The signatures table ("signatures" in the log's environment, beside
 * the events): for an event a follower copied from the leader's stream,
 * what authenticated it there -- the publishing leader's epoch and the
 * control plane's Ed25519 signature over the message (core/secret.h,
 * tl_secret_stream_sign) -- under the event's sequence number.  Put in
 * the transaction that appends the event (after tl_log_append_raw), so
 * the two commit together; tally promote checks every event against
 * it.  It is not derived from the log and cannot be rebuilt from it:
 * nothing deletes from it.  _put: TL_EINVAL in a read transaction, the
 * log's errors.  _get: TL_ENOTFOUND when seq has none (an event this
 * home appended itself, or copied by a follower of before), TL_ECORRUPT
 * when the record is not one this tally wrote.
 */
#define TL_LOG_SIG_LEN	64
struct tl_log_sig {
	uint64_t	 epoch;
	uint8_t		 sig[TL_LOG_SIG_LEN];
};
int	tl_log_sig_put(struct tl_txn *txn, uint64_t seq,
	    const struct tl_log_sig *s);
int	tl_log_sig_get(struct tl_txn *txn, uint64_t seq, struct tl_log_sig *s);

/* The stream's current version (0: it does not exist). */
int	tl_stream_version(struct tl_txn *txn, const char *stream,
	    uint64_t *verp);

/* The last sequence number (0 for an empty log) and its hash. */
int	tl_log_last(struct tl_txn *txn, uint64_t *seqp,
	    uint8_t hash[TL_HASH_LEN]);

/* Reads event seq.  TL_ENOTFOUND if there is none. */
int	tl_log_get(struct tl_txn *txn, uint64_t seq, struct tl_event *ev);

/*
 * Iteration.  A filter narrows what tl_iter_next returns; all fields
 * are optional (zero / NULL means no restriction).  With a stream the
 * stream index is used; a type pattern is an fnmatch(3) glob
 * ("grant.*").  Events are decoded and validated but the chain is not
 * checked (tl_log_verify does that).
 */
struct tl_filter {
	uint64_t	 from;		/* first seq, inclusive */
	uint64_t	 to;		/* last seq, inclusive; 0: the end */
	const char	*stream;
	const char	*type;
	/*
	 * Check the chain as it goes (not with a stream): each event
	 * must follow the one before, link to it and hash to what it
	 * stores, else TL_ECORRUPT naming it.  One hash per event: what
	 * folding does, so that nothing acts on an event that does not
	 * verify.
	 */
	int		 chain;
};

struct tl_iter;
int	tl_iter_open(struct tl_txn *txn, const struct tl_filter *f,
	    struct tl_iter **out);
/* 0 and *ev filled, TL_EEOF at the end, or an error naming the seq. */
int	tl_iter_next(struct tl_iter *it, struct tl_event *ev);
/* The sequence number an error from tl_iter_next refers to. */
uint64_t tl_iter_errseq(const struct tl_iter *it);
void	tl_iter_close(struct tl_iter *it);

/*
 * Checkpoints: durable positions by name ("provisioner", a publisher,
 * a subscriber).  Set one in the same transaction as the events the
 * reactor appends so that both commit or neither does.
 */
#define TL_CKPT_NAME_MAX 127
int	tl_ckpt_get(struct tl_txn *txn, const char *name, uint64_t *seqp);
int	tl_ckpt_set(struct tl_txn *txn, const char *name, uint64_t seq);
int	tl_ckpt_del(struct tl_txn *txn, const char *name);
typedef int (*tl_ckpt_fn)(const char *name, uint64_t seq, void *arg);
int	tl_ckpt_each(struct tl_txn *txn, tl_ckpt_fn fn, void *arg);

/*
 * Walks the whole log checking every envelope, that sequence numbers
 * are contiguous and match their keys, every link and every hash, and
 * that LMDB's own counts of the events and of the stream index agree
 * with the walk (a damaged branch page can hide the events after it).
 * The stream index is derived data and is not part of the chain.  Returns 0 when everything is sound;
 * otherwise TL_ECORRUPT (or the decoder's error) with *badp set to the
 * first sequence number that does not verify, and a reason in why
 * (TL_WHY_MAX bytes).  *countp receives the number of events checked.
 */
int	tl_log_verify(struct tl_txn *txn, uint64_t *countp, uint64_t *badp,
	    char *why);

/*
 * Verification in steps, for a daemon that acts on the log as it
 * grows: c is how far the log has been verified (TL_CHAIN_INIT: not at
 * all) and the stored hash there.  Checks that event c->seq still holds
 * that hash, then every event after it as tl_log_verify does, and moves
 * c to the head.  Errors as tl_log_verify's; c is left as it was.
 */
struct tl_chain {
	uint64_t	seq;
	uint8_t		hash[TL_HASH_LEN];
};
#define TL_CHAIN_INIT	{ 0, { 0 } }
int	tl_log_verify_more(struct tl_txn *txn, struct tl_chain *c,
	    uint64_t *badp, char *why);

/*
 * The cheap check every command that acts runs first.  The log keeps a
 * verified record (meta "verified": a sequence number S and the hash
 * stored with event S) of how far a check has walked the chain.
 * tl_log_check reads it and, as tl_log_verify_more does, checks that
 * event S still stores that hash and still hashes to it from the hash
 * of event S-1, then every event after S (envelope, sequence, link,
 * hash) and LMDB's counts of the events and of the stream index.  In a
 * write transaction it then moves the record to the head it verified,
 * before the caller appends: what a command appends is checked by the
 * next one, and a write costs the events appended since the last check,
 * never the length of the log.  Without a record (a log written before
 * it existed) or with a damaged one it walks from the start once.
 * *checkedp (may be NULL) receives how many events after S it checked.
 * Errors as tl_log_verify's: TL_ECORRUPT with *badp the first sequence
 * number in doubt; MDB_MAP_FULL in a write transaction (tl_log_write
 * grows the map and runs it again).
 *
 * What it does not cover: an event before S changed in place since it
 * was checked (and its successor's link with it, or the record as
 * well) is found only by the full walk, tl_log_verify (`tally verify`,
 * and tallyd, which walks the whole log once when it starts, before
 * its first provider call).
 */
int	tl_log_check(struct tl_txn *txn, uint64_t *checkedp, uint64_t *badp,
	    char *why);
/* The verified record: 0, TL_ENOTFOUND (none yet), TL_EMALFORMED. */
int	tl_log_verified(struct tl_txn *txn, struct tl_chain *c);
/*
 * Moves the record to c (from a walk in another transaction: a full
 * tl_log_verify, a daemon's tl_log_verify_more) in the write
 * transaction txn, when that is further than it is and event c->seq
 * still stores c->hash; TL_ECONFLICT when it does not (nothing is
 * written); 0 and nothing written when the record is already there.
 */
int	tl_log_set_verified(struct tl_txn *txn, const struct tl_chain *c);

/* Physical size of the log, in bytes, and the map size. */
int	tl_log_size(struct tl_log *log, uint64_t *usedp, uint64_t *mapp);

#endif
