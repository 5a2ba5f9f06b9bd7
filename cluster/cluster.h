/*
 * cluster.h - a control plane of a cluster: the record's commit on
 * etcd (record.c) and the leadership (lead.c).  Linked by tallyd only
 * (libtallyops.a: it speaks etcd over libcurl, cluster/etcd.h).
 *
 * The keys, under P = /tally/MESH/:
 *   P leader      this leader's JSON ({"id","name","home"}), bound to
 *                 its lease; its create_revision is the leader's
 *                 epoch (etcd's revisions only go up);
 *   P head        the record's head: 8-byte big-endian sequence and its
 *                 32-byte chain hash;
 *   P log/SEQ     a chunk of events from SEQ (20 decimal digits, so key
 *                 order is sequence order): "tlc1", the epoch that
 *                 committed it, SEQ and the count (big-endian 8, 8, 4
 *                 bytes), the control plane's Ed25519 signature over
 *                 the mesh id and everything else, then each event as
 *                 a 4-byte length and its envelope, byte for byte as
 *                 the log holds it;
 *   P applied/ID  the sequence follower ID has applied through (8 bytes,
 *                 bound to its lease): what the leader may trim below.
 *
 * A commit (tl_cl_commit) is ONE etcd transaction: if the leader key
 * is at this leader's epoch and the head is what the events extend,
 * put the chunks and the new head.  Only then does LMDB commit.  So
 * every home's log is a prefix of the cluster's record, and a home
 * that lags applies the rest (tl_cl_catch_up) with the log's own
 * checks (sequence, link, hash) and the signature.
 *
 * Errors: cluster/etcd.h's; TL_ENOTLEADER when the leader key is not
 * this control plane's at its epoch; TL_EUNAVAIL also when the head
 * moved (this home is behind: catch up); TL_ETOOBIG when one
 * transaction's events exceed what one etcd request may carry;
 * TL_ECOMPACTED when this home is behind the trimmed tail; TL_ECORRUPT
 * when a chunk does not verify or this home is not a prefix of the
 * record.  tl_cl_lasterr() says more.
 */
#ifndef TL_CLUSTER_H
#define TL_CLUSTER_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/cconf.h"
#include "core/log.h"
#include "core/secret.h"

struct tl_cl;

/*
 * Opens a control plane's membership: c the home's configuration (kept
 * by pointer: the caller's, for the handle's life), key the master key
 * (the signing key is derived from it; the caller's, kept by
 * pointer), name this machine's name for the leader key.  Connects
 * lazily.  ENOMEM, TL_EINVAL.
 */
int	tl_cl_open(const struct tl_cconf *c, const struct tl_key *key,
	    const char *home, struct tl_cl **out);
void	tl_cl_close(struct tl_cl *cl);
const char *tl_cl_lasterr(const struct tl_cl *cl);

/* --- the record (record.c) ------------------------------------------ */

/* The cluster's head: *seqp 0 and hash zeroes when it has none yet. */
int	tl_cl_head(struct tl_cl *cl, uint64_t *seqp, uint8_t hash[TL_HASH_LEN],
	    int64_t *revp);

/*
 * The commit hook of a leader (core/log.h, tl_commit_fn; arg the
 * tl_cl): commits first..last, read in txn, at cl's epoch.  With
 * epoch 0 (tallyd --commit, for the CLI) the leader key is read first
 * and must name this control plane; its epoch is then compared.
 */
int	tl_cl_commit(struct tl_txn *txn, uint64_t first,
	    const uint8_t prev[TL_HASH_LEN], uint64_t last, void *arg);

/*
 * What tallyd --commit is given by the CLI: the events first.. (count
 * of them, raws[i] of lens[i] bytes) extending prev.
 */
int	tl_cl_commit_raw(struct tl_cl *cl, uint64_t first,
	    const uint8_t prev[TL_HASH_LEN], const uint8_t *const *raws,
	    const size_t *lens, size_t count);

/*
 * Pushes this home's events from the cluster's head + 1 to the log's
 * head, as a leader does once when the cluster has fewer events than
 * its home (the home that founded the mesh: everything).  Several etcd
 * transactions when they do not fit one, each conditional.
 */
int	tl_cl_push(struct tl_cl *cl, struct tl_log *log);

/*
 * Applies the cluster's events past this log's head, in write
 * transactions of at most a few hundred events, each chunk checked
 * (signature, sequence, link, hash); *appliedp (may be NULL) the new
 * head.  0 when it is at the cluster's head.
 */
int	tl_cl_catch_up(struct tl_cl *cl, struct tl_log *log,
	    uint64_t *appliedp);

/*
 * Waits up to ms for a change under the mesh's keys after revision
 * rev (0: the one last read): 0 (a change), TL_ETIMEDOUT.
 */
int	tl_cl_wait(struct tl_cl *cl, long ms);

/* --- the leadership (lead.c) ---------------------------------------- */

/*
 * Grants this control plane's lease (the configured TTL) and starts
 * the thread that renews it every TTL/4 on its own etcd handle.
 * Idempotent.
 */
int	tl_cl_lease_start(struct tl_cl *cl);

/*
 * One try at the leader key: *won, and then cl's epoch (*epochp) is
 * the key's create_revision.  Not won: *epochp the current leader's
 * epoch (0: none).
 */
int	tl_cl_campaign(struct tl_cl *cl, int *won, uint64_t *epochp);

/* Gives the leadership up (deletes the key if it is still ours). */
int	tl_cl_resign(struct tl_cl *cl);

/*
 * The monotonic time (ms, CLOCK_MONOTONIC) until which this leader may
 * act: when the last renewal that succeeded was sent, plus the TTL,
 * less the margin.  0 when the lease is lost or never was.
 */
uint64_t tl_cl_act_until(const struct tl_cl *cl);
/* The same, where the renewing thread keeps it (struct tl_rx's act_until). */
const _Atomic uint64_t *tl_cl_act_until_ptr(const struct tl_cl *cl);

/*
 * One renewal now, on the caller's thread and handle (the renewing
 * thread goes on): what it finds is what the thread would have.
 */
int	tl_cl_renew(struct tl_cl *cl);

/* Whether the lease was seen lost (a renewal found it expired). */
int	tl_cl_lost(const struct tl_cl *cl);

struct tl_cl_leader {
	char		 id[TL_CCONF_ID_LEN + 1];	/* "" : no leader */
	char		 name[256];
	char		 home[512];
	uint64_t	 epoch;
};
/* Who leads, from the leader key. */
int	tl_cl_leader(struct tl_cl *cl, struct tl_cl_leader *who);

/* A follower's mark: it has applied through seq (bound to its lease). */
int	tl_cl_register(struct tl_cl *cl, uint64_t seq);

/*
 * The leader trims the tail: deletes the chunks wholly below the
 * lowest mark of the registered followers and below head - keep, and
 * compacts etcd's history to that revision.  *belowp (may be NULL) the
 * first sequence the cluster still holds.
 */
int	tl_cl_trim(struct tl_cl *cl, uint64_t head, uint64_t *belowp);

/*
 * The marks of the followers alive (their leases), this control plane's
 * own left out: fn(id, seq, arg) for each, in the ids' order; a
 * nonzero return from fn stops the walk and is returned.  0, or an
 * etcd error (TL_EUNAVAIL ...).  What --metrics reports as lag.
 */
typedef int (*tl_cl_mark_fn)(const char *id, uint64_t seq, void *arg);
int	tl_cl_marks(struct tl_cl *cl, tl_cl_mark_fn fn, void *arg);

/* The epoch cl leads at (0: none). */
uint64_t tl_cl_epoch(const struct tl_cl *cl);

/* The monotonic clock in ms, as tl_cl_act_until counts it. */
uint64_t tl_cl_now_ms(void);

#endif
