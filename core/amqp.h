/*
 * amqp.h - a small AMQP 0-9-1 client over librabbitmq-c.
 *
 * This is the only interface through which tally talks AMQP: the
 * publisher reactor (reactors/publish.c), tally-board and the
 * benchmarks use it, and core/amqp.c is the only file that
 * includes librabbitmq-c's <amqp.h> (house style: library prefixes
 * stay in the module that wraps them; bench/bench_publish.c alone
 * calls the library directly, to measure it beside this client).
 * It lives in core/ because it carries the record to a broker and
 * knows nothing of providers: drivers/ holds provider drivers only
 * (tests/integration/01_layers.sh).
 *
 * A connection has two channels: TL_AMQP_PUB (publisher confirms on)
 * for publishing and TL_AMQP_CON for basic.get and basic.consume, so
 * that the confirms of one never interleave with the replies of the
 * other.  Every call is blocking with the connection's timeout; a
 * socket that cannot be written within it fails the call (a broker
 * that stopped reading does not hang the caller).  After any error
 * other than TL_ENOTFOUND / TL_ETIMEDOUT from a wait, the connection
 * is unusable: close it and connect again.  tl_amqp_lasterr() keeps
 * the broker's or the library's message for the log; it never
 * contains the password.  The connection asks for connection.blocked:
 * while the broker blocks it (a memory or disk alarm), the last error
 * is that, with the broker's reason, whatever times out meanwhile.
 */
#ifndef TL_AMQP_H
#define TL_AMQP_H

#include <stddef.h>
#include <stdint.h>

struct tl_amqp;

/* Where and how to connect.  password is borrowed; the caller wipes it. */
struct tl_amqp_conf {
	char		 host[256];
	int		 port;		/* 0: 5672, or 5671 with TLS */
	char		 vhost[256];	/* "" or "/": the default vhost */
	char		 user[128];
	const char	*password;
	int		 tls;
	const char	*cafile;	/* TLS: CA bundle (NULL: none) */
	int		 noverify;	/* TLS: skip peer and host checks */
	unsigned	 timeout_ms;	/* connect, handshake, RPC, send; 0: 5000 */
	unsigned	 heartbeat;	/* seconds; 0: none */
};

/*
 * Parses amqp[s]://host[:port][/vhost] into c (host, port, vhost,
 * tls).  A URL carrying a user or password is refused (TL_EINVAL): the
 * password is a secret and travels separately.
 */
int	tl_amqp_parse_url(const char *url, struct tl_amqp_conf *c);

/*
 * Connects, logs in, opens both channels, enables confirms.  why, if
 * not NULL, receives what failed (TL_WHY_MAX bytes).
 */
int	tl_amqp_connect(const struct tl_amqp_conf *c, struct tl_amqp **out,
	    char *why);
void	tl_amqp_close(struct tl_amqp *a);
const char *tl_amqp_lasterr(const struct tl_amqp *a);

/* Declarations (idempotent on the broker). */
int	tl_amqp_exchange(struct tl_amqp *a, const char *name, const char *type,
	    int durable);
int	tl_amqp_queue(struct tl_amqp *a, const char *name, int durable);
int	tl_amqp_bind(struct tl_amqp *a, const char *queue, const char *exchange,
	    const char *key);
int	tl_amqp_unbind(struct tl_amqp *a, const char *queue,
	    const char *exchange, const char *key);
/*
 * Declares a durable RabbitMQ stream (x-queue-type: stream, 3.9+): an
 * append-only queue that consumers read from an offset without taking
 * messages away from each other.
 */
int	tl_amqp_stream(struct tl_amqp *a, const char *name);
/* Deletes every message of a queue (tests, benchmarks). */
int	tl_amqp_purge(struct tl_amqp *a, const char *queue);

/* One message to publish.  Strings may be NULL (not sent). */
struct tl_amqp_hdr {
	const char	*key;
	const char	*str;		/* a string header, or */
	int64_t		 num;		/* a number when str is NULL */
};
#define TL_AMQP_MAXHDR	8
struct tl_amqp_msg {
	const char	*exchange;	/* "" or NULL: the default exchange */
	const char	*routing_key;
	const void	*body;
	size_t		 len;
	const char	*content_type;
	const char	*message_id;
	const char	*type;
	uint64_t	 timestamp;	/* seconds since the epoch; 0: none */
	int		 persistent;
	struct tl_amqp_hdr hdr[TL_AMQP_MAXHDR];
	size_t		 nhdr;
};

/*
 * Publishes m on the confirm channel.  *tagp (optional) receives its
 * delivery tag: tags count from 1 per connection, and the broker
 * confirms them (tl_amqp_confirmed).  Blocks while TL_AMQP_WINDOW
 * messages are unconfirmed.
 */
#define TL_AMQP_WINDOW	8192
int	tl_amqp_publish(struct tl_amqp *a, const struct tl_amqp_msg *m,
	    uint64_t *tagp);

/*
 * Reads confirms until every tag up to upto is confirmed or the
 * deadline (CLOCK_MONOTONIC ns; 0: do not wait, only read what has
 * arrived) passes.  0 when all are confirmed, TL_ETIMEDOUT otherwise;
 * TL_EREFUSED when the broker nacked a message (the connection should
 * then be closed and the messages published again).
 */
int	tl_amqp_wait_confirms(struct tl_amqp *a, uint64_t upto,
	    uint64_t deadline);
/* Every tag up to this one is confirmed. */
uint64_t tl_amqp_confirmed(const struct tl_amqp *a);
/* The last tag published. */
uint64_t tl_amqp_published(const struct tl_amqp *a);

/* A message received (by get or consume); free with _delivery_free. */
struct tl_amqp_delivery {
	uint64_t	 tag;
	int		 redelivered;
	char		 exchange[256];
	char		 routing_key[256];
	char		 message_id[128];
	char		 type[128];
	char		 content_type[64];
	char		 user_id[128];
	int64_t		 seq;		/* header "seq", -1 if absent */
	void		*body;
	size_t		 len;
	char		 hash[72];	/* header "hash" (hex), "" if absent */
	char		 mac[72];	/* header "mac" (hex), "" if absent */
	char		 sig[136];	/* header "sig" (hex), "" if absent */
	int64_t		 offset;	/* header "x-stream-offset", -1 */
	int64_t		 auth;		/* header "auth", -1 if absent */
	int64_t		 epoch;		/* header "epoch", -1 if absent */
	/*
	 * The body was over the consumer's limit (tl_amqp_set_max_body):
	 * its frames were read and dropped, never held; body is NULL and
	 * len its size.
	 */
	int		 oversized;
};
void	tl_amqp_delivery_free(struct tl_amqp_delivery *d);

/* basic.get from queue: 0, or TL_ENOTFOUND when it is empty. */
int	tl_amqp_get(struct tl_amqp *a, const char *queue,
	    struct tl_amqp_delivery *d);
/* basic.consume on queue with prefetch messages in flight. */
int	tl_amqp_consume(struct tl_amqp *a, const char *queue,
	    unsigned prefetch);
/*
 * basic.consume on a stream from offset (its x-stream-offset; < 0:
 * "first"), prefetch messages in flight (a stream needs a prefetch).
 * Deliveries must be acknowledged (tl_amqp_ack) to get more credit;
 * each one carries its offset in d->offset.
 */
int	tl_amqp_consume_stream(struct tl_amqp *a, const char *queue,
	    unsigned prefetch, int64_t offset);
/*
 * The next delivery of the consumer, or TL_ETIMEDOUT at the deadline
 * (which is not met inside a message: once its first frame has come the
 * rest is awaited up to the connection's timeout, else TL_EUNREACH).
 * A body larger than the limit set with tl_amqp_set_max_body is not
 * kept (d->oversized); memory held is at most the limit plus a frame.
 */
int	tl_amqp_next(struct tl_amqp *a, uint64_t deadline,
	    struct tl_amqp_delivery *d);
/* The largest body tl_amqp_next keeps (0: no limit, the default). */
void	tl_amqp_set_max_body(struct tl_amqp *a, size_t max);
/* Acknowledges tag (and, with multiple, every one before it). */
int	tl_amqp_ack(struct tl_amqp *a, uint64_t tag, int multiple);

/* The socket, for poll(2); -1 when not connected. */
int	tl_amqp_fd(const struct tl_amqp *a);

#endif
