/*
 * cmd_history.c - tally history: one stream's (or one grant's) events,
 * with who did what, why (the causing event) and when, in the domain
 * words of tl_describe (projections/describe.c).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/vec.h"
#include "projections/describe.h"
#include "tally.h"

static const char usage[] =
"usage: tally history STREAM [--json]\n"
"\n"
"The events of a stream in order: time, sequence number, actor, what\n"
"happened in words, and the event that caused it.  STREAM is a stream\n"
"(node/N, module/M, assignment/M@N, provider/N/M, binding/G, grant/G),\n"
"or a grant id (M/REQ or M/REQ@NODE: its grant and binding streams),\n"
"M@N (an assignment), or a bare name (its module and node streams).\n"
"--json prints JSON lines: the event as `tally log --json` shows it,\n"
"plus \"summary\" and, for a caused event, \"cause_type\".\n";

/* --- the command ---------------------------------------------------- */

struct seqs {
	uint64_t	*v;
	size_t		 n, cap;
};

static int
add_stream(struct tl_txn *t, const char *stream, struct seqs *s,
    size_t *found)
{
	struct tl_filter f = { 0 };
	struct tl_iter *it;
	struct tl_event ev;
	int rc;

	f.stream = stream;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		if (tl_vec_grow(&s->v, &s->cap, s->n + 1,
		    sizeof(s->v[0])) != 0) {
			rc = ENOMEM;
			break;
		}
		s->v[s->n++] = ev.seq;
		(*found)++;
	}
	tl_iter_close(it);
	return rc == TL_EEOF ? 0 : rc;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
has_kind(const char *s)
{
	static const char *const kinds[] = { "node/", "module/",
	    "assignment/", "provider/", "binding/", "grant/", "publisher/" };
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strncmp(s, kinds[i], strlen(kinds[i])) == 0)
			return 1;
	return 0;
}

int
cmd_history(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	char names[3][TL_STREAM_MAX + 1];
	struct seqs s = { NULL, 0, 0 };
	struct tl_txn *t = NULL;
	struct tl_event ev, cause;
	const char *arg;
	size_t nn = 0, i, found = 0;
	int c, rc, ex = TL_EXIT_OK;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 1 != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	arg = argv[optind];
	if (strlen(arg) == 0 || strlen(arg) > TL_STREAM_MAX - 16) {
		cli_errx("history: a stream or grant id, please");
		return TL_EXIT_USAGE;
	}
	if ((rc = cli_open_log(cli, TL_LOG_RDONLY)) != 0)
		return rc;
	if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY, &t)) != 0)
		return cli_fail(cli, rc, "read the log");
	/* Which streams: a stream as named, else what the name means. */
	if (has_kind(arg)) {
		uint64_t ver = 0;

		snprintf(names[nn++], sizeof(names[0]), "%s", arg);
		if (strncmp(arg, "grant/", 6) == 0)
			snprintf(names[nn++], sizeof(names[0]), "binding/%s",
			    arg + 6);
		/* "node/db" may also be the grant id of module "node". */
		if (tl_stream_version(t, arg, &ver) != 0 || ver == 0) {
			nn = 0;
			if (strchr(arg, '/') != NULL) {
				snprintf(names[nn++], sizeof(names[0]),
				    "grant/%s", arg);
				snprintf(names[nn++], sizeof(names[0]),
				    "binding/%s", arg);
			}
		}
	} else if (strchr(arg, '/') != NULL) {
		snprintf(names[nn++], sizeof(names[0]), "grant/%s", arg);
		snprintf(names[nn++], sizeof(names[0]), "binding/%s", arg);
	} else if (strchr(arg, '@') != NULL)
		snprintf(names[nn++], sizeof(names[0]), "assignment/%s", arg);
	else {
		snprintf(names[nn++], sizeof(names[0]), "module/%s", arg);
		snprintf(names[nn++], sizeof(names[0]), "node/%s", arg);
	}
	for (i = 0; i < nn; i++)
		if ((rc = add_stream(t, names[i], &s, &found)) != 0) {
			ex = cli_fail(cli, rc, "read the log");
			goto out;
		}
	if (found == 0) {
		cli_errx("no events for %s", arg);
		ex = TL_EXIT_NOTFOUND;
		goto out;
	}
	qsort(s.v, s.n, sizeof(*s.v), cmp_u64);
	if (!cli->json) {
		printf("history of %s:", arg);
		for (i = 0; i < nn; i++) {
			uint64_t ver = 0;

			if (tl_stream_version(t, names[i], &ver) == 0 && ver)
				printf(" %s (v%llu)", names[i],
				    (unsigned long long)ver);
		}
		putchar('\n');
	}
	for (i = 0; i < s.n; i++) {
		char what[1024], ts[64];
		int have_cause;

		if (i > 0 && s.v[i] == s.v[i - 1])
			continue;
		if ((rc = tl_log_get(t, s.v[i], &ev)) != 0) {
			ex = cli_fail(cli, rc, "read the log");
			goto out;
		}
		tl_describe(&ev, what, sizeof(what));
		have_cause = ev.cause != 0 &&
		    tl_log_get(t, ev.cause, &cause) == 0;
		if (cli->json) {
			json_t *j = tl_json_event(&ev);

			if (j == NULL) {
				ex = TL_EXIT_CORRUPT;
				goto out;
			}
			json_object_set_new(j, "summary", json_string(what));
			if (have_cause)
				json_object_set_new(j, "cause_type",
				    json_string(cause.type));
			json_dumpf(j, stdout, JSON_COMPACT);
			putchar('\n');
			json_decref(j);
			continue;
		}
		tl_json_time(ev.ts, ts);
		ts[23] = 'Z';
		ts[24] = '\0';
		printf("%s  #%-6llu %-24s %s\n", ts, (unsigned long long)ev.seq,
		    ev.actor, what);
		if (have_cause) {
			char cw[1024];

			tl_describe(&cause, cw, sizeof(cw));
			printf("%26s because of #%llu %s: %s\n", "",
			    (unsigned long long)ev.cause, cause.type, cw);
		}
	}
out:
	free(s.v);
	tl_log_abort(t);
	return ex;
}
