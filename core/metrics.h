/*
 * metrics.h - --metrics ADDR: what a monitoring system scrapes, for
 * tallyd and tally-node alike.
 *
 * An HTTP server (libmicrohttpd): GET /metrics answers the Prometheus
 * text exposition format (version 0.0.4) that the program's main loop
 * wrote last.  The server never reads the program's state itself: the
 * loop owns it (tallyd's writer may grow LMDB's map, which no other
 * thread may have a transaction open across), and only the loop knows
 * its own timings.  A scrape finding the last text older than
 * TL_MX_FRESH_MS asks the loop for a new one (an eventfd the loop polls) and waits
 * for it at most TL_MX_WAIT_MS, else serves the older one: a loop busy
 * with a long pass delays nothing but the figures' freshness
 * (tally_metrics_age_seconds says how old they are).
 *
 * Hostile clients: at most TL_MX_CONNS connections, TL_MX_PER_IP from
 * one address, each closed after TL_MX_IDLE_S without progress, a
 * request's headers within TL_MX_MEM bytes (else 431), any body
 * discarded, a thread per connection so one slow client blocks no
 * other; nothing but /metrics and / is served (404), nothing but GET
 * and HEAD (405).
 *
 * Below it: helpers to write that text (a growing buffer, label
 * values, histograms).  What each program reports is its own
 * (reactors/metrics.c, tools/tally-node/main.c), built in its
 * loop's thread.
 */
#ifndef TL_METRICS_H
#define TL_METRICS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define TL_MX_FRESH_MS	1000
#define TL_MX_WAIT_MS	2000
#define TL_MX_CONNS	64
#define TL_MX_PER_IP	16
#define TL_MX_IDLE_S	10
#define TL_MX_MEM	(32u << 10)

struct tl_mx;

/*
 * Listens on addr: "HOST:PORT", "[V6]:PORT", or "PORT" alone for
 * 127.0.0.1 (loopback by default: put a proxy with TLS and
 * authentication in front to serve further).  0, or TL_EINVAL (a bad
 * address) / TL_EUNREACH (it cannot listen there) with why (TL_WHY_MAX)
 * saying so.  *out is the caller's to tl_mx_stop.
 */
int	tl_mx_start(const char *addr, struct tl_mx **out, char *why);
/* Whether addr is one tl_mx_start takes: 0, or TL_EINVAL and why. */
int	tl_mx_addr_ok(const char *addr, char *why);
/* Stops serving (connections under way are ended) and frees m. */
void	tl_mx_stop(struct tl_mx *m);
/* The descriptor the loop polls: readable when a scrape waits. */
int	tl_mx_fd(const struct tl_mx *m);
/* Drains tl_mx_fd; 1 when a scrape wants new text. */
int	tl_mx_wanted(struct tl_mx *m);
/* The new text (malloc'd, len bytes): m owns it from now on. */
void	tl_mx_publish(struct tl_mx *m, char *text, size_t len);

/* --- writing the text ---------------------------------------------- */

/*
 * A growing text: tl_mx_addf appends (printf), errors are sticky in err
 * (ENOMEM); the caller frees p.  TL_MX_BUF_INIT is an empty one.
 */
struct tl_mx_buf {
	char	*p;
	size_t	 len, cap;
	int	 err;
};
#define TL_MX_BUF_INIT	{ NULL, 0, 0, 0 }

void	tl_mx_addf(struct tl_mx_buf *b, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
void	tl_mx_vaddf(struct tl_mx_buf *b, const char *fmt, va_list ap);
/* "# HELP name help" and "# TYPE name type". */
void	tl_mx_head(struct tl_mx_buf *b, const char *name, const char *type,
	    const char *help);
/*
 * s as a label value (backslash, quote and newline escaped, other
 * control bytes '?', at most 200 bytes of s) in out; returns out.
 */
const char *tl_mx_label(const char *s, char out[512]);

/* Upper bounds of a duration histogram's buckets, in seconds. */
#define TL_MX_NBUCKETS	10
extern const double tl_mx_buckets[TL_MX_NBUCKETS];

struct tl_mx_hist {
	uint64_t	 count;
	double		 sum;		/* seconds */
	uint64_t	 le[TL_MX_NBUCKETS];	/* cumulative */
};

void	tl_mx_observe(struct tl_mx_hist *h, double secs);
/* name_bucket{label="value",le=...}, name_sum, name_count. */
void	tl_mx_hist_write(struct tl_mx_buf *b, const char *name,
	    const char *label, const char *value, const struct tl_mx_hist *h);

#endif
