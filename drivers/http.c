/*
 * http.c - libcurl's start and response bodies, for the drivers that
 * speak HTTP (http.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <curl/curl.h>

#include "core/secret.h"
#include "core/vec.h"
#include "http.h"

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
