/*
 * nodewire.h - the node's wire format: the bytes a node's agent
 * (tally-node) and the control plane sign and MAC for each other, the
 * proof key a delivery hands the node, the message types the agent
 * reads and writes, and the agents' last-seen table.
 *
 * Why core/: the agent links core/ alone (DESIGN.md rule 9), and both
 * ends must build these bytes from one definition or a signature made
 * by one is refused by the other.  This is framing, not domain
 * knowledge: nothing here decides what an event means; the message
 * types are the strings on the wire (the queue's "type" header, the
 * log's event type), and projections/events.h takes its names for them
 * from here so that there is one spelling.  reactors/ack.h screens and
 * records what arrives; reactors/publish.c signs what goes out.
 *
 * Every function is pure and reentrant, keeps nothing, and reads its
 * arguments only for the length of the call; strings are
 * NUL-terminated and none may be NULL.
 */
#ifndef TL_NODEWIRE_H
#define TL_NODEWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "secret.h"

/* The message types the agent takes from its queue (or the log). */
#define TL_NW_NODE_ADDED	"node.added"
#define TL_NW_NODE_REMOVED	"node.removed"
#define TL_NW_ASSIGN_REMOVED	"assignment.removed"
#define TL_NW_GRANT_REVOKED	"grant.revoked"
#define TL_NW_GRANT_PURGED	"grant.purged"
#define TL_NW_CRED_DELIVERED	"credential.delivered"
#define TL_NW_CRED_WITHDRAWN	"credential.withdrawn"
/*
 * A certificate the control plane signed for a key the node made (a
 * delivery's 'k' item): public, so it goes as it is, signed by the
 * control plane like every notice.
 */
#define TL_NW_CERT_ISSUED	"certificate.issued"
/* ...and those it offers back (tally.acks, or appended with --log). */
#define TL_NW_ACK_OFFERED	"credential.ack-offered"
#define TL_NW_REPORT_OFFERED	"node.report-offered"

/*
 * The longest report the control plane takes (bytes of its JSON): it
 * lists every grant the node holds (about 100 bytes each) and the
 * signing requests it waits on, so a node holding thousands of grants
 * still reports.
 */
#define TL_NW_REPORT_MAX	(1u << 20)

#define TL_NW_NONCE_LEN		16
#define TL_NW_MSG_MAX		512

/*
 * The bytes an acknowledgement is signed and MACed as: the tag
 * "tally-ack/1", grant, holder (NUL-separated: no pair reads as
 * another), version (u64be), the nonce.  Written to out, *len set;
 * TL_EINVAL when they do not fit TL_NW_MSG_MAX (out is then undefined).
 */
int	tl_nw_ack_message(const char *grant, const char *holder,
	    uint64_t version, const uint8_t nonce[TL_NW_NONCE_LEN],
	    uint8_t out[TL_NW_MSG_MAX], size_t *len);
/*
 * The bytes a report is signed as: "tally-report/1", the node, the
 * JSON.  *out is malloc'd and the caller's to free(); ENOMEM (nothing
 * allocated).
 */
int	tl_nw_report_message(const char *node, const char *report,
	    uint8_t **out, size_t *len);
/*
 * The bytes the control plane signs for what it routes to node's queue
 * tally.node.NODE (reactors/publish.c; tally-node checks them against
 * the control plane's key in its key file, tl_secret_cp_keypair):
 * "tally-cp/1", the node, the message's type, the event's seq (u64be:
 * the agent takes each seq once, so a notice sent again changes
 * nothing) and the body (blen bytes; body may be NULL when blen is 0).
 * The signature goes in the header "sig" (hex).  *out is malloc'd and
 * the caller's to free(); ENOMEM (nothing allocated).
 */
int	tl_nw_cp_message(const char *node, const char *type, uint64_t seq,
	    const void *body, size_t blen, uint8_t **out, size_t *len);
/*
 * The proof key of a password (what a delivery's "#proof" carries, in
 * binary): BLAKE2b-256 of the password, personalised.  Cannot fail;
 * key is secret material, the caller wipes it.
 */
void	tl_nw_proof_key(const char *password, uint8_t key[TL_MAC_LEN]);

/*
 * When each node's agent was last heard from (its signed report, the
 * heartbeat), in the scratch table TL_NW_SEEN_TABLE: key NODE, value
 * u64be wall-clock ns; written in place (the publisher, or the agent
 * itself with --log), so an idle mesh appends nothing.  tl_nw_seen puts
 * now_ns in the write transaction t (errors: the log's);
 * tl_nw_seen_get reads it (TL_ENOTFOUND, *ns 0, when the node has
 * none or a read transaction finds no table yet).
 */
#define TL_NW_SEEN_TABLE	"agents-seen"
int	tl_nw_seen(struct tl_txn *t, const char *node, uint64_t now_ns);
int	tl_nw_seen_get(struct tl_txn *t, const char *node, uint64_t *ns);

#endif
