/*
 * tl_fence.c - the fence contract, as tl_fence.h states it.
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "tl_fence.h"

static void
hex(char out[33])
{
	unsigned char b[16];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, 33, b, sizeof(b));
}

#define TRY(h, w)	do {						\
	held.epoch = 99; held.leader[0] = '?';				\
	if (drv->fence((h), (w), &held, why) != 0)			\
		return "a fence call failed";				\
} while (0)

const char *
tl_test_fence_contract(const struct tl_drv_ops *drv, void *h, void *h2,
    char *why)
{
	char m1[33], m2[33], la[33], lb[33], lc[33];
	struct tl_drv_fence_held held;
	struct tl_drv_fence w;

	if (drv->fence == NULL)
		return "the driver declares no fence";
	if (sodium_init() < 0)
		return "libsodium";
	hex(m1), hex(m2), hex(la), hex(lb), hex(lc);
	w = (struct tl_drv_fence){ m1, 0, "" };
	TRY(h, &w);
	if (held.epoch != 0)
		return "a new mesh's fence does not read as epoch 0";
	w = (struct tl_drv_fence){ m1, 2, la };
	TRY(h, &w);
	if (held.epoch != 2 || strcmp(held.leader, la) != 0)
		return "the first raise to epoch 2 did not hold leader A";
	if (!tl_drv_fence_ours(&w, &held))
		return "leader A is not told it holds the fence";
	/* Another candidate at the same epoch: the CAS keeps the first. */
	w = (struct tl_drv_fence){ m1, 2, lb };
	TRY(h2, &w);
	if (held.epoch != 2 || strcmp(held.leader, la) != 0)
		return "a second leader at epoch 2 took the fence from the first";
	if (tl_drv_fence_ours(&w, &held))
		return "the second leader at epoch 2 is told it holds the fence";
	/* A lower epoch changes nothing. */
	w = (struct tl_drv_fence){ m1, 1, lc };
	TRY(h2, &w);
	if (held.epoch != 2 || strcmp(held.leader, la) != 0)
		return "a lower epoch changed the fence";
	/* Another mesh on the same provider: its own fence, from nothing. */
	w = (struct tl_drv_fence){ m2, 0, "" };
	TRY(h2, &w);
	if (held.epoch != 0)
		return "another mesh reads this mesh's fence";
	w = (struct tl_drv_fence){ m2, 1, lc };
	TRY(h2, &w);
	if (held.epoch != 1 || strcmp(held.leader, lc) != 0)
		return "another mesh's first raise did not take";
	/* Higher: taken, and the first mesh's still stands. */
	w = (struct tl_drv_fence){ m1, 3, lb };
	TRY(h, &w);
	if (held.epoch != 3 || strcmp(held.leader, lb) != 0)
		return "a raise to epoch 3 did not take";
	w = (struct tl_drv_fence){ m2, 0, "" };
	TRY(h, &w);
	if (held.epoch != 1 || strcmp(held.leader, lc) != 0)
		return "a raise on one mesh changed another mesh's fence";
	w = (struct tl_drv_fence){ m1, 0, "" };
	TRY(h2, &w);
	if (held.epoch != 3 || strcmp(held.leader, lb) != 0)
		return "epoch 0 does not read what is held";
	return NULL;
}
