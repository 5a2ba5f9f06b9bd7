/*
 * fault.c - a driver that wraps a real one and injects failures, for
 * tests of the reactors (retries, idempotency, drift handling).
 *
 * It never replaces the real driver: every call that is not failed goes
 * through to it, and "lost" calls go through and then report failure
 * (the provider acted; the reply was lost), which is what a crash
 * between a driver call and the outcome event looks like.
 *
 * Spec (TALLY_FAULT, or the argument of tl_drv_fault_wrap_spec): rules
 * separated by commas, each OP:ACTION, where OP is open, create, check,
 * set_password, fix_privileges, migrate, revoke, freeze, copy,
 * set_admin_password or * (all of them):
 *
 *   fail | unreach | auth | lost	inject on every call
 *   fail=P				... with probability P (0..1)
 *   fail-after=N			calls 1..N pass, every later one fails
 *   fail-first=N			calls 1..N fail, later ones pass
 *   delay=MS				sleep MS milliseconds, then call
 *   drift=missing|credential|privileges	check only: the real check
 *					runs, the drift reported is at
 *					least this bad
 *
 * fail gives TL_EDRIVER, unreach TL_EUNREACH, auth TL_EAUTH, lost
 * TL_EUNREACH after the real call.  crash makes the real call and then
 * ends the process at once (_exit 137, nothing flushed or committed):
 * a process killed between the provider's answer and its outcome, for
 * operations that only take one call (create, fix_privileges ...).
 * Any of the five takes =P, -after=N and -first=N.  Several rules may name one OP; the first that fires
 * wins (delay always applies).  Probabilities come from a PRNG seeded
 * by TALLY_FAULT_SEED (default 1), so a run is reproducible.  Example:
 * TALLY_FAULT="create:fail-after=3,check:unreach=0.2,revoke:lost".
 *
 * Counters are per wrapped driver, not per grant, and not thread-safe:
 * this is for tests.  Up to FAULT_SLOTS drivers can be wrapped at once.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "driver.h"

#define FAULT_SLOTS	8		/* drivers wrapped at once */
#define FAULT_RULES	16

enum f_op { OP_OPEN, OP_CREATE, OP_CHECK, OP_SETPW, OP_FIX, OP_MIGRATE,
	OP_REVOKE, OP_FREEZE, OP_COPY, OP_SETADMIN, OP_N };
static const char *const op_name[OP_N] = { "open", "create", "check",
	"set_password", "fix_privileges", "migrate", "revoke", "freeze",
	"copy", "set_admin_password" };

enum f_kind { K_FAIL, K_UNREACH, K_AUTH, K_LOST, K_DELAY, K_DRIFT,
	K_CRASH };
enum f_when { W_ALWAYS, W_PROB, W_AFTER, W_FIRST };

struct f_rule {
	int		op;		/* OP_* or -1 for all */
	enum f_kind	kind;
	enum f_when	when;
	double		p;
	unsigned long	n;		/* N of -after / -first, or ms */
	enum tl_drv_drift drift;
	char		text[64];	/* as written, for why */
};

struct f_slot {
	int			 used;
	const struct tl_drv_ops	*real;
	struct tl_drv_ops	 ops;
	struct tl_drv_decl	 decl;
	struct f_rule		 rule[FAULT_RULES];
	int			 nrule;
	/* Atomic: a provider's sessions run on several workers at once. */
	_Atomic unsigned long	 calls[OP_N];
	uint64_t		 rng;
};

static struct f_slot slots[FAULT_SLOTS];

/* The handle the wrapper hands out. */
struct f_handle {
	struct f_slot	*s;
	void		*h;
};

static uint64_t
f_rand(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int
kind_rc(enum f_kind k)
{
	return k == K_UNREACH || k == K_LOST ? TL_EUNREACH :
	    k == K_AUTH ? TL_EAUTH : TL_EDRIVER;
}

/*
 * Counts a call of op and decides.  Returns the rule that fires (or
 * NULL); delay rules sleep here and never fire.
 */
static const struct f_rule *
f_decide(struct f_slot *s, int op)
{
	const struct f_rule *r, *hit = NULL;
	unsigned long call = ++s->calls[op];
	struct timespec ts;
	int i, fire;

	for (i = 0; i < s->nrule; i++) {
		r = &s->rule[i];
		if (r->op != -1 && r->op != op)
			continue;
		if (r->kind == K_DELAY) {
			ts.tv_sec = (time_t)(r->n / 1000);
			ts.tv_nsec = (long)(r->n % 1000) * 1000000L;
			while (nanosleep(&ts, &ts) != 0)
				;
			continue;
		}
		switch (r->when) {
		case W_ALWAYS:
			fire = 1;
			break;
		case W_PROB:
			fire = (double)(f_rand(&s->rng) >> 11) / 9007199254740992.0
			    < r->p;
			break;
		case W_AFTER:
			fire = call > r->n;
			break;
		default:
			fire = call <= r->n;
			break;
		}
		if (fire && hit == NULL)
			hit = r;
	}
	return hit;
}

static int
f_why(char *why, const struct f_rule *r, int op, unsigned long call, int rc)
{
	if (why != NULL)
		snprintf(why, TL_WHY_MAX, "fault injected: %s (%s call %lu)",
		    r->text, op_name[op], call);
	return rc;
}

/* "crash": the process ends as a SIGKILL would end it, after the call. */
static int
f_crash(void)
{
	_exit(137);
}

/* The prologue of each handle op: a fault before the call, or none. */
#define F_BEFORE(fh, op, why) do {					\
	const struct f_rule *r_ = f_decide((fh)->s, (op));		\
	if (r_ != NULL && r_->kind != K_LOST && r_->kind != K_DRIFT &&	\
	    r_->kind != K_CRASH)					\
		return f_why((why), r_, (op), (fh)->s->calls[(op)],	\
		    kind_rc(r_->kind));					\
	lost_ = r_ != NULL && (r_->kind == K_LOST ||			\
	    r_->kind == K_CRASH) ? r_ : NULL;				\
	drift_ = r_ != NULL && r_->kind == K_DRIFT ? r_ : NULL;		\
} while (0)

/* After the real call: a lost reply turns success into TL_EUNREACH. */
#define F_AFTER(fh, op, rc, why)					\
	(lost_ != NULL && lost_->kind == K_CRASH ? f_crash() :		\
	lost_ != NULL && (rc) == 0 ? f_why((why), lost_, (op),		\
	    (fh)->s->calls[(op)], TL_EUNREACH) : (rc))

static int
f_open_slot(struct f_slot *s, const struct tl_drv_admin *a, void **hp,
    char *why)
{
	const struct f_rule *r;
	struct f_handle *fh;
	int rc;

	*hp = NULL;
	r = f_decide(s, OP_OPEN);
	if (r != NULL && r->kind != K_LOST && r->kind != K_DRIFT &&
	    r->kind != K_CRASH)
		return f_why(why, r, OP_OPEN, s->calls[OP_OPEN],
		    kind_rc(r->kind));
	if ((fh = calloc(1, sizeof(*fh))) == NULL)
		return TL_EDRIVER;
	fh->s = s;
	if ((rc = s->real->open(a, &fh->h, why)) != 0) {
		free(fh);
		return rc;
	}
	if (r != NULL && r->kind == K_LOST) {
		s->real->close(fh->h);
		free(fh);
		return f_why(why, r, OP_OPEN, s->calls[OP_OPEN], TL_EUNREACH);
	}
	*hp = fh;
	return 0;
}

static void
f_close(void *h)
{
	struct f_handle *fh = h;

	if (fh == NULL)
		return;
	fh->s->real->close(fh->h);
	free(fh);
}

static int
f_create(void *h, const struct tl_drv_grant *g, char *why)
{
	struct f_handle *fh = h;
	const struct f_rule *lost_, *drift_;
	int rc;

	F_BEFORE(fh, OP_CREATE, why);
	(void)drift_;
	rc = fh->s->real->create(fh->h, g, why);
	return F_AFTER(fh, OP_CREATE, rc, why);
}

static int
f_check(void *h, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	struct f_handle *fh = h;
	const struct f_rule *lost_, *drift_;
	int rc;

	F_BEFORE(fh, OP_CHECK, why);
	rc = fh->s->real->check(fh->h, g, ep, drift, why);
	if (rc == 0 && drift_ != NULL && *drift < drift_->drift) {
		*drift = drift_->drift;
		f_why(why, drift_, OP_CHECK, fh->s->calls[OP_CHECK], 0);
	}
	return F_AFTER(fh, OP_CHECK, rc, why);
}

static int
f_set_password(void *h, const struct tl_drv_grant *g, char *why)
{
	struct f_handle *fh = h;
	const struct f_rule *lost_, *drift_;
	int rc;

	F_BEFORE(fh, OP_SETPW, why);
	(void)drift_;
	rc = fh->s->real->set_password(fh->h, g, why);
	return F_AFTER(fh, OP_SETPW, rc, why);
}

static int
f_fix_privileges(void *h, const struct tl_drv_grant *g, char *why)
{
	struct f_handle *fh = h;
	const struct f_rule *lost_, *drift_;
	int rc;

	F_BEFORE(fh, OP_FIX, why);
	(void)drift_;
	rc = fh->s->real->fix_privileges(fh->h, g, why);
	return F_AFTER(fh, OP_FIX, rc, why);
}

/* "lost": the admin password changed, and the reply never came. */
static int
f_set_admin_password(void *h, const char *user, const char *password,
    char *why)
{
	struct f_handle *fh = h;
	const struct f_rule *lost_, *drift_;
	int rc;

	F_BEFORE(fh, OP_SETADMIN, why);
	(void)drift_;
	rc = fh->s->real->set_admin_password(fh->h, user, password, why);
	return F_AFTER(fh, OP_SETADMIN, rc, why);
}


static int
f_size(void *h, const struct tl_drv_grant *g, uint64_t *bytes, char *why)
{
	struct f_handle *fh = h;

	return fh->s->real->size(fh->h, g, bytes, why);
}


/* Passed through: a corroboration is no step a fault rule names. */
static int
f_sessions(void *h, const struct tl_drv_grant *g, unsigned *count, char *why)
{
	struct f_handle *fh = h;

	return fh->s->real->sessions(fh->h, g, count, why);
}

/* The CA's operations: through to the real driver, with its handle. */
static int
f_sign(void *h, const struct tl_drv_grant *g, const char *csr, char **cert,
    struct tl_drv_cert *info, char *why)
{
	struct f_handle *fh = h;

	return fh->s->real->sign(fh->h, g, csr, cert, info, why);
}

static int
f_crl(void *h, const char *const *serials, size_t n, uint64_t number,
    char **crl, struct tl_drv_crl *info, char *why)
{
	struct f_handle *fh = h;

	return fh->s->real->crl(fh->h, serials, n, number, crl, info, why);
}

/* A rotation's new credential: faults of "create" apply to it. */
static int
f_add_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	struct f_handle *fh = h;
	const struct f_rule *lost_, *drift_;
	int rc;

	F_BEFORE(fh, OP_CREATE, why);
	(void)drift_;
	rc = fh->s->real->add_credential(fh->h, g, why);
	return F_AFTER(fh, OP_CREATE, rc, why);
}

static int
f_retire_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	struct f_handle *fh = h;

	return fh->s->real->retire_credential(fh->h, g, why);
}

/* Passed through: a preview before tally acts, no step of a saga. */
static int
f_loss(void *h, const struct tl_drv_grant *g, int drop, int *loses,
    char *why)
{
	struct f_handle *fh = h;

	return fh->s->real->loss(fh->h, g, drop, loses, why);
}

/* Passed through: it reads only, before tally adopt records anything. */
static int
f_find_marked(void *h, const struct tl_drv_name_in *in, const char *from_mesh,
    struct tl_drv_names *out, char *why)
{
	struct f_handle *fh = h;

	return fh->s->real->find_marked(fh->h, in, from_mesh, out, why);
}

static int
f_revoke(void *h, const struct tl_drv_grant *g, int drop, char *why)
{
	struct f_handle *fh = h;
	const struct f_rule *lost_, *drift_;
	int rc;

	F_BEFORE(fh, OP_REVOKE, why);
	(void)drift_;
	rc = fh->s->real->revoke(fh->h, g, drop, why);
	return F_AFTER(fh, OP_REVOKE, rc, why);
}

/* The fence passes through: faults are injected into the grants' ops. */
static int
f_fence(void *h, const struct tl_drv_fence *want,
    struct tl_drv_fence_held *held, char *why)
{
	struct f_handle *fh = h;

	return fh->s->real->fence(fh->h, want, held, why);
}

static int
f_freeze(void *h, const struct tl_drv_grant *g, int on, char *why)
{
	struct f_handle *fh = h;
	const struct f_rule *lost_, *drift_;
	int rc;

	F_BEFORE(fh, OP_FREEZE, why);
	(void)drift_;
	rc = fh->s->real->freeze(fh->h, g, on, why);
	return F_AFTER(fh, OP_FREEZE, rc, why);
}

static int
f_copy_slot(struct f_slot *s, const struct tl_drv_admin *from,
    const struct tl_drv_grant *gf, const struct tl_drv_admin *to,
    const struct tl_drv_grant *gt, char *tables, size_t cap, char *why)
{
	struct f_handle fh = { s, NULL };
	const struct f_rule *lost_, *drift_;
	int rc;

	F_BEFORE(&fh, OP_COPY, why);
	(void)drift_;
	rc = s->real->copy(from, gf, to, gt, tables, cap, why);
	return F_AFTER(&fh, OP_COPY, rc, why);
}

static int
f_migrate_slot(struct f_slot *s, const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, const struct tl_drv_migration *m,
    int *already, char *why, int *line)
{
	struct f_handle fh = { s, NULL };
	const struct f_rule *lost_, *drift_;
	int rc;

	*line = 0;
	*already = 0;
	F_BEFORE(&fh, OP_MIGRATE, why);
	(void)drift_;
	rc = s->real->migrate(ep, g, m, already, why, line);
	return F_AFTER(&fh, OP_MIGRATE, rc, why);
}

/* open and migrate carry no handle: one trampoline per slot. */
#define F_SLOT_FNS(i)							\
static int								\
f_open_##i(const struct tl_drv_admin *a, void **hp, char *why)		\
{									\
	return f_open_slot(&slots[i], a, hp, why);			\
}									\
static int								\
f_migrate_##i(const struct tl_drv_endpoint *ep,				\
    const struct tl_drv_grant *g, const struct tl_drv_migration *m,	\
    int *already, char *why, int *line)					\
{									\
	return f_migrate_slot(&slots[i], ep, g, m, already, why, line);	\
}									\
static int								\
f_copy_##i(const struct tl_drv_admin *from,				\
    const struct tl_drv_grant *gf, const struct tl_drv_admin *to,	\
    const struct tl_drv_grant *gt, char *tables, size_t cap, char *why)	\
{									\
	return f_copy_slot(&slots[i], from, gf, to, gt, tables, cap,	\
	    why);							\
}
F_SLOT_FNS(0)
F_SLOT_FNS(1)
F_SLOT_FNS(2)
F_SLOT_FNS(3)
F_SLOT_FNS(4)
F_SLOT_FNS(5)
F_SLOT_FNS(6)
F_SLOT_FNS(7)

static int (*const open_fn[FAULT_SLOTS])(const struct tl_drv_admin *,
    void **, char *) = { f_open_0, f_open_1, f_open_2, f_open_3,
	f_open_4, f_open_5, f_open_6, f_open_7 };
static int (*const migrate_fn[FAULT_SLOTS])(const struct tl_drv_endpoint *,
    const struct tl_drv_grant *, const struct tl_drv_migration *, int *,
    char *, int *) = {
	f_migrate_0, f_migrate_1, f_migrate_2, f_migrate_3,
	f_migrate_4, f_migrate_5, f_migrate_6, f_migrate_7 };
static int (*const copy_fn[FAULT_SLOTS])(const struct tl_drv_admin *,
    const struct tl_drv_grant *, const struct tl_drv_admin *,
    const struct tl_drv_grant *, char *, size_t, char *) = {
	f_copy_0, f_copy_1, f_copy_2, f_copy_3,
	f_copy_4, f_copy_5, f_copy_6, f_copy_7 };

/* Parses one "OP:ACTION[=VALUE]" into r; 0 or -1 with why. */
static int
parse_rule(const char *text, size_t len, struct f_rule *r, char *why)
{
	static const struct {
		const char *name;
		enum f_kind kind;
	} kinds[] = { { "fail", K_FAIL }, { "unreach", K_UNREACH },
	    { "auth", K_AUTH }, { "lost", K_LOST }, { "crash", K_CRASH } };
	char buf[64], *colon, *act, *eq, *end, *val;
	size_t i, kl;
	int op;

	if (len == 0 || len >= sizeof(buf))
		goto bad;
	memcpy(buf, text, len);
	buf[len] = '\0';
	memset(r, 0, sizeof(*r));
	snprintf(r->text, sizeof(r->text), "%s", buf);
	if ((colon = strchr(buf, ':')) == NULL)
		goto bad;
	*colon = '\0';
	act = colon + 1;
	if (strcmp(buf, "*") == 0)
		op = -1;
	else {
		for (op = 0; op < OP_N; op++)
			if (strcmp(buf, op_name[op]) == 0)
				break;
		if (op == OP_N)
			goto bad;
	}
	r->op = op;
	if ((eq = strchr(act, '=')) != NULL)
		*eq = '\0';
	val = eq != NULL ? eq + 1 : NULL;

	if (strcmp(act, "delay") == 0) {
		if (val == NULL)
			goto bad;
		r->kind = K_DELAY;
		r->n = strtoul(val, &end, 10);
		if (*val < '0' || *val > '9' || *end != '\0' || r->n > 60000)
			goto bad;
		return 0;
	}
	if (strcmp(act, "drift") == 0) {
		if (op != OP_CHECK || val == NULL)
			goto bad;
		r->kind = K_DRIFT;
		r->when = W_ALWAYS;
		if (strcmp(val, "missing") == 0)
			r->drift = TL_DRIFT_MISSING;
		else if (strcmp(val, "credential") == 0)
			r->drift = TL_DRIFT_CREDENTIAL;
		else if (strcmp(val, "privileges") == 0)
			r->drift = TL_DRIFT_PRIVILEGES;
		else
			goto bad;
		return 0;
	}
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		kl = strlen(kinds[i].name);
		if (strncmp(act, kinds[i].name, kl) != 0)
			continue;
		r->kind = kinds[i].kind;
		if (act[kl] == '\0') {
			if (val == NULL) {
				r->when = W_ALWAYS;
				return 0;
			}
			r->when = W_PROB;
			r->p = strtod(val, &end);
			if (*val == '\0' || *end != '\0' || r->p < 0 ||
			    r->p > 1)
				goto bad;
			return 0;
		}
		if (strcmp(act + kl, "-after") == 0)
			r->when = W_AFTER;
		else if (strcmp(act + kl, "-first") == 0)
			r->when = W_FIRST;
		else
			goto bad;
		if (val == NULL || *val < '0' || *val > '9')
			goto bad;
		r->n = strtoul(val, &end, 10);
		if (*end != '\0')
			goto bad;
		return 0;
	}
bad:
	if (why != NULL)
		snprintf(why, TL_WHY_MAX, "TALLY_FAULT: bad rule '%.*s' (want "
		    "OP:fail|unreach|auth|lost|crash[=P|-after=N|-first=N], "
		    "OP:delay=MS or check:drift=KIND)", (int)len, text);
	return -1;
}

const struct tl_drv_ops *
tl_drv_fault_wrap_spec(const struct tl_drv_ops *real, const char *spec,
    char *why)
{
	const char *p, *e, *seed;
	struct f_slot *s = NULL;
	int i;

	if (real == NULL) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "no driver to wrap");
		return NULL;
	}
	if (spec == NULL || *spec == '\0')
		return real;
	for (i = 0; i < FAULT_SLOTS; i++)
		if (!slots[i].used) {
			s = &slots[i];
			break;
		}
	if (s == NULL) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "more than %d drivers "
			    "wrapped", FAULT_SLOTS);
		return NULL;
	}
	memset(s, 0, sizeof(*s));
	for (p = spec; *p != '\0'; p = *e == ',' ? e + 1 : e) {
		e = strchr(p, ',');
		if (e == NULL)
			e = p + strlen(p);
		if (e == p)
			continue;
		if (s->nrule == FAULT_RULES) {
			if (why != NULL)
				snprintf(why, TL_WHY_MAX, "TALLY_FAULT: more "
				    "than %d rules", FAULT_RULES);
			return NULL;
		}
		if (parse_rule(p, (size_t)(e - p), &s->rule[s->nrule],
		    why) != 0)
			return NULL;
		if ((s->rule[s->nrule].op == OP_MIGRATE && real->migrate ==
		    NULL) || (s->rule[s->nrule].op == OP_COPY && real->copy ==
		    NULL) || (s->rule[s->nrule].op == OP_FREEZE &&
		    real->freeze == NULL)) {
			if (why != NULL)
				snprintf(why, TL_WHY_MAX, "TALLY_FAULT: driver "
				    "%s has no %s", real->decl->name,
				    op_name[s->rule[s->nrule].op]);
			return NULL;
		}
		s->nrule++;
	}
	seed = getenv("TALLY_FAULT_SEED");
	s->rng = seed != NULL && *seed != '\0' ? strtoull(seed, NULL, 10) : 1;
	s->real = real;
	/*
	 * The real driver's declaration, less the bulk check (a rule on
	 * check applies grant by grant: no bulk behind its back).
	 */
	s->decl = *real->decl;
	s->decl.caps &= ~TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK_BULK);
	s->ops = *real;
	s->ops.decl = &s->decl;
	s->ops.open = open_fn[s - slots];
	s->ops.close = f_close;
	s->ops.create = f_create;
	s->ops.check = f_check;
	s->ops.check_bulk = NULL;
	s->ops.set_password = f_set_password;
	s->ops.fix_privileges = f_fix_privileges;
	s->ops.migrate = real->migrate != NULL ? migrate_fn[s - slots] : NULL;
	s->ops.revoke = f_revoke;
	s->ops.size = real->size != NULL ? f_size : NULL;
	s->ops.set_admin_password = real->set_admin_password != NULL ?
	    f_set_admin_password : NULL;
	s->ops.freeze = real->freeze != NULL ? f_freeze : NULL;
	s->ops.copy = real->copy != NULL ? copy_fn[s - slots] : NULL;
	s->ops.add_credential = real->add_credential != NULL ?
	    f_add_credential : NULL;
	s->ops.retire_credential = real->retire_credential != NULL ?
	    f_retire_credential : NULL;
	s->ops.sessions = real->sessions != NULL ? f_sessions : NULL;
	s->ops.fence = real->fence != NULL ? f_fence : NULL;
	s->ops.loss = real->loss != NULL ? f_loss : NULL;
	s->ops.find_marked = real->find_marked != NULL ? f_find_marked :
	    NULL;
	/* Every operation that takes a handle is wrapped (prepare takes none). */
	s->ops.sign = real->sign != NULL ? f_sign : NULL;
	s->ops.crl = real->crl != NULL ? f_crl : NULL;
	s->used = 1;
	return &s->ops;
}

const struct tl_drv_ops *
tl_drv_fault_wrap(const struct tl_drv_ops *real)
{
	return tl_drv_fault_wrap_spec(real, getenv("TALLY_FAULT"), NULL);
}
