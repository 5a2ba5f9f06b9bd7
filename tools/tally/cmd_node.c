/*
 * cmd_node.c - tally node add|rekey|lost|rm: the machines of the mesh.
 */
#include <errno.h>
#include <fcntl.h>
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
"disk holds nothing that opens a delivery.  FILE is written and synced\n"
"before the node is recorded, so a kill leaves nothing declared or the\n"
"key in place; a retry takes a FILE (or FILE.new) a kill left as it is\n"
"and finishes (exit 0 when the node has its key already).\n"
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
	int		 found;			/* add: declared already, this key */
	const char	*keyfile;		/* add: where the key is */
	int		 reused;		/* add: the key file was there */
};

struct same_key {
	const uint8_t	*pk;
	char		 name[64];	/* the node that has pk, or "" */
};

/* Does node rest (a graph "n/" record) have the sealing key sk->pk? */
static int
has_pubkey(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct same_key *sk = arg;
	struct tl_rec r;
	struct tl_bnode n;
	const void *pk;
	size_t len;

	if (tl_rec_open(val, vlen, &r) != 0)
		return 0;
	if (tl_bn_get(r.m, "pubkey", &n) == 0 && tl_bn_bin(n, &pk, &len) == 0 &&
	    len == TL_PUBKEY_LEN && sodium_memcmp(pk, sk->pk,
	    TL_PUBKEY_LEN) == 0 && strchr(rest, '/') == NULL)
		snprintf(sk->name, sizeof(sk->name), "%s", rest);
	tl_rec_close(&r);
	return 0;
}

/*
 * A retry finds what a kill left: the node declared with the key the
 * file holds is done (nothing appended); a file whose key another node
 * holds, or a node declared with another key, is refused (the file is
 * kept: it may be the only copy of someone's key).  Only a file that
 * was there is compared with every node: a fresh key is nobody's, and
 * an add costs the same in any mesh.
 */
static int
do_add(struct tl_ctx *c, void *arg)
{
	struct add_arg *a = arg;
	struct same_key sk = { a->pk, "" };
	struct tl_rec r;
	struct tl_bnode n;
	const void *pk;
	size_t len;
	char k[TL_KEY_MAX];
	int rc, same;

	if ((rc = tl_key(k, "n/%s", a->name)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &r) == 0) {
		same = tl_bn_get(r.m, "pubkey", &n) == 0 &&
		    tl_bn_bin(n, &pk, &len) == 0 && len == TL_PUBKEY_LEN &&
		    sodium_memcmp(pk, a->pk, TL_PUBKEY_LEN) == 0;
		tl_rec_close(&r);
		if (same) {
			a->found = 1;
			return 0;
		}
		if (a->reused)
			return tl_refuse(c, TL_EREFUSED, "node %s already "
			    "exists with another key than the one in %s (the "
			    "file is left as it is)", a->name, a->keyfile);
	} else if (a->reused) {
		/* A retry's file (rare): is it another node's key? */
		if ((rc = tl_rec_scan(c->t, c->p.graph, "n/", has_pubkey,
		    &sk)) != 0)
			return rc;
		if (sk.name[0] != '\0')
			return tl_refuse(c, TL_EREFUSED, "%s holds the key of "
			    "node %s: not taken for node %s (give another "
			    "--key-out)", a->keyfile, sk.name, a->name);
	}
	return tl_dec_node_add(c, a->name, a->routable, a->pk, a->spk,
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
	char why[TL_WHY_MAX] = "", path[1200];

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
	char why[TL_WHY_MAX] = "";
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

/* The public halves of a key file's secret keys, into a. */
static int
key_public(struct add_arg *a, const struct tl_node_key *nk, const char *file)
{
	if (!nk->has_sign) {
		cli_errx("%s holds a sealing key of before (no signing key): "
		    "not taken for node %s (give another --key-out, or tally "
		    "node rekey an existing node)", file, a->name);
		return TL_EXIT_REFUSED;
	}
	if (nk->has_cp && sodium_memcmp(nk->cp_pk, a->cpk,
	    TL_SIGN_PUBLEN) != 0) {
		cli_errx("%s is the key file of another control plane's node: "
		    "not taken for node %s (give another --key-out)", file,
		    a->name);
		return TL_EXIT_REFUSED;
	}
	if (tl_secret_node_public(nk->box_sk, a->pk) != 0 ||
	    crypto_sign_ed25519_sk_to_pk(a->spk, nk->sign_sk) != 0) {
		cli_errx("%s: not a node key", file);
		return TL_EXIT_REFUSED;
	}
	return 0;
}

/* Makes the rename of keyout durable: fsync of its directory. */
static int
sync_dir(const char *keyout)
{
	char dir[PATH_MAX], *slash;
	int fd, rc = 0;

	snprintf(dir, sizeof(dir), "%s", keyout);
	if ((slash = strrchr(dir, '/')) == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return errno;
	if (fsync(fd) != 0)
		rc = errno;
	close(fd);
	return rc;
}

/*
 * The node's key file, in place and synced, before node.added is
 * committed: a kill at any point leaves nothing declared, or a node
 * whose key file is there.  A file a kill left (keyout, or keyout.new
 * beside it) is taken as it is, never replaced: a retry finishes with
 * the keys that may already be declared.  *created: this run made the
 * keys (a refusal may remove them; nothing else knows them).
 */
static int
key_place(struct add_arg *a, struct tl_node_key *nk, const char *keyout,
    const char *tmp, int *created)
{
	char why[TL_WHY_MAX] = "";
	const char *from = NULL;
	int rc;

	*created = 0;
	if (access(keyout, F_OK) == 0)
		from = keyout;
	else if (access(tmp, F_OK) == 0)
		from = tmp;
	if (from != NULL) {
		if ((rc = tl_secret_node_key_load(from, nk, why)) != 0) {
			cli_errx("%s exists and is not taken for node %s: %s",
			    from, a->name, why[0] ? why : tl_strerror(rc));
			return TL_EXIT_REFUSED;
		}
		if ((rc = key_public(a, nk, from)) != 0)
			return rc;
		a->reused = 1;
		if (!nk->has_cp) {
			memcpy(nk->cp_pk, a->cpk, TL_SIGN_PUBLEN);
			nk->has_cp = 1;
		}
		if (from == keyout)
			return 0;
	} else {
		tl_secret_node_keypair(a->pk, nk->box_sk);
		tl_secret_sign_keypair(a->spk, nk->sign_sk);
		nk->has_sign = 1;
		memcpy(nk->cp_pk, a->cpk, TL_SIGN_PUBLEN);
		nk->has_cp = 1;
		/* Written and synced beside its place (a full disk: nothing). */
		if ((rc = tl_secret_node_key_write(tmp, nk)) != 0) {
			cli_errx("cannot write node %s's key to %s: %s; nothing "
			    "was written to the log", a->name, tmp,
			    tl_strerror(rc));
			unlink(tmp);
			return TL_EXIT_FAIL;
		}
		*created = 1;
		cli_fault_at("node-key-written");
	}
	rc = rename(tmp, keyout) != 0 ? errno : sync_dir(keyout);
	if (rc != 0) {
		cli_errx("cannot move node %s's key from %s to %s: %s; nothing "
		    "was written to the log (the key stays where it is)",
		    a->name, tmp, keyout, strerror(rc));
		return TL_EXIT_FAIL;
	}
	return 0;
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
	char tmp[4200], why[TL_WHY_MAX];
	int c, ex, yes = 0, created = 0;

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
	if (!cli_routable_ok(a.routable, why)) {
		cli_errx("--routable-name: %s", why);
		return TL_EXIT_REFUSED;
	}
	if (!key_ok(cli, argv[0], keyout))
		return keyout == NULL ? TL_EXIT_USAGE : TL_EXIT_REFUSED;
	if ((ex = cp_key(cli, a.cpk)) != 0)
		return ex;
	a.keyfile = keyout;
	memset(&nk, 0, sizeof(nk));
	if (snprintf(tmp, sizeof(tmp), "%s.new", keyout) >= (int)sizeof(tmp)) {
		cli_errx("%s: the path is too long", keyout);
		ex = TL_EXIT_USAGE;
		goto out;
	}
	if ((ex = key_place(&a, &nk, keyout, tmp, &created)) != 0)
		goto out;
	cli_fault_at("node-key-placed");
	ex = cli_write(cli, do_add, &a, NULL);
	if (ex != 0) {
		/* Only a key this run made, which no node declares. */
		if (created)
			unlink(keyout);
		goto out;
	}
	cli_fault_at("node-added");
	if (cli->json)
		cli_json_done(cli, json_pack("{s:s,s:s,s:s,s:b}", "node",
		    a.name, "routable", a.routable, "key_file", keyout,
		    "added", !a.found));
	else if (a.found)
		printf("node %s was added already; its secret key is in %s\n",
		    a.name, keyout);
	else
		printf("node %s added (%s); its secret key is in %s\n",
		    a.name, a.routable, keyout);
out:
	sodium_memzero(&nk, sizeof(nk));
	return ex;
}
