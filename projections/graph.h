/*
 * graph.h - reading the graph projection (keys are listed in proj.h).
 *
 * Every reader takes a transaction of the caller's (read or write) and
 * copies what it returns out of the map, so results outlive it.  Errors
 * are core/error.h codes: TL_ETOOBIG for a name that makes a key longer
 * than TL_KEY_MAX, TL_ECORRUPT for a record that does not decode,
 * ENOMEM, or an LMDB error translated by core/kv.c.
 */
#ifndef TL_GRAPH_H
#define TL_GRAPH_H

#include "record.h"

#define TL_NAME_MAX	63

/*
 * The nodes a module is assigned to, in assignment order.
 * tl_graph_module_nodes fills nl (initialising it: no need to zero it
 * first); the caller owns nl->v and frees it with tl_nodelist_free,
 * which leaves nl empty and may be called twice.  On error nl is
 * already freed.
 */
struct tl_nodelist {
	char	(*v)[64];
	size_t	 n, cap;
};

int	tl_graph_module_nodes(struct tl_txn *t, const struct tl_proj *p,
	    const char *module, struct tl_nodelist *nl);
void	tl_nodelist_free(struct tl_nodelist *nl);
/*
 * Parts (docs/manifest.md): an assignment installs every part of its
 * module, or those its parts[] names.  tl_graph_installs is 1 when
 * module@node installs part ("" or NULL: a requirement of every part,
 * installed wherever the module is), 0 otherwise (no such assignment
 * included).  tl_graph_req_nodes is tl_graph_module_nodes kept to the
 * assignments that install requirement req's part: the holders of its
 * grant; a requirement that is gone keeps every node.
 */
int	tl_graph_installs(struct tl_txn *t, const struct tl_proj *p,
	    const char *module, const char *node, const char *part);
int	tl_graph_req_part(struct tl_txn *t, const struct tl_proj *p,
	    const char *module, const char *req, char part[64]);
int	tl_graph_req_nodes(struct tl_txn *t, const struct tl_proj *p,
	    const char *module, const char *req, struct tl_nodelist *nl);

/*
 * The provider id of an assignment: "NODE/MODULE", into buf of
 * TL_KEY_MAX bytes; TL_ETOOBIG if it does not fit.
 */
int	tl_provider_id(char *buf, const char *node, const char *module);

/*
 * The latest offer the ack pass decided (reactors/ack.c), as the record
 * shows it: the cause of the last credential.acknowledged,
 * security.ack-refused, security.report-refused or node.reported by a
 * node's actor; 0 when none.  Always 0 (the value in *seq).
 */
int	tl_graph_acks_decided(struct tl_txn *t, const struct tl_proj *p,
	    uint64_t *seq);

/* The graph fold: for tl_proj_apply, in the event's write transaction. */
int	tl_fold_graph(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_event *ev, struct tl_bnode body);
/*
 * The certificates fold (certs.c), after the graph's and before the
 * grants': cs/, crlr/, crlq/ and crl/ of the graph table.
 */
int	tl_fold_certs(struct tl_txn *t, const struct tl_proj *p,
	    const struct tl_event *ev, struct tl_bnode body);

#endif
