/*
 * main.c - the tally command: dispatch to cmd_NAME() through one table.
 */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "core/secret.h"
#include "core/version.h"
#include "tally.h"

static const struct tl_cmd cmds[] = {
	{ "init",	cmd_init,	"create a tally home: log and master key" },
	{ "bootstrap",	cmd_bootstrap,	"a control plane from nothing, from a bundle" },
	{ "log",	cmd_log,	"print events (text or JSON lines)" },
	{ "verify",	cmd_verify,	"check every envelope and the hash chain" },
	{ "stats",	cmd_stats,	"events, bytes, types, checkpoints and lag" },
	{ "node",	cmd_node,	"add, lose (gone for good) or remove a node" },
	{ "apply",	cmd_apply,	"declare modules from YAML manifests" },
	{ "assign",	cmd_assign,	"place a module on a node (with settings)" },
	{ "unassign",	cmd_unassign,	"take a module off a node" },
	{ "remove",	cmd_remove,	"remove a module and revoke its grants" },
	{ "bind",	cmd_bind,	"choose the provider of a requirement" },
	{ "status",	cmd_status,	"each assignment's state, with reasons" },
	{ "graph",	cmd_graph,	"the mesh: text, --json or --dot" },
	{ "explain",	cmd_explain,	"why each requirement is bound where it is" },
	{ "rotate",	cmd_rotate,	"rotate credentials, with fan-out to holders" },
	{ "rebind",	cmd_rebind,	"move a grant to another provider (--migrate)" },
	{ "provider",	cmd_provider,	"provider move: a provider now runs elsewhere" },
	{ "ack",	cmd_ack,	"a holder runs with a credential version" },
	{ "grants",	cmd_grants,	"list grants (--revoked: retained data)" },
	{ "purge",	cmd_purge,	"destroy a revoked grant's retained data" },
	{ "restore",	cmd_restore,	"take a retained grant back" },
	{ "check",	cmd_check,	"verify grants now (and repair drift)" },
	{ "repair",	cmd_repair,	"recreate a missing grant, deliberately" },
	{ "env",	cmd_env,	"an assignment's environment, for its node" },
	{ "rebuild",	cmd_rebuild,	"drop the projections and replay the log" },
	{ "tail",	cmd_tail,	"follow the events (JSON lines with --json)" },
	{ "replay",	cmd_replay,	"graph, grants and status as they were then" },
	{ "mesh",	cmd_mesh,	"the mesh id, its leader, this home's standing" },
	{ "crl",	cmd_crl,	"the mesh CA's certificate revocation list" },
	{ "adopt",	cmd_adopt,	"take over objects tally did not make, or a lost mesh's" },
	{ "promote",	cmd_promote,	"make this standby the leader (next epoch)" },
	{ "snapshot",	cmd_snapshot,	"a consistent copy of the log, for a new home" },
	{ "diff",	cmd_diff,	"what changed between two points, in words" },
	{ "history",	cmd_history,	"a stream's events: actors, causes, times" },
	{ "publish",	cmd_publish,	"where tallyd publishes the record (AMQP)" },
	{ "nodes",	cmd_nodes,	"list the nodes of the mesh" },
	{ "modules",	cmd_modules,	"list the declared modules" },
	{ "providers",	cmd_providers,	"list the providers, their types and grants" },
};

static void
usage(FILE *fp)
{
	size_t i;

	fprintf(fp, "usage: tally [--home DIR] [--json] COMMAND [ARGS]\n"
	    "       tally --version\n\n"
	    "The home is --home, else $TALLY_HOME, else /var/lib/tally for "
	    "root,\nelse $XDG_DATA_HOME/tally or ~/.local/share/tally.\n\n"
	    "Commands:\n");
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(fp, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
	fprintf(fp, "\n`tally COMMAND --help` describes a command.\n\n");
	tl_exit_print(fp, TL_EXIT_BY_TALLY);
}

int
main(int argc, char **argv)
{
	struct tl_cli cli;
	size_t i;
	int rc;

	/* Output goes to pipes (head, grep): a closed one is not an error. */
	signal(SIGPIPE, SIG_DFL);
	/* Keys and passwords in memory never reach a core dump. */
	tl_secret_harden();
	tl_log_fault_exit("tally", TL_EXIT_CORRUPT);
	cli_init(&cli);
	/* Through a pointer: common.c opens logs, cluster.c needs it. */
	cli_commit_hook = cli_cluster_commit;
	argv++;
	argc--;
	/* Global options come before the command: --home, --json. */
	while (argc > 0 && strncmp(argv[0], "--", 2) == 0) {
		const char *h = NULL;

		if (strcmp(argv[0], "--json") == 0) {
			cli.json = 1;
			argv++;
			argc--;
			continue;
		}
		if (strcmp(argv[0], "--version") == 0)
			break;
		if (strcmp(argv[0], "--help") == 0)
			break;
		if (strncmp(argv[0], "--home", 6) != 0 ||
		    (argv[0][6] != '=' && argv[0][6] != '\0')) {
			cli_errx("unknown option '%s' (see tally --help)",
			    argv[0]);
			return TL_EXIT_USAGE;
		}
		if (argv[0][6] == '=')
			h = argv[0] + 7;
		else if (argc > 1) {
			h = argv[1];
			argv++;
			argc--;
		}
		if (h == NULL || cli_set_home(&cli, h) != 0) {
			usage(stderr);
			return TL_EXIT_USAGE;
		}
		argv++;
		argc--;
	}
	if (argc == 0) {
		usage(stderr);
		return TL_EXIT_USAGE;
	}
	if (strcmp(argv[0], "--version") == 0 ||
	    strcmp(argv[0], "version") == 0) {
		if (cli.json) {
			json_t *v = json_pack("{s:s,s:s}", "version",
			    TL_VERSION_STRING, "release", TL_VERSION);

			json_dumpf(v, stdout, JSON_COMPACT);
			putchar('\n');
			json_decref(v);
		} else
			printf("tally %s\n", TL_VERSION_STRING);
		return fflush(stdout) == 0 ? TL_EXIT_OK : TL_EXIT_FAIL;
	}
	if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
	    strcmp(argv[0], "help") == 0) {
		usage(stdout);
		return TL_EXIT_OK;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[0], cmds[i].name) == 0) {
			rc = cmds[i].fn(&cli, argc, argv);
			/* A write printed no document: say what it appended. */
			if (rc == TL_EXIT_OK && cli.json && !cli.json_done &&
			    cli.appended != NULL)
				cli_json_done(&cli, NULL);
			json_decref(cli.appended);
			cli.appended = NULL;
			cli_close(&cli);
			if (fflush(stdout) != 0 && rc == 0)
				rc = TL_EXIT_FAIL;
			return rc;
		}
	}
	cli_errx("unknown command '%s' (see tally --help)", argv[0]);
	return TL_EXIT_USAGE;
}
