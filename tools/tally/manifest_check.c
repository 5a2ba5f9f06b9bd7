/*
 * manifest_check.c - the validators' helpers: keys, names and claims
 * checked with their messages, the sort orders and lookups of
 * manifest.h's arrays, and the values that are more than a string
 * (ages, paths resolved against the manifest's directory).
 */
#define _POSIX_C_SOURCE 200809L

#include "manifest.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "core/error.h"
#include "core/vec.h"
#include "drivers/decl.h"
#include "manifest-internal.h"

/* ---- validation helpers ---- */

static int
cmp_keyp(const void *a, const void *b)
{
	const struct node *x = *(const struct node *const *)a;
	const struct node *y = *(const struct node *const *)b;
	int r = strcmp(x->s, y->s);

	if (r != 0)
		return r;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return (x->col > y->col) - (x->col < y->col);
}

/*
 * Report keys that are not strings, unknown (when allowed is given)
 * or repeated, and mark them to be skipped, so that the walkers see a
 * mapping of unique string keys.
 */
void
mf_check_keys(struct ctx *c, struct node *map, const char *path,
    const char *const *allowed)
{
	struct node **keys = NULL, *k;
	char f[FIELD], q[QUOTE], list[160];
	size_t nk = 0, i, first;

	for (k = map->first; k != NULL; k = k->next->next) {
		if (k->kind == N_BAD) {
			k->skip = 1;
			continue;
		}
		if (k->kind != N_SCALAR) {
			mf_err(c, k, path, "a key must be a string, found %s",
			    mf_kind_name(k));
			k->skip = 1;
			continue;
		}
		if (k->null) {
			mf_err(c, k, path, "a key must not be empty or null");
			k->skip = 1;
			continue;
		}
		if (allowed != NULL && !mf_in_list(allowed, k->s)) {
			mf_join(f, sizeof f, path, k->s);
			mf_err(c, k, f, "unknown key %s; allowed here: %s",
			    mf_quote(q, sizeof q, k->s),
			    mf_join_list(list, sizeof list, allowed));
			k->skip = 1;
			continue;
		}
		nk++;
	}
	if (nk < 2)
		return;
	keys = malloc(nk * sizeof *keys);
	if (keys == NULL) {
		c->sys = ENOMEM;
		return;
	}
	nk = 0;
	for (k = map->first; k != NULL; k = k->next->next)
		if (!k->skip)
			keys[nk++] = k;
	/* sorting, not pairwise: a fuzzer's mapping has 100k keys */
	qsort(keys, nk, sizeof *keys, cmp_keyp);
	for (first = 0, i = 1; i < nk; i++) {
		if (strcmp(keys[i]->s, keys[first]->s) != 0) {
			first = i;
			continue;
		}
		mf_join(f, sizeof f, path, keys[i]->s);
		mf_err(c, keys[i], f, "duplicate key %s (first at line %d)",
		    mf_quote(q, sizeof q, keys[i]->s), keys[first]->line);
		keys[i]->skip = 1;
	}
	free(keys);
}

/* The value under key in map (and the key node), NULL if absent. */
struct node *
mf_get(struct node *map, const char *key, struct node **keyp)
{
	struct node *k;

	for (k = map->first; k != NULL; k = k->next->next)
		if (!k->skip && strcmp(k->s, key) == 0) {
			if (keyp != NULL)
				*keyp = k;
			return k->next;
		}
	return NULL;
}

/* v's string, or NULL after saying why there is none. */
const char *
mf_want_str(struct ctx *c, const struct node *v, const char *path)
{
	if (v->kind == N_BAD)
		return NULL;
	if (v->kind != N_SCALAR) {
		mf_err(c, v, path, "expected a string, found %s", mf_kind_name(v));
		return NULL;
	}
	if (v->null) {
		mf_err(c, v, path, "has no value");
		return NULL;
	}
	return v->s;
}

/* 1 if v is a mapping; 0 if it is empty or was reported. */
int
mf_want_map(struct ctx *c, const struct node *v, const char *path,
    const char *what)
{
	if (v->kind == N_MAP)
		return 1;
	if (v->kind == N_BAD || (v->kind == N_SCALAR && v->null))
		return 0;
	mf_err(c, v, path, "expected a mapping of %s, found %s", what,
	    mf_kind_name(v));
	return 0;
}

int
mf_valid_name(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > TL_MF_NAME_MAX || s[0] == '-' ||
	    s[len - 1] == '-')
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

int
mf_check_name(struct ctx *c, const struct node *n, const char *path,
    const char *s, size_t len, const char *what)
{
	char part[TL_MF_NAME_MAX + 2], q[QUOTE];

	if (mf_valid_name(s, len))
		return 1;
	/* s may be part of a longer string (NODE/MODULE) */
	if (len > TL_MF_NAME_MAX) {
		memcpy(part, s, TL_MF_NAME_MAX + 1);
		part[TL_MF_NAME_MAX + 1] = '\0';
		mf_err(c, n, path, "%s is not a valid %s: it is %zu characters "
		    "long, the limit is %d", mf_quote(q, sizeof q, part), what,
		    len, TL_MF_NAME_MAX);
		return 0;
	}
	memcpy(part, s, len);
	part[len] = '\0';
	mf_err(c, n, path, "%s is not a valid %s: use 1 to %d lowercase "
	    "letters, digits and '-', not starting or ending with '-'",
	    mf_quote(q, sizeof q, part), what, TL_MF_NAME_MAX);
	return 0;
}

static int
valid_env_name(const char *s)
{
	size_t i;

	if (s[0] == '\0' || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (i >= TL_MF_ENV_NAME_MAX)
			return 0;
		if (!((s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	}
	return 1;
}

int
mf_check_env_name(struct ctx *c, const struct node *n, const char *path,
    const char *s)
{
	char q[QUOTE];

	if (valid_env_name(s))
		return 1;
	mf_err(c, n, path, "%s is not a valid variable name: use upper-case "
	    "letters, digits and '_', not starting with a digit, at most %d "
	    "characters", mf_quote(q, sizeof q, s), TL_MF_ENV_NAME_MAX);
	return 0;
}

void
mf_claim(struct ctx *c, struct claims *cl, const char *a, const char *b,
    const char *cc, const char *field, const struct node *at)
{
	struct mf_claim *e;

	if (tl_vec_grow(&cl->v, &cl->cap, cl->n + 1, sizeof *cl->v) != 0) {
		c->sys = ENOMEM;
		return;
	}
	e = &cl->v[cl->n++];
	e->a = a;
	e->b = b;
	e->c = cc;
	snprintf(e->field, sizeof e->field, "%s", field);
	e->line = at->line;
	e->col = at->col;
}

static int
strcmp_null(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return (a != NULL) - (b != NULL);
	return strcmp(a, b);
}

int
mf_cmp_claim_what(const struct mf_claim *x, const struct mf_claim *y)
{
	int r;

	if ((r = strcmp_null(x->a, y->a)) != 0 ||
	    (r = strcmp_null(x->b, y->b)) != 0)
		return r;
	return strcmp_null(x->c, y->c);
}

int
mf_cmp_claim(const void *a, const void *b)
{
	const struct mf_claim *x = a, *y = b;
	int r = mf_cmp_claim_what(x, y);

	if (r != 0)
		return r;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return (x->col > y->col) - (x->col < y->col);
}

/* ---- sorting and lookup ---- */

int
mf_cmp_var(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_var *)a)->name,
	    ((const struct tl_mf_var *)b)->name);
}

int
mf_cmp_map(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_map *)a)->field,
	    ((const struct tl_mf_map *)b)->field);
}

int
mf_cmp_req(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_req *)a)->name,
	    ((const struct tl_mf_req *)b)->name);
}

int
mf_cmp_provide(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_provide *)a)->type,
	    ((const struct tl_mf_provide *)b)->type);
}

int
mf_cmp_embedded(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_embedded *)a)->name,
	    ((const struct tl_mf_embedded *)b)->name);
}

int
mf_cmp_module(const void *a, const void *b)
{
	const struct tl_mf_module *x = a, *y = b;
	int r = strcmp_null(x->name, y->name);

	return r != 0 ? r : (x->line > y->line) - (x->line < y->line);
}

int
mf_cmp_modname(const void *a, const void *b)
{
	const struct modname *x = a, *y = b;
	int r = strcmp(x->name, y->name);

	if (r != 0)
		return r;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return (x->col > y->col) - (x->col < y->col);
}

/* bsearch keys: the name is each struct's first member */
int
mf_cmp_name_key(const void *key, const void *elem)
{
	return strcmp(key, *(const char *const *)elem);
}

const struct tl_mf_var *
mf_find_var(const struct tl_mf_module *m, const char *name)
{
	if (m->nenv == 0)
		return NULL;
	return bsearch(name, m->env, m->nenv, sizeof *m->env, mf_cmp_name_key);
}

const struct tl_mf_embedded *
mf_find_embedded(const struct tl_mf_module *m, const char *name)
{
	if (m->nembedded == 0)
		return NULL;
	return bsearch(name, m->embedded, m->nembedded, sizeof *m->embedded,
	    mf_cmp_name_key);
}

/* ---- values ---- */

enum age { AGE_OK, AGE_BAD, AGE_NO_UNIT, AGE_TOO_LONG, AGE_ZERO };

/*
 * "30d", "12h", "1d12h": groups of digits and a unit, largest unit
 * first, each unit once.  A bare number is refused rather than taken
 * as seconds: "30" meaning thirty seconds is a surprise nobody wants
 * in a rotation schedule.
 */
static enum age
scan_age(const char *s, int64_t *out)
{
	static const struct {
		char	unit;
		int64_t	secs;
	} units[] = {
		{ 'w', 7 * 86400 }, { 'd', 86400 }, { 'h', 3600 }, { 'm', 60 },
		{ 's', 1 }
	};
	const size_t nunits = sizeof units / sizeof units[0];
	const char *p, *digits;
	int64_t total = 0, n;
	size_t next = 0, u;

	if (*s == '\0')
		return AGE_BAD;
	for (p = s; *p != '\0'; p++) {
		/* n stays below 10 * TL_MF_MAX_AGE + 9: no overflow */
		for (digits = p, n = 0; *p >= '0' && *p <= '9'; p++) {
			if (n > TL_MF_MAX_AGE)
				return AGE_TOO_LONG;
			n = n * 10 + (*p - '0');
		}
		if (p == digits)
			return AGE_BAD;
		if (*p == '\0')
			return digits == s ? AGE_NO_UNIT : AGE_BAD;
		for (u = next; u < nunits && units[u].unit != *p; u++)
			;
		if (u == nunits)
			return AGE_BAD;
		if (n > TL_MF_MAX_AGE / units[u].secs)
			return AGE_TOO_LONG;
		total += n * units[u].secs;
		if (total > TL_MF_MAX_AGE)
			return AGE_TOO_LONG;
		next = u + 1;
	}
	if (total == 0)
		return AGE_ZERO;
	*out = total;
	return AGE_OK;
}

void
mf_parse_age(struct ctx *c, const struct node *v, const char *path,
    int64_t *out)
{
	const char *s = mf_want_str(c, v, path);
	char q[QUOTE];

	if (s == NULL)
		return;
	switch (scan_age(s, out)) {
	case AGE_OK:
		break;
	case AGE_NO_UNIT:
		mf_err(c, v, path, "%s needs a unit: s, m, h, d or w (e.g. %sd)",
		    mf_quote(q, sizeof q, s), s);
		break;
	case AGE_TOO_LONG:
		mf_err(c, v, path, "%s is longer than the limit of %lldd",
		    mf_quote(q, sizeof q, s), (long long)(TL_MF_MAX_AGE / 86400));
		break;
	case AGE_ZERO:
		mf_err(c, v, path, "must be longer than zero; leave "
		    "max-credential-age out for no scheduled rotation");
		break;
	case AGE_BAD:
		mf_err(c, v, path, "%s is not a duration: use numbers with units "
		    "w, d, h, m, s, largest first (e.g. 30d, 1d12h)",
		    mf_quote(q, sizeof q, s));
		break;
	}
}

static int
make_base(struct ctx *c)
{
	const char *dir = c->base_dir ? c->base_dir : ".";
	char *cwd = NULL, *p;
	size_t size = 256, n;
	int rc = 0;

	if (dir[0] == '/') {
		c->base_abs = strdup(dir);
		if (c->base_abs == NULL)
			rc = ENOMEM;
		return rc;
	}
	for (;;) {
		p = realloc(cwd, size);
		if (p == NULL) {
			rc = ENOMEM;
			goto out_cwd;
		}
		cwd = p;
		if (getcwd(cwd, size) != NULL)
			break;
		if (errno != ERANGE || size > SIZE_MAX / 4) {
			rc = errno != ERANGE ? errno : ENAMETOOLONG;
			goto out_cwd;
		}
		size *= 2;
	}
	n = strlen(cwd) + strlen(dir) + 2;
	c->base_abs = malloc(n);
	if (c->base_abs == NULL) {
		rc = ENOMEM;
		goto out_cwd;
	}
	snprintf(c->base_abs, n, "%s/%s", cwd, dir);
out_cwd:
	free(cwd);
	return rc;
}

/* Append p's components to out, resolving "." and ".." lexically. */
static void
push_path(char *out, size_t *o, const char *p)
{
	const char *s;
	size_t len;

	while (*p != '\0') {
		while (*p == '/')
			p++;
		for (s = p; *p != '\0' && *p != '/'; p++)
			;
		len = (size_t)(p - s);
		if (len == 0 || (len == 1 && s[0] == '.'))
			continue;
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			while (*o > 0 && out[*o - 1] != '/')
				(*o)--;
			if (*o > 0)
				(*o)--;
			continue;
		}
		out[(*o)++] = '/';
		memcpy(out + *o, s, len);
		*o += len;
	}
}

/*
 * The migrations directory as an absolute path.  Lexical, not
 * realpath(): the directory need not exist yet (the caller reads it),
 * and a manifest checked on one machine must resolve the same way.
 */
const char *
mf_resolve(struct ctx *c, const struct node *v, const char *path,
    const char *rel)
{
	char *out;
	size_t o = 0;

	if (c->base_abs == NULL && (c->sys = make_base(c)) != 0)
		return NULL;
	out = mf_alloc_n(c, strlen(c->base_abs) + strlen(rel) + 3, 1);
	if (out == NULL)
		return NULL;
	push_path(out, &o, c->base_abs);
	push_path(out, &o, rel);
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	if (o >= PATH_LIMIT) {
		mf_err(c, v, path, "resolves to a path longer than %d bytes",
		    PATH_LIMIT);
		return NULL;
	}
	return out;
}
