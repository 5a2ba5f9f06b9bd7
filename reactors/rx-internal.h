/*
 * rx-internal.h - what the reactors share besides the pass (pass.h),
 * a provider's admin side (session.h), backoff (backoff.h), credentials
 * (credential.h) and delivery (deliver.h): grant names (names.c) and a
 * provider's outages (outage.c).  Not for tools.
 *
 * Names are written into the caller's buffers, of the sizes given, and
 * always NUL-terminated; nothing here allocates or keeps a pointer.
 * The outage calls append through the caller's decision context (its
 * errors and refusals are projections/ctx.h's).
 */
#ifndef TL_RX_INTERNAL_H
#define TL_RX_INTERNAL_H

#include "drivers/driver.h"
#include "projections/grant.h"
#include "projections/graph.h"
#include "rx.h"

/* Driver calls per provider session in one provisioning pass. */
#define TL_RX_PASS_PER_SESSION	32

/*
 * Provider names (reactors/names.c: what the grant's driver's name op
 * derives).  TL_GRANT_NAMING is the scheme a grant's first intent
 * records; a grant keeps the scheme its objects were made with
 * (g->naming).
 */
#define TL_GRANT_NAMING	TL_DRV_NAMING
/*
 * The scheme g's names follow: its own, else the one its driver's new
 * grants get (tl_drv_naming: TL_GRANT_NAMING, or TL_DRV_NAMING_KEYED).
 */
uint64_t tl_rx_grant_naming(const struct tl_grant *g);
/*
 * As tl_rx_grant_naming, for the scheme a grant's first intent records:
 * a new grant of a driver without keyed names is named by
 * TL_DRV_NAMING_MESH when rx knows its mesh id (rx->mesh), so that two
 * meshes on one server never share a name; a grant already recorded
 * keeps its scheme.  rx may be NULL (no mesh).
 */
uint64_t tl_rx_grant_scheme(const struct tl_rx *rx, const struct tl_grant *g);
/*
 * The mesh whose marks a driver call on g may take over (tally adopt,
 * until g is provisioned or repaired after it), for
 * tl_drv_grant.adopt_mesh; NULL: none.  Borrowed from g.
 */
const char *tl_rx_grant_adopt(const struct tl_grant *g);
/*
 * Whether g's current version (or, before its first provisioning, the
 * next) is the one tally adopt took an object over for
 * (tl_drv_grant.adopting); _login: and it logs in with the login taken
 * over, whose credential tally does not know, so it is never delivered
 * or verified (the rotation begun at provisioning replaces it).
 */
int	tl_rx_grant_adopting(const struct tl_grant *g);
int	tl_rx_grant_adopted_login(const struct tl_grant *g);
/*
 * The resource, owner and login of g's credential version.  rx gives the
 * mesh's master key, from which names of a keyed driver
 * (TL_DRV_NAMING_KEYED) are derived; with rx NULL or no key loaded such
 * names are "" (refused by every operation), never unkeyed.
 */
void	tl_rx_grant_names(const struct tl_rx *rx, const struct tl_grant *g,
	    uint64_t version, char db[64], char owner[64], char login[64]);
/*
 * The fresh resource a move (tally rebind) at version copies into:
 * never a name the grant had before (versions only grow).
 */
void	tl_rx_move_names(const struct tl_rx *rx, const struct tl_grant *g,
	    uint64_t version, char db[64], char owner[64], char login[64]);
/*
 * The id of the grant g's provider objects were made for, which names
 * and marks them: g's own, but GRANT for the revoked grant GRANT~vN a
 * move leaves (projections/rebind.h), whose objects are GRANT's old ones.
 */
void	tl_rx_grant_origin(const struct tl_grant *g,
	    char out[TL_GRANT_ID_MAX + 1]);

/*
 * The params g's requirement declares (drivers/decl.h, struct
 * tl_drv_param), packed (tl_grant_params) into *out, malloc'd, for the
 * caller to free; *out NULL when driver (NULL: the one of g's type)
 * takes none or none is declared.
 * 0; ENOMEM; TL_ETOOBIG (more than TL_DRV_PARAMS_MAX bytes); the log's
 * errors.  A call site unpacks it into TL_RX_PARAMS_SV entries
 * (tl_drv_params_unpack) as tl_drv_grant.params.
 */
#define TL_RX_PARAMS_SV	(2 * TL_DRV_PARAMS_DECL_MAX + 1)
int	tl_rx_grant_params(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g, const char *driver, char **out);

struct tl_ctx;
/*
 * Records provider id down, once per outage and kind (auth: one of
 * TL_RX_DOWN_*: 1 its admin credential was refused, 2 its admin
 * answered but its routable name does not resolve where tallyd runs, 3
 * its TLS certificate does not verify);
 * and up again, if it was recorded down.
 */
#define TL_RX_DOWN_UNREACH	0
#define TL_RX_DOWN_AUTH		1
#define TL_RX_DOWN_UNRESOLVED	2
#define TL_RX_DOWN_UNTRUSTED	3
/*
 * The reason recorded and shown for a provider that refused tally's
 * admin login (TL_EAUTH): the admin secret is missing or refused, the
 * driver's why, and the command that gives it (the secret settings the
 * driver declares), into out (cap bytes, truncated).  pv->ops may be
 * NULL (the names are then not known).
 */
struct tl_rx_prov;
void	tl_rx_auth_reason(const struct tl_rx_prov *pv, const char *why,
	    char *out, size_t cap);
int	tl_rx_provider_down(struct tl_ctx *c, const char *id, int auth,
	    const char *reason);
int	tl_rx_provider_up(struct tl_ctx *c, const char *id);

/*
 * issue.c: one pass over the node.reported recorded since its
 * checkpoint, signing or refusing each certificate request; *waiting
 * when the CA could not sign now (the rest is read again next pass).
 * Errors: the log's, ENOMEM.
 */
int	tl_rx_issue(struct tl_rx *rx, unsigned *issued, unsigned *refused,
	    int *waiting);

/*
 * crl.c: the revocation lists that are wanted, each signed by its CA
 * and recorded (certificate.crl); *wake_ns: a few seconds when a CA
 * could not sign now, else 0.  Errors: the log's, ENOMEM.
 */
int	tl_rx_crl(struct tl_rx *rx, unsigned *published, uint64_t *wake_ns);

#endif
