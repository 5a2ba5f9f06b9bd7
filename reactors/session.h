/*
 * session.h - a provider's admin side, loaded for one pass.
 *
 * tl_rx_load_provider fills a caller's struct tl_rx_prov (plain data:
 * it owns no memory but the provisioner's w array, which the
 * provisioner frees) from the graph in the caller's transaction, the
 * admin password and client key decrypted into it: the caller wipes
 * them (tl_rx_prov_wipe) when done, also after an error, and keeps the
 * struct in tl_secret_* memory if it outlives the call.  Errors:
 * TL_ENOTFOUND (no such provider, node or assignment), TL_ETOOBIG (a
 * key past TL_KEY_MAX), TL_ESECRET (the password does not decrypt),
 * TL_ECORRUPT, LMDB's.  pv->ops is NULL for a driver this build lacks.
 */
#ifndef TL_RX_SESSION_H
#define TL_RX_SESSION_H

#include <stddef.h>

#include "drivers/driver.h"
#include "projections/record.h"
#include "rx.h"

struct work;

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
	char		 password[512];
	/*
	 * The admin's client key (a setting of use TL_DRV_USE_ADMIN_KEY,
	 * decrypted like the password; "": none), given to the driver with
	 * the setting of use TL_DRV_USE_ADMIN_CERT (tl_rx_prov_admin).
	 */
	char		 client_key[TL_DRV_KEY_MAX + 1];
	unsigned	 mig_timeout;	/* migration-timeout, s; 0: default */
	int		 ok;		/* admin side usable this pass */
	/*
	 * The assignment's settings that are not secret, name NUL value NUL
	 * each (tl_rx_prov_settings makes the driver's array of them).
	 */
	char		 setbuf[2 * TL_DRV_PEM_MAX + 4096];	/* ca, admin-cert */
	/*
	 * The setting ca written where a client library that wants a file
	 * reads it (HOME/tls/ca-DIGEST.pem: tl_rx_load_provider); "": no
	 * ca set.
	 */
	char		 ca_file[1200];
	size_t		 setlen;
	const struct tl_drv_decl *decl;	/* NULL: a driver this build lacks */
	const struct tl_drv_ops *ops;	/* tl_drv_ops_of(decl) */
	/*
	 * The fence to check on each session opened on it before a call
	 * (tl_ep_arm sets them, tl_ep_session checks): the epoch, 0 for
	 * none, and the tl_rx's deposed flag.
	 */
	uint64_t	 epoch;
	char		 leader[33];
	char		 mesh[33];
	struct tl_rx	*fence_rx;
	struct work	**w;	/* the provisioner's */
	size_t		 nw, capw;
};

/*
 * A fresh password as pv's policy says (password-length,
 * password-alphabet: tl_drv_password); pv NULL, a driver this build
 * lacks, or a policy a log older than the check holds (logged):
 * TL_PASSWORD_LEN characters of base64url.  pw: TL_PASSWORD_MAX + 1.
 */
void	tl_rx_prov_password(struct tl_rx *rx, const struct tl_rx_prov *pv,
	    char *pw);

/* Wipes what pv holds that is secret (its password and client key). */
void	tl_rx_prov_wipe(struct tl_rx_prov *pv);

/* Settings a provider's driver is given, at most. */
#define TL_RX_SETTINGS_MAX	16
/*
 * pv's settings as tl_drv_admin.settings wants them, in sv (which the
 * caller holds, as long as pv): returns sv.
 */
const char *const *tl_rx_prov_settings(const struct tl_rx_prov *pv,
	    const char *sv[2 * TL_RX_SETTINGS_MAX + 1]);

/*
 * The one way a provider's admin view is built from pv: a (zeroed here
 * first) borrows pv's strings and sv (the caller's, as for
 * tl_rx_prov_settings) and, when pv is armed (tl_ep_arm), f (the
 * caller's), filled with pv's fence.  Valid while pv, sv and f are.
 */
void	tl_rx_prov_admin(const struct tl_rx_prov *pv,
	    const char *sv[2 * TL_RX_SETTINGS_MAX + 1], struct tl_drv_fence *f,
	    struct tl_drv_admin *a);

/* For whom tl_rx_consumer_endpoint composes. */
enum tl_rx_ep_for {
	TL_RX_EP_HOLDER = 0,	/* a holder of the grant, on its node */
	TL_RX_EP_RECORD,	/* grant.provisioned's fields: no one node */
	TL_RX_EP_CHECK		/* the verifier, logging in as the consumer */
};

struct tl_grant;

/*
 * Where a consumer of grant g reaches provider pv: the one rule the
 * deliverer, the provisioner's record and the verifier follow, so what
 * is delivered, recorded and checked is one endpoint.  ep borrows host
 * (the caller's, 256 bytes), pv's port and pv's settings through sv
 * (which the driver's compose reads beside host and port: an RGW's
 * endpoint, a directory's root); valid while pv, sv and host are.
 *   host: pv's routable name; for a provider exposed local, a holder on
 *	node == pv's node reaches it over loopback (127.0.0.1), and the
 *	check logs in where tallyd administers it (pv->host), since
 *	tallyd may run elsewhere.
 *   port: for a holder and the check, the port recorded for g (what
 *	was delivered), else pv's; the record is made from pv's.
 * g may be NULL (nothing recorded), node NULL but for a holder.
 */
void	tl_rx_consumer_endpoint(const struct tl_rx_prov *pv,
	    const struct tl_grant *g, enum tl_rx_ep_for who, const char *node,
	    const char *sv[2 * TL_RX_SETTINGS_MAX + 1], char host[256],
	    struct tl_drv_endpoint *ep);

/* Loads provider id's admin side (decrypting its password) for type. */
int	tl_rx_load_provider(struct tl_txn *t, const struct tl_proj *p,
	    struct tl_rx *rx, const char *id, const char *type,
	    struct tl_rx_prov *pv, char *driver, int *drop);

#endif
