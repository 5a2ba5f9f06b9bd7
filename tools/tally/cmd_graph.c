/*
 * cmd_graph.c - tally graph: nodes, assignments, providers, edges.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "projections/grant.h"
#include "projections/graph.h"
#include "tally.h"

static const char usage[] =
"usage: tally graph [--json | --dot] [--at SEQ]\n"
"\n"
"The mesh as tally knows it: each node with its assignments, providers\n"
"and the types they grant, each module's requirements (presence and\n"
"instantiation edges) and their bindings.  --dot writes Graphviz:\n"
"nodes as clusters, providers as boxes, presence edges dashed,\n"
"instantiation edges solid to the bound provider (red when unbound).\n";

struct scan {
	json_t	*out;
	struct tl_txn *t;
	const struct tl_proj *p;
};

/* A record's body as JSON (values are [seq][msgpack]). */
static json_t *
rec_json(const void *val, size_t vlen)
{
	json_t *j;

	if (vlen < 9)
		return NULL;
	if ((j = tl_json_body((const uint8_t *)val + 8, vlen - 8)) != NULL)
		json_object_set_new(j, "seq", json_integer((json_int_t)
		    ((uint64_t)((const uint8_t *)val)[0] << 56 |
		    (uint64_t)((const uint8_t *)val)[1] << 48 |
		    (uint64_t)((const uint8_t *)val)[2] << 40 |
		    (uint64_t)((const uint8_t *)val)[3] << 32 |
		    (uint64_t)((const uint8_t *)val)[4] << 24 |
		    (uint64_t)((const uint8_t *)val)[5] << 16 |
		    (uint64_t)((const uint8_t *)val)[6] << 8 |
		    (uint64_t)((const uint8_t *)val)[7])));
	return j;
}

static int
add_rec(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct scan *s = arg;
	json_t *j = rec_json(val, vlen);

	(void)rest;
	if (j == NULL)
		return TL_ECORRUPT;
	json_object_del(j, "secrets");	/* ciphertext has no reader here */
	return json_array_append_new(s->out, j);
}

static json_t *
all(struct tl_txn *t, const struct tl_proj *p, const char *prefix)
{
	struct scan s = { json_array(), t, p };

	tl_rec_scan(t, p->graph, prefix, add_rec, &s);
	return s.out;
}

static json_t *
build(struct tl_txn *t, const struct tl_proj *p)
{
	json_t *g = json_object(), *mods, *m, *reqs, *r, *binds, *b;
	size_t i, j, k;

	json_object_set_new(g, "nodes", all(t, p, "n/"));
	json_object_set_new(g, "assignments", all(t, p, "a/"));
	json_object_set_new(g, "providers", all(t, p, "p/"));
	mods = all(t, p, "m/");
	reqs = all(t, p, "r/");
	binds = all(t, p, "b/");
	json_array_foreach(mods, i, m) {
		json_t *mine = json_array();
		const char *name = json_string_value(json_object_get(m,
		    "name"));

		json_object_del(m, "env");
		json_array_foreach(reqs, j, r) {
			json_t *rb;

			if (strcmp(json_string_value(json_object_get(r,
			    "module")), name) != 0)
				continue;
			rb = json_array();
			json_array_foreach(binds, k, b)
				if (strcmp(json_string_value(json_object_get(b,
				    "module")), name) == 0 &&
				    strcmp(json_string_value(json_object_get(b,
				    "req")), json_string_value(
				    json_object_get(r, "name"))) == 0)
					json_array_append(rb, b);
			json_object_set_new(r, "bindings", rb);
			json_object_del(r, "env");
			json_array_append(mine, r);
		}
		json_object_set_new(m, "requirements", mine);
	}
	json_object_set_new(g, "modules", mods);
	json_decref(reqs);
	json_decref(binds);
	return g;
}

static const char *
str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

static void
print_text(const json_t *g)
{
	const json_t *n, *a, *pv, *m, *r, *b, *ty;
	size_t i, j, k, l;

	json_array_foreach(json_object_get(g, "nodes"), i, n) {
		printf("node %s (%s)\n", str(n, "name"), str(n, "routable"));
		json_array_foreach(json_object_get(g, "assignments"), j, a) {
			if (strcmp(str(a, "node"), str(n, "name")) != 0)
				continue;
			printf("  %s [%s]", str(a, "module"), str(a, "expose"));
			json_array_foreach(json_object_get(g, "providers"), k,
			    pv) {
				if (strcmp(str(pv, "node"), str(n, "name")) ||
				    strcmp(str(pv, "module"), str(a, "module")))
					continue;
				printf(" provider %s:", str(pv, "id"));
				json_array_foreach(json_object_get(pv, "types"),
				    l, ty)
					printf(" %s (driver %s)", str(ty, "type"),
					    str(ty, "driver"));
			}
			putchar('\n');
		}
	}
	json_array_foreach(json_object_get(g, "modules"), i, m) {
		printf("module %s\n", str(m, "name"));
		json_array_foreach(json_object_get(m, "requirements"), j, r) {
			if (strcmp(str(r, "kind"), "presence") == 0) {
				printf("  %s: presence of %s\n", str(r, "name"),
				    str(r, "target"));
				continue;
			}
			printf("  %s: %s from %s (%s)\n", str(r, "name"),
			    str(r, "type"), str(r, "target"), str(r, "scope"));
			json_array_foreach(json_object_get(r, "bindings"), k,
			    b) {
				if (strcmp(str(b, "state"), "bound") == 0)
					printf("    %s -> %s (%s)\n",
					    str(b, "grant"), str(b, "provider"),
					    str(b, "reason"));
				else
					printf("    %s: ambiguous\n",
					    str(b, "grant"));
			}
		}
	}
}

static void
print_dot(const json_t *g)
{
	const json_t *n, *a, *pv, *m, *r, *b;
	size_t i, j, k;

	printf("digraph tally {\n  rankdir=LR;\n  node [fontname=\"sans\"];\n");
	json_array_foreach(json_object_get(g, "nodes"), i, n) {
		printf("  subgraph \"cluster_%s\" {\n    label=\"%s (%s)\";\n",
		    str(n, "name"), str(n, "name"), str(n, "routable"));
		json_array_foreach(json_object_get(g, "assignments"), j, a) {
			int is_p = 0;

			if (strcmp(str(a, "node"), str(n, "name")) != 0)
				continue;
			json_array_foreach(json_object_get(g, "providers"), k,
			    pv)
				if (!strcmp(str(pv, "node"), str(n, "name")) &&
				    !strcmp(str(pv, "module"), str(a, "module")))
					is_p = 1;
			printf("    \"%s@%s\" [label=\"%s\\n%s\"%s];\n",
			    str(a, "module"), str(a, "node"), str(a, "module"),
			    str(a, "expose"), is_p ?
			    ", shape=box3d, style=filled, fillcolor=lightblue" :
			    ", shape=box, style=rounded");
		}
		printf("  }\n");
	}
	json_array_foreach(json_object_get(g, "modules"), i, m) {
		json_array_foreach(json_object_get(m, "requirements"), j, r) {
			int bound = 0;

			json_array_foreach(json_object_get(r, "bindings"), k,
			    b) {
				const char *node = str(b, "node");
				char from[200];
				const json_t *a2;
				size_t x;

				if (strcmp(str(b, "state"), "bound") != 0)
					continue;
				bound = 1;
				if (*node) {
					snprintf(from, sizeof(from), "%s@%s",
					    str(m, "name"), node);
					printf("  \"%s\" -> \"%s\" [label=\"%s\","
					    " penwidth=2];\n", from,
					    str(b, "provider"), str(r, "name"));
					continue;
				}
				json_array_foreach(json_object_get(g,
				    "assignments"), x, a2)
					if (!strcmp(str(a2, "module"),
					    str(m, "name")))
						printf("  \"%s@%s\" -> \"%s\" "
						    "[label=\"%s\", penwidth=2];"
						    "\n", str(a2, "module"),
						    str(a2, "node"),
						    str(b, "provider"),
						    str(r, "name"));
			}
			if (strcmp(str(r, "kind"), "presence") == 0 || !bound) {
				const json_t *a2, *a3;
				size_t x, y;
				int presence = !strcmp(str(r, "kind"),
				    "presence");

				json_array_foreach(json_object_get(g,
				    "assignments"), x, a2) {
					if (strcmp(str(a2, "module"),
					    str(m, "name")))
						continue;
					json_array_foreach(json_object_get(g,
					    "assignments"), y, a3)
						if (!strcmp(str(a3, "module"),
						    str(r, "target")))
							printf("  \"%s@%s\" -> "
							    "\"%s@%s\" [style="
							    "dashed%s];\n",
							    str(a2, "module"),
							    str(a2, "node"),
							    str(a3, "module"),
							    str(a3, "node"),
							    presence ? "" :
							    ", color=red");
				}
			}
		}
	}
	/* Providers are named NODE/MODULE: alias them to their assignment. */
	json_array_foreach(json_object_get(g, "providers"), i, pv)
		printf("  \"%s\" [shape=point, style=invis];\n  \"%s\" -> "
		    "\"%s@%s\" [style=invis];\n", str(pv, "id"), str(pv, "id"),
		    str(pv, "module"), str(pv, "node"));
	printf("}\n");
}

struct graph_arg {
	int	dot;
};

static int
show(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p, void *arg)
{
	struct graph_arg *ga = arg;
	json_t *g = build(t, p);

	if (cli->json) {
		json_dumpf(g, stdout, JSON_COMPACT);
		putchar('\n');
	} else if (ga->dot)
		print_dot(g);
	else
		print_text(g);
	json_decref(g);
	return TL_EXIT_OK;
}

int
cmd_graph(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "dot", no_argument, NULL, 'd' },
		{ "at", required_argument, NULL, 'a' },
		{ 0 }
	};
	struct graph_arg ga = { 0 };
	uint64_t at = 0;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			ga.dot = 1;
			break;
		case 'a':
			if (cli_parse_u64(optarg, &at) != 0 || at == 0) {
				cli_errx("--at: not a sequence number: %s",
				    optarg);
				return TL_EXIT_USAGE;
			}
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	return cli_read(cli, at, show, &ga);
}
