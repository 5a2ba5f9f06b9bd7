/*
 * bench_publish.c - publishing the record, and following it.
 *
 *   publish   tl_rx_publish (tallyd's publisher: read the log, render
 *             the JSON of tally tail --json, publish persistent messages
 *             with confirms, move the checkpoint over what is
 *             confirmed) against librabbitmq-c publishing the very same
 *             payloads and properties with confirms directly (the same
 *             window of unconfirmed messages), both to a durable queue
 *             on a throwaway RabbitMQ on loopback (tests/harness/
 *             rabbit.sh), in alternating rounds.
 *   follow    end-to-end latency of a subscriber in another process
 *             (core/sub.h, woken by inotify): from just before the
 *             append's write transaction, and from its commit, to the
 *             event in the subscriber's hands; median and p99, with
 *             durable commits and with TL_LOG_NOSYNC.
 *
 * Prints figures; never asserts.  Env: TALLY_TMP, TALLY_SRC, BENCH_SCALE
 * (multiplies the counts), TALLY_TEST_AMQP_HOST/PORT/USER/PASSWORD to
 * use a running broker instead of starting one, BENCH_NO_AMQP=1 to
 * leave the publisher out.
 */
#define _POSIX_C_SOURCE 200809L

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/body.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "core/secret.h"
#include "core/sub.h"
#include "core/amqp.h"
#include "reactors/rx.h"
#include "tests/lib/tl_bench.h"
#include "tests/lib/tl_test.h"

#define BODY_LEN	200
#define EXCHANGE	"bench.tally"
#define SINK		"bench.sink"
#define ROUNDS		3
#define WINDOW		TL_AMQP_WINDOW

static void
die(const char *fmt, ...)
{
	va_list ap;

	fputs("bench_publish: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* --- the broker ---------------------------------------------------------- */

struct broker {
	char	 host[256], user[128], password[128];
	int	 port;
	char	 script[4096], dir[4200];
	int	 started;
};

static int
sh(const char *script, const char *a, const char *b, const char *c)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execl("/bin/sh", "sh", script, a, b, c, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int
broker_start(struct broker *b, const char *scratch)
{
	const char *src = getenv("TALLY_SRC"), *e;
	char port[16];
	int tries;

	if ((e = getenv("TALLY_TEST_AMQP_PORT")) != NULL && *e) {
		b->port = atoi(e);
		snprintf(b->host, sizeof(b->host), "%s",
		    getenv("TALLY_TEST_AMQP_HOST") ? getenv(
		    "TALLY_TEST_AMQP_HOST") : "127.0.0.1");
		snprintf(b->user, sizeof(b->user), "%s",
		    getenv("TALLY_TEST_AMQP_USER") ? getenv(
		    "TALLY_TEST_AMQP_USER") : "guest");
		snprintf(b->password, sizeof(b->password), "%s",
		    getenv("TALLY_TEST_AMQP_PASSWORD") ? getenv(
		    "TALLY_TEST_AMQP_PASSWORD") : "guest");
		return 0;
	}
	snprintf(b->script, sizeof(b->script), "%s/tests/harness/rabbit.sh",
	    src && *src ? src : ".");
	if (access(b->script, R_OK) != 0) {
		fprintf(stderr, "bench_publish: no %s\n", b->script);
		return -1;
	}
	snprintf(b->dir, sizeof(b->dir), "%s/rmq", scratch);
	for (tries = 0; tries < 5; tries++) {
		int p = 30000 + (int)((getpid() * 7919u + (unsigned)tries *
		    104729u) % 1500) * 20;

		snprintf(port, sizeof(port), "%d", p);
		b->started = 1;
		if (sh(b->script, "start", b->dir, port) == 0)
			break;
	}
	if (tries == 5)
		return -1;
	if (tl_test_env_get(b->dir, "TALLY_TEST_AMQP_PORT", port, sizeof(port)) != 0 ||
	    tl_test_env_get(b->dir, "TALLY_TEST_AMQP_HOST", b->host,
	    sizeof(b->host)) != 0 ||
	    tl_test_env_get(b->dir, "TALLY_TEST_AMQP_USER", b->user,
	    sizeof(b->user)) != 0 ||
	    tl_test_env_get(b->dir, "TALLY_TEST_AMQP_PASSWORD", b->password,
	    sizeof(b->password)) != 0)
		return -1;
	b->port = atoi(port);
	return 0;
}

static void
broker_stop(struct broker *b)
{
	if (b->started)
		sh(b->script, "stop", b->dir, NULL);
	b->started = 0;
}

/* A helper connection for declarations and purges. */
static struct tl_amqp *
admin(const struct broker *b)
{
	struct tl_amqp_conf c;
	struct tl_amqp *a;
	char why[TL_WHY_MAX];

	memset(&c, 0, sizeof(c));
	snprintf(c.host, sizeof(c.host), "%s", b->host);
	c.port = b->port;
	snprintf(c.user, sizeof(c.user), "%s", b->user);
	c.password = b->password;
	if (tl_amqp_connect(&c, &a, why) != 0)
		die("connect: %s", why);
	if (tl_amqp_exchange(a, EXCHANGE, "topic", 1) != 0 ||
	    tl_amqp_exchange(a, EXCHANGE ".raw", "topic", 1) != 0 ||
	    tl_amqp_queue(a, SINK, 1) != 0 ||
	    tl_amqp_bind(a, SINK, EXCHANGE, "#") != 0 ||
	    tl_amqp_bind(a, SINK, EXCHANGE ".raw", "#") != 0)
		die("declare: %s", tl_amqp_lasterr(a));
	return a;
}

/* --- the log --------------------------------------------------------------- */

struct cfg_arg {
	const struct broker	*b;
	const struct tl_key	*key;
};

static int
configure_cb(struct tl_txn *t, void *arg)
{
	struct cfg_arg *ca = arg;
	struct tl_append a;
	struct tl_body b;
	const char *ad = "publisher/amqp:password";
	uint8_t ct[256];
	char url[400];
	const void *p;
	size_t len, n = strlen(ca->b->password);
	int rc;

	tl_secret_encrypt(ca->key, ad, strlen(ad), ca->b->password, n, ct);
	snprintf(url, sizeof(url), "amqp://%s:%d/", ca->b->host, ca->b->port);
	tl_body_init(&b);
	tl_body_str(&b, "url", url);
	tl_body_str(&b, "host", ca->b->host);
	tl_body_u64(&b, "port", (uint64_t)ca->b->port);
	tl_body_str(&b, "vhost", "/");
	tl_body_str(&b, "user", ca->b->user);
	tl_body_secret(&b, "password", ct, n + TL_BOX_OVERHEAD);
	tl_body_str(&b, "exchange", EXCHANGE);
	tl_body_str(&b, "format", "json");
	tl_body_bool(&b, "tls", 0);
	tl_body_bool(&b, "verify", 1);
	tl_body_bool(&b, "node_queues", 0);
	tl_body_str(&b, "acks", "");
	if ((rc = tl_body_finish(&b, &p, &len)) == 0) {
		memset(&a, 0, sizeof(a));
		a.type = "publisher.configured";
		a.stream = "publisher/amqp";
		a.expect = TL_VER_ANY;
		a.actor = "bench";
		a.body = p;
		a.body_len = len;
		rc = tl_append(t, &a, NULL, NULL);
	}
	tl_body_free(&b);
	return rc;
}

static int
reset_cb(struct tl_txn *t, void *arg)
{
	(void)arg;
	return tl_ckpt_set(t, "publisher", 1);	/* the configuration */
}

/* --- tally ------------------------------------------------------------------- */

static void
rx_log(int level, const char *fmt, va_list ap)
{
	if (level < TL_RX_WARN)
		return;
	fputs("bench_publish: tallyd: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static double
round_tally(struct tl_rx *rx, uint64_t n)
{
	uint64_t done = 0, next;
	unsigned pub;
	double t0;
	int rc;

	if ((rc = tl_log_write(rx->log, reset_cb, NULL)) != 0)
		die("reset: %s", tl_strerror(rc));
	t0 = tl_bench_now();
	while (done < n) {
		if ((rc = tl_rx_publish(rx, &pub, &next)) != 0)
			die("publish: %s", tl_strerror(rc));
		if (pub == 0 && next > tl_rx_now())
			die("the publisher is backing off: is the broker there?");
		done += pub;
	}
	return (double)n / (tl_bench_now() - t0);
}

/* --- librabbitmq directly ------------------------------------------------------ */

struct payload {
	char	*body;
	size_t	 len;
	char	 id[2 * TL_ID_LEN + 1];
	char	 type[TL_TYPE_MAX + 1];
	char	 stream[TL_STREAM_MAX + 1];
	uint64_t seq, ts;
};

static void
raw_ack(amqp_connection_state_t c, uint64_t *confirmed, int block)
{
	amqp_frame_t f;
	struct timeval tv = { block ? 5 : 0, 0 };
	int st;

	for (;;) {
		st = amqp_simple_wait_frame_noblock(c, &f, &tv);
		if (st == AMQP_STATUS_TIMEOUT)
			return;
		if (st != AMQP_STATUS_OK)
			die("raw: wait: %s", amqp_error_string2(st));
		if (f.frame_type == AMQP_FRAME_METHOD &&
		    f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
			amqp_basic_ack_t *m = f.payload.method.decoded;

			if (m->delivery_tag > *confirmed)
				*confirmed = m->delivery_tag;
			if (block)
				return;
		} else if (f.frame_type == AMQP_FRAME_METHOD &&
		    f.payload.method.id == AMQP_BASIC_NACK_METHOD)
			die("raw: nack");
		tv.tv_sec = 0;
		tv.tv_usec = 0;
		amqp_maybe_release_buffers(c);
	}
}

static double
round_raw(const struct broker *b, const struct payload *pl, uint64_t n)
{
	amqp_connection_state_t c = amqp_new_connection();
	amqp_socket_t *s = amqp_tcp_socket_new(c);
	amqp_basic_properties_t p;
	amqp_table_entry_t h[2];
	uint64_t i, confirmed = 0;
	double t0, rate;

	if (amqp_socket_open(s, b->host, b->port) != 0)
		die("raw: connect");
	if (amqp_login(c, "/", 0, 131072, 30, AMQP_SASL_METHOD_PLAIN,
	    b->user, b->password).reply_type != AMQP_RESPONSE_NORMAL)
		die("raw: login");
	amqp_channel_open(c, 1);
	amqp_confirm_select(c, 1);
	if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL)
		die("raw: confirm.select");
	t0 = tl_bench_now();
	for (i = 0; i < n; i++) {
		memset(&p, 0, sizeof(p));
		p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG |
		    AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
		    AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_TIMESTAMP_FLAG |
		    AMQP_BASIC_HEADERS_FLAG;
		p.content_type = amqp_cstring_bytes("application/json");
		p.delivery_mode = 2;
		p.message_id = amqp_cstring_bytes(pl[i].id);
		p.type = amqp_cstring_bytes(pl[i].type);
		p.timestamp = pl[i].ts / 1000000000u;
		h[0].key = amqp_cstring_bytes("seq");
		h[0].value.kind = AMQP_FIELD_KIND_I64;
		h[0].value.value.i64 = (int64_t)pl[i].seq;
		h[1].key = amqp_cstring_bytes("stream");
		h[1].value.kind = AMQP_FIELD_KIND_UTF8;
		h[1].value.value.bytes = amqp_cstring_bytes(pl[i].stream);
		p.headers.num_entries = 2;
		p.headers.entries = h;
		if (amqp_basic_publish(c, 1, amqp_cstring_bytes(EXCHANGE ".raw"),
		    amqp_cstring_bytes(pl[i].type), 0, 0, &p,
		    (amqp_bytes_t){ pl[i].len, pl[i].body }) != 0)
			die("raw: publish");
		if ((i + 1) % 256 == 0)
			raw_ack(c, &confirmed, 0);
		while (i + 1 - confirmed >= WINDOW)
			raw_ack(c, &confirmed, 1);
	}
	while (confirmed < n)
		raw_ack(c, &confirmed, 1);
	rate = (double)n / (tl_bench_now() - t0);
	amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
	amqp_connection_close(c, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(c);
	return rate;
}

/* The payloads tally publishes, rendered once for the raw peer. */
static struct payload *
render_all(struct tl_log *log, uint64_t n, size_t *bytes)
{
	struct payload *pl = calloc(n, sizeof(*pl));
	struct tl_filter f = { 0 };
	struct tl_txn *t;
	struct tl_iter *it;
	struct tl_event ev;
	uint64_t i = 0;
	static const char d[] = "0123456789abcdef";
	int k;

	if (pl == NULL || tl_log_begin(log, TL_TXN_RDONLY, &t) != 0)
		die("render");
	f.from = 2;
	if (tl_iter_open(t, &f, &it) != 0)
		die("render");
	*bytes = 0;
	while (i < n && tl_iter_next(it, &ev) == 0) {
		json_t *j = tl_json_event(&ev);

		pl[i].body = json_dumps(j, JSON_COMPACT);
		pl[i].len = strlen(pl[i].body);
		*bytes += pl[i].len;
		json_decref(j);
		for (k = 0; k < TL_ID_LEN; k++) {
			pl[i].id[2 * k] = d[ev.id[k] >> 4];
			pl[i].id[2 * k + 1] = d[ev.id[k] & 15];
		}
		snprintf(pl[i].type, sizeof(pl[i].type), "%s", ev.type);
		snprintf(pl[i].stream, sizeof(pl[i].stream), "%s", ev.stream);
		pl[i].seq = ev.seq;
		pl[i].ts = ev.ts;
		i++;
	}
	tl_iter_close(it);
	tl_log_abort(t);
	if (i != n)
		die("render: %llu of %llu", (unsigned long long)i,
		    (unsigned long long)n);
	return pl;
}

/* Alternating rounds of tally and of librabbitmq-c; prints the figures. */
static void
compare(const char *what, struct tl_rx *rx, const struct broker *b,
    struct tl_amqp *adm, const struct payload *pl, uint64_t n)
{
	double rt[ROUNDS], rr[ROUNDS], bt = 0, br = 0, st = 0, sr = 0;
	int r;

	printf("  %s:\n", what);
	for (r = 0; r < ROUNDS; r++) {
		tl_amqp_purge(adm, SINK);
		rt[r] = round_tally(rx, n);
		tl_amqp_purge(adm, SINK);
		rr[r] = round_raw(b, pl, n);
		st += rt[r];
		sr += rr[r];
		if (rt[r] > bt)
			bt = rt[r];
		if (rr[r] > br)
			br = rr[r];
	}
	tl_amqp_purge(adm, SINK);
	printf("    %-32s", "tally (tl_rx_publish)");
	for (r = 0; r < ROUNDS; r++)
		printf(" %8.0f", rt[r]);
	printf("  best %8.0f msg/s\n", bt);
	printf("    %-32s", "librabbitmq-c, same payloads");
	for (r = 0; r < ROUNDS; r++)
		printf(" %8.0f", rr[r]);
	printf("  best %8.0f msg/s\n", br);
	printf("    ratio tally / librabbitmq-c: best %.2f, mean %.2f\n",
	    bt / br, st / sr);
}

static void
bench_publish(const char *scratch, double scale)
{
	struct broker b;
	struct tl_rx rx;
	struct tl_amqp *adm;
	struct cfg_arg ca;
	struct tl_test_load l = { 0 };
	struct payload *pl;
	char home[4200], logdir[4300], keypath[4300], why[TL_WHY_MAX];
	uint64_t n = (uint64_t)(100000 * scale);
	size_t bytes, i;
	int rc;

	if (n < 5000)
		n = 5000;
	memset(&b, 0, sizeof(b));
	printf("publish: %llu events (%d-byte bodies), persistent messages, "
	    "confirms, window %d\n", (unsigned long long)n, BODY_LEN, WINDOW);
	if (broker_start(&b, scratch) != 0) {
		printf("  RabbitMQ could not be started: not measured\n");
		broker_stop(&b);
		return;
	}
	adm = admin(&b);
	snprintf(home, sizeof(home), "%s/home", scratch);
	snprintf(logdir, sizeof(logdir), "%s/log", home);
	snprintf(keypath, sizeof(keypath), "%s/master.key", home);
	if (tl_test_rmtree(home) != 0 && errno != ENOENT)
		die("rm %s", home);
	if (mkdir(home, 0700) != 0 || mkdir(logdir, 0700) != 0)
		die("mkdir %s: %s", logdir, strerror(errno));
	if ((rc = tl_secret_keygen(keypath)) != 0)
		die("keygen: %s", tl_strerror(rc));
	tl_rx_init(&rx);
	if (strlen(home) >= sizeof(rx.home))
		die("scratch path too long");
	memcpy(rx.home, home, strlen(home) + 1);
	rx.logf = rx_log;
	if (tl_secret_load(keypath, &rx.key, why) != 0)
		die("key: %s", why);
	rx.log = tl_test_log_create(logdir, 0);
	ca.b = &b;
	ca.key = &rx.key;
	if ((rc = tl_log_write(rx.log, configure_cb, &ca)) != 0)
		die("configure: %s", tl_strerror(rc));
	l.n = n;
	l.per_txn = 1000;
	l.body_len = BODY_LEN;
	l.first = 0;
	if ((rc = tl_test_load(rx.log, &l)) != 0)
		die("load: %s", tl_strerror(rc));
	pl = render_all(rx.log, n, &bytes);
	printf("  JSON payloads: %.0f bytes on average\n", (double)bytes /
	    (double)n);

	compare("to a durable queue", &rx, &b, adm, pl, n);
	/* Nothing bound: the broker confirms at once; the clients' cost. */
	if (tl_amqp_unbind(adm, SINK, EXCHANGE, "#") != 0 ||
	    tl_amqp_unbind(adm, SINK, EXCHANGE ".raw", "#") != 0)
		die("unbind: %s", tl_amqp_lasterr(adm));
	compare("unrouted (no queue bound)", &rx, &b, adm, pl, n);

	for (i = 0; i < n; i++)
		free(pl[i].body);
	free(pl);
	tl_amqp_close(adm);
	tl_rx_publish_stop(&rx);
	tl_log_close(rx.log);
	tl_rx_free(&rx);
	broker_stop(&b);
}

/* --- following ------------------------------------------------------------ */

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void
sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The child: follows n events, writes each receipt time to fd. */
static int
follower(const char *dir, uint64_t n, int fd, int ready)
{
	struct tl_sub *s;
	struct tl_event ev;
	uint64_t i, t;

	if (tl_sub_open(dir, NULL, &s) != 0)
		return 2;
	if (write(ready, "r", 1) != 1)
		return 3;
	for (i = 1; i <= n; i++) {
		if (tl_sub_next(s, tl_sub_deadline(10000), &ev) != 0 ||
		    ev.seq != i)
			return 4;
		t = tl_bench_ns(CLOCK_MONOTONIC);
		if (write(fd, &t, sizeof(t)) != (ssize_t)sizeof(t))
			return 5;
	}
	tl_sub_close(s);
	return 0;
}

static void
print_lat(const char *what, uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	printf("    %-24s median %7.1f us   p99 %7.1f us   max %7.1f us\n",
	    what, (double)v[n / 2] / 1e3, (double)v[(n * 99) / 100] / 1e3,
	    (double)v[n - 1] / 1e3);
}

static void
bench_follow(const char *scratch, double scale, int nosync)
{
	char dir[4200];
	uint64_t n = (uint64_t)(1000 * scale), i, *t0, *t1, *rcv;
	struct tl_test_load l = { 0 };
	struct tl_log *log;
	int p[2], r[2], st;
	size_t got = 0;
	pid_t pid;
	char c;

	if (n < 200)
		n = 200;
	snprintf(dir, sizeof(dir), "%s/follow-%s", scratch, nosync ? "nosync" :
	    "sync");
	if (mkdir(dir, 0700) != 0)
		die("mkdir %s: %s", dir, strerror(errno));
	tl_log_close(tl_test_log_create(dir, 0));
	t0 = calloc(n, sizeof(*t0));
	t1 = calloc(n, sizeof(*t1));
	rcv = calloc(n, sizeof(*rcv));
	if (t0 == NULL || t1 == NULL || rcv == NULL || pipe(p) != 0 ||
	    pipe(r) != 0)
		die("setup");
	if ((pid = fork()) < 0)
		die("fork");
	if (pid == 0) {
		close(p[0]);
		close(r[0]);
		_exit(follower(dir, n, p[1], r[1]));
	}
	close(p[1]);
	close(r[1]);
	if (read(r[0], &c, 1) != 1)
		die("the follower did not start");
	if (tl_log_open(dir, nosync ? TL_LOG_NOSYNC : 0, &log) != 0)
		die("open %s", dir);
	l.n = 1;
	l.body_len = BODY_LEN;
	for (i = 0; i < n; i++) {
		l.first = i;
		t0[i] = tl_bench_ns(CLOCK_MONOTONIC);
		if (tl_test_load(log, &l) != 0)
			die("append");
		t1[i] = tl_bench_ns(CLOCK_MONOTONIC);
		sleep_us(2000);		/* one wakeup per event */
	}
	while (got < n * sizeof(uint64_t)) {
		ssize_t k = read(p[0], (char *)rcv + got, n * sizeof(uint64_t) -
		    got);

		if (k <= 0)
			break;
		got += (size_t)k;
	}
	waitpid(pid, &st, 0);
	if (got != n * sizeof(uint64_t) || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		die("the follower failed (status %d)", st);
	for (i = 0; i < n; i++) {
		uint64_t a = rcv[i] - t0[i], b = rcv[i] > t1[i] ?
		    rcv[i] - t1[i] : 0;

		t0[i] = a;
		t1[i] = b;
	}
	printf("  %s commits, %llu events, one every 2 ms:\n", nosync ?
	    "TL_LOG_NOSYNC" : "durable", (unsigned long long)n);
	print_lat("append → delivered", t0, n);
	print_lat("commit → delivered", t1, n);
	tl_log_close(log);
	close(p[0]);
	close(r[0]);
	free(t0);
	free(t1);
	free(rcv);
}

int
main(void)
{
	const char *e = getenv("BENCH_SCALE");
	double scale = e ? atof(e) : 1.0;
	char *scratch;

	if (scale <= 0)
		scale = 1.0;
	scratch = tl_test_tmpdir("bench_publish");
	printf("bench_publish (scratch %s)\n", scratch);
	e = getenv("BENCH_NO_AMQP");
	if (e != NULL && *e == '1')
		printf("publish: left out (BENCH_NO_AMQP=1)\n");
	else
		bench_publish(scratch, scale);
	printf("follow: a subscriber in another process (core/sub.h, "
	    "inotify), append → in its hands\n");
	bench_follow(scratch, scale, 0);
	bench_follow(scratch, scale, 1);
	tl_test_tmpdir_done(scratch);
	return 0;
}
