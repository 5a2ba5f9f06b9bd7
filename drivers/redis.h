/*
 * redis.h - what the redis driver shows beyond the contract (driver.h),
 * for its tests and for tally check once drift has a kind for it
 * (reactors reach the driver through tl_drv_ops).
 */
#ifndef TL_DRV_REDIS_H
#define TL_DRV_REDIS_H

/*
 * Whether consumers of the server of h (a handle of tl_drv_redis's open,
 * not a fault wrapper's) can still connect without TLS: the server's
 * plaintext port (CONFIG GET port) is not 0.  0 with *open 1 and why
 * the line a person acts on ("consumers can connect without TLS on port
 * N: set port 0 in redis.conf"), or *open 0 and why saying TLS only;
 * TL_EUNREACH, TL_EDRIVER, TL_EAUTH (the admin may not read the
 * configuration, CONFIG renamed away) with why, *open 0: the driver
 * cannot tell.  Reported, never changed: the listener is the operator's.
 */
int	tl_drv_rd_plaintext(void *h, int *open, char *why);

#endif /* TL_DRV_REDIS_H */
