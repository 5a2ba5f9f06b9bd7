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

/*
 * The line on which statement number k (from 0) of sql begins, counting
 * only statements with something in them (the server skips empty ones,
 * and so does its result stream); 0 when there are not that many.  A
 * lexer just good enough to find the semicolons that end statements:
 * quoted strings and identifiers, E'' escapes, dollar quotes, -- and
 * nested block comments.
 */
static int
statement_line(const char *sql, size_t len, unsigned k)
{
	size_t i = 0, t;
	unsigned n = 0;
	int line = 1, start = 0, depth;

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
		if (c == ';') {
			if (start != 0 && n++ == k)
				return start;
			start = 0;
			i++;
			continue;
		}
		if (start == 0)
			start = line;	/* the statement's first token */
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
		i++;
	}
	return start != 0 && n == k ? start : 0;
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
	if (!exec_ok(c, "COMMIT", why))
		rc = TL_EDRIVER;
out:
	free(text);
	PQfinish(c);
	return rc;
}
