/*
 * deliver.h - a grant's credential reaching its holders.
 *
 * A holder is an assignment MODULE@NODE of the grant's module (of its
 * node only, for a per-instance grant).  tl_rx_deliver appends, in the
 * caller's decision context (its write transaction), one
 * credential.delivered per holder that lacks the current version: the
 * holder's variables sealed to its node's public key, so the log holds
 * no plaintext.  The delivery files (rx->home/deliver/NODE/MODULE.env,
 * mode 0600) are derived from the log and rewritten whenever missing;
 * a buffer of them (tl_rx_env, rx.h) holds passwords and the caller
 * wipes and frees it.  The node lists returned are the caller's to
 * free (tl_nodelist_free).  Errors are core/error.h codes, errno from
 * the file system, ENOMEM, LMDB's.
 */
#ifndef TL_RX_DELIVER_H
#define TL_RX_DELIVER_H

#include "projections/graph.h"
#include "projections/grant.h"
#include "rx.h"

/* The assignments (nodes) holding g. */
int	tl_rx_grant_holders(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g, struct tl_nodelist *nl);

/* Rewrites (or removes) module@node's delivery file. */
int	tl_rx_write_env(struct tl_rx *rx, struct tl_txn *t, const char *module,
	    const char *node);

/*
 * Is module@node's delivery file missing though it would hold
 * something?  (1 also when that cannot be told: the delivery finds out.)
 */
int	tl_rx_env_missing(struct tl_rx *rx, struct tl_txn *t,
	    const char *module, const char *node);

struct tl_ctx;
/* Delivers grant's current credential to every holder lacking it. */
int	tl_rx_deliver(struct tl_rx *rx, struct tl_ctx *c, const char *grant);
/* Rewrites the delivery files of grant's holders. */
int	tl_rx_files_for(struct tl_rx *rx, const char *grant);

#endif
