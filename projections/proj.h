/*
 * proj.h - projections: pure folds from events to the current graph.
 *
 * Two tables (core/kv.h) hold the state, each a sorted key space:
 *
 *   graph   n/NODE                    node            [seq][node.added body]
 *           m/MODULE                  module          [seq][module.declared]
 *           r/MODULE/REQ              requirement     [seq][requirement.declared]
 *           a/MODULE@NODE             assignment      [seq][assignment.*]
 *           ao/MODULE/SEQ             first-assignment order -> NODE
 *           an/NODE/MODULE            assignments by node
 *           p/PROVIDER                provider        [seq][provider.registered]
 *           pt/TYPE/PROVIDER          providers by type
 *           pm/MODULE/PROVIDER        providers by module
 *           pu/PROVIDER               provider unreachable [seq][reason]
 *           b/GRANT                   binding         [seq][binding.*]
 *           w/TYPE/GRANT              requirement instances waiting for
 *                                     a binding (unbound or ambiguous)
 *           rn/FROM/TYPE/RESOURCE     resource name -> owning module
 *           ms/CHECKSUM               migration.stored seq (u64be)
 *           ar/MODULE@NODE            assignment.ready
 *           pa/MODULE@NODE            provider id of a provider that moved
 *                                     there (tally provider move)
 *   grants  g/GRANT                   grant           [seq][record]
 *           gm/MODULE/GRANT           grants by consumer module
 *           gp/PROVIDER/GRANT         grants by provider
 *           d/GRANT/MODULE@NODE       credential version delivered (u64be)
 *           ma/GRANT/FILE             migration applied -> checksum (hex)
 *           mv/GRANT, mvf/GRANT       a running move, the last failed one
 *                                     (rebind.h); rot/, ack/, cv/: rotation.h
 *
 * Values are an 8-byte big-endian sequence number (the event that last
 * decided the record) followed by a msgpack map.  The fold is
 * (state, event) -> state: no clock, no randomness, no I/O, so replaying
 * the log rebuilds these tables byte for byte.
 *
 * The checkpoint "projections" is the last sequence number folded; it is
 * moved in the same transaction as the events it covers.
 */
#ifndef TL_PROJ_H
#define TL_PROJ_H

#include <stddef.h>
#include <stdint.h>

#include "core/body.h"
#include "core/kv.h"
#include "core/log.h"

#define TL_PROJ_CKPT	"projections"

struct tl_proj {
	tl_kv	graph;
	tl_kv	grants;
};

/* Opens the projection tables in t (creating them in a write txn). */
int	tl_proj_open(struct tl_txn *t, struct tl_proj *p);

/* Folds one event; events of types it does not know are ignored. */
int	tl_proj_apply(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_event *ev);

/*
 * Folds every event after the checkpoint up to the head (or up to
 * upto, when not 0) and moves the checkpoint.  Write transactions only.
 */
int	tl_proj_catchup(struct tl_txn *t, uint64_t upto);

/* Empties the tables and folds the log again up to upto (0: all). */
int	tl_proj_rebuild(struct tl_txn *t, uint64_t upto, uint64_t *countp);

/*
 * The same over the whole log, committed every step events (0: the
 * default), the events read and decoded on a second thread.  Each
 * commit holds the fold of a prefix of the log with its checkpoint, so
 * a crash or a reader in between sees a true past state and the next
 * catch-up carries on from it; one transaction over a million events
 * would instead hold every page it dirtied in memory and make LMDB
 * search and spill an ever longer dirty list.  *countp: the events the
 * committed tables hold, also after an error; *badp: the event an error
 * refers to (0: none), which nothing after was folded past.
 */
#define TL_PROJ_REBUILD_STEP	100000

/*
 * Brings the tables up to the head when they are behind it: after a
 * bare append, or between the steps of a rebuild (whose committed
 * prefix is a true past state, not the present).  Readers that act on
 * what they read (the reactors) call this first; a no-op costs one read
 * transaction.
 */
int	tl_proj_current(struct tl_log *log);
int	tl_proj_rebuild_log(struct tl_log *log, uint64_t step,
	    uint64_t *countp, uint64_t *badp);

/*
 * A projection record: the deciding event's seq and a decoded body.
 * tl_rec_get returns TL_ENOTFOUND when the key is absent.  Close with
 * tl_rec_close (accepts a record that was never opened).
 */
struct tl_rec {
	uint64_t	 seq;
	struct tl_bview	 v;
	struct tl_bnode	 m;	/* the map */
	const void	*raw;	/* the map's bytes */
	size_t		 rawlen;
};
int	tl_rec_get(struct tl_txn *t, tl_kv kv, const char *key,
	    struct tl_rec *r);
/* The same for a value already in hand (a scan's). */
int	tl_rec_open(const void *val, size_t len, struct tl_rec *r);
void	tl_rec_close(struct tl_rec *r);
int	tl_rec_put(struct tl_txn *t, tl_kv kv, const char *key, uint64_t seq,
	    const void *body, size_t len);
int	tl_rec_exists(struct tl_txn *t, tl_kv kv, const char *key);

/* Builds "a/b/c" keys into buf (TL_ETOOBIG if they do not fit). */
#define TL_KEY_MAX	400
int	tl_key(char *buf, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/* Visits keys under a prefix: fn gets the key's remainder. */
typedef int (*tl_rec_each_fn)(const char *rest, const void *val,
	    size_t vlen, void *arg);
int	tl_rec_scan(struct tl_txn *t, tl_kv kv, const char *prefix,
	    tl_rec_each_fn fn, void *arg);

#endif
