/*
 * binder.h - the binder: which provider serves each requirement
 * instance, decided at command time (ARCHITECTURE.md, "Why binding is
 * a command-time rule").  Runs in a decision context (ctx.h); errors
 * and refusals as there.  The strings passed in are borrowed for the
 * call; nothing is kept or allocated past it.
 */
#ifndef TL_BINDER_H
#define TL_BINDER_H

#include "ctx.h"

/* grant is MODULE/REQ or MODULE/REQ@NODE; provider NODE/MODULE. */
int	tl_dec_bind(struct tl_ctx *c, const char *grant, const char *provider);

/* Runs the binder over every waiting instance of type (NULL: all). */
int	tl_binder_run(struct tl_ctx *c, const char *type);
/*
 * Runs it over the waits a command about module can change: every
 * instance waiting for a type module provides, and module's own
 * instances.  Its cost follows those, not every wait of the mesh (an
 * assign or apply walking all of them made a bulk load quadratic).
 */
int	tl_binder_run_module(struct tl_ctx *c, const char *module);

#endif
