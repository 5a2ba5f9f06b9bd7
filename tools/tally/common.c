/*
 * common.c - what every tally command shares: finding the home,
 * opening the log, reporting errors, exit codes, printing events.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "tally.h"

const char *tl_prog = "tally";

void
cli_errx(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", tl_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void
cli_warnx(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: warning: ", tl_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int
cli_set_home(struct tl_cli *cli, const char *home)
{
	if (home == NULL || *home == '\0' ||
	    strlen(home) >= sizeof(cli->home)) {
		cli_errx("invalid home directory");
		return -1;
	}
	snprintf(cli->home, sizeof(cli->home), "%s", home);
	snprintf(cli->logdir, sizeof(cli->logdir), "%s/log", cli->home);
	return 0;
}

void
cli_init(struct tl_cli *cli)
{
	const char *h, *xdg, *user = NULL;
	struct passwd *pw;
	char host[64] = "";

	memset(cli, 0, sizeof(*cli));
	/* --home > TALLY_HOME > /var/lib/tally (root) > XDG data home. */
	if ((h = getenv("TALLY_HOME")) != NULL && *h != '\0')
		cli_set_home(cli, h);
	else if (geteuid() == 0)
		cli_set_home(cli, "/var/lib/tally");
	else if ((xdg = getenv("XDG_DATA_HOME")) != NULL && *xdg != '\0') {
		char p[1024];

		snprintf(p, sizeof(p), "%s/tally", xdg);
		cli_set_home(cli, p);
	} else if ((h = getenv("HOME")) != NULL) {
		char p[1024];

		snprintf(p, sizeof(p), "%s/.local/share/tally", h);
		cli_set_home(cli, p);
	} else
		cli_set_home(cli, ".tally");

	if ((pw = getpwuid(geteuid())) != NULL)
		user = pw->pw_name;
	gethostname(host, sizeof(host) - 1);
	snprintf(cli->actor, sizeof(cli->actor), "cli:%s@%s",
	    user ? user : "?", host);
}

int
cli_exit_for(int err)
{
	if (tl_err_corrupt(err))
		return TL_EXIT_CORRUPT;
	switch (err) {
	case 0:
		return TL_EXIT_OK;
	case TL_ENOTFOUND:
		return TL_EXIT_NOTFOUND;
	case TL_ECORRUPT:
	case TL_EMALFORMED:
		return TL_EXIT_CORRUPT;
	case TL_ECONFLICT:
	case TL_EREFUSED:
	case TL_EMANIFEST:
	case TL_EEXIST:
	case TL_EINVAL:
	case TL_ETOOBIG:
		return TL_EXIT_REFUSED;
	case TL_ELOCKED:
	case TL_ENOTLEADER:
		return TL_EXIT_LOCKED;
	default:
		return TL_EXIT_FAIL;
	}
}

int
cli_fail(struct tl_cli *cli, int err, const char *what)
{
	const char *detail = cli->log ? tl_log_lasterr(cli->log) : "";

	if (tl_err_corrupt(err) && err != TL_ECORRUPT && err != TL_EMALFORMED)
		/* LMDB's own word for a damaged page, untranslated: say where. */
		cli_errx("%s: the log's data file (%s/data.mdb) is damaged: %s; "
		    "see tally verify", what, cli->logdir, tl_strerror(err));
	else if ((err == TL_ELMDB || tl_err_corrupt(err)) && *detail)
		cli_errx("%s: %s (%s)", what, tl_strerror(err), detail);
	else
		cli_errx("%s: %s", what, tl_strerror(err));
	return cli_exit_for(err);
}

tl_commit_fn cli_commit_hook;

int
cli_open_log(struct tl_cli *cli, unsigned flags)
{
	char why[TL_WHY_MAX];
	int rc;

	rc = tl_log_open_opts(cli->logdir, &(struct tl_log_opts){
	    .flags = flags & ~CLI_OPEN_READER, .why = why }, &cli->log);
	if (rc == EROFS && (flags & CLI_OPEN_READER)) {
		/*
		 * A read-only file system: read as a reader does (no
		 * lock file).  Projections behind the log cannot be caught up
		 * then, and cli_read says so.
		 */
		rc = tl_log_open_opts(cli->logdir, &(struct tl_log_opts){
		    .flags = TL_LOG_RDONLY, .why = why }, &cli->log);
	}
	switch (rc) {
	case 0:
		if (cli_commit_hook != NULL && tl_log_clustered(cli->log))
			tl_log_set_commit(cli->log, cli_commit_hook, cli);
		return 0;
	case TL_ECORRUPT:
		cli_errx("%s", why[0] ? why : tl_strerror(rc));
		break;
	case TL_ENOTFOUND:
		cli_errx("no tally log at %s (run `tally init`, or set "
		    "--home / TALLY_HOME)", cli->home);
		break;
	case TL_ENOTLOG:
		cli_errx("%s is not a tally log", cli->logdir);
		break;
	case TL_ENEWER:
		cli_errx("%s was written by a newer tally: upgrade tally",
		    cli->logdir);
		break;
	default:
		cli_errx("cannot open the log at %s: %s", cli->logdir,
		    tl_strerror(rc));
		break;
	}
	return cli_exit_for(rc);
}

void
cli_close(struct tl_cli *cli)
{
	tl_log_close(cli->log);
	cli->log = NULL;
}

int
cli_routable_ok(const char *h, char *why)
{
	struct in6_addr a6;
	const char *colon = strchr(h, ':');
	size_t i, n = strlen(h);

	if (colon != NULL && strchr(colon + 1, ':') == NULL) {
		snprintf(why, TL_WHY_MAX, "'%s' is HOST:PORT: a routable name "
		    "is the host alone (%.*s); each provider's port is its own "
		    "setting (tally assign … --set port=N)", h,
		    (int)(colon - h), h);
		return 0;
	}
	if (colon != NULL) {
		if (inet_pton(AF_INET6, h, &a6) == 1)
			return 1;
		snprintf(why, TL_WHY_MAX, "'%s' is neither a host name nor an "
		    "IPv6 address", h);
		return 0;
	}
	if (n == 0 || n > 253) {
		snprintf(why, TL_WHY_MAX, "'%s': a host name is 1-253 bytes",
		    h);
		return 0;
	}
	for (i = 0; i < n; i++)
		if (!(h[i] == '.' || h[i] == '-' || (h[i] >= 'a' &&
		    h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
		    (h[i] >= '0' && h[i] <= '9'))) {
			snprintf(why, TL_WHY_MAX, "'%s' is not a host name or "
			    "address (1-253 of letters, digits, '.', '-'; or "
			    "an IPv6 address)", h);
			return 0;
		}
	return 1;
}

void
cli_fault_at(const char *point)
{
	const char *at = getenv("TALLY_FAULT_AT");

	if (at != NULL && strcmp(at, point) == 0) {
		fflush(NULL);
		raise(SIGKILL);
	}
}

int
cli_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0' || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

void
cli_print_event_text(FILE *fp, const struct tl_event *ev)
{
	char ts[64], *body = NULL;
	json_t *j;

	tl_json_time(ev->ts, ts);
	ts[23] = 'Z';		/* milliseconds are enough for a person */
	ts[24] = '\0';
	if ((j = tl_json_body(ev->body, ev->body_len)) != NULL) {
		body = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(j);
	}
	fprintf(fp, "%8llu  %s  %-24s %s v%llu  %s", (unsigned long long)
	    ev->seq, ts, ev->type, ev->stream,
	    (unsigned long long)ev->version, ev->actor);
	if (ev->cause)
		fprintf(fp, "  cause=%llu", (unsigned long long)ev->cause);
	if (body != NULL && strcmp(body, "{}") != 0)
		fprintf(fp, "  %s", body);
	fputc('\n', fp);
	free(body);
}

int
cli_print_event_json(FILE *fp, const struct tl_event *ev)
{
	json_t *j;
	int rc;

	if ((j = tl_json_event(ev)) == NULL)
		return TL_EMALFORMED;
	rc = json_dumpf(j, fp, JSON_COMPACT);
	json_decref(j);
	fputc('\n', fp);
	return rc == 0 ? 0 : EIO;
}
