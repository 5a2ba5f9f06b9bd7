/*
 * cmd_assign.c - tally assign | unassign | remove.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/secret.h"
#include "drivers/decl.h"
#include "projections/decide_embedded.h"
#include "projections/grant.h"
#include "tally.h"

static const char assign_usage[] =
"usage: tally assign MODULE... NODE [--expose local|network|public|none]\n"
"                    [--parts PART[,PART]...|all]\n"
"                    [--set KEY=VALUE]... [--secret KEY]... [--unset KEY]...\n"
"                    [--consolidate INSTANCE --from HOST:PORT\n"
"                     --from-resource NAME --from-user USER]\n"
"\n"
"Places MODULE on NODE.  The assignment carries what belongs to the\n"
"pairing: its exposure (default local) and settings.  A provider's\n"
"admin connection goes here (--set port=N --secret admin-password, as\n"
"its driver names them).  Each --secret is read from standard input\n"
"(one line each, in order; a PEM key such as admin-key up to its END\n"
"line), encrypted with the master key, and never taken from the\n"
"command line.  A PEM setting (ca, admin-cert) names its file:\n"
"--set admin-cert=/etc/tally/admin.pem --secret admin-key < admin.key\n"
"\n"
"A provider's keys are the settings its driver declares, with their\n"
"defaults (drivers/README.md; tally providers shows each provider's\n"
"driver); an unknown key or a value of the wrong kind is refused,\n"
"listing them.  A module that provides nothing takes no --set or\n"
"--secret (refused: nothing would read it).\n"
"\n"
"--parts installs only those of the module's parts (its manifest's\n"
"parts:; default all): a requirement of a part is provisioned only\n"
"where the part is installed, and a part no longer installed leaves\n"
"what only it needed (revoked, or rotated for the holders that stay).\n"
"\n"
"Assigning again changes what is given and keeps the rest (and the\n"
"exposure, unless --expose is given); --unset KEY removes one.  What\n"
"changed is printed, and recorded as assignment.configured.\n"
"\n"
"Several modules are placed on NODE in one transaction, all or none (a\n"
"refusal of one records nothing): one command and one durable commit\n"
"for a batch.  They share --expose and --parts; settings, secrets and\n"
"--consolidate belong to one pairing and go with one MODULE.\n"
"\n"
"--consolidate INSTANCE binds the need of MODULE's embedded instance\n"
"INSTANCE on NODE to NODE's provider of the same type instead, and moves\n"
"its data there as tally rebind --migrate does: tallyd reaches the\n"
"instance at --from as --from-user with the credential it delivered,\n"
"freezes --from-resource, copies it into a fresh resource on the\n"
"provider, compares row counts, then switches the module to the new\n"
"credential.  Refused up front when the type's driver cannot move data\n"
"or NODE has no (or more than one) such provider.  The instance is left\n"
"read-only with its data; going back is another move, not an undo.\n";

static const char unassign_usage[] =
"usage: tally unassign MODULE NODE\n"
"\n"
"Removes MODULE from NODE.  Its per-instance grants there are revoked;\n"
"a provider that still serves grants cannot be unassigned.\n";

static const char remove_usage[] =
"usage: tally remove MODULE [--yes | --cancel]\n"
"\n"
"Removes MODULE everywhere: every assignment, its requirements, and a\n"
"revocation request for every grant it holds (the data is kept by the\n"
"provider's policy; destroying it is tally purge).\n"
"\n"
"First it says what revoking each grant does, and, where the driver can\n"
"tell, what would be lost now (asked of the provider).  When a driver\n"
"declares that revoking destroys data, or something would be lost, it\n"
"removes nothing without --yes: the removal is held for a confirmation\n"
"(module.removal-held: tally status and the board ask it) until\n"
"tally remove MODULE --yes removes the module or --cancel withdraws it.\n";

#define MAX_SET	64

/* At most this many modules in one tally assign (one transaction). */
#define MAX_MODULES	10000

struct assign_arg {
	const char		*module;	/* the one being assigned */
	const char		*node;
	const char		*expose;
	const char		*parts;		/* NULL: the assignment's */
	struct tl_setting	 set[MAX_SET];
	size_t			 nset;
	char			*changes;
	size_t			 cap;
	const char		*consolidate;	/* an embedded instance */
	struct tl_dec_consolidation from;
};

/*
 * A setting given to a module that provides nothing is read by nothing
 * (only a provider's driver reads settings, the ones it declares):
 * refused rather than recorded, so a first user does not wait on it.
 * A module not declared is the decider's to refuse.
 */
static int
consumer_settings(struct tl_ctx *c, const struct assign_arg *a)
{
	struct tl_rec m;
	struct tl_bnode prov;
	char k[TL_KEY_MAX];
	size_t i;
	int none;

	for (i = 0; i < a->nset; i++)
		if (a->set[i].value != NULL || a->set[i].secret != NULL)
			break;
	if (i == a->nset || tl_key(k, "m/%s", a->module) != 0 ||
	    tl_rec_get(c->t, c->p.graph, k, &m) != 0)
		return 0;
	none = tl_bn_get(m.m, "provides", &prov) != 0 || tl_bn_len(prov) == 0;
	tl_rec_close(&m);
	if (!none)
		return 0;
	return tl_refuse(c, TL_EINVAL, "%s provides nothing, so nothing reads "
	    "its assignment's settings (a provider's driver reads the ones "
	    "it declares): --%s %s is refused rather than recorded unused",
	    a->module, a->set[i].secret != NULL ? "secret" : "set",
	    a->set[i].key);
}

static int
assign_one(struct tl_ctx *c, struct assign_arg *a)
{
	int rc;

	if ((rc = consumer_settings(c, a)) != 0)
		return rc;
	if ((rc = tl_dec_assign(c, a->module, a->node, &(struct tl_assign){
	    .expose = a->expose, .set = a->set, .nset = a->nset,
	    .parts = a->parts, .changes = a->changes, .cap = a->cap })) != 0 ||
	    a->consolidate == NULL)
		return rc;
	return tl_dec_consolidate(c, a->module, a->node, a->consolidate,
	    &a->from);
}

/* The modules of one command: each assigned, its changes its own. */
/*
 * What a provider's driver prepares at assign (the mesh CA's key and
 * certificate: tools/tally/prepare.c), decided and asked of tallyd in
 * the write's transaction, so an assign of anything else reads nothing
 * more than its write does.
 */
struct assign_prep {
	struct tl_cli		*cli;
	struct cli_prep		*pr;
	const char *const	*given;
	struct tl_key		*key;
	int			*haskey;
	uint8_t			**cipher;	/* the sealed secrets' */
	char			**keys;
	size_t			*nsealed;
	int			 done;
};

struct assign_many {
	struct assign_arg	*a;
	char *const		*modules;
	size_t			 n;
	char			*changes;	/* n slices of a->cap */
	struct assign_prep	*prep;		/* NULL: nothing to prepare */
};

static int seal(const struct tl_key *, struct assign_arg *, const char *,
    const char *, size_t, uint8_t **, char **);

/* The prepared settings into a->set, secrets sealed; once per command. */
static int
prepare(struct tl_ctx *c, struct assign_many *am)
{
	struct assign_prep *x = am->prep;
	struct cli_prep *pr = x->pr;
	struct assign_arg *a = am->a;
	char why[TL_WHY_MAX] = "", path[1200];
	size_t i;
	int rc;

	x->done = 1;
	if ((rc = cli_prep_decide(pr, c->t, &c->p, x->given)) != 0 ||
	    pr->dd == NULL)
		return rc;
	if (cli_prep_run(x->cli, pr) != 0)
		return tl_refuse(c, TL_EINVAL, "%s %s: %s", a->module, a->node,
		    pr->error);
	for (i = 0; i < pr->n; i++) {
		if (!pr->secret[i]) {
			if (a->nset == MAX_SET)
				return tl_refuse(c, TL_ETOOBIG, "too many "
				    "settings");
			a->set[a->nset].key = pr->name[i];
			a->set[a->nset].value = pr->value[i];
			a->nset++;
			continue;
		}
		if (!*x->haskey) {
			snprintf(path, sizeof(path), "%s/master.key",
			    x->cli->home);
			if (tl_secret_load(path, x->key, why) != 0)
				return tl_refuse(c, TL_EINVAL, "master key: %s",
				    why);
			*x->haskey = 1;
		}
		if (seal(x->key, a, pr->name[i], pr->value[i],
		    strlen(pr->value[i]), &x->cipher[*x->nsealed],
		    &x->keys[*x->nsealed]) != 0)
			return tl_refuse(c, TL_ETOOBIG, "%s: cannot keep it",
			    pr->name[i]);
		(*x->nsealed)++;
	}
	return 0;
}

static int
do_assign(struct tl_ctx *c, void *arg)
{
	struct assign_many *am = arg;
	uint64_t cause = c->cause;
	size_t i;
	int rc;

	if (am->prep != NULL && !am->prep->done &&
	    (rc = prepare(c, am)) != 0)
		return rc;
	/* One correlation, the command's; each module's chain its own. */
	for (i = 0; i < am->n; i++) {
		c->cause = cause;
		am->a->module = am->modules[i];
		am->a->changes = am->changes + i * am->a->cap;
		am->a->changes[0] = '\0';
		if ((rc = assign_one(c, am->a)) != 0)
			return rc;
	}
	return 0;
}

/* A secret's plaintext: no control character (a pasted newline, …). */
static int
secret_ok(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v < 0x20 || *v == 0x7f)
			return 0;
	return 1;
}

static int
setting_key_ok(const char *k, size_t n)
{
	size_t i;

	if (n == 0 || n > 63)
		return 0;
	for (i = 0; i < n; i++)
		if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' &&
		    k[i] <= '9') || k[i] == '-' || k[i] == '_'))
			return 0;
	return 1;
}

/* Some driver's declaration of setting key as kind (NULL: none). */
static const struct tl_drv_setting *
kind_of(const char *key, enum tl_drv_kind kind)
{
	const char *const *dn = tl_drv_names();
	const struct tl_drv_setting *st;
	const struct tl_drv_decl *dd;
	size_t i;

	for (i = 0; dn[i] != NULL; i++)
		if ((dd = tl_drv_decl_find(dn[i])) != NULL &&
		    (st = tl_drv_setting_find(dd->settings, key)) != NULL &&
		    st->kind == kind)
			return st;
	return NULL;
}

int
cli_pem_key_setting(const char *key)
{
	return kind_of(key, TL_DRV_PEM_KEY) != NULL;
}

/*
 * Whether some driver declares key a PEM setting (decl.h: TL_DRV_PEM),
 * whose --set value names a file to read.
 */
static int
pem_key(const char *key)
{
	return kind_of(key, TL_DRV_PEM) != NULL;
}

/*
 * FILE of --set KEY=FILE, a PEM setting, into *out (malloc'd, the
 * caller frees): 0, or an exit code with the reason said.
 */
static int
pem_read(const char *key, const char *file, char **out)
{
	FILE *fp;
	char *buf;
	size_t n;

	if ((fp = fopen(file, "r")) == NULL) {
		cli_errx("--set %s=%s: %s", key, file, strerror(errno));
		return TL_EXIT_USAGE;
	}
	if ((buf = malloc(TL_DRV_PEM_MAX + 2)) == NULL) {
		fclose(fp);
		return TL_EXIT_FAIL;
	}
	n = fread(buf, 1, TL_DRV_PEM_MAX + 1, fp);
	fclose(fp);
	if (n > TL_DRV_PEM_MAX) {
		cli_errx("--set %s=%s: longer than %d bytes", key, file,
		    TL_DRV_PEM_MAX);
		free(buf);
		return TL_EXIT_REFUSED;
	}
	buf[n] = '\0';
	*out = buf;
	return 0;
}

/*
 * --json: {module, node, changed} for one module, as always; for
 * several, {node, assigned: [{module, changed}...]}.
 */
static void
assigned_json(struct tl_cli *cli, struct assign_many *am)
{
	json_t *all = json_array();
	size_t i;

	for (i = 0; i < am->n; i++) {
		json_t *ch = json_array();
		char *line, *save = NULL;

		for (line = strtok_r(am->changes + i * am->a->cap, "\n",
		    &save); line != NULL; line = strtok_r(NULL, "\n", &save))
			json_array_append_new(ch, json_string(line + 2));
		if (am->n == 1) {
			json_decref(all);
			cli_json_done(cli, json_pack("{s:s,s:s,s:o}", "module",
			    am->modules[i], "node", am->a->node, "changed",
			    ch));
			return;
		}
		json_array_append_new(all, json_pack("{s:s,s:o}", "module",
		    am->modules[i], "changed", ch));
	}
	cli_json_done(cli, json_pack("{s:s,s:o}", "node", am->a->node,
	    "assigned", all));
}

/*
 * A secret setting name of a's assignment, val (n bytes of plaintext),
 * sealed under key as --secret seals it (its AD names the assignment
 * and the setting), appended to a->set.  *cipher and *keyp get what the
 * caller frees after the write.  An exit code (said).
 */
static int
seal(const struct tl_key *key, struct assign_arg *a, const char *name,
    const char *val, size_t n, uint8_t **cipher, char **keyp)
{
	char ad[TL_STREAM_MAX + 80];

	if (a->nset == MAX_SET) {
		cli_errx("too many settings");
		return TL_EXIT_USAGE;
	}
	snprintf(ad, sizeof(ad), "assignment/%s@%s:%s", a->module, a->node,
	    name);
	if ((*cipher = malloc(n + TL_BOX_OVERHEAD)) == NULL ||
	    (*keyp = strdup(name)) == NULL)
		return TL_EXIT_FAIL;
	tl_secret_encrypt(key, ad, strlen(ad), val, n, *cipher);
	a->set[a->nset].key = *keyp;
	a->set[a->nset].secret = *cipher;
	a->set[a->nset].secret_len = n + TL_BOX_OVERHEAD;
	a->nset++;
	return 0;
}

int
cmd_assign(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "expose", required_argument, NULL, 'e' },
		{ "parts", required_argument, NULL, 'P' },
		{ "set", required_argument, NULL, 's' },
		{ "secret", required_argument, NULL, 'S' },
		{ "unset", required_argument, NULL, 'U' },
		{ "consolidate", required_argument, NULL, 'C' },
		{ "from", required_argument, NULL, 'F' },
		{ "from-resource", required_argument, NULL, 'D' },
		{ "from-user", required_argument, NULL, 'u' },
		{ 0 }
	};
	struct assign_arg a = { 0 };
	struct assign_many am = { 0 };
	char *changes = NULL, fromhost[256];
	char *colon;
	const char *secrets[MAX_SET];
	char *keys[MAX_SET + CLI_PREP_MAX] = { 0 };
	char *pem[MAX_SET] = { 0 };
	uint8_t *cipher[MAX_SET + CLI_PREP_MAX] = { 0 };
	const char *given[2 * MAX_SET + 1];
	struct cli_prep pr;
	struct assign_prep prep;
	struct tl_key key;
	int haskey = 0;
	size_t nsecret = 0, nsealed = 0, ng = 0, i;
	int c, ex = TL_EXIT_USAGE;

	a.expose = NULL;	/* the assignment's own, or local */
	a.cap = 2048;
	memset(&pr, 0, sizeof(pr));
	memset(&prep, 0, sizeof(prep));
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'e':
			a.expose = optarg;
			break;
		case 'P':
			a.parts = optarg;
			break;
		case 's': {
			char *eq = strchr(optarg, '=');

			if (eq == NULL || a.nset == MAX_SET ||
			    !setting_key_ok(optarg, (size_t)(eq - optarg))) {
				cli_errx("--set %s: expected KEY=VALUE, KEY of "
				    "[a-z0-9_-]", optarg);
				return TL_EXIT_USAGE;
			}
			*eq = '\0';
			a.set[a.nset].key = optarg;
			a.set[a.nset].value = eq + 1;
			a.nset++;
			break;
		}
		case 'U':
			if (a.nset == MAX_SET || !setting_key_ok(optarg,
			    strlen(optarg))) {
				cli_errx("--unset %s: expected a KEY of "
				    "[a-z0-9_-]", optarg);
				return TL_EXIT_USAGE;
			}
			a.set[a.nset].key = optarg;
			a.set[a.nset].value = NULL;
			a.nset++;
			break;
		case 'S':
			if (nsecret == MAX_SET || !setting_key_ok(optarg,
			    strlen(optarg))) {
				cli_errx("--secret %s: expected a KEY of "
				    "[a-z0-9_-]", optarg);
				return TL_EXIT_USAGE;
			}
			secrets[nsecret++] = optarg;
			break;
		case 'C':
			if (!tl_name_ok(optarg)) {
				cli_errx("--consolidate %s: an embedded "
				    "instance's name, 1-63 of [a-z0-9-]", optarg);
				return TL_EXIT_USAGE;
			}
			a.consolidate = optarg;
			break;
		case 'F':
			/* HOST:PORT, the last colon (an IPv6 host has more). */
			colon = strrchr(optarg, ':');
			if (colon == NULL || colon == optarg || colon[1] == '\0' ||
			    strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
			    strlen(colon + 1) > 5 ||
			    (size_t)(colon - optarg) >= sizeof(fromhost)) {
				cli_errx("--from %s: expected HOST:PORT", optarg);
				return TL_EXIT_USAGE;
			}
			memcpy(fromhost, optarg, (size_t)(colon - optarg));
			fromhost[colon - optarg] = '\0';
			a.from.host = fromhost;
			a.from.port = colon + 1;
			break;
		case 'D':
			a.from.resource = optarg;
			break;
		case 'u':
			a.from.user = optarg;
			break;
		CLI_COMMON_CASES(cli, assign_usage);
		}
	}
	if (argc - optind < 2 || argc - optind - 1 > MAX_MODULES) {
		fputs(assign_usage, stderr);
		return TL_EXIT_USAGE;
	}
	am.a = &a;
	am.modules = argv + optind;
	am.n = (size_t)(argc - optind - 1);
	if (am.n > 1 && (a.nset > 0 || nsecret > 0 ||
	    a.consolidate != NULL)) {
		cli_errx("--set, --secret, --unset and --consolidate belong to "
		    "one pairing: give them with one MODULE");
		return TL_EXIT_USAGE;
	}
	if (a.consolidate == NULL && (a.from.host != NULL ||
	    a.from.resource != NULL || a.from.user != NULL)) {
		cli_errx("--from, --from-resource and --from-user go with "
		    "--consolidate INSTANCE");
		return TL_EXIT_USAGE;
	}
	a.module = argv[optind];
	a.node = argv[argc - 1];
	for (i = 0; i < am.n; i++)
		if (!tl_name_ok(am.modules[i]))
			break;
	if (i < am.n || !tl_name_ok(a.node)) {
		cli_errx("names are 1-63 of [a-z0-9-]");
		return TL_EXIT_REFUSED;
	}
	if ((changes = calloc(am.n, a.cap)) == NULL)
		return TL_EXIT_FAIL;
	am.changes = changes;
	/* A PEM setting's value is the file it names, read now. */
	for (i = 0; i < a.nset; i++)
		if (a.set[i].value != NULL && pem_key(a.set[i].key)) {
			if ((ex = pem_read(a.set[i].key, a.set[i].value,
			    &pem[i])) != 0)
				goto out;
			a.set[i].value = pem[i];
		}
	/*
	 * What a provider's driver prepares (the mesh CA's key and
	 * certificate) is decided in the write (prepare, above), from what
	 * this assign gives: kept for it, secrets' plaintext in guarded
	 * memory.
	 */
	if (am.n == 1) {
		for (i = 0; i < a.nset; i++)
			if (a.set[i].value != NULL)
				given[ng++] = a.set[i].key;
		for (i = 0; i < nsecret; i++)
			given[ng++] = secrets[i];
		given[ng] = NULL;
		pr.module = a.module;
		pr.node = a.node;
		if (cli_prep_begin(&pr) != 0) {
			ex = TL_EXIT_FAIL;
			goto out;
		}
		for (i = 0; i < a.nset; i++)
			if (a.set[i].value != NULL && cli_prep_add(&pr,
			    a.set[i].key, a.set[i].value) != 0) {
				cli_errx("--set %s: too long", a.set[i].key);
				ex = TL_EXIT_USAGE;
				goto out;
			}
		prep.cli = cli;
		prep.pr = &pr;
		prep.given = given;
		prep.key = &key;
		prep.haskey = &haskey;
		prep.cipher = cipher;
		prep.keys = keys;
		prep.nsealed = &nsealed;
		am.prep = &prep;
	}
	ex = TL_EXIT_USAGE;
	if (nsecret > 0) {
		char why[TL_WHY_MAX] = "", path[1200];

		snprintf(path, sizeof(path), "%s/master.key", cli->home);
		if (tl_secret_load(path, &key, why) != 0) {
			cli_errx("master key: %s", why);
			ex = TL_EXIT_FAIL;
			goto out;
		}
		haskey = 1;
	}
	if (nsecret > 0) {
		for (i = 0; i < nsecret; i++) {
			/* A PEM key (decl.h: TL_DRV_PEM_KEY) or a line. */
			char val[TL_DRV_KEY_MAX + 2];
			char prompt[96], kwhy[TL_WHY_MAX];
			const struct tl_drv_setting *pk =
			    kind_of(secrets[i], TL_DRV_PEM_KEY);
			size_t n;
			int rrc;

			snprintf(prompt, sizeof(prompt), "%s", secrets[i]);
			rrc = pk != NULL ? cli_read_secret_pem(prompt, val,
			    sizeof(val)) : cli_read_secret(prompt, val, 1024);
			if (rrc != 0) {
				if (rrc == TL_ETOOBIG)
					cli_errx("--secret %s: longer than %d "
					    "bytes", secrets[i],
					    TL_DRV_KEY_MAX);
				else
					cli_errx("--secret %s: no %s on "
					    "standard input", secrets[i],
					    pk != NULL ? "PEM key, up to its "
					    "END line," : "value");
				tl_secret_wipe(val, sizeof(val));
				ex = TL_EXIT_USAGE;
				goto out;
			}
			n = strlen(val);
			if (pk != NULL && tl_drv_setting_check(pk, val,
			    kwhy) != 0) {
				cli_errx("--secret %s", kwhy);
				tl_secret_wipe(val, sizeof(val));
				ex = TL_EXIT_REFUSED;
				goto out;
			}
			if (pk == NULL && !secret_ok(val)) {
				cli_errx("--secret %s: the value contains a "
				    "control character", secrets[i]);
				tl_secret_wipe(val, sizeof(val));
				ex = TL_EXIT_REFUSED;
				goto out;
			}
			if (cli_prep_add(&pr, secrets[i], val) != 0) {
				cli_errx("--secret %s: too long", secrets[i]);
				tl_secret_wipe(val, sizeof(val));
				ex = TL_EXIT_USAGE;
				goto out;
			}
			ex = seal(&key, &a, secrets[i], val, n,
			    &cipher[nsealed], &keys[nsealed]);
			nsealed++;
			tl_secret_wipe(val, sizeof(val));
			if (ex != 0)
				goto out;
		}
	}
	ex = cli_write(cli, do_assign, &am, NULL);
	if (ex == 0 && cli->json)
		assigned_json(cli, &am);
	else if (ex == 0)
		for (i = 0; i < am.n; i++) {
			const char *ch = changes + i * a.cap;

			printf("%s assigned to %s\n", am.modules[i], a.node);
			if (a.consolidate != NULL)
				printf("  consolidating %s onto %s's provider: "
				    "tallyd copies its data (tally status "
				    "%s)\n", a.consolidate, a.node,
				    am.modules[i]);
			if (ch[0] != '\0')
				fputs(ch, stdout);
			else if (a.nset > 0)
				printf("  nothing changed\n");
			if (pr.note[0] != '\0')
				printf("  %s\n", pr.note);
		}
out:
	if (haskey)
		tl_secret_key_free(&key);
	cli_prep_free(&pr);
	for (i = 0; i < nsealed; i++) {
		free(cipher[i]);
		free(keys[i]);
	}
	for (i = 0; i < MAX_SET; i++)
		free(pem[i]);
	free(changes);
	return ex;
}

struct unassign_arg {
	const char	*module;
	const char	*node;
};

static int
do_unassign(struct tl_ctx *c, void *arg)
{
	struct unassign_arg *a = arg;

	if (a->node == NULL)
		return tl_dec_remove(c, a->module);
	return tl_dec_unassign(c, a->module, a->node);
}

/*
 * Before tally remove acts: what revoking does to each grant the module
 * holds, as its provider's driver declares it (drivers/decl.h,
 * struct tl_drv_revocation) and by the provider's policy for the type.
 */
struct preview {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	/*
	 * What tallyd --loss said of each grant (grant -> {loses, drop,
	 * what} or {error}); NULL: the providers were not asked.
	 */
	json_t			*loss;
	int			 quiet;	/* --json: nothing printed */
	int			 destroys;	/* a revocation would lose data */
	const char		*module;
	char			 what[1000];	/* what is lost, in words */
};

static void
what_add(struct preview *pw, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One more piece of what the removal loses (cut where it fills). */
static void
what_add(struct preview *pw, const char *fmt, ...)
{
	size_t n = strlen(pw->what);
	va_list ap;

	if (n + 1 >= sizeof(pw->what))
		return;
	if (n > 0)
		n += (size_t)snprintf(pw->what + n, sizeof(pw->what) - n, "; ");
	if (n + 1 >= sizeof(pw->what))
		return;
	va_start(ap, fmt);
	vsnprintf(pw->what + n, sizeof(pw->what) - n, fmt, ap);
	va_end(ap);
}

static int
say_revocation(const struct tl_grant *g, void *arg)
{
	struct preview *pw = arg;
	const struct tl_drv_decl *dd;
	const struct tl_drv_revocation *rv;
	struct tl_bnode types;
	struct tl_rec r;
	char k[TL_KEY_MAX], driver[64] = "", policy[16] = "";
	size_t i;

	if (strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0 || g->provider[0] == '\0' ||
	    tl_key(k, "p/%s", g->provider) != 0 ||
	    tl_rec_get(pw->t, pw->p->graph, k, &r) != 0)
		return 0;
	if (tl_bn_get(r.m, "types", &types) == 0)
		for (i = 0; i < tl_bn_len(types); i++) {
			char ty[64] = "";

			tl_bn_getstr(tl_bn_at(types, i), "type", ty,
			    sizeof(ty));
			if (strcmp(ty, g->type) != 0)
				continue;
			tl_bn_getstr(tl_bn_at(types, i), "driver", driver,
			    sizeof(driver));
			tl_bn_getstr(tl_bn_at(types, i), "revoke", policy,
			    sizeof(policy));
		}
	tl_rec_close(&r);
	if ((dd = tl_drv_decl_find(driver)) == NULL ||
	    (rv = dd->revocation) == NULL)
		return 0;
	if (rv->destroys) {
		pw->destroys = 1;
		what_add(pw, "%s on %s: %s", g->id, g->provider, rv->revoke);
	}
	if (!pw->quiet) {
		printf("revoking %s on %s (driver %s): %s%s; ", g->id,
		    g->provider, dd->name, rv->revoke, rv->destroys ?
		    " (this destroys data)" : "");
		if (strcmp(policy, "drop") == 0 || !rv->retain)
			printf("the data is dropped\n");
		else
			printf("retained: %s; tally purge %s %s\n",
			    rv->retain_means, g->id, rv->purge);
	}
	if (pw->loss != NULL && tl_drv_can(dd, TL_DRV_CAP_LOSS, NULL)) {
		const json_t *l = json_object_get(pw->loss, g->id);
		const char *what = json_string_value(json_object_get(l, "what"));
		const char *err = json_string_value(json_object_get(l,
		    "error"));
		int loses = json_is_true(json_object_get(l, "loses"));

		if (what != NULL && loses) {
			pw->destroys = 1;
			what_add(pw, "%s: lost now: %s", g->id, what);
		}
		if (!pw->quiet && what != NULL)
			printf("  lost now: %s%s\n", loses ? "" : "nothing; ",
			    what);
		else if (!pw->quiet && err != NULL)
			printf("  what would be lost is unknown: %s\n", err);
	}
	return 0;
}

/* A line of tallyd --loss: kept under its grant. */
static void
loss_line(const char *line, void *arg)
{
	json_t *doc = json_loads(line, 0, NULL), *g;

	if (doc == NULL)
		return;
	if (json_is_string(g = json_object_get(doc, "grant")))
		json_object_set(arg, json_string_value(g), doc);
	json_decref(doc);
}

struct hold_arg {
	const char	*module;
	const char	*what;		/* NULL: cancel */
};

static int
do_hold(struct tl_ctx *c, void *arg)
{
	struct hold_arg *h = arg;

	if (h->what == NULL)
		return tl_dec_remove_cancel(c, h->module);
	return tl_dec_remove_hold(c, h->module, h->what);
}

static int
preview_remove(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p,
    void *arg)
{
	struct preview *pw = arg;

	(void)cli;
	pw->t = t;
	pw->p = p;
	(void)tl_grant_each_of_module(t, p, pw->module, say_revocation, pw);
	return 0;
}

static int
simple(struct tl_cli *cli, int argc, char **argv, const char *usage,
    int nargs)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	struct unassign_arg a = { NULL, NULL };
	int c, ex;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + nargs != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	a.module = argv[optind];
	if (nargs == 2)
		a.node = argv[optind + 1];
	if (!tl_name_ok(a.module) || (a.node && !tl_name_ok(a.node))) {
		cli_errx("names are 1-63 of [a-z0-9-]");
		return TL_EXIT_REFUSED;
	}
	ex = cli_write(cli, do_unassign, &a, NULL);
	if (ex == 0 && !cli->json) {
		if (a.node)
			printf("%s unassigned from %s\n", a.module, a.node);
		else
			printf("module %s removed\n", a.module);
	}
	return ex;
}

int
cmd_unassign(struct tl_cli *cli, int argc, char **argv)
{
	return simple(cli, argc, argv, unassign_usage, 2);
}

int
cmd_remove(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "yes", no_argument, NULL, 'y' },
		{ "cancel", no_argument, NULL, 'C' },
		{ 0 }
	};
	struct unassign_arg a = { NULL, NULL };
	struct hold_arg h = { NULL, NULL };
	struct preview pw;
	char path[1200];
	int c, ex, yes = 0, cancel = 0;

	while ((c = getopt_long(argc, argv, "hy", opts, NULL)) != -1) {
		switch (c) {
		case 'y':
			yes = 1;
			break;
		case 'C':
			cancel = 1;
			break;
		CLI_COMMON_CASES(cli, remove_usage);
		}
	}
	if (optind + 1 != argc || (yes && cancel)) {
		fputs(remove_usage, stderr);
		return TL_EXIT_USAGE;
	}
	a.module = argv[optind];
	if (!tl_name_ok(a.module)) {
		cli_errx("names are 1-63 of [a-z0-9-]");
		return TL_EXIT_REFUSED;
	}
	h.module = a.module;
	if (cancel) {
		ex = cli_write(cli, do_hold, &h, NULL);
		if (ex == 0 && !cli->json)
			printf("the removal of %s is withdrawn\n", a.module);
		return ex;
	}
	memset(&pw, 0, sizeof(pw));
	pw.module = a.module;
	pw.quiet = cli->json;
	/*
	 * The providers are asked what would be lost, by tallyd --loss
	 * (the one program with provider sessions) with the admin
	 * credentials the log holds; without the master key (a reader's
	 * copy of a home) only the declarations are shown.
	 */
	snprintf(path, sizeof(path), "%s/master.key", cli->home);
	if (access(path, R_OK) == 0 && (pw.loss = json_object()) != NULL) {
		const char *args[] = { "--loss", a.module, NULL };

		if (cli_tallyd(cli, args, NULL, 0, loss_line, pw.loss) != 0) {
			json_decref(pw.loss);
			pw.loss = NULL;
		}
	}
	ex = cli_read(cli, 0, preview_remove, &pw);
	json_decref(pw.loss);
	/* A module that is not there is the write's to refuse. */
	if (ex == 0 && pw.destroys && !yes) {
		h.what = pw.what;
		if ((ex = cli_write(cli, do_hold, &h, NULL)) != 0)
			return ex;
		cli_errx("revoking %s's grants destroys data (see above): "
		    "nothing removed; the removal is held for a confirmation "
		    "(tally status, the board): tally remove %s --yes "
		    "removes it, --cancel withdraws it", a.module, a.module);
		return TL_EXIT_REFUSED;
	}
	ex = cli_write(cli, do_unassign, &a, NULL);
	if (ex == 0 && !cli->json)
		printf("module %s removed\n", a.module);
	return ex;
}
