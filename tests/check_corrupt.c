/*
 * check_corrupt.c - a damaged log through the real binaries.
 *
 * Every test copies a small log (mesh.created, then 120 `node add`
 * events: 121 in all, built once per
 * run with the real tally), damages its data file the way a disk, an
 * operator or an attacker would, and runs `tally` and `tallyd` on it as
 * child processes: no command may die of a signal, and each must exit
 * 5 naming the file or the event that is wrong.  The last cases are
 * about the daemon itself: one writer per log whatever happens to
 * tallyd.lock, and secrets kept out of core dumps.
 *
 * CK_RUN_CASE=damage (fork, tamper, writer, errors, secrets) runs one
 * case.
 */
#define _GNU_SOURCE

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/secret.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define NEVENTS	120
#define MAXARGS	16

static struct {
	char	 bin[4096];
	char	*tmpl;		/* the pristine home, built once */
	char	*home;
	char	 key[4200];	/* --key-out of node adds, under io */
	char	*io;		/* where a run's output goes */
	char	 data[4200];	/* HOME/log/data.mdb */
	char	*out, *err;
	int	 code;
	char	 cmdline[512];
	size_t	 lmdb_writer;	/* test_every_page: see run_judged */
} H;

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

/* Runs prog (tally or tallyd) with argv in home; output lands in H. */
static int
run_in(const char *home, const char *prog, const char *const *argv)
{
	char outp[4200], errp[4200], path[4200];
	const char *full[MAXARGS + 2];
	size_t i, off = 0;
	pid_t pid;
	int st;

	/* Beside the home: it may be read-only or full. */
	snprintf(outp, sizeof(outp), "%s/.stdout", H.io ? H.io : home);
	snprintf(errp, sizeof(errp), "%s/.stderr", H.io ? H.io : home);
	snprintf(path, sizeof(path), "%s/%s", H.bin, prog);
	full[0] = path;
	off = (size_t)snprintf(H.cmdline, sizeof(H.cmdline), "%s", prog);
	for (i = 0; argv[i] != NULL && i < MAXARGS; i++) {
		full[i + 1] = argv[i];
		if (off < sizeof(H.cmdline))
			off += (size_t)snprintf(H.cmdline + off,
			    sizeof(H.cmdline) - off, " %s", argv[i]);
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
		setenv("TALLY_HOME", home, 1);
		execv(path, (char *const *)full);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		ck_assert_int_eq(errno, EINTR);
	free(H.out);
	free(H.err);
	H.out = slurp(outp);
	H.err = slurp(errp);
	ck_assert_msg(WIFEXITED(st), "%s: killed by signal %d\n%s",
	    H.cmdline, WIFSIGNALED(st) ? WTERMSIG(st) : 0, H.err);
	H.code = WEXITSTATUS(st);
	ck_assert_msg(H.code != 127, "could not run %s", path);
	return H.code;
}

static void
expect(int line, int want, const char *prog, ...)
{
	const char *argv[MAXARGS + 1];
	va_list ap;
	size_t n = 0;

	va_start(ap, prog);
	while (n < MAXARGS && (argv[n] = va_arg(ap, const char *)) != NULL)
		n++;
	va_end(ap);
	argv[n] = NULL;
	run_in(H.home, prog, argv);
	ck_assert_msg(H.code == want, "line %d: %s exited %d, want %d\n"
	    "--- stdout\n%s--- stderr\n%s", line, H.cmdline, H.code, want,
	    H.out, H.err);
}

#define T_TALLY(c, ...)	expect(__LINE__, (c), "tally", __VA_ARGS__, \
	(const char *)NULL)
#define T_TALLYD(c, ...) expect(__LINE__, (c), "tallyd", __VA_ARGS__, \
	(const char *)NULL)
#define ck_err_has(s)							\
	ck_assert_msg(strstr(H.err, (s)) != NULL, "%s: stderr lacks "	\
	    "'%s':\n%s", H.cmdline, (s), H.err)

static void
sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

/*
 * The pristine log: tally init and NEVENTS node adds, built once by
 * the runner (the tests run in forked children).
 */
static int
build_template(void)
{
	char cmd[16384];

	H.tmpl = tl_test_tmpdir("corrupt-tmpl");
	snprintf(cmd, sizeof(cmd), "export TALLY_HOME='%s'; '%s/tally' init "
	    ">/dev/null && i=1 && while [ $i -le %d ]; do '%s/tally' node add "
	    "n$i --routable-name h$i.lan --key-out '%s.key' >/dev/null || "
	    "exit 1; rm -f '%s.key'; i=$((i+1)); done", H.tmpl, H.bin,
	    NEVENTS, H.bin, H.tmpl, H.tmpl);
	return system(cmd);
}

static void
setup(void)
{
	const char *b = getenv("TALLY_BIN");
	struct stat st;

	snprintf(H.bin, sizeof(H.bin), "%s", b && *b ? b : "build/bin");
	ck_assert_msg(stat(H.bin, &st) == 0, "no binaries at %s (set "
	    "TALLY_BIN)", H.bin);
	ck_assert_ptr_nonnull(H.tmpl);
	H.home = tl_test_tmpdir("corrupt");
	H.io = tl_test_tmpdir("corrupt-io");
	/* Node keys go outside the home (tally node add refuses it). */
	snprintf(H.key, sizeof(H.key), "%s/node.key", H.io);
	sh("cp -a '%s'/. '%s'/", H.tmpl, H.home);
	snprintf(H.data, sizeof(H.data), "%s/log/data.mdb", H.home);
}

static void
teardown(void)
{
	free(H.out);
	free(H.err);
	H.out = H.err = NULL;
	tl_test_tmpdir_done(H.home);
	tl_test_tmpdir_done(H.io);
	H.home = H.io = NULL;
}

static long
file_size(const char *path)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return (long)st.st_size;
}

/* Overwrites len bytes at off in the data file. */
static void
poke(long off, const void *p, size_t len)
{
	int fd = open(H.data, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, p, len, off), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
}

static void
peek(long off, void *p, size_t len)
{
	int fd = open(H.data, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, p, len, off), (ssize_t)len);
	close(fd);
}

/*
 * Where the events table's root page is, read with LMDB itself before
 * any damage: the MDB_db record that the main table keeps for it
 * (md_depth at 6, md_root at 40, LMDB 0.9's layout).
 */
static void
events_root(uint64_t *rootp, unsigned *depthp, unsigned *psizep)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi main;
	MDB_val k = { 6, "events" }, v;
	MDB_stat ms;
	char dir[4200];
	uint16_t depth;

	snprintf(dir, sizeof(dir), "%s/log", H.home);
	ck_assert_int_eq(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 64);
	ck_assert_int_eq(mdb_env_open(env, dir, MDB_RDONLY, 0600), 0);
	ck_assert_int_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, NULL, 0, &main), 0);
	ck_assert_int_eq(mdb_get(txn, main, &k, &v), 0);
	ck_assert_uint_eq(v.mv_size, 48);
	memcpy(&depth, (const char *)v.mv_data + 6, 2);
	memcpy(rootp, (const char *)v.mv_data + 40, 8);
	*depthp = depth;
	mdb_env_stat(env, &ms);
	*psizep = ms.ms_psize;
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

/*
 * The commands on the damaged log: none dies of a signal, and those in
 * mask (all: ~0u) exit 5 naming the file; the others may exit 0 when
 * what they read (status: projections; node add: the head) is intact.
 */
#define ALL		(~0u)
#define NO_STATUS	(~0u & ~2u)
#define HEAD_ONLY	(1u | 4u | 16u)	/* verify, log, tallyd */

static void
some_refuse(int line, const char *what, unsigned mask)
{
	static const char *const cmds[][3] = {
		{ "tally", "verify", NULL },
		{ "tally", "status", NULL },
		{ "tally", "log", NULL },
		{ "tally", "node", "add" },
		{ "tallyd", "--once", NULL },
	};
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		const char *argv[8] = { cmds[i][1], cmds[i][2], NULL };

		if (cmds[i][2] != NULL) {
			argv[2] = "zz";
			argv[3] = "--routable-name";
			argv[4] = "zz.lan";
			argv[5] = "--key-out";
			argv[6] = H.key;
		}
		run_in(H.home, cmds[i][0], argv);
		if (!(mask & (1u << i))) {
			ck_assert_msg(H.code == 0 || H.code == 5, "line %d: "
			    "%s exited %d\n%s", line, H.cmdline, H.code,
			    H.err);
			continue;
		}
		ck_assert_msg(H.code == 5, "line %d (%s): %s exited %d, "
		    "want 5\n%s", line, what, H.cmdline, H.code, H.err);
		ck_assert_msg(strstr(H.err, what) != NULL, "line %d: %s: "
		    "stderr lacks '%s':\n%s", line, H.cmdline, what, H.err);
	}
}

#define all_refuse(line, what)	some_refuse((line), (what), ALL)

START_TEST(test_truncated)
{
	ck_assert_int_gt(file_size(H.data), 8192);
	ck_assert_int_eq(truncate(H.data, 8192), 0);
	all_refuse(__LINE__, "data.mdb");
	/* The damage is reported, not repaired nor grown over. */
	ck_assert_int_eq(file_size(H.data), 8192);
}
END_TEST

START_TEST(test_empty)
{
	ck_assert_int_eq(truncate(H.data, 0), 0);
	all_refuse(__LINE__, "data.mdb");
	/* No writer took the empty file for a new environment. */
	ck_assert_int_eq(file_size(H.data), 0);
}
END_TEST

START_TEST(test_short_page)
{
	/* Not a whole number of pages, and shorter than the last page. */
	ck_assert_int_eq(truncate(H.data, file_size(H.data) - 100), 0);
	all_refuse(__LINE__, "data.mdb");
}
END_TEST

/* Flips inside LMDB's own structures of the events table's root. */
START_TEST(test_flip_root_header)
{
	uint64_t root, bogus;
	unsigned depth, psize;
	uint16_t v;
	static const struct { int at; uint16_t val; } flips[] = {
		{ 10, 0x0040 },		/* mp_flags: not a branch or leaf */
		{ 12, 0xfff0 },		/* mp_lower past the page */
	};

	events_root(&root, &depth, &psize);
	ck_assert_uint_ge(depth, 2);
	v = flips[_i].val;
	poke((long)(root * psize) + flips[_i].at, &v, 2);
	(void)bogus;
	all_refuse(__LINE__, "data.mdb");
}
END_TEST

/* A branch node naming a page past the end of the file. */
START_TEST(test_flip_child_pgno)
{
	uint64_t root;
	unsigned depth, psize;
	uint16_t ptr;
	uint8_t far[6] = { 0xff, 0xff, 0xff, 0x7f, 0, 0 };

	events_root(&root, &depth, &psize);
	ck_assert_uint_ge(depth, 2);
	/* The second node (the first is the leftmost child). */
	peek((long)(root * psize) + 16 + 2, &ptr, 2);
	/* A branch node's child pgno sits in mn_lo/mn_hi/mn_flags. */
	poke((long)(root * psize) + ptr, far, sizeof(far));
	/* Not on the path to the head: status and node add may not see it. */
	some_refuse(__LINE__, "data.mdb", HEAD_ONLY);
}
END_TEST

/* Both meta pages naming a last page beyond the file's end. */
START_TEST(test_flip_meta)
{
	uint64_t last, big;
	unsigned psize = 4096;

	/* MDB_meta after the 16-byte page header: mm_last_pg at 120. */
	peek(16 + 120, &last, 8);
	ck_assert_uint_gt(last, 2);
	big = last + 1000;
	poke(16 + 120, &big, 8);
	poke((long)psize + 16 + 120, &big, 8);
	all_refuse(__LINE__, "data.mdb");
}
END_TEST

/*
 * The fork: the root of the events table loses its last child (one
 * fewer node, mp_lower - 2).  Before, verify passed on the events left
 * visible and the next append reused the sequence of a hidden event.
 */
START_TEST(test_fork)
{
	uint64_t root;
	unsigned depth, psize;
	uint16_t lower;
	long before;

	events_root(&root, &depth, &psize);
	ck_assert_uint_ge(depth, 2);
	peek((long)(root * psize) + 12, &lower, 2);
	ck_assert_uint_gt(lower, 16 + 2 * 2);
	lower -= 2;
	poke((long)(root * psize) + 12, &lower, 2);
	before = file_size(H.data);
	(void)before;

	T_TALLY(5, "verify");
	ck_err_has("121");
	T_TALLY(5, "node", "add", "zz", "--routable-name", "zz.lan",
	    "--key-out", H.key);
	ck_err_has("data.mdb");
	/* Nothing was appended: the hidden events are still the last. */
	lower += 2;
	poke((long)(root * psize) + 12, &lower, 2);
	T_TALLY(0, "verify");
	ck_assert_msg(strstr(H.out, "121 events") != NULL, "%s", H.out);
}
END_TEST

/* A byte of the last event's value changed: nobody acts on it. */
START_TEST(test_tamper_head)
{
	const char *pat = "h120.lan";

	ck_assert_int_ge(tl_test_patch_file(H.data, (const uint8_t *)pat,
	    strlen(pat), 0, 'x'), 1);
	T_TALLY(5, "verify");
	ck_err_has("121");
	T_TALLY(5, "node", "add", "zz", "--routable-name", "zz.lan",
	    "--key-out", H.key);
	ck_err_has("event 121");
	T_TALLYD(5, "--once");
	ck_err_has("event 121");
	T_TALLY(5, "rebuild");
	ck_err_has("event 121");
	/* Readers that act refuse too (status exited 0 on it). */
	T_TALLY(5, "status");
	ck_err_has("event 121");
	T_TALLY(5, "nodes");
	ck_err_has("event 121");
	/* Nothing was appended by any of them. */
	{
		const char *pat2 = "x120.lan";

		ck_assert_int_ge(tl_test_patch_file(H.data,
		    (const uint8_t *)pat2, strlen(pat2), 0, 'h'), 1);
	}
	T_TALLY(0, "verify");
	ck_assert_msg(strstr(H.out, "121 events") != NULL, "%s", H.out);
}
END_TEST

/* An event in the middle: the rebuild and the daemon stop at it. */
START_TEST(test_tamper_middle)
{
	const char *pat = "h60.lan";

	ck_assert_int_ge(tl_test_patch_file(H.data, (const uint8_t *)pat,
	    strlen(pat), 0, 'x'), 1);
	T_TALLY(5, "rebuild");
	ck_err_has("event 61");
	T_TALLYD(5, "--once");
	ck_err_has("event 61");
}
END_TEST

/* Is the first frame of the report's stack that is not ASan's LMDB's? */
static int
lmdb_frame(const char *err)
{
	const char *p = strstr(err, "    #0 ");
	int i;

	for (i = 0; p != NULL && i < 3; i++, p = strstr(p + 1, "    #")) {
		const char *end = strchr(p, '\n');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (memmem(p, n, "liblmdb", 7) != NULL)
			return 1;
		if (memmem(p, n, "interceptor", 11) == NULL &&
		    memmem(p, n, "libsanitizer", 12) == NULL)
			return 0;	/* tally's own code: not allowed */
	}
	return 0;
}

/*
 * Runs prog with argv in H.home as run_in does, but only reports: 0
 * when it exited with a code in ok (a bit per code 0..7) and, when it
 * exited 5, said what is wrong; else a line for the list of failures.
 */
static int
run_judged(const char *prog, const char *const *argv, unsigned ok,
    char *fail, size_t cap)
{
	char outp[4200], errp[4200], path[4200], line[128];
	const char *full[MAXARGS + 2];
	size_t i, off = 0;
	pid_t pid;
	int st, code;
	char *err;

	snprintf(outp, sizeof(outp), "%s/.stdout", H.io);
	snprintf(errp, sizeof(errp), "%s/.stderr", H.io);
	snprintf(path, sizeof(path), "%s/%s", H.bin, prog);
	full[0] = path;
	off = (size_t)snprintf(line, sizeof(line), "%s", prog);
	for (i = 0; argv[i] != NULL && i < MAXARGS; i++) {
		full[i + 1] = argv[i];
		if (off < sizeof(line) && i < 3)
			off += (size_t)snprintf(line + off, sizeof(line) - off,
			    " %s", argv[i]);
	}
	full[i + 1] = NULL;
	fflush(NULL);
	if ((pid = fork()) == 0) {
		int in = open("/dev/null", O_RDONLY);
		int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (in < 0 || o < 0 || e < 0)
			_exit(127);
		dup2(in, 0);
		dup2(o, 1);
		dup2(e, 2);
		setenv("TALLY_HOME", H.home, 1);
		execv(path, (char *const *)full);
		_exit(127);
	}
	ck_assert_int_ge(pid, 0);
	while (waitpid(pid, &st, 0) < 0)
		ck_assert_int_eq(errno, EINTR);
	err = slurp(errp);
	code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	fail[0] = '\0';
	if (!WIFEXITED(st))
		snprintf(fail, cap, "%s: killed by signal %d", line,
		    WTERMSIG(st));
	else if (strcmp(argv[0], "node") == 0 && strstr(err,
	    "AddressSanitizer") != NULL && lmdb_frame(err))
		/*
		 * The writer, misled inside LMDB by a damaged page header it
		 * copied (core/log.h, "Not done"): seen by ASan only, the
		 * shipped build ends with exit 5 or EIO. Counted, shown.
		 */
		H.lmdb_writer++;
	else if (strstr(err, "runtime error") != NULL ||
	    strstr(err, "Sanitizer") != NULL)
		snprintf(fail, cap, "%s: exit %d, a sanitizer report: %.300s",
		    line, code, err);
	else if (code == 1 && strcmp(argv[0], "node") == 0 &&
	    strstr(err, "data.mdb): Input/output error (with space left") !=
	    NULL && strstr(err, "nothing was appended") != NULL)
		;	/* LMDB wrote a page a damaged header misled: EIO */
	else if (code >= 8 || !(ok & (1u << code)))
		snprintf(fail, cap, "%s: exit %d: %.300s", line, code, err);
	else if (code == 5 && strstr(err, "data.mdb") == NULL &&
	    strstr(err, "event") == NULL && strstr(err, "seq") == NULL) {
		char *out = slurp(outp);

		/* rebuild --check says on stdout which tables differ. */
		if (strstr(out, "DIFFER") == NULL)
			snprintf(fail, cap, "%s: exit 5 without saying what: "
			    "%.300s", line, err);
		free(out);
	}
	free(err);
	return fail[0] != '\0';
}

/*
 * Every page of a small real log's data file, damaged in a copy: the
 * whole page garbled, and single bytes at a sample of offsets (the
 * page header: number, flags, lower and upper bounds; the first node
 * pointers; the middle).  No command may die of a signal or report
 * undefined behaviour; each exits 0 (what it read is intact) or 5
 * saying what is wrong (see oks below for the few other codes).
 */
START_TEST(test_every_page)
{
	static const long offs[] = { 8, 10, 12, 14, 16, 2048 };
	char kpath[4200], mpath[4200], *base = NULL, fail[800];
	char fails[40][900];
	const char *cmds[][9] = {
		{ "tally", "verify", NULL },
		{ "tally", "status", NULL },
		{ "tally", "rebuild", "--check", NULL },
		{ "tally", "tail", "-n", "5", NULL },
		{ "tally", "history", "node/n7", NULL },
		{ "tally", "env", "nk", "web", "--node-key", kpath, NULL },
		{ "tally", "node", "add", "zz", "--routable-name", "zz.lan",
		    "--key-out", NULL },
	};
	/*
	 * Exit codes allowed (a bit each): 0 or 5 everywhere; status 6 too;
	 * history and env 3 too, since a damaged page of the stream index
	 * or of a projection table can make a lookup miss (LMDB keeps no
	 * checksum to tell): a wrong "not found", never a crash.
	 */
	const unsigned oks[] = { 0x21, 0x61, 0x21, 0x21, 0x29, 0x29, 0x21 };
	long size, npages, pg, psize = 4096;
	size_t o, c, nfail = 0, runs = 0;
	uint32_t rnd = 2166136261u;
	FILE *fp;
	int fd;

	/* A small log of its own: fewer pages, each one tried. */
	sh("rm -rf '%s'/log '%s'/master.key", H.home, H.home);
	T_TALLY(0, "init");
	for (o = 1; o <= 10; o++) {
		char nn[16], rn[32];

		snprintf(nn, sizeof(nn), "n%zu", o);
		snprintf(rn, sizeof(rn), "h%zu.lan", o);
		T_TALLY(0, "node", "add", nn, "--routable-name", rn,
		    "--key-out", H.key);
		unlink(H.key);
	}
	snprintf(kpath, sizeof(kpath), "%s/nk.key", H.io);
	snprintf(mpath, sizeof(mpath), "%s/web.yaml", H.io);
	fp = fopen(mpath, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("module: web\nenv: {GREETING: \"hello\"}\n", fp);
	fclose(fp);
	T_TALLY(0, "node", "add", "nk", "--routable-name", "nk.lan",
	    "--key-out", kpath);
	T_TALLY(0, "apply", mpath);
	T_TALLY(0, "assign", "web", "nk");
	T_TALLY(0, "env", "nk", "web", "--node-key", kpath);
	cmds[6][7] = H.key;
	size = file_size(H.data);
	npages = size / psize;
	base = malloc((size_t)size);
	ck_assert_ptr_nonnull(base);
	peek(0, base, (size_t)size);
	for (pg = 0; pg < npages; pg++) {
		for (o = 0; o <= sizeof(offs) / sizeof(offs[0]); o++) {
			char page[4096];

			fd = open(H.data, O_WRONLY | O_TRUNC);
			ck_assert_int_ge(fd, 0);
			ck_assert_int_eq(write(fd, base, (size_t)size), size);
			close(fd);
			unlink(H.key);
			memcpy(page, base + pg * psize, sizeof(page));
			if (o == sizeof(offs) / sizeof(offs[0])) {
				size_t b;

				/* The whole page: garbage. */
				for (b = 0; b < sizeof(page); b++) {
					rnd = (rnd ^ (uint32_t)b) * 16777619u;
					page[b] = (char)(rnd >> 24);
				}
			} else
				page[offs[o]] ^= (char)0xa5;
			poke(pg * psize, page, sizeof(page));
			for (c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
				runs++;
				if (!run_judged(cmds[c][0], &cmds[c][1], oks[c],
				    fail, sizeof(fail)))
					continue;
				if (nfail < 40)
					snprintf(fails[nfail], sizeof(fails[0]),
					    "page %ld %s: %s", pg, o ==
					    sizeof(offs) / sizeof(offs[0]) ?
					    "garbled" : "byte", fail);
				if (nfail < 40 && o < sizeof(offs) /
				    sizeof(offs[0])) {
					size_t l = strlen(fails[nfail]);

					snprintf(fails[nfail] + l,
					    sizeof(fails[0]) - l,
					    " (offset %ld)", offs[o]);
				}
				nfail++;
			}
		}
	}
	free(base);
	printf("check_corrupt: %ld pages x %zu damages x %zu commands: "
	    "%zu runs, %zu bad, %zu writer runs misled inside LMDB (ASan "
	    "only)\n", npages, sizeof(offs) / sizeof(offs[0]) + 1,
	    sizeof(cmds) / sizeof(cmds[0]), runs, nfail, H.lmdb_writer);
	for (o = 0; o < nfail && o < 40; o++)
		printf("  %s\n", fails[o]);
	fflush(stdout);
	ck_assert_msg(nfail == 0, "%zu of %zu runs on a damaged page died or "
	    "did not say why (first: %s)", nfail, runs, fails[0]);
}
END_TEST

/* Deleting tallyd.lock does not let a second daemon run. */
START_TEST(test_one_writer)
{
	char lock[4200], pidstr[32], logp[4200];
	pid_t first;

	snprintf(lock, sizeof(lock), "%s/tallyd.lock", H.home);
	snprintf(logp, sizeof(logp), "%s/tallyd1.log", H.home);
	first = tl_bench_tallyd_start(H.bin, H.home, logp, "--interval", "1",
	    (const char *)NULL);
	ck_assert_int_gt(first, 0);
	T_TALLYD(7, "--once");
	ck_assert_int_eq(unlink(lock), 0);
	T_TALLYD(7, "--once");
	snprintf(pidstr, sizeof(pidstr), "pid %ld", (long)first);
	ck_err_has(pidstr);
	tl_bench_tallyd_stop(&first);
	/* With the first one gone, a new one runs. */
	T_TALLYD(0, "--once");
}
END_TEST

/*
 * Runs BIN/prog with args as nobody; returns its pid once its
 * /proc/PID/exe is prog (past exec) and it has run for a moment.
 */
static pid_t
spawn_nobody(const struct passwd *pw, const char *prog, const char *a1,
    const char *a2)
{
	char path[4200], exe[64], link[4200];
	pid_t d;
	int i;

	snprintf(path, sizeof(path), "%s/%s", H.bin, prog);
	d = fork();
	ck_assert_int_ge(d, 0);
	if (d == 0) {
		int fd = open("/dev/null", O_RDWR);

		if (fd < 0 || setgid(pw->pw_gid) != 0 ||
		    setuid(pw->pw_uid) != 0)
			_exit(127);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("TALLY_HOME", H.home, 1);
		execl(path, path, a1, a2, (char *)NULL);
		_exit(127);
	}
	snprintf(exe, sizeof(exe), "/proc/%ld/exe", (long)d);
	for (i = 0; i < 500; i++) {
		ssize_t n = readlink(exe, link, sizeof(link) - 1);

		if (n > 0) {
			link[n] = '\0';
			if (strstr(link, prog) != NULL)
				break;
		}
		ck_assert_int_eq(waitpid(d, NULL, WNOHANG), 0);
		tl_bench_msleep(10);
	}
	ck_assert_int_lt(i, 500);
	tl_bench_msleep(300);	/* main has run its first lines */
	ck_assert_int_eq(waitpid(d, NULL, WNOHANG), 0);
	return d;
}

/*
 * The daemon cannot be dumped, and the CLI neither.  /proc/PID of a
 * process that is not dumpable belongs to root whatever its uid: run
 * them as nobody and look.
 */
START_TEST(test_not_dumpable)
{
	struct passwd *pw = getpwnam("nobody");
	static const char *const progs[][3] = {
		{ "tallyd", "--interval", "1" },
		{ "tally", "tail", "--follow" },
	};
	char status[64];
	struct stat st;
	size_t i;
	pid_t d;

	ck_assert_ptr_nonnull(pw);
	sh("chown -R %ld:%ld '%s'", (long)pw->pw_uid, (long)pw->pw_gid,
	    H.home);
	for (i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		d = spawn_nobody(pw, progs[i][0], progs[i][1], progs[i][2]);
		snprintf(status, sizeof(status), "/proc/%ld/status", (long)d);
		ck_assert_int_eq(stat(status, &st), 0);
		kill(d, SIGTERM);
		waitpid(d, NULL, 0);
		ck_assert_msg(st.st_uid == 0, "%s (uid %ld) is dumpable: %s "
		    "is owned by uid %ld", progs[i][0], (long)pw->pw_uid,
		    status, (long)st.st_uid);
	}
}
END_TEST

/*
 * A tmpfs of size (0: no limit) at dir, in a mount namespace of this
 * test's own (the test runs as root, as make check does here).
 */
static void
private_tmpfs(const char *dir, const char *size)
{
	char opt[64];

	ck_assert_msg(unshare(CLONE_NEWNS) == 0, "unshare: %s (these tests "
	    "need root)", strerror(errno));
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	snprintf(opt, sizeof(opt), "size=%s", size ? size : "64m");
	ck_assert_msg(mount("none", dir, "tmpfs", 0, opt) == 0, "mount: %s",
	    strerror(errno));
}

/* Reading commands work on a read-only home; writers say why not. */
START_TEST(test_readonly_home)
{
	char *mnt = tl_test_tmpdir("corrupt-ro");
	char *home = H.home;

	private_tmpfs(mnt, NULL);
	sh("cp -a '%s'/. '%s'/", H.tmpl, mnt);
	ck_assert_int_eq(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY,
	    NULL), 0);
	H.home = mnt;
	T_TALLY(0, "status");
	T_TALLY(0, "graph");
	T_TALLY(0, "verify");
	T_TALLY(0, "log");
	T_TALLY(1, "node", "add", "zz", "--routable-name", "zz.lan",
	    "--key-out", H.key);
	ck_err_has("Read-only file system");
	H.home = home;
	umount(mnt);
	free(mnt);
}
END_TEST

/* A full disk: what was being written, and that nothing was appended. */
START_TEST(test_full_disk)
{
	char *mnt = tl_test_tmpdir("corrupt-full");
	char *home = H.home, name[32], host[32], key[4200];
	int i;

	private_tmpfs(mnt, "160k");
	/* The home and the node keys on the one full disk, as before. */
	H.home = tl_test_path(mnt, "home");
	ck_assert_int_eq(mkdir(H.home, 0700), 0);
	T_TALLY(0, "init");
	for (i = 1; i < 1000; i++) {
		const char *a[8];

		snprintf(key, sizeof(key), "%s/n%d.key", mnt, i);
		snprintf(name, sizeof(name), "n%d", i);
		snprintf(host, sizeof(host), "h%d.lan", i);
		a[0] = "node";
		a[1] = "add";
		a[2] = name;
		a[3] = "--routable-name";
		a[4] = host;
		a[5] = "--key-out";
		a[6] = key;
		a[7] = NULL;
		if (run_in(H.home, "tally", a) != 0)
			break;
	}
	ck_assert_msg(i < 1000, "the disk never filled up");
	ck_assert_msg(H.code == 1, "%s exited %d\n%s", H.cmdline, H.code,
	    H.err);
	ck_assert_msg(strstr(H.err, "No space left on device") != NULL &&
	    (strstr(H.err, "nothing was appended") != NULL ||
	    strstr(H.err, "nothing was written") != NULL), "%s", H.err);
	ck_assert_msg(strstr(H.err, "data.mdb") != NULL ||
	    strstr(H.err, ".key") != NULL, "what was being written?\n%s",
	    H.err);
	/* The log holds exactly the events of the commands that worked. */
	T_TALLY(0, "verify");
	/* mesh.created, then a node.added per command that worked. */
	snprintf(name, sizeof(name), "ok: %d events", i);
	ck_assert_msg(strstr(H.out, name) != NULL, "want '%s': %s", name,
	    H.out);
	free(H.home);
	H.home = home;
	umount(mnt);
	free(mnt);
}
END_TEST

/* tally init does not scatter a home into a directory in use. */
START_TEST(test_init_nonempty)
{
	char *dir = tl_test_tmpdir("corrupt-init");
	char *home = H.home, path[4200];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	fp = fopen(path, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("mine\n", fp);
	fclose(fp);
	H.home = dir;
	T_TALLY(4, "init");
	ck_err_has("notes.txt");
	snprintf(path, sizeof(path), "%s/master.key", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/log", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	H.home = home;
	/* An empty one (dotfiles aside) is fine. */
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	ck_assert_int_eq(unlink(path), 0);
	H.home = dir;
	T_TALLY(0, "init");
	H.home = home;
	tl_test_tmpdir_done(dir);
}
END_TEST

/*
 * The master key is held in libsodium's guarded memory: the mapping
 * that holds it is excluded from core dumps (VmFlags "dd", set by
 * sodium_malloc's MADV_DONTDUMP), where a stack or heap copy would not
 * be.
 */
START_TEST(test_key_guarded)
{
	char path[4200], why[TL_WHY_MAX] = "", line[512];
	struct tl_key key = { 0 };
	unsigned long lo = 0, hi = 0, at;
	int in = 0, dd = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/master.key", H.home);
	ck_assert_int_eq(tl_secret_load(path, &key, why), 0);
	at = (unsigned long)(uintptr_t)key.k;
	fp = fopen("/proc/self/smaps", "r");
	ck_assert_ptr_nonnull(fp);
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = at >= lo && at < hi;
		else if (in && strncmp(line, "VmFlags:", 8) == 0)
			dd = strstr(line, " dd") != NULL;
	}
	fclose(fp);
	tl_secret_key_free(&key);
	ck_assert_msg(dd, "the key at %#lx is in a mapping that core dumps "
	    "include", at);
	ck_assert_ptr_null(key.k);
}
END_TEST

/* Whether the byte at p is in a mapping that core dumps leave out. */
static int
dontdump(const void *p)
{
	unsigned long lo = 0, hi = 0, at = (unsigned long)(uintptr_t)p;
	char line[512];
	int in = 0, dd = 0;
	FILE *fp;

	fp = fopen("/proc/self/smaps", "r");
	ck_assert_ptr_nonnull(fp);
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = at >= lo && at < hi;
		else if (in && strncmp(line, "VmFlags:", 8) == 0)
			dd |= strstr(line, " dd") != NULL;
	}
	fclose(fp);
	return dd;
}

/*
 * tl_secret_alloc's memory (where the reactors keep decrypted
 * passwords) is zeroed, aligned and left out of core dumps, and stays
 * so when tl_secret_realloc grows it one element at a time (as the
 * reactors' arrays grow), keeping its contents.
 */
START_TEST(test_secret_alloc_guarded)
{
	struct item { char password[33]; uint64_t n; } *a = NULL, *na;
	size_t i, k;

	ck_assert_ptr_null(tl_secret_calloc(SIZE_MAX / 2, 4));
	for (i = 0; i < 300; i++) {
		na = tl_secret_realloc(a, (i + 1) * sizeof(*a));
		ck_assert_ptr_nonnull(na);
		a = na;
		ck_assert_uint_eq((uintptr_t)a % _Alignof(max_align_t), 0);
		for (k = 0; k < sizeof(a[i]); k++)
			ck_assert_uint_eq(((unsigned char *)&a[i])[k], 0);
		snprintf(a[i].password, sizeof(a[i].password), "pw-%zu", i);
		a[i].n = i;
		ck_assert_msg(dontdump(&a[i]), "element %zu at %p is in a "
		    "mapping that core dumps include", i, (void *)&a[i]);
	}
	for (i = 0; i < 300; i++) {
		char want[33];

		snprintf(want, sizeof(want), "pw-%zu", i);
		ck_assert_str_eq(a[i].password, want);
		ck_assert_uint_eq(a[i].n, i);
	}
	tl_secret_free(a);
	tl_secret_free(NULL);
	a = tl_secret_alloc(0);
	ck_assert_ptr_nonnull(a);
	tl_secret_free(a);
}
END_TEST

/*
 * How many times needle is in the file at path.  Only the file's data
 * is read (SEEK_DATA/SEEK_HOLE): the core of a sanitized daemon is a
 * sparse file of terabytes (the shadow memory), almost all of it hole.
 */
static size_t
core_count(const char *path, const uint8_t *needle, size_t len)
{
	enum { CHUNK = 1 << 20 };
	uint8_t *buf;
	off_t data, hole, at;
	size_t found = 0, i;
	ssize_t got;
	int fd;

	fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "no core at %s", path);
	buf = malloc(CHUNK + len);
	ck_assert_ptr_nonnull(buf);
	for (data = lseek(fd, 0, SEEK_DATA); data >= 0;
	    data = lseek(fd, hole, SEEK_DATA)) {
		hole = lseek(fd, data, SEEK_HOLE);
		ck_assert_int_gt(hole, data);
		/* Chunks overlap by len - 1 so no match is cut in two. */
		for (at = data; at < hole; at += CHUNK) {
			size_t want = (size_t)(hole - at) < CHUNK + len - 1 ?
			    (size_t)(hole - at) : CHUNK + len - 1;

			got = pread(fd, buf, want, at);
			ck_assert_int_eq(got, (ssize_t)want);
			for (i = 0; i + len <= (size_t)got && i < CHUNK; i++)
				if (buf[i] == needle[0] &&
				    memcmp(buf + i, needle, len) == 0)
					found++;
		}
	}
	free(buf);
	close(fd);
	return found;
}

/*
 * A core of the running daemon holds no copy of the master key.  gcore
 * (gdb, as root can whatever the dumpable flag) leaves out mappings
 * marked "dd", as the kernel does: the key must be in one.
 */
START_TEST(test_gcore_no_key)
{
	char logp[4200], core[4200], keyp[4200], cmd[9000];
	const char *bin = H.bin;
	uint8_t key[32];
	size_t found;
	FILE *fp;
	pid_t d;
	long pid;
	int rc;

	snprintf(keyp, sizeof(keyp), "%s/master.key", H.home);
	fp = fopen(keyp, "rb");
	ck_assert_ptr_nonnull(fp);
	ck_assert_int_eq(fread(key, 1, sizeof(key), fp), sizeof(key));
	fclose(fp);
	snprintf(logp, sizeof(logp), "%s/tallyd1.log", H.io);
#if defined(__SANITIZE_ADDRESS__)
	/*
	 * A sanitized daemon's core holds its shadow memory, written out
	 * in full (64 GB here): the daemon that ships is the plain one.
	 */
	bin = getenv("TALLY_PLAIN_BIN");
	ck_assert_msg(bin != NULL && *bin != '\0', "TALLY_PLAIN_BIN (the "
	    "unsanitized binaries, for gcore) is not set");
#endif
	d = tl_bench_tallyd_start(bin, H.home, logp, "--interval", "1",
	    (const char *)NULL);
	ck_assert_int_gt(d, 0);
	pid = (long)d;
	/* ulimit -f: a core past 4 GiB is a mistake, not a disk to fill. */
	snprintf(cmd, sizeof(cmd), "ulimit -f 4194304; gcore -o '%s/core' %ld "
	    ">/dev/null 2>&1", H.io, pid);
	rc = system(cmd);
	tl_bench_tallyd_stop(&d);
	ck_assert_msg(rc == 0, "%s failed", cmd);
	snprintf(core, sizeof(core), "%s/core.%ld", H.io, pid);
	found = core_count(core, key, sizeof(key));
	unlink(core);
	ck_assert_msg(found == 0, "the master key is %zu time(s) in a core "
	    "of tallyd", found);
}
END_TEST

static Suite *
corrupt_suite(void)
{
	Suite *s = suite_create("corrupt");
	TCase *tc;

	tc = tcase_create("damage");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_short_page);
	tcase_add_loop_test(tc, test_flip_root_header, 0, 2);
	tcase_add_test(tc, test_flip_child_pgno);
	tcase_add_test(tc, test_flip_meta);
	suite_add_tcase(s, tc);

	tc = tcase_create("pages");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 1800);
	tcase_add_test(tc, test_every_page);
	suite_add_tcase(s, tc);

	tc = tcase_create("fork");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fork);
	suite_add_tcase(s, tc);

	tc = tcase_create("tamper");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_tamper_head);
	tcase_add_test(tc, test_tamper_middle);
	suite_add_tcase(s, tc);

	tc = tcase_create("writer");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_one_writer);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_readonly_home);
	tcase_add_test(tc, test_full_disk);
	tcase_add_test(tc, test_init_nonempty);
	suite_add_tcase(s, tc);

	tc = tcase_create("secrets");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_not_dumpable);
	tcase_add_test(tc, test_key_guarded);
	tcase_add_test(tc, test_secret_alloc_guarded);
	tcase_add_test(tc, test_gcore_no_key);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	const char *b = getenv("TALLY_BIN");
	SRunner *sr;
	int failed;

	snprintf(H.bin, sizeof(H.bin), "%s", b && *b ? b : "build/bin");
	if (build_template() != 0) {
		fprintf(stderr, "check_corrupt: cannot build the log with "
		    "%s/tally\n", H.bin);
		return EXIT_FAILURE;
	}
	sr = srunner_create(corrupt_suite());

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tl_test_tmpdir_done(H.tmpl);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
