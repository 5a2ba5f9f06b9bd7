/*
 * status.h - what each assignment is waiting for, in words.
 *
 * Status is derived on read from the graph and grants projections (it
 * is a pure function of them, so it needs no table of its own and is
 * never stale).  The result is a JSON document (jansson) that the CLI
 * prints as text or as is with --json:
 *
 *   {"module":M,"state":S,"assignments":[{"node":N,"state":S,
 *     "requirements":[{"name","kind","state","reason","grant",
 *                      "provider","bound_by","bound_seq"}]}]}
 *
 * Assignment states: "ready (nothing required)", "unhealthy" (a grant
 * failed, is missing, has drift not repaired or migrations blocked, its
 * provider is unreachable, or a forced rotation cut this holder off:
 * the requirement says which), "pending" (something
 * is unsatisfied, with the reason), "bound" (every grant is bound,
 * not yet provisioned), "provisioned" (migrations still to run),
 * "migrated" (everything done, not yet announced), "ready"
 * (assignment.ready recorded).  A module's and an assignment's state
 * is the worst of its requirements', in that order.
 *
 * Every function takes the caller's transaction (read is enough) and
 * copies what it reads: a document returned in *out is a new jansson
 * reference, independent of the transaction, that the caller releases
 * with json_decref.  On error nothing is left to free.  Errors are core/error.h codes (TL_ENOTFOUND, TL_ECORRUPT,
 * ENOMEM, LMDB's translated by core/kv.c).
 */
#ifndef TL_STATUS_H
#define TL_STATUS_H

#include <jansson.h>

#include "proj.h"

#define TL_ST_UNHEALTHY	"unhealthy"
#define TL_ST_NOTHING	"ready (nothing required)"
#define TL_ST_PENDING	"pending"
#define TL_ST_BOUND	"bound"
#define TL_ST_PROVISIONED	"provisioned"
#define TL_ST_MIGRATED	"migrated"
#define TL_ST_READY	"ready"
#define TL_ST_UNASSIGNED	"declared, not assigned"

/* *out is a new reference; TL_ENOTFOUND if there is no such module. */
int	tl_status_module(struct tl_txn *t, const struct tl_proj *p,
	    const char *module, json_t **out);

/* Every module, sorted by name: {"modules":[…]}. */
int	tl_status_all(struct tl_txn *t, const struct tl_proj *p, json_t **out);

/*
 * A grant's last verification time and how many checks it has had, kept
 * by the verifier in the scratch table "checks" (24 bytes per grant:
 * last_ns, count, next_ns, big-endian): operational, not derived from
 * the log, so that a healthy check appends nothing.
 */
int	tl_checks_get(struct tl_txn *t, const char *grant, uint64_t *last_ns,
	    uint64_t *count);

/*
 * The old login's sessions still open while a rotation waits, in the
 * scratch table "rot-sessions": key the grant id, value "FROM COUNT"
 * (the old version, how many sessions the driver's sessions op saw, as
 * decimal text); written by the rotator on each waiting pass that could
 * ask the provider, deleted when the rotation ends.  Status shows it on
 * the rotation ("old_sessions"); an observation, not an event.
 */
#define TL_ROT_SESSIONS_TABLE	"rot-sessions"

/*
 * What an operator must not forget, mesh-wide: {"retained": [{grant,
 * state (revoked | purging), provider, database, bytes}],
 * "rotations_waiting": [{grant, from, to, started_ns, waiting_on}]
 * (holders that have not acknowledged, NODE/MODULE), "cut_off": [{grant, holder,
 * version}], "rotations_overdue": [{grant, age_s, max_age_s}] (a
 * credential past its max-credential-age with no rotation started),
 * "removals_held": [{module, what, seq, since}] (tally remove waiting
 * for its confirmation: graph rh/, not a walk of the grants)}.
 * With flags TL_ATTN_CLOCK, what depends on the wall clock too, when
 * there is any (reminders.c), in the same walk of the grants:
 * "residual": [{grant, provider, residual (what stays valid, in the
 * driver's words), lifetime, setting, until_ns, certificates?:
 * [{serial, holder, version, not_after}]}] (a revoked grant whose driver
 * declares that issued credentials outlive the revocation, while they
 * do); "certificates": [{grant, holder, serial, version, not_after,
 * wanted, expired}] (holders behind on a renewal, with the certificate
 * they still run on).  A replay, which has no clock of the past, leaves
 * it out.  now_ns is passed in: the function stays pure.  None of it is
 * unhealthy by itself (a cut-off holder is, on its module).
 */
#define TL_ATTN_CLOCK	0x1
int	tl_status_attention(struct tl_txn *t, const struct tl_proj *p,
	    uint64_t now_ns, unsigned flags, json_t **out);

/*
 * reminders.c, for tl_status_attention: g's residual into out, when it
 * has one at now_ns; the lagging holders into at's "certificates".
 * 0, ENOMEM or the tables' errors.
 */
struct tl_grant;
int	tl_status_residual(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g, uint64_t now_ns, json_t *out);
int	tl_status_lagging(struct tl_txn *t, const struct tl_proj *p,
	    uint64_t now_ns, json_t *at);

/*
 * Every rotation under way, as status shows each ("rotation" of a
 * requirement, with "grant"): [{grant, from, to, step, started_ns,
 * deadline_ns, waiting_on[NODE/MODULE], reason, ...}].  It costs the
 * rotations, not the grants (tl_rot_each).
 */
int	tl_status_rotations(struct tl_txn *t, const struct tl_proj *p,
	    json_t **out);

/*
 * What each node's agent (tally-node) last reported it holds, from the
 * graph's "nr/NODE" records, against the record (projections/agents.c):
 * agents [{node, agent, reported_ns, recorded_ns, age_ns, held[{holder
 * grant version … [withdrawn] [off_record]}], last_reload, silent,
 * refused}] (module: only its holders; NULL: all); wrong [{node, module,
 * holder, grant, holds, record, reason}], the versions held that the
 * record retired or never delivered; silent, the agents not seen for
 * more than silence_ns before now_ns; withdrawn, versions held though
 * withdrawn.  live: an agent's last heartbeat (the scratch table
 * core/nodewire.h keeps beside the log) counts as seen, else only the
 * report the log recorded.  agents and wrong are new references the
 * caller releases.  Errors as tl_status_all.
 */
struct tl_status_agents {
	json_t		*agents;
	json_t		*wrong;
	unsigned	 silent;
	unsigned	 withdrawn;
};
int	tl_status_agents(struct tl_txn *t, const struct tl_proj *p,
	    const char *module, uint64_t now_ns, uint64_t silence_ns,
	    int live, struct tl_status_agents *out);

/*
 * Marks each module of doc (tl_status_all's or tl_status_module's) that
 * a node holds off the record (tl_status_agents' wrong) unhealthy, the
 * reasons listed in its "off_record".
 */
void	tl_status_off_record(json_t *doc, const json_t *wrong);

/* Is a status document (module or all) entirely healthy? */
int	tl_status_healthy(const json_t *st);

#endif
