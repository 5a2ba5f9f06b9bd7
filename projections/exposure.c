/*
 * exposure.c - whom a provider serves (exposure.h).
 */
#include <stdio.h>
#include <string.h>

#include "exposure.h"
#include "graph.h"

void
tl_exposure_of(struct tl_txn *t, const struct tl_proj *p, const char *provider,
    char out[16], char pnode[64])
{
	struct tl_rec r;
	char module[64] = "";
	char k[TL_KEY_MAX];

	out[0] = '\0';
	pnode[0] = '\0';
	if (tl_key(k, "p/%s", provider) != 0 ||
	    tl_rec_get(t, p->graph, k, &r) != 0)
		return;
	tl_bn_getstr(r.m, "module", module, sizeof(module));
	tl_bn_getstr(r.m, "node", pnode, 64);
	tl_rec_close(&r);
	if (tl_key(k, "a/%s@%s", module, pnode) != 0 ||
	    tl_rec_get(t, p->graph, k, &r) != 0)
		return;
	tl_bn_getstr(r.m, "expose", out, 16);
	tl_rec_close(&r);
}

static void
say(char *why, const char *fmt, const char *a, const char *b, const char *c,
    const char *d)
{
	if (why != NULL)
		snprintf(why, TL_WHY_MAX, fmt, a, b, c, d);
}

int
tl_exposure_serves(struct tl_txn *t, const struct tl_proj *p,
    const char *provider, const char *module, const char *node, char *why)
{
	struct tl_nodelist nl;
	char expose[16], pnode[64];
	size_t i;
	int ok = 1;

	tl_exposure_of(t, p, provider, expose, pnode);
	if (expose[0] == '\0') {
		say(why, "%s has no assignment to read its exposure from%s%s%s",
		    provider, "", "", "");
		return 0;
	}
	if (strcmp(expose, "network") == 0 || strcmp(expose, "public") == 0)
		return 1;
	if (strcmp(expose, "none") == 0) {
		say(why, "%s is exposed none: it serves no consumer%s%s%s",
		    provider, "", "", "");
		return 0;
	}
	/* local: the machine only. */
	if (node != NULL && node[0] != '\0') {
		if (strcmp(node, pnode) == 0)
			return 1;
		say(why, "%s is exposed local: it serves only consumers on "
		    "%s, and this instance runs on %s%s", provider, pnode,
		    node, "");
		return 0;
	}
	if (tl_graph_module_nodes(t, p, module, &nl) != 0)
		return 0;
	for (i = 0; ok && i < nl.n; i++)
		if (strcmp(nl.v[i], pnode) != 0) {
			say(why, "%s is exposed local: it serves only "
			    "consumers on %s, and %s runs on %s", provider,
			    pnode, module, nl.v[i]);
			ok = 0;
		}
	tl_nodelist_free(&nl);
	return ok;
}
