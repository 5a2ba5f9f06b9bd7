/*
 * bench_ca - the mesh CA (drivers/ca.c, issue 25):
 *
 *   1. CPU per certificate signed (tl_x509_sign: the request's
 *      signature checked, its subject held to the policy, the
 *      certificate built and signed) against its peer measured in the
 *      same run, a bare ECDSA P-256 signature by libcrypto; and CPU per
 *      key and request made on a node (tl_x509_request);
 *   2. BENCH_CERTS (1,000) holders' certificates through the real
 *      programs: after tallyd --once provisioned and delivered every
 *      grant (not timed), tallyd as a daemon and one tally-node --log
 *      for the node that holds them all; timed from the agent's start
 *      (keys made, requests in its signed reports) to every certificate
 *      acknowledged (issued, written beside its key, reloaded with
 *      `true`, acknowledged with proof): per certificate, and in all.
 *
 *   3. their renewal, all due at once: tallyd and the agent stopped
 *      until every first certificate's renewal point (half of a
 *      lifetime long enough for all of them to be issued first) has
 *      passed, then started again; timed to every rotation completed
 *      (a new key on the node, its request, the certificate for the
 *      same name, written, acknowledged, the old version retired).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <sodium.h>

#include "core/secret.h"
#include "core/x509.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME "bench_ca"

static char home[4096], dir_[4096];
static const char *src, *bin;

static void
sh(const char *fmt, ...)
{
	char cmd[8192], full[16384];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "TALLY_HOME='%s' T='%s/tally' "
	    "D='%s/tallyd' A='%s/tally-node'; export TALLY_HOME; %s", home,
	    bin, bin, bin, cmd);
	if ((rc = system(full)) != 0) {
		fprintf(stderr, ME ": failed (%d): %s\n", rc, cmd);
		exit(1);
	}
}

static void
stop_all(void)
{
	char cmd[8400];

	snprintf(cmd, sizeof(cmd), "kill $(cat '%s/pids' 2>/dev/null) "
	    ">/dev/null 2>&1; rm -f '%s/pids'", dir_, dir_);
	if (system(cmd) != 0)
		return;
}

static double
cpu_now(void)
{
	return (double)tl_bench_ns(CLOCK_PROCESS_CPUTIME_ID) / 1e9;
}

/* 1: the CPU of one signature, and of one key and request. */
static void
signatures(int n)
{
	static const char *const sans[] = { "app.mesh.test", "10.0.0.7" };
	struct tl_x509_policy p;
	struct tl_x509_ca *ca;
	char why[TL_WHY_MAX], *ck, *cc, **keys, **csrs, *cert;
	EVP_PKEY *k = EVP_EC_gen("P-256");
	EVP_MD_CTX *md;
	unsigned char msg[600], sig[128];
	size_t sl;
	double t0, make_us, sign_us, raw_us;
	int i;

	keys = calloc((size_t)n, sizeof(*keys));
	csrs = calloc((size_t)n, sizeof(*csrs));
	if (keys == NULL || csrs == NULL || k == NULL ||
	    tl_x509_ca_make("bench CA", 30, &ck, &cc, why) != 0) {
		fprintf(stderr, ME ": setup: %s\n", why);
		exit(1);
	}
	t0 = cpu_now();
	/* As a node makes them (tools/tally-node/certs.c). */
	for (i = 0; i < n; i++)
		if (tl_x509_request("app-tls_0123456789abcdef", sans, 2,
		    &keys[i], &csrs[i], why) != 0) {
			fprintf(stderr, ME ": request: %s\n", why);
			exit(1);
		}
	make_us = (cpu_now() - t0) * 1e6 / n;
	memset(&p, 0, sizeof(p));
	p.cn = "app-tls_0123456789abcdef";
	p.sans = sans;
	p.nsans = 2;
	p.lifetime_s = 86400;
	/* As a CA session does: the CA parsed once, then each request. */
	if (tl_x509_ca_load(ck, cc, &ca, why) != 0) {
		fprintf(stderr, ME ": CA: %s\n", why);
		exit(1);
	}
	t0 = cpu_now();
	for (i = 0; i < n; i++) {
		if (tl_x509_ca_sign(ca, csrs[i], &p, &cert, NULL, why) != 0) {
			fprintf(stderr, ME ": sign: %s\n", why);
			exit(1);
		}
		free(cert);
	}
	sign_us = (cpu_now() - t0) * 1e6 / n;
	tl_x509_ca_free(ca);
	/* The peer: a bare ECDSA P-256 signature of a certificate's size. */
	randombytes_buf(msg, sizeof(msg));
	t0 = cpu_now();
	for (i = 0; i < n; i++) {
		md = EVP_MD_CTX_new();
		sl = sizeof(sig);
		if (md == NULL || EVP_DigestSignInit(md, NULL, EVP_sha256(),
		    NULL, k) != 1 || EVP_DigestSign(md, sig, &sl, msg,
		    sizeof(msg)) != 1) {
			fprintf(stderr, ME ": raw signature failed\n");
			exit(1);
		}
		EVP_MD_CTX_free(md);
	}
	raw_us = (cpu_now() - t0) * 1e6 / n;
	printf("  %d certificates signed: %.0f us of CPU each (the request "
	    "checked, the certificate built and signed); a bare ECDSA P-256 "
	    "signature %.0f us: x%.2f\n", n, sign_us, raw_us, sign_us / raw_us);
	printf("  a node's key and request: %.0f us of CPU each\n", make_us);
	/*
	 * A certificate is one verification (the request's proof of
	 * possession, about 3 signatures' work with P-256) and one
	 * signature, plus its encoding: x5 of a bare signature.
	 */
	tl_bench_target("ca: CPU per certificate signed vs a bare ECDSA "
	    "signature", "<= x5", sign_us <= 5 * raw_us, "x%.2f (%.0f us)",
	    sign_us / raw_us, sign_us);
	for (i = 0; i < n; i++) {
		tl_secret_free(keys[i]);
		free(csrs[i]);
	}
	free(keys);
	free(csrs);
	tl_secret_free(ck);
	free(cc);
	EVP_PKEY_free(k);
}

/* node-b's agent on the log, every module reloaded with true. */
static void
agent_start(const char *d, int n)
{
	sh("R=''; i=0; while [ $i -lt %d ]; do R=\"$R --reload "
	    "$(printf c%%04d $i)=true\"; i=$((i + 1)); done; $A --node node-b "
	    "--key '%s/b.key' --dir '%s/node-b' --state '%s/node-b.state' "
	    "--log \"$TALLY_HOME\" --report-interval 1 $R 2>>'%s/agent.log' & "
	    "echo $! >>'%s/pids'", n, d, d, d, d, d);
}

int
main(void)
{
	char manifest[4200];
	int n = tl_bench_envint("BENCH_CERTS", 1000, 1, 100000), i;
	/*
	 * Certificates renewed at half their lifetime, which is long
	 * enough for every first one to be issued before any renewal.
	 */
	int life = 120 + n / 10;
	double t0, t1;
	FILE *fp;
	char *d;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (sodium_init() < 0)
		return 1;
	tl_bench_dirs(&src, &bin);
	signatures(n);

	if ((d = tl_test_tmpdir("bench-ca")) == NULL)
		return 1;
	snprintf(dir_, sizeof(dir_), "%s", d);
	snprintf(home, sizeof(home), "%s/home", d);
	tl_bench_atexit(stop_all);
	snprintf(manifest, sizeof(manifest), "%s/apps.yaml", d);
	if ((fp = fopen(manifest, "w")) == NULL)
		return 1;
	for (i = 0; i < n; i++)
		fprintf(fp, "%smodule: c%04d\nenv: {TLS_CERT: \"\", "
		    "TLS_KEY: \"\"}\nrequires:\n  tls:\n    type: "
		    "x509-certificate\n    from: mesh-ca\n    sans: "
		    "[c%04d.mesh.test]\n    env: {certificate: TLS_CERT, "
		    "private-key: TLS_KEY}\n", i ? "---\n" : "", i, i);
	fclose(fp);
	sh("$T init >/dev/null && $T node add node-a --routable-name "
	    "127.0.0.1 --key-out '%s/a.key' >/dev/null && $T node add node-b "
	    "--routable-name 127.0.0.2 --key-out '%s/b.key' >/dev/null && "
	    "$T apply '%s/examples/mesh-ca.yaml' '%s' >/dev/null && "
	    "$T assign mesh-ca node-a --expose network --set lifetime=%ds "
	    "--set renew-at=50 >/dev/null", d, d, src,
	    manifest, life);
	sh("i=0; m=''; while [ $i -lt %d ]; do m=\"$m $(printf c%%04d $i)\"; "
	    "i=$((i + 1)); done; $T assign $m node-b >/dev/null", n);
	printf("  provisioning and delivering %d certificate grants...\n", n);
	t0 = tl_bench_now();
	sh("$D --once --once-timeout 900 2>'%s/once.log'", d);
	printf("  provisioned and delivered in %.1f s\n", tl_bench_now() - t0);
	sh("$D --interval 1 --verify-interval 3600 2>'%s/tallyd.log' & "
	    "echo $! >>'%s/pids'", d, d);
	tl_bench_msleep(300);
	t0 = tl_bench_now();
	agent_start(d, n);
	tl_bench_wait_type(ME, home, "credential.acknowledged", n, 900);
	t1 = tl_bench_now();
	printf("  %d holders' certificates, keys made on the node: request -> "
	    "certificate on the node and acknowledged %.1f ms per "
	    "certificate, %.1f s in all\n", n, (t1 - t0) * 1000 / n, t1 - t0);
	stop_all();
	tl_bench_msleep(300);
	sh("test $($T log --json --type certificate.issued | wc -l) -eq %d",
	    n);

	/* Every renewal due at once: tallyd and the agent come back then. */
	sh("S=$($T log --json --type certificate.issued | python3 -c '"
	    "import json, sys\nprint(max(json.loads(l)[\"body\"][\"renew_at\"] "
	    "for l in sys.stdin))'); N=$(date +%%s); if [ $S -ge $N ]; then "
	    "sleep $((S - N + 1)); fi");
	t0 = tl_bench_now();
	sh("$D --interval 1 --verify-interval 3600 2>>'%s/tallyd.log' & "
	    "echo $! >>'%s/pids'", d, d);
	agent_start(d, n);
	tl_bench_wait_type(ME, home, "rotation.completed", n, 900);
	t1 = tl_bench_now();
	printf("  %d renewals due at once (new key on the node, request, "
	    "certificate, acknowledged, the old one left to expire): %.1f s "
	    "in all, %.1f ms per certificate\n", n, t1 - t0,
	    (t1 - t0) * 1000 / n);
	stop_all();
	tl_bench_msleep(300);
	sh("test $($T log --json --type certificate.issued | wc -l) -eq %d",
	    2 * n);
	sh("$T verify >/dev/null && $T rebuild --check >/dev/null");
	printf("  %d certificate.issued, two per holder; tally verify and "
	    "rebuild --check: ok\n", 2 * n);
	if (getenv("BENCH_KEEP") == NULL)
		tl_test_tmpdir_done(d);
	return 0;
}
