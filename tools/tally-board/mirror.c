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
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "board.h"
#include "core/error.h"
#include "core/log.h"
#include "projections/proj.h"
#include "projections/record.h"
#include "projections/status.h"
#include "reactors/epoch.h"
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
};
int
bd_mirror_open(const char *store, struct bd_mirror **out, char *why,
    size_t whylen)
{
	struct bd_mirror *m;
	struct tl_txn *t;
	char dir[1200];
	int rc;

	*out = NULL;
	if ((size_t)snprintf(dir, sizeof(dir), "%s/mirror", store) >=
	    sizeof(dir)) {
		snprintf(why, whylen, "%s: path too long", store);
		return ENAMETOOLONG;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(why, whylen, "%s: %s", dir, strerror(errno));
		return errno;
	}
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return ENOMEM;
	rc = tl_log_open(dir, 0, &m->log);
	if (rc == TL_ENOTFOUND)
		rc = tl_log_open(dir, TL_LOG_CREATE, &m->log);
	if (rc != 0) {
		snprintf(why, whylen, "%s: %s", dir, tl_strerror(rc));
		free(m);
		return rc;
	}
	if ((rc = tl_log_begin(m->log, TL_TXN_RDONLY, &t)) == 0) {
		rc = tl_log_last(t, &m->head, NULL);	/* 0 when empty */
		tl_log_abort(t);
	}
	if (rc != 0) {
		snprintf(why, whylen, "%s: %s", dir, tl_strerror(rc));
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
 * that started it.  Standbys and their lag are not in the record (the
 * leader's etcd marks, tallyd --metrics): not here.
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

/*
 * As tally status --json assembles it: the modules, the agents and
 * what they hold against the record (a module whose node holds a
 * retired version is unhealthy), and what must not be forgotten.  The
 * agents' last heartbeat is operational state beside tally's log, not
 * in it: the board has each agent's last recorded report and says
 * none is silent (its own "last report" is what it shows).
 */
json_t *
bd_mirror_status(struct bd_mirror *m, uint64_t now_ns)
{
	struct tl_status_agents ag;
	struct tl_txn *t;
	struct tl_proj p;
	json_t *st = NULL, *at = NULL;

	if (tl_log_begin(m->log, TL_TXN_RDONLY, &t) != 0)
		return NULL;
	if (tl_proj_open(t, &p) != 0 || tl_status_all(t, &p, &st) != 0) {
		tl_log_abort(t);
		return NULL;
	}
	if (tl_status_agents(t, &p, NULL, now_ns, UINT64_MAX, 0, &ag) == 0) {
		json_object_set_new(st, "agents", ag.agents);
		tl_status_off_record(st, ag.wrong);
		json_object_set_new(st, "off_record", ag.wrong);
	}
	if (tl_status_attention(t, &p, now_ns, &at) == 0)
		json_object_set_new(st, "attention", at);
	control_plane(t, st);
	since(t, now_ns, st);
	tl_log_abort(t);
	return st;
}
