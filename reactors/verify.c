/*
 * verify.c - the verifier: a grant is a claim about the world, checked.
 *
 * Each provisioned grant is checked every interval (30 s by default),
 * at its own place in the interval, a hash of its id, so that 10,000
 * grants do not hit a provider in the same second (see slot_at); grants
 * due within 1/30 of the interval are checked in one pass.  A check logs
 * in as the consumer on the routable name the consumer was given (for a
 * provider exposed local, where tallyd administers it: its consumers
 * reach it over their node's loopback) and inspects the objects from
 * the admin side.
 *
 * A driver with a bulk check (TL_DRV_CAP_CHECK_BULK) is asked about all
 * of a provider's due grants in one call per pass, from the admin side
 * only; the real login is then made for a credential the first time it
 * is checked (each credential version, recorded in the scratch table
 * "verify-login" once a login found it healthy), for a rotating sample
 * (a grant logs in on every TL_RX_VERIFY_LOGIN_EVERY-th (30th) check of
 * it, tallyd --verify-login-every N, at its own place in that cycle, so
 * every grant is logged into at least once per N intervals, 15 minutes
 * at the default 30 s, and 1/N of them each interval: at 30 the
 * sample's logins cost tallyd about 0.1 ms of CPU per grant checked,
 * bench/bench_verify.c), after
 * drift was found, and when the caller asks for logins (tally check,
 * tallyd --once: tl_rx_verify_opts.login_all).  What it
 * finds is recorded only when it changes: a healthy check writes a
 * counter and a time in the scratch table "checks", not an event, so
 * the log does not grow with time.
 *
 * Drift policies: a credential that no longer authenticates (the frozen
 * password) and changed privileges are repaired at once from the admin
 * side, both facts recorded; a missing database or role is NOT
 * recreated (that would hide data loss): the grant becomes missing
 * until `tally repair`.  An unreachable provider or a refused admin
 * credential is recorded on the provider, once per outage.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/kv.h"
#include "core/vec.h"
#include "drivers/util.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "credential.h"
#include "mesh_ca.h"
#include "pass.h"
#include "rx-internal.h"
#include "session.h"

/* With a bulk check: every grant logs in on every N-th check of it. */
#define TL_RX_VERIFY_LOGIN_EVERY	30
/*
 * A login check asks whether the consumer could connect without TLS
 * (tl_drv_grant.posture) at most this often (seconds) when nothing else
 * calls for it: the question costs PostgreSQL a connection of its own,
 * and what it answers (pg_hba, the listeners) changes by hand, rarely.
 */
#define TL_RX_POSTURE_S		3600

struct check {
	struct tl_grant	 g;
	char		 db[64], owner[64], login[64];
	char		 password[TL_PASSWORD_MAX + 1];
	/*
	 * The version's secret handle (driver.h handle_model), and the one
	 * a repair wrote (recorded first in the outcomes); NULL for other
	 * drivers.
	 */
	char		*handle;
	char		*handle_out;
	/*
	 * The requirement's params as declared now (tl_rx_grant_params),
	 * and unpacked for the driver; NULL: none.
	 */
	char		*params;
	const char	*psv[TL_RX_PARAMS_SV];
	const char	*cert_ca;	/* the pass's, for a cert login */
	enum tl_drv_drift drift;
	uint64_t	 count;		/* checks of it so far ("checks") */
	int		 by_login;	/* a real login this pass (check) */
	int		 posture;	/* a login asks tl_drv_grant.posture */
	uint64_t	 posture_at;	/* when it last did (s), 0: never */
	int		 rc;		/* of the check itself */
	/*
	 * Not made: its session gave way to provisioning (pass.h); it
	 * stays due, and nothing of it is recorded.
	 */
	int		 yielded;
	uint64_t	 due;		/* as gathered; fresh: computed */
	int		 fresh;		/* note_due's rec + 1, or 0 */
	int		 repair_rc;	/* of the repair, if one ran */
	char		 why[TL_WHY_MAX];
	char		 repair_why[TL_WHY_MAX];
};

struct vprov {
	struct tl_rx_prov pv;
	const struct tl_drv_ops *ops;
	struct check	**c;
	size_t		 nc, cap;
	int		 open_rc;
	char		 open_why[TL_WHY_MAX];
	char		 bulk_why[TL_WHY_MAX];	/* its bulk call's */
};

/* One call of run_checks: a check, or (c NULL) v's bulk check. */
struct vcall {
	struct check	*c;
	struct vprov	*v;
};

/* A grant's due time, for "verify-due" or its record in "checks". */
struct newdue {
	char		 id[TL_GRANT_ID_MAX + 1];
	uint64_t	 due;
	int		 rec;	/* it has a record in "checks" */
};

struct vpass {
	struct tl_rx			*rx;
	const struct tl_rx_verify_opts	*o;
	struct check			*c;
	size_t				 nc, cap;
	struct vprov			*vp;
	size_t				 nvp;
	uint64_t			 now;
	uint64_t			 next_ns;
	tl_kv				 checks;
	int				 have_checks;
	tl_kv				 vdue;
	int				 have_vdue;
	tl_kv				 vlogin;
	int				 have_vlogin;
	unsigned			 round_trips;	/* bulk calls + logins */
	unsigned			 nlogin;	/* checks that log in */
	unsigned			 deferred;	/* due, over the bounds */
	struct newdue			*nd;
	size_t				 nnd, capnd;
	unsigned			 unhealthy;	/* outcomes' count */
	/* The mesh CA's certificate, read at the first login by
	   certificate among the checks (tl_drv_grant.cert_ca). */
	char				*cert_ca;
	int				 cert_ca_read;
};

/* The scratch record of a grant: last check, count, next due (ns). */
struct sched {
	uint64_t	last_ns, count, next_ns;
};

static struct sched
sched_get(struct tl_txn *t, tl_kv kv, const char *grant)
{
	struct sched s = { 0, 0, 0 };
	const void *v;
	size_t n;

	if (tl_kv_get(t, kv, grant, strlen(grant), &v, &n) == 0 && n == 24) {
		s.last_ns = tl_get_be64(v);
		s.count = tl_get_be64((const uint8_t *)v + 8);
		s.next_ns = tl_get_be64((const uint8_t *)v + 16);
	}
	return s;
}

/*
 * When a grant is checked: at its place in the interval, a hash of its
 * id (FNV-1a), so that 10,000 grants do not hit a provider in the same
 * second.  The place is a function of the id and the interval only: it
 * survives a late pass, a stopped daemon and a forced check (tally
 * check), which all leave the next check in the grant's own slot.  The
 * first check is in the grant's first slot after a pass first saw it,
 * somewhere in the next interval; that time is kept in the scratch
 * table "verify-due" (it cannot be recomputed from a later clock: it
 * would always lie ahead) until the grant has been checked.
 */
static uint64_t
id_hash(const char *grant)
{
	uint64_t h = 1469598103934665603u;
	const char *s;

	for (s = grant; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211u;
	return h;
}

static uint64_t
slot_at(const char *grant, uint64_t t, uint64_t interval)
{
	uint64_t h = id_hash(grant), ph, r;

	if (interval == 0)
		return t;
	ph = h % interval;
	r = t % interval;
	return t + (ph >= r ? ph - r : interval - r + ph);
}

/* After a check at t: the grant's next slot, at least half an interval on. */
static uint64_t
slot_after(const char *grant, uint64_t t, uint64_t interval)
{
	return slot_at(grant, t + interval / 2, interval);
}

/*
 * Grants due within this much are checked together, a little early:
 * a pass every 1/30 of the interval at most (and at least every
 * second), not one per grant.
 */
static uint64_t
batch_window(uint64_t interval)
{
	return interval / 30 < 1000000000u ? interval / 30 : 1000000000u;
}

/* Remembers a grant's due time, to be written with the outcomes. */
static int
note_due(struct vpass *ps, const char *grant, uint64_t due, int rec)
{
	struct newdue *d;

	if (tl_vec_grow(&ps->nd, &ps->capnd, ps->nnd + 1,
	    sizeof(ps->nd[0])) != 0)
		return ENOMEM;
	d = &ps->nd[ps->nnd++];
	snprintf(d->id, sizeof(d->id), "%s", grant);
	d->due = due;
	d->rec = rec;
	return 0;
}

static int
wanted(const struct tl_rx_verify_opts *o, const struct tl_grant *g)
{
	/* The module's own instance: no provider of tally's to ask. */
	if (TL_GRANT_IS_EMBEDDED(g))
		return 0;
	if (o->grant != NULL)
		return strcmp(o->grant, g->id) == 0;
	if (o->provider != NULL)
		return strcmp(o->provider, g->provider) == 0;
	return 1;
}

struct gather {
	struct vpass		*vp;
	struct tl_txn		*t;
	const struct tl_proj	*p;
	/*
	 * A bounded pass goes round from where the last one stopped: the
	 * grants after rx->verify_resume (sweep 0), then from the first to
	 * it (sweep 1); unbounded, one sweep of all.
	 */
	int			 sweep;
	const char		*resume;
};

static int
gather_one(const struct tl_grant *g, void *arg)
{
	struct gather *ga = arg;
	struct vpass *ps = ga->vp;
	struct check *c;
	struct sched s;
	uint64_t iv = ps->o->interval_ns, due, posture_at = 0;
	const void *v;
	size_t n;
	int rc, fresh = 0, seen = 0, login;

	/*
	 * A login tally adopt took over has a password tally never knew:
	 * nothing to compare, and a repair would lock its holders out; the
	 * rotation under way replaces it.
	 */
	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0 || !wanted(ps->o, g) ||
	    tl_rx_grant_adopted_login(g))
		return 0;
	if (ga->resume != NULL &&
	    (strcmp(g->id, ga->resume) > 0) != (ga->sweep == 0))
		return 0;
	if (ps->have_checks)
		s = sched_get(ga->t, ps->checks, g->id);
	else
		memset(&s, 0, sizeof(s));
	/*
	 * A due time further out than this interval allows was set with a
	 * longer one (tally check's 30 s under tallyd --verify-interval 2,
	 * a daemon restarted with a shorter interval): the grant's next
	 * slot in this interval instead, written down so that the next
	 * pass finds it (recomputed from a later clock it would recede).
	 */
	if (s.next_ns != 0) {
		due = s.next_ns;
		if (due > ps->now + iv + iv / 2) {
			due = slot_at(g->id, ps->now, iv);
			fresh = s.last_ns != 0 ? 2 : 1;
		}
	} else if (ps->have_vdue && tl_kv_get(ga->t, ps->vdue, g->id,
	    strlen(g->id), &v, &n) == 0 && n == 8 &&
	    tl_get_be64(v) <= ps->now + iv)
		due = tl_get_be64(v);
	else {
		/* Never seen (or seen with a longer interval). */
		due = slot_at(g->id, ps->now, iv);
		fresh = 1;
	}
	if (!ps->o->force && due > ps->now + batch_window(iv)) {
		if (fresh && (rc = note_due(ps, g->id, due, fresh == 2)) != 0)
			return rc;
		if (ps->next_ns == 0 || due < ps->next_ns)
			ps->next_ns = due;
		return 0;
	}
	/*
	 * Whether a bulk check may stand for the login (the driver's
	 * capability is asked later): not for a credential never proven by
	 * a login, nor when the caller wants logins, nor the grant's turn in
	 * the sample.  "verify-login": the version a login last found sound,
	 * and when a login last asked the posture question (absent in the 8
	 * bytes of before: never).
	 */
	login = ps->o->login_all ||
	    (s.count + id_hash(g->id)) % (ps->o->login_every != 0 ?
	    ps->o->login_every : TL_RX_VERIFY_LOGIN_EVERY) == 0;
	if (ps->have_vlogin && tl_kv_get(ga->t, ps->vlogin, g->id,
	    strlen(g->id), &v, &n) == 0 && (n == 8 || n == 16)) {
		seen = tl_get_be64(v) == g->version;
		posture_at = n == 16 ? tl_get_be64((const uint8_t *)v + 8) : 0;
	}
	/* A login below ownership: the bulk row is an owner's; one by one. */
	if (!seen || g->access != 0)
		login = 1;
	/*
	 * Over the caller's bounds for one pass: left due, for the pass
	 * that follows at once (its due time written down if it was just
	 * computed, so that it does not recede).
	 */
	if ((ps->o->max_checks != 0 && ps->nc >= ps->o->max_checks) ||
	    (login && ps->o->max_logins != 0 &&
	    ps->nlogin >= ps->o->max_logins)) {
		if (fresh && (rc = note_due(ps, g->id, due, fresh == 2)) != 0)
			return rc;
		ps->next_ns = ps->now;	/* until(): at once */
		ps->deferred++;
		return 0;
	}
	if (tl_vec_grow_secret(&ps->c, &ps->cap, ps->nc + 1,
	    sizeof(ps->c[0])) != 0)
		return ENOMEM;
	if (g->cert_login != 0 && !ps->cert_ca_read) {
		if ((rc = tl_rx_mesh_ca_dup(ga->t, ga->p, &ps->cert_ca)) != 0)
			return rc;
		ps->cert_ca_read = 1;
	}
	c = &ps->c[ps->nc++];
	memset(c, 0, sizeof(*c));
	c->g = *g;
	c->cert_ca = g->cert_login != 0 ? ps->cert_ca : NULL;
	c->count = s.count;
	c->due = due;
	c->fresh = fresh;
	c->by_login = login;
	c->posture_at = posture_at;
	ps->nlogin += login;
	/*
	 * The posture question (decl.h): of every login the caller wants,
	 * of a credential's first, while its warning stands (only an answer
	 * clears it), and once TL_RX_POSTURE_S has passed since the last.
	 */
	c->posture = ps->o->login_all || !seen || g->warning[0] != '\0' ||
	    ps->now / 1000000000u >= c->posture_at + TL_RX_POSTURE_S ||
	    ps->now / 1000000000u < c->posture_at;	/* the clock went back */
	return 0;
}

/* Where the next bounded pass begins: after the last grant taken. */
static int
resume_at(struct vpass *ps)
{
	char *r = NULL;

	/* Taken in the order of the sweeps: the last is the last taken. */
	if (ps->deferred > 0 && ps->nc > 0 &&
	    (r = strdup(ps->c[ps->nc - 1].g.id)) == NULL)
		return ENOMEM;
	if (ps->o->max_checks == 0 && ps->o->max_logins == 0)
		return 0;
	free(ps->rx->verify_resume);
	ps->rx->verify_resume = r;
	return 0;
}

/* Phase 1 (pass.h): the grants due, in the pass's read transaction. */
static int
gather(void *arg, struct tl_txn *t, const struct tl_proj *pp,
    unsigned *phases)
{
	struct vpass *ps = arg;
	struct tl_proj p = *pp;
	struct gather ga = { ps, t, pp };
	size_t i, j;
	int rc;

	rc = tl_kv_open_scratch(t, "checks", &ps->checks);
	if (rc == 0)
		ps->have_checks = 1;
	else if (rc != TL_ENOTFOUND)	/* never written */
		goto out;
	rc = tl_kv_open_scratch(t, "verify-due", &ps->vdue);
	if (rc == 0)
		ps->have_vdue = 1;
	else if (rc != TL_ENOTFOUND)
		goto out;
	rc = tl_kv_open_scratch(t, "verify-login", &ps->vlogin);
	if (rc == 0)
		ps->have_vlogin = 1;
	else if (rc != TL_ENOTFOUND)
		goto out;
	if (ps->o->max_checks != 0 || ps->o->max_logins != 0)
		ga.resume = ps->rx->verify_resume;
	for (ga.sweep = 0; ga.sweep < (ga.resume != NULL ? 2 : 1); ga.sweep++)
		if ((rc = tl_grant_each(t, &p, gather_one, &ga)) != 0)
			goto out;
	if ((rc = resume_at(ps)) != 0)
		goto out;
	if (ps->nc > 0 && (ps->vp = tl_secret_calloc(ps->nc,
	    sizeof(*ps->vp))) == NULL) {
		rc = ENOMEM;
		goto out;
	}
	for (i = 0; i < ps->nc; i++) {
		struct check *c = &ps->c[i];
		struct vprov *v = NULL;

		tl_rx_grant_names(ps->rx, &c->g, c->g.version, c->db, c->owner,
		    c->login);
		if ((rc = tl_rx_intent_password(ps->rx, t, &c->g,
		    c->password)) != 0) {
			c->rc = rc;
			snprintf(c->why, sizeof(c->why), "cannot read the "
			    "recorded credential: %s", tl_strerror(rc));
			continue;
		}
		for (j = 0; j < ps->nvp; j++)
			if (strcmp(ps->vp[j].pv.id, c->g.provider) == 0)
				v = &ps->vp[j];
		if (v == NULL) {
			char driver[64] = "";
			int drop;

			v = &ps->vp[ps->nvp];
			if (tl_rx_load_provider(t, &p, ps->rx, c->g.provider,
			    c->g.type, &v->pv, driver, &drop) != 0 ||
			    (v->ops = tl_drv_find(driver)) == NULL) {
				tl_secret_wipe(v->pv.password,
				    sizeof(v->pv.password));
				memset(v, 0, sizeof(*v));
				c->rc = TL_EDRIVER;
				snprintf(c->why, sizeof(c->why), "provider %s "
				    "has no usable driver", c->g.provider);
				continue;
			}
			ps->nvp++;
		}
		if ((rc = tl_rx_grant_params(t, &p, &c->g, v->ops->decl->name,
		    &c->params)) != 0) {
			if (rc == ENOMEM)
				goto out;
			c->rc = rc;
			snprintf(c->why, sizeof(c->why), "cannot read the "
			    "requirement's params: %s", tl_strerror(rc));
			continue;
		}
		if (v->ops->decl->credential.handle_model) {
			if ((c->handle = tl_secret_alloc(TL_DRV_HANDLE_MAX)) ==
			    NULL || (c->handle_out = tl_secret_alloc(
			    TL_DRV_HANDLE_MAX)) == NULL) {
				rc = ENOMEM;
				goto out;
			}
			if ((rc = tl_rx_grant_handle(ps->rx, t, c->g.id,
			    c->g.version, c->handle)) != 0 &&
			    rc != TL_ENOTFOUND) {
				c->rc = rc;
				snprintf(c->why, sizeof(c->why), "cannot read "
				    "the credential's handle: %s",
				    tl_strerror(rc));
				continue;
			}
		}
		if (tl_vec_grow(&v->c, &v->cap, v->nc + 1,
		    sizeof(v->c[0])) != 0) {
			rc = ENOMEM;
			goto out;
		}
		v->c[v->nc++] = c;
	}
	if (ps->nc > 0 || ps->nnd > 0)
		*phases = TL_RX_CALLS | TL_RX_OUTCOMES;
	rc = 0;
out:
	return rc;
}

static const char *drift_kind(enum tl_drv_drift d);

/*
 * One check, and the repair its drift calls for, with a session of its
 * provider open, on a pool thread: touches only its check.
 */
/* The driver's view of c's grant (borrows c's strings). */
static void
drv_grant(struct check *c, struct tl_drv_grant *dg)
{
	memset(dg, 0, sizeof(*dg));	/* what is not set here is NULL */
	dg->resource = c->db;
	dg->owner = c->owner;
	dg->login = c->login;
	dg->cert_login = c->g.cert_login != 0;
	dg->cert_ca = c->cert_ca;
	dg->password = dg->cert_login ? "" : c->password;
	dg->grant = c->g.id;
	dg->adopt_unnamed = tl_rx_grant_naming(&c->g) == 1;
	dg->adopt_mesh = tl_rx_grant_adopt(&c->g);
	dg->adopted = c->g.adopt_version != 0;
	dg->access = (int)c->g.access;
	dg->handle = c->handle;
	dg->handle_out = NULL;	/* check issues nothing; repair sets it */
	dg->posture = c->posture;
	dg->params = c->params != NULL ? tl_drv_params_unpack(c->params,
	    c->psv, TL_RX_PARAMS_SV) : NULL;
}

/* The repair c's drift calls for, as today's one-by-one check makes it. */
static void
repair(const struct tl_drv_ops *ops, void *h, struct check *c)
{
	struct tl_drv_grant dg;

	drv_grant(c, &dg);
	dg.handle_out = c->handle_out;
	/* TL_DRIFT_PLAINTEXT is never repaired: nothing of the grant's. */
	if (c->drift == TL_DRIFT_CREDENTIAL)
		c->repair_rc = ops->set_password(h, &dg, c->repair_why);
	else if (c->drift == TL_DRIFT_PRIVILEGES)
		c->repair_rc = ops->fix_privileges(h, &dg, c->repair_why);
}

/* One check with its login, and its repair. */
static void
check_one(const struct tl_rx_prov *pv, void *h, struct check *c)
{
	const struct tl_drv_ops *ops = pv->ops;
	struct tl_drv_endpoint ep;
	struct tl_drv_grant dg;
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	char host[256];

	/*
	 * The consumer's view: the endpoint it was given, with the
	 * provider's settings its driver composes it from.  A provider
	 * exposed local is reached only from its own node, over loopback:
	 * not at the routable name, and not from here over loopback either
	 * (tallyd may run elsewhere), so the login goes where tallyd
	 * administers it (admin-host), as the migrator's does.
	 */
	tl_rx_consumer_endpoint(pv, &c->g, TL_RX_EP_CHECK, NULL, sv, host,
	    &ep);
	drv_grant(c, &dg);
	c->by_login = 1;
	c->rc = ops->check(h, &dg, &ep, &c->drift, c->why);
	if (c->rc == 0)
		repair(ops, h, c);
}

/*
 * v's bulk check: every grant of v that needs no login, in one call,
 * then the repairs; a driver that cannot do it with this admin
 * (TL_EDRIVER) has them checked one by one, with their logins.
 */
static void
bulk_one(struct vpass *ps, const struct tl_rx_prov *pv, void *h,
    struct vprov *v, struct tl_rx_call *cl)
{
	const struct tl_drv_ops *ops = pv->ops;
	struct tl_drv_grant *gs;
	enum tl_drv_drift *d;
	char (*why)[TL_WHY_MAX];
	struct check **cs;
	size_t i, n = 0;
	int rc;

	gs = calloc(v->nc + 1, sizeof(*gs));
	d = calloc(v->nc + 1, sizeof(*d));
	why = calloc(v->nc + 1, sizeof(*why));
	cs = calloc(v->nc + 1, sizeof(*cs));
	if (gs == NULL || d == NULL || why == NULL || cs == NULL) {
		rc = ENOMEM;
		snprintf(cl->why, TL_WHY_MAX, "%s", tl_strerror(rc));
		for (i = 0; i < v->nc; i++)
			if (v->c[i]->rc == 0 && !v->c[i]->by_login) {
				v->c[i]->rc = rc;
				snprintf(v->c[i]->why, sizeof(v->c[i]->why),
				    "%s", cl->why);
			}
		cl->rc = 0;	/* not the provider's fault */
		goto out;
	}
	for (i = 0; i < v->nc; i++)
		if (v->c[i]->rc == 0 && !v->c[i]->by_login) {
			cs[n] = v->c[i];
			drv_grant(cs[n], &gs[n]);
			n++;
		}
	__atomic_add_fetch(&ps->round_trips, 1, __ATOMIC_RELAXED);
	rc = ops->check_bulk(h, gs, n, d, why);
	if (rc == TL_EDRIVER) {
		/* Not in bulk with this admin: one by one, logging in. */
		for (i = 0; i < n; i++) {
			__atomic_add_fetch(&ps->round_trips, 1,
			    __ATOMIC_RELAXED);
			check_one(pv, h, cs[i]);
		}
		rc = 0;
	} else {
		for (i = 0; i < n; i++) {
			cs[i]->rc = rc;
			snprintf(cs[i]->why, sizeof(cs[i]->why), "%s",
			    rc == 0 ? why[i] : why[0]);
			cs[i]->drift = rc == 0 ? d[i] : TL_DRIFT_NONE;
			if (rc == 0)
				repair(ops, h, cs[i]);
		}
	}
	cl->rc = rc;
	if (rc != 0)
		snprintf(cl->why, TL_WHY_MAX, "%s", why[0]);
out:
	free(gs);
	free(d);
	free(why);
	free(cs);
}

/*
 * One call (a check, or a provider's bulk check), with a session of its
 * provider open, on a pool thread: touches only its checks.
 */
static void
check_call(void *arg, const struct tl_rx_prov *pv, void *h,
    struct tl_rx_call *cl)
{
	struct vpass *ps = arg;
	struct vcall *vc = cl->item;

	if (vc->c == NULL) {
		bulk_one(ps, pv, h, vc->v, cl);
		return;
	}
	__atomic_add_fetch(&ps->round_trips, 1, __ATOMIC_RELAXED);
	check_one(pv, h, vc->c);
	cl->rc = vc->c->rc;
}

/*
 * Phase 3: the checks, each provider's on its own sessions on the pool
 * (one session per 8 checks at least: opening one is a SCRAM login),
 * then what they found, logged.  A provider none of whose sessions
 * opened is down.
 */
static void
run_checks(void *arg, unsigned *phases)
{
	struct vpass *ps = arg;
	struct tl_rx_prov *pv;
	struct tl_rx_call *cl;
	struct vcall *vc;
	size_t i, k, n = 0;

	(void)phases;	/* outcomes always: the schedule moves */
	pv = tl_secret_calloc(ps->nvp + 1, sizeof(*pv));
	cl = calloc(ps->nc + ps->nvp + 1, sizeof(*cl));
	vc = calloc(ps->nc + ps->nvp + 1, sizeof(*vc));
	if (pv == NULL || cl == NULL || vc == NULL) {
		for (i = 0; i < ps->nc; i++)
			if (ps->c[i].rc == 0) {
				ps->c[i].rc = ENOMEM;
				snprintf(ps->c[i].why, sizeof(ps->c[i].why),
				    "%s", tl_strerror(ENOMEM));
			}
		goto log;
	}
	for (i = 0; i < ps->nvp; i++) {
		struct vprov *v = &ps->vp[i];
		int bulk = tl_drv_can(v->ops->decl, TL_DRV_CAP_CHECK_BULK, NULL),
		    any = 0;

		pv[i] = v->pv;
		pv[i].ops = v->ops;
		pv[i].ok = 0;
		for (k = 0; k < v->nc; k++) {
			struct check *c = v->c[k];

			if (c->rc != 0)
				continue;
			if (!bulk)
				c->by_login = 1;
			if (!c->by_login) {
				any = 1;
				continue;	/* in the bulk call */
			}
			vc[n].c = c;
			vc[n].v = v;
			cl[n].provider = v->pv.id;
			cl[n].item = &vc[n];
			cl[n].why = c->why;
			n++;
		}
		if (any) {
			/* One call for all the others: first, on its session. */
			memmove(&cl[1], &cl[0], n * sizeof(*cl));
			memmove(&vc[1], &vc[0], n * sizeof(*vc));
			for (k = 1; k <= n; k++)
				cl[k].item = &vc[k];
			vc[0].c = NULL;
			vc[0].v = v;
			cl[0].provider = v->pv.id;
			cl[0].item = &vc[0];
			cl[0].why = v->bulk_why;
			n++;
		}
	}
	tl_rx_pass_calls(ps->rx, pv, ps->nvp, cl, n, 8, TL_RX_LANE_VERIFY,
	    check_call, ps);
	for (i = 0; i < n; i++) {
		struct vcall *x = cl[i].item;
		struct vprov *v = x->v;

		if (cl[i].yielded) {
			/* The bulk call's checks, or the one check. */
			for (k = 0; x->c == NULL && k < v->nc; k++)
				if (!v->c[k]->by_login && v->c[k]->rc == 0)
					v->c[k]->yielded = 1;
			if (x->c != NULL)
				x->c->yielded = 1;
			continue;
		}
		if (x->c == NULL && cl[i].rc != 0)
			/* The bulk call's failure is each of its checks'. */
			for (k = 0; k < v->nc; k++)
				if (!v->c[k]->by_login && v->c[k]->rc == 0) {
					v->c[k]->rc = cl[i].rc;
					snprintf(v->c[k]->why,
					    sizeof(v->c[k]->why), "%s",
					    cl[i].why);
				}
		if (!cl[i].admin)
			continue;
		if (x->c != NULL)
			x->c->rc = cl[i].rc;
		if (!pv[v - ps->vp].ok) {
			v->open_rc = cl[i].rc;
			snprintf(v->open_why, sizeof(v->open_why), "%s",
			    cl[i].why);
		}
	}
log:
	for (i = 0; pv != NULL && i < ps->nvp; i++)
		tl_rx_prov_wipe(&pv[i]);
	tl_secret_free(pv);
	free(cl);
	free(vc);
	for (i = 0; i < ps->nc; i++) {
		struct check *ck = &ps->c[i];

		if (ck->rc == 0 && ck->drift != TL_DRIFT_NONE)
			tl_rx_log(ps->rx, TL_RX_WARN, "grant %s: %s: %s%s",
			    ck->g.id, drift_kind(ck->drift), ck->why,
			    ck->drift == TL_DRIFT_MISSING ||
			    ck->drift == TL_DRIFT_PLAINTEXT ? "" :
			    ck->repair_rc == 0 ? " (repaired)" :
			    " (repair failed)");
	}
	for (i = 0; i < ps->nvp; i++)
		if (ps->vp[i].open_rc != 0)
			tl_rx_log(ps->rx, TL_RX_WARN, "provider %s: %s",
			    ps->vp[i].pv.id, ps->vp[i].open_why);
}

static int
emit_kv(struct tl_ctx *c, const char *type, const char *stream,
    const char *grant, const char *k1, const char *v1, const char *k2,
    const char *v2, const char *k3, const char *v3)
{
	struct tl_body b;
	int rc;

	tl_body_init(&b);
	tl_body_str(&b, grant ? "grant" : "id", grant ? grant : stream +
	    sizeof("provider/") - 1);
	if (k1)
		tl_body_str(&b, k1, v1);
	if (k2)
		tl_body_str(&b, k2, v2);
	if (k3)
		tl_body_str(&b, k3, v3);
	rc = tl_emit(c, type, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

/*
 * Does the provider's routable name resolve here?  0 and the resolver's
 * words in why when it does not: the admin reached the server by its
 * admin host, so it is up, and only the name consumers are given fails
 * where tallyd checks as one (another machine's resolver may differ).
 */
static int
routable_resolves(const struct vprov *v, char *why, size_t cap)
{
	struct addrinfo hints, *res = NULL;
	int rc;

	if (v->pv.routable[0] == '\0')
		return 1;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(v->pv.routable, NULL, &hints, &res);
	if (res != NULL)
		freeaddrinfo(res);
	if (rc != EAI_NONAME && rc != EAI_FAIL && rc != EAI_AGAIN
#ifdef EAI_NODATA
	    && rc != EAI_NODATA
#endif
	    )
		return 1;
	snprintf(why, cap, "%s", gai_strerror(rc));
	return 0;
}

static int
provider_outcome(struct tl_ctx *c, struct vprov *v)
{
	char reason[TL_WHY_MAX + 2048], gai[128], host[128] = "";
	size_t i;

	/*
	 * The admin got in (superusers have reserved slots) but a
	 * consumer's login found no room: the provider is unavailable to
	 * its consumers, which is an outage, not drift.  Unless the name
	 * consumers are given does not resolve here: then it is that.
	 */
	for (i = 0; v->open_rc == 0 && i < v->nc; i++)
		if (v->c[i]->rc == TL_EUNREACH) {
			if (routable_resolves(v, gai, sizeof(gai)))
				return tl_rx_provider_down(c, v->pv.id,
				    TL_RX_DOWN_UNREACH, v->c[i]->why);
			if (gethostname(host, sizeof(host)) != 0)
				host[0] = '\0';
			host[sizeof(host) - 1] = '\0';
			snprintf(reason, sizeof(reason), "the routable name "
			    "%s of %s does not resolve from the control plane "
			    "(%s%s%s, where tallyd checks as a consumer): %s; "
			    "the provider is up (tallyd's admin reached it at "
			    "%s).  Consumers on other machines may resolve it; "
			    "make it resolve here too (DNS, /etc/hosts), or "
			    "give %s a routable name that does", v->pv.routable,
			    v->pv.node, host[0] ? "host " : "", host,
			    host[0] ? "" : "this host", gai, v->pv.host,
			    v->pv.node);
			return tl_rx_provider_down(c, v->pv.id,
			    TL_RX_DOWN_UNRESOLVED, reason);
		}
	if (v->open_rc == 0)
		return tl_rx_provider_up(c, v->pv.id);
	if (v->open_rc == TL_EAUTH)
		tl_rx_auth_reason(&v->pv, v->open_why, reason, sizeof(reason));
	else
		snprintf(reason, sizeof(reason), "%s", v->open_why);
	return tl_rx_provider_down(c, v->pv.id, v->open_rc == TL_EAUTH ?
	    TL_RX_DOWN_AUTH : v->open_rc == TL_EUNTRUSTED ?
	    TL_RX_DOWN_UNTRUSTED : TL_RX_DOWN_UNREACH, reason);
}

static const char *
drift_kind(enum tl_drv_drift d)
{
	switch (d) {
	case TL_DRIFT_CREDENTIAL:
		return TL_DRIFTK_CREDENTIAL;
	case TL_DRIFT_PRIVILEGES:
		return TL_DRIFTK_PRIVILEGES;
	case TL_DRIFT_MISSING:
		return TL_DRIFTK_MISSING;
	case TL_DRIFT_PLAINTEXT:
		return TL_DRIFTK_PLAINTEXT;
	default:
		return "";
	}
}

static int
grant_outcome(struct tl_ctx *c, struct check *ck, unsigned *unhealthy)
{
	struct tl_grant cur;
	char msg[TL_WHY_MAX * 2 + 600];
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_grant_get(c->t, &c->p, ck->g.id, &cur, NULL)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	/* Moved on while we looked (a rotation's new version, say). */
	if (strcmp(cur.state, TL_GRANT_PROVISIONED) != 0 ||
	    cur.version != ck->g.version)
		return 0;
	if ((rc = tl_key(stream, "grant/%s", ck->g.id)) != 0)
		return rc;
	c->cause = cur.state_seq;
	c->have_corr = 0;
	if (ck->rc != 0) {
		(*unhealthy)++;
		return 0;	/* recorded on the provider */
	}
	/*
	 * A consumer not held to TLS is the grant's warning, not its drift
	 * (events.h: TL_DRIFTK_PLAINTEXT): recorded when it is news, never
	 * repaired, the grant healthy.  Only a check that logged in asks
	 * (a bulk check does not), so only such a check clears it.
	 */
	if (ck->drift == TL_DRIFT_NONE && cur.warning[0] != '\0' &&
	    ck->by_login && (rc = emit_kv(c, TL_EV_GRANT_REPAIRED, stream,
	    ck->g.id, "kind", TL_DRIFTK_PLAINTEXT, "how", "its consumer is "
	    "held to TLS now", NULL, NULL)) != 0)
		return rc;
	switch (ck->drift) {
	case TL_DRIFT_NONE:
		if (cur.drift[0] != '\0')
			return emit_kv(c, TL_EV_GRANT_REPAIRED, stream, ck->g.id,
			    "kind", cur.drift, "how", "healthy again", NULL,
			    NULL);
		return 0;
	case TL_DRIFT_PLAINTEXT:
		/* Nothing worse was found: a drift recorded before is gone. */
		if (cur.drift[0] != '\0' && (rc = emit_kv(c,
		    TL_EV_GRANT_REPAIRED, stream, ck->g.id, "kind", cur.drift,
		    "how", "healthy again", NULL, NULL)) != 0)
			return rc;
		if (strcmp(cur.warning, ck->why) == 0)
			return 0;
		snprintf(msg, sizeof(msg), "the consumer of %s can still log "
		    "in without TLS; tally does not change the provider's own "
		    "configuration: %s", ck->g.id, ck->why);
		return emit_kv(c, TL_EV_GRANT_DRIFTED, stream, ck->g.id, "kind",
		    TL_DRIFTK_PLAINTEXT, "reason", ck->why, "message", msg);
	case TL_DRIFT_MISSING:
		(*unhealthy)++;
		snprintf(msg, sizeof(msg), "%s no longer exists on %s (%s); "
		    "tally will not recreate it empty, which would hide the "
		    "data loss: restore it, or run tally repair %s to "
		    "recreate it", ck->g.id, ck->g.provider, ck->why,
		    ck->g.id);
		return emit_kv(c, TL_EV_GRANT_MISSING, stream, ck->g.id,
		    "reason", ck->why, "message", msg, NULL, NULL);
	case TL_DRIFT_CREDENTIAL:
		snprintf(msg, sizeof(msg), "the credential recorded for %s no "
		    "longer logs in (changed out of band, or a data directory "
		    "older than the credential): %s", ck->g.id, ck->why);
		break;
	case TL_DRIFT_PRIVILEGES:
		snprintf(msg, sizeof(msg), "the access rules (attributes, "
		    "privileges) of %s are not what tally set: %s", ck->g.id, ck->why);
		break;
	}
	if (strcmp(cur.drift, drift_kind(ck->drift)) != 0 ||
	    ck->repair_rc == 0) {
		if ((rc = emit_kv(c, TL_EV_GRANT_DRIFTED, stream, ck->g.id, "kind",
		    drift_kind(ck->drift), "reason", ck->why, "message",
		    msg)) != 0)
			return rc;
	}
	if (ck->repair_rc != 0) {
		(*unhealthy)++;
		return 0;
	}
	return emit_kv(c, TL_EV_GRANT_REPAIRED, stream, ck->g.id, "kind",
	    drift_kind(ck->drift), "how", ck->drift == TL_DRIFT_CREDENTIAL ?
	    "the recorded credential was set again from the admin side" :
	    "attributes, ownership and privileges were reset", NULL, NULL);
}

struct outcome_arg {
	struct vpass	*ps;
	unsigned	 unhealthy;
};

/* Writes down a due time gather computed (note_due's). */
static int
put_due(struct tl_txn *t, tl_kv checks, tl_kv vdue, const char *id,
    uint64_t due, int rec)
{
	struct sched s = sched_get(t, checks, id);
	uint8_t v[24];

	if (rec && s.last_ns != 0) {
		tl_put_be64(v, s.last_ns);
		tl_put_be64(v + 8, s.count);
		tl_put_be64(v + 16, due);
		return tl_kv_put(t, checks, id, strlen(id), v, 24);
	}
	tl_put_be64(v, due);
	return tl_kv_put(t, vdue, id, strlen(id), v, 8);
}

/* Phase 4: what changed, and every grant's next slot. */
static int
outcomes(void *arg, struct tl_ctx *cp)
{
	struct vpass *ps = arg;
	struct outcome_arg oa_, *oa = &oa_;
	struct tl_ctx c = *cp;
	struct tl_txn *t = c.t;
	tl_kv checks, vdue, vlogin;
	size_t i;
	int rc;

	oa->ps = ps;
	oa->unhealthy = 0;
	ps->unhealthy = 0;
	if ((rc = tl_kv_open_scratch(t, "checks", &checks)) != 0 ||
	    (rc = tl_kv_open_scratch(t, "verify-due", &vdue)) != 0 ||
	    (rc = tl_kv_open_scratch(t, "verify-login", &vlogin)) != 0)
		return rc;
	for (i = 0; i < ps->nnd; i++)
		if ((rc = put_due(t, checks, vdue, ps->nd[i].id,
		    ps->nd[i].due, ps->nd[i].rec)) != 0)
			return rc;
	for (i = 0; i < ps->nvp; i++)
		if ((rc = provider_outcome(&c, &ps->vp[i])) != 0)
			return rc;
	for (i = 0; i < ps->nc; i++) {
		struct check *ck = &ps->c[i];
		struct sched s;
		uint64_t next;
		uint8_t v[24];

		/*
		 * Not made (its session gave way to provisioning): still
		 * due, for the pass that follows at once; a due time just
		 * computed is written down, as for one over the bounds.
		 */
		if (ck->yielded) {
			ps->next_ns = ps->now;
			if (ck->fresh && (rc = put_due(t, checks, vdue,
			    ck->g.id, ck->due, ck->fresh == 2)) != 0)
				return rc;
			continue;
		}
		/* A secret a repair made the provider issue, before all else. */
		if (ck->handle_out != NULL && ck->handle_out[0] != '\0' &&
		    (rc = tl_rx_record_handle(ps->rx, &c, ck->g.id,
		    ck->g.version, ck->handle_out)) != 0)
			return rc;
		if ((rc = grant_outcome(&c, ck, &oa->unhealthy)) != 0)
			return rc;
		next = slot_after(ck->g.id, ps->now, ps->o->interval_ns);
		if (ps->next_ns == 0 || next < ps->next_ns)
			ps->next_ns = next;
		s = sched_get(t, checks, ck->g.id);
		if (ck->rc != 0) {
			/*
			 * Not checked (the provider is down, say): tried again
			 * in its next slot, not in every pass; the record of
			 * healthy checks is left as it is.
			 */
			if (s.last_ns == 0) {
				tl_put_be64(v, next);
				rc = tl_kv_put(t, vdue, ck->g.id,
				    strlen(ck->g.id), v, 8);
			} else {
				tl_put_be64(v, s.last_ns);
				tl_put_be64(v + 8, s.count);
				tl_put_be64(v + 16, next);
				rc = tl_kv_put(t, checks, ck->g.id,
				    strlen(ck->g.id), v, sizeof(v));
			}
			if (rc != 0)
				return rc;
			continue;
		}
		/*
		 * The credential version a login found healthy; any drift
		 * has the next check log in again (repaired or not).
		 */
		if (ck->by_login && (ck->drift == TL_DRIFT_NONE ||
		    ck->drift == TL_DRIFT_PLAINTEXT)) {
			/* Not held to TLS repairs nothing: the bulk goes on. */
			tl_put_be64(v, ck->g.version);
			tl_put_be64(v + 8, ck->posture ? ps->now / 1000000000u :
			    ck->posture_at);
			rc = tl_kv_put(t, vlogin, ck->g.id, strlen(ck->g.id),
			    v, 16);
		} else if (ck->drift != TL_DRIFT_NONE) {
			rc = tl_kv_del(t, vlogin, ck->g.id, strlen(ck->g.id));
			if (rc == TL_ENOTFOUND)
				rc = 0;
		}
		if (rc != 0)
			return rc;
		tl_put_be64(v, ps->now);
		tl_put_be64(v + 8, s.count + 1);
		tl_put_be64(v + 16, next);
		if ((rc = tl_kv_put(t, checks, ck->g.id, strlen(ck->g.id), v,
		    sizeof(v))) != 0 ||
		    (rc = tl_kv_del(t, vdue, ck->g.id, strlen(ck->g.id))) != 0)
			return rc;
	}
	ps->unhealthy = oa->unhealthy;
	*cp = c;
	return 0;
}

/* Tells o->report what ck found and what was done (recorded by now). */
static void
report(const struct tl_rx_verify_opts *o, const struct check *ck)
{
	struct tl_rx_finding f;
	char action[TL_WHY_MAX + 64];

	memset(&f, 0, sizeof(f));
	f.grant = ck->g.id;
	f.provider = ck->g.provider;
	f.reason = ck->why;
	f.action = action;
	action[0] = '\0';
	if (ck->yielded) {
		f.drift = "unchecked";
		f.reason = "provisioning on its provider went first";
		snprintf(action, sizeof(action), "none: still due");
	} else if (ck->rc != 0) {
		f.drift = "unchecked";
		snprintf(action, sizeof(action), "none: the provider could "
		    "not be asked");
	} else if (ck->drift == TL_DRIFT_NONE) {
		f.drift = "";
		f.reason = "";
	} else if (ck->drift == TL_DRIFT_MISSING) {
		f.drift = drift_kind(ck->drift);
		snprintf(action, sizeof(action), "not recreated (that would "
		    "hide the data loss): tally repair %s recreates it",
		    ck->g.id);
	} else if (ck->drift == TL_DRIFT_PLAINTEXT) {
		f.drift = drift_kind(ck->drift);
		snprintf(action, sizeof(action), "a warning, not repaired: "
		    "the provider's own configuration is its operator's (the "
		    "reason says what to change)");
	} else {
		f.drift = drift_kind(ck->drift);
		f.repaired = ck->repair_rc == 0;
		if (f.repaired)
			snprintf(action, sizeof(action), "repaired: %s",
			    ck->drift == TL_DRIFT_CREDENTIAL ? "the recorded "
			    "credential was set again from the admin side" :
			    "attributes, ownership and privileges were reset");
		else
			snprintf(action, sizeof(action), "repair failed: %s",
			    ck->repair_why);
	}
	o->report(o->report_arg, &f);
}

static const struct tl_rx_pass_def verify_pass = {
	gather, NULL, run_checks, outcomes
};

static void
vpass_init(struct vpass *ps, struct tl_rx *rx,
    const struct tl_rx_verify_opts *o)
{
	memset(ps, 0, sizeof(*ps));
	ps->rx = rx;
	ps->o = o;
	ps->now = tl_rx_now();
}

/* What a pass that recorded its outcomes found, and its reports. */
static void
vpass_result(struct vpass *ps, unsigned *checked, unsigned *unhealthy)
{
	size_t i;

	*checked = 0;
	for (i = 0; i < ps->nc; i++)
		*checked += !ps->c[i].yielded;
	*unhealthy = ps->unhealthy;
	if (ps->o->calls != NULL)
		*ps->o->calls += ps->round_trips;
	if (ps->o->report != NULL)
		for (i = 0; i < ps->nc; i++)
			report(ps->o, &ps->c[i]);
}

static void
vpass_free(struct vpass *ps)
{
	size_t i;

	for (i = 0; i < ps->nc; i++) {
		tl_secret_wipe(ps->c[i].password, sizeof(ps->c[i].password));
		tl_secret_free(ps->c[i].handle);
		tl_secret_free(ps->c[i].handle_out);
		free(ps->c[i].params);
	}
	for (i = 0; i < ps->nvp; i++) {
		tl_secret_wipe(ps->vp[i].pv.password,
		    sizeof(ps->vp[i].pv.password));
		free(ps->vp[i].c);
	}
	tl_secret_free(ps->vp);
	tl_secret_free(ps->c);
	free(ps->nd);
	free(ps->cert_ca);
	memset(ps, 0, sizeof(*ps));
}

int
tl_rx_verify(struct tl_rx *rx, const struct tl_rx_verify_opts *o,
    unsigned *checked, unsigned *unhealthy, uint64_t *next_ns)
{
	struct vpass ps;
	int rc;

	vpass_init(&ps, rx, o);
	*checked = *unhealthy = 0;
	if ((rc = tl_rx_pass_run(rx, &verify_pass, &ps)) == 0)
		vpass_result(&ps, checked, unhealthy);
	*next_ns = ps.next_ns;
	vpass_free(&ps);
	return rc;
}

/*
 * A pass whose checks run beside tallyd's loop (tl_rx_verify_aside):
 * the thread touches only ps (and, through the pool, the sessions it
 * opens), the loop nothing of it until done says the calls are over.
 * Of rx the thread reads what does not change while it runs: the pool
 * (made before it starts), --workers, and the epoch, leader and mesh,
 * which the loop's fence check rewrites only when no pass is in flight
 * (tl_rx_verify_running); the deposed flag is atomic.  A provider
 * fenced by an epoch check keeps its pass on the loop (aside_ok).
 */
struct tl_rx_vrun {
	struct tl_rx_verify_opts o;	/* ps.o points here */
	struct vpass		 ps;
	unsigned		 phases;
	pthread_t		 th;
	atomic_int		 done;
};

/*
 * Whether the pass's calls may run beside the loop: not for a provider
 * fenced by an epoch check (decl.h: TL_DRV_FENCE_EPOCH_CHECK), whose
 * check reads the replication stream through the publisher's state,
 * which is the loop's.
 */
static int
aside_ok(const struct vpass *ps)
{
	const struct tl_drv_fence_decl *f;
	size_t i;

	for (i = 0; i < ps->nvp; i++)
		if (ps->vp[i].ops != NULL &&
		    (f = ps->vp[i].ops->decl->fencing) != NULL &&
		    f->kind == TL_DRV_FENCE_EPOCH_CHECK)
			return 0;
	return 1;
}

static void *
vrun_main(void *arg)
{
	struct tl_rx_vrun *vr = arg;

	run_checks(&vr->ps, &vr->phases);
	atomic_store(&vr->done, 1);
	return NULL;
}

/* The pass's end on the loop's thread: its outcomes, then freed. */
static int
vrun_end(struct tl_rx *rx, struct tl_rx_vrun *vr, unsigned *checked,
    unsigned *unhealthy, uint64_t *next_ns)
{
	int rc = tl_rx_pass_end(rx, &verify_pass, &vr->ps, vr->phases);

	if (rc == 0)
		vpass_result(&vr->ps, checked, unhealthy);
	*next_ns = vr->ps.next_ns;
	vpass_free(&vr->ps);
	free(vr);
	return rc;
}

int
tl_rx_verify_aside(struct tl_rx *rx, const struct tl_rx_verify_opts *o,
    unsigned *checked, unsigned *unhealthy, uint64_t *next_ns,
    unsigned *running)
{
	struct tl_rx_vrun *vr = rx->vrun;
	int rc;

	*checked = *unhealthy = *running = 0;
	*next_ns = 0;
	if (vr != NULL) {
		if (!atomic_load(&vr->done)) {
			*running = 1;
			*next_ns = tl_rx_now() + TL_RX_VERIFY_POLL_NS;
			return 0;
		}
		pthread_join(vr->th, NULL);
		rx->vrun = NULL;
		return vrun_end(rx, vr, checked, unhealthy, next_ns);
	}
	if ((vr = calloc(1, sizeof(*vr))) == NULL)
		return ENOMEM;
	vr->o = *o;
	vpass_init(&vr->ps, rx, &vr->o);
	atomic_init(&vr->done, 0);
	if ((rc = tl_rx_pass_begin(rx, &verify_pass, &vr->ps,
	    &vr->phases)) != 0) {
		*next_ns = vr->ps.next_ns;
		vpass_free(&vr->ps);
		free(vr);
		return rc;
	}
	if (!(vr->phases & TL_RX_CALLS))
		return vrun_end(rx, vr, checked, unhealthy, next_ns);
	/*
	 * The pool exists before the thread submits to it (made here, on
	 * the loop's thread); no thread, or a provider the thread may not
	 * call (aside_ok): the calls are made here.
	 */
	if (!aside_ok(&vr->ps) || tl_rx_pool_ready(rx) != 0 ||
	    pthread_create(&vr->th, NULL, vrun_main, vr) != 0) {
		run_checks(&vr->ps, &vr->phases);
		return vrun_end(rx, vr, checked, unhealthy, next_ns);
	}
	rx->vrun = vr;
	*running = 1;
	*next_ns = tl_rx_now() + TL_RX_VERIFY_POLL_NS;
	return 0;
}

int
tl_rx_verify_running(const struct tl_rx *rx)
{
	return rx->vrun != NULL;
}

void
tl_rx_verify_free(struct tl_rx *rx)
{
	struct tl_rx_vrun *vr = rx->vrun;

	if (vr == NULL)
		return;
	/*
	 * Checks in flight end by their drivers' own timeouts; what they
	 * found is not recorded (the next pass checks again).
	 */
	pthread_join(vr->th, NULL);
	rx->vrun = NULL;
	vpass_free(&vr->ps);
	free(vr);
}
