/*
 * decide_assign.h - deciders of assignments and the providers they
 * register (tally assign, unassign, remove).  Run in a decision context
 * (ctx.h); errors and refusals as there.  The settings passed in are
 * borrowed for the call.
 */
#ifndef TL_DECIDE_ASSIGN_H
#define TL_DECIDE_ASSIGN_H

#include <stddef.h>

#include "ctx.h"

/* A setting given to assign: value NULL and secret NULL removes key. */
struct tl_setting {
	const char	*key;
	const char	*value;
	const void	*secret;	/* ciphertext, if a secret */
	size_t		 secret_len;
};
/*
 * tally assign.  Assigning again changes what set gives and keeps the
 * rest of the assignment's settings and secrets (and its exposure when
 * expose is NULL; NULL for a new assignment is local).  A provider's
 * settings are checked against what its drivers declare (struct
 * tl_drv_setting): an unknown key, a value of the wrong kind, a secret
 * given as a plain setting or the reverse are refused (TL_EINVAL),
 * naming the known keys; any module's values are refused with a
 * control character in them.
 *
 * What the command says besides the module and the node is in o (read
 * during the call only; start from TL_ASSIGN_ZERO or a designated
 * initialiser and set what is given).
 */
struct tl_assign {
	const char		*expose;	/* NULL: as above */
	const struct tl_setting	*set;		/* nset settings to give */
	size_t			 nset;
	/*
	 * The parts the assignment installs: a comma-separated list of
	 * the module's declared parts, or "all"; NULL keeps the
	 * assignment's, every part for a new one.  A part no longer
	 * installed leaves what only it needed: its per-instance grants
	 * here are revoked, a shared grant is revoked once no assignment
	 * installs the part and rotated for the holders that remain
	 * otherwise.
	 */
	const char		*parts;
	/*
	 * NULL, or cap bytes that receive what changed, one "  KEY: OLD ->
	 * NEW" line each (empty when nothing changed).
	 */
	char			*changes;
	size_t			 cap;
};
#define TL_ASSIGN_ZERO	{ NULL, NULL, 0, NULL, NULL, 0 }
int	tl_dec_assign(struct tl_ctx *c, const char *module, const char *node,
	    const struct tl_assign *o);
/*
 * After a grant's revocation (policy drop) or purge is recorded: when
 * an assignment installs the grant's requirement again (a part taken
 * away and given back before the revocation ran), the grant is
 * requested again from the same binding, as for a consumer back after
 * the revocation (a revocation once recorded is a fact and runs; the
 * fresh grant follows it).  Retained data is never handed back: status
 * points at tally restore.  Nothing is emitted otherwise.
 */
int	tl_dec_reopen_wanted(struct tl_ctx *c, const char *gkey);
/* Checks settings for module as tl_dec_assign does (tally provider move). */
int	tl_dec_settings_check(struct tl_ctx *c, const char *module,
	    const struct tl_setting *set, size_t nset);
int	tl_dec_unassign(struct tl_ctx *c, const char *module, const char *node);
int	tl_dec_remove(struct tl_ctx *c, const char *module);
/*
 * tally remove without --yes where revoking destroys data: the removal
 * is held for a confirmation (module.removal-held, what would be lost
 * in what; tally status and the board ask it) until tally remove --yes
 * removes the module or --cancel withdraws it (module.removal-cancelled;
 * TL_ENOTFOUND refused when none is held).  Holding again replaces what.
 */
int	tl_dec_remove_hold(struct tl_ctx *c, const char *module,
	    const char *what);
int	tl_dec_remove_cancel(struct tl_ctx *c, const char *module);
/* Registers (or updates) the providers of module's assignments. */
int	tl_provider_refresh(struct tl_ctx *c, const char *module);

/*
 * A node gone for good (decide_assign.c).  tl_dec_node_lost records
 * node.lost, marks every grant that holds data on the node's providers
 * lost (grant.lost: not reachable, never revoked or retried again), and
 * ends the node's assignments as unassign does (its consumers' own
 * grants revoked, holder-left rotations for the rest, its providers
 * retired).  tl_dec_node_live refuses placing anything on a lost node.
 * tl_dec_node_rm_check refuses removing a node that still runs
 * modules, naming every one and every grant bound to its providers.
 */
int	tl_dec_node_lost(struct tl_ctx *c, const char *name);
int	tl_dec_node_live(struct tl_ctx *c, const char *node);
int	tl_dec_node_rm_check(struct tl_ctx *c, const char *name);

#endif
