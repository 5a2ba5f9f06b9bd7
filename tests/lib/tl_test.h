/*
 * tl_test.h - helpers shared by the Check suites and the benchmarks.
 *
 * Nothing here depends on Check, so benchmarks can link it too: set-up
 * failures print a message and abort(), which a forked Check test
 * reports as an error.  Everything is for tests only: simple, loud.
 */
#ifndef TL_TEST_H
#define TL_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/log.h"

/*
 * A fresh directory under $TALLY_TMP (or build/tmp, then /tmp), named
 * after tag.  Returns a malloc'd path; aborts on failure.
 */
char	*tl_test_tmpdir(const char *tag);
/* Removes path and everything below it; 0 or an errno. */
int	 tl_test_rmtree(const char *path);
/* tl_test_rmtree(dir), then free(dir).  Accepts NULL. */
void	 tl_test_tmpdir_done(char *dir);

/* A path under dir, malloc'd; aborts on failure. */
char	*tl_test_path(const char *dir, const char *name);

/* A small fast PRNG (splitmix64); state may start at any value. */
uint64_t tl_test_rand(uint64_t *state);
/* A seed: $TL_TEST_SEED if set, else from the clock; printed to stderr. */
uint64_t tl_test_seed(const char *what);

/*
 * Writes into out[0..cap) one msgpack map of exactly len bytes (len >=
 * 42): {"tag":tag,"i":i,"n":n,"pad":"x..."}, the integers as uint64 so
 * that "i" is easy to find in a data file.  Returns the length, or 0
 * if len is too small or cap too short.  Bodies of a given length from
 * this are what the tests and the benchmark append.
 */
size_t	 tl_test_body(uint8_t *out, size_t cap, size_t len, uint64_t tag,
	    uint64_t i, uint64_t n);
/* Reads back tag, i and n from such a body; 0 on success. */
int	 tl_test_body_read(const void *body, size_t len, uint64_t *tag,
	    uint64_t *i, uint64_t *n);

/*
 * A workload: n events in transactions of per_txn through tl_log_write,
 * each run of per_stream consecutive events in one stream (as a reactor
 * writes them), bodies of body_len bytes made by tl_test_body with tag,
 * i = the event's index in this workload (from 'first'), n = per_txn.
 */
struct tl_test_load {
	uint64_t	 n;
	unsigned	 per_txn;	/* 0: 1 */
	unsigned	 per_stream;	/* 0: 10 */
	size_t		 body_len;	/* 0: 64 */
	uint64_t	 tag;
	uint64_t	 first;		/* index of the first event */
	const char	*type;		/* NULL: "test.event" */
	const char	*stream_pfx;	/* NULL: "s" */
};
int	 tl_test_load(struct tl_log *log, const struct tl_test_load *l);

/*
 * Sets the byte at offset at of every occurrence of pat in the file to
 * byte; returns how many, or -1.  With tl_test_body_marker: the bytes
 * tl_test_body writes for field i = v, to find one event in data.mdb.
 */
int	 tl_test_patch_file(const char *path, const uint8_t *pat, size_t plen,
	    size_t at, uint8_t byte);
void	 tl_test_body_marker(uint8_t pat[11], uint64_t v);

/* Opens a read transaction and runs tl_log_verify in it. */
int	 tl_test_verify(struct tl_log *log, uint64_t *countp, uint64_t *badp,
	    char *why);

/* Creates a new log in dir (mapsize 0: default); aborts on failure. */
struct tl_log *tl_test_log_create(const char *dir, size_t mapsize);

/*
 * The test harness (tests/harness/pg.sh, rabbit.sh) writes DIR/env as
 * `export KEY='value'` lines: reads KEY's value (0, or -1 if absent).
 */
int	 tl_test_env_get(const char *dir, const char *key, char *out,
	    size_t cap);
/* Is TCP port on 127.0.0.1 free to bind? */
int	 tl_test_port_free(int port);

/*
 * The server harnesses (tests/harness/NAME, e.g. "mariadb.sh") the
 * driver suites start and stop their servers with.
 *
 * tl_test_harness: the script's path under $TALLY_SRC (or "."), in
 * static storage overwritten by the next call (for messages and one
 * exec; not for threads).
 */
const char *tl_test_harness(const char *name);
/*
 * Runs `sh HARNESS cmd dir [port]` (port NULL: left out) in a child and
 * waits for it: its exit status, or -1 when it could not be run or did
 * not exit (a signal).
 */
int	 tl_test_harness_run(const char *name, const char *cmd,
	    const char *dir, const char *port);
/* A TCP port on 127.0.0.1 the kernel just handed out (free now), or -1. */
int	 tl_test_free_port(void);
/*
 * The first line of the file at path into out (n bytes, cut when
 * longer), without its line end: 0, or -1 (no such file or no line).
 */
int	 tl_test_read_line(const char *path, char *out, size_t n);

#endif
