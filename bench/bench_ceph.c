/*
 * bench_ceph.c - grants of the ceph-rgw driver through tally against the
 * same API calls issued directly, in the same run, on one throwaway
 * single-node Ceph RGW (tests/harness/ceph.sh).  Prints figures; exits 1
 * when the set-up or a contender fails.
 *
 * Contenders, BENCH_CEPH_GRANTS (100) grants each:
 *
 *   direct, the driver's calls   a small libcurl client, SigV4 with the
 *                           admin's key, one connection: the calls
 *                           drivers/ceph_rgw.c makes for a new grant, in
 *                           its order (GET /admin/user: 404, PUT
 *                           /admin/user with the key, GET /admin/bucket:
 *                           404, PUT /BUCKET signed with the new key)
 *   tally, request->delivered  one tally assign of every module (one CLI
 *                           process, one transaction: how an operator
 *                           places a batch), tallyd running as a daemon
 *                           in its own home; the target's figure; then
 *                           the same with a tally assign per module (one
 *                           process each, in sequence: the CLI's fixed
 *                           cost per grant).  Each ends when the last
 *                           grant's credential.delivered is committed
 *                           (polled every 1 ms)
 *   tallyd --once           the modules assigned first (untimed), then one
 *                           tallyd --once provisioning and delivering them
 *
 * Then a verification pass over the tally grants in this process
 * (tl_rx_verify, as tally check does; CPU by getrusage, what tallyd's
 * would be): bulk without logins, and with the consumer-side check per
 * grant; driver calls, the requests the RGW served (its perf counter
 * rgw.req, read through the admin socket), wall time, CPU per grant.
 *
 * Env: TALLY_BIN, TALLY_SRC, TALLY_TMP (as make bench sets them);
 * BENCH_CEPH_GRANTS (100).
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <curl/curl.h>
#include <sodium.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "reactors/mesh.h"
#include "reactors/rx.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME	"bench_ceph"

static const char *bin, *src;
static char *scratch, cdir[4200], cport[16], cak[128], csk[256];
static char home[4300], home2[4300], home3[4300];
static char clilog[4300], dlog[4300];
static int started;

static void
cleanup(void)
{
	if (started) {
		tl_bench_harness(src, "ceph.sh", "stop", cdir, NULL);
		started = 0;
	}
}

static size_t
sink(char *d, size_t sz, size_t n, void *arg)
{
	(void)d;
	(void)arg;
	return sz * n;
}

/* One signed request on c (query sorted by the caller): the status. */
static long
req(CURL *c, const char *method, const char *pathq, const char *ak,
    const char *sk)
{
	char url[1024];
	long st = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%s%s", cport, pathq);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, strcmp(method, "GET") == 0 ?
	    NULL : method);
	curl_easy_setopt(c, CURLOPT_USERNAME, ak);
	curl_easy_setopt(c, CURLOPT_PASSWORD, sk);
	if (curl_easy_perform(c) != CURLE_OK)
		return -1;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	return st;
}

/* n grants directly, the driver's four calls each.  Seconds. */
static double
direct(int n)
{
	struct curl_slist *hd = curl_slist_append(NULL,
	    "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	CURL *c = curl_easy_init();
	char uid[64], bucket[64], pq[512], pw[TL_PASSWORD_MAX + 1], ak[24];
	unsigned char h[9];
	double t0, t = -1;
	int i = 0;

	if (c == NULL || hd == NULL)
		goto out;
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, "aws:amz:default:s3");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	t0 = tl_bench_now();
	for (i = 0; i < n; i++) {
		snprintf(uid, sizeof(uid), "direct_%04d", i);
		snprintf(bucket, sizeof(bucket), "direct-%04d", i);
		tl_secret_password(pw);
		crypto_generichash(h, sizeof(h), (unsigned char *)pw,
		    strlen(pw), NULL, 0);
		memcpy(ak, "TL", 2);
		sodium_bin2hex(ak + 2, sizeof(ak) - 2, h, sizeof(h));
		snprintf(pq, sizeof(pq), "/admin/user?uid=%s", uid);
		if (req(c, "GET", pq, cak, csk) != 404)
			goto out;
		snprintf(pq, sizeof(pq), "/admin/user?access-key=%s&"
		    "display-name=tally%%20grant%%20d%d%%2Ff&max-buckets=1&"
		    "secret-key=%s&uid=%s", ak, i, pw, uid);
		if (req(c, "PUT", pq, cak, csk) != 200)
			goto out;
		snprintf(pq, sizeof(pq), "/admin/bucket?bucket=%s&stats=true",
		    bucket);
		if (req(c, "GET", pq, cak, csk) != 404)
			goto out;
		snprintf(pq, sizeof(pq), "/%s", bucket);
		if (req(c, "PUT", pq, ak, pw) != 200)
			goto out;
	}
	t = tl_bench_now() - t0;
out:
	if (t < 0)
		fprintf(stderr, ME ": a direct call failed at grant %d\n", i);
	sodium_memzero(pw, sizeof(pw));
	curl_slist_free_all(hd);
	if (c != NULL)
		curl_easy_cleanup(c);
	return t;
}

/* The requests the RGW has served (perf counter rgw.req), or -1. */
static long long
rgw_requests(void)
{
	char cmd[4600], buf[1 << 16];
	const char *p;
	size_t len;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "ceph --admin-daemon '%s/run/client.rgw.a."
	    "asok' perf dump rgw 2>/dev/null", cdir);
	if ((f = popen(cmd, "r")) == NULL)
		return -1;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	pclose(f);
	buf[len] = '\0';
	if ((p = strstr(buf, "\"req\":")) == NULL)
		return -1;
	return atoll(p + 6);
}

/* A home with the store provider and n consumer modules PFX<i>. */
static int
setup(const char *h, const char *pfx, int n)
{
	char mf[4400], smf[4400], set1[64], set2[200], skf[4300], key[4400];
	FILE *fp;
	int i;

	snprintf(key, sizeof(key), "%s/node-a.%s.key", scratch, pfx);
	snprintf(mf, sizeof(mf), "%s/%s-consumers.yaml", scratch, pfx);
	snprintf(smf, sizeof(smf), "%s/store.yaml", scratch);
	snprintf(skf, sizeof(skf), "%s/admin.secret", cdir);
	if ((fp = fopen(smf, "w")) == NULL)
		return -1;
	fprintf(fp, "module: store\nprovides:\n  s3-bucket:\n"
	    "    driver: ceph-rgw\n    revoke: retain\n");
	if (fclose(fp) != 0 || (fp = fopen(mf, "w")) == NULL)
		return -1;
	for (i = 1; i <= n; i++)
		fprintf(fp, "---\nmodule: %s%04d\n"
		    "env: {S3_BUCKET: \"\", S3_KEY: \"\"}\n"
		    "requires:\n  files:\n    type: s3-bucket\n"
		    "    from: store\n    env: {bucket: S3_BUCKET, "
		    "secret-key: S3_KEY}\n", pfx, i);
	if (fclose(fp) != 0)
		return -1;
	snprintf(set1, sizeof(set1), "port=%s", cport);
	snprintf(set2, sizeof(set2), "admin-access-key=%s", cak);
	if (tl_bench_tally(bin, h, NULL, clilog, "init", NULL) != 0 ||
	    tl_bench_tally(bin, h, NULL, clilog, "node", "add", "node-a",
	    "--routable-name=127.0.0.1", "--key-out", key, NULL) != 0 ||
	    tl_bench_tally(bin, h, NULL, clilog, "apply", smf, mf,
	    NULL) != 0 ||
	    tl_bench_tally(bin, h, skf, clilog, "assign", "store", "node-a",
	    "--set", set1, "--set", set2, "--secret", "admin-secret-key",
	    NULL) != 0)
		return -1;
	return 0;
}

static double
run_once(void)
{
	char path[4400], *argv[] = { NULL, "--once", "--once-timeout", "600",
	    NULL };
	double t0;

	snprintf(path, sizeof(path), "%s/tallyd", bin);
	argv[0] = path;
	t0 = tl_bench_now();
	if (tl_bench_run(home2, NULL, dlog, NULL, argv) != 0)
		return -1;
	return tl_bench_now() - t0;
}

static double
once(int n)
{
	char m[16];
	double t;
	int i;

	for (i = 1; i <= n; i++) {
		snprintf(m, sizeof(m), "q%04d", i);
		if (tl_bench_tally(bin, home2, NULL, clilog, "assign", m,
		    "node-a", NULL) != 0)
			return -1;
	}
	if ((t = run_once()) < 0 || tl_bench_delivered(home2, NULL) < n)
		return -1;
	return t;
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

static int
verify_section(void)
{
	static const char *const what[3] = { "a consumer check per grant",
	    "bulk, no consumer checks", "bulk, sample 1 in 30" };
	struct tl_rx rx;
	struct tl_rx_verify_opts o;
	char logdir[4400], path[4400], why[TL_WHY_MAX] = "";
	unsigned checked, bad, calls;
	uint64_t next;
	long long r0, r1;
	double t, cpu;
	int i, rc, failed = 0;

	tl_rx_init(&rx);
	rx.actor = "bench";
	memcpy(rx.home, home, strlen(home) + 1);
	snprintf(logdir, sizeof(logdir), "%s/log", home);
	snprintf(path, sizeof(path), "%s/master.key", home);
	/* The home's mesh: the drivers refuse another mesh's objects. */
	if ((rc = tl_log_open(logdir, 0, &rx.log)) != 0 ||
	    (rc = tl_mesh_load(rx.log, rx.mesh)) != 0 ||
	    (rc = tl_secret_load(path, &rx.key, why)) != 0) {
		fprintf(stderr, ME ": cannot open the home: %s %s\n",
		    tl_strerror(rc), why);
		return -1;
	}
	printf("\nverification: a forced pass over the tally grants, in this "
	    "process (tallyd's code)\n");
	printf("  %-27s %8s %5s %6s %9s %9s %9s %12s\n", "", "checked", "bad",
	    "calls", "RGW reqs", "wall", "CPU", "CPU / grant");
	for (i = 0; i < 3; i++) {
		memset(&o, 0, sizeof(o));
		o.force = 1;
		o.interval_ns = 30000000000u;
		o.login_all = i == 0;
		o.login_every = i == 1 ? UINT_MAX : 0;
		o.calls = &calls;
		calls = 0;
		r0 = rgw_requests();
		t = tl_bench_now();
		cpu = self_cpu();
		rc = tl_rx_verify(&rx, &o, &checked, &bad, &next);
		cpu = self_cpu() - cpu;
		t = tl_bench_now() - t;
		r1 = rgw_requests();
		if (rc != 0 || bad != 0) {
			fprintf(stderr, ME ": pass: %s, %u bad\n",
			    tl_strerror(rc), bad);
			failed = 1;
		}
		printf("  %-27s %8u %5u %6u %9lld %6.1f ms %6.1f ms %9.3f ms\n",
		    what[i], checked, bad, calls, r0 >= 0 && r1 >= 0 ?
		    r1 - r0 : -1, t * 1000, cpu * 1000, checked ?
		    cpu * 1000 / checked : 0);
	}
	printf("  (calls: driver calls, a bulk call is one; RGW reqs: what "
	    "the RGW served, the\n   session's opening probe included; a "
	    "bulk call is 1 + GET /admin/user and the ACL per grant,\n   a "
	    "consumer check 6: the user, the bucket, the ACL, HEAD own, HEAD "
	    "canary, the policy)\n");
	fflush(stdout);
	tl_rx_free(&rx);
	tl_log_close(rx.log);
	return failed ? -1 : 0;
}

int
main(void)
{
	char port[16], f[4300], line[512];
	double d, tt, tb, cli = 0, clib = 0, to, idle;
	FILE *fp;
	int n, p;

	if (sodium_init() < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		return 1;
	tl_bench_dirs(&src, &bin);
	n = tl_bench_envint("BENCH_CEPH_GRANTS", 100, 1, 2000);
	scratch = tl_test_tmpdir("bench_ceph");
	snprintf(cdir, sizeof(cdir), "%s/ceph", scratch);
	snprintf(home, sizeof(home), "%s/home", scratch);
	snprintf(home2, sizeof(home2), "%s/home2", scratch);
	snprintf(home3, sizeof(home3), "%s/home3", scratch);
	snprintf(clilog, sizeof(clilog), "%s/cli.log", scratch);
	snprintf(dlog, sizeof(dlog), "%s/tallyd.log", scratch);
	tl_bench_atexit(cleanup);
	p = 37700 + (int)(getpid() % 200) * 7;
	snprintf(port, sizeof(port), "%d", p);
	if (tl_bench_harness(src, "ceph.sh", "start", cdir, port) != 0) {
		fprintf(stderr, ME ": ceph.sh start failed\n");
		return 1;
	}
	started = 1;
	snprintf(cport, sizeof(cport), "%s", port);
	snprintf(f, sizeof(f), "%s/env", cdir);
	if ((fp = fopen(f, "r")) == NULL)
		return 1;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (strncmp(line, "export TALLY_TEST_RGW_ACCESS=", 29) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(cak, sizeof(cak), "%.100s", line + 29);
		}
	fclose(fp);
	snprintf(f, sizeof(f), "%s/admin.secret", cdir);
	if ((fp = fopen(f, "r")) == NULL || fgets(csk, sizeof(csk), fp) ==
	    NULL || cak[0] == '\0') {
		fprintf(stderr, ME ": cannot read the admin key\n");
		return 1;
	}
	fclose(fp);
	csk[strcspn(csk, "\n")] = '\0';
	printf(ME ": %d grants on one single-node Ceph RGW (port %s); tally "
	    "from %s\n", n, cport, bin);
	fflush(stdout);
	if (setup(home, "p", n) != 0 || setup(home2, "q", n) != 0 ||
	    setup(home3, "b", n) != 0) {
		fprintf(stderr, ME ": set-up failed (see %s)\n", clilog);
		return 1;
	}
	d = direct(n);
	tb = tl_bench_through_tally(bin, home3, clilog, dlog, "b", n, 1,
	    &clib);
	tt = tl_bench_through_tally(bin, home, clilog, dlog, "p", n, 0, &cli);
	to = once(n);
	idle = run_once();
	if (d <= 0 || tt <= 0 || tb <= 0 || to <= 0) {
		fprintf(stderr, ME ": a contender failed (direct %.3f, tally "
		    "%.3f %.3f, once %.3f; see %s, %s)\n", d, tb, tt, to, clilog,
		    dlog);
		return 1;
	}
	printf("\nprovisioning %d grants                     total   per grant"
	    "   vs direct\n", n);
	printf("  direct, the driver's 4 calls        %8.1f ms %8.3f ms\n",
	    d * 1000, d * 1000 / n);
	printf("  tally, request -> delivered         %8.1f ms %8.3f ms  "
	    "x%.2f  (one tally assign of all %d: %.0f ms)\n", tb * 1000,
	    tb * 1000 / n, tb / d, n, clib * 1000);
	tl_bench_target("ceph-rgw: tally assign -> delivered / the driver's "
	    "calls", "<= x1.25", tb / d <= 1.25, "x%.2f", tb / d);
	printf("  the same, a tally assign per grant  %8.1f ms %8.3f ms  "
	    "x%.2f  (of which %.0f ms in %d tally assign processes)\n",
	    tt * 1000, tt * 1000 / n, tt / d, cli * 1000, n);
	printf("  tallyd --once, provision + deliver  %8.1f ms %8.3f ms  "
	    "x%.2f\n", to * 1000, to * 1000 / n, to / d);
	if (idle > 0 && idle < to)
		printf("  the same, less an idle tallyd --once  %6.1f ms "
		    "%8.3f ms  x%.2f  (idle run: %.0f ms)\n",
		    (to - idle) * 1000, (to - idle) * 1000 / n,
		    (to - idle) / d, idle * 1000);
	fflush(stdout);
	if (verify_section() != 0)
		return 1;
	cleanup();
	tl_secret_wipe(csk, sizeof(csk));
	tl_test_tmpdir_done(scratch);
	return 0;
}
