/*
 * bench_oidc.c - the oidc driver against the same registrations issued
 * directly, on a throwaway oidc-provider (tests/harness/oidc.sh).
 *
 * GRANTS (default 100) clients registered through the driver's create
 * (with the secret handle recorded as a reactor would) against GRANTS
 * bare RFC 7591 POSTs with libcurl on one connection: the ratio is the
 * driver's overhead (discovery at open, JSON, the handle; target
 * <= 1.25x).  Then a verification pass: check for every grant (GET of
 * the registration, a client_credentials token, introspection and
 * revocation of that token) against the same four requests issued
 * directly.  Then through tally: GRANTS consumer modules assigned
 * (untimed), one tallyd --once that registers, records the handles,
 * delivers and verifies them (every credential.delivered counted after
 * it exits), less an idle tallyd --once (its fixed cost), against the
 * direct registrations.  Exits 1 when set-up or a contender fails, or
 * when the driver's ratio is above 1.25x.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "core/error.h"
#include "drivers/driver.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

extern const struct tl_drv_ops tl_drv_oidc;

static char	 dir[4096], issuer[128], port[16], iat[256];
static char	 home[4200], clilog[4300], dlog[4300];
static int	 started;

static int
harness(const char *cmd, const char *arg)
{
	const char *src, *bin;
	char path[4200];
	pid_t pid;
	int st;

	tl_bench_dirs(&src, &bin);
	snprintf(path, sizeof(path), "%s/tests/harness/oidc.sh", src);
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		execlp("sh", "sh", path, cmd, dir, arg, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void
stop(void)
{
	if (started) {
		harness("stop", NULL);
		started = 0;
	}
	if (dir[0] != '\0') {
		tl_test_rmtree(dir);	/* the tally home, logs, manifests */
		dir[0] = '\0';
	}
}

/* A tally home with the provider and n consumers assigned (untimed). */
static int
setup_tally(const char *bin, int n)
{
	char mf[4400], pmf[4400], key[4400], set1[200], iatf[4200];
	FILE *fp;
	int i;

	snprintf(home, sizeof(home), "%s/home", dir);
	snprintf(clilog, sizeof(clilog), "%s/cli.log", dir);
	snprintf(dlog, sizeof(dlog), "%s/tallyd.log", dir);
	snprintf(key, sizeof(key), "%s/node-a.key", dir);
	snprintf(pmf, sizeof(pmf), "%s/idp.yaml", dir);
	snprintf(mf, sizeof(mf), "%s/consumers.yaml", dir);
	snprintf(iatf, sizeof(iatf), "%s/iat", dir);
	if ((fp = fopen(pmf, "w")) == NULL)
		return -1;
	fprintf(fp, "module: idp\nprovides:\n  oidc-client:\n"
	    "    driver: oidc\n    revoke: drop\n");
	if (fclose(fp) != 0 || (fp = fopen(mf, "w")) == NULL)
		return -1;
	for (i = 1; i <= n; i++)
		fprintf(fp, "---\nmodule: c%04d\nenv: {O_ID: \"\", O_SECRET: "
		    "\"\"}\nrequires:\n  login:\n    type: oidc-client\n"
		    "    from: idp\n    env: {client-id: O_ID, client-secret: "
		    "O_SECRET}\n", i);
	if (fclose(fp) != 0)
		return -1;
	snprintf(set1, sizeof(set1), "issuer=%s", issuer);
	if (tl_bench_tally(bin, home, NULL, clilog, "init", NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "node", "add", "node-a",
	    "--routable-name=127.0.0.1", "--key-out", key, NULL) != 0 ||
	    tl_bench_tally(bin, home, NULL, clilog, "apply", pmf, mf,
	    NULL) != 0 ||
	    tl_bench_tally(bin, home, iatf, clilog, "assign", "idp", "node-a",
	    "--set", set1, "--secret", "initial-access-token", NULL) != 0)
		return -1;
	for (i = 1; i <= n; i++) {
		char m[16];

		snprintf(m, sizeof(m), "c%04d", i);
		if (tl_bench_tally(bin, home, NULL, clilog, "assign", m,
		    "node-a", NULL) != 0)
			return -1;
	}
	return 0;
}

/* One tallyd --once on home: seconds, or -1. */
static double
once(const char *bin)
{
	char path[4400], *argv[] = { NULL, "--once", "--once-timeout", "600",
	    NULL };
	double t0;

	snprintf(path, sizeof(path), "%s/tallyd", bin);
	argv[0] = path;
	t0 = tl_bench_now();
	if (tl_bench_run(home, NULL, dlog, NULL, argv) != 0)
		return -1;
	return tl_bench_now() - t0;
}

struct body {
	char	*p;
	size_t	 n;
};

static size_t
collect(char *d, size_t s, size_t n, void *arg)
{
	struct body *b = arg;
	char *np = realloc(b->p, b->n + s * n + 1);

	if (np == NULL)
		return 0;
	b->p = np;
	memcpy(b->p + b->n, d, s * n);
	b->n += s * n;
	b->p[b->n] = '\0';
	return s * n;
}

static long
req(CURL *c, const char *method, const char *url, const char *bearer,
    const char *user, const char *pass, const char *ctype, const char *data,
    struct body *b)
{
	struct curl_slist *hdr = NULL;
	char line[700];
	long st = 0;

	b->n = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	if (bearer != NULL) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s",
		    bearer);
		hdr = curl_slist_append(hdr, line);
	}
	if (ctype != NULL) {
		snprintf(line, sizeof(line), "Content-Type: %s", ctype);
		hdr = curl_slist_append(hdr, line);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
	}
	curl_easy_setopt(c, CURLOPT_HTTPAUTH, user ? CURLAUTH_BASIC :
	    CURLAUTH_NONE);
	curl_easy_setopt(c, CURLOPT_USERNAME, user);
	curl_easy_setopt(c, CURLOPT_PASSWORD, pass);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
	curl_slist_free_all(hdr);
	return st;
}

static const char *
js(json_t *j, const char *k)
{
	const char *s = json_string_value(json_object_get(j, k));

	return s != NULL ? s : "";
}

int
main(void)
{
	int n = tl_bench_envint("GRANTS", 100, 1, 10000), i, rc = 1, pn;
	char (*handles)[TL_DRV_HANDLE_MAX] = NULL, (*out)[TL_DRV_HANDLE_MAX] = NULL;
	char (*direct)[TL_DRV_HANDLE_MAX] = NULL;
	char why[TL_WHY_MAX], grant[64], login[64], url[4200], body[600];
	const char *sv[] = { "issuer", issuer, NULL, NULL };
	struct tl_drv_admin a = { .password = iat, .settings = sv };
	struct tl_drv_grant g;
	enum tl_drv_drift d;
	struct body b = { NULL, 0 };
	double t0, tdrv, tdir, tchk, tdchk, tonce, tidle;
	const char *src, *bin;
	void *h = NULL;
	CURL *c = NULL;
	FILE *f;

	if (sodium_init() < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		return 1;
	tl_bench_atexit(stop);
	pn = 20000 + (int)(getpid() % 20000);
	snprintf(port, sizeof(port), "%d", pn);
	snprintf(issuer, sizeof(issuer), "http://127.0.0.1:%d", pn);
	snprintf(dir, sizeof(dir), "%s/bench-oidc-%d", getenv("TALLY_TMP") ?
	    getenv("TALLY_TMP") : "/tmp", (int)getpid());
	if (harness("start", port) != 0) {
		fprintf(stderr, "bench_oidc: set-up failed: oidc.sh start\n");
		goto out;
	}
	started = 1;
	snprintf(url, sizeof(url), "%s/iat", dir);
	if ((f = fopen(url, "r")) == NULL || fgets(iat, sizeof(iat), f) ==
	    NULL) {
		fprintf(stderr, "bench_oidc: set-up failed: no %s\n", url);
		if (f != NULL)
			fclose(f);
		goto out;
	}
	fclose(f);
	iat[strcspn(iat, "\r\n")] = '\0';
	handles = calloc((size_t)n, sizeof(*handles));
	out = calloc((size_t)n, sizeof(*out));
	direct = calloc((size_t)n, sizeof(*direct));
	if (handles == NULL || out == NULL || direct == NULL ||
	    (c = curl_easy_init()) == NULL)
		goto out;

	/* The driver: open (discovery) and n creates. */
	t0 = tl_bench_now();
	if (tl_drv_oidc.open(&a, &h, why) != 0) {
		fprintf(stderr, "bench_oidc: open: %s\n", why);
		goto out;
	}
	for (i = 0; i < n; i++) {
		snprintf(grant, sizeof(grant), "bench/g%d", i);
		snprintf(login, sizeof(login), "bench_g%d", i);
		memset(&g, 0, sizeof(g));
		g.resource = g.login = login;
		g.owner = "";
		g.grant = grant;
		g.handle = NULL;
		g.handle_out = out[i];
		if (tl_drv_oidc.create(h, &g, why) != 0) {
			fprintf(stderr, "bench_oidc: create %d: %s\n", i, why);
			goto out;
		}
		memcpy(handles[i], out[i], sizeof(handles[i]));
	}
	tdrv = tl_bench_now() - t0;

	/* Directly: n bare registrations on one connection. */
	snprintf(url, sizeof(url), "%s/reg", issuer);
	t0 = tl_bench_now();
	for (i = 0; i < n; i++) {
		json_t *j;

		snprintf(body, sizeof(body), "{\"client_name\":\"direct_%d\","
		    "\"software_id\":\"direct/%d\",\"grant_types\":"
		    "[\"client_credentials\"],\"response_types\":[],"
		    "\"redirect_uris\":[],\"token_endpoint_auth_method\":"
		    "\"client_secret_basic\"}", i, i);
		if (req(c, "POST", url, iat, NULL, NULL, "application/json",
		    body, &b) != 201 || (j = json_loads(b.p, 0, NULL)) ==
		    NULL) {
			fprintf(stderr, "bench_oidc: direct POST %d failed\n",
			    i);
			goto out;
		}
		snprintf(direct[i], sizeof(direct[i]), "%s %s %s %s",
		    js(j, "client_id"), js(j, "client_secret"),
		    js(j, "registration_access_token"),
		    js(j, "registration_client_uri"));
		json_decref(j);
	}
	tdir = tl_bench_now() - t0;

	/* A verification pass: check per grant against the same requests. */
	t0 = tl_bench_now();
	for (i = 0; i < n; i++) {
		snprintf(grant, sizeof(grant), "bench/g%d", i);
		snprintf(login, sizeof(login), "bench_g%d", i);
		memset(&g, 0, sizeof(g));
		g.resource = g.login = login;
		g.owner = "";
		g.grant = grant;
		g.handle = handles[i];
		if (tl_drv_oidc.check(h, &g, NULL, &d, why) != 0 ||
		    d != TL_DRIFT_NONE) {
			fprintf(stderr, "bench_oidc: check %d: %s\n", i, why);
			goto out;
		}
	}
	tchk = tl_bench_now() - t0;
	t0 = tl_bench_now();
	for (i = 0; i < n; i++) {
		char id[256], sec[512], rat[512], uri[512], tok[600];
		json_t *j;

		if (sscanf(direct[i], "%255s %511s %511s %511s", id, sec, rat,
		    uri) != 4 ||
		    req(c, "GET", uri, rat, NULL, NULL, NULL, NULL, &b) !=
		    200)
			goto dfail;
		snprintf(url, sizeof(url), "%s/token", issuer);
		if (req(c, "POST", url, NULL, id, sec,
		    "application/x-www-form-urlencoded",
		    "grant_type=client_credentials", &b) != 200 ||
		    (j = json_loads(b.p, 0, NULL)) == NULL)
			goto dfail;
		snprintf(tok, sizeof(tok), "token=%s", js(j, "access_token"));
		json_decref(j);
		snprintf(url, sizeof(url), "%s/token/introspection", issuer);
		if (req(c, "POST", url, NULL, id, sec,
		    "application/x-www-form-urlencoded", tok, &b) != 200)
			goto dfail;
		snprintf(url, sizeof(url), "%s/token/revocation", issuer);
		if (req(c, "POST", url, NULL, id, sec,
		    "application/x-www-form-urlencoded", tok, &b) != 200)
			goto dfail;
		continue;
dfail:
		fprintf(stderr, "bench_oidc: direct check %d failed\n", i);
		goto out;
	}
	tdchk = tl_bench_now() - t0;

	printf("oidc: %d registrations: driver %.3f s (%.2f ms each, open "
	    "with discovery included), direct %.3f s (%.2f ms each): ratio "
	    "%.2fx (target <= 1.25x)\n", n, tdrv, tdrv * 1000 / n, tdir,
	    tdir * 1000 / n, tdir > 0 ? tdrv / tdir : 0);
	tl_bench_target("oidc: registrations, driver / direct", "<= 1.25x",
	    tdir > 0 && tdrv / tdir <= 1.25, "%.2fx",
	    tdir > 0 ? tdrv / tdir : 0);
	printf("oidc: verification of %d: driver check %.3f s (%.2f ms "
	    "each: GET, token, introspect, revoke), direct %.3f s: ratio "
	    "%.2fx\n", n, tchk, tchk * 1000 / n, tdchk,
	    tdchk > 0 ? tchk / tdchk : 0);
	tl_bench_dirs(&src, &bin);
	if (setup_tally(bin, n) != 0) {
		fprintf(stderr, "bench_oidc: set-up of the tally home failed "
		    "(see %s)\n", clilog);
		goto out;
	}
	if ((tonce = once(bin)) < 0 || tl_bench_delivered(home, NULL) < n ||
	    (tidle = once(bin)) < 0) {
		fprintf(stderr, "bench_oidc: tallyd --once failed or did not "
		    "deliver %d (see %s)\n", n, dlog);
		goto out;
	}
	printf("oidc: tallyd --once registering, recording, delivering and "
	    "verifying %d: %.3f s (%.2f ms each), less an idle --once "
	    "(%.3f s): %.2f ms each: %.2fx the direct registrations "
	    "(%.2fx with the idle cost)\n", n, tonce, tonce * 1000 / n, tidle,
	    (tonce - tidle) * 1000 / n, tdir > 0 ? (tonce - tidle) / tdir : 0,
	    tdir > 0 ? tonce / tdir : 0);
	rc = tdir > 0 && tdrv / tdir <= 1.25 ? 0 : 1;
	if (rc != 0)
		printf("oidc: ratio above the target\n");
out:
	if (h != NULL)
		tl_drv_oidc.close(h);
	if (c != NULL)
		curl_easy_cleanup(c);
	if (handles != NULL)
		sodium_memzero(handles, (size_t)n * sizeof(*handles));
	free(handles);
	free(out);
	free(direct);
	free(b.p);
	stop();
	curl_global_cleanup();
	return rc;
}
