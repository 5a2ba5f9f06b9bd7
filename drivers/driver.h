/*
 * driver.h - the one small interface every provider driver implements.
 *
 * A driver turns a grant into a real resource on a provider and back.
 * Reactors reach drivers only through this table; only drivers/
 * includes a provider's client library, and only drivers/ knows what a
 * provider calls things (drivers/README.md: the contract for a driver
 * author; tests/integration/00_provider_words.sh keeps the rest of
 * tally free of provider words).
 *
 * What a driver declares as data: its types and their tags, its
 * settings (with defaults: tally reads no default of its own), its
 * connection fields and which are secret, its credential model, what
 * revocation does, and its capabilities (the operations it leaves
 * NULL, plus the migration dialect).  What it computes without a
 * session (pure, any thread): the names of a grant's objects (names)
 * and the value of each connection field (compose).
 *
 * Rules every operation follows unless it says otherwise:
 * - Idempotent: after a crash the reactor calls it again with the same
 *   intent, and a call that finds its work done returns 0.
 * - Pointers are borrowed for the call: the driver keeps none of a's,
 *   g's, ep's or m's strings after it returns (open copies what its
 *   handle needs), and the caller wipes the passwords it passed.
 * - why, when not NULL, is at least TL_DRV_WHY_MAX bytes and receives
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
};

/*
 * A leader's fence: mesh, epoch, and which candidate leads that epoch.
 * Two candidates promoted to the same epoch have different leaders
 * (reactors/epoch.h: tl_ep_leader), so a compare-and-set on the pair
 * lets exactly one of them hold a provider.
 */
#define TL_DRV_LEADER_MAX	33	/* 32 hex digits and the NUL */
struct tl_drv_fence {
	const char	*mesh;		/* the mesh id; "": before ids */
	uint64_t	 epoch;		/* 0: read what is held, raise nothing */
	const char	*leader;	/* the epoch's leader, hex */
};
/* What a provider holds for a mesh (epoch 0, leader "": nothing). */
struct tl_drv_fence_held {
	uint64_t	 epoch;
	char		 leader[TL_DRV_LEADER_MAX];
};
/*
 * 1 when held lets want act: nothing held, or want's epoch above the
 * held one's (a raise not made yet), or the same epoch and leader.
 * Pure.
 */
int	tl_drv_fence_ours(const struct tl_drv_fence *want,
	    const struct tl_drv_fence_held *held);

/*
 * How a driver keeps a deposed leader from changing anything (declared
 * as data, like the credential model: tally providers and status show
 * it with its window).
 */
enum tl_drv_fencing {
	/* Nothing on the provider or before calls: not protected. */
	TL_DRV_FENCE_NONE = 0,
	/*
	 * The provider checks the fence in the same transaction, script
	 * or lock as each change: a deposed leader's change never lands.
	 */
	TL_DRV_FENCE_ATOMIC,
	/*
	 * The fence is stored on the provider and read back before each
	 * changing call: a deposed leader's call may land only if the
	 * promotion raised the fence during that one call.
	 */
	TL_DRV_FENCE_BEFORE_CALL,
	/*
	 * Nothing can be stored on the provider: the control plane checks
	 * its own epoch before each call (the stream, epoch.h); the window
	 * is what the declaration states.
	 */
	TL_DRV_FENCE_EPOCH_CHECK
};
/*
 * Under TL_DRV_FENCE_EPOCH_CHECK: a call is made at most this many
 * seconds after the control plane last read its epoch from the
 * replication stream (reactors/epoch.h: tl_ep_check_epoch); the
 * declaration's window states it.
 */
#define TL_DRV_EPOCH_CHECK_S	10
struct tl_drv_fence_decl {
	enum tl_drv_fencing kind;
	const char	*how;		/* one line: where the fence lives */
	const char	*window;	/* one line: what a deposed leader can
					   still do, and for how long */
};
/* The kind's name ("atomic", "before each call", ...). */
const char *tl_drv_fencing_name(enum tl_drv_fencing kind);

/* What one grant is, as the driver sees it. */
struct tl_drv_grant {
	/* The names ops->names derived (PostgreSQL: database, roles). */
	const char	*resource;	/* what holds the data */
	const char	*owner;		/* owns it, cannot log in; "": none */
	const char	*login;		/* this credential's user; "": none */
	/*
	 * Plaintext, wiped after use.  The current credential's, except in
	 * retire_credential under TL_DRV_CRED_MULTI_PASSWORD: there the
	 * password of the version being retired (the one to remove; the
	 * saga decrypts it from that version's intent), and "" under
	 * TL_DRV_CRED_LOGIN_BESIDE (the login itself goes).
	 */
	const char	*password;
	/*
	 * The grant id the driver marks the objects with, and refuses
	 * objects marked for any other grant by; NULL or "": unnamed (the
	 * mark of tally before marks named grants).  adopt_unnamed: an
	 * object with an unnamed mark is taken as this grant's (grants made
	 * before marks named grants) and then marked with grant.
	 */
	const char	*grant;
	int		 adopt_unnamed;
	/*
	 * The mesh (its id, hex) whose mark on this grant's objects may be
	 * taken over by this call, then replaced by this mesh's (tally
	 * adopt recorded it: a home lost and rebuilt); NULL or "": none,
	 * and an object whose mark names a mesh other than
	 * tl_drv_admin.mesh is refused (TL_EREFUSED, why "owned by mesh
	 * 6f1c..., not this one") by every operation that would change
	 * it, and reported by check.
	 */
	const char	*adopt_mesh;
	/*
	 * Drivers whose provider chooses the credential (ops->handle_model;
	 * NULL and unused by every other driver).  handle: the secret
	 * handle of this credential version as the driver last wrote it
	 * (plaintext, at most TL_DRV_HANDLE_MAX - 1 bytes, wiped after
	 * use; the caller records it encrypted, never in plaintext); NULL
	 * or "": none recorded (create and add_credential then make the
	 * object).  handle_out: TL_DRV_HANDLE_MAX bytes of the caller's,
	 * "" on entry; an operation that makes the provider issue a new
	 * secret (a registration, an update that rotates a token) writes
	 * the whole new handle there as soon as the provider answered,
	 * also when it then fails, and the caller records a non-empty one
	 * before anything else, replacing handle.  NULL: the caller cannot
	 * record one, and such an operation is refused (TL_EINVAL).
	 */
	const char	*handle;
	char		*handle_out;
};

/* The longest secret handle a driver writes, with its NUL. */
#define TL_DRV_HANDLE_MAX	2048

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
	/*
	 * The provider's settings that are not secret, as name/value
	 * pairs, NULL-terminated (tl_drv_admin.settings); NULL: none.
	 * compose reads what a field is made of beyond host and port (the
	 * directory driver's root).
	 */
	const char *const *settings;
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

/* The longest connection field value a driver composes. */
#define TL_DRV_VALUE_MAX	511

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
	TL_DRV_DURATION,	/* N[smhd], e.g. 90s, 5m, 1h, 30d */
	TL_DRV_PATH		/* an absolute path, without . or .. parts */
};

struct tl_drv_setting {
	const char	*name;
	const char	*dflt;		/* NULL: required; "": none, derived */
	int		 secret;	/* given with --secret, never --set */
	enum tl_drv_kind kind;
	const char	*description;	/* one line, for refusals and docs */
	/*
	 * The range a TL_DRV_INT value must be in, as the driver takes it
	 * (both 0: any); checked by tl_drv_setting_check, so a derived or
	 * given value the driver would refuse never reaches it.
	 */
	unsigned long long min, max;
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
 * Checks value against s's kind (and its min and max, for an integer
 * that declares them): 0, or TL_EINVAL with why (at least
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

/* --- naming ---------------------------------------------------------- */

/* A name on a provider is at most this long with its NUL. */
#define TL_DRV_NAME_MAX	64

/*
 * What a driver names objects from (ops->names).  Every string is
 * borrowed for the call and NUL-terminated; "" for none.
 */
struct tl_drv_name_in {
	const char	*grant;		/* MODULE/REQ or MODULE/REQ@NODE */
	const char	*resource;	/* the requirement's resource name */
	const char	*node;		/* the instance's node ("": shared) */
	/*
	 * The name the grant's resource was recorded under when it was
	 * provisioned ("": never provisioned): kept, so a grant keeps the
	 * objects it has whatever the scheme does today.
	 */
	const char	*recorded;
	uint64_t	 version;	/* the credential version */
	/* The scheme the grant's first intent recorded (1, 2, ...). */
	uint64_t	 scheme;
	/* The fresh resource a move (tally rebind) at version copies into. */
	int		 move;
	/*
	 * The mesh's naming key (TL_DRV_NAME_KEY_LEN bytes, a subkey of its
	 * master key: core/secret.h), which scheme 3 digests grant ids
	 * with; NULL: not at hand (scheme 3 then gives "" for every name,
	 * which every operation refuses).  Borrowed for the call.
	 */
	const uint8_t	*key;
	/*
	 * The mesh's id (32 hex digits), which scheme 4 digests grant ids
	 * with, so two meshes on one server never share a name; NULL or
	 * not 32 hex digits: scheme 4 gives "" for every name.  Borrowed.
	 */
	const char	*mesh;
	/*
	 * The names the grant adopted from another mesh, as that mesh's
	 * find_marked found them and tally adopt recorded them; NULL: none.
	 * A driver that has find_marked gives these (within what its
	 * credential model says of logins) instead of names of its scheme,
	 * so an adopted grant keeps the objects it took over.  Borrowed.
	 */
	const struct tl_drv_names *adopted;
};

#define TL_DRV_NAME_KEY_LEN	32

/* The names of one grant's credential version on its provider. */
struct tl_drv_names {
	char	resource[TL_DRV_NAME_MAX];	/* what holds the data */
	char	owner[TL_DRV_NAME_MAX];		/* owns it ("": none) */
	char	login[TL_DRV_NAME_MAX];		/* the credential ("": none) */
};

/*
 * The current naming schemes: what a grant's first intent records.  A
 * driver whose names live where a consumer may create names too (RGW
 * buckets are global to the gateway, and a consumer makes its own)
 * declares keyed_names and its grants get TL_DRV_NAMING_KEYED: the
 * digest is keyed by the mesh's naming key, so a consumer cannot
 * compute, and take first, the name of a grant not yet made.  Every
 * other driver's grants get TL_DRV_NAMING.
 */
#define TL_DRV_NAMING		2
#define TL_DRV_NAMING_KEYED	3
/*
 * Scheme 4: scheme 2 with the digest keyed by the mesh id (public, so
 * not for keyed_names drivers, which keep scheme 3, already per mesh):
 * what a home with a mesh id names new grants by.
 */
#define TL_DRV_NAMING_MESH	4

/*
 * The injective scheme drivers share (drivers/naming.c, which states
 * it): names at most max bytes (max < TL_DRV_NAME_MAX), scheme 1 or 2
 * as in->scheme says, every name of the current scheme carrying the
 * digest of the grant id, so two grants never share a name.  Pure,
 * thread-safe.
 */
void	tl_drv_name_scheme(const struct tl_drv_name_in *in, size_t max,
	    struct tl_drv_names *out);
/* The 16 hex digits of BLAKE2b-128 of a grant id that names carry. */
void	tl_drv_name_digest(const char *grant, char out[17]);
/*
 * Scheme 3's: the same digest keyed by key (TL_DRV_NAME_KEY_LEN bytes).
 */
void	tl_drv_name_digest_keyed(const char *grant, const uint8_t *key,
	    char out[17]);

/* --- the rest of the contract, as data --------------------------------- */

/* How a grant's consumer proves who it is (the rotation saga reads it). */
enum tl_drv_credential {
	/* Nothing to rotate (a directory: access is ownership). */
	TL_DRV_CRED_NONE = 0,
	/*
	 * One password per login; a rotation adds a second login beside
	 * the first (add_credential at the new version) and retires the
	 * old one once every holder has the new (retire_credential).
	 */
	TL_DRV_CRED_LOGIN_BESIDE,
	/*
	 * Several passwords on one user (an ACL): every version has the
	 * same login (names gives it), a rotation adds the new password to
	 * it (add_credential) and removes the old one once every holder has
	 * the new (retire_credential, g->password the old one).  The
	 * user's sessions cannot be told apart by password: retire ends
	 * none, and the saga corroborates nothing with sessions.
	 */
	TL_DRV_CRED_MULTI_PASSWORD
};

/* What revoking does, shown before tally acts (tally providers/remove). */
struct tl_drv_revocation {
	int		 destroys;	/* revoke(drop=0) itself loses data */
	int		 retain;	/* revoke(drop=0) keeps the data */
	const char	*revoke;	/* one line: what revoke does */
	const char	*retain_means;	/* one line: what is kept, how */
	const char	*purge;		/* one line: what purge destroys */
	/*
	 * NULL, or one line: what the revocation leaves usable, credentials
	 * already issued from the grant's that stay valid until they
	 * expire.  tally status names it of each revoked grant while it may
	 * still hold, with its lifetime: the value of the assignment setting
	 * residual_setting (a duration, its declared default when unset),
	 * or residual_lifetime when the driver names no setting.
	 */
	const char	*residual;
	const char	*residual_setting;
	const char	*residual_lifetime;
};

/* The capabilities a reactor may need; tl_drv_can says which are there. */
enum tl_drv_cap {
	TL_DRV_CAP_MIGRATE = 0,	/* migrate (in ops->migrate_dialect) */
	TL_DRV_CAP_MOVE,	/* freeze + copy: tally rebind --migrate */
	TL_DRV_CAP_SIZE,	/* size: retained bytes */
	TL_DRV_CAP_ADMIN_ROTATE,	/* set_admin_password */
	TL_DRV_CAP_CHECK,	/* check: tally verify */
	TL_DRV_CAP_ROTATE,	/* add_credential + retire_credential */
	TL_DRV_CAP_CHECK_BULK,	/* check_bulk: a pass in one round trip */
	TL_DRV_CAP_FIND_MARKED	/* find_marked: adopt keyed names */
};

/* A connection field a grant delivers (ops->fields names them all). */
struct tl_drv_field {
	const char	*name;
	int		 secret;	/* holds (or embeds) the credential */
};

struct tl_drv_ops {
	const char	*name;
	const char	*const *types;	/* resource types it grants */
	/* The assignment settings it reads; NULL-name terminated. */
	const struct tl_drv_setting *settings;
	/*
	 * Optional and pure (part of the declaration): the settings taken
	 * together (name, value pairs, NULL-terminated; a missing key has
	 * its default), for a rule no one setting's kind and limits state
	 * (the directory's gid-base + gid-range).  0, or TL_EINVAL with why.
	 */
	int	(*settings_check)(const char *const *settings, char *why);
	/*
	 * NULL-terminated: the connection fields a grant of its types
	 * delivers (what a manifest's env: may map); tally apply refuses
	 * any other (tools/tally/manifest.c).
	 */
	const char	*const *fields;
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
		    enum tl_drv_drift *drift, char (*why)[TL_DRV_WHY_MAX]);
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
	/*
	 * Drops a login role that revoke(drop=0) disabled, after a rotation:
	 * what it owns goes to the owner role first.  NULL: not supported
	 * (the login then stays, disabled).  The rotation saga no longer
	 * calls it: retire_credential is the generic step (for PostgreSQL,
	 * revoke(drop=0) then this).
	 */
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

	/* --- issue 12: the rest of the contract, read as data ------------ */

	/*
	 * NULL-terminated: the tags of its types (`database`, `sql`), how
	 * a person finds providers (tally providers --tag).  A requirement
	 * names a type, never a tag.
	 */
	const char	*const *tags;
	/*
	 * The fields of fields, in the same order and NULL-name terminated,
	 * with whether each is secret (carries the credential: it is
	 * written only to a holder's delivery file, never recorded in an
	 * event).  NULL: none is secret.
	 */
	const struct tl_drv_field *field_info;
	/*
	 * The value of connection field field for a consumer reaching the
	 * provider at ep (host, port) with g (g->resource and g->login as
	 * recorded, g->password the plaintext credential, or NULL when
	 * only fields that are not secret are asked for), into out (cap
	 * bytes, always NUL-terminated).  Returns 0; TL_ENOTFOUND: field
	 * is not one the driver produces (out ""); TL_ETOOBIG: it does not
	 * fit in cap; TL_EINVAL: a secret field without g->password.  Pure:
	 * no session, no I/O, any thread.  out holds the credential when
	 * the field is secret: the caller wipes it.  NULL: only the fields
	 * "host" and "port" are produced, from ep.
	 */
	int	(*compose)(const char *field, const struct tl_drv_endpoint *ep,
		    const struct tl_drv_grant *g, char *out, size_t cap);
	/*
	 * The names of in's grant and version on a provider of this
	 * driver, within the provider's limits, injectively: two grants
	 * never share an object, two versions of a grant share the
	 * resource and the owner but never the login, except under
	 * TL_DRV_CRED_MULTI_PASSWORD, where every version has the same
	 * login (its passwords are the versions).  A name once
	 * derived never changes (the same in gives the same names, byte
	 * for byte, in every release): in->scheme selects the scheme the
	 * grant's objects were made with.  Returns 0, or TL_EINVAL (why)
	 * when in's names cannot make a name of this provider.  Pure, any
	 * thread.  out is filled even when it refuses (the operations
	 * refuse the names again).  NULL: tl_drv_name_scheme with
	 * TL_DRV_NAME_MAX - 1.
	 */
	int	(*names)(const struct tl_drv_name_in *in,
		    struct tl_drv_names *out, char *why);
	/* How consumers authenticate; the rotation saga follows it. */
	enum tl_drv_credential credential;
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
	/* What revoke and purge do (shown before tally acts); never NULL. */
	const struct tl_drv_revocation *revocation;
	/*
	 * The language a requirement's migrations are written in (the
	 * dialect a manifest's migrations: must be in), e.g. "sql/postgres";
	 * NULL with migrate NULL.
	 */
	const char	*migrate_dialect;
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
	/* How it is fenced; NULL reads as TL_DRV_FENCE_NONE. */
	const struct tl_drv_fence_decl *fencing;
	/*
	 * What revoking g now would lose, asked before tally acts (tally
	 * remove shows it, and wants --yes when something is lost): drop
	 * 1 for a revocation that drops the data (a purge, or a provider
	 * whose policy is drop), 0 for one that retains it.  *loses is set
	 * when anything would be lost, and why (TL_DRV_WHY_MAX bytes, never
	 * a secret) gets one line a person reads, on success, saying what
	 * and how much (RabbitMQ: the vhost's queues and messages).  A
	 * resource that is gone loses nothing (0, *loses 0).  Errors as
	 * check.  NULL: the driver cannot tell; what its revocation
	 * declares is all tally shows.
	 */
	int	(*loss)(void *h, const struct tl_drv_grant *g, int drop,
		    int *loses, char *why);
	/*
	 * Nonzero: the provider chooses the credential (an identity
	 * provider's client id and secret), so tally generates no
	 * password: create, add_credential, fix_privileges and
	 * set_password write tl_drv_grant.handle_out, every later call
	 * gets it back in handle, and compose reads the delivered values
	 * from it (g->password is unused).  The consumer's login (what
	 * names gives is only the object's label) may change on each
	 * rotation; rotation_note says how, for tally status and
	 * providers.  0 (every other driver): handle is NULL throughout.
	 */
	int		 handle_model;
	const char	*rotation_note;
	/*
	 * Nonzero: a consumer can create names in the namespace the
	 * driver's names live in (RGW: buckets, global to the gateway), so
	 * new grants are named by TL_DRV_NAMING_KEYED (tl_drv_naming).
	 */
	int		 keyed_names;
	/*
	 * NULL, or one line: what one consumer of this provider can still
	 * do to another consumer's grant that nothing the driver registers
	 * or sets can prevent (the provider's own configuration may), so
	 * that a person knows it: tally status and tally explain show it
	 * beside every grant of the driver.
	 */
	const char	*isolation_note;
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
};

/* The scheme a new grant of ops's types is named by. */
uint64_t tl_drv_naming(const struct tl_drv_ops *ops);

/*
 * Whether ops has capability cap: 1, or 0 with why (at least
 * TL_DRV_WHY_MAX bytes, may be NULL) saying what the driver lacks, in
 * words a refusal can carry ("driver X cannot move data: it has no
 * copy").  Pure, any thread.
 */
int	tl_drv_can(const struct tl_drv_ops *ops, enum tl_drv_cap cap,
	    char *why);
/* Whether field is declared secret by ops (field_info). */
int	tl_drv_field_secret(const struct tl_drv_ops *ops, const char *field);
/* Whether one of ops's tags is tag. */
int	tl_drv_has_tag(const struct tl_drv_ops *ops, const char *tag);
/*
 * ops->compose, or the fallback it documents when compose is NULL:
 * same arguments and errors.
 */
int	tl_drv_compose(const struct tl_drv_ops *ops, const char *field,
	    const struct tl_drv_endpoint *ep, const struct tl_drv_grant *g,
	    char *out, size_t cap);
/* ops->names, or its documented fallback: same arguments and errors. */
int	tl_drv_name(const struct tl_drv_ops *ops,
	    const struct tl_drv_name_in *in, struct tl_drv_names *out,
	    char *why);
/*
 * The default of setting name as ops declares it (NULL: not declared,
 * or declared required); "" when declared without a default.
 */
const char *tl_drv_setting_default(const struct tl_drv_ops *ops,
	    const char *name);

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
