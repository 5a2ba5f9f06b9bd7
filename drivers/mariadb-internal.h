/*
 * mariadb-internal.h - what drivers/mariadb_sql.c gives drivers/mariadb.c
 * and drivers/mariadb_migrate.c (and, through mariadb_decl.h, what the
 * declaration gives them); nothing outside drivers/ includes it.
 *
 * Every function writes a line for a person into why (at least
 * TL_WHY_MAX bytes, never a secret) and returns tally's codes
 * (core/error.h) as drivers/driver.h describes them.
 */
#ifndef TL_DRV_MARIADB_INTERNAL_H
#define TL_DRV_MARIADB_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <mysql.h>

#include "driver.h"
#include "mariadb_decl.h"

#define MDB_CONNECT_S	3	/* a whole connection attempt */
#define MDB_IO_S	150	/* one read or write, beyond statement limits */
#define MDB_USER_MAX	80

/*
 * What a connection is made with: host:port (NULL/"": 127.0.0.1:3306),
 * user with password, into db (NULL: none), and its protection (decl.h:
 * enum tl_drv_tls; verify checks the server's certificate against
 * ca_file and the host name).  cert_file and key_file (NULL: none; only
 * with tls not off) name the admin's client certificate and key, which
 * libmariadb opens at every connect: the admin session's memfds
 * (tlsclient.h), never a consumer's.  TL_DRV_MDB_CONN_INIT is plaintext.
 */
struct tl_drv_mdb_conn {
	const char	*host, *port, *user, *password, *db;
	enum tl_drv_tls	 tls;
	const char	*ca_file;
	const char	*cert_file, *key_file;
};
#define TL_DRV_MDB_CONN_INIT	{ NULL, NULL, NULL, NULL, NULL, \
	TL_DRV_TLS_OFF, NULL, NULL, NULL }
/*
 * Connects over TCP as cn says, reading no option file: *out (the caller
 * mysql_close()s it).  TL_EUNREACH / TL_EAUTH / TL_EDRIVER, with the
 * server's or client's error number in *err when err is not NULL (0
 * when connected): what went wrong is read from the number, never the
 * text (1045: the password; 1226: a resource limit of the account;
 * 1040: the server is full).  A certificate that does not verify is
 * TL_EUNTRUSTED, refused before the password is sent.  With cert_file, a
 * server that refuses it in the handshake (a TLS alert naming the
 * certificate, or the connection ended at the handshake while the same
 * login without it gets an answer) is TL_EAUTH.
 */
int	tl_drv_mdb_connect(const struct tl_drv_mdb_conn *cn, MYSQL **out,
	    unsigned *err, char *why);
/* Runs one statement, discarding any rows; step names it in why. */
int	tl_drv_mdb_run(MYSQL *c, const char *sql, const char *step,
	    char *why);
/* A server or client error number as tally's code (connecting: EAUTH). */
int	tl_drv_mdb_errno_rc(unsigned e, int connecting);
/* `name` with backquotes doubled into out (n bytes); TL_ETOOBIG. */
int	tl_drv_mdb_quote_id(const char *name, char *out, size_t n);
/* 's' escaped by mysql_real_escape_string for c; TL_ETOOBIG. */
int	tl_drv_mdb_quote_str(MYSQL *c, const char *s, char *out, size_t n);
/* The mysql_native_password hash, "*" and 40 upper-case hex digits. */
void	tl_drv_mdb_hash(const char *password, char out[42]);
/* TL_EINVAL (why) unless g's names are ones the driver sends. */
int	tl_drv_mdb_grant_ok(const struct tl_drv_grant *g, int need_pw,
	    char *why);

/* ops->migrate (drivers/mariadb_migrate.c, which states the contract). */
int	tl_drv_mdb_migrate(const struct tl_drv_endpoint *ep,
	    const struct tl_drv_grant *g, const struct tl_drv_migration *m,
	    int *already, char *why, int *line);

/*
 * Splitting a migration file: the statements of sql (len bytes) into
 * st (cap entries: offset, length, first line), comments and blank
 * space between statements dropped.  Returns the count, or -1 with why
 * and *line for what cannot be split safely (DELIMITER, compound BEGIN
 * ... END bodies, executable comments, an unterminated quote or
 * comment), or -2 when there are more than cap.
 */
struct tl_drv_mdb_stmt {
	size_t	off, len;
	int	line;
};
int	tl_drv_mdb_split(const char *sql, size_t len,
	    struct tl_drv_mdb_stmt *st, int cap, char *why, int *line);

#endif
