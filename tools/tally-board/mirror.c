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

struct bd_mirror {
	struct tl_log	*log;
	struct tl_txn	*t;	/* the write transaction, between begin and commit */
	uint64_t	 head;	/* the last event copied */
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
		rc = tl_log_last(t, &m->head, NULL);
		if (rc == TL_ENOTFOUND) {
			m->head = 0;
			rc = 0;
		}
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

void
bd_mirror_close(struct bd_mirror *m)
{
	if (m == NULL)
		return;
	if (m->t != NULL)
		tl_log_abort(m->t);
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
	return tl_log_begin(m->log, 0, &m->t);
}

int
bd_mirror_add(struct bd_mirror *m, const struct tl_event *ev, char *why)
{
	uint64_t seq;
	int rc;

	why[0] = '\0';
	if (ev->seq <= m->head)
		return 0;		/* copied before the board's crash */
	rc = tl_log_append_raw(m->t, ev->raw, ev->raw_len, NULL, &seq, why);
	if (rc == TL_EEXIST)
		return 0;
	return rc;
}

int
bd_mirror_commit(struct bd_mirror *m)
{
	uint64_t head = 0;
	int rc;

	/* The states follow the copy in the same transaction. */
	if ((rc = tl_proj_catchup(m->t, 0)) != 0 ||
	    ((rc = tl_log_last(m->t, &head, NULL)) != 0 &&
	    rc != TL_ENOTFOUND)) {
		tl_log_abort(m->t);
		m->t = NULL;
		return rc;
	}
	rc = tl_log_commit(m->t);
	m->t = NULL;
	if (rc == 0)
		m->head = head;
	return rc;
}

void
bd_mirror_abort(struct bd_mirror *m)
{
	if (m->t != NULL)
		tl_log_abort(m->t);
	m->t = NULL;
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
	tl_log_abort(t);
	return st;
}
