/*
 * kv.c - projection tables in the log's LMDB environment.
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "kv.h"
#include "log-internal.h"

/* Projection tables are named "p:NAME" so they never clash with core's. */
#define PFX	"p:"

static int
kv_err(struct tl_txn *t, int rc, const char *what)
{
	return rc == MDB_MAP_FULL ? rc : tl_log_mdberr(t->log, rc, what);
}

int
tl_kv_open(struct tl_txn *t, const char *name, tl_kv *out)
{
	char full[TL_KV_NAME_MAX + sizeof(PFX)];
	MDB_dbi dbi;
	size_t n = strlen(name);
	int rc;

	if (n == 0 || n > TL_KV_NAME_MAX)
		return TL_EINVAL;
	memcpy(full, PFX, sizeof(PFX) - 1);
	memcpy(full + sizeof(PFX) - 1, name, n + 1);
	rc = mdb_dbi_open(t->txn, full,
	    (t->flags & TL_TXN_RDONLY) ? 0 : MDB_CREATE, &dbi);
	if (rc != 0)
		return kv_err(t, rc, "open table");
	*out = dbi;
	return 0;
}

int
tl_kv_get(struct tl_txn *t, tl_kv kv, const void *key, size_t klen,
    const void **val, size_t *vlen)
{
	MDB_val k = { klen, (void *)key }, v;
	int rc;

	if ((rc = mdb_get(t->txn, kv, &k, &v)) != 0)
		return kv_err(t, rc, "get");
	*val = v.mv_data;
	*vlen = v.mv_size;
	return 0;
}

int
tl_kv_put(struct tl_txn *t, tl_kv kv, const void *key, size_t klen,
    const void *val, size_t vlen)
{
	MDB_val k = { klen, (void *)key }, v = { vlen, (void *)val };

	if (klen == 0 || klen > 511)
		return TL_EINVAL;
	return kv_err(t, mdb_put(t->txn, kv, &k, &v, 0), "put");
}

int
tl_kv_del(struct tl_txn *t, tl_kv kv, const void *key, size_t klen)
{
	MDB_val k = { klen, (void *)key };
	int rc;

	rc = mdb_del(t->txn, kv, &k, NULL);
	if (rc == MDB_NOTFOUND)
		return 0;
	return kv_err(t, rc, "del");
}

/* Calls fn for every projection table name in the environment. */
static int
each_table(struct tl_txn *t, int (*fn)(struct tl_txn *, const char *,
    MDB_dbi, void *), void *arg)
{
	MDB_dbi main;
	MDB_cursor *c;
	MDB_val k, v;
	char name[TL_KV_NAME_MAX + sizeof(PFX)];
	int rc, op = MDB_FIRST;

	if ((rc = mdb_dbi_open(t->txn, NULL, 0, &main)) != 0)
		return kv_err(t, rc, "main");
	if ((rc = mdb_cursor_open(t->txn, main, &c)) != 0)
		return kv_err(t, rc, "cursor");
	for (;; op = MDB_NEXT) {
		MDB_dbi dbi;

		if ((rc = mdb_cursor_get(c, &k, &v, op)) != 0)
			break;
		if (k.mv_size < sizeof(PFX) || k.mv_size >= sizeof(name) ||
		    memcmp(k.mv_data, PFX, sizeof(PFX) - 1) != 0)
			continue;
		memcpy(name, k.mv_data, k.mv_size);
		name[k.mv_size] = '\0';
		if ((rc = mdb_dbi_open(t->txn, name, 0, &dbi)) != 0)
			break;
		if ((rc = fn(t, name + sizeof(PFX) - 1, dbi, arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	return rc > 0 || (rc < 0 && rc > TL_EFIRST) ? kv_err(t, rc, "tables")
	    : rc;
}

static int
drop_one(struct tl_txn *t, const char *name, MDB_dbi dbi, void *arg)
{
	(void)name;
	(void)arg;
	return mdb_drop(t->txn, dbi, 0);
}

int
tl_kv_drop_all(struct tl_txn *t)
{
	if (t->flags & TL_TXN_RDONLY)
		return TL_EINVAL;
	return each_table(t, drop_one, NULL);
}

struct digest_arg {
	tl_kv_table_fn	 fn;
	void		*arg;
};

static int
digest_one(struct tl_txn *t, const char *name, MDB_dbi dbi, void *arg)
{
	struct digest_arg *da = arg;
	crypto_generichash_state hs;
	unsigned char d[32], len[8];
	MDB_cursor *c;
	MDB_val k, v;
	size_t n = 0;
	int rc, op = MDB_FIRST, i;

	crypto_generichash_init(&hs, NULL, 0, sizeof(d));
	if ((rc = mdb_cursor_open(t->txn, dbi, &c)) != 0)
		return rc;
	for (;; op = MDB_NEXT) {
		if ((rc = mdb_cursor_get(c, &k, &v, op)) != 0)
			break;
		/* Length-prefixed so that key/value boundaries count. */
		for (i = 0; i < 8; i++)
			len[i] = (unsigned char)(k.mv_size >> (8 * i));
		crypto_generichash_update(&hs, len, 8);
		crypto_generichash_update(&hs, k.mv_data, k.mv_size);
		for (i = 0; i < 8; i++)
			len[i] = (unsigned char)(v.mv_size >> (8 * i));
		crypto_generichash_update(&hs, len, 8);
		crypto_generichash_update(&hs, v.mv_data, v.mv_size);
		n++;
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND)
		return rc;
	crypto_generichash_final(&hs, d, sizeof(d));
	return da->fn(name, d, n, da->arg);
}

int
tl_kv_digest_all(struct tl_txn *t, tl_kv_table_fn fn, void *arg)
{
	struct digest_arg da = { fn, arg };

	return each_table(t, digest_one, &da);
}

int
tl_kv_scan(struct tl_txn *t, tl_kv kv, const void *prefix, size_t plen,
    tl_kv_each_fn fn, void *arg)
{
	MDB_cursor *c;
	MDB_val k = { plen, (void *)prefix }, v;
	int rc, op = plen ? MDB_SET_RANGE : MDB_FIRST;

	if ((rc = mdb_cursor_open(t->txn, kv, &c)) != 0)
		return kv_err(t, rc, "cursor");
	for (;; op = MDB_NEXT) {
		if ((rc = mdb_cursor_get(c, &k, &v, op)) != 0)
			break;
		if (plen > 0 && (k.mv_size < plen ||
		    memcmp(k.mv_data, prefix, plen) != 0)) {
			rc = MDB_NOTFOUND;
			break;
		}
		if ((rc = fn(k.mv_data, k.mv_size, v.mv_data, v.mv_size,
		    arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND)
		return 0;
	return rc;
}
