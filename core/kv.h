/*
 * kv.h - named sub-databases in the log's environment, for projections.
 *
 * A projection keeps its state in tables opened here, inside the same
 * transactions as the log, so that reading state, deciding and
 * appending happen atomically (DESIGN.md, rule 2).  Every table opened
 * here is derived data: tl_kv_drop_all() empties them all, and
 * replaying the log must rebuild them byte for byte.
 *
 * Values returned by tl_kv_get and cursors point into the map and are
 * valid until the next write in the transaction or its end.
 */
#ifndef TL_KV_H
#define TL_KV_H

#include <stddef.h>

#include "log.h"

typedef unsigned int tl_kv;	/* a table handle, valid for the log's life */

#define TL_KV_NAME_MAX	32

/* Opens (creating in a write transaction) the projection table name. */
int	tl_kv_open(struct tl_txn *t, const char *name, tl_kv *out);

/* TL_ENOTFOUND when absent. */
int	tl_kv_get(struct tl_txn *t, tl_kv kv, const void *key, size_t klen,
	    const void **val, size_t *vlen);
int	tl_kv_put(struct tl_txn *t, tl_kv kv, const void *key, size_t klen,
	    const void *val, size_t vlen);
/* Deleting an absent key is not an error. */
int	tl_kv_del(struct tl_txn *t, tl_kv kv, const void *key, size_t klen);

/* Empties every projection table (for tl rebuild). */
int	tl_kv_drop_all(struct tl_txn *t);

/* Visits each table's name and a digest of its content (rebuild tests). */
typedef int (*tl_kv_table_fn)(const char *name, const unsigned char
	    digest[32], size_t entries, void *arg);
int	tl_kv_digest_all(struct tl_txn *t, tl_kv_table_fn fn, void *arg);

/*
 * Prefix scans: visits every key starting with prefix, in order, until
 * fn returns non-zero (which is returned; 1 is a handy "stop").
 */
typedef int (*tl_kv_each_fn)(const void *key, size_t klen, const void *val,
	    size_t vlen, void *arg);
int	tl_kv_scan(struct tl_txn *t, tl_kv kv, const void *prefix,
	    size_t plen, tl_kv_each_fn fn, void *arg);

/*
 * Scratch tables: operational state that is not derived from the log
 * and is not a projection (the verifier's last-checked times and
 * counters).  tl_kv_drop_all and tl_kv_digest_all leave them alone;
 * losing one loses nothing the log knows.
 */
int	tl_kv_open_scratch(struct tl_txn *t, const char *name, tl_kv *out);

#endif
