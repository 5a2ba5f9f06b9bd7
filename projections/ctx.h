/*
 * ctx.h - the decision context every decider runs in: the command's
 * write transaction, the projections opened in it, and tl_emit().
 *
 * tl_ctx_begin brings the projections up to the head in t and opens
 * them; the context borrows t and actor (both must outlive it) and owns
 * nothing else, so there is nothing to free: the caller commits or
 * aborts t.  tl_emit appends one event and folds it at once (so the
 * next decision of the same command sees it), after the catalogue
 * (catalogue.h) has accepted its type and the length of each string
 * field: a value too long for the field that keeps it is refused here,
 * TL_ETOOBIG with "TYPE: FIELD is N bytes; the limit is MAX" in why.
 * A refusal returns a core/error.h code (TL_EREFUSED, TL_ENOTFOUND,
 * TL_EINVAL, TL_ETOOBIG, ...) with the reason in c->why (tl_refuse
 * writes it, cut to its size); other errors are core/error.h codes,
 * ENOMEM or LMDB's, with why left as it was.
 *
 * The deciders (decide.c, decide_assign.c, decide_rebind.c,
 * decide_rotate.c, binder.c) include this; nothing here includes them.
 */
#ifndef TL_CTX_H
#define TL_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "core/body.h"
#include "core/log.h"
#include "proj.h"

struct tl_ctx;
/* Called for every event emitted (dry runs print them). */
typedef void (*tl_emit_fn)(struct tl_ctx *c, uint64_t seq, const char *type,
	    const char *stream, const void *body, size_t len);

struct tl_ctx {
	struct tl_txn	*t;
	struct tl_proj	 p;
	const char	*actor;
	uint64_t	 cause;		/* for the next events emitted */
	uint8_t		 corr[TL_ID_LEN];
	int		 have_corr;
	size_t		 emitted;
	/*
	 * Nonzero: the control plane epoch the events are decided at, put
	 * in every body tl_emit finishes as "epoch" (a reactor's pass sets
	 * it: every intent carries the epoch of the leader that made it).
	 */
	uint64_t	 epoch;
	tl_emit_fn	 on_emit;
	void		*arg;
	/* The decider's reason, which may quote a driver's why. */
	char		 why[2 * TL_WHY_MAX];
};

/* Brings the projections up to the head and opens them. */
int	tl_ctx_begin(struct tl_ctx *c, struct tl_txn *t, const char *actor);
/* Moves the projections checkpoint to the head. */
int	tl_ctx_end(struct tl_ctx *c);
int	tl_refuse(struct tl_ctx *c, int code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/*
 * Appends one event (b is finished here, with "epoch" when c->epoch is
 * set), folds it; *seqp optional.
 */
int	tl_emit(struct tl_ctx *c, const char *type, const char *stream,
	    struct tl_body *b, uint64_t *seqp);

/* As tl_emit, for a body already encoded (one canonical msgpack map). */
int	tl_emit_bytes(struct tl_ctx *c, const char *type, const char *stream,
	    const void *body, size_t len, uint64_t *seqp);

/* The grant, or a refusal that says how grants are named. */
struct tl_grant;
int	tl_grant_find(struct tl_ctx *c, const char *grant, struct tl_grant *g);

#endif
