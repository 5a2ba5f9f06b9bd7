/*
 * bench_directory.c - tally's cost per grant above the provider's own,
 * with the directory driver (a real file system, no server), against
 * the same file-system calls issued directly in the same run.  Prints
 * figures; never asserts.
 *
 * A tally home with a download provider (examples/download.yaml,
 * assigned with --set root=) and N consumer modules (tally apply, in
 * batches), each with one shared directory requirement.  Then, timed:
 *
 *   requested   the N assignments appended in-process through the
 *               assign decider (tl_dec_assign, 100 per transaction, as
 *               tally assign decides one): each one's grant.requested
 *   tally       tl_rx_provision passes, exactly as tallyd runs them
 *               (--workers 4), until every grant is provisioned and
 *               delivered (its credential.delivered event, the values
 *               sealed to the node, committed in the log: the control
 *               plane writes no env file, a node's agent does):
 *               request -> delivered for all N, wall and CPU
 *   syscalls    in a fresh root, the file-system calls the driver makes
 *               for a new grant, issued directly: the fence's lock and
 *               read (openat, fstat, flock, pread, close), the probe for
 *               a mark (openat ENOENT); run as root, the group claim
 *               (openat ENOENT, openat O_EXCL, write, fsync, close);
 *               the mesh's mark (unlinkat ENOENT, openat O_EXCL, write,
 *               fsync, close, renameat); then mkdirat, openat O_NOFOLLOW,
 *               fchown, fchmod, close
 *   driver      the driver alone (open with the home's mesh and a fence,
 *               create for each grant), in a third root: what the driver
 *               adds to the calls
 *
 * tally's own cost per grant = (tally - syscalls) / N.  Then one more
 * request at a time with N provisioned: assign -> delivered, median of
 * BENCH_DIR_SAMPLES (5; 15 in the scale runs); and one idle pass each
 * of the migrator and the rotator, which tallyd runs after every
 * request (the head moved), median of IDLE (15), with its target at
 * each size against 1,000 (<= x1.2).  The scale runs' sizes are all set
 * up first and then measured taking turns, a request or an idle pass of
 * each in turn, so that the sizes compared see the same machine (one
 * after the other, the same code measured x0.98 and x1.38).
 *
 * Sizes: BENCH_DIR_GRANTS (10000), under TALLY_TMP; then the scale
 * runs, on /dev/shm unless BENCH_DIR_TMP names a place (100,000 fsyncs
 * on a disk would measure the disk): 1,000 and 100,000 (BENCH_DIR_100K=0
 * leaves out the 100,000), and 1,000,000 with BENCH_DIR_1M=1 (its log
 * alone is about 5.6 GB of tmpfs, 557 MiB at 100,000, its directories
 * 8 GB more, and /dev/shm's inodes run out: BENCH_DIR_TMP on a tmpfs
 * mounted with nr_inodes=0; the syscalls and the driver alone are not
 * run at that size; its setup takes minutes, so it is not run by
 * default).  The summary at the end gives one request at
 * each size against the same at 1,000, with its target (DESIGN.md rule
 * 10: <= x1.2), and tally's own cost per grant against its target.
 * BENCH_DIR_TMP=/dev/shm runs it all on tmpfs, where fsync and path
 * lookups cost next to nothing, so what is left is tally's CPU.  Env as
 * make bench sets it: TALLY_BIN, TALLY_SRC, TALLY_TMP.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "projections/decide.h"
#include "projections/grant.h"
#include "projections/proj.h"
#include "reactors/epoch.h"
#include "reactors/rx.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME		"bench_directory"
#define APPLY_BATCH	2000
#define ASSIGN_BATCH	100
#define MAXSAMPLES	32
#define ROUNDS		10	/* turns of the contenders at one size */
#define IDLE		15	/* idle passes of the migrator and the rotator */

static const char *bin, *src;

/* This process's CPU in s, user and system; *sys its system part. */
static double
cpu_s(double *sys)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	*sys = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + *sys;
}


static void
quiet(int level, const char *fmt, va_list ap)
{
	if (level >= TL_RX_WARN) {
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
}

/* --- setting up ------------------------------------------------------ */

static int
write_manifest(const char *dir, int i)
{
	char path[4200];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/c%06d.yaml", dir, i);
	if ((fp = fopen(path, "w")) == NULL)
		return -1;
	fprintf(fp, "module: c%06d\nenv: {FILES: \"\"}\nrequires:\n"
	    "  files:\n    type: directory\n    from: download\n"
	    "    env: {path: FILES}\n", i);
	return fclose(fp);
}

/*
 * The end of a failed command's log, on stderr: the work directory and
 * the log with it are removed on the way out.
 */
static void
log_tail(const char *path)
{
	char buf[8192];
	size_t n = 0;
	long at;
	FILE *fp;

	if ((fp = fopen(path, "r")) == NULL)
		return;
	if (fseek(fp, 0, SEEK_END) == 0 && (at = ftell(fp)) > 0)
		fseek(fp, at > (long)sizeof(buf) - 1 ?
		    at - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	fprintf(stderr, "%s", buf);
}

/* tally apply of manifests [from, to), in one process. */
static int
apply_range(const char *home, const char *mdir, const char *clilog,
    int from, int to)
{
	char **argv = calloc((size_t)(to - from) + 4, sizeof(*argv));
	char tally[4200];
	int i, n = 0, rc;

	if (argv == NULL)
		return -1;
	snprintf(tally, sizeof(tally), "%s/tally", bin);
	argv[n++] = tally;
	argv[n++] = "apply";
	for (i = from; i < to; i++) {
		if ((argv[n] = malloc(4200)) == NULL)
			break;
		snprintf(argv[n++], 4200, "%s/c%06d.yaml", mdir, i);
	}
	argv[n] = NULL;
	rc = i == to ? tl_bench_run(home, NULL, clilog, NULL, argv) : -1;
	for (i = 2; i < n; i++)
		free(argv[i]);
	free(argv);
	return rc;
}

struct assign_arg {
	int	 from, to;
};

static int
assign_cb(struct tl_txn *t, void *arg)
{
	struct assign_arg *a = arg;
	struct tl_ctx c;
	char m[32];
	int i, rc;

	if ((rc = tl_ctx_begin(&c, t, "bench")) != 0)
		return rc;
	for (i = a->from; i < a->to; i++) {
		snprintf(m, sizeof(m), "c%06d", i);
		/* A full map is grown and the whole callback run again. */
		if ((rc = tl_dec_assign(&c, m, "node-a", &(struct tl_assign){
		    .expose = "local" })) != 0)
			return rc;
	}
	return tl_ctx_end(&c);
}

static int
assign_range(struct tl_log *log, int from, int to)
{
	struct assign_arg a;
	int i, rc;

	for (i = from; i < to; i += ASSIGN_BATCH) {
		a.from = i;
		a.to = i + ASSIGN_BATCH < to ? i + ASSIGN_BATCH : to;
		if ((rc = tl_log_write(log, assign_cb, &a)) != 0)
			return rc;
	}
	return 0;
}

/* Passes until nothing is pending; the grants provisioned. */
static int
provision_all(struct tl_rx *rx, unsigned *total)
{
	unsigned done, pending;
	uint64_t next;
	int rc, idle = 0;

	*total = 0;
	for (;;) {
		done = pending = 0;
		next = 0;
		if ((rc = tl_rx_provision(rx, &done, &pending, &next)) != 0)
			return rc;
		*total += done;
		if (done == 0 && pending == 0 && ++idle >= 2)
			return 0;
		if (done != 0 || pending != 0)
			idle = 0;
		if (done == 0 && pending != 0)
			tl_bench_msleep(10);	/* a backoff: not ours */
	}
}

/* Has consumer i's holder on node-a its sealed delivery (the log)? */
static int
delivered(struct tl_log *log, int i)
{
	struct tl_txn *t;
	struct tl_proj p;
	char id[64], holder[64];
	int ok = 0;

	snprintf(id, sizeof(id), "c%06d/files", i);
	snprintf(holder, sizeof(holder), "c%06d@node-a", i);
	if (tl_log_begin(log, TL_TXN_RDONLY, &t) != 0)
		return 0;
	if (tl_proj_open(t, &p) == 0)
		ok = tl_grant_delivered(t, &p, id, holder) != 0;
	tl_log_abort(t);
	return ok;
}

/* --- the contenders without tally ------------------------------------ */

/* The calls drivers/directory.c makes for a new grant, directly. */
static int
syscalls(const char *root, int from, int to, const char *mesh)
{
	int rfd, mfd = -1, fd, ffd, i, priv = geteuid() == 0;
	char name[64], claim[64], mark[128], tmp[136], fence[64], buf[128];
	char line[64];
	struct stat st;

	if ((rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	snprintf(fence, sizeof(fence), ".tally-fence-%s", mesh);
	if (from == 0 && (mkdirat(rfd, ".tally", 0700) != 0 ||
	    (fd = openat(rfd, fence, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0 || write(fd, "tally-fence/1 1 "
	    "0123456789abcdef\n", 33) != 33 || fsync(fd) != 0 ||
	    close(fd) != 0))
		return -1;
	if ((mfd = openat(rfd, ".tally", O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return -1;
	for (i = from; i < to; i++) {
		gid_t gid = (gid_t)(1000000000 + i);

		snprintf(name, sizeof(name), "c%06d-files_%016x", i,
		    (unsigned)i * 2654435761u);
		/* The fence, locked and read while the grant is made. */
		if ((ffd = openat(rfd, fence, O_RDWR | O_NOFOLLOW |
		    O_CLOEXEC)) < 0 || fstat(ffd, &st) != 0 ||
		    flock(ffd, LOCK_EX) != 0 || pread(ffd, buf, sizeof(buf) -
		    1, 0) <= 0)
			return -1;
		snprintf(mark, sizeof(mark), "mesh-%s", name);
		if (openat(mfd, mark, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) >= 0 ||
		    errno != ENOENT)
			return -1;
		if (priv) {
			snprintf(claim, sizeof(claim), "gid-%lu",
			    (unsigned long)gid);
			if ((fd = openat(mfd, claim, O_RDONLY | O_NOFOLLOW |
			    O_CLOEXEC)) >= 0 || errno != ENOENT)
				return -1;
			if ((fd = openat(mfd, claim, O_WRONLY | O_CREAT |
			    O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0 ||
			    write(fd, name, strlen(name)) < 0 ||
			    fsync(fd) != 0)
				return -1;
			close(fd);
		} else
			gid = getegid();
		snprintf(tmp, sizeof(tmp), "%s.new", mark);
		if (unlinkat(mfd, tmp, 0) == 0 || errno != ENOENT ||
		    (fd = openat(mfd, tmp, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0600)) < 0 ||
		    write(fd, line, (size_t)snprintf(line, sizeof(line),
		    "%s\n", mesh)) < 0 || fsync(fd) != 0 || close(fd) != 0 ||
		    renameat(mfd, tmp, mfd, mark) != 0)
			return -1;
		if (mkdirat(rfd, name, 0700) != 0 ||
		    (fd = openat(rfd, name, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) < 0)
			return -1;
		if (fchown(fd, geteuid(), gid) != 0 ||
		    fchmod(fd, priv ? 02770 : 0700) != 0)
			return -1;
		close(fd);
		close(ffd);
	}
	if (mfd >= 0)
		close(mfd);
	close(rfd);
	return 0;
}

/* As tallyd's session opens it: the home's mesh, a fence raised. */
static int
driver_alone(const char *root, int from, int to, const char *mesh)
{
	const struct tl_drv_ops *ops = tl_drv_find("directory");
	const char *sv[] = { "root", root, NULL };
	struct tl_drv_fence f = { mesh, 1, "0123456789abcdef" };
	struct tl_drv_fence_held held;
	struct tl_drv_admin a = { 0 };
	struct tl_drv_grant g = { 0 };
	char why[TL_WHY_MAX], id[64];
	void *h;
	int i;

	a.settings = sv;
	a.mesh = mesh;
	a.fence = &f;
	if (ops == NULL || ops->open(&a, &h, why) != 0)
		return -1;
	if (ops->fence(h, &f, &held, why) != 0) {
		fprintf(stderr, ME ": fence: %s\n", why);
		ops->close(h);
		return -1;
	}
	for (i = from; i < to; i++) {
		snprintf(id, sizeof(id), "c%06d/files", i);
		g.grant = id;
		if (ops->create(h, &g, why) != 0) {
			fprintf(stderr, ME ": create %s: %s\n", id, why);
			ops->close(h);
			return -1;
		}
	}
	ops->close(h);
	return 0;
}

/* --- one size -------------------------------------------------------- */

/* One contender's sum over its turns: wall, CPU and its kernel part. */
struct turn {
	double	t, c, k;		/* at the turn's start */
	double	wall, cpu, sys, req;	/* sums; req: the requests alone */
};

static void
turn_start(struct turn *u)
{
	u->t = tl_bench_now();
	u->c = cpu_s(&u->k);
}

static void
turn_end(struct turn *u)
{
	double k, c = cpu_s(&k);

	u->wall += tl_bench_now() - u->t;
	u->cpu += c - u->c;
	u->sys += k - u->k;
}

static void
turn_print(const char *what, const struct turn *u, int n)
{
	printf("  %s: %.2f s wall (%.0f us/grant), %.2f s CPU (%.0f "
	    "us/grant, of it %.0f us in the kernel)\n", what, u->wall,
	    u->wall * 1e6 / n, u->cpu, u->cpu * 1e6 / n, u->sys * 1e6 / n);
}

/* What one size measured, for the summary. */
struct size_result {
	int	n;
	double	own_cpu_us;	/* tally's CPU per grant above the syscalls */
	double	one_ms;		/* one request with n provisioned, median */
	double	setup_s;
	double	mig_ms, rot_ms;	/* one idle pass of each, n provisioned */
};

/*
 * A size set up and open, between its requests: its scratch, its home,
 * what tallyd keeps of it, and what its requests and idle passes took.
 */
struct size_run {
	char		*w, *home, *mdir, *root, *root2, *root3, *clilog, *key;
	struct tl_rx	 rx;
	int		 rx_ok;		/* rx initialised: size_close frees it */
	int		 n, next;	/* provisioned; the next request's */
	unsigned	 total;
	double		 lat[MAXSAMPLES], mig[IDLE], rot[IDLE];
	int		 ns, ni;
	struct size_result *res;
};

static void
size_close(struct size_run *sr)
{
	if (sr->rx_ok) {
		if (sr->rx.log != NULL)
			tl_log_close(sr->rx.log);
		tl_rx_free(&sr->rx);
	}
	fflush(stdout);
	free(sr->home);
	free(sr->mdir);
	free(sr->root);
	free(sr->root2);
	free(sr->root3);
	free(sr->clilog);
	free(sr->key);
	tl_test_tmpdir_done(sr->w);
	memset(sr, 0, sizeof(*sr));
}

/*
 * One size: n grants provisioned, and samples more applied for the
 * requests size_request makes one at a time.  compare: the syscalls
 * and the driver alone too (each in a root of n more directories: at
 * 1,000,000 they would not fit beside the rest in this machine's
 * memory, and the target they serve is at 10,000).  0 with sr open (the
 * caller's to size_close), or -1 with it closed.
 */
static int
size_open(int n, int samples, int compare, struct size_result *res,
    struct size_run *sr)
{
	char *w, *home, *mdir, *root, *root2, *root3, *clilog, *key, *p,
	    setroot[4400], why[TL_WHY_MAX] = "";
	struct tl_rx *rx = &sr->rx;	/* tallyd's, kept for the requests */
	struct turn ct[3];
	double t0;
	int i, rd, rc = -1, ok = 0;

	/* All of it sr's, for size_close whatever happens below. */
	memset(sr, 0, sizeof(*sr));
	w = sr->w = tl_test_tmpdir("bench-directory");
	home = sr->home = tl_test_path(w, "home");
	mdir = sr->mdir = tl_test_path(w, "manifests");
	root = sr->root = tl_test_path(w, "root");
	root2 = sr->root2 = tl_test_path(w, "root-syscalls");
	root3 = sr->root3 = tl_test_path(w, "root-driver");
	clilog = sr->clilog = tl_test_path(w, "cli.log");
	/* The node's key, not the home's. */
	key = sr->key = tl_test_path(w, "node-a.key");
	if (mkdir(mdir, 0755) != 0 || mkdir(root, 0755) != 0 ||
	    mkdir(root2, 0755) != 0 || mkdir(root3, 0755) != 0)
		goto out;
	snprintf(setroot, sizeof(setroot), "root=%s", root);
	p = tl_test_path(src, "examples/download.yaml");
	t0 = tl_bench_now();
	if (tl_bench_tally(bin, home, NULL, clilog, "init", NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "node", "add", "node-a",
	    "--routable-name", "127.0.0.1", "--key-out", key, NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "apply", p, NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "assign", "download",
	    "node-a", "--set", setroot, NULL) != 0) {
		fprintf(stderr, ME ": setting up the home failed; %s "
		    "ends:\n", clilog);
		log_tail(clilog);
		free(p);
		goto out;
	}
	free(p);
	for (i = 0; i < n + samples; i++)
		if (write_manifest(mdir, i) != 0)
			goto out;
	for (i = 0; i < n + samples; i += APPLY_BATCH)
		if (apply_range(home, mdir, clilog, i, i + APPLY_BATCH <
		    n + samples ? i + APPLY_BATCH : n + samples) != 0) {
			fprintf(stderr, ME ": tally apply failed; %s "
			    "ends:\n", clilog);
			log_tail(clilog);
			goto out;
		}
	/* Applied: their files would only take tmpfs's memory. */
	tl_test_rmtree(mdir);

	tl_rx_init(rx);
	sr->rx_ok = 1;
	rx->actor = "tallyd";
	rx->workers = 4;		/* tallyd's default */
	rx->logf = quiet;
	snprintf(rx->home, sizeof(rx->home), "%s", home);
	p = tl_test_path(home, "master.key");
	if (tl_secret_load(p, &rx->key, why) != 0) {
		fprintf(stderr, ME ": %s: %s\n", p, why);
		free(p);
		goto out;
	}
	free(p);
	p = tl_test_path(home, "log");
	if (tl_log_open(p, 0, &rx->log) != 0) {
		free(p);
		goto out;
	}
	free(p);
	/*
	 * As tallyd starts: the epoch's fence raised on the provider (and
	 * the mesh id read, which marks every directory made), projections
	 * current before the clock starts.
	 */
	{
		uint64_t epoch;
		unsigned fenced = 0, unfenced = 0;
		int deposed = 0;

		if ((rc = tl_ep_fence(rx, &epoch, 0, &deposed, &fenced,
		    &unfenced)) != 0 || deposed || fenced != 1 ||
		    rx->mesh[0] == '\0') {
			fprintf(stderr, ME ": the fence: %s, %u fenced, mesh "
			    "\"%s\"\n", tl_strerror(rc), fenced, rx->mesh);
			goto out;
		}
	}
	if (tl_proj_current(rx->log) != 0 || provision_all(rx, &sr->total) != 0)
		goto out;
	res->n = n;
	res->setup_s = tl_bench_now() - t0;
	printf("  setup (init, %d modules applied): %.1f s\n", n + samples,
	    res->setup_s);

	/*
	 * The contenders take turns, in ROUNDS rounds of n / ROUNDS grants
	 * each: the file system's state (its recently freed inodes, its
	 * journal) weighs on each alike, and each turn starts with nothing
	 * dirty, so the writeback of what the one before wrote is not
	 * charged to it.
	 */
	memset(&ct, 0, sizeof(ct));
	for (rd = 0; rd < (compare ? ROUNDS : 1); rd++) {
		int from = (int)((long)n * rd / (compare ? ROUNDS : 1)),
		    to = (int)((long)n * (rd + 1) / (compare ? ROUNDS : 1));

		sync();
		turn_start(&ct[0]);
		if ((rc = assign_range(rx->log, from, to)) != 0) {
			fprintf(stderr, ME ": assigning: %s %s\n",
			    tl_strerror(rc), tl_log_lasterr(rx->log));
			goto out;
		}
		ct[0].req += tl_bench_now() - ct[0].t;
		if ((rc = provision_all(rx, &sr->total)) != 0) {
			fprintf(stderr, ME ": provisioning: %s\n",
			    tl_strerror(rc));
			goto out;
		}
		turn_end(&ct[0]);
		if (!compare)
			break;
		sync();
		turn_start(&ct[1]);
		if (syscalls(root2, from, to, rx->mesh) != 0) {
			fprintf(stderr, ME ": syscalls: %s\n",
			    strerror(errno));
			goto out;
		}
		turn_end(&ct[1]);
		sync();
		turn_start(&ct[2]);
		if (driver_alone(root3, from, to, rx->mesh) != 0)
			goto out;
		turn_end(&ct[2]);
	}
	for (i = 0; i < n; i++)
		ok += delivered(rx->log, i);
	printf("  requested   %6d grants (assign decider, %d per txn): "
	    "%.2f s\n", n, ASSIGN_BATCH, ct[0].req);
	turn_print("tally       request -> delivered", &ct[0], n);
	printf("              %d of %d delivered\n", ok, n);
	if (!compare) {
		res->own_cpu_us = 0;
		printf("  syscalls, driver: not run at this size (the "
		    "target is at %d)\n", 10000);
		goto samples;
	}
	turn_print("syscalls    the driver's calls, directly", &ct[1], n);
	turn_print("driver      create alone", &ct[2], n);
	res->own_cpu_us = (ct[0].cpu - ct[1].cpu) * 1e6 / n;
	printf("  tally's own cost above the syscalls (%d rounds): %.0f "
	    "us/grant wall, %.0f us/grant CPU (target < 200)\n", ROUNDS,
	    (ct[0].wall - ct[1].wall) * 1e6 / n, res->own_cpu_us);

samples:
	sr->n = n;
	sr->res = res;
	rc = 0;
out:
	if (rc != 0)
		size_close(sr);
	return rc;
}

/* One more request, n and more provisioned: assign -> delivered. */
static int
size_request(struct size_run *sr)
{
	int i = sr->n + sr->next++;
	double t0 = tl_bench_now();

	if (assign_range(sr->rx.log, i, i + 1) != 0 ||
	    provision_all(&sr->rx, &sr->total) != 0)
		return -1;
	if (delivered(sr->rx.log, i) && sr->ns < MAXSAMPLES)
		sr->lat[sr->ns++] = (tl_bench_now() - t0) * 1e3;
	return 0;
}

static void
size_requests_done(struct size_run *sr)
{
	uint64_t used = 0, map = 0;

	if (tl_log_size(sr->rx.log, &used, &map) == 0)
		printf("  the home's log with %d grants: %.0f MiB\n",
		    sr->n + sr->ns, (double)used / (1024.0 * 1024.0));
	sr->res->one_ms = tl_bench_median(sr->lat, sr->ns);
	printf("  one request with %d provisioned: assign -> delivered, "
	    "median %.2f ms of %d (", sr->n, sr->res->one_ms, sr->ns);
	tl_bench_print_list(sr->lat, sr->ns);
	printf(" ms)\n");
}

/*
 * The rest of tallyd's chain, which the head's moving makes due after
 * each request: one idle pass each of the migrator and the rotator
 * (their gathers read the folds' due indexes).  The first pass marks
 * the assignments ready: size_idle_start makes it, not measured.
 */
static int
size_idle_start(struct size_run *sr)
{
	unsigned a, b, r;

	return tl_rx_migrate(&sr->rx, &a, &b, &r) != 0 ||
	    tl_rx_rotate(&sr->rx, &a, &b) != 0 ? -1 : 0;
}

static int
size_idle(struct size_run *sr)
{
	unsigned a, b, r;
	double t0;

	if (sr->ni >= IDLE)
		return 0;
	t0 = tl_bench_now();
	if (tl_rx_migrate(&sr->rx, &a, &b, &r) != 0)
		return -1;
	sr->mig[sr->ni] = (tl_bench_now() - t0) * 1e3;
	t0 = tl_bench_now();
	if (tl_rx_rotate(&sr->rx, &a, &b) != 0)
		return -1;
	sr->rot[sr->ni++] = (tl_bench_now() - t0) * 1e3;
	return 0;
}

static void
size_idle_done(struct size_run *sr)
{
	sr->res->mig_ms = tl_bench_median(sr->mig, sr->ni);
	sr->res->rot_ms = tl_bench_median(sr->rot, sr->ni);
	printf("  one idle pass with %d provisioned: migrator %.1f us, "
	    "rotator %.1f us (median of %d)\n", sr->n, sr->res->mig_ms * 1e3,
	    sr->res->rot_ms * 1e3, sr->ni);
}

/*
 * The sizes of nsr, measured taking turns: each request and each idle
 * pass of one size is followed by one of every other (the first of
 * each round turning), so that all of them see the same machine; one
 * size measured after another would compare two moments of it (the
 * setup of the larger one, just before, leaves the kernel work).
 */
static int
measure(struct size_run *sr, int nsr, int samples)
{
	int i, k;

	for (i = 0; i < samples && i < MAXSAMPLES; i++)
		for (k = 0; k < nsr; k++)
			if (size_request(&sr[(i + k) % nsr]) != 0)
				return -1;
	for (k = 0; k < nsr; k++) {
		printf("%d grants:\n", sr[k].n);
		size_requests_done(&sr[k]);
		if (size_idle_start(&sr[k]) != 0)
			return -1;
	}
	for (i = 0; i < IDLE; i++)
		for (k = 0; k < nsr; k++)
			if (size_idle(&sr[(i + k) % nsr]) != 0)
				return -1;
	for (k = 0; k < nsr; k++) {
		printf("%d grants:\n", sr[k].n);
		size_idle_done(&sr[k]);
	}
	return 0;
}

/* The scale runs' place: tmpfs unless BENCH_DIR_TMP says. */
static const char *
scale_tmp(void)
{
	const char *tmp = getenv("BENCH_DIR_TMP");
	struct stat st;

	if (tmp != NULL && *tmp != '\0')
		return tmp;
	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
		return "/dev/shm";
	return getenv("TALLY_TMP");
}

int
main(void)
{
	const char *big = getenv("BENCH_DIR_100K"), *huge =
	    getenv("BENCH_DIR_1M"), *tmp = getenv("BENCH_DIR_TMP");
	int n = tl_bench_envint("BENCH_DIR_GRANTS", 10000, 10, 1000000);
	int samples = tl_bench_envint("BENCH_DIR_SAMPLES", 5, 1, MAXSAMPLES);
	int ssamples = samples > 15 ? samples : 15;
	int sizes[3], nsizes = 0, i, rc = EXIT_SUCCESS;
	struct size_result first, sc[3];
	struct size_run sr[3];

	memset(sr, 0, sizeof(sr));
	tl_bench_dirs(&src, &bin);
	if (tmp != NULL && *tmp != '\0')
		setenv("TALLY_TMP", tmp, 1);
	tmp = getenv("TALLY_TMP");
	printf(ME ": directory grants through tally against the driver's "
	    "file-system calls, in one run (%s; under %s)\n", geteuid() == 0 ?
	    "as root: a group per grant" : "unprivileged: mode 0700",
	    tmp != NULL ? tmp : "build/tmp");
	printf("%d grants:\n", n);
	if (size_open(n, samples, 1, &first, &sr[0]) != 0)
		return EXIT_FAILURE;
	rc = measure(sr, 1, samples);
	size_close(&sr[0]);
	if (rc != 0)
		return EXIT_FAILURE;

	sizes[nsizes++] = 1000;
	if (big == NULL || strcmp(big, "0") != 0)
		sizes[nsizes++] = 100000;
	if (huge != NULL && strcmp(huge, "1") == 0)
		sizes[nsizes++] = 1000000;
	if ((tmp = scale_tmp()) != NULL)
		setenv("TALLY_TMP", tmp, 1);
	for (i = 0; i < nsizes; i++) {
		printf("%d grants (under %s):\n", sizes[i],
		    tmp != NULL ? tmp : "build/tmp");
		if (size_open(sizes[i], ssamples, sizes[i] < 1000000, &sc[i],
		    &sr[i]) != 0) {
			rc = EXIT_FAILURE;
			nsizes = i;
			break;
		}
	}
	if (nsizes > 0) {
		printf("the %d sizes taking turns, one request or idle pass "
		    "at a time:\n", nsizes);
		if (measure(sr, nsizes, ssamples) != 0) {
			rc = EXIT_FAILURE;
			nsizes = 0;
		}
	}
	for (i = 0; i < 3; i++)
		if (sr[i].w != NULL)
			size_close(&sr[i]);

	/* The targets and verdicts, in one place. */
	printf(ME " summary:\n");
	printf("  tally's own cost above the syscalls, %d grants: %.0f "
	    "us/grant CPU  [target < 200: %s]\n", first.n, first.own_cpu_us,
	    first.own_cpu_us < 200 ? "met" : "MISSED");
	tl_bench_target("directory: tally's own CPU per grant", "< 200 us",
	    first.own_cpu_us < 200, "%.0f us at %d grants", first.own_cpu_us,
	    first.n);
	for (i = 1; i < nsizes; i++) {
		double x = sc[0].one_ms > 0 ? sc[i].one_ms / sc[0].one_ms : 0;
		char what[96];

		printf("  one request, %d provisioned / %d: x%.2f (%.2f ms / "
		    "%.2f ms)  [target <= x1.2: %s]\n", sc[i].n, sc[0].n, x,
		    sc[i].one_ms, sc[0].one_ms, x <= 1.2 ? "met" : "MISSED");
		snprintf(what, sizeof(what), "directory: one request, %d "
		    "provisioned / %d", sc[i].n, sc[0].n);
		tl_bench_target(what, "<= x1.2", x <= 1.2, "x%.2f (%.2f ms / "
		    "%.2f ms)", x, sc[i].one_ms, sc[0].one_ms);
	}
	for (i = 1; i < nsizes; i++) {
		double xm = sc[0].mig_ms > 0 ? sc[i].mig_ms / sc[0].mig_ms : 0;
		double xr = sc[0].rot_ms > 0 ? sc[i].rot_ms / sc[0].rot_ms : 0;
		char what[96];

		printf("  one idle pass, %d provisioned / %d: migrator x%.2f "
		    "(%.1f us / %.1f us), rotator x%.2f (%.1f us / %.1f us)  "
		    "[target <= x1.2: %s, %s]\n", sc[i].n, sc[0].n, xm,
		    sc[i].mig_ms * 1e3, sc[0].mig_ms * 1e3, xr,
		    sc[i].rot_ms * 1e3, sc[0].rot_ms * 1e3,
		    xm <= 1.2 ? "met" : "MISSED", xr <= 1.2 ? "met" : "MISSED");
		snprintf(what, sizeof(what), "directory: one idle migrator "
		    "pass, %d provisioned / %d", sc[i].n, sc[0].n);
		tl_bench_target(what, "<= x1.2", xm <= 1.2, "x%.2f (%.1f us / "
		    "%.1f us)", xm, sc[i].mig_ms * 1e3, sc[0].mig_ms * 1e3);
		snprintf(what, sizeof(what), "directory: one idle rotator "
		    "pass, %d provisioned / %d", sc[i].n, sc[0].n);
		tl_bench_target(what, "<= x1.2", xr <= 1.2, "x%.2f (%.1f us / "
		    "%.1f us)", xr, sc[i].rot_ms * 1e3, sc[0].rot_ms * 1e3);
	}
	if (nsizes < 2)
		printf("  one request at 100000 against 1000: not measured "
		    "(BENCH_DIR_100K=0)\n");
	if (huge == NULL || strcmp(huge, "1") != 0)
		printf("  one request at 1000000: not run (BENCH_DIR_1M=1: "
		    "its log is about 5.6 GB and its directories 8 GB on tmpfs, "
		    "with nr_inodes=0: /dev/shm's 3 million inodes run out)\n");
	return rc;
}
