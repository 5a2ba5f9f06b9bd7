/*
 * metrics.h - what tallyd reports on --metrics (core/metrics.h serves
 * it): built in the daemon's loop, never on another thread, from the
 * projections, the log and the loop's own figures.
 */
#ifndef TL_RX_METRICS_H
#define TL_RX_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "core/metrics.h"
#include "rx.h"

/* Events of a kind since tallyd started, by a label (at most 32). */
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
	/*
	 * What the program adds of its own (a cluster's followers), after
	 * the rest, with the log's head; NULL: nothing.
	 */
	void			(*extra)(struct tl_mx_buf *b, uint64_t head,
				    void *arg);
	void			*extra_arg;
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
