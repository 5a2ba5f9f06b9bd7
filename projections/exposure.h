/*
 * exposure.h - whom a provider serves, from its assignment's exposure.
 *
 * An assignment's exposure (tally assign --expose) is what the provider
 * is reachable from: local, the machine only, so it serves consumers
 * on its own node; network, the mesh; public, the mesh and beyond (for
 * tally's consumers the same as network); none, nothing outside the
 * module, so it serves no consumer.  The binder's candidates, tally
 * bind and tally rebind, a change of exposure, and status's reasons
 * all ask tl_exposure_serves, so the rule is written once.
 *
 * Reads the graph in the caller's transaction; copies what it keeps.
 */
#ifndef TL_EXPOSURE_H
#define TL_EXPOSURE_H

#include <stddef.h>

#include "proj.h"

/*
 * Does provider (NODE/MODULE id) serve consumer module: its instance on
 * node when node is not NULL or "" (per-instance), else every node the
 * module is assigned to (a shared grant is delivered to all of them)?
 * 1 if it does; 0 if not, with why (TL_WHY_MAX bytes, may be
 * NULL) saying so in words ("node-c/db is exposed local: it serves
 * only consumers on node-c, and shop runs on node-a").  A
 * provider or assignment that cannot be read serves nobody.
 */
int	tl_exposure_serves(struct tl_txn *t, const struct tl_proj *p,
	    const char *provider, const char *module, const char *node,
	    char *why);

/* The exposure of provider's assignment into out[16] ("" if unknown). */
void	tl_exposure_of(struct tl_txn *t, const struct tl_proj *p,
	    const char *provider, char out[16], char pnode[64]);

#endif
