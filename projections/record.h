/*
 * record.h - the projection tables and their records, below every fold.
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
 * decided the record) followed by a msgpack map.
 *
 * The folds (graph.c, grants.c, rotation.c, rebind.c) write these
 * records and the readers read them; the fold dispatch (proj.h) sits
 * above both, so nothing here includes a fold's header.  Records
 * borrow: a struct tl_rec points into the map and is valid until the
 * end of the transaction it was read in, or until a write to its
 * table in that transaction; tl_rec_close releases its decoder.
 * Errors are core/error.h codes: TL_ENOTFOUND (no such key),
 * TL_ETOOBIG (a key past TL_KEY_MAX), TL_ECORRUPT (a value that does
 * not decode), ENOMEM, or LMDB's, translated by core/kv.c.
 */
#ifndef TL_RECORD_H
#define TL_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "core/body.h"
#include "core/kv.h"
#include "core/log.h"

struct tl_proj {
	tl_kv	graph;
	tl_kv	grants;
};

/* Opens the projection tables in t (creating them in a write txn). */
int	tl_proj_open(struct tl_txn *t, struct tl_proj *p);

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

/*
 * A fold's string field into buf (cap bytes): as tl_bn_getstr, whose
 * result it returns, but a value too long for buf also sets *big, so a
 * fold that reads many fields fails once (TL_ETOOBIG) after reading
 * them rather than keep "" where the value was.  An absent field, or
 * one that is not a string, leaves "" and *big as it was.
 */
int	tl_rec_getstr(struct tl_bnode map, const char *key, char *buf,
	    size_t cap, int *big);

/* Builds "a/b/c" keys into buf (TL_ETOOBIG if they do not fit). */
#define TL_KEY_MAX	400
int	tl_key(char *buf, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/* Visits keys under a prefix: fn gets the key's remainder. */
typedef int (*tl_rec_each_fn)(const char *rest, const void *val,
	    size_t vlen, void *arg);
int	tl_rec_scan(struct tl_txn *t, tl_kv kv, const char *prefix,
	    tl_rec_each_fn fn, void *arg);
/*
 * The keys' remainders under a prefix, collected (a table is written
 * after its cursor is done): v[0..n), the caller's until
 * tl_rec_keys_free.  0, ENOMEM or the table's errors.
 */
struct tl_rec_keys {
	char	(*v)[TL_KEY_MAX];
	size_t	 n, cap;
};
int	tl_rec_keys(struct tl_txn *t, tl_kv kv, const char *prefix,
	    struct tl_rec_keys *ks);
void	tl_rec_keys_free(struct tl_rec_keys *ks);

#endif
