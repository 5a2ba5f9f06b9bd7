/*
 * cmd_purge.c - tally purge (the only way data is destroyed), tally
 * restore (take a retained grant back), tally grants (list them).
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "projections/grant.h"
#include "tally.h"

static const char purge_usage[] =
"usage: tally purge GRANT [--yes]\n"
"\n"
"Destroys the data a revoked grant retained (what its driver kept:\n"
"tally providers says what purge destroys).\n"
"This is the only way tally destroys data.  Without --yes the grant's\n"
"name must be typed again on standard input.  Who did it is recorded.\n";

static const char restore_usage[] =
"usage: tally restore GRANT\n"
"\n"
"Takes a revoked grant whose data was retained back for its consumer\n"
"(re-added under the same name): tallyd issues a new credential, the\n"
"old one stays disabled, and the data is where it was.\n";

static const char grants_usage[] =
"usage: tally grants [--revoked] [--json]\n"
"\n"
"Lists grants: id, state, provider, credential version.  --revoked\n"
"lists only revoked ones, saying whether their data was retained.\n";

static int
do_purge(struct tl_ctx *c, void *arg)
{
	return tl_dec_purge(c, arg);
}

static int
do_restore(struct tl_ctx *c, void *arg)
{
	return tl_dec_restore(c, arg);
}

int
cmd_purge(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "yes", no_argument, NULL, 'y' },
		{ 0 }
	};
	char typed[256];
	int c, yes = 0, ex;

	while ((c = getopt_long(argc, argv, "hy", opts, NULL)) != -1) {
		switch (c) {
		case 'y':
			yes = 1;
			break;
		CLI_COMMON_CASES(cli, purge_usage);
		}
	}
	if (optind + 1 != argc) {
		fputs(purge_usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (!yes) {
		fprintf(stderr, "This destroys the data of %s for good.\n"
		    "Type the grant's name to confirm: ", argv[optind]);
		if (fgets(typed, sizeof(typed), stdin) == NULL)
			typed[0] = '\0';
		typed[strcspn(typed, "\r\n")] = '\0';
		if (strcmp(typed, argv[optind]) != 0) {
			cli_errx("not confirmed: nothing purged");
			return TL_EXIT_REFUSED;
		}
	}
	ex = cli_write(cli, do_purge, argv[optind], NULL);
	if (ex == 0 && !cli->json)
		printf("purge of %s requested: tallyd drops its data\n",
		    argv[optind]);
	return ex;
}

int
cmd_restore(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	int c, ex;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, restore_usage);
		}
	}
	if (optind + 1 != argc) {
		fputs(restore_usage, stderr);
		return TL_EXIT_USAGE;
	}
	ex = cli_write(cli, do_restore, argv[optind], NULL);
	if (ex == 0 && !cli->json)
		printf("restore of %s requested: tallyd issues a new "
		    "credential\n", argv[optind]);
	return ex;
}

struct list_arg {
	struct tl_cli	*cli;
	int		 revoked;
	json_t		*out;
};

static int
one(const struct tl_grant *g, void *arg)
{
	struct list_arg *la = arg;
	char state[64];

	/* Being purged is still there: listed until the purge is done. */
	if (la->revoked && strcmp(g->state, TL_GRANT_REVOKED) != 0 &&
	    strcmp(g->state, TL_GRANT_PURGING) != 0 &&
	    strcmp(g->state, TL_GRANT_PURGED) != 0)
		return 0;
	if (strcmp(g->state, TL_GRANT_REVOKED) == 0 &&
	    strcmp(g->policy, "drop") != 0 && g->retained_bytes > 0)
		snprintf(state, sizeof(state), "revoked (data retained, %.1f "
		    "MiB)", (double)g->retained_bytes / 1048576.0);
	else if (strcmp(g->state, TL_GRANT_REVOKED) == 0)
		snprintf(state, sizeof(state), "revoked (data %s)",
		    strcmp(g->policy, "drop") == 0 ? "dropped" : "retained");
	else
		snprintf(state, sizeof(state), "%s", g->state);
	json_array_append_new(la->out, json_pack("{s:s,s:s,s:s,s:I,s:s,s:I}",
	    "grant", g->id, "state", state, "provider", g->provider, "version",
	    (json_int_t)g->version, TL_GRANT_OBJECT_KEY, g->object, "retained_bytes",
	    (json_int_t)g->retained_bytes));
	return 0;
}

static int
list(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p, void *arg)
{
	struct list_arg *la = arg;
	const json_t *e;
	size_t i;
	int rc;

	la->out = json_array();
	if ((rc = tl_grant_each(t, p, one, la)) != 0) {
		json_decref(la->out);
		return cli_fail(cli, rc, "grants");
	}
	if (cli->json) {
		json_dumpf(la->out, stdout, JSON_COMPACT);
		putchar('\n');
	} else
		json_array_foreach(la->out, i, e)
			printf("%-36s %-24s %-20s v%lld %s\n",
			    json_string_value(json_object_get(e, "grant")),
			    json_string_value(json_object_get(e, "state")),
			    json_string_value(json_object_get(e, "provider")),
			    json_integer_value(json_object_get(e, "version")),
			    json_string_value(json_object_get(e, TL_GRANT_OBJECT_KEY)));
	json_decref(la->out);
	return TL_EXIT_OK;
}

int
cmd_grants(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "revoked", no_argument, NULL, 'r' },
		{ 0 }
	};
	struct list_arg la = { cli, 0, NULL };
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			la.revoked = 1;
			break;
		CLI_COMMON_CASES(cli, grants_usage);
		}
	}
	if (optind != argc) {
		fputs(grants_usage, stderr);
		return TL_EXIT_USAGE;
	}
	return cli_read(cli, 0, list, &la);
}
