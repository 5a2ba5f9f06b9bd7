/*
 * check_manifest.c - Check suite for tools/tally/manifest.c.
 *
 * Fixtures are found relative to the top of the tree: the current
 * directory, or $TALLY_SRC when set (as make check does), unless
 * TL_MF_TESTDATA and TL_MF_EXAMPLES point elsewhere at build time.
 * CK_RUN_CASE=validation runs one case; CK_FORK=no for a debugger.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <sys/resource.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "tools/tally/manifest.h"

#ifndef TL_MF_TESTDATA
#define TL_MF_TESTDATA	"tests/data/manifests"
#endif
#ifndef TL_MF_EXAMPLES
#define TL_MF_EXAMPLES	"examples"
#endif

#ifdef TL_MF_STANDALONE
/* Only for building this suite without core; the real build links core. */
const char *
tl_strerror(int err)
{
	(void)err;
	return "tl_strerror stub";
}
#endif

static const char *const drivers[] = {
	"postgres", "amqp-vhost", "directory", NULL
};

/* One parse per test; the fixture frees it so a failed assertion leaks nothing. */
static struct {
	int	rc;
	struct tl_mf_set *set;
	struct tl_mf_errors errs;
	char	dump[16384];
} P;

static void
setup(void)
{
	memset(&P, 0, sizeof P);
}

static void
teardown(void)
{
	tl_mf_set_free(P.set);
	tl_mf_errors_free(&P.errs);
	memset(&P, 0, sizeof P);
}

static void
dump_errors(void)
{
	size_t i, pos = 0;

	P.dump[0] = '\0';
	for (i = 0; i < P.errs.n && pos < sizeof P.dump; i++) {
		char line[800];

		tl_mf_error_format(&P.errs.v[i], line, sizeof line);
		pos += (size_t)snprintf(P.dump + pos, sizeof P.dump - pos,
		    "  %s\n", line);
	}
}

static int
parse_text(const char *text)
{
	tl_mf_set_free(P.set);
	P.set = NULL;
	P.rc = tl_mf_parse_buffer("test.yaml", text, strlen(text),
	    "/srv/game", drivers, &P.set, &P.errs);
	dump_errors();
	return P.rc;
}

static int
parse_path(const char *path)
{
	tl_mf_set_free(P.set);
	P.set = NULL;
	P.rc = tl_mf_parse_file(path, drivers, &P.set, &P.errs);
	dump_errors();
	return P.rc;
}

/* field "x*" matches a prefix; line 0 matches any line. */
static int
has_error(int line, const char *field, const char *needle)
{
	size_t i, fl = strlen(field);
	int prefix = fl > 0 && field[fl - 1] == '*';

	for (i = 0; i < P.errs.n; i++) {
		const struct tl_mf_error *e = &P.errs.v[i];

		if (line != 0 && e->line != line)
			continue;
		if (prefix ? strncmp(e->field, field, fl - 1) != 0 :
		    strcmp(e->field, field) != 0)
			continue;
		if (strstr(e->msg, needle) != NULL)
			return 1;
	}
	return 0;
}

#define ck_assert_error(line, field, needle) \
	ck_assert_msg(has_error((line), (field), (needle)), \
	    "expected an error at line %d, field '%s', saying '%s'; " \
	    "rc %d, errors:\n%s", (line), (field), (needle), P.rc, P.dump)

#define ck_assert_parsed() \
	ck_assert_msg(P.rc == 0 && P.set != NULL, \
	    "expected a clean parse, rc %d, errors:\n%s", P.rc, P.dump)

/* Parse text, expect exactly one problem, at line and field, saying needle. */
#define ck_assert_only_error(text, line, field, needle) do { \
	parse_text(text); \
	ck_assert_int_eq(P.rc, TL_EMANIFEST); \
	ck_assert_ptr_null(P.set); \
	ck_assert_error((line), (field), (needle)); \
	ck_assert_msg(P.errs.n == 1, "expected one error, got %zu:\n%s", \
	    P.errs.n, P.dump); \
	tl_mf_errors_free(&P.errs); \
} while (0)

static char *
cwd_join(const char *rel)
{
	static char buf[8192];
	char cwd[4096];

	ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
	snprintf(buf, sizeof buf, "%s/%s", cwd, rel);
	return buf;
}

static char *
read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_ge(n, 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* ---- the examples parse into the expected structs ---- */

static void
check_game(const struct tl_mf_module *m)
{
	static const char *const vars[] = {
		"DB_HOST", "DB_NAME", "DB_PASSWORD", "DB_PORT", "DB_USER",
		"LOG_LEVEL"
	};
	static const char *const fields[][2] = {
		{ "database", "DB_NAME" }, { "host", "DB_HOST" },
		{ "password", "DB_PASSWORD" }, { "port", "DB_PORT" },
		{ "user", "DB_USER" }
	};
	const struct tl_mf_req *db, *term;
	size_t i;

	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(m->name, "my-cool-game");
	ck_assert_uint_eq(m->nenv, 6);
	for (i = 0; i < 6; i++)
		ck_assert_str_eq(m->env[i].name, vars[i]);
	ck_assert_str_eq(m->env[0].def, "");
	ck_assert_str_eq(m->env[5].def, "info");
	ck_assert_uint_eq(m->nreqs, 2);
	db = &m->reqs[0];
	term = &m->reqs[1];
	ck_assert_ptr_eq(tl_mf_module_req(m, "db"), db);
	ck_assert_ptr_eq(tl_mf_module_req(m, "terminal"), term);
	ck_assert_ptr_null(tl_mf_module_req(m, "nope"));

	ck_assert_str_eq(db->name, "db");
	ck_assert_int_eq(db->kind, TL_MF_INSTANTIATION);
	ck_assert_str_eq(db->target, "postgres");
	ck_assert_str_eq(db->type, "postgres-database");
	ck_assert_int_eq(db->scope, TL_MF_SHARED);
	ck_assert_str_eq(db->provider_node, "node-b");
	ck_assert_str_eq(db->provider_module, "postgres");
	ck_assert_str_eq(db->resource, "my-cool-game");
	ck_assert_uint_eq(db->nenv, 5);
	for (i = 0; i < 5; i++) {
		ck_assert_str_eq(db->env[i].field, fields[i][0]);
		ck_assert_str_eq(db->env[i].var, fields[i][1]);
	}
	/* Absolute, relative to whichever manifest or buffer it came from. */
	ck_assert_ptr_nonnull(db->migrations);
	ck_assert(db->migrations[0] == '/');
	ck_assert(strlen(db->migrations) > 14 && strcmp(db->migrations +
	    strlen(db->migrations) - 14, "/migrations/db") == 0);
	ck_assert_int_eq(db->max_credential_age, 30 * 86400);

	ck_assert_str_eq(term->name, "terminal");
	ck_assert_int_eq(term->kind, TL_MF_PRESENCE);
	ck_assert_str_eq(term->target, "terminal");
	ck_assert_ptr_null(term->type);
	ck_assert_ptr_null(term->resource);
	ck_assert_ptr_null(term->migrations);
	ck_assert_ptr_null(term->provider_node);
	ck_assert_uint_eq(term->nenv, 0);
	ck_assert_int_eq(term->max_credential_age, 0);

	ck_assert_uint_eq(m->nprovides, 0);
	ck_assert_uint_eq(m->nembedded, 0);
}

static void
check_postgres(const struct tl_mf_module *m)
{
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(m->name, "postgres");
	ck_assert_uint_eq(m->nenv, 0);
	ck_assert_uint_eq(m->nreqs, 0);
	ck_assert_uint_eq(m->nembedded, 0);
	ck_assert_uint_eq(m->nprovides, 1);
	ck_assert_str_eq(m->provides[0].type, "postgres-database");
	ck_assert_str_eq(m->provides[0].driver, "postgres");
	ck_assert_int_eq(m->provides[0].revoke, TL_MF_RETAIN);
	ck_assert_int_eq(m->provides[0].max_credential_age, 90 * 86400);
}

static void
check_vector(const struct tl_mf_module *m)
{
	const struct tl_mf_embedded *e;

	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(m->name, "vector-search");
	ck_assert_uint_eq(m->nenv, 1);
	ck_assert_str_eq(m->env[0].name, "VEC_PASSWORD");
	ck_assert_uint_eq(m->nreqs, 0);
	ck_assert_uint_eq(m->nprovides, 0);
	ck_assert_uint_eq(m->nembedded, 1);
	e = &m->embedded[0];
	ck_assert_str_eq(e->name, "vectors");
	ck_assert_str_eq(e->type, "postgres-database");
	ck_assert_str_eq(e->runs, "pgvector/pgvector:pg16");
	ck_assert_uint_eq(e->nenv, 1);
	ck_assert_str_eq(e->env[0].field, "password");
	ck_assert_str_eq(e->env[0].var, "VEC_PASSWORD");
}

START_TEST(test_example_game)
{
	/* The example, kept as a fixture: the demo's is simpler. */
	parse_path(TL_MF_TESTDATA "/seed-my-cool-game.yaml");
	ck_assert_parsed();
	ck_assert_uint_eq(tl_mf_set_count(P.set), 1);
	check_game(tl_mf_set_module(P.set, 0));
	ck_assert_str_eq(tl_mf_set_module(P.set, 0)->file,
	    TL_MF_TESTDATA "/seed-my-cool-game.yaml");
	ck_assert_int_eq(tl_mf_set_module(P.set, 0)->line, 3);
	ck_assert_int_eq(tl_mf_set_module(P.set, 0)->reqs[0].line, 22);
}
END_TEST

START_TEST(test_example_postgres)
{
	parse_path(TL_MF_EXAMPLES "/postgres.yaml");
	ck_assert_parsed();
	ck_assert_uint_eq(tl_mf_set_count(P.set), 1);
	check_postgres(tl_mf_set_find(P.set, "postgres"));
}
END_TEST

START_TEST(test_example_vector)
{
	parse_path(TL_MF_EXAMPLES "/vector-search.yaml");
	ck_assert_parsed();
	ck_assert_uint_eq(tl_mf_set_count(P.set), 1);
	check_vector(tl_mf_set_find(P.set, "vector-search"));
}
END_TEST

/* The three examples as documents of one buffer: same structs, sorted. */
START_TEST(test_examples_one_buffer)
{
	static const char *const files[] = {
		TL_MF_EXAMPLES "/vector-search.yaml",
		TL_MF_TESTDATA "/seed-my-cool-game.yaml",
		TL_MF_EXAMPLES "/postgres.yaml"
	};
	char *all = NULL, path[512];
	size_t len = 0, i;

	for (i = 0; i < 3; i++) {
		size_t n;
		char *b, *p;

		snprintf(path, sizeof path, "%s", files[i]);
		b = read_all(path, &n);
		p = realloc(all, len + n + 8);
		ck_assert_ptr_nonnull(p);
		all = p;
		memcpy(all + len, "---\n", 4);
		memcpy(all + len + 4, b, n);
		len += n + 4;
		free(b);
	}
	P.rc = tl_mf_parse_buffer("all.yaml", all, len, TL_MF_EXAMPLES,
	    drivers, &P.set, &P.errs);
	free(all);
	dump_errors();
	ck_assert_parsed();
	ck_assert_uint_eq(tl_mf_set_count(P.set), 3);
	check_game(tl_mf_set_module(P.set, 0));
	check_postgres(tl_mf_set_module(P.set, 1));
	check_vector(tl_mf_set_module(P.set, 2));
	ck_assert_ptr_null(tl_mf_set_module(P.set, 3));
	ck_assert_str_eq(tl_mf_set_module(P.set, 2)->file, "all.yaml");
}
END_TEST

/* ---- files ---- */

START_TEST(test_key_order)
{
	struct tl_mf_set *a = NULL, *b = NULL;
	const struct tl_mf_module *ga, *gb;
	size_t i;

	ck_assert_int_eq(tl_mf_parse_file(TL_MF_TESTDATA "/order-a.yaml",
	    drivers, &a, &P.errs), 0);
	ck_assert_int_eq(tl_mf_parse_file(TL_MF_TESTDATA "/order-b.yaml",
	    drivers, &b, &P.errs), 0);
	ck_assert_uint_eq(tl_mf_set_count(a), 2);
	ck_assert_uint_eq(tl_mf_set_count(b), 2);
	for (i = 0; i < 2; i++)
		ck_assert_msg(tl_mf_module_equal(tl_mf_set_module(a, i),
		    tl_mf_set_module(b, i)), "module %zu differs", i);
	ga = tl_mf_set_find(a, "my-cool-game");
	gb = tl_mf_set_find(b, "my-cool-game");
	ck_assert_int_ne(ga->line, gb->line);	/* lines are not content */
	ck_assert(tl_mf_req_equal(tl_mf_module_req(ga, "db"),
	    tl_mf_module_req(gb, "db")));
	ck_assert(!tl_mf_req_equal(tl_mf_module_req(ga, "db"),
	    tl_mf_module_req(gb, "terminal")));
	ck_assert(!tl_mf_module_equal(ga, tl_mf_set_find(b, "postgres")));
	ck_assert_str_eq(tl_mf_module_req(ga, "db")->migrations,
	    cwd_join(TL_MF_TESTDATA "/migrations/db"));
	ck_assert_int_eq(tl_mf_module_req(ga, "db")->scope,
	    TL_MF_PER_INSTANCE);
	ck_assert_str_eq(tl_mf_set_find(a, "postgres")->provides[0].type,
	    "amqp-vhost");
	ck_assert_int_eq(tl_mf_set_find(a, "postgres")->provides[1].revoke,
	    TL_MF_DROP);
	ck_assert(tl_mf_module_equal(NULL, NULL));
	ck_assert(!tl_mf_module_equal(ga, NULL));
	ck_assert(!tl_mf_req_equal(NULL, tl_mf_module_req(ga, "db")));
	tl_mf_set_free(a);
	tl_mf_set_free(b);
}
END_TEST

START_TEST(test_content_change_detected)
{
	struct tl_mf_set *a = NULL, *b = NULL;
	const char *x = "module: m\nenv: {A: \"\"}\nrequires:\n"
	    "  r: {type: t, from: p, env: {host: A}}\n";
	const char *y = "module: m\nenv: {A: \"\"}\nrequires:\n"
	    "  r: {type: t, from: p, env: {url: A}}\n";

	ck_assert_int_eq(tl_mf_parse_buffer("x", x, strlen(x), "/", drivers,
	    &a, NULL), 0);
	ck_assert_int_eq(tl_mf_parse_buffer("y", y, strlen(y), "/", drivers,
	    &b, NULL), 0);
	ck_assert(!tl_mf_module_equal(tl_mf_set_module(a, 0),
	    tl_mf_set_module(b, 0)));
	ck_assert(!tl_mf_req_equal(&tl_mf_set_module(a, 0)->reqs[0],
	    &tl_mf_set_module(b, 0)->reqs[0]));
	tl_mf_set_free(a);
	tl_mf_set_free(b);
}
END_TEST

START_TEST(test_multi_docs)
{
	const struct tl_mf_module *m;
	const char *path = TL_MF_TESTDATA "/multi.yaml";

	parse_path(path);
	ck_assert_parsed();
	ck_assert_uint_eq(tl_mf_set_count(P.set), 3);
	m = tl_mf_set_module(P.set, 0);
	ck_assert_str_eq(m->name, "my-cool-game");
	ck_assert_int_eq(m->line, 14);
	ck_assert_str_eq(m->file, path);
	ck_assert_str_eq(m->reqs[0].resource, "my-cool-game-db");
	ck_assert_str_eq(m->reqs[0].migrations,
	    cwd_join(TL_MF_TESTDATA "/db/migrations"));
	m = tl_mf_set_module(P.set, 1);
	ck_assert_str_eq(m->name, "postgres");
	ck_assert_int_eq(m->line, 9);
	m = tl_mf_set_module(P.set, 2);
	ck_assert_str_eq(m->name, "vector-search");
	ck_assert_int_eq(m->line, 2);
	ck_assert_ptr_null(m->embedded[0].runs);
	ck_assert_ptr_null(tl_mf_set_find(P.set, "absent"));
}
END_TEST

START_TEST(test_missing_file)
{
	parse_path(TL_MF_TESTDATA "/does-not-exist.yaml");
	ck_assert_int_eq(P.rc, ENOENT);
	ck_assert_ptr_null(P.set);
	ck_assert_uint_eq(P.errs.n, 0);
}
END_TEST

START_TEST(test_directory)
{
	parse_path(TL_MF_TESTDATA);
	ck_assert_int_eq(P.rc, EISDIR);
	ck_assert_ptr_null(P.set);
}
END_TEST

START_TEST(test_empty_file)
{
	parse_path(TL_MF_TESTDATA "/empty.yaml");
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_ptr_null(P.set);
	ck_assert_error(1, "", "no module");
	tl_mf_errors_free(&P.errs);

	parse_path(TL_MF_TESTDATA "/comments-only.yaml");
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_error(1, "", "no module");
	tl_mf_errors_free(&P.errs);

	P.rc = tl_mf_parse_buffer("nothing", NULL, 0, NULL, drivers, &P.set,
	    &P.errs);
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_uint_eq(P.errs.n, 1);

	/* only empty documents is the same as none */
	tl_mf_errors_free(&P.errs);
	parse_text("---\n---\n");
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_error(1, "", "no module");
}
END_TEST

START_TEST(test_syntax_error)
{
	parse_path(TL_MF_TESTDATA "/syntax-error.yaml");
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_ptr_null(P.set);
	ck_assert_uint_eq(P.errs.n, 1);
	ck_assert_int_eq(P.errs.v[0].line, 7);
	ck_assert_msg(strstr(P.errs.v[0].msg, "invalid YAML") != NULL, "%s",
	    P.dump);
	ck_assert_str_eq(P.errs.v[0].file, TL_MF_TESTDATA "/syntax-error.yaml");
}
END_TEST

/*
 * A tab where the indentation is: libyaml's "cannot start any token"
 * says nothing to a first user; the manifest says what it is, with its
 * line (issue 21, item 28).  A tab inside a quoted value is a value.
 */
START_TEST(test_tab_indent)
{
	parse_text("module: app\n"
	    "requires:\n"
	    "  db:\n"
	    "\ttype: postgres-database\n");
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_error(4, "*", "tabs are not allowed in YAML indentation");
	ck_assert_msg(strstr(P.dump, "cannot start any token") == NULL, "%s",
	    P.dump);
	tl_mf_errors_free(&P.errs);
	parse_text("module: app\n"
	    "env:\n"
	    "  \tNOTE: \"\"\n");
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_error(3, "*", "tabs are not allowed in YAML indentation");
	tl_mf_errors_free(&P.errs);
	parse_text("module: app\n"
	    "env: {NOTE: \"a\tb\"}\n");
	ck_assert_msg(P.rc == 0, "%s", P.dump);
}
END_TEST

/* Documents before a syntax error are still checked. */
START_TEST(test_syntax_error_late)
{
	parse_text("module: Bad\n"
	    "---\n"
	    "module: [\n");
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_error(1, "module", "not a valid module name");
	ck_assert_error(4, "module", "invalid YAML");
	ck_assert_uint_eq(P.errs.n, 2);
}
END_TEST

START_TEST(test_not_utf8)
{
	parse_text("module: g\xff\n");
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_error(1, "", "UTF-8");
}
END_TEST

/* ---- validation, one rule per test ---- */

START_TEST(test_unknown_keys)
{
	ck_assert_only_error("module: g\n"
	    "colour: blue\n", 2, "colour", "unknown key 'colour'");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: t\n"
	    "    from: p\n"
	    "    sope: shared\n", 6, "requires.db.sope",
	    "allowed here: presence, type, from, scope");
	ck_assert_only_error("module: g\n"
	    "provides:\n"
	    "  t:\n"
	    "    driver: postgres\n"
	    "    revocation: drop\n", 5, "provides.t.revocation",
	    "unknown key 'revocation'");
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  v:\n"
	    "    type: t\n"
	    "    network: private\n", 5, "embedded.v.network",
	    "unknown key 'network'");
}
END_TEST

START_TEST(test_wrong_kinds)
{
	ck_assert_only_error("- module: g\n", 1, "",
	    "a manifest document is a mapping");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  - db\n", 3, "requires", "expected a mapping of requirement "
	    "names to requirements, found a list");
	ck_assert_only_error("module: g\n"
	    "env: [A, B]\n", 2, "env", "found a list");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: postgres\n", 3, "requires.db",
	    "expected a mapping with presence: MODULE, or type: and from:, "
	    "found a string");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db:\n", 3, "requires.db", "found nothing");
	ck_assert_only_error("module: {name: g}\n", 1, "module",
	    "expected a string, found a mapping");
	ck_assert_only_error("module: g\n"
	    "env: {A: \"\"}\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: t\n"
	    "    from: p\n"
	    "    env: {host: [A]}\n", 7, "requires.db.env.host",
	    "expected a string, found a list");
	ck_assert_only_error("module: g\n"
	    "env: {A: {x: 1}}\n", 2, "env.A", "expected a default value");
	ck_assert_only_error("module: g\n"
	    "provides:\n"
	    "  t: postgres\n", 3, "provides.t",
	    "expected a mapping with driver:");
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  v: [a]\n", 3, "embedded.v", "expected a mapping with type:");
	ck_assert_only_error("module: g\n"
	    "[a]: b\n", 2, "", "a key must be a string, found a list");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  ~: {presence: x}\n", 3, "requires", "empty or null");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {presence: ~}\n", 3, "requires.db.presence",
	    "has no value");
}
END_TEST

START_TEST(test_duplicate_keys)
{
	ck_assert_only_error("module: g\n"
	    "env: {}\n"
	    "module: h\n", 3, "module", "duplicate key 'module' (first at "
	    "line 1)");
	ck_assert_only_error("module: g\n"
	    "env:\n"
	    "  A: \"\"\n"
	    "  A: x\n", 4, "env.A", "duplicate key 'A' (first at line 3)");
	/* duplicate requirement names are duplicate keys */
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {presence: a}\n"
	    "  cache: {presence: b}\n"
	    "  db: {presence: c}\n", 5, "requires.db",
	    "duplicate key 'db' (first at line 3)");
	ck_assert_only_error("module: g\n"
	    "env: {A: \"\", B: \"\"}\n"
	    "requires:\n"
	    "  db: {type: t, from: p, env: {host: A, host: B}}\n", 4,
	    "requires.db.env.host", "duplicate key 'host'");
}
END_TEST

START_TEST(test_missing_module)
{
	ck_assert_only_error("env: {A: \"\"}\n", 1, "module",
	    "missing module");
	/* the second document is the one without */
	ck_assert_only_error("module: a\n"
	    "---\n"
	    "env: {}\n", 3, "module", "missing module");
}
END_TEST

START_TEST(test_names)
{
	char text[256];

	ck_assert_only_error("module: My-Game\n", 1, "module",
	    "'My-Game' is not a valid module name");
	ck_assert_only_error("module: -game\n", 1, "module",
	    "not starting or ending with '-'");
	ck_assert_only_error("module: game-\n", 1, "module",
	    "not a valid module name");
	ck_assert_only_error("module: my_game\n", 1, "module",
	    "not a valid module name");
	ck_assert_only_error("module: \"\"\n", 1, "module",
	    "'' is not a valid module name");
	ck_assert_only_error("module: g\xc3\xa4me\n", 1, "module",
	    "'g\xc3\xa4me' is not");
	snprintf(text, sizeof text, "module: %.64s\n",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	ck_assert_only_error(text, 1, "module", "64 characters long, the "
	    "limit is 63");
	snprintf(text, sizeof text, "module: %.63s\n",
	    "a-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	parse_text(text);
	ck_assert_parsed();

	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  Db: {presence: x}\n", 3, "requires.Db",
	    "not a valid requirement name");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {presence: X}\n", 3, "requires.db.presence",
	    "'X' is not a valid module name");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {type: Postgres, from: p}\n", 3, "requires.db.type",
	    "not a valid resource type");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: p., name: x}\n", 3, "requires.db.from",
	    "not a valid module name");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: p, name: My_DB}\n", 3, "requires.db.name",
	    "not a valid resource name");
	ck_assert_only_error("module: g\n"
	    "provides:\n"
	    "  PG: {driver: postgres}\n", 3, "provides.PG",
	    "not a valid resource type");
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  Vec: {type: t}\n", 3, "embedded.Vec",
	    "not a valid embedded instance name");
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  vec: {type: -t}\n", 3, "embedded.vec.type",
	    "not a valid resource type");
}
END_TEST

START_TEST(test_provider)
{
	parse_text("module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: postgres, provider: node-b/postgres}\n");
	ck_assert_parsed();
	ck_assert_str_eq(tl_mf_set_module(P.set, 0)->reqs[0].provider_node,
	    "node-b");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: postgres, provider: node-b}\n", 3,
	    "requires.db.provider", "'node-b' is not NODE/MODULE");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: postgres, provider: a/b/postgres}\n", 3,
	    "requires.db.provider", "not NODE/MODULE");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: postgres, provider: Node_B/postgres}\n",
	    3, "requires.db.provider", "'Node_B' is not a valid node name");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: postgres, provider: node-b/}\n", 3,
	    "requires.db.provider", "'' is not a valid module name");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: postgres, provider: node-b/mysql}\n", 3,
	    "requires.db.provider", "names the module 'mysql' but from: is "
	    "'postgres'");
}
END_TEST

START_TEST(test_env_names)
{
	parse_text("module: g\n"
	    "env: {_X: \"\", A1_B: \"\"}\n");
	ck_assert_parsed();
	ck_assert_only_error("module: g\n"
	    "env:\n"
	    "  db_host: \"\"\n", 3, "env.db_host",
	    "'db_host' is not a valid variable name");
	ck_assert_only_error("module: g\n"
	    "env:\n"
	    "  1DB: \"\"\n", 3, "env.1DB", "not starting with a digit");
	/* a mapping's target follows the same rule */
	ck_assert_only_error("module: g\n"
	    "env: {DB: \"\"}\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: t\n"
	    "    from: p\n"
	    "    env: {host: db}\n", 7, "requires.db.env.host",
	    "'db' is not a valid variable name");
}
END_TEST

START_TEST(test_env_defaults)
{
	const struct tl_mf_module *m;

	parse_text("module: g\n"
	    "env:\n"
	    "  A: \"\"\n"
	    "  B:\n"
	    "  C: ~\n"
	    "  D: 5432\n"
	    "  E: \"null\"\n"
	    "  F: text with spaces\n");
	ck_assert_parsed();
	m = tl_mf_set_module(P.set, 0);
	ck_assert_uint_eq(m->nenv, 6);
	ck_assert_str_eq(m->env[0].def, "");
	ck_assert_str_eq(m->env[1].def, "");
	ck_assert_str_eq(m->env[2].def, "");
	ck_assert_str_eq(m->env[3].def, "5432");
	ck_assert_str_eq(m->env[4].def, "null");
	ck_assert_str_eq(m->env[5].def, "text with spaces");
	ck_assert_int_eq(m->env[5].line, 8);
}
END_TEST

/*
 * A driver's params (decl.h): the keys the type's driver declares, a
 * YAML sequence joined by newlines, sorted by name, compared by
 * tl_mf_req_equal; the driver's rules, and the keys on a type whose
 * driver takes none, refused with the line and field.
 */
START_TEST(test_requirement_params)
{
	static const char *const text = "module: web\n"
	    "requires:\n"
	    "  login:\n"
	    "    type: oidc-client\n"
	    "    from: idp\n"
	    "    redirect-uris: [https://w.example/cb, 'http://127.0.0.1:9/cb']\n"
	    "    grant-types: [authorization_code]\n"
	    "    token-endpoint-auth-method: client_secret_post\n";
	const struct tl_mf_req *r;
	struct tl_mf_set *first;

	parse_text(text);
	ck_assert_parsed();
	r = &tl_mf_set_module(P.set, 0)->reqs[0];
	ck_assert_ptr_nonnull(r->params);
	ck_assert_str_eq(r->params[0], "grant-types");
	ck_assert_str_eq(r->params[1], "authorization_code");
	ck_assert_str_eq(r->params[2], "redirect-uris");
	ck_assert_str_eq(r->params[3],
	    "https://w.example/cb\nhttp://127.0.0.1:9/cb");
	ck_assert_str_eq(r->params[4], "token-endpoint-auth-method");
	ck_assert_str_eq(r->params[5], "client_secret_post");
	ck_assert_ptr_null(r->params[6]);
	/* A changed list is a changed requirement. */
	first = P.set;
	P.set = NULL;
	parse_text("module: web\n"
	    "requires:\n"
	    "  login:\n"
	    "    type: oidc-client\n"
	    "    from: idp\n"
	    "    redirect-uris: [https://w.example/cb]\n"
	    "    grant-types: [authorization_code]\n"
	    "    token-endpoint-auth-method: client_secret_post\n");
	ck_assert_parsed();
	ck_assert(!tl_mf_req_equal(&tl_mf_set_module(first, 0)->reqs[0],
	    &tl_mf_set_module(P.set, 0)->reqs[0]));
	tl_mf_set_free(P.set);
	P.set = NULL;
	parse_text(text);
	ck_assert(tl_mf_req_equal(&tl_mf_set_module(first, 0)->reqs[0],
	    &tl_mf_set_module(P.set, 0)->reqs[0]));
	tl_mf_set_free(first);
	ck_assert_only_error("module: web\n"
	    "requires:\n"
	    "  login:\n"
	    "    type: oidc-client\n"
	    "    from: idp\n"
	    "    redirect-uris: [https://w.example/cb]\n", 6,
	    "requires.login.redirect-uris",
	    "redirect-uris serves only the authorization_code grant");
	ck_assert_only_error("module: web\n"
	    "requires:\n"
	    "  login:\n"
	    "    type: oidc-client\n"
	    "    from: idp\n"
	    "    grant-types: [authorization_code]\n"
	    "    redirect-uris: [http://w.example/cb]\n", 7,
	    "requires.login.redirect-uris", "is http to a host that is not "
	    "loopback");
	ck_assert_only_error("module: web\n"
	    "requires:\n"
	    "  login:\n"
	    "    type: oidc-client\n"
	    "    from: idp\n"
	    "    token-endpoint-auth-method: [client_secret_post]\n", 6,
	    "requires.login.token-endpoint-auth-method", "takes one value");
	ck_assert_only_error("module: web\n"
	    "requires:\n"
	    "  login:\n"
	    "    type: oidc-client\n"
	    "    from: idp\n"
	    "    grant-types: []\n", 6, "requires.login.grant-types",
	    "an empty list");
	ck_assert_only_error("module: web\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: postgres-database\n"
	    "    from: pg\n"
	    "    redirect-uris: [https://w.example/cb]\n", 6,
	    "requires.db.redirect-uris", "unknown key");
}
END_TEST

START_TEST(test_requirement_shape)
{
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db:\n"
	    "    from: p\n", 3, "requires.db.type", "missing type");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: t\n", 3, "requires.db.from", "missing from");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db:\n"
	    "    presence: p\n"
	    "    type: t\n", 5, "requires.db.type",
	    "either presence (presence:) or instantiation");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db:\n"
	    "    from: p\n"
	    "    presence: p\n", 4, "requires.db.from", "not both");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db:\n"
	    "    presence: p\n"
	    "    scope: shared\n", 5, "requires.db.scope",
	    "scope applies only to an instantiation requirement");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db:\n"
	    "    presence: p\n"
	    "    max-credential-age: 1d\n", 5,
	    "requires.db.max-credential-age", "applies only");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db: {}\n", 3, "requires.db",
	    "needs presence: MODULE, or type: and from:");
}
END_TEST

START_TEST(test_scope_revoke)
{
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: t\n"
	    "    from: p\n"
	    "    scope: global\n", 6, "requires.db.scope",
	    "scope must be shared or per-instance, not 'global'");
	ck_assert_only_error("module: g\n"
	    "provides:\n"
	    "  t:\n"
	    "    driver: postgres\n"
	    "    revoke: burn\n", 5, "provides.t.revoke",
	    "revoke must be retain or drop, not 'burn'");
}
END_TEST

/* instances: the three values, any by default, equal only when equal. */
START_TEST(test_instances)
{
	struct tl_mf_set *mesh;
	const struct tl_mf_module *m;

	ck_assert_only_error("module: g\n"
	    "instances: two-per-rack\n", 2, "instances",
	    "instances must be one-per-mesh, one-per-node or any, not "
	    "'two-per-rack'");
	ck_assert_int_eq(parse_text("module: g\n"), 0);
	ck_assert_parsed();
	ck_assert_int_eq(tl_mf_set_module(P.set, 0)->instances, TL_MF_ANY);
	ck_assert_int_eq(parse_text("module: g\ninstances: one-per-mesh\n"),
	    0);
	ck_assert_parsed();
	mesh = P.set;
	P.set = NULL;
	ck_assert_int_eq(tl_mf_set_module(mesh, 0)->instances, TL_MF_ONE_PER_MESH);
	ck_assert_int_eq(parse_text("module: g\ninstances: one-per-node\n"),
	    0);
	ck_assert_parsed();
	m = tl_mf_set_module(P.set, 0);
	ck_assert_int_eq(m->instances, TL_MF_ONE_PER_NODE);
	ck_assert(!tl_mf_module_equal(m, tl_mf_set_module(mesh, 0)));
	tl_mf_set_free(mesh);
	ck_assert_int_eq(parse_text("module: g\ninstances: any\n"), 0);
	ck_assert_parsed();
	ck_assert_int_eq(tl_mf_set_module(P.set, 0)->instances, TL_MF_ANY);
	ck_assert_str_eq(tl_mf_instances_name(TL_MF_ONE_PER_NODE),
	    "one-per-node");
}
END_TEST

/* parts: sorted, once each; part: names one; equal only when equal. */
START_TEST(test_parts)
{
	struct tl_mf_set *a;
	const struct tl_mf_module *m;
	static const char text[] = "module: g\n"
	    "parts: [worker, web]\n"
	    "requires:\n"
	    "  jobs:\n"
	    "    type: t\n"
	    "    from: p\n"
	    "    part: worker\n"
	    "  db:\n"
	    "    type: t\n"
	    "    from: p\n";

	ck_assert_only_error("module: g\nparts: web\n", 2, "parts",
	    "expected a list of part names (parts: [web, worker]), found a "
	    "string");
	ck_assert_only_error("module: g\nparts: [web, web]\n", 2, "parts",
	    "part 'web' is listed twice");
	ck_assert_only_error("module: g\n"
	    "parts: [web]\n"
	    "requires:\n"
	    "  jobs:\n"
	    "    presence: q\n"
	    "    part: cron\n", 6, "requires.jobs.part",
	    "'cron' is not one of the module's parts (declare it under "
	    "parts:, or leave part: out for a requirement of every part)");
	ck_assert_int_eq(parse_text(text), 0);
	ck_assert_parsed();
	a = P.set;
	P.set = NULL;
	m = tl_mf_set_module(a, 0);
	ck_assert_uint_eq(m->nparts, 2);
	ck_assert_str_eq(m->parts[0], "web");
	ck_assert_str_eq(m->parts[1], "worker");
	ck_assert_ptr_null(tl_mf_module_req(m, "db")->part);
	ck_assert_str_eq(tl_mf_module_req(m, "jobs")->part, "worker");
	ck_assert_int_eq(parse_text("module: g\n"
	    "parts: [web, worker]\n"
	    "requires:\n"
	    "  db: {type: t, from: p}\n"
	    "  jobs: {type: t, from: p, part: worker}\n"), 0);
	ck_assert_parsed();
	ck_assert(tl_mf_module_equal(m, tl_mf_set_module(P.set, 0)));
	ck_assert_int_eq(parse_text("module: g\n"
	    "parts: [web, worker]\n"
	    "requires:\n"
	    "  db: {type: t, from: p}\n"
	    "  jobs: {type: t, from: p, part: web}\n"), 0);
	ck_assert_parsed();
	ck_assert(!tl_mf_module_equal(m, tl_mf_set_module(P.set, 0)));
	tl_mf_set_free(a);
}
END_TEST

/* provides: TYPE: settings: derived from the node, structure only. */
START_TEST(test_derived_settings)
{
	const struct tl_mf_derived *d;

	ck_assert_only_error("module: g\n"
	    "provides:\n"
	    "  t:\n"
	    "    driver: postgres\n"
	    "    settings:\n"
	    "      sb: {from-node: swap}\n", 6,
	    "provides.t.settings.sb.from-node",
	    "'swap' is not in a node's inventory; it has memory, cpus, disk");
	ck_assert_only_error("module: g\n"
	    "provides:\n"
	    "  t:\n"
	    "    driver: postgres\n"
	    "    settings:\n"
	    "      n: {from-node: cpus, unit: MB}\n", 6,
	    "provides.t.settings.n.unit", "cpus is a count: it has no unit");
	ck_assert_only_error("module: g\n"
	    "provides:\n"
	    "  t:\n"
	    "    driver: postgres\n"
	    "    settings:\n"
	    "      sb: {from-node: memory, min: 1XB}\n", 6,
	    "provides.t.settings.sb.min",
	    "'1XB' is not a size (a number and B, KB, MB, GB or TB: 128MB)");
	ck_assert_int_eq(parse_text("module: g\n"
	    "provides:\n"
	    "  t:\n"
	    "    driver: postgres\n"
	    "    settings:\n"
	    "      shared_buffers: {from-node: memory, times: 0.25, unit: MB, "
	    "min: 128MB}\n"
	    "      io: {from-node: cpus, max: 16}\n"), 0);
	ck_assert_parsed();
	ck_assert_uint_eq(tl_mf_set_module(P.set, 0)->provides[0].nderived, 2);
	d = tl_mf_set_module(P.set, 0)->provides[0].derived;
	ck_assert_str_eq(d[0].key, "io");
	ck_assert_str_eq(d[0].times, "1");
	ck_assert_str_eq(d[0].unit, "");
	ck_assert_uint_eq(d[0].max, 16);
	ck_assert_str_eq(d[1].key, "shared_buffers");
	ck_assert_str_eq(d[1].times, "0.25");
	ck_assert_str_eq(d[1].unit, "MB");
	ck_assert_uint_eq(d[1].min, 128ULL << 20);
}
END_TEST

START_TEST(test_undeclared_variable)
{
	/* the as-is system dropped this value without a word */
	ck_assert_only_error("module: g\n"
	    "env:\n"
	    "  DB_HOST: \"\"\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: postgres-database\n"
	    "    from: postgres\n"
	    "    env:\n"
	    "      host: DB_HOST\n"
	    "      password: DB_PASSWORD\n", 10, "requires.db.env.password",
	    "field 'password' is mapped to DB_PASSWORD, which the module "
	    "does not declare under env:");
	/* declared after use is declared: the order of keys does not matter */
	parse_text("module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: p, env: {password: PW}}\n"
	    "env: {PW: \"\"}\n");
	ck_assert_parsed();
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  v: {type: t, env: {password: PW}}\n", 3,
	    "embedded.v.env.password", "PW, which the module does not "
	    "declare");
}
END_TEST

START_TEST(test_credential)
{
	/* A driver that cannot map a certificate to a login: its reason. */
	ck_assert_only_error("module: g\n"
	    "env: {U: \"\"}\n"
	    "requires:\n"
	    "  cache:\n"
	    "    type: redis-user\n"
	    "    from: p\n"
	    "    credential: certificate\n"
	    "    env: {uri: U}\n", 7, "requires.cache.credential",
	    "type redis-user has no certificate logins: Redis 7 cannot map");
	ck_assert_only_error("module: g\n"
	    "env: {U: \"\"}\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: postgres-database\n"
	    "    from: p\n"
	    "    credential: token\n"
	    "    env: {user: U}\n", 7, "requires.db.credential",
	    "the credential is password (the driver's own) or certificate");
}
END_TEST

/* access: and of: (a login below ownership). */
START_TEST(test_access)
{
	const struct tl_mf_req *r;

	ck_assert_int_eq(parse_text("module: g\n"
	    "env: {U: \"\"}\n"
	    "requires:\n"
	    "  games:\n"
	    "    type: postgres-database\n"
	    "    from: p\n"
	    "    access: read-write\n"
	    "    of: game/db@node-a\n"
	    "    env: {user: U}\n"), 0);
	r = &tl_mf_set_module(P.set, 0)->reqs[0];
	ck_assert_str_eq(r->access, "read-write");
	ck_assert_str_eq(r->of, "game/db@node-a");
	ck_assert_only_error("module: g\n"
	    "env: {U: \"\"}\n"
	    "requires:\n"
	    "  games:\n"
	    "    type: postgres-database\n"
	    "    from: p\n"
	    "    of: game/db\n"
	    "    env: {user: U}\n", 7, "requires.games.access",
	    "access: and of: go together");
	ck_assert_only_error("module: g\n"
	    "env: {U: \"\"}\n"
	    "requires:\n"
	    "  games:\n"
	    "    type: postgres-database\n"
	    "    from: p\n"
	    "    access: read\n"
	    "    of: game\n"
	    "    env: {user: U}\n", 8, "requires.games.of",
	    "of is MODULE/REQUIREMENT");
	/* A driver that cannot: its reason. */
	ck_assert_only_error("module: g\n"
	    "env: {U: \"\"}\n"
	    "requires:\n"
	    "  files:\n"
	    "    type: directory\n"
	    "    from: p\n"
	    "    access: read\n"
	    "    of: game/files\n"
	    "    env: {path: U}\n", 7, "requires.files.of",
	    "cannot give a login access below ownership");
}
END_TEST

START_TEST(test_unknown_field)
{
	ck_assert_only_error("module: g\n"
	    "env: {H: \"\"}\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: t\n"
	    "    from: p\n"
	    "    env:\n"
	    "      hostname: H\n", 8, "requires.db.env.hostname",
	    "unknown connection field 'hostname'; the fields are host, port, "
	    "database, user, password, url, vhost, path, sslmode, sslrootcert, "
	    "sslcert, sslkey, tls, ca, cert, key, uri, ssl_mode, ssl_ca, "
	    "ssl_cert, ssl_key, prefix");
	parse_text("module: g\n"
	    "env: {A: \"\", B: \"\", C: \"\", D: \"\", E: \"\", F: \"\","
	    " G: \"\", H: \"\"}\n"
	    "requires:\n"
	    "  q: {type: amqp-vhost, from: rabbit, env: {host: A, port: B,"
	    " database: C, user: D, password: E, url: F, vhost: G, path: H}}\n");
	ck_assert_parsed();
	ck_assert_uint_eq(tl_mf_set_module(P.set, 0)->reqs[0].nenv, 8);
}
END_TEST

/*
 * A field the type's driver never produces would be delivered as
 * nothing (and made tallyd loop): refused, naming the field and the
 * fields the driver declares.  A type with no driver is checked only
 * against the general list (test_unknown_field).
 */
START_TEST(test_field_of_type)
{
	ck_assert_only_error("module: g\n"
	    "env: {V: \"\", H: \"\"}\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: postgres-database\n"
	    "    from: postgres\n"
	    "    env:\n"
	    "      host: H\n"
	    "      vhost: V\n", 9, "requires.db.env.vhost",
	    "type postgres-database (driver postgres) does not produce "
	    "connection field 'vhost'; it produces host, port, database, "
	    "user, password, url");
	ck_assert_only_error("module: g\n"
	    "env: {P: \"\"}\n"
	    "embedded:\n"
	    "  v: {type: postgres-database, env: {path: P}}\n", 4,
	    "embedded.v.env.path", "does not produce connection field "
	    "'path'");
	parse_text("module: g\n"
	    "env: {U: \"\", L: \"\"}\n"
	    "requires:\n"
	    "  db: {type: postgres-database, from: postgres, env: {user: U,"
	    " url: L}}\n");
	ck_assert_parsed();
}
END_TEST

START_TEST(test_drivers)
{
	const char *text;

	ck_assert_only_error("module: g\n"
	    "provides:\n"
	    "  mysql-database:\n"
	    "    driver: mysql\n", 4, "provides.mysql-database.driver",
	    "unknown driver 'mysql'; known drivers: postgres, amqp-vhost, "
	    "directory");
	ck_assert_only_error("module: g\n"
	    "provides:\n"
	    "  t: {revoke: drop}\n", 3, "provides.t.driver",
	    "missing driver");
	ck_assert_only_error("module: g\n"
	    "provides:\n"
	    "  t:\n", 3, "provides.t.driver", "no empty grants");
	/* no known drivers at all: every provides: is refused */
	text = "module: g\nprovides:\n  t: {driver: postgres}\n";
	P.rc = tl_mf_parse_buffer("t", text, strlen(text), "/", NULL, &P.set,
	    &P.errs);
	dump_errors();
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_error(3, "provides.t.driver", "no driver is known");
}
END_TEST

START_TEST(test_embedded_private)
{
	/* Both would be the grant g/v@NODE (decide_embedded.h). */
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  v: {type: t}\n"
	    "requires:\n"
	    "  v: {type: t, from: p}\n", 5, "requires.v",
	    "is also this module's embedded instance");
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  v:\n"
	    "    type: t\n"
	    "    port: 5432\n", 5, "embedded.v.port",
	    "an embedded instance publishes no port");
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  v:\n"
	    "    type: t\n"
	    "    expose: network\n", 5, "embedded.v.expose",
	    "expose must be none, not 'network'");
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  v:\n"
	    "    runs: a\n"
	    "    type: t\n"
	    "    image: b\n", 6, "embedded.v.image",
	    "either image: or runs:, not both");
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  v:\n"
	    "    image: b\n", 3, "embedded.v.type", "missing type");
	parse_text("module: g\n"
	    "embedded:\n"
	    "  v: {type: t, port: ~, expose: none, image: \"pg:16\"}\n");
	ck_assert_parsed();
	ck_assert_str_eq(tl_mf_set_module(P.set, 0)->embedded[0].runs,
	    "pg:16");
}
END_TEST

START_TEST(test_self_targets)
{
	ck_assert_only_error("module: postgres\n"
	    "provides: {postgres-database: {driver: postgres}}\n"
	    "requires:\n"
	    "  db: {type: postgres-database, from: postgres}\n", 4,
	    "requires.db.from", "a module cannot consume its own grant");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  me: {presence: g}\n", 3, "requires.me.presence",
	    "cannot require its own presence");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  v: {presence: vectors}\n"
	    "embedded:\n"
	    "  vectors: {type: postgres-database}\n", 3,
	    "requires.v.presence", "'vectors' names this module's embedded "
	    "instance");
	ck_assert_only_error("module: g\n"
	    "embedded:\n"
	    "  vectors: {type: postgres-database}\n"
	    "requires:\n"
	    "  v: {type: postgres-database, from: vectors}\n", 5,
	    "requires.v.from", "never a provider");
}
END_TEST

START_TEST(test_duplicate_modules)
{
	ck_assert_only_error("module: a\n"
	    "---\n"
	    "module: b\n"
	    "---\n"
	    "# a comment\n"
	    "module: a\n", 6, "module",
	    "module 'a' is already declared at line 1");
}
END_TEST

START_TEST(test_claims)
{
	char text[512];

	ck_assert_only_error("module: g\n"
	    "env: {PW: \"\"}\n"
	    "embedded:\n"
	    "  v: {type: t, env: {password: PW}}\n"
	    "requires:\n"
	    "  db: {type: t, from: p, env: {password: PW}}\n", 6,
	    "requires.db.env.password", "PW is already mapped by "
	    "embedded.v.env.password (line 4)");
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  a: {type: t, from: p, name: data}\n"
	    "  b: {type: t, from: p, name: data}\n", 4, "requires.b.name",
	    "resource name 'data' is already used by requires.a.name");
	/* an explicit name may not take another requirement's default */
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  a: {type: t, from: p}\n"
	    "  b: {type: t, from: p, name: g-a}\n", 4, "requires.b.name",
	    "already used by requires.a (line 3)");
	/* another type or provider is another namespace */
	parse_text("module: g\n"
	    "requires:\n"
	    "  a: {type: t, from: p, name: data}\n"
	    "  b: {type: u, from: p, name: data}\n"
	    "  c: {type: t, from: q, name: data}\n");
	ck_assert_parsed();

	snprintf(text, sizeof text, "module: %s\n"
	    "requires:\n"
	    "  %s: {type: t, from: p}\n",
	    "a-module-name-of-forty-characters-------x",
	    "a-requirement-of-30-characters");
	ck_assert_only_error(text, 3, "requires.a-requirement-of-30-characters",
	    "longer than 63 characters: give a shorter one with name:");
	snprintf(text, sizeof text, "module: %s\n"
	    "requires:\n"
	    "  %s: {type: t, from: p, name: short}\n",
	    "a-module-name-of-forty-characters-------x",
	    "a-requirement-of-30-characters");
	parse_text(text);
	ck_assert_parsed();
}
END_TEST

START_TEST(test_durations)
{
	static const struct {
		const char *text;
		long long secs;
	} ok[] = {
		{ "30d", 30LL * 86400 }, { "1d12h", 129600 }, { "2w", 1209600 },
		{ "90m", 5400 }, { "45s", 45 }, { "1w1d1h1m1s", 694861 },
		{ "36500d", 36500LL * 86400 }
	};
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{ "30", "needs a unit" }, { "30x", "is not a duration" },
		{ "1h1d", "largest first" }, { "1d1d", "is not a duration" },
		{ "d", "is not a duration" }, { "\"\"", "is not a duration" },
		{ "0d", "longer than zero" }, { "36501d", "limit of 36500d" },
		{ "99999999999999999999999s", "limit" }, { "1d 2h", "not a" },
		{ "-1d", "not a duration" }
	};
	char text[256];
	size_t i;

	for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		snprintf(text, sizeof text, "module: g\nrequires:\n"
		    "  db: {type: t, from: p, max-credential-age: %s}\n",
		    ok[i].text);
		parse_text(text);
		ck_assert_parsed();
		ck_assert_int_eq(tl_mf_set_module(P.set, 0)->reqs[0]
		    .max_credential_age, ok[i].secs);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "module: g\nprovides:\n"
		    "  t:\n    driver: postgres\n    max-credential-age: %s\n",
		    bad[i].text);
		ck_assert_only_error(text, 5, "provides.t.max-credential-age",
		    bad[i].msg);
	}
}
END_TEST

START_TEST(test_refused_yaml)
{
	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  a: &req {presence: x}\n"
	    "  b: *req\n", 4, "requires.b",
	    "aliases (*req) are not supported");
	ck_assert_only_error("module: g\n"
	    "env:\n"
	    "  A: \"x\\0y\"\n", 3, "env.A", "contains a NUL character");
	/* refused at the first level too deep: nothing after it is read */
	parse_text("module: g\n"
	    "requires: [[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]\n");
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_error(2, "requires[0]*", "nested deeper than 16 levels");
	ck_assert_uint_eq(P.errs.n, 1);
}
END_TEST

/* CPU seconds this process has used. */
static double
cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/*
 * 200 KB nested 100,000 deep (lists, then maps) is refused at once, at
 * the depth limit (it took 14.7 s of CPU to refuse).
 */
START_TEST(test_deep_refused_fast)
{
	const size_t depth = 100000;
	const char *pre = "module: g\nrequires: ";
	size_t k, n, i;
	char *text;
	double t0, used;

	for (k = 0; k < 2; k++) {
		text = malloc(strlen(pre) + depth * 5 + 4);
		ck_assert_ptr_nonnull(text);
		n = (size_t)sprintf(text, "%s", pre);
		for (i = 0; i < depth; i++) {
			if (k == 0)
				text[n++] = '[';
			else {
				memcpy(text + n, "{a: ", 4);
				n += 4;
			}
		}
		for (i = 0; i < depth; i++)
			text[n++] = k == 0 ? ']' : '}';
		text[n++] = '\n';
		text[n] = '\0';
		t0 = cpu_s();
		parse_text(text);
		used = cpu_s() - t0;
		free(text);
		printf("check_manifest: %zu KB nested %zu deep (%s) refused "
		    "in %.3f s of CPU\n", n / 1000, depth, k ? "maps" :
		    "lists", used);
		ck_assert_int_eq(P.rc, TL_EMANIFEST);
		ck_assert_error(2, k ? "requires.a*" :
		    "requires[0]*", "nested deeper than 16 levels");
		ck_assert_msg(used < 1.0, "refusing took %.2f s of CPU", used);
	}
}
END_TEST

START_TEST(test_migrations)
{
	const char *text = "module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: p, migrations: \"../shared/./m//v1/\"}\n";
	char want[8192];

	parse_text(text);
	ck_assert_parsed();
	ck_assert_str_eq(tl_mf_set_module(P.set, 0)->reqs[0].migrations,
	    "/srv/shared/m/v1");
	tl_mf_set_free(P.set);
	P.set = NULL;

	/* a relative base is taken from the current directory */
	ck_assert_int_eq(tl_mf_parse_buffer("t", text, strlen(text), "a/b",
	    drivers, &P.set, &P.errs), 0);
	snprintf(want, sizeof want, "%s", cwd_join("a/shared/m/v1"));
	ck_assert_str_eq(tl_mf_set_module(P.set, 0)->reqs[0].migrations, want);
	tl_mf_set_free(P.set);
	P.set = NULL;

	text = "module: g\n"
	    "requires:\n"
	    "  db: {type: t, from: p, migrations: ../../../../../x}\n";
	ck_assert_int_eq(tl_mf_parse_buffer("t", text, strlen(text), "/srv",
	    drivers, &P.set, &P.errs), 0);
	ck_assert_str_eq(tl_mf_set_module(P.set, 0)->reqs[0].migrations, "/x");

	ck_assert_only_error("module: g\n"
	    "requires:\n"
	    "  db:\n"
	    "    type: t\n"
	    "    from: p\n"
	    "    migrations: /var/lib/m\n", 6, "requires.db.migrations",
	    "'/var/lib/m' is absolute");
}
END_TEST

/* ---- reporting ---- */

START_TEST(test_all_errors_collected)
{
	parse_text("module: Bad\n"
	    "env: {lower: \"\"}\n"
	    "requires:\n"
	    "  db: {type: t}\n"
	    "provides:\n"
	    "  t: {driver: nope}\n"
	    "embedded:\n"
	    "  v: {type: t, port: 1}\n");
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_uint_eq(P.errs.n, 5);
	ck_assert_error(1, "module", "not a valid module name");
	ck_assert_error(2, "env.lower", "not a valid variable name");
	ck_assert_error(4, "requires.db.from", "missing from");
	ck_assert_error(6, "provides.t.driver", "unknown driver");
	ck_assert_error(8, "embedded.v.port", "publishes no port");
	/* sorted by position although found in another order */
	ck_assert_int_eq(P.errs.v[3].line, 6);
	ck_assert_int_eq(P.errs.v[4].line, 8);
}
END_TEST

START_TEST(test_error_cap)
{
	char *text = malloc(4096);
	size_t pos, i;

	ck_assert_ptr_nonnull(text);
	pos = (size_t)sprintf(text, "module: g\n");
	for (i = 0; i < 150; i++)
		pos += (size_t)sprintf(text + pos, "k%zu: 1\n", i);
	parse_text(text);
	free(text);
	ck_assert_int_eq(P.rc, TL_EMANIFEST);
	ck_assert_uint_eq(P.errs.n, TL_MF_ERRORS_MAX);
	ck_assert_uint_eq(P.errs.dropped, 50);
	ck_assert_int_eq(P.errs.v[0].line, 2);
	ck_assert_int_eq(P.errs.v[99].line, 101);
}
END_TEST

START_TEST(test_errors_accumulate)
{
	parse_text("module: A\n");
	parse_text("module: B\n");
	ck_assert_uint_eq(P.errs.n, 2);
	ck_assert_msg(strstr(P.errs.v[0].msg, "'A'") != NULL, "%s", P.dump);
	ck_assert_msg(strstr(P.errs.v[1].msg, "'B'") != NULL, "%s", P.dump);
	/* without a list the result is the same, the details are not kept */
	ck_assert_int_eq(tl_mf_parse_buffer("t", "module: A\n", 10, NULL,
	    drivers, &P.set, NULL), TL_EMANIFEST);
	ck_assert_ptr_null(P.set);
}
END_TEST

START_TEST(test_error_format)
{
	struct tl_mf_error e;
	char buf[256];
	int n;

	memset(&e, 0, sizeof e);
	snprintf(e.file, sizeof e.file, "game.yaml");
	e.line = 12;
	e.col = 7;
	snprintf(e.field, sizeof e.field, "requires.db.env.password");
	snprintf(e.msg, sizeof e.msg, "something is wrong");
	n = tl_mf_error_format(&e, buf, sizeof buf);
	ck_assert_str_eq(buf, "game.yaml:12:7: requires.db.env.password: "
	    "something is wrong");
	ck_assert_int_eq(n, (int)strlen(buf));
	e.field[0] = '\0';
	tl_mf_error_format(&e, buf, sizeof buf);
	ck_assert_str_eq(buf, "game.yaml:12:7: something is wrong");
	n = tl_mf_error_format(&e, buf, 5);
	ck_assert_str_eq(buf, "game");
	ck_assert_int_eq(n, (int)strlen("game.yaml:12:7: something is wrong"));
	ck_assert_int_eq(tl_mf_error_format(NULL, buf, sizeof buf), TL_EINVAL);
}
END_TEST

static int
valid_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t need, i;

	while (*p != '\0') {
		need = *p < 0x80 ? 0 : *p >= 0xf0 ? 3 : *p >= 0xe0 ? 2 :
		    *p >= 0xc0 ? 1 : 9;
		if (need == 9)
			return 0;
		for (i = 1; i <= need; i++)
			if ((p[i] & 0xc0) != 0x80)
				return 0;
		p += need + 1;
	}
	return 1;
}

/* Input reaches a terminal through messages: control bytes are escaped. */
START_TEST(test_escaping)
{
	char text[400];

	ck_assert_only_error("module: g\n"
	    "\"a\\eb\": 1\n", 2, "a\\x1bb", "unknown key 'a\\x1bb'");
	snprintf(text, sizeof text, "module: %s\n",
	    "Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	parse_text(text);
	ck_assert_msg(strstr(P.errs.v[0].msg, "...'") != NULL,
	    "long values are shortened: %s", P.dump);
	/* ... and never in the middle of a UTF-8 sequence, at any length */
	for (size_t i = 1; i < 60; i++) {
		/* an odd prefix puts the cut between the two bytes of one */
		size_t pos = (size_t)snprintf(text, sizeof text, "module: %s",
		    i % 2 ? "x" : "");

		for (size_t k = 0; k < i; k++)
			pos += (size_t)snprintf(text + pos, sizeof text - pos,
			    "\xc3\xa4");
		snprintf(text + pos, sizeof text - pos, "\n");
		tl_mf_errors_free(&P.errs);
		parse_text(text);
		ck_assert_uint_eq(P.errs.n, 1);
		ck_assert_msg(valid_utf8(P.errs.v[0].msg), "%s", P.dump);
	}
}
END_TEST

START_TEST(test_bad_args)
{
	struct tl_mf_set *s = (struct tl_mf_set *)&s;	/* must be reset */
	char big[16];

	ck_assert_int_eq(tl_mf_parse_buffer(NULL, "", 0, NULL, drivers, &s,
	    NULL), TL_EINVAL);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(tl_mf_parse_buffer("t", NULL, 3, NULL, drivers, &s,
	    NULL), TL_EINVAL);
	ck_assert_int_eq(tl_mf_parse_buffer("t", "", 0, NULL, drivers, NULL,
	    NULL), TL_EINVAL);
	ck_assert_int_eq(tl_mf_parse_buffer("t", big, TL_MF_MAX_SIZE + 1,
	    NULL, drivers, &s, NULL), TL_ETOOBIG);
	ck_assert_int_eq(tl_mf_parse_file(NULL, drivers, &s, NULL), TL_EINVAL);
	ck_assert_int_eq(tl_mf_parse_file("x", drivers, NULL, NULL),
	    TL_EINVAL);
	/* destructors and accessors accept NULL */
	tl_mf_set_free(NULL);
	tl_mf_errors_free(NULL);
	ck_assert_uint_eq(tl_mf_set_count(NULL), 0);
	ck_assert_ptr_null(tl_mf_set_module(NULL, 0));
	ck_assert_ptr_null(tl_mf_set_find(NULL, "x"));
	ck_assert_ptr_null(tl_mf_module_req(NULL, "x"));
}
END_TEST

START_TEST(test_too_big_file)
{
	char path[] = "/tmp/check_manifest_XXXXXX";
	int fd = mkstemp(path);
	FILE *f;
	size_t i;

	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fputs("module: g\n", f);
	for (i = 0; i <= TL_MF_MAX_SIZE; i += 16)
		fputs("# padding......\n", f);
	fclose(f);
	parse_path(path);
	unlink(path);
	ck_assert_int_eq(P.rc, TL_ETOOBIG);
	ck_assert_ptr_null(P.set);
	/* Said in words: the file's size and the limit. */
	ck_assert_error(1, "", "(1048602 bytes) is more than the 1 MiB "
	    "(1048576 bytes) a manifest may be");
}
END_TEST

START_TEST(test_enum_names)
{
	ck_assert_str_eq(tl_mf_kind_name(TL_MF_PRESENCE), "presence");
	ck_assert_str_eq(tl_mf_kind_name(TL_MF_INSTANTIATION), "instantiation");
	ck_assert_str_eq(tl_mf_scope_name(TL_MF_SHARED), "shared");
	ck_assert_str_eq(tl_mf_scope_name(TL_MF_PER_INSTANCE), "per-instance");
	ck_assert_str_eq(tl_mf_revoke_name(TL_MF_RETAIN), "retain");
	ck_assert_str_eq(tl_mf_revoke_name(TL_MF_DROP), "drop");
}
END_TEST

/* Inputs the fuzzer once crashed on: each must now parse or be refused. */
START_TEST(test_fuzz_regressions)
{
	DIR *d = opendir(TL_MF_TESTDATA);
	struct dirent *de;
	char path[1024];

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "crash-", 6) != 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", TL_MF_TESTDATA, de->d_name);
		parse_path(path);
		ck_assert_msg(P.rc == 0 || P.rc == TL_EMANIFEST, "%s: rc %d",
		    path, P.rc);
		tl_mf_errors_free(&P.errs);
	}
	closedir(d);
}
END_TEST

static Suite *
manifest_suite(void)
{
	Suite *s = suite_create("manifest");
	TCase *tc;

	tc = tcase_create("examples");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_example_game);
	tcase_add_test(tc, test_example_postgres);
	tcase_add_test(tc, test_example_vector);
	tcase_add_test(tc, test_examples_one_buffer);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_key_order);
	tcase_add_test(tc, test_content_change_detected);
	tcase_add_test(tc, test_multi_docs);
	tcase_add_test(tc, test_missing_file);
	tcase_add_test(tc, test_directory);
	tcase_add_test(tc, test_empty_file);
	tcase_add_test(tc, test_syntax_error);
	tcase_add_test(tc, test_syntax_error_late);
	tcase_add_test(tc, test_tab_indent);
	tcase_add_test(tc, test_not_utf8);
	tcase_add_test(tc, test_too_big_file);
	tcase_add_test(tc, test_fuzz_regressions);
	suite_add_tcase(s, tc);

	tc = tcase_create("validation");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_unknown_keys);
	tcase_add_test(tc, test_wrong_kinds);
	tcase_add_test(tc, test_duplicate_keys);
	tcase_add_test(tc, test_missing_module);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_provider);
	tcase_add_test(tc, test_env_names);
	tcase_add_test(tc, test_env_defaults);
	tcase_add_test(tc, test_requirement_shape);
	tcase_add_test(tc, test_requirement_params);
	tcase_add_test(tc, test_scope_revoke);
	tcase_add_test(tc, test_instances);
	tcase_add_test(tc, test_parts);
	tcase_add_test(tc, test_derived_settings);
	tcase_add_test(tc, test_undeclared_variable);
	tcase_add_test(tc, test_unknown_field);
	tcase_add_test(tc, test_credential);
	tcase_add_test(tc, test_access);
	tcase_add_test(tc, test_drivers);
	tcase_add_test(tc, test_embedded_private);
	tcase_add_test(tc, test_self_targets);
	tcase_add_test(tc, test_duplicate_modules);
	tcase_add_test(tc, test_claims);
	tcase_add_test(tc, test_durations);
	tcase_add_test(tc, test_refused_yaml);
	tcase_add_test(tc, test_deep_refused_fast);
	tcase_add_test(tc, test_migrations);
	suite_add_tcase(s, tc);

	tc = tcase_create("reporting");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_all_errors_collected);
	tcase_add_test(tc, test_error_cap);
	tcase_add_test(tc, test_errors_accumulate);
	tcase_add_test(tc, test_error_format);
	tcase_add_test(tc, test_escaping);
	tcase_add_test(tc, test_bad_args);
	tcase_add_test(tc, test_field_of_type);
	tcase_add_test(tc, test_enum_names);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	const char *src = getenv("TALLY_SRC");
	SRunner *sr;
	int failed;

	/* fixture paths are relative to the top of the tree */
	if (src != NULL && chdir(src) != 0) {
		fprintf(stderr, "check_manifest: %s: %s\n", src,
		    strerror(errno));
		return EXIT_FAILURE;
	}
	sr = srunner_create(manifest_suite());

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
