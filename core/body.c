/*
 * body.c - event bodies, written and read in place (core/mp.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "envelope.h"
#include "error.h"
#include "mp.h"
#include "vec.h"

void
tl_body_init(struct tl_body *b)
{
	memset(b, 0, sizeof(*b));
	b->ismap[0] = 1;
}

void
tl_body_free(struct tl_body *b)
{
	if (b == NULL)
		return;
	free(b->p);
	tl_body_init(b);
}

void
tl_body_reset(struct tl_body *b)
{
	uint8_t *p = b->p;
	size_t cap = b->cap;

	tl_body_init(b);
	b->p = p;
	b->cap = cap;
}

/* Makes room for n more bytes; sticky error on failure. */
static uint8_t *
room(struct tl_body *b, size_t n)
{
	if (b->err)
		return NULL;
	if (b->len + n > b->cap) {
		/* From 256 bytes: most bodies fit the first buffer. */
		size_t need = b->len + n < 256 ? 256 : b->len + n;

		if (n > TL_BODY_MAX * 2 || need > TL_BODY_MAX * 2) {
			b->err = TL_ETOOBIG;
			return NULL;
		}
		if (tl_vec_grow(&b->p, &b->cap, need, 1) != 0) {
			b->err = ENOMEM;
			return NULL;
		}
	}
	return b->p + b->len;
}

/*
 * Starts an entry: checks that a key is given exactly inside a map,
 * makes room for the key and a value of up to vmax bytes, writes the
 * key and counts the entry.  Returns where the value goes, or NULL.
 */
static uint8_t *
entry(struct tl_body *b, const char *key, size_t vmax)
{
	size_t kn = 0;
	uint8_t *p;

	if (b->err)
		return NULL;
	if (b->depth < 0) {
		b->err = TL_EINVAL;	/* already finished */
		return NULL;
	}
	if (b->ismap[b->depth] != (key != NULL)) {
		b->err = TL_EINVAL;
		return NULL;
	}
	if (key != NULL)
		kn = strlen(key);
	if (vmax > TL_BODY_MAX * 2 ||
	    (p = room(b, TL_MP_HDR_MAX + kn + vmax)) == NULL) {
		if (!b->err)
			b->err = TL_ETOOBIG;
		return NULL;
	}
	if (key != NULL)
		p = tl_mp_put_str(p, key, kn);
	b->n[b->depth]++;
	return p;
}

/* Ends an entry whose value ends at p. */
static void
done(struct tl_body *b, const uint8_t *p)
{
	b->len = (size_t)(p - b->p);
}

void
tl_body_str(struct tl_body *b, const char *key, const char *v)
{
	tl_body_strn(b, key, v, strlen(v));
}

void
tl_body_strn(struct tl_body *b, const char *key, const char *v, size_t n)
{
	uint8_t *p;

	if ((p = entry(b, key, TL_MP_HDR_MAX + n)) != NULL)
		done(b, tl_mp_put_str(p, v, n));
}

void
tl_body_u64(struct tl_body *b, const char *key, uint64_t v)
{
	uint8_t *p;

	if ((p = entry(b, key, TL_MP_HDR_MAX)) != NULL)
		done(b, tl_mp_put_uint(p, v));
}

void
tl_body_i64(struct tl_body *b, const char *key, int64_t v)
{
	uint8_t *p;

	if ((p = entry(b, key, TL_MP_HDR_MAX)) != NULL)
		done(b, tl_mp_put_int(p, v));
}

void
tl_body_bool(struct tl_body *b, const char *key, int v)
{
	uint8_t *p;

	if ((p = entry(b, key, 1)) != NULL) {
		*p++ = v ? 0xc3 : 0xc2;
		done(b, p);
	}
}

void
tl_body_nil(struct tl_body *b, const char *key)
{
	uint8_t *p;

	if ((p = entry(b, key, 1)) != NULL) {
		*p++ = 0xc0;
		done(b, p);
	}
}

void
tl_body_bin(struct tl_body *b, const char *key, const void *v, size_t n)
{
	uint8_t *p;

	if ((p = entry(b, key, TL_MP_HDR_MAX + n)) != NULL) {
		p = tl_mp_put_bin_hdr(p, n);
		memcpy(p, v, n);
		done(b, p + n);
	}
}

void
tl_body_secret(struct tl_body *b, const char *key, const void *v, size_t n)
{
	uint8_t *p;

	if ((p = entry(b, key, TL_MP_HDR_MAX + n)) != NULL) {
		p = tl_mp_put_ext_hdr(p, n, TL_EXT_SECRET);
		memcpy(p, v, n);
		done(b, p + n);
	}
}

void
tl_body_raw(struct tl_body *b, const char *key, const void *v, size_t n)
{
	uint8_t *p;

	if ((p = entry(b, key, n)) != NULL) {
		memcpy(p, v, n);
		done(b, p + n);
	}
}

static void
open_level(struct tl_body *b, const char *key, int ismap)
{
	uint8_t *p;

	if ((p = entry(b, key, 0)) == NULL)
		return;
	done(b, p);
	if (b->depth == TL_BODY_DEPTH) {
		b->err = TL_ETOOBIG;
		return;
	}
	b->depth++;
	b->at[b->depth] = b->len;
	b->n[b->depth] = 0;
	b->ismap[b->depth] = (uint8_t)ismap;
}

void
tl_body_map(struct tl_body *b, const char *key)
{
	open_level(b, key, 1);
}

void
tl_body_arr(struct tl_body *b, const char *key)
{
	open_level(b, key, 0);
}

/*
 * Inserts the header of the level that starts at 'at' now that its
 * size is known, so that every map gets the smallest header.
 */
static void
close_level(struct tl_body *b, size_t at, uint32_t n, int ismap)
{
	uint8_t hdr[TL_MP_HDR_MAX];
	size_t hn;

	if (b->err)
		return;
	hn = (size_t)(tl_mp_put_hdr(hdr, ismap, n) - hdr);
	if (room(b, hn) == NULL)
		return;
	/* Slide the content up by the header's size. */
	memmove(b->p + at + hn, b->p + at, b->len - at);
	memcpy(b->p + at, hdr, hn);
	b->len += hn;
}

void
tl_body_end(struct tl_body *b)
{
	if (b->err)
		return;
	if (b->depth == 0) {
		b->err = TL_EINVAL;
		return;
	}
	close_level(b, b->at[b->depth], b->n[b->depth], b->ismap[b->depth]);
	b->depth--;
}

int
tl_body_finish(struct tl_body *b, const void **p, size_t *len)
{
	if (b->err == 0 && b->depth != 0)
		b->err = TL_EINVAL;
	if (b->err)
		return b->err;
	close_level(b, 0, b->n[0], 1);
	if (b->err)
		return b->err;
	b->depth = -1;	/* finished: further calls are errors */
	*p = b->p;
	*len = b->len;
	return 0;
}

/*
 * Reading, lazily: a node is the position of an encoded value, and a
 * field is found by walking its map.  Bodies are small maps read a few
 * fields at a time, so walking costs less than msgpack-c's unpacker,
 * which builds the whole tree in a malloc'd zone first.  Every step is
 * bounded by the body's end, even for bytes that were never checked.
 */

static struct tl_bnode
node_at(const uint8_t *p, const uint8_t *end)
{
	struct tl_bnode n = { p, end };

	return n;
}

static const struct tl_bnode no_node = { NULL, NULL };

/* Reads n's header (and a scalar's payload); -1 if it has none. */
static int
head(struct tl_bnode n, struct tl_mp_item *it)
{
	const uint8_t *p = n.p;

	if (p == NULL)
		return -1;
	return tl_mp_read(&p, n.end, it);
}

int
tl_bview_open(struct tl_bview *v, const void *body, size_t len)
{
	int rc;

	v->root = no_node;
	/* Checked whole first: readers below trust the structure. */
	if ((rc = tl_env_check_map(body, len)) != 0)
		return rc;
	return tl_bview_open_valid(v, body, len);
}

int
tl_bview_open_valid(struct tl_bview *v, const void *body, size_t len)
{
	const uint8_t *p = body;

	v->root = no_node;
	if (len == 0 || ((p[0] & 0xf0) != 0x80 && p[0] != 0xde &&
	    p[0] != 0xdf))
		return TL_EMALFORMED;
	v->root = node_at(p, p + len);
	return 0;
}

void
tl_bview_close(struct tl_bview *v)
{
	if (v != NULL)
		v->root = no_node;
}

enum tl_bn_kind
tl_bn_kind(struct tl_bnode n)
{
	struct tl_mp_item it;

	if (head(n, &it) != 0)
		return TL_BN_NONE;
	switch (it.kind) {
	case TL_MP_NIL:		return TL_BN_NIL;
	case TL_MP_BOOL:	return TL_BN_BOOL;
	case TL_MP_UINT:	return TL_BN_UINT;
	case TL_MP_NINT:	return TL_BN_INT;
	case TL_MP_FLOAT:	return TL_BN_FLOAT;
	case TL_MP_STR:		return TL_BN_STR;
	case TL_MP_BIN:		return TL_BN_BIN;
	case TL_MP_ARR:		return TL_BN_ARR;
	case TL_MP_MAP:		return TL_BN_MAP;
	case TL_MP_EXT:
		return it.ptr[-1] == TL_EXT_SECRET ? TL_BN_SECRET :
		    TL_BN_OTHER;
	}
	return TL_BN_OTHER;
}

/*
 * Positions *pp after the header of container n and returns its count
 * of items (a map's entries count twice); -1 if n is not of kind.
 */
static int64_t
enter(struct tl_bnode n, enum tl_mp_kind kind, const uint8_t **pp)
{
	struct tl_mp_item it;

	*pp = n.p;
	if (n.p == NULL || tl_mp_read(pp, n.end, &it) != 0 || it.kind != kind)
		return -1;
	return (int64_t)(kind == TL_MP_MAP ? it.u * 2 : it.u);
}

int
tl_bn_pick(struct tl_bnode map, const char *const keys[], size_t n,
    struct tl_bnode out[])
{
	size_t len[TL_BN_PICK_MAX], i, j, next = 0, found = 0;
	const uint8_t *p, *k;
	struct tl_mp_item it;
	int64_t items;

	if (n > TL_BN_PICK_MAX)
		return TL_EINVAL;
	for (i = 0; i < n; i++) {
		out[i] = no_node;
		len[i] = strlen(keys[i]);
	}
	if ((items = enter(map, TL_MP_MAP, &p)) < 0)
		return TL_EMALFORMED;
	for (; items > 0 && found < n; items -= 2) {
		k = p;
		if (tl_mp_read(&p, map.end, &it) != 0)
			return TL_EMALFORMED;
		if (it.kind == TL_MP_ARR || it.kind == TL_MP_MAP) {
			p = k;
			if (tl_mp_skip(&p, map.end, NULL) != 0)
				return TL_EMALFORMED;
		} else if (it.kind == TL_MP_STR) {
			/*
			 * Records are written in the order their readers ask
			 * for them: try the key after the last one found
			 * first, then all of them.
			 */
			for (i = 0; i < n; i++) {
				j = (next + i) % n;
				if (len[j] == it.len && out[j].p == NULL &&
				    memcmp(keys[j], it.ptr, it.len) == 0)
					break;
			}
			if (i < n) {
				out[j] = node_at(p, map.end);
				next = j + 1;
				found++;
			}
		}
		if (tl_mp_skip(&p, map.end, NULL) != 0)
			return TL_EMALFORMED;
	}
	return 0;
}

int
tl_bn_get(struct tl_bnode map, const char *key, struct tl_bnode *out)
{
	int rc;

	if ((rc = tl_bn_pick(map, &key, 1, out)) != 0)
		return rc;
	return out->p != NULL ? 0 : TL_ENOTFOUND;
}

int
tl_bn_strcpy(struct tl_bnode n, char *buf, size_t cap)
{
	const char *s;
	size_t len;
	int rc;

	if (cap > 0)
		buf[0] = '\0';
	if (n.p == NULL)
		return TL_ENOTFOUND;
	if ((rc = tl_bn_str(n, &s, &len)) != 0)
		return rc;
	if (len >= cap)
		return TL_ETOOBIG;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

int
tl_bn_str(struct tl_bnode n, const char **s, size_t *len)
{
	struct tl_mp_item it;

	if (head(n, &it) != 0 || it.kind != TL_MP_STR)
		return TL_EMALFORMED;
	*s = (const char *)it.ptr;
	*len = it.len;
	return 0;
}

int
tl_bn_u64(struct tl_bnode n, uint64_t *v)
{
	struct tl_mp_item it;

	if (head(n, &it) != 0 || it.kind != TL_MP_UINT)
		return TL_EMALFORMED;
	*v = it.u;
	return 0;
}

int
tl_bn_i64(struct tl_bnode n, int64_t *v)
{
	struct tl_mp_item it;
	uint8_t c;

	if (head(n, &it) != 0)
		return TL_EMALFORMED;
	if (it.kind == TL_MP_UINT && it.u <= INT64_MAX) {
		*v = (int64_t)it.u;
		return 0;
	}
	if (it.kind != TL_MP_NINT)
		return TL_EMALFORMED;
	c = n.p[0];
	if (c >= 0xe0) {			/* negative fixint */
		*v = (int64_t)c - 256;
		return 0;
	}
	/* int 8/16/32/64: it.u holds the bits; extend the sign. */
	switch (c) {
	case 0xd0: *v = (int8_t)(uint8_t)it.u;		break;
	case 0xd1: *v = (int16_t)(uint16_t)it.u;	break;
	case 0xd2: *v = (int32_t)(uint32_t)it.u;	break;
	default:   *v = (int64_t)it.u;			break;
	}
	return 0;
}

int
tl_bn_bool(struct tl_bnode n, int *v)
{
	struct tl_mp_item it;

	if (head(n, &it) != 0 || it.kind != TL_MP_BOOL)
		return TL_EMALFORMED;
	*v = (int)it.u;
	return 0;
}

int
tl_bn_bin(struct tl_bnode n, const void **p, size_t *len)
{
	struct tl_mp_item it;

	if (head(n, &it) != 0 || it.kind != TL_MP_BIN)
		return TL_EMALFORMED;
	*p = it.ptr;
	*len = it.len;
	return 0;
}

int
tl_bn_secret(struct tl_bnode n, const void **p, size_t *len)
{
	struct tl_mp_item it;

	if (head(n, &it) != 0 || it.kind != TL_MP_EXT ||
	    it.ptr[-1] != TL_EXT_SECRET)
		return TL_EMALFORMED;
	*p = it.ptr;
	*len = it.len;
	return 0;
}

size_t
tl_bn_len(struct tl_bnode n)
{
	struct tl_mp_item it;

	if (head(n, &it) != 0 ||
	    (it.kind != TL_MP_ARR && it.kind != TL_MP_MAP))
		return 0;
	return (size_t)it.u;
}

int
tl_bn_raw(struct tl_bnode n, const void **p, size_t *len)
{
	const uint8_t *q = n.p;

	if (q == NULL || tl_mp_skip(&q, n.end, NULL) != 0)
		return TL_EMALFORMED;
	*p = n.p;
	*len = (size_t)(q - n.p);
	return 0;
}

int
tl_bn_f64(struct tl_bnode n, double *v)
{
	struct tl_mp_item it;
	uint64_t bits;

	if (head(n, &it) != 0 || it.kind != TL_MP_FLOAT)
		return TL_EMALFORMED;
	if (n.p[0] == 0xca) {
		uint32_t b32 = (uint32_t)tl_mp_be(n.p + 1, 4);
		float f;

		memcpy(&f, &b32, sizeof(f));
		*v = f;
	} else {
		bits = tl_mp_be(n.p + 1, 8);
		memcpy(v, &bits, sizeof(*v));
	}
	return 0;
}

int
tl_bn_iter(struct tl_bnode n, struct tl_bn_iter *it)
{
	struct tl_mp_item h;
	const uint8_t *p = n.p;

	memset(it, 0, sizeof(*it));
	if (p == NULL || tl_mp_read(&p, n.end, &h) != 0 ||
	    (h.kind != TL_MP_MAP && h.kind != TL_MP_ARR))
		return TL_EMALFORMED;
	it->p = p;
	it->end = n.end;
	it->left = h.u;
	it->map = h.kind == TL_MP_MAP;
	return 0;
}

int
tl_bn_iter_next(struct tl_bn_iter *it, struct tl_bnode *key,
    struct tl_bnode *val)
{
	*key = *val = no_node;
	if (it->left == 0)
		return 0;
	if (it->map) {
		*key = node_at(it->p, it->end);
		if (tl_mp_skip(&it->p, it->end, NULL) != 0)
			return TL_EMALFORMED;
	}
	*val = node_at(it->p, it->end);
	if (tl_mp_skip(&it->p, it->end, NULL) != 0)
		return TL_EMALFORMED;
	it->left--;
	return 1;
}

/* Skips i items after *pp; -1 if they are not there. */
static int
skip_items(const uint8_t **pp, const uint8_t *end, size_t i)
{
	while (i-- > 0)
		if (tl_mp_skip(pp, end, NULL) != 0)
			return -1;
	return 0;
}

struct tl_bnode
tl_bn_at(struct tl_bnode arr, size_t i)
{
	const uint8_t *p;
	int64_t items;

	if ((items = enter(arr, TL_MP_ARR, &p)) < 0 || i >= (uint64_t)items ||
	    skip_items(&p, arr.end, i) != 0)
		return no_node;
	return node_at(p, arr.end);
}

int
tl_bn_entry(struct tl_bnode map, size_t i, struct tl_bnode *key,
    struct tl_bnode *val)
{
	const uint8_t *p;
	int64_t items;

	*key = *val = no_node;
	if ((items = enter(map, TL_MP_MAP, &p)) < 0 ||
	    i >= (uint64_t)items / 2 || skip_items(&p, map.end, i * 2) != 0)
		return TL_EINVAL;
	*key = node_at(p, map.end);
	if (tl_mp_skip(&p, map.end, NULL) != 0) {
		*key = no_node;
		return TL_EINVAL;
	}
	*val = node_at(p, map.end);
	return 0;
}

int
tl_bn_getstr(struct tl_bnode map, const char *key, char *buf, size_t cap)
{
	struct tl_bnode n;
	int rc;

	if (cap > 0)
		buf[0] = '\0';
	if ((rc = tl_bn_get(map, key, &n)) != 0)
		return rc;
	return tl_bn_strcpy(n, buf, cap);
}

uint64_t
tl_bn_getu64(struct tl_bnode map, const char *key, uint64_t dflt)
{
	struct tl_bnode n;
	uint64_t v;

	if (tl_bn_get(map, key, &n) != 0 || tl_bn_u64(n, &v) != 0)
		return dflt;
	return v;
}
