/*
 * rabbitmq.c - the RabbitMQ driver: a virtual host and a user per grant.
 * These are its operations; its declaration (type, settings, fields,
 * revocation, fencing, compose) is rabbitmq_decl.c's.
 *
 * What a grant is on the broker (create makes it, check verifies it,
 * fix_privileges restores it):
 *
 *   resource	a virtual host, its description the grant's mark ("made by
 *		tally for grant ID in mesh MESH; do not edit", without
 *		" in mesh MESH" for a home without a mesh id) and its tags
 *		["tally"];
 *   login	a user without tags (so no management access) whose only
 *		permissions are configure, write and read ".*" on that
 *		virtual host; a rotation adds a second such user beside it
 *		(names: the shared scheme, drivers/naming.c: the vhost is
 *		PREFIX_DIGEST, the users PREFIX_DIGEST_vN).
 *
 * Everything goes through the management HTTP API with libcurl, never
 * over AMQP: the broker may carry tally's own record, and a broker cannot
 * be managed over itself (the admin's session is HTTP on the management
 * port).  Names reach URLs only through curl_easy_escape (so "/" in a
 * name is %2F and two names never meet in one path) and bodies only
 * through jansson.  The plaintext password never crosses the API: users
 * are PUT with password_hash and hashing_algorithm
 * rabbit_password_hashing_sha256, computed here with a fresh salt; and a
 * user is never PUT without a password_hash (the API then clears the
 * password), so a repair of tags sends back the hash it read.
 *
 * Whose objects are: a vhost is this grant's when it carries this grant's
 * mark (or the unnamed mark and adopt_unnamed); one marked for another
 * grant, or unmarked, is never touched.  A mark naming another mesh than
 * the session's (tl_drv_admin.mesh) is refused by every change
 * (TL_EREFUSED, "owned by mesh ..., not this one") and is a drift to
 * check, unless g->adopt_mesh names that mesh; a mark naming no mesh
 * (made before marks named one) is judged by its grant alone.  Every
 * change but a revocation writes this session's mark when it differs.
 * Users tally makes carry no mark (tags would be access): a user is the
 * grant's when it has permissions on the grant's vhost, or none anywhere
 * and no tags (what a create that stopped between the user and its
 * permissions leaves; such a user can do nothing, so taking it over
 * gives nothing away).  A user with tags or with permissions only
 * elsewhere is someone else's, and refused.  The grant's logins beside
 * g->login are the scheme's STEM_vN, STEM the vhost's name, the owner's
 * or g->login's own without its _vN (an adopted vhost keeps its name
 * while the logins take the scheme's, and naming.c cuts a long prefix
 * shorter in a login than in the vhost), and the user tally adopt took
 * over.
 *
 * tally adopt (create with g->adopting): the vhost g->resource and the
 * user g->login, made by someone else, become the grant's as they are.
 * The vhost gets the grant's mark by a PUT of its description and tags
 * (never deleted or made again: its queues and messages stay); the user
 * gets ".*" on it and is PUT back with the hash it has (its holders'
 * password works until the rotation that follows retires it) and the
 * tag "tally", its mark: its name is not the scheme's, and the tag tells
 * check, fix_privileges and revoke that its permission on the vhost is
 * the grant's (no access: the management plugin knows only its own
 * tags).  Other users' permissions on the vhost go, as fix_privileges
 * would take them.  Refused: a vhost or user that does not exist
 * (TL_EDRIVER, "nothing to adopt"), a vhost marked for another grant or
 * mesh, a user with permissions on another vhost (on another grant's or
 * mesh's: theirs; on an operator's: the retirement would cut that
 * access off), an administrator.  A resumed call finds its marks and
 * goes on.
 *
 * Drift (check, check_bulk): the vhost gone, or no longer this grant's,
 * is TL_DRIFT_MISSING and never recreated (its messages are gone; an
 * empty vhost would hide that); the user gone or its stored hash not the
 * grant's password is TL_DRIFT_CREDENTIAL (set_password puts it back
 * with its permissions); tags, permissions other than ".*" on the vhost,
 * permissions elsewhere or another user's permissions on the vhost
 * (tally's admin's excepted: the API grants it the vhosts it makes) are
 * TL_DRIFT_PRIVILEGES (fix_privileges); so is a vhost the broker lists
 * as "stopped" on a node (a PUT cut short by a crash of tallyd writes
 * the record and never starts its processes: consumers get 541 "vhost
 * is down"), which every repair and a resumed create start through the
 * API (POST /api/vhosts/V/start/NODE), never by remaking it.  check
 * also logs in over AMQP as the consumer (core/amqp.c, librabbitmq-c);
 * check_bulk makes three
 * requests for any number of grants (GET /api/users, /api/permissions,
 * /api/vhosts) and compares the stored hashes by recomputing them with
 * their salts.
 *
 * Revocation: deleting a user closes its connections in 3.10, not in
 * every release, so they are closed through the API too (DELETE
 * /api/connections/NAME); with them go the exclusive and auto-delete
 * queues they declared, and their messages: revocation declares that it
 * destroys, and loss counts what the vhost holds.  retain deletes the
 * users and keeps the vhost (restore is create again); drop deletes the
 * vhost.
 *
 * The fence: a global parameter per mesh, tally-fence-MESH, value
 * {"epoch": "N", "leader": HEX}, through the management API, which has no
 * compare-and-set: raised by read, compare, write, read back (rmq_fence
 * says what that leaves); every changing request (PUT, POST, DELETE) of
 * a fenced session is preceded by a read of it, nothing cached across
 * requests, and is not sent ("deposed: ...", TL_EREFUSED) when the fence
 * held is not the session's: a request already sent when a promotion
 * raised the fence is the window (TL_DRV_FENCE_BEFORE_CALL).
 *
 * TLS (the settings tls and ca, decl.h): unless the mode is off the
 * management API is https on management-port (the broker's TLS
 * listener), verified against ca (tls=verify) or not verified
 * (tls=require); a certificate that does not verify is TL_EUNTRUSTED
 * before any request is sent, so the admin's Basic credentials never
 * reach an unverified server.  The consumer's login of check is where
 * compose sends consumers: AMQPS on amqps-port unless tls is off
 * (verified against ca under verify), else AMQP on port.
 *
 * The admin's client certificate (admin-cert, admin-key: for a
 * management listener with management.ssl.verify = verify_peer) is
 * checked when a session opens (a pair that cannot be presented, or one
 * with tls off, is TL_EINVAL before any request) and given to libcurl
 * from memory (tl_drv_http_client_cert: read in place from the
 * session's guarded memory, wiped at close; never a file), so every
 * request of the session
 * presents it; the consumer's AMQP login of check never does.
 *
 * Access below ownership (g->access, TL_DRV_CAP_ACCESS): the grant is a
 * user of its own on the vhost another grant owns, tagged "tally-reader"
 * (its mark: tags the management plugin does not know give no access)
 * and with exactly configure "^$", write "^$" (read-write: ".*"), read
 * ".*" there, so it may get and consume, and (read-write) publish, but
 * never declare or delete.  Every operation acts on that user alone:
 * create, add_credential, set_password and fix_privileges put it back
 * whole; check finds the vhost or the user gone (TL_DRIFT_MISSING), a
 * password that does not log in (_CREDENTIAL), other tags or
 * permissions (_PRIVILEGES); revoke and retire_credential delete it
 * (a user cannot be disabled short of that) and close its connections.
 * The owner's checks and repairs leave users tagged so alone: their
 * permissions on its vhost are the readers' grants', revoked with it.
 *
 * Errors: TL_EUNREACH when the API does not answer (refused, timed out)
 * or answers 503; TL_EUNTRUSTED when its certificate does not verify;
 * TL_EAUTH for 401 and 403 (the admin is refused, or lacks the
 * administrator tag) and for a TLS session the broker ended over the
 * admin's client certificate (refused, or asked for and not given);
 * TL_EINVAL for a grant the driver will not touch; TL_EDRIVER for any
 * other refusal, why holding the API's reason.
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

#include "core/amqp.h"
#include "core/error.h"
#include "core/secret.h"
#include "driver.h"
#include "rabbitmq.h"
#include "http.h"
#include "tlsclient.h"
#include "util.h"

#define RMQ_CONNECT_MS	3000
#define RMQ_TIMEOUT_MS	60000		/* a vhost takes a while to start */
#define RMQ_LOGIN_MS	5000
#define RMQ_NAME_MAX	255		/* the broker's short string */
#define RMQ_ALG		"rabbit_password_hashing_sha256"
#define RMQ_SALT	4
#define RMQ_HASH_MAX	64		/* base64 of 36 bytes is 48 */
#define RMQ_MARK	"made by tally for a grant; do not edit"
#define RMQ_MARK_FOR	"made by tally for grant "
#define RMQ_MARK_END	"; do not edit"
#define RMQ_MARK_MESH	" in mesh "
#define RMQ_MESH_MAX	64
#define RMQ_FENCE_PFX	"tally-fence-"
#define RMQ_TAG		"tally"
#define RMQ_READER	"tally-reader"	/* a user below ownership */
#define RMQ_NONE	"^$"
#define RMQ_ALL		".*"

struct tl_drv_rmq {
	CURL		*c;
	struct curl_slist *hdr;
	char		 base[320];	/* http[s]://HOST:PORT/api */
	char		 mhost[256];	/* the management API's host */
	char		 mport[8];
	enum tl_drv_tls	 tls;
	char		 err[TL_DRV_HTTP_ERR];	/* libcurl's detail */
	char		 user[128];	/* the admin */
	/* The admin's client certificate is presented (its subject). */
	int		 cert;
	char		 subject[256];
	char		*password;	/* guarded memory; rmq_close wipes */
	/*
	 * The client certificate and key libcurl reads in place (NULL:
	 * none): the key in guarded memory, wiped by rmq_close after the
	 * handle that reads it is gone.
	 */
	char		*ccert, *ckey;
	char		*buf;		/* the last response body */
	size_t		 len, cap;
	unsigned long	 requests;
	/* The mesh (tl_drv_admin.mesh; "" before ids) and the fence. */
	char		 mesh[RMQ_MESH_MAX + 1];
	int		 fenced;
	uint64_t	 epoch;
	char		 leader[TL_DRV_LEADER_MAX];
	char		 fence_path[160];	/* /global-parameters/NAME */
	int		 in_fence;	/* the fence's own requests: unchecked */
};

static int fence_check(struct tl_drv_rmq *r, const char *step, char *why);

/* The declaration: rabbitmq_decl.c. */
extern const struct tl_drv_decl tl_drv_rabbitmq_decl;

/* --- reasons -------------------------------------------------------- */

/* --- the HTTP session ------------------------------------------------ */

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
	struct tl_drv_rmq *r = arg;

	return tl_drv_http_body(&r->buf, &r->len, &r->cap, data, size * n,
	    0);
}

/* The API's reason in a refusal body, for why (never a secret). */
static void
reason(const struct tl_drv_rmq *r, char *out, size_t n)
{
	json_t *j;
	const char *s;

	out[0] = '\0';
	if (r->len == 0)
		return;
	if ((j = json_loadb(r->buf, r->len, 0, NULL)) != NULL) {
		if ((s = json_string_value(json_object_get(j, "reason"))) !=
		    NULL || (s = json_string_value(json_object_get(j,
		    "error"))) != NULL)
			snprintf(out, n, "%s", s);
		json_decref(j);
	}
	if (out[0] == '\0')
		snprintf(out, n, "%.120s", r->buf);
}

/*
 * One request: METHOD base+path with body (NULL: none; wiped after,
 * it may hold a hash).  *status gets the HTTP status; a status in ok (a
 * 0-terminated list) or 2xx is 0, anything else an error with why.
 */
static int
request(struct tl_drv_rmq *r, const char *method, const char *path,
    json_t *body, const long *ok, long *status, const char *step, char *why)
{
	char url[2048], rs[320];
	char *text = NULL;
	CURLcode cc;
	long st = 0;
	size_t i;
	int rc = 0;

	*status = 0;
	if (snprintf(url, sizeof(url), "%s%s", r->base, path) >=
	    (int)sizeof(url))
		return tl_drv_why(why, TL_EINVAL, "%s: the URL is too long",
		    step);
	/* Every change is preceded by a read of the fence: nothing cached. */
	if (r->fenced && !r->in_fence && strcmp(method, "GET") != 0 &&
	    (rc = fence_check(r, step, why)) != 0)
		return rc;
	r->len = 0;
	if (r->buf != NULL)
		r->buf[0] = '\0';
	curl_easy_setopt(r->c, CURLOPT_URL, url);
	curl_easy_setopt(r->c, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(r->c, CURLOPT_CUSTOMREQUEST, method);
	if (body != NULL) {
		if ((text = json_dumps(body, JSON_COMPACT)) == NULL)
			return tl_drv_why(why, ENOMEM, "%s: out of memory",
			    step);
		curl_easy_setopt(r->c, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(r->c, CURLOPT_POSTFIELDSIZE,
		    (long)strlen(text));
	}
	r->requests++;
	cc = curl_easy_perform(r->c);
	if (text != NULL) {
		tl_secret_wipe(text, strlen(text));
		free(text);
		curl_easy_setopt(r->c, CURLOPT_POSTFIELDS, NULL);
		curl_easy_setopt(r->c, CURLOPT_POSTFIELDSIZE, -1L);
	}
	if (cc != CURLE_OK) {
		rc = tl_drv_http_fail(cc, r->tls, r->err, rs, sizeof(rs));
		return tl_drv_why(why, rc, "%s: the management API at %s:%s %s: "
		    "%s%s", step, r->mhost, r->mport, rc == TL_EUNTRUSTED ?
		    "is not trusted (TLS)" : rc == TL_EAUTH ? "refused tallyd "
		    "(TLS)" : "did not answer", rs, rc == TL_EAUTH && !r->cert ?
		    "; give the admin one: tally assign ... --set "
		    "admin-cert=FILE --secret admin-key" : "");
	}
	curl_easy_getinfo(r->c, CURLINFO_RESPONSE_CODE, &st);
	*status = st;
	if (st >= 200 && st < 300)
		return 0;
	for (i = 0; ok != NULL && ok[i] != 0; i++)
		if (ok[i] == st)
			return 0;
	reason(r, rs, sizeof(rs));
	if (st == 401 || st == 403)
		rc = TL_EAUTH;
	else if (st == 503 || st == 502 || st == 504)
		rc = TL_EUNREACH;
	else
		rc = TL_EDRIVER;
	return tl_drv_why(why, rc, "%s: HTTP %ld from the management API%s%s%s",
	    step, st, rs[0] ? " (" : "", rs, rs[0] ? ")" : "");
}

static const long ok404[] = { 404, 0 };

/* GET path as JSON into *out (NULL on 404 when ok404). */
static int
get_json(struct tl_drv_rmq *r, const char *path, int allow404, json_t **out,
    const char *step, char *why)
{
	json_error_t e;
	long st;
	int rc;

	*out = NULL;
	if ((rc = request(r, "GET", path, NULL, allow404 ? ok404 : NULL, &st,
	    step, why)) != 0)
		return rc;
	if (st == 404)
		return 0;
	if ((*out = json_loadb(r->buf != NULL ? r->buf : "", r->len, 0,
	    &e)) == NULL)
		return tl_drv_why(why, TL_EDRIVER, "%s: the management API "
		    "sent what is not JSON (%s)", step, e.text);
	return 0;
}

/* "/" a "/" b ...: each part escaped; 0 or TL_ETOOBIG / ENOMEM. */
static int
path_of(struct tl_drv_rmq *r, char *out, size_t cap, const char *head,
    const char *a, const char *b)
{
	char *ea = NULL, *eb = NULL;
	int n, rc = 0;

	if ((a != NULL && (ea = curl_easy_escape(r->c, a, 0)) == NULL) ||
	    (b != NULL && (eb = curl_easy_escape(r->c, b, 0)) == NULL)) {
		rc = ENOMEM;
		goto out;
	}
	n = snprintf(out, cap, "%s%s%s%s%s", head, ea ? "/" : "",
	    ea ? ea : "", eb ? "/" : "", eb ? eb : "");
	if (n < 0 || (size_t)n >= cap)
		rc = TL_ETOOBIG;
out:
	curl_free(ea);
	curl_free(eb);
	return rc;
}

/* --- the password hash ---------------------------------------------- */

static int
hash_with(const unsigned char salt[RMQ_SALT], const char *password,
    char *out, size_t cap)
{
	unsigned char raw[RMQ_SALT + crypto_hash_sha256_BYTES];
	crypto_hash_sha256_state st;

	if (cap < sodium_base64_ENCODED_LEN(sizeof(raw),
	    sodium_base64_VARIANT_ORIGINAL))
		return TL_ETOOBIG;
	memcpy(raw, salt, RMQ_SALT);
	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, salt, RMQ_SALT);
	crypto_hash_sha256_update(&st, (const unsigned char *)password,
	    strlen(password));
	crypto_hash_sha256_final(&st, raw + RMQ_SALT);
	sodium_bin2base64(out, cap, raw, sizeof(raw),
	    sodium_base64_VARIANT_ORIGINAL);
	sodium_memzero(raw, sizeof(raw));
	sodium_memzero(&st, sizeof(st));
	return 0;
}

int
tl_drv_rmq_hash(const char *password, char *out, size_t cap)
{
	unsigned char salt[RMQ_SALT];

	if (sodium_init() < 0)
		return TL_EDRIVER;
	randombytes_buf(salt, sizeof(salt));
	return hash_with(salt, password, out, cap);
}

/* Does the stored hash (algorithm alg) verify password? */
static int
hash_matches(const char *alg, const char *stored, const char *password)
{
	unsigned char raw[RMQ_SALT + crypto_hash_sha256_BYTES + 8];
	char mine[RMQ_HASH_MAX];
	size_t n = 0;
	int same;

	if (alg == NULL || stored == NULL || password == NULL ||
	    strcmp(alg, RMQ_ALG) != 0 ||
	    sodium_base642bin(raw, sizeof(raw), stored, strlen(stored), NULL,
	    &n, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    n != RMQ_SALT + crypto_hash_sha256_BYTES)
		return 0;
	if (hash_with(raw, password, mine, sizeof(mine)) != 0)
		return 0;
	same = strlen(mine) == strlen(stored) &&
	    sodium_memcmp(mine, stored, strlen(mine)) == 0;
	sodium_memzero(mine, sizeof(mine));
	sodium_memzero(raw, sizeof(raw));
	return same;
}

/* --- names and marks ------------------------------------------------- */

/* The mark this session gives g's vhost (the mesh in it, if any). */
static void
mark_text(const struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    char *buf, size_t n)
{
	if (!tl_drv_grant_named(g))
		snprintf(buf, n, "%s", RMQ_MARK);
	else if (r->mesh[0] != '\0')
		snprintf(buf, n, RMQ_MARK_FOR "%s" RMQ_MARK_MESH "%s"
		    RMQ_MARK_END, g->grant, r->mesh);
	else
		snprintf(buf, n, RMQ_MARK_FOR "%s" RMQ_MARK_END, g->grant);
}

/*
 * MARK_MESH: a mark of tally's naming another mesh than the session's
 * (and than g->adopt_mesh).  A mark without a mesh (made before marks
 * named one) is judged by its grant alone.
 */
enum rmq_mark { MARK_OURS, MARK_OTHER, MARK_FOREIGN, MARK_MESH };

/* The mesh a description names (mesh, "" none), and its length without. */
static size_t
mark_mesh(const char *d, char *mesh, size_t mcap)
{
	size_t dl = strlen(d), el = strlen(RMQ_MARK_END);
	size_t ml = strlen(RMQ_MARK_MESH);
	const char *p, *last = NULL;

	mesh[0] = '\0';
	if (dl < el || strcmp(d + dl - el, RMQ_MARK_END) != 0)
		return dl;
	for (p = d; (p = strstr(p, RMQ_MARK_MESH)) != NULL; p++)
		last = p;
	if (last == NULL || (size_t)(d + dl - el - (last + ml)) >= mcap ||
	    last + ml == d + dl - el ||
	    strspn(last + ml, "0123456789abcdef") !=
	    (size_t)(d + dl - el - (last + ml)))
		return dl;
	snprintf(mesh, mcap, "%.*s", (int)(d + dl - el - (last + ml)),
	    last + ml);
	return (size_t)(last - d) + el;
}

/*
 * Whose vhost vh is, by its description; other: the grant it names (or,
 * for MARK_MESH, the mesh); *exact: the description is the one this
 * session would write (nothing to mark again).
 */
static enum rmq_mark
vhost_mark(const struct tl_drv_rmq *r, const json_t *vh,
    const struct tl_drv_grant *g, char *other, size_t on, int *exact)
{
	char mine[TL_WHY_MAX], base[TL_WHY_MAX];
	char mesh[RMQ_MESH_MAX + 1];
	const char *d = json_string_value(json_object_get(vh, "description"));
	const char *am = g->adopt_mesh != NULL ? g->adopt_mesh : "";
	size_t fl = strlen(RMQ_MARK_FOR), el = strlen(RMQ_MARK_END), dl;
	enum rmq_mark k;

	other[0] = '\0';
	*exact = 0;
	if (d == NULL)
		return MARK_FOREIGN;
	mark_text(r, g, mine, sizeof(mine));
	*exact = strcmp(d, mine) == 0;
	/* The mark without its mesh, judged as marks were before meshes. */
	dl = mark_mesh(d, mesh, sizeof(mesh));
	if (mesh[0] != '\0' && dl >= el && dl < sizeof(base))
		snprintf(base, sizeof(base), "%.*s" RMQ_MARK_END,
		    (int)(dl - el), d);
	else
		snprintf(base, sizeof(base), "%s", d);
	dl = strlen(base);
	if (tl_drv_grant_named(g) &&
	    strncmp(base, RMQ_MARK_FOR, fl) == 0 && dl == fl +
	    strlen(g->grant) + el && strncmp(base + fl, g->grant,
	    strlen(g->grant)) == 0 && strcmp(base + dl - el,
	    RMQ_MARK_END) == 0)
		k = MARK_OURS;
	else if (strcmp(base, RMQ_MARK) == 0)
		k = !tl_drv_grant_named(g) || g->adopt_unnamed ? MARK_OURS :
		    MARK_OTHER;
	else if (dl > fl + el && strncmp(base, RMQ_MARK_FOR, fl) == 0 &&
	    strcmp(base + dl - el, RMQ_MARK_END) == 0) {
		snprintf(other, on, "%.*s", (int)(dl - fl - el), base + fl);
		k = MARK_OTHER;
	} else
		return MARK_FOREIGN;
	if (mesh[0] != '\0' && strcmp(mesh, r->mesh) != 0 &&
	    (am[0] == '\0' || strcmp(mesh, am) != 0)) {
		snprintf(other, on, "%s", mesh);
		return MARK_MESH;
	}
	return k;
}

static int
refuse_vhost(enum rmq_mark k, const char *other, const char *vhost,
    const struct tl_drv_grant *g, char *why)
{
	if (k == MARK_MESH)
		return tl_drv_why(why, TL_EREFUSED, "vhost \"%s\" is owned by "
		    "mesh %.12s..., not this one (tally adopt --from-mesh "
		    "takes it over); refused", vhost, other);
	if (k == MARK_OTHER && other[0] != '\0')
		return tl_drv_why(why, TL_EDRIVER, "vhost \"%s\" exists and "
		    "was made by tally for grant %s: tally never hands one "
		    "grant's object to another", vhost, other);
	if (k == MARK_OTHER)
		return tl_drv_why(why, TL_EDRIVER, "vhost \"%s\" exists and "
		    "was made by an earlier tally for another grant (its mark "
		    "names none; grant %s's objects were never made so)", vhost,
		    tl_drv_grant_named(g) ? g->grant : "");
	return tl_drv_why(why, TL_EDRIVER, "vhost \"%s\" exists and was not "
	    "made by tally: tally never takes over a vhost it did not make; "
	    "choose another resource name (name: in the manifest)", vhost);
}

/* A name the broker takes and tally may touch. */
static int
name_ok(const char *what, const char *name, char *why)
{
	size_t i, n;

	if (name == NULL || *name == '\0')
		return tl_drv_why(why, TL_EINVAL, "no %s name", what);
	n = strlen(name);
	if (n > RMQ_NAME_MAX)
		return tl_drv_why(why, TL_EINVAL, "%s name longer than %d "
		    "bytes", what, RMQ_NAME_MAX);
	for (i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return tl_drv_why(why, TL_EINVAL, "%s name with a "
			    "control character", what);
	return 0;
}

static int
grant_ok(const struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    int need_pw, char *why)
{
	int rc;

	if (r == NULL)
		return tl_drv_why(why, TL_EINVAL, "driver not open");
	if ((rc = name_ok("vhost", g->resource, why)) != 0 ||
	    (rc = name_ok("user", g->login, why)) != 0)
		return rc;
	if (strcmp(g->resource, "/") == 0)
		return tl_drv_why(why, TL_EINVAL, "vhost \"/\" is the broker's "
		    "default: never a grant's");
	if (strcmp(g->login, r->user) == 0)
		return tl_drv_why(why, TL_EINVAL, "user \"%s\" is tally's "
		    "admin: never a grant's", g->login);
	/* A login by certificate has none (decl.h, cert_login). */
	if (need_pw && !g->cert_login && (g->password == NULL ||
	    *g->password == '\0'))
		return tl_drv_why(why, TL_EINVAL, "no password for user \"%s\"",
		    g->login);
	return 0;
}

/* --- open / close ----------------------------------------------------- */

static void rmq_close(void *h);

static int
rmq_open(const struct tl_drv_admin *a, void **hp, char *why)
{
	struct tl_drv_rmq *r;
	const char *host, *mport, *pw;
	json_t *ov = NULL;
	int rc, have;

	*hp = NULL;
	if (a == NULL)
		return tl_drv_why(why, TL_EINVAL, "no admin settings");
	/* A certificate that cannot be presented: refused before a request. */
	if ((rc = tl_drv_client_cert_check(a->client_cert, a->client_key,
	    &have, why)) != 0)
		return rc;
	if (tl_drv_http_init() != 0 || sodium_init() < 0)
		return tl_drv_why(why, TL_EDRIVER, "libcurl or libsodium did "
		    "not initialise");
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	host = tl_drv_setting_get(a->settings, "host");
	if (host == NULL || *host == '\0')
		host = a->host != NULL && *a->host != '\0' ? a->host :
		    "127.0.0.1";
	mport = tl_drv_setting_get(a->settings, "management-port");
	if (mport == NULL || *mport == '\0')
		mport = "15672";
	snprintf(r->mhost, sizeof(r->mhost), "%s", host);
	snprintf(r->mport, sizeof(r->mport), "%s", mport);
	snprintf(r->user, sizeof(r->user), "%s", a->user != NULL &&
	    *a->user != '\0' ? a->user : "guest");
	if ((a->mesh != NULL && strlen(a->mesh) > RMQ_MESH_MAX) ||
	    (a->fence != NULL && a->fence->mesh != NULL &&
	    strlen(a->fence->mesh) > RMQ_MESH_MAX)) {
		rc = tl_drv_why(why, TL_EINVAL, "a mesh id longer than %d "
		    "bytes", RMQ_MESH_MAX);
		goto fail;
	}
	snprintf(r->mesh, sizeof(r->mesh), "%s", a->mesh != NULL ? a->mesh :
	    "");
	if (a->fence != NULL) {
		r->fenced = 1;
		r->epoch = a->fence->epoch;
		snprintf(r->leader, sizeof(r->leader), "%s",
		    a->fence->leader != NULL ? a->fence->leader : "");
		snprintf(r->fence_path, sizeof(r->fence_path),
		    "/global-parameters/" RMQ_FENCE_PFX "%s",
		    a->fence->mesh != NULL ? a->fence->mesh : r->mesh);
	}
	pw = a->password != NULL ? a->password : "";
	if ((r->password = tl_drv_secret_dup(pw)) == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto fail;
	}
	r->tls = tl_drv_tls_mode(a->settings, host);
	if (have && r->tls == TL_DRV_TLS_OFF) {
		rc = tl_drv_why(why, TL_EINVAL, "admin-cert needs tls verify "
		    "or require (a certificate is presented in a TLS "
		    "handshake; tls is off)");
		goto fail;
	}
	/* An IPv6 literal goes in brackets. */
	snprintf(r->base, sizeof(r->base), strchr(host, ':') != NULL ?
	    "%s://[%s]:%s/api" : "%s://%s:%s/api", r->tls == TL_DRV_TLS_OFF ?
	    "http" : "https", host, mport);
	if ((r->c = curl_easy_init()) == NULL ||
	    (r->hdr = curl_slist_append(NULL,
	    "content-type: application/json")) == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto fail;
	}
	curl_easy_setopt(r->c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->c, CURLOPT_CONNECTTIMEOUT_MS, (long)RMQ_CONNECT_MS);
	curl_easy_setopt(r->c, CURLOPT_TIMEOUT_MS, (long)RMQ_TIMEOUT_MS);
	curl_easy_setopt(r->c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
	curl_easy_setopt(r->c, CURLOPT_USERNAME, r->user);
	curl_easy_setopt(r->c, CURLOPT_PASSWORD, r->password);
	curl_easy_setopt(r->c, CURLOPT_HTTPHEADER, r->hdr);
	curl_easy_setopt(r->c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(r->c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(r->c, CURLOPT_TCP_KEEPALIVE, 1L);
	if ((rc = tl_drv_http_tls(r->c, r->tls, a->ca_file, 0, r->err,
	    why)) != 0)
		goto fail;
	/* Every request of the session presents it. */
	if (have) {
		if ((r->ccert = tl_drv_secret_dup(a->client_cert)) == NULL ||
		    (r->ckey = tl_drv_secret_dup(a->client_key)) == NULL) {
			rc = tl_drv_why(why, ENOMEM, "out of memory");
			goto fail;
		}
		if ((rc = tl_drv_http_client_cert(r->c, r->ccert, r->ckey,
		    why)) != 0)
			goto fail;
		r->cert = 1;
		(void)tl_drv_client_cert_subject(a->client_cert, r->subject,
		    sizeof(r->subject));
	}
	/* Proves the admin (a 401 now, not at the first grant). */
	if ((rc = get_json(r, "/whoami", 0, &ov, "open", why)) != 0)
		goto fail;
	json_decref(ov);
	/* The certificate's subject is public; nothing of the key is said. */
	tl_drv_why(why, 0, "connected to the RabbitMQ management API at %s:%s "
	    "as \"%s\" (%s%s%s)", r->mhost, r->mport, r->user,
	    r->tls == TL_DRV_TLS_VERIFY ? "TLS, verified" :
	    r->tls == TL_DRV_TLS_REQUIRE ? "TLS, not verified" : "plaintext",
	    r->cert ? ", client certificate " : "", r->cert ? r->subject : "");
	*hp = r;
	return 0;
fail:
	rmq_close(r);
	return rc;
}

static void
rmq_close(void *h)
{
	struct tl_drv_rmq *r = h;

	if (r == NULL)
		return;
	if (r->c != NULL)
		curl_easy_cleanup(r->c);
	curl_slist_free_all(r->hdr);
	tl_secret_free(r->ccert);
	tl_secret_free(r->ckey);
	tl_secret_free(r->password);
	tl_secret_free(r->buf);
	free(r);
}

unsigned long
tl_drv_rmq_requests(const void *h)
{
	return h != NULL ? ((const struct tl_drv_rmq *)h)->requests : 0;
}

/* --- the fence -------------------------------------------------------- */

/*
 * What the broker holds at path (a global parameter, value {epoch,
 * leader}; none: epoch 0).  The epoch is a decimal string, so no JSON
 * number bounds it.
 */
static int
fence_read(struct tl_drv_rmq *r, const char *path,
    struct tl_drv_fence_held *held, char *why)
{
	json_t *j = NULL, *v, *e;
	const char *l;
	int rc;

	held->epoch = 0;
	held->leader[0] = '\0';
	r->in_fence = 1;
	rc = get_json(r, path, 1, &j, "read the fence", why);
	r->in_fence = 0;
	if (rc != 0 || j == NULL)
		return rc;
	v = json_object_get(j, "value");
	e = json_object_get(v, "epoch");
	if (json_is_string(e))
		held->epoch = strtoull(json_string_value(e), NULL, 10);
	else if (json_is_integer(e) && json_integer_value(e) > 0)
		held->epoch = (uint64_t)json_integer_value(e);
	if ((l = json_string_value(json_object_get(v, "leader"))) != NULL)
		snprintf(held->leader, sizeof(held->leader), "%s", l);
	json_decref(j);
	return 0;
}

/* Before a changing request: the fence held must be this session's. */
static int
fence_check(struct tl_drv_rmq *r, const char *step, char *why)
{
	struct tl_drv_fence want = { r->mesh, r->epoch, r->leader };
	struct tl_drv_fence_held held;
	int rc;

	if ((rc = fence_read(r, r->fence_path, &held, why)) != 0)
		return rc;
	if (tl_drv_fence_ours(&want, &held))
		return 0;
	return tl_drv_why(why, TL_EREFUSED, "deposed: the broker's fence %s "
	    "holds epoch %llu (leader %.12s), this session acts for epoch "
	    "%llu (leader %.12s); not sent: %s", r->fence_path +
	    strlen("/global-parameters/"), (unsigned long long)held.epoch,
	    held.leader, (unsigned long long)r->epoch, r->leader, step);
}

/*
 * The management API has no compare-and-set: read, compare (strictly
 * greater), write, read back.  Two candidates that both read the old
 * epoch both write; the one whose leader the read back shows holds the
 * fence, the other is told what is held and stands down (and a leader
 * overwritten a moment later meets the winner's fence at its next
 * changing request).
 */
static int
rmq_fence(void *h, const struct tl_drv_fence *want,
    struct tl_drv_fence_held *held, char *why)
{
	struct tl_drv_rmq *r = h;
	const char *mesh = want->mesh != NULL ? want->mesh : "";
	char path[160], name[100], e[24];
	json_t *b;
	long st;
	int rc;

	if (strlen(mesh) > RMQ_MESH_MAX)
		return tl_drv_why(why, TL_EINVAL, "a mesh id longer than %d "
		    "bytes", RMQ_MESH_MAX);
	snprintf(name, sizeof(name), RMQ_FENCE_PFX "%s", mesh);
	snprintf(path, sizeof(path), "/global-parameters/%s", name);
	if ((rc = fence_read(r, path, held, why)) != 0)
		return rc;
	if (want->epoch == 0 || want->epoch <= held->epoch)
		return 0;
	snprintf(e, sizeof(e), "%llu", (unsigned long long)want->epoch);
	if ((b = json_pack("{s:s, s:{s:s, s:s}}", "name", name, "value",
	    "epoch", e, "leader", want->leader != NULL ? want->leader :
	    "")) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	r->in_fence = 1;
	rc = request(r, "PUT", path, b, NULL, &st, "raise the fence", why);
	r->in_fence = 0;
	json_decref(b);
	if (rc != 0)
		return rc;
	return fence_read(r, path, held, why);
}

/* --- objects ---------------------------------------------------------- */

/* GET /api/vhosts/V: *vh NULL when there is none. */
static int
get_vhost(struct tl_drv_rmq *r, const char *vhost, json_t **vh, char *why)
{
	char p[1024];
	int rc;

	if ((rc = path_of(r, p, sizeof(p), "/vhosts", vhost, NULL)) != 0)
		return tl_drv_why(why, rc, "vhost name too long");
	return get_json(r, p, 1, vh, "read the vhost", why);
}

/*
 * The first node where vh is not running ("stopped": its record was
 * written, its processes never started, as when the PUT that made it
 * was cut short by a crash), or NULL.
 */
static const char *
vhost_down(const json_t *vh, const char **state)
{
	const char *node;
	json_t *st;

	json_object_foreach((json_t *)json_object_get(vh, "cluster_state"),
	    node, st)
		if (json_is_string(st) && strcmp(json_string_value(st),
		    "running") != 0) {
			if (state != NULL)
				*state = json_string_value(st);
			return node;
		}
	return NULL;
}

/* Starts vh on every node where it is not running (*n: how many). */
static int
vhost_start(struct tl_drv_rmq *r, const json_t *vh, const char *vhost,
    unsigned *n, char *why)
{
	const char *node;
	char p[1200];
	json_t *st;
	long code;
	int rc;

	*n = 0;
	json_object_foreach((json_t *)json_object_get(vh, "cluster_state"),
	    node, st) {
		if (!json_is_string(st) || strcmp(json_string_value(st),
		    "running") == 0)
			continue;
		if ((rc = path_of(r, p, sizeof(p) - 8, "/vhosts", vhost,
		    "start")) != 0)
			return tl_drv_why(why, rc, "vhost name too long");
		{
			char *en = curl_easy_escape(r->c, node, 0);

			if (en == NULL)
				return tl_drv_why(why, ENOMEM, "out of memory");
			if (strlen(p) + strlen(en) + 2 > sizeof(p)) {
				curl_free(en);
				return tl_drv_why(why, TL_ETOOBIG, "node name "
				    "too long");
			}
			strcat(p, "/");
			strcat(p, en);
			curl_free(en);
		}
		if ((rc = request(r, "POST", p, NULL, NULL, &code,
		    "start the vhost", why)) != 0)
			return rc;
		(*n)++;
	}
	return 0;
}

/*
 * GET /api/users/U and its permissions (*perms NULL when no user; perms
 * NULL: the user alone).
 */
static int
get_user(struct tl_drv_rmq *r, const char *user, json_t **u, json_t **perms,
    char *why)
{
	char p[1024];
	int rc;

	if (perms != NULL)
		*perms = NULL;
	if ((rc = path_of(r, p, sizeof(p), "/users", user, NULL)) != 0)
		return tl_drv_why(why, rc, "user name too long");
	if ((rc = get_json(r, p, 1, u, "read the user", why)) != 0 ||
	    *u == NULL || perms == NULL)
		return rc;
	if (strlen(p) + sizeof("/permissions") > sizeof(p))
		return tl_drv_why(why, TL_ETOOBIG, "user name too long");
	strcat(p, "/permissions");
	if ((rc = get_json(r, p, 1, perms, "read the user's permissions",
	    why)) != 0) {
		json_decref(*u);
		*u = NULL;
	}
	return rc;
}

static int
tags_empty(const json_t *u)
{
	const json_t *t = json_object_get(u, "tags");

	if (json_is_array(t))
		return json_array_size(t) == 0;
	return t == NULL || (json_is_string(t) &&
	    *json_string_value(t) == '\0');
}

/* Does u carry tag (the API lists tags, or joins them with commas)? */
static int
has_tag(const json_t *u, const char *tag)
{
	const json_t *t = json_object_get(u, "tags");
	const char *s, *e;
	size_t i, n = strlen(tag);

	if (json_is_array(t)) {
		for (i = 0; i < json_array_size(t); i++)
			if ((s = json_string_value(json_array_get(t, i))) !=
			    NULL && strcmp(s, tag) == 0)
				return 1;
		return 0;
	}
	for (s = json_string_value(t); s != NULL && *s != '\0'; s = e) {
		if ((e = strchr(s, ',')) == NULL)
			e = s + strlen(s);
		if ((size_t)(e - s) == n && strncmp(s, tag, n) == 0)
			return 1;
		if (*e == ',')
			e++;
	}
	return 0;
}

/* Is u a user tally adopt took over: its one tag tally's (see the top)? */
static int
adopted_user(const json_t *u)
{
	const json_t *t = json_object_get(u, "tags");

	if (!has_tag(u, RMQ_TAG))
		return 0;
	return json_is_array(t) ? json_array_size(t) == 1 :
	    strcmp(json_string_value(t), RMQ_TAG) == 0;
}

/* Is u a login below ownership of some grant (its one tag RMQ_READER)? */
static int
reader_user(const json_t *u)
{
	const json_t *t = json_object_get(u, "tags");

	if (!has_tag(u, RMQ_READER))
		return 0;
	return json_is_array(t) ? json_array_size(t) == 1 :
	    strcmp(json_string_value(t), RMQ_READER) == 0;
}

/*
 * Whether user u (with perms, its permission rows) is g's to act on (see
 * the top); why says why not.
 */
static int
user_ours(const json_t *u, const json_t *perms, const char *vhost,
    const char *user, char *why)
{
	size_t i, n = json_array_size(perms);
	const char *v;

	for (i = 0; i < n; i++) {
		v = json_string_value(json_object_get(json_array_get(perms, i),
		    "vhost"));
		if (v != NULL && strcmp(v, vhost) == 0)
			return 1;
	}
	if (n == 0 && (tags_empty(u) || adopted_user(u) || reader_user(u)))
		return 1;
	tl_drv_why(why, 0, "user \"%s\" exists and is not tally's (it has %s "
	    "and no permissions on vhost \"%s\"): tally never takes over a "
	    "user it did not make", user, n > 0 ? "permissions elsewhere" :
	    "tags", vhost);
	return 0;
}

/* PUT /api/users/U with hash (of alg) and tags ("" none). */
static int
put_user_hash(struct tl_drv_rmq *r, const char *user, const char *hash,
    const char *alg, const char *tags, char *why)
{
	char p[1024];
	json_t *b;
	long st;
	int rc;

	if ((rc = path_of(r, p, sizeof(p), "/users", user, NULL)) != 0)
		return tl_drv_why(why, rc, "user name too long");
	if ((b = json_pack("{s:s, s:s, s:s}", "password_hash", hash,
	    "hashing_algorithm", alg, "tags", tags)) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	rc = request(r, "PUT", p, b, NULL, &st, "set the user", why);
	json_decref(b);
	return rc;
}

static int
put_user(struct tl_drv_rmq *r, const struct tl_drv_grant *g, char *why)
{
	char hash[RMQ_HASH_MAX];
	int rc;

	/*
	 * A login by certificate: an empty hash, so no password logs in
	 * (the EXTERNAL mechanism takes the certificate's CN).
	 */
	if (g->cert_login)
		return put_user_hash(r, g->login, "", RMQ_ALG, g->access ?
		    RMQ_READER : "", why);
	if (tl_drv_rmq_hash(g->password, hash, sizeof(hash)) != 0)
		return tl_drv_why(why, TL_EDRIVER, "cannot hash the password");
	rc = put_user_hash(r, g->login, hash, RMQ_ALG, g->access ? RMQ_READER :
	    "", why);
	sodium_memzero(hash, sizeof(hash));
	return rc;
}

/* The permissions g's login has on its vhost (see the top). */
static void
perms_of(const struct tl_drv_grant *g, const char **c, const char **w,
    const char **rd)
{
	*c = g->access ? RMQ_NONE : RMQ_ALL;
	*w = g->access == TL_DRV_ACCESS_READ ? RMQ_NONE : RMQ_ALL;
	*rd = RMQ_ALL;
}

static int
put_perms(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    const char *user, char *why)
{
	const char *vhost = g->resource, *pc, *pw, *pr;
	char p[1024];
	json_t *b;
	long st;
	int rc;

	if ((rc = path_of(r, p, sizeof(p), "/permissions", vhost, user)) != 0)
		return tl_drv_why(why, rc, "names too long");
	perms_of(g, &pc, &pw, &pr);
	if ((b = json_pack("{s:s, s:s, s:s}", "configure", pc, "write", pw,
	    "read", pr)) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	rc = request(r, "PUT", p, b, NULL, &st, "set the permissions", why);
	json_decref(b);
	return rc;
}

static int
del(struct tl_drv_rmq *r, const char *head, const char *a, const char *b,
    const char *step, char *why)
{
	char p[1024];
	long st;
	int rc;

	if ((rc = path_of(r, p, sizeof(p), head, a, b)) != 0)
		return tl_drv_why(why, rc, "%s: names too long", step);
	return request(r, "DELETE", p, NULL, ok404, &st, step, why);
}

/* Closes every connection of user (n: how many were). */
static int
close_connections(struct tl_drv_rmq *r, const char *user, unsigned *n,
    char *why)
{
	json_t *cs = NULL, *c;
	const char *u, *name;
	size_t i;
	int rc;

	*n = 0;
	if ((rc = get_json(r, "/connections?columns=name,user", 0, &cs,
	    "list the connections", why)) != 0)
		return rc;
	json_array_foreach(cs, i, c) {
		u = json_string_value(json_object_get(c, "user"));
		name = json_string_value(json_object_get(c, "name"));
		if (u == NULL || name == NULL || strcmp(u, user) != 0)
			continue;
		if ((rc = del(r, "/connections", name, NULL,
		    "close a connection", why)) != 0)
			break;
		(*n)++;
	}
	json_decref(cs);
	return rc;
}

/*
 * PUT /api/vhosts/V with this session's mark for g: makes the vhost, or
 * sets the description and tags of one that exists (what it holds
 * stays).
 */
static int
mark_vhost(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    const char *step, char *why)
{
	char mark[TL_WHY_MAX], p[1024];
	json_t *b;
	long st;
	int rc;

	mark_text(r, g, mark, sizeof(mark));
	if ((rc = path_of(r, p, sizeof(p), "/vhosts", g->resource, NULL)) != 0)
		return tl_drv_why(why, rc, "vhost name too long");
	if ((b = json_pack("{s:s, s:s}", "description", mark, "tags",
	    RMQ_TAG)) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	rc = request(r, "PUT", p, b, NULL, &st, step, why);
	json_decref(b);
	return rc;
}

/*
 * The vhost must exist and be g's: 0, TL_ENOTFOUND (gone: why says so)
 * or the refusal.  create makes it instead when it is gone.
 */
static int
vet_vhost(struct tl_drv_rmq *r, const struct tl_drv_grant *g, int make,
    int *made, char *why)
{
	char other[256];
	enum rmq_mark k;
	json_t *vh = NULL;
	int rc;

	*made = 0;
	if ((rc = get_vhost(r, g->resource, &vh, why)) != 0)
		return rc;
	if (vh != NULL) {
		unsigned started = 0;
		int exact;

		k = vhost_mark(r, vh, g, other, sizeof(other), &exact);
		/* A vhost made but never started is started, not remade. */
		rc = k == MARK_OURS ? vhost_start(r, vh, g->resource, &started,
		    why) : 0;
		json_decref(vh);
		if (k != MARK_OURS)
			return refuse_vhost(k, other, g->resource, g, why);
		if (rc != 0 || exact)
			return rc;
		/*
		 * An unnamed mark adopted, one without a mesh, or another
		 * mesh's taken over (adopt_mesh): this session's from now on.
		 */
	} else if (!make)
		return tl_drv_why(why, TL_ENOTFOUND, "vhost \"%s\" is gone; "
		    "not recreated empty (its messages are lost: tally purge, "
		    "then a new grant)", g->resource);
	rc = mark_vhost(r, g, "create the vhost", why);
	*made = vh == NULL && rc == 0;
	return rc;
}

/* The user is absent or g's: 0 and *exists; else the refusal. */
static int
vet_user(struct tl_drv_rmq *r, const struct tl_drv_grant *g, int *exists,
    char *why)
{
	json_t *u = NULL, *perms = NULL;
	int rc;

	*exists = 0;
	if ((rc = get_user(r, g->login, &u, &perms, why)) != 0)
		return rc;
	if (u != NULL) {
		*exists = 1;
		if (!user_ours(u, perms, g->resource, g->login, why))
			rc = TL_EDRIVER;
	}
	json_decref(u);
	json_decref(perms);
	return rc;
}

/* The user with the grant's hash and permissions (vhost vetted). */
static int
ensure_login(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    int *existed, char *why)
{
	int rc;

	if ((rc = vet_user(r, g, existed, why)) != 0 ||
	    (rc = put_user(r, g, why)) != 0 ||
	    (rc = put_perms(r, g, g->login, why)) != 0)
		return rc;
	return 0;
}

static int grant_login(const struct tl_drv_grant *g, const char *user);

/*
 * Whether user g->login (u, with perms, its permission rows) may be
 * adopted: 0, or the refusal (see the top).  Its mark is the vhost it
 * has permissions on, and so is an operator's access it would lose.
 */
static int
adoptable_user(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    const json_t *u, const json_t *perms, char *why)
{
	char other[256];
	enum rmq_mark k;
	const json_t *row;
	json_t *vh;
	const char *v;
	size_t i;
	int rc, exact;

	if (has_tag(u, "administrator"))
		return tl_drv_why(why, TL_EDRIVER, "user \"%s\" is an "
		    "administrator: tally adopt takes over a user without "
		    "management access only", g->login);
	for (i = 0; i < json_array_size(perms); i++) {
		row = json_array_get(perms, i);
		v = json_string_value(json_object_get(row, "vhost"));
		if (v == NULL || strcmp(v, g->resource) == 0)
			continue;
		if ((rc = get_vhost(r, v, &vh, why)) != 0)
			return rc;
		k = vh != NULL ? vhost_mark(r, vh, g, other, sizeof(other),
		    &exact) : MARK_FOREIGN;
		json_decref(vh);
		if (k == MARK_MESH)
			return tl_drv_why(why, TL_EREFUSED, "user \"%s\" has "
			    "permissions on vhost \"%s\", owned by mesh "
			    "%.12s..., not this one; refused", g->login, v,
			    other);
		if (k == MARK_OTHER)
			return tl_drv_why(why, TL_EDRIVER, "user \"%s\" was "
			    "made by tally for %s%s (it has permissions on its "
			    "vhost \"%s\"): tally adopt takes over only what "
			    "tally did not make", g->login, other[0] != '\0' ?
			    "grant " : "another grant", other, v);
		return tl_drv_why(why, TL_EDRIVER, "user \"%s\" also has "
		    "permissions on vhost \"%s\": the rotation that follows "
		    "the adoption deletes the user, which would cut them off; "
		    "remove them first", g->login, v);
	}
	return 0;
}

/*
 * tally adopt (g->adopting): the vhost g->resource and the user g->login
 * become g's (see the top); what the vhost holds and the user's password
 * stay.  Every step is looked up first, so a resumed call goes on.
 */
static int
adopt_takeover(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    char *why)
{
	json_t *vh = NULL, *u = NULL, *up = NULL, *vp = NULL;
	char other[256], p[1024], cut[160] = "";
	const char *hash, *alg, *pu;
	unsigned started = 0, ncut = 0;
	enum rmq_mark k;
	size_t i, off = 0;
	int rc, exact, tagged = 0;

	if ((rc = get_vhost(r, g->resource, &vh, why)) != 0)
		return rc;
	if (vh == NULL)
		return tl_drv_why(why, TL_EDRIVER, "virtual host \"%s\" does "
		    "not exist on this server: nothing to adopt", g->resource);
	if ((k = vhost_mark(r, vh, g, other, sizeof(other), &exact)) ==
	    MARK_OTHER || k == MARK_MESH) {
		rc = refuse_vhost(k, other, g->resource, g, why);
		goto out;
	}
	if ((rc = get_user(r, g->login, &u, &up, why)) != 0)
		goto out;
	if (u == NULL) {
		rc = tl_drv_why(why, TL_EDRIVER, "user \"%s\" does not exist "
		    "on this server: nothing to adopt", g->login);
		goto out;
	}
	if ((rc = adoptable_user(r, g, u, up, why)) != 0 ||
	    (!exact && (rc = mark_vhost(r, g, "mark the vhost", why)) != 0) ||
	    (rc = vhost_start(r, vh, g->resource, &started, why)) != 0)
		goto out;
	/* Its own hash sent back: a PUT without one clears the password. */
	if (!adopted_user(u)) {
		hash = json_string_value(json_object_get(u, "password_hash"));
		alg = json_string_value(json_object_get(u,
		    "hashing_algorithm"));
		if (hash == NULL || alg == NULL) {
			rc = tl_drv_why(why, TL_EDRIVER, "user \"%s\": the "
			    "management API shows no password hash to keep",
			    g->login);
			goto out;
		}
		if ((rc = put_user_hash(r, g->login, hash, alg, RMQ_TAG,
		    why)) != 0)
			goto out;
		tagged = 1;
	}
	if ((rc = put_perms(r, g, g->login, why)) != 0 ||
	    (rc = path_of(r, p, sizeof(p), "/vhosts", g->resource, NULL)) != 0)
		goto out;
	strcat(p, "/permissions");
	if ((rc = get_json(r, p, 0, &vp, "read the vhost's permissions",
	    why)) != 0)
		goto out;
	for (i = 0; i < json_array_size(vp); i++) {
		pu = json_string_value(json_object_get(json_array_get(vp, i),
		    "user"));
		if (pu == NULL || strcmp(pu, r->user) == 0 ||
		    grant_login(g, pu))
			continue;
		if ((rc = del(r, "/permissions", g->resource, pu, "remove "
		    "another user's permission", why)) != 0)
			goto out;
		ncut++;
		if (off < sizeof(cut))
			off += (size_t)snprintf(cut + off, sizeof(cut) - off,
			    "%s\"%s\"", off > 0 ? ", " : " (", pu);
	}
	if (off > 0 && off < sizeof(cut) - 1)
		strcat(cut, ")");
	tl_drv_why(why, 0, "vhost \"%s\" adopted (%s, its queues and "
	    "messages kept), user \"%s\" kept with its password (%s, "
	    "\".*\" on the vhost) until the rotation retires it; %u other "
	    "user(s) lost their permission on it%s", g->resource, exact ?
	    "already marked" : "marked", g->login, tagged ? "tagged tally" :
	    "already tagged", ncut, cut);
out:
	json_decref(vh);
	json_decref(u);
	json_decref(up);
	json_decref(vp);
	return rc;
}

static int	access_create(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
		    char *why);
static int	access_check(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
		    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift,
		    char *why);
static void	access_evaluate(const struct tl_drv_rmq *r,
		    const struct tl_drv_grant *g, const json_t *vh, const json_t *u,
		    const json_t *const *perms, size_t np,
		    enum tl_drv_drift *drift, char *why);
static int	access_revoke(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
		    int drop, char *why);

static int
rmq_create(void *h, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_rmq *r = h;
	int rc, made = 0, existed = 0;

	if ((rc = grant_ok(r, g, 1, why)) != 0)
		return rc;
	if (g->access)
		return access_create(r, g, why);
	if (g->adopting)
		return adopt_takeover(r, g, why);
	if ((rc = vet_vhost(r, g, 1, &made, why)) != 0 ||
	    (rc = ensure_login(r, g, &existed, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "vhost \"%s\" %s, user \"%s\" %s",
	    g->resource, made ? "created" : "existed", g->login, existed ?
	    "existed (password set)" : "created");
}

/* The user again, on a vhost that must be there (never recreated). */
static int
rmq_set_password(void *h, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_rmq *r = h;
	int rc, made, existed = 0;

	if ((rc = grant_ok(r, g, 1, why)) != 0)
		return rc;
	if (g->access)
		return access_create(r, g, why);
	if ((rc = vet_vhost(r, g, 0, &made, why)) != 0)
		return rc == TL_ENOTFOUND ? TL_EDRIVER : rc;
	if ((rc = ensure_login(r, g, &existed, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user \"%s\" %s on vhost \"%s\"", g->login,
	    existed ? "password set" : "recreated", g->resource);
}

/* --- verification ----------------------------------------------------- */

/* Is user the first n bytes of stem, then _vN? */
static int
stem_v(const char *user, const char *stem, size_t n)
{
	const char *s;

	if (n == 0 || strncmp(user, stem, n) != 0 ||
	    strncmp(user + n, "_v", 2) != 0 || user[n + 2] == '\0')
		return 0;
	for (s = user + n + 2; *s != '\0'; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/*
 * Is user g->login or a name of g's scheme beside it (see the top: the
 * stems)?  The user tally adopt took over is told by its tag instead.
 */
static int
grant_login(const struct tl_drv_grant *g, const char *user)
{
	size_t n = strlen(g->login);

	if (strcmp(user, g->login) == 0)
		return 1;
	if (stem_v(user, g->resource, strlen(g->resource)) ||
	    (g->owner != NULL && stem_v(user, g->owner, strlen(g->owner))))
		return 1;
	/* g->login's stem: itself without the _vN it ends with. */
	while (n > 0 && g->login[n - 1] >= '0' && g->login[n - 1] <= '9')
		n--;
	return n >= 2 && n < strlen(g->login) && g->login[n - 1] == 'v' &&
	    g->login[n - 2] == '_' && stem_v(user, g->login, n - 2);
}

static void
drift_to(enum tl_drv_drift *d, enum tl_drv_drift k)
{
	if (k > *d)
		*d = k;
}

/* Another user by name, from what the caller read (NULL: not read). */
typedef const json_t *(*user_of_fn)(const void *arg, const char *name);

/*
 * What check finds for g from the API's objects: vh (the vhost or NULL),
 * u (the user or NULL), perms (the permission rows about either, an
 * array of borrowed objects), user_of(uarg, NAME) the other users with
 * permissions on the vhost.  The worst finding comes first in why.
 */
static void
evaluate(const struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    const json_t *vh, const json_t *u, const json_t *const *perms,
    size_t np, user_of_fn user_of, const void *uarg,
    enum tl_drv_drift *drift, char *why)
{
	char other[256], cred[TL_WHY_MAX] = "", priv[TL_WHY_MAX] = "";
	const char *pv, *pu, *c, *w, *rd;
	enum rmq_mark k;
	int have = 0, exact;
	size_t i;

	*drift = TL_DRIFT_NONE;
	why[0] = '\0';
	if (vh == NULL) {
		*drift = TL_DRIFT_MISSING;
		tl_drv_why(why, 0, "vhost \"%s\" is gone; not recreated empty "
		    "(its queues and messages are lost)", g->resource);
		return;
	}
	if ((k = vhost_mark(r, vh, g, other, sizeof(other), &exact)) ==
	    MARK_MESH) {
		*drift = TL_DRIFT_MISSING;
		refuse_vhost(k, other, g->resource, g, why);
		return;
	}
	if (k != MARK_OURS) {
		*drift = TL_DRIFT_MISSING;
		tl_drv_why(why, 0, "vhost \"%s\" is no longer this grant's "
		    "(its mark is %s%s)", g->resource, k == MARK_OTHER ?
		    "for grant " : "not tally's", other);
		return;
	}
	{
		const char *state = "";
		const char *node = vhost_down(vh, &state);

		if (node != NULL) {
			drift_to(drift, TL_DRIFT_PRIVILEGES);
			tl_drv_why_add(priv, "vhost \"%s\" is %s on %s: nobody "
			    "can open it (fix_privileges starts it)",
			    g->resource, state, node);
		}
	}
	if (u == NULL) {
		drift_to(drift, TL_DRIFT_CREDENTIAL);
		tl_drv_why_add(cred, "user \"%s\" is gone", g->login);
	} else {
		const char *sh = json_string_value(json_object_get(u,
		    "password_hash"));

		if (g->cert_login && sh != NULL && *sh != '\0') {
			drift_to(drift, TL_DRIFT_CREDENTIAL);
			tl_drv_why_add(cred, "user \"%s\" has a password: a "
			    "login by certificate has none", g->login);
		} else if (!g->cert_login && g->password != NULL &&
		    !hash_matches(json_string_value(json_object_get(u,
		    "hashing_algorithm")), sh, g->password)) {
			drift_to(drift, TL_DRIFT_CREDENTIAL);
			tl_drv_why_add(cred, "user \"%s\": the stored password "
			    "hash is not the recorded password's", g->login);
		}
		if (!tags_empty(u)) {
			drift_to(drift, TL_DRIFT_PRIVILEGES);
			tl_drv_why_add(priv, "user \"%s\" has tags (management "
			    "access)", g->login);
		}
	}
	for (i = 0; i < np; i++) {
		pv = json_string_value(json_object_get(perms[i], "vhost"));
		pu = json_string_value(json_object_get(perms[i], "user"));
		if (pv == NULL || pu == NULL)
			continue;
		if (strcmp(pu, g->login) == 0 && strcmp(pv, g->resource) == 0) {
			have = 1;
			c = json_string_value(json_object_get(perms[i],
			    "configure"));
			w = json_string_value(json_object_get(perms[i], "write"));
			rd = json_string_value(json_object_get(perms[i], "read"));
			if (c == NULL || w == NULL || rd == NULL ||
			    strcmp(c, RMQ_ALL) != 0 || strcmp(w, RMQ_ALL) != 0 ||
			    strcmp(rd, RMQ_ALL) != 0) {
				drift_to(drift, TL_DRIFT_PRIVILEGES);
				tl_drv_why_add(priv, "user \"%s\" on vhost "
				    "\"%s\": configure \"%s\" write \"%s\" "
				    "read \"%s\", expected \".*\" each", pu, pv,
				    c ? c : "", w ? w : "", rd ? rd : "");
			}
		} else if (strcmp(pu, g->login) == 0) {
			drift_to(drift, TL_DRIFT_PRIVILEGES);
			tl_drv_why_add(priv, "user \"%s\" also has permissions "
			    "on vhost \"%s\"", pu, pv);
		} else if (strcmp(pv, g->resource) == 0 &&
		    strcmp(pu, r->user) != 0 && !grant_login(g, pu) &&
		    !adopted_user(user_of(uarg, pu)) &&
		    !reader_user(user_of(uarg, pu))) {
			drift_to(drift, TL_DRIFT_PRIVILEGES);
			tl_drv_why_add(priv, "user \"%s\" (not this grant's) "
			    "has permissions on vhost \"%s\"", pu, pv);
		}
	}
	if (u != NULL && !have) {
		drift_to(drift, TL_DRIFT_PRIVILEGES);
		tl_drv_why_add(priv, "user \"%s\" has no permissions on vhost "
		    "\"%s\"", g->login, g->resource);
	}
	if (*drift == TL_DRIFT_CREDENTIAL) {
		snprintf(why, TL_WHY_MAX, "%s", cred);
		if (priv[0] != '\0')
			tl_drv_why_add(why, "%s", priv);
	} else
		snprintf(why, TL_WHY_MAX, "%s", priv);
}

/*
 * Logs in as the consumer, where and as compose tells it to (host, the
 * field port): over AMQPS when consumers get TLS, verified against the
 * setting ca under tls=verify (the broker's certificate must name the
 * host it is reached at), as a consumer holding the field ca would.
 * 0, TL_EAUTH, TL_EUNREACH, TL_EUNTRUSTED.
 */
static int
login_as(const struct tl_drv_grant *g, const struct tl_drv_endpoint *ep,
    char *why)
{
	struct tl_amqp_conf c;
	struct tl_amqp *a = NULL;
	enum tl_drv_tls mode = tl_drv_consumer_tls(&tl_drv_rabbitmq_decl, ep);
	char e[TL_WHY_MAX], port[16];
	int rc;

	memset(&c, 0, sizeof(c));
	snprintf(c.host, sizeof(c.host), "%s", ep != NULL && ep->host != NULL &&
	    *ep->host != '\0' ? ep->host : "127.0.0.1");
	if (tl_drv_rabbitmq_decl.compose("port", ep, g, port,
	    sizeof(port)) != 0)
		port[0] = '\0';
	c.port = atoi(port);
	snprintf(c.vhost, sizeof(c.vhost), "%s", g->resource);
	snprintf(c.user, sizeof(c.user), "%s", g->login);
	c.password = g->password;
	c.timeout_ms = RMQ_LOGIN_MS;
	c.tls = mode != TL_DRV_TLS_OFF;
	c.noverify = mode == TL_DRV_TLS_REQUIRE;
	c.cafile = ep != NULL ? ep->ca_file : NULL;
	if (mode == TL_DRV_TLS_VERIFY && c.cafile == NULL)
		return tl_drv_why(why, TL_EUNTRUSTED, "user \"%s\" not logged "
		    "in over AMQPS at %s:%d: no ca to verify the broker with",
		    g->login, c.host, c.port ? c.port : 5671);
	rc = tl_amqp_connect(&c, &a, e);
	tl_amqp_close(a);
	if (rc != 0)
		tl_drv_why(why, rc, "user \"%s\" cannot log in over %s at "
		    "%s:%d to vhost \"%s\": %s", g->login, c.tls ? "AMQPS" :
		    "AMQP", c.host, c.port ? c.port : c.tls ? 5671 : 5672,
		    g->resource, e);
	return rc;
}

/* The permission rows of perms (an array) about g's vhost or login. */
static size_t
pick_perms(const json_t *perms, const struct tl_drv_grant *g,
    const json_t **out, size_t cap)
{
	const json_t *p;
	const char *v, *u;
	size_t i, n = 0;

	for (i = 0; i < json_array_size(perms) && n < cap; i++) {
		p = json_array_get(perms, i);
		v = json_string_value(json_object_get(p, "vhost"));
		u = json_string_value(json_object_get(p, "user"));
		if ((v != NULL && strcmp(v, g->resource) == 0) ||
		    (u != NULL && strcmp(u, g->login) == 0))
			out[n++] = p;
	}
	return n;
}

#define RMQ_PERMS_MAX	256

/*
 * The users with a permission on g's vhost (vp, its rows) but the admin
 * and g's logins by name, read into *others by name: the one tally
 * adopt took over is told from an intruder by its tag.
 */
static int
read_others(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    const json_t *vp, json_t **others, char *why)
{
	const char *pu;
	json_t *u;
	size_t i;
	int rc;

	if ((*others = json_object()) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	for (i = 0; i < json_array_size(vp); i++) {
		pu = json_string_value(json_object_get(json_array_get(vp, i),
		    "user"));
		if (pu == NULL || strcmp(pu, r->user) == 0 ||
		    grant_login(g, pu) || json_object_get(*others, pu) != NULL)
			continue;
		if ((rc = get_user(r, pu, &u, NULL, why)) != 0)
			return rc;
		if (u != NULL && json_object_set_new(*others, pu, u) != 0)
			return tl_drv_why(why, ENOMEM, "out of memory");
	}
	return 0;
}

static const json_t *
user_in_object(const void *arg, const char *name)
{
	return json_object_get(arg, name);
}

static int
rmq_check(void *h, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	struct tl_drv_rmq *r = h;
	json_t *vh = NULL, *u = NULL, *up = NULL, *vp = NULL, *all;
	json_t *others = NULL;
	const json_t *rows[RMQ_PERMS_MAX];
	char p[1024], lw[TL_WHY_MAX];
	size_t n = 0, i;
	int rc;

	*drift = TL_DRIFT_NONE;
	if ((rc = grant_ok(r, g, 0, why)) != 0)
		return rc;
	if (g->access)
		return access_check(r, g, ep, drift, why);
	if ((rc = get_vhost(r, g->resource, &vh, why)) != 0 ||
	    (rc = get_user(r, g->login, &u, &up, why)) != 0)
		goto out;
	if (vh != NULL) {
		if ((rc = path_of(r, p, sizeof(p), "/vhosts", g->resource,
		    NULL)) != 0 || strlen(p) + sizeof("/permissions") >
		    sizeof(p)) {
			rc = tl_drv_why(why, TL_ETOOBIG, "vhost name too long");
			goto out;
		}
		strcat(p, "/permissions");
		if ((rc = get_json(r, p, 1, &vp, "read the vhost's "
		    "permissions", why)) != 0)
			goto out;
	}
	if ((rc = read_others(r, g, vp, &others, why)) != 0)
		goto out;
	if ((all = json_array()) == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto out;
	}
	/* One list of both: a row of the user on the vhost counts once. */
	for (i = 0; i < json_array_size(vp); i++)
		json_array_append(all, json_array_get(vp, i));
	for (i = 0; i < json_array_size(up); i++) {
		const char *v = json_string_value(json_object_get(
		    json_array_get(up, i), "vhost"));

		if (v == NULL || strcmp(v, g->resource) != 0 || vp == NULL)
			json_array_append(all, json_array_get(up, i));
	}
	n = pick_perms(all, g, rows, RMQ_PERMS_MAX);
	evaluate(r, g, vh, u, rows, n, user_in_object, others, drift, why);
	json_decref(all);
	/* By certificate: the key is on the consumer's node only. */
	if (*drift == TL_DRIFT_NONE && g->password != NULL && !g->cert_login) {
		if ((rc = login_as(g, ep, lw)) == TL_EAUTH || rc == TL_EDRIVER) {
			*drift = TL_DRIFT_CREDENTIAL;
			snprintf(why, TL_WHY_MAX, "%s", lw);
			rc = 0;
		} else if (rc != 0) {
			snprintf(why, TL_WHY_MAX, "%s", lw);
			goto out;
		}
	}
	if (*drift == TL_DRIFT_NONE)
		tl_drv_why(why, 0, "vhost \"%s\" and user \"%s\" are as tally "
		    "set them%s", g->resource, g->login, g->password == NULL ||
		    g->cert_login ? "" : tl_drv_consumer_tls(&tl_drv_rabbitmq_decl, ep) !=
		    TL_DRV_TLS_OFF ? "; the user logged in over AMQPS" :
		    "; the user logged in over AMQP");
	/*
	 * Consumers that get TLS but could connect without it: a warning
	 * (TL_DRIFT_PLAINTEXT, never repaired: the listeners are the
	 * operator's), asked only when nothing worse was found and the
	 * check logged in, as the verifier clears it only then.
	 */
	if (*drift == TL_DRIFT_NONE && g->password != NULL &&
	    !g->cert_login && g->posture &&
	    tl_drv_consumer_tls(&tl_drv_rabbitmq_decl, ep) != TL_DRV_TLS_OFF) {
		int open = 0;

		if (tl_drv_rmq_plaintext(r, &open, lw) == 0 && open) {
			*drift = TL_DRIFT_PLAINTEXT;
			tl_drv_why(why, 0, "plaintext: %s", lw);
		}
	}
out:
	json_decref(vh);
	json_decref(u);
	json_decref(up);
	json_decref(vp);
	json_decref(others);
	return rc;
}

/* A name index over a JSON array of objects, by key (sorted). */
struct idx {
	const json_t	**v;
	size_t		  n;
	const char	 *key;
};

static const char *idx_key;

static int
idx_cmp(const void *a, const void *b)
{
	const char *x = json_string_value(json_object_get(
	    *(const json_t *const *)a, idx_key));
	const char *y = json_string_value(json_object_get(
	    *(const json_t *const *)b, idx_key));

	return strcmp(x != NULL ? x : "", y != NULL ? y : "");
}

static pthread_mutex_t idx_lock = PTHREAD_MUTEX_INITIALIZER;

static int
idx_make(struct idx *x, const json_t *arr, const char *key)
{
	size_t i;

	x->key = key;
	x->n = json_array_size(arr);
	if ((x->v = calloc(x->n + 1, sizeof(*x->v))) == NULL)
		return ENOMEM;
	for (i = 0; i < x->n; i++)
		x->v[i] = json_array_get(arr, i);
	/* qsort has no argument: the key is a global, under a lock. */
	pthread_mutex_lock(&idx_lock);
	idx_key = key;
	qsort(x->v, x->n, sizeof(*x->v), idx_cmp);
	pthread_mutex_unlock(&idx_lock);
	return 0;
}

/* The first entry whose key is name, its position in *at; NULL: none. */
static const json_t *
idx_find(const struct idx *x, const char *name, size_t *at)
{
	size_t lo = 0, hi = x->n, mid;
	const char *s;
	int c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		s = json_string_value(json_object_get(x->v[mid], x->key));
		c = strcmp(s != NULL ? s : "", name);
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (at != NULL)
		*at = lo;
	if (lo < x->n && (s = json_string_value(json_object_get(x->v[lo],
	    x->key))) != NULL && strcmp(s, name) == 0)
		return x->v[lo];
	return NULL;
}

static const json_t *
user_in_idx(const void *arg, const char *name)
{
	return idx_find(arg, name, NULL);
}

/* Appends the rows of x whose key is name (and not already in). */
static void
idx_rows(const struct idx *x, const char *name, const json_t **out,
    size_t *n, size_t cap)
{
	const char *s;
	size_t at, j;

	if (idx_find(x, name, &at) == NULL)
		return;
	for (; at < x->n && *n < cap; at++) {
		s = json_string_value(json_object_get(x->v[at], x->key));
		if (s == NULL || strcmp(s, name) != 0)
			break;
		for (j = 0; j < *n; j++)
			if (out[j] == x->v[at])
				break;
		if (j == *n)
			out[(*n)++] = x->v[at];
	}
}

/*
 * Three requests for every grant of the provider: the users (with their
 * hashes), every permission, every vhost; then what check would find,
 * the password compared with the stored hash instead of a login.
 */
static int
rmq_check_bulk(void *h, const struct tl_drv_grant *gs, size_t n,
    enum tl_drv_drift *drift, char (*why)[TL_WHY_MAX])
{
	struct tl_drv_rmq *r = h;
	json_t *users = NULL, *perms = NULL, *vhosts = NULL;
	struct idx xu = { 0 }, xv = { 0 }, xpu = { 0 }, xpv = { 0 };
	const json_t *rows[RMQ_PERMS_MAX];
	size_t i, np;
	int rc;

	for (i = 0; i < n; i++)
		if ((rc = grant_ok(r, &gs[i], 0, why[i])) != 0)
			return rc;
	if ((rc = get_json(r, "/users", 0, &users, "list the users",
	    why[0])) != 0 ||
	    (rc = get_json(r, "/permissions", 0, &perms, "list the "
	    "permissions", why[0])) != 0 ||
	    (rc = get_json(r, "/vhosts?columns=name,description,tags,"
	    "cluster_state", 0,
	    &vhosts, "list the vhosts", why[0])) != 0)
		goto out;
	if ((rc = idx_make(&xu, users, "name")) != 0 ||
	    (rc = idx_make(&xv, vhosts, "name")) != 0 ||
	    (rc = idx_make(&xpu, perms, "user")) != 0 ||
	    (rc = idx_make(&xpv, perms, "vhost")) != 0) {
		rc = tl_drv_why(why[0], ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		np = 0;
		if (gs[i].access) {
			idx_rows(&xpu, gs[i].login, rows, &np, RMQ_PERMS_MAX);
			access_evaluate(r, &gs[i], idx_find(&xv,
			    gs[i].resource, NULL), idx_find(&xu, gs[i].login,
			    NULL), rows, np, &drift[i], why[i]);
			continue;
		}
		idx_rows(&xpv, gs[i].resource, rows, &np, RMQ_PERMS_MAX);
		idx_rows(&xpu, gs[i].login, rows, &np, RMQ_PERMS_MAX);
		evaluate(r, &gs[i], idx_find(&xv, gs[i].resource, NULL),
		    idx_find(&xu, gs[i].login, NULL), rows, np, user_in_idx,
		    &xu, &drift[i], why[i]);
		if (drift[i] == TL_DRIFT_NONE)
			tl_drv_why(why[i], 0, "vhost \"%s\" and user \"%s\" "
			    "are as tally set them", gs[i].resource,
			    gs[i].login);
	}
out:
	free(xu.v);
	free(xv.v);
	free(xpu.v);
	free(xpv.v);
	json_decref(users);
	json_decref(perms);
	json_decref(vhosts);
	return rc;
}

/*
 * Tags off (the stored hash sent back: a PUT without one clears the
 * password), ".*" on the vhost, no permissions elsewhere, and nobody
 * else's on the vhost but the admin's and the grant's other logins'.
 */
static int
rmq_fix_privileges(void *h, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_rmq *r = h;
	json_t *u = NULL, *up = NULL, *vp = NULL, *others = NULL, *row;
	const char *v, *pu, *hash, *alg;
	char p[1024];
	unsigned fixed = 0;
	int rc, made;
	size_t i;

	if ((rc = grant_ok(r, g, 0, why)) != 0)
		return rc;
	if (g->access)
		return access_create(r, g, why);
	if ((rc = vet_vhost(r, g, 0, &made, why)) != 0)
		return rc == TL_ENOTFOUND ? TL_EDRIVER : rc;
	if ((rc = get_user(r, g->login, &u, &up, why)) != 0)
		return rc;
	if (u == NULL) {
		if (g->password == NULL)
			return tl_drv_why(why, TL_EDRIVER, "user \"%s\" is "
			    "gone (set_password recreates it)", g->login);
		return rmq_set_password(h, g, why);
	}
	if (!user_ours(u, up, g->resource, g->login, why)) {
		rc = TL_EDRIVER;
		goto out;
	}
	if (!tags_empty(u)) {
		hash = json_string_value(json_object_get(u, "password_hash"));
		alg = json_string_value(json_object_get(u,
		    "hashing_algorithm"));
		if (hash != NULL && *hash != '\0' && alg != NULL)
			rc = put_user_hash(r, g->login, hash, alg, "", why);
		else if (g->password != NULL)
			rc = put_user(r, g, why);
		else
			rc = tl_drv_why(why, TL_EDRIVER, "user \"%s\" has tags "
			    "and no password hash: set_password repairs it",
			    g->login);
		if (rc != 0)
			goto out;
		fixed++;
	}
	if ((rc = put_perms(r, g, g->login, why)) != 0)
		goto out;
	json_array_foreach(up, i, row) {
		v = json_string_value(json_object_get(row, "vhost"));
		if (v == NULL || strcmp(v, g->resource) == 0)
			continue;
		if ((rc = del(r, "/permissions", v, g->login, "remove a "
		    "permission elsewhere", why)) != 0)
			goto out;
		fixed++;
	}
	if ((rc = path_of(r, p, sizeof(p), "/vhosts", g->resource, NULL)) != 0)
		goto out;
	strcat(p, "/permissions");
	if ((rc = get_json(r, p, 1, &vp, "read the vhost's permissions",
	    why)) != 0 || (rc = read_others(r, g, vp, &others, why)) != 0)
		goto out;
	json_array_foreach(vp, i, row) {
		pu = json_string_value(json_object_get(row, "user"));
		if (pu == NULL || strcmp(pu, r->user) == 0 ||
		    grant_login(g, pu) ||
		    adopted_user(json_object_get(others, pu)) ||
		    reader_user(json_object_get(others, pu)))
			continue;
		if ((rc = del(r, "/permissions", g->resource, pu, "remove "
		    "another user's permission", why)) != 0)
			goto out;
		fixed++;
	}
	tl_drv_why(why, 0, "user \"%s\" has \".*\" on vhost \"%s\" only (%u "
	    "other change(s) undone)", g->login, g->resource, fixed);
out:
	json_decref(u);
	json_decref(up);
	json_decref(vp);
	json_decref(others);
	return rc;
}

/* --- credentials, sessions, revocation ------------------------------- */

/* Deletes user if it is g's (absent: 0), closing its connections. */
static int
drop_user(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    const char *user, unsigned *closed, char *why)
{
	json_t *u = NULL, *up = NULL;
	int rc;

	*closed = 0;
	if ((rc = get_user(r, user, &u, &up, why)) != 0)
		return rc;
	if (u == NULL)
		goto out;
	if (!user_ours(u, up, g->resource, user, why)) {
		rc = TL_EDRIVER;
		goto out;
	}
	/* Deleted first, so a client that reconnects is refused. */
	if ((rc = del(r, "/users", user, NULL, "delete the user", why)) != 0 ||
	    (rc = close_connections(r, user, closed, why)) != 0)
		goto out;
out:
	json_decref(u);
	json_decref(up);
	return rc;
}

static int
rmq_add_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	return rmq_set_password(h, g, why);
}

static int
rmq_retire_credential(void *h, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_rmq *r = h;
	unsigned closed;
	int rc, made;

	if ((rc = grant_ok(r, g, 0, why)) != 0)
		return rc;
	if (g->access)
		return access_revoke(r, g, -1, why);
	/* The vhost's mark decides whose users these are (gone: theirs). */
	if ((rc = vet_vhost(r, g, 0, &made, why)) != 0 && rc != TL_ENOTFOUND)
		return rc;
	if ((rc = drop_user(r, g, g->login, &closed, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user \"%s\" deleted, %u connection(s) "
	    "closed", g->login, closed);
}

static int
rmq_sessions(void *h, const struct tl_drv_grant *g, unsigned *count,
    char *why)
{
	struct tl_drv_rmq *r = h;
	json_t *cs = NULL, *c;
	const char *u;
	size_t i;
	int rc;

	*count = 0;
	if ((rc = grant_ok(r, g, 0, why)) != 0 ||
	    (rc = get_json(r, "/connections?columns=name,user", 0, &cs,
	    "list the connections", why)) != 0)
		return rc;
	json_array_foreach(cs, i, c)
		if ((u = json_string_value(json_object_get(c, "user"))) !=
		    NULL && strcmp(u, g->login) == 0)
			(*count)++;
	json_decref(cs);
	return tl_drv_why(why, 0, "user \"%s\" has %u connection(s)", g->login,
	    *count);
}

/*
 * Every login of g (g->login, the others beside it on the vhost and the
 * user tally adopt took over) is deleted with its connections; drop
 * deletes the vhost too.
 */
static int
rmq_revoke(void *h, const struct tl_drv_grant *g, int drop, char *why)
{
	struct tl_drv_rmq *r = h;
	json_t *vh = NULL, *vp = NULL, *others = NULL, *row;
	char other[256], p[1024];
	unsigned closed, users = 0, conns = 0;
	enum rmq_mark k;
	const char *pu;
	size_t i;
	int rc, exact;

	if ((rc = grant_ok(r, g, 0, why)) != 0)
		return rc;
	if (g->access)
		return access_revoke(r, g, drop, why);
	if ((rc = get_vhost(r, g->resource, &vh, why)) != 0)
		return rc;
	if (vh != NULL && (k = vhost_mark(r, vh, g, other, sizeof(other),
	    &exact)) != MARK_OURS) {
		rc = refuse_vhost(k, other, g->resource, g, why);
		goto out;
	}
	if (vh != NULL) {
		if ((rc = path_of(r, p, sizeof(p), "/vhosts", g->resource,
		    NULL)) != 0)
			goto out;
		strcat(p, "/permissions");
		if ((rc = get_json(r, p, 1, &vp, "read the vhost's "
		    "permissions", why)) != 0 ||
		    (rc = read_others(r, g, vp, &others, why)) != 0)
			goto out;
	}
	json_array_foreach(vp, i, row) {
		pu = json_string_value(json_object_get(row, "user"));
		if (pu == NULL || strcmp(pu, g->login) == 0 ||
		    (!grant_login(g, pu) &&
		    !adopted_user(json_object_get(others, pu))))
			continue;
		if ((rc = drop_user(r, g, pu, &closed, why)) != 0)
			goto out;
		users++;
		conns += closed;
	}
	if ((rc = drop_user(r, g, g->login, &closed, why)) != 0)
		goto out;
	users++;
	conns += closed;
	if (drop && vh != NULL && (rc = del(r, "/vhosts", g->resource, NULL,
	    "delete the vhost", why)) != 0)
		goto out;
	tl_drv_why(why, 0, "%u user(s) deleted, %u connection(s) closed; vhost "
	    "\"%s\" %s", users, conns, g->resource, vh == NULL ? "was gone" :
	    drop ? "deleted" : "kept");
out:
	json_decref(vh);
	json_decref(vp);
	json_decref(others);
	return rc;
}

/* The queues of g's vhost (NULL: the vhost is gone). */
static int
queues(struct tl_drv_rmq *r, const struct tl_drv_grant *g, json_t **qs,
    char *why)
{
	char p[1100];
	int rc;

	if ((rc = path_of(r, p, sizeof(p) - 80, "/queues", g->resource,
	    NULL)) != 0)
		return tl_drv_why(why, rc, "vhost name too long");
	strcat(p, "?columns=name,messages,message_bytes,exclusive,"
	    "auto_delete");
	return get_json(r, p, 1, qs, "list the vhost's queues", why);
}

static int
rmq_size(void *h, const struct tl_drv_grant *g, uint64_t *bytes, char *why)
{
	struct tl_drv_rmq *r = h;
	json_t *qs = NULL, *q;
	size_t i;
	int rc;

	*bytes = 0;
	if ((rc = grant_ok(r, g, 0, why)) != 0 ||
	    (rc = queues(r, g, &qs, why)) != 0)
		return rc;
	json_array_foreach(qs, i, q)
		*bytes += (uint64_t)json_integer_value(json_object_get(q,
		    "message_bytes"));
	json_decref(qs);
	return 0;
}

static int
rmq_loss(void *h, const struct tl_drv_grant *g, int drop, int *loses,
    char *why)
{
	struct tl_drv_rmq *r = h;
	json_t *qs = NULL, *q;
	unsigned long long nq = 0, nm = 0, nb = 0, vq = 0, vm = 0;
	json_int_t m;
	size_t i;
	int rc;

	*loses = 0;
	if ((rc = grant_ok(r, g, 0, why)) != 0 ||
	    (rc = queues(r, g, &qs, why)) != 0)
		return rc;
	if (qs == NULL)
		return tl_drv_why(why, 0, "vhost \"%s\" is gone: nothing left "
		    "to lose", g->resource);
	json_array_foreach(qs, i, q) {
		m = json_integer_value(json_object_get(q, "messages"));
		nq++;
		nm += (unsigned long long)m;
		nb += (unsigned long long)json_integer_value(json_object_get(q,
		    "message_bytes"));
		if (json_is_true(json_object_get(q, "exclusive")) ||
		    json_is_true(json_object_get(q, "auto_delete"))) {
			vq++;
			vm += (unsigned long long)m;
		}
	}
	json_decref(qs);
	if (drop) {
		*loses = nq > 0;
		return tl_drv_why(why, 0, "vhost \"%s\" is deleted with its "
		    "%llu queue(s) and %llu message(s) (%llu bytes)",
		    g->resource, nq, nm, nb);
	}
	/* The users' connections close: what lives only with them goes. */
	*loses = vq > 0;
	return tl_drv_why(why, 0, "vhost \"%s\" (%llu queue(s), %llu "
	    "message(s), %llu bytes) is kept; closing the users' connections "
	    "deletes %llu exclusive or auto-delete queue(s) with %llu "
	    "message(s)", g->resource, nq, nm, nb, vq, vm);
}

int
tl_drv_rmq_plaintext(void *h, int *open, char *why)
{
	struct tl_drv_rmq *r = h;
	json_t *ov, *ls, *l;
	char ports[128] = "";
	const char *proto;
	size_t i, off = 0;
	int rc, n;

	*open = 0;
	if ((rc = get_json(r, "/overview", 0, &ov, "GET /api/overview",
	    why)) != 0)
		return rc;
	if (!json_is_array(ls = json_object_get(ov, "listeners"))) {
		json_decref(ov);
		return tl_drv_why(why, TL_EDRIVER, "GET /api/overview: no "
		    "listeners in the answer");
	}
	json_array_foreach(ls, i, l) {
		char p[16];

		proto = json_string_value(json_object_get(l, "protocol"));
		if (proto == NULL || strcmp(proto, "amqp") != 0)
			continue;
		/* IPv4 and IPv6 listeners on one port: the port once. */
		snprintf(p, sizeof(p), "%lld", (long long)json_integer_value(
		    json_object_get(l, "port")));
		*open = 1;
		if (strstr(ports, p) != NULL)
			continue;
		n = snprintf(ports + off, sizeof(ports) - off, "%s%s",
		    off > 0 ? ", " : "", p);
		if (n > 0 && (size_t)n < sizeof(ports) - off)
			off += (size_t)n;
	}
	json_decref(ov);
	if (*open)
		return tl_drv_why(why, 0, "consumers can connect without TLS "
		    "on port %s (a plain AMQP listener): set listeners.tcp = "
		    "none in rabbitmq.conf", ports);
	return tl_drv_why(why, 0, "no plain AMQP listener: consumers "
	    "connect by TLS only");
}

/* --- access below ownership (g->access; see the top) ----------------- */

/* Is user g->login, or g->login's stem then _vN (its other versions)? */
static int
access_login(const struct tl_drv_grant *g, const char *user)
{
	size_t n = strlen(g->login);

	if (strcmp(user, g->login) == 0)
		return 1;
	while (n > 0 && g->login[n - 1] >= '0' && g->login[n - 1] <= '9')
		n--;
	return n >= 2 && n < strlen(g->login) && g->login[n - 1] == 'v' &&
	    g->login[n - 2] == '_' && stem_v(user, g->login, n - 2);
}

/*
 * The vhost must be there and tally's (another grant's: the owner's);
 * an unmarked one or another mesh's is refused, as the owner's would
 * be.
 */
static int
access_vhost(struct tl_drv_rmq *r, const struct tl_drv_grant *g, char *why)
{
	char other[256];
	enum rmq_mark k;
	json_t *vh = NULL;
	int rc, exact;

	if ((rc = get_vhost(r, g->resource, &vh, why)) != 0)
		return rc;
	if (vh == NULL)
		return tl_drv_why(why, TL_EDRIVER, "vhost \"%s\" of \"%s\" is "
		    "gone: no access to give", g->resource, g->owner != NULL ?
		    g->owner : g->resource);
	k = vhost_mark(r, vh, g, other, sizeof(other), &exact);
	json_decref(vh);
	if (k == MARK_FOREIGN)
		return tl_drv_why(why, TL_EDRIVER, "vhost \"%s\" is not "
		    "tally's: access is given to what tally made", g->resource);
	return k == MARK_MESH ? refuse_vhost(k, other, g->resource, g, why) :
	    0;
}

/*
 * create, add_credential, set_password and fix_privileges: the user
 * with its tag and the grant's password (none given: the hash it has),
 * exactly its access on the vhost and no permissions elsewhere.
 */
static int
access_create(struct tl_drv_rmq *r, const struct tl_drv_grant *g, char *why)
{
	json_t *u = NULL, *up = NULL, *row;
	const char *v, *hash, *alg, *pc, *pw, *pr;
	size_t i;
	int rc;

	if ((rc = access_vhost(r, g, why)) != 0 ||
	    (rc = get_user(r, g->login, &u, &up, why)) != 0)
		goto out;
	if (u != NULL && !user_ours(u, up, g->resource, g->login, why)) {
		rc = TL_EDRIVER;
		goto out;
	}
	hash = json_string_value(json_object_get(u, "password_hash"));
	alg = json_string_value(json_object_get(u, "hashing_algorithm"));
	if (g->password != NULL || g->cert_login)
		rc = put_user(r, g, why);
	else if (u != NULL && hash != NULL && alg != NULL)
		rc = put_user_hash(r, g->login, hash, alg, RMQ_READER, why);
	else
		rc = tl_drv_why(why, TL_EDRIVER, "user \"%s\" %s and no "
		    "password was given (set_password makes it)", g->login,
		    u == NULL ? "is gone" : "has no password hash");
	if (rc != 0 || (rc = put_perms(r, g, g->login, why)) != 0)
		goto out;
	json_array_foreach(up, i, row) {
		v = json_string_value(json_object_get(row, "vhost"));
		if (v == NULL || strcmp(v, g->resource) == 0)
			continue;
		if ((rc = del(r, "/permissions", v, g->login, "remove a "
		    "permission elsewhere", why)) != 0)
			goto out;
	}
	perms_of(g, &pc, &pw, &pr);
	tl_drv_why(why, 0, "user \"%s\" %s: configure \"%s\" write \"%s\" "
	    "read \"%s\" on vhost \"%s\" of \"%s\"", g->login, u == NULL ?
	    "created" : "set again", pc, pw, pr, g->resource,
	    g->owner != NULL ? g->owner : g->resource);
out:
	json_decref(u);
	json_decref(up);
	return rc;
}

/*
 * What check finds for a login below ownership: vh the vhost, u the user
 * (either NULL: gone), perms the user's permission rows.
 */
static void
access_evaluate(const struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    const json_t *vh, const json_t *u, const json_t *const *perms,
    size_t np, enum tl_drv_drift *drift, char *why)
{
	char other[256], cred[TL_WHY_MAX] = "", priv[TL_WHY_MAX] = "";
	const char *pv, *c, *w, *rd, *ec, *ew, *er, *sh;
	enum rmq_mark k;
	int have = 0, exact;
	size_t i;

	*drift = TL_DRIFT_NONE;
	why[0] = '\0';
	if (vh == NULL || u == NULL) {
		*drift = TL_DRIFT_MISSING;
		tl_drv_why(why, 0, "%s \"%s\" is gone", vh == NULL ? "vhost" :
		    "user", vh == NULL ? g->resource : g->login);
		return;
	}
	if ((k = vhost_mark(r, vh, g, other, sizeof(other), &exact)) ==
	    MARK_FOREIGN || k == MARK_MESH) {
		*drift = TL_DRIFT_MISSING;
		tl_drv_why(why, 0, "vhost \"%s\" is no longer tally's",
		    g->resource);
		return;
	}
	sh = json_string_value(json_object_get(u, "password_hash"));
	if (!g->cert_login && g->password != NULL &&
	    !hash_matches(json_string_value(json_object_get(u,
	    "hashing_algorithm")), sh, g->password)) {
		*drift = TL_DRIFT_CREDENTIAL;
		tl_drv_why_add(cred, "user \"%s\": the stored password hash is "
		    "not the recorded password's", g->login);
	}
	if (!reader_user(u)) {
		drift_to(drift, TL_DRIFT_PRIVILEGES);
		tl_drv_why_add(priv, "user \"%s\": its tags are not exactly "
		    "\"" RMQ_READER "\"", g->login);
	}
	perms_of(g, &ec, &ew, &er);
	for (i = 0; i < np; i++) {
		pv = json_string_value(json_object_get(perms[i], "vhost"));
		if (pv == NULL)
			continue;
		if (strcmp(pv, g->resource) != 0) {
			drift_to(drift, TL_DRIFT_PRIVILEGES);
			tl_drv_why_add(priv, "user \"%s\" also has permissions "
			    "on vhost \"%s\"", g->login, pv);
			continue;
		}
		have = 1;
		c = json_string_value(json_object_get(perms[i], "configure"));
		w = json_string_value(json_object_get(perms[i], "write"));
		rd = json_string_value(json_object_get(perms[i], "read"));
		if (c == NULL || w == NULL || rd == NULL || strcmp(c, ec) != 0 ||
		    strcmp(w, ew) != 0 || strcmp(rd, er) != 0) {
			drift_to(drift, TL_DRIFT_PRIVILEGES);
			tl_drv_why_add(priv, "user \"%s\" on vhost \"%s\": "
			    "configure \"%s\" write \"%s\" read \"%s\", "
			    "expected \"%s\" \"%s\" \"%s\"", g->login, pv,
			    c ? c : "", w ? w : "", rd ? rd : "", ec, ew, er);
		}
	}
	if (!have) {
		drift_to(drift, TL_DRIFT_PRIVILEGES);
		tl_drv_why_add(priv, "user \"%s\" has no permissions on vhost "
		    "\"%s\"", g->login, g->resource);
	}
	if (*drift == TL_DRIFT_CREDENTIAL) {
		snprintf(why, TL_WHY_MAX, "%s", cred);
		if (priv[0] != '\0')
			tl_drv_why_add(why, "%s", priv);
	} else if (*drift != TL_DRIFT_NONE)
		snprintf(why, TL_WHY_MAX, "%s", priv);
	else
		tl_drv_why(why, 0, "user \"%s\" has %s access to vhost \"%s\" "
		    "as tally set it", g->login, g->access ==
		    TL_DRV_ACCESS_READ ? "read" : "read-write", g->resource);
}

static int
access_check(struct tl_drv_rmq *r, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	json_t *vh = NULL, *u = NULL, *up = NULL;
	const json_t *rows[RMQ_PERMS_MAX];
	char lw[TL_WHY_MAX];
	size_t n = 0, i;
	int rc;

	if ((rc = get_vhost(r, g->resource, &vh, why)) != 0 ||
	    (rc = get_user(r, g->login, &u, &up, why)) != 0)
		goto out;
	for (i = 0; i < json_array_size(up) && n < RMQ_PERMS_MAX; i++)
		rows[n++] = json_array_get(up, i);
	access_evaluate(r, g, vh, u, rows, n, drift, why);
	if (*drift == TL_DRIFT_NONE && g->password != NULL && !g->cert_login) {
		if ((rc = login_as(g, ep, lw)) == TL_EAUTH || rc == TL_EDRIVER) {
			*drift = TL_DRIFT_CREDENTIAL;
			snprintf(why, TL_WHY_MAX, "%s", lw);
			rc = 0;
		} else if (rc != 0)
			snprintf(why, TL_WHY_MAX, "%s", lw);
		else
			tl_drv_why_add(why, "the user logged in");
	}
out:
	json_decref(vh);
	json_decref(u);
	json_decref(up);
	return rc;
}

/*
 * revoke (drop 0 or 1: the same, a user is not disabled short of being
 * deleted) deletes every version of the login; retire_credential (drop
 * -1) g->login alone.  Connections closed; the vhost is the owner's.
 */
static int
access_revoke(struct tl_drv_rmq *r, const struct tl_drv_grant *g, int drop,
    char *why)
{
	json_t *us = NULL, *u;
	const char *name;
	unsigned closed, users = 0, conns = 0;
	size_t i;
	int rc;

	if (drop >= 0 && (rc = get_json(r, "/users", 0, &us, "list the users",
	    why)) != 0)
		return rc;
	json_array_foreach(us, i, u) {
		name = json_string_value(json_object_get(u, "name"));
		/* Its other versions carry the mark; g->login goes below. */
		if (name == NULL || strcmp(name, g->login) == 0 ||
		    !access_login(g, name) || !reader_user(u))
			continue;
		if ((rc = del(r, "/users", name, NULL, "delete the user",
		    why)) != 0 ||
		    (rc = close_connections(r, name, &closed, why)) != 0)
			goto out;
		users++;
		conns += closed;
	}
	if ((rc = drop_user(r, g, g->login, &closed, why)) != 0)
		goto out;
	users++;
	conns += closed;
	tl_drv_why(why, 0, "%u user(s) with access to vhost \"%s\" deleted, "
	    "%u connection(s) closed", users, g->resource, conns);
out:
	json_decref(us);
	return rc;
}

const struct tl_drv_ops tl_drv_rabbitmq = {
	.decl = &tl_drv_rabbitmq_decl,
	.open = rmq_open,
	.close = rmq_close,
	.create = rmq_create,
	.check = rmq_check,
	.check_bulk = rmq_check_bulk,
	.set_password = rmq_set_password,
	.fix_privileges = rmq_fix_privileges,
	.revoke = rmq_revoke,
	.size = rmq_size,
	.add_credential = rmq_add_credential,
	.retire_credential = rmq_retire_credential,
	.sessions = rmq_sessions,
	.loss = rmq_loss,
	.fence = rmq_fence,
};
