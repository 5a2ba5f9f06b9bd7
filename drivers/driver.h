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

#include <stdatomic.h>
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

/* One migration file, as the migrator hands it to a driver. */
struct tl_drv_migration {
	const char	*file;		/* NNN_description.sql */
	const char	*checksum;	/* BLAKE2b-256 of sql, hex */
	const char	*sql;		/* len bytes, need not end in NUL */
	size_t		 len;
	unsigned	 timeout_s;	/* the file's time limit; 0: 300 s */
	atomic_int	*cancel;	/* nonzero: stop now; NULL: never */
};

/* Outcome detail: a reason a person can act on (never a secret). */
#define TL_DRV_WHY_MAX	512

/*
 * A setting of a provider's assignment (tally assign --set/--secret), as
 * the driver declares it: what the code of tally reads from the
 * assignment, and nothing else, so `tally assign` can refuse a typo and
 * a value of the wrong kind before anything is recorded.
 */
enum tl_drv_kind {
	TL_DRV_STRING = 0,	/* any text without control characters */
	TL_DRV_PORT,		/* 1-65535 */
	TL_DRV_HOST,		/* a host name or an IP address */
	TL_DRV_BOOL,		/* yes/no, true/false, on/off, 1/0 */
	TL_DRV_INT,		/* a non-negative decimal integer */
	TL_DRV_DURATION		/* N[smhd], e.g. 90s, 5m, 1h, 30d */
};

struct tl_drv_setting {
	const char	*name;
	const char	*dflt;		/* NULL: required; "": none, derived */
	int		 secret;	/* given with --secret, never --set */
	enum tl_drv_kind kind;
	const char	*description;	/* one line, for refusals and docs */
};

/* Values of a setting are at most this long (bytes, without the NUL). */
#define TL_DRV_SETTING_MAX	255

/*
 * Finds name in settings (terminated by an entry with a NULL name);
 * NULL if it is not declared.
 */
const struct tl_drv_setting *tl_drv_setting_find(
	    const struct tl_drv_setting *settings, const char *name);
/*
 * Checks value against s's kind: 0, or TL_EINVAL with why (at least
 * TL_DRV_WHY_MAX bytes) saying what is wrong.  A secret's value is
 * never copied into why.
 */
int	tl_drv_setting_check(const struct tl_drv_setting *s, const char *value,
	    char *why);
/* The kind's name ("port", "duration", ...). */
const char *tl_drv_kind_name(enum tl_drv_kind kind);
/*
 * A TL_DRV_DURATION value ("90", "90s", "5m", "1h", "30d") in seconds:
 * 0, or TL_EINVAL for anything tl_drv_setting_check refuses.
 */
int	tl_drv_duration(const char *value, uint64_t *seconds);

struct tl_drv_ops {
	const char	*name;
	const char	*const *types;	/* resource types it grants */
	/* The assignment settings it reads; NULL-name terminated. */
	const struct tl_drv_setting *settings;
	/*
	 * NULL-terminated: the connection fields a grant of its types
	 * delivers (what a manifest's env: may map); tally apply refuses
	 * any other (tools/tally/manifest.c).
	 */
	const char	*const *fields;
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
	 * g->resource at ep), in its own transaction: all of it or none,
	 * together with the resource's own record of the files applied to
	 * it (the file name and checksum), so that a crash after the
	 * commit cannot make the file run twice.  *already is set when
	 * that record has m->file with m->checksum: nothing ran, the file
	 * was applied before.  The file runs under m->timeout_s, enforced
	 * by the server and cancelled there when it passes, and stops
	 * within a fraction of a second of *m->cancel becoming nonzero.
	 * Returns 0 (applied now, or *already); TL_EUNREACH: no session
	 * (not the file's fault); TL_EDRIVER: refused or failed, why
	 * holding the reason (the server's message) and *line the line of
	 * sql it points at (0 if none).  Blocking: run it off a loop that
	 * must stay responsive.
	 */
	int	(*migrate)(const struct tl_drv_endpoint *ep,
		    const struct tl_drv_grant *g,
		    const struct tl_drv_migration *m, int *already,
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
	/*
	 * Fences the provider for control plane epoch (reactors/epoch.h):
	 * raises the provider's tally-owned marker to epoch if it is
	 * lower (it never goes down), atomically, and returns the marker
	 * as it is after that in *current.  epoch 0 only reads it.  A
	 * tallyd whose epoch is below *current is deposed and must not act
	 * on this provider.  NULL: the driver keeps no fence (the provider
	 * is then not protected from a deposed leader).
	 */
	int	(*fence)(void *h, uint64_t epoch, uint64_t *current,
		    char *why);
};

/* NULL when there is no such driver. */
const struct tl_drv_ops *tl_drv_find(const char *name);
/* The driver that grants resource type type; NULL when none does. */
const struct tl_drv_ops *tl_drv_for_type(const char *type);
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
