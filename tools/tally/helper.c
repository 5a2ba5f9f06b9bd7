/*
 * helper.c - running tallyd as the CLI's helper (tally.h: cli_tallyd).
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/secret.h"
#include "tally.h"

#define LINE_MAX_	65536
#define PIPE_BUF_	65536	/* Linux's pipe buffer */
#define ARGS_MAX	16

void
cli_tallyd_path(char *out, size_t cap)
{
	char self[PATH_MAX];
	ssize_t n;

	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0) {
		self[n] = '\0';
		snprintf(out, cap, "%s/tallyd", dirname(self));
		if (access(out, X_OK) == 0)
			return;
	}
	snprintf(out, cap, "tallyd");
}

int
cli_tallyd(struct tl_cli *cli, const char *const *args, const void *in,
    size_t inlen, void (*line)(const char *s, void *arg), void *arg)
{
	char path[PATH_MAX + 16], *buf;
	const char *argv[ARGS_MAX + 4];
	size_t n = 0, len = 0, i;
	int fd[2], ifd[2] = { -1, -1 }, st = 0;
	ssize_t r;
	pid_t pid;

	cli_tallyd_path(path, sizeof(path));
	argv[n++] = path;
	argv[n++] = "--home";
	argv[n++] = cli->home;
	for (i = 0; args[i] != NULL && i < ARGS_MAX; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if ((buf = malloc(LINE_MAX_ + 1)) == NULL)
		return cli_fail(cli, ENOMEM, "tallyd");
	fflush(stdout);
	fflush(stderr);
	if (inlen > CLI_TALLYD_IN_MAX) {
		cli_errx("tallyd: %zu bytes of input, more than %zu", inlen,
		    CLI_TALLYD_IN_MAX);
		free(buf);
		return TL_EXIT_FAIL;
	}
	if (pipe2(fd, O_CLOEXEC) != 0 || (in != NULL &&
	    pipe2(ifd, O_CLOEXEC) != 0)) {
		cli_errx("pipe: %s", strerror(errno));
		free(buf);
		return TL_EXIT_FAIL;
	}
	/*
	 * Input that fits the pipe's buffer (Linux: 64 KiB) is all written
	 * before tallyd runs and nothing waits on anything; more is
	 * written once it runs, to a helper that reads all of its input
	 * before it writes (tallyd --commit).
	 */
	if (in != NULL && inlen <= PIPE_BUF_) {
		const char *p = in;
		size_t off = 0;

		while (off < inlen) {
			r = write(ifd[1], p + off, inlen - off);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				cli_errx("tallyd: cannot write its input: %s",
				    strerror(errno));
				close(fd[0]);
				close(fd[1]);
				close(ifd[0]);
				close(ifd[1]);
				free(buf);
				return TL_EXIT_FAIL;
			}
			off += (size_t)r;
		}
		close(ifd[1]);
		ifd[1] = -1;
	}
	if ((pid = fork()) < 0) {
		cli_errx("fork: %s", strerror(errno));
		close(fd[0]);
		close(fd[1]);
		if (ifd[0] >= 0)
			close(ifd[0]);
		if (ifd[1] >= 0)
			close(ifd[1]);
		free(buf);
		return TL_EXIT_FAIL;
	}
	if (pid == 0) {
		int nul = ifd[0] >= 0 ? ifd[0] : open("/dev/null", O_RDONLY |
		    O_CLOEXEC);

		if (nul < 0 || dup2(nul, 0) < 0 || dup2(fd[1], 1) < 0)
			_exit(127);
		execvp(path, (char *const *)argv);
		fprintf(stderr, "tally: %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	if (ifd[0] >= 0)
		close(ifd[0]);
	if (ifd[1] >= 0) {
		void (*old)(int) = signal(SIGPIPE, SIG_IGN);
		const char *p = in;
		size_t off = 0;

		/* A helper that died early: EPIPE, and its exit says why. */
		while (off < inlen) {
			r = write(ifd[1], p + off, inlen - off);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			off += (size_t)r;
		}
		close(ifd[1]);
		signal(SIGPIPE, old);
	}
	for (;;) {
		char *nl;

		r = read(fd[0], buf + len, LINE_MAX_ - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
		buf[len] = '\0';
		while ((nl = memchr(buf, '\n', len)) != NULL) {
			*nl = '\0';
			if (line != NULL)
				line(buf, arg);
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len);
		}
		if (len == LINE_MAX_)
			len = 0;	/* an overlong line: dropped */
	}
	if (len > 0 && line != NULL) {
		buf[len] = '\0';
		line(buf, arg);
	}
	close(fd[0]);
	tl_secret_wipe(buf, LINE_MAX_ + 1);
	free(buf);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st)) {
		cli_errx("%s died of signal %d", path, WIFSIGNALED(st) ?
		    WTERMSIG(st) : 0);
		return TL_EXIT_FAIL;
	}
	if (WEXITSTATUS(st) == 127) {
		cli_errx("cannot run %s (tallyd is installed beside tally)",
		    path);
		return TL_EXIT_FAIL;
	}
	return WEXITSTATUS(st);
}
