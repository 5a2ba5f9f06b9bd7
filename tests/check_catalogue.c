/*
 * check_catalogue.c - the event catalogue (projections/catalogue.c) and
 * the rule that a string a fold keeps is never cut or emptied.
 *
 * Two kinds of test.  The source tests read the tree ($TALLY_SRC, else
 * the current directory): every TL_EV_ constant the code names is in the
 * catalogue, every type the catalogue gives a fold is named by that
 * fold's source (its macro, or its family's prefix), and a type no fold
 * takes says why.
 * The behaviour tests run a decider and the folds on a real log: a
 * value too long for the field a fold keeps it in is refused by the
 * decider (with the limit in the reason) and, appended past the
 * decider, makes the fold fail with TL_ETOOBIG instead of storing "".
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/body.h"
#include "core/error.h"
#include "core/log.h"
#include "projections/catalogue.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "projections/proj.h"
#include "tests/lib/tl_test.h"

static struct {
	char		*home;
	char		*logdir;
	struct tl_log	*log;
} G;

static void
setup(void)
{
	memset(&G, 0, sizeof(G));
	G.home = tl_test_tmpdir("catalogue");
	G.logdir = tl_test_path(G.home, "log");
	ck_assert_int_eq(mkdir(G.logdir, 0700), 0);
	ck_assert_int_eq(tl_log_open_opts(G.logdir, &(struct tl_log_opts){
	    .flags = TL_LOG_CREATE | TL_LOG_NOSYNC, .mapsize = 64u << 20 },
	    &G.log), 0);
}

static void
teardown(void)
{
	tl_log_close(G.log);
	free(G.logdir);
	tl_test_tmpdir_done(G.home);
	memset(&G, 0, sizeof(G));
}

/* The whole of a file of the tree, NUL-terminated; NULL if absent. */
static char *
slurp(const char *rel)
{
	const char *src = getenv("TALLY_SRC");
	char path[2048];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/%s", src ? src : ".", rel);
	if ((f = fopen(path, "r")) == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Is word (an identifier) in text, as a whole identifier? */
static int
has_ident(const char *text, const char *word)
{
	const char *p = text;
	size_t n = strlen(word);

	while ((p = strstr(p, word)) != NULL) {
		int before = p > text && (isalnum((unsigned char)p[-1]) ||
		    p[-1] == '_');
		int after = isalnum((unsigned char)p[n]) || p[n] == '_';

		if (!before && !after)
			return 1;
		p += n;
	}
	return 0;
}

/* The files that name event types: every .c and .h of these. */
static const char *const code_dirs[] = {
	"core", "projections", "reactors", "tools/tally", "tools/tallyd",
	"tools/tally-node", "drivers"
};

#include <dirent.h>

typedef void (*file_fn)(const char *rel, const char *text, void *arg);

static void
each_file(file_fn fn, void *arg)
{
	const char *src = getenv("TALLY_SRC");
	size_t i, seen = 0;

	for (i = 0; i < sizeof(code_dirs) / sizeof(code_dirs[0]); i++) {
		char dir[2048], rel[2048];
		struct dirent *e;
		DIR *d;

		snprintf(dir, sizeof(dir), "%s/%s", src ? src : ".",
		    code_dirs[i]);
		if ((d = opendir(dir)) == NULL)
			continue;
		while ((e = readdir(d)) != NULL) {
			size_t n = strlen(e->d_name);
			char *text;

			if (n < 3 || (strcmp(e->d_name + n - 2, ".c") != 0 &&
			    strcmp(e->d_name + n - 2, ".h") != 0))
				continue;
			snprintf(rel, sizeof(rel), "%s/%s", code_dirs[i],
			    e->d_name);
			if ((text = slurp(rel)) == NULL)
				continue;
			fn(rel, text, arg);
			free(text);
			seen++;
		}
		closedir(d);
	}
	/* A wrong TALLY_SRC must not pass by finding nothing. */
	ck_assert_uint_gt(seen, 20);
}

struct ident_arg {
	unsigned	 named;
	unsigned	 missing;
};

/* Every TL_EV_ identifier of a file must be a catalogued type. */
static void
check_idents(const char *rel, const char *text, void *arg)
{
	struct ident_arg *ia = arg;
	const char *p = text;

	while ((p = strstr(p, "TL_EV_")) != NULL) {
		char id[64];
		size_t n = 0;

		if (p > text && (isalnum((unsigned char)p[-1]) ||
		    p[-1] == '_')) {
			p += 6;
			continue;
		}
		while ((isupper((unsigned char)p[n]) || p[n] == '_' ||
		    isdigit((unsigned char)p[n])) && n + 1 < sizeof(id)) {
			id[n] = p[n];
			n++;
		}
		id[n] = '\0';
		p += n;
		ia->named++;
		if (tl_cat_by_macro(id) == NULL) {
			fprintf(stderr, "%s: %s is not in projections/"
			    "catalogue.c\n", rel, id);
			ia->missing++;
		}
	}
}

/*
 * A type spelled out as a literal in an append ("node.added" inside a
 * tl_emit/tl_emit_bytes/tl_append call, up to its ';') must be
 * catalogued too.
 */
static void
check_literals(const char *rel, const char *text, void *arg)
{
	static const char *const calls[] = {
		"tl_emit(", "tl_emit_bytes(", "tl_append("
	};
	struct ident_arg *ia = arg;
	size_t c;

	for (c = 0; c < 3; c++) {
		const char *p = text;

		while ((p = strstr(p, calls[c])) != NULL) {
			const char *end = strchr(p, ';'), *q = p;

			if (end == NULL)
				break;
			while ((q = memchr(q, '"', (size_t)(end - q))) != NULL) {
				const char *close = memchr(q + 1, '"',
				    (size_t)(end - q - 1));
				char lit[64];
				size_t n, k;
				int dot = 0, shape = 1;

				if (close == NULL)
					break;
				n = (size_t)(close - q - 1);
				for (k = 0; k < n; k++) {
					char ch = q[1 + k];

					if (ch == '.')
						dot = 1;
					else if (!islower((unsigned char)ch) &&
					    ch != '-')
						shape = 0;
				}
				if (shape && dot && n < sizeof(lit)) {
					memcpy(lit, q + 1, n);
					lit[n] = '\0';
					ia->named++;
					if (tl_cat_find(lit) == NULL) {
						fprintf(stderr, "%s: type \"%s\" "
						    "is not in projections/"
						    "catalogue.c\n", rel, lit);
						ia->missing++;
					}
				}
				q = close + 1;
			}
			p = end;
		}
	}
}

START_TEST(test_every_named_type_catalogued)
{
	struct ident_arg ia = { 0, 0 };

	each_file(check_idents, &ia);
	ck_assert_uint_gt(ia.named, 50);
	ck_assert_uint_eq(ia.missing, 0);
	each_file(check_literals, &ia);
	ck_assert_uint_eq(ia.missing, 0);
}
END_TEST

/*
 * Whether name is a word of some entry's body ("grant", "cut_off" in
 * "cut_off[]", "times" in "settings{KEY:{from times ...}}").
 */
static int
catalogued_field(const char *name)
{
	size_t i, n = strlen(name);

	for (i = 0; i < tl_cat_count(); i++) {
		const char *b = tl_cat_at(i)->body, *p = b;

		while ((p = strstr(p, name)) != NULL) {
			int before = p == b || !(islower((unsigned char)p[-1]) ||
			    p[-1] == '_' || p[-1] == '-');
			int after = !(islower((unsigned char)p[n]) ||
			    isdigit((unsigned char)p[n]) || p[n] == '_' ||
			    p[n] == '-');

			if (before && after)
				return 1;
			p += n;
		}
	}
	return 0;
}

/*
 * core/fields.h names event body fields once: each of its constants is
 * a field of some catalogued type, spelt as the constant's name says.
 */
START_TEST(test_fields_catalogued)
{
	char *text = slurp("core/fields.h"), *p;
	unsigned n = 0, missing = 0;

	ck_assert_ptr_nonnull(text);
	for (p = text; (p = strstr(p, "#define TL_F_")) != NULL; p++) {
		char cname[64], field[64];
		size_t k;

		if (sscanf(p, "#define %63s \"%63[^\"]\"", cname, field) != 2)
			continue;
		n++;
		for (k = 0; field[k] != '\0'; k++)
			ck_assert_msg(cname[5 + k] == (field[k] == '-' ||
			    field[k] == '.' ? '_' : toupper((unsigned char)
			    field[k])), "%s does not spell \"%s\"", cname, field);
		ck_assert_msg(cname[5 + k] == '\0', "%s does not spell \"%s\"",
		    cname, field);
		if (!catalogued_field(field)) {
			fprintf(stderr, "core/fields.h: %s (\"%s\") is no "
			    "field of any type in projections/catalogue.c\n",
			    cname, field);
			missing++;
		}
	}
	free(text);
	ck_assert_uint_gt(n, 100);
	ck_assert_uint_eq(missing, 0);
}
END_TEST

/* The catalogue's entries: types unique, every fold's source names them. */
START_TEST(test_folds_take_what_catalogue_says)
{
	static const struct { unsigned bit; const char *file; } folds[] = {
		{ TL_FOLD_GRAPH, "projections/graph.c" },
		{ TL_FOLD_GRANTS, "projections/grants.c" },
		{ TL_FOLD_ROTATION, "projections/rotation.c" },
		{ TL_FOLD_REBIND, "projections/rebind.c" },
		{ TL_FOLD_CERTS, "projections/certs.c" },
	};
	char *text[5];
	size_t i, j, k, n = tl_cat_count();
	unsigned bad = 0;

	for (i = 0; i < 5; i++) {
		text[i] = slurp(folds[i].file);
		ck_assert_ptr_nonnull(text[i]);
	}
	ck_assert_uint_gt(n, 50);
	for (i = 0; i < n; i++) {
		const struct tl_cat_event *e = tl_cat_at(i);
		char prefix[64], quoted[96];
		const char *dot = strchr(e->type, '.');

		ck_assert_ptr_nonnull(dot);
		/* A fold may take a family by its prefix ("binding."). */
		snprintf(prefix, sizeof(prefix), "\"%.*s\"",
		    (int)(dot - e->type + 1), e->type);
		/* Or by its name in full ("grant.provisioning"). */
		snprintf(quoted, sizeof(quoted), "\"%s\"", e->type);
		for (k = 0; k < i; k++)
			ck_assert_str_ne(tl_cat_at(k)->type, e->type);
		if (e->folds == 0 && (e->ignored == NULL ||
		    e->ignored[0] == '\0')) {
			fprintf(stderr, "%s: no fold and no reason it is "
			    "ignored\n", e->type);
			bad++;
		}
		for (j = 0; j < 5; j++) {
			int named = has_ident(text[j], e->macro) ||
			    strstr(text[j], prefix) != NULL ||
			    strstr(text[j], quoted) != NULL;

			if ((e->folds & folds[j].bit) && !named) {
				fprintf(stderr, "%s: catalogue says %s folds "
				    "it; it does not name it\n", e->type,
				    folds[j].file);
				bad++;
			}
			/*
			 * And the other way: proj.c gives an event only to
			 * the folds its entry names, so a fold that names a
			 * type it is not given would silently miss it.
			 */
			if (!(e->folds & folds[j].bit) && named) {
				fprintf(stderr, "%s: %s names it; the catalogue "
				    "does not give it that fold\n", e->type,
				    folds[j].file);
				bad++;
			}
		}
	}
	for (i = 0; i < 5; i++)
		free(text[i]);
	ck_assert_uint_eq(bad, 0);
}
END_TEST

/* A grant.requested body for m/db whose resource is resource. */
static void
grant_body(struct tl_body *b, const char *resource)
{
	tl_body_init(b);
	tl_body_str(b, "grant", "m/db");
	tl_body_str(b, "module", "m");
	tl_body_str(b, "req", "db");
	tl_body_str(b, "scope", "shared");
	tl_body_str(b, "type", "t");
	tl_body_str(b, "provider", "n/p");
	tl_body_str(b, "resource", resource);
}

/* Appends type with body b, bypassing every decider, and folds it. */
struct raw {
	const char	*type;
	const char	*stream;
	struct tl_body	*b;
	int		 fold_rc;
};

static int
raw_cb(struct tl_txn *t, void *arg)
{
	struct raw *r = arg;
	struct tl_append a = { 0 };
	struct tl_event ev;
	struct tl_proj p;
	const void *body;
	size_t len;
	uint64_t seq;
	int rc;

	if ((rc = tl_body_finish(r->b, &body, &len)) != 0)
		return rc;
	a.type = r->type;
	a.stream = r->stream;
	a.expect = TL_VER_ANY;
	a.actor = "test";
	a.body = body;
	a.body_len = len;
	if ((rc = tl_proj_open(t, &p)) != 0 ||
	    (rc = tl_append(t, &a, &seq, NULL)) != 0 ||
	    (rc = tl_log_get(t, seq, &ev)) != 0)
		return rc;
	r->fold_rc = tl_proj_apply(t, &p, &ev);
	return 0;
}

/*
 * A grant.requested whose resource does not fit the grant's 63 bytes,
 * appended past the deciders (an old or foreign writer): the fold used
 * to keep the grant with resource "" and say nothing.
 */
START_TEST(test_fold_refuses_overlong)
{
	struct tl_body b;
	struct raw r = { TL_EV_GRANT_REQUESTED, "grant/m/db", &b, 0 };
	char longres[101];

	memset(longres, 'r', 100);
	longres[100] = '\0';
	grant_body(&b, longres);
	ck_assert_int_eq(tl_log_write(G.log, raw_cb, &r), 0);
	tl_body_free(&b);
	ck_assert_int_eq(r.fold_rc, TL_ETOOBIG);

	/* The same event with a resource that fits folds as before. */
	grant_body(&b, "fits");
	r.fold_rc = -1;
	ck_assert_int_eq(tl_log_write(G.log, raw_cb, &r), 0);
	tl_body_free(&b);
	ck_assert_int_eq(r.fold_rc, 0);
}
END_TEST

/* n events no fold takes, then (when bad) an overlong grant.requested. */
struct noise {
	int		 n;
	int		 bad;
	uint64_t	 bad_seq;
};

static int
noise_cb(struct tl_txn *t, void *arg)
{
	struct noise *nz = arg;
	struct tl_append a = { 0 };
	struct tl_body b;
	const void *body;
	char longres[101];
	size_t len;
	uint64_t seq;
	int i, rc = 0;

	a.expect = TL_VER_ANY;
	a.actor = "test";
	for (i = 0; rc == 0 && i < nz->n; i++) {
		tl_body_init(&b);
		tl_body_u64(&b, "i", (uint64_t)i);
		a.type = "test.noise";
		a.stream = "test/noise";
		if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
			a.body = body;
			a.body_len = len;
			rc = tl_append(t, &a, &seq, NULL);
		}
		tl_body_free(&b);
	}
	if (rc != 0 || !nz->bad)
		return rc;
	memset(longres, 'r', 100);
	longres[100] = '\0';
	grant_body(&b, longres);
	a.type = TL_EV_GRANT_REQUESTED;
	a.stream = "grant/m/db";
	if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
		a.body = body;
		a.body_len = len;
		rc = tl_append(t, &a, &nz->bad_seq, NULL);
	}
	tl_body_free(&b);
	return rc;
}

/*
 * The same refusal when a rebuild folds a long range on two threads
 * (the reader holds each event to the catalogue there): the rebuild
 * stops at the overlong event, names it, and keeps nothing past it.
 */
START_TEST(test_rebuild_refuses_overlong)
{
	struct noise nz = { 6000, 1, 0 }, after = { 3000, 0, 0 };
	struct tl_txn *t;
	uint64_t count = 0, bad = 0, ck = 0;

	ck_assert_int_eq(tl_log_write(G.log, noise_cb, &nz), 0);
	ck_assert_int_eq(tl_log_write(G.log, noise_cb, &after), 0);
	ck_assert_uint_gt(nz.bad_seq, 4096);
	ck_assert_int_eq(tl_proj_rebuild_log(G.log, 0, &count, &bad),
	    TL_ETOOBIG);
	ck_assert_uint_eq(bad, nz.bad_seq);
	ck_assert_uint_lt(count, nz.bad_seq);
	ck_assert_int_eq(tl_log_begin(G.log, TL_TXN_RDONLY, &t), 0);
	if (tl_ckpt_get(t, TL_PROJ_CKPT, &ck) == TL_ENOTFOUND)
		ck = 0;
	tl_log_abort(t);
	ck_assert_uint_lt(ck, nz.bad_seq);
	/* In steps that end before it, everything before it is folded. */
	ck_assert_int_eq(tl_proj_rebuild_log(G.log, 5000, &count, &bad),
	    TL_ETOOBIG);
	ck_assert_uint_eq(bad, nz.bad_seq);
	ck_assert_uint_eq(count, 5000);
}
END_TEST

struct node_cmd {
	const char	*name;
	const char	*routable;
	char		 why[2 * TL_WHY_MAX];
};

static int
node_cb(struct tl_txn *t, void *arg)
{
	struct node_cmd *nc = arg;
	struct tl_ctx c;
	uint8_t pk[32] = { 1 };
	int rc;

	if ((rc = tl_ctx_begin(&c, t, "test")) != 0)
		return rc;
	rc = tl_dec_node_add(&c, nc->name, nc->routable, pk, NULL, NULL);
	snprintf(nc->why, sizeof(nc->why), "%s", c.why);
	if (rc != 0)
		return rc;
	return tl_ctx_end(&c);
}

/*
 * A routable name longer than the 255 bytes every reader keeps it in
 * (a provider's address, the host a consumer is given) is refused when
 * the node is added, naming the field and the limit; nothing is
 * appended.  It used to be recorded, and read back as "".
 */
START_TEST(test_decider_refuses_overlong)
{
	struct node_cmd nc = { "node-a", NULL, "" };
	char routable[301];
	struct tl_txn *t;
	uint64_t last = 99;

	memset(routable, 'h', 300);
	routable[300] = '\0';
	nc.routable = routable;
	ck_assert_int_eq(tl_log_write(G.log, node_cb, &nc), TL_ETOOBIG);
	ck_assert_msg(strstr(nc.why, "routable") != NULL &&
	    strstr(nc.why, "255") != NULL, "reason: %s", nc.why);
	ck_assert_int_eq(tl_log_begin(G.log, TL_TXN_RDONLY, &t), 0);
	ck_assert_int_eq(tl_log_last(t, &last, NULL), 0);
	tl_log_abort(t);
	ck_assert_uint_eq(last, 0);

	nc.routable = "node-a.example";
	ck_assert_int_eq(tl_log_write(G.log, node_cb, &nc), 0);
}
END_TEST

/* tally apply's command: module m with one requirement named req. */
struct apply_cmd {
	const char	*req;
	int		 rc;
	char		 why[2 * TL_WHY_MAX];
};

static int
apply_cb(struct tl_txn *t, void *arg)
{
	struct apply_cmd *ac = arg;
	struct tl_body mb, rb;
	struct tl_decl_req dr;
	struct tl_decl d;
	struct tl_ctx c;
	int rc;

	memset(&dr, 0, sizeof(dr));
	memset(&d, 0, sizeof(d));
	tl_body_init(&mb);
	tl_body_str(&mb, "name", "m");
	tl_body_str(&mb, "digest", "");
	tl_body_map(&mb, "env");
	tl_body_end(&mb);
	tl_body_arr(&mb, "provides");
	tl_body_end(&mb);
	tl_body_arr(&mb, "embedded");
	tl_body_end(&mb);
	tl_body_init(&rb);
	tl_body_str(&rb, "module", "m");
	tl_body_str(&rb, "name", ac->req);
	tl_body_str(&rb, "kind", "instantiation");
	tl_body_str(&rb, "target", "");
	tl_body_str(&rb, "type", "t");
	tl_body_str(&rb, "scope", "shared");
	tl_body_str(&rb, "provider", "");
	tl_body_str(&rb, "resource", "res");
	tl_body_map(&rb, "env");
	tl_body_end(&rb);
	tl_body_str(&rb, "migrations", "");
	tl_body_u64(&rb, "max_age", 0);
	if ((rc = tl_body_finish(&mb, &d.body, &d.len)) != 0 ||
	    (rc = tl_body_finish(&rb, &dr.body, &dr.len)) != 0)
		goto out;
	d.name = "m";
	d.file = dr.file = "m.yaml";
	d.line = 1;
	dr.name = ac->req;
	dr.line = 3;
	d.reqs = &dr;
	d.nreqs = 1;
	if ((rc = tl_ctx_begin(&c, t, "test")) != 0)
		goto out;
	rc = tl_dec_apply(&c, &d);
	snprintf(ac->why, sizeof(ac->why), "%s", c.why);
	if (rc == 0)
		rc = tl_ctx_end(&c);
out:
	tl_body_free(&rb);
	tl_body_free(&mb);
	ac->rc = rc;
	return rc;
}

/*
 * A requirement name longer than the 63 bytes the graph and the grants
 * keep it in is refused when the module is declared, the reason naming
 * the field and the limit; nothing is appended.  One that fits is
 * declared.
 */
START_TEST(test_decider_refuses_long_requirement)
{
	struct apply_cmd ac;
	char req[71];
	struct tl_txn *t;
	uint64_t last = 99;

	memset(req, 'q', 70);
	req[70] = '\0';
	memset(&ac, 0, sizeof(ac));
	ac.req = req;
	ck_assert_int_ne(tl_log_write(G.log, apply_cb, &ac), 0);
	ck_assert_int_eq(ac.rc, TL_ETOOBIG);
	ck_assert_msg(strstr(ac.why, TL_EV_REQ_DECLARED) != NULL &&
	    strstr(ac.why, "name is 70 bytes") != NULL &&
	    strstr(ac.why, "limit is 63") != NULL, "reason: %s", ac.why);
	ck_assert_int_eq(tl_log_begin(G.log, TL_TXN_RDONLY, &t), 0);
	ck_assert_int_eq(tl_log_last(t, &last, NULL), 0);
	tl_log_abort(t);
	ck_assert_uint_eq(last, 0);

	req[63] = '\0';
	memset(&ac, 0, sizeof(ac));
	ac.req = req;
	ck_assert_int_eq(tl_log_write(G.log, apply_cb, &ac), 0);
}
END_TEST

/* Folds body as type with one fold directly, past tl_proj_apply. */
struct direct {
	const char	*type;
	struct tl_body	*b;
	int		(*fold)(struct tl_txn *, const struct tl_proj *,
			    const struct tl_event *, struct tl_bnode);
	int		 fold_rc;
	struct tl_grant	 g;
	int		 get_rc;
};

static int
direct_cb(struct tl_txn *t, void *arg)
{
	struct direct *d = arg;
	struct tl_event ev;
	struct tl_bview v;
	struct tl_proj p;
	const void *body;
	size_t len;
	int rc;

	if ((rc = tl_body_finish(d->b, &body, &len)) != 0 ||
	    (rc = tl_proj_open(t, &p)) != 0 ||
	    (rc = tl_bview_open(&v, body, len)) != 0)
		return rc;
	memset(&ev, 0, sizeof(ev));
	ev.seq = 1;
	snprintf(ev.type, sizeof(ev.type), "%s", d->type);
	snprintf(ev.stream, sizeof(ev.stream), "grant/m/db");
	d->fold_rc = d->fold(t, &p, &ev, v.root);
	tl_bview_close(&v);
	d->get_rc = tl_grant_get(t, &p, "m/db", &d->g, NULL);
	return TL_EINVAL;	/* a look, never committed */
}

/*
 * The folds themselves never keep a cut or emptied string, whoever
 * calls them: tl_proj_apply checks the catalogue's limits first, but a
 * fold given a value too long for its field (here grant.requested's
 * module, 100 bytes for 63) fails with TL_ETOOBIG.  It used to fold
 * the grant with module "".
 */
START_TEST(test_fold_itself_refuses_overlong)
{
	struct tl_body b;
	struct direct d;
	char longmod[101];

	memset(longmod, 'm', 100);
	longmod[100] = '\0';
	tl_body_init(&b);
	tl_body_str(&b, "grant", "m/db");
	tl_body_str(&b, "module", longmod);
	tl_body_str(&b, "req", "db");
	tl_body_str(&b, "scope", "shared");
	tl_body_str(&b, "type", "t");
	tl_body_str(&b, "provider", "n/p");
	tl_body_str(&b, "resource", "r");
	memset(&d, 0, sizeof(d));
	d.type = TL_EV_GRANT_REQUESTED;
	d.b = &b;
	d.fold = tl_fold_grants;
	ck_assert_int_eq(tl_log_write(G.log, direct_cb, &d), TL_EINVAL);
	ck_assert_msg(d.fold_rc == TL_ETOOBIG, "fold: %d (%s); module kept: "
	    "\"%s\"", d.fold_rc, tl_strerror(d.fold_rc),
	    d.get_rc == 0 ? d.g.module : "(no grant)");
	tl_body_free(&b);

	/* The same with a module that fits folds as before. */
	tl_body_init(&b);
	tl_body_str(&b, "grant", "m/db");
	tl_body_str(&b, "module", "m");
	tl_body_str(&b, "req", "db");
	tl_body_str(&b, "scope", "shared");
	tl_body_str(&b, "type", "t");
	tl_body_str(&b, "provider", "n/p");
	tl_body_str(&b, "resource", "r");
	memset(&d, 0, sizeof(d));
	d.type = TL_EV_GRANT_REQUESTED;
	d.b = &b;
	d.fold = tl_fold_grants;
	ck_assert_int_eq(tl_log_write(G.log, direct_cb, &d), TL_EINVAL);
	ck_assert_int_eq(d.fold_rc, 0);
	ck_assert_int_eq(d.get_rc, 0);
	ck_assert_str_eq(d.g.module, "m");
	tl_body_free(&b);
}
END_TEST

/* The limits reach into maps and arrays of a body too. */
START_TEST(test_limits_nested)
{
	const struct tl_cat_event *e = tl_cat_find(TL_EV_PROVIDER_REGISTERED);
	struct tl_body b;
	struct tl_bview v;
	const void *body;
	const char *field = NULL;
	size_t len, max = 0, got = 0;
	char longtype[101];

	memset(longtype, 't', 100);
	longtype[100] = '\0';
	ck_assert_ptr_nonnull(e);
	tl_body_init(&b);
	tl_body_str(&b, "id", "node-a/pg");
	tl_body_str(&b, "module", "pg");
	tl_body_str(&b, "node", "node-a");
	tl_body_arr(&b, "types");
	tl_body_map(&b, NULL);
	tl_body_str(&b, "type", "fits");
	tl_body_end(&b);
	tl_body_map(&b, NULL);
	tl_body_str(&b, "type", longtype);
	tl_body_end(&b);
	tl_body_end(&b);
	ck_assert_int_eq(tl_body_finish(&b, &body, &len), 0);
	ck_assert_int_eq(tl_bview_open(&v, body, len), 0);
	ck_assert_int_eq(tl_cat_check(e, v.root, &field, &max, &got),
	    TL_ETOOBIG);
	ck_assert_str_eq(field, "types[].type");
	ck_assert_uint_eq(max, 63);
	ck_assert_uint_eq(got, 100);
	tl_bview_close(&v);
	tl_body_free(&b);
}
END_TEST

/* An unknown type cannot be emitted: the catalogue is the list. */
START_TEST(test_emit_unknown_type_refused)
{
	ck_assert_ptr_null(tl_cat_find("node.renamed"));
	ck_assert_ptr_nonnull(tl_cat_find(TL_EV_NODE_ADDED));
	ck_assert_str_eq(tl_cat_find(TL_EV_NODE_ADDED)->stream, "node");
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("catalogue");
	TCase *tc = tcase_create("source");

	tcase_add_test(tc, test_every_named_type_catalogued);
	tcase_add_test(tc, test_fields_catalogued);
	tcase_add_test(tc, test_folds_take_what_catalogue_says);
	tcase_add_test(tc, test_emit_unknown_type_refused);
	tcase_add_test(tc, test_limits_nested);
	suite_add_tcase(s, tc);
	tc = tcase_create("strings");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_fold_refuses_overlong);
	tcase_add_test(tc, test_rebuild_refuses_overlong);
	tcase_add_test(tc, test_decider_refuses_overlong);
	tcase_add_test(tc, test_decider_refuses_long_requirement);
	tcase_add_test(tc, test_fold_itself_refuses_overlong);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
