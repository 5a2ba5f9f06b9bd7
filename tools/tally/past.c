/*
 * past.c - what the audit commands (history, replay, diff) share about
 * the log's past: a point in the log named by a sequence number or a
 * time, and the documents (status, grants, graph) as they were after an
 * event (an event in domain words: projections/describe.c).
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "projections/describe.h"
#include "projections/grant.h"
#include "projections/status.h"
#include "reactors/mesh.h"
#include "tally.h"

/* --- domain words --------------------------------------------------- */

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
			json_array_foreach(json_object_get(a, "requirements"),
			    k, r) {
				json_object_del(r, "last_verified");
				json_object_del(r, "checks");
				/* The rotator's count is of now, not of then. */
				json_object_del(json_object_get(r, "rotation"),
				    "old_sessions");
			}
		}
	}
}

struct sections {
	int		 status, grants, graph;
	uint64_t	 at;
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
		/* As tally status prints it: the mesh, once recorded by at. */
		{
			char mesh[TL_MESH_LEN + 1];
			uint64_t mseq = 0;

			if (tl_mesh_seq(t, mesh, &mseq) == 0 && mesh[0] != '\0' &&
			    mseq <= sc->at)
				json_object_set_new(doc, "mesh",
				    json_string(mesh));
		}
		cli_status_fencing(cli, t, p, doc, 0);
		/* As tally status prints it: the reminders, by today's clock. */
		{
			struct timespec now;
			json_t *at;

			clock_gettime(CLOCK_REALTIME, &now);
			if (tl_status_attention(t, p, (uint64_t)now.tv_sec *
			    1000000000u + (uint64_t)now.tv_nsec, 0, &at) == 0)
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
cli_past_at(struct tl_cli *cli, uint64_t at, unsigned parts, json_t **out)
{
	struct sections sc = { 0, 0, 0, 0, NULL, 0 };
	int ex;

	*out = NULL;
	sc.at = at;
	sc.status = (parts & CLI_PAST_STATUS) != 0;
	sc.grants = (parts & CLI_PAST_GRANTS) != 0;
	sc.graph = (parts & CLI_PAST_GRAPH) != 0;
	if ((ex = cli_read(cli, at, collect, &sc)) != TL_EXIT_OK) {
		json_decref(sc.out);
		return ex;
	}
	*out = sc.out;
	return TL_EXIT_OK;
}

int
cli_status_at(struct tl_cli *cli, uint64_t at, json_t **out)
{
	json_t *doc;
	int ex;

	*out = NULL;
	if (at == 0) {
		*out = json_pack("{s:[]}", "modules");
		return TL_EXIT_OK;
	}
	ex = cli_past_at(cli, at, CLI_PAST_STATUS, &doc);
	if (ex == TL_EXIT_OK)
		*out = json_incref(json_object_get(doc, "status"));
	json_decref(doc);
	return ex;
}
