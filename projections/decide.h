/*
 * decide.h - the deciders: (state, command) -> events, or a refusal.
 *
 * Every decider runs inside one write transaction: it reads the
 * projections, validates, and appends through tl_emit(), which folds
 * each event into the projections at once so the next decision in the
 * same command sees it.  Nothing here does I/O beyond the transaction;
 * a refusal returns TL_EREFUSED (or TL_ENOTFOUND) with the reason in
 * ctx->why, and the caller aborts the transaction: nothing is appended.
 *
 * Bindings are decided here, at command time, by the binder: see
 * ARCHITECTURE.md ("Why binding is a command-time rule").
 *
 * This header is the deciders' one public face: the context (ctx.h),
 * the binder (binder.h) and each decider file's header, then the
 * deciders of decide.c (nodes, declarations, repair, purge, restore).
 * The decider files include the headers they call, never this one.
 * Declarations passed in are borrowed for the call.
 */
#ifndef TL_DECIDE_H
#define TL_DECIDE_H

#include <stddef.h>
#include <stdint.h>

#include "binder.h"
#include "ctx.h"
#include "decide_assign.h"
#include "decide_derive.h"
#include "decide_instances.h"
#include "decide_rebind.h"
#include "decide_rotate.h"

/* Commands. */
/*
 * tally node add: pubkey, the node's X25519 key; signkey, its Ed25519
 * key, and cpkey, the control plane's (tl_secret_cp_keypair: what the
 * node's key file was given to check its queue's notices against):
 * either may be NULL, none.
 */
int	tl_dec_node_add(struct tl_ctx *c, const char *name,
	    const char *routable, const uint8_t pubkey[32],
	    const uint8_t signkey[32], const uint8_t cpkey[32]);
/*
 * node.key-added (tally node rekey): a signing key for a node added
 * without one, and/or the control plane's key its key file now holds
 * (NULL: not in this event).
 */
int	tl_dec_node_key_add(struct tl_ctx *c, const char *name,
	    const uint8_t signkey[32], const uint8_t cpkey[32]);
int	tl_dec_node_rm(struct tl_ctx *c, const char *name);

/* A module as declared by a manifest, bodies already encoded. */
/* A migration file, copied into the log content-addressed by checksum. */
struct tl_decl_mig {
	const char	*file;		/* NNN_description.sql */
	char		 checksum[65];	/* BLAKE2b-256, hex */
	const void	*content;
	size_t		 len;
};
struct tl_decl_req {
	const char	*name;
	const void	*body;
	size_t		 len;
	const char	*file;
	int		 line;
	const struct tl_decl_mig *migs;	/* in order */
	size_t		 nmigs;
};
struct tl_decl {
	const char		*name;
	const void		*body;	/* the module.declared body */
	size_t			 len;
	const char		*file;
	int			 line;
	const struct tl_decl_req *reqs;
	size_t			 nreqs;
};
int	tl_dec_apply(struct tl_ctx *c, const struct tl_decl *d);

/* tally purge: destroy a revoked grant's retained data (tallyd does it). */
int	tl_dec_purge(struct tl_ctx *c, const char *grant);
/* tally restore: take a retained grant back, with a new credential. */
int	tl_dec_restore(struct tl_ctx *c, const char *grant);

/* tally repair: recreate a missing grant, deliberately (tallyd does it). */
int	tl_dec_repair(struct tl_ctx *c, const char *grant);

#endif
