/*
 * decl.h - what a driver is: its declaration.
 *
 * A driver is two things (DESIGN.md rule 9).  Its declaration, here, is
 * data and two pure functions: the types it grants and their tags, its
 * settings with their uses (roles) and defaults (tally reads no default of its
 * own), the fields a grant delivers and which are secret, the credential
 * model, what revocation does, how a deposed leader is fenced, the
 * capabilities it has, the migration dialect, its name limits, and the
 * functions names (the names of a grant's objects) and compose (the
 * value of each connection field).  A declaration needs libc and
 * libsodium only: the CLI, the projections and the deciders read it and
 * link no provider client.  The operations (sessions and calls, over a
 * client library) are driver.h's, linked only by tallyd.
 *
 * Every pointer in a declaration is to static data, valid for the life
 * of the process; every function here is pure and thread-safe.  why,
 * when not NULL, is at least TL_WHY_MAX bytes and receives one line
 * a person can act on; it never holds a secret.
 */
#ifndef TL_DRV_DECL_H
#define TL_DRV_DECL_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

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
	/* The names decl->names derived (PostgreSQL: database, roles). */
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
	 * TL_DRV_CAP_ADOPT (tally adopt).  In create: resource, and login
	 * when not "", exist on the provider and were not made by tally;
	 * create takes them over as the grant's (its owner, marks,
	 * privileges), keeping what is in them and login's credential as
	 * it is (password is not set on it: the rotation that follows
	 * replaces it).  TL_EDRIVER (why) when one is missing, or is
	 * tally's for another grant; TL_EREFUSED when another mesh's.  In
	 * retire_credential: login's credential is the one adopted, which
	 * tally never knew; under TL_DRV_CRED_MULTI_PASSWORD password is
	 * then the one to keep (the new version's) and every other
	 * password of login goes.
	 */
	int		 adopting;
	/*
	 * resource is an object tally adopt took over, in every call of
	 * the grant's: its name is the object's own, not one names
	 * derived, and a driver that otherwise trusts only the names it
	 * derives itself (the directory driver) takes it from resource.
	 */
	int		 adopted;
	/*
	 * TL_DRV_CAP_ACCESS (a requirement's access: and of:): 0, the grant
	 * owns resource (everything above); TL_DRV_ACCESS_READ or
	 * _READ_WRITE, the grant is a login of its own with exactly that
	 * on resource, which another grant owns: owner is that grant's
	 * owner (never changed here), login this grant's.  Every operation
	 * then acts on the login and what it is given alone: create makes
	 * the login and gives it the access (to what the owner has now and
	 * makes later), check verifies both, fix_privileges restores the
	 * access, revoke and retire_credential take the login away; the
	 * resource and its owner are the other grant's and stay as they
	 * are.
	 */
	int		 access;
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
	/*
	 * check only: nonzero also asks whether the grant's consumer could
	 * connect without TLS (TL_DRIFT_PLAINTEXT), which may cost a
	 * connection of its own (PostgreSQL's probe) or a call (a
	 * listener); 0: not asked, and no plaintext warning is reported.
	 * The verifier asks it of a credential's first login, while the
	 * warning is recorded, of every login tally check makes, and at
	 * most once an hour otherwise (reactors/verify.c).
	 */
	int		 posture;
	/*
	 * What the grant's requirement declares of the driver's params
	 * (tl_drv_decl.params): name/value pairs, NULL-terminated, a
	 * list's items joined by '\n' (no item holds one); a param the
	 * requirement leaves out is absent (the driver's default).  NULL:
	 * none.  Read by create, check, fix_privileges and add_credential
	 * (what the provider holds follows the requirement: a change is a
	 * privileges drift that fix_privileges repairs).  Borrowed.
	 */
	const char *const *params;
	/*
	 * Nonzero: the consumer logs in with a certificate of the mesh CA
	 * whose common name is login (the requirement's credential:
	 * certificate; the declaration's credential.cert_login), never a
	 * password: password is "", create, check and fix_privileges make
	 * and hold a login that has none and that the provider maps a
	 * certificate to.
	 */
	int		 cert_login;
	/*
	 * With cert_login: the certificate (PEM) of the mesh CA that signs
	 * the login's certificates, for a provider that pins their issuer
	 * (MariaDB's REQUIRE ISSUER) in create, check and fix_privileges.
	 * NULL: no mesh CA recorded; the driver then pins the subject
	 * alone.  Borrowed.
	 */
	const char	*cert_ca;
};

/*
 * A property a requirement of one of the driver's types may declare
 * (a manifest key beside type: and from:, e.g. an OIDC client's
 * redirect-uris), and what the driver's operations then make of it
 * (tl_drv_grant.params).  Values are UTF-8 without control characters,
 * at most TL_DRV_PARAM_VALUE_MAX bytes each, a list at most
 * TL_DRV_PARAM_ITEMS items; allowed, when not NULL, lists the only
 * values (NULL-terminated).  tally apply refuses a key no driver of the
 * type declares, and a value its params_check refuses.
 */
struct tl_drv_param {
	const char	*name;
	int		 list;		/* a list of values, else one */
	const char *const *allowed;	/* NULL: any (params_check's call) */
	const char	*description;	/* one line, for refusals and docs */
};

#define TL_DRV_PARAM_VALUE_MAX	512
#define TL_DRV_PARAM_ITEMS	16
/* The most params one driver declares. */
#define TL_DRV_PARAMS_DECL_MAX	16
/* Every param of a requirement packed (tl_drv_params_pack), at most. */
#define TL_DRV_PARAMS_MAX	4096

/* The longest secret handle a driver writes, with its NUL. */
#define TL_DRV_HANDLE_MAX	2048

/* What verification found, from the least to the worst. */
enum tl_drv_drift {
	TL_DRIFT_NONE = 0,
	/*
	 * The grant is as tally made it, but its consumer can still log in
	 * without TLS, and only the provider's own configuration (the
	 * operator's, not a grant's) could hold it to TLS: reported with
	 * what to change (in why), never repaired.  A driver reports it
	 * only when it found nothing worse.
	 */
	TL_DRIFT_PLAINTEXT,
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
	/*
	 * The setting ca as a file (tl_drv_admin.ca_file), for a driver
	 * that logs in as the consumer over TLS (the migrator, the
	 * verifier); NULL: none.  compose does not read it.
	 */
	const char	*ca_file;
	/*
	 * Where the consumer finds the provider's CA certificates as a file
	 * (the setting ca), as an opaque token compose copies into a value
	 * wherever the file's path belongs (a field that is the path, a
	 * URI's sslrootcert=): the deliverer turns each copy into a
	 * reference the node resolves to the file it writes
	 * (core/delivery.h).  NULL: no file (no ca set, or the caller
	 * delivers no files): compose leaves the path out, and a field
	 * that is only the path is "".  Only reactors/deliver.c sets it: a
	 * fresh 32 hex digits per delivery (libsodium), so compose copies
	 * it as it is, never encoded or cut; the record (grant.provisioned)
	 * and the verifier compose with NULL.
	 */
	const char	*ca_path;
	/*
	 * Under TL_DRV_CRED_CERTIFICATE: tokens, like ca_path, for where
	 * the holder's node keeps the key it made and the certificate it is
	 * given (the delivery's 'k' item names both files); compose copies
	 * them into the fields that are those paths.  NULL otherwise.
	 */
	const char	*key_path;
	const char	*cert_path;
	/*
	 * Under TL_DRV_CRED_CERTIFICATE: a token for when that certificate
	 * expires, known only where it is issued; a field that is exactly
	 * this token becomes a value the node fills (core/delivery.h's 'n'
	 * item).  NULL otherwise.
	 */
	const char	*not_after;
};

/* The longest connection field value a driver composes. */
#define TL_DRV_VALUE_MAX	511

/*
 * What a setting is to tally itself (its role).  tallyd builds a
 * provider's admin view from the uses alone (reactors/session.c), never
 * from a setting's name: the first non-empty setting for ADMIN_HOST is
 * where it connects (the provider node's routable name when none is
 * set), PORT and ADMIN_USER the same, and the one ADMIN_SECRET
 * setting the admin's secret.  Every other setting is PLAIN: the
 * driver's alone, read by the driver from tl_drv_admin.settings.
 */
enum tl_drv_use {
	TL_DRV_USE_PLAIN = 0,
	TL_DRV_USE_ADMIN_HOST,
	TL_DRV_USE_PORT,		/* the admin's and, unless a grant records
				   its own, the consumers' */
	TL_DRV_USE_ADMIN_USER,
	TL_DRV_USE_ADMIN_SECRET,	/* secret: given with --secret */
	TL_DRV_USE_ADMIN_CERT,	/* the admin's client certificate (PEM) */
	TL_DRV_USE_ADMIN_KEY	/* its private key: a secret (PEM) */
};

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
	TL_DRV_PATH,		/* an absolute path, without . or .. parts */
	TL_DRV_TLS_MODE,	/* verify, require or off (enum tl_drv_tls) */
	/*
	 * PEM certificates (public: a CA's), at most TL_DRV_PEM_MAX bytes,
	 * newlines kept: tally assign --set KEY=FILE reads FILE, and the
	 * log records what it holds, so a standby has it too.
	 */
	TL_DRV_PEM,
	/*
	 * A PEM private key (unencrypted: PRIVATE KEY, EC or RSA), at most
	 * TL_DRV_KEY_MAX bytes, newlines kept: always a secret, read from
	 * standard input (tally assign --secret KEY, up to its END line) or
	 * a mesh file's secrets: {file: PATH}, sealed in the log like any
	 * admin secret.
	 */
	TL_DRV_PEM_KEY,
	/*
	 * The characters of the passwords tally generates (tl_drv_password):
	 * base64url (A-Z a-z 0-9 - _), alnum (A-Z a-z 0-9), hex (0-9 a-f),
	 * symbols (alnum and - _ . ~, at least one of each class: what a
	 * password-complexity check asks, every one of them safe in a URL).
	 */
	TL_DRV_ALPHABET
};

/* A TL_DRV_PEM value is at most this long (bytes, without the NUL). */
#define TL_DRV_PEM_MAX		16384
/* A TL_DRV_PEM_KEY value is at most this long (an RSA-4096 key is 3.3k). */
#define TL_DRV_KEY_MAX		8192

/* How tallyd reaches a provider over the network (the setting tls). */
enum tl_drv_tls {
	TL_DRV_TLS_OFF = 0,	/* plaintext */
	TL_DRV_TLS_REQUIRE,	/* encrypted, the server not verified */
	TL_DRV_TLS_VERIFY	/* the server's certificate chains to the
				   setting ca and names the host tallyd
				   connects to */
};

/*
 * The settings every network driver declares, in its settings array:
 * tls (the default, "", is verify, or off for a loopback admin host:
 * tl_drv_tls_mode) and ca (the CA certificates a verified server's
 * chain must end in).
 */
#define TL_DRV_TLS_SETTINGS \
	TL_DRV_TLS_SETTINGS_SAYING("verify (the default; off for a " \
	    "loopback admin host), require (encrypted, not verified) or " \
	    "off", "a PEM file of the CA certificates the provider's " \
	    "certificate must chain to (read at assign, kept in the log)")
/* The same two settings, described for a driver whose rule differs. */
#define TL_DRV_TLS_SETTINGS_SAYING(tls_says, ca_says) \
	{ "tls", "", 0, TL_DRV_TLS_MODE, tls_says }, \
	{ "ca", "", 0, TL_DRV_PEM, ca_says }

/*
 * The settings of a driver whose provider may ask tallyd for a client
 * certificate in the TLS handshake (PostgreSQL's cert method, MariaDB's
 * REQUIRE X509, Redis's tls-auth-clients, RabbitMQ's verify_peer): the
 * certificate, public and kept in the log, and its key, a secret.
 * Either without the other is refused when a session opens.
 */
#define TL_DRV_CLIENT_CERT_SETTINGS \
	{ "admin-cert", "", 0, TL_DRV_PEM, "a PEM file of the client " \
	    "certificate tallyd presents as the admin, leaf first (read at " \
	    "assign, kept in the log); with admin-key", 0, 0, \
	    TL_DRV_USE_ADMIN_CERT }, \
	{ "admin-key", "", 1, TL_DRV_PEM_KEY, "admin-cert's private key, " \
	    "PEM, unencrypted, read from standard input up to its END line " \
	    "and sealed in the log", 0, 0, TL_DRV_USE_ADMIN_KEY }

/*
 * The passwords tally generates for a provider's consumers (and for its
 * admin, when it rotates the admin's): how long, lo to hi characters as
 * the driver takes them (lo at least TL_DRV_PASSWORD_MIN, hi at most
 * TL_DRV_PASSWORD_MAX), and of which characters (TL_DRV_ALPHABET).  Only a
 * driver whose credential tally generates declares them.
 */
#define TL_DRV_PASSWORD_MIN	24	/* 96 bits and more in every alphabet */
#define TL_DRV_PASSWORD_MAX	128	/* TL_PASSWORD_MAX (core/secret.h) */
#define TL_DRV_PASSWORD_SETTINGS(lo, hi) \
	{ "password-length", "32", 0, TL_DRV_INT, "the length of the " \
	    "passwords tally generates", lo, hi, TL_DRV_USE_PLAIN }, \
	{ "password-alphabet", "base64url", 0, TL_DRV_ALPHABET, "their " \
	    "characters: base64url, alnum (no symbols), hex, or symbols " \
	    "(one of each class, as complexity checks ask)", 0, 0, \
	    TL_DRV_USE_PLAIN }

/*
 * A password of the policy settings (name, value pairs, NULL-
 * terminated) give for a provider of d, where d's declared defaults
 * fill what is not set, into out (TL_PASSWORD_MAX + 1 bytes).  A
 * driver that declares no password-length gets TL_PASSWORD_LEN
 * characters of base64url.  0; TL_EINVAL (why) for a value assign
 * would have refused (a log older than the check).
 */
struct tl_drv_decl;
/*
 * The characters of TL_DRV_ALPHABET value name, and whether a password
 * of them holds one of each class (every_class, may be NULL); NULL for
 * no such alphabet.  Static data.
 */
const char *tl_drv_alphabet(const char *name, int *every_class);
int	tl_drv_password(const struct tl_drv_decl *d,
	    const char *const *settings, char *out, char *why);

/* The mode's name ("verify", "require", "off"). */
const char *tl_drv_tls_name(enum tl_drv_tls mode);
/* Whether host is a loopback address or localhost. */
int	tl_drv_host_loopback(const char *host);
/*
 * The mode settings (name/value pairs, NULL-terminated) ask for when
 * tallyd connects to host: the setting tls, else off for a loopback
 * host and verify for any other.
 */
enum tl_drv_tls tl_drv_tls_mode(const char *const *settings,
	    const char *host);
/*
 * The scheme and host of url (http://HOST[:PORT]/..., https://...):
 * *https 1 or 0, host (cap bytes) without brackets.  0, or TL_EINVAL
 * for another scheme or no host.
 */
int	tl_drv_url_host(const char *url, int *https, char *host, size_t cap);

struct tl_drv_setting {
	const char	*name;
	const char	*dflt;		/* NULL: required; "": none, derived */
	int		 secret;	/* given with --secret, never --set */
	enum tl_drv_kind kind;
	const char	*description;	/* one line, for refusals and docs */
	/*
	 * The range a TL_DRV_INT value (a TL_DRV_DURATION's, in seconds)
	 * must be in, as the driver takes it (both 0: any); checked by tl_drv_setting_check, so a derived or
	 * given value the driver would refuse never reaches it.
	 */
	unsigned long long min, max;
	enum tl_drv_use use;
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
 * TL_WHY_MAX bytes) saying what is wrong.  A secret's value is
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
 * What a driver names objects from (decl->names).  Every string is
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

/* tl_drv_grant.access */
#define TL_DRV_ACCESS_OWN		0
#define TL_DRV_ACCESS_READ		1
#define TL_DRV_ACCESS_READ_WRITE	2

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
	TL_DRV_CRED_MULTI_PASSWORD,
	/*
	 * A certificate per holder, signed by the provider (the mesh CA),
	 * for a key the holder's node makes and never sends (a delivery's
	 * 'k' item, core/delivery.h): no password.  The node asks with a
	 * signing request in its signed report; ops->sign issues one for a
	 * request that asks for exactly what the grant may have.
	 */
	TL_DRV_CRED_CERTIFICATE
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

/*
 * The capabilities a reactor may need, declared as a set
 * (tl_drv_decl.caps, TL_DRV_CAP_BIT each); tl_drv_can says which are
 * there.  A driver's operations are non-NULL exactly for its declared
 * capabilities (check_contract holds every driver to it).
 */
enum tl_drv_cap {
	TL_DRV_CAP_MIGRATE = 0,	/* migrate (in ops->migrate_dialect) */
	TL_DRV_CAP_MOVE,	/* freeze + copy: tally rebind --migrate */
	TL_DRV_CAP_SIZE,	/* size: retained bytes */
	TL_DRV_CAP_ADMIN_ROTATE,	/* set_admin_password */
	TL_DRV_CAP_CHECK,	/* check: tally verify */
	TL_DRV_CAP_ROTATE,	/* add_credential + retire_credential */
	TL_DRV_CAP_CHECK_BULK,	/* check_bulk: a pass in one round trip */
	TL_DRV_CAP_LOSS,	/* loss: what a revocation would lose */
	TL_DRV_CAP_SESSIONS,	/* sessions: a login's sessions counted */
	TL_DRV_CAP_FIND_MARKED,	/* find_marked: adopt keyed names */
	TL_DRV_CAP_ADOPT,	/* create takes over objects (adopting) */
	TL_DRV_CAP_ACCESS,	/* logins below ownership (tl_drv_grant.access) */
	/*
	 * check, on an adopted login (adopting) with the password its
	 * holders use, tells whether they authenticate: the login is the
	 * credential's whole name (tally adopt --password-stdin).
	 */
	TL_DRV_CAP_TRY_PASSWORD
};
#define TL_DRV_CAP_BIT(cap)	(1u << (cap))

/* A connection field a grant delivers (tl_drv_decl.fields lists them). */
struct tl_drv_field {
	const char	*name;
	int		 secret;	/* holds (or embeds) the credential */
};

/*
 * How consumers authenticate (the rotation saga follows it), and who
 * chooses the credential.
 */
struct tl_drv_cred_model {
	enum tl_drv_credential kind;
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
	 * A requirement may ask for credential: certificate (logins by a
	 * certificate of the mesh CA, TL_DRV_CRED_CERTIFICATE's way: a key
	 * made on the holder's node, a certificate per version for the
	 * same login, no password): one line on how the provider maps the
	 * certificate and the one-time server set-up it needs, or NULL
	 * when it cannot, cert_none then saying why (tally apply refuses
	 * it with that).
	 */
	const char	*cert_login;
	const char	*cert_none;
};

/* A driver's declaration: everything tally knows of it without a session. */
struct tl_drv_decl {
	const char	*name;
	const char	*const *types;	/* resource types it grants */
	/*
	 * NULL-terminated, lower case: the provider's own words (its name,
	 * its ports, its terms), which no code outside drivers/ may name
	 * (tests/integration/00_provider_words.sh reads them from here).
	 */
	const char	*const *words;
	/*
	 * NULL-terminated: the tags of its types (`database`, `sql`), how
	 * a person finds providers (tally providers --tag).  A requirement
	 * names a type, never a tag.
	 */
	const char	*const *tags;
	/* The assignment settings it reads; NULL-name terminated. */
	const struct tl_drv_setting *settings;
	/*
	 * Optional: the settings taken together (name, value pairs,
	 * NULL-terminated; a missing key has its default), for a rule no
	 * one setting's kind and limits state (the directory's gid-base +
	 * gid-range).  0, or TL_EINVAL with why.
	 */
	int	(*settings_check)(const char *const *settings, char *why);
	/*
	 * Optional: what settings valid on their own leave open that a
	 * person should know (tally status shows it under the provider):
	 * 1 with one line in note (TL_WHY_MAX bytes), or 0.  Same
	 * settings array as settings_check.
	 */
	int	(*settings_note)(const char *const *settings, char *note);
	/*
	 * Optional, for a driver whose address may be a URL setting (an
	 * RGW's endpoint, an OIDC issuer): how tallyd reaches the provider
	 * with these settings when its admin host is host, the mode
	 * returned and the host it connects to in where (cap bytes).  NULL:
	 * at host, tl_drv_tls_mode(settings, host).  Pure: the driver's
	 * open and tally status read the same answer (tl_drv_reach).
	 */
	enum tl_drv_tls (*reach)(const char *const *settings,
		    const char *host, char *where, size_t cap);
	/*
	 * Nonzero: tls=verify without a ca verifies against the system's
	 * CAs (libcurl's default bundle: an OIDC issuer on the public web);
	 * zero: it is refused (TL_EUNTRUSTED, "no ca").
	 */
	int		 tls_system_ca;
	/*
	 * NULL-name terminated: the connection fields a grant of its types
	 * delivers (what a manifest's env: may map; tally apply refuses any
	 * other), with whether each is secret (carries the credential: it
	 * is written only to a holder's delivery file, never recorded in
	 * an event).
	 */
	const struct tl_drv_field *fields;
	struct tl_drv_cred_model credential;
	/* What revoke and purge do (shown before tally acts); never NULL. */
	const struct tl_drv_revocation *revocation;
	/* How it is fenced; NULL reads as TL_DRV_FENCE_NONE. */
	const struct tl_drv_fence_decl *fencing;
	/*
	 * The params a requirement of its types may declare (NULL-name
	 * terminated; NULL: none), and the rule across them that no one
	 * param's declaration says (pairs as tl_drv_grant.params; 0, or
	 * TL_EINVAL with why); params_check NULL: none.
	 */
	const struct tl_drv_param *params;
	int	(*params_check)(const char *const *params, char *why);
	/* TL_DRV_CAP_BIT of each capability it has. */
	unsigned	 caps;
	/*
	 * The most sessions a pass opens on one provider of this driver at
	 * once; 0: as many as tallyd has workers.  1 for a provider that
	 * makes every change under one lock of its own (the directory
	 * root's fence): more sessions would only wait on each other.
	 */
	unsigned	 sessions_max;
	/*
	 * The language a requirement's migrations are written in (the
	 * dialect a manifest's migrations: must be in), e.g. "sql/postgres";
	 * NULL without TL_DRV_CAP_MIGRATE.
	 */
	const char	*migrate_dialect;
	/*
	 * The longest name (bytes, without the NUL, < TL_DRV_NAME_MAX) the
	 * provider takes for any of a grant's objects; 0: TL_DRV_NAME_MAX - 1.
	 * names keeps to it; without names, tl_drv_name does.
	 */
	size_t		 name_max;
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
	 * The names of in's grant and version on a provider of this
	 * driver, within name_max, injectively: two grants never share an
	 * object, two versions of a grant share the resource and the owner
	 * but never the login, except under TL_DRV_CRED_MULTI_PASSWORD,
	 * where every version has the same login (its passwords are the
	 * versions), and TL_DRV_CRED_CERTIFICATE (its certificates are).  A name once derived never changes (the same in gives
	 * the same names, byte for byte, in every release): in->scheme
	 * selects the scheme the grant's objects were made with.  Returns
	 * 0, or TL_EINVAL (why) when in's names cannot make a name of this
	 * provider.  out is filled even when it refuses (the operations
	 * refuse the names again).  NULL: tl_drv_name_scheme with
	 * name_max.
	 */
	int	(*names)(const struct tl_drv_name_in *in,
		    struct tl_drv_names *out, char *why);
	/*
	 * The value of connection field field for a consumer reaching the
	 * provider at ep (host, port) with g (g->resource and g->login as
	 * recorded, g->password the plaintext credential, or NULL when
	 * only fields that are not secret are asked for), into out (cap
	 * bytes, always NUL-terminated).  Returns 0; TL_ENOTFOUND: field
	 * is not one the driver produces (out ""); TL_ETOOBIG: it does not
	 * fit in cap; TL_EINVAL: a secret field without g->password.  out
	 * holds the credential when the field is secret: the caller wipes
	 * it.  NULL: only the fields "host" and "port" are produced, from
	 * ep.
	 */
	int	(*compose)(const char *field, const struct tl_drv_endpoint *ep,
		    const struct tl_drv_grant *g, char *out, size_t cap);
	/*
	 * NULL-terminated, or NULL: the settings the driver's operations
	 * prepare at assign when they are not given (the mesh CA's key and
	 * certificate, made where libcrypto is linked).  tally assign of a
	 * provider of this driver that gives one of them, or records none
	 * of them yet, asks tallyd --prepare (ops->prepare: driver.h) to
	 * check what is given or make what is not, and records the result
	 * with the rest, secrets sealed like --secret's.
	 */
	const char	*const *prepared;
	/*
	 * NULL, or the only instances: a module providing the driver's
	 * types may declare ("one-per-mesh": a provider there is one of per
	 * mesh, such as its CA); tally apply refuses any other.
	 */
	const char	*instances;
};

/* NULL when there is no such driver. */
const struct tl_drv_decl *tl_drv_decl_find(const char *name);
/* The driver that grants resource type type; NULL when none does. */
const struct tl_drv_decl *tl_drv_decl_for_type(const char *type);
/* NULL-terminated: every driver's name, for manifest validation. */
const char *const *tl_drv_names(void);

/* The scheme a new grant of d's types is named by. */
uint64_t tl_drv_naming(const struct tl_drv_decl *d);
/*
 * Whether d declares capability cap: 1, or 0 with why (may be NULL)
 * saying what the driver lacks, in words a refusal can carry ("driver
 * X cannot move data").
 */
int	tl_drv_can(const struct tl_drv_decl *d, enum tl_drv_cap cap,
	    char *why);
/* Whether field is declared secret by d. */
int	tl_drv_field_secret(const struct tl_drv_decl *d, const char *field);
/* Whether d declares field at all. */
int	tl_drv_has_field(const struct tl_drv_decl *d, const char *field);
/* Whether one of d's tags is tag. */
int	tl_drv_has_tag(const struct tl_drv_decl *d, const char *tag);
/*
 * d->compose, or the fallback it documents when compose is NULL: same
 * arguments and errors.
 */
int	tl_drv_compose(const struct tl_drv_decl *d, const char *field,
	    const struct tl_drv_endpoint *ep, const struct tl_drv_grant *g,
	    char *out, size_t cap);
/* d->names, or its documented fallback: same arguments and errors. */
int	tl_drv_name(const struct tl_drv_decl *d,
	    const struct tl_drv_name_in *in, struct tl_drv_names *out,
	    char *why);
/*
 * The default of setting name as d declares it (NULL: not declared,
 * or declared required); "" when declared without a default.
 */
const char *tl_drv_setting_default(const struct tl_drv_decl *d,
	    const char *name);
/*
 * The i-th (from 0) setting d declares for use, NULL past the last:
 * for (i = 0; (s = tl_drv_setting_for(d, use, i)) != NULL; i++).
 */
const struct tl_drv_setting *tl_drv_setting_for(const struct tl_drv_decl *d,
	    enum tl_drv_use use, size_t i);
/*
 * How tallyd reaches a provider of d with settings at admin host host:
 * d->reach, or host and tl_drv_tls_mode(settings, host); where gets
 * the host (cap bytes).
 */
enum tl_drv_tls tl_drv_reach(const struct tl_drv_decl *d,
	    const char *const *settings, const char *host, char *where,
	    size_t cap);

#endif /* TL_DRV_DECL_H */
