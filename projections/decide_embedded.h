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

/*
 * After module's declaration changed (tally apply): every assignment
 * gets a credential for an instance added, and the grant of an instance
 * withdrawn is revoked (revocation.requested).
 */
int	tl_dec_embedded_sync(struct tl_ctx *c, const char *module);

/*
 * Where tally reaches an embedded instance to copy its data out, and
 * what it copies: its resource, as its user (whose password is the
 * credential tally delivered).  Borrowed for the call.
 */
struct tl_dec_consolidation {
	const char	*host;
	const char	*port;
	const char	*resource;	/* what holds its data, as the driver names it */
	const char	*user;
};

/*
 * tally assign MODULE NODE --consolidate INSTANCE: binds the embedded
 * instance's need to NODE's provider of the same type instead, moving
 * its data there with the move saga of tally rebind --migrate
 * (projections/rebind.h, TL_BIND_CONSOLIDATED): one rebind.started,
 * from "" (the instance), to the provider.  Refused, appending nothing,
 * when module has no such instance, its credential is not issued yet,
 * it is already consolidated or moving (reversible only as another
 * move), the type's driver cannot move data (tl_drv_can's reason),
 * NODE has no provider of the type whose exposure serves it, or more
 * than one (named).
 */
int	tl_dec_consolidate(struct tl_ctx *c, const char *module,
	    const char *node, const char *instance,
	    const struct tl_dec_consolidation *from);

#endif
