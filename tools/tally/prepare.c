/*
 * prepare.c - the settings a provider's driver prepares at assign
 * (drivers/decl.h: prepared; the mesh CA's key and certificate), asked
 * of tallyd --prepare, since tally links no libcrypto (tally.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "core/body.h"
#include "core/error.h"
#include "core/secret.h"
#include "drivers/decl.h"
#include "projections/record.h"
#include "reactors/mesh.h"
#include "tally.h"

int
cli_prep_wants(const struct cli_prep *pr, const char *name)
{
	size_t i;

	if (pr->dd == NULL || pr->dd->prepared == NULL)
		return 0;
	for (i = 0; pr->dd->prepared[i] != NULL; i++)
		if (strcmp(pr->dd->prepared[i], name) == 0)
			return 1;
	return 0;
}

/* Whether the assignment record m has one of the prepared settings. */
static int
recorded(const struct cli_prep *pr, struct tl_bnode m)
{
	static const char *const maps[] = { "settings", "secrets" };
	struct tl_bnode n, kn, vn;
	const char *ks;
	size_t i, j, kl;
	char name[64];

	for (j = 0; j < 2; j++) {
		if (tl_bn_get(m, maps[j], &n) != 0)
			continue;
		for (i = 0; i < tl_bn_len(n); i++)
			if (tl_bn_entry(n, i, &kn, &vn) == 0 &&
			    tl_bn_str(kn, &ks, &kl) == 0 && kl < sizeof(name)) {
				memcpy(name, ks, kl);
				name[kl] = '\0';
				if (cli_prep_wants(pr, name))
					return 1;
			}
	}
	return 0;
}

int
cli_prep_begin(struct cli_prep *pr)
{
	if ((pr->in = tl_secret_alloc(CLI_PREPARE_IN_MAX)) == NULL)
		return ENOMEM;
	pr->inlen = 0;
	return 0;
}

int
cli_prep_decide(struct cli_prep *pr, struct tl_txn *t,
    const struct tl_proj *p, const char *const *given)
{
	struct tl_bnode prov;
	struct tl_rec r;
	char k[TL_KEY_MAX];
	size_t i;
	int any = 0, n;

	pr->dd = NULL;
	if (tl_key(k, "m/%s", pr->module) != 0 ||
	    tl_rec_get(t, p->graph, k, &r) != 0)
		return 0;	/* not declared: the decider refuses it */
	if (tl_bn_get(r.m, "provides", &prov) == 0)
		for (i = 0; i < tl_bn_len(prov) && pr->dd == NULL; i++) {
			char driver[64] = "";
			const struct tl_drv_decl *dd;

			tl_bn_getstr(tl_bn_at(prov, i), "driver", driver,
			    sizeof(driver));
			if ((dd = tl_drv_decl_find(driver)) != NULL &&
			    dd->prepared != NULL)
				pr->dd = dd;
		}
	tl_rec_close(&r);
	if (pr->dd == NULL)
		return 0;
	if (tl_key(k, "a/%s@%s", pr->module, pr->node) == 0 &&
	    tl_rec_get(t, p->graph, k, &r) == 0) {
		pr->recorded = recorded(pr, r.m);
		tl_rec_close(&r);
	}
	for (i = 0; given[i] != NULL; i++)
		any |= cli_prep_wants(pr, given[i]);
	/* Kept as recorded when this assign gives none of them. */
	if (!any && pr->recorded) {
		pr->dd = NULL;
		return 0;
	}
	if (tl_mesh_get(t, pr->mesh) != 0)
		pr->mesh[0] = '\0';
	n = snprintf(pr->in + pr->inlen, CLI_PREPARE_IN_MAX - pr->inlen,
	    "mesh %s\n", pr->mesh);
	if (n < 0 || (size_t)n >= CLI_PREPARE_IN_MAX - pr->inlen)
		return TL_ETOOBIG;
	pr->inlen += (size_t)n;
	return 0;
}

int
cli_prep_add(struct cli_prep *pr, const char *name, const char *value)
{
	size_t n = strlen(value), need = 4 + strlen(name) + 1 + 2 * n + 2;

	if (pr->in == NULL)
		return 0;
	if (pr->inlen + need > CLI_PREPARE_IN_MAX)
		return TL_ETOOBIG;
	pr->inlen += (size_t)snprintf(pr->in + pr->inlen,
	    CLI_PREPARE_IN_MAX - pr->inlen, "set %s ", name);
	sodium_bin2hex(pr->in + pr->inlen, 2 * n + 1,
	    (const unsigned char *)value, n);
	pr->inlen += 2 * n;
	pr->in[pr->inlen++] = '\n';
	return 0;
}

/* One line of tallyd --prepare (helper.h there). */
static void
got(const char *line, void *arg)
{
	struct cli_prep *pr = arg;
	const char *sp, *hex;
	size_t hl, bl, nl;
	int secret;

	if (strncmp(line, "note ", 5) == 0) {
		snprintf(pr->note, sizeof(pr->note), "%s", line + 5);
		return;
	}
	if (strncmp(line, "error ", 6) == 0) {
		snprintf(pr->error, sizeof(pr->error), "%s", line + 6);
		return;
	}
	secret = strncmp(line, "secret ", 7) == 0;
	if (!secret && strncmp(line, "set ", 4) != 0)
		return;
	line += secret ? 7 : 4;
	if ((sp = strchr(line, ' ')) == NULL || pr->n == CLI_PREP_MAX)
		return;
	nl = (size_t)(sp - line);
	hex = sp + 1;
	hl = strlen(hex);
	if ((pr->name[pr->n] = strndup(line, nl)) == NULL ||
	    !cli_prep_wants(pr, pr->name[pr->n]) ||
	    (pr->value[pr->n] = tl_secret_alloc(hl / 2 + 1)) == NULL ||
	    sodium_hex2bin((unsigned char *)pr->value[pr->n], hl / 2 + 1, hex,
	    hl, NULL, &bl, NULL) != 0 || memchr(pr->value[pr->n], '\0',
	    bl) != NULL) {
		free(pr->name[pr->n]);
		tl_secret_free(pr->value[pr->n]);
		pr->name[pr->n] = pr->value[pr->n] = NULL;
		snprintf(pr->error, sizeof(pr->error), "tallyd --prepare "
		    "answered a line that is not a setting its driver "
		    "prepares");
		return;
	}
	pr->value[pr->n][bl] = '\0';
	pr->secret[pr->n] = secret;
	pr->n++;
}

int
cli_prep_run(struct tl_cli *cli, struct cli_prep *pr)
{
	const char *args[] = { "--prepare", pr->dd->name, NULL };
	int ex;

	ex = cli_tallyd(cli, args, pr->in, pr->inlen, got, pr);
	if (ex != 0 && pr->error[0] == '\0')
		snprintf(pr->error, sizeof(pr->error), "tallyd --prepare %s "
		    "failed (exit %d)", pr->dd->name, ex);
	return ex != 0 || pr->error[0] != '\0' ? TL_EREFUSED : 0;
}

void
cli_prep_free(struct cli_prep *pr)
{
	size_t i;

	for (i = 0; i < pr->n; i++) {
		free(pr->name[i]);
		tl_secret_free(pr->value[i]);
	}
	tl_secret_free(pr->in);
	memset(pr, 0, sizeof(*pr));
}
