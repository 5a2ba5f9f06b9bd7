/*
 * decide_embedded.h - a module's embedded private instances (a
 * manifest's embedded:), decided in decide_embedded.c.  The context and
 * its errors are ctx.h's (TL_ENOTFOUND: no such module record; LMDB's).
 */
#ifndef TL_DECIDE_EMBEDDED_H
#define TL_DECIDE_EMBEDDED_H

#include "ctx.h"

/*
 * Requests the credential of every embedded instance of module on node
 * that has none yet: one grant.requested per instance, grant
 * MODULE/INSTANCE@NODE with scope TL_GRANT_SCOPE_EMBEDDED and no
 * provider (projections/grant.h).  The module runs the instance; tally
 * only generates its password (reactors/provision.c) and delivers it to
 * the assignment; nothing binds to it.
 */
int	tl_dec_embedded_request(struct tl_ctx *c, const char *module,
	    const char *node);

#endif
