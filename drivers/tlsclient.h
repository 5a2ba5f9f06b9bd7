/*
 * tlsclient.h - the admin's client certificate (tl_drv_admin.client_cert
 * and client_key), as the drivers hand it to their client libraries.
 *
 * Operations side (libtallyops.a, OpenSSL): a driver that declares
 * TL_DRV_CLIENT_CERT_SETTINGS checks the pair when it opens, then gives
 * it to its library from memory (SSL_CTX, libcurl's blobs) or, for a
 * library that only opens files (libpq's sslcert/sslkey, MariaDB's
 * MYSQL_OPT_SSL_CERT/_KEY), through tl_drv_pem_memfd: the key never
 * reaches a disk.  Nothing here keeps state; any thread may call.
 */
#ifndef TL_DRV_TLSCLIENT_H
#define TL_DRV_TLSCLIENT_H

#include <stddef.h>

/*
 * Checks cert and key as tl_drv_admin carries them: both NULL or "" is
 * none (0, *have 0); one without the other, a certificate that is not
 * PEM, a key that does not parse (an encrypted key is refused: nothing
 * could give its passphrase) or that is not the certificate's: TL_EINVAL
 * with why (TL_WHY_MAX bytes; never a byte of the key); else 0,
 * *have 1.  On memory only.
 */
int	tl_drv_client_cert_check(const char *cert, const char *key, int *have,
	    char *why);

/*
 * The subject of cert's first certificate, one line (RFC 2253), into
 * out (cap bytes): 0, or TL_EINVAL when cert does not parse.
 */
int	tl_drv_client_cert_subject(const char *cert, char *out, size_t cap);

/*
 * pem in an anonymous file for a client library that opens a file by
 * name: a memfd (close-on-exec, mode 0600, which libpq requires of a
 * key; on no file system), *fd set, and its name "/proc/self/fd/N" in
 * path (cap bytes, 32 are enough).  The caller closes *fd once the
 * library will open the name no more (a session's close: a library may
 * open it again to reconnect).  what names it in why ("admin-key").
 * 0, or TL_EDRIVER / ENOMEM with why.
 */
int	tl_drv_pem_memfd(const char *pem, const char *what, int *fd,
	    char *path, size_t cap, char *why);

/*
 * The pair as files for a client library that opens them by name (libpq's
 * sslcert/sslkey, libmariadb's MYSQL_OPT_SSL_CERT/_KEY): two memfds
 * (tl_drv_pem_memfd), their names, and the certificate's subject (public,
 * for reasons).  certfd -1: none.  TL_DRV_CERT_FILES_INIT before use.
 */
struct tl_drv_cert_files {
	int	certfd, keyfd;
	char	cert[32], key[32];	/* "/proc/self/fd/N" */
	char	subject[256];		/* "(no subject)" when it has none */
};
#define TL_DRV_CERT_FILES_INIT	{ -1, -1, "", "", "" }

/*
 * cert and key (checked by the caller) into f: 0, or TL_EDRIVER / ENOMEM
 * with why (f then holds nothing open).  Kept open until
 * tl_drv_cert_files_close: a library opens them again at every connect.
 */
int	tl_drv_cert_files_open(struct tl_drv_cert_files *f, const char *cert,
	    const char *key, char *why);
/* Closes f's memfds (idempotent); f is as TL_DRV_CERT_FILES_INIT after. */
void	tl_drv_cert_files_close(struct tl_drv_cert_files *f);

/*
 * cert and key (checked) installed on ctx (an OpenSSL SSL_CTX *, void
 * here so this header needs no OpenSSL) for the handshakes made with
 * it: 0, or TL_EINVAL with why.
 */
int	tl_drv_client_cert_ctx(void *ctx, const char *cert, const char *key,
	    char *why);

#endif /* TL_DRV_TLSCLIENT_H */
