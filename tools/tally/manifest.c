/*
 * manifest.c - load and validate module manifests.
 *
 * Two passes per YAML document.  libyaml's event parser feeds a small
 * tree of our own (load); the validators then walk that tree
 * (parse_module) and fill the plain structs of manifest.h.  The tree
 * exists because the checks are not local: a mapping's env target is
 * declared under env:, which may come after requires: in the file,
 * and duplicate keys need the whole mapping.  libyaml's document API
 * would give a tree too, but it resolves aliases into shared nodes
 * (and cycles), which a validator then has to defend against; the
 * event API lets us refuse aliases where they appear.
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
#include "drivers/driver.h"

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
struct claim {
	const char *a, *b, *c;
	char	field[FIELD];
	int	line, col;
};

struct claims {
	struct claim *v;
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

static const char *const module_keys[] = {
	"module", "env", "requires", "provides", "embedded", NULL
};
static const char *const req_keys[] = {
	"presence", "type", "from", "scope", "provider", "name", "env",
	"migrations", "max-credential-age", NULL
};
static const char *const provide_keys[] = {
	"driver", "revoke", "max-credential-age", NULL
};
static const char *const embedded_keys[] = {
	"type", "env", "image", "runs", "port", "expose", NULL
};
static const char *const conn_fields[] = {
	"host", "port", "database", "user", "password", "url", "vhost",
	"path", NULL
};

/* ---- memory ---- */

static void *
blk_alloc(struct blk **list, size_t size)
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

static void
blk_free(struct blk **list)
{
	struct blk *b;

	while ((b = *list) != NULL) {
		*list = b->next;
		free(b);
	}
}

/* n zeroed elements in the set's memory; NULL (with c->sys) on failure. */
static void *
alloc_n(struct ctx *c, size_t n, size_t size)
{
	void *p;

	if (n != 0 && size > SIZE_MAX / n) {
		c->sys = ENOMEM;
		return NULL;
	}
	p = blk_alloc(&c->set->mem, n * size);
	if (p == NULL) {
		c->sys = ENOMEM;
		return NULL;
	}
	memset(p, 0, n * size);
	return p;
}

static char *
sdup(struct ctx *c, const char *s)
{
	size_t len = strlen(s);
	char *p = alloc_n(c, len + 1, 1);

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
static int
put(char *dst, size_t size, size_t *pos, const char *s, size_t len)
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
static const char *
quote(char *buf, size_t size, const char *s)
{
	size_t pos = 0;

	buf[pos++] = '\'';
	if (!put(buf, size - 5, &pos, s, strlen(s)))
		put(buf, size - 1, &pos, "...", 3);
	put(buf, size, &pos, "'", 1);
	return buf;
}

/* base.key as a field path. */
static void
join(char *dst, size_t size, const char *base, const char *key)
{
	size_t pos = 0;

	dst[0] = '\0';
	put(dst, size, &pos, base, strlen(base));
	if (base[0] != '\0')
		put(dst, size, &pos, ".", 1);
	put(dst, size, &pos, key, strlen(key));
}

static const char *
join_list(char *buf, size_t size, const char *const *list)
{
	size_t pos = 0;

	buf[0] = '\0';
	for (; list != NULL && *list != NULL; list++) {
		if (pos > 0)
			put(buf, size, &pos, ", ", 2);
		if (!put(buf, size, &pos, *list, strlen(*list)))
			break;
	}
	return buf;
}

static int
in_list(const char *const *list, const char *s)
{
	for (; list != NULL && *list != NULL; list++)
		if (strcmp(*list, s) == 0)
			return 1;
	return 0;
}

static const char *
kind_name(const struct node *n)
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

static int
clamp_line(size_t v)
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
	if (errs->n == errs->cap) {
		size_t cap = errs->cap ? errs->cap * 2 : 16;
		struct tl_mf_error *v;

		if (cap > SIZE_MAX / sizeof *v) {
			c->sys = ENOMEM;
			return;
		}
		v = realloc(errs->v, cap * sizeof *v);
		if (v == NULL) {
			c->sys = ENOMEM;
			return;
		}
		errs->v = v;
		errs->cap = cap;
	}
	e = &errs->v[errs->n++];
	c->kept++;
	e->file[0] = '\0';
	put(e->file, sizeof e->file, &pos, c->name, strlen(c->name));
	e->line = line;
	e->col = col;
	/* field paths are escaped where they are built */
	snprintf(e->field, sizeof e->field, "%s", field);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
}

static void PRINTFLIKE(5, 6)
err_at(struct ctx *c, int line, int col, const char *field, const char *fmt,
    ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(c, line, col, field, fmt, ap);
	va_end(ap);
}

static void PRINTFLIKE(4, 5)
err(struct ctx *c, const struct node *n, const char *field, const char *fmt,
    ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(c, n->line, n->col, field, fmt, ap);
	va_end(ap);
}

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
			join(path, FIELD, st[depth - 1].path, p->last->s);
		else if (p->kind == N_SEQ) {
			char idx[32];

			snprintf(idx, sizeof idx, "[%zu]", p->n);
			put(path, FIELD, &pos, st[depth - 1].path,
			    strlen(st[depth - 1].path));
			put(path, FIELD, &pos, idx, strlen(idx));
		} else
			put(path, FIELD, &pos, st[depth - 1].path,
			    strlen(st[depth - 1].path));
	}
	n = blk_alloc(&c->tree, sizeof *n + extra);
	if (n == NULL) {
		c->sys = ENOMEM;
		return NULL;
	}
	memset(n, 0, sizeof *n);
	n->kind = kind;
	n->line = clamp_line(mark->line);
	n->col = clamp_line(mark->column);
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
	*line = clamp_line(l);
	*col = clamp_line(off - bol);
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
			err_at(c, line, col, path,
			    "not readable as UTF-8 text: %s (byte 0x%02x)",
			    problem, (unsigned)p->problem_value & 0xff);
		else
			err_at(c, line, col, path,
			    "not readable as UTF-8 text: %s", problem);
		return;
	default:
		line = clamp_line(p->problem_mark.line);
		col = clamp_line(p->problem_mark.column);
		if (p->context != NULL)
			err_at(c, line, col, path,
			    "invalid YAML: %s (%s at line %d)", problem,
			    p->context, clamp_line(p->context_mark.line));
		else
			err_at(c, line, col, path, "invalid YAML: %s", problem);
		return;
	}
}

static void parse_module(struct ctx *, struct node *);

/*
 * Feed the event stream into one tree per document and validate each
 * document as it ends, so that a syntax error late in a file still
 * leaves the errors of the documents before it.
 */
static void
load(struct ctx *c, const unsigned char *buf, size_t len)
{
	struct frame st[MAX_DEPTH];
	char path[FIELD];
	yaml_parser_t p;
	yaml_event_t ev;
	struct node *root = NULL, *n;
	size_t depth = 0, skip = 0, vlen;
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
		if (skip > 0) {
			if (ev.type == YAML_SEQUENCE_START_EVENT ||
			    ev.type == YAML_MAPPING_START_EVENT)
				skip++;
			else if (ev.type == YAML_SEQUENCE_END_EVENT ||
			    ev.type == YAML_MAPPING_END_EVENT)
				skip--;
			yaml_event_delete(&ev);
			continue;
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
			parse_module(c, root);
			blk_free(&c->tree);
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

				join(a, sizeof a, "",
				    (const char *)ev.data.alias.anchor);
				err(c, n, path, "aliases (*%s) are not supported "
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
				err(c, n, path, "contains a NUL character");
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
				n->kind = N_BAD;
				err(c, n, path, "nested deeper than %d levels",
				    MAX_DEPTH);
				skip = 1;
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
	blk_free(&c->tree);
}

/* ---- validation helpers ---- */

static int
cmp_keyp(const void *a, const void *b)
{
	const struct node *x = *(const struct node *const *)a;
	const struct node *y = *(const struct node *const *)b;
	int r = strcmp(x->s, y->s);

	if (r != 0)
		return r;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return (x->col > y->col) - (x->col < y->col);
}

/*
 * Report keys that are not strings, unknown (when allowed is given)
 * or repeated, and mark them to be skipped, so that the walkers see a
 * mapping of unique string keys.
 */
static void
check_keys(struct ctx *c, struct node *map, const char *path,
    const char *const *allowed)
{
	struct node **keys = NULL, *k;
	char f[FIELD], q[QUOTE], list[160];
	size_t nk = 0, i, first;

	for (k = map->first; k != NULL; k = k->next->next) {
		if (k->kind == N_BAD) {
			k->skip = 1;
			continue;
		}
		if (k->kind != N_SCALAR) {
			err(c, k, path, "a key must be a string, found %s",
			    kind_name(k));
			k->skip = 1;
			continue;
		}
		if (k->null) {
			err(c, k, path, "a key must not be empty or null");
			k->skip = 1;
			continue;
		}
		if (allowed != NULL && !in_list(allowed, k->s)) {
			join(f, sizeof f, path, k->s);
			err(c, k, f, "unknown key %s; allowed here: %s",
			    quote(q, sizeof q, k->s),
			    join_list(list, sizeof list, allowed));
			k->skip = 1;
			continue;
		}
		nk++;
	}
	if (nk < 2)
		return;
	keys = malloc(nk * sizeof *keys);
	if (keys == NULL) {
		c->sys = ENOMEM;
		return;
	}
	nk = 0;
	for (k = map->first; k != NULL; k = k->next->next)
		if (!k->skip)
			keys[nk++] = k;
	/* sorting, not pairwise: a fuzzer's mapping has 100k keys */
	qsort(keys, nk, sizeof *keys, cmp_keyp);
	for (first = 0, i = 1; i < nk; i++) {
		if (strcmp(keys[i]->s, keys[first]->s) != 0) {
			first = i;
			continue;
		}
		join(f, sizeof f, path, keys[i]->s);
		err(c, keys[i], f, "duplicate key %s (first at line %d)",
		    quote(q, sizeof q, keys[i]->s), keys[first]->line);
		keys[i]->skip = 1;
	}
	free(keys);
}

/* The value under key in map (and the key node), NULL if absent. */
static struct node *
get(struct node *map, const char *key, struct node **keyp)
{
	struct node *k;

	for (k = map->first; k != NULL; k = k->next->next)
		if (!k->skip && strcmp(k->s, key) == 0) {
			if (keyp != NULL)
				*keyp = k;
			return k->next;
		}
	return NULL;
}

/* v's string, or NULL after saying why there is none. */
static const char *
want_str(struct ctx *c, const struct node *v, const char *path)
{
	if (v->kind == N_BAD)
		return NULL;
	if (v->kind != N_SCALAR) {
		err(c, v, path, "expected a string, found %s", kind_name(v));
		return NULL;
	}
	if (v->null) {
		err(c, v, path, "has no value");
		return NULL;
	}
	return v->s;
}

/* 1 if v is a mapping; 0 if it is empty or was reported. */
static int
want_map(struct ctx *c, const struct node *v, const char *path,
    const char *what)
{
	if (v->kind == N_MAP)
		return 1;
	if (v->kind == N_BAD || (v->kind == N_SCALAR && v->null))
		return 0;
	err(c, v, path, "expected a mapping of %s, found %s", what,
	    kind_name(v));
	return 0;
}

static int
valid_name(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > TL_MF_NAME_MAX || s[0] == '-' ||
	    s[len - 1] == '-')
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

static int
check_name(struct ctx *c, const struct node *n, const char *path,
    const char *s, size_t len, const char *what)
{
	char part[TL_MF_NAME_MAX + 2], q[QUOTE];

	if (valid_name(s, len))
		return 1;
	/* s may be part of a longer string (NODE/MODULE) */
	if (len > TL_MF_NAME_MAX) {
		memcpy(part, s, TL_MF_NAME_MAX + 1);
		part[TL_MF_NAME_MAX + 1] = '\0';
		err(c, n, path, "%s is not a valid %s: it is %zu characters "
		    "long, the limit is %d", quote(q, sizeof q, part), what,
		    len, TL_MF_NAME_MAX);
		return 0;
	}
	memcpy(part, s, len);
	part[len] = '\0';
	err(c, n, path, "%s is not a valid %s: use 1 to %d lowercase "
	    "letters, digits and '-', not starting or ending with '-'",
	    quote(q, sizeof q, part), what, TL_MF_NAME_MAX);
	return 0;
}

static int
valid_env_name(const char *s)
{
	size_t i;

	if (s[0] == '\0' || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		if (i >= TL_MF_ENV_NAME_MAX)
			return 0;
		if (!((s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	}
	return 1;
}

static int
check_env_name(struct ctx *c, const struct node *n, const char *path,
    const char *s)
{
	char q[QUOTE];

	if (valid_env_name(s))
		return 1;
	err(c, n, path, "%s is not a valid variable name: use upper-case "
	    "letters, digits and '_', not starting with a digit, at most %d "
	    "characters", quote(q, sizeof q, s), TL_MF_ENV_NAME_MAX);
	return 0;
}

static void
claim(struct ctx *c, struct claims *cl, const char *a, const char *b,
    const char *cc, const char *field, const struct node *at)
{
	struct claim *e;

	if (cl->n == cl->cap) {
		size_t cap = cl->cap ? cl->cap * 2 : 16;
		struct claim *v;

		if (cap > SIZE_MAX / sizeof *v ||
		    (v = realloc(cl->v, cap * sizeof *v)) == NULL) {
			c->sys = ENOMEM;
			return;
		}
		cl->v = v;
		cl->cap = cap;
	}
	e = &cl->v[cl->n++];
	e->a = a;
	e->b = b;
	e->c = cc;
	snprintf(e->field, sizeof e->field, "%s", field);
	e->line = at->line;
	e->col = at->col;
}

static int
strcmp_null(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return (a != NULL) - (b != NULL);
	return strcmp(a, b);
}

static int
cmp_claim_what(const struct claim *x, const struct claim *y)
{
	int r;

	if ((r = strcmp_null(x->a, y->a)) != 0 ||
	    (r = strcmp_null(x->b, y->b)) != 0)
		return r;
	return strcmp_null(x->c, y->c);
}

static int
cmp_claim(const void *a, const void *b)
{
	const struct claim *x = a, *y = b;
	int r = cmp_claim_what(x, y);

	if (r != 0)
		return r;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return (x->col > y->col) - (x->col < y->col);
}

/* ---- sorting and lookup ---- */

static int
cmp_var(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_var *)a)->name,
	    ((const struct tl_mf_var *)b)->name);
}

static int
cmp_map(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_map *)a)->field,
	    ((const struct tl_mf_map *)b)->field);
}

static int
cmp_req(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_req *)a)->name,
	    ((const struct tl_mf_req *)b)->name);
}

static int
cmp_provide(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_provide *)a)->type,
	    ((const struct tl_mf_provide *)b)->type);
}

static int
cmp_embedded(const void *a, const void *b)
{
	return strcmp(((const struct tl_mf_embedded *)a)->name,
	    ((const struct tl_mf_embedded *)b)->name);
}

static int
cmp_module(const void *a, const void *b)
{
	const struct tl_mf_module *x = a, *y = b;
	int r = strcmp_null(x->name, y->name);

	return r != 0 ? r : (x->line > y->line) - (x->line < y->line);
}

static int
cmp_modname(const void *a, const void *b)
{
	const struct modname *x = a, *y = b;
	int r = strcmp(x->name, y->name);

	if (r != 0)
		return r;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return (x->col > y->col) - (x->col < y->col);
}

/* bsearch keys: the name is each struct's first member */
static int
cmp_name_key(const void *key, const void *elem)
{
	return strcmp(key, *(const char *const *)elem);
}

static const struct tl_mf_var *
find_var(const struct tl_mf_module *m, const char *name)
{
	if (m->nenv == 0)
		return NULL;
	return bsearch(name, m->env, m->nenv, sizeof *m->env, cmp_name_key);
}

static const struct tl_mf_embedded *
find_embedded(const struct tl_mf_module *m, const char *name)
{
	if (m->nembedded == 0)
		return NULL;
	return bsearch(name, m->embedded, m->nembedded, sizeof *m->embedded,
	    cmp_name_key);
}

/* ---- values ---- */

enum age { AGE_OK, AGE_BAD, AGE_NO_UNIT, AGE_TOO_LONG, AGE_ZERO };

/*
 * "30d", "12h", "1d12h": groups of digits and a unit, largest unit
 * first, each unit once.  A bare number is refused rather than taken
 * as seconds: "30" meaning thirty seconds is a surprise nobody wants
 * in a rotation schedule.
 */
static enum age
scan_age(const char *s, int64_t *out)
{
	static const struct {
		char	unit;
		int64_t	secs;
	} units[] = {
		{ 'w', 7 * 86400 }, { 'd', 86400 }, { 'h', 3600 }, { 'm', 60 },
		{ 's', 1 }
	};
	const size_t nunits = sizeof units / sizeof units[0];
	const char *p, *digits;
	int64_t total = 0, n;
	size_t next = 0, u;

	if (*s == '\0')
		return AGE_BAD;
	for (p = s; *p != '\0'; p++) {
		/* n stays below 10 * TL_MF_MAX_AGE + 9: no overflow */
		for (digits = p, n = 0; *p >= '0' && *p <= '9'; p++) {
			if (n > TL_MF_MAX_AGE)
				return AGE_TOO_LONG;
			n = n * 10 + (*p - '0');
		}
		if (p == digits)
			return AGE_BAD;
		if (*p == '\0')
			return digits == s ? AGE_NO_UNIT : AGE_BAD;
		for (u = next; u < nunits && units[u].unit != *p; u++)
			;
		if (u == nunits)
			return AGE_BAD;
		if (n > TL_MF_MAX_AGE / units[u].secs)
			return AGE_TOO_LONG;
		total += n * units[u].secs;
		if (total > TL_MF_MAX_AGE)
			return AGE_TOO_LONG;
		next = u + 1;
	}
	if (total == 0)
		return AGE_ZERO;
	*out = total;
	return AGE_OK;
}

static void
parse_age(struct ctx *c, const struct node *v, const char *path,
    int64_t *out)
{
	const char *s = want_str(c, v, path);
	char q[QUOTE];

	if (s == NULL)
		return;
	switch (scan_age(s, out)) {
	case AGE_OK:
		break;
	case AGE_NO_UNIT:
		err(c, v, path, "%s needs a unit: s, m, h, d or w (e.g. %sd)",
		    quote(q, sizeof q, s), s);
		break;
	case AGE_TOO_LONG:
		err(c, v, path, "%s is longer than the limit of %lldd",
		    quote(q, sizeof q, s), (long long)(TL_MF_MAX_AGE / 86400));
		break;
	case AGE_ZERO:
		err(c, v, path, "must be longer than zero; leave "
		    "max-credential-age out for no scheduled rotation");
		break;
	case AGE_BAD:
		err(c, v, path, "%s is not a duration: use numbers with units "
		    "w, d, h, m, s, largest first (e.g. 30d, 1d12h)",
		    quote(q, sizeof q, s));
		break;
	}
}

static int
make_base(struct ctx *c)
{
	const char *dir = c->base_dir ? c->base_dir : ".";
	char *cwd = NULL, *p;
	size_t size = 256, n;
	int rc = 0;

	if (dir[0] == '/') {
		c->base_abs = strdup(dir);
		if (c->base_abs == NULL)
			rc = ENOMEM;
		return rc;
	}
	for (;;) {
		p = realloc(cwd, size);
		if (p == NULL) {
			rc = ENOMEM;
			goto out_cwd;
		}
		cwd = p;
		if (getcwd(cwd, size) != NULL)
			break;
		if (errno != ERANGE || size > SIZE_MAX / 4) {
			rc = errno != ERANGE ? errno : ENAMETOOLONG;
			goto out_cwd;
		}
		size *= 2;
	}
	n = strlen(cwd) + strlen(dir) + 2;
	c->base_abs = malloc(n);
	if (c->base_abs == NULL) {
		rc = ENOMEM;
		goto out_cwd;
	}
	snprintf(c->base_abs, n, "%s/%s", cwd, dir);
out_cwd:
	free(cwd);
	return rc;
}

/* Append p's components to out, resolving "." and ".." lexically. */
static void
push_path(char *out, size_t *o, const char *p)
{
	const char *s;
	size_t len;

	while (*p != '\0') {
		while (*p == '/')
			p++;
		for (s = p; *p != '\0' && *p != '/'; p++)
			;
		len = (size_t)(p - s);
		if (len == 0 || (len == 1 && s[0] == '.'))
			continue;
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			while (*o > 0 && out[*o - 1] != '/')
				(*o)--;
			if (*o > 0)
				(*o)--;
			continue;
		}
		out[(*o)++] = '/';
		memcpy(out + *o, s, len);
		*o += len;
	}
}

/*
 * The migrations directory as an absolute path.  Lexical, not
 * realpath(): the directory need not exist yet (the caller reads it),
 * and a manifest checked on one machine must resolve the same way.
 */
static const char *
resolve(struct ctx *c, const struct node *v, const char *path,
    const char *rel)
{
	char *out;
	size_t o = 0;

	if (c->base_abs == NULL && (c->sys = make_base(c)) != 0)
		return NULL;
	out = alloc_n(c, strlen(c->base_abs) + strlen(rel) + 3, 1);
	if (out == NULL)
		return NULL;
	push_path(out, &o, c->base_abs);
	push_path(out, &o, rel);
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	if (o >= PATH_LIMIT) {
		err(c, v, path, "resolves to a path longer than %d bytes",
		    PATH_LIMIT);
		return NULL;
	}
	return out;
}

/* ---- the document ---- */

static void
parse_env(struct ctx *c, struct tl_mf_module *m, struct node *map)
{
	struct tl_mf_var *vars;
	struct node *k, *v;
	char f[FIELD];
	size_t n = 0;

	if (!want_map(c, map, "env", "variable names to defaults"))
		return;
	check_keys(c, map, "env", NULL);
	if (map->n == 0 || (vars = alloc_n(c, map->n / 2, sizeof *vars)) ==
	    NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		join(f, sizeof f, "env", k->s);
		if (!check_env_name(c, k, f, k->s) || v->kind == N_BAD)
			continue;
		if (v->kind != N_SCALAR) {
			err(c, v, f, "expected a default value (a string, or "
			    "\"\" for none), found %s", kind_name(v));
			continue;
		}
		vars[n].name = sdup(c, k->s);
		vars[n].def = v->null ? "" : sdup(c, v->s);
		vars[n].line = k->line;
		n++;
	}
	qsort(vars, n, sizeof *vars, cmp_var);
	m->env = vars;
	m->nenv = n;
}

/* An env: mapping of connection fields onto the module's variables. */
static void
parse_maps(struct ctx *c, const struct tl_mf_module *m, struct node *map,
    const char *path, const char *type, const struct tl_mf_map **out,
    size_t *nout)
{
	/* A type with no driver is checked against conn_fields alone. */
	const struct tl_drv_ops *drv = type != NULL ? tl_drv_for_type(type) :
	    NULL;
	struct tl_mf_map *maps;
	struct node *k, *v;
	const char *s;
	char f[FIELD], q[QUOTE], list[160];
	size_t n = 0;

	if (!want_map(c, map, path, "connection fields to variables"))
		return;
	check_keys(c, map, path, NULL);
	if (map->n == 0 || (maps = alloc_n(c, map->n / 2, sizeof *maps)) ==
	    NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		join(f, sizeof f, path, k->s);
		if (!in_list(conn_fields, k->s)) {
			err(c, k, f, "unknown connection field %s; the fields "
			    "are %s", quote(q, sizeof q, k->s),
			    join_list(list, sizeof list, conn_fields));
			continue;
		}
		if (drv != NULL && drv->fields != NULL &&
		    !in_list(drv->fields, k->s)) {
			/* it would be delivered as nothing, in silence */
			err(c, k, f, "type %s (driver %s) does not produce "
			    "connection field %s; it produces %s", type,
			    drv->name, quote(q, sizeof q, k->s),
			    join_list(list, sizeof list, drv->fields));
			continue;
		}
		if ((s = want_str(c, v, f)) == NULL ||
		    !check_env_name(c, v, f, s))
			continue;
		if (find_var(m, s) == NULL) {
			/* the as-is system dropped these values in silence */
			err(c, v, f, "field %s is mapped to %s, which the module "
			    "does not declare under env: (add %s: \"\" there, "
			    "or the value is lost)", quote(q, sizeof q, k->s),
			    s, s);
			continue;
		}
		claim(c, &c->vars, s, NULL, NULL, f, v);
		maps[n].field = sdup(c, k->s);
		maps[n].var = sdup(c, s);
		maps[n].line = k->line;
		n++;
	}
	qsort(maps, n, sizeof *maps, cmp_map);
	*out = maps;
	*nout = n;
}

/* presence:/from: may name neither the module nor its private instance. */
static int
check_target(struct ctx *c, const struct tl_mf_module *m,
    const struct node *v, const char *path, const char *s, int presence)
{
	char q[QUOTE];

	if (m->name != NULL && strcmp(s, m->name) == 0) {
		if (presence)
			err(c, v, path, "a module cannot require its own "
			    "presence");
		else
			err(c, v, path, "a module cannot consume its own "
			    "grant: %s is this module", quote(q, sizeof q, s));
		return 0;
	}
	if (find_embedded(m, s) != NULL) {
		err(c, v, path, "%s names this module's embedded instance, "
		    "which is private and never a provider (rename the "
		    "instance if you meant the module %s)",
		    quote(q, sizeof q, s), s);
		return 0;
	}
	return 1;
}

static void
parse_provider(struct ctx *c, struct tl_mf_req *r, const struct node *v,
    const char *path)
{
	const char *s = want_str(c, v, path), *slash;
	char q[QUOTE], q2[QUOTE], *node;
	size_t nlen, mlen;

	if (s == NULL)
		return;
	slash = strchr(s, '/');
	if (slash == NULL || strchr(slash + 1, '/') != NULL) {
		err(c, v, path, "%s is not NODE/MODULE (e.g. node-b/store)",
		    quote(q, sizeof q, s));
		return;
	}
	nlen = (size_t)(slash - s);
	mlen = strlen(slash + 1);
	if (!check_name(c, v, path, s, nlen, "node name") ||
	    !check_name(c, v, path, slash + 1, mlen, "module name"))
		return;
	if (r->target != NULL && strcmp(slash + 1, r->target) != 0) {
		err(c, v, path, "names the module %s but from: is %s; a "
		    "provider is an instance of the from: module",
		    quote(q, sizeof q, slash + 1),
		    quote(q2, sizeof q2, r->target));
		return;
	}
	r->provider_module = sdup(c, slash + 1);
	if ((node = alloc_n(c, nlen + 1, 1)) != NULL)
		memcpy(node, s, nlen);
	r->provider_node = node;
}

/* 0 if r was filled without a problem. */
static int
parse_req(struct ctx *c, const struct tl_mf_module *m, const struct node *key,
    struct node *map, const char *path, struct tl_mf_req *r)
{
	struct node *presence, *type, *from, *v, *k, *tk = NULL, *fk = NULL;
	const struct node *at = key;
	size_t before = c->nerr;
	const char *s;
	const struct tl_drv_ops *drv;
	char f[FIELD], q[QUOTE], dflt[2 * TL_MF_NAME_MAX + 2];
	char why[TL_DRV_WHY_MAX];

	check_keys(c, map, path, req_keys);
	r->line = key->line;
	presence = get(map, "presence", NULL);
	type = get(map, "type", &tk);
	from = get(map, "from", &fk);
	if (presence != NULL) {
		r->kind = TL_MF_PRESENCE;
		for (k = map->first; k != NULL; k = k->next->next) {
			if (k->skip || strcmp(k->s, "presence") == 0)
				continue;
			join(f, sizeof f, path, k->s);
			if (k == tk || k == fk)
				err(c, k, f, "a requirement is either presence "
				    "(presence:) or instantiation (type: and "
				    "from:), not both");
			else
				err(c, k, f, "%s applies only to an "
				    "instantiation requirement (type: and from:)",
				    k->s);
		}
		join(f, sizeof f, path, "presence");
		if ((s = want_str(c, presence, f)) != NULL &&
		    check_name(c, presence, f, s, strlen(s), "module name") &&
		    check_target(c, m, presence, f, s, 1))
			r->target = sdup(c, s);
		return c->nerr == before ? 0 : -1;
	}
	if (type == NULL && from == NULL) {
		err(c, key, path, "a requirement needs presence: MODULE, or "
		    "type: and from:");
		return -1;
	}
	r->kind = TL_MF_INSTANTIATION;
	join(f, sizeof f, path, "type");
	if (type == NULL)
		err(c, key, f, "missing type: an instantiation requirement "
		    "names the resource type it needs");
	else if ((s = want_str(c, type, f)) != NULL &&
	    check_name(c, type, f, s, strlen(s), "resource type"))
		r->type = sdup(c, s);
	join(f, sizeof f, path, "from");
	if (from == NULL)
		err(c, key, f, "missing from: an instantiation requirement "
		    "names the module that grants it");
	else if ((s = want_str(c, from, f)) != NULL &&
	    check_name(c, from, f, s, strlen(s), "module name") &&
	    check_target(c, m, from, f, s, 0))
		r->target = sdup(c, s);

	join(f, sizeof f, path, "scope");
	if ((v = get(map, "scope", NULL)) != NULL &&
	    (s = want_str(c, v, f)) != NULL) {
		if (strcmp(s, "shared") == 0)
			r->scope = TL_MF_SHARED;
		else if (strcmp(s, "per-instance") == 0)
			r->scope = TL_MF_PER_INSTANCE;
		else
			err(c, v, f, "scope must be shared or per-instance, "
			    "not %s", quote(q, sizeof q, s));
	}
	join(f, sizeof f, path, "provider");
	if ((v = get(map, "provider", NULL)) != NULL)
		parse_provider(c, r, v, f);
	join(f, sizeof f, path, "name");
	if ((v = get(map, "name", NULL)) != NULL) {
		if ((s = want_str(c, v, f)) != NULL &&
		    check_name(c, v, f, s, strlen(s), "resource name"))
			r->resource = sdup(c, s);
		at = v;
	} else if (m->name != NULL && valid_name(key->s, strlen(key->s))) {
		snprintf(dflt, sizeof dflt, "%s-%s", m->name, key->s);
		/* a Postgres identifier stops at 63 bytes: be explicit */
		if (strlen(dflt) > TL_MF_NAME_MAX)
			err(c, key, path, "the default resource name %s is "
			    "longer than %d characters: give a shorter one "
			    "with name:", quote(q, sizeof q, dflt),
			    TL_MF_NAME_MAX);
		else
			r->resource = sdup(c, dflt);
		at = key;
		snprintf(f, sizeof f, "%s", path);
	}
	if (r->resource != NULL && r->type != NULL && r->target != NULL)
		claim(c, &c->resources, r->target, r->type, r->resource, f, at);
	join(f, sizeof f, path, "env");
	if ((v = get(map, "env", NULL)) != NULL)
		parse_maps(c, m, v, f, r->type, &r->env, &r->nenv);
	join(f, sizeof f, path, "migrations");
	if ((v = get(map, "migrations", NULL)) != NULL &&
	    (s = want_str(c, v, f)) != NULL) {
		if (s[0] == '/')
			err(c, v, f, "%s is absolute: migrations ship with the "
			    "module, give a path relative to the manifest's "
			    "directory", quote(q, sizeof q, s));
		else if (r->type != NULL &&
		    (drv = tl_drv_for_type(r->type)) != NULL &&
		    !tl_drv_can(drv, TL_DRV_CAP_MIGRATE, why))
			/* Refused now, not discovered by the migrator. */
			err(c, v, f, "type %s has migrations, but %s", r->type,
			    why);
		else
			r->migrations = resolve(c, v, f, s);
	}
	join(f, sizeof f, path, "max-credential-age");
	if ((v = get(map, "max-credential-age", NULL)) != NULL)
		parse_age(c, v, f, &r->max_credential_age);
	return c->nerr == before ? 0 : -1;
}

static void
parse_requires(struct ctx *c, struct tl_mf_module *m, struct node *map)
{
	struct tl_mf_req *reqs;
	struct node *k, *v;
	char f[FIELD];
	size_t n = 0;
	int ok;

	if (!want_map(c, map, "requires", "requirement names to requirements"))
		return;
	check_keys(c, map, "requires", NULL);
	if (map->n == 0 || (reqs = alloc_n(c, map->n / 2, sizeof *reqs)) ==
	    NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		join(f, sizeof f, "requires", k->s);
		ok = check_name(c, k, f, k->s, strlen(k->s),
		    "requirement name");
		if (v->kind == N_BAD)
			continue;
		if (v->kind != N_MAP) {
			err(c, v, f, "expected a mapping with presence: MODULE, "
			    "or type: and from:, found %s", kind_name(v));
			continue;
		}
		memset(&reqs[n], 0, sizeof reqs[n]);
		reqs[n].name = sdup(c, k->s);
		if (parse_req(c, m, k, v, f, &reqs[n]) == 0 && ok)
			n++;
	}
	qsort(reqs, n, sizeof *reqs, cmp_req);
	m->reqs = reqs;
	m->nreqs = n;
}

static void
parse_provides(struct ctx *c, struct tl_mf_module *m, struct node *map)
{
	struct tl_mf_provide *pv;
	struct node *k, *v, *x;
	const char *s;
	char f[FIELD], g[FIELD], q[QUOTE], list[160];
	size_t n = 0, before;

	if (!want_map(c, map, "provides", "resource types to drivers"))
		return;
	check_keys(c, map, "provides", NULL);
	if (map->n == 0 || (pv = alloc_n(c, map->n / 2, sizeof *pv)) == NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		before = c->nerr;
		s = NULL;
		join(f, sizeof f, "provides", k->s);
		check_name(c, k, f, k->s, strlen(k->s), "resource type");
		if (v->kind == N_BAD)
			continue;
		if (v->kind != N_MAP && !(v->kind == N_SCALAR && v->null)) {
			err(c, v, f, "expected a mapping with driver:, found %s",
			    kind_name(v));
			continue;
		}
		if (v->kind == N_MAP)
			check_keys(c, v, f, provide_keys);
		join(g, sizeof g, f, "driver");
		x = v->kind == N_MAP ? get(v, "driver", NULL) : NULL;
		if (x == NULL)
			err(c, k, g, "missing driver: a resource type is "
			    "declared with the driver that makes it (no empty "
			    "grants)");
		else if ((s = want_str(c, x, g)) != NULL &&
		    !in_list(c->drivers, s)) {
			if (c->drivers == NULL || c->drivers[0] == NULL)
				err(c, x, g, "unknown driver %s: no driver is "
				    "known", quote(q, sizeof q, s));
			else
				err(c, x, g, "unknown driver %s; known drivers: "
				    "%s", quote(q, sizeof q, s),
				    join_list(list, sizeof list, c->drivers));
		} else if (s != NULL)
			pv[n].driver = sdup(c, s);
		join(g, sizeof g, f, "revoke");
		x = v->kind == N_MAP ? get(v, "revoke", NULL) : NULL;
		if (x != NULL && (s = want_str(c, x, g)) != NULL) {
			if (strcmp(s, "retain") == 0)
				pv[n].revoke = TL_MF_RETAIN;
			else if (strcmp(s, "drop") == 0)
				pv[n].revoke = TL_MF_DROP;
			else
				err(c, x, g, "revoke must be retain or drop, "
				    "not %s", quote(q, sizeof q, s));
		}
		join(g, sizeof g, f, "max-credential-age");
		x = v->kind == N_MAP ? get(v, "max-credential-age", NULL) :
		    NULL;
		if (x != NULL)
			parse_age(c, x, g, &pv[n].max_credential_age);
		if (c->nerr != before)
			continue;
		pv[n].type = sdup(c, k->s);
		pv[n].line = k->line;
		n++;
	}
	qsort(pv, n, sizeof *pv, cmp_provide);
	m->provides = pv;
	m->nprovides = n;
}

static void
parse_embedded(struct ctx *c, struct tl_mf_module *m, struct node *map)
{
	struct tl_mf_embedded *em;
	struct node *k, *v, *x, *xi, *xr, *ik = NULL, *rk = NULL;
	const char *s;
	char f[FIELD], g[FIELD], q[QUOTE];
	size_t n = 0, before;

	if (!want_map(c, map, "embedded", "instance names to instances"))
		return;
	check_keys(c, map, "embedded", NULL);
	if (map->n == 0 || (em = alloc_n(c, map->n / 2, sizeof *em)) == NULL)
		return;
	for (k = map->first; k != NULL && c->sys == 0; k = v->next) {
		v = k->next;
		if (k->skip)
			continue;
		before = c->nerr;
		join(f, sizeof f, "embedded", k->s);
		check_name(c, k, f, k->s, strlen(k->s),
		    "embedded instance name");
		if (v->kind == N_BAD)
			continue;
		if (v->kind != N_MAP) {
			err(c, v, f, "expected a mapping with type:, found %s",
			    kind_name(v));
			continue;
		}
		check_keys(c, v, f, embedded_keys);
		join(g, sizeof g, f, "type");
		if ((x = get(v, "type", NULL)) == NULL)
			err(c, k, g, "missing type: an embedded instance names "
			    "its resource type");
		else if ((s = want_str(c, x, g)) != NULL &&
		    check_name(c, x, g, s, strlen(s), "resource type"))
			em[n].type = sdup(c, s);
		xi = get(v, "image", &ik);
		xr = get(v, "runs", &rk);
		if (xi != NULL && xr != NULL) {
			/* report at the later of the two */
			x = rk->line > ik->line ||
			    (rk->line == ik->line && rk->col > ik->col) ? rk : ik;
			join(g, sizeof g, f, x->s);
			err(c, x, g, "give either image: or runs:, not both");
		} else if (xi != NULL || xr != NULL) {
			join(g, sizeof g, f, xr != NULL ? "runs" : "image");
			if ((s = want_str(c, xr != NULL ? xr : xi, g)) != NULL)
				em[n].runs = sdup(c, s);
		}
		join(g, sizeof g, f, "port");
		if ((x = get(v, "port", NULL)) != NULL &&
		    !(x->kind == N_SCALAR && x->null))
			err(c, x, g, "an embedded instance publishes no port: "
			    "it is reachable only on its module's network "
			    "(remove port:)");
		join(g, sizeof g, f, "expose");
		if ((x = get(v, "expose", NULL)) != NULL &&
		    (s = want_str(c, x, g)) != NULL && strcmp(s, "none") != 0)
			err(c, x, g, "an embedded instance is private: expose "
			    "must be none, not %s", quote(q, sizeof q, s));
		join(g, sizeof g, f, "env");
		if ((x = get(v, "env", NULL)) != NULL)
			parse_maps(c, m, x, g, em[n].type, &em[n].env,
			    &em[n].nenv);
		if (c->nerr != before)
			continue;
		em[n].name = sdup(c, k->s);
		em[n].line = k->line;
		n++;
	}
	qsort(em, n, sizeof *em, cmp_embedded);
	m->embedded = em;
	m->nembedded = n;
}

/* Report the second and later claims on one thing, naming the first. */
static void
check_claims(struct ctx *c, struct claims *cl, int vars)
{
	char q[QUOTE];
	size_t i, first;

	if (cl->n < 2)
		goto out;
	qsort(cl->v, cl->n, sizeof *cl->v, cmp_claim);
	for (first = 0, i = 1; i < cl->n; i++) {
		struct claim *e = &cl->v[i], *p = &cl->v[first];

		if (cmp_claim_what(e, p) != 0) {
			first = i;
			continue;
		}
		if (vars)
			err_at(c, e->line, e->col, e->field, "%s is already "
			    "mapped by %s (line %d): a variable holds one value",
			    e->a, p->field, p->line);
		else
			err_at(c, e->line, e->col, e->field, "resource name %s "
			    "is already used by %s (line %d) for the same type "
			    "and provider: a grant belongs to one requirement",
			    quote(q, sizeof q, e->c), p->field, p->line);
	}
out:
	cl->n = 0;
}

static void
parse_module(struct ctx *c, struct node *root)
{
	struct tl_mf_module m;
	struct node *v;
	const char *s;

	if (root == NULL || (root->kind == N_SCALAR && root->null))
		return;		/* an empty document, as after a final "---" */
	c->ndocs++;
	if (root->kind == N_BAD)
		return;
	if (root->kind != N_MAP) {
		err(c, root, "", "a manifest document is a mapping with "
		    "module: NAME, found %s", kind_name(root));
		return;
	}
	memset(&m, 0, sizeof m);
	m.file = c->file;
	m.line = root->line;
	check_keys(c, root, "", module_keys);
	if ((v = get(root, "module", NULL)) == NULL)
		err(c, root, "module", "missing module: every document names "
		    "its module (module: NAME)");
	else if ((s = want_str(c, v, "module")) != NULL &&
	    check_name(c, v, "module", s, strlen(s), "module name")) {
		struct modname *nm;

		m.name = sdup(c, s);
		if (c->nnames == c->capnames) {
			size_t cap = c->capnames ? c->capnames * 2 : 8;

			if (cap > SIZE_MAX / sizeof *nm ||
			    (nm = realloc(c->names, cap * sizeof *nm)) == NULL) {
				c->sys = ENOMEM;
				return;
			}
			c->names = nm;
			c->capnames = cap;
		}
		nm = &c->names[c->nnames++];
		nm->name = m.name ? m.name : "";
		nm->line = v->line;
		nm->col = v->col;
	}
	/* env and embedded first: requirements are checked against them */
	if ((v = get(root, "env", NULL)) != NULL)
		parse_env(c, &m, v);
	if ((v = get(root, "embedded", NULL)) != NULL)
		parse_embedded(c, &m, v);
	if ((v = get(root, "requires", NULL)) != NULL)
		parse_requires(c, &m, v);
	if ((v = get(root, "provides", NULL)) != NULL)
		parse_provides(c, &m, v);
	check_claims(c, &c->vars, 1);
	check_claims(c, &c->resources, 0);
	if (c->sys != 0)
		return;
	if (c->set->n == c->set->cap) {
		size_t cap = c->set->cap ? c->set->cap * 2 : 4;
		struct tl_mf_module *p;

		if (cap > SIZE_MAX / sizeof *p ||
		    (p = realloc(c->set->v, cap * sizeof *p)) == NULL) {
			c->sys = ENOMEM;
			return;
		}
		c->set->v = p;
		c->set->cap = cap;
	}
	c->set->v[c->set->n++] = m;
}

static void
check_module_names(struct ctx *c)
{
	char q[QUOTE];
	size_t i, first;

	if (c->nnames < 2)
		return;
	qsort(c->names, c->nnames, sizeof *c->names, cmp_modname);
	for (first = 0, i = 1; i < c->nnames; i++) {
		if (strcmp(c->names[i].name, c->names[first].name) != 0) {
			first = i;
			continue;
		}
		err_at(c, c->names[i].line, c->names[i].col, "module",
		    "module %s is already declared at line %d",
		    quote(q, sizeof q, c->names[i].name),
		    c->names[first].line);
	}
}

/* Stable, so that problems on one line keep the order they were found in. */
static void
sort_errors(struct tl_mf_error *v, size_t n)
{
	struct tl_mf_error t;
	size_t i, j;

	for (i = 1; i < n; i++) {
		t = v[i];
		for (j = i; j > 0 && (v[j - 1].line > t.line ||
		    (v[j - 1].line == t.line && v[j - 1].col > t.col)); j--)
			v[j] = v[j - 1];
		v[j] = t;
	}
}

/* ---- public ---- */

int
tl_mf_parse_buffer(const char *name, const void *buf, size_t len,
    const char *base_dir, const char *const *drivers, struct tl_mf_set **out,
    struct tl_mf_errors *errs)
{
	struct ctx c;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (name == NULL || out == NULL || (buf == NULL && len > 0))
		return TL_EINVAL;
	if (len > TL_MF_MAX_SIZE)
		return TL_ETOOBIG;
	memset(&c, 0, sizeof c);
	c.name = name;
	c.base_dir = base_dir;
	c.drivers = drivers;
	c.errs = errs;
	c.start = errs != NULL ? errs->n : 0;
	c.set = calloc(1, sizeof *c.set);
	if (c.set == NULL) {
		rc = ENOMEM;
		goto out;
	}
	c.file = sdup(&c, name);
	if (c.file == NULL) {
		rc = c.sys;
		goto out_set;
	}
	load(&c, buf != NULL ? buf : (const void *)"", len);
	if (c.sys == 0)
		check_module_names(&c);
	if (c.sys == 0 && c.nerr == 0 && c.ndocs == 0)
		err_at(&c, 1, 1, "", "no module here: a manifest holds one or "
		    "more documents with module: NAME");
	if (errs != NULL && errs->n > c.start)
		sort_errors(errs->v + c.start, errs->n - c.start);
	if (c.sys != 0) {
		rc = c.sys;
		goto out_set;
	}
	if (c.nerr != 0) {
		rc = TL_EMANIFEST;
		goto out_set;
	}
	qsort(c.set->v, c.set->n, sizeof *c.set->v, cmp_module);
	*out = c.set;
	c.set = NULL;
	rc = 0;
out_set:
	tl_mf_set_free(c.set);
out:
	free(c.names);
	free(c.vars.v);
	free(c.resources.v);
	free(c.base_abs);
	blk_free(&c.tree);
	return rc;
}

int
tl_mf_parse_file(const char *path, const char *const *drivers,
    struct tl_mf_set **out, struct tl_mf_errors *errs)
{
	FILE *f;
	char *buf = NULL, *dir = NULL, *p;
	size_t len = 0, cap = 0, got;
	const char *slash;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (path == NULL || out == NULL)
		return TL_EINVAL;
	f = fopen(path, "rb");
	if (f == NULL)
		return errno;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 8192;
			/* one byte over the limit tells "too big" from "full" */
			if (cap > TL_MF_MAX_SIZE + 1)
				cap = TL_MF_MAX_SIZE + 1;
			if ((p = realloc(buf, cap)) == NULL) {
				rc = ENOMEM;
				goto out_buf;
			}
			buf = p;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0 || len > TL_MF_MAX_SIZE)
			break;
	}
	if (ferror(f)) {
		rc = errno != 0 ? errno : EIO;
		goto out_buf;
	}
	if (len > TL_MF_MAX_SIZE) {
		rc = TL_ETOOBIG;
		goto out_buf;
	}
	slash = strrchr(path, '/');
	if (slash == NULL)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else if ((dir = malloc((size_t)(slash - path) + 1)) != NULL) {
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
	}
	if (dir == NULL) {
		rc = ENOMEM;
		goto out_buf;
	}
	rc = tl_mf_parse_buffer(path, buf, len, dir, drivers, out, errs);
	free(dir);
out_buf:
	free(buf);
	fclose(f);
	return rc;
}

void
tl_mf_set_free(struct tl_mf_set *set)
{
	if (set == NULL)
		return;
	blk_free(&set->mem);
	free(set->v);
	free(set);
}

size_t
tl_mf_set_count(const struct tl_mf_set *set)
{
	return set != NULL ? set->n : 0;
}

const struct tl_mf_module *
tl_mf_set_module(const struct tl_mf_set *set, size_t i)
{
	return set != NULL && i < set->n ? &set->v[i] : NULL;
}

const struct tl_mf_module *
tl_mf_set_find(const struct tl_mf_set *set, const char *name)
{
	if (set == NULL || name == NULL || set->n == 0)
		return NULL;
	return bsearch(name, set->v, set->n, sizeof *set->v, cmp_name_key);
}

const struct tl_mf_req *
tl_mf_module_req(const struct tl_mf_module *m, const char *name)
{
	if (m == NULL || name == NULL || m->nreqs == 0)
		return NULL;
	return bsearch(name, m->reqs, m->nreqs, sizeof *m->reqs, cmp_name_key);
}

static int
streq(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static int
maps_equal(const struct tl_mf_map *a, size_t na, const struct tl_mf_map *b,
    size_t nb)
{
	size_t i;

	if (na != nb)
		return 0;
	for (i = 0; i < na; i++)
		if (!streq(a[i].field, b[i].field) || !streq(a[i].var, b[i].var))
			return 0;
	return 1;
}

int
tl_mf_req_equal(const struct tl_mf_req *a, const struct tl_mf_req *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return streq(a->name, b->name) && a->kind == b->kind &&
	    streq(a->target, b->target) && streq(a->type, b->type) &&
	    a->scope == b->scope && streq(a->provider_node, b->provider_node) &&
	    streq(a->provider_module, b->provider_module) &&
	    streq(a->resource, b->resource) &&
	    maps_equal(a->env, a->nenv, b->env, b->nenv) &&
	    streq(a->migrations, b->migrations) &&
	    a->max_credential_age == b->max_credential_age;
}

int
tl_mf_module_equal(const struct tl_mf_module *a, const struct tl_mf_module *b)
{
	size_t i;

	if (a == NULL || b == NULL)
		return a == b;
	if (!streq(a->name, b->name) || a->nenv != b->nenv ||
	    a->nreqs != b->nreqs || a->nprovides != b->nprovides ||
	    a->nembedded != b->nembedded)
		return 0;
	for (i = 0; i < a->nenv; i++)
		if (!streq(a->env[i].name, b->env[i].name) ||
		    !streq(a->env[i].def, b->env[i].def))
			return 0;
	for (i = 0; i < a->nreqs; i++)
		if (!tl_mf_req_equal(&a->reqs[i], &b->reqs[i]))
			return 0;
	for (i = 0; i < a->nprovides; i++) {
		const struct tl_mf_provide *x = &a->provides[i];
		const struct tl_mf_provide *y = &b->provides[i];

		if (!streq(x->type, y->type) || !streq(x->driver, y->driver) ||
		    x->revoke != y->revoke ||
		    x->max_credential_age != y->max_credential_age)
			return 0;
	}
	for (i = 0; i < a->nembedded; i++) {
		const struct tl_mf_embedded *x = &a->embedded[i];
		const struct tl_mf_embedded *y = &b->embedded[i];

		if (!streq(x->name, y->name) || !streq(x->type, y->type) ||
		    !streq(x->runs, y->runs) ||
		    !maps_equal(x->env, x->nenv, y->env, y->nenv))
			return 0;
	}
	return 1;
}

const char *
tl_mf_kind_name(enum tl_mf_kind kind)
{
	switch (kind) {
	case TL_MF_PRESENCE:
		return "presence";
	case TL_MF_INSTANTIATION:
		return "instantiation";
	}
	return "unknown";
}

const char *
tl_mf_scope_name(enum tl_mf_scope scope)
{
	switch (scope) {
	case TL_MF_SHARED:
		return "shared";
	case TL_MF_PER_INSTANCE:
		return "per-instance";
	}
	return "unknown";
}

const char *
tl_mf_revoke_name(enum tl_mf_revoke revoke)
{
	switch (revoke) {
	case TL_MF_RETAIN:
		return "retain";
	case TL_MF_DROP:
		return "drop";
	}
	return "unknown";
}

int
tl_mf_error_format(const struct tl_mf_error *e, char *buf, size_t size)
{
	if (e == NULL || (buf == NULL && size > 0))
		return TL_EINVAL;
	if (e->field[0] != '\0')
		return snprintf(buf, size, "%s:%d:%d: %s: %s", e->file, e->line,
		    e->col, e->field, e->msg);
	return snprintf(buf, size, "%s:%d:%d: %s", e->file, e->line, e->col,
	    e->msg);
}

void
tl_mf_errors_free(struct tl_mf_errors *errs)
{
	if (errs == NULL)
		return;
	free(errs->v);
	errs->v = NULL;
	errs->n = errs->cap = errs->dropped = 0;
}
