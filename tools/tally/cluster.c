/*
 * cluster.c - the CLI in a cluster's home (tally.h: cli_cluster_commit).
 *
 * tally links no HTTP or TLS library, so its commits go through
 * tallyd --commit, as its provider sessions go through tallyd's other
 * helpers: the hook sends the transaction's events (tools/tallyd/
 * cluster.c says the framing) and LMDB commits only once tallyd says
 * etcd did.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/envelope.h"
#include "tally.h"

struct reply {
	char	 line[600];
};

static void
reply_line(const char *s, void *arg)
{
	struct reply *r = arg;

	if (r->line[0] == '\0')
		snprintf(r->line, sizeof(r->line), "%s", s);
}

static void
be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

void
cli_cluster_start(struct tl_cli *cli)
{
	char path[PATH_MAX + 16];
	const char *argv[5];
	int in[2], out[2];
	pid_t pid;

	if (cli->cm_pid > 0)
		return;
	cli_tallyd_path(path, sizeof(path));
	argv[0] = path;
	argv[1] = "--home";
	argv[2] = cli->home;
	argv[3] = "--commit";
	argv[4] = NULL;
	if (pipe2(in, O_CLOEXEC) != 0)
		return;
	if (pipe2(out, O_CLOEXEC) != 0) {
		close(in[0]);
		close(in[1]);
		return;
	}
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0) {
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		return;
	}
	if (pid == 0) {
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
			_exit(127);
		execvp(path, (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	cli->cm_pid = (int)pid;
	cli->cm_in = in[1];
	cli->cm_out = out[0];
}

/* Gives the started helper its input; its exit code (its line in r). */
static int
finish(struct tl_cli *cli, const uint8_t *buf, size_t len, struct reply *r)
{
	void (*old)(int) = signal(SIGPIPE, SIG_IGN);
	char rb[4096];
	size_t off = 0, have = 0;
	ssize_t n;
	int st = 0;

	while (off < len) {
		n = write(cli->cm_in, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;		/* it died: its exit says why */
		off += (size_t)n;
	}
	close(cli->cm_in);
	signal(SIGPIPE, old);
	/* One line at most; the rest is read and dropped. */
	for (;;) {
		n = read(cli->cm_out, rb + have, sizeof(rb) - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		if (have == sizeof(rb) - 1)
			have = sizeof(rb) - 2;
	}
	rb[have] = '\0';
	rb[strcspn(rb, "\n")] = '\0';
	snprintf(r->line, sizeof(r->line), "%.590s", rb);
	close(cli->cm_out);
	while (waitpid(cli->cm_pid, &st, 0) < 0 && errno == EINTR)
		;
	cli->cm_pid = 0;
	if (!WIFEXITED(st))
		return TL_EXIT_FAIL;
	if (WEXITSTATUS(st) == 127) {
		cli_errx("cannot run tallyd (it is installed beside tally)");
		return TL_EXIT_FAIL;
	}
	return WEXITSTATUS(st);
}

void
cli_cluster_stop(struct tl_cli *cli)
{
	struct reply r;

	/* Not given anything: empty input, and it exits saying nothing. */
	if (cli->cm_pid > 0)
		(void)finish(cli, NULL, 0, &r);
}

int
cli_cluster_commit(struct tl_txn *t, uint64_t first, const uint8_t prev[TL_HASH_LEN],
    uint64_t last, void *arg)
{
	static const char *const args[] = { "--commit", NULL };
	struct tl_cli *cli = arg;
	struct tl_event ev;
	struct reply r;
	uint8_t *buf = NULL, *nb;
	size_t len = 48, cap = 0;
	uint64_t s;
	int rc, ex;

	for (s = first; s <= last; s++) {
		if ((rc = tl_log_get(t, s, &ev)) != 0)
			goto out;
		if (len + 4 + ev.raw_len > cap) {
			cap = (len + 4 + ev.raw_len) * 2;
			if ((nb = realloc(buf, cap)) == NULL) {
				rc = ENOMEM;
				goto out;
			}
			buf = nb;
		}
		be32(buf + len, (uint32_t)ev.raw_len);
		memcpy(buf + len + 4, ev.raw, ev.raw_len);
		len += 4 + ev.raw_len;
	}
	if (buf == NULL)
		return 0;
	memcpy(buf, "tlb1", 4);
	be32(buf + 4, (uint32_t)(first >> 32));
	be32(buf + 8, (uint32_t)first);
	memcpy(buf + 12, prev, TL_HASH_LEN);
	be32(buf + 44, (uint32_t)(last - first + 1));
	memset(&r, 0, sizeof(r));
	ex = cli->cm_pid > 0 ? finish(cli, buf, len, &r) :
	    cli_tallyd(cli, args, buf, len, reply_line, &r);
	if (ex == TL_EXIT_OK) {
		rc = 0;
		goto out;
	}
	if (r.line[0] != '\0')
		cli_errx("%s", r.line);
	rc = ex == TL_EXIT_LOCKED ? TL_ENOTLEADER : ex == TL_EXIT_REFUSED ?
	    TL_ETOOBIG : TL_EUNAVAIL;
out:
	free(buf);
	return rc;
}
