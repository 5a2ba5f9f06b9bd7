/*
 * manifest_parse.c - the document: one module's keys (module, env,
 * requires, provides, embedded) walked from the tree into the plain
 * structs of manifest.h, with the checks that need the whole module.
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
#include "core/window.h"
#include "drivers/decl.h"
#include "drivers/util.h"
#include "manifest-internal.h"

static const char *const module_keys[] = {
	"module", "instances", "parts", "env", "requires", "provides",
	"embedded", NULL
};
static const char *const req_keys[] = {
	"presence", "type", "from", "scope", "provider", "name", "env",
	"migrations", "max-credential-age", "rotation-window", "part",
	"credential", "access", "of", NULL
};
static const char *const provide_keys[] = {
	"driver", "revoke", "max-credential-age", "rotation-window",
	"settings", NULL
};
/*
 * rotation-window: a weekly window in a time zone (core/window.h),
 * checked here so that a spec tallyd could not read is never recorded.
 */
static const char *
parse_window(struct ctx *c, const struct node *v, const char *path)
{
	struct tl_win w;
	char why[TL_WHY_MAX];
	const char *s;

	if ((s = mf_want_str(c, v, path)) == NULL)
		return NULL;
	if (tl_win_parse(s, &w, why) != 0) {
		mf_err(c, v, path, "%s", why);
		return NULL;
	}
	return mf_sdup(c, s);
}

/*
 * The keys a requirement may have: req_keys, and the params the driver
 * of its type declares (decl.h), into out (cap entries).
 */
static const char *const *
req_allowed(const struct node *map, const char **out, size_t cap)
{
	const struct node *t = mf_get((struct node *)map, "type", NULL);
	const struct tl_drv_decl *d = t != NULL && t->kind == N_SCALAR &&
	    t->s != NULL ? tl_drv_decl_for_type(t->s) : NULL;
	const struct tl_drv_param *p;
	size_t n = 0, i;

	for (i = 0; req_keys[i] != NULL && n + 1 < cap; i++)
		out[n++] = req_keys[i];
	for (p = d != NULL ? d->params : NULL; p != NULL && p->name != NULL &&
	    n + 1 < cap; p++)
		out[n++] = p->name;
	out[n] = NULL;
	return out;
}

static int
pair_cmp(const void *a, const void *b)
{
	return strcmp(((const char *const *)a)[0],
	    ((const char *const *)b)[0]);
}

/*
 * The params of r's type's driver that map declares: each a string, or
 * for a list a string or a sequence of strings, none with a newline;
 * then the driver's own rules (tl_drv_params_check).
 */
static void
parse_params(struct ctx *c, struct node *map, const char *path,
    struct tl_mf_req *r)
{
	const struct tl_drv_decl *d = tl_drv_decl_for_type(r->type);
	const struct tl_drv_param *p;
	const char **pv;
	char f[FIELD], why[TL_WHY_MAX], *joined;
	size_t np = 0, n = 0, len;
	struct node *v, *it;

	for (p = d != NULL ? d->params : NULL; p != NULL && p->name != NULL;
	    p++)
		np++;
	if (np == 0 || (pv = mf_alloc_n(c, 2 * np + 1, sizeof(*pv))) == NULL)
		return;
	for (p = d->params; p->name != NULL; p++) {
		if ((v = mf_get(map, p->name, NULL)) == NULL)
			continue;
		mf_join(f, sizeof f, path, p->name);
		if (v->kind == N_SEQ && !p->list) {
			mf_err(c, v, f, "takes one value, not a list (%s)",
			    p->description);
			continue;
		}
		if (v->kind != N_SEQ) {
			const char *s = mf_want_str(c, v, f);

			if (s == NULL)
				continue;
			if (strchr(s, '\n') != NULL) {
				mf_err(c, v, f, "a value with a newline");
				continue;
			}
			pv[n++] = p->name;
			pv[n++] = mf_sdup(c, s);
			continue;
		}
		len = 0;
		for (it = v->first; it != NULL; it = it->next) {
			if (it->kind != N_SCALAR || it->null || it->s == NULL ||
			    strchr(it->s, '\n') != NULL) {
				mf_err(c, it, f, "each item is a string on one "
				    "line");
				len = 0;
				break;
			}
			len += strlen(it->s) + 1;
		}
		if (len == 0) {
			if (v->first == NULL)
				mf_err(c, v, f, "an empty list (leave %s out "
				    "for its default)", p->name);
			continue;
		}
		if ((joined = mf_alloc_n(c, len, 1)) == NULL)
			return;
		joined[0] = '\0';
		for (it = v->first; it != NULL; it = it->next) {
			if (joined[0] != '\0')
				strcat(joined, "\n");
			strcat(joined, it->s);
		}
		pv[n++] = p->name;
		pv[n++] = joined;
	}
	pv[n] = NULL;
	if (n == 0)
		return;
	qsort(pv, n / 2, 2 * sizeof(*pv), pair_cmp);
	if (tl_drv_params_check(d, pv, why) != 0) {
		struct node *at = map, *k;
		const char *msg = why;

		/* At the key the reason starts with, when it names one. */
		f[0] = '\0';
		for (p = d->params; p->name != NULL; p++) {
			size_t nl = strlen(p->name);

			if (strncmp(why, p->name, nl) == 0 &&
			    (why[nl] == ':' || why[nl] == ' ') &&
			    mf_get(map, p->name, &k) != NULL) {
				at = k;
				mf_join(f, sizeof f, path, p->name);
				msg = why[nl] == ':' ? why + nl + 2 : why;
				break;
			}
		}
		mf_err(c, at, f[0] != '\0' ? f : path, "%s", msg);
		return;
	}
	{
		char packed[TL_DRV_PARAMS_MAX];

		if (tl_drv_params_pack(pv, packed, sizeof(packed)) != 0) {
			mf_err(c, map, path, "its %s params take more than %d "
			    "bytes", d->name, TL_DRV_PARAMS_MAX);
			return;
		}
	}
	r->params = pv;
}

static const char *const derived_keys[] = {
	"from-node", "times", "unit", "min", "max", NULL
};
static const char *const node_sources[] = { "memory", "cpus", "disk", NULL };
static const char *const size_units[] = { "B", "KB", "MB", "GB", "TB", NULL };
static const char *const embedded_keys[] = {
	"type", "env", "image", "runs", "port", "expose", NULL
};
static const char *const conn_fields[] = {
	"host", "port", "database", "user", "password", "url", "vhost",
	"path", NULL
};

/*
 * The connection fields known at all: conn_fields, then every driver's
 * own that is not among them (a field only one driver produces), in
 * the order of the drivers, into known; returns it, NULL-terminated.
 */
static const char *const *
known_fields(const char *known[64])
{
	const char *const *dn = tl_drv_names();
	const struct tl_drv_decl *ops;
	size_t n = 0, i, j;

	for (i = 0; conn_fields[i] != NULL; i++)
		known[n++] = conn_fields[i];
	known[n] = NULL;
	for (i = 0; dn[i] != NULL; i++) {
		if ((ops = tl_drv_decl_find(dn[i])) == NULL || ops->fields == NULL)
			continue;
		for (j = 0; ops->fields[j].name != NULL && n + 1 < 64; j++)
			if (!mf_in_list(known, ops->fields[j].name)) {
				known[n++] = ops->fields[j].name;
				known[n] = NULL;
			}
	}
	return known;
}

/* ---- the document ---- */

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* parts: a list of names, each once; an assignment installs some or all. */
static void
parse_parts(struct ctx *c, struct tl_mf_module *m, struct node *seq)
{
	const char **v;
	struct node *e;
	const char *s;
	char q[QUOTE];
	size_t n = 0, i;

	if (seq->kind == N_BAD)
		return;
	if (seq->kind != N_SEQ) {
		mf_err(c, seq, "parts", "expected a list of part names "
		    "(parts: [web, worker]), found %s", mf_kind_name(seq));
		return;
	}
	/* One more than needed: mf_in_list wants a NULL-terminated list. */
	if ((v = mf_alloc_n(c, seq->n + 1, sizeof *v)) == NULL)
		return;
	for (e = seq->first; e != NULL && c->sys == 0; e = e->next) {
		if ((s = mf_want_str(c, e, "parts")) == NULL ||
		    !mf_check_name(c, e, "parts", s, strlen(s), "part name"))
			continue;
		for (i = 0; i < n; i++)
			if (strcmp(v[i], s) == 0)
				break;
		if (i < n) {
			mf_err(c, e, "parts", "part %s is listed twice",
			    mf_quote(q, sizeof q, s));
			continue;
		}
		v[n++] = mf_sdup(c, s);
	}
	qsort(v, n, sizeof *v, cmp_str);
	v[n] = NULL;
	m->parts = v;
	m->nparts = n;
}

static void
parse_env(struct ctx *c, struct tl_mf_module *m, struct node *map)
{
	struct tl_mf_var *vars;
	struct node *k, *v;
	char f[FIELD];
	size_t n = 0;

	if (!mf_want_map(c, map, "env", "variable names to defaults"))
		return;
	mf_check_keys(c, map, "env", NULL);
	if (map->n == 0 || (vars = mf_alloc_n(c, map->n / 2, sizeof *vars)) ==
	    NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		mf_join(f, sizeof f, "env", k->s);
		if (!mf_check_env_name(c, k, f, k->s) || v->kind == N_BAD)
			continue;
		if (v->kind != N_SCALAR) {
			mf_err(c, v, f, "expected a default value (a string, or "
			    "\"\" for none), found %s", mf_kind_name(v));
			continue;
		}
		vars[n].name = mf_sdup(c, k->s);
		vars[n].def = v->null ? "" : mf_sdup(c, v->s);
		vars[n].line = k->line;
		n++;
	}
	qsort(vars, n, sizeof *vars, mf_cmp_var);
	m->env = vars;
	m->nenv = n;
}

/* d's field names, NULL-terminated, in names (64 at most). */
static const char *const *
field_names(const struct tl_drv_decl *d, const char *names[64])
{
	size_t i;

	for (i = 0; d->fields[i].name != NULL && i < 63; i++)
		names[i] = d->fields[i].name;
	names[i] = NULL;
	return names;
}

/* An env: mapping of connection fields onto the module's variables. */
static void
parse_maps(struct ctx *c, const struct tl_mf_module *m, struct node *map,
    const char *path, const char *type, const struct tl_mf_map **out,
    size_t *nout)
{
	/* A type with no driver is checked against known_fields alone. */
	const struct tl_drv_decl *drv = type != NULL ? tl_drv_decl_for_type(type) :
	    NULL;
	struct tl_mf_map *maps;
	struct node *k, *v;
	const char *s;
	char f[FIELD], q[QUOTE], list[320];
	const char *known[64], *dfields[64];
	size_t n = 0;

	if (!mf_want_map(c, map, path, "connection fields to variables"))
		return;
	mf_check_keys(c, map, path, NULL);
	if (map->n == 0 || (maps = mf_alloc_n(c, map->n / 2, sizeof *maps)) ==
	    NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		mf_join(f, sizeof f, path, k->s);
		if (!mf_in_list(known_fields(known), k->s)) {
			/*
			 * The type's own fields when it has a driver: every
			 * driver's together no longer fit in a message.
			 */
			if (drv != NULL && drv->fields != NULL)
				mf_err(c, k, f, "unknown connection field %s; "
				    "%s delivers %s", mf_quote(q, sizeof q,
				    k->s), type, mf_join_list(list, sizeof list,
				    field_names(drv, dfields)));
			else
				mf_err(c, k, f, "unknown connection field %s; "
				    "the fields are %s", mf_quote(q, sizeof q,
				    k->s), mf_join_list(list, sizeof list,
				    known));
			continue;
		}
		if (drv != NULL && drv->fields != NULL &&
		    !tl_drv_has_field(drv, k->s)) {
			/* it would be delivered as nothing, in silence */
			mf_err(c, k, f, "type %s (driver %s) does not produce "
			    "connection field %s; it produces %s", type,
			    drv->name, mf_quote(q, sizeof q, k->s),
			    mf_join_list(list, sizeof list,
			    field_names(drv, dfields)));
			continue;
		}
		if ((s = mf_want_str(c, v, f)) == NULL ||
		    !mf_check_env_name(c, v, f, s))
			continue;
		if (mf_find_var(m, s) == NULL) {
			/* the as-is system dropped these values in silence */
			mf_err(c, v, f, "field %s is mapped to %s, which the module "
			    "does not declare under env: (add %s: \"\" there, "
			    "or the value is lost)", mf_quote(q, sizeof q, k->s),
			    s, s);
			continue;
		}
		mf_claim(c, &c->vars, s, NULL, NULL, f, v);
		maps[n].field = mf_sdup(c, k->s);
		maps[n].var = mf_sdup(c, s);
		maps[n].line = k->line;
		n++;
	}
	qsort(maps, n, sizeof *maps, mf_cmp_map);
	*out = maps;
	*nout = n;
}

/* presence:/from: may name neither the module nor its private instance. */
static int
check_target(struct ctx *c, const struct tl_mf_module *m,
    const struct node *v, const char *path, const char *s, int presence)
{
	char q[QUOTE];

	if (m->name != NULL && strcmp(s, m->name) == 0) {
		if (presence)
			mf_err(c, v, path, "a module cannot require its own "
			    "presence");
		else
			mf_err(c, v, path, "a module cannot consume its own "
			    "grant: %s is this module", mf_quote(q, sizeof q, s));
		return 0;
	}
	if (mf_find_embedded(m, s) != NULL) {
		mf_err(c, v, path, "%s names this module's embedded instance, "
		    "which is private and never a provider (rename the "
		    "instance if you meant the module %s)",
		    mf_quote(q, sizeof q, s), s);
		return 0;
	}
	return 1;
}

static void
parse_provider(struct ctx *c, struct tl_mf_req *r, const struct node *v,
    const char *path)
{
	const char *s = mf_want_str(c, v, path), *slash;
	char q[QUOTE], q2[QUOTE], *node;
	size_t nlen, mlen;

	if (s == NULL)
		return;
	slash = strchr(s, '/');
	if (slash == NULL || strchr(slash + 1, '/') != NULL) {
		mf_err(c, v, path, "%s is not NODE/MODULE (e.g. node-b/store)",
		    mf_quote(q, sizeof q, s));
		return;
	}
	nlen = (size_t)(slash - s);
	mlen = strlen(slash + 1);
	if (!mf_check_name(c, v, path, s, nlen, "node name") ||
	    !mf_check_name(c, v, path, slash + 1, mlen, "module name"))
		return;
	if (r->target != NULL && strcmp(slash + 1, r->target) != 0) {
		mf_err(c, v, path, "names the module %s but from: is %s; a "
		    "provider is an instance of the from: module",
		    mf_quote(q, sizeof q, slash + 1),
		    mf_quote(q2, sizeof q2, r->target));
		return;
	}
	r->provider_module = mf_sdup(c, slash + 1);
	if ((node = mf_alloc_n(c, nlen + 1, 1)) != NULL)
		memcpy(node, s, nlen);
	r->provider_node = node;
}

/*
 * access: read | read-write and of: MODULE/REQUIREMENT[@NODE]: a login
 * of the requirement's own on the resource another requirement's grant
 * owns (decl.h, tl_drv_grant.access).  Both or neither; the driver must
 * declare TL_DRV_CAP_ACCESS; nothing that would act as an owner
 * (migrations, a certificate login) goes with them.
 */
static void
parse_access(struct ctx *c, struct node *map, const char *path,
    struct tl_mf_req *r)
{
	const struct tl_drv_decl *drv;
	struct node *a, *o;
	const char *s, *slash, *at;
	char f[FIELD], q[QUOTE], why[TL_WHY_MAX];
	size_t n;

	a = mf_get(map, "access", NULL);
	o = mf_get(map, "of", NULL);
	if (a == NULL && o == NULL)
		return;
	mf_join(f, sizeof f, path, a != NULL ? "of" : "access");
	if (a == NULL || o == NULL) {
		mf_err(c, a != NULL ? a : o, f, "access: and of: go together: "
		    "of: names the requirement whose grant owns the resource "
		    "(MODULE/REQUIREMENT), access: what this one may do on it "
		    "(read or read-write)");
		return;
	}
	mf_join(f, sizeof f, path, "access");
	if ((s = mf_want_str(c, a, f)) != NULL) {
		if (strcmp(s, "read") == 0 || strcmp(s, "read-write") == 0)
			r->access = mf_sdup(c, s);
		else
			mf_err(c, a, f, "%s: access is read or read-write",
			    mf_quote(q, sizeof q, s));
	}
	mf_join(f, sizeof f, path, "of");
	if ((s = mf_want_str(c, o, f)) != NULL) {
		n = strlen(s);
		slash = strchr(s, '/');
		at = strchr(s, '@');
		if (slash == NULL || slash == s || slash[1] == '\0' ||
		    strchr(slash + 1, '/') != NULL || (at != NULL &&
		    (at < slash || at[1] == '\0')) ||
		    !mf_valid_name(s, (size_t)(slash - s)) ||
		    !mf_valid_name(slash + 1, (size_t)((at != NULL ? at :
		    s + n) - slash - 1)) || (at != NULL &&
		    !mf_valid_name(at + 1, strlen(at + 1))))
			mf_err(c, o, f, "%s: of is MODULE/REQUIREMENT, or "
			    "MODULE/REQUIREMENT@NODE for a per-instance one",
			    mf_quote(q, sizeof q, s));
		else
			r->of = mf_sdup(c, s);
	}
	drv = r->type != NULL ? tl_drv_decl_for_type(r->type) : NULL;
	if (drv != NULL && !tl_drv_can(drv, TL_DRV_CAP_ACCESS, why))
		mf_err(c, a, f, "type %s: %s", r->type, why);
	if (r->migrations != NULL)
		mf_err(c, a, f, "migrations: belong to the requirement that "
		    "owns the resource (of:), not to one with access: to it");
	if (r->credential != NULL)
		mf_err(c, a, f, "credential: certificate: a login with access: "
		    "to another's resource logs in by password");
}

/* 0 if r was filled without a problem. */
static int
parse_req(struct ctx *c, const struct tl_mf_module *m, const struct node *key,
    struct node *map, const char *path, struct tl_mf_req *r)
{
	struct node *presence, *type, *from, *v, *k, *tk = NULL, *fk = NULL;
	const struct node *at = key;
	size_t before = c->nerr;
	const char *s;
	const struct tl_drv_decl *drv;
	char f[FIELD], q[QUOTE], dflt[2 * TL_MF_NAME_MAX + 2];
	char why[TL_WHY_MAX];
	const char *allowed[48];

	mf_check_keys(c, map, path, req_allowed(map, allowed, 48));
	r->line = key->line;
	mf_join(f, sizeof f, path, "part");
	if ((v = mf_get(map, "part", &k)) != NULL) {
		if ((s = mf_want_str(c, v, f)) == NULL)
			;
		else if (!mf_in_list(m->parts, s))
			mf_err(c, v, f, "%s is not one of the module's parts "
			    "(declare it under parts:, or leave part: out for a "
			    "requirement of every part)", mf_quote(q, sizeof q,
			    s));
		else
			r->part = mf_sdup(c, s);
		k->skip = 1;	/* not "applies only to instantiation" */
	}
	presence = mf_get(map, "presence", NULL);
	type = mf_get(map, "type", &tk);
	from = mf_get(map, "from", &fk);
	if (presence != NULL) {
		r->kind = TL_MF_PRESENCE;
		for (k = map->first; k != NULL; k = k->next->next) {
			if (k->skip || strcmp(k->s, "presence") == 0)
				continue;
			mf_join(f, sizeof f, path, k->s);
			if (k == tk || k == fk)
				mf_err(c, k, f, "a requirement is either presence "
				    "(presence:) or instantiation (type: and "
				    "from:), not both");
			else
				mf_err(c, k, f, "%s applies only to an "
				    "instantiation requirement (type: and from:)",
				    k->s);
		}
		mf_join(f, sizeof f, path, "presence");
		if ((s = mf_want_str(c, presence, f)) != NULL &&
		    mf_check_name(c, presence, f, s, strlen(s), "module name") &&
		    check_target(c, m, presence, f, s, 1))
			r->target = mf_sdup(c, s);
		return c->nerr == before ? 0 : -1;
	}
	if (type == NULL && from == NULL) {
		mf_err(c, key, path, "a requirement needs presence: MODULE, or "
		    "type: and from:");
		return -1;
	}
	r->kind = TL_MF_INSTANTIATION;
	mf_join(f, sizeof f, path, "type");
	if (type == NULL)
		mf_err(c, key, f, "missing type: an instantiation requirement "
		    "names the resource type it needs");
	else if ((s = mf_want_str(c, type, f)) != NULL &&
	    mf_check_name(c, type, f, s, strlen(s), "resource type"))
		r->type = mf_sdup(c, s);
	mf_join(f, sizeof f, path, "from");
	if (from == NULL)
		mf_err(c, key, f, "missing from: an instantiation requirement "
		    "names the module that grants it");
	else if ((s = mf_want_str(c, from, f)) != NULL &&
	    mf_check_name(c, from, f, s, strlen(s), "module name") &&
	    check_target(c, m, from, f, s, 0))
		r->target = mf_sdup(c, s);

	mf_join(f, sizeof f, path, "scope");
	if ((v = mf_get(map, "scope", NULL)) != NULL &&
	    (s = mf_want_str(c, v, f)) != NULL) {
		if (strcmp(s, "shared") == 0)
			r->scope = TL_MF_SHARED;
		else if (strcmp(s, "per-instance") == 0)
			r->scope = TL_MF_PER_INSTANCE;
		else
			mf_err(c, v, f, "scope must be shared or per-instance, "
			    "not %s", mf_quote(q, sizeof q, s));
	}
	mf_join(f, sizeof f, path, "provider");
	if ((v = mf_get(map, "provider", NULL)) != NULL)
		parse_provider(c, r, v, f);
	mf_join(f, sizeof f, path, "name");
	if ((v = mf_get(map, "name", NULL)) != NULL) {
		if ((s = mf_want_str(c, v, f)) != NULL &&
		    mf_check_name(c, v, f, s, strlen(s), "resource name"))
			r->resource = mf_sdup(c, s);
		at = v;
	} else if (m->name != NULL && mf_valid_name(key->s, strlen(key->s))) {
		snprintf(dflt, sizeof dflt, "%s-%s", m->name, key->s);
		/* a Postgres identifier stops at 63 bytes: be explicit */
		if (strlen(dflt) > TL_MF_NAME_MAX)
			mf_err(c, key, path, "the default resource name %s is "
			    "longer than %d characters: give a shorter one "
			    "with name:", mf_quote(q, sizeof q, dflt),
			    TL_MF_NAME_MAX);
		else
			r->resource = mf_sdup(c, dflt);
		at = key;
		snprintf(f, sizeof f, "%s", path);
	}
	if (r->resource != NULL && r->type != NULL && r->target != NULL)
		mf_claim(c, &c->resources, r->target, r->type, r->resource, f, at);
	mf_join(f, sizeof f, path, "env");
	if ((v = mf_get(map, "env", NULL)) != NULL)
		parse_maps(c, m, v, f, r->type, &r->env, &r->nenv);
	mf_join(f, sizeof f, path, "migrations");
	if ((v = mf_get(map, "migrations", NULL)) != NULL &&
	    (s = mf_want_str(c, v, f)) != NULL) {
		if (s[0] == '/')
			mf_err(c, v, f, "%s is absolute: migrations ship with the "
			    "module, give a path relative to the manifest's "
			    "directory", mf_quote(q, sizeof q, s));
		else if (r->type != NULL &&
		    (drv = tl_drv_decl_for_type(r->type)) != NULL &&
		    !tl_drv_can(drv, TL_DRV_CAP_MIGRATE, why))
			/* Refused now, not discovered by the migrator. */
			mf_err(c, v, f, "type %s has migrations, but %s", r->type,
			    why);
		else
			r->migrations = mf_resolve(c, v, f, s);
	}
	mf_join(f, sizeof f, path, "max-credential-age");
	if ((v = mf_get(map, "max-credential-age", NULL)) != NULL)
		mf_parse_age(c, v, f, &r->max_credential_age);
	mf_join(f, sizeof f, path, "rotation-window");
	if ((v = mf_get(map, "rotation-window", NULL)) != NULL)
		r->rotation_window = parse_window(c, v, f);
	mf_join(f, sizeof f, path, "credential");
	if ((v = mf_get(map, "credential", NULL)) != NULL &&
	    (s = mf_want_str(c, v, f)) != NULL) {
		drv = r->type != NULL ? tl_drv_decl_for_type(r->type) : NULL;
		if (strcmp(s, "password") != 0 && strcmp(s, "certificate") != 0)
			mf_err(c, v, f, "%s: the credential is password (the "
			    "driver's own) or certificate",
			    mf_quote(q, sizeof q, s));
		else if (strcmp(s, "certificate") == 0 && drv != NULL &&
		    drv->credential.cert_login == NULL)
			/* Refused now, not discovered at provisioning. */
			mf_err(c, v, f, "type %s has no certificate logins: %s",
			    r->type, drv->credential.cert_none != NULL ?
			    drv->credential.cert_none : "its driver cannot map "
			    "a certificate to a login");
		else if (strcmp(s, "certificate") == 0)
			r->credential = "certificate";
	}
	if (r->type != NULL)
		parse_params(c, map, path, r);
	parse_access(c, map, path, r);
	return c->nerr == before ? 0 : -1;
}

static void
parse_requires(struct ctx *c, struct tl_mf_module *m, struct node *map)
{
	struct tl_mf_req *reqs;
	struct node *k, *v;
	char f[FIELD], q[QUOTE];
	size_t n = 0;
	int ok;

	if (!mf_want_map(c, map, "requires", "requirement names to requirements"))
		return;
	mf_check_keys(c, map, "requires", NULL);
	if (map->n == 0 || (reqs = mf_alloc_n(c, map->n / 2, sizeof *reqs)) ==
	    NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		mf_join(f, sizeof f, "requires", k->s);
		ok = mf_check_name(c, k, f, k->s, strlen(k->s),
		    "requirement name");
		/* Both would be grant MODULE/NAME@NODE (decide_embedded.h). */
		if (ok && mf_find_embedded(m, k->s) != NULL) {
			mf_err(c, k, f, "%s is also this module's embedded "
			    "instance: a requirement and an instance need "
			    "names of their own", mf_quote(q, sizeof q, k->s));
			ok = 0;
		}
		if (v->kind == N_BAD)
			continue;
		if (v->kind != N_MAP) {
			mf_err(c, v, f, "expected a mapping with presence: MODULE, "
			    "or type: and from:, found %s", mf_kind_name(v));
			continue;
		}
		memset(&reqs[n], 0, sizeof reqs[n]);
		reqs[n].name = mf_sdup(c, k->s);
		if (parse_req(c, m, k, v, f, &reqs[n]) == 0 && ok)
			n++;
	}
	qsort(reqs, n, sizeof *reqs, mf_cmp_req);
	m->reqs = reqs;
	m->nreqs = n;
}

/* A size's multiplier (B 1, KB 1024, ...), 0 if unit is none. */
static uint64_t
unit_bytes(const char *unit)
{
	size_t i;

	for (i = 0; size_units[i] != NULL; i++)
		if (strcmp(size_units[i], unit) == 0)
			return 1ULL << (10 * i);
	return 0;
}

/* "128MB" (a size) or "4" (a count) into *out; 0 if it is neither. */
static int
parse_bound(struct ctx *c, const struct node *v, const char *path,
    int size, uint64_t *out)
{
	const char *s = mf_want_str(c, v, path);
	char *end, q[QUOTE];
	unsigned long long n;
	uint64_t mul = 1;

	if (s == NULL)
		return 0;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (end != s && size && *end != '\0')
		mul = unit_bytes(end);
	if (end == s || errno != 0 || s[0] == '-' || mul == 0 ||
	    (!size && *end != '\0') || (mul > 1 && n > UINT64_MAX / mul)) {
		mf_err(c, v, path, "%s is not %s", mf_quote(q, sizeof q, s),
		    size ? "a size (a number and B, KB, MB, GB or TB: 128MB)" :
		    "a count (a whole number)");
		return 0;
	}
	*out = (uint64_t)n * mul;
	return 1;
}

static int
cmp_derived(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_derived *)a)->key,
	    ((const struct tl_mf_derived *)b)->key);
}

/*
 * settings: KEY: {from-node: SOURCE, times: F, unit: U, min: X, max: Y}
 * under a provides: entry: structure, not an expression to parse.
 */
static void
parse_derived(struct ctx *c, struct tl_mf_provide *pv, struct node *map,
    const char *path)
{
	struct tl_mf_derived *dv;
	struct node *k, *v, *x;
	const char *s;
	char f[FIELD], g[FIELD], q[QUOTE], list[160];
	size_t n = 0, before;
	int size;

	if (!mf_want_map(c, map, path, "setting names to derivations"))
		return;
	mf_check_keys(c, map, path, NULL);
	if (map->n == 0 || (dv = mf_alloc_n(c, map->n / 2, sizeof *dv)) ==
	    NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		before = c->nerr;
		mf_join(f, sizeof f, path, k->s);
		/* As tally assign --set takes a key: [a-z0-9_-], 1 to 63. */
		if (strlen(k->s) == 0 || strlen(k->s) > TL_MF_NAME_MAX ||
		    strspn(k->s, "abcdefghijklmnopqrstuvwxyz0123456789_-") !=
		    strlen(k->s))
			mf_err(c, k, f, "%s is not a setting name (1 to 63 of "
			    "[a-z0-9_-], as tally assign --set takes it)",
			    mf_quote(q, sizeof q, k->s));
		if (v->kind == N_BAD)
			continue;
		if (!mf_want_map(c, v, f, "from-node: and how to derive it"))
			continue;
		mf_check_keys(c, v, f, derived_keys);
		memset(&dv[n], 0, sizeof dv[n]);
		mf_join(g, sizeof g, f, "from-node");
		if ((x = mf_get(v, "from-node", NULL)) == NULL) {
			mf_err(c, k, g, "missing from-node: what of the node's "
			    "inventory it is derived from (%s)",
			    mf_join_list(list, sizeof list, node_sources));
			continue;
		}
		if ((s = mf_want_str(c, x, g)) == NULL)
			continue;
		if (!mf_in_list(node_sources, s)) {
			mf_err(c, x, g, "%s is not in a node's inventory; it has "
			    "%s", mf_quote(q, sizeof q, s),
			    mf_join_list(list, sizeof list, node_sources));
			continue;
		}
		dv[n].from = mf_sdup(c, s);
		size = strcmp(s, "cpus") != 0;
		dv[n].times = "1";
		mf_join(g, sizeof g, f, "times");
		if ((x = mf_get(v, "times", NULL)) != NULL &&
		    (s = mf_want_str(c, x, g)) != NULL) {
			char *end;
			double d = strtod(s, &end);

			if (end == s || *end != '\0' || !(d > 0) || d > 1e6)
				mf_err(c, x, g, "%s is not a factor (a number "
				    "above 0: 0.25)", mf_quote(q, sizeof q, s));
			else
				dv[n].times = mf_sdup(c, s);
		}
		dv[n].unit = size ? "B" : "";
		mf_join(g, sizeof g, f, "unit");
		if ((x = mf_get(v, "unit", NULL)) != NULL &&
		    (s = mf_want_str(c, x, g)) != NULL) {
			if (!size)
				mf_err(c, x, g, "cpus is a count: it has no unit");
			else if (!mf_in_list(size_units, s))
				mf_err(c, x, g, "unit must be one of %s, not %s",
				    mf_join_list(list, sizeof list, size_units),
				    mf_quote(q, sizeof q, s));
			else
				dv[n].unit = mf_sdup(c, s);
		}
		mf_join(g, sizeof g, f, "min");
		if ((x = mf_get(v, "min", NULL)) != NULL)
			parse_bound(c, x, g, size, &dv[n].min);
		mf_join(g, sizeof g, f, "max");
		if ((x = mf_get(v, "max", NULL)) != NULL)
			parse_bound(c, x, g, size, &dv[n].max);
		if (dv[n].max != 0 && dv[n].min > dv[n].max)
			mf_err(c, k, f, "min is above max");
		if (c->nerr != before)
			continue;
		dv[n].key = mf_sdup(c, k->s);
		dv[n].line = k->line;
		n++;
	}
	qsort(dv, n, sizeof *dv, cmp_derived);
	pv->derived = dv;
	pv->nderived = n;
}

static void
parse_provides(struct ctx *c, struct tl_mf_module *m, struct node *map)
{
	struct tl_mf_provide *pv;
	struct node *k, *v, *x;
	const char *s;
	char f[FIELD], g[FIELD], q[QUOTE], list[160];
	size_t n = 0, before;

	if (!mf_want_map(c, map, "provides", "resource types to drivers"))
		return;
	mf_check_keys(c, map, "provides", NULL);
	if (map->n == 0 || (pv = mf_alloc_n(c, map->n / 2, sizeof *pv)) == NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		before = c->nerr;
		s = NULL;
		mf_join(f, sizeof f, "provides", k->s);
		mf_check_name(c, k, f, k->s, strlen(k->s), "resource type");
		if (v->kind == N_BAD)
			continue;
		if (v->kind != N_MAP && !(v->kind == N_SCALAR && v->null)) {
			mf_err(c, v, f, "expected a mapping with driver:, found %s",
			    mf_kind_name(v));
			continue;
		}
		if (v->kind == N_MAP)
			mf_check_keys(c, v, f, provide_keys);
		mf_join(g, sizeof g, f, "driver");
		x = v->kind == N_MAP ? mf_get(v, "driver", NULL) : NULL;
		if (x == NULL)
			mf_err(c, k, g, "missing driver: a resource type is "
			    "declared with the driver that makes it (no empty "
			    "grants)");
		else if ((s = mf_want_str(c, x, g)) != NULL &&
		    !mf_in_list(c->drivers, s)) {
			if (c->drivers == NULL || c->drivers[0] == NULL)
				mf_err(c, x, g, "unknown driver %s: no driver is "
				    "known", mf_quote(q, sizeof q, s));
			else
				mf_err(c, x, g, "unknown driver %s; known drivers: "
				    "%s", mf_quote(q, sizeof q, s),
				    mf_join_list(list, sizeof list, c->drivers));
		} else if (s != NULL) {
			const struct tl_drv_decl *dd = tl_drv_decl_find(s);

			pv[n].driver = mf_sdup(c, s);
			/* A driver that says how many of it a mesh has. */
			if (dd != NULL && dd->instances != NULL &&
			    strcmp(dd->instances,
			    tl_mf_instances_name(m->instances)) != 0)
				mf_err(c, x, g, "driver %s is declared "
				    "instances: %s, and the module says %s: "
				    "declare instances: %s", s, dd->instances,
				    tl_mf_instances_name(m->instances),
				    dd->instances);
		}
		mf_join(g, sizeof g, f, "revoke");
		x = v->kind == N_MAP ? mf_get(v, "revoke", NULL) : NULL;
		if (x != NULL && (s = mf_want_str(c, x, g)) != NULL) {
			if (strcmp(s, "retain") == 0)
				pv[n].revoke = TL_MF_RETAIN;
			else if (strcmp(s, "drop") == 0)
				pv[n].revoke = TL_MF_DROP;
			else
				mf_err(c, x, g, "revoke must be retain or drop, "
				    "not %s", mf_quote(q, sizeof q, s));
		}
		mf_join(g, sizeof g, f, "max-credential-age");
		x = v->kind == N_MAP ? mf_get(v, "max-credential-age", NULL) :
		    NULL;
		if (x != NULL)
			mf_parse_age(c, x, g, &pv[n].max_credential_age);
		mf_join(g, sizeof g, f, "rotation-window");
		x = v->kind == N_MAP ? mf_get(v, "rotation-window", NULL) :
		    NULL;
		if (x != NULL)
			pv[n].rotation_window = parse_window(c, x, g);
		mf_join(g, sizeof g, f, "settings");
		x = v->kind == N_MAP ? mf_get(v, "settings", NULL) : NULL;
		if (x != NULL)
			parse_derived(c, &pv[n], x, g);
		if (c->nerr != before)
			continue;
		pv[n].type = mf_sdup(c, k->s);
		pv[n].line = k->line;
		n++;
	}
	qsort(pv, n, sizeof *pv, mf_cmp_provide);
	m->provides = pv;
	m->nprovides = n;
}

static void
parse_embedded(struct ctx *c, struct tl_mf_module *m, struct node *map)
{
	struct tl_mf_embedded *em;
	struct node *k, *v, *x, *xi, *xr, *ik = NULL, *rk = NULL;
	const char *s;
	char f[FIELD], g[FIELD], q[QUOTE];
	size_t n = 0, before;

	if (!mf_want_map(c, map, "embedded", "instance names to instances"))
		return;
	mf_check_keys(c, map, "embedded", NULL);
	if (map->n == 0 || (em = mf_alloc_n(c, map->n / 2, sizeof *em)) == NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		before = c->nerr;
		mf_join(f, sizeof f, "embedded", k->s);
		mf_check_name(c, k, f, k->s, strlen(k->s),
		    "embedded instance name");
		if (v->kind == N_BAD)
			continue;
		if (v->kind != N_MAP) {
			mf_err(c, v, f, "expected a mapping with type:, found %s",
			    mf_kind_name(v));
			continue;
		}
		mf_check_keys(c, v, f, embedded_keys);
		mf_join(g, sizeof g, f, "type");
		if ((x = mf_get(v, "type", NULL)) == NULL)
			mf_err(c, k, g, "missing type: an embedded instance names "
			    "its resource type");
		else if ((s = mf_want_str(c, x, g)) != NULL &&
		    mf_check_name(c, x, g, s, strlen(s), "resource type"))
			em[n].type = mf_sdup(c, s);
		xi = mf_get(v, "image", &ik);
		xr = mf_get(v, "runs", &rk);
		if (xi != NULL && xr != NULL) {
			/* report at the later of the two */
			x = rk->line > ik->line ||
			    (rk->line == ik->line && rk->col > ik->col) ? rk : ik;
			mf_join(g, sizeof g, f, x->s);
			mf_err(c, x, g, "give either image: or runs:, not both");
		} else if (xi != NULL || xr != NULL) {
			mf_join(g, sizeof g, f, xr != NULL ? "runs" : "image");
			if ((s = mf_want_str(c, xr != NULL ? xr : xi, g)) != NULL)
				em[n].runs = mf_sdup(c, s);
		}
		mf_join(g, sizeof g, f, "port");
		if ((x = mf_get(v, "port", NULL)) != NULL &&
		    !(x->kind == N_SCALAR && x->null))
			mf_err(c, x, g, "an embedded instance publishes no port: "
			    "it is reachable only on its module's network "
			    "(remove port:)");
		mf_join(g, sizeof g, f, "expose");
		if ((x = mf_get(v, "expose", NULL)) != NULL &&
		    (s = mf_want_str(c, x, g)) != NULL && strcmp(s, "none") != 0)
			mf_err(c, x, g, "an embedded instance is private: expose "
			    "must be none, not %s", mf_quote(q, sizeof q, s));
		mf_join(g, sizeof g, f, "env");
		if ((x = mf_get(v, "env", NULL)) != NULL)
			parse_maps(c, m, x, g, em[n].type, &em[n].env,
			    &em[n].nenv);
		if (c->nerr != before)
			continue;
		em[n].name = mf_sdup(c, k->s);
		em[n].line = k->line;
		n++;
	}
	qsort(em, n, sizeof *em, mf_cmp_embedded);
	m->embedded = em;
	m->nembedded = n;
}

/* Report the second and later claims on one thing, naming the first. */
static void
check_claims(struct ctx *c, struct claims *cl, int vars)
{
	char q[QUOTE];
	size_t i, first;

	if (cl->n < 2)
		goto out;
	qsort(cl->v, cl->n, sizeof *cl->v, mf_cmp_claim);
	for (first = 0, i = 1; i < cl->n; i++) {
		struct mf_claim *e = &cl->v[i], *p = &cl->v[first];

		if (mf_cmp_claim_what(e, p) != 0) {
			first = i;
			continue;
		}
		if (vars)
			mf_err_at(c, e->line, e->col, e->field, "%s is already "
			    "mapped by %s (line %d): a variable holds one value",
			    e->a, p->field, p->line);
		else
			mf_err_at(c, e->line, e->col, e->field, "resource name %s "
			    "is already used by %s (line %d) for the same type "
			    "and provider: a grant belongs to one requirement",
			    mf_quote(q, sizeof q, e->c), p->field, p->line);
	}
out:
	cl->n = 0;
}

void
mf_parse_module(struct ctx *c, struct node *root)
{
	struct tl_mf_module m;
	struct node *v;
	const char *s;

	if (root == NULL || (root->kind == N_SCALAR && root->null))
		return;		/* an empty document, as after a final "---" */
	c->ndocs++;
	if (root->kind == N_BAD)
		return;
	if (root->kind != N_MAP) {
		mf_err(c, root, "", "a manifest document is a mapping with "
		    "module: NAME, found %s", mf_kind_name(root));
		return;
	}
	memset(&m, 0, sizeof m);
	m.file = c->file;
	m.line = root->line;
	mf_check_keys(c, root, "", module_keys);
	if ((v = mf_get(root, "module", NULL)) == NULL)
		mf_err(c, root, "module", "missing module: every document names "
		    "its module (module: NAME)");
	else if ((s = mf_want_str(c, v, "module")) != NULL &&
	    mf_check_name(c, v, "module", s, strlen(s), "module name")) {
		struct modname *nm;

		m.name = mf_sdup(c, s);
		if (tl_vec_grow(&c->names, &c->capnames, c->nnames + 1,
		    sizeof *c->names) != 0) {
			c->sys = ENOMEM;
			return;
		}
		nm = &c->names[c->nnames++];
		nm->name = m.name ? m.name : "";
		nm->line = v->line;
		nm->col = v->col;
	}
	if ((v = mf_get(root, "instances", NULL)) != NULL &&
	    (s = mf_want_str(c, v, "instances")) != NULL) {
		char q[QUOTE];

		if (strcmp(s, "any") == 0)
			m.instances = TL_MF_ANY;
		else if (strcmp(s, "one-per-mesh") == 0)
			m.instances = TL_MF_ONE_PER_MESH;
		else if (strcmp(s, "one-per-node") == 0)
			m.instances = TL_MF_ONE_PER_NODE;
		else
			mf_err(c, v, "instances", "instances must be "
			    "one-per-mesh, one-per-node or any, not %s",
			    mf_quote(q, sizeof q, s));
	}
	/* parts, env and embedded first: requirements are checked against them */
	if ((v = mf_get(root, "parts", NULL)) != NULL)
		parse_parts(c, &m, v);
	if ((v = mf_get(root, "env", NULL)) != NULL)
		parse_env(c, &m, v);
	if ((v = mf_get(root, "embedded", NULL)) != NULL)
		parse_embedded(c, &m, v);
	if ((v = mf_get(root, "requires", NULL)) != NULL)
		parse_requires(c, &m, v);
	if ((v = mf_get(root, "provides", NULL)) != NULL)
		parse_provides(c, &m, v);
	check_claims(c, &c->vars, 1);
	check_claims(c, &c->resources, 0);
	if (c->sys != 0)
		return;
	if (tl_vec_grow(&c->set->v, &c->set->cap, c->set->n + 1,
	    sizeof *c->set->v) != 0) {
		c->sys = ENOMEM;
		return;
	}
	c->set->v[c->set->n++] = m;
}

void
mf_check_module_names(struct ctx *c)
{
	char q[QUOTE];
	size_t i, first;

	if (c->nnames < 2)
		return;
	qsort(c->names, c->nnames, sizeof *c->names, mf_cmp_modname);
	for (first = 0, i = 1; i < c->nnames; i++) {
		if (strcmp(c->names[i].name, c->names[first].name) != 0) {
			first = i;
			continue;
		}
		mf_err_at(c, c->names[i].line, c->names[i].col, "module",
		    "module %s is already declared at line %d",
		    mf_quote(q, sizeof q, c->names[i].name),
		    c->names[first].line);
	}
}

/* Stable, so that problems on one line keep the order they were found in. */
void
mf_sort_errors(struct tl_mf_error *v, size_t n)
{
	struct tl_mf_error t;
	size_t i, j;

	for (i = 1; i < n; i++) {
		t = v[i];
		for (j = i; j > 0 && (v[j - 1].line > t.line ||
		    (v[j - 1].line == t.line && v[j - 1].col > t.col)); j--)
			v[j] = v[j - 1];
		v[j] = t;
	}
}
