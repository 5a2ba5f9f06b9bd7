/*
 * provision.c - the provisioner: requested grants become real resources,
 * their credentials reach every holder, revoked grants are revoked.
 *
 * A pass is the one of reactors/pass.h (its crash rule is there).
 * Gather: every grant that needs its provider or a delivery, at most
 * 32 calls per session per provider, oldest first (cap_pass), read
 * from the grants fold's work index; every grant only in a process's
 * first pass (gather says why).  Intents, in one write
 * transaction: grant.provisioning with a fresh password encrypted under
 * the master key (a grant that already has one, from a pass that
 * crashed or failed, keeps it).  Calls, with no transaction open, on
 * the shared pool: each provider's on up to --workers sessions of its
 * own.  Outcomes, in one write transaction: grant.provisioned and a
 * sealed credential.delivered per holder, or grant.failed; the
 * checkpoint moves with them.  No file is written: the sealed
 * deliveries in the log are what the nodes' agents read (deliver.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fields.h"
#include "core/vec.h"
#include "drivers/driver.h"
#include "drivers/util.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "projections/graph.h"
#include "projections/status.h"
#include "ack.h"
#include "backoff.h"
#include "credential.h"
#include "deliver.h"
#include "mesh_ca.h"
#include "pass.h"
#include "rx-internal.h"
#include "session.h"

#define CKPT	"provisioner"


enum { W_CREATE = 1, W_REVOKE, W_DELIVER };

/* One grant's work, with everything the driver call needs copied in. */
struct work {
	struct tl_grant	 g;
	int		 kind;
	int		 resumed;	/* its intent predates this pass */
	int		 noop;		/* nothing exists on the provider */
	char		 driver[64];
	int		 drop;
	char		 owner[64];
	char		 login[64];
	char		 dbname[64];
	char		 password[TL_PASSWORD_MAX + 1];
	/*
	 * A driver whose provider chooses the credential (driver.h,
	 * handle_model): the version's recorded handle, and the one the
	 * call wrote, recorded in the outcomes before anything else.
	 */
	char		 handle[TL_DRV_HANDLE_MAX];
	char		 handle_out[TL_DRV_HANDLE_MAX];
	/*
	 * tally adopt --secret-stdin: what the driver takes the object over
	 * with (g->password in the adopting create); "": none.
	 */
	char		 adopt_secret[TL_DRV_HANDLE_MAX];
	/*
	 * tally adopt --password-stdin: the password the holders use, tried
	 * once after the takeover (holders: TL_GRANT_HOLDERS_*, 0 when not
	 * tried; holders_why what the check said); "": none given.
	 */
	char		 adopt_password[TL_PASSWORD_MAX + 1];
	int		 holders;
	char		 holders_why[TL_WHY_MAX];
	/* A create's requirement params (tl_rx_grant_params); NULL: none. */
	char		*params;
	int		 rc;
	int		 admin;		/* rc is the admin session's */
	char		 why[TL_WHY_MAX];
	uint64_t	 ms;
	uint64_t	 size;		/* retained bytes, after a revoke */
	int		 have_size;
};


struct pass {
	struct tl_rx	*rx;
	struct tl_rx_prov	*pv;
	size_t		 npv, cappv;
	struct work	*w;
	size_t		 nw, capw;
	uint64_t	 now;
	unsigned	 pending;
	uint64_t	 next_ns;
	int		 rc;
	/* The mesh CA's certificate, read once a login by certificate is
	   among the work (tl_drv_grant.cert_ca); NULL: none. */
	char		*cert_ca;
	int		 cert_ca_read;
};

static struct tl_rx_prov *
pass_provider(struct pass *ps, struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, char *driver, int *drop)
{
	struct tl_rx_prov pv;
	size_t i;

	for (i = 0; i < ps->npv; i++)
		if (strcmp(ps->pv[i].id, g->provider) == 0) {
			/* Same provider: driver and policy by type. */
			struct tl_rx_prov tmp;

			if (tl_rx_load_provider(t, p, ps->rx, g->provider, g->type,
			    &tmp, driver, drop) != 0)
				return NULL;
			tl_rx_prov_wipe(&tmp);
			return &ps->pv[i];
		}
	if (tl_rx_load_provider(t, p, ps->rx, g->provider, g->type, &pv, driver,
	    drop) != 0) {
		tl_rx_prov_wipe(&pv);
		return NULL;
	}
	if (tl_vec_grow_secret(&ps->pv, &ps->cappv, ps->npv + 1,
	    sizeof(ps->pv[0])) != 0) {
		tl_rx_prov_wipe(&pv);
		return NULL;
	}
	ps->pv[ps->npv] = pv;
	tl_rx_prov_wipe(&pv);
	return &ps->pv[ps->npv++];
}

static int
intent_password(struct tl_rx *rx, struct tl_txn *t, struct work *w)
{
	return tl_rx_intent_password(rx, t, &w->g, w->password);
}

static struct work *
add_work(struct pass *ps)
{
	struct work *nw;

	if (tl_vec_grow_secret(&ps->w, &ps->capw, ps->nw + 1,
	    sizeof(ps->w[0])) != 0)
		return NULL;
	nw = &ps->w[ps->nw++];
	memset(nw, 0, sizeof(*nw));
	return nw;
}

struct gather_arg {
	struct pass		*ps;
	struct tl_txn		*t;
	const struct tl_proj	*p;
};

/*
 * A login below ownership (g->access) is made once the grant that owns
 * the resource is provisioned, on that grant's provider: 1 when g may
 * go on, with the owner's names in out (what its intent records for
 * good); 0 when it waits (*why "": *coming when the owner is on its
 * way) or cannot (*why).
 */
static int
owner_ready(struct gather_arg *ga, const struct tl_grant *g,
    struct tl_grant *out, int *coming, char *why, size_t cap)
{
	struct tl_grant o;
	char db[64], own[64], login[64];

	why[0] = '\0';
	*coming = 0;
	if (tl_grant_get(ga->t, ga->p, g->of, &o, NULL) != 0)
		return 0;
	if (strcmp(o.state, TL_GRANT_PROVISIONED) != 0) {
		*coming = strcmp(o.state, TL_GRANT_REQUESTED) == 0 ||
		    strcmp(o.state, TL_GRANT_PROVISIONING) == 0 ||
		    strcmp(o.state, TL_GRANT_FAILED) == 0 ||
		    strcmp(o.state, TL_GRANT_REPAIRING) == 0 ||
		    strcmp(o.state, TL_GRANT_RESTORING) == 0;
		return 0;
	}
	if (strcmp(o.provider, g->provider) != 0) {
		if (snprintf(why, cap, "%.200s is on provider %.129s, this "
		    "grant on %.129s: a login with access to its resource is "
		    "made where it is", g->of, o.provider, g->provider) < 0)
			why[0] = '?';
		return 0;
	}
	if (g->of_resource[0] == '\0') {
		tl_rx_grant_names(ga->ps->rx, &o, o.version, db, own, login);
		snprintf(out->of_resource, sizeof(out->of_resource), "%s", db);
		snprintf(out->of_owner, sizeof(out->of_owner), "%s", own);
	}
	return 1;
}

/* Decides what each grant needs; runs in a read transaction. */
static int
gather_one(const struct tl_grant *g, void *arg)
{
	struct gather_arg *ga = arg;
	struct pass *ps = ga->ps;
	struct tl_rx_backoff *bo;
	struct work *w;
	int kind = 0;

	ps->rx->gathered++;
	if (strcmp(g->state, TL_GRANT_REQUESTED) == 0 ||
	    strcmp(g->state, TL_GRANT_PROVISIONING) == 0)
		kind = W_CREATE;
	else if (strcmp(g->state, TL_GRANT_FAILED) == 0 ||
	    strcmp(g->state, TL_GRANT_REPAIRING) == 0)
		kind = W_CREATE;
	else if (strcmp(g->state, TL_GRANT_REVOKING) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGING) == 0)
		kind = W_REVOKE;
	else if (strcmp(g->state, TL_GRANT_RESTORING) == 0)
		kind = W_CREATE;	/* a new credential, not the old intent */
	else if (strcmp(g->state, TL_GRANT_PROVISIONED) == 0) {
		struct tl_nodelist nl;
		size_t i;
		char holder[140];

		if (tl_rx_grant_holders(ga->t, ga->p, g, &nl) != 0)
			return 0;
		for (i = 0; i < nl.n && kind == 0; i++) {
			snprintf(holder, sizeof(holder), "%s@%s", g->module,
			    nl.v[i]);
			if (tl_grant_delivered(ga->t, ga->p, g->id, holder) !=
			    g->version && !tl_rx_grant_adopted_login(g))
				kind = W_DELIVER;
		}
		tl_nodelist_free(&nl);
	}
	if (kind == 0)
		return 0;
	/* A provider in backoff waits (a delivery calls no provider). */
	if (kind != W_DELIVER && (bo = tl_rx_backoff_find(ps->rx, g->provider,
	    0)) != NULL && bo->next_ns > ps->now) {
		/* A refused admin login waits on a person (backoff.h). */
		if (!bo->auth)
			ps->pending++;
		if (ps->next_ns == 0 || bo->next_ns < ps->next_ns)
			ps->next_ns = bo->next_ns;
		return 0;
	}
	if (kind == W_CREATE && g->access != 0) {
		struct tl_grant tmp = *g;
		char why[TL_WHY_MAX];
		int coming;

		if (!owner_ready(ga, g, &tmp, &coming, why, sizeof(why))) {
			if (why[0] == '\0') {
				/* Waiting on nothing under way is no work. */
				if (coming)
					ps->pending++;
				return 0;
			}
			if ((w = add_work(ps)) == NULL)
				return ENOMEM;
			w->g = *g;
			w->kind = kind;
			w->rc = TL_EDRIVER;
			snprintf(w->why, sizeof(w->why), "%s", why);
			return 0;
		}
		if ((w = add_work(ps)) == NULL)
			return ENOMEM;
		w->g = tmp;
		w->kind = kind;
		w->resumed = strcmp(g->state, TL_GRANT_REQUESTED) != 0 &&
		    strcmp(g->state, TL_GRANT_RESTORING) != 0;
		return 0;
	}
	if ((w = add_work(ps)) == NULL)
		return ENOMEM;
	w->g = *g;
	w->kind = kind;
	w->resumed = strcmp(g->state, TL_GRANT_REQUESTED) != 0 &&
	    strcmp(g->state, TL_GRANT_RESTORING) != 0;
	return 0;
}

/* Oldest first: work deferred to a later pass is the newest. */
static int
by_age(const void *a, const void *b)
{
	const struct work *x = a, *y = b;

	return x->g.state_seq < y->g.state_seq ? -1 :
	    x->g.state_seq > y->g.state_seq;
}

/*
 * At most cap driver calls per provider in a pass, the oldest: a pass
 * commits its outcomes at its end, so a backlog of hundreds is worked
 * off in passes a few seconds long, each recorded as it ends, with the
 * other reactors (migrations, rotations, moves) running in between.
 * What waits is counted pending, and the next pass starts at once.
 */
static void
cap_pass(struct pass *ps, size_t cap)
{
	/* Copies: the works move below as the kept ones close up. */
	struct { char id[sizeof(ps->w[0].g.provider)]; size_t n; } *per;
	size_t i, j, k = 0, nper = 0;

	/* An idle pass has no array at all: qsort may not be given NULL. */
	if (ps->nw == 0)
		return;
	qsort(ps->w, ps->nw, sizeof(*ps->w), by_age);
	if ((per = calloc(ps->nw + 1, sizeof(*per))) == NULL)
		return;		/* uncapped: slower, not wrong */
	for (i = 0; i < ps->nw; i++) {
		struct work *w = &ps->w[i];

		if (w->kind != W_DELIVER) {
			for (j = 0; j < nper; j++)
				if (strcmp(per[j].id, w->g.provider) == 0)
					break;
			if (j == nper)
				snprintf(per[nper++].id, sizeof(per[0].id),
				    "%s", w->g.provider);
			if (per[j].n == cap) {
				ps->pending++;
				continue;
			}
			per[j].n++;
		}
		if (k != i)
			ps->w[k] = *w;
		k++;
	}
	ps->nw = k;
	free(per);
}

/* A walk of the work index: one provider's oldest, up to the cap. */
struct work_walk {
	struct gather_arg	*ga;
	size_t			 cap;
	size_t			 taken;	/* of the provider walked */
};

static int
work_grant(const struct tl_grant *g, void *arg)
{
	struct work_walk *ww = arg;

	if (ww->taken == ww->cap)
		return 1;	/* the rest is the next pass's */
	ww->taken++;
	return gather_one(g, ww->ga);
}

static int
work_provider(const char *provider, uint64_t n, void *arg)
{
	struct work_walk *ww = arg;
	struct pass *ps = ww->ga->ps;
	struct tl_rx_backoff *bo;
	int rc;

	/* In backoff: all of its work waits, none of it is read. */
	if ((bo = tl_rx_backoff_find(ps->rx, provider, 0)) != NULL &&
	    bo->next_ns > ps->now) {
		if (!bo->auth)
			ps->pending += (unsigned)n;
		if (ps->next_ns == 0 || bo->next_ns < ps->next_ns)
			ps->next_ns = bo->next_ns;
		return 0;
	}
	ww->taken = 0;
	if ((rc = tl_grant_each_work_on(ww->ga->t,
	    ww->ga->p, provider, work_grant, ww)) != 0 && rc != 1)
		return rc;
	if (n > ww->taken)
		ps->pending += (unsigned)(n - ww->taken);
	return 0;
}

/*
 * What tally adopt gave for w's object, read for its adopting create:
 * --secret-stdin's and --password-stdin's (each "" when not given).
 */
static int
adopt_secrets(struct tl_rx *rx, struct tl_txn *t, struct work *w)
{
	int rc;

	if ((rc = tl_rx_adopt_secret(rx, t, &w->g, "secret", w->adopt_secret,
	    sizeof(w->adopt_secret))) != 0 && rc != TL_ENOTFOUND)
		return rc;
	if ((rc = tl_rx_adopt_secret(rx, t, &w->g, "password",
	    w->adopt_password, sizeof(w->adopt_password))) != 0 &&
	    rc != TL_ENOTFOUND)
		return rc;
	return 0;
}

/* Phase 1 (pass.h): what each grant needs, in the pass's read transaction. */
static int
gather(void *arg, struct tl_txn *t, const struct tl_proj *p, unsigned *phases)
{
	struct pass *ps = arg;
	struct gather_arg ga = { ps, t, p };
	struct tl_rx *rx = ps->rx;
	size_t i, cap = (size_t)(rx->workers > 0 ? rx->workers : 1) *
	    TL_RX_PASS_PER_SESSION;
	int rc;

	/*
	 * The work index (projections/grant.h): what the folds say needs
	 * the provisioner (a state of work, a holder without the current
	 * version), so a pass costs its own work, never the grants at
	 * rest.  The first pass of a process sweeps every grant instead:
	 * projections built before an entry of the index existed (a home
	 * of an older tally, until tally rebuild) lack it, and what they
	 * lack is found once, at start.
	 */
	if (rx->swept_ns != 0) {
		struct work_walk ww = { &ga, cap, 0 };

		if ((rc = tl_grant_work_providers(t, p, work_provider,
		    &ww)) != 0 ||
		    (rc = tl_grant_each_undelivered(t, p, gather_one,
		    &ga)) != 0)
			return rc;
	} else {
		if ((rc = tl_grant_each(t, p, gather_one, &ga)) != 0)
			return rc;
		rx->swept_ns = ps->now;
	}
	cap_pass(ps, cap);
	for (i = 0; i < ps->nw; i++) {
		struct work *w = &ps->w[i];
		struct tl_rx_prov *pv;

		if (w->kind == W_DELIVER)
			continue;
		/* The module's own instance takes it: no provider to call. */
		pv = TL_GRANT_IS_EMBEDDED(&w->g) ? NULL :
		    pass_provider(ps, t, p, &w->g, w->driver, &w->drop);
		if (TL_GRANT_IS_EMBEDDED(&w->g)) {
			w->noop = 1;
			w->drop = 1;	/* tally keeps nothing of it */
		}
		else if (pv == NULL || tl_drv_find(w->driver) == NULL) {
			w->rc = TL_EDRIVER;
			snprintf(w->why, sizeof(w->why), "provider %s has no "
			    "usable driver for %s", w->g.provider, w->g.type);
			continue;
		}
		if (w->kind == W_CREATE && w->g.cert_login != 0 &&
		    !ps->cert_ca_read) {
			if ((rc = tl_rx_mesh_ca_dup(t, p, &ps->cert_ca)) != 0)
				return rc;
			ps->cert_ca_read = 1;
		}
		if (w->kind == W_CREATE && (rc = tl_rx_grant_params(t, p,
		    &w->g, w->driver, &w->params)) != 0) {
			w->rc = rc;
			snprintf(w->why, sizeof(w->why), "cannot read the "
			    "requirement's params: %s", tl_strerror(rc));
			continue;
		}
		if (w->kind == W_CREATE && tl_rx_grant_adopting(&w->g) &&
		    (rc = adopt_secrets(ps->rx, t, w)) != 0) {
			w->rc = rc;
			snprintf(w->why, sizeof(w->why), "cannot read the "
			    "secret tally adopt was given: %s",
			    tl_strerror(rc));
			continue;
		}
		if (w->resumed && w->kind == W_CREATE &&
		    (rc = intent_password(ps->rx, t, w)) != 0 &&
		    rc != TL_ENOTFOUND) {
			w->rc = rc;
			snprintf(w->why, sizeof(w->why), "cannot read the "
			    "intent's credential: %s", tl_strerror(rc));
			continue;
		}
		if (w->resumed && w->g.intent_seq == 0)
			w->resumed = 0;	/* failed before any intent */
		if (w->resumed || w->kind == W_REVOKE)
			tl_rx_grant_names(ps->rx, &w->g, w->g.version, w->dbname, w->owner,
			    w->login);
		if ((w->resumed || w->kind == W_REVOKE) && w->g.version > 0 &&
		    pv != NULL && pv->ops != NULL && pv->ops->decl->credential.handle_model &&
		    (rc = tl_rx_grant_handle(ps->rx, t, w->g.id, w->g.version,
		    w->handle)) != 0 && rc != TL_ENOTFOUND) {
			w->rc = rc;
			snprintf(w->why, sizeof(w->why), "cannot read the "
			    "credential's handle: %s", tl_strerror(rc));
			continue;
		}
		if (w->kind == W_REVOKE && w->g.version == 0)
			w->noop = 1;	/* revoked before it was provisioned */
		/*
		 * What tally adopt took over was someone's before it was
		 * the grant's: kept whatever the provider's policy.
		 */
		if (w->g.adopt_version != 0)
			w->drop = 0;
		if (strcmp(w->g.state, TL_GRANT_PURGING) == 0)
			w->drop = 1;	/* the operator's explicit choice */
	}
	if (ps->nw > 0)
		*phases = TL_RX_INTENTS | TL_RX_CALLS | TL_RX_OUTCOMES;
	return 0;
}

/* Phase 2: the intents, in the pass's write transaction. */
static int
intents(void *arg, struct tl_ctx *cp)
{
	struct pass *ps = arg;
	struct tl_ctx c = *cp;
	size_t i;
	int rc;

	for (i = 0; i < ps->nw; i++) {
		struct work *w = &ps->w[i];
		struct tl_body b;
		uint8_t ct[TL_PASSWORD_MAX + TL_BOX_OVERHEAD];
		const struct tl_rx_prov *pv;
		size_t ctlen, j;
		char stream[TL_KEY_MAX];

		if (w->kind != W_CREATE || w->rc != 0 || w->resumed)
			continue;
		/* The scheme first: a grant's first version decides it. */
		w->g.naming = tl_rx_grant_scheme(ps->rx, &w->g);
		w->g.version = w->g.version ? w->g.version + 1 : 1;
		tl_rx_grant_names(ps->rx, &w->g, w->g.version, w->dbname, w->owner,
		    w->login);
		pv = NULL;
		for (j = 0; j < ps->npv && pv == NULL; j++)
			if (strcmp(ps->pv[j].id, w->g.provider) == 0)
				pv = &ps->pv[j];
		tl_rx_prov_password(ps->rx, pv, w->password);
		ctlen = tl_rx_seal_credential(ps->rx, w->g.id, w->g.version,
		    w->password, ct);
		if ((rc = tl_key(stream, "grant/%s", w->g.id)) != 0)
			return rc;
		c.cause = w->g.state_seq;
		c.have_corr = 0;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, w->g.id);
		tl_body_str(&b, TL_F_PROVIDER, w->g.provider);
		tl_body_u64(&b, TL_F_VERSION, w->g.version);
		tl_body_str(&b, TL_F_RESOURCE, w->dbname);
		tl_body_str(&b, TL_F_OWNER, w->owner);
		tl_body_str(&b, TL_F_USER, w->login);
		tl_body_u64(&b, TL_F_NAMING, w->g.naming);
		tl_body_secret(&b, TL_F_PASSWORD, ct, ctlen);
		rc = tl_emit(&c, TL_EV_GRANT_PROVISIONING, stream, &b, NULL);
		tl_body_free(&b);
		if (rc != 0)
			return rc;
	}
	*cp = c;
	return 0;
}

/*
 * The password the holders of an adopted login use (tally adopt
 * --password-stdin), tried as the verifier tries a credential, right
 * after the takeover: whether they work now, for the operator, and
 * nothing more (it is never delivered, recorded as a version or
 * repaired to).  A drift other than the credential's or the login's
 * is not the holders' concern.
 */
static void
try_holders(const struct tl_rx_prov *pv, void *h, struct work *w,
    const struct tl_drv_grant *dg)
{
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	struct tl_drv_endpoint ep;
	struct tl_drv_grant hg = *dg;
	enum tl_drv_drift drift = TL_DRIFT_NONE;
	char host[256];

	tl_rx_consumer_endpoint(pv, &w->g, TL_RX_EP_CHECK, NULL, sv, host,
	    &ep);
	hg.password = w->adopt_password;
	if (pv->ops->check == NULL ||
	    pv->ops->check(h, &hg, &ep, &drift, w->holders_why) != 0)
		w->holders = 0;	/* the admin side failed: not known */
	else if (drift == TL_DRIFT_CREDENTIAL || drift == TL_DRIFT_MISSING)
		w->holders = TL_GRANT_HOLDERS_FAILING;
	else {
		w->holders = TL_GRANT_HOLDERS_WORKING;
		snprintf(w->holders_why, sizeof(w->holders_why), "login "
		    "\"%s\" authenticates with it", dg->login);
	}
	tl_secret_wipe(w->adopt_password, sizeof(w->adopt_password));
}

/*
 * One create or revoke, with a session of its provider open, on a pool
 * thread (pass.h): touches only its work item (and reads the pass's
 * cert_ca, set before any call).
 */
static void
provision_call(void *arg, const struct tl_rx_prov *pv, void *h,
    struct tl_rx_call *c)
{
	struct pass *ps = arg;
	struct work *w = c->item;
	struct timespec t0, t1;
	struct tl_drv_grant dg = { 0 };
	char origin[TL_GRANT_ID_MAX + 1];
	const char *params[TL_RX_PARAMS_SV];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	dg.resource = w->dbname;
	dg.owner = w->owner;
	dg.login = w->login;
	/* A login by certificate has no password (decl.h, cert_login). */
	dg.cert_login = w->g.cert_login != 0;
	dg.cert_ca = dg.cert_login ? ps->cert_ca : NULL;
	dg.password = dg.cert_login ? "" : w->password;
	dg.handle = w->handle[0] != '\0' ? w->handle : NULL;
	dg.handle_out = w->handle_out;
	dg.params = tl_drv_params_unpack(w->params, params, TL_RX_PARAMS_SV);
	w->handle_out[0] = '\0';
	/* The mark of the objects (a move's old resource: GRANT's). */
	tl_rx_grant_origin(&w->g, origin);
	dg.grant = origin;
	dg.adopt_unnamed = tl_rx_grant_naming(&w->g) == 1;
	dg.adopt_mesh = tl_rx_grant_adopt(&w->g);
	dg.adopted = w->g.adopt_version != 0;
	dg.adopting = tl_rx_grant_adopting(&w->g);
	dg.access = (int)w->g.access;
	/* Taken over with what the operator gave, not the intent's. */
	if (dg.adopting && w->adopt_secret[0] != '\0')
		dg.password = w->adopt_secret;
	if (w->kind == W_CREATE) {
		/*
		 * create promises the password (driver.h), also for a
		 * resumed intent that finds the login made before.
		 */
		w->rc = pv->ops->create(h, &dg, w->why);
		if (w->rc == 0 && dg.adopting && w->adopt_password[0] != '\0')
			try_holders(pv, h, w, &dg);
	} else {
		w->rc = pv->ops->revoke(h, &dg, w->drop, w->why);
		/* What a retained grant keeps, for tally grants. */
		if (w->rc == 0 && !w->drop && pv->ops->size != NULL &&
		    !dg.access) {
			char why2[TL_WHY_MAX];

			w->have_size = pv->ops->size(h, &dg, &w->size,
			    why2) == 0;
		}
	}
	c->rc = w->rc;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	w->ms = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000 +
	    (t1.tv_nsec - t0.tv_nsec) / 1000000);
}

/*
 * Phase 3: driver calls, each provider's on up to --workers sessions of
 * its own on the pool; then, still with no transaction open, what they
 * did is logged and each provider's backoff moves.
 */
static void
call_drivers(void *arg, unsigned *phases)
{
	struct pass *ps = arg;
	struct tl_rx_call *calls;
	size_t i, n = 0;

	(void)phases;	/* outcomes always: deliveries, the checkpoint */
	for (i = 0; i < ps->nw; i++) {
		struct work *w = &ps->w[i];
		size_t j;

		if (w->kind == W_DELIVER || w->rc != 0 || w->noop)
			continue;
		for (j = 0; j < ps->npv; j++)
			if (strcmp(ps->pv[j].id, w->g.provider) == 0)
				break;
		if (j == ps->npv)
			continue;
		if (tl_vec_grow(&ps->pv[j].w, &ps->pv[j].capw,
		    ps->pv[j].nw + 1, sizeof(ps->pv[j].w[0])) != 0) {
			w->rc = ENOMEM;
			continue;
		}
		ps->pv[j].w[ps->pv[j].nw++] = w;
		ps->pv[j].decl = tl_drv_decl_find(w->driver);
		ps->pv[j].ops = tl_drv_ops_of(ps->pv[j].decl);
	}
	if ((calls = calloc(ps->nw + 1, sizeof(*calls))) != NULL) {
		/* In ps->w's order: the oldest request first. */
		for (i = 0; i < ps->nw; i++) {
			struct work *w = &ps->w[i];

			if (w->kind == W_DELIVER || w->rc != 0 || w->noop)
				continue;
			calls[n].provider = w->g.provider;
			calls[n].item = w;
			calls[n].why = w->why;
			n++;
		}
		tl_rx_pass_calls(ps->rx, ps->pv, ps->npv, calls, n, 1,
		    TL_RX_LANE_PASS, provision_call, ps);
		for (i = 0; i < n; i++)
			if (calls[i].admin) {
				struct work *w = calls[i].item;

				w->rc = calls[i].rc;
				w->admin = 1;
			}
		free(calls);
	} else
		for (i = 0; i < ps->nw; i++)
			if (ps->w[i].kind != W_DELIVER && ps->w[i].rc == 0 &&
			    !ps->w[i].noop) {
				ps->w[i].rc = ENOMEM;
				snprintf(ps->w[i].why, sizeof(ps->w[i].why),
				    "%s", tl_strerror(ENOMEM));
			}
	for (i = 0; i < ps->nw; i++) {
		struct work *w = &ps->w[i];

		if (w->kind == W_DELIVER)
			continue;
		if (w->rc == 0 && w->kind == W_CREATE &&
		    tl_rx_grant_adopting(&w->g)) {
			/* What the driver found and took over, said once. */
			tl_rx_log(ps->rx, TL_RX_INFO, "provisioned grant %s on "
			    "%s by adopting: %s (%llu ms)", w->g.id,
			    w->g.provider, w->why, (unsigned long long)w->ms);
			if (w->holders != 0)
				tl_rx_log(ps->rx, w->holders ==
				    TL_GRANT_HOLDERS_WORKING ? TL_RX_INFO :
				    TL_RX_WARN, "grant %s: the holders' password "
				    "(tally adopt --password-stdin) %s: %s", w->g.id,
				    w->holders == TL_GRANT_HOLDERS_WORKING ?
				    "works; they keep it until tally's reaches "
				    "them" : "fails; they are down until tally's "
				    "reaches them", w->holders_why);
		} else if (w->rc == 0)
			tl_rx_log(ps->rx, TL_RX_INFO, "%s grant %s on %s "
			    "(%llu ms)", w->kind == W_CREATE ? "provisioned" :
			    strcmp(w->g.state, TL_GRANT_PURGING) == 0 ? "purged" :
			    "revoked", w->g.id, w->g.provider[0] != '\0' ?
			    w->g.provider : "its module's own instance",
			    (unsigned long long)w->ms);
		else if (w->rc == TL_EAUTH) {
			char why[TL_WHY_MAX + 400];
			struct tl_rx_prov *pv = NULL;
			size_t j;

			for (j = 0; j < ps->npv && pv == NULL; j++)
				if (strcmp(ps->pv[j].id, w->g.provider) == 0)
					pv = &ps->pv[j];
			if (pv != NULL)
				tl_rx_auth_reason(pv, w->why, why, sizeof(why));
			else
				snprintf(why, sizeof(why), "%s", w->why);
			tl_rx_log(ps->rx, TL_RX_WARN, "grant %s on %s: %s",
			    w->g.id, w->g.provider, why);
		} else {
			tl_rx_log(ps->rx, TL_RX_WARN, "grant %s on %s: %s",
			    w->g.id, w->g.provider, w->why);
			/* Not to be waited on: nothing changes by itself. */
			if (w->rc != TL_EAUTH && w->rc != TL_EUNTRUSTED)
				ps->pending++;
		}
	}
	for (i = 0; i < ps->npv; i++) {
		size_t j;
		int bad = 0, refused = 0;

		for (j = 0; j < ps->pv[i].nw; j++)
			if (ps->pv[i].w[j]->rc == TL_EAUTH ||
			    ps->pv[i].w[j]->rc == TL_EUNTRUSTED)
				refused = 1;
			else if (ps->pv[i].w[j]->rc != 0)
				bad = 1;
		if (refused && !bad)
			tl_rx_backoff_refused(ps->rx, ps->pv[i].id);
		else if (bad || refused)
			tl_rx_backoff_fail(ps->rx, ps->pv[i].id);
		else
			tl_rx_backoff_ok(ps->rx, ps->pv[i].id);
	}
}

/*
 * grant.provisioned's fields: every connection field the driver
 * declares that is not secret, as it composes it for the provider's
 * routable name, in the order it declares them (a secret one is only
 * inside a holder's sealed delivery).
 */
static void
record_fields(const struct pass *ps, const struct work *w, struct tl_body *b)
{
	const struct tl_rx_prov *pv = NULL;
	const struct tl_drv_decl *dd;
	const struct tl_drv_field *f;
	struct tl_drv_endpoint ep;
	struct tl_drv_grant dg = { 0 };
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	char val[512], host[256];
	const char *d;
	size_t j;

	for (j = 0; j < ps->npv; j++)
		if (strcmp(ps->pv[j].id, w->g.provider) == 0)
			pv = &ps->pv[j];
	dd = pv != NULL && pv->decl != NULL ? pv->decl :
	    tl_drv_decl_for_type(w->g.type);
	if (dd == NULL || dd->fields == NULL)
		return;
	d = tl_drv_setting_default(dd, "port");
	if (pv != NULL)
		tl_rx_consumer_endpoint(pv, &w->g, TL_RX_EP_RECORD, NULL, sv,
		    host, &ep);
	else {
		memset(&ep, 0, sizeof(ep));
		ep.host = "";
		ep.port = d != NULL ? d : "";
	}
	dg.resource = w->dbname;
	dg.owner = w->owner;
	dg.login = w->login;
	dg.password = NULL;
	dg.grant = w->g.id;
	dg.adopt_unnamed = 0;
	dg.adopt_mesh = tl_rx_grant_adopt(&w->g);
	dg.adopted = w->g.adopt_version != 0;
	dg.access = (int)w->g.access;
	dg.handle = w->handle_out[0] != '\0' ? w->handle_out :
	    w->handle[0] != '\0' ? w->handle : NULL;
	dg.handle_out = NULL;
	for (f = dd->fields; f->name != NULL; f++) {
		if (f->secret || (pv == NULL && strcmp(f->name, "host") == 0))
			continue;
		if (tl_drv_compose(dd, f->name, &ep, &dg, val,
		    sizeof(val)) == 0)
			tl_body_str(b, f->name, val);
	}
}

struct readers {
	char	(*ids)[TL_GRANT_ID_MAX + 1];
	size_t	 n;
};

static int
reader_one(const struct tl_grant *g, void *arg)
{
	struct readers *rd = arg;
	void *nv;

	if (strcmp(g->state, TL_GRANT_REVOKING) == 0 ||
	    strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGING) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0 || g->access == 0)
		return 0;
	if ((nv = realloc(rd->ids, (rd->n + 1) * sizeof(*rd->ids))) == NULL)
		return ENOMEM;
	rd->ids = nv;
	snprintf(rd->ids[rd->n++], TL_GRANT_ID_MAX + 1, "%s", g->id);
	return 0;
}

/*
 * The logins with access to owner's resource go with it: revoked in the
 * transaction that records its revocation (collected first: emitting
 * rewrites the records scanned).
 */
static int
revoke_readers(struct tl_ctx *c, const char *owner)
{
	struct readers rd = { NULL, 0 };
	struct tl_body b;
	char stream[TL_KEY_MAX], why[TL_GRANT_ID_MAX + 32];
	uint64_t cause = c->cause;
	size_t i;
	int rc;

	rc = tl_grant_each_reader(c->t, &c->p, owner, reader_one, &rd);
	snprintf(why, sizeof(why), "%s was revoked", owner);
	for (i = 0; rc == 0 && i < rd.n; i++) {
		if ((rc = tl_key(stream, "grant/%s", rd.ids[i])) != 0)
			break;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, rd.ids[i]);
		tl_body_str(&b, TL_F_REASON, why);
		rc = tl_emit(c, TL_EV_REVOCATION_REQUESTED, stream, &b, NULL);
		tl_body_free(&b);
	}
	c->cause = cause;
	free(rd.ids);
	return rc;
}

/* Phase 3: outcomes, deliveries and the checkpoint, in one transaction. */
static int
outcomes(void *arg, struct tl_ctx *cp)
{
	struct pass *ps = arg;
	struct tl_ctx c = *cp;
	struct tl_txn *t = c.t;
	size_t i;
	uint64_t last;
	int rc = 0;

	for (i = 0; i < ps->npv; i++) {
		struct tl_rx_prov *pv = &ps->pv[i];
		struct work *fail = NULL;
		size_t j;
		int any_ok = 0;

		for (j = 0; j < pv->nw; j++) {
			if (pv->w[j]->rc == 0)
				any_ok = 1;
			else if (pv->w[j]->rc == TL_EUNREACH ||
			    pv->w[j]->rc == TL_EAUTH ||
			    pv->w[j]->rc == TL_EUNTRUSTED || pv->w[j]->admin)
				fail = pv->w[j];
		}
		if (fail != NULL && !any_ok && fail->rc == TL_EUNTRUSTED)
			rc = tl_rx_provider_down(&c, pv->id,
			    TL_RX_DOWN_UNTRUSTED, fail->why);
		else if (fail != NULL && !any_ok && fail->rc == TL_EAUTH) {
			char why[TL_WHY_MAX + 400];

			tl_rx_auth_reason(pv, fail->why, why, sizeof(why));
			rc = tl_rx_provider_down(&c, pv->id, 1, why);
		} else if (fail != NULL && !any_ok)
			rc = tl_rx_provider_down(&c, pv->id, 0, fail->why);
		else if (any_ok || pv->ok)
			/* Reached: a refused grant is not an outage. */
			rc = tl_rx_provider_up(&c, pv->id);
		if (rc != 0)
			return rc;
	}
	for (i = 0; i < ps->nw; i++) {
		struct work *w = &ps->w[i];
		struct tl_grant cur;
		struct tl_body b;
		char stream[TL_KEY_MAX];

		if (w->kind == W_DELIVER) {
			if ((rc = tl_rx_deliver(ps->rx, &c, w->g.id)) != 0)
				return rc;
			continue;
		}
		if ((rc = tl_grant_get(t, &c.p, w->g.id, &cur, NULL)) != 0)
			return rc;
		if ((rc = tl_key(stream, "grant/%s", w->g.id)) != 0)
			return rc;
		c.cause = cur.state_seq;
		c.have_corr = 0;
		/*
		 * A secret the provider issued during the call, first: with
		 * it lost tally could no longer manage the object (on
		 * failure too: the call may have got that far).
		 */
		if (w->handle_out[0] != '\0' && (rc = tl_rx_record_handle(
		    ps->rx, &c, w->g.id, cur.version, w->handle_out)) != 0)
			return rc;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, w->g.id);
		if (w->rc != 0) {
			/* Unchanged failures are not news. */
			if ((strcmp(cur.state, TL_GRANT_FAILED) == 0 ||
			    strcmp(cur.state, TL_GRANT_REVOKING) == 0) &&
			    strcmp(cur.reason, w->why) == 0) {
				tl_body_free(&b);
				continue;
			}
			tl_body_str(&b, TL_F_REASON, w->why);
			tl_body_str(&b, TL_F_OP,
			    w->kind == W_CREATE ? "create" : "revoke");
			rc = tl_emit(&c, TL_EV_GRANT_FAILED, stream, &b, NULL);
		} else if (w->kind == W_CREATE) {
			tl_body_u64(&b, TL_F_VERSION, cur.version);
			tl_body_map(&b, TL_F_FIELDS);
			if (!TL_GRANT_IS_EMBEDDED(&w->g))
				record_fields(ps, w, &b);
			tl_body_end(&b);
			if (w->holders != 0) {
				tl_body_str(&b, TL_F_HOLDERS, w->holders ==
				    TL_GRANT_HOLDERS_WORKING ? "working" :
				    "failing");
				tl_body_str(&b, TL_F_HOLDERS_WHY,
				    w->holders_why);
			}
			rc = tl_emit(&c, TL_EV_GRANT_PROVISIONED, stream, &b,
			    NULL);
			/* The state when the pass began: the intent moved it. */
			if (rc == 0 && strcmp(w->g.state, TL_GRANT_RESTORING) == 0) {
				tl_body_reset(&b);
				tl_body_str(&b, TL_F_GRANT, w->g.id);
				tl_body_u64(&b, TL_F_VERSION, cur.version);
				rc = tl_emit(&c, TL_EV_GRANT_RESTORED, stream, &b,
				    NULL);
			}
			if (rc == 0 && strcmp(cur.state, TL_GRANT_REPAIRING) == 0) {
				/* Recreated deliberately: say so beside it. */
				tl_body_reset(&b);
				tl_body_str(&b, TL_F_GRANT, w->g.id);
				tl_body_str(&b, TL_F_KIND, TL_DRIFTK_MISSING);
				tl_body_str(&b, TL_F_HOW, "recreated on "
				    "request (tally repair); its data did not "
				    "come back");
				rc = tl_emit(&c, TL_EV_GRANT_REPAIRED, stream, &b,
				    NULL);
			}
			/*
			 * An object tally adopt took over: its login's
			 * password was never tally's, so nothing is
			 * delivered; the rotation delivers the first
			 * credential tally made, and retires the adopted
			 * one once every holder acknowledged it.
			 */
			if (rc == 0 && tl_rx_grant_adopted_login(&cur)) {
				rc = tl_dec_rotate(&c, w->g.id, 0, "adopted");
				if (rc == TL_EREFUSED)
					rc = 0;
			} else if (rc == 0)
				rc = tl_rx_deliver(ps->rx, &c, w->g.id);
		} else if (strcmp(cur.state, TL_GRANT_PURGING) == 0) {
			rc = tl_emit(&c, TL_EV_GRANT_PURGED, stream, &b, NULL);
			if (rc == 0)
				rc = tl_dec_reopen_wanted(&c, w->g.id);
			if (rc == 0)
				rc = revoke_readers(&c, w->g.id);
		} else {
			tl_body_str(&b, TL_F_POLICY,
			    w->drop ? "drop" : "retain");
			if (w->have_size)
				tl_body_u64(&b, TL_F_SIZE, w->size);
			rc = tl_emit(&c, TL_EV_GRANT_REVOKED, stream, &b, NULL);
			if (rc == 0)
				rc = tl_dec_reopen_wanted(&c, w->g.id);
			if (rc == 0)
				rc = revoke_readers(&c, w->g.id);
		}
		tl_body_free(&b);
		if (rc != 0)
			return rc;
	}
	*cp = c;
	if ((rc = tl_log_last(t, &last, NULL)) != 0)
		return rc;
	return tl_ckpt_set(t, CKPT, last);
}

static void
pass_free(struct pass *ps)
{
	size_t i;

	for (i = 0; i < ps->nw; i++) {
		free(ps->w[i].params);
		ps->w[i].params = NULL;
		tl_secret_wipe(ps->w[i].password, sizeof(ps->w[i].password));
		tl_secret_wipe(ps->w[i].handle, sizeof(ps->w[i].handle));
		tl_secret_wipe(ps->w[i].handle_out,
		    sizeof(ps->w[i].handle_out));
	}
	for (i = 0; i < ps->npv; i++) {
		tl_rx_prov_wipe(&ps->pv[i]);
		free(ps->pv[i].w);
	}
	/* Kept for the next pass, wiped whole (rx->prov_w). */
	if (ps->w != NULL)
		tl_secret_wipe(ps->w, ps->nw * sizeof(*ps->w));
	ps->rx->prov_w = ps->w;
	ps->rx->prov_capw = ps->capw;
	tl_secret_free(ps->pv);
	free(ps->cert_ca);
	ps->cert_ca = NULL;
}

void
tl_rx_provision_free(struct tl_rx *rx)
{
	tl_secret_free(rx->prov_w);
	rx->prov_w = NULL;
	rx->prov_capw = 0;
}

static const struct tl_rx_pass_def provision_pass = {
	gather, intents, call_drivers, outcomes
};

int
tl_rx_provision(struct tl_rx *rx, unsigned *done, unsigned *pending,
    uint64_t *next_ns)
{
	struct pass ps;
	size_t i;
	int rc;

	memset(&ps, 0, sizeof(ps));
	ps.rx = rx;
	ps.w = rx->prov_w;
	ps.capw = rx->prov_capw;
	ps.now = tl_rx_now();
	*done = 0;
	if ((rc = tl_rx_pass_run(rx, &provision_pass, &ps)) != 0 ||
	    ps.nw == 0)
		goto out;
	for (i = 0; i < ps.nw; i++)
		if (ps.w[i].rc == 0)
			(*done)++;
	rc = 0;
out:
	for (i = 0; i < rx->nbo; i++)
		if (rx->bo[i].next_ns > ps.now && (ps.next_ns == 0 ||
		    rx->bo[i].next_ns < ps.next_ns))
			ps.next_ns = rx->bo[i].next_ns;
	*pending = ps.pending;
	*next_ns = ps.next_ns;
	pass_free(&ps);
	return rc;
}

