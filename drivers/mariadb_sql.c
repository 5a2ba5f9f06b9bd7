/*
 * mariadb_sql.c - what the MariaDB driver's session and its migrations
 * share: connecting, running a statement, quoting, the password hash and
 * the checks of a grant's names (mariadb-internal.h).  mariadb.c (the
 * operations) and mariadb_migrate.c both sit on it; neither calls the
 * other but for the ops table's migrate.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mysql.h>
#include <errmsg.h>
#include <mysqld_error.h>
#include <openssl/evp.h>

#include "core/error.h"
#include "core/secret.h"
#include "driver.h"
#include "mariadb-internal.h"
#include "util.h"

int
tl_drv_mdb_errno_rc(unsigned e, int connecting)
{
	if ((e >= 2000 && e < 2100 && e != CR_COMMANDS_OUT_OF_SYNC) ||
	    e == ER_CON_COUNT_ERROR || e == ER_SERVER_SHUTDOWN ||
	    e == ER_CONNECTION_KILLED || e == ER_TOO_MANY_USER_CONNECTIONS)
		return TL_EUNREACH;
	if (connecting && (e == ER_ACCESS_DENIED_ERROR ||
	    e == ER_DBACCESS_DENIED_ERROR || e == 1698 ||
	    e == ER_ACCOUNT_HAS_BEEN_LOCKED))
		return TL_EAUTH;
	return TL_EDRIVER;
}

/*
 * mysql_init initialises the library on first use, which is not safe
 * from two threads at once (tallyd's workers open sessions together).
 */
static pthread_once_t mdb_once = PTHREAD_ONCE_INIT;
static int mdb_init_rc;

static void
mdb_library_init(void)
{
	mdb_init_rc = mysql_library_init(0, NULL, NULL);
}

/*
 * Whether a connection made with cn's client certificate failed with e
 * (msg its text) because the server refused the certificate.  Under
 * TLS 1.2 the server says so in an alert (2026 "... alert unknown ca");
 * under TLS 1.3 the client has finished its handshake when the server
 * checks the certificate, and sees the connection end (2013) at its
 * first read: then the same login without the certificate is tried,
 * and a server that answers it (logged in, or refused by a server
 * error) refused the certificate, not the connection.
 */
static int
cert_refused(const struct tl_drv_mdb_conn *cn, unsigned e, const char *msg)
{
	struct tl_drv_mdb_conn bare = *cn;
	char w[TL_WHY_MAX];
	const char *a;
	unsigned e2;
	MYSQL *m;

	if (e == CR_SSL_CONNECTION_ERROR)
		return (a = strstr(msg, " alert ")) != NULL &&
		    (strstr(a, "certificate") != NULL ||
		    strstr(a, "unknown ca") != NULL ||
		    strstr(a, "access denied") != NULL);
	if (e != CR_SERVER_LOST)
		return 0;
	bare.cert_file = bare.key_file = NULL;
	if (tl_drv_mdb_connect(&bare, &m, &e2, w) == 0) {
		mysql_close(m);
		return 1;
	}
	return e2 != 0 && tl_drv_mdb_errno_rc(e2, 1) != TL_EUNREACH;
}

int
tl_drv_mdb_connect(const struct tl_drv_mdb_conn *cn, MYSQL **out,
    unsigned *err, char *why)
{
	unsigned timeout = MDB_CONNECT_S, io = MDB_IO_S, proto = MYSQL_PROTOCOL_TCP;
	unsigned long pn = cn->port != NULL && *cn->port != '\0' ?
	    strtoul(cn->port, NULL, 10) : 3306;
	const char *host = cn->host != NULL && *cn->host != '\0' ? cn->host :
	    "127.0.0.1";
	my_bool yes = 1;
	unsigned e, dummy;
	MYSQL *c;
	int rc;

	if (err == NULL)
		err = &dummy;
	*out = NULL;
	*err = 0;
	if (pthread_once(&mdb_once, mdb_library_init) != 0 ||
	    mdb_init_rc != 0)
		return tl_drv_why(why, TL_EDRIVER, "libmariadb did not "
		    "initialise");
	if ((c = mysql_init(NULL)) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	mysql_options(c, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
	mysql_options(c, MYSQL_OPT_READ_TIMEOUT, &io);
	mysql_options(c, MYSQL_OPT_WRITE_TIMEOUT, &io);
	mysql_options(c, MYSQL_OPT_PROTOCOL, &proto);
	mysql_options(c, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	if (cn->tls != TL_DRV_TLS_OFF) {
		/* TLS or nothing: never a plaintext fallback. */
		mysql_options(c, MYSQL_OPT_SSL_ENFORCE, &yes);
		if (cn->tls == TL_DRV_TLS_VERIFY) {
			if (cn->ca_file == NULL) {
				mysql_close(c);
				return tl_drv_why(why, TL_EUNTRUSTED, "tls is "
				    "verify but the provider has no ca: tally "
				    "assign ... --set ca=FILE (the CA's PEM), "
				    "or --set tls=require");
			}
			mysql_options(c, MYSQL_OPT_SSL_CA, cn->ca_file);
			mysql_options(c, MYSQL_OPT_SSL_VERIFY_SERVER_CERT,
			    &yes);
		}
		/* Copied names: the files are opened at every connect. */
		if (cn->cert_file != NULL) {
			mysql_options(c, MYSQL_OPT_SSL_CERT, cn->cert_file);
			mysql_options(c, MYSQL_OPT_SSL_KEY, cn->key_file);
		}
	}
	/* No option files: what tally connects with is what it was given. */
	if (mysql_real_connect(c, host, cn->user, cn->password != NULL ?
	    cn->password : "", cn->db, (unsigned)pn, NULL, 0) == NULL) {
		e = mysql_errno(c);
		*err = e;
		rc = tl_drv_mdb_errno_rc(e, 1);
		/* A handshake that fails: the server is not trusted. */
		if (e == CR_SSL_CONNECTION_ERROR)
			rc = TL_EUNTRUSTED;
		tl_drv_why(why, rc, "connecting to %s:%lu as '%s': %u %s",
		    host, pn, cn->user != NULL ? cn->user : "", e,
		    mysql_error(c));
		if (cn->cert_file != NULL && cert_refused(cn, e,
		    mysql_error(c))) {
			rc = TL_EAUTH;
			tl_drv_why_add(why, "the server refused the client "
			    "certificate in the TLS handshake (its ssl-ca does "
			    "not verify it)");
		}
		mysql_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

int
tl_drv_mdb_run(MYSQL *c, const char *sql, const char *step, char *why)
{
	MYSQL_RES *r;
	unsigned e;
	int rc;

	if (mysql_real_query(c, sql, strlen(sql)) != 0) {
		e = mysql_errno(c);
		rc = tl_drv_mdb_errno_rc(e, 0);
		return tl_drv_why(why, rc, "%s: %u %s", step, e,
		    mysql_error(c));
	}
	/* A statement that returns rows here has them discarded. */
	if ((r = mysql_store_result(c)) != NULL)
		mysql_free_result(r);
	return 0;
}

/* A query returning rows: *res (caller frees). */
int
tl_drv_mdb_quote_id(const char *name, char *out, size_t n)
{
	size_t o = 0;

	if (n < 3)
		return TL_ETOOBIG;
	out[o++] = '`';
	for (; *name != '\0'; name++) {
		if (o + 3 >= n)
			return TL_ETOOBIG;
		if (*name == '`')
			out[o++] = '`';
		out[o++] = *name;
	}
	out[o++] = '`';
	out[o] = '\0';
	return 0;
}

int
tl_drv_mdb_quote_str(MYSQL *c, const char *s, char *out, size_t n)
{
	size_t l = strlen(s);

	if (2 * l + 3 > n)
		return TL_ETOOBIG;
	out[0] = '\'';
	l = mysql_real_escape_string(c, out + 1, s, (unsigned long)l);
	out[l + 1] = '\'';
	out[l + 2] = '\0';
	return 0;
}

/* The database name as a GRANT pattern: _ and % escaped, then quoted. */
void
tl_drv_mdb_hash(const char *password, char out[42])
{
	unsigned char h1[EVP_MAX_MD_SIZE], h2[EVP_MAX_MD_SIZE];
	unsigned l1 = 0, l2 = 0, i;

	EVP_Digest(password, strlen(password), h1, &l1, EVP_sha1(), NULL);
	EVP_Digest(h1, l1, h2, &l2, EVP_sha1(), NULL);
	out[0] = '*';
	for (i = 0; i < 20 && i < l2; i++)
		snprintf(out + 1 + 2 * i, 3, "%02X", h2[i]);
	out[41] = '\0';
	tl_secret_wipe(h1, sizeof(h1));
}

/* [a-z0-9_-], as the naming scheme makes them; nothing else is sent. */
static int
name_ok(const char *what, const char *name, size_t max, char *why)
{
	size_t i, n = name != NULL ? strlen(name) : 0;

	if (n == 0 || n > max)
		return tl_drv_why(why, TL_EINVAL, "%s name must be 1-%zu bytes",
		    what, max);
	for (i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		    (name[i] >= '0' && name[i] <= '9') || name[i] == '_' ||
		    name[i] == '-'))
			return tl_drv_why(why, TL_EINVAL, "%s name \"%.64s\": "
			    "only a-z, 0-9, _ and - are used", what, name);
	return 0;
}

int
tl_drv_mdb_grant_ok(const struct tl_drv_grant *g, int need_pw, char *why)
{
	size_t i;
	int rc;

	if (g == NULL)
		return tl_drv_why(why, TL_EINVAL, "no grant");
	if ((rc = name_ok("database", g->resource, MDB_DB_MAX, why)) != 0 ||
	    (rc = name_ok("user", g->login, MDB_USER_MAX, why)) != 0)
		return rc;
	for (i = 0; tl_drv_mdb_reserved[i] != NULL; i++)
		if (strcmp(g->resource, tl_drv_mdb_reserved[i]) == 0)
			return tl_drv_why(why, TL_EINVAL,
			    "database \"%s\" is the server's own: refused",
			    g->resource);
	/* A login by certificate has none (decl.h, cert_login). */
	if (need_pw && !g->cert_login && (g->password == NULL ||
	    *g->password == '\0'))
		return tl_drv_why(why, TL_EINVAL,
		    "no password for user \"%s\"", g->login);
	if (g->grant != NULL && strlen(g->grant) > 255)
		return tl_drv_why(why, TL_EINVAL,
		    "grant id longer than 255 bytes");
	return 0;
}

