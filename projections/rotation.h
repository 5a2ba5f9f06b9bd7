/*
 * rotation.h - credential rotation with fan-out, as a saga of events.
 *
 *   rotation.started      {grant from to deadline_ns reason}    tally rotate / rotator
 *   credential.issued     {grant version user password(secret)}  tallyd: the intent
 *   credential.activated  {grant version}                        the new login exists
 *   credential.delivered  {grant holder node version sealed}     one per holder
 *   credential.acknowledged {grant holder version}               tally ack / AMQP
 *   credential.retired    {grant version forced cut_off[]}       old login gone
 *   rotation.completed    {grant version}
 *   rotation.abandoned    {grant from to reason}                 grant revoked
 *
 * The new credential is created beside the old one (as the driver's
 * credential model says: a second login beside the first, or a second
 * password on the same user), delivered to every holder, and the old
 * one is retired only when every holder has acknowledged the new one —
 * or, with a deadline, when it passes, recorded as forced with the
 * holders it cut off.  Lockout is impossible by construction: until
 * then both credentials authenticate.
 *
 * State (table grants): rot/GRANT the running rotation, ack/GRANT/vN/
 * HOLDER the acknowledgements, cv/GRANT/N the intent of version N.
 * When credential.activated folds, the grant's version and intent move
 * to the new credential: verification, delivery and env files follow it.
 *
 * The records read here are plain data with fixed-size strings (a
 * copy, not a pointer into the map): they own no memory and outlive
 * the caller's transaction.  Readers take any transaction; the fold is
 * for tl_proj_apply, in the write transaction of the event.  Visitors
 * stop at fn's first non-zero return and return it.  Errors are
 * core/error.h codes: TL_ENOTFOUND (nothing running), TL_ETOOBIG (a
 * key past TL_KEY_MAX), TL_ECORRUPT, ENOMEM, or LMDB's.
 */
#ifndef TL_ROTATION_H
#define TL_ROTATION_H

#include <stdint.h>

#include "grant.h"
#include "record.h"

#define TL_EV_ROT_STARTED		"rotation.started"
#define TL_EV_CRED_ISSUED		"credential.issued"
#define TL_EV_CRED_ACTIVATED	"credential.activated"
#define TL_EV_CRED_ACKED		"credential.acknowledged"
#define TL_EV_CRED_RETIRED		"credential.retired"
#define TL_EV_ROT_COMPLETED	"rotation.completed"
#define TL_EV_ROT_ABANDONED	"rotation.abandoned"

/*
 * A provider's own admin credential (tally rotate --admin), on the
 * provider/ID stream; state in adm/ID (grants table):
 *   admin.rotation.started   {id}
 *   admin.credential.issued  {id password(secret)}   the intent
 *   assignment.configured    (the provider's, with the new secret)
 *   admin.rotation.completed {id}
 */
#define TL_EV_ADM_STARTED		"admin.rotation.started"
#define TL_EV_ADM_ISSUED		"admin.credential.issued"
#define TL_EV_ADM_COMPLETED	"admin.rotation.completed"

#define TL_ROT_STARTED	"started"	/* no new credential yet */
#define TL_ROT_ISSUED	"issued"	/* intent recorded */
#define TL_ROT_ACTIVE	"active"	/* both work; waiting on acks */

struct tl_rotation {
	char		grant[201];
	char		state[16];
	uint64_t	from, to;
	uint64_t	started_seq;
	uint64_t	started_ns;
	uint64_t	deadline_ns;	/* 0: wait for every holder */
	uint64_t	issued_seq;
	char		reason[32];	/* operator | schedule */
};

/* TL_ENOTFOUND when no rotation is running for grant. */
int	tl_rot_get(struct tl_txn *t, const struct tl_proj *p, const char *grant,
	    struct tl_rotation *r);
typedef int (*tl_rot_fn)(const struct tl_rotation *r, void *arg);
int	tl_rot_each(struct tl_txn *t, const struct tl_proj *p, tl_rot_fn fn,
	    void *arg);
/* Has holder (MODULE@NODE) acknowledged version of grant? */
/*
 * The version holder (MODULE@NODE) must acknowledge since a forced
 * rotation cut it off (co/GRANT/HOLDER, kept from credential.retired
 * until the holder acknowledges that version or a later one); 0 when
 * it is not cut off.
 */
/*
 * The max-credential-age of g in seconds (the requirement's own, else
 * its provider's default for the type); 0 when none is set.
 */
uint64_t tl_rot_max_age(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g);
uint64_t tl_rot_cut_off(struct tl_txn *t, const struct tl_proj *p,
	    const char *grant, const char *holder);
int	tl_rot_acked(struct tl_txn *t, const struct tl_proj *p,
	    const char *grant, uint64_t version, const char *holder);

/*
 * The sequence number of the intent of grant's credential version
 * (grant.provisioning, credential.issued or a move's issue: cv/GRANT/N),
 * which holds that version's password encrypted: 0 and *seq, or
 * TL_ENOTFOUND (a log from before the index).
 */
int	tl_rot_version_intent(struct tl_txn *t, const struct tl_proj *p,
	    const char *grant, uint64_t version, uint64_t *seq);

/* A running admin rotation: 0 and *issued_seq (0: not issued yet). */
int	tl_adm_get(struct tl_txn *t, const struct tl_proj *p, const char *id,
	    uint64_t *started_seq, uint64_t *issued_seq);

int	tl_fold_rotation(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_event *ev, struct tl_bnode body);

#endif
