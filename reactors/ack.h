/*
 * ack.h - acknowledgements with proof, from the nodes that hold a
 * credential (tally-node) to tallyd.
 *
 * A node acknowledges credential version V of grant G for holder H
 * (MODULE@NODE) with a fresh 16-byte nonce and two proofs over the
 * same message (tl_nw_ack_message, core/nodewire.h: a domain tag, G, H, V, the
 * nonce):
 *   sig  the Ed25519 signature by the node's signing key (nk/NODE in
 *        the graph: node.added signkey or node.key-added): who;
 *   mac  BLAKE2b-256 keyed by the proof key of the delivered
 *        credential (tl_nw_proof_key: a keyed hash of the password of
 *        version V, handed to the node inside the sealed delivery as
 *        "#proof HEX"): that it holds that very credential.
 * The offer reaches the log as credential.ack-offered (appended by the
 * agent itself with --log, by the publisher from tally.acks once
 * tl_ack_screen passed it); the ack pass (tl_rx_acks, run by tallyd)
 * verifies each offer once, in log order, and appends
 * credential.acknowledged (actor node:NODE) or, for an offer its node
 * signed that fails the rest (the MAC, the holder, the version),
 * security.ack-refused on node/NODE with the reason.  Neither the
 * offer nor its refusal holds a secret: the nonce, the signature and
 * the MAC reveal nothing of the password.
 *
 * Nothing that fails authentication is appended (DESIGN.md rule 11):
 * an offer or a report unsigned, badly signed, claiming a node with no
 * signing key, malformed, or a signed one sent again (replayed, or for
 * a version that is not the grant's current one) is counted in the
 * scratch table TL_REFUSED_TABLE (tl_ack_refused) and logged at most
 * once per TL_REFUSED_LOG_NS, never recorded.
 */
#ifndef TL_RX_ACK_H
#define TL_RX_ACK_H

#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "core/nodewire.h"
#include "core/secret.h"
#include "projections/proj.h"
#include "rx.h"

/*
 * An offer's fields as received (borrowed strings, none NULL: "" for
 * absent).
 */
struct tl_ack_offer {
	const char	*node, *grant, *holder, *nonce, *sig, *mac;
	uint64_t	 version;
};

/*
 * Whether o may be appended at all: 0 when it is signed by its node's
 * key (nk/NODE in the graph of t, caught up) and not a message already
 * decided; otherwise TL_EREFUSED with *kind one of the TL_REFUSED_*
 * kinds and why the reason.  Reads the record; no secret.
 */
int	tl_ack_screen(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_ack_offer *o, const char **kind, char *why);
/*
 * Whether report (the JSON text) is signed by node's key (sighex) and
 * not older than the one the graph holds (its "since", when tally-node
 * first saw that content, is not earlier; a replayed report would show
 * the node as it once was): 0, or TL_EREFUSED with *kind and why as
 * tl_ack_screen.
 */
int	tl_report_screen(struct tl_txn *t, const struct tl_proj *p,
	    const char *node, const char *report, const char *sighex,
	    const char **kind, char *why);
/* 1 when report is the one the graph holds for node (nr/NODE). */
int	tl_report_same(struct tl_txn *t, const struct tl_proj *p,
	    const char *node, const char *report);

/*
 * Refused input, counted in the scratch table TL_REFUSED_TABLE (not
 * the record: losing it loses only counts): key "VIA NODE KIND" (NODE
 * the node claimed when it has a signing key, else "?"), value u64be
 * count, u64be wall-clock ns of the last, then the last reason.  The
 * key TL_REFUSED_LOG holds the log's rate limit (u64be ns of the last
 * line, u64be lines suppressed since).  tl_ack_refused counts one in
 * the write transaction t and logs through rx (NULL: no log) at most
 * once per TL_REFUSED_LOG_NS, saying how many it suppressed.
 */
#define TL_REFUSED_TABLE	"refused"
#define TL_REFUSED_LOG		"~log"
#define TL_REFUSED_LOG_NS	(10ull * 1000000000u)
#define TL_REFUSED_UNSIGNED	"unsigned"
#define TL_REFUSED_BADSIG	"bad-signature"
#define TL_REFUSED_NOKEY	"unknown-node"
#define TL_REFUSED_MALFORMED	"malformed"
#define TL_REFUSED_REPLAYED	"replayed"
int	tl_ack_refused(struct tl_rx *rx, struct tl_txn *t, const char *via,
	    const char *node, const char *kind, const char *why);
/*
 * What the rate limit held back, logged as one line once
 * TL_REFUSED_LOG_NS has passed since the last (tallyd's passes call it:
 * the publisher's, the ack pass).  Errors: the log's.
 */
int	tl_ack_refused_flush(struct tl_rx *rx);
/* Visits every count (not the rate limit's row); stops at fn's non-zero. */
typedef int (*tl_ack_refused_fn)(const char *via, const char *node,
	    const char *kind, uint64_t count, uint64_t last_ns,
	    const char *why, void *arg);
int	tl_ack_refused_each(struct tl_txn *t, tl_ack_refused_fn fn, void *arg);

/*
 * One pass over the offers after the checkpoint "acks", or after the
 * last offer the record shows decided (tl_graph_acks_decided: a
 * promoted standby has no checkpoint of the leader's), whichever is
 * later: acks, and the agents' reports (node.report-offered:
 * node.reported once its signature verifies, unless the graph holds
 * the same report already).  *accepted and *refused count what it
 * recorded.  Errors: the log's.
 */
int	tl_rx_acks(struct tl_rx *rx, unsigned *accepted, unsigned *refused);

#endif
