/*
 * metrics.h - tallyd --metrics ADDR: what a monitoring system scrapes.
 *
 * metrics.c is the HTTP server (libmicrohttpd): GET /metrics answers
 * the Prometheus text exposition format (version 0.0.4) that tallyd's
 * main loop wrote last.  The server never reads the log itself: the
 * writer may grow LMDB's map, which no other thread may have a
 * transaction open across, and only the loop knows its reactors'
 * timings.  A scrape finding the last text older than TL_MX_FRESH_MS
 * asks the loop for a new one (an eventfd the loop polls) and waits
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
 * metrics_text.c builds the text from the projections, the log and
 * the loop's own figures (struct tl_mx_state), in the caller's (the
 * loop's) thread.
 */
#ifndef TL_TALLYD_METRICS_H
#define TL_TALLYD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "reactors/rx.h"

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
 * address) / TL_EUNREACH (it cannot listen there) with why (cap bytes)
 * saying so.  *out is the caller's to tl_mx_stop.
 */
int	tl_mx_start(const char *addr, struct tl_mx **out, char *why,
	    size_t cap);
/* Whether addr is one tl_mx_start takes: 0, or TL_EINVAL and why. */
int	tl_mx_addr_ok(const char *addr, char *why, size_t cap);
/* Stops serving (connections under way are ended) and frees m. */
void	tl_mx_stop(struct tl_mx *m);
/* The descriptor the loop polls: readable when a scrape waits. */
int	tl_mx_fd(const struct tl_mx *m);
/* Drains tl_mx_fd; 1 when a scrape wants new text. */
int	tl_mx_wanted(struct tl_mx *m);
/* The new text (malloc'd, len bytes): m owns it from now on. */
void	tl_mx_publish(struct tl_mx *m, char *text, size_t len);

/* --- the figures the loop keeps (metrics_text.c) ------------------- */

/* Upper bounds of the pass-duration histogram's buckets, in seconds. */
#define TL_MX_NBUCKETS	10
extern const double tl_mx_buckets[TL_MX_NBUCKETS];

struct tl_mx_hist {
	uint64_t	 count;
	double		 sum;		/* seconds */
	uint64_t	 le[TL_MX_NBUCKETS];	/* cumulative as written */
};

void	tl_mx_observe(struct tl_mx_hist *h, double secs);

/* Events of a type since tallyd started, by a label (at most 32). */
#define TL_MX_NCOUNTS	32
struct tl_mx_count {
	char		 label[48];
	uint64_t	 n;
};

struct tl_mx_state {
	const char *const	*pass_names;	/* a label per reactor */
	const struct tl_mx_hist	*pass;		/* npass histograms */
	size_t			 npass;
	uint64_t		 seen;		/* last event counted */
	int			 started;	/* seen is set */
	struct tl_mx_count	 drift[TL_MX_NCOUNTS];
	struct tl_mx_count	 repaired[TL_MX_NCOUNTS];
	struct tl_mx_count	 refused[TL_MX_NCOUNTS];
	uint64_t		 verified, unhealthy;	/* checks, by tallyd */
};

/*
 * The exposition text for rx's home now, into *out (malloc'd, *len
 * bytes), st's counters brought up to the log's head first (the events
 * appended since tallyd started; the first call only notes the head).
 * 0, or an error of the log (nothing in *out).
 */
int	tl_mx_text(struct tl_rx *rx, struct tl_mx_state *st, char **out,
	    size_t *len);

#endif
