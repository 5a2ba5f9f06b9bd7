/*
 * pg_migrate.c - consumer-owned migrations, run with the consumer's
 * own credential so that they can only touch the consumer's database.
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
	r = PQexec(c, text);
	if (PQresultStatus(r) != PGRES_COMMAND_OK &&
	    PQresultStatus(r) != PGRES_TUPLES_OK &&
	    PQresultStatus(r) != PGRES_EMPTY_QUERY) {
		const char *pos = PQresultErrorField(r, PG_DIAG_STATEMENT_POSITION);
		const char *msg = PQresultErrorField(r,
		    PG_DIAG_MESSAGE_PRIMARY);
		const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);

		if (pos != NULL)
			*line = line_of(text, len, strtol(pos, NULL, 10));
		snprintf(why, TL_DRV_WHY_MAX, "%s%s%s", state ? state : "",
		    state ? ": " : "", msg ? msg : PQerrorMessage(c));
		PQclear(r);
		{
			char ignored[TL_DRV_WHY_MAX];

			/* Nothing half-applied: the session ends anyway. */
			exec_ok(c, "ROLLBACK", ignored);
		}
		rc = TL_EDRIVER;
		goto out;
	}
	PQclear(r);
	if (!exec_ok(c, "COMMIT", why))
		rc = TL_EDRIVER;
out:
	free(text);
	PQfinish(c);
	return rc;
}
