/*
 * bench_redis.c - grants of the redis driver through tally against the
 * same ACL commands issued directly, in the same run, on one throwaway
 * Redis (tests/harness/redis.sh).  Prints figures; never asserts.
 *
 * Contenders, BENCH_REDIS_GRANTS (100) grants each:
 *
 *   direct, one command     a small hiredis client: ACL SETUSER with the
 *                           driver's rules and a #hash password per grant
 *   direct, driver's        the commands drivers/redis.c sends for a new
 *                           grant, in its order (the marks read, the owner
 *                           mark set, ACL SETUSER, the passwords mark, ACL
 *                           SAVE), one round trip each, one connection
 *   tally, request->delivered  one tally assign of every module (one CLI
 *                           process, one transaction: how an operator
 *                           places a batch), tallyd running as a daemon
 *                           in its own home; the target's figure; then
 *                           the same with a tally assign per module (one
 *                           process each, in sequence: the CLI's fixed
 *                           cost per grant).  Each ends when the last
 *                           grant is delivered:
 *                           its credential.delivered event (the credential
 *                           sealed to the node) committed in the log,
 *                           polled every 1 ms (the control plane writes
 *                           no env file; a node's agent does)
 *   tallyd --once           the modules assigned first (untimed), then one
 *                           tallyd --once provisioning and delivering them
 *                           (every credential.delivered counted after it
 *                           exits, outside the time)
 *
 * Then a bulk verification pass over the tally grants, run in this
 * process (tl_rx_verify, as tally check does; its CPU is what tallyd's
 * would be: getrusage over all threads), forced, without the sample
 * logins, and once with a login per grant: the provider calls (a bulk
 * call is one), the commands the server processed (INFO stats), wall
 * time and CPU per grant.
 *
 * Env: TALLY_BIN, TALLY_SRC, TALLY_TMP (as make bench sets them);
 * BENCH_REDIS_GRANTS (100).
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <sodium.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "reactors/epoch.h"
#include "reactors/rx.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME	"bench_redis"

static const char *bin, *src;
static char *scratch, rdir[4200], rport[16], rpw[256];
static char home[4300], home2[4300], home3[4300];
static char clilog[4300], dlog[4300];
static int started;

static void
cleanup(void)
{
	if (started) {
		tl_bench_harness(src, "redis.sh", "stop", rdir, NULL);
		started = 0;
	}
}

static redisContext *
admin(void)
{
	redisContext *c = redisConnect("127.0.0.1", atoi(rport));
	redisReply *r;

	if (c == NULL || c->err)
		return NULL;
	r = redisCommand(c, "AUTH admin %s", rpw);
	if (r == NULL || r->type == REDIS_REPLY_ERROR) {
		freeReplyObject(r);
		redisFree(c);
		return NULL;
	}
	freeReplyObject(r);
	return c;
}

static long long
commands_processed(redisContext *c)
{
	redisReply *r = redisCommand(c, "INFO stats");
	const char *p;
	long long n = -1;

	if (r != NULL && r->type == REDIS_REPLY_STRING &&
	    (p = strstr(r->str, "total_commands_processed:")) != NULL)
		n = atoll(p + strlen("total_commands_processed:"));
	freeReplyObject(r);
	return n;
}

/* The rules of drivers/redis.c, as it sends them. */
static const char *const rules[] = {
	"-@all", "+@read", "+@write", "+@pubsub", "+@transaction",
	"+@connection", "-@dangerous", "-@admin", "-@scripting",
	"-function", "-scan", "-randomkey", "-dbsize", "-pubsub", "-select",
	"-client|tracking", "-keys", "-move", "-swapdb", "-flushall",
	"-flushdb", NULL
};

static int
one(redisContext *c, int argc, const char **argv)
{
	redisReply *r = redisCommandArgv(c, argc, argv, NULL);
	int ok = r != NULL && r->type != REDIS_REPLY_ERROR;

	if (!ok)
		fprintf(stderr, ME ": %s: %s\n", argv[0], r != NULL ? r->str :
		    c->errstr);
	freeReplyObject(r);
	return ok ? 0 : -1;
}

/* n grants directly; full: the driver's whole sequence.  Seconds. */
static double
direct(int n, int full)
{
	redisContext *c = admin();
	char user[64], keys[80], chans[80], hash[66], ok[96], pk[96];
	char pw[TL_PASSWORD_MAX + 1], grant[64];
	unsigned char h[32];
	const char *argv[40];
	double t0, t;
	int i, a, j;

	if (c == NULL)
		return -1;
	t0 = tl_bench_now();
	for (i = 0; i < n; i++) {
		snprintf(user, sizeof(user), "direct%d_%d", full, i);
		snprintf(grant, sizeof(grant), "d%d/cache", i);
		snprintf(keys, sizeof(keys), "~%s:*", user);
		snprintf(chans, sizeof(chans), "&%s:*", user);
		snprintf(ok, sizeof(ok), "tally:owner:%s", user);
		snprintf(pk, sizeof(pk), "tally:pw:%s", user);
		tl_secret_password(pw);
		crypto_hash_sha256(h, (unsigned char *)pw, strlen(pw));
		hash[0] = '#';
		sodium_bin2hex(hash + 1, 65, h, 32);
		if (full) {
			const char *get[2] = { "GET", ok };
			const char *gu[3] = { "ACL", "GETUSER", user };
			const char *set[3] = { "SET", ok, grant };

			if (one(c, 2, get) || one(c, 3, gu) || one(c, 3, set))
				goto fail;
		}
		a = 0;
		argv[a++] = "ACL";
		argv[a++] = "SETUSER";
		argv[a++] = user;
		argv[a++] = "reset";
		argv[a++] = "on";
		argv[a++] = hash;
		argv[a++] = keys;
		argv[a++] = chans;
		for (j = 0; rules[j] != NULL; j++)
			argv[a++] = rules[j];
		if (one(c, a, argv) != 0)
			goto fail;
		if (full) {
			const char *del[2] = { "DEL", pk };
			const char *sadd[3] = { "SADD", pk, hash + 1 };
			const char *save[2] = { "ACL", "SAVE" };

			if (one(c, 2, del) || one(c, 3, sadd) ||
			    one(c, 2, save))
				goto fail;
		}
	}
	t = tl_bench_now() - t0;
	redisFree(c);
	return t;
fail:
	redisFree(c);
	return -1;
}

/* A home with the cache provider and n consumer modules p<i>. */
static int
setup(const char *h, const char *pfx, int n)
{
	char mf[4400], cmf[4400], set1[64], pwf[4300], key[4400];
	FILE *fp;
	int i;

	/* The node's key, outside the home (tally node add refuses it). */
	snprintf(key, sizeof(key), "%s/node-a.%s.key", scratch, pfx);
	snprintf(mf, sizeof(mf), "%s/%s-consumers.yaml", scratch, pfx);
	snprintf(cmf, sizeof(cmf), "%s/cache.yaml", scratch);
	snprintf(pwf, sizeof(pwf), "%s/admin.pw", rdir);
	if ((fp = fopen(cmf, "w")) == NULL)
		return -1;
	fprintf(fp, "module: cache\nprovides:\n  redis-user:\n"
	    "    driver: redis\n    revoke: retain\n");
	if (fclose(fp) != 0 || (fp = fopen(mf, "w")) == NULL)
		return -1;
	for (i = 1; i <= n; i++)
		fprintf(fp, "---\nmodule: %s%04d\n"
		    "env: {R_URI: \"\", R_PREFIX: \"\"}\n"
		    "requires:\n  cache:\n    type: redis-user\n"
		    "    from: cache\n    env: {uri: R_URI, prefix: R_PREFIX}\n",
		    pfx, i);
	if (fclose(fp) != 0)
		return -1;
	snprintf(set1, sizeof(set1), "port=%s", rport);
	if (tl_bench_tally(bin, h, NULL, clilog, "init", NULL) != 0 ||
	    tl_bench_tally(bin, h, NULL, clilog, "node", "add", "node-a",
	    "--routable-name=127.0.0.1", "--key-out", key, NULL) != 0 ||
	    tl_bench_tally(bin, h, NULL, clilog, "apply", cmf, mf,
	    NULL) != 0 ||
	    tl_bench_tally(bin, h, pwf, clilog, "assign", "cache", "node-a",
	    "--set", set1, "--set", "admin-user=admin", "--secret",
	    "admin-password", NULL) != 0)
		return -1;
	return 0;
}

static double
once(int n)
{
	char m[16], *argv[] = { NULL, "--once", "--once-timeout", "600",
	    NULL };
	char path[4400];
	double t0, t;
	int i;

	for (i = 1; i <= n; i++) {
		snprintf(m, sizeof(m), "q%04d", i);
		if (tl_bench_tally(bin, home2, NULL, clilog, "assign", m,
		    "node-a", NULL) != 0)
			return -1;
	}
	snprintf(path, sizeof(path), "%s/tallyd", bin);
	argv[0] = path;
	t0 = tl_bench_now();
	if (tl_bench_run(home2, NULL, dlog, NULL, argv) != 0)
		return -1;
	t = tl_bench_now() - t0;
	if (tl_bench_delivered(home2, NULL) < n)
		return -1;
	return t;
}

/* tallyd --once again, with nothing left to do: its fixed cost, s. */
static double
once_idle(void)
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
self_cpu(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void
verify_section(void)
{
	/* The logins first: a credential never logged in with is due. */
	static const char *const what[3] = { "a login per grant",
	    "bulk, no sample logins", "bulk, sample 1 in 30" };
	struct tl_rx rx;
	struct tl_rx_verify_opts o;
	redisContext *c = admin();
	char logdir[4400], path[4400], why[TL_WHY_MAX] = "";
	unsigned checked, bad, calls;
	uint64_t next;
	long long c0, c1;
	double t, cpu;
	int i, rc;

	if (c == NULL)
		return;
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
		redisFree(c);
		return;
	}
	printf("\nverification: a forced pass over the tally grants, in this "
	    "process (tallyd's code)\n");
	printf("  %-26s %8s %5s %6s %9s %8s %9s %12s\n", "", "checked", "bad",
	    "calls", "commands", "wall", "CPU", "CPU / grant");
	for (i = 0; i < 3; i++) {
		memset(&o, 0, sizeof(o));
		o.force = 1;
		o.interval_ns = 30000000000u;
		o.login_all = i == 0;
		o.login_every = i == 1 ? UINT_MAX : 0;
		o.calls = &calls;
		calls = 0;
		c0 = commands_processed(c);
		t = tl_bench_now();
		cpu = self_cpu();
		rc = tl_rx_verify(&rx, &o, &checked, &bad, &next);
		cpu = self_cpu() - cpu;
		t = tl_bench_now() - t;
		/* -1: INFO itself is one command. */
		c1 = commands_processed(c) - 1;
		if (rc != 0)
			fprintf(stderr, ME ": pass: %s\n", tl_strerror(rc));
		printf("  %-26s %8u %5u %6u %9lld %6.1f ms %6.1f ms %9.3f ms\n",
		    what[i], checked, bad, calls, c1 - c0, t * 1000,
		    cpu * 1000, checked ? cpu * 1000 / checked : 0);
	}
	printf("  (calls: driver calls, a bulk call is one; commands: what "
	    "the server processed,\n   a session's opening is 3 (AUTH, the "
	    "rules user's SETUSER and GETUSER), a bulk call\n   4 per grant "
	    "in ONE pipelined round trip, a login check 3 + 1 login)\n");
	fflush(stdout);
	tl_rx_free(&rx);
	tl_log_close(rx.log);
	redisFree(c);
}

int
main(void)
{
	char port[16];
	double d1, d2, tt, tb, cli = 0, clib = 0, to, idle;
	int n, p;

	if (sodium_init() < 0)
		return 1;
	tl_bench_dirs(&src, &bin);
	n = tl_bench_envint("BENCH_REDIS_GRANTS", 100, 1, 5000);
	scratch = tl_test_tmpdir("bench_redis");
	snprintf(rdir, sizeof(rdir), "%s/redis", scratch);
	snprintf(home, sizeof(home), "%s/home", scratch);
	snprintf(home2, sizeof(home2), "%s/home2", scratch);
	snprintf(home3, sizeof(home3), "%s/home3", scratch);
	snprintf(clilog, sizeof(clilog), "%s/cli.log", scratch);
	snprintf(dlog, sizeof(dlog), "%s/tallyd.log", scratch);
	tl_bench_atexit(cleanup);
	p = 57700 + (int)(getpid() % 200);
	snprintf(port, sizeof(port), "%d", p);
	if (tl_bench_harness(src, "redis.sh", "start", rdir, port) != 0) {
		fprintf(stderr, ME ": redis.sh start failed\n");
		return 1;
	}
	started = 1;
	snprintf(rport, sizeof(rport), "%s", port);
	{
		char pwf[4300];
		FILE *fp;

		snprintf(pwf, sizeof(pwf), "%s/admin.pw", rdir);
		if ((fp = fopen(pwf, "r")) == NULL ||
		    fgets(rpw, sizeof(rpw), fp) == NULL) {
			fprintf(stderr, ME ": cannot read %s\n", pwf);
			return 1;
		}
		fclose(fp);
		rpw[strcspn(rpw, "\n")] = '\0';
	}
	printf(ME ": %d grants on one Redis 7 (port %s); tally from %s\n", n,
	    rport, bin);
	fflush(stdout);
	if (setup(home, "p", n) != 0 || setup(home2, "q", n) != 0 ||
	    setup(home3, "b", n) != 0) {
		fprintf(stderr, ME ": set-up failed (see %s)\n", clilog);
		return 1;
	}
	d1 = direct(n, 0);
	d2 = direct(n, 1);
	tb = tl_bench_through_tally(bin, home3, clilog, dlog, "b", n, 1,
	    &clib);
	tt = tl_bench_through_tally(bin, home, clilog, dlog, "p", n, 0, &cli);
	to = once(n);
	idle = once_idle();
	if (d1 <= 0 || d2 <= 0 || tt <= 0 || tb <= 0 || to <= 0) {
		fprintf(stderr, ME ": a contender failed (direct %.3f %.3f, "
		    "tally %.3f %.3f, once %.3f; see %s, %s)\n", d1, d2, tb, tt,
		    to, clilog, dlog);
		return 1;
	}
	printf("\nprovisioning %d grants                     total   per grant"
	    "   vs direct (driver's)\n", n);
	printf("  direct, one ACL SETUSER each        %8.1f ms %8.3f ms\n",
	    d1 * 1000, d1 * 1000 / n);
	printf("  direct, the driver's 7 commands     %8.1f ms %8.3f ms\n",
	    d2 * 1000, d2 * 1000 / n);
	printf("  tally, request -> delivered         %8.1f ms %8.3f ms  "
	    "x%.2f  (one tally assign of all %d: %.0f ms)\n", tb * 1000,
	    tb * 1000 / n, tb / d2, n, clib * 1000);
	tl_bench_target("redis: tally assign -> delivered / the driver's "
	    "commands", "<= x1.5", tb / d2 <= 1.5, "x%.2f", tb / d2);
	printf("  the same, a tally assign per grant  %8.1f ms %8.3f ms  "
	    "x%.1f  (of which %.0f ms in %d tally assign processes)\n",
	    tt * 1000, tt * 1000 / n, tt / d2, cli * 1000, n);
	printf("  tallyd --once, provision + deliver  %8.1f ms %8.3f ms  "
	    "x%.1f\n", to * 1000, to * 1000 / n, to / d2);
	if (idle > 0 && idle < to)
		printf("  the same, less an idle tallyd --once  %6.1f ms "
		    "%8.3f ms  x%.1f  (idle run: %.0f ms)\n",
		    (to - idle) * 1000, (to - idle) * 1000 / n,
		    (to - idle) / d2, idle * 1000);
	fflush(stdout);
	verify_section();
	cleanup();
	tl_test_tmpdir_done(scratch);
	return 0;
}
