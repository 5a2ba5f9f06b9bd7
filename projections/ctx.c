/*
 * ctx.c - the decision context, the catalogue's gate and tl_emit (ctx.h).
 */
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "catalogue.h"
#include "ctx.h"
#include "grant.h"

int
tl_ctx_begin(struct tl_ctx *c, struct tl_txn *t, const char *actor)
{
	int rc;

	memset(c, 0, sizeof(*c));
	c->t = t;
	c->actor = actor;
	if ((rc = tl_proj_catchup(t, 0)) != 0)
		return rc;
	return tl_proj_open(t, &c->p);
}

int
tl_ctx_end(struct tl_ctx *c)
{
	uint64_t last;
	int rc;

	if ((rc = tl_log_last(c->t, &last, NULL)) != 0)
		return rc;
	return tl_ckpt_set(c->t, TL_PROJ_CKPT, last);
}

int
tl_refuse(struct tl_ctx *c, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	return code;
}

/*
 * The catalogue's word on an event about to be appended: a type it
 * does not list, or a string longer than the field that keeps it, is
 * refused here, where it is decided, with the field and its limit; it
 * would otherwise be folded as "" (or make the fold fail later).
 */
static int
cat_gate(struct tl_ctx *c, const char *type, const void *body, size_t len)
{
	const struct tl_cat_event *e = tl_cat_find(type);
	struct tl_bview v;
	const char *field = NULL;
	size_t max = 0, got = 0;
	int rc;

	if (e == NULL)
		return tl_refuse(c, TL_EINVAL, "event type %s is not in the "
		    "catalogue (projections/catalogue.c)", type);
	if (e->limits[0].name == NULL)
		return 0;
	if ((rc = tl_bview_open(&v, body, len)) != 0)
		return rc;
	rc = tl_cat_check(e, v.root, &field, &max, &got);
	tl_bview_close(&v);
	if (rc == TL_ETOOBIG)
		return tl_refuse(c, TL_ETOOBIG, "%s: %s is %zu bytes; the "
		    "limit is %zu", type, field, got, max);
	return rc;
}

int
tl_emit_bytes(struct tl_ctx *c, const char *type, const char *stream,
    const void *body, size_t len, uint64_t *seqp)
{
	struct tl_append a = { 0 };
	struct tl_event ev;
	uint64_t seq;
	int rc;

	if ((rc = cat_gate(c, type, body, len)) != 0)
		return rc;
	a.type = type;
	a.stream = stream;
	a.expect = TL_VER_ANY;	/* the write lock serialises deciders */
	a.cause = c->cause;
	a.corr = c->have_corr ? c->corr : NULL;
	a.actor = c->actor;
	a.body = body;
	a.body_len = len;
	if ((rc = tl_append(c->t, &a, &seq, NULL)) != 0)
		return rc;
	if ((rc = tl_log_get(c->t, seq, &ev)) != 0)
		return rc;
	if (!c->have_corr) {
		/* One command, one correlation: its first event's id. */
		memcpy(c->corr, ev.id, TL_ID_LEN);
		c->have_corr = 1;
	}
	if ((rc = tl_proj_apply(c->t, &c->p, &ev)) != 0)
		return rc;
	c->emitted++;
	if (c->on_emit != NULL)
		c->on_emit(c, seq, type, stream, body, len);
	if (seqp != NULL)
		*seqp = seq;
	return 0;
}

int
tl_emit(struct tl_ctx *c, const char *type, const char *stream,
    struct tl_body *b, uint64_t *seqp)
{
	const void *body;
	size_t len;
	int rc;

	if (c->epoch != 0)
		tl_body_u64(b, TL_F_EPOCH, c->epoch);
	if ((rc = tl_body_finish(b, &body, &len)) != 0)
		return rc;
	return tl_emit_bytes(c, type, stream, body, len, seqp);
}

int
tl_grant_find(struct tl_ctx *c, const char *grant, struct tl_grant *g)
{
	int rc;

	if ((rc = tl_grant_get(c->t, &c->p, grant, g, NULL)) == TL_ENOTFOUND)
		return tl_refuse(c, TL_ENOTFOUND, "no grant %s (grants are "
		    "MODULE/REQUIREMENT, or MODULE/REQUIREMENT@NODE per "
		    "instance: see tally grants)", grant);
	return rc;
}
