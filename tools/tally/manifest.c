/*
 * manifest.c - load and validate module manifests.
 *
 * Two passes per YAML document.  libyaml's event parser feeds a small
 * tree of our own (load); the validators then walk that tree
 * (parse_module) and fill the plain structs of manifest.h.  The tree
 * exists because the checks are not local: a mapping's env target is
 * declared under env:, which may come after requires: in the file,
 * and duplicate keys need the whole mapping.  libyaml's document API
 * would give a tree too, but it resolves aliases into shared nodes
 * (and cycles), which a validator then has to defend against; the
 * event API lets us refuse aliases where they appear.
 *
 * This file is the public side (manifest.h); the pieces are
 * manifest_util.c (memory, messages, errors), manifest_load.c (the
 * YAML walk), manifest_check.c (validation helpers, sorting, values)
 * and manifest_parse.c (the document), sharing manifest-internal.h.
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

#include <sys/stat.h>

#include <yaml.h>

#include "core/error.h"
#include "drivers/decl.h"
#include "manifest-internal.h"

/*
 * The size limit in words, as an error at 1:1 of file: "1.2 GB (N
 * bytes) is more than the 1 MiB (1048576 bytes) a manifest may be".
 */
static void
too_big(const char *file, uint64_t size, struct tl_mf_errors *errs)
{
	struct ctx c;
	char words[32];

	if (errs == NULL)
		return;
	if (size >= 1000000000)
		snprintf(words, sizeof words, "%.1f GB", size / 1e9);
	else if (size >= 10000000)
		snprintf(words, sizeof words, "%.0f MB", size / 1e6);
	else
		snprintf(words, sizeof words, "%.1f MB", size / 1e6);
	memset(&c, 0, sizeof c);
	c.name = file;
	c.errs = errs;
	mf_err_at(&c, 1, 1, "", "%s (%llu bytes) is more than the %d MiB "
	    "(%d bytes) a manifest may be", words, (unsigned long long)size,
	    TL_MF_MAX_SIZE >> 20, TL_MF_MAX_SIZE);
}

/* ---- public ---- */

int
tl_mf_parse_buffer(const char *name, const void *buf, size_t len,
    const char *base_dir, const char *const *drivers, struct tl_mf_set **out,
    struct tl_mf_errors *errs)
{
	struct ctx c;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (name == NULL || out == NULL || (buf == NULL && len > 0))
		return TL_EINVAL;
	if (len > TL_MF_MAX_SIZE) {
		too_big(name, len, errs);
		return TL_ETOOBIG;
	}
	memset(&c, 0, sizeof c);
	c.name = name;
	c.base_dir = base_dir;
	c.drivers = drivers;
	c.errs = errs;
	c.start = errs != NULL ? errs->n : 0;
	c.set = calloc(1, sizeof *c.set);
	if (c.set == NULL) {
		rc = ENOMEM;
		goto out;
	}
	c.file = mf_sdup(&c, name);
	if (c.file == NULL) {
		rc = c.sys;
		goto out_set;
	}
	mf_load(&c, buf != NULL ? buf : (const void *)"", len);
	if (c.sys == 0)
		mf_check_module_names(&c);
	if (c.sys == 0 && c.nerr == 0 && c.ndocs == 0)
		mf_err_at(&c, 1, 1, "", "no module here: a manifest holds one or "
		    "more documents with module: NAME");
	if (errs != NULL && errs->n > c.start)
		mf_sort_errors(errs->v + c.start, errs->n - c.start);
	if (c.sys != 0) {
		rc = c.sys;
		goto out_set;
	}
	if (c.nerr != 0) {
		rc = TL_EMANIFEST;
		goto out_set;
	}
	qsort(c.set->v, c.set->n, sizeof *c.set->v, mf_cmp_module);
	*out = c.set;
	c.set = NULL;
	rc = 0;
out_set:
	tl_mf_set_free(c.set);
out:
	free(c.names);
	free(c.vars.v);
	free(c.resources.v);
	free(c.base_abs);
	mf_blk_free(&c.tree);
	return rc;
}

int
tl_mf_parse_file(const char *path, const char *const *drivers,
    struct tl_mf_set **out, struct tl_mf_errors *errs)
{
	FILE *f;
	char *buf = NULL, *dir = NULL, *p;
	size_t len = 0, cap = 0, got;
	const char *slash;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (path == NULL || out == NULL)
		return TL_EINVAL;
	f = fopen(path, "rb");
	if (f == NULL)
		return errno;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 8192;
			/* one byte over the limit tells "too big" from "full" */
			if (cap > TL_MF_MAX_SIZE + 1)
				cap = TL_MF_MAX_SIZE + 1;
			if ((p = realloc(buf, cap)) == NULL) {
				rc = ENOMEM;
				goto out_buf;
			}
			buf = p;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0 || len > TL_MF_MAX_SIZE)
			break;
	}
	if (ferror(f)) {
		rc = errno != 0 ? errno : EIO;
		goto out_buf;
	}
	if (len > TL_MF_MAX_SIZE) {
		struct stat st;

		/* Read no further than the limit: its size is the file's. */
		too_big(path, fstat(fileno(f), &st) == 0 &&
		    S_ISREG(st.st_mode) ? (uint64_t)st.st_size : len, errs);
		rc = TL_ETOOBIG;
		goto out_buf;
	}
	slash = strrchr(path, '/');
	if (slash == NULL)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else if ((dir = malloc((size_t)(slash - path) + 1)) != NULL) {
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
	}
	if (dir == NULL) {
		rc = ENOMEM;
		goto out_buf;
	}
	rc = tl_mf_parse_buffer(path, buf, len, dir, drivers, out, errs);
	free(dir);
out_buf:
	free(buf);
	fclose(f);
	return rc;
}

void
tl_mf_set_free(struct tl_mf_set *set)
{
	if (set == NULL)
		return;
	mf_blk_free(&set->mem);
	free(set->v);
	free(set);
}

size_t
tl_mf_set_count(const struct tl_mf_set *set)
{
	return set != NULL ? set->n : 0;
}

const struct tl_mf_module *
tl_mf_set_module(const struct tl_mf_set *set, size_t i)
{
	return set != NULL && i < set->n ? &set->v[i] : NULL;
}

const struct tl_mf_module *
tl_mf_set_find(const struct tl_mf_set *set, const char *name)
{
	if (set == NULL || name == NULL || set->n == 0)
		return NULL;
	return bsearch(name, set->v, set->n, sizeof *set->v, mf_cmp_name_key);
}

const struct tl_mf_req *
tl_mf_module_req(const struct tl_mf_module *m, const char *name)
{
	if (m == NULL || name == NULL || m->nreqs == 0)
		return NULL;
	return bsearch(name, m->reqs, m->nreqs, sizeof *m->reqs, mf_cmp_name_key);
}

static int
streq(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static int
maps_equal(const struct tl_mf_map *a, size_t na, const struct tl_mf_map *b,
    size_t nb)
{
	size_t i;

	if (na != nb)
		return 0;
	for (i = 0; i < na; i++)
		if (!streq(a[i].field, b[i].field) || !streq(a[i].var, b[i].var))
			return 0;
	return 1;
}

/* Two params vectors (sorted name/value pairs) hold the same. */
static int
params_equal(const char *const *a, const char *const *b)
{
	for (; a != NULL && b != NULL && a[0] != NULL && b[0] != NULL;
	    a += 2, b += 2)
		if (strcmp(a[0], b[0]) != 0 || strcmp(a[1], b[1]) != 0)
			return 0;
	return (a == NULL || a[0] == NULL) && (b == NULL || b[0] == NULL);
}

int
tl_mf_req_equal(const struct tl_mf_req *a, const struct tl_mf_req *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return streq(a->name, b->name) && a->kind == b->kind &&
	    streq(a->target, b->target) && streq(a->type, b->type) &&
	    a->scope == b->scope && streq(a->provider_node, b->provider_node) &&
	    streq(a->provider_module, b->provider_module) &&
	    streq(a->resource, b->resource) &&
	    maps_equal(a->env, a->nenv, b->env, b->nenv) &&
	    streq(a->migrations, b->migrations) &&
	    a->max_credential_age == b->max_credential_age &&
	    streq(a->rotation_window, b->rotation_window) &&
	    params_equal(a->params, b->params) &&
	    streq(a->part, b->part);
}

int
tl_mf_module_equal(const struct tl_mf_module *a, const struct tl_mf_module *b)
{
	size_t i;

	if (a == NULL || b == NULL)
		return a == b;
	if (!streq(a->name, b->name) || a->instances != b->instances ||
	    a->nenv != b->nenv ||
	    a->nreqs != b->nreqs || a->nprovides != b->nprovides ||
	    a->nembedded != b->nembedded || a->nparts != b->nparts)
		return 0;
	for (i = 0; i < a->nparts; i++)
		if (!streq(a->parts[i], b->parts[i]))
			return 0;
	for (i = 0; i < a->nenv; i++)
		if (!streq(a->env[i].name, b->env[i].name) ||
		    !streq(a->env[i].def, b->env[i].def))
			return 0;
	for (i = 0; i < a->nreqs; i++)
		if (!tl_mf_req_equal(&a->reqs[i], &b->reqs[i]))
			return 0;
	for (i = 0; i < a->nprovides; i++) {
		const struct tl_mf_provide *x = &a->provides[i];
		const struct tl_mf_provide *y = &b->provides[i];

		size_t j;

		if (x->nderived != y->nderived)
			return 0;
		for (j = 0; j < x->nderived; j++) {
			const struct tl_mf_derived *dx = &x->derived[j];
			const struct tl_mf_derived *dy = &y->derived[j];

			if (!streq(dx->key, dy->key) ||
			    !streq(dx->from, dy->from) ||
			    !streq(dx->times, dy->times) ||
			    !streq(dx->unit, dy->unit) || dx->min != dy->min ||
			    dx->max != dy->max)
				return 0;
		}
		if (!streq(x->type, y->type) || !streq(x->driver, y->driver) ||
		    x->revoke != y->revoke ||
		    x->max_credential_age != y->max_credential_age ||
		    !streq(x->rotation_window, y->rotation_window))
			return 0;
	}
	for (i = 0; i < a->nembedded; i++) {
		const struct tl_mf_embedded *x = &a->embedded[i];
		const struct tl_mf_embedded *y = &b->embedded[i];

		if (!streq(x->name, y->name) || !streq(x->type, y->type) ||
		    !streq(x->runs, y->runs) ||
		    !maps_equal(x->env, x->nenv, y->env, y->nenv))
			return 0;
	}
	return 1;
}

const char *
tl_mf_kind_name(enum tl_mf_kind kind)
{
	switch (kind) {
	case TL_MF_PRESENCE:
		return "presence";
	case TL_MF_INSTANTIATION:
		return "instantiation";
	}
	return "unknown";
}

const char *
tl_mf_scope_name(enum tl_mf_scope scope)
{
	switch (scope) {
	case TL_MF_SHARED:
		return "shared";
	case TL_MF_PER_INSTANCE:
		return "per-instance";
	}
	return "unknown";
}

const char *
tl_mf_revoke_name(enum tl_mf_revoke revoke)
{
	switch (revoke) {
	case TL_MF_RETAIN:
		return "retain";
	case TL_MF_DROP:
		return "drop";
	}
	return "unknown";
}

int
tl_mf_error_format(const struct tl_mf_error *e, char *buf, size_t size)
{
	if (e == NULL || (buf == NULL && size > 0))
		return TL_EINVAL;
	if (e->field[0] != '\0')
		return snprintf(buf, size, "%s:%d:%d: %s: %s", e->file, e->line,
		    e->col, e->field, e->msg);
	return snprintf(buf, size, "%s:%d:%d: %s", e->file, e->line, e->col,
	    e->msg);
}

void
tl_mf_errors_free(struct tl_mf_errors *errs)
{
	if (errs == NULL)
		return;
	free(errs->v);
	errs->v = NULL;
	errs->n = errs->cap = errs->dropped = 0;
}
