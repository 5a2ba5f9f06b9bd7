/*
 * manifest_util.c - the manifest loader's support: memory (one list of
 * blocks freed together), the text of messages (quoting, field paths,
 * lists) and the error records every message goes through.
 */
#define _POSIX_C_SOURCE 200809L

#include "manifest.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "core/error.h"
#include "core/vec.h"
#include "drivers/decl.h"
#include "manifest-internal.h"

/* ---- memory ---- */

void *
mf_blk_alloc(struct blk **list, size_t size)
{
	struct blk *b;

	if (size > SIZE_MAX - sizeof *b)
		return NULL;
	b = malloc(sizeof *b + size);
	if (b == NULL)
		return NULL;
	b->next = *list;
	*list = b;
	return b->data;
}

void
mf_blk_free(struct blk **list)
{
	struct blk *b;

	while ((b = *list) != NULL) {
		*list = b->next;
		free(b);
	}
}

/* n zeroed elements in the set's memory; NULL (with c->sys) on failure. */
void *
mf_alloc_n(struct ctx *c, size_t n, size_t size)
{
	void *p;

	if (n != 0 && size > SIZE_MAX / n) {
		c->sys = ENOMEM;
		return NULL;
	}
	p = mf_blk_alloc(&c->set->mem, n * size);
	if (p == NULL) {
		c->sys = ENOMEM;
		return NULL;
	}
	memset(p, 0, n * size);
	return p;
}

char *
mf_sdup(struct ctx *c, const char *s)
{
	size_t len = strlen(s);
	char *p = mf_alloc_n(c, len + 1, 1);

	if (p != NULL)
		memcpy(p, s, len + 1);
	return p;
}

/* ---- text for messages ---- */

/*
 * Append len bytes of s to dst, escaping control characters so that a
 * hostile manifest cannot drive the terminal that shows the error.
 * Returns 0 if it had to stop short; never cuts a UTF-8 sequence.
 */
int
mf_put(char *dst, size_t size, size_t *pos, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, mark;

	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		int ctl = ch < 0x20 || ch == 0x7f;

		if (*pos + (ctl ? 4 : 1) >= size)
			break;
		if (!ctl) {
			dst[(*pos)++] = (char)ch;
			continue;
		}
		dst[(*pos)++] = '\\';
		dst[(*pos)++] = 'x';
		dst[(*pos)++] = hex[ch >> 4];
		dst[(*pos)++] = hex[ch & 15];
	}
	if (i < len) {
		/* back off to the start of a UTF-8 sequence that did not fit */
		mark = *pos;
		while (mark > 0 && ((unsigned char)dst[mark - 1] & 0xc0) == 0x80)
			mark--;
		if (mark > 0 && (unsigned char)dst[mark - 1] >= 0xc0) {
			unsigned char lead = (unsigned char)dst[mark - 1];
			size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;

			if (*pos - (mark - 1) < want)
				*pos = mark - 1;
		}
	}
	dst[*pos] = '\0';
	return i == len;
}

/* A value from the input, quoted and shortened for a message. */
const char *
mf_quote(char *buf, size_t size, const char *s)
{
	size_t pos = 0;

	buf[pos++] = '\'';
	if (!mf_put(buf, size - 5, &pos, s, strlen(s)))
		mf_put(buf, size - 1, &pos, "...", 3);
	mf_put(buf, size, &pos, "'", 1);
	return buf;
}

/* base.key as a field path. */
void
mf_join(char *dst, size_t size, const char *base, const char *key)
{
	size_t pos = 0;

	dst[0] = '\0';
	mf_put(dst, size, &pos, base, strlen(base));
	if (base[0] != '\0')
		mf_put(dst, size, &pos, ".", 1);
	mf_put(dst, size, &pos, key, strlen(key));
}

const char *
mf_join_list(char *buf, size_t size, const char *const *list)
{
	size_t pos = 0;

	buf[0] = '\0';
	for (; list != NULL && *list != NULL; list++) {
		if (pos > 0)
			mf_put(buf, size, &pos, ", ", 2);
		if (!mf_put(buf, size, &pos, *list, strlen(*list)))
			break;
	}
	return buf;
}

int
mf_in_list(const char *const *list, const char *s)
{
	for (; list != NULL && *list != NULL; list++)
		if (strcmp(*list, s) == 0)
			return 1;
	return 0;
}

const char *
mf_kind_name(const struct node *n)
{
	switch (n->kind) {
	case N_MAP:
		return "a mapping";
	case N_SEQ:
		return "a list";
	case N_SCALAR:
		return n->null ? "nothing" : "a string";
	default:
		return "an invalid value";
	}
}

/* ---- errors ---- */

int
mf_clamp_line(size_t v)
{
	return v >= INT_MAX ? INT_MAX : (int)v + 1;
}

static void PRINTFLIKE(5, 0)
verr(struct ctx *c, int line, int col, const char *field, const char *fmt,
    va_list ap)
{
	struct tl_mf_errors *errs = c->errs;
	struct tl_mf_error *e;
	size_t pos = 0;

	c->nerr++;
	if (errs == NULL)
		return;
	if (c->kept >= TL_MF_ERRORS_MAX) {
		errs->dropped++;
		return;
	}
	if (tl_vec_grow(&errs->v, &errs->cap, errs->n + 1,
	    sizeof *errs->v) != 0) {
		c->sys = ENOMEM;
		return;
	}
	e = &errs->v[errs->n++];
	c->kept++;
	e->file[0] = '\0';
	mf_put(e->file, sizeof e->file, &pos, c->name, strlen(c->name));
	e->line = line;
	e->col = col;
	/* field paths are escaped where they are built */
	snprintf(e->field, sizeof e->field, "%s", field);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
}

void PRINTFLIKE(5, 6)
mf_err_at(struct ctx *c, int line, int col, const char *field, const char *fmt,
    ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(c, line, col, field, fmt, ap);
	va_end(ap);
}

void PRINTFLIKE(4, 5)
mf_err(struct ctx *c, const struct node *n, const char *field, const char *fmt,
    ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(c, n->line, n->col, field, fmt, ap);
	va_end(ap);
}

const char *
tl_mf_instances_name(enum tl_mf_instances instances)
{
	switch (instances) {
	case TL_MF_ANY:
		return "any";
	case TL_MF_ONE_PER_MESH:
		return "one-per-mesh";
	case TL_MF_ONE_PER_NODE:
		return "one-per-node";
	}
	return "unknown";
}
