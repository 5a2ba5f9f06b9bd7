/*
 * record.c - tally-board --record: the leader's replication stream
 * itself (tally publish configure --stream), not the publisher's JSON.
 *
 * Every message is screened as a standby screens it (reactors/follow.c:
 * the leader's signature checked with the key the operator gave, never
 * one taken from the stream; the chain, the sequence, the epoch) and
 * appended byte for byte to a log of the board's own, STORE/record/log,
 * which the board then follows like a home's: its states come from the
 * code tally status runs, over the same events.  A message that fails is
 * passed over and counted (stderr); a record that cannot be trusted (a
 * rewritten past, a broken link) stops the copy, and with it the board.
 *
 * Following, the copy runs in a child process forked before the board
 * starts a thread or opens an environment (LMDB forbids one environment
 * opened twice in a process, and a child of a threaded process may only
 * exec); it dies with the board (PR_SET_PDEATHSIG).  Catching up once,
 * it runs in the board's process until nothing came for the idle time.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "reactors/follow.h"
#include "reactors/rx.h"
#include "board.h"

static void
record_log(int level, const char *fmt, va_list ap)
{
	if (level < TL_RX_INFO)
		return;
	fprintf(stderr, "tally-board: record: %s: ", level == TL_RX_ERR ?
	    "error" : level == TL_RX_WARN ? "warning" : "info");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

int
bd_record_prepare(struct bd_record *r, const char *store, char *why)
{
	struct tl_log *log;
	char dir[1300];
	int rc;

	if ((size_t)snprintf(r->home, sizeof(r->home), "%s/record", store) >=
	    sizeof(r->home)) {
		snprintf(why, TL_WHY_MAX, "%s: path too long", store);
		return ENAMETOOLONG;
	}
	snprintf(dir, sizeof(dir), "%s/log", r->home);
	if ((rc = bd_mkdirs(dir)) != 0) {
		snprintf(why, TL_WHY_MAX, "%.400s: %s", dir, strerror(rc));
		return rc;
	}
	/* Made here, so that the board finds it before the copy runs. */
	if ((rc = tl_log_open(dir, 0, &log)) == TL_ENOTFOUND)
		rc = tl_log_open(dir, TL_LOG_CREATE, &log);
	if (rc != 0) {
		snprintf(why, TL_WHY_MAX, "%.400s: %s", dir, tl_strerror(rc));
		return rc;
	}
	tl_log_close(log);
	r->pid = -1;
	return 0;
}

static int
record_run(struct bd_record *r, unsigned idle_ms, volatile sig_atomic_t *stop)
{
	struct tl_follow_opts o;

	memset(&o, 0, sizeof(o));
	o.home = r->home;
	o.url = r->url;
	o.stream = r->stream;
	o.user = r->user;
	o.password = r->password;
	o.ca = r->ca;
	o.leader_pk = r->pk;
	o.idle_ms = idle_ms;
	o.logf = record_log;
	return tl_follow_run(&o, stop);
}

int
bd_record_catch_up(struct bd_record *r, unsigned idle_s,
    volatile sig_atomic_t *stop)
{
	return record_run(r, idle_s > 0 ? idle_s * 1000 : 1, stop) == 0 ? 0 :
	    EIO;
}

static volatile sig_atomic_t child_stop;

static void
child_signal(int sig)
{
	(void)sig;
	child_stop = 1;
}

int
bd_record_start(struct bd_record *r)
{
	struct sigaction sa;
	pid_t parent = getpid(), pid;

	fflush(NULL);
	if ((pid = fork()) < 0)
		return errno;
	if (pid > 0) {
		r->pid = pid;
		return 0;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = child_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
		_exit(1);
	_exit(record_run(r, 0, &child_stop));
}

int
bd_record_alive(struct bd_record *r, char *why)
{
	int st;

	if (r->pid <= 0 || waitpid(r->pid, &st, WNOHANG) != r->pid)
		return 1;
	r->pid = -1;
	if (WIFEXITED(st))
		snprintf(why, TL_WHY_MAX, "the copy of the record stopped "
		    "(exit %d%s)", WEXITSTATUS(st), WEXITSTATUS(st) == 5 ?
		    ": the record cannot be trusted past its last event" : "");
	else
		snprintf(why, TL_WHY_MAX, "the copy of the record was killed "
		    "by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	return 0;
}

void
bd_record_stop(struct bd_record *r)
{
	if (r->pid <= 0)
		return;
	kill(r->pid, SIGTERM);
	waitpid(r->pid, NULL, 0);
	r->pid = -1;
}
