/*
 * postgres.c - the PostgreSQL driver: one database per grant.
 * These are its operations; its declaration (type, settings, fields,
 * revocation, fencing, names, compose) is postgres_decl.c's.
 *
 * What a grant is on the server (create makes it, check verifies it,
 * fix_privileges restores it):
 *
 *   owner	a NOLOGIN role that owns the database and everything in it,
 *		with CONNECT, CREATE and TEMPORARY on the database;
 *   login	a LOGIN role (the credential), a member of owner, with
 *		ALTER ROLE login SET role = owner and no other setting (none
 *		IN DATABASE either);
 *   resource	a database owned by owner, with no setting of its own
 *		(ALTER DATABASE ... SET) but freeze's read-only flag;
 *		REVOKE ALL ... FROM PUBLIC, so only members of owner (and
 *		superusers) can connect; in it, schema public owned by
 *		owner, USAGE and CREATE for owner, nothing for anyone else.
 *
 * Both roles are NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
 * NOBYPASSRLS.
 *
 * Why the login SETs ROLE to owner at session start: every object the
 * consumer creates (tables, migrations) is then owned by the owner role,
 * not by the credential.  Rotation issues a second login beside the
 * first, a member of the same owner, and it sees and owns exactly what
 * the first did; the old login can later be dropped without
 * REASSIGN OWNED (DROP ROLE fails with 2BP01 while a role owns objects).
 * The cost: current_user in the consumer's sessions is the owner role
 * (session_user is the login), and a client that runs RESET ROLE can
 * still create objects owned by its login, so dropping a login runs
 * DROP OWNED first.  The setting is role-wide (not IN DATABASE) because a
 * login can connect to nothing else anyway.
 *
 * Safety rules, kept here even though names are validated upstream:
 * identifiers reach SQL only through PQescapeIdentifier, values only as
 * parameters or through PQescapeLiteral; connection parameters go through
 * PQconnectStartParams with expand_dbname = 0 (never a conninfo string).
 * Passwords are sent as SCRAM-SHA-256 verifiers computed on this side
 * (PQencryptPasswordConn), so no statement, and therefore no server log
 * line, ever holds a plaintext password; no 'why' text is built from a
 * password.  The driver refuses to touch the admin's own role, the
 * database it is connected to, template0/1, and reserved pg_ roles.
 *
 * Errors: TL_EUNREACH when no server answered (refused, timed out, name
 * not resolved, connection lost, server shutting down) or it had no
 * room (SQLSTATE classes 08, 53, 57P: out of connection slots), TL_EAUTH when a
 * server rejected the admin's credential (SQLSTATE class 28), TL_EINVAL
 * for a grant the driver will not act on, TL_EREFUSED for an object
 * another mesh marked or a change under a fence no longer this
 * session's ("deposed: ..."), TL_EDRIVER for any other server
 * error; 'why' always says what happened, with the SQLSTATE.
 *
 * Connection attempts give up after PG_CONNECT_MS overall, and admin
 * sessions use TCP keepalives, tcp_user_timeout and a statement_timeout,
 * so an unreachable or hung provider cannot stall the daemon.
 *
 * The admin's client certificate (admin-cert, admin-key: tlsclient.h)
 * is checked before anything is sent and given to libpq as sslcert and
 * sslkey, two memfds the handle keeps open (libpq reads the files again
 * at every connection: a reconnect, a grant's own database); the key
 * never reaches a disk.  Only admin sessions present it, never a login
 * as the consumer.  A server that refuses it (pg_hba.conf's cert method,
 * or its ssl_ca_file, in the handshake) is TL_EAUTH.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "core/error.h"
#include "core/secret.h"
#include "core/x509.h"
#include "driver.h"
#include "pg_scram.h"
#include "postgres-internal.h"
#include "tlsclient.h"
#include "util.h"

#define PG_CONNECT_MS	3000		/* whole connection attempt */
#define PG_SQL_MAX	1024
#define PG_NAMEOID	19		/* the type of catalog names */
#define PG_OPTIONS	"-c statement_timeout=120000 -c lock_timeout=30000"
/* The first key of a mesh's fence lock (fence_hold): "tly1". */
#define PG_FENCE_LOCK	0x746c7931
#define PG_MESH_MAX	65		/* a mesh id, hex, and the NUL */

struct tl_drv_pg {
	PGconn	*conn;			/* admin session; NULL when down */
	char	*host;
	char	*port;
	char	*user;
	char	*password;		/* guarded memory; pg_close wipes */
	char	*dbname;
	/*
	 * How the admin session is protected (decl.h: enum tl_drv_tls), as
	 * libpq's sslmode: disable, require or verify-full with sslrootcert
	 * the setting ca's file.
	 */
	const char *sslmode;
	char	*sslrootcert;
	/* The admin's client certificate, open while the handle lives. */
	struct tl_drv_cert_files cf;
	int	 version;		/* server_version_num */
	int	 maint;			/* revoke-public-connect */
	uint64_t backstop;		/* expiry-backstop, s; 0: none */
	char	 mesh[PG_MESH_MAX];	/* admin->mesh; "": before ids */
	/*
	 * admin->fence, copied (fenced 0: a reader's session).  holding:
	 * conn holds the mesh's fence lock for one changing call
	 * (fence_hold), and is not to be replaced until it lets go.
	 */
	int	 fenced;
	char	 fmesh[PG_MESH_MAX];
	uint64_t fepoch;
	char	 fleader[TL_DRV_LEADER_MAX];
	int	 holding;
};

/* A grant's names, escaped once for the admin connection. */
struct pg_ids {
	char	*res;
	char	*own;
	char	*log;
	char	*mark;			/* the grant's mark, a quoted literal */
};

/* --- reasons -------------------------------------------------------- */

/* An appendable reason; silently truncates (with "...") when full. */
struct pg_msg {
	char	buf[TL_WHY_MAX];
	size_t	len;
	int	n;			/* items added */
};

static void
madd(struct pg_msg *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
mput(struct pg_msg *m, const char *s)
{
	size_t cap = sizeof(m->buf), n = strlen(s);

	if (m->len + 1 >= cap)
		return;
	if (n > cap - 1 - m->len) {
		n = cap - 1 - m->len;
		memcpy(m->buf + m->len, s, n);
		m->len += n;
		memcpy(m->buf + cap - 4, "...", 3);
	} else {
		memcpy(m->buf + m->len, s, n);
		m->len += n;
	}
	m->buf[m->len] = '\0';
}

static void
madd(struct pg_msg *m, const char *fmt, ...)
{
	char item[TL_WHY_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(item, sizeof(item), fmt, ap);
	va_end(ap);
	if (m->n++ > 0)
		mput(m, "; ");
	mput(m, item);
}

/*
 * Copies libpq's message into dst, one line: LOCATION lines dropped,
 * newlines turned into "; ", trailing blanks trimmed.
 */
static void
clean_msg(char *dst, size_t n, const char *msg)
{
	size_t o = 0;
	const char *p = msg, *e;

	if (n == 0)
		return;
	dst[0] = '\0';
	while (p != NULL && *p != '\0' && o + 1 < n) {
		while (*p == ' ' || *p == '\t')
			p++;
		e = strchr(p, '\n');
		size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
		if (len > 0 && strncmp(p, "LOCATION:", 9) != 0) {
			if (o > 0 && o + 2 < n) {
				memcpy(dst + o, "; ", 2);
				o += 2;
			}
			if (len > n - 1 - o)
				len = n - 1 - o;
			memcpy(dst + o, p, len);
			o += len;
		}
		p = e != NULL ? e + 1 : NULL;
	}
	while (o > 0 && (dst[o - 1] == ' ' || dst[o - 1] == '\t' ||
	    dst[o - 1] == '\r' || dst[o - 1] == ';'))
		o--;
	dst[o] = '\0';
}

/*
 * The SQLSTATE in a connection failure message.  libpq keeps no
 * SQLSTATE for a failed connection, so connections are made with
 * PQERRORS_VERBOSE, whose messages read "FATAL:  28P01: password ...";
 * a failure with no such code never got an answer from a server.  The
 * last one wins (with several addresses, the final attempt's).
 */
static int
conn_sqlstate(const char *msg, char state[6])
{
	const char *p;
	int found = 0, i;

	for (p = msg; (p = strstr(p, ":  ")) != NULL; p++) {
		for (i = 0; i < 5; i++)
			if (!((p[3 + i] >= '0' && p[3 + i] <= '9') ||
			    (p[3 + i] >= 'A' && p[3 + i] <= 'Z')))
				break;
		if (i == 5 && p[8] == ':') {
			memcpy(state, p + 3, 5);
			state[5] = '\0';
			found = 1;
		}
	}
	return found;
}

/* Maps a SQLSTATE (NULL: none, no answer) to a tally code. */
static int
state_rc(const char *state)
{
	if (state == NULL || state[0] == '\0')
		return TL_EUNREACH;
	/*
	 * The server's capacity or availability, never the grant's state:
	 * out of connection slots (53300, "too many clients"), memory or
	 * disk (53xxx), shut down or not accepting connections (57Pxx).
	 * Read as drift, a full server would be "repaired" every interval.
	 */
	if (strncmp(state, "08", 2) == 0 ||		/* connection exception */
	    strncmp(state, "53", 2) == 0 ||		/* insufficient resources */
	    strncmp(state, "57P", 3) == 0)		/* operator intervention */
		return TL_EUNREACH;
	if (strncmp(state, "28", 2) == 0)		/* invalid authorization */
		return TL_EAUTH;
	return TL_EDRIVER;
}

/*
 * The drift what a check found makes, worst first (missing, then the
 * credential, then privileges), with every finding in why: 1 when there
 * is one, else 0 with why untouched.
 */
static int
pg_drift(const struct pg_msg *miss, const struct pg_msg *cred,
    const struct pg_msg *priv, enum tl_drv_drift *drift, char *why)
{
	const char *also = priv->n > 0 ? "; also privileges: " : "";
	const char *more = priv->n > 0 ? priv->buf : "";

	if (miss->n > 0) {
		*drift = TL_DRIFT_MISSING;
		tl_drv_why(why, 0, "missing: %s%s%s", miss->buf, also, more);
	} else if (cred->n > 0) {
		*drift = TL_DRIFT_CREDENTIAL;
		tl_drv_why(why, 0, "credential: %s%s%s", cred->buf, also,
		    more);
	} else if (priv->n > 0) {
		*drift = TL_DRIFT_PRIVILEGES;
		tl_drv_why(why, 0, "privileges: %s", priv->buf);
	} else
		return 0;
	return 1;
}

/* --- connections ---------------------------------------------------- */

static void
pg_quiet(void *arg, const PGresult *res)
{
	(void)arg;
	(void)res;		/* NOTICEs ("already a member") are expected */
}

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Connects with a deadline of PG_CONNECT_MS for the whole attempt (all
 * addresses).  kw/val are PQconnectStartParams' arrays.  On failure,
 * *state gets the server's SQLSTATE ("" when no server answered) and
 * msg libpq's message on one line.
 */
static int
pg_connect(const char *const *kw, const char *const *val, PGconn **out,
    char state[6], char *msg, size_t msgn)
{
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	struct pollfd pfd;
	PGconn *c;
	char *pw;
	long deadline, left;
	int r;

	*out = NULL;
	state[0] = '\0';
	msg[0] = '\0';
	if ((c = PQconnectStartParams(kw, val, 0)) == NULL) {
		snprintf(msg, msgn, "out of memory");
		return TL_EDRIVER;
	}
	PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
	PQsetNoticeReceiver(c, pg_quiet, NULL);
	deadline = now_ms() + PG_CONNECT_MS;
	if (PQstatus(c) == CONNECTION_BAD)
		st = PGRES_POLLING_FAILED;
	while (st != PGRES_POLLING_OK) {
		if (st == PGRES_POLLING_FAILED)
			goto failed;
		if ((left = deadline - now_ms()) <= 0)
			goto timedout;
		pfd.fd = PQsocket(c);
		pfd.events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT;
		pfd.revents = 0;
		if (pfd.fd < 0)
			goto failed;
		r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(msg, msgn, "poll: %s", strerror(errno));
			PQfinish(c);
			return TL_EUNREACH;
		}
		if (r == 0)
			goto timedout;
		st = PQconnectPoll(c);
	}
	PQsetErrorVerbosity(c, PQERRORS_DEFAULT);
	/*
	 * libpq keeps its own copy of the password for the life of the
	 * session, in ordinary heap (in every core dump); it needs it
	 * only to authenticate, and this driver never PQresets.
	 */
	if ((pw = PQpass(c)) != NULL)
		tl_secret_wipe(pw, strlen(pw));
	*out = c;
	return 0;

timedout:
	snprintf(msg, msgn, "timeout expired after %d ms", PG_CONNECT_MS);
	PQfinish(c);
	return TL_EUNREACH;
failed:
	clean_msg(msg, msgn, PQerrorMessage(c));
	if (!conn_sqlstate(PQerrorMessage(c), state))
		state[0] = '\0';
	/*
	 * The server asked for a password none was given for (libpq's
	 * "fe_sendauth: no password supplied", no SQLSTATE): the server
	 * answered, and it is the credential that is missing.
	 */
	if (state[0] == '\0' && PQconnectionNeedsPassword(c)) {
		PQfinish(c);
		return TL_EAUTH;
	}
	PQfinish(c);
	return state_rc(state);
}

/*
 * Whether msg (libpq's, one line) is a TLS alert the server sent about
 * our certificate.  Our own refusal of the server's reads "certificate
 * verify failed" and carries no alert.
 */
static int
tls_alert_cert(const char *msg)
{
	const char *a = strstr(msg, " alert ");

	return a != NULL && (strstr(a, "certificate") != NULL ||
	    strstr(a, "unknown ca") != NULL ||
	    strstr(a, "access denied") != NULL);
}

/*
 * What a rejected admin login's reason (msg) adds about the client
 * certificate, into out (n bytes): the server asking for one none was
 * given for, or refusing the one given.
 */
static void
cert_hint(const struct tl_drv_pg *p, const char *msg, char *out, size_t n)
{
	out[0] = '\0';
	if (strstr(msg, "certificate") == NULL)
		return;
	if (p->cf.certfd < 0)
		snprintf(out, n, " (pg_hba.conf asks this role for a client "
		    "certificate: tally assign ... --set admin-cert=FILE "
		    "--secret admin-key)");
	else if (strstr(msg, "requires a valid client certificate") != NULL)
		snprintf(out, n, " (admin-cert, %s, was ready but the server "
		    "asked for none: it asks only with ssl_ca_file set)",
		    p->cf.subject);
	else
		snprintf(out, n, " (admin-cert is %s: pg_hba.conf's cert "
		    "method wants its CN to be the role, or a map)",
		    p->cf.subject);
}

/* An admin session to dbname, with the handle's credential. */
static int
admin_connect(struct tl_drv_pg *p, const char *dbname, PGconn **out,
    char *why)
{
	const char *kw[] = { "host", "port", "user", "password", "dbname",
	    "application_name", "client_encoding", "options",
	    "keepalives", "keepalives_idle", "keepalives_interval",
	    "keepalives_count", "tcp_user_timeout", "sslmode", NULL, NULL,
	    NULL, NULL };
	const char *val[] = { p->host, p->port, p->user, p->password, dbname,
	    "tallyd", "UTF8", PG_OPTIONS,
	    "1", "10", "5", "3", "30000", p->sslmode, NULL, NULL, NULL, NULL };
	char state[6], msg[TL_WHY_MAX], hint[400];
	size_t i = 14;
	int rc;

	/* The root certificates are the setting ca's, never a default's. */
	if (p->sslrootcert != NULL) {
		kw[i] = "sslrootcert";
		val[i++] = p->sslrootcert;
	}
	if (p->cf.certfd >= 0) {
		kw[i] = "sslcert";
		val[i++] = p->cf.cert;
		kw[i] = "sslkey";
		val[i++] = p->cf.key;
	}
	rc = pg_connect(kw, val, out, state, msg, sizeof(msg));
	if (rc == 0)
		return 0;
	if (rc == TL_EAUTH) {
		cert_hint(p, msg, hint, sizeof(hint));
		return tl_drv_why(why, rc, "admin login as \"%s\" rejected: "
		    "%s%s", p->user != NULL ? p->user : "(default)", msg, hint);
	}
	/*
	 * A server that does not take the certificate presented ends the
	 * handshake with an alert of its own (libpq: "SSL error: tlsv1
	 * alert unknown ca"): who we are was refused, not the server.
	 */
	if (rc == TL_EUNREACH && p->cf.certfd >= 0 && tls_alert_cert(msg))
		return tl_drv_why(why, TL_EAUTH, "PostgreSQL at %s:%s refused "
		    "admin-cert (%s) in the TLS handshake (its ssl_ca_file "
		    "does not verify it): %s", p->host != NULL ? p->host :
		    "(default)", p->port != NULL ? p->port : "(default)",
		    p->cf.subject, msg);
	/* libpq names a failed verification in words only. */
	if (rc == TL_EUNREACH && p->sslrootcert != NULL &&
	    (strstr(msg, "certificate verify failed") != NULL ||
	    strstr(msg, "does not match host name") != NULL ||
	    strstr(msg, "SSL error") != NULL))
		return tl_drv_why(why, TL_EUNTRUSTED, "PostgreSQL at %s:%s "
		    "is not trusted, nothing was sent to it: %s",
		    p->host != NULL ? p->host : "(default)", p->port != NULL ?
		    p->port : "(default)", msg);
	if (rc == TL_EUNREACH)
		return tl_drv_why(why, rc, "cannot reach PostgreSQL at %s:%s: "
		    "%s", p->host != NULL ? p->host : "(default)", p->port !=
		    NULL ? p->port : "(default)", msg);
	return tl_drv_why(why, rc, "admin connection to database \"%s\": %s",
	    dbname, msg);
}

/* Reconnects the admin session if it was lost. */
static int
pg_ensure(struct tl_drv_pg *p, char *why)
{
	int rc;

	if (p->conn != NULL && PQstatus(p->conn) == CONNECTION_OK)
		return 0;
	/* A new session would not hold the fence lock the call runs under. */
	if (p->holding)
		return tl_drv_why(why, TL_EUNREACH, "the admin session holding "
		    "the fence was lost during the call");
	PQfinish(p->conn);
	p->conn = NULL;
	if ((rc = admin_connect(p, p->dbname, &p->conn, why)) != 0)
		return rc;
	p->version = PQserverVersion(p->conn);
	return 0;
}

/* Leaves the admin session outside any transaction. */
static void
pg_settle(struct tl_drv_pg *p)
{
	PGresult *r;

	if (p->conn == NULL || PQstatus(p->conn) != CONNECTION_OK)
		return;
	if (PQtransactionStatus(p->conn) == PQTRANS_IDLE)
		return;
	r = PQexec(p->conn, "ROLLBACK");
	PQclear(r);
}

/* --- statements ----------------------------------------------------- */

/* Translates a failed result (or none) into a code and a reason. */
static int
res_err(PGconn *c, PGresult *r, const char *step, char *why)
{
	const char *state = NULL, *prim = NULL, *detail = NULL;
	char msg[TL_WHY_MAX], det[TL_WHY_MAX];

	if (r != NULL) {
		state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		prim = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
		detail = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
	}
	if (prim == NULL) {
		clean_msg(msg, sizeof(msg), PQerrorMessage(c));
		prim = msg[0] != '\0' ? msg : "unknown error";
	}
	det[0] = '\0';
	if (detail != NULL)	/* 2BP01 lists what depends on a role */
		clean_msg(det, sizeof(det), detail);
	if (state == NULL && PQstatus(c) == CONNECTION_OK)
		return tl_drv_why(why, TL_EDRIVER, "%s: %s", step, prim);
	return tl_drv_why(why, state_rc(state), "%s: %s%s%s%s%s%s", step,
	    state != NULL ? state : "", state != NULL ? ": " : "", prim,
	    det[0] != '\0' ? " (" : "", det, det[0] != '\0' ? ")" : "");
}

/* Runs sql; on failure, state (if not NULL) gets the SQLSTATE or "". */
static int
run_state(PGconn *c, const char *sql, const char *step, char *why,
    char state[6])
{
	PGresult *r;
	ExecStatusType s;
	const char *e;
	int rc = 0;

	if (state != NULL)
		state[0] = '\0';
	r = PQexec(c, sql);
	s = PQresultStatus(r);
	if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
		rc = res_err(c, r, step, why);
		if (state != NULL && r != NULL &&
		    (e = PQresultErrorField(r, PG_DIAG_SQLSTATE)) != NULL)
			snprintf(state, 6, "%s", e);
	}
	PQclear(r);
	return rc;
}

static int
run(PGconn *c, const char *sql, const char *step, char *why)
{
	return run_state(c, sql, step, why, NULL);
}

/* A query with up to three name parameters; *res owned by the caller. */
static int
query(PGconn *c, const char *sql, int n, const char *a, const char *b,
    const char *d, PGresult **res, const char *step, char *why)
{
	const Oid types[3] = { PG_NAMEOID, PG_NAMEOID, PG_NAMEOID };
	const char *vals[3] = { a, b, d };
	PGresult *r;
	int rc;

	r = PQexecParams(c, sql, n, types, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = res_err(c, r, step, why);
		PQclear(r);
		*res = NULL;
		return rc;
	}
	*res = r;
	return 0;
}

/* Whether one row answers sql($1 = name). */
static int
exists(PGconn *c, const char *sql, const char *name, int *found,
    const char *step, char *why)
{
	PGresult *r;
	int rc;

	if ((rc = query(c, sql, 1, name, NULL, NULL, &r, step, why)) != 0)
		return rc;
	*found = PQntuples(r) > 0;
	PQclear(r);
	return 0;
}

static const char q_role[] = "SELECT 1 FROM pg_roles WHERE rolname = $1";
static const char q_db[] = "SELECT 1 FROM pg_database WHERE datname = $1";

/*
 * What tally made carries a mark, set in the same transaction as the
 * CREATE ROLE, naming the grant it was made for and the mesh that made
 * it ("made by tally for grant G of mesh M; do not edit"): an existing
 * role without it, or a database not owned by the grant's marked owner
 * role, belongs to someone else and is never taken over (a resource
 * name that happens to match an operator's database must not hand it
 * to a consumer); a role marked for another grant is that grant's, and
 * is never handed to this one, whatever the names; a role marked by
 * another mesh is that mesh's, refused (TL_EREFUSED) unless the call
 * adopts that mesh (g->adopt_mesh), and then marked with ours.  A mark
 * that names no mesh is of before marks named meshes: this mesh's, and
 * marked again with its id by the next call that changes the role.
 * TL_PG_MARK is the mark of tally before marks named grants: only a
 * grant made then (adopt_unnamed) takes it as its own, and marks it
 * with its id.  A home of before mesh ids (admin->mesh "") writes the
 * mark without a mesh.
 */
#define TL_PG_MARK	"made by tally for a grant; do not edit"
#define TL_PG_MARK_FOR	"made by tally for grant "
#define TL_PG_MARK_MESH	" of mesh "
#define TL_PG_MARK_END	"; do not edit"
/* A group of logins below ownership (access_group): PG_ACCESS_R OWNER PG_ACCESS_END. */
#define PG_ACCESS_R	"made by tally: readers of role "
#define PG_ACCESS_W	"made by tally: writers of role "
#define PG_ACCESS_END	"; do not edit"
/*
 * SQL: role oid is not a group of logins with access to owner's (text)
 * resource: what an owner's checks and repairs leave alone.
 */
#define PG_NOT_ACCESS_GROUP(oid, owner) \
    " coalesce(shobj_description(" oid ", 'pg_authid'), '') NOT IN" \
    " ('" PG_ACCESS_R "' || " owner " || '" PG_ACCESS_END "'," \
    " '" PG_ACCESS_W "' || " owner " || '" PG_ACCESS_END "')"
#define PG_MARK_MAX	(sizeof(TL_PG_MARK_FOR) + 256 + \
			 sizeof(TL_PG_MARK_MESH) + PG_MESH_MAX + \
			 sizeof(TL_PG_MARK_END))
static const char q_role_mark[] =
    "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles"
    " WHERE rolname = $1";
static const char q_db_owner[] =
    "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1";

/* MARK_MESH: marked by another mesh (other: its id). */
enum pg_mark { MARK_ABSENT, MARK_OURS, MARK_FOREIGN, MARK_OTHER, MARK_MESH };

/* The mark g's objects carry. */
static void
mark_text(const struct tl_drv_pg *p, const struct tl_drv_grant *g, char *buf,
    size_t n)
{
	if (!tl_drv_grant_named(g))
		snprintf(buf, n, "%s", TL_PG_MARK);
	else if (p->mesh[0] != '\0')
		snprintf(buf, n, TL_PG_MARK_FOR "%s" TL_PG_MARK_MESH "%s"
		    TL_PG_MARK_END, g->grant, p->mesh);
	else
		snprintf(buf, n, TL_PG_MARK_FOR "%s" TL_PG_MARK_END, g->grant);
}

/*
 * Whose a role is by its mark m (NULL: none): *stale when it is ours
 * but must be marked again (no mesh named, another mesh adopted, the
 * unnamed mark adopted); other gets the grant another mark names ("" for
 * an unnamed mark that is not g's to adopt), or the mesh of MARK_MESH.
 * Pure.
 */
static enum pg_mark
mark_kind(const struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const char *m, int *stale, char *other, size_t on)
{
	size_t fl = strlen(TL_PG_MARK_FOR), el = strlen(TL_PG_MARK_END),
	    ol = strlen(TL_PG_MARK_MESH), ml, bl, gl, hl = 0;
	const char *body, *mesh = "", *x;

	*stale = 0;
	other[0] = '\0';
	if (m == NULL)
		return MARK_FOREIGN;
	if (strcmp(m, TL_PG_MARK) == 0) {
		if (tl_drv_grant_named(g) && !g->adopt_unnamed)
			return MARK_OTHER;
		*stale = tl_drv_grant_named(g);
		return MARK_OURS;
	}
	ml = strlen(m);
	if (ml <= fl + el || strncmp(m, TL_PG_MARK_FOR, fl) != 0 ||
	    strcmp(m + ml - el, TL_PG_MARK_END) != 0)
		return MARK_FOREIGN;
	body = m + fl;
	bl = ml - fl - el;
	gl = bl;
	/* The last " of mesh ": grant ids are [a-z0-9_/@.-]. */
	for (x = body + bl; x-- > body;)
		if ((size_t)(body + bl - x) >= ol &&
		    strncmp(x, TL_PG_MARK_MESH, ol) == 0) {
			gl = (size_t)(x - body);
			mesh = x + ol;
			hl = bl - gl - ol;
			break;
		}
	if (hl > 0 && (hl != strlen(p->mesh) ||
	    strncmp(mesh, p->mesh, hl) != 0)) {
		if (g->adopt_mesh == NULL || strlen(g->adopt_mesh) != hl ||
		    strncmp(mesh, g->adopt_mesh, hl) != 0) {
			snprintf(other, on, "%.*s", (int)hl, mesh);
			return MARK_MESH;
		}
		*stale = 1;
	} else if (hl == 0 && p->mesh[0] != '\0')
		*stale = 1;
	if (tl_drv_grant_named(g) && strlen(g->grant) == gl &&
	    strncmp(body, g->grant, gl) == 0)
		return MARK_OURS;
	*stale = 0;
	snprintf(other, on, "%.*s", (int)gl, body);
	return MARK_OTHER;
}

/* TL_EREFUSED: what another mesh made (other, its id). */
static int
mesh_refused(const char *step, const char *other, char *why)
{
	return tl_drv_why(why, TL_EREFUSED, "%s: owned by mesh %.12s..., "
	    "not this one (tally never changes another mesh's objects but "
	    "by adopting them)", step, other);
}

/*
 * Whose role is, by its mark; other as mark_kind's; *stale (may be
 * NULL) as mark_kind's.
 */
static int
role_mark(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const char *role, enum pg_mark *kind, char *other, size_t on,
    int *stale, const char *step, char *why)
{
	PGresult *r;
	int rc, st = 0;

	*kind = MARK_ABSENT;
	other[0] = '\0';
	if ((rc = query(p->conn, q_role_mark, 1, role, NULL, NULL, &r, step,
	    why)) != 0)
		return rc;
	if (PQntuples(r) > 0)
		*kind = mark_kind(p, g, PQgetisnull(r, 0, 0) ? NULL :
		    PQgetvalue(r, 0, 0), &st, other, on);
	if (stale != NULL)
		*stale = st;
	PQclear(r);
	return 0;
}

/* TL_EDRIVER, with the reason, if role exists and is not g's. */
static int
not_foreign_role(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const char *role, const char *step, char *why)
{
	enum pg_mark kind;
	char other[256];
	int rc;

	if ((rc = role_mark(p, g, role, &kind, other, sizeof(other), NULL,
	    step, why)) != 0)
		return rc;
	if (kind == MARK_ABSENT || kind == MARK_OURS)
		return 0;
	if (kind == MARK_MESH)
		return mesh_refused(step, other, why);
	if (kind == MARK_OTHER && other[0] != '\0')
		tl_drv_why(why, 0, "%s exists and was made by tally for grant "
		    "%s: tally never hands one grant's object to another", step,
		    other);
	else if (kind == MARK_OTHER)
		tl_drv_why(why, 0, "%s exists and was made by an earlier tally "
		    "for another grant (its mark names none; grant %s's "
		    "objects were never made so): tally never hands one "
		    "grant's object to another", step, g->grant);
	else
		tl_drv_why(why, 0, "%s exists and was not made by tally: tally "
		    "never takes over a role it did not make; choose another "
		    "resource name (name: in the manifest)", step);
	return TL_EDRIVER;
}

/* *theirs: does role exist and is not g's (revoke leaves it alone)? */
static int
not_ours(struct tl_drv_pg *p, const struct tl_drv_grant *g, const char *role,
    int *theirs, const char *step, char *why)
{
	enum pg_mark kind;
	char other[256];
	int rc;

	*theirs = 0;
	if ((rc = role_mark(p, g, role, &kind, other, sizeof(other), NULL,
	    step, why)) != 0)
		return rc;
	*theirs = kind != MARK_ABSENT && kind != MARK_OURS;
	return 0;
}

/* *theirs: does g's database exist, not owned by g's marked owner? */
static int
foreign_db(struct tl_drv_pg *p, const struct tl_drv_grant *g, int *theirs,
    char *owner, size_t on, const char *step, char *why)
{
	enum pg_mark kind = MARK_ABSENT;
	char other[256];
	PGresult *r;
	int rc;

	*theirs = 0;
	owner[0] = '\0';
	if ((rc = query(p->conn, q_db_owner, 1, g->resource, NULL, NULL, &r,
	    step, why)) != 0)
		return rc;
	if (PQntuples(r) > 0)
		snprintf(owner, on, "%s", PQgetisnull(r, 0, 0) ? "" :
		    PQgetvalue(r, 0, 0));
	*theirs = PQntuples(r) > 0 && strcmp(owner, g->owner) != 0;
	PQclear(r);
	if (*theirs || owner[0] == '\0')
		return 0;
	if ((rc = role_mark(p, g, owner, &kind, other, sizeof(other), NULL,
	    step, why)) != 0)
		return rc;
	*theirs = kind != MARK_OURS;
	return 0;
}

/* Formats and runs one statement. */
static int
runf(PGconn *c, const char *step, char *why, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * TL_EREFUSED, with the reason, if a role of g's names or the owner of
 * its database was marked by another mesh (not adopted); a role of g's
 * whose mark is stale (mark_kind) is marked again with ours.  Run before
 * anything that changes g's objects.
 */
static int
vet_mesh(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const struct pg_ids *ids, char *why)
{
	const char *const names[2] = { g->owner, g->login };
	const char *const what[2] = { "owner role", "login role" };
	const char *const qids[2] = { ids->own, ids->log };
	char step[160], owner[256], other[256];
	enum pg_mark kind;
	PGresult *r;
	int i, rc, stale[2];

	for (i = 0; i < 2; i++) {
		snprintf(step, sizeof(step), "%s \"%s\"", what[i], names[i]);
		if ((rc = role_mark(p, g, names[i], &kind, other,
		    sizeof(other), &stale[i], step, why)) != 0)
			return rc;
		if (kind == MARK_MESH)
			return mesh_refused(step, other, why);
		stale[i] = stale[i] && kind == MARK_OURS;
	}
	snprintf(step, sizeof(step), "database \"%s\"", g->resource);
	if ((rc = query(p->conn, q_db_owner, 1, g->resource, NULL, NULL, &r,
	    step, why)) != 0)
		return rc;
	owner[0] = '\0';
	if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		snprintf(owner, sizeof(owner), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (owner[0] != '\0' && strcmp(owner, g->owner) != 0) {
		if ((rc = role_mark(p, g, owner, &kind, other, sizeof(other),
		    NULL, step, why)) != 0)
			return rc;
		if (kind == MARK_MESH)
			return mesh_refused(step, other, why);
	}
	for (i = 0; i < 2; i++) {
		if (!stale[i])
			continue;
		snprintf(step, sizeof(step), "%s \"%s\"", what[i], names[i]);
		if ((rc = runf(p->conn, step, why, "COMMENT ON ROLE %s IS %s",
		    qids[i], ids->mark)) != 0)
			return rc;
	}
	return 0;
}

/*
 * TL_EDRIVER, with the reason, if an object of g's names was made by
 * tally for another grant (TL_EREFUSED: by another mesh, vet_mesh):
 * run before a repair or a move changes them.  (What create made and
 * someone changed since, an owner included, is the grant's to repair;
 * create itself refuses anything not its own.)
 */
static int
vet_grant(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const struct pg_ids *ids, char *why)
{
	const char *const names[2] = { g->owner, g->login };
	const char *const what[2] = { "owner role", "login role" };
	char step[160], owner[256], other[256];
	enum pg_mark kind;
	PGresult *r;
	int i, rc;

	if ((rc = vet_mesh(p, g, ids, why)) != 0)
		return rc;
	for (i = 0; i < 2; i++) {
		snprintf(step, sizeof(step), "%s \"%s\"", what[i], names[i]);
		if ((rc = role_mark(p, g, names[i], &kind, other,
		    sizeof(other), NULL, step, why)) != 0)
			return rc;
		if (kind == MARK_OTHER)
			return not_foreign_role(p, g, names[i], step, why);
	}
	snprintf(step, sizeof(step), "database \"%s\"", g->resource);
	if ((rc = query(p->conn, q_db_owner, 1, g->resource, NULL, NULL, &r,
	    step, why)) != 0)
		return rc;
	owner[0] = '\0';
	if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		snprintf(owner, sizeof(owner), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (owner[0] == '\0' || strcmp(owner, g->owner) == 0)
		return 0;
	if ((rc = role_mark(p, g, owner, &kind, other, sizeof(other), NULL,
	    step, why)) != 0)
		return rc;
	if (kind != MARK_OTHER)
		return 0;
	tl_drv_why(why, 0, "%s is owned by \"%s\", made by tally for %s%s: "
	    "tally never hands one grant's object to another", step, owner,
	    other[0] != '\0' ? "grant " : "another grant", other);
	return TL_EDRIVER;
}

static int
runf(PGconn *c, const char *step, char *why, const char *fmt, ...)
{
	char sql[PG_SQL_MAX];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = tl_drv_vsqlf(sql, sizeof(sql), why, fmt, ap);
	va_end(ap);
	if (rc != 0)
		return tl_drv_why(why, rc, "%s: statement too long", step);
	return run(c, sql, step, why);
}

static void
ids_free(struct pg_ids *ids)
{
	PQfreemem(ids->res);
	PQfreemem(ids->own);
	PQfreemem(ids->log);
	PQfreemem(ids->mark);
	ids->res = ids->own = ids->log = ids->mark = NULL;
}

static char *
escape_id(PGconn *c, const char *name, char *why)
{
	char *q, msg[TL_WHY_MAX];

	if ((q = PQescapeIdentifier(c, name, strlen(name))) == NULL) {
		clean_msg(msg, sizeof(msg), PQerrorMessage(c));
		tl_drv_why(why, TL_EINVAL, "cannot quote name \"%s\": %s", name,
		    msg);
	}
	return q;
}

static int
ids_make(struct tl_drv_pg *p, const struct tl_drv_grant *g, struct pg_ids *ids,
    char *why)
{
	PGconn *c = p->conn;
	char mark[PG_MARK_MAX];

	ids->res = ids->own = ids->log = ids->mark = NULL;
	if ((ids->res = escape_id(c, g->resource, why)) == NULL ||
	    (ids->own = escape_id(c, g->owner, why)) == NULL ||
	    (ids->log = escape_id(c, g->login, why)) == NULL) {
		ids_free(ids);
		return TL_EINVAL;
	}
	mark_text(p, g, mark, sizeof(mark));
	if ((ids->mark = PQescapeLiteral(c, mark, strlen(mark))) == NULL) {
		ids_free(ids);
		return tl_drv_why(why, TL_EINVAL, "cannot quote the mark of "
		    "grant \"%s\"", g->grant);
	}
	return 0;
}

/* --- validation ----------------------------------------------------- */

static int
name_ok(const char *what, const char *name, char *why)
{
	size_t n;

	if (name == NULL || *name == '\0')
		return tl_drv_why(why, TL_EINVAL, "%s name is empty", what);
	if ((n = strlen(name)) > PG_NAME_MAX)
		return tl_drv_why(why, TL_EINVAL, "%s name is %zu bytes; "
		    "PostgreSQL names hold at most %d", what, n, PG_NAME_MAX);
	return 0;
}

/*
 * Refuses a grant the driver must not act on whatever the caller
 * validated: names PostgreSQL would truncate, reserved roles, the
 * admin's own role and database, the templates.
 */
static int
grant_ok(struct tl_drv_pg *p, const struct tl_drv_grant *g, int need_pw,
    char *why)
{
	const char *me = PQuser(p->conn), *mydb = PQdb(p->conn);
	int rc;

	if (g == NULL)
		return tl_drv_why(why, TL_EINVAL, "no grant");
	if ((rc = name_ok("database", g->resource, why)) != 0 ||
	    (rc = name_ok("owner role", g->owner, why)) != 0 ||
	    (rc = name_ok("login role", g->login, why)) != 0)
		return rc;
	/* A login by certificate has none (decl.h, cert_login). */
	if (need_pw && !g->cert_login && (g->password == NULL ||
	    *g->password == '\0'))
		return tl_drv_why(why, TL_EINVAL, "login \"%s\": empty "
		    "password", g->login);
	if (strcmp(g->owner, g->login) == 0)
		return tl_drv_why(why, TL_EINVAL, "owner and login are both "
		    "\"%s\"", g->owner);
	if (strncmp(g->owner, "pg_", 3) == 0 ||
	    strncmp(g->login, "pg_", 3) == 0)
		return tl_drv_why(why, TL_EINVAL, "role names starting with "
		    "pg_ are reserved");
	if (me != NULL && (strcmp(g->owner, me) == 0 ||
	    strcmp(g->login, me) == 0))
		return tl_drv_why(why, TL_EINVAL, "refusing to manage the "
		    "admin role \"%s\" as a grant's role", me);
	if (strcmp(g->resource, "template0") == 0 ||
	    strcmp(g->resource, "template1") == 0 ||
	    (mydb != NULL && strcmp(g->resource, mydb) == 0))
		return tl_drv_why(why, TL_EINVAL, "refusing to manage database "
		    "\"%s\" as a grant's database", g->resource);
	return 0;
}

/* --- the steps ------------------------------------------------------ */

#define ROLE_ATTRS "NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION " \
		   "NOBYPASSRLS"

/*
 * The SCRAM verifier for a password, as a quoted literal, for
 * "PASSWORD %s".  *out is PQfreemem'd by pw_free.
 */
static int
pw_literal(PGconn *c, const struct tl_drv_grant *g, char **out, char *why)
{
	char *v, msg[TL_WHY_MAX];

	*out = NULL;
	v = PQencryptPasswordConn(c, g->password, g->login, "scram-sha-256");
	if (v == NULL) {
		clean_msg(msg, sizeof(msg), PQerrorMessage(c));
		return tl_drv_why(why, TL_EDRIVER, "login \"%s\": cannot "
		    "compute the password verifier: %s", g->login, msg);
	}
	/* The bulk check then knows it without the PBKDF2 (pg_scram.h). */
	tl_pg_scram_remember(v, g->login, g->password);
	*out = PQescapeLiteral(c, v, strlen(v));
	tl_secret_wipe(v, strlen(v));
	PQfreemem(v);
	if (*out == NULL)
		return tl_drv_why(why, TL_EDRIVER, "login \"%s\": cannot quote "
		    "the password verifier", g->login);
	return 0;
}

static void
pw_free(char *lit)
{
	if (lit != NULL) {
		tl_secret_wipe(lit, strlen(lit));
		PQfreemem(lit);
	}
}

/* Runs a statement holding a verifier, and wipes it. */
static int
run_secret(PGconn *c, char *sql, const char *step, char *why)
{
	int rc = run(c, sql, step, why);

	tl_secret_wipe(sql, strlen(sql));
	return rc;
}

/* run_secret, with the SQLSTATE of a failure in state (6 bytes). */
static int
run_secret_state(PGconn *c, char *sql, const char *step, char *why,
    char state[6])
{
	int rc = run_state(c, sql, step, why, state);

	tl_secret_wipe(sql, strlen(sql));
	return rc;
}

/*
 * Whether a CREATE failed because another session made the object at
 * the same moment: 42710 / 42P04 (duplicate_object, duplicate_database)
 * when the other committed first, 23505 on the catalogue's name index
 * when both ran at once (a killed tallyd's backend still creating it
 * while the restarted one retries: 38_consolidate_kills in CI).
 */
static int
raced_state(const char state[6])
{
	return strcmp(state, "42710") == 0 || strcmp(state, "42P04") == 0 ||
	    strcmp(state, "23505") == 0;
}

/* Makes the owner role if it does not exist. */
static int
ensure_owner(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const struct pg_ids *ids, int *made, char *why)
{
	char step[160], sql[PG_SQL_MAX], state[6];
	int found, rc;

	*made = 0;
	snprintf(step, sizeof(step), "owner role \"%s\"", g->owner);
	if ((rc = exists(p->conn, q_role, g->owner, &found, step, why)) != 0)
		return rc;
	if (found)
		return not_foreign_role(p, g, g->owner, step, why);
	if ((rc = tl_drv_sqlf(sql, sizeof(sql), why, "CREATE ROLE %s NOLOGIN "
	    ROLE_ATTRS "; COMMENT ON ROLE %s IS %s", ids->own, ids->own,
	    ids->mark)) != 0)
		return rc;
	rc = run_state(p->conn, sql, step, why, state);
	/* Raced (raced_state): it exists now; ours only if marked so. */
	if (rc != 0 && raced_state(state))
		return not_foreign_role(p, g, g->owner, step, why);
	if (rc == 0)
		*made = 1;
	return rc;
}

/* Makes the login role, or sets its password if it exists. */
static int
ensure_login(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const struct pg_ids *ids, int *made, char *why)
{
	char sql[PG_SQL_MAX], step[160], state[6] = "", *pw = NULL;
	int found, rc, raced = 0;

	*made = 0;
	snprintf(step, sizeof(step), "login role \"%s\"", g->login);
again:
	if ((rc = exists(p->conn, q_role, g->login, &found, step, why)) != 0)
		return rc;
	if (found && (rc = not_foreign_role(p, g, g->login, step, why)) != 0)
		return rc;
	if (!g->cert_login && (rc = pw_literal(p->conn, g, &pw, why)) != 0)
		return rc;
	/* A login by certificate: no password at all, PASSWORD NULL. */
	if (found)
		rc = tl_drv_sqlf(sql, sizeof(sql), why, "ALTER ROLE %s "
		    "PASSWORD %s", ids->log, pw != NULL ? pw : "NULL");
	else
		rc = tl_drv_sqlf(sql, sizeof(sql), why, "CREATE ROLE %s LOGIN "
		    "INHERIT " ROLE_ATTRS " PASSWORD %s; COMMENT ON ROLE %s IS "
		    "%s", ids->log, pw != NULL ? pw : "NULL", ids->log,
		    ids->mark);
	pw_free(pw);
	if (rc != 0) {
		tl_secret_wipe(sql, sizeof(sql));
		return rc;
	}
	rc = run_secret_state(p->conn, sql, step, why, state);
	/* Made meanwhile by another session: set its password instead. */
	if (rc != 0 && !found && !raced && raced_state(state)) {
		raced = 1;
		goto again;
	}
	if (rc == 0)
		*made = !found;
	return rc;
}

/* Makes the database if it does not exist (alone: no transaction). */
static int
ensure_db(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const struct pg_ids *ids, int *made, char *why)
{
	char step[160], sql[PG_SQL_MAX], state[6];
	int found, rc;

	*made = 0;
	snprintf(step, sizeof(step), "database \"%s\"", g->resource);
	if ((rc = exists(p->conn, q_db, g->resource, &found, step, why)) != 0)
		return rc;
exists:
	if (found) {
		char owner[256];
		int theirs;

		if ((rc = foreign_db(p, g, &theirs, owner, sizeof(owner), step,
		    why)) != 0)
			return rc;
		if (theirs) {
			tl_drv_why(why, 0, "%s exists and belongs to someone "
			    "else (owner \"%s\"): tally never takes over a "
			    "database it did not make for this grant; choose "
			    "another resource name (name: in the manifest)",
			    step, owner);
			return TL_EDRIVER;
		}
		return 0;
	}
	/*
	 * template0: nothing an admin added to template1 leaks in, and no
	 * session on the template can make the copy fail.  The default
	 * strategy (WAL_LOG on PG15): FILE_COPY forces a checkpoint, which
	 * on a server with dirty buffers cost 1.2 s per create here against
	 * 0.15 s.
	 */
	if ((rc = tl_drv_sqlf(sql, sizeof(sql), why, "CREATE DATABASE %s OWNER "
	    "%s TEMPLATE template0", ids->res, ids->own)) != 0)
		return rc;
	rc = run_state(p->conn, sql, step, why, state);
	/* Raced (raced_state): it exists now; ours only if marked so. */
	if (rc != 0 && raced_state(state)) {
		found = 1;
		goto exists;
	}
	if (rc == 0)
		*made = 1;
	return rc;
}

/* Names (raw, one per row) that $1's role is a member of, except $2. */
static const char q_memberof[] =
    "SELECT g.rolname FROM pg_auth_members m"
    " JOIN pg_roles g ON g.oid = m.roleid"
    " JOIN pg_roles u ON u.oid = m.member"
    " WHERE u.rolname = $1 AND g.rolname <> $2";

/* Roles other than PUBLIC and the owner with a privilege on $1. */
static const char q_dbgrantees[] =
    "SELECT DISTINCT r.rolname FROM pg_database d,"
    " aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a"
    " JOIN pg_roles r ON r.oid = a.grantee"
    " WHERE d.datname = $1 AND a.grantee <> d.datdba AND r.rolname <> $2"
    " AND" PG_NOT_ACCESS_GROUP("a.grantee", "$2::text");

/* Runs "pre ROLE post" for every role (raw name) the query lists. */
static int
revoke_each(PGconn *c, const char *q, const char *p1, const char *p2,
    const char *pre, const char *post, const char *step, char *why)
{
	PGresult *r;
	char *id;
	int i, rc;

	if ((rc = query(c, q, 2, p1, p2, NULL, &r, step, why)) != 0)
		return rc;
	for (i = 0; i < PQntuples(r) && rc == 0; i++) {
		const char *name = PQgetvalue(r, i, 0);

		if ((id = escape_id(c, name, why)) == NULL) {
			rc = TL_EINVAL;
			break;
		}
		rc = runf(c, step, why, "%s%s%s", pre, id, post);
		PQfreemem(id);
	}
	PQclear(r);
	return rc;
}

/*
 * Settings of every session in the database (ALTER DATABASE ... SET)
 * go, except the read-only flag freeze sets: a frozen database stays
 * frozen through a repair.
 */
static int
reset_db_settings(PGconn *c, const struct tl_drv_grant *g,
    const struct pg_ids *ids, const char *step, char *why)
{
	int frozen, rc;

	if ((rc = exists(c, "SELECT 1 FROM pg_db_role_setting s"
	    " JOIN pg_database d ON d.oid = s.setdatabase"
	    " WHERE s.setrole = 0 AND d.datname = $1"
	    " AND 'default_transaction_read_only=on' = ANY (s.setconfig)",
	    g->resource, &frozen, step, why)) != 0 ||
	    (rc = runf(c, step, why, "ALTER DATABASE %s RESET ALL",
	    ids->res)) != 0)
		return rc;
	if (frozen)
		rc = runf(c, step, why, "ALTER DATABASE %s SET "
		    "default_transaction_read_only = on", ids->res);
	return rc;
}

/*
 * A login's VALID UNTIL as a literal: 'infinity', or with an expiry
 * backstop the server's now (the transaction's start) plus it, by the
 * server's clock, which is the one that enforces it.
 */
static int
valid_until(struct tl_drv_pg *p, char *out, size_t cap, char *why)
{
	char secs[32], *lit;
	PGresult *r;
	int rc;

	if (p->backstop == 0) {
		snprintf(out, cap, "'infinity'");
		return 0;
	}
	snprintf(secs, sizeof(secs), "%llu seconds",
	    (unsigned long long)p->backstop);
	if ((rc = query(p->conn, "SELECT (now() + $1::text::interval)::text",
	    1, secs, NULL, NULL, &r, "the expiry backstop", why)) != 0)
		return rc;
	if (PQntuples(r) != 1 || PQgetisnull(r, 0, 0) ||
	    (lit = PQescapeLiteral(p->conn, PQgetvalue(r, 0, 0),
	    strlen(PQgetvalue(r, 0, 0)))) == NULL) {
		PQclear(r);
		return tl_drv_why(why, TL_EDRIVER, "the expiry backstop: no "
		    "time from the server");
	}
	snprintf(out, cap, "%s", lit);
	PQfreemem(lit);
	PQclear(r);
	return 0;
}

/*
 * Role attributes, membership, settings, database ownership and
 * privileges, as create sets them: one transaction on the admin session.
 * The login's settings are role=owner alone (in every database and in
 * the grant's), so a statement_timeout or search_path set by hand goes.
 */
static int
apply_cluster(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const struct pg_ids *ids, char *why)
{
	PGconn *c = p->conn;
	char so[160], sl[160], sd[160], from_l[PG_SQL_MAX / 4],
	    from_o[PG_SQL_MAX / 4], on_d[PG_SQL_MAX / 4], until[80];
	int rc;

	if ((rc = tl_drv_sqlf(from_l, sizeof(from_l), why, " FROM %s",
	    ids->log)) != 0 ||
	    (rc = tl_drv_sqlf(from_o, sizeof(from_o), why, " FROM %s",
	    ids->own)) != 0 ||
	    (rc = tl_drv_sqlf(on_d, sizeof(on_d), why, "REVOKE ALL ON DATABASE "
	    "%s FROM ", ids->res)) != 0)
		return rc;

	snprintf(so, sizeof(so), "owner role \"%s\"", g->owner);
	snprintf(sl, sizeof(sl), "login role \"%s\"", g->login);
	snprintf(sd, sizeof(sd), "database \"%s\"", g->resource);
	if ((rc = run(c, "BEGIN", "begin", why)) != 0)
		return rc;
	if ((rc = valid_until(p, until, sizeof(until), why)) != 0 ||
	    (rc = runf(c, so, why, "ALTER ROLE %s NOLOGIN " ROLE_ATTRS,
	    ids->own)) != 0 ||
	    (rc = runf(c, sl, why, "ALTER ROLE %s LOGIN INHERIT " ROLE_ATTRS
	    " CONNECTION LIMIT -1 VALID UNTIL %s", ids->log, until)) != 0 ||
	    (rc = runf(c, sl, why, "GRANT %s TO %s", ids->own, ids->log)) != 0 ||
	    (rc = runf(c, sl, why, "ALTER ROLE %s RESET ALL", ids->log)) != 0 ||
	    (rc = runf(c, sl, why, "ALTER ROLE %s SET role = %s", ids->log,
	    ids->own)) != 0 ||
	    (rc = runf(c, so, why, "COMMENT ON ROLE %s IS %s", ids->own,
	    ids->mark)) != 0 ||
	    (rc = runf(c, sl, why, "COMMENT ON ROLE %s IS %s", ids->log,
	    ids->mark)) != 0 ||
	    (rc = revoke_each(c, q_memberof, g->login, g->owner,
	    "REVOKE ", from_l, sl, why)) != 0 ||
	    (g->cert_login && (rc = runf(c, sl, why, "GRANT " PG_CERT_GROUP
	    " TO %s", ids->log)) != 0) ||
	    (rc = revoke_each(c, q_memberof, g->owner, "",
	    "REVOKE ", from_o, so, why)) != 0 ||
	    (rc = runf(c, sd, why, "ALTER DATABASE %s OWNER TO %s", ids->res,
	    ids->own)) != 0 ||
	    (rc = runf(c, sd, why, "ALTER DATABASE %s ALLOW_CONNECTIONS true",
	    ids->res)) != 0 ||
	    (rc = runf(c, sd, why, "REVOKE ALL ON DATABASE %s FROM PUBLIC",
	    ids->res)) != 0 ||
	    (rc = revoke_each(c, q_dbgrantees, g->resource, g->owner,
	    on_d, "", sd, why)) != 0 ||
	    (rc = runf(c, sd, why, "GRANT CONNECT, CREATE, TEMPORARY ON "
	    "DATABASE %s TO %s", ids->res, ids->own)) != 0 ||
	    (rc = runf(c, sl, why, "ALTER ROLE %s IN DATABASE %s RESET ALL",
	    ids->log, ids->res)) != 0 ||
	    (rc = reset_db_settings(c, g, ids, sd, why)) != 0 ||
	    (rc = run(c, "COMMIT", "commit", why)) != 0) {
		pg_settle(p);
		return rc;
	}
	return 0;
}

/* Roles other than PUBLIC and the owner with a privilege on schema $1. */
static const char q_schemagrantees[] =
    "SELECT DISTINCT pg_get_userbyid(a.grantee) FROM pg_namespace n,"
    " aclexplode(n.nspacl) a WHERE n.nspname = $1 AND a.grantee <> 0"
    " AND a.grantee <> n.nspowner AND pg_get_userbyid(a.grantee) <> $2"
    " AND" PG_NOT_ACCESS_GROUP("a.grantee", "$2::text");

/*
 * Inside the database: schema public owned by the owner role, which has
 * USAGE and CREATE on it, nothing for PUBLIC or anyone else (PG15
 * already withholds CREATE from PUBLIC; be explicit, and older servers
 * need it).  A consumer that dropped schema public keeps it so.  One
 * transaction: all of it or none, and one commit, not one a statement.
 */
static int
apply_schema(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const struct pg_ids *ids, char *why)
{
	PGconn *c;
	char step[200];
	int found, rc;

	if ((rc = admin_connect(p, g->resource, &c, why)) != 0)
		return rc;
	snprintf(step, sizeof(step), "schema public in database \"%s\"",
	    g->resource);
	/* A frozen database (freeze) is read-only for the consumer only. */
	rc = run(c, "SET default_transaction_read_only = off", step, why);
	if (rc == 0)
		rc = run(c, "BEGIN", step, why);
	if (rc == 0)
		rc = exists(c, "SELECT 1 FROM pg_namespace WHERE nspname = $1",
		    "public", &found, step, why);
	if (rc == 0 && found &&
	    (rc = runf(c, step, why, "ALTER SCHEMA public OWNER TO %s",
	    ids->own)) == 0 &&
	    (rc = run(c, "REVOKE ALL ON SCHEMA public FROM PUBLIC", step,
	    why)) == 0 &&
	    (rc = revoke_each(c, q_schemagrantees, "public", g->owner,
	    "REVOKE ALL ON SCHEMA public FROM ", "", step, why)) == 0)
		rc = runf(c, step, why, "GRANT USAGE, CREATE ON SCHEMA public "
		    "TO %s", ids->own);
	/* A failure ends the session, and with it the transaction. */
	if (rc == 0)
		rc = run(c, "COMMIT", step, why);
	PQfinish(c);
	return rc;
}

/*
 * The maintenance databases: PostgreSQL gives PUBLIC CONNECT on them, so
 * every grant's login could connect there (and see the catalogs of the
 * whole server).  With revoke-public-connect, create and fix_privileges
 * revoke it; the admin keeps it (a superuser needs no grant; any other
 * admin is granted CONNECT first).
 */
static const char *const pg_maint_dbs[] = { "postgres", "template1" };
static const char q_maint_public[] =
    "SELECT string_agg(d.datname, ', ' ORDER BY d.datname) FROM pg_database d,"
    " aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a"
    " WHERE d.datname IN ('postgres', 'template1') AND a.grantee = 0"
    " AND a.privilege_type = 'CONNECT'";

/* found: the maintenance databases PUBLIC can connect to ("" if none). */
static int
maint_public(struct tl_drv_pg *p, char *found, size_t n, char *why)
{
	PGresult *r;
	int rc;

	found[0] = '\0';
	if ((rc = query(p->conn, q_maint_public, 0, NULL, NULL, NULL, &r,
	    "maintenance databases", why)) != 0)
		return rc;
	if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		snprintf(found, n, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return 0;
}

static int
maint_revoke(struct tl_drv_pg *p, char *why)
{
	const char *su = PQparameterStatus(p->conn, "is_superuser");
	char found[160], step[160], *id;
	size_t i;
	int rc;

	if ((rc = maint_public(p, found, sizeof(found), why)) != 0 ||
	    found[0] == '\0')
		return rc;
	for (i = 0; i < sizeof(pg_maint_dbs) / sizeof(pg_maint_dbs[0]); i++) {
		snprintf(step, sizeof(step), "database \"%s\"",
		    pg_maint_dbs[i]);
		if (strstr(found, pg_maint_dbs[i]) == NULL)
			continue;
		if ((id = escape_id(p->conn, pg_maint_dbs[i], why)) == NULL)
			return TL_EINVAL;
		rc = 0;
		if (su == NULL || strcmp(su, "on") != 0)
			rc = runf(p->conn, step, why, "GRANT CONNECT ON DATABASE "
			    "%s TO CURRENT_USER", id);
		if (rc == 0)
			rc = runf(p->conn, step, why, "REVOKE CONNECT ON "
			    "DATABASE %s FROM PUBLIC", id);
		PQfreemem(id);
		if (rc != 0)
			return rc;
	}
	/* A REVOKE by a role without the grant option only warns. */
	if ((rc = maint_public(p, found, sizeof(found), why)) != 0)
		return rc;
	if (found[0] != '\0')
		return tl_drv_why(why, TL_EDRIVER, "PUBLIC still has CONNECT "
		    "on %s: the admin role cannot revoke it (only the owner or "
		    "a superuser can); set revoke-public-connect=no on the "
		    "provider to leave it", found);
	return 0;
}

/* --- the operations ------------------------------------------------- */

static int	access_create(struct tl_drv_pg *p, const struct tl_drv_grant *g,
		    char *why);
static int	access_check(struct tl_drv_pg *p, const struct tl_drv_grant *g,
		    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift,
		    char *why);
static int	access_revoke(struct tl_drv_pg *p, const struct tl_drv_grant *g,
		    int drop, char *why);


static int
pg_open(const struct tl_drv_admin *a, void **hp, char *why)
{
	char dummy[TL_WHY_MAX];
	struct tl_drv_pg *p;
	int rc, cert;

	if (why == NULL)
		why = dummy;
	*hp = NULL;
	if (a == NULL)
		return tl_drv_why(why, TL_EINVAL, "no admin settings");
	/* A certificate that cannot be used is refused before any packet. */
	if ((rc = tl_drv_client_cert_check(a->client_cert, a->client_key,
	    &cert, why)) != 0)
		return rc;
	if (cert && strcmp(tl_drv_pg_sslmode(a->settings, a->host),
	    "disable") == 0)
		return tl_drv_why(why, TL_EINVAL, "admin-cert needs tls verify "
		    "or require (tls is off: no handshake to present it in)");
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	p->cf = (struct tl_drv_cert_files)TL_DRV_CERT_FILES_INIT;
	if ((a->host != NULL && (p->host = strdup(a->host)) == NULL) ||
	    (a->port != NULL && (p->port = strdup(a->port)) == NULL) ||
	    (a->user != NULL && (p->user = strdup(a->user)) == NULL) ||
	    (a->password != NULL &&
	     (p->password = tl_drv_secret_dup(a->password)) == NULL) ||
	    (p->dbname = strdup(tl_drv_pg_admin_db(a->settings))) == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto fail;
	}
	p->maint = tl_drv_pg_revoke_public_connect(a->settings);
	p->backstop = tl_drv_pg_backstop(a->settings);
	p->sslmode = tl_drv_pg_sslmode(a->settings, a->host);
	if (strcmp(p->sslmode, "verify-full") == 0) {
		if (a->ca_file == NULL) {
			rc = tl_drv_why(why, TL_EUNTRUSTED, "tls is verify but "
			    "the provider has no ca: tally assign ... --set "
			    "ca=FILE (the CA's PEM), or --set tls=require");
			goto fail;
		}
		if ((p->sslrootcert = strdup(a->ca_file)) == NULL) {
			rc = tl_drv_why(why, ENOMEM, "out of memory");
			goto fail;
		}
	}
	if (cert && (rc = tl_drv_cert_files_open(&p->cf, a->client_cert,
	    a->client_key, why)) != 0)
		goto fail;
	if ((a->mesh != NULL && strlen(a->mesh) >= sizeof(p->mesh)) ||
	    (a->fence != NULL && a->fence->mesh != NULL &&
	    strlen(a->fence->mesh) >= sizeof(p->fmesh))) {
		rc = tl_drv_why(why, TL_EINVAL, "the mesh id is longer than "
		    "%zu bytes", sizeof(p->mesh) - 1);
		goto fail;
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
	if ((rc = pg_ensure(p, why)) != 0)
		goto fail;
	tl_drv_why(why, 0, "connected to PostgreSQL %d at %s:%s as \"%s\" "
	    "(%s%s%s)", p->version, PQhost(p->conn), PQport(p->conn),
	    PQuser(p->conn), PQsslInUse(p->conn) ? strcmp(p->sslmode,
	    "verify-full") == 0 ? "TLS, verified" : "TLS, not verified" :
	    "plaintext", p->cf.certfd >= 0 ? "; client certificate " : "",
	    p->cf.certfd >= 0 ? p->cf.subject : "");
	*hp = p;
	return 0;
fail:
	tl_drv_cert_files_close(&p->cf);
	free(p->host);
	free(p->port);
	free(p->user);
	tl_secret_free(p->password);	/* wipes */
	free(p->dbname);
	free(p->sslrootcert);
	free(p);
	return rc;
}

static void
pg_close(void *h)
{
	struct tl_drv_pg *p = h;

	if (p == NULL)
		return;
	PQfinish(p->conn);
	tl_drv_cert_files_close(&p->cf);
	free(p->host);
	free(p->port);
	free(p->user);
	tl_secret_free(p->password);	/* wipes */
	free(p->dbname);
	free(p->sslrootcert);
	free(p);
}

/* Connects, validates and escapes: the prologue of every operation. */
static int
pg_begin(struct tl_drv_pg *p, const struct tl_drv_grant *g, int need_pw,
    struct pg_ids *ids, char *why)
{
	int rc;

	ids->res = ids->own = ids->log = ids->mark = NULL;
	if (p == NULL)
		return tl_drv_why(why, TL_EINVAL, "driver not open");
	if ((rc = pg_ensure(p, why)) != 0 ||
	    (rc = grant_ok(p, g, need_pw, why)) != 0)
		return rc;
	return ids_make(p, g, ids, why);
}

/*
 * Logins by certificate need the server set up once: TLS on, and a
 * pg_hba.conf line with the cert method for the members of
 * PG_CERT_GROUP (the driver makes that role).  What the admin may read
 * of it is checked (pg_hba_file_rules is a superuser's): a server that
 * would refuse every such login refuses the grant, saying what to add.
 */
static const char q_cert_hba[] =
    "SELECT current_setting('ssl') = 'on', EXISTS (SELECT 1"
    " FROM pg_hba_file_rules WHERE error IS NULL AND type = 'hostssl'"
    " AND auth_method = 'cert' AND (user_name @> ARRAY['+" PG_CERT_GROUP
    "']::text[] OR user_name @> ARRAY['all']::text[]))";

/*
 * And the server's ssl_ca_file, read where the admin may (pg_read_file
 * is a superuser's or pg_read_server_files'), must hold the mesh CA:
 * else the server verifies the consumers' certificates against another
 * CA, or none.
 */
static const char q_cert_ca[] =
    "SELECT current_setting('ssl_ca_file'), CASE WHEN"
    " current_setting('ssl_ca_file') <> '' THEN"
    " pg_read_file(current_setting('ssl_ca_file')) END";

static int
cert_ca_check(struct tl_drv_pg *p, const struct tl_drv_grant *g, char *why)
{
	PGresult *r;
	const char *file;
	int has;

	if (g->cert_ca == NULL)
		return 0;
	r = PQexec(p->conn, q_cert_ca);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		PQclear(r);	/* not the admin's to read: not checked */
		return 0;
	}
	file = PQgetvalue(r, 0, 0);
	if (file[0] == '\0') {
		PQclear(r);
		return tl_drv_why(why, TL_EDRIVER, "the server takes no login "
		    "by certificate: ssl_ca_file is not set, so it verifies "
		    "no client certificate (one-time set-up: ssl_ca_file the "
		    "mesh CA)");
	}
	has = tl_x509_bundle_has(PQgetvalue(r, 0, 1), (size_t)PQgetlength(r,
	    0, 1), g->cert_ca);
	if (has != 1) {
		tl_drv_why(why, TL_EDRIVER, "the server takes no login by "
		    "certificate of the mesh CA: its ssl_ca_file (%.200s) "
		    "does not hold the mesh CA's certificate (one-time "
		    "set-up: ssl_ca_file the mesh CA)", file);
		PQclear(r);
		return TL_EDRIVER;
	}
	PQclear(r);
	return 0;
}

static int
cert_setup(struct tl_drv_pg *p, const struct tl_drv_grant *g, char *why)
{
	char step[] = "role \"" PG_CERT_GROUP "\"", state[6] = "";
	PGresult *r;
	int found, rc, ssl, hba;

	if ((rc = exists(p->conn, q_role, PG_CERT_GROUP, &found, step,
	    why)) != 0)
		return rc;
	if (!found && (rc = run_state(p->conn, "CREATE ROLE " PG_CERT_GROUP
	    " NOLOGIN " ROLE_ATTRS, step, why, state)) != 0 &&
	    !raced_state(state))
		return rc;
	r = PQexec(p->conn, q_cert_hba);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		PQclear(r);	/* not the admin's to read: not checked */
		return 0;
	}
	ssl = PQgetvalue(r, 0, 0)[0] == 't';
	hba = PQgetvalue(r, 0, 1)[0] == 't';
	PQclear(r);
	if (!ssl || !hba)
		return tl_drv_why(why, TL_EDRIVER, "the server takes no login "
		    "by certificate: %s (one-time set-up: ssl = on, "
		    "ssl_ca_file the mesh CA, and 'hostssl all +"
		    PG_CERT_GROUP " all cert' before the other lines of "
		    "pg_hba.conf)", !ssl ? "ssl is off" : "pg_hba.conf has "
		    "no hostssl line with the cert method for +"
		    PG_CERT_GROUP);
	return cert_ca_check(p, g, why);
}

static int	col_true(const PGresult *r, int row, int col);

/*
 * The database to adopt: its owner, whether that is a superuser, how
 * many other databases it owns; and whether the login exists, may log
 * in, is a superuser.  No row: no such database.
 */
static const char q_adopt[] =
    "SELECT pg_get_userbyid(d.datdba), o.rolsuper,"
    " (SELECT count(*) FROM pg_database x WHERE x.datdba = d.datdba"
    "  AND x.oid <> d.oid),"
    " l.oid IS NOT NULL, coalesce(l.rolcanlogin, false),"
    " coalesce(l.rolsuper, false)"
    " FROM pg_database d JOIN pg_roles o ON o.oid = d.datdba"
    " LEFT JOIN pg_roles l ON l.rolname = $2 WHERE d.datname = $1";

/* TL_EDRIVER (why) unless role is nobody's or already g's. */
static int
adoptable_role(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const char *role, const char *step, char *why)
{
	enum pg_mark kind;
	char other[256];
	int rc;

	if ((rc = role_mark(p, g, role, &kind, other, sizeof(other), NULL,
	    step, why)) != 0)
		return rc;
	if (kind == MARK_MESH)
		return mesh_refused(step, other, why);
	if (kind == MARK_OTHER)
		return tl_drv_why(why, TL_EDRIVER, "%s was made by tally for "
		    "%s%s: tally adopt takes over only what tally did not "
		    "make", step, other[0] != '\0' ? "grant " : "another grant",
		    other);
	return 0;
}

/*
 * tally adopt (g->adopting): the database g->resource and the login
 * g->login, made by someone else, become g's.  What the database holds
 * moves to g's owner role (made first) with REASSIGN OWNED BY its old
 * owner, inside it, so its tables keep their data and their rows; the
 * login, made the owner's member first, keeps its password
 * (apply_cluster then marks it and gives it the attributes of a grant's
 * login)
 * until the rotation that follows retires it.  The old owner must own
 * nothing else the move would carry along: no other database, and not
 * be a superuser (whose objects are the system's).  Resumable: a
 * database already owned by g's owner is not moved again.
 */
static int
adopt_takeover(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const struct pg_ids *ids, int *mo, char *why)
{
	char step[160], owner[256], lstep[160];
	PGresult *r;
	PGconn *c;
	char *oid;
	long others;
	int rc, osuper, lfound, lcan, lsuper;

	snprintf(step, sizeof(step), "database \"%s\"", g->resource);
	snprintf(lstep, sizeof(lstep), "login role \"%s\"", g->login);
	if ((rc = query(p->conn, q_adopt, 2, g->resource, g->login, NULL, &r,
	    step, why)) != 0)
		return rc;
	if (PQntuples(r) == 0) {
		PQclear(r);
		return tl_drv_why(why, TL_EDRIVER, "%s does not exist on this "
		    "server: nothing to adopt", step);
	}
	snprintf(owner, sizeof(owner), "%s", PQgetvalue(r, 0, 0));
	osuper = col_true(r, 0, 1);
	others = strtol(PQgetvalue(r, 0, 2), NULL, 10);
	lfound = col_true(r, 0, 3);
	lcan = col_true(r, 0, 4);
	lsuper = col_true(r, 0, 5);
	PQclear(r);
	if (!lfound || !lcan || lsuper)
		return tl_drv_why(why, TL_EDRIVER, "%s %s: tally adopt takes "
		    "over a login that exists, may log in and is not a "
		    "superuser", lstep, !lfound ? "does not exist" : !lcan ?
		    "cannot log in" : "is a superuser");
	if ((rc = adoptable_role(p, g, g->login, lstep, why)) != 0)
		return rc;
	if ((rc = ensure_owner(p, g, ids, mo, why)) != 0)
		return rc;
	if (strcmp(owner, g->owner) == 0)
		return 0;
	if ((rc = adoptable_role(p, g, owner, step, why)) != 0)
		return rc;
	if (osuper || others > 0)
		return tl_drv_why(why, TL_EDRIVER, "%s is owned by \"%s\", "
		    "which %s: its objects would move with this one; make the "
		    "login the database's owner first (ALTER DATABASE ... OWNER "
		    "TO ...)", step, owner, osuper ? "is a superuser" :
		    "owns other databases too");
	/*
	 * The login the owner role's member, inheriting, before anything
	 * moves: its consumers reach what the database holds throughout, as
	 * its owner before and as the owner role's member after (else a
	 * query in between is refused: permission denied).  apply_cluster
	 * grants the same again with the rest.
	 */
	if ((rc = runf(p->conn, lstep, why, "ALTER ROLE %s INHERIT",
	    ids->log)) != 0 ||
	    (rc = runf(p->conn, lstep, why, "GRANT %s TO %s", ids->own,
	    ids->log)) != 0)
		return rc;
	if ((oid = escape_id(p->conn, owner, why)) == NULL)
		return TL_EINVAL;
	if ((rc = admin_connect(p, g->resource, &c, why)) == 0) {
		rc = runf(c, step, why, "REASSIGN OWNED BY %s TO %s", oid,
		    ids->own);
		PQfinish(c);
	}
	PQfreemem(oid);
	return rc;
}

static int
do_create(void *h, const struct tl_drv_grant *g, char *why)
{
	char dummy[TL_WHY_MAX];
	struct tl_drv_pg *p = h;
	struct pg_ids ids;
	int rc, mo = 0, ml = 0, md = 0;

	if (why == NULL)
		why = dummy;
	if (g->access)
		return access_create(p, g, why);
	if ((rc = pg_begin(p, g, !g->adopting, &ids, why)) != 0 ||
	    (rc = vet_mesh(p, g, &ids, why)) != 0 ||
	    (g->cert_login && (rc = cert_setup(p, g, why)) != 0))
		goto out;
	if (g->adopting) {
		if ((rc = adopt_takeover(p, g, &ids, &mo, why)) != 0 ||
		    (rc = apply_cluster(p, g, &ids, why)) != 0 ||
		    (rc = apply_schema(p, g, &ids, why)) != 0 ||
		    (p->maint && (rc = maint_revoke(p, why)) != 0))
			goto out;
		tl_drv_why(why, 0, "database \"%s\" adopted: what it holds "
		    "is owner role \"%s\"'s (%s), login \"%s\" kept with "
		    "its password until the rotation retires it", g->resource,
		    g->owner, mo ? "created" : "existed", g->login);
		goto out;
	}
	if ((rc = ensure_owner(p, g, &ids, &mo, why)) != 0 ||
	    (rc = ensure_login(p, g, &ids, &ml, why)) != 0 ||
	    (rc = ensure_db(p, g, &ids, &md, why)) != 0 ||
	    (rc = apply_cluster(p, g, &ids, why)) != 0 ||
	    (rc = apply_schema(p, g, &ids, why)) != 0 ||
	    (p->maint && (rc = maint_revoke(p, why)) != 0))
		goto out;
	tl_drv_why(why, 0, "database \"%s\" %s, owner role \"%s\" %s, login "
	    "\"%s\" %s%s", g->resource, md ? "created" : "existed", g->owner,
	    mo ? "created" : "existed", g->login,
	    ml ? "created" : g->cert_login ? "existed" : "existed (password "
	    "set)", g->cert_login ? " (by certificate: no password)" : "");
out:
	ids_free(&ids);
	if (p != NULL)
		pg_settle(p);
	return rc;
}

/*
 * The columns of one row about a grant (the C_* below); own: the SQL of
 * the owner's name.
 */
#define PG_CHECK_COLS(own) \
    "SELECT d.oid IS NOT NULL, o.oid IS NOT NULL, l.oid IS NOT NULL," \
    " o.rolcanlogin, o.rolsuper, o.rolcreatedb, o.rolcreaterole," \
    " o.rolreplication, o.rolbypassrls," \
    " l.rolcanlogin, l.rolsuper, l.rolcreatedb, l.rolcreaterole," \
    " l.rolreplication, l.rolbypassrls, l.rolinherit, l.rolconnlimit," \
    " coalesce(l.rolvaliduntil < now(), false)," \
    " EXISTS (SELECT 1 FROM pg_auth_members m" \
    "  WHERE m.roleid = o.oid AND m.member = l.oid)," \
    " EXISTS (SELECT 1 FROM pg_db_role_setting s WHERE s.setrole = l.oid" \
    "  AND s.setdatabase = 0" \
    "  AND ('role=' || " own "::text) = ANY (s.setconfig))," \
    " (SELECT string_agg(quote_ident(g.rolname), ', ' ORDER BY g.rolname)" \
    "  FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid" \
    "  WHERE m.member = l.oid AND m.roleid IS DISTINCT FROM o.oid)," \
    " (SELECT string_agg(quote_ident(g.rolname), ', ' ORDER BY g.rolname)" \
    "  FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid" \
    "  WHERE m.member = o.oid)," \
    " d.datdba IS NOT DISTINCT FROM o.oid, pg_get_userbyid(d.datdba)," \
    " d.datallowconn," \
    " (SELECT string_agg(a.privilege_type, ', ' ORDER BY a.privilege_type)" \
    "  FROM aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a" \
    "  WHERE a.grantee = 0)," \
    " (SELECT string_agg(DISTINCT quote_ident(pg_get_userbyid(a.grantee))," \
    "  ', ') FROM aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a" \
    "  WHERE a.grantee <> 0 AND a.grantee <> d.datdba" \
    "  AND a.grantee IS DISTINCT FROM o.oid" \
    "  AND" PG_NOT_ACCESS_GROUP("a.grantee", own "::text") ")," \
    " (SELECT string_agg(w.p, ', ' ORDER BY w.p)" \
    "  FROM unnest(ARRAY['CONNECT', 'CREATE', 'TEMPORARY']) AS w (p)" \
    "  WHERE NOT EXISTS (SELECT 1 FROM aclexplode(coalesce(d.datacl," \
    "   acldefault('d', d.datdba))) a" \
    "   WHERE a.grantee = o.oid AND a.privilege_type = w.p))," \
    " (SELECT string_agg(x.c, ', ' ORDER BY x.c) FROM (SELECT" \
    "  CASE WHEN s.setrole = 0 THEN 'database-wide '" \
    "   WHEN s.setdatabase = 0 THEN 'login role ' ELSE" \
    "   'login role in the database ' END || u.c AS c" \
    "  FROM pg_db_role_setting s, unnest(s.setconfig) AS u (c)" \
    "  WHERE ((s.setrole = l.oid" \
    "    AND (s.setdatabase = 0 OR s.setdatabase = d.oid))" \
    "   OR (s.setrole = 0 AND s.setdatabase = d.oid))" \
    "  AND NOT (s.setrole = l.oid AND s.setdatabase = 0" \
    "   AND u.c = ('role=' || " own "::text))" \
    "  AND NOT (s.setrole = 0" \
    "   AND u.c = 'default_transaction_read_only=on')) AS x)," \
    " shobj_description(o.oid, 'pg_authid')," \
    " shobj_description(l.oid, 'pg_authid')," \
    " CASE WHEN l.rolvaliduntil IS NULL" \
    "  OR l.rolvaliduntil = 'infinity' THEN NULL" \
    "  ELSE floor(extract(epoch FROM l.rolvaliduntil)" \
    "   - extract(epoch FROM now()))::bigint END"

/* One row about a grant: columns are the C_* below. */
static const char q_check[] =
    PG_CHECK_COLS("$2")
    " FROM (VALUES (1)) AS x (one)"
    " LEFT JOIN pg_database d ON d.datname = $1"
    " LEFT JOIN pg_roles o ON o.rolname = $2"
    " LEFT JOIN pg_roles l ON l.rolname = $3";

/*
 * The same row for every grant of a bulk check, in the arrays' order,
 * with the login's stored verifier last (C_VERIFIER): pg_authid, which
 * only a superuser may read.
 */
static const char q_check_bulk[] =
    PG_CHECK_COLS("x.own") ", au.rolpassword"
    " FROM unnest($1::name[], $2::name[], $3::name[]) WITH ORDINALITY"
    "  AS x (db, own, log, i)"
    " LEFT JOIN pg_database d ON d.datname = x.db"
    " LEFT JOIN pg_roles o ON o.rolname = x.own"
    " LEFT JOIN pg_roles l ON l.rolname = x.log"
    " LEFT JOIN pg_authid au ON au.oid = l.oid"
    " ORDER BY x.i";

enum {
	C_DB, C_OWN, C_LOG,
	C_O_LOGIN, C_O_SUPER, C_O_CREATEDB, C_O_CREATEROLE, C_O_REPL,
	C_O_BYPASS,
	C_L_LOGIN, C_L_SUPER, C_L_CREATEDB, C_L_CREATEROLE, C_L_REPL,
	C_L_BYPASS, C_L_INHERIT, C_L_CONNLIMIT, C_L_EXPIRED,
	C_MEMBER, C_SETROLE, C_L_OTHERS, C_O_OTHERS,
	C_DB_OWNER_OK, C_DB_OWNER, C_DB_ALLOWCONN, C_PUBLIC, C_GRANTEES,
	C_O_LACKS, C_SETTINGS, C_O_MARK, C_L_MARK,
	C_L_LEFT,		/* seconds to VALID UNTIL; NULL: none */
	C_VERIFIER		/* q_check_bulk only */
};

static int
col_true(const PGresult *r, int row, int col)
{
	return !PQgetisnull(r, row, col) && PQgetvalue(r, row, col)[0] == 't';
}

static const char *
col_str(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

/* The attributes both roles must lack, by column offset from SUPER. */
static void
role_attrs(const PGresult *r, int row, int super, const char *what,
    const char *name, struct pg_msg *m)
{
	static const char *const attr[] = { "SUPERUSER", "CREATEDB",
	    "CREATEROLE", "REPLICATION", "BYPASSRLS" };
	size_t i;

	for (i = 0; i < sizeof(attr) / sizeof(attr[0]); i++)
		if (col_true(r, row, super + (int)i))
			madd(m, "%s \"%s\" has %s", what, name, attr[i]);
}

/*
 * Schema public as the consumer's session sees it (read on the session
 * check opens anyway, so the admin needs no connection per database):
 * its owner, what of USAGE and CREATE the owner role ($1) lacks on it,
 * and who else holds a privilege on it.  No row: the consumer dropped
 * it, which is theirs to do.
 */
static const char q_schema[] =
    "SELECT pg_get_userbyid(n.nspowner) = $1, pg_get_userbyid(n.nspowner),"
    " (SELECT string_agg(w.p, ', ' ORDER BY w.p)"
    "  FROM unnest(ARRAY['CREATE', 'USAGE']) AS w (p)"
    "  WHERE NOT has_schema_privilege($1, n.oid, w.p)),"
    " (SELECT string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'"
    "   ELSE quote_ident(pg_get_userbyid(a.grantee)) END, ', ')"
    "  FROM aclexplode(n.nspacl) a"
    "  WHERE a.grantee <> n.nspowner AND pg_get_userbyid(a.grantee) <> $1"
    "  AND" PG_NOT_ACCESS_GROUP("a.grantee", "$1::text") ")"
    " FROM pg_namespace n WHERE n.nspname = 'public'";

/* What q_schema on the consumer's session c finds, into priv. */
static void
schema_as(PGconn *c, const struct tl_drv_grant *g, struct pg_msg *priv)
{
	const Oid types[1] = { PG_NAMEOID };
	const char *vals[1] = { g->owner }, *s;
	char msg[TL_WHY_MAX];
	PGresult *r;

	r = PQexecParams(c, q_schema, 1, types, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		clean_msg(msg, sizeof(msg), PQresultErrorMessage(r));
		madd(priv, "login \"%s\" cannot read schema public of \"%s\": "
		    "%s", g->login, g->resource, msg);
		PQclear(r);
		return;
	}
	if (PQntuples(r) > 0) {
		if (!col_true(r, 0, 0))
			madd(priv, "schema public of \"%s\" is owned by "
			    "\"%s\", not \"%s\"", g->resource,
			    PQgetvalue(r, 0, 1), g->owner);
		if ((s = col_str(r, 0, 2)) != NULL)
			madd(priv, "owner role \"%s\" lacks %s on schema "
			    "public of \"%s\"", g->owner, s, g->resource);
		if ((s = col_str(r, 0, 3)) != NULL)
			madd(priv, "%s also hold privileges on schema public "
			    "of \"%s\"", s, g->resource);
	}
	PQclear(r);
}

/*
 * Logs in as the consumer.  0 with *cred set to 1 when the server
 * rejected the credential, 2 when it refused the connection for
 * another reason (a privilege, say), with libpq's message in detail;
 * TL_EUNREACH when nothing answered at host:port.  Logged in, what
 * schema_as finds goes into priv.
 */
static int
login_as(const struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const char *host, const char *port, int *cred, char *detail, size_t dn,
    struct pg_msg *priv, char *why)
{
	/* As a consumer would: over TLS, verified as the admin's session. */
	const char *kw[] = { "host", "port", "user", "password", "dbname",
	    "application_name", "client_encoding", "sslmode", "sslrootcert",
	    NULL };
	const char *val[] = { host, port, g->login, g->password, g->resource,
	    "tally-check", "UTF8", p->sslmode, p->sslrootcert, NULL };
	char state[6];
	PGconn *c;
	int rc;

	*cred = 0;
	rc = pg_connect(kw, val, &c, state, detail, dn);
	if (rc == 0) {
		schema_as(c, g, priv);
		PQfinish(c);
		return 0;
	}
	if (rc == TL_EUNREACH)
		return tl_drv_why(why, rc, "login \"%s\" cannot reach database "
		    "\"%s\" at %s:%s: %s", g->login, g->resource,
		    host != NULL ? host : "(default)",
		    port != NULL ? port : "(default)", detail);
	*cred = rc == TL_EAUTH ? 1 : 2;
	return 0;
}

/*
 * What row of a q_check-shaped result says about g, beside the login:
 * what is missing into miss, attributes and privileges into priv.
 */
static void
eval_row(const struct tl_drv_pg *p, const PGresult *r, int row,
    const struct tl_drv_grant *g, struct pg_msg *miss, struct pg_msg *priv)
{
	const char *s;

	if (!col_true(r, row, C_DB))
		madd(miss, "database \"%s\" is missing", g->resource);
	if (!col_true(r, row, C_OWN))
		madd(miss, "owner role \"%s\" is missing", g->owner);
	if (!col_true(r, row, C_LOG))
		madd(miss, "login role \"%s\" is missing", g->login);

	if (col_true(r, row, C_OWN)) {
		if (col_true(r, row, C_O_LOGIN))
			madd(priv, "owner role \"%s\" has LOGIN", g->owner);
		role_attrs(r, row, C_O_SUPER, "owner role", g->owner, priv);
		if ((s = col_str(r, row, C_O_OTHERS)) != NULL)
			madd(priv, "owner role \"%s\" is a member of %s",
			    g->owner, s);
	}
	if (col_true(r, row, C_LOG)) {
		if (!col_true(r, row, C_L_LOGIN))
			madd(priv, "login role \"%s\" is NOLOGIN", g->login);
		role_attrs(r, row, C_L_SUPER, "login role", g->login, priv);
		if (!col_true(r, row, C_L_INHERIT))
			madd(priv, "login role \"%s\" is NOINHERIT",
			    g->login);
		if ((s = col_str(r, row, C_L_CONNLIMIT)) != NULL &&
		    strcmp(s, "-1") != 0)
			madd(priv, "login role \"%s\" has CONNECTION LIMIT %s",
			    g->login, s);
		if (col_true(r, row, C_L_EXPIRED))
			madd(priv, "login role \"%s\" expired (VALID UNTIL)",
			    g->login);
		else if (p->backstop != 0 && ((s = col_str(r, row,
		    C_L_LEFT)) == NULL || strtoll(s, NULL, 10) <
		    (long long)(p->backstop / 2)))
			/* Moved on at half of it: a missed check or two. */
			madd(priv, "login role \"%s\" is valid for %s%s, "
			    "not the expiry backstop's %llu s ahead (VALID "
			    "UNTIL)", g->login, s != NULL ? s : "ever",
			    s != NULL ? " s more" : "",
			    (unsigned long long)p->backstop);
		else if (p->backstop == 0 && col_str(r, row, C_L_LEFT) !=
		    NULL)
			madd(priv, "login role \"%s\" expires in %s s (VALID "
			    "UNTIL), and the provider has no expiry backstop",
			    g->login, col_str(r, row, C_L_LEFT));
		if (col_true(r, row, C_OWN) && !col_true(r, row, C_MEMBER))
			madd(priv, "login role \"%s\" is not a member of "
			    "\"%s\"", g->login, g->owner);
		if (!col_true(r, row, C_SETROLE))
			madd(priv, "login role \"%s\" does not SET role = "
			    "\"%s\"", g->login, g->owner);
		if ((s = col_str(r, row, C_L_OTHERS)) != NULL &&
		    !(g->cert_login && strcmp(s, PG_CERT_GROUP) == 0))
			madd(priv, "login role \"%s\" is a member of %s",
			    g->login, s);
		if (g->cert_login && col_true(r, row, C_LOG) &&
		    (s == NULL || strstr(s, PG_CERT_GROUP) == NULL))
			madd(priv, "login role \"%s\" is not a member of "
			    PG_CERT_GROUP " (a login by certificate is)",
			    g->login);
	}
	if (col_true(r, row, C_DB)) {
		if (col_true(r, row, C_OWN) && !col_true(r, row, C_DB_OWNER_OK))
			madd(priv, "database \"%s\" is owned by \"%s\", not "
			    "\"%s\"", g->resource, col_str(r, row, C_DB_OWNER),
			    g->owner);
		if (!col_true(r, row, C_DB_ALLOWCONN))
			madd(priv, "database \"%s\" does not allow "
			    "connections", g->resource);
		if ((s = col_str(r, row, C_PUBLIC)) != NULL)
			madd(priv, "PUBLIC has %s on database \"%s\"", s,
			    g->resource);
		if ((s = col_str(r, row, C_GRANTEES)) != NULL)
			madd(priv, "%s also hold privileges on database "
			    "\"%s\"", s, g->resource);
		if (col_true(r, row, C_OWN) &&
		    (s = col_str(r, row, C_O_LACKS)) != NULL)
			madd(priv, "owner role \"%s\" lacks %s on database "
			    "\"%s\"", g->owner, s, g->resource);
	}
	if ((s = col_str(r, row, C_SETTINGS)) != NULL)
		madd(priv, "settings tally did not set (login role \"%s\", "
		    "database \"%s\"): %s", g->login, g->resource, s);
}

/*
 * 1, with why, when a role of row was marked by another mesh: check
 * reports that alone, as a drift no repair of this mesh's may act on
 * (every changing operation refuses it).
 */
static int
row_other_mesh(const struct tl_drv_pg *p, const PGresult *r, int row,
    const struct tl_drv_grant *g, char *why)
{
	const int cols[2] = { C_O_MARK, C_L_MARK };
	const char *const names[2] = { g->owner, g->login };
	const char *const what[2] = { "owner role", "login role" };
	char other[256];
	int i, stale;

	for (i = 0; i < 2; i++) {
		if (col_str(r, row, cols[i]) == NULL ||
		    mark_kind(p, g, col_str(r, row, cols[i]), &stale, other,
		    sizeof(other)) != MARK_MESH)
			continue;
		tl_drv_why(why, 0, "privileges: %s \"%s\" is owned by mesh "
		    "%.12s..., not this one: not repaired (only adopting "
		    "that mesh's objects takes it over)", what[i], names[i],
		    other);
		return 1;
	}
	return 0;
}

/*
 * Can g's login still log in without TLS?  Asked only of a provider
 * reached over TLS (sslmode not disable), by a connection with
 * sslmode=disable as the login that sends no secret: no password, no
 * password file (and, should tallyd's environment hold PGPASSWORD, a
 * fixed word that is no one's password instead).  The server refusing
 * it in pg_hba.conf (28000: "no pg_hba.conf entry ... no encryption",
 * or a reject line) holds the login to TLS: 0.  Its asking for a
 * password (or letting it in) does not: 1, with the pg_hba.conf line
 * that would in line (cap bytes).  Anything else (nothing answered):
 * 0, nothing to report.
 */
/* A password file that cannot exist (libpq warns of /dev/null). */
#define PG_NO_PASSFILE	"/dev/null/no-password-file"

static int
plaintext_login(const struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const char *host, const char *port, char *line, size_t cap)
{
	const char *pw = getenv("PGPASSWORD") != NULL ? "tally-tls-probe" :
	    NULL;
	const char *kw[] = { "host", "port", "user", "dbname",
	    "application_name", "sslmode", "gssencmode", "passfile",
	    "password", NULL };
	const char *val[] = { host, port, g->login, g->resource,
	    "tally-tls-probe", "disable", "disable", PG_NO_PASSFILE, pw, NULL };
	char state[6], msg[TL_WHY_MAX];
	PGconn *c;
	int rc;

	if (strcmp(p->sslmode, "disable") == 0)
		return 0;
	rc = pg_connect(kw, val, &c, state, msg, sizeof(msg));
	if (rc == 0)
		PQfinish(c);
	else if (rc != TL_EAUTH || strcmp(state, "28000") == 0)
		return 0;
	/*
	 * A hostssl line does not do it: a plaintext connection passes over
	 * it to the host line below.  A hostnossl reject line above them
	 * does, and leaves every TLS connection to the lines it had.
	 */
	snprintf(line, cap, "hostnossl all %s all reject", g->login);
	return 1;
}

static int
pg_check(void *h, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	char dummy[TL_WHY_MAX], detail[TL_WHY_MAX], line[160];
	struct tl_drv_pg *p = h;
	struct pg_msg miss = { .len = 0 }, cred = { .len = 0 },
	    priv = { .len = 0 };
	const char *host = NULL, *port = NULL, *s;
	struct pg_ids ids;
	PGresult *r = NULL;
	int rc, bad;

	if (why == NULL)
		why = dummy;
	if (g->access)
		return access_check(p, g, ep, drift, why);
	*drift = TL_DRIFT_NONE;
	if ((rc = pg_begin(p, g, 1, &ids, why)) != 0)
		goto out;
	rc = query(p->conn, q_check, 3, g->resource, g->owner, g->login, &r,
	    "check", why);
	if (rc != 0)
		goto out;
	if (row_other_mesh(p, r, 0, g, why)) {
		*drift = TL_DRIFT_PRIVILEGES;
		goto out;
	}

	eval_row(p, r, 0, g, &miss, &priv);
	if (p->maint) {
		char found[160];

		if ((rc = maint_public(p, found, sizeof(found), why)) != 0)
			goto out;
		if (found[0] != '\0')
			madd(&priv, "PUBLIC can connect to %s (the provider "
			    "revokes it: revoke-public-connect)", found);
	}

	/*
	 * Log in as the consumer, at the routable name, unless something
	 * is missing or an attribute already forbids it (then the login
	 * would fail for a reason a new password cannot repair).
	 */
	bad = miss.n > 0 || !col_true(r, 0, C_L_LOGIN) ||
	    col_true(r, 0, C_L_EXPIRED) ||
	    ((s = col_str(r, 0, C_L_CONNLIMIT)) != NULL && strcmp(s, "0") == 0) ||
	    !col_true(r, 0, C_DB_ALLOWCONN);
	/*
	 * A login by certificate: its key is on the consumer's node only,
	 * so nobody here can log in as it (the bulk check reads that it
	 * has no password).
	 */
	if (!bad && !g->cert_login) {
		int c;

		host = ep != NULL && ep->host != NULL ? ep->host : p->host;
		port = ep != NULL && ep->port != NULL ? ep->port : p->port;
		rc = login_as(p, g, host, port, &c, detail, sizeof(detail), &priv,
		    why);
		if (rc != 0) {
			/* What the admin side found still counts. */
			*drift = priv.n > 0 ? TL_DRIFT_PRIVILEGES :
			    TL_DRIFT_NONE;
			goto out;
		}
		if (c == 1)
			madd(&cred, "login \"%s\" does not authenticate at "
			    "%s:%s: %s", g->login,
			    host != NULL ? host : "(default)",
			    port != NULL ? port : "(default)", detail);
		else if (c == 2)
			madd(&priv, "login \"%s\" cannot connect to \"%s\": "
			    "%s", g->login, g->resource, detail);
	}

	if (pg_drift(&miss, &cred, &priv, drift, why))
		goto done;
	if (!bad && g->posture && !g->cert_login &&
	    plaintext_login(p, g, host, port,
	    line, sizeof(line))) {
		*drift = TL_DRIFT_PLAINTEXT;
		tl_drv_why(why, 0, "plaintext: login \"%s\" can still log in "
		    "without TLS at %s:%s; pg_hba.conf is the operator's: add "
		    "'%s' above the host lines that match it (or 'hostnossl "
		    "all all all reject' for every role), then reload",
		    g->login,
		    host != NULL ? host : "(default)",
		    port != NULL ? port : "(default)", line);
	} else
		tl_drv_why(why, 0, "database \"%s\" owned by \"%s\", login "
		    "\"%s\" authenticates%s, privileges as granted",
		    g->resource, g->owner, g->login,
		    strcmp(p->sslmode, "disable") != 0 ? " over TLS and only "
		    "over TLS" : "");
done:
	rc = 0;
out:
	PQclear(r);
	ids_free(&ids);
	if (p != NULL)
		pg_settle(p);
	return rc;
}

/*
 * A text array literal of n names, {"a","b"}, for a name[] parameter;
 * the caller frees *out.
 */
static int
name_array(const struct tl_drv_grant *gs, size_t n, size_t field, char **out)
{
	size_t i, len = 3, k;
	const char *v;
	char *a, *w;

	for (i = 0; i < n; i++) {
		v = *(const char *const *)((const char *)&gs[i] + field);
		len += 2 * strlen(v) + 3;
	}
	if ((a = malloc(len)) == NULL)
		return ENOMEM;
	w = a;
	*w++ = '{';
	for (i = 0; i < n; i++) {
		v = *(const char *const *)((const char *)&gs[i] + field);
		if (i > 0)
			*w++ = ',';
		*w++ = '"';
		for (k = 0; v[k] != '\0'; k++) {
			if (v[k] == '"' || v[k] == '\\')
				*w++ = '\\';
			*w++ = v[k];
		}
		*w++ = '"';
	}
	*w++ = '}';
	*w = '\0';
	*out = a;
	return 0;
}

/*
 * The bulk check (driver.h): one catalogue query over arrays of all the
 * grants' names, one for the maintenance databases, and the password
 * compared with pg_authid.rolpassword on this side (pg_scram.h), no
 * consumer login.  The findings, their order and their words are
 * pg_check's, except that a credential is "the stored verifier is not
 * the recorded password's".
 */
static int
pg_check_bulk(void *h, const struct tl_drv_grant *gs, size_t n,
    enum tl_drv_drift *drift, char (*why)[TL_WHY_MAX])
{
	struct tl_drv_pg *p = h;
	char found[160] = "", *arr[3] = { 0 };
	const char *vals[3];
	static const size_t fields[3] = {
	    offsetof(struct tl_drv_grant, resource),
	    offsetof(struct tl_drv_grant, owner),
	    offsetof(struct tl_drv_grant, login) };
	PGresult *r = NULL;
	size_t i;
	int rc, k;

	for (i = 0; i < n; i++)
		drift[i] = TL_DRIFT_NONE;
	if (n == 0)
		return 0;
	if (p == NULL)
		return tl_drv_why(why[0], TL_EINVAL, "driver not open");
	if ((rc = pg_ensure(p, why[0])) != 0)
		goto out;
	for (i = 0; i < n; i++)
		if ((rc = grant_ok(p, &gs[i], 1, why[i])) != 0)
			goto out;
	for (k = 0; k < 3; k++) {
		if ((rc = name_array(gs, n, fields[k], &arr[k])) != 0) {
			tl_drv_why(why[0], rc, "bulk check: %s",
			    tl_strerror(rc));
			goto out;
		}
		vals[k] = arr[k];
	}
	r = PQexecParams(p->conn, q_check_bulk, 3, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = res_err(p->conn, r, "bulk check", why[0]);
		goto out;
	}
	if ((size_t)PQntuples(r) != n) {
		rc = tl_drv_why(why[0], TL_EDRIVER, "bulk check: %d rows for "
		    "%zu grants", PQntuples(r), n);
		goto out;
	}
	if (p->maint && (rc = maint_public(p, found, sizeof(found),
	    why[0])) != 0)
		goto out;
	for (i = 0; i < n; i++) {
		const struct tl_drv_grant *g = &gs[i];
		struct pg_msg miss = { .len = 0 }, cred = { .len = 0 },
		    priv = { .len = 0 };
		const char *s;
		int row = (int)i, bad;

		if (row_other_mesh(p, r, row, g, why[i])) {
			drift[i] = TL_DRIFT_PRIVILEGES;
			continue;
		}
		eval_row(p, r, row, g, &miss, &priv);
		if (found[0] != '\0')
			madd(&priv, "PUBLIC can connect to %s (the provider "
			    "revokes it: revoke-public-connect)", found);
		/* As pg_check: no credential verdict where no login could. */
		bad = miss.n > 0 || !col_true(r, row, C_L_LOGIN) ||
		    col_true(r, row, C_L_EXPIRED) ||
		    ((s = col_str(r, row, C_L_CONNLIMIT)) != NULL &&
		    strcmp(s, "0") == 0) ||
		    !col_true(r, row, C_DB_ALLOWCONN);
		if (!bad && g->cert_login && !PQgetisnull(r, row, C_VERIFIER))
			madd(&cred, "login \"%s\" has a password: a login by "
			    "certificate has none", g->login);
		else if (!bad && !g->cert_login &&
		    !tl_pg_scram_match(col_str(r, row, C_VERIFIER),
		    g->login, g->password))
			madd(&cred, "login \"%s\": the password the server "
			    "keeps is not the one recorded (its verifier "
			    "differs)", g->login);
		if (!pg_drift(&miss, &cred, &priv, &drift[i], why[i]))
			tl_drv_why(why[i], 0, "database \"%s\" owned by "
			    "\"%s\", login \"%s\"'s password as recorded, "
			    "privileges as granted", g->resource, g->owner,
			    g->login);
	}
	rc = 0;
out:
	PQclear(r);
	for (k = 0; k < 3; k++)
		free(arr[k]);
	pg_settle(p);
	return rc;
}

/*
 * Marks g's roles with its id, as apply_cluster does: a role with the
 * unnamed mark that g adopted (a grant made before marks named grants)
 * is g's from now on, and no other grant that shared its names can
 * reset its password (two such grants stop fighting over it).
 */
static int
claim(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const struct pg_ids *ids, char *why)
{
	char step[160];
	int rc, found;

	if (!tl_drv_grant_named(g))
		return 0;
	snprintf(step, sizeof(step), "owner role \"%s\"", g->owner);
	if ((rc = exists(p->conn, q_role, g->owner, &found, step, why)) != 0 ||
	    (found && (rc = runf(p->conn, step, why, "COMMENT ON ROLE %s IS "
	    "%s", ids->own, ids->mark)) != 0))
		return rc;
	snprintf(step, sizeof(step), "login role \"%s\"", g->login);
	return runf(p->conn, step, why, "COMMENT ON ROLE %s IS %s", ids->log,
	    ids->mark);
}

static int
do_set_password(void *h, const struct tl_drv_grant *g, char *why)
{
	char dummy[TL_WHY_MAX], sql[PG_SQL_MAX], step[160], *pw = NULL;
	struct tl_drv_pg *p = h;
	struct pg_ids ids;
	int rc;

	if (why == NULL)
		why = dummy;
	if (g->access)
		return access_create(p, g, why);
	if ((rc = pg_begin(p, g, 1, &ids, why)) != 0 ||
	    (rc = vet_grant(p, g, &ids, why)) != 0)
		goto out;
	snprintf(step, sizeof(step), "login role \"%s\"", g->login);
	if (!g->cert_login && (rc = pw_literal(p->conn, g, &pw, why)) != 0)
		goto out;
	rc = tl_drv_sqlf(sql, sizeof(sql), why, "ALTER ROLE %s PASSWORD %s",
	    ids.log, pw != NULL ? pw : "NULL");
	pw_free(pw);
	if (rc != 0) {
		tl_secret_wipe(sql, sizeof(sql));
		goto out;
	}
	if ((rc = run_secret(p->conn, sql, step, why)) != 0 ||
	    (rc = claim(p, g, &ids, why)) != 0)
		goto out;
	tl_drv_why(why, 0, "password of login \"%s\" set", g->login);
out:
	ids_free(&ids);
	if (p != NULL)
		pg_settle(p);
	return rc;
}

/*
 * After a rotation: the old login, already disabled by revoke(drop=0),
 * goes.  Everything it made is normally owned by the owner role (SET
 * role = owner); what a consumer created as the login itself (SET ROLE
 * NONE) is given to the owner role first, in the grant's database (the
 * only one the login can connect to), and its privileges there are
 * dropped: otherwise DROP ROLE fails on every retry, for ever.
 */
static int
do_retire_login(void *h, const struct tl_drv_grant *g, char *why)
{
	char dummy[TL_WHY_MAX], step[160];
	struct tl_drv_pg *p = h;
	struct pg_ids ids;
	int rc, login;

	if (why == NULL)
		why = dummy;
	if ((rc = pg_begin(p, g, 0, &ids, why)) != 0 ||
	    (rc = vet_grant(p, g, &ids, why)) != 0)
		goto out;
	snprintf(step, sizeof(step), "login role \"%s\"", g->login);
	if ((rc = exists(p->conn, q_role, g->login, &login, step, why)) != 0)
		goto out;
	if (login) {
		PGconn *c;
		int found;

		if ((rc = exists(p->conn, q_db, g->resource, &found, step,
		    why)) != 0)
			goto out;
		if (found) {
			if ((rc = admin_connect(p, g->resource, &c, why)) != 0)
				goto out;
			rc = runf(c, step, why, "REASSIGN OWNED BY %s TO %s",
			    ids.log, ids.own);
			if (rc == 0)
				rc = runf(c, step, why, "DROP OWNED BY %s",
				    ids.log);
			PQfinish(c);
			if (rc != 0)
				goto out;
		}
		if ((rc = runf(p->conn, step, why, "DROP ROLE %s",
		    ids.log)) != 0)
			goto out;
	}
	tl_drv_why(why, 0, "login \"%s\" %s", g->login, login ? "dropped" :
	    "was already gone");
out:
	ids_free(&ids);
	if (p != NULL)
		pg_settle(p);
	return rc;
}

/* The admin's own password: sent as a SCRAM verifier, like the others. */
static int
do_set_admin_password(void *h, const char *user, const char *password,
    char *why)
{
	char dummy[TL_WHY_MAX], sql[PG_SQL_MAX], *pw = NULL;
	struct tl_drv_pg *p = h;
	struct tl_drv_grant g = { NULL, NULL, user, password };
	int rc;

	if (why == NULL)
		why = dummy;
	if ((rc = pw_literal(p->conn, &g, &pw, why)) != 0)
		return rc;
	rc = tl_drv_sqlf(sql, sizeof(sql), why, "ALTER ROLE CURRENT_USER "
	    "PASSWORD %s", pw);
	pw_free(pw);
	if (rc == 0)
		rc = run_secret(p->conn, sql, "the admin role", why);
	else
		tl_secret_wipe(sql, sizeof(sql));
	if (rc == 0)
		tl_drv_why(why, 0, "password of admin role \"%s\" set", user);
	return rc;
}

/* What a retained grant keeps: pg_database_size of its database. */
static int
pg_size(void *h, const struct tl_drv_grant *g, uint64_t *bytes, char *why)
{
	char dummy[TL_WHY_MAX], step[160];
	struct tl_drv_pg *p = h;
	PGresult *r;
	int rc;

	if (why == NULL)
		why = dummy;
	*bytes = 0;
	snprintf(step, sizeof(step), "size of database \"%s\"", g->resource);
	if ((rc = query(p->conn, "SELECT pg_database_size(datname) FROM "
	    "pg_database WHERE datname = $1", 1, g->resource, NULL, NULL, &r,
	    step, why)) != 0)
		return rc;
	if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
		*bytes = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	tl_drv_why(why, 0, "database \"%s\": %llu bytes", g->resource,
	    (unsigned long long)*bytes);
	return 0;
}

/* The sessions of g->login still open (pg_stat_activity). */
static int
pg_sessions(void *h, const struct tl_drv_grant *g, unsigned *count, char *why)
{
	char dummy[TL_WHY_MAX], step[160];
	struct tl_drv_pg *p = h;
	PGresult *r;
	int rc;

	if (why == NULL)
		why = dummy;
	*count = 0;
	snprintf(step, sizeof(step), "sessions of \"%s\"", g->login);
	if ((rc = query(p->conn, "SELECT count(*) FROM pg_stat_activity WHERE "
	    "usename = $1", 1, g->login, NULL, NULL, &r, step, why)) != 0)
		return rc;
	if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
		*count = (unsigned)strtoul(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return 0;
}

static int
do_fix_privileges(void *h, const struct tl_drv_grant *g, char *why)
{
	char dummy[TL_WHY_MAX];
	struct tl_drv_pg *p = h;
	struct pg_ids ids;
	int rc;

	if (why == NULL)
		why = dummy;
	if (g->access)
		return access_create(p, g, why);
	if ((rc = pg_begin(p, g, 0, &ids, why)) != 0 ||
	    (rc = vet_grant(p, g, &ids, why)) != 0)
		goto out;
	if ((rc = apply_cluster(p, g, &ids, why)) != 0 ||
	    (rc = apply_schema(p, g, &ids, why)) != 0 ||
	    (p->maint && (rc = maint_revoke(p, why)) != 0))
		goto out;
	tl_drv_why(why, 0, "attributes and privileges of database \"%s\", "
	    "roles \"%s\" and \"%s\" reset", g->resource, g->owner, g->login);
out:
	ids_free(&ids);
	if (p != NULL)
		pg_settle(p);
	return rc;
}

/* Ends login's sessions; *n gets how many. */
static int
end_sessions(struct tl_drv_pg *p, const struct tl_drv_grant *g, int *n,
    const char *step, char *why)
{
	PGresult *r;
	int rc;

	/* PG14+ waits (up to 5 s) for each backend to be gone. */
	rc = query(p->conn, p->version >= 140000 ?
	    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
	    " WHERE usename = $1 AND pid <> pg_backend_pid()" :
	    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
	    " WHERE usename = $1 AND pid <> pg_backend_pid()",
	    1, g->login, NULL, NULL, &r, step, why);
	if (rc != 0)
		return rc;
	*n = PQntuples(r);
	PQclear(r);
	return 0;
}

/* Members of g's owner role other than g->login (raw names). */
static const char q_logins[] =
    "SELECT m.rolname FROM pg_auth_members a"
    " JOIN pg_roles o ON o.oid = a.roleid"
    " JOIN pg_roles m ON m.oid = a.member"
    " WHERE o.rolname = $1 AND m.rolname <> $2 ORDER BY 1";

/* Drops the other logins of g (the database is gone): *n sessions. */
static int
other_logins(struct tl_drv_pg *p, const struct tl_drv_grant *g, int *n,
    char *why)
{
	struct tl_drv_grant o = *g;
	PGresult *r;
	char step[160];
	int i, k, rc;

	snprintf(step, sizeof(step), "logins of owner role \"%s\"", g->owner);
	if ((rc = query(p->conn, q_logins, 2, g->owner, g->login, NULL, &r,
	    step, why)) != 0)
		return rc;
	for (i = 0; i < PQntuples(r) && rc == 0; i++) {
		char *id;

		o.login = PQgetvalue(r, i, 0);
		if ((id = escape_id(p->conn, o.login, why)) == NULL) {
			rc = TL_EINVAL;
			break;
		}
		snprintf(step, sizeof(step), "login role \"%s\"", o.login);
		if ((rc = runf(p->conn, step, why, "ALTER ROLE %s NOLOGIN",
		    id)) == 0 && (rc = end_sessions(p, &o, &k, step,
		    why)) == 0 && (rc = runf(p->conn, step, why,
		    "DROP OWNED BY %s", id)) == 0 &&
		    (rc = runf(p->conn, step, why, "DROP ROLE %s", id)) == 0)
			*n += k;
		PQfreemem(id);
	}
	PQclear(r);
	return rc;
}

static int
do_revoke(void *h, const struct tl_drv_grant *g, int drop, char *why)
{
	char dummy[TL_WHY_MAX], step[160], owned[PG_SQL_MAX / 2];
	struct tl_drv_pg *p = h;
	struct pg_ids ids;
	int rc, login, owner, n = 0, theirs = 0;

	if (why == NULL)
		why = dummy;
	if (g->access)
		return access_revoke(p, g, drop, why);
	if ((rc = pg_begin(p, g, 0, &ids, why)) != 0 ||
	    (rc = vet_mesh(p, g, &ids, why)) != 0)
		goto out;
	snprintf(step, sizeof(step), "login role \"%s\"", g->login);
	if ((rc = exists(p->conn, q_role, g->login, &login, step, why)) != 0)
		goto out;
	/*
	 * Objects tally did not make are not its to revoke: a create that
	 * was refused because the name was taken leaves them as they were.
	 */
	if (login && (rc = not_ours(p, g, g->login, &theirs, step,
	    why)) != 0)
		goto out;
	if (theirs)
		login = 0;
	/* NOLOGIN first, so no session can start after the sweep. */
	if (login && (rc = runf(p->conn, step, why, "ALTER ROLE %s NOLOGIN",
	    ids.log)) != 0)
		goto out;
	if (!theirs && (rc = end_sessions(p, g, &n, step, why)) != 0)
		goto out;
	if (!drop) {
		tl_drv_why(why, 0, "login \"%s\" %s, %d session%s ended; "
		    "database \"%s\" kept", g->login, login ? "disabled" :
		    "did not exist", n, n == 1 ? "" : "s", g->resource);
		goto out;
	}

	snprintf(step, sizeof(step), "database \"%s\"", g->resource);
	if (p->version < 130000) {	/* no WITH (FORCE) before PG13 */
		PGresult *r;

		if ((rc = query(p->conn, "SELECT pg_terminate_backend(pid)"
		    " FROM pg_stat_activity WHERE datname = $1", 1,
		    g->resource, NULL, NULL, &r, step, why)) != 0)
			goto out;
		PQclear(r);
	}
	{
		char downer[256];

		if ((rc = foreign_db(p, g, &theirs, downer, sizeof(downer),
		    step, why)) != 0)
			goto out;
	}
	if (!theirs && (rc = runf(p->conn, step, why,
	    "DROP DATABASE IF EXISTS %s%s", ids.res, p->version >= 130000 ?
	    " WITH (FORCE)" : "")) != 0)
		goto out;

	/*
	 * Whatever the roles still own or hold here and on shared objects
	 * (the consumer may have created objects in this database while
	 * connected as itself), then the roles.
	 */
	snprintf(step, sizeof(step), "roles \"%s\", \"%s\"", g->login,
	    g->owner);
	if ((rc = exists(p->conn, q_role, g->login, &login, step, why)) != 0 ||
	    (rc = exists(p->conn, q_role, g->owner, &owner, step, why)) != 0)
		goto out;
	if (login && (rc = not_ours(p, g, g->login, &theirs, step,
	    why)) == 0 && theirs)
		login = 0;
	if (rc == 0 && owner && (rc = not_ours(p, g, g->owner, &theirs, step,
	    why)) == 0 && theirs)
		owner = 0;
	if (rc != 0)
		goto out;
	/*
	 * The grant's other logins (members of its owner role), which
	 * revoke(drop=0) never touches because the rotator retires one
	 * login with it: the one a restore left disabled, the old one of
	 * a rotation the revocation interrupted.  A drop leaves none.
	 */
	if (owner && (rc = other_logins(p, g, &n, why)) != 0)
		goto out;
	if (login || owner) {
		snprintf(owned, sizeof(owned), "%s%s%s", login ? ids.log : "",
		    login && owner ? ", " : "", owner ? ids.own : "");
		if ((rc = runf(p->conn, step, why, "DROP OWNED BY %s",
		    owned)) != 0)
			goto out;
	}
	if ((login && (rc = runf(p->conn, step, why, "DROP ROLE IF EXISTS %s",
	    ids.log)) != 0) ||
	    (owner && (rc = runf(p->conn, step, why, "DROP ROLE IF EXISTS %s",
	    ids.own)) != 0))
		goto out;
	tl_drv_why(why, 0, "login \"%s\" and owner \"%s\" dropped with "
	    "database \"%s\", %d session%s ended", g->login, g->owner,
	    g->resource, n, n == 1 ? "" : "s");
out:
	ids_free(&ids);
	if (p != NULL)
		pg_settle(p);
	return rc;
}

/*
 * A move (tally rebind --migrate) freezes the source before copying it:
 * new sessions start read-only (default_transaction_read_only, set on
 * the database) and the login's sessions end, so what the copy takes is
 * all there is.  A client that turns read-only off itself can still
 * write: this guards against the ordinary write, not against a client
 * bent on it.  Thawing (a move that failed) resets the setting.
 */
/*
 * A source tally did not make (driver.h: owner and login both ""; an
 * embedded instance consolidated): its database alone, and every other
 * session on it ends, since tally knows no login of its own there.
 */
static int
freeze_foreign(struct tl_drv_pg *p, const struct tl_drv_grant *g, int on,
    char *why)
{
	const char *mydb;
	char step[160], *id = NULL;
	PGresult *r = NULL;
	int rc, found;

	if ((rc = pg_ensure(p, why)) != 0 ||
	    (rc = name_ok("database", g->resource, why)) != 0)
		return rc;
	mydb = PQdb(p->conn);
	if (strcmp(g->resource, "template0") == 0 ||
	    strcmp(g->resource, "template1") == 0 ||
	    (mydb != NULL && strcmp(g->resource, mydb) == 0))
		return tl_drv_why(why, TL_EINVAL, "refusing to freeze database "
		    "\"%s\"", g->resource);
	snprintf(step, sizeof(step), "database \"%s\"", g->resource);
	if ((rc = exists(p->conn, q_db, g->resource, &found, step, why)) != 0)
		return rc;
	if (!found)
		return on ? tl_drv_why(why, TL_EDRIVER,
		    "%s does not exist", step) :
		    tl_drv_why(why, 0, "%s is gone: nothing to thaw", step);
	if ((id = PQescapeIdentifier(p->conn, g->resource,
	    strlen(g->resource))) == NULL)
		return tl_drv_why(why, TL_EDRIVER,
		    "%s: cannot quote the name", step);
	if (!on) {
		if ((rc = runf(p->conn, step, why, "ALTER DATABASE %s RESET "
		    "default_transaction_read_only", id)) == 0)
			tl_drv_why(why, 0, "%s writable again", step);
		goto out;
	}
	if ((rc = runf(p->conn, step, why, "ALTER DATABASE %s SET "
	    "default_transaction_read_only = on", id)) != 0 ||
	    (rc = query(p->conn, "SELECT pg_terminate_backend(pid) FROM "
	    "pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
	    1, g->resource, NULL, NULL, &r, step, why)) != 0)
		goto out;
	tl_drv_why(why, 0,
	    "%s read-only for new sessions, %d session%s on it ended",
	    step, PQntuples(r), PQntuples(r) == 1 ? "" : "s");
out:
	PQclear(r);
	PQfreemem(id);
	return rc;
}

static int
do_freeze(void *h, const struct tl_drv_grant *g, int on, char *why)
{
	char dummy[TL_WHY_MAX], step[160];
	struct tl_drv_pg *p = h;
	struct pg_ids ids;
	int rc, found, n = 0;

	if (why == NULL)
		why = dummy;
	if (p != NULL && g != NULL && g->owner != NULL && g->login != NULL &&
	    *g->owner == '\0' && *g->login == '\0') {
		rc = freeze_foreign(p, g, on, why);
		pg_settle(p);
		return rc;
	}
	if ((rc = pg_begin(p, g, 0, &ids, why)) != 0 ||
	    (rc = vet_grant(p, g, &ids, why)) != 0)
		goto out;
	snprintf(step, sizeof(step), "database \"%s\"", g->resource);
	if ((rc = exists(p->conn, q_db, g->resource, &found, step, why)) != 0)
		goto out;
	if (!found) {
		if (on)
			rc = tl_drv_why(why, TL_EDRIVER, "%s does not exist",
			    step);
		else
			tl_drv_why(why, 0, "%s is gone: nothing to thaw", step);
		goto out;
	}
	if (!on) {
		if ((rc = runf(p->conn, step, why, "ALTER DATABASE %s RESET "
		    "default_transaction_read_only", ids.res)) == 0)
			tl_drv_why(why, 0, "%s writable again", step);
		goto out;
	}
	if ((rc = runf(p->conn, step, why, "ALTER DATABASE %s SET "
	    "default_transaction_read_only = on", ids.res)) != 0 ||
	    (rc = end_sessions(p, g, &n, step, why)) != 0)
		goto out;
	tl_drv_why(why, 0, "%s read-only for new sessions, %d session%s of "
	    "\"%s\" ended", step, n, n == 1 ? "" : "s", g->login);
out:
	ids_free(&ids);
	if (p != NULL)
		pg_settle(p);
	return rc;
}

/* Migrations run as the consumer: drivers/pg_migrate.c. */
int	tl_drv_pg_migrate(const struct tl_drv_endpoint *ep,
	    const struct tl_drv_grant *g, const struct tl_drv_migration *m,
	    int *already, char *why, int *line);
/* Moving data to another server: drivers/pg_copy.c. */
int	tl_drv_pg_copy(const struct tl_drv_admin *from,
	    const struct tl_drv_grant *gfrom, const struct tl_drv_admin *to,
	    const struct tl_drv_grant *gto, char *tables, size_t cap,
	    char *why);

/* Disables the old login, ends its sessions, drops it (owned: owner). */
/* --- access below ownership (tl_drv_grant.access) ------------------- */

/*
 * A login with access: read or read-write to a database another grant
 * owns is a role of its own (LOGIN, this grant's mark), member of one
 * group role per owner and access, tally_r_DIGEST or tally_w_DIGEST
 * (DIGEST of the owner role's name), which holds the access: CONNECT on
 * the database; USAGE on schema public; SELECT (read-write: and INSERT,
 * UPDATE, DELETE) on its tables and views and SELECT (read-write: and
 * USAGE, UPDATE) on its sequences; the same by default privileges for
 * what the owner role makes later, so new tables are seen at once.  The
 * group's comment is PG_ACCESS_R/W OWNER PG_ACCESS_END: the owner
 * grant's checks and repairs leave exactly those roles' privileges
 * alone (PG_NOT_ACCESS_GROUP), whatever the group is called.  Every
 * operation acts on the login and the group alone; the database and its
 * owner are the other grant's.
 */
static void
access_group(const struct tl_drv_grant *g, char name[PG_NAME_MAX + 1],
    char *mark, size_t mn)
{
	char d[17];
	int rw = g->access == TL_DRV_ACCESS_READ_WRITE;

	tl_drv_name_digest(g->owner, d);
	snprintf(name, PG_NAME_MAX + 1, "tally_%c_%s", rw ? 'w' : 'r', d);
	snprintf(mark, mn, "%s%s%s", rw ? PG_ACCESS_W : PG_ACCESS_R, g->owner,
	    PG_ACCESS_END);
}

/* The group, made if it is not there; TL_EDRIVER if it is someone's. */
static int
access_group_make(struct tl_drv_pg *p, const char *grp, const char *gid,
    const char *gmark, char *why)
{
	char step[160], *lit;
	PGresult *r;
	int rc, have;

	snprintf(step, sizeof(step), "group role \"%s\"", grp);
	if ((rc = query(p->conn, q_role_mark, 1, grp, NULL, NULL, &r, step,
	    why)) != 0)
		return rc;
	have = PQntuples(r) > 0;
	if (have && (PQgetisnull(r, 0, 0) ||
	    strcmp(PQgetvalue(r, 0, 0), gmark) != 0))
		rc = tl_drv_why(why, TL_EDRIVER, "%s exists and is not tally's "
		    "(its comment is not \"%s\"): tally never takes over a role "
		    "it did not make", step, gmark);
	PQclear(r);
	if (rc != 0 || have)
		return rc;
	if ((lit = PQescapeLiteral(p->conn, gmark, strlen(gmark))) == NULL)
		return tl_drv_why(why, TL_EINVAL, "cannot quote the mark of %s",
		    step);
	rc = runf(p->conn, step, why, "CREATE ROLE %s NOLOGIN NOINHERIT "
	    ROLE_ATTRS "; COMMENT ON ROLE %s IS %s", gid, gid, lit);
	PQfreemem(lit);
	return rc;
}

/* What the group holds inside the database, set again whole. */
static int
access_db(struct tl_drv_pg *p, const struct tl_drv_grant *g, const char *gid,
    const struct pg_ids *ids, char *why)
{
	int rw = g->access == TL_DRV_ACCESS_READ_WRITE;
	const char *tp = rw ? "SELECT, INSERT, UPDATE, DELETE" : "SELECT";
	const char *sp = rw ? "USAGE, SELECT, UPDATE" : "SELECT";
	char step[200];
	PGconn *c;
	int found, rc;

	if ((rc = admin_connect(p, g->resource, &c, why)) != 0)
		return rc;
	snprintf(step, sizeof(step), "access to schema public of \"%s\"",
	    g->resource);
	rc = run(c, "SET default_transaction_read_only = off", step, why);
	if (rc == 0)
		rc = run(c, "BEGIN", step, why);
	if (rc == 0)
		rc = exists(c, "SELECT 1 FROM pg_namespace WHERE nspname = $1",
		    "public", &found, step, why);
	if (rc == 0 && found &&
	    (rc = runf(c, step, why, "GRANT USAGE ON SCHEMA public TO %s",
	    gid)) == 0 &&
	    (rc = runf(c, step, why, "REVOKE ALL ON ALL TABLES IN SCHEMA "
	    "public FROM %s", gid)) == 0 &&
	    (rc = runf(c, step, why, "GRANT %s ON ALL TABLES IN SCHEMA public "
	    "TO %s", tp, gid)) == 0 &&
	    (rc = runf(c, step, why, "REVOKE ALL ON ALL SEQUENCES IN SCHEMA "
	    "public FROM %s", gid)) == 0 &&
	    (rc = runf(c, step, why, "GRANT %s ON ALL SEQUENCES IN SCHEMA "
	    "public TO %s", sp, gid)) == 0 &&
	    (rc = runf(c, step, why, "ALTER DEFAULT PRIVILEGES FOR ROLE %s IN "
	    "SCHEMA public REVOKE ALL ON TABLES FROM %s", ids->own, gid)) == 0 &&
	    (rc = runf(c, step, why, "ALTER DEFAULT PRIVILEGES FOR ROLE %s IN "
	    "SCHEMA public GRANT %s ON TABLES TO %s", ids->own, tp, gid)) == 0 &&
	    (rc = runf(c, step, why, "ALTER DEFAULT PRIVILEGES FOR ROLE %s IN "
	    "SCHEMA public REVOKE ALL ON SEQUENCES FROM %s", ids->own,
	    gid)) == 0)
		rc = runf(c, step, why, "ALTER DEFAULT PRIVILEGES FOR ROLE %s IN "
		    "SCHEMA public GRANT %s ON SEQUENCES TO %s", ids->own, sp,
		    gid);
	/* A failure ends the session, and with it the transaction. */
	if (rc == 0)
		rc = run(c, "COMMIT", step, why);
	PQfinish(c);
	return rc;
}

/*
 * create, add_credential, set_password and fix_privileges of a login
 * below ownership: the owner must be a role of tally's of this mesh;
 * the group made or checked, the login made (or its password set), its
 * attributes and membership exactly the group, the access set again.
 */
static int
access_create(struct tl_drv_pg *p, const struct tl_drv_grant *g, char *why)
{
	char grp[PG_NAME_MAX + 1], gmark[PG_MARK_MAX], step[160], other[256],
	    until[80], from_l[PG_SQL_MAX / 4];
	enum pg_mark kind;
	struct pg_ids ids;
	char *gid = NULL;
	int rc, made = 0;

	if ((rc = pg_begin(p, g, 1, &ids, why)) != 0)
		goto out;
	snprintf(step, sizeof(step), "owner role \"%s\"", g->owner);
	if ((rc = role_mark(p, g, g->owner, &kind, other, sizeof(other), NULL,
	    step, why)) != 0)
		goto out;
	if (kind == MARK_MESH) {
		rc = mesh_refused(step, other, why);
		goto out;
	}
	if (kind == MARK_ABSENT || kind == MARK_FOREIGN) {
		rc = tl_drv_why(why, TL_EDRIVER, "%s %s: access is given to "
		    "what tally made", step, kind == MARK_ABSENT ? "does not "
		    "exist" : "is not tally's");
		goto out;
	}
	access_group(g, grp, gmark, sizeof(gmark));
	if ((gid = escape_id(p->conn, grp, why)) == NULL) {
		rc = TL_EINVAL;
		goto out;
	}
	snprintf(step, sizeof(step), "login role \"%s\"", g->login);
	if ((rc = access_group_make(p, grp, gid, gmark, why)) != 0 ||
	    (rc = ensure_login(p, g, &ids, &made, why)) != 0 ||
	    (rc = valid_until(p, until, sizeof(until), why)) != 0 ||
	    (rc = tl_drv_sqlf(from_l, sizeof(from_l), why, " FROM %s",
	    ids.log)) != 0)
		goto out;
	if ((rc = run(p->conn, "BEGIN", "begin", why)) != 0 ||
	    (rc = runf(p->conn, step, why, "GRANT CONNECT ON DATABASE %s TO %s",
	    ids.res, gid)) != 0 ||
	    (rc = runf(p->conn, step, why, "ALTER ROLE %s LOGIN INHERIT "
	    ROLE_ATTRS " CONNECTION LIMIT -1 VALID UNTIL %s", ids.log,
	    until)) != 0 ||
	    (rc = runf(p->conn, step, why, "ALTER ROLE %s RESET ALL",
	    ids.log)) != 0 ||
	    (rc = revoke_each(p->conn, q_memberof, g->login, grp, "REVOKE ",
	    from_l, step, why)) != 0 ||
	    (rc = runf(p->conn, step, why, "GRANT %s TO %s", gid, ids.log)) != 0 ||
	    (rc = run(p->conn, "COMMIT", "commit", why)) != 0) {
		pg_settle(p);
		goto out;
	}
	if ((rc = access_db(p, g, gid, &ids, why)) != 0)
		goto out;
	tl_drv_why(why, 0, "login \"%s\" %s: %s on database \"%s\" of \"%s\" "
	    "(group \"%s\")", g->login, made ? "created" : "existed "
	    "(password set)", g->access == TL_DRV_ACCESS_READ_WRITE ?
	    "read-write" : "read", g->resource, g->owner, grp);
out:
	PQfreemem(gid);
	ids_free(&ids);
	if (p != NULL)
		pg_settle(p);
	return rc;
}

/* A login below ownership: the login, its group, the database. */
static const char q_access[] =
    "SELECT l.oid IS NOT NULL, coalesce(l.rolcanlogin, false),"
    " shobj_description(l.oid, 'pg_authid'),"
    " gr.oid IS NOT NULL, shobj_description(gr.oid, 'pg_authid'),"
    " EXISTS (SELECT 1 FROM pg_auth_members m"
    "  WHERE m.roleid = gr.oid AND m.member = l.oid),"
    " (SELECT string_agg(quote_ident(x.rolname), ', ' ORDER BY x.rolname)"
    "  FROM pg_auth_members m JOIN pg_roles x ON x.oid = m.roleid"
    "  WHERE m.member = l.oid AND m.roleid IS DISTINCT FROM gr.oid),"
    " CASE WHEN gr.oid IS NOT NULL AND d.oid IS NOT NULL"
    "  THEN has_database_privilege(gr.oid, d.oid, 'CONNECT') END,"
    " d.oid IS NOT NULL,"
    " coalesce(l.rolsuper OR l.rolcreatedb OR l.rolcreaterole"
    "  OR l.rolreplication OR l.rolbypassrls, false)"
    " FROM (VALUES (1)) AS x (one)"
    " LEFT JOIN pg_roles l ON l.rolname = $1"
    " LEFT JOIN pg_roles gr ON gr.rolname = $2"
    " LEFT JOIN pg_database d ON d.datname = $3";

/*
 * Inside the database, for group $1 of owner $2, access $3 ('r', 'w'):
 * schema public there, USAGE on it, relations the group cannot read,
 * tables whose writes do not match the access, and whether the owner's
 * default privileges give the group its SELECT.
 */
static const char q_access_db[] =
    "SELECT n.oid IS NOT NULL,"
    " n.oid IS NULL OR has_schema_privilege($1, n.oid, 'USAGE'),"
    " (SELECT count(*) FROM pg_class c WHERE c.relnamespace = n.oid"
    "  AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
    "  AND NOT has_table_privilege($1, c.oid, 'SELECT')),"
    " (SELECT count(*) FROM pg_class c WHERE c.relnamespace = n.oid"
    "  AND c.relkind IN ('r', 'p') AND CASE WHEN $3 = 'w' THEN NOT"
    "  (has_table_privilege($1, c.oid, 'INSERT')"
    "   AND has_table_privilege($1, c.oid, 'UPDATE')"
    "   AND has_table_privilege($1, c.oid, 'DELETE'))"
    "  ELSE has_table_privilege($1, c.oid, 'INSERT')"
    "   OR has_table_privilege($1, c.oid, 'UPDATE')"
    "   OR has_table_privilege($1, c.oid, 'DELETE')"
    "   OR has_table_privilege($1, c.oid, 'TRUNCATE') END),"
    " n.oid IS NULL OR EXISTS (SELECT 1 FROM pg_default_acl da,"
    "  aclexplode(da.defaclacl) a WHERE da.defaclnamespace = n.oid"
    "  AND da.defaclobjtype = 'r' AND a.privilege_type = 'SELECT'"
    "  AND da.defaclrole = (SELECT oid FROM pg_roles WHERE rolname = $2)"
    "  AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1))"
    " FROM (VALUES (1)) AS x (one)"
    " LEFT JOIN pg_namespace n ON n.nspname = 'public'";

/* What the database side of g's access lacks, into priv. */
static int
access_db_check(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const char *grp, struct pg_msg *priv, char *why)
{
	const char *mode = g->access == TL_DRV_ACCESS_READ_WRITE ? "w" : "r";
	PGresult *r;
	PGconn *c;
	long n;
	int rc;

	if ((rc = admin_connect(p, g->resource, &c, why)) != 0)
		return rc;
	rc = query(c, q_access_db, 3, grp, g->owner, mode, &r, "access",
	    why);
	PQfinish(c);
	if (rc != 0)
		return rc;
	if (PQntuples(r) == 1 && col_true(r, 0, 0)) {
		if (!col_true(r, 0, 1))
			madd(priv, "group \"%s\" lacks USAGE on schema public",
			    grp);
		if ((n = strtol(PQgetvalue(r, 0, 2), NULL, 10)) > 0)
			madd(priv, "group \"%s\" cannot read %ld relation(s) "
			    "of schema public", grp, n);
		if ((n = strtol(PQgetvalue(r, 0, 3), NULL, 10)) > 0)
			madd(priv, "group \"%s\" %s %ld table(s) of schema "
			    "public", grp, *mode == 'w' ? "cannot write" :
			    "may write", n);
		if (!col_true(r, 0, 4))
			madd(priv, "the owner's default privileges do not give "
			    "group \"%s\" what \"%s\" makes next", grp,
			    g->owner);
	}
	PQclear(r);
	return 0;
}

static int
access_check(struct tl_drv_pg *p, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	char grp[PG_NAME_MAX + 1], gmark[PG_MARK_MAX], mark[PG_MARK_MAX],
	    detail[TL_WHY_MAX];
	struct pg_msg miss = { .len = 0 }, cred = { .len = 0 },
	    priv = { .len = 0 };
	const char *host, *port, *s;
	struct pg_ids ids;
	PGresult *r = NULL;
	int rc, c;

	*drift = TL_DRIFT_NONE;
	if ((rc = pg_begin(p, g, 1, &ids, why)) != 0)
		goto out;
	access_group(g, grp, gmark, sizeof(gmark));
	mark_text(p, g, mark, sizeof(mark));
	if ((rc = query(p->conn, q_access, 3, g->login, grp, g->resource, &r,
	    "check", why)) != 0)
		goto out;
	if (!col_true(r, 0, 8))
		madd(&miss, "database \"%s\" (of \"%s\")", g->resource,
		    g->owner);
	if (!col_true(r, 0, 0))
		madd(&miss, "login role \"%s\"", g->login);
	if (miss.n > 0)
		goto verdict;
	if ((s = col_str(r, 0, 2)) == NULL || strcmp(s, mark) != 0)
		madd(&priv, "login \"%s\" does not carry this grant's mark",
		    g->login);
	if (!col_true(r, 0, 1))
		madd(&priv, "login \"%s\" cannot log in (NOLOGIN)", g->login);
	if (col_true(r, 0, 9))
		madd(&priv, "login \"%s\" has attributes a grant's login never "
		    "has", g->login);
	if (!col_true(r, 0, 3)) {
		madd(&priv, "group role \"%s\" is gone", grp);
		goto verdict;
	}
	if ((s = col_str(r, 0, 4)) == NULL || strcmp(s, gmark) != 0)
		madd(&priv, "group role \"%s\" is not tally's", grp);
	if (!col_true(r, 0, 5))
		madd(&priv, "login \"%s\" is not a member of \"%s\"", g->login,
		    grp);
	if ((s = col_str(r, 0, 6)) != NULL)
		madd(&priv, "login \"%s\" is also a member of %s", g->login, s);
	if (!col_true(r, 0, 7))
		madd(&priv, "group \"%s\" lacks CONNECT on \"%s\"", grp,
		    g->resource);
	if ((rc = access_db_check(p, g, grp, &priv, why)) != 0)
		goto out;
	if (col_true(r, 0, 1)) {
		host = ep != NULL && ep->host != NULL ? ep->host : p->host;
		port = ep != NULL && ep->port != NULL ? ep->port : p->port;
		/* What it says of the owner's schema is the owner's check's. */
		struct pg_msg scratch = { .len = 0 };

		if ((rc = login_as(p, g, host, port, &c, detail,
		    sizeof(detail), &scratch, why)) != 0)
			goto out;
		if (c == 1)
			madd(&cred, "login \"%s\" does not authenticate: %s",
			    g->login, detail);
		else if (c == 2)
			madd(&priv, "login \"%s\" cannot connect to \"%s\": %s",
			    g->login, g->resource, detail);
	}
verdict:
	if (!pg_drift(&miss, &cred, &priv, drift, why))
		tl_drv_why(why, 0, "login \"%s\" authenticates, %s on database "
		    "\"%s\" through \"%s\", and no more", g->login,
		    g->access == TL_DRV_ACCESS_READ_WRITE ? "read-write" :
		    "read", g->resource, grp);
	rc = 0;
out:
	PQclear(r);
	ids_free(&ids);
	if (p != NULL)
		pg_settle(p);
	return rc;
}

/*
 * revoke and retire_credential of a login below ownership: the login
 * only (the group stays, the other logins' too).  drop 0: NOLOGIN and
 * its sessions ended; 1: dropped, what it made going to the owner.
 */
static int
access_revoke(struct tl_drv_pg *p, const struct tl_drv_grant *g, int drop,
    char *why)
{
	char step[160], other[256];
	enum pg_mark kind;
	struct pg_ids ids;
	PGconn *c;
	int rc, n = 0, found;

	if ((rc = pg_begin(p, g, 0, &ids, why)) != 0)
		goto out;
	snprintf(step, sizeof(step), "login role \"%s\"", g->login);
	if ((rc = role_mark(p, g, g->login, &kind, other, sizeof(other), NULL,
	    step, why)) != 0)
		goto out;
	if (kind == MARK_ABSENT) {
		tl_drv_why(why, 0, "%s was already gone", step);
		goto out;
	}
	if (kind == MARK_MESH) {
		rc = mesh_refused(step, other, why);
		goto out;
	}
	if (kind != MARK_OURS) {
		rc = tl_drv_why(why, TL_EDRIVER, "%s is not this grant's: left "
		    "alone", step);
		goto out;
	}
	if (!drop) {
		if ((rc = runf(p->conn, step, why, "ALTER ROLE %s NOLOGIN",
		    ids.log)) != 0 ||
		    (rc = end_sessions(p, g, &n, step, why)) != 0)
			goto out;
		tl_drv_why(why, 0, "login \"%s\" disabled, %d session(s) "
		    "ended", g->login, n);
		goto out;
	}
	if ((rc = runf(p->conn, step, why, "ALTER ROLE %s NOLOGIN",
	    ids.log)) != 0 || (rc = end_sessions(p, g, &n, step, why)) != 0 ||
	    (rc = exists(p->conn, q_db, g->resource, &found, step, why)) != 0)
		goto out;
	if (found) {
		if ((rc = admin_connect(p, g->resource, &c, why)) != 0)
			goto out;
		rc = runf(c, step, why, "REASSIGN OWNED BY %s TO %s", ids.log,
		    ids.own);
		if (rc == 0)
			rc = runf(c, step, why, "DROP OWNED BY %s", ids.log);
		PQfinish(c);
		if (rc != 0)
			goto out;
	}
	if ((rc = runf(p->conn, step, why, "DROP ROLE %s", ids.log)) != 0)
		goto out;
	tl_drv_why(why, 0, "login \"%s\" dropped, %d session(s) ended",
	    g->login, n);
out:
	ids_free(&ids);
	if (p != NULL)
		pg_settle(p);
	return rc;
}

static int
do_retire_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	int rc;

	if (g->access)
		return access_revoke(h, g, 1, why);
	if ((rc = do_revoke(h, g, 0, why)) != 0)
		return rc;
	return do_retire_login(h, g, why);
}

/*
 * The fence: one row per mesh in tally_fences in the maintenance
 * database (the admin session's).  The raise is one statement, a
 * compare-and-set: the row changes only when the epoch it holds is
 * strictly lower, so of two candidates at one epoch only the first
 * holds it, and the second reads the first's leader back.  Rows of
 * other meshes are not touched (two meshes may administer one server;
 * the table tally_fence of earlier releases, which named no mesh, is
 * no longer read).  The table is made only when a statement says it is
 * missing.
 */
static int
pg_fence_read(struct tl_drv_pg *p, const char *mesh,
    struct tl_drv_fence_held *held, char *why)
{
	const char *vals[1] = { mesh };
	PGresult *r;
	int rc;

	r = PQexecParams(p->conn, "SELECT epoch, leader FROM tally_fences "
	    "WHERE mesh = $1", 1, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);

		rc = st != NULL && strcmp(st, "42P01") == 0 ? 0 :
		    res_err(p->conn, r, "read the fence", why);
		PQclear(r);
		return rc;
	}
	if (PQntuples(r) == 1) {
		held->epoch = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
		snprintf(held->leader, sizeof(held->leader), "%s",
		    PQgetvalue(r, 0, 1));
	}
	PQclear(r);
	return 0;
}

static int
pg_fence(void *h, const struct tl_drv_fence *want,
    struct tl_drv_fence_held *held, char *why)
{
	struct tl_drv_pg *p = h;
	const char *vals[3], *st, *mesh = want->mesh != NULL ? want->mesh : "";
	char e[24], lock[96];
	PGresult *r;
	int rc, tries;

	held->epoch = 0;
	held->leader[0] = '\0';
	if ((rc = pg_ensure(p, why)) != 0)
		return rc;
	/*
	 * Read first: a raise takes the fence lock, and so waits for every
	 * call in flight under it (fence_hold); held at want's epoch or
	 * above, a raise would change nothing.
	 */
	if ((rc = pg_fence_read(p, mesh, held, why)) != 0 ||
	    want->epoch == 0 || held->epoch >= want->epoch)
		return rc;
	held->epoch = 0;
	held->leader[0] = '\0';
	snprintf(e, sizeof(e), "%llu", (unsigned long long)want->epoch);
	vals[0] = mesh;
	vals[1] = e;
	vals[2] = want->leader != NULL ? want->leader : "";
	snprintf(lock, sizeof(lock), "SELECT pg_advisory_xact_lock(%d, "
	    "hashtext($1))", PG_FENCE_LOCK);
	for (tries = 0;; tries++) {
		/* The lock, then the row: both until the raise commits. */
		if ((rc = run(p->conn, "BEGIN", "raise the fence", why)) != 0)
			return rc;
		r = PQexecParams(p->conn, lock, 1, NULL, vals, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			rc = res_err(p->conn, r, "raise the fence", why);
			PQclear(r);
			pg_settle(p);
			return rc;
		}
		PQclear(r);
		r = PQexecParams(p->conn, "INSERT INTO tally_fences (mesh, "
		    "epoch, leader) VALUES ($1, $2::bigint, $3) ON CONFLICT "
		    "(mesh) DO UPDATE SET epoch = EXCLUDED.epoch, leader = "
		    "EXCLUDED.leader WHERE tally_fences.epoch < EXCLUDED.epoch "
		    "RETURNING epoch, leader", 3, NULL, vals, NULL, NULL, 0);
		if (PQresultStatus(r) == PGRES_TUPLES_OK)
			break;
		st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		if (tries > 0 || st == NULL || strcmp(st, "42P01") != 0) {
			rc = res_err(p->conn, r, "raise the fence", why);
			PQclear(r);
			pg_settle(p);
			return rc;
		}
		PQclear(r);
		pg_settle(p);
		/* undefined_table: the first fence on this provider. */
		if ((rc = run(p->conn, "CREATE TABLE IF NOT EXISTS "
		    "tally_fences (mesh text PRIMARY KEY, epoch bigint NOT "
		    "NULL, leader text NOT NULL)", "create tally_fences",
		    why)) != 0)
			return rc;
	}
	if (PQntuples(r) == 1) {
		held->epoch = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
		snprintf(held->leader, sizeof(held->leader), "%s",
		    PQgetvalue(r, 0, 1));
	}
	rc = PQntuples(r) == 1;
	PQclear(r);
	r = PQexec(p->conn, "COMMIT");
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		held->epoch = 0;
		held->leader[0] = '\0';
		rc = res_err(p->conn, r, "raise the fence", why);
		PQclear(r);
		pg_settle(p);
		return rc;
	}
	PQclear(r);
	if (rc)
		return 0;
	/* Held at our epoch or above: a new statement sees by whom. */
	return pg_fence_read(p, mesh, held, why);
}

/*
 * The fence with each change.  The admin session itself takes the
 * mesh's fence lock, a session-level advisory lock (PG_FENCE_LOCK,
 * hashtext(mesh)), in shared mode, reads the fence row after it, and
 * keeps the lock until the call is over: a session-level lock outlives
 * the call's own transactions and its statements that no transaction
 * block may hold (CREATE DATABASE, DROP DATABASE).  Another leader's
 * raise (pg_fence) takes the same lock exclusively in its transaction
 * before it changes the row, so it waits until the call is over: each
 * of the call's statements, on the admin session or any other (the
 * grant's own database), lands before the raise, and a call that reads
 * a fence not its own is refused before it changes anything.  The read
 * is a statement of its own, after the lock is granted, so its snapshot
 * holds every raise that committed before.  No row yet for the mesh:
 * ours is raised first.  While the lock is held the admin session is
 * never replaced (pg_ensure): a session lost during a call ends it.
 */
static int
fence_lock(struct tl_drv_pg *p, const char *fn, char *why)
{
	const char *vals[1] = { p->fmesh };
	char sql[128];
	PGresult *r;
	int rc = 0;

	snprintf(sql, sizeof(sql), "SELECT %s(%d, hashtext($1))", fn,
	    PG_FENCE_LOCK);
	r = PQexecParams(p->conn, sql, 1, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = res_err(p->conn, r, "hold the fence", why);
	PQclear(r);
	return rc;
}

/*
 * Lets go of the fence lock.  A session that cannot say it did is
 * ended (its locks go with it) and made again by the next call.
 */
static void
fence_unlock(struct tl_drv_pg *p)
{
	char dummy[TL_WHY_MAX];

	p->holding = 0;
	if (p->conn == NULL)
		return;
	pg_settle(p);
	if (PQstatus(p->conn) != CONNECTION_OK ||
	    fence_lock(p, "pg_advisory_unlock_shared", dummy) != 0) {
		PQfinish(p->conn);
		p->conn = NULL;
	}
}

static int
fence_hold(struct tl_drv_pg *p, char *why)
{
	struct tl_drv_fence want = { p->fmesh, p->fepoch, p->fleader };
	struct tl_drv_fence_held held;
	const char *vals[1] = { p->fmesh }, *st;
	PGresult *r;
	int rc, tries, relost = 0;

	if (!p->fenced)
		return 0;
	for (tries = 0;; tries++) {
		if ((rc = pg_ensure(p, why)) != 0)
			return rc;
		pg_settle(p);
		/* A session the server ended since the last call: once more. */
		if ((rc = fence_lock(p, "pg_advisory_lock_shared", why)) != 0 &&
		    PQstatus(p->conn) != CONNECTION_OK && !relost++) {
			tries--;
			continue;
		}
		if (rc != 0)
			return rc;
		p->holding = 1;
		held.epoch = 0;
		held.leader[0] = '\0';
		r = PQexecParams(p->conn, "SELECT epoch, leader FROM "
		    "tally_fences WHERE mesh = $1", 1, NULL, vals, NULL, NULL,
		    0);
		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
			held.epoch = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
			snprintf(held.leader, sizeof(held.leader), "%s",
			    PQgetvalue(r, 0, 1));
			PQclear(r);
			break;
		}
		st = PQresultStatus(r) == PGRES_TUPLES_OK ? "" :
		    PQresultErrorField(r, PG_DIAG_SQLSTATE);
		if (st == NULL || (st[0] != '\0' && strcmp(st, "42P01") != 0)) {
			rc = res_err(p->conn, r, "hold the fence", why);
			PQclear(r);
			fence_unlock(p);
			return rc;
		}
		PQclear(r);
		fence_unlock(p);
		if (tries > 0)
			return tl_drv_why(why, TL_EDRIVER, "hold the fence: "
			    "mesh %.12s has no fence row after its raise",
			    p->fmesh);
		if ((rc = pg_fence(p, &want, &held, why)) != 0)
			return rc;
	}
	if (tl_drv_fence_ours(&want, &held))
		return 0;
	fence_unlock(p);
	return tl_drv_why(why, TL_EREFUSED, "deposed: PostgreSQL holds the "
	    "fence of mesh %.12s at epoch %llu for leader %.12s, this session "
	    "is leader %.12s at epoch %llu: nothing changed", p->fmesh,
	    (unsigned long long)held.epoch, held.leader, p->fleader,
	    (unsigned long long)p->fepoch);
}

/*
 * Ends the hold; rc: the call's, kept unless the session holding the
 * lock was lost during the call (then the call may have been cut short
 * of what it says).
 */
static int
fence_release(struct tl_drv_pg *p, int rc, char *why)
{
	int lost;

	if (!p->fenced)
		return rc;
	lost = p->conn == NULL || PQstatus(p->conn) != CONNECTION_OK;
	fence_unlock(p);
	if (lost && rc == 0)
		return tl_drv_why(why, TL_EUNREACH, "the admin session holding "
		    "the fence was lost during the call");
	return rc;
}

/* The changing operations: each one call under fence_hold. */
static int
fenced(void *h, const struct tl_drv_grant *g, int arg,
    int (*fn)(void *, const struct tl_drv_grant *, int, char *), char *why)
{
	char dummy[TL_WHY_MAX];
	struct tl_drv_pg *p = h;
	int rc;

	if (why == NULL)
		why = dummy;
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
f_freeze(void *h, const struct tl_drv_grant *g, int on, char *why)
{
	return do_freeze(h, g, on, why);
}

static int
pg_create(void *h, const struct tl_drv_grant *g, char *why)
{
	return fenced(h, g, 0, f_create, why);
}

static int
pg_add_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	return fenced(h, g, 0, f_create, why);
}

static int
pg_set_password(void *h, const struct tl_drv_grant *g, char *why)
{
	return fenced(h, g, 0, f_set_password, why);
}

static int
pg_fix_privileges(void *h, const struct tl_drv_grant *g, char *why)
{
	return fenced(h, g, 0, f_fix_privileges, why);
}

static int
pg_retire_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	return fenced(h, g, 0, f_retire_credential, why);
}

static int
pg_revoke(void *h, const struct tl_drv_grant *g, int drop, char *why)
{
	return fenced(h, g, drop, f_revoke, why);
}

static int
pg_freeze(void *h, const struct tl_drv_grant *g, int on, char *why)
{
	return fenced(h, g, on, f_freeze, why);
}

static int
pg_set_admin_password(void *h, const char *user, const char *password,
    char *why)
{
	char dummy[TL_WHY_MAX];
	struct tl_drv_pg *p = h;
	int rc;

	if (why == NULL)
		why = dummy;
	if (p == NULL)
		return tl_drv_why(why, TL_EINVAL, "driver not open");
	if ((rc = fence_hold(p, why)) != 0)
		return rc;
	return fence_release(p, do_set_admin_password(h, user, password, why),
	    why);
}

const struct tl_drv_ops tl_drv_postgres = {
	.decl = &tl_drv_postgres_decl,
	.open = pg_open,
	.close = pg_close,
	.create = pg_create,
	.check = pg_check,
	.check_bulk = pg_check_bulk,
	.set_password = pg_set_password,
	.fix_privileges = pg_fix_privileges,
	.migrate = tl_drv_pg_migrate,
	.revoke = pg_revoke,
	.size = pg_size,
	.set_admin_password = pg_set_admin_password,
	.freeze = pg_freeze,
	.copy = tl_drv_pg_copy,
	.add_credential = pg_add_credential,
	.retire_credential = pg_retire_credential,
	.sessions = pg_sessions,
	.fence = pg_fence,
};
