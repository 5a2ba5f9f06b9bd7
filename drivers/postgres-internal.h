/*
 * postgres-internal.h - what drivers/postgres_decl.c (the PostgreSQL
 * driver's declaration) gives its operations, drivers/postgres.c and
 * drivers/pg_copy.c; nothing outside drivers/ includes it.  Like the
 * declaration, it needs decl.h only: no libpq.
 */
#ifndef TL_DRV_POSTGRES_INTERNAL_H
#define TL_DRV_POSTGRES_INTERNAL_H

#include <stdint.h>

#include "decl.h"

#define PG_NAME_MAX	63		/* NAMEDATALEN - 1 bytes */
/*
 * The role every login by certificate is a member of, NOLOGIN, made by
 * the driver: what the server's pg_hba.conf line 'hostssl all
 * +tally_cert all cert' names.
 */
#define PG_CERT_GROUP	"tally_cert"

/* The declaration: drivers/postgres_decl.c. */
extern const struct tl_drv_decl tl_drv_postgres_decl;

/*
 * The setting admin-db of settings (name/value pairs, NULL-terminated,
 * as tl_drv_admin.settings; NULL: none): the maintenance database the
 * admin connects to, its declared default when unset or "".  Never
 * NULL; points into settings or static data.
 */
const char *tl_drv_pg_admin_db(const char *const *settings);
/*
 * libpq's sslmode for an admin session to host under settings
 * (tl_drv_tls_mode): disable, require or verify-full (then with
 * sslrootcert the setting ca's file, tl_drv_admin.ca_file).
 */
const char *tl_drv_pg_sslmode(const char *const *settings, const char *host);
/*
 * The setting revoke-public-connect of settings (the same array): 0
 * when it is false (no, false, off, 0), else 1 (its default is yes),
 * so that anything but an explicit no keeps the safe default.
 */
int	tl_drv_pg_revoke_public_connect(const char *const *settings);
/*
 * The setting expiry-backstop of settings in seconds: 0 when it is
 * unset (no expiry: VALID UNTIL 'infinity').
 */
uint64_t tl_drv_pg_backstop(const char *const *settings);

#endif /* TL_DRV_POSTGRES_INTERNAL_H */
