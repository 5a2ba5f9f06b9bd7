/*
 * http.c - libcurl's start and response bodies, for the drivers that
 * speak HTTP (http.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "core/error.h"
#include "core/secret.h"
#include "core/vec.h"
#include "http.h"
#include "tlsclient.h"
#include "util.h"

static pthread_once_t http_once = PTHREAD_ONCE_INIT;
static int http_rc = -1;

static void
http_start(void)
{
	http_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

int
tl_drv_http_init(void)
{
	if (pthread_once(&http_once, http_start) != 0)
		return -1;
	return http_rc;
}

size_t
tl_drv_http_body(char **buf, size_t *len, size_t *cap, const void *data,
    size_t n, size_t limit)
{
	if (n > SIZE_MAX - *len - 1 || (limit != 0 && *len + n > limit))
		return 0;
	if (*len + n + 1 > *cap &&
	    tl_vec_grow_secret(buf, cap, *len + n + 1, 1) != 0)
		return 0;
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
	return n;
}

int
tl_drv_http_tls(void *curl, enum tl_drv_tls mode, const char *ca_file,
    int system_ok, char *errbuf, char *why)
{
	CURL *c = curl;

	errbuf[0] = '\0';
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	switch (mode) {
	case TL_DRV_TLS_VERIFY:
		if (ca_file == NULL && !system_ok)
			return tl_drv_why(why, TL_EUNTRUSTED, "tls is verify but "
			    "the provider has no ca: tally assign ... --set "
			    "ca=FILE (the CA's PEM), or --set tls=require");
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
		if (ca_file != NULL) {
			/* The provider's ca and nothing else. */
			curl_easy_setopt(c, CURLOPT_CAINFO, ca_file);
			curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
		}
		break;
	case TL_DRV_TLS_REQUIRE:
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
		break;
	case TL_DRV_TLS_OFF:
		break;
	}
	return 0;
}

int
tl_drv_http_client_cert(void *curl, const char *cert, const char *key,
    char *why)
{
	struct curl_blob b;
	CURL *c = curl;
	int have, rc;

	if ((rc = tl_drv_client_cert_check(cert, key, &have, why)) != 0 ||
	    !have)
		return rc;
	/*
	 * Read in place (CURL_BLOB_NOCOPY): a copy would sit unwiped in
	 * libcurl's heap; the caller's (guarded) memory outlives the handle.
	 */
	b.data = (void *)(uintptr_t)cert;
	b.len = strlen(cert);
	b.flags = CURL_BLOB_NOCOPY;
	if (curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &b) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM") != CURLE_OK)
		return tl_drv_why(why, TL_EDRIVER, "admin-cert: libcurl takes "
		    "no certificate from memory (7.71 or later needed)");
	b.data = (void *)(uintptr_t)key;
	b.len = strlen(key);
	if (curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &b) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM") != CURLE_OK)
		return tl_drv_why(why, TL_EDRIVER, "admin-key: libcurl takes "
		    "no key from memory (7.71 or later needed)");
	return 0;
}

/*
 * OpenSSL's words for an alert received about the client's certificate
 * (the only certificate a server judges), as libcurl's error buffer
 * carries them: "certificate required" first, it is the only one that
 * says none was presented.
 */
static const char *const cert_alerts[] = {
	"alert certificate required",
	"alert unknown ca",
	"alert bad certificate",
	"alert certificate unknown",
	"alert certificate expired",
	"alert certificate revoked",
	"alert unsupported certificate",
	"alert access denied",
	NULL
};

int
tl_drv_http_fail(int cc, enum tl_drv_tls mode, const char *errbuf,
    char *msg, size_t cap)
{
	const char *d = errbuf != NULL && errbuf[0] != '\0' ? errbuf :
	    curl_easy_strerror((CURLcode)cc);
	size_t i;

	for (i = 0; mode != TL_DRV_TLS_OFF && cert_alerts[i] != NULL; i++)
		if (strstr(d, cert_alerts[i]) != NULL) {
			snprintf(msg, cap, "the server %s: %s", i == 0 ?
			    "asks for a client certificate and none was "
			    "presented" : "refused the client certificate "
			    "presented", d);
			return TL_EAUTH;
		}
	if (mode == TL_DRV_TLS_VERIFY &&
	    (cc == CURLE_PEER_FAILED_VERIFICATION ||
	    cc == CURLE_SSL_CACERT_BADFILE || cc == CURLE_SSL_ISSUER_ERROR ||
	    cc == CURLE_SSL_CONNECT_ERROR)) {
		snprintf(msg, cap, "%s: %s", cc == CURLE_SSL_CONNECT_ERROR ?
		    "the TLS handshake failed" : "certificate verify failed",
		    d);
		return TL_EUNTRUSTED;
	}
	snprintf(msg, cap, "%s", d);
	return TL_EUNREACH;
}
