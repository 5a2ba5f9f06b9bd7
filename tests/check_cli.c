/*
 * check_cli.c - the graph commands through the real tally binary.
 *
 * Every test gets a fresh home (TALLY_HOME under $TALLY_TMP), runs
 * `tally init` there and then drives $TALLY_BIN/tally as a child
 * process, asserting exit codes, what it prints and what the log holds
 * (`tally log --json`).  Fixture manifests are in tests/data/graph
 * ($TALLY_SRC); small variations are written inline.
 *
 * CK_RUN_CASE=validation (binding, seeds, history) runs one case.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/body.h"
#include "core/error.h"
#include "core/log.h"
#include "core/version.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "tests/lib/tl_test.h"

#define MAXARGS	32

static struct {
	char	*home;
	char	*keys;		/* node keys, outside the home */
	char	 key[4200];
	char	 key2[4200];	/* a second node's */
	char	 bin[4096];
	char	 src[4096];
	char	*out;		/* the last run's standard output */
	char	*err;		/* and its standard error */
	int	 code;		/* and its exit code */
	char	 cmdline[1024];
} H;

/* Paths handed out by fx() and mf(): a small ring, enough per call. */
static char ring[8][4096];
static unsigned ringpos;

static char *
ring_next(void)
{
	return ring[ringpos++ % 8];
}

static char *
slurp(const char *path)
{
	FILE *fp = fopen(path, "r");
	char *buf;
	long n;

	ck_assert_msg(fp != NULL, "%s: %s", path, strerror(errno));
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	if (n > 0)
		ck_assert_int_eq(fread(buf, 1, (size_t)n, fp), (size_t)n);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

/* Runs tally with argv (NULL-terminated); output lands in H. */
static int
run_argv(const char *const *argv)
{
	char outp[4200], errp[4200];
	const char *full[MAXARGS + 2];
	size_t i, off = 0;
	pid_t pid;
	int st;

	snprintf(outp, sizeof(outp), "%s/.stdout", H.home);
	snprintf(errp, sizeof(errp), "%s/.stderr", H.home);
	full[0] = H.bin;
	H.cmdline[0] = '\0';
	for (i = 0; argv[i] != NULL && i < MAXARGS; i++) {
		full[i + 1] = argv[i];
		off += (size_t)snprintf(H.cmdline + off, off < sizeof(H.cmdline)
		    ? sizeof(H.cmdline) - off : 0, " %s", argv[i]);
		if (off >= sizeof(H.cmdline))
			off = sizeof(H.cmdline) - 1;
	}
	full[i + 1] = NULL;
	fflush(NULL);
	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY);
		int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (in < 0 || o < 0 || e < 0)
			_exit(127);
		dup2(in, 0);
		dup2(o, 1);
		dup2(e, 2);
		execv(H.bin, (char *const *)full);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		ck_assert_int_eq(errno, EINTR);
	free(H.out);
	free(H.err);
	H.out = slurp(outp);
	H.err = slurp(errp);
	ck_assert_msg(WIFEXITED(st), "tally%s: killed by signal %d\n%s",
	    H.cmdline, WIFSIGNALED(st) ? WTERMSIG(st) : 0, H.err);
	H.code = WEXITSTATUS(st);
	ck_assert_msg(H.code != 127, "could not run %s", H.bin);
	return H.code;
}

static int
run_va(const char *first, va_list ap)
{
	const char *argv[MAXARGS + 1];
	size_t n = 0;

	argv[n++] = first;
	while (n < MAXARGS && (argv[n] = va_arg(ap, const char *)) != NULL)
		n++;
	argv[n] = NULL;
	return run_argv(argv);
}

/* Runs tally and asserts its exit code; the caller's line is reported. */
static void
expect(int line, int want, const char *first, ...)
{
	va_list ap;

	va_start(ap, first);
	run_va(first, ap);
	va_end(ap);
	ck_assert_msg(H.code == want, "line %d: tally%s exited %d, want %d\n"
	    "--- stdout\n%s--- stderr\n%s", line, H.cmdline, H.code, want,
	    H.out, H.err);
}

#define T_OK(...)	expect(__LINE__, 0, __VA_ARGS__, (const char *)NULL)
#define T_EXIT(c, ...)	expect(__LINE__, (c), __VA_ARGS__, (const char *)NULL)

#define ck_out_has(s)							\
	ck_assert_msg(strstr(H.out, (s)) != NULL, "tally%s: stdout lacks "\
	    "'%s':\n%s", H.cmdline, (s), H.out)
#define ck_err_has(s)							\
	ck_assert_msg(strstr(H.err, (s)) != NULL, "tally%s: stderr lacks "\
	    "'%s':\n%s", H.cmdline, (s), H.err)

/* A fixture manifest of tests/data/graph. */
static const char *
fx(const char *name)
{
	char *p = ring_next();

	ck_assert((size_t)snprintf(p, sizeof(ring[0]), "%s/tests/data/graph/%s",
	    H.src, name) < sizeof(ring[0]));
	return p;
}

/* Writes an inline manifest into the home; returns its path. */
static const char *
mf(const char *name, const char *text)
{
	char *p = ring_next();
	FILE *fp;

	ck_assert((size_t)snprintf(p, sizeof(ring[0]), "%s/%s", H.home,
	    name) < sizeof(ring[0]));
	fp = fopen(p, "w");
	ck_assert_msg(fp != NULL, "%s: %s", p, strerror(errno));
	fputs(text, fp);
	ck_assert_int_eq(fclose(fp), 0);
	return p;
}

static void
setup(void)
{
	const char *b = getenv("TALLY_BIN"), *s = getenv("TALLY_SRC");
	struct stat st;

	memset(&H, 0, sizeof(H));
	snprintf(H.bin, sizeof(H.bin), "%s/tally", b && *b ? b : "build/bin");
	snprintf(H.src, sizeof(H.src), "%s", s && *s ? s : ".");
	ck_assert_msg(stat(H.bin, &st) == 0, "no tally binary at %s (set "
	    "TALLY_BIN)", H.bin);
	H.home = tl_test_tmpdir("cli");
	H.keys = tl_test_tmpdir("cli-keys");
	/* Node keys go outside the home (tally node add refuses it). */
	snprintf(H.key, sizeof(H.key), "%s/node.key", H.keys);
	snprintf(H.key2, sizeof(H.key2), "%s/node2.key", H.keys);
	setenv("TALLY_HOME", H.home, 1);
	T_OK("init");
}

static void
teardown(void)
{
	free(H.out);
	free(H.err);
	tl_test_tmpdir_done(H.home);
	tl_test_tmpdir_done(H.keys);
	memset(&H, 0, sizeof(H));
}

/* The log as `tally log --json` prints it (malloc'd). */
static char *
log_dump(void)
{
	T_OK("log", "--json");
	return strdup(H.out);
}

static size_t
count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		if (*s == '\n')
			n++;
	return n;
}

/* Events of type (a glob) in stream (NULL: any). */
static size_t
count_events(const char *type, const char *stream)
{
	if (stream != NULL)
		T_OK("log", "--json", "--type", type, "--stream", stream);
	else
		T_OK("log", "--json", "--type", type);
	return count_lines(H.out);
}

static uint64_t
last_seq(void)
{
	char *dump = log_dump(), *line, *save = NULL;
	uint64_t seq = 0;

	for (line = strtok_r(dump, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		json_t *j = json_loads(line, 0, NULL);

		ck_assert_ptr_nonnull(j);
		seq = (uint64_t)json_integer_value(json_object_get(j, "seq"));
		json_decref(j);
	}
	free(dump);
	return seq;
}

/* The last run's stdout as JSON (a new reference). */
static json_t *
out_json(void)
{
	json_error_t e;
	json_t *j = json_loads(H.out, 0, &e);

	ck_assert_msg(j != NULL, "tally%s: not JSON (%s):\n%s", H.cmdline,
	    e.text, H.out);
	return j;
}

/* tally status MODULE --json [--at SEQ]: exit 0 or 6. */
static json_t *
status_of(const char *module, const char *at)
{
	if (at != NULL)
		run_argv((const char *[]){ "status", module, "--json", "--at",
		    at, NULL });
	else
		run_argv((const char *[]){ "status", module, "--json", NULL });
	ck_assert_msg(H.code == 0 || H.code == 6, "tally%s: exit %d\n%s",
	    H.cmdline, H.code, H.err);
	return out_json();
}

static const char *
jstr(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

/* The requirement req of the assignment on node in a status document. */
static const json_t *
st_req(const json_t *st, const char *node, const char *req)
{
	const json_t *a, *r;
	size_t i, j;

	json_array_foreach(json_object_get(st, "assignments"), i, a) {
		if (strcmp(jstr(a, "node"), node) != 0)
			continue;
		json_array_foreach(json_object_get(a, "requirements"), j, r)
			if (strcmp(jstr(r, "name"), req) == 0)
				return r;
	}
	ck_abort_msg("status of %s has no requirement %s on %s", jstr(st,
	    "module"), req, node);
	return NULL;
}

static const char *
st_asg_state(const json_t *st, const char *node)
{
	const json_t *a;
	size_t i;

	json_array_foreach(json_object_get(st, "assignments"), i, a)
		if (strcmp(jstr(a, "node"), node) == 0)
			return jstr(a, "state");
	ck_abort_msg("status of %s has no assignment on %s", jstr(st,
	    "module"), node);
	return NULL;
}

/* Asserts requirement req of module on node is bound to provider by why. */
static void
ck_bound(int line, const char *module, const char *node, const char *req,
    const char *provider, const char *why)
{
	json_t *st = status_of(module, NULL);
	const json_t *r = st_req(st, node, req);

	ck_assert_msg(strcmp(jstr(r, "provider"), provider) == 0 &&
	    strcmp(jstr(r, "bound_by"), why) == 0, "line %d: %s/%s on %s: "
	    "bound to '%s' by '%s' (state %s: %s), want %s by '%s'", line,
	    module, req, node, jstr(r, "provider"), jstr(r, "bound_by"),
	    jstr(r, "state"), jstr(r, "reason"), provider, why);
	json_decref(st);
}
#define CK_BOUND(m, n, r, p, w)	ck_bound(__LINE__, m, n, r, p, w)

static void
node_add(const char *name)
{
	char host[128], key[4200];

	/* One key file per node: an existing one is never replaced. */
	snprintf(host, sizeof(host), "%s.mesh.test", name);
	snprintf(key, sizeof(key), "%s/%s.key", H.keys, name);
	T_OK("node", "add", name, "--routable-name", host, "--key-out", key);
}

/* The grant record of the grants projection, read in-process. */
struct grant_arg {
	const char	*id;
	struct tl_grant	 g;
	int		 rc;
};

static int
grant_cb(struct tl_txn *t, void *arg)
{
	struct grant_arg *ga = arg;
	struct tl_proj p;
	int rc;

	if ((rc = tl_proj_open(t, &p)) != 0)
		return rc;
	ga->rc = tl_grant_get(t, &p, ga->id, &ga->g, NULL);
	return 0;
}

static char *
log_dir(void)
{
	return tl_test_path(H.home, "log");
}

static int
grant_read(const char *id, struct tl_grant *g)
{
	struct grant_arg ga = { id, { { 0 } }, 0 };
	struct tl_log *log;
	struct tl_txn *t;
	char *dir = log_dir();
	int rc;

	/* Let the CLI fold first (a read catches the projections up). */
	T_OK("graph", "--json");
	rc = tl_log_open(dir, TL_LOG_RDONLY, &log);
	free(dir);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(tl_log_begin(log, TL_TXN_RDONLY, &t), 0);
	ck_assert_int_eq(grant_cb(t, &ga), 0);
	tl_log_abort(t);
	tl_log_close(log);
	if (ga.rc == 0)
		*g = ga.g;
	return ga.rc;
}

/* What a reactor would append: one event for grant id, in-process. */
struct react_arg {
	const char	*type;
	const char	*grant;
	const char	*provider;
};

static int
react_cb(struct tl_txn *t, void *arg)
{
	struct react_arg *ra = arg;
	struct tl_ctx c;
	struct tl_body b;
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_ctx_begin(&c, t, "test:reactor")) != 0)
		return rc;
	snprintf(stream, sizeof(stream), "grant/%s", ra->grant);
	tl_body_init(&b);
	tl_body_str(&b, "grant", ra->grant);
	tl_body_str(&b, "provider", ra->provider);
	tl_body_u64(&b, "version", 1);
	tl_body_str(&b, "user", "u1");
	rc = tl_emit(&c, ra->type, stream, &b, NULL);
	tl_body_free(&b);
	if (rc == 0)
		rc = tl_ctx_end(&c);
	return rc;
}

static void
react(const char *type, const char *grant, const char *provider)
{
	struct react_arg ra = { type, grant, provider };
	struct tl_log *log;
	char *dir = log_dir();

	ck_assert_int_eq(tl_log_open(dir, 0, &log), 0);
	free(dir);
	ck_assert_int_eq(tl_log_write(log, react_cb, &ra), 0);
	tl_log_close(log);
}

/* Any event, as a reactor would append it: type on stream with body b. */
struct emit_arg {
	const char	*type;
	const char	*stream;
	struct tl_body	*b;
};

static int
emit_cb(struct tl_txn *t, void *arg)
{
	struct emit_arg *ea = arg;
	struct tl_ctx c;
	int rc;

	if ((rc = tl_ctx_begin(&c, t, "test:reactor")) != 0)
		return rc;
	if ((rc = tl_emit(&c, ea->type, ea->stream, ea->b, NULL)) == 0)
		rc = tl_ctx_end(&c);
	return rc;
}

static void
emit_ev(const char *type, const char *stream, struct tl_body *b)
{
	struct emit_arg ea = { type, stream, b };
	struct tl_log *log;
	char *dir = log_dir();

	ck_assert_int_eq(tl_log_open(dir, 0, &log), 0);
	free(dir);
	ck_assert_int_eq(tl_log_write(log, emit_cb, &ea), 0);
	tl_log_close(log);
	tl_body_reset(b);
}

/*
 * Validation: apply FILE must exit 4 naming file:line and the field,
 * and append nothing.
 */

/* A log with something in it, so that "nothing appended" means it. */
static void
some_state(void)
{
	node_add("node-a");
	T_OK("apply", fx("postgres.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
}

static void
ck_rejected(int line, const char *file, int at, const char *field)
{
	char *before = log_dump(), *after, *saved, where[512];
	const char *p, *eol;
	size_t plen;

	snprintf(where, sizeof(where), "%s:%d:", file, at);
	expect(line, 4, "apply", fx(file), (const char *)NULL);
	p = strstr(H.err, where);
	ck_assert_msg(p != NULL, "line %d: apply %s: stderr does not name "
	    "'%s':\n%s", line, file, where, H.err);
	/* The field comes right after FILE:LINE[:COL]: on the same line. */
	eol = strchr(p, '\n');
	plen = eol ? (size_t)(eol - p) : strlen(p);
	p += strlen(where);
	while (*p >= '0' && *p <= '9')
		p++;
	if (*p == ':')
		p++;
	ck_assert_msg(strncmp(p, " ", 1) == 0 && strncmp(p + 1, field,
	    strlen(field)) == 0 && p[1 + strlen(field)] == ':',
	    "line %d: apply %s: expected '%s' after '%s' in:\n%.*s", line,
	    file, field, where, (int)plen, strstr(H.err, where));
	ck_assert_msg(strstr(H.out, "applied") == NULL, "line %d: %s", line,
	    H.out);
	saved = strdup(H.err);
	after = log_dump();
	ck_assert_msg(strcmp(before, after) == 0, "line %d: apply %s "
	    "appended events:\n%s", line, file, after + strlen(before));
	free(before);
	free(after);
	/* Leave the apply's stderr for the caller to look at. */
	free(H.err);
	H.err = saved;
	snprintf(H.cmdline, sizeof(H.cmdline), " apply %s", file);
}
#define CK_REJECTED(f, l, fld)	ck_rejected(__LINE__, f, l, fld)

START_TEST(test_reject_unknown_key)
{
	some_state();
	CK_REJECTED("bad-unknown-key.yaml", 2, "description");
	ck_err_has("unknown key 'description'");
	CK_REJECTED("bad-unknown-key-nested.yaml", 6, "requires.db.database");
	ck_err_has("unknown key 'database'");
	/* Several files: one bad file applies nothing from the good ones. */
	{
		char *before = log_dump(), *after;

		T_EXIT(4, "apply", fx("game.yaml"), fx("bad-unknown-key.yaml"));
		ck_err_has("bad-unknown-key.yaml:2:1: description:");
		after = log_dump();
		ck_assert_str_eq(before, after);
		free(before);
		free(after);
	}
}
END_TEST

START_TEST(test_reject_names)
{
	some_state();
	CK_REJECTED("bad-name-module.yaml", 1, "module");
	ck_err_has("'My_Game' is not a valid module name");
	CK_REJECTED("bad-name-req.yaml", 3, "requires.Db");
	ck_err_has("'Db' is not a valid requirement name");
	CK_REJECTED("bad-name-long.yaml", 6, "requires.db.name");
	ck_err_has("65 characters long, the limit is 63");
	/* The same rule on the command line. */
	T_EXIT(4, "node", "add", "Node-B", "--routable-name", "b.test");
	T_EXIT(4, "node", "add", "node_b", "--routable-name", "b.test");
	T_EXIT(4, "node", "add", "node-", "--routable-name", "b.test");
	T_EXIT(4, "node", "add", "a123456789b123456789c123456789d123456789"
	    "e123456789f123456789abcd", "--routable-name", "b.test");
	T_EXIT(4, "assign", "Postgres", "node-a");
	T_EXIT(4, "unassign", "postgres", "Node-A");
	T_EXIT(4, "remove", "post_gres");
	/* 63 is allowed. */
	T_OK("node", "add", "a123456789b123456789c123456789d123456789"
	    "e123456789f123456789abc", "--routable-name", "b.test",
	    "--key-out", H.key);
	/* A node's secret key is never kept under the home, nor implied. */
	T_EXIT(2, "node", "add", "node-k", "--routable-name", "k.test");
	{
		char k1[4200], k2[4200];

		/* Directly, and through a link that leads into the home. */
		snprintf(k1, sizeof(k1), "%s/node-k.key", H.home);
		snprintf(k2, sizeof(k2), "%s/home-link", H.keys);
		ck_assert_int_eq(symlink(H.home, k2), 0);
		strcat(k2, "/node-k.key");
		T_EXIT(4, "node", "add", "node-k", "--routable-name", "k.test",
		    "--key-out", k1);
		T_EXIT(4, "node", "add", "node-k", "--routable-name", "k.test",
		    "--key-out", k2);
		ck_assert_int_ne(access(k1, F_OK), 0);
	}
	/* None of them recorded the node. */
	T_EXIT(3, "node", "rm", "node-k");
}
END_TEST

/*
 * A manifest over the size limit is refused as bad input (exit 4, not
 * 1), in words; one nested too deep is refused at once.
 */
START_TEST(test_reject_manifest_limits)
{
	char big[4200], deep[4200];
	FILE *fp;
	size_t i;

	snprintf(big, sizeof(big), "%s/big.yaml", H.keys);
	fp = fopen(big, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("module: g\n", fp);
	fclose(fp);
	/* 203 MB, sparse: nothing past the limit is read. */
	ck_assert_int_eq(truncate(big, 203000000), 0);
	T_EXIT(4, "apply", big);
	ck_err_has("203 MB (203000000 bytes) is more than the 1 MiB "
	    "(1048576 bytes) a manifest may be");
	ck_err_has(big);
	snprintf(deep, sizeof(deep), "%s/deep.yaml", H.keys);
	fp = fopen(deep, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("module: g\nrequires: ", fp);
	for (i = 0; i < 100000; i++)
		fputc('[', fp);
	for (i = 0; i < 100000; i++)
		fputc(']', fp);
	fputc('\n', fp);
	fclose(fp);
	T_EXIT(4, "apply", deep);
	ck_err_has("nested deeper than 16 levels");
	unlink(big);
	unlink(deep);
}
END_TEST

START_TEST(test_reject_unmapped_field)
{
	some_state();
	CK_REJECTED("bad-unmapped.yaml", 10, "requires.db.env.password");
	ck_err_has("DB_PASSWORD, which the module does not declare");
}
END_TEST

START_TEST(test_reject_embedded_target)
{
	some_state();
	/*
	 * vector-search is declared first in the same apply (it has no
	 * requirements): its event is thrown away with the rest.
	 */
	CK_REJECTED("bad-embedded-target.yaml", 12, "requires.db.from");
	ck_err_has("embedded private instance");
	/* Declared beforehand: the same refusal. */
	T_OK("apply", fx("vector-search.yaml"));
	CK_REJECTED("bad-embedded-target.yaml", 12, "requires.db.from");
	/* Naming the instance itself (from: vectors) is refused too. */
	CK_REJECTED("bad-embedded-target-name.yaml", 4, "requires.db.from");
	ck_err_has("vectors");
}
END_TEST

/*
 * A requirement's target (issue 21, item 13): a module declared that
 * does not provide the type can never serve it, refused at apply
 * (naming file, line and field), in the same apply as the provider or
 * after it; a module not declared yet is ordinary (manifests are applied
 * in any order), accepted and shown unsatisfiable with the reason until
 * its manifest is applied.
 */
START_TEST(test_requirement_target)
{
	some_state();
	CK_REJECTED("bad-target-type.yaml", 7, "requires.db.type");
	ck_err_has("postgres does not provide mariadb-database");
	ck_err_has("it provides postgres-database");
	T_EXIT(4, "apply", fx("bad-target-type.yaml"), fx("postgres.yaml"));
	ck_err_has("postgres does not provide mariadb-database");
	T_OK("apply", fx("later-target.yaml"));
	T_OK("assign", "early", "node-a");
	T_EXIT(6, "status", "early");
	ck_out_has("module broker is not declared");
	T_OK("apply", fx("broker.yaml"));
	T_EXIT(6, "status", "early");
	ck_out_has("provider broker not assigned to any node");
}
END_TEST

START_TEST(test_reject_unknown_driver)
{
	some_state();
	CK_REJECTED("bad-driver.yaml", 4, "provides.mysql-database.driver");
	ck_err_has("unknown driver 'mysql'");
}
END_TEST

START_TEST(test_reject_embedded_port)
{
	some_state();
	CK_REJECTED("bad-embedded-port.yaml", 5, "embedded.vectors.port");
	ck_err_has("publishes no port");
	CK_REJECTED("bad-embedded-expose.yaml", 5, "embedded.vectors.expose");
	ck_err_has("expose must be none, not 'network'");
}
END_TEST

START_TEST(test_reject_shared_resource)
{
	some_state();
	T_OK("apply", fx("game.yaml"));	/* game owns game-db */
	CK_REJECTED("bad-steal.yaml", 4, "requires.loot.name");
	ck_err_has("'game-db' from postgres belongs to module game");
	/* Within one apply: alpha is appended, then beta refused: neither. */
	CK_REJECTED("bad-steal-same-apply.yaml", 11, "requires.db.name");
	ck_err_has("belongs to module alpha");
	/* The owner itself may apply again. */
	T_OK("apply", fx("game.yaml"));
	ck_out_has("0 event(s)");
}
END_TEST

/* Binding rules. */

START_TEST(test_bind_explicit_manifest)
{
	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("postgres.yaml"), fx("game-explicit.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	T_OK("assign", "game", "node-a");
	/* Named, but not there yet: pending, and why. */
	{
		json_t *st = status_of("game", NULL);
		const json_t *r = st_req(st, "node-a", "db");

		ck_assert_str_eq(jstr(r, "state"), "pending");
		ck_assert_msg(strstr(jstr(r, "reason"), "node-b/postgres") !=
		    NULL, "%s", jstr(r, "reason"));
		json_decref(st);
	}
	ck_assert_int_eq(count_events("binding.*", NULL), 0);
	T_OK("assign", "postgres", "node-b", "--expose", "network");
	/* The manifest wins over the co-located node-a/postgres. */
	CK_BOUND("game", "node-a", "db", "node-b/postgres",
	    TL_BIND_EXPLICIT_MANIFEST);
	T_OK("explain", "game");
	ck_out_has("bound to node-b/postgres because explicit (named in the "
	    "manifest)");
	ck_out_has("decided by seq");
	ck_assert_int_eq(count_events("binding.made", "binding/game/db"), 1);
}
END_TEST

START_TEST(test_bind_colocated)
{
	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	T_OK("assign", "postgres", "node-b", "--expose", "network");
	T_OK("assign", "game", "node-b");
	CK_BOUND("game", "node-b", "db", "node-b/postgres", TL_BIND_COLOCATED);
	T_OK("explain", "game", "--json");
	{
		json_t *j = out_json();
		const json_t *r = json_array_get(json_object_get(j,
		    "requirements"), 0);

		ck_assert_str_eq(jstr(r, "grant"), "game/db");
		ck_assert_str_eq(jstr(r, "bound_by"), TL_BIND_COLOCATED);
		ck_assert_str_eq(jstr(json_object_get(r, "decided_by"),
		    "type"), TL_EV_BINDING_MADE);
		json_decref(j);
	}
}
END_TEST

START_TEST(test_bind_only_candidate)
{
	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	T_OK("assign", "postgres", "node-b", "--expose", "network");
	T_OK("assign", "game", "node-a");
	CK_BOUND("game", "node-a", "db", "node-b/postgres",
	    TL_BIND_ONLY_CANDIDATE);
	ck_assert_int_eq(count_events("grant.requested", "grant/game/db"), 1);
}
END_TEST

START_TEST(test_bind_ambiguous_then_bind)
{
	json_t *st;
	const json_t *r;
	char *before;

	node_add("node-a");
	node_add("node-b");
	node_add("node-c");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	T_OK("assign", "postgres", "node-b", "--expose", "network");
	T_OK("assign", "postgres", "node-c", "--expose", "network");
	T_OK("assign", "game", "node-a");
	st = status_of("game", NULL);
	r = st_req(st, "node-a", "db");
	ck_assert_str_eq(jstr(r, "state"), "pending");
	ck_assert_msg(strstr(jstr(r, "reason"), "ambiguous") &&
	    strstr(jstr(r, "reason"), "node-b/postgres") &&
	    strstr(jstr(r, "reason"), "node-c/postgres") &&
	    strstr(jstr(r, "reason"), "tally bind game/db"), "%s",
	    jstr(r, "reason"));
	json_decref(st);
	ck_assert_int_eq(count_events("binding.ambiguous", NULL), 1);
	ck_assert_int_eq(count_events("grant.*", NULL), 0);
	/* Another command does not record the same ambiguity again. */
	T_OK("apply", fx("static-site.yaml"));
	T_OK("assign", "static-site", "node-a");
	ck_assert_int_eq(count_events("binding.ambiguous", NULL), 1);

	/* Wrong names are refused and append nothing. */
	before = log_dump();
	T_EXIT(3, "bind", "game/db", "node-z/postgres");
	ck_err_has("no provider node-z/postgres");
	T_EXIT(3, "bind", "game/nope", "node-b/postgres");
	T_EXIT(4, "bind", "game/db@node-a", "node-b/postgres");
	ck_err_has("is shared");
	T_EXIT(4, "bind", "game", "node-b/postgres");
	{
		char *after = log_dump();

		ck_assert_str_eq(before, after);
		free(after);
	}
	free(before);

	T_OK("bind", "game/db", "node-c/postgres");
	CK_BOUND("game", "node-a", "db", "node-c/postgres",
	    TL_BIND_EXPLICIT_OPERATOR);
	ck_assert_int_eq(count_events("grant.requested", "grant/game/db"), 1);
	/* Binding again to the same provider records nothing. */
	before = log_dump();
	T_OK("bind", "game/db", "node-c/postgres");
	{
		char *after = log_dump();

		ck_assert_str_eq(before, after);
		free(after);
	}
	free(before);
}
END_TEST

START_TEST(test_bind_refused_beyond_requested)
{
	struct tl_grant g;
	char *before, *after;

	node_add("node-a");
	node_add("node-b");
	node_add("node-c");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	T_OK("assign", "postgres", "node-b", "--expose", "network");
	T_OK("assign", "game", "node-a");
	CK_BOUND("game", "node-a", "db", "node-b/postgres",
	    TL_BIND_ONLY_CANDIDATE);
	T_OK("assign", "postgres", "node-c", "--expose", "network");
	/* While only requested, tally bind may still choose another. */
	T_OK("bind", "game/db", "node-c/postgres");
	CK_BOUND("game", "node-a", "db", "node-c/postgres",
	    TL_BIND_EXPLICIT_OPERATOR);
	ck_assert_int_eq(grant_read("game/db", &g), 0);
	ck_assert_str_eq(g.provider, "node-c/postgres");
	ck_assert_str_eq(g.state, TL_GRANT_REQUESTED);
	/* node-b no longer serves it: it may be unassigned. */
	T_OK("unassign", "postgres", "node-b");
	T_OK("assign", "postgres", "node-b", "--expose", "network");

	/* A reactor starts provisioning on node-c. */
	react(TL_EV_GRANT_PROVISIONING, "game/db", "node-c/postgres");
	ck_assert_int_eq(grant_read("game/db", &g), 0);
	ck_assert_str_eq(g.state, TL_GRANT_PROVISIONING);
	before = log_dump();
	T_EXIT(4, "bind", "game/db", "node-b/postgres");
	ck_err_has("migration");
	ck_err_has("provisioning");
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	/* The same provider: nothing to record, not an error. */
	T_OK("bind", "game/db", "node-c/postgres");
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	/* Provisioned: still refused, and the provider cannot leave. */
	react(TL_EV_GRANT_PROVISIONED, "game/db", "node-c/postgres");
	T_EXIT(4, "bind", "game/db", "node-b/postgres");
	T_EXIT(4, "unassign", "postgres", "node-c");
	ck_err_has("still serves 1 grant(s) (game/db)");
	CK_BOUND("game", "node-a", "db", "node-c/postgres",
	    TL_BIND_EXPLICIT_OPERATOR);
}
END_TEST

/* --- migrations at apply time ----------------------------------------- */

/* What the migrator would append: migration.applied of file to grant. */
struct applied_arg {
	const char	*grant;
	const char	*file;
	const char	*checksum;
};

static int
applied_cb(struct tl_txn *t, void *arg)
{
	struct applied_arg *aa = arg;
	struct tl_ctx c;
	struct tl_body b;
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_ctx_begin(&c, t, "test:migrator")) != 0)
		return rc;
	snprintf(stream, sizeof(stream), "grant/%s", aa->grant);
	tl_body_init(&b);
	tl_body_str(&b, "grant", aa->grant);
	tl_body_str(&b, "file", aa->file);
	tl_body_str(&b, "checksum", aa->checksum);
	rc = tl_emit(&c, TL_EV_MIGRATION_APPLIED, stream, &b, NULL);
	tl_body_free(&b);
	if (rc == 0)
		rc = tl_ctx_end(&c);
	return rc;
}

static void
applied_event(const char *grant, const char *file, const char *checksum)
{
	struct applied_arg aa = { grant, file, checksum };
	struct tl_log *log;
	char *dir = log_dir();

	ck_assert_int_eq(tl_log_open(dir, 0, &log), 0);
	free(dir);
	ck_assert_int_eq(tl_log_write(log, applied_cb, &aa), 0);
	tl_log_close(log);
}

/* The checksum migration.stored recorded for file (from the log). */
static void
stored_checksum(const char *file, char out[65])
{
	const char *p, *q;

	T_OK("log", "--json", "--type", "migration.stored");
	out[0] = '\0';
	for (p = H.out; (p = strstr(p, "\"file\":\"")) != NULL; p++) {
		if (strncmp(p + 8, file, strlen(file)) != 0)
			continue;
		/* The last one stored for the file: the newest content. */
		q = strstr(p, "\"checksum\":\"");
		ck_assert_ptr_nonnull(q);
		memcpy(out, q + 12, 64);
		out[64] = '\0';
	}
	ck_assert_msg(out[0] != '\0', "no migration.stored for %s:\n%s",
	    file, H.out);
}

static const char mig_mf[] =
    "module: shop\n"
    "env: {DB_HOST: \"\"}\n"
    "requires:\n"
    "  db:\n"
    "    type: postgres-database\n"
    "    from: postgres\n"
    "    scope: shared\n"
    "    env: {host: DB_HOST}\n"
    "    migrations: mig\n";

static void
mig_write(const char *file, const char *text)
{
	char dir[4200];

	snprintf(dir, sizeof(dir), "%s/mig", H.home);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "mig/%s", file);
	mf(dir, text);
}

/*
 * An edit of a migration the log records as applied to a grant is
 * refused by apply itself (exit 4), naming the file, the grant and both
 * checksums, and appends nothing; a new file beside the applied ones,
 * and an edit of a file not applied yet, are accepted.
 */
START_TEST(test_apply_edited_applied_migration)
{
	char old[65], now[65], *before, *after;
	const char *m;

	node_add("node-a");
	T_OK("apply", fx("postgres.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	mig_write("001_a.sql", "CREATE TABLE a (x int);\n");
	mig_write("002_b.sql", "CREATE TABLE b (x int);\n");
	m = mf("shop.yaml", mig_mf);
	T_OK("apply", m);
	T_OK("assign", "shop", "node-a");
	react(TL_EV_GRANT_PROVISIONED, "shop/db", "node-a/postgres");
	stored_checksum("001_a.sql", old);
	applied_event("shop/db", "001_a.sql", old);

	/* 002 was never applied: it may change. */
	mig_write("002_b.sql", "CREATE TABLE b (x int, y int);\n");
	T_OK("apply", m);
	/* 001 was: refused at once, with both checksums. */
	mig_write("001_a.sql", "CREATE TABLE a (x int, y int);\n");
	before = log_dump();
	T_EXIT(4, "apply", m);
	ck_err_has("001_a.sql");
	ck_err_has("shop/db");
	ck_err_has(old);
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	T_EXIT(4, "apply", "--dry-run", m);	/* as the dry run says */
	/* The checksum of the edited file, as it would be stored. */
	{
		unsigned char h[32];
		const char *txt = "CREATE TABLE a (x int, y int);\n";
		size_t i;

		crypto_generichash(h, sizeof(h), (const unsigned char *)txt,
		    strlen(txt), NULL, 0);
		for (i = 0; i < 32; i++)
			snprintf(now + 2 * i, 3, "%02x", h[i]);
	}
	T_EXIT(4, "apply", m);
	ck_err_has(now);
	/* Restored: accepted, and a new file beside it too. */
	mig_write("001_a.sql", "CREATE TABLE a (x int);\n");
	mig_write("003_c.sql", "CREATE TABLE c (x int);\n");
	T_OK("apply", m);
}
END_TEST

/*
 * A migration file over the size limit is refused saying so, with its
 * size and the limit; one that cannot be read says why (errno); both
 * exit 4 and append nothing.
 */
START_TEST(test_apply_migration_size)
{
	char path[4200], *before, *after;
	const char *m;
	int fd;

	node_add("node-a");
	T_OK("apply", fx("postgres.yaml"));
	mig_write("001_a.sql", "CREATE TABLE a (x int);\n");
	m = mf("shop.yaml", mig_mf);
	/* 100 MB, sparse: cheap to make. */
	snprintf(path, sizeof(path), "%s/mig/002_big.sql", H.home);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 100 * 1000 * 1000), 0);
	close(fd);
	before = log_dump();
	T_EXIT(4, "apply", m);
	ck_err_has("002_big.sql");
	ck_err_has("100000000 bytes");
	ck_err_has("over the limit of 8 MiB");
	ck_assert_msg(strstr(H.err, "cannot read") == NULL, "%s", H.err);
	/* Not readable: why, not the limit. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(symlink("no-such-file", path), 0);
	T_EXIT(4, "apply", m);
	ck_err_has("002_big.sql: cannot read: No such file or directory");
	ck_assert_msg(strstr(H.err, "8 MiB") == NULL, "%s", H.err);
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	/* Exactly at the limit: accepted. */
	ck_assert_int_eq(unlink(path), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8 * 1024 * 1024), 0);
	close(fd);
	T_OK("apply", m);
}
END_TEST

/* The seed scenarios. */

static const char game_a[] =
"module: game-a\n"
"requires:\n"
"  db: {type: postgres-database, from: postgres}\n";
static const char game_b[] =
"module: game-b\n"
"requires:\n"
"  db: {type: postgres-database, from: postgres}\n";

START_TEST(test_seed_two_postgres)
{
	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("postgres.yaml"), mf("game-a.yaml", game_a),
	    mf("game-b.yaml", game_b), fx("worker.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	T_OK("assign", "postgres", "node-b", "--expose", "network");
	T_OK("assign", "game-a", "node-a");
	T_OK("assign", "game-b", "node-b");
	T_OK("assign", "worker", "node-b");
	T_OK("assign", "worker", "node-a");
	CK_BOUND("game-a", "node-a", "db", "node-a/postgres", TL_BIND_COLOCATED);
	CK_BOUND("game-b", "node-b", "db", "node-b/postgres", TL_BIND_COLOCATED);
	CK_BOUND("worker", "node-a", "scratch", "node-a/postgres",
	    TL_BIND_COLOCATED);
	CK_BOUND("worker", "node-b", "scratch", "node-b/postgres",
	    TL_BIND_COLOCATED);
	ck_assert_int_eq(count_events("binding.ambiguous", NULL), 0);
}
END_TEST

START_TEST(test_seed_names_other_node)
{
	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("postgres.yaml"), fx("game-explicit.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	T_OK("assign", "postgres", "node-b", "--expose", "network");
	T_OK("assign", "game", "node-a");
	CK_BOUND("game", "node-a", "db", "node-b/postgres",
	    TL_BIND_EXPLICIT_MANIFEST);
	T_OK("graph", "--json");
	{
		json_t *g = out_json();
		const json_t *m, *r, *b;
		size_t i;
		int seen = 0;

		json_array_foreach(json_object_get(g, "modules"), i, m) {
			if (strcmp(jstr(m, "name"), "game") != 0)
				continue;
			r = json_array_get(json_object_get(m, "requirements"),
			    0);
			b = json_array_get(json_object_get(r, "bindings"), 0);
			ck_assert_str_eq(jstr(b, "provider"),
			    "node-b/postgres");
			seen = 1;
		}
		ck_assert(seen);
		json_decref(g);
	}
}
END_TEST

START_TEST(test_seed_shared_vs_per_instance)
{
	json_t *st;
	struct tl_grant g;

	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"), fx("worker.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	T_OK("assign", "game", "node-a");
	T_OK("assign", "game", "node-b");
	T_OK("assign", "worker", "node-a");
	T_OK("assign", "worker", "node-b");

	/* shared: one grant MODULE/REQ, held by both assignments. */
	ck_assert_int_eq(count_events("grant.requested", NULL), 3);
	ck_assert_int_eq(count_events("grant.requested", "grant/game/db"), 1);
	st = status_of("game", NULL);
	ck_assert_str_eq(jstr(st_req(st, "node-a", "db"), "grant"),
	    "game/db");
	ck_assert_str_eq(jstr(st_req(st, "node-b", "db"), "grant"),
	    "game/db");
	ck_assert_str_eq(jstr(st_req(st, "node-b", "db"), "provider"),
	    "node-a/postgres");
	json_decref(st);
	ck_assert_int_eq(grant_read("game/db", &g), 0);
	ck_assert_str_eq(g.scope, "shared");
	ck_assert_str_eq(g.node, "");

	/* per-instance: two grants MODULE/REQ@NODE. */
	ck_assert_int_eq(count_events("grant.requested",
	    "grant/worker/scratch@node-a"), 1);
	ck_assert_int_eq(count_events("grant.requested",
	    "grant/worker/scratch@node-b"), 1);
	ck_assert_int_eq(grant_read("worker/scratch", &g), TL_ENOTFOUND);
	ck_assert_int_eq(grant_read("worker/scratch@node-b", &g), 0);
	ck_assert_str_eq(g.scope, "per-instance");
	ck_assert_str_eq(g.node, "node-b");
	st = status_of("worker", NULL);
	ck_assert_str_eq(jstr(st_req(st, "node-a", "scratch"), "grant"),
	    "worker/scratch@node-a");
	ck_assert_str_eq(jstr(st_req(st, "node-b", "scratch"), "grant"),
	    "worker/scratch@node-b");
	json_decref(st);
	/* A per-instance grant is bound per instance. */
	T_EXIT(4, "bind", "worker/scratch", "node-a/postgres");
	ck_err_has("per-instance");
}
END_TEST

START_TEST(test_seed_second_provider)
{
	json_t *st;
	size_t bound;

	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	T_OK("assign", "postgres", "node-b", "--expose", "network");
	T_OK("assign", "game", "node-a");
	CK_BOUND("game", "node-a", "db", "node-b/postgres",
	    TL_BIND_ONLY_CANDIDATE);
	bound = count_events("binding.*", NULL);
	ck_assert_int_eq(bound, 1);
	/* A co-located provider appears: nothing already bound moves. */
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	T_OK("assign", "game", "node-b");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	ck_assert_int_eq(count_events("binding.*", NULL), bound);
	ck_assert_int_eq(count_events("grant.requested", NULL), 1);
	CK_BOUND("game", "node-a", "db", "node-b/postgres",
	    TL_BIND_ONLY_CANDIDATE);
	st = status_of("game", NULL);
	ck_assert_str_eq(jstr(st_req(st, "node-b", "db"), "provider"),
	    "node-b/postgres");
	json_decref(st);
}
END_TEST

START_TEST(test_seed_embedded_private)
{
	json_t *st;
	const json_t *r;

	node_add("node-a");
	/* The consumer first: vector-search is not declared yet. */
	T_OK("apply", mf("asker.yaml", "module: asker\nrequires:\n"
	    "  db: {type: postgres-database, from: vector-search}\n"));
	T_OK("apply", fx("vector-search.yaml"));
	T_OK("assign", "vector-search", "node-a");
	T_OK("assign", "asker", "node-a");
	/* vector-search is no provider. */
	T_OK("graph", "--json");
	{
		json_t *g = out_json();

		ck_assert_int_eq(json_array_size(json_object_get(g,
		    "providers")), 0);
		json_decref(g);
	}
	ck_assert_int_eq(count_events("provider.*", NULL), 0);
	ck_assert_int_eq(count_events("binding.*", NULL), 0);
	st = status_of("asker", NULL);
	r = st_req(st, "node-a", "db");
	ck_assert_str_eq(jstr(r, "state"), "pending");
	ck_assert_msg(strstr(jstr(r, "reason"), "embedded private instance"),
	    "%s", jstr(r, "reason"));
	json_decref(st);
	T_EXIT(3, "bind", "asker/db", "node-a/vector-search");
	ck_assert_int_eq(count_events("binding.*", NULL), 0);
	/* The module carrying it requires nothing: it is ready. */
	st = status_of("vector-search", NULL);
	ck_assert_str_eq(jstr(st, "state"), "ready (nothing required)");
	json_decref(st);
}
END_TEST

START_TEST(test_seed_nothing_vs_pending)
{
	json_t *st;

	node_add("node-a");
	T_OK("apply", fx("static-site.yaml"), fx("game.yaml"),
	    fx("postgres.yaml"));
	st = status_of("game", NULL);
	ck_assert_str_eq(jstr(st, "state"), "declared, not assigned");
	json_decref(st);
	T_OK("assign", "static-site", "node-a");
	T_OK("assign", "game", "node-a");

	T_OK("status", "static-site");
	ck_out_has("static-site: ready (nothing required)");
	st = status_of("static-site", NULL);
	ck_assert_str_eq(jstr(st, "state"), "ready (nothing required)");
	ck_assert_str_eq(st_asg_state(st, "node-a"),
	    "ready (nothing required)");
	json_decref(st);

	/* Requirements never acted on: pending, with the reason. */
	T_EXIT(6, "status", "game");
	ck_out_has("game: pending");
	st = status_of("game", NULL);
	ck_assert_str_eq(jstr(st, "state"), "pending");
	ck_assert_str_eq(st_asg_state(st, "node-a"), "pending");
	ck_assert_msg(strstr(jstr(st_req(st, "node-a", "db"), "reason"),
	    "postgres not assigned to any node"), "%s",
	    jstr(st_req(st, "node-a", "db"), "reason"));
	json_decref(st);
	/* Once bound it is no longer pending (but not ready either). */
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	st = status_of("game", NULL);
	ck_assert_str_eq(jstr(st, "state"), "bound");
	json_decref(st);
	/* Presence of a module that does not exist: pending. */
	T_OK("apply", mf("site.yaml", "module: static-site\n"
	    "requires:\n  term: {presence: terminal}\n"));
	st = status_of("static-site", NULL);
	ck_assert_str_eq(jstr(st, "state"), "pending");
	ck_assert_msg(strstr(jstr(st_req(st, "node-a", "term"), "reason"),
	    "terminal is not declared"), "%s",
	    jstr(st_req(st, "node-a", "term"), "reason"));
	json_decref(st);
}
END_TEST

START_TEST(test_seed_apply_changes_only)
{
	size_t n;
	char *before, *after;

	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	ck_out_has("applied 2 module(s): 3 event(s) appended");
	n = count_events("*", NULL);
	before = log_dump();
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	ck_out_has("0 event(s) appended");
	/* The same content in another order and style. */
	T_OK("apply", mf("game.yaml", "module: game\nrequires:\n  db: {from: "
	    "postgres, env: {password: DB_PASSWORD, host: DB_HOST}, type: "
	    "postgres-database}\nenv: {DB_PASSWORD: '', DB_HOST: ''}\n"));
	ck_out_has("0 event(s) appended");
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);

	/* A requirement changes: one requirement.declared, nothing else. */
	T_OK("apply", mf("game.yaml", "module: game\nenv: {DB_HOST: '', "
	    "DB_PASSWORD: ''}\nrequires:\n  db: {type: postgres-database, "
	    "from: postgres, env: {host: DB_HOST, password: DB_PASSWORD}, "
	    "max-credential-age: 30d}\n"));
	ck_out_has("1 event(s) appended");
	ck_assert_int_eq(count_events("*", NULL), n + 1);
	ck_assert_int_eq(count_events("requirement.declared",
	    "module/game"), 2);
	/* The module's own env changes: one module.declared. */
	T_OK("apply", mf("game.yaml", "module: game\nenv: {DB_HOST: '', "
	    "DB_PASSWORD: '', LOG_LEVEL: info}\nrequires:\n  db: {type: "
	    "postgres-database, from: postgres, env: {host: DB_HOST, "
	    "password: DB_PASSWORD}, max-credential-age: 30d}\n"));
	ck_out_has("1 event(s) appended");
	ck_assert_int_eq(count_events("module.declared", "module/game"), 2);
	/* A requirement added and one withdrawn. */
	T_OK("apply", mf("game.yaml", "module: game\nenv: {DB_HOST: '', "
	    "DB_PASSWORD: '', LOG_LEVEL: info}\nrequires:\n  term: "
	    "{presence: terminal}\n"));
	ck_out_has("2 event(s) appended");
	ck_assert_int_eq(count_events("requirement.withdrawn",
	    "module/game"), 1);
	ck_assert_int_eq(count_events("*", NULL), n + 4);
}
END_TEST

START_TEST(test_seed_dry_run)
{
	char *before, *after;

	node_add("node-a");
	before = log_dump();
	T_OK("apply", "--dry-run", fx("postgres.yaml"), fx("game.yaml"));
	ck_out_has("dry run: would append");
	ck_out_has("module.declared module/postgres");
	ck_out_has("requirement.declared module/game");
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	T_OK("apply", "--dry-run", "--json", fx("postgres.yaml"));
	ck_out_has("\"dry_run\":true");
	ck_out_has("\"events\":1");
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	/* Really applied, a dry run of the same has nothing to say. */
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	before = log_dump();
	T_OK("apply", "-n", fx("postgres.yaml"), fx("game.yaml"));
	ck_out_has("nothing: already as declared");
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	/* A dry run that fails validation is refused like the real one. */
	T_EXIT(4, "apply", "--dry-run", fx("bad-unmapped.yaml"));
}
END_TEST

START_TEST(test_seed_at_seq)
{
	json_t *st, *g;
	char at[32], *before, *after;
	uint64_t seq;

	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	T_OK("assign", "postgres", "node-b", "--expose", "network");
	seq = last_seq();	/* postgres provides, game not assigned */
	snprintf(at, sizeof(at), "%llu", (unsigned long long)seq);
	T_OK("assign", "game", "node-a");
	T_OK("assign", "game", "node-b");
	T_OK("unassign", "game", "node-a");

	before = log_dump();
	st = status_of("game", at);
	ck_assert_str_eq(jstr(st, "state"), "declared, not assigned");
	ck_assert_int_eq(json_array_size(json_object_get(st, "assignments")),
	    0);
	json_decref(st);
	T_OK("graph", "--json", "--at", at);
	g = out_json();
	ck_assert_int_eq(json_array_size(json_object_get(g, "assignments")),
	    1);
	ck_assert_int_eq(json_array_size(json_object_get(g, "providers")), 1);
	json_decref(g);
	T_OK("explain", "game", "--at", at);
	ck_out_has("not assigned to any node");
	/* Before the provider existed. */
	snprintf(at, sizeof(at), "%llu", (unsigned long long)seq - 1);
	T_OK("graph", "--json", "--at", at);
	g = out_json();
	ck_assert_int_eq(json_array_size(json_object_get(g, "providers")), 0);
	json_decref(g);
	T_EXIT(3, "status", "game", "--at", "1");	/* not declared yet */
	/* Looking at the past changes neither the log nor the present. */
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	st = status_of("game", NULL);
	ck_assert_int_eq(json_array_size(json_object_get(st, "assignments")),
	    1);
	ck_assert_str_eq(st_asg_state(st, "node-b"), "bound");
	json_decref(st);
	T_OK("graph", "--json");
	g = out_json();
	ck_assert_int_eq(json_array_size(json_object_get(g, "assignments")),
	    2);
	json_decref(g);
	T_EXIT(2, "status", "--at", "0");
	T_EXIT(2, "graph", "--at", "x");
	T_OK("rebuild", "--check");
	/* Stepped, the present is unchanged; a step must be a count. */
	before = log_dump();
	T_OK("rebuild", "--step", "3");
	T_OK("rebuild", "--check");
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	st = status_of("game", NULL);
	ck_assert_str_eq(st_asg_state(st, "node-b"), "bound");
	json_decref(st);
	T_EXIT(2, "rebuild", "--step", "0");
	T_EXIT(2, "rebuild", "--step", "-5");
	T_EXIT(2, "rebuild", "--step", "many");
}
END_TEST

/*
 * The headline of a module and of an assignment is the worst of its
 * grants: an assignment announced ready whose grant then fails, whose
 * provider becomes unreachable, whose holder a forced rotation cut off,
 * or whose grant goes missing is "unhealthy" (with the reason on the
 * requirement) and status exits 6; each clears when its cause does.
 */
static void
ck_unhealthy(int line, const char *needle)
{
	json_t *st = status_of("game", NULL);
	const json_t *r = st_req(st, "node-a", "db");

	ck_assert_msg(strcmp(jstr(st, "state"), "unhealthy") == 0,
	    "line %d: module state %s, want unhealthy", line,
	    jstr(st, "state"));
	ck_assert_msg(strcmp(st_asg_state(st, "node-a"), "unhealthy") == 0,
	    "line %d: assignment state %s, want unhealthy", line,
	    st_asg_state(st, "node-a"));
	ck_assert_msg(strstr(jstr(r, "reason"), needle) != NULL,
	    "line %d: reason '%s' does not say '%s'", line, jstr(r, "reason"),
	    needle);
	json_decref(st);
	expect(line, 6, "status", "game", (const char *)NULL);
	expect(line, 6, "status", (const char *)NULL);
}

static void
ck_ready(int line)
{
	json_t *st = status_of("game", NULL);

	ck_assert_msg(strcmp(st_asg_state(st, "node-a"), "ready") == 0,
	    "line %d: assignment state %s, want ready", line,
	    st_asg_state(st, "node-a"));
	json_decref(st);
	expect(line, 0, "status", "game", (const char *)NULL);
}

START_TEST(test_headline_worst_grant)
{
	struct tl_body b;

	node_add("node-a");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	T_OK("assign", "game", "node-a");
	react(TL_EV_GRANT_PROVISIONING, "game/db", "node-a/postgres");
	react(TL_EV_GRANT_PROVISIONED, "game/db", "node-a/postgres");
	tl_body_init(&b);
	tl_body_str(&b, "module", "game");
	tl_body_str(&b, "node", "node-a");
	emit_ev("assignment.ready", "assignment/game@node-a", &b);
	ck_ready(__LINE__);

	/* The provider becomes unreachable. */
	tl_body_str(&b, "id", "node-a/postgres");
	tl_body_str(&b, "reason", "connection refused");
	tl_body_str(&b, "kind", "provider-unreachable");
	emit_ev(TL_EV_PROVIDER_UNREACHABLE, "provider/node-a/postgres", &b);
	ck_unhealthy(__LINE__, "unreachable");
	tl_body_str(&b, "id", "node-a/postgres");
	emit_ev("provider.recovered", "provider/node-a/postgres", &b);
	ck_ready(__LINE__);

	/* The grant fails (a repair that could not be made, say). */
	tl_body_str(&b, "grant", "game/db");
	tl_body_str(&b, "reason", "permission denied");
	emit_ev(TL_EV_GRANT_FAILED, "grant/game/db", &b);
	ck_unhealthy(__LINE__, "permission denied");
	react(TL_EV_GRANT_PROVISIONED, "game/db", "node-a/postgres");
	ck_ready(__LINE__);

	/* A forced rotation cuts the holder off. */
	tl_body_str(&b, "grant", "game/db");
	tl_body_u64(&b, "from", 1);
	tl_body_u64(&b, "to", 2);
	tl_body_u64(&b, "deadline_ns", 1);
	tl_body_str(&b, "reason", "operator");
	emit_ev("rotation.started", "grant/game/db", &b);
	tl_body_str(&b, "grant", "game/db");
	tl_body_u64(&b, "version", 2);
	tl_body_str(&b, "user", "u2");
	emit_ev("credential.activated", "grant/game/db", &b);
	tl_body_str(&b, "grant", "game/db");
	tl_body_u64(&b, "version", 1);
	tl_body_str(&b, "user", "u1");
	tl_body_bool(&b, "forced", 1);
	tl_body_arr(&b, "cut_off");
	tl_body_str(&b, NULL, "game@node-a");
	tl_body_end(&b);
	emit_ev("credential.retired", "grant/game/db", &b);
	tl_body_str(&b, "grant", "game/db");
	tl_body_u64(&b, "version", 2);
	emit_ev("rotation.completed", "grant/game/db", &b);
	ck_unhealthy(__LINE__, "cut off");
	T_OK("ack", "node-a", "game", "2");
	ck_ready(__LINE__);

	/* The database goes missing. */
	tl_body_str(&b, "grant", "game/db");
	tl_body_str(&b, "reason", "database is missing");
	tl_body_str(&b, "message", "gone");
	emit_ev(TL_EV_GRANT_MISSING, "grant/game/db", &b);
	ck_unhealthy(__LINE__, "missing");
	tl_body_free(&b);
}
END_TEST

/*
 * tally status without a module ends with what must not be forgotten:
 * a revoked grant's retained data (and how much), a rotation waiting
 * and on whom, a holder cut off, a scheduled rotation overdue.
 */
static const json_t *
attn_entry(const json_t *at, const char *list, const char *grant)
{
	const json_t *e;
	size_t i;

	json_array_foreach(json_object_get(at, list), i, e)
		if (strcmp(jstr(e, "grant"), grant) == 0)
			return e;
	return NULL;
}

static void
db_module(const char *name, const char *extra)
{
	char text[512], file[80];

	snprintf(text, sizeof(text), "module: %s\nrequires:\n"
	    "  db: {type: postgres-database, from: postgres%s}\n", name,
	    extra);
	snprintf(file, sizeof(file), "%s.yaml", name);
	T_OK("apply", mf(file, text));
	T_OK("assign", name, "node-a");
	snprintf(file, sizeof(file), "%s/db", name);
	react(TL_EV_GRANT_PROVISIONING, file, "node-a/postgres");
	react(TL_EV_GRANT_PROVISIONED, file, "node-a/postgres");
}

/*
 * tally remove says, before it acts, what revoking does to each grant,
 * as the provider's driver declares it (issue 12).
 */
START_TEST(test_remove_says_revocation)
{
	node_add("node-a");
	T_OK("apply", fx("postgres.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	db_module("keep", "");
	T_OK("remove", "keep");
	ck_out_has("revoking keep/db on node-a/postgres (driver postgres): "
	    "the logins are disabled");
	ck_out_has("retained: ");
	ck_out_has("tally purge keep/db drops");
	ck_out_has("module keep removed");
}
END_TEST

START_TEST(test_status_attention)
{
	struct tl_body b;
	json_t *st;
	const json_t *at, *e;

	node_add("node-a");
	T_OK("apply", fx("postgres.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	db_module("keep", "");
	db_module("turn", "");
	db_module("cut", "");
	db_module("old", ", max-credential-age: 1s");
	tl_body_init(&b);
	/* keep: removed, its data retained (5 MiB). */
	T_OK("remove", "keep");
	tl_body_str(&b, "grant", "keep/db");
	tl_body_str(&b, "policy", "retain");
	tl_body_u64(&b, "size", 5 * 1048576);
	emit_ev(TL_EV_GRANT_REVOKED, "grant/keep/db", &b);
	/* turn: a rotation waiting on its holder. */
	tl_body_str(&b, "grant", "turn/db");
	tl_body_u64(&b, "from", 1);
	tl_body_u64(&b, "to", 2);
	tl_body_u64(&b, "deadline_ns", 0);
	tl_body_str(&b, "reason", "operator");
	emit_ev("rotation.started", "grant/turn/db", &b);
	tl_body_str(&b, "grant", "turn/db");
	tl_body_u64(&b, "version", 2);
	tl_body_str(&b, "user", "u2");
	emit_ev("credential.activated", "grant/turn/db", &b);
	/* cut: a forced rotation cut its holder off. */
	tl_body_str(&b, "grant", "cut/db");
	tl_body_u64(&b, "from", 1);
	tl_body_u64(&b, "to", 2);
	tl_body_u64(&b, "deadline_ns", 1);
	tl_body_str(&b, "reason", "operator");
	emit_ev("rotation.started", "grant/cut/db", &b);
	tl_body_str(&b, "grant", "cut/db");
	tl_body_u64(&b, "version", 1);
	tl_body_str(&b, "user", "u1");
	tl_body_bool(&b, "forced", 1);
	tl_body_arr(&b, "cut_off");
	tl_body_str(&b, NULL, "cut@node-a");
	tl_body_end(&b);
	emit_ev("credential.retired", "grant/cut/db", &b);
	tl_body_str(&b, "grant", "cut/db");
	tl_body_u64(&b, "version", 2);
	emit_ev("rotation.completed", "grant/cut/db", &b);
	tl_body_free(&b);
	/* old: its credential outlives max-credential-age 1s. */
	usleep(1200 * 1000);

	run_argv((const char *[]){ "status", "--json", NULL });
	ck_assert_int_eq(H.code, 6);	/* cut's holder is cut off */
	st = out_json();
	at = json_object_get(st, "attention");
	ck_assert_msg(at != NULL, "no attention in:\n%s", H.out);
	ck_assert_ptr_nonnull(e = attn_entry(at, "retained", "keep/db"));
	ck_assert_int_eq(json_integer_value(json_object_get(e, "bytes")),
	    5 * 1048576);
	ck_assert_str_eq(jstr(e, "provider"), "node-a/postgres");
	ck_assert_ptr_nonnull(e = attn_entry(at, "rotations_waiting",
	    "turn/db"));
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(e,
	    "waiting_on"), 0)), "node-a/turn");
	ck_assert_ptr_nonnull(e = attn_entry(at, "cut_off", "cut/db"));
	ck_assert_str_eq(jstr(e, "holder"), "node-a/cut");
	ck_assert_int_eq(json_integer_value(json_object_get(e, "version")), 2);
	ck_assert_ptr_nonnull(e = attn_entry(at, "rotations_overdue",
	    "old/db"));
	ck_assert_int_eq(json_integer_value(json_object_get(e, "max_age_s")),
	    1);
	ck_assert_ptr_null(attn_entry(at, "rotations_overdue", "turn/db"));
	ck_assert_ptr_null(attn_entry(at, "retained", "old/db"));
	json_decref(st);
	/* In words too. */
	T_EXIT(6, "status");
	ck_out_has("not to forget:");
	ck_out_has("retained data: keep/db on node-a/postgres");
	ck_out_has("5.0 MiB");
	ck_out_has("rotation of turn/db (v1 → v2) waiting on node-a/turn");
	ck_out_has("cut off: node-a/cut from cut/db (has not acknowledged v2)");
	ck_out_has("rotation overdue: old/db");
}
END_TEST

START_TEST(test_seed_revocation)
{
	struct tl_grant g;

	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"), fx("worker.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	T_OK("assign", "game", "node-a");
	T_OK("assign", "game", "node-b");
	T_OK("assign", "worker", "node-a");
	T_OK("assign", "worker", "node-b");
	ck_assert_int_eq(count_events("revocation.requested", NULL), 0);

	/* Unassign: the instance's per-instance grant is revoked. */
	T_OK("unassign", "worker", "node-a");
	ck_assert_int_eq(count_events("revocation.requested",
	    "grant/worker/scratch@node-a"), 1);
	ck_assert_int_eq(count_events("revocation.requested", NULL), 1);
	ck_assert_int_eq(grant_read("worker/scratch@node-a", &g), 0);
	ck_assert_str_eq(g.state, TL_GRANT_REVOKING);
	ck_assert_str_eq(g.reason, "assignment removed");
	ck_assert_int_eq(grant_read("worker/scratch@node-b", &g), 0);
	ck_assert_str_eq(g.state, TL_GRANT_REQUESTED);

	/* A shared grant stays while another instance holds it. */
	T_OK("unassign", "game", "node-a");
	ck_assert_int_eq(count_events("revocation.requested", NULL), 1);
	T_EXIT(3, "unassign", "game", "node-a");

	/* Remove: every grant of the module. */
	T_OK("remove", "game");
	ck_assert_int_eq(count_events("revocation.requested",
	    "grant/game/db"), 1);
	ck_assert_int_eq(grant_read("game/db", &g), 0);
	ck_assert_str_eq(g.state, TL_GRANT_REVOKING);
	ck_assert_str_eq(g.reason, "module removed");
	ck_assert_int_eq(count_events("module.removed", "module/game"), 1);
	T_EXIT(3, "status", "game");
	T_OK("remove", "worker");
	ck_assert_int_eq(count_events("revocation.requested",
	    "grant/worker/scratch@node-b"), 1);
	/* Not twice for the one already revoking. */
	ck_assert_int_eq(count_events("revocation.requested", NULL), 3);
	T_EXIT(3, "remove", "worker");
	/* Revoking is still work for the provider: it may not go yet. */
	T_EXIT(4, "unassign", "postgres", "node-a");
	ck_err_has("still serves 3 grant(s)");
	react(TL_EV_GRANT_REVOKED, "game/db", "node-a/postgres");
	react(TL_EV_GRANT_REVOKED, "worker/scratch@node-a", "node-a/postgres");
	react(TL_EV_GRANT_REVOKED, "worker/scratch@node-b", "node-a/postgres");
	T_OK("unassign", "postgres", "node-a");
	ck_assert_int_eq(count_events("provider.retired", NULL), 1);
	T_OK("rebuild", "--check");
	T_OK("verify");
}
END_TEST

START_TEST(test_seed_node_rm)
{
	char *before, *after;

	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("static-site.yaml"));
	T_OK("assign", "static-site", "node-a");
	before = log_dump();
	T_EXIT(4, "node", "rm", "node-a");
	ck_err_has("node node-a still runs static-site");
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(after);
	free(before);
	T_EXIT(3, "node", "rm", "node-z");
	T_OK("node", "rm", "node-b");
	T_OK("unassign", "static-site", "node-a");
	T_OK("node", "rm", "node-a");
	ck_assert_int_eq(count_events("node.removed", NULL), 2);
	T_EXIT(3, "assign", "static-site", "node-a");
	ck_err_has("no node node-a");
	/* A name can come back. */
	node_add("node-a");
	T_OK("assign", "static-site", "node-a");
	T_OK("rebuild", "--check");
}
END_TEST

/* --- what a new user meets (issue 11) -------------------------------- */

/* Does the file at path hold the bytes of s (an ELF symbol name)? */
static int
file_has(const char *path, const char *s)
{
	FILE *fp = fopen(path, "rb");
	size_t n = strlen(s), have = 0;
	char buf[65536];
	size_t got, i;
	int found = 0;

	ck_assert_msg(fp != NULL, "%s: %s", path, strerror(errno));
	/* A match may straddle two reads: keep the last n - 1 bytes. */
	while (!found && (got = fread(buf + have, 1, sizeof(buf) - have,
	    fp)) > 0) {
		got += have;
		for (i = 0; i + n <= got; i++)
			if (memcmp(buf + i, s, n) == 0) {
				found = 1;
				break;
			}
		have = got >= n - 1 ? n - 1 : got;
		memmove(buf, buf + got - have, have);
	}
	fclose(fp);
	return found;
}

/*
 * A suite built with ASan drives binaries built with it: otherwise the
 * CLI-level tests of `make unit-asan` check nothing of tally itself.
 */
START_TEST(test_sanitized_binaries)
{
#if defined(__SANITIZE_ADDRESS__)
	char d[4200];

	ck_assert_msg(file_has(H.bin, "__asan_init"), "%s is not built "
	    "with ASan, but this suite is (TALLY_BIN)", H.bin);
	snprintf(d, sizeof(d), "%.*sd", (int)strlen(H.bin), H.bin);
	ck_assert_msg(file_has(d, "__asan_init"), "%s is not built with "
	    "ASan, but this suite is (TALLY_BIN)", d);
#else
	(void)file_has;	/* the normal build may drive either binary */
#endif
}
END_TEST

/* The JSON value at key k of the assignment module@node in graph --json. */
static json_t *
asg_settings(const char *module, const char *node)
{
	json_t *g, *a, *r = NULL;
	size_t i;

	T_OK("graph", "--json");
	g = out_json();
	json_array_foreach(json_object_get(g, "assignments"), i, a)
		if (strcmp(jstr(a, "module"), module) == 0 &&
		    strcmp(jstr(a, "node"), node) == 0)
			r = json_incref(json_object_get(a, "settings"));
	json_decref(g);
	ck_assert_msg(r != NULL, "no assignment %s@%s", module, node);
	return r;
}

/* tally --version and tallyd --version: core/version.h, and git's stamp. */
START_TEST(test_version)
{
	char bin[sizeof(H.bin)], want[64], cmd[8300], desc[128] = "";
	FILE *fp;

	snprintf(want, sizeof(want), "tally %s", TL_VERSION);
	T_OK("--version");
	ck_assert_msg(strncmp(H.out, want, strlen(want)) == 0, "tally "
	    "--version printed '%s', want '%s…'", H.out, want);
	T_OK("--json", "--version");
	{
		json_t *j = out_json();

		ck_assert_str_eq(jstr(j, "release"), TL_VERSION);
		json_decref(j);
	}
	/* A tree git knows is stamped with its description. */
	snprintf(cmd, sizeof(cmd), "git -C '%s' describe --always 2>/dev/null",
	    H.src);
	if ((fp = popen(cmd, "r")) != NULL) {
		if (fgets(desc, sizeof(desc), fp) == NULL)
			desc[0] = '\0';
		desc[strcspn(desc, "\n")] = '\0';
		pclose(fp);
	}
	T_OK("--version");
	if (desc[0] != '\0')
		ck_assert_msg(strstr(H.out, desc) != NULL, "tally --version "
		    "printed '%s', without the git description %s", H.out, desc);
	/* tallyd, beside tally. */
	memcpy(bin, H.bin, sizeof(bin));
	ck_assert(strlen(bin) + 2 < sizeof(H.bin));
	strcat(H.bin, "d");
	T_OK("--version");
	memcpy(H.bin, bin, sizeof(bin));
	snprintf(want, sizeof(want), "tallyd %s", TL_VERSION);
	ck_assert_msg(strncmp(H.out, want, strlen(want)) == 0, "tallyd "
	    "--version printed '%s', want '%s…'", H.out, want);
}
END_TEST

/* assign checks keys and values against the driver's declared settings. */
START_TEST(test_settings_checked)
{
	static const char *const bad[][3] = {
		{ "--set", "prot=5432", "unknown setting 'prot'" },
		{ "--set", "admin-usr=postgres", "unknown setting 'admin-usr'" },
		{ "--set", "port=abc", "port=abc: expected a port" },
		{ "--set", "port=99999", "port=99999: expected a port" },
		{ "--set", "port=-1", "port=-1: expected a port" },
		{ "--set", "port=54\n32", "control character" },
		{ "--set", "admin-host=db1.lan\nx", "control character" },
		{ "--set", "admin-password=pw", "is a secret" },
		{ "--set", "revoke-public-connect=maybe", "expected yes or no" },
		{ "--set", "migration-timeout=soon", "expected a duration" },
		{ "--set", "password-length=8", "password-length=8: expected "
		    "an integer, 24-128" },
		{ "--set", "password-length=129", "expected an integer, 24-128" },
		{ "--set", "password-alphabet=emoji", "password-alphabet=emoji: "
		    "expected base64url, alnum, hex or symbols" },
	};
	json_t *set;
	char *before, *after;
	size_t i;

	node_add("node-a");
	T_OK("apply", fx("postgres.yaml"));
	before = log_dump();
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		T_EXIT(4, "assign", "postgres", "node-a", bad[i][0], bad[i][1]);
		ck_err_has(bad[i][2]);
	}
	T_EXIT(4, "assign", "postgres", "node-a", "--set", "prot=5432");
	/* The refusal lists the known keys. */
	ck_err_has("port");
	ck_err_has("admin-user");
	ck_err_has("admin-host");
	ck_err_has("admin-db");
	after = log_dump();
	ck_assert_str_eq(before, after);
	free(before);
	free(after);

	T_OK("assign", "postgres", "node-a", "--set", "port=5432", "--set",
	    "admin-user=postgres", "--set", "admin-db=postgres");
	/* Again: what is given changes, the rest stays, and it says so. */
	T_OK("assign", "postgres", "node-a", "--set", "port=5433");
	ck_out_has("port: 5432 -> 5433");
	set = asg_settings("postgres", "node-a");
	ck_assert_str_eq(jstr(set, "port"), "5433");
	ck_assert_str_eq(jstr(set, "admin-user"), "postgres");
	ck_assert_str_eq(jstr(set, "admin-db"), "postgres");
	json_decref(set);
	/* The same again appends nothing. */
	ck_assert_int_eq(count_events("assignment.configured", NULL), 1);
	T_OK("assign", "postgres", "node-a", "--set", "port=5433");
	ck_out_has("nothing changed");
	ck_assert_int_eq(count_events("assignment.configured", NULL), 1);
	T_OK("assign", "postgres", "node-a", "--unset", "admin-db");
	ck_out_has("admin-db: removed");
	set = asg_settings("postgres", "node-a");
	ck_assert_ptr_null(json_object_get(set, "admin-db"));
	ck_assert_str_eq(jstr(set, "port"), "5433");
	json_decref(set);
	T_EXIT(4, "assign", "postgres", "node-a", "--unset", "admin-db");
	/* Exposure too is kept unless given. */
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	T_OK("assign", "postgres", "node-a", "--set", "admin-user=tally");
	T_OK("graph", "--json");
	ck_out_has("\"expose\":\"network\"");

	/* provider move --set is checked the same way. */
	node_add("node-b");
	T_EXIT(4, "provider", "move", "node-a/postgres", "node-b", "--set",
	    "prot=5432");
	ck_err_has("unknown setting 'prot'");
	T_EXIT(4, "provider", "move", "node-a/postgres", "node-b", "--set",
	    "port=99999");
	ck_err_has("expected a port");

	/*
	 * A module that is no provider: nothing reads a setting of its
	 * assignment, so one given is refused, not recorded.
	 */
	T_OK("apply", fx("static-site.yaml"));
	T_EXIT(4, "assign", "static-site", "node-a", "--set", "note=anything");
	ck_err_has("static-site provides nothing");
	ck_err_has("--set note");
	T_OK("assign", "static-site", "node-a");
	T_EXIT(4, "assign", "static-site", "node-a", "--set", "note=x");
	ck_err_has("provides nothing");
	T_OK("graph", "--json");
	ck_assert_ptr_null(strstr(H.out, "\"note\""));
	T_OK("rebuild", "--check");
}
END_TEST

/* The events a --json write printed are the log's last ones. */
static void
ck_appended(int line, const char *type, const char *stream)
{
	json_t *j = out_json(), *arr = json_object_get(j, "appended"), *e;
	uint64_t last = 0;
	size_t i;
	int found = 0;
	char *saved = strdup(H.out);

	ck_assert_msg(json_is_array(arr), "line %d: tally%s --json: no "
	    "\"appended\":\n%s", line, H.cmdline, H.out);
	json_array_foreach(arr, i, e) {
		ck_assert_msg(json_integer_value(json_object_get(e, "seq")) >
		    0 && *jstr(e, "type") && *jstr(e, "stream"), "line %d: "
		    "%s", line, saved);
		if (strcmp(jstr(e, "type"), type) == 0 &&
		    strcmp(jstr(e, "stream"), stream) == 0)
			found = 1;
		last = (uint64_t)json_integer_value(json_object_get(e, "seq"));
	}
	ck_assert_msg(found, "line %d: %s has no %s in %s", line, saved, type,
	    stream);
	json_decref(j);
	ck_assert_msg(last == last_seq(), "line %d: appended up to %llu, the "
	    "log ends at %llu", line, (unsigned long long)last,
	    (unsigned long long)last_seq());
	free(saved);
}
#define CK_APPENDED(t, s)	ck_appended(__LINE__, t, s)

START_TEST(test_json_writes)
{
	json_t *j;
	char *home;

	T_OK("--json", "node", "add", "node-a", "--routable-name", "a.lan",
	    "--key-out", H.key);
	CK_APPENDED("node.added", "node/node-a");
	T_OK("node", "add", "node-b", "--routable-name", "b.lan", "--json",
	    "--key-out", H.key2);
	CK_APPENDED("node.added", "node/node-b");
	T_OK("--json", "apply", fx("postgres.yaml"), fx("game.yaml"));
	CK_APPENDED("module.declared", "module/game");
	T_OK("--json", "assign", "postgres", "node-a", "--expose", "network");
	CK_APPENDED("provider.registered", "provider/node-a/postgres");
	node_add("node-c");
	T_OK("assign", "postgres", "node-c", "--expose", "network");
	T_OK("--json", "assign", "game", "node-b");
	CK_APPENDED("binding.ambiguous", "binding/game/db");
	T_OK("--json", "bind", "game/db", "node-a/postgres");
	CK_APPENDED("binding.made", "binding/game/db");
	T_OK("--json", "unassign", "game", "node-b");
	CK_APPENDED("assignment.removed", "assignment/game@node-b");
	T_OK("--json", "remove", "game");
	CK_APPENDED("module.removed", "module/game");
	T_OK("--json", "node", "rm", "node-b");
	CK_APPENDED("node.removed", "node/node-b");
	/* A write that changes nothing says so: an empty list. */
	T_OK("--json", "apply", fx("postgres.yaml"));
	j = out_json();
	ck_assert_int_eq(json_array_size(json_object_get(j, "appended")), 0);
	json_decref(j);

	/* Global options before the command. */
	T_OK("--json", "status");
	json_decref(out_json());
	home = strdup(H.home);
	unsetenv("TALLY_HOME");
	T_OK("--home", home, "nodes");
	ck_out_has("node-a (a.lan)");
	T_OK("--home", home, "--json", "nodes");
	json_decref(out_json());
	T_EXIT(2, "--bogus", "status");
	setenv("TALLY_HOME", home, 1);
	free(home);
}
END_TEST

/* tally nodes, modules, providers: human and --json. */
START_TEST(test_listing)
{
	json_t *j, *e;

	T_OK("nodes");
	ck_out_has("no nodes");
	node_add("node-a");
	node_add("node-b");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");
	T_OK("assign", "game", "node-a");
	T_OK("assign", "game", "node-b");

	T_OK("nodes");
	ck_out_has("node-a (node-a.mesh.test)");
	ck_out_has("modules: game, postgres");
	T_OK("nodes", "--json");
	j = out_json();
	ck_assert_int_eq(json_array_size(json_object_get(j, "nodes")), 2);
	e = json_array_get(json_object_get(j, "nodes"), 1);
	ck_assert_str_eq(jstr(e, "name"), "node-b");
	ck_assert_int_eq(json_array_size(json_object_get(e, "modules")), 1);
	json_decref(j);

	T_OK("modules");
	ck_out_has("postgres\n  provides: postgres-database");
	T_OK("modules", "--json");
	j = out_json();
	ck_assert_int_eq(json_array_size(json_object_get(j, "modules")), 2);
	e = json_array_get(json_object_get(j, "modules"), 0);
	ck_assert_str_eq(jstr(e, "name"), "game");
	ck_assert_int_eq(json_array_size(json_object_get(e, "nodes")), 2);
	ck_assert_int_ge(json_array_size(json_object_get(e, "requires")), 1);
	json_decref(j);

	T_OK("providers");
	ck_out_has("node-a/postgres on node-a");
	ck_out_has("postgres-database (driver postgres");
	T_OK("providers", "--json");
	j = out_json();
	ck_assert_int_eq(json_array_size(json_object_get(j, "providers")), 1);
	e = json_array_get(json_object_get(j, "providers"), 0);
	ck_assert_str_eq(jstr(e, "id"), "node-a/postgres");
	ck_assert_int_ge(json_integer_value(json_object_get(e, "grants")), 1);
	json_decref(j);
}
END_TEST

/*
 * tally providers --tag: a provider is found by a tag of its type's
 * driver (postgres-database: database, sql); what revoke, retain and
 * purge do there is shown from the driver's declaration (issue 12).
 */
START_TEST(test_providers_tag)
{
	json_t *j, *e;

	node_add("node-a");
	T_OK("apply", fx("postgres.yaml"), fx("game.yaml"));
	T_OK("assign", "postgres", "node-a", "--expose", "network");

	T_OK("providers", "--tag", "database");
	ck_out_has("node-a/postgres on node-a");
	ck_out_has("tags database, sql");
	ck_out_has("purge: drops the database");
	T_OK("providers", "--tag", "sql", "--json");
	j = out_json();
	ck_assert_int_eq(json_array_size(json_object_get(j, "providers")), 1);
	e = json_array_get(json_object_get(json_array_get(json_object_get(j,
	    "providers"), 0), "types"), 0);
	ck_assert(json_is_true(json_object_get(json_object_get(e,
	    "revocation"), "retain")));
	json_decref(j);
	T_OK("providers", "--tag", "queue");
	ck_out_has("no providers with tag queue");
	T_OK("providers", "--tag", "queue", "--json");
	j = out_json();
	ck_assert_int_eq(json_array_size(json_object_get(j, "providers")), 0);
	json_decref(j);
}
END_TEST

static Suite *
cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc;

	tc = tcase_create("validation");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_reject_unknown_key);
	tcase_add_test(tc, test_reject_names);
	tcase_add_test(tc, test_reject_unmapped_field);
	tcase_add_test(tc, test_reject_manifest_limits);
	tcase_add_test(tc, test_reject_embedded_target);
	tcase_add_test(tc, test_reject_unknown_driver);
	tcase_add_test(tc, test_requirement_target);
	tcase_add_test(tc, test_reject_embedded_port);
	tcase_add_test(tc, test_reject_shared_resource);
	tcase_add_test(tc, test_apply_edited_applied_migration);
	tcase_add_test(tc, test_apply_migration_size);
	suite_add_tcase(s, tc);

	tc = tcase_create("binding");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bind_explicit_manifest);
	tcase_add_test(tc, test_bind_colocated);
	tcase_add_test(tc, test_bind_only_candidate);
	tcase_add_test(tc, test_bind_ambiguous_then_bind);
	tcase_add_test(tc, test_bind_refused_beyond_requested);
	suite_add_tcase(s, tc);

	tc = tcase_create("seeds");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_seed_two_postgres);
	tcase_add_test(tc, test_seed_names_other_node);
	tcase_add_test(tc, test_seed_shared_vs_per_instance);
	tcase_add_test(tc, test_seed_second_provider);
	tcase_add_test(tc, test_seed_embedded_private);
	tcase_add_test(tc, test_seed_nothing_vs_pending);
	tcase_add_test(tc, test_headline_worst_grant);
	tcase_add_test(tc, test_status_attention);
	tcase_add_test(tc, test_seed_apply_changes_only);
	tcase_add_test(tc, test_seed_dry_run);
	tcase_add_test(tc, test_seed_revocation);
	tcase_add_test(tc, test_seed_node_rm);
	suite_add_tcase(s, tc);

	tc = tcase_create("user");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_sanitized_binaries);
	tcase_add_test(tc, test_version);
	tcase_add_test(tc, test_settings_checked);
	tcase_add_test(tc, test_json_writes);
	tcase_add_test(tc, test_listing);
	tcase_add_test(tc, test_providers_tag);
	tcase_add_test(tc, test_remove_says_revocation);
	suite_add_tcase(s, tc);

	tc = tcase_create("history");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_seed_at_seq);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(cli_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
