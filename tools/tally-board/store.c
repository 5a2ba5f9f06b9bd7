/*
 * store.c - the board's own store: one LMDB environment, key -> JSON.
 *
 * It has nothing to do with tally's log: a reporting context owns its
 * view and the position it was built to, and commits both together.
 * Deleting the directory loses nothing: the board rebuilds it from the
 * record.
 */
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "board.h"

struct bd_store {
	MDB_env	*env;
	MDB_dbi	 dbi;
	MDB_txn	*txn;
	int	 rdonly;
	json_t	*meta;
	json_t	*touched;	/* keys put or deleted, when asked (kept.c) */
};

/*
 * dir and its missing parents, each made 0700 (the XDG Base Directory
 * specification: "If, when attempting to write a file, the destination
 * directory is non-existent an attempt should be made to create it
 * with permission 0700"); one that exists is left as it is.
 */
int
bd_mkdirs(const char *dir)
{
	char p[4096];
	size_t i, n = strlen(dir);

	if (n == 0 || n >= sizeof(p))
		return n == 0 ? ENOENT : ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		p[i] = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			return errno;
		if (i < n)
			p[i] = '/';
	}
	return 0;
}

int
bd_store_open(const char *dir, struct bd_store **out, char *why)
{
	struct bd_store *st;
	MDB_txn *txn;
	int rc;

	*out = NULL;
	if ((rc = bd_mkdirs(dir)) != 0) {
		snprintf(why, TL_WHY_MAX, "%s: %s", dir, strerror(rc));
		return rc;
	}
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return ENOMEM;
	if ((rc = mdb_env_create(&st->env)) != 0 ||
	    (rc = mdb_env_set_mapsize(st->env, (size_t)1 << 30)) != 0 ||
	    (rc = mdb_env_open(st->env, dir, 0, 0600)) != 0 ||
	    (rc = mdb_txn_begin(st->env, NULL, 0, &txn)) != 0) {
		snprintf(why, TL_WHY_MAX, "%s: %s", dir, mdb_strerror(rc));
		bd_store_close(st);
		return rc;
	}
	if ((rc = mdb_dbi_open(txn, NULL, 0, &st->dbi)) != 0 ||
	    (rc = mdb_txn_commit(txn)) != 0) {
		snprintf(why, TL_WHY_MAX, "%s: %s", dir, mdb_strerror(rc));
		bd_store_close(st);
		return rc;
	}
	*out = st;
	return 0;
}

void
bd_store_close(struct bd_store *st)
{
	if (st == NULL)
		return;
	bd_store_abort(st);
	if (st->env != NULL)
		mdb_env_close(st->env);
	json_decref(st->touched);
	free(st);
}

int
bd_store_begin(struct bd_store *st, int rdonly)
{
	int rc;

	if ((rc = mdb_txn_begin(st->env, NULL, rdonly ? MDB_RDONLY : 0,
	    &st->txn)) != 0)
		return rc;
	st->rdonly = rdonly;
	if ((st->meta = bd_get(st, "meta")) == NULL)
		st->meta = json_pack("{s:I,s:I,s:I,s:I,s:{}}", "pos",
		    (json_int_t)0, "applied", (json_int_t)0, "duplicates",
		    (json_int_t)0, "gaps", (json_int_t)0, "types");
	return st->meta != NULL ? 0 : ENOMEM;
}

int
bd_store_commit(struct bd_store *st)
{
	int rc;

	if (st->rdonly) {
		bd_store_abort(st);
		return 0;
	}
	if ((rc = bd_put(st, "meta", st->meta)) != 0) {
		bd_store_abort(st);
		return rc;
	}
	rc = mdb_txn_commit(st->txn);
	st->txn = NULL;
	json_decref(st->meta);
	st->meta = NULL;
	return rc;
}

void
bd_store_abort(struct bd_store *st)
{
	if (st->txn != NULL)
		mdb_txn_abort(st->txn);
	st->txn = NULL;
	json_decref(st->meta);
	st->meta = NULL;
}

json_t *
bd_meta(struct bd_store *st)
{
	return st->meta;
}

json_t *
bd_get(struct bd_store *st, const char *key)
{
	MDB_val k, v;

	k.mv_data = (void *)key;
	k.mv_size = strlen(key);
	if (mdb_get(st->txn, st->dbi, &k, &v) != 0)
		return NULL;
	return json_loadb(v.mv_data, v.mv_size, 0, NULL);
}

int
bd_put(struct bd_store *st, const char *key, const json_t *doc)
{
	MDB_val k, v;
	char *s;
	int rc;

	if ((s = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		return ENOMEM;
	k.mv_data = (void *)key;
	k.mv_size = strlen(key);
	v.mv_data = s;
	v.mv_size = strlen(s);
	rc = mdb_put(st->txn, st->dbi, &k, &v, 0);
	free(s);
	if (rc == 0 && st->touched != NULL && strcmp(key, "meta") != 0 &&
	    json_object_set_new(st->touched, key, json_true()) != 0)
		rc = ENOMEM;
	return rc;
}

int
bd_del(struct bd_store *st, const char *key)
{
	MDB_val k;
	int rc;

	k.mv_data = (void *)key;
	k.mv_size = strlen(key);
	rc = mdb_del(st->txn, st->dbi, &k, NULL);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	if (rc == 0 && st->touched != NULL &&
	    json_object_set_new(st->touched, key, json_true()) != 0)
		rc = ENOMEM;
	return rc;
}

json_t *
bd_store_touched(struct bd_store *st)
{
	if (st->touched == NULL)
		st->touched = json_object();
	return st->touched;
}

int
bd_each(struct bd_store *st, const char *prefix, bd_each_fn fn, void *arg)
{
	MDB_cursor *c;
	MDB_val k, v;
	size_t plen = strlen(prefix);
	char key[512];
	int rc, op = MDB_SET_RANGE;

	if ((rc = mdb_cursor_open(st->txn, st->dbi, &c)) != 0)
		return rc;
	k.mv_data = (void *)prefix;
	k.mv_size = plen;
	for (;;) {
		json_t *doc;

		if ((rc = mdb_cursor_get(c, &k, &v, op)) != 0)
			break;
		op = MDB_NEXT;
		if (k.mv_size < plen || memcmp(k.mv_data, prefix, plen) != 0)
			break;
		if (k.mv_size >= sizeof(key))
			continue;
		memcpy(key, k.mv_data, k.mv_size);
		key[k.mv_size] = '\0';
		if ((doc = json_loadb(v.mv_data, v.mv_size, 0, NULL)) == NULL)
			continue;
		rc = fn(key, doc, arg);
		json_decref(doc);
		if (rc != 0)
			break;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}
