/*
 * cmd_check.c - tally check: verify grants now; tally repair: recreate
 * a missing one deliberately.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "projections/grant.h"
#include "projections/status.h"
#include "tally.h"

static const char check_usage[] =
"usage: tally check [GRANT | --provider NODE/MODULE | --all] [--json]\n"
"\n"
"Verifies grants now, exactly as tallyd's verifier does, and records\n"
"what it finds the same way: the resource exists, the recorded\n"
"credential logs in on the routable name, attributes and privileges are\n"
"what tally set.  A frozen password or changed privileges are repaired\n"
"from the admin side; a missing resource is reported, never recreated (see\n"
"tally repair).  Each grant's line says what was found and what was\n"
"done (--json: \"found\": {drift, reason, action, repaired}).\n"
"Exits 0 when nothing needed attention, 8 when drift was found and\n"
"repaired (healthy now), 6 when anything is still not healthy.\n";

static const char repair_usage[] =
"usage: tally repair GRANT\n"
"\n"
"Asks tallyd to recreate a grant whose resource or login went missing,\n"
"with the same credential.  The data that was lost does not come back:\n"
"this only makes an empty resource exist again, and records who asked.\n";

struct check_opts {
	const char	*grant;
	const char	*provider;
};

struct show_arg {
	const struct check_opts *o;
	json_t	*out;
	json_t	*found;		/* grant -> what this check found */
	int	 bad;
	unsigned repaired;
	unsigned checked, unhealthy;	/* tallyd's closing counts */
	int	 summary;		/* they came */
};

/*
 * A line of tallyd --check: a finding, or the closing counts.  Only
 * what parses as tallyd says it is kept; anything else is ignored.
 */
static void
found(const char *line, void *arg)
{
	struct show_arg *sa = arg;
	json_t *doc = json_loads(line, 0, NULL), *g;

	if (doc == NULL)
		return;
	if (json_is_integer(json_object_get(doc, "checked"))) {
		sa->checked = (unsigned)json_integer_value(json_object_get(doc,
		    "checked"));
		sa->unhealthy = (unsigned)json_integer_value(json_object_get(
		    doc, "unhealthy"));
		sa->summary = 1;
	} else if (json_is_string(g = json_object_get(doc, "grant"))) {
		if (json_is_true(json_object_get(doc, "repaired")))
			sa->repaired++;
		json_object_set_new(sa->found, json_string_value(g), json_pack(
		    "{s:O?,s:O?,s:O?,s:b}", "drift", json_object_get(doc,
		    "drift"), "reason", json_object_get(doc, "reason"),
		    "action", json_object_get(doc, "action"), "repaired",
		    json_is_true(json_object_get(doc, "repaired"))));
	}
	json_decref(doc);
}

static int
one(const struct tl_grant *g, void *arg)
{
	struct show_arg *sa = arg;

	if (sa->o->grant && strcmp(sa->o->grant, g->id) != 0)
		return 0;
	if (sa->o->provider && strcmp(sa->o->provider, g->provider) != 0)
		return 0;
	/* Nothing is verified of a revoked grant, nor of a purged one. */
	if (strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0)
		return 0;
	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0 || g->drift[0] != '\0')
		sa->bad++;
	json_array_append_new(sa->out, json_pack("{s:s,s:s,s:s,s:s}", "grant",
	    g->id, "provider", g->provider, "state", g->state, "drift",
	    g->drift[0] ? g->drift_reason : ""));
	return 0;
}

static int
show(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p, void *arg)
{
	struct show_arg *sa = arg;
	const json_t *e;
	size_t i;

	sa->out = json_array();
	tl_grant_each(t, p, one, sa);
	json_array_foreach(sa->out, i, e) {
		uint64_t last = 0, count = 0;
		const char *id = json_string_value(json_object_get(e, "grant"));

		tl_checks_get(t, id, &last, &count);
		{
			char k[TL_KEY_MAX];

			if (tl_key(k, "pu/%s", json_string_value(
			    json_object_get(e, "provider"))) == 0 &&
			    tl_rec_exists(t, p->graph, k)) {
				json_object_set_new((json_t *)e, "drift",
				    json_string("provider unreachable (see "
				    "tally status)"));
				sa->bad++;
			}
		}
		if (last) {
			char ts[64];

			tl_json_time(last, ts);
			json_object_set_new((json_t *)e, "last_verified",
			    json_string(ts));
		}
		json_object_set_new((json_t *)e, "checks", json_integer(
		    (json_int_t)count));
		if (json_object_get(sa->found, id) != NULL)
			json_object_set((json_t *)e, "found",
			    json_object_get(sa->found, id));
	}
	if (cli->json) {
		json_dumpf(sa->out, stdout, JSON_COMPACT);
		putchar('\n');
	} else
		json_array_foreach(sa->out, i, e) {
			const char *d = json_string_value(json_object_get(e,
			    "drift"));
			const json_t *fd = json_object_get(e, "found");

			printf("%-32s %-12s ", json_string_value(
			    json_object_get(e, "grant")), json_string_value(
			    json_object_get(e, "state")));
			if (fd != NULL)
				printf("found %s: %s; %s\n", json_string_value(
				    json_object_get(fd, "drift")),
				    json_string_value(json_object_get(fd,
				    "reason")), json_string_value(
				    json_object_get(fd, "action")));
			else
				printf("%s%s\n", *d ? "drift: " : "healthy",
				    d);
		}
	json_decref(sa->out);
	return TL_EXIT_OK;
}

int
cmd_check(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "provider", required_argument, NULL, 'p' },
		{ "all", no_argument, NULL, 'a' },
		{ 0 }
	};
	struct check_opts o = { NULL, NULL };
	struct show_arg sa;
	const char *args[8];
	unsigned checked, bad;
	int c, ex, n = 0;

	memset(&sa, 0, sizeof(sa));
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o.provider = optarg;
			break;
		case 'a':
			break;
		CLI_COMMON_CASES(cli, check_usage);
		}
	}
	if (optind + 1 < argc || (optind < argc && o.provider)) {
		fputs(check_usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (optind < argc)
		o.grant = argv[optind];
	/*
	 * A check appends what it finds and repairs on the providers: a
	 * standby refuses it here, and tallyd --check (the one program
	 * that opens provider sessions) refuses it when deposed, after the
	 * stream and the fences, exactly as its daemon would (exit 9).
	 */
	if ((ex = cli_standby_refuse(cli)) != 0)
		return ex;
	args[n++] = "--check";
	args[n++] = "--actor";
	args[n++] = cli->actor;
	if (o.grant != NULL) {
		args[n++] = "--grant";
		args[n++] = o.grant;
	} else if (o.provider != NULL) {
		args[n++] = "--provider";
		args[n++] = o.provider;
	}
	args[n] = NULL;
	if ((sa.found = json_object()) == NULL)
		return cli_fail(cli, ENOMEM, "check");
	ex = cli_tallyd(cli, args, NULL, 0, found, &sa);
	if (ex == 0 && !sa.summary) {
		cli_errx("tallyd --check ended without its counts");
		ex = TL_EXIT_FAIL;
	}
	if (ex != 0) {
		json_decref(sa.found);
		return ex;
	}
	checked = sa.checked;
	bad = sa.unhealthy;
	if ((ex = cli_open_log(cli, 0)) != 0) {
		json_decref(sa.found);
		return ex;
	}
	sa.o = &o;
	ex = cli_read(cli, 0, show, &sa);
	json_decref(sa.found);
	if (ex != 0)
		return ex;
	if (!cli->json)
		printf("checked %u grant(s): %u repaired, %u not healthy\n",
		    checked, sa.repaired, bad + (unsigned)(sa.bad > (int)bad ?
		    sa.bad - (int)bad : 0));
	if (o.grant != NULL && checked == 0 && sa.bad == 0) {
		cli_errx("no provisioned grant %s", o.grant);
		return TL_EXIT_NOTFOUND;
	}
	/* Like fsck: repaired is not "nothing needed attention". */
	if (bad > 0 || sa.bad > 0)
		return TL_EXIT_UNHEALTHY;
	return sa.repaired > 0 ? TL_EXIT_REPAIRED : TL_EXIT_OK;
}

static int
do_repair(struct tl_ctx *c, void *arg)
{
	return tl_dec_repair(c, arg);
}

int
cmd_repair(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	int c, ex;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, repair_usage);
		}
	}
	if (optind + 1 != argc) {
		fputs(repair_usage, stderr);
		return TL_EXIT_USAGE;
	}
	ex = cli_write(cli, do_repair, argv[optind], NULL);
	if (ex == 0 && !cli->json)
		printf("repair of %s requested: tallyd recreates it (empty)\n",
		    argv[optind]);
	return ex;
}
