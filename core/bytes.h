/*
 * bytes.h - big-endian integers in keys and values, so that LMDB's
 * byte order is numeric order.
 *
 * p must hold 8 bytes; nothing is checked, allocated or kept, and
 * nothing fails.
 */
#ifndef TL_BYTES_H
#define TL_BYTES_H

#include <stdint.h>

static inline void
tl_put_be64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static inline uint64_t
tl_get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

#endif
