/*
 * follow.c - tallyd --follow on a standby's home (tally init --standby),
 * and tally-board --record in its store (follow.h).
 *
 * Consumes the leader's replication stream (tally publish configure
 * --stream NAME: every event as the bytes of the leader's log, headers
 * "seq" and "hash") over AMQP 0-9-1 and appends each envelope, byte for
 * byte, to this home's log with tl_log_append_raw, which checks its
 * sequence, its link to our head, its hash and its stream version: the
 * logs are then identical, head hash included.  Where to resume is our
 * own: the checkpoint "follow:NAME" holds the stream offset after the
 * last message read (appended, skipped or passed over), written in the
 * same transaction as the events,
 * so a restart neither misses nor repeats anything.  The leader
 * publishes its unconfirmed tail again after a reconnection, so the
 * stream may hold an event twice: a message at or before our head must
 * be byte-identical to what we hold (then it is skipped), otherwise the
 * published record has a different past and we stop, naming the
 * sequence.  A gap, a broken link or a hash that does not match stops
 * us too: nothing past it is appended, nothing before it is lost.
 *
 * Nothing in a message is believed before it is screened (screen()),
 * as it arrives and before it is kept: a body larger than the log
 * allows (TL_ENV_MAX) is dropped unread by tl_amqp_next; a message
 * without a chain hash cannot be the leader's; and with the master key
 * in the home, the authenticator ("mac", format "auth": core/secret.h)
 * must cover the whole message -- sequence, body, chain hash, epoch --
 * or, for format 1 of an older leader, its chain hash, which the body
 * must then hash to.  A message that fails is passed over: not
 * appended, acknowledged off the stream position like any other,
 * counted and shown (tl_ep_follow_put: tally status; the log, at most
 * every LOG_EVERY_NS), never a reason to stop.  So is an authentic one
 * from an epoch below this log's (a deposed leader still publishing).
 * What stops us is only what an authenticated leader did.  A batch is
 * bounded by count and by bytes (BATCH, BATCH_BYTES).  The
 * checkpoint "publisher" follows the head as well: everything here came
 * from the stream, so once promoted this home publishes only what is
 * new.  The follower does not declare the stream (the leader's
 * publisher does): two connections declaring a new stream at once can
 * leave RabbitMQ 3.10 with a queue whose stream is "not found"; until
 * it exists the consumer is refused and retried with backoff.  It does no reconciling: that is tallyd after tally promote.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/body.h"
#include "core/envelope.h"
#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "core/amqp.h"
#include "reactors/epoch.h"
#include "reactors/rx.h"
#include "follow.h"

#define BATCH		512
#define BATCH_BYTES	(32u << 20)	/* kept bodies, beyond one */
#define BATCH_SEEN	(4 * BATCH)	/* messages read, kept or not */
#define PREFETCH	2048
#define LOG_EVERY_NS	10000000000u	/* passed-over messages: 10 s */
#define BACKOFF_MIN_MS	250
#define BACKOFF_MAX_MS	15000
#define EXIT_CORRUPT	5

struct msg {
	uint64_t	 tag;
	int64_t		 offset;
	int64_t		 seq;
	uint8_t		 hash[TL_HASH_LEN];
	int64_t		 epoch;		/* authenticated (format 2), or -1 */
	int		 promo;		/* its type property says a promotion */
	int		 has_sig;	/* sig verified with the leader's key */
	uint8_t		 sig[TL_SIGN_LEN];
	void		*body;
	size_t		 len;
};

/* Messages passed over, not yet logged (rate-limited). */
struct passed {
	uint64_t	 n;
	int64_t		 seq, off;	/* the first of them */
	char		 why[TL_WHY_MAX];
	uint64_t	 last_ns;	/* when the last line was logged */
};

struct batch {
	const char	*ckname;
	const struct tl_key *key;	/* NULL: no authenticator checked */
	const uint8_t	*pk;		/* the leader's signing key, or NULL:
					 * no signature checked */
	struct msg	 m[BATCH];
	size_t		 n;
	size_t		 bytes;		/* of the kept bodies */
	size_t		 seen;		/* messages read, kept or not */
	uint64_t	 last_tag;	/* the last one read */
	int64_t		 last_off;
	/* Passed over while screening: recorded with the batch. */
	uint64_t	 nscreened;
	int64_t		 scr_off;	/* the last of them */
	char		 scr_why[TL_WHY_MAX];
	struct passed	*pass;
	/* Results of one write. */
	size_t		 done;		/* kept messages handled */
	size_t		 appended;
	size_t		 nstale;	/* authentic, from a lower epoch */
	int		 err;		/* the first refusal */
	uint64_t	 errseq;
	char		 why[TL_WHY_MAX];
	uint64_t	 head;
};

static const struct tl_follow_opts *opt;

/*
 * Which leader this home follows, for the CLI (tl_ep_follow_put): the
 * count of messages passed over is kept across restarts.
 */
static int
record_cb(struct tl_txn *t, void *arg)
{
	const struct tl_follow_opts *o = arg;
	struct tl_ep_follow f;
	int rc;

	if ((rc = tl_ep_follow_get(t, &f)) != 0 && rc != TL_ENOTFOUND)
		return rc;
	snprintf(f.url, sizeof(f.url), "%s", o->url);
	snprintf(f.stream, sizeof(f.stream), "%s", o->stream);
	return tl_ep_follow_put(t, &f);
}

static void
flog(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
flog(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	opt->logf(level, fmt, ap);
	va_end(ap);
}

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One passed-over message, to log (rate-limited by the caller). */
static void
pass_note(struct passed *p, int64_t seq, int64_t off, const char *why)
{
	if (p->n++ == 0) {
		p->seq = seq;
		p->off = off;
		snprintf(p->why, sizeof(p->why), "%s", why);
	}
}

/*
 * Before anything in d is believed or kept: 0 to keep it, else why it
 * is passed over, in why (cap bytes).  m gets what it authenticated.
 */
static int
screen(const struct batch *b, const struct tl_amqp_delivery *d,
    struct msg *m, char *why, size_t cap)
{
	uint8_t mac[TL_STREAM_MAC_LEN], h[TL_HASH_LEN];
	struct tl_stream_auth sa;
	struct tl_event ev;

	m->epoch = -1;
	if (d->oversized) {
		snprintf(why, cap, "its body of %zu bytes is larger than the "
		    "largest event a log holds (%u bytes)", d->len,
		    TL_ENV_MAX);
		return -1;
	}
	if (tl_secret_unhex(d->hash, m->hash, TL_HASH_LEN) != 0) {
		snprintf(why, cap, "it has no chain hash header (hash)");
		return -1;
	}
	if (b->pk != NULL) {
		/* First: nothing else in it is believed unsigned. */
		if (tl_secret_unhex(d->sig, m->sig, TL_SIGN_LEN) != 0) {
			snprintf(why, cap, "it has no signature (sig)");
			return -1;
		}
		if (d->auth != TL_STREAM_AUTH_V || d->seq <= 0 ||
		    d->epoch < 0) {
			snprintf(why, cap, "its signed headers (auth %lld, seq, "
			    "epoch) are missing or not of format %d",
			    (long long)d->auth, TL_STREAM_AUTH_V);
			return -1;
		}
		sa.seq = (uint64_t)d->seq;
		sa.epoch = (uint64_t)d->epoch;
		sa.hash = m->hash;
		sa.body = d->body;
		sa.len = d->len;
		if (tl_secret_stream_verify(b->pk, &sa, m->sig) != 0) {
			snprintf(why, cap, "its signature (sig) does not verify "
			    "with the leader's signing key (sequence, body, "
			    "chain hash, epoch)");
			return -1;
		}
		m->has_sig = 1;
		m->epoch = d->epoch;
	}
	if (b->key == NULL)
		return 0;	/* the chain, in append_cb */
	if (tl_secret_unhex(d->mac, mac, TL_STREAM_MAC_LEN) != 0) {
		snprintf(why, cap, "it has no authenticator (mac)");
		return -1;
	}
	if (d->auth == TL_STREAM_AUTH_V) {
		sa.seq = d->seq > 0 ? (uint64_t)d->seq : 0;
		sa.epoch = d->epoch >= 0 ? (uint64_t)d->epoch : 0;
		sa.hash = m->hash;
		sa.body = d->body;
		sa.len = d->len;
		if (d->seq <= 0 || d->epoch < 0 ||
		    !tl_secret_stream_auth_ok(b->key, &sa, mac)) {
			snprintf(why, cap, "its authenticator (mac) does not "
			    "match the message (sequence, body, chain hash, "
			    "epoch)");
			return -1;
		}
		m->epoch = d->epoch;
		return 0;
	}
	if (d->auth >= 0) {
		snprintf(why, cap, "its authenticator is of format %lld, which "
		    "this tally does not read (%d; 1 without the auth header)",
		    (long long)d->auth, TL_STREAM_AUTH_V);
		return -1;
	}
	/* Format 1, an older leader's: the chain hash, which the body
	 * must hash to before anything in it is believed. */
	if (!tl_secret_stream_mac_ok(b->key, m->hash, TL_HASH_LEN, mac)) {
		snprintf(why, cap, "its authenticator (mac, format 1) does not "
		    "match its chain hash");
		return -1;
	}
	if (tl_env_decode(d->body, d->len, &ev, NULL) != 0) {
		snprintf(why, cap, "its body is not an event");
		return -1;
	}
	tl_log_chain_hash(ev.prev, d->body, d->len, h);
	if (memcmp(h, m->hash, TL_HASH_LEN) != 0) {
		snprintf(why, cap, "its body does not hash to its "
		    "authenticated chain hash (format 1)");
		return -1;
	}
	return 0;
}

#define STALE_WHY	"it was published at an epoch below this log's: by a " \
	    "deposed leader"
#define LOST_WHY	"a promotion that lost: another promotion to its " \
	    "epoch came first in the stream"

/*
 * Whether m, authentic and published again over have with other
 * bytes, is a second promotion to the epoch have started: two standbys
 * promoted at once both publish theirs, the first in the stream's order
 * leads (reactors/epoch.h, tl_ep_arbitrate) and the other stands down;
 * so does its promotion here.
 */
static int
lost_promotion(const struct tl_event *have, const struct msg *m)
{
	struct tl_event ev;
	struct tl_bview v;
	uint64_t e1 = 0, e2 = 0;

	if (strcmp(have->type, TL_EV_CP_PROMOTED) != 0 ||
	    tl_env_decode(m->body, m->len, &ev, NULL) != 0 ||
	    strcmp(ev.type, TL_EV_CP_PROMOTED) != 0)
		return 0;
	if (tl_bview_open(&v, have->body, have->body_len) == 0) {
		e1 = tl_bn_getu64(v.root, "epoch", 0);
		tl_bview_close(&v);
	}
	if (tl_bview_open(&v, ev.body, ev.body_len) == 0) {
		e2 = tl_bn_getu64(v.root, "epoch", 0);
		tl_bview_close(&v);
	}
	return e1 > 0 && e1 == e2 && (uint64_t)m->epoch == e2;
}

/*
 * Appends the batch's kept messages in one transaction, up to the first
 * one an authenticated leader could not have published over this log;
 * the good prefix commits with the checkpoints and the count of what
 * was passed over.  Re-run from the start when the map grows
 * (tl_log_write).
 */
static int
append_cb(struct tl_txn *t, void *arg)
{
	struct batch *b = arg;
	struct tl_event have;
	struct tl_ep_follow f;
	char why[TL_WHY_MAX];
	uint64_t seq = 0, head = 0, cur = 1;
	int64_t next = -1, stale_off = -1;
	const char *stale_why = STALE_WHY;
	size_t i;
	int rc;

	b->done = b->appended = b->nstale = 0;
	b->err = 0;
	b->why[0] = '\0';
	if ((b->key != NULL || b->pk != NULL) &&
	    (rc = tl_ep_current(t, &cur, NULL)) != 0)
		return rc;
	for (i = 0; i < b->n; i++) {
		struct msg *m = &b->m[i];

		if (m->epoch >= 0 && (uint64_t)m->epoch < cur) {
			/* Authentic, but its leader was deposed since. */
			b->nstale++;
			stale_off = m->offset;
			stale_why = STALE_WHY;
			pass_note(b->pass, m->seq, m->offset, STALE_WHY);
			b->done = i + 1;
			continue;
		}
		rc = tl_log_append_raw(t, m->body, m->len, m->hash, &seq, why);
		if (rc == TL_EEXIST) {
			/* Published again: it must be what we hold. */
			if ((rc = tl_log_get(t, seq, &have)) != 0)
				return rc;
			if ((have.raw_len != m->len ||
			    memcmp(have.raw, m->body, m->len) != 0) &&
			    m->epoch >= 0 && lost_promotion(&have, m)) {
				/* Authentic, and lost (epoch.h). */
				b->nstale++;
				stale_off = m->offset;
				stale_why = LOST_WHY;
				pass_note(b->pass, m->seq, m->offset, LOST_WHY);
			} else if (have.raw_len != m->len ||
			    memcmp(have.raw, m->body, m->len) != 0) {
				b->err = TL_ECORRUPT;
				b->errseq = seq;
				snprintf(b->why, sizeof(b->why), "event %llu "
				    "was published again with different "
				    "bytes: the published record's past "
				    "differs from this log's (a rewritten "
				    "history)", (unsigned long long)seq);
				break;
			}
		} else if (rc == TL_ECONFLICT || rc == TL_ECORRUPT ||
		    rc == TL_EMALFORMED || rc == TL_ENEWER || rc == TL_ETOOBIG) {
			b->err = rc;
			b->errseq = seq ? seq : (uint64_t)(m->seq > 0 ?
			    m->seq : 0);
			snprintf(b->why, sizeof(b->why), "%s", why[0] ? why :
			    tl_strerror(rc));
			break;
		} else if (rc != 0)
			return rc;
		else {
			struct tl_log_sig ls;

			/* Kept with the event, for tally promote. */
			if (m->has_sig) {
				ls.epoch = (uint64_t)m->epoch;
				memcpy(ls.sig, m->sig, TL_SIGN_LEN);
				if ((rc = tl_log_sig_put(t, seq, &ls)) != 0)
					return rc;
			}
			b->appended++;
			if (m->promo && (b->key != NULL || b->pk != NULL) &&
			    (rc = tl_ep_current(t, &cur, NULL)) != 0)
				return rc;
		}
		next = m->offset + 1;
		b->done = i + 1;
	}
	/* Everything read moves the position, unless we stop here. */
	if (b->err == 0 && b->last_off >= 0)
		next = b->last_off + 1;
	if (b->done == 0 && b->nscreened == 0 && next < 0)
		return 0;
	if ((rc = tl_log_last(t, &head, NULL)) != 0)
		return rc;
	b->head = head;
	if (next > 0 && (rc = tl_ckpt_set(t, b->ckname, (uint64_t)next)) != 0)
		return rc;
	if (b->appended > 0 && (rc = tl_ckpt_set(t, "publisher", head)) != 0)
		return rc;
	if (b->nscreened + b->nstale > 0) {
		if ((rc = tl_ep_follow_get(t, &f)) != 0 && rc != TL_ENOTFOUND)
			return rc;
		snprintf(f.url, sizeof(f.url), "%s", opt->url);
		snprintf(f.stream, sizeof(f.stream), "%s", opt->stream);
		f.passed += b->nscreened + b->nstale;
		if (stale_off > b->scr_off) {
			f.last_offset = stale_off;
			snprintf(f.last_why, sizeof(f.last_why), "%s",
			    stale_why);
		} else {
			f.last_offset = b->scr_off;
			snprintf(f.last_why, sizeof(f.last_why), "%s",
			    b->scr_why);
		}
		if ((rc = tl_ep_follow_put(t, &f)) != 0)
			return rc;
	}
	return 0;
}

/*
 * This standby's position on the leader's acks queue: the head and its
 * chain hash, which the leader checks against its own log and keeps for
 * tally status and the board (reactors/publish.c).  0, or the broker's
 * error (the publish channel is then gone).
 */
static int
report(struct tl_amqp *a, struct tl_log *log)
{
	struct tl_amqp_msg m;
	struct tl_txn *t;
	uint8_t hash[TL_HASH_LEN];
	char hex[2 * TL_HASH_LEN + 1], body[600];
	uint64_t head = 0, tag = 0;
	json_t *j;
	char *s;
	int rc, n;

	if (tl_log_begin(log, TL_TXN_RDONLY, &t) != 0)
		return 0;
	rc = tl_log_last(t, &head, hash);
	tl_log_abort(t);
	if (rc != 0 || head == 0)
		return 0;
	sodium_bin2hex(hex, sizeof(hex), hash, sizeof(hash));
	if ((j = json_pack("{s:s,s:I,s:s}", "standby", opt->name, "seq",
	    (json_int_t)head, "hash", hex)) == NULL)
		return 0;
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (s == NULL)
		return 0;
	n = snprintf(body, sizeof(body), "%s", s);
	free(s);
	if (n < 0 || (size_t)n >= sizeof(body))
		return 0;
	memset(&m, 0, sizeof(m));
	m.routing_key = opt->report_to;
	m.body = body;
	m.len = (size_t)n;
	m.content_type = "application/json";
	/*
	 * Its confirm is read by tl_amqp_next with the deliveries: waiting
	 * for it here would read (and drop) the stream's deliveries.
	 */
	return tl_amqp_publish(a, &m, &tag);
}

/* The passed-over messages not yet logged, when it is time (or now). */
static void
pass_flush(struct passed *p, const struct batch *b, int now)
{
	uint64_t t = mono_ns();

	if (p->n == 0 || (!now && p->last_ns != 0 &&
	    t - p->last_ns < LOG_EVERY_NS))
		return;
	flog(TL_RX_ERR, "refusing %llu message(s) %s, the first at event %lld "
	    "(stream offset %lld): %s; not appended, following on",
	    (unsigned long long)p->n, b->key != NULL ? "not published by a "
	    "holder of the master key" : b->pk != NULL ? "not signed by the "
	    "leader's key" : "that cannot be the leader's",
	    (long long)p->seq, (long long)p->off, p->why);
	p->n = 0;
	p->last_ns = t;
}

static void
batch_clear(struct batch *b)
{
	size_t i;

	for (i = 0; i < b->n; i++)
		free(b->m[i].body);
	b->n = 0;
	b->bytes = b->seen = 0;
	b->last_tag = 0;
	b->last_off = -1;
	b->nscreened = 0;
	b->scr_off = -1;
	b->scr_why[0] = '\0';
}

int
tl_follow_is_standby(const char *home, int *standby)
{
	struct tl_log *log = NULL;
	struct tl_txn *t;
	char logdir[1200];
	int rc;

	if (!(*standby = tl_ep_is_standby(home)))
		return 0;	/* no marker: no standby (epoch.h) */
	snprintf(logdir, sizeof(logdir), "%s/log", home);
	if ((rc = tl_log_open(logdir, TL_LOG_RDONLY, &log)) != 0)
		return rc;
	if ((rc = tl_log_begin(log, TL_TXN_RDONLY, &t)) == 0) {
		rc = tl_ep_standing(t, home, standby, NULL);
		tl_log_abort(t);
	}
	tl_log_close(log);
	return rc;
}

static int
read_password(char *pw, size_t cap)
{
	size_t n;

	if (fgets(pw, (int)cap, stdin) == NULL)
		return -1;
	n = strcspn(pw, "\r\n");
	pw[n] = '\0';
	return n > 0 ? 0 : -1;
}

int
tl_follow_run(const struct tl_follow_opts *o, volatile sig_atomic_t *stop)
{
	struct tl_amqp_conf conf;
	struct tl_amqp *a = NULL;
	struct tl_amqp_delivery d;
	struct tl_log *log = NULL;
	struct tl_txn *t;
	struct batch *b = NULL;
	char logdir[1200], why[TL_WHY_MAX], ckname[TL_CKPT_NAME_MAX + 1];
	char pw[256] = "", keypath[1200], kwhy[TL_WHY_MAX] = "";
	struct tl_key key = { NULL };
	uint8_t pk[TL_SIGN_PUBLEN], given[TL_SIGN_PUBLEN];
	int has_given = 0;
	struct passed pass;
	uint64_t ck = 0, head = 0, delay = 0, total = 0, quiet = mono_ns();
	uint64_t next_report = 0;
	int rc, ex = 1, have, reporting = o->report_to != NULL &&
	    o->name != NULL;

	opt = o;
	memset(&pass, 0, sizeof(pass));
	memset(&conf, 0, sizeof(conf));
	if (tl_amqp_parse_url(o->url, &conf) != 0) {
		flog(TL_RX_ERR, "--amqp %s: expected amqp[s]://HOST[:PORT]"
		    "[/VHOST] without credentials", o->url);
		return 2;
	}
	snprintf(conf.user, sizeof(conf.user), "%s", o->user ? o->user :
	    "guest");
	conf.cafile = o->ca;
	if (o->secret) {
		if (read_password(pw, sizeof(pw)) != 0) {
			flog(TL_RX_ERR, "--secret password: no value on "
			    "standard input");
			return 2;
		}
	} else if (o->user != NULL && o->password != NULL)
		snprintf(pw, sizeof(pw), "%s", o->password);
	else if (o->user == NULL)
		snprintf(pw, sizeof(pw), "guest");
	conf.password = pw;
	conf.timeout_ms = 5000;
	conf.heartbeat = 30;
	snprintf(ckname, sizeof(ckname), "follow:%s", o->stream);
	snprintf(logdir, sizeof(logdir), "%s/log", o->home);
	if ((rc = tl_log_open(logdir, 0, &log)) != 0) {
		flog(TL_RX_ERR, "cannot open the log at %s: %s", logdir,
		    tl_strerror(rc));
		goto out;
	}
	if ((rc = tl_log_write(log, record_cb, (void *)o)) != 0) {
		flog(TL_RX_ERR, "cannot record the leader followed in %s: %s",
		    logdir, tl_strerror(rc));
		goto out;
	}
	if ((b = calloc(1, sizeof(*b))) == NULL)
		goto out;
	b->ckname = ckname;
	b->pass = &pass;
	/*
	 * The master key, when the operator copied it already: then every
	 * message must carry the leader's authenticator.  Without it the
	 * chain is checked, but a third party who may publish to the
	 * stream could forge an event with a correct chain hash.
	 */
	snprintf(keypath, sizeof(keypath), "%s/master.key", o->home);
	if (access(keypath, F_OK) == 0) {
		if ((rc = tl_secret_load(keypath, &key, kwhy)) != 0) {
			flog(TL_RX_ERR, "master key: %s", kwhy[0] ? kwhy :
			    tl_strerror(rc));
			goto out;
		}
		b->key = &key;
		tl_secret_cp_keypair(&key, pk, NULL);
		b->pk = pk;
	}
	/*
	 * The leader's signing key as the operator gave it (tally init
	 * --standby --leader-key), never taken from the stream: with it,
	 * a standby without the master key checks every message's
	 * signature.  Beside the master key it must be the same key.
	 */
	snprintf(keypath, sizeof(keypath), "%s/" TL_LEADER_KEY_FILE, o->home);
	if (o->leader_pk != NULL) {
		memcpy(given, o->leader_pk, sizeof(given));
		has_given = 1;
	} else if (access(keypath, F_OK) == 0) {
		if ((rc = tl_secret_leader_key_load(keypath, given,
		    kwhy)) != 0) {
			flog(TL_RX_ERR, "leader's key: %s", kwhy);
			goto out;
		}
		has_given = 1;
	}
	if (has_given) {
		if (b->pk != NULL && memcmp(given, pk,
		    sizeof(pk)) != 0) {
			flog(TL_RX_ERR, "%s is not the signing key of the master "
			    "key in %s: one of them is not the leader's; "
			    "refusing to follow", keypath, o->home);
			goto out;
		}
		memcpy(pk, given, sizeof(pk));
		b->pk = pk;
	}
	if (b->pk == NULL)
		flog(TL_RX_WARN, "neither the leader's signing key (%s) nor the "
		    "master key in %s: the stream's messages are checked "
		    "against the chain but not authenticated, and tally "
		    "promote will refuse this log (tally init --standby "
		    "--leader-key KEY gives the key)", keypath, o->home);
	flog(TL_RX_INFO, "started on %s: following stream %s at %s (no "
	    "reconciling%s)", o->home, o->stream, o->url, b->key != NULL ?
	    "; every message authenticated with the master key" :
	    has_given ? "; every message's signature checked with the "
	    "leader's key" : "");
	while (!*stop) {
		if (a == NULL) {
			if (delay > 0) {
				struct timespec ts = { (time_t)(delay / 1000),
				    (long)(delay % 1000) * 1000000L };

				nanosleep(&ts, NULL);
				if (*stop)
					break;
			}
			if ((rc = tl_log_begin(log, TL_TXN_RDONLY, &t)) != 0)
				goto out;
			ck = 0;
			tl_ckpt_get(t, ckname, &ck);
			tl_log_last(t, &head, NULL);
			tl_log_abort(t);
			why[0] = '\0';
			if ((rc = tl_amqp_connect(&conf, &a, why)) != 0 ||
			    (rc = tl_amqp_consume_stream(a, o->stream,
			    PREFETCH, ck > 0 ? (int64_t)ck : -1)) != 0) {
				flog(delay ? TL_RX_DEBUG : TL_RX_WARN,
				    "%s: %s (%s); retrying", o->url,
				    tl_strerror(rc), a ? tl_amqp_lasterr(a) :
				    why);
				tl_amqp_close(a);
				a = NULL;
				if (o->idle_ms > 0 && mono_ns() - quiet >=
				    (uint64_t)o->idle_ms * 1000000u) {
					flog(TL_RX_ERR, "%s: not reached in %u ms",
					    o->url, o->idle_ms);
					goto out;
				}
				delay = delay ? delay * 2 : BACKOFF_MIN_MS;
				if (delay > BACKOFF_MAX_MS)
					delay = BACKOFF_MAX_MS;
				continue;
			}
			delay = 0;
			tl_amqp_set_max_body(a, TL_ENV_MAX);
			flog(TL_RX_INFO, "consuming %s from offset %s "
			    "(head %llu)", o->stream, ck > 0 ? "stored" :
			    "first", (unsigned long long)head);
		}
		/* One batch: wait for one, then take what has come. */
		batch_clear(b);
		have = 0;
		for (;;) {
			uint64_t dl = mono_ns() + (b->seen == 0 ? 500000000u :
			    2000000u);
			char swhy[TL_WHY_MAX];
			struct msg *m;

			rc = tl_amqp_next(a, dl, &d);
			if (rc != 0)
				break;
			have = 1;
			b->seen++;
			b->last_tag = d.tag;
			b->last_off = d.offset;
			m = &b->m[b->n];
			memset(m, 0, sizeof(*m));
			if (screen(b, &d, m, swhy, sizeof(swhy)) != 0) {
				b->nscreened++;
				b->scr_off = d.offset;
				snprintf(b->scr_why, sizeof(b->scr_why), "%s",
				    swhy);
				pass_note(&pass, d.seq, d.offset, swhy);
				tl_amqp_delivery_free(&d);
			} else {
				m->tag = d.tag;
				m->offset = d.offset;
				m->seq = d.seq;
				m->promo = strcmp(d.type, TL_EV_CP_PROMOTED) == 0;
				m->body = d.body;
				m->len = d.len;
				d.body = NULL;
				b->bytes += m->len;
				b->n++;
			}
			if (b->n == BATCH || b->bytes >= BATCH_BYTES ||
			    b->seen >= BATCH_SEEN)
				break;
		}
		if (rc != 0 && rc != TL_ETIMEDOUT) {
			/*
			 * A user that may read the stream but not write to
			 * the acks queue: the broker refuses the report only
			 * by closing the channel, seen here.  Following goes
			 * on; reporting does not.
			 */
			if (reporting && strstr(tl_amqp_lasterr(a),
			    "ACCESS_REFUSED") != NULL) {
				flog(TL_RX_WARN, "cannot report this standby's "
				    "position to %s (%s): following without "
				    "reporting", o->report_to,
				    tl_amqp_lasterr(a));
				reporting = 0;
			}
			flog(TL_RX_WARN, "%s: %s (%s); reconnecting", o->url,
			    tl_strerror(rc), tl_amqp_lasterr(a));
			tl_amqp_close(a);
			a = NULL;
			delay = BACKOFF_MIN_MS;
			continue;	/* the batch is read again */
		}
		if (reporting && mono_ns() >= next_report) {
			next_report = mono_ns() + TL_EP_STANDBY_EVERY_S *
			    1000000000ull;
			if ((rc = report(a, log)) != 0) {
				flog(TL_RX_WARN, "cannot report this standby's "
				    "position to %s: %s (%s); not reporting "
				    "again until restarted", o->report_to,
				    tl_strerror(rc), tl_amqp_lasterr(a));
				reporting = 0;
				tl_amqp_close(a);
				a = NULL;
				delay = BACKOFF_MIN_MS;
				continue;
			}
		}
		if (!have) {
			pass_flush(&pass, b, 0);
			if (o->idle_ms > 0 && mono_ns() - quiet >=
			    (uint64_t)o->idle_ms * 1000000u)
				break;
			continue;
		}
		quiet = mono_ns();
		if ((rc = tl_log_write(log, append_cb, b)) != 0) {
			flog(TL_RX_ERR, "cannot append to %s: %s (%s)", logdir,
			    tl_strerror(rc), tl_log_lasterr(log));
			goto out;
		}
		total += b->appended;
		pass_flush(&pass, b, b->err != 0);
		if (b->appended > 0)
			flog(TL_RX_DEBUG, "appended %zu event(s), head %llu",
			    b->appended, (unsigned long long)b->head);
		if (b->err != 0) {
			flog(TL_RX_ERR, "refusing the record at event %llu: %s; "
			    "nothing past it is appended (this log holds "
			    "%llu events, all verified)",
			    (unsigned long long)b->errseq, b->why,
			    (unsigned long long)b->head);
			ex = EXIT_CORRUPT;
			goto out;
		}
		if (b->last_tag > 0 && (rc = tl_amqp_ack(a, b->last_tag,
		    1)) != 0) {
			tl_amqp_close(a);
			a = NULL;
		}
	}
	ex = 0;
	pass_flush(&pass, b, 1);
	flog(TL_RX_INFO, "stopping; %llu event(s) appended",
	    (unsigned long long)total);
out:
	if (b != NULL)
		batch_clear(b);
	free(b);
	tl_amqp_close(a);
	tl_log_close(log);
	tl_secret_key_free(&key);
	tl_secret_wipe(pw, sizeof(pw));
	return ex;
}
