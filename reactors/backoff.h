/*
 * backoff.h - when a failing provider (or the delivery files, or a
 * grant's migration) is tried again.
 *
 * The entries live in rx->bo, one per id, created on the first failure
 * and kept until tl_rx_free; a pointer tl_rx_backoff_find returns is
 * valid until the next call that may create one (the array grows).
 * Not thread-safe: reactors call these between their passes' phases,
 * on tallyd's one thread.  A failure to grow the array is not an
 * error: the id is then not backed off (find returns NULL, fail does
 * nothing), and the next pass tries it again.
 */
#ifndef TL_RX_BACKOFF_H
#define TL_RX_BACKOFF_H

#include <stdint.h>

#include "rx.h"

struct tl_rx_backoff {
	char		id[256];	/* a provider, or a grant's migration */
	uint64_t	next_ns;
	uint64_t	delay_ns;
	/*
	 * The last failure was the provider refusing tally's admin login
	 * (a missing or wrong secret): it waits on a person, not on time,
	 * so it is retried on the same schedule but not counted as work
	 * that will get done by waiting (tallyd --once rests on it).
	 */
	int		auth;
};

/* id's entry; with create, made (zeroed) when it has none. */
struct tl_rx_backoff *tl_rx_backoff_find(struct tl_rx *rx, const char *id,
	    int create);
/* One more failure: 0.5 s doubling up to 60 s, with full jitter. */
void	tl_rx_backoff_fail(struct tl_rx *rx, const char *id);
/* The same, for a refused admin login (auth set until a success). */
void	tl_rx_backoff_refused(struct tl_rx *rx, const char *id);
/* A success: id is due at once again. */
void	tl_rx_backoff_ok(struct tl_rx *rx, const char *id);

#endif
