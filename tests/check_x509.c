/*
 * check_x509.c - the mesh CA's X.509 mechanics (core/x509.h): a CA made
 * and checked as a CA; a key and request made, signed under a policy,
 * and the certificate verified against the CA by OpenSSL (in process,
 * and by `openssl verify` as a verifier outside tally would); what the
 * certificate carries (subject, SANs, key and extended key usage,
 * validity, serial); and every request that asks for more or other than
 * the policy allows refused: another CN, a SAN more or less, another
 * extension, a signature that is not the request's key's, a key of
 * another kind; hostile names refused before anything is built.
 */
#define _GNU_SOURCE

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "core/x509.h"
#include "tests/lib/tl_test.h"

static char *ca_key, *ca_cert;
static char why[TL_WHY_MAX];

static const char *const sans2[] = { "db.example", "10.0.0.5" };

static void
setup(void)
{
	ck_assert_int_eq(sodium_init() < 0, 0);
	ck_assert_msg(tl_x509_ca_make("tally mesh 0123", 365, &ca_key,
	    &ca_cert, why) == 0, "ca: %s", why);
}

static void
teardown(void)
{
	tl_secret_free(ca_key);
	free(ca_cert);
	ca_key = ca_cert = NULL;
}

static X509 *
x509_of(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);

	BIO_free(b);
	ck_assert_ptr_nonnull(x);
	return x;
}

/* Does the CA's certificate verify cert for purpose (X509_PURPOSE_*)? */
static int
verifies(const char *cert, int purpose)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509 *ca = x509_of(ca_cert), *x = x509_of(cert);
	int ok;

	X509_STORE_add_cert(st, ca);
	X509_STORE_CTX_init(ctx, st, x, NULL);
	X509_STORE_CTX_set_purpose(ctx, purpose);
	ok = X509_verify_cert(ctx) == 1;
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	X509_free(ca);
	X509_free(x);
	return ok;
}

static struct tl_x509_policy
policy(const char *cn, const char *const *sans, size_t n)
{
	struct tl_x509_policy p = { cn, sans, n, 86400, 0 };

	return p;
}

/* A request for cn and sans, signed under p: the rc; *cert if issued. */
static int
issue(const char *cn, const char *const *sans, size_t n,
    const struct tl_x509_policy *p, char **cert, struct tl_x509_info *info)
{
	char *key = NULL, *csr = NULL;
	int rc;

	ck_assert_msg(tl_x509_request(cn, sans, n, &key, &csr, why) == 0,
	    "request: %s", why);
	ck_assert_ptr_nonnull(strstr(key, "PRIVATE KEY"));
	rc = tl_x509_sign(ca_key, ca_cert, csr, p, cert, info, why);
	tl_secret_free(key);
	free(csr);
	return rc;
}

START_TEST(test_ca)
{
	X509 *x = x509_of(ca_cert);
	struct tl_x509_info in;

	ck_assert_int_eq(X509_check_ca(x), 1);
	ck_assert_int_eq(X509_check_issued(x, x), X509_V_OK);
	ck_assert_int_eq(tl_x509_info(ca_cert, &in, why), 0);
	ck_assert_str_eq(in.cn, "tally mesh 0123");
	ck_assert_int_eq(in.not_after - in.not_before,
	    365 * 86400 + TL_X509_SKEW_S);
	ck_assert_ptr_nonnull(strstr(ca_key, "BEGIN PRIVATE KEY"));
	X509_free(x);
}
END_TEST

/*
 * A CA to sign with: the pair made here; an organisation's RSA CA made
 * by openssl; refused: another CA's key, a leaf certificate, a time
 * outside the validity, a key that does not parse.
 */
START_TEST(test_ca_check)
{
	struct tl_x509_policy p = policy("app-db_v1", sans2, 2);
	struct tl_x509_info in;
	char *k2, *c2, *leaf = NULL, dir[] = "/tmp/tl-x509-XXXXXX", cmd[600];
	char *rkey, *rcert;
	int64_t now = (int64_t)time(NULL);
	size_t n;
	FILE *fp;

	ck_assert_msg(tl_x509_ca_check(ca_key, ca_cert, now, &in, why) == 0,
	    "%s", why);
	ck_assert_str_eq(in.cn, "tally mesh 0123");
	ck_assert_int_eq(tl_x509_ca_make("another", 30, &k2, &c2, why), 0);
	ck_assert_int_eq(tl_x509_ca_check(k2, ca_cert, now, NULL, why),
	    TL_EREFUSED);
	ck_assert_ptr_nonnull(strstr(why, "not the key"));
	ck_assert_int_eq(tl_x509_ca_check(ca_key, ca_cert, in.not_after, NULL,
	    why), TL_EREFUSED);
	ck_assert_ptr_nonnull(strstr(why, "not valid now"));
	ck_assert_int_eq(tl_x509_ca_check(ca_key, ca_cert, in.not_before -
	    TL_X509_SKEW_S - 1, NULL, why), TL_EREFUSED);
	ck_assert_int_eq(tl_x509_ca_check(ca_key, ca_cert, in.not_before -
	    TL_X509_SKEW_S, NULL, why), 0);
	ck_assert_int_eq(tl_x509_ca_check("junk", ca_cert, now, NULL, why),
	    TL_EINVAL);
	ck_assert_int_eq(tl_x509_ca_check(ca_key, "junk", now, NULL, why),
	    TL_EINVAL);
	/* A leaf with its own key: a pair, but not a CA. */
	{
		char *lk, *csr;

		ck_assert_int_eq(tl_x509_request("app-db_v1", sans2, 2, &lk,
		    &csr, why), 0);
		ck_assert_int_eq(tl_x509_sign(ca_key, ca_cert, csr, &p, &leaf,
		    NULL, why), 0);
		ck_assert_int_eq(tl_x509_ca_check(lk, leaf, now, NULL, why),
		    TL_EREFUSED);
		ck_assert_ptr_nonnull(strstr(why, "not a CA"));
		tl_secret_free(lk);
		free(csr);
	}
	/* An organisation's CA: RSA, made by openssl, signs for the mesh. */
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "openssl req -x509 -newkey rsa:2048 "
	    "-nodes -keyout %s/k.pem -out %s/c.pem -days 30 -subj "
	    "'/O=Example/CN=Example Org CA' -addext "
	    "basicConstraints=critical,CA:TRUE -addext "
	    "keyUsage=critical,keyCertSign,cRLSign 2>/dev/null", dir, dir);
	ck_assert_int_eq(system(cmd), 0);
	rkey = calloc(1, 8192);
	rcert = calloc(1, 8192);
	snprintf(cmd, sizeof(cmd), "%s/k.pem", dir);
	ck_assert_ptr_nonnull(fp = fopen(cmd, "r"));
	n = fread(rkey, 1, 8191, fp);
	fclose(fp);
	ck_assert_uint_gt(n, 0);
	snprintf(cmd, sizeof(cmd), "%s/c.pem", dir);
	ck_assert_ptr_nonnull(fp = fopen(cmd, "r"));
	n = fread(rcert, 1, 8191, fp);
	fclose(fp);
	ck_assert_uint_gt(n, 0);
	ck_assert_msg(tl_x509_ca_check(rkey, rcert, now, &in, why) == 0, "%s",
	    why);
	ck_assert_str_eq(in.cn, "Example Org CA");
	/* ...and signs under it. */
	{
		char *lk, *csr, *c3 = NULL;

		ck_assert_int_eq(tl_x509_request("app-db_v1", sans2, 2, &lk,
		    &csr, why), 0);
		ck_assert_msg(tl_x509_sign(rkey, rcert, csr, &p, &c3, &in,
		    why) == 0, "%s", why);
		ck_assert_str_eq(in.cn, "app-db_v1");
		tl_secret_free(lk);
		free(csr);
		free(c3);
	}
	free(leaf);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	tl_secret_wipe(rkey, 8192);
	free(rkey);
	free(rcert);
	tl_secret_free(k2);
	free(c2);
}
END_TEST

/*
 * A key kept while its certificate is awaited: asked for again with the
 * same key, signed, and the certificate is that key's and no other's.
 */
START_TEST(test_request_for)
{
	struct tl_x509_policy p = policy("app-db_v1", sans2, 2);
	char *k, *k2, *csr, *csr2, *cert;

	ck_assert_int_eq(tl_x509_key_new(&k, why), 0);
	ck_assert_int_eq(tl_x509_key_new(&k2, why), 0);
	ck_assert_int_eq(tl_x509_request_for(k, "app-db_v1", sans2, 2, &csr,
	    why), 0);
	ck_assert_int_eq(tl_x509_request_for(k, "app-db_v1", sans2, 2, &csr2,
	    why), 0);
	ck_assert_msg(tl_x509_sign(ca_key, ca_cert, csr2, &p, &cert, NULL,
	    why) == 0, "%s", why);
	ck_assert_int_eq(tl_x509_cert_of_key(cert, k, why), 0);
	ck_assert_int_eq(tl_x509_cert_of_key(cert, k2, why), TL_EREFUSED);
	ck_assert_int_eq(tl_x509_cert_of_key("junk", k, why), TL_EINVAL);
	free(csr2);
	ck_assert_int_eq(tl_x509_request_for("junk", "cn", NULL, 0, &csr2,
	    why), TL_EINVAL);
	ck_assert_ptr_null(csr2);
	tl_secret_free(k);
	tl_secret_free(k2);
	free(csr);
	free(cert);
}
END_TEST

START_TEST(test_issue)
{
	struct tl_x509_policy p = policy("app-db_v1", sans2, 2);
	struct tl_x509_info in, again;
	const char *const swapped[] = { "10.0.0.5", "db.example" };
	char *cert = NULL, *cert2 = NULL;
	GENERAL_NAMES *gs;
	X509 *x;
	time_t now = time(NULL);

	/* The SANs in another order are the same SANs. */
	ck_assert_msg(issue("app-db_v1", swapped, 2, &p, &cert, &in) == 0,
	    "sign: %s", why);
	ck_assert_int_eq(verifies(cert, X509_PURPOSE_SSL_CLIENT), 1);
	/* clientAuth only: not a server's certificate. */
	ck_assert_int_eq(verifies(cert, X509_PURPOSE_SSL_SERVER), 0);
	x = x509_of(cert);
	ck_assert_int_eq(X509_check_ca(x), 0);
	ck_assert_uint_eq(X509_get_key_usage(x), KU_DIGITAL_SIGNATURE);
	ck_assert_uint_eq(X509_get_extended_key_usage(x), XKU_SSL_CLIENT);
	ck_assert_int_eq(X509_check_host(x, "db.example", 0, 0, NULL), 1);
	ck_assert_int_eq(X509_check_ip_asc(x, "10.0.0.5", 0), 1);
	gs = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	ck_assert_int_eq(sk_GENERAL_NAME_num(gs), 2);
	GENERAL_NAMES_free(gs);
	X509_free(x);
	ck_assert_str_eq(in.cn, "app-db_v1");
	ck_assert_uint_eq(strlen(in.serial), TL_X509_SERIAL_HEX);
	ck_assert_int_eq(in.not_after - in.not_before,
	    86400 + TL_X509_SKEW_S);
	ck_assert(in.not_before <= now - TL_X509_SKEW_S + 5 &&
	    in.not_before >= now - TL_X509_SKEW_S - 5);
	ck_assert_int_eq(tl_x509_info(cert, &again, why), 0);
	ck_assert_str_eq(again.serial, in.serial);
	ck_assert_int_eq(again.not_after, in.not_after);

	/* Each certificate its own serial. */
	ck_assert_int_eq(issue("app-db_v1", sans2, 2, &p, &cert2, &again), 0);
	ck_assert_str_ne(again.serial, in.serial);
	free(cert2);

	/* A server's: serverAuth too. */
	p.server = 1;
	ck_assert_int_eq(issue("app-db_v1", sans2, 2, &p, &cert2, NULL), 0);
	ck_assert_int_eq(verifies(cert2, X509_PURPOSE_SSL_SERVER), 1);
	free(cert2);
	free(cert);
}
END_TEST

/* A verifier outside tally: openssl verify against the CA's file. */
START_TEST(test_openssl_verify)
{
	struct tl_x509_policy p = policy("app-db_v1", sans2, 2);
	char *cert = NULL, *dir = tl_test_tmpdir("check_x509");
	char cap[4200], cp[4200], cmd[9000];
	FILE *fp;

	ck_assert_int_eq(issue("app-db_v1", sans2, 2, &p, &cert, NULL), 0);
	snprintf(cap, sizeof(cap), "%s/ca.pem", dir);
	snprintf(cp, sizeof(cp), "%s/cert.pem", dir);
	ck_assert_ptr_nonnull(fp = fopen(cap, "w"));
	fputs(ca_cert, fp);
	fclose(fp);
	ck_assert_ptr_nonnull(fp = fopen(cp, "w"));
	fputs(cert, fp);
	fclose(fp);
	snprintf(cmd, sizeof(cmd), "openssl verify -purpose sslclient "
	    "-CAfile '%s' '%s' >/dev/null 2>&1", cap, cp);
	ck_assert_int_eq(system(cmd), 0);
	/* The control: the same certificate under another CA fails. */
	teardown();
	setup();
	ck_assert_ptr_nonnull(fp = fopen(cap, "w"));
	fputs(ca_cert, fp);
	fclose(fp);
	ck_assert_int_ne(system(cmd), 0);
	free(cert);
	tl_test_tmpdir_done(dir);
}
END_TEST

START_TEST(test_refused)
{
	struct tl_x509_policy p = policy("app-db_v1", sans2, 2);
	const char *const one[] = { "db.example" };
	const char *const three[] = { "db.example", "10.0.0.5",
	    "evil.example" };
	const char *const other[] = { "db.example", "10.0.0.6" };
	char *cert = NULL;

	ck_assert_int_eq(issue("app-db_v2", sans2, 2, &p, &cert, NULL),
	    TL_EREFUSED);
	ck_assert_ptr_nonnull(strstr(why, "CN=app-db_v1"));
	ck_assert_int_eq(issue("app-db_v1", three, 3, &p, &cert, NULL),
	    TL_EREFUSED);
	ck_assert_int_eq(issue("app-db_v1", one, 1, &p, &cert, NULL),
	    TL_EREFUSED);
	ck_assert_int_eq(issue("app-db_v1", other, 2, &p, &cert, NULL),
	    TL_EREFUSED);
	ck_assert_int_eq(issue("app-db_v1", NULL, 0, &p, &cert, NULL),
	    TL_EREFUSED);
	ck_assert_ptr_null(cert);
	/* A policy without SANs gives none: a request with one is refused. */
	p.nsans = 0;
	ck_assert_int_eq(issue("app-db_v1", one, 1, &p, &cert, NULL),
	    TL_EREFUSED);
	ck_assert_int_eq(issue("app-db_v1", NULL, 0, &p, &cert, NULL), 0);
	free(cert);
}
END_TEST

/* A request built by hand: subject cn, key pub, signed by sig. */
static char *
forged(const char *cn, EVP_PKEY *pub, EVP_PKEY *sig, int ext)
{
	X509_REQ *req = X509_REQ_new();
	X509_NAME *nm = X509_NAME_new();
	STACK_OF(X509_EXTENSION) *exts = NULL;
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out;
	long n;

	X509_NAME_add_entry_by_NID(nm, NID_commonName, MBSTRING_UTF8,
	    (const unsigned char *)cn, -1, -1, 0);
	if (ext == 1)	/* a second entry in the subject */
		X509_NAME_add_entry_by_NID(nm, NID_organizationName,
		    MBSTRING_UTF8, (const unsigned char *)"x", -1, -1, 0);
	X509_REQ_set_subject_name(req, nm);
	X509_REQ_set_pubkey(req, pub);
	if (ext == 2) {	/* asks to be a CA */
		X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, NULL,
		    NID_basic_constraints, "critical,CA:TRUE");

		sk_X509_EXTENSION_push(exts = sk_X509_EXTENSION_new_null(), e);
		X509_REQ_add_extensions(req, exts);
		sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	}
	ck_assert_int_gt(X509_REQ_sign(req, sig, EVP_sha256()), 0);
	PEM_write_bio_X509_REQ(b, req);
	n = BIO_get_mem_data(b, &data);
	out = strndup(data, (size_t)n);
	BIO_free(b);
	X509_NAME_free(nm);
	X509_REQ_free(req);
	return out;
}

/*
 * csr re-encoded after a change to its DER: 1, the last byte of its
 * key's point changed (off the curve); 2, a byte after the request.
 */
static char *
tampered(const char *csr, int how)
{
	BIO *b = BIO_new_mem_buf(csr, -1), *o = BIO_new(BIO_s_mem());
	unsigned char *der = NULL, *der2;
	char *name = NULL, *hdr = NULL, *data, *out;
	long n, i, m;

	ck_assert_int_eq(PEM_read_bio(b, &name, &hdr, &der, &n), 1);
	der2 = malloc((size_t)n + 1);
	memcpy(der2, der, (size_t)n);
	m = n;
	if (how == 1) {
		/* The point: 0x04, then X and Y, after the BIT STRING's 0x00. */
		for (i = 0; i + 66 < n; i++)
			if (der2[i] == 0x03 && der2[i + 1] == 66 &&
			    der2[i + 2] == 0x00 && der2[i + 3] == 0x04)
				break;
		ck_assert_int_lt(i + 66, n);
		der2[i + 3 + 64] ^= 0x01;
	} else
		der2[m++] = 0x00;
	ck_assert_int_gt(PEM_write_bio(o, "CERTIFICATE REQUEST", "", der2, m),
	    0);
	m = BIO_get_mem_data(o, &data);
	out = strndup(data, (size_t)m);
	BIO_free(b);
	BIO_free(o);
	OPENSSL_free(name);
	OPENSSL_free(hdr);
	OPENSSL_free(der);
	free(der2);
	return out;
}

START_TEST(test_forged)
{
	struct tl_x509_policy p = policy("app-db_v1", NULL, 0);
	EVP_PKEY *a = EVP_EC_gen("P-256"), *b = EVP_EC_gen("P-256");
	EVP_PKEY *r = EVP_RSA_gen(2048), *c384 = EVP_EC_gen("P-384");
	char *csr, *cert = NULL, *other_key = NULL, *other_cert = NULL;
	char *forged_pem;

	/* The control: built by hand and honest, it is signed. */
	csr = forged("app-db_v1", a, a, 0);
	ck_assert_msg(tl_x509_sign(ca_key, ca_cert, csr, &p, &cert, NULL,
	    why) == 0, "%s", why);
	free(cert);
	free(csr);
	/* Key a's request signed by key b: no proof of possession. */
	csr = forged("app-db_v1", a, b, 0);
	ck_assert_int_eq(tl_x509_sign(ca_key, ca_cert, csr, &p, &cert, NULL,
	    why), TL_EREFUSED);
	ck_assert_ptr_nonnull(strstr(why, "signature"));
	free(csr);
	csr = forged("app-db_v1", a, a, 1);
	ck_assert_int_eq(tl_x509_sign(ca_key, ca_cert, csr, &p, &cert, NULL,
	    why), TL_EREFUSED);
	free(csr);
	csr = forged("app-db_v1", a, a, 2);
	ck_assert_int_eq(tl_x509_sign(ca_key, ca_cert, csr, &p, &cert, NULL,
	    why), TL_EREFUSED);
	ck_assert_ptr_nonnull(strstr(why, "basicConstraints"));
	free(csr);
	csr = forged("app-db_v1", r, r, 0);
	ck_assert_int_eq(tl_x509_sign(ca_key, ca_cert, csr, &p, &cert, NULL,
	    why), TL_EREFUSED);
	ck_assert_ptr_nonnull(strstr(why, "P-256"));
	free(csr);
	csr = forged("app-db_v1", c384, c384, 0);
	ck_assert_int_eq(tl_x509_sign(ca_key, ca_cert, csr, &p, &cert, NULL,
	    why), TL_EREFUSED);
	ck_assert_ptr_nonnull(strstr(why, "P-256"));
	/* A point off the curve; a byte after the request. */
	free(csr);
	csr = forged("app-db_v1", a, a, 0);
	forged_pem = tampered(csr, 1);
	ck_assert_int_eq(tl_x509_sign(ca_key, ca_cert, forged_pem, &p, &cert,
	    NULL, why), TL_EREFUSED);
	ck_assert_msg(strstr(why, "not a P-256 point") != NULL, "%s", why);
	free(forged_pem);
	forged_pem = tampered(csr, 2);
	ck_assert_int_eq(tl_x509_sign(ca_key, ca_cert, forged_pem, &p, &cert,
	    NULL, why), TL_EINVAL);
	free(forged_pem);
	/* Another CA's key with this CA's certificate. */
	ck_assert_int_eq(tl_x509_ca_make("other", 1, &other_key, &other_cert,
	    why), 0);
	free(csr);
	csr = forged("app-db_v1", a, a, 0);
	ck_assert_int_eq(tl_x509_sign(other_key, ca_cert, csr, &p, &cert,
	    NULL, why), TL_EREFUSED);
	ck_assert_int_eq(tl_x509_sign(ca_key, ca_cert, "not a request", &p,
	    &cert, NULL, why), TL_EINVAL);
	ck_assert_int_eq(tl_x509_sign("junk", ca_cert, csr, &p, &cert, NULL,
	    why), TL_EINVAL);
	ck_assert_ptr_null(cert);
	tl_secret_free(other_key);
	free(other_cert);
	free(csr);
	EVP_PKEY_free(a);
	EVP_PKEY_free(b);
	EVP_PKEY_free(r);
	EVP_PKEY_free(c384);
}
END_TEST

/* Names that would change a certificate's meaning never get that far. */
/* A CRL: signed by the CA, listing exactly what it is given, numbered. */
START_TEST(test_crl)
{
	struct tl_x509_policy p = policy("app-db_v1", sans2, 2);
	struct tl_x509_info in, in2;
	struct tl_x509_ca *ca;
	char *cert = NULL, *cert2 = NULL, *crl = NULL;
	const char *serials[2];
	const char *bad[] = { "12zz" };
	X509_CRL *x;
	X509 *c1, *c2, *cac;
	X509_REVOKED *r;
	ASN1_INTEGER *num;
	BIO *b;
	time_t now = time(NULL);

	ck_assert_msg(issue("app-db_v1", sans2, 2, &p, &cert, &in) == 0,
	    "sign: %s", why);
	ck_assert_msg(issue("app-db_v1", sans2, 2, &p, &cert2, &in2) == 0,
	    "sign: %s", why);
	ck_assert_int_eq(tl_x509_ca_load(ca_key, ca_cert, &ca, why), 0);
	serials[0] = in.serial;
	ck_assert_msg(tl_x509_ca_crl(ca, serials, 1, 7, (int64_t)now,
	    (int64_t)now + 86400, &crl, why) == 0, "crl: %s", why);
	ck_assert_ptr_nonnull(b = BIO_new_mem_buf(crl, -1));
	ck_assert_ptr_nonnull(x = PEM_read_bio_X509_CRL(b, NULL, NULL, NULL));
	BIO_free(b);
	ck_assert_ptr_nonnull(b = BIO_new_mem_buf(ca_cert, -1));
	ck_assert_ptr_nonnull(cac = PEM_read_bio_X509(b, NULL, NULL, NULL));
	BIO_free(b);
	ck_assert_int_eq(X509_CRL_verify(x, X509_get0_pubkey(cac)), 1);
	ck_assert_int_eq(X509_NAME_cmp(X509_CRL_get_issuer(x),
	    X509_get_subject_name(cac)), 0);
	ck_assert_int_eq(X509_CRL_get_version(x), 1);
	ck_assert_ptr_nonnull(b = BIO_new_mem_buf(cert, -1));
	ck_assert_ptr_nonnull(c1 = PEM_read_bio_X509(b, NULL, NULL, NULL));
	BIO_free(b);
	ck_assert_ptr_nonnull(b = BIO_new_mem_buf(cert2, -1));
	ck_assert_ptr_nonnull(c2 = PEM_read_bio_X509(b, NULL, NULL, NULL));
	BIO_free(b);
	/* The one listed is in it; the other is not. */
	ck_assert_int_eq(X509_CRL_get0_by_cert(x, &r, c1), 1);
	ck_assert_int_eq(X509_CRL_get0_by_cert(x, &r, c2), 0);
	ck_assert_int_eq(sk_X509_REVOKED_num(X509_CRL_get_REVOKED(x)), 1);
	ck_assert_ptr_nonnull(num = X509_CRL_get_ext_d2i(x, NID_crl_number,
	    NULL, NULL));
	ck_assert_int_eq(ASN1_INTEGER_get(num), 7);
	ASN1_INTEGER_free(num);
	X509_CRL_free(x);
	free(crl);
	/* An empty list is a list; a serial that is not hex is refused. */
	ck_assert_int_eq(tl_x509_ca_crl(ca, NULL, 0, 8, (int64_t)now,
	    (int64_t)now + 60, &crl, why), 0);
	ck_assert_ptr_nonnull(strstr(crl, "BEGIN X509 CRL"));
	free(crl);
	ck_assert_int_eq(tl_x509_ca_crl(ca, bad, 1, 9, (int64_t)now,
	    (int64_t)now + 60, &crl, why), TL_EINVAL);
	ck_assert_ptr_null(crl);
	ck_assert_int_eq(tl_x509_ca_crl(ca, NULL, 0, 9, (int64_t)now,
	    (int64_t)now, &crl, why), TL_EINVAL);
	X509_free(c1);
	X509_free(c2);
	X509_free(cac);
	tl_x509_ca_free(ca);
	free(cert);
	free(cert2);
}
END_TEST

START_TEST(test_hostile_names)
{
	const char *const comma[] = { "a.example,DNS:evil.example" };
	const char *const nul[] = { "" };
	char *key = NULL, *csr = NULL, *cert = NULL, cn[80];
	struct tl_x509_policy p = policy("ok", comma, 1);

	ck_assert_int_eq(tl_x509_request("ok", comma, 1, &key, &csr, why),
	    TL_EINVAL);
	ck_assert_int_eq(tl_x509_request("ok", nul, 1, &key, &csr, why),
	    TL_EINVAL);
	ck_assert_int_eq(tl_x509_request("a\nb", NULL, 0, &key, &csr, why),
	    TL_EINVAL);
	ck_assert_int_eq(tl_x509_request("", NULL, 0, &key, &csr, why),
	    TL_EINVAL);
	ck_assert_int_eq(tl_x509_request("ok", NULL, 2, &key, &csr, why),
	    TL_EINVAL);
	memset(cn, 'a', sizeof(cn) - 1);
	cn[sizeof(cn) - 1] = '\0';
	ck_assert_int_eq(tl_x509_request(cn, NULL, 0, &key, &csr, why),
	    TL_EINVAL);
	ck_assert_ptr_null(key);
	ck_assert_ptr_null(csr);
	/* The same from the signing side: a policy with such a name. */
	ck_assert_int_eq(tl_x509_request("ok", NULL, 0, &key, &csr, why), 0);
	ck_assert_int_eq(tl_x509_sign(ca_key, ca_cert, csr, &p, &cert, NULL,
	    why), TL_EINVAL);
	ck_assert_ptr_null(cert);
	tl_secret_free(key);
	free(csr);
}
END_TEST

static Suite *
x509_suite(void)
{
	Suite *s = suite_create("x509");
	TCase *tc = tcase_create("x509");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_ca);
	tcase_add_test(tc, test_ca_check);
	tcase_add_test(tc, test_request_for);
	tcase_add_test(tc, test_issue);
	tcase_add_test(tc, test_openssl_verify);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_forged);
	tcase_add_test(tc, test_hostile_names);
	tcase_add_test(tc, test_crl);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(x509_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
