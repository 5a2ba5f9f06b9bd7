/*
 * rx.c - what every reactor uses of struct tl_rx: its log and its
 * clock (rx.h).  Below every reactor file: it calls none of them
 * (table.c holds struct tl_rx's defaults and its end).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdint.h>
#include <time.h>

#include "core/error.h"
#include "core/log.h"
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

int
tl_rx_due_since(struct tl_rx *rx, const char *ckpt, const char *type,
    int *due)
{
	struct tl_filter f = { 0 };
	struct tl_iter *it;
	struct tl_event ev;
	struct tl_txn *t;
	uint64_t ck = 0, head = 0;
	int rc;

	*due = 0;
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if (tl_ckpt_get(t, ckpt, &ck) != 0)
		ck = 0;
	tl_log_last(t, &head, NULL);
	rc = TL_EEOF;
	if (ck < head) {
		f.from = ck + 1;
		f.type = type;
		if ((rc = tl_iter_open(t, &f, &it)) == 0) {
			rc = tl_iter_next(it, &ev);
			tl_iter_close(it);
		}
	}
	tl_log_abort(t);
	if (rc != 0 && rc != TL_EEOF)
		return rc;
	*due = rc == 0 || head - ck >= TL_RX_CKPT_LAG;
	return 0;
}
