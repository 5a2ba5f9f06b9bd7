/*
 * epoch.h - which control plane may act: epochs, the standby marker,
 * and fences on providers.
 *
 * The epoch is recorded in the log itself (EventStoreDB's choice): the
 * first leader is epoch 1, and every control-plane.promoted event on
 * the stream "control-plane" ({epoch, head}) starts the next one.  An
 * intent's epoch is the epoch in force at its sequence number (the last
 * promotion before it), so intents carry no field of their own: the log
 * orders them, and reactors read the current epoch with tl_ep_current.
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

#include "core/log.h"
#include "projections/events.h"

#define TL_STANDBY_FILE		"standby"
#define TL_CP_STREAM		"control-plane"	/* TL_EV_CP_PROMOTED's stream */

/*
 * The epoch in force at the head of the log (1 when nobody was ever
 * promoted) into *epochp, and the sequence number of the promotion that
 * started it (0: none) into *atp (may be NULL).  Errors: the log's.
 */
int	tl_ep_current(struct tl_txn *txn, uint64_t *epochp, uint64_t *atp);

/* Whether home is a standby's (TL_STANDBY_FILE exists there). */
int	tl_ep_is_standby(const char *home);

struct tl_rx;

/*
 * Raises the fence of the log's current epoch (*epochp) on every
 * provider whose driver keeps one (ops->fence), before a tallyd acts.
 * *fenced counts the providers fenced, *unfenced those that could not
 * be (unreachable, or a driver without a fence: logged as warnings
 * when loud, else as debug, so that a provider that is down for an
 * hour is not one warning per resync).  When a
 * provider's fence is above our epoch another control plane was
 * promoted: *deposed is set, it is logged and recorded (tl_ep_deposed),
 * and the caller must stop acting.  Errors: the log's.
 */
int	tl_ep_fence(struct tl_rx *rx, uint64_t *epochp, int loud, int *deposed,
	    unsigned *fenced, unsigned *unfenced);

/*
 * 1 and the reason in msg when this home's tallyd found itself deposed
 * (scratch table "control-plane"), 0 when not; errors: the log's.
 */
int	tl_ep_deposed(struct tl_txn *txn, char *msg, size_t cap);

#endif
