/*
 * oidc.c - the oidc driver: a client per consumer at an identity provider.
 * These are its operations; its declaration (type, settings, fields,
 * credential model, revocation, fencing, names, compose, and the
 * handle's reader they share with the operations) is oidc_decl.c's.
 *
 * A grant (type oidc-client) is one OAuth 2.0 client registered for the
 * consumer through the standard protocols only, so any provider that
 * implements them serves (oidc-provider, Keycloak's
 * /realms/R/clients-registrations/openid-connect):
 *
 *   discovery	GET ISSUER/.well-known/openid-configuration at open: the
 *		registration, token, revocation and introspection
 *		endpoints, each refused unless it is on the issuer's own
 *		origin (a discovery document cannot send the initial access
 *		token elsewhere).  Plain http only on loopback, with tls
 *		off; an https issuer is verified (tls=verify, the default
 *		for one) against ca, or the system's CAs when no ca is set,
 *		or not verified (tls=require).  A certificate that does not
 *		verify is TL_EUNTRUSTED at discovery, before the initial
 *		access token or any other credential is sent.
 *   register	RFC 7591 POST with the initial access token (the
 *		secret setting initial-access-token): client_name the
 *		object's name (tl_drv_name_scheme), software_id the mark
 *		("tally mesh MESH grant ID"), so a person sees which client
 *		is whose; client_credentials only,
 *		response_types [], client_secret_basic.  The server chooses
 *		client_id and client_secret and returns a registration
 *		access token (RAT) and the client's registration URI.
 *   manage	RFC 7592 GET / PUT (the whole record) / DELETE of that URI
 *		with the RAT.  A PUT returns a new RAT and the old one is
 *		refused at once.
 *
 * The credential is the provider's, so the driver uses the contract's
 * secret handle (decl.h, handle_model): a JSON object with client_id,
 * client_secret, registration_access_token, registration_client_uri and
 * token_endpoint, written to g->handle_out the moment the provider
 * answers a POST or a PUT (before anything else is looked at), read back
 * from g->handle.  A lost RAT (refused while the client still gets
 * tokens) cannot be recovered through the protocols: it is a credential
 * drift whose reason names the admin recovery.
 *
 * Whose a client is: the one the handle names, and only while its
 * software_id is this grant's mark; a client registered for another
 * grant, or by someone else, is never changed or deleted (but one tally
 * adopt names, below), and one marked by another mesh is refused
 * (TL_EREFUSED) unless adopt_mesh names it.
 * Fencing: TL_DRV_FENCE_EPOCH_CHECK (oi_fencing, oidc_decl.c).  RFC 7591
 * has no listing, so a registration whose answer was lost (tallyd killed
 * between the 201 and the record) leaves a client tally does not know:
 * its software_id names the grant for the provider's admin.
 *
 * Adoption (tally adopt MODULE/REQ --resource CLIENT_ID --secret-stdin,
 * create with adopting): a client registered by someone else is taken
 * over with the registration access token its operator gives, at the
 * registration endpoint + "/" + CLIENT_ID (where oidc-provider and
 * Keycloak keep it; RFC 7592 tells a client's URI only to whoever
 * registered it).  Its record is PUT back as it was with this grant's
 * mark, so its consumers keep their secret until the rotation that
 * follows at once retires it; its handle names its own authentication
 * (adopted_auth_method), and nothing compares it with the requirement.
 *
 * Rotation (LOGIN_BESIDE): the protocol has one secret per client and
 * no client-chosen one, so a rotation registers a second client (the
 * new version's name) and retire deletes the old one: the client-id
 * changes on every rotation (rotation_note).  check: GET compared with
 * what tally registered (a change is a privileges drift, fix_privileges
 * PUTs the whole record back), then a client_credentials token request
 * with the handle's secret; the token is introspected (RFC 7662, active
 * and this client's) and revoked (RFC 7009), so a verification leaves
 * no live token.  A client that is gone (401 on its URI and the token
 * endpoint refuses it) is TL_DRIFT_MISSING: flagged, not re-registered
 * (resource servers know the old client-id); create registers anew.
 *
 * Introspection between consumers: a provider that lets any
 * authenticated client introspect any token (oidc-provider 8's default
 * features.introspection.allowedPolicy, Keycloak's realm clients) lets
 * one consumer's client read another's token (active, its client_id).
 * Nothing RFC 7591/7592 registers limits it (oidc-provider 8 has no
 * per-client introspection setting, and the one client auth method is
 * the token endpoint's, which client_credentials needs), so the driver
 * declares it (isolation_note) and tally status and explain show it; the
 * provider's own configuration is where it is limited.
 *
 * Revocation: DELETE; nothing is retained.  Tokens already issued die
 * with the client at providers that look tokens up (this fixture,
 * Keycloak's introspection); self-contained (JWT) access tokens stay
 * valid at resource servers that check them locally until they expire
 * (the provider's access-token lifetime, setting token-lifetime).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "driver.h"
#include "http.h"
#include "oidc-internal.h"
#include "util.h"

#define OI_CONNECT_MS	3000
#define OI_TIMEOUT_MS	15000

struct oi {
	CURL		*c;
	char		 issuer[OI_URL_MAX];
	char		 origin[OI_URL_MAX];	/* scheme://host[:port] */
	char		 reg[OI_URL_MAX];
	char		 token[OI_URL_MAX];
	char		 revoke[OI_URL_MAX];
	char		 introspect[OI_URL_MAX];
	char		 iat[OI_SECRET_MAX];	/* the initial access token */
	char		*buf;			/* the last body (guarded) */
	size_t		 len, cap;
	long		 status;
	char		 mesh[33];		/* admin->mesh; "": none */
	enum tl_drv_tls	 tls;
	char		 err[TL_DRV_HTTP_ERR];	/* libcurl's detail */
};

/* --- URLs ------------------------------------------------------------ */

/*
 * The origin of url (scheme://authority) into out; 0, or TL_EINVAL for
 * anything but https, or http to a loopback host.
 */
static int
origin_of(const char *url, char *out, size_t cap)
{
	CURLU *u;
	char *scheme = NULL, *host = NULL, *port = NULL;
	int rc = TL_EINVAL;

	if ((u = curl_url()) == NULL)
		return ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
		goto out;
	curl_url_get(u, CURLUPART_PORT, &port, 0);
	if (strcmp(scheme, "https") != 0 && (strcmp(scheme, "http") != 0 ||
	    (strcmp(host, "127.0.0.1") != 0 && strcmp(host, "[::1]") != 0 &&
	    strcmp(host, "localhost") != 0)))
		goto out;
	if (snprintf(out, cap, "%s://%s%s%s", scheme, host, port ? ":" : "",
	    port ? port : "") < (int)cap)
		rc = 0;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return rc;
}

/* Whether url is on o's origin (the same scheme, host and port). */
static int
same_origin(const struct oi *o, const char *url)
{
	char org[OI_URL_MAX];

	return origin_of(url, org, sizeof(org)) == 0 &&
	    strcmp(org, o->origin) == 0;
}

/* --- HTTP ------------------------------------------------------------ */

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
	struct oi *o = arg;

	return tl_drv_http_body(&o->buf, &o->len, &o->cap, data, size * n,
	    1u << 20);
}

enum oi_body { OI_NONE = 0, OI_JSON, OI_FORM };

/*
 * One request: bearer (a token) or user/pass (HTTP basic, the client's
 * own credentials), body as kind.  0 with o->status and o->buf set for
 * any HTTP answer; TL_EUNREACH when none came (or 502-504);
 * TL_EUNTRUSTED when the issuer's certificate did not verify.
 */
static int
request(struct oi *o, const char *method, const char *url,
    const char *bearer, const char *user, const char *pass,
    enum oi_body kind, const char *body, const char *step, char *why)
{
	struct curl_slist *hdr = NULL, *nh;
	char line[OI_SECRET_MAX + 32];
	CURLcode cc;
	int rc = 0;

	o->len = 0;
	o->status = 0;
	if (o->buf != NULL)
		o->buf[0] = '\0';
	curl_easy_setopt(o->c, CURLOPT_URL, url);
	curl_easy_setopt(o->c, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(o->c, CURLOPT_CUSTOMREQUEST, method);
	if ((nh = curl_slist_append(hdr, "Accept: application/json")) == NULL)
		return tl_drv_why(why, ENOMEM, "%s: out of memory", step);
	hdr = nh;
	if (kind != OI_NONE) {
		if ((nh = curl_slist_append(hdr, kind == OI_JSON ?
		    "Content-Type: application/json" :
		    "Content-Type: application/x-www-form-urlencoded")) ==
		    NULL) {
			rc = tl_drv_why(why, ENOMEM, "%s: out of memory", step);
			goto out;
		}
		hdr = nh;
		curl_easy_setopt(o->c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(o->c, CURLOPT_POSTFIELDSIZE,
		    (long)strlen(body));
	}
	if (bearer != NULL) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s",
		    bearer);
		nh = curl_slist_append(hdr, line);
		sodium_memzero(line, sizeof(line));
		if (nh == NULL) {
			rc = tl_drv_why(why, ENOMEM, "%s: out of memory", step);
			goto out;
		}
		hdr = nh;
	}
	curl_easy_setopt(o->c, CURLOPT_HTTPAUTH,
	    user != NULL ? CURLAUTH_BASIC : CURLAUTH_NONE);
	curl_easy_setopt(o->c, CURLOPT_USERNAME, user);
	curl_easy_setopt(o->c, CURLOPT_PASSWORD, pass);
	curl_easy_setopt(o->c, CURLOPT_HTTPHEADER, hdr);
	cc = curl_easy_perform(o->c);
	curl_easy_setopt(o->c, CURLOPT_USERNAME, NULL);
	curl_easy_setopt(o->c, CURLOPT_PASSWORD, NULL);
	curl_easy_setopt(o->c, CURLOPT_POSTFIELDS, NULL);
	curl_easy_setopt(o->c, CURLOPT_POSTFIELDSIZE, -1L);
	curl_easy_setopt(o->c, CURLOPT_HTTPHEADER, NULL);
	if (cc != CURLE_OK) {
		rc = tl_drv_http_fail(cc, o->tls, o->err, line, sizeof(line));
		rc = tl_drv_why(why, rc, "%s: the identity provider at %s %s: "
		    "%s", step, o->origin, rc == TL_EUNTRUSTED ? "is not "
		    "trusted (TLS)" : "did not answer", line);
		goto out;
	}
	curl_easy_getinfo(o->c, CURLINFO_RESPONSE_CODE, &o->status);
	if (o->status == 502 || o->status == 503 || o->status == 504)
		rc = tl_drv_why(why, TL_EUNREACH,
		    "%s: HTTP %ld from the identity "
		    "provider", step, o->status);
out:
	if (hdr != NULL) {
		/* The bearer line is a secret: wipe it in the list too. */
		for (nh = hdr; nh != NULL; nh = nh->next)
			sodium_memzero(nh->data, strlen(nh->data));
		curl_slist_free_all(hdr);
	}
	return rc;
}

/* The error and its description of a refusal, for why (never secret). */
static void
reason(const struct oi *o, char *out, size_t n)
{
	json_t *j;
	const char *e, *d;

	snprintf(out, n, "HTTP %ld", o->status);
	if (o->len == 0 || (j = json_loadb(o->buf, o->len, 0, NULL)) == NULL)
		return;
	e = json_string_value(json_object_get(j, "error"));
	d = json_string_value(json_object_get(j, "error_description"));
	if (e != NULL)
		snprintf(out, n, "HTTP %ld %.60s%s%.200s", o->status, e,
		    d ? ": " : "", d ? d : "");
	json_decref(j);
}

static json_t *
body_json(const struct oi *o)
{
	return o->len > 0 ? json_loadb(o->buf, o->len, 0, NULL) : NULL;
}

/* --- the handle ------------------------------------------------------ */

static void
hnd_wipe(struct oi_hnd *k)
{
	sodium_memzero(k, sizeof(*k));
}

/* k as the handle into out (TL_DRV_HANDLE_MAX). */
static int
hnd_write(const struct oi_hnd *k, char *out)
{
	json_t *j;
	char *s;
	size_t n;
	int rc = 0;

	j = json_pack("{s:s,s:s,s:s,s:s,s:s}", "client_id", k->id,
	    "client_secret", k->secret, "registration_access_token", k->rat,
	    "registration_client_uri", k->uri, "token_endpoint", k->token);
	if (j == NULL || (k->adopted[0] != '\0' && json_object_set_new(j,
	    "adopted_auth_method", json_string(k->adopted)) != 0)) {
		json_decref(j);
		return ENOMEM;
	}
	if ((s = json_dumps(j, JSON_COMPACT)) == NULL)
		rc = ENOMEM;
	else if ((n = strlen(s)) >= TL_DRV_HANDLE_MAX)
		rc = TL_ETOOBIG;
	else
		memcpy(out, s, n + 1);
	if (s != NULL) {
		sodium_memzero(s, strlen(s));
		free(s);
	}
	json_decref(j);
	return rc;
}

/* --- what tally registers -------------------------------------------- */

/*
 * g names what tally registers: a client name and a grant id.  k, when
 * not NULL, is the client recorded: one tally adopt took over keeps the
 * name it had, and g->login is then its client_id.
 */
static int
grant_ok(const struct tl_drv_grant *g, const struct oi_hnd *k, char *why)
{
	if ((k == NULL || k->adopted[0] == '\0') &&
	    (g->login == NULL || !tl_drv_oi_name_ok(g->login)))
		return tl_drv_why(why, TL_EINVAL,
		    "client name \"%.64s\": an oidc "
		    "client is named [a-z0-9_-], at most 63 bytes",
		    g->login ? g->login : "");
	if (g->grant == NULL || g->grant[0] == '\0')
		return tl_drv_why(why, TL_EINVAL,
		    "client %s: no grant id to register "
		    "as its software_id", g->login);
	return 0;
}

/*
 * The mark, the client's software_id: "tally mesh MESH grant ID" (MESH
 * the whole mesh id), or the grant id alone from a home without a mesh
 * id and from before marks named a mesh.
 */
#define OI_MESH_MARK	"tally mesh "

/*
 * How the client k authenticates at the token endpoint: as it was
 * registered when tally adopt took it over, else as g's requirement
 * declares (a param).
 */
static const char *
auth_method(const struct tl_drv_grant *g, const struct oi_hnd *k)
{
	const char *m = g != NULL ? tl_drv_setting_get(g->params,
	    "token-endpoint-auth-method") : NULL;

	if (k != NULL && k->adopted[0] != '\0')
		return k->adopted;
	return m != NULL ? m : "client_secret_basic";
}

/* g's mark (OI_MESH_MARK) into out. */
static void
mark_for(const struct oi *o, const struct tl_drv_grant *g, char *out,
    size_t cap)
{
	if (o->mesh[0] != '\0')
		snprintf(out, cap, OI_MESH_MARK "%s grant %s", o->mesh,
		    g->grant);
	else
		snprintf(out, cap, "%s", g->grant);
}

/*
 * w[key]: the '\n'-joined items of g's param (dflt when g's requirement
 * leaves it out; NULL: none, an empty list).
 */
static int
list_of(json_t *w, const char *key, const struct tl_drv_grant *g,
    const char *param, const char *dflt)
{
	const char *v = tl_drv_setting_get(g->params, param), *nl;
	json_t *a = json_array(), *it;

	if (v == NULL)
		v = dflt;
	for (; a != NULL && v != NULL; v = nl != NULL ? nl + 1 : NULL) {
		nl = strchr(v, '\n');
		it = json_stringn(v, nl != NULL ? (size_t)(nl - v) :
		    strlen(v));
		if (it == NULL || json_array_append_new(a, it) != 0) {
			json_decref(a);
			return -1;
		}
	}
	return a == NULL ? -1 : json_object_set_new(w, key, a);
}

/* The metadata tally registers for g (without client_id and secret). */
static json_t *
wanted(const struct oi *o, const struct tl_drv_grant *g)
{
	char mark[600];
	json_t *w;

	mark_for(o, g, mark, sizeof(mark));
	/* json_string refuses what is not UTF-8: no byte is sent raw. */
	w = json_pack("{s:s,s:s}", "client_name", g->login, "software_id",
	    mark);
	if (w == NULL ||
	    list_of(w, "grant_types", g, "grant-types",
	    "client_credentials") != 0 ||
	    list_of(w, "response_types", g, "response-types",
	    tl_drv_oi_has(g, "grant-types", "authorization_code",
	    "client_credentials") ? "code" : NULL) != 0 ||
	    list_of(w, "redirect_uris", g, "redirect-uris", NULL) != 0 ||
	    (tl_drv_setting_get(g->params, "post-logout-redirect-uris") !=
	    NULL && list_of(w, "post_logout_redirect_uris", g,
	    "post-logout-redirect-uris", NULL) != 0) ||
	    json_object_set_new(w, "token_endpoint_auth_method",
	    json_string(auth_method(g, NULL))) != 0) {
		json_decref(w);
		return NULL;
	}
	return w;
}

/*
 * What differs between the registration read back and what tally
 * registered, into diff ("" when nothing).
 */
static void
compare(const json_t *got, const json_t *want, char *diff, size_t cap)
{
	const char *key;
	json_t *w, *v;
	size_t n = 0;

	diff[0] = '\0';
	json_object_foreach((json_t *)want, key, w) {
		v = json_object_get(got, key);
		if (v != NULL && json_equal(v, w))
			continue;
		/* An empty list the server leaves out is the same list. */
		if (v == NULL && json_is_array(w) && json_array_size(w) == 0)
			continue;
		n += (size_t)snprintf(diff + n, n < cap ? cap - n : 0,
		    "%s%s", n ? ", " : "", key);
		if (n >= cap)
			break;
	}
}

/* --- the provider's operations --------------------------------------- */

/* POST the registration; the new handle into handle_out at once. */
static int
do_register(struct oi *o, const struct tl_drv_grant *g, struct oi_hnd *k,
    char *why)
{
	json_t *w, *r = NULL;
	char *body, rs[300];
	int rc;

	if ((w = wanted(o, g)) == NULL)
		return tl_drv_why(why, TL_EINVAL,
		    "client %s: the grant id is not "
		    "UTF-8", g->login);
	body = json_dumps(w, JSON_COMPACT);
	json_decref(w);
	if (body == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	rc = request(o, "POST", o->reg, o->iat, NULL, NULL, OI_JSON, body,
	    "register", why);
	free(body);
	if (rc != 0)
		return rc;
	if (o->status == 401 || o->status == 403) {
		reason(o, rs, sizeof(rs));
		return tl_drv_why(why, TL_EAUTH,
		    "register %s: the initial access "
		    "token is refused (%s)", g->login, rs);
	}
	if (o->status != 201 && o->status != 200) {
		reason(o, rs, sizeof(rs));
		return tl_drv_why(why, TL_EDRIVER,
		    "register %s: %s", g->login, rs);
	}
	memset(k, 0, sizeof(*k));
	r = body_json(o);
	if (r == NULL ||
	    tl_drv_oi_str(r, "client_id", k->id, sizeof(k->id)) ||
	    tl_drv_oi_str(r, "client_secret", k->secret, sizeof(k->secret)) ||
	    tl_drv_oi_str(r, "registration_access_token", k->rat,
	    sizeof(k->rat)) ||
	    tl_drv_oi_str(r, "registration_client_uri", k->uri,
	    sizeof(k->uri))) {
		rc = tl_drv_why(why, TL_EDRIVER,
		    "register %s: the answer lacks "
		    "client_id, client_secret or registration management "
		    "(an orphan client with software_id %.200s may exist)",
		    g->login, g->grant);
		goto out;
	}
	snprintf(k->token, sizeof(k->token), "%s", o->token);
	if ((rc = hnd_write(k, g->handle_out)) != 0) {
		rc = tl_drv_why(why, rc,
		    "register %s: client %s cannot be recorded",
		    g->login, k->id);
		goto out;
	}
	if (!same_origin(o, k->uri))
		rc = tl_drv_why(why, TL_EDRIVER, "register %s: client %s's "
		    "registration URI is not on the issuer's origin %s",
		    g->login, k->id, o->origin);
out:
	json_decref(r);
	return rc;
}

/* GET the registration: 0 with *got (200) or NULL (401/404: see gone). */
static int
do_read(struct oi *o, const struct oi_hnd *k, json_t **got, char *why)
{
	char rs[300];
	int rc;

	*got = NULL;
	if (!same_origin(o, k->uri))
		return tl_drv_why(why, TL_EINVAL,
		    "client %s: its registration URI "
		    "is not on the issuer's origin %s", k->id, o->origin);
	if ((rc = request(o, "GET", k->uri, k->rat, NULL, NULL, OI_NONE, NULL,
	    "read client", why)) != 0)
		return rc;
	if (o->status == 401 || o->status == 403 || o->status == 404)
		return 0;
	if (o->status != 200 || (*got = body_json(o)) == NULL) {
		reason(o, rs, sizeof(rs));
		return tl_drv_why(why, TL_EDRIVER,
		    "read client %s: %s", k->id, rs);
	}
	return 0;
}

/*
 * The form of a call that authenticates as k (the token endpoint,
 * introspection, revocation): base, and under client_secret_post k's
 * id and secret appended (*basic 0); else base alone and *basic 1 (HTTP
 * Basic, request's user and pass).  out (cap bytes) holds the secret:
 * the caller wipes it.
 */
static int
client_form(struct oi *o, const struct tl_drv_grant *g,
    const struct oi_hnd *k, const char *base, char *out, size_t cap,
    int *basic, char *why)
{
	char *id, *sec;
	int n;

	*basic = strcmp(auth_method(g, k), "client_secret_post") != 0;
	if (*basic) {
		n = snprintf(out, cap, "%s", base);
		return n >= 0 && (size_t)n < cap ? 0 : tl_drv_why(why,
		    TL_ETOOBIG, "client %s: the form is too long", k->id);
	}
	id = curl_easy_escape(o->c, k->id, 0);
	sec = curl_easy_escape(o->c, k->secret, 0);
	n = id != NULL && sec != NULL ? snprintf(out, cap, "%s&client_id=%s"
	    "&client_secret=%s", base, id, sec) : -1;
	if (sec != NULL) {
		sodium_memzero(sec, strlen(sec));
		curl_free(sec);
	}
	curl_free(id);
	if (n < 0)
		return tl_drv_why(why, ENOMEM, "out of memory");
	return (size_t)n < cap ? 0 : tl_drv_why(why, TL_ETOOBIG,
	    "client %s: the form is too long", k->id);
}

/*
 * A client_credentials token with k's secret: 0 with tok (a secret) set,
 * or 0 with tok "" and *refused when the token endpoint refuses the
 * client (gone, or its secret changed).  A client whose grant types
 * leave client_credentials out gets no token but is still told apart:
 * the endpoint authenticates it before it looks at the grant type, so a
 * 400 for the grant type (RFC 6749's unauthorized_client; oidc-provider
 * says invalid_request) is a secret that works (tok "", *refused 0), and
 * a 401 or invalid_client one that does not.  An adopted client's grant
 * types are its own, not the requirement's: told apart so.
 */
static int
do_token(struct oi *o, const struct tl_drv_grant *g, const struct oi_hnd *k,
    char *tok, size_t cap, int *refused, char *why)
{
	char form[3 * OI_SECRET_MAX + 3 * 512 + 64];
	json_t *r;
	const char *e;
	int rc, basic, cc = k->adopted[0] == '\0' && tl_drv_oi_has(g,
	    "grant-types", "client_credentials", "client_credentials");

	tok[0] = '\0';
	*refused = 0;
	if (!same_origin(o, k->token))
		return tl_drv_why(why, TL_EINVAL,
		    "client %s: its token endpoint is "
		    "not on the issuer's origin %s", k->id, o->origin);
	if ((rc = client_form(o, g, k, "grant_type=client_credentials", form,
	    sizeof(form), &basic, why)) != 0)
		return rc;
	rc = request(o, "POST", k->token, NULL, basic ? k->id : NULL,
	    basic ? k->secret : NULL, OI_FORM, form, "token", why);
	sodium_memzero(form, sizeof(form));
	if (rc != 0)
		return rc;
	if (o->status != 200) {
		r = body_json(o);
		e = json_string_value(json_object_get(r, "error"));
		*refused = cc || o->status == 401 || e == NULL ||
		    strcmp(e, "invalid_client") == 0;
		json_decref(r);
		if (*refused)
			reason(o, why, TL_WHY_MAX);
		return 0;
	}
	r = body_json(o);
	if (r == NULL || tl_drv_oi_str(r, "access_token", tok, cap) != 0) {
		json_decref(r);
		return tl_drv_why(why, TL_EDRIVER,
		    "token for client %s: the answer "
		    "has no access_token", k->id);
	}
	json_decref(r);
	return 0;
}

/*
 * Introspects tok as k (RFC 7662): *active set when it is active and
 * k's; then revokes it (RFC 7009), so a verification leaves none.
 */
static int
do_introspect_revoke(struct oi *o, const struct tl_drv_grant *g,
    const struct oi_hnd *k, const char *tok, int *active, char *why)
{
	char *esc, base[3 * OI_SECRET_MAX + 16], rs[300];
	char form[6 * OI_SECRET_MAX + 3 * 512 + 64];
	json_t *r;
	const char *cid, *user, *pass;
	int rc, basic;

	*active = 0;
	if ((esc = curl_easy_escape(o->c, tok, 0)) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	snprintf(base, sizeof(base), "token=%s", esc);
	sodium_memzero(esc, strlen(esc));
	curl_free(esc);
	rc = client_form(o, g, k, base, form, sizeof(form), &basic, why);
	sodium_memzero(base, sizeof(base));
	if (rc != 0)
		return rc;
	user = basic ? k->id : NULL;
	pass = basic ? k->secret : NULL;
	rc = request(o, "POST", o->introspect, NULL, user, pass, OI_FORM,
	    form, "introspect", why);
	if (rc == 0 && o->status == 200 && (r = body_json(o)) != NULL) {
		cid = json_string_value(json_object_get(r, "client_id"));
		*active = json_is_true(json_object_get(r, "active")) &&
		    cid != NULL && strcmp(cid, k->id) == 0;
		json_decref(r);
	} else if (rc == 0) {
		reason(o, rs, sizeof(rs));
		rc = tl_drv_why(why, TL_EDRIVER, "introspect for client %s: %s",
		    k->id, rs);
	}
	if (rc == 0 && o->revoke[0] != '\0') {
		rc = request(o, "POST", o->revoke, NULL, user, pass,
		    OI_FORM, form, "revoke token", why);
		if (rc == 0 && o->status != 200) {
			reason(o, rs, sizeof(rs));
			rc = tl_drv_why(why, TL_EDRIVER,
			    "revoke the check's token of "
			    "client %s: %s", k->id, rs);
		}
	}
	sodium_memzero(form, sizeof(form));
	return rc;
}

/* The admin recovery of a lost registration access token, for why. */
static int
rat_lost(const struct oi_hnd *k, char *why)
{
	return tl_drv_why(why, TL_EDRIVER,
	    "client %s still gets tokens but its "
	    "registration access token is refused: tally can no longer "
	    "manage it; an admin of the identity provider must issue a new "
	    "one (Keycloak: the client's Credentials tab, Registration access "
	    "token, Regenerate) or delete the client, then tally repair",
	    k->id);
}

/*
 * A registration that GET refuses: gone (*gone) when the token endpoint
 * refuses the client too, else the RAT is lost (TL_EDRIVER).
 */
static int
refused_why(struct oi *o, const struct tl_drv_grant *g,
    const struct oi_hnd *k, int *gone, char *why)
{
	char tok[OI_SECRET_MAX], tw[TL_WHY_MAX];
	int refused, rc;

	*gone = 0;
	rc = do_token(o, g, k, tok, sizeof(tok), &refused, tw);
	sodium_memzero(tok, sizeof(tok));
	if (rc != 0)
		return tl_drv_why(why, rc, "%s", tw);
	if (refused) {
		*gone = 1;
		return 0;
	}
	return rat_lost(k, why);
}

/*
 * PUTs w as k's whole record (RFC 7592), with k's client_id and secret
 * set in it; the new RAT (and the secret the server returns) into k and
 * handle_out before anything else.
 */
static int
put_record(struct oi *o, const struct tl_drv_grant *g, struct oi_hnd *k,
    json_t *w, char *why)
{
	json_t *r = NULL;
	char *body, rs[300], rat[OI_SECRET_MAX];
	int rc, gone;

	if (json_object_set_new(w, "client_id", json_string(k->id)) != 0 ||
	    json_object_set_new(w, "client_secret",
	    json_string(k->secret)) != 0 ||
	    (body = json_dumps(w, JSON_COMPACT)) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	rc = request(o, "PUT", k->uri, k->rat, NULL, NULL, OI_JSON, body,
	    "update client", why);
	sodium_memzero(body, strlen(body));
	free(body);
	if (rc != 0)
		return rc;
	if (o->status == 401 || o->status == 403) {
		if ((rc = refused_why(o, g, k, &gone, why)) != 0)
			return rc;
		return tl_drv_why(why, TL_EDRIVER, "client %s is gone from the "
		    "identity provider", k->id);
	}
	if (o->status != 200 || (r = body_json(o)) == NULL) {
		reason(o, rs, sizeof(rs));
		return tl_drv_why(why, TL_EDRIVER,
		    "update client %s: %s", k->id, rs);
	}
	/* The old RAT is dead now: keep the new one first. */
	if (tl_drv_oi_str(r, "registration_access_token", rat,
	    sizeof(rat)) == 0)
		memcpy(k->rat, rat, sizeof(rat));
	tl_drv_oi_str(r, "client_secret", k->secret, sizeof(k->secret));
	sodium_memzero(rat, sizeof(rat));
	json_decref(r);
	if ((rc = hnd_write(k, g->handle_out)) != 0)
		return tl_drv_why(why, rc,
		    "client %s: the new registration access "
		    "token cannot be recorded", k->id);
	return 0;
}

/* PUTs the record tally registers for g back (put_record). */
static int
do_put(struct oi *o, const struct tl_drv_grant *g, struct oi_hnd *k,
    char *why)
{
	json_t *w;
	int rc;

	if ((w = wanted(o, g)) == NULL)
		return tl_drv_why(why, TL_EINVAL,
		    "client %s: the grant id is not "
		    "UTF-8", g->login);
	rc = put_record(o, g, k, w, why);
	json_decref(w);
	return rc;
}

/* --- the session ----------------------------------------------------- */

static void oi_close(void *h);

static int
discover(struct oi *o, char *why)
{
	char url[OI_URL_MAX + 64], rs[300];
	json_t *d;
	const char *iss;
	int rc;

	snprintf(url, sizeof(url), "%s/.well-known/openid-configuration",
	    o->issuer);
	if ((rc = request(o, "GET", url, NULL, NULL, NULL, OI_NONE, NULL,
	    "discovery", why)) != 0)
		return rc;
	if (o->status != 200 || (d = body_json(o)) == NULL) {
		reason(o, rs, sizeof(rs));
		return tl_drv_why(why, TL_EUNREACH,
		    "discovery at %s: %s", url, rs);
	}
	iss = json_string_value(json_object_get(d, "issuer"));
	if (iss == NULL || strcmp(iss, o->issuer) != 0) {
		rc = tl_drv_why(why, TL_EDRIVER, "discovery at %s names issuer "
		    "\"%.200s\", not %s", url, iss ? iss : "", o->issuer);
		goto out;
	}
	if (tl_drv_oi_str(d, "registration_endpoint", o->reg,
	    sizeof(o->reg)) ||
	    tl_drv_oi_str(d, "token_endpoint", o->token, sizeof(o->token)) ||
	    tl_drv_oi_str(d, "introspection_endpoint", o->introspect,
	    sizeof(o->introspect))) {
		rc = tl_drv_why(why, TL_EDRIVER,
		    "issuer %s has no registration, "
		    "token or introspection endpoint (RFC 7591, RFC 7662)",
		    o->issuer);
		goto out;
	}
	tl_drv_oi_str(d, "revocation_endpoint", o->revoke, sizeof(o->revoke));
	if (!same_origin(o, o->reg) || !same_origin(o, o->token) ||
	    !same_origin(o, o->introspect) ||
	    (o->revoke[0] != '\0' && !same_origin(o, o->revoke)))
		rc = tl_drv_why(why, TL_EDRIVER,
		    "issuer %s: an endpoint of its "
		    "discovery document is on another origin", o->issuer);
out:
	json_decref(d);
	return rc;
}

static int
oi_open(const struct tl_drv_admin *a, void **hp, char *why)
{
	struct oi *o;
	const char *iss = tl_drv_setting_get(a->settings, "issuer");
	char host[256];
	size_t n;
	int rc;

	*hp = NULL;
	if (tl_drv_http_init() != 0)
		return tl_drv_why(why, TL_EDRIVER,
		    "libcurl cannot be initialised");
	if (iss == NULL || *iss == '\0' || strlen(iss) >= OI_URL_MAX)
		return tl_drv_why(why, TL_EINVAL, "an oidc provider needs the "
		    "setting issuer (the issuer's URL)");
	if (a->password == NULL || *a->password == '\0' ||
	    strlen(a->password) >= OI_SECRET_MAX)
		return tl_drv_why(why, TL_EINVAL, "an oidc provider needs the "
		    "initial access token (--secret initial-access-token)");
	if ((o = sodium_malloc(sizeof(*o))) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	memset(o, 0, sizeof(*o));
	snprintf(o->issuer, sizeof(o->issuer), "%s", iss);
	n = strlen(o->issuer);
	if (n > 0 && o->issuer[n - 1] == '/' && strchr(o->issuer + 8, '/') !=
	    o->issuer + n - 1)
		o->issuer[n - 1] = '\0';	/* ISSUER/path/ as ISSUER/path */
	if ((rc = origin_of(o->issuer, o->origin, sizeof(o->origin))) != 0) {
		rc = tl_drv_why(why, TL_EINVAL,
		    "issuer %s: https, or http only on "
		    "loopback (127.0.0.1, [::1], localhost)", o->issuer);
		goto err;
	}
	/* The issuer's scheme is the transport; tls says how it is held. */
	o->tls = tl_drv_reach(&tl_drv_oidc_decl, a->settings, a->host, host,
	    sizeof(host));
	if ((o->tls == TL_DRV_TLS_OFF) != (strncmp(o->issuer, "http://", 7) ==
	    0)) {
		rc = tl_drv_why(why, TL_EINVAL, "issuer %s with tls=%s: an "
		    "https issuer with tls verify or require, an http one "
		    "(loopback only) with tls off", o->issuer,
		    tl_drv_tls_name(o->tls));
		goto err;
	}
	snprintf(o->iat, sizeof(o->iat), "%s", a->password);
	snprintf(o->mesh, sizeof(o->mesh), "%s", a->mesh != NULL ? a->mesh :
	    "");
	if ((o->c = curl_easy_init()) == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto err;
	}
	curl_easy_setopt(o->c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(o->c, CURLOPT_CONNECTTIMEOUT_MS, (long)OI_CONNECT_MS);
	curl_easy_setopt(o->c, CURLOPT_TIMEOUT_MS, (long)OI_TIMEOUT_MS);
	curl_easy_setopt(o->c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(o->c, CURLOPT_WRITEDATA, o);
	curl_easy_setopt(o->c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(o->c, CURLOPT_PROTOCOLS_STR, "http,https");
	if ((rc = tl_drv_http_tls(o->c, o->tls, a->ca_file, 1, o->err,
	    why)) != 0 || (rc = discover(o, why)) != 0)
		goto err;
	*hp = o;
	return 0;
err:
	oi_close(o);
	return rc;
}

static void
oi_close(void *h)
{
	struct oi *o = h;

	if (o == NULL)
		return;
	if (o->c != NULL)
		curl_easy_cleanup(o->c);
	tl_secret_free(o->buf);
	sodium_free(o);
}

/* --- operations ------------------------------------------------------ */

static int
need_out(const struct tl_drv_grant *g, char *why)
{
	if (g->handle_out == NULL)
		return tl_drv_why(why, TL_EINVAL,
		    "client %s: the caller records no "
		    "secret handle (the oidc driver needs one)",
		    g->login ? g->login : "");
	g->handle_out[0] = '\0';
	return 0;
}

/*
 * Whose the client read back is, by its software_id: OURS, this mesh's
 * for g; ADOPT, g's to be marked again (marked before marks named a
 * mesh, or by g->adopt_mesh); MESH, g's grant id marked by another mesh
 * (owner gets its id: refused, TL_EREFUSED); OTHER, not g's at all.
 */
enum oi_mark { OI_OURS, OI_ADOPT, OI_MESH, OI_OTHER };

static enum oi_mark
ours(const struct oi *o, const json_t *got, const struct tl_drv_grant *g,
    char owner[33])
{
	const char *sid = json_string_value(json_object_get(got,
	    "software_id"));
	size_t ml = strlen(OI_MESH_MARK);
	char m[33];

	owner[0] = '\0';
	if (sid == NULL || g->grant == NULL)
		return OI_OTHER;
	if (strncmp(sid, OI_MESH_MARK, ml) == 0 && strlen(sid) > ml + 32 &&
	    strncmp(sid + ml + 32, " grant ", 7) == 0) {
		if (strcmp(sid + ml + 32 + 7, g->grant) != 0)
			return OI_OTHER;
		memcpy(m, sid + ml, 32);
		m[32] = '\0';
		if (strcmp(m, o->mesh) == 0)
			return OI_OURS;
		if (g->adopt_mesh != NULL && strcmp(g->adopt_mesh, m) == 0)
			return OI_ADOPT;
		memcpy(owner, m, sizeof(m));
		return OI_MESH;
	}
	if (strcmp(sid, g->grant) != 0)
		return OI_OTHER;
	return o->mesh[0] != '\0' ? OI_ADOPT : OI_OURS;
}

/* Another mesh's client: refused, naming the mesh (why). */
static int
other_mesh(const char *id, const char *owner, char *why)
{
	return tl_drv_why(why, TL_EREFUSED, "client %s is owned by mesh "
	    "%.12s..., not this one (tally adopt --from-mesh takes it over): "
	    "not touched", id, owner);
}

/*
 * Makes sure g's client is there as tally registers it: registers one
 * when none is recorded (or the recorded one is gone), PUTs the record
 * back when its metadata changed.  create, add_credential,
 * fix_privileges (may_register 0: a client gone is not made again).
 */
static int
ensure(struct oi *o, const struct tl_drv_grant *g, int may_register,
    char *why)
{
	struct oi_hnd k;
	json_t *got = NULL, *want = NULL;
	char diff[200], owner[33];
	enum oi_mark mk;
	int rc, gone;

	if ((rc = need_out(g, why)) != 0)
		return rc;
	if ((rc = tl_drv_oi_hnd_read(g, &k, why)) == TL_ENOTFOUND) {
		if ((rc = grant_ok(g, NULL, why)) != 0)
			goto out;
		if (!may_register) {
			rc = tl_drv_why(why, TL_EDRIVER, "client %s: none is "
			    "recorded", g->login);
			goto out;
		}
		rc = do_register(o, g, &k, why);
		if (rc == 0)
			tl_drv_why(why, 0,
			    "client %s registered as %s", g->login,
			    k.id);
		goto out;
	}
	if (rc != 0 || (rc = grant_ok(g, &k, why)) != 0)
		goto out;
	if ((rc = do_read(o, &k, &got, why)) != 0)
		goto out;
	if (got == NULL) {
		if ((rc = refused_why(o, g, &k, &gone, why)) != 0)
			goto out;
		if (k.adopted[0] != '\0') {
			rc = tl_drv_why(why, TL_EDRIVER, "client %s, which "
			    "tally adopt took over, is gone from the identity "
			    "provider", k.id);
			goto out;
		}
		if (!may_register) {
			rc = tl_drv_why(why, TL_EDRIVER,
			    "client %s is gone from the "
			    "identity provider (tally repair registers a new "
			    "one, with a new client-id)", k.id);
			goto out;
		}
		rc = do_register(o, g, &k, why);
		if (rc == 0)
			tl_drv_why(why, 0,
			    "client %s was gone: registered again as "
			    "%s (a new client-id)", g->login, k.id);
		goto out;
	}
	if ((mk = ours(o, got, g, owner)) == OI_MESH) {
		rc = other_mesh(k.id, owner, why);
		goto out;
	}
	if (mk == OI_OTHER) {
		rc = tl_drv_why(why, TL_EINVAL,
		    "client %s is not grant %.200s's "
		    "(its software_id is another's): not touched", k.id,
		    g->grant);
		goto out;
	}
	/*
	 * What tally adopt took over keeps its metadata until the rotation
	 * that follows the adoption retires it: the requirement's is the
	 * new client's.
	 */
	if (k.adopted[0] != '\0') {
		rc = tl_drv_why(why, 0, "client %s, which tally adopt took "
		    "over, is kept as it was until the rotation retires it",
		    k.id);
		goto out;
	}
	if ((want = wanted(o, g)) == NULL) {
		rc = tl_drv_why(why, TL_EINVAL,
		    "client %s: the grant id is not "
		    "UTF-8", g->login);
		goto out;
	}
	compare(got, want, diff, sizeof(diff));
	if (diff[0] == '\0') {
		rc = tl_drv_why(why, 0,
		    "client %s is there as registered", k.id);
		goto out;
	}
	if ((rc = do_put(o, g, &k, why)) == 0)
		tl_drv_why(why, 0, "client %s: %s restored", k.id, diff);
out:
	json_decref(got);
	json_decref(want);
	hnd_wipe(&k);
	return rc;
}

/* --- tally adopt ----------------------------------------------------- */

/*
 * The members of a client's record that are the server's, which a PUT
 * must not send back (RFC 7592 section 2.2).
 */
static const char *const oi_server_members[] = {
	"registration_access_token", "registration_client_uri",
	"client_secret_expires_at", "client_id_issued_at", NULL
};

/* Is s a grant id (module/requirement[@node]), as an unnamed mark is? */
static int
grant_shaped(const char *s)
{
	return strchr(s, '/') != NULL && strspn(s,
	    "abcdefghijklmnopqrstuvwxyz0123456789_-./@") == strlen(s);
}

/*
 * Whether client id, whose software_id is sid (NULL: none), may become
 * g's: 0 when it is no mark of tally's, or g's own (a resumed adoption;
 * the mesh adopt_mesh names); TL_EREFUSED when another mesh marked it;
 * TL_EDRIVER when this mesh (or a tally before marks named a mesh)
 * marked it for another grant.  A software_id shaped like a grant id is
 * taken for such a mark: tally never hands one grant's client to
 * another, and its owner can change it at the provider.
 */
static int
adoptable(const struct oi *o, const struct tl_drv_grant *g, const char *id,
    const char *sid, char *why)
{
	size_t ml = strlen(OI_MESH_MARK);
	const char *other;
	char m[33];

	if (sid == NULL || strcmp(sid, g->grant) == 0)
		return 0;
	if (strncmp(sid, OI_MESH_MARK, ml) != 0 || strlen(sid) <= ml + 32 ||
	    strncmp(sid + ml + 32, " grant ", 7) != 0) {
		if (!grant_shaped(sid))
			return 0;
		return tl_drv_why(why, TL_EDRIVER, "client %s was made by "
		    "tally for grant %.200s (a mark from before marks named "
		    "a mesh): tally adopt takes over only what tally did not "
		    "make", id, sid);
	}
	memcpy(m, sid + ml, 32);
	m[32] = '\0';
	other = sid + ml + 32 + 7;
	if (strcmp(m, o->mesh) != 0 && (g->adopt_mesh == NULL ||
	    strcmp(m, g->adopt_mesh) != 0)) {
		if (strcmp(other, g->grant) != 0)
			return tl_drv_why(why, TL_EREFUSED, "client %s was "
			    "made by tally for grant %.200s of mesh %.12s..., "
			    "not this one: not touched", id, other, m);
		return other_mesh(id, m, why);
	}
	if (strcmp(other, g->grant) != 0)
		return tl_drv_why(why, TL_EDRIVER, "client %s was made by tally "
		    "for grant %.200s: tally adopt takes over only what tally "
		    "did not make", id, other);
	return 0;
}

/*
 * The client tally adopt names (g->adopting): g->resource its client_id,
 * g->password the registration access token its operator gave, or the
 * handle the first call recorded when this one resumes.  RFC 7592 gives
 * a client's URI only in the answer to its registration; oidc-provider
 * and Keycloak both put it at the registration endpoint + "/" +
 * client_id, which is where it is looked for.  k's adopted is left "".
 */
static int
adopt_handle(struct oi *o, const struct tl_drv_grant *g, struct oi_hnd *k,
    char *why)
{
	const char *id = g->resource;
	char *esc;
	int rc, n;

	if ((rc = tl_drv_oi_hnd_read(g, k, why)) != TL_ENOTFOUND)
		return rc;
	if (id == NULL || *id == '\0' || strlen(id) >= sizeof(k->id))
		return tl_drv_why(why, TL_EINVAL, "tally adopt names no client "
		    "id the oidc driver takes (1 to %zu bytes)",
		    sizeof(k->id) - 1);
	if (g->password == NULL || *g->password == '\0' ||
	    strlen(g->password) >= sizeof(k->rat))
		return tl_drv_why(why, TL_EINVAL, "client %s: tally adopt "
		    "needs its registration access token (--secret-stdin)",
		    id);
	if ((esc = curl_easy_escape(o->c, id, 0)) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	n = snprintf(k->uri, sizeof(k->uri), "%s/%s", o->reg, esc);
	curl_free(esc);
	if (n < 0 || (size_t)n >= sizeof(k->uri))
		return tl_drv_why(why, TL_EINVAL, "client %s: its registration "
		    "URI is too long", id);
	memcpy(k->id, id, strlen(id) + 1);
	memcpy(k->rat, g->password, strlen(g->password) + 1);
	snprintf(k->token, sizeof(k->token), "%s", o->token);
	return 0;
}

/*
 * tally adopt (g->adopting): the client g->resource, registered by
 * someone else, becomes g's.  Its whole record is PUT back as it is, its
 * software_id replaced by g's mark: its redirect URIs, grant types and
 * secret stay, for its consumers keep using it until the rotation that
 * follows retires it (the requirement's metadata is the new client's).
 * The PUT's answer (a new RAT) is the handle, written at once.
 * Resumable: a resumed call reads the handle the first one recorded,
 * and a client already marked as g's is left as it is.  A client whose
 * PUT answered but whose handle was not recorded is lost to tally: the
 * PUT killed the RAT its operator gave.
 */
static int
adopt(struct oi *o, const struct tl_drv_grant *g, char *why)
{
	struct oi_hnd k;
	json_t *got = NULL;
	const char *cid, *sid, *m;
	const char *const *f;
	char mark[600], rs[300];
	int rc, gone, resumed;
	size_t nr;

	if ((rc = need_out(g, why)) != 0)
		return rc;
	if (g->grant == NULL || g->grant[0] == '\0')
		return tl_drv_why(why, TL_EINVAL, "client %s: no grant id to "
		    "mark it with", g->resource ? g->resource : "");
	if ((rc = adopt_handle(o, g, &k, why)) != 0)
		goto out;
	resumed = g->handle != NULL && g->handle[0] != '\0';
	if ((rc = do_read(o, &k, &got, why)) != 0)
		goto out;
	if (got == NULL && resumed) {
		if ((rc = refused_why(o, g, &k, &gone, why)) == 0)
			rc = tl_drv_why(why, TL_EDRIVER, "client %s is gone "
			    "from the identity provider: nothing to adopt",
			    k.id);
		goto out;
	}
	if (got == NULL) {
		/*
		 * RFC 7592 section 2.1 answers a client that does not exist
		 * with a 401, as a wrong token, and has the server revoke a
		 * right token sent for it: only a 404 tells them apart.
		 */
		reason(o, rs, sizeof(rs));
		rc = o->status == 404 ? tl_drv_why(why, TL_EDRIVER, "client "
		    "%.100s does not exist at the identity provider (%.120s): "
		    "nothing to adopt", k.id, rs) : tl_drv_why(why,
		    TL_EDRIVER, "client %.100s: the identity provider refuses "
		    "the registration access token given to tally adopt "
		    "(%.120s), as it does for a client id it does not know "
		    "(RFC 7592, which has it revoke a right token sent with a "
		    "wrong id): nothing to adopt", k.id, rs);
		goto out;
	}
	cid = json_string_value(json_object_get(got, "client_id"));
	if (cid == NULL || strcmp(cid, k.id) != 0) {
		rc = tl_drv_why(why, TL_EDRIVER, "read client %s: the answer "
		    "names another client", k.id);
		goto out;
	}
	sid = json_string_value(json_object_get(got, "software_id"));
	if ((rc = adoptable(o, g, k.id, sid, why)) != 0)
		goto out;
	/* RFC 7591's default method, when the record names none. */
	m = json_string_value(json_object_get(got,
	    "token_endpoint_auth_method"));
	if (m == NULL)
		m = "client_secret_basic";
	if (strcmp(m, "client_secret_basic") != 0 &&
	    strcmp(m, "client_secret_post") != 0) {
		rc = tl_drv_why(why, TL_EDRIVER, "client %s authenticates with "
		    "%.40s: tally adopts a client with a secret "
		    "(client_secret_basic or client_secret_post)", k.id, m);
		goto out;
	}
	if (tl_drv_oi_str(got, "client_secret", k.secret,
	    sizeof(k.secret)) != 0) {
		rc = tl_drv_why(why, TL_EDRIVER, "client %s: the identity "
		    "provider shows no secret of it: tally adopts a client "
		    "with a secret", k.id);
		goto out;
	}
	snprintf(k.adopted, sizeof(k.adopted), "%s", m);
	mark_for(o, g, mark, sizeof(mark));
	nr = json_array_size(json_object_get(got, "redirect_uris"));
	if (resumed && sid != NULL && strcmp(sid, mark) == 0) {
		rc = tl_drv_why(why, 0, "client %s adopted already", k.id);
		goto out;
	}
	for (f = oi_server_members; *f != NULL; f++)
		json_object_del(got, *f);
	if (json_object_set_new(got, "software_id", json_string(mark)) != 0) {
		rc = tl_drv_why(why, TL_EINVAL, "client %s: the grant id is "
		    "not UTF-8", k.id);
		goto out;
	}
	if ((rc = put_record(o, g, &k, got, why)) == 0)
		tl_drv_why(why, 0, "client %s adopted: marked as grant %.200s's "
		    "(software_id), its %zu redirect URI%s, grant types, "
		    "authentication (%s) and secret kept as they were until "
		    "the rotation retires it", k.id, g->grant, nr,
		    nr == 1 ? "" : "s", k.adopted);
out:
	json_decref(got);
	hnd_wipe(&k);
	return rc;
}

static int
oi_create(void *h, const struct tl_drv_grant *g, char *why)
{
	if (g->adopting)
		return adopt(h, g, why);
	return ensure(h, g, 1, why);
}

static int
oi_fix_privileges(void *h, const struct tl_drv_grant *g, char *why)
{
	return ensure(h, g, 0, why);
}

static int
oi_check(void *h, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	struct oi *o = h;
	struct oi_hnd k;
	json_t *got = NULL, *want = NULL;
	char diff[200], tok[OI_SECRET_MAX], tw[TL_WHY_MAX], owner[33];
	enum oi_mark mk;
	int rc, gone, refused, active, notok;

	(void)ep;
	*drift = TL_DRIFT_NONE;
	if ((rc = tl_drv_oi_hnd_read(g, &k, why)) == TL_ENOTFOUND) {
		if ((rc = grant_ok(g, NULL, why)) != 0)
			return rc;
		*drift = TL_DRIFT_MISSING;
		return tl_drv_why(why, 0,
		    "client %s: none is recorded", g->login);
	}
	if (rc != 0 || (rc = grant_ok(g, &k, why)) != 0)
		goto out;
	if ((rc = do_read(o, &k, &got, why)) != 0)
		goto out;
	if (got == NULL) {
		if ((rc = refused_why(o, g, &k, &gone, why)) == TL_EDRIVER) {
			/* The RAT is lost: a drift a person must act on. */
			*drift = TL_DRIFT_CREDENTIAL;
			rc = 0;
		} else if (rc == 0 && gone) {
			*drift = TL_DRIFT_MISSING;
			tl_drv_why(why, 0,
			    "client %s is gone from the identity "
			    "provider (flagged: a new registration would "
			    "change the client-id; tally repair makes one)",
			    k.id);
		}
		goto out;
	}
	if ((mk = ours(o, got, g, owner)) == OI_MESH) {
		*drift = TL_DRIFT_MISSING;
		other_mesh(k.id, owner, why);
		goto out;
	}
	if (mk == OI_OTHER) {
		*drift = TL_DRIFT_MISSING;
		tl_drv_why(why, 0, "client %s is no longer grant %.200s's (its "
		    "software_id changed)", k.id, g->grant);
		goto out;
	}
	/* An adopted client's metadata is its own (ensure): not compared. */
	diff[0] = '\0';
	if (k.adopted[0] == '\0' && (want = wanted(o, g)) == NULL) {
		rc = tl_drv_why(why, TL_EINVAL,
		    "client %s: the grant id is not "
		    "UTF-8", g->login);
		goto out;
	}
	/* g's, marked again by the next change: not a drift. */
	if (want != NULL && mk == OI_ADOPT)
		json_object_del(want, "software_id");
	if (want != NULL)
		compare(got, want, diff, sizeof(diff));
	if ((rc = do_token(o, g, &k, tok, sizeof(tok), &refused, tw)) != 0) {
		tl_drv_why(why, rc, "%s", tw);
		goto out;
	}
	if (refused) {
		*drift = TL_DRIFT_CREDENTIAL;
		tl_drv_why(why, 0, "client %s: the token endpoint refuses its "
		    "delivered secret (%s)", k.id, tw);
		goto out;
	}
	/*
	 * Authenticated, but no token to look at: client_credentials is
	 * not among its grant types.
	 */
	notok = tok[0] == '\0';
	if (notok)
		active = 1;
	else
		rc = do_introspect_revoke(o, g, &k, tok, &active, why);
	sodium_memzero(tok, sizeof(tok));
	if (rc != 0)
		goto out;
	if (!active) {
		*drift = TL_DRIFT_CREDENTIAL;
		tl_drv_why(why, 0,
		    "client %s: its fresh token is not active at "
		    "introspection", k.id);
	} else if (diff[0] != '\0') {
		*drift = TL_DRIFT_PRIVILEGES;
		tl_drv_why(why, 0,
		    "client %s: %s changed since tally registered it",
		    k.id, diff);
	} else if (k.adopted[0] != '\0')
		tl_drv_why(why, 0, notok ? "client %s, which tally adopt took "
		    "over, is kept as it was and its secret is accepted" :
		    "client %s, which tally adopt took over, is kept as it "
		    "was and gets tokens", k.id);
	else
		tl_drv_why(why, 0, notok ? "client %s is as registered and "
		    "its secret is accepted" : "client %s is as registered "
		    "and gets tokens", k.id);
out:
	json_decref(got);
	json_decref(want);
	hnd_wipe(&k);
	return rc;
}

/*
 * The secret is the provider's: set_password restores the record (a
 * PUT, which also returns the secret the provider has now, recorded
 * in the new handle).
 */
static int
oi_set_password(void *h, const struct tl_drv_grant *g, char *why)
{
	return ensure(h, g, 0, why);
}

/* Deletes g's client; one that is gone is 0. */
static int
oi_revoke(void *h, const struct tl_drv_grant *g, int drop, char *why)
{
	struct oi *o = h;
	struct oi_hnd k;
	json_t *got = NULL;
	char rs[300], owner[33];
	int rc, gone;

	(void)drop;		/* nothing to retain: both delete */
	if ((rc = tl_drv_oi_hnd_read(g, &k, why)) == TL_ENOTFOUND)
		return tl_drv_why(why, 0, "client %s: none is recorded",
		    g->login ? g->login : "");
	if (rc != 0)
		return rc;
	if ((rc = do_read(o, &k, &got, why)) != 0)
		goto out;
	if (got == NULL) {
		if ((rc = refused_why(o, g, &k, &gone, why)) == 0)
			tl_drv_why(why, 0, "client %s was gone already", k.id);
		goto out;
	}
	if (g->grant != NULL && g->grant[0] != '\0' &&
	    ours(o, got, g, owner) == OI_MESH) {
		rc = other_mesh(k.id, owner, why);
		goto out;
	}
	if (g->grant != NULL && g->grant[0] != '\0' &&
	    ours(o, got, g, owner) == OI_OTHER) {
		rc = tl_drv_why(why, TL_EINVAL,
		    "client %s is not grant %.200s's: "
		    "not deleted", k.id, g->grant);
		goto out;
	}
	if ((rc = request(o, "DELETE", k.uri, k.rat, NULL, NULL, OI_NONE,
	    NULL, "delete client", why)) != 0)
		goto out;
	if (o->status != 204 && o->status != 200) {
		reason(o, rs, sizeof(rs));
		rc = tl_drv_why(why, TL_EDRIVER,
		    "delete client %s: %s", k.id, rs);
		goto out;
	}
	tl_drv_why(why, 0, "client %s deleted", k.id);
out:
	json_decref(got);
	hnd_wipe(&k);
	return rc;
}

static int
oi_add_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	return ensure(h, g, 1, why);
}

static int
oi_retire_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	return oi_revoke(h, g, 1, why);
}

const struct tl_drv_ops tl_drv_oidc = {
	.decl = &tl_drv_oidc_decl,
	.open = oi_open,
	.close = oi_close,
	.create = oi_create,
	.check = oi_check,
	.set_password = oi_set_password,
	.fix_privileges = oi_fix_privileges,
	.revoke = oi_revoke,
	.add_credential = oi_add_credential,
	.retire_credential = oi_retire_credential,
};
