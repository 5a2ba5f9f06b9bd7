/*
 * tl_test.c - helpers shared by the Check suites and the benchmarks.
 */
#define _XOPEN_SOURCE 700

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/body.h"
#include "core/error.h"
#include "tl_test.h"

static void
die(const char *what, int err)
{
	fprintf(stderr, "tl_test: %s: %s\n", what, err ? tl_strerror(err) :
	    "failed");
	abort();
}

static int
mkdirs(const char *path)
{
	char buf[4096], *p;

	if (strlen(path) >= sizeof(buf))
		return ENAMETOOLONG;
	strcpy(buf, path);
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return errno;
	return 0;
}

char *
tl_test_tmpdir(const char *tag)
{
	const char *base = getenv("TALLY_TMP");
	char *p;
	size_t n;

	if (base == NULL || *base == '\0')
		base = access("build", W_OK) == 0 ? "build/tmp" : "/tmp";
	if (mkdirs(base) != 0)
		die(base, errno);
	n = strlen(base) + strlen(tag) + 16;
	if ((p = malloc(n)) == NULL)
		die("malloc", ENOMEM);
	snprintf(p, n, "%s/%s.XXXXXX", base, tag);
	if (mkdtemp(p) == NULL)
		die(p, errno);
	return p;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(path) == 0 ? 0 : errno;
	return unlink(path) == 0 ? 0 : errno;
}

int
tl_test_rmtree(const char *path)
{
	if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
		return errno ? errno : EIO;
	return 0;
}

void
tl_test_tmpdir_done(char *dir)
{
	if (dir == NULL)
		return;
	tl_test_rmtree(dir);
	free(dir);
}

char *
tl_test_path(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p;

	if ((p = malloc(n)) == NULL)
		die("malloc", ENOMEM);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}

uint64_t
tl_test_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t
tl_test_seed(const char *what)
{
	const char *e = getenv("TL_TEST_SEED");
	struct timespec ts;
	uint64_t seed;

	if (e != NULL && *e != '\0')
		seed = strtoull(e, NULL, 0);
	else {
		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * 1000000007u ^
		    (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32;
	}
	fprintf(stderr, "%s: TL_TEST_SEED=%llu\n", what,
	    (unsigned long long)seed);
	return seed;
}

static uint8_t *
put_key_u64(uint8_t *p, const char *k, uint64_t v)
{
	size_t n = strlen(k);
	int i;

	*p++ = (uint8_t)(0xa0 | n);		/* fixstr */
	memcpy(p, k, n);
	p += n;
	*p++ = 0xcf;				/* uint64, fixed width */
	for (i = 7; i >= 0; i--)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

/* Fixed-width integers and a str8/16/32 pad make any length >= 42. */
#define BODY_FIXED	40

size_t
tl_test_body(uint8_t *out, size_t cap, size_t len, uint64_t tag,
    uint64_t i, uint64_t n)
{
	uint8_t *p = out;
	size_t rest, pad;

	if (len < BODY_FIXED + 2 || cap < len)
		return 0;
	*p++ = 0x84;				/* fixmap, 4 entries */
	p = put_key_u64(p, "tag", tag);
	p = put_key_u64(p, "i", i);
	p = put_key_u64(p, "n", n);
	*p++ = 0xa3;
	memcpy(p, "pad", 3);
	p += 3;
	rest = len - BODY_FIXED;
	if (rest - 2 <= 0xff) {
		pad = rest - 2;
		*p++ = 0xd9;
		*p++ = (uint8_t)pad;
	} else if (rest - 3 <= 0xffff) {
		pad = rest - 3;
		*p++ = 0xda;
		*p++ = (uint8_t)(pad >> 8);
		*p++ = (uint8_t)pad;
	} else {
		pad = rest - 5;
		*p++ = 0xdb;
		*p++ = (uint8_t)(pad >> 24);
		*p++ = (uint8_t)(pad >> 16);
		*p++ = (uint8_t)(pad >> 8);
		*p++ = (uint8_t)pad;
	}
	memset(p, 'x', pad);
	p += pad;
	return (size_t)(p - out);
}

int
tl_test_body_read(const void *body, size_t len, uint64_t *tag, uint64_t *i,
    uint64_t *n)
{
	struct tl_bview v;
	struct tl_bnode x;
	int rc;

	if ((rc = tl_bview_open(&v, body, len)) != 0)
		return rc;
	if ((rc = tl_bn_get(v.root, "tag", &x)) != 0 ||
	    (rc = tl_bn_u64(x, tag)) != 0 ||
	    (rc = tl_bn_get(v.root, "i", &x)) != 0 ||
	    (rc = tl_bn_u64(x, i)) != 0 ||
	    (rc = tl_bn_get(v.root, "n", &x)) != 0 ||
	    (rc = tl_bn_u64(x, n)) != 0) {
		tl_bview_close(&v);
		return rc;
	}
	tl_bview_close(&v);
	return 0;
}

struct load_txn {
	const struct tl_test_load *l;
	uint64_t	 at;		/* first index of this transaction */
	unsigned	 count;		/* events in this transaction */
	uint8_t		*body;
	size_t		 body_len;
};

static int
load_fn(struct tl_txn *t, void *arg)
{
	struct load_txn *lt = arg;
	const struct tl_test_load *l = lt->l;
	unsigned per_stream = l->per_stream ? l->per_stream : 10;
	struct tl_append a;
	char stream[TL_STREAM_MAX + 1];
	unsigned k;
	int rc;

	memset(&a, 0, sizeof(a));
	a.type = l->type ? l->type : "test.event";
	a.stream = stream;
	a.expect = TL_VER_ANY;
	a.actor = "test";
	a.body = lt->body;
	a.body_len = lt->body_len;
	for (k = 0; k < lt->count; k++) {
		uint64_t i = lt->at + k;

		/* Named when it changes, as a reactor would. */
		if (k == 0 || i % per_stream == 0)
			snprintf(stream, sizeof(stream), "%s/%llu/%llu",
			    l->stream_pfx ? l->stream_pfx : "s",
			    (unsigned long long)l->tag,
			    (unsigned long long)(i / per_stream));
		tl_test_body(lt->body, lt->body_len, lt->body_len, l->tag, i,
		    lt->count);
		if ((rc = tl_append(t, &a, NULL, NULL)) != 0)
			return rc;
	}
	return 0;
}

int
tl_test_load(struct tl_log *log, const struct tl_test_load *l)
{
	struct load_txn lt;
	unsigned per_txn = l->per_txn ? l->per_txn : 1;
	uint64_t done = 0;
	int rc = 0;

	lt.l = l;
	lt.body_len = l->body_len ? l->body_len : 64;
	if (lt.body_len < BODY_FIXED + 2)
		return TL_EINVAL;
	if ((lt.body = malloc(lt.body_len)) == NULL)
		return ENOMEM;
	while (done < l->n) {
		lt.at = l->first + done;
		lt.count = l->n - done < per_txn ? (unsigned)(l->n - done) :
		    per_txn;
		if ((rc = tl_log_write(log, load_fn, &lt)) != 0)
			break;
		done += lt.count;
	}
	free(lt.body);
	return rc;
}

int
tl_test_verify(struct tl_log *log, uint64_t *countp, uint64_t *badp,
    char *why)
{
	struct tl_txn *t;
	uint64_t bad;
	int rc;

	if ((rc = tl_log_begin(log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	rc = tl_log_verify(t, countp, badp ? badp : &bad, why);
	tl_log_abort(t);
	return rc;
}

struct tl_log *
tl_test_log_create(const char *dir, size_t mapsize)
{
	struct tl_log *log;
	int rc;

	if ((rc = tl_log_open_opts(dir, &(struct tl_log_opts){
	    .flags = TL_LOG_CREATE, .mapsize = mapsize }, &log)) != 0)
		die(dir, rc);
	return log;
}

int
tl_test_env_get(const char *dir, const char *key, char *out, size_t cap)
{
	char path[4200], line[4200], *p, *q;
	size_t klen = strlen(key);
	FILE *fp;
	int found = -1;

	snprintf(path, sizeof(path), "%s/env", dir);
	if ((fp = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), fp) != NULL) {
		p = line;
		if (strncmp(p, "export ", 7) == 0)
			p += 7;
		if (strncmp(p, key, klen) != 0 || p[klen] != '=')
			continue;
		p += klen + 1;
		p[strcspn(p, "\n")] = '\0';
		if (*p == '\'') {
			p++;
			if ((q = strrchr(p, '\'')) != NULL)
				*q = '\0';
		}
		snprintf(out, cap, "%s", p);
		found = 0;
	}
	fclose(fp);
	return found;
}

int
tl_test_port_free(int port)
{
	struct sockaddr_in a;
	int s, ok;

	if ((s = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return 0;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = bind(s, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(s);
	return ok;
}

int
tl_test_patch_file(const char *path, const uint8_t *pat, size_t plen,
    size_t at, uint8_t byte)
{
	FILE *fp = fopen(path, "r+b");
	uint8_t *buf = NULL;
	long size;
	size_t i;
	int n = 0;

	if (fp == NULL)
		return -1;
	if (fseek(fp, 0, SEEK_END) != 0 || (size = ftell(fp)) < 0 ||
	    (buf = malloc((size_t)size + 1)) == NULL) {
		fclose(fp);
		return -1;
	}
	rewind(fp);
	if (fread(buf, 1, (size_t)size, fp) != (size_t)size)
		n = -1;
	for (i = 0; n >= 0 && i + plen <= (size_t)size; i++) {
		if (memcmp(buf + i, pat, plen) != 0)
			continue;
		if (fseek(fp, (long)(i + at), SEEK_SET) != 0 ||
		    fputc(byte, fp) != byte)
			n = -1;
		else
			n++;
	}
	if (fclose(fp) != 0)
		n = -1;
	free(buf);
	return n;
}

void
tl_test_body_marker(uint8_t pat[11], uint64_t v)
{
	int i;

	pat[0] = 0xa1;
	pat[1] = 'i';
	pat[2] = 0xcf;
	for (i = 0; i < 8; i++)
		pat[3 + i] = (uint8_t)(v >> (56 - 8 * i));
}

const char *
tl_test_harness(const char *name)
{
	static char path[4096];
	const char *src = getenv("TALLY_SRC");

	snprintf(path, sizeof(path), "%s/tests/harness/%s",
	    src != NULL && *src != '\0' ? src : ".", name);
	return path;
}

int
tl_test_harness_run(const char *name, const char *cmd, const char *dir,
    const char *port)
{
	pid_t pid;
	int st;

	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		if (port != NULL)
			execlp("sh", "sh", tl_test_harness(name), cmd, dir,
			    port, (char *)NULL);
		else
			execlp("sh", "sh", tl_test_harness(name), cmd, dir,
			    (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int
tl_test_free_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd, port = -1;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

int
tl_test_read_line(const char *path, char *out, size_t n)
{
	FILE *f;

	if ((f = fopen(path, "r")) == NULL)
		return -1;
	if (fgets(out, (int)n, f) == NULL) {
		fclose(f);
		return -1;
	}
	fclose(f);
	out[strcspn(out, "\r\n")] = '\0';
	return 0;
}
