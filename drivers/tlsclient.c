/*
 * tlsclient.c - the admin's client certificate, checked and handed to
 * the client libraries from memory (tlsclient.h).
 */
#define _GNU_SOURCE	/* memfd_create */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "core/error.h"
#include "decl.h"
#include "tlsclient.h"
#include "util.h"

/* No passphrase: an encrypted key fails to load rather than prompt. */
static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

static X509 *
cert_load(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = b != NULL ? PEM_read_bio_X509(b, NULL, no_passphrase,
	    NULL) : NULL;

	BIO_free(b);
	return x;
}

static EVP_PKEY *
key_load(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *k = b != NULL ? PEM_read_bio_PrivateKey(b, NULL,
	    no_passphrase, NULL) : NULL;

	BIO_free(b);
	return k;
}

static int
given(const char *s)
{
	return s != NULL && s[0] != '\0';
}

int
tl_drv_client_cert_check(const char *cert, const char *key, int *have,
    char *why)
{
	EVP_PKEY *k = NULL;
	X509 *x = NULL;
	int rc = TL_EINVAL;

	*have = 0;
	if (!given(cert) && !given(key))
		return 0;
	if (!given(key))
		return tl_drv_why(why, TL_EINVAL, "admin-cert is set but "
		    "admin-key is not (tally assign --secret admin-key)");
	if (!given(cert))
		return tl_drv_why(why, TL_EINVAL, "admin-key is set but "
		    "admin-cert is not (tally assign --set admin-cert=FILE)");
	if ((x = cert_load(cert)) == NULL)
		tl_drv_why(why, rc, "admin-cert: no PEM certificate in it");
	else if ((k = key_load(key)) == NULL)
		tl_drv_why(why, rc, "admin-key: not an unencrypted PEM "
		    "private key");
	else if (X509_check_private_key(x, k) != 1)
		tl_drv_why(why, rc, "admin-key is not the private key of "
		    "admin-cert");
	else {
		*have = 1;
		rc = 0;
	}
	EVP_PKEY_free(k);
	X509_free(x);
	/* Nothing of these parses is left for the thread's next reader. */
	ERR_clear_error();
	return rc;
}

int
tl_drv_client_cert_subject(const char *cert, char *out, size_t cap)
{
	X509 *x = cert_load(cert);
	BIO *b = NULL;
	int n, rc = TL_EINVAL;

	if (cap > 0)
		out[0] = '\0';
	if (x != NULL && (b = BIO_new(BIO_s_mem())) != NULL &&
	    X509_NAME_print_ex(b, X509_get_subject_name(x), 0,
	    XN_FLAG_RFC2253) >= 0 && cap > 0 &&
	    (n = BIO_read(b, out, (int)(cap - 1 > 4096 ? 4096 : cap - 1))) >=
	    0) {
		out[n] = '\0';
		rc = 0;
	}
	BIO_free(b);
	X509_free(x);
	ERR_clear_error();
	return rc;
}

int
tl_drv_pem_memfd(const char *pem, const char *what, int *fd, char *path,
    size_t cap, char *why)
{
	size_t n = strlen(pem), off = 0;
	int d;

	*fd = -1;
	if ((d = memfd_create(what, MFD_CLOEXEC)) < 0)
		return tl_drv_why(why, errno == ENOMEM ? ENOMEM : TL_EDRIVER,
		    "%s: memfd_create: %s", what, strerror(errno));
	if (fchmod(d, 0600) != 0)
		goto fail;
	while (off < n) {
		ssize_t w = write(d, pem + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto fail;
		off += (size_t)w;
	}
	if ((size_t)snprintf(path, cap, "/proc/self/fd/%d", d) >= cap) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	*fd = d;
	return 0;
fail:
	tl_drv_why(why, TL_EDRIVER, "%s: in memory: %s", what, strerror(errno));
	close(d);
	return TL_EDRIVER;
}

int
tl_drv_cert_files_open(struct tl_drv_cert_files *f, const char *cert,
    const char *key, char *why)
{
	int rc;

	if ((rc = tl_drv_pem_memfd(cert, "admin-cert", &f->certfd, f->cert,
	    sizeof(f->cert), why)) != 0 ||
	    (rc = tl_drv_pem_memfd(key, "admin-key", &f->keyfd, f->key,
	    sizeof(f->key), why)) != 0) {
		tl_drv_cert_files_close(f);
		return rc;
	}
	if (tl_drv_client_cert_subject(cert, f->subject,
	    sizeof(f->subject)) != 0 || f->subject[0] == '\0')
		snprintf(f->subject, sizeof(f->subject), "(no subject)");
	return 0;
}

void
tl_drv_cert_files_close(struct tl_drv_cert_files *f)
{
	if (f->certfd >= 0)
		close(f->certfd);
	if (f->keyfd >= 0)
		close(f->keyfd);
	f->certfd = f->keyfd = -1;
	f->cert[0] = f->key[0] = f->subject[0] = '\0';
}

int
tl_drv_client_cert_ctx(void *vctx, const char *cert, const char *key,
    char *why)
{
	SSL_CTX *ctx = vctx;
	EVP_PKEY *k = NULL;
	X509 *x = NULL, *ca;
	BIO *b = NULL;
	int have, rc;

	if ((rc = tl_drv_client_cert_check(cert, key, &have, why)) != 0 ||
	    !have)
		return rc;
	rc = TL_EINVAL;
	if ((b = BIO_new_mem_buf(cert, -1)) == NULL ||
	    (x = PEM_read_bio_X509(b, NULL, no_passphrase, NULL)) == NULL ||
	    SSL_CTX_use_certificate(ctx, x) != 1) {
		tl_drv_why(why, rc, "admin-cert: the TLS library refused it");
		goto out;
	}
	/* The rest of the file is the chain, leaf first. */
	while ((ca = PEM_read_bio_X509(b, NULL, no_passphrase, NULL)) !=
	    NULL)
		if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
			X509_free(ca);
			tl_drv_why(why, rc, "admin-cert: the TLS library "
			    "refused its chain");
			goto out;
		}
	if ((k = key_load(key)) == NULL || SSL_CTX_use_PrivateKey(ctx, k) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		tl_drv_why(why, rc, "admin-key: the TLS library refused it");
		goto out;
	}
	rc = 0;
out:
	EVP_PKEY_free(k);
	X509_free(x);
	BIO_free(b);
	ERR_clear_error();
	return rc;
}
