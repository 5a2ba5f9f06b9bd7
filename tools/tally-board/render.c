/*
 * render.c - the board's views of its store: a snapshot document, a
 * terminal page, a static HTML page with the mesh drawn by Graphviz.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "board.h"
#include "core/json.h"
#include "core/vec.h"

#define BD_ROWS_MAX	500
#define BD_DRAW_MAX	300
/* A node's row names this many of its modules, then counts the rest. */
#define BD_NODE_MODULES	25
#define BD_NEEDS_MAX	200

static const char *
str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s != NULL ? s : "";
}

static json_int_t
num(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* --- the snapshot ------------------------------------------------------ */

static int
collect(const char *key, json_t *doc, void *arg)
{
	(void)key;
	return json_array_append(arg, doc);
}

static void
add_problem(json_t *probs, const char *what, const char *detail,
    json_int_t seq)
{
	json_array_append_new(probs, json_pack("{s:s,s:s,s:I}", "what", what,
	    "detail", detail, "seq", seq));
}

json_t *
bd_snapshot(struct bd_store *st, const struct bd_kept *kept)
{
	json_t *s, *nodes, *mods, *asg, *provs, *grants;
	json_t *bystate = json_object();
	json_t *rots = json_array(), *probs = json_array(), *g, *v;
	size_t i, ready = 0, unreach = 0;
	const char *k;
	char buf[1024];

	if (kept != NULL) {
		nodes = bd_kept_docs(kept, BD_KEPT_NODES);
		mods = bd_kept_docs(kept, BD_KEPT_MODULES);
		asg = bd_kept_docs(kept, BD_KEPT_ASSIGNMENTS);
		provs = bd_kept_docs(kept, BD_KEPT_PROVIDERS);
		grants = bd_kept_docs(kept, BD_KEPT_GRANTS);
	} else {
		bd_each(st, "n/", collect, nodes = json_array());
		bd_each(st, "m/", collect, mods = json_array());
		bd_each(st, "a/", collect, asg = json_array());
		bd_each(st, "p/", collect, provs = json_array());
		bd_each(st, "g/", collect, grants = json_array());
	}
	json_array_foreach(asg, i, v)
		if (json_is_true(json_object_get(v, "ready")))
			ready++;
	json_array_foreach(provs, i, v)
		if (json_is_false(json_object_get(v, "reachable"))) {
			unreach++;
			snprintf(buf, sizeof(buf), "provider %s unreachable: %s",
			    str(v, "id"), str(v, "reason"));
			add_problem(probs, "unreachable", buf, 0);
		}
	json_array_foreach(grants, i, g) {
		const char *state = str(g, "state");
		json_t *rot = json_object_get(g, "rotation"), *d;

		if (*state == '\0')
			state = "unknown";
		json_object_set_new(bystate, state, json_integer(
		    num(bystate, state) + 1));
		if ((d = json_object_get(g, "drift")) != NULL) {
			snprintf(buf, sizeof(buf), "grant %s drifted: %s — %s",
			    str(g, "grant"), str(d, "kind"), str(d, "reason"));
			add_problem(probs, "drift", buf, num(d, "seq"));
		}
		if (strcmp(state, "failed") == 0) {
			snprintf(buf, sizeof(buf), "grant %s failed: %s",
			    str(g, "grant"), str(g, "reason"));
			add_problem(probs, "failed", buf, num(g, "state_seq"));
		} else if (strcmp(state, "ambiguous") == 0) {
			snprintf(buf, sizeof(buf), "%s is ambiguous: choose a "
			    "provider with tally bind", str(g, "grant"));
			add_problem(probs, "ambiguous", buf,
			    num(g, "state_seq"));
		}
		if (json_object_get(g, "blocked") != NULL) {
			snprintf(buf, sizeof(buf), "grant %s: migrations "
			    "blocked: %s", str(g, "grant"), str(g, "blocked"));
			add_problem(probs, "blocked", buf, num(g, "state_seq"));
		}
		if (rot != NULL) {
			json_t *waiting = json_array(), *h;
			json_int_t to = num(rot, "to");

			json_object_foreach(json_object_get(g, "holders"), k, h)
				if (num(h, "acked") < to)
					json_array_append_new(waiting,
					    json_pack("{s:s,s:I,s:I}", "holder",
					    k, "delivered", num(h, "delivered"),
					    "acked", num(h, "acked")));
			json_array_append_new(rots, json_pack("{s:s,s:I,s:I,"
			    "s:s,s:b,s:o}", "grant", str(g, "grant"), "from",
			    num(rot, "from"), "to", to, "since",
			    str(rot, "since"), "active",
			    json_is_true(json_object_get(rot, "active")),
			    "waiting", waiting));
		}
	}
	s = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:O}",
	    "nodes", nodes, "modules", mods, "assignments", asg,
	    "providers", provs, "grants", grants, "rotations", rots,
	    "problems", probs, "meta", bd_meta(st));
	json_object_set_new(s, "counts", json_pack("{s:I,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:o,s:I,s:I}", "nodes", (json_int_t)json_array_size(
	    json_object_get(s, "nodes")), "modules", (json_int_t)
	    json_array_size(json_object_get(s, "modules")), "assignments",
	    (json_int_t)json_array_size(json_object_get(s, "assignments")),
	    "ready", (json_int_t)ready, "providers", (json_int_t)
	    json_array_size(json_object_get(s, "providers")), "unreachable",
	    (json_int_t)unreach, "grants", (json_int_t)json_array_size(
	    json_object_get(s, "grants")), "grants_by_state", bystate,
	    "rotations", (json_int_t)json_array_size(json_object_get(s,
	    "rotations")), "problems", (json_int_t)json_array_size(
	    json_object_get(s, "problems"))));
	return s;
}

/*
 * The states tally status derives (bd_mirror_status's document st, a
 * reference the snapshot takes over) put beside the board's own view:
 * "status" as is; each module's, assignment's and grant's "status" and
 * "status_reason"; the ready tile counted from it; and "unhealthy", the
 * requirements status calls unhealthy, with their reasons.  For a page
 * (page), the modules and grants past the rows it shows get none.
 */
/*
 * An index of the first limit (0: all) documents of arr by their key:
 * each one's place in arr.
 */
static json_t *
index_by(const json_t *arr, const char *k1, const char *k2, size_t limit)
{
	json_t *ix = json_object(), *v;
	char key[512];
	size_t i;

	if (ix == NULL)
		return NULL;
	json_array_foreach(arr, i, v) {
		if (limit > 0 && i == limit)
			break;
		if (k2 != NULL)
			snprintf(key, sizeof(key), "%s@%s", str(v, k1),
			    str(v, k2));
		else
			snprintf(key, sizeof(key), "%s", str(v, k1));
		json_object_set_new(ix, key, json_integer((json_int_t)i));
	}
	return ix;
}

/*
 * Sets name to value (and name2 to value2 unless NULL) on the document
 * of arr that ix places at key, if any: on a copy put in its place, for
 * a snapshot's documents may be the ones the board keeps (kept.c),
 * which it never changes.
 */
static void
set_state(json_t *arr, size_t i, const char *name, const char *value,
    const char *name2, const char *value2)
{
	json_t *doc;

	if ((doc = json_copy(json_array_get(arr, i))) == NULL)
		return;
	json_object_set_new(doc, name, json_string(value));
	if (name2 != NULL)
		json_object_set_new(doc, name2, json_string(value2));
	json_array_set_new(arr, i, doc);
}

static void
set_on(json_t *arr, const json_t *ix, const char *key, const char *name,
    const char *value, const char *name2, const char *value2)
{
	json_t *at = json_object_get(ix, key);

	if (at != NULL)
		set_state(arr, (size_t)json_integer_value(at), name, value,
		    name2, value2);
}

size_t
bd_module_summary(const json_t *m, json_t *bad)
{
	const char *mod = str(m, "module");
	const json_t *a, *r;
	size_t j, k, ready = 0;

	json_array_foreach(json_object_get(m, "assignments"), j, a) {
		if (strncmp(str(a, "state"), "ready", 5) == 0)
			ready++;
		json_array_foreach(json_object_get(a, "requirements"), k, r) {
			json_t *u;

			if (strcmp(str(r, "state"), "unhealthy") != 0)
				continue;
			u = json_pack("{s:s,s:s,s:s,s:s}", "module", mod, "node",
			    str(a, "node"), "requirement", str(r, "name"),
			    "reason", str(r, "reason"));
			/* A lost grant's: what answers it. */
			if (u != NULL && json_object_get(r, "question") != NULL)
				json_object_set(u, "question",
				    json_object_get(r, "question"));
			json_array_append_new(bad, u);
		}
	}
	return ready;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* TALLY_BOARD_CHECK: the summary against the whole walk; fatal. */
static void
check_summary(const json_t *st, size_t ready, const json_t *bad)
{
	json_t *all = json_array(), *m;
	size_t i, n = 0;

	json_array_foreach(json_object_get(st, "modules"), i, m)
		n += bd_module_summary(m, all);
	if (n != ready || !json_equal(all, bad)) {
		fprintf(stderr, "tally-board: the kept summary differs from "
		    "status's: ready %zu, %zu unhealthy; walked: ready %zu, "
		    "%zu unhealthy\n", ready, json_array_size(bad), n,
		    json_array_size(all));
		exit(1);
	}
	json_decref(all);
}

/*
 * The page's fast way: the mirror's ready count and unhealthy modules
 * (kept per module, summary), and states set on the shown rows only,
 * found through the status index.  With TALLY_BOARD_CHECK, the whole
 * walk as well, and a difference is fatal.
 */
static int
summary_rows(json_t *snap, const json_t *st, const json_t *sum, size_t rows,
    size_t *ready, json_t *bad)
{
	const json_t *six = json_object_get(st, "index");
	const json_t *smods = json_object_get(st, "modules"), *sick, *m, *v;
	const json_t *a, *r;
	json_t *marr = json_object_get(snap, "modules");
	json_t *garr = json_object_get(snap, "grants");
	const char *mod, **names;
	size_t i, j, k, n;

	*ready = (size_t)json_integer_value(json_object_get(sum, "ready"));
	sick = json_object_get(sum, "sick");
	/* In module order, as the walk of status's modules lists them. */
	if ((names = calloc(json_object_size(sick) + 1, sizeof(*names))) ==
	    NULL)
		return ENOMEM;
	n = 0;
	json_object_foreach((json_t *)sick, mod, v)
		names[n++] = mod;
	qsort(names, n, sizeof(*names), cmp_str);
	for (i = 0; i < n; i++)
		json_array_extend(bad, json_object_get(sick, names[i]));
	free(names);
	for (i = 0; i < rows && i < json_array_size(marr); i++) {
		mod = str(json_array_get(marr, i), "name");
		if ((v = json_object_get(six, mod)) != NULL &&
		    (m = json_array_get(smods, (size_t)json_integer_value(v)))
		    != NULL)
			set_state(marr, i, "status", str(m, "state"), NULL,
			    NULL);
	}
	for (i = 0; i < rows && i < json_array_size(garr); i++) {
		const json_t *g = json_array_get(garr, i);

		if ((v = json_object_get(six, str(g, "module"))) == NULL)
			continue;
		m = json_array_get(smods, (size_t)json_integer_value(v));
		json_array_foreach(json_object_get(m, "assignments"), j, a)
			json_array_foreach(json_object_get(a, "requirements"),
			    k, r)
				if (strcmp(str(r, "grant"), str(g, "grant")) == 0)
					set_state(garr, i, "status", str(r,
					    "state"), "status_reason", str(r,
					    "reason"));
	}
	return 0;
}

void
bd_with_status(json_t *snap, json_t *st, int page)
{
	json_t *marr = json_object_get(snap, "modules");
	/*
	 * A page shows BD_ROWS_MAX rows of a table, all when it draws;
	 * TALLY_BOARD_CHECK takes the large mesh's way on any mesh, so
	 * that the tests check it.
	 */
	size_t rows = page && (json_array_size(marr) > BD_DRAW_MAX ||
	    getenv("TALLY_BOARD_CHECK") != NULL) ? BD_ROWS_MAX : 0;
	json_t *aarr = json_object_get(snap, "assignments");
	json_t *garr = json_object_get(snap, "grants");
	json_t *sum = json_incref(json_object_get(st, "summary"));
	json_t *mods = NULL, *grants = NULL, *asg = NULL, *six;
	json_t *bad = json_array(), *m, *a, *r;
	size_t i, j, k, ready = 0;
	char key[512];

	json_object_del(st, "summary");
	/* A page over a large mesh: the mirror's summary, the shown rows. */
	if (rows && sum != NULL && bad != NULL) {
		summary_rows(snap, st, sum, rows, &ready, bad);
		if (getenv("TALLY_BOARD_CHECK") != NULL)
			check_summary(st, ready, bad);
		json_decref(sum);
		goto rest;
	}
	json_decref(sum);
	mods = index_by(marr, "name", NULL, rows);
	grants = index_by(garr, "grant", NULL, rows);
	/*
	 * A page's assignments are many and all shown (its nodes' rows):
	 * they are looked up in status's modules by the kept index (the
	 * mirror's), not given copies.
	 */
	asg = rows ? NULL : index_by(aarr, "module", "node", 0);
	json_array_foreach(json_object_get(st, "modules"), i, m) {
		const char *mod = str(m, "module");

		set_on(marr, mods, mod, "status", str(m, "state"), NULL,
		    NULL);
		ready += bd_module_summary(m, bad);
		json_array_foreach(json_object_get(m, "assignments"), j, a) {
			snprintf(key, sizeof(key), "%s@%s", mod, str(a,
			    "node"));
			if (asg != NULL)
				set_on(aarr, asg, key, "status", str(a, "state"),
				    NULL, NULL);
			json_array_foreach(json_object_get(a, "requirements"),
			    k, r)
				if (*str(r, "grant"))
					set_on(garr, grants, str(r, "grant"),
					    "status", str(r, "state"),
					    "status_reason", str(r, "reason"));
		}
	}
	json_decref(mods);
	json_decref(asg);
	json_decref(grants);
rest:
	six = json_incref(json_object_get(st, "index"));
	json_object_del(st, "index");
	json_object_set_new(snap, "status", st);
	if (rows && six != NULL) {
		json_object_set_new(snap, "status_index", six);
		six = NULL;
	}
	json_decref(six);
	json_object_set_new(snap, "unhealthy", bad);
	json_object_set(snap, "agents", json_object_get(st, "agents"));
	json_object_set(snap, "off_record", json_object_get(st, "off_record"));
	json_object_set(snap, "attention", json_object_get(st, "attention"));
	json_object_set(snap, "control_plane", json_object_get(st,
	    "control_plane"));
	json_object_set(snap, "fencing", json_object_get(st, "fencing"));
	json_object_set(snap, "since_yesterday", json_object_get(st,
	    "since_yesterday"));
	json_object_set_new(json_object_get(snap, "counts"), "ready",
	    json_integer((json_int_t)ready));
}

/* --- text --------------------------------------------------------------- */

void
bd_render_text(FILE *fp, const json_t *snap, int ansi)
{
	const json_t *c = json_object_get(snap, "counts");
	const json_t *meta = json_object_get(snap, "meta"), *v, *w;
	const char *k;
	size_t i, j;

	if (ansi)
		fputs("\033[H\033[2J", fp);
	fprintf(fp, "tally-board — %lld event(s), up to #%lld (%s)\n\n",
	    (long long)num(meta, "applied"), (long long)num(meta, "pos"),
	    *str(meta, "last_ts") ? str(meta, "last_ts") : "nothing yet");
	fprintf(fp, "nodes %lld   modules %lld   assignments %lld (%lld "
	    "ready)   providers %lld (%lld unreachable)   grants %lld\n",
	    (long long)num(c, "nodes"), (long long)num(c, "modules"),
	    (long long)num(c, "assignments"), (long long)num(c, "ready"),
	    (long long)num(c, "providers"), (long long)num(c, "unreachable"),
	    (long long)num(c, "grants"));
	fprintf(fp, "grants by state:");
	json_object_foreach(json_object_get(c, "grants_by_state"), k, v)
		fprintf(fp, "  %s %lld", k, (long long)json_integer_value(v));
	fputc('\n', fp);
	fprintf(fp, "\nnodes:\n");
	json_array_foreach(json_object_get(snap, "nodes"), i, v) {
		fprintf(fp, "  %-16s %-20s", str(v, "name"), str(v, "routable"));
		json_array_foreach(json_object_get(snap, "assignments"), j, w)
			if (strcmp(str(w, "node"), str(v, "name")) == 0)
				fprintf(fp, " %s%s", str(w, "module"),
				    json_is_true(json_object_get(w, "ready")) ?
				    "" : "*");
		fputc('\n', fp);
	}
	fprintf(fp, "\nproviders:\n");
	json_array_foreach(json_object_get(snap, "providers"), i, v)
		fprintf(fp, "  %-24s %s%s%s\n", str(v, "id"),
		    json_is_false(json_object_get(v, "reachable")) ?
		    "UNREACHABLE " : "", str(v, "reason"),
		    json_is_false(json_object_get(v, "reachable")) ? "" : "ok");
	fprintf(fp, "\ngrants:\n");
	json_array_foreach(json_object_get(snap, "grants"), i, v)
		fprintf(fp, "  %-32s %-12s v%lld  %s\n", str(v, "grant"),
		    str(v, "state"), (long long)num(v, "version"),
		    str(v, "provider"));
	fprintf(fp, "\nrotations in progress: %zu\n",
	    json_array_size(json_object_get(snap, "rotations")));
	json_array_foreach(json_object_get(snap, "rotations"), i, v) {
		fprintf(fp, "  %s v%lld → v%lld since %s, waiting on:",
		    str(v, "grant"), (long long)num(v, "from"),
		    (long long)num(v, "to"), str(v, "since"));
		json_array_foreach(json_object_get(v, "waiting"), j, w)
			fprintf(fp, " %s", str(w, "holder"));
		if (json_array_size(json_object_get(v, "waiting")) == 0)
			fprintf(fp, " nobody (retiring the old one)");
		fputc('\n', fp);
	}
	fprintf(fp, "\nproblems: %zu\n",
	    json_array_size(json_object_get(snap, "problems")));
	json_array_foreach(json_object_get(snap, "problems"), i, v)
		fprintf(fp, "  %s\n", str(v, "detail"));
	fflush(fp);
}

/* --- Graphviz ------------------------------------------------------------ */

struct sb {
	char	*p;
	size_t	 len, cap;
	int	 err;
};

static void
sb_add(struct sb *b, const char *s, size_t n)
{
	if (b->err)
		return;
	/* From 4 KiB: a board is a few of them. */
	if (b->len + n + 1 > b->cap && (n >= SIZE_MAX - b->len ||
	    tl_vec_grow(&b->p, &b->cap, b->len + n + 1 < 4096 ? 4096 :
	    b->len + n + 1, 1) != 0)) {
		b->err = 1;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
sb_s(struct sb *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

/* A DOT quoted string. */
static void
sb_q(struct sb *b, const char *s)
{
	sb_s(b, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			sb_s(b, "\\");
		if ((unsigned char)*s >= 0x20)
			sb_add(b, s, 1);
	}
	sb_s(b, "\"");
}

static const char *
state_color(const char *state, int drift)
{
	if (drift)
		return "#c62828";
	if (strcmp(state, "provisioned") == 0)
		return "#2e7d32";
	if (strcmp(state, "failed") == 0 || strcmp(state, "missing") == 0 ||
	    strcmp(state, "ambiguous") == 0)
		return "#c62828";
	if (strcmp(state, "revoked") == 0 || strcmp(state, "purged") == 0)
		return "#9e9e9e";
	return "#ef6c00";
}

char *
bd_render_dot(const json_t *snap)
{
	struct sb b = { NULL, 0, 0, 0 };
	const json_t *n, *a, *g, *p;
	size_t i, j, k;
	char id[600];

	sb_s(&b, "digraph mesh {\n  rankdir=LR;\n  compound=true;\n"
	    "  node [fontname=\"Helvetica\", fontsize=10, shape=box, "
	    "style=\"rounded,filled\", fillcolor=\"#f5f5f5\"];\n"
	    "  edge [fontname=\"Helvetica\", fontsize=9];\n");
	json_array_foreach(json_object_get(snap, "nodes"), i, n) {
		snprintf(id, sizeof(id), "cluster_%s", str(n, "name"));
		sb_s(&b, "  subgraph ");
		sb_q(&b, id);
		sb_s(&b, " {\n    label=");
		snprintf(id, sizeof(id), "%s (%s)", str(n, "name"),
		    str(n, "routable"));
		sb_q(&b, id);
		sb_s(&b, ";\n    style=\"rounded\"; color=\"#90a4ae\";\n");
		json_array_foreach(json_object_get(snap, "assignments"), j, a) {
			int prov = 0, down = 0;

			if (strcmp(str(a, "node"), str(n, "name")) != 0)
				continue;
			json_array_foreach(json_object_get(snap, "providers"),
			    k, p)
				if (strcmp(str(p, "module"), str(a, "module"))
				    == 0 && strcmp(str(p, "node"),
				    str(n, "name")) == 0) {
					prov = 1;
					down = json_is_false(json_object_get(p,
					    "reachable"));
				}
			snprintf(id, sizeof(id), "%s@%s", str(a, "module"),
			    str(a, "node"));
			sb_s(&b, "    ");
			sb_q(&b, id);
			sb_s(&b, " [label=");
			sb_q(&b, str(a, "module"));
			if (prov)
				sb_s(&b, down ? ", shape=cylinder, "
				    "fillcolor=\"#ffcdd2\"" : ", shape=cylinder,"
				    " fillcolor=\"#bbdefb\"");
			else if (json_is_true(json_object_get(a, "ready")))
				sb_s(&b, ", fillcolor=\"#c8e6c9\"");
			sb_s(&b, "];\n");
		}
		sb_s(&b, "  }\n");
	}
	/* Each grant: from its holders to its provider, coloured by state. */
	json_array_foreach(json_object_get(snap, "grants"), i, g) {
		const char *prov = str(g, "provider"), *slash;
		char to[300], lbl[300];
		int drift = json_object_get(g, "drift") != NULL;

		if (*prov == '\0' || (slash = strchr(prov, '/')) == NULL)
			continue;
		snprintf(to, sizeof(to), "%s@%.*s", slash + 1,
		    (int)(slash - prov), prov);
		snprintf(lbl, sizeof(lbl), "%s (%s%s)", str(g, "req"),
		    str(g, "state"), drift ? ", drift" : "");
		json_array_foreach(json_object_get(snap, "assignments"), j, a) {
			if (strcmp(str(a, "module"), str(g, "module")) != 0 ||
			    (*str(g, "node") && strcmp(str(a, "node"),
			    str(g, "node")) != 0))
				continue;
			snprintf(id, sizeof(id), "%s@%s", str(a, "module"),
			    str(a, "node"));
			sb_s(&b, "  ");
			sb_q(&b, id);
			sb_s(&b, " -> ");
			sb_q(&b, to);
			sb_s(&b, " [label=");
			sb_q(&b, lbl);
			/* Unhealthy in tally status's words is red too. */
			sb_s(&b, ", color=");
			sb_q(&b, state_color(str(g, "state"), drift ||
			    strcmp(str(g, "status"), "unhealthy") == 0));
			sb_s(&b, ", fontcolor=");
			sb_q(&b, state_color(str(g, "state"), drift ||
			    strcmp(str(g, "status"), "unhealthy") == 0));
			if (drift || strcmp(str(g, "state"), "revoked") == 0)
				sb_s(&b, ", style=dashed");
			sb_s(&b, "];\n");
		}
	}
	sb_s(&b, "}\n");
	if (b.err) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* dot -Tsvg on the source; the SVG (malloc'd) or NULL without dot. */
static char *
run_dot(const char *dot, size_t len)
{
	int in[2], out[2], st;
	pid_t pid;
	struct sb b = { NULL, 0, 0, 0 };
	char buf[8192];
	ssize_t n;
	size_t off = 0;

	if (pipe(in) != 0)
		return NULL;
	if (pipe(out) != 0) {
		close(in[0]);
		close(in[1]);
		return NULL;
	}
	if ((pid = fork()) < 0) {
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		return NULL;
	}
	if (pid == 0) {
		int dn = open("/dev/null", O_WRONLY);

		dup2(in[0], 0);
		dup2(out[1], 1);
		if (dn >= 0)
			dup2(dn, 2);
		close(in[1]);
		close(out[0]);
		execlp("dot", "dot", "-Tsvg", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	/* The graph is small: write it all, then read (dot reads first). */
	while (off < len && (n = write(in[1], dot + off, len - off)) > 0)
		off += (size_t)n;
	close(in[1]);
	while ((n = read(out[0], buf, sizeof(buf))) > 0)
		sb_add(&b, buf, (size_t)n);
	close(out[0]);
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || b.err ||
	    b.p == NULL || strstr(b.p, "<svg") == NULL) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* --- HTML ------------------------------------------------------------------ */

static void
esc(FILE *fp, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", fp); break;
		case '>': fputs("&gt;", fp); break;
		case '&': fputs("&amp;", fp); break;
		case '"': fputs("&quot;", fp); break;
		default: fputc(*s, fp);
		}
	}
}

/* A status state's colour: ready is well, unhealthy is not. */
static const char *
status_class(const char *state)
{
	if (strncmp(state, "ready", 5) == 0)
		return "ok";
	if (strcmp(state, "unhealthy") == 0)
		return "bad";
	return "note";
}

/* An assignment's: status's state when the board has it. */
static const char *
assignment_class(const json_t *snap, const json_t *a)
{
	const json_t *at, *m, *w;
	size_t i;

	if (json_object_get(a, "status") != NULL)
		return status_class(str(a, "status"));
	at = json_object_get(json_object_get(snap, "status_index"), str(a,
	    "module"));
	m = at != NULL ? json_array_get(json_object_get(json_object_get(snap,
	    "status"), "modules"), (size_t)json_integer_value(at)) : NULL;
	json_array_foreach(json_object_get(m, "assignments"), i, w)
		if (strcmp(str(w, "node"), str(a, "node")) == 0)
			return status_class(str(w, "state"));
	return json_is_true(json_object_get(a, "ready")) ? "ok" : "note";
}

static void
count_cell(FILE *fp, const char *id, const char *label, json_int_t n)
{
	fprintf(fp, "<div class=\"tile\"><span class=\"count\" id=\"count-%s\">"
	    "%lld</span><span class=\"label\">", id, (long long)n);
	esc(fp, label);
	fputs("</span></div>\n", fp);
}

/* s seconds since the epoch as RFC 3339 UTC, to the second, in out. */
static const char *
utc(json_int_t s, char out[64])
{
	tl_json_time((uint64_t)s * 1000000000u, out);
	out[19] = 'Z';
	out[20] = '\0';
	return out;
}

/* s seconds in words: "42 s", "5 min", "3 h", "2 d". */
static const char *
dur(json_int_t s, char out[32])
{
	if (s < 0)
		s = 0;
	if (s < 120)
		snprintf(out, 32, "%lld s", (long long)s);
	else if (s < 7200)
		snprintf(out, 32, "%lld min", (long long)(s / 60));
	else if (s < 172800)
		snprintf(out, 32, "%lld h", (long long)(s / 3600));
	else
		snprintf(out, 32, "%lld d", (long long)(s / 86400));
	return out;
}

/*
 * The agents, as tally status lists them: each node's last recorded
 * report (its heartbeats are not in the record), what it holds, its
 * last reload, and what it holds off the record.
 */
static void
agents_write(FILE *fp, const json_t *snap)
{
	const json_t *v, *w;
	size_t i, j, off;
	char d[32];
	json_int_t now = num(snap, "now_ns");

	if (json_object_get(snap, "agents") == NULL)
		return;
	fputs("<h2>Agents</h2>\n", fp);
	if (json_array_size(json_object_get(snap, "agents")) == 0) {
		fputs("<p class=\"note\">No agent has reported.</p>\n", fp);
		return;
	}
	fputs("<table id=\"agents\"><tr><th>node</th><th>agent</th><th>last "
	    "report recorded</th><th>holds (holder grant version)</th>"
	    "<th>last reload</th></tr>\n", fp);
	json_array_foreach(json_object_get(snap, "agents"), i, v) {
		fputs("<tr><td>", fp);
		esc(fp, str(v, "node"));
		fputs("</td><td>", fp);
		esc(fp, json_is_string(json_object_get(v, "agent")) ?
		    str(v, "agent") : "");
		fprintf(fp, "</td><td>%s ago</td><td>", dur((now - num(v,
		    "recorded_ns")) / 1000000000, d));
		off = 0;
		json_array_foreach(json_object_get(v, "held"), j, w) {
			int bad = json_object_get(w, "off_record") != NULL ||
			    json_is_true(json_object_get(w, "withdrawn"));

			off += bad;
			fprintf(fp, "<span class=\"%s\">", bad ? "bad" : "ok");
			esc(fp, str(w, "holder"));
			fputc(' ', fp);
			esc(fp, str(w, "grant"));
			fprintf(fp, " v%lld</span><br>", (long long)num(w,
			    "version"));
		}
		fputs("</td><td>", fp);
		w = json_object_get(v, "last_reload");
		if (json_is_object(w)) {
			int ok = json_is_true(json_object_get(w, "ok"));

			fprintf(fp, "<span class=\"%s\">", ok ? "ok" : "bad");
			esc(fp, str(w, "module"));
			if (ok)
				fputs(" reloaded", fp);
			else
				fprintf(fp, " failed (exit %lld)", (long long)
				    num(w, "status"));
			fputs("</span>", fp);
		}
		fputs("</td></tr>\n", fp);
	}
	fputs("</table>\n", fp);
}

/*
 * A cluster leader's followers as its tallyd keeps them in the home the
 * board follows (main.c); a stream standby, or a board on a copy of the
 * record, has none to show: the note says where they are.
 */
static void
standbys_write(FILE *fp, const json_t *sb)
{
	const json_t *f;
	size_t i;

	if (sb == NULL) {
		fputs("<p class=\"note\">No standby is known to this home: a "
		    "cluster's leader keeps its followers' marks (tally init "
		    "--etcd), a leader its stream standbys' reports (tallyd "
		    "--follow).</p>\n", fp);
		return;
	}
	if (json_array_size(json_object_get(sb, "standbys")) > 0) {
		fputs("<h3>Standbys</h3>\n<table id=\"stream-standbys\"><tr>"
		    "<th>standby (tallyd --follow)</th><th>applied through</th>"
		    "<th>behind</th><th>its last report</th></tr>\n", fp);
		json_array_foreach(json_object_get(sb, "standbys"), i, f) {
			fputs("<tr><td>", fp);
			esc(fp, str(f, "name"));
			fprintf(fp, "</td><td>event %lld</td><td class=\"behind\">"
			    "%lld</td><td>", (long long)num(f, "applied"),
			    (long long)num(f, "behind"));
			esc(fp, str(f, "heard"));
			fputs("</td></tr>\n", fp);
		}
		fputs("</table>\n<p class=\"note\">Each position as the standby "
		    "reported it, its hash checked against this log's.</p>\n",
		    fp);
	}
	if (json_object_get(sb, "followers") == NULL)
		return;
	fputs("<h3>Standbys</h3>\n<table id=\"standbys\"><tr><th>control "
	    "plane</th><th>applied through</th><th>behind</th></tr>\n", fp);
	json_array_foreach(json_object_get(sb, "followers"), i, f) {
		fputs("<tr><td>", fp);
		esc(fp, str(f, "id"));
		fprintf(fp, "</td><td>event %lld</td><td class=\"behind\">%lld"
		    "</td></tr>\n", (long long)num(f, "applied"),
		    (long long)num(f, "behind"));
	}
	fprintf(fp, "</table>\n<p class=\"note\">%zu live follower(s) as "
	    "the leader's tallyd read their marks on etcd at ",
	    json_array_size(json_object_get(sb, "followers")));
	esc(fp, str(sb, "as_of"));
	fprintf(fp, " (its head then: event %lld).</p>\n", (long long)num(sb,
	    "head"));
}

/* The mesh and its leader, as the record says (mirror.c). */
static void
control_write(FILE *fp, const json_t *snap)
{
	const json_t *cp = json_object_get(snap, "control_plane");

	if (cp == NULL)
		return;
	fputs("<h2>Control plane</h2>\n<table id=\"control\"><tr><th>mesh"
	    "</th><td>", fp);
	esc(fp, str(cp, "mesh"));
	fprintf(fp, "</td></tr><tr><th>epoch</th><td id=\"epoch\">%lld</td>"
	    "</tr><tr><th>leader</th><td>", (long long)num(cp, "epoch"));
	esc(fp, *str(cp, "leader") ? str(cp, "leader") : "—");
	if (num(cp, "since_seq") > 0)
		fprintf(fp, " (promoted at event %lld)", (long long)num(cp,
		    "since_seq"));
	fputs("</td></tr></table>\n", fp);
	standbys_write(fp, json_object_get(snap, "standbys"));
}

/* What the record says changed in the last day (mirror.c). */
static void
since_write(FILE *fp, const json_t *snap)
{
	const json_t *sy = json_object_get(snap, "since_yesterday"), *v;
	const char *k;
	size_t i;

	if (sy == NULL)
		return;
	fprintf(fp, "<h2>Since yesterday</h2>\n<p id=\"since\">%lld%s "
	    "event(s) in the last 24 hours.</p>\n", (long long)num(sy,
	    "events"), json_is_true(json_object_get(sy, "more")) ? "+" : "");
	if (num(sy, "events") == 0)
		return;
	fputs("<table><tr><th>event type</th><th>count</th></tr>\n", fp);
	json_object_foreach(json_object_get(sy, "by_type"), k, v) {
		fputs("<tr><td>", fp);
		esc(fp, k);
		fprintf(fp, "</td><td>%lld</td></tr>\n", (long long)
		    json_integer_value(v));
	}
	fputs("</table>\n<p class=\"note\">The newest (tally history STREAM "
	    "tells a stream's whole story):</p>\n<table><tr><th>event</th>"
	    "<th>type</th><th>stream</th></tr>\n", fp);
	json_array_foreach(json_object_get(sy, "recent"), i, v) {
		fprintf(fp, "<tr><td>%lld</td><td>", (long long)num(v, "seq"));
		esc(fp, str(v, "type"));
		fputs("</td><td>", fp);
		esc(fp, str(v, "stream"));
		fputs("</td></tr>\n", fp);
	}
	fputs("</table>\n", fp);
}

/*
 * What needs a person, first on the page: each problem in words (a
 * provider unreachable, a grant failed, ambiguous, drifted or blocked)
 * and each rotation waiting on a holder's acknowledgement, with whom
 * and since when.
 */
static void
needs_write(FILE *fp, const json_t *snap)
{
	const json_t *v, *w, *q, *at = json_object_get(snap, "attention");
	size_t i, j, n = 0;
	char d1[64], d2[32];
	const char *k;

	fputs("<h2>Needs a person</h2>\n<ul class=\"needs\" id=\"needs\">\n",
	    fp);
	json_array_foreach(json_object_get(snap, "unhealthy"), i, v) {
		if (i == BD_NEEDS_MAX) {
			fprintf(fp, "<li class=\"bad\" data-kind=\"unhealthy\">"
			    "… and %zu more unhealthy requirements (tally "
			    "status)</li>\n", json_array_size(json_object_get(
			    snap, "unhealthy")) - i);
			n++;
			break;
		}
		q = json_object_get(v, "question");
		fprintf(fp, "<li class=\"bad\" data-kind=\"%s\">", q != NULL ?
		    "question" : "unhealthy");
		esc(fp, str(v, "module"));
		fputc('@', fp);
		esc(fp, str(v, "node"));
		fputs(": ", fp);
		esc(fp, str(v, "requirement"));
		if (q != NULL) {
			/* Lost: a question, with the commands that answer it. */
			fputs(" lost (", fp);
			esc(fp, str(q, "lost"));
			fputs("): a question for you, not a failure.", fp);
			json_array_foreach(json_object_get(q, "commands"), j,
			    w) {
				fputs(j == 0 ? " Answers: <code>" : "</code> or "
				    "<code>", fp);
				esc(fp, json_string_value(w) ?
				    json_string_value(w) : "");
			}
			if (json_array_size(json_object_get(q, "commands")))
				fputs("</code>", fp);
			else {
				fputs(" ", fp);
				esc(fp, str(v, "reason"));
			}
		} else {
			fputs(" unhealthy: ", fp);
			esc(fp, str(v, "reason"));
		}
		fputs("</li>\n", fp);
		n++;
	}
	json_array_foreach(json_object_get(snap, "off_record"), i, v) {
		fputs("<li class=\"bad\" data-kind=\"off-record\">", fp);
		esc(fp, str(v, "reason"));
		fputs("</li>\n", fp);
		n++;
	}
	json_array_foreach(json_object_get(at, "cut_off"), i, v) {
		fputs("<li class=\"bad\" data-kind=\"cut-off\">", fp);
		esc(fp, str(v, "holder"));
		fprintf(fp, " is cut off from grant ");
		esc(fp, str(v, "grant"));
		fprintf(fp, " (it holds v%lld, retired by a forced rotation)"
		    "</li>\n", (long long)num(v, "version"));
		n++;
	}
	json_array_foreach(json_object_get(at, "rotations_overdue"), i, v) {
		fputs("<li class=\"note\" data-kind=\"overdue\">", fp);
		esc(fp, str(v, "grant"));
		fprintf(fp, ": its credential is %s old, past its "
		    "max-credential-age of %s, and no rotation has started"
		    "</li>\n", dur(num(v, "age_s"), d1), dur(num(v,
		    "max_age_s"), d2));
		n++;
	}
	json_array_foreach(json_object_get(snap, "problems"), i, v) {
		fputs("<li class=\"bad\" data-kind=\"", fp);
		esc(fp, str(v, "what"));
		fputs("\">", fp);
		esc(fp, str(v, "detail"));
		fputs("</li>\n", fp);
		n++;
	}
	/* Status's rotations waiting when the board has them, else its own. */
	json_array_foreach(json_object_get(at, "rotations_waiting"), i, v) {
		json_int_t now = num(snap, "now_ns");

		fputs("<li class=\"note\" data-kind=\"ack\">rotation of ", fp);
		esc(fp, str(v, "grant"));
		fprintf(fp, " to v%lld waits on ", (long long)num(v, "to"));
		json_array_foreach(json_object_get(v, "waiting_on"), j, w) {
			if (j > 0)
				fputs(", ", fp);
			esc(fp, json_string_value(w) ? json_string_value(w) :
			    "");
		}
		fprintf(fp, " (acknowledgement), for %s</li>\n", dur((now -
		    num(v, "started_ns")) / 1000000000, d1));
		n++;
	}
	json_array_foreach(at != NULL ? NULL : json_object_get(snap,
	    "rotations"), i, v) {
		if (json_array_size(json_object_get(v, "waiting")) == 0)
			continue;
		fputs("<li class=\"note\" data-kind=\"ack\">rotation of ", fp);
		esc(fp, str(v, "grant"));
		fprintf(fp, " to v%lld waits on ", (long long)num(v, "to"));
		json_array_foreach(json_object_get(v, "waiting"), j, w) {
			if (j > 0)
				fputs(", ", fp);
			esc(fp, str(w, "holder"));
		}
		fputs(" (acknowledgement) since ", fp);
		esc(fp, str(v, "since"));
		fputs("</li>\n", fp);
		n++;
	}
	json_array_foreach(json_object_get(at, "certificates"), i, v) {
		fputs("<li class=\"bad\" data-kind=\"renewal\">certificate of ",
		    fp);
		esc(fp, str(v, "holder"));
		fputs(" for ", fp);
		esc(fp, str(v, "grant"));
		fputs(" (serial ", fp);
		esc(fp, str(v, "serial"));
		fprintf(fp, ", v%lld) %s %s: it has not taken v%lld</li>\n",
		    (long long)num(v, "version"), json_is_true(json_object_get(v,
		    "expired")) ? "EXPIRED at" : "expires at", utc(num(v,
		    "not_after"), d1), (long long)num(v, "wanted"));
		n++;
	}
	json_array_foreach(json_object_get(at, "residual"), i, v) {
		fputs("<li class=\"note\" data-kind=\"residual\">revoked ", fp);
		esc(fp, str(v, "grant"));
		fputs(" on ", fp);
		esc(fp, str(v, "provider"));
		fputs(": ", fp);
		esc(fp, str(v, "residual"));
		fputs(" (lifetime ", fp);
		esc(fp, str(v, "lifetime"));
		fprintf(fp, "), until %s", utc(num(v, "until_ns") / 1000000000,
		    d1));
		if (json_array_size(json_object_get(v, "certificates")) > 0)
			fprintf(fp, "; %zu certificate(s) still valid",
			    json_array_size(json_object_get(v,
			    "certificates")));
		fputs("</li>\n", fp);
		n++;
	}
	/* A question: tally remove waits for its confirmation. */
	json_array_foreach(json_object_get(at, "removals_held"), i, v) {
		fputs("<li class=\"bad\" data-kind=\"removal\">the removal "
		    "of ", fp);
		esc(fp, str(v, "module"));
		fputs(" waits for a confirmation since ", fp);
		esc(fp, str(v, "since"));
		fputs(": ", fp);
		esc(fp, str(v, "what"));
		fputs(". <code>tally remove ", fp);
		esc(fp, str(v, "module"));
		fputs(" --yes</code> removes it, <code>tally remove ", fp);
		esc(fp, str(v, "module"));
		fputs(" --cancel</code> withdraws it</li>\n", fp);
		n++;
	}
	json_array_foreach(json_object_get(at, "retained"), i, v) {
		fputs("<li class=\"note\" data-kind=\"retained\">retained data: ",
		    fp);
		esc(fp, str(v, "grant"));
		fputs(" on ", fp);
		esc(fp, str(v, "provider"));
		fprintf(fp, " (%.1f MiB): %s</li>\n", (double)num(v, "bytes") /
		    1048576.0, strcmp(str(v, "state"), "purging") == 0 ?
		    "being purged" : "tally restore takes it back, tally purge "
		    "destroys it");
		n++;
	}
	/* Messages the control plane refused, as the record has them. */
	json_object_foreach(json_object_get(json_object_get(snap,
	    "since_yesterday"), "by_type"), k, v) {
		if (strstr(k, "refused") == NULL)
			continue;
		fprintf(fp, "<li class=\"bad\" data-kind=\"refused\">%lld ",
		    (long long)json_integer_value(v));
		esc(fp, k);
		fputs(" in the last 24 hours (<code>tally tail --type ", fp);
		esc(fp, k);
		fputs("</code>)</li>\n", fp);
		n++;
	}
	/* Messages the board's copy of the record passed over (main.c). */
	if ((v = json_object_get(snap, "record_copy")) != NULL &&
	    num(v, "passed") > 0) {
		fprintf(fp, "<li class=\"bad\" data-kind=\"stream-refused\">"
		    "%lld message(s) on the stream refused by this board's copy "
		    "of the record, the last at offset %lld: ", (long long)num(v,
		    "passed"), (long long)num(v, "last_offset"));
		esc(fp, str(v, "last_why"));
		fputs(" (someone who may publish to the stream published "
		    "them)</li>\n", fp);
		n++;
	}
	if (n == 0)
		fputs("<li class=\"ok\" data-kind=\"none\">Nothing.</li>\n", fp);
	fputs("</ul>\n", fp);
}

/*
 * The page.  live: served (--serve): the board's content is replaced,
 * without a reload, by the page fetched again on each change the
 * events stream announces; an inline script, nothing external.
 */
/*
 * A page is read by a person, and rendered again on every change: its
 * tables stop at BD_ROWS_MAX rows (view.json has them all) and the
 * mesh is drawn up to BD_DRAW_MAX modules, so that a mesh of 100,000
 * grants costs a bounded page.  Whether row i is past the cap (then the
 * row saying how many more, cols wide, is written).
 */
static int
more_rows(FILE *fp, size_t i, const json_t *all, int cols)
{
	if (i < BD_ROWS_MAX)
		return 0;
	fprintf(fp, "<tr><td colspan=\"%d\" class=\"note\">… and %zu more "
	    "(/view.json, tally-board --json, or tally status have them all)"
	    "</td></tr>\n", cols, json_array_size(all) - i);
	return 1;
}

static void
page_write(FILE *fp, const json_t *snap, const char *source, int live)
{
	const json_t *c = json_object_get(snap, "counts");
	const json_t *meta = json_object_get(snap, "meta"), *v, *w;
	char *dot = NULL, *svg = NULL;
	json_t *byn, *a;
	int big;
	const char *k;
	size_t i, j;

	big = json_array_size(json_object_get(snap, "modules")) > BD_DRAW_MAX;
	if (!big && (dot = bd_render_dot(snap)) != NULL)
		svg = run_dot(dot, strlen(dot));
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	    "\n<title>tally-board</title>\n<style>\n"
	    "body{font-family:system-ui,sans-serif;margin:2em;color:#263238}\n"
	    "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}\n"
	    ".tiles{display:flex;flex-wrap:wrap;gap:1em}\n"
	    ".tile{border:1px solid #cfd8dc;border-radius:6px;padding:.6em 1em;"
	    "min-width:7em}\n.count{display:block;font-size:1.8em;"
	    "font-weight:600}\n.label{color:#607d8b}\n"
	    "table{border-collapse:collapse}td,th{padding:.2em .8em;"
	    "border-bottom:1px solid #eceff1;text-align:left}\n"
	    ".bad{color:#c62828}.ok{color:#2e7d32}.note{color:#607d8b}\n"
	    ".needs li{margin:.3em 0}\n"
	    "</style></head><body>\n<div id=\"board\">\n"
	    "<h1>tally-board</h1>\n", fp);
	fprintf(fp, "<p class=\"note\">Built from the record alone: events 1 to "
	    "<span id=\"pos\">%lld</span> (%lld applied, %lld duplicate(s) "
	    "skipped, %lld gap(s)); last event at ",
	    (long long)num(meta, "pos"), (long long)num(meta, "applied"),
	    (long long)num(meta, "duplicates"), (long long)num(meta, "gaps"));
	esc(fp, *str(meta, "last_ts") ? str(meta, "last_ts") : "—");
	fputs("; source ", fp);
	esc(fp, source);
	fputs(".</p>\n<div class=\"tiles\">\n", fp);
	count_cell(fp, "nodes", "nodes", num(c, "nodes"));
	count_cell(fp, "modules", "modules", num(c, "modules"));
	count_cell(fp, "assignments", "assignments", num(c, "assignments"));
	count_cell(fp, "ready", "ready", num(c, "ready"));
	count_cell(fp, "providers", "providers", num(c, "providers"));
	count_cell(fp, "grants", "grants", num(c, "grants"));
	count_cell(fp, "rotations", "rotations in progress",
	    num(c, "rotations"));
	count_cell(fp, "problems", "drift and problems", num(c, "problems"));
	fputs("</div>\n", fp);
	needs_write(fp, snap);
	agents_write(fp, snap);
	control_write(fp, snap);
	fputs("<h2>Grants by state</h2>\n<table>\n", fp);
	json_object_foreach(json_object_get(c, "grants_by_state"), k, v) {
		fputs("<tr><th>", fp);
		esc(fp, k);
		fprintf(fp, "</th><td id=\"grants-%s\">%lld</td></tr>\n", k,
		    (long long)json_integer_value(v));
	}
	fputs("</table>\n<h2>The mesh</h2>\n", fp);
	if (big) {
		fprintf(fp, "<p class=\"note\">%zu modules: too many to draw "
		    "on a page (more than %d); tally graph --dot draws them."
		    "</p>\n", json_array_size(json_object_get(snap, "modules")),
		    BD_DRAW_MAX);
	} else if (svg != NULL) {
		char *start = strstr(svg, "<svg");

		fputs("<div class=\"graph\">", fp);
		fputs(start, fp);
		fputs("</div>\n", fp);
	} else {
		fputs("<p class=\"note\">Graphviz (dot) is not installed: the "
		    "graph's source follows.</p><pre>", fp);
		esc(fp, dot ? dot : "");
		fputs("</pre>\n", fp);
	}
	fputs("<h2>Nodes</h2>\n<table><tr><th>node</th><th>routable name</th>"
	    "<th>assignments</th></tr>\n", fp);
	/*
	 * Each node's assignments, gathered in one pass: the first few
	 * named, the rest counted (the whole list is in view.json).
	 */
	if ((byn = json_object()) != NULL)
		json_array_foreach(json_object_get(snap, "assignments"), j, a) {
			json_t *l = json_object_get(byn, str(a, "node"));

			if (l == NULL) {
				l = json_pack("{s:[],s:i}", "shown", "all", 0);
				json_object_set_new(byn, str(a, "node"), l);
			}
			if (l == NULL)
				continue;
			json_object_set_new(l, "all", json_integer(num(l,
			    "all") + 1));
			if (json_array_size(json_object_get(l, "shown")) <
			    BD_NODE_MODULES)
				json_array_append(json_object_get(l, "shown"), a);
		}
	json_array_foreach(json_object_get(snap, "nodes"), i, v) {
		if (more_rows(fp, i, json_object_get(snap, "nodes"), 3))
			break;
		fputs("<tr><td>", fp);
		esc(fp, str(v, "name"));
		fputs("</td><td>", fp);
		esc(fp, str(v, "routable"));
		fputs("</td><td>", fp);
		a = json_object_get(byn, str(v, "name"));
		json_array_foreach(json_object_get(a, "shown"), j, w) {
			fprintf(fp, "<span class=\"%s\">", assignment_class(snap, w));
			esc(fp, str(w, "module"));
			fputs("</span> ", fp);
		}
		if (num(a, "all") > BD_NODE_MODULES)
			fprintf(fp, "<span class=\"note\">and %lld more</span>",
			    (long long)(num(a, "all") - BD_NODE_MODULES));
		fputs("</td></tr>\n", fp);
	}
	json_decref(byn);
	fputs("</table>\n<h2>Modules</h2>\n<table id=\"modules\"><tr><th>module</th>"
	    "<th>state (tally status)</th><th>provides</th><th>requires</th>"
	    "</tr>\n", fp);
	json_array_foreach(json_object_get(snap, "modules"), i, v) {
		if (more_rows(fp, i, json_object_get(snap, "modules"), 4))
			break;
		fputs("<tr><td>", fp);
		/* Served, each module links to its history. */
		if (live) {
			fputs("<a href=\"/history/", fp);
			esc(fp, str(v, "name"));
			fputs("\">", fp);
		}
		esc(fp, str(v, "name"));
		if (live)
			fputs("</a>", fp);
		fprintf(fp, "</td><td class=\"%s\">", status_class(str(v,
		    "status")));
		esc(fp, str(v, "status"));
		fputs("</td><td>", fp);
		json_array_foreach(json_object_get(v, "provides"), j, w) {
			esc(fp, json_string_value(w) ? json_string_value(w) :
			    "");
			fputc(' ', fp);
		}
		fputs("</td><td>", fp);
		json_object_foreach(json_object_get(v, "requirements"), k, w) {
			esc(fp, k);
			fputs(" (", fp);
			esc(fp, *str(w, "type") ? str(w, "type") :
			    str(w, "target"));
			fputs(") ", fp);
		}
		fputs("</td></tr>\n", fp);
	}
	fputs("</table>\n<h2>Providers</h2>\n<table id=\"providers\"><tr><th>"
	    "provider</th><th>types</th><th>reachable</th><th>reached "
	    "(tally status)</th><th>fence</th></tr>\n", fp);
	json_array_foreach(json_object_get(snap, "providers"), i, v) {
		int down = json_is_false(json_object_get(v, "reachable"));
		const json_t *fe = json_object_get(json_object_get(snap,
		    "fencing"), str(v, "id")), *tr;

		if (more_rows(fp, i, json_object_get(snap, "providers"), 5))
			break;
		fputs("<tr><td>", fp);
		esc(fp, str(v, "id"));
		fputs("</td><td>", fp);
		json_array_foreach(json_object_get(v, "types"), j, w) {
			esc(fp, json_string_value(w) ? json_string_value(w) :
			    "");
			fputc(' ', fp);
		}
		fprintf(fp, "</td><td class=\"%s\">", down ? "bad" : "ok");
		esc(fp, down ? str(v, "reason") : "yes");
		/* How tallyd reaches it and how it is fenced, per driver. */
		fputs("</td><td class=\"tls\">", fp);
		json_array_foreach(fe, j, w) {
			const char *m;

			if ((tr = json_object_get(w, "transport")) == NULL)
				continue;
			m = str(tr, "tls");
			fprintf(fp, "<span class=\"%s\">", json_object_get(tr,
			    "warning") != NULL ? "bad" : strcmp(m, "verify") ==
			    0 ? "ok" : "note");
			esc(fp, strcmp(m, "verify") == 0 ? "TLS, verified" :
			    strcmp(m, "require") == 0 ? "TLS, not verified" :
			    "plaintext");
			fputs(" to ", fp);
			esc(fp, str(tr, "host"));
			if (json_object_get(tr, "warning") != NULL) {
				fputs(": ", fp);
				esc(fp, str(tr, "warning"));
			}
			fputs("</span> ", fp);
		}
		fputs("</td><td class=\"fence\">", fp);
		json_array_foreach(fe, j, w) {
			if (j > 0)
				fputs("; ", fp);
			esc(fp, str(w, "kind"));
		}
		fputs("</td></tr>\n", fp);
	}
	fputs("</table>\n<h2>Grants</h2>\n<table><tr><th>grant</th><th>"
	    "tally status</th><th>state</th><th>credential</th><th>provider"
	    "</th><th>holders (delivered/acknowledged)</th></tr>\n", fp);
	json_array_foreach(json_object_get(snap, "grants"), i, v) {
		if (more_rows(fp, i, json_object_get(snap, "grants"), 6))
			break;
		fputs("<tr><td>", fp);
		esc(fp, str(v, "grant"));
		fprintf(fp, "</td><td class=\"%s\" title=\"", status_class(
		    str(v, "status")));
		esc(fp, str(v, "status_reason"));
		fputs("\">", fp);
		esc(fp, str(v, "status"));
		fputs("</td><td class=\"state-", fp);
		esc(fp, str(v, "state"));
		fputs("\">", fp);
		esc(fp, str(v, "state"));
		fprintf(fp, "</td><td>v%lld</td><td>", (long long)num(v,
		    "version"));
		esc(fp, str(v, "provider"));
		fputs("</td><td>", fp);
		json_object_foreach(json_object_get(v, "holders"), k, w) {
			esc(fp, k);
			fprintf(fp, " v%lld/v%lld ", (long long)num(w,
			    "delivered"), (long long)num(w, "acked"));
		}
		fputs("</td></tr>\n", fp);
	}
	fputs("</table>\n<h2>Rotations in progress</h2>\n", fp);
	if (json_array_size(json_object_get(snap, "rotations")) == 0)
		fputs("<p class=\"note\">None.</p>\n", fp);
	else
		fputs("<table><tr><th>grant</th><th>versions</th><th>since</th>"
		    "<th>waiting on</th></tr>\n", fp);
	json_array_foreach(json_object_get(snap, "rotations"), i, v) {
		fputs("<tr><td>", fp);
		esc(fp, str(v, "grant"));
		fprintf(fp, "</td><td>v%lld → v%lld</td><td>", (long long)
		    num(v, "from"), (long long)num(v, "to"));
		esc(fp, str(v, "since"));
		fputs("</td><td class=\"waiting\">", fp);
		json_array_foreach(json_object_get(v, "waiting"), j, w) {
			esc(fp, str(w, "holder"));
			fputc(' ', fp);
		}
		fputs("</td></tr>\n", fp);
	}
	if (json_array_size(json_object_get(snap, "rotations")) > 0)
		fputs("</table>\n", fp);
	since_write(fp, snap);
	fputs("</div>\n", fp);
	if (live)
		fputs("<script>\n"
		    "(function () {\n"
		    "  var es = new EventSource('/events');\n"
		    "  es.addEventListener('change', function () {\n"
		    "    fetch('/', {cache: 'no-store'}).then(function (r) {\n"
		    "      return r.text();\n"
		    "    }).then(function (t) {\n"
		    "      var d = new DOMParser().parseFromString(t, 'text/html');\n"
		    "      var b = d.getElementById('board');\n"
		    "      if (b) document.getElementById('board').replaceWith(b);\n"
		    "    });\n"
		    "  });\n"
		    "})();\n"
		    "</script>\n", fp);
	fputs("</body></html>\n", fp);
	free(dot);
	free(svg);
}

int
bd_render_html(const char *path, const json_t *snap, const char *source,
    char *why)
{
	char tmp[4200];
	FILE *fp;
	int fd;

	if (strlen(path) > 4000) {
		snprintf(why, TL_WHY_MAX, "path too long");
		return ENAMETOOLONG;
	}
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	if ((fd = mkstemp(tmp)) < 0 || (fp = fdopen(fd, "w")) == NULL) {
		snprintf(why, TL_WHY_MAX, "%.400s: %s", tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
		return errno;
	}
	fchmod(fd, 0644);
	page_write(fp, snap, source, 0);
	if (fflush(fp) != 0 || fsync(fileno(fp)) != 0 || ferror(fp)) {
		snprintf(why, TL_WHY_MAX, "%.400s: %s", tmp, strerror(errno));
		fclose(fp);
		unlink(tmp);
		return EIO;
	}
	fclose(fp);
	if (rename(tmp, path) != 0) {
		snprintf(why, TL_WHY_MAX, "%s: %s", path, strerror(errno));
		unlink(tmp);
		return errno;
	}
	return 0;
}

char *
bd_render_page(const json_t *snap, const char *source, size_t *len)
{
	char *buf = NULL;
	FILE *fp;

	*len = 0;
	if ((fp = open_memstream(&buf, len)) == NULL)
		return NULL;
	page_write(fp, snap, source, 1);
	if (ferror(fp)) {
		fclose(fp);
		free(buf);
		*len = 0;
		return NULL;
	}
	fclose(fp);
	return buf;
}

/* A module's history, as tally history prints it, as a page. */
char *
bd_render_history(const json_t *h, size_t *len)
{
	const json_t *v, *c;
	char *buf = NULL;
	size_t i;
	FILE *fp;

	*len = 0;
	if ((fp = open_memstream(&buf, len)) == NULL)
		return NULL;
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	    "\n<title>history of ", fp);
	esc(fp, str(h, "module"));
	fputs("</title>\n<style>\nbody{font-family:system-ui,sans-serif;"
	    "margin:2em;color:#263238}\nh1{font-size:1.4em}\n"
	    "table{border-collapse:collapse}td,th{padding:.2em .8em;"
	    "border-bottom:1px solid #eceff1;text-align:left;"
	    "vertical-align:top}\n.note{color:#607d8b}\n</style></head><body>"
	    "\n<p><a href=\"/\">← the board</a></p>\n<h1>history of ", fp);
	esc(fp, str(h, "module"));
	fprintf(fp, "</h1>\n<p class=\"note\">Its stream, its assignments', "
	    "its grants' and their bindings': %lld event(s)%s, as <code>tally "
	    "history</code> tells them.</p>\n<table id=\"history\"><tr><th>"
	    "time</th><th>event</th><th>actor</th><th>what</th><th>because "
	    "of</th></tr>\n", (long long)num(h, "events"),
	    (size_t)num(h, "events") > json_array_size(json_object_get(h,
	    "shown")) ? ", the newest shown" : "");
	json_array_foreach(json_object_get(h, "shown"), i, v) {
		fputs("<tr><td>", fp);
		esc(fp, str(v, "ts"));
		fprintf(fp, "</td><td>#%lld ", (long long)num(v, "seq"));
		esc(fp, str(v, "type"));
		fputs("</td><td>", fp);
		esc(fp, str(v, "actor"));
		fputs("</td><td>", fp);
		esc(fp, str(v, "what"));
		fputs("</td><td>", fp);
		if ((c = json_object_get(v, "cause")) != NULL) {
			fprintf(fp, "#%lld ", (long long)num(c, "seq"));
			esc(fp, str(c, "type"));
			fputs(": ", fp);
			esc(fp, str(c, "what"));
		}
		fputs("</td></tr>\n", fp);
	}
	fputs("</table>\n</body></html>\n", fp);
	if (ferror(fp)) {
		fclose(fp);
		free(buf);
		*len = 0;
		return NULL;
	}
	fclose(fp);
	return buf;
}
