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
 * The client certificate cert (PEM, chain leaf first) and its key (PEM,
 * unencrypted) presented by the libcurl easy handle curl (a CURL *) to
 * a server that asks for one, from memory: CURLOPT_SSLCERT_BLOB and
 * CURLOPT_SSLKEY_BLOB, type PEM (libcurl 7.71 or later, OpenSSL
 * backend).  The pair is checked first (tl_drv_client_cert_check: both
 * NULL or "" is none, and nothing is set).  The blobs are
 * CURL_BLOB_NOCOPY: libcurl reads the caller's strings in place (a copy
 * would sit unwiped in its heap), so they must live, unchanged, until
 * the handle is cleaned up; keep the key in tl_secret memory and free it
 * after curl_easy_cleanup.  0; TL_EINVAL
 * (the pair, why as tl_drv_client_cert_check's); TL_EDRIVER when
 * libcurl takes no blob.  Never a byte of the key in why.
 */
int	tl_drv_http_client_cert(void *curl, const char *cert, const char *key,
	    char *why);

/*
 * What a failed transfer (cc: its CURLcode) is under mode: TL_EAUTH
 * when the server ended the TLS session with an alert about the
 * client's certificate (any mode: unknown CA, bad, expired, revoked,
 * access denied; or a certificate required and none presented), in the
 * handshake or, under TLS 1.3, at the first read; TL_EUNTRUSTED when
 * the provider's certificate did not verify (verify only: a chain to
 * another CA, a name that is not the host's, or a handshake that
 * failed), TL_EUNREACH for anything else.  msg (cap bytes) gets the
 * reason: "the server refused the client certificate presented: DETAIL"
 * or "the server asks for a client certificate and none was presented:
 * DETAIL" for the first, "certificate verify failed: DETAIL" or "the
 * TLS handshake failed: DETAIL" (a plaintext port, a protocol refused)
 * for the second, libcurl's error buffer (else its code's text) for the
 * third.  No credential has been sent in the first two cases under TLS
 * 1.2 (libcurl sends headers only after the handshake); under TLS 1.3
 * a server judges the client's certificate after the client finished
 * the handshake, so the request may have been sent, to a server the
 * client verified.
 */
int	tl_drv_http_fail(int cc, enum tl_drv_tls mode, const char *errbuf,
	    char *msg, size_t cap);

#endif
