/*
 * publish.c - the publisher: the record, on a RabbitMQ topic exchange.
 *
 * Every event goes to the configured exchange (routing key: its type)
 * as a persistent message whose id is the event id (hex), with its
 * sequence number in the header "seq" and its stream in "stream", and
 * the body tally tail --json prints (or the same document in msgpack),
 * secrets shown as "<redacted>".  The checkpoint "publisher" moves only
 * over events whose messages the broker has confirmed, so delivery is
 * at least once and in order: after a lost connection the publisher
 * starts again after its checkpoint, and a consumer sees the
 * unconfirmed tail twice, with the same message ids.
 *
 * With a stream configured (tally publish configure --stream NAME),
 * every event also goes to that RabbitMQ stream as the envelope's own
 * bytes (publish_stream): the replication stream a standby follows.
 * Its message is the event's last, so the checkpoint moves over an
 * event only once the stream holds it too.
 *
 * credential.delivered events also go, as the sealed bytes alone, to
 * the durable queue tally.node.NODE: ciphertext sealed to the node's
 * key, which only that node can open.  And a node acknowledges the
 * credential version it runs with a message on the acks queue
 * ({"node","grant","holder","version","nonce","sig","mac"}, from
 * tally-node), which becomes credential.ack-offered; the ack pass
 * (reactors/ack.h) records credential.acknowledged only when its
 * signature and proof verify.
 *
 * The broker's address comes from the log (publisher.configured on
 * publisher/amqp, written by tally publish configure), the password
 * encrypted under the master key.  While the broker is away tallyd goes
 * on reconciling: a pass that cannot connect returns (at once when the
 * broker's host refuses; within the 5 s connection timeout when it does
 * not answer at all), and the next attempt waits out an exponential
 * backoff (250 ms doubling to 15 s, plus up to a quarter of jitter).
 * A pass publishes for at most 250 ms and leaves the unconfirmed tail
 * in flight for the next one; once caught up it waits (at most 5 s) for
 * the last confirms, so that an idle publisher's lag is 0.  No network I/O
 * happens inside a write transaction: events are read and published in
 * a read transaction, the checkpoint is written after the confirms.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <jansson.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/body.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/json.h"
#include "core/kv.h"
#include "core/log.h"
#include "core/secret.h"
#include "core/sub.h"
#include "core/amqp.h"
#include "core/vec.h"
#include "core/envelope.h"
#include "core/nodewire.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "projections/proj.h"
#include "ack.h"
#include "epoch.h"
#include "rx.h"

#define CKPT		"publisher"
#define PW_AD		TL_PUBLISHER_STREAM ":password"
#define PASS_BUDGET_NS	(250u * 1000000u)	/* one pass, at most */
#define PASS_MAX	50000			/* events per pass */
#define DRAIN_EVERY	256			/* read confirms this often */
#define BACKOFF_MIN_NS	(250u * 1000000ull)
#define BACKOFF_MAX_NS	(15000u * 1000000ull)
#define ACKS_PER_PASS	200
#define ACK_POLL_NS	(1000u * 1000000ull)
#define EPOCH_IDLE_MS	1000	/* tl_rx_publish_epoch_seen: the end */
#define EPOCH_SCAN_MS	30000	/* ... reading it all, at most */
#define AHEAD_BUDGET_NS	(2000u * 1000000ull)	/* tl_rx_publish_ahead */

struct inflight {
	uint64_t	seq;
	uint64_t	tag;	/* the event's last message */
};

struct tl_rx_pub {
	/* The configuration, from the last event on publisher/amqp. */
	uint64_t		 cfg_ver;
	int			 enabled;
	struct tl_amqp_conf	 conf;
	char			 password[256];
	char			 url[512];
	char			 exchange[256];
	char			 cafile[1024];
	int			 msgpack;
	int			 node_queues;
	char			 acks[256];
	char			 stream[256];	/* "" : none */
	const struct tl_key	*key;		/* rx's: the stream's "mac" */
	uint64_t		 epoch;		/* rx's, at the pass's start */
	/* The control plane's signing key (tl_secret_cp_keypair); ps is
	 * guarded memory. */
	uint8_t			 cp_sk[TL_SIGN_SECLEN];
	uint8_t			 cp_pk[TL_SIGN_PUBLEN];
	int			 has_cp;
	char			 sighex[2 * TL_SIGN_LEN + 1];
	/* The connection and what was declared on it. */
	struct tl_amqp		*a;
	char			(*queues)[80];
	size_t			 nqueues, capqueues;
	/* Backoff while the broker is away. */
	uint64_t		 retry_ns;
	uint64_t		 delay_ns;
	int			 failing;
	/* The condition tally publish status shows (note_state). */
	char			 lasterr[320];
	uint64_t		 since;		/* wall clock, ns */
	int			 noted;		/* "failing" is what is recorded */
	uint64_t		 next_ack_ns;
	/* Messages awaiting confirms, across passes, on this connection. */
	struct inflight		*in;
	size_t			 nin, capin;
	uint64_t		 pub_seq;	/* last published, this connection */
	uint64_t		 ck_last;	/* the checkpoint as last seen */
	msgpack_sbuffer		 mp;
};

static void
disconnect(struct tl_rx_pub *ps)
{
	tl_amqp_close(ps->a);
	ps->a = NULL;
	ps->nqueues = 0;
	ps->nin = 0;		/* unconfirmed: published again */
	ps->pub_seq = 0;
}

static void
forget_config(struct tl_rx_pub *ps)
{
	tl_secret_wipe(ps->password, sizeof(ps->password));
	ps->enabled = 0;
	ps->conf.password = NULL;
}

void
tl_rx_publish_stop(struct tl_rx *rx)
{
	struct tl_rx_pub *ps = rx->pub;

	if (ps == NULL)
		return;
	disconnect(ps);
	forget_config(ps);
	tl_secret_wipe(ps->cp_sk, sizeof(ps->cp_sk));
	free(ps->queues);
	free(ps->in);
	msgpack_sbuffer_destroy(&ps->mp);
	tl_secret_free(ps);
	rx->pub = NULL;
}

/* --- configuration ------------------------------------------------ */

static int
getbool(struct tl_bnode m, const char *key, int dflt)
{
	struct tl_bnode n;
	int v;

	if (tl_bn_get(m, key, &n) != 0 || tl_bn_bool(n, &v) != 0)
		return dflt;
	return v;
}

/* Reads a publisher.configured body into ps (enabled on success). */
static int
parse_config(struct tl_rx *rx, struct tl_rx_pub *ps, const void *body,
    size_t len)
{
	struct tl_bview v;
	struct tl_bnode n;
	const void *ct;
	size_t ctlen;
	char format[16] = "json";
	int rc;

	if ((rc = tl_bview_open(&v, body, len)) != 0)
		return rc;
	memset(&ps->conf, 0, sizeof(ps->conf));
	rc = TL_EMALFORMED;
	if (tl_bn_getstr(v.root, "host", ps->conf.host,
	    sizeof(ps->conf.host)) != 0 ||
	    tl_bn_getstr(v.root, "user", ps->conf.user,
	    sizeof(ps->conf.user)) != 0 ||
	    tl_bn_getstr(v.root, "exchange", ps->exchange,
	    sizeof(ps->exchange)) != 0)
		goto out;
	ps->conf.port = (int)tl_bn_getu64(v.root, "port", 0);
	if (tl_bn_getstr(v.root, "vhost", ps->conf.vhost,
	    sizeof(ps->conf.vhost)) != 0)
		snprintf(ps->conf.vhost, sizeof(ps->conf.vhost), "/");
	if (tl_bn_getstr(v.root, "url", ps->url, sizeof(ps->url)) != 0)
		snprintf(ps->url, sizeof(ps->url), "amqp://%s:%d",
		    ps->conf.host, ps->conf.port);
	tl_bn_getstr(v.root, "format", format, sizeof(format));
	ps->msgpack = strcmp(format, "msgpack") == 0;
	ps->conf.tls = getbool(v.root, "tls", 0);
	ps->conf.noverify = !getbool(v.root, "verify", 1);
	ps->cafile[0] = '\0';
	tl_bn_getstr(v.root, "ca", ps->cafile, sizeof(ps->cafile));
	ps->conf.cafile = ps->cafile[0] ? ps->cafile : NULL;
	ps->node_queues = getbool(v.root, "node_queues", 1);
	ps->acks[0] = '\0';
	tl_bn_getstr(v.root, "acks", ps->acks, sizeof(ps->acks));
	ps->stream[0] = '\0';
	tl_bn_getstr(v.root, "stream", ps->stream, sizeof(ps->stream));
	ps->conf.timeout_ms = 5000;
	ps->conf.heartbeat = 30;
	ps->password[0] = '\0';
	if (tl_bn_get(v.root, "password", &n) == 0) {
		if (tl_bn_secret(n, &ct, &ctlen) != 0 ||
		    ctlen <= TL_BOX_OVERHEAD ||
		    ctlen - TL_BOX_OVERHEAD >= sizeof(ps->password))
			goto out;
		if (tl_secret_decrypt(&rx->key, PW_AD, strlen(PW_AD), ct,
		    ctlen, (uint8_t *)ps->password) != 0) {
			rc = TL_ESECRET;
			goto out;
		}
		ps->password[ctlen - TL_BOX_OVERHEAD] = '\0';
	}
	ps->conf.password = ps->password;
	ps->enabled = 1;
	rc = 0;
out:
	tl_bview_close(&v);
	return rc;
}

/* Reloads the configuration when publisher/amqp has moved. */
static int
load_config(struct tl_rx *rx, struct tl_rx_pub *ps)
{
	struct tl_txn *t;
	struct tl_iter *it = NULL;
	struct tl_filter f = { 0 };
	struct tl_event ev;
	uint64_t ver = 0;
	int rc, found = 0;

	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if ((rc = tl_stream_version(t, TL_PUBLISHER_STREAM, &ver)) != 0 &&
	    rc != TL_ENOTFOUND)
		goto out;
	rc = 0;
	if (ver == ps->cfg_ver)
		goto out;
	/* Changed: the last event of the stream decides. */
	disconnect(ps);
	forget_config(ps);
	ps->cfg_ver = ver;
	ps->retry_ns = 0;
	ps->delay_ns = 0;
	ps->failing = 0;
	f.stream = TL_PUBLISHER_STREAM;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		goto out;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		if (strcmp(ev.type, TL_EV_PUBLISHER_CONFIGURED) == 0) {
			forget_config(ps);
			if ((rc = parse_config(rx, ps, ev.body,
			    ev.body_len)) != 0) {
				tl_rx_log(rx, TL_RX_ERR, "publisher: the "
				    "configuration at seq %llu is unusable: "
				    "%s", (unsigned long long)ev.seq,
				    tl_strerror(rc));
				forget_config(ps);
			}
			found = 1;
		} else if (strcmp(ev.type, TL_EV_PUBLISHER_DISABLED) == 0) {
			forget_config(ps);
			found = 1;
		}
	}
	rc = rc == TL_EEOF ? 0 : rc;
	if (rc == 0 && found)
		tl_rx_log(rx, TL_RX_INFO, "publisher: %s", ps->enabled ?
		    "configured" : "disabled");
	if (rc == 0 && ps->enabled)
		tl_rx_log(rx, TL_RX_INFO, "publisher: %s, exchange %s "
		    "(%s%s%s)", ps->url, ps->exchange, ps->msgpack ? "msgpack" :
		    "json", ps->node_queues ? ", node queues" : "",
		    ps->acks[0] ? ", acks" : "");
out:
	tl_iter_close(it);
	tl_log_abort(t);
	return rc;
}

/* --- connection and backoff --------------------------------------- */

/*
 * Why publishing lags, for `tally publish status`: the scratch table
 * "publisher", key "state", holds {failing, error, since, at} in
 * msgpack (wall-clock ns).  It is operational state, not the record:
 * written only when the condition changes (a new error, or publishing
 * resumed), so a broker away for an hour costs one write, not one per
 * retry.  A failure to write it is logged and otherwise ignored.
 */
#define STATE_TABLE	"publisher"
#define STATE_KEY	"state"

struct state_arg {
	const void	*body;
	size_t		 len;
};

static int
state_cb(struct tl_txn *t, void *arg)
{
	struct state_arg *sa = arg;
	tl_kv kv;
	int rc;

	if ((rc = tl_kv_open_scratch(t, STATE_TABLE, &kv)) != 0)
		return rc;
	return tl_kv_put(t, kv, STATE_KEY, strlen(STATE_KEY), sa->body,
	    sa->len);
}

static uint64_t
wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
note_state(struct tl_rx *rx, struct tl_rx_pub *ps, int failing)
{
	struct tl_body b;
	struct state_arg sa;
	int rc;

	tl_body_init(&b);
	tl_body_bool(&b, "failing", failing);
	tl_body_str(&b, "error", ps->lasterr);
	tl_body_u64(&b, "since", ps->since);
	tl_body_u64(&b, "at", wall_ns());
	if ((rc = tl_body_finish(&b, &sa.body, &sa.len)) == 0)
		rc = tl_log_write(rx->log, state_cb, &sa);
	ps->noted = failing;
	if (rc != 0)
		tl_rx_log(rx, TL_RX_WARN, "publisher: cannot record its "
		    "state: %s", tl_strerror(rc));
	tl_body_free(&b);
}

static void
failed(struct tl_rx *rx, struct tl_rx_pub *ps, int rc, const char *why)
{
	uint64_t now = tl_rx_now(), jitter;
	char msg[256], cond[320];

	/* why may be the connection's own message: keep it first. */
	snprintf(msg, sizeof(msg), "%s", why && *why ? why : "-");
	why = msg;
	disconnect(ps);
	ps->delay_ns = ps->delay_ns ? ps->delay_ns * 2 : BACKOFF_MIN_NS;
	if (ps->delay_ns > BACKOFF_MAX_NS)
		ps->delay_ns = BACKOFF_MAX_NS;
	/* Up to a quarter more, so that publishers do not march in step. */
	jitter = (now / 1000u) % (ps->delay_ns / 4 + 1);
	ps->retry_ns = now + ps->delay_ns + jitter;
	tl_rx_log(rx, ps->failing ? TL_RX_DEBUG : TL_RX_WARN, "publisher: "
	    "%s: %s (%s); retrying in %llu ms, reconciling goes on", ps->url,
	    tl_strerror(rc), why,
	    (unsigned long long)((ps->delay_ns + jitter) / 1000000u));
	snprintf(cond, sizeof(cond), "%s (%s)", tl_strerror(rc), why);
	if (!ps->failing || strcmp(cond, ps->lasterr) != 0) {
		if (!ps->failing)
			ps->since = wall_ns();
		memcpy(ps->lasterr, cond, sizeof(ps->lasterr));
		note_state(rx, ps, 1);
	}
	ps->failing = 1;
}

static int
connect_broker(struct tl_rx *rx, struct tl_rx_pub *ps, char *why)
{
	int rc;

	if ((rc = tl_amqp_connect(&ps->conf, &ps->a, why)) != 0)
		return rc;
	if ((rc = tl_amqp_exchange(ps->a, ps->exchange, "topic", 1)) != 0 ||
	    (ps->acks[0] && (rc = tl_amqp_queue(ps->a, ps->acks, 1)) != 0) ||
	    (ps->stream[0] && (rc = tl_amqp_stream(ps->a, ps->stream)) != 0)) {
		snprintf(why, TL_WHY_MAX, "%s", tl_amqp_lasterr(ps->a));
		disconnect(ps);
		return rc;
	}
	tl_rx_log(rx, TL_RX_INFO, "publisher: connected to %s%s", ps->url,
	    ps->failing ? " again" : "");
	return 0;
}

/* Declares tally.node.NODE once per connection. */
static int
node_queue(struct tl_rx_pub *ps, const char *name)
{
	size_t i;
	int rc;

	for (i = 0; i < ps->nqueues; i++)
		if (strcmp(ps->queues[i], name) == 0)
			return 0;
	if ((rc = tl_amqp_queue(ps->a, name, 1)) != 0)
		return rc;
	if (tl_vec_grow(&ps->queues, &ps->capqueues, ps->nqueues + 1,
	    sizeof(ps->queues[0])) != 0)
		return 0;	/* only a cache */
	snprintf(ps->queues[ps->nqueues++], sizeof(ps->queues[0]), "%s", name);
	return 0;
}

/* --- rendering ---------------------------------------------------- */

static void
hex(const uint8_t *p, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/* The control plane's signing key, derived once; 0 without the key. */
static int
cp_keys(struct tl_rx_pub *ps)
{
	if (!ps->has_cp) {
		if (ps->key == NULL || ps->key->k == NULL)
			return 0;
		tl_secret_cp_keypair(ps->key, ps->cp_pk, ps->cp_sk);
		ps->has_cp = 1;
	}
	return 1;
}

/*
 * Signs m (to node's queue, for event seq) as the control plane
 * (core/nodewire.h, tl_nw_cp_message) into the header "sig": tally-node
 * takes nothing from its queue that does not verify.  Without the
 * master key nothing is signed, and the agents refuse what comes.
 */
static int
sign_for_node(struct tl_rx_pub *ps, const char *node, uint64_t seq,
    struct tl_amqp_msg *m)
{
	uint8_t *msg, sig[TL_SIGN_LEN];
	size_t len;
	int rc;

	if (!cp_keys(ps))
		return 0;
	if ((rc = tl_nw_cp_message(node, m->type, seq, m->body, m->len, &msg,
	    &len)) != 0)
		return rc;
	tl_secret_sign(ps->cp_sk, msg, len, sig);
	free(msg);
	hex(sig, sizeof(sig), ps->sighex);
	m->hdr[m->nhdr].key = "sig";
	m->hdr[m->nhdr].str = ps->sighex;
	m->nhdr++;
	return 0;
}

static void
pack_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);

	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

/*
 * A body value with every ext (secret) replaced by "<redacted>"; any
 * other value is copied as it was encoded.
 */
static int
pack_redacted(msgpack_packer *pk, struct tl_bnode n, int depth)
{
	struct tl_bn_iter it;
	struct tl_bnode k, v;
	const void *raw;
	size_t len;
	int rc;

	if (depth > 64)
		return TL_EMALFORMED;
	switch (tl_bn_kind(n)) {
	case TL_BN_SECRET:
	case TL_BN_OTHER:
		pack_str(pk, TL_REDACTED);
		return 0;
	case TL_BN_ARR:
	case TL_BN_MAP:
		if (tl_bn_iter(n, &it) != 0)
			return TL_EMALFORMED;
		if (it.map)
			msgpack_pack_map(pk, (size_t)it.left);
		else
			msgpack_pack_array(pk, (size_t)it.left);
		while ((rc = tl_bn_iter_next(&it, &k, &v)) == 1)
			if ((it.map && (rc = pack_redacted(pk, k,
			    depth + 1)) != 0) ||
			    (rc = pack_redacted(pk, v, depth + 1)) != 0)
				return rc;
		return rc;
	default:
		if (tl_bn_raw(n, &raw, &len) != 0)
			return TL_EMALFORMED;
		return msgpack_sbuffer_write(pk->data, raw, len) == 0 ? 0 :
		    ENOMEM;
	}
}

/* The event as msgpack, the shape of its JSON (ts as RFC 3339). */
static int
render_msgpack(struct tl_rx_pub *ps, const struct tl_event *ev)
{
	msgpack_packer pk;
	struct tl_bview v;
	char ts[64], id[2 * TL_ID_LEN + 1], corr[2 * TL_ID_LEN + 1];
	int rc;

	if (tl_bview_open(&v, ev->body, ev->body_len) != 0)
		return TL_EMALFORMED;
	msgpack_sbuffer_clear(&ps->mp);
	msgpack_packer_init(&pk, &ps->mp, msgpack_sbuffer_write);
	tl_json_time(ev->ts, ts);
	hex(ev->id, TL_ID_LEN, id);
	hex(ev->corr, TL_ID_LEN, corr);
	msgpack_pack_map(&pk, 10);
	pack_str(&pk, "seq");
	msgpack_pack_uint64(&pk, ev->seq);
	pack_str(&pk, "ts");
	pack_str(&pk, ts);
	pack_str(&pk, "type");
	pack_str(&pk, ev->type);
	pack_str(&pk, "stream");
	pack_str(&pk, ev->stream);
	pack_str(&pk, "version");
	msgpack_pack_uint64(&pk, ev->version);
	pack_str(&pk, "actor");
	pack_str(&pk, ev->actor);
	pack_str(&pk, "cause");
	msgpack_pack_uint64(&pk, ev->cause);
	pack_str(&pk, "id");
	pack_str(&pk, id);
	pack_str(&pk, "corr");
	pack_str(&pk, corr);
	pack_str(&pk, "body");
	rc = pack_redacted(&pk, v.root, 0);
	tl_bview_close(&v);
	return rc;
}

/* --- publishing --------------------------------------------------- */

static int
note_inflight(struct tl_rx_pub *ps, uint64_t seq, uint64_t tag)
{
	if (tl_vec_grow(&ps->in, &ps->capin, ps->nin + 1,
	    sizeof(ps->in[0])) != 0)
		return ENOMEM;
	ps->in[ps->nin].seq = seq;
	ps->in[ps->nin].tag = tag;
	ps->nin++;
	return 0;
}

/* The sealed delivery, to the holder's node queue. */
static int
publish_sealed(struct tl_rx_pub *ps, const struct tl_event *ev,
    const char *id, uint64_t *tag)
{
	struct tl_amqp_msg m;
	struct tl_bview v;
	struct tl_bnode n;
	const void *sealed;
	size_t slen;
	char node[64], grant[256] = "", holder[160] = "", q[80];
	int rc;

	if ((rc = tl_bview_open(&v, ev->body, ev->body_len)) != 0)
		return rc;
	if (tl_bn_getstr(v.root, "node", node, sizeof(node)) != 0 ||
	    tl_bn_get(v.root, "sealed", &n) != 0 ||
	    tl_bn_secret(n, &sealed, &slen) != 0) {
		tl_bview_close(&v);
		return 0;	/* nothing sealed to deliver */
	}
	tl_bn_getstr(v.root, "grant", grant, sizeof(grant));
	tl_bn_getstr(v.root, "holder", holder, sizeof(holder));
	snprintf(q, sizeof(q), "tally.node.%s", node);
	if ((rc = node_queue(ps, q)) != 0)
		goto out;
	memset(&m, 0, sizeof(m));
	m.exchange = "";
	m.routing_key = q;
	m.body = sealed;
	m.len = slen;
	m.content_type = "application/octet-stream";
	m.message_id = id;
	m.type = ev->type;
	m.timestamp = ev->ts / 1000000000u;
	m.persistent = 1;
	m.hdr[0].key = "seq";
	m.hdr[0].num = (int64_t)ev->seq;
	m.hdr[1].key = "grant";
	m.hdr[1].str = grant;
	m.hdr[2].key = "holder";
	m.hdr[2].str = holder;
	m.hdr[3].key = "version";
	m.hdr[3].num = (int64_t)tl_bn_getu64(v.root, "version", 0);
	m.nhdr = 4;
	if ((rc = sign_for_node(ps, node, ev->seq, &m)) == 0)
		rc = tl_amqp_publish(ps->a, &m, tag);
out:
	tl_bview_close(&v);
	return rc;
}

/*
 * The JSON js (a notice of ev's type) to node's queue, signed for it:
 * what publish_removed, publish_revoked and publish_cert send.
 */
static int
node_notice(struct tl_rx_pub *ps, const struct tl_event *ev, const char *id,
    uint64_t *tag, const char *node, const char *js)
{
	struct tl_amqp_msg m;
	char q[80];
	int rc;

	snprintf(q, sizeof(q), "tally.node.%s", node);
	if ((rc = node_queue(ps, q)) != 0)
		return rc;
	memset(&m, 0, sizeof(m));
	m.exchange = "";
	m.routing_key = q;
	m.body = js;
	m.len = strlen(js);
	m.content_type = "application/json";
	m.message_id = id;
	m.type = ev->type;
	m.timestamp = ev->ts / 1000000000u;
	m.persistent = 1;
	m.hdr[0].key = "seq";
	m.hdr[0].num = (int64_t)ev->seq;
	m.nhdr = 1;
	if ((rc = sign_for_node(ps, node, ev->seq, &m)) == 0)
		rc = tl_amqp_publish(ps->a, &m, tag);
	return rc;
}

/*
 * An assignment removed, to its node's queue: tally-node removes the
 * module's files ({"module","node"}, type assignment.removed).
 */
static int
publish_removed(struct tl_rx_pub *ps, const struct tl_event *ev,
    const char *id, uint64_t *tag)
{
	struct tl_bview v;
	char node[64], module[64], grant[TL_GRANT_ID_MAX + 1];
	char *js = NULL;
	json_t *j;
	/* credential.withdrawn names a grant where assignment.removed a module. */
	int wd = strcmp(ev->type, TL_EV_CRED_WITHDRAWN) == 0;
	int rc;

	if ((rc = tl_bview_open(&v, ev->body, ev->body_len)) != 0)
		return rc;
	if (tl_bn_getstr(v.root, "node", node, sizeof(node)) != 0 ||
	    (wd ? tl_bn_getstr(v.root, "grant", grant, sizeof(grant)) :
	    tl_bn_getstr(v.root, "module", module, sizeof(module))) != 0) {
		tl_bview_close(&v);
		return 0;
	}
	tl_bview_close(&v);
	if ((j = json_pack("{s:s,s:s}", wd ? "grant" : "module", wd ? grant :
	    module, "node", node)) == NULL ||
	    (js = json_dumps(j, JSON_COMPACT)) == NULL) {
		json_decref(j);
		return ENOMEM;
	}
	json_decref(j);
	rc = node_notice(ps, ev, id, tag, node, js);
	free(js);
	return rc;
}

/*
 * A certificate issued, to its holder's node's queue (public: JSON
 * {"grant","holder","node","version","cert"}, type certificate.issued,
 * signed like every notice): tally-node takes it for the key it made.
 */
static int
publish_cert(struct tl_rx_pub *ps, const struct tl_event *ev,
    const char *id, uint64_t *tag)
{
	struct tl_bview v;
	struct tl_bnode cn;
	char node[64], grant[TL_GRANT_ID_MAX + 1], holder[160];
	const char *cp;
	size_t cl;
	char *js = NULL;
	json_t *j = NULL;
	int rc;

	if ((rc = tl_bview_open(&v, ev->body, ev->body_len)) != 0)
		return rc;
	if (tl_bn_getstr(v.root, "node", node, sizeof(node)) != 0 ||
	    tl_bn_getstr(v.root, "grant", grant, sizeof(grant)) != 0 ||
	    tl_bn_getstr(v.root, "holder", holder, sizeof(holder)) != 0 ||
	    tl_bn_get(v.root, "cert", &cn) != 0 ||
	    tl_bn_str(cn, &cp, &cl) != 0) {
		tl_bview_close(&v);
		return 0;
	}
	j = json_pack("{s:s,s:s,s:s,s:I,s:s%}", "grant", grant, "holder",
	    holder, "node", node, "version", (json_int_t)tl_bn_getu64(v.root,
	    "version", 0), "cert", cp, cl);
	tl_bview_close(&v);
	if (j == NULL || (js = json_dumps(j, JSON_COMPACT)) == NULL) {
		json_decref(j);
		return ENOMEM;
	}
	json_decref(j);
	rc = node_notice(ps, ev, id, tag, node, js);
	free(js);
	return rc;
}

struct holders {
	char	(*nodes)[64];
	size_t	 n, cap;
};

/* d/GRANT/HOLDER: a node that was delivered the grant, once each. */
static int
holder_node(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct holders *h = arg;
	const char *at = strchr(rest, '@');
	size_t i;

	(void)val;
	(void)vlen;
	if (at == NULL || strchr(rest, '/') != NULL || strlen(at + 1) >= 64)
		return 0;
	for (i = 0; i < h->n; i++)
		if (strcmp(h->nodes[i], at + 1) == 0)
			return 0;
	if (tl_vec_grow(&h->nodes, &h->cap, h->n + 1, sizeof(h->nodes[0])) !=
	    0)
		return ENOMEM;
	snprintf(h->nodes[h->n++], sizeof(h->nodes[0]), "%s", at + 1);
	return 0;
}

/*
 * A grant revoked or purged, to the queue of every node it was
 * delivered to (the grants projection's d/GRANT/HOLDER): tally-node
 * drops its values from the module's files ({"grant"}, the event's
 * type).  Sent to a node that no longer holds it, it changes nothing.
 */
static int
publish_revoked(struct tl_rx_pub *ps, struct tl_txn *t,
    const struct tl_event *ev, const char *id, uint64_t *tag)
{
	struct tl_bview v;
	struct tl_proj p;
	struct holders h = { NULL, 0, 0 };
	char grant[TL_GRANT_ID_MAX + 1], k[TL_KEY_MAX], *js = NULL;
	json_t *j;
	size_t i;
	int rc;

	if ((rc = tl_bview_open(&v, ev->body, ev->body_len)) != 0)
		return rc;
	rc = tl_bn_getstr(v.root, "grant", grant, sizeof(grant));
	tl_bview_close(&v);
	if (rc != 0)
		return 0;
	if ((rc = tl_proj_open(t, &p)) != 0 ||
	    (rc = tl_key(k, "d/%s/", grant)) != 0 ||
	    (rc = tl_rec_scan(t, p.grants, k, holder_node, &h)) != 0)
		goto out;
	if ((j = json_pack("{s:s}", "grant", grant)) == NULL ||
	    (js = json_dumps(j, JSON_COMPACT)) == NULL) {
		json_decref(j);
		rc = ENOMEM;
		goto out;
	}
	json_decref(j);
	for (i = 0; rc == 0 && i < h.n; i++)
		rc = node_notice(ps, ev, id, tag, h.nodes[i], js);
out:
	free(js);
	free(h.nodes);
	return rc;
}

/*
 * The replication stream: the envelope exactly as the log holds it (a
 * follower appends these bytes and gets the same chain), sequence,
 * chain hash and this leader's epoch in headers, and the authenticator
 * of all of it (core/secret.h, format TL_STREAM_AUTH_V in "auth").
 * Secrets inside are the log's ciphertext.
 */
static int
publish_stream(struct tl_rx_pub *ps, const struct tl_event *ev,
    const char *id, uint64_t *tag)
{
	struct tl_amqp_msg m;
	char h[2 * TL_HASH_LEN + 1], mh[2 * TL_STREAM_MAC_LEN + 1];
	uint8_t mac[TL_STREAM_MAC_LEN], sig[TL_SIGN_LEN];
	int rc;

	hex(ev->hash, TL_HASH_LEN, h);
	memset(&m, 0, sizeof(m));
	m.exchange = "";
	m.routing_key = ps->stream;
	m.body = ev->raw;
	m.len = ev->raw_len;
	m.content_type = "application/x-tally-envelope";
	m.message_id = id;
	m.type = ev->type;
	m.timestamp = ev->ts / 1000000000u;
	m.persistent = 1;
	m.hdr[0].key = "seq";
	m.hdr[0].num = (int64_t)ev->seq;
	m.hdr[1].key = "hash";
	m.hdr[1].str = h;
	m.hdr[2].key = "epoch";
	m.hdr[2].num = (int64_t)ps->epoch;
	m.nhdr = 3;
	/* Only a holder of the master key makes this (secret.h). */
	if (ps->key != NULL && ps->key->k != NULL) {
		struct tl_stream_auth sa = { ev->seq, ps->epoch, ev->hash,
		    ev->raw, ev->raw_len };

		tl_secret_stream_auth(ps->key, &sa, mac);
		hex(mac, TL_STREAM_MAC_LEN, mh);
		m.hdr[3].key = "mac";
		m.hdr[3].str = mh;
		m.hdr[4].key = "auth";
		m.hdr[4].num = TL_STREAM_AUTH_V;
		m.nhdr = 5;
		/* The same bytes signed: what a follower without the
		 * master key checks, with the public half. */
		if (cp_keys(ps)) {
			if ((rc = tl_secret_stream_sign(ps->cp_sk, &sa,
			    sig)) != 0)
				return rc;
			hex(sig, TL_SIGN_LEN, ps->sighex);
			m.hdr[5].key = "sig";
			m.hdr[5].str = ps->sighex;
			m.nhdr = 6;
		}
	}
	return tl_amqp_publish(ps->a, &m, tag);
}

static int
publish_event(struct tl_rx_pub *ps, struct tl_txn *t,
    const struct tl_event *ev)
{
	struct tl_amqp_msg m;
	char id[2 * TL_ID_LEN + 1], *js = NULL;
	json_t *j = NULL;
	uint64_t tag = 0;
	int rc;

	hex(ev->id, TL_ID_LEN, id);
	memset(&m, 0, sizeof(m));
	if (ps->msgpack) {
		if ((rc = render_msgpack(ps, ev)) != 0)
			return rc;
		m.body = ps->mp.data;
		m.len = ps->mp.size;
		m.content_type = "application/msgpack";
	} else {
		if ((j = tl_json_event(ev)) == NULL ||
		    (js = json_dumps(j, JSON_COMPACT)) == NULL) {
			json_decref(j);
			return TL_EMALFORMED;
		}
		m.body = js;
		m.len = strlen(js);
		m.content_type = "application/json";
	}
	m.exchange = ps->exchange;
	m.routing_key = ev->type;
	m.message_id = id;
	m.type = ev->type;
	m.timestamp = ev->ts / 1000000000u;
	m.persistent = 1;
	m.hdr[0].key = "seq";
	m.hdr[0].num = (int64_t)ev->seq;
	m.hdr[1].key = "stream";
	m.hdr[1].str = ev->stream;
	m.nhdr = 2;
	rc = tl_amqp_publish(ps->a, &m, &tag);
	free(js);
	json_decref(j);
	if (rc == 0 && ps->node_queues &&
	    strcmp(ev->type, TL_EV_CRED_DELIVERED) == 0)
		rc = publish_sealed(ps, ev, id, &tag);
	if (rc == 0 && ps->node_queues &&
	    strcmp(ev->type, TL_EV_CERT_ISSUED) == 0)
		rc = publish_cert(ps, ev, id, &tag);
	if (rc == 0 && ps->node_queues &&
	    (strcmp(ev->type, TL_EV_ASSIGN_REMOVED) == 0 ||
	    strcmp(ev->type, TL_EV_CRED_WITHDRAWN) == 0))
		rc = publish_removed(ps, ev, id, &tag);
	if (rc == 0 && ps->node_queues &&
	    (strcmp(ev->type, TL_EV_GRANT_REVOKED) == 0 ||
	    strcmp(ev->type, TL_EV_GRANT_PURGED) == 0))
		rc = publish_revoked(ps, t, ev, id, &tag);
	if (rc == 0 && ps->stream[0])
		rc = publish_stream(ps, ev, id, &tag);
	if (rc == 0)
		rc = note_inflight(ps, ev->seq, tag);
	return rc;
}

struct ckarg {
	uint64_t	seq;
};

static int
ckpt_cb(struct tl_txn *t, void *arg)
{
	struct ckarg *ca = arg;
	uint64_t cur = 0;

	tl_ckpt_get(t, CKPT, &cur);
	if (ca->seq <= cur)
		return 0;	/* never backwards */
	return tl_ckpt_set(t, CKPT, ca->seq);
}

/* Moves the checkpoint over the events whose messages are confirmed. */
static int
commit_confirmed(struct tl_rx *rx, struct tl_rx_pub *ps, unsigned *count)
{
	struct ckarg ca = { 0 };
	uint64_t conf = tl_amqp_confirmed(ps->a);
	size_t i = 0;
	int rc;

	while (i < ps->nin && ps->in[i].tag <= conf)
		i++;
	if (i == 0)
		return 0;
	ca.seq = ps->in[i - 1].seq;
	if ((rc = tl_log_write(rx->log, ckpt_cb, &ca)) != 0)
		return rc;
	if (ca.seq > ps->ck_last)
		ps->ck_last = ca.seq;
	*count += (unsigned)i;
	memmove(ps->in, ps->in + i, (ps->nin - i) * sizeof(*ps->in));
	ps->nin -= i;
	return 0;
}

/*
 * Publishes what follows the checkpoint (or, on a connection that has
 * published already, what follows its last message: the unconfirmed
 * tail stays in flight from one pass to the next), within the pass's
 * budget, and moves the checkpoint over the confirmed prefix.  When it
 * has caught up with the head it waits for the last confirms, so that
 * an idle publisher's checkpoint is the head.  A broker error is
 * returned (with *brokerr set) after the checkpoint was moved over
 * whatever was confirmed before it.
 */
static int
publish_batch(struct tl_rx *rx, struct tl_rx_pub *ps, unsigned *count,
    int *more, int *brokerr)
{
	struct tl_txn *t;
	struct tl_iter *it = NULL;
	struct tl_filter f = { 0 };
	struct tl_event ev;
	uint64_t ck = 0, head = 0, last = 0, start = tl_rx_now();
	unsigned n = 0;
	int rc, wrc;

	*more = 0;
	*brokerr = 0;
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if ((rc = tl_ckpt_get(t, CKPT, &ck)) != 0 && rc != TL_ENOTFOUND)
		goto out;
	tl_log_last(t, &head, NULL);
	/*
	 * What the stream's authenticator says of who published: this
	 * leader's epoch, set from the log before its first pass (epoch.h);
	 * 1, the first leader's, before anything set it.
	 */
	ps->epoch = rx->epoch > 0 ? rx->epoch : 1;
	rc = 0;
	/*
	 * Nothing in flight: go on from the checkpoint.  Rewound (tally
	 * publish rewind moved it back): forget what is in flight and
	 * publish again from there.
	 */
	if (ps->nin == 0 || ck < ps->ck_last)
		ps->nin = 0, ps->pub_seq = ck;
	ps->ck_last = ck;
	last = ps->pub_seq;
	if (last >= head)
		goto out;
	f.from = last + 1;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		goto out;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		if ((rc = publish_event(ps, t, &ev)) != 0) {
			*brokerr = rc != TL_EMALFORMED && rc != ENOMEM;
			break;
		}
		last = ps->pub_seq = ev.seq;
		if (++n % DRAIN_EVERY == 0) {
			wrc = tl_amqp_wait_confirms(ps->a,
			    tl_amqp_published(ps->a), 0);
			if (wrc != 0 && wrc != TL_ETIMEDOUT) {
				rc = wrc;
				*brokerr = 1;
				break;
			}
			if (n >= PASS_MAX || tl_rx_now() - start >
			    PASS_BUDGET_NS)
				break;
		}
	}
	if (rc == TL_EEOF)
		rc = 0;
	if (rc == TL_EMALFORMED)
		tl_rx_log(rx, TL_RX_ERR, "publisher: event %llu cannot be "
		    "rendered (run tally verify)", (unsigned long long)
		    (last + 1));
out:
	tl_iter_close(it);
	tl_log_abort(t);
	if (ps->nin > 0 && !*brokerr) {
		/* Caught up: the last confirms; otherwise what has come. */
		wrc = tl_amqp_wait_confirms(ps->a, tl_amqp_published(ps->a),
		    last >= head ? tl_sub_deadline(5000) : 0);
		if (wrc == TL_ETIMEDOUT && last < head)
			wrc = 0;
		if (wrc != 0) {
			rc = wrc;
			*brokerr = 1;
		}
	}
	if (ps->nin > 0) {
		wrc = commit_confirmed(rx, ps, count);
		if (wrc != 0 && rc == 0)
			rc = wrc;
	}
	if (rc == 0 && (last < head || ps->nin > 0))
		*more = 1;
	return rc;
}

/* --- acknowledgements --------------------------------------------- */

static int
name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

struct ackw {
	struct tl_rx		*rx;
	const char		*via;	/* the queue's name */
	struct tl_ack_offer	 o;
	char			 holder[140];
	char			 actor[TL_ACTOR_MAX + 1];
	int			 offered;
};

/* Counted as refused input (reactors/ack.h); nothing is appended. */
struct refw {
	struct tl_rx	*rx;
	const char	*via, *node, *kind, *why;
};

static int
refused_cb(struct tl_txn *t, void *arg)
{
	struct refw *w = arg;

	return tl_ack_refused(w->rx, t, w->via, w->node, w->kind, w->why);
}

static int
refuse(struct tl_rx *rx, const char *via, const char *node, const char *kind,
    const char *why)
{
	struct refw w = { rx, via, node, kind, why };

	return tl_log_write(rx->log, refused_cb, &w);
}

/*
 * The message becomes an offer (credential.ack-offered) only once its
 * node's signature verifies and it is not one already decided
 * (tl_ack_screen); the ack pass (reactors/ack.c) then checks the proof
 * and records the acknowledgement or the refusal.  What fails here is
 * counted, never appended: anyone may publish to tally.acks.
 */
static int
ack_cb(struct tl_txn *t, void *arg)
{
	struct ackw *w = arg;
	struct tl_ctx c;
	struct tl_body b;
	char stream[TL_STREAM_MAX + 1], why[TL_WHY_MAX];
	const char *kind;
	int rc;

	w->offered = 0;
	if ((rc = tl_ctx_begin(&c, t, w->actor)) != 0)
		return rc;
	if ((rc = tl_ack_screen(t, &c.p, &w->o, &kind, why)) ==
	    TL_EREFUSED)
		return tl_ack_refused(w->rx, t, w->via, strcmp(kind,
		    TL_REFUSED_NOKEY) != 0 ? w->o.node : "?", kind, why);
	if (rc != 0)
		return rc;
	snprintf(stream, sizeof(stream), "node/%s", w->o.node);
	tl_body_init(&b);
	tl_body_str(&b, TL_F_NODE, w->o.node);
	tl_body_str(&b, TL_F_GRANT, w->o.grant);
	tl_body_str(&b, TL_F_HOLDER, w->o.holder);
	tl_body_u64(&b, TL_F_VERSION, w->o.version);
	tl_body_str(&b, TL_F_NONCE, w->o.nonce);
	tl_body_str(&b, TL_F_SIG, w->o.sig);
	tl_body_str(&b, TL_F_MAC, w->o.mac);
	tl_body_str(&b, TL_F_VIA, "amqp");
	rc = tl_emit(&c, TL_EV_ACK_OFFERED, stream, &b, NULL);
	tl_body_free(&b);
	if (rc == 0)
		rc = tl_ctx_end(&c);
	w->offered = rc == 0;
	return rc;
}

static int
short_str(const char *s, size_t max)
{
	return s == NULL || strlen(s) <= max;
}

struct repw {
	struct tl_rx	*rx;
	const char	*via;
	const char	*node, *report, *sig;
	char		 actor[TL_ACTOR_MAX + 1];
};

/*
 * An agent's report is its heartbeat: its last-seen time is touched
 * in place (the scratch table TL_NW_SEEN_TABLE), and node.reported is
 * appended only when its signature verifies and it differs from the
 * one the graph holds, so an idle mesh appends nothing.  The check is
 * the whole of a report's verification (its node's signature), so
 * there is no offer to record first.
 */
static int
report_cb(struct tl_txn *t, void *arg)
{
	struct repw *w = arg;
	struct tl_ctx c;
	struct tl_body b;
	char stream[TL_STREAM_MAX + 1], why[TL_WHY_MAX];
	const char *kind;
	int rc;

	if ((rc = tl_ctx_begin(&c, t, w->actor)) != 0)
		return rc;
	if ((rc = tl_report_screen(t, &c.p, w->node, w->report, w->sig, &kind,
	    why)) == TL_EREFUSED)
		return tl_ack_refused(w->rx, t, w->via, strcmp(kind,
		    TL_REFUSED_NOKEY) != 0 ? w->node : "?", kind, why);
	if (rc != 0)
		return rc;
	if ((rc = tl_nw_seen(t, w->node, tl_rx_now())) != 0)
		return rc;
	if (tl_report_same(t, &c.p, w->node, w->report))
		return 0;
	snprintf(stream, sizeof(stream), "node/%s", w->node);
	tl_body_init(&b);
	tl_body_str(&b, TL_F_NODE, w->node);
	tl_body_str(&b, TL_F_REPORT, w->report);
	rc = tl_emit(&c, TL_EV_NODE_REPORTED, stream, &b, NULL);
	tl_body_free(&b);
	if (rc == 0)
		rc = tl_ctx_end(&c);
	return rc;
}

/* An agent's report {"node","report","sig"}. */
static int
one_report(struct tl_rx *rx, struct tl_rx_pub *ps, json_t *j)
{
	struct repw w;

	memset(&w, 0, sizeof(w));
	if (json_unpack(j, "{s:s,s:s,s:s}", "node", &w.node, "report",
	    &w.report, "sig", &w.sig) != 0 || !name_ok(w.node) ||
	    strlen(w.report) > TL_NW_REPORT_MAX || strlen(w.sig) > 256)
		return refuse(rx, ps->acks, "?", TL_REFUSED_MALFORMED, "not a "
		    "report {\"node\",\"report\",\"sig\"}");
	w.rx = rx;
	w.via = ps->acks;
	snprintf(w.actor, sizeof(w.actor), "node:%s", w.node);
	return tl_log_write(rx->log, report_cb, &w);
}

/* A stream standby's report, checked against this log (epoch.h). */
struct sbyw {
	const char	*name;
	uint64_t	 seq;
	uint8_t		 hash[TL_HASH_LEN];
	char		 why[TL_WHY_MAX];	/* "" when kept */
};

static int
standby_cb(struct tl_txn *t, void *arg)
{
	struct sbyw *w = arg;
	struct timespec now;
	struct tl_event ev;
	int rc;

	w->why[0] = '\0';
	if ((rc = tl_log_get(t, w->seq, &ev)) == TL_ENOTFOUND) {
		snprintf(w->why, sizeof(w->why), "a standby's report of event "
		    "%llu, which this log does not hold",
		    (unsigned long long)w->seq);
		return 0;
	}
	if (rc != 0)
		return rc;
	if (memcmp(ev.hash, w->hash, TL_HASH_LEN) != 0) {
		snprintf(w->why, sizeof(w->why), "a standby's report whose "
		    "hash at event %llu is not this log's",
		    (unsigned long long)w->seq);
		return 0;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	return tl_ep_standby_put(t, w->name, w->seq, (uint64_t)now.tv_sec *
	    1000000000u + (uint64_t)now.tv_nsec);
}

/*
 * A stream standby's position {"standby","seq","hash"} (follow.c): kept
 * for tally status and the board when the hash is this log's there,
 * counted as refused input otherwise.  Nothing of it is appended.
 */
static int
one_standby(struct tl_rx *rx, struct tl_rx_pub *ps, json_t *j)
{
	struct sbyw w;
	const char *hash = NULL;
	json_int_t seq = 0;
	size_t i;
	int rc;

	memset(&w, 0, sizeof(w));
	if (json_unpack(j, "{s:s,s:I,s:s}", "standby", &w.name, "seq", &seq,
	    "hash", &hash) != 0 || seq < 1 || *w.name == '\0' ||
	    strlen(w.name) > TL_EP_STANDBY_NAME ||
	    tl_secret_unhex(hash, w.hash, TL_HASH_LEN) != 0)
		return refuse(rx, ps->acks, "?", TL_REFUSED_MALFORMED, "not a "
		    "standby's report {\"standby\",\"seq\",\"hash\"}");
	for (i = 0; w.name[i] != '\0'; i++)
		if ((unsigned char)w.name[i] < 0x20 ||
		    (unsigned char)w.name[i] > 0x7e)
			return refuse(rx, ps->acks, "?", TL_REFUSED_MALFORMED,
			    "a standby's name must be printable ASCII");
	w.seq = (uint64_t)seq;
	if ((rc = tl_log_write(rx->log, standby_cb, &w)) != 0)
		return rc;
	if (w.why[0] != '\0')
		return refuse(rx, ps->acks, "?", TL_REFUSED_MALFORMED, w.why);
	return 0;
}

/*
 * One message of the acks queue: {"node","grant","holder","version",
 * "nonce","sig","mac"} as tally-node sends it, or a report.  Returns 0
 * when it was handled (offered, or counted as refused input) and may
 * be acknowledged to the broker.
 */
static int
one_ack(struct tl_rx *rx, struct tl_rx_pub *ps,
    const struct tl_amqp_delivery *d)
{
	struct ackw w;
	json_error_t je;
	json_t *j;
	const char *node = NULL, *module = NULL, *grant = NULL, *holder = NULL;
	const char *nonce = NULL, *sig = NULL, *mac = NULL;
	json_int_t version = 0;
	int rc;

	j = json_loadb(d->body, d->len, JSON_REJECT_DUPLICATES, &je);
	if (j != NULL && json_is_object(j) &&
	    json_object_get(j, "report") != NULL) {
		rc = one_report(rx, ps, j);
		json_decref(j);
		return rc;
	}
	if (j != NULL && json_is_object(j) &&
	    json_object_get(j, "standby") != NULL) {
		rc = one_standby(rx, ps, j);
		json_decref(j);
		return rc;
	}
	if (j == NULL || json_unpack(j, "{s:s,s?s,s?s,s?s,s:I,s?s,s?s,s?s}",
	    "node", &node, "module", &module, "grant", &grant, "holder",
	    &holder, "version", &version, "nonce", &nonce, "sig", &sig, "mac",
	    &mac) != 0 || !name_ok(node) || version < 1 ||
	    (module == NULL && holder == NULL) ||
	    (module != NULL && !name_ok(module)) ||
	    !short_str(grant, 200) || !short_str(holder, 139) ||
	    !short_str(nonce, 64) || !short_str(sig, 256) ||
	    !short_str(mac, 128)) {
		json_decref(j);
		return refuse(rx, ps->acks, "?", TL_REFUSED_MALFORMED, "not "
		    "{\"node\",\"grant\",\"holder\",\"version\",\"nonce\","
		    "\"sig\",\"mac\"}");
	}
	memset(&w, 0, sizeof(w));
	w.rx = rx;
	w.via = ps->acks;
	if (holder != NULL)
		snprintf(w.holder, sizeof(w.holder), "%s", holder);
	else
		snprintf(w.holder, sizeof(w.holder), "%s@%s", module, node);
	w.o.node = node;
	w.o.grant = grant ? grant : "";
	w.o.holder = w.holder;
	w.o.nonce = nonce ? nonce : "";
	w.o.sig = sig ? sig : "";
	w.o.mac = mac ? mac : "";
	w.o.version = (uint64_t)version;
	snprintf(w.actor, sizeof(w.actor), "amqp:%s", node);
	rc = tl_log_write(rx->log, ack_cb, &w);
	if (rc == 0 && w.offered)
		tl_rx_log(rx, TL_RX_DEBUG, "publisher: an acknowledgement "
		    "signed by node %s, v%lld, offered", node,
		    (long long)version);
	json_decref(j);
	return rc;
}

static int
consume_acks(struct tl_rx *rx, struct tl_rx_pub *ps, int *brokerr)
{
	struct tl_amqp_delivery d;
	unsigned i;
	int rc = 0;

	*brokerr = 0;
	for (i = 0; i < ACKS_PER_PASS; i++) {
		rc = tl_amqp_get(ps->a, ps->acks, &d);
		if (rc == TL_ENOTFOUND) {
			rc = 0;
			break;
		}
		if (rc != 0) {
			*brokerr = 1;
			break;
		}
		rc = one_ack(rx, ps, &d);
		tl_amqp_delivery_free(&d);
		if (rc != 0)
			break;	/* the log failed: leave it on the queue */
		if ((rc = tl_amqp_ack(ps->a, d.tag, 0)) != 0) {
			*brokerr = 1;
			break;
		}
	}
	return rc;
}

/* --- the pass ----------------------------------------------------- */

int
tl_rx_publish(struct tl_rx *rx, unsigned *published, uint64_t *next_ns)
{
	struct tl_rx_pub *ps = rx->pub;
	char why[TL_WHY_MAX] = "";
	uint64_t now;
	int rc, more = 0, brokerr = 0;

	*published = 0;
	*next_ns = 0;
	if (ps == NULL) {
		if ((ps = tl_secret_calloc(1, sizeof(*ps))) == NULL)
			return ENOMEM;
		msgpack_sbuffer_init(&ps->mp);
		rx->pub = ps;
	}
	ps->key = &rx->key;
	if ((rc = load_config(rx, ps)) != 0)
		return rc;
	if (!ps->enabled)
		return 0;
	now = tl_rx_now();
	if (ps->a == NULL) {
		if (now < ps->retry_ns) {
			*next_ns = ps->retry_ns;
			return 0;
		}
		if ((rc = connect_broker(rx, ps, why)) != 0) {
			failed(rx, ps, rc, why);
			*next_ns = ps->retry_ns;
			return 0;
		}
	}
	rc = publish_batch(rx, ps, published, &more, &brokerr);
	if (rc == 0 && ps->acks[0] && !more) {
		if (now >= ps->next_ack_ns || *published > 0) {
			rc = consume_acks(rx, ps, &brokerr);
			ps->next_ack_ns = now + ACK_POLL_NS;
			if (rc == 0)
				rc = tl_ack_refused_flush(rx);
		}
	}
	if (rc != 0 && brokerr) {
		failed(rx, ps, rc, tl_amqp_lasterr(ps->a));
		*next_ns = ps->retry_ns;
		return 0;
	}
	if (rc != 0)
		return rc;
	if (ps->failing) {
		ps->failing = 0;
		tl_rx_log(rx, TL_RX_INFO, "publisher: resumed; %u event(s) "
		    "published", *published);
	}
	/* A new configuration resets failing; the record still says it. */
	if (ps->noted)
		note_state(rx, ps, 0);
	ps->delay_ns = 0;
	if (more)
		*next_ns = now;
	else if (ps->acks[0])
		*next_ns = ps->next_ack_ns;
	return 0;
}

void
tl_rx_publish_ahead(struct tl_rx *rx)
{
	struct tl_rx_pub *ps = rx->pub;
	uint64_t start = tl_rx_now(), next = 0;
	unsigned n = 0;

	if (ps == NULL || !ps->enabled || ps->stream[0] == '\0' ||
	    ps->a == NULL)
		return;
	/* A publisher behind by a burst takes a few of its batches. */
	do {
		if (tl_rx_publish(rx, &n, &next) != 0)
			return;
	} while (next != 0 && next <= tl_rx_now() && ps->a != NULL &&
	    tl_rx_now() - start < AHEAD_BUDGET_NS);
}

/*
 * A promotion counts only as the leader published it: its bytes hash
 * (with its own link) to its "hash" header, which carries our master
 * key's authenticator.  Anyone who may publish to the stream could
 * otherwise depose every leader.
 */
static int
promotion_ok(struct tl_rx *rx, const struct tl_event *ev,
    const struct tl_amqp_delivery *d)
{
	uint8_t h[TL_HASH_LEN], want[TL_HASH_LEN], mac[TL_STREAM_MAC_LEN];
	struct tl_stream_auth sa;

	if (rx->key.k == NULL ||
	    tl_secret_unhex(d->hash, want, sizeof(want)) != 0 ||
	    tl_secret_unhex(d->mac, mac, sizeof(mac)) != 0)
		return 0;
	tl_log_chain_hash(ev->prev, d->body, d->len, h);
	if (memcmp(h, want, sizeof(h)) != 0)
		return 0;
	if (d->auth < 0)	/* format 1: the chain hash alone */
		return tl_secret_stream_mac_ok(&rx->key, want, sizeof(want),
		    mac);
	sa.seq = ev->seq;
	sa.epoch = (uint64_t)d->epoch;
	sa.hash = want;
	sa.body = d->body;
	sa.len = d->len;
	return d->auth == TL_STREAM_AUTH_V && d->epoch >= 0 &&
	    (int64_t)ev->seq == d->seq &&
	    tl_secret_stream_auth_ok(&rx->key, &sa, mac);
}

int
tl_rx_publish_epoch_seen(struct tl_rx *rx, uint64_t *seen, char *where,
    size_t cap)
{
	struct tl_rx_pub *ps = rx->pub;
	struct tl_amqp *a = NULL;
	struct tl_amqp_delivery d;
	struct tl_event ev;
	struct tl_bview v;
	char why[TL_WHY_MAX] = "";
	uint64_t end = tl_sub_deadline(EPOCH_SCAN_MS), n = 0;
	int rc;

	*seen = 0;
	if (ps == NULL) {
		if ((ps = tl_secret_calloc(1, sizeof(*ps))) == NULL)
			return ENOMEM;
		msgpack_sbuffer_init(&ps->mp);
		rx->pub = ps;
	}
	if ((rc = load_config(rx, ps)) != 0)
		return rc;
	if (!ps->enabled || ps->stream[0] == '\0')
		return TL_ENOTFOUND;
	snprintf(where, cap, "stream %s at %s", ps->stream, ps->url);
	/* Its own connection: the publisher's is not up before the fence. */
	if ((rc = tl_amqp_connect(&ps->conf, &a, why)) != 0 ||
	    (rc = tl_amqp_consume_stream(a, ps->stream, 1024, -1)) != 0) {
		tl_rx_log(rx, TL_RX_WARN, "epoch: cannot read the %s: %s (%s)",
		    where, tl_strerror(rc), a ? tl_amqp_lasterr(a) : why);
		goto out;
	}
	tl_amqp_set_max_body(a, TL_ENV_MAX);
	/* To its end: a second with nothing new. */
	while ((rc = tl_amqp_next(a, tl_sub_deadline(EPOCH_IDLE_MS), &d)) ==
	    0) {
		if (d.oversized || tl_env_decode(d.body, d.len, &ev, NULL) != 0 ||
		    strcmp(ev.type, TL_EV_CP_PROMOTED) != 0)
			;	/* not a promotion the leader could have made */
		else if (!promotion_ok(rx, &ev, &d))
			tl_rx_log(rx, TL_RX_WARN, "epoch: a control-plane."
			    "promoted at offset %lld of the %s is not "
			    "authenticated by the master key: ignored",
			    (long long)d.offset, where);
		else if (tl_bview_open(&v, ev.body, ev.body_len) == 0) {
			uint64_t e = tl_bn_getu64(v.root, "epoch", 0);

			if (e > *seen)
				*seen = e;
			tl_bview_close(&v);
		}
		free(d.body);
		/* A stream gives credit back only for what is acknowledged. */
		if (++n % 256 == 0 && (rc = tl_amqp_ack(a, d.tag, 1)) != 0)
			break;
		if (tl_sub_clock() > end) {
			rc = TL_ETIMEDOUT;
			tl_rx_log(rx, TL_RX_WARN, "epoch: the %s was not read "
			    "to its end in %u s (%llu messages)", where,
			    EPOCH_SCAN_MS / 1000, (unsigned long long)n);
			goto out;
		}
	}
	if (rc == TL_ETIMEDOUT)
		rc = 0;
	else
		tl_rx_log(rx, TL_RX_WARN, "epoch: reading the %s: %s (%s)",
		    where, tl_strerror(rc), tl_amqp_lasterr(a));
	tl_rx_log(rx, TL_RX_DEBUG, "epoch: read %llu message(s) of the %s, "
	    "highest promotion %llu", (unsigned long long)n, where,
	    (unsigned long long)*seen);
out:
	tl_amqp_close(a);
	return rc;
}

/*
 * The arbiter of a promotion (rx.h): ours published, then the stream
 * read from its first message for the first authenticated promotion
 * to epoch.  Its own connection, as tl_rx_publish_epoch_seen's.
 */
int
tl_rx_publish_arbiter(struct tl_rx *rx, uint64_t at, uint64_t epoch,
    int *found, uint8_t first[TL_HASH_LEN], char *where, size_t cap)
{
	struct tl_rx_pub *ps = rx->pub;
	struct tl_amqp *a = NULL;
	struct tl_amqp_delivery d;
	struct tl_txn *t;
	struct tl_event ev;
	struct tl_bview v;
	char why[TL_WHY_MAX] = "", id[2 * TL_ID_LEN + 1];
	uint64_t end = tl_sub_deadline(EPOCH_SCAN_MS), n = 0, tag = 0;
	int rc;

	*found = 0;
	if (ps == NULL) {
		if ((ps = tl_secret_calloc(1, sizeof(*ps))) == NULL)
			return ENOMEM;
		msgpack_sbuffer_init(&ps->mp);
		rx->pub = ps;
	}
	ps->key = &rx->key;
	if ((rc = load_config(rx, ps)) != 0)
		return rc;
	if (!ps->enabled || ps->stream[0] == '\0')
		return TL_ENOTFOUND;
	snprintf(where, cap, "stream %s at %s", ps->stream, ps->url);
	if ((rc = tl_amqp_connect(&ps->conf, &a, why)) != 0 ||
	    (rc = tl_amqp_stream(a, ps->stream)) != 0) {
		tl_rx_log(rx, TL_RX_WARN, "epoch: cannot reach the %s: %s (%s)",
		    where, tl_strerror(rc), a ? tl_amqp_lasterr(a) : why);
		goto out;
	}
	/*
	 * Our promotion on the stream, confirmed, before it is looked for;
	 * the publisher sends it again later (a duplicate a follower
	 * skips, byte for byte the same).
	 */
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		goto out;
	if ((rc = tl_log_get(t, at, &ev)) == 0) {
		struct tl_amqp *keep = ps->a;

		hex(ev.id, TL_ID_LEN, id);
		ps->epoch = epoch;
		ps->a = a;
		rc = publish_stream(ps, &ev, id, &tag);
		ps->a = keep;
	}
	tl_log_abort(t);
	if (rc == 0)
		rc = tl_amqp_wait_confirms(a, tag, tl_sub_deadline(5000));
	if (rc != 0) {
		tl_rx_log(rx, TL_RX_WARN, "epoch: cannot publish the promotion "
		    "to the %s: %s (%s)", where, tl_strerror(rc),
		    tl_amqp_lasterr(a));
		goto out;
	}
	if ((rc = tl_amqp_consume_stream(a, ps->stream, 1024, -1)) != 0) {
		tl_rx_log(rx, TL_RX_WARN, "epoch: cannot read the %s: %s (%s)",
		    where, tl_strerror(rc), tl_amqp_lasterr(a));
		goto out;
	}
	tl_amqp_set_max_body(a, TL_ENV_MAX);
	/* The broker's order decides: the first one to epoch wins. */
	while (!*found && (rc = tl_amqp_next(a,
	    tl_sub_deadline(EPOCH_IDLE_MS), &d)) == 0) {
		if (d.oversized || tl_env_decode(d.body, d.len, &ev, NULL) != 0 ||
		    strcmp(ev.type, TL_EV_CP_PROMOTED) != 0)
			;	/* not a promotion */
		else if (!promotion_ok(rx, &ev, &d))
			tl_rx_log(rx, TL_RX_WARN, "epoch: a control-plane."
			    "promoted at offset %lld of the %s is not "
			    "authenticated by the master key: ignored",
			    (long long)d.offset, where);
		else if (tl_bview_open(&v, ev.body, ev.body_len) == 0) {
			if (tl_bn_getu64(v.root, "epoch", 0) == epoch &&
			    tl_secret_unhex(d.hash, first, TL_HASH_LEN) == 0)
				*found = 1;
			tl_bview_close(&v);
		}
		free(d.body);
		if (++n % 256 == 0 && (rc = tl_amqp_ack(a, d.tag, 1)) != 0)
			break;
		if (tl_sub_clock() > end) {
			rc = TL_ETIMEDOUT;
			break;
		}
	}
	if (*found || rc == TL_ETIMEDOUT)
		rc = 0;
	else
		tl_rx_log(rx, TL_RX_WARN, "epoch: reading the %s: %s (%s)",
		    where, tl_strerror(rc), tl_amqp_lasterr(a));
out:
	tl_amqp_close(a);
	return rc;
}
