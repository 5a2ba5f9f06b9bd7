/*
 * deliver.h - a grant's credential reaching its holders.
 *
 * A holder is an assignment MODULE@NODE of the grant's module (of its
 * node only, for a per-instance grant).  tl_rx_deliver appends, in the
 * caller's decision context (its write transaction), one
 * credential.delivered per holder that lacks the current version: the
 * holder's variables sealed to its node's public key, so the log holds
 * no plaintext.  The control plane writes no delivery file: the sealed
 * record is what the node's agent (tools/tally-node) and tally env
 * open, and the plaintext exists only on the node.  The node lists
 * returned are the caller's to free (tl_nodelist_free).  Errors are
 * core/error.h codes, ENOMEM, LMDB's.
 */
#ifndef TL_RX_DELIVER_H
#define TL_RX_DELIVER_H

#include "projections/graph.h"
#include "projections/grant.h"
#include "rx.h"

/* The assignments (nodes) holding g. */
int	tl_rx_grant_holders(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g, struct tl_nodelist *nl);

struct tl_ctx;
/* Delivers grant's current credential to every holder lacking it. */
int	tl_rx_deliver(struct tl_rx *rx, struct tl_ctx *c, const char *grant);
/* Ends the encoder every delivery reuses (rx->dlv); tl_rx_free calls it. */
void	tl_rx_deliver_free(struct tl_rx *rx);

#endif
