/*
 * mariadb_decl.h - what drivers/mariadb_decl.c (the MariaDB driver's
 * declaration) gives its operations (mariadb-internal.h includes it);
 * nothing outside drivers/ includes it.  Like the declaration, it
 * needs decl.h only: no libmariadb.
 */
#ifndef TL_DRV_MARIADB_DECL_H
#define TL_DRV_MARIADB_DECL_H

#include "decl.h"

#define MDB_DB_MAX	63	/* 64 in MariaDB; TL_DRV_NAME_MAX bounds us */
#define MDB_META	"tally"	/* tally's own database: marks, fence */

/* The declaration: drivers/mariadb_decl.c. */
extern const struct tl_drv_decl tl_drv_mariadb_decl;

/* The server's own databases, NULL-terminated: never a grant's. */
extern const char *const tl_drv_mdb_reserved[];

#endif /* TL_DRV_MARIADB_DECL_H */
