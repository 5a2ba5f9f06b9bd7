/*
 * amqp.c - the AMQP client over librabbitmq-c (see amqp.h).
 *
 * Confirms: the broker acknowledges publishes on the confirm channel
 * by delivery tag, singly or "multiple" (every tag up to this one),
 * not necessarily in order.  A ring of flags over the unconfirmed
 * window keeps the confirmed prefix, which is all a caller needs: the
 * publisher moves its checkpoint to the last event whose messages are
 * all inside that prefix.
 */
#define _GNU_SOURCE

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <arpa/inet.h>
#include <errno.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "core/error.h"
#include "core/amqp.h"

#define CH_PUB	1
#define CH_CON	2
#define RING	(TL_AMQP_WINDOW * 2)

struct tl_amqp {
	amqp_connection_state_t	 conn;
	int			 open;		/* logged in */
	int			 dead;		/* an error: no graceful close */
	unsigned		 timeout_ms;
	uint64_t		 pub_tag;	/* last tag published */
	uint64_t		 confirmed;	/* every tag <= this is confirmed */
	int			 nacked;
	int			 blocked;	/* connection.blocked, not yet
						   unblocked */
	uint8_t			 ring[RING / 8];
	size_t			 max_body;	/* tl_amqp_next: 0, none */
	char			 lasterr[256];
	char			 blockedwhy[TL_WHY_MAX];
};

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
seterr(struct tl_amqp *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
seterr(struct tl_amqp *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(a->lasterr, sizeof(a->lasterr), fmt, ap);
	va_end(ap);
}

const char *
tl_amqp_lasterr(const struct tl_amqp *a)
{
	if (a != NULL && a->blocked)
		return a->blockedwhy;
	return a != NULL ? a->lasterr : "";
}

/* Translates a library status; the connection is dead afterwards. */
static int
status_err(struct tl_amqp *a, int st, const char *what)
{
	a->dead = 1;
	seterr(a, "%s: %s", what, amqp_error_string2(st));
	switch (st) {
	case AMQP_STATUS_TIMEOUT:
	case AMQP_STATUS_HEARTBEAT_TIMEOUT:
		return TL_ETIMEDOUT;
	case AMQP_STATUS_SOCKET_ERROR:
	case AMQP_STATUS_CONNECTION_CLOSED:
	case AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED:
	case AMQP_STATUS_TCP_ERROR:
	case AMQP_STATUS_SOCKET_CLOSED:
		return TL_EUNREACH;
	default:
		return TL_EDRIVER;
	}
}

/* Reports a connection.close or channel.close from the broker. */
static int
close_err(struct tl_amqp *a, const amqp_method_t *m, const char *what)
{
	unsigned code = 0;
	amqp_bytes_t text = amqp_empty_bytes;

	a->dead = 1;
	if (m->id == AMQP_CONNECTION_CLOSE_METHOD) {
		amqp_connection_close_t *c = m->decoded;

		code = c->reply_code;
		text = c->reply_text;
		/* Be polite: the broker waits for close-ok. */
		amqp_send_method(a->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD,
		    &(amqp_connection_close_ok_t){ 0 });
		a->open = 0;
	} else if (m->id == AMQP_CHANNEL_CLOSE_METHOD) {
		amqp_channel_close_t *c = m->decoded;

		code = c->reply_code;
		text = c->reply_text;
	}
	seterr(a, "%s: broker closed the %s: %u %.*s", what,
	    m->id == AMQP_CONNECTION_CLOSE_METHOD ? "connection" : "channel",
	    code, (int)(text.len > 160 ? 160 : text.len),
	    (const char *)text.bytes);
	switch (code) {
	case 403:
		return TL_EAUTH;
	case 404:
		return TL_ENOTFOUND;
	case 406:
		return TL_ECONFLICT;
	case 320:	/* connection forced: the broker is going away */
		return TL_EUNREACH;
	default:
		return TL_EDRIVER;
	}
}

static int	on_frame(struct tl_amqp *, const amqp_frame_t *, const char *);

/*
 * A blocked connection's broker reads nothing more from it, so an RPC
 * after a publish times out; the connection.blocked that says why came
 * while librabbitmq waited for the reply, and was queued as a frame of
 * another channel.  Reads the queued frames for it (the connection is
 * dead by now: they are nothing else's).
 */
static void
queued_block(struct tl_amqp *a)
{
	amqp_frame_t f;
	struct timeval tv = { 0, 0 };

	while (amqp_frames_enqueued(a->conn) &&
	    amqp_simple_wait_frame_noblock(a->conn, &f, &tv) ==
	    AMQP_STATUS_OK)
		if (f.frame_type == AMQP_FRAME_METHOD && f.channel == 0 &&
		    (f.payload.method.id == AMQP_CONNECTION_BLOCKED_METHOD ||
		    f.payload.method.id == AMQP_CONNECTION_UNBLOCKED_METHOD))
			on_frame(a, &f, "");
}

static int
rpc_err(struct tl_amqp *a, amqp_rpc_reply_t r, const char *what)
{
	switch (r.reply_type) {
	case AMQP_RESPONSE_NORMAL:
		return 0;
	case AMQP_RESPONSE_LIBRARY_EXCEPTION:
		if (r.library_error == AMQP_STATUS_TIMEOUT)
			queued_block(a);
		return status_err(a, r.library_error, what);
	case AMQP_RESPONSE_SERVER_EXCEPTION:
		return close_err(a, &r.reply, what);
	default:
		a->dead = 1;
		seterr(a, "%s: no reply", what);
		return TL_EDRIVER;
	}
}

static int
last_rpc(struct tl_amqp *a, const char *what)
{
	return rpc_err(a, amqp_get_rpc_reply(a->conn), what);
}

static amqp_bytes_t
bytes(const char *s)
{
	return s != NULL ? amqp_cstring_bytes(s) : amqp_empty_bytes;
}

static void
set_sndtimeo(struct tl_amqp *a)
{
	struct timeval tv;
	int fd = amqp_get_sockfd(a->conn);

	if (fd < 0)
		return;
	tv.tv_sec = a->timeout_ms / 1000;
	tv.tv_usec = (a->timeout_ms % 1000) * 1000;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/*
 * librabbitmq's own host check compares DNS names only, so a broker
 * reached at an IP address never verifies: for an address, OpenSSL
 * checks it against the certificate's IP SANs during the handshake
 * instead (the peer is verified all the same).  0, or TL_EDRIVER.
 */
static int
ip_checked(amqp_socket_t *sock, const char *host)
{
	unsigned char buf[sizeof(struct in6_addr)];
	SSL_CTX *ctx;

	if (inet_pton(AF_INET, host, buf) != 1 &&
	    inet_pton(AF_INET6, host, buf) != 1)
		return 0;
	if ((ctx = amqp_ssl_socket_get_context(sock)) == NULL ||
	    X509_VERIFY_PARAM_set1_ip_asc(SSL_CTX_get0_param(ctx),
	    host) != 1)
		return TL_EDRIVER;
	amqp_ssl_socket_set_verify_hostname(sock, 0);
	return 0;
}

int
tl_amqp_connect(const struct tl_amqp_conf *c, struct tl_amqp **out,
    char *why)
{
	struct tl_amqp *a;
	amqp_socket_t *sock;
	struct timeval tv;
	amqp_rpc_reply_t r;
	amqp_table_entry_t cap, prop;
	amqp_table_t props;
	int st, rc, port = c->port;

	*out = NULL;
	if (why != NULL)
		why[0] = '\0';
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return ENOMEM;
	a->timeout_ms = c->timeout_ms ? c->timeout_ms : 5000;
	tv.tv_sec = a->timeout_ms / 1000;
	tv.tv_usec = (a->timeout_ms % 1000) * 1000;
	if (port == 0)
		port = c->tls ? 5671 : 5672;
	if ((a->conn = amqp_new_connection()) == NULL) {
		free(a);
		return ENOMEM;
	}
	if (c->tls) {
		if ((sock = amqp_ssl_socket_new(a->conn)) == NULL) {
			seterr(a, "TLS socket: cannot create");
			rc = TL_EDRIVER;
			goto fail;
		}
		amqp_ssl_socket_set_verify_peer(sock, !c->noverify);
		amqp_ssl_socket_set_verify_hostname(sock, !c->noverify);
		if (!c->noverify && (rc = ip_checked(sock, c->host)) != 0) {
			seterr(a, "TLS: cannot check the address %s", c->host);
			goto fail;
		}
		if (c->cafile != NULL && *c->cafile != '\0' &&
		    (st = amqp_ssl_socket_set_cacert(sock, c->cafile)) != 0) {
			rc = status_err(a, st, "TLS CA file");
			goto fail;
		}
	} else if ((sock = amqp_tcp_socket_new(a->conn)) == NULL) {
		seterr(a, "socket: cannot create");
		rc = TL_EDRIVER;
		goto fail;
	}
	if ((st = amqp_socket_open_noblock(sock, c->host, port, &tv)) != 0) {
		rc = status_err(a, st, "connect");
		if (rc == TL_EDRIVER || rc == TL_ETIMEDOUT)
			rc = TL_EUNREACH;
		goto fail;
	}
	amqp_set_handshake_timeout(a->conn, &tv);
	amqp_set_rpc_timeout(a->conn, &tv);
	set_sndtimeo(a);
	/*
	 * The capability connection.blocked: RabbitMQ then says why it stops
	 * reading (a memory or disk alarm) instead of only going quiet, and
	 * a publisher waiting for confirms can report it.  librabbitmq
	 * merges it with its own capabilities.
	 */
	cap.key = amqp_cstring_bytes("connection.blocked");
	cap.value.kind = AMQP_FIELD_KIND_BOOLEAN;
	cap.value.value.boolean = 1;
	prop.key = amqp_cstring_bytes("capabilities");
	prop.value.kind = AMQP_FIELD_KIND_TABLE;
	prop.value.value.table.num_entries = 1;
	prop.value.value.table.entries = &cap;
	props.num_entries = 1;
	props.entries = &prop;
	r = amqp_login_with_properties(a->conn, c->vhost[0] ? c->vhost : "/",
	    0, 131072, (int)c->heartbeat, &props, AMQP_SASL_METHOD_PLAIN,
	    c->user, c->password ? c->password : "");
	if ((rc = rpc_err(a, r, "login")) != 0) {
		/* RabbitMQ drops the socket on a bad password. */
		if (rc == TL_EUNREACH && r.library_error ==
		    AMQP_STATUS_CONNECTION_CLOSED)
			rc = TL_EAUTH;
		goto fail;
	}
	a->open = 1;
	amqp_channel_open(a->conn, CH_PUB);
	if ((rc = last_rpc(a, "channel.open")) != 0)
		goto fail;
	amqp_channel_open(a->conn, CH_CON);
	if ((rc = last_rpc(a, "channel.open")) != 0)
		goto fail;
	amqp_confirm_select(a->conn, CH_PUB);
	if ((rc = last_rpc(a, "confirm.select")) != 0)
		goto fail;
	*out = a;
	return 0;
fail:
	if (why != NULL)
		snprintf(why, TL_WHY_MAX, "%s", a->lasterr);
	tl_amqp_close(a);
	return rc;
}

void
tl_amqp_close(struct tl_amqp *a)
{
	if (a == NULL)
		return;
	if (a->open && !a->dead) {
		struct timeval tv = { 1, 0 };

		amqp_set_rpc_timeout(a->conn, &tv);
		amqp_connection_close(a->conn, AMQP_REPLY_SUCCESS);
	}
	amqp_destroy_connection(a->conn);
	free(a);
}

int
tl_amqp_exchange(struct tl_amqp *a, const char *name, const char *type,
    int durable)
{
	amqp_exchange_declare(a->conn, CH_CON, bytes(name), bytes(type), 0,
	    durable ? 1 : 0, 0, 0, amqp_empty_table);
	return last_rpc(a, "exchange.declare");
}

int
tl_amqp_queue(struct tl_amqp *a, const char *name, int durable)
{
	amqp_queue_declare(a->conn, CH_CON, bytes(name), 0, durable ? 1 : 0,
	    0, 0, amqp_empty_table);
	return last_rpc(a, "queue.declare");
}

int
tl_amqp_stream(struct tl_amqp *a, const char *name)
{
	amqp_table_entry_t e;
	amqp_table_t args;

	e.key = bytes("x-queue-type");
	e.value.kind = AMQP_FIELD_KIND_UTF8;
	e.value.value.bytes = bytes("stream");
	args.num_entries = 1;
	args.entries = &e;
	amqp_queue_declare(a->conn, CH_CON, bytes(name), 0, 1, 0, 0, args);
	return last_rpc(a, "queue.declare (stream)");
}

int
tl_amqp_bind(struct tl_amqp *a, const char *queue, const char *exchange,
    const char *key)
{
	amqp_queue_bind(a->conn, CH_CON, bytes(queue), bytes(exchange),
	    bytes(key), amqp_empty_table);
	return last_rpc(a, "queue.bind");
}

int
tl_amqp_unbind(struct tl_amqp *a, const char *queue, const char *exchange,
    const char *key)
{
	amqp_queue_unbind(a->conn, CH_CON, bytes(queue), bytes(exchange),
	    bytes(key), amqp_empty_table);
	return last_rpc(a, "queue.unbind");
}

int
tl_amqp_purge(struct tl_amqp *a, const char *queue)
{
	amqp_queue_purge(a->conn, CH_CON, bytes(queue));
	return last_rpc(a, "queue.purge");
}

/* The confirm ring: one flag per unconfirmed tag above a->confirmed. */
static void
mark(struct tl_amqp *a, uint64_t tag)
{
	uint64_t i = tag % RING;

	a->ring[i / 8] |= (uint8_t)(1u << (i % 8));
}

static void
advance(struct tl_amqp *a)
{
	for (;;) {
		uint64_t i = (a->confirmed + 1) % RING;

		if (a->confirmed >= a->pub_tag ||
		    !(a->ring[i / 8] & (1u << (i % 8))))
			break;
		a->ring[i / 8] &= (uint8_t)~(1u << (i % 8));
		a->confirmed++;
	}
}

static void
on_ack(struct tl_amqp *a, uint64_t tag, int multiple)
{
	uint64_t t;

	if (tag > a->pub_tag)
		tag = a->pub_tag;
	if (multiple) {
		for (t = a->confirmed + 1; t <= tag; t++)
			mark(a, t);
	} else if (tag > a->confirmed)
		mark(a, tag);
	advance(a);
}

/*
 * Handles one frame that is not a delivery being read: confirms,
 * closes.  Returns 0 to go on, or an error.
 */
static int
on_frame(struct tl_amqp *a, const amqp_frame_t *f, const char *what)
{
	if (f->frame_type != AMQP_FRAME_METHOD)
		return 0;	/* stray content frames: nothing to do */
	switch (f->payload.method.id) {
	case AMQP_BASIC_ACK_METHOD: {
		amqp_basic_ack_t *m = f->payload.method.decoded;

		if (f->channel == CH_PUB)
			on_ack(a, m->delivery_tag, m->multiple);
		return 0;
	}
	case AMQP_BASIC_NACK_METHOD: {
		amqp_basic_nack_t *m = f->payload.method.decoded;

		if (f->channel != CH_PUB)
			return 0;
		a->nacked = 1;
		seterr(a, "%s: the broker refused message %llu", what,
		    (unsigned long long)m->delivery_tag);
		return TL_EREFUSED;
	}
	case AMQP_CHANNEL_CLOSE_METHOD:
	case AMQP_CONNECTION_CLOSE_METHOD:
		return close_err(a, &f->payload.method, what);
	case AMQP_CONNECTION_BLOCKED_METHOD: {
		amqp_connection_blocked_t *m = f->payload.method.decoded;

		/*
		 * While blocked, the block is the last error whatever fails
		 * next (a send or a wait that times out): it is the cause.
		 */
		(void)what;
		a->blocked = 1;
		snprintf(a->blockedwhy, sizeof(a->blockedwhy), "the broker "
		    "blocked publishing (connection.blocked: %.*s)",
		    m->reason.len > 160 ? 160 : (int)m->reason.len,
		    (const char *)m->reason.bytes);
		return 0;
	}
	case AMQP_CONNECTION_UNBLOCKED_METHOD:
		a->blocked = 0;
		return 0;
	default:
		return 0;
	}
}

static struct timeval
left(uint64_t deadline)
{
	struct timeval tv = { 0, 0 };
	uint64_t now = mono_ns();

	if (deadline > now) {
		uint64_t d = deadline - now;

		tv.tv_sec = (time_t)(d / 1000000000u);
		tv.tv_usec = (suseconds_t)((d % 1000000000u) / 1000u);
	}
	return tv;
}

int
tl_amqp_wait_confirms(struct tl_amqp *a, uint64_t upto, uint64_t deadline)
{
	amqp_frame_t f;
	struct timeval tv;
	int st, rc;

	if (a->dead)
		return TL_EUNREACH;
	if (upto > a->pub_tag)
		upto = a->pub_tag;
	while (a->confirmed < upto) {
		tv = left(deadline);
		st = amqp_simple_wait_frame_noblock(a->conn, &f, &tv);
		if (st == AMQP_STATUS_TIMEOUT) {
			amqp_maybe_release_buffers(a->conn);
			seterr(a, "waiting for confirms: timed out");
			return TL_ETIMEDOUT;
		}
		if (st != AMQP_STATUS_OK)
			return status_err(a, st, "waiting for confirms");
		if ((rc = on_frame(a, &f, "confirms")) != 0)
			return rc;
		amqp_maybe_release_buffers_on_channel(a->conn, f.channel);
	}
	amqp_maybe_release_buffers(a->conn);
	return a->nacked ? TL_EREFUSED : 0;
}

uint64_t
tl_amqp_confirmed(const struct tl_amqp *a)
{
	return a->confirmed;
}

uint64_t
tl_amqp_published(const struct tl_amqp *a)
{
	return a->pub_tag;
}

int
tl_amqp_publish(struct tl_amqp *a, const struct tl_amqp_msg *m,
    uint64_t *tagp)
{
	amqp_basic_properties_t p;
	amqp_table_entry_t ent[TL_AMQP_MAXHDR];
	amqp_bytes_t body;
	size_t i;
	int st, rc;

	if (a->dead)
		return TL_EUNREACH;
	if (m->nhdr > TL_AMQP_MAXHDR)
		return TL_EINVAL;
	/* Keep the window: wait for half of it to drain. */
	if (a->pub_tag - a->confirmed >= TL_AMQP_WINDOW) {
		rc = tl_amqp_wait_confirms(a, a->pub_tag - TL_AMQP_WINDOW / 2,
		    mono_ns() + (uint64_t)a->timeout_ms * 1000000u);
		if (rc == TL_ETIMEDOUT) {
			a->dead = 1;
			seterr(a, "publish: no confirms for %u ms",
			    a->timeout_ms);
		}
		if (rc != 0)
			return rc;
	}
	memset(&p, 0, sizeof(p));
	if (m->content_type != NULL) {
		p._flags |= AMQP_BASIC_CONTENT_TYPE_FLAG;
		p.content_type = bytes(m->content_type);
	}
	if (m->persistent) {
		p._flags |= AMQP_BASIC_DELIVERY_MODE_FLAG;
		p.delivery_mode = 2;
	}
	if (m->message_id != NULL) {
		p._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
		p.message_id = bytes(m->message_id);
	}
	if (m->type != NULL) {
		p._flags |= AMQP_BASIC_TYPE_FLAG;
		p.type = bytes(m->type);
	}
	if (m->timestamp != 0) {
		p._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
		p.timestamp = m->timestamp;
	}
	if (m->nhdr > 0) {
		for (i = 0; i < m->nhdr; i++) {
			ent[i].key = bytes(m->hdr[i].key);
			if (m->hdr[i].str != NULL) {
				ent[i].value.kind = AMQP_FIELD_KIND_UTF8;
				ent[i].value.value.bytes = bytes(m->hdr[i].str);
			} else {
				ent[i].value.kind = AMQP_FIELD_KIND_I64;
				ent[i].value.value.i64 = m->hdr[i].num;
			}
		}
		p._flags |= AMQP_BASIC_HEADERS_FLAG;
		p.headers.num_entries = (int)m->nhdr;
		p.headers.entries = ent;
	}
	body.bytes = (void *)m->body;
	body.len = m->len;
	st = amqp_basic_publish(a->conn, CH_PUB, bytes(m->exchange ?
	    m->exchange : ""), bytes(m->routing_key), 0, 0, &p, body);
	if (st != AMQP_STATUS_OK)
		return status_err(a, st, "publish");
	a->pub_tag++;
	if (tagp != NULL)
		*tagp = a->pub_tag;
	return 0;
}

void
tl_amqp_delivery_free(struct tl_amqp_delivery *d)
{
	if (d == NULL)
		return;
	free(d->body);
	d->body = NULL;
	d->len = 0;
}

static void
copyb(char *dst, size_t cap, amqp_bytes_t b)
{
	size_t n = b.len < cap - 1 ? b.len : cap - 1;

	if (n > 0)
		memcpy(dst, b.bytes, n);
	dst[n] = '\0';
}

static void
fill_props(struct tl_amqp_delivery *d, const amqp_basic_properties_t *p)
{
	int i;

	d->seq = -1;
	d->offset = -1;
	d->auth = -1;
	d->epoch = -1;
	if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
		copyb(d->message_id, sizeof(d->message_id), p->message_id);
	if (p->_flags & AMQP_BASIC_TYPE_FLAG)
		copyb(d->type, sizeof(d->type), p->type);
	if (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
		copyb(d->content_type, sizeof(d->content_type),
		    p->content_type);
	if (p->_flags & AMQP_BASIC_USER_ID_FLAG)
		copyb(d->user_id, sizeof(d->user_id), p->user_id);
	if (p->_flags & AMQP_BASIC_HEADERS_FLAG) {
		for (i = 0; i < p->headers.num_entries; i++) {
			const amqp_table_entry_t *e = &p->headers.entries[i];

			int64_t *dst;

			if (e->key.len == 4 && memcmp(e->key.bytes, "hash",
			    4) == 0) {
				if (e->value.kind == AMQP_FIELD_KIND_UTF8 ||
				    e->value.kind == AMQP_FIELD_KIND_BYTES)
					copyb(d->hash, sizeof(d->hash),
					    e->value.value.bytes);
				continue;
			}
			if (e->key.len == 3 && memcmp(e->key.bytes, "mac",
			    3) == 0) {
				if (e->value.kind == AMQP_FIELD_KIND_UTF8 ||
				    e->value.kind == AMQP_FIELD_KIND_BYTES)
					copyb(d->mac, sizeof(d->mac),
					    e->value.value.bytes);
				continue;
			}
			if (e->key.len == 3 && memcmp(e->key.bytes, "sig",
			    3) == 0) {
				if (e->value.kind == AMQP_FIELD_KIND_UTF8 ||
				    e->value.kind == AMQP_FIELD_KIND_BYTES)
					copyb(d->sig, sizeof(d->sig),
					    e->value.value.bytes);
				continue;
			}
			if (e->key.len == 3 && memcmp(e->key.bytes, "seq",
			    3) == 0)
				dst = &d->seq;
			else if (e->key.len == 15 && memcmp(e->key.bytes,
			    "x-stream-offset", 15) == 0)
				dst = &d->offset;
			else if (e->key.len == 4 && memcmp(e->key.bytes,
			    "auth", 4) == 0)
				dst = &d->auth;
			else if (e->key.len == 5 && memcmp(e->key.bytes,
			    "epoch", 5) == 0)
				dst = &d->epoch;
			else
				continue;
			switch (e->value.kind) {
			case AMQP_FIELD_KIND_I64:
				*dst = e->value.value.i64;
				break;
			case AMQP_FIELD_KIND_U64:
				*dst = (int64_t)e->value.value.u64;
				break;
			case AMQP_FIELD_KIND_I32:
				*dst = e->value.value.i32;
				break;
			case AMQP_FIELD_KIND_U32:
				*dst = e->value.value.u32;
				break;
			default:
				break;
			}
		}
	}
}

static int
fill(struct tl_amqp_delivery *d, const amqp_message_t *msg)
{
	fill_props(d, &msg->properties);
	d->len = msg->body.len;
	if ((d->body = malloc(d->len + 1)) == NULL)
		return ENOMEM;
	if (d->len > 0)
		memcpy(d->body, msg->body.bytes, d->len);
	((char *)d->body)[d->len] = '\0';
	return 0;
}

int
tl_amqp_get(struct tl_amqp *a, const char *queue, struct tl_amqp_delivery *d)
{
	amqp_rpc_reply_t r;
	amqp_message_t msg;
	amqp_basic_get_ok_t *ok;
	int rc;

	memset(d, 0, sizeof(*d));
	if (a->dead)
		return TL_EUNREACH;
	r = amqp_basic_get(a->conn, CH_CON, bytes(queue), 0);
	if ((rc = rpc_err(a, r, "basic.get")) != 0)
		return rc;
	if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
		return TL_ENOTFOUND;
	ok = r.reply.decoded;
	d->tag = ok->delivery_tag;
	d->redelivered = ok->redelivered;
	copyb(d->exchange, sizeof(d->exchange), ok->exchange);
	copyb(d->routing_key, sizeof(d->routing_key), ok->routing_key);
	r = amqp_read_message(a->conn, CH_CON, &msg, 0);
	if ((rc = rpc_err(a, r, "basic.get content")) != 0)
		return rc;
	rc = fill(d, &msg);
	amqp_destroy_message(&msg);
	amqp_maybe_release_buffers(a->conn);
	return rc;
}

int
tl_amqp_consume(struct tl_amqp *a, const char *queue, unsigned prefetch)
{
	int rc;

	amqp_basic_qos(a->conn, CH_CON, 0, (uint16_t)(prefetch > 65535 ?
	    65535 : prefetch), 0);
	if ((rc = last_rpc(a, "basic.qos")) != 0)
		return rc;
	amqp_basic_consume(a->conn, CH_CON, bytes(queue), amqp_empty_bytes,
	    0, 0, 0, amqp_empty_table);
	return last_rpc(a, "basic.consume");
}

int
tl_amqp_consume_stream(struct tl_amqp *a, const char *queue,
    unsigned prefetch, int64_t offset)
{
	amqp_table_entry_t e;
	amqp_table_t args;
	int rc;

	/* A stream refuses a consumer without a prefetch (credit). */
	amqp_basic_qos(a->conn, CH_CON, 0, (uint16_t)(prefetch == 0 ? 1 :
	    prefetch > 65535 ? 65535 : prefetch), 0);
	if ((rc = last_rpc(a, "basic.qos")) != 0)
		return rc;
	e.key = bytes("x-stream-offset");
	if (offset < 0) {
		e.value.kind = AMQP_FIELD_KIND_UTF8;
		e.value.value.bytes = bytes("first");
	} else {
		e.value.kind = AMQP_FIELD_KIND_I64;
		e.value.value.i64 = offset;
	}
	args.num_entries = 1;
	args.entries = &e;
	amqp_basic_consume(a->conn, CH_CON, bytes(queue), amqp_empty_bytes,
	    0, 0, 0, args);
	return last_rpc(a, "basic.consume (stream)");
}

void
tl_amqp_set_max_body(struct tl_amqp *a, size_t max)
{
	a->max_body = max;
}

/* One frame by the deadline; TL_ETIMEDOUT or the library's error. */
static int
frame(struct tl_amqp *a, uint64_t deadline, amqp_frame_t *f, const char *what)
{
	struct timeval tv = left(deadline);
	int st;

	/* Never 0: a zero timeout can stop inside a frame. */
	if (tv.tv_sec == 0 && tv.tv_usec < 1000)
		tv.tv_usec = 1000;
	st = amqp_simple_wait_frame_noblock(a->conn, f, &tv);
	if (st == AMQP_STATUS_TIMEOUT)
		return TL_ETIMEDOUT;
	if (st != AMQP_STATUS_OK)
		return status_err(a, st, what);
	return 0;
}

/*
 * A delivery frame by frame (what amqp_consume_message does), so that
 * the header frame's body size is seen before the body is held: a body
 * over a->max_body is read and dropped frame by frame.
 */
int
tl_amqp_next(struct tl_amqp *a, uint64_t deadline, struct tl_amqp_delivery *d)
{
	amqp_basic_deliver_t *dv;
	amqp_basic_properties_t *p;
	amqp_frame_t f;
	uint64_t size, got = 0, rest;
	char *body = NULL;
	int rc;

	memset(d, 0, sizeof(*d));
	if (a->dead)
		return TL_EUNREACH;
	amqp_maybe_release_buffers(a->conn);
	for (;;) {
		if ((rc = frame(a, deadline, &f, "consume")) != 0)
			return rc;
		if (f.frame_type == AMQP_FRAME_METHOD &&
		    f.payload.method.id == AMQP_BASIC_DELIVER_METHOD)
			break;
		if (f.frame_type == AMQP_FRAME_METHOD &&
		    f.payload.method.id == AMQP_BASIC_CANCEL_METHOD) {
			a->dead = 1;
			seterr(a, "consume: the broker cancelled the "
			    "consumer (queue deleted?)");
			return TL_ENOTFOUND;
		}
		if ((rc = on_frame(a, &f, "consume")) != 0)
			return rc;
	}
	dv = f.payload.method.decoded;
	d->tag = dv->delivery_tag;
	d->redelivered = dv->redelivered;
	copyb(d->exchange, sizeof(d->exchange), dv->exchange);
	copyb(d->routing_key, sizeof(d->routing_key), dv->routing_key);
	/* The rest of the message is not cut by the caller's deadline. */
	rest = mono_ns() + (uint64_t)(a->timeout_ms ? a->timeout_ms : 30000) *
	    1000000u;
	if ((rc = frame(a, rest, &f, "consume (header)")) != 0 ||
	    f.frame_type != AMQP_FRAME_HEADER) {
		a->dead = 1;
		if (rc == 0 || rc == TL_ETIMEDOUT) {
			seterr(a, "consume: a delivery without its content "
			    "header");
			rc = TL_EUNREACH;
		}
		return rc;
	}
	size = f.payload.properties.body_size;
	p = f.payload.properties.decoded;
	fill_props(d, p);
	if (a->max_body > 0 && size > a->max_body)
		d->oversized = 1;
	else if ((body = malloc((size_t)size + 1)) == NULL)
		return ENOMEM;
	while (got < size) {
		rest = mono_ns() + (uint64_t)(a->timeout_ms ? a->timeout_ms :
		    30000) * 1000000u;
		if ((rc = frame(a, rest, &f, "consume (body)")) != 0 ||
		    f.frame_type != AMQP_FRAME_BODY ||
		    f.payload.body_fragment.len > size - got) {
			free(body);
			a->dead = 1;
			if (rc == 0 || rc == TL_ETIMEDOUT) {
				seterr(a, "consume: a delivery's body cut "
				    "short");
				rc = TL_EUNREACH;
			}
			return rc;
		}
		if (body != NULL)
			memcpy(body + got, f.payload.body_fragment.bytes,
			    f.payload.body_fragment.len);
		got += f.payload.body_fragment.len;
		/* Only this frame is held: what it decoded is dropped. */
		amqp_maybe_release_buffers_on_channel(a->conn, f.channel);
	}
	if (body != NULL)
		body[size] = '\0';
	d->body = body;
	d->len = (size_t)size;
	return 0;
}

int
tl_amqp_ack(struct tl_amqp *a, uint64_t tag, int multiple)
{
	int st;

	if (a->dead)
		return TL_EUNREACH;
	if ((st = amqp_basic_ack(a->conn, CH_CON, tag, multiple ? 1 : 0)) != 0)
		return status_err(a, st, "basic.ack");
	return 0;
}

int
tl_amqp_fd(const struct tl_amqp *a)
{
	return a != NULL && !a->dead ? amqp_get_sockfd(a->conn) : -1;
}
