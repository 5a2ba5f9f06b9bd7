/*
 * decide_derive.h - a node's inventory (tally node report --inventory)
 * and the provider settings derived from it (a manifest's provides:
 * TYPE: settings: KEY: {from-node: ...}), decided in decide_derive.c.
 * The context and its errors are ctx.h's; a refusal appends nothing.
 */
#ifndef TL_DECIDE_DERIVE_H
#define TL_DECIDE_DERIVE_H

#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

#define TL_INV_DISKS_MAX	32

/* What a node has; sizes in bytes. */
struct tl_inventory {
	uint64_t	 memory;
	uint64_t	 cpus;
	size_t		 ndisks;
	struct {
		char	 path[256];
		uint64_t size;
	}		 disks[TL_INV_DISKS_MAX];
};

/*
 * Records node.inventoried for node (refused for a node that does not
 * exist or is lost; nothing appended when it is the inventory already
 * recorded), then recomputes the derived settings of every assignment
 * on node (tl_dec_derive).
 */
int	tl_dec_node_inventory(struct tl_ctx *c, const char *node,
	    const struct tl_inventory *inv);

/*
 * Composes module@node's derived settings from its declaration and its
 * node's latest inventory, the operator's own setting of a key winning
 * (recorded as overridden), and records assignment.derived when that
 * differs from what was recorded (nothing when the module derives
 * nothing, or there is no such assignment).
 */
int	tl_dec_derive(struct tl_ctx *c, const char *module, const char *node);

#endif
