/*
 * x509.c - the X.509 mechanics of a mesh CA (x509.h).
 *
 * Every name and address goes into a certificate or a request as a
 * typed ASN.1 value built here, never through OpenSSL's configuration
 * strings ("DNS:a,DNS:b"), where a comma in a hostile name would add a
 * name of its own.  Only constant extension values go through
 * X509V3_EXT_conf_nid.
 */

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/provider.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "core/x509.h"

static int
fail(char *why, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail(char *why, int rc, const char *fmt, ...)
{
	unsigned long e = ERR_peek_last_error();
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(why, TL_WHY_MAX, fmt, ap);
	va_end(ap);
	if (e != 0 && rc == TL_EDRIVER) {
		n = strlen(why);
		snprintf(why + n, TL_WHY_MAX - n, " (%s)",
		    ERR_reason_error_string(e) != NULL ?
		    ERR_reason_error_string(e) : "OpenSSL");
	}
	ERR_clear_error();
	return rc;
}

/* A BIO's contents, NUL-terminated: guarded memory if secret. */
static char *
bio_text(BIO *b, int secret)
{
	char *data, *out;
	long n = BIO_get_mem_data(b, &data);

	if (n < 0)
		return NULL;
	out = secret ? tl_secret_alloc((size_t)n + 1) : malloc((size_t)n + 1);
	if (out == NULL)
		return NULL;
	memcpy(out, data, (size_t)n);
	out[n] = '\0';
	return out;
}

static EVP_PKEY *
key_new(void)
{
	return EVP_EC_gen("P-256");
}

static char *
key_pem(EVP_PKEY *k)
{
	BIO *b = BIO_new(BIO_s_secmem());
	char *out = NULL;

	if (b != NULL && PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL,
	    NULL) == 1)
		out = bio_text(b, 1);
	BIO_free(b);
	return out;
}

static EVP_PKEY *
key_read(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *k = NULL;

	if (b != NULL)
		k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
	BIO_free(b);
	return k;
}

static X509 *
cert_read(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = NULL;

	if (b != NULL)
		x = PEM_read_bio_X509(b, NULL, NULL, NULL);
	BIO_free(b);
	return x;
}

static char *
cert_pem(X509 *x)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *out = NULL;

	if (b != NULL && PEM_write_bio_X509(b, x) == 1)
		out = bio_text(b, 0);
	BIO_free(b);
	return out;
}

/* CN=cn and nothing else. */
static X509_NAME *
name_cn(const char *cn)
{
	X509_NAME *nm = X509_NAME_new();

	if (nm != NULL && X509_NAME_add_entry_by_NID(nm, NID_commonName,
	    MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0) != 1) {
		X509_NAME_free(nm);
		nm = NULL;
	}
	return nm;
}

static int
cn_ok(const char *cn, char *why)
{
	size_t n = cn != NULL ? strlen(cn) : 0, i;

	if (n == 0 || n > TL_X509_CN_MAX)
		return fail(why, TL_EINVAL, "a common name is 1 to %d bytes",
		    TL_X509_CN_MAX);
	for (i = 0; i < n; i++)
		if ((unsigned char)cn[i] < 0x20 || cn[i] == 0x7f)
			return fail(why, TL_EINVAL, "a control character in "
			    "the common name");
	return 0;
}

/* One SAN: an IP address when it parses as one, else a DNS name. */
static GENERAL_NAME *
san_new(const char *s)
{
	GENERAL_NAME *gn = GENERAL_NAME_new();
	ASN1_OCTET_STRING *ip;
	ASN1_IA5STRING *dns;

	if (gn == NULL)
		return NULL;
	if ((ip = a2i_IPADDRESS(s)) != NULL) {
		GENERAL_NAME_set0_value(gn, GEN_IPADD, ip);
		return gn;
	}
	ERR_clear_error();
	if ((dns = ASN1_IA5STRING_new()) == NULL ||
	    ASN1_STRING_set(dns, s, -1) != 1) {
		ASN1_IA5STRING_free(dns);
		GENERAL_NAME_free(gn);
		return NULL;
	}
	GENERAL_NAME_set0_value(gn, GEN_DNS, dns);
	return gn;
}

static int
sans_ok(const char *const *sans, size_t n, char *why)
{
	size_t i, k;

	if (n > TL_X509_SANS_MAX || (n > 0 && sans == NULL))
		return fail(why, TL_EINVAL, "more than %d alternative names, "
		    "or none given for %zu", TL_X509_SANS_MAX, n);
	for (i = 0; i < n; i++) {
		k = sans[i] != NULL ? strlen(sans[i]) : 0;
		if (k == 0 || k > 253 || strspn(sans[i], "abcdefghijklmnopqrs"
		    "tuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:*") != k)
			return fail(why, TL_EINVAL, "alternative name %zu is "
			    "not a host name or an address", i + 1);
	}
	return 0;
}

static GENERAL_NAMES *
sans_new(const char *const *sans, size_t n)
{
	GENERAL_NAMES *gs = GENERAL_NAMES_new();
	GENERAL_NAME *gn;
	size_t i;

	for (i = 0; gs != NULL && i < n; i++)
		if ((gn = san_new(sans[i])) == NULL ||
		    sk_GENERAL_NAME_push(gs, gn) <= 0) {
			GENERAL_NAME_free(gn);
			GENERAL_NAMES_free(gs);
			gs = NULL;
		}
	return gs;
}

/* A constant extension value on x, issued by ca (x itself: self-signed). */
static int
ext_add(X509 *x, X509 *ca, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *e;
	int ok;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, ca, x, NULL, NULL, 0);
	if ((e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value)) == NULL)
		return 0;
	ok = X509_add_ext(x, e, -1) == 1;
	X509_EXTENSION_free(e);
	return ok;
}

/*
 * The request's public key into x as its encoding stands (algorithm,
 * parameters, key bits), not through an EVP_PKEY: X509_set_pubkey
 * encodes the key with OpenSSL 3's encoders and decodes it back, which
 * cost a certificate more than its signature and its request's
 * verification together.  The request's key was checked (req_key):
 * a named curve, whose parameter is an OID; anything else goes the
 * slow way.
 */
static int
pubkey_copy(X509 *x, X509_REQ *req, EVP_PKEY *k)
{
	X509_PUBKEY *src = X509_REQ_get_X509_PUBKEY(req);
	ASN1_OBJECT *alg_obj, *param = NULL, *obj = NULL;
	const unsigned char *bits;
	const void *pval;
	unsigned char *copy;
	X509_ALGOR *alg;
	int bl, ptype;

	if (src == NULL || X509_PUBKEY_get0_param(&alg_obj, &bits, &bl, &alg,
	    src) != 1 || bl <= 0)
		return X509_set_pubkey(x, k) == 1;
	X509_ALGOR_get0((const ASN1_OBJECT **)&alg_obj, &ptype, &pval, alg);
	if (ptype != V_ASN1_OBJECT)
		return X509_set_pubkey(x, k) == 1;
	copy = NULL;
	if ((param = OBJ_dup(pval)) == NULL ||
	    (obj = OBJ_dup(alg_obj)) == NULL ||
	    (copy = OPENSSL_memdup(bits, (size_t)bl)) == NULL ||
	    X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(x), obj,
	    V_ASN1_OBJECT, param, copy, bl) != 1) {
		ASN1_OBJECT_free(param);
		ASN1_OBJECT_free(obj);
		OPENSSL_free(copy);
		return 0;
	}
	return 1;
}

/* 16 random bytes, the top bit clear (a positive INTEGER). */
static int
serial_set(X509 *x)
{
	unsigned char r[TL_X509_SERIAL_HEX / 2];
	ASN1_INTEGER *ai;
	BIGNUM *bn;
	int ok;

	randombytes_buf(r, sizeof(r));
	r[0] &= 0x7f;
	r[0] |= 0x40;	/* always 16 bytes long */
	if ((bn = BN_bin2bn(r, sizeof(r), NULL)) == NULL)
		return 0;
	ai = BN_to_ASN1_INTEGER(bn, NULL);
	BN_free(bn);
	ok = ai != NULL && X509_set_serialNumber(x, ai) == 1;
	ASN1_INTEGER_free(ai);
	return ok;
}

static int
validity_set(X509 *x, int64_t from, int64_t until)
{
	return ASN1_TIME_set(X509_getm_notBefore(x), (time_t)from) != NULL &&
	    ASN1_TIME_set(X509_getm_notAfter(x), (time_t)until) != NULL;
}

int
tl_x509_ca_make(const char *cn, unsigned days, char **key_pemp,
    char **cert_pemp, char *why)
{
	EVP_PKEY *k = NULL;
	X509_NAME *nm = NULL;
	X509 *x = NULL;
	int64_t now = (int64_t)time(NULL);
	int rc;

	*key_pemp = *cert_pemp = NULL;
	if ((rc = cn_ok(cn, why)) != 0)
		return rc;
	if (days == 0 || days > 36500)
		return fail(why, TL_EINVAL, "a CA is valid for 1 to 36500 "
		    "days");
	rc = TL_EDRIVER;
	if ((k = key_new()) == NULL || (x = X509_new()) == NULL ||
	    (nm = name_cn(cn)) == NULL || X509_set_version(x, 2) != 1 ||
	    !serial_set(x) || X509_set_subject_name(x, nm) != 1 ||
	    X509_set_issuer_name(x, nm) != 1 || X509_set_pubkey(x, k) != 1 ||
	    !validity_set(x, now - TL_X509_SKEW_S, now +
	    (int64_t)days * 86400) ||
	    !ext_add(x, x, NID_basic_constraints, "critical,CA:TRUE,"
	    "pathlen:0") ||
	    !ext_add(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") ||
	    !ext_add(x, x, NID_subject_key_identifier, "hash") ||
	    !ext_add(x, x, NID_authority_key_identifier, "keyid:always") ||
	    X509_sign(x, k, EVP_sha256()) <= 0) {
		rc = fail(why, TL_EDRIVER, "cannot make the CA certificate");
		goto out;
	}
	if ((*key_pemp = key_pem(k)) == NULL ||
	    (*cert_pemp = cert_pem(x)) == NULL) {
		tl_secret_free(*key_pemp);
		*key_pemp = NULL;
		rc = fail(why, ENOMEM, "out of memory");
		goto out;
	}
	rc = 0;
out:
	X509_NAME_free(nm);
	X509_free(x);
	EVP_PKEY_free(k);
	return rc;
}

/*
 * k's public key into req.  A P-256 key goes in as its point, named
 * curve and algorithm, without an EVP_PKEY: X509_REQ_set_pubkey
 * encodes the key with OpenSSL 3's encoders and decodes it back, which
 * cost a node's request more than its key and its signature together
 * (pubkey_copy does the same for a certificate).
 */
static int
req_pubkey_set(X509_REQ *req, EVP_PKEY *k)
{
	char curve[64] = "";
	unsigned char *pt = NULL;
	size_t n = 0, cl = 0;

	if (EVP_PKEY_get_base_id(k) != EVP_PKEY_EC ||
	    EVP_PKEY_get_utf8_string_param(k, "group", curve, sizeof(curve),
	    &cl) != 1 || strcmp(curve, "prime256v1") != 0 ||
	    (n = EVP_PKEY_get1_encoded_public_key(k, &pt)) == 0) {
		ERR_clear_error();
		return X509_REQ_set_pubkey(req, k) == 1;
	}
	/* Takes pt; the two objects are OpenSSL's static ones. */
	if (X509_PUBKEY_set0_param(X509_REQ_get_X509_PUBKEY(req),
	    OBJ_nid2obj(NID_X9_62_id_ecPublicKey), V_ASN1_OBJECT,
	    OBJ_nid2obj(NID_X9_62_prime256v1), pt, (int)n) != 1) {
		OPENSSL_free(pt);
		return 0;
	}
	return 1;
}

/* A request for key k: CN=cn, sans; PEM into *csr_pemp. */
static int
request(EVP_PKEY *k, const char *cn, const char *const *sans, size_t n,
    char **csr_pemp, char *why)
{
	STACK_OF(X509_EXTENSION) *exts = NULL;
	GENERAL_NAMES *gs = NULL;
	X509_NAME *nm = NULL;
	X509_REQ *req = NULL;
	BIO *b = NULL;
	int rc;

	*csr_pemp = NULL;
	if ((rc = cn_ok(cn, why)) != 0 || (rc = sans_ok(sans, n, why)) != 0)
		return rc;
	if ((req = X509_REQ_new()) == NULL ||
	    (nm = name_cn(cn)) == NULL || X509_REQ_set_version(req, 0) != 1 ||
	    X509_REQ_set_subject_name(req, nm) != 1 ||
	    !req_pubkey_set(req, k)) {
		rc = fail(why, TL_EDRIVER, "cannot make the request");
		goto out;
	}
	if (n > 0 && ((gs = sans_new(sans, n)) == NULL ||
	    X509V3_add1_i2d(&exts, NID_subject_alt_name, gs, 0,
	    X509V3_ADD_DEFAULT) != 1 || X509_REQ_add_extensions(req,
	    exts) != 1)) {
		rc = fail(why, TL_EDRIVER, "cannot put the alternative names "
		    "in the request");
		goto out;
	}
	if (X509_REQ_sign(req, k, EVP_sha256()) <= 0 ||
	    (b = BIO_new(BIO_s_mem())) == NULL ||
	    PEM_write_bio_X509_REQ(b, req) != 1) {
		rc = fail(why, TL_EDRIVER, "cannot sign the request");
		goto out;
	}
	if ((*csr_pemp = bio_text(b, 0)) == NULL) {
		rc = fail(why, ENOMEM, "out of memory");
		goto out;
	}
	rc = 0;
out:
	BIO_free(b);
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	GENERAL_NAMES_free(gs);
	X509_NAME_free(nm);
	X509_REQ_free(req);
	return rc;
}

int
tl_x509_request(const char *cn, const char *const *sans, size_t n,
    char **key_pemp, char **csr_pemp, char *why)
{
	EVP_PKEY *k;
	int rc;

	*key_pemp = *csr_pemp = NULL;
	if ((k = key_new()) == NULL)
		return fail(why, TL_EDRIVER, "cannot make a key");
	if ((rc = request(k, cn, sans, n, csr_pemp, why)) == 0 &&
	    (*key_pemp = key_pem(k)) == NULL) {
		free(*csr_pemp);
		*csr_pemp = NULL;
		rc = fail(why, ENOMEM, "out of memory");
	}
	EVP_PKEY_free(k);
	return rc;
}

int
tl_x509_request_for(const char *key_pem, const char *cn,
    const char *const *sans, size_t n, char **csr_pemp, char *why)
{
	EVP_PKEY *k;
	int rc;

	*csr_pemp = NULL;
	if ((k = key_read(key_pem)) == NULL)
		return fail(why, TL_EINVAL, "the key does not parse");
	rc = request(k, cn, sans, n, csr_pemp, why);
	EVP_PKEY_free(k);
	return rc;
}

int
tl_x509_key_new(char **key_pemp, char *why)
{
	EVP_PKEY *k;

	if ((k = key_new()) == NULL)
		return fail(why, TL_EDRIVER, "cannot make a key");
	*key_pemp = key_pem(k);
	EVP_PKEY_free(k);
	return *key_pemp != NULL ? 0 : fail(why, ENOMEM, "out of memory");
}

int
tl_x509_cert_of_key(const char *cert_pem, const char *key_pem, char *why)
{
	EVP_PKEY *k = NULL;
	X509 *x = NULL;
	int rc = 0;

	if ((k = key_read(key_pem)) == NULL || (x = cert_read(cert_pem)) ==
	    NULL)
		rc = fail(why, TL_EINVAL, "the key or the certificate does not "
		    "parse");
	else if (X509_check_private_key(x, k) != 1)
		rc = fail(why, TL_EREFUSED, "the certificate is not for this "
		    "key");
	ERR_clear_error();
	X509_free(x);
	EVP_PKEY_free(k);
	return rc;
}

/* The request's subject is CN=p->cn and nothing else. */
static int
subject_ok(X509_REQ *req, const struct tl_x509_policy *p, char *why)
{
	const X509_NAME *nm = X509_REQ_get_subject_name(req);
	const X509_NAME_ENTRY *e;
	const ASN1_STRING *s;

	if (X509_NAME_entry_count(nm) != 1 ||
	    (e = X509_NAME_get_entry(nm, 0)) == NULL ||
	    OBJ_obj2nid(X509_NAME_ENTRY_get_object(e)) != NID_commonName ||
	    (s = X509_NAME_ENTRY_get_data(e)) == NULL ||
	    (size_t)ASN1_STRING_length(s) != strlen(p->cn) ||
	    memcmp(ASN1_STRING_get0_data(s), p->cn, strlen(p->cn)) != 0)
		return fail(why, TL_EREFUSED, "the request's subject is not "
		    "CN=%s alone", p->cn);
	return 0;
}

/* Does one of the policy's SANs, i not yet taken, equal gn? */
static int
san_match(const GENERAL_NAME *gn, const struct tl_x509_policy *p,
    unsigned char *taken)
{
	GENERAL_NAME *want;
	size_t i;
	int eq;

	for (i = 0; i < p->nsans; i++) {
		if (taken[i] || (want = san_new(p->sans[i])) == NULL)
			continue;
		eq = GENERAL_NAME_cmp((GENERAL_NAME *)gn, want) == 0;
		GENERAL_NAME_free(want);
		if (eq) {
			taken[i] = 1;
			return 1;
		}
	}
	return 0;
}

/*
 * The request's extensions: none but the SANs, which are exactly the
 * policy's (each once, in any order).
 */
static int
extensions_ok(X509_REQ *req, const struct tl_x509_policy *p, char *why)
{
	STACK_OF(X509_EXTENSION) *exts = X509_REQ_get_extensions(req);
	unsigned char taken[TL_X509_SANS_MAX] = { 0 };
	GENERAL_NAMES *gs = NULL;
	size_t matched = 0;
	int i, n, rc = 0;

	for (i = 0; exts != NULL && i < sk_X509_EXTENSION_num(exts); i++) {
		X509_EXTENSION *e = sk_X509_EXTENSION_value(exts, i);
		int nid = OBJ_obj2nid(X509_EXTENSION_get_object(e));

		if (nid != NID_subject_alt_name || gs != NULL) {
			rc = fail(why, TL_EREFUSED, "the request asks for an "
			    "extension the record does not give (%s)",
			    nid != NID_undef ? OBJ_nid2sn(nid) : "unknown");
			goto out;
		}
		if ((gs = X509V3_EXT_d2i(e)) == NULL) {
			rc = fail(why, TL_EREFUSED, "the request's alternative "
			    "names do not parse");
			goto out;
		}
	}
	n = gs != NULL ? sk_GENERAL_NAME_num(gs) : 0;
	for (i = 0; i < n; i++) {
		if (!san_match(sk_GENERAL_NAME_value(gs, i), p, taken)) {
			rc = fail(why, TL_EREFUSED, "the request asks for an "
			    "alternative name the record does not give "
			    "(name %d)", i + 1);
			goto out;
		}
		matched++;
	}
	if (matched != p->nsans)
		rc = fail(why, TL_EREFUSED, "the request lacks %zu of the "
		    "record's alternative names", p->nsans - matched);
out:
	GENERAL_NAMES_free(gs);
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	return rc;
}

/*
 * The request's key, P-256 as this CA issues, from its bits: a copy of
 * the CA's P-256 public key given the request's point (a third of the
 * cost of building the curve afresh).  Setting the point refuses one
 * not on the curve.  The request itself was parsed in the bare context,
 * where its key is not decoded.
 */
static int
req_key(const EVP_PKEY *p256, X509_REQ *req, EVP_PKEY **kp, char *why)
{
	X509_PUBKEY *pub = X509_REQ_get_X509_PUBKEY(req);
	ASN1_OBJECT *alg_obj;
	const unsigned char *bits;
	const void *pval;
	X509_ALGOR *alg;
	int bl, ptype;

	*kp = NULL;
	if (pub == NULL || X509_PUBKEY_get0_param(&alg_obj, &bits, &bl, &alg,
	    pub) != 1 || OBJ_obj2nid(alg_obj) != NID_X9_62_id_ecPublicKey)
		return fail(why, TL_EREFUSED, "the request's key is not an "
		    "ECDSA P-256 key");
	X509_ALGOR_get0(NULL, &ptype, &pval, alg);
	if (ptype != V_ASN1_OBJECT ||
	    OBJ_obj2nid(pval) != NID_X9_62_prime256v1 || bl <= 0)
		return fail(why, TL_EREFUSED, "the request's key is not an "
		    "ECDSA P-256 key");
	if ((*kp = EVP_PKEY_dup((EVP_PKEY *)p256)) == NULL)
		return fail(why, ENOMEM, "out of memory");
	if (EVP_PKEY_set1_encoded_public_key(*kp, bits, (size_t)bl) != 1) {
		EVP_PKEY_free(*kp);
		*kp = NULL;
		return fail(why, TL_EREFUSED, "the request's key is not a "
		    "P-256 point");
	}
	return 0;
}

/* A P-256 public key, any: the template req_key copies. */
static EVP_PKEY *
p256_template(void)
{
	EVP_PKEY *k = key_new(), *pub = NULL;
	EVP_PKEY_CTX *c = NULL;
	unsigned char *pt = NULL;
	OSSL_PARAM ps[3];
	size_t n;

	if (k != NULL && (n = EVP_PKEY_get1_encoded_public_key(k, &pt)) > 0 &&
	    (c = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL)) != NULL &&
	    EVP_PKEY_fromdata_init(c) == 1) {
		ps[0] = OSSL_PARAM_construct_utf8_string(
		    OSSL_PKEY_PARAM_GROUP_NAME, (char *)"prime256v1", 0);
		ps[1] = OSSL_PARAM_construct_octet_string(
		    OSSL_PKEY_PARAM_PUB_KEY, pt, n);
		ps[2] = OSSL_PARAM_construct_end();
		if (EVP_PKEY_fromdata(c, &pub, EVP_PKEY_PUBLIC_KEY, ps) != 1)
			pub = NULL;
	}
	OPENSSL_free(pt);
	EVP_PKEY_CTX_free(c);
	EVP_PKEY_free(k);
	return pub;
}

static int
info_of(X509 *x, struct tl_x509_info *info, char *why)
{
	const ASN1_INTEGER *ai = X509_get0_serialNumber(x);
	const X509_NAME *nm = X509_get_subject_name(x);
	struct tm tm;
	BIGNUM *bn;
	char *hex;
	int n;

	memset(info, 0, sizeof(*info));
	if ((bn = ASN1_INTEGER_to_BN(ai, NULL)) == NULL ||
	    (hex = BN_bn2hex(bn)) == NULL) {
		BN_free(bn);
		return fail(why, TL_EDRIVER, "cannot read the serial");
	}
	snprintf(info->serial, sizeof(info->serial), "%s", hex);
	OPENSSL_free(hex);
	BN_free(bn);
	n = X509_NAME_get_text_by_NID(nm, NID_commonName, info->cn,
	    sizeof(info->cn));
	if (n < 0)
		info->cn[0] = '\0';
	if (ASN1_TIME_to_tm(X509_get0_notBefore(x), &tm) != 1)
		return fail(why, TL_EINVAL, "the certificate's notBefore does "
		    "not parse");
	info->not_before = (int64_t)timegm(&tm);
	if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) != 1)
		return fail(why, TL_EINVAL, "the certificate's notAfter does "
		    "not parse");
	info->not_after = (int64_t)timegm(&tm);
	return 0;
}

/*
 * A CA session's parsed state.  bare is a library context with the null
 * provider alone: OpenSSL 3.0 decodes the key of every request it
 * parses through a decoder context built afresh (about 110 us, four
 * times a signature); parsed there, a request's key stays in its bits
 * and req_key imports it into a copy of p256.  The constant extensions
 * and the signing context are built once.
 */
enum { EXT_BASIC, EXT_USAGE, EXT_CLIENT, EXT_SERVER, EXT_AKID, EXT_N };

struct tl_x509_ca {
	EVP_PKEY	*key;
	X509		*cert;
	OSSL_LIB_CTX	*bare;
	OSSL_PROVIDER	*null;
	EVP_PKEY	*p256;
	EVP_MD_CTX	*signer;	/* copied for each signature */
	X509_EXTENSION	*ext[EXT_N];
};

/* A constant extension value for certificates ca issues. */
static X509_EXTENSION *
ext_const(X509 *ca, int nid, const char *value)
{
	X509V3_CTX ctx;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, ca, NULL, NULL, NULL, 0);
	return X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
}

int
tl_x509_ca_load(const char *ca_key_pem, const char *ca_cert_pem,
    struct tl_x509_ca **out, char *why)
{
	static const struct { int nid; const char *value; } exts[EXT_N] = {
		[EXT_BASIC] = { NID_basic_constraints, "critical,CA:FALSE" },
		[EXT_USAGE] = { NID_key_usage, "critical,digitalSignature" },
		[EXT_CLIENT] = { NID_ext_key_usage, "clientAuth" },
		[EXT_SERVER] = { NID_ext_key_usage, "clientAuth,serverAuth" },
		[EXT_AKID] = { NID_authority_key_identifier, "keyid:always" },
	};
	struct tl_x509_ca *ca;
	int rc, i;

	*out = NULL;
	if ((ca = calloc(1, sizeof(*ca))) == NULL)
		return fail(why, ENOMEM, "out of memory");
	if ((ca->key = key_read(ca_key_pem)) == NULL ||
	    (ca->cert = cert_read(ca_cert_pem)) == NULL) {
		rc = fail(why, TL_EINVAL, "the CA's key or certificate does "
		    "not parse");
		goto bad;
	}
	if (X509_check_private_key(ca->cert, ca->key) != 1) {
		rc = fail(why, TL_EREFUSED, "the CA key is not the CA "
		    "certificate's");
		goto bad;
	}
	rc = TL_EDRIVER;
	if ((ca->bare = OSSL_LIB_CTX_new()) == NULL ||
	    (ca->null = OSSL_PROVIDER_load(ca->bare, "null")) == NULL ||
	    (ca->p256 = p256_template()) == NULL ||
	    (ca->signer = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestSignInit(ca->signer, NULL, EVP_sha256(), NULL,
	    ca->key) != 1) {
		fail(why, rc, "cannot make a library context");
		goto bad;
	}
	for (i = 0; i < EXT_N; i++)
		if ((ca->ext[i] = ext_const(ca->cert, exts[i].nid,
		    exts[i].value)) == NULL) {
			fail(why, rc, "cannot make the certificates' "
			    "extensions");
			goto bad;
		}
	*out = ca;
	return 0;
bad:
	tl_x509_ca_free(ca);
	return rc;
}

void
tl_x509_ca_free(struct tl_x509_ca *ca)
{
	int i;

	if (ca == NULL)
		return;
	for (i = 0; i < EXT_N; i++)
		X509_EXTENSION_free(ca->ext[i]);
	X509_free(ca->cert);
	EVP_PKEY_free(ca->key);
	EVP_PKEY_free(ca->p256);
	EVP_MD_CTX_free(ca->signer);
	if (ca->null != NULL)
		OSSL_PROVIDER_unload(ca->null);
	OSSL_LIB_CTX_free(ca->bare);
	free(ca);
}

/* A request in PEM, parsed in the bare context (its key not decoded). */
static X509_REQ *
req_read(const struct tl_x509_ca *c, const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	unsigned char *der = NULL;
	const unsigned char *p;
	X509_REQ *req = NULL;
	long n = 0;

	if (b != NULL && PEM_bytes_read_bio(&der, &n, NULL,
	    PEM_STRING_X509_REQ, b, NULL, NULL) == 1) {
		p = der;
		req = (X509_REQ *)ASN1_item_d2i_ex(NULL, &p, n,
		    ASN1_ITEM_rptr(X509_REQ), c->bare, NULL);
		/* One request, nothing after it. */
		if (req != NULL && p != der + n) {
			X509_REQ_free(req);
			req = NULL;
		}
	}
	OPENSSL_free(der);
	BIO_free(b);
	return req;
}

/* The key identifier of x's key and the CA's constant extensions. */
static int
exts_add(X509 *x, const struct tl_x509_ca *c, int server)
{
	ASN1_OCTET_STRING *id = NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int ok;

	if (X509_add_ext(x, c->ext[EXT_BASIC], -1) != 1 ||
	    X509_add_ext(x, c->ext[EXT_USAGE], -1) != 1 ||
	    X509_add_ext(x, c->ext[server ? EXT_SERVER : EXT_CLIENT],
	    -1) != 1)
		return 0;
	/* As X509V3_EXT_conf's "hash": SHA-1 of the key's bits (RFC 5280). */
	ok = X509_pubkey_digest(x, EVP_sha1(), md, &mdlen) == 1 &&
	    (id = ASN1_OCTET_STRING_new()) != NULL &&
	    ASN1_OCTET_STRING_set(id, md, (int)mdlen) == 1 &&
	    X509_add1_ext_i2d(x, NID_subject_key_identifier, id, 0,
	    X509V3_ADD_DEFAULT) == 1 &&
	    X509_add_ext(x, c->ext[EXT_AKID], -1) == 1;
	ASN1_OCTET_STRING_free(id);
	return ok;
}

int
tl_x509_ca_sign(const struct tl_x509_ca *c, const char *csr_pem,
    const struct tl_x509_policy *p, char **cert_pemp,
    struct tl_x509_info *info, char *why)
{
	GENERAL_NAMES *gs = NULL;
	EVP_PKEY *k = NULL;
	EVP_MD_CTX *md = NULL;
	X509_REQ *req = NULL;
	X509 *x = NULL, *ca = c->cert;
	int64_t now = (int64_t)time(NULL);
	int rc;

	*cert_pemp = NULL;
	if (p == NULL)
		return fail(why, TL_EINVAL, "no policy");
	if ((rc = cn_ok(p->cn, why)) != 0 ||
	    (rc = sans_ok(p->sans, p->nsans, why)) != 0)
		return rc;
	if (p->lifetime_s == 0 || p->lifetime_s > 3650ull * 86400)
		return fail(why, TL_EINVAL, "a certificate's lifetime is 1 s "
		    "to 10 years");
	if ((req = req_read(c, csr_pem)) == NULL) {
		rc = fail(why, TL_EINVAL, "the request does not parse");
		goto out;
	}
	/* Proof of possession: the request is signed by its own key. */
	if ((rc = req_key(c->p256, req, &k, why)) != 0)
		goto out;
	if (X509_REQ_verify_ex(req, k, NULL, NULL) != 1) {
		rc = fail(why, TL_EREFUSED, "the request's signature does not "
		    "verify with its key");
		goto out;
	}
	if ((rc = subject_ok(req, p, why)) != 0 ||
	    (rc = extensions_ok(req, p, why)) != 0)
		goto out;
	rc = TL_EDRIVER;
	/* The subject written in place: X509_set_subject_name copies. */
	if ((x = X509_new()) == NULL ||
	    X509_NAME_add_entry_by_NID(X509_get_subject_name(x),
	    NID_commonName, MBSTRING_UTF8, (const unsigned char *)p->cn, -1,
	    -1, 0) != 1 ||
	    X509_set_version(x, 2) != 1 || !serial_set(x) ||
	    X509_set_issuer_name(x, X509_get_subject_name(ca)) != 1 ||
	    !pubkey_copy(x, req, k) ||
	    !validity_set(x, now - TL_X509_SKEW_S, now +
	    (int64_t)p->lifetime_s) || !exts_add(x, c, p->server)) {
		rc = fail(why, TL_EDRIVER, "cannot make the certificate");
		goto out;
	}
	/* The policy's names, as the policy has them. */
	if (p->nsans > 0 && ((gs = sans_new(p->sans, p->nsans)) == NULL ||
	    X509_add1_ext_i2d(x, NID_subject_alt_name, gs, 0,
	    X509V3_ADD_DEFAULT) != 1)) {
		rc = fail(why, TL_EDRIVER, "cannot put the alternative names "
		    "in the certificate");
		goto out;
	}
	if ((md = EVP_MD_CTX_new()) == NULL ||
	    EVP_MD_CTX_copy_ex(md, c->signer) != 1 ||
	    X509_sign_ctx(x, md) <= 0) {
		rc = fail(why, TL_EDRIVER, "cannot sign the certificate");
		goto out;
	}
	if (info != NULL && (rc = info_of(x, info, why)) != 0)
		goto out;
	if ((*cert_pemp = cert_pem(x)) == NULL) {
		rc = fail(why, ENOMEM, "out of memory");
		goto out;
	}
	rc = 0;
out:
	GENERAL_NAMES_free(gs);
	EVP_MD_CTX_free(md);
	X509_free(x);
	X509_REQ_free(req);
	EVP_PKEY_free(k);
	return rc;
}

/* A hex serial (at most 20 bytes: RFC 5280) as an ASN1_INTEGER. */
static ASN1_INTEGER *
serial_of(const char *hex)
{
	ASN1_INTEGER *ai;
	BIGNUM *bn = NULL;
	size_t n = strlen(hex);

	if (n == 0 || n > 40 || strspn(hex, "0123456789abcdefABCDEF") != n ||
	    BN_hex2bn(&bn, hex) != (int)n)
		return NULL;
	ai = BN_to_ASN1_INTEGER(bn, NULL);
	BN_free(bn);
	return ai;
}

int
tl_x509_ca_crl(const struct tl_x509_ca *c, const char *const *serials,
    size_t n, uint64_t number, int64_t this_update, int64_t next_update,
    char **crl_pemp, char *why)
{
	X509_CRL *crl = NULL;
	ASN1_TIME *tu = NULL, *nu = NULL;
	ASN1_INTEGER *num = NULL;
	X509V3_CTX ctx;
	X509_EXTENSION *e;
	BIO *b = NULL;
	size_t i;
	int rc = TL_EDRIVER;

	*crl_pemp = NULL;
	if (next_update <= this_update)
		return fail(why, TL_EINVAL, "a CRL's next update is after "
		    "this one");
	if ((crl = X509_CRL_new()) == NULL ||
	    X509_CRL_set_version(crl, 1) != 1 ||	/* v2 */
	    X509_CRL_set_issuer_name(crl,
	    X509_get_subject_name(c->cert)) != 1 ||
	    (tu = ASN1_TIME_set(NULL, (time_t)this_update)) == NULL ||
	    (nu = ASN1_TIME_set(NULL, (time_t)next_update)) == NULL ||
	    X509_CRL_set1_lastUpdate(crl, tu) != 1 ||
	    X509_CRL_set1_nextUpdate(crl, nu) != 1) {
		fail(why, rc, "cannot make the CRL");
		goto out;
	}
	for (i = 0; i < n; i++) {
		X509_REVOKED *r;
		ASN1_INTEGER *sn;

		if ((sn = serial_of(serials[i])) == NULL) {
			rc = fail(why, TL_EINVAL, "serial %zu is not a "
			    "certificate's", i + 1);
			goto out;
		}
		if ((r = X509_REVOKED_new()) == NULL ||
		    X509_REVOKED_set_serialNumber(r, sn) != 1 ||
		    X509_REVOKED_set_revocationDate(r, tu) != 1 ||
		    X509_CRL_add0_revoked(crl, r) != 1) {
			X509_REVOKED_free(r);
			ASN1_INTEGER_free(sn);
			fail(why, rc, "cannot list a serial in the CRL");
			goto out;
		}
		ASN1_INTEGER_free(sn);
	}
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, c->cert, NULL, NULL, crl, 0);
	if ((num = ASN1_INTEGER_new()) == NULL ||
	    ASN1_INTEGER_set_uint64(num, number) != 1 ||
	    X509_CRL_add1_ext_i2d(crl, NID_crl_number, num, 0, 0) != 1 ||
	    (e = X509V3_EXT_conf_nid(NULL, &ctx,
	    NID_authority_key_identifier, "keyid:always")) == NULL) {
		fail(why, rc, "cannot put its number in the CRL");
		goto out;
	}
	i = X509_CRL_add_ext(crl, e, -1) == 1;
	X509_EXTENSION_free(e);
	if (!i || X509_CRL_sort(crl) != 1 ||
	    X509_CRL_sign(crl, c->key, EVP_sha256()) <= 0) {
		fail(why, rc, "cannot sign the CRL");
		goto out;
	}
	if ((b = BIO_new(BIO_s_mem())) == NULL ||
	    PEM_write_bio_X509_CRL(b, crl) != 1 ||
	    (*crl_pemp = bio_text(b, 0)) == NULL) {
		rc = fail(why, ENOMEM, "out of memory");
		goto out;
	}
	rc = 0;
out:
	BIO_free(b);
	ASN1_INTEGER_free(num);
	ASN1_TIME_free(tu);
	ASN1_TIME_free(nu);
	X509_CRL_free(crl);
	return rc;
}

int
tl_x509_sign(const char *ca_key_pem, const char *ca_cert_pem,
    const char *csr_pem, const struct tl_x509_policy *p, char **cert_pemp,
    struct tl_x509_info *info, char *why)
{
	struct tl_x509_ca *ca;
	int rc;

	*cert_pemp = NULL;
	if ((rc = tl_x509_ca_load(ca_key_pem, ca_cert_pem, &ca, why)) != 0)
		return rc;
	rc = tl_x509_ca_sign(ca, csr_pem, p, cert_pemp, info, why);
	tl_x509_ca_free(ca);
	return rc;
}

int
tl_x509_ca_check(const char *key_pem, const char *cert_pem, int64_t now,
    struct tl_x509_info *info, char *why)
{
	struct tl_x509_info own;
	EVP_PKEY *k = NULL;
	X509 *x = NULL;
	int rc;

	if (info == NULL)
		info = &own;
	memset(info, 0, sizeof(*info));
	if (key_pem == NULL || cert_pem == NULL ||
	    (k = key_read(key_pem)) == NULL) {
		rc = fail(why, TL_EINVAL, "the CA key does not parse (a PEM "
		    "private key, unencrypted)");
		goto out;
	}
	if ((x = cert_read(cert_pem)) == NULL) {
		rc = fail(why, TL_EINVAL, "the CA certificate does not parse "
		    "(PEM)");
		goto out;
	}
	if ((rc = info_of(x, info, why)) != 0)
		goto out;
	if (X509_check_private_key(x, k) != 1) {
		rc = fail(why, TL_EREFUSED, "the CA key is not the key of the "
		    "CA certificate (CN=%s)", info->cn);
		goto out;
	}
	/* 1: CA:TRUE (with keyCertSign, when a key usage is there). */
	if (X509_check_ca(x) != 1) {
		rc = fail(why, TL_EREFUSED, "the certificate CN=%s is not a "
		    "CA's (no basic constraints CA:TRUE, or a key usage "
		    "without keyCertSign)", info->cn);
		goto out;
	}
	/* A CA made a moment ago on a clock a little ahead is valid. */
	if (now + TL_X509_SKEW_S < info->not_before ||
	    now >= info->not_after) {
		rc = fail(why, TL_EREFUSED, "the CA certificate CN=%s is not "
		    "valid now (valid from %lld to %lld, seconds since the "
		    "epoch)", info->cn, (long long)info->not_before,
		    (long long)info->not_after);
		goto out;
	}
	rc = 0;
out:
	ERR_clear_error();
	X509_free(x);
	EVP_PKEY_free(k);
	return rc;
}

int
tl_x509_info(const char *pem, struct tl_x509_info *info, char *why)
{
	X509 *x;
	int rc;

	memset(info, 0, sizeof(*info));
	if ((x = cert_read(pem)) == NULL)
		return fail(why, TL_EINVAL, "the certificate does not parse");
	rc = info_of(x, info, why);
	X509_free(x);
	return rc;
}

int
tl_x509_subject_line(const char *pem, char *out, size_t cap, char *why)
{
	X509 *x;
	char *s;
	int rc = 0;

	out[0] = '\0';
	if ((x = cert_read(pem)) == NULL)
		return fail(why, TL_EINVAL, "the certificate does not parse");
	if ((s = X509_NAME_oneline(X509_get_subject_name(x), NULL, 0)) ==
	    NULL)
		rc = fail(why, ENOMEM, "out of memory");
	else if (strlen(s) >= cap)
		rc = fail(why, TL_ETOOBIG, "the certificate's subject is "
		    "longer than %zu bytes", cap - 1);
	else
		memcpy(out, s, strlen(s) + 1);
	OPENSSL_free(s);
	X509_free(x);
	return rc;
}

int
tl_x509_bundle_has(const char *bundle, size_t len, const char *cert_pem)
{
	BIO *b;
	X509 *want, *x;
	int found = 0;

	if ((want = cert_read(cert_pem)) == NULL)
		return -1;
	if (len > INT_MAX || (b = BIO_new_mem_buf(bundle, (int)len)) ==
	    NULL) {
		X509_free(want);
		return -1;
	}
	while (!found && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) !=
	    NULL) {
		found = X509_cmp(x, want) == 0;
		X509_free(x);
	}
	ERR_clear_error();	/* the end of the bundle reads as an error */
	BIO_free(b);
	X509_free(want);
	return found;
}
