/*
 * redis-internal.h - what drivers/redis_decl.c (the redis driver's
 * declaration) gives its operations, drivers/redis.c; nothing outside
 * drivers/ includes it.  Like the declaration, it needs decl.h only:
 * no hiredis.
 */
#ifndef TL_DRV_REDIS_INTERNAL_H
#define TL_DRV_REDIS_INTERNAL_H

#include "decl.h"

#define RD_NAME_MAX	63

/* The declaration: drivers/redis_decl.c. */
extern const struct tl_drv_decl tl_drv_redis_decl;

/*
 * 1 when s is a name the driver sends (a user and its prefix): 1 to
 * RD_NAME_MAX bytes of [a-z0-9_-], so no byte can become an ACL rule
 * or a glob character; else 0 (s NULL too).
 */
int	tl_drv_rd_valid_name(const char *s);

#endif /* TL_DRV_REDIS_INTERNAL_H */
