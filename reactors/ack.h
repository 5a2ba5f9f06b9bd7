/*
 * ack.h - acknowledgements with proof, from the nodes that hold a
 * credential (tally-node) to tallyd.
 *
 * A node acknowledges credential version V of grant G for holder H
 * (MODULE@NODE) with a fresh 16-byte nonce and two proofs over the
 * same message (tl_ack_message: a domain tag, G, H, V, the nonce):
 *   sig  the Ed25519 signature by the node's signing key (nk/NODE in
 *        the graph: node.added signkey or node.key-added): who;
 *   mac  BLAKE2b-256 keyed by the proof key of the delivered
 *        credential (tl_ack_proof_key: a keyed hash of the password of
 *        version V, handed to the node inside the sealed delivery as
 *        "#proof HEX"): that it holds that very credential.
 * The offer reaches the log as credential.ack-offered (appended by the
 * agent itself with --log, by the publisher from tally.acks); the
 * ack pass (tl_rx_acks, run by tallyd) verifies each offer once, in
 * log order, and appends credential.acknowledged (actor node:NODE) or
 * security.ack-refused on node/NODE with the reason.  Neither the
 * offer nor its refusal holds a secret: the nonce, the signature and
 * the MAC reveal nothing of the password.
 */
#ifndef TL_RX_ACK_H
#define TL_RX_ACK_H

#include <stddef.h>
#include <stdint.h>

#include "core/secret.h"
#include "rx.h"

#define TL_ACK_NONCE_LEN	16
#define TL_ACK_MSG_MAX		512

/* The bytes signed and MACed; TL_EINVAL when they do not fit. */
int	tl_ack_message(const char *grant, const char *holder,
	    uint64_t version, const uint8_t nonce[TL_ACK_NONCE_LEN],
	    uint8_t out[TL_ACK_MSG_MAX], size_t *len);
/*
 * The bytes a report is signed as: a domain tag, the node, the JSON.
 * *out is malloc'd and the caller's to free(); ENOMEM.
 */
int	tl_report_message(const char *node, const char *report, uint8_t **out,
	    size_t *len);
/*
 * The bytes the control plane signs for what it routes to node's queue
 * tally.node.NODE (reactors/publish.c; tally-node checks them against
 * the control plane's key in its key file, tl_secret_cp_keypair): a
 * domain tag, the node, the message's type, the event's seq (u64be:
 * the agent takes each seq once, so a notice sent again changes
 * nothing) and the body.  The signature goes in the header "sig"
 * (hex).  *out is malloc'd and the caller's to free(); ENOMEM.
 */
int	tl_cp_message(const char *node, const char *type, uint64_t seq,
	    const void *body, size_t blen, uint8_t **out, size_t *len);
/* The proof key of a password (what "#proof" carries, in binary). */
void	tl_ack_proof_key(const char *password, uint8_t key[TL_MAC_LEN]);

/*
 * One pass over the offers after the checkpoint "acks" (acks and the
 * agents' reports, node.report-offered: node.reported once its
 * signature verifies): *accepted and *refused count what it recorded.  Errors: the log's.
 */
int	tl_rx_acks(struct tl_rx *rx, unsigned *accepted, unsigned *refused);

#endif
