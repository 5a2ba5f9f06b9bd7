/*
 * cmd_list.c - tally nodes | modules | providers: the mesh, listed from
 * the graph projection (and the grants projection for the counts).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "drivers/decl.h"
#include "projections/grant.h"
#include "projections/graph.h"
#include "tally.h"

static const char nodes_usage[] =
"usage: tally nodes [--json]\n"
"\n"
"The nodes of the mesh: name, routable name, and the modules assigned\n"
"there.\n";

static const char modules_usage[] =
"usage: tally modules [--json]\n"
"\n"
"The declared modules: the types each provides, its requirements, and\n"
"the nodes it is assigned to.\n";

static const char providers_usage[] =
"usage: tally providers [--tag TAG] [--json]\n"
"       tally providers --settings DRIVER|TYPE [--json]\n"
"\n"
"The providers: id (NODE/MODULE), where it runs, the types it grants\n"
"(with driver, the driver's tags and revocation policy, and what revoke\n"
"and purge do there) and how many grants it holds that are not revoked.\n"
"--tag TAG lists only the providers one of whose types' drivers carries\n"
"TAG (a requirement names a type; tags are how a person finds one).\n"
"--settings prints the settings a driver declares (tally assign --set,\n"
"--secret), from its declaration: a table of setting, kind, default and\n"
"meaning, in Markdown (the README's table is this output), or --json;\n"
"no home is needed.\n";

/*
 * A driver's settings as its declaration says (drivers/decl.h):
 * what the docs' settings tables are, so they cannot say otherwise
 * (tests/integration/04_docs.sh compares them).
 */
static int
print_settings(struct tl_cli *cli, const char *name)
{
	const struct tl_drv_decl *dd = tl_drv_decl_find(name);
	const struct tl_drv_setting *s;
	json_t *arr;

	if (dd == NULL)
		dd = tl_drv_decl_for_type(name);
	if (dd == NULL) {
		cli_errx("no driver or type '%s'", name);
		return TL_EXIT_NOTFOUND;
	}
	if (cli->json) {
		if ((arr = json_array()) == NULL)
			return TL_EXIT_FAIL;
		for (s = dd->settings; s != NULL && s->name != NULL; s++)
			json_array_append_new(arr, json_pack("{s:s,s:s?,s:b,"
			    "s:s,s:s}", "name", s->name, "default", s->dflt,
			    "secret", s->secret, "kind", tl_drv_kind_name(
			    s->kind), "meaning", s->description));
		cli_json_done(cli, json_pack("{s:s,s:o}", "driver", dd->name,
		    "settings", arr));
		return TL_EXIT_OK;
	}
	printf("| setting | kind | default | meaning |\n|---|---|---|---|\n");
	for (s = dd->settings; s != NULL && s->name != NULL; s++) {
		printf("| `%s` | %s | ", s->name, tl_drv_kind_name(s->kind));
		if (s->dflt == NULL)
			printf("required");
		else if (s->dflt[0] == '\0')
			printf("none");
		else
			printf("`%s`", s->dflt);
		printf(" | %s", s->description);
		if (s->secret)
			printf("; a secret: `--secret %s`, read from standard "
			    "input", s->name);
		printf(" |\n");
	}
	return TL_EXIT_OK;
}

static const char *
str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

/* One record of the graph as JSON, without seq and ciphertext. */
static int
collect(const char *rest, const void *val, size_t vlen, void *arg)
{
	json_t *out = arg, *j;

	(void)rest;
	if (vlen < 9 || (j = tl_json_body((const uint8_t *)val + 8,
	    vlen - 8)) == NULL)
		return TL_ECORRUPT;
	json_object_del(j, "secrets");
	return json_array_append_new(out, j) == 0 ? 0 : ENOMEM;
}

static json_t *
records(struct tl_txn *t, const struct tl_proj *p, const char *prefix)
{
	json_t *out = json_array();

	if (out != NULL && tl_rec_scan(t, p->graph, prefix, collect, out) != 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* The values of key k of the records in arr whose match is eq. */
static json_t *
pick(const json_t *arr, const char *match, const char *eq, const char *k)
{
	json_t *out = json_array();
	const json_t *e;
	size_t i;

	json_array_foreach(arr, i, e)
		if (strcmp(str(e, match), eq) == 0)
			json_array_append(out, json_object_get(e, k));
	return out;
}

static void
print_list(const char *label, const json_t *arr, const char *k)
{
	const json_t *e;
	size_t i;

	printf("  %s", label);
	if (json_array_size(arr) == 0)
		printf(" -");
	json_array_foreach(arr, i, e)
		printf("%s%s", i ? ", " : " ",
		    k ? str(e, k) : json_string_value(e));
	putchar('\n');
}

static int
emit(struct tl_cli *cli, json_t *doc, const char *key)
{
	if (cli->json) {
		json_t *top = json_pack("{s:O}", key, doc);

		json_dumpf(top, stdout, JSON_COMPACT);
		putchar('\n');
		json_decref(top);
	}
	json_decref(doc);
	return TL_EXIT_OK;
}

static int
nodes_cb(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p,
    void *arg)
{
	json_t *nodes = records(t, p, "n/"), *asg = records(t, p, "a/"), *n;
	size_t i;

	(void)arg;
	if (nodes == NULL || asg == NULL) {
		json_decref(nodes);
		json_decref(asg);
		return cli_fail(cli, TL_ECORRUPT, "nodes");
	}
	json_array_foreach(nodes, i, n) {
		json_t *mods = pick(asg, "node", str(n, "name"), "module");

		if (!cli->json) {
			printf("%s (%s)\n", str(n, "name"), str(n, "routable"));
			print_list("modules:", mods, NULL);
		}
		json_object_set_new(n, "modules", mods);
	}
	if (!cli->json && json_array_size(nodes) == 0)
		printf("no nodes (tally node add NAME --routable-name HOST "
		    "--key-out FILE)\n");
	json_decref(asg);
	return emit(cli, nodes, "nodes");
}

static int
modules_cb(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p,
    void *arg)
{
	json_t *mods = records(t, p, "m/"), *asg = records(t, p, "a/");
	json_t *reqs = records(t, p, "r/"), *m, *out = json_array();
	size_t i, j;

	(void)arg;
	if (mods == NULL || asg == NULL || reqs == NULL || out == NULL) {
		json_decref(mods);
		json_decref(asg);
		json_decref(reqs);
		json_decref(out);
		return cli_fail(cli, TL_ECORRUPT, "modules");
	}
	json_array_foreach(mods, i, m) {
		const char *name = str(m, "name");
		json_t *o = json_object(), *types = json_array(), *rq, *e;

		json_array_foreach(json_object_get(m, "provides"), j, e)
			json_array_append(types, json_object_get(e, "type"));
		rq = pick(reqs, "module", name, "name");
		json_object_set_new(o, "name", json_string(name));
		json_object_set(o, "digest", json_object_get(m, "digest"));
		json_object_set_new(o, "provides", types);
		json_object_set_new(o, "requires", rq);
		json_object_set_new(o, "nodes", pick(asg, "module", name,
		    "node"));
		if (!cli->json) {
			printf("%s\n", name);
			print_list("provides:", types, NULL);
			print_list("requires:", rq, NULL);
			print_list("nodes:   ", json_object_get(o, "nodes"),
			    NULL);
		}
		json_array_append_new(out, o);
	}
	if (!cli->json && json_array_size(out) == 0)
		printf("no modules (tally apply MANIFEST.yaml)\n");
	json_decref(mods);
	json_decref(asg);
	json_decref(reqs);
	return emit(cli, out, "modules");
}

/* Grants not revoked, by provider id. */
static int
count_grant(const struct tl_grant *g, void *arg)
{
	json_t *counts = arg;
	json_t *n = json_object_get(counts, g->provider);

	if (strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0)
		return 0;
	json_object_set_new(counts, g->provider, json_integer(
	    json_integer_value(n) + 1));
	return 0;
}

/*
 * Adds to a provider's type e what its driver declares (tags, what
 * revoke and purge do); whether one of the tags is tag.
 */
static int
describe_type(json_t *e, const char *tag)
{
	const struct tl_drv_decl *dd = tl_drv_decl_find(str(e, "driver"));
	const struct tl_drv_revocation *rv;
	json_t *tags;
	size_t k;

	if (dd == NULL)
		return 0;
	if ((tags = json_array()) != NULL) {
		for (k = 0; dd->tags != NULL && dd->tags[k] != NULL; k++)
			json_array_append_new(tags, json_string(dd->tags[k]));
		json_object_set_new(e, "tags", tags);
	}
	if ((rv = dd->revocation) != NULL)
		json_object_set_new(e, "revocation", json_pack(
		    "{s:b,s:b,s:s,s:s,s:s}", "destroys", rv->destroys,
		    "retain", rv->retain, "revoke", rv->revoke ? rv->revoke :
		    "", "retained", rv->retain_means ? rv->retain_means : "",
		    "purge", rv->purge ? rv->purge : ""));
	/* How a deposed leader is kept off it (drivers/decl.h). */
	json_object_set_new(e, "fencing", json_pack("{s:s,s:s,s:s}", "kind",
	    tl_drv_fencing_name(dd->fencing ? dd->fencing->kind :
	    TL_DRV_FENCE_NONE), "how", dd->fencing && dd->fencing->how ?
	    dd->fencing->how : "the driver declares no fence", "window",
	    dd->fencing && dd->fencing->window ? dd->fencing->window :
	    "a deposed leader's calls are not refused by the provider"));
	return tag != NULL && tl_drv_has_tag(dd, tag);
}

static void
print_type(const json_t *e)
{
	const json_t *tags = json_object_get(e, "tags"), *x, *rv;
	size_t k;

	printf("  %s (driver %s, revoke %s", str(e, "type"), str(e, "driver"),
	    str(e, "revoke"));
	if (json_array_size(tags) > 0) {
		printf(", tags");
		json_array_foreach(tags, k, x)
			printf("%s%s", k == 0 ? " " : ", ",
			    json_string_value(x));
	}
	printf(")\n");
	if ((x = json_object_get(e, "fencing")) != NULL)
		printf("    fenced: %s (%s)\n    window: %s\n", str(x, "kind"),
		    str(x, "how"), str(x, "window"));
	if ((rv = json_object_get(e, "revocation")) == NULL)
		return;
	printf("    revoke: %s%s\n", str(rv, "revoke"),
	    json_is_true(json_object_get(rv, "destroys")) ?
	    " (destroys data)" : "");
	if (json_is_true(json_object_get(rv, "retain")))
		printf("    retain: %s\n", str(rv, "retained"));
	else
		printf("    retain: not possible (revoking drops the data)\n");
	printf("    purge: %s\n", str(rv, "purge"));
}

static int
providers_cb(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p,
    void *arg)
{
	json_t *pvs = records(t, p, "p/"), *counts = json_object(), *pv, *e;
	const char *tag = arg;
	size_t i, j;
	int rc;

	if (pvs == NULL || counts == NULL) {
		json_decref(pvs);
		json_decref(counts);
		return cli_fail(cli, TL_ECORRUPT, "providers");
	}
	if ((rc = tl_grant_each(t, p, count_grant, counts)) != 0) {
		json_decref(pvs);
		json_decref(counts);
		return cli_fail(cli, rc, "grants");
	}
	for (i = 0; i < json_array_size(pvs); ) {
		json_int_t n;
		int tagged = tag == NULL;

		pv = json_array_get(pvs, i);
		n = json_integer_value(json_object_get(counts, str(pv, "id")));
		json_object_set_new(pv, "grants", json_integer(n));
		json_array_foreach(json_object_get(pv, "types"), j, e)
			tagged |= describe_type(e, tag);
		if (!tagged) {
			json_array_remove(pvs, i);
			continue;
		}
		i++;
		if (cli->json)
			continue;
		printf("%s on %s (module %s): %lld grant(s)\n", str(pv, "id"),
		    str(pv, "node"), str(pv, "module"), (long long)n);
		json_array_foreach(json_object_get(pv, "types"), j, e)
			print_type(e);
	}
	if (!cli->json && json_array_size(pvs) == 0 && tag != NULL)
		printf("no providers with tag %s\n", tag);
	else if (!cli->json && json_array_size(pvs) == 0)
		printf("no providers (assign a module that provides a "
		    "type)\n");
	json_decref(counts);
	return emit(cli, pvs, "providers");
}

static int
list(struct tl_cli *cli, int argc, char **argv, const char *usage,
    cli_read_fn fn)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	return cli_read(cli, 0, fn, NULL);
}

int
cmd_nodes(struct tl_cli *cli, int argc, char **argv)
{
	return list(cli, argc, argv, nodes_usage, nodes_cb);
}

int
cmd_modules(struct tl_cli *cli, int argc, char **argv)
{
	return list(cli, argc, argv, modules_usage, modules_cb);
}

int
cmd_providers(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS,
	    { "tag", required_argument, NULL, 't' },
	    { "settings", required_argument, NULL, 's' }, { 0 } };
	char *tag = NULL, *settings = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "ht:", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			tag = optarg;
			break;
		case 's':
			settings = optarg;
			break;
		CLI_COMMON_CASES(cli, providers_usage);
		}
	}
	if (optind != argc) {
		fputs(providers_usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (settings != NULL)
		return print_settings(cli, settings);
	return cli_read(cli, 0, providers_cb, tag);
}
