/*
 * epoch.h - which control plane may act: epochs, the standby marker,
 * and fences on providers.
 *
 * The epoch is recorded in the log itself (EventStoreDB's choice): the
 * first leader is epoch 1, and every control-plane.promoted event on
 * the stream "control-plane" ({epoch, head}) starts the next one.  An
 * intent's epoch is the epoch in force at its sequence number (the last
 * promotion before it); each intent and outcome a reactor's pass records
 * also says it ("epoch", from rx->epoch: projections/ctx.h), so an
 * event read alone, off the stream, names the leader that made it.
 * Reactors read the current epoch with tl_ep_current.
 *
 * A standby's home holds the file TL_STANDBY_FILE until tally promote
 * removes it: tallyd --follow runs only there, plain tallyd never does.
 *
 * Nothing here allocates or keeps a pointer: results go to the
 * caller's out-parameters and buffers (msg: cap bytes, NUL-terminated,
 * cut to fit).  The readers take the caller's transaction (read or
 * write); tl_ep_fence opens its own and the providers' sessions (their
 * admin passwords loaded and wiped inside the call) and is called from
 * the thread that owns rx, between passes.  Errors are core/error.h
 * codes and LMDB's, translated by core/log.c; a provider that cannot be
 * fenced is counted in *unfenced, not an error.
 */
#ifndef TL_RX_EPOCH_H
#define TL_RX_EPOCH_H

#include <stdint.h>

#include <jansson.h>

#include "core/log.h"
#include "projections/events.h"
#include "mesh.h"

#define TL_STANDBY_FILE		"standby"

/*
 * The epoch in force at the head of the log (1 when nobody was ever
 * promoted) into *epochp, and the sequence number of the promotion that
 * started it (0: none) into *atp (may be NULL).  Errors: the log's.
 */
int	tl_ep_current(struct tl_txn *txn, uint64_t *epochp, uint64_t *atp);

/*
 * The epoch in force at the head (*epochp, as tl_ep_current) and its
 * leader (leader: 33 bytes, 32 hex digits): the first 16 bytes of the
 * chain hash of the event that started the epoch, the promotion (or
 * event 1 for epoch 1).  Two standbys promoted to the same epoch append
 * different events, so they have different leaders, and a provider's
 * fence (drivers/driver.h: struct tl_drv_fence) holds exactly one of
 * them.  An empty log: epoch 1, leader "".  Errors: the log's.
 */
int	tl_ep_leader(struct tl_txn *txn, uint64_t *epochp, char *leader);


/*
 * Whether home is a standby's: the standing recorded in the log's
 * environment (scratch table "control-plane", key "standing"), which tally
 * init --standby writes and tally promote changes in the transaction
 * that appends the promotion, so that a promotion and the end of
 * standby-ness commit together.  A home made before the standing was
 * recorded has none: then TL_STANDBY_FILE decides (it stays, removed
 * by tally promote after its commit, as the marker older tallys read).
 * *standby 1 or 0; *promoted (may be NULL) the sequence number of the
 * promotion that made this home the leader (0: none recorded).  In the
 * caller's transaction, read or write.  Errors: the log's.
 */
int	tl_ep_standing(struct tl_txn *txn, const char *home, int *standby,
	    uint64_t *promoted);
/* Records the standing (promoted: the promotion's seq, 0 for a standby). */
int	tl_ep_standing_put(struct tl_txn *txn, int standby, uint64_t promoted);
/*
 * Whether TL_STANDBY_FILE exists in home: the compatibility marker.
 * tally init --standby makes it before it records the standing and tally
 * promote removes it after the promotion commits, so a home without it
 * is no standby, and one with it is what tl_ep_standing says.
 */
int	tl_ep_is_standby(const char *home);

/*
 * What a standby's home knows of the leader it follows, kept by tallyd
 * --follow (scratch table "control-plane", key "following": operational
 * state, not derived from the log) and read by the CLI to name the
 * leader when it refuses to write there and in tally status.  passed
 * counts the stream's messages the follower passed over since the home
 * was made (not authenticated as the leader's, oversized, or malformed:
 * never appended); last_* describe the latest of them.  Plain data; a
 * zeroed value is valid (nothing recorded).
 */
struct tl_ep_follow {
	char		 url[512];	/* the broker, without credentials */
	char		 stream[256];
	uint64_t	 passed;
	int64_t		 last_offset;	/* its stream offset */
	char		 last_why[TL_WHY_MAX];
};
/* 0, or TL_ENOTFOUND when the home never followed; errors: the log's. */
int	tl_ep_follow_get(struct tl_txn *txn, struct tl_ep_follow *f);
/* In the caller's write transaction.  Errors: the log's. */
int	tl_ep_follow_put(struct tl_txn *txn, const struct tl_ep_follow *f);

struct tl_rx;

/*
 * Raises the fence of the log's current epoch (*epochp) on every
 * provider whose driver keeps one (ops->fence), before a tallyd acts.
 * *fenced counts the providers fenced, *unfenced those that could not
 * be (unreachable, or a driver without a fence: logged as warnings
 * when loud, else as debug, so that a provider that is down for an
 * hour is not one warning per resync).  When a
 * provider's fence is above our epoch another control plane was
 * promoted: *deposed (and rx->deposed) is set, it is logged and
 * recorded (tl_ep_stop), and the caller must stop acting.  Sets
 * rx->epoch.  Errors: the log's.
 */
int	tl_ep_fence(struct tl_rx *rx, uint64_t *epochp, int loud, int *deposed,
	    unsigned *fenced, unsigned *unfenced);

struct tl_rx_prov;

/*
 * The fence on every session: tl_ep_arm makes pv carry rx's epoch (and
 * its deposed flag) into the sessions opened on it, also on the pool's
 * threads; tl_ep_session, on a session h just opened on pv and before
 * any driver call on it, raises pv's fence to that epoch and reads it
 * back (ops->fence: one round trip).  0: go on (also when pv is not
 * armed, rx->epoch is 0, or the driver keeps no fence).  TL_EREFUSED
 * with why (TL_WHY_MAX bytes) when the provider is fenced above our
 * epoch: rx->deposed is set and no call may be made; the driver's error
 * when the fence cannot be raised: no call is made on that session
 * either (a fence we cannot see does not let us act).  Thread-safe.
 */
void	tl_ep_arm(struct tl_rx *rx, struct tl_rx_prov *pv);
int	tl_ep_session(const struct tl_rx_prov *pv, void *h, char *why);
/*
 * A driver call on armed pv that the provider itself refused as
 * deposed (TL_EREFUSED, why "deposed: ..."): sets rx->deposed with why
 * (the first one's words are kept), as a fenced session does.
 * tl_ep_refused: 1, with why (TL_WHY_MAX bytes) saying so, once
 * pv's rx is deposed; 0 otherwise (also when pv is not armed).  Both
 * thread-safe.
 */
void	tl_ep_provider_deposed(const struct tl_rx_prov *pv, const char *why);
int	tl_ep_refused(const struct tl_rx_prov *pv, char *why);

/*
 * Before the fences at start: a leader whose providers cannot be
 * reached still meets the promotion that deposed it in the replication
 * stream it publishes to (the new leader publishes its
 * control-plane.promoted there).  Reads the stream (publish.c:
 * tl_rx_publish_epoch_seen); when it holds a promotion above the log's
 * epoch, sets *deposed and rx->deposed and records why (tl_ep_stop).
 * No stream configured, or a broker that cannot be read: 0, not
 * deposed (the fences decide).  Errors: the log's.
 */
int	tl_ep_stream_check(struct tl_rx *rx, int *deposed);

/*
 * Before calls on pv when its driver's fencing is
 * TL_DRV_FENCE_EPOCH_CHECK (nothing on the provider stops a deposed
 * leader): tl_ep_check_epoch, on the thread that owns rx (the pass,
 * before its calls), reads the replication stream
 * (tl_rx_publish_epoch_seen) unless it did less than
 * TL_DRV_EPOCH_CHECK_S ago.  0: go on (also for any other fencing, an
 * rx->epoch of 0, or no stream configured: no standby follows this
 * control plane); TL_EREFUSED with why once the stream holds a later
 * promotion (rx->deposed set, as tl_ep_session sets it: the pass
 * records no outcome and tallyd stops, tl_ep_stop); TL_EUNREACH
 * with why when the stream cannot be read (a promotion we cannot see
 * does not let us act).  tl_ep_epoch_fresh, on any thread, just before
 * each call: 0 while that reading is younger than TL_DRV_EPOCH_CHECK_S,
 * else TL_EUNREACH (the next pass reads again); TL_EREFUSED once rx is
 * deposed.  why: TL_WHY_MAX bytes.
 */
int	tl_ep_check_epoch(struct tl_rx *rx, const struct tl_rx_prov *pv,
	    char *why);
int	tl_ep_epoch_fresh(const struct tl_rx_prov *pv, char *why);

/*
 * A promotion is won once.  Without etcd the arbiter is the replication
 * stream: the broker orders it totally, and the first
 * control-plane.promoted to an epoch in its order, authenticated by the
 * master key, is that epoch's leader.  When the log's epoch was started
 * by a promotion (this home's, once a standby) and that promotion has
 * not been confirmed yet, publishes it and reads the stream back
 * (publish.c: tl_rx_publish_arbiter).  The first one ours (the same
 * chain hash: the same leader, tl_ep_leader): recorded (scratch table
 * "control-plane", key "won"), 0, and later starts do not ask again.
 * Another's: *deposed and rx->deposed set and recorded (tl_ep_stop),
 * before any provider call.  No stream configured: 0, nothing asked
 * (the fences decide alone).  TL_EUNREACH when the stream cannot be
 * read or does not show a promotion to this epoch: nothing may act
 * until it does (the caller stops).  Errors: the log's.
 */
int	tl_ep_arbitrate(struct tl_rx *rx, int *deposed);

/*
 * After rx->deposed was set (by a session, or tl_ep_fence): logs why
 * and records it (tl_ep_deposed reads it back).  tallyd then exits.
 */
void	tl_ep_stop(struct tl_rx *rx);

/*
 * 1 and the reason in msg when this home's tallyd found itself deposed
 * (scratch table "control-plane"), 0 when not; errors: the log's.
 */
int	tl_ep_deposed(struct tl_txn *txn, char *msg, size_t cap);

/*
 * A cluster's home: what its tallyd last said of its standing ("leader at
 * epoch N since event S", "follower of NAME (HOME) at epoch N"), one
 * line, kept in the home (not an event) for tally status.  _put also
 * forgets a deposition (a tallyd that follows or leads again).  _get:
 * TL_ENOTFOUND when none was written.
 */
int	tl_ep_cluster_put(struct tl_txn *txn, const char *standing);
int	tl_ep_cluster_get(struct tl_txn *txn, char *standing, size_t cap);

/*
 * A cluster leader's followers as its tallyd last read their marks on
 * etcd (every few seconds; kept in the home, not an event, like the
 * standing): when (wall clock, ns), the leader's head then, and each
 * live follower's control plane id and the last event it applied.
 * _put replaces what was; tl_ep_cluster_put forgets it (a tallyd that
 * follows again has no followers).  _get copies at most cap followers
 * into f and says in *n how many it copied: TL_ENOTFOUND when none was
 * written, TL_EMALFORMED when what is kept is not of this form.
 */
#define TL_EP_FOLLOWER_ID	64
struct tl_ep_follower {
	char		 id[TL_EP_FOLLOWER_ID];	/* NUL-terminated */
	uint64_t	 applied;
};
int	tl_ep_followers_put(struct tl_txn *txn, uint64_t at_ns, uint64_t head,
	    const struct tl_ep_follower *f, unsigned n);
int	tl_ep_followers_get(struct tl_txn *txn, uint64_t *at_ns,
	    uint64_t *head, struct tl_ep_follower *f, unsigned cap,
	    unsigned *n);

/*
 * The same as tally status and the board show it, a new reference:
 * {"as_of": RFC 3339, "head": N, "followers": [{"id", "applied",
 * "behind"}]}; NULL when none is kept (or out of memory).
 */
json_t	*tl_ep_followers_doc(struct tl_txn *txn);

/*
 * A stream standby's position as it reports it (tallyd --follow, every
 * TL_EP_STANDBY_EVERY_S on the leader's acks queue) and the leader
 * checked it: the last event it holds, whose chain hash is the leader's
 * own there.  Kept in the leader's home by name (not an event: anyone
 * may publish to the acks queue, and a position decides nothing); at
 * most TL_EP_STANDBYS_MAX names, a new one past them not kept.
 * _put: in the caller's write transaction; errors: the log's.  _doc:
 * {"standbys": [{name, applied, behind, heard}]} against the head, a new
 * reference; NULL when none was kept.
 */
#define TL_EP_STANDBY_NAME	200
#define TL_EP_STANDBYS_MAX	32
#define TL_EP_STANDBY_EVERY_S	5
int	tl_ep_standby_put(struct tl_txn *txn, const char *name, uint64_t seq,
	    uint64_t at_ns);
json_t	*tl_ep_standbys_doc(struct tl_txn *txn);

#endif
