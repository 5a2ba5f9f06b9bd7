/*
 * cmd_history.c - tally history: one stream's (or one grant's) events,
 * with who did what, why (the causing event) and when; and the domain
 * words every audit command shares (cli_describe).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
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

/* --- domain words --------------------------------------------------- */

static const char *
js(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s != NULL ? s : "?";
}

static long long
ji(const json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

/* "a, b, c" from an array of strings (or of objects with key). */
static void
join(const json_t *arr, const char *key, char *buf, size_t cap)
{
	const json_t *v;
	size_t i, n = 0;

	buf[0] = '\0';
	json_array_foreach(arr, i, v) {
		const char *s = key ? json_string_value(json_object_get(v,
		    key)) : json_string_value(v);

		if (s == NULL)
			continue;
		n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s",
		    i ? ", " : "", s);
		if (n >= cap)
			break;
	}
}

static void
say(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
say(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, cap, fmt, ap);
	va_end(ap);
}

void
cli_describe(const struct tl_event *ev, char *buf, size_t cap)
{
	json_t *b = tl_json_body(ev->body, ev->body_len);
	const char *t = ev->type, *g = b ? js(b, "grant") : "?";
	char list[512];

	if (b == NULL) {
		say(buf, cap, "%s on %s (body unreadable)", t, ev->stream);
		return;
	}
	if (strcmp(t, "node.added") == 0)
		say(buf, cap, "node %s added (routable name %s)", js(b, "name"),
		    js(b, "routable"));
	else if (strcmp(t, "node.removed") == 0)
		say(buf, cap, "node %s removed", js(b, "name"));
	else if (strcmp(t, "module.declared") == 0) {
		join(json_object_get(b, "provides"), "type", list,
		    sizeof(list));
		say(buf, cap, "module %s declared%s%s%s", js(b, "name"),
		    list[0] ? " (provides " : "", list, list[0] ? ")" : "");
	} else if (strcmp(t, "module.removed") == 0)
		say(buf, cap, "module %s removed", js(b, "name"));
	else if (strcmp(t, "requirement.declared") == 0)
		say(buf, cap, "module %s requires %s: %s %s%s%s", js(b, "module"),
		    js(b, "name"), js(b, "kind"), json_object_get(b, "type") ?
		    js(b, "type") : js(b, "target"), json_object_get(b,
		    "scope") ? ", " : "", json_object_get(b, "scope") ?
		    js(b, "scope") : "");
	else if (strcmp(t, "requirement.withdrawn") == 0)
		say(buf, cap, "module %s no longer requires %s", js(b, "module"),
		    js(b, "name"));
	else if (strcmp(t, "assignment.created") == 0)
		say(buf, cap, "assignment %s@%s created (exposure %s)",
		    js(b, "module"), js(b, "node"), js(b, "expose"));
	else if (strcmp(t, "assignment.configured") == 0)
		say(buf, cap, "assignment %s@%s reconfigured (exposure %s)",
		    js(b, "module"), js(b, "node"), js(b, "expose"));
	else if (strcmp(t, "assignment.removed") == 0)
		say(buf, cap, "assignment %s@%s removed", js(b, "module"),
		    js(b, "node"));
	else if (strcmp(t, "assignment.ready") == 0)
		say(buf, cap, "assignment %s@%s ready", js(b, "module"),
		    js(b, "node"));
	else if (strcmp(t, "provider.registered") == 0) {
		join(json_object_get(b, "types"), "type", list, sizeof(list));
		say(buf, cap, "provider %s registered (%s)", js(b, "id"), list);
	} else if (strcmp(t, "provider.retired") == 0)
		say(buf, cap, "provider %s retired", js(b, "id"));
	else if (strcmp(t, "provider.unreachable") == 0)
		say(buf, cap, "provider %s unreachable: %s", js(b, "id"),
		    js(b, "reason"));
	else if (strcmp(t, "provider.recovered") == 0)
		say(buf, cap, "provider %s reachable again", js(b, "id"));
	else if (strcmp(t, "provider.moved") == 0)
		say(buf, cap, "provider %s moved", js(b, "id"));
	else if (strcmp(t, "binding.made") == 0)
		say(buf, cap, "%s bound to %s (%s)", g, js(b, "provider"),
		    js(b, "reason"));
	else if (strcmp(t, "binding.ambiguous") == 0) {
		join(json_object_get(b, "candidates"), NULL, list,
		    sizeof(list));
		say(buf, cap, "%s ambiguous: candidates %s (tally bind)", g,
		    list);
	} else if (strcmp(t, "binding.moved") == 0)
		say(buf, cap, "%s moved to %s", g, js(b, "provider"));
	else if (strcmp(t, "grant.requested") == 0)
		say(buf, cap, "grant %s requested from %s", g,
		    js(b, "provider"));
	else if (strcmp(t, "grant.provisioning") == 0)
		say(buf, cap, "grant %s: provisioning v%lld on %s", g,
		    ji(b, "version"), js(b, "provider"));
	else if (strcmp(t, "grant.provisioned") == 0)
		say(buf, cap, "grant %s provisioned (v%lld)", g,
		    ji(b, "version"));
	else if (strcmp(t, "grant.failed") == 0)
		say(buf, cap, "grant %s failed: %s", g, js(b, "reason"));
	else if (strcmp(t, "revocation.requested") == 0)
		say(buf, cap, "grant %s: revocation requested (%s)", g,
		    js(b, "reason"));
	else if (strcmp(t, "grant.revoked") == 0)
		say(buf, cap, "grant %s revoked (%s)", g, js(b, "policy"));
	else if (strcmp(t, "grant.purged") == 0)
		say(buf, cap, "grant %s purged: its data dropped", g);
	else if (strcmp(t, "grant.restored") == 0)
		say(buf, cap, "grant %s restored", g);
	else if (strcmp(t, "grant.drifted") == 0)
		say(buf, cap, "grant %s drifted: %s — %s", g, js(b, "kind"),
		    js(b, "reason"));
	else if (strcmp(t, "grant.repaired") == 0)
		say(buf, cap, "grant %s repaired (%s: %s)", g, js(b, "kind"),
		    js(b, "how"));
	else if (strcmp(t, "grant.missing") == 0)
		say(buf, cap, "grant %s missing: %s", g, js(b, "reason"));
	else if (strcmp(t, "repair.requested") == 0)
		say(buf, cap, "grant %s: repair requested", g);
	else if (strcmp(t, "migration.stored") == 0)
		say(buf, cap, "module %s: migration %s stored (%.12s)",
		    js(b, "module"), js(b, "file"), js(b, "checksum"));
	else if (strcmp(t, "migration.applied") == 0)
		say(buf, cap, "grant %s: migration %s applied", g, js(b, "file"));
	else if (strcmp(t, "migration.blocked") == 0)
		say(buf, cap, "grant %s: migration %s blocked: %s", g,
		    js(b, "file"), js(b, "reason"));
	else if (strcmp(t, "credential.delivered") == 0)
		say(buf, cap, "grant %s v%lld delivered to %s (sealed to node "
		    "%s)", g, ji(b, "version"), js(b, "holder"), js(b, "node"));
	else if (strcmp(t, "credential.issued") == 0)
		say(buf, cap, "grant %s: credential v%lld issued", g,
		    ji(b, "version"));
	else if (strcmp(t, "credential.activated") == 0)
		say(buf, cap, "grant %s: credential v%lld active beside the "
		    "old one", g, ji(b, "version"));
	else if (strcmp(t, "credential.acknowledged") == 0)
		say(buf, cap, "%s acknowledged grant %s v%lld", js(b, "holder"),
		    g, ji(b, "version"));
	else if (strcmp(t, "credential.retired") == 0) {
		int forced = json_is_true(json_object_get(b, "forced"));

		join(json_object_get(b, "cut_off"), NULL, list, sizeof(list));
		if (forced && list[0])
			say(buf, cap, "grant %s: credential v%lld retired "
			    "(forced at the deadline, cut off %s)", g,
			    ji(b, "version"), list);
		else
			say(buf, cap, "grant %s: credential v%lld retired%s", g,
			    ji(b, "version"), forced ?
			    " (forced at the deadline)" : "");
	} else if (strcmp(t, "rotation.started") == 0)
		say(buf, cap, "grant %s rotation started v%lld → v%lld (%s)", g,
		    ji(b, "from"), ji(b, "to"), js(b, "reason"));
	else if (strcmp(t, "rotation.completed") == 0)
		say(buf, cap, "grant %s rotated v%lld → v%lld", g,
		    ji(b, "version") - 1, ji(b, "version"));
	else if (strcmp(t, "publisher.configured") == 0)
		say(buf, cap, "publishing to %s, exchange %s (%s)", js(b, "url"),
		    js(b, "exchange"), js(b, "format"));
	else if (strcmp(t, "publisher.disabled") == 0)
		say(buf, cap, "publishing disabled");
	else
		say(buf, cap, "%s on %s", t, ev->stream);
	json_decref(b);
}

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
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 64;
			uint64_t *p = realloc(s->v, cap * sizeof(*p));

			if (p == NULL) {
				rc = ENOMEM;
				break;
			}
			s->v = p;
			s->cap = cap;
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
		cli_describe(&ev, what, sizeof(what));
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

			cli_describe(&cause, cw, sizeof(cw));
			printf("%26s because of #%llu %s: %s\n", "",
			    (unsigned long long)ev.cause, cause.type, cw);
		}
	}
out:
	free(s.v);
	tl_log_abort(t);
	return ex;
}
