/*
 * admin.c - rotating a provider's own admin credential (tally rotate
 * --admin), without ever locking tally out of its provider.
 *
 * The new password is recorded first, encrypted, as the intent
 * (admin.credential.issued).  Then the admin role's password is changed
 * in a session opened with the old one.  Then the provider's assignment
 * is configured again with the new secret, and the rotation completed,
 * in one transaction.  A crash after the change but before that commit
 * finds the old password refused: the intent's password is tried, and
 * when it works the outcome is recorded without changing anything.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/vec.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/rotation.h"
#include "epoch.h"
#include "pass.h"
#include "rx-internal.h"
#include "session.h"

#define PW_MAX	512

struct astep {
	struct tl_rx_job job;	/* first: its session runs on the pool */
	char		 id[140];
	uint64_t	 started, issued;
	char		 type[64];	/* any type the provider grants */
	struct tl_rx_prov pv;
	const struct tl_drv_ops *ops;
	char		 newpw[PW_MAX];
	int		 rc;
	char		 why[TL_WHY_MAX];
};

struct apass {
	struct tl_rx	*rx;
	struct astep	*s;
	size_t		 n, cap;
	unsigned	 steps;		/* changes made */
};

static int
collect(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct apass *ps = arg;

	if (vlen != 16)
		return TL_ECORRUPT;
	if (tl_vec_grow_secret(&ps->s, &ps->cap, ps->n + 1,
	    sizeof(ps->s[0])) != 0)
		return ENOMEM;
	memset(&ps->s[ps->n], 0, sizeof(ps->s[0]));
	snprintf(ps->s[ps->n].id, sizeof(ps->s[0].id), "%s", rest);
	ps->s[ps->n].started = tl_get_be64(val);
	ps->s[ps->n].issued = tl_get_be64((const uint8_t *)val + 8);
	ps->n++;
	return 0;
}

/* The new admin password, from the intent. */
static int
intent(struct tl_rx *rx, struct tl_txn *t, struct astep *st)
{
	struct tl_event ev;
	struct tl_bview v;
	struct tl_bnode n;
	const void *ct;
	size_t len;
	char ad[TL_KEY_MAX];
	int rc;

	if ((rc = tl_log_get(t, st->issued, &ev)) != 0)
		return rc;
	if ((rc = tl_bview_open(&v, ev.body, ev.body_len)) != 0)
		return rc;
	rc = TL_EMALFORMED;
	if (tl_bn_get(v.root, "password", &n) == 0 &&
	    tl_bn_secret(n, &ct, &len) == 0 && len > TL_BOX_OVERHEAD &&
	    len - TL_BOX_OVERHEAD < PW_MAX) {
		snprintf(ad, sizeof(ad), "provider/%s:admin", st->id);
		if ((rc = tl_secret_decrypt(&rx->key, ad, strlen(ad), ct, len,
		    (uint8_t *)st->newpw)) == 0)
			st->newpw[len - TL_BOX_OVERHEAD] = '\0';
	}
	tl_bview_close(&v);
	return rc;
}

/* Phase 2: each new password, recorded encrypted before it is set. */
static int
issue(void *arg, struct tl_ctx *cp)
{
	struct apass *ps = arg;
	struct tl_ctx c = *cp;
	size_t i;
	int rc;

	for (i = 0; i < ps->n; i++) {
		struct astep *st = &ps->s[i];
		uint8_t ct[TL_PASSWORD_MAX + TL_BOX_OVERHEAD];
		char ad[TL_KEY_MAX];
		struct tl_body b;
		char stream[TL_KEY_MAX];

		if (st->issued != 0)
			continue;
		tl_rx_prov_password(ps->rx, &st->pv, st->newpw);
		snprintf(ad, sizeof(ad), "provider/%s:admin", st->id);
		tl_secret_encrypt(&ps->rx->key, ad, strlen(ad), st->newpw,
		    strlen(st->newpw), ct);
		if ((rc = tl_key(stream, "provider/%s", st->id)) != 0)
			return rc;
		c.cause = st->started;
		c.have_corr = 0;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_ID, st->id);
		tl_body_secret(&b, TL_F_PASSWORD, ct, strlen(st->newpw) +
		    TL_BOX_OVERHEAD);
		rc = tl_emit(&c, TL_EV_ADM_ISSUED, stream, &b, &st->issued);
		tl_body_free(&b);
		if (rc != 0)
			return rc;
	}
	*cp = c;
	return 0;
}

/*
 * The change, on a pool thread (pass.h): a session opened with the old
 * password sets the new one.  Touches only st.
 */
static void
change(struct tl_rx_job *j)
{
	struct astep *st = (struct astep *)j;
	struct tl_drv_admin a;
	struct tl_drv_fence fence;
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	void *h = NULL;

	tl_rx_prov_admin(&st->pv, sv, &fence, &a);
	if (st->ops->set_admin_password == NULL) {
		st->rc = TL_EDRIVER;
		snprintf(st->why, sizeof(st->why), "driver %s cannot rotate "
		    "an admin credential", st->ops->decl->name);
		return;
	}
	if ((st->rc = st->ops->open(&a, &h, st->why)) == TL_EAUTH) {
		/* A pass that crashed after the change: is it done? */
		a.password = st->newpw;
		if ((st->rc = st->ops->open(&a, &h, st->why)) == 0) {
			st->ops->close(h);
			snprintf(st->why, sizeof(st->why), "the new admin "
			    "password was already set");
		}
		return;
	}
	if (st->rc != 0)
		return;
	/* The fence, on this session, before the change (epoch.h). */
	if ((st->rc = tl_ep_session(&st->pv, h, st->why)) != 0) {
		st->ops->close(h);
		return;
	}
	st->rc = st->ops->set_admin_password(h, st->pv.user, st->newpw,
	    st->why);
	st->ops->close(h);
}

/* The provider's assignment, configured again with the new secret. */
static int
configure(struct tl_ctx *c, struct tl_rx *rx, struct astep *st)
{
	struct tl_rec r;
	struct tl_bnode set, sec;
	struct tl_body b;
	uint8_t ct[PW_MAX + TL_BOX_OVERHEAD];
	char ad[TL_KEY_MAX], expose[16] = "";
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	size_t i, n = strlen(st->newpw);
	/* The setting the session reads the admin's secret from. */
	const struct tl_drv_setting *as = tl_drv_setting_for(st->ops->decl,
	    TL_DRV_USE_ADMIN_SECRET, 0);
	int rc;

	if (as == NULL)
		return TL_EDRIVER;
	if ((rc = tl_key(k, "a/%s@%s", st->pv.module, st->pv.node)) != 0 ||
	    (rc = tl_key(stream, "assignment/%s@%s", st->pv.module,
	    st->pv.node)) != 0)
		return rc;
	if ((rc = tl_rec_get(c->t, c->p.graph, k, &r)) != 0)
		return rc;
	snprintf(ad, sizeof(ad), "assignment/%s@%s:%s", st->pv.module,
	    st->pv.node, as->name);
	tl_secret_encrypt(&rx->key, ad, strlen(ad), st->newpw, n, ct);
	tl_bn_getstr(r.m, "expose", expose, sizeof(expose));
	/* The same layout as tl_dec_assign writes, secret replaced. */
	tl_body_init(&b);
	tl_body_str(&b, TL_F_MODULE, st->pv.module);
	tl_body_str(&b, TL_F_NODE, st->pv.node);
	tl_body_str(&b, TL_F_EXPOSE, expose);
	tl_body_map(&b, TL_F_SETTINGS);
	if (tl_bn_get(r.m, "settings", &set) == 0)
		for (i = 0; i < tl_bn_len(set); i++) {
			struct tl_bnode kn, vn;
			const char *ks, *vs;
			size_t kl, vl;
			char key[128];

			tl_bn_entry(set, i, &kn, &vn);
			if (tl_bn_str(kn, &ks, &kl) != 0 || kl >= sizeof(key) ||
			    tl_bn_str(vn, &vs, &vl) != 0)
				continue;
			memcpy(key, ks, kl);
			key[kl] = '\0';
			tl_body_strn(&b, key, vs, vl);
		}
	tl_body_end(&b);
	tl_body_map(&b, TL_F_SECRETS);
	if (tl_bn_get(r.m, "secrets", &sec) == 0)
		for (i = 0; i < tl_bn_len(sec); i++) {
			struct tl_bnode kn, vn;
			const char *ks;
			const void *cv;
			size_t kl, cl;
			char key[128];

			tl_bn_entry(sec, i, &kn, &vn);
			if (tl_bn_str(kn, &ks, &kl) != 0 || kl >= sizeof(key) ||
			    tl_bn_secret(vn, &cv, &cl) != 0)
				continue;
			memcpy(key, ks, kl);
			key[kl] = '\0';
			if (strcmp(key, as->name) == 0)
				tl_body_secret(&b, key, ct, n + TL_BOX_OVERHEAD);
			else
				tl_body_secret(&b, key, cv, cl);
		}
	if (tl_bn_get(sec, as->name, &set) != 0)
		tl_body_secret(&b, as->name, ct, n + TL_BOX_OVERHEAD);
	tl_body_end(&b);
	tl_rec_close(&r);
	rc = tl_emit(c, TL_EV_ASSIGN_CONFIGURED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

/* Phase 4: the new secret configured, the rotation completed. */
static int
outcomes(void *arg, struct tl_ctx *cp)
{
	struct apass *ps = arg;
	struct tl_ctx c = *cp;
	size_t i;
	int rc;

	for (i = 0; i < ps->n; i++) {
		struct astep *st = &ps->s[i];
		struct tl_body b;
		char stream[TL_KEY_MAX];

		if (st->rc != 0 || st->newpw[0] == '\0')
			continue;
		c.cause = st->issued;
		c.have_corr = 0;
		if ((rc = configure(&c, ps->rx, st)) != 0)
			return rc;
		if ((rc = tl_key(stream, "provider/%s", st->id)) != 0)
			return rc;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_ID, st->id);
		rc = tl_emit(&c, TL_EV_ADM_COMPLETED, stream, &b, NULL);
		tl_body_free(&b);
		if (rc != 0)
			return rc;
	}
	*cp = c;
	return 0;
}

/* Any type provider id grants: tl_rx_load_provider wants one. */
static int
some_type(struct tl_txn *t, const struct tl_proj *p, const char *id,
    char *type, size_t cap)
{
	struct tl_rec r;
	struct tl_bnode types;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "p/%s", id)) != 0 ||
	    (rc = tl_rec_get(t, p->graph, k, &r)) != 0)
		return rc;
	rc = TL_ENOTFOUND;
	if (tl_bn_get(r.m, "types", &types) == 0 && tl_bn_len(types) > 0)
		rc = tl_bn_getstr(tl_bn_at(types, 0), "type", type, cap);
	tl_rec_close(&r);
	return rc;
}

/*
 * Phase 1: the admin rotations under way, each with its provider's
 * admin side and (once issued) the new password from its intent.
 */
static int
gather(void *arg, struct tl_txn *t, const struct tl_proj *p,
    unsigned *phases)
{
	struct apass *ps = arg;
	size_t i;
	int rc;

	if ((rc = tl_rec_scan(t, p->grants, "adm/", collect, ps)) != 0)
		return rc;
	for (i = 0; i < ps->n; i++) {
		struct astep *st = &ps->s[i];
		char driver[64] = "";
		int drop;

		if (st->issued == 0)
			*phases |= TL_RX_INTENTS;
		if ((st->issued != 0 && (st->rc = intent(ps->rx, t, st)) != 0) ||
		    (st->rc = some_type(t, p, st->id, st->type,
		    sizeof(st->type))) != 0 ||
		    (st->rc = tl_rx_load_provider(t, p, ps->rx, st->id, st->type,
		    &st->pv, driver, &drop)) != 0 ||
		    (st->ops = tl_drv_find(driver)) == NULL) {
			if (st->rc == 0)
				st->rc = TL_EDRIVER;
			snprintf(st->why, sizeof(st->why), "cannot prepare the "
			    "admin rotation of %s: %s", st->id,
			    tl_strerror(st->rc));
		}
		st->pv.ops = st->ops;
		tl_ep_arm(ps->rx, &st->pv);
	}
	if (ps->n > 0)
		*phases |= TL_RX_CALLS | TL_RX_OUTCOMES;
	return 0;
}

/* Phase 3: the changes, on the pool; outcomes only if one was made. */
static void
calls(void *arg, unsigned *phases)
{
	struct apass *ps = arg;
	struct tl_rx_job **jobs;
	size_t i, n = 0;

	if ((jobs = calloc(ps->n + 1, sizeof(*jobs))) == NULL) {
		for (i = 0; i < ps->n; i++)
			if (ps->s[i].rc == 0) {
				ps->s[i].rc = ENOMEM;
				snprintf(ps->s[i].why, sizeof(ps->s[i].why),
				    "%s", tl_strerror(ENOMEM));
			}
	} else {
		for (i = 0; i < ps->n; i++) {
			struct astep *st = &ps->s[i];

			if (st->rc != 0)
				continue;
			st->job.run = change;
			snprintf(st->job.key, sizeof(st->job.key), "%s", st->id);
			jobs[n++] = &st->job;
		}
		tl_rx_pass_jobs(ps->rx, jobs, n);
		free(jobs);
	}
	*phases &= ~TL_RX_OUTCOMES;
	for (i = 0; i < ps->n; i++) {
		struct astep *st = &ps->s[i];

		if (st->rc != 0)
			tl_rx_log(ps->rx, TL_RX_WARN, "admin rotation of %s: "
			    "%s", st->id, st->why);
		else {
			tl_rx_log(ps->rx, TL_RX_INFO, "admin credential of %s "
			    "rotated%s%s", st->id, st->why[0] ? ": " : "",
			    st->why);
			ps->steps++;
			*phases |= TL_RX_OUTCOMES;
		}
	}
}

static const struct tl_rx_pass_def admin_pass = {
	gather, issue, calls, outcomes
};

int
tl_rx_rotate_admin(struct tl_rx *rx, unsigned *steps)
{
	struct apass ps;
	size_t i;
	int rc;

	memset(&ps, 0, sizeof(ps));
	ps.rx = rx;
	rc = tl_rx_pass_run(rx, &admin_pass, &ps);
	*steps = rc == 0 ? ps.steps : 0;
	for (i = 0; i < ps.n; i++) {
		tl_secret_wipe(ps.s[i].newpw, sizeof(ps.s[i].newpw));
		tl_rx_prov_wipe(&ps.s[i].pv);
	}
	tl_secret_free(ps.s);
	return rc;
}
