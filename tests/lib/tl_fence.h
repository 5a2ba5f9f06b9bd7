/*
 * tl_fence.h - the fence contract (drivers/driver.h: ops->fence), one
 * check every driver suite with a fence runs on its real server.
 */
#ifndef TL_FENCE_H
#define TL_FENCE_H

#include "drivers/driver.h"

/*
 * Runs the contract on drv through two sessions h and h2 of one
 * provider, under fresh random mesh ids: a raise is a compare-and-set
 * (a second leader at the same epoch does not take it, a lower epoch
 * changes nothing, a higher one does), epoch 0 only reads, and another
 * mesh's fence is neither read nor changed.  NULL when it holds, else
 * what failed (a static string; why holds the driver's words if a call
 * failed).
 */
const char *tl_test_fence_contract(const struct tl_drv_ops *drv, void *h,
	    void *h2, char *why);

#endif
