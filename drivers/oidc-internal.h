/*
 * oidc-internal.h - what drivers/oidc_decl.c (the declaration: names,
 * compose) gives drivers/oidc.c (the operations): the secret handle as
 * the driver records it, and the client names tally registers; nothing
 * outside drivers/ includes it.  Pure: libc, libsodium and jansson.
 */
#ifndef TL_DRV_OIDC_INTERNAL_H
#define TL_DRV_OIDC_INTERNAL_H

#include <jansson.h>

#include "decl.h"

#define OI_NAME_MAX	63
#define OI_URL_MAX	512
#define OI_SECRET_MAX	512

/* The declaration: oidc_decl.c. */
extern const struct tl_drv_decl tl_drv_oidc_decl;

/*
 * What a handle holds; every member may be a secret.  adopted: "" for a
 * client tally registered; for one tally adopt took over, its own
 * token_endpoint_auth_method (client_secret_basic or _post), which the
 * driver authenticates it with instead of the requirement's, since its
 * metadata stays as it was until the rotation retires it.
 */
struct oi_hnd {
	char	id[256];
	char	secret[OI_SECRET_MAX];
	char	rat[OI_SECRET_MAX];
	char	uri[OI_URL_MAX];
	char	token[OI_URL_MAX];
	char	adopted[32];
};

/*
 * The string member key of j into out (cap bytes): 0, or -1 when it is
 * missing, empty, not a string or does not fit.
 */
int	tl_drv_oi_str(const json_t *j, const char *key, char *out,
	    size_t cap);
/*
 * g->handle (the JSON object oidc.c's hnd_write makes: client_id,
 * client_secret, registration_access_token, registration_client_uri,
 * token_endpoint, each a non-empty string, and adopted_auth_method for
 * an adopted client) into k: 0, TL_ENOTFOUND (none recorded), TL_EINVAL
 * (why says so; k is wiped).  Pure.
 */
int	tl_drv_oi_hnd_read(const struct tl_drv_grant *g, struct oi_hnd *k,
	    char *why);

/* 1 when s is a client name tally registers ([a-z0-9_-], 1..63). */
int	tl_drv_oi_name_ok(const char *s);
/*
 * Does g's param (a '\n'-joined list; dflt when g's requirement leaves
 * it out) hold item?  grant-types' default is client_credentials.
 */
int	tl_drv_oi_has(const struct tl_drv_grant *g, const char *param,
	    const char *item, const char *dflt);

#endif /* TL_DRV_OIDC_INTERNAL_H */
