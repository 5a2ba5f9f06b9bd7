/*
 * metrics.c - the figures tallyd --metrics serves (metrics.h), as
 * the Prometheus text exposition format, built in the main loop's
 * thread from the projections (the same records tally status reads),
 * the log and the loop's own timings.
 *
 * Every label set is bounded by the mesh's shape, never by its size:
 * providers, grant states, reactors, drift and refusal kinds (at most
 * TL_MX_NCOUNTS each, the rest under "other"); no grant id is a label.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "core/body.h"
#include "core/error.h"
#include "core/log.h"
#include "core/version.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "projections/record.h"
#include "projections/status.h"
#include "metrics.h"

/* --- counters from the log ------------------------------------------- */

static void
bump(struct tl_mx_count *c, const char *label)
{
	size_t i;

	if (*label == '\0')
		label = "unknown";
	for (i = 0; i < TL_MX_NCOUNTS && c[i].label[0] != '\0'; i++)
		if (strcmp(c[i].label, label) == 0) {
			c[i].n++;
			return;
		}
	if (i == TL_MX_NCOUNTS - 1 || i == TL_MX_NCOUNTS) {
		/* The last slot is "other": a bounded label set. */
		snprintf(c[TL_MX_NCOUNTS - 1].label,
		    sizeof(c[0].label), "other");
		c[TL_MX_NCOUNTS - 1].n++;
		return;
	}
	snprintf(c[i].label, sizeof(c[i].label), "%s", label);
	c[i].n = 1;
}

/* The events appended since the last call: drift, repairs, refusals. */
static int
count_events(struct tl_txn *t, struct tl_mx_state *st, uint64_t last)
{
	struct tl_filter f;
	struct tl_iter *it;
	struct tl_event ev;
	int rc;

	if (!st->started || last <= st->seen) {
		st->seen = last;
		st->started = 1;
		return 0;
	}
	memset(&f, 0, sizeof(f));
	f.from = st->seen + 1;
	f.to = last;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		int drift = strcmp(ev.type, TL_EV_GRANT_DRIFTED) == 0;
		int repaired = strcmp(ev.type, TL_EV_GRANT_REPAIRED) == 0;
		struct tl_bview v;
		char kind[48] = "";

		if (drift || repaired) {
			if (tl_bview_open_valid(&v, ev.body, ev.body_len) == 0)
				tl_bn_getstr(v.root, "kind", kind,
				    sizeof(kind));
			bump(drift ? st->drift : st->repaired, kind);
		} else if (strstr(ev.type, "refused") != NULL)
			bump(st->refused, ev.type);
	}
	tl_iter_close(it);
	if (rc != TL_EEOF)
		return rc;
	st->seen = last;
	return 0;
}

static void
counts(struct tl_mx_buf *b, const char *name, const char *label,
    const struct tl_mx_count *c, const char *help)
{
	char e[512];
	size_t i;

	tl_mx_head(b, name, "counter", help);
	for (i = 0; i < TL_MX_NCOUNTS && c[i].label[0] != '\0'; i++)
		tl_mx_addf(b, "%s{%s=\"%s\"} %llu\n", name, label,
		    tl_mx_label(c[i].label, e), (unsigned long long)c[i].n);
}

/* --- grants, by provider and state ----------------------------------- */

#define NSTATES	16

struct pstate {
	char	 provider[130];
	char	 state[NSTATES][16];
	uint64_t n[NSTATES];
};

struct gwalk {
	struct tl_txn	*t;
	struct pstate	*ps;
	size_t		 nps, cap;
	uint64_t	 oldest_ns;	/* the least recent verification */
	uint64_t	 unverified;	/* provisioned, never checked */
	int		 err;
};

/*
 * One grant's record, read for its provider and state alone (a scrape
 * costs one pass over the records, no whole decode of each).
 */
static int
grant_one(const char *id, const void *val, size_t vlen, void *arg)
{
	struct gwalk *w = arg;
	struct pstate *p = NULL;
	struct tl_rec r;
	char provider[130] = "", state[16] = "";
	size_t i;

	if (tl_rec_open(val, vlen, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "provider", provider, sizeof(provider));
	tl_bn_getstr(r.m, "state", state, sizeof(state));
	tl_rec_close(&r);
	for (i = 0; i < w->nps; i++)
		if (strcmp(w->ps[i].provider, provider) == 0) {
			p = &w->ps[i];
			break;
		}
	if (p == NULL) {
		if (w->nps == w->cap) {
			size_t cap = w->cap ? w->cap * 2 : 16;
			struct pstate *q = realloc(w->ps, cap * sizeof(*q));

			if (q == NULL) {
				w->err = ENOMEM;
				return ENOMEM;
			}
			w->ps = q;
			w->cap = cap;
		}
		p = &w->ps[w->nps++];
		memset(p, 0, sizeof(*p));
		snprintf(p->provider, sizeof(p->provider), "%s", provider);
	}
	for (i = 0; i < NSTATES && p->state[i][0] != '\0'; i++)
		if (strcmp(p->state[i], state) == 0)
			break;
	if (i < NSTATES) {
		if (p->state[i][0] == '\0')
			snprintf(p->state[i], sizeof(p->state[i]), "%s", state);
		p->n[i]++;
	}
	if (strcmp(state, TL_GRANT_PROVISIONED) == 0) {
		uint64_t last = 0, count = 0;

		if (tl_checks_get(w->t, id, &last, &count) != 0 || last == 0)
			w->unverified++;
		else if (w->oldest_ns == 0 || last < w->oldest_ns)
			w->oldest_ns = last;
	}
	return 0;
}

/* --- providers and their reachability -------------------------------- */

struct pwalk {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	struct tl_mx_buf	*b;
};

static int
provider_one(const char *rest, const void *val, size_t len, void *arg)
{
	struct pwalk *w = arg;
	struct tl_rec r;
	char k[TL_KEY_MAX], e[512];
	int down;

	(void)val;
	(void)len;
	/* "p/NODE/MODULE": a provider; nothing else is under "p/". */
	if (strchr(rest, '/') == NULL || strchr(strchr(rest, '/') + 1,
	    '/') != NULL)
		return 0;
	down = tl_key(k, "pu/%s", rest) == 0 &&
	    tl_rec_get(w->t, w->p->graph, k, &r) == 0;
	if (down)
		tl_rec_close(&r);
	tl_mx_addf(w->b, "tally_provider_up{provider=\"%s\"} %d\n", tl_mx_label(rest, e),
	    !down);
	return 0;
}

/* --- rotations waiting on holders ------------------------------------ */

static void
rotations(struct tl_mx_buf *b, struct tl_txn *t, const struct tl_proj *p,
    uint64_t now_ns)
{
	json_t *rs = NULL, *x;
	uint64_t n = 0, acks = 0, oldest = 0;
	size_t i;

	if (tl_status_rotations(t, p, &rs) == 0)
		json_array_foreach(rs, i, x) {
			json_int_t s = json_integer_value(json_object_get(x,
			    "started_ns"));
			size_t w = json_array_size(json_object_get(x,
			    "waiting_on"));

			if (w == 0)
				continue;
			n++;
			acks += w;
			if (s > 0 && (oldest == 0 || (uint64_t)s < oldest))
				oldest = (uint64_t)s;
		}
	json_decref(rs);
	tl_mx_head(b, "tally_rotations_in_progress", "gauge", "Rotations waiting "
	    "for their holders' acknowledgements.");
	tl_mx_addf(b, "tally_rotations_in_progress %llu\n",
	    (unsigned long long)n);
	tl_mx_head(b, "tally_rotation_oldest_age_seconds", "gauge", "How long the "
	    "oldest rotation in progress has been waiting (0: none).");
	tl_mx_addf(b, "tally_rotation_oldest_age_seconds %.3f\n", oldest &&
	    now_ns > oldest ? (double)(now_ns - oldest) / 1e9 : 0.0);
	tl_mx_head(b, "tally_acks_outstanding", "gauge", "Holders whose "
	    "acknowledgement a rotation waits for.");
	tl_mx_addf(b, "tally_acks_outstanding %llu\n", (unsigned long long)acks);
}

/* --- all of it ------------------------------------------------------- */

static uint64_t
wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int
tl_mx_text(struct tl_rx *rx, struct tl_mx_state *st, char **out,
    size_t *len)
{
	struct tl_mx_buf b = TL_MX_BUF_INIT;
	struct gwalk gw;
	struct pwalk pw;
	struct tl_txn *t = NULL;
	struct tl_proj p;
	uint64_t last = 0, used = 0, map = 0, now = wall_ns();
	char e[512];
	size_t i, j;
	int rc;

	*out = NULL;
	*len = 0;
	memset(&gw, 0, sizeof(gw));
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if ((rc = tl_log_last(t, &last, NULL)) != 0 && rc != TL_ENOTFOUND)
		goto out;
	if ((rc = count_events(t, st, last)) != 0 ||
	    (rc = tl_proj_open(t, &p)) != 0)
		goto out;

	tl_mx_head(&b, "tally_info", "gauge", "This control plane: its version and "
	    "mesh.");
	tl_mx_addf(&b, "tally_info{version=\"%s\",mesh=\"%s\"} 1\n",
	    tl_mx_label(TL_VERSION, e), rx->mesh);
	tl_mx_head(&b, "tally_leader_epoch", "gauge", "The epoch this control plane "
	    "leads at.");
	tl_mx_addf(&b, "tally_leader_epoch %llu\n", (unsigned long long)rx->epoch);
	tl_mx_head(&b, "tally_log_head_sequence", "gauge", "The sequence number of "
	    "the log's last event.");
	tl_mx_addf(&b, "tally_log_head_sequence %llu\n", (unsigned long long)last);

	gw.t = t;
	if ((rc = tl_rec_scan(t, p.grants, "g/", grant_one, &gw)) != 0 ||
	    (rc = gw.err) != 0)
		goto out;
	tl_mx_head(&b, "tally_grants", "gauge", "Grants by provider and state.");
	for (i = 0; i < gw.nps; i++)
		for (j = 0; j < NSTATES && gw.ps[i].state[j][0] != '\0'; j++)
			tl_mx_addf(&b, "tally_grants{provider=\"%s\",state=\"%s\"} "
			    "%llu\n", tl_mx_label(gw.ps[i].provider, e),
			    gw.ps[i].state[j], (unsigned long long)gw.ps[i].n[j]);
	tl_mx_head(&b, "tally_verification_oldest_age_seconds", "gauge", "Since "
	    "when the least recently verified provisioned grant was last "
	    "checked (0: none checked).");
	tl_mx_addf(&b, "tally_verification_oldest_age_seconds %.3f\n",
	    gw.oldest_ns && now > gw.oldest_ns ?
	    (double)(now - gw.oldest_ns) / 1e9 : 0.0);
	tl_mx_head(&b, "tally_grants_unverified", "gauge", "Provisioned grants never "
	    "verified yet.");
	tl_mx_addf(&b, "tally_grants_unverified %llu\n",
	    (unsigned long long)gw.unverified);

	tl_mx_head(&b, "tally_provider_up", "gauge", "1 when the provider was "
	    "reachable at tally's last call, 0 when it was recorded "
	    "unreachable (or untrusted, or its admin login refused).");
	pw.t = t;
	pw.p = &p;
	pw.b = &b;
	if ((rc = tl_rec_scan(t, p.graph, "p/", provider_one, &pw)) != 0)
		goto out;
	rotations(&b, t, &p, now);

	counts(&b, "tally_drift_found_total", "kind", st->drift, "Drift the "
	    "verifier found (grant.drifted), since tallyd started.");
	counts(&b, "tally_drift_repaired_total", "kind", st->repaired,
	    "Drift repaired (grant.repaired), since tallyd started.");
	counts(&b, "tally_refused_total", "event", st->refused, "Messages and "
	    "requests refused and recorded (security.*-refused, "
	    "certificate.refused, ...), since tallyd started.");
	tl_mx_head(&b, "tally_verifications_total", "counter", "Grants checked by "
	    "the verifier, since tallyd started.");
	tl_mx_addf(&b, "tally_verifications_total %llu\n",
	    (unsigned long long)st->verified);
	tl_mx_head(&b, "tally_verifications_unhealthy_total", "counter", "Checks "
	    "that found a grant not healthy, since tallyd started.");
	tl_mx_addf(&b, "tally_verifications_unhealthy_total %llu\n",
	    (unsigned long long)st->unhealthy);

	tl_mx_head(&b, "tally_pass_duration_seconds", "histogram", "How long each "
	    "reactor's passes took.");
	for (i = 0; i < st->npass; i++)
		tl_mx_hist_write(&b, "tally_pass_duration_seconds", "reactor",
		    st->pass_names[i], &st->pass[i]);
	tl_log_abort(t);
	t = NULL;
	if (st->extra != NULL)
		st->extra(&b, last, st->extra_arg);
	if (tl_log_size(rx->log, &used, &map) == 0) {
		tl_mx_head(&b, "tally_log_size_bytes", "gauge", "The log's data file "
		    "in use, in bytes.");
		tl_mx_addf(&b, "tally_log_size_bytes %llu\n",
		    (unsigned long long)used);
	}
	if ((rc = b.err) != 0)
		goto out;
	*out = b.p;
	*len = b.len;
	b.p = NULL;
out:
	if (t != NULL)
		tl_log_abort(t);
	free(gw.ps);
	free(b.p);
	return rc;
}
