/*
 * rabbitmq.h - what the RabbitMQ driver shows beyond the contract, for
 * its tests and benchmark, and for tally check once drift has a kind
 * for a plaintext listener (reactors reach it through tl_drv_ops).
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

/*
 * Whether consumers of the broker of h (a handle of tl_drv_rabbitmq's
 * open) can still connect without TLS: the management API's
 * GET /api/overview lists a listener of protocol "amqp" (plain AMQP).
 * 0 with *open 1 and why the line a person acts on ("consumers can
 * connect without TLS on port N: ..."), or *open 0 and why saying TLS
 * only; the management API's errors (TL_EUNREACH, TL_EAUTH,
 * TL_EDRIVER) with why and *open 0: the driver cannot tell.  Reported,
 * never changed: the listeners are the operator's (rabbitmq.conf).
 */
int	tl_drv_rmq_plaintext(void *h, int *open, char *why);

#endif
