/*
 * cmd_provider.c - tally provider move: a provider (and the module's
 * assignment that runs it) now lives on another node.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/secret.h"
#include "projections/grant.h"
#include "projections/rotation.h"
#include "tally.h"

static const char usage[] =
"usage: tally provider move PROVIDER NODE [--set KEY=VALUE]...\n"
"                           [--expose local|network|public|none] [--json]\n"
"\n"
"Records that provider PROVIDER (NODE/MODULE, the id it was registered\n"
"with) now runs on NODE: the provider keeps its id and every binding to\n"
"it stays.  The module's assignment moves with it, with the same\n"
"settings and secrets (the secrets re-encrypted for the new assignment;\n"
"--set overrides a setting, e.g. --set port=5433, --expose the\n"
"exposure).  Every grant it serves is then re-delivered to every holder\n"
"with the new routable name: a rotation (reason \"provider moved\") issues\n"
"a new credential at the new address, delivers it and retires the old\n"
"one once each holder acknowledged (tally ack).  Moving the data itself\n"
"is the operator's (the server moved); tally records it and re-delivers.\n"
"Refused while one of its grants rotates or moves.\n";

#define MAX_SET	64

struct move_arg {
	const char	*id;
	const char	*node;
	const char	*expose;	/* NULL: keep */
	char		*over_k[MAX_SET];
	char		*over_v[MAX_SET];
	size_t		 nover;
	struct tl_key	 key;
	int		 have_key;
	char		 keywhy[TL_WHY_MAX];
	char		 module[64];
	size_t		 rotated;
};

struct built {
	struct tl_setting	 set[MAX_SET];
	char			 keys[MAX_SET][64];
	uint8_t			*cipher[MAX_SET];
	size_t			 n;
};

static void
built_free(struct built *bt)
{
	size_t i;

	for (i = 0; i < MAX_SET; i++)
		free(bt->cipher[i]);
	memset(bt, 0, sizeof(*bt));
}

/*
 * The settings of module@from for module@to: plain ones as they are
 * (or as --set says), secrets decrypted and encrypted again under the
 * new assignment's associated data.
 */
static int
build_settings(struct tl_ctx *c, struct move_arg *ma, struct tl_bnode rec,
    const char *module, const char *from, struct built *bt)
{
	struct tl_bnode m, kn, vn;
	size_t i, j;
	const char *s;
	size_t n;

	if (tl_bn_get(rec, "settings", &m) == 0)
		for (i = 0; i < tl_bn_len(m) && bt->n < MAX_SET; i++) {
			if (tl_bn_entry(m, i, &kn, &vn) != 0 ||
			    tl_bn_str(kn, &s, &n) != 0 || n >= 64)
				continue;
			memcpy(bt->keys[bt->n], s, n);
			bt->keys[bt->n][n] = '\0';
			bt->set[bt->n].key = bt->keys[bt->n];
			bt->set[bt->n].value = "";
			if (tl_bn_str(vn, &s, &n) == 0) {
				char *v = malloc(n + 1);

				if (v == NULL)
					return ENOMEM;
				memcpy(v, s, n);
				v[n] = '\0';
				bt->cipher[bt->n] = (uint8_t *)v;  /* freed */
				bt->set[bt->n].value = v;
			}
			for (j = 0; j < ma->nover; j++)
				if (strcmp(ma->over_k[j], bt->keys[bt->n]) == 0)
					bt->set[bt->n].value = ma->over_v[j];
			bt->n++;
		}
	for (j = 0; j < ma->nover && bt->n < MAX_SET; j++) {
		for (i = 0; i < bt->n; i++)
			if (strcmp(bt->keys[i], ma->over_k[j]) == 0)
				break;
		if (i < bt->n)
			continue;
		snprintf(bt->keys[bt->n], 64, "%s", ma->over_k[j]);
		bt->set[bt->n].key = bt->keys[bt->n];
		bt->set[bt->n].value = ma->over_v[j];
		bt->n++;
	}
	if (tl_bn_get(rec, "secrets", &m) != 0)
		return 0;
	for (i = 0; i < tl_bn_len(m) && bt->n < MAX_SET; i++) {
		char ad[TL_KEY_MAX], ad2[TL_KEY_MAX], key[64];
		const void *ct;
		size_t len;
		uint8_t *plain;

		if (tl_bn_entry(m, i, &kn, &vn) != 0 ||
		    tl_bn_str(kn, &s, &n) != 0 || n >= 64 ||
		    tl_bn_secret(vn, &ct, &len) != 0 || len <= TL_BOX_OVERHEAD)
			continue;
		memcpy(key, s, n);
		key[n] = '\0';
		if (!ma->have_key)
			return tl_refuse(c, TL_ESECRET, "the assignment's secret "
			    "%s must be re-encrypted for %s@%s: master key: %s",
			    key, module, ma->node, ma->keywhy);
		snprintf(ad, sizeof(ad), "assignment/%s@%s:%s", module, from,
		    key);
		snprintf(ad2, sizeof(ad2), "assignment/%s@%s:%s", module,
		    ma->node, key);
		if ((plain = tl_secret_alloc(len - TL_BOX_OVERHEAD)) == NULL ||
		    (bt->cipher[bt->n] = malloc(len)) == NULL) {
			tl_secret_free(plain);
			return ENOMEM;
		}
		if (tl_secret_decrypt(&ma->key, ad, strlen(ad), ct, len,
		    plain) != 0) {
			tl_secret_free(plain);
			return tl_refuse(c, TL_ESECRET, "cannot decrypt the "
			    "secret %s of %s@%s with this master key", key,
			    module, from);
		}
		tl_secret_encrypt(&ma->key, ad2, strlen(ad2), plain,
		    len - TL_BOX_OVERHEAD, bt->cipher[bt->n]);
		tl_secret_wipe(plain, len - TL_BOX_OVERHEAD);
		tl_secret_free(plain);
		snprintf(bt->keys[bt->n], 64, "%s", key);
		bt->set[bt->n].key = bt->keys[bt->n];
		bt->set[bt->n].secret = bt->cipher[bt->n];
		bt->set[bt->n].secret_len = len;
		bt->n++;
	}
	return 0;
}

struct count_arg {
	struct tl_ctx	*c;
	size_t		 n;
};

static int
count_rotations(const struct tl_grant *g, void *arg)
{
	struct count_arg *ca = arg;
	struct tl_rotation r;

	if (tl_rot_get(ca->c->t, &ca->c->p, g->id, &r) == 0)
		ca->n++;
	return 0;
}

static int
do_move(struct tl_ctx *c, void *arg)
{
	struct move_arg *ma = arg;
	struct built bt;
	struct tl_rec pr, ar;
	char module[64] = "", from[64] = "", expose[16] = "local";
	char k[TL_KEY_MAX];
	int rc;

	memset(&bt, 0, sizeof(bt));
	snprintf(k, sizeof(k), "p/%s", ma->id);
	if (tl_rec_get(c->t, c->p.graph, k, &pr) != 0)
		return tl_dec_provider_move(c, ma->id, ma->node, expose, NULL,
		    0);	/* it says why */
	tl_bn_getstr(pr.m, "module", module, sizeof(module));
	tl_bn_getstr(pr.m, "node", from, sizeof(from));
	tl_rec_close(&pr);
	snprintf(ma->module, sizeof(ma->module), "%s", module);
	snprintf(k, sizeof(k), "a/%s@%s", module, from);
	if (tl_rec_get(c->t, c->p.graph, k, &ar) != 0)
		return tl_dec_provider_move(c, ma->id, ma->node, expose, NULL,
		    0);
	tl_bn_getstr(ar.m, "expose", expose, sizeof(expose));
	rc = build_settings(c, ma, ar.m, module, from, &bt);
	tl_rec_close(&ar);
	if (rc == 0)
		rc = tl_dec_provider_move(c, ma->id, ma->node,
		    ma->expose != NULL ? ma->expose : expose, bt.set, bt.n);
	built_free(&bt);
	if (rc == 0) {
		struct count_arg ca = { c, 0 };

		tl_grant_each_of_provider(c->t, &c->p, ma->id,
		    count_rotations, &ca);
		ma->rotated = ca.n;
	}
	return rc;
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

static int
provider_move(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "set", required_argument, NULL, 's' },
		{ "expose", required_argument, NULL, 'e' },
		{ 0 }
	};
	struct move_arg *ma;
	char path[1200];
	int c, ex;

	if ((ma = calloc(1, sizeof(*ma))) == NULL)
		return TL_EXIT_FAIL;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': {
			char *eq = strchr(optarg, '=');

			if (eq == NULL || ma->nover == MAX_SET ||
			    !setting_key_ok(optarg, (size_t)(eq - optarg))) {
				cli_errx("--set %s: expected KEY=VALUE, KEY of "
				    "[a-z0-9_-]", optarg);
				free(ma);
				return TL_EXIT_USAGE;
			}
			*eq = '\0';
			ma->over_k[ma->nover] = optarg;
			ma->over_v[ma->nover++] = eq + 1;
			break;
		}
		case 'e':
			ma->expose = optarg;
			break;
		case CLI_OPT_HOME:
			if (cli_set_home(cli, optarg) != 0) {
				free(ma);
				return TL_EXIT_USAGE;
			}
			break;
		case CLI_OPT_JSON:
			cli->json = 1;
			break;
		case 'h':
			fputs(usage, stdout);
			free(ma);
			return TL_EXIT_OK;
		default:
			fputs(usage, stderr);
			free(ma);
			return TL_EXIT_USAGE;
		}
	}
	if (optind + 2 != argc) {
		fputs(usage, stderr);
		free(ma);
		return TL_EXIT_USAGE;
	}
	ma->id = argv[optind];
	ma->node = argv[optind + 1];
	if (!tl_name_ok(ma->node)) {
		cli_errx("names are 1-63 of [a-z0-9-]");
		free(ma);
		return TL_EXIT_REFUSED;
	}
	/* Needed only if the assignment holds secrets: said then. */
	snprintf(path, sizeof(path), "%s/master.key", cli->home);
	ma->have_key = tl_secret_load(path, &ma->key, ma->keywhy) == 0;
	ex = cli_write(cli, do_move, ma, NULL);
	tl_secret_key_free(&ma->key);
	if (ex == 0) {
		if (cli->json) {
			json_t *j = json_pack("{s:s,s:s,s:s,s:I}", "provider",
			    ma->id, "module", ma->module, "node", ma->node,
			    "rotations", (json_int_t)ma->rotated);

			cli_json_done(cli, j);
		} else
			printf("provider %s moved to %s (%s@%s): %zu grant(s) "
			    "re-delivered through a rotation; tally ack NODE "
			    "MODULE VERSION as each holder switches\n", ma->id,
			    ma->node, ma->module, ma->node, ma->rotated);
	}
	free(ma);
	return ex;
}

int
cmd_provider(struct tl_cli *cli, int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "move") == 0)
		return provider_move(cli, argc - 1, argv + 1);
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0)) {
		fputs(usage, stdout);
		return TL_EXIT_OK;
	}
	fputs(usage, stderr);
	return TL_EXIT_USAGE;
}
