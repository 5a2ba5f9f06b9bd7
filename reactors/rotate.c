/*
 * rotate.c - the rotator: drives each running rotation one step, and
 * starts rotations that a max-credential-age makes due.
 *
 * Steps, each an intent or an outcome (projections/rotation.h):
 *   started -> credential.issued (the new password, encrypted)     intent
 *   issued  -> add the new credential beside the old one (driver
 *              add_credential), credential.activated + one
 *              credential.delivered per holder, in one transaction  outcome
 *   active  -> when every holder acknowledged (or the deadline
 *              passed): retire the old credential (driver
 *              retire_credential); credential.retired (forced, with
 *              the holders cut off, if by deadline) + rotation.completed
 * What add and retire are follows the driver's credential model
 * (ops->decl->credential.kind, drivers/driver.h): LOGIN_BESIDE, a login per
 * version, the old one disabled, its sessions ended and dropped;
 * MULTI_PASSWORD, one login for every version holding a password per
 * version, retire given the old version's password (decrypted from its
 * intent, cv/ in projections/rotation.h) to remove; NONE (a directory),
 * nothing to add or retire: the steps are recorded and call nothing.
 * A crash between any two steps resumes at the recorded one; the driver
 * calls are idempotent and a resumed create sets the password again.
 *
 * The new credential reaches the holders in the same transaction as
 * credential.activated (sealed credential.delivered events, which the
 * nodes' agents read; the control plane writes no file): no delivery
 * can lag behind the activation, and retirement waits on acks of the
 * new version, so a crash between any two steps locks no holder out.
 *
 * While a rotation waits, the old login's sessions the provider still
 * has open are counted (the driver's sessions op) and kept in the
 * scratch table TL_ROT_SESSIONS_TABLE (projections/status.h), for tally
 * status: a holder that acked but still runs on the old login shows.
 *
 * A grant revoked (or purged) in the middle of a rotation: the
 * revocation disables the grant's current login only, so the rotator
 * disables and drops the other one (the old login once the new one is
 * active; the new one, which a crash may have left, before that) and
 * records credential.retired + rotation.abandoned.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fields.h"
#include "core/window.h"
#include "drivers/util.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/rotation.h"
#include "projections/status.h"
#include "backoff.h"
#include "credential.h"
#include "deliver.h"
#include "pass.h"
#include "rx-internal.h"
#include "session.h"

struct rstep {
	struct tl_rotation	 r;
	struct tl_grant		 g;
	int			 op;	/* ISSUE, CREATE, RETIRE, WAIT, ABANDON */
	char			 password[TL_PASSWORD_MAX + 1];
	/*
	 * RETIRE, ABANDON under TL_DRV_CRED_MULTI_PASSWORD: the retired
	 * version's password, which the driver removes from the login the
	 * versions share (driver.h, retire_credential).
	 */
	char			 oldpw[TL_PASSWORD_MAX + 1];
	/*
	 * A driver whose provider chooses the credential (driver.h,
	 * handle_model): the recorded handle of the version the call is
	 * about (CREATE: the new one, if an earlier add recorded it;
	 * RETIRE, ABANDON: the old one), and the one the call wrote,
	 * recorded first in the outcomes.
	 */
	char			 handle[TL_DRV_HANDLE_MAX];
	char			 handle_out[TL_DRV_HANDLE_MAX];
	/* CREATE: the requirement's params (tl_rx_grant_params); NULL: none. */
	char			*params;
	char			 db[64], owner[64], login[64], old[64];
	struct tl_rx_prov	 pv;
	const struct tl_drv_ops	*ops;
	int			 rc;
	char			 why[TL_WHY_MAX];
	int			 forced;
	char			 cutoff[1024];	/* holders, comma-separated */
	uint64_t		 old_version;	/* of old (ABANDON: 0, none) */
	/*
	 * old is the login tally adopt took over (driver.h: adopting on
	 * retire): under MULTI_PASSWORD oldpw is then the password to
	 * keep, the new version's, every other one going.
	 */
	int			 adopted_old;
	/* RETIRE: the old login's sessions the driver saw (ops->sessions). */
	int			 corroborated;
	unsigned		 sessions;
};

enum { OP_ISSUE = 1, OP_CREATE, OP_RETIRE, OP_WAIT, OP_ABANDON };

/* A rotation of a grant in one of these states can never complete. */
static int
grant_gone(const char *state)
{
	return strcmp(state, TL_GRANT_REVOKING) == 0 ||
	    strcmp(state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(state, TL_GRANT_PURGING) == 0 ||
	    strcmp(state, TL_GRANT_PURGED) == 0;
}

struct rpass {
	struct tl_rx	*rx;
	struct rstep	*s;
	size_t		 n;
	uint64_t	 now;
	unsigned	 max_per_provider;
};

struct gather_arg {
	struct rpass		*ps;
	struct tl_txn		*t;
	const struct tl_proj	*p;
};

/*
 * The password of the version st retires (st->old_version), from its
 * intent, into st->oldpw: the login is the same for every version, so
 * the driver is told which of its passwords goes.
 */
static void
retired_password(struct rpass *ps, struct gather_arg *ga, struct rstep *st)
{
	struct tl_grant tmp = st->g;
	uint64_t seq = 0, v = st->adopted_old ? st->r.to : st->old_version;

	tmp.version = v;
	if (v == st->r.to && st->r.issued_seq != 0)
		seq = st->r.issued_seq;
	else if (tl_rot_version_intent(ga->t, ga->p, st->g.id, v, &seq) != 0)
		seq = 0;
	tmp.intent_seq = seq;
	if (seq == 0 || tl_rx_intent_password(ps->rx, ga->t, &tmp,
	    st->oldpw) != 0) {
		st->rc = TL_ESECRET;
		snprintf(st->why, sizeof(st->why), "cannot read the intent of "
		    "v%llu, whose password is to be %s", (unsigned long long)v,
		    st->adopted_old ? "kept" : "retired");
	}
	tl_secret_wipe(&tmp, sizeof(tmp));
}

static int
gather_one(const struct tl_rotation *r, void *arg)
{
	struct gather_arg *ga = arg;
	struct rpass *ps = ga->ps;
	struct rstep *st, *nv;
	struct tl_nodelist nl;
	char driver[64];
	int drop;
	size_t i;

	if ((nv = tl_secret_realloc(ps->s, (ps->n + 1) * sizeof(*nv))) == NULL)
		return ENOMEM;
	ps->s = nv;
	st = &ps->s[ps->n];
	memset(st, 0, sizeof(*st));
	st->r = *r;
	ps->rx->gathered++;
	if (tl_grant_get(ga->t, ga->p, r->grant, &st->g, NULL) != 0)
		return 0;
	if (strcmp(st->g.state, TL_GRANT_PROVISIONED) != 0 &&
	    !grant_gone(st->g.state))
		return 0;	/* failed, missing, repairing: it waits */
	tl_rx_grant_names(ps->rx, &st->g, r->to, st->db, st->owner, st->login);
	{
		char d2[64], o2[64];

		tl_rx_grant_names(ps->rx, &st->g, r->from, d2, o2, st->old);
	}
	st->old_version = r->from;
	if (grant_gone(st->g.state)) {
		/*
		 * The revocation took the grant's current login; the other
		 * one goes here: the old one once the new one is active,
		 * else the new one a crashed create may have left.
		 */
		st->op = OP_ABANDON;
		if (strcmp(r->state, TL_ROT_ISSUED) == 0) {
			snprintf(st->old, sizeof(st->old), "%s", st->login);
			st->old_version = r->to;
		} else if (strcmp(r->state, TL_ROT_ACTIVE) != 0) {
			st->old[0] = '\0';	/* started: nothing exists */
			st->old_version = 0;
		}
	} else if (strcmp(r->state, TL_ROT_STARTED) == 0)
		st->op = OP_ISSUE;
	else if (strcmp(r->state, TL_ROT_ISSUED) == 0) {
		struct tl_grant tmp = st->g;

		st->op = OP_CREATE;
		tmp.version = r->to;
		tmp.intent_seq = r->issued_seq;
		if (tl_rx_intent_password(ps->rx, ga->t, &tmp,
		    st->password) != 0) {
			st->rc = TL_ESECRET;
			snprintf(st->why, sizeof(st->why), "cannot read the new "
			    "credential's intent");
		}
	} else {
		/* Active: retire when every holder has the new one. */
		size_t off = 0;
		int all = 1;

		if (tl_rx_grant_holders(ga->t, ga->p, &st->g, &nl) != 0)
			return 0;
		for (i = 0; i < nl.n; i++) {
			char holder[140];

			snprintf(holder, sizeof(holder), "%s@%s",
			    st->g.module, nl.v[i]);
			if (tl_rot_acked(ga->t, ga->p, r->grant, r->to, holder))
				continue;
			all = 0;
			if (off < sizeof(st->cutoff))
				off += (size_t)snprintf(st->cutoff + off,
				    sizeof(st->cutoff) - off, "%s%s",
				    off ? "," : "", holder);
		}
		tl_nodelist_free(&nl);
		if (all)
			st->op = OP_RETIRE;
		else if (r->deadline_ns != 0 && ps->now >= r->started_ns &&
		    ps->now - r->started_ns >= r->deadline_ns) {
			/* (A difference: started + deadline could wrap.) */
			st->op = OP_RETIRE;
			st->forced = 1;
		} else
			st->op = OP_WAIT;
	}
	/* The login retired is the one tally adopt took over. */
	st->adopted_old = st->g.adopt_version != 0 &&
	    st->g.adopt_login[0] != '\0' && st->old_version == r->from &&
	    r->from == st->g.adopt_version;
	if (st->op == OP_WAIT) {
		/*
		 * Only to count the old login's sessions: never an error,
		 * and not while the provider is in backoff (an outage would
		 * make every pass wait on a connect).
		 */
		const struct tl_rx_backoff *bo = tl_rx_backoff_find(ps->rx,
		    st->g.provider, 0);

		if ((bo == NULL || bo->next_ns <= ps->now) &&
		    tl_rx_load_provider(ga->t, ga->p, ps->rx, st->g.provider,
		    st->g.type, &st->pv, driver, &drop) == 0)
			st->ops = tl_drv_find(driver);
	} else if (st->op == OP_CREATE || st->op == OP_RETIRE ||
	    (st->op == OP_ABANDON && st->old[0] != '\0')) {
		if (tl_rx_load_provider(ga->t, ga->p, ps->rx, st->g.provider,
		    st->g.type, &st->pv, driver, &drop) != 0 ||
		    (st->ops = tl_drv_find(driver)) == NULL) {
			st->rc = TL_EDRIVER;
			snprintf(st->why, sizeof(st->why), "provider %s has no "
			    "usable driver", st->g.provider);
		}
	}
	if (st->rc == 0 && st->ops != NULL && st->ops->decl->credential.handle_model &&
	    (st->op == OP_CREATE || st->op == OP_RETIRE ||
	    st->op == OP_ABANDON)) {
		int rc = tl_rx_grant_handle(ps->rx, ga->t, st->g.id,
		    st->op == OP_CREATE ? r->to : st->old_version, st->handle);

		if (rc != 0 && rc != TL_ENOTFOUND) {
			st->rc = rc;
			snprintf(st->why, sizeof(st->why), "cannot read the "
			    "credential's handle: %s", tl_strerror(rc));
		}
	}
	if (st->rc == 0 && st->ops != NULL &&
	    st->ops->decl->credential.kind == TL_DRV_CRED_MULTI_PASSWORD &&
	    (st->op == OP_RETIRE || (st->op == OP_ABANDON &&
	    st->old[0] != '\0')))
		retired_password(ps, ga, st);
	/* An ISSUE goes on to CREATE in this very pass (issue()). */
	if (st->rc == 0 && (st->op == OP_CREATE || st->op == OP_ISSUE)) {
		int rc = tl_rx_grant_params(ga->t, ga->p, &st->g,
		    st->ops != NULL ? st->ops->decl->name : NULL,
		    &st->params);

		if (rc == ENOMEM)
			return rc;
		if (rc != 0) {
			st->rc = rc;
			snprintf(st->why, sizeof(st->why), "cannot read the "
			    "requirement's params: %s", tl_strerror(rc));
		}
	}
	ps->n++;
	return 0;
}

/* The new credentials' intents (credential.issued), in phase 2. */
static int
issue(struct rpass *ps, struct tl_ctx *cp)
{
	struct tl_ctx c = *cp;
	size_t i;
	int rc;

	for (i = 0; i < ps->n; i++) {
		struct rstep *st = &ps->s[i];
		uint8_t ct[TL_PASSWORD_MAX + TL_BOX_OVERHEAD];
		size_t ctlen;
		struct tl_body b;
		char stream[TL_KEY_MAX], driver[64] = "";
		int drop;

		if (st->op != OP_ISSUE)
			continue;
		/* Its policy (and the provider the calls will need). */
		if (st->ops == NULL && tl_rx_load_provider(c.t, &c.p, ps->rx,
		    st->g.provider, st->g.type, &st->pv, driver, &drop) == 0)
			st->ops = tl_drv_find(driver);
		tl_rx_prov_password(ps->rx, st->ops != NULL ? &st->pv : NULL,
		    st->password);
		ctlen = tl_rx_seal_credential(ps->rx, st->g.id, st->r.to,
		    st->password, ct);
		if ((rc = tl_key(stream, "grant/%s", st->g.id)) != 0)
			return rc;
		c.cause = st->r.started_seq;
		c.have_corr = 0;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, st->g.id);
		tl_body_u64(&b, TL_F_VERSION, st->r.to);
		tl_body_str(&b, TL_F_USER, st->login);
		tl_body_secret(&b, TL_F_PASSWORD, ct, ctlen);
		rc = tl_emit(&c, TL_EV_CRED_ISSUED, stream, &b, NULL);
		tl_body_free(&b);
		if (rc != 0)
			return rc;
		st->op = OP_CREATE;	/* this pass goes on to create it */
	}
	*cp = c;
	return 0;
}

/* One step's driver call, with its provider's session open (pass.h). */
static void
rotate_call(void *arg, const struct tl_rx_prov *pv, void *h,
    struct tl_rx_call *c)
{
	struct rstep *st = c->item;
	struct tl_drv_grant dg = { 0 };

	(void)arg;
	(void)pv;
	dg.handle = st->handle[0] != '\0' ? st->handle : NULL;
	dg.handle_out = st->handle_out;
	st->handle_out[0] = '\0';
	if (st->op == OP_WAIT) {
		/*
		 * Waiting: who still has a session on the old login, for
		 * tally status.  A failure only leaves the count unknown; it
		 * is no step and no outage.
		 */
		dg.resource = st->db;
		dg.owner = st->owner;
		dg.grant = st->g.id;
		dg.adopt_unnamed = tl_rx_grant_naming(&st->g) == 1;
		dg.adopt_mesh = tl_rx_grant_adopt(&st->g);
		dg.adopted = st->g.adopt_version != 0;
		dg.access = (int)st->g.access;
		dg.login = st->old;
		dg.password = "";
		if (st->ops->sessions(h, &dg, &st->sessions, NULL) == 0)
			st->corroborated = 1;
		c->rc = 0;
		return;
	}
	/*
	 * A grant with no credential (TL_DRV_CRED_NONE: a directory) has
	 * nothing to add beside or retire: its rotation is the new version
	 * delivered to the holders it has now and their acks, and ends.
	 * Nor has a certificate grant (TL_DRV_CRED_CERTIFICATE), or a
	 * login by certificate (g.cert_login): its new version is a new key
	 * on each holder's node and a certificate for the same name
	 * (reactors/issue.c); the old certificate is left to expire, so no
	 * pool loses a session (its renewal).
	 */
	if (st->ops->decl->credential.kind == TL_DRV_CRED_NONE ||
	    st->ops->decl->credential.kind == TL_DRV_CRED_CERTIFICATE ||
	    st->g.cert_login != 0) {
		st->rc = 0;
		c->rc = 0;
		return;
	}
	if (!tl_drv_can(st->ops->decl, TL_DRV_CAP_ROTATE, st->why)) {
		st->rc = TL_EDRIVER;
		c->rc = st->rc;
		return;
	}
	dg.resource = st->db;
	dg.owner = st->owner;
	dg.grant = st->g.id;
	dg.adopt_unnamed = tl_rx_grant_naming(&st->g) == 1;
	dg.adopt_mesh = tl_rx_grant_adopt(&st->g);
	dg.adopted = st->g.adopt_version != 0;
	dg.access = (int)st->g.access;
	if (st->op == OP_CREATE) {
		const char *params[TL_RX_PARAMS_SV];

		dg.login = st->login;
		dg.password = st->password;
		dg.params = tl_drv_params_unpack(st->params, params,
		    TL_RX_PARAMS_SV);
		/* Beside the old credential: same resource, same owner. */
		st->rc = st->ops->add_credential(h, &dg, st->why);
	} else {
		/*
		 * RETIRE, ABANDON: a login of its own is disabled, its
		 * sessions ended, and removed; a login the versions share
		 * loses the retired version's password (driver.h).
		 */
		int shared = st->ops->decl->credential.kind ==
		    TL_DRV_CRED_MULTI_PASSWORD;

		dg.login = st->old;
		dg.password = shared ? st->oldpw : "";
		dg.adopting = st->adopted_old;
		/*
		 * Corroborate on the provider: after every ack, whoever
		 * still has a session on the old login is recorded (and
		 * the retirement ends it).  A shared login's sessions are
		 * the new version's holders too: nothing to corroborate.
		 */
		if (st->op == OP_RETIRE && !shared &&
		    st->ops->sessions != NULL &&
		    st->ops->sessions(h, &dg, &st->sessions, NULL) == 0)
			st->corroborated = 1;
		st->rc = st->ops->retire_credential(h, &dg, st->why);
	}
	c->rc = st->rc;
}

/* Does st call its driver this pass? */
static int
calls_driver(const struct rstep *st)
{
	return (st->op == OP_CREATE || st->op == OP_RETIRE ||
	    st->op == OP_ABANDON) && !(st->op == OP_ABANDON &&
	    st->old[0] == '\0');
}

/* Does a waiting st count the old login's sessions this pass? */
static int
counts_sessions(const struct rstep *st)
{
	/* A login by certificate is the same login: nothing to tell apart. */
	return st->op == OP_WAIT && st->ops != NULL &&
	    st->ops->sessions != NULL && st->old[0] != '\0' &&
	    st->g.cert_login == 0;
}

/* Phase 4: each step's outcome, if the step is still the one taken. */
static int
outcomes(void *arg, struct tl_ctx *cp)
{
	struct rpass *ps = arg;
	struct tl_ctx c = *cp;
	struct tl_txn *t = c.t;
	size_t i;
	int rc = 0;

	for (i = 0; i < ps->n; i++) {
		struct rstep *st = &ps->s[i];
		struct tl_rotation cur;
		struct tl_body b;
		char stream[TL_KEY_MAX];

		/* A secret the provider issued in the call, first of all. */
		if (st->handle_out[0] != '\0' && (rc = tl_rx_record_handle(
		    ps->rx, &c, st->g.id, st->op == OP_CREATE ? st->r.to :
		    st->old_version, st->handle_out)) != 0)
			return rc;
		if ((st->op != OP_CREATE && st->op != OP_RETIRE &&
		    st->op != OP_ABANDON) || st->rc != 0)
			continue;
		/* Still the same step?  (An operator may have acted.) */
		if (tl_rot_get(t, &c.p, st->r.grant, &cur) != 0)
			continue;
		if ((rc = tl_key(stream, "grant/%s", st->g.id)) != 0)
			return rc;
		c.cause = cur.issued_seq ? cur.issued_seq : cur.started_seq;
		c.have_corr = 0;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, st->g.id);
		if (st->op == OP_CREATE && strcmp(cur.state, TL_ROT_ISSUED) == 0) {
			tl_body_u64(&b, TL_F_VERSION, cur.to);
			tl_body_str(&b, TL_F_USER, st->login);
			rc = tl_emit(&c, TL_EV_CRED_ACTIVATED, stream, &b, NULL);
			if (rc == 0)
				rc = tl_rx_deliver(ps->rx, &c, st->g.id);
		} else if (st->op == OP_RETIRE &&
		    strcmp(cur.state, TL_ROT_ACTIVE) == 0) {
			char *save = NULL, *h;

			tl_body_u64(&b, TL_F_VERSION, cur.from);
			tl_body_str(&b, TL_F_USER, st->old);
			tl_body_bool(&b, TL_F_FORCED, st->forced);
			if (st->corroborated)
				tl_body_u64(&b, TL_F_SESSIONS_ENDED,
				    st->sessions);
			tl_body_arr(&b, TL_F_CUT_OFF);
			if (st->forced)
				for (h = strtok_r(st->cutoff, ",", &save);
				    h != NULL; h = strtok_r(NULL, ",", &save))
					tl_body_str(&b, NULL, h);
			tl_body_end(&b);
			rc = tl_emit(&c, TL_EV_CRED_RETIRED, stream, &b, NULL);
			if (rc == 0) {
				tl_body_reset(&b);
				tl_body_str(&b, TL_F_GRANT, st->g.id);
				tl_body_u64(&b, TL_F_VERSION, cur.to);
				rc = tl_emit(&c, TL_EV_ROT_COMPLETED, stream, &b,
				    NULL);
			}
		} else if (st->op == OP_ABANDON && cur.from == st->r.from &&
		    cur.to == st->r.to) {
			char why[TL_WHY_MAX];
			struct tl_grant g;

			snprintf(why, sizeof(why), "grant %s", st->g.state);
			if (tl_grant_get(t, &c.p, st->g.id, &g, NULL) == 0)
				snprintf(why, sizeof(why), "grant %s", g.state);
			if (st->old[0] != '\0') {
				tl_body_u64(&b, TL_F_VERSION, st->old_version);
				tl_body_str(&b, TL_F_USER, st->old);
				tl_body_bool(&b, TL_F_FORCED, 0);
				tl_body_arr(&b, TL_F_CUT_OFF);
				tl_body_end(&b);
				tl_body_str(&b, TL_F_REASON, why);
				rc = tl_emit(&c, TL_EV_CRED_RETIRED, stream, &b,
				    NULL);
				tl_body_reset(&b);
				tl_body_str(&b, TL_F_GRANT, st->g.id);
			}
			if (rc == 0) {
				tl_body_u64(&b, TL_F_FROM, cur.from);
				tl_body_u64(&b, TL_F_TO, cur.to);
				tl_body_str(&b, TL_F_REASON, why);
				rc = tl_emit(&c, TL_EV_ROT_ABANDONED, stream, &b,
				    NULL);
			}
		}
		tl_body_free(&b);
		if (rc != 0)
			return rc;
	}
	*cp = c;
	return 0;
}

/* Grants whose credential is older than their max age. */
struct due_arg {
	struct rpass		*ps;
	struct tl_txn		*t;
	const struct tl_proj	*p;
	char			(*due)[201];
	size_t			 n;
	unsigned		 started;	/* by schedule(), this pass */
};

/* Rotations running or about to start on provider (the schedule's cap). */
static unsigned
running_on(struct due_arg *da, const char *provider)
{
	unsigned n = 0;
	size_t i;

	for (i = 0; i < da->ps->n; i++)
		if (strcmp(da->ps->s[i].g.provider, provider) == 0)
			n++;
	for (i = 0; i < da->n; i++) {
		struct tl_grant g;

		if (tl_grant_get(da->t, da->p, da->due[i], &g, NULL) == 0 &&
		    strcmp(g.provider, provider) == 0)
			n++;
	}
	return n;
}

/* Whether g's rotation-window (if any) is open at the pass's now. */
static int
window_open(const struct due_arg *da, const struct tl_grant *g)
{
	char spec[TL_WIN_SPEC_MAX + 1];
	struct tl_win w;
	char why[TL_WHY_MAX];

	tl_grant_window(da->t, da->p, g, spec, sizeof(spec));
	/* apply checked it; one this system cannot read holds nothing. */
	if (spec[0] == '\0' || tl_win_parse(spec, &w, why) != 0)
		return 1;
	return tl_win_open(&w, (int64_t)(da->ps->now / 1000000000u));
}

static int
due_one(const struct tl_grant *g, void *arg)
{
	struct due_arg *da = arg;
	struct tl_rotation r;
	uint64_t due;
	char (*nv)[201];

	da->ps->rx->gathered++;
	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0 || g->intent_seq == 0)
		return 0;
	if (tl_rot_get(da->t, da->p, g->id, &r) == 0)
		return 0;
	/* Its max age past its intent, or its certificates' renewal. */
	if (tl_grant_rotation_due(da->t, da->p, g, &due) != 0 || due == 0 ||
	    due > da->ps->now)
		return 0;
	/*
	 * Due, but held until its window opens (a rotation by hand is
	 * never held: tally rotate starts it itself).
	 */
	if (!window_open(da, g))
		return 0;
	/*
	 * Never more than a few at once per provider: the rest wait.  A
	 * certificate's renewal calls nothing at its CA (the node makes
	 * the key, the issuer signs): a whole wave of them goes at once.
	 */
	if (!tl_grant_renews_certificates(da->t, da->p, g) &&
	    running_on(da, g->provider) >= da->ps->rx->max_rotations)
		return 0;
	if ((nv = realloc(da->due, (da->n + 1) * sizeof(*nv))) == NULL)
		return ENOMEM;
	da->due = nv;
	snprintf(da->due[da->n++], 201, "%s", g->id);
	return 0;
}

/* Rotations a max-credential-age makes due, started in phase 2. */
static int
schedule(struct due_arg *da, struct tl_ctx *c)
{
	size_t i;
	int rc;

	for (i = 0; i < da->n; i++) {
		c->cause = 0;
		c->have_corr = 0;
		rc = tl_dec_rotate(c, da->due[i], 0, "schedule");
		if (rc == TL_EREFUSED || rc == TL_ENOTFOUND)
			continue;
		if (rc != 0)
			return rc;
		da->started++;
	}
	return 0;
}

/* The pass's state: the steps, and the rotations coming due. */
struct rot_pass {
	struct rpass	ps;
	struct due_arg	da;
	int		issue;
};

/* Phase 1: the running rotations' next steps, and those coming due. */
static int
gather(void *arg, struct tl_txn *t, const struct tl_proj *p,
    unsigned *phases)
{
	struct rot_pass *rp = arg;
	struct gather_arg ga = { &rp->ps, t, p };
	size_t i;
	int rc;

	rp->da.ps = &rp->ps;
	rp->da.t = t;
	rp->da.p = p;
	/*
	 * The rotations running (rot/), and the grants whose schedule is
	 * due now: the folds keep them by due time (grs/, grant.h), so a
	 * pass reads no grant at rest.  Projections an older tally built
	 * lack that index until tally rebuild: every grant is read then.
	 */
	if ((rc = tl_rot_each(t, p, gather_one, &ga)) != 0)
		return rc;
	if (tl_grant_due_indexed(t, p))
		rc = tl_grant_each_rotation_due(t, p, rp->ps.now, due_one,
		    &rp->da);
	else {
		tl_rx_unindexed(rp->ps.rx);
		rc = tl_grant_each(t, p, due_one, &rp->da);
	}
	if (rc != 0)
		return rc;
	rp->da.t = NULL;
	rp->da.p = NULL;
	for (i = 0; i < rp->ps.n; i++) {
		int op = rp->ps.s[i].op;

		if (op == OP_ISSUE)
			rp->issue = 1;
		if (op == OP_ISSUE || op == OP_CREATE || op == OP_RETIRE ||
		    op == OP_ABANDON)
			*phases |= TL_RX_OUTCOMES;
	}
	if (rp->da.n > 0 || rp->issue)
		*phases |= TL_RX_INTENTS;
	if (rp->ps.n > 0)
		*phases |= TL_RX_CALLS;
	return 0;
}

static int
intents(void *arg, struct tl_ctx *c)
{
	struct rot_pass *rp = arg;
	int rc;

	if (rp->da.n > 0 && (rc = schedule(&rp->da, c)) != 0)
		return rc;
	return rp->issue ? issue(&rp->ps, c) : 0;
}

/* Phase 3: the steps' driver calls on their providers' sessions. */
static void
calls(void *arg, unsigned *phases)
{
	struct rot_pass *rp = arg;
	struct rpass *ps = &rp->ps;
	struct tl_rx *rx = ps->rx;
	struct tl_rx_prov *pv = NULL;
	struct tl_rx_call *cl = NULL;
	size_t i, j, npv = 0, n = 0;

	for (i = 0; i < ps->n; i++) {
		struct rstep *st = &ps->s[i];

		if (st->op != OP_CREATE && st->op != OP_RETIRE &&
		    st->op != OP_ABANDON)
			continue;
		if (st->ops == NULL && st->rc == 0) {
			/* Issued in this pass: load the provider now. */
			struct tl_txn *rt;
			char driver[64];
			int drop;

			if (tl_log_begin(rx->log, TL_TXN_RDONLY, &rt) == 0) {
				struct tl_proj rpj;

				if (tl_proj_open(rt, &rpj) == 0 &&
				    tl_rx_load_provider(rt, &rpj, rx,
				    st->g.provider, st->g.type, &st->pv, driver,
				    &drop) == 0)
					st->ops = tl_drv_find(driver);
				tl_log_abort(rt);
			}
		}
	}
	pv = tl_secret_calloc(ps->n + 1, sizeof(*pv));
	cl = calloc(ps->n + 1, sizeof(*cl));
	for (i = 0; pv != NULL && cl != NULL && i < ps->n; i++) {
		struct rstep *st = &ps->s[i];

		if (!counts_sessions(st) && (!calls_driver(st) || st->rc != 0 ||
		    st->ops == NULL))
			continue;
		for (j = 0; j < npv; j++)
			if (strcmp(pv[j].id, st->pv.id) == 0)
				break;
		if (j == npv) {
			pv[npv] = st->pv;
			pv[npv++].ops = st->ops;
		}
		cl[n].provider = st->pv.id;
		cl[n].item = st;
		cl[n].why = st->why;
		n++;
	}
	if (pv != NULL && cl != NULL)
		tl_rx_pass_calls(rx, pv, npv, cl, n, 1, TL_RX_LANE_PASS,
		    rotate_call, ps);
	for (i = 0; i < n; i++)
		if (cl[i].admin)
			((struct rstep *)cl[i].item)->rc = cl[i].rc;
	for (i = 0; pv != NULL && i < npv; i++)
		tl_rx_prov_wipe(&pv[i]);
	tl_secret_free(pv);
	free(cl);
	/* Outcomes only when a step was taken (as before the pass). */
	*phases &= ~TL_RX_OUTCOMES;
	for (i = 0; i < ps->n; i++) {
		struct rstep *st = &ps->s[i];

		if (st->op != OP_CREATE && st->op != OP_RETIRE &&
		    st->op != OP_ABANDON)
			continue;
		*phases |= TL_RX_OUTCOMES;
		if ((pv == NULL || cl == NULL) && st->rc == 0 &&
		    calls_driver(st)) {
			st->rc = ENOMEM;
			snprintf(st->why, sizeof(st->why), "%s",
			    tl_strerror(ENOMEM));
		}
		if (st->rc == 0 && st->ops == NULL && calls_driver(st)) {
			st->rc = TL_EDRIVER;
			snprintf(st->why, sizeof(st->why), "provider %s has no "
			    "usable driver", st->g.provider);
		}
		if (st->rc != 0)
			tl_rx_log(rx, TL_RX_WARN, "rotation of %s: %s",
			    st->g.id, st->why);
		else if (st->op == OP_ABANDON)
			tl_rx_log(rx, TL_RX_INFO, "rotation of %s abandoned "
			    "(grant %s)%s%s", st->g.id, st->g.state,
			    st->old[0] ? ": retired login " : "", st->old);
		else
			tl_rx_log(rx, TL_RX_INFO, "rotation of %s: %s v%llu%s",
			    st->g.id, st->op == OP_CREATE ? "activated" :
			    "retired", (unsigned long long)(st->op ==
			    OP_CREATE ? st->r.to : st->r.from), st->forced ?
			    " (forced by deadline)" : "");
	}
}

/*
 * What st changes in TL_ROT_SESSIONS_TABLE: 1, put val (a waiting
 * rotation's count); 2, delete (the rotation ended); 0, nothing.
 */
static int
sessions_note(const struct rstep *st, char *val, size_t len)
{
	if (st->op == OP_WAIT && st->corroborated) {
		snprintf(val, len, "%llu %u", (unsigned long long)st->r.from,
		    st->sessions);
		return 1;
	}
	if ((st->op == OP_RETIRE || st->op == OP_ABANDON) && st->rc == 0)
		return 2;
	return 0;
}

/* Is any of the pass's notes news to the table? */
static int
sessions_changed(struct tl_rx *rx, const struct rpass *ps)
{
	struct tl_txn *t;
	const void *v;
	size_t i, n;
	tl_kv kv;
	int have_table, changed = 0;

	if (tl_log_begin(rx->log, TL_TXN_RDONLY, &t) != 0)
		return 1;
	have_table = tl_kv_open_scratch(t, TL_ROT_SESSIONS_TABLE, &kv) == 0;
	for (i = 0; i < ps->n && !changed; i++) {
		const struct rstep *st = &ps->s[i];
		char val[64];
		int op = sessions_note(st, val, sizeof(val));
		int have = have_table && tl_kv_get(t, kv, st->g.id,
		    strlen(st->g.id), &v, &n) == 0;

		if (op == 1)
			changed = !have || n != strlen(val) ||
			    memcmp(v, val, n) != 0;
		else if (op == 2)
			changed = have;
	}
	tl_log_abort(t);
	return changed;
}

/*
 * Keeps, for tally status, the old login's session count of each
 * waiting rotation in TL_ROT_SESSIONS_TABLE and forgets those of the
 * rotations that ended.  An observation, not an event: it would repeat
 * every pass; a commit only when a count changed.
 */
static void
record_sessions(struct tl_rx *rx, const struct rpass *ps)
{
	struct tl_txn *t;
	tl_kv kv;
	size_t i;
	int rc;

	if (!sessions_changed(rx, ps))
		return;
	if ((rc = tl_log_begin(rx->log, 0, &t)) != 0)
		goto fail;
	if ((rc = tl_kv_open_scratch(t, TL_ROT_SESSIONS_TABLE, &kv)) != 0)
		goto abort;
	for (i = 0; i < ps->n; i++) {
		const struct rstep *st = &ps->s[i];
		char val[64];
		int op = sessions_note(st, val, sizeof(val));

		if (op == 1)
			rc = tl_kv_put(t, kv, st->g.id, strlen(st->g.id), val,
			    strlen(val));
		else if (op == 2)
			rc = tl_kv_del(t, kv, st->g.id, strlen(st->g.id));
		if (rc != 0 && rc != TL_ENOTFOUND)
			goto abort;
	}
	if ((rc = tl_log_commit(t)) == 0)
		return;
	goto fail;
abort:
	tl_log_abort(t);
fail:
	tl_rx_log(rx, TL_RX_WARN, "noting the old logins' sessions: %s",
	    tl_strerror(rc));
}

static const struct tl_rx_pass_def rotate_pass = {
	gather, intents, calls, outcomes
};

int
tl_rx_rotate(struct tl_rx *rx, unsigned *steps, unsigned *waiting)
{
	struct rot_pass rp;
	struct rpass *ps = &rp.ps;
	size_t i;
	int rc;

	memset(&rp, 0, sizeof(rp));
	ps->rx = rx;
	ps->now = tl_rx_now();
	*steps = *waiting = 0;
	rc = tl_rx_pass_run(rx, &rotate_pass, &rp);
	for (i = 0; i < ps->n; i++)
		if (ps->s[i].op == OP_WAIT)
			(*waiting)++;
	if (rc != 0)
		goto out;
	for (i = 0; i < ps->n; i++)
		if ((ps->s[i].op == OP_CREATE || ps->s[i].op == OP_RETIRE ||
		    ps->s[i].op == OP_ABANDON) && ps->s[i].rc == 0)
			(*steps)++;
	/* A rotation started is work: tallyd --once goes on with it. */
	*steps += rp.da.started;
	record_sessions(rx, ps);
	rc = 0;
out:
	for (i = 0; i < ps->n; i++) {
		free(ps->s[i].params);
		tl_secret_wipe(ps->s[i].password, sizeof(ps->s[i].password));
		tl_secret_wipe(ps->s[i].oldpw, sizeof(ps->s[i].oldpw));
		tl_secret_wipe(ps->s[i].handle, sizeof(ps->s[i].handle));
		tl_secret_wipe(ps->s[i].handle_out,
		    sizeof(ps->s[i].handle_out));
		tl_secret_wipe(ps->s[i].pv.password,
		    sizeof(ps->s[i].pv.password));
	}
	tl_secret_free(ps->s);
	free(rp.da.due);
	return rc;
}
