/*
 * mariadb.c - the MariaDB driver: one database and one user per grant.
 * These are its operations; its declaration (type, settings, fields,
 * revocation, fencing, names, compose) is mariadb_decl.c's.
 *
 * What a grant is on the server (create makes it, check verifies it,
 * fix_privileges restores it):
 *
 *   resource	a database, utf8mb4;
 *   login	a user 'LOGIN'@'%' authenticated by mysql_native_password,
 *		with ALL PRIVILEGES on the resource's database and nothing
 *		else: no global privilege (USAGE only), no GRANT OPTION, no
 *		other database, table, column or routine privilege, no
 *		resource limit (MAX_USER_CONNECTIONS, MAX_QUERIES_PER_HOUR,
 *		MAX_UPDATES_PER_HOUR, MAX_CONNECTIONS_PER_HOUR,
 *		MAX_STATEMENT_TIME all 0), and no other account of that name
 *		on another host (one would shadow 'LOGIN'@'%' for
 *		connections from there); REQUIRE SSL when the provider's
 *		setting tls is not off (the user cannot log in without TLS,
 *		as the consumer is told to connect: mariadb_decl.c's
 *		ssl_mode), REQUIRE NONE when it is off.
 *
 * MariaDB has no owner of a database: objects belong to the database, so
 * the second login of a rotation sees and may change exactly what the
 * first did, and dropping a login leaves its tables.  g->owner is not
 * used.  (Views and routines keep their DEFINER: one defined by a login
 * that is later retired fails with SQL SECURITY DEFINER; consumers that
 * rotate define them SQL SECURITY INVOKER.)
 *
 * Marks.  MariaDB has no comment on a user, so what tally made is
 * recorded in its own database on the server, `tally`, table `marks`
 * (kind 'd' database / 'u' user, name, grant id, mesh id), written BEFORE
 * the object is made: an object that exists without a mark is someone
 * else's and is never taken over but by tally adopt (create with
 * g->adopting: adopt_takeover), one whose mark names another grant is
 * that grant's and never handed to this one, and one another mesh marked
 * is refused (TL_EREFUSED) unless the call adopts that mesh.  A mark with
 * an empty grant id is the unnamed mark (decl.h: adopt_unnamed); one
 * with an empty mesh is of before marks named meshes (this mesh's).  The
 * same database holds the fences (table `fences`, a row per mesh).  Nothing else of tally's
 * lives on the server; the admin needs every privilege WITH GRANT OPTION
 * (it grants ALL on the grants' databases).
 *
 * Safety: identifiers reach SQL between backquotes with backquotes
 * doubled (the server's quoting rule; the client library has no function
 * for it), and names are [a-z0-9_-] anyway (refused otherwise); string
 * values only through mysql_real_escape_string (which follows the
 * session's NO_BACKSLASH_ESCAPES).  A database name in GRANT is a
 * pattern (`_` and `%` are wildcards there), so the GRANT names it with
 * both escaped: granting `a_b`.* would also grant `aXb`.  Passwords are
 * sent as their mysql_native_password hash, "*" and the hex of
 * SHA1(SHA1(password)) (OpenSSL's SHA-1: libmariadb exports no hash),
 * with IDENTIFIED VIA mysql_native_password USING '*...': no statement,
 * and so no server log, holds a plaintext password; check_bulk compares
 * that hash with mysql.global_priv's authentication_string.
 *
 * Errors: TL_EUNREACH when no server answered (client errors 2002-2013,
 * too many connections, shutting down), TL_EAUTH when the admin is
 * refused (1045, 1044, 1698), TL_EINVAL for a grant the driver will not
 * touch (a bad name, an object of another grant or not tally's),
 * TL_EREFUSED for an object another mesh marked or a change under a
 * fence no longer this session's ("deposed: ..."), TL_EDRIVER for any
 * other server error; why names the step and the
 * server's error number and message.  Connections give up after
 * MDB_CONNECT_S; reads and writes after MDB_IO_S.
 *
 * The admin's client certificate (admin-cert, admin-key: tlsclient.h,
 * for an account REQUIRE X509 / SUBJECT / ISSUER) is checked before
 * anything is sent and given to libmariadb as MYSQL_OPT_SSL_CERT and
 * _KEY, two memfds the handle keeps open (libmariadb opens the files at
 * every connect: a reconnect, the fence's session); the key never
 * reaches a disk.  Only admin sessions present it, never a login as the
 * consumer or a migration.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>
#include <errmsg.h>
#include <mysqld_error.h>
#include <openssl/evp.h>

#include "core/error.h"
#include "core/secret.h"
#include "core/x509.h"
#include "driver.h"
#include "mariadb-internal.h"
#include "tlsclient.h"
#include "util.h"

#define MDB_SQL_MAX	4096
#define MDB_FRESH_NS	1000000000u	/* no ping within 1 s of a use */
#define MDB_MESH_MAX	65		/* a mesh id, hex, and the NUL */

struct tl_drv_mdb {
	MYSQL		*c;
	char		*host, *port, *user, *password;
	/* How the admin sessions are protected (decl.h: tl_drv_tls_mode). */
	enum tl_drv_tls	 tls;
	char		*ca_file;
	/* The admin's client certificate, open while the handle lives. */
	struct tl_drv_cert_files cf;
	int		 meta;		/* tally.marks exists */
	uint64_t	 used_ns;	/* last taken as alive (monotonic) */
	char		 privcols[1024];	/* CONCAT(...) of mysql.db's */
	char		 privwant[64];	/* what create sets: Y.. N(grant) */
	/* What a login below ownership is given (g->access): read, write. */
	char		 privread[64], privrw[64];
	char		 mesh[MDB_MESH_MAX];	/* admin->mesh; "": before ids */
	/*
	 * admin->fence, copied (fenced 0: a reader's session); fc holds
	 * the fence row for one changing call (fence_hold).
	 */
	int		 fenced;
	char		 fmesh[MDB_MESH_MAX];
	uint64_t	 fepoch;
	char		 fleader[TL_DRV_LEADER_MAX];
	MYSQL		*fc;
};

/*
 * An admin session as the handle says, its protection and client
 * certificate included.  An account that refused us is told apart by
 * what was presented: with admin-cert, its subject (the account's
 * REQUIRE may name another); with neither a certificate nor a password,
 * that an account REQUIRE X509 wants one.
 */
static int
admin_connect(const struct tl_drv_mdb *p, MYSQL **out, char *why)
{
	struct tl_drv_mdb_conn cn = TL_DRV_MDB_CONN_INIT;
	unsigned e;
	int rc;

	cn.host = p->host;
	cn.port = p->port;
	cn.user = p->user;
	cn.password = p->password;
	cn.tls = p->tls;
	cn.ca_file = p->ca_file;
	if (p->cf.certfd >= 0) {
		cn.cert_file = p->cf.cert;
		cn.key_file = p->cf.key;
	}
	if ((rc = tl_drv_mdb_connect(&cn, out, &e, why)) != TL_EAUTH ||
	    why == NULL)
		return rc;
	if (p->cf.certfd >= 0)
		tl_drv_why_add(why, "admin-cert presented: %s", p->cf.subject);
	else if (e == ER_ACCESS_DENIED_ERROR && (p->password == NULL ||
	    *p->password == '\0'))
		tl_drv_why_add(why, "no password and no client certificate "
		    "given: an account REQUIRE X509 or SUBJECT needs "
		    "admin-cert and admin-key");
	return rc;
}

static int
query(MYSQL *c, const char *sql, MYSQL_RES **res, const char *step,
    char *why)
{
	unsigned e;
	int rc;

	*res = NULL;
	if (mysql_real_query(c, sql, strlen(sql)) != 0 ||
	    (*res = mysql_store_result(c)) == NULL) {
		e = mysql_errno(c);
		rc = tl_drv_mdb_errno_rc(e, 0);
		return tl_drv_why(why, rc, "%s: %u %s", step, e, e != 0 ?
		    mysql_error(c) : "no result");
	}
	return 0;
}

static int
quote_pattern(const char *name, char *out, size_t n)
{
	char pat[2 * TL_DRV_NAME_MAX + 2];
	size_t o = 0;

	for (; *name != '\0' && o + 3 < sizeof(pat); name++) {
		if (*name == '_' || *name == '%' || *name == '\\')
			pat[o++] = '\\';
		pat[o++] = *name;
	}
	pat[o] = '\0';
	return tl_drv_mdb_quote_id(pat, out, n);
}

/* runf's twin over a va_list. */
static int
vrunf(MYSQL *c, const char *step, char *why, const char *fmt, va_list ap)
{
	char sql[MDB_SQL_MAX];
	int rc;

	if ((rc = tl_drv_vsqlf(sql, sizeof(sql), why, fmt, ap)) != 0)
		return tl_drv_why(why, rc, "%s: statement too long", step);
	return tl_drv_mdb_run(c, sql, step, why);
}

static int
runf(MYSQL *c, const char *step, char *why, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
runf(MYSQL *c, const char *step, char *why, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vrunf(c, step, why, fmt, ap);
	va_end(ap);
	return rc;
}

static int
priv_columns(struct tl_drv_mdb *p, char *why)
{
	MYSQL_RES *r;
	MYSQL_ROW row;
	size_t o, w = 0;
	int rc;

	if ((rc = query(p->c, "SELECT COLUMN_NAME FROM information_schema."
	    "COLUMNS WHERE TABLE_SCHEMA = 'mysql' AND TABLE_NAME = 'db' AND "
	    "COLUMN_NAME LIKE '%\\_priv' ORDER BY ORDINAL_POSITION", &r,
	    "reading mysql.db's privilege columns", why)) != 0)
		return rc;
	o = (size_t)snprintf(p->privcols, sizeof(p->privcols), "CONCAT(''");
	while ((row = mysql_fetch_row(r)) != NULL && row[0] != NULL &&
	    w + 1 < sizeof(p->privwant)) {
		char id[80];

		if (tl_drv_mdb_quote_id(row[0], id, sizeof(id)) != 0 ||
		    o + strlen(id) + 8 >= sizeof(p->privcols))
			break;
		o += (size_t)snprintf(p->privcols + o, sizeof(p->privcols) - o,
		    ",d.%s", id);
		p->privwant[w] = strcmp(row[0], "Grant_priv") == 0 ? 'N' : 'Y';
		p->privread[w] = strcmp(row[0], "Select_priv") == 0 ? 'Y' : 'N';
		p->privrw[w++] = strcmp(row[0], "Select_priv") == 0 ||
		    strcmp(row[0], "Insert_priv") == 0 ||
		    strcmp(row[0], "Update_priv") == 0 ||
		    strcmp(row[0], "Delete_priv") == 0 ? 'Y' : 'N';
	}
	mysql_free_result(r);
	p->privwant[w] = p->privread[w] = p->privrw[w] = '\0';
	snprintf(p->privcols + o, sizeof(p->privcols) - o, ")");
	if (w == 0)
		return tl_drv_why(why, TL_EDRIVER, "mysql.db has no privilege "
		    "columns the admin can read");
	return 0;
}

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The session, reconnected when it is gone.  A session used within the
 * last MDB_FRESH_NS whose last statement did not lose the connection is
 * taken as alive without a ping: a round trip saved per operation in a
 * pass (a session the server dropped in between fails that operation
 * with TL_EUNREACH, and the next one reconnects).
 */
static int
ensure(struct tl_drv_mdb *p, char *why)
{
	uint64_t now = mono_ns();
	int rc;

	if (p->c != NULL && now - p->used_ns < MDB_FRESH_NS &&
	    tl_drv_mdb_errno_rc(mysql_errno(p->c), 0) != TL_EUNREACH) {
		p->used_ns = now;
		return 0;
	}
	if (p->c != NULL && mysql_ping(p->c) == 0) {
		p->used_ns = now;
		return 0;
	}
	if (p->c != NULL) {
		mysql_close(p->c);
		p->c = NULL;
	}
	if ((rc = admin_connect(p, &p->c, why)) != 0)
		return rc;
	if ((rc = tl_drv_mdb_run(p->c, "SET SESSION sql_mode = "
	    "'STRICT_ALL_TABLES', SESSION max_statement_time = 120, "
	    "SESSION lock_wait_timeout = 30", "session settings", why)) != 0)
		return rc;
	if (p->privwant[0] == '\0' && (rc = priv_columns(p, why)) != 0)
		return rc;
	p->used_ns = mono_ns();
	return 0;
}

/* tally's own database: made on first need, kept by the handle. */
static int
ensure_meta(struct tl_drv_mdb *p, char *why)
{
	MYSQL_RES *r;
	int rc;

	if (p->meta)
		return 0;
	/*
	 * Looked up first: DDL, even IF NOT EXISTS, takes locks.  A marks
	 * table of before marks named meshes gains the column mesh, ''
	 * in every row it has (such a mark is taken as this mesh's).
	 */
	if ((rc = query(p->c, "SELECT 1 FROM information_schema.COLUMNS WHERE "
	    "TABLE_SCHEMA = '" MDB_META "' AND TABLE_NAME = 'marks' AND "
	    "COLUMN_NAME = 'mesh'", &r, "looking up " MDB_META ".marks",
	    why)) != 0)
		return rc;
	p->meta = mysql_num_rows(r) > 0;
	mysql_free_result(r);
	if (p->meta)
		return 0;
	if ((rc = tl_drv_mdb_run(p->c, "CREATE DATABASE IF NOT EXISTS "
	    "`" MDB_META "`", "creating database " MDB_META, why)) != 0 ||
	    (rc = tl_drv_mdb_run(p->c, "CREATE TABLE IF NOT EXISTS `" MDB_META
	    "`.`marks` (kind CHAR(1) NOT NULL, name VARCHAR(80) NOT NULL, "
	    "grant_id VARCHAR(255) NOT NULL, mesh VARCHAR(64) NOT NULL "
	    "DEFAULT '', PRIMARY KEY (kind, name)) "
	    "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
	    "creating " MDB_META ".marks", why)) != 0 ||
	    (rc = tl_drv_mdb_run(p->c, "ALTER TABLE `" MDB_META "`.`marks` ADD "
	    "COLUMN IF NOT EXISTS mesh VARCHAR(64) NOT NULL DEFAULT ''",
	    "adding the mesh to " MDB_META ".marks", why)) != 0)
		return rc;
	p->meta = 1;
	return 0;
}

static void mdb_close(void *h);

/* s is NULL or at most MDB_MESH_MAX - 1 lowercase hex digits. */
static int
mdb_hex_ok(const char *s)
{
	return s == NULL || (strlen(s) < MDB_MESH_MAX &&
	    strspn(s, "0123456789abcdef") == strlen(s));
}

static int
mdb_open(const struct tl_drv_admin *a, void **hp, char *why)
{
	struct tl_drv_mdb *p;
	const char *host;
	int rc, cert;

	*hp = NULL;
	if (a == NULL)
		return tl_drv_why(why, TL_EINVAL, "no admin settings");
	/* A certificate that cannot be used is refused before any packet. */
	if ((rc = tl_drv_client_cert_check(a->client_cert, a->client_key,
	    &cert, why)) != 0)
		return rc;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	p->cf = (struct tl_drv_cert_files)TL_DRV_CERT_FILES_INIT;
	/* The setting host, else where tallyd was told to connect. */
	host = tl_drv_setting_get(a->settings, "host");
	if (host == NULL || *host == '\0')
		host = a->host;
	if ((host != NULL && (p->host = strdup(host)) == NULL) ||
	    (a->port != NULL && (p->port = strdup(a->port)) == NULL) ||
	    (p->user = strdup(a->user != NULL && *a->user != '\0' ? a->user :
	    "root")) == NULL ||
	    (a->password != NULL &&
	    (p->password = tl_drv_secret_dup(a->password)) == NULL) ||
	    (a->ca_file != NULL && (p->ca_file = strdup(a->ca_file)) ==
	    NULL)) {
		mdb_close(p);
		return tl_drv_why(why, ENOMEM, "out of memory");
	}
	p->tls = tl_drv_tls_mode(a->settings, p->host);
	if (cert && p->tls == TL_DRV_TLS_OFF) {
		mdb_close(p);
		return tl_drv_why(why, TL_EINVAL, "admin-cert needs tls verify "
		    "or require (tls is off: no handshake to present it in)");
	}
	if (cert && (rc = tl_drv_cert_files_open(&p->cf, a->client_cert,
	    a->client_key, why)) != 0) {
		mdb_close(p);
		return rc;
	}
	/* Hex digits (or ""): they reach SQL as they are. */
	if (!mdb_hex_ok(a->mesh) || (a->fence != NULL &&
	    (!mdb_hex_ok(a->fence->mesh) || !mdb_hex_ok(a->fence->leader)))) {
		mdb_close(p);
		return tl_drv_why(why, TL_EINVAL, "the mesh id or the leader "
		    "is not at most %d hex digits", MDB_MESH_MAX - 1);
	}
	snprintf(p->mesh, sizeof(p->mesh), "%s", a->mesh != NULL ? a->mesh :
	    "");
	if (a->fence != NULL && a->fence->epoch != 0) {
		p->fenced = 1;
		snprintf(p->fmesh, sizeof(p->fmesh), "%s",
		    a->fence->mesh != NULL ? a->fence->mesh : "");
		p->fepoch = a->fence->epoch;
		snprintf(p->fleader, sizeof(p->fleader), "%s",
		    a->fence->leader != NULL ? a->fence->leader : "");
	}
	if ((rc = ensure(p, why)) != 0) {
		mdb_close(p);
		return rc;
	}
	tl_drv_why(why, 0, "connected to MariaDB %s at %s:%s as '%s'%s%s",
	    mysql_get_server_info(p->c), p->host != NULL ? p->host :
	    "127.0.0.1", p->port != NULL ? p->port : "3306", p->user,
	    p->cf.certfd >= 0 ? " with client certificate " : "",
	    p->cf.certfd >= 0 ? p->cf.subject : "");
	*hp = p;
	return 0;
}

static void
mdb_close(void *h)
{
	struct tl_drv_mdb *p = h;

	if (p == NULL)
		return;
	if (p->c != NULL)
		mysql_close(p->c);
	if (p->fc != NULL)
		mysql_close(p->fc);
	/* No session left to open the certificate's files again. */
	tl_drv_cert_files_close(&p->cf);
	free(p->host);
	free(p->port);
	free(p->user);
	tl_secret_free(p->password);
	free(p->ca_file);
	free(p);
}

/* --- marks ----------------------------------------------------------- */

/* MARK_MESH: marked by another mesh (other: its id). */
enum mark { MARK_ABSENT, MARK_OURS, MARK_OTHER, MARK_MESH };

/*
 * The mark of object (kind, name): *m, and in other the grant another
 * mark names ("" for the unnamed mark when it is not g's to adopt), or
 * the mesh of MARK_MESH.  A mark names the grant and the mesh that made
 * the object: another mesh's is MARK_MESH unless g adopts that mesh
 * (g->adopt_mesh); a mark that names no mesh (before marks named
 * meshes) is this mesh's.  *unnamed: ours, but to be marked again (the
 * unnamed mark adopted, no mesh named, another mesh adopted).
 */
static int
read_mark(struct tl_drv_mdb *p, const struct tl_drv_grant *g, char kind,
    const char *name, enum mark *m, int *unnamed, char *other, size_t on,
    char *why)
{
	char sql[MDB_SQL_MAX], lit[2 * TL_DRV_NAME_MAX + 8];
	MYSQL_RES *r;
	MYSQL_ROW row;
	int rc;

	*m = MARK_ABSENT;
	*unnamed = 0;
	other[0] = '\0';
	if ((rc = tl_drv_mdb_quote_str(p->c, name, lit, sizeof(lit))) != 0 ||
	    (rc = tl_drv_sqlf(sql, sizeof(sql), why, "SELECT grant_id, mesh "
	    "FROM `" MDB_META "`.`marks` WHERE kind = '%c' AND name = %s",
	    kind, lit)) != 0)
		return tl_drv_why(why, TL_EINVAL, "name too long");
	if ((rc = query(p->c, sql, &r, "reading tally's marks", why)) != 0)
		return rc;
	if ((row = mysql_fetch_row(r)) != NULL && row[0] != NULL) {
		const char *mine = tl_drv_grant_named(g) ? g->grant : "";
		const char *mesh = row[1] != NULL ? row[1] : "";
		int moved = mesh[0] == '\0' ? p->mesh[0] != '\0' :
		    strcmp(mesh, p->mesh) != 0;

		if (mesh[0] != '\0' && moved && (g->adopt_mesh == NULL ||
		    strcmp(mesh, g->adopt_mesh) != 0)) {
			*m = MARK_MESH;
			snprintf(other, on, "%s", mesh);
		} else if (strcmp(row[0], mine) == 0) {
			*m = MARK_OURS;
			*unnamed = moved;
		} else if (row[0][0] == '\0' && g->adopt_unnamed) {
			*m = MARK_OURS;
			*unnamed = 1;
		} else {
			*m = MARK_OTHER;
			snprintf(other, on, "%s", row[0]);
		}
	}
	mysql_free_result(r);
	return 0;
}

static int
write_mark(struct tl_drv_mdb *p, const struct tl_drv_grant *g, char kind,
    const char *name, char *why)
{
	char lit[2 * TL_DRV_NAME_MAX + 8], glit[2 * 256 + 8];
	int rc;

	if ((rc = tl_drv_mdb_quote_str(p->c, name, lit, sizeof(lit))) != 0 ||
	    (rc = tl_drv_mdb_quote_str(p->c,
	    tl_drv_grant_named(g) ? g->grant : "", glit, sizeof(glit))) != 0)
		return tl_drv_why(why, TL_EINVAL, "name too long");
	/* p->mesh is hex digits or "" (mdb_open). */
	return runf(p->c, "marking an object", why, "INSERT INTO `" MDB_META
	    "`.`marks` (kind, name, grant_id, mesh) VALUES ('%c', %s, %s, "
	    "'%s') ON DUPLICATE KEY UPDATE grant_id = VALUES(grant_id), "
	    "mesh = VALUES(mesh)", kind, lit, glit, p->mesh);
}

static int
drop_mark(struct tl_drv_mdb *p, char kind, const char *name, char *why)
{
	char lit[2 * TL_DRV_NAME_MAX + 8];

	if (tl_drv_mdb_quote_str(p->c, name, lit, sizeof(lit)) != 0)
		return tl_drv_why(why, TL_EINVAL, "name too long");
	return runf(p->c, "removing a mark", why, "DELETE FROM `" MDB_META
	    "`.`marks` WHERE kind = '%c' AND name = %s", kind, lit);
}

/* Whether database or user 'name'@'%' exists: *found. */
static int
exists(struct tl_drv_mdb *p, char kind, const char *name, int *found,
    char *why)
{
	char sql[MDB_SQL_MAX], lit[2 * TL_DRV_NAME_MAX + 8];
	MYSQL_RES *r;
	int rc;

	*found = 0;
	if (tl_drv_mdb_quote_str(p->c, name, lit, sizeof(lit)) != 0)
		return tl_drv_why(why, TL_EINVAL, "name too long");
	if (kind == 'd')
		snprintf(sql, sizeof(sql), "SELECT 1 FROM information_schema."
		    "SCHEMATA WHERE SCHEMA_NAME = %s", lit);
	else
		snprintf(sql, sizeof(sql), "SELECT 1 FROM mysql.global_priv "
		    "WHERE User = %s AND Host = '%%'", lit);
	if ((rc = query(p->c, sql, &r, kind == 'd' ? "looking up a database" :
	    "looking up a user", why)) != 0)
		return rc;
	*found = mysql_num_rows(r) > 0;
	mysql_free_result(r);
	return 0;
}

/* TL_EREFUSED: what another mesh made (other, its id). */
static int
mesh_refused(char kind, const char *name, const char *other, char *why)
{
	return tl_drv_why(why, TL_EREFUSED, "%s \"%s\": owned by mesh "
	    "%.12s..., not this one (tally never changes another mesh's "
	    "objects but by adopting them)", kind == 'd' ? "database" : "user",
	    name, other);
}

/*
 * TL_EREFUSED if g's database or user was marked by another mesh (not
 * adopted); a stale mark of g's (read_mark) is marked again with ours.
 */
static int
vet_mesh(struct tl_drv_mdb *p, const struct tl_drv_grant *g, char *why)
{
	char other[256];
	enum mark m;
	int rc, i, stale;

	for (i = 0; i < 2; i++) {
		char kind = i == 0 ? 'd' : 'u';
		const char *name = i == 0 ? g->resource : g->login;

		if ((rc = read_mark(p, g, kind, name, &m, &stale, other,
		    sizeof(other), why)) != 0)
			return rc;
		if (m == MARK_MESH)
			return mesh_refused(kind, name, other, why);
		if (m == MARK_OURS && stale &&
		    (rc = write_mark(p, g, kind, name, why)) != 0)
			return rc;
	}
	return 0;
}

/*
 * Claims object (kind, name) for g: 0 when it is g's (marked for g, or
 * absent and now marked), TL_EINVAL with why when it belongs to another
 * grant or to nobody tally knows.  create only: it marks.
 */
static int
claim(struct tl_drv_mdb *p, const struct tl_drv_grant *g, char kind,
    const char *name, int *made, char *why)
{
	const char *what = kind == 'd' ? "database" : "user";
	char other[256];
	enum mark m;
	int rc, found, unnamed;

	*made = 0;
	if ((rc = read_mark(p, g, kind, name, &m, &unnamed, other,
	    sizeof(other), why)) != 0 ||
	    (rc = exists(p, kind, name, &found, why)) != 0)
		return rc;
	if (m == MARK_MESH)
		return mesh_refused(kind, name, other, why);
	if (m == MARK_OTHER)
		return tl_drv_why(why, TL_EINVAL, "%s \"%s\" was made by tally "
		    "for %s%s: tally never hands one grant's object to another",
		    what, name, other[0] != '\0' ? "grant " : "another grant "
		    "(unnamed mark)", other);
	if (m == MARK_ABSENT && found)
		return tl_drv_why(why, TL_EINVAL, "%s \"%s\" exists and was "
		    "not made by tally: tally never takes over what it did not "
		    "make; choose another resource name (name: in the "
		    "manifest)", what, name);
	*made = !found;
	if (m == MARK_ABSENT || unnamed)
		return write_mark(p, g, kind, name, why);
	return 0;
}

/* TL_EINVAL if an object of g's names is marked for another grant. */
static int
vet(struct tl_drv_mdb *p, const struct tl_drv_grant *g, char *why)
{
	char other[256];
	enum mark m;
	int rc, unnamed, i, found;

	if ((rc = vet_mesh(p, g, why)) != 0)
		return rc;
	for (i = 0; i < 2; i++) {
		char kind = i == 0 ? 'd' : 'u';
		const char *name = i == 0 ? g->resource : g->login;

		if ((rc = read_mark(p, g, kind, name, &m, &unnamed, other,
		    sizeof(other), why)) != 0)
			return rc;
		if (m == MARK_OTHER)
			return tl_drv_why(why, TL_EINVAL, "%s \"%s\" was made "
			    "by tally for %s%s: refused", i == 0 ? "database" :
			    "user", name, other[0] != '\0' ? "grant " :
			    "another grant", other);
		if (m == MARK_ABSENT) {
			if ((rc = exists(p, kind, name, &found, why)) != 0)
				return rc;
			if (found)
				return tl_drv_why(why, TL_EINVAL, "%s \"%s\" "
				    "was not made by tally: refused", i == 0 ?
				    "database" : "user", name);
		}
	}
	return 0;
}

/* Connects and validates: the prologue of every operation. */
static int
begin(struct tl_drv_mdb *p, const struct tl_drv_grant *g, int need_pw,
    char *why)
{
	int rc;

	if (p == NULL)
		return tl_drv_why(why, TL_EINVAL, "driver not open");
	if ((rc = tl_drv_mdb_grant_ok(g, need_pw, why)) != 0 ||
	    (rc = ensure(p, why)) != 0 || (rc = ensure_meta(p, why)) != 0)
		return rc;
	return 0;
}

/* --- privileges and passwords ----------------------------------------- */

struct ids {
	char	db[2 * TL_DRV_NAME_MAX + 4];	/* `db` */
	char	pat[4 * TL_DRV_NAME_MAX + 4];	/* `db` with \_ \% */
	char	user[2 * MDB_USER_MAX + 12];	/* 'login'@'%' */
	char	ulit[2 * MDB_USER_MAX + 4];	/* 'login' */
	char	dlit[2 * TL_DRV_NAME_MAX + 4];	/* 'db' */
	char	plit[4 * TL_DRV_NAME_MAX + 8];	/* 'db\_x' as stored */
};

static int
ids_make(struct tl_drv_mdb *p, const struct tl_drv_grant *g, struct ids *x,
    char *why)
{
	char pat[2 * TL_DRV_NAME_MAX + 2];
	const char *s;
	size_t o = 0;

	for (s = g->resource; *s != '\0' && o + 3 < sizeof(pat); s++) {
		if (*s == '_' || *s == '%' || *s == '\\')
			pat[o++] = '\\';
		pat[o++] = *s;
	}
	pat[o] = '\0';
	if (tl_drv_mdb_quote_id(g->resource, x->db, sizeof(x->db)) != 0 ||
	    quote_pattern(g->resource, x->pat, sizeof(x->pat)) != 0 ||
	    tl_drv_mdb_quote_str(p->c, g->login, x->ulit,
	    sizeof(x->ulit)) != 0 ||
	    tl_drv_mdb_quote_str(p->c, g->resource, x->dlit,
	    sizeof(x->dlit)) != 0 ||
	    tl_drv_mdb_quote_str(p->c, pat, x->plit, sizeof(x->plit)) != 0)
		return tl_drv_why(why, TL_EINVAL, "names too long");
	snprintf(x->user, sizeof(x->user), "%s@'%%'", x->ulit);
	return 0;
}

/* The password's hash into a statement; the buffer is not secret. */
static int
set_pw(struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    const struct ids *x, int create, char *why)
{
	char hash[42];

	/* By certificate: an empty password; REQUIRE SUBJECT holds it. */
	if (g->cert_login)
		hash[0] = '\0';
	else
		tl_drv_mdb_hash(g->password, hash);
	if (create)
		return runf(p->c, "creating the user", why, "CREATE USER IF "
		    "NOT EXISTS %s IDENTIFIED VIA mysql_native_password USING "
		    "'%s'", x->user, hash);
	return runf(p->c, "setting the user's password", why, "ALTER USER %s "
	    "IDENTIFIED VIA mysql_native_password USING '%s' ACCOUNT UNLOCK",
	    x->user, hash);
}


/* The longest issuer a login by certificate is held to (one line). */
#define MDB_ISSUER_MAX	1024

/*
 * What a login by certificate is held to, as SQL literals: its subject
 * "/CN=LOGIN" into slit, and the mesh CA's subject into ilit (the
 * issuer, in OpenSSL's one-line form, which is what the server compares
 * a client certificate's with), "" when g names no CA.
 */
static int
cert_require(struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    char *slit, size_t scap, char *ilit, size_t icap, char *why)
{
	char subj[2 * TL_DRV_NAME_MAX + 16], iss[MDB_ISSUER_MAX];
	char xwhy[TL_WHY_MAX];

	snprintf(subj, sizeof(subj), "/CN=%s", g->login);
	ilit[0] = '\0';
	if (tl_drv_mdb_quote_str(p->c, subj, slit, scap) != 0)
		return tl_drv_why(why, TL_EINVAL, "names too long");
	if (g->cert_ca == NULL)
		return 0;
	if (tl_x509_subject_line(g->cert_ca, iss, sizeof(iss), xwhy) != 0)
		return tl_drv_why(why, TL_EINVAL, "the mesh CA's certificate: "
		    "%s", xwhy);
	if (tl_drv_mdb_quote_str(p->c, iss, ilit, icap) != 0)
		return tl_drv_why(why, TL_EINVAL, "the mesh CA's subject is too "
		    "long");
	return 0;
}

/*
 * What g's user holds on the database, as GRANT names it: ALL for the
 * grant that owns it; a login below ownership (g->access) no DDL, so
 * it never changes what the owner's consumer and migrations rely on.
 * On `db`.* it covers the tables made later too.
 */
static const char *
db_privs(const struct tl_drv_grant *g)
{
	if (g->access == TL_DRV_ACCESS_READ)
		return "SELECT";
	if (g->access == TL_DRV_ACCESS_READ_WRITE)
		return "SELECT, INSERT, UPDATE, DELETE";
	return "ALL PRIVILEGES";
}

/*
 * A REVOKE of something the user may no longer hold: "no such grant"
 * (1141 database, 1147 table, 1403 routine) is what it wants, not an
 * error.
 */
static int
revoke_held(MYSQL *c, const char *step, char *why, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
revoke_held(MYSQL *c, const char *step, char *why, const char *fmt, ...)
{
	va_list ap;
	unsigned e;
	int rc;

	va_start(ap, fmt);
	rc = vrunf(c, step, why, fmt, ap);
	va_end(ap);
	/* TL_EDRIVER alone is the server's answer (a long statement not). */
	if (rc == TL_EDRIVER && ((e = mysql_errno(c)) == 1141 || e == 1147 ||
	    e == 1403)) {
		why[0] = '\0';
		rc = 0;
	}
	return rc;
}

/*
 * What a login below ownership is not given on its database, beyond
 * GRANT OPTION: MariaDB's database-level privileges (as of 10.3.4)
 * less db_privs.  REVOKE of one not held is no error.
 */
static const char *
db_privs_not(const struct tl_drv_grant *g)
{
	if (g->access == TL_DRV_ACCESS_READ)
		return "INSERT, UPDATE, DELETE, CREATE, DROP, REFERENCES, "
		    "INDEX, ALTER, CREATE TEMPORARY TABLES, LOCK TABLES, "
		    "EXECUTE, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER "
		    "ROUTINE, EVENT, TRIGGER, DELETE HISTORY, ";
	if (g->access == TL_DRV_ACCESS_READ_WRITE)
		return "CREATE, DROP, REFERENCES, INDEX, ALTER, CREATE "
		    "TEMPORARY TABLES, LOCK TABLES, EXECUTE, CREATE VIEW, SHOW "
		    "VIEW, CREATE ROUTINE, ALTER ROUTINE, EVENT, TRIGGER, "
		    "DELETE HISTORY, ";
	return "";
}

/*
 * What g's user holds beyond db_privs on its database, one row each,
 * in one round trip (a new user: none): kind 'g' global privileges
 * ('access' is 0 for USAGE alone), 'd' a database's (own: 1 for g's,
 * listed when it has GRANT OPTION, or always for a login below
 * ownership, whose excess the row does not show simply), 't' a table's
 * (its columns' with it), 'r' a routine's.  db is as the grant tables
 * store it (a database's, its pattern).
 */
#define MDB_BEYOND_SQL							\
    "SELECT 'g', '', '', '', 0 FROM mysql.global_priv WHERE User = %s"	\
    " AND Host = '%%' AND COALESCE(JSON_VALUE(Priv, '$.access'), 0) <> 0" \
    " UNION ALL SELECT 'd', Db, '', '', Db = %s FROM mysql.db"		\
    " WHERE User = %s AND Host = '%%' AND (Db <> %s OR Grant_priv = 'Y'" \
    " OR %d)"								\
    " UNION ALL SELECT 't', Db, Table_name, '', 0 FROM mysql.tables_priv" \
    " WHERE User = %s AND Host = '%%'"					\
    " UNION ALL SELECT 'r', Db, Routine_name, Routine_type, 0"		\
    " FROM mysql.procs_priv WHERE User = %s AND Host = '%%'"

/* REVOKE what one MDB_BEYOND_SQL row names. */
static int
revoke_row(struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    const struct ids *x, MYSQL_ROW row, char *why)
{
	static const char step[] = "revoking the user's other privileges";
	char a[2 * TL_DRV_NAME_MAX + 4], b[2 * TL_DRV_NAME_MAX + 4];
	char on[3 * sizeof(a) + 16];
	int rc, i;

	if (row[0][0] == 'g') {
		/* REVOKE ... ON *.* acts on the global level alone. */
		if ((rc = revoke_held(p->c, step, why, "REVOKE ALL PRIVILEGES "
		    "ON *.* FROM %s", x->user)) != 0)
			return rc;
		return revoke_held(p->c, step, why, "REVOKE GRANT OPTION ON "
		    "*.* FROM %s", x->user);
	}
	if (row[0][0] == 'd' && row[4] != NULL && strcmp(row[4], "1") == 0)
		return revoke_held(p->c, step, why, "REVOKE %sGRANT OPTION ON "
		    "%s.* FROM %s", db_privs_not(g), x->pat, x->user);
	if (row[1] == NULL || row[2] == NULL ||
	    tl_drv_mdb_quote_id(row[1], a, sizeof(a)) != 0 ||
	    (row[0][0] != 'd' && tl_drv_mdb_quote_id(row[2], b,
	    sizeof(b)) != 0))
		return tl_drv_why(why, TL_EDRIVER, "%s: a name the grant tables "
		    "hold does not fit", step);
	if (row[0][0] == 'd')
		snprintf(on, sizeof(on), "%s.*", a);
	else if (row[0][0] == 't')
		snprintf(on, sizeof(on), "%s.%s", a, b);
	else
		snprintf(on, sizeof(on), "%s %s.%s", row[3] != NULL &&
		    strcmp(row[3], "FUNCTION") == 0 ? "FUNCTION" : "PROCEDURE",
		    a, b);
	/* Grant option first: ALL may leave no row behind. */
	for (i = 0, rc = 0; i < 2 && rc == 0; i++)
		rc = revoke_held(p->c, step, why, "REVOKE %s ON %s FROM %s",
		    i == 0 ? "GRANT OPTION" : "ALL PRIVILEGES", on, x->user);
	return rc;
}

/*
 * Every privilege of g's user but db_privs on its database, revoked:
 * what MDB_BEYOND_SQL lists, nothing when it lists nothing.
 */
static int
revoke_beyond(struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    const struct ids *x, char *why)
{
	char sql[MDB_SQL_MAX];
	MYSQL_RES *r;
	MYSQL_ROW row;
	int rc;

	if ((rc = tl_drv_sqlf(sql, sizeof(sql), why, MDB_BEYOND_SQL, x->ulit,
	    x->plit, x->ulit, x->plit, g->access != 0, x->ulit,
	    x->ulit)) != 0)
		return rc;
	if ((rc = query(p->c, sql, &r, "reading what the user holds beyond "
	    "its database", why)) != 0)
		return rc;
	while (rc == 0 && (row = mysql_fetch_row(r)) != NULL)
		if (row[0] != NULL)
			rc = revoke_row(p, g, x, row, why);
	mysql_free_result(r);
	return rc;
}

/*
 * db_privs on the database; with revoke, every other privilege taken
 * after it, so that a user in use (adopted with more than its
 * database, or repaired) can use its database throughout.
 */
static int
grant_database(struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    const struct ids *x, int revoke, char *why)
{
	int rc;

	if ((rc = runf(p->c, "granting the database", why, "GRANT %s ON %s.* "
	    "TO %s", db_privs(g), x->pat, x->user)) != 0)
		return rc;
	return revoke ? revoke_beyond(p, g, x, why) : 0;
}

/*
 * Exactly db_privs on the database, nothing else, no other host's
 * account, no resource limit (a limit set by hand refuses the consumer with 1226,
 * which a new password cannot repair).
 */
static int
set_privileges(struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    const struct ids *x, char *why)
{
	char sql[MDB_SQL_MAX];
	MYSQL_RES *r;
	MYSQL_ROW row;
	int rc;

	snprintf(sql, sizeof(sql), "SELECT Host FROM mysql.global_priv WHERE "
	    "User = %s AND Host <> '%%'", x->ulit);
	if ((rc = query(p->c, sql, &r, "looking for other accounts", why)) != 0)
		return rc;
	while ((row = mysql_fetch_row(r)) != NULL) {
		char hlit[600];

		if (row[0] == NULL || tl_drv_mdb_quote_str(p->c, row[0], hlit,
		    sizeof(hlit)) != 0)
			continue;
		if ((rc = runf(p->c, "dropping an account of the user's name "
		    "on another host", why, "DROP USER IF EXISTS %s@%s",
		    x->ulit, hlit)) != 0)
			break;
	}
	mysql_free_result(r);
	if (rc != 0 || (rc = grant_database(p, g, x, 1, why)) != 0)
		return rc;
	if ((rc = runf(p->c, "unlocking the user", why, "ALTER USER %s "
	    "ACCOUNT UNLOCK", x->user)) != 0)
		return rc;
	if (g->cert_login) {
		char slit[4 * TL_DRV_NAME_MAX + 40], ilit[2 * MDB_ISSUER_MAX + 8];

		if ((rc = cert_require(p, g, slit, sizeof(slit), ilit,
		    sizeof(ilit), why)) != 0)
			return rc;
		if ((rc = runf(p->c, "holding the user to its certificate",
		    why, "ALTER USER %s REQUIRE SUBJECT %s%s%s", x->user,
		    slit, ilit[0] != '\0' ? " AND ISSUER " : "", ilit)) != 0)
			return rc;
	} else if ((rc = runf(p->c, "holding the user to TLS", why,
	    "ALTER USER %s REQUIRE %s", x->user, p->tls != TL_DRV_TLS_OFF ?
	    "SSL" : "NONE")) != 0)
		return rc;
	return runf(p->c, "removing the user's resource limits", why,
	    "ALTER USER %s WITH MAX_QUERIES_PER_HOUR 0 MAX_UPDATES_PER_HOUR 0 "
	    "MAX_CONNECTIONS_PER_HOUR 0 MAX_USER_CONNECTIONS 0 "
	    "MAX_STATEMENT_TIME 0", x->user);
}

/* --- what a grant looks like: one row per grant --------------------- */

enum {
	C_I = 0, C_DB, C_USER, C_AUTH, C_PLUGIN, C_LOCKED, C_ACCESS, C_DBPRIV,
	C_OTHERDB, C_OTHER, C_HOSTS, C_MARKD, C_MARKU, C_LIMITS, C_MESHD,
	C_MESHU, C_SSL, C_XSUBJ, C_XISS, C_NCOLS
};

/* One SELECT of the grant's facts, for UNION ALL: i, db, pattern, user. */
static int
grant_row(struct tl_drv_mdb *p, const struct tl_drv_grant *g, size_t i,
    char *out, size_t n, char *why)
{
	struct ids x;
	int rc;

	if ((rc = ids_make(p, g, &x, why)) != 0)
		return rc;
	return tl_drv_sqlf(out, n, why, "SELECT %zu AS i, %s AS db, %s AS pat, "
	    "%s AS u", i, x.dlit, x.plit, x.ulit);
}

/*
 * One resource limit of the account, "NAME value" when it is not 0 (no
 * limit, what create sets), else NULL: key is its name in
 * mysql.global_priv's JSON, name its name in ALTER USER.
 */
#define MDB_LIMIT(key, name) \
	" IF(IFNULL(JSON_VALUE(a.Priv, '$." key "'), 0) + 0 <> 0," \
	" CONCAT('" name " ', JSON_VALUE(a.Priv, '$." key "') + 0), NULL)"

static char *
facts_sql(struct tl_drv_mdb *p, const char *rows)
{
	static const char fmt[] =
	    "SELECT g.i,"
	    " (SELECT COUNT(*) FROM information_schema.SCHEMATA s"
	    "   WHERE s.SCHEMA_NAME = g.db),"
	    " (SELECT COUNT(*) FROM mysql.global_priv a"
	    "   WHERE a.User = g.u AND a.Host = '%%'),"
	    " (SELECT JSON_VALUE(a.Priv, '$.authentication_string')"
	    "   FROM mysql.global_priv a WHERE a.User = g.u AND a.Host = '%%'),"
	    " (SELECT JSON_VALUE(a.Priv, '$.plugin')"
	    "   FROM mysql.global_priv a WHERE a.User = g.u AND a.Host = '%%'),"
	    " (SELECT IFNULL(JSON_VALUE(a.Priv, '$.account_locked'), 0)"
	    "   FROM mysql.global_priv a WHERE a.User = g.u AND a.Host = '%%'),"
	    " (SELECT JSON_VALUE(a.Priv, '$.access')"
	    "   FROM mysql.global_priv a WHERE a.User = g.u AND a.Host = '%%'),"
	    " (SELECT %s FROM mysql.db d"
	    "   WHERE d.Host = '%%' AND d.User = g.u AND d.Db = g.pat),"
	    " (SELECT COUNT(*) FROM mysql.db d"
	    "   WHERE d.User = g.u AND NOT (d.Host = '%%' AND d.Db = g.pat)),"
	    " (SELECT COUNT(*) FROM mysql.tables_priv t WHERE t.User = g.u) +"
	    " (SELECT COUNT(*) FROM mysql.columns_priv c WHERE c.User = g.u) +"
	    " (SELECT COUNT(*) FROM mysql.procs_priv r WHERE r.User = g.u) +"
	    " (SELECT COUNT(*) FROM mysql.roles_mapping m WHERE m.User = g.u),"
	    " (SELECT COUNT(*) FROM mysql.global_priv a"
	    "   WHERE a.User = g.u AND a.Host <> '%%'),"
	    " (SELECT k.grant_id FROM `" MDB_META "`.`marks` k"
	    "   WHERE k.kind = 'd' AND k.name = g.db),"
	    " (SELECT k.grant_id FROM `" MDB_META "`.`marks` k"
	    "   WHERE k.kind = 'u' AND k.name = g.u),"
	    " (SELECT NULLIF(CONCAT_WS(', ',"
	    MDB_LIMIT("max_questions", "MAX_QUERIES_PER_HOUR") ","
	    MDB_LIMIT("max_updates", "MAX_UPDATES_PER_HOUR") ","
	    MDB_LIMIT("max_connections", "MAX_CONNECTIONS_PER_HOUR") ","
	    MDB_LIMIT("max_user_connections", "MAX_USER_CONNECTIONS") ","
	    MDB_LIMIT("max_statement_time", "MAX_STATEMENT_TIME") "), '')"
	    "   FROM mysql.global_priv a WHERE a.User = g.u AND a.Host = '%%'),"
	    " (SELECT k.mesh FROM `" MDB_META "`.`marks` k"
	    "   WHERE k.kind = 'd' AND k.name = g.db),"
	    " (SELECT k.mesh FROM `" MDB_META "`.`marks` k"
	    "   WHERE k.kind = 'u' AND k.name = g.u),"
	    /* 0 none, 1 SSL (ANY), 2 X509, 3 SPECIFIED (sql_acl.cc). */
	    " (SELECT IFNULL(JSON_VALUE(a.Priv, '$.ssl_type'), 0) + 0"
	    "   FROM mysql.global_priv a WHERE a.User = g.u AND a.Host = '%%'),"
	    /* REQUIRE SUBJECT ... AND ISSUER ... of a login by certificate. */
	    " (SELECT IFNULL(JSON_VALUE(a.Priv, '$.x509_subject'), '')"
	    "   FROM mysql.global_priv a WHERE a.User = g.u AND a.Host = '%%'),"
	    " (SELECT IFNULL(JSON_VALUE(a.Priv, '$.x509_issuer'), '')"
	    "   FROM mysql.global_priv a WHERE a.User = g.u AND a.Host = '%%')"
	    " FROM (%s) g ORDER BY g.i";
	size_t n = sizeof(fmt) + strlen(p->privcols) + strlen(rows);
	char *s;

	if ((s = malloc(n)) == NULL)
		return NULL;
	snprintf(s, n, fmt, p->privcols, rows);
	return s;
}

/* Appends to a findings buffer, "; "-separated. */
struct msg {
	char	buf[TL_WHY_MAX];
	size_t	len;
	int	n;
};

static void
madd(struct msg *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
madd(struct msg *m, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (m->len + 3 >= sizeof(m->buf))
		return;
	if (m->n++ > 0) {
		memcpy(m->buf + m->len, "; ", 3);
		m->len += 2;
	}
	va_start(ap, fmt);
	k = vsnprintf(m->buf + m->len, sizeof(m->buf) - m->len, fmt, ap);
	va_end(ap);
	if (k > 0)
		m->len += (size_t)k;
	if (m->len >= sizeof(m->buf))
		m->len = sizeof(m->buf) - 1;
}

/*
 * 1, with why, when the row's database or user was marked by another
 * mesh (not adopted): reported alone, as a drift no repair of this
 * mesh's may act on (every changing operation refuses it).
 */
static int
row_other_mesh(const struct tl_drv_mdb *p, MYSQL_ROW row,
    const struct tl_drv_grant *g, char *why)
{
	int k;

	for (k = 0; k < 2; k++) {
		const char *mesh = row[k == 0 ? C_MESHD : C_MESHU];

		if (mesh == NULL || mesh[0] == '\0' ||
		    strcmp(mesh, p->mesh) == 0 || (g->adopt_mesh != NULL &&
		    strcmp(mesh, g->adopt_mesh) == 0))
			continue;
		tl_drv_why(why, 0, "privileges: %s \"%s\" is owned by mesh "
		    "%.12s..., not this one: not repaired (only adopting "
		    "that mesh's objects takes it over)", k == 0 ? "database" :
		    "user", k == 0 ? g->resource : g->login, mesh);
		return 1;
	}
	return 0;
}

/*
 * The user's REQUIRE as the row reads it against what set_privileges
 * sets: SSL when the provider's tls is not off (a user that may log in
 * in plaintext is not held to TLS), NONE when it is off (what a
 * consumer told ssl_mode DISABLED connects with).  X509 and SPECIFIED
 * differ too: consumers are given no client certificate.  A login by
 * certificate: SPECIFIED, its subject "/CN=LOGIN" and, when the mesh CA
 * is known, that CA as the issuer.
 */
static void
ssl_row(const struct tl_drv_mdb *p, MYSQL_ROW row,
    const struct tl_drv_grant *g, struct msg *priv)
{
	static const char *const names[] = { "NONE", "SSL", "X509",
	    "SPECIFIED" };
	/* A login by certificate: REQUIRE SUBJECT (SPECIFIED). */
	int want = g->cert_login ? 3 : p->tls != TL_DRV_TLS_OFF, got;

	got = row[C_SSL] != NULL ? atoi(row[C_SSL]) : 0;
	if (got == want && g->cert_login) {
		char subj[2 * TL_DRV_NAME_MAX + 16], iss[MDB_ISSUER_MAX];
		char xwhy[TL_WHY_MAX];
		const char *s = row[C_XSUBJ] != NULL ? row[C_XSUBJ] : "";
		const char *i = row[C_XISS] != NULL ? row[C_XISS] : "";

		snprintf(subj, sizeof(subj), "/CN=%s", g->login);
		if (strcmp(s, subj) != 0)
			madd(priv, "user '%s' has REQUIRE SUBJECT '%.200s', "
			    "tally sets '%s'", g->login, s, subj);
		if (g->cert_ca != NULL && tl_x509_subject_line(g->cert_ca,
		    iss, sizeof(iss), xwhy) == 0 && strcmp(i, iss) != 0)
			madd(priv, "user '%s' takes certificates of issuer "
			    "'%.200s', tally sets the mesh CA's '%.200s'",
			    g->login, i[0] != '\0' ? i : "(any)", iss);
		return;
	}
	if (got == want)
		return;
	if (got == 0)
		madd(priv, "user '%s' can log in without TLS (REQUIRE NONE; "
		    "tally sets REQUIRE SSL)", g->login);
	else
		madd(priv, "user '%s' has REQUIRE %s, tally sets REQUIRE %s",
		    g->login, got > 0 && got < 4 ? names[got] : "?",
		    names[want]);
}

/*
 * What one row says about g: TL_EINVAL (why) when its objects are another
 * grant's or not tally's; else *drift and why.  cred: compare the stored
 * hash with g->password's (check_bulk; check logs in instead).  A login
 * below ownership (g->access): the database is another grant's, and is
 * only to be tally's; the user holds db_privs on it.
 */
static int
eval_row(struct tl_drv_mdb *p, MYSQL_ROW row, const struct tl_drv_grant *g,
    int cred, enum tl_drv_drift *drift, char *why)
{
	struct msg miss = { .len = 0 }, bad = { .len = 0 }, priv = { .len = 0 };
	const char *mine = tl_drv_grant_named(g) ? g->grant : "";
	const char *want = g->access == TL_DRV_ACCESS_READ ? p->privread :
	    g->access == TL_DRV_ACCESS_READ_WRITE ? p->privrw : p->privwant;
	int k;

	if (row_other_mesh(p, row, g, why)) {
		*drift = TL_DRIFT_PRIVILEGES;
		return 0;
	}
	for (k = 0; k < 2; k++) {
		const char *mk = row[k == 0 ? C_MARKD : C_MARKU];
		int found = atoi(row[k == 0 ? C_DB : C_USER]) > 0;
		const char *what = k == 0 ? "database" : "user";
		const char *name = k == 0 ? g->resource : g->login;

		if (mk != NULL && k == 0 && g->access)
			continue;
		if (mk != NULL && strcmp(mk, mine) != 0 &&
		    !(mk[0] == '\0' && g->adopt_unnamed))
			return tl_drv_why(why, TL_EINVAL, "%s \"%s\" was made "
			    "by tally for %s%s: refused", what, name, mk[0] ?
			    "grant " : "another grant", mk);
		if (mk == NULL && found)
			return tl_drv_why(why, TL_EINVAL, "%s \"%s\" was not "
			    "made by tally: refused", what, name);
	}
	*drift = TL_DRIFT_NONE;
	if (atoi(row[C_DB]) == 0)
		madd(&miss, "database \"%s\" is gone", g->resource);
	if (atoi(row[C_USER]) == 0)
		madd(&miss, "user '%s'@'%%' is gone", g->login);
	else {
		if (row[C_LOCKED] != NULL && strcmp(row[C_LOCKED], "0") != 0 &&
		    strcmp(row[C_LOCKED], "false") != 0)
			madd(&priv, "user '%s' is locked", g->login);
		if (row[C_ACCESS] == NULL || strcmp(row[C_ACCESS], "0") != 0)
			madd(&priv, "user '%s' has global privileges "
			    "(access %s)", g->login, row[C_ACCESS] != NULL ?
			    row[C_ACCESS] : "?");
		if (row[C_DBPRIV] == NULL)
			madd(&priv, "user '%s' has no privileges on \"%s\"",
			    g->login, g->resource);
		else if (strcmp(row[C_DBPRIV], want) != 0)
			madd(&priv, "user '%s' on \"%s\": privileges %s, "
			    "expected %s", g->login, g->resource,
			    row[C_DBPRIV], want);
		if (atoi(row[C_OTHERDB]) > 0 || atoi(row[C_OTHER]) > 0)
			madd(&priv, "user '%s' holds privileges beyond its "
			    "database (%s on databases, %s on tables, columns, "
			    "routines or roles)", g->login, row[C_OTHERDB],
			    row[C_OTHER]);
		if (atoi(row[C_HOSTS]) > 0)
			madd(&priv, "%s other account%s named '%s' on other "
			    "hosts", row[C_HOSTS], atoi(row[C_HOSTS]) == 1 ?
			    "" : "s", g->login);
		if (row[C_LIMITS] != NULL)
			madd(&priv, "user '%s' has resource limits tally did "
			    "not set: %s", g->login, row[C_LIMITS]);
		ssl_row(p, row, g, &priv);
		if (cred && g->cert_login && row[C_AUTH] != NULL &&
		    row[C_AUTH][0] != '\0')
			madd(&bad, "user '%s' has a password: a login by "
			    "certificate has none", g->login);
		else if (cred && !g->cert_login && g->password != NULL) {
			char hash[42];

			tl_drv_mdb_hash(g->password, hash);
			if (row[C_PLUGIN] == NULL ||
			    strcmp(row[C_PLUGIN], "mysql_native_password") != 0 ||
			    row[C_AUTH] == NULL ||
			    strcmp(row[C_AUTH], hash) != 0)
				madd(&bad, "user '%s': the stored password is "
				    "not the one delivered (plugin %s)", g->login,
				    row[C_PLUGIN] != NULL ? row[C_PLUGIN] : "?");
		}
	}
	if (miss.n > 0) {
		*drift = TL_DRIFT_MISSING;
		tl_drv_why(why, 0, "missing: %s%s%s", miss.buf, priv.n ?
		    "; also privileges: " : "", priv.buf);
	} else if (bad.n > 0) {
		*drift = TL_DRIFT_CREDENTIAL;
		tl_drv_why(why, 0, "credential: %s%s%s", bad.buf, priv.n ?
		    "; also privileges: " : "", priv.buf);
	} else if (priv.n > 0) {
		*drift = TL_DRIFT_PRIVILEGES;
		tl_drv_why(why, 0, "privileges: %s", priv.buf);
	} else
		tl_drv_why(why, 0, "database \"%s\", user '%s' with %s on it "
		    "and nothing else", g->resource, g->login,
		    g->access ? db_privs(g) : "ALL");
	return 0;
}

/* --- tally adopt: a database and a user tally did not make ----------- */

/*
 * TL_EDRIVER (why) unless object (kind, name) is nobody's or already
 * g's; *mark: it is still to be marked for g (no mark, or a stale one).
 */
static int
adoptable(struct tl_drv_mdb *p, const struct tl_drv_grant *g, char kind,
    const char *name, int *mark, char *why)
{
	char other[256];
	enum mark m;
	int rc, unnamed;

	*mark = 0;
	if ((rc = read_mark(p, g, kind, name, &m, &unnamed, other,
	    sizeof(other), why)) != 0)
		return rc;
	if (m == MARK_MESH)
		return mesh_refused(kind, name, other, why);
	if (m == MARK_OTHER)
		return tl_drv_why(why, TL_EDRIVER, "%s \"%s\" was made by tally "
		    "for %s%s: tally adopt takes over only what tally did not "
		    "make", kind == 'd' ? "database" : "user", name,
		    other[0] != '\0' ? "grant " : "another grant", other);
	*mark = m == MARK_ABSENT || unnamed;
	return 0;
}

/*
 * 0 when the accounts named g->login are one, 'LOGIN'@'%' (the host of
 * every login the driver makes), that may become a grant's login.
 * Refused (TL_EDRIVER): tally's admin; no such account; an account of
 * the name on another host (it would shadow 'LOGIN'@'%' for connections
 * from there, and outlive the retirement with its privileges); a locked
 * one (no consumer logs in as it); global privileges or roles (an
 * administrator's account, which taking over would strip).
 */
static int
adopt_user_ok(struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    const struct ids *x, char *why)
{
	char sql[MDB_SQL_MAX], hosts[256], access[32];
	MYSQL_RES *r;
	MYSQL_ROW row;
	size_t o = 0;
	int rc, found = 0, locked = 0, roles = 0;

	if (strcmp(g->login, p->user) == 0)
		return tl_drv_why(why, TL_EDRIVER, "user '%s' is the account "
		    "tally administers this server as: never a grant's login",
		    g->login);
	if ((rc = tl_drv_sqlf(sql, sizeof(sql), why, "SELECT a.Host, "
	    "IFNULL(JSON_VALUE(a.Priv, '$.account_locked'), 0), "
	    "IFNULL(JSON_VALUE(a.Priv, '$.access'), 0), (SELECT COUNT(*) "
	    "FROM mysql.roles_mapping m WHERE m.User = a.User AND "
	    "m.Host = a.Host) FROM mysql.global_priv a WHERE a.User = %s "
	    "ORDER BY a.Host", x->ulit)) != 0 ||
	    (rc = query(p->c, sql, &r, "looking up the user to adopt",
	    why)) != 0)
		return rc;
	hosts[0] = '\0';
	snprintf(access, sizeof(access), "0");
	while ((row = mysql_fetch_row(r)) != NULL) {
		int k;

		if (row[0] != NULL && strcmp(row[0], "%") == 0) {
			found = 1;
			locked = row[1] != NULL && strcmp(row[1], "0") != 0 &&
			    strcmp(row[1], "false") != 0;
			snprintf(access, sizeof(access), "%s", row[2] != NULL ?
			    row[2] : "?");
			roles = row[3] != NULL ? atoi(row[3]) : 0;
			continue;
		}
		k = snprintf(hosts + o, sizeof(hosts) - o, "%s'%.64s'",
		    o > 0 ? ", " : "", row[0] != NULL ? row[0] : "");
		if (k < 0 || o + (size_t)k >= sizeof(hosts) - 8)
			break;	/* enough to name them */
		o += (size_t)k;
	}
	mysql_free_result(r);
	if (!found && hosts[0] != '\0')
		return tl_drv_why(why, TL_EDRIVER, "user '%s'@'%%' does not "
		    "exist on this server (accounts of that name: %s): tally "
		    "adopt takes over the account of every host, as every "
		    "grant's login is; RENAME USER the one its consumers use "
		    "to '%s'@'%%' first", g->login, hosts, g->login);
	if (!found)
		return tl_drv_why(why, TL_EDRIVER, "user '%s'@'%%' does not "
		    "exist on this server: nothing to adopt", g->login);
	if (hosts[0] != '\0')
		return tl_drv_why(why, TL_EDRIVER, "user '%s' has accounts on "
		    "other hosts too (%s): a grant's login is '%s'@'%%' alone "
		    "(another would shadow it for connections from there, and "
		    "keep its privileges after the rotation retires it); drop "
		    "them first", g->login, hosts, g->login);
	if (locked)
		return tl_drv_why(why, TL_EDRIVER, "user '%s'@'%%' is locked: "
		    "tally adopt takes over a user its consumers log in as",
		    g->login);
	if (strcmp(access, "0") != 0)
		return tl_drv_why(why, TL_EDRIVER, "user '%s'@'%%' has global "
		    "privileges (access %s): tally adopt takes over a user "
		    "whose privileges are its database's (REVOKE ... ON *.* "
		    "first)", g->login, access);
	if (roles > 0)
		return tl_drv_why(why, TL_EDRIVER, "user '%s'@'%%' has %d "
		    "role%s granted: tally adopt takes over a user whose "
		    "privileges are its database's (REVOKE the roles first)",
		    g->login, roles, roles == 1 ? "" : "s");
	return 0;
}

/*
 * What taking over changes and what it would break: *beyond, the user's
 * privileges other than on the database (and GRANT OPTION there), which
 * go; *defined, the database's triggers and events, and its views and
 * routines of SQL SECURITY DEFINER, whose DEFINER is the user: they run
 * as it, and fail once the rotation drops it.
 */
static int
adopt_extent(struct tl_drv_mdb *p, const struct ids *x, long *beyond,
    long *defined, char *why)
{
	char sql[MDB_SQL_MAX];
	MYSQL_RES *r;
	MYSQL_ROW row;
	int rc;

	*beyond = *defined = 0;
	if ((rc = tl_drv_sqlf(sql, sizeof(sql), why, "SELECT"
	    " (SELECT COUNT(*) FROM mysql.db d WHERE d.User = %s AND"
	    "  NOT (d.Host = '%%' AND d.Db = %s AND d.Grant_priv = 'N')) +"
	    " (SELECT COUNT(*) FROM mysql.tables_priv t WHERE t.User = %s) +"
	    " (SELECT COUNT(*) FROM mysql.columns_priv c WHERE c.User = %s) +"
	    " (SELECT COUNT(*) FROM mysql.procs_priv q WHERE q.User = %s),"
	    " (SELECT COUNT(*) FROM information_schema.TRIGGERS"
	    "  WHERE TRIGGER_SCHEMA = %s AND DEFINER = CONCAT(%s, '@%%')) +"
	    " (SELECT COUNT(*) FROM information_schema.EVENTS"
	    "  WHERE EVENT_SCHEMA = %s AND DEFINER = CONCAT(%s, '@%%')) +"
	    " (SELECT COUNT(*) FROM information_schema.VIEWS"
	    "  WHERE TABLE_SCHEMA = %s AND DEFINER = CONCAT(%s, '@%%')"
	    "  AND SECURITY_TYPE = 'DEFINER') +"
	    " (SELECT COUNT(*) FROM information_schema.ROUTINES"
	    "  WHERE ROUTINE_SCHEMA = %s AND DEFINER = CONCAT(%s, '@%%')"
	    "  AND SECURITY_TYPE = 'DEFINER')", x->ulit, x->plit, x->ulit,
	    x->ulit, x->ulit, x->dlit, x->ulit, x->dlit, x->ulit, x->dlit,
	    x->ulit, x->dlit, x->ulit)) != 0 ||
	    (rc = query(p->c, sql, &r, "reading what the user holds and "
	    "defines", why)) != 0)
		return rc;
	if ((row = mysql_fetch_row(r)) != NULL) {
		*beyond = row[0] != NULL ? strtol(row[0], NULL, 10) : 0;
		*defined = row[1] != NULL ? strtol(row[1], NULL, 10) : 0;
	}
	mysql_free_result(r);
	return 0;
}

/*
 * tally adopt (g->adopting): the database g->resource and the user
 * 'g->login'@'%', made by someone else, become g's.  Everything is
 * checked before anything changes; then both are marked for g, as
 * create marks what it makes, and the user is given ALL on the database
 * and nothing else (granted before anything is revoked, so that its
 * consumers can use the database throughout).  Its password, REQUIRE and
 * resource limits are left as they are: they are how its consumers log
 * in until the rotation that follows retires it.  Nothing is dropped or
 * made.  A resumed call finds its marks and does the same again.
 * *revoked: privileges beyond the database went.
 */
static int
adopt_takeover(struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    const struct ids *x, int *revoked, char *why)
{
	long beyond, defined;
	int rc, found, md, mu;

	*revoked = 0;
	if ((rc = exists(p, 'd', g->resource, &found, why)) != 0)
		return rc;
	if (!found)
		return tl_drv_why(why, TL_EDRIVER, "database \"%s\" does not "
		    "exist on this server: nothing to adopt", g->resource);
	if ((rc = adoptable(p, g, 'd', g->resource, &md, why)) != 0 ||
	    (rc = adopt_user_ok(p, g, x, why)) != 0 ||
	    (rc = adoptable(p, g, 'u', g->login, &mu, why)) != 0 ||
	    (rc = adopt_extent(p, x, &beyond, &defined, why)) != 0)
		return rc;
	if (defined > 0)
		return tl_drv_why(why, TL_EDRIVER, "database \"%s\" has %ld "
		    "trigger%s, event%s, view%s or routine%s running as "
		    "'%s'@'%%' (its DEFINER): they would fail once the rotation "
		    "retires that user; give them another DEFINER (views and "
		    "routines: or SQL SECURITY INVOKER) first", g->resource,
		    defined, defined == 1 ? "" : "s", defined == 1 ? "" : "s",
		    defined == 1 ? "" : "s", defined == 1 ? "" : "s", g->login);
	if ((md && (rc = write_mark(p, g, 'd', g->resource, why)) != 0) ||
	    (mu && (rc = write_mark(p, g, 'u', g->login, why)) != 0) ||
	    (rc = grant_database(p, g, x, beyond > 0, why)) != 0)
		return rc;
	*revoked = beyond > 0;
	return 0;
}

/* --- operations ------------------------------------------------------ */

/*
 * create, add_credential, set_password and fix_privileges of a login
 * below ownership (g->access): the database must be one tally made (for
 * the grant that owns it, of this mesh) and is not changed; the user is
 * claimed and marked for g as create marks, its password set, and given
 * exactly db_privs on the database, REQUIRE and limits as any login's.
 * The owner grant's check looks at its own user alone, so this user's
 * privileges are never its drift.
 */
static int
access_create(struct tl_drv_mdb *p, const struct tl_drv_grant *g, char *why)
{
	char other[256];
	struct ids x;
	enum mark m;
	int rc, found, unnamed, mu;

	if ((rc = begin(p, g, 1, why)) != 0 ||
	    (rc = ids_make(p, g, &x, why)) != 0 ||
	    (rc = read_mark(p, g, 'd', g->resource, &m, &unnamed, other,
	    sizeof(other), why)) != 0 ||
	    (rc = exists(p, 'd', g->resource, &found, why)) != 0)
		return rc;
	if (m == MARK_MESH)
		return mesh_refused('d', g->resource, other, why);
	if (!found || m == MARK_ABSENT)
		return tl_drv_why(why, TL_EDRIVER, "database \"%s\" %s: access "
		    "is given to what tally made", g->resource, !found ?
		    "does not exist" : "is not tally's");
	if ((rc = claim(p, g, 'u', g->login, &mu, why)) != 0 ||
	    (rc = set_pw(p, g, &x, 1, why)) != 0 ||
	    (rc = set_pw(p, g, &x, 0, why)) != 0 ||
	    (rc = set_privileges(p, g, &x, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user '%s' %s: %s on database \"%s\" and "
	    "nothing else", g->login, mu ? "created" : "existed (password set)",
	    db_privs(g), g->resource);
}

static int
do_create(void *h, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_mdb *p = h;
	struct ids x;
	int rc, mdb, mu, revoked;

	if (g != NULL && g->access)
		return access_create(p, g, why);
	if ((rc = begin(p, g, 1, why)) != 0 ||
	    (rc = vet_mesh(p, g, why)) != 0 ||
	    (rc = ids_make(p, g, &x, why)) != 0)
		return rc;
	if (g->adopting) {
		if ((rc = adopt_takeover(p, g, &x, &revoked, why)) != 0)
			return rc;
		return tl_drv_why(why, 0, "database \"%s\" adopted with user "
		    "'%s'@'%%': ALL on it and nothing else%s; its password, "
		    "REQUIRE and limits kept until the rotation retires it",
		    g->resource, g->login, revoked ? " (its other privileges "
		    "revoked)" : "");
	}
	if ((rc = claim(p, g, 'd', g->resource, &mdb, why)) != 0 ||
	    (rc = claim(p, g, 'u', g->login, &mu, why)) != 0)
		return rc;
	if ((rc = runf(p->c, "creating the database", why, "CREATE DATABASE "
	    "IF NOT EXISTS %s CHARACTER SET utf8mb4", x.db)) != 0 ||
	    (rc = set_pw(p, g, &x, 1, why)) != 0 ||
	    (rc = set_pw(p, g, &x, 0, why)) != 0 ||
	    (rc = set_privileges(p, g, &x, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "database \"%s\" %s, user '%s' %s",
	    g->resource, mdb ? "created" : "existed", g->login, mu ? "created" :
	    "existed (password set)");
}

/* The facts of n grants in one query; *res has one row per grant. */
static int
facts(struct tl_drv_mdb *p, const struct tl_drv_grant *gs, size_t n,
    MYSQL_RES **res, char (*why)[TL_WHY_MAX])
{
	char one[1024], *rows, *sql;
	size_t cap = n * sizeof(one) + 1, len = 0, i;
	int rc = 0;

	if ((rows = malloc(cap)) == NULL)
		return tl_drv_why(why[0], ENOMEM, "out of memory");
	rows[0] = '\0';
	for (i = 0; i < n; i++) {
		if ((rc = grant_row(p, &gs[i], i, one, sizeof(one),
		    why[i])) != 0)
			goto out;
		len += (size_t)snprintf(rows + len, cap - len, "%s%s",
		    i > 0 ? " UNION ALL " : "", one);
	}
	if ((sql = facts_sql(p, rows)) == NULL) {
		rc = tl_drv_why(why[0], ENOMEM, "out of memory");
		goto out;
	}
	rc = query(p->c, sql, res, "reading the grants' privileges", why[0]);
	free(sql);
out:
	free(rows);
	return rc;
}

/*
 * Logs in as g's user at host:port and uses the database.  *c: 0 it
 * could; 1 the server refused the password (1045, and only that);
 * 2 the login or its use was refused for another reason (a resource
 * limit, 1226; the database, 1044; a lock, 4151), which a new password
 * would not repair.  TL_EUNREACH with detail when no session could be
 * had (nothing answered, or the server is full: 1040, 1203).
 */
static int
login_as(const struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    const char *host, const char *port, int *c, char *detail, size_t dn)
{
	struct tl_drv_mdb_conn cn = TL_DRV_MDB_CONN_INIT;
	MYSQL *m;
	char w[TL_WHY_MAX];
	unsigned e;
	int rc;

	*c = 0;
	cn.host = host;
	cn.port = port;
	cn.user = g->login;
	cn.password = g->password;
	cn.db = g->resource;
	/* As a consumer would: over TLS, verified as the admin's session. */
	cn.tls = p->tls;
	cn.ca_file = p->ca_file;
	rc = tl_drv_mdb_connect(&cn, &m, &e, w);
	if (rc != 0)
		snprintf(detail, dn, "%s", w);
	if (rc == TL_EUNREACH)
		return rc;
	if (rc != 0) {
		*c = e == ER_ACCESS_DENIED_ERROR ? 1 : 2;
		return 0;
	}
	if (mysql_query(m, "SELECT COUNT(*) FROM information_schema.TABLES") != 0) {
		*c = 2;
		snprintf(detail, dn, "%u %s", mysql_errno(m), mysql_error(m));
	} else {
		MYSQL_RES *r = mysql_store_result(m);

		if (r != NULL)
			mysql_free_result(r);
	}
	mysql_close(m);
	return 0;
}

static int
mdb_check(void *h, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	char w1[1][TL_WHY_MAX], detail[TL_WHY_MAX];
	struct tl_drv_mdb *p = h;
	MYSQL_RES *r = NULL;
	MYSQL_ROW row;
	const char *host, *port;
	int rc, c, alien;

	*drift = TL_DRIFT_NONE;
	if ((rc = begin(p, g, 1, why)) != 0)
		return rc;
	if ((rc = facts(p, g, 1, &r, w1)) != 0) {
		tl_drv_why(why, rc, "%s", w1[0]);
		return rc;
	}
	if ((row = mysql_fetch_row(r)) == NULL) {
		mysql_free_result(r);
		return tl_drv_why(why, TL_EDRIVER, "no row for the grant");
	}
	rc = eval_row(p, row, g, 0, drift, why);
	alien = rc == 0 && row_other_mesh(p, row, g, why);
	mysql_free_result(r);
	if (rc != 0 || *drift == TL_DRIFT_MISSING || alien)
		return rc;
	host = ep != NULL && ep->host != NULL ? ep->host : p->host;
	port = ep != NULL && ep->port != NULL ? ep->port : p->port;
	if (*drift == TL_DRIFT_PRIVILEGES && strstr(why, "locked") != NULL)
		return 0;	/* a locked user cannot prove its password */
	if (g->cert_login)
		return 0;	/* its key is on the consumer's node only */
	if ((rc = login_as(p, g, host, port, &c, detail,
	    sizeof(detail))) != 0)
		return tl_drv_why(why, rc, "the consumer's endpoint %s:%s does "
		    "not answer: %s", host != NULL ? host : "?",
		    port != NULL ? port : "?", detail);
	if (c == 1) {
		char prev[TL_WHY_MAX];

		snprintf(prev, sizeof(prev), "%s", *drift != TL_DRIFT_NONE ?
		    why : "");
		*drift = TL_DRIFT_CREDENTIAL;
		tl_drv_why(why, 0, "credential: user '%s' does not "
		    "authenticate at %s:%s: %s%s%s", g->login, host, port,
		    detail, prev[0] ? "; also " : "", prev);
	} else if (c == 2 && *drift == TL_DRIFT_NONE) {
		*drift = TL_DRIFT_PRIVILEGES;
		tl_drv_why(why, 0, "privileges: user '%s' cannot use \"%s\": "
		    "%s", g->login, g->resource, detail);
	} else if (c == 2) {
		char prev[TL_WHY_MAX];

		snprintf(prev, sizeof(prev), "%s", why);
		tl_drv_why(why, 0, "%s; user '%s' is refused at %s:%s: %s",
		    prev, g->login, host, port, detail);
	}
	return 0;
}

static int
mdb_check_bulk(void *h, const struct tl_drv_grant *gs, size_t n,
    enum tl_drv_drift *drift, char (*why)[TL_WHY_MAX])
{
	struct tl_drv_mdb *p = h;
	MYSQL_RES *r = NULL;
	MYSQL_ROW row;
	size_t i;
	int rc;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		drift[i] = TL_DRIFT_NONE;
		why[i][0] = '\0';
		if ((rc = tl_drv_mdb_grant_ok(&gs[i], 1, why[i])) != 0)
			return rc;
	}
	if ((rc = begin(p, &gs[0], 1, why[0])) != 0 ||
	    (rc = facts(p, gs, n, &r, why)) != 0)
		return rc;
	for (i = 0; i < n; i++) {
		if ((row = mysql_fetch_row(r)) == NULL ||
		    strtoul(row[C_I], NULL, 10) != i) {
			rc = tl_drv_why(why[0], TL_EDRIVER, "the privileges "
			    "query returned %zu rows for %zu grants", i, n);
			break;
		}
		if ((rc = eval_row(p, row, &gs[i], 1, &drift[i],
		    why[i])) != 0)
			break;
	}
	mysql_free_result(r);
	return rc;
}

static int
do_set_password(void *h, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_mdb *p = h;
	struct ids x;
	int rc, found;

	if (g != NULL && g->access)
		return access_create(p, g, why);
	if ((rc = begin(p, g, 1, why)) != 0 || (rc = vet(p, g, why)) != 0 ||
	    (rc = ids_make(p, g, &x, why)) != 0 ||
	    (rc = exists(p, 'u', g->login, &found, why)) != 0)
		return rc;
	if (!found)
		return tl_drv_why(why, TL_EDRIVER, "user '%s' is gone; not "
		    "recreated (tally repair does that)", g->login);
	if ((rc = set_pw(p, g, &x, 0, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "password of user '%s' set", g->login);
}

static int
do_fix_privileges(void *h, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_mdb *p = h;
	struct ids x;
	int rc, fd, fu;

	if (g != NULL && g->access)
		return access_create(p, g, why);
	if ((rc = begin(p, g, 0, why)) != 0 || (rc = vet(p, g, why)) != 0 ||
	    (rc = ids_make(p, g, &x, why)) != 0 ||
	    (rc = exists(p, 'd', g->resource, &fd, why)) != 0 ||
	    (rc = exists(p, 'u', g->login, &fu, why)) != 0)
		return rc;
	if (!fd || !fu)
		return tl_drv_why(why, TL_EDRIVER, "%s \"%s\" is gone; not "
		    "recreated (tally repair does that)", !fd ? "database" :
		    "user", !fd ? g->resource : g->login);
	if ((rc = set_privileges(p, g, &x, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user '%s' has ALL on \"%s\" and nothing "
	    "else again", g->login, g->resource);
}

/* Kills every connection of user ulit (a quoted literal): *n killed. */
static int
kill_sessions(struct tl_drv_mdb *p, const char *ulit, int *n, char *why)
{
	char sql[MDB_SQL_MAX];
	MYSQL_RES *r;
	MYSQL_ROW row;
	int rc;

	*n = 0;
	snprintf(sql, sizeof(sql), "SELECT ID FROM information_schema."
	    "PROCESSLIST WHERE USER = %s AND ID <> CONNECTION_ID()", ulit);
	if ((rc = query(p->c, sql, &r, "listing the user's connections",
	    why)) != 0)
		return rc;
	while ((row = mysql_fetch_row(r)) != NULL) {
		char k[64];

		if (row[0] == NULL)
			continue;
		snprintf(k, sizeof(k), "KILL CONNECTION %llu",
		    strtoull(row[0], NULL, 10));
		if (mysql_query(p->c, k) == 0)
			(*n)++;
		else if (mysql_errno(p->c) != ER_NO_SUCH_THREAD) {
			rc = tl_drv_why(why,
			    tl_drv_mdb_errno_rc(mysql_errno(p->c), 0),
			    "killing a connection: %u %s", mysql_errno(p->c),
			    mysql_error(p->c));
			break;
		}
	}
	mysql_free_result(r);
	return rc;
}

static int
mdb_sessions(void *h, const struct tl_drv_grant *g, unsigned *count,
    char *why)
{
	struct tl_drv_mdb *p = h;
	char sql[MDB_SQL_MAX];
	struct ids x;
	MYSQL_RES *r;
	MYSQL_ROW row;
	int rc;

	*count = 0;
	if ((rc = begin(p, g, 0, why)) != 0 ||
	    (rc = ids_make(p, g, &x, why)) != 0)
		return rc;
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM information_schema."
	    "PROCESSLIST WHERE USER = %s", x.ulit);
	if ((rc = query(p->c, sql, &r, "counting the user's connections",
	    why)) != 0)
		return rc;
	if ((row = mysql_fetch_row(r)) != NULL && row[0] != NULL)
		*count = (unsigned)strtoul(row[0], NULL, 10);
	mysql_free_result(r);
	return tl_drv_why(why, 0, "user '%s' has %u connection%s", g->login,
	    *count, *count == 1 ? "" : "s");
}

/* Locks a user of g's (if it is g's), kills its connections. */
static int
lock_user(struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    const char *login, int *locked, int *killed, char *why)
{
	char ulit[2 * MDB_USER_MAX + 4], other[256];
	enum mark m;
	int rc, found, unnamed;

	*locked = *killed = 0;
	if ((rc = read_mark(p, g, 'u', login, &m, &unnamed, other,
	    sizeof(other), why)) != 0)
		return rc;
	if (m == MARK_MESH)
		return mesh_refused('u', login, other, why);
	if (m != MARK_OURS)
		return 0;	/* not this grant's: left as it is */
	if (tl_drv_mdb_quote_str(p->c, login, ulit, sizeof(ulit)) != 0)
		return tl_drv_why(why, TL_EINVAL, "name too long");
	if ((rc = exists(p, 'u', login, &found, why)) != 0)
		return rc;
	/* Locked first, so no connection starts after the sweep. */
	if (found && (rc = runf(p->c, "locking the user", why, "ALTER USER "
	    "%s@'%%' ACCOUNT LOCK", ulit)) != 0)
		return rc;
	*locked = found;
	return kill_sessions(p, ulit, killed, why);
}

/* The users marked for g's grant (named grants), g->login included. */
static int
grant_users(struct tl_drv_mdb *p, const struct tl_drv_grant *g,
    char (**out)[MDB_USER_MAX + 1], size_t *n, char *why)
{
	char sql[MDB_SQL_MAX], glit[2 * 256 + 8];
	MYSQL_RES *r;
	MYSQL_ROW row;
	size_t cap;
	int rc, seen = 0;

	*out = NULL;
	*n = 0;
	if (!tl_drv_grant_named(g)) {
		snprintf(sql, sizeof(sql), "SELECT 1 LIMIT 0");
	} else {
		char alit[2 * MDB_MESH_MAX + 8];

		if (tl_drv_mdb_quote_str(p->c, g->grant, glit,
		    sizeof(glit)) != 0 || tl_drv_mdb_quote_str(p->c,
		    g->adopt_mesh != NULL ? g->adopt_mesh : "", alit,
		    sizeof(alit)) != 0)
			return tl_drv_why(why, TL_EINVAL, "grant id too long");
		/* Another mesh's users of the same grant id are not g's. */
		snprintf(sql, sizeof(sql), "SELECT name FROM `" MDB_META
		    "`.`marks` WHERE kind = 'u' AND grant_id = %s AND mesh IN "
		    "('', '%s', %s)", glit, p->mesh, alit);
	}
	if ((rc = query(p->c, sql, &r, "listing the grant's users", why)) != 0)
		return rc;
	cap = mysql_num_rows(r) + 1;
	if ((*out = calloc(cap, sizeof(**out))) == NULL) {
		mysql_free_result(r);
		return tl_drv_why(why, ENOMEM, "out of memory");
	}
	while ((row = mysql_fetch_row(r)) != NULL && *n + 1 < cap) {
		if (row[0] == NULL)
			continue;
		snprintf((*out)[(*n)++], MDB_USER_MAX + 1, "%s", row[0]);
		if (strcmp(row[0], g->login) == 0)
			seen = 1;
	}
	mysql_free_result(r);
	if (!seen)
		snprintf((*out)[(*n)++], MDB_USER_MAX + 1, "%s", g->login);
	return 0;
}

static int
do_revoke(void *h, const struct tl_drv_grant *g, int drop, char *why)
{
	struct tl_drv_mdb *p = h;
	char (*users)[MDB_USER_MAX + 1] = NULL;
	char other[256];
	struct ids x;
	size_t nu = 0, i;
	enum mark m;
	int rc, locked, killed, total = 0, unnamed;

	if ((rc = begin(p, g, 0, why)) != 0 ||
	    (rc = vet_mesh(p, g, why)) != 0 ||
	    (rc = ids_make(p, g, &x, why)) != 0)
		return rc;
	if (!drop) {
		if ((rc = lock_user(p, g, g->login, &locked, &killed,
		    why)) != 0)
			return rc;
		return tl_drv_why(why, 0, "user '%s' %s, %d connection%s "
		    "killed; database \"%s\" %s", g->login,
		    locked ? "locked" : "not there (or not this grant's)",
		    killed, killed == 1 ? "" : "s", g->resource,
		    g->access ? "(another grant's) left" : "kept");
	}
	if ((rc = grant_users(p, g, &users, &nu, why)) != 0)
		return rc;
	for (i = 0; i < nu; i++) {
		char ulit[2 * MDB_USER_MAX + 4];

		if ((rc = lock_user(p, g, users[i], &locked, &killed,
		    why)) != 0)
			goto out;
		total += killed;
		if ((rc = read_mark(p, g, 'u', users[i], &m, &unnamed, other,
		    sizeof(other), why)) != 0)
			goto out;
		if (m != MARK_OURS)
			continue;
		if (tl_drv_mdb_quote_str(p->c, users[i], ulit,
		    sizeof(ulit)) != 0 ||
		    (rc = runf(p->c, "dropping the user", why, "DROP USER IF "
		    "EXISTS %s@'%%'", ulit)) != 0 ||
		    (rc = drop_mark(p, 'u', users[i], why)) != 0)
			goto out;
	}
	/* A login below ownership: the database is the owner grant's. */
	if (g->access) {
		tl_drv_why(why, 0, "%zu user%s dropped, %d connection%s "
		    "killed; database \"%s\" (another grant's) left", nu,
		    nu == 1 ? "" : "s", total, total == 1 ? "" : "s",
		    g->resource);
		goto out;
	}
	if ((rc = read_mark(p, g, 'd', g->resource, &m, &unnamed, other,
	    sizeof(other), why)) != 0)
		goto out;
	if (m == MARK_OURS && ((rc = runf(p->c, "dropping the database", why,
	    "DROP DATABASE IF EXISTS %s", x.db)) != 0 ||
	    (rc = drop_mark(p, 'd', g->resource, why)) != 0))
		goto out;
	tl_drv_why(why, 0, "database \"%s\" %s and %zu user%s dropped, %d "
	    "connection%s killed", g->resource, m == MARK_OURS ? "dropped" :
	    "(not this grant's) left", nu, nu == 1 ? "" : "s", total,
	    total == 1 ? "" : "s");
out:
	free(users);
	return rc;
}

static int
mdb_size(void *h, const struct tl_drv_grant *g, uint64_t *bytes, char *why)
{
	struct tl_drv_mdb *p = h;
	char sql[MDB_SQL_MAX];
	struct ids x;
	MYSQL_RES *r;
	MYSQL_ROW row;
	int rc;

	*bytes = 0;
	if ((rc = begin(p, g, 0, why)) != 0 ||
	    (rc = ids_make(p, g, &x, why)) != 0)
		return rc;
	snprintf(sql, sizeof(sql), "SELECT IFNULL(SUM(DATA_LENGTH + "
	    "INDEX_LENGTH), 0) FROM information_schema.TABLES WHERE "
	    "TABLE_SCHEMA = %s", x.dlit);
	if ((rc = query(p->c, sql, &r, "sizing the database", why)) != 0)
		return rc;
	if ((row = mysql_fetch_row(r)) != NULL && row[0] != NULL)
		*bytes = strtoull(row[0], NULL, 10);
	mysql_free_result(r);
	return tl_drv_why(why, 0, "database \"%s\": %llu bytes", g->resource,
	    (unsigned long long)*bytes);
}

/* Locks the old user, kills its connections, drops it. */
static int
do_retire_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_mdb *p = h;
	char ulit[2 * MDB_USER_MAX + 4], other[256];
	enum mark m;
	int rc, locked, killed, unnamed;

	if ((rc = begin(p, g, 0, why)) != 0 ||
	    (rc = vet_mesh(p, g, why)) != 0 ||
	    (rc = lock_user(p, g, g->login, &locked, &killed, why)) != 0 ||
	    (rc = read_mark(p, g, 'u', g->login, &m, &unnamed, other,
	    sizeof(other), why)) != 0)
		return rc;
	if (m != MARK_OURS)
		return tl_drv_why(why, 0, "user '%s' is gone (or not this "
		    "grant's)", g->login);
	if (tl_drv_mdb_quote_str(p->c, g->login, ulit, sizeof(ulit)) != 0)
		return tl_drv_why(why, TL_EINVAL, "name too long");
	if ((rc = runf(p->c, "dropping the old user", why, "DROP USER IF "
	    "EXISTS %s@'%%'", ulit)) != 0 ||
	    (rc = drop_mark(p, 'u', g->login, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user '%s' locked, %d connection%s killed, "
	    "dropped", g->login, killed, killed == 1 ? "" : "s");
}

/*
 * tally rotate --admin: the session's own account (CURRENT_USER(), the
 * account the server matched, whatever its host part), by hash like
 * every password.  The handle keeps the new password, so a reconnect
 * still logs in.
 */
static int
do_set_admin_password(void *h, const char *user, const char *password,
    char *why)
{
	struct tl_drv_mdb *p = h;
	char hash[42], *np, acct[400], ulit[420], hlit[600], *at;
	MYSQL_RES *r;
	MYSQL_ROW row;
	int rc;

	if (p == NULL || password == NULL || *password == '\0')
		return tl_drv_why(why, TL_EINVAL, "no session or no password");
	if ((rc = ensure(p, why)) != 0)
		return rc;
	if ((np = tl_drv_secret_dup(password)) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	/*
	 * ALTER USER CURRENT_USER() is accepted by 10.11 and changes
	 * nothing: the account is named, as the server matched it.
	 */
	if ((rc = query(p->c, "SELECT CURRENT_USER()", &r, "reading the "
	    "admin's account", why)) != 0) {
		tl_secret_free(np);
		return rc;
	}
	acct[0] = '\0';
	if ((row = mysql_fetch_row(r)) != NULL && row[0] != NULL)
		snprintf(acct, sizeof(acct), "%s", row[0]);
	mysql_free_result(r);
	if ((at = strrchr(acct, '@')) == NULL) {
		tl_secret_free(np);
		return tl_drv_why(why, TL_EDRIVER, "CURRENT_USER() is "
		    "\"%.64s\"", acct);
	}
	*at++ = '\0';
	tl_drv_mdb_hash(password, hash);
	if (tl_drv_mdb_quote_str(p->c, acct, ulit, sizeof(ulit)) != 0 ||
	    tl_drv_mdb_quote_str(p->c, at, hlit, sizeof(hlit)) != 0 ||
	    (rc = runf(p->c, "setting the admin's password", why, "ALTER USER "
	    "%s@%s IDENTIFIED VIA mysql_native_password USING '%s'", ulit,
	    hlit, hash)) != 0) {
		tl_secret_free(np);
		return rc != 0 ? rc : tl_drv_why(why, TL_EINVAL, "account too "
		    "long");
	}
	tl_secret_free(p->password);
	p->password = np;
	return tl_drv_why(why, 0, "password of admin user '%s' set",
	    user != NULL ? user : p->user);
}

/* The fence of p->fmesh or mesh as c reads it (nothing: epoch 0). */
static int
fence_read(MYSQL *c, const char *mesh, const char *lock,
    struct tl_drv_fence_held *held, unsigned *err, char *why)
{
	char sql[256];
	MYSQL_RES *r;
	MYSQL_ROW row;
	int rc;

	held->epoch = 0;
	held->leader[0] = '\0';
	*err = 0;
	snprintf(sql, sizeof(sql), "SELECT epoch, leader FROM `" MDB_META
	    "`.`fences` WHERE mesh = '%s'%s", mesh, lock);
	if ((rc = query(c, sql, &r, "reading the fence", why)) != 0) {
		*err = mysql_errno(c);
		return rc;
	}
	if ((row = mysql_fetch_row(r)) != NULL && row[0] != NULL) {
		held->epoch = strtoull(row[0], NULL, 10);
		snprintf(held->leader, sizeof(held->leader), "%s",
		    row[1] != NULL ? row[1] : "");
	}
	mysql_free_result(r);
	return 0;
}

/*
 * The fence: one row per mesh in tally.fences, raised by a compare-
 * and-set (the row changes only when its epoch is strictly lower; in
 * ON DUPLICATE KEY UPDATE the assignments run left to right, so leader
 * is compared before epoch moves), then read back.  Read first: a raise
 * locks the row, and so waits for every call in flight under it
 * (fence_hold); held at want's epoch or above, it would change nothing.
 * The table is made when a read says it is missing (DDL, even IF NOT
 * EXISTS, would wait for the calls that hold a row).  Other meshes'
 * rows are not touched; tally.fence of earlier releases is no longer
 * read.
 */
static int
mdb_fence(void *h, const struct tl_drv_fence *want,
    struct tl_drv_fence_held *held, char *why)
{
	struct tl_drv_mdb *p = h;
	const char *mesh = want->mesh != NULL ? want->mesh : "";
	const char *leader = want->leader != NULL ? want->leader : "";
	unsigned err;
	int rc;

	held->epoch = 0;
	held->leader[0] = '\0';
	if (p == NULL)
		return tl_drv_why(why, TL_EINVAL, "driver not open");
	/* Both are hex digits (or empty): nothing to escape, but refuse. */
	if (strspn(mesh, "0123456789abcdef") != strlen(mesh) ||
	    strspn(leader, "0123456789abcdef") != strlen(leader) ||
	    strlen(mesh) > 64 || strlen(leader) > 64)
		return tl_drv_why(why, TL_EINVAL, "fence: mesh or leader is "
		    "not hex");
	if ((rc = ensure(p, why)) != 0 || (rc = ensure_meta(p, why)) != 0)
		return rc;
	rc = fence_read(p->c, mesh, "", held, &err, why);
	if (rc != 0 && err == ER_NO_SUCH_TABLE)
		rc = tl_drv_mdb_run(p->c, "CREATE TABLE IF NOT EXISTS `"
		    MDB_META "`.`fences` (mesh VARCHAR(64) PRIMARY KEY, epoch "
		    "BIGINT UNSIGNED NOT NULL, leader VARCHAR(64) NOT NULL) "
		    "ENGINE=InnoDB", "creating tally.fences", why);
	if (rc != 0 || want->epoch == 0 || held->epoch >= want->epoch)
		return rc;
	if ((rc = runf(p->c, "raising the fence", why,
	    "INSERT INTO `" MDB_META "`.`fences` (mesh, epoch, leader) VALUES "
	    "('%s', %llu, '%s') ON DUPLICATE KEY UPDATE "
	    "leader = IF(epoch < VALUES(epoch), VALUES(leader), leader), "
	    "epoch = IF(epoch < VALUES(epoch), VALUES(epoch), epoch)", mesh,
	    (unsigned long long)want->epoch, leader)) != 0)
		return rc;
	return fence_read(p->c, mesh, "", held, &err, why);
}

/*
 * The fence with each change.  fc, a second admin session kept for the
 * life of the handle, reads this session's fence row LOCK IN SHARE MODE
 * (a locking read: the row as last committed, never an older snapshot),
 * which opens a transaction (fc runs with autocommit off) that it keeps
 * for the whole of one changing call, and commits after it.  The
 * call's statements run on the admin session, whose DDL commits its
 * own transaction but never fc's; another leader's raise (mdb_fence's
 * INSERT ... ON DUPLICATE KEY UPDATE) must lock that row, so it waits
 * until the call is over: each statement lands before the raise, and a
 * call that reads a fence not its own is refused before it changes
 * anything.  No row yet for the mesh: ours is raised first.  Two
 * statements a call on fc; a session the server ended since the last
 * call is made again once.
 */
static void
fence_abort(struct tl_drv_mdb *p)
{
	if (p->fc != NULL)
		(void)mysql_query(p->fc, "ROLLBACK");
}

/* fc, connected, with autocommit off and no idle timeout. */
static int
fence_session(struct tl_drv_mdb *p, char *why)
{
	int rc;

	if (p->fc != NULL)
		return 0;
	if ((rc = admin_connect(p, &p->fc, why)) != 0)
		return rc;
	if ((rc = tl_drv_mdb_run(p->fc, "SET SESSION autocommit = 0, "
	    "idle_transaction_timeout = 0, "
	    "idle_readonly_transaction_timeout = 0, "
	    "idle_write_transaction_timeout = 0",
	    "the fence session's settings", why)) != 0) {
		mysql_close(p->fc);
		p->fc = NULL;
	}
	return rc;
}

static int
fence_hold(struct tl_drv_mdb *p, char *why)
{
	struct tl_drv_fence want = { p->fmesh, p->fepoch, p->fleader };
	struct tl_drv_fence_held held;
	unsigned err;
	int rc, tries, relost = 0;

	if (!p->fenced)
		return 0;
	for (tries = 0;; tries++) {
		if ((rc = fence_session(p, why)) != 0)
			return rc;
		rc = fence_read(p->fc, p->fmesh, " LOCK IN SHARE MODE", &held,
		    &err, why);
		if (rc == TL_EUNREACH && !relost++) {
			/* Ended by the server since the last call. */
			mysql_close(p->fc);
			p->fc = NULL;
			tries--;
			continue;
		}
		if (rc == 0 && held.epoch != 0)
			break;
		fence_abort(p);
		if (rc != 0 && err != ER_NO_SUCH_TABLE && err != ER_BAD_DB_ERROR)
			return rc;
		if (tries > 0)
			return tl_drv_why(why, TL_EDRIVER, "holding the fence: "
			    "mesh %.12s has no fence row after its raise",
			    p->fmesh);
		if ((rc = mdb_fence(p, &want, &held, why)) != 0)
			return rc;
	}
	if (tl_drv_fence_ours(&want, &held))
		return 0;
	fence_abort(p);
	return tl_drv_why(why, TL_EREFUSED, "deposed: MariaDB holds the fence "
	    "of mesh %.12s at epoch %llu for leader %.12s, this session is "
	    "leader %.12s at epoch %llu: nothing changed", p->fmesh,
	    (unsigned long long)held.epoch, held.leader, p->fleader,
	    (unsigned long long)p->fepoch);
}

/* Ends the hold; rc: the call's, kept unless the release failed. */
static int
fence_release(struct tl_drv_mdb *p, int rc, char *why)
{
	unsigned e;

	if (!p->fenced || p->fc == NULL)
		return rc;
	if (mysql_query(p->fc, "COMMIT") != 0 && rc == 0) {
		e = mysql_errno(p->fc);
		return tl_drv_why(why, tl_drv_mdb_errno_rc(e, 0), "the session "
		    "holding the fence was lost during the call: %u %s", e,
		    mysql_error(p->fc));
	}
	return rc;
}

/* The changing operations: each one call under fence_hold. */
static int
fenced(void *h, const struct tl_drv_grant *g, int arg,
    int (*fn)(void *, const struct tl_drv_grant *, int, char *), char *why)
{
	struct tl_drv_mdb *p = h;
	int rc;

	if (p == NULL)
		return tl_drv_why(why, TL_EINVAL, "driver not open");
	if ((rc = fence_hold(p, why)) != 0)
		return rc;
	return fence_release(p, fn(h, g, arg, why), why);
}

static int
f_create(void *h, const struct tl_drv_grant *g, int arg, char *why)
{
	(void)arg;
	return do_create(h, g, why);
}

static int
f_set_password(void *h, const struct tl_drv_grant *g, int arg, char *why)
{
	(void)arg;
	return do_set_password(h, g, why);
}

static int
f_fix_privileges(void *h, const struct tl_drv_grant *g, int arg, char *why)
{
	(void)arg;
	return do_fix_privileges(h, g, why);
}

static int
f_retire_credential(void *h, const struct tl_drv_grant *g, int arg,
    char *why)
{
	(void)arg;
	return do_retire_credential(h, g, why);
}

static int
f_revoke(void *h, const struct tl_drv_grant *g, int drop, char *why)
{
	return do_revoke(h, g, drop, why);
}

static int
mdb_create(void *h, const struct tl_drv_grant *g, char *why)
{
	return fenced(h, g, 0, f_create, why);
}

static int
mdb_add_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	return fenced(h, g, 0, f_create, why);
}

static int
mdb_set_password(void *h, const struct tl_drv_grant *g, char *why)
{
	return fenced(h, g, 0, f_set_password, why);
}

static int
mdb_fix_privileges(void *h, const struct tl_drv_grant *g, char *why)
{
	return fenced(h, g, 0, f_fix_privileges, why);
}

static int
mdb_retire_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	return fenced(h, g, 0, f_retire_credential, why);
}

static int
mdb_revoke(void *h, const struct tl_drv_grant *g, int drop, char *why)
{
	return fenced(h, g, drop, f_revoke, why);
}

static int
mdb_set_admin_password(void *h, const char *user, const char *password,
    char *why)
{
	struct tl_drv_mdb *p = h;
	int rc;

	if (p == NULL)
		return tl_drv_why(why, TL_EINVAL, "driver not open");
	if ((rc = fence_hold(p, why)) != 0)
		return rc;
	return fence_release(p, do_set_admin_password(h, user, password, why),
	    why);
}

const struct tl_drv_ops tl_drv_mariadb = {
	.decl = &tl_drv_mariadb_decl,
	.open = mdb_open,
	.close = mdb_close,
	.create = mdb_create,
	.check = mdb_check,
	.check_bulk = mdb_check_bulk,
	.set_password = mdb_set_password,
	.fix_privileges = mdb_fix_privileges,
	.migrate = tl_drv_mdb_migrate,
	.revoke = mdb_revoke,
	.size = mdb_size,
	.set_admin_password = mdb_set_admin_password,
	.add_credential = mdb_add_credential,
	.retire_credential = mdb_retire_credential,
	.sessions = mdb_sessions,
	.fence = mdb_fence,
};
