/*
 * ack.c - verifying the acknowledgements nodes offer (see ack.h).
 */
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ack.h"
#include "core/body.h"
#include "core/bytes.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/secret.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "projections/graph.h"
#include "projections/proj.h"
#include "projections/rotation.h"
#include "credential.h"
#include "rx-internal.h"

#define CKPT		"acks"
#define PER_PASS	256

/* An offer read back from the log: the buffers tl_ack_offer points at. */
struct offer {
	uint64_t	seq;
	char		node[64];
	char		grant[201];
	char		holder[140];
	uint64_t	version;
	char		nonce[2 * TL_NW_NONCE_LEN + 2];
	char		sig[2 * TL_SIGN_LEN + 2];
	char		mac[2 * TL_MAC_LEN + 2];
	char		via[16];
	struct tl_ack_offer o;
};

struct pass {
	struct tl_rx	*rx;
	unsigned	 accepted, refused;
	int		 more;
};

static int
signkey(struct tl_txn *t, const struct tl_proj *p, const char *node,
    const void **pk)
{
	char k[TL_KEY_MAX];
	size_t pklen;

	if (node[0] == '\0' || tl_key(k, "nk/%s", node) != 0 ||
	    tl_kv_get(t, p->graph, k, strlen(k), pk, &pklen) != 0 ||
	    pklen != TL_SIGN_PUBLEN)
		return TL_ENOTFOUND;
	return 0;
}

static int
screened(const char **kind, const char *k, char *why, const char *fmt,
    const char *arg)
{
	*kind = k;
	snprintf(why, TL_WHY_MAX, fmt, arg);
	return TL_EREFUSED;
}

int
tl_ack_screen(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_ack_offer *o, const char **kind, char *why)
{
	struct tl_grant g;
	uint8_t nonce[TL_NW_NONCE_LEN], sig[TL_SIGN_LEN], msg[TL_NW_MSG_MAX];
	const void *pk;
	size_t mlen;

	*kind = NULL;
	why[0] = '\0';
	if (signkey(t, p, o->node, &pk) != 0)
		return screened(kind, TL_REFUSED_NOKEY, why, "node %s has "
		    "no signing key (no such node, or added before signing "
		    "keys: tally node rekey)", o->node);
	if (o->sig[0] == '\0' || o->mac[0] == '\0' || o->nonce[0] == '\0')
		return screened(kind, TL_REFUSED_UNSIGNED, why, "%s", "no "
		    "proof (a signature, a MAC and a nonce are required)");
	if (tl_secret_unhex(o->nonce, nonce, sizeof(nonce)) != 0 ||
	    tl_secret_unhex(o->sig, sig, sizeof(sig)) != 0 ||
	    strlen(o->mac) != 2 * TL_MAC_LEN)
		return screened(kind, TL_REFUSED_MALFORMED, why, "%s",
		    "malformed proof (nonce, sig or mac not hex of the right "
		    "length)");
	if (tl_nw_ack_message(o->grant, o->holder, o->version, nonce, msg,
	    &mlen) != 0 || tl_secret_verify(pk, msg, mlen, sig) != 0)
		return screened(kind, TL_REFUSED_BADSIG, why, "bad "
		    "signature: not signed by node %s's key", o->node);
	/*
	 * Signed by the node, but perhaps long ago: a message taken off the
	 * wire and sent again.  Its node sent it once and it was decided,
	 * or it names a version the grant has moved past: either way there
	 * is nothing to record, and recording it would let anyone who
	 * captured one message grow the log.
	 */
	if (tl_rot_acked(t, p, o->grant, o->version, o->holder)) {
		*kind = TL_REFUSED_REPLAYED;
		snprintf(why, TL_WHY_MAX, "replayed: %s already acknowledged "
		    "v%llu of %s", o->holder, (unsigned long long)o->version,
		    o->grant);
		return TL_EREFUSED;
	}
	if (tl_grant_get(t, p, o->grant, &g, NULL) == 0 &&
	    o->version < g.version) {
		*kind = TL_REFUSED_REPLAYED;
		snprintf(why, TL_WHY_MAX, "replayed or late: v%llu of %s is "
		    "not its current credential (v%llu)",
		    (unsigned long long)o->version, o->grant,
		    (unsigned long long)g.version);
		return TL_EREFUSED;
	}
	return 0;
}

/* A report's "since" (tally-node: when its content appeared); 0: none. */
static uint64_t
since_of(const char *json, size_t len)
{
	json_t *j = json_loadb(json, len, 0, NULL);
	json_int_t v = json_integer_value(json_object_get(j, "since"));

	json_decref(j);
	return v > 0 ? (uint64_t)v : 0;
}

/*
 * Signed by its node, but perhaps long ago: a report older than the one
 * the graph holds (its "since", when its content first appeared on the
 * agent, is earlier; or the same with other content; or none where the
 * recorded one has one) was sent again by someone, and would show the
 * node as it once was.
 */
static int
fresh(struct tl_txn *t, const struct tl_proj *p, const char *node,
    const char *report, const char **kind, char *why)
{
	char k[TL_KEY_MAX];
	const void *v;
	size_t vl, rl = strlen(report);
	uint64_t have, got;

	if (tl_key(k, "nr/%s", node) != 0 ||
	    tl_kv_get(t, p->graph, k, strlen(k), &v, &vl) != 0 || vl < 8 ||
	    (have = since_of((const char *)v + 8, vl - 8)) == 0)
		return 0;
	got = since_of(report, rl);
	if (got > have || (got == have && vl - 8 == rl &&
	    memcmp((const uint8_t *)v + 8, report, rl) == 0))
		return 0;
	*kind = TL_REFUSED_REPLAYED;
	snprintf(why, TL_WHY_MAX, "replayed: a report of node %s older than "
	    "the one recorded (since %llu, recorded since %llu)", node,
	    (unsigned long long)got, (unsigned long long)have);
	return TL_EREFUSED;
}

int
tl_report_screen(struct tl_txn *t, const struct tl_proj *p, const char *node,
    const char *report, const char *sighex, const char **kind, char *why)
{
	uint8_t sig[TL_SIGN_LEN], *msg = NULL;
	const void *pk;
	size_t mlen;
	int rc;

	*kind = NULL;
	why[0] = '\0';
	if (signkey(t, p, node, &pk) != 0)
		return screened(kind, TL_REFUSED_NOKEY, why, "node %s has "
		    "no signing key", node);
	if (sighex[0] == '\0')
		return screened(kind, TL_REFUSED_UNSIGNED, why, "%s",
		    "unsigned report");
	if (tl_secret_unhex(sighex, sig, sizeof(sig)) != 0)
		return screened(kind, TL_REFUSED_MALFORMED, why, "%s",
		    "malformed signature (not hex of the right length)");
	if ((rc = tl_nw_report_message(node, report, &msg, &mlen)) != 0)
		return rc;
	rc = tl_secret_verify(pk, msg, mlen, sig);
	free(msg);
	if (rc != 0)
		return screened(kind, TL_REFUSED_BADSIG, why, "bad "
		    "signature: not signed by node %s's key", node);
	return fresh(t, p, node, report, kind, why);
}

int
tl_report_same(struct tl_txn *t, const struct tl_proj *p, const char *node,
    const char *report)
{
	char k[TL_KEY_MAX];
	const void *v;
	size_t vl, rl = strlen(report);

	if (tl_key(k, "nr/%s", node) != 0 ||
	    tl_kv_get(t, p->graph, k, strlen(k), &v, &vl) != 0 || vl < 8)
		return 0;
	return vl - 8 == rl && memcmp((const uint8_t *)v + 8, report, rl) == 0;
}

/* --- the scratch tables ----------------------------------------------- */

#define REFUSED_WHY_MAX	300

int
tl_ack_refused(struct tl_rx *rx, struct tl_txn *t, const char *via,
    const char *node, const char *kind, const char *why)
{
	uint8_t val[16 + REFUSED_WHY_MAX];
	char key[16 + 64 + 32 + 3];
	const void *old;
	size_t ol, wl = strlen(why);
	uint64_t count = 0, now = tl_rx_now(), logged = 0, suppressed = 0;
	tl_kv kv;
	int rc;

	if (wl > REFUSED_WHY_MAX)
		wl = REFUSED_WHY_MAX;
	if ((rc = tl_kv_open_scratch(t, TL_REFUSED_TABLE, &kv)) != 0)
		return rc;
	snprintf(key, sizeof(key), "%.15s %.63s %.31s", via, node[0] ? node :
	    "?", kind);
	if (tl_kv_get(t, kv, key, strlen(key), &old, &ol) == 0 && ol >= 16)
		count = tl_get_be64(old);
	tl_put_be64(val, count + 1);
	tl_put_be64(val + 8, now);
	memcpy(val + 16, why, wl);
	if ((rc = tl_kv_put(t, kv, key, strlen(key), val, 16 + wl)) != 0)
		return rc;
	/* tallyd's own log: one line per TL_REFUSED_LOG_NS at most. */
	if (tl_kv_get(t, kv, TL_REFUSED_LOG, strlen(TL_REFUSED_LOG), &old,
	    &ol) == 0 && ol == 16) {
		logged = tl_get_be64(old);
		suppressed = tl_get_be64((const uint8_t *)old + 8);
	}
	if (rx != NULL && (logged == 0 || now < logged || now - logged >=
	    TL_REFUSED_LOG_NS)) {
		char more[96] = "";

		if (suppressed > 0)
			snprintf(more, sizeof(more), " (%llu more suppressed "
			    "since the last such line)",
			    (unsigned long long)suppressed);
		tl_rx_log(rx, TL_RX_WARN, "refused input on %s claiming node "
		    "%s (%s, %llu so far): %s%s; tally status counts them all",
		    via, node[0] ? node : "?", kind,
		    (unsigned long long)(count + 1), why, more);
		logged = now;
		suppressed = 0;
	} else
		suppressed++;
	tl_put_be64(val, logged);
	tl_put_be64(val + 8, suppressed);
	return tl_kv_put(t, kv, TL_REFUSED_LOG, strlen(TL_REFUSED_LOG), val,
	    16);
}

static int
flush_cb(struct tl_txn *t, void *arg)
{
	struct tl_rx *rx = arg;
	uint8_t val[16];
	const void *old;
	size_t ol;
	uint64_t now = tl_rx_now(), logged, suppressed;
	tl_kv kv;
	int rc;

	if ((rc = tl_kv_open_scratch(t, TL_REFUSED_TABLE, &kv)) != 0)
		return rc;
	if (tl_kv_get(t, kv, TL_REFUSED_LOG, strlen(TL_REFUSED_LOG), &old,
	    &ol) != 0 || ol != 16)
		return 0;
	logged = tl_get_be64(old);
	suppressed = tl_get_be64((const uint8_t *)old + 8);
	if (suppressed == 0 || (now >= logged && now - logged <
	    TL_REFUSED_LOG_NS))
		return 0;
	tl_rx_log(rx, TL_RX_WARN, "refused input: %llu more suppressed since "
	    "the last such line (tally status counts them all)",
	    (unsigned long long)suppressed);
	tl_put_be64(val, now);
	tl_put_be64(val + 8, 0);
	return tl_kv_put(t, kv, TL_REFUSED_LOG, strlen(TL_REFUSED_LOG), val,
	    16);
}

int
tl_ack_refused_flush(struct tl_rx *rx)
{
	struct tl_txn *t;
	const void *v;
	size_t vl;
	uint64_t now = tl_rx_now(), logged = 0, suppressed = 0;
	tl_kv kv;
	int rc;

	/* A read first: there is seldom anything to say. */
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if (tl_kv_open_scratch(t, TL_REFUSED_TABLE, &kv) == 0 &&
	    tl_kv_get(t, kv, TL_REFUSED_LOG, strlen(TL_REFUSED_LOG), &v,
	    &vl) == 0 && vl == 16) {
		logged = tl_get_be64(v);
		suppressed = tl_get_be64((const uint8_t *)v + 8);
	}
	tl_log_abort(t);
	if (suppressed == 0 || (now >= logged && now - logged <
	    TL_REFUSED_LOG_NS))
		return 0;
	return tl_log_write(rx->log, flush_cb, rx);
}

struct each_refused {
	tl_ack_refused_fn	 fn;
	void			*arg;
};

static int
each_refused(const void *key, size_t klen, const void *val, size_t vlen,
    void *arg)
{
	struct each_refused *er = arg;
	char k[128], why[REFUSED_WHY_MAX + 1], *node, *kind;
	size_t wl;

	if (klen >= sizeof(k) || vlen < 16 || (klen == strlen(TL_REFUSED_LOG)
	    && memcmp(key, TL_REFUSED_LOG, klen) == 0))
		return 0;
	memcpy(k, key, klen);
	k[klen] = '\0';
	if ((node = strchr(k, ' ')) == NULL || (kind = strchr(node + 1,
	    ' ')) == NULL)
		return 0;
	*node++ = '\0';
	*kind++ = '\0';
	wl = vlen - 16 > REFUSED_WHY_MAX ? REFUSED_WHY_MAX : vlen - 16;
	memcpy(why, (const uint8_t *)val + 16, wl);
	why[wl] = '\0';
	return er->fn(k, node, kind, tl_get_be64(val),
	    tl_get_be64((const uint8_t *)val + 8), why, er->arg);
}

int
tl_ack_refused_each(struct tl_txn *t, tl_ack_refused_fn fn, void *arg)
{
	struct each_refused er = { fn, arg };
	tl_kv kv;

	/* A read transaction finds no table until something was refused. */
	if (tl_kv_open_scratch(t, TL_REFUSED_TABLE, &kv) != 0)
		return 0;
	return tl_kv_scan(t, kv, "", 0, each_refused, &er);
}

/* --- the ack pass ------------------------------------------------------- */

/*
 * Why a screened offer (tl_ack_screen passed it: its node signed it)
 * is refused, or "" when it verifies.  Every check is against the
 * record as of this transaction.
 */
static void
check(struct tl_rx *rx, struct tl_ctx *c, const struct tl_ack_offer *o,
    char *why)
{
	struct tl_grant g;
	uint8_t nonce[TL_NW_NONCE_LEN], mac[TL_MAC_LEN];
	uint8_t want[TL_MAC_LEN], pkey[TL_MAC_LEN], msg[TL_NW_MSG_MAX];
	char pw[TL_PASSWORD_MAX + 1], module[64];
	size_t mlen, ml;
	const char *at;

	why[0] = '\0';
	if (tl_secret_unhex(o->nonce, nonce, sizeof(nonce)) != 0 ||
	    tl_secret_unhex(o->mac, mac, sizeof(mac)) != 0 ||
	    tl_nw_ack_message(o->grant, o->holder, o->version, nonce, msg,
	    &mlen) != 0) {
		snprintf(why, TL_WHY_MAX, "malformed proof (nonce or mac not "
		    "hex of the right length)");
		return;
	}
	if ((at = strchr(o->holder, '@')) == NULL || strcmp(at + 1,
	    o->node) != 0 || (ml = (size_t)(at - o->holder)) == 0 ||
	    ml >= sizeof(module)) {
		snprintf(why, TL_WHY_MAX, "holder %s is not on node %s",
		    o->holder, o->node);
		return;
	}
	memcpy(module, o->holder, ml);
	module[ml] = '\0';
	if (tl_grant_get(c->t, &c->p, o->grant, &g, NULL) != 0) {
		snprintf(why, TL_WHY_MAX, "no grant %s", o->grant);
		return;
	}
	if (strcmp(g.module, module) != 0 || (g.node[0] != '\0' &&
	    strcmp(g.node, o->node) != 0) ||
	    tl_grant_delivered(c->t, &c->p, g.id, o->holder) == 0) {
		snprintf(why, TL_WHY_MAX, "%s is not a holder of %s", o->holder,
		    o->grant);
		return;
	}
	if (strcmp(g.state, TL_GRANT_PROVISIONED) != 0 || g.version !=
	    o->version) {
		snprintf(why, TL_WHY_MAX, "v%llu is not the current credential "
		    "of %s (v%llu, %s)", (unsigned long long)o->version, g.id,
		    (unsigned long long)g.version, g.state);
		return;
	}
	if (tl_rx_intent_password(rx, c->t, &g, pw) != 0) {
		snprintf(why, TL_WHY_MAX, "the credential v%llu cannot be read "
		    "to check the proof", (unsigned long long)o->version);
		return;
	}
	tl_nw_proof_key(pw, pkey);
	tl_secret_wipe(pw, sizeof(pw));
	tl_secret_mac(pkey, sizeof(pkey), msg, mlen, want);
	tl_secret_wipe(pkey, sizeof(pkey));
	if (sodium_memcmp(want, mac, sizeof(mac)) != 0)
		snprintf(why, TL_WHY_MAX, "the proof does not match credential "
		    "v%llu of %s", (unsigned long long)o->version, g.id);
}

static int
read_offer(struct tl_txn *t, uint64_t seq, struct offer *o)
{
	struct tl_event ev;
	struct tl_bview v;
	int rc;

	memset(o, 0, sizeof(*o));
	o->seq = seq;
	if ((rc = tl_log_get(t, seq, &ev)) != 0)
		return rc;
	if ((rc = tl_bview_open(&v, ev.body, ev.body_len)) != 0)
		return rc;
	tl_bn_getstr(v.root, "node", o->node, sizeof(o->node));
	tl_bn_getstr(v.root, "grant", o->grant, sizeof(o->grant));
	tl_bn_getstr(v.root, "holder", o->holder, sizeof(o->holder));
	o->version = tl_bn_getu64(v.root, "version", 0);
	tl_bn_getstr(v.root, "nonce", o->nonce, sizeof(o->nonce));
	tl_bn_getstr(v.root, "sig", o->sig, sizeof(o->sig));
	tl_bn_getstr(v.root, "mac", o->mac, sizeof(o->mac));
	tl_bn_getstr(v.root, "via", o->via, sizeof(o->via));
	tl_bview_close(&v);
	o->o.node = o->node;
	o->o.grant = o->grant;
	o->o.holder = o->holder;
	o->o.nonce = o->nonce;
	o->o.sig = o->sig;
	o->o.mac = o->mac;
	o->o.version = o->version;
	return 0;
}

/* Where an offer in the log came from, for the refused-input counts. */
static const char *
via_of(const char *via)
{
	return strcmp(via, "amqp") == 0 ? "tally.acks" : "the log";
}

static int
one(struct pass *ps, struct tl_txn *t, uint64_t seq)
{
	struct tl_ctx c;
	struct offer o;
	struct tl_body b;
	char why[TL_WHY_MAX], stream[TL_STREAM_MAX + 1];
	char actor[TL_ACTOR_MAX + 1];
	const char *kind;
	int rc;

	if ((rc = read_offer(t, seq, &o)) != 0)
		return rc;
	snprintf(actor, sizeof(actor), "node:%s", o.node[0] ? o.node : "?");
	if ((rc = tl_ctx_begin(&c, t, actor)) != 0)
		return rc;
	c.cause = seq;
	/*
	 * Not its node's (or sent again): counted, never recorded.  The
	 * publisher screens what comes from tally.acks before it appends
	 * it; this is for offers an agent appended itself (--log), and
	 * for what became stale between the two.
	 */
	if ((rc = tl_ack_screen(t, &c.p, &o.o, &kind, why)) ==
	    TL_EREFUSED) {
		rc = tl_ack_refused(ps->rx, t, via_of(o.via), o.node[0] &&
		    strcmp(kind, TL_REFUSED_NOKEY) != 0 ? o.node : "?", kind,
		    why);
		return rc == 0 ? tl_ctx_end(&c) : rc;
	}
	if (rc != 0)
		return rc;
	check(ps->rx, &c, &o.o, why);
	tl_body_init(&b);
	if (why[0] == '\0') {
		snprintf(stream, sizeof(stream), "grant/%s", o.grant);
		tl_body_str(&b, TL_F_GRANT, o.grant);
		tl_body_str(&b, TL_F_HOLDER, o.holder);
		tl_body_u64(&b, TL_F_VERSION, o.version);
		tl_body_str(&b, TL_F_PROOF, "verified");
		tl_body_str(&b, TL_F_NONCE, o.nonce);
		rc = tl_emit(&c, TL_EV_CRED_ACKED, stream, &b, NULL);
		ps->accepted++;
		tl_rx_log(ps->rx, TL_RX_INFO, "acks: %s acknowledged v%llu of "
		    "%s, signature and proof verified", o.holder,
		    (unsigned long long)o.version, o.grant);
	} else {
		/*
		 * Signed by the node it names: a fact about that node (a
		 * proof that does not match, a grant it does not hold),
		 * recorded on its stream.
		 */
		snprintf(stream, sizeof(stream), "node/%s", o.node);
		tl_body_str(&b, TL_F_NODE, o.node);
		tl_body_str(&b, TL_F_GRANT, o.grant);
		tl_body_str(&b, TL_F_HOLDER, o.holder);
		tl_body_u64(&b, TL_F_VERSION, o.version);
		tl_body_str(&b, TL_F_REASON, why);
		tl_body_u64(&b, TL_F_OFFERED, seq);
		rc = tl_emit(&c, TL_EV_ACK_REFUSED, stream, &b, NULL);
		ps->refused++;
		tl_rx_log(ps->rx, TL_RX_WARN, "acks: refused the "
		    "acknowledgement at seq %llu signed by node %s: %s",
		    (unsigned long long)seq, o.node, why);
	}
	tl_body_free(&b);
	if (rc == 0)
		rc = tl_ctx_end(&c);
	return rc;
}

/*
 * A report an agent appended (--log): node.reported when node's key
 * signed it and it differs from the one the graph holds; counted as
 * refused input when the signature does not verify.
 */
static int
one_report(struct pass *ps, struct tl_txn *t, uint64_t seq)
{
	struct tl_event ev;
	struct tl_bview v;
	struct tl_bnode n;
	struct tl_ctx c;
	struct tl_body b;
	char node[64] = "", sighex[2 * TL_SIGN_LEN + 2] = "", via[16] = "";
	char why[TL_WHY_MAX] = "", stream[TL_STREAM_MAX + 1];
	char actor[TL_ACTOR_MAX + 1];
	char *report = NULL;
	const char *rp, *kind = TL_REFUSED_MALFORMED;
	size_t rl = 0;
	int rc;

	if ((rc = tl_log_get(t, seq, &ev)) != 0 ||
	    (rc = tl_bview_open(&v, ev.body, ev.body_len)) != 0)
		return rc;
	tl_bn_getstr(v.root, "node", node, sizeof(node));
	tl_bn_getstr(v.root, "sig", sighex, sizeof(sighex));
	tl_bn_getstr(v.root, "via", via, sizeof(via));
	if (tl_bn_get(v.root, "report", &n) == 0 && tl_bn_str(n, &rp, &rl) ==
	    0 && rl <= TL_NW_REPORT_MAX && (report = malloc(rl + 1)) !=
	    NULL) {
		memcpy(report, rp, rl);
		report[rl] = '\0';
	}
	tl_bview_close(&v);
	snprintf(actor, sizeof(actor), "node:%s", node[0] ? node : "?");
	if ((rc = tl_ctx_begin(&c, t, actor)) != 0)
		goto out;
	c.cause = seq;
	if (report == NULL || strlen(report) != rl)
		snprintf(why, sizeof(why), "no report");
	else if ((rc = tl_report_screen(t, &c.p, node, report, sighex, &kind,
	    why)) != 0 && rc != TL_EREFUSED)
		goto out;
	rc = 0;
	if (why[0] != '\0') {
		rc = tl_ack_refused(ps->rx, t, via_of(via), node[0] &&
		    strcmp(kind, TL_REFUSED_NOKEY) != 0 ? node : "?", kind,
		    why);
	} else if (!tl_report_same(t, &c.p, node, report)) {
		tl_body_init(&b);
		snprintf(stream, sizeof(stream), "node/%s", node);
		tl_body_str(&b, TL_F_NODE, node);
		tl_body_str(&b, TL_F_REPORT, report);
		rc = tl_emit(&c, TL_EV_NODE_REPORTED, stream, &b, NULL);
		tl_body_free(&b);
		ps->accepted++;
	}
	if (rc == 0)
		rc = tl_ctx_end(&c);
out:
	free(report);
	return rc;
}

/*
 * Where the pass starts: after its checkpoint, or after the last offer
 * the record shows decided when that is later (a promoted standby, or
 * a lost checkpoint: the offers before it must not be decided again).
 */
static int
start_after(struct tl_txn *t, uint64_t *from)
{
	struct tl_proj p;
	uint64_t ck = 0, decided = 0;
	int rc;

	if ((rc = tl_ckpt_get(t, CKPT, &ck)) != 0 && rc != TL_ENOTFOUND)
		return rc;
	if ((rc = tl_proj_open(t, &p)) != 0 ||
	    (rc = tl_graph_acks_decided(t, &p, &decided)) != 0)
		return rc;
	*from = ck > decided ? ck : decided;
	return 0;
}

static int
pass_cb(struct tl_txn *t, void *arg)
{
	struct pass *ps = arg;
	struct tl_filter f = { 0 };
	struct tl_iter *it;
	struct tl_event ev;
	uint64_t ck = 0, head = 0, seqs[PER_PASS];
	int isack[PER_PASS];
	size_t n = 0, i;
	int rc;

	ps->accepted = ps->refused = 0;
	ps->more = 0;
	if ((rc = tl_proj_catchup(t, 0)) != 0 ||
	    (rc = start_after(t, &ck)) != 0)
		return rc;
	tl_log_last(t, &head, NULL);
	if (ck >= head)
		return 0;
	f.from = ck + 1;
	f.type = "*-offered";
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc;
	while (n < PER_PASS && (rc = tl_iter_next(it, &ev)) == 0) {
		if (strcmp(ev.type, TL_EV_ACK_OFFERED) != 0 &&
		    strcmp(ev.type, TL_EV_REPORT_OFFERED) != 0)
			continue;
		isack[n] = strcmp(ev.type, TL_EV_ACK_OFFERED) == 0;
		seqs[n++] = ev.seq;
	}
	tl_iter_close(it);
	if (rc != 0 && rc != TL_EEOF)
		return rc;
	if (n == PER_PASS) {
		ps->more = 1;
		head = seqs[n - 1];
	}
	/* Offers first collected: the decisions append to the same log. */
	for (i = 0; i < n; i++)
		if ((rc = isack[i] ? one(ps, t, seqs[i]) :
		    one_report(ps, t, seqs[i])) != 0)
			return rc;
	return tl_ckpt_set(t, CKPT, head);
}

int
tl_rx_acks(struct tl_rx *rx, unsigned *accepted, unsigned *refused)
{
	struct pass ps;
	int rc, due;

	*accepted = *refused = 0;
	if ((rc = tl_ack_refused_flush(rx)) != 0)
		return rc;
	/* A read first: most passes have no offer to look at. */
	if ((rc = tl_rx_due_since(rx, CKPT, "*-offered", &due)) != 0 || !due)
		return rc;
	memset(&ps, 0, sizeof(ps));
	ps.rx = rx;
	do {
		if ((rc = tl_log_write(rx->log, pass_cb, &ps)) != 0)
			return rc;
		*accepted += ps.accepted;
		*refused += ps.refused;
	} while (ps.more);
	return 0;
}
