/*
 * rabbitmq.h - what the RabbitMQ driver shows beyond the contract, for
 * its tests and benchmark only (reactors reach it through tl_drv_ops).
 */
#ifndef TL_DRV_RABBITMQ_H
#define TL_DRV_RABBITMQ_H

#include <stddef.h>

/*
 * The number of management API requests (HTTP round trips) made so far
 * on h, a handle from tl_drv_rabbitmq's open (not a fault wrapper's).
 * Lets a test prove that a bulk check is three calls per pass.
 */
unsigned long tl_drv_rmq_requests(const void *h);

/*
 * The value RabbitMQ stores for password under the algorithm
 * rabbit_password_hashing_sha256: base64(salt || SHA-256(salt ||
 * password)), salt 4 random bytes, into out (cap bytes, at least 49).
 * 0, or TL_ETOOBIG.  The hash is no secret's plaintext but is wiped by
 * the driver all the same.
 */
int	tl_drv_rmq_hash(const char *password, char *out, size_t cap);

#endif
