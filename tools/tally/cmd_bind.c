/*
 * cmd_bind.c - tally bind: choose the provider of a requirement.
 */
#include <getopt.h>
#include <stdio.h>

#include "tally.h"

static const char usage[] =
"usage: tally bind MODULE/REQUIREMENT[@NODE] PROVIDER\n"
"\n"
"Binds a requirement (an ambiguous one, or a deliberate choice) to a\n"
"provider, named NODE/MODULE.  A per-instance requirement is bound\n"
"per assignment: MODULE/REQUIREMENT@NODE.  Allowed until the grant is\n"
"provisioned; after that, changing the binding moves data and is a\n"
"migration (tally rebind --migrate), which this command refuses.\n";

struct bind_arg {
	const char	*grant;
	const char	*provider;
};

static int
do_bind(struct tl_ctx *c, void *arg)
{
	struct bind_arg *a = arg;

	return tl_dec_bind(c, a->grant, a->provider);
}

int
cmd_bind(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	struct bind_arg a;
	int c, ex;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 2 != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	a.grant = argv[optind];
	a.provider = argv[optind + 1];
	ex = cli_write(cli, do_bind, &a, NULL);
	if (ex == 0 && !cli->json)
		printf("%s bound to %s\n", a.grant, a.provider);
	return ex;
}
