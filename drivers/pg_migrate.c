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
 */
#include <ctype.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "driver.h"

int	tl_drv_pg_migrate(const struct tl_drv_endpoint *ep,
	    const struct tl_drv_grant *g, const char *sql, size_t len,
	    char *why, int *line);

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
		snprintf(why, TL_DRV_WHY_MAX, "%s", PQerrorMessage(c));
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

int
tl_drv_pg_migrate(const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, const char *sql, size_t len, char *why,
    int *line)
{
	const char *keys[] = { "host", "port", "user", "password", "dbname",
	    "connect_timeout", "application_name", NULL };
	const char *vals[] = { ep->host, ep->port, g->login, g->password,
	    g->resource, "5", "tally-migrate", NULL };
	PGconn *c;
	PGresult *r;
	char *text;
	unsigned done = 0;
	int rc = 0;

	*line = 0;
	why[0] = '\0';
	c = PQconnectdbParams(keys, vals, 0);
	if (PQstatus(c) != CONNECTION_OK) {
		snprintf(why, TL_DRV_WHY_MAX, "cannot connect as %s: %s",
		    g->login, PQerrorMessage(c));
		PQfinish(c);
		return TL_EUNREACH;
	}
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
			snprintf(why, TL_DRV_WHY_MAX, "%s inside a migration: "
			    "tally runs each file in a transaction of its own "
			    "(leave out BEGIN, COMMIT and ROLLBACK; savepoints "
			    "are fine)", what);
			*line = at;
			rc = TL_EDRIVER;
			goto out;
		}
	}
	if (!exec_ok(c, "BEGIN", why)) {
		rc = TL_EDRIVER;
		goto out;
	}
	/* One result per statement that completed, then the error. */
	if (!PQsendQuery(c, text)) {
		snprintf(why, TL_DRV_WHY_MAX, "%s", PQerrorMessage(c));
		rc = TL_EDRIVER;
		goto out;
	}
	while ((r = PQgetResult(c)) != NULL) {
		ExecStatusType st = PQresultStatus(r);

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
			snprintf(why, TL_DRV_WHY_MAX, "COPY ... %s is not "
			    "supported in a migration", st == PGRES_COPY_IN ?
			    "FROM STDIN" : "TO STDOUT");
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
			snprintf(why, TL_DRV_WHY_MAX, "%s%s%s", state ? state :
			    "", state ? ": " : "", msg ? msg :
			    PQerrorMessage(c));
			rc = TL_EDRIVER;
		}
		PQclear(r);
	}
	if (rc != 0) {
		char ignored[TL_DRV_WHY_MAX];

		/* Nothing half-applied: the session ends anyway. */
		exec_ok(c, "ROLLBACK", ignored);
		goto out;
	}
	/* Whatever the lexer missed: the file must not have ended it. */
	if (PQtransactionStatus(c) != PQTRANS_INTRANS) {
		snprintf(why, TL_DRV_WHY_MAX, "the file ended the transaction "
		    "tally runs it in (COMMIT or ROLLBACK inside it)");
		rc = TL_EDRIVER;
	} else if (!exec_ok(c, "COMMIT", why))
		rc = TL_EDRIVER;
out:
	free(text);
	PQfinish(c);
	return rc;
}
