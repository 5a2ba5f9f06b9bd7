/*
 * fuzz_datafile.c - libFuzzer target for a damaged data file.
 *
 * A small valid log (200 events in a few streams, built once) is the
 * base.  Each input is a list of changes to its data.mdb: 4 bytes each,
 * a 24-bit offset (modulo the file's size; the first 64 KiB, where
 * LMDB's meta, branch and leaf pages of a small log are, twice as
 * likely) and the byte to put there; an input whose first byte is odd
 * also cuts the file short.  The changed file is opened and read the
 * way the commands read it: tl_log_open, tl_log_verify (whole, and in
 * steps from event 100 as tallyd does), the whole log
 * by sequence with and without the chain check, one stream, a few
 * events by number, and the head in a write transaction (where the
 * append's proof runs).  Every result is allowed but a crash, a hang
 * or a leak: a damaged file must come back as an error.
 *
 *   make fuzz FUZZ_TIME=600
 */
#define _GNU_SOURCE

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"

int	LLVMFuzzerInitialize(int *argc, char ***argv);
int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char	 dir[256];
static char	 path[300];
static uint8_t	*base;
static size_t	 base_len;
static uint8_t	*work;

static int
fill(struct tl_txn *t, void *arg)
{
	static const char *const streams[] = { "node/a", "grant/x/y",
	    "module/m", "provider/p" };
	uint8_t body[64];
	int *n = arg, i, rc;

	for (i = 0; i < 50; i++) {
		struct tl_append a = { 0 };
		size_t len = 0;

		/* {"i": i, "pad": "xxxx..."} */
		body[len++] = 0x82;
		body[len++] = 0xa1;
		body[len++] = 'i';
		body[len++] = 0xcc;
		body[len++] = (uint8_t)(*n + i);
		body[len++] = 0xa3;
		memcpy(body + len, "pad", 3);
		len += 3;
		body[len++] = 0xa0 | 20;
		memset(body + len, 'x', 20);
		len += 20;
		a.type = i % 3 ? "node.added" : "grant.requested";
		a.stream = streams[(*n + i) % 4];
		a.expect = TL_VER_ANY;
		a.actor = "fuzz";
		a.body = body;
		a.body_len = len;
		if ((rc = tl_append(t, &a, NULL, NULL)) != 0)
			return rc;
	}
	*n += 50;
	return 0;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct tl_log *log;
	struct stat st;
	int fd, i, n = 0;
	char tmpl[] = "/tmp/fuzz-datafile.XXXXXX";
	const char *shm = "/dev/shm/fuzz-datafile.XXXXXX";
	char shmt[64];

	(void)argc;
	(void)argv;
	snprintf(shmt, sizeof(shmt), "%s", shm);
	if (mkdtemp(shmt) != NULL)
		snprintf(dir, sizeof(dir), "%s", shmt);
	else if (mkdtemp(tmpl) != NULL)
		snprintf(dir, sizeof(dir), "%s", tmpl);
	else
		abort();
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	if (tl_log_open(dir, TL_LOG_CREATE, &log) != 0)
		abort();
	/* Four transactions: several leaves, a branch, freed pages. */
	for (i = 0; i < 4; i++)
		if (tl_log_write(log, fill, &n) != 0)
			abort();
	tl_log_close(log);
	if ((fd = open(path, O_RDONLY)) < 0 || fstat(fd, &st) != 0)
		abort();
	base_len = (size_t)st.st_size;
	if ((base = malloc(base_len)) == NULL ||
	    (work = malloc(base_len)) == NULL ||
	    pread(fd, base, base_len, 0) != (ssize_t)base_len)
		abort();
	close(fd);
	return 0;
}

static void
put_file(const uint8_t *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	if (fd < 0 || (len > 0 && write(fd, p, len) != (ssize_t)len))
		abort();
	close(fd);
}

static void
read_all(struct tl_log *log)
{
	struct tl_txn *t;
	struct tl_iter *it;
	struct tl_filter f;
	struct tl_event ev;
	uint64_t n, bad, seq;
	char why[TL_WHY_MAX];
	int pass;

	if (tl_log_begin(log, TL_TXN_RDONLY, &t) != 0)
		return;
	(void)tl_log_verify(t, &n, &bad, why);
	/* In steps, as tallyd verifies: from event 100 on. */
	{
		struct tl_chain c = TL_CHAIN_INIT;

		if (tl_log_get(t, 100, &ev) == 0) {
			c.seq = 100;
			memcpy(c.hash, ev.hash, TL_HASH_LEN);
			(void)tl_log_verify_more(t, &c, &bad, why);
		}
	}
	for (pass = 0; pass < 3; pass++) {
		memset(&f, 0, sizeof(f));
		f.chain = pass == 1;
		if (pass == 2)
			f.stream = "grant/x/y";
		if (tl_iter_open(t, &f, &it) != 0)
			continue;
		/* A damaged file must not make the walk endless. */
		for (n = 0; n < 100000 && tl_iter_next(it, &ev) == 0; n++)
			;
		tl_iter_close(it);
	}
	for (seq = 1; seq <= 200; seq += 37)
		(void)tl_log_get(t, seq, &ev);
	(void)tl_log_last(t, &seq, NULL);
	tl_log_abort(t);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tl_log *log;
	char why[TL_WHY_MAX];
	size_t i, len = base_len;
	uint64_t seq;

	memcpy(work, base, base_len);
	for (i = 0; i + 4 <= size; i += 4) {
		size_t off = (size_t)data[i] << 16 | (size_t)data[i + 1] << 8 |
		    data[i + 2];

		off = (off & 1) ? (off >> 1) % (len < 65536 ? len : 65536) :
		    (off >> 1) % len;
		work[off] = data[i + 3];
	}
	if (size >= 3 && (data[0] & 1))
		len = ((size_t)data[1] << 8 | data[2]) * 64 % base_len;
	put_file(work, len);

	if (tl_log_open_opts(dir, &(struct tl_log_opts){ .flags = TL_LOG_RDONLY,
	    .why = why }, &log) == 0) {
		read_all(log);
		tl_log_close(log);
	}
	/* A writer's open and the head its append would build on. */
	put_file(work, len);
	if (tl_log_open_opts(dir, &(struct tl_log_opts){ .why = why },
	    &log) == 0) {
		struct tl_txn *t;

		if (tl_log_begin(log, 0, &t) == 0) {
			(void)tl_log_last(t, &seq, NULL);
			tl_log_abort(t);
		}
		tl_log_close(log);
	}
	return 0;
}
