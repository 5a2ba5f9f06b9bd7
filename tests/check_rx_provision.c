/*
 * check_rx_provision.c - the provisioner and the verifier as units,
 * against a real provider: the directory driver on the real file
 * system, no mock.
 *
 * Each test builds a tally home in a temporary directory with the real
 * CLI ($TALLY_BIN/tally: init, node add, apply, assign --set root=...),
 * a provider module granting `directory` (examples/download.yaml) and
 * two consumers requiring one; then runs tl_rx_provision and
 * tl_rx_verify in-process, as tallyd does, and looks at the log, the
 * delivery files and the directories themselves.  Run as root (as here),
 * each grant's directory has a group of its own and the exclusive-
 * ownership test proves it with a child process that takes one
 * consumer's group; run unprivileged, the mode bits are checked instead.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "projections/grant.h"
#include "drivers/driver.h"
#include "projections/proj.h"
#include "projections/rotation.h"
#include "reactors/rx.h"
#include "tests/lib/tl_fence.h"
#include "tests/lib/tl_test.h"

#define NOBODY	65534

static struct {
	char		*dir;		/* the test's temporary directory */
	char		*home;
	char		 root[256];	/* the provider's root (under /tmp) */
	char		 bin[4096];
	char		 src[4096];
	char		 out[8192];	/* the last command's stdout+stderr */
	struct tl_rx	 rx;
	int		 rx_open;
} X;

/* --- the CLI ----------------------------------------------------------- */

/* Runs `tally ARGS` (a shell line, paths without spaces); its exit code. */
static int
tally(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int
tally(const char *fmt, ...)
{
	char args[2048], cmd[16384], *outp;
	va_list ap;
	FILE *fp;
	size_t n;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	outp = tl_test_path(X.dir, "cli.out");
	snprintf(cmd, sizeof(cmd), "%s %s </dev/null >%s 2>&1", X.bin, args,
	    outp);
	st = system(cmd);
	X.out[0] = '\0';
	if ((fp = fopen(outp, "r")) != NULL) {
		n = fread(X.out, 1, sizeof(X.out) - 1, fp);
		X.out[n] = '\0';
		fclose(fp);
	}
	free(outp);
	ck_assert_msg(st != -1 && WIFEXITED(st), "tally %s: did not run", args);
	return WEXITSTATUS(st);
}

#define T_OK(...) do {							\
	int rc_ = tally(__VA_ARGS__);					\
	ck_assert_msg(rc_ == 0, "tally exited %d:\n%s", rc_, X.out);	\
} while (0)

static void
manifest(const char *name, const char *text)
{
	char *p = tl_test_path(X.dir, name);
	FILE *fp = fopen(p, "w");

	ck_assert_ptr_nonnull(fp);
	fputs(text, fp);
	fclose(fp);
	free(p);
}

/* A consumer of one shared directory, mapped to FILES. */
static void
consumer(const char *module)
{
	char text[512], file[64];

	snprintf(text, sizeof(text), "module: %s\n"
	    "env: {FILES: \"\"}\n"
	    "requires:\n"
	    "  files:\n"
	    "    type: directory\n"
	    "    from: download\n"
	    "    env: {path: FILES}\n", module);
	snprintf(file, sizeof(file), "%s.yaml", module);
	manifest(file, text);
	T_OK("apply %s/%s", X.dir, file);
	T_OK("assign %s node-a", module);
}

/* The same, its credential rotated on a schedule (max-credential-age). */
static void
consumer_aged(const char *module, const char *age)
{
	char text[512], file[64];

	snprintf(text, sizeof(text), "module: %s\n"
	    "env: {FILES: \"\"}\n"
	    "requires:\n"
	    "  files:\n"
	    "    type: directory\n"
	    "    from: download\n"
	    "    env: {path: FILES}\n"
	    "    max-credential-age: %s\n", module, age);
	snprintf(file, sizeof(file), "%s.yaml", module);
	manifest(file, text);
	T_OK("apply %s/%s", X.dir, file);
	T_OK("assign %s node-a", module);
}

static void
quiet(int level, const char *fmt, va_list ap)
{
	/* Warnings say why a test failed: keep them. */
	if (level >= TL_RX_WARN) {
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
}

static void
setup(void)
{
	const char *b = getenv("TALLY_BIN"), *s = getenv("TALLY_SRC");
	char *p, why[TL_WHY_MAX] = "";
	struct stat st;

	memset(&X, 0, sizeof(X));
	snprintf(X.bin, sizeof(X.bin), "%s/tally", b && *b ? b : "build/bin");
	snprintf(X.src, sizeof(X.src), "%s", s && *s ? s : ".");
	ck_assert_msg(stat(X.bin, &st) == 0, "no tally binary at %s (set "
	    "TALLY_BIN)", X.bin);
	X.dir = tl_test_tmpdir("rx-provision");
	X.home = tl_test_path(X.dir, "home");
	setenv("TALLY_HOME", X.home, 1);
	/*
	 * Under /tmp, mode 0755: a consumer's process (another uid) must be
	 * able to reach its directory, whatever the build tree's modes.
	 */
	snprintf(X.root, sizeof(X.root), "/tmp/tl-dir-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(X.root));
	ck_assert_int_eq(chmod(X.root, 0755), 0);

	T_OK("init");
	T_OK("node add node-a --routable-name 127.0.0.1 --key-out %s/node-a.key",
	    X.dir);
	T_OK("apply %s/examples/download.yaml", X.src);
	T_OK("assign download node-a --expose network --set root=%s",
	    X.root);
	consumer("app-a");
	consumer("app-b");

	tl_rx_init(&X.rx);
	X.rx.actor = "tallyd";
	X.rx.workers = 2;
	X.rx.logf = quiet;
	snprintf(X.rx.home, sizeof(X.rx.home), "%s", X.home);
	p = tl_test_path(X.home, "master.key");
	ck_assert_msg(tl_secret_load(p, &X.rx.key, why) == 0, "%s", why);
	free(p);
	p = tl_test_path(X.home, "log");
	ck_assert_int_eq(tl_log_open(p, 0, &X.rx.log), 0);
	free(p);
	X.rx_open = 1;
}

static void
teardown(void)
{
	if (X.rx_open) {
		tl_log_close(X.rx.log);
		tl_rx_free(&X.rx);
	}
	tl_test_tmpdir_done(X.dir);
	free(X.home);
	if (X.root[0] != '\0')
		tl_test_rmtree(X.root);
	memset(&X, 0, sizeof(X));
}

/* --- the reactors and what they leave ---------------------------------- */

static unsigned
provision(void)
{
	unsigned done = 0, pending = 0;
	uint64_t next = 0;
	int rc = tl_rx_provision(&X.rx, &done, &pending, &next);

	ck_assert_msg(rc == 0, "tl_rx_provision: %s", tl_strerror(rc));
	return done;
}

#define MAXF	8
static struct finding {
	char	grant[128];
	char	drift[32];
	char	reason[512];
	char	action[256];
	int	repaired;
} F[MAXF];
static size_t NF;

static void
report(void *arg, const struct tl_rx_finding *f)
{
	(void)arg;
	if (NF == MAXF)
		return;
	snprintf(F[NF].grant, sizeof(F[NF].grant), "%s", f->grant);
	snprintf(F[NF].drift, sizeof(F[NF].drift), "%s", f->drift);
	snprintf(F[NF].reason, sizeof(F[NF].reason), "%s", f->reason);
	snprintf(F[NF].action, sizeof(F[NF].action), "%s", f->action);
	F[NF].repaired = f->repaired;
	NF++;
}

/* Verifies grant (forced); the finding for it. */
static const struct finding *
verify(const char *grant)
{
	struct tl_rx_verify_opts o = { 0 };
	unsigned checked = 0, bad = 0;
	uint64_t next = 0;
	int rc;

	NF = 0;
	o.grant = grant;
	o.force = 1;
	o.report = report;
	rc = tl_rx_verify(&X.rx, &o, &checked, &bad, &next);
	ck_assert_msg(rc == 0, "tl_rx_verify: %s", tl_strerror(rc));
	ck_assert_int_eq(checked, 1);
	ck_assert_int_eq(NF, 1);
	ck_assert_str_eq(F[0].grant, grant);
	return &F[0];
}

/*
 * One pass as tallyd's (forced or not), every grant due at once (an
 * interval of 1 us), within the bounds given; how many it checked (the
 * findings in F).
 */
static unsigned
verify_bounded(int force, unsigned max_checks, unsigned max_logins,
    uint64_t *next)
{
	struct tl_rx_verify_opts o = { 0 };
	unsigned checked = 0, bad = 0;
	int rc;

	NF = 0;
	usleep(2000);
	o.interval_ns = 1000;
	o.force = force;
	o.max_checks = max_checks;
	o.max_logins = max_logins;
	o.report = report;
	rc = tl_rx_verify(&X.rx, &o, &checked, &bad, next);
	ck_assert_msg(rc == 0, "tl_rx_verify: %s", tl_strerror(rc));
	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(NF, (int)checked);
	return checked;
}

static void
grant(const char *id, struct tl_grant *g)
{
	struct tl_txn *t;
	struct tl_proj p;

	ck_assert_int_eq(tl_proj_current(X.rx.log), 0);
	ck_assert_int_eq(tl_log_begin(X.rx.log, TL_TXN_RDONLY, &t), 0);
	ck_assert_int_eq(tl_proj_open(t, &p), 0);
	ck_assert_int_eq(tl_grant_get(t, &p, id, g, NULL), 0);
	tl_log_abort(t);
}

static uint64_t
head(void)
{
	struct tl_txn *t;
	uint64_t seq = 0;

	ck_assert_int_eq(tl_log_begin(X.rx.log, TL_TXN_RDONLY, &t), 0);
	ck_assert_int_eq(tl_log_last(t, &seq, NULL), 0);
	tl_log_abort(t);
	return seq;
}

/* Provisions both consumers; their grants' paths. */
static void
provisioned(struct tl_grant *a, struct tl_grant *b)
{
	ck_assert_uint_eq(provision(), 2);
	grant("app-a/files", a);
	grant("app-b/files", b);
	ck_assert_str_eq(a->state, "provisioned");
	ck_assert_str_eq(b->state, "provisioned");
}

static mode_t
mode_of(const char *path)
{
	struct stat st;

	ck_assert_msg(lstat(path, &st) == 0, "%s: %s", path, strerror(errno));
	ck_assert_msg(S_ISDIR(st.st_mode), "%s is not a directory", path);
	return st.st_mode & 07777;
}

static mode_t
want_mode(void)
{
	return geteuid() == 0 ? 02770 : 0700;
}

/* --- the tests --------------------------------------------------------- */

START_TEST(test_provision_deliver)
{
	struct tl_grant a, b;
	char *envp, want[700], *p;
	uint64_t h;
	size_t n;

	provisioned(&a, &b);
	/* The path is the driver's: under root, named by the grant. */
	n = strlen(X.root);
	ck_assert_msg(strncmp(a.path, X.root, n) == 0 && a.path[n] == '/',
	    "path %s is not under %s", a.path, X.root);
	ck_assert_ptr_null(strchr(a.path + n + 1, '/'));
	ck_assert_uint_eq(mode_of(a.path), want_mode());

	/*
	 * Delivered: sealed, and nothing on the control plane's disk; tally
	 * env, through the CLI, opens it with the node's key: the path.
	 */
	envp = tl_test_path(X.home, "deliver");
	ck_assert_msg(access(envp, F_OK) != 0, "%s exists", envp);
	free(envp);
	T_OK("env node-a app-b --node-key %s/node-a.key", X.dir);
	snprintf(want, sizeof(want), "FILES=%s\n", b.path);
	ck_assert_str_eq(X.out, want);
	T_OK("env node-a app-a --node-key %s/node-a.key", X.dir);
	snprintf(want, sizeof(want), "FILES=%s", a.path);
	ck_assert_msg(strstr(X.out, want) != NULL, "tally env: %s", X.out);
	p = strstr(X.out, "PASSWORD");
	ck_assert_msg(p == NULL, "a directory delivers no credential: %s",
	    X.out);

	/* Idempotent: another pass finds nothing to do and appends nothing. */
	h = head();
	ck_assert_uint_eq(provision(), 0);
	ck_assert_uint_eq(head(), h);
}
END_TEST

START_TEST(test_verify_healthy_and_drift)
{
	struct tl_grant a, b;
	const struct finding *f;

	provisioned(&a, &b);
	f = verify("app-a/files");
	ck_assert_msg(f->drift[0] == '\0', "fresh grant: %s %s", f->drift,
	    f->reason);

	/* Mode drift: repaired from the provider's side. */
	ck_assert_int_eq(chmod(a.path, 0755), 0);
	f = verify("app-a/files");
	ck_assert_str_eq(f->drift, "privileges-changed");
	ck_assert_int_eq(f->repaired, 1);
	ck_assert_uint_eq(mode_of(a.path), want_mode());

	/* Owner drift (root only can give it away). */
	if (geteuid() == 0) {
		struct stat st;

		ck_assert_int_eq(chown(a.path, NOBODY, NOBODY), 0);
		f = verify("app-a/files");
		ck_assert_str_eq(f->drift, "privileges-changed");
		ck_assert_int_eq(f->repaired, 1);
		ck_assert_int_eq(stat(a.path, &st), 0);
		ck_assert_uint_eq(st.st_uid, 0);
		ck_assert_uint_ne(st.st_gid, NOBODY);
		ck_assert_uint_eq(st.st_mode & 07777, 02770);
	}
	f = verify("app-a/files");
	ck_assert_msg(f->drift[0] == '\0', "after repair: %s %s", f->drift,
	    f->reason);
	/* The other grant was never touched. */
	ck_assert_uint_eq(mode_of(b.path), want_mode());
}
END_TEST

/*
 * tallyd's verification passes are bounded (rx.h TL_RX_VERIFY_RUN_*):
 * what is due beyond the bounds waits for the next pass, asked for at
 * once, and the next pass goes on from where this one stopped, so that
 * no grant waits for ever behind a backlog.
 */
START_TEST(test_verify_bounded)
{
	struct tl_grant a, b;
	uint64_t next = 0;
	char first[TL_GRANT_ID_MAX + 1];

	provisioned(&a, &b);
	/* Two credentials never proven: one login a pass, the other waits. */
	ck_assert_uint_eq(verify_bounded(1, 0, 1, &next), 1);
	ck_assert_msg(next != 0 && next <= tl_rx_now(),
	    "a pass that left a grant due asks to run again at once");
	/* Both due, no bounds: one pass checks both. */
	ck_assert_uint_eq(verify_bounded(1, 0, 0, &next), 2);

	/* One check a pass: the other is left due and asked for at once. */
	ck_assert_uint_eq(verify_bounded(0, 1, 0, &next), 1);
	ck_assert_msg(next != 0 && next <= tl_rx_now(),
	    "a pass that left a grant due asks to run again at once");
	snprintf(first, sizeof(first), "%s", F[0].grant);
	/* Its turn: the next pass takes the other, then the first again. */
	ck_assert_uint_eq(verify_bounded(0, 1, 0, &next), 1);
	ck_assert_str_ne(F[0].grant, first);
	ck_assert_uint_eq(verify_bounded(0, 1, 0, &next), 1);
	ck_assert_str_eq(F[0].grant, first);
	/* Not bounded: both, as before. */
	ck_assert_uint_eq(verify_bounded(0, 0, 0, &next), 2);
}
END_TEST

START_TEST(test_missing_flagged)
{
	struct tl_grant a, b, g;
	const struct finding *f;
	struct stat st;
	char moved[600];

	provisioned(&a, &b);
	ck_assert_int_eq(rmdir(b.path), 0);
	f = verify("app-b/files");
	ck_assert_str_eq(f->drift, "missing-resource");
	ck_assert_int_eq(f->repaired, 0);
	grant("app-b/files", &g);
	ck_assert_str_eq(g.state, "missing");
	/* Never recreated silently: not by the check, not by a pass. */
	ck_assert_int_eq(lstat(b.path, &st), -1);
	provision();
	ck_assert_int_eq(lstat(b.path, &st), -1);
	grant("app-b/files", &g);
	ck_assert_str_eq(g.state, "missing");

	/*
	 * A link put in its place (to a directory with the right mode) is
	 * not taken for it, and nothing is done through it.
	 */
	snprintf(moved, sizeof(moved), "%s.moved", a.path);
	ck_assert_int_eq(rename(a.path, moved), 0);
	ck_assert_int_eq(symlink(moved, a.path), 0);
	f = verify("app-a/files");
	ck_assert_str_eq(f->drift, "missing-resource");
	ck_assert_int_eq(f->repaired, 0);
	provision();
	ck_assert_int_eq(lstat(a.path, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_uint_eq(mode_of(moved), want_mode());

	/* tally repair is the deliberate way back (empty: data is gone). */
	ck_assert_int_eq(unlink(a.path), 0);
	T_OK("repair app-b/files");
	provision();
	grant("app-b/files", &g);
	ck_assert_str_eq(g.state, "provisioned");
	ck_assert_uint_eq(mode_of(b.path), want_mode());
	f = verify("app-b/files");
	ck_assert_msg(f->drift[0] == '\0', "after repair: %s %s", f->drift,
	    f->reason);
}
END_TEST

START_TEST(test_revoke_retain_purge_restore)
{
	struct tl_grant a, b, g;
	char *keep, *outside, *secret, *link;
	struct stat st;
	int fd;

	provisioned(&a, &b);
	keep = malloc(strlen(a.path) + 16);
	ck_assert_ptr_nonnull(keep);
	sprintf(keep, "%s/kept.txt", a.path);
	ck_assert_int_ge(fd = open(keep, O_WRONLY | O_CREAT, 0644), 0);
	ck_assert_int_eq(write(fd, "data\n", 5), 5);
	close(fd);

	/* Removed: revoked, data retained, nobody's any more (mode 0). */
	T_OK("remove app-a");
	provision();
	grant("app-a/files", &g);
	ck_assert_str_eq(g.state, "revoked");
	ck_assert_str_eq(g.policy, "retain");
	ck_assert_uint_gt(g.retained_bytes, 0);
	ck_assert_uint_eq(mode_of(a.path), 0);
	ck_assert_int_eq(stat(keep, &st), 0);
	ck_assert_uint_eq(mode_of(b.path), want_mode());

	/* Restore: the module back, tally restore, the same directory. */
	T_OK("apply %s/app-a.yaml", X.dir);
	T_OK("assign app-a node-a");
	T_OK("restore app-a/files");
	provision();
	grant("app-a/files", &g);
	ck_assert_str_eq(g.state, "provisioned");
	ck_assert_str_eq(g.path, a.path);
	ck_assert_uint_eq(mode_of(a.path), want_mode());
	ck_assert_int_eq(stat(keep, &st), 0);

	/*
	 * Purge: the tree goes, and only it.  A link inside to a directory
	 * outside root is removed, never followed.
	 */
	outside = tl_test_path(X.dir, "outside");
	ck_assert_int_eq(mkdir(outside, 0755), 0);
	secret = tl_test_path(outside, "precious");
	ck_assert_int_ge(fd = open(secret, O_WRONLY | O_CREAT, 0644), 0);
	close(fd);
	link = malloc(strlen(a.path) + 16);
	ck_assert_ptr_nonnull(link);
	sprintf(link, "%s/escape", a.path);
	ck_assert_int_eq(symlink(outside, link), 0);
	sprintf(link, "%s/sub", a.path);
	ck_assert_int_eq(mkdir(link, 0), 0);	/* even one closed to all */
	T_OK("remove app-a");
	provision();
	T_OK("purge app-a/files --yes");
	provision();
	grant("app-a/files", &g);
	ck_assert_str_eq(g.state, "purged");
	ck_assert_int_eq(lstat(a.path, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(stat(secret, &st), 0);
	ck_assert_uint_eq(mode_of(b.path), want_mode());
	free(link);
	free(secret);
	free(outside);
	free(keep);
}
END_TEST

/*
 * In a child: takes group gid (and no other) as uid nobody, and tries to
 * make a file in each path; exit bit i set when path i refused.
 */
static int
as_group(gid_t gid, const char *p0, const char *p1)
{
	const char *paths[2] = { p0, p1 };
	pid_t pid;
	int st, i;

	fflush(NULL);
	ck_assert_int_ge(pid = fork(), 0);
	if (pid == 0) {
		int bits = 0;

		if (setgroups(1, &gid) != 0 || setgid(gid) != 0 ||
		    setuid(NOBODY) != 0)
			_exit(100);
		for (i = 0; i < 2; i++) {
			char f[700];
			int fd;

			snprintf(f, sizeof(f), "%s/by-%lu", paths[i],
			    (unsigned long)gid);
			if ((fd = open(f, O_WRONLY | O_CREAT, 0600)) < 0)
				bits |= 1 << i;
			else
				close(fd);
		}
		_exit(bits);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

START_TEST(test_exclusive)
{
	struct tl_grant a, b;
	struct stat sa, sb;

	provisioned(&a, &b);
	ck_assert_str_ne(a.path, b.path);
	ck_assert_int_eq(stat(a.path, &sa), 0);
	ck_assert_int_eq(stat(b.path, &sb), 0);
	ck_assert_msg(sa.st_ino != sb.st_ino, "one directory for two grants");
	if (geteuid() != 0) {
		/* Unprivileged: only tallyd's uid, and nobody else, gets in. */
		ck_assert_uint_eq(sa.st_mode & 07777, 0700);
		ck_assert_uint_eq(sb.st_mode & 07777, 0700);
		return;
	}
	ck_assert_msg(sa.st_gid != sb.st_gid, "both grants have group %lu",
	    (unsigned long)sa.st_gid);
	/* A's group reaches A and not B; B's reaches B and not A. */
	ck_assert_int_eq(as_group(sa.st_gid, a.path, b.path), 2);
	ck_assert_int_eq(as_group(sb.st_gid, a.path, b.path), 1);
	/* Neither a third group. */
	ck_assert_int_eq(as_group(NOBODY, a.path, b.path), 3);
}
END_TEST

/*
 * The driver alone, on a grant whose directory a link replaced: create
 * and fix refuse to act through it, check calls it missing, purge
 * removes the link and nothing it points at.
 */
START_TEST(test_driver_link_in_place)
{
	const struct tl_drv_ops *ops = tl_drv_find("directory");
	const char *sv[] = { "root", X.root, NULL };
	struct tl_drv_admin a = { 0 };
	struct tl_drv_grant g = { 0 };
	struct tl_drv_endpoint ep = { NULL, NULL, sv };
	char path[TL_DRV_VALUE_MAX + 1];
	enum tl_drv_drift drift;
	char why[TL_WHY_MAX], *outside, *precious;
	struct stat st;
	void *h = NULL;
	int fd;

	ck_assert_ptr_nonnull(ops);
	a.settings = sv;
	g.grant = "x/files";
	ck_assert_int_eq(ops->open(&a, &h, why), 0);
	ck_assert_int_eq(ops->decl->compose("path", &ep, &g, path, sizeof(path)), 0);
	outside = tl_test_path(X.dir, "outside");
	ck_assert_int_eq(mkdir(outside, 0755), 0);
	precious = tl_test_path(outside, "precious");
	ck_assert_int_ge(fd = open(precious, O_WRONLY | O_CREAT, 0644), 0);
	close(fd);
	ck_assert_int_eq(symlink(outside, path), 0);

	ck_assert_int_eq(ops->create(h, &g, why), TL_EDRIVER);
	ck_assert_int_eq(ops->check(h, &g, NULL, &drift, why), 0);
	ck_assert_int_eq(drift, TL_DRIFT_MISSING);
	ck_assert_int_eq(ops->fix_privileges(h, &g, why), TL_EDRIVER);
	ck_assert_int_eq(ops->revoke(h, &g, 0, why), TL_EDRIVER);
	ck_assert_int_eq(stat(outside, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	ck_assert_int_eq(ops->revoke(h, &g, 1, why), 0);
	ck_assert_int_eq(lstat(path, &st), -1);
	ck_assert_int_eq(stat(precious, &st), 0);
	/* Gone is gone: purging again is no error (idempotent). */
	ck_assert_int_eq(ops->revoke(h, &g, 1, why), 0);
	/* And a grant made afresh, twice, is one directory. */
	ck_assert_int_eq(ops->create(h, &g, why), 0);
	ck_assert_int_eq(ops->create(h, &g, why), 0);
	ck_assert_int_eq(ops->check(h, &g, NULL, &drift, why), 0);
	ck_assert_int_eq(drift, TL_DRIFT_NONE);
	ops->close(h);
	free(precious);
	free(outside);
}
END_TEST

/*
 * The driver run unprivileged (a child as uid nobody, root nobody's):
 * mode 0700 and the caller's own uid and gid, drift repaired, a revoked
 * (mode 0) tree with a closed subdirectory still purged by its owner.
 * Run as root only (the suite's default here); unprivileged, the
 * reactor tests above cover this mode already.
 */
START_TEST(test_driver_unprivileged)
{
	pid_t pid;
	int st;

	if (geteuid() != 0)
		return;
	ck_assert_int_eq(chown(X.root, NOBODY, NOBODY), 0);
	fflush(NULL);
	ck_assert_int_ge(pid = fork(), 0);
	if (pid == 0) {
		const struct tl_drv_ops *ops = tl_drv_find("directory");
		const char *sv[] = { "root", X.root, NULL };
		struct tl_drv_admin a = { 0 };
		struct tl_drv_grant g = { 0 };
		struct tl_drv_endpoint ep = { NULL, NULL, sv };
		char path[TL_DRV_VALUE_MAX + 1];
		enum tl_drv_drift drift;
		char why[TL_WHY_MAX], sub[700];
		struct stat sb;
		uint64_t bytes;
		void *h;

		if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 ||
		    setuid(NOBODY) != 0)
			_exit(10);
		a.settings = sv;
		g.grant = "u/files";
		if (ops->open(&a, &h, why) != 0 ||
		    ops->create(h, &g, why) != 0 ||
		    ops->decl->compose("path", &ep, &g, path, sizeof(path)) != 0)
			_exit(11);
		if (lstat(path, &sb) != 0 || sb.st_uid != NOBODY ||
		    sb.st_gid != NOBODY || (sb.st_mode & 07777) != 0700)
			_exit(12);
		if (ops->check(h, &g, NULL, &drift, why) != 0 ||
		    drift != TL_DRIFT_NONE)
			_exit(13);
		if (chmod(path, 0755) != 0 ||
		    ops->check(h, &g, NULL, &drift, why) != 0 ||
		    drift != TL_DRIFT_PRIVILEGES ||
		    ops->fix_privileges(h, &g, why) != 0 ||
		    ops->check(h, &g, NULL, &drift, why) != 0 ||
		    drift != TL_DRIFT_NONE)
			_exit(14);
		snprintf(sub, sizeof(sub), "%s/closed", path);
		if (mkdir(sub, 0) != 0 || ops->size(h, &g, &bytes, why) != 0 ||
		    bytes == 0)
			_exit(15);
		if (ops->revoke(h, &g, 0, why) != 0 ||
		    lstat(path, &sb) != 0 ||
		    (sb.st_mode & 07777) != 0)
			_exit(16);
		if (ops->revoke(h, &g, 1, why) != 0 ||
		    lstat(path, &sb) == 0)
			_exit(17);
		ops->close(h);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	ck_assert_msg(WEXITSTATUS(st) == 0, "step %d failed", WEXITSTATUS(st));
}
END_TEST

static int count_entries(const char *dir, const char *prefix);

/* A session of the directory driver on X.root for mesh (fence: may be NULL). */
static void *
dir_session(const char *mesh, const struct tl_drv_fence *f)
{
	const struct tl_drv_ops *ops = tl_drv_find("directory");
	static const char *sv[3];
	struct tl_drv_admin a = { 0 };
	char why[TL_WHY_MAX];
	void *h = NULL;

	sv[0] = "root";
	sv[1] = X.root;
	sv[2] = NULL;
	a.settings = sv;
	a.mesh = mesh;
	a.fence = f;
	ck_assert_msg(ops->open(&a, &h, why) == 0, "open: %s", why);
	return h;
}

/* Issue 22: the directory's fence is the contract's compare-and-set. */
START_TEST(test_driver_fence_contract)
{
	const struct tl_drv_ops *ops = tl_drv_find("directory");
	char why[TL_WHY_MAX] = "";
	const char *bad;
	void *h = dir_session("", NULL), *h2 = dir_session("", NULL);

	ck_assert_ptr_nonnull(ops->decl->fencing);
	ck_assert_int_eq(ops->decl->fencing->kind, TL_DRV_FENCE_ATOMIC);
	bad = tl_test_fence_contract(ops, h, h2, why);
	ck_assert_msg(bad == NULL, "%s (%s)", bad, why);
	ops->close(h);
	ops->close(h2);
}
END_TEST

#define MESH_A	"0123456789abcdef0123456789abcdef"
#define MESH_B	"fedcba9876543210fedcba9876543210"

/*
 * Issue 22: two meshes, the same grant id, one root: scheme 4 gives
 * each its own directory; a directory marked by one mesh is refused by
 * the other's create, fix_privileges, set_password, revoke and purge
 * (nothing changes) and reported by its check, unless adopt_mesh names
 * the owner: then it is re-marked.
 */
START_TEST(test_driver_two_meshes)
{
	const struct tl_drv_ops *ops = tl_drv_find("directory");
	const char *sv[] = { "root", X.root, NULL };
	struct tl_drv_endpoint ep = { NULL, NULL, sv };
	struct tl_drv_name_in in = { .grant = "app/files", .resource = "files",
	    .node = "", .recorded = "", .version = 1,
	    .scheme = TL_DRV_NAMING_MESH };
	struct tl_drv_names na, nb, nl;
	struct tl_drv_grant ga = { 0 }, gb = { 0 }, gx = { 0 };
	char why[TL_WHY_MAX], pa[TL_DRV_VALUE_MAX + 1];
	char pb[TL_DRV_VALUE_MAX + 1], mark[400], buf[64];
	enum tl_drv_drift drift;
	struct stat st, st2;
	void *ha = dir_session(MESH_A, NULL), *hb = dir_session(MESH_B, NULL);
	FILE *fp;

	in.mesh = MESH_A;
	ck_assert_int_eq(ops->decl->names(&in, &na, why), 0);
	in.mesh = MESH_B;
	ck_assert_int_eq(ops->decl->names(&in, &nb, why), 0);
	in.scheme = TL_DRV_NAMING;
	ck_assert_int_eq(ops->decl->names(&in, &nl, why), 0);
	ck_assert_str_ne(na.resource, nb.resource);
	ck_assert_str_ne(na.resource, nl.resource);
	ga.grant = gb.grant = "app/files";
	ga.resource = na.resource;
	gb.resource = nb.resource;
	ck_assert_int_eq(ops->create(ha, &ga, why), 0);
	ck_assert_int_eq(ops->create(hb, &gb, why), 0);
	ck_assert_int_eq(ops->decl->compose("path", &ep, &ga, pa, sizeof(pa)), 0);
	ck_assert_int_eq(ops->decl->compose("path", &ep, &gb, pb, sizeof(pb)), 0);
	ck_assert_str_ne(pa, pb);
	ck_assert_int_eq(stat(pa, &st), 0);
	/* The mark carries the whole mesh id. */
	snprintf(mark, sizeof(mark), "%s/.tally/mesh-%s", X.root, na.resource);
	ck_assert_ptr_nonnull(fp = fopen(mark, "r"));
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), fp));
	fclose(fp);
	ck_assert_str_eq(buf, MESH_A "\n");

	/* Mesh B acting on A's directory (as an adoption names it). */
	gx.grant = "app/files";
	gx.resource = na.resource;
	ck_assert_int_eq(chmod(pa, 0750), 0);
	ck_assert_int_eq(ops->check(hb, &gx, NULL, &drift, why), 0);
	ck_assert_int_eq(drift, TL_DRIFT_PRIVILEGES);
	ck_assert_msg(strstr(why, "owned by mesh 0123456789ab..., not this "
	    "one") != NULL, "why: %s", why);
	ck_assert_int_eq(ops->create(hb, &gx, why), TL_EREFUSED);
	ck_assert_int_eq(ops->fix_privileges(hb, &gx, why), TL_EREFUSED);
	ck_assert_int_eq(ops->set_password(hb, &gx, why), TL_EREFUSED);
	ck_assert_int_eq(ops->revoke(hb, &gx, 0, why), TL_EREFUSED);
	ck_assert_int_eq(ops->revoke(hb, &gx, 1, why), TL_EREFUSED);
	ck_assert_int_eq(stat(pa, &st2), 0);
	ck_assert_uint_eq(st2.st_mode & 07777, 0750);
	ck_assert_uint_eq(st2.st_ino, st.st_ino);
	/* Adopting another mesh than the owner's changes nothing either. */
	gx.adopt_mesh = "11111111111111111111111111111111";
	ck_assert_int_eq(ops->fix_privileges(hb, &gx, why), TL_EREFUSED);
	/* Adopting the owner: re-marked as B's, then A's are refused. */
	gx.adopt_mesh = MESH_A;
	ck_assert_int_eq(ops->check(hb, &gx, NULL, &drift, why), 0);
	ck_assert_int_eq(drift, TL_DRIFT_PRIVILEGES);
	ck_assert_int_eq(ops->fix_privileges(hb, &gx, why), 0);
	ck_assert_ptr_nonnull(fp = fopen(mark, "r"));
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), fp));
	fclose(fp);
	ck_assert_str_eq(buf, MESH_B "\n");
	gx.adopt_mesh = NULL;
	ck_assert_int_eq(ops->check(hb, &gx, NULL, &drift, why), 0);
	ck_assert_int_eq(drift, TL_DRIFT_NONE);
	ck_assert_int_eq(ops->revoke(ha, &ga, 1, why), TL_EREFUSED);
	ck_assert_int_eq(stat(pa, &st2), 0);
	/* A directory of before marks is marked by the first to change it. */
	gx.resource = NULL;
	gx.grant = "old/files";
	ck_assert_int_eq(ops->create(ha, &gx, why), 0);
	ck_assert_int_eq(ops->check(hb, &gx, NULL, &drift, why), 0);
	ck_assert_int_eq(drift, TL_DRIFT_PRIVILEGES);
	ops->close(ha);
	ops->close(hb);
}
END_TEST

/*
 * Issue 22: a session whose fence was overtaken (another leader raised
 * the root's fence for this mesh) changes nothing: every change is
 * refused "deposed: ..." under the fence's lock.
 */
START_TEST(test_driver_deposed)
{
	const struct tl_drv_ops *ops = tl_drv_find("directory");
	struct tl_drv_fence fa = { MESH_A, 1, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" };
	struct tl_drv_fence fb = { MESH_A, 2, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" };
	struct tl_drv_fence fo = { MESH_B, 1, "cccccccccccccccccccccccccccccccc" };
	struct tl_drv_fence_held held;
	struct tl_drv_grant g = { 0 }, g2 = { 0 };
	char why[TL_WHY_MAX], fence[400];
	enum tl_drv_drift drift;
	struct stat st;
	void *ha = dir_session(MESH_A, &fa), *hb = dir_session(MESH_A, &fb);
	void *ho = dir_session(MESH_B, &fo);

	g.grant = "app/files";
	g2.grant = "new/files";
	ck_assert_int_eq(ops->fence(ha, &fa, &held, why), 0);
	ck_assert(tl_drv_fence_ours(&fa, &held));
	ck_assert_int_eq(ops->create(ha, &g, why), 0);
	snprintf(fence, sizeof(fence), "%s/.tally-fence-" MESH_A, X.root);
	ck_assert_int_eq(lstat(fence, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	/* B takes the fence: A is deposed on this root. */
	ck_assert_int_eq(ops->fence(hb, &fb, &held, why), 0);
	ck_assert(tl_drv_fence_ours(&fb, &held));
	ck_assert_int_eq(ops->create(ha, &g2, why), TL_EREFUSED);
	ck_assert_msg(strncmp(why, "deposed: ", 9) == 0, "why: %s", why);
	ck_assert_int_eq(count_entries(X.root, "new-"), 0);
	ck_assert_int_eq(ops->fix_privileges(ha, &g, why), TL_EREFUSED);
	ck_assert_int_eq(ops->set_password(ha, &g, why), TL_EREFUSED);
	ck_assert_int_eq(ops->revoke(ha, &g, 0, why), TL_EREFUSED);
	ck_assert_int_eq(ops->revoke(ha, &g, 1, why), TL_EREFUSED);
	/* Reading still works, and the directory is as A left it. */
	ck_assert_int_eq(ops->check(ha, &g, NULL, &drift, why), 0);
	ck_assert_int_eq(drift, TL_DRIFT_NONE);
	/* Another mesh's fence on the same root is its own. */
	ck_assert_int_eq(ops->fence(ho, &fo, &held, why), 0);
	ck_assert(tl_drv_fence_ours(&fo, &held));
	ck_assert_int_eq(ops->create(ho, &g2, why), 0);
	ck_assert_int_eq(ops->create(hb, &g, why), 0);
	ops->close(ha);
	ops->close(hb);
	ops->close(ho);
}
END_TEST

/* Entries of dir (without . and ..) whose name starts with prefix. */
static int
count_entries(const char *dir, const char *prefix)
{
	char cmd[1024], *outp = tl_test_path(X.dir, "count.out");
	FILE *fp;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A %s | grep -c '^%s' >%s", dir,
	    prefix, outp);
	if (system(cmd) != -1 && (fp = fopen(outp, "r")) != NULL) {
		if (fscanf(fp, "%d", &n) != 1)
			n = -1;
		fclose(fp);
	}
	free(outp);
	return n;
}

/*
 * A crash between the driver's create and the outcome (the fault
 * wrapper's "lost": the directory is made, the reply is lost): the grant
 * fails, the next pass resumes the same intent, and the result is one
 * directory and one group per grant, healthy.
 */
START_TEST(test_lost_reply_resumed)
{
	struct tl_grant a, b;
	char meta[300];
	unsigned done = 0;
	int i;

	setenv("TALLY_FAULT", "create:lost-first=1", 1);
	done = provision();
	ck_assert_uint_eq(done, 1);
	for (i = 0; i < 100 && done < 2; i++) {
		usleep(100000);
		done += provision();
	}
	ck_assert_uint_eq(done, 2);
	grant("app-a/files", &a);
	grant("app-b/files", &b);
	ck_assert_str_eq(a.state, "provisioned");
	ck_assert_str_eq(b.state, "provisioned");
	ck_assert_int_eq(count_entries(X.root, "app-"), 2);
	if (geteuid() == 0) {
		snprintf(meta, sizeof(meta), "%s/.tally", X.root);
		ck_assert_int_eq(count_entries(meta, "gid-"), 2);
	}
	ck_assert_str_eq(verify("app-a/files")->drift, "");
	ck_assert_str_eq(verify("app-b/files")->drift, "");
	unsetenv("TALLY_FAULT");
}
END_TEST

/* The version module@node holds of grant id (0: none delivered). */
static uint64_t
delivered(const char *id, const char *holder)
{
	struct tl_txn *t;
	struct tl_proj p;
	uint64_t v;

	ck_assert_int_eq(tl_log_begin(X.rx.log, TL_TXN_RDONLY, &t), 0);
	ck_assert_int_eq(tl_proj_open(t, &p), 0);
	v = tl_grant_delivered(t, &p, id, holder);
	tl_log_abort(t);
	return v;
}

/*
 * A pass that has work does that work and looks at nothing else: not at
 * the holders of grants at rest (the work index).  A holder assigned
 * after the grant's delivery is in the index too (the grants fold marks
 * the grant as the assignment is folded), so that pass delivers to it.
 */
START_TEST(test_pass_takes_only_work)
{
	struct tl_grant a, b, c;
	uint64_t before;

	provisioned(&a, &b);
	T_OK("node add node-b --routable-name 127.0.0.2 --key-out %s/node-b.key",
	    X.dir);
	T_OK("assign app-a node-b");
	consumer("app-c");
	before = X.rx.gathered;
	/* Work: app-c's grant and app-a's new holder; app-b at rest. */
	ck_assert_uint_eq(provision(), 2);
	grant("app-c/files", &c);
	ck_assert_str_eq(c.state, "provisioned");
	ck_assert_uint_eq(delivered(c.id, "app-c@node-a"), c.version);
	ck_assert_uint_eq(delivered(a.id, "app-a@node-b"), a.version);
	ck_assert_msg(X.rx.gathered - before == 2, "the pass read %llu "
	    "grants, not its 2", (unsigned long long)(X.rx.gathered - before));
	ck_assert_uint_eq(provision(), 0);
}
END_TEST

/*
 * A request costs its own work, whatever the mesh holds (DESIGN.md rule
 * 10): from the request to rest, the provisioner's passes read the new
 * grant and no grant at rest, however many there are.
 */
START_TEST(test_request_reads_only_its_work)
{
	struct tl_grant a, b, c;
	char m[32];
	uint64_t before;
	int i, idle = 0;

	provisioned(&a, &b);
	for (i = 0; i < 20; i++) {
		snprintf(m, sizeof(m), "rest-%02d", i);
		consumer(m);
	}
	ck_assert_uint_eq(provision(), 20);
	while (idle < 2)
		idle = provision() == 0 ? idle + 1 : 0;
	consumer("app-c");
	before = X.rx.gathered;
	ck_assert_uint_eq(provision(), 1);
	ck_assert_uint_eq(provision(), 0);
	ck_assert_uint_eq(provision(), 0);
	grant("app-c/files", &c);
	ck_assert_str_eq(c.state, "provisioned");
	ck_assert_uint_eq(delivered(c.id, "app-c@node-a"), c.version);
	ck_assert_msg(X.rx.gathered - before <= 1, "one request with 22 "
	    "grants at rest: its passes read %llu grants",
	    (unsigned long long)(X.rx.gathered - before));
}
END_TEST

/*
 * A holder assigned after its grant's delivery is known to the index
 * (the grants fold marks the grant undelivered as the assignment is
 * folded): the next pass delivers to it and reads no other grant.
 */
START_TEST(test_new_holder_from_index)
{
	struct tl_grant a, b;
	uint64_t before;

	provisioned(&a, &b);
	ck_assert_uint_eq(provision(), 0);
	T_OK("node add node-b --routable-name 127.0.0.2 --key-out %s/node-b.key",
	    X.dir);
	T_OK("assign app-a node-b");
	before = X.rx.gathered;
	ck_assert_uint_eq(provision(), 1);
	ck_assert_uint_eq(delivered(a.id, "app-a@node-b"), a.version);
	ck_assert_uint_eq(provision(), 0);
	ck_assert_msg(X.rx.gathered - before <= 1, "a new holder of one "
	    "grant: the passes read %llu grants",
	    (unsigned long long)(X.rx.gathered - before));
}
END_TEST

/* One migrator pass, as tallyd runs it after each request. */
static void
migrate(void)
{
	unsigned applied = 0, blocked = 0, running = 0;
	int rc = tl_rx_migrate(&X.rx, &applied, &blocked, &running);

	ck_assert_msg(rc == 0, "tl_rx_migrate: %s", tl_strerror(rc));
}

/* One rotator pass; its steps. */
static unsigned
rotate(void)
{
	unsigned steps = 0, waiting = 0;
	int rc = tl_rx_rotate(&X.rx, &steps, &waiting);

	ck_assert_msg(rc == 0, "tl_rx_rotate: %s", tl_strerror(rc));
	return steps;
}

/* Is a rotation of grant id running? */
static int
rotating(const char *id)
{
	struct tl_txn *t;
	struct tl_proj p;
	struct tl_rotation r;
	int rc;

	ck_assert_int_eq(tl_proj_current(X.rx.log), 0);
	ck_assert_int_eq(tl_log_begin(X.rx.log, TL_TXN_RDONLY, &t), 0);
	ck_assert_int_eq(tl_proj_open(t, &p), 0);
	rc = tl_rot_get(t, &p, id, &r);
	tl_log_abort(t);
	return rc == 0;
}

/*
 * The rest of tallyd's chain costs its own work too (DESIGN.md rule
 * 10): with grants at rest (provisioned, ready, a scheduled rotation
 * far off), a migrator pass and a rotator pass read none of them; a
 * request's passes read its grant alone; a rotation due by schedule is
 * read when it is due, and the grants not due are not.
 */
START_TEST(test_chain_reads_only_its_work)
{
	struct tl_grant a, b;
	char m[32];
	uint64_t before, h;
	int i, idle = 0;

	provisioned(&a, &b);
	for (i = 0; i < 20; i++) {
		snprintf(m, sizeof(m), "rest-%02d", i);
		consumer_aged(m, "30d");
	}
	ck_assert_uint_eq(provision(), 20);
	while (idle < 2)
		idle = provision() == 0 ? idle + 1 : 0;
	/* The first passes mark the 22 assignments ready. */
	migrate();
	rotate();
	h = head();
	migrate();
	ck_assert_uint_eq(rotate(), 0);
	ck_assert_uint_eq(head(), h);
	before = X.rx.gathered;
	for (i = 0; i < 3; i++) {
		migrate();
		ck_assert_uint_eq(rotate(), 0);
	}
	ck_assert_msg(X.rx.gathered - before == 0, "22 grants at rest: "
	    "three idle migrator and rotator passes read %llu grants",
	    (unsigned long long)(X.rx.gathered - before));

	/* A request: its grant is read until its assignment is ready. */
	consumer("app-c");
	ck_assert_uint_eq(provision(), 1);
	before = X.rx.gathered;
	h = head();
	migrate();
	ck_assert_uint_gt(head(), h);	/* assignment.ready */
	rotate();
	migrate();
	rotate();
	ck_assert_msg(X.rx.gathered - before <= 1, "one request with 22 "
	    "grants at rest: the migrator's and rotator's passes read %llu "
	    "grants", (unsigned long long)(X.rx.gathered - before));

	/* Due by schedule: that grant, not the 20 due in 30 days. */
	consumer_aged("app-s", "1s");
	ck_assert_uint_eq(provision(), 1);
	migrate();
	migrate();
	usleep(1200000);
	before = X.rx.gathered;
	rotate();
	ck_assert(rotating("app-s/files"));
	ck_assert_msg(X.rx.gathered - before == 1, "one rotation due of 21 "
	    "scheduled: the rotator's pass read %llu grants",
	    (unsigned long long)(X.rx.gathered - before));
	/* Running, it is read as a rotation, no more as due. */
	before = X.rx.gathered;
	rotate();
	ck_assert_msg(X.rx.gathered - before == 1, "one rotation running: "
	    "the rotator's pass read %llu grants",
	    (unsigned long long)(X.rx.gathered - before));
	for (i = 0; i < 20; i++) {
		snprintf(m, sizeof(m), "rest-%02d/files", i);
		ck_assert(!rotating(m));
	}
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("rx_provision");
	TCase *tc = tcase_create("directory");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_provision_deliver);
	tcase_add_test(tc, test_driver_fence_contract);
	tcase_add_test(tc, test_driver_two_meshes);
	tcase_add_test(tc, test_driver_deposed);
	tcase_add_test(tc, test_verify_healthy_and_drift);
	tcase_add_test(tc, test_verify_bounded);
	tcase_add_test(tc, test_missing_flagged);
	tcase_add_test(tc, test_revoke_retain_purge_restore);
	tcase_add_test(tc, test_exclusive);
	tcase_add_test(tc, test_driver_link_in_place);
	tcase_add_test(tc, test_driver_unprivileged);
	tcase_add_test(tc, test_lost_reply_resumed);
	tcase_add_test(tc, test_pass_takes_only_work);
	tcase_add_test(tc, test_request_reads_only_its_work);
	tcase_add_test(tc, test_new_holder_from_index);
	tcase_add_test(tc, test_chain_reads_only_its_work);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
