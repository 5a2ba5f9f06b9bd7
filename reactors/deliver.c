/*
 * deliver.c - a grant's credential reaching its holders: the variables
 * each holder gets, sealed to its node in credential.delivered events
 * (deliver.h).  Nothing here writes a file: the plaintext exists only
 * on the node, written by its agent (tools/tally-node).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "core/delivery.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/nodewire.h"
#include "drivers/util.h"
#include "projections/ctx.h"
#include "projections/events.h"
#include "projections/rotation.h"
#include "ack.h"
#include "credential.h"
#include "deliver.h"
#include "rx-internal.h"
#include "session.h"

/*
 * The assignments that hold g: every one of a shared grant's module
 * that installs its requirement's part.
 */
int
tl_rx_grant_holders(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, struct tl_nodelist *nl)
{
	char k[TL_KEY_MAX];
	size_t i, j;
	int rc;

	if ((rc = tl_graph_req_nodes(t, p, g->module, g->req, nl)) != 0)
		return rc;
	if (g->node[0] == '\0')
		return 0;
	for (i = j = 0; i < nl->n; i++)
		if (strcmp(nl->v[i], g->node) == 0)
			memmove(nl->v[j++], nl->v[i], 64);
	nl->n = j;
	(void)k;
	return 0;
}

/* The env: of module record m's embedded instance name; 0 if found. */
static int
embedded_env(struct tl_bnode m, const char *name, struct tl_bnode *env)
{
	struct tl_bnode arr;
	char n[64];
	size_t i;

	if (tl_bn_get(m, "embedded", &arr) != 0)
		return TL_ENOTFOUND;
	for (i = 0; i < tl_bn_len(arr); i++) {
		struct tl_bnode e = tl_bn_at(arr, i);

		n[0] = '\0';
		tl_bn_getstr(e, "name", n, sizeof(n));
		if (strcmp(n, name) == 0 && tl_bn_get(e, "env", env) == 0)
			return 0;
	}
	return TL_ENOTFOUND;
}

/*
 * An embedded instance's variables (decide_embedded.h): the password
 * tally generated, into the variable its manifest maps the password
 * field to; every other field (host, port, user) is the module's own.
 */
static int
embedded_lines(struct tl_rx *rx, struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, struct tl_dlv_enc *e)
{
	char password[TL_PASSWORD_MAX + 1];
	struct tl_rec r;
	struct tl_bnode env;
	char k[TL_KEY_MAX];
	size_t j;
	int rc;

	memset(password, 0, sizeof(password));
	if ((rc = tl_rx_intent_password(rx, t, g, password)) != 0)
		return rc;
	if ((rc = tl_key(k, "m/%s", g->module)) != 0 ||
	    (rc = tl_rec_get(t, p->graph, k, &r)) != 0)
		goto out;
	if (embedded_env(r.m, g->req, &env) == 0)
		for (j = 0; j < tl_bn_len(env); j++) {
			struct tl_bnode kn, vn;
			const char *f, *var;
			size_t fl, vl;

			tl_bn_entry(env, j, &kn, &vn);
			if (tl_bn_str(kn, &f, &fl) == 0 &&
			    tl_bn_str(vn, &var, &vl) == 0 &&
			    fl == 8 && memcmp(f, "password", 8) == 0)
				tl_dlv_enc_var(e, 0, var, vl, password,
				    strlen(password));
		}
	tl_rec_close(&r);
	rc = e->err;
out:
	tl_secret_wipe(password, sizeof(password));
	return rc;
}

/* A fresh token: 32 hex digits of libsodium's randomness. */
static void
token_new(char out[33])
{
	uint8_t rnd[16];

	randombytes_buf(rnd, sizeof(rnd));
	sodium_bin2hex(out, 33, rnd, sizeof(rnd));
}

/*
 * Under TL_DRV_CRED_CERTIFICATE: the 'k' item (core/delivery.h) that
 * asks the holder's node for a key and a request of exactly the grant's
 * common name (dg->login) and the sans its requirement declares, with
 * the two files named by the grant and version (a renewal gets new
 * ones): key-DIGEST-vN.pem and cert-DIGEST-vN.pem, DIGEST 16 hex digits
 * of the grant id's BLAKE2b.
 */
static int
keyreq(struct tl_txn *t, const struct tl_proj *p, const struct tl_grant *g,
    const struct tl_drv_grant *dg, const char *driver, struct tl_dlv_enc *e,
    char keyname[64], char certname[64])
{
	const char *sv[TL_RX_PARAMS_SV], *sans[TL_DLV_SANS_MAX], *list, *q;
	char *params = NULL, *copy = NULL, *nl;
	uint8_t h[8];
	char dig[17];
	size_t n = 0;
	int rc;

	crypto_generichash(h, sizeof(h), (const uint8_t *)g->id,
	    strlen(g->id), NULL, 0);
	sodium_bin2hex(dig, sizeof(dig), h, sizeof(h));
	snprintf(keyname, 64, "key-%s-v%llu.pem", dig,
	    (unsigned long long)g->version);
	snprintf(certname, 64, "cert-%s-v%llu.pem", dig,
	    (unsigned long long)g->version);
	if ((rc = tl_rx_grant_params(t, p, g, driver, &params)) != 0)
		return rc;
	list = params != NULL && tl_drv_params_unpack(params, sv,
	    TL_RX_PARAMS_SV) != NULL ? tl_drv_setting_get(sv, "sans") : NULL;
	if (list != NULL && (copy = strdup(list)) == NULL) {
		free(params);
		return ENOMEM;
	}
	for (q = copy; q != NULL && *q != '\0' && n < TL_DLV_SANS_MAX;
	    q = nl + 1) {
		sans[n++] = q;
		if ((nl = strchr(q, '\n')) == NULL)
			break;
		*nl = '\0';
	}
	tl_dlv_enc_keyreq(e, keyname, certname, dg->login, sans, n);
	free(copy);
	free(params);
	return e->err;
}

/*
 * The variables one holder on node gets from grant g: each connection
 * field mapped by the requirement, with the host a consumer on that
 * node uses (loopback only when co-located with a local provider).
 *
 * When the provider has the setting ca, compose is given a token as
 * ep.ca_path (decl.h), fresh for each delivery and drawn by libsodium:
 * no value a provider controls (an identity provider's client id) can
 * hold it but by chance.  Each field whose value holds it goes as a
 * value with references (core/delivery.h), every copy of the token a
 * reference to the CA's file, and the file (the setting's bytes, named
 * ca-HEX.pem by the BLAKE2b of them, as tallyd names its own copy) goes
 * once in the delivery; a delivery whose fields hold no token stays
 * format 3.
 */
static int
tl_rx_holder_lines(struct tl_rx *rx, struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, const char *node, struct tl_dlv_enc *e)
{
	char password[TL_PASSWORD_MAX + 1];
	char *handle = NULL;
	struct tl_rec r;
	struct tl_bnode env;
	struct tl_rx_prov pv;
	struct tl_drv_endpoint ep;
	struct tl_drv_grant dg = { 0 };
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	char driver[64], host[256], res[64], own[64], login[64];
	char token[33], caname[3 + 32 + 4 + 1];
	char ktoken[33], ctoken[33], ntoken[33], keyname[64], certname[64];
	const char *pem = NULL;
	int drop, rc, ca_used = 0, cert = 0;
	char k[TL_KEY_MAX];
	size_t i;

	if (TL_GRANT_IS_EMBEDDED(g))
		return embedded_lines(rx, t, p, g, e);
	memset(password, 0, sizeof(password));
	if ((rc = tl_rx_intent_password(rx, t, g, password)) != 0)
		return rc;
	rc = tl_rx_load_provider(t, p, rx, g->provider, g->type, &pv, driver, &drop);
	tl_rx_prov_wipe(&pv);
	if (rc != 0)
		goto out;
	tl_rx_consumer_endpoint(&pv, g, TL_RX_EP_HOLDER, node, sv, host, &ep);
	cert = pv.decl != NULL &&
	    pv.decl->credential.kind == TL_DRV_CRED_CERTIFICATE;
	pem = tl_drv_setting_get(sv, "ca");
	/* A certificate's CA is the provider itself: its own certificate. */
	if (cert) {
		const struct tl_drv_setting *cs = tl_drv_setting_for(pv.decl,
		    TL_DRV_USE_ADMIN_CERT, 0);

		pem = cs != NULL ? tl_drv_setting_get(sv, cs->name) : NULL;
	}
	/*
	 * A login by certificate: the same key and request, the mesh CA
	 * signs it (issue.c); the provider's ca stays what verifies it.
	 */
	if (g->cert_login != 0)
		cert = 1;
	if (cert) {
		token_new(ktoken);
		token_new(ctoken);
		token_new(ntoken);
		ep.key_path = ktoken;
		ep.cert_path = ctoken;
		ep.not_after = ntoken;
	}
	if (pem != NULL && *pem != '\0') {
		uint8_t h[16];

		token_new(token);
		crypto_generichash(h, sizeof(h), (const uint8_t *)pem,
		    strlen(pem), NULL, 0);
		memcpy(caname, "ca-", 3);
		sodium_bin2hex(caname + 3, 33, h, sizeof(h));
		memcpy(caname + 35, ".pem", 5);
		ep.ca_path = token;
	} else
		pem = NULL;
	/*
	 * The names as provisioned (recorded), the current credential; a
	 * driver whose fields record no resource name (the fold keeps
	 * TL_GRANT_OBJECT_KEY and user) gets the names it derives.
	 */
	tl_rx_grant_names(rx, g, g->version, res, own, login);
	dg.resource = g->object[0] != '\0' ? g->object : res;
	dg.owner = own;
	dg.login = g->user[0] != '\0' ? g->user : login;
	/* No password to give when the certificate is the credential. */
	dg.password = g->cert_login != 0 ? "" : password;
	dg.cert_login = g->cert_login != 0;
	dg.grant = g->id;
	dg.adopt_unnamed = 0;
	dg.adopt_mesh = tl_rx_grant_adopt(g);
	dg.adopted = g->adopt_version != 0;
	dg.access = (int)g->access;
	dg.handle = NULL;
	dg.handle_out = NULL;
	if (cert && (rc = keyreq(t, p, g, &dg, driver, e, keyname,
	    certname)) != 0)
		goto out;
	if (pv.decl != NULL && pv.decl->credential.handle_model) {
		/* The provider's values: what compose reads them from. */
		if ((handle = tl_secret_alloc(TL_DRV_HANDLE_MAX)) == NULL) {
			rc = ENOMEM;
			goto out;
		}
		if ((rc = tl_rx_grant_handle(rx, t, g->id, g->version,
		    handle)) != 0)
			goto out;
		dg.handle = handle;
	}
	/* A consolidated instance's fields: its declaration's env:. */
	if (strcmp(g->scope, TL_GRANT_SCOPE_CONSOLIDATED) == 0)
		rc = tl_key(k, "m/%s", g->module);
	else
		rc = tl_key(k, "r/%s/%s", g->module, g->req);
	if (rc != 0 || (rc = tl_rec_get(t, p->graph, k, &r)) != 0)
		goto out;
	if (strcmp(g->scope, TL_GRANT_SCOPE_CONSOLIDATED) == 0 ?
	    embedded_env(r.m, g->req, &env) == 0 :
	    tl_bn_get(r.m, "env", &env) == 0) {
		for (i = 0; i < tl_bn_len(env); i++) {
			struct tl_bnode kn, vn;
			const char *f, *var, *tokens[3], *files[3];
			size_t fl, vl, nt;
			char field[64], val[1024];

			tl_bn_entry(env, i, &kn, &vn);
			if (tl_bn_str(kn, &f, &fl) != 0 ||
			    tl_bn_str(vn, &var, &vl) != 0)
				continue;
			/* The driver composes every field, URI included. */
			if (fl >= sizeof(field))
				continue;
			memcpy(field, f, fl);
			field[fl] = '\0';
			if (tl_drv_compose(pv.decl, field, &ep, &dg, val,
			    sizeof(val)) != 0) {
				tl_secret_wipe(val, sizeof(val));
				continue;
			}
			/* The certificate's not-after: the node fills it. */
			if (cert && strcmp(val, ntoken) == 0) {
				tl_dlv_enc_not_after(e, var, vl);
				continue;
			}
			/* A value may name the CA, the key and the cert. */
			nt = 0;
			if (pem != NULL) {
				tokens[nt] = token;
				files[nt++] = caname;
				if (strstr(val, token) != NULL)
					ca_used = 1;
			}
			if (cert) {
				tokens[nt] = ktoken;
				files[nt++] = keyname;
				tokens[nt] = ctoken;
				files[nt++] = certname;
			}
			tl_dlv_enc_subst_n(e, var, vl, val, strlen(val),
			    tokens, files, nt);
			tl_secret_wipe(val, sizeof(val));
		}
	}
	tl_rec_close(&r);
	/* The file's bytes are the setting's: no compose buffer holds them. */
	if (ca_used)
		tl_dlv_enc_file(e, caname, pem, strlen(pem));
	rc = e->err;
out:
	tl_secret_wipe(password, sizeof(password));
	tl_secret_free(handle);
	return rc;
}

/*
 * What the node needs besides the values, inside the sealed box so
 * that only the node reads it and it cannot be moved to another grant
 * or holder (core/delivery.h, framed by length): the grant, the holder,
 * the version, the proof key, then each env default the module's
 * manifest declares (the module.declared record).
 */
static int
meta_begin(struct tl_rx *rx, struct tl_txn *t, const struct tl_proj *p,
    const struct tl_grant *g, const char *holder, struct tl_dlv_enc *e)
{
	struct tl_rec r;
	struct tl_bnode env;
	char pw[TL_PASSWORD_MAX + 1];
	uint8_t pkey[TL_MAC_LEN];
	size_t i;
	char k[TL_KEY_MAX];
	int rc;

	/* The key of the node's proof that it holds this credential. */
	if ((rc = tl_rx_intent_password(rx, t, g, pw)) != 0)
		return rc;
	tl_nw_proof_key(pw, pkey);
	tl_secret_wipe(pw, sizeof(pw));
	tl_dlv_enc_restart(e, g->id, holder, g->version, pkey);
	tl_secret_wipe(pkey, sizeof(pkey));
	if ((rc = tl_key(k, "m/%s", g->module)) != 0)
		return rc;
	if (tl_rec_get(t, p->graph, k, &r) != 0)
		return e->err;
	if (tl_bn_get(r.m, "env", &env) == 0)
		for (i = 0; i < tl_bn_len(env); i++) {
			struct tl_bnode kn, vn;
			const char *name, *val;
			size_t nl, vl;

			tl_bn_entry(env, i, &kn, &vn);
			if (tl_bn_str(kn, &name, &nl) != 0 ||
			    tl_bn_str(vn, &val, &vl) != 0)
				continue;
			tl_dlv_enc_var(e, 1, name, nl, val, vl);
		}
	tl_rec_close(&r);
	return e->err;
}

void
tl_rx_deliver_free(struct tl_rx *rx)
{
	tl_dlv_enc_free(rx->dlv);
	free(rx->dlv);
	rx->dlv = NULL;
}

static int
emit_delivery(struct tl_rx *rx, struct tl_ctx *c, const struct tl_grant *g,
    const char *node)
{
	struct tl_dlv_enc *e;
	const uint8_t *plain;
	size_t plen = 0;
	struct tl_body b;
	struct tl_rec r;
	uint8_t pk[TL_PUBKEY_LEN];
	const void *pkp;
	size_t pkl;
	uint8_t *sealed = NULL;
	char holder[140];
	char k[TL_KEY_MAX];
	char stream[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "n/%s", node)) != 0 ||
	    (rc = tl_rec_get(c->t, c->p.graph, k, &r)) != 0)
		return rc;
	rc = TL_EMALFORMED;
	{
		struct tl_bnode n;

		if (tl_bn_get(r.m, "pubkey", &n) == 0 &&
		    tl_bn_bin(n, &pkp, &pkl) == 0 && pkl == TL_PUBKEY_LEN) {
			memcpy(pk, pkp, TL_PUBKEY_LEN);
			rc = 0;
		}
	}
	tl_rec_close(&r);
	if (rc != 0)
		return rc;
	/* One encoder for every delivery of the process (rx->dlv). */
	if (rx->dlv == NULL &&
	    (rx->dlv = calloc(1, sizeof(*rx->dlv))) == NULL)
		return ENOMEM;
	e = rx->dlv;
	snprintf(holder, sizeof(holder), "%s@%s", g->module, node);
	if ((rc = meta_begin(rx, c->t, &c->p, g, holder, e)) != 0)
		goto out;
	if ((rc = tl_rx_holder_lines(rx, c->t, &c->p, g, node, e)) != 0 ||
	    (rc = tl_dlv_enc_finish(e, &plain, &plen)) != 0)
		goto out;
	if ((sealed = malloc(plen + TL_SEAL_OVERHEAD)) == NULL) {
		rc = ENOMEM;
		goto out;
	}
	if ((rc = tl_secret_seal(pk, plain, plen, sealed)) != 0)
		goto out;
	snprintf(holder, sizeof(holder), "%s@%s", g->module, node);
	if ((rc = tl_key(stream, "grant/%s", g->id)) != 0)
		goto out;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, g->id);
	tl_body_str(&b, TL_F_HOLDER, holder);
	tl_body_str(&b, TL_F_NODE, node);
	tl_body_u64(&b, TL_F_VERSION, g->version);
	tl_body_secret(&b, TL_F_SEALED, sealed, plen + TL_SEAL_OVERHEAD);
	rc = tl_emit(c, TL_EV_CRED_DELIVERED, stream, &b, NULL);
	tl_body_free(&b);
out:
	free(sealed);
	/* The plaintext does not outlive its delivery. */
	if (e->p != NULL)
		tl_secret_wipe(e->p, e->cap);
	e->len = 0;
	return rc;
}

int
tl_rx_deliver(struct tl_rx *rx, struct tl_ctx *c, const char *grant)
{
	struct tl_grant g;
	struct tl_nodelist nl;
	char holder[140];
	size_t i;
	int rc;

	if ((rc = tl_grant_get(c->t, &c->p, grant, &g, NULL)) != 0)
		return rc;
	/* An adopted login's password: never tally's to deliver. */
	if (strcmp(g.state, TL_GRANT_PROVISIONED) != 0 ||
	    tl_rx_grant_adopted_login(&g))
		return 0;
	if ((rc = tl_rx_grant_holders(c->t, &c->p, &g, &nl)) != 0)
		return rc;
	for (i = 0; rc == 0 && i < nl.n; i++) {
		snprintf(holder, sizeof(holder), "%s@%s", g.module, nl.v[i]);
		if (tl_grant_delivered(c->t, &c->p, g.id, holder) == g.version)
			continue;
		rc = emit_delivery(rx, c, &g, nl.v[i]);
	}
	tl_nodelist_free(&nl);
	return rc;
}
