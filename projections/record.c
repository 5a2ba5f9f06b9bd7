/*
 * record.c - the projection tables and their records (record.h).
 */
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/vec.h"
#include "record.h"

int
tl_proj_open(struct tl_txn *t, struct tl_proj *p)
{
	int rc;

	if ((rc = tl_kv_open(t, "graph", &p->graph)) != 0)
		return rc;
	return tl_kv_open(t, "grants", &p->grants);
}

/* Is fmt made of literal text and %s only? */
static int
only_strings(const char *fmt)
{
	for (; *fmt != '\0'; fmt++)
		if (*fmt == '%' && *++fmt != 's')
			return 0;
	return 1;
}

int
tl_key(char *buf, const char *fmt, ...)
{
	va_list ap;
	size_t at = 0, len;
	int n;

	va_start(ap, fmt);
	if (!only_strings(fmt)) {
		n = vsnprintf(buf, TL_KEY_MAX, fmt, ap);
		va_end(ap);
		return n < 0 || n >= TL_KEY_MAX ? TL_ETOOBIG : 0;
	}
	/*
	 * Keys are built for every event folded: concatenating is several
	 * times cheaper than vsnprintf and gives the same bytes.
	 */
	for (; *fmt != '\0'; fmt++) {
		const char *s = fmt;

		if (*fmt == '%') {
			s = va_arg(ap, const char *);
			fmt++;
			if (s == NULL)
				s = "(null)";
			len = strlen(s);
		} else
			len = 1;
		if (at + len >= TL_KEY_MAX) {
			va_end(ap);
			buf[0] = '\0';
			return TL_ETOOBIG;
		}
		memcpy(buf + at, s, len);
		at += len;
	}
	va_end(ap);
	buf[at] = '\0';
	return 0;
}

int
tl_rec_get(struct tl_txn *t, tl_kv kv, const char *key, struct tl_rec *r)
{
	const void *v;
	size_t n;
	int rc;

	memset(r, 0, sizeof(*r));
	if ((rc = tl_kv_get(t, kv, key, strlen(key), &v, &n)) != 0)
		return rc;
	return tl_rec_open(v, n, r);
}

int
tl_rec_open(const void *val, size_t len, struct tl_rec *r)
{
	int rc;

	memset(r, 0, sizeof(*r));
	if (len < 9)
		return TL_ECORRUPT;
	r->seq = tl_get_be64(val);
	r->raw = (const uint8_t *)val + 8;
	r->rawlen = len - 8;
	if ((rc = tl_bview_open(&r->v, r->raw, r->rawlen)) != 0)
		return rc;
	r->m = r->v.root;
	return 0;
}

void
tl_rec_close(struct tl_rec *r)
{
	if (r != NULL)
		tl_bview_close(&r->v);
}

int
tl_rec_exists(struct tl_txn *t, tl_kv kv, const char *key)
{
	const void *v;
	size_t n;

	return tl_kv_get(t, kv, key, strlen(key), &v, &n) == 0;
}

int
tl_rec_put(struct tl_txn *t, tl_kv kv, const char *key, uint64_t seq,
    const void *body, size_t len)
{
	uint8_t stackbuf[1024], *buf = stackbuf;
	int rc;

	if (len + 8 > sizeof(stackbuf) && (buf = malloc(len + 8)) == NULL)
		return ENOMEM;
	tl_put_be64(buf, seq);
	memcpy(buf + 8, body, len);
	rc = tl_kv_put(t, kv, key, strlen(key), buf, len + 8);
	if (buf != stackbuf)
		free(buf);
	return rc;
}

struct scan_arg {
	size_t		 plen;
	tl_rec_each_fn	 fn;
	void		*arg;
};

static int
scan_one(const void *key, size_t klen, const void *val, size_t vlen,
    void *arg)
{
	struct scan_arg *sa = arg;
	char rest[TL_KEY_MAX];

	if (klen - sa->plen >= sizeof(rest))
		return TL_ECORRUPT;
	memcpy(rest, (const char *)key + sa->plen, klen - sa->plen);
	rest[klen - sa->plen] = '\0';
	return sa->fn(rest, val, vlen, sa->arg);
}

int
tl_rec_scan(struct tl_txn *t, tl_kv kv, const char *prefix,
    tl_rec_each_fn fn, void *arg)
{
	struct scan_arg sa = { strlen(prefix), fn, arg };

	return tl_kv_scan(t, kv, prefix, sa.plen, scan_one, &sa);
}

int
tl_rec_getstr(struct tl_bnode map, const char *key, char *buf, size_t cap,
    int *big)
{
	int rc = tl_bn_getstr(map, key, buf, cap);

	if (rc == TL_ETOOBIG)
		*big = 1;
	return rc;
}

static int
key_add(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct tl_rec_keys *ks = arg;

	(void)val;
	(void)vlen;
	if (tl_vec_grow(&ks->v, &ks->cap, ks->n + 1, sizeof(ks->v[0])) != 0)
		return ENOMEM;
	snprintf(ks->v[ks->n++], TL_KEY_MAX, "%s", rest);
	return 0;
}

int
tl_rec_keys(struct tl_txn *t, tl_kv kv, const char *prefix,
    struct tl_rec_keys *ks)
{
	memset(ks, 0, sizeof(*ks));
	return tl_rec_scan(t, kv, prefix, key_add, ks);
}

void
tl_rec_keys_free(struct tl_rec_keys *ks)
{
	free(ks->v);
	memset(ks, 0, sizeof(*ks));
}
