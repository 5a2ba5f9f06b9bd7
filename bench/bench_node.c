/*
 * bench_node - rotation acknowledged by the holders' own agents
 * (tally-node --log, reloading `true`), against a real PostgreSQL:
 *
 *   1. one grant held by 10 assignments on 10 nodes, 10 agents: the
 *      time from `tally rotate` to the old credential retired, with no
 *      tally ack typed (delivery, 10 reloads, 10 signed acks with proof
 *      verified by tallyd, retirement);
 *   2. BENCH_GRANTS (300) shared grants with 3 holders each (node-0..2)
 *      rotated at once with `tally rotate --provider`: total time to
 *      every rotation completed.
 *
 * Whole processes are timed (tallyd and the agents as daemons), the
 * provider's statements included.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define ME "bench_node"

static char home[4096], pgdir[4096], src[4096], bin[4096];

/* Runs a shell command with TALLY_HOME set; exits on failure. */
static void
sh(const char *fmt, ...)
{
	char cmd[8192], full[32768];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "TALLY_HOME='%s' T='%s/tally' "
	    "D='%s/tallyd' A='%s/tally-node'; export TALLY_HOME; %s", home, bin, bin,
	    bin, cmd);
	if ((rc = system(full)) != 0) {
		fprintf(stderr, "bench_node: failed (%d): %s\n", rc, cmd);
		exit(1);
	}
}

static void
cleanup(void)
{
	char cmd[8400];

	snprintf(cmd, sizeof(cmd), "sh '%s/tests/harness/pg.sh' stop '%s' "
	    ">/dev/null 2>&1", src, pgdir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_node: could not stop %s\n", pgdir);
}

int
main(void)
{
	const char *e;
	char *dir, pwfile[4096], manifest[4200];
	int port, n = (e = getenv("BENCH_GRANTS")) ? atoi(e) : 300, i;
	double t0, t1;
	FILE *fp;

	if (n < 1)
		n = 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(src, sizeof(src), "%s", (e = getenv("TALLY_SRC")) ? e : ".");
	snprintf(bin, sizeof(bin), "%s", (e = getenv("TALLY_BIN")) ? e :
	    "build/bin");
	if ((dir = tl_test_tmpdir("bench-node")) == NULL)
		return 1;
	snprintf(home, sizeof(home), "%s/home", dir);
	snprintf(pgdir, sizeof(pgdir), "%s/pg", dir);
	for (port = 56800; !tl_test_port_free(port); port++)
		;
	atexit(cleanup);
	printf("bench_node: a throwaway PostgreSQL on 127.0.0.1:%d\n", port);
	fflush(stdout);
	sh("sh '%s/tests/harness/pg.sh' start '%s' %d >/dev/null", src, pgdir,
	    port);
	if (tl_test_env_get(pgdir, "TALLY_TEST_PG_PWFILE", pwfile,
	    sizeof(pwfile)) != 0)
		return 1;
	snprintf(manifest, sizeof(manifest), "%s/app.yaml", dir);
	if ((fp = fopen(manifest, "w")) == NULL)
		return 1;
	fprintf(fp, "module: app\nenv: {DB_HOST: \"\", DB_PORT: \"\", "
	    "DB_NAME: \"\", DB_USER: \"\", DB_PASSWORD: \"\"}\n"
	    "requires:\n  db:\n    type: postgres-database\n"
	    "    from: postgres\n    env: {host: DB_HOST, port: DB_PORT, "
	    "database: DB_NAME, user: DB_USER, password: DB_PASSWORD}\n");
	for (i = 0; i < n; i++)
		fprintf(fp, "---\nmodule: c%d\nenv: {DB_PASSWORD: \"\"}\n"
		    "requires:\n  db:\n    type: postgres-database\n"
		    "    from: postgres\n    env: {password: DB_PASSWORD}\n",
		    i);
	fclose(fp);
	sh("$T init >/dev/null && for i in 0 1 2 3 4 5 6 7 8 9; do "
	    "$T node add node-$i --routable-name 127.0.0.1 --key-out "
	    "\"$TALLY_HOME.node-$i.key\" >/dev/null; done && "
	    "$T apply '%s/examples/postgres.yaml' '%s' >/dev/null && "
	    "$T assign postgres node-0 --expose network --set port=%d "
	    "--secret admin-password <'%s' >/dev/null", src, manifest, port,
	    pwfile);
	sh("for i in 0 1 2 3 4 5 6 7 8 9; do $T assign app node-$i "
	    ">/dev/null; done; i=0; while [ $i -lt %d ]; do "
	    "for k in 0 1 2; do $T assign c$i node-$k >/dev/null; done; "
	    "i=$((i + 1)); done", n);
	printf("  provisioning 1 grant (10 holders) and %d grants (3 holders "
	    "each)...\n", n);
	fflush(stdout);
	t0 = tl_bench_now();
	sh("$D --once --once-timeout 900 2>/dev/null");
	printf("  provisioned in %.1f s\n", tl_bench_now() - t0);
	sh("$D --interval 60 --verify-interval 3600 2>'%s/tallyd.log' & "
	    "echo $! >'%s/tallyd.pid'", dir, dir);
	/* node-0..2 also reload the c* modules: `true` for each. */
	sh("R=''; i=0; while [ $i -lt %d ]; do R=\"$R --reload c$i=true\"; "
	    "i=$((i + 1)); done; "
	    "for i in 0 1 2 3 4 5 6 7 8 9; do $A --node node-$i --key "
	    "\"$TALLY_HOME.node-$i.key\" --dir '%s'/node-$i --log "
	    "\"$TALLY_HOME\" --reload app=true $R 2>>'%s/agents.log' & "
	    "echo $! >>'%s/agents.pid'; done", n, dir, dir, dir);
	t0 = tl_bench_now();
	tl_bench_wait_type(ME, home, "credential.acknowledged", 10 + 3 * n,
	    900);
	printf("  every v1 delivered, reloaded and acknowledged by the agents "
	    "in %.1f s (%d acks)\n", tl_bench_now() - t0, 10 + 3 * n);
	fflush(stdout);

	t0 = tl_bench_now();
	sh("$T rotate app/db >/dev/null");
	tl_bench_wait_type(ME, home, "credential.retired", 1, 600);
	t1 = tl_bench_now();
	printf("  one grant, 10 holders, 10 agents reloading `true`: rotate -> "
	    "old credential retired in %.0f ms, no tally ack typed  [target < "
	    "1 s plus the provider's statements]\n", (t1 - t0) * 1000);
	tl_bench_target("node: rotate -> retired, 10 agents", "< 1000 ms",
	    (t1 - t0) * 1000 < 1000, "%.0f ms", (t1 - t0) * 1000);
	fflush(stdout);

	t0 = tl_bench_now();
	sh("$T rotate --provider node-0/postgres >/dev/null 2>&1");
	tl_bench_wait_type(ME, home, "rotation.completed", n + 2, 900);
	printf("  %d grants x 3 holders (+ the shared one) rotated at once: "
	    "every rotation completed in %.1f s, acknowledged by the agents\n",
	    n, tl_bench_now() - t0);
	sh("kill $(cat '%s/agents.pid') $(cat '%s/tallyd.pid') && sleep 0.3",
	    dir, dir);
	sh("$T verify >/dev/null && $T rebuild --check >/dev/null");
	printf("  tally verify and rebuild --check: ok\n");
	cleanup();
	tl_test_tmpdir_done(dir);
	return 0;
}
