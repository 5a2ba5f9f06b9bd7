/*
 * body.c - event bodies over msgpack-c.
 */
#include <errno.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "envelope.h"
#include "error.h"

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

static int
body_write(void *data, const char *buf, size_t len)
{
	struct tl_body *b = data;

	if (b->err)
		return -1;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *np;

		while (cap < b->len + len)
			cap *= 2;
		if (cap > TL_BODY_MAX * 2 || (np = realloc(b->p, cap)) ==
		    NULL) {
			b->err = cap > TL_BODY_MAX * 2 ? TL_ETOOBIG : ENOMEM;
			return -1;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, buf, len);
	b->len += len;
	return 0;
}

static void
packer(struct tl_body *b, msgpack_packer *pk)
{
	msgpack_packer_init(pk, b, body_write);
}

/* Writes the key (in a map) and counts the entry. */
static int
entry(struct tl_body *b, msgpack_packer *pk, const char *key)
{
	packer(b, pk);
	if (b->err)
		return -1;
	if (b->depth < 0) {
		b->err = TL_EINVAL;	/* already finished */
		return -1;
	}
	if (b->ismap[b->depth]) {
		size_t n;

		if (key == NULL) {
			b->err = TL_EINVAL;
			return -1;
		}
		n = strlen(key);
		msgpack_pack_str(pk, n);
		msgpack_pack_str_body(pk, key, n);
	} else if (key != NULL) {
		b->err = TL_EINVAL;
		return -1;
	}
	b->n[b->depth]++;
	return 0;
}

void
tl_body_str(struct tl_body *b, const char *key, const char *v)
{
	tl_body_strn(b, key, v, strlen(v));
}

void
tl_body_strn(struct tl_body *b, const char *key, const char *v, size_t n)
{
	msgpack_packer pk;

	if (entry(b, &pk, key) != 0)
		return;
	msgpack_pack_str(&pk, n);
	msgpack_pack_str_body(&pk, v, n);
}

void
tl_body_u64(struct tl_body *b, const char *key, uint64_t v)
{
	msgpack_packer pk;

	if (entry(b, &pk, key) == 0)
		msgpack_pack_uint64(&pk, v);
}

void
tl_body_i64(struct tl_body *b, const char *key, int64_t v)
{
	msgpack_packer pk;

	if (entry(b, &pk, key) == 0)
		msgpack_pack_int64(&pk, v);
}

void
tl_body_bool(struct tl_body *b, const char *key, int v)
{
	msgpack_packer pk;

	if (entry(b, &pk, key) != 0)
		return;
	if (v)
		msgpack_pack_true(&pk);
	else
		msgpack_pack_false(&pk);
}

void
tl_body_nil(struct tl_body *b, const char *key)
{
	msgpack_packer pk;

	if (entry(b, &pk, key) == 0)
		msgpack_pack_nil(&pk);
}

void
tl_body_bin(struct tl_body *b, const char *key, const void *v, size_t n)
{
	msgpack_packer pk;

	if (entry(b, &pk, key) != 0)
		return;
	msgpack_pack_bin(&pk, n);
	msgpack_pack_bin_body(&pk, v, n);
}

void
tl_body_secret(struct tl_body *b, const char *key, const void *v, size_t n)
{
	msgpack_packer pk;

	if (entry(b, &pk, key) != 0)
		return;
	msgpack_pack_ext(&pk, n, TL_EXT_SECRET);
	msgpack_pack_ext_body(&pk, v, n);
}

void
tl_body_raw(struct tl_body *b, const char *key, const void *v, size_t n)
{
	msgpack_packer pk;

	if (entry(b, &pk, key) == 0)
		body_write(b, v, n);
}

static void
open_level(struct tl_body *b, const char *key, int ismap)
{
	msgpack_packer pk;

	if (entry(b, &pk, key) != 0)
		return;
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
	struct tl_body hb;
	msgpack_packer pk;

	if (b->err)
		return;
	tl_body_init(&hb);
	packer(&hb, &pk);
	if (ismap)
		msgpack_pack_map(&pk, n);
	else
		msgpack_pack_array(&pk, n);
	if (hb.err) {
		b->err = hb.err;
		goto out;
	}
	/* Grow by the header's size, then slide the content up. */
	if (body_write(b, (const char *)hb.p, hb.len) != 0)
		goto out;
	memmove(b->p + at + hb.len, b->p + at, b->len - hb.len - at);
	memcpy(b->p + at, hb.p, hb.len);
out:
	tl_body_free(&hb);
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

/* Reading. */

#define OBJ(n)	((const msgpack_object *)(n).o)

int
tl_bview_open(struct tl_bview *v, const void *body, size_t len)
{
	int rc;

	v->zone = NULL;
	v->root.o = NULL;
	/* Checked first: msgpack-c trusts a container's claimed size. */
	if ((rc = tl_env_check_map(body, len)) != 0)
		return rc;
	return tl_bview_open_valid(v, body, len);
}

int
tl_bview_open_valid(struct tl_bview *v, const void *body, size_t len)
{
	msgpack_zone *z;
	msgpack_object *root;
	size_t off = 0;

	v->zone = NULL;
	v->root.o = NULL;
	if ((z = msgpack_zone_new(1024)) == NULL)
		return ENOMEM;
	if ((root = msgpack_zone_malloc(z, sizeof(*root))) == NULL) {
		msgpack_zone_free(z);
		return ENOMEM;
	}
	if (msgpack_unpack(body, len, &off, z, root) !=
	    MSGPACK_UNPACK_SUCCESS || root->type != MSGPACK_OBJECT_MAP) {
		msgpack_zone_free(z);
		return TL_EMALFORMED;
	}
	v->zone = z;
	v->root.o = root;
	return 0;
}

void
tl_bview_close(struct tl_bview *v)
{
	if (v == NULL || v->zone == NULL)
		return;
	msgpack_zone_free(v->zone);
	v->zone = NULL;
	v->root.o = NULL;
}

enum tl_bn_kind
tl_bn_kind(struct tl_bnode n)
{
	const msgpack_object *o = OBJ(n);

	if (o == NULL)
		return TL_BN_NONE;
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:		return TL_BN_NIL;
	case MSGPACK_OBJECT_BOOLEAN:		return TL_BN_BOOL;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:	return TL_BN_UINT;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:	return TL_BN_INT;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:		return TL_BN_FLOAT;
	case MSGPACK_OBJECT_STR:		return TL_BN_STR;
	case MSGPACK_OBJECT_BIN:		return TL_BN_BIN;
	case MSGPACK_OBJECT_ARRAY:		return TL_BN_ARR;
	case MSGPACK_OBJECT_MAP:		return TL_BN_MAP;
	case MSGPACK_OBJECT_EXT:
		return o->via.ext.type == TL_EXT_SECRET ? TL_BN_SECRET :
		    TL_BN_OTHER;
	}
	return TL_BN_OTHER;
}

int
tl_bn_get(struct tl_bnode map, const char *key, struct tl_bnode *out)
{
	const msgpack_object *o = OBJ(map);
	size_t n = strlen(key);
	uint32_t i;

	out->o = NULL;
	if (o == NULL || o->type != MSGPACK_OBJECT_MAP)
		return TL_EMALFORMED;
	for (i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key;

		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
		    memcmp(k->via.str.ptr, key, n) == 0) {
			out->o = &o->via.map.ptr[i].val;
			return 0;
		}
	}
	return TL_ENOTFOUND;
}

int
tl_bn_str(struct tl_bnode n, const char **s, size_t *len)
{
	const msgpack_object *o = OBJ(n);

	if (o == NULL || o->type != MSGPACK_OBJECT_STR)
		return TL_EMALFORMED;
	*s = o->via.str.ptr;
	*len = o->via.str.size;
	return 0;
}

int
tl_bn_u64(struct tl_bnode n, uint64_t *v)
{
	const msgpack_object *o = OBJ(n);

	if (o == NULL || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return TL_EMALFORMED;
	*v = o->via.u64;
	return 0;
}

int
tl_bn_i64(struct tl_bnode n, int64_t *v)
{
	const msgpack_object *o = OBJ(n);

	if (o != NULL && o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*v = o->via.i64;
		return 0;
	}
	if (o != NULL && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	    o->via.u64 <= INT64_MAX) {
		*v = (int64_t)o->via.u64;
		return 0;
	}
	return TL_EMALFORMED;
}

int
tl_bn_bool(struct tl_bnode n, int *v)
{
	const msgpack_object *o = OBJ(n);

	if (o == NULL || o->type != MSGPACK_OBJECT_BOOLEAN)
		return TL_EMALFORMED;
	*v = o->via.boolean;
	return 0;
}

int
tl_bn_bin(struct tl_bnode n, const void **p, size_t *len)
{
	const msgpack_object *o = OBJ(n);

	if (o == NULL || o->type != MSGPACK_OBJECT_BIN)
		return TL_EMALFORMED;
	*p = o->via.bin.ptr;
	*len = o->via.bin.size;
	return 0;
}

int
tl_bn_secret(struct tl_bnode n, const void **p, size_t *len)
{
	const msgpack_object *o = OBJ(n);

	if (o == NULL || o->type != MSGPACK_OBJECT_EXT ||
	    o->via.ext.type != TL_EXT_SECRET)
		return TL_EMALFORMED;
	*p = o->via.ext.ptr;
	*len = o->via.ext.size;
	return 0;
}

size_t
tl_bn_len(struct tl_bnode n)
{
	const msgpack_object *o = OBJ(n);

	if (o == NULL)
		return 0;
	if (o->type == MSGPACK_OBJECT_ARRAY)
		return o->via.array.size;
	if (o->type == MSGPACK_OBJECT_MAP)
		return o->via.map.size;
	return 0;
}

struct tl_bnode
tl_bn_at(struct tl_bnode arr, size_t i)
{
	const msgpack_object *o = OBJ(arr);
	struct tl_bnode r = { NULL };

	if (o != NULL && o->type == MSGPACK_OBJECT_ARRAY &&
	    i < o->via.array.size)
		r.o = &o->via.array.ptr[i];
	return r;
}

int
tl_bn_entry(struct tl_bnode map, size_t i, struct tl_bnode *key,
    struct tl_bnode *val)
{
	const msgpack_object *o = OBJ(map);

	if (o == NULL || o->type != MSGPACK_OBJECT_MAP ||
	    i >= o->via.map.size)
		return TL_EINVAL;
	key->o = &o->via.map.ptr[i].key;
	val->o = &o->via.map.ptr[i].val;
	return 0;
}

int
tl_bn_getstr(struct tl_bnode map, const char *key, char *buf, size_t cap)
{
	struct tl_bnode n;
	const char *s;
	size_t len;
	int rc;

	if (cap > 0)
		buf[0] = '\0';
	if ((rc = tl_bn_get(map, key, &n)) != 0)
		return rc;
	if ((rc = tl_bn_str(n, &s, &len)) != 0)
		return rc;
	if (len >= cap)
		return TL_ETOOBIG;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
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
