/*
 * http.h - what the drivers that speak HTTP through libcurl share
 * (rabbitmq.c, ceph_rgw.c, oidc.c): the library's one-time start, a
 * response body gathered into guarded memory (core/secret.h: bodies
 * carry hashes, keys and client secrets), and TLS to the provider (the
 * settings tls and ca, decl.h).
 *
 * Below every driver, like util.h: nothing here calls registry.c.
 */
#ifndef TL_DRV_HTTP_H
#define TL_DRV_HTTP_H

#include <stddef.h>

#include "decl.h"

/* The size of a handle's error buffer (libcurl's CURL_ERROR_SIZE). */
#define TL_DRV_HTTP_ERR	256

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

/*
 * Sets the libcurl easy handle curl (a CURL *) to reach the provider in
 * mode, before any request: verify checks the peer's chain and host
 * name (VERIFYPEER 1, VERIFYHOST 2) against ca_file alone, or against
 * libcurl's default bundle when ca_file is NULL and system_ok (an OIDC
 * issuer on the public web); with neither it is TL_EUNTRUSTED, why
 * saying how to give a ca.  require encrypts and verifies nothing (the
 * one place either check is turned off); off sets nothing (the URL is
 * http).  errbuf (TL_DRV_HTTP_ERR bytes, the caller's for the handle's
 * life) gets libcurl's detail of a failure.  0, or TL_EUNTRUSTED.
 */
int	tl_drv_http_tls(void *curl, enum tl_drv_tls mode, const char *ca_file,
	    int system_ok, char *errbuf, char *why);

/*
 * What a failed transfer (cc: its CURLcode) is under mode: TL_EUNTRUSTED
 * when the provider's certificate did not verify (verify only: a chain
 * to another CA, a name that is not the host's, or a handshake that
 * failed), TL_EUNREACH for anything else.  msg (cap bytes) gets the
 * reason: "certificate verify failed: DETAIL" or "the TLS handshake
 * failed: DETAIL" (a plaintext port, a protocol refused) for the first,
 * libcurl's error buffer (else its code's text) for the second.  No credential has
 * been sent by then: libcurl sends headers only after the handshake.
 */
int	tl_drv_http_fail(int cc, enum tl_drv_tls mode, const char *errbuf,
	    char *msg, size_t cap);

#endif
