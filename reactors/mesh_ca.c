/*
 * mesh_ca.c - the mesh CA's certificate (mesh_ca.h).
 */
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "drivers/decl.h"
#include "mesh_ca.h"

/* p/ records: the first whose driver is a mesh's one CA. */
struct mca {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	char			*out;	/* NULL: only id and type wanted */
	size_t			 cap;
	int			 found;
	char			 id[130], type[64];
};

static int
mca_one(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct mca *m = arg;
	struct tl_rec r, a;
	struct tl_bnode types, n;
	const struct tl_drv_decl *d = NULL;
	const struct tl_drv_setting *st;
	char module[64] = "", node[64] = "", k[TL_KEY_MAX];
	size_t i;

	(void)rest;
	if (m->found || tl_rec_open(val, vlen, &r) != 0)
		return 0;
	tl_bn_getstr(r.m, "module", module, sizeof(module));
	tl_bn_getstr(r.m, "node", node, sizeof(node));
	if (tl_bn_get(r.m, "types", &types) == 0)
		for (i = 0; i < tl_bn_len(types) && d == NULL; i++) {
			char drv[64] = "";
			const struct tl_drv_decl *x;

			tl_bn_getstr(tl_bn_at(types, i), "driver", drv,
			    sizeof(drv));
			if ((x = tl_drv_decl_find(drv)) != NULL &&
			    x->credential.kind == TL_DRV_CRED_CERTIFICATE &&
			    x->instances != NULL &&
			    strcmp(x->instances, "one-per-mesh") == 0) {
				d = x;
				tl_bn_getstr(tl_bn_at(types, i), "type",
				    m->type, sizeof(m->type));
			}
		}
	tl_rec_close(&r);
	if (d != NULL && m->out == NULL) {
		snprintf(m->id, sizeof(m->id), "%s", rest);
		m->found = 1;
		return 0;
	}
	if (d == NULL || (st = tl_drv_setting_for(d, TL_DRV_USE_ADMIN_CERT,
	    0)) == NULL || tl_key(k, "a/%s@%s", module, node) != 0 ||
	    tl_rec_get(m->t, m->p->graph, k, &a) != 0)
		return 0;
	if (tl_bn_get(a.m, "settings", &n) == 0 &&
	    tl_bn_getstr(n, st->name, m->out, m->cap) == 0 &&
	    m->out[0] != '\0')
		m->found = 1;
	tl_rec_close(&a);
	return 0;
}

int
tl_rx_mesh_ca(struct tl_txn *t, const struct tl_proj *p, char *out,
    size_t cap)
{
	struct mca m = { t, p, out, cap, 0, "", "" };
	int rc;

	out[0] = '\0';
	if ((rc = tl_rec_scan(t, p->graph, "p/", mca_one, &m)) != 0)
		return rc;
	if (!m.found) {
		out[0] = '\0';
		return TL_ENOTFOUND;
	}
	return 0;
}

int
tl_rx_mesh_ca_dup(struct tl_txn *t, const struct tl_proj *p, char **pem)
{
	char *buf;
	int rc;

	*pem = NULL;
	if ((buf = malloc(TL_DRV_PEM_MAX + 1)) == NULL)
		return ENOMEM;
	if ((rc = tl_rx_mesh_ca(t, p, buf, TL_DRV_PEM_MAX + 1)) != 0) {
		free(buf);
		return rc == TL_ENOTFOUND ? 0 : rc;
	}
	*pem = buf;
	return 0;
}

int
tl_rx_mesh_ca_provider(struct tl_txn *t, const struct tl_proj *p,
    char id[130], char type[64])
{
	struct mca m = { t, p, NULL, 0, 0, "", "" };
	int rc;

	id[0] = type[0] = '\0';
	if ((rc = tl_rec_scan(t, p->graph, "p/", mca_one, &m)) != 0)
		return rc;
	if (!m.found)
		return TL_ENOTFOUND;
	memcpy(id, m.id, sizeof(m.id));
	memcpy(type, m.type, sizeof(m.type));
	return 0;
}
