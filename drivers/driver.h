/*
 * driver.h - a driver's operations: what tallyd calls on a provider.
 *
 * A driver turns a grant into a real resource on a provider and back.
 * It is its declaration (decl.h: data and two pure functions, read by
 * every program) and its operations, here: sessions and calls over the
 * provider's client library, linked only by tallyd (and the suites and
 * benches that drive a provider).  Reactors reach the operations only
 * through this table; only drivers/ includes a provider's client
 * library, and only drivers/ knows what a provider calls things
 * (drivers/README.md: the contract for a driver author;
 * tests/integration/00_provider_words.sh keeps the rest of tally free of
 * provider words).
 *
 * Rules every operation follows unless it says otherwise:
 * - Idempotent: after a crash the reactor calls it again with the same
 *   intent, and a call that finds its work done returns 0.
 * - Pointers are borrowed for the call: the driver keeps none of a's,
 *   g's, ep's or m's strings after it returns (open copies what its
 *   handle needs), and the caller wipes the passwords it passed.
 * - why, when not NULL, is at least TL_WHY_MAX bytes and receives
 *   one line a person can act on, on success too; it never holds a
 *   secret.
 * - Errors are tally's codes (core/error.h): TL_EUNREACH (no session:
 *   the provider is down or unreachable, try later), TL_EAUTH (the
 *   admin credential is refused), TL_EDRIVER (the provider refused or
 *   failed the operation; why says why), TL_EINVAL (a grant or name
 *   the driver will not touch), ENOMEM.
 * - A handle from open is used by one thread at a time (the reactors
 *   give each provider session to one worker); different handles may
 *   be used concurrently.  Operations without a handle (migrate, copy,
 *   compose, names) may run on any thread at once.
 */
#ifndef TL_DRIVER_H
#define TL_DRIVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "decl.h"

/*
 * How to reach a provider as its administrator: host, port, user and
 * password are the settings of those roles (decl.h: enum tl_drv_use).
 */
struct tl_drv_admin {
	const char	*host;		/* where tallyd connects */
	const char	*port;
	const char	*user;
	const char	*password;	/* plaintext, wiped after use */
	/*
	 * The provider assignment's settings that are not secret, as
	 * alternating name and value in one NULL-terminated array (NULL:
	 * none): a driver reads the settings it declares from here.
	 * Borrowed for the call to open, which copies what it keeps.
	 */
	const char	*const *settings;
	/*
	 * The mesh this control plane belongs to: its id, 32 hex digits
	 * (tally mesh); "" or NULL only for a home made before meshes had
	 * ids.  Marks carry it, and an object marked by another mesh is
	 * never changed by accident (drivers/README.md).
	 */
	const char	*mesh;
	/*
	 * The fence the session acts under (NULL: none, a reader such as
	 * tally check's): what ops->fence raises, and what a driver whose
	 * fencing is TL_DRV_FENCE_ATOMIC or TL_DRV_FENCE_BEFORE_CALL
	 * checks with each change, refusing it (TL_EREFUSED, why "deposed:
	 * ...") once the provider holds a fence this one is not.  Borrowed
	 * for the call to open, which copies it.
	 */
	const struct tl_drv_fence *fence;
	/*
	 * The setting ca (decl.h: TL_DRV_TLS_SETTINGS) as a file, for a
	 * client library that reads one; NULL: no ca set.  The driver
	 * reads the mode with tl_drv_tls_mode(settings, host).
	 */
	const char	*ca_file;
	/*
	 * The admin's client certificate (the setting admin-cert: PEM, its
	 * chain leaf first) and private key (admin-key: PEM, a secret the
	 * caller wipes), presented to a provider that asks for one in the
	 * TLS handshake; both NULL: none.  A driver declaring
	 * TL_DRV_CLIENT_CERT_SETTINGS checks them with
	 * tl_drv_client_cert_check when it opens.  Borrowed for the call to
	 * open, which keeps what it needs in memory only (no key reaches a
	 * disk: tl_drv_pem_memfd for a client library that reads a file).
	 */
	const char	*client_cert;
	const char	*client_key;
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

/*
 * What ops->prepare adds to an assignment: n settings, each a name the
 * driver declares in decl->prepared (static), its value (malloc'd; for
 * a secret, guarded memory: core/secret.h tl_secret_alloc) and whether
 * it is secret; note, one line for the operator saying what was made
 * or checked.  tl_drv_prepared_free frees (and wipes) the values and
 * leaves it empty; a zeroed struct is empty.
 */
#define TL_DRV_PREPARED_MAX	4
struct tl_drv_prepared {
	size_t		 n;
	const char	*name[TL_DRV_PREPARED_MAX];
	char		*value[TL_DRV_PREPARED_MAX];
	int		 secret[TL_DRV_PREPARED_MAX];
	char		 note[TL_WHY_MAX];
};
void	tl_drv_prepared_free(struct tl_drv_prepared *p);

/* What ops->sign says of the certificate it issued. */
struct tl_drv_cert {
	char		 serial[65];	/* hex */
	int64_t		 not_before;	/* seconds since the epoch */
	int64_t		 not_after;
	/*
	 * When its holder should have the next one (the driver's renewal
	 * point, between not_before and not_after): the rotator starts the
	 * grant's renewal then (reactors/rotate.c).
	 */
	int64_t		 renew_at;
};

/* A revocation list made (ops->crl): seconds since the epoch. */
struct tl_drv_crl {
	int64_t		 this_update;
	int64_t		 next_update;
};

struct tl_drv_ops {
	/* What the driver is; its name is decl->name. */
	const struct tl_drv_decl *decl;
	/* Opens an admin session; TL_EUNREACH / TL_EAUTH / TL_EDRIVER. */
	int	(*open)(const struct tl_drv_admin *a, void **h, char *why);
	void	(*close)(void *h);
	/*
	 * Creates resource, roles and privileges; completes a half-done
	 * one.  Promises the credential: when it returns 0, g->login
	 * authenticates with g->password, also when the login existed
	 * before (its password is set again), so no set_password follows.
	 */
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
	/*
	 * Verifies n grants of this provider at once, in a constant number
	 * of round trips (PostgreSQL: one catalogue query over arrays of
	 * the grants' names, and one for the maintenance databases), and
	 * WITHOUT logging in as the consumers: drift[i] and why[i] (n
	 * entries each, caller's) get what check would find for gs[i],
	 * except that a credential is compared on the admin side (the
	 * provider's stored verifier against gs[i].password), so
	 * reachability at the routable name is not proven: the verifier
	 * still calls check for a sample (reactors/verify.c).  Returns 0
	 * (every drift[i] set), TL_EUNREACH / TL_EAUTH when the admin side
	 * fails (no drift[i] is meaningful then), TL_EINVAL when a grant
	 * is refused (why[i] says which; the others are not checked), or
	 * TL_EDRIVER with why[0] when the admin cannot read what the
	 * comparison needs (PostgreSQL: pg_authid needs a superuser): the
	 * caller checks one by one instead.  Same threading as check;
	 * gs's strings are borrowed for the call.  NULL: the driver
	 * checks one grant at a time (TL_DRV_CAP_CHECK_BULK).
	 */
	int	(*check_bulk)(void *h, const struct tl_drv_grant *gs, size_t n,
		    enum tl_drv_drift *drift, char (*why)[TL_WHY_MAX]);
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
	 * Sets the password of the session's own admin role (tally rotate
	 * --admin): user is that role, password the new one.  NULL: the
	 * driver cannot (TL_DRV_CAP_ADMIN_ROTATE).
	 */
	int	(*set_admin_password)(void *h, const char *user,
		    const char *password, char *why);
	/*
	 * The size of the grant's data, in bytes (0 if it is gone).  NULL:
	 * not measured (TL_DRV_CAP_SIZE).
	 */
	int	(*size)(void *h, const struct tl_drv_grant *g, uint64_t *bytes,
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
	 * driver cannot move data (rebind refuses).  A source tally did
	 * not make (an embedded instance, tally assign --consolidate) has
	 * g->owner and g->login both "": the resource alone is frozen and
	 * every other session on it ends.
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
	 * The rotation saga's two steps (credential != NONE).  add puts
	 * g->login's credential g->password beside the grant's others
	 * (same resource, same owner, same privileges) and sets the
	 * password, as create does; retire disables g->login, ends its
	 * sessions and removes it, what it owns going to the owner.
	 * MULTI_PASSWORD: add adds g->password to the existing g->login
	 * (the others stay), retire removes g->password (the retired
	 * version's) from it and nothing else, the login staying.  Both
	 * idempotent (retiring a credential that is gone is 0); errors as
	 * create.  NULL: the driver cannot rotate (TL_DRV_CAP_ROTATE).
	 */
	int	(*add_credential)(void *h, const struct tl_drv_grant *g,
		    char *why);
	int	(*retire_credential)(void *h, const struct tl_drv_grant *g,
		    char *why);
	/*
	 * The sessions the provider has open for g->login (PostgreSQL:
	 * its rows in pg_stat_activity): the corroboration, before an old
	 * credential is retired, that its holders left it; asked on every
	 * rotator pass while the rotation waits (tally status shows the
	 * count), so it must be cheap and change nothing.  why may be NULL.
	 * NULL: the driver cannot tell (nothing is corroborated).
	 */
	int	(*sessions)(void *h, const struct tl_drv_grant *g,
		    unsigned *count, char *why);
	/*
	 * Fences the provider for the session's admin->fence (want, the
	 * same): a compare-and-set, atomic on the provider, that stores
	 * want's epoch and leader for want's mesh only when the epoch held
	 * for that mesh is strictly lower (never GREATEST: two candidates
	 * at one epoch do not both win), and returns what is held after in
	 * *held.  want->epoch 0 only reads.  Fences of other meshes are
	 * never read or changed.  A control plane for which
	 * tl_drv_fence_ours(want, held) is 0 is deposed and must not act
	 * on this provider.  NULL: the driver stores no fence (fencing
	 * says what protects it then).
	 */
	int	(*fence)(void *h, const struct tl_drv_fence *want,
		    struct tl_drv_fence_held *held, char *why);
	/*
	 * What revoking g now would lose, asked before tally acts (tally
	 * remove shows it, and wants --yes when something is lost): drop
	 * 1 for a revocation that drops the data (a purge, or a provider
	 * whose policy is drop), 0 for one that retains it.  *loses is set
	 * when anything would be lost, and why (TL_WHY_MAX bytes, never
	 * a secret) gets one line a person reads, on success, saying what
	 * and how much (RabbitMQ: the vhost's queues and messages).  A
	 * resource that is gone loses nothing (0, *loses 0).  Errors as
	 * check.  NULL: the driver cannot tell; what its revocation
	 * declares is all tally shows.
	 */
	int	(*loss)(void *h, const struct tl_drv_grant *g, int drop,
		    int *loses, char *why);
	/*
	 * Finds, by their mark, the objects mesh from_mesh (32 hex digits,
	 * not the session's mesh) made for in's grant (in->grant the grant
	 * id its marks name; resource, node and version as names gets
	 * them; key NULL): what tally adopt takes over from a lost mesh
	 * when the names cannot be computed here (keyed_names: the digest
	 * is keyed by that mesh's master key).  Reads only: changes
	 * nothing, raises no fence.  0 with out set to the names the
	 * grant then keeps (given back to names as in->adopted) and why
	 * saying what was found; TL_ENOTFOUND (why) when no object carries
	 * that mesh's mark for that grant, also when only another mesh's
	 * or another grant's do; TL_EDRIVER when more than one does; else
	 * errors as check.  NULL: the driver's names can be computed from
	 * the mesh id alone, or it cannot adopt (TL_DRV_CAP_FIND_MARKED).
	 */
	int	(*find_marked)(void *h, const struct tl_drv_name_in *in,
		    const char *from_mesh, struct tl_drv_names *out,
		    char *why);
	/*
	 * At assign, before anything is recorded (decl->prepared; tallyd
	 * --prepare, no session, no log): given holds what this tally
	 * assign gives, name/value pairs, NULL-terminated, secrets in
	 * plaintext (the caller wipes them); mesh is the mesh's id.  Makes
	 * the prepared settings none of which is given (out), or checks
	 * the given ones and adds nothing.  0; TL_EINVAL / TL_EREFUSED
	 * (why) for what the driver will not take (out then empty).
	 * NULL: decl->prepared is NULL.
	 */
	int	(*prepare)(const char *const *given, const char *mesh,
		    struct tl_drv_prepared *out, char *why);
	/*
	 * Under TL_DRV_CRED_CERTIFICATE: a certificate for the signing
	 * request csr (PEM) of one of g's holders, issued only when the
	 * request's own signature holds and it asks for exactly what g may
	 * have (the common name g->login, the alternative names its
	 * params declare, nothing else); *cert (PEM, malloc'd, the
	 * caller's) and info.  TL_EREFUSED (why) for a request that asks
	 * for anything else, TL_EINVAL for one that does not parse; the
	 * session's errors otherwise.  NULL: another credential model.
	 */
	int	(*sign)(void *h, const struct tl_drv_grant *g, const char *csr,
		    char **cert, struct tl_drv_cert *info, char *why);
	/*
	 * Under TL_DRV_CRED_CERTIFICATE: the CA's revocation list (PEM,
	 * malloc'd, the caller's) naming the n serials (hex), numbered
	 * number, and in info when it was made and when verifiers should
	 * have the next one.  The session's errors.  NULL: no list.
	 */
	int	(*crl)(void *h, const char *const *serials, size_t n,
		    uint64_t number, char **crl, struct tl_drv_crl *info,
		    char *why);
};

/*
 * The operations of the driver named name (under $TALLY_FAULT, its
 * fault-injecting wrapper: drivers/registry.c); NULL when there is no
 * such driver.
 */
const struct tl_drv_ops *tl_drv_find(const char *name);
/* tl_drv_find(d->name); NULL for d NULL. */
const struct tl_drv_ops *tl_drv_ops_of(const struct tl_drv_decl *d);

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
