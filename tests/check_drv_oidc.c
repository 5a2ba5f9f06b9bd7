/*
 * check_drv_oidc.c - the oidc driver against a real OpenID Connect
 * provider (oidc-provider 8, tests/harness/oidc.sh).
 *
 * This suite starts its own provider under $TALLY_TMP on a free port,
 * once per run (an unchecked fixture: a provider that cannot start
 * fails every case), and stops it at exit.  The driver is reached only
 * through its ops table; what happens out of band (a consumer's token
 * request, another party's registration, an admin's edit of a client)
 * is done here with libcurl, or by editing the provider's store while
 * it is stopped (the fixture has no admin API).
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "drivers/util.h"
#include "lib/tl_test.h"

extern const struct tl_drv_ops tl_drv_oidc;

static const struct tl_drv_ops *drv = &tl_drv_oidc;
static char	 s_issuer[128], s_port[16], s_iat[256];
static char	*s_dir;
static int	 s_tried, s_ok;
static char	 s_err[8192];
static pid_t	 s_parent;

/* --- the provider ---------------------------------------------------- */

static int
run_harness(const char *cmd, const char *arg)
{
	char path[4096];
	const char *src = getenv("TALLY_SRC");
	pid_t pid;
	int st;

	snprintf(path, sizeof(path), "%s/tests/harness/oidc.sh",
	    src != NULL && *src != '\0' ? src : ".");
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		execlp("sh", "sh", path, cmd, s_dir, arg, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
free_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd, port = -1;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static void
server_up(void)
{
	char path[4200];
	FILE *f = NULL;
	int pn;

	if (!s_tried) {
		s_tried = 1;
		s_dir = tl_test_tmpdir("oidcdrv");
		if ((pn = free_port()) <= 0)
			snprintf(s_err, sizeof(s_err), "no free port");
		else {
			snprintf(s_port, sizeof(s_port), "%d", pn);
			snprintf(s_issuer, sizeof(s_issuer),
			    "http://127.0.0.1:%d", pn);
			snprintf(path, sizeof(path), "%s/iat", s_dir);
			if (run_harness("start", s_port) != 0)
				snprintf(s_err, sizeof(s_err), "oidc.sh start "
				    "%s %s failed", s_dir, s_port);
			else if ((f = fopen(path, "r")) == NULL ||
			    fgets(s_iat, sizeof(s_iat), f) == NULL)
				snprintf(s_err, sizeof(s_err), "no %s", path);
			else
				s_ok = 1;
			if (f != NULL)
				fclose(f);
			s_iat[strcspn(s_iat, "\r\n")] = '\0';
		}
	}
	if (!s_ok)
		ck_abort_msg("no OIDC provider to test against: %s", s_err);
}

static void
server_stop(void)
{
	if (s_dir == NULL || getpid() != s_parent)
		return;
	if (run_harness("stop", NULL) != 0)
		fprintf(stderr, "check_drv_oidc: oidc.sh stop %s failed\n",
		    s_dir);
	tl_test_tmpdir_done(s_dir);
	s_dir = NULL;
}

/* Stops the provider (its store kept), runs edit on the store, starts. */
static void
server_restart(void (*edit)(json_t *store, const char *id), const char *id)
{
	char path[4200];
	json_t *st;

	ck_assert_int_eq(run_harness("stop", "keep"), 0);
	if (edit != NULL) {
		snprintf(path, sizeof(path), "%s/store.json", s_dir);
		st = json_load_file(path, 0, NULL);
		ck_assert_ptr_nonnull(st);
		edit(st, id);
		ck_assert_int_eq(json_dump_file(st, path, JSON_COMPACT), 0);
		json_decref(st);
	}
	ck_assert_int_eq(run_harness("start", s_port), 0);
}

/* --- helpers --------------------------------------------------------- */

#define ck_rc(rc, want, why) do {					\
	int rc_ = (rc), want_ = (want);					\
	ck_assert_msg(rc_ == want_, "%s:%d: rc %d (%s), wanted %d (%s); "\
	    "why: %s", __FILE__, __LINE__, rc_, tl_strerror(rc_), want_,	\
	    tl_strerror(want_), (why));					\
} while (0)

static void *
session(void)
{
	const char *sv[] = { "issuer", s_issuer, NULL, NULL };
	struct tl_drv_admin a = { .password = s_iat, .settings = sv };
	char why[TL_WHY_MAX] = "";
	void *h = NULL;

	ck_rc(drv->open(&a, &h, why), 0, why);
	ck_assert_ptr_nonnull(h);
	return h;
}

/* One grant's credential version, as the reactor would hold it. */
struct ver {
	char	grant[200];
	char	login[TL_DRV_NAME_MAX];
	char	handle[TL_DRV_HANDLE_MAX];
	char	out[TL_DRV_HANDLE_MAX];
	struct tl_drv_grant g;
};

static void
ver_init(struct ver *v, const char *grant, uint64_t version)
{
	struct tl_drv_name_in in = { .grant = grant, .resource = "api",
		.node = "", .recorded = "", .version = version,
		.scheme = TL_DRV_NAMING };
	struct tl_drv_names n;
	char why[TL_WHY_MAX] = "";

	memset(v, 0, sizeof(*v));
	snprintf(v->grant, sizeof(v->grant), "%s", grant);
	ck_rc(drv->decl->names(&in, &n, why), 0, why);
	snprintf(v->login, sizeof(v->login), "%s", n.login);
	v->g.resource = v->login;
	v->g.owner = "";
	v->g.login = v->login;
	v->g.grant = v->grant;
	v->g.handle = v->handle;
	v->g.handle_out = v->out;
}

/* What the reactor does with handle_out after a call: record it. */
static int
ver_record(struct ver *v)
{
	if (v->out[0] == '\0')
		return 0;
	memcpy(v->handle, v->out, sizeof(v->handle));
	v->out[0] = '\0';
	return 1;
}

static void
field(const struct ver *v, const char *name, char *out, size_t cap)
{
	const char *sv[] = { "issuer", s_issuer, NULL, NULL };
	struct tl_drv_endpoint ep = { .host = "", .port = "", .settings = sv };

	ck_rc(drv->decl->compose(name, &ep, &v->g, out, cap), 0, name);
}

static size_t
sink(char *d, size_t s, size_t n, void *arg)
{
	json_t **j = arg;
	json_error_t e;

	(void)d;
	if (*j == NULL)
		*j = json_loadb(d, s * n, 0, &e);
	return s * n;
}

/* HTTP as a third party: the status, the body as JSON in *body. */
static long
http(const char *method, const char *url, const char *bearer,
    const char *user, const char *pass, const char *form, const char *json,
    json_t **body)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdr = NULL;
	char line[700];
	json_t *dummy = NULL;
	long st = 0;

	ck_assert_ptr_nonnull(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body != NULL ? body : &dummy);
	if (bearer != NULL) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s",
		    bearer);
		hdr = curl_slist_append(hdr, line);
	}
	if (json != NULL) {
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	} else if (form != NULL)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, form);
	if (user != NULL) {
		curl_easy_setopt(c, CURLOPT_USERNAME, user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, pass);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(c);
	json_decref(dummy);
	return st;
}

/* Whether the consumer gets a token with v's delivered values. */
static int
consumer_token(const struct ver *v)
{
	char id[TL_DRV_VALUE_MAX + 1], sec[TL_DRV_VALUE_MAX + 1],
	    tep[TL_DRV_VALUE_MAX + 1];
	json_t *b = NULL;
	long st;
	int ok;

	field(v, "client-id", id, sizeof(id));
	field(v, "client-secret", sec, sizeof(sec));
	field(v, "token-endpoint", tep, sizeof(tep));
	st = http("POST", tep, NULL, id, sec, "grant_type=client_credentials",
	    NULL, &b);
	ok = st == 200 && json_string_value(json_object_get(b,
	    "access_token")) != NULL;
	json_decref(b);
	return ok;
}

static const char *
hget(const struct ver *v, const char *key, char *out, size_t cap)
{
	json_t *j = json_loads(v->handle, 0, NULL);

	ck_assert_ptr_nonnull(j);
	snprintf(out, cap, "%s", json_string_value(json_object_get(j, key)));
	json_decref(j);
	return out;
}

/* The registration as the provider has it now (RFC 7592 GET). */
static long
registration(const struct ver *v, json_t **body)
{
	char uri[600], rat[600];

	return http("GET", hget(v, "registration_client_uri", uri,
	    sizeof(uri)), hget(v, "registration_access_token", rat,
	    sizeof(rat)), NULL, NULL, NULL, NULL, body);
}

static void
ck_create(void *h, struct ver *v)
{
	char why[TL_WHY_MAX] = "";

	ck_rc(drv->create(h, &v->g, why), 0, why);
	ver_record(v);
	ck_assert_msg(v->handle[0] != '\0', "no handle after create: %s", why);
}

static enum tl_drv_drift
ck_check(void *h, struct ver *v, char *why)
{
	enum tl_drv_drift d = TL_DRIFT_NONE;

	why[0] = '\0';
	ck_rc(drv->check(h, &v->g, NULL, &d, why), 0, why);
	ck_assert_msg(why[0] != '\0', "check gave no reason");
	return d;
}

/* --- cases ----------------------------------------------------------- */

START_TEST(test_create_twice)
{
	void *h = session();
	struct ver v;
	json_t *r = NULL;
	char why[TL_WHY_MAX], id1[300], id2[300];

	ver_init(&v, "shop/api", 1);
	ck_create(h, &v);
	hget(&v, "client_id", id1, sizeof(id1));
	ck_assert_int_eq(registration(&v, &r), 200);
	ck_assert_str_eq(json_string_value(json_object_get(r, "software_id")),
	    "shop/api");
	ck_assert_str_eq(json_string_value(json_object_get(r, "client_name")),
	    v.login);
	json_decref(r);
	/* Again with what was recorded: the same client, nothing new. */
	why[0] = '\0';
	ck_rc(drv->create(h, &v.g, why), 0, why);
	ck_assert_str_eq(v.out, "");
	ck_assert_int_eq(ver_record(&v), 0);
	hget(&v, "client_id", id2, sizeof(id2));
	ck_assert_str_eq(id1, id2);
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_NONE);
	ck_assert(consumer_token(&v));
	field(&v, "issuer", id2, sizeof(id2));
	ck_assert_str_eq(id2, s_issuer);
	/* No secret in a reason. */
	ck_assert_ptr_null(strstr(why, hget(&v, "client_secret", id2,
	    sizeof(id2))));
	/* Without a place to record a handle the driver refuses. */
	v.g.handle_out = NULL;
	ck_rc(drv->create(h, &v.g, why), TL_EINVAL, why);
	drv->close(h);
}
END_TEST

START_TEST(test_half_done)
{
	void *h = session();
	struct ver v;
	char why[TL_WHY_MAX], id1[300], id2[300], uri[600], rat[600];

	/* The client was deleted behind tally: check flags, create remakes. */
	ver_init(&v, "shop/half", 1);
	ck_create(h, &v);
	hget(&v, "client_id", id1, sizeof(id1));
	ck_assert_int_eq(http("DELETE", hget(&v, "registration_client_uri",
	    uri, sizeof(uri)), hget(&v, "registration_access_token", rat,
	    sizeof(rat)), NULL, NULL, NULL, NULL, NULL), 204);
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_MISSING);
	ck_assert_ptr_nonnull(strstr(why, "gone"));
	ck_rc(drv->fix_privileges(h, &v.g, why), TL_EDRIVER, why);
	ck_assert_int_eq(ver_record(&v), 0);
	ck_rc(drv->create(h, &v.g, why), 0, why);
	ck_assert_int_eq(ver_record(&v), 1);
	hget(&v, "client_id", id2, sizeof(id2));
	ck_assert_str_ne(id1, id2);
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_NONE);
	/* Revoked twice: the second finds it gone. */
	ck_rc(drv->revoke(h, &v.g, 0, why), 0, why);
	ck_assert(!consumer_token(&v));
	ck_rc(drv->revoke(h, &v.g, 0, why), 0, why);
	drv->close(h);
}
END_TEST

START_TEST(test_foreign_refused)
{
	void *h = session();
	struct ver v;
	json_t *r = NULL;
	char why[TL_WHY_MAX], reg[200];
	enum tl_drv_drift d;

	/* A client registered by someone else, for another software. */
	snprintf(reg, sizeof(reg), "%s/reg", s_issuer);
	ck_assert_int_eq(http("POST", reg, s_iat, NULL, NULL, NULL,
	    "{\"client_name\":\"theirs\",\"software_id\":\"other/app\","
	    "\"grant_types\":[\"client_credentials\"],\"response_types\":[],"
	    "\"token_endpoint_auth_method\":\"client_secret_basic\"}", &r),
	    201);
	ver_init(&v, "shop/foreign", 1);
	json_object_set_new(r, "token_endpoint", json_sprintf("%s/token",
	    s_issuer));
	{
		char *s = json_dumps(r, JSON_COMPACT);

		snprintf(v.handle, sizeof(v.handle), "%s", s);
		free(s);
	}
	json_decref(r);
	ck_rc(drv->create(h, &v.g, why), TL_EINVAL, why);
	ck_assert_str_eq(v.out, "");
	ck_rc(drv->revoke(h, &v.g, 1, why), TL_EINVAL, why);
	d = ck_check(h, &v, why);
	ck_assert_int_eq(d, TL_DRIFT_MISSING);
	/* Still theirs and still there. */
	ck_assert_int_eq(registration(&v, NULL), 200);
	ck_assert(consumer_token(&v));
	drv->close(h);
}
END_TEST

START_TEST(test_hostile_names)
{
	void *h = session();
	struct ver v;
	json_t *r = NULL;
	char why[TL_WHY_MAX];
	const char *hostile = "m\"o\\d/{\"x\":1}'; DROP\n@node";
	struct tl_drv_name_in in = { .grant = "a/b", .resource = "x\"y",
		.node = "", .recorded = "", .version = 1, .scheme = 1 };
	struct tl_drv_names n;

	ver_init(&v, hostile, 1);
	ck_create(h, &v);
	ck_assert_int_eq(registration(&v, &r), 200);
	ck_assert_str_eq(json_string_value(json_object_get(r, "software_id")),
	    hostile);
	json_decref(r);
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_NONE);
	ck_rc(drv->revoke(h, &v.g, 1, why), 0, why);
	/* A grant id that is not UTF-8 is refused, nothing registered. */
	ver_init(&v, "bad\xff/id", 1);
	ck_rc(drv->create(h, &v.g, why), TL_EINVAL, why);
	ck_assert_str_eq(v.out, "");
	/* A name outside [a-z0-9_-] is refused by names and by create. */
	(void)drv->decl->names(&in, &n, why);
	v.g.login = "x\"y";
	ck_rc(drv->create(h, &v.g, why), TL_EINVAL, why);
	drv->close(h);
}
END_TEST

/* Client id's record in the provider's store (oidc-server.js). */
static json_t *
client_rec(json_t *store, const char *id)
{
	char key[300];
	json_t *c;

	snprintf(key, sizeof(key), "Client:%s", id);
	c = json_object_get(json_object_get(store, key), "p");
	ck_assert_ptr_nonnull(c);
	return c;
}

static void
rename_client(json_t *store, const char *id)
{
	json_t *c = client_rec(store, id);

	json_object_set_new(c, "client_name", json_string("edited-by-admin"));
	json_object_set_new(c, "token_endpoint_auth_method",
	    json_string("client_secret_post"));
}

START_TEST(test_drift_and_rat_rotation)
{
	void *h;
	struct ver v;
	json_t *r = NULL;
	char why[TL_WHY_MAX], id[300], old[TL_DRV_HANDLE_MAX];

	h = session();
	ver_init(&v, "shop/drift", 1);
	ck_create(h, &v);
	hget(&v, "client_id", id, sizeof(id));
	drv->close(h);
	/* An admin edits the client at the provider. */
	server_restart(rename_client, id);
	h = session();
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_PRIVILEGES);
	ck_assert_ptr_nonnull(strstr(why, "client_name"));
	ck_assert_ptr_nonnull(strstr(why, "token_endpoint_auth_method"));
	/* The repair PUTs the record: a new RAT, recorded at once. */
	memcpy(old, v.handle, sizeof(old));
	ck_rc(drv->fix_privileges(h, &v.g, why), 0, why);
	ck_assert_int_eq(ver_record(&v), 1);
	ck_assert_str_ne(old, v.handle);
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_NONE);
	ck_assert_int_eq(registration(&v, &r), 200);
	ck_assert_str_eq(json_string_value(json_object_get(r, "client_name")),
	    v.login);
	json_decref(r);
	drv->close(h);
	/* The new RAT survives a restart of the provider. */
	server_restart(NULL, NULL);
	h = session();
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_NONE);
	/* The old handle (a RAT not recorded) is a visible drift. */
	memcpy(v.handle, old, sizeof(old));
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_CREDENTIAL);
	ck_assert_ptr_nonnull(strstr(why, "registration access token"));
	ck_assert_ptr_nonnull(strstr(why, "admin"));
	ck_rc(drv->create(h, &v.g, why), TL_EDRIVER, why);
	ck_assert_str_eq(v.out, "");
	ck_assert(consumer_token(&v));	/* the client itself still works */
	drv->close(h);
}
END_TEST

/*
 * A sign-in client (issue 28 item 2): the requirement's params are what
 * is registered; the secret is verified although client_credentials is
 * not among its grant types (unauthorized_client: authenticated), and a
 * wrong one is still told apart; an admin's edit of its redirect URIs,
 * and a change of the requirement, are privileges drifts that
 * fix_privileges repairs; client_secret_post is honoured at the token
 * endpoint.
 */
static void
redirect_edited(json_t *store, const char *id)
{
	json_object_set_new(client_rec(store, id), "redirect_uris",
	    json_pack("[s]", "https://evil.example/cb"));
}

static int
has_str(const json_t *a, const char *s)
{
	size_t i;

	for (i = 0; i < json_array_size(a); i++)
		if (strcmp(json_string_value(json_array_get(a, i)), s) == 0)
			return 1;
	return 0;
}

START_TEST(test_signin_client)
{
	const char *pv[] = { "grant-types", "authorization_code\nrefresh_token",
		"redirect-uris", "https://app.example/cb\n"
		"http://127.0.0.1:8080/cb", "post-logout-redirect-uris",
		"https://app.example/bye", "token-endpoint-auth-method",
		"client_secret_post", NULL };
	const char *pv2[] = { "grant-types", "authorization_code\nrefresh_token",
		"redirect-uris", "https://app.example/cb\n"
		"https://app.example/cb2", "token-endpoint-auth-method",
		"client_secret_post", NULL };
	char why[TL_WHY_MAX], id[300], sec[300];
	json_t *r = NULL, *j;
	struct ver v;
	void *h;

	ck_rc(tl_drv_params_check(drv->decl, pv, why), 0, why);
	h = session();
	ver_init(&v, "web/login", 1);
	v.g.params = pv;
	ck_create(h, &v);
	ck_assert_int_eq(registration(&v, &r), 200);
	ck_assert(has_str(json_object_get(r, "grant_types"),
	    "authorization_code"));
	ck_assert(has_str(json_object_get(r, "grant_types"), "refresh_token"));
	ck_assert(!has_str(json_object_get(r, "grant_types"),
	    "client_credentials"));
	ck_assert(has_str(json_object_get(r, "response_types"), "code"));
	ck_assert(has_str(json_object_get(r, "redirect_uris"),
	    "http://127.0.0.1:8080/cb"));
	ck_assert(has_str(json_object_get(r, "post_logout_redirect_uris"),
	    "https://app.example/bye"));
	ck_assert_str_eq(json_string_value(json_object_get(r,
	    "token_endpoint_auth_method")), "client_secret_post");
	json_decref(r);
	r = NULL;
	/* Verified without a token of its own: the secret is accepted. */
	ck_assert_msg(ck_check(h, &v, why) == TL_DRIFT_NONE, "%s", why);
	/* A wrong secret is still a credential drift. */
	hget(&v, "client_id", id, sizeof(id));
	hget(&v, "client_secret", sec, sizeof(sec));
	j = json_loads(v.handle, 0, NULL);
	json_object_set_new(j, "client_secret", json_string("not-it"));
	{
		char *d = json_dumps(j, JSON_COMPACT);

		snprintf(v.handle, sizeof(v.handle), "%s", d);
		free(d);
		ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_CREDENTIAL);
		json_object_set_new(j, "client_secret", json_string(sec));
		d = json_dumps(j, JSON_COMPACT);
		snprintf(v.handle, sizeof(v.handle), "%s", d);
		free(d);
	}
	json_decref(j);
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_NONE);
	drv->close(h);
	/* An admin points the client elsewhere: a drift, repaired. */
	server_restart(redirect_edited, id);
	h = session();
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_PRIVILEGES);
	ck_assert_ptr_nonnull(strstr(why, "redirect_uris"));
	ck_rc(drv->fix_privileges(h, &v.g, why), 0, why);
	ver_record(&v);
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_NONE);
	/* The requirement changes: the provider follows it. */
	v.g.params = pv2;
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_PRIVILEGES);
	ck_rc(drv->fix_privileges(h, &v.g, why), 0, why);
	ver_record(&v);
	ck_assert_int_eq(ck_check(h, &v, why), TL_DRIFT_NONE);
	ck_assert_int_eq(registration(&v, &r), 200);
	ck_assert(has_str(json_object_get(r, "redirect_uris"),
	    "https://app.example/cb2"));
	ck_assert(!has_str(json_object_get(r, "redirect_uris"),
	    "http://127.0.0.1:8080/cb"));
	ck_assert_int_eq(json_array_size(json_object_get(r,
	    "post_logout_redirect_uris")), 0);
	json_decref(r);
	ck_rc(drv->revoke(h, &v.g, 1, why), 0, why);
	drv->close(h);
}
END_TEST

/* What a requirement may declare of an oidc-client, and what not. */
START_TEST(test_signin_params_refused)
{
	static const char *const bad[][9] = {
		{ "grant-types", "authorization_code", NULL },
		{ "redirect-uris", "https://a.example/cb", NULL },
		{ "grant-types", "authorization_code", "redirect-uris",
		  "http://a.example/cb", NULL },
		{ "grant-types", "authorization_code", "redirect-uris",
		  "https://a.example/cb#frag", NULL },
		/* Loopback only in the userinfo: the host is another. */
		{ "grant-types", "authorization_code", "redirect-uris",
		  "http://127.0.0.1:80@evil.example/cb", NULL },
		{ "grant-types", "authorization_code", "redirect-uris",
		  "http://[::1]@evil.example/cb", NULL },
		{ "grant-types", "implicit", NULL },
		{ "grant-types", "refresh_token", NULL },
		{ "token-endpoint-auth-method", "none", NULL },
		{ "token-endpoint-auth-method", "client_secret_basic\n"
		  "client_secret_post", NULL },
		{ "scopes", "openid", NULL },
		{ "grant-types", "client_credentials\nclient_credentials\n"
		  "client_credentials\nclient_credentials\nclient_credentials"
		  "\nclient_credentials\nclient_credentials\n"
		  "client_credentials\nclient_credentials\nclient_credentials"
		  "\nclient_credentials\nclient_credentials\n"
		  "client_credentials\nclient_credentials\nclient_credentials"
		  "\nclient_credentials\nclient_credentials", NULL },
	};
	static const char *const good[] = { "grant-types",
		"authorization_code\nclient_credentials", "redirect-uris",
		"http://[::1]:9/cb\nhttp://localhost/cb\nhttps://x.example/",
		"response-types", "code", NULL };
	char why[TL_WHY_MAX];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(tl_drv_params_check(drv->decl, bad[i], why) ==
		    TL_EINVAL, "case %zu accepted", i);
		ck_assert_msg(why[0] != '\0', "case %zu: no reason", i);
	}
	ck_rc(tl_drv_params_check(drv->decl, good, why), 0, why);
	/* Another driver takes none. */
	ck_assert_int_eq(tl_drv_params_check(tl_drv_decl_find("postgres"),
	    good, why), TL_EINVAL);
}
END_TEST

START_TEST(test_rotation)
{
	void *h = session();
	struct ver v1, v2;
	char why[TL_WHY_MAX], id1[300], id2[300];

	ver_init(&v1, "shop/rot", 1);
	ver_init(&v2, "shop/rot", 2);
	ck_assert_str_ne(v1.login, v2.login);
	ck_create(h, &v1);
	ck_rc(drv->add_credential(h, &v2.g, why), 0, why);
	ck_assert_int_eq(ver_record(&v2), 1);
	hget(&v1, "client_id", id1, sizeof(id1));
	hget(&v2, "client_id", id2, sizeof(id2));
	ck_assert_str_ne(id1, id2);	/* the client-id changes */
	/* Between add and retire both get tokens. */
	ck_assert(consumer_token(&v1));
	ck_assert(consumer_token(&v2));
	ck_assert_int_eq(ck_check(h, &v2, why), TL_DRIFT_NONE);
	/* add again: the same new client. */
	ck_rc(drv->add_credential(h, &v2.g, why), 0, why);
	ck_assert_int_eq(ver_record(&v2), 0);
	ck_rc(drv->retire_credential(h, &v1.g, why), 0, why);
	ck_rc(drv->retire_credential(h, &v1.g, why), 0, why);
	ck_assert(!consumer_token(&v1));
	ck_assert(consumer_token(&v2));
	ck_assert_int_eq(ck_check(h, &v1, why), TL_DRIFT_MISSING);
	ck_assert_int_eq(ck_check(h, &v2, why), TL_DRIFT_NONE);
	ck_assert_ptr_nonnull(drv->decl->credential.rotation_note);
	ck_assert(drv->decl->credential.handle_model);
	/* What registration cannot limit is declared (issue 21 item 32). */
	ck_assert_ptr_nonnull(drv->decl->isolation_note);
	ck_assert_ptr_nonnull(strstr(drv->decl->isolation_note, "introspect"));
	drv->close(h);
}
END_TEST

START_TEST(test_open_refused)
{
	const char *remote[] = { "issuer", "http://example.org", NULL, NULL };
	const char *down[] = { "issuer", "http://127.0.0.1:1", NULL, NULL };
	struct tl_drv_admin a = { .password = s_iat, .settings = remote };
	struct tl_drv_admin bad = { .password = "not-the-token" };
	const char *sv[] = { "issuer", s_issuer, NULL, NULL };
	char why[TL_WHY_MAX] = "";
	struct ver v;
	void *h = NULL;

	ck_rc(drv->open(&a, &h, why), TL_EINVAL, why);
	ck_assert_ptr_nonnull(strstr(why, "loopback"));
	a.settings = down;
	ck_rc(drv->open(&a, &h, why), TL_EUNREACH, why);
	bad.settings = sv;
	ck_rc(drv->open(&bad, &h, why), 0, why);
	ver_init(&v, "shop/badiat", 1);
	ck_rc(drv->create(h, &v.g, why), TL_EAUTH, why);
	ck_assert_ptr_null(strstr(why, "not-the-token"));
	drv->close(h);
}
END_TEST

/* --- meshes and the fence ---------------------------------------- */

static void *
session_mesh(const char *mesh)
{
	const char *sv[] = { "issuer", s_issuer, NULL, NULL };
	struct tl_drv_admin a = { .password = s_iat, .settings = sv,
		.mesh = mesh };
	char why[TL_WHY_MAX] = "";
	void *h = NULL;

	ck_rc(drv->open(&a, &h, why), 0, why);
	ck_assert_ptr_nonnull(h);
	return h;
}

static void
rand_hex(char out[33])
{
	unsigned char b[16];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, 33, b, sizeof(b));
}

/* The registration's software_id (the mark) into out. */
static void
mark_of(const struct ver *v, char *out, size_t cap)
{
	json_t *r = NULL;

	ck_assert_int_eq(registration(v, &r), 200);
	snprintf(out, cap, "%s", json_string_value(json_object_get(r,
	    "software_id")));
	json_decref(r);
}

static void
ck_owned_by(const char *why, const char *mesh)
{
	char want[64];

	snprintf(want, sizeof(want), "owned by mesh %.12s", mesh);
	ck_assert_msg(strstr(why, want) != NULL && strstr(why,
	    "not this one") != NULL, "why does not name mesh %.12s: %s",
	    mesh, why);
}

START_TEST(test_meshes)
{
	char m1[33], m2[33], why[TL_WHY_MAX], mark[600], want[600];
	char id1[300], id2[300];
	struct ver a, b, c;
	enum tl_drv_drift d;
	void *ha, *hb, *h0;

	rand_hex(m1);
	rand_hex(m2);
	ha = session_mesh(m1);
	hb = session_mesh(m2);
	ver_init(&a, "shop/mesh", 1);
	ck_create(ha, &a);
	mark_of(&a, mark, sizeof(mark));
	snprintf(want, sizeof(want), "tally mesh %s grant shop/mesh", m1);
	ck_assert_str_eq(mark, want);
	/*
	 * Mesh 2 with the same grant, names and recorded client (a home
	 * copied from mesh 1's): every change refused, naming mesh 1.
	 */
	ver_init(&b, "shop/mesh", 1);
	memcpy(b.handle, a.handle, sizeof(b.handle));
	ck_rc(drv->create(hb, &b.g, why), TL_EREFUSED, why);
	ck_owned_by(why, m1);
	ck_assert_str_eq(b.out, "");
	d = ck_check(hb, &b, why);
	ck_assert_int_eq(d, TL_DRIFT_MISSING);
	ck_owned_by(why, m1);
	ck_rc(drv->fix_privileges(hb, &b.g, why), TL_EREFUSED, why);
	ck_rc(drv->set_password(hb, &b.g, why), TL_EREFUSED, why);
	ck_rc(drv->add_credential(hb, &b.g, why), TL_EREFUSED, why);
	ck_rc(drv->retire_credential(hb, &b.g, why), TL_EREFUSED, why);
	ck_owned_by(why, m1);
	ck_rc(drv->revoke(hb, &b.g, 1, why), TL_EREFUSED, why);
	ck_owned_by(why, m1);
	ck_assert_str_eq(b.out, "");
	/* Mesh 1's client as it was; its consumer gets tokens. */
	mark_of(&a, mark, sizeof(mark));
	ck_assert_str_eq(mark, want);
	ck_assert(consumer_token(&a));
	ck_assert_int_eq(ck_check(ha, &a, why), TL_DRIFT_NONE);
	/* adopt_mesh naming mesh 1: mesh 2 takes it, marked as its own. */
	b.g.adopt_mesh = m1;
	ck_rc(drv->create(hb, &b.g, why), 0, why);
	ck_assert_int_eq(ver_record(&b), 1);
	b.g.adopt_mesh = NULL;
	hget(&a, "client_id", id1, sizeof(id1));
	hget(&b, "client_id", id2, sizeof(id2));
	ck_assert_str_eq(id1, id2);
	mark_of(&b, mark, sizeof(mark));
	snprintf(want, sizeof(want), "tally mesh %s grant shop/mesh", m2);
	ck_assert_str_eq(mark, want);
	ck_assert_int_eq(ck_check(hb, &b, why), TL_DRIFT_NONE);
	ck_assert(consumer_token(&b));
	ck_rc(drv->revoke(hb, &b.g, 1, why), 0, why);
	/* Marked before marks named a mesh: ours, no drift, marked again. */
	h0 = session_mesh("");
	ver_init(&c, "shop/premesh", 1);
	ck_create(h0, &c);
	mark_of(&c, mark, sizeof(mark));
	ck_assert_str_eq(mark, "shop/premesh");
	ck_assert_int_eq(ck_check(ha, &c, why), TL_DRIFT_NONE);
	ck_rc(drv->create(ha, &c.g, why), 0, why);
	ck_assert_int_eq(ver_record(&c), 1);
	mark_of(&c, mark, sizeof(mark));
	snprintf(want, sizeof(want), "tally mesh %s grant shop/premesh", m1);
	ck_assert_str_eq(mark, want);
	ck_assert(consumer_token(&c));
	/* Now mesh 1's: the home without an id may not touch it. */
	ck_rc(drv->revoke(h0, &c.g, 1, why), TL_EREFUSED, why);
	ck_owned_by(why, m1);
	ck_rc(drv->revoke(ha, &c.g, 1, why), 0, why);
	drv->close(ha);
	drv->close(hb);
	drv->close(h0);
}
END_TEST

/* --- tally adopt ---------------------------------------------------- */

/* A client registered by hand (RFC 7591): its answer, 201 checked. */
static json_t *
hand_register(const char *meta)
{
	char reg[200];
	json_t *r = NULL;

	snprintf(reg, sizeof(reg), "%s/reg", s_issuer);
	ck_assert_int_eq(http("POST", reg, s_iat, NULL, NULL, NULL, meta, &r),
	    201);
	ck_assert_ptr_nonnull(r);
	return r;
}

static const char *
jstr(const json_t *j, const char *key)
{
	const char *v = json_string_value(json_object_get(j, key));

	ck_assert_msg(v != NULL, "no %s", key);
	return v;
}

/* The create tally adopt asks for: client id with the RAT rat. */
static void
ver_adopt(struct ver *v, const char *grant, const char *id, const char *rat)
{
	ver_init(v, grant, 1);
	v->g.resource = id;
	v->g.login = id;
	v->g.password = rat;
	v->g.adopting = 1;
	v->g.adopted = 1;
}

/* A client_credentials token for id with secret, sent in the form. */
static int
token_post(const char *id, const char *secret)
{
	char form[1200], tep[200];
	json_t *b = NULL;
	long st;
	int ok;

	snprintf(tep, sizeof(tep), "%s/token", s_issuer);
	snprintf(form, sizeof(form), "grant_type=client_credentials&"
	    "client_id=%s&client_secret=%s", id, secret);
	st = http("POST", tep, NULL, NULL, NULL, form, NULL, &b);
	ok = st == 200 && json_string_value(json_object_get(b,
	    "access_token")) != NULL;
	json_decref(b);
	return ok;
}

/* The registration of id, read with rat: the HTTP status, *body. */
static long
registration_of(const char *id, const char *rat, json_t **body)
{
	char uri[600];

	snprintf(uri, sizeof(uri), "%s/reg/%s", s_issuer, id);
	return http("GET", uri, rat, NULL, NULL, NULL, NULL, body);
}

#define OI_LEGACY	"{\"client_name\":\"legacy-app\",\"software_id\":" \
	"\"acme-legacy-1.0\",\"grant_types\":[\"client_credentials\"," \
	"\"authorization_code\"],\"response_types\":[\"code\"]," \
	"\"redirect_uris\":[\"https://legacy.example/cb\"]," \
	"\"token_endpoint_auth_method\":\"client_secret_post\"}"

/*
 * tally adopt of a client registered by hand: taken over with its
 * registration access token, marked as the grant's and kept as it was
 * (redirect URIs, grant types, client_secret_post, its secret), with a
 * handle of the new RAT; resumed, checked and repaired without becoming
 * what the requirement declares; rotated to a client of tally's and
 * deleted by the retirement of the adopted version.
 */
START_TEST(test_adopt)
{
	void *h = session();
	struct ver v, v2;
	json_t *r, *c = NULL;
	char why[TL_WHY_MAX], id[300], sec[300], rat[600], got[600];
	const char *ru;

	r = hand_register(OI_LEGACY);
	snprintf(id, sizeof(id), "%s", jstr(r, "client_id"));
	snprintf(sec, sizeof(sec), "%s", jstr(r, "client_secret"));
	snprintf(rat, sizeof(rat), "%s", jstr(r, "registration_access_token"));
	json_decref(r);
	ck_assert(token_post(id, sec));
	ver_adopt(&v, "shop/adopt", id, rat);
	why[0] = '\0';
	ck_rc(drv->create(h, &v.g, why), 0, why);
	ck_assert_msg(strstr(why, "adopted") != NULL && strstr(why, id) !=
	    NULL, "why: %s", why);
	ck_assert_ptr_null(strstr(why, sec));
	ck_assert_int_eq(ver_record(&v), 1);
	ck_assert_str_eq(hget(&v, "client_id", got, sizeof(got)), id);
	ck_assert_str_eq(hget(&v, "client_secret", got, sizeof(got)), sec);
	ck_assert_str_eq(hget(&v, "adopted_auth_method", got, sizeof(got)),
	    "client_secret_post");
	/* The PUT rotated the RAT: the one given is dead, the new recorded. */
	ck_assert_str_ne(hget(&v, "registration_access_token", got,
	    sizeof(got)), rat);
	ck_assert_int_eq(registration_of(id, rat, NULL), 401);
	ck_assert_int_eq(registration(&v, &c), 200);
	ck_assert_str_eq(jstr(c, "software_id"), "shop/adopt");
	ck_assert_str_eq(jstr(c, "client_name"), "legacy-app");
	ck_assert_str_eq(jstr(c, "token_endpoint_auth_method"),
	    "client_secret_post");
	ck_assert(has_str(json_object_get(c, "grant_types"),
	    "authorization_code"));
	ru = json_string_value(json_array_get(json_object_get(c,
	    "redirect_uris"), 0));
	ck_assert_str_eq(ru != NULL ? ru : "", "https://legacy.example/cb");
	json_decref(c);
	c = NULL;
	ck_assert(token_post(id, sec));
	/* Resumed with the handle recorded: nothing changes. */
	why[0] = '\0';
	ck_rc(drv->create(h, &v.g, why), 0, why);
	ck_assert_str_eq(v.out, "");
	ck_assert_ptr_nonnull(strstr(why, "adopted already"));
	/* Checked and repaired as it is, not as the requirement declares. */
	v.g.adopting = 0;
	v.g.password = "";
	ck_assert_msg(ck_check(h, &v, why) == TL_DRIFT_NONE, "%s", why);
	ck_assert_ptr_nonnull(strstr(why, "tally adopt"));
	ck_rc(drv->fix_privileges(h, &v.g, why), 0, why);
	ck_rc(drv->set_password(h, &v.g, why), 0, why);
	ck_assert_str_eq(v.out, "");
	ck_assert_int_eq(registration(&v, &c), 200);
	ck_assert_str_eq(jstr(c, "client_name"), "legacy-app");
	json_decref(c);
	c = NULL;
	/* The rotation: tally's own client, then the adopted one deleted. */
	ver_init(&v2, "shop/adopt", 2);
	ck_rc(drv->add_credential(h, &v2.g, why), 0, why);
	ck_assert_int_eq(ver_record(&v2), 1);
	ck_assert_str_ne(hget(&v2, "client_id", got, sizeof(got)), id);
	ck_assert(consumer_token(&v2));
	ck_assert(token_post(id, sec));
	v.g.adopting = 1;
	ck_rc(drv->retire_credential(h, &v.g, why), 0, why);
	ck_assert_ptr_nonnull(strstr(why, "deleted"));
	ck_assert(!token_post(id, sec));
	ck_rc(drv->retire_credential(h, &v.g, why), 0, why);
	ck_assert(consumer_token(&v2));
	ck_assert_int_eq(ck_check(h, &v2, why), TL_DRIFT_NONE);
	ck_rc(drv->revoke(h, &v2.g, 1, why), 0, why);
	drv->close(h);
}
END_TEST

/* Refused: create leaves the client as it was and records nothing. */
static void
ck_adopt_refused(void *h, const char *grant, const char *id,
    const char *rat, int want, const char *says)
{
	struct ver v;
	char why[TL_WHY_MAX] = "";

	ver_adopt(&v, grant, id, rat);
	ck_rc(drv->create(h, &v.g, why), want, why);
	ck_assert_msg(strstr(why, says) != NULL, "why does not say '%s': %s",
	    says, why);
	ck_assert_str_eq(v.out, "");
}

/* Another party's client, marked by software_id sid: its id and RAT. */
static void
marked_client(const char *sid, char *id, char *rat)
{
	json_t *r;
	char meta[600];

	snprintf(meta, sizeof(meta), "{\"client_name\":\"x\","
	    "\"software_id\":\"%s\",\"grant_types\":[\"client_credentials\"],"
	    "\"response_types\":[]}", sid);
	r = hand_register(meta);
	snprintf(id, 300, "%s", jstr(r, "client_id"));
	snprintf(rat, 600, "%s", jstr(r, "registration_access_token"));
	json_decref(r);
}

/*
 * What tally adopt cannot take: a client id that does not exist, a
 * wrong registration access token, another grant's client (this mesh's,
 * another mesh's, an unnamed mark), another mesh's client of the same
 * grant, a public client; nothing changes.
 */
START_TEST(test_adopt_refused)
{
	char m1[33], m2[33], sid[200], id[300], rat[600], sec[300];
	struct ver t;
	json_t *r, *c = NULL;
	void *h1, *h2;

	rand_hex(m1);
	rand_hex(m2);
	h1 = session_mesh(m1);
	h2 = session_mesh(m2);
	r = hand_register(OI_LEGACY);
	snprintf(id, sizeof(id), "%s", jstr(r, "client_id"));
	snprintf(sec, sizeof(sec), "%s", jstr(r, "client_secret"));
	snprintf(rat, sizeof(rat), "%s", jstr(r, "registration_access_token"));
	json_decref(r);
	/* A random token: the one given stays valid (a wrong client id
	 * with a right token would revoke it: RFC 7592 section 2.1). */
	ck_adopt_refused(h1, "shop/ghost", "no-such-client", "not-a-token",
	    TL_EDRIVER, "nothing to adopt");
	ck_adopt_refused(h1, "shop/wrongrat", id, "not-the-token",
	    TL_EDRIVER, "refuses the registration access token");
	ck_assert_int_eq(registration_of(id, rat, &c), 200);
	ck_assert_str_eq(jstr(c, "software_id"), "acme-legacy-1.0");
	json_decref(c);
	ck_assert(token_post(id, sec));
	/* Tally's, for another grant of this mesh. */
	ver_init(&t, "shop/theirs", 1);
	ck_create(h1, &t);
	hget(&t, "client_id", id, sizeof(id));
	hget(&t, "registration_access_token", rat, sizeof(rat));
	ck_adopt_refused(h1, "shop/mine", id, rat, TL_EDRIVER,
	    "made by tally for grant shop/theirs");
	/* ... of another mesh: for another grant, and for this one. */
	ck_adopt_refused(h2, "shop/mine", id, rat, TL_EREFUSED,
	    "made by tally for grant shop/theirs of mesh");
	ck_adopt_refused(h2, "shop/theirs", id, rat, TL_EREFUSED,
	    "owned by mesh");
	ck_assert_int_eq(registration(&t, NULL), 200);
	ck_assert(consumer_token(&t));
	/* A mark from before marks named a mesh. */
	marked_client("shop/old", id, rat);
	ck_adopt_refused(h1, "shop/mine", id, rat, TL_EDRIVER,
	    "made by tally for grant shop/old");
	snprintf(sid, sizeof(sid), "tally mesh %s grant shop/x", m2);
	marked_client(sid, id, rat);
	ck_adopt_refused(h1, "shop/mine", id, rat, TL_EREFUSED, "of mesh");
	/* A public client has no secret tally could hold. */
	r = hand_register("{\"client_name\":\"spa\",\"grant_types\":"
	    "[\"authorization_code\"],\"response_types\":[\"code\"],"
	    "\"redirect_uris\":[\"https://spa.example/cb\"],"
	    "\"token_endpoint_auth_method\":\"none\"}");
	snprintf(id, sizeof(id), "%s", jstr(r, "client_id"));
	snprintf(rat, sizeof(rat), "%s", jstr(r, "registration_access_token"));
	json_decref(r);
	ck_adopt_refused(h1, "shop/spa", id, rat, TL_EDRIVER,
	    "client with a secret");
	ck_assert_int_eq(registration_of(id, rat, NULL), 200);
	drv->close(h1);
	drv->close(h2);
}
END_TEST

/*
 * Nothing tally stores on the identity provider would stop a second
 * control plane: the declaration says the epoch is checked by the
 * control plane before each call, within the window it states.
 */
START_TEST(test_fencing_declared)
{
	ck_assert_ptr_nonnull(drv->decl->fencing);
	ck_assert_int_eq(drv->decl->fencing->kind, TL_DRV_FENCE_EPOCH_CHECK);
	ck_assert_ptr_null(drv->fence);
	ck_assert_ptr_nonnull(drv->decl->fencing->window);
	ck_assert_msg(strstr(drv->decl->fencing->window, "10 s") != NULL,
	    "the window does not state TL_DRV_EPOCH_CHECK_S: %s",
	    drv->decl->fencing->window);
	ck_assert_int_eq(TL_DRV_EPOCH_CHECK_S, 10);
}
END_TEST

/*
 * The field ca, without a provider: the token as it is, "" without one
 * (the system's CAs then verify the issuer); the issuer as given.
 */
START_TEST(test_consumer_tls_fields)
{
	static const char *const sv[] = { "issuer",
	    "https://idp.example:8443/realm", "tls", "verify", NULL };
	struct tl_drv_endpoint e = { "idp.example", "8443", sv, NULL, NULL };
	char out[256];

	ck_assert(tl_drv_has_field(drv->decl, "ca"));
	ck_assert(!tl_drv_field_secret(drv->decl, "ca"));
	ck_assert_int_eq(drv->decl->compose("ca", &e, NULL, out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "");
	e.ca_path = "@CA@";
	ck_assert_int_eq(drv->decl->compose("ca", &e, NULL, out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "@CA@");
	ck_assert_int_eq(drv->decl->compose("issuer", &e, NULL, out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "https://idp.example:8443/realm");
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("drv_oidc");
	TCase *tc = tcase_create("oidc");

	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create_twice);
	tcase_add_test(tc, test_signin_client);
	tcase_add_test(tc, test_signin_params_refused);
	tcase_add_test(tc, test_half_done);
	tcase_add_test(tc, test_foreign_refused);
	tcase_add_test(tc, test_hostile_names);
	tcase_add_test(tc, test_drift_and_rat_rotation);
	tcase_add_test(tc, test_rotation);
	tcase_add_test(tc, test_open_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("mesh");
	tcase_add_unchecked_fixture(tc, server_up, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_meshes);
	tcase_add_test(tc, test_adopt);
	tcase_add_test(tc, test_adopt_refused);
	tcase_add_test(tc, test_fencing_declared);
	suite_add_tcase(s, tc);
	tc = tcase_create("consumer_tls");
	tcase_add_test(tc, test_consumer_tls_fields);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	if (sodium_init() < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		return 1;
	s_parent = getpid();
	sr = srunner_create(suite());
	/* One process: the restarts edit the provider in order. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	server_stop();
	sodium_memzero(s_iat, sizeof(s_iat));
	curl_global_cleanup();
	return failed == 0 ? 0 : 1;
}
