/*
 * cmd_replay.c - tally replay: the graph, the grants and the status as
 * they were after a given event or at a given time, for audit and
 * debugging.  The projections are rebuilt up to that event inside a
 * transaction that is thrown away (cli_past_at in past.c), so the past
 * is looked at and never kept.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "projections/grant.h"
#include "projections/status.h"
#include "tally.h"

static const char usage[] =
"usage: tally replay --until SEQ|TIME [--status | --grants | --graph]\n"
"                    [--json]\n"
"\n"
"Shows the mesh as the log says it was right after event SEQ, or at\n"
"TIME (RFC 3339, \"2026-11-29T15:30:00Z\", \"…+01:00\", fractions allowed;\n"
"or a date: its midnight UTC): the last event at or before it.\n"
"\n"
"  --status   each module's status (the document `tally status --json`\n"
"             printed then)\n"
"  --grants   every grant: state, credential version, provider, reason\n"
"  --graph    nodes, modules, requirements, assignments, providers,\n"
"             bindings\n"
"\n"
"Without one of them, all three.  --json prints one document: with one\n"
"section, that section's; otherwise {\"seq\",\"ts\",\"status\",\"grants\",\n"
"\"graph\"}.  Verification times and counts are operational (kept\n"
"beside the log, not in it) and are left out: the log cannot say what\n"
"they were.\n";

/* --- text ------------------------------------------------------------ */

static const char *
s_(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

static void
print_status(const json_t *st)
{
	const json_t *m, *a, *r;
	size_t i, j, k;

	printf("status:\n");
	if (json_array_size(json_object_get(st, "modules")) == 0)
		printf("  no modules declared\n");
	json_array_foreach(json_object_get(st, "modules"), i, m) {
		printf("  %s: %s\n", s_(m, "module"), s_(m, "state"));
		json_array_foreach(json_object_get(m, "assignments"), j, a) {
			printf("    on %s: %s\n", s_(a, "node"), s_(a, "state"));
			json_array_foreach(json_object_get(a,
			    "requirements"), k, r) {
				printf("      %-14s %-13s %s", s_(r, "name"),
				    s_(r, "kind"), s_(r, "state"));
				if (*s_(r, "provider"))
					printf(" %s (%s)", s_(r, "provider"),
					    s_(r, "bound_by"));
				if (*s_(r, "grant_state"))
					printf(", grant %s",
					    s_(r, "grant_state"));
				if (*s_(r, "reason"))
					printf(": %s", s_(r, "reason"));
				putchar('\n');
			}
		}
	}
}

static void
print_grants(const json_t *gs)
{
	const json_t *g;
	size_t i;

	printf("grants:\n");
	if (json_array_size(gs) == 0)
		printf("  none\n");
	json_array_foreach(gs, i, g) {
		printf("  %-32s %-12s v%lld from %s", s_(g, "grant"),
		    s_(g, "state"), (long long)json_integer_value(
		    json_object_get(g, "version")), s_(g, "provider"));
		if (*s_(g, "reason"))
			printf(": %s", s_(g, "reason"));
		if (*s_(g, "drift"))
			printf(" [drift %s: %s]", s_(g, "drift"),
			    s_(g, "drift_reason"));
		putchar('\n');
	}
}

static void
print_graph(const json_t *g)
{
	const json_t *v, *w;
	size_t i, j;

	printf("graph: %zu node(s), %zu module(s), %zu assignment(s), "
	    "%zu provider(s), %zu binding(s)\n",
	    json_array_size(json_object_get(g, "nodes")),
	    json_array_size(json_object_get(g, "modules")),
	    json_array_size(json_object_get(g, "assignments")),
	    json_array_size(json_object_get(g, "providers")),
	    json_array_size(json_object_get(g, "bindings")));
	json_array_foreach(json_object_get(g, "nodes"), i, v) {
		printf("  node %s (%s):", s_(v, "name"), s_(v, "routable"));
		json_array_foreach(json_object_get(g, "assignments"), j, w)
			if (strcmp(s_(w, "node"), s_(v, "name")) == 0)
				printf(" %s", s_(w, "module"));
		putchar('\n');
	}
	json_array_foreach(json_object_get(g, "bindings"), i, v)
		printf("  %s -> %s (%s)\n", s_(v, "grant"), s_(v, "provider"),
		    s_(v, "reason"));
}

int
cmd_replay(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "until", required_argument, NULL, 'u' },
		{ "status", no_argument, NULL, 's' },
		{ "grants", no_argument, NULL, 'g' },
		{ "graph", no_argument, NULL, 'G' },
		{ 0 }
	};
	json_t *out = NULL;
	unsigned parts = 0;
	struct tl_txn *t;
	struct tl_event ev;
	const char *until = NULL;
	uint64_t seq = 0;
	char ts[64] = "";
	int c, ex, nsec;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			until = optarg;
			break;
		case 's':
			parts |= CLI_PAST_STATUS;
			break;
		case 'g':
			parts |= CLI_PAST_GRANTS;
			break;
		case 'G':
			parts |= CLI_PAST_GRAPH;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc || until == NULL) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	nsec = !!(parts & CLI_PAST_STATUS) + !!(parts & CLI_PAST_GRANTS) +
	    !!(parts & CLI_PAST_GRAPH);
	if (nsec == 0)
		parts = CLI_PAST_STATUS | CLI_PAST_GRANTS | CLI_PAST_GRAPH;
	if ((ex = cli_resolve_point(cli, until, &seq)) != TL_EXIT_OK)
		return ex;
	if (seq == 0) {
		cli_errx("the log is empty");
		return TL_EXIT_NOTFOUND;
	}
	if (tl_log_begin(cli->log, TL_TXN_RDONLY, &t) == 0) {
		if (tl_log_get(t, seq, &ev) == 0)
			tl_json_time(ev.ts, ts);
		tl_log_abort(t);
	}
	if ((ex = cli_past_at(cli, seq, parts, &out)) != TL_EXIT_OK)
		return ex;
	if (cli->json) {
		json_t *doc = out;

		if (nsec == 1)
			doc = json_object_get(out, parts & CLI_PAST_STATUS ?
			    "status" : parts & CLI_PAST_GRANTS ? "grants" :
			    "graph");
		else {
			json_object_set_new(out, "seq",
			    json_integer((json_int_t)seq));
			json_object_set_new(out, "ts", json_string(ts));
		}
		json_dumpf(doc, stdout, JSON_COMPACT);
		putchar('\n');
	} else {
		printf("as of event %llu (%s)\n", (unsigned long long)seq, ts);
		if (parts & CLI_PAST_STATUS)
			print_status(json_object_get(out, "status"));
		if (parts & CLI_PAST_GRANTS)
			print_grants(json_object_get(out, "grants"));
		if (parts & CLI_PAST_GRAPH)
			print_graph(json_object_get(out, "graph"));
	}
	json_decref(out);
	return TL_EXIT_OK;
}
