/*
 * backoff.c - when to try a failing provider (or delivery files, or a
 * grant's migration) again: exponential backoff with full jitter,
 * kept in rx->bo between passes (backoff.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "core/vec.h"

struct tl_rx_backoff *
tl_rx_backoff_find(struct tl_rx *rx, const char *id, int create)
{
	struct tl_rx_backoff *nb;
	size_t i;

	for (i = 0; i < rx->nbo; i++)
		if (strcmp(rx->bo[i].id, id) == 0)
			return &rx->bo[i];
	if (!create || tl_vec_grow(&rx->bo, &rx->capbo, rx->nbo + 1,
	    sizeof(rx->bo[0])) != 0)
		return NULL;
	nb = &rx->bo[rx->nbo++];
	memset(nb, 0, sizeof(*nb));
	snprintf(nb->id, sizeof(nb->id), "%s", id);
	return nb;
}

/* Exponential backoff with full jitter: 0.5 s doubling up to 60 s. */
void
tl_rx_backoff_fail(struct tl_rx *rx, const char *id)
{
	struct tl_rx_backoff *b = tl_rx_backoff_find(rx, id, 1);
	uint64_t jitter;

	if (b == NULL)
		return;
	b->delay_ns = b->delay_ns ? b->delay_ns * 2 : 500000000u;
	if (b->delay_ns > 60000000000u)
		b->delay_ns = 60000000000u;
	jitter = (uint64_t)rand() % (b->delay_ns / 2 + 1);
	b->next_ns = tl_rx_now() + b->delay_ns / 2 + jitter;
	b->auth = 0;
}

void
tl_rx_backoff_refused(struct tl_rx *rx, const char *id)
{
	struct tl_rx_backoff *b;

	tl_rx_backoff_fail(rx, id);
	if ((b = tl_rx_backoff_find(rx, id, 0)) != NULL)
		b->auth = 1;
}

void
tl_rx_backoff_ok(struct tl_rx *rx, const char *id)
{
	struct tl_rx_backoff *b = tl_rx_backoff_find(rx, id, 0);

	if (b != NULL) {
		b->next_ns = b->delay_ns = 0;
		b->auth = 0;
	}
}
