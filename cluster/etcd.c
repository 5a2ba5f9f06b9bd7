/*
 * etcd.c - a small client of etcd's v3 JSON gateway (etcd.h).
 *
 * Every call is one POST of a JSON body to /v3/..., through call():
 * the endpoint loop, the classification of failures (did a member
 * answer? could the request have been delivered?) and the gateway's
 * error bodies ({"error":..,"code":N,"message":..}, or inside a stream
 * {"error":{"grpc_code":N,"message":..}}) are there and only there.
 *
 * The request text, the answer and base64 scratch are wiped before they
 * are freed or reused: values may carry what a secret is derived from.
 * jansson's own copies of the strings are not (it frees them unwiped,
 * as everywhere else in tally that uses it).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "core/error.h"
#include "etcd.h"

#define ETCD_TIMEOUT_MS	5000
#define ETCD_ERR	1024		/* lasterr's buffer */
#define ETCD_MSG	200		/* the most kept of a member's words */
#define ETCD_URL	1024		/* an endpoint and a path */
/* The largest answer taken: a range of everything must fail, not swap. */
#define ETCD_ANSWER_MAX	((size_t)256 << 20)

/* A watch in progress: what the stream said so far (watch_line). */
struct watch {
	size_t		 off;		/* buf is parsed up to here */
	int		 created;	/* the member confirmed the watch */
	int		 done;		/* rc and rev are the outcome */
	int		 rc;
	int64_t		 rev;
	char		 msg[ETCD_MSG];
};

struct tl_etcd {
	CURL		*curl;
	struct curl_slist *hdrs;
	char		**ep;		/* endpoints, no trailing '/' */
	size_t		 nep;
	size_t		 cur;		/* tried first: the last to answer */
	int		 answered;	/* ep[cur] answered once */
	long		 timeout_ms;
	char		*buf;		/* the answer, NUL-terminated */
	size_t		 len, cap;
	struct watch	*w;		/* during tl_etcd_watch only */
	int		 wrc;		/* why on_data refused the answer */
	char		 cerr[CURL_ERROR_SIZE];
	char		 err[ETCD_ERR];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_rc = -1;

/* curl_global_init is not safe to run twice at once. */
static void
curl_start(void)
{
	curl_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static char *
dup_opt(const char *s, int *bad)
{
	char *d;

	if (s == NULL || *s == '\0')
		return NULL;
	if ((d = strdup(s)) == NULL)
		*bad = 1;
	return d;
}

/* Splits "a,b,c" into e->ep: http(s) URLs, trailing '/' dropped. */
static int
parse_endpoints(struct tl_etcd *e, const char *list)
{
	const char *p = list, *q, *next;
	size_t n, i;

	for (n = 1, q = list; *q != '\0'; q++)
		n += *q == ',';
	if ((e->ep = calloc(n, sizeof(*e->ep))) == NULL)
		return ENOMEM;
	for (i = 0; i < n; i++) {
		while (*p == ' ')
			p++;
		if ((next = strchr(p, ',')) == NULL)
			next = p + strlen(p);
		q = next;
		while (q > p && (q[-1] == ' ' || q[-1] == '/'))
			q--;
		if ((strncmp(p, "https://", 8) != 0 &&
		    strncmp(p, "http://", 7) != 0) || q - p <= 8 ||
		    (size_t)(q - p) > ETCD_URL - 64 || memchr(p, ' ', q - p))
			return TL_EINVAL;
		if ((e->ep[i] = strndup(p, q - p)) == NULL)
			return ENOMEM;
		e->nep++;
		p = *next == ',' ? next + 1 : next;
	}
	return 0;
}

int
tl_etcd_open(const struct tl_etcd_conf *c, struct tl_etcd **out)
{
	struct tl_etcd *e;
	char *ca = NULL, *cert = NULL, *key = NULL;
	int bad = 0, rc;

	*out = NULL;
	if (c == NULL || c->endpoints == NULL || c->timeout_ms < 0 ||
	    (c->cert != NULL && *c->cert != '\0') !=
	    (c->key != NULL && *c->key != '\0'))
		return TL_EINVAL;
	if (pthread_once(&curl_once, curl_start) != 0 || curl_rc != 0)
		return ENOMEM;
	if ((e = calloc(1, sizeof(*e))) == NULL)
		return ENOMEM;
	snprintf(e->err, sizeof(e->err), "no failure");
	e->timeout_ms = c->timeout_ms > 0 ? c->timeout_ms : ETCD_TIMEOUT_MS;
	if ((rc = parse_endpoints(e, c->endpoints)) != 0)
		goto fail;
	ca = dup_opt(c->ca, &bad);
	cert = dup_opt(c->cert, &bad);
	key = dup_opt(c->key, &bad);
	rc = ENOMEM;
	if (bad || (e->curl = curl_easy_init()) == NULL ||
	    (e->hdrs = curl_slist_append(NULL,
	    "Content-Type: application/json")) == NULL)
		goto fail;
	/* No "Expect: 100-continue" round trip before a large body. */
	if ((e->hdrs = curl_slist_append(e->hdrs, "Expect:")) == NULL)
		goto fail;
	curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, e->hdrs);
	curl_easy_setopt(e->curl, CURLOPT_POST, 1L);
	curl_easy_setopt(e->curl, CURLOPT_ERRORBUFFER, e->cerr);
	curl_easy_setopt(e->curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e->curl, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms);
	if (ca != NULL) {
		/* The members' CA and nothing else. */
		curl_easy_setopt(e->curl, CURLOPT_CAINFO, ca);
		curl_easy_setopt(e->curl, CURLOPT_CAPATH, NULL);
	}
	if (cert != NULL) {
		curl_easy_setopt(e->curl, CURLOPT_SSLCERT, cert);
		curl_easy_setopt(e->curl, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(e->curl, CURLOPT_SSLKEY, key);
		curl_easy_setopt(e->curl, CURLOPT_SSLKEYTYPE, "PEM");
	}
	/* libcurl copies string options: ours are not needed after. */
	free(ca);
	free(cert);
	free(key);
	*out = e;
	return 0;
fail:
	free(ca);
	free(cert);
	free(key);
	tl_etcd_close(e);
	return rc;
}

static void
buf_clear(struct tl_etcd *e)
{
	if (e->buf != NULL)
		sodium_memzero(e->buf, e->len);
	e->len = 0;
}

void
tl_etcd_close(struct tl_etcd *e)
{
	size_t i;

	if (e == NULL)
		return;
	if (e->curl != NULL)
		curl_easy_cleanup(e->curl);
	curl_slist_free_all(e->hdrs);
	for (i = 0; i < e->nep; i++)
		free(e->ep[i]);
	free(e->ep);
	buf_clear(e);
	free(e->buf);
	free(e);
}

const char *
tl_etcd_lasterr(const struct tl_etcd *e)
{
	return e != NULL ? e->err : "no etcd handle";
}

const char *
tl_etcd_endpoint(const struct tl_etcd *e)
{
	return e != NULL && e->answered ? e->ep[e->cur] : NULL;
}

/* --- the answer, and the watch's stream ------------------------------ */

/* Grows buf to hold need bytes and a NUL; the old block is wiped. */
static int
buf_grow(struct tl_etcd *e, size_t need)
{
	size_t cap = e->cap != 0 ? e->cap : 4096;
	char *nb;

	if (need >= ETCD_ANSWER_MAX)
		return -1;
	if (need < e->cap)
		return 0;
	while (cap <= need)
		cap *= 2;
	if ((nb = malloc(cap)) == NULL)
		return -1;
	if (e->buf != NULL) {
		memcpy(nb, e->buf, e->len);
		sodium_memzero(e->buf, e->len);
		free(e->buf);
	}
	e->buf = nb;
	e->cap = cap;
	return 0;
}

static void	watch_line(struct watch *, const char *, size_t);

/*
 * Parses the complete lines of the watch's stream; 1 once it has an
 * outcome (the transfer is then aborted), else 0.
 */
static int
watch_lines(struct tl_etcd *e)
{
	struct watch *w = e->w;
	char *nl;

	while (!w->done && (nl = memchr(e->buf + w->off, '\n',
	    e->len - w->off)) != NULL) {
		watch_line(w, e->buf + w->off, nl - (e->buf + w->off));
		w->off = nl + 1 - e->buf;
	}
	/* What was parsed is not kept: a long stream must not pile up. */
	if (w->off > 0) {
		memmove(e->buf, e->buf + w->off, e->len - w->off);
		sodium_memzero(e->buf + e->len - w->off, w->off);
		e->len -= w->off;
		e->buf[e->len] = '\0';
		w->off = 0;
	}
	return w->done;
}

static size_t
on_data(char *p, size_t size, size_t n, void *arg)
{
	struct tl_etcd *e = arg;
	size_t len = size * n;

	if (buf_grow(e, e->len + len) != 0) {
		e->wrc = e->len + len >= ETCD_ANSWER_MAX ? TL_ETOOBIG : ENOMEM;
		return 0;
	}
	memcpy(e->buf + e->len, p, len);
	e->len += len;
	e->buf[e->len] = '\0';
	/* Returning short makes libcurl end the transfer: CURLE_WRITE_ERROR. */
	if (e->w != NULL && watch_lines(e))
		return 0;
	return len;
}

/* --- JSON ------------------------------------------------------------ */

/* An int64 the gateway sends as a string ("12"), or a number; absent: 0. */
static int
get_i64(json_t *o, const char *name, int64_t *v)
{
	json_t *x = json_object_get(o, name);
	const char *s;
	char *end;
	long long ll;

	*v = 0;
	if (x == NULL || json_is_null(x))
		return 0;
	if (json_is_integer(x)) {
		*v = json_integer_value(x);
		return 0;
	}
	if (!json_is_string(x) || *(s = json_string_value(x)) == '\0')
		return TL_EMALFORMED;
	errno = 0;
	ll = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return TL_EMALFORMED;
	*v = ll;
	return 0;
}

/* A uint64 (member ids use all 64 bits), as get_i64. */
static int
get_u64(json_t *o, const char *name, uint64_t *v)
{
	json_t *x = json_object_get(o, name);
	const char *s;
	char *end;
	unsigned long long ull;

	*v = 0;
	if (x == NULL || json_is_null(x))
		return 0;
	if (json_is_integer(x) && json_integer_value(x) >= 0) {
		*v = (uint64_t)json_integer_value(x);
		return 0;
	}
	if (!json_is_string(x) || (s = json_string_value(x))[0] < '0' ||
	    s[0] > '9')
		return TL_EMALFORMED;
	errno = 0;
	ull = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return TL_EMALFORMED;
	*v = ull;
	return 0;
}

static int64_t
header_rev(json_t *j, int *rc)
{
	int64_t v;

	if (get_i64(json_object_get(j, "header"), "revision", &v) != 0)
		*rc = TL_EMALFORMED;
	return v;
}

/* name's base64 as bytes in *out (malloc'd, NUL after; absent: ""). */
static int
get_bytes(json_t *o, const char *name, uint8_t **out, size_t *lenp)
{
	json_t *x = json_object_get(o, name);
	const char *s = "";
	size_t n = 0, cap;

	*out = NULL;
	*lenp = 0;
	if (x != NULL && !json_is_null(x)) {
		if (!json_is_string(x))
			return TL_EMALFORMED;
		s = json_string_value(x);
		n = json_string_length(x);
	}
	cap = n / 4 * 3 + 3;
	if ((*out = malloc(cap + 1)) == NULL)
		return ENOMEM;
	if (sodium_base642bin(*out, cap, s, n, NULL, lenp, NULL,
	    sodium_base64_VARIANT_ORIGINAL) != 0)
		return TL_EMALFORMED;
	(*out)[*lenp] = '\0';
	return 0;
}

/* The bytes p[0..n) as a base64 JSON string; NULL on ENOMEM. */
static json_t *
b64(const void *p, size_t n)
{
	const size_t v = sodium_base64_VARIANT_ORIGINAL;
	json_t *j;
	size_t cap;
	char *s;

	if (n > (SIZE_MAX - 8) / 4 * 3)
		return NULL;
	cap = sodium_base64_ENCODED_LEN(n, v);
	if ((s = malloc(cap)) == NULL)
		return NULL;
	sodium_bin2base64(s, cap, n != 0 ? p : (const void *)"", n, (int)v);
	j = json_stringn(s, cap - 1);
	sodium_memzero(s, cap);
	free(s);
	return j;
}

/*
 * Sets o[name] = v, taking v (NULL: ENOMEM from its maker); *bad set on
 * failure, so that a request is built without a test at every field.
 */
static void
set(json_t *o, const char *name, json_t *v, int *bad)
{
	if (v == NULL || json_object_set_new(o, name, v) != 0)
		*bad = 1;
}

/* A key and, when end is not NULL, its range_end, into o. */
static void
set_range(json_t *o, const void *key, size_t key_len, const void *end,
    size_t end_len, int *bad)
{
	set(o, "key", b64(key, key_len), bad);
	if (end != NULL)
		set(o, "range_end", b64(end, end_len), bad);
}

/* --- errors ---------------------------------------------------------- */

/* A member's words, cut and printable only, after "ep: ". */
static void
say(char *why, size_t cap, const char *ep, const char *msg, int code)
{
	size_t o = strlen(why), i;
	char m[ETCD_MSG];

	for (i = 0; msg[i] != '\0' && i < sizeof(m) - 1; i++)
		m[i] = msg[i] >= 0x20 && msg[i] < 0x7f ? msg[i] : '?';
	m[i] = '\0';
	if (o >= cap - 1)
		return;
	if (code >= 0)
		snprintf(why + o, cap - o, "%s%s: %s (gRPC code %d)",
		    o > 0 ? "; " : "", ep, m, code);
	else
		snprintf(why + o, cap - o, "%s%s: %s", o > 0 ? "; " : "",
		    ep, m);
}

/*
 * What a gRPC status from a member means here.  Codes 4 and 14 (and
 * the transport's 1, 2, 10, 13): it cannot serve the request now.
 * etcd says "too large" with code 3 and gRPC itself with 8, which etcd
 * also uses for "too many requests": the words decide.
 */
static int
grpc_rc(int code, const char *msg)
{
	if (strstr(msg, "request is too large") != NULL ||
	    strstr(msg, "too many operations in txn") != NULL ||
	    strstr(msg, "larger than max") != NULL)
		return TL_ETOOBIG;
	switch (code) {
	case 5:
		return TL_ENOTFOUND;
	case 7:
	case 16:
		return TL_EAUTH;
	case 11:
		/* OutOfRange is also "a future revision": a bad argument. */
		return strstr(msg, "compacted") != NULL ? TL_ECOMPACTED :
		    TL_EINVAL;
	case 3:
	case 6:
	case 9:
	case 12:
		return TL_EINVAL;
	default:
		return TL_EUNAVAIL;
	}
}

/*
 * The error an answer carries (0: none): {"error":"..","code":N} from a
 * unary call, {"error":{"grpc_code":N,"message":..}} inside a stream.
 */
static int
answer_rc(json_t *j, long http, const char **msgp, int *codep)
{
	json_t *er = json_object_get(j, "error"), *m;
	int64_t code = 0;

	*msgp = "";
	*codep = -1;
	if (er == NULL) {
		if (http == 200)
			return 0;
		*msgp = "an answer with no error but not HTTP 200";
		return http >= 500 ? TL_EUNAVAIL : TL_EMALFORMED;
	}
	if (json_is_object(er)) {
		(void)get_i64(er, "grpc_code", &code);
		m = json_object_get(er, "message");
	} else {
		(void)get_i64(j, "code", &code);
		if ((m = json_object_get(j, "message")) == NULL ||
		    json_string_length(m) == 0)
			m = er;
	}
	*msgp = json_is_string(m) ? json_string_value(m) : "(no message)";
	*codep = code >= 0 && code < 100 ? (int)code : 2;
	return grpc_rc(*codep, *msgp);
}

/* OpenSSL's words for an alert about our certificate (drivers/http.c). */
static const char *const cert_alerts[] = {
	"alert certificate required", "alert unknown ca",
	"alert bad certificate", "alert certificate unknown",
	"alert certificate expired", "alert certificate revoked",
	"alert unsupported certificate", "alert access denied", NULL
};

/* What a failed transfer is. */
static int
curl_fail_rc(CURLcode cc, const char *detail)
{
	size_t i;

	for (i = 0; cert_alerts[i] != NULL; i++)
		if (strstr(detail, cert_alerts[i]) != NULL)
			return TL_EAUTH;
	switch (cc) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
		return TL_EUNTRUSTED;
	case CURLE_SSL_CERTPROBLEM:	/* our certificate or key file */
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return TL_EINVAL;
	case CURLE_OUT_OF_MEMORY:
		return ENOMEM;
	default:
		return TL_EUNAVAIL;
	}
}

/*
 * Whether nothing of the request can have reached a member: no
 * connection, a TLS handshake that failed (the request is sent after
 * it), or no byte of it written.
 */
static int
not_sent(CURL *c, CURLcode cc)
{
	long sent = -1;

	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_CERTPROBLEM:
		return 1;
	default:
		return curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &sent) ==
		    CURLE_OK && sent == 0;
	}
}

/* --- one request ----------------------------------------------------- */

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/*
 * POSTs body to path on the members in turn (from the last to answer)
 * until one answers; idem: the request changes nothing, so it may be
 * sent again to the next member after one failed to answer, or
 * answered that it cannot serve it (codes 4, 14: no leader there).
 * wait_ms > 0: a watch (e->w), with that deadline for every member
 * together.  *out: the answer's JSON when 0 (the caller's to decref).
 */
static int
call(struct tl_etcd *e, const char *path, json_t *body, int idem,
    long wait_ms, json_t **out)
{
	char why[ETCD_ERR] = "", url[ETCD_URL];
	const char *msg;
	long http, left, end = wait_ms > 0 ? now_ms() + wait_ms : 0;
	size_t i, k = e->cur;
	int rc = TL_EUNAVAIL, trc = 0, code;
	json_t *j = NULL;
	CURLcode cc;
	char *text;

	*out = NULL;
	if (body == NULL || (text = json_dumps(body, JSON_COMPACT)) == NULL)
		return ENOMEM;
	for (i = 0; i < e->nep; i++, k = (k + 1) % e->nep) {
		buf_clear(e);
		e->cerr[0] = '\0';
		e->wrc = 0;
		snprintf(url, sizeof(url), "%s%s", e->ep[k], path);
		left = e->timeout_ms;
		if (wait_ms > 0) {
			if ((left = end - now_ms()) <= 0)
				break;
			memset(e->w, 0, sizeof(*e->w));
		}
		curl_easy_setopt(e->curl, CURLOPT_URL, url);
		curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(e->curl, CURLOPT_POSTFIELDSIZE,
		    (long)strlen(text));
		curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, left);
		curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, on_data);
		curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e);
		cc = curl_easy_perform(e->curl);
		/* A stream the member ended: what is left is its last line. */
		if (wait_ms > 0 && cc == CURLE_OK && !e->w->done) {
			watch_line(e->w, e->buf != NULL ? e->buf : "", e->len);
			if (!e->w->done) {
				say(why, sizeof(why), e->ep[k], "the member "
				    "ended the watch", -1);
				e->cur = (k + 1) % e->nep;
				continue;
			}
		}
		if (cc == CURLE_WRITE_ERROR && e->wrc != 0) {
			rc = e->wrc;
			say(why, sizeof(why), e->ep[k], rc == ENOMEM ?
			    "out of memory for the answer" :
			    "an answer larger than 256 MiB", -1);
			break;
		}
		if (wait_ms > 0 && (e->w->done ||
		    (cc == CURLE_OPERATION_TIMEDOUT && (e->w->created ||
		    !not_sent(e->curl, cc))))) {
			/* An outcome, or a member that has the watch and saw
			 * nothing change before the deadline. */
			e->cur = k;
			e->answered = 1;
			rc = e->w->done ? e->w->rc : TL_ETIMEDOUT;
			if (e->w->done && rc != 0)
				say(why, sizeof(why), e->ep[k], e->w->msg, -1);
			break;
		}
		if (cc != CURLE_OK) {
			trc = curl_fail_rc(cc, e->cerr[0] != '\0' ? e->cerr :
			    curl_easy_strerror(cc));
			say(why, sizeof(why), e->ep[k], e->cerr[0] != '\0' ?
			    e->cerr : curl_easy_strerror(cc), -1);
			if (trc == TL_EINVAL || trc == ENOMEM ||
			    cc == CURLE_SSL_CACERT_BADFILE) {
				rc = trc;	/* ours, not the member's */
				break;
			}
			if (!idem && !not_sent(e->curl, cc)) {
				/* It may have been done: never twice. */
				rc = trc;
				e->cur = (k + 1) % e->nep;
				break;
			}
			if (trc == TL_EUNTRUSTED || trc == TL_EAUTH)
				rc = trc;	/* says more than "no answer" */
			e->cur = (k + 1) % e->nep;
			continue;
		}
		http = 0;
		curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &http);
		if ((j = json_loadb(e->buf != NULL ? e->buf : "", e->len, 0,
		    NULL)) == NULL) {
			say(why, sizeof(why), e->ep[k], http >= 500 ?
			    "an answer that is not JSON (HTTP 5xx)" :
			    "an answer that is not JSON", -1);
			rc = http >= 500 ? TL_EUNAVAIL : TL_EMALFORMED;
			if (!idem || rc != TL_EUNAVAIL)
				break;
			e->cur = (k + 1) % e->nep;
			continue;
		}
		if ((rc = answer_rc(j, http, &msg, &code)) == 0) {
			e->cur = k;
			e->answered = 1;
			*out = j;
			break;
		}
		say(why, sizeof(why), e->ep[k], msg, code);
		json_decref(j);
		j = NULL;
		e->cur = k;
		e->answered = 1;
		if (!idem || rc != TL_EUNAVAIL)
			break;
		/* No leader on this side of a partition: another may have. */
		e->cur = (k + 1) % e->nep;
	}
	if (rc == TL_EUNAVAIL && why[0] == '\0')
		snprintf(why, sizeof(why), "no time left to try a member");
	/* A member that failed before another answered is news too. */
	if (rc != 0 || why[0] != '\0')
		snprintf(e->err, sizeof(e->err), "%s", why);
	buf_clear(e);
	sodium_memzero(text, strlen(text));
	free(text);
	return rc;
}

/* --- ranges ---------------------------------------------------------- */

static int
kv_parse(json_t *o, int keys_only, struct tl_etcd_kv *kv)
{
	int rc;

	if (!json_is_object(o))
		return TL_EMALFORMED;
	if ((rc = get_bytes(o, "key", &kv->key, &kv->key_len)) != 0)
		return rc;
	if (!keys_only &&
	    (rc = get_bytes(o, "value", &kv->val, &kv->val_len)) != 0)
		return rc;
	if (get_i64(o, "create_revision", &kv->create_rev) != 0 ||
	    get_i64(o, "mod_revision", &kv->mod_rev) != 0 ||
	    get_i64(o, "version", &kv->version) != 0 ||
	    get_i64(o, "lease", &kv->lease) != 0)
		return TL_EMALFORMED;
	return 0;
}

int
tl_etcd_range(struct tl_etcd *e, const void *key, size_t key_len,
    const void *end, size_t end_len, int64_t limit, int64_t rev,
    int keys_only, struct tl_etcd_range *r)
{
	json_t *q, *j = NULL, *kvs;
	size_t i;
	int bad = 0, rc;

	if (r == NULL)
		return TL_EINVAL;
	memset(r, 0, sizeof(*r));
	if (e == NULL || key == NULL || key_len == 0 || limit < 0 ||
	    rev < 0 || (end != NULL && end_len == 0))
		return TL_EINVAL;
	if ((q = json_object()) == NULL)
		return ENOMEM;
	set_range(q, key, key_len, end, end_len, &bad);
	if (limit > 0)
		set(q, "limit", json_integer(limit), &bad);
	if (rev > 0)
		set(q, "revision", json_integer(rev), &bad);
	if (keys_only)
		set(q, "keys_only", json_true(), &bad);
	rc = bad ? ENOMEM : call(e, "/v3/kv/range", q, 1, 0, &j);
	json_decref(q);
	if (rc != 0)
		return rc;
	r->rev = header_rev(j, &rc);
	r->more = json_is_true(json_object_get(j, "more"));
	kvs = json_object_get(j, "kvs");
	if (kvs != NULL && !json_is_array(kvs))
		rc = TL_EMALFORMED;
	if (rc == 0 && json_array_size(kvs) > 0 &&
	    (r->kvs = calloc(json_array_size(kvs), sizeof(*r->kvs))) == NULL)
		rc = ENOMEM;
	for (i = 0; rc == 0 && i < json_array_size(kvs); i++) {
		r->n++;
		rc = kv_parse(json_array_get(kvs, i), keys_only, &r->kvs[i]);
	}
	json_decref(j);
	if (rc != 0)
		snprintf(e->err, sizeof(e->err), "%s: a range answer that "
		    "does not parse", e->ep[e->cur]);
	return rc;
}

void
tl_etcd_range_free(struct tl_etcd_range *r)
{
	size_t i;

	if (r == NULL)
		return;
	for (i = 0; i < r->n; i++) {
		free(r->kvs[i].key);
		if (r->kvs[i].val != NULL)
			sodium_memzero(r->kvs[i].val, r->kvs[i].val_len);
		free(r->kvs[i].val);
	}
	free(r->kvs);
	memset(r, 0, sizeof(*r));
}

void
tl_etcd_prefix_end(const void *prefix, size_t len, uint8_t *end,
    size_t *end_len)
{
	const uint8_t *p = prefix;
	size_t i;

	/* The prefix with its last byte below 0xff incremented, cut there. */
	for (i = len; i > 0; i--)
		if (p[i - 1] != 0xff) {
			memcpy(end, p, i - 1);
			end[i - 1] = p[i - 1] + 1;
			*end_len = i;
			return;
		}
	/* Empty or all 0xff: every key from the prefix on. */
	end[0] = '\0';
	*end_len = 1;
}

/* --- transactions ---------------------------------------------------- */

static json_t *
cmp_json(const struct tl_etcd_cmp *c, int *bad)
{
	static const char *const targets[] = {
		[TL_ETCD_VALUE] = "VALUE", [TL_ETCD_CREATE] = "CREATE",
		[TL_ETCD_MOD] = "MOD", [TL_ETCD_VERSION] = "VERSION"
	};
	static const char *const fields[] = {
		[TL_ETCD_CREATE] = "create_revision",
		[TL_ETCD_MOD] = "mod_revision", [TL_ETCD_VERSION] = "version"
	};
	static const char *const results[] = {
		[TL_ETCD_EQ] = "EQUAL", [TL_ETCD_NE] = "NOT_EQUAL",
		[TL_ETCD_LT] = "LESS", [TL_ETCD_GT] = "GREATER"
	};
	json_t *o;

	if ((unsigned)c->target > TL_ETCD_VERSION ||
	    (unsigned)c->result > TL_ETCD_GT || c->key == NULL ||
	    c->key_len == 0 || (c->target == TL_ETCD_VALUE &&
	    c->val == NULL && c->val_len != 0)) {
		*bad = TL_EINVAL;
		return NULL;
	}
	if ((o = json_object()) == NULL)
		return NULL;
	set(o, "key", b64(c->key, c->key_len), bad);
	set(o, "target", json_string(targets[c->target]), bad);
	set(o, "result", json_string(results[c->result]), bad);
	if (c->target == TL_ETCD_VALUE)
		set(o, "value", b64(c->val, c->val_len), bad);
	else
		set(o, fields[c->target], json_integer(c->num), bad);
	return o;
}

static json_t *
op_json(const struct tl_etcd_op *op, int *bad)
{
	json_t *o, *w;

	if (op->key == NULL || op->key_len == 0 ||
	    (op->kind != TL_ETCD_PUT && op->kind != TL_ETCD_DEL) ||
	    (op->kind == TL_ETCD_PUT && op->val == NULL && op->val_len != 0) ||
	    (op->end != NULL && op->end_len == 0) || op->lease < 0) {
		*bad = TL_EINVAL;
		return NULL;
	}
	if ((o = json_object()) == NULL || (w = json_object()) == NULL) {
		json_decref(o);
		return NULL;
	}
	if (op->kind == TL_ETCD_PUT) {
		set(w, "key", b64(op->key, op->key_len), bad);
		set(w, "value", b64(op->val, op->val_len), bad);
		if (op->lease != 0)
			set(w, "lease", json_integer(op->lease), bad);
		set(o, "request_put", w, bad);
	} else {
		set_range(w, op->key, op->key_len, op->end, op->end_len, bad);
		set(o, "request_delete_range", w, bad);
	}
	return o;
}

int
tl_etcd_txn(struct tl_etcd *e, const struct tl_etcd_cmp *cmp, size_t ncmp,
    const struct tl_etcd_op *succ, size_t nsucc,
    const struct tl_etcd_op *fail, size_t nfail, int *ok, int64_t *revp)
{
	json_t *q, *a[3], *j = NULL;
	size_t i;
	int bad = 0, rc;
	int64_t rev;

	if (ok != NULL)
		*ok = 0;
	if (revp != NULL)
		*revp = 0;
	if (e == NULL || ok == NULL || (ncmp > 0 && cmp == NULL) ||
	    (nsucc > 0 && succ == NULL) || (nfail > 0 && fail == NULL))
		return TL_EINVAL;
	if ((q = json_object()) == NULL)
		return ENOMEM;
	set(q, "compare", a[0] = json_array(), &bad);
	set(q, "success", a[1] = json_array(), &bad);
	set(q, "failure", a[2] = json_array(), &bad);
	for (i = 0; !bad && i < ncmp; i++)
		if (json_array_append_new(a[0], cmp_json(&cmp[i], &bad)) != 0)
			bad = bad != 0 ? bad : ENOMEM;
	for (i = 0; !bad && i < nsucc; i++)
		if (json_array_append_new(a[1], op_json(&succ[i], &bad)) != 0)
			bad = bad != 0 ? bad : ENOMEM;
	for (i = 0; !bad && i < nfail; i++)
		if (json_array_append_new(a[2], op_json(&fail[i], &bad)) != 0)
			bad = bad != 0 ? bad : ENOMEM;
	/* set() says 1 for ENOMEM; cmp_json and op_json say TL_EINVAL. */
	rc = bad == 1 ? ENOMEM : bad != 0 ? bad :
	    call(e, "/v3/kv/txn", q, 0, 0, &j);
	json_decref(q);
	if (rc != 0)
		return rc;
	rev = header_rev(j, &rc);
	if (rc == 0) {
		*ok = json_is_true(json_object_get(j, "succeeded"));
		if (revp != NULL)
			*revp = rev;
	}
	json_decref(j);
	return rc;
}

/* --- leases ---------------------------------------------------------- */

int
tl_etcd_lease_grant(struct tl_etcd *e, int64_t ttl, int64_t *idp,
    int64_t *ttlp)
{
	json_t *q, *j = NULL, *er;
	int bad = 0, rc;
	int64_t id, got;

	if (idp != NULL)
		*idp = 0;
	if (ttlp != NULL)
		*ttlp = 0;
	if (e == NULL || idp == NULL || ttl <= 0)
		return TL_EINVAL;
	if ((q = json_object()) == NULL)
		return ENOMEM;
	set(q, "TTL", json_integer(ttl), &bad);
	rc = bad ? ENOMEM : call(e, "/v3/lease/grant", q, 0, 0, &j);
	json_decref(q);
	if (rc != 0)
		return rc;
	/* LeaseGrantResponse has an error string of its own. */
	er = json_object_get(j, "error");
	if (get_i64(j, "ID", &id) != 0 || get_i64(j, "TTL", &got) != 0 ||
	    id == 0 || (er != NULL && json_string_length(er) > 0)) {
		snprintf(e->err, sizeof(e->err), "%s: a lease grant answer "
		    "without a lease", e->ep[e->cur]);
		rc = TL_EMALFORMED;
	} else {
		*idp = id;
		if (ttlp != NULL)
			*ttlp = got;
	}
	json_decref(j);
	return rc;
}

int
tl_etcd_lease_keepalive(struct tl_etcd *e, int64_t id, int64_t *ttlp)
{
	json_t *q, *j = NULL, *res;
	int bad = 0, rc;
	int64_t ttl;

	if (ttlp != NULL)
		*ttlp = 0;
	if (e == NULL || id == 0)
		return TL_EINVAL;
	if ((q = json_object()) == NULL)
		return ENOMEM;
	set(q, "ID", json_integer(id), &bad);
	/* A stream of one: the gateway ends it when our body ends. */
	rc = bad ? ENOMEM : call(e, "/v3/lease/keepalive", q, 1, 0, &j);
	json_decref(q);
	if (rc != 0)
		return rc;
	if ((res = json_object_get(j, "result")) == NULL)
		res = j;
	if (get_i64(res, "TTL", &ttl) != 0)
		rc = TL_EMALFORMED;
	else if (ttl <= 0) {
		/* An expired (or unknown) lease is answered with no TTL. */
		snprintf(e->err, sizeof(e->err), "%s: lease %lld has expired",
		    e->ep[e->cur], (long long)id);
		rc = TL_ENOTFOUND;
	} else if (ttlp != NULL)
		*ttlp = ttl;
	json_decref(j);
	return rc;
}

int
tl_etcd_lease_revoke(struct tl_etcd *e, int64_t id)
{
	json_t *q, *j = NULL;
	int bad = 0, rc;

	if (e == NULL || id == 0)
		return TL_EINVAL;
	if ((q = json_object()) == NULL)
		return ENOMEM;
	set(q, "ID", json_integer(id), &bad);
	rc = bad ? ENOMEM : call(e, "/v3/lease/revoke", q, 0, 0, &j);
	json_decref(q);
	json_decref(j);
	return rc == TL_ENOTFOUND ? 0 : rc;
}

/* --- watch ----------------------------------------------------------- */

static void
watch_line(struct watch *w, const char *line, size_t len)
{
	json_t *j, *res, *ev;
	const char *msg;
	int64_t compact = 0;
	int code;

	if (len == 0 || (len == 1 && line[0] == '\r'))
		return;
	w->done = 1;
	if ((j = json_loadb(line, len, 0, NULL)) == NULL) {
		w->rc = TL_EMALFORMED;
		snprintf(w->msg, sizeof(w->msg), "a watch line that is not "
		    "JSON");
		return;
	}
	if ((res = json_object_get(j, "result")) == NULL) {
		if ((w->rc = answer_rc(j, 200, &msg, &code)) == 0) {
			w->rc = TL_EMALFORMED;
			msg = "a watch line without a result";
		}
		snprintf(w->msg, sizeof(w->msg), "%s", msg);
		goto out;
	}
	ev = json_array_get(json_object_get(res, "events"), 0);
	if (get_i64(res, "compact_revision", &compact) != 0) {
		w->rc = TL_EMALFORMED;
		snprintf(w->msg, sizeof(w->msg), "a watch line that does not "
		    "parse");
	} else if (compact > 0) {
		w->rc = TL_ECOMPACTED;
		snprintf(w->msg, sizeof(w->msg), "the watch's start was "
		    "compacted (at %lld)", (long long)compact);
	} else if (json_is_true(json_object_get(res, "canceled"))) {
		msg = json_string_value(json_object_get(res, "cancel_reason"));
		w->rc = TL_EUNAVAIL;
		snprintf(w->msg, sizeof(w->msg), "the member canceled the "
		    "watch: %s", msg != NULL ? msg : "(no reason)");
	} else if (ev != NULL) {
		if (get_i64(json_object_get(ev, "kv"), "mod_revision",
		    &w->rev) != 0 || w->rev <= 0) {
			w->rc = TL_EMALFORMED;
			snprintf(w->msg, sizeof(w->msg), "a watch event "
			    "without a revision");
		}
	} else {
		/* "created", or progress: wait for more. */
		if (json_is_true(json_object_get(res, "created")))
			w->created = 1;
		w->done = 0;
	}
out:
	json_decref(j);
}

int
tl_etcd_watch(struct tl_etcd *e, const void *key, size_t key_len,
    const void *end, size_t end_len, int64_t start, long wait_ms,
    int64_t *revp)
{
	struct watch w;
	json_t *q, *cr, *j = NULL;
	int bad = 0, rc;

	if (revp != NULL)
		*revp = 0;
	if (e == NULL || revp == NULL || key == NULL || key_len == 0 ||
	    start < 0 || wait_ms <= 0 || (end != NULL && end_len == 0))
		return TL_EINVAL;
	if ((q = json_object()) == NULL)
		return ENOMEM;
	if ((cr = json_object()) != NULL) {
		set_range(cr, key, key_len, end, end_len, &bad);
		if (start > 0)
			set(cr, "start_revision", json_integer(start), &bad);
	}
	set(q, "create_request", cr, &bad);
	memset(&w, 0, sizeof(w));
	e->w = &w;
	rc = bad ? ENOMEM : call(e, "/v3/watch", q, 1, wait_ms, &j);
	e->w = NULL;
	json_decref(q);
	json_decref(j);
	if (rc == 0)
		*revp = w.rev;
	else if (rc == TL_ETIMEDOUT)
		snprintf(e->err, sizeof(e->err), "%s: no change within %ld ms",
		    e->ep[e->cur], wait_ms);
	return rc;
}

/* --- maintenance ----------------------------------------------------- */

int
tl_etcd_compact(struct tl_etcd *e, int64_t rev, int physical)
{
	json_t *q, *j = NULL;
	int bad = 0, rc;

	if (e == NULL || rev <= 0)
		return TL_EINVAL;
	if ((q = json_object()) == NULL)
		return ENOMEM;
	set(q, "revision", json_integer(rev), &bad);
	if (physical)
		set(q, "physical", json_true(), &bad);
	rc = bad ? ENOMEM : call(e, "/v3/kv/compaction", q, 0, 0, &j);
	json_decref(q);
	json_decref(j);
	return rc;
}

int
tl_etcd_status(struct tl_etcd *e, struct tl_etcd_status *st)
{
	json_t *q, *j = NULL, *v;
	int rc;

	if (st != NULL)
		memset(st, 0, sizeof(*st));
	if (e == NULL || st == NULL)
		return TL_EINVAL;
	if ((q = json_object()) == NULL)
		return ENOMEM;
	rc = call(e, "/v3/maintenance/status", q, 1, 0, &j);
	json_decref(q);
	if (rc != 0)
		return rc;
	v = json_object_get(j, "version");
	snprintf(st->version, sizeof(st->version), "%s",
	    json_is_string(v) ? json_string_value(v) : "");
	st->rev = header_rev(j, &rc);
	if (get_i64(j, "dbSize", &st->db_size) != 0 ||
	    get_u64(j, "leader", &st->leader) != 0 ||
	    get_u64(json_object_get(j, "header"), "member_id",
	    &st->member) != 0)
		rc = TL_EMALFORMED;
	json_decref(j);
	return rc;
}
