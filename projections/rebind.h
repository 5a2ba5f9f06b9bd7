/*
 * rebind.h - moving a binding (and the data with it), as a saga of
 * events; and moving a provider to another node.
 *
 * tally rebind GRANT PROVIDER --migrate, then tallyd (reactors/rebind.c):
 *
 *   rebind.started   {grant from to version old_version}   on grant/GRANT
 *   rebind.issued    {grant version provider resource owner user
 *                     password(secret) from_resource from_owner
 *                     from_user}                           the intent
 *   rebind.copied    {grant version tables{NAME: rows} host port
 *                     database user}                       copy verified
 *   binding.moved    {grant module req node type provider from reason
 *                     state}                               on binding/GRANT
 *   credential.delivered {...}                             one per holder
 *   credential.acknowledged {grant holder version}         tally ack
 *   rebind.completed {grant version provider resource user policy}
 *
 *   rebind.failed    {grant step reason}   before the switch only
 *   rebind.reverted  {grant cleanup}       old writable again, new copy gone
 *
 * The intent names a fresh resource on the new provider (the grant's
 * database name with "_mVERSION": never one that exists already) and a
 * new credential, version old_version + 1.  tallyd creates it, freezes
 * the old database (read-only, the login's sessions ended), copies it
 * (driver copy: pg_dump | pg_restore), and compares per-table row
 * counts; only a verified copy is switched to.  binding.moved is the
 * switch, committed with rebind.copied and the deliveries: from it on
 * the grant's provider, version, intent and connection fields are the
 * new ones (the gp/ index too), so verification, delivery files and
 * rotation follow.  The old grant is revoked (login disabled, data
 * retained, still read-only) only once every holder acknowledged the
 * new version.  A failure before the switch leaves the old grant
 * serving: rebind.failed says why, and rebind.reverted records that the
 * old database is writable again and the partial copy dropped.
 *
 * tally provider move PROVIDER NODE:
 *
 *   provider.moved   {id module from to host port}         on provider/ID
 *   assignment.removed / assignment.created                the module's
 *                     assignment moves with it (same settings, secrets
 *                     re-encrypted for the new assignment)
 *   rotation.started {... reason "provider moved"}         per grant
 *
 * The provider keeps its id; bindings do not change.  Its record's node
 * is the new one, its grants' connection fields the new address (host:
 * the node's routable name, port: the moved assignment's), and
 * pa/MODULE@NODE maps the new assignment to the id,
 * so re-registration (tally apply) keeps it.  Each provisioned grant it
 * serves is rotated: a new credential at the new address, delivered to
 * every holder, acknowledged, the old retired — the generation change
 * that re-delivers the new routable name, with the rotation's fan-out.
 *
 * rebind.completed also makes the old resource a revoked grant of its
 * own, GRANT~vOLD_VERSION (provider, database and size as kept), which
 * tally grants --revoked lists and tally purge destroys; it cannot be
 * restored.
 *
 * State: grants table mv/GRANT the running move (mvf/GRANT the last
 * one that failed, for status); graph table pa/MODULE@NODE -> provider
 * id, for a provider whose id no longer names its node.
 *
 * The records read here are plain data with fixed-size strings (a
 * copy, not a pointer into the map): they own no memory and outlive
 * the caller's transaction.  Readers take any transaction; the fold is
 * for tl_proj_apply, in the write transaction of the event.  Visitors
 * stop at fn's first non-zero return and return it.  Errors are
 * core/error.h codes: TL_ENOTFOUND (nothing running), TL_ETOOBIG (a
 * key past TL_KEY_MAX), TL_ECORRUPT, ENOMEM, or LMDB's.
 */
#ifndef TL_REBIND_H
#define TL_REBIND_H

#include <stdint.h>

#include "record.h"

#define TL_EV_REBIND_STARTED	"rebind.started"
#define TL_EV_REBIND_ISSUED	"rebind.issued"
#define TL_EV_REBIND_COPIED	"rebind.copied"
#define TL_EV_REBIND_FAILED	"rebind.failed"
#define TL_EV_REBIND_REVERTED	"rebind.reverted"
#define TL_EV_REBIND_COMPLETED	"rebind.completed"
#define TL_EV_BINDING_MOVED	"binding.moved"
#define TL_EV_PROVIDER_MOVED	"provider.moved"

#define TL_MV_STARTED	"started"	/* no intent yet */
#define TL_MV_ISSUED	"issued"	/* intent recorded: create, copy */
#define TL_MV_MOVED	"moved"		/* switched; waiting on acks */
#define TL_MV_FAILED	"failed"	/* reverting */

#define TL_BIND_MOVED	"moved (tally rebind --migrate)"
/*
 * An embedded instance consolidated onto its node's provider (tally
 * assign --consolidate, decide_embedded.h): the same saga with an empty
 * from; rebind.started then also carries where the instance is reached
 * for the copy (from_host from_port) and its database and user
 * (from_resource from_user), and nothing is revoked on it afterwards:
 * the instance is the module's own, left read-only with its data.
 */
#define TL_BIND_CONSOLIDATED	"consolidated (tally assign --consolidate)"
/* The reason of the revoked grant GRANT~vN a move leaves behind. */
#define TL_MV_LEFT	"old resource left by a move to"

struct tl_rebind {
	char		grant[201];
	char		state[16];
	char		from[130], to[130];	/* providers */
	uint64_t	version, old_version;
	uint64_t	started_seq, started_ns, issued_seq, copied_seq;
	char		db[64], owner[64], user[64];		/* new */
	char		old_db[64], old_owner[64], old_user[64];
	char		host[256], port[8];	/* new connection fields */
	char		from_host[256], from_port[8];	/* an embedded source */
	uint64_t	tables, rows;		/* what the copy counted */
	char		step[16];	/* of a failure */
	char		reason[512];
};

/* TL_ENOTFOUND when no move of grant runs. */
int	tl_mv_get(struct tl_txn *t, const struct tl_proj *p, const char *grant,
	    struct tl_rebind *r);
typedef int (*tl_mv_fn)(const struct tl_rebind *r, void *arg);
int	tl_mv_each(struct tl_txn *t, const struct tl_proj *p, tl_mv_fn fn,
	    void *arg);
/* The last move of grant that failed (to, step, reason), if any. */
int	tl_mv_failed(struct tl_txn *t, const struct tl_proj *p,
	    const char *grant, struct tl_rebind *r);

/*
 * The provider id of module's assignment on node: pa/ for one that
 * moved there, else NODE/MODULE.  TL_EEXIST when NODE/MODULE is the id
 * of a provider that moved elsewhere (the id cannot be reused).
 */
int	tl_provider_of(struct tl_txn *t, const struct tl_proj *p,
	    const char *module, const char *node, char *id);

int	tl_fold_rebind(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_event *ev, struct tl_bnode body);

#endif
