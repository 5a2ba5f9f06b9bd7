/*
 * decide_rebind.h - deciders that move grants and providers (tally
 * rebind, tally provider move).  Run in a decision context (ctx.h);
 * errors and refusals as there.  The strings and settings passed in are
 * borrowed for the call; nothing is kept or allocated past it.
 */
#ifndef TL_DECIDE_REBIND_H
#define TL_DECIDE_REBIND_H

#include <stddef.h>

#include "ctx.h"
#include "decide_assign.h"

/*
 * tally rebind: moves grant to provider with its data (the saga is in
 * rebind.h).  Without migrate it is refused, the refusal saying what it
 * would do; refused too while the grant rotates or already moves.
 */
int	tl_dec_rebind(struct tl_ctx *c, const char *grant, const char *provider,
	    int migrate);
/*
 * tally provider move: provider id now runs on node.  It keeps its id
 * and its bindings; its assignment moves with it (set: the settings,
 * secrets already encrypted for the new assignment); every provisioned
 * grant it serves is rotated, reason "provider moved", which delivers
 * the new routable name to every holder.
 */
int	tl_dec_provider_move(struct tl_ctx *c, const char *id, const char *node,
	    const char *expose, const struct tl_setting *set, size_t nset);
/*
 * tally rebind GRANT PROVIDER --empty (decide_rebind.c): a lost grant
 * bound to PROVIDER afresh: binding.made (reason TL_BIND_EMPTY) and a
 * new grant.requested: a new, empty resource, nothing copied.  Refused
 * for a grant that is not lost (its data moves with --migrate).
 */
int	tl_dec_rebind_empty(struct tl_ctx *c, const char *grant,
	    const char *provider);

#endif
