/*
 * metrics.c - --metrics: the HTTP side, and the text's helpers
 * (metrics.h).
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/error.h"
#include "core/metrics.h"
#include "core/sub.h"

struct tl_mx {
	struct MHD_Daemon	*d;
	int			 efd;
	pthread_mutex_t		 mu;
	pthread_cond_t		 cv;	/* a new text, or stopping */
	char			*text;
	size_t			 len;
	uint64_t		 at_ms;	/* when it was published */
	uint64_t		 gen;	/* texts published */
	int			 stopping;
};

/* ms of CLOCK_MONOTONIC, as core/sub.h counts it. */
static uint64_t
mono_ms(void)
{
	return tl_sub_clock() / 1000000u;
}

static enum MHD_Result
reply(struct MHD_Connection *c, unsigned status, const char *type,
    const char *body, size_t len)
{
	struct MHD_Response *r;
	enum MHD_Result ok;

	r = MHD_create_response_from_buffer(len, (void *)body,
	    MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

#define TEXT	"text/plain; charset=utf-8"

/*
 * The newest text, asking the loop for a fresh one first when it is
 * older than TL_MX_FRESH_MS and waiting for it at most TL_MX_WAIT_MS.
 * A copy (malloc'd) into *out, or NULL when none was ever written.
 */
static void
snapshot(struct tl_mx *m, char **out, size_t *len)
{
	uint64_t one = 1, gen, until;
	struct timespec ts;

	*out = NULL;
	*len = 0;
	pthread_mutex_lock(&m->mu);
	if (m->text == NULL || mono_ms() - m->at_ms > TL_MX_FRESH_MS) {
		gen = m->gen;
		if (write(m->efd, &one, sizeof(one)) < 0) {
			/* Saturated: the loop has been asked already. */
		}
		until = mono_ms() + TL_MX_WAIT_MS;
		while (m->gen == gen && !m->stopping && mono_ms() < until) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += 100 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&m->cv, &m->mu, &ts);
		}
	}
	/* And how old the figures are, as this scrape sees them. */
	if (m->text != NULL && (*out = malloc(m->len + 200)) != NULL) {
		memcpy(*out, m->text, m->len);
		*len = m->len + (size_t)snprintf(*out + m->len, 200,
		    "# HELP tally_metrics_age_seconds How old these figures "
		    "are.\n# TYPE tally_metrics_age_seconds gauge\n"
		    "tally_metrics_age_seconds %.3f\n",
		    (double)(mono_ms() - m->at_ms) / 1000.0);
	}
	pthread_mutex_unlock(&m->mu);
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **req)
{
	static int marker;
	struct tl_mx *m = cls;
	enum MHD_Result ok;
	char *text;
	size_t len;
	int head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;

	(void)version;
	(void)upload;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && !head)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, TEXT,
		    "GET /metrics\n", 13);
	/* The first call has the headers: the rest of the request first. */
	if (*req == NULL) {
		*req = &marker;
		return MHD_YES;
	}
	if (*upload_size != 0) {
		*upload_size = 0;	/* a GET's body: read, discarded */
		return MHD_YES;
	}
	if (strcmp(url, "/") == 0)
		return reply(c, MHD_HTTP_OK, TEXT, "GET /metrics\n", 13);
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, TEXT, "not found\n", 10);
	snapshot(m, &text, &len);
	if (text == NULL)
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, TEXT,
		    "no figures yet\n", 15);
	ok = reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
	    text, len);
	free(text);
	return ok;
}

/* "HOST:PORT", "[V6]:PORT" or "PORT" into a socket address. */
static int
parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *sl,
    char *why, size_t cap)
{
	char host[256];
	const char *port, *colon;
	struct addrinfo hints, *ai = NULL;
	size_t n;
	int rc;

	if ((colon = strrchr(addr, ':')) == NULL) {
		snprintf(host, sizeof(host), "127.0.0.1");
		port = addr;
	} else {
		n = (size_t)(colon - addr);
		if (n > 1 && addr[0] == '[' && addr[n - 1] == ']') {
			addr++;
			n -= 2;
		}
		if (n == 0 || n >= sizeof(host)) {
			snprintf(why, cap, "--metrics %s: give HOST:PORT", addr);
			return TL_EINVAL;
		}
		memcpy(host, addr, n);
		host[n] = '\0';
		port = colon + 1;
	}
	if (*port == '\0' || strspn(port, "0123456789") != strlen(port)) {
		snprintf(why, cap, "--metrics: the port '%s' is not a number",
		    port);
		return TL_EINVAL;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
	if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0) {
		snprintf(why, cap, "--metrics %s:%s: %s", host, port,
		    gai_strerror(rc));
		return TL_EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int
tl_mx_addr_ok(const char *addr, char *why, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t sl;

	return parse_addr(addr, &ss, &sl, why, cap);
}

int
tl_mx_start(const char *addr, struct tl_mx **out, char *why, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	pthread_condattr_t ca;
	struct tl_mx *m;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
	int rc;

	*out = NULL;
	if ((rc = parse_addr(addr, &ss, &sl, why, cap)) != 0)
		return rc;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return ENOMEM;
	if ((m->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		free(m);
		snprintf(why, cap, "eventfd: %s", strerror(errno));
		return TL_EUNREACH;
	}
	pthread_mutex_init(&m->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	m->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, m,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)TL_MX_CONNS,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)TL_MX_PER_IP,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)TL_MX_IDLE_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)TL_MX_MEM,
	    MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
	    MHD_OPTION_END);
	if (m->d == NULL) {
		snprintf(why, cap, "--metrics %s: cannot listen there (%s)",
		    addr, errno ? strerror(errno) : "in use, or not an "
		    "address of this machine");
		tl_mx_stop(m);
		return TL_EUNREACH;
	}
	(void)sl;
	*out = m;
	return 0;
}

void
tl_mx_stop(struct tl_mx *m)
{
	if (m == NULL)
		return;
	pthread_mutex_lock(&m->mu);
	m->stopping = 1;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	if (m->d != NULL)
		MHD_stop_daemon(m->d);
	close(m->efd);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->mu);
	free(m->text);
	free(m);
}

int
tl_mx_fd(const struct tl_mx *m)
{
	return m->efd;
}

int
tl_mx_wanted(struct tl_mx *m)
{
	uint64_t v = 0;

	return read(m->efd, &v, sizeof(v)) == sizeof(v) && v > 0;
}

void
tl_mx_publish(struct tl_mx *m, char *text, size_t len)
{
	pthread_mutex_lock(&m->mu);
	free(m->text);
	m->text = text;
	m->len = len;
	m->at_ms = mono_ms();
	m->gen++;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

/* --- writing the text ------------------------------------------------ */

const double tl_mx_buckets[TL_MX_NBUCKETS] = {
	0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60
};

void
tl_mx_observe(struct tl_mx_hist *h, double secs)
{
	size_t i;

	h->count++;
	h->sum += secs;
	for (i = 0; i < TL_MX_NBUCKETS; i++)
		if (secs <= tl_mx_buckets[i])
			h->le[i]++;
}

void
tl_mx_vaddf(struct tl_mx_buf *b, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	if (b->err)
		return;
	va_copy(aq, ap);
	n = vsnprintf(b->p != NULL ? b->p + b->len : NULL, b->p != NULL ?
	    b->cap - b->len : 0, fmt, aq);
	va_end(aq);
	if (n < 0) {
		b->err = EINVAL;
		return;
	}
	if (b->p == NULL || b->len + (size_t)n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *q;

		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		if ((q = realloc(b->p, cap)) == NULL) {
			b->err = ENOMEM;
			return;
		}
		b->p = q;
		b->cap = cap;
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	}
	b->len += (size_t)n;
}

void
tl_mx_addf(struct tl_mx_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tl_mx_vaddf(b, fmt, ap);
	va_end(ap);
}

/*
 * A label value as the format wants it: '\\', '"' and newline escaped.
 * Ours are names (NODE/MODULE, states, kinds) of a few printable bytes;
 * anything else becomes '?', and a value is cut at 200 bytes.
 */
const char *
tl_mx_label(const char *s, char out[512])
{
	size_t o = 0;

	for (; *s != '\0' && o < 400; s++) {
		if (*s == '\\' || *s == '"') {
			out[o++] = '\\';
			out[o++] = *s;
		} else if (*s == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else
			out[o++] = (unsigned char)*s < 0x20 ||
			    (unsigned char)*s == 0x7f ? '?' : *s;
	}
	out[o] = '\0';
	return out;
}

void
tl_mx_head(struct tl_mx_buf *b, const char *name, const char *type, const char *help)
{
	tl_mx_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void
tl_mx_hist_write(struct tl_mx_buf *b, const char *name, const char *label,
    const char *value, const struct tl_mx_hist *h)
{
	char e[512];
	size_t k;

	tl_mx_label(value, e);
	for (k = 0; k < TL_MX_NBUCKETS; k++)
		tl_mx_addf(b, "%s_bucket{%s=\"%s\",le=\"%g\"} %llu\n", name,
		    label, e, tl_mx_buckets[k], (unsigned long long)h->le[k]);
	tl_mx_addf(b, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %llu\n", name, label,
	    e, (unsigned long long)h->count);
	tl_mx_addf(b, "%s_sum{%s=\"%s\"} %.6f\n", name, label, e, h->sum);
	tl_mx_addf(b, "%s_count{%s=\"%s\"} %llu\n", name, label, e,
	    (unsigned long long)h->count);
}
