/*
 * http.h - what the drivers that speak HTTP through libcurl share
 * (rabbitmq.c, ceph_rgw.c, oidc.c): the library's one-time start, and a
 * response body gathered into guarded memory (core/secret.h: bodies
 * carry hashes, keys and client secrets).
 *
 * Below every driver, like util.h: nothing here calls registry.c.
 */
#ifndef TL_DRV_HTTP_H
#define TL_DRV_HTTP_H

#include <stddef.h>

/*
 * curl_global_init, once per process whatever thread asks first (it is
 * not safe to run twice at once): 0, or -1 when it failed (then it
 * fails for every caller).
 */
int	tl_drv_http_init(void);

/*
 * Appends n bytes of data to the body *buf (*len bytes, *cap allocated,
 * NUL-terminated after each append), growing it in guarded memory
 * (tl_vec_grow_secret: the old block is wiped when it moves).  *buf is
 * the caller's, freed with tl_secret_free.  limit: the most bytes the
 * body may hold (0: no limit).  Returns n, or 0 when the body would pass
 * limit or memory runs out: what a CURLOPT_WRITEFUNCTION returns to make
 * libcurl fail the transfer.
 */
size_t	tl_drv_http_body(char **buf, size_t *len, size_t *cap,
	    const void *data, size_t n, size_t limit);

#endif
