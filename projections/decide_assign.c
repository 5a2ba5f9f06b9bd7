/*
 * decide_assign.c - assignments, providers, and removing modules.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "core/vec.h"
#include "core/window.h"
#include "binder.h"
#include "decide_assign.h"
#include "decide_derive.h"
#include "decide_embedded.h"
#include "decide_instances.h"
#include "drivers/decl.h"
#include "events.h"
#include "exposure.h"
#include "grant.h"
#include "graph.h"
#include "rebind.h"
#include "rotation.h"

static int
valid_expose(const char *e)
{
	return strcmp(e, "local") == 0 || strcmp(e, "network") == 0 ||
	    strcmp(e, "public") == 0 || strcmp(e, "none") == 0;
}

/* The provider record module's provides: would give on node. */
static int
provider_body(struct tl_ctx *c, const char *module, const char *node,
    struct tl_body *b, size_t *ntypes)
{
	struct tl_rec m;
	struct tl_bnode prov;
	char k[TL_KEY_MAX];
	char id[TL_KEY_MAX];
	size_t i;
	int rc;

	*ntypes = 0;
	if ((rc = tl_key(k, "m/%s", module)) != 0 ||
	    (rc = tl_provider_of(c->t, &c->p, module, node, id)) != 0)
		return rc;
	if ((rc = tl_rec_get(c->t, c->p.graph, k, &m)) != 0)
		return rc;
	tl_body_str(b, TL_F_ID, id);
	tl_body_str(b, TL_F_MODULE, module);
	tl_body_str(b, TL_F_NODE, node);
	tl_body_arr(b, TL_F_TYPES);
	if (tl_bn_get(m.m, "provides", &prov) == 0) {
		for (i = 0; i < tl_bn_len(prov); i++) {
			struct tl_bnode e = tl_bn_at(prov, i);
			char type[64] = "", driver[64] = "", revoke[16] = "";
			char window[TL_WIN_SPEC_MAX + 1] = "";

			tl_bn_getstr(e, "type", type, sizeof(type));
			tl_bn_getstr(e, "driver", driver, sizeof(driver));
			tl_bn_getstr(e, "revoke", revoke, sizeof(revoke));
			tl_body_map(b, NULL);
			tl_body_str(b, TL_F_TYPE, type);
			tl_body_str(b, TL_F_DRIVER, driver);
			tl_body_str(b, TL_F_REVOKE, revoke);
			tl_body_u64(b, TL_F_MAX_AGE, tl_bn_getu64(e, "max_age",
			    0));
			if (tl_bn_getstr(e, "window", window,
			    sizeof(window)) == 0 && window[0] != '\0')
				tl_body_str(b, TL_F_WINDOW, window);
			tl_body_end(b);
			(*ntypes)++;
		}
	}
	tl_body_end(b);
	tl_rec_close(&m);
	return 0;
}

struct live {
	char	 first[TL_GRANT_ID_MAX + 1];
	size_t	 n;
};

static int
count_live(const struct tl_grant *g, void *arg)
{
	struct live *l = arg;

	/*
	 * Retained data still lives on the provider; dropped data does not,
	 * nor data on a node that is lost.
	 */
	if (strcmp(g->state, TL_GRANT_PURGED) == 0 ||
	    strcmp(g->state, TL_GRANT_LOST) == 0 ||
	    (strcmp(g->state, TL_GRANT_REVOKED) == 0 &&
	    strcmp(g->policy, "retain") != 0))
		return 0;
	if (l->n++ == 0)
		snprintf(l->first, sizeof(l->first), "%s", g->id);
	return 0;
}

/* Registers, updates or retires the provider of module on node. */
static int
provider_sync(struct tl_ctx *c, const char *module, const char *node,
    int gone)
{
	struct tl_body b;
	const void *enc;
	size_t len, ntypes = 0;
	char id[TL_KEY_MAX];
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	int rc, exists;

	/* A provider that moved here keeps its id (tally provider move). */
	if ((rc = tl_provider_of(c->t, &c->p, module, node, id)) == TL_EEXIST) {
		if (gone)
			return 0;	/* its provider is elsewhere */
		return tl_refuse(c, TL_EREFUSED, "provider id %s belongs to the "
		    "provider that moved off %s (tally provider move): %s "
		    "cannot provide on %s again under that id; move it back "
		    "instead (tally provider move %s %s)", id, node, module,
		    node, id, node);
	}
	if (rc != 0 ||
	    (rc = tl_key(k, "p/%s", id)) != 0 ||
	    (rc = tl_key(stream, "provider/%s", id)) != 0)
		return rc;
	exists = tl_rec_exists(c->t, c->p.graph, k);
	tl_body_init(&b);
	if (!gone && (rc = provider_body(c, module, node, &b, &ntypes)) != 0)
		goto out;
	if (gone || ntypes == 0) {
		struct live l = { "", 0 };

		if (!exists)
			goto out;
		tl_grant_each_of_provider(c->t, &c->p, id, count_live, &l);
		if (l.n > 0) {
			rc = tl_refuse(c, TL_EREFUSED, "provider %s still "
			    "serves %zu grant(s) (%s%s): remove their consumers "
			    "or move them (tally rebind … --migrate) first",
			    id, l.n, l.first, l.n > 1 ? ", …" : "");
			goto out;
		}
		tl_body_reset(&b);
		tl_body_str(&b, TL_F_ID, id);
		rc = tl_emit(c, TL_EV_PROVIDER_RETIRED, stream, &b, NULL);
		goto out;
	}
	if ((rc = tl_body_finish(&b, &enc, &len)) != 0)
		goto out;
	if (exists) {
		const void *v;
		size_t n;

		if (tl_kv_get(c->t, c->p.graph, k, strlen(k), &v, &n) == 0 &&
		    n == len + 8 && memcmp((const uint8_t *)v + 8, enc,
		    len) == 0)
			goto out;	/* unchanged */
	}
	rc = tl_emit_bytes(c, TL_EV_PROVIDER_REGISTERED, stream, enc, len, NULL);
out:
	tl_body_free(&b);
	return rc;
}

int
tl_provider_refresh(struct tl_ctx *c, const char *module)
{
	struct tl_nodelist nl;
	size_t i;
	int rc;

	if ((rc = tl_graph_module_nodes(c->t, &c->p, module, &nl)) != 0)
		return rc;
	for (i = 0; rc == 0 && i < nl.n; i++)
		rc = provider_sync(c, module, nl.v[i], 0);
	tl_nodelist_free(&nl);
	return rc;
}

struct names {
	char	(*v)[64];
	size_t	 n, cap;
};

static int
collect_name(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct names *nm = arg;

	(void)val;
	(void)vlen;
	if (tl_vec_grow(&nm->v, &nm->cap, nm->n + 1, sizeof(nm->v[0])) != 0)
		return ENOMEM;
	snprintf(nm->v[nm->n++], 64, "%s", rest);
	return 0;
}

struct dead_arg {
	struct tl_ctx	*c;
	const char	*module;
	const char	*node;
	int		 rc;
};

/*
 * A consumer back on a node where its grant's data is gone for good
 * (revoked with policy drop, or purged) gets a fresh grant from the same
 * binding.  Retained data is never handed back silently: status points
 * at tally restore instead.
 */
static int
reopen_one(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct dead_arg *da = arg;
	struct tl_rec v;
	struct tl_grant g;
	struct tl_rec b;
	char kind[16] = "", scope[16] = "", gkey[TL_KEY_MAX];
	char prov[130] = "", type[64] = "", resource[64] = "";
	struct tl_body body;
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	int rc;

	if (tl_rec_open(val, vlen, &v) != 0)
		return TL_ECORRUPT;
	tl_bn_getstr(v.m, "kind", kind, sizeof(kind));
	tl_bn_getstr(v.m, "scope", scope, sizeof(scope));
	tl_bn_getstr(v.m, "type", type, sizeof(type));
	tl_bn_getstr(v.m, "resource", resource, sizeof(resource));
	tl_rec_close(&v);
	if (strcmp(kind, "instantiation") != 0)
		return 0;
	if ((rc = tl_grant_key(gkey, da->module, rest,
	    strcmp(scope, "per-instance") == 0 ? da->node : NULL)) != 0)
		return rc;
	if (tl_grant_get(da->c->t, &da->c->p, gkey, &g, NULL) != 0)
		return 0;
	if (!(strcmp(g.state, TL_GRANT_PURGED) == 0 ||
	    (strcmp(g.state, TL_GRANT_REVOKED) == 0 &&
	    strcmp(g.policy, "drop") == 0)))
		return 0;
	if ((rc = tl_key(k, "b/%s", gkey)) != 0)
		return rc;
	if (tl_rec_get(da->c->t, da->c->p.graph, k, &b) != 0)
		return 0;
	tl_bn_getstr(b.m, "provider", prov, sizeof(prov));
	tl_rec_close(&b);
	if ((rc = tl_key(k, "p/%s", prov)) != 0)
		return rc;
	if (!tl_rec_exists(da->c->t, da->c->p.graph, k))
		return 0;	/* the provider went: status says so */
	if ((rc = tl_key(stream, "grant/%s", gkey)) != 0)
		return rc;
	tl_body_init(&body);
	tl_body_str(&body, TL_F_GRANT, gkey);
	tl_body_str(&body, TL_F_MODULE, da->module);
	tl_body_str(&body, TL_F_REQ, rest);
	tl_body_str(&body, TL_F_NODE, strcmp(scope, "per-instance") == 0 ?
	    da->node : "");
	tl_body_str(&body, TL_F_SCOPE, scope);
	tl_body_str(&body, TL_F_TYPE, type);
	tl_body_str(&body, TL_F_PROVIDER, prov);
	tl_body_str(&body, TL_F_RESOURCE, resource);
	rc = tl_emit(da->c, TL_EV_GRANT_REQUESTED, stream, &body, NULL);
	tl_body_free(&body);
	return rc;
}

static int
reopen_dead(struct tl_ctx *c, const char *module, const char *node)
{
	struct dead_arg da = { c, module, node, 0 };
	struct names reqs = { NULL, 0, 0 };
	char k[TL_KEY_MAX];
	size_t i;
	int rc;

	/* Collect the names first: emitting writes the grants table. */
	if ((rc = tl_key(k, "r/%s/", module)) != 0 ||
	    (rc = tl_rec_scan(c->t, c->p.graph, k, collect_name, &reqs)) != 0)
		goto out;
	for (i = 0; rc == 0 && i < reqs.n; i++) {
		const void *v;
		size_t n;

		if ((rc = tl_key(k, "r/%s/%s", module, reqs.v[i])) != 0 ||
		    (rc = tl_kv_get(c->t, c->p.graph, k, strlen(k), &v,
		    &n)) != 0)
			break;
		/* Copied: the emit below may move the page v points into. */
		{
			uint8_t *copy = malloc(n);

			if (copy == NULL) {
				rc = ENOMEM;
				break;
			}
			memcpy(copy, v, n);
			rc = reopen_one(reqs.v[i], copy, n, &da);
			free(copy);
		}
	}
out:
	free(reqs.v);
	return rc;
}

int
tl_dec_reopen_wanted(struct tl_ctx *c, const char *gkey)
{
	struct dead_arg da = { c, NULL, NULL, 0 };
	struct tl_nodelist nl = { NULL, 0, 0 };
	struct tl_grant g;
	uint8_t *copy = NULL;
	const void *v;
	size_t i, n;
	char k[TL_KEY_MAX];
	int rc, wanted = 0;

	if ((rc = tl_grant_get(c->t, &c->p, gkey, &g, NULL)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	if ((rc = tl_key(k, "r/%s/%s", g.module, g.req)) != 0)
		return rc;
	if (tl_kv_get(c->t, c->p.graph, k, strlen(k), &v, &n) != 0)
		return 0;	/* the requirement went: nothing wants it */
	/* Who installs the requirement's part now, not when it was asked. */
	if ((rc = tl_graph_req_nodes(c->t, &c->p, g.module, g.req, &nl)) != 0)
		return rc;
	for (i = 0; i < nl.n && !wanted; i++)
		wanted = g.node[0] == '\0' || strcmp(nl.v[i], g.node) == 0;
	tl_nodelist_free(&nl);
	if (!wanted)
		return 0;
	/* Copied: the emit may move the page v points into. */
	if ((copy = malloc(n)) == NULL)
		return ENOMEM;
	memcpy(copy, v, n);
	da.module = g.module;
	da.node = g.node;
	rc = reopen_one(g.req, copy, n, &da);
	free(copy);
	return rc;
}

/* One setting of an assignment as it will be: borrowed bytes. */
struct mset {
	char		 key[64];
	const char	*value;		/* NULL: a secret */
	size_t		 vlen;
	const void	*secret;
	size_t		 slen;
};

#define MSET_MAX	64

struct merge {
	struct mset	 v[MSET_MAX];
	size_t		 n;
	char		*changes;	/* may be NULL */
	size_t		 cap, used;
};

static void
change(struct merge *mg, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
change(struct merge *mg, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (mg->changes == NULL || mg->used >= mg->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(mg->changes + mg->used, mg->cap - mg->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		mg->used += (size_t)n < mg->cap - mg->used ? (size_t)n :
		    mg->cap - mg->used - 1;
}

static struct mset *
mset_find(struct merge *mg, const char *key)
{
	size_t i;

	for (i = 0; i < mg->n; i++)
		if (strcmp(mg->v[i].key, key) == 0)
			return &mg->v[i];
	return NULL;
}

/* The old assignment's settings (sec 0) or secrets (sec 1), in order. */
static int
mset_load(struct merge *mg, struct tl_bnode map, int sec)
{
	struct tl_bnode kn, vn;
	const char *ks;
	size_t i, kl;

	for (i = 0; i < tl_bn_len(map); i++) {
		struct mset *e;

		if (tl_bn_entry(map, i, &kn, &vn) != 0 ||
		    tl_bn_str(kn, &ks, &kl) != 0 || kl >= sizeof(e->key))
			return TL_EMALFORMED;
		if (mg->n == MSET_MAX)
			return TL_ETOOBIG;
		e = &mg->v[mg->n];
		memset(e, 0, sizeof(*e));
		memcpy(e->key, ks, kl);
		if (sec ? tl_bn_secret(vn, &e->secret, &e->slen) != 0 :
		    tl_bn_str(vn, &e->value, &e->vlen) != 0)
			return TL_EMALFORMED;
		mg->n++;
	}
	return 0;
}

/* The settings tables of the drivers module's provides: name. */
struct decl {
	const struct tl_drv_setting *tab[8];
	const char	*driver[8];
	size_t		 n;
	char		 derived[16][64];	/* provides: settings: keys */
	size_t		 nderived;
};

static void
decl_load(struct tl_bnode m, struct decl *d)
{
	struct tl_bnode prov;
	size_t i, j;

	d->n = 0;
	d->nderived = 0;
	if (tl_bn_get(m, "provides", &prov) != 0)
		return;
	for (i = 0; i < tl_bn_len(prov) && d->n < 8; i++) {
		char driver[64] = "";
		const struct tl_drv_decl *dd;
		struct tl_bnode sets, kn, vn;
		const char *ks;
		size_t kl;

		if (tl_bn_get(tl_bn_at(prov, i), "settings", &sets) == 0)
			for (j = 0; j < tl_bn_len(sets) && d->nderived < 16; j++)
				if (tl_bn_entry(sets, j, &kn, &vn) == 0 &&
				    tl_bn_str(kn, &ks, &kl) == 0 && kl < 64) {
					memcpy(d->derived[d->nderived], ks, kl);
					d->derived[d->nderived++][kl] = '\0';
				}

		tl_bn_getstr(tl_bn_at(prov, i), "driver", driver,
		    sizeof(driver));
		if ((dd = tl_drv_decl_find(driver)) == NULL ||
		    dd->settings == NULL)
			continue;
		for (j = 0; j < d->n; j++)
			if (d->tab[j] == dd->settings)
				break;
		if (j == d->n) {
			d->driver[d->n] = dd->name;
			d->tab[d->n++] = dd->settings;
		}
	}
}

static const struct tl_drv_setting *
decl_find(const struct decl *d, const char *key)
{
	const struct tl_drv_setting *s;
	size_t i;

	for (i = 0; i < d->n; i++)
		if ((s = tl_drv_setting_find(d->tab[i], key)) != NULL)
			return s;
	return NULL;
}

static int
refuse_unknown(struct tl_ctx *c, const struct decl *d, const char *module,
    const char *key)
{
	char known[600] = "";
	size_t i, off = 0;
	const struct tl_drv_setting *s;

	for (i = 0; i < d->n; i++)
		for (s = d->tab[i]; s->name != NULL; s++)
			if (off < sizeof(known))
				off += (size_t)snprintf(known + off,
				    sizeof(known) - off, "%s%s%s", off ? ", " :
				    "", s->name, s->secret ? " (--secret)" :
				    "");
	return tl_refuse(c, TL_EINVAL, "unknown setting '%s' for %s (driver "
	    "%s); known settings: %s", key, module, d->driver[0], known);
}

/*
 * Checks one given setting against the declarations (a provider) or
 * only for control characters (any other module: its settings are its
 * own, recorded as given).
 */
static int
check_setting(struct tl_ctx *c, const struct decl *d, const char *module,
    const struct tl_setting *st)
{
	static const struct tl_drv_setting any = { "", "", 0, TL_DRV_STRING,
	    "" };
	const struct tl_drv_setting *s;
	struct tl_drv_setting named;
	char why[TL_WHY_MAX];

	size_t i;

	for (i = 0; d->n != 0 && i < d->nderived; i++)
		if (strcmp(d->derived[i], st->key) == 0 &&
		    decl_find(d, st->key) == NULL)
			break;
	if (d->n == 0 || i < d->nderived) {
		/* A derived setting the driver does not read: the operator's wins. */
		named = any;
		named.name = st->key;
		named.secret = st->secret != NULL;
		s = &named;
	} else if ((s = decl_find(d, st->key)) == NULL)
		return refuse_unknown(c, d, module, st->key);
	if (st->value == NULL && st->secret == NULL)
		return 0;	/* --unset */
	if (d->n != 0 && s->secret && st->secret == NULL)
		return tl_refuse(c, TL_EINVAL, "%s is a secret: give it with "
		    "--secret %s (read from standard input), never --set",
		    st->key, st->key);
	if (d->n != 0 && !s->secret && st->secret != NULL)
		return tl_refuse(c, TL_EINVAL, "%s is not a secret: give it "
		    "with --set %s=VALUE", st->key, st->key);
	if (st->secret != NULL)
		return 0;	/* the CLI checked the plaintext */
	if (tl_drv_setting_check(s, st->value, why) != 0)
		return tl_refuse(c, TL_EINVAL, "%s", why);
	return 0;
}

int
tl_dec_settings_check(struct tl_ctx *c, const char *module,
    const struct tl_setting *set, size_t nset)
{
	struct tl_rec m;
	struct decl d;
	char k[TL_KEY_MAX];
	size_t i;
	int rc;

	if ((rc = tl_key(k, "m/%s", module)) != 0 ||
	    (rc = tl_rec_get(c->t, c->p.graph, k, &m)) != 0)
		return rc;
	decl_load(m.m, &d);
	tl_rec_close(&m);
	for (i = 0; i < nset; i++)
		if ((rc = check_setting(c, &d, module, &set[i])) != 0)
			return rc;
	return 0;
}

/*
 * The settings as they will be, taken together by each driver's
 * settings_check (the rule no one setting's kind states: the directory's
 * gid-base with gid-range, the CA's key type), so that what a session
 * would refuse is refused now, before anything is recorded.  Secrets
 * are not among them (the CLI checked their plaintext).
 */
static int
together(struct tl_ctx *c, const struct merge *mg, const struct decl *d,
    const char *module)
{
	const char *sv[2 * MSET_MAX + 1];
	char *vals[MSET_MAX], why[TL_WHY_MAX] = "";
	const struct tl_drv_decl *dd;
	size_t i, n = 0;
	int rc = 0;

	for (i = 0; i < mg->n; i++) {
		if (mg->v[i].value == NULL)
			continue;
		if ((vals[n] = strndup(mg->v[i].value, mg->v[i].vlen)) ==
		    NULL) {
			rc = ENOMEM;
			goto out;
		}
		sv[2 * n] = mg->v[i].key;
		sv[2 * n + 1] = vals[n];
		n++;
	}
	sv[2 * n] = NULL;
	for (i = 0; i < d->n && rc == 0; i++)
		if ((dd = tl_drv_decl_find(d->driver[i])) != NULL &&
		    dd->settings_check != NULL &&
		    dd->settings_check(sv, why) != 0)
			rc = tl_refuse(c, TL_EINVAL, "%s (driver %s): %s",
			    module, dd->name, why[0] ? why : "its settings are "
			    "refused taken together");
out:
	while (n > 0)
		free(vals[--n]);
	return rc;
}

/* old settings, changed by set; says what changed. */
static int
merge(struct tl_ctx *c, struct merge *mg, const struct decl *d,
    const char *module, const struct tl_setting *set, size_t nset)
{
	size_t i, j;
	int rc;

	for (i = 0; i < nset; i++) {
		struct mset *e;

		if ((rc = check_setting(c, d, module, &set[i])) != 0)
			return rc;
		for (j = 0; j < i; j++)
			if (strcmp(set[j].key, set[i].key) == 0)
				return tl_refuse(c, TL_EINVAL, "%s is given "
				    "twice", set[i].key);
		e = mset_find(mg, set[i].key);
		if (set[i].value == NULL && set[i].secret == NULL) {
			if (e == NULL)
				return tl_refuse(c, TL_EINVAL, "--unset %s: "
				    "%s has no such setting", set[i].key,
				    module);
			change(mg, "  %s: removed\n", e->key);
			memmove(e, e + 1, (size_t)(&mg->v[mg->n] - (e + 1)) *
			    sizeof(*e));
			mg->n--;
			continue;
		}
		if (e == NULL) {
			if (mg->n == MSET_MAX)
				return tl_refuse(c, TL_ETOOBIG, "more than %d "
				    "settings", MSET_MAX);
			e = &mg->v[mg->n++];
			memset(e, 0, sizeof(*e));
			snprintf(e->key, sizeof(e->key), "%s", set[i].key);
			if (set[i].secret != NULL)
				change(mg, "  %s: set (secret)\n", e->key);
			else if (strchr(set[i].value, '\n') != NULL)
				change(mg, "  %s: set (%zu bytes of PEM)\n",
				    e->key, strlen(set[i].value));
			else
				change(mg, "  %s: set to %s\n", e->key,
				    set[i].value);
		} else if (set[i].secret != NULL)
			change(mg, "  %s: replaced (secret)\n", e->key);
		else if (e->value == NULL || e->vlen != strlen(set[i].value) ||
		    memcmp(e->value, set[i].value, e->vlen) != 0) {
			/* A PEM (a certificate) is many lines: not shown. */
			if (strchr(set[i].value, '\n') != NULL)
				change(mg, "  %s: replaced (%zu bytes of "
				    "PEM)\n", e->key, strlen(set[i].value));
			else
				change(mg, "  %s: %.*s -> %s\n", e->key,
				    e->value ? (int)e->vlen : 8, e->value ?
				    e->value : "(secret)", set[i].value);
		}
		e->value = set[i].value;
		e->vlen = set[i].value ? strlen(set[i].value) : 0;
		e->secret = set[i].secret;
		e->slen = set[i].secret_len;
	}
	/* Required settings (a declaration without a default) are there. */
	for (i = 0; i < d->n; i++) {
		const struct tl_drv_setting *s;

		for (s = d->tab[i]; s->name != NULL; s++)
			if (s->dflt == NULL && mset_find(mg, s->name) == NULL)
				return tl_refuse(c, TL_EINVAL, "%s needs the "
				    "setting %s (%s)", module, s->name,
				    s->description);
	}
	return together(c, mg, d, module);
}

/* The parts an assignment installs: n == 0 with all set is every one. */
struct partset {
	char	 v[16][64];
	size_t	 n;
	int	 all;
};

static int
partset_has(const struct partset *ps, const char *part)
{
	size_t i;

	if (ps->all)
		return 1;
	for (i = 0; i < ps->n; i++)
		if (strcmp(ps->v[i], part) == 0)
			return 1;
	return 0;
}

/* The names of arr (a record's parts[]) into ps, in their order. */
static void
partset_load(struct tl_bnode arr, struct partset *ps)
{
	size_t i;

	ps->n = 0;
	ps->all = 0;
	for (i = 0; i < tl_bn_len(arr) && ps->n < 16; i++) {
		ps->v[ps->n][0] = '\0';
		tl_bn_strcpy(tl_bn_at(arr, i), ps->v[ps->n], 64);
		ps->n++;
	}
}

static void
partset_say(const struct partset *ps, char *buf, size_t cap)
{
	size_t i, off = 0;

	buf[0] = '\0';
	if (ps->all) {
		snprintf(buf, cap, "all");
		return;
	}
	for (i = 0; i < ps->n && off < cap; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%s",
		    i ? "," : "", ps->v[i]);
}

static int
cmp_part(const void *a, const void *b)
{
	return strcmp(a, b);
}

/*
 * --parts LIST (comma-separated, or "all") against the module's parts[]
 * into ps, sorted and each once; refuses a module without parts and a
 * name it does not declare, naming those it does.
 */
static int
parts_parse(struct tl_ctx *c, const char *module, struct tl_bnode mrec,
    const char *list, struct partset *ps)
{
	struct tl_bnode arr;
	struct partset decl;
	char known[600];
	const char *p = list, *e;
	size_t n, i;

	memset(ps, 0, sizeof(*ps));
	if (tl_bn_get(mrec, "parts", &arr) != 0 || tl_bn_len(arr) == 0)
		return tl_refuse(c, TL_EINVAL, "--parts %s: %s declares no "
		    "parts (parts: in its manifest)", list, module);
	partset_load(arr, &decl);
	partset_say(&decl, known, sizeof(known));
	if (strcmp(list, "all") == 0) {
		ps->all = 1;
		return 0;
	}
	for (;;) {
		e = strchr(p, ',');
		n = e != NULL ? (size_t)(e - p) : strlen(p);
		if (n == 0 || n >= 64)
			return tl_refuse(c, TL_EINVAL, "--parts %s: expected "
			    "PART[,PART]... of %s, or all", list, known);
		for (i = 0; i < decl.n; i++)
			if (strlen(decl.v[i]) == n &&
			    memcmp(decl.v[i], p, n) == 0)
				break;
		if (i == decl.n)
			return tl_refuse(c, TL_EINVAL, "--parts %s: %s has no "
			    "part %.*s; its parts are %s", list, module, (int)n,
			    p, known);
		if (!partset_has(ps, decl.v[i]) && ps->n < 16)
			snprintf(ps->v[ps->n++], 64, "%s", decl.v[i]);
		if (e == NULL)
			break;
		p = e + 1;
	}
	qsort(ps->v, ps->n, sizeof(ps->v[0]), cmp_part);
	return 0;
}

static void
merged_body(struct tl_body *b, const char *module, const char *node,
    const char *expose, const struct merge *mg, const struct partset *ps)
{
	size_t i;

	tl_body_str(b, TL_F_MODULE, module);
	tl_body_str(b, TL_F_NODE, node);
	tl_body_str(b, TL_F_EXPOSE, expose);
	tl_body_map(b, TL_F_SETTINGS);
	for (i = 0; i < mg->n; i++)
		if (mg->v[i].secret == NULL)
			tl_body_strn(b, mg->v[i].key, mg->v[i].value,
			    mg->v[i].vlen);
	tl_body_end(b);
	tl_body_map(b, TL_F_SECRETS);
	for (i = 0; i < mg->n; i++)
		if (mg->v[i].secret != NULL)
			tl_body_secret(b, mg->v[i].key, mg->v[i].secret,
			    mg->v[i].slen);
	tl_body_end(b);
	/* Absent is every part: an assignment from before parts reads so. */
	if (!ps->all) {
		tl_body_arr(b, TL_F_PARTS);
		for (i = 0; i < ps->n; i++)
			tl_body_str(b, NULL, ps->v[i]);
		tl_body_end(b);
	}
}

struct served {
	struct tl_ctx	*c;
	int		 rc;
};

/* A live grant whose provider's exposure no longer serves its consumer. */
static int
check_served(const struct tl_grant *g, void *arg)
{
	struct served *sv = arg;
	char why[TL_WHY_MAX];

	if (strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_REVOKING) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0 || g->provider[0] == '\0')
		return 0;
	if (tl_exposure_serves(sv->c->t, &sv->c->p, g->provider, g->module,
	    g->node, why))
		return 0;
	sv->rc = tl_refuse(sv->c, TL_EREFUSED, "grant %s would no longer be "
	    "served: %s (move it first: tally rebind %s PROVIDER --migrate)",
	    g->id, why, g->id);
	return 1;
}

/*
 * After module@node changed: with a new exposure (served), every grant
 * it serves is still served; as a new assignment (held), every grant
 * the module holds is still served on its new node; or the command is
 * refused.  Only what changed is checked, so a binding made before
 * exposure was honoured does not block an unrelated --set.
 */
static int
exposure_holds(struct tl_ctx *c, const char *module, const char *node,
    int served, int held)
{
	struct served sv = { c, 0 };
	char id[TL_KEY_MAX];
	int rc;

	if (served &&
	    (rc = tl_provider_of(c->t, &c->p, module, node, id)) == 0 &&
	    (rc = tl_grant_each_of_provider(c->t, &c->p, id, check_served,
	    &sv)) != 0 && rc != 1)
		return rc;
	if (sv.rc != 0 || !held)
		return sv.rc;
	if ((rc = tl_grant_each_of_module(c->t, &c->p, module, check_served,
	    &sv)) != 0 && rc != 1)
		return rc;
	return sv.rc;
}

static int parts_left(struct tl_ctx *c, const char *module,
    const char *node, const struct partset *was, const struct partset *now);

int
tl_dec_assign(struct tl_ctx *c, const char *module, const char *node,
    const struct tl_assign *o)
{
	const char *expose = o->expose, *parts = o->parts;
	const struct tl_setting *set = o->set;
	size_t nset = o->nset, cap = o->cap;
	char *changes = o->changes;
	struct partset was = { .all = 1 }, now = { .all = 1 };
	struct tl_body b;
	struct tl_rec m = { 0 }, old = { 0 };
	struct tl_bnode n;
	struct merge *mg = NULL;
	struct decl d;
	const void *enc;
	size_t len;
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	char oldexpose[16] = "";
	uint64_t seq;
	int rc, exists, newexpose = 0;

	if (changes != NULL && cap > 0)
		changes[0] = '\0';
	if (expose != NULL && !valid_expose(expose))
		return tl_refuse(c, TL_EINVAL, "--expose %s: expected local, "
		    "network, public or none", expose);
	if ((rc = tl_key(k, "m/%s", module)) != 0)
		return rc;
	if ((rc = tl_rec_get(c->t, c->p.graph, k, &m)) == TL_ENOTFOUND)
		return tl_refuse(c, TL_ENOTFOUND, "no module %s (tally apply "
		    "its manifest first)", module);
	if (rc != 0)
		return rc;
	decl_load(m.m, &d);
	tl_body_init(&b);
	if (parts != NULL && (rc = parts_parse(c, module, m.m, parts,
	    &now)) != 0)
		goto out;
	if ((rc = tl_key(k, "n/%s", node)) != 0)
		goto out;
	if (!tl_rec_exists(c->t, c->p.graph, k)) {
		rc = tl_refuse(c, TL_ENOTFOUND, "no node %s (tally node add "
		    "%s --routable-name HOST)", node, node);
		goto out;
	}
	if ((rc = tl_dec_node_live(c, node)) != 0)
		goto out;
	if ((rc = tl_key(k, "a/%s@%s", module, node)) != 0 ||
	    (rc = tl_key(stream, "assignment/%s@%s", module, node)) != 0)
		goto out;
	if ((mg = calloc(1, sizeof(*mg))) == NULL) {
		rc = ENOMEM;
		goto out;
	}
	mg->changes = changes;
	mg->cap = changes != NULL ? cap : 0;
	rc = tl_rec_get(c->t, c->p.graph, k, &old);
	exists = rc == 0;
	if (rc != 0 && rc != TL_ENOTFOUND)
		goto out;
	if (exists) {
		tl_bn_getstr(old.m, "expose", oldexpose, sizeof(oldexpose));
		if (tl_bn_get(old.m, "parts", &n) == 0)
			partset_load(n, &was);
		if (parts == NULL)
			now = was;	/* kept, as the rest is */
		else {
			char a[400], z[400];

			partset_say(&was, a, sizeof(a));
			partset_say(&now, z, sizeof(z));
			if (strcmp(a, z) != 0)
				change(mg, "  parts: %s -> %s\n", a, z);
		}
		if ((tl_bn_get(old.m, "settings", &n) == 0 &&
		    (rc = mset_load(mg, n, 0)) != 0) ||
		    (tl_bn_get(old.m, "secrets", &n) == 0 &&
		    (rc = mset_load(mg, n, 1)) != 0))
			goto out;
	}
	if (!exists && (rc = tl_dec_instances_check(c, module, node,
	    NULL)) != 0)
		goto out;
	if (expose == NULL)
		expose = exists && oldexpose[0] ? oldexpose : "local";
	else if (exists && strcmp(expose, oldexpose) != 0) {
		change(mg, "  exposure: %s -> %s\n", oldexpose, expose);
		newexpose = 1;
	}
	if ((rc = merge(c, mg, &d, module, set, nset)) != 0)
		goto out;

	merged_body(&b, module, node, expose, mg, &now);
	if ((rc = tl_body_finish(&b, &enc, &len)) != 0)
		goto out;
	/* The old record's bytes are not needed past here (emits move pages). */
	tl_rec_close(&old);
	tl_rec_close(&m);
	if (exists) {
		const void *v;
		size_t vn;

		/*
		 * Kept secrets keep their ciphertext, so an identical record
		 * is no change; a secret given again is a new ciphertext, and
		 * is one.
		 */
		if (tl_kv_get(c->t, c->p.graph, k, strlen(k), &v, &vn) == 0 &&
		    vn == len + 8 && memcmp((const uint8_t *)v + 8, enc,
		    len) == 0)
			goto out;
		rc = tl_emit_bytes(c, TL_EV_ASSIGN_CONFIGURED, stream, enc, len,
		    &seq);
	} else
		rc = tl_emit_bytes(c, TL_EV_ASSIGN_CREATED, stream, enc, len,
		    &seq);
	if (rc != 0)
		goto out;
	c->cause = seq;
	if ((rc = provider_sync(c, module, node, 0)) != 0)
		goto out;
	if ((rc = exposure_holds(c, module, node, newexpose, !exists)) != 0)
		goto out;
	if (exists && (rc = parts_left(c, module, node, &was, &now)) != 0)
		goto out;
	if ((rc = tl_dec_derive(c, module, node)) != 0)
		goto out;
	if ((rc = tl_binder_run_module(c, module)) != 0 ||
	    (rc = tl_dec_embedded_request(c, module, node)) != 0)
		goto out;
	rc = reopen_dead(c, module, node);
out:
	free(mg);
	tl_rec_close(&old);
	tl_rec_close(&m);
	tl_body_free(&b);
	return rc;
}

struct revoke_arg {
	struct tl_ctx	*c;
	const char	*node;		/* only this instance; NULL: all */
	const char	*reason;
	int		 rc;
};

static int
revoke_one(const struct tl_grant *g, void *arg)
{
	struct revoke_arg *ra = arg;
	struct tl_body b;
	char stream[TL_KEY_MAX];
	int rc;

	if (strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_REVOKING) == 0 ||
	    strcmp(g->state, TL_GRANT_LOST) == 0)
		return 0;	/* a lost grant has nothing left to revoke */
	if (ra->node != NULL && strcmp(g->node, ra->node) != 0)
		return 0;
	if ((rc = tl_key(stream, "grant/%s", g->id)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, g->id);
	tl_body_str(&b, TL_F_REASON, ra->reason);
	rc = tl_emit(ra->c, TL_EV_REVOCATION_REQUESTED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

struct grantlist {
	struct tl_grant	*v;
	size_t		 n, cap;
};

static int
collect_grant(const struct tl_grant *g, void *arg)
{
	struct grantlist *gl = arg;

	if (tl_vec_grow(&gl->v, &gl->cap, gl->n + 1, sizeof(gl->v[0])) != 0)
		return ENOMEM;
	gl->v[gl->n++] = *g;
	return 0;
}

/* Requests revocation of module's grants (node's instances, or all). */
static int
revoke_grants(struct tl_ctx *c, const char *module, const char *node,
    const char *reason)
{
	struct grantlist gl = { NULL, 0, 0 };
	struct revoke_arg ra = { c, node, reason, 0 };
	size_t i;
	int rc;

	/* Collect first: emitting rewrites the index being scanned. */
	rc = tl_grant_each_of_module(c->t, &c->p, module, collect_grant, &gl);
	for (i = 0; rc == 0 && i < gl.n; i++)
		rc = revoke_one(&gl.v[i], &ra);
	free(gl.v);
	return rc;
}

static int
unassign(struct tl_ctx *c, const char *module, const char *node,
    int whole_module, uint64_t *removed)
{
	struct tl_body b;
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = provider_sync(c, module, node, 1)) != 0)
		return rc;
	if ((rc = revoke_grants(c, module, whole_module ? NULL : node,
	    whole_module ? "module removed" : "assignment removed")) != 0)
		return rc;
	if ((rc = tl_key(stream, "assignment/%s@%s", module, node)) != 0)
		return rc;
	(void)k;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_MODULE, module);
	tl_body_str(&b, TL_F_NODE, node);
	rc = tl_emit(c, TL_EV_ASSIGN_REMOVED, stream, &b, removed);
	tl_body_free(&b);
	return rc;
}

/*
 * rotation.started of g for the holders that remain, holder having left
 * (with c->cause what made it leave).
 */
static int
holder_left(struct tl_ctx *c, const struct tl_grant *g, const char *holder)
{
	struct tl_body b;
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(stream, "grant/%s", g->id)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, g->id);
	tl_body_u64(&b, TL_F_FROM, g->version);
	tl_body_u64(&b, TL_F_TO, g->version + 1);
	tl_body_u64(&b, TL_F_DEADLINE_NS, 0);
	tl_body_str(&b, TL_F_REASON, "holder-left");
	tl_body_str(&b, TL_F_HOLDER, holder);
	rc = tl_emit(c, TL_EV_ROT_STARTED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

/*
 * A holder left the module's shared grants: the holders that remain
 * get a new credential (the one that left still knows the password),
 * rotation.started with reason holder-left, the holder, and the
 * assignment.removed as its cause.  A grant already rotating or moving
 * is left to that saga; one not provisioned has nothing to rotate.
 */
static int
rotate_for_leaver(struct tl_ctx *c, const char *module, const char *node,
    uint64_t removed)
{
	struct grantlist gl = { NULL, 0, 0 };
	struct tl_nodelist nl;
	struct tl_rotation r;
	struct tl_rebind mv;
	char holder[140];
	size_t i, left;
	int rc;

	if ((rc = tl_graph_module_nodes(c->t, &c->p, module, &nl)) != 0)
		return rc;
	left = nl.n;
	tl_nodelist_free(&nl);
	if (left == 0)
		return 0;	/* no holder remains: revocation's business */
	rc = tl_grant_each_of_module(c->t, &c->p, module, collect_grant, &gl);
	snprintf(holder, sizeof(holder), "%s@%s", module, node);
	for (i = 0; rc == 0 && i < gl.n; i++) {
		const struct tl_grant *g = &gl.v[i];

		if (g->node[0] != '\0' || strcmp(g->state,
		    TL_GRANT_PROVISIONED) != 0 ||
		    tl_rot_get(c->t, &c->p, g->id, &r) == 0 ||
		    tl_mv_get(c->t, &c->p, g->id, &mv) == 0)
			continue;
		c->cause = removed;
		rc = holder_left(c, g, holder);
	}
	free(gl.v);
	return rc;
}

/*
 * credential.withdrawn: holder (on node) is to drop what it was
 * delivered of g, the version it had; nothing when it was delivered
 * nothing (or was withdrawn already).
 */
static int
withdraw_holder(struct tl_ctx *c, const struct tl_grant *g,
    const char *holder, const char *node)
{
	struct tl_body b;
	char stream[TL_KEY_MAX];
	uint64_t ver = tl_grant_delivered(c->t, &c->p, g->id, holder);
	int rc;

	if (ver == 0)
		return 0;
	if ((rc = tl_key(stream, "grant/%s", g->id)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, g->id);
	tl_body_str(&b, TL_F_HOLDER, holder);
	tl_body_str(&b, TL_F_NODE, node);
	tl_body_u64(&b, TL_F_VERSION, ver);
	rc = tl_emit(c, TL_EV_CRED_WITHDRAWN, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

/*
 * module@node no longer installs some parts (was, now): what only they
 * needed is left.  A per-instance grant of such a part's requirement is
 * revoked; a shared one is revoked when no assignment installs the
 * part any more, and otherwise this holder left it: the holders that
 * remain get a new credential (rotation.started, holder-left), as when
 * an assignment is removed.
 */
static int
parts_left(struct tl_ctx *c, const char *module, const char *node,
    const struct partset *was, const struct partset *now)
{
	struct grantlist gl = { NULL, 0, 0 };
	struct tl_nodelist nl;
	struct tl_rotation r;
	struct tl_rebind mv;
	char holder[140], part[64], why[TL_WHY_MAX];
	uint64_t cause = c->cause;
	size_t i, left;
	int rc;

	if (now->all || (!was->all && was->n == 0))
		return 0;
	rc = tl_grant_each_of_module(c->t, &c->p, module, collect_grant, &gl);
	snprintf(holder, sizeof(holder), "%s@%s", module, node);
	for (i = 0; rc == 0 && i < gl.n; i++) {
		const struct tl_grant *g = &gl.v[i];

		if ((rc = tl_graph_req_part(c->t, &c->p, module, g->req,
		    part)) != 0)
			break;
		if (part[0] == '\0' || !partset_has(was, part) ||
		    partset_has(now, part))
			continue;
		if (g->node[0] != '\0' && strcmp(g->node, node) != 0)
			continue;
		if ((rc = tl_graph_req_nodes(c->t, &c->p, module, g->req,
		    &nl)) != 0)
			break;
		left = nl.n;
		tl_nodelist_free(&nl);
		if (g->node[0] != '\0' || left == 0) {
			struct revoke_arg ra = { c, NULL, why, 0 };

			snprintf(why, sizeof(why), "part %s no longer "
			    "installed on %s", part, node);
			if ((rc = revoke_one(g, &ra)) != 0)
				break;
			continue;
		}
		/*
		 * The assignment stays, so no assignment.removed tells its
		 * node: the values it was delivered are withdrawn from it.
		 */
		if ((rc = withdraw_holder(c, g, holder, node)) != 0)
			break;
		if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0 ||
		    tl_rot_get(c->t, &c->p, g->id, &r) == 0 ||
		    tl_mv_get(c->t, &c->p, g->id, &mv) == 0)
			continue;
		rc = holder_left(c, g, holder);
		c->cause = cause;
	}
	free(gl.v);
	return rc;
}

int
tl_dec_unassign(struct tl_ctx *c, const char *module, const char *node)
{
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "a/%s@%s", module, node)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "%s is not assigned to %s",
		    module, node);
	uint64_t removed = 0;

	if ((rc = unassign(c, module, node, 0, &removed)) != 0)
		return rc;
	if ((rc = rotate_for_leaver(c, module, node, removed)) != 0)
		return rc;
	return tl_binder_run(c, NULL);
}

int
tl_dec_remove(struct tl_ctx *c, const char *module)
{
	struct tl_nodelist nl;
	struct names reqs = { NULL, 0, 0 };
	struct tl_body b;
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	size_t i;
	int rc;

	if ((rc = tl_key(k, "m/%s", module)) != 0 ||
	    (rc = tl_key(stream, "module/%s", module)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "no module %s", module);
	if ((rc = tl_graph_module_nodes(c->t, &c->p, module, &nl)) != 0)
		return rc;
	for (i = 0; rc == 0 && i < nl.n; i++)
		rc = unassign(c, module, nl.v[i], 1, NULL);
	tl_nodelist_free(&nl);
	if (rc != 0)
		return rc;
	/* Shared grants of a module with no assignment left. */
	if ((rc = revoke_grants(c, module, NULL, "module removed")) != 0)
		return rc;
	if ((rc = tl_key(k, "r/%s/", module)) != 0 ||
	    (rc = tl_rec_scan(c->t, c->p.graph, k, collect_name, &reqs)) != 0)
		goto out;
	for (i = 0; rc == 0 && i < reqs.n; i++) {
		tl_body_init(&b);
		tl_body_str(&b, TL_F_MODULE, module);
		tl_body_str(&b, TL_F_NAME, reqs.v[i]);
		rc = tl_emit(c, TL_EV_REQ_WITHDRAWN, stream, &b, NULL);
		tl_body_free(&b);
	}
	if (rc != 0)
		goto out;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_NAME, module);
	rc = tl_emit(c, TL_EV_MODULE_REMOVED, stream, &b, NULL);
	tl_body_free(&b);
	if (rc == 0)
		rc = tl_binder_run(c, NULL);
out:
	free(reqs.v);
	return rc;
}

int
tl_dec_remove_hold(struct tl_ctx *c, const char *module, const char *what)
{
	char k[TL_KEY_MAX], stream[TL_KEY_MAX];
	struct tl_body b;
	int rc;

	if ((rc = tl_key(k, "m/%s", module)) != 0 ||
	    (rc = tl_key(stream, "module/%s", module)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "no module %s", module);
	tl_body_init(&b);
	tl_body_str(&b, TL_F_MODULE, module);
	tl_body_str(&b, TL_F_WHAT, what);
	rc = tl_emit(c, TL_EV_REMOVAL_HELD, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

int
tl_dec_remove_cancel(struct tl_ctx *c, const char *module)
{
	char k[TL_KEY_MAX], stream[TL_KEY_MAX];
	struct tl_body b;
	int rc;

	if ((rc = tl_key(k, "rh/%s", module)) != 0 ||
	    (rc = tl_key(stream, "module/%s", module)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "no removal of %s is held",
		    module);
	tl_body_init(&b);
	tl_body_str(&b, TL_F_MODULE, module);
	rc = tl_emit(c, TL_EV_REMOVAL_CANCELLED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

/* ---- a node that is gone for good (tally node lost) ---- */

int
tl_dec_node_live(struct tl_ctx *c, const char *node)
{
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "nl/%s", node)) != 0)
		return rc;
	if (tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_EREFUSED, "node %s is lost (tally node "
		    "lost): nothing is placed on it again; tally node rm %s "
		    "removes it", node, node);
	return 0;
}

/* A list of names, joined into text for a refusal. */
struct said {
	char	 text[700];
	size_t	 n, off;
};

static void
said_add(struct said *sd, const char *name)
{
	if (sd->off < sizeof(sd->text))
		sd->off += (size_t)snprintf(sd->text + sd->off,
		    sizeof(sd->text) - sd->off, "%s%s", sd->n ? ", " : "",
		    name);
	sd->n++;
}

/* Does this grant hold data (or a login) on its provider still? */
static int
holds_data(const struct tl_grant *g)
{
	return !(strcmp(g->state, TL_GRANT_PURGED) == 0 ||
	    strcmp(g->state, TL_GRANT_LOST) == 0 ||
	    (strcmp(g->state, TL_GRANT_REVOKED) == 0 &&
	    strcmp(g->policy, "retain") != 0));
}

static int
said_grant(const struct tl_grant *g, void *arg)
{
	if (holds_data(g))
		said_add(arg, g->id);
	return 0;
}

int
tl_dec_node_rm_check(struct tl_ctx *c, const char *name)
{
	struct names mods = { NULL, 0, 0 };
	struct said ms, gs;
	char k[TL_KEY_MAX], id[TL_KEY_MAX];
	size_t i;
	int rc;

	memset(&ms, 0, sizeof(ms));
	memset(&gs, 0, sizeof(gs));
	if ((rc = tl_key(k, "an/%s/", name)) != 0 ||
	    (rc = tl_rec_scan(c->t, c->p.graph, k, collect_name, &mods)) != 0)
		goto out;
	if (mods.n == 0)
		goto out;
	for (i = 0; i < mods.n; i++) {
		said_add(&ms, mods.v[i]);
		if (tl_provider_of(c->t, &c->p, mods.v[i], name, id) == 0 &&
		    (rc = tl_grant_each_of_provider(c->t, &c->p, id,
		    said_grant, &gs)) != 0)
			goto out;
	}
	{
		char glist[sizeof(gs.text) + 8] = "";

		if (gs.n > 0)
			snprintf(glist, sizeof(glist), " (%s%s)", gs.text,
			    gs.off >= sizeof(gs.text) ? "…" : "");
		rc = tl_refuse(c, TL_EREFUSED, "node %s still runs %s%s "
		    "(%zu module(s)); grants bound to its providers: %zu%s.  "
		    "Unassign them first (tally unassign MODULE %s), move what "
		    "they serve (tally rebind GRANT PROVIDER --migrate, tally "
		    "provider move), or, if the node is gone for good, tally "
		    "node lost %s --yes", name, ms.text, ms.off >=
		    sizeof(ms.text) ? "…" : "", ms.n, gs.n, glist, name,
		    name);
	}
out:
	free(mods.v);
	return rc;
}

int
tl_dec_node_lost(struct tl_ctx *c, const char *name)
{
	struct names mods = { NULL, 0, 0 };
	struct grantlist gl = { NULL, 0, 0 };
	struct tl_body b;
	char k[TL_KEY_MAX], id[TL_KEY_MAX], stream[TL_KEY_MAX];
	uint64_t lost = 0;
	size_t i;
	int rc;

	if ((rc = tl_key(k, "n/%s", name)) != 0)
		return rc;
	if (!tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_ENOTFOUND, "no node %s", name);
	if ((rc = tl_key(k, "nl/%s", name)) != 0)
		return rc;
	if (tl_rec_exists(c->t, c->p.graph, k))
		return tl_refuse(c, TL_EREFUSED, "node %s is already lost; "
		    "tally node rm %s removes it", name, name);
	if ((rc = tl_key(stream, "node/%s", name)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_NAME, name);
	rc = tl_emit(c, TL_EV_NODE_LOST, stream, &b, &lost);
	tl_body_free(&b);
	if (rc != 0)
		return rc;
	/* Collect first: emitting rewrites the indexes being scanned. */
	if ((rc = tl_key(k, "an/%s/", name)) != 0 ||
	    (rc = tl_rec_scan(c->t, c->p.graph, k, collect_name, &mods)) != 0)
		goto out;
	for (i = 0; i < mods.n; i++)
		if (tl_provider_of(c->t, &c->p, mods.v[i], name, id) == 0 &&
		    (rc = tl_grant_each_of_provider(c->t, &c->p, id,
		    collect_grant, &gl)) != 0)
			goto out;
	/* Its providers' data is not reachable: every grant on them is lost. */
	for (i = 0; rc == 0 && i < gl.n; i++) {
		if (!holds_data(&gl.v[i]))
			continue;
		if ((rc = tl_key(stream, "grant/%s", gl.v[i].id)) != 0)
			break;
		c->cause = lost;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, gl.v[i].id);
		tl_body_str(&b, TL_F_PROVIDER, gl.v[i].provider);
		tl_body_str(&b, TL_F_NODE, name);
		rc = tl_emit(c, TL_EV_GRANT_LOST, stream, &b, NULL);
		tl_body_free(&b);
	}
	/* Then its assignments end, as unassign ends them. */
	for (i = 0; rc == 0 && i < mods.n; i++) {
		uint64_t removed = 0;

		c->cause = lost;
		if ((rc = unassign(c, mods.v[i], name, 0, &removed)) == 0)
			rc = rotate_for_leaver(c, mods.v[i], name, removed);
	}
	if (rc == 0)
		rc = tl_binder_run(c, NULL);
out:
	free(gl.v);
	free(mods.v);
	return rc;
}
