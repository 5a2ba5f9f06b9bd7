/*
 * util.h - small helpers every driver shares: a reason into why, a
 * bounded statement, a name/value setting looked up, a string
 * percent-encoded into a URI, a grant's id tested, a secret copied into
 * wiped memory, how a consumer reaches its provider (TLS or not) and
 * the value of its field ca.
 *
 * Nothing here keeps state, takes a lock or allocates outside
 * tl_drv_secret_dup, so any thread may call any of them at once.  This
 * unit sits below every driver and calls nothing of registry.c (whose
 * table names every driver; tests/integration/03_include_cycles.sh
 * holds that).
 */
#ifndef TL_DRV_UTIL_H
#define TL_DRV_UTIL_H

#include <stdarg.h>
#include <stddef.h>

#include "decl.h"

/*
 * Writes the formatted reason into why (at most TL_WHY_MAX bytes
 * with its NUL, cut when longer) and returns rc unchanged, so that a
 * failure is one statement: `return tl_drv_why(why, TL_EAUTH, ...)`.
 * why NULL: nothing is written (rc is still returned).
 */
int	tl_drv_why(char *why, int rc, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/*
 * Appends the formatted finding to why (NUL-terminated, TL_WHY_MAX
 * bytes in all) after "; " when why is not empty; cut when full, and
 * nothing at all once fewer than 3 bytes are left.  why must not be NULL.
 */
void	tl_drv_why_add(char *why, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/*
 * printf into buf (n bytes), a statement being built: 0, or TL_EINVAL
 * with "statement too long" in why (as tl_drv_why) when it does not fit
 * (buf then holds the cut text: the caller must not run it).
 */
int	tl_drv_sqlf(char *buf, size_t n, char *why, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));
/* tl_drv_sqlf's twin over a va_list (a driver's own runf builds on it). */
int	tl_drv_vsqlf(char *buf, size_t n, char *why, const char *fmt,
	    va_list ap) __attribute__((format(printf, 4, 0)));

/*
 * The value of name in sv, a name/value vector as tl_drv_admin.settings
 * and tl_drv_endpoint.settings carry ({name, value, ..., NULL}); the
 * first pair wins.  NULL when name is not there or sv is NULL (a pair
 * whose value is NULL ends the vector).  The result points into sv and
 * lives as long as it does.
 */
const char *tl_drv_setting_get(const char *const *sv, const char *name);

/*
 * A requirement's params (decl.h, struct tl_drv_param).  find: d's
 * param name, NULL when d declares none such.  check: pairs (name/value,
 * NULL-terminated, a list's items joined by '\n') against d's params
 * and then d->params_check: 0, or TL_EINVAL with why naming the param.
 * pack: pairs into buf (cap bytes) as name NUL value NUL ... NUL, the
 * form a reactor keeps them in (0, TL_ETOOBIG); unpack: such a buf
 * back into sv (n entries, at most (n - 1) / 2 pairs kept), returned;
 * the pointers point into buf.
 */
const struct tl_drv_param *tl_drv_param_find(const struct tl_drv_decl *d,
	    const char *name);
int	tl_drv_params_check(const struct tl_drv_decl *d,
	    const char *const *pairs, char *why);
int	tl_drv_params_pack(const char *const *pairs, char *buf, size_t cap);
const char *const *tl_drv_params_unpack(const char *buf, const char **sv,
	    size_t n);

/*
 * Appends s to out at *off, percent-encoded for a URI's userinfo, path
 * or query (RFC 3986: the unreserved A-Z a-z 0-9 - . _ ~ as they are,
 * every other byte as %XX in upper-case hex), and NUL-terminates.
 * cap is out's size; *off advances past what was written.
 * Errors: TL_ETOOBIG (out is full: what fitted is written and
 * terminated, *off counts it; the caller discards out).
 */
int	tl_drv_pct_append(char *out, size_t cap, size_t *off, const char *s);

/*
 * How a consumer of d's provider at ep reaches it: the provider's own
 * mode, as tallyd reaches it (tl_drv_reach at its admin host: the first
 * non-empty ADMIN_HOST setting in ep->settings, else ep->host), so what
 * compose delivers is what tallyd itself verified.  One exception keeps
 * plaintext: a verify that is only the default (no setting tls) with no
 * ca and no system CAs for d, which tallyd refuses to open: its
 * consumers keep the plaintext values they had rather than a TLS URI
 * to a server that may have no listener for it.  An explicit tls=verify
 * is always TLS.  Pure.
 */
enum tl_drv_tls tl_drv_consumer_tls(const struct tl_drv_decl *d,
	    const struct tl_drv_endpoint *ep);
/*
 * The value of a connection field "ca": ep->ca_path (the token the
 * deliverer resolves to the CA file's path, decl.h) or "" without one,
 * into out (cap bytes): 0 or TL_ETOOBIG.
 */
int	tl_drv_compose_ca(const struct tl_drv_endpoint *ep, char *out,
	    size_t cap);

/* 1 when g carries a grant id (not NULL, not ""), else 0. */
int	tl_drv_grant_named(const struct tl_drv_grant *g);

/*
 * A copy of s in memory from tl_secret_alloc (locked, wiped when freed):
 * the caller owns it and releases it with tl_secret_free.  NULL when out
 * of memory.  s must not be NULL.
 */
char	*tl_drv_secret_dup(const char *s);

#endif /* TL_DRV_UTIL_H */
