/*
 * manifest-internal.h - what the pieces of the manifest loader share:
 * the tree of nodes the YAML walk builds (manifest_load.c), the context
 * one load carries, and the helpers of manifest_util.c (memory, message
 * text, errors), manifest_check.c (validation helpers, sorting, values)
 * and manifest_parse.c (the document).  Not an interface: manifest.h is.
 *
 * Lifetimes: every node and string lives in a list of blocks (struct
 * blk) freed together: the tree's (c->tree) when a parse ends, the
 * set's (set->mem) by tl_mf_set_free.  Problems in the input are
 * recorded in c->errs through mf_err/mf_err_at, not returned; the
 * first system error (ENOMEM, …) is kept in c->sys and stops the load.
 */
#ifndef TALLY_MANIFEST_INTERNAL_H
#define TALLY_MANIFEST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "manifest.h"

#if defined(__GNUC__)
#define PRINTFLIKE(f, a)	__attribute__((format(printf, f, a)))
#else
#define PRINTFLIKE(f, a)
#endif

#define FIELD		128	/* sizeof tl_mf_error.field */
#define QUOTE		48	/* a quoted value in a message */
#define MAX_DEPTH	16	/* a manifest needs 5; deeper is a mistake */
#define PATH_LIMIT	4096

/*
 * Every allocation is its own malloc block on a list, freed together.
 * A bump allocator would be faster, but separate blocks keep
 * AddressSanitizer able to see an overrun of any one string.
 */
struct blk {
	struct blk *next;
	max_align_t data[];
};

struct tl_mf_set {
	struct tl_mf_module *v;
	size_t	n, cap;
	struct blk *mem;
};

enum nkind { N_SCALAR, N_MAP, N_SEQ, N_BAD };

/*
 * N_BAD stands where the input had something we refuse (an alias, a
 * NUL byte, too deep a nesting): it was reported when it was built,
 * so the validators pass over it in silence.
 */
struct node {
	enum nkind kind;
	int	line, col;
	unsigned null:1;	/* a plain scalar that YAML reads as null */
	unsigned skip:1;	/* a key already reported, ignore its pair */
	const char *s;		/* a scalar's text */
	size_t	n;		/* children; in a map keys and values alternate */
	struct node *first, *last, *next;
};

/* A collection being built, and the field path of its children. */
struct frame {
	struct node *n;
	char	path[FIELD];
};

/* Something a module may claim only once (a variable, a resource name). */
struct mf_claim {
	const char *a, *b, *c;
	char	field[FIELD];
	int	line, col;
};

struct claims {
	struct mf_claim *v;
	size_t	n, cap;
};

struct modname {
	const char *name;
	int	line, col;
};

struct ctx {
	const char *name;
	const char *base_dir;
	char	*base_abs;
	const char *const *drivers;
	struct tl_mf_errors *errs;
	size_t	start;		/* errs->n on entry */
	size_t	nerr, kept;
	int	sys;		/* first system error; stops everything */
	struct tl_mf_set *set;
	struct blk *tree;	/* the current document's nodes */
	const char *file;	/* name, in the set's memory */
	size_t	ndocs;
	struct modname *names;
	size_t	nnames, capnames;
	struct claims vars, resources;
};

/* manifest_util.c */
void *	mf_blk_alloc(struct blk **list, size_t size);
void	mf_blk_free(struct blk **list);
void *	mf_alloc_n(struct ctx *c, size_t n, size_t size);
char *	mf_sdup(struct ctx *c, const char *s);
int	mf_put(char *dst, size_t size, size_t *pos, const char *s, size_t len);
const char *	mf_quote(char *buf, size_t size, const char *s);
void	mf_join(char *dst, size_t size, const char *base, const char *key);
const char *	mf_join_list(char *buf, size_t size, const char *const *list);
int	mf_in_list(const char *const *list, const char *s);
const char *	mf_kind_name(const struct node *n);
int	mf_clamp_line(size_t v);
void PRINTFLIKE(5, 6)	mf_err_at(struct ctx *c, int line, int col,
	    const char *field, const char *fmt, ...);
void PRINTFLIKE(4, 5)	mf_err(struct ctx *c, const struct node *n,
	    const char *field, const char *fmt, ...);

/* manifest_load.c */
void	mf_load(struct ctx *c, const unsigned char *buf, size_t len);

/* manifest_check.c */
void	mf_check_keys(struct ctx *c, struct node *map, const char *path,
	    const char *const *allowed);
struct node *	mf_get(struct node *map, const char *key, struct node **keyp);
const char *	mf_want_str(struct ctx *c, const struct node *v,
	    const char *path);
int	mf_want_map(struct ctx *c, const struct node *v, const char *path,
	    const char *what);
int	mf_valid_name(const char *s, size_t len);
int	mf_check_name(struct ctx *c, const struct node *n, const char *path,
	    const char *s, size_t len, const char *what);
int	mf_check_env_name(struct ctx *c, const struct node *n, const char *path,
	    const char *s);
void	mf_claim(struct ctx *c, struct claims *cl, const char *a, const char *b,
	    const char *cc, const char *field, const struct node *at);
int	mf_cmp_claim_what(const struct mf_claim *x, const struct mf_claim *y);
int	mf_cmp_claim(const void *a, const void *b);
int	mf_cmp_var(const void *a, const void *b);
int	mf_cmp_map(const void *a, const void *b);
int	mf_cmp_req(const void *a, const void *b);
int	mf_cmp_provide(const void *a, const void *b);
int	mf_cmp_embedded(const void *a, const void *b);
int	mf_cmp_module(const void *a, const void *b);
int	mf_cmp_modname(const void *a, const void *b);
int	mf_cmp_name_key(const void *key, const void *elem);
const struct tl_mf_var *	mf_find_var(const struct tl_mf_module *m,
	    const char *name);
const struct tl_mf_embedded *	mf_find_embedded(const struct tl_mf_module *m,
	    const char *name);
void	mf_parse_age(struct ctx *c, const struct node *v, const char *path,
	    int64_t *out);
const char *	mf_resolve(struct ctx *c, const struct node *v,
	    const char *path, const char *rel);

/* manifest_parse.c */
void	mf_parse_module(struct ctx *c, struct node *root);
void	mf_check_module_names(struct ctx *c);
void	mf_sort_errors(struct tl_mf_error *v, size_t n);

#endif
