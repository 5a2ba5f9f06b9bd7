/*
 * cmd_diff.c - tally diff: what changed between two points of the log,
 * in domain words: the events in (FROM, TO] one sentence each, then
 * how each assignment's and requirement's state moved (the status
 * documents at both points compared).
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "projections/describe.h"
#include "tally.h"

static const char usage[] =
"usage: tally diff FROM TO [--json]\n"
"\n"
"What happened after event FROM up to and including event TO (each a\n"
"sequence number or an RFC 3339 time, as for tally replay; FROM may be\n"
"0, the empty log): one line per event in domain words (\"grant G\n"
"provisioned (v1)\", \"M/R bound to N/P (co-located)\", \"grant G rotated\n"
"v2 → v3\"), then the state changes of every assignment and\n"
"requirement.  --json: {\"from\",\"to\",\"events\":[{seq,ts,type,stream,\n"
"actor,summary}],\"changes\":[{what,from,to}]}.\n";

static const char *
s_(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

/* key -> state, flattened: "M@N" and "M@N REQ". */
static json_t *
flatten(const json_t *st)
{
	json_t *flat = json_object();
	const json_t *m, *a, *r;
	size_t i, j, k;
	char key[512], val[512];

	json_array_foreach(json_object_get(st, "modules"), i, m) {
		json_object_set_new(flat, s_(m, "module"), json_string(
		    s_(m, "state")));
		json_array_foreach(json_object_get(m, "assignments"), j, a) {
			snprintf(key, sizeof(key), "%s on %s", s_(m, "module"),
			    s_(a, "node"));
			json_object_set_new(flat, key, json_string(
			    s_(a, "state")));
			json_array_foreach(json_object_get(a, "requirements"),
			    k, r) {
				snprintf(key, sizeof(key), "%s on %s: %s",
				    s_(m, "module"), s_(a, "node"),
				    s_(r, "name"));
				snprintf(val, sizeof(val), "%s%s%s",
				    s_(r, "state"), *s_(r, "grant_state") ?
				    ", grant " : "", s_(r, "grant_state"));
				json_object_set_new(flat, key,
				    json_string(val));
			}
		}
	}
	return flat;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The changed keys between two flattened documents, sorted. */
static json_t *
changes(const json_t *a, const json_t *b)
{
	json_t *out = json_array(), *all = json_object();
	const char *k, **keys;
	json_t *v;
	size_t n = 0, i;

	json_object_foreach((json_t *)a, k, v)
		json_object_set(all, k, json_null());
	json_object_foreach((json_t *)b, k, v)
		json_object_set(all, k, json_null());
	keys = calloc(json_object_size(all) + 1, sizeof(*keys));
	json_object_foreach(all, k, v)
		if (keys != NULL)
			keys[n++] = k;
	if (keys != NULL)
		qsort(keys, n, sizeof(*keys), cmp_str);
	for (i = 0; i < n; i++) {
		const char *x = json_string_value(json_object_get(a, keys[i]));
		const char *y = json_string_value(json_object_get(b, keys[i]));

		if (x != NULL && y != NULL && strcmp(x, y) == 0)
			continue;
		json_array_append_new(out, json_pack("{s:s,s:s,s:s}", "what",
		    keys[i], "from", x ? x : "(none)", "to", y ? y :
		    "(gone)"));
	}
	free(keys);
	json_decref(all);
	return out;
}

int
cmd_diff(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	struct tl_filter f = { 0 };
	struct tl_txn *t = NULL;
	struct tl_iter *it = NULL;
	struct tl_event ev;
	json_t *st1 = NULL, *st2 = NULL, *f1 = NULL, *f2 = NULL;
	json_t *evs = NULL, *ch = NULL, *out = NULL;
	uint64_t from = 0, to = 0;
	int c, rc, ex;
	size_t i;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 2 != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (strcmp(argv[optind], "0") != 0 && (ex = cli_resolve_point(cli,
	    argv[optind], &from)) != TL_EXIT_OK)
		return ex;
	if ((ex = cli_resolve_point(cli, argv[optind + 1], &to)) !=
	    TL_EXIT_OK)
		return ex;
	if (to < from) {
		cli_errx("diff: TO (%llu) comes before FROM (%llu)",
		    (unsigned long long)to, (unsigned long long)from);
		return TL_EXIT_USAGE;
	}
	if ((ex = cli_status_at(cli, from, &st1)) != TL_EXIT_OK ||
	    (ex = cli_status_at(cli, to, &st2)) != TL_EXIT_OK)
		goto out;

	evs = json_array();
	if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY, &t)) != 0) {
		ex = cli_fail(cli, rc, "read the log");
		goto out;
	}
	f.from = from + 1;
	f.to = to;
	if (to > from && (rc = tl_iter_open(t, &f, &it)) != 0) {
		ex = cli_fail(cli, rc, "read the log");
		goto out;
	}
	while (it != NULL && (rc = tl_iter_next(it, &ev)) == 0) {
		char what[1024], ts[64];

		tl_describe(&ev, what, sizeof(what));
		tl_json_time(ev.ts, ts);
		json_array_append_new(evs, json_pack("{s:I,s:s,s:s,s:s,s:s,"
		    "s:s}", "seq", (json_int_t)ev.seq, "ts", ts, "type",
		    ev.type, "stream", ev.stream, "actor", ev.actor,
		    "summary", what));
	}
	if (it != NULL && rc != TL_EEOF) {
		ex = cli_fail(cli, rc, "read the log");
		goto out;
	}
	f1 = flatten(st1);
	f2 = flatten(st2);
	ch = changes(f1, f2);
	if (cli->json) {
		out = json_pack("{s:I,s:I,s:O,s:O}", "from", (json_int_t)from,
		    "to", (json_int_t)to, "events", evs, "changes", ch);
		json_dumpf(out, stdout, JSON_COMPACT);
		putchar('\n');
	} else {
		json_t *e;

		printf("from event %llu to event %llu: %zu event(s)\n",
		    (unsigned long long)from, (unsigned long long)to,
		    json_array_size(evs));
		json_array_foreach(evs, i, e)
			printf("  #%-6lld %s\n", (long long)json_integer_value(
			    json_object_get(e, "seq")), s_(e, "summary"));
		printf("state changes:%s\n", json_array_size(ch) ? "" :
		    " none");
		json_array_foreach(ch, i, e)
			printf("  %s: %s → %s\n", s_(e, "what"), s_(e, "from"),
			    s_(e, "to"));
	}
	ex = TL_EXIT_OK;
out:
	json_decref(out);
	json_decref(ch);
	json_decref(f1);
	json_decref(f2);
	json_decref(evs);
	json_decref(st1);
	json_decref(st2);
	tl_iter_close(it);
	tl_log_abort(t);
	return ex;
}
