/*
 * bench_rabbitmq.c - RabbitMQ vhost grants through tally against the
 * same management API operations issued directly, in the same run, on
 * the same broker.  Prints figures; never asserts.
 *
 * One throwaway broker (tests/harness/rabbit.sh, the one-broker lock of
 * tests/integration/rabbit-lib.sh held while it runs).  Contenders:
 *
 *   direct, libcurl      one keep-alive HTTP session, per grant: PUT
 *                        /api/vhosts/V (with a description), PUT
 *                        /api/users/U (password_hash, no tags), PUT
 *                        /api/permissions/V/U (".*" three times)
 *   tally                tally assign for each module (one CLI process
 *                        each, in sequence) with tallyd running as a
 *                        daemon (--workers BENCH_RMQ_WORKERS); a slice
 *                        ends when the last of its grants is delivered:
 *                        its credential.delivered event (the credential
 *                        sealed to the node) committed in the log,
 *                        polled every 2 ms (the control plane writes no
 *                        env file; a node's agent does)
 *
 * in BENCH_RMQ_ROUNDS rounds of slices, the order alternating, so both
 * see the same machine (a vhost's start-up, its message stores, is most
 * of the work and swings with the disk).  The ratio tally / direct is
 * the figure issue 13 sets at 1.25 at most.
 *
 * Then a verification pass over tally's grants: the driver's check_bulk
 * (its HTTP requests counted: the round trips of a pass; the grants'
 * vhosts, users and passwords as node-a opens them, by tally env with
 * its key), and the
 * verifier itself in this process (tl_rx_verify, as tally check runs it,
 * so its CPU is tallyd's for the same pass): first with a login per
 * grant (a new credential's first check logs in), then twice in bulk
 * without sample logins; wall time and CPU per grant.
 *
 * Env: TALLY_BIN, TALLY_SRC, TALLY_TMP (as make bench sets them);
 * BENCH_RMQ_GRANTS (100), BENCH_RMQ_ROUNDS (5), BENCH_RMQ_WORKERS (4).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "drivers/rabbitmq.h"
#include "reactors/epoch.h"
#include "reactors/rx.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME	"bench_rabbitmq"

static const char *bin, *src;
static char *scratch;
static char rdir[4300], home[4300], clilog[4300], dlog[4300], lockdir[4300];
static char nodekey[4300];
static struct tl_bench_dlv dlv;	/* home's deliveries, polled */
static char host[64], port[16], mport[16], user[64], pw[256];
static pid_t dpid = -1;
static int broker_up, locked;

/* --- the broker and its lock ----------------------------------------- */

static int
lock_take(void)
{
	const char *tmp = getenv("TALLY_TMP");
	char pidf[4400], buf[32];
	FILE *f;
	int i;

	snprintf(lockdir, sizeof(lockdir), "%s/.rabbit.lock",
	    tmp != NULL && *tmp != '\0' ? tmp : "build/tmp");
	snprintf(pidf, sizeof(pidf), "%s/pid", lockdir);
	for (i = 0; i < 1800; i++) {
		if (mkdir(lockdir, 0755) == 0) {
			if ((f = fopen(pidf, "w")) != NULL) {
				fprintf(f, "%ld\n", (long)getpid());
				fclose(f);
			}
			locked = 1;
			return 0;
		}
		if ((f = fopen(pidf, "r")) != NULL) {
			long o = 0;

			if (fgets(buf, sizeof(buf), f) != NULL)
				o = atol(buf);
			fclose(f);
			if (o > 0 && kill((pid_t)o, 0) != 0) {
				unlink(pidf);
				rmdir(lockdir);
				continue;
			}
		}
		tl_bench_msleep(500);
	}
	return -1;
}

static void
cleanup(void)
{
	char pidf[4400];

	tl_bench_tallyd_stop(&dpid);
	if (broker_up)
		tl_bench_harness(src, "rabbit.sh", "stop", rdir, NULL);
	broker_up = 0;
	if (locked) {
		snprintf(pidf, sizeof(pidf), "%s/pid", lockdir);
		unlink(pidf);
		rmdir(lockdir);
		locked = 0;
	}
}

static int
broker_start(void)
{
	char p[16];
	int b, i;

	if (lock_take() != 0) {
		fprintf(stderr, ME ": another broker held %s\n", lockdir);
		return -1;
	}
	snprintf(rdir, sizeof(rdir), "%s/rmq", scratch);
	for (b = 48600 + (int)(getpid() % 40) * 20; b < 62000; b += 20) {
		for (i = 0; i < 14 && tl_test_port_free(b + i); i++)
			;
		if (i < 14)
			continue;
		snprintf(p, sizeof(p), "%d", b);
		if (tl_bench_harness(src, "rabbit.sh", "start", rdir, p) != 0) {
			fprintf(stderr, ME ": rabbit.sh start %s %s failed\n",
			    rdir, p);
			return -1;
		}
		broker_up = 1;
		break;
	}
	if (!broker_up ||
	    tl_test_env_get(rdir, "TALLY_TEST_AMQP_HOST", host, sizeof(host)) ||
	    tl_test_env_get(rdir, "TALLY_TEST_AMQP_PORT", port, sizeof(port)) ||
	    tl_test_env_get(rdir, "TALLY_TEST_AMQP_MGMT_PORT", mport,
	    sizeof(mport)) ||
	    tl_test_env_get(rdir, "TALLY_TEST_AMQP_USER", user, sizeof(user)) ||
	    tl_test_env_get(rdir, "TALLY_TEST_AMQP_PASSWORD", pw, sizeof(pw)))
		return -1;
	return 0;
}

/* --- the direct client ----------------------------------------------- */

static size_t
sink(char *d, size_t s, size_t n, void *a)
{
	(void)d;
	(void)a;
	return s * n;
}

static int
put(CURL *c, const char *path, const char *body)
{
	char url[1024];
	long st = 0;

	snprintf(url, sizeof(url), "http://%s:%s/api%s", host, mport, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	if (curl_easy_perform(c) != CURLE_OK)
		return -1;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	if (st < 200 || st >= 300) {
		fprintf(stderr, ME ": PUT %s: HTTP %ld\n", path, st);
		return -1;
	}
	return 0;
}

static int
direct_one(CURL *c, int i)
{
	char p[256], b[512], hash[64], secret[TL_PASSWORD_MAX + 1];

	tl_secret_password(secret);
	if (tl_drv_rmq_hash(secret, hash, sizeof(hash)) != 0)
		return -1;
	tl_secret_wipe(secret, sizeof(secret));
	snprintf(p, sizeof(p), "/vhosts/d%04d", i);
	if (put(c, p, "{\"description\":\"direct\",\"tags\":\"bench\"}") != 0)
		return -1;
	snprintf(p, sizeof(p), "/users/d%04d_v1", i);
	snprintf(b, sizeof(b), "{\"password_hash\":\"%s\",\"hashing_algorithm\":"
	    "\"rabbit_password_hashing_sha256\",\"tags\":\"\"}", hash);
	if (put(c, p, b) != 0)
		return -1;
	snprintf(p, sizeof(p), "/permissions/d%04d/d%04d_v1", i, i);
	return put(c, p, "{\"configure\":\".*\",\"write\":\".*\","
	    "\"read\":\".*\"}");
}

/* --- tally ------------------------------------------------------------ */

static int
tally_setup(int n)
{
	char mf[4400], pmf[4300], s1[64], s2[64], s3[96], pwf[4400];
	FILE *fp;
	int i;

	snprintf(mf, sizeof(mf), "%s/consumers.yaml", scratch);
	snprintf(pwf, sizeof(pwf), "%s/admin.pw", scratch);
	if ((fp = fopen(mf, "w")) == NULL)
		return -1;
	for (i = 1; i <= n; i++)
		fprintf(fp, "---\nmodule: r%04d\n"
		    "env: {MQ_VHOST: \"\", MQ_USER: \"\", MQ_PASSWORD: \"\"}\n"
		    "requires:\n  mq:\n    type: rabbitmq-vhost\n"
		    "    from: rabbitmq\n"
		    "    env: {vhost: MQ_VHOST, user: MQ_USER, "
		    "password: MQ_PASSWORD}\n", i);
	if (fclose(fp) != 0 || (fp = fopen(pwf, "w")) == NULL)
		return -1;
	fprintf(fp, "%s\n", pw);
	fclose(fp);
	snprintf(pmf, sizeof(pmf), "%s/examples/rabbitmq.yaml", src);
	snprintf(s1, sizeof(s1), "port=%s", port);
	snprintf(s2, sizeof(s2), "management-port=%s", mport);
	snprintf(s3, sizeof(s3), "admin-user=%s", user);
	if (tl_bench_tally(bin, home, NULL, clilog, "init", NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "node", "add", "node-a",
	    "--routable-name=127.0.0.1", "--key-out", nodekey, NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "apply", pmf, mf,
	    NULL) != 0 ||
	    tl_bench_tally(bin, home, pwf, clilog, "assign", "rabbitmq",
	    "node-a", "--set", s1, "--set", s2, "--set", s3, "--secret",
	    "admin-password", NULL) != 0)
		return -1;
	return tl_bench_dlv_open(&dlv, home);
}

static double
tally_slice(int first, int last)
{
	char m[16];
	double t0 = tl_bench_now(), end;
	int i, k;

	for (i = first; i <= last; i++) {
		snprintf(m, sizeof(m), "r%04d", i);
		if (tl_bench_tally(bin, home, NULL, clilog, "assign", m,
		    "node-a", NULL) != 0) {
			fprintf(stderr, ME ": tally assign %s failed (see %s)\n",
			    m, clilog);
			return -1;
		}
	}
	end = tl_bench_now() + 600;
	while ((k = tl_bench_dlv_count(&dlv, NULL)) < last) {
		if (k < 0 || tl_bench_now() > end ||
		    waitpid(dpid, NULL, WNOHANG) == dpid) {
			fprintf(stderr, ME ": %d of %d delivered (see %s)\n",
			    k, last, dlog);
			return -1;
		}
		tl_bench_msleep(2);
	}
	return tl_bench_now() - t0;
}

/* utime + stime of pid, seconds (-1 if unknown). */
static double
proc_cpu(pid_t pid)
{
	char path[64], buf[2048], *p;
	unsigned long ut, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (p == NULL || (p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	    &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double
self_cpu(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* --- verification ------------------------------------------------------ */

/* The grants as delivered: vhost, user, password of r0001.. */
struct dg {
	char	id[32], v[256], u[256], p[256];
};

static int
read_env(int i, struct dg *d)
{
	char m[16], env[2048];
	int rc = -1;

	snprintf(d->id, sizeof(d->id), "r%04d/mq", i);
	snprintf(m, sizeof(m), "r%04d", i);
	if (tl_bench_env(bin, home, "node-a", m, nodekey, clilog, env,
	    sizeof(env)) != 0) {
		fprintf(stderr, ME ": tally env node-a %s failed (see %s)\n",
		    m, clilog);
		goto out;
	}
	if (tl_bench_envval(env, "MQ_VHOST", d->v, sizeof(d->v)) != 0 ||
	    tl_bench_envval(env, "MQ_USER", d->u, sizeof(d->u)) != 0 ||
	    tl_bench_envval(env, "MQ_PASSWORD", d->p, sizeof(d->p)) != 0) {
		fprintf(stderr, ME ": %s's environment is incomplete\n", m);
		goto out;
	}
	rc = 0;
out:
	tl_secret_wipe(env, sizeof(env));
	return rc;
}

static void
driver_bulk(int n)
{
	const struct tl_drv_ops *ops = tl_drv_find("rabbitmq");
	const char *sv[] = { "management-port", mport, NULL };
	struct tl_drv_admin a = { .host = host, .port = port, .user = user,
	    .password = pw, .settings = sv };
	struct tl_drv_grant *gs;
	enum tl_drv_drift *d;
	char (*w)[TL_WHY_MAX];
	char why[TL_WHY_MAX], mesh[TL_DRV_LEADER_MAX] = "";
	struct dg *g;
	unsigned long r0;
	double t, c;
	void *h = NULL;
	int i, bad = 0, rc;

	g = calloc((size_t)n, sizeof(*g));
	gs = calloc((size_t)n, sizeof(*gs));
	d = calloc((size_t)n, sizeof(*d));
	w = calloc((size_t)n, sizeof(*w));
	if (g == NULL || gs == NULL || d == NULL || w == NULL)
		goto out;
	for (i = 0; i < n; i++) {
		if (read_env(i + 1, &g[i]) != 0)
			goto out;
		gs[i].resource = g[i].v;
		gs[i].owner = "";
		gs[i].login = g[i].u;
		gs[i].password = g[i].p;
		gs[i].grant = g[i].id;
	}
	/* The home's mesh: the driver refuses another mesh's vhosts. */
	{
		struct tl_log *log = NULL;
		char logdir[4400];

		snprintf(logdir, sizeof(logdir), "%s/log", home);
		if (tl_log_open(logdir, 0, &log) == 0) {
			(void)tl_mesh_load(log, mesh);
			tl_log_close(log);
		}
		a.mesh = mesh;
	}
	if ((rc = ops->open(&a, &h, why)) != 0) {
		fprintf(stderr, ME ": open: %s\n", why);
		goto out;
	}
	r0 = tl_drv_rmq_requests(h);
	t = tl_bench_now();
	c = self_cpu();
	rc = ops->check_bulk(h, gs, (size_t)n, d, w);
	c = self_cpu() - c;
	t = tl_bench_now() - t;
	for (i = 0; i < n; i++)
		bad += d[i] != TL_DRIFT_NONE;
	printf("  driver check_bulk over %d grants: rc %d, %d drifted, %lu "
	    "HTTP requests (round trips), %.1f ms wall, %.3f ms CPU per "
	    "grant\n", n, rc, bad, tl_drv_rmq_requests(h) - r0, t * 1000,
	    c * 1000 / n);
	ops->close(h);
out:
	if (g != NULL)
		tl_secret_wipe(g, (size_t)n * sizeof(*g));
	free(g);
	free(gs);
	free(d);
	free(w);
}

static void
verifier_pass(int login_all, const char *what)
{
	struct tl_rx_verify_opts o;
	struct tl_rx rx;
	char logdir[4400], path[4400], why[TL_WHY_MAX] = "";
	unsigned checked = 0, bad = 0, calls = 0;
	uint64_t next;
	double t, c;
	int rc;

	tl_rx_init(&rx);
	rx.actor = "bench";
	if (strlen(home) >= sizeof(rx.home))
		return;
	memcpy(rx.home, home, strlen(home) + 1);
	snprintf(logdir, sizeof(logdir), "%s/log", home);
	snprintf(path, sizeof(path), "%s/master.key", home);
	/* The home's mesh: the drivers refuse another mesh's objects. */
	if ((rc = tl_log_open(logdir, 0, &rx.log)) != 0 ||
	    (rc = tl_mesh_load(rx.log, rx.mesh)) != 0 ||
	    (rc = tl_secret_load(path, &rx.key, why)) != 0) {
		fprintf(stderr, ME ": cannot open the home: %s %s\n",
		    tl_strerror(rc), why);
		return;
	}
	memset(&o, 0, sizeof(o));
	o.force = 1;
	o.interval_ns = 30000000000u;
	o.login_all = login_all;
	o.login_every = UINT_MAX;
	o.calls = &calls;
	t = tl_bench_now();
	c = self_cpu();
	rc = tl_rx_verify(&rx, &o, &checked, &bad, &next);
	c = self_cpu() - c;
	t = tl_bench_now() - t;
	printf("  verifier, %-26s rc %d, %u checked, %u bad, %u driver "
	    "call(s), %.0f ms wall, %.3f ms CPU per grant\n", what, rc,
	    checked, bad, calls, t * 1000, checked ? c * 1000 / checked : 0);
	tl_rx_free(&rx);
	tl_log_close(rx.log);
}

/* --- main -------------------------------------------------------------- */

int
main(void)
{
	char wk[16];
	double dsecs = 0, tsecs = 0, t, cpu0, cpu1;
	int n, rounds, workers, r, per, first, last, i, ok = 1;
	CURL *c;

	tl_bench_dirs(&src, &bin);
	n = tl_bench_envint("BENCH_RMQ_GRANTS", 100, 1, 5000);
	rounds = tl_bench_envint("BENCH_RMQ_ROUNDS", 5, 1, 100);
	workers = tl_bench_envint("BENCH_RMQ_WORKERS", 4, 1, 32);
	if (rounds > n)
		rounds = n;
	scratch = tl_test_tmpdir("bench_rabbitmq");
	snprintf(home, sizeof(home), "%s/home", scratch);
	snprintf(clilog, sizeof(clilog), "%s/cli.log", scratch);
	snprintf(dlog, sizeof(dlog), "%s/tallyd.log", scratch);
	/* The node's key, outside the home (tally node add refuses it). */
	snprintf(nodekey, sizeof(nodekey), "%s/node-a.key", scratch);
	tl_bench_atexit(cleanup);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	printf(ME ": %d vhost grants, tally (--workers %d) against the "
	    "management API directly, %d rounds; tally from %s\n", n,
	    workers, rounds, bin);
	fflush(stdout);
	if (broker_start() != 0 || tally_setup(n) != 0) {
		fprintf(stderr, ME ": set-up failed (see %s)\n", scratch);
		cleanup();
		return 1;
	}
	snprintf(wk, sizeof(wk), "%d", workers);
	if ((dpid = tl_bench_tallyd_start(bin, home, dlog, "--workers", wk,
	    NULL)) < 0) {
		fprintf(stderr, ME ": tallyd did not start (see %s)\n", dlog);
		cleanup();
		return 1;
	}
	cpu0 = proc_cpu(dpid);
	if ((c = curl_easy_init()) == NULL)
		return 1;
	{
		struct curl_slist *hd = curl_slist_append(NULL,
		    "content-type: application/json");

		curl_easy_setopt(c, CURLOPT_USERNAME, user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, pw);
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	}
	per = (n + rounds - 1) / rounds;
	for (r = 0; r < rounds && ok; r++) {
		first = r * per + 1;
		last = first + per - 1 > n ? n : first + per - 1;
		if (first > last)
			break;
		for (i = 0; i < 2 && ok; i++) {
			if ((i == 0) == (r % 2 == 0)) {
				int k;

				t = tl_bench_now();
				for (k = first; k <= last && ok; k++)
					ok = direct_one(c, k) == 0;
				dsecs += tl_bench_now() - t;
			} else {
				t = tally_slice(first, last);
				ok = t >= 0;
				tsecs += t;
			}
		}
		printf("  round %d: grants %d..%d\n", r + 1, first, last);
		fflush(stdout);
	}
	cpu1 = proc_cpu(dpid);
	curl_easy_cleanup(c);
	if (!ok) {
		fprintf(stderr, ME ": a contender failed (see %s)\n", scratch);
		cleanup();
		return 1;
	}
	printf("\nrequest -> delivered, %d grants\n", n);
	printf("  %-34s %8.1f ms per grant (%.2f s)\n", "direct (3 PUTs, "
	    "one HTTP session)", dsecs * 1000 / n, dsecs);
	printf("  %-34s %8.1f ms per grant (%.2f s, tally assign CLI "
	    "included)\n", "tally (assign -> delivered)", tsecs * 1000 / n,
	    tsecs);
	printf("  ratio tally / direct: %.2fx (target <= 1.25x)\n",
	    dsecs > 0 ? tsecs / dsecs : 0);
	tl_bench_target("rabbitmq: tally / direct", "<= 1.25x",
	    dsecs > 0 && tsecs / dsecs <= 1.25, "%.2fx",
	    dsecs > 0 ? tsecs / dsecs : 0);
	if (cpu0 >= 0 && cpu1 >= 0)
		printf("  tallyd CPU while provisioning: %.2f ms per grant\n",
		    (cpu1 - cpu0) * 1000 / n);
	fflush(stdout);
	tl_bench_tallyd_stop(&dpid);
	tl_bench_dlv_close(&dlv);	/* verifier_pass opens this log */

	printf("\nverification pass over the %d tally grants (%d more "
	    "vhosts on the broker: the direct ones)\n", n, n);
	driver_bulk(n);
	/* New credentials log in first (reactors/verify.c); then bulk. */
	verifier_pass(1, "a login per grant:");
	verifier_pass(0, "bulk, no sample logins:");
	verifier_pass(0, "bulk again:");
	fflush(stdout);
	cleanup();
	curl_global_cleanup();
	tl_test_tmpdir_done(scratch);
	return 0;
}
