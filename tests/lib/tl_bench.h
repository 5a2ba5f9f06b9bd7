/*
 * tl_bench.h - the process and timing harness the benchmarks share.
 *
 * For bench/ only: clocks and medians, whole tally and tallyd processes
 * run with TALLY_HOME set, the scripts of tests/harness.  Like tl_test.h
 * it is simple and loud rather than general.  Every fork flushes stdout
 * and stderr first, so that a child never writes out figures still
 * buffered in the parent a second time.
 */
#ifndef TL_BENCH_H
#define TL_BENCH_H

#include <sys/types.h>

#include <libpq-fe.h>
#include <stdint.h>
#include <time.h>

/* Arguments after the program's path in tl_bench_tally/_tallyd_start. */
#define TL_BENCH_MAXARGS	30

/* Monotonic seconds: for intervals, unmoved by clock changes. */
double	 tl_bench_now(void);
/*
 * Nanoseconds on clk: CLOCK_MONOTONIC to compare with a reading in
 * another process, CLOCK_REALTIME to compare with events' timestamps.
 */
uint64_t tl_bench_ns(clockid_t clk);
/* Sleeps ms milliseconds; a signal cuts it short. */
void	 tl_bench_msleep(unsigned ms);

/* qsort's comparison for doubles, ascending. */
int	 tl_bench_cmp_double(const void *a, const void *b);
/* The median of v[0..n), 0 if n <= 0.  Sorts v in place. */
double	 tl_bench_median(double *v, int n);
/* Prints v[0..n) to stdout as "12, 15, 9" (whole numbers), no newline. */
void	 tl_bench_print_list(const double *v, int n);

/* $name as an int clamped to [lo, hi]; def if unset or empty. */
int	 tl_bench_envint(const char *name, int def, int lo, int hi);
/*
 * $TALLY_SRC (else ".") and $TALLY_BIN (else SRC/build/bin), as make
 * bench sets them.  *bin may point to storage of this module.
 */
void	 tl_bench_dirs(const char **src, const char **bin);
/*
 * Runs fn at exit and on SIGINT or SIGTERM (then the signal's default
 * action, as before), so that a bench stopped early stops its servers;
 * ignores SIGPIPE.  One fn per program: a second call replaces it.
 */
void	 tl_bench_atexit(void (*fn)(void));

/*
 * Runs argv (argv[0] a path) and waits for it: TALLY_HOME=home if home
 * is not NULL; stdin from in (NULL: /dev/null); stdout appended to out
 * (NULL: /dev/null); stderr appended to err, or with stdout if err is
 * NULL.  Files are created 0600.  Returns the exit status, or -1 if it
 * could not be run or was killed by a signal.
 */
int	 tl_bench_run(const char *home, const char *in, const char *out,
	    const char *err, char *const argv[]);
/*
 * BIN/tally with the arguments that follow out, up to a NULL (at most
 * TL_BENCH_MAXARGS: -1 beyond), through tl_bench_run (stderr with out).
 */
int	 tl_bench_tally(const char *bin, const char *home, const char *in,
	    const char *out, ...);
/*
 * BIN/tally assign PFX<first> ... PFX<last> NODE (each number %04d):
 * one process, one transaction, as tl_bench_tally.
 */
int	 tl_bench_assign_batch(const char *bin, const char *home,
	    const char *out, const char *pfx, int first, int last,
	    const char *node);
/*
 * Requests through the CLI into home (modules PFX0001..PFXn, declared
 * and unassigned), tallyd a daemon (--interval 1, stderr to dlog),
 * stopped before return: seconds from the first tally assign to every
 * grant delivered (credential.delivered committed, polled every 1 ms),
 * -1 on failure; *cli: the seconds in tally assign.  batch: one tally
 * assign of all n (one process, one transaction); else one per grant.
 */
double	 tl_bench_through_tally(const char *bin, const char *home,
	    const char *clilog, const char *dlog, const char *pfx, int n,
	    int batch, double *cli);
/*
 * /bin/sh SRC/tests/harness/SCRIPT a1 a2 a3 (a3 may be NULL), its
 * output to /dev/null: its exit status, as tl_bench_run.
 */
int	 tl_bench_harness(const char *src, const char *script,
	    const char *a1, const char *a2, const char *a3);
/*
 * tests/harness/pg.sh start DIR on the first port from hint that is
 * free and where the server comes up (30 tried: a port in the ephemeral
 * range may be a client's meanwhile); the port into port (cap bytes).
 * 0, or -1 when none did.
 */
int	 tl_bench_pg_start(const char *src, const char *dir, int hint,
	    char *port, size_t cap);

/*
 * Starts BIN/tallyd with the arguments that follow log, up to a NULL,
 * in the background: TALLY_HOME=home, stdin /dev/null, stdout and
 * stderr appended to log.  Returns its pid once HOME/tallyd.lock names
 * it (it owns the home: what follows is timed against a running
 * daemon), or -1 if it exited or did not within about 5 s (then it is
 * killed).  Stop it with tl_bench_tallyd_stop.
 */
pid_t	 tl_bench_tallyd_start(const char *bin, const char *home,
	    const char *log, ...);
/*
 * SIGTERM to *pid, SIGKILL if it has not exited after 30 s; reaps it
 * and sets *pid to -1.  Nothing if *pid <= 0, so it can be called
 * again from an exit handler.
 */
void	 tl_bench_tallyd_stop(pid_t *pid);

/*
 * Deliveries.  The control plane writes no env file: tally delivers a
 * grant by committing a credential.delivered event with the values
 * sealed to the node (the node's agent, tools/tally-node, or tally env
 * opens them with the node's key).
 *
 * tl_bench_delivered: the number of credential.delivered events in
 * HOME/log, of stream only when stream is not NULL ("grant/ID"), or -1
 * if the log cannot be read.  It opens the log read-only for the call
 * and closes it, and reads all of it when stream is NULL (about 0.4 ms
 * at 200 grants): for a look now and then.  A bench that polls opens a
 * struct tl_bench_dlv instead.  Neither while this process has HOME/log
 * open otherwise (LMDB allows one environment per file per process).
 */
int	 tl_bench_delivered(const char *home, const char *stream);

/*
 * HOME/log open read-only for polling deliveries while a tallyd writes
 * it: a read transaction per count, none held in between.  Zeroed
 * ({ 0 }) it is closed; tl_bench_dlv_close accepts that.
 */
struct tl_bench_dlv {
	struct tl_log	*log;
	uint64_t	 next;	/* the first seq not yet counted */
	int		 n;	/* events of type before next */
	const char	*type;	/* what is counted; NULL: credential.delivered */
};
/* Opens HOME/log: 0, or -1 (d then closed). */
int	 tl_bench_dlv_open(struct tl_bench_dlv *d, const char *home);
/*
 * The events of d->type (credential.delivered unless the caller set it
 * after opening) committed so far: of every stream
 * when stream is NULL (only the events since the last such call are
 * read), else of stream alone (its events read again, a few).  -1 if
 * the log cannot be read.
 */
int	 tl_bench_dlv_count(struct tl_bench_dlv *d, const char *stream);
void	 tl_bench_dlv_close(struct tl_bench_dlv *d);
/*
 * Waits until HOME/log holds n events of type, read in this process
 * every 2 ms (a `tally log` that often would take the CPU the daemons
 * are measured on); exits, naming me, when the log cannot be read or
 * after timeout_s.
 */
void	 tl_bench_wait_type(const char *me, const char *home,
	    const char *type, int n, double timeout_s);
/*
 * `BIN/tally env NODE MODULE --node-key KEY` with TALLY_HOME=home: its
 * stdout, the KEY=VALUE lines of MODULE's environment as delivered
 * (credentials included), into buf (cap bytes, NUL-terminated), read
 * through a pipe so that it touches no disk; stderr appended to err
 * (NULL: /dev/null).  tally env acknowledges nothing.  Returns its exit
 * status (0: every grant of MODULE delivered), or -1 if it could not be
 * run, was killed, or wrote cap bytes or more (buf then empty).  The
 * caller wipes buf (tl_secret_wipe) when done with it, whatever the
 * result.
 */
int	 tl_bench_env(const char *bin, const char *home, const char *node,
	    const char *module, const char *key, const char *err, char *buf,
	    size_t cap);
/*
 * The value of NAME in env, KEY=VALUE lines as tl_bench_env gives them,
 * into val (cap bytes): 0, or -1 if there is no such line or the value
 * does not fit (val then empty).
 */
int	 tl_bench_envval(const char *env, const char *name, char *val,
	    size_t cap);

/*
 * Runs sql on c: 0 if it succeeded (a command, or rows), else -1 and
 * "who: SQL: error" on stderr (SQL cut at 80 characters).
 */
int	 tl_bench_pg_exec(PGconn *c, const char *who, const char *sql);

/*
 * One target's verdict: prints "  [target] WHAT: FIGURE (TARGET): met"
 * (or MISSED) and, when $TALLY_BENCH_SUMMARY names a file, appends the
 * same line there with the program's name, so make bench can end with
 * every target of the run in one place.  figure is formatted (printf).
 */
void	 tl_bench_target(const char *what, const char *target, int met,
	    const char *figure, ...) __attribute__((format(printf, 4, 5)));

#endif
