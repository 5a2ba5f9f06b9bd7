/*
 * delivery.c - the plaintext of a sealed delivery (delivery.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delivery.h"
#include "error.h"
#include "secret.h"

static const uint8_t magic[4] = { 0, 'T', 'D', '3' };
static const uint8_t magic4[4] = { 0, 'T', 'D', '4' };

/* --- encoding -------------------------------------------------------- */

static uint8_t *
room(struct tl_dlv_enc *e, size_t n)
{
	if (e->err)
		return NULL;
	if (n > TL_DLV_MAX || e->len + n > TL_DLV_MAX) {
		e->err = TL_ETOOBIG;
		return NULL;
	}
	if (e->len + n > e->cap) {
		size_t cap = e->cap ? e->cap : 512;
		uint8_t *np;

		while (cap < e->len + n)
			cap *= 2;
		/* tl_secret_realloc wipes what it moves away from. */
		if ((np = tl_secret_realloc(e->p, cap)) == NULL) {
			e->err = ENOMEM;
			return NULL;
		}
		e->p = np;
		e->cap = cap;
	}
	e->len += n;
	return e->p + e->len - n;
}

static void
put_be(struct tl_dlv_enc *e, uint64_t v, size_t n)
{
	uint8_t *p = room(e, n);
	size_t i;

	if (p != NULL)
		for (i = 0; i < n; i++)
			p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static void
put_bytes(struct tl_dlv_enc *e, const void *v, size_t n)
{
	uint8_t *p = room(e, n);

	if (p != NULL && n > 0)
		memcpy(p, v, n);
}

/* A u16-framed string with no NUL, at most max bytes. */
static void
put_str16(struct tl_dlv_enc *e, const char *s, size_t n, size_t max)
{
	if (e->err)
		return;
	if (n == 0 || n > max || memchr(s, '\0', n) != NULL) {
		e->err = TL_EINVAL;
		return;
	}
	put_be(e, n, 2);
	put_bytes(e, s, n);
}

/* begin's work on e, whose p and cap are valid (NULL and 0, or a buffer). */
static void
start(struct tl_dlv_enc *e, const char *grant, const char *holder,
    uint64_t version, const uint8_t proof[TL_DLV_PROOF_LEN])
{
	uint8_t *buf = e->p;
	size_t cap = e->cap;

	if (buf != NULL)
		tl_secret_wipe(buf, cap);
	memset(e, 0, sizeof(*e));
	e->p = buf;
	e->cap = cap;
	put_bytes(e, magic, sizeof(magic));
	put_str16(e, grant, strlen(grant), TL_DLV_GRANT_MAX);
	put_str16(e, holder, strlen(holder), TL_DLV_HOLDER_MAX);
	if (version == 0 && !e->err)
		e->err = TL_EINVAL;
	put_be(e, version, 8);
	put_bytes(e, proof, TL_DLV_PROOF_LEN);
	e->count_at = e->len;
	put_be(e, 0, 4);
}

void
tl_dlv_enc_begin(struct tl_dlv_enc *e, const char *grant, const char *holder,
    uint64_t version, const uint8_t proof[TL_DLV_PROOF_LEN])
{
	memset(e, 0, sizeof(*e));
	start(e, grant, holder, version, proof);
}

void
tl_dlv_enc_restart(struct tl_dlv_enc *e, const char *grant,
    const char *holder, uint64_t version,
    const uint8_t proof[TL_DLV_PROOF_LEN])
{
	start(e, grant, holder, version, proof);
}

void
tl_dlv_enc_var(struct tl_dlv_enc *e, int is_default, const char *name,
    size_t name_len, const void *value, size_t value_len)
{
	if (e->err)
		return;
	if (e->count == UINT32_MAX || value_len > UINT32_MAX) {
		e->err = TL_ETOOBIG;
		return;
	}
	put_be(e, is_default ? 'd' : 'v', 1);
	put_str16(e, name, name_len, TL_DLV_NAME_MAX);
	put_be(e, value_len, 4);
	put_bytes(e, value, value_len);
	e->count++;
}

void
tl_dlv_enc_file(struct tl_dlv_enc *e, const char *name, const void *content,
    size_t len)
{
	size_t nl = strlen(name);

	if (e->err)
		return;
	if (!tl_dlv_file_name_ok(name, nl)) {
		e->err = TL_EINVAL;
		return;
	}
	if (e->count == UINT32_MAX || len > TL_DLV_FILE_MAX ||
	    e->files == TL_DLV_FILES_MAX) {
		e->err = TL_ETOOBIG;
		return;
	}
	put_be(e, 'f', 1);
	put_str16(e, name, nl, TL_DLV_FILE_NAME_MAX);
	put_be(e, len, 4);
	put_bytes(e, content, len);
	e->count++;
	e->files++;
}

void
tl_dlv_enc_refs(struct tl_dlv_enc *e, const char *name, size_t name_len,
    const void *value, size_t value_len, const struct tl_dlv_ref *refs,
    size_t nrefs)
{
	size_t i;

	if (e->err)
		return;
	if (e->count == UINT32_MAX || value_len > UINT32_MAX ||
	    nrefs > TL_DLV_REFS_MAX) {
		e->err = TL_ETOOBIG;
		return;
	}
	if (nrefs == 0) {
		e->err = TL_EINVAL;
		return;
	}
	for (i = 0; i < nrefs; i++)
		if (refs[i].offset > value_len || (i > 0 &&
		    refs[i].offset < refs[i - 1].offset) ||
		    !tl_dlv_file_name_ok(refs[i].file, refs[i].file_len)) {
			e->err = TL_EINVAL;
			return;
		}
	put_be(e, 'r', 1);
	put_str16(e, name, name_len, TL_DLV_NAME_MAX);
	put_be(e, value_len, 4);
	put_bytes(e, value, value_len);
	put_be(e, nrefs, 2);
	for (i = 0; i < nrefs; i++) {
		put_be(e, refs[i].offset, 4);
		put_str16(e, refs[i].file, refs[i].file_len,
		    TL_DLV_FILE_NAME_MAX);
	}
	e->count++;
	e->refs = 1;
}

void
tl_dlv_enc_not_after(struct tl_dlv_enc *e, const char *name,
    size_t name_len)
{
	if (e->err)
		return;
	if (e->count == UINT32_MAX) {
		e->err = TL_ETOOBIG;
		return;
	}
	put_be(e, 'n', 1);
	put_str16(e, name, name_len, TL_DLV_NAME_MAX);
	put_be(e, 0, 4);
	e->count++;
	e->refs = 1;	/* format 4; finish checks a 'k' item is there */
}

/* A certificate's common name: 1..TL_DLV_CN_MAX bytes, no control. */
static int
cn_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > TL_DLV_CN_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 0;
	return 1;
}

/* A subject alternative name: a host name or an address. */
static int
san_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > TL_DLV_SAN_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789.:*-", s[i]) == NULL || s[i] == '\0')
			return 0;
	return 1;
}

void
tl_dlv_enc_keyreq(struct tl_dlv_enc *e, const char *key_file,
    const char *cert_file, const char *cn, const char *const *sans,
    size_t nsans)
{
	size_t kl = strlen(key_file), cl = strlen(cert_file), i;

	if (e->err)
		return;
	if (!tl_dlv_file_name_ok(key_file, kl) ||
	    !tl_dlv_file_name_ok(cert_file, cl) || (kl == cl &&
	    memcmp(key_file, cert_file, kl) == 0) || !cn_ok(cn, strlen(cn))) {
		e->err = TL_EINVAL;
		return;
	}
	if (nsans > TL_DLV_SANS_MAX || e->count == UINT32_MAX ||
	    e->files + 2 > TL_DLV_FILES_MAX) {
		e->err = TL_ETOOBIG;
		return;
	}
	for (i = 0; i < nsans; i++)
		if (!san_ok(sans[i], strlen(sans[i]))) {
			e->err = TL_EINVAL;
			return;
		}
	put_be(e, 'k', 1);
	put_str16(e, key_file, kl, TL_DLV_FILE_NAME_MAX);
	put_str16(e, cert_file, cl, TL_DLV_FILE_NAME_MAX);
	put_str16(e, cn, strlen(cn), TL_DLV_CN_MAX);
	put_be(e, nsans, 1);
	for (i = 0; i < nsans; i++)
		put_str16(e, sans[i], strlen(sans[i]), TL_DLV_SAN_MAX);
	e->count++;
	e->files += 2;	/* format 4; they count as the delivery's files */
}

/* The next occurrence of t (tl bytes) in p[0..n), or NULL. */
static const uint8_t *
find(const uint8_t *p, size_t n, const char *t, size_t tl)
{
	size_t i;

	for (i = 0; tl <= n && i <= n - tl; i++)
		if (p[i] == (uint8_t)t[0] && memcmp(p + i, t, tl) == 0)
			return p + i;
	return NULL;
}

/* The earliest occurrence in [q, end) of any of the n tokens. */
static const uint8_t *
first_of(const uint8_t *q, const uint8_t *end, const char *const *tokens,
    size_t n, size_t *which)
{
	const uint8_t *best = NULL, *at;
	size_t i;

	for (i = 0; i < n; i++)
		if ((at = find(q, (size_t)(end - q), tokens[i],
		    strlen(tokens[i]))) != NULL && (best == NULL || at < best)) {
			best = at;
			*which = i;
		}
	return best;
}

void
tl_dlv_enc_subst_n(struct tl_dlv_enc *e, const char *name, size_t name_len,
    const void *value, size_t value_len, const char *const *tokens,
    const char *const *files, size_t nt)
{
	const uint8_t *v = value, *q, *at, *end = v + value_len;
	size_t n = 0, gone = 0, off, i, w = 0;

	if (e->err)
		return;
	for (i = 0; i < nt; i++)
		if (tokens[i][0] == '\0' ||
		    !tl_dlv_file_name_ok(files[i], strlen(files[i]))) {
			e->err = TL_EINVAL;
			return;
		}
	for (q = v; (at = first_of(q, end, tokens, nt, &w)) != NULL;
	    q = at + strlen(tokens[w])) {
		n++;
		gone += strlen(tokens[w]);
	}
	if (n == 0) {
		tl_dlv_enc_var(e, 0, name, name_len, value, value_len);
		return;
	}
	if (e->count == UINT32_MAX || value_len > UINT32_MAX ||
	    n > TL_DLV_REFS_MAX) {
		e->err = TL_ETOOBIG;
		return;
	}
	put_be(e, 'r', 1);
	put_str16(e, name, name_len, TL_DLV_NAME_MAX);
	put_be(e, value_len - gone, 4);
	/* The value without the tokens' bytes... */
	for (q = v; q < end; ) {
		if ((at = first_of(q, end, tokens, nt, &w)) == NULL) {
			put_bytes(e, q, (size_t)(end - q));
			break;
		}
		put_bytes(e, q, (size_t)(at - q));
		q = at + strlen(tokens[w]);
	}
	/* ...and where each stood, in the value without them. */
	put_be(e, n, 2);
	for (q = v, off = 0; (at = first_of(q, end, tokens, nt, &w)) != NULL;
	    q = at + strlen(tokens[w]), off += strlen(tokens[w])) {
		put_be(e, (size_t)(at - v) - off, 4);
		put_str16(e, files[w], strlen(files[w]),
		    TL_DLV_FILE_NAME_MAX);
	}
	e->count++;
	e->refs = 1;
}

void
tl_dlv_enc_subst(struct tl_dlv_enc *e, const char *name, size_t name_len,
    const void *value, size_t value_len, const char *token, const char *file)
{
	tl_dlv_enc_subst_n(e, name, name_len, value, value_len, &token, &file,
	    1);
}

int
tl_dlv_enc_finish(struct tl_dlv_enc *e, const uint8_t **p, size_t *len)
{
	struct tl_dlv d;
	size_t i;

	if (e->err)
		return e->err;
	if (e->p == NULL)
		return TL_EINVAL;	/* never begun */
	for (i = 0; i < 4; i++)
		e->p[e->count_at + i] = (uint8_t)(e->count >> (8 * (3 - i)));
	if (e->files > 0 || e->refs) {
		/*
		 * Format 4; what the decoder alone sees whole (a reference
		 * to a file never encoded, two files of one name) is
		 * checked by reading it back.
		 */
		memcpy(e->p, magic4, sizeof(magic4));
		if ((e->err = tl_dlv_decode(e->p, e->len, &d)) != 0) {
			if (e->err == TL_EMALFORMED)
				e->err = TL_EINVAL;
			return e->err;
		}
		tl_dlv_free(&d);
	}
	*p = e->p;
	*len = e->len;
	return 0;
}

void
tl_dlv_enc_free(struct tl_dlv_enc *e)
{
	if (e == NULL)
		return;
	tl_secret_free(e->p);
	memset(e, 0, sizeof(*e));
}

/* --- decoding -------------------------------------------------------- */

struct rd {
	const uint8_t	*p, *end;
};

static int
get_be(struct rd *r, size_t n, uint64_t *v)
{
	size_t i;

	if ((size_t)(r->end - r->p) < n)
		return TL_EMALFORMED;
	*v = 0;
	for (i = 0; i < n; i++)
		*v = (*v << 8) | r->p[i];
	r->p += n;
	return 0;
}

static int
get_bytes(struct rd *r, size_t n, const uint8_t **v)
{
	if ((size_t)(r->end - r->p) < n)
		return TL_EMALFORMED;
	*v = r->p;
	r->p += n;
	return 0;
}

/* A u16-framed string: 1..max bytes, no NUL. */
static int
get_str16(struct rd *r, size_t max, const uint8_t **s, size_t *n)
{
	uint64_t l;

	if (get_be(r, 2, &l) != 0 || l == 0 || l > max ||
	    get_bytes(r, (size_t)l, s) != 0 || memchr(*s, '\0', (size_t)l))
		return TL_EMALFORMED;
	*n = (size_t)l;
	return 0;
}

/* Is the file f (n bytes) one of d's (a 'k' item's two included)? */
static int
has_file(const struct tl_dlv *d, const char *f, size_t n)
{
	const struct tl_dlv_keyreq *k = &d->keyreq;
	size_t i;

	for (i = 0; i < d->nfiles; i++)
		if (d->files[i].name_len == n && memcmp(d->files[i].name, f,
		    n) == 0)
			return 1;
	return d->has_keyreq && ((k->key_file_len == n &&
	    memcmp(k->key_file, f, n) == 0) || (k->cert_file_len == n &&
	    memcmp(k->cert_file, f, n) == 0));
}

/* A 'k' item, after its kind byte, into d->keyreq. */
static int
get_keyreq(struct rd *r, struct tl_dlv *d)
{
	struct tl_dlv_keyreq *k = &d->keyreq;
	const uint8_t *s;
	uint64_t ns;
	size_t n, i;

	if (d->has_keyreq ||
	    get_str16(r, TL_DLV_FILE_NAME_MAX, &s, &n) != 0 ||
	    !tl_dlv_file_name_ok((const char *)s, n) ||
	    has_file(d, (const char *)s, n))
		return TL_EMALFORMED;
	k->key_file = (const char *)s;
	k->key_file_len = n;
	if (get_str16(r, TL_DLV_FILE_NAME_MAX, &s, &n) != 0 ||
	    !tl_dlv_file_name_ok((const char *)s, n) ||
	    has_file(d, (const char *)s, n) || (n == k->key_file_len &&
	    memcmp(s, k->key_file, n) == 0))
		return TL_EMALFORMED;
	k->cert_file = (const char *)s;
	k->cert_file_len = n;
	if (get_str16(r, TL_DLV_CN_MAX, &s, &n) != 0 ||
	    !cn_ok((const char *)s, n))
		return TL_EMALFORMED;
	k->cn = (const char *)s;
	k->cn_len = n;
	if (get_be(r, 1, &ns) != 0 || ns > TL_DLV_SANS_MAX)
		return TL_EMALFORMED;
	for (i = 0; i < ns; i++) {
		if (get_str16(r, TL_DLV_SAN_MAX, &s, &n) != 0 ||
		    !san_ok((const char *)s, n))
			return TL_EMALFORMED;
		k->sans[i] = (const char *)s;
		k->san_len[i] = n;
	}
	k->nsans = (size_t)ns;
	d->has_keyreq = 1;
	return 0;
}

/* An 'r' item's references, after its value, into d->refs. */
static int
get_refs(struct rd *r, struct tl_dlv *d, size_t value_len, size_t *cap)
{
	const uint8_t *s;
	uint64_t nrefs, off, prev = 0;
	size_t i, n;

	if (get_be(r, 2, &nrefs) != 0 || nrefs == 0 ||
	    nrefs > (uint64_t)(r->end - r->p) / 11)	/* 11: u32 u16 "a.pem" */
		return TL_EMALFORMED;
	if (d->nrefs + nrefs > *cap) {
		size_t nc = *cap ? *cap : 8;
		void *nv;

		while (nc < d->nrefs + nrefs)
			nc *= 2;
		if ((nv = realloc(d->refs, nc * sizeof(*d->refs))) == NULL)
			return ENOMEM;
		d->refs = nv;
		*cap = nc;
	}
	for (i = 0; i < nrefs; i++) {
		struct tl_dlv_ref *x = &d->refs[d->nrefs];

		if (get_be(r, 4, &off) != 0 || off > value_len || off < prev ||
		    get_str16(r, TL_DLV_FILE_NAME_MAX, &s, &n) != 0 ||
		    !tl_dlv_file_name_ok((const char *)s, n))
			return TL_EMALFORMED;
		prev = off;
		x->offset = (size_t)off;
		x->file = (const char *)s;
		x->file_len = n;
		d->nrefs++;
	}
	return 0;
}

static int
decode3(const uint8_t *p, size_t len, struct tl_dlv *d)
{
	struct rd r = { p + sizeof(magic), p + len };
	const uint8_t *s;
	size_t n, i, refcap = 0, *first = NULL;
	uint64_t v, count;
	int rc = TL_EMALFORMED, not_after = 0;

	if (get_str16(&r, TL_DLV_GRANT_MAX, &s, &n) != 0)
		return TL_EMALFORMED;
	memcpy(d->grant, s, n);
	if (get_str16(&r, TL_DLV_HOLDER_MAX, &s, &n) != 0)
		return TL_EMALFORMED;
	memcpy(d->holder, s, n);
	if (get_be(&r, 8, &d->version) != 0 || d->version == 0 ||
	    get_bytes(&r, TL_DLV_PROOF_LEN, &s) != 0)
		return TL_EMALFORMED;
	memcpy(d->proof, s, TL_DLV_PROOF_LEN);
	if (get_be(&r, 4, &count) != 0)
		return TL_EMALFORMED;
	/* Each item takes 8 bytes at least: a count beyond is a lie. */
	if (count > (uint64_t)(r.end - r.p) / 8)
		return TL_EMALFORMED;
	if (count > 0 && (d->vars = calloc((size_t)count,
	    sizeof(*d->vars))) == NULL)
		return ENOMEM;
	if (d->format == 4 && count > 0 && ((d->files = calloc(
	    TL_DLV_FILES_MAX, sizeof(*d->files))) == NULL ||
	    (first = calloc((size_t)count, sizeof(*first))) == NULL)) {
		rc = ENOMEM;
		goto out;
	}
	for (i = 0; i < count; i++) {
		struct tl_dlv_var *x = &d->vars[d->nvars];
		uint64_t kind;

		if (get_be(&r, 1, &kind) != 0)
			goto out;
		if (kind == 'f' && d->format == 4) {
			struct tl_dlv_file *f = &d->files[d->nfiles];

			if (d->nfiles == TL_DLV_FILES_MAX ||
			    get_str16(&r, TL_DLV_FILE_NAME_MAX, &s, &n) != 0 ||
			    !tl_dlv_file_name_ok((const char *)s, n) ||
			    has_file(d, (const char *)s, n) ||
			    get_be(&r, 4, &v) != 0 || v > TL_DLV_FILE_MAX ||
			    get_bytes(&r, (size_t)v, &f->content) != 0)
				goto out;
			f->name = (const char *)s;
			f->name_len = n;
			f->content_len = (size_t)v;
			d->nfiles++;
			continue;
		}
		if (kind == 'k' && d->format == 4) {
			if (get_keyreq(&r, d) != 0)
				goto out;
			continue;
		}
		if ((kind != 'd' && kind != 'v' && ((kind != 'r' &&
		    kind != 'n') || d->format != 4)) ||
		    get_str16(&r, TL_DLV_NAME_MAX, &s, &x->name_len) != 0)
			goto out;
		x->name = (const char *)s;
		x->kind = (int)kind;
		x->is_default = kind == 'd';
		if (get_be(&r, 4, &v) != 0 || get_bytes(&r, (size_t)v,
		    &x->value) != 0)
			goto out;
		x->value_len = (size_t)v;
		if (kind == 'n') {
			if (v != 0)
				goto out;
			not_after = 1;
		}
		if (kind == 'r') {
			first[d->nvars] = d->nrefs;
			if ((rc = get_refs(&r, d, x->value_len, &refcap)) != 0)
				goto out;
			x->nrefs = d->nrefs - first[d->nvars];
			rc = TL_EMALFORMED;
		}
		d->nvars++;
	}
	if (r.p != r.end)
		goto out;	/* overlong */
	/* A not-after is the certificate's the 'k' item asks for. */
	if (not_after && !d->has_keyreq)
		goto out;
	/* Every reference names a file of this delivery. */
	for (i = 0; i < d->nrefs; i++)
		if (!has_file(d, d->refs[i].file, d->refs[i].file_len))
			goto out;
	/* The refs array has stopped moving: point the vars into it. */
	for (i = 0; i < d->nvars; i++)
		if (d->vars[i].kind == 'r')
			d->vars[i].refs = d->refs + first[i];
	rc = 0;
out:
	free(first);
	return rc;
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "KEY=VALUE" bytes from p to end (no '\n') into x. */
static int
line_var(const char *p, const char *end, int is_default,
    struct tl_dlv_var *x)
{
	const char *eq = memchr(p, '=', (size_t)(end - p));

	if (eq == NULL || eq == p || (size_t)(eq - p) > TL_DLV_NAME_MAX ||
	    memchr(p, '\0', (size_t)(eq - p)) != NULL)
		return TL_EMALFORMED;
	x->name = p;
	x->name_len = (size_t)(eq - p);
	x->value = (const uint8_t *)eq + 1;
	x->value_len = (size_t)(end - eq - 1);
	x->is_default = is_default;
	x->kind = is_default ? 'd' : 'v';
	return 0;
}

/* A field "KEY=VALUE" of the header line, up to the next space or end. */
static int
hdr_field(const char **p, const char *end, const char *key, char *out,
    size_t cap)
{
	size_t kl = strlen(key), n;
	const char *v, *sp;

	if ((size_t)(end - *p) < kl || memcmp(*p, key, kl) != 0)
		return TL_EMALFORMED;
	v = *p + kl;
	if ((sp = memchr(v, ' ', (size_t)(end - v))) == NULL)
		sp = end;
	n = (size_t)(sp - v);
	if (n == 0 || n >= cap || memchr(v, '\0', n) != NULL)
		return TL_EMALFORMED;
	memcpy(out, v, n);
	out[n] = '\0';
	*p = sp < end ? sp + 1 : sp;
	return 0;
}

static int
decode2(const char *p, size_t len, struct tl_dlv *d)
{
	const char *end = p + len, *nl, *q;
	char vbuf[24], *ve;
	size_t nlines = 0, i;
	unsigned long long v;
	int rc;

	/* Line 1: the header, and nothing else on it. */
	if ((nl = memchr(p, '\n', len)) == NULL || (size_t)(nl - p) < 7 ||
	    memcmp(p, "#tally ", 7) != 0)
		return TL_EMALFORMED;
	q = p + 7;
	if (hdr_field(&q, nl, "grant=", d->grant, sizeof(d->grant)) != 0 ||
	    hdr_field(&q, nl, "holder=", d->holder, sizeof(d->holder)) != 0 ||
	    hdr_field(&q, nl, "version=", vbuf, sizeof(vbuf)) != 0 || q != nl)
		return TL_EMALFORMED;
	if (vbuf[0] < '1' || vbuf[0] > '9')
		return TL_EMALFORMED;
	errno = 0;
	v = strtoull(vbuf, &ve, 10);
	if (*ve != '\0' || errno != 0)
		return TL_EMALFORMED;
	d->version = v;
	/* Line 2: the proof. */
	p = nl + 1;
	if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL ||
	    (size_t)(nl - p) != 7 + 2 * TL_DLV_PROOF_LEN ||
	    memcmp(p, "#proof ", 7) != 0)
		return TL_EMALFORMED;
	for (i = 0; i < TL_DLV_PROOF_LEN; i++) {
		int hi = hexval(p[7 + 2 * i]), lo = hexval(p[8 + 2 * i]);

		if (hi < 0 || lo < 0)
			return TL_EMALFORMED;
		d->proof[i] = (uint8_t)(hi << 4 | lo);
	}
	p = nl + 1;
	if (p < end && end[-1] != '\n')
		return TL_EMALFORMED;	/* truncated: a last line unended */
	for (q = p; q < end; q++)
		if (*q == '\n')
			nlines++;
	if (nlines > 0 && (d->vars = calloc(nlines, sizeof(*d->vars))) == NULL)
		return ENOMEM;
	for (; p < end; p = nl + 1) {
		struct tl_dlv_var *x = &d->vars[d->nvars];

		nl = memchr(p, '\n', (size_t)(end - p));
		if ((size_t)(nl - p) >= 9 && memcmp(p, "#default ", 9) == 0)
			rc = line_var(p + 9, nl, 1, x);
		else if (*p == '#')
			rc = TL_EMALFORMED;	/* a header out of place */
		else
			rc = line_var(p, nl, 0, x);
		if (rc != 0)
			return rc;
		d->nvars++;
	}
	return 0;
}

int
tl_dlv_decode(const void *plain, size_t len, struct tl_dlv *d)
{
	const uint8_t *p = plain;
	int rc;

	memset(d, 0, sizeof(*d));
	if (len > TL_DLV_MAX)
		rc = TL_EMALFORMED;
	else if (len >= sizeof(magic) && memcmp(p, magic, sizeof(magic)) == 0) {
		d->format = 3;
		rc = decode3(p, len, d);
	} else if (len >= sizeof(magic4) &&
	    memcmp(p, magic4, sizeof(magic4)) == 0) {
		d->format = 4;
		rc = decode3(p, len, d);
	} else if (len > 0 && p[0] == '#') {
		d->format = 2;
		rc = decode2(plain, len, d);
	} else
		rc = TL_EMALFORMED;
	if (rc != 0)
		tl_dlv_free(d);
	return rc;
}

void
tl_dlv_free(struct tl_dlv *d)
{
	if (d == NULL)
		return;
	free(d->vars);
	free(d->files);
	free(d->refs);
	tl_secret_wipe(d, sizeof(*d));
}

/* --- references and paths ------------------------------------------- */

size_t
tl_dlv_resolved_len(const struct tl_dlv_var *x, size_t dir_len)
{
	size_t n = x->value_len, i;

	for (i = 0; i < x->nrefs; i++)
		n += dir_len + 1 + x->refs[i].file_len;
	return n;
}

void
tl_dlv_resolve(const struct tl_dlv_var *x, const char *dir, size_t dir_len,
    void *out)
{
	uint8_t *o = out;
	size_t at = 0, i;

	for (i = 0; i < x->nrefs; i++) {
		const struct tl_dlv_ref *r = &x->refs[i];

		memcpy(o, x->value + at, r->offset - at);
		o += r->offset - at;
		at = r->offset;
		memcpy(o, dir, dir_len);
		o += dir_len;
		*o++ = '/';
		memcpy(o, r->file, r->file_len);
		o += r->file_len;
	}
	if (x->value_len > at)
		memcpy(o, x->value + at, x->value_len - at);
}

int
tl_dlv_path_ok(const char *path, size_t len)
{
	size_t i;

	if (len == 0)
		return 0;
	for (i = 0; i < len; i++) {
		char c = path[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '/' || c == '.' ||
		    c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int
tl_dlv_file_name_ok(const char *name, size_t len)
{
	size_t i;

	if (len < 5 || len > TL_DLV_FILE_NAME_MAX ||
	    memcmp(name + len - 4, ".pem", 4) != 0 || name[0] == '-')
		return 0;
	for (i = 0; i < len - 4; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-'))
			return 0;
	}
	return 1;
}

/* --- env files ------------------------------------------------------- */

/*
 * The length of the UTF-8 sequence at p (at most n bytes) when it is a
 * scalar value that systemd takes (no surrogate, noncharacter, U+FEFF,
 * overlong form); 0 otherwise.
 */
static size_t
utf8_ok(const uint8_t *p, size_t n)
{
	uint32_t c;
	size_t l, i;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		l = 2, c = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		l = 3, c = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		l = 4, c = p[0] & 0x07;
	else
		return 0;
	if (l > n)
		return 0;
	for (i = 1; i < l; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if ((l == 3 && c < 0x800) || (l == 4 && (c < 0x10000 || c > 0x10ffff)))
		return 0;	/* overlong, or beyond Unicode */
	if ((c >= 0xd800 && c <= 0xdfff) || c == 0xfeff ||
	    (c >= 0xfdd0 && c <= 0xfdef) || (c & 0xfffe) == 0xfffe)
		return 0;
	return l;
}

int
tl_dlv_env_check(const char *name, size_t name_len, const void *value,
    size_t value_len, const char **why)
{
	const uint8_t *v = value;
	size_t i, l;

	if (name_len == 0 || name_len > TL_DLV_NAME_MAX ||
	    !((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' &&
	    name[0] <= 'z') || name[0] == '_')) {
		*why = "the variable's name is not [A-Za-z_][A-Za-z0-9_]*";
		return TL_EINVAL;
	}
	for (i = 1; i < name_len; i++) {
		char c = name[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '_')) {
			*why = "the variable's name is not "
			    "[A-Za-z_][A-Za-z0-9_]*";
			return TL_EINVAL;
		}
	}
	for (i = 0; i < value_len; i += l) {
		if (v[i] == '\0') {
			*why = "the value has a NUL byte";
			return TL_EINVAL;
		}
		if (v[i] == '\n' || v[i] == '\r') {
			*why = "the value has a line break";
			return TL_EINVAL;
		}
		if ((v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f) {
			*why = "the value has a control character";
			return TL_EINVAL;
		}
		if ((l = utf8_ok(v + i, value_len - i)) == 0) {
			*why = "the value is not UTF-8 that systemd reads "
			    "(invalid, a noncharacter or U+FEFF)";
			return TL_EINVAL;
		}
	}
	return 0;
}

size_t
tl_dlv_env_size(size_t name_len, size_t value_len)
{
	/* NAME=, two quotes, each byte escaped at worst, '\n', NUL. */
	return name_len + 1 + 2 + 2 * value_len + 1 + 1;
}

static int
plain_byte(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || (c != 0 && strchr("!#%&()*+,-./:;<=>?@"
	    "[]^_{|}~", c) != NULL);
}

size_t
tl_dlv_env_format(const char *name, size_t name_len, const void *value,
    size_t value_len, char *out)
{
	const uint8_t *v = value;
	size_t i, o = 0;
	int quote = 0;

	for (i = 0; i < value_len; i++)
		if (!plain_byte(v[i]))
			quote = 1;
	memcpy(out, name, name_len);
	o = name_len;
	out[o++] = '=';
	if (quote)
		out[o++] = '"';
	for (i = 0; i < value_len; i++) {
		if (quote && (v[i] == '\\' || v[i] == '"' || v[i] == '`' ||
		    v[i] == '$'))
			out[o++] = '\\';
		out[o++] = (char)v[i];
	}
	if (quote)
		out[o++] = '"';
	out[o++] = '\n';
	out[o] = '\0';
	return o;
}
