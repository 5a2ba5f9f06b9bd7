/*
 * rx.c - what every reactor uses of struct tl_rx: its log and its
 * clock (rx.h).  Below every reactor file: it calls none of them
 * (table.c holds struct tl_rx's defaults and its end).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdint.h>
#include <time.h>

#include "rx.h"

void
tl_rx_log(struct tl_rx *rx, int level, const char *fmt, ...)
{
	va_list ap;

	if (rx->logf == NULL)
		return;
	va_start(ap, fmt);
	rx->logf(level, fmt, ap);
	va_end(ap);
}

uint64_t
tl_rx_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
tl_rx_unindexed(struct tl_rx *rx)
{
	if (rx->unindexed_said)
		return;
	rx->unindexed_said = 1;
	tl_rx_log(rx, TL_RX_WARN, "the projections were built by a tally "
	    "before the migrator's and the rotator's indexes: their passes "
	    "read every grant until `tally rebuild`");
}
