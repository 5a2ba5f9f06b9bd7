/*
 * certs.c - the keys the agent makes for certificate grants (a
 * delivery's 'k' item, core/delivery.h) and the certificates it is
 * given for them (certificate.issued).
 *
 * Everything lives in the agent's private state directory (root, 0700),
 * named by the grant (escaped, as its .state file) and the version:
 * GRANT.vN.key (the private key, 0600, made here and never sent
 * anywhere), GRANT.vN.csr (the signing request, kept so that every
 * report repeats the same bytes until the certificate arrives) and
 * GRANT.vN.cert (the certificate, taken only when it is for that key).
 * write_module copies key and certificate into the module's directory
 * with the module's owner, as it does every file a delivery carries.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/delivery.h"
#include "core/error.h"
#include "core/secret.h"
#include "core/x509.h"
#include "node-internal.h"

#define PEM_MAX		16384

static void
path_of(char *out, size_t cap, const char *gf, uint64_t version,
    const char *ext)
{
	snprintf(out, cap, "%s.v%llu.%s", gf, (unsigned long long)version,
	    ext);
}

/* dirfd/name whole, NUL-terminated; guarded memory when secret. */
static int
slurp(int dirfd, const char *name, int secret, char **out)
{
	struct stat st;
	FILE *fp;
	size_t n;
	int rc;

	*out = NULL;
	if ((rc = tn_file_open(dirfd, name, &fp)) != 0)
		return rc;
	if (fstat(fileno(fp), &st) != 0 || st.st_size <= 0 ||
	    st.st_size > PEM_MAX) {
		fclose(fp);
		return TL_EINVAL;
	}
	*out = secret ? tl_secret_alloc((size_t)st.st_size + 1) :
	    malloc((size_t)st.st_size + 1);
	if (*out == NULL) {
		fclose(fp);
		return ENOMEM;
	}
	n = fread(*out, 1, (size_t)st.st_size, fp);
	fclose(fp);
	(*out)[n] = '\0';
	if (n != (size_t)st.st_size) {
		if (secret)
			tl_secret_free(*out);
		else
			free(*out);
		*out = NULL;
		return EIO;
	}
	return 0;
}

int
tn_cert_prepare(int statefd, const char *gf, uint64_t version,
    const struct tl_dlv_keyreq *kr, int *have_cert, char *why)
{
	char name[300], cn[TL_DLV_CN_MAX + 1];
	char sanbuf[TL_DLV_SANS_MAX][TL_DLV_SAN_MAX + 1];
	const char *sans[TL_DLV_SANS_MAX];
	char *key = NULL, *cert = NULL, *csr = NULL;
	size_t i;
	int rc;

	*have_cert = 0;
	memcpy(cn, kr->cn, kr->cn_len);
	cn[kr->cn_len] = '\0';
	for (i = 0; i < kr->nsans; i++) {
		memcpy(sanbuf[i], kr->sans[i], kr->san_len[i]);
		sanbuf[i][kr->san_len[i]] = '\0';
		sans[i] = sanbuf[i];
	}
	/*
	 * The key: made once per grant and version, kept across restarts.
	 * A new key is made with its request (its PEM is not read back,
	 * which costs OpenSSL 3 more than the key and the request); the key
	 * is written first, so a restart in between asks for it again.
	 */
	path_of(name, sizeof(name), gf, version, "key");
	if ((rc = slurp(statefd, name, 1, &key)) == ENOENT) {
		if ((rc = tl_x509_request(cn, sans, kr->nsans, &key, &csr,
		    why)) != 0)
			return rc;
		if ((rc = tn_file_put(statefd, name, key, strlen(key),
		    NULL)) != 0)
			goto out;
		path_of(name, sizeof(name), gf, version, "csr");
		rc = tn_file_put(statefd, name, csr, strlen(csr), NULL);
		goto out;
	}
	if (rc != 0)
		goto out;
	path_of(name, sizeof(name), gf, version, "cert");
	if (slurp(statefd, name, 0, &cert) == 0 &&
	    tl_x509_cert_of_key(cert, key, why) == 0) {
		*have_cert = 1;
		goto out;
	}
	path_of(name, sizeof(name), gf, version, "csr");
	if (slurp(statefd, name, 0, &csr) == 0)
		goto out;	/* asked already: the same request */
	if ((rc = tl_x509_request_for(key, cn, sans, kr->nsans, &csr,
	    why)) != 0)
		goto out;
	rc = tn_file_put(statefd, name, csr, strlen(csr), NULL);
out:
	tl_secret_free(key);
	free(cert);
	free(csr);
	return rc;
}

int
tn_cert_csr(int statefd, const char *gf, uint64_t version, char **csr)
{
	char name[300];

	path_of(name, sizeof(name), gf, version, "csr");
	return slurp(statefd, name, 0, csr);
}

int
tn_cert_take(int statefd, const char *gf, uint64_t version,
    const char *cert, char *why)
{
	char name[300], *key = NULL;
	int rc;

	path_of(name, sizeof(name), gf, version, "key");
	if ((rc = slurp(statefd, name, 1, &key)) != 0) {
		snprintf(why, TL_WHY_MAX, "no key of this node's for it");
		return rc == ENOENT ? TL_EREFUSED : rc;
	}
	if ((rc = tl_x509_cert_of_key(cert, key, why)) == 0) {
		path_of(name, sizeof(name), gf, version, "cert");
		rc = tn_file_put(statefd, name, cert, strlen(cert), NULL);
		path_of(name, sizeof(name), gf, version, "csr");
		if (rc == 0)
			tn_file_del(statefd, name);
	}
	tl_secret_free(key);
	return rc;
}

int
tn_cert_files(int statefd, const char *gf, uint64_t version, char **key,
    char **cert)
{
	char name[300];
	int rc;

	*cert = NULL;
	path_of(name, sizeof(name), gf, version, "key");
	if ((rc = slurp(statefd, name, 1, key)) != 0)
		return rc;
	path_of(name, sizeof(name), gf, version, "cert");
	if ((rc = slurp(statefd, name, 0, cert)) != 0) {
		tl_secret_free(*key);
		*key = NULL;
	}
	return rc;
}

void
tn_cert_forget(int statefd, const char *gf, uint64_t version)
{
	static const char *const ext[] = { "key", "csr", "cert" };
	char name[300];
	size_t i;

	for (i = 0; i < 3; i++) {
		path_of(name, sizeof(name), gf, version, ext[i]);
		tn_file_del(statefd, name);
	}
}
