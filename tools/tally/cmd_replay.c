/*
 * cmd_replay.c - tally replay: the graph, the grants and the status as
 * they were after a given event or at a given time, for audit and
 * debugging.  The projections are rebuilt up to that event inside a
 * transaction that is thrown away (cli_read), so the past is looked at
 * and never kept.
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

/* --- points in the log --------------------------------------------- */

static int
two(const char *p)
{
	return isdigit((unsigned char)p[0]) && isdigit((unsigned char)p[1]) ?
	    (p[0] - '0') * 10 + (p[1] - '0') : -1;
}

/* RFC 3339 (or a bare date) -> ns since the epoch. */
static int
parse_time(const char *s, uint64_t *ns)
{
	struct tm tm;
	const char *p = s;
	int64_t secs, off = 0;
	uint64_t frac = 0, scale = 100000000u;
	time_t t;

	memset(&tm, 0, sizeof(tm));
	if (strlen(s) < 10 || !isdigit((unsigned char)s[0]) || s[4] != '-' ||
	    s[7] != '-')
		return -1;
	tm.tm_year = atoi(s) - 1900;
	tm.tm_mon = two(s + 5) - 1;
	tm.tm_mday = two(s + 8);
	p = s + 10;
	if (*p == 'T' || *p == 't' || *p == ' ') {
		if (strlen(p) < 9 || p[3] != ':' || p[6] != ':')
			return -1;
		tm.tm_hour = two(p + 1);
		tm.tm_min = two(p + 4);
		tm.tm_sec = two(p + 7);
		p += 9;
		if (*p == '.') {
			for (p++; isdigit((unsigned char)*p); p++) {
				frac += (uint64_t)(*p - '0') * scale;
				scale /= 10;
			}
		}
		if (*p == 'Z' || *p == 'z')
			p++;
		else if ((*p == '+' || *p == '-') && strlen(p) == 6 &&
		    p[3] == ':' && two(p + 1) >= 0 && two(p + 4) >= 0) {
			off = (int64_t)two(p + 1) * 3600 + two(p + 4) * 60;
			if (*p == '-')
				off = -off;
			p += 6;
		} else
			return -1;
	}
	if (*p != '\0' || tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 ||
	    tm.tm_hour < 0 || tm.tm_min < 0 || tm.tm_sec < 0 ||
	    tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
		return -1;
	if ((t = timegm(&tm)) == (time_t)-1)
		return -1;
	secs = (int64_t)t - off;
	if (secs < 0)
		return -1;
	*ns = (uint64_t)secs * 1000000000u + frac;
	return 0;
}

int
cli_resolve_point(struct tl_cli *cli, const char *s, uint64_t *seq)
{
	struct tl_txn *t;
	struct tl_iter *it = NULL;
	struct tl_event ev;
	uint64_t head = 0, when = 0, best = 0;
	int rc, ex = TL_EXIT_OK, is_seq = cli_parse_u64(s, seq) == 0;

	if (!is_seq && parse_time(s, &when) != 0) {
		cli_errx("%s: neither a sequence number nor an RFC 3339 time",
		    s);
		return TL_EXIT_USAGE;
	}
	if (cli->log == NULL && (rc = cli_open_log(cli, 0)) != 0)
		return rc;
	if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY, &t)) != 0)
		return cli_fail(cli, rc, "read the log");
	tl_log_last(t, &head, NULL);
	if (is_seq) {
		if (*seq > head) {
			cli_errx("the log ends at event %llu",
			    (unsigned long long)head);
			ex = TL_EXIT_NOTFOUND;
		}
		goto out;
	}
	/* The last event stamped at or before the time. */
	if ((rc = tl_iter_open(t, NULL, &it)) != 0) {
		ex = cli_fail(cli, rc, "read the log");
		goto out;
	}
	while ((rc = tl_iter_next(it, &ev)) == 0)
		if (ev.ts <= when)
			best = ev.seq;
	if (rc != TL_EEOF) {
		ex = cli_fail(cli, rc, "read the log");
		goto out;
	}
	if (best == 0) {
		cli_errx("nothing was recorded at or before %s", s);
		ex = TL_EXIT_NOTFOUND;
	}
	*seq = best;
out:
	tl_iter_close(it);
	tl_log_abort(t);
	return ex;
}

/* --- the documents ------------------------------------------------- */

/* Verification times live beside the log, not in it: out of a replay. */
static void
strip_operational(json_t *doc)
{
	json_t *mods = json_object_get(doc, "modules"), *m, *a, *r;
	json_t *one[1];
	size_t i, j, k, n;

	one[0] = doc;
	n = mods != NULL ? json_array_size(mods) : 1;
	for (i = 0; i < n; i++) {
		m = mods != NULL ? json_array_get(mods, i) : one[0];
		json_array_foreach(json_object_get(m, "assignments"), j, a) {
			json_object_del(a, "env_file_error");
			json_array_foreach(json_object_get(a, "requirements"),
			    k, r) {
				json_object_del(r, "last_verified");
				json_object_del(r, "checks");
			}
		}
	}
}

struct sections {
	int		 status, grants, graph;
	json_t		*out;
	int		 ex;
};

static int
grant_json(const struct tl_grant *g, void *arg)
{
	json_t *arr = arg, *j;

	j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I}", "grant", g->id,
	    "module", g->module, "requirement", g->req, "scope", g->scope,
	    "type", g->type, "provider", g->provider, "resource", g->resource,
	    "state", g->state, "version", (json_int_t)g->version);
	if (j == NULL)
		return ENOMEM;
	if (g->node[0])
		json_object_set_new(j, "node", json_string(g->node));
	if (g->reason[0])
		json_object_set_new(j, "reason", json_string(g->reason));
	if (g->drift[0]) {
		json_object_set_new(j, "drift", json_string(g->drift));
		json_object_set_new(j, "drift_reason",
		    json_string(g->drift_reason));
	}
	if (g->blocked[0])
		json_object_set_new(j, "migrations_blocked",
		    json_string(g->blocked));
	if (g->user[0])
		json_object_set_new(j, "user", json_string(g->user));
	if (g->object[0])
		json_object_set_new(j, TL_GRANT_OBJECT_KEY, json_string(g->object));
	json_object_set_new(j, "since_seq", json_integer((json_int_t)
	    g->state_seq));
	return json_array_append_new(arr, j) == 0 ? 0 : ENOMEM;
}

static int
rec_json(const char *rest, const void *val, size_t vlen, void *arg)
{
	json_t *arr = arg, *j;
	const uint8_t *v = val;
	uint64_t seq = 0;
	int i;

	(void)rest;
	if (vlen < 9 || (j = tl_json_body(v + 8, vlen - 8)) == NULL)
		return TL_ECORRUPT;
	for (i = 0; i < 8; i++)
		seq = seq << 8 | v[i];
	json_object_del(j, "secrets");	/* ciphertext: nothing to read */
	json_object_del(j, "env");
	json_object_set_new(j, "seq", json_integer((json_int_t)seq));
	return json_array_append_new(arr, j) == 0 ? 0 : ENOMEM;
}

static int
graph_json(struct tl_txn *t, const struct tl_proj *p, json_t **out)
{
	static const char *const parts[][2] = {
		{ "nodes", "n/" }, { "modules", "m/" },
		{ "requirements", "r/" }, { "assignments", "a/" },
		{ "providers", "p/" }, { "bindings", "b/" },
	};
	json_t *g = json_object();
	size_t i;
	int rc;

	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		json_t *arr = json_array();

		json_object_set_new(g, parts[i][0], arr);
		if ((rc = tl_rec_scan(t, p->graph, parts[i][1], rec_json,
		    arr)) != 0) {
			json_decref(g);
			return rc;
		}
	}
	*out = g;
	return 0;
}

static int
collect(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p,
    void *arg)
{
	struct sections *sc = arg;
	json_t *doc;
	int rc;

	sc->out = json_object();
	if (sc->status) {
		if ((rc = tl_status_all(t, p, &doc)) != 0)
			return cli_fail(cli, rc, "status");
		strip_operational(doc);
		/* As tally status prints it: the reminders, by today's clock. */
		{
			struct timespec now;
			json_t *at;

			clock_gettime(CLOCK_REALTIME, &now);
			if (tl_status_attention(t, p, (uint64_t)now.tv_sec *
			    1000000000u + (uint64_t)now.tv_nsec, &at) == 0)
				json_object_set_new(doc, "attention", at);
		}
		json_object_set_new(sc->out, "status", doc);
	}
	if (sc->grants) {
		doc = json_array();
		json_object_set_new(sc->out, "grants", doc);
		if ((rc = tl_grant_each(t, p, grant_json, doc)) != 0)
			return cli_fail(cli, rc, "grants");
	}
	if (sc->graph) {
		if ((rc = graph_json(t, p, &doc)) != 0)
			return cli_fail(cli, rc, "graph");
		json_object_set_new(sc->out, "graph", doc);
	}
	return TL_EXIT_OK;
}

int
cli_status_at(struct tl_cli *cli, uint64_t at, json_t **out)
{
	struct sections sc = { 1, 0, 0, NULL, 0 };
	int ex;

	*out = NULL;
	if (at == 0) {
		*out = json_pack("{s:[]}", "modules");
		return TL_EXIT_OK;
	}
	ex = cli_read(cli, at, collect, &sc);
	if (ex == TL_EXIT_OK)
		*out = json_incref(json_object_get(sc.out, "status"));
	json_decref(sc.out);
	return ex;
}

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
	struct sections sc = { 0, 0, 0, NULL, 0 };
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
			sc.status = 1;
			break;
		case 'g':
			sc.grants = 1;
			break;
		case 'G':
			sc.graph = 1;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc || until == NULL) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	nsec = sc.status + sc.grants + sc.graph;
	if (nsec == 0)
		sc.status = sc.grants = sc.graph = 1;
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
	if ((ex = cli_read(cli, seq, collect, &sc)) != TL_EXIT_OK) {
		json_decref(sc.out);
		return ex;
	}
	if (cli->json) {
		json_t *doc = sc.out;

		if (nsec == 1)
			doc = json_object_get(sc.out, sc.status ? "status" :
			    sc.grants ? "grants" : "graph");
		else {
			json_object_set_new(sc.out, "seq",
			    json_integer((json_int_t)seq));
			json_object_set_new(sc.out, "ts", json_string(ts));
		}
		json_dumpf(doc, stdout, JSON_COMPACT);
		putchar('\n');
	} else {
		printf("as of event %llu (%s)\n", (unsigned long long)seq, ts);
		if (sc.status)
			print_status(json_object_get(sc.out, "status"));
		if (sc.grants)
			print_grants(json_object_get(sc.out, "grants"));
		if (sc.graph)
			print_graph(json_object_get(sc.out, "graph"));
	}
	json_decref(sc.out);
	return TL_EXIT_OK;
}
