/*
 * graph.h - reading the graph projection (keys are listed in proj.h).
 */
#ifndef TL_GRAPH_H
#define TL_GRAPH_H

#include "proj.h"

#define TL_NAME_MAX	63

/* The nodes a module is assigned to, in assignment order. */
struct tl_nodelist {
	char	(*v)[64];
	size_t	 n, cap;
};

int	tl_graph_module_nodes(struct tl_txn *t, const struct tl_proj *p,
	    const char *module, struct tl_nodelist *nl);
void	tl_nodelist_free(struct tl_nodelist *nl);

/* The provider id of an assignment: "NODE/MODULE". */
int	tl_provider_id(char *buf, const char *node, const char *module);

/*
 * The provider setting revoke-public-connect (yes | no, default yes)
 * from an assignment's setting value ("" when unset): 0 only for "no".
 * PUBLIC then keeps CONNECT on the server's maintenance databases.
 */
#define TL_SET_REVOKE_PUBLIC_CONNECT	"revoke-public-connect"
int	tl_setting_revoke_public_connect(const char *value);

#endif
