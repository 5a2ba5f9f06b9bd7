/*
 * decide_rotate.h - deciders of credential rotation (tally rotate,
 * rotate --admin, ack).  Run in a decision context (ctx.h); errors and
 * refusals as there.  The strings passed in are borrowed for the call;
 * *acked is the caller's.
 */
#ifndef TL_DECIDE_ROTATE_H
#define TL_DECIDE_ROTATE_H

#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

/*
 * tally rotate: starts a rotation of grant (refused while one runs, with
 * the reason).  deadline_ns, if not 0, is how long after the start the
 * old credential is retired even if holders have not acknowledged.
 */
int	tl_dec_rotate(struct tl_ctx *c, const char *grant, uint64_t deadline_ns,
	    const char *reason);
/* tally rotate --admin: the provider's own admin credential. */
int	tl_dec_rotate_admin(struct tl_ctx *c, const char *provider);
/* tally ack: node's module runs with version of its credentials. */
int	tl_dec_ack(struct tl_ctx *c, const char *node, const char *module,
	    uint64_t version, size_t *acked);

#endif
