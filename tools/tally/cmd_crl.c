/*
 * cmd_crl.c - tally crl: the mesh CA's latest certificate revocation
 * list (reactors/crl.c), for a verifier's CRL file.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "projections/events.h"
#include "tally.h"

static const char usage[] =
"usage: tally crl PROVIDER [--home DIR] [--json]\n"
"\n"
"The latest certificate revocation list tallyd published for the CA\n"
"PROVIDER (NODE/MODULE: the mesh CA), in PEM, for a verifier's CRL file\n"
"(a server's ssl_crl_file, ...).  It lists the certificates of the\n"
"CA's revoked grants that have not expired and is valid until the CA\n"
"itself expires; tallyd publishes the next one at once when a grant is\n"
"revoked, and nothing else.  --json prints {provider, number, this_update,\n"
"next_update, serials[], crl}.  Exit 3 when there is none yet (tallyd\n"
"publishes one at the CA's first certificate).\n";

static int
show(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p,
    void *arg)
{
	const char *id = arg;
	char k[TL_KEY_MAX];
	struct tl_rec r;
	json_t *doc;
	int rc;

	if ((rc = tl_key(k, "crl/%s", id)) != 0)
		return cli_fail(cli, rc, "read the list");
	if ((rc = tl_rec_get(t, p->graph, k, &r)) == TL_ENOTFOUND) {
		cli_errx("no revocation list for %s yet (tallyd publishes one "
		    "at its CA's first certificate; is it a CA, and is tallyd "
		    "running?)", id);
		return TL_EXIT_NOTFOUND;
	}
	if (rc != 0)
		return cli_fail(cli, rc, "read the list");
	doc = tl_json_body(r.raw, r.rawlen);
	tl_rec_close(&r);
	if (doc == NULL)
		return cli_fail(cli, TL_ECORRUPT, "read the list");
	if (cli->json) {
		json_dumpf(doc, stdout, JSON_COMPACT);
		putchar('\n');
	} else
		fputs(json_string_value(json_object_get(doc, "crl")) ?
		    json_string_value(json_object_get(doc, "crl")) : "",
		    stdout);
	json_decref(doc);
	return TL_EXIT_OK;
}

int
cmd_crl(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ 0 }
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 1 != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	return cli_read(cli, 0, show, argv[optind]);
}
