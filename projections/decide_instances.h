/*
 * decide_instances.h - how many instances of a module the mesh may run
 * (a manifest's instances:), decided in decide_instances.c.  The
 * context and its errors are ctx.h's: each returns 0, or a refusal
 * (tl_refuse, TL_EREFUSED with the context's reason) naming what is in
 * the way; nothing is appended on a refusal.
 */
#ifndef TL_DECIDE_INSTANCES_H
#define TL_DECIDE_INSTANCES_H

#include <stddef.h>

#include "ctx.h"

/*
 * instances: (decide_instances.c).  tl_dec_instances_check refuses a
 * new assignment of module on node that its declaration forbids: a
 * second one of a one-per-mesh module (naming the first; leaving, when
 * not NULL, is a node the module is leaving in the same command), or a
 * one-per-node kind beside another module on node that provides one of
 * the same types.  tl_dec_instances_declared refuses a declaration
 * (module.declared body) that the assignments already there break.
 */
int	tl_dec_instances_check(struct tl_ctx *c, const char *module,
	    const char *node, const char *leaving);
int	tl_dec_instances_declared(struct tl_ctx *c, const char *module,
	    const void *body, size_t len);

#endif
