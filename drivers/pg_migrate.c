/*
 * pg_migrate.c - consumer-owned migrations, run with the consumer's
 * own credential so that they can only touch the consumer's database.
 *
 * A file is sent whole (one simple query: the server splits it) inside
 * BEGIN ... COMMIT, so a failing statement leaves nothing of the file
 * behind.  Its line: the server's error position when it gives one (a
 * syntax error, an unknown relation); otherwise (a relation that already
 * exists, a constraint violated, a division by zero) the start of the
 * statement that failed, found by counting the statements that
 * completed before it: each completed statement returns one result.
 *
 * The same transaction looks the file up in tally.schema_history and
 * records it there, so the database knows what ran in it even when the
 * caller dies before it can say so.  The session's statement_timeout is
 * the file's limit (the server enforces it); the wait for results polls
 * the socket so that the limit and the caller's cancel flag are seen,
 * and either sends PQcancel.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/error.h"
#include "driver.h"
#include "postgres-internal.h"
#include "util.h"

int	tl_drv_pg_migrate(const struct tl_drv_endpoint *ep,
	    const struct tl_drv_grant *g, const struct tl_drv_migration *m,
	    int *already, char *why, int *line);

static int
line_of(const char *sql, size_t len, long pos)
{
	size_t i;
	long chars = 0;
	int line = 1;

	/* The position counts characters from 1; UTF-8 continuation bytes
	 * are not characters. */
	for (i = 0; i < len && chars < pos - 1; i++) {
		if (((unsigned char)sql[i] & 0xc0) != 0x80)
			chars++;
		if (sql[i] == '\n')
			line++;
	}
	return line;
}

static int
exec_ok(PGconn *c, const char *q, char *why)
{
	PGresult *r = PQexec(c, q);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
	    PQresultStatus(r) == PGRES_TUPLES_OK;

	if (!ok)
		snprintf(why, TL_WHY_MAX, "%s", PQerrorMessage(c));
	PQclear(r);
	return ok;
}

/* Skips a dollar-quote tag at s ("$$", "$tag$"): its length, or 0. */
static size_t
dollar_tag(const char *s, size_t n)
{
	size_t i = 1;

	if (n < 2 || s[0] != '$')
		return 0;
	while (i < n && (s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') ||
	    (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
	    ((unsigned char)s[i] & 0x80)))
		i++;
	if (i < n && s[i] == '$' && !(s[1] >= '0' && s[1] <= '9'))
		return i + 1;
	return 0;
}

/* A statement's start and its first few words, lowercased. */
#define WORDS	4
struct stmt {
	size_t	off;		/* its first token */
	size_t	end;		/* its semicolon, or the end of the text */
	int	line;
	char	w[WORDS][16];
	int	nw;		/* words seen, up to WORDS counted */
};

typedef int (*stmt_fn)(const struct stmt *st, void *arg);

static int
is_word(const struct stmt *st, int i, const char *w)
{
	return i < st->nw && i < WORDS && strcmp(st->w[i], w) == 0;
}

/* CREATE [OR REPLACE] FUNCTION|PROCEDURE: a body may hold BEGIN ... END. */
static int
is_routine(const struct stmt *st)
{
	int i = is_word(st, 1, "or") && is_word(st, 2, "replace") ? 3 : 1;

	return is_word(st, 0, "create") && (is_word(st, i, "function") ||
	    is_word(st, i, "procedure"));
}

/*
 * Calls fn for every statement of sql with something in it, in order;
 * stops at fn's first nonzero value and returns it.  A lexer just good
 * enough to find the semicolons that end statements, as psql finds
 * them: quoted strings and identifiers, E'' escapes, dollar quotes, --
 * and nested block comments, and the BEGIN ATOMIC ... END bodies of
 * SQL-standard routines (with the CASE ... END inside them).
 */
static int
each_statement(const char *sql, size_t len, stmt_fn fn, void *arg)
{
	struct stmt st;
	size_t i = 0, t;
	int line = 1, depth, parens = 0, begins = 0, rc;
	int started = 0;

	memset(&st, 0, sizeof(st));
	while (i < len) {
		char c = sql[i];

		if (c == '\n') {
			line++;
			i++;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
			i++;
			continue;
		}
		if (c == '-' && i + 1 < len && sql[i + 1] == '-') {
			while (i < len && sql[i] != '\n')
				i++;
			continue;
		}
		if (c == '/' && i + 1 < len && sql[i + 1] == '*') {
			for (depth = 1, i += 2; i < len && depth > 0; i++) {
				if (sql[i] == '\n')
					line++;
				else if (sql[i] == '/' && i + 1 < len &&
				    sql[i + 1] == '*') {
					depth++;
					i++;
				} else if (sql[i] == '*' && i + 1 < len &&
				    sql[i + 1] == '/') {
					depth--;
					i++;
				}
			}
			continue;
		}
		if (c == ';' && begins == 0) {
			st.end = i;
			if (started && (rc = fn(&st, arg)) != 0)
				return rc;
			memset(&st, 0, sizeof(st));
			started = parens = 0;
			i++;
			continue;
		}
		if (!started) {
			started = 1;	/* the statement's first token */
			st.off = i;
			st.line = line;
		}
		if (c == '\'' || c == '"') {
			int esc = c == '\'' && i > 0 && (sql[i - 1] == 'E' ||
			    sql[i - 1] == 'e');

			for (i++; i < len; i++) {
				if (sql[i] == '\n')
					line++;
				else if (esc && sql[i] == '\\' && i + 1 < len) {
					if (sql[++i] == '\n')
						line++;
				} else if (sql[i] == c) {
					if (i + 1 < len && sql[i + 1] == c)
						i++;	/* doubled: still inside */
					else
						break;
				}
			}
			i++;
			continue;
		}
		if (c == '$' && (t = dollar_tag(sql + i, len - i)) > 0) {
			const char *tag = sql + i;

			for (i += t; i < len; i++) {
				if (sql[i] == '\n')
					line++;
				else if (sql[i] == '$' && len - i >= t &&
				    memcmp(sql + i, tag, t) == 0) {
					i += t;
					break;
				}
			}
			continue;
		}
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    c == '_' || ((unsigned char)c & 0x80)) {
			char w[16];
			size_t n = 0;

			while (i < len && ((sql[i] >= 'a' && sql[i] <= 'z') ||
			    (sql[i] >= 'A' && sql[i] <= 'Z') ||
			    (sql[i] >= '0' && sql[i] <= '9') || sql[i] == '_' ||
			    sql[i] == '$' || ((unsigned char)sql[i] & 0x80))) {
				if (n < sizeof(w) - 1)
					w[n++] = (char)(sql[i] >= 'A' &&
					    sql[i] <= 'Z' ? sql[i] + 32 :
					    sql[i]);
				i++;
			}
			w[n] = '\0';
			if (st.nw < WORDS)
				memcpy(st.w[st.nw], w, sizeof(w));
			st.nw++;
			if (is_routine(&st) && parens == 0) {
				if (strcmp(w, "begin") == 0)
					begins++;
				else if (strcmp(w, "case") == 0 && begins > 0)
					begins++;
				else if (strcmp(w, "end") == 0 && begins > 0)
					begins--;
			}
			continue;
		}
		if (c == '(')
			parens++;
		else if (c == ')' && parens > 0)
			parens--;
		i++;
	}
	st.end = len;
	return started ? fn(&st, arg) : 0;
}

struct nth {
	unsigned	k, n;
	int		line;
};

static int
nth_one(const struct stmt *st, void *arg)
{
	struct nth *a = arg;

	if (a->n++ < a->k)
		return 0;
	a->line = st->line;
	return 1;
}

/*
 * The line on which statement number k (from 0) of sql begins, counting
 * only statements with something in them (the server skips empty ones,
 * and so does its result stream); 0 when there are not that many.
 */
static int
statement_line(const char *sql, size_t len, unsigned k)
{
	struct nth a = { k, 0, 0 };

	each_statement(sql, len, nth_one, &a);
	return a.line;
}

/*
 * Transaction control ends the transaction tally wraps the file in: a
 * COMMIT half way would keep the statements before it when a later one
 * fails, and run the rest outside any transaction.  Savepoints are
 * fine: they stay inside.
 */
static int
txn_control(const struct stmt *st, void *arg)
{
	char *what = arg;	/* the word, upper case */
	size_t k;

	if (is_word(st, 0, "begin") || is_word(st, 0, "start") ||
	    is_word(st, 0, "commit") || is_word(st, 0, "end") ||
	    is_word(st, 0, "abort") ||
	    (is_word(st, 0, "prepare") && is_word(st, 1, "transaction")) ||
	    (is_word(st, 0, "rollback") && !is_word(st, 1, "to") &&
	    !is_word(st, 2, "to"))) {
		for (k = 0; st->w[0][k] != '\0'; k++)
			what[k] = (char)toupper((unsigned char)st->w[0][k]);
		what[k] = '\0';
		return st->line;
	}
	return 0;
}

/*
 * A session escape: a statement that would lift the file's time limit
 * or leave the consumer's role (tally sets both for the session, and a
 * file may not undo them).  The first words catch the commands; the
 * names are also looked for anywhere in the statement, strings
 * included, which catches set_config('statement_timeout', ...) and a
 * routine declared with SET statement_timeout.  What a dynamic string
 * builds (EXECUTE in a DO block) is not seen here: the cancel at the
 * limit (below) still ends it.
 */
struct escape_arg {
	const char	*sql;
	char		 what[64];
};

/* Case-insensitive: needle in [s, s + n); its offset, or n. */
static size_t
find_ci(const char *s, size_t n, const char *needle)
{
	size_t k = strlen(needle), i;

	for (i = 0; k <= n && i <= n - k; i++)
		if (strncasecmp(s + i, needle, k) == 0)
			return i;
	return n;
}

static int
session_escape(const struct stmt *st, void *arg)
{
	static const char *const names[] = { "statement_timeout",
	    "session_authorization", "idle_in_transaction_session_timeout",
	    NULL };
	struct escape_arg *ea = arg;
	const char *p = ea->sql + st->off;
	size_t n = st->end - st->off, at = 0, i;
	int line = st->line;

	/* Words are cut to 15 characters: "statement_timeo". */
	if ((is_word(st, 0, "set") || is_word(st, 0, "reset")) &&
	    (is_word(st, 1, "role") || is_word(st, 1, "session") ||
	    is_word(st, 1, "all") || is_word(st, 1, "session_authori") ||
	    is_word(st, 1, "statement_timeo") ||
	    (is_word(st, 1, "local") && (is_word(st, 2, "role") ||
	    is_word(st, 2, "session") || is_word(st, 2, "statement_timeo")))))
		at = 0;
	else if (is_word(st, 0, "discard"))
		at = 0;
	else {
		for (i = 0; names[i] != NULL; i++)
			if ((at = find_ci(p, n, names[i])) < n)
				break;
		if (names[i] == NULL && find_ci(p, n, "set_config") < n &&
		    ((at = find_ci(p, n, "'role'")) < n ||
		    (at = find_ci(p, n, "\"role\"")) < n))
			;	/* set_config('role', ...) */
		else if (names[i] == NULL)
			return 0;
		for (i = 0; i < at; i++)
			if (p[i] == '\n')
				line++;
	}
	/* What it says, from the statement's own text, on one line. */
	for (i = 0; i < n && i < sizeof(ea->what) - 4; i++)
		ea->what[i] = p[i] == '\n' || p[i] == '\t' || p[i] == '\r' ?
		    ' ' : p[i];
	snprintf(ea->what + i, sizeof(ea->what) - i, "%s", i < n ? "…" : "");
	return line;
}

static void
quiet(void *arg, const char *msg)
{
	/* A file's NOTICEs are not tallyd's to print. */
	(void)arg;
	(void)msg;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Why a wait for the server ended early. */
enum { W_RESULT, W_STOPPED, W_LIMIT, W_LOST };

/*
 * Waits for the server's next result, polling the socket every 100 ms
 * so that *cancel and the deadline are seen while a statement runs;
 * either sends a cancel request (the backend stops the statement: the
 * session stays usable for ROLLBACK), and then waits at most 2 s more
 * before giving up on the session.
 */
static int
wait_result(PGconn *c, const struct tl_drv_migration *m, double deadline,
    int *cancelled)
{
	double gave_up = 0;

	while (PQisBusy(c)) {
		struct pollfd pf = { PQsocket(c), POLLIN, 0 };
		int stop = m->cancel != NULL && atomic_load(m->cancel) != 0;
		double now = now_s();

		if (*cancelled == W_RESULT && (stop || now >= deadline)) {
			PGcancel *k = PQgetCancel(c);
			char err[256];

			*cancelled = stop ? W_STOPPED : W_LIMIT;
			if (k != NULL) {
				PQcancel(k, err, sizeof(err));
				PQfreeCancel(k);
			}
			gave_up = now + 2;
		} else if (gave_up > 0 && now >= gave_up)
			return W_LOST;
		if (poll(&pf, 1, 100) < 0 && errno != EINTR)
			return W_LOST;
		if (!PQconsumeInput(c))
			return W_LOST;
	}
	return W_RESULT;
}

/*
 * The file's record in the database: what tally applied there, in the
 * same transaction as each file, in a schema of its own (outside the
 * consumer's search_path, so its own queries and \dt do not meet it).
 * It belongs to the owner role like everything the file creates, so a
 * copy (tally rebind --migrate) takes it along.
 */
static const char history_sql[] =
    "CREATE SCHEMA IF NOT EXISTS tally;"
    "CREATE TABLE IF NOT EXISTS tally.schema_history ("
    " file text PRIMARY KEY,"
    " checksum text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now());"
    /* Two sessions at one database: the second waits, then sees it. */
    "LOCK TABLE tally.schema_history IN SHARE ROW EXCLUSIVE MODE";

int
tl_drv_pg_migrate(const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, const struct tl_drv_migration *m,
    int *already, char *why, int *line)
{
	/*
	 * As the consumer would: over TLS as the provider's setting tls
	 * says; without one, libpq's own default (TLS when offered).
	 */
	const char *keys[] = { "host", "port", "user", "password", "dbname",
	    "connect_timeout", "application_name", "sslmode", "sslrootcert",
	    NULL };
	const char *vals[] = { ep->host, ep->port, g->login, g->password,
	    g->resource, "5", "tally-migrate",
	    tl_drv_setting_get(ep->settings, "tls") != NULL ?
	    tl_drv_pg_sslmode(ep->settings, ep->host) : "prefer", ep->ca_file,
	    NULL };
	const char *sql = m->sql;
	size_t len = m->len;
	unsigned limit = m->timeout_s ? m->timeout_s : 300;
	PGconn *c;
	PGresult *r;
	char *text, q[160];
	unsigned done = 0;
	double deadline;
	int rc = 0, cancelled = W_RESULT;

	*line = 0;
	*already = 0;
	why[0] = '\0';
	c = PQconnectdbParams(keys, vals, 0);
	if (PQstatus(c) != CONNECTION_OK) {
		snprintf(why, TL_WHY_MAX, "cannot connect as %s: %s", g->login,
		    PQerrorMessage(c));
		PQfinish(c);
		return TL_EUNREACH;
	}
	PQsetNoticeProcessor(c, quiet, NULL);
	/* PQexec wants a NUL-terminated string; files need not end in one. */
	if ((text = malloc(len + 1)) == NULL) {
		PQfinish(c);
		return TL_EDRIVER;
	}
	memcpy(text, sql, len);
	text[len] = '\0';
	{
		char what[16] = "";
		int at = each_statement(text, len, txn_control, what);

		if (at > 0) {
			snprintf(why, TL_WHY_MAX, "%s inside a migration: "
			    "tally runs each file in a transaction of its own "
			    "(leave out BEGIN, COMMIT and ROLLBACK; savepoints "
			    "are fine)", what);
			*line = at;
			rc = TL_EDRIVER;
			goto out;
		}
	}
	{
		struct escape_arg ea = { text, "" };
		int at = each_statement(text, len, session_escape, &ea);

		if (at > 0) {
			snprintf(why, TL_WHY_MAX, "\"%s\" inside a migration: "
			    "tally sets the session's time limit (the "
			    "provider's migration-timeout) and role, and a "
			    "file may not change them", ea.what);
			*line = at;
			rc = TL_EDRIVER;
			goto out;
		}
	}
	/*
	 * The limit is the server's to enforce: a statement past it is
	 * cancelled there, whatever the client does.  A backend whose
	 * client is gone (tallyd killed) notices within a second on
	 * servers that have client_connection_check_interval (14 and
	 * later; older ones ignore the setting's failure).
	 */
	snprintf(q, sizeof(q), "SET statement_timeout = %u",
	    limit > 2000000 ? 2000000000u : limit * 1000);
	if (!exec_ok(c, q, why) || !exec_ok(c, "SET "
	    "idle_in_transaction_session_timeout = 60000", why)) {
		rc = TL_EDRIVER;
		goto out;
	}
	{
		char ignored[TL_WHY_MAX];

		exec_ok(c, "SET client_connection_check_interval = 1000",
		    ignored);
	}
	if (!exec_ok(c, "BEGIN", why) || !exec_ok(c, history_sql, why)) {
		rc = TL_EDRIVER;
		goto out;
	}
	{
		const char *pv[1] = { m->file };

		r = PQexecParams(c, "SELECT checksum FROM tally.schema_history "
		    "WHERE file = $1", 1, NULL, pv, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			snprintf(why, TL_WHY_MAX, "reading "
			    "tally.schema_history: %s", PQerrorMessage(c));
			rc = TL_EDRIVER;
		} else if (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0),
		    m->checksum) == 0) {
			*already = 1;	/* applied before: nothing runs */
		} else if (PQntuples(r) == 1) {
			snprintf(why, TL_WHY_MAX, "the database records %s as "
			    "applied with checksum %.16s… but the log has "
			    "%.16s… (tally.schema_history): an applied "
			    "migration must not change", m->file, PQgetvalue(r,
			    0, 0), m->checksum);
			rc = TL_EDRIVER;
		}
		PQclear(r);
		if (rc != 0 || *already) {
			char ignored[TL_WHY_MAX];

			exec_ok(c, "ROLLBACK", ignored);
			goto out;
		}
	}
	/* One result per statement that completed, then the error. */
	if (!PQsendQuery(c, text)) {
		snprintf(why, TL_WHY_MAX, "%s", PQerrorMessage(c));
		rc = TL_EDRIVER;
		goto out;
	}
	/* The server's limit first; this one if the server does not act. */
	deadline = now_s() + limit + 1;
	for (;;) {
		ExecStatusType st;

		if (wait_result(c, m, deadline, &cancelled) == W_LOST) {
			if (cancelled == W_LIMIT)
				snprintf(why, TL_WHY_MAX, "the file ran past "
				    "its time limit of %u s "
				    "(migration-timeout) and did not stop when "
				    "cancelled; the session was closed", limit);
			else if (cancelled == W_STOPPED)
				snprintf(why, TL_WHY_MAX, "stopped (tallyd is "
				    "stopping); the session was closed");
			else
				snprintf(why, TL_WHY_MAX, "the session was "
				    "lost while the file ran: %s",
				    PQerrorMessage(c));
			*line = statement_line(text, len, done);
			rc = TL_EDRIVER;
			goto out;
		}
		if ((r = PQgetResult(c)) == NULL)
			break;
		st = PQresultStatus(r);
		if (rc == 0 && (st == PGRES_COMMAND_OK ||
		    st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY)) {
			done++;
		} else if (rc == 0 && (st == PGRES_COPY_IN ||
		    st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH)) {
			/* Nothing to copy from or to: refuse, the file fails. */
			if (st == PGRES_COPY_IN)
				PQputCopyEnd(c, "COPY FROM STDIN is not "
				    "supported in a migration");
			else {
				char *buf;

				while (PQgetCopyData(c, &buf, 0) > 0)
					PQfreemem(buf);
			}
			snprintf(why, TL_WHY_MAX, "COPY ... %s is not "
			    "supported in a migration",
			    st == PGRES_COPY_IN ? "FROM STDIN" : "TO STDOUT");
			*line = statement_line(text, len, done);
			rc = TL_EDRIVER;
		} else if (rc == 0) {
			const char *pos = PQresultErrorField(r,
			    PG_DIAG_STATEMENT_POSITION);
			const char *msg = PQresultErrorField(r,
			    PG_DIAG_MESSAGE_PRIMARY);
			const char *state = PQresultErrorField(r,
			    PG_DIAG_SQLSTATE);

			if (pos != NULL)
				*line = line_of(text, len, strtol(pos, NULL,
				    10));
			else
				*line = statement_line(text, len, done);
			if (cancelled == W_STOPPED)
				snprintf(why, TL_WHY_MAX, "stopped (tallyd is "
				    "stopping)");
			else if (cancelled == W_LIMIT || (state != NULL &&
			    strcmp(state, "57014") == 0))
				snprintf(why, TL_WHY_MAX, "%s: %s (the file's "
				    "time limit of %u s, the provider's "
				    "migration-timeout)", state ? state : "",
				    msg ? msg : "cancelled", limit);
			else
				snprintf(why, TL_WHY_MAX, "%s%s%s",
				    state ? state : "", state ? ": " : "",
				    msg ? msg : PQerrorMessage(c));
			rc = TL_EDRIVER;
		}
		PQclear(r);
	}
	if (rc != 0) {
		char ignored[TL_WHY_MAX];

		/* Nothing half-applied: the session ends anyway. */
		exec_ok(c, "ROLLBACK", ignored);
		goto out;
	}
	/* Whatever the lexer missed: the file must not have ended it. */
	if (PQtransactionStatus(c) != PQTRANS_INTRANS) {
		snprintf(why, TL_WHY_MAX, "the file ended the transaction "
		    "tally runs it in (COMMIT or ROLLBACK inside it)");
		rc = TL_EDRIVER;
		goto out;
	}
	{
		const char *pv[2] = { m->file, m->checksum };

		/* The record commits with the file, or neither does. */
		r = PQexecParams(c, "INSERT INTO tally.schema_history "
		    "(file, checksum) VALUES ($1, $2)", 2, NULL, pv, NULL,
		    NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			snprintf(why, TL_WHY_MAX, "recording %s in "
			    "tally.schema_history: %s", m->file,
			    PQerrorMessage(c));
			rc = TL_EDRIVER;
		}
		PQclear(r);
	}
	if (rc == 0 && !exec_ok(c, "COMMIT", why))
		rc = TL_EDRIVER;
	else if (rc != 0) {
		char ignored[TL_WHY_MAX];

		exec_ok(c, "ROLLBACK", ignored);
	}
out:
	free(text);
	PQfinish(c);
	return rc;
}
