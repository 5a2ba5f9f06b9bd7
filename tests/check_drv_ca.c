/*
 * check_drv_ca.c - the mesh CA driver (drivers/ca.c, ca_decl.c) without
 * a server, since its provider is a key and a certificate: prepare makes
 * a CA marked with the mesh id that OpenSSL takes for a CA, checks a
 * given pair (an organisation's, made by openssl, kept as given) and
 * refuses half a pair, another CA's key, a leaf; a session opens on a
 * good pair and not on an expired or mismatched one; a holder's request
 * signed only when it asks for exactly the grant's name and sans (the
 * certificate verified by openssl, with its usages and names); the
 * declaration refuses another key type and a hostile san.
 */
#define _GNU_SOURCE

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "core/x509.h"
#include "drivers/driver.h"
#include "tests/lib/tl_test.h"

static const char mesh[] = "0123456789abcdef0123456789abcdef";
static char why[TL_WHY_MAX];

static const struct tl_drv_ops *
ca(void)
{
	const struct tl_drv_ops *o = tl_drv_find("ca");

	ck_assert_ptr_nonnull(o);
	ck_assert_ptr_nonnull(o->prepare);
	return o;
}

static const char *
value(const struct tl_drv_prepared *p, const char *name, int secret)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if (strcmp(p->name[i], name) == 0) {
			ck_assert_int_eq(p->secret[i], secret);
			return p->value[i];
		}
	ck_abort_msg("%s not prepared", name);
	return NULL;
}

/* Runs cmd (a shell line); its stdout, malloc'd. */
static char *
run(const char *cmd)
{
	FILE *fp = popen(cmd, "r");
	char *out = calloc(1, 16384);
	size_t n;

	ck_assert_ptr_nonnull(fp);
	n = fread(out, 1, 16383, fp);
	out[n] = '\0';
	ck_assert_int_eq(pclose(fp), 0);
	return out;
}

START_TEST(test_made)
{
	const struct tl_drv_ops *o = ca();
	const char *const given[] = { "ca-lifetime", "30d", NULL };
	struct tl_drv_prepared p;
	struct tl_x509_info in;
	struct tl_drv_admin a;
	char xwhy[TL_WHY_MAX], dir[] = "/tmp/tl-ca-XXXXXX", cmd[512];
	char dir2[] = "/tmp/tl-ca-XXXXXX";
	const char *cert, *key;
	void *h;
	FILE *fp;
	char *text;

	ck_assert_msg(o->prepare(given, mesh, &p, why) == 0, "%s", why);
	ck_assert_uint_eq(p.n, 2);
	cert = value(&p, "ca-cert", 0);
	key = value(&p, "ca-key", 1);
	ck_assert_ptr_nonnull(strstr(p.note, "made the mesh CA"));
	ck_assert_int_eq(tl_x509_ca_check(key, cert, (int64_t)time(NULL),
	    &in, xwhy), 0);
	/* The mark: the mesh id in the CA's name. */
	ck_assert_str_eq(in.cn, "tally mesh CA 0123456789abcdef0123456789abcdef");
	ck_assert_int_eq(in.not_after - in.not_before, 30 * 86400 +
	    TL_X509_SKEW_S);
	/* What a verifier outside tally sees: a CA, constrained. */
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "%s/ca.pem", dir);
	ck_assert_ptr_nonnull(fp = fopen(cmd, "w"));
	fputs(cert, fp);
	fclose(fp);
	snprintf(cmd, sizeof(cmd), "openssl x509 -in %s/ca.pem -noout -text "
	    "&& openssl verify -CAfile %s/ca.pem %s/ca.pem", dir, dir, dir);
	text = run(cmd);
	ck_assert_msg(strstr(text, "CA:TRUE, pathlen:0") != NULL, "%s", text);
	ck_assert_ptr_nonnull(strstr(text, "Certificate Sign, CRL Sign"));
	ck_assert_ptr_nonnull(strstr(text, "ASN1 OID: prime256v1"));
	ck_assert_ptr_nonnull(strstr(text, ": OK"));
	free(text);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	/* A session opens on it, and says which CA. */
	memset(&a, 0, sizeof(a));
	a.client_cert = cert;
	a.client_key = key;
	a.mesh = mesh;
	ck_assert_msg(o->open(&a, &h, why) == 0, "%s", why);
	ck_assert_ptr_nonnull(strstr(why, "tally mesh CA 0123"));
	/*
	 * A grant holds nothing at the CA; a holder's request is signed
	 * when it asks for exactly the grant's name and sans, and refused
	 * when it asks for another name, one SAN more or one fewer.
	 */
	{
		static const char *const params[] = { "sans",
		    "app.example\n10.0.0.7", "server-auth", "yes", NULL };
		static const char *const two[] = { "app.example", "10.0.0.7" };
		static const char *const three[] = { "app.example", "10.0.0.7",
		    "evil.example" };
		struct tl_drv_grant g;
		struct tl_drv_cert ci;
		enum tl_drv_drift drift = TL_DRIFT_MISSING;
		struct tl_drv_endpoint ep;
		char *k, *csr, *leaf, path[300];

		memset(&g, 0, sizeof(g));
		memset(&ep, 0, sizeof(ep));
		g.resource = g.login = "app-tls_m0123456789abcdef";
		g.owner = "";
		g.params = params;
		ck_assert_int_eq(o->create(h, &g, why), 0);
		ck_assert_int_eq(o->check(h, &g, &ep, &drift, why), 0);
		ck_assert_int_eq(drift, TL_DRIFT_NONE);
		ck_assert_int_eq(tl_x509_key_new(&k, xwhy), 0);
		ck_assert_int_eq(tl_x509_request_for(k, g.login, two, 2, &csr,
		    xwhy), 0);
		ck_assert_msg(o->sign(h, &g, csr, &leaf, &ci, why) == 0, "%s",
		    why);
		ck_assert_uint_eq(strlen(ci.serial), 32);
		/* lifetime: the default, 24 h. */
		ck_assert(ci.not_after > (int64_t)time(NULL) + 86400 - 60 &&
		    ci.not_after <= (int64_t)time(NULL) + 86400);
		/* renew-at: the default, 66 % of the lifetime from its issue. */
		ck_assert_int_eq(ci.not_after - ci.renew_at, 86400 -
		    86400 * 66 / 100);
		ck_assert(ci.not_before < ci.renew_at);
		ck_assert_int_eq(tl_x509_cert_of_key(leaf, k, xwhy), 0);
		ck_assert_ptr_nonnull(mkdtemp(dir2));
		snprintf(path, sizeof(path), "%s/ca.pem", dir2);
		ck_assert_ptr_nonnull(fp = fopen(path, "w"));
		fputs(cert, fp);
		fclose(fp);
		snprintf(path, sizeof(path), "%s/leaf.pem", dir2);
		ck_assert_ptr_nonnull(fp = fopen(path, "w"));
		fputs(leaf, fp);
		fclose(fp);
		snprintf(cmd, sizeof(cmd), "openssl verify -CAfile %s/ca.pem "
		    "%s/leaf.pem && openssl x509 -in %s/leaf.pem -noout -text",
		    dir2, dir2, dir2);
		text = run(cmd);
		ck_assert_msg(strstr(text, "leaf.pem: OK") != NULL, "%s", text);
		ck_assert_ptr_nonnull(strstr(text, "TLS Web Client "
		    "Authentication, TLS Web Server Authentication"));
		ck_assert_ptr_nonnull(strstr(text, "DNS:app.example, IP "
		    "Address:10.0.0.7"));
		free(text);
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir2);
		ck_assert_int_eq(system(cmd), 0);
		free(leaf);
		free(csr);
		/* Another name; a SAN more; a SAN fewer: refused. */
		ck_assert_int_eq(tl_x509_request_for(k, "other-login", two, 2,
		    &csr, xwhy), 0);
		ck_assert_int_eq(o->sign(h, &g, csr, &leaf, &ci, why),
		    TL_EREFUSED);
		ck_assert_ptr_null(leaf);
		free(csr);
		ck_assert_int_eq(tl_x509_request_for(k, g.login, three, 3,
		    &csr, xwhy), 0);
		ck_assert_int_eq(o->sign(h, &g, csr, &leaf, &ci, why),
		    TL_EREFUSED);
		free(csr);
		ck_assert_int_eq(tl_x509_request_for(k, g.login, two, 1, &csr,
		    xwhy), 0);
		ck_assert_int_eq(o->sign(h, &g, csr, &leaf, &ci, why),
		    TL_EREFUSED);
		free(csr);
		ck_assert_int_eq(o->sign(h, &g, "junk", &leaf, &ci, why),
		    TL_EINVAL);
		tl_secret_free(k);
	}
	o->close(h);
	tl_drv_prepared_free(&p);
	ck_assert_uint_eq(p.n, 0);
}
END_TEST

START_TEST(test_given)
{
	const struct tl_drv_ops *o = ca();
	struct tl_drv_prepared p, other;
	char dir[] = "/tmp/tl-ca-XXXXXX", cmd[600], *rkey, *rcert;
	const char *given[5] = { NULL };
	struct tl_drv_admin a;
	void *h;

	/* An organisation's CA (RSA), made by openssl: kept as given. */
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "openssl req -x509 -newkey rsa:2048 "
	    "-nodes -keyout %s/k.pem -out %s/c.pem -days 30 -subj "
	    "'/O=Example/CN=Example Org CA' -addext "
	    "basicConstraints=critical,CA:TRUE -addext "
	    "keyUsage=critical,keyCertSign,cRLSign 2>/dev/null", dir, dir);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "cat %s/k.pem", dir);
	rkey = run(cmd);
	snprintf(cmd, sizeof(cmd), "cat %s/c.pem", dir);
	rcert = run(cmd);
	given[0] = "ca-cert";
	given[1] = rcert;
	given[2] = "ca-key";
	given[3] = rkey;
	ck_assert_msg(o->prepare(given, mesh, &p, why) == 0, "%s", why);
	ck_assert_uint_eq(p.n, 0);
	ck_assert_msg(strstr(p.note, "Example Org CA") != NULL, "%s", p.note);
	ck_assert_ptr_nonnull(strstr(p.note, "as given"));
	memset(&a, 0, sizeof(a));
	a.client_cert = rcert;
	a.client_key = rkey;
	ck_assert_msg(o->open(&a, &h, why) == 0, "%s", why);
	o->close(h);

	/* Half a pair. */
	given[2] = NULL;
	ck_assert_int_eq(o->prepare(given, mesh, &p, why), TL_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "go together"));
	ck_assert_uint_eq(p.n, 0);
	/* Another CA's key with this certificate: no prepare, no session. */
	ck_assert_int_eq(o->prepare((const char *const[]){ NULL }, mesh,
	    &other, why), 0);
	given[2] = "ca-key";
	given[3] = other.value[1];
	ck_assert_int_eq(o->prepare(given, mesh, &p, why), TL_EREFUSED);
	ck_assert_ptr_nonnull(strstr(why, "not the key"));
	a.client_key = other.value[1];
	ck_assert_int_ne(o->open(&a, &h, why), 0);
	/* Nothing to sign with: no session. */
	a.client_cert = a.client_key = NULL;
	ck_assert_int_eq(o->open(&a, &h, why), TL_EINVAL);
	/* Made without a mesh id: refused (no mark to give it). */
	ck_assert_int_eq(o->prepare((const char *const[]){ NULL }, "", &p,
	    why), TL_EINVAL);
	tl_drv_prepared_free(&other);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	tl_secret_wipe(rkey, strlen(rkey));
	free(rkey);
	free(rcert);
}
END_TEST

/* A CA past its not-after opens no session: unreachable, with why. */
START_TEST(test_expired)
{
	const struct tl_drv_ops *o = ca();
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *nm = X509_NAME_new();
	X509V3_CTX ctx;
	X509_EXTENSION *e;
	BIO *kb = BIO_new(BIO_s_mem()), *cb = BIO_new(BIO_s_mem());
	struct tl_drv_admin a;
	char *kp, *cp;
	long n;
	void *h;

	/* A CA, valid for the first day of 2020 only. */
	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(X509_NAME_add_entry_by_NID(nm, NID_commonName,
	    MBSTRING_UTF8, (const unsigned char *)"old", -1, -1, 0), 1);
	ck_assert_int_eq(X509_set_version(x, 2), 1);
	ck_assert_int_eq(ASN1_INTEGER_set(X509_get_serialNumber(x), 7), 1);
	ck_assert_int_eq(X509_set_subject_name(x, nm), 1);
	ck_assert_int_eq(X509_set_issuer_name(x, nm), 1);
	ck_assert_int_eq(X509_set_pubkey(x, k), 1);
	ck_assert_ptr_nonnull(ASN1_TIME_set(X509_getm_notBefore(x),
	    1577836800));
	ck_assert_ptr_nonnull(ASN1_TIME_set(X509_getm_notAfter(x),
	    1577923200));
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	ck_assert_ptr_nonnull(e = X509V3_EXT_conf_nid(NULL, &ctx,
	    NID_basic_constraints, "critical,CA:TRUE"));
	ck_assert_int_eq(X509_add_ext(x, e, -1), 1);
	X509_EXTENSION_free(e);
	ck_assert_int_gt(X509_sign(x, k, EVP_sha256()), 0);
	ck_assert_int_eq(PEM_write_bio_PrivateKey(kb, k, NULL, NULL, 0, NULL,
	    NULL), 1);
	ck_assert_int_eq(PEM_write_bio_X509(cb, x), 1);
	n = BIO_get_mem_data(kb, &kp);
	kp = strndup(kp, (size_t)n);
	n = BIO_get_mem_data(cb, &cp);
	cp = strndup(cp, (size_t)n);
	memset(&a, 0, sizeof(a));
	a.client_cert = cp;
	a.client_key = kp;
	ck_assert_int_eq(o->open(&a, &h, why), TL_EUNREACH);
	ck_assert_msg(strstr(why, "not valid now") != NULL, "%s", why);
	/* ...and prepare will not take it either. */
	{
		const char *const given[] = { "ca-cert", cp, "ca-key", kp,
		    NULL };
		struct tl_drv_prepared p;

		ck_assert_int_eq(o->prepare(given, mesh, &p, why),
		    TL_EREFUSED);
		ck_assert_ptr_nonnull(strstr(why, "not valid now"));
	}
	tl_secret_wipe(kp, strlen(kp));
	free(kp);
	free(cp);
	BIO_free(kb);
	BIO_free(cb);
	X509_NAME_free(nm);
	X509_free(x);
	EVP_PKEY_free(k);
}
END_TEST

START_TEST(test_declaration)
{
	const struct tl_drv_decl *d = tl_drv_decl_find("ca");
	const char *const bad[] = { "key-type", "rsa-2048", NULL };
	const char *const good[] = { "key-type", "ecdsa-p256", NULL };

	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_eq(tl_drv_decl_for_type("x509-certificate"), d);
	ck_assert(tl_drv_has_tag(d, "pki"));
	ck_assert_str_eq(d->instances, "one-per-mesh");
	ck_assert_int_eq(d->credential.kind, TL_DRV_CRED_CERTIFICATE);
	ck_assert_int_eq(d->settings_check(bad, why), TL_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "ecdsa-p256"));
	ck_assert_int_eq(d->settings_check(good, why), 0);
	ck_assert_str_eq(tl_drv_setting_default(d, "lifetime"), "24h");
	ck_assert_str_eq(tl_drv_setting_default(d, "renew-at"), "66");
	ck_assert(tl_drv_setting_find(d->settings, "ca-key")->secret);
	/* The sans param: host names and addresses, 16 at most. */
	{
		const char *const ok[] = { "sans", "a.example\n10.0.0.1", NULL };
		const char *const comma[] = { "sans", "a,DNS:evil", NULL };
		const char *const many[] = { "sans", "a\nb\nc\nd\ne\nf\ng"
		    "\nh\ni\nj\nk\nl\nm\nn\no\np\nq", NULL };

		ck_assert_int_eq(d->params_check(ok, why), 0);
		ck_assert_int_eq(d->params_check(comma, why), TL_EINVAL);
		ck_assert_int_eq(d->params_check(many, why), TL_EINVAL);
	}
	/* One name for every version: a renewal keeps it. */
	{
		struct tl_drv_name_in in;
		struct tl_drv_names n1, n2;

		memset(&in, 0, sizeof(in));
		in.grant = "app/tls";
		in.resource = "";
		in.node = "";
		in.recorded = "";
		in.scheme = TL_DRV_NAMING_MESH;
		in.mesh = mesh;
		in.version = 1;
		ck_assert_int_eq(tl_drv_name(d, &in, &n1, why), 0);
		in.version = 2;
		ck_assert_int_eq(tl_drv_name(d, &in, &n2, why), 0);
		ck_assert_str_eq(n1.login, n2.login);
		ck_assert_str_eq(n1.login, n1.resource);
		ck_assert_str_eq(n1.owner, "");
	}
}
END_TEST

static Suite *
ca_suite(void)
{
	Suite *s = suite_create("drv_ca");
	TCase *tc = tcase_create("ca");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_made);
	tcase_add_test(tc, test_given);
	tcase_add_test(tc, test_expired);
	tcase_add_test(tc, test_declaration);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	if (sodium_init() < 0)
		return EXIT_FAILURE;
	sr = srunner_create(ca_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
