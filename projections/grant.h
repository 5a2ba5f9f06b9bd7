/*
 * grant.h - the grants projection: what a provider made for a consumer.
 *
 * A grant is identified by its key: MODULE/REQ for a shared requirement
 * (its home is the module) or MODULE/REQ@NODE for a per-instance one
 * (its home is the assignment).  Its stream is grant/KEY.
 *
 * A struct tl_grant is plain data with fixed-size strings: it owns no
 * memory and a copy of the record, not a pointer into the map, so it
 * outlives the transaction it was read in.  Readers take the caller's
 * transaction (read or write); writers (tl_grant_put,
 * tl_grant_work_index) are for folds, in the write transaction that
 * folds the event.  Visitors stop at the first non-zero return of fn
 * and return it.  Errors are core/error.h codes: TL_ENOTFOUND (no such
 * grant), TL_ETOOBIG (a key past TL_KEY_MAX), TL_ECORRUPT (a record
 * that does not decode), ENOMEM, or LMDB's, translated by core/kv.c.
 */
#ifndef TL_GRANT_H
#define TL_GRANT_H

#include <stdint.h>
#include <string.h>

#include "record.h"

#define TL_GRANT_ID_MAX	200

/* States, in the order a grant normally goes through them. */
#define TL_GRANT_REQUESTED		"requested"
#define TL_GRANT_PROVISIONING	"provisioning"
#define TL_GRANT_PROVISIONED	"provisioned"
#define TL_GRANT_FAILED		"failed"
#define TL_GRANT_MISSING		"missing"	/* gone; waits for tally repair */
#define TL_GRANT_REPAIRING		"repairing"	/* tally repair: recreate it */
#define TL_GRANT_REVOKING		"revoking"
#define TL_GRANT_REVOKED		"revoked"
#define TL_GRANT_PURGING		"purging"	/* tally purge: drop its data */
#define TL_GRANT_PURGED		"purged"	/* data destroyed, for good */
#define TL_GRANT_RESTORING		"restoring"	/* tally restore: new credential */
#define TL_GRANT_LOST		"lost"		/* its provider's node is gone for good
						   (tally node lost): data not
						   reachable; tally rebind --empty */

/*
 * The one place the log's historical name of the resource field lives:
 * grant.provisioned's fields and the grant record (and tally's JSON
 * output) carry a grant's resource name under this key since the first
 * release, when PostgreSQL was the only provider.  Old events keep
 * their field names, so it stays; nothing else in projections/,
 * reactors/ or tools/ spells it (tests/integration/00_provider_words.sh
 * allows this line alone).
 */
#define TL_GRANT_OBJECT_KEY	"database"

/*
 * The scope of an embedded private instance's credential
 * (decide_embedded.h): grant MODULE/INSTANCE@NODE, no provider, no
 * driver call; only its password is generated and delivered.
 */
#define TL_GRANT_SCOPE_EMBEDDED	"embedded"
/*
 * What an embedded grant becomes once consolidated onto its node's
 * provider (tally assign --consolidate): a grant of that provider like
 * any other, its env: still the embedded instance's declaration's.
 */
#define TL_GRANT_SCOPE_CONSOLIDATED	"consolidated"
#define TL_GRANT_IS_EMBEDDED(g)	(strcmp((g)->scope, TL_GRANT_SCOPE_EMBEDDED) == 0)

struct tl_grant {
	char		id[TL_GRANT_ID_MAX + 1];
	char		module[64];
	char		req[64];
	char		node[64];	/* "" for shared */
	char		scope[16];	/* shared | per-instance */
	char		type[64];
	char		provider[130];
	char		resource[64];
	char		state[16];
	char		policy[8];	/* of the revocation: retain | drop */
	char		reason[512];	/* why failed / revoking (a driver's
					   why fits: TL_WHY_MAX) */
	uint64_t	state_seq;	/* the event that set the state */
	uint64_t	requested_seq;
	uint64_t	intent_seq;	/* grant.provisioning holding the secret */
	uint64_t	retained_bytes;	/* of a grant revoked with retain */
	uint64_t	version;	/* credential version provisioned */
	uint64_t	attempts;	/* consecutive failures */
	uint64_t	retry_ns;	/* not before this time */
	char		drift[32];	/* kind of an unrepaired drift */
	char		drift_reason[512];
	uint64_t	drift_seq;
	/*
	 * What a check found that tally does not repair and that leaves the
	 * grant healthy (TL_DRIFTK_PLAINTEXT's reason); "": nothing.
	 */
	char		warning[512];
	char		migration[64];	/* last applied file */
	char		blocked[1024];	/* why migrations are blocked */
	uint64_t	migrated_seq;	/* migrations complete as of */
	char		host[256];
	char		port[8];
	/*
	 * The provider object the grant's data lives in, as provisioned
	 * (the driver's resource name); recorded under TL_GRANT_OBJECT_KEY.
	 */
	char		object[64];
	char		user[64];
	char		path[512];	/* a directory grant's (driver's) */
	uint64_t	naming;		/* name scheme (reactors/names.c); 0: none
					   recorded (scheme 1 once versioned) */
	/*
	 * tally adopt (mesh.adopted): the mesh whose objects this grant
	 * took over ("": none), whose id its scheme-4 names are keyed by
	 * for good; adopt_pending until the grant is provisioned or
	 * repaired after the adoption: while it is, the drivers may take
	 * over objects marked by adopt_from (tl_drv_grant.adopt_mesh).
	 */
	char		adopt_from[33];
	uint64_t	adopt_pending;
	/*
	 * The names the grant adopted, as the driver found them by their
	 * mark (mesh.adopted's owner and login beside resource: a driver
	 * whose names cannot be computed from adopt_from, find_marked),
	 * kept for good and given back to its names (reactors/names.c);
	 * all "": the names follow from adopt_from.
	 */
	char		adopt_resource[64];
	char		adopt_owner[64];
	char		adopt_login[64];
	/*
	 * tally adopt MODULE/REQ --resource (grant.adopted): an object
	 * that was not tally's, taken over.  adopt_resource is its name for
	 * every version; adopt_login, when not "", the credential version
	 * adopt_version logs in with (a password tally never knew: not
	 * delivered, not verified, replaced by the rotation begun when the
	 * grant is provisioned).  0: nothing adopted so.
	 */
	uint64_t	adopt_version;
	/*
	 * The last of the requirement's migration files the adopted object
	 * holds already (tally adopt --migrated-through): it and those
	 * before it are recorded as applied, not run; "": none.
	 */
	char		adopt_migrated[64];
	/*
	 * The grant.adopted event (its secret, sealed under
	 * tl_grant_adopt_ad's associated data, is what the driver takes
	 * the object over with: tally adopt --secret-stdin); 0: none.
	 */
	uint64_t	adopt_seq;
	/*
	 * What the password the holders use (tally adopt --password-stdin,
	 * sealed in grant.adopted) found when the object was taken over:
	 * TL_GRANT_HOLDERS_WORKING (the adopted login authenticates with it)
	 * or _FAILING (it does not: the holders are down until tally's
	 * credential reaches them); 0: none given, or not known.
	 */
	uint64_t	adopt_holders;
	/*
	 * Logins by certificate (its requirement's credential: certificate,
	 * as it was when the grant was requested): the version whose login
	 * every version keeps (reactors/names.c), a certificate of the mesh
	 * CA per version and no password; 0: the driver's own credential.
	 */
	uint64_t	cert_login;
	/*
	 * A login below ownership (its requirement's access: and of:, as
	 * they were when it was requested): TL_GRANT_ACCESS_READ or
	 * _READ_WRITE on the resource of grant of, whose names (its
	 * resource and owner, as this grant's first intent found them)
	 * are of_resource and of_owner; 0: the grant owns its resource.
	 */
	uint64_t	access;
	char		of[TL_GRANT_ID_MAX + 1];
	char		of_resource[64];
	char		of_owner[64];
};

#define TL_GRANT_HOLDERS_WORKING	1
#define TL_GRANT_HOLDERS_FAILING	2

#define TL_GRANT_ACCESS_READ		1	/* = TL_DRV_ACCESS_READ */
#define TL_GRANT_ACCESS_READ_WRITE	2

/*
 * The grant key of a requirement instance: M/R, or M/R@N per instance
 * (node NULL or "": shared), into buf of TL_KEY_MAX bytes.
 */
int	tl_grant_key(char *buf, const char *module, const char *req,
	    const char *node);

/*
 * The associated data (TL_KEY_MAX bytes) a secret of grant's
 * grant.adopted is sealed under, by its field: "secret" (what the driver
 * takes the object over with) or "password" (what the holders use, only
 * tried).  tally adopt seals them, tallyd opens them; one field's box
 * does not open as the other's.
 */
void	tl_grant_adopt_ad(char ad[TL_KEY_MAX], const char *grant,
	    const char *field);

/* TL_ENOTFOUND when there is no such grant; *seqp may be NULL. */
int	tl_grant_get(struct tl_txn *t, const struct tl_proj *p, const char *id,
	    struct tl_grant *g, uint64_t *seqp);
int	tl_grant_put(struct tl_txn *t, const struct tl_proj *p, uint64_t seq,
	    const struct tl_grant *g);

/* Visits the grants of a consumer module, or of a provider. */
typedef int (*tl_grant_fn)(const struct tl_grant *g, void *arg);
int	tl_grant_each_of_module(struct tl_txn *t, const struct tl_proj *p,
	    const char *module, tl_grant_fn fn, void *arg);
int	tl_grant_each_of_provider(struct tl_txn *t, const struct tl_proj *p,
	    const char *provider, tl_grant_fn fn, void *arg);
/* The logins below grant owner (their access: and of:). */
int	tl_grant_each_reader(struct tl_txn *t, const struct tl_proj *p,
	    const char *owner, tl_grant_fn fn, void *arg);
int	tl_grant_each(struct tl_txn *t, const struct tl_proj *p,
	    tl_grant_fn fn, void *arg);
/*
 * The provisioner's work index, kept by the grants fold (rebuilt with
 * it): gw/PROVIDER SEQ GRANT for every grant requested, provisioning,
 * failed, repairing, revoking, purging or restoring, SEQ its state_seq
 * (so oldest first); gwp/PROVIDER their number; gd/GRANT for a grant
 * provisioned (or given a new credential) until a credential.delivered
 * of its version is folded.  What it does not know: a holder assigned
 * after a delivery, a delivery file removed (the provisioner's sweep).
 *
 * tl_grant_work_providers visits each provider with work and its count;
 * tl_grant_each_work_on a provider's, oldest first; both stop when fn
 * returns non-zero and return that.  tl_grant_each_undelivered visits
 * the gd/ grants.
 */
typedef int (*tl_grant_provider_fn)(const char *provider, uint64_t n,
	    void *arg);
int	tl_grant_work_providers(struct tl_txn *t, const struct tl_proj *p,
	    tl_grant_provider_fn fn, void *arg);
int	tl_grant_each_work_on(struct tl_txn *t, const struct tl_proj *p,
	    const char *provider, tl_grant_fn fn, void *arg);
int	tl_grant_each_undelivered(struct tl_txn *t, const struct tl_proj *p,
	    tl_grant_fn fn, void *arg);
/*
 * For a fold that changes a grant's record: moves its entries from old
 * to g; undelivered: g has a credential to deliver.  The migrator's and
 * the rotator's entries (below) follow g too.  old is NULL only for a
 * grant that has no record yet (its first grant.requested): it has no
 * entries then, and none is looked up.
 */
int	tl_grant_work_index(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *old, const struct tl_grant *g,
	    int undelivered);

/*
 * The migrator's and the rotator's indexes, kept by the folds with the
 * work index (rebuilt with it), so that neither pass walks the grants
 * at rest (DESIGN.md rule 10):
 *   gmw/GRANT         exactly while the grant is provisioned without
 *                     drift and a holder's assignment is not marked
 *                     ready, or a file of its requirement's migrations
 *                     is not applied with its checksum (a file to run,
 *                     a retry, a block);
 *   grs/DUE GRANT     exactly while it is provisioned (not embedded),
 *                     rotates on a schedule (a max-credential-age, the
 *                     requirement's or its provider's) and no rotation
 *                     runs: DUE, 16 hex digits, is its intent's time
 *                     plus the max age, in ns since the epoch, so the
 *                     entries sort by due time; grd/GRANT holds DUE;
 *   gpa/PROVIDER      the max ages the provider's types declare.
 * The folds recompute a grant's entries when its record changes, when
 * a rotation starts or ends (the rotation fold), when an assignment of
 * its module is made, configured, ready or removed and when its
 * requirement or module is declared again or withdrawn, and a
 * provider's grants when its max ages change.  TL_GRANT_DUE_MARK is set
 * by the fold of event 1 (projections/proj.c): without it the
 * projections were built by a tally before these indexes, which they
 * lack until tally rebuild; tl_grant_due_indexed says which.
 *
 * tl_grant_each_migrating visits the gmw/ grants;
 * tl_grant_each_rotation_due the grs/ grants due at or before now,
 * earliest first.  tl_grant_due_index recomputes g's entries (for a
 * fold that changed what they depend on outside g's record).
 */
#define TL_GRANT_DUE_MARK	"gdue"
/*
 * The max-credential-age of g in seconds (the requirement's own, else
 * its provider's default for the type); 0 when none is set
 * (tl_rot_max_age, rotation.h, says the same).
 */
uint64_t tl_grant_max_age(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g);
/*
 * The rotation-window of g (core/window.h: the requirement's own, else
 * its provider's for the type) into out (cap bytes); "" when none is
 * set: a scheduled rotation may start at any time.
 */
void	tl_grant_window(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g, char *out, size_t cap);
/*
 * The params g's requirement declares for its driver (drivers/decl.h,
 * struct tl_drv_param), packed into out (cap bytes) as name NUL value
 * NUL ... NUL (tl_drv_params_unpack reads it); out[0] NUL when none.
 * A requirement's current declaration: a change reaches the provider
 * at its next verification (a privileges drift).  0; TL_ETOOBIG when
 * they do not fit (out then holds none); the log's errors.
 */
int	tl_grant_params(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g, char *out, size_t cap);
int	tl_grant_each_migrating(struct tl_txn *t, const struct tl_proj *p,
	    tl_grant_fn fn, void *arg);
int	tl_grant_each_rotation_due(struct tl_txn *t, const struct tl_proj *p,
	    uint64_t now, tl_grant_fn fn, void *arg);
int	tl_grant_due_indexed(struct tl_txn *t, const struct tl_proj *p);
int	tl_grant_due_index(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g);
/*
 * When g's next scheduled rotation is due, ns since the epoch, into
 * *due (0: never): its intent's time plus its max-credential-age, or
 * its certificates' renewal point (certificate.issued's renew_at, for
 * the grant's version) when sooner.  Provisioned, not embedded, no
 * rotation running, else 0.  The log's errors.
 */
int	tl_grant_rotation_due(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g, uint64_t *due);
/*
 * Whether g's credential is certificates with a renewal point recorded
 * (certificate.issued's renew_at): its rotation calls nothing at the
 * provider.
 */
int	tl_grant_renews_certificates(struct tl_txn *t,
	    const struct tl_proj *p, const struct tl_grant *g);

/*
 * The credential version delivered to holder (MODULE@NODE), 0 if none:
 * grants keeps d/GRANT/HOLDER for every credential.delivered.
 */
uint64_t tl_grant_delivered(struct tl_txn *t, const struct tl_proj *p,
	    const char *grant, const char *holder);

/* The grants fold: for tl_proj_apply, in the event's write transaction. */
int	tl_fold_grants(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_event *ev, struct tl_bnode body);

#endif
