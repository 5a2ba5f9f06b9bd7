/*
 * cmd_node.c - tally node add|rekey|lost|rm: the machines of the mesh.
 */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/secret.h"
#include "tally.h"

static const char usage[] =
"usage: tally node add NAME --routable-name HOST --key-out FILE\n"
"       tally node rekey NAME --key FILE\n"
"       tally node lost NAME --yes\n"
"       tally node rm NAME\n"
"       tally node report NAME --inventory FILE.json\n"
"\n"
"add records a node with the name other machines use to reach it, a\n"
"fresh X25519 public key (secrets delivered to the node are sealed to\n"
"it) and a fresh Ed25519 public key (the node signs its\n"
"acknowledgements with it).  The secret keys are written for the\n"
"node's host to FILE (mode 0600), to be moved there: never into the\n"
"log, and never under the tally home (refused), so the control plane's\n"
"disk holds nothing that opens a delivery.\n"
"The key file also gets the control plane's Ed25519 public key (derived\n"
"from the master key, recorded in node.added as cpkey): tally-node --amqp\n"
"takes from the node's queue only what that key signed.\n"
"rekey gives a node added before signing keys existed its Ed25519 key,\n"
"and a key file without the control plane's key that key\n"
"(node.key-added), appended to its key FILE; the sealing key stays.\n"
"lost records that the node is gone for good (asks for --yes): its\n"
"assignments end, every grant on its providers becomes lost (its data\n"
"is not reachable; nothing is retried against it), and each consumer\n"
"of one is shown by tally status as a question, with the commands that\n"
"answer it (tally rebind GRANT PROVIDER --empty).\n"
"rm refuses while modules are assigned to the node, naming every one\n"
"and every grant bound to its providers.\n"
"report records what the node has (node.inventoried), from FILE.json:\n"
"{\"memory\": SIZE, \"cpus\": N, \"disks\": [{\"path\": P, \"size\": SIZE}]}, a\n"
"SIZE in bytes or a string with B, KB, MB, GB or TB (\"16GB\").  The\n"
"settings providers derive from it (provides: TYPE: settings:) are\n"
"composed again for every assignment on the node (tally explain).\n";

struct add_arg {
	const char	*name;
	const char	*routable;
	uint8_t		 pk[TL_PUBKEY_LEN];
	uint8_t		 spk[TL_SIGN_PUBLEN];
	uint8_t		 cpk[TL_SIGN_PUBLEN];	/* the control plane's */
	int		 new_sign;		/* rekey: spk is new */
};

static int
do_add(struct tl_ctx *c, void *arg)
{
	struct add_arg *a = arg;

	return tl_dec_node_add_ex(c, a->name, a->routable, a->pk, a->spk,
	    a->cpk);
}

static int
do_rekey(struct tl_ctx *c, void *arg)
{
	struct add_arg *a = arg;

	return tl_dec_node_key_add(c, a->name, a->new_sign ? a->spk : NULL,
	    a->cpk);
}

/* The control plane's public key, from the master key of the home. */
static int
cp_key(const struct tl_cli *cli, uint8_t pk[TL_SIGN_PUBLEN])
{
	struct tl_key key = { NULL };
	char why[160] = "", path[1200];

	snprintf(path, sizeof(path), "%s/master.key", cli->home);
	if (tl_secret_load(path, &key, why) != 0) {
		cli_errx("master key: %s (a node's key file gets the control "
		    "plane's public key, derived from it)", why);
		return TL_EXIT_FAIL;
	}
	tl_secret_cp_keypair(&key, pk, NULL);
	tl_secret_key_free(&key);
	return 0;
}

/*
 * The key file: a sealing key of before gets a signing key beside it,
 * and a file without the control plane's key gets that.
 */
static int
rekey(struct tl_cli *cli, struct add_arg *a, const char *keyfile)
{
	struct tl_node_key nk;
	char why[160] = "";
	int rc, ex;

	if ((ex = cp_key(cli, a->cpk)) != 0)
		return ex;
	if ((rc = tl_secret_node_key_load(keyfile, &nk, why)) != 0) {
		cli_errx("%s", why[0] ? why : tl_strerror(rc));
		return TL_EXIT_FAIL;
	}
	if (nk.has_sign && nk.has_cp && sodium_memcmp(nk.cp_pk, a->cpk,
	    TL_SIGN_PUBLEN) == 0) {
		cli_errx("%s already holds a signing key and the control "
		    "plane's: node %s needs no rekey", keyfile, a->name);
		tl_secret_wipe(&nk, sizeof(nk));
		return TL_EXIT_REFUSED;
	}
	if (!nk.has_sign) {
		tl_secret_sign_keypair(a->spk, nk.sign_sk);
		nk.has_sign = 1;
		a->new_sign = 1;
	}
	memcpy(nk.cp_pk, a->cpk, TL_SIGN_PUBLEN);
	nk.has_cp = 1;
	/* The file first: a key in the log whose secret is lost is worse. */
	if ((rc = tl_secret_node_key_write(keyfile, &nk)) != 0) {
		cli_errx("cannot write %s: %s", keyfile, tl_strerror(rc));
		tl_secret_wipe(&nk, sizeof(nk));
		return TL_EXIT_FAIL;
	}
	tl_secret_wipe(&nk, sizeof(nk));
	ex = cli_write(cli, do_rekey, a, NULL);
	if (ex == 0 && !cli->json)
		printf("node %s has a signing key and the control plane's "
		    "key; its secret is in %s\n", a->name, keyfile);
	else if (ex == 0)
		cli_json_done(cli, json_pack("{s:s,s:s}", "node", a->name,
		    "key_file", keyfile));
	return ex;
}

struct report_arg {
	const char		*name;
	struct tl_inventory	 inv;
};

static int
do_report(struct tl_ctx *c, void *arg)
{
	struct report_arg *r = arg;

	return tl_dec_node_inventory(c, r->name, &r->inv);
}

/* A size: a whole number of bytes, or a string "16GB" (1024-based). */
static int
inv_size(const json_t *v, uint64_t *out)
{
	static const char *const units[] = { "B", "KB", "MB", "GB", "TB" };
	const char *s;
	char *end;
	unsigned long long n;
	size_t i;

	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if ((s = json_string_value(v)) == NULL || s[0] < '0' || s[0] > '9')
		return -1;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	for (i = 0; i < 5; i++)
		if (strcmp(end, units[i]) == 0 &&
		    n <= UINT64_MAX >> (10 * i)) {
			*out = (uint64_t)n << (10 * i);
			return 0;
		}
	return -1;
}

/* FILE.json into inv, or says what is wrong with it. */
static int
read_inventory(const char *file, struct tl_inventory *inv)
{
	json_error_t je;
	json_t *doc, *d, *e;
	size_t i;
	int rc = -1;

	memset(inv, 0, sizeof(*inv));
	if ((doc = json_load_file(file, JSON_REJECT_DUPLICATES, &je)) == NULL) {
		cli_errx("%s:%d: %s", file, je.line, je.text);
		return -1;
	}
	if (!json_is_object(doc) || inv_size(json_object_get(doc, "memory"),
	    &inv->memory) != 0) {
		cli_errx("%s: memory: expected a size (bytes, or \"16GB\")",
		    file);
		goto out;
	}
	e = json_object_get(doc, "cpus");
	if (!json_is_integer(e) || json_integer_value(e) < 1) {
		cli_errx("%s: cpus: expected a whole number above 0", file);
		goto out;
	}
	inv->cpus = (uint64_t)json_integer_value(e);
	d = json_object_get(doc, "disks");
	if (d != NULL && (!json_is_array(d) ||
	    json_array_size(d) > TL_INV_DISKS_MAX)) {
		cli_errx("%s: disks: expected a list of at most %d "
		    "{\"path\", \"size\"}", file, TL_INV_DISKS_MAX);
		goto out;
	}
	json_array_foreach(d, i, e) {
		const char *path = json_string_value(json_object_get(e,
		    "path"));

		if (path == NULL || path[0] != '/' || strlen(path) > 255 ||
		    inv_size(json_object_get(e, "size"),
		    &inv->disks[i].size) != 0) {
			cli_errx("%s: disks[%zu]: expected {\"path\": an "
			    "absolute path, \"size\": a size}", file, i);
			goto out;
		}
		snprintf(inv->disks[i].path, sizeof(inv->disks[i].path), "%s",
		    path);
		inv->ndisks++;
	}
	rc = 0;
out:
	json_decref(doc);
	return rc;
}

static int
do_lost(struct tl_ctx *c, void *arg)
{
	return tl_dec_node_lost(c, arg);
}

static int
do_rm(struct tl_ctx *c, void *arg)
{
	return tl_dec_node_rm(c, arg);
}

static int
routable_ok(const char *h)
{
	size_t i, n = strlen(h);

	if (n == 0 || n > 253)
		return 0;
	for (i = 0; i < n; i++)
		if (!(h[i] == '.' || h[i] == '-' || h[i] == ':' ||
		    (h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' &&
		    h[i] <= 'Z') || (h[i] >= '0' && h[i] <= '9')))
			return 0;
	return 1;
}

/*
 * Is path (a file that may not exist yet) under the tally home?  By
 * the real paths of its directory and of the home, so that neither a
 * relative path nor a symbolic link hides it; a home that does not
 * resolve holds nothing yet, and a directory that does not resolve
 * fails the write anyway.
 */
static int
under_home(const struct tl_cli *cli, const char *path)
{
	char dir[PATH_MAX], rd[PATH_MAX], rh[PATH_MAX], *slash;
	size_t n;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return 0;
	if ((slash = strrchr(dir, '/')) == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if (realpath(dir, rd) == NULL || realpath(cli->home, rh) == NULL)
		return 0;
	n = strlen(rh);
	return strncmp(rd, rh, n) == 0 && (rd[n] == '\0' || rd[n] == '/' ||
	    strcmp(rh, "/") == 0);
}

/* Is keyout given, and outside the home?  Says why not. */
static int
key_ok(const struct tl_cli *cli, const char *cmd, const char *keyout)
{
	if (keyout == NULL) {
		cli_errx("node %s needs --key%s FILE: where the node's secret "
		    "keys go, for its host", cmd, strcmp(cmd, "add") == 0 ?
		    "-out" : "");
		return 0;
	}
	if (under_home(cli, keyout)) {
		cli_errx("%s is under the tally home %s: a node's secret key "
		    "opens its deliveries, and the control plane keeps none",
		    keyout, cli->home);
		return 0;
	}
	return 1;
}

int
cmd_node(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "routable-name", required_argument, NULL, 'r' },
		{ "key-out", required_argument, NULL, 'k' },
		{ "key", required_argument, NULL, 'k' },
		{ "yes", no_argument, NULL, 'y' },
		{ "inventory", required_argument, NULL, 'i' },
		{ 0 }
	};
	const char *inventory = NULL;
	struct add_arg a;
	struct tl_node_key nk;
	const char *keyout = NULL;
	char tmp[4200];
	int c, rc, ex, yes = 0;

	memset(&a, 0, sizeof(a));
	if (argc < 2 || (strcmp(argv[1], "add") != 0 &&
	    strcmp(argv[1], "rm") != 0 && strcmp(argv[1], "rekey") != 0 &&
	    strcmp(argv[1], "lost") != 0 && strcmp(argv[1], "report") != 0)) {
		if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
			fputs(usage, stdout);
			return TL_EXIT_OK;
		}
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	argv++;
	argc--;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			a.routable = optarg;
			break;
		case 'k':
			keyout = optarg;
			break;
		case 'y':
			yes = 1;
			break;
		case 'i':
			inventory = optarg;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 1 != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	a.name = argv[optind];
	if (!tl_name_ok(a.name)) {
		cli_errx("node name '%s': use 1-63 of [a-z0-9-], not starting "
		    "or ending with '-'", a.name);
		return TL_EXIT_REFUSED;
	}
	if (strcmp(argv[0], "lost") == 0) {
		/* Not undoable: its grants' data is written off. */
		if (!yes) {
			cli_errx("node lost %s writes the node off for good: "
			    "its assignments end and every grant on its "
			    "providers becomes lost (its data is not "
			    "reachable, and is never asked for again).  "
			    "Confirm with tally node lost %s --yes", a.name,
			    a.name);
			return TL_EXIT_REFUSED;
		}
		ex = cli_write(cli, do_lost, (void *)a.name, NULL);
		if (ex == 0 && !cli->json)
			printf("node %s lost: its assignments ended; tally "
			    "status shows what waits on it\n", a.name);
		else if (ex == 0)
			cli_json_done(cli, json_pack("{s:s,s:s}", "node",
			    a.name, "state", "lost"));
		return ex;
	}
	if (strcmp(argv[0], "report") == 0) {
		struct report_arg r;

		if (inventory == NULL) {
			cli_errx("node report needs --inventory FILE.json");
			return TL_EXIT_USAGE;
		}
		r.name = a.name;
		if (read_inventory(inventory, &r.inv) != 0)
			return TL_EXIT_REFUSED;
		ex = cli_write(cli, do_report, &r, NULL);
		if (ex == 0 && !cli->json)
			printf("node %s: memory %llu bytes, %llu cpus, %zu "
			    "disk(s)\n", a.name,
			    (unsigned long long)r.inv.memory,
			    (unsigned long long)r.inv.cpus, r.inv.ndisks);
		return ex;
	}
	if (strcmp(argv[0], "rm") == 0) {
		ex = cli_write(cli, do_rm, (void *)a.name, NULL);
		if (ex == 0 && !cli->json)
			printf("node %s removed\n", a.name);
		return ex;
	}
	if (strcmp(argv[0], "rekey") == 0) {
		if (!key_ok(cli, argv[0], keyout))
			return keyout == NULL ? TL_EXIT_USAGE :
			    TL_EXIT_REFUSED;
		return rekey(cli, &a, keyout);
	}
	if (a.routable == NULL) {
		cli_errx("node add needs --routable-name HOST (a host name or "
		    "address other machines can reach)");
		return TL_EXIT_USAGE;
	}
	if (!routable_ok(a.routable)) {
		cli_errx("--routable-name '%s': not a host name or address "
		    "(1-253 of letters, digits, '.', '-', ':')", a.routable);
		return TL_EXIT_REFUSED;
	}
	if (!key_ok(cli, argv[0], keyout))
		return keyout == NULL ? TL_EXIT_USAGE : TL_EXIT_REFUSED;
	if ((ex = cp_key(cli, a.cpk)) != 0)
		return ex;
	memset(&nk, 0, sizeof(nk));
	tl_secret_node_keypair(a.pk, nk.box_sk);
	tl_secret_sign_keypair(a.spk, nk.sign_sk);
	nk.has_sign = 1;
	memcpy(nk.cp_pk, a.cpk, TL_SIGN_PUBLEN);
	nk.has_cp = 1;
	/*
	 * The key first, beside its place: a disk too full for it leaves
	 * nothing appended (a node whose secret key is lost is worse than
	 * none), and a refused add leaves no key; in place once the node
	 * exists (a rename in one directory).
	 */
	if (snprintf(tmp, sizeof(tmp), "%s.new", keyout) >= (int)sizeof(tmp)) {
		cli_errx("%s: the path is too long", keyout);
		ex = TL_EXIT_USAGE;
		goto out;
	}
	if ((rc = tl_secret_node_key_write(tmp, &nk)) != 0) {
		cli_errx("cannot write node %s's key to %s: %s; nothing was "
		    "written to the log", a.name, tmp, tl_strerror(rc));
		unlink(tmp);
		ex = TL_EXIT_FAIL;
		goto out;
	}
	ex = cli_write(cli, do_add, &a, NULL);
	if (ex != 0)
		unlink(tmp);
	else if (rename(tmp, keyout) != 0) {
		cli_errx("node %s added, but its key could not be moved from "
		    "%s to %s: %s", a.name, tmp, keyout, strerror(errno));
		ex = TL_EXIT_FAIL;
	} else if (cli->json)
		cli_json_done(cli, json_pack("{s:s,s:s,s:s}", "node",
		    a.name, "routable", a.routable, "key_file", keyout));
	else
		printf("node %s added (%s); its secret key is in %s\n",
		    a.name, a.routable, keyout);
out:
	sodium_memzero(&nk, sizeof(nk));
	return ex;
}
