/*
 * httpd.c - documents over HTTP, and their changes as Server-Sent
 * Events (httpd.h).
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/error.h"
#include "core/httpd.h"
#include "core/sub.h"

struct doc {
	char		*text;
	size_t		 len;
	uint64_t	 at_ms;		/* when it was published */
	uint64_t	 gen;		/* texts published */
	unsigned	 waiting;	/* requests waiting for a fresh one */
};

/* The question a request waits on the loop to answer, one at a time. */
struct query {
	pthread_mutex_t	 one;		/* held by the request asking */
	char		 name[TL_HTTPD_QUERY_MAX + 1];
	int		 asked;		/* and not answered yet */
	int		 answered;
	unsigned	 status;
	char		*text;
	size_t		 len;
};

struct tl_httpd {
	struct MHD_Daemon	*d;
	struct tl_httpd_conf	 conf;
	int			 efd;
	pthread_mutex_t		 mu;
	pthread_cond_t		 cv;	/* a publish, or stopping */
	struct doc		 docs[TL_HTTPD_DOCS];
	uint64_t		 gen;	/* publishes of any document */
	unsigned		 streams;
	int			 stopping;
	struct query		 q;
};

/* ms of CLOCK_MONOTONIC, as core/sub.h counts it. */
static uint64_t
mono_ms(void)
{
	return tl_sub_clock() / 1000000u;
}

/* Waits on h->cv for at most ms (h->mu held). */
static void
wait_ms(struct tl_httpd *h, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&h->cv, &h->mu, &ts);
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
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

#define TEXT	"text/plain; charset=utf-8"

/*
 * Document i's newest text, asking the loop for a fresh one first when
 * it wants freshness and is older, waiting for it at most its wait_ms.
 * A copy (malloc'd, with its trailer) into *out, or NULL when none was
 * ever published.
 */
static void
snapshot(struct tl_httpd *h, size_t i, char **out, size_t *len)
{
	const struct tl_httpd_doc *dc = &h->conf.docs[i];
	struct doc *d = &h->docs[i];
	uint64_t one = 1, gen, until;

	*out = NULL;
	*len = 0;
	pthread_mutex_lock(&h->mu);
	if (dc->fresh_ms > 0 && (d->text == NULL ||
	    mono_ms() - d->at_ms > dc->fresh_ms)) {
		gen = d->gen;
		d->waiting++;
		if (write(h->efd, &one, sizeof(one)) < 0) {
			/* Saturated: the loop has been asked already. */
		}
		until = mono_ms() + dc->wait_ms;
		while (d->gen == gen && !h->stopping && mono_ms() < until)
			wait_ms(h, 100);
		d->waiting--;
	}
	if (d->text != NULL &&
	    (*out = malloc(d->len + dc->trailer_max + 1)) != NULL) {
		memcpy(*out, d->text, d->len);
		*len = d->len;
		if (dc->trailer != NULL)
			*len += dc->trailer(*out + d->len, dc->trailer_max + 1,
			    (double)(mono_ms() - d->at_ms) / 1000.0);
	}
	pthread_mutex_unlock(&h->mu);
}

/* --- Server-Sent Events -------------------------------------------- */

struct stream {
	struct tl_httpd	*h;
	uint64_t	 seen;		/* the generation last sent */
	int		 started;
};

/*
 * Blocks (a thread per connection) until a publish, a beat or the
 * end.  Each write is one whole event, within max.
 */
static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *s = cls;
	struct tl_httpd *h = s->h;
	uint64_t until = mono_ms() + TL_HTTPD_BEAT_S * 1000u;
	int n;

	(void)pos;
	if (max < 64)
		return 0;
	pthread_mutex_lock(&h->mu);
	while (s->started && h->gen == s->seen && !h->stopping &&
	    mono_ms() < until)
		wait_ms(h, 250);
	if (h->stopping) {
		pthread_mutex_unlock(&h->mu);
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	if (!s->started || h->gen != s->seen) {
		s->seen = h->gen;
		n = snprintf(buf, max, "%sevent: change\ndata: %llu\n\n",
		    s->started ? "" : "retry: 1000\n",
		    (unsigned long long)s->seen);
		s->started = 1;
	} else
		n = snprintf(buf, max, ": beat\n\n");
	pthread_mutex_unlock(&h->mu);
	return n;
}

static void
stream_free(void *cls)
{
	struct stream *s = cls;

	pthread_mutex_lock(&s->h->mu);
	s->h->streams--;
	pthread_mutex_unlock(&s->h->mu);
	free(s);
}

static enum MHD_Result
stream_start(struct tl_httpd *h, struct MHD_Connection *c)
{
	struct MHD_Response *r;
	struct stream *s;
	enum MHD_Result ok;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return MHD_NO;
	s->h = h;
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024,
	    stream_read, s, stream_free);
	if (r == NULL) {
		free(s);
		return MHD_NO;
	}
	pthread_mutex_lock(&h->mu);
	h->streams++;
	pthread_mutex_unlock(&h->mu);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
	    "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ok = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ok;
}

/* --- questions the loop answers -------------------------------------- */

/*
 * Asks the loop name and waits for its answer, at most query_ms: one
 * question at a time (the next request waits for the lock), the answer
 * copied out.
 */
static enum MHD_Result
ask(struct tl_httpd *h, struct MHD_Connection *c, const char *name)
{
	struct query *q = &h->q;
	uint64_t one = 1, until;
	enum MHD_Result ok;
	unsigned status;
	char *text;
	size_t len;

	if (strlen(name) > TL_HTTPD_QUERY_MAX)
		return reply(c, MHD_HTTP_NOT_FOUND, TEXT, "not found\n", 10);
	pthread_mutex_lock(&q->one);
	pthread_mutex_lock(&h->mu);
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->asked = 1;
	q->answered = 0;
	if (write(h->efd, &one, sizeof(one)) < 0) {
		/* Saturated: the loop has been asked already. */
	}
	until = mono_ms() + h->conf.query_ms;
	while (!q->answered && !h->stopping && mono_ms() < until)
		wait_ms(h, 100);
	q->asked = 0;
	status = q->status;
	text = q->text;
	len = q->len;
	q->text = NULL;
	q->len = 0;
	if (!q->answered) {
		status = MHD_HTTP_SERVICE_UNAVAILABLE;
		free(text);
		text = NULL;
		len = 0;
	}
	q->answered = 0;
	pthread_mutex_unlock(&h->mu);
	pthread_mutex_unlock(&q->one);
	ok = reply(c, status, status == MHD_HTTP_OK ? h->conf.query_type :
	    TEXT, text != NULL ? text : status ==
	    MHD_HTTP_SERVICE_UNAVAILABLE ? "no answer in time\n" :
	    "not found\n", text != NULL ? len : status ==
	    MHD_HTTP_SERVICE_UNAVAILABLE ? 18 : 10);
	free(text);
	return ok;
}

int
tl_httpd_query(struct tl_httpd *h, char *name, size_t cap)
{
	int asked;

	pthread_mutex_lock(&h->mu);
	asked = h->q.asked && !h->q.answered;
	if (asked)
		snprintf(name, cap, "%s", h->q.name);
	pthread_mutex_unlock(&h->mu);
	return asked;
}

void
tl_httpd_answer(struct tl_httpd *h, unsigned status, char *text, size_t len)
{
	pthread_mutex_lock(&h->mu);
	if (!h->q.asked || h->q.answered) {
		pthread_mutex_unlock(&h->mu);
		free(text);
		return;
	}
	free(h->q.text);
	h->q.text = text;
	h->q.len = len;
	h->q.status = status;
	h->q.answered = 1;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

int
tl_httpd_waiting(struct tl_httpd *h, size_t i)
{
	int w;

	if (i >= h->conf.ndocs)
		return 0;
	pthread_mutex_lock(&h->mu);
	w = h->docs[i].waiting > 0;
	pthread_mutex_unlock(&h->mu);
	return w;
}

/* --- requests ------------------------------------------------------ */

static enum MHD_Result
handle(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **req)
{
	static int marker;
	struct tl_httpd *h = cls;
	const char *ix = h->conf.index != NULL ? h->conf.index : "";
	enum MHD_Result ok;
	char *text;
	size_t len, i;
	int head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;

	(void)version;
	(void)upload;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && !head)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, TEXT, ix,
		    strlen(ix));
	/* The first call has the headers: the rest of the request first. */
	if (*req == NULL) {
		*req = &marker;
		return MHD_YES;
	}
	if (*upload_size != 0) {
		*upload_size = 0;	/* a GET's body: read, discarded */
		return MHD_YES;
	}
	for (i = 0; i < h->conf.ndocs; i++)
		if (strcmp(url, h->conf.docs[i].path) == 0)
			break;
	if (i == h->conf.ndocs) {
		if (h->conf.events != NULL && strcmp(url, h->conf.events) == 0)
			return stream_start(h, c);
		if (h->conf.query != NULL && strncmp(url, h->conf.query,
		    strlen(h->conf.query)) == 0 && !head)
			return ask(h, c, url + strlen(h->conf.query));
		if (strcmp(url, "/") == 0)
			return reply(c, MHD_HTTP_OK, TEXT, ix, strlen(ix));
		return reply(c, MHD_HTTP_NOT_FOUND, TEXT, "not found\n", 10);
	}
	snapshot(h, i, &text, &len);
	if (text == NULL)
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, TEXT,
		    "nothing yet\n", 12);
	ok = reply(c, MHD_HTTP_OK, h->conf.docs[i].type, text, len);
	free(text);
	return ok;
}

/* "HOST:PORT", "[V6]:PORT" or "PORT" into a socket address. */
static int
parse_addr(const char *flag, const char *addr, struct sockaddr_storage *ss,
    socklen_t *sl, char *why)
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
			snprintf(why, TL_WHY_MAX, "%s %s: give HOST:PORT", flag,
			    addr);
			return TL_EINVAL;
		}
		memcpy(host, addr, n);
		host[n] = '\0';
		port = colon + 1;
	}
	if (*port == '\0' || strspn(port, "0123456789") != strlen(port)) {
		snprintf(why, TL_WHY_MAX, "%s: the port '%s' is not a number",
		    flag, port);
		return TL_EINVAL;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
	if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0) {
		snprintf(why, TL_WHY_MAX, "%s %s:%s: %s", flag, host, port,
		    gai_strerror(rc));
		return TL_EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int
tl_httpd_addr_ok(const char *flag, const char *addr, char *why)
{
	struct sockaddr_storage ss;
	socklen_t sl;

	return parse_addr(flag, addr, &ss, &sl, why);
}

int
tl_httpd_start(const char *addr, const struct tl_httpd_conf *conf,
    struct tl_httpd **out, char *why)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	pthread_condattr_t ca;
	struct tl_httpd *h;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
	int rc;

	*out = NULL;
	if (conf->ndocs > TL_HTTPD_DOCS)
		return TL_EINVAL;
	if ((rc = parse_addr(conf->flag, addr, &ss, &sl, why)) != 0)
		return rc;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return ENOMEM;
	h->conf = *conf;
	if ((h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		free(h);
		snprintf(why, TL_WHY_MAX, "eventfd: %s", strerror(errno));
		return TL_EUNREACH;
	}
	pthread_mutex_init(&h->mu, NULL);
	pthread_mutex_init(&h->q.one, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, h,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)TL_HTTPD_CONNS,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)TL_HTTPD_PER_IP,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)TL_HTTPD_IDLE_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)TL_HTTPD_MEM,
	    MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
	    MHD_OPTION_END);
	if (h->d == NULL) {
		snprintf(why, TL_WHY_MAX, "%s %s: cannot listen there (%s)",
		    conf->flag, addr, errno ? strerror(errno) : "in use, or "
		    "not an address of this machine");
		tl_httpd_stop(h);
		return TL_EUNREACH;
	}
	(void)sl;
	*out = h;
	return 0;
}

void
tl_httpd_stop(struct tl_httpd *h)
{
	size_t i;

	if (h == NULL)
		return;
	pthread_mutex_lock(&h->mu);
	h->stopping = 1;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	if (h->d != NULL)
		MHD_stop_daemon(h->d);
	close(h->efd);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	pthread_mutex_destroy(&h->q.one);
	for (i = 0; i < TL_HTTPD_DOCS; i++)
		free(h->docs[i].text);
	free(h->q.text);
	free(h);
}

int
tl_httpd_fd(const struct tl_httpd *h)
{
	return h->efd;
}

int
tl_httpd_wanted(struct tl_httpd *h)
{
	uint64_t v = 0;

	return read(h->efd, &v, sizeof(v)) == sizeof(v) && v > 0;
}

void
tl_httpd_publish(struct tl_httpd *h, size_t i, char *text, size_t len)
{
	if (i >= h->conf.ndocs) {
		free(text);
		return;
	}
	pthread_mutex_lock(&h->mu);
	free(h->docs[i].text);
	h->docs[i].text = text;
	h->docs[i].len = len;
	h->docs[i].at_ms = mono_ms();
	h->docs[i].gen++;
	if (!h->conf.docs[i].quiet)
		h->gen++;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

void
tl_httpd_touch(struct tl_httpd *h, size_t i)
{
	if (i >= h->conf.ndocs)
		return;
	pthread_mutex_lock(&h->mu);
	if (h->docs[i].text != NULL) {
		h->docs[i].at_ms = mono_ms();
		h->docs[i].gen++;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
}

unsigned
tl_httpd_streams(struct tl_httpd *h)
{
	unsigned n;

	pthread_mutex_lock(&h->mu);
	n = h->streams;
	pthread_mutex_unlock(&h->mu);
	return n;
}
