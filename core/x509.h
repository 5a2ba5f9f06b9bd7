/*
 * x509.h - the X.509 mechanics of a mesh CA (issue 25): a CA key and
 * its self-signed certificate, a private key and a signing request born
 * where the key will live, and a certificate issued for a request only
 * when the request asks for exactly what a policy allows.  OpenSSL does
 * the ASN.1; nothing here knows a provider, a grant or the log.  Linked
 * by what uses it (tally-node makes requests, tallyd signs); tally does
 * not, and so does not load libcrypto.
 *
 * Keys are ECDSA P-256.  A private key's PEM is returned in guarded
 * memory (tl_secret_alloc: wiped when freed with tl_secret_free, kept
 * out of core dumps); certificates and requests are public, returned
 * malloc'd (free).  On failure nothing is returned (every out-parameter
 * NULL) and why (TL_WHY_MAX bytes) says what was wrong in words.
 *
 * Errors: TL_EINVAL (an argument or a PEM that does not parse),
 * TL_EREFUSED (a request that asks for more or other than the policy
 * allows, or whose proof of possession fails; a CA key that is not the
 * certificate's), TL_EDRIVER (OpenSSL failed otherwise), ENOMEM.
 */
#ifndef TL_X509_H
#define TL_X509_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define TL_X509_CN_MAX		64	/* X.509's ub-common-name */
#define TL_X509_SERIAL_HEX	32	/* 16 random bytes */
#define TL_X509_SANS_MAX	16

/*
 * A new CA: a P-256 key and a certificate for it, signed by itself,
 * subject CN=cn, valid from now for days days, basic constraints
 * CA:TRUE with path length 0, key usage certificate and CRL signing.
 */
int	tl_x509_ca_make(const char *cn, unsigned days, char **key_pem,
	    char **cert_pem, char *why);

/*
 * A new P-256 key and a signing request for it: subject CN=cn alone,
 * subject alternative names sans (DNS names, or IP addresses when they
 * parse as one; n of them, at most TL_X509_SANS_MAX), signed with the
 * key (its proof of possession).
 */
int	tl_x509_request(const char *cn, const char *const *sans, size_t n,
	    char **key_pem, char **csr_pem, char *why);

/*
 * The same for a key made before (key_pem: a P-256 private key's PEM,
 * as tl_x509_key_new makes it): a node keeps its key while it waits for
 * the certificate, and asks again with the same key.
 */
int	tl_x509_key_new(char **key_pem, char *why);
int	tl_x509_request_for(const char *key_pem, const char *cn,
	    const char *const *sans, size_t n, char **csr_pem, char *why);
/*
 * 0 when cert_pem certifies the key key_pem (its public key is the
 * key's): a node takes no certificate for a key it does not hold.
 * TL_EINVAL for what does not parse, TL_EREFUSED for another key's.
 */
int	tl_x509_cert_of_key(const char *cert_pem, const char *key_pem,
	    char *why);

/*
 * What a request may ask for: exactly this CN and exactly these SANs
 * (in any order, none more, none fewer), and the certificate it gets:
 * valid for lifetime_s seconds from now (backdated by TL_X509_SKEW_S
 * for clocks a little behind), key usage digital signature, extended
 * key usage clientAuth, and serverAuth too when server is set.
 */
#define TL_X509_SKEW_S	300
struct tl_x509_policy {
	const char		*cn;
	const char *const	*sans;
	size_t			 nsans;
	uint64_t		 lifetime_s;
	int			 server;
};

/* What a certificate says of itself (tl_x509_sign, tl_x509_info). */
struct tl_x509_info {
	char		serial[TL_X509_SERIAL_HEX * 2 + 1];	/* hex */
	char		cn[TL_X509_CN_MAX + 1];
	int64_t		not_before, not_after;	/* seconds since the epoch */
};

/*
 * A certificate for the request csr_pem, signed by the CA (ca_key_pem
 * and ca_cert_pem, which must belong together), when the request's
 * signature holds and it asks for exactly what p allows; a random
 * serial.  info (may be NULL) gets what the certificate says.
 */
int	tl_x509_sign(const char *ca_key_pem, const char *ca_cert_pem,
	    const char *csr_pem, const struct tl_x509_policy *p,
	    char **cert_pem, struct tl_x509_info *info, char *why);

/*
 * Whether key_pem and cert_pem make a CA that can sign now (at now,
 * seconds since the epoch): both parse, the key is the certificate's,
 * the certificate says CA:TRUE (and keyCertSign when it has a key
 * usage), and now is within its validity (its start up to
 * TL_X509_SKEW_S ahead: a clock a little ahead of ours).  The key may be ECDSA or
 * RSA: an organisation's CA above the mesh's chooses its own.  info
 * (may be NULL) gets what the certificate says.  TL_EINVAL for what
 * does not parse, TL_EREFUSED for a pair that is not a usable CA.
 */
int	tl_x509_ca_check(const char *key_pem, const char *cert_pem,
	    int64_t now, struct tl_x509_info *info, char *why);

/*
 * The same with the CA parsed once (OpenSSL 3 decodes a PEM key in
 * hundreds of microseconds): tl_x509_ca_load checks that the key is the
 * certificate's (TL_EREFUSED) and keeps both, parsed, in *ca until
 * tl_x509_ca_free (NULL is nothing); tl_x509_ca_sign is tl_x509_sign
 * with them.  A loaded CA is read only: threads may share it.
 */
struct tl_x509_ca;
int	tl_x509_ca_load(const char *ca_key_pem, const char *ca_cert_pem,
	    struct tl_x509_ca **ca, char *why);
void	tl_x509_ca_free(struct tl_x509_ca *ca);
int	tl_x509_ca_sign(const struct tl_x509_ca *ca, const char *csr_pem,
	    const struct tl_x509_policy *p, char **cert_pem,
	    struct tl_x509_info *info, char *why);

/*
 * A certificate revocation list signed by ca (X.509 v2, PEM): each of
 * the n serials (hex, as tl_x509_info gives them) revoked at
 * this_update, the list's number (the CRL number extension, growing
 * with each list the CA publishes), valid from this_update until
 * next_update (seconds since the epoch).  TL_EINVAL for a serial that
 * is not hex or a next_update not after this_update; TL_EDRIVER when
 * libcrypto fails.
 */
int	tl_x509_ca_crl(const struct tl_x509_ca *ca, const char *const *serials,
	    size_t n, uint64_t number, int64_t this_update,
	    int64_t next_update, char **crl_pem, char *why);

/* What the certificate cert_pem says: serial, CN, validity. */
int	tl_x509_info(const char *cert_pem, struct tl_x509_info *info,
	    char *why);

/*
 * The certificate's subject as OpenSSL's one-line form ("/CN=..."),
 * which servers that pin an issuer compare a client certificate's with
 * (MariaDB's REQUIRE ISSUER), into out (cap bytes).  TL_EINVAL: not a
 * certificate; TL_ETOOBIG: longer than out; ENOMEM.
 */
int	tl_x509_subject_line(const char *cert_pem, char *out, size_t cap,
	    char *why);

/*
 * Whether the PEM bundle (len bytes, one or more certificates, text
 * between them ignored) holds the certificate cert_pem: 1, 0, or -1
 * when cert_pem is not a certificate (or out of memory).  What a
 * server's CA file is checked against (PostgreSQL's ssl_ca_file).
 */
int	tl_x509_bundle_has(const char *bundle, size_t len,
	    const char *cert_pem);

#endif /* TL_X509_H */
