/*
 * catalogue.h - the event catalogue: every type tally appends, the kind
 * of stream it goes to, its body's fields, and the folds that take it.
 *
 * One table (projections/catalogue.c) is the list.  tl_emit() refuses
 * a type that is not in it, and a string field longer than the limit
 * the catalogue gives it (the size of the buffer a fold or a reactor
 * keeps it in), naming the field and the limit in the decider's
 * reason: a value that cannot be stored is refused when it is decided.
 * tl_proj_apply() checks the same limits before folding, so an event
 * that reaches a fold past the deciders (an older writer, a foreign
 * log) makes the fold fail with TL_ETOOBIG rather than keep "" or a
 * cut value.  Types the catalogue marks ignored (folds == 0) are not
 * given to the folds at all; tests/check_catalogue.c checks that each
 * fold names each type the table says it takes.
 *
 * Everything returned points into static storage: valid for the life
 * of the program, never freed.  No function here allocates or fails
 * other than by the return values stated.
 */
#ifndef TL_CATALOGUE_H
#define TL_CATALOGUE_H

#include <stddef.h>

#include "core/body.h"

/* The folds (projections/proj.c dispatches to them in this order). */
#define TL_FOLD_GRAPH		0x1u	/* projections/graph.c */
#define TL_FOLD_GRANTS		0x2u	/* projections/grants.c */
#define TL_FOLD_CERTS		0x10u	/* projections/certs.c, after graph's */
#define TL_FOLD_ROTATION	0x4u	/* projections/rotation.c */
#define TL_FOLD_REBIND		0x8u	/* projections/rebind.c */

/*
 * A string field with a limit: at most max bytes (a fold keeps it in a
 * buffer of max + 1).  name is a key of the body; "map.key" a key of a
 * map inside it (grant.provisioned's fields.host); "arr[]" every string
 * of an array (credential.retired's cut_off[]); "arr[].key" a key of
 * every map of one (provider.registered's types[].type).
 */
struct tl_cat_field {
	const char	*name;
	size_t		 max;
};

#define TL_CAT_FIELDS_MAX	12

struct tl_cat_event {
	const char	*type;		/* "node.added" */
	const char	*macro;		/* "TL_EV_NODE_ADDED" */
	const char	*stream;	/* the stream's kind: "node" */
	const char	*body;		/* every field, as documentation */
	unsigned	 folds;		/* TL_FOLD_* bits; 0: ignored */
	const char	*ignored;	/* why no fold takes it (folds == 0) */
	struct tl_cat_field limits[TL_CAT_FIELDS_MAX];	/* name NULL ends */
};

/* The entry of type, or NULL when tally never appends such a type. */
const struct tl_cat_event *tl_cat_find(const char *type);
/* The entry whose macro (in events.h, rotation.h, rebind.h) is name. */
const struct tl_cat_event *tl_cat_by_macro(const char *name);
size_t	tl_cat_count(void);
const struct tl_cat_event *tl_cat_at(size_t i);

/*
 * Checks body (the root map of an event of entry e) against e's limits:
 * 0 when every limited string fits (or is absent, or is not a string:
 * the fold decides about those), else TL_ETOOBIG with *field and *max
 * set to the first field that does not fit and its limit, and *len to
 * its length.
 */
int	tl_cat_check(const struct tl_cat_event *e, struct tl_bnode body,
	    const char **field, size_t *max, size_t *len);

#endif
