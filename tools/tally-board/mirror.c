/*
 * mirror.c - the board's copy of the log, and the states tally status
 * derives from it (board.h).
 *
 * The board's own view (view.c) is built from event bodies and is what
 * it draws; a state, though, must be the one `tally status` shows, or
 * the board and the CLI disagree about what needs a person.  So the
 * board keeps, in its store's directory, a copy of the log it follows
 * (each event's encoding appended as is: the chain links and hashes are
 * checked again, as a follower's are) with the projections folded over
 * it, and asks projections/status.c for the states, the same function
 * `tally status` calls.  Nothing of tally's own home is read but the
 * log's events.
 *
 * The board renders on every change, so the states are kept, one
 * document per module, and only the modules a batch can have changed
 * are asked again: the cost of a change follows the change, not the
 * mesh.  Which modules an event can change is read from its stream and
 * the projections' indexes (touch, dirty_modules below); an event whose
 * reach is wide or not known here (a module declared or removed, a
 * provider registered, a node lost, the control plane's) makes the next
 * status ask every module again.  TALLY_BOARD_CHECK=1 asks every module
 * as well and compares (the tests run so): a difference is an error.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "board.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "projections/describe.h"
#include "projections/grant.h"
#include "projections/proj.h"
#include "projections/record.h"
#include "projections/status.h"
#include "reactors/epoch.h"
#include "reactors/fencing.h"
#include "reactors/mesh.h"

/* Events looked at for "since yesterday", newest first, at most. */
#define SINCE_MAX	20000
#define SINCE_RECENT	25

/* One event of the batch: its encoding, copied. */
struct copied {
	uint8_t		*raw;
	size_t		 len;
	uint64_t	 seq;
};

struct bd_mirror {
	struct tl_log	*log;
	uint64_t	 head;	/* the last event copied */
	/*
	 * The batch between begin and commit, written at commit by
	 * tl_log_write, which grows the map and tries again when it is
	 * full (a copy of a large log outgrows the first map).
	 */
	struct copied	*batch;
	size_t		 n, cap;
	char		 why[TL_WHY_MAX];
	uint64_t	 bad;	/* the event an append refused */
	/*
	 * The states as tally status derives them: mods, each module's
	 * document in key order, and index, each module's place in it;
	 * touched, what the events since they were asked can have
	 * changed ("m:MODULE", "g:GRANT", "p:PROVIDER", "n:NODE",
	 * "a:MODULE"); all, whether every module must be asked again.
	 */
	json_t		*mods, *index, *touched;
	/*
	 * Kept with them, for the page (render.c, bd_module_summary):
	 * each module's count of ready assignments (readies, as mods),
	 * their sum, and the unhealthy requirements of the modules that
	 * have any (sick: module -> array).
	 */
	json_t		*readies, *sick;
	json_int_t	 ready;
	int		 all;
	int		 check;	/* TALLY_BOARD_CHECK */
};
int
bd_mirror_open(const char *store, struct bd_mirror **out, char *why)
{
	struct bd_mirror *m;
	struct tl_txn *t;
	char dir[1200];
	int rc;

	*out = NULL;
	if ((size_t)snprintf(dir, sizeof(dir), "%s/mirror", store) >=
	    sizeof(dir)) {
		snprintf(why, TL_WHY_MAX, "%s: path too long", store);
		return ENAMETOOLONG;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(why, TL_WHY_MAX, "%.400s: %s", dir, strerror(errno));
		return errno;
	}
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return ENOMEM;
	m->all = 1;
	m->check = getenv("TALLY_BOARD_CHECK") != NULL &&
	    strcmp(getenv("TALLY_BOARD_CHECK"), "1") == 0;
	if ((m->touched = json_object()) == NULL) {
		free(m);
		return ENOMEM;
	}
	rc = tl_log_open(dir, 0, &m->log);
	if (rc == TL_ENOTFOUND)
		rc = tl_log_open(dir, TL_LOG_CREATE, &m->log);
	if (rc != 0) {
		snprintf(why, TL_WHY_MAX, "%.400s: %s", dir, tl_strerror(rc));
		json_decref(m->touched);
		free(m);
		return rc;
	}
	if ((rc = tl_log_begin(m->log, TL_TXN_RDONLY, &t)) == 0) {
		rc = tl_log_last(t, &m->head, NULL);	/* 0 when empty */
		tl_log_abort(t);
	}
	if (rc != 0) {
		snprintf(why, TL_WHY_MAX, "%.400s: %s", dir, tl_strerror(rc));
		bd_mirror_close(m);
		return rc;
	}
	*out = m;
	return 0;
}

static void
batch_free(struct bd_mirror *m)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		free(m->batch[i].raw);
	m->n = 0;
}

void
bd_mirror_close(struct bd_mirror *m)
{
	if (m == NULL)
		return;
	batch_free(m);
	free(m->batch);
	json_decref(m->mods);
	json_decref(m->index);
	json_decref(m->readies);
	json_decref(m->sick);
	json_decref(m->touched);
	tl_log_close(m->log);
	free(m);
}

uint64_t
bd_mirror_head(const struct bd_mirror *m)
{
	return m->head;
}

int
bd_mirror_begin(struct bd_mirror *m)
{
	batch_free(m);
	return 0;
}

/*
 * What ev can change of the states, from its stream (kind/NAME: every
 * event of a grant's, binding's, module's, assignment's, provider's or
 * node's life is on that entity's stream).  A provider's registration,
 * retirement or move, a node added, removed or lost, a module declared
 * or removed change the answers of modules that do not name them (what
 * a pending requirement waits for, a lost grant's question): every
 * module is asked again, as for anything not listed.
 */
static void
touch(struct bd_mirror *m, const struct tl_event *ev)
{
	static const struct {
		const char	*prefix, *mark;
	} near[] = {
		{ "grant/", "g:" }, { "binding/", "g:" },
		{ "module/", "m:" }, { "assignment/", "a:" },
		{ "provider/", "p:" }, { "node/", "n:" },
	};
	static const char *const wide[] = {
		"module.declared", "module.removed", "provider.registered",
		"provider.retired", "provider.moved", "node.added",
		"node.removed", "node.lost",
	};
	char key[TL_STREAM_MAX + 4];
	const char *rest;
	size_t i, n;

	if (m->all)
		return;
	for (i = 0; i < sizeof(wide) / sizeof(wide[0]); i++)
		if (strcmp(ev->type, wide[i]) == 0) {
			m->all = 1;
			return;
		}
	for (i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
		n = strlen(near[i].prefix);
		if (strncmp(ev->stream, near[i].prefix, n) != 0)
			continue;
		rest = ev->stream + n;
		/* An assignment's stream is MODULE@NODE: the module. */
		n = strcmp(near[i].mark, "a:") == 0 ? strcspn(rest, "@") :
		    strlen(rest);
		snprintf(key, sizeof(key), "%s%.*s", near[i].mark, (int)n,
		    rest);
		if (json_object_set_new(m->touched, key, json_true()) != 0)
			m->all = 1;
		return;
	}
	m->all = 1;
}

int
bd_mirror_add(struct bd_mirror *m, const struct tl_event *ev)
{
	struct copied *c;

	if (ev->seq <= m->head)
		return 0;		/* copied before the board's crash */
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;

		if ((c = realloc(m->batch, cap * sizeof(*c))) == NULL)
			return ENOMEM;
		m->batch = c;
		m->cap = cap;
	}
	c = &m->batch[m->n];
	if ((c->raw = malloc(ev->raw_len)) == NULL)
		return ENOMEM;
	memcpy(c->raw, ev->raw, ev->raw_len);
	c->len = ev->raw_len;
	c->seq = ev->seq;
	m->n++;
	touch(m, ev);
	return 0;
}

/* tl_log_write's: the batch appended, the projections folded over it. */
static int
write_batch(struct tl_txn *t, void *arg)
{
	struct bd_mirror *m = arg;
	uint64_t head = 0, seq;
	size_t i;
	int rc;

	if ((rc = tl_log_last(t, &head, NULL)) != 0)
		return rc;
	for (i = 0; i < m->n; i++) {
		if (m->batch[i].seq <= head)
			continue;
		rc = tl_log_append_raw(t, m->batch[i].raw, m->batch[i].len,
		    NULL, &seq, m->why);
		if (rc != 0) {
			m->bad = m->batch[i].seq;
			return rc;
		}
	}
	return tl_proj_catchup(t, 0);
}

int
bd_mirror_commit(struct bd_mirror *m, char *why)
{
	struct tl_txn *t;
	int rc;

	why[0] = m->why[0] = '\0';
	m->bad = 0;
	if (m->n > 0 && (rc = tl_log_write(m->log, write_batch, m)) != 0) {
		if (m->bad != 0)
			snprintf(why, TL_WHY_MAX, "event %llu: %.100s",
			    (unsigned long long)m->bad, m->why[0] ? m->why :
			    tl_strerror(rc));
		batch_free(m);
		return rc;
	}
	batch_free(m);
	if ((rc = tl_log_begin(m->log, TL_TXN_RDONLY, &t)) == 0) {
		rc = tl_log_last(t, &m->head, NULL);
		tl_log_abort(t);
	}
	return rc;
}

void
bd_mirror_abort(struct bd_mirror *m)
{
	batch_free(m);
}

/*
 * The mesh and who leads it, as the record says: the mesh id, the
 * epoch in force, its leader (the promotion's chain hash) and the event
 * that started it.  Standbys and their lag are not in the record: the
 * board reads them from the home it follows (main.c).
 */
static void
control_plane(struct tl_txn *t, json_t *st)
{
	char mesh[TL_MESH_LEN + 1] = "", leader[33] = "";
	uint64_t epoch = 0, at = 0;

	if (tl_mesh_get(t, mesh) != 0 || tl_ep_leader(t, &epoch, leader) != 0 ||
	    tl_ep_current(t, &epoch, &at) != 0)
		return;
	json_object_set_new(st, "control_plane", json_pack("{s:s,s:I,s:s,"
	    "s:I}", "mesh", mesh, "epoch", (json_int_t)epoch, "leader",
	    leader, "since_seq", (json_int_t)at));
}

/*
 * What the record says changed in the day before now_ns: the events by
 * type and the newest few, walking back from the head (at most
 * SINCE_MAX events: "more" says the day held more).
 */
static void
since(struct tl_txn *t, uint64_t now_ns, json_t *st)
{
	uint64_t head = 0, seq, from = now_ns - 86400ull * 1000000000ull;
	json_t *by = json_object(), *recent = json_array();
	struct tl_event ev;
	size_t n = 0;

	if (by == NULL || recent == NULL || tl_log_last(t, &head, NULL) != 0) {
		json_decref(by);
		json_decref(recent);
		return;
	}
	for (seq = head; seq > 0 && n < SINCE_MAX; seq--, n++) {
		if (tl_log_get(t, seq, &ev) != 0 || ev.ts < from)
			break;
		json_object_set_new(by, ev.type, json_integer(
		    json_integer_value(json_object_get(by, ev.type)) + 1));
		if (json_array_size(recent) < SINCE_RECENT)
			json_array_append_new(recent, json_pack("{s:I,s:I,s:s,"
			    "s:s}", "seq", (json_int_t)ev.seq, "ts_ns",
			    (json_int_t)ev.ts, "type", ev.type, "stream",
			    ev.stream));
	}
	json_object_set_new(st, "since_yesterday", json_pack("{s:I,s:b,s:o,"
	    "s:o}", "events", (json_int_t)n, "more", n == SINCE_MAX &&
	    seq > 0, "by_type", by, "recent", recent));
}

/* --- the states, kept ------------------------------------------------- */

static int
mark(json_t *dirty, const char *module)
{
	return json_object_set_new(dirty, module, json_true());
}

/* GRANT's module: its record's, or its key's first part once gone. */
static int
grant_module(struct tl_txn *t, const struct tl_proj *p, const char *gkey,
    json_t *dirty)
{
	struct tl_grant g;
	char mod[64];

	if (tl_grant_get(t, p, gkey, &g, NULL) == 0)
		return mark(dirty, g.module);
	snprintf(mod, sizeof(mod), "%.*s", (int)strcspn(gkey, "/"), gkey);
	return mark(dirty, mod);
}

/* The modules holding grants of provider id: their requirements. */
static int
provider_modules(struct tl_txn *t, const struct tl_proj *p, const char *id,
    json_t *dirty)
{
	struct tl_rec_keys ks = { 0 };
	char k[TL_KEY_MAX];
	size_t i;
	int rc;

	if ((rc = tl_key(k, "gp/%s/", id)) != 0 ||
	    (rc = tl_rec_keys(t, p->grants, k, &ks)) != 0)
		return rc;
	for (i = 0; i < ks.n && rc == 0; i++)
		rc = grant_module(t, p, ks.v[i], dirty);
	tl_rec_keys_free(&ks);
	return rc;
}

/*
 * The modules what was touched can have changed: a grant's module; a
 * module; an assignment's module and, when it provides, the consumers
 * of its providers (their exposure); a provider's consumers; the
 * modules on a node (what its agent holds).
 */
static int
dirty_modules(struct bd_mirror *m, struct tl_txn *t, const struct tl_proj *p,
    json_t *dirty)
{
	struct tl_rec_keys ks = { 0 };
	char k[TL_KEY_MAX];
	const char *key, *name;
	json_t *v;
	size_t i;
	int rc = 0;

	json_object_foreach(m->touched, key, v) {
		name = key + 2;
		switch (key[0]) {
		case 'g':
			rc = grant_module(t, p, name, dirty);
			break;
		case 'm':
			rc = mark(dirty, name);
			break;
		case 'p':
			rc = provider_modules(t, p, name, dirty);
			break;
		case 'a':
		case 'n':
			if (key[0] == 'a' && (rc = mark(dirty, name)) != 0)
				break;
			if ((rc = tl_key(k, key[0] == 'a' ? "pm/%s/" :
			    "an/%s/", name)) != 0 ||
			    (rc = tl_rec_keys(t, p->graph, k, &ks)) != 0)
				break;
			for (i = 0; i < ks.n && rc == 0; i++)
				rc = key[0] == 'a' ? provider_modules(t, p,
				    ks.v[i], dirty) : mark(dirty, ks.v[i]);
			tl_rec_keys_free(&ks);
			break;
		}
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Module i's summary kept, in place of what it was. */
static int
sum_set(struct bd_mirror *m, size_t i, const json_t *doc)
{
	json_t *bad = json_array();
	const char *mod = json_string_value(json_object_get(doc, "module"));
	size_t r;

	if (bad == NULL || mod == NULL) {
		json_decref(bad);
		return ENOMEM;
	}
	r = bd_module_summary(doc, bad);
	m->ready += (json_int_t)r - json_integer_value(json_array_get(
	    m->readies, i));
	json_array_set_new(m->readies, i, json_integer((json_int_t)r));
	if (json_array_size(bad) > 0)
		return json_object_set_new(m->sick, mod, bad) == 0 ? 0 : ENOMEM;
	json_object_del(m->sick, mod);
	json_decref(bad);
	return 0;
}

/* Every module asked: the states and their index made again. */
static int
ask_all(struct bd_mirror *m, struct tl_txn *t, const struct tl_proj *p)
{
	json_t *st, *v;
	size_t i;
	int rc;

	if ((rc = tl_status_all(t, p, &st)) != 0)
		return rc;
	json_decref(m->mods);
	json_decref(m->index);
	m->mods = json_incref(json_object_get(st, "modules"));
	json_decref(st);
	if ((m->index = json_object()) == NULL)
		return ENOMEM;
	json_decref(m->readies);
	json_decref(m->sick);
	m->ready = 0;
	if ((m->readies = json_array()) == NULL ||
	    (m->sick = json_object()) == NULL)
		return ENOMEM;
	json_array_foreach(m->mods, i, v)
		if (json_object_set_new(m->index, json_string_value(
		    json_object_get(v, "module")), json_integer((json_int_t)i))
		    != 0 || json_array_append_new(m->readies, json_integer(0))
		    != 0 || sum_set(m, i, v) != 0)
			return ENOMEM;
	return 0;
}

/*
 * The states brought up to date: the dirty modules asked again, or all
 * of them.  A module not in the index, or gone, is a change of the set
 * of modules, which only the wide events make: asked all the same.
 */
static int
states(struct bd_mirror *m, struct tl_txn *t, const struct tl_proj *p)
{
	json_t *dirty, *v, *doc;
	const char *mod;
	int rc = 0;

	if (!m->all && m->mods != NULL && (dirty = json_object()) != NULL) {
		if ((rc = dirty_modules(m, t, p, dirty)) != 0)
			m->all = 1;
		json_object_foreach(dirty, mod, v) {
			if (m->all)
				break;
			v = json_object_get(m->index, mod);
			if (v == NULL || tl_status_module(t, p, mod, &doc) !=
			    0) {
				m->all = 1;
				break;
			}
			json_array_set_new(m->mods, (size_t)
			    json_integer_value(v), doc);
			if (sum_set(m, (size_t)json_integer_value(v), doc) != 0) {
				m->all = 1;
				break;
			}
		}
		json_decref(dirty);
	} else
		m->all = 1;
	if (m->all && (rc = ask_all(m, t, p)) != 0)
		return rc;
	m->all = 0;
	json_object_clear(m->touched);
	return 0;
}

/* TALLY_BOARD_CHECK: the kept states against every module asked. */
static int
check_states(struct bd_mirror *m, struct tl_txn *t, const struct tl_proj *p)
{
	json_t *st, *mods, *v;
	size_t i;
	int bad = 0;

	if (tl_status_all(t, p, &st) != 0)
		return 0;
	mods = json_object_get(st, "modules");
	if (json_array_size(mods) != json_array_size(m->mods)) {
		fprintf(stderr, "tally-board: the kept states hold %zu modules"
		    ", status %zu\n", json_array_size(m->mods),
		    json_array_size(mods));
		bad = 1;
	}
	json_array_foreach(mods, i, v)
		if (!bad && !json_equal(v, json_array_get(m->mods, i))) {
			fprintf(stderr, "tally-board: the kept state of module "
			    "%s differs from status's\n", json_string_value(
			    json_object_get(v, "module")));
			bad = 1;
		}
	json_decref(st);
	return bad ? TL_ECORRUPT : 0;
}

/*
 * The kept summary, but for the modules an agent's holdings changed
 * (wrong; mods holds their changed copies): {"ready": N, "sick":
 * {module: [unhealthy requirement]}} (render.c), a new reference.
 */
static json_t *
summary(struct bd_mirror *m, const json_t *mods, const json_t *wrong)
{
	json_t *sick = json_copy(m->sick), *w, *ix, *bad, *done = json_object();
	json_int_t ready = m->ready;
	const char *mod;
	size_t i, at;

	if (sick == NULL || done == NULL) {
		json_decref(sick);
		json_decref(done);
		return NULL;
	}
	json_array_foreach(wrong, i, w) {
		mod = json_string_value(json_object_get(w, "module"));
		if (mod == NULL || json_object_get(done, mod) != NULL ||
		    (ix = json_object_get(m->index, mod)) == NULL ||
		    (bad = json_array()) == NULL)
			continue;
		json_object_set_new(done, mod, json_true());
		at = (size_t)json_integer_value(ix);
		ready += (json_int_t)bd_module_summary(json_array_get(mods, at),
		    bad) - json_integer_value(json_array_get(m->readies, at));
		if (json_array_size(bad) > 0)
			json_object_set(sick, mod, bad);
		else
			json_object_del(sick, mod);
		json_decref(bad);
	}
	json_decref(done);
	return json_pack("{s:I,s:o}", "ready", ready, "sick", sick);
}

/*
 * As tally status --json assembles it: the modules, the agents and
 * what they hold against the record (a module whose node holds a
 * retired version is unhealthy), and what must not be forgotten.  The
 * agents' last heartbeat is operational state beside tally's log, not
 * in it: the board has each agent's last recorded report and says
 * none is silent (its own "last report" is what it shows).  The kept
 * states are shared with the document, but for the modules an agent's
 * holdings make unhealthy, which it gets copies of to change; "index"
 * is each module's place in "modules" (the kept index, shared).
 */
json_t *
bd_mirror_status(struct bd_mirror *m, uint64_t now_ns)
{
	struct tl_status_agents ag;
	struct tl_txn *t;
	struct tl_proj p;
	json_t *st = NULL, *at = NULL, *mods, *w, *ix;
	size_t i;

	if (tl_log_begin(m->log, TL_TXN_RDONLY, &t) != 0)
		return NULL;
	if (tl_proj_open(t, &p) != 0 || states(m, t, &p) != 0 ||
	    (m->check && check_states(m, t, &p) != 0) ||
	    (mods = json_copy(m->mods)) == NULL ||
	    (st = json_pack("{s:o,s:O}", "modules", mods, "index",
	    m->index)) == NULL) {
		tl_log_abort(t);
		return NULL;
	}
	if (tl_status_agents(t, &p, NULL, now_ns, UINT64_MAX, 0, &ag) == 0) {
		json_array_foreach(ag.wrong, i, w)
			if ((ix = json_object_get(m->index, json_string_value(
			    json_object_get(w, "module")))) != NULL)
				json_array_set_new(mods, (size_t)
				    json_integer_value(ix), json_deep_copy(
				    json_array_get(mods, (size_t)
				    json_integer_value(ix))));
		json_object_set_new(st, "agents", ag.agents);
		tl_status_off_record(st, ag.wrong);
		json_object_set_new(st, "summary", summary(m, mods, ag.wrong));
		json_object_set_new(st, "off_record", ag.wrong);
	}
	if (tl_status_attention(t, &p, now_ns, TL_ATTN_CLOCK, &at) == 0)
		json_object_set_new(st, "attention", at);
	if (tl_rx_fencing(t, &p, &at) == 0)
		json_object_set_new(st, "fencing", at);
	control_plane(t, st);
	since(t, now_ns, st);
	tl_log_abort(t);
	return st;
}

/* --- a module's history ------------------------------------------------ */

#define HISTORY_MAX	2000

struct hist {
	struct tl_txn	*t;
	uint64_t	*v;
	size_t		 n, cap;
};

static int
hist_stream(struct hist *h, const char *stream)
{
	struct tl_filter f = { 0 };
	struct tl_iter *it;
	struct tl_event ev;
	uint64_t *nv;
	int rc;

	f.stream = stream;
	if ((rc = tl_iter_open(h->t, &f, &it)) != 0)
		return rc;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		if (h->n == h->cap) {
			size_t cap = h->cap ? h->cap * 2 : 64;

			if ((nv = realloc(h->v, cap * sizeof(*nv))) == NULL) {
				rc = ENOMEM;
				break;
			}
			h->v = nv;
			h->cap = cap;
		}
		h->v[h->n++] = ev.seq;
	}
	tl_iter_close(it);
	return rc == TL_EEOF ? 0 : rc;
}

static int
cmp_seq(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Each node's assignment stream of the module, when it has one. */
static int
hist_node(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct hist *h = ((void **)arg)[0];
	const char *module = ((void **)arg)[1];
	char stream[TL_STREAM_MAX + 1];
	uint64_t ver = 0;

	(void)val;
	(void)vlen;
	if (snprintf(stream, sizeof(stream), "assignment/%s@%s", module,
	    rest) >= (int)sizeof(stream) ||
	    tl_stream_version(h->t, stream, &ver) != 0 || ver == 0)
		return 0;
	return hist_stream(h, stream);
}

/* A name as tally takes them: 1-63 of [a-z0-9-]. */
static int
name_ok(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-");

	return n > 0 && n < 64 && s[n] == '\0';
}

json_t *
bd_mirror_history(struct bd_mirror *m, const char *module)
{
	struct hist h = { 0 };
	struct tl_rec_keys ks = { 0 };
	struct tl_proj p;
	struct tl_event ev, cause;
	char k[TL_KEY_MAX], stream[TL_STREAM_MAX + 1], what[1024];
	void *arg[2] = { &h, (void *)module };
	json_t *out = NULL, *evs;
	size_t i, from;
	int rc;

	if (!name_ok(module) || tl_log_begin(m->log, TL_TXN_RDONLY,
	    &h.t) != 0)
		return NULL;
	/* The module's stream, its assignments', its grants' and bindings'. */
	snprintf(stream, sizeof(stream), "module/%s", module);
	if ((rc = tl_proj_open(h.t, &p)) != 0 ||
	    (rc = hist_stream(&h, stream)) != 0 ||
	    (rc = tl_rec_scan(h.t, p.graph, "n/", hist_node, arg)) != 0 ||
	    (rc = tl_key(k, "gm/%s/", module)) != 0 ||
	    (rc = tl_rec_keys(h.t, p.grants, k, &ks)) != 0)
		goto out;
	for (i = 0; i < ks.n && rc == 0; i++) {
		snprintf(stream, sizeof(stream), "grant/%s", ks.v[i]);
		if ((rc = hist_stream(&h, stream)) == 0) {
			snprintf(stream, sizeof(stream), "binding/%s", ks.v[i]);
			rc = hist_stream(&h, stream);
		}
	}
	if (rc != 0 || h.n == 0)
		goto out;
	qsort(h.v, h.n, sizeof(*h.v), cmp_seq);
	from = h.n > HISTORY_MAX ? h.n - HISTORY_MAX : 0;
	if ((evs = json_array()) == NULL)
		goto out;
	out = json_pack("{s:s,s:I,s:o}", "module", module, "events",
	    (json_int_t)h.n, "shown", evs);
	for (i = from; out != NULL && i < h.n; i++) {
		json_t *e;
		char ts[64];

		if (i > from && h.v[i] == h.v[i - 1])
			continue;
		if (tl_log_get(h.t, h.v[i], &ev) != 0)
			continue;
		tl_describe(&ev, what, sizeof(what));
		tl_json_time(ev.ts, ts);
		ts[23] = 'Z';	/* to the millisecond, as tally history */
		ts[24] = '\0';
		e = json_pack("{s:I,s:s,s:s,s:s,s:s,s:s}", "seq", (json_int_t)
		    ev.seq, "ts", ts, "actor", ev.actor, "type", ev.type,
		    "stream", ev.stream, "what", what);
		if (e != NULL && ev.cause != 0 &&
		    tl_log_get(h.t, ev.cause, &cause) == 0) {
			tl_describe(&cause, what, sizeof(what));
			json_object_set_new(e, "cause", json_pack("{s:I,s:s,"
			    "s:s}", "seq", (json_int_t)ev.cause, "type",
			    cause.type, "what", what));
		}
		json_array_append_new(evs, e);
	}
out:
	tl_rec_keys_free(&ks);
	free(h.v);
	tl_log_abort(h.t);
	return out;
}
