/*
 * body.h - building and reading event bodies (msgpack maps).
 *
 * Bodies are built with a tl_body: values are appended with their key,
 * nested maps and arrays are opened and closed, and tl_body_finish()
 * yields one canonical msgpack map (the smallest header for each size,
 * keys in the order given, so the same calls give the same bytes).
 * Errors are sticky: the first failure is reported by tl_body_finish().
 *
 * Bodies are read in place through a tl_bview: a node is a position in
 * the body's bytes, valid while those bytes are; nothing is allocated
 * (tl_bview_close() only forgets).  Strings point into the body.
 * Secrets are ext values (TL_EXT_SECRET) and are read with
 * tl_bn_secret(), never as strings.
 */
#ifndef TL_BODY_H
#define TL_BODY_H

#include <stddef.h>
#include <stdint.h>

#define TL_BODY_DEPTH	8

struct tl_body {
	uint8_t	*p;
	size_t	 len, cap;
	int	 err;
	int	 depth;
	size_t	 at[TL_BODY_DEPTH + 1];		/* where each level starts */
	uint32_t n[TL_BODY_DEPTH + 1];		/* entries in each level */
	uint8_t	 ismap[TL_BODY_DEPTH + 1];
};
#define TL_BODY_INIT	{ NULL, 0, 0, 0, 0, {0}, {0}, {1} }

void	tl_body_init(struct tl_body *b);
void	tl_body_free(struct tl_body *b);
/* Forgets the content, keeps the memory. */
void	tl_body_reset(struct tl_body *b);

/* key is NULL inside an array, required inside a map. */
void	tl_body_str(struct tl_body *b, const char *key, const char *v);
void	tl_body_strn(struct tl_body *b, const char *key, const char *v,
	    size_t n);
void	tl_body_u64(struct tl_body *b, const char *key, uint64_t v);
void	tl_body_i64(struct tl_body *b, const char *key, int64_t v);
void	tl_body_bool(struct tl_body *b, const char *key, int v);
void	tl_body_nil(struct tl_body *b, const char *key);
void	tl_body_bin(struct tl_body *b, const char *key, const void *v,
	    size_t n);
/* An encrypted value: shown redacted by every renderer. */
void	tl_body_secret(struct tl_body *b, const char *key, const void *v,
	    size_t n);
void	tl_body_map(struct tl_body *b, const char *key);
void	tl_body_arr(struct tl_body *b, const char *key);
void	tl_body_end(struct tl_body *b);
/* Appends an already encoded msgpack value under key. */
void	tl_body_raw(struct tl_body *b, const char *key, const void *v,
	    size_t n);

/* Closes the top map; *p stays owned by b. */
int	tl_body_finish(struct tl_body *b, const void **p, size_t *len);

/* Reading. */
enum tl_bn_kind {
	TL_BN_NONE, TL_BN_NIL, TL_BN_BOOL, TL_BN_UINT, TL_BN_INT,
	TL_BN_FLOAT, TL_BN_STR, TL_BN_BIN, TL_BN_SECRET, TL_BN_ARR,
	TL_BN_MAP, TL_BN_OTHER
};

struct tl_bnode {
	const uint8_t	*p;	/* the value's first byte; NULL: none */
	const uint8_t	*end;	/* the end of the body it is in */
};

struct tl_bview {
	struct tl_bnode	 root;
};

int	tl_bview_open(struct tl_bview *v, const void *body, size_t len);
/*
 * As tl_bview_open, for a body that was already checked: the body of an
 * event that tl_env_decode accepted.  Never for bytes from elsewhere.
 */
int	tl_bview_open_valid(struct tl_bview *v, const void *body, size_t len);
void	tl_bview_close(struct tl_bview *v);

enum tl_bn_kind tl_bn_kind(struct tl_bnode n);
/* TL_ENOTFOUND when absent; kind mismatches are TL_EMALFORMED. */
int	tl_bn_get(struct tl_bnode map, const char *key, struct tl_bnode *out);
int	tl_bn_str(struct tl_bnode n, const char **s, size_t *len);
int	tl_bn_u64(struct tl_bnode n, uint64_t *v);
int	tl_bn_i64(struct tl_bnode n, int64_t *v);
int	tl_bn_bool(struct tl_bnode n, int *v);
int	tl_bn_bin(struct tl_bnode n, const void **p, size_t *len);
int	tl_bn_secret(struct tl_bnode n, const void **p, size_t *len);
size_t	tl_bn_len(struct tl_bnode n);		/* array or map entries */
struct tl_bnode tl_bn_at(struct tl_bnode arr, size_t i);
int	tl_bn_entry(struct tl_bnode map, size_t i, struct tl_bnode *key,
	    struct tl_bnode *val);

/* n's own encoded bytes, whatever its kind (containers whole). */
int	tl_bn_raw(struct tl_bnode n, const void **p, size_t *len);

/* A float32 or float64, as a double. */
int	tl_bn_f64(struct tl_bnode n, double *v);

/*
 * Walking a map or an array in order, once: tl_bn_iter opens it
 * (TL_EMALFORMED if n is neither); tl_bn_iter_next gives the next
 * entry (key of kind TL_BN_NONE for an array's items) and returns 1, 0
 * at the end, or TL_EMALFORMED.
 */
struct tl_bn_iter {
	const uint8_t	*p, *end;
	uint64_t	 left;
	int		 map;
};
int	tl_bn_iter(struct tl_bnode n, struct tl_bn_iter *it);
int	tl_bn_iter_next(struct tl_bn_iter *it, struct tl_bnode *key,
	    struct tl_bnode *val);

/*
 * Conveniences on a map: copy a string field into buf (NUL-terminated;
 * TL_ETOOBIG if it does not fit), read an integer, with a default when
 * the field is absent.
 */
int	tl_bn_getstr(struct tl_bnode map, const char *key, char *buf,
	    size_t cap);
/* The same on a node (TL_ENOTFOUND for none, as tl_bn_pick leaves it). */
int	tl_bn_strcpy(struct tl_bnode n, char *buf, size_t cap);

/*
 * Several fields in one walk of the map: out[i] is the value of
 * keys[i], or a node of kind TL_BN_NONE when absent.  Cheapest when the
 * keys are asked for in the order the record was written.
 */
#define TL_BN_PICK_MAX	64
int	tl_bn_pick(struct tl_bnode map, const char *const keys[], size_t n,
	    struct tl_bnode out[]);
uint64_t tl_bn_getu64(struct tl_bnode map, const char *key, uint64_t dflt);

#endif
