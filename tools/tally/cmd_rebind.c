/*
 * cmd_rebind.c - tally rebind: move a grant to another provider, with
 * its data (a migration, so only with --migrate).
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "projections/grant.h"
#include "projections/rebind.h"
#include "tally.h"

static const char usage[] =
"usage: tally rebind MODULE/REQUIREMENT[@NODE] PROVIDER --migrate [--json]\n"
"       tally rebind MODULE/REQUIREMENT[@NODE] PROVIDER --empty [--json]\n"
"\n"
"Moves a provisioned grant to another provider (NODE/MODULE).  Changing\n"
"a binding moves data, so it is a migration and never a configuration\n"
"change: without --migrate the command is refused (exit 4) and says what\n"
"it would do.  With --migrate, tallyd creates a fresh resource with a new\n"
"credential on PROVIDER, makes the current one read-only and ends its\n"
"sessions, copies it (the driver's copy) and compares every\n"
"table's row count.  Only a verified copy is switched to: the binding\n"
"moves and the new values are delivered to every holder, who acknowledge\n"
"them as in a rotation (tally ack NODE MODULE VERSION).  Then the old\n"
"login is disabled and the old resource kept (retained, read-only).\n"
"Refused up front for a driver that cannot move data.\n"
"Every step is an event; a crash resumes; a failure before the switch\n"
"leaves the old grant serving and tally status says why.  Refused while\n"
"the grant rotates (and a rotation is refused while it moves).\n"
"--empty is for a lost grant (its node is gone: tally node lost): it is\n"
"bound to PROVIDER afresh and gets a new, EMPTY resource there, with a\n"
"new credential; the old data is not copied, because it is gone.\n";

struct rebind_arg {
	const char	*grant;
	const char	*provider;
	int		 migrate;
	int		 empty;
	struct tl_rebind mv;
};

static int
do_rebind(struct tl_ctx *c, void *arg)
{
	struct rebind_arg *ra = arg;
	int rc;

	if (ra->empty)
		return tl_dec_rebind_empty(c, ra->grant, ra->provider);
	if ((rc = tl_dec_rebind(c, ra->grant, ra->provider, ra->migrate)) != 0)
		return rc;
	return tl_mv_get(c->t, &c->p, ra->grant, &ra->mv);
}

int
cmd_rebind(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "migrate", no_argument, NULL, 'm' },
		{ "empty", no_argument, NULL, 'E' },
		{ 0 }
	};
	struct rebind_arg ra;
	int c, ex;

	memset(&ra, 0, sizeof(ra));
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			ra.migrate = 1;
			break;
		case 'E':
			ra.empty = 1;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 2 != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (ra.empty && ra.migrate) {
		cli_errx("--empty and --migrate exclude each other: --migrate "
		    "copies the data, --empty starts with none");
		return TL_EXIT_USAGE;
	}
	ra.grant = argv[optind];
	ra.provider = argv[optind + 1];
	ex = cli_write(cli, do_rebind, &ra, NULL);
	if (ex != 0)
		return ex;
	if (ra.empty) {
		if (cli->json)
			cli_json_done(cli, json_pack("{s:s,s:s,s:b}", "grant",
			    ra.grant, "to", ra.provider, "empty", 1));
		else
			printf("%s bound to %s: a new, EMPTY resource with a "
			    "new credential (the old data is gone with its "
			    "node, nothing is copied); tallyd provisions it "
			    "and delivers to every holder\n", ra.grant,
			    ra.provider);
		return TL_EXIT_OK;
	}
	if (cli->json) {
		json_t *j = json_pack("{s:s,s:s,s:s,s:I,s:I}", "grant",
		    ra.grant, "from", ra.mv.from, "to", ra.mv.to, "version",
		    (json_int_t)ra.mv.version, "old_version",
		    (json_int_t)ra.mv.old_version);

		cli_json_done(cli, j);
	} else
		printf("moving %s from %s to %s (credential v%llu): tallyd "
		    "copies and verifies the data, then switches and delivers; "
		    "tally ack NODE MODULE %llu as each holder switches; see "
		    "tally status\n", ra.grant, ra.mv.from, ra.mv.to,
		    (unsigned long long)ra.mv.version,
		    (unsigned long long)ra.mv.version);
	return TL_EXIT_OK;
}
