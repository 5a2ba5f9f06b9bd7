/*
 * pg_copy.c - moving a grant's data to another PostgreSQL (tally rebind
 * --migrate): pg_dump -Fc on the source piped into pg_restore on the
 * target, then the rows of every table counted on both sides.
 *
 *   pg_dump -Fc --no-owner --no-acl --lock-wait-timeout=60s
 *                                                   (source, as its admin)
 *   pg_restore --no-owner --no-acl --role=OWNER --single-transaction
 *              --clean --if-exists -d TARGET        (target, as its admin)
 *
 * --role makes every restored object the target owner role's, as if
 * the consumer had made it (the login SETs ROLE to it); --single-
 * transaction makes the restore all or nothing; --clean --if-exists
 * lets a copy that a crash interrupted after its commit run again and
 * give the same result.  A copy runs once at a time into a target: its
 * children die with the tallyd that started them (PR_SET_PDEATHSIG), and
 * before a restore the sessions an earlier, killed copy left on the
 * target are ended and waited for (clear_target), so a restarted move
 * never restores beside a restore still running.  The source must not change during the copy:
 * the reactor freezes it first (freeze in postgres.c), so the counts
 * compare like with like.
 *
 * Safety: passwords reach the children only through PGPASSWORD in
 * their own environment (never argv, never the parent's environment);
 * every other PG* variable of the parent is dropped so nothing but
 * what is set here steers them; the target database name is passed as
 * a quoted conninfo value (never a string pg_restore could expand into
 * other parameters).  The binaries are $TALLY_PG_BINDIR/pg_dump, else
 * /usr/lib/postgresql/15/bin, else the PATH's.  Their stderr (the
 * reason of a failure) never holds a password.
 *
 * An admin with a client certificate (admin-cert, admin-key) presents
 * it on every session of the copy, its own and its child's: the pair is
 * checked first, then put in two memfds (tlsclient.h) for the copy's
 * length, named to libpq as sslcert/sslkey and to the child as
 * PGSSLCERT/PGSSLKEY, the child alone keeping its side's two open
 * across exec (the names are /proc/self/fd/N, N the same in the child):
 * the key never reaches a disk or another side's child.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <libpq-fe.h>

#include "core/error.h"
#include "core/secret.h"
#include "driver.h"
#include "postgres-internal.h"
#include "tlsclient.h"
#include "util.h"

extern char **environ;

int	tl_drv_pg_copy(const struct tl_drv_admin *from,
	    const struct tl_drv_grant *gfrom, const struct tl_drv_admin *to,
	    const struct tl_drv_grant *gto, char *tables, size_t cap,
	    char *why);

#define PG_BINDIR_DEFAULT	"/usr/lib/postgresql/15/bin"
#define TAIL_MAX		400	/* bytes of a child's stderr kept */

/* Finds a PostgreSQL client binary; 0 with its path in out. */
static int
find_tool(const char *name, char *out, size_t cap)
{
	const char *dir = getenv("TALLY_PG_BINDIR"), *path, *p, *e;

	if (dir != NULL && *dir != '\0') {
		snprintf(out, cap, "%s/%s", dir, name);
		return access(out, X_OK) == 0 ? 0 : ENOENT;
	}
	snprintf(out, cap, "%s/%s", PG_BINDIR_DEFAULT, name);
	if (access(out, X_OK) == 0)
		return 0;
	if ((path = getenv("PATH")) == NULL)
		return ENOENT;
	for (p = path; *p != '\0'; p = *e ? e + 1 : e) {
		size_t n;

		e = strchr(p, ':');
		if (e == NULL)
			e = p + strlen(p);
		n = (size_t)(e - p);
		if (n == 0)
			continue;
		snprintf(out, cap, "%.*s/%s", (int)n, p, name);
		if (access(out, X_OK) == 0)
			return 0;
	}
	return ENOENT;
}

/*
 * a's client certificate, checked, into cc (TL_DRV_CERT_FILES_INIT
 * before): 0 (none is 0 too), or TL_EINVAL (the pair, or tls off),
 * TL_EDRIVER with why.
 */
static int
cc_open(const struct tl_drv_admin *a, const char *side,
    struct tl_drv_cert_files *cc, char *why)
{
	char w[TL_WHY_MAX];
	int have, rc;

	if ((rc = tl_drv_client_cert_check(a->client_cert, a->client_key,
	    &have, w)) != 0)
		return tl_drv_why(why, rc, "copy, %s: %s", side, w);
	if (!have)
		return 0;
	if (strcmp(tl_drv_pg_sslmode(a->settings, a->host), "disable") == 0)
		return tl_drv_why(why, TL_EINVAL, "copy, %s: admin-cert needs "
		    "tls verify or require (tls is off)", side);
	if ((rc = tl_drv_cert_files_open(cc, a->client_cert, a->client_key,
	    w)) != 0)
		return tl_drv_why(why, rc, "copy, %s: %s", side, w);
	return 0;
}

/*
 * kw/val from i on (room for 2 and the NULL): sslcert and sslkey when
 * cc has a certificate.
 */
static void
cc_params(const struct tl_drv_cert_files *cc, const char **kw, const char **val,
    size_t i)
{
	if (cc->certfd < 0)
		return;
	kw[i] = "sslcert";
	val[i++] = cc->cert;
	kw[i] = "sslkey";
	val[i] = cc->key;
}

/* A child's environment: the parent's minus PG*, plus what is given. */
#define CENV_MAX	12		/* PG* variables a child gets, at most */
struct cenv {
	char	**v;
	size_t	  n;
	char	 *owned[CENV_MAX];	/* the PG* strings made here (one secret) */
	size_t	  nowned;
};

static int
cenv_add(struct cenv *ce, const char *k, const char *val)
{
	size_t len;
	char *s;

	if (val == NULL || *val == '\0' || ce->nowned == CENV_MAX)
		return 0;
	len = strlen(k) + 1 + strlen(val) + 1;
	if ((s = malloc(len)) == NULL)
		return ENOMEM;
	snprintf(s, len, "%s=%s", k, val);
	ce->owned[ce->nowned++] = s;
	ce->v[ce->n++] = s;
	ce->v[ce->n] = NULL;
	return 0;
}

static void
cenv_free(struct cenv *ce)
{
	size_t i;

	for (i = 0; i < ce->nowned; i++) {
		tl_secret_wipe(ce->owned[i], strlen(ce->owned[i]));
		free(ce->owned[i]);
	}
	free(ce->v);
	memset(ce, 0, sizeof(*ce));
}

static int
cenv_make(struct cenv *ce, const struct tl_drv_admin *a,
    const struct tl_drv_cert_files *cc, const char *db)
{
	size_t i, n = 0;
	int rc;

	memset(ce, 0, sizeof(*ce));
	for (i = 0; environ != NULL && environ[i] != NULL; i++)
		n++;
	if ((ce->v = calloc(n + CENV_MAX + 1, sizeof(char *))) == NULL)
		return ENOMEM;
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], "PG", 2) != 0)
			ce->v[ce->n++] = environ[i];
	if ((rc = cenv_add(ce, "PGHOST", a->host)) != 0 ||
	    (rc = cenv_add(ce, "PGPORT", a->port)) != 0 ||
	    (rc = cenv_add(ce, "PGUSER", a->user)) != 0 ||
	    (rc = cenv_add(ce, "PGPASSWORD", a->password)) != 0 ||
	    (rc = cenv_add(ce, "PGDATABASE", db)) != 0 ||
	    (rc = cenv_add(ce, "PGCONNECT_TIMEOUT", "10")) != 0 ||
	    (rc = cenv_add(ce, "PGAPPNAME", "tally-copy")) != 0 ||
	    (rc = cenv_add(ce, "PGSSLMODE", tl_drv_pg_sslmode(a->settings,
	    a->host))) != 0 ||
	    (a->ca_file != NULL &&
	    (rc = cenv_add(ce, "PGSSLROOTCERT", a->ca_file)) != 0) ||
	    (rc = cenv_add(ce, "PGSSLCERT", cc->cert)) != 0 ||
	    (rc = cenv_add(ce, "PGSSLKEY", cc->key)) != 0) {
		cenv_free(ce);
		return rc;
	}
	return 0;
}

/* Keeps the last TAIL_MAX bytes a child wrote to stderr. */
struct tail {
	int	fd;
	char	buf[TAIL_MAX + 1];
	size_t	len;
};

static void
tail_read(struct tail *t)
{
	char chunk[1024];
	ssize_t n = read(t->fd, chunk, sizeof(chunk));

	if (n <= 0) {
		if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			close(t->fd);
			t->fd = -1;
		}
		return;
	}
	if ((size_t)n >= TAIL_MAX) {
		memcpy(t->buf, chunk + n - TAIL_MAX, TAIL_MAX);
		t->len = TAIL_MAX;
	} else {
		if (t->len + (size_t)n > TAIL_MAX) {
			size_t drop = t->len + (size_t)n - TAIL_MAX;

			memmove(t->buf, t->buf + drop, t->len - drop);
			t->len -= drop;
		}
		memcpy(t->buf + t->len, chunk, (size_t)n);
		t->len += (size_t)n;
	}
	t->buf[t->len] = '\0';
}

/* The tail on one line, for a reason. */
static void
tail_line(const struct tail *t, char *out, size_t cap)
{
	size_t i, o = 0;

	for (i = 0; i < t->len && o + 1 < cap; i++)
		out[o++] = t->buf[i] == '\n' || t->buf[i] == '\r' ? ' ' :
		    t->buf[i];
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
}

static int
cloexec_pipe(int fd[2])
{
	if (pipe(fd) != 0)
		return errno;
	fcntl(fd[0], F_SETFD, FD_CLOEXEC);
	fcntl(fd[1], F_SETFD, FD_CLOEXEC);
	return 0;
}

/*
 * Starts path with argv and envp; stdin from in (-1: /dev/null), stdout
 * to out, stderr to err, cc's memfds kept open across exec (their names
 * in envp).  Only async-signal-safe calls in the child.
 */
static pid_t
spawn(const char *path, char *const argv[], char *const envp[], int in,
    int out, int err, const struct tl_drv_cert_files *cc)
{
	pid_t parent = getpid(), pid = fork();

	if (pid != 0)
		return pid;
#ifdef __linux__
	/*
	 * A copy outlives no tallyd: killed, its pg_restore would go on
	 * while the restarted one starts a second into the same target.
	 */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(126);
#else
	(void)parent;
#endif
	if (in < 0)
		in = open("/dev/null", O_RDONLY);
	if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(126);
	if (cc->certfd >= 0 && (fcntl(cc->certfd, F_SETFD, 0) != 0 ||
	    fcntl(cc->keyfd, F_SETFD, 0) != 0))
		_exit(126);
	execve(path, argv, envp);
	_exit(127);
}

static void
status_text(int st, char *out, size_t cap)
{
	if (WIFEXITED(st))
		snprintf(out, cap, "exited %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(out, cap, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(out, cap, "ended (status %d)", st);
}

/* A conninfo value in single quotes ('\' and '\'' escaped). */
static int
conninfo_dbname(const char *db, char *out, size_t cap)
{
	size_t o = 0;
	const char *p;

	if (cap < 10)
		return TL_ETOOBIG;
	memcpy(out, "dbname='", 8);
	o = 8;
	for (p = db; *p != '\0'; p++) {
		if (o + 4 >= cap)
			return TL_ETOOBIG;
		if (*p == '\'' || *p == '\\')
			out[o++] = '\\';
		out[o++] = *p;
	}
	out[o++] = '\'';
	out[o] = '\0';
	return 0;
}

/*
 * Ends every session of an earlier copy (application_name tally-copy)
 * still on the target database, and waits until they are gone: a run
 * killed mid-restore leaves its backend working until the server sees
 * the client gone, and two restores into one target collide (a unique
 * violation on pg_type).  What an ended one did is rolled back
 * (--single-transaction), so the next restore starts from a clean
 * target; one that committed is replaced (--clean --if-exists).
 */
static int
clear_target(const struct tl_drv_admin *a, const struct tl_drv_cert_files *cc,
    const char *db, char *why)
{
	const char *kw[] = { "host", "port", "user", "password", "dbname",
	    "connect_timeout", "application_name", "sslmode", "sslrootcert",
	    NULL, NULL, NULL };
	const char *val[] = { a->host, a->port, a->user, a->password,
	    tl_drv_pg_admin_db(a->settings),
	    "10", "tally-copy-clear", tl_drv_pg_sslmode(a->settings, a->host),
	    a->ca_file, NULL, NULL, NULL };
	const char *pv[1] = { db };
	PGconn *conn;
	PGresult *r;
	int i, rc = 0;

	cc_params(cc, kw, val, 9);
	conn = PQconnectdbParams(kw, val, 0);
	if (PQstatus(conn) != CONNECTION_OK) {
		rc = tl_drv_why(why, TL_EUNREACH, "before the copy into \"%s\" "
		    "at %s:%s: %s", db, a->host ? a->host : "", a->port ?
		    a->port : "", PQerrorMessage(conn));
		PQfinish(conn);
		return rc;
	}
	for (i = 0; i < 100; i++) {
		r = PQexecParams(conn, "SELECT count(pg_terminate_backend(pid)) "
		    "FROM pg_stat_activity WHERE datname = $1 AND "
		    "application_name = 'tally-copy' AND pid <> "
		    "pg_backend_pid()", 1, NULL, pv, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			rc = tl_drv_why(why, TL_EDRIVER, "ending an earlier "
			    "copy's sessions on \"%s\": %s", db,
			    PQerrorMessage(conn));
			PQclear(r);
			break;
		}
		if (strcmp(PQgetvalue(r, 0, 0), "0") == 0) {
			PQclear(r);
			break;
		}
		PQclear(r);
		nanosleep(&(struct timespec){ 0, 100000000L }, NULL);
	}
	if (rc == 0 && i == 100)
		rc = tl_drv_why(why, TL_EDRIVER, "an earlier copy into \"%s\" "
		    "is still running after 10 s", db);
	PQfinish(conn);
	return rc;
}

/* pg_dump | pg_restore, the way the comment at the top says. */
static int
dump_restore(const struct tl_drv_admin *from,
    const struct tl_drv_cert_files *cf, const struct tl_drv_grant *gf,
    const struct tl_drv_admin *to, const struct tl_drv_cert_files *ct,
    const struct tl_drv_grant *gt, char *why)
{
	char dump[1024], restore[1024], target[200], role[100], st1[64],
	    st2[64], line[TAIL_MAX + 1];
	struct cenv e1, e2;
	struct tail t1 = { -1, "", 0 }, t2 = { -1, "", 0 };
	int data[2] = { -1, -1 }, err1[2] = { -1, -1 }, err2[2] = { -1, -1 };
	pid_t p1 = -1, p2 = -1;
	int s1 = 0, s2 = 0, rc;

	if (find_tool("pg_dump", dump, sizeof(dump)) != 0 ||
	    find_tool("pg_restore", restore, sizeof(restore)) != 0)
		return tl_drv_why(why, TL_EDRIVER, "pg_dump or pg_restore not "
		    "found (looked in $TALLY_PG_BINDIR, %s and the PATH)",
		    PG_BINDIR_DEFAULT);
	if (conninfo_dbname(gt->resource, target, sizeof(target)) != 0)
		return tl_drv_why(why, TL_EINVAL, "database name too long");
	snprintf(role, sizeof(role), "--role=%s", gt->owner);
	if ((rc = cenv_make(&e1, from, cf, gf->resource)) != 0)
		return tl_drv_why(why, rc, "out of memory");
	if ((rc = cenv_make(&e2, to, ct, NULL)) != 0) {
		cenv_free(&e1);
		return tl_drv_why(why, rc, "out of memory");
	}
	{
		/* A lock held elsewhere fails the copy, never hangs it. */
		char *const a1[] = { dump, "--format=custom", "--no-owner",
		    "--no-acl", "--no-password", "--lock-wait-timeout=60s",
		    NULL };
		char *const a2[] = { restore, "--no-owner", "--no-acl", role,
		    "--single-transaction", "--clean", "--if-exists",
		    "--no-password", "-d", target, NULL };

		if ((rc = cloexec_pipe(data)) != 0 ||
		    (rc = cloexec_pipe(err1)) != 0 ||
		    (rc = cloexec_pipe(err2)) != 0) {
			tl_drv_why(why, TL_EDRIVER, "pipe: %s", strerror(rc));
			rc = TL_EDRIVER;
			goto out;
		}
		if ((p1 = spawn(dump, a1, e1.v, -1, data[1], err1[1],
		    cf)) < 0) {
			rc = tl_drv_why(why, TL_EDRIVER, "fork: %s",
			    strerror(errno));
			goto out;
		}
		if ((p2 = spawn(restore, a2, e2.v, data[0], err2[1],
		    err2[1], ct)) < 0) {
			rc = tl_drv_why(why, TL_EDRIVER, "fork: %s",
			    strerror(errno));
			kill(p1, SIGTERM);
			goto out;
		}
	}
	close(data[0]);
	close(data[1]);
	close(err1[1]);
	close(err2[1]);
	data[0] = data[1] = err1[1] = err2[1] = -1;
	t1.fd = err1[0];
	t2.fd = err2[0];
	err1[0] = err2[0] = -1;
	while (t1.fd >= 0 || t2.fd >= 0) {
		struct pollfd pf[2];
		nfds_t n = 0;

		if (t1.fd >= 0) {
			pf[n].fd = t1.fd;
			pf[n++].events = POLLIN;
		}
		if (t2.fd >= 0) {
			pf[n].fd = t2.fd;
			pf[n++].events = POLLIN;
		}
		if (poll(pf, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		n = 0;
		if (t1.fd >= 0 && pf[n++].revents != 0)
			tail_read(&t1);
		if (t2.fd >= 0 && pf[n].revents != 0)
			tail_read(&t2);
	}
	while (waitpid(p1, &s1, 0) < 0 && errno == EINTR)
		;
	while (waitpid(p2, &s2, 0) < 0 && errno == EINTR)
		;
	p1 = p2 = -1;
	rc = 0;
	{
		/* Both reasons when both failed: either may be the cause. */
		char m1[TL_WHY_MAX] = "", m2[TL_WHY_MAX] = "";
		int bad1 = !WIFEXITED(s1) || WEXITSTATUS(s1) != 0;
		int bad2 = !WIFEXITED(s2) || WEXITSTATUS(s2) != 0;

		if (bad1) {
			status_text(s1, st1, sizeof(st1));
			tail_line(&t1, line, sizeof(line));
			tl_drv_why(m1, 0, "pg_dump of \"%s\" at %s:%s %s: "
			    "%.200s", gf->resource, from->host ? from->host :
			    "", from->port ? from->port : "", st1, line[0] ?
			    line : "(no message)");
		}
		if (bad2) {
			status_text(s2, st2, sizeof(st2));
			tail_line(&t2, line, sizeof(line));
			tl_drv_why(m2, 0, "pg_restore into \"%s\" at %s:%s %s: "
			    "%.200s", gt->resource, to->host ? to->host : "",
			    to->port ? to->port : "", st2, line[0] ? line :
			    "(no message)");
		}
		if (bad1 || bad2)
			rc = tl_drv_why(why, TL_EDRIVER, "%s%s%s", m1,
			    bad1 && bad2 ? "; " : "", m2);
	}
out:
	if (p1 > 0)
		while (waitpid(p1, &s1, 0) < 0 && errno == EINTR)
			;
	if (p2 > 0)
		while (waitpid(p2, &s2, 0) < 0 && errno == EINTR)
			;
	if (t1.fd >= 0)
		close(t1.fd);
	if (t2.fd >= 0)
		close(t2.fd);
	{
		int *fds[] = { data, err1, err2 };
		size_t i;

		for (i = 0; i < 3; i++) {
			if (fds[i][0] >= 0)
				close(fds[i][0]);
			if (fds[i][1] >= 0)
				close(fds[i][1]);
		}
	}
	cenv_free(&e1);
	cenv_free(&e2);
	return rc;
}

/* Table counts of one database, as "schema.table" -> rows. */
struct counts {
	char		(*name)[140];
	long long	*rows;
	size_t		 n;
};

static void
counts_free(struct counts *c)
{
	free(c->name);
	free(c->rows);
	memset(c, 0, sizeof(*c));
}

static const char q_tables[] =
    "SELECT n.nspname, c.relname FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.relkind IN ('r', 'p')"
    " AND n.nspname <> 'information_schema'"
    " AND n.nspname NOT LIKE 'pg\\_%'"
    " ORDER BY 1, 2";

static int
count_rows(const struct tl_drv_admin *a, const struct tl_drv_cert_files *cc,
    const char *db, struct counts *c, char *why)
{
	const char *kw[] = { "host", "port", "user", "password", "dbname",
	    "connect_timeout", "application_name", "options", "sslmode",
	    "sslrootcert", NULL, NULL, NULL };
	const char *val[] = { a->host, a->port, a->user, a->password, db,
	    "10", "tally-copy", "-c default_transaction_read_only=on",
	    tl_drv_pg_sslmode(a->settings, a->host), a->ca_file, NULL, NULL,
	    NULL };
	PGconn *conn;
	PGresult *r;
	int i, rc = 0;

	cc_params(cc, kw, val, 10);
	memset(c, 0, sizeof(*c));
	conn = PQconnectdbParams(kw, val, 0);
	if (PQstatus(conn) != CONNECTION_OK) {
		rc = tl_drv_why(why, TL_EUNREACH, "counting rows in \"%s\" at "
		    "%s:%s: %s", db, a->host ? a->host : "", a->port ? a->port :
		    "", PQerrorMessage(conn));
		PQfinish(conn);
		return rc;
	}
	r = PQexec(conn, q_tables);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = tl_drv_why(why, TL_EDRIVER, "listing tables of \"%s\": %s",
		    db, PQerrorMessage(conn));
		goto out;
	}
	c->n = (size_t)PQntuples(r);
	c->name = calloc(c->n + 1, sizeof(*c->name));
	c->rows = calloc(c->n + 1, sizeof(*c->rows));
	if (c->name == NULL || c->rows == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < PQntuples(r) && rc == 0; i++) {
		const char *ns = PQgetvalue(r, i, 0), *rel = PQgetvalue(r, i, 1);
		char *qn = PQescapeIdentifier(conn, ns, strlen(ns));
		char *qr = PQescapeIdentifier(conn, rel, strlen(rel));
		char sql[600];
		PGresult *cr;

		snprintf(c->name[i], sizeof(c->name[i]), "%s.%s", ns, rel);
		if (qn == NULL || qr == NULL) {
			rc = tl_drv_why(why, TL_EDRIVER, "cannot quote %s.%s",
			    ns, rel);
		} else {
			snprintf(sql, sizeof(sql), "SELECT count(*) FROM "
			    "ONLY %s.%s", qn, qr);
			cr = PQexec(conn, sql);
			if (PQresultStatus(cr) != PGRES_TUPLES_OK)
				rc = tl_drv_why(why, TL_EDRIVER, "counting "
				    "%s.%s in \"%s\": %s", ns, rel, db,
				    PQerrorMessage(conn));
			else
				c->rows[i] = strtoll(PQgetvalue(cr, 0, 0),
				    NULL, 10);
			PQclear(cr);
		}
		PQfreemem(qn);
		PQfreemem(qr);
	}
out:
	PQclear(r);
	PQfinish(conn);
	if (rc != 0)
		counts_free(c);
	return rc;
}

/* A JSON string body: the names are catalog names, escaped anyway. */
static size_t
json_str(char *out, size_t cap, const char *s)
{
	size_t o = 0;

	for (; *s != '\0' && o + 7 < cap; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20)
			o += (size_t)snprintf(out + o, cap - o, "\\u%04x", ch);
		else
			out[o++] = (char)ch;
	}
	out[o] = '\0';
	return o;
}

int
tl_drv_pg_copy(const struct tl_drv_admin *from, const struct tl_drv_grant *gf,
    const struct tl_drv_admin *to, const struct tl_drv_grant *gt,
    char *tables, size_t cap, char *why)
{
	struct tl_drv_cert_files cf = TL_DRV_CERT_FILES_INIT;
	struct tl_drv_cert_files ct = TL_DRV_CERT_FILES_INIT;
	struct counts a, b;
	size_t i, o;
	long long total = 0;
	int rc;

	if (cap < 3)
		return tl_drv_why(why, TL_ETOOBIG, "no room for the table "
		    "counts");
	tables[0] = '\0';
	if (gf == NULL || gt == NULL || gf->resource == NULL ||
	    gt->resource == NULL || gt->owner == NULL ||
	    *gf->resource == '\0' || *gt->resource == '\0' ||
	    *gt->owner == '\0' || strlen(gt->resource) > 63 ||
	    strlen(gt->owner) > 63)
		return tl_drv_why(why, TL_EINVAL, "copy: bad database or role "
		    "name");
	if (strcmp(gt->resource, "template0") == 0 ||
	    strcmp(gt->resource, "template1") == 0 ||
	    strcmp(gt->resource, "postgres") == 0 ||
	    strcmp(gt->resource, tl_drv_pg_admin_db(to->settings)) == 0)
		return tl_drv_why(why, TL_EINVAL, "refusing to copy into "
		    "database \"%s\"", gt->resource);
	if (strcmp(gf->resource, gt->resource) == 0 && from->host != NULL &&
	    to->host != NULL && strcmp(from->host, to->host) == 0 &&
	    from->port != NULL && to->port != NULL &&
	    strcmp(from->port, to->port) == 0)
		return tl_drv_why(why, TL_EINVAL, "refusing to copy database "
		    "\"%s\" onto itself", gf->resource);
	if ((rc = cc_open(from, "source", &cf, why)) != 0 ||
	    (rc = cc_open(to, "target", &ct, why)) != 0 ||
	    (rc = clear_target(to, &ct, gt->resource, why)) != 0 ||
	    (rc = dump_restore(from, &cf, gf, to, &ct, gt, why)) != 0)
		goto certs;
	if ((rc = count_rows(from, &cf, gf->resource, &a, why)) != 0)
		goto certs;
	if ((rc = count_rows(to, &ct, gt->resource, &b, why)) != 0) {
		counts_free(&a);
		goto certs;
	}
	for (i = 0; i < a.n || i < b.n; i++) {
		if (i >= a.n || i >= b.n || strcmp(a.name[i], b.name[i]) != 0) {
			rc = tl_drv_why(why, TL_EDRIVER, "the copy's tables "
			    "differ from the source's: %s %s", i < a.n ?
			    a.name[i] : i < b.n ? b.name[i] : "?", i < a.n ? (i
			    < b.n ? "is not where expected in the copy" :
			    "is missing from the copy") : "is not in the "
			    "source");
			goto out;
		}
		if (a.rows[i] != b.rows[i]) {
			rc = tl_drv_why(why, TL_EDRIVER, "row counts differ "
			    "after the copy: %s has %lld row(s) in \"%s\" and "
			    "%lld in \"%s\"", a.name[i], a.rows[i],
			    gf->resource, b.rows[i], gt->resource);
			goto out;
		}
	}
	o = 0;
	tables[o++] = '{';
	for (i = 0; i < a.n; i++) {
		char name[300], num[32];
		size_t need;

		json_str(name, sizeof(name), a.name[i]);
		snprintf(num, sizeof(num), "%lld", a.rows[i]);
		need = strlen(name) + strlen(num) + 5;
		if (o + need + 2 > cap) {
			tables[0] = '\0';
			rc = tl_drv_why(why, TL_ETOOBIG, "%zu tables: their "
			    "counts do not fit in %zu bytes", a.n, cap);
			goto out;
		}
		o += (size_t)snprintf(tables + o, cap - o, "%s\"%s\":%s",
		    i ? "," : "", name, num);
		total += a.rows[i];
	}
	tables[o++] = '}';
	tables[o] = '\0';
	tl_drv_why(why, 0, "copied \"%s\" into \"%s\": %zu table(s), %lld "
	    "row(s), counts match", gf->resource, gt->resource, a.n, total);
out:
	counts_free(&a);
	counts_free(&b);
certs:
	tl_drv_cert_files_close(&cf);
	tl_drv_cert_files_close(&ct);
	return rc;
}
