/*
 * rx-internal.h - what the reactors share: providers' admin sides,
 * backoff, grant names, credentials and delivery.  Not for tools.
 */
#ifndef TL_RX_INTERNAL_H
#define TL_RX_INTERNAL_H

#include "drivers/driver.h"
#include "projections/grant.h"
#include "projections/graph.h"
#include "rx.h"

struct work;

/* Driver calls per provider session in one provisioning pass. */
#define TL_RX_PASS_PER_SESSION	32

/*
 * The backoff of writing delivery files (a provider id is never
 * "local:..."); the files that failed are noted in the scratch table
 * TL_ENV_FAILED_TABLE (projections/status.h) for tally status.
 */
#define TL_RX_FILES_BACKOFF	"local:delivery-files"

struct tl_rx_backoff {
	char		id[256];	/* a provider, or a grant's migration */
	uint64_t	next_ns;
	uint64_t	delay_ns;
};

/* A provider's admin side, decrypted for the pass and wiped after. */
struct tl_rx_prov {
	char		 id[130];
	char		 node[64];
	char		 module[64];
	char		 routable[256];
	char		 expose[16];
	char		 host[256];
	char		 port[8];
	char		 user[64];
	char		 db[64];
	char		 password[512];
	unsigned	 mig_timeout;	/* migration-timeout, s; 0: default */
	int		 maint;		/* revoke-public-connect */
	int		 ok;		/* admin side usable this pass */
	/*
	 * The assignment's settings that are not secret, name NUL value NUL
	 * each (tl_rx_prov_settings makes the driver's array of them).
	 */
	char		 setbuf[2048];
	size_t		 setlen;
	const struct tl_drv_ops *ops;
	/*
	 * The fence to check on each session opened on it before a call
	 * (tl_ep_arm sets them, tl_ep_session checks): the epoch, 0 for
	 * none, and the tl_rx's deposed flag.
	 */
	uint64_t	 epoch;
	struct tl_rx	*fence_rx;
	struct work	**w;	/* the provisioner's */
	size_t		 nw, capw;
};

struct sbuf;

struct tl_rx_backoff *tl_rx_backoff_find(struct tl_rx *rx, const char *id,
	    int create);
void	tl_rx_backoff_fail(struct tl_rx *rx, const char *id);
void	tl_rx_backoff_ok(struct tl_rx *rx, const char *id);

/* Settings a provider's driver is given, at most. */
#define TL_RX_SETTINGS_MAX	16
/*
 * pv's settings as tl_drv_admin.settings wants them, in sv (which the
 * caller holds, as long as pv): returns sv.
 */
const char *const *tl_rx_prov_settings(const struct tl_rx_prov *pv,
	    const char *sv[2 * TL_RX_SETTINGS_MAX + 1]);

/* Loads provider id's admin side (decrypting its password) for type. */
int	tl_rx_load_provider(struct tl_txn *t, const struct tl_proj *p,
	    struct tl_rx *rx, const char *id, const char *type,
	    struct tl_rx_prov *pv, char *driver, int *drop);

/*
 * Provider names (reactors/names.c: what the grant's driver's name op
 * derives).  TL_GRANT_NAMING is the scheme a grant's first intent
 * records; a grant keeps the scheme its objects were made with
 * (g->naming).
 */
#define TL_GRANT_NAMING	TL_DRV_NAMING
/* The scheme g's names follow: its own, else TL_GRANT_NAMING. */
uint64_t tl_rx_grant_naming(const struct tl_grant *g);
/* The resource, owner and login of g's credential version. */
void	tl_rx_grant_names(const struct tl_grant *g, uint64_t version,
	    char db[64], char owner[64], char login[64]);
/*
 * The fresh resource a move (tally rebind) at version copies into:
 * never a name the grant had before (versions only grow).
 */
void	tl_rx_move_names(const struct tl_grant *g, uint64_t version,
	    char db[64], char owner[64], char login[64]);
/*
 * The id of the grant g's provider objects were made for, which names
 * and marks them: g's own, but GRANT for the revoked grant GRANT~vN a
 * move leaves (projections/rebind.h), whose objects are GRANT's old ones.
 */
void	tl_rx_grant_origin(const struct tl_grant *g,
	    char out[TL_GRANT_ID_MAX + 1]);

/*
 * A fresh password for grant's credential version into pw, and its
 * ciphertext for the intent event into ct; returns the ciphertext's
 * length.  tl_rx_intent_password reads it back.
 */
size_t	tl_rx_new_credential(struct tl_rx *rx, const char *grant,
	    uint64_t version, char pw[TL_PASSWORD_LEN + 1],
	    uint8_t ct[TL_PASSWORD_LEN + TL_BOX_OVERHEAD]);
int	tl_rx_intent_password(struct tl_rx *rx, struct tl_txn *t,
	    const struct tl_grant *g, char *out);

/* The assignments (nodes) holding g. */
int	tl_rx_grant_holders(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_grant *g, struct tl_nodelist *nl);

/* Rewrites (or removes) module@node's delivery file. */
int	tl_rx_write_env(struct tl_rx *rx, struct tl_txn *t, const char *module,
	    const char *node);

struct tl_ctx;
/*
 * Records provider id down (auth: its admin credential was refused),
 * once per outage and kind; and up again, if it was recorded down.
 */
int	tl_rx_provider_down(struct tl_ctx *c, const char *id, int auth,
	    const char *reason);
int	tl_rx_provider_up(struct tl_ctx *c, const char *id);

/* Delivers grant's current credential to every holder lacking it. */
int	tl_rx_deliver(struct tl_rx *rx, struct tl_ctx *c, const char *grant);
/* Rewrites the delivery files of grant's holders. */
int	tl_rx_files_for(struct tl_rx *rx, const char *grant);

#endif
