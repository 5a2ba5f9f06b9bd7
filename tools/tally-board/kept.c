/*
 * kept.c - the board's documents kept in memory while it follows
 * (board.h).
 *
 * A following board renders on every change.  Reading every document
 * of its store again for each rendering costs what the mesh weighs; so
 * the documents the snapshot draws (nodes, modules, assignments,
 * providers, grants) are read once, then only the keys a batch put or
 * deleted (bd_store_touched) are read again.  Each kind is a pair of
 * arrays in key order, as the store's cursor gives them: the keys, and
 * the documents, which a snapshot shares (it never changes one).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "board.h"

static const char *const kinds[BD_KEPT_KINDS] = { "n/", "m/", "a/", "p/",
    "g/" };

struct bd_kept {
	json_t	*keys[BD_KEPT_KINDS], *docs[BD_KEPT_KINDS];
};

static int
kind_of(const char *key)
{
	int i;

	for (i = 0; i < BD_KEPT_KINDS; i++)
		if (strncmp(key, kinds[i], 2) == 0)
			return i;
	return -1;
}

struct load_arg {
	json_t	*keys, *docs;
};

static int
load_one(const char *key, json_t *doc, void *arg)
{
	struct load_arg *la = arg;

	if (json_array_append_new(la->keys, json_string(key)) != 0 ||
	    json_array_append(la->docs, doc) != 0)
		return ENOMEM;
	return 0;
}

int
bd_kept_load(struct bd_store *st, struct bd_kept **out)
{
	struct bd_kept *k;
	struct load_arg la;
	int i, rc = 0;

	if ((k = calloc(1, sizeof(*k))) == NULL)
		return ENOMEM;
	for (i = 0; i < BD_KEPT_KINDS && rc == 0; i++) {
		k->keys[i] = la.keys = json_array();
		k->docs[i] = la.docs = json_array();
		rc = la.keys == NULL || la.docs == NULL ? ENOMEM :
		    bd_each(st, kinds[i], load_one, &la);
	}
	if (rc != 0) {
		bd_kept_free(k);
		return rc;
	}
	*out = k;
	return 0;
}

void
bd_kept_free(struct bd_kept *k)
{
	int i;

	if (k == NULL)
		return;
	for (i = 0; i < BD_KEPT_KINDS; i++) {
		json_decref(k->keys[i]);
		json_decref(k->docs[i]);
	}
	free(k);
}

/* Where key is, or would go, in keys (binary search): *found says. */
static size_t
place(const json_t *keys, const char *key, int *found)
{
	size_t lo = 0, hi = json_array_size(keys), mid;
	int c;

	*found = 0;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		c = strcmp(json_string_value(json_array_get(keys, mid)), key);
		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int
bd_kept_update(struct bd_kept *k, struct bd_store *st, json_t *touched)
{
	const char *key;
	json_t *v, *doc;
	size_t at;
	int i, found, rc = 0;

	json_object_foreach(touched, key, v) {
		if ((i = kind_of(key)) < 0)
			continue;
		doc = bd_get(st, key);
		at = place(k->keys[i], key, &found);
		if (found && doc != NULL)
			rc = json_array_set_new(k->docs[i], at, doc);
		else if (found) {
			rc = json_array_remove(k->docs[i], at) |
			    json_array_remove(k->keys[i], at);
		} else if (doc != NULL)
			rc = json_array_insert_new(k->docs[i], at, doc) |
			    json_array_insert_new(k->keys[i], at,
			    json_string(key));
		if (rc != 0)
			return ENOMEM;
	}
	json_object_clear(touched);
	return 0;
}

json_t *
bd_kept_docs(const struct bd_kept *k, int kind)
{
	return json_copy(k->docs[kind]);
}
