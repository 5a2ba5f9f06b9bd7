/*
 * helper.h - tallyd's one-shot helper modes: what the CLI would
 * otherwise do with provider sessions of its own, done by tallyd (the
 * one program that links provider clients) and spoken over a pipe, as
 * git runs its remote helpers.  tally check runs tallyd --check, tally
 * remove tallyd --loss, tally adopt tallyd --find-adopt.
 *
 * The caller (main.c) has opened rx's log, loaded its key, walked the
 * whole chain, read the stream and raised the fences (deposed: never
 * called); the helper writes JSON lines to stdout and returns tallyd's
 * exit code.
 */
#ifndef TL_TALLYD_HELPER_H
#define TL_TALLYD_HELPER_H

#include <stddef.h>

struct tl_rx;

/*
 * --check: verifies the grants now (grant, else provider's, else all;
 * NULL for none), each logging in as its consumer, repairing what
 * verification repairs, and records the findings as the verifier does.
 * stdout gets one line per finding that is not healthy,
 *	{"grant", "provider", "drift", "reason", "action", "repaired"}
 * then {"checked": N, "unhealthy": N}.  Returns EXIT_OK (0), or
 * EXIT_FAIL when the verification itself failed (said on stderr).
 */
int	tl_tallyd_check(struct tl_rx *rx, const char *grant,
	    const char *provider);

/*
 * --loss MODULE: what revoking each of the module's grants now would
 * lose, asked of its provider (ops->loss: reads only, no fence raised,
 * so it is called before the stream and the fences; the log gets the
 * cheap check of every reading command instead of the whole walk).
 * stdout gets one line per grant whose driver can tell,
 *	{"grant", "loses", "drop", "what"} or {"grant", "error"}.
 * Returns EXIT_OK, EXIT_CORRUPT for a log that does not verify, or
 * EXIT_FAIL (said on stderr).
 */
int	tl_tallyd_loss(struct tl_rx *rx, const char *module);

/*
 * --find-adopt MESH [GRANT...]: for each grant named (none: every grant
 * whose driver finds objects by their mark, find_marked), the objects
 * mesh MESH made for it, found by their mark on its provider: what
 * tally adopt records for drivers whose names it cannot compute (reads
 * only, before the stream and the fences, as --loss).  stdout gets one
 * line per grant,
 *	{"grant", "resource", "owner", "login", "what"} or
 *	{"grant", "error", "missing"}
 * (missing: true when no object carries the mark; a named grant whose
 * driver cannot look is an error).  Returns EXIT_OK, EXIT_CORRUPT for
 * a log that does not verify, or EXIT_FAIL (said on stderr).
 */
int	tl_tallyd_find_adopt(struct tl_rx *rx, const char *mesh,
	    char *const *grants, size_t ngrants);

/*
 * --prepare DRIVER: ops->prepare for tally assign (decl->prepared),
 * spoken in lines whose values are hex, so no byte of a value can
 * change the framing.  stdin (at most 64 KiB, read into guarded
 * memory): "mesh ID", then "set NAME HEX" for each setting this assign
 * gives, secrets in plaintext too.  stdout: "set NAME HEX" for each
 * setting prepared, "secret NAME HEX" for each secret prepared (the
 * CLI seals it), "note TEXT"; or "error TEXT" and EXIT_REFUSED (the
 * driver refused what was given) / EXIT_USAGE (bad input) / EXIT_FAIL.
 * Opens no log and no session: it needs neither.
 */
int	tl_tallyd_prepare(const char *driver);

#endif
