/*
 * ceph_rgw.c - the Ceph RGW driver: an S3 bucket and a user with its own
 * keys per grant.  These are its operations; its declaration (type,
 * settings, fields, revocation, fencing, names, compose, and the access
 * key and name rules they share with the operations) is ceph_rgw_decl.c's.
 *
 * What a grant is on the object store (create makes it, check verifies
 * it, fix_privileges restores it):
 *
 *   login	an RGW user (never the admin), uid the shared scheme's name
 *		(drivers/naming.c: PREFIX_DIGEST), its display-name the
 *		grant's mark ("tally mesh MESH grant ID"), not suspended,
 *		no caps, max-buckets 1;
 *   keys	one S3 key pair per credential version: the secret key is
 *		tally's password of that version (RGW takes a client-chosen
 *		secret-key), the access key "TL" + 18 hex digits of
 *		BLAKE2b(uid, password), so both follow from what tally
 *		already keeps and nothing new is recorded;
 *   resource	one bucket, the uid with "_" as "-" (bucket names are
 *		[a-z0-9.-]), owned by that user, made by it (S3 PUT signed
 *		with its own key), without a bucket policy.
 *
 * Bucket names are global to the gateway and any user may create one
 * (a consumer that deleted its own bucket can create another), so the
 * names are keyed (keyed_names: scheme 3, drivers/naming.c): their
 * digest is keyed by the mesh's naming key, and no consumer can compute
 * the bucket of a grant not yet made and take it first.
 *
 * Credential model TL_DRV_CRED_MULTI_PASSWORD: every version is the same
 * user; a rotation adds the new version's key beside the old
 * (add_credential) and removes the old version's key, derived again from
 * the old password (retire_credential).  S3 has no sessions: nothing to
 * corroborate (sessions NULL).
 *
 * Everything goes over HTTP with libcurl's SigV4 (CURLOPT_AWS_SIGV4,
 * "aws:amz:REGION:s3"): the admin ops API (/admin/user, /admin/bucket)
 * with the admin's key, S3 with the consumer's.  Two pitfalls of
 * libcurl 7.88 (../shared/RECIPES.md): it does not send
 * x-amz-content-sha256 (sent here: UNSIGNED-PAYLOAD, the bodies are
 * empty) and it signs the query as given, so query parameters are
 * passed sorted by name, each value through curl_easy_escape (the
 * encoding SigV4's canonical query wants).  The admin API answers with
 * the users' secret keys: response bodies live in guarded memory.
 * The admin API takes secret-key as a query parameter (it has no body
 * form in this release): the provider's own request log may record it
 * at high debug levels; tally logs nothing of it.
 *
 * Whose objects are: a user is this grant's when its display-name is the
 * grant's mark (or the unnamed mark and adopt_unnamed); a mark naming no
 * mesh (before ids) is taken and marked again; one naming another mesh is
 * refused by every change (TL_EREFUSED) and missing to check, unless
 * adopt_mesh names that mesh: create then removes every key but the
 * grant's (what the lost mesh delivered) before marking it again; any
 * other user under the uid is refused.
 *
 * Adopting (find_marked): the names are keyed by the mesh's naming key,
 * so a mesh that adopts a lost one's grant cannot compute them; it lists
 * the users (GET /admin/user?list) whose uid has the grant's prefix and
 * a digest, and reads the display-name of each: the one whose mark names
 * the lost mesh and the grant is the grant's, its bucket the uid with
 * "-" (names then gives those, tl_drv_name_in.adopted).
 * The bucket is the grant's when it is owned by the grant's user; one
 * owned by anyone else is refused.
 *
 * Taking over what tally did not make (tally adopt --resource BUCKET
 * --login UID, g->adopting): create checks that the bucket and the
 * user exist, carry no mark (another grant's: TL_EDRIVER; another
 * mesh's: TL_EREFUSED), that the user is no admin and owns no other
 * bucket, and then marks the user as the grant's, makes it what a
 * grant's user is and gives it the bucket (linked when it is another's
 * and empty: linking leaves the objects' ACLs to their writer), private
 * and without a policy.  The user's keys stay, no key of tally's is
 * added (the password is not the adopted credential); the rotation that
 * follows adds the new version's key (add_credential) and, once every
 * holder has it, retire_credential keeps that key alone: the access key
 * of (uid, password), password being the new version's.
 *
 * Fence (TL_DRV_FENCE_BEFORE_CALL): an object per mesh in the canary
 * bucket, raised by a compare-and-set (a PUT conditional on its ETag)
 * and read before each changing call (see "the fence" below).
 *
 * Drift: the user gone, or its key for the password gone or with another
 * secret, is TL_DRIFT_CREDENTIAL (set_password adds the key again; a
 * user gone is made again); suspended, caps, max-buckets other than 1,
 * a bucket policy, an ACL that grants anything beyond the owner's
 * FULL_CONTROL (public-read, a READ grant to another user), or the
 * consumer reaching the canary bucket is TL_DRIFT_PRIVILEGES
 * (fix_privileges deletes the policy and sets the ACL private); the bucket gone or owned by
 * another is TL_DRIFT_MISSING, never recreated (its objects are gone; an
 * empty bucket would hide that).  check also proves isolation from the
 * consumer's side: a signed HEAD of its own bucket (200) and of the
 * canary bucket, the admin's, which it must not reach (403).
 * The policy is read as the owner (GET ?policy: the admin is not the
 * bucket's owner), so by check only; the ACL on the admin side (GET
 * /admin/bucket?policy), by both.
 * check_bulk: one GET /admin/bucket?stats=true for every bucket and its
 * owner, then one GET /admin/user and one GET /admin/bucket?policy per
 * grant (the API lists no users with their keys, nor ACLs, in one
 * call), none as the consumer.
 *
 * A login below ownership (g->access, TL_DRV_CAP_ACCESS): a user of its
 * own, marked "... grant ID ACCESS of BUCKET", with no bucket, given its
 * access by one statement of the owner's bucket policy (s3:GetObject and
 * s3:ListBucket; read-write adds s3:PutObject, s3:DeleteObject).  Only
 * the owner may touch the policy, so a key of the moment is put on the
 * owner's user for it (owner_key).  The owner's check and repair keep
 * the statements of this mesh's readers of that bucket and treat any
 * other policy as before.  Revoked, the reader's user is suspended or
 * deleted (its statement with it), never the bucket.
 *
 * Revocation: retain (the default) suspends the user and keeps the
 * bucket and its objects; purge deletes the bucket with its objects,
 * then the user with its keys.
 *
 * TLS (the settings tls and ca, decl.h; rgw_reach in ceph_rgw_decl.c):
 * unless the mode is off the RGW is reached at https://HOST:PORT (port:
 * its TLS port), or at the endpoint setting, which is https exactly
 * when the mode is not off; verified against ca alone (tls=verify), or
 * not verified (tls=require).  A certificate that does not verify is
 * TL_EUNTRUSTED at the first request, before a signed request or a
 * secret key in a query is sent.  The consumer's requests of check go
 * to the endpoint compose delivers, https by the same rule, on the same
 * verified handle.
 *
 * Errors: TL_EUNREACH when the endpoint does not answer or answers 5xx;
 * TL_EUNTRUSTED when its certificate does not verify;
 * TL_EAUTH when the admin's request is refused (401/403); TL_EINVAL for a
 * grant the driver will not touch; TL_EDRIVER for any other refusal.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "driver.h"
#include "ceph_rgw-internal.h"
#include "http.h"
#include "util.h"

#define RGW_CONNECT_MS	3000
#define RGW_TIMEOUT_MS	30000
#define RGW_MARK	"tally grant"
#define RGW_MESH_MARK	"tally mesh"
#define RGW_QMAX	8

struct rgw {
	CURL		*c;
	struct curl_slist *hdr;
	char		 base[300];	/* http[s]://HOST:PORT, no slash */
	enum tl_drv_tls	 tls;
	char		 err[TL_DRV_HTTP_ERR];	/* libcurl's detail */
	char		 sigv4[96];	/* aws:amz:REGION:s3 */
	char		 akey[128];	/* the admin's access key */
	char		*skey;		/* guarded; rgw_close wipes */
	char		 canary[RGW_NAME_MAX + 1];
	int		 canary_ok;
	char		*buf;		/* the last body: may hold secrets */
	size_t		 len, cap;
	unsigned long	 requests;
	char		 etag[80];	/* the last answer's ETag, unquoted */
	const char	*body;		/* the next request's (NULL: none) */
	/* admin->mesh ("": before ids) and the session's fence (open's). */
	char		 mesh[33];
	int		 fenced;
	uint64_t	 f_epoch;
	char		 f_mesh[33];
	char		 f_leader[TL_DRV_LEADER_MAX];
};

struct kv {
	const char	*k, *v;
};

/* --- HTTP ------------------------------------------------------------ */

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
	struct rgw *r = arg;

	return tl_drv_http_body(&r->buf, &r->len, &r->cap, data, size * n,
	    0);
}

/* Keeps the ETag (its quotes dropped): the fence's compare-and-set. */
static size_t
on_header(char *data, size_t size, size_t n, void *arg)
{
	struct rgw *r = arg;
	size_t len = size * n, i = 5, o = 0;

	if (len > 5 && strncasecmp(data, "etag:", 5) == 0) {
		for (; i < len && o + 1 < sizeof(r->etag); i++)
			if (data[i] != ' ' && data[i] != '"' && data[i] !=
			    '\r' && data[i] != '\n')
				r->etag[o++] = data[i];
		r->etag[o] = '\0';
	}
	return len;
}

/* The error code of an S3/admin error body ("NoSuchBucket"), or "". */
static void
code_of(const struct rgw *r, char *out, size_t n)
{
	json_t *j;
	const char *s, *p, *e;

	out[0] = '\0';
	if (r->len == 0)
		return;
	if ((j = json_loadb(r->buf, r->len, 0, NULL)) != NULL) {
		if ((s = json_string_value(json_object_get(j, "Code"))) !=
		    NULL)
			snprintf(out, n, "%s", s);
		json_decref(j);
		return;
	}
	/* S3 answers XML: <Code>...</Code>. */
	if ((p = strstr(r->buf, "<Code>")) != NULL && (e = strstr(p,
	    "</Code>")) != NULL && e - p - 6 < 64)
		snprintf(out, n, "%.*s", (int)(e - p - 6), p + 6);
}

static int
kv_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kv *)a)->k, ((const struct kv *)b)->k);
}

/*
 * One signed request: METHOD base/path?query (q: nq parameters, sorted
 * here by name, as SigV4 wants them and libcurl does not do) as ak/sk
 * (NULL: the admin).  *status gets the HTTP status; what is 2xx or in
 * ok (0-terminated) is 0.  The URL may carry a secret key: it is wiped.
 */
static int
request(struct rgw *r, const char *method, const char *path,
    struct kv *q, size_t nq, const char *ak, const char *sk,
    const long *ok, long *status, const char *step, char *why)
{
	char *url = NULL, *e, code[320];
	size_t cap = 4096, off, i;
	CURLcode cc;
	long st = 0;
	int rc = 0, n;

	*status = 0;
	if ((url = tl_secret_alloc(cap)) == NULL)
		return tl_drv_why(why, ENOMEM, "%s: out of memory", step);
	n = snprintf(url, cap, "%s%s", r->base, path);
	if (n < 0 || (size_t)n >= cap) {
		rc = tl_drv_why(why, TL_EINVAL, "%s: the URL is too long",
		    step);
		goto out;
	}
	off = (size_t)n;
	if (nq > 1)
		qsort(q, nq, sizeof(*q), kv_cmp);
	for (i = 0; i < nq; i++) {
		if ((e = curl_easy_escape(r->c, q[i].v, 0)) == NULL) {
			rc = tl_drv_why(why, ENOMEM, "%s: out of memory", step);
			goto out;
		}
		n = snprintf(url + off, cap - off, "%c%s=%s", i ? '&' : '?',
		    q[i].k, e);
		tl_secret_wipe(e, strlen(e));
		curl_free(e);
		if (n < 0 || (size_t)n >= cap - off) {
			rc = tl_drv_why(why, TL_EINVAL, "%s: the URL is too "
			    "long", step);
			goto out;
		}
		off += (size_t)n;
	}
	r->len = 0;
	if (r->buf != NULL)
		r->buf[0] = '\0';
	r->etag[0] = '\0';
	curl_easy_setopt(r->c, CURLOPT_URL, url);
	curl_easy_setopt(r->c, CURLOPT_HTTPGET, 1L);
	if (r->body != NULL) {
		curl_easy_setopt(r->c, CURLOPT_POSTFIELDS, r->body);
		curl_easy_setopt(r->c, CURLOPT_POSTFIELDSIZE,
		    (long)strlen(r->body));
	}
	curl_easy_setopt(r->c, CURLOPT_NOBODY, strcmp(method, "HEAD") == 0 ?
	    1L : 0L);
	curl_easy_setopt(r->c, CURLOPT_CUSTOMREQUEST, strcmp(method,
	    "HEAD") == 0 || strcmp(method, "GET") == 0 ? NULL : method);
	curl_easy_setopt(r->c, CURLOPT_USERNAME, ak != NULL ? ak : r->akey);
	curl_easy_setopt(r->c, CURLOPT_PASSWORD, sk != NULL ? sk : r->skey);
	r->requests++;
	cc = curl_easy_perform(r->c);
	curl_easy_setopt(r->c, CURLOPT_PASSWORD, r->skey);
	if (r->body != NULL) {
		curl_easy_setopt(r->c, CURLOPT_POSTFIELDS, NULL);
		curl_easy_setopt(r->c, CURLOPT_POSTFIELDSIZE, -1L);
		r->body = NULL;
	}
	if (cc != CURLE_OK) {
		rc = tl_drv_http_fail(cc, r->tls, r->err, code, sizeof(code));
		rc = tl_drv_why(why, rc, "%s: the RGW at %s %s: %s", step,
		    r->base, rc == TL_EUNTRUSTED ? "is not trusted (TLS)" :
		    "did not answer", code);
		goto out;
	}
	curl_easy_getinfo(r->c, CURLINFO_RESPONSE_CODE, &st);
	*status = st;
	if (st >= 200 && st < 300)
		goto out;
	for (i = 0; ok != NULL && ok[i] != 0; i++)
		if (ok[i] == st)
			goto out;
	code_of(r, code, sizeof(code));
	if ((st == 401 || st == 403) && ak == NULL)
		rc = TL_EAUTH;
	else if (st >= 500)
		rc = TL_EUNREACH;
	else
		rc = TL_EDRIVER;
	tl_drv_why(why, rc, "%s: HTTP %ld from the RGW%s%s%s", step, st,
	    code[0] ? " (" : "", code, code[0] ? ")" : "");
out:
	tl_secret_wipe(url, cap);
	tl_secret_free(url);
	return rc;
}

static const long ok404[] = { 404, 0 };

/* GET as the admin into *out (NULL on 404). */
static int
get_json(struct rgw *r, const char *path, struct kv *q, size_t nq,
    json_t **out, const char *step, char *why)
{
	json_error_t e;
	long st;
	int rc;

	*out = NULL;
	if ((rc = request(r, "GET", path, q, nq, NULL, NULL, ok404, &st,
	    step, why)) != 0)
		return rc;
	if (st == 404)
		return 0;
	if ((*out = json_loadb(r->buf != NULL ? r->buf : "", r->len, 0,
	    &e)) == NULL)
		return tl_drv_why(why, TL_EDRIVER, "%s: the RGW sent what is "
		    "not JSON (%s)", step, e.text);
	return 0;
}

/* --- names, marks, keys ----------------------------------------------- */

static int
grant_ok(const struct tl_drv_grant *g, char *why)
{
	if (g == NULL || g->login == NULL || g->resource == NULL)
		return tl_drv_why(why, TL_EINVAL, "no grant");
	if (!tl_drv_rgw_name_ok(g->login, 0))
		return tl_drv_why(why, TL_EINVAL, "user \"%.64s\": not an RGW "
		    "grant's name ([a-z0-9_-], 3-63)", g->login);
	if (!tl_drv_rgw_name_ok(g->resource, 1))
		return tl_drv_why(why, TL_EINVAL, "bucket \"%.64s\": not an S3 "
		    "bucket name tally makes ([a-z0-9-], 3-63)", g->resource);
	return 0;
}

/*
 * The mark, the user's display-name: "tally mesh MESH grant ID" (MESH
 * the whole mesh id), or "tally grant ID" from a home without a mesh id
 * and from before marks named a mesh; "tally grant" alone before marks
 * named grants.
 */
static const char *
access_name(int access)
{
	return access == TL_DRV_ACCESS_READ_WRITE ? "read-write" : "read";
}

/*
 * What follows "grant " in a mark: the grant's id, and for a login below
 * ownership " ACCESS of BUCKET" too, so that the owner's check can tell
 * a reader tally made for its bucket, and with what access, from the
 * user's mark alone (the owner's grant does not know its readers).
 */
static void
mark_tail(const struct tl_drv_grant *g, char *out, size_t n)
{
	if (g->access != 0)
		snprintf(out, n, "%s %s of %s", g->grant,
		    access_name(g->access), g->resource);
	else
		snprintf(out, n, "%s", g->grant);
}

static void
mark_of(const char *mesh, const struct tl_drv_grant *g, char *out, size_t n)
{
	char tail[300];

	mark_tail(g, tail, sizeof(tail));
	if (mesh[0] != '\0' && tl_drv_grant_named(g))
		snprintf(out, n, RGW_MESH_MARK " %s grant %.200s", mesh, tail);
	else if (tl_drv_grant_named(g))
		snprintf(out, n, RGW_MARK " %.200s", tail);
	else
		snprintf(out, n, RGW_MARK);
}

/*
 * OURS: marked by this mesh for g; ADOPT: g's, to be marked again (the
 * unnamed mark with adopt_unnamed, a mark naming no mesh, or one naming
 * g->adopt_mesh); MESH: another mesh's (refused, TL_EREFUSED); OTHER:
 * not g's at all (TL_EINVAL).
 */
enum mark { MARK_OURS, MARK_ADOPT, MARK_MESH, MARK_OTHER };

static enum mark
user_mark(const char *mesh, const json_t *u, const struct tl_drv_grant *g,
    char owner[33])
{
	const char *dn = json_string_value(json_object_get(u,
	    "display_name")), *rest;
	size_t ml = strlen(RGW_MESH_MARK " ");
	char m[33] = "", tail[300];
	enum mark k = MARK_OURS;

	owner[0] = '\0';
	if (dn == NULL)
		return MARK_OTHER;
	mark_tail(g, tail, sizeof(tail));
	if (strncmp(dn, RGW_MESH_MARK " ", ml) == 0 && strlen(dn) > ml + 32 &&
	    strncmp(dn + ml + 32, " grant ", 7) == 0) {
		memcpy(m, dn + ml, 32);
		m[32] = '\0';
		rest = dn + ml + 32 + 7;
		if (strcmp(m, mesh) != 0) {
			if (g->adopt_mesh == NULL || strcmp(g->adopt_mesh, m) !=
			    0) {
				memcpy(owner, m, sizeof(m));
				return MARK_MESH;
			}
			k = MARK_ADOPT;
		}
		return tl_drv_grant_named(g) && strcmp(rest, tail) == 0 ?
		    k : MARK_OTHER;
	}
	/* Marked before marks named a mesh: ours, marked again. */
	if (mesh[0] != '\0')
		k = MARK_ADOPT;
	if (tl_drv_grant_named(g) && strncmp(dn, RGW_MARK " ",
	    strlen(RGW_MARK) + 1) == 0 && strcmp(dn + strlen(RGW_MARK) + 1,
	    tail) == 0)
		return k;
	if (tl_drv_grant_named(g) && g->adopt_unnamed &&
	    strcmp(dn, RGW_MARK) == 0)
		return MARK_ADOPT;
	return MARK_OTHER;
}

/* 2: the key is there with secret sk; 1: there with another; 0: not. */
static int
key_state(const json_t *u, const char *ak, const char *sk)
{
	const json_t *k;
	const char *a, *s;
	size_t i;

	json_array_foreach(json_object_get(u, "keys"), i, k) {
		a = json_string_value(json_object_get(k, "access_key"));
		s = json_string_value(json_object_get(k, "secret_key"));
		if (a == NULL || strcmp(a, ak) != 0)
			continue;
		return s != NULL && sk != NULL && strcmp(s, sk) == 0 ? 2 : 1;
	}
	return 0;
}

/* --- the session ------------------------------------------------------ */

static void rgw_close(void *h);
static int fence_check(struct rgw *r, char *why);
static int adopt_takeover(struct rgw *r, const struct tl_drv_grant *g,
    char *why);
static int reader_give(struct rgw *r, const struct tl_drv_grant *g,
    char *why);

static int
rgw_open(const struct tl_drv_admin *a, void **hp, char *why)
{
	struct rgw *r;
	const char *ep, *host, *port, *region, *ak, *pw;
	unsigned char h[8];
	char hx[17], where[256];
	int https = 0;
	json_t *j = NULL;
	struct kv q[1];
	int rc;

	*hp = NULL;
	if (a == NULL)
		return tl_drv_why(why, TL_EINVAL, "no admin settings");
	if (tl_drv_http_init() != 0 || sodium_init() < 0)
		return tl_drv_why(why, TL_EDRIVER, "libcurl or libsodium did "
		    "not initialise");
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	ep = tl_drv_setting_get(a->settings, "endpoint");
	host = tl_drv_setting_get(a->settings, "host");
	if (host == NULL || *host == '\0')
		host = a->host != NULL && *a->host != '\0' ? a->host :
		    "127.0.0.1";
	port = a->port != NULL && *a->port != '\0' ? a->port : "7480";
	r->tls = tl_drv_reach(&tl_drv_ceph_rgw_decl, a->settings, host,
	    where, sizeof(where));
	if (ep != NULL && *ep != '\0') {
		if (tl_drv_url_host(ep, &https, where, sizeof(where)) != 0 ||
		    (r->tls == TL_DRV_TLS_OFF) == https) {
			rc = tl_drv_why(why, TL_EINVAL, "endpoint %.200s with "
			    "tls=%s: an https endpoint with tls verify or "
			    "require, an http one with tls off", ep,
			    tl_drv_tls_name(r->tls));
			goto fail;
		}
		snprintf(r->base, sizeof(r->base), "%s", ep);
	} else
		snprintf(r->base, sizeof(r->base), strchr(host, ':') != NULL ?
		    "%s://[%s]:%s" : "%s://%s:%s", r->tls == TL_DRV_TLS_OFF ?
		    "http" : "https", host, port);
	if (r->base[0] != '\0' && r->base[strlen(r->base) - 1] == '/')
		r->base[strlen(r->base) - 1] = '\0';
	region = tl_drv_setting_get(a->settings, "region");
	if (region == NULL || *region == '\0')
		region = "default";
	snprintf(r->sigv4, sizeof(r->sigv4), "aws:amz:%s:s3", region);
	ak = tl_drv_setting_get(a->settings, "admin-access-key");
	if (ak == NULL || *ak == '\0') {
		rc = tl_drv_why(why, TL_EINVAL, "no admin-access-key set "
		    "(tally assign --set admin-access-key=KEY --secret "
		    "admin-secret-key)");
		goto fail;
	}
	snprintf(r->akey, sizeof(r->akey), "%s", ak);
	snprintf(r->mesh, sizeof(r->mesh), "%s", a->mesh != NULL ? a->mesh :
	    "");
	if (a->fence != NULL) {
		r->fenced = 1;
		r->f_epoch = a->fence->epoch;
		snprintf(r->f_mesh, sizeof(r->f_mesh), "%s", a->fence->mesh !=
		    NULL ? a->fence->mesh : "");
		snprintf(r->f_leader, sizeof(r->f_leader), "%s",
		    a->fence->leader != NULL ? a->fence->leader : "");
	}
	pw = a->password != NULL ? a->password : "";
	if ((r->skey = tl_drv_secret_dup(pw)) == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto fail;
	}
	/* The canary: the admin's, named after its key, so one per admin. */
	crypto_generichash(h, sizeof(h), (const unsigned char *)r->akey,
	    strlen(r->akey), NULL, 0);
	sodium_bin2hex(hx, sizeof(hx), h, sizeof(h));
	snprintf(r->canary, sizeof(r->canary), "tally-canary-%s", hx);
	if ((r->c = curl_easy_init()) == NULL || (r->hdr =
	    curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD"))
	    == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto fail;
	}
	curl_easy_setopt(r->c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->c, CURLOPT_CONNECTTIMEOUT_MS, (long)RGW_CONNECT_MS);
	curl_easy_setopt(r->c, CURLOPT_TIMEOUT_MS, (long)RGW_TIMEOUT_MS);
	curl_easy_setopt(r->c, CURLOPT_AWS_SIGV4, r->sigv4);
	curl_easy_setopt(r->c, CURLOPT_HTTPHEADER, r->hdr);
	curl_easy_setopt(r->c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(r->c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(r->c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(r->c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(r->c, CURLOPT_TCP_KEEPALIVE, 1L);
	if ((rc = tl_drv_http_tls(r->c, r->tls, a->ca_file, 0, r->err,
	    why)) != 0)
		goto fail;
	/* Proves the admin now, not at the first grant. */
	q[0] = (struct kv){ "uid", "tally-no-such-user-probe" };
	if ((rc = get_json(r, "/admin/user", q, 1, &j, "open", why)) != 0)
		goto fail;
	json_decref(j);
	tl_drv_why(why, 0, "connected to the RGW admin API at %s as key %s "
	    "(%s)", r->base, r->akey, r->tls == TL_DRV_TLS_VERIFY ? "TLS, "
	    "verified" : r->tls == TL_DRV_TLS_REQUIRE ? "TLS, not verified" :
	    "plaintext");
	*hp = r;
	return 0;
fail:
	rgw_close(r);
	return rc;
}

static void
rgw_close(void *h)
{
	struct rgw *r = h;

	if (r == NULL)
		return;
	if (r->c != NULL)
		curl_easy_cleanup(r->c);
	curl_slist_free_all(r->hdr);
	if (r->skey != NULL) {
		tl_secret_wipe(r->skey, strlen(r->skey));
		tl_secret_free(r->skey);
	}
	tl_secret_free(r->buf);
	free(r);
}

/* --- objects ---------------------------------------------------------- */

static int
get_user(struct rgw *r, const char *uid, json_t **u, char *why)
{
	struct kv q[] = { { "uid", uid } };

	return get_json(r, "/admin/user", q, 1, u, "reading the user", why);
}

/*
 * The user, refused when it is not this grant's (*u NULL: none): another
 * mesh's is TL_EREFUSED (*m MARK_MESH, why naming that mesh), anyone
 * else's TL_EINVAL.
 */
static int
vet_user(struct rgw *r, const struct tl_drv_grant *g, json_t **u,
    enum mark *m, char *why)
{
	char owner[33];
	int rc;

	*m = MARK_OURS;
	if ((rc = get_user(r, g->login, u, why)) != 0 || *u == NULL)
		return rc;
	if ((*m = user_mark(r->mesh, *u, g, owner)) == MARK_OURS ||
	    *m == MARK_ADOPT)
		return 0;
	json_decref(*u);
	*u = NULL;
	if (*m == MARK_MESH)
		return tl_drv_why(why, TL_EREFUSED, "user \"%s\" is owned by "
		    "mesh %.12s..., not this one (tally adopt --from-mesh "
		    "takes it over): not touched", g->login, owner);
	return tl_drv_why(why, TL_EINVAL, "user \"%s\" exists and is not "
	    "this grant's (its display-name is not tally's mark for it): "
	    "not touched", g->login);
}

static int
get_bucket(struct rgw *r, const char *bucket, json_t **b, char *why)
{
	struct kv q[] = { { "bucket", bucket }, { "stats", "true" } };

	return get_json(r, "/admin/bucket", q, 2, b, "reading the bucket",
	    why);
}

static const char *
owner_of(const json_t *b)
{
	return json_string_value(json_object_get(b, "owner"));
}

static int
put_key(struct rgw *r, const struct tl_drv_grant *g, char *why)
{
	char ak[24];
	long st;
	struct kv q[] = { { "access-key", ak }, { "key", "" },
		{ "key-type", "s3" }, { "secret-key", g->password },
		{ "uid", g->login } };

	tl_drv_rgw_access_key(g->login, g->password, ak);
	return request(r, "PUT", "/admin/user", q, 5, NULL, NULL, NULL, &st,
	    "adding the key", why);
}

static int
make_user(struct rgw *r, const struct tl_drv_grant *g, char *why)
{
	char ak[24], mark[300];
	long st;
	struct kv q[] = { { "access-key", ak }, { "display-name", mark },
		{ "max-buckets", "1" }, { "secret-key", g->password },
		{ "uid", g->login } };

	tl_drv_rgw_access_key(g->login, g->password, ak);
	mark_of(r->mesh, g, mark, sizeof(mark));
	return request(r, "PUT", "/admin/user", q, 5, NULL, NULL, NULL, &st,
	    "making the user", why);
}

/* POST /admin/user: mark, unsuspended (or suspended), max-buckets 1. */
static int
modify_user(struct rgw *r, const struct tl_drv_grant *g, int suspend,
    char *why)
{
	char mark[300];
	long st;
	struct kv q[] = { { "display-name", mark }, { "max-buckets", "1" },
		{ "suspended", suspend ? "1" : "0" }, { "uid", g->login } };

	mark_of(r->mesh, g, mark, sizeof(mark));
	return request(r, "POST", "/admin/user", q, 4, NULL, NULL, NULL, &st,
	    suspend ? "suspending the user" : "restoring the user", why);
}

/* The mark again, nothing else (a suspended user stays suspended). */
static int
remark_user(struct rgw *r, const struct tl_drv_grant *g, char *why)
{
	char mark[300];
	long st;
	struct kv q[] = { { "display-name", mark }, { "uid", g->login } };

	mark_of(r->mesh, g, mark, sizeof(mark));
	return request(r, "POST", "/admin/user", q, 2, NULL, NULL, NULL, &st,
	    "marking the user", why);
}

/* Removes every cap the user has (tally's users have none). */
static int
drop_caps(struct rgw *r, const struct tl_drv_grant *g, const json_t *u,
    char *why)
{
	const json_t *c;
	char caps[512] = "";
	size_t i, n = 0;
	long st;
	int w;
	struct kv q[] = { { "caps", "" }, { "uid", g->login },
		{ "user-caps", caps } };

	json_array_foreach(json_object_get(u, "caps"), i, c) {
		const char *t = json_string_value(json_object_get(c,
		    "type")), *p = json_string_value(json_object_get(c,
		    "perm"));

		w = snprintf(caps + n, sizeof(caps) - n, "%s%s=%s",
		    n ? ";" : "", t != NULL ? t : "", p != NULL ? p : "");
		if (w < 0 || (size_t)w >= sizeof(caps) - n)
			return tl_drv_why(why, TL_EDRIVER, "the user's caps "
			    "are too many to list");
		n += (size_t)w;
	}
	if (n == 0)
		return 0;
	return request(r, "DELETE", "/admin/user", q, 3, NULL, NULL, NULL,
	    &st, "removing the user's caps", why);
}

static int
has_caps(const json_t *u)
{
	return json_array_size(json_object_get(u, "caps")) > 0;
}

static int
suspended(const json_t *u)
{
	return json_integer_value(json_object_get(u, "suspended")) != 0;
}

static int
max_buckets_ok(const json_t *u)
{
	return json_integer_value(json_object_get(u, "max_buckets")) == 1;
}

/* Whether u's mark names mesh (tally mesh MESH grant ...). */
static int
marked_by(const json_t *u, const char *mesh)
{
	const char *dn = json_string_value(json_object_get(u, "display_name"));
	size_t ml = strlen(RGW_MESH_MARK " ");

	return dn != NULL && mesh != NULL && strlen(mesh) == 32 &&
	    strncmp(dn, RGW_MESH_MARK " ", ml) == 0 &&
	    strncmp(dn + ml, mesh, 32) == 0 && dn[ml + 32] == ' ';
}

/*
 * Every key of the user but keep (an S3 access key) goes, its
 * subusers' S3 and Swift keys with them, so that a credential tally
 * does not hold opens nothing more: what a lost mesh delivered (tally
 * adopt --from-mesh), or what the user had before tally adopt took it
 * over.  *n: how many went.  step names the removal in why.
 */
static int
drop_other_keys(struct rgw *r, const struct tl_drv_grant *g, const json_t *u,
    const char *keep, const char *step, unsigned *n, char *why)
{
	const json_t *k;
	const char *a;
	char ak[128], sub[160];
	size_t i;
	long st;
	int rc;
	struct kv q[] = { { "access-key", ak }, { "key", "" },
		{ "key-type", "s3" }, { "uid", g->login } };
	struct kv qs[] = { { "key", "" }, { "key-type", "swift" },
		{ "subuser", sub }, { "uid", g->login } };

	*n = 0;
	json_array_foreach(json_object_get(u, "keys"), i, k) {
		a = json_string_value(json_object_get(k, "access_key"));
		if (a == NULL || strcmp(a, keep) == 0 || strlen(a) >= sizeof(ak))
			continue;
		snprintf(ak, sizeof(ak), "%s", a);
		if ((rc = request(r, "DELETE", "/admin/user", q, 4, NULL, NULL,
		    ok404, &st, step, why)) != 0)
			return rc;
		(*n)++;
	}
	/* A Swift key is named by its subuser ("uid:sub"), one each. */
	json_array_foreach(json_object_get(u, "swift_keys"), i, k) {
		a = json_string_value(json_object_get(k, "user"));
		if (a == NULL || strlen(a) >= sizeof(sub))
			continue;
		snprintf(sub, sizeof(sub), "%s", a);
		if ((rc = request(r, "DELETE", "/admin/user", qs, 4, NULL, NULL,
		    ok404, &st, step, why)) != 0)
			return rc;
		(*n)++;
	}
	return 0;
}

/* The user exists as the grant's, with the grant's mark and key. */
static int
ensure_user(struct rgw *r, const struct tl_drv_grant *g, int fix,
    char *why)
{
	json_t *u = NULL;
	enum mark m = MARK_OURS;
	char ak[24];
	unsigned n;
	int rc;

	if ((rc = vet_user(r, g, &u, &m, why)) != 0)
		return rc;
	if (u == NULL)
		return make_user(r, g, why);
	tl_drv_rgw_access_key(g->login, g->password, ak);
	/* Before the mark: a crash in between drops them again. */
	if (m == MARK_ADOPT && marked_by(u, g->adopt_mesh) &&
	    (rc = drop_other_keys(r, g, u, ak, "removing the other mesh's "
	    "key", &n, why)) != 0)
		goto out;
	if (m == MARK_ADOPT || suspended(u) || !max_buckets_ok(u) ||
	    (fix && has_caps(u)))
		if ((rc = modify_user(r, g, 0, why)) != 0)
			goto out;
	if (fix && (rc = drop_caps(r, g, u, why)) != 0)
		goto out;
	if (key_state(u, ak, g->password) != 2)
		rc = put_key(r, g, why);
out:
	json_decref(u);
	return rc;
}

/* The grant's bucket, made by its user when it is not there. */
static int
ensure_bucket(struct rgw *r, const struct tl_drv_grant *g, char *why)
{
	json_t *b = NULL;
	const char *o;
	char ak[24], path[RGW_NAME_MAX + 2], code[80];
	long st;
	int rc;

	if ((rc = get_bucket(r, g->resource, &b, why)) != 0)
		return rc;
	if (b != NULL) {
		o = owner_of(b);
		rc = o != NULL && strcmp(o, g->login) == 0 ? 0 :
		    tl_drv_why(why, TL_EINVAL, "bucket \"%s\" exists and is "
		    "owned by \"%.64s\", not this grant's user: not touched",
		    g->resource, o != NULL ? o : "?");
		json_decref(b);
		return rc;
	}
	tl_drv_rgw_access_key(g->login, g->password, ak);
	snprintf(path, sizeof(path), "/%s", g->resource);
	if ((rc = request(r, "PUT", path, NULL, 0, ak, g->password,
	    (const long[]){ 409, 0 }, &st, "making the bucket", why)) != 0)
		return rc;
	if (st == 409) {
		code_of(r, code, sizeof(code));
		if (strcmp(code, "BucketAlreadyOwnedByYou") != 0)
			return tl_drv_why(why, TL_EINVAL, "bucket \"%s\" "
			    "belongs to someone else (%s): not touched",
			    g->resource, code);
	}
	return 0;
}

static int
rgw_create(void *h, const struct tl_drv_grant *g, char *why)
{
	struct rgw *r = h;
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->password == NULL || g->password[0] == '\0')
		return tl_drv_why(why, TL_EINVAL, "no password for the key");
	if ((rc = fence_check(r, why)) != 0)
		return rc;
	if (g->adopting && g->access == 0)
		return adopt_takeover(r, g, why);
	if (g->access != 0)
		return (rc = ensure_user(r, g, 0, why)) != 0 ? rc :
		    reader_give(r, g, why);
	if ((rc = ensure_user(r, g, 0, why)) != 0 ||
	    (rc = ensure_bucket(r, g, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user \"%s\" with its key and bucket \"%s\" "
	    "are there", g->login, g->resource);
}

static int
rgw_set_password(void *h, const struct tl_drv_grant *g, char *why)
{
	struct rgw *r = h;
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->password == NULL || g->password[0] == '\0')
		return tl_drv_why(why, TL_EINVAL, "no password for the key");
	if ((rc = fence_check(r, why)) != 0 ||
	    (rc = ensure_user(r, g, 0, why)) != 0)
		return rc;
	if (g->access != 0)
		return reader_give(r, g, why);
	return tl_drv_why(why, 0, "user \"%s\" has its key again", g->login);
}

/*
 * Deletes the policy of bucket as its owner (only an owner may), with
 * the owner's key ak/sk.
 */
static int
drop_policy(struct rgw *r, const char *bucket, const char *ak,
    const char *sk, char *why)
{
	char path[RGW_NAME_MAX + 2];
	long st;
	struct kv q[] = { { "policy", "" } };

	snprintf(path, sizeof(path), "/%s", bucket);
	return request(r, "DELETE", path, q, 1, ak, sk, ok404, &st,
	    "deleting the bucket policy", why);
}

/*
 * The ACL of bucket back to private (the owner's FULL_CONTROL alone),
 * as its owner (ak/sk): PUT ?acl with the canned ACL "private".
 */
static int
set_private(struct rgw *r, const char *bucket, const char *ak,
    const char *sk, char *why)
{
	char path[RGW_NAME_MAX + 2];
	struct curl_slist *hd, *h2;
	long st;
	int rc;
	struct kv q[] = { { "acl", "" } };

	if ((hd = curl_slist_append(NULL, "x-amz-content-sha256: "
	    "UNSIGNED-PAYLOAD")) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	/* The RGW wants a length on PUT ?acl (411 without one). */
	if ((h2 = curl_slist_append(hd, "Content-Length: 0")) == NULL ||
	    (h2 = curl_slist_append(h2, "x-amz-acl: private")) == NULL) {
		curl_slist_free_all(hd);
		return tl_drv_why(why, ENOMEM, "out of memory");
	}
	snprintf(path, sizeof(path), "/%s", bucket);
	curl_easy_setopt(r->c, CURLOPT_HTTPHEADER, h2);
	rc = request(r, "PUT", path, q, 1, ak, sk, NULL, &st,
	    "making the bucket's ACL private", why);
	curl_easy_setopt(r->c, CURLOPT_HTTPHEADER, r->hdr);
	curl_slist_free_all(h2);
	return rc;
}

/* --- logins below ownership (g->access) ------------------------------ */

/*
 * A reader's access is one statement of the owner's bucket policy,
 * Principal the reader's user (an ACL grant cannot reach the objects:
 * their ACLs are their writer's).  The owner's checks keep a statement
 * when its principal is a user this mesh marked as a reader of that
 * bucket (mark_tail) and it is exactly what reader_stmt writes for it;
 * anything else in a policy is drift, as before.
 */
#define RGW_POLICY_AK	"TLPOLICY"

/*
 * A policy is read, changed and written whole, and owner_key removes
 * the policy keys it finds: two workers of this process on one owner's
 * bucket (its readers made at once) would undo each other's.
 */
static pthread_mutex_t policy_lock = PTHREAD_MUTEX_INITIALIZER;

static json_t *
reader_stmt(const char *uid, int access, const char *bucket)
{
	char who[128], b[96], objs[100];
	json_t *act;

	snprintf(who, sizeof(who), "arn:aws:iam:::user/%s", uid);
	snprintf(b, sizeof(b), "arn:aws:s3:::%s", bucket);
	snprintf(objs, sizeof(objs), "arn:aws:s3:::%s/*", bucket);
	act = access == TL_DRV_ACCESS_READ_WRITE ? json_pack("[ssss]",
	    "s3:GetObject", "s3:ListBucket", "s3:PutObject",
	    "s3:DeleteObject") : json_pack("[ss]", "s3:GetObject",
	    "s3:ListBucket");
	if (act == NULL)
		return NULL;
	return json_pack("{s:s, s:{s:s}, s:o, s:[ss]}", "Effect", "Allow",
	    "Principal", "AWS", who, "Action", act, "Resource", b, objs);
}

/* The uid a statement names as its one principal, or NULL. */
static const char *
principal_of(const json_t *st)
{
	const json_t *p = json_object_get(json_object_get(st, "Principal"),
	    "AWS");
	const char *s;
	size_t pl = strlen("arn:aws:iam:::user/");

	if (json_is_array(p) && json_array_size(p) == 1)
		p = json_array_get(p, 0);
	if ((s = json_string_value(p)) == NULL ||
	    strncmp(s, "arn:aws:iam:::user/", pl) != 0)
		return NULL;
	return s + pl;
}

/* The statements of a policy (NULL: none) as a new array. */
static json_t *
statements(const json_t *pol)
{
	json_t *st = json_object_get(pol, "Statement"), *out;

	if ((out = json_array()) == NULL)
		return NULL;
	if (json_is_array(st))
		json_array_extend(out, st);
	else if (st != NULL)
		json_array_append(out, st);
	return out;
}

/*
 * Only a bucket's owner may read or write its policy (the admin has caps
 * users=* and buckets=*, no more) and a reader's grant does not hold the
 * owner's secret: a key of the moment goes on the owner's user and is
 * removed after use (owner_key_drop).  Its access key starts
 * RGW_POLICY_AK, never one of tl_drv_rgw_access_key's (hex after "TL"),
 * so one a crash left behind is removed by the next.  *usable 0: the
 * owner's user is gone or suspended (nothing to act with, no key put).
 */
static int
owner_key(struct rgw *r, const char *owner, char ak[32], char sk[48],
    int *usable, char *why)
{
	json_t *u = NULL;
	const json_t *k;
	const char *a;
	unsigned char rnd[20];
	char old[32];
	size_t i;
	long st;
	int rc;
	struct kv qd[] = { { "access-key", old }, { "key", "" },
		{ "key-type", "s3" }, { "uid", owner } };
	struct kv qp[] = { { "access-key", ak }, { "key", "" },
		{ "key-type", "s3" }, { "secret-key", sk }, { "uid", owner } };

	*usable = 0;
	if ((rc = get_user(r, owner, &u, why)) != 0 || u == NULL)
		return rc;
	if (suspended(u))
		goto out;
	json_array_foreach(json_object_get(u, "keys"), i, k) {
		a = json_string_value(json_object_get(k, "access_key"));
		if (a == NULL || strncmp(a, RGW_POLICY_AK,
		    strlen(RGW_POLICY_AK)) != 0 || strlen(a) >= sizeof(old))
			continue;
		snprintf(old, sizeof(old), "%s", a);
		if ((rc = request(r, "DELETE", "/admin/user", qd, 4, NULL,
		    NULL, ok404, &st, "removing a policy key left behind",
		    why)) != 0)
			goto out;
	}
	randombytes_buf(rnd, sizeof(rnd));
	memcpy(ak, RGW_POLICY_AK, strlen(RGW_POLICY_AK));
	sodium_bin2hex(ak + strlen(RGW_POLICY_AK), 32 - strlen(RGW_POLICY_AK),
	    rnd, 8);
	sodium_bin2hex(sk, 48, rnd + 8, 12);
	sodium_memzero(rnd, sizeof(rnd));
	if ((rc = request(r, "PUT", "/admin/user", qp, 5, NULL, NULL, NULL,
	    &st, "putting a policy key on the owner's user", why)) != 0)
		goto out;
	*usable = 1;
out:
	json_decref(u);
	return rc;
}

static void
owner_key_drop(struct rgw *r, const char *owner, const char *ak, char *sk)
{
	char w[TL_WHY_MAX];
	long st;
	struct kv q[] = { { "access-key", ak }, { "key", "" },
		{ "key-type", "s3" }, { "uid", owner } };

	/* Left behind on a failure: the next owner_key removes it. */
	(void)request(r, "DELETE", "/admin/user", q, 4, NULL, NULL, ok404,
	    &st, "removing the policy key", w);
	sodium_memzero(sk, 48);
}

/* The policy of bucket read as ak/sk into *pol (NULL: none). */
static int
policy_get(struct rgw *r, const char *bucket, const char *ak,
    const char *sk, json_t **pol, char *why)
{
	char path[RGW_NAME_MAX + 2];
	json_error_t e;
	long st;
	int rc;
	struct kv q[] = { { "policy", "" } };

	*pol = NULL;
	snprintf(path, sizeof(path), "/%s", bucket);
	if ((rc = request(r, "GET", path, q, 1, ak, sk, ok404, &st,
	    "reading the bucket policy", why)) != 0 || st == 404)
		return rc;
	if ((*pol = json_loadb(r->buf != NULL ? r->buf : "", r->len, 0,
	    &e)) == NULL)
		return tl_drv_why(why, TL_EDRIVER, "bucket \"%s\"'s policy is "
		    "not JSON (%s)", bucket, e.text);
	return 0;
}

/* The policy of bucket made of list, or none when list is empty. */
static int
policy_put(struct rgw *r, const char *bucket, const char *ak,
    const char *sk, json_t *list, char *why)
{
	char path[RGW_NAME_MAX + 2], *text;
	json_t *pol;
	long st;
	int rc;
	struct kv q[] = { { "policy", "" } };

	if (json_array_size(list) == 0)
		return drop_policy(r, bucket, ak, sk, why);
	if ((pol = json_pack("{s:s, s:O}", "Version", "2012-10-17",
	    "Statement", list)) == NULL || (text = json_dumps(pol,
	    JSON_COMPACT)) == NULL) {
		json_decref(pol);
		return tl_drv_why(why, ENOMEM, "out of memory");
	}
	json_decref(pol);
	snprintf(path, sizeof(path), "/%s", bucket);
	r->body = text;
	rc = request(r, "PUT", path, q, 1, ak, sk, NULL, &st,
	    "writing the bucket policy", why);
	free(text);
	return rc;
}

/*
 * *ok when st is a reader's statement tally writes for bucket (owned by
 * owner): its principal a user of this mesh's marked as a reader of
 * bucket, the statement exactly reader_stmt's for its access.
 */
static int
reader_stmt_ok(struct rgw *r, const char *bucket, const char *owner,
    const json_t *st, int *ok, char *why)
{
	static const int acc[] = { TL_DRV_ACCESS_READ,
	    TL_DRV_ACCESS_READ_WRITE };
	const char *uid = principal_of(st), *dn;
	char pre[128], suf[128];
	json_t *u = NULL, *want;
	size_t i, dl;
	int rc;

	*ok = 0;
	if (uid == NULL || strcmp(uid, owner) == 0 ||
	    !tl_drv_rgw_name_ok(uid, 0))
		return 0;
	if ((rc = get_user(r, uid, &u, why)) != 0 || u == NULL)
		return rc;
	if (r->mesh[0] != '\0')
		snprintf(pre, sizeof(pre), RGW_MESH_MARK " %s grant ", r->mesh);
	else
		snprintf(pre, sizeof(pre), RGW_MARK " ");
	dn = json_string_value(json_object_get(u, "display_name"));
	dl = dn != NULL ? strlen(dn) : 0;
	for (i = 0; dn != NULL && i < 2 && !*ok; i++) {
		snprintf(suf, sizeof(suf), " %s of %s", access_name(acc[i]),
		    bucket);
		if (dl <= strlen(pre) + strlen(suf) || strncmp(dn, pre,
		    strlen(pre)) != 0 || strcmp(dn + dl - strlen(suf), suf) != 0)
			continue;
		want = reader_stmt(uid, acc[i], bucket);
		*ok = want != NULL && json_equal(want, (json_t *)st);
		json_decref(want);
	}
	json_decref(u);
	return 0;
}

/*
 * The owner's policy with what is not a reader's statement taken out:
 * *kept the rest, *dropped how many went (each named in w).
 */
static int
keep_readers(struct rgw *r, const struct tl_drv_grant *g, const json_t *pol,
    json_t **kept, size_t *dropped, char *w, char *why)
{
	json_t *all, *st;
	size_t i;
	int rc = 0, ok;

	*dropped = 0;
	if ((*kept = json_array()) == NULL || (all = statements(pol)) ==
	    NULL) {
		json_decref(*kept);
		*kept = NULL;
		return tl_drv_why(why, ENOMEM, "out of memory");
	}
	json_array_foreach(all, i, st) {
		if ((rc = reader_stmt_ok(r, g->resource, g->login, st, &ok,
		    why)) != 0)
			break;
		if (ok) {
			json_array_append(*kept, st);
			continue;
		}
		(*dropped)++;
		tl_drv_why_add(w, "bucket \"%s\"'s policy has a statement not "
		    "of a reader tally made (principal %.64s)", g->resource,
		    principal_of(st) != NULL ? principal_of(st) : "?");
	}
	if (*dropped == 0 && json_array_size(all) == 0)
		tl_drv_why_add(w, "bucket \"%s\" has a policy without "
		    "statements", g->resource);
	json_decref(all);
	return rc;
}

/* The owner's repair: its policy keeps its readers' statements alone. */
static int
trim_policy(struct rgw *r, const struct tl_drv_grant *g, const char *ak,
    char *why)
{
	json_t *pol = NULL, *kept = NULL;
	char w[TL_WHY_MAX] = "";
	size_t dropped;
	int rc;

	pthread_mutex_lock(&policy_lock);
	if ((rc = policy_get(r, g->resource, ak, g->password, &pol, why))
	    != 0 || pol == NULL)
		goto out;
	if ((rc = keep_readers(r, g, pol, &kept, &dropped, w, why)) == 0 &&
	    (dropped > 0 || json_array_size(kept) == 0))
		rc = policy_put(r, g->resource, ak, g->password, kept, why);
out:
	pthread_mutex_unlock(&policy_lock);
	json_decref(kept);
	json_decref(pol);
	return rc;
}

/*
 * The reader's statement in its owner's bucket policy: there exactly
 * once (give), or gone (!give).  *state: 0 it was as wanted, 1 changed
 * (or, with check, would change), -1 the bucket or its owner's user is
 * gone or suspended (nothing done).  check: read, never write.
 */
static int
reader_policy(struct rgw *r, const struct tl_drv_grant *g, int give,
    int check, int *state, char *w, char *why)
{
	json_t *b = NULL, *pol = NULL, *all = NULL, *list = NULL, *st,
	    *want = NULL;
	const char *o, *p;
	char ak[32], sk[48];
	size_t i, mine = 0, exact = 0;
	int rc, usable = 0;

	*state = -1;
	if ((rc = get_bucket(r, g->resource, &b, why)) != 0)
		return rc;
	if (b == NULL || (o = owner_of(b)) == NULL || g->owner == NULL ||
	    strcmp(o, g->owner) != 0) {
		json_decref(b);
		return 0;
	}
	json_decref(b);
	pthread_mutex_lock(&policy_lock);
	if ((rc = owner_key(r, g->owner, ak, sk, &usable, why)) != 0 ||
	    !usable) {
		pthread_mutex_unlock(&policy_lock);
		return rc;
	}
	if ((rc = policy_get(r, g->resource, ak, sk, &pol, why)) != 0)
		goto out;
	if ((want = reader_stmt(g->login, g->access, g->resource)) == NULL ||
	    (all = statements(pol)) == NULL || (list = json_array()) ==
	    NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto out;
	}
	json_array_foreach(all, i, st) {
		if ((p = principal_of(st)) == NULL || strcmp(p, g->login) !=
		    0) {
			json_array_append(list, st);
			continue;
		}
		mine++;
		exact += json_equal(st, want);
	}
	*state = give ? !(mine == 1 && exact == 1) : mine > 0;
	if (*state && give && mine == 0)
		tl_drv_why_add(w, "bucket \"%s\"'s policy gives user \"%s\" "
		    "nothing", g->resource, g->login);
	else if (*state && give)
		tl_drv_why_add(w, "bucket \"%s\"'s policy gives user \"%s\" "
		    "other than %s access", g->resource, g->login,
		    access_name(g->access));
	if (check || !*state)
		goto out;
	if (give)
		json_array_append(list, want);
	rc = policy_put(r, g->resource, ak, sk, list, why);
out:
	json_decref(want);
	json_decref(list);
	json_decref(all);
	json_decref(pol);
	owner_key_drop(r, g->owner, ak, sk);
	pthread_mutex_unlock(&policy_lock);
	return rc;
}

/* create, set_password, add_credential, fix_privileges of a reader. */
static int
reader_give(struct rgw *r, const struct tl_drv_grant *g, char *why)
{
	char w[TL_WHY_MAX] = "";
	int rc, state;

	if ((rc = reader_policy(r, g, 1, 0, &state, w, why)) != 0)
		return rc;
	if (state < 0)
		return tl_drv_why(why, TL_EDRIVER, "bucket \"%s\" or its "
		    "owner's user \"%.64s\" is gone or suspended: no access "
		    "given to user \"%s\"", g->resource, g->owner != NULL ?
		    g->owner : "?", g->login);
	return tl_drv_why(why, 0, "user \"%s\" with its key has %s access to "
	    "bucket \"%s\"", g->login, access_name(g->access), g->resource);
}

/* The names of an ACL's permission flags (RGW: READ 1, WRITE 2, ...). */
static void
perm_name(json_int_t flags, char *out, size_t n)
{
	static const char *const name[] = { "READ", "WRITE", "READ_ACP",
	    "WRITE_ACP" };
	size_t i, o = 0;

	out[0] = '\0';
	if ((flags & 15) == 15) {
		snprintf(out, n, "FULL_CONTROL");
		return;
	}
	for (i = 0; i < 4; i++)
		if (flags & ((json_int_t)1 << i))
			o += (size_t)snprintf(out + o, o < n ? n - o : 0, "%s%s",
			    o ? "+" : "", name[i]);
	if (out[0] == '\0')
		snprintf(out, n, "flags %lld", (long long)flags);
}

/*
 * What the bucket's ACL grants beyond its owner's FULL_CONTROL, one
 * "PERMISSION to WHOM" each, added to w; *bad when there is any.  Read
 * on the admin side (GET /admin/bucket?policy: the ACL as JSON, whose
 * grant_map entries are typed 0 user, 1 e-mail, 2 group: 1 AllUsers, 2
 * AuthenticatedUsers), so check and check_bulk read it alike, one
 * request per bucket.  A bucket that is gone has no ACL (0, nothing).
 */
static int
read_acl(struct rgw *r, const struct tl_drv_grant *g, int *bad, char *w,
    char *why)
{
	struct kv q[] = { { "bucket", g->resource }, { "policy", "" } };
	json_t *pol = NULL, *e, *gr;
	const char *id, *mail;
	char perm[48];
	json_int_t type, flags, group;
	int rc, owner_full = 0;
	size_t i;

	*bad = 0;
	if ((rc = get_json(r, "/admin/bucket", q, 2, &pol,
	    "reading the bucket's ACL", why)) != 0 || pol == NULL)
		return rc;
	json_array_foreach(json_object_get(json_object_get(pol, "acl"),
	    "grant_map"), i, e) {
		gr = json_object_get(e, "grant");
		type = json_integer_value(json_object_get(json_object_get(gr,
		    "type"), "type"));
		flags = json_integer_value(json_object_get(json_object_get(gr,
		    "permission"), "flags"));
		group = json_integer_value(json_object_get(gr, "group"));
		id = json_string_value(json_object_get(gr, "id"));
		mail = json_string_value(json_object_get(gr, "email"));
		if (type == 0 && id != NULL && strcmp(id, g->login) == 0 &&
		    (flags & 15) == 15) {
			owner_full = 1;
			continue;
		}
		*bad = 1;
		perm_name(flags, perm, sizeof(perm));
		if (type == 2)
			tl_drv_why_add(w, "bucket \"%s\"'s ACL grants %s to "
			    "group %s", g->resource, perm, group == 1 ?
			    "AllUsers" : group == 2 ? "AuthenticatedUsers" :
			    "?");
		else
			tl_drv_why_add(w, "bucket \"%s\"'s ACL grants %s to "
			    "%s %.64s", g->resource, perm, type == 1 ?
			    "e-mail" : "user", type == 1 ? (mail != NULL ?
			    mail : "?") : (id != NULL ? id : "?"));
	}
	if (!owner_full) {
		*bad = 1;
		tl_drv_why_add(w, "bucket \"%s\"'s ACL does not give its "
		    "owner FULL_CONTROL", g->resource);
	}
	json_decref(pol);
	return 0;
}

static int
rgw_fix_privileges(void *h, const struct tl_drv_grant *g, char *why)
{
	struct rgw *r = h;
	char ak[24];
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->password == NULL || g->password[0] == '\0')
		return tl_drv_why(why, TL_EINVAL, "no password for the key");
	tl_drv_rgw_access_key(g->login, g->password, ak);
	if ((rc = fence_check(r, why)) != 0 ||
	    (rc = ensure_user(r, g, 1, why)) != 0)
		return rc;
	if (g->access != 0)
		return reader_give(r, g, why);
	if ((rc = trim_policy(r, g, ak, why)) != 0 ||
	    (rc = set_private(r, g->resource, ak, g->password, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user \"%s\" is active without caps and "
	    "bucket \"%s\" has no policy but its readers' and a private ACL",
	    g->login,
	    g->resource);
}

/* --- verification ------------------------------------------------------ */

static void
drift_to(enum tl_drv_drift *d, enum tl_drv_drift k)
{
	if (k > *d)
		*d = k;
}

/* What the admin side shows of g (u, b: NULL when gone). */
static void
evaluate(const struct tl_drv_grant *g, const json_t *u, const json_t *b,
    enum tl_drv_drift *d, char *why)
{
	const char *o, *bo = g->access != 0 ? g->owner : g->login;
	char ak[24];

	*d = TL_DRIFT_NONE;
	why[0] = '\0';
	if (b == NULL) {
		drift_to(d, TL_DRIFT_MISSING);
		tl_drv_why_add(why, "bucket \"%s\" is gone (flagged: never "
		    "made again empty)", g->resource);
	} else if ((o = owner_of(b)) == NULL || bo == NULL ||
	    strcmp(o, bo) != 0) {
		drift_to(d, TL_DRIFT_MISSING);
		tl_drv_why_add(why, "bucket \"%s\" is owned by \"%.64s\", not "
		    "\"%.64s\"", g->resource, o != NULL ? o : "?",
		    bo != NULL ? bo : "?");
	}
	if (u == NULL) {
		/* A reader's user is all it has: gone, the grant is. */
		drift_to(d, g->access != 0 ? TL_DRIFT_MISSING :
		    TL_DRIFT_CREDENTIAL);
		tl_drv_why_add(why, "user \"%s\" is gone", g->login);
		return;
	}
	tl_drv_rgw_access_key(g->login, g->password != NULL ? g->password :
	    "", ak);
	switch (key_state(u, ak, g->password)) {
	case 0:
		drift_to(d, TL_DRIFT_CREDENTIAL);
		tl_drv_why_add(why, "user \"%s\" has no key %s", g->login, ak);
		break;
	case 1:
		drift_to(d, TL_DRIFT_CREDENTIAL);
		tl_drv_why_add(why, "key %s of user \"%s\" has another secret",
		    ak, g->login);
		break;
	}
	if (suspended(u)) {
		drift_to(d, TL_DRIFT_PRIVILEGES);
		tl_drv_why_add(why, "user \"%s\" is suspended", g->login);
	}
	if (has_caps(u)) {
		drift_to(d, TL_DRIFT_PRIVILEGES);
		tl_drv_why_add(why, "user \"%s\" has admin caps", g->login);
	}
	if (!max_buckets_ok(u)) {
		drift_to(d, TL_DRIFT_PRIVILEGES);
		tl_drv_why_add(why, "user \"%s\" may make more than one bucket",
		    g->login);
	}
}

/* The canary bucket exists, the admin's (made once per session). */
static int
ensure_canary(struct rgw *r, char *why)
{
	char path[RGW_NAME_MAX + 2];
	long st;
	int rc;

	if (r->canary_ok)
		return 0;
	snprintf(path, sizeof(path), "/%s", r->canary);
	if ((rc = request(r, "PUT", path, NULL, 0, NULL, NULL,
	    (const long[]){ 409, 0 }, &st, "making the canary bucket", why))
	    != 0)
		return rc;
	r->canary_ok = 1;
	return 0;
}

/* --- the fence ---------------------------------------------------------- */

/*
 * One object per mesh in the canary bucket (the admin's: a consumer
 * reads nothing in it), tally-fence-MESH ("none" for a home without a
 * mesh id), holding "EPOCH LEADER".  The raise is a compare-and-set:
 * the PUT is conditional on the ETag read (If-Match), or on there being
 * no object yet (If-None-Match: *), which the RGW checks on the RADOS
 * object in the same operation as the write (412 otherwise: read again).
 */
static int
fence_read(struct rgw *r, const char *mesh, struct tl_drv_fence_held *held,
    char *etag, size_t cap, char *why)
{
	char path[RGW_NAME_MAX + 64], leader[TL_DRV_LEADER_MAX];
	unsigned long long e;
	long st;
	int rc;

	held->epoch = 0;
	held->leader[0] = '\0';
	etag[0] = '\0';
	if ((rc = ensure_canary(r, why)) != 0)
		return rc;
	snprintf(path, sizeof(path), "/%s/tally-fence-%s", r->canary,
	    mesh[0] != '\0' ? mesh : "none");
	if ((rc = request(r, "GET", path, NULL, 0, NULL, NULL, ok404, &st,
	    "reading the fence", why)) != 0 || st == 404)
		return rc;
	leader[0] = '\0';
	if (r->buf == NULL || sscanf(r->buf, "%llu %32s", &e, leader) < 1)
		return tl_drv_why(why, TL_EDRIVER, "the fence object %s holds "
		    "no epoch", path);
	held->epoch = e;
	snprintf(held->leader, sizeof(held->leader), "%s", leader);
	snprintf(etag, cap, "%s", r->etag);
	return 0;
}

static int
rgw_fence(void *h, const struct tl_drv_fence *want,
    struct tl_drv_fence_held *held, char *why)
{
	struct rgw *r = h;
	const char *mesh = want->mesh != NULL ? want->mesh : "";
	char path[RGW_NAME_MAX + 64], etag[80], body[64], cond[120];
	struct curl_slist *hd, *h2;
	long st;
	int rc, tries;

	snprintf(path, sizeof(path), "/%s/tally-fence-%s", r->canary,
	    mesh[0] != '\0' ? mesh : "none");
	for (tries = 0; tries < 8; tries++) {
		if ((rc = fence_read(r, mesh, held, etag, sizeof(etag),
		    why)) != 0)
			return rc;
		if (want->epoch == 0 || held->epoch >= want->epoch)
			return 0;
		if (held->epoch != 0 && etag[0] == '\0')
			return tl_drv_why(why, TL_EDRIVER, "the fence object "
			    "%s came without an ETag: no compare-and-set",
			    path);
		snprintf(body, sizeof(body), "%llu %s\n",
		    (unsigned long long)want->epoch, want->leader != NULL ?
		    want->leader : "");
		if (held->epoch == 0)
			snprintf(cond, sizeof(cond), "If-None-Match: *");
		else
			snprintf(cond, sizeof(cond), "If-Match: %s", etag);
		if ((hd = curl_slist_append(NULL, "x-amz-content-sha256: "
		    "UNSIGNED-PAYLOAD")) == NULL ||
		    (h2 = curl_slist_append(hd, cond)) == NULL) {
			curl_slist_free_all(hd);
			return tl_drv_why(why, ENOMEM, "out of memory");
		}
		curl_easy_setopt(r->c, CURLOPT_HTTPHEADER, h2);
		r->body = body;
		rc = request(r, "PUT", path, NULL, 0, NULL, NULL,
		    (const long[]){ 412, 0 }, &st, "raising the fence", why);
		curl_easy_setopt(r->c, CURLOPT_HTTPHEADER, r->hdr);
		curl_slist_free_all(h2);
		if (rc != 0)
			return rc;
		/* 200 or 412: what is held now is read back either way. */
	}
	return tl_drv_why(why, TL_EDRIVER, "the fence object %s changed under "
	    "every one of 8 compare-and-sets", path);
}

/*
 * Before each change: the fence held on the gateway for this session's
 * mesh still lets this session act (one GET); TL_EREFUSED "deposed: ..."
 * once another leader holds it.  A session without a fence (a reader's)
 * checks nothing.
 */
static int
fence_check(struct rgw *r, char *why)
{
	struct tl_drv_fence want = { r->f_mesh, r->f_epoch, r->f_leader };
	struct tl_drv_fence_held held;
	char etag[80];
	int rc;

	if (!r->fenced || r->f_epoch == 0)
		return 0;
	if ((rc = fence_read(r, r->f_mesh, &held, etag, sizeof(etag), why))
	    != 0)
		return rc;
	if (tl_drv_fence_ours(&want, &held))
		return 0;
	return tl_drv_why(why, TL_EREFUSED, "deposed: the RGW's fence for this "
	    "mesh is at epoch %llu by leader %.12s, this session is leader "
	    "%.12s at epoch %llu: nothing changed",
	    (unsigned long long)held.epoch, held.leader, r->f_leader,
	    (unsigned long long)r->f_epoch);
}

/* HEAD /bucket as the consumer: its status. */
static int
head_as(struct rgw *r, const struct tl_drv_grant *g, const char *bucket,
    long *st, char *why)
{
	char ak[24], path[RGW_NAME_MAX + 2];

	tl_drv_rgw_access_key(g->login, g->password, ak);
	snprintf(path, sizeof(path), "/%s", bucket);
	return request(r, "HEAD", path, NULL, 0, ak, g->password,
	    (const long[]){ 403, 404, 0 }, st, "HEAD as the consumer", why);
}

static int
rgw_check(void *h, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	struct rgw *r = h;
	json_t *u = NULL, *b = NULL;
	enum mark m;
	json_t *pol = NULL, *kept = NULL;
	char w[TL_WHY_MAX], ak[24];
	char admin_base[sizeof(r->base)];
	size_t dropped = 0;
	long st;
	int rc, consumer = 0, acl, pst;

	*drift = TL_DRIFT_NONE;
	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->password == NULL)
		return tl_drv_why(why, TL_EINVAL, "no password to check");
	if ((rc = vet_user(r, g, &u, &m, why)) == TL_EREFUSED &&
	    m == MARK_MESH) {
		/* Another mesh's: reported, its why naming that mesh. */
		*drift = TL_DRIFT_MISSING;
		rc = 0;
		goto out;
	}
	if (rc != 0 || (rc = get_bucket(r, g->resource, &b, why)) != 0)
		goto out;
	evaluate(g, u, b, drift, w);
	if (*drift < TL_DRIFT_MISSING && g->access == 0) {
		if ((rc = read_acl(r, g, &acl, w, why)) != 0)
			goto out;
		if (acl)
			drift_to(drift, TL_DRIFT_PRIVILEGES);
	}
	if (*drift >= TL_DRIFT_CREDENTIAL || u == NULL || suspended(u))
		goto done;
	/* From the consumer's side: its bucket, and isolation. */
	if ((rc = ensure_canary(r, why)) != 0)
		goto out;
	/* At the endpoint delivered to it, which may not be tallyd's. */
	memcpy(admin_base, r->base, sizeof(admin_base));
	if (ep != NULL && ep->host != NULL && ep->host[0] != '\0' &&
	    tl_drv_ceph_rgw_decl.compose("endpoint", ep, g, r->base,
	    sizeof(r->base)) != 0)
		memcpy(r->base, admin_base, sizeof(r->base));
	consumer = 1;
	if ((rc = head_as(r, g, g->resource, &st, why)) != 0)
		goto out;
	if (st != 200 && g->access != 0) {
		/* Its key is there (evaluate): the access is what is not. */
		drift_to(drift, TL_DRIFT_PRIVILEGES);
		tl_drv_why_add(w, "the reader's HEAD of bucket \"%s\" got %ld",
		    g->resource, st);
	} else if (st != 200) {
		drift_to(drift, TL_DRIFT_CREDENTIAL);
		tl_drv_why_add(w, "the consumer's HEAD of its bucket got %ld",
		    st);
		goto done;
	}
	if ((rc = head_as(r, g, r->canary, &st, why)) != 0)
		goto out;
	if (st != 403) {
		drift_to(drift, TL_DRIFT_PRIVILEGES);
		tl_drv_why_add(w, "the consumer's HEAD of the canary bucket "
		    "got %ld, not 403: it reaches a bucket not its own", st);
	}
	memcpy(r->base, admin_base, sizeof(r->base));
	consumer = 0;
	if (g->access != 0) {
		if ((rc = reader_policy(r, g, 1, 1, &pst, w, why)) != 0)
			goto out;
		if (pst < 0) {
			drift_to(drift, TL_DRIFT_MISSING);
			tl_drv_why_add(w, "the owner's user \"%.64s\" is gone "
			    "or suspended", g->owner != NULL ? g->owner : "?");
		} else if (pst > 0)
			drift_to(drift, TL_DRIFT_PRIVILEGES);
		goto done;
	}
	tl_drv_rgw_access_key(g->login, g->password, ak);
	if ((rc = policy_get(r, g->resource, ak, g->password, &pol, why))
	    != 0)
		goto out;
	if (pol != NULL) {
		if ((rc = keep_readers(r, g, pol, &kept, &dropped, w, why))
		    != 0)
			goto out;
		if (dropped > 0 || json_array_size(kept) == 0)
			drift_to(drift, TL_DRIFT_PRIVILEGES);
	}
done:
	if (*drift == TL_DRIFT_NONE && g->access != 0)
		tl_drv_why(why, 0, "user \"%s\" and its key have %s access to "
		    "bucket \"%s\" and reach it, and not the canary",
		    g->login, access_name(g->access), g->resource);
	else if (*drift == TL_DRIFT_NONE)
		tl_drv_why(why, 0, "user \"%s\", its key and bucket \"%s\" are "
		    "as made (no policy but its readers', a private ACL); the "
		    "consumer reaches its bucket and not the canary", g->login,
		    g->resource);
	else
		tl_drv_why(why, 0, "%s", w);
out:
	if (consumer)
		memcpy(r->base, admin_base, sizeof(r->base));
	json_decref(kept);
	json_decref(pol);
	json_decref(u);
	json_decref(b);
	return rc;
}

static int
rgw_check_bulk(void *h, const struct tl_drv_grant *gs, size_t n,
    enum tl_drv_drift *drift, char (*why)[TL_WHY_MAX])
{
	struct rgw *r = h;
	json_t *all = NULL, *u, *b, *it;
	const char *name;
	struct kv q[] = { { "stats", "true" } };
	enum mark m;
	size_t i, j;
	int rc;

	for (i = 0; i < n; i++)
		if ((rc = grant_ok(&gs[i], why[i])) != 0)
			return rc;
	if ((rc = get_json(r, "/admin/bucket", q, 1, &all,
	    "listing the buckets", why[0])) != 0)
		return rc;
	if (!json_is_array(all)) {
		json_decref(all);
		return tl_drv_why(why[0], TL_EDRIVER, "the bucket list is not "
		    "an array");
	}
	for (i = 0; i < n; i++) {
		b = NULL;
		json_array_foreach(all, j, it) {
			name = json_string_value(json_object_get(it,
			    "bucket"));
			if (name != NULL && strcmp(name, gs[i].resource) == 0) {
				b = it;
				break;
			}
		}
		if ((rc = vet_user(r, &gs[i], &u, &m, why[i])) == TL_EREFUSED &&
		    m == MARK_MESH) {
			drift[i] = TL_DRIFT_MISSING;
			rc = 0;
			continue;
		}
		if (rc != 0)
			break;
		evaluate(&gs[i], u, b, &drift[i], why[i]);
		if (drift[i] < TL_DRIFT_MISSING && gs[i].access == 0) {
			int acl;

			if ((rc = read_acl(r, &gs[i], &acl, why[i],
			    why[i])) != 0) {
				json_decref(u);
				break;
			}
			if (acl)
				drift_to(&drift[i], TL_DRIFT_PRIVILEGES);
		}
		if (drift[i] == TL_DRIFT_NONE)
			tl_drv_why(why[i], 0, "user \"%s\", its key and bucket "
			    "\"%s\" are as made", gs[i].login,
			    gs[i].resource);
		json_decref(u);
	}
	json_decref(all);
	return rc;
}

/* --- rotation, revocation ------------------------------------------------ */

static int
rgw_add_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	struct rgw *r = h;
	json_t *u = NULL;
	enum mark m;
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->password == NULL || g->password[0] == '\0')
		return tl_drv_why(why, TL_EINVAL, "no password for the key");
	if ((rc = fence_check(r, why)) != 0 ||
	    (rc = vet_user(r, g, &u, &m, why)) != 0)
		return rc;
	if (u == NULL)
		return tl_drv_why(why, TL_EDRIVER, "user \"%s\" is gone: no "
		    "key added beside", g->login);
	json_decref(u);
	if ((m == MARK_ADOPT && (rc = remark_user(r, g, why)) != 0) ||
	    (rc = put_key(r, g, why)) != 0)
		return rc;
	if (g->access != 0 && (rc = reader_give(r, g, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "a second key is on user \"%s\"", g->login);
}

/*
 * Retiring what tally adopt took over (g->adopting): g->password is the
 * credential to keep, the new version's, whose key (access key
 * tl_drv_rgw_access_key(login, password), as add_credential put it and
 * compose delivers it) must be on the user with that secret before
 * anything goes, or every holder would be locked out; then every other
 * key goes, the adopted ones tally never knew.  The user and the
 * bucket stay.
 */
static int
retire_adopted(struct rgw *r, const struct tl_drv_grant *g, const json_t *u,
    enum mark m, const char *keep, char *why)
{
	unsigned n;
	int rc;

	if (u == NULL)
		return tl_drv_why(why, 0, "user \"%s\" is gone: no adopted "
		    "key is left", g->login);
	if (key_state(u, keep, g->password) != 2)
		return tl_drv_why(why, TL_EDRIVER, "key %s, the one to keep, is "
		    "not on user \"%s\" with its secret: no key removed (the "
		    "holders would have none)", keep, g->login);
	if ((m == MARK_ADOPT && (rc = remark_user(r, g, why)) != 0) ||
	    (rc = drop_other_keys(r, g, u, keep, "removing an adopted key",
	    &n, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user \"%s\" keeps key %s alone: %u "
	    "adopted key(s) removed", g->login, keep, n);
}

static int
rgw_retire_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	struct rgw *r = h;
	json_t *u = NULL;
	enum mark m;
	char ak[24];
	long st;
	int rc;
	struct kv q[] = { { "access-key", ak }, { "key", "" },
		{ "key-type", "s3" }, { "uid", g->login } };

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->password == NULL || g->password[0] == '\0')
		return tl_drv_why(why, TL_EINVAL, "no password of the retired "
		    "key");
	if ((rc = fence_check(r, why)) != 0 ||
	    (rc = vet_user(r, g, &u, &m, why)) != 0)
		return rc;
	tl_drv_rgw_access_key(g->login, g->password, ak);
	if (g->adopting) {
		rc = retire_adopted(r, g, u, m, ak, why);
		json_decref(u);
		return rc;
	}
	if (u == NULL || key_state(u, ak, NULL) == 0) {
		json_decref(u);
		return tl_drv_why(why, 0, "key %s of user \"%s\" is gone "
		    "already", ak, g->login);
	}
	json_decref(u);
	if (m == MARK_ADOPT && (rc = remark_user(r, g, why)) != 0)
		return rc;
	if ((rc = request(r, "DELETE", "/admin/user", q, 4, NULL, NULL, ok404,
	    &st, "removing the old key", why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "key %s of user \"%s\" removed", ak,
	    g->login);
}

/* The bucket's bytes and objects (0, 0 when gone or not the grant's). */
static int
usage(struct rgw *r, const struct tl_drv_grant *g, uint64_t *bytes,
    uint64_t *objects, char *why)
{
	json_t *b = NULL, *m;
	const char *o;
	int rc;

	*bytes = *objects = 0;
	if ((rc = get_bucket(r, g->resource, &b, why)) != 0 || b == NULL)
		return rc;
	if ((o = owner_of(b)) != NULL && strcmp(o, g->login) == 0) {
		m = json_object_get(json_object_get(b, "usage"), "rgw.main");
		*bytes = (uint64_t)json_integer_value(json_object_get(m,
		    "size"));
		*objects = (uint64_t)json_integer_value(json_object_get(m,
		    "num_objects"));
	}
	json_decref(b);
	return 0;
}

static int
rgw_size(void *h, const struct tl_drv_grant *g, uint64_t *bytes, char *why)
{
	uint64_t objects;
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if ((rc = usage(h, g, bytes, &objects, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "bucket \"%s\": %llu bytes in %llu object(s)",
	    g->resource, (unsigned long long)*bytes,
	    (unsigned long long)objects);
}

static int
rgw_loss(void *h, const struct tl_drv_grant *g, int drop, int *loses,
    char *why)
{
	uint64_t bytes, objects;
	int rc;

	*loses = 0;
	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->access != 0)
		return tl_drv_why(why, 0, "nothing is lost: user \"%s\" is %s; "
		    "bucket \"%s\" is its owner's", g->login, drop ?
		    "deleted" : "suspended", g->resource);
	if ((rc = usage(h, g, &bytes, &objects, why)) != 0)
		return rc;
	if (!drop)
		return tl_drv_why(why, 0, "nothing is lost: bucket \"%s\" is "
		    "kept with %llu object(s), %llu bytes; the user is "
		    "suspended", g->resource, (unsigned long long)objects,
		    (unsigned long long)bytes);
	*loses = objects > 0;
	return tl_drv_why(why, 0, "bucket \"%s\" is deleted with %llu "
	    "object(s), %llu bytes, and user \"%s\" with its keys", g->resource,
	    (unsigned long long)objects, (unsigned long long)bytes, g->login);
}

/*
 * A reader's user deleted, never the bucket (its owner's); its statement
 * goes from the owner's policy first, while the owner's user can still
 * act, or the owner's next check would find a principal gone.
 */
static int
reader_drop(struct rgw *r, const struct tl_drv_grant *g, json_t *u,
    char *why)
{
	char w[TL_WHY_MAX] = "";
	long st;
	int rc, state;
	struct kv qu[] = { { "purge-data", "true" }, { "uid", g->login } };

	if ((rc = reader_policy(r, g, 0, 0, &state, w, why)) == 0 &&
	    u != NULL)
		rc = request(r, "DELETE", "/admin/user", qu, 2, NULL, NULL,
		    ok404, &st, "deleting the user", why);
	json_decref(u);
	if (rc != 0)
		return rc;
	return tl_drv_why(why, 0, "user \"%s\" with its keys is deleted and "
	    "its access to bucket \"%s\" gone; the bucket is its owner's, "
	    "kept", g->login, g->resource);
}

static int
rgw_revoke(void *h, const struct tl_drv_grant *g, int drop, char *why)
{
	struct rgw *r = h;
	json_t *u = NULL, *b = NULL;
	enum mark m;
	const char *o;
	long st;
	int rc;
	struct kv qb[] = { { "bucket", g != NULL ? g->resource : "" },
		{ "purge-objects", "true" } };
	struct kv qu[] = { { "purge-data", "true" },
		{ "uid", g != NULL ? g->login : "" } };

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if ((rc = fence_check(r, why)) != 0 ||
	    (rc = vet_user(r, g, &u, &m, why)) != 0)
		return rc;
	if (g->access != 0 && drop)
		return reader_drop(r, g, u, why);
	if (!drop) {
		rc = u == NULL ? 0 : modify_user(r, g, 1, why);
		json_decref(u);
		if (rc != 0)
			return rc;
		return tl_drv_why(why, 0, "user \"%s\" is suspended; bucket "
		    "\"%s\" is kept", g->login, g->resource);
	}
	if ((rc = get_bucket(r, g->resource, &b, why)) != 0)
		goto out;
	if (b != NULL && (o = owner_of(b)) != NULL && strcmp(o, g->login) ==
	    0 && (rc = request(r, "DELETE", "/admin/bucket", qb, 2, NULL,
	    NULL, ok404, &st, "deleting the bucket", why)) != 0)
		goto out;
	if (u != NULL && (rc = request(r, "DELETE", "/admin/user", qu, 2,
	    NULL, NULL, ok404, &st, "deleting the user", why)) != 0)
		goto out;
	tl_drv_why(why, 0, "bucket \"%s\" with its objects and user \"%s\" "
	    "with its keys are deleted", g->resource, g->login);
out:
	json_decref(u);
	json_decref(b);
	return rc;
}

/* --- tally adopt: a bucket and a user tally did not make ------------- */

/*
 * Whether dn is one of mark_of's marks, made by tally; grant gets the
 * grant it names ("" for the unnamed mark).
 */
static int
tally_mark(const char *dn, char *grant, size_t n)
{
	size_t ml = strlen(RGW_MESH_MARK " "), gl = strlen(RGW_MARK " ");

	grant[0] = '\0';
	if (dn == NULL)
		return 0;
	if (strncmp(dn, RGW_MESH_MARK " ", ml) == 0 && strlen(dn) > ml + 32 &&
	    strncmp(dn + ml + 32, " grant ", 7) == 0) {
		snprintf(grant, n, "%s", dn + ml + 32 + 7);
		return 1;
	}
	if (strncmp(dn, RGW_MARK " ", gl) == 0)
		snprintf(grant, n, "%s", dn + gl);
	return strcmp(dn, RGW_MARK) == 0 || grant[0] != '\0';
}

/*
 * 0 when user u (what names it in why) carries no mark of tally's, or,
 * when mine, g's own (a create that ran before); TL_EREFUSED when it is
 * another mesh's, TL_EDRIVER when tally made it for another grant.
 */
static int
adoptable(struct rgw *r, const struct tl_drv_grant *g, const json_t *u,
    const char *what, int mine, char *why)
{
	char other[160], mesh[33];
	enum mark k;

	if (!tally_mark(json_string_value(json_object_get(u, "display_name")),
	    other, sizeof(other)))
		return 0;
	if ((k = user_mark(r->mesh, u, g, mesh)) == MARK_MESH)
		return tl_drv_why(why, TL_EREFUSED, "%s is owned by mesh "
		    "%.12s..., not this one (tally adopt --from-mesh takes it "
		    "over): not touched", what, mesh);
	if (mine && (k == MARK_OURS || k == MARK_ADOPT))
		return 0;
	return tl_drv_why(why, TL_EDRIVER, "%s was made by tally for %s%s: "
	    "tally adopt takes over only what tally did not make", what,
	    other[0] != '\0' ? "grant " : "another grant", other);
}

/* An RGW "true", which this release writes as a string. */
static int
flag(const json_t *u, const char *name)
{
	const json_t *v = json_object_get(u, name);

	return json_is_true(v) || (json_is_string(v) &&
	    strcmp(json_string_value(v), "true") == 0);
}

/* The gateway's own: admin caps, or a system or admin user. */
static int
privileged(const json_t *u)
{
	return has_caps(u) || flag(u, "system") || flag(u, "admin");
}

/* What the bucket holds: objects and bytes over every category. */
static void
held(const json_t *b, uint64_t *objects, uint64_t *bytes)
{
	const char *cat;
	json_t *m;

	*objects = *bytes = 0;
	json_object_foreach(json_object_get(b, "usage"), cat, m) {
		*objects += (uint64_t)json_integer_value(json_object_get(m,
		    "num_objects"));
		*bytes += (uint64_t)json_integer_value(json_object_get(m,
		    "size"));
	}
}

/*
 * An S3 key of the user itself, not of a subuser (whose access may be
 * narrower), into *ak and *sk (pointing into u); 0 when it has none.
 */
static int
own_key(const json_t *u, const char *uid, const char **ak, const char **sk)
{
	const json_t *k;
	const char *who;
	size_t i;

	json_array_foreach(json_object_get(u, "keys"), i, k) {
		who = json_string_value(json_object_get(k, "user"));
		*ak = json_string_value(json_object_get(k, "access_key"));
		*sk = json_string_value(json_object_get(k, "secret_key"));
		if (who != NULL && strcmp(who, uid) == 0 && *ak != NULL &&
		    *sk != NULL)
			return 1;
	}
	return 0;
}

/*
 * The buckets the user owns other than the grant's, comma-separated
 * into out (n bytes; "": none).
 */
static int
other_buckets(struct rgw *r, const struct tl_drv_grant *g, char *out,
    size_t n, char *why)
{
	struct kv q[] = { { "uid", g->login } };
	json_t *l = NULL, *it;
	const char *name;
	size_t i, o = 0;
	int rc;

	out[0] = '\0';
	if ((rc = get_json(r, "/admin/bucket", q, 1, &l, "listing the user's "
	    "buckets", why)) != 0)
		return rc;
	json_array_foreach(l, i, it) {
		if ((name = json_string_value(it)) == NULL ||
		    strcmp(name, g->resource) == 0 || o + 1 >= n)
			continue;
		o += (size_t)snprintf(out + o, n - o, "%s%s", o ? ", " : "",
		    name);
		if (o >= n)
			o = n - 1;
	}
	json_decref(l);
	return 0;
}

/*
 * Gives the bucket to the user: PUT /admin/bucket (link), which moves
 * it from its owner, the owner's bucket ACL with it.  The ACLs of the
 * objects stay their writers' (only radosgw-admin's chown rewrites
 * them), so adopt_takeover links only an empty bucket.
 */
static int
link_bucket(struct rgw *r, const struct tl_drv_grant *g, const json_t *b,
    char *why)
{
	const char *id = json_string_value(json_object_get(b, "id"));
	struct kv q[3];
	size_t nq = 0;
	long st;

	q[nq++] = (struct kv){ "bucket", g->resource };
	if (id != NULL && *id != '\0')
		q[nq++] = (struct kv){ "bucket-id", id };
	q[nq++] = (struct kv){ "uid", g->login };
	return request(r, "PUT", "/admin/bucket", q, nq, NULL, NULL, NULL, &st,
	    "linking the bucket to the user", why);
}

/*
 * tally adopt (g->adopting): the bucket g->resource and the user
 * g->login, made by someone else, become g's: the user gets the mark
 * and what a grant's user is (active, no caps, max-buckets 1) and owns
 * the bucket, which keeps its objects and loses any policy and any ACL
 * grant beyond its owner's.  The user keeps its keys (g->password is
 * not added: the rotation that follows adds the grant's first key and
 * retires these); the bucket's policy and ACL are set with one of them,
 * as only an owner may.  Everything is checked before anything
 * changes, so a refusal leaves both as they were; a crash part way is
 * resumed (a user marked g's is adoptable again).
 */
static int
adopt_takeover(struct rgw *r, const struct tl_drv_grant *g, char *why)
{
	json_t *b = NULL, *u = NULL, *ou = NULL;
	const char *o, *ak, *sk;
	char what[128], owhat[160], others[256], from[96] = "";
	uint64_t objects, bytes;
	size_t keys;
	int rc;

	snprintf(what, sizeof(what), "user \"%s\"", g->login);
	if ((rc = get_bucket(r, g->resource, &b, why)) != 0)
		goto out;
	if (b == NULL) {
		rc = tl_drv_why(why, TL_EDRIVER, "bucket \"%s\" does not exist "
		    "on this gateway: nothing to adopt", g->resource);
		goto out;
	}
	if ((rc = get_user(r, g->login, &u, why)) != 0)
		goto out;
	if (u == NULL) {
		rc = tl_drv_why(why, TL_EDRIVER, "%s does not exist on this "
		    "gateway: nothing to adopt", what);
		goto out;
	}
	if ((rc = adoptable(r, g, u, what, 1, why)) != 0)
		goto out;
	if (privileged(u)) {
		rc = tl_drv_why(why, TL_EDRIVER, "%s has admin caps or is a "
		    "system user: tally adopt takes over a consumer's user, "
		    "never the gateway's own", what);
		goto out;
	}
	held(b, &objects, &bytes);
	if ((o = owner_of(b)) == NULL || strcmp(o, g->login) != 0) {
		snprintf(owhat, sizeof(owhat), "bucket \"%s\"'s owner, user "
		    "\"%.64s\"", g->resource, o != NULL ? o : "?");
		if (o != NULL && (rc = get_user(r, o, &ou, why)) != 0)
			goto out;
		if (ou != NULL && (rc = adoptable(r, g, ou, owhat, 0, why)) !=
		    0)
			goto out;
		if (ou != NULL && privileged(ou)) {
			rc = tl_drv_why(why, TL_EDRIVER, "%s, is an admin of "
			    "the gateway: tally adopt takes over a consumer's "
			    "bucket", owhat);
			goto out;
		}
		if (objects > 0) {
			rc = tl_drv_why(why, TL_EDRIVER, "bucket \"%s\" holds "
			    "%llu object(s) of its owner \"%.64s\", which stay "
			    "that user's (their ACLs) if the bucket is linked "
			    "to %s: make the user its owner first "
			    "(radosgw-admin bucket chown), or adopt it with "
			    "--login %.64s", g->resource,
			    (unsigned long long)objects, o != NULL ? o : "?",
			    what, o != NULL ? o : "?");
			goto out;
		}
		snprintf(from, sizeof(from), ", linked from \"%.64s\"", o != NULL
		    ? o : "?");
	}
	if ((rc = other_buckets(r, g, others, sizeof(others), why)) != 0)
		goto out;
	if (others[0] != '\0') {
		rc = tl_drv_why(why, TL_EDRIVER, "%s owns other buckets too "
		    "(%s): a grant's user owns its bucket alone, and its keys "
		    "would reach them; link them to another user first", what,
		    others);
		goto out;
	}
	if (!own_key(u, g->login, &ak, &sk)) {
		rc = tl_drv_why(why, TL_EDRIVER, "%s has no S3 key of its own: "
		    "tally adopt takes over the user its consumers sign with",
		    what);
		goto out;
	}
	if ((from[0] != '\0' && (rc = link_bucket(r, g, b, why)) != 0) ||
	    (rc = modify_user(r, g, 0, why)) != 0 ||
	    (rc = drop_policy(r, g->resource, ak, sk, why)) != 0 ||
	    (rc = set_private(r, g->resource, ak, sk, why)) != 0)
		goto out;
	keys = json_array_size(json_object_get(u, "keys")) +
	    json_array_size(json_object_get(u, "swift_keys"));
	rc = tl_drv_why(why, 0, "bucket \"%s\" (%llu object(s), %llu bytes) "
	    "and %s adopted: the user is marked as the grant's and owns the "
	    "bucket%s, private, without a policy; its %zu key(s) kept until "
	    "the rotation retires them", g->resource,
	    (unsigned long long)objects, (unsigned long long)bytes, what, from,
	    keys);
out:
	json_decref(b);
	json_decref(u);
	json_decref(ou);
	return rc;
}

/* --- adopting: another mesh's objects, found by their mark ------------ */

#define RGW_LIST_MAX	"1000"

/*
 * Whether uid has the shape of the grant's user under any scheme 2, 3
 * or 4 (shape: scheme 2's uid): the same prefix and length, the digest
 * 16 hex digits.
 */
static int
same_shape(const char *uid, const char *shape)
{
	size_t n = strlen(shape), p;

	if (n <= 17 || strlen(uid) != n || shape[n - 17] != '_')
		return 0;
	p = n - 16;
	return strncmp(uid, shape, p) == 0 &&
	    strspn(uid + p, "0123456789abcdef") == 16;
}

/*
 * The users of the grant's shape whose display-name is mark: the first
 * into found (RGW_NAME_MAX + 1 bytes), *nfound how many; *nshape how
 * many of the shape were read.  GET /admin/user?list, page by page.
 */
static int
scan_users(struct rgw *r, const char *shape, const char *mark, char *found,
    unsigned *nfound, unsigned *nshape, char *why)
{
	char marker[512] = "";
	json_t *l = NULL, *u, *k;
	const char *uid, *dn, *m;
	struct kv q[3];
	size_t i, nq;
	int rc = 0, more = 1;

	*nfound = *nshape = 0;
	found[0] = '\0';
	while (more && rc == 0) {
		nq = 0;
		q[nq++] = (struct kv){ "list", "" };
		q[nq++] = (struct kv){ "max-entries", RGW_LIST_MAX };
		if (marker[0] != '\0')
			q[nq++] = (struct kv){ "marker", marker };
		if ((rc = get_json(r, "/admin/user", q, nq, &l,
		    "listing the users", why)) != 0)
			break;
		if (l == NULL || !json_is_array(json_object_get(l, "keys"))) {
			rc = tl_drv_why(why, TL_EDRIVER, "listing the users: "
			    "the RGW sent no list");
			break;
		}
		json_array_foreach(json_object_get(l, "keys"), i, k) {
			if ((uid = json_string_value(k)) == NULL ||
			    !same_shape(uid, shape))
				continue;
			(*nshape)++;
			if ((rc = get_user(r, uid, &u, why)) != 0)
				break;
			dn = u != NULL ? json_string_value(json_object_get(u,
			    "display_name")) : NULL;
			if (dn != NULL && strcmp(dn, mark) == 0 &&
			    (*nfound)++ == 0)
				snprintf(found, RGW_NAME_MAX + 1, "%s", uid);
			json_decref(u);
		}
		m = json_string_value(json_object_get(l, "marker"));
		more = json_is_true(json_object_get(l, "truncated")) &&
		    m != NULL && *m != '\0' && strcmp(m, marker) != 0;
		if (more)
			snprintf(marker, sizeof(marker), "%s", m);
		json_decref(l);
		l = NULL;
	}
	json_decref(l);
	return rc;
}

static int
rgw_find_marked(void *h, const struct tl_drv_name_in *in,
    const char *from_mesh, struct tl_drv_names *out, char *why)
{
	struct rgw *r = h;
	struct tl_drv_name_in in2;
	struct tl_drv_names shape;
	struct tl_drv_grant g;
	char mark[300], uid[RGW_NAME_MAX + 1];
	uint64_t bytes = 0, objects = 0;
	unsigned nfound, nshape;
	json_t *b = NULL;
	const char *o;
	size_t i;
	int rc;

	memset(out, 0, sizeof(*out));
	if (in == NULL || in->grant == NULL || in->grant[0] == '\0' ||
	    from_mesh == NULL || strlen(from_mesh) != 32 ||
	    strspn(from_mesh, "0123456789abcdef") != 32)
		return tl_drv_why(why, TL_EINVAL, "no grant, or a mesh id that "
		    "is not 32 hex digits");
	if (strcmp(from_mesh, r->mesh) == 0)
		return tl_drv_why(why, TL_EINVAL, "mesh %.12s... is this "
		    "session's own", from_mesh);
	/* Schemes 2, 3 and 4 differ in the digest only. */
	in2 = *in;
	in2.scheme = TL_DRV_NAMING;
	in2.recorded = "";
	in2.move = 0;
	in2.key = NULL;
	in2.adopted = NULL;
	tl_drv_name_scheme(&in2, RGW_NAME_MAX, &shape);
	if (!tl_drv_rgw_name_ok(shape.resource, 0))
		return tl_drv_why(why, TL_EINVAL, "resource \"%.64s\": no RGW "
		    "user has such a name", in->resource != NULL ?
		    in->resource : "");
	snprintf(mark, sizeof(mark), RGW_MESH_MARK " %s grant %s", from_mesh,
	    in->grant);
	if ((rc = scan_users(r, shape.resource, mark, uid, &nfound, &nshape,
	    why)) != 0)
		return rc;
	if (nfound == 0)
		return tl_drv_why(why, TL_ENOTFOUND, "no RGW user carries mesh "
		    "%.12s...'s mark for grant %s (%u user(s) of its names' "
		    "shape looked at)", from_mesh, in->grant, nshape);
	if (nfound > 1)
		return tl_drv_why(why, TL_EDRIVER, "%u RGW users carry mesh "
		    "%.12s...'s mark for grant %s (one is \"%s\"): not "
		    "adopted, which is the grant's is not clear", nfound,
		    from_mesh, in->grant, uid);
	snprintf(out->login, sizeof(out->login), "%s", uid);
	snprintf(out->resource, sizeof(out->resource), "%s", uid);
	for (i = 0; out->resource[i] != '\0'; i++)
		if (out->resource[i] == '_')
			out->resource[i] = '-';
	if ((rc = get_bucket(r, out->resource, &b, why)) != 0)
		goto fail;
	if (b == NULL) {
		json_decref(b);
		return tl_drv_why(why, 0, "user \"%s\", marked by mesh %.12s... "
		    "for grant %s; its bucket \"%s\" is gone (made again "
		    "empty)", uid, from_mesh, in->grant, out->resource);
	}
	if ((o = owner_of(b)) == NULL || strcmp(o, uid) != 0) {
		rc = tl_drv_why(why, TL_EDRIVER, "user \"%s\" carries mesh "
		    "%.12s...'s mark for grant %s, but bucket \"%s\" is owned "
		    "by \"%.64s\": not adopted", uid, from_mesh, in->grant,
		    out->resource, o != NULL ? o : "?");
		json_decref(b);
		goto fail;
	}
	json_decref(b);
	memset(&g, 0, sizeof(g));
	g.resource = out->resource;
	g.login = out->login;
	if ((rc = usage(r, &g, &bytes, &objects, why)) != 0)
		goto fail;
	return tl_drv_why(why, 0, "user \"%s\" and bucket \"%s\" (%llu "
	    "object(s), %llu bytes), marked by mesh %.12s... for grant %s",
	    uid, out->resource, (unsigned long long)objects,
	    (unsigned long long)bytes, from_mesh, in->grant);
fail:
	memset(out, 0, sizeof(*out));
	return rc;
}

const struct tl_drv_ops tl_drv_ceph_rgw = {
	.decl = &tl_drv_ceph_rgw_decl,
	.open = rgw_open,
	.close = rgw_close,
	.create = rgw_create,
	.check = rgw_check,
	.check_bulk = rgw_check_bulk,
	.set_password = rgw_set_password,
	.fix_privileges = rgw_fix_privileges,
	.revoke = rgw_revoke,
	.size = rgw_size,
	.add_credential = rgw_add_credential,
	.retire_credential = rgw_retire_credential,
	.loss = rgw_loss,
	.fence = rgw_fence,
	.find_marked = rgw_find_marked,
};
