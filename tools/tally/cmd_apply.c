/*
 * cmd_apply.c - tally apply: module manifests into declaration events.
 *
 * Each module of each file becomes a module.declared body and one
 * requirement.declared body per requirement, encoded canonically (the
 * parser sorts everything), so that re-applying an unchanged manifest
 * produces identical bytes and the decider appends nothing.
 */
#include <errno.h>
#include <dirent.h>
#include <getopt.h>
#include <sodium.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"
#include "core/fields.h"
#include "core/vec.h"
#include "drivers/decl.h"
#include "manifest.h"
#include "tally.h"

static const char usage[] =
"usage: tally apply [--dry-run] FILE.yaml...\n"
"\n"
"Declares the modules in the manifests (docs/manifest.md).  Every file\n"
"is validated first; any error (named FILE:LINE:COL: FIELD) applies\n"
"nothing.  An unchanged manifest appends nothing; a changed one only\n"
"what changed.  --dry-run prints the events it would append.\n";

/* A requirement's migrations directory, read at apply time. */
struct migs {
	struct tl_decl_mig	*v;
	size_t			 n, cap;
};

struct mod {
	const struct tl_mf_module *m;	/* borrowed from its set */
	struct tl_decl		 d;
	struct migs		*migs;	/* one per requirement */
	struct tl_decl_req	*reqs;
	struct tl_body		 mb;
	struct tl_body		*rb;
	int			 rank;
};

static void
map_body(struct tl_body *b, const char *key, const struct tl_mf_map *m,
    size_t n)
{
	size_t i;

	tl_body_map(b, key);
	for (i = 0; i < n; i++)
		tl_body_str(b, m[i].field, m[i].var);
	tl_body_end(b);
}

static int
module_body(const struct tl_mf_module *m, struct tl_body *b)
{
	unsigned char d[16];
	char hex[33];
	const void *p;
	size_t len, i;
	struct tl_body c;
	int rc;

	/* The content first, to digest it; then the body with the digest. */
	tl_body_init(&c);
	for (i = 0; i < 2; i++) {
		struct tl_body *x = i == 0 ? &c : b;
		size_t j;

		tl_body_str(x, TL_F_NAME, m->name);
		if (i == 1)
			tl_body_str(x, TL_F_DIGEST, hex);
		/*
		 * Absent means any: a declaration from before instances:
		 * reads the same, and re-applying it appends nothing.
		 */
		if (m->instances != TL_MF_ANY)
			tl_body_str(x, TL_F_INSTANCES,
			    tl_mf_instances_name(m->instances));
		/* Absent when none: an older declaration reads the same. */
		if (m->nparts > 0) {
			tl_body_arr(x, TL_F_PARTS);
			for (j = 0; j < m->nparts; j++)
				tl_body_str(x, NULL, m->parts[j]);
			tl_body_end(x);
		}
		tl_body_map(x, TL_F_ENV);
		for (j = 0; j < m->nenv; j++)
			tl_body_str(x, m->env[j].name, m->env[j].def);
		tl_body_end(x);
		tl_body_arr(x, TL_F_PROVIDES);
		for (j = 0; j < m->nprovides; j++) {
			tl_body_map(x, NULL);
			tl_body_str(x, TL_F_TYPE, m->provides[j].type);
			tl_body_str(x, TL_F_DRIVER, m->provides[j].driver);
			tl_body_str(x, TL_F_REVOKE,
			    tl_mf_revoke_name(m->provides[j].revoke));
			tl_body_u64(x, TL_F_MAX_AGE,
			    (uint64_t)m->provides[j].max_credential_age);
			if (m->provides[j].rotation_window != NULL)
				tl_body_str(x, TL_F_WINDOW,
				    m->provides[j].rotation_window);
			/* Absent when none: an older declaration reads so. */
			if (m->provides[j].nderived > 0) {
				const struct tl_mf_derived *dv =
				    m->provides[j].derived;
				size_t l;

				tl_body_map(x, TL_F_SETTINGS);
				for (l = 0; l < m->provides[j].nderived; l++) {
					tl_body_map(x, dv[l].key);
					tl_body_str(x, TL_F_FROM, dv[l].from);
					tl_body_str(x, TL_F_TIMES, dv[l].times);
					tl_body_str(x, TL_F_UNIT, dv[l].unit);
					tl_body_u64(x, TL_F_MIN, dv[l].min);
					tl_body_u64(x, TL_F_MAX, dv[l].max);
					tl_body_end(x);
				}
				tl_body_end(x);
			}
			tl_body_end(x);
		}
		tl_body_end(x);
		tl_body_arr(x, TL_F_EMBEDDED);
		for (j = 0; j < m->nembedded; j++) {
			tl_body_map(x, NULL);
			tl_body_str(x, TL_F_NAME, m->embedded[j].name);
			tl_body_str(x, TL_F_TYPE, m->embedded[j].type);
			tl_body_str(x, TL_F_RUNS, m->embedded[j].runs ?
			    m->embedded[j].runs : "");
			map_body(x, "env", m->embedded[j].env,
			    m->embedded[j].nenv);
			tl_body_end(x);
		}
		tl_body_end(x);
		if (i == 0) {
			if ((rc = tl_body_finish(&c, &p, &len)) != 0) {
				tl_body_free(&c);
				return rc;
			}
			crypto_generichash(d, sizeof(d), p, len, NULL, 0);
			sodium_bin2hex(hex, sizeof(hex), d, sizeof(d));
		}
	}
	tl_body_free(&c);
	return tl_body_finish(b, &p, &len);
}

static int
mig_cmp(const void *a, const void *b)
{
	const struct tl_decl_mig *x = a, *y = b;
	unsigned long nx = strtoul(x->file, NULL, 10), ny = strtoul(y->file,
	    NULL, 10);

	if (nx != ny)
		return nx < ny ? -1 : 1;
	return strcmp(x->file, y->file);
}

static int
is_migration(const char *n)
{
	size_t len = strlen(n), i = 0;

	while (n[i] >= '0' && n[i] <= '9')
		i++;
	return i > 0 && n[i] == '_' && len > 4 && len < 64 &&
	    strcmp(n + len - 4, ".sql") == 0;
}

static void
migs_free(struct migs *ms)
{
	size_t i;

	for (i = 0; ms != NULL && i < ms->n; i++) {
		free((void *)ms->v[i].file);
		free((void *)ms->v[i].content);
	}
	if (ms != NULL)
		free(ms->v);
}

/* The largest migration file: it is copied into one event. */
#define MIGRATION_MAX	(8L * 1024 * 1024)

/* Reads NNN_description.sql files of dir, in order, with checksums. */
static int
read_migrations(const char *file, int line, const char *req, const char *dir,
    struct migs *ms)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	memset(ms, 0, sizeof(*ms));
	if ((d = opendir(dir)) == NULL) {
		cli_errx("%s:%d: requires.%s.migrations: %s: %s", file, line,
		    req, dir, strerror(errno));
		return TL_EMANIFEST;
	}
	while ((de = readdir(d)) != NULL) {
		char path[2048];
		struct tl_decl_mig *mg;
		unsigned char h[32];
		FILE *fp;
		long sz;

		if (!is_migration(de->d_name))
			continue;
		if (tl_vec_grow(&ms->v, &ms->cap, ms->n + 1,
		    sizeof(ms->v[0])) != 0) {
			rc = ENOMEM;
			break;
		}
		mg = &ms->v[ms->n];
		memset(mg, 0, sizeof(*mg));
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		/* Two different problems, two messages: which one it is. */
		if ((fp = fopen(path, "rb")) == NULL || fseek(fp, 0,
		    SEEK_END) != 0 || (sz = ftell(fp)) < 0 ||
		    fseek(fp, 0, SEEK_SET) != 0) {
			cli_errx("%s: cannot read: %s", path, strerror(errno));
			if (fp != NULL)
				fclose(fp);
			rc = TL_EMANIFEST;
			break;
		}
		if (sz > MIGRATION_MAX) {
			cli_errx("%s: %ld bytes, over the limit of 8 MiB (%ld "
			    "bytes) for one migration file: split it", path, sz,
			    (long)MIGRATION_MAX);
			fclose(fp);
			rc = TL_EMANIFEST;
			break;
		}
		mg->file = strdup(de->d_name);
		mg->content = malloc((size_t)sz + 1);
		if (mg->file == NULL || mg->content == NULL) {
			fclose(fp);
			free((void *)mg->file);
			free((void *)mg->content);
			rc = ENOMEM;
			break;
		}
		errno = 0;
		if (fread((void *)mg->content, 1, (size_t)sz, fp) !=
		    (size_t)sz) {
			cli_errx("%s: cannot read: %s", path, errno ?
			    strerror(errno) : "it shrank while read");
			fclose(fp);
			free((void *)mg->file);
			free((void *)mg->content);
			rc = TL_EMANIFEST;
			break;
		}
		fclose(fp);
		mg->len = (size_t)sz;
		crypto_generichash(h, sizeof(h), mg->content, mg->len, NULL,
		    0);
		sodium_bin2hex(mg->checksum, sizeof(mg->checksum), h,
		    sizeof(h));
		ms->n++;
	}
	closedir(d);
	if (rc != 0) {
		migs_free(ms);
		memset(ms, 0, sizeof(*ms));
		return rc;
	}
	qsort(ms->v, ms->n, sizeof(*ms->v), mig_cmp);
	return 0;
}

static int
req_body(const struct tl_mf_module *m, const struct tl_mf_req *r,
    const struct migs *ms, struct tl_body *b)
{
	char prov[130] = "";
	const void *p;
	size_t len;

	if (r->provider_node != NULL)
		snprintf(prov, sizeof(prov), "%s/%s", r->provider_node,
		    r->provider_module);
	tl_body_str(b, TL_F_MODULE, m->name);
	tl_body_str(b, TL_F_NAME, r->name);
	tl_body_str(b, TL_F_KIND, tl_mf_kind_name(r->kind));
	tl_body_str(b, TL_F_TARGET, r->target);
	if (r->kind == TL_MF_INSTANTIATION) {
		tl_body_str(b, TL_F_TYPE, r->type);
		tl_body_str(b, TL_F_SCOPE, tl_mf_scope_name(r->scope));
		tl_body_str(b, TL_F_PROVIDER, prov);
		tl_body_str(b, TL_F_RESOURCE, r->resource);
		map_body(b, "env", r->env, r->nenv);
		{
			size_t i;

			/* What was declared, by checksum: not a path. */
			tl_body_arr(b, TL_F_MIGRATIONS);
			for (i = 0; ms != NULL && i < ms->n; i++) {
				tl_body_map(b, NULL);
				tl_body_str(b, TL_F_FILE, ms->v[i].file);
				tl_body_str(b, TL_F_CHECKSUM,
				    ms->v[i].checksum);
				tl_body_end(b);
			}
			tl_body_end(b);
		}
		tl_body_u64(b, TL_F_MAX_AGE, (uint64_t)r->max_credential_age);
		if (r->rotation_window != NULL)
			tl_body_str(b, TL_F_WINDOW, r->rotation_window);
		if (r->params != NULL && r->params[0] != NULL) {
			const char *const *pv;

			/* The driver's params: what its operations make. */
			tl_body_map(b, TL_F_PARAMS);
			for (pv = r->params; pv[0] != NULL; pv += 2)
				tl_body_str(b, pv[0], pv[1]);
			tl_body_end(b);
		}
	}
	if (r->part != NULL)
		tl_body_str(b, TL_F_PART, r->part);
	if (r->credential != NULL)
		tl_body_str(b, TL_F_CREDENTIAL, r->credential);
	if (r->access != NULL) {
		tl_body_str(b, TL_F_ACCESS, r->access);
		tl_body_str(b, TL_F_OF, r->of);
	}
	return tl_body_finish(b, &p, &len);
}

static int
build(const struct tl_mf_module *m, struct mod *md)
{
	size_t i;
	int rc;

	memset(md, 0, sizeof(*md));
	md->m = m;
	tl_body_init(&md->mb);
	if ((rc = module_body(m, &md->mb)) != 0)
		return rc;
	md->d.name = m->name;
	md->d.body = md->mb.p;
	md->d.len = md->mb.len;
	md->d.file = m->file;
	md->d.line = m->line;
	md->rank = m->nreqs == 0 ? 0 : 1;	/* providers first */
	if (m->nreqs == 0)
		return 0;
	md->reqs = calloc(m->nreqs, sizeof(*md->reqs));
	md->rb = calloc(m->nreqs, sizeof(*md->rb));
	md->migs = calloc(m->nreqs, sizeof(*md->migs));
	if (md->reqs == NULL || md->rb == NULL || md->migs == NULL)
		return ENOMEM;
	md->d.nreqs = m->nreqs;
	for (i = 0; i < m->nreqs; i++) {
		tl_body_init(&md->rb[i]);
		if (m->reqs[i].migrations != NULL &&
		    (rc = read_migrations(m->file, m->reqs[i].line,
		    m->reqs[i].name, m->reqs[i].migrations,
		    &md->migs[i])) != 0)
			return rc;
		if ((rc = req_body(m, &m->reqs[i], &md->migs[i],
		    &md->rb[i])) != 0)
			return rc;
		md->reqs[i].migs = md->migs[i].v;
		md->reqs[i].nmigs = md->migs[i].n;
		md->reqs[i].name = m->reqs[i].name;
		md->reqs[i].body = md->rb[i].p;
		md->reqs[i].len = md->rb[i].len;
		md->reqs[i].file = m->file;
		md->reqs[i].line = m->reqs[i].line;
	}
	md->d.reqs = md->reqs;
	md->d.nreqs = m->nreqs;
	return 0;
}

static void
mod_free(struct mod *md)
{
	size_t i;

	tl_body_free(&md->mb);
	for (i = 0; md->rb != NULL && i < md->d.nreqs; i++)
		tl_body_free(&md->rb[i]);
	for (i = 0; md->migs != NULL && i < md->d.nreqs; i++)
		migs_free(&md->migs[i]);
	free(md->migs);
	free(md->rb);
	free(md->reqs);
}

struct apply_arg {
	struct mod	*mods;
	size_t		 n;
};

/*
 * A requirement's target, once every module of the apply is folded:
 * declared and not providing the type, it can never be served
 * (refused); not declared, it is a manifest not applied yet (manifests
 * are applied in any order), accepted, and tally status shows the
 * requirement unsatisfiable with that reason until it is.
 */
static int
check_target(struct tl_ctx *c, const struct tl_mf_module *m,
    const struct tl_mf_req *r)
{
	struct tl_rec t;
	struct tl_bnode prov;
	char k[TL_KEY_MAX], type[128], list[400] = "";
	size_t i, off = 0;
	int found = 0, rc;

	if (r->kind != TL_MF_INSTANTIATION)
		return 0;
	if ((rc = tl_key(k, "m/%s", r->target)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &t) != 0)
		return 0;
	if (tl_bn_get(t.m, "provides", &prov) == 0)
		for (i = 0; i < tl_bn_len(prov) && !found; i++) {
			type[0] = '\0';
			tl_bn_getstr(tl_bn_at(prov, i), "type", type,
			    sizeof(type));
			if (strcmp(type, r->type) == 0)
				found = 1;
			else if (off < sizeof(list))
				off += (size_t)snprintf(list + off,
				    sizeof(list) - off, "%s%s", off ? ", " : "",
				    type);
		}
	tl_rec_close(&t);
	if (found)
		return 0;
	return tl_refuse(c, TL_EMANIFEST, "%s:%d: requires.%s.type: module "
	    "%s does not provide %s (%s%s): the requirement could never be "
	    "served", m->file, r->line, r->name, r->target, r->type,
	    off ? "it provides " : "it provides nothing", list);
}

static int
do_apply(struct tl_ctx *c, void *arg)
{
	struct apply_arg *a = arg;
	size_t i, j;
	int rank, rc;

	for (rank = 0; rank < 2; rank++)
		for (i = 0; i < a->n; i++) {
			if (a->mods[i].rank != rank)
				continue;
			c->cause = 0;
			if ((rc = tl_dec_apply(c, &a->mods[i].d)) != 0)
				return rc;
		}
	for (i = 0; i < a->n; i++)
		for (j = 0; j < a->mods[i].m->nreqs; j++)
			if ((rc = check_target(c, a->mods[i].m,
			    &a->mods[i].m->reqs[j])) != 0)
				return rc;
	return 0;
}

/*
 * A requirement that maps no connection field to env is provisioned
 * and delivers nothing the module reads: legal (a grant that exists
 * for its own sake), and a first user's usual slip, so said.
 */
static void
warn_unmapped(const struct tl_mf_set *set)
{
	size_t i, j;

	for (i = 0; i < tl_mf_set_count(set); i++) {
		const struct tl_mf_module *m = tl_mf_set_module(set, i);

		for (j = 0; j < m->nreqs; j++)
			if (m->reqs[j].kind == TL_MF_INSTANTIATION &&
			    m->reqs[j].nenv == 0)
				cli_warnx("%s:%d: requires.%s: %s maps no "
				    "connection field to env: nothing will be "
				    "delivered to %s for it (add env: {FIELD: "
				    "VARIABLE})", m->file, m->reqs[j].line,
				    m->reqs[j].name, m->name, m->name);
	}
}

int
cmd_apply(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "dry-run", no_argument, NULL, 'n' },
		{ 0 }
	};
	struct tl_mf_errors errs = TL_MF_ERRORS_INIT;
	struct tl_mf_set **sets = NULL;
	struct cli_write_opts wo = { 0 };
	struct apply_arg aa = { NULL, 0 };
	size_t nfiles, i, j, total = 0;
	int c, rc, ex = TL_EXIT_OK, bad = 0;

	while ((c = getopt_long(argc, argv, "hn", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			wo.dry_run = 1;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind == argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	nfiles = (size_t)(argc - optind);
	if ((sets = calloc(nfiles, sizeof(*sets))) == NULL)
		return TL_EXIT_FAIL;
	for (i = 0; i < nfiles; i++) {
		const char *path = argv[optind + (int)i];

		rc = tl_mf_parse_file(path, tl_drv_names(), &sets[i], &errs);
		/* Over the size limit is bad input too, said in words. */
		if (rc == TL_EMANIFEST || rc == TL_ETOOBIG)
			bad = 1;
		else if (rc != 0) {
			cli_errx("%s: %s", path, tl_strerror(rc));
			ex = rc == ENOENT ? TL_EXIT_NOTFOUND : TL_EXIT_FAIL;
			goto out;
		} else
			total += tl_mf_set_count(sets[i]);
	}
	if (bad) {
		char line[1024];

		for (i = 0; i < errs.n; i++) {
			tl_mf_error_format(&errs.v[i], line, sizeof(line));
			fprintf(stderr, "%s\n", line);
		}
		if (errs.dropped)
			fprintf(stderr, "(and %zu more)\n", errs.dropped);
		cli_errx("invalid manifest: nothing applied");
		ex = TL_EXIT_REFUSED;
		goto out;
	}
	if ((aa.mods = calloc(total ? total : 1, sizeof(*aa.mods))) == NULL) {
		ex = TL_EXIT_FAIL;
		goto out;
	}
	for (i = 0; i < nfiles; i++)
		for (j = 0; j < tl_mf_set_count(sets[i]); j++) {
			const struct tl_mf_module *m =
			    tl_mf_set_module(sets[i], j);
			size_t k;

			for (k = 0; k < aa.n; k++)
				if (strcmp(aa.mods[k].d.name, m->name) == 0)
					break;
			if (k < aa.n) {
				cli_errx("%s:%d: module %s is also declared "
				    "in %s", m->file, m->line, m->name,
				    aa.mods[k].d.file);
				ex = TL_EXIT_REFUSED;
				goto out;
			}
			if ((rc = build(m, &aa.mods[aa.n++])) != 0) {
				if (rc != TL_EMANIFEST)
					cli_errx("%s: %s", m->file,
					    tl_strerror(rc));
				ex = cli_exit_for(rc);
				goto out;
			}
		}
	cli->dry_run = wo.dry_run;
	if (wo.dry_run && !cli->json) {
		wo.on_emit = cli_print_emitted;
		printf("dry run: would append\n");
	}
	ex = cli_write(cli, do_apply, &aa, &wo);
	if (ex == 0)
		for (i = 0; i < nfiles; i++)
			warn_unmapped(sets[i]);
	if (ex == 0 && !cli->json) {
		if (wo.dry_run && wo.emitted == 0)
			printf("  nothing: already as declared\n");
		else if (!wo.dry_run)
			printf("applied %zu module(s): %zu event(s) appended\n",
			    aa.n, wo.emitted);
	} else if (ex == 0)
		cli_json_done(cli, json_pack("{s:I,s:I,s:b}", "modules",
		    (json_int_t)aa.n, "events", (json_int_t)wo.emitted,
		    "dry_run", wo.dry_run));
out:
	for (i = 0; aa.mods != NULL && i < aa.n; i++)
		mod_free(&aa.mods[i]);
	free(aa.mods);
	for (i = 0; i < nfiles; i++)
		tl_mf_set_free(sets[i]);
	free(sets);
	tl_mf_errors_free(&errs);
	return ex;
}
