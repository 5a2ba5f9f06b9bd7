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
 */
#ifndef TL_DECIDE_H
#define TL_DECIDE_H

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
	tl_emit_fn	 on_emit;
	void		*arg;
	char		 why[1024];
};

/* Brings the projections up to the head and opens them. */
int	tl_ctx_begin(struct tl_ctx *c, struct tl_txn *t, const char *actor);
/* Moves the projections checkpoint to the head. */
int	tl_ctx_end(struct tl_ctx *c);
int	tl_refuse(struct tl_ctx *c, int code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/* Appends one event (b is finished here), folds it; *seqp optional. */
int	tl_emit(struct tl_ctx *c, const char *type, const char *stream,
	    struct tl_body *b, uint64_t *seqp);

/* As tl_emit, for a body already encoded (one canonical msgpack map). */
int	tl_emit_bytes(struct tl_ctx *c, const char *type, const char *stream,
	    const void *body, size_t len, uint64_t *seqp);

/* Commands. */
int	tl_dec_node_add(struct tl_ctx *c, const char *name,
	    const char *routable, const uint8_t pubkey[32]);
/* With the node's Ed25519 public key (NULL: none, as before). */
int	tl_dec_node_add_ex(struct tl_ctx *c, const char *name,
	    const char *routable, const uint8_t pubkey[32],
	    const uint8_t signkey[32]);
/* node.key-added: a signing key for a node added without one (rekey). */
int	tl_dec_node_key_add(struct tl_ctx *c, const char *name,
	    const uint8_t signkey[32]);
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
 * control character in them.  tl_dec_assign_ex writes what changed,
 * one "  KEY: OLD -> NEW" line each, into changes (cap bytes, may be
 * NULL; empty when nothing changed).
 */
int	tl_dec_assign(struct tl_ctx *c, const char *module, const char *node,
	    const char *expose, const struct tl_setting *set, size_t nset);
int	tl_dec_assign_ex(struct tl_ctx *c, const char *module,
	    const char *node, const char *expose, const struct tl_setting *set,
	    size_t nset, char *changes, size_t cap);
/* Checks settings for module as tl_dec_assign does (tally provider move). */
int	tl_dec_settings_check(struct tl_ctx *c, const char *module,
	    const struct tl_setting *set, size_t nset);
int	tl_dec_unassign(struct tl_ctx *c, const char *module, const char *node);
int	tl_dec_remove(struct tl_ctx *c, const char *module);
/* grant is MODULE/REQ or MODULE/REQ@NODE; provider NODE/MODULE. */
int	tl_dec_bind(struct tl_ctx *c, const char *grant, const char *provider);

/*
 * tally rotate: starts a rotation of grant (refused while one runs, with
 * the reason).  deadline_ns, if not 0, is how long after the start the
 * old credential is retired even if holders have not acknowledged.
 */
int	tl_dec_rotate(struct tl_ctx *c, const char *grant, uint64_t deadline_ns,
	    const char *reason);
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
/* tally rotate --admin: the provider's own admin credential. */
int	tl_dec_rotate_admin(struct tl_ctx *c, const char *provider);
/* tally ack: node's module runs with version of its credentials. */
int	tl_dec_ack(struct tl_ctx *c, const char *node, const char *module,
	    uint64_t version, size_t *acked);

/* The grant, or a refusal that says how grants are named. */
struct tl_grant;
int	tl_grant_find(struct tl_ctx *c, const char *grant, struct tl_grant *g);

/* tally purge: destroy a revoked grant's retained data (tallyd does it). */
int	tl_dec_purge(struct tl_ctx *c, const char *grant);
/* tally restore: take a retained grant back, with a new credential. */
int	tl_dec_restore(struct tl_ctx *c, const char *grant);

/* tally repair: recreate a missing grant, deliberately (tallyd does it). */
int	tl_dec_repair(struct tl_ctx *c, const char *grant);

/* Registers (or updates) the providers of module's assignments. */
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
/*
 * tally rebind GRANT PROVIDER --empty (decide_rebind.c): a lost grant
 * bound to PROVIDER afresh: binding.made (reason TL_BIND_EMPTY) and a
 * new grant.requested: a new, empty resource, nothing copied.  Refused
 * for a grant that is not lost (its data moves with --migrate).
 */
int	tl_dec_rebind_empty(struct tl_ctx *c, const char *grant,
	    const char *provider);

int	tl_provider_refresh(struct tl_ctx *c, const char *module);

/* Runs the binder over every waiting instance of type (NULL: all). */
int	tl_binder_run(struct tl_ctx *c, const char *type);

#endif
