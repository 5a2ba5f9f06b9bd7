/*
 * mariadb_migrate.c - consumer-owned migrations in MariaDB's dialect,
 * run with the consumer's own credential in the consumer's database.
 *
 * MariaDB commits DDL implicitly (CREATE, ALTER, DROP, RENAME, TRUNCATE
 * each end the transaction they are in), so a file cannot be all or
 * nothing the way PostgreSQL's is.  Instead the file is split into its
 * statements here and each is recorded in the database's own history
 * table, tally_schema_history (file, checksum, stmt, state), so a file
 * interrupted half way resumes at the statement after the last one
 * recorded and never runs one twice:
 *
 *   DML (SELECT, INSERT, UPDATE, DELETE, REPLACE, WITH, CALL, DO, SET)
 *	runs inside START TRANSACTION ... COMMIT together with its history
 *	row: both or neither.
 *   DDL (anything else) cannot share a transaction with its row: a row
 *	in state 'started' is committed first, the statement runs, and the
 *	row becomes 'done'.  When the server reports the statement failed
 *	(an error, the time limit, a cancel) the row is deleted: nothing
 *	ran.  A row left 'started' (tallyd or the connection died while
 *	the DDL ran, or between its commit and the row's) means tally
 *	cannot know whether it ran: the file is refused at that statement's
 *	line, for a person to look and then delete the row (to run it) or
 *	mark it 'done' (to skip it).  It is refused, never repeated.
 *   The file's own row (stmt 0) is written last: it is what *already
 *	reads.
 *
 * Refused before anything runs, with the line: DELIMITER (a client
 * command), compound statements (BEGIN ... END bodies hold semicolons
 * the splitter cannot place safely), executable comments (slash-star-bang),
 * transaction control (START TRANSACTION, BEGIN, COMMIT, ROLLBACK,
 * SAVEPOINT, XA, LOCK/UNLOCK TABLES) and USE, and unterminated quotes
 * and comments.  Quotes follow the server's default rules: '...' and
 * "..." with backslash escapes and doubled quotes, `...` with doubled
 * backquotes; comments are "-- ", "#" and slash-star ones.
 *
 * The time limit is the server's: every statement runs with the
 * session's max_statement_time set to what is left of m->timeout_s
 * (the server interrupts it, error 1969); a watchdog thread on a second
 * connection of the consumer also sends KILL QUERY when the limit has
 * passed (DDL the server does not interrupt by itself) or *m->cancel
 * becomes nonzero, checked every MIG_POLL_MS.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <mysql.h>
#include <mysqld_error.h>
#include <errmsg.h>

#include "core/error.h"
#include "driver.h"
#include "mariadb-internal.h"
#include "util.h"

#define MIG_POLL_MS	20
#define MIG_SQL_MAX	1024

/* --- splitting ---------------------------------------------------------- */

static int
word_at(const char *s, size_t n, size_t i, const char *w)
{
	size_t l = strlen(w);

	if (i + l > n || strncasecmp(s + i, w, l) != 0)
		return 0;
	if (i > 0 && (isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_' ||
	    s[i - 1] == '$'))
		return 0;
	return i + l == n || !(isalnum((unsigned char)s[i + l]) ||
	    s[i + l] == '_' || s[i + l] == '$');
}

/* "-- " starts a comment only with a space or control character after. */
static int
dash_comment(const char *s, size_t n, size_t i)
{
	return i + 1 < n && s[i] == '-' && s[i + 1] == '-' &&
	    (i + 2 == n || (unsigned char)s[i + 2] <= ' ');
}

int
tl_drv_mdb_split(const char *s, size_t n, struct tl_drv_mdb_stmt *st,
    int cap, char *why, int *line)
{
	size_t i = 0, start = 0, last = 0;
	int ln = 1, sline = 0, count = 0, in_stmt = 0;

	*line = 0;
	while (i < n) {
		char c = s[i];

		if (!in_stmt && (c == ' ' || c == '\t' || c == '\r' ||
		    c == '\n' || c == ';')) {
			if (c == '\n')
				ln++;
			i++;
			continue;
		}
		if (c == '#' || dash_comment(s, n, i)) {
			while (i < n && s[i] != '\n')
				i++;
			continue;
		}
		if (c == '/' && i + 1 < n && s[i + 1] == '*') {
			int cl = ln;

			if (i + 2 < n && (s[i + 2] == '!' || (s[i + 2] == 'M' &&
			    i + 3 < n && s[i + 3] == '!'))) {
				*line = ln;
				return tl_drv_why(why, -1, "line %d: "
				    "executable "
				    "comments (/*! ... */) are refused: write "
				    "the statement itself", ln);
			}
			for (i += 2; i + 1 < n && !(s[i] == '*' &&
			    s[i + 1] == '/'); i++)
				if (s[i] == '\n')
					ln++;
			if (i + 1 >= n) {
				*line = cl;
				return tl_drv_why(why, -1, "line %d: a comment "
				    "that never ends", cl);
			}
			i += 2;
			continue;
		}
		if (!in_stmt) {
			in_stmt = 1;
			start = i;
			sline = ln;
			if (word_at(s, n, i, "DELIMITER")) {
				*line = ln;
				return tl_drv_why(why, -1, "line %d: DELIMITER "
				    "is a client command, refused (statements "
				    "end with ;)", ln);
			}
		}
		if (c == '\'' || c == '"' || c == '`') {
			int ql = ln;

			for (i++; i < n; i++) {
				if (s[i] == '\n')
					ln++;
				if (c != '`' && s[i] == '\\' && i + 1 < n) {
					if (s[++i] == '\n')
						ln++;
					continue;
				}
				if (s[i] == c) {
					if (i + 1 < n && s[i + 1] == c) {
						i++;
						continue;
					}
					break;
				}
			}
			if (i >= n) {
				*line = ql;
				return tl_drv_why(why, -1, "line %d: a quote "
				    "(%c) that never ends", ql, c);
			}
			i++;
			last = i;
			continue;
		}
		if (word_at(s, n, i, "BEGIN") && i != start) {
			*line = ln;
			return tl_drv_why(why, -1, "line %d: a compound "
			    "statement (BEGIN ... END) cannot be split safely; "
			    "create routines and triggers outside migrations",
			    ln);
		}
		if (c == ';') {
			if (count >= cap)
				return -2;
			st[count].off = start;
			st[count].len = last - start;
			st[count].line = sline;
			count++;
			in_stmt = 0;
			i++;
			continue;
		}
		if (c == '\n')
			ln++;
		i++;
		if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
			last = i;
	}
	if (in_stmt) {
		if (count >= cap)
			return -2;
		st[count].off = start;
		st[count].len = last - start;
		st[count].line = sline;
		count++;
	}
	return count;
}

enum kind { K_DML, K_DDL, K_REFUSED };

static enum kind
classify(const char *s, size_t n, const char **word)
{
	static const char *const dml[] = { "SELECT", "INSERT", "UPDATE",
	    "DELETE", "REPLACE", "WITH", "CALL", "DO", "SET", "VALUES",
	    "TABLE", NULL };
	static const char *const refused[] = { "START", "BEGIN", "COMMIT",
	    "ROLLBACK", "SAVEPOINT", "RELEASE", "XA", "LOCK", "UNLOCK", "USE",
	    "SOURCE", "DELIMITER", NULL };
	size_t i;

	*word = "";
	for (i = 0; refused[i] != NULL; i++)
		if (word_at(s, n, 0, refused[i])) {
			*word = refused[i];
			return K_REFUSED;
		}
	for (i = 0; dml[i] != NULL; i++)
		if (word_at(s, n, 0, dml[i]))
			return K_DML;
	return K_DDL;
}

/* --- the watchdog ------------------------------------------------------- */

struct dog {
	/*
	 * armed is read and written under mu, and KILL QUERY sent under
	 * it: the main thread cannot go on to its history row while a
	 * kill meant for the statement is on its way.
	 */
	pthread_mutex_t	 mu;
	int		 armed;		/* a statement is running */
	MYSQL		*c;		/* the watchdog's own connection */
	unsigned long	 victim;	/* the migration's thread id */
	struct timespec	 deadline;
	atomic_int	*cancel;
	atomic_int	 stop, fired;	/* fired: 1 time, 2 cancel */
};

static void
arm(struct dog *d, int on)
{
	pthread_mutex_lock(&d->mu);
	d->armed = on;
	if (on)
		atomic_store(&d->fired, 0);
	pthread_mutex_unlock(&d->mu);
}

static int
passed(const struct timespec *d)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > d->tv_sec || (now.tv_sec == d->tv_sec &&
	    now.tv_nsec >= d->tv_nsec);
}

static void *
watch(void *arg)
{
	struct dog *d = arg;
	struct timespec ts = { 0, MIG_POLL_MS * 1000000L };

	while (!atomic_load(&d->stop)) {
		int why = 0;

		if (d->cancel != NULL && atomic_load(d->cancel))
			why = 2;
		else if (passed(&d->deadline))
			why = 1;
		pthread_mutex_lock(&d->mu);
		if (why != 0 && d->armed) {
			char k[64];

			atomic_store(&d->fired, why);
			snprintf(k, sizeof(k), "KILL QUERY %lu", d->victim);
			/* Lost: the server's statement limit still holds. */
			(void)mysql_query(d->c, k);
			/* Once per statement: the main thread rearms. */
			d->armed = 0;
		}
		pthread_mutex_unlock(&d->mu);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Seconds left before the deadline, at least a millisecond. */
static double
left(const struct timespec *d)
{
	struct timespec now;
	double s;

	clock_gettime(CLOCK_MONOTONIC, &now);
	s = (double)(d->tv_sec - now.tv_sec) +
	    (double)(d->tv_nsec - now.tv_nsec) / 1e9;
	return s < 0.001 ? 0.001 : s;
}

/* --- running ------------------------------------------------------------ */

static int
exec_one(MYSQL *c, const char *sql, size_t len, unsigned *err)
{
	MYSQL_RES *r;
	int st;

	*err = 0;
	if (mysql_real_query(c, sql, (unsigned long)len) != 0) {
		*err = mysql_errno(c);
		return -1;
	}
	/* Every result of the statement (a CALL may return several). */
	do {
		if ((r = mysql_store_result(c)) != NULL)
			mysql_free_result(r);
		else if (mysql_field_count(c) != 0) {
			*err = mysql_errno(c);
			return -1;
		}
		st = mysql_next_result(c);
		if (st > 0) {
			*err = mysql_errno(c);
			return -1;
		}
	} while (st == 0);
	return 0;
}

static int
lost(unsigned e)
{
	return e == CR_SERVER_LOST || e == CR_SERVER_GONE_ERROR ||
	    e == ER_CONNECTION_KILLED || e == CR_CONNECTION_ERROR ||
	    e == CR_CONN_HOST_ERROR;
}

static int
hist(MYSQL *c, const char *flit, const char *clit, int k, const char *what,
    char *why)
{
	char sql[MIG_SQL_MAX];

	if (strcmp(what, "delete") == 0)
		snprintf(sql, sizeof(sql), "DELETE FROM tally_schema_history "
		    "WHERE file = %s AND stmt = %d", flit, k);
	else if (strcmp(what, "done") == 0)
		snprintf(sql, sizeof(sql), "INSERT INTO tally_schema_history "
		    "(file, checksum, stmt, state) VALUES (%s, %s, %d, 'done') "
		    "ON DUPLICATE KEY UPDATE state = 'done'", flit, clit, k);
	else
		snprintf(sql, sizeof(sql), "INSERT INTO tally_schema_history "
		    "(file, checksum, stmt, state) VALUES (%s, %s, %d, "
		    "'started')", flit, clit, k);
	return tl_drv_mdb_run(c, sql, "recording the migration", why);
}

int
tl_drv_mdb_migrate(const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, const struct tl_drv_migration *m,
    int *already, char *why, int *line)
{
	struct tl_drv_mdb_stmt *st = NULL;
	struct tl_drv_mdb_conn cn = TL_DRV_MDB_CONN_INIT;
	char sql[MIG_SQL_MAX], flit[600], clit[160], lim[64], *done = NULL;
	struct dog d;
	pthread_t th;
	MYSQL *c = NULL;
	MYSQL_RES *r = NULL;
	MYSQL_ROW row;
	size_t i;
	int rc, n, cap = 1, k, started = 0;
	unsigned err, timeout;

	*already = 0;
	*line = 0;
	memset(&d, 0, sizeof(d));
	pthread_mutex_init(&d.mu, NULL);
	if ((rc = tl_drv_mdb_grant_ok(g, 1, why)) != 0)
		return rc;
	if (m->file == NULL || strlen(m->file) > 255 || m->checksum == NULL ||
	    strlen(m->checksum) > 64)
		return tl_drv_why(why, TL_EINVAL, "a migration needs a file "
		    "name (at most 255 bytes) and a checksum");
	for (i = 0; i < m->len; i++)
		if (m->sql[i] == ';')
			cap++;
	if ((st = calloc((size_t)cap, sizeof(*st))) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	if ((n = tl_drv_mdb_split(m->sql, m->len, st, cap, why, line)) < 0) {
		rc = TL_EDRIVER;
		goto out;
	}
	for (k = 0; k < n; k++) {
		const char *w;

		if (classify(m->sql + st[k].off, st[k].len, &w) == K_REFUSED) {
			*line = st[k].line;
			rc = tl_drv_why(why, TL_EDRIVER, "line %d: %s is "
			    "refused in a migration (tally runs each statement "
			    "in its own transaction and records it)",
			    st[k].line, w);
			goto out;
		}
	}
	if ((done = calloc((size_t)n + 1, 1)) == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto out;
	}

	cn.host = ep != NULL ? ep->host : NULL;
	cn.port = ep != NULL ? ep->port : NULL;
	cn.user = g->login;
	cn.password = g->password;
	cn.db = g->resource;
	/*
	 * As the consumer would: over TLS as the provider's setting tls
	 * says, its default included (the user is REQUIRE SSL then).
	 */
	if (ep != NULL)
		cn.tls = tl_drv_tls_mode(ep->settings, cn.host);
	cn.ca_file = ep != NULL ? ep->ca_file : NULL;
	rc = tl_drv_mdb_connect(&cn, &c, NULL, why);
	if (rc != 0) {
		if (rc != TL_EUNREACH)
			rc = TL_EDRIVER;
		goto out;
	}
	if (tl_drv_mdb_quote_str(c, m->file, flit, sizeof(flit)) != 0 ||
	    tl_drv_mdb_quote_str(c, m->checksum, clit, sizeof(clit)) != 0) {
		rc = tl_drv_why(why, TL_EINVAL, "file name too long");
		goto out;
	}
	if ((rc = tl_drv_mdb_run(c, "CREATE TABLE IF NOT EXISTS "
	    "tally_schema_history (file VARCHAR(255) NOT NULL, checksum "
	    "CHAR(64) NOT NULL, stmt INT NOT NULL, state ENUM('started', "
	    "'done') NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT "
	    "CURRENT_TIMESTAMP(6), PRIMARY KEY (file, stmt)) ENGINE=InnoDB "
	    "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
	    "creating tally_schema_history", why)) != 0)
		goto out;
	snprintf(sql, sizeof(sql), "SELECT stmt, checksum, state FROM "
	    "tally_schema_history WHERE file = %s ORDER BY stmt", flit);
	if (mysql_query(c, sql) != 0 || (r = mysql_store_result(c)) == NULL) {
		rc = tl_drv_why(why, tl_drv_mdb_errno_rc(mysql_errno(c), 0),
		    "reading tally_schema_history: %u %s", mysql_errno(c),
		    mysql_error(c));
		goto out;
	}
	while ((row = mysql_fetch_row(r)) != NULL) {
		int s = atoi(row[0]);

		if (strcmp(row[1], m->checksum) != 0) {
			rc = tl_drv_why(why, TL_EDRIVER, "%s was %s with "
			    "checksum %.16s..., the file now has %.16s...: a "
			    "migration once run is never edited (add a new "
			    "file)", m->file, s == 0 ? "applied" : "partly "
			    "applied", row[1], m->checksum);
			goto out;
		}
		if (s == 0) {
			*already = 1;
			rc = 0;
			snprintf(why, TL_WHY_MAX, "%s applied before", m->file);
			goto out;
		}
		if (s < 1 || s > n) {
			rc = tl_drv_why(why, TL_EDRIVER, "tally_schema_history "
			    "has statement %d of %s, which has %d", s, m->file,
			    n);
			goto out;
		}
		if (strcmp(row[2], "started") == 0) {
			*line = st[s - 1].line;
			rc = tl_drv_why(why, TL_EDRIVER, "line %d: statement "
			    "%d of %s was interrupted while it ran; MariaDB "
			    "commits DDL by itself, so tally cannot tell "
			    "whether it took effect: look, then delete its row "
			    "in tally_schema_history to run it again or set "
			    "its state to 'done' to skip it", st[s - 1].line, s,
			    m->file);
			goto out;
		}
		done[s] = 1;
	}
	mysql_free_result(r);
	r = NULL;

	/* The watchdog: its own session, the same user. */
	timeout = m->timeout_s != 0 ? m->timeout_s : 300;
	clock_gettime(CLOCK_MONOTONIC, &d.deadline);
	d.deadline.tv_sec += timeout;
	d.cancel = m->cancel;
	d.victim = mysql_thread_id(c);
	cn.db = NULL;
	if ((rc = tl_drv_mdb_connect(&cn, &d.c, NULL, why)) != 0) {
		if (rc != TL_EUNREACH)
			rc = TL_EDRIVER;
		goto out;
	}
	if (pthread_create(&th, NULL, watch, &d) != 0) {
		rc = tl_drv_why(why, TL_EDRIVER, "cannot start the watchdog");
		goto out;
	}
	started = 1;

	for (k = 1; k <= n; k++) {
		const struct tl_drv_mdb_stmt *s = &st[k - 1];
		const char *w;
		enum kind kd = classify(m->sql + s->off, s->len, &w);
		int f;

		if (done[k])
			continue;
		if ((m->cancel != NULL && atomic_load(m->cancel)) ||
		    passed(&d.deadline)) {
			*line = s->line;
			rc = tl_drv_why(why, TL_EDRIVER, "%s: %s before "
			    "statement %d (line %d); it resumes there", m->file,
			    m->cancel != NULL && atomic_load(m->cancel) ?
			    "cancelled" : "time limit passed", k, s->line);
			goto out;
		}
		if (kd == K_DML) {
			if ((rc = tl_drv_mdb_run(c, "START TRANSACTION",
			    "starting a transaction", why)) != 0)
				goto out;
		} else if ((rc = hist(c, flit, clit, k, "started", why)) != 0)
			goto out;
		/* The limit is the statement's alone, not its record's. */
		snprintf(lim, sizeof(lim), "SET SESSION max_statement_time = "
		    "%.3f", left(&d.deadline));
		if ((rc = tl_drv_mdb_run(c, lim, "setting the time limit",
		    why)) != 0)
			goto out;
		arm(&d, 1);
		f = exec_one(c, m->sql + s->off, s->len, &err);
		arm(&d, 0);
		if (f == 0 && (rc = tl_drv_mdb_run(c, "SET SESSION "
		    "max_statement_time = 0", "lifting the time limit",
		    why)) != 0)
			goto out;
		if (f != 0) {
			char msg[TL_WHY_MAX];
			int fired = atomic_load(&d.fired);

			snprintf(msg, sizeof(msg), "%s", mysql_error(c));
			*line = s->line;
			if (lost(err)) {
				rc = tl_drv_why(why, TL_EUNREACH, "%s line %d: "
				    "the connection was lost while statement "
				    "%d ran: %u %s", m->file, s->line, k, err,
				    msg);
				goto out;
			}
			if (kd == K_DML)
				(void)tl_drv_mdb_run(c, "ROLLBACK", "rollback",
				    msg[0] ? why : why);
			else if (hist(c, flit, clit, k, "delete", why) != 0) {
				rc = TL_EDRIVER;
				goto out;
			}
			if (err == 1969 || fired == 1)
				rc = tl_drv_why(why, TL_EDRIVER, "%s line %d: "
				    "the time limit of %u s passed (statement "
				    "%d interrupted; it resumes there)",
				    m->file, s->line, timeout, k);
			else if (fired == 2)
				rc = tl_drv_why(why, TL_EDRIVER, "%s line %d: "
				    "cancelled (statement %d interrupted; it "
				    "resumes there)", m->file, s->line, k);
			else
				rc = tl_drv_why(why, TL_EDRIVER, "%s line %d: "
				    "%u %s", m->file, s->line, err, msg);
			goto out;
		}
		if ((rc = hist(c, flit, clit, k, "done", why)) != 0)
			goto out;
		if (kd == K_DML && (rc = tl_drv_mdb_run(c, "COMMIT",
		    "committing", why)) != 0)
			goto out;
	}
	if ((rc = hist(c, flit, clit, 0, "done", why)) != 0)
		goto out;
	snprintf(why, TL_WHY_MAX, "%s applied: %d statement%s", m->file, n,
	    n == 1 ? "" : "s");
	rc = 0;
out:
	if (started) {
		atomic_store(&d.stop, 1);
		pthread_join(th, NULL);
	}
	if (d.c != NULL)
		mysql_close(d.c);
	pthread_mutex_destroy(&d.mu);
	if (r != NULL)
		mysql_free_result(r);
	if (c != NULL)
		mysql_close(c);
	free(done);
	free(st);
	return rc;
}
