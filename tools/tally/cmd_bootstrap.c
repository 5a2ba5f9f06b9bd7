/*
 * cmd_bootstrap.c - tally bootstrap BUNDLE.yaml: a control plane from
 * nothing (seed 000: "steps 2 and 3 happen before there is a mesh to do
 * them").  The bundle (docs/bootstrap.md) names this node, the providers
 * this machine carries (their settings; secrets read from files or
 * stdin, never written in the bundle) and the control plane's own
 * manifests.  Every step is an ordinary command run in this process
 * (init, node add, apply, assign) and is skipped when the graph already
 * holds what it would declare; then tallyd --once does the work, as it
 * would on any home.  A second run appends nothing.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <yaml.h>

#include "core/error.h"
#include "core/secret.h"
#include "drivers/decl.h"
#include "projections/graph.h"
#include "projections/record.h"
#include "manifest.h"
#include "tally.h"

static const char usage[] =
"usage: tally bootstrap [--home DIR] [--timeout SECONDS] BUNDLE.yaml\n"
"\n"
"Makes a control plane on a machine with nothing, from one bundle\n"
"(docs/bootstrap.md): creates the home (as tally init), declares this\n"
"node (tally node add, its key written to the bundle's key-out, outside\n"
"the home), applies the providers' and the control plane's manifests,\n"
"assigns the providers with their settings and secrets (each read from\n"
"the file the bundle names, or a line of standard input) and the\n"
"control plane's modules on this node, then runs the reactors' passes\n"
"here, once, as tallyd --once does: grants provisioned and delivered,\n"
"migrations applied.  tallyd then simply continues from the log; a\n"
"tallyd already running on the home refuses it (exit 7).\n"
"\n"
"What the log already holds is not declared again: run twice, the\n"
"second run appends nothing.  A malformed bundle is refused, naming its\n"
"file, line and field, before anything is done (settings against the\n"
"driver's declaration, duplicate keys, NUL bytes).  --timeout bounds the\n"
"passes (default 60 s).  Exit 6 when work remains or is not healthy.\n"
"--json prints one line: home, node, appended_from, appended_to (0:\n"
"nothing appended), verified, healthy.\n";

#define BS_MAX		16
#define BS_PATH		1024

struct bs_secret {
	char	 key[64];
	char	 file[BS_PATH];		/* "" for a line of stdin */
};

struct bs_assign {
	char		 manifest[BS_PATH];
	char		 module[64];
	char		 expose[16];
	char		*set[BS_MAX];	/* "KEY=VALUE", owned */
	size_t		 nset;
	struct bs_secret sec[BS_MAX];
	size_t		 nsec;
};

struct bs_bundle {
	const char	*file;
	char		 dir[BS_PATH];	/* relative paths are from here */
	char		 node[64];
	char		 routable[256];
	char		 keyout[BS_PATH];
	struct bs_assign a[BS_MAX];	/* providers, then control plane */
	size_t		 na, nprov;
};

static void
bundle_free(struct bs_bundle *b)
{
	size_t i, j;

	/* Every entry: one refused half way holds settings too. */
	for (i = 0; i < BS_MAX; i++)
		for (j = 0; j < b->a[i].nset; j++)
			free(b->a[i].set[j]);
}

static int
bad(const struct bs_bundle *b, const yaml_node_t *n, const char *field,
    const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_errx("%s:%lu: %s: %s", b->file,
	    n ? (unsigned long)n->start_mark.line + 1 : 1UL, field, msg);
	return TL_EXIT_REFUSED;
}

static const char *
scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ?
	    (const char *)n->data.scalar.value : NULL;
}

/* A scalar into buf (cap bytes), refused when absent, empty or long. */
static int
str_into(const struct bs_bundle *b, const yaml_node_t *n, const char *field,
    char *buf, size_t cap)
{
	const char *s = scalar(n);

	if (s == NULL || *s == '\0')
		return bad(b, n, field, "expected a non-empty string");
	if (strlen(s) >= cap)
		return bad(b, n, field, "longer than %zu bytes", cap - 1);
	memcpy(buf, s, strlen(s) + 1);
	return 0;
}

/* A path: relative ones are from the bundle's directory. */
static int
path_into(const struct bs_bundle *b, const yaml_node_t *n, const char *field,
    char *buf)
{
	char tmp[BS_PATH];
	int ex;

	if ((ex = str_into(b, n, field, tmp, sizeof(tmp))) != 0)
		return ex;
	if (tmp[0] == '/')
		memcpy(buf, tmp, sizeof(tmp));
	else if ((size_t)snprintf(buf, BS_PATH, "%s/%s", b->dir, tmp) >=
	    BS_PATH)
		return bad(b, n, field, "path too long");
	return 0;
}

/* Refuses a mapping key not in allowed. */
static int
known_keys(const struct bs_bundle *b, yaml_document_t *d, yaml_node_t *m,
    const char *where, const char *const *allowed)
{
	yaml_node_pair_t *p;
	const char *k;
	size_t i;

	for (p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	    p++) {
		yaml_node_t *kn = yaml_document_get_node(d, p->key);

		k = scalar(kn);
		for (i = 0; k && allowed[i]; i++)
			if (strcmp(k, allowed[i]) == 0)
				break;
		if (k == NULL || allowed[i] == NULL)
			return bad(b, kn, where, "unknown key '%s'",
			    k ? k : "?");
	}
	return 0;
}

static yaml_node_t *
get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	yaml_node_pair_t *p;

	if (m == NULL || m->type != YAML_MAPPING_NODE)
		return NULL;
	for (p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	    p++) {
		const char *k = scalar(yaml_document_get_node(d, p->key));

		if (k && strcmp(k, key) == 0)
			return yaml_document_get_node(d, p->value);
	}
	return NULL;
}

/* How deep a bundle nests (it needs 4: providers[0].secrets.KEY.file). */
#define BS_DEPTH	8

/*
 * The whole document, before any field is read: no NUL inside a value
 * (every value is a C string from here on, and would be cut short), no
 * key twice in a mapping (libyaml keeps both, and get() would take the
 * first), no alias (a node reached twice), not nested deeper than any
 * bundle needs.  The manifest loader refuses the same
 * (manifest_load.c, manifest_check.c) on its own tree.
 */
static int
doc_sound(const struct bs_bundle *b, yaml_document_t *d, yaml_node_t *n,
    const char *path, int depth, unsigned char *seen)
{
	yaml_node_pair_t *p, *q;
	yaml_node_item_t *it;
	char sub[160];
	size_t i = 0;
	int ex;

	if (n == NULL)
		return 0;
	if (seen[n - d->nodes.start]++)
		return bad(b, n, path, "an alias (*NAME): a bundle says each "
		    "thing once, where it applies");
	if (depth > BS_DEPTH)
		return bad(b, n, path, "nested deeper than %d levels",
		    BS_DEPTH);
	switch (n->type) {
	case YAML_SCALAR_NODE:
		if (memchr(n->data.scalar.value, '\0',
		    n->data.scalar.length) != NULL)
			return bad(b, n, path, "contains a NUL character");
		return 0;
	case YAML_SEQUENCE_NODE:
		for (it = n->data.sequence.items.start;
		    it < n->data.sequence.items.top; it++, i++) {
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			if ((ex = doc_sound(b, d, yaml_document_get_node(d,
			    *it), sub, depth + 1, seen)) != 0)
				return ex;
		}
		return 0;
	case YAML_MAPPING_NODE:
		for (p = n->data.mapping.pairs.start;
		    p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *kn = yaml_document_get_node(d, p->key);
			const char *k = scalar(kn);

			if ((ex = doc_sound(b, d, kn, path, depth + 1,
			    seen)) != 0)
				return ex;
			if (k == NULL)
				return bad(b, kn, path, "a key must be a "
				    "string");
			/* Pairwise: a bundle's mappings are a few keys. */
			for (q = n->data.mapping.pairs.start; q < p; q++) {
				yaml_node_t *qn = yaml_document_get_node(d,
				    q->key);

				if (strcmp(scalar(qn), k) == 0)
					return bad(b, kn, path, "duplicate key "
					    "'%s' (first at line %lu)", k,
					    (unsigned long)qn->start_mark.line +
					    1);
			}
			snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ?
			    "." : "", k);
			if ((ex = doc_sound(b, d, yaml_document_get_node(d,
			    p->value), sub, depth + 1, seen)) != 0)
				return ex;
		}
		return 0;
	default:
		return 0;
	}
}

/*
 * What the module's manifest declares: it must parse (tally apply would
 * refuse it after the home and the node were made) and hold module;
 * dd receives the drivers of what it provides (none: a module that
 * provides nothing), nops their count, derived whether key is a
 * setting the manifest derives.  *mfp owns what mod points into.
 */
struct bs_decl {
	struct tl_mf_set		*set;
	const struct tl_mf_module	*mod;
	const struct tl_drv_decl	*dd[8];
	size_t				 nops;
};

static int
decl_load(const struct bs_bundle *b, const yaml_node_t *mn,
    const yaml_node_t *modn, const char *where, const struct bs_assign *a,
    struct bs_decl *dc)
{
	struct tl_mf_errors errs = TL_MF_ERRORS_INIT;
	char f[160], line[600] = "";
	size_t i;
	int rc, ex = 0;

	memset(dc, 0, sizeof(*dc));
	snprintf(f, sizeof(f), "%s.manifest", where);
	if ((rc = tl_mf_parse_file(a->manifest, tl_drv_names(), &dc->set,
	    &errs)) != 0) {
		if (errs.n > 0)
			tl_mf_error_format(&errs.v[0], line, sizeof(line));
		ex = bad(b, mn, f, "%s does not parse (tally apply would "
		    "refuse it): %s", a->manifest, line[0] ? line :
		    tl_strerror(rc));
		goto out;
	}
	if ((dc->mod = tl_mf_set_find(dc->set, a->module)) == NULL) {
		snprintf(f, sizeof(f), "%s.module", where);
		ex = bad(b, modn, f, "%s declares no module '%s'", a->manifest,
		    a->module);
		goto out;
	}
	for (i = 0; i < dc->mod->nprovides && dc->nops < 8; i++)
		if ((dc->dd[dc->nops] = tl_drv_decl_find(
		    dc->mod->provides[i].driver)) != NULL &&
		    dc->dd[dc->nops]->settings != NULL)
			dc->nops++;
out:
	tl_mf_errors_free(&errs);
	return ex;
}

static const struct tl_drv_setting *
decl_setting(const struct bs_decl *dc, const char *key)
{
	const struct tl_drv_setting *s;
	size_t i;

	for (i = 0; i < dc->nops; i++)
		if ((s = tl_drv_setting_find(dc->dd[i]->settings, key)) !=
		    NULL)
			return s;
	return NULL;
}

static int
decl_derived(const struct bs_decl *dc, const char *key)
{
	size_t i, j;

	for (i = 0; i < dc->mod->nprovides; i++)
		for (j = 0; j < dc->mod->provides[i].nderived; j++)
			if (strcmp(dc->mod->provides[i].derived[j].key,
			    key) == 0)
				return 1;
	return 0;
}

/*
 * One setting (secret: under secrets:) against the drivers'
 * declarations, as tally assign would check it after the home and the
 * node were made: here, before anything is.
 */
static int
decl_check(const struct bs_bundle *b, const struct bs_decl *dc,
    const yaml_node_t *kn, const char *field, const char *key,
    const char *value, int secret)
{
	static const struct tl_drv_setting any = { "", "", 0, TL_DRV_STRING,
	    "" };
	const struct tl_drv_setting *s;
	char why[TL_WHY_MAX], known[600] = "";
	const char *w;
	size_t i, off = 0;

	if (dc->nops == 0 || ((s = decl_setting(dc, key)) == NULL &&
	    decl_derived(dc, key)))
		s = &any;	/* the module's own settings, as given */
	else if (s == NULL) {
		for (i = 0; i < dc->nops; i++)
			for (s = dc->dd[i]->settings; s->name != NULL; s++)
				if (off < sizeof(known))
					off += (size_t)snprintf(known + off,
					    sizeof(known) - off, "%s%s%s", off ?
					    ", " : "", s->name, s->secret ?
					    " (under secrets:)" : "");
		return bad(b, kn, field, "unknown setting for %s (driver %s); "
		    "known settings: %s", dc->mod->name, dc->dd[0]->name,
		    known);
	}
	if (s != &any && s->secret && !secret)
		return bad(b, kn, field, "%s is a secret: give it under "
		    "secrets: (%s: {file: PATH} or %s: stdin), never under "
		    "settings:", key, key, key);
	if (s != &any && !s->secret && secret)
		return bad(b, kn, field, "%s is not a secret: give it under "
		    "settings:", key);
	if (secret)
		return 0;	/* read, and checked, when it is given */
	/* A PEM setting names its file: what is checked is what it holds. */
	if (s != &any && s->kind == TL_DRV_PEM) {
		char *pem;
		FILE *fp;
		size_t n;
		int rc;

		if (value[0] != '/')
			return bad(b, kn, field, "%s names a PEM file: give its "
			    "absolute path", key);
		if ((fp = fopen(value, "r")) == NULL)
			return bad(b, kn, field, "%s: %s", value,
			    strerror(errno));
		if ((pem = malloc(TL_DRV_PEM_MAX + 2)) == NULL) {
			fclose(fp);
			return bad(b, kn, field, "%s", strerror(ENOMEM));
		}
		n = fread(pem, 1, TL_DRV_PEM_MAX + 1, fp);
		fclose(fp);
		pem[n] = '\0';
		rc = tl_drv_setting_check(s, pem, why);
		free(pem);
		return rc != 0 ? bad(b, kn, field, "%s: %s", value, why) : 0;
	}
	if (tl_drv_setting_check(s, value, why) != 0) {
		/* why may start with the key's name: said once. */
		w = why;
		if (strncmp(w, key, strlen(key)) == 0 && w[strlen(key)] == ':')
			w += strlen(key) + 1 + (w[strlen(key) + 1] == ' ');
		return bad(b, kn, field, "%s", w);
	}
	return 0;
}

static int
parse_assign_in(struct bs_bundle *b, yaml_document_t *d, yaml_node_t *m,
    const char *where, int provider, struct bs_assign *a,
    struct bs_decl *dc)
{
	static const char *const pkeys[] = { "manifest", "module", "expose",
	    "settings", "secrets", NULL };
	static const char *const ckeys[] = { "manifest", "module", NULL };
	char f[128];
	yaml_node_t *n;
	yaml_node_pair_t *p;
	int ex;

	if (m->type != YAML_MAPPING_NODE)
		return bad(b, m, where, "expected a mapping (manifest, module%s)",
		    provider ? ", expose, settings, secrets" : "");
	if ((ex = known_keys(b, d, m, where, provider ? pkeys : ckeys)) != 0)
		return ex;
	snprintf(f, sizeof(f), "%s.manifest", where);
	if ((n = get(d, m, "manifest")) == NULL)
		return bad(b, m, f, "missing");
	if ((ex = path_into(b, n, f, a->manifest)) != 0)
		return ex;
	if (access(a->manifest, R_OK) != 0)
		return bad(b, n, f, "cannot read %s: %s", a->manifest,
		    strerror(errno));
	snprintf(f, sizeof(f), "%s.module", where);
	if ((n = get(d, m, "module")) == NULL)
		return bad(b, m, f, "missing");
	if ((ex = str_into(b, n, f, a->module, sizeof(a->module))) != 0)
		return ex;
	if (!tl_name_ok(a->module))
		return bad(b, n, f, "'%s' is not a name", a->module);
	if ((ex = decl_load(b, get(d, m, "manifest"), n, where, a, dc)) != 0)
		return ex;
	if (provider && dc->mod->nprovides == 0)
		return bad(b, n, f, "%s provides nothing: it belongs under "
		    "control-plane:", a->module);
	snprintf(a->expose, sizeof(a->expose), "local");
	if ((n = get(d, m, "expose")) != NULL) {
		snprintf(f, sizeof(f), "%s.expose", where);
		if ((ex = str_into(b, n, f, a->expose, sizeof(a->expose))) != 0)
			return ex;
		if (strcmp(a->expose, "local") != 0 &&
		    strcmp(a->expose, "network") != 0 &&
		    strcmp(a->expose, "public") != 0 &&
		    strcmp(a->expose, "none") != 0)
			return bad(b, n, f, "'%s': expected local, network, "
			    "public or none", a->expose);
	}
	if ((n = get(d, m, "settings")) != NULL) {
		snprintf(f, sizeof(f), "%s.settings", where);
		if (n->type != YAML_MAPPING_NODE)
			return bad(b, n, f, "expected a mapping KEY: VALUE");
		for (p = n->data.mapping.pairs.start;
		    p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *kn = yaml_document_get_node(d, p->key);
			yaml_node_t *vn = yaml_document_get_node(d, p->value);
			const char *k = scalar(kn), *v = scalar(vn);

			char sf[200];

			if (k == NULL || v == NULL)
				return bad(b, kn, f, "expected KEY: VALUE "
				    "scalars");
			snprintf(sf, sizeof(sf), "%s.%s", f, k);
			if ((ex = decl_check(b, dc, kn, sf, k, v, 0)) != 0)
				return ex;
			if (a->nset == BS_MAX)
				return bad(b, kn, f, "more than %d", BS_MAX);
			if (asprintf(&a->set[a->nset], "%s=%s", k, v) < 0) {
				cli_errx("bootstrap: %s", strerror(ENOMEM));
				return TL_EXIT_FAIL;
			}
			a->nset++;
		}
	}
	if ((n = get(d, m, "secrets")) != NULL) {
		snprintf(f, sizeof(f), "%s.secrets", where);
		if (n->type != YAML_MAPPING_NODE)
			return bad(b, n, f, "expected a mapping KEY: {file: "
			    "PATH} or KEY: stdin");
		for (p = n->data.mapping.pairs.start;
		    p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *kn = yaml_document_get_node(d, p->key);
			yaml_node_t *vn = yaml_document_get_node(d, p->value);
			struct bs_secret *s = &a->sec[a->nsec];
			const char *v = scalar(vn);
			char sf[200];

			if (a->nsec == BS_MAX)
				return bad(b, kn, f, "more than %d", BS_MAX);
			if ((ex = str_into(b, kn, f, s->key,
			    sizeof(s->key))) != 0)
				return ex;
			snprintf(sf, sizeof(sf), "%s.%s", f, s->key);
			if ((ex = decl_check(b, dc, kn, sf, s->key, NULL,
			    1)) != 0)
				return ex;
			if (v != NULL && strcmp(v, "stdin") == 0)
				s->file[0] = '\0';
			else if (vn->type == YAML_MAPPING_NODE &&
			    vn->data.mapping.pairs.top -
			    vn->data.mapping.pairs.start == 1 &&
			    get(d, vn, "file") != NULL) {
				if ((ex = path_into(b, get(d, vn, "file"),
				    sf, s->file)) != 0)
					return ex;
				if (access(s->file, R_OK) != 0)
					return bad(b, vn, sf, "cannot read %s: "
					    "%s", s->file, strerror(errno));
			} else
				return bad(b, vn, sf, "a secret is never "
				    "written in the bundle: give {file: PATH} "
				    "or stdin");
			a->nsec++;
		}
	}
	return 0;
}

static int
parse_assign(struct bs_bundle *b, yaml_document_t *d, yaml_node_t *m,
    const char *where, int provider, struct bs_assign *a)
{
	struct bs_decl dc;
	int ex;

	memset(&dc, 0, sizeof(dc));
	ex = parse_assign_in(b, d, m, where, provider, a, &dc);
	tl_mf_set_free(dc.set);
	return ex;
}

static int
parse_list(struct bs_bundle *b, yaml_document_t *d, yaml_node_t *root,
    const char *key, int provider)
{
	yaml_node_item_t *it;
	yaml_node_t *l = get(d, root, key);
	char where[64];
	size_t i = 0;
	int ex;

	if (l == NULL)
		return 0;
	if (l->type != YAML_SEQUENCE_NODE)
		return bad(b, l, key, "expected a list");
	for (it = l->data.sequence.items.start; it < l->data.sequence.items.top;
	    it++, i++) {
		if (b->na == BS_MAX)
			return bad(b, l, key, "more than %d entries", BS_MAX);
		snprintf(where, sizeof(where), "%s[%zu]", key, i);
		if ((ex = parse_assign(b, d, yaml_document_get_node(d, *it),
		    where, provider, &b->a[b->na])) != 0)
			return ex;
		b->na++;
	}
	return 0;
}

/*
 * path made absolute and, as far as it exists, real (symbolic links
 * resolved): the home does not exist yet when the bundle is checked.
 */
static void
abs_real(const char *path, char *out, size_t cap)
{
	char tmp[PATH_MAX], rest[PATH_MAX] = "", *slash;

	if (path[0] == '/' || getcwd(tmp, sizeof(tmp)) == NULL)
		snprintf(tmp, sizeof(tmp), "%s", path);
	else
		snprintf(tmp + strlen(tmp), sizeof(tmp) - strlen(tmp), "/%s",
		    path);
	/* The longest prefix that exists is resolved; the rest is kept. */
	while (realpath(tmp, out) == NULL) {
		if ((slash = strrchr(tmp, '/')) == NULL || slash == tmp) {
			snprintf(out, cap, "%s%s", tmp, rest);
			return;
		}
		memmove(rest + strlen(slash), rest, strlen(rest) + 1);
		memcpy(rest, slash, strlen(slash));
		*slash = '\0';
	}
	snprintf(out + strlen(out), cap - strlen(out), "%s", rest);
}

/* Is path under (or at) dir, both as abs_real makes them? */
static int
path_under(const char *path, const char *dir)
{
	char p[PATH_MAX], d[PATH_MAX];
	size_t n;

	abs_real(path, p, sizeof(p));
	abs_real(dir, d, sizeof(d));
	n = strlen(d);
	return strncmp(p, d, n) == 0 && (p[n] == '/' || p[n] == '\0' ||
	    strcmp(d, "/") == 0);
}

/* Reads and checks the whole bundle; nothing is done before this. */
static int
bundle_load(const char *file, const char *home, struct bs_bundle *b)
{
	static const char *const top[] = { "node", "providers",
	    "control-plane", NULL };
	static const char *const nkeys[] = { "name", "routable-name",
	    "key-out", NULL };
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root, *n;
	char tmp[BS_PATH], why[TL_WHY_MAX];
	unsigned char *seen;
	FILE *fp;
	int ex = TL_EXIT_REFUSED;

	memset(b, 0, sizeof(*b));
	b->file = file;
	snprintf(tmp, sizeof(tmp), "%s", file);
	snprintf(b->dir, sizeof(b->dir), "%s", dirname(tmp));
	if ((fp = fopen(file, "r")) == NULL) {
		cli_errx("%s: %s", file, strerror(errno));
		return TL_EXIT_NOTFOUND;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, fp);
	if (!yaml_parser_load(&parser, &doc)) {
		cli_errx("%s:%lu: not YAML: %s", file,
		    (unsigned long)parser.problem_mark.line + 1,
		    parser.problem ? parser.problem : "?");
		yaml_parser_delete(&parser);
		fclose(fp);
		return TL_EXIT_REFUSED;
	}
	root = yaml_document_get_root_node(&doc);
	if (root == NULL || root->type != YAML_MAPPING_NODE) {
		ex = bad(b, root, "bundle", "expected a mapping (node, "
		    "providers, control-plane)");
		goto done;
	}
	if ((seen = calloc((size_t)(doc.nodes.top - doc.nodes.start) + 1,
	    1)) == NULL) {
		cli_errx("bootstrap: %s", strerror(ENOMEM));
		ex = TL_EXIT_FAIL;
		goto done;
	}
	ex = doc_sound(b, &doc, root, "", 0, seen);
	free(seen);
	if (ex != 0)
		goto done;
	if ((ex = known_keys(b, &doc, root, "bundle", top)) != 0)
		goto done;
	if ((n = get(&doc, root, "node")) == NULL) {
		ex = bad(b, root, "node", "missing");
		goto done;
	}
	if (n->type != YAML_MAPPING_NODE) {
		ex = bad(b, n, "node", "expected a mapping (name, "
		    "routable-name, key-out)");
		goto done;
	}
	if ((ex = known_keys(b, &doc, n, "node", nkeys)) != 0)
		goto done;
	if (get(&doc, n, "name") == NULL) {
		ex = bad(b, n, "node.name", "missing");
		goto done;
	}
	if ((ex = str_into(b, get(&doc, n, "name"), "node.name", b->node,
	    sizeof(b->node))) != 0)
		goto done;
	if (!tl_name_ok(b->node)) {
		ex = bad(b, get(&doc, n, "name"), "node.name", "'%s' is not a "
		    "name", b->node);
		goto done;
	}
	if (get(&doc, n, "routable-name") == NULL) {
		ex = bad(b, n, "node.routable-name", "missing");
		goto done;
	}
	if ((ex = str_into(b, get(&doc, n, "routable-name"),
	    "node.routable-name", b->routable, sizeof(b->routable))) != 0)
		goto done;
	if (!cli_routable_ok(b->routable, why)) {
		ex = bad(b, get(&doc, n, "routable-name"),
		    "node.routable-name", "%s", why);
		goto done;
	}
	if (get(&doc, n, "key-out") == NULL) {
		ex = bad(b, n, "node.key-out", "missing (where this node's "
		    "secret key is written, outside the home)");
		goto done;
	}
	if ((ex = path_into(b, get(&doc, n, "key-out"), "node.key-out",
	    b->keyout)) != 0)
		goto done;
	if (path_under(b->keyout, home)) {
		ex = bad(b, get(&doc, n, "key-out"), "node.key-out", "%s is "
		    "under the tally home %s: a node's secret key opens its "
		    "deliveries, and the control plane keeps none", b->keyout,
		    home);
		goto done;
	}
	if ((ex = parse_list(b, &doc, root, "providers", 1)) != 0)
		goto done;
	b->nprov = b->na;
	ex = parse_list(b, &doc, root, "control-plane", 0);
done:
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	fclose(fp);
	return ex;
}

/* Runs another command of this program here, as main would. */
static int
run(struct tl_cli *cli, int (*fn)(struct tl_cli *, int, char **),
    char **argv)
{
	int argc = 0, json = cli->json, ex, saved = -1, null;

	while (argv[argc] != NULL)
		argc++;
	/* With --json, stdout is bootstrap's one document: theirs go. */
	fflush(stdout);
	if (json && (saved = dup(STDOUT_FILENO)) >= 0 &&
	    (null = open("/dev/null", O_WRONLY | O_CLOEXEC)) >= 0) {
		dup2(null, STDOUT_FILENO);
		close(null);
	}
	optind = 0;		/* glibc: a fresh getopt for each */
	cli->json = 0;
	ex = fn(cli, argc, argv);
	cli->json = json;
	fflush(stdout);
	if (saved >= 0) {
		dup2(saved, STDOUT_FILENO);
		close(saved);
	}
	json_decref(cli->appended);
	cli->appended = NULL;
	cli->json_done = 0;
	cli_close(cli);
	fflush(stdout);
	return ex;
}

struct exists_arg {
	const char	*key;
	int		 yes;
};

static int
exists_cb(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p,
    void *arg)
{
	struct exists_arg *ea = arg;

	(void)cli;
	ea->yes = tl_rec_exists(t, p->graph, ea->key);
	return TL_EXIT_OK;
}

/* Does the graph hold key (n/NODE, a/MODULE@NODE)?  -1: cannot tell. */
static int
graph_has(struct tl_cli *cli, const char *key)
{
	struct exists_arg ea = { key, 0 };
	int ex = cli_read(cli, 0, exists_cb, &ea);

	cli_close(cli);
	return ex == TL_EXIT_OK ? ea.yes : -1;
}

/*
 * One secret's line: the first line of its file, or of stdin; a PEM key
 * (cli_pem_key_setting) is its whole file, or stdin up to its END line,
 * ending in a newline.
 */
static int
secret_value(const struct bs_secret *s, char *val, size_t cap)
{
	int pem = cli_pem_key_setting(s->key);
	size_t n;
	FILE *fp;

	if (s->file[0] == '\0' && !pem)
		return cli_read_secret(s->key, val, cap);
	if (s->file[0] == '\0') {
		int rc = cli_read_secret_pem(s->key, val, cap);

		/* assign is handed it with one newline after the END line. */
		n = strlen(val);
		while (n > 0 && val[n - 1] == '\n')
			val[--n] = '\0';
		return rc;
	}
	if ((fp = fopen(s->file, "r")) == NULL)
		return errno;
	setvbuf(fp, NULL, _IONBF, 0);	/* no unwiped stdio copy */
	if (pem) {
		n = fread(val, 1, cap - 1, fp);
		val[n] = '\0';
		/* A file past cap was cut: assign would refuse the rest. */
		if (n == cap - 1 && fgetc(fp) != EOF) {
			fclose(fp);
			return TL_ETOOBIG;
		}
		fclose(fp);
		while (n > 0 && (val[n - 1] == '\n' || val[n - 1] == '\r'))
			val[--n] = '\0';
		if (n == 0 || memchr(val, '\0', n) != NULL)
			return TL_EINVAL;
		/*
		 * assign reads up to the END line: anything after it (a
		 * certificate kept in the key's file) would be read as the
		 * next secret.
		 */
		{
			const char *end = strstr(val, "-----END ");

			if (end == NULL || strchr(end, '\n') != NULL)
				return TL_EMALFORMED;
		}
		return 0;
	}
	if (fgets(val, (int)cap, fp) == NULL) {
		fclose(fp);
		return TL_EINVAL;
	}
	fclose(fp);
	n = strlen(val);
	while (n > 0 && (val[n - 1] == '\n' || val[n - 1] == '\r'))
		val[--n] = '\0';
	return n == 0 ? TL_EINVAL : 0;
}

/*
 * tally assign MODULE NODE --expose E --set K=V... --secret K..., the
 * secrets handed to it on a pipe in place of stdin (the kernel's
 * buffer, never a file), in the order of its --secret options.
 */
static int
assign(struct tl_cli *cli, const struct bs_bundle *b, const struct bs_assign *a)
{
	char *argv[8 + 4 * BS_MAX], val[TL_DRV_KEY_MAX + 2];
	int pfd[2] = { -1, -1 }, saved = -1, ex = TL_EXIT_FAIL, rc;
	size_t n = 0, i;

	argv[n++] = "assign";
	argv[n++] = (char *)a->module;
	argv[n++] = (char *)b->node;
	argv[n++] = "--expose";
	argv[n++] = (char *)a->expose;
	for (i = 0; i < a->nset; i++) {
		argv[n++] = "--set";
		argv[n++] = a->set[i];
	}
	for (i = 0; i < a->nsec; i++) {
		argv[n++] = "--secret";
		argv[n++] = (char *)a->sec[i].key;
	}
	argv[n] = NULL;
	if (a->nsec == 0)
		return run(cli, cmd_assign, argv);
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		cli_errx("pipe: %s", strerror(errno));
		return TL_EXIT_FAIL;
	}
	for (i = 0; i < a->nsec; i++) {
		size_t len;

		if ((rc = secret_value(&a->sec[i], val, sizeof(val) - 1)) != 0) {
			cli_errx("%s: secret %s of %s: %s", b->file,
			    a->sec[i].key, a->module, rc == TL_ETOOBIG ?
			    "longer than a PEM key may be (8192 bytes)" :
			    rc == TL_EMALFORMED ? "not one PEM key: no END "
			    "line, or something after it (a certificate? "
			    "give that as admin-cert)" :
			    a->sec[i].file[0] ? (rc == TL_EINVAL ? "the "
			    "file's first line is empty" : strerror(rc)) :
			    "no line on standard input");
			ex = TL_EXIT_REFUSED;
			goto close_pipe;
		}
		len = strlen(val);
		val[len++] = '\n';
		/* A pipe takes 64 KiB before it blocks: far more than this. */
		rc = write(pfd[1], val, len) == (ssize_t)len ? 0 : errno;
		tl_secret_wipe(val, sizeof(val));
		if (rc != 0) {
			cli_errx("pipe: %s", strerror(rc));
			goto close_pipe;
		}
	}
	close(pfd[1]);
	pfd[1] = -1;
	if ((saved = dup(STDIN_FILENO)) < 0 ||
	    dup2(pfd[0], STDIN_FILENO) < 0) {
		cli_errx("stdin: %s", strerror(errno));
		goto close_pipe;
	}
	clearerr(stdin);
	ex = run(cli, cmd_assign, argv);
	dup2(saved, STDIN_FILENO);
	clearerr(stdin);
close_pipe:
	if (saved >= 0)
		close(saved);
	if (pfd[1] >= 0)
		close(pfd[1]);
	close(pfd[0]);
	tl_secret_wipe(val, sizeof(val));
	return ex;
}

/* tallyd --once --json's verdict line: how many grants it verified. */
static void
verdict(const char *line, void *arg)
{
	json_t *doc = json_loads(line, 0, NULL), *v;

	if (doc == NULL)
		return;
	v = json_object_get(doc, "verified");
	if (json_is_integer(v) && json_integer_value(v) >= 0)
		*(unsigned *)arg = (unsigned)json_integer_value(v);
	json_decref(doc);
}

/*
 * The reconciliation is tallyd's own: tallyd --once --json on this home
 * (cli_tallyd).  Its lock, its walk of the whole log, the stream and
 * the fences, its chain and its verdict are tallyd's, and a running
 * tallyd refuses it (exit 7) as it refuses a second daemon.
 */
static int
reconcile(struct tl_cli *cli, unsigned timeout_s, unsigned *checkedp)
{
	char tmo[24];
	const char *args[] = { "--once", "--json", "--once-timeout", tmo,
	    NULL };
	int ex;

	*checkedp = 0;
	snprintf(tmo, sizeof(tmo), "%u", timeout_s);
	ex = cli_tallyd(cli, args, NULL, 0, verdict, checkedp);
	if (ex == TL_EXIT_UNHEALTHY)
		cli_errx("%u grant(s) verified, not everything is healthy "
		    "(see tally status)", *checkedp);
	return ex;
}

/*
 * Is a tallyd running on the home?  Asked before anything is declared,
 * so that a refusal (exit 7) leaves the log as it was; reconcile takes
 * the lock itself.
 */
static int
tallyd_holds(struct tl_cli *cli)
{
	char path[1200];
	long holder = 0;
	int fd = -1, rc;

	rc = tl_log_lock_daemon(cli->logdir, &fd, &holder);
	if (fd >= 0)
		close(fd);
	if (rc == TL_ELOCKED)
		return 1;
	snprintf(path, sizeof(path), "%s/tallyd.lock", cli->home);
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
		return 0;
	rc = flock(fd, LOCK_EX | LOCK_NB) != 0;
	close(fd);
	return rc;
}

/* The log's head (0: empty or no log). */
static uint64_t
head(struct tl_cli *cli)
{
	struct tl_txn *t;
	uint64_t last = 0;

	if (cli_open_log(cli, CLI_OPEN_READER) != 0)
		return 0;
	if (tl_log_begin(cli->log, TL_TXN_RDONLY, &t) == 0) {
		tl_log_last(t, &last, NULL);
		tl_log_abort(t);
	}
	cli_close(cli);
	return last;
}

int
cmd_bootstrap(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "timeout", required_argument, NULL, 't' },
		{ 0 }
	};
	struct bs_bundle b;
	char path[1200], key[TL_KEY_MAX], dir[BS_PATH], knew[BS_PATH + 8];
	char *av[4 + BS_MAX + 1];
	struct stat st;
	unsigned timeout = 60, checked = 0;
	uint64_t before;
	size_t i, n;
	int c, ex, has;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			timeout = (unsigned)strtoul(optarg, NULL, 10);
			if (timeout == 0)
				timeout = 1;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 1 != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if ((ex = bundle_load(argv[optind], cli->home, &b)) != 0)
		goto out;
	if ((ex = cli_standby_refuse(cli)) != 0)
		goto out;
	if (tallyd_holds(cli)) {
		cli_errx("%s: a tallyd runs on this home: stop it first (or "
		    "declare with tally node add, apply and assign, and let "
		    "it do the work)", cli->home);
		ex = TL_EXIT_LOCKED;
		goto out;
	}

	/* 1. The home, as tally init makes it. */
	snprintf(path, sizeof(path), "%s/master.key", cli->home);
	if (stat(path, &st) != 0) {
		av[0] = "init";
		av[1] = NULL;
		if ((ex = run(cli, cmd_init, av)) != 0)
			goto out;
		before = 0;	/* a new mesh: its mesh.created is ours too */
	} else
		before = head(cli);

	/* 2. This node, its key where the bundle says (outside the home). */
	if ((ex = tl_key(key, "n/%s", b.node)) != 0) {
		ex = cli_fail(cli, ex, "bootstrap");
		goto out;
	}
	if ((has = graph_has(cli, key)) < 0) {
		ex = TL_EXIT_FAIL;
		goto out;
	}
	snprintf(knew, sizeof(knew), "%s.new", b.keyout);
	/* A key a kill left beside its place: node add finishes it. */
	if (!has || (access(b.keyout, F_OK) != 0 && access(knew, F_OK) == 0)) {
		char *nav[] = { "node", "add", b.node, "--routable-name",
		    b.routable, "--key-out", b.keyout, NULL };

		snprintf(dir, sizeof(dir), "%s", b.keyout);
		if (mkdir(dirname(dir), 0700) != 0 && errno != EEXIST) {
			cli_errx("%s: %s", dir, strerror(errno));
			ex = TL_EXIT_FAIL;
			goto out;
		}
		if ((ex = run(cli, cmd_node, nav)) != 0)
			goto out;
	} else if (access(b.keyout, R_OK) != 0)
		cli_warnx("node %s exists but its key %s is not there: it was "
		    "declared elsewhere", b.node, b.keyout);

	/* 3. Every manifest (an unchanged one appends nothing). */
	n = 0;
	av[n++] = "apply";
	for (i = 0; i < b.na; i++)
		av[n++] = b.a[i].manifest;
	av[n] = NULL;
	if (n > 1 && (ex = run(cli, cmd_apply, av)) != 0)
		goto out;

	/* 4. The providers, then the control plane's modules, here. */
	for (i = 0; i < b.na; i++) {
		if ((ex = tl_key(key, "a/%s@%s", b.a[i].module, b.node)) != 0) {
			ex = cli_fail(cli, ex, "bootstrap");
			goto out;
		}
		if ((has = graph_has(cli, key)) < 0) {
			ex = TL_EXIT_FAIL;
			goto out;
		}
		if (has)
			continue;
		if (i >= b.nprov) {
			char *cav[] = { "assign", b.a[i].module, b.node, NULL };

			ex = run(cli, cmd_assign, cav);
		} else
			ex = assign(cli, &b, &b.a[i]);
		if (ex != 0)
			goto out;
	}

	/* 5. The drivers, once, here: tallyd's passes. */
	ex = reconcile(cli, timeout, &checked);
	if (ex == TL_EXIT_OK || ex == TL_EXIT_UNHEALTHY) {
		uint64_t after = head(cli);

		if (cli->json) {
			/* Its own document: the events were appended by steps. */
			json_t *doc = json_pack("{s:s,s:s,s:I,s:I,s:i,s:b}",
			    "home", cli->home, "node", b.node, "appended_from",
			    (json_int_t)(after == before ? 0 : before + 1),
			    "appended_to", (json_int_t)(after == before ? 0 :
			    after), "verified", (int)checked, "healthy",
			    ex == TL_EXIT_OK);

			if (doc != NULL) {
				json_dumpf(doc, stdout, JSON_COMPACT);
				putchar('\n');
				json_decref(doc);
			}
			cli->json_done = 1;
			goto out;
		}
		if (ex == TL_EXIT_OK)
			printf("reconciled: %u grant(s) verified, all "
			    "healthy\n", checked);
		if (after == before)
			printf("bootstrap: nothing to do (the log is at event "
			    "%llu)\n", (unsigned long long)after);
		else
			printf("bootstrap: events %llu..%llu appended; tallyd "
			    "--home %s continues from here\n",
			    (unsigned long long)before + 1,
			    (unsigned long long)after, cli->home);
	}
out:
	bundle_free(&b);
	return ex;
}
