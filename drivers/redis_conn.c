/*
 * redis_conn.c - the redis driver's connection to a server: hiredis's
 * context in plaintext, OpenSSL under hiredis's protocol code for TLS
 * (redis_conn-internal.h).
 *
 * TLS: a TCP connection made non-blocking within the deadline, then
 * the handshake within the same deadline: at least TLS 1.2, SNI when
 * the host is a name, and for verify SSL_VERIFY_PEER against the CAs of
 * ca_file only (never the system's) with the host checked against the
 * certificate's names (SSL_set1_host, or its IP addresses for an
 * address).  A certificate that does not verify ends the connection
 * before a byte of the protocol is written, so no AUTH reaches a
 * server that is not the one meant.  After the handshake every wait
 * for the socket (poll) lasts at most timeout_s, as hiredis's timeouts
 * do in plaintext.  Commands are formatted by redisFormatCommandArgv
 * into one output buffer, sent when a reply is asked for, and the
 * replies parsed by a redisReader fed with what SSL_read returns.  The
 * bytes sent (AUTH's password among them) are wiped once written.
 *
 * A client certificate (the admin's, from memory: tlsclient.h) is
 * installed on the connection's SSL_CTX and sent only when the server
 * asks for one (tls-auth-clients yes or optional).  The server's
 * verdict on it comes as an alert: in the handshake under TLS 1.2, at
 * the first read under TLS 1.3 (the server checks the certificate after
 * the client has finished its part); either way the connection says it
 * was refused for its certificate (tl_drv_rd_cert_refused), so the
 * driver can tell "who we are was refused" from an outage.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "core/error.h"
#include "redis_conn-internal.h"
#include "tlsclient.h"
#include "util.h"

struct tl_drv_rd_conn {
	/* Plaintext: hiredis's context, nothing below is used. */
	redisContext	*rc;
	/* TLS. */
	int		 fd;
	SSL_CTX		*ctx;
	SSL		*ssl;
	redisReader	*reader;
	char		*obuf;		/* formatted, not yet sent */
	size_t		 olen, ocap;
	int		 timeout_ms;
	int		 verified;
	/*
	 * A client certificate was given; the server asked for one; the
	 * server refused it (or the want of one).
	 */
	int		 presented, asked, cert_refused;
	int		 err;
	char		 errstr[256];
};

static int
port_ok(const char *port, long *p, char *why)
{
	char *end;

	errno = 0;
	*p = port != NULL ? strtol(port, &end, 10) : 0;
	if (port == NULL || errno != 0 || *end != '\0' || *p < 1 ||
	    *p > 65535)
		return tl_drv_why(why, TL_EINVAL, "port %s: expected 1-65535",
		    port != NULL ? port : "(none)");
	return 0;
}

static int
plain_connect(const struct tl_drv_rd_dial *d, long p,
    struct tl_drv_rd_conn *c, char *why)
{
	struct timeval tv = { d->timeout_s, 0 };

	c->rc = redisConnectWithTimeout(d->host, (int)p, tv);
	if (c->rc == NULL)
		return tl_drv_why(why, TL_EUNREACH, "%s:%s: out of memory",
		    d->host, d->port);
	if (c->rc->err)
		return tl_drv_why(why, TL_EUNREACH, "%s:%s: %s", d->host,
		    d->port, c->rc->errstr);
	redisSetTimeout(c->rc, tv);
	return 0;
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline (ms): 1 ready, 0 timed out, -1. */
static int
wait_fd(int fd, short events, long long deadline)
{
	struct pollfd pfd = { fd, events, 0 };
	long long left;
	int n;

	for (;;) {
		if ((left = deadline - now_ms()) <= 0)
			return 0;
		n = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
		if (n > 0)
			return 1;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/* A TCP connection to d within deadline, non-blocking, into c->fd. */
static int
tcp_connect(const struct tl_drv_rd_dial *d, long long deadline,
    struct tl_drv_rd_conn *c, char *why)
{
	struct addrinfo hints, *res = NULL, *ai;
	char last[128] = "no address";
	int fd = -1, e, one = 1, rc;
	socklen_t el;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	if ((rc = getaddrinfo(d->host, d->port, &hints, &res)) != 0)
		return tl_drv_why(why, TL_EUNREACH, "%s:%s: %s", d->host,
		    d->port, gai_strerror(rc));
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			snprintf(last, sizeof(last), "%s", strerror(errno));
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		e = errno;
		if (e == EINPROGRESS) {
			rc = wait_fd(fd, POLLOUT, deadline);
			el = sizeof(e);
			if (rc == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e,
			    &el) == 0 && e == 0)
				break;
			if (rc == 0)
				e = ETIMEDOUT;
		}
		snprintf(last, sizeof(last), "%s", strerror(e));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return tl_drv_why(why, TL_EUNREACH, "%s:%s: %s", d->host,
		    d->port, last);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	return 0;
}

/* OpenSSL's last error in words ("" when it has none). */
static void
ssl_errstr(char *out, size_t cap)
{
	unsigned long e = ERR_peek_last_error();

	out[0] = '\0';
	if (e != 0)
		ERR_error_string_n(e, out, cap);
}

/*
 * Whether OpenSSL's error e is an alert the server sent about the
 * client's certificate (the only certificate a server judges).
 */
static int
cert_alert(unsigned long e)
{
	if (ERR_GET_LIB(e) != ERR_LIB_SSL)
		return 0;
	switch (ERR_GET_REASON(e)) {
	case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
	case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
	case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
	case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
	case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
		return 1;
	}
	return 0;
}

/*
 * Called by OpenSSL when the server asks for a certificate and none is
 * installed: noted (a TLS 1.2 server that requires one then ends the
 * handshake with a bare handshake_failure), none given.
 */
static int
cert_asked(SSL *ssl, X509 **x, EVP_PKEY **k)
{
	struct tl_drv_rd_conn *c = SSL_get_app_data(ssl);

	(void)x;
	(void)k;
	if (c != NULL)
		c->asked = 1;
	return 0;
}

/* Whether the handshake's failure e is the server's word on our certificate. */
static int
cert_refused(const struct tl_drv_rd_conn *c, unsigned long e)
{
	return cert_alert(e) || (c->asked && !c->presented &&
	    ERR_GET_LIB(e) == ERR_LIB_SSL &&
	    ERR_GET_REASON(e) == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE);
}

/* What the server refused, for a message after "Redis ". */
static const char *
refusal(const struct tl_drv_rd_conn *c)
{
	return c->presented ? "refused the client certificate presented" :
	    "asks for a client certificate (tls-auth-clients) and none was "
	    "presented";
}

static int
is_address(const char *host)
{
	unsigned char b[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, host, b) == 1 ||
	    inet_pton(AF_INET6, host, b) == 1;
}

/* The handshake on c->fd, the server's certificate checked for verify. */
static int
tls_handshake(const struct tl_drv_rd_dial *d, long long deadline,
    struct tl_drv_rd_conn *c, char *why)
{
	char msg[256];
	long vr;
	int n, e, w, rc;

	ERR_clear_error();
	if ((c->ctx = SSL_CTX_new(TLS_client_method())) == NULL ||
	    SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION) != 1)
		return tl_drv_why(why, ENOMEM, "TLS: out of memory");
	if (d->client_cert != NULL || d->client_key != NULL) {
		if ((rc = tl_drv_client_cert_ctx(c->ctx, d->client_cert,
		    d->client_key, why)) != 0)
			return rc;
		c->presented = 1;
	} else
		SSL_CTX_set_client_cert_cb(c->ctx, cert_asked);
	if (d->tls == TL_DRV_TLS_VERIFY) {
		if (SSL_CTX_load_verify_locations(c->ctx, d->ca_file, NULL) !=
		    1) {
			ssl_errstr(msg, sizeof(msg));
			return tl_drv_why(why, TL_EUNTRUSTED, "Redis at %s:%s "
			    "is not trusted, nothing was sent to it: the ca "
			    "cannot be read: %s", d->host, d->port, msg);
		}
		SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	} else
		SSL_CTX_set_verify(c->ctx, SSL_VERIFY_NONE, NULL);
	if ((c->ssl = SSL_new(c->ctx)) == NULL ||
	    SSL_set_fd(c->ssl, c->fd) != 1)
		return tl_drv_why(why, ENOMEM, "TLS: out of memory");
	SSL_set_app_data(c->ssl, c);
	SSL_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (!is_address(d->host) &&
	    SSL_set_tlsext_host_name(c->ssl, d->host) != 1)
		return tl_drv_why(why, TL_EINVAL, "TLS: %s is not a name a "
		    "server can be asked for", d->host);
	if (d->tls == TL_DRV_TLS_VERIFY) {
		SSL_set_hostflags(c->ssl,
		    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if ((is_address(d->host) ?
		    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl),
		    d->host) : SSL_set1_host(c->ssl, d->host)) != 1)
			return tl_drv_why(why, TL_EINVAL, "TLS: cannot check "
			    "the certificate against %s", d->host);
	}
	for (;;) {
		ERR_clear_error();
		if ((n = SSL_connect(c->ssl)) == 1)
			break;
		e = SSL_get_error(c->ssl, n);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			w = wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN :
			    POLLOUT, deadline);
			if (w == 1)
				continue;
			return tl_drv_why(why, TL_EUNREACH, "%s:%s: the TLS "
			    "handshake %s", d->host, d->port, w == 0 ?
			    "timed out" : strerror(errno));
		}
		ssl_errstr(msg, sizeof(msg));
		vr = SSL_get_verify_result(c->ssl);
		if (d->tls == TL_DRV_TLS_VERIFY && vr != X509_V_OK)
			return tl_drv_why(why, TL_EUNTRUSTED, "Redis at %s:%s "
			    "is not trusted, nothing was sent to it: "
			    "certificate verify failed: %s", d->host, d->port,
			    X509_verify_cert_error_string(vr));
		if (e == SSL_ERROR_SSL && cert_refused(c,
		    ERR_peek_last_error())) {
			c->cert_refused = 1;
			return tl_drv_why(why, TL_EAUTH, "Redis at %s:%s %s: %s",
			    d->host, d->port, refusal(c), msg);
		}
		/* The server went away: an outage, not a refusal. */
		if (e != SSL_ERROR_SSL || ERR_GET_REASON(ERR_peek_last_error())
		    == SSL_R_UNEXPECTED_EOF_WHILE_READING)
			return tl_drv_why(why, TL_EUNREACH, "%s:%s: the TLS "
			    "handshake failed: %s", d->host, d->port,
			    msg[0] != '\0' ? msg : e == SSL_ERROR_SYSCALL &&
			    errno != 0 ? strerror(errno) : "connection closed");
		return tl_drv_why(why, TL_EUNTRUSTED, "Redis at %s:%s is not "
		    "trusted, nothing was sent to it: the TLS handshake "
		    "failed: %s", d->host, d->port, msg);
	}
	c->verified = d->tls == TL_DRV_TLS_VERIFY;
	if ((c->reader = redisReaderCreate()) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	return 0;
}

int
tl_drv_rd_connect(const struct tl_drv_rd_dial *d,
    struct tl_drv_rd_conn **out, char *why)
{
	struct tl_drv_rd_conn *c;
	long p;
	int rc;

	*out = NULL;
	if ((rc = port_ok(d->port, &p, why)) != 0)
		return rc;
	if (d->tls == TL_DRV_TLS_VERIFY && d->ca_file == NULL)
		return tl_drv_why(why, TL_EUNTRUSTED, "tls is verify but the "
		    "provider has no ca: tally assign ... --set ca=FILE (the "
		    "CA's PEM), or --set tls=require");
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return tl_drv_why(why, ENOMEM, "out of memory");
	c->fd = -1;
	c->timeout_ms = (d->timeout_s > 0 ? d->timeout_s : 5) * 1000;
	if (d->tls == TL_DRV_TLS_OFF)
		rc = plain_connect(d, p, c, why);
	else if ((rc = tcp_connect(d, now_ms() + c->timeout_ms, c,
	    why)) == 0)
		rc = tls_handshake(d, now_ms() + c->timeout_ms, c, why);
	if (rc != 0) {
		tl_drv_rd_conn_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void
tl_drv_rd_conn_free(struct tl_drv_rd_conn *c)
{
	if (c == NULL)
		return;
	if (c->rc != NULL)
		redisFree(c->rc);
	if (c->ssl != NULL) {
		/* Says goodbye if the socket takes it now; never waits. */
		if (c->err == 0)
			SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
	}
	SSL_CTX_free(c->ctx);
	ERR_clear_error();
	if (c->fd >= 0)
		close(c->fd);
	if (c->reader != NULL)
		redisReaderFree(c->reader);
	if (c->obuf != NULL) {
		sodium_memzero(c->obuf, c->ocap);
		free(c->obuf);
	}
	free(c);
}

static int
fail(struct tl_drv_rd_conn *c, int err, const char *msg)
{
	c->err = err;
	snprintf(c->errstr, sizeof(c->errstr), "%s", msg);
	return REDIS_ERR;
}

int
tl_drv_rd_append(struct tl_drv_rd_conn *c, int argc, const char **argv)
{
	char *cmd = NULL, *nb;
	size_t cap;
	int n;

	if (c->rc != NULL)
		return redisAppendCommandArgv(c->rc, argc, argv, NULL);
	if (c->err)
		return REDIS_ERR;
	if ((n = redisFormatCommandArgv(&cmd, argc, argv, NULL)) < 0)
		return fail(c, REDIS_ERR_OOM, "Out of memory");
	if (c->olen + (size_t)n > c->ocap) {
		for (cap = c->ocap ? c->ocap : 4096; cap < c->olen + (size_t)n;
		    cap *= 2)
			;
		/* Not realloc: what is there may hold a password. */
		if ((nb = malloc(cap)) == NULL) {
			sodium_memzero(cmd, (size_t)n);
			redisFreeCommand(cmd);
			return fail(c, REDIS_ERR_OOM, "Out of memory");
		}
		if (c->obuf != NULL) {
			memcpy(nb, c->obuf, c->olen);
			sodium_memzero(c->obuf, c->ocap);
			free(c->obuf);
		}
		c->obuf = nb;
		c->ocap = cap;
	}
	memcpy(c->obuf + c->olen, cmd, (size_t)n);
	c->olen += (size_t)n;
	sodium_memzero(cmd, (size_t)n);
	redisFreeCommand(cmd);
	return REDIS_OK;
}

/*
 * The connection in error for the alert about its certificate that
 * OpenSSL's error queue holds.  Not an I/O error: dialling again would
 * be refused again.
 */
static void
refused_now(struct tl_drv_rd_conn *c)
{
	char msg[240], s[100];

	c->cert_refused = 1;
	ssl_errstr(s, sizeof(s));
	snprintf(msg, sizeof(msg), "Redis %s: %s", refusal(c), s);
	fail(c, REDIS_ERR_OTHER, msg);
}

/*
 * After a write failed: an alert about the certificate the server sent
 * before it went, if it is there to read.  Under TLS 1.3 the server
 * judges the certificate after the client's handshake is done, while
 * the first command is being written; closing on it unread, it resets
 * the connection, and the write sees only the reset.  What came before
 * the reset is still in the socket: one read, never waiting.
 */
static void
tls_salvage(struct tl_drv_rd_conn *c)
{
	char buf[512];
	int n;

	ERR_clear_error();
	n = SSL_read(c->ssl, buf, sizeof(buf));
	if (n <= 0 && SSL_get_error(c->ssl, n) == SSL_ERROR_SSL &&
	    cert_alert(ERR_peek_last_error()))
		refused_now(c);
	sodium_memzero(buf, sizeof(buf));
	ERR_clear_error();
}

/*
 * What SSL_read or SSL_write's failure e means: 1 when the socket is
 * waited on and ready (try again), else the connection is in error.
 */
static int
tls_wait(struct tl_drv_rd_conn *c, int n, const char *op)
{
	char msg[240];
	int e = SSL_get_error(c->ssl, n), w;

	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		w = wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
		    now_ms() + c->timeout_ms);
		if (w == 1)
			return 1;
		snprintf(msg, sizeof(msg), "%s: %s", op, w == 0 ?
		    "timed out" : strerror(errno));
		return fail(c, REDIS_ERR_IO, msg), 0;
	}
	if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL &&
	    ERR_peek_last_error() == 0 && (n == 0 || errno == 0)) ||
	    (e == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_last_error()) ==
	    SSL_R_UNEXPECTED_EOF_WHILE_READING))
		return fail(c, REDIS_ERR_EOF, "Server closed the connection"),
		    0;
	if (e == SSL_ERROR_SSL && cert_alert(ERR_peek_last_error()))
		return refused_now(c), 0;
	if (e == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0)
		snprintf(msg, sizeof(msg), "%s: %s", op, strerror(errno));
	else {
		char s[100];

		ssl_errstr(s, sizeof(s));
		snprintf(msg, sizeof(msg), "%s: %s", op, s);
	}
	return fail(c, REDIS_ERR_IO, msg), 0;
}

/* Sends everything appended, then wipes it. */
static int
tls_flush(struct tl_drv_rd_conn *c)
{
	size_t off = 0;
	int n;

	while (off < c->olen) {
		ERR_clear_error();
		n = SSL_write(c->ssl, c->obuf + off, (int)(c->olen - off >
		    (1u << 30) ? 1u << 30 : c->olen - off));
		if (n > 0)
			off += (size_t)n;
		else if (!tls_wait(c, n, "write")) {
			if (!c->cert_refused)
				tls_salvage(c);
			break;
		}
	}
	sodium_memzero(c->obuf, c->olen);
	c->olen = 0;
	return c->err ? REDIS_ERR : REDIS_OK;
}

/* Reads what the server sent into the reader. */
static int
tls_fill(struct tl_drv_rd_conn *c)
{
	char buf[16384];
	int n;

	for (;;) {
		ERR_clear_error();
		if ((n = SSL_read(c->ssl, buf, sizeof(buf))) > 0)
			break;
		if (!tls_wait(c, n, "read"))
			return REDIS_ERR;
	}
	if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
		return fail(c, REDIS_ERR_OOM, "Out of memory");
	return REDIS_OK;
}

static int
from_reader(struct tl_drv_rd_conn *c, void **v)
{
	if (redisReaderGetReply(c->reader, v) == REDIS_OK)
		return REDIS_OK;
	return fail(c, c->reader->err ? c->reader->err : REDIS_ERR_PROTOCOL,
	    c->reader->errstr[0] != '\0' ? c->reader->errstr :
	    "Protocol error");
}

int
tl_drv_rd_reply(struct tl_drv_rd_conn *c, redisReply **r)
{
	void *v = NULL;

	*r = NULL;
	if (c->rc != NULL) {
		if (redisGetReply(c->rc, &v) != REDIS_OK)
			return REDIS_ERR;
		*r = v;
		return REDIS_OK;
	}
	if (c->err || from_reader(c, &v) != REDIS_OK)
		return REDIS_ERR;
	if (v == NULL) {
		if (tls_flush(c) != REDIS_OK)
			return REDIS_ERR;
		do
			if (tls_fill(c) != REDIS_OK ||
			    from_reader(c, &v) != REDIS_OK)
				return REDIS_ERR;
		while (v == NULL);
	}
	*r = v;
	return REDIS_OK;
}

redisReply *
tl_drv_rd_command(struct tl_drv_rd_conn *c, int argc, const char **argv)
{
	redisReply *r;

	if (tl_drv_rd_append(c, argc, argv) != REDIS_OK ||
	    tl_drv_rd_reply(c, &r) != REDIS_OK)
		return NULL;
	return r;
}

int
tl_drv_rd_err(const struct tl_drv_rd_conn *c)
{
	return c->rc != NULL ? c->rc->err : c->err;
}

const char *
tl_drv_rd_errstr(const struct tl_drv_rd_conn *c)
{
	return c->rc != NULL ? c->rc->errstr : c->errstr;
}

int
tl_drv_rd_cert_refused(const struct tl_drv_rd_conn *c)
{
	return c->rc == NULL && c->cert_refused;
}

const char *
tl_drv_rd_protection(const struct tl_drv_rd_conn *c)
{
	return c->rc != NULL ? "plaintext" : c->verified ? "TLS, verified" :
	    "TLS, not verified";
}
