/*
 * manifest_load.c - the YAML walk: libyaml's events to the tree of
 * nodes the validators read, one tree per document, each handed to
 * mf_parse_module (manifest_parse.c).  Aliases, NUL bytes and too deep
 * a nesting are refused here, where they appear.
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
#include "drivers/decl.h"
#include "manifest-internal.h"

/* ---- loading: libyaml events to our tree ---- */

static int
is_null(const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;

	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
	    ev->data.scalar.tag != NULL)
		return 0;
	return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
	    strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

/*
 * Attach a new node under the innermost open collection, writing the
 * field path it will be reported under to path.
 */
static struct node *
attach(struct ctx *c, struct frame *st, size_t depth, struct node **root,
    enum nkind kind, const yaml_mark_t *mark, size_t extra, char *path)
{
	struct node *n, *p;
	size_t pos = 0;

	path[0] = '\0';
	if (depth > 0) {
		p = st[depth - 1].n;
		if (p->kind == N_MAP && p->n % 2 == 1 &&
		    p->last->kind == N_SCALAR)
			mf_join(path, FIELD, st[depth - 1].path, p->last->s);
		else if (p->kind == N_SEQ) {
			char idx[32];

			snprintf(idx, sizeof idx, "[%zu]", p->n);
			mf_put(path, FIELD, &pos, st[depth - 1].path,
			    strlen(st[depth - 1].path));
			mf_put(path, FIELD, &pos, idx, strlen(idx));
		} else
			mf_put(path, FIELD, &pos, st[depth - 1].path,
			    strlen(st[depth - 1].path));
	}
	n = mf_blk_alloc(&c->tree, sizeof *n + extra);
	if (n == NULL) {
		c->sys = ENOMEM;
		return NULL;
	}
	memset(n, 0, sizeof *n);
	n->kind = kind;
	n->line = mf_clamp_line(mark->line);
	n->col = mf_clamp_line(mark->column);
	if (depth == 0) {
		*root = n;
		return n;
	}
	p = st[depth - 1].n;
	if (p->last != NULL)
		p->last->next = n;
	else
		p->first = n;
	p->last = n;
	p->n++;
	return n;
}

static void
offset_pos(const unsigned char *buf, size_t len, size_t off, int *line,
    int *col)
{
	size_t i, l = 0, bol = 0;

	if (off > len)
		off = len;
	for (i = 0; i < off; i++)
		if (buf[i] == '\n') {
			l++;
			bol = i + 1;
		}
	*line = mf_clamp_line(l);
	*col = mf_clamp_line(off - bol);
}

/*
 * libyaml meets a tab where a token or the indentation should be and
 * says "found character that cannot start any token": a first user's
 * editor put it there.  1 when that is what p's error is.
 */
static int
tab_in_indent(const yaml_parser_t *p, const unsigned char *buf, size_t len)
{
	size_t at = p->problem_mark.index, i;

	if (p->problem == NULL || strstr(p->problem,
	    "cannot start any token") == NULL || at >= len || buf[at] != '\t')
		return 0;
	/* Only blanks before it on its line: indentation, not a value. */
	for (i = at; i > 0 && buf[i - 1] != '\n'; i--)
		if (buf[i - 1] != ' ' && buf[i - 1] != '\t')
			return 0;
	return 1;
}

static void
syntax_error(struct ctx *c, const yaml_parser_t *p, const unsigned char *buf,
    size_t len, const char *path)
{
	const char *problem = p->problem ? p->problem : "malformed input";
	int line, col;

	switch (p->error) {
	case YAML_MEMORY_ERROR:
		c->sys = ENOMEM;
		return;
	case YAML_READER_ERROR:
		offset_pos(buf, len, p->problem_offset, &line, &col);
		if (p->problem_value >= 0)
			mf_err_at(c, line, col, path,
			    "not readable as UTF-8 text: %s (byte 0x%02x)",
			    problem, (unsigned)p->problem_value & 0xff);
		else
			mf_err_at(c, line, col, path,
			    "not readable as UTF-8 text: %s", problem);
		return;
	default:
		line = mf_clamp_line(p->problem_mark.line);
		col = mf_clamp_line(p->problem_mark.column);
		if (tab_in_indent(p, buf, len))
			mf_err_at(c, line, col, path, "tabs are not allowed in "
			    "YAML indentation: indent line %d with spaces",
			    line);
		else if (p->context != NULL)
			mf_err_at(c, line, col, path,
			    "invalid YAML: %s (%s at line %d)", problem,
			    p->context, mf_clamp_line(p->context_mark.line));
		else
			mf_err_at(c, line, col, path, "invalid YAML: %s", problem);
		return;
	}
}

/*
 * Feed the event stream into one tree per document and validate each
 * document as it ends, so that a syntax error late in a file still
 * leaves the errors of the documents before it.
 */
void
mf_load(struct ctx *c, const unsigned char *buf, size_t len)
{
	struct frame st[MAX_DEPTH];
	char path[FIELD];
	yaml_parser_t p;
	yaml_event_t ev;
	struct node *root = NULL, *n;
	size_t depth = 0, vlen;
	int done = 0;

	if (!yaml_parser_initialize(&p)) {
		c->sys = ENOMEM;
		return;
	}
	yaml_parser_set_input_string(&p, buf, len);
	while (!done && c->sys == 0) {
		if (!yaml_parser_parse(&p, &ev)) {
			syntax_error(c, &p, buf, len,
			    depth > 0 ? st[depth - 1].path : "");
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			root = NULL;
			depth = 0;
			break;
		case YAML_DOCUMENT_END_EVENT:
			mf_parse_module(c, root);
			mf_blk_free(&c->tree);
			root = NULL;
			/* past the cap, more documents only cost time */
			if (c->nerr >= TL_MF_ERRORS_MAX)
				done = 1;
			break;
		case YAML_ALIAS_EVENT:
			n = attach(c, st, depth, &root, N_BAD, &ev.start_mark, 0,
			    path);
			if (n != NULL) {
				char a[QUOTE];

				mf_join(a, sizeof a, "",
				    (const char *)ev.data.alias.anchor);
				mf_err(c, n, path, "aliases (*%s) are not supported "
				    "in a manifest: write the value out", a);
			}
			break;
		case YAML_SCALAR_EVENT:
			vlen = ev.data.scalar.length;
			if (vlen == SIZE_MAX) {
				c->sys = ENOMEM;
				break;
			}
			n = attach(c, st, depth, &root, N_SCALAR, &ev.start_mark,
			    vlen + 1, path);
			if (n == NULL)
				break;
			memcpy(n + 1, ev.data.scalar.value, vlen);
			((char *)(n + 1))[vlen] = '\0';
			n->s = (const char *)(n + 1);
			n->null = is_null(&ev);
			/* C strings from here on: a NUL would cut values short */
			if (memchr(n->s, '\0', vlen) != NULL) {
				n->kind = N_BAD;
				mf_err(c, n, path, "contains a NUL character");
			}
			break;
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			n = attach(c, st, depth, &root,
			    ev.type == YAML_MAPPING_START_EVENT ? N_MAP : N_SEQ,
			    &ev.start_mark, 0, path);
			if (n == NULL)
				break;
			if (depth == MAX_DEPTH) {
				/*
				 * Refused here, reading nothing more: libyaml
				 * spends time on every level it nests (14.7 s
				 * of CPU for 100,000), and what follows a
				 * level too deep cannot be trusted anyway.
				 */
				n->kind = N_BAD;
				mf_err(c, n, path, "nested deeper than %d levels "
				    "(the limit; nothing after it was read)",
				    MAX_DEPTH);
				done = 1;
				break;
			}
			st[depth].n = n;
			memcpy(st[depth].path, path, sizeof path);
			depth++;
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	mf_blk_free(&c->tree);
}
