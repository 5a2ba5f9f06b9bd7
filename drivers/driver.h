/*
 * driver.h - the one small interface every provider driver implements.
 *
 * A driver turns a grant into a real resource on a provider and back.
 * Reactors reach drivers only through this table; only drivers/
 * includes a provider's client library.  Every operation is idempotent:
 * after a crash the reactor calls it again with the same intent.
 */
#ifndef TL_DRIVER_H
#define TL_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/* How to reach a provider as its administrator. */
struct tl_drv_admin {
	const char	*host;		/* where tallyd connects */
	const char	*port;
	const char	*user;
	const char	*password;	/* plaintext, wiped after use */
	const char	*dbname;	/* maintenance database */
	/*
	 * The provider setting revoke-public-connect: PUBLIC may not
	 * connect to the server's maintenance databases (create and
	 * fix_privileges revoke it, the admin keeping it; check reports it
	 * as a privileges drift of every grant).  0: left as it is.
	 */
	int		 revoke_public_connect;
};

/* What one grant is, as the driver sees it. */
struct tl_drv_grant {
	const char	*resource;	/* database name */
	const char	*owner;		/* NOLOGIN owner role */
	const char	*login;		/* LOGIN role of this credential */
	const char	*password;	/* plaintext, wiped after use */
	/*
	 * The grant id the driver marks the objects with, and refuses
	 * objects marked for any other grant by; NULL or "": unnamed (the
	 * mark of tally before marks named grants).  adopt_unnamed: an
	 * object with an unnamed mark is taken as this grant's (grants made
	 * before marks named grants) and then marked with grant.
	 */
	const char	*grant;
	int		 adopt_unnamed;
};

/* What verification found, worst first. */
enum tl_drv_drift {
	TL_DRIFT_NONE = 0,
	TL_DRIFT_PRIVILEGES,		/* attributes or privileges changed */
	TL_DRIFT_CREDENTIAL,		/* the recorded password fails */
	TL_DRIFT_MISSING		/* the database or a role is gone */
};

/* Where a consumer connects (the check logs in there, as the consumer). */
struct tl_drv_endpoint {
	const char	*host;
	const char	*port;
};

/* Outcome detail: a reason a person can act on (never a secret). */
#define TL_DRV_WHY_MAX	512

struct tl_drv_ops {
	const char	*name;
	const char	*const *types;	/* resource types it grants */
	/* Opens an admin session; TL_EUNREACH / TL_EAUTH / TL_EDRIVER. */
	int	(*open)(const struct tl_drv_admin *a, void **h, char *why);
	void	(*close)(void *h);
	/* Creates resource, roles and privileges; completes a half-done one. */
	int	(*create)(void *h, const struct tl_drv_grant *g, char *why);
	/*
	 * Verifies a grant: the database and roles exist, the login
	 * authenticates with password at ep, the role's attributes and the
	 * database's owner and privileges are what create set.  *drift
	 * gets the worst finding and why says what exactly.  Returns
	 * TL_EUNREACH / TL_EAUTH when the admin side itself fails.
	 */
	int	(*check)(void *h, const struct tl_drv_grant *g,
		    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift,
		    char *why);
	/* Sets the login's password again (repairs a frozen password). */
	int	(*set_password)(void *h, const struct tl_drv_grant *g,
		    char *why);
	/* Resets attributes and privileges to what create set. */
	int	(*fix_privileges)(void *h, const struct tl_drv_grant *g,
		    char *why);
	/*
	 * Runs one migration as the consumer (g->login with g->password, in
	 * g->resource at ep), in its own transaction: all of it or none.
	 * On failure why holds the server's message and *line the line of
	 * sql it points at (0 if the server gives no position).
	 */
	int	(*migrate)(const struct tl_drv_endpoint *ep,
		    const struct tl_drv_grant *g, const char *sql, size_t len,
		    char *why, int *line);
	/*
	 * Drops a login role that revoke(drop=0) disabled, after a rotation:
	 * what it owns goes to the owner role first.  NULL: not supported
	 * (the login then stays, disabled).
	 */
	/*
	 * Sets the password of the session's own admin role (tally rotate
	 * --admin): user is that role, password the new one.
	 */
	int	(*set_admin_password)(void *h, const char *user,
		    const char *password, char *why);
	/* The size of the grant's data, in bytes (0 if it is gone). */
	int	(*size)(void *h, const struct tl_drv_grant *g, uint64_t *bytes,
		    char *why);
	int	(*retire_login)(void *h, const struct tl_drv_grant *g,
		    char *why);
	/* Disables logins, ends sessions; keeps (retain) or drops the data. */
	int	(*revoke)(void *h, const struct tl_drv_grant *g, int drop,
		    char *why);
	/*
	 * Moving a binding (tally rebind --migrate).  freeze(on) makes g's
	 * resource read-only for new sessions and ends the login's
	 * sessions, so nothing is written to it after the copy is taken;
	 * freeze(off) undoes it (a move that failed).  Both idempotent;
	 * thawing a resource that is gone is not an error.  NULL: the
	 * driver cannot move data (rebind refuses).
	 */
	int	(*freeze)(void *h, const struct tl_drv_grant *g, int on,
		    char *why);
	/*
	 * Copies gfrom's data on the provider reached through from into
	 * gto (already made by create) on to, as gto's owner, replacing
	 * whatever an earlier attempt of the same copy left there; then
	 * counts the rows of every table on both sides and fails unless
	 * they match.  tables gets the counts as one JSON object
	 * {"schema.table": rows, ...} (cap bytes; TL_ETOOBIG if it does
	 * not fit).  NULL: the driver cannot move data.
	 */
	int	(*copy)(const struct tl_drv_admin *from,
		    const struct tl_drv_grant *gfrom,
		    const struct tl_drv_admin *to,
		    const struct tl_drv_grant *gto, char *tables, size_t cap,
		    char *why);
};

/* NULL when there is no such driver. */
const struct tl_drv_ops *tl_drv_find(const char *name);
/* NULL-terminated: every driver's name, for manifest validation. */
const char *const *tl_drv_names(void);

/*
 * Fault injection for tests (drivers/fault.c, which documents the
 * spec): a driver with real's name and types that passes every call
 * through to real unless a rule fails it.  tl_drv_fault_wrap reads the
 * spec from $TALLY_FAULT and returns real itself when that is unset or
 * empty; both return NULL for a bad spec (the _spec form says why).
 */
const struct tl_drv_ops *tl_drv_fault_wrap(const struct tl_drv_ops *real);
const struct tl_drv_ops *tl_drv_fault_wrap_spec(const struct tl_drv_ops *real,
	    const char *spec, char *why);

#endif
