/*
 * ack.c - verifying the acknowledgements nodes offer (see ack.h).
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ack.h"
#include "core/body.h"
#include "core/error.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "projections/rotation.h"
#include "credential.h"
#include "rx-internal.h"

#define CKPT		"acks"
#define PER_PASS	256
#define TAG		"tally-ack/1"
/* The personalisation of the proof key: 16 bytes, generichash's least. */
#define PROOF_KEY	"tally-ack-proof1"

int
tl_ack_message(const char *grant, const char *holder, uint64_t version,
    const uint8_t nonce[TL_ACK_NONCE_LEN], uint8_t out[TL_ACK_MSG_MAX],
    size_t *len)
{
	size_t gl = strlen(grant), hl = strlen(holder), n = 0;
	int i;

	if (sizeof(TAG) + gl + 1 + hl + 1 + 8 + TL_ACK_NONCE_LEN >
	    TL_ACK_MSG_MAX)
		return TL_EINVAL;
	/* NUL-separated: no grant and holder pair reads as another. */
	memcpy(out, TAG, sizeof(TAG));
	n = sizeof(TAG);
	memcpy(out + n, grant, gl + 1);
	n += gl + 1;
	memcpy(out + n, holder, hl + 1);
	n += hl + 1;
	for (i = 7; i >= 0; i--)
		out[n++] = (uint8_t)(version >> (8 * i));
	memcpy(out + n, nonce, TL_ACK_NONCE_LEN);
	*len = n + TL_ACK_NONCE_LEN;
	return 0;
}

int
tl_report_message(const char *node, const char *report, uint8_t **out,
    size_t *len)
{
	static const char tag[] = "tally-report/1";
	size_t nl = strlen(node), rl = strlen(report);
	uint8_t *p;

	if ((p = malloc(sizeof(tag) + nl + 1 + rl)) == NULL)
		return ENOMEM;
	memcpy(p, tag, sizeof(tag));
	memcpy(p + sizeof(tag), node, nl + 1);
	memcpy(p + sizeof(tag) + nl + 1, report, rl);
	*out = p;
	*len = sizeof(tag) + nl + 1 + rl;
	return 0;
}

int
tl_cp_message(const char *node, const char *type, uint64_t seq,
    const void *body, size_t blen, uint8_t **out, size_t *len)
{
	static const char tag[] = "tally-cp/1";
	size_t nl = strlen(node), tl = strlen(type), n;
	uint8_t *p;
	int i;

	n = sizeof(tag) + nl + 1 + tl + 1 + 8 + blen;
	if ((p = malloc(n)) == NULL)
		return ENOMEM;
	memcpy(p, tag, sizeof(tag));
	memcpy(p + sizeof(tag), node, nl + 1);
	memcpy(p + sizeof(tag) + nl + 1, type, tl + 1);
	for (i = 0; i < 8; i++)
		p[sizeof(tag) + nl + 1 + tl + 1 + i] = (uint8_t)(seq >>
		    (56 - 8 * i));
	if (blen > 0)
		memcpy(p + n - blen, body, blen);
	*out = p;
	*len = n;
	return 0;
}

void
tl_ack_proof_key(const char *password, uint8_t key[TL_MAC_LEN])
{
	crypto_generichash(key, TL_MAC_LEN, (const uint8_t *)password,
	    strlen(password), (const uint8_t *)PROOF_KEY, strlen(PROOF_KEY));
}

struct offer {
	uint64_t	seq;
	char		node[64];
	char		grant[201];
	char		holder[140];
	uint64_t	version;
	char		nonce[2 * TL_ACK_NONCE_LEN + 1];
	char		sig[2 * TL_SIGN_LEN + 1];
	char		mac[2 * TL_MAC_LEN + 1];
};

struct pass {
	struct tl_rx	*rx;
	unsigned	 accepted, refused;
	int		 more;
};

static int
unhex(const char *s, uint8_t *out, size_t n)
{
	size_t got = 0;

	if (strlen(s) != 2 * n)
		return TL_EINVAL;
	if (sodium_hex2bin(out, n, s, 2 * n, NULL, &got, NULL) != 0 ||
	    got != n)
		return TL_EINVAL;
	return 0;
}

/*
 * Why the offer is refused, or "" when it verifies.  Every check is
 * against the record as of this transaction.
 */
static void
check(struct tl_rx *rx, struct tl_ctx *c, const struct offer *o,
    char *why, size_t wl)
{
	struct tl_grant g;
	uint8_t nonce[TL_ACK_NONCE_LEN], sig[TL_SIGN_LEN], mac[TL_MAC_LEN];
	uint8_t want[TL_MAC_LEN], pkey[TL_MAC_LEN], msg[TL_ACK_MSG_MAX];
	char pw[TL_PASSWORD_LEN + 1], k[TL_KEY_MAX], module[64];
	const void *pk;
	size_t pklen, mlen, ml;
	const char *at;

	why[0] = '\0';
	if (tl_key(k, "nk/%s", o->node) != 0 ||
	    tl_kv_get(c->t, c->p.graph, k, strlen(k), &pk, &pklen) != 0 ||
	    pklen != TL_SIGN_PUBLEN) {
		snprintf(why, wl, "node %s has no signing key (no such node, "
		    "or added before signing keys: tally node rekey %s)",
		    o->node, o->node);
		return;
	}
	if (o->sig[0] == '\0' || o->mac[0] == '\0' || o->nonce[0] == '\0') {
		snprintf(why, wl, "no proof (a signature, a MAC and a nonce "
		    "are required)");
		return;
	}
	if (unhex(o->nonce, nonce, sizeof(nonce)) != 0 ||
	    unhex(o->sig, sig, sizeof(sig)) != 0 ||
	    unhex(o->mac, mac, sizeof(mac)) != 0) {
		snprintf(why, wl, "malformed proof (nonce, sig or mac not "
		    "hex of the right length)");
		return;
	}
	if (tl_ack_message(o->grant, o->holder, o->version, nonce, msg,
	    &mlen) != 0 || tl_secret_verify(pk, msg, mlen, sig) != 0) {
		snprintf(why, wl, "bad signature: not signed by node %s's "
		    "key", o->node);
		return;
	}
	if ((at = strchr(o->holder, '@')) == NULL || strcmp(at + 1,
	    o->node) != 0 || (ml = (size_t)(at - o->holder)) == 0 ||
	    ml >= sizeof(module)) {
		snprintf(why, wl, "holder %s is not on node %s", o->holder,
		    o->node);
		return;
	}
	memcpy(module, o->holder, ml);
	module[ml] = '\0';
	if (tl_grant_get(c->t, &c->p, o->grant, &g, NULL) != 0) {
		snprintf(why, wl, "no grant %s", o->grant);
		return;
	}
	if (strcmp(g.module, module) != 0 || (g.node[0] != '\0' &&
	    strcmp(g.node, o->node) != 0) ||
	    tl_grant_delivered(c->t, &c->p, g.id, o->holder) == 0) {
		snprintf(why, wl, "%s is not a holder of %s", o->holder,
		    o->grant);
		return;
	}
	if (strcmp(g.state, TL_GRANT_PROVISIONED) != 0 || g.version !=
	    o->version) {
		snprintf(why, wl, "v%llu is not the current credential of %s "
		    "(v%llu, %s)", (unsigned long long)o->version, g.id,
		    (unsigned long long)g.version, g.state);
		return;
	}
	if (tl_rot_acked(c->t, &c->p, g.id, o->version, o->holder)) {
		snprintf(why, wl, "replayed: %s already acknowledged v%llu",
		    o->holder, (unsigned long long)o->version);
		return;
	}
	if (tl_rx_intent_password(rx, c->t, &g, pw) != 0) {
		snprintf(why, wl, "the credential v%llu cannot be read to "
		    "check the proof", (unsigned long long)o->version);
		return;
	}
	tl_ack_proof_key(pw, pkey);
	tl_secret_wipe(pw, sizeof(pw));
	tl_secret_mac(pkey, sizeof(pkey), msg, mlen, want);
	tl_secret_wipe(pkey, sizeof(pkey));
	if (sodium_memcmp(want, mac, sizeof(mac)) != 0)
		snprintf(why, wl, "the proof does not match credential v%llu "
		    "of %s", (unsigned long long)o->version, g.id);
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
	tl_bview_close(&v);
	return 0;
}

static int
one(struct pass *ps, struct tl_txn *t, uint64_t seq)
{
	struct tl_ctx c;
	struct offer o;
	struct tl_body b;
	char why[512], stream[TL_STREAM_MAX + 1], actor[TL_ACTOR_MAX + 1];
	int rc;

	if ((rc = read_offer(t, seq, &o)) != 0)
		return rc;
	snprintf(actor, sizeof(actor), "node:%s", o.node[0] ? o.node : "?");
	if ((rc = tl_ctx_begin(&c, t, actor)) != 0)
		return rc;
	c.cause = seq;
	check(ps->rx, &c, &o, why, sizeof(why));
	tl_body_init(&b);
	if (why[0] == '\0') {
		snprintf(stream, sizeof(stream), "grant/%s", o.grant);
		tl_body_str(&b, "grant", o.grant);
		tl_body_str(&b, "holder", o.holder);
		tl_body_u64(&b, "version", o.version);
		tl_body_str(&b, "proof", "verified");
		tl_body_str(&b, "nonce", o.nonce);
		rc = tl_emit(&c, TL_EV_CRED_ACKED, stream, &b, NULL);
		ps->accepted++;
		tl_rx_log(ps->rx, TL_RX_INFO, "acks: %s acknowledged v%llu of "
		    "%s, signature and proof verified", o.holder,
		    (unsigned long long)o.version, o.grant);
	} else {
		/* The node it claimed, whatever it is: "?" for none. */
		snprintf(stream, sizeof(stream), "node/%s", o.node[0] ? o.node :
		    "?");
		tl_body_str(&b, "node", o.node);
		tl_body_str(&b, "grant", o.grant);
		tl_body_str(&b, "holder", o.holder);
		tl_body_u64(&b, "version", o.version);
		tl_body_str(&b, "reason", why);
		tl_body_u64(&b, "offered", seq);
		rc = tl_emit(&c, TL_EV_ACK_REFUSED, stream, &b, NULL);
		ps->refused++;
		tl_rx_log(ps->rx, TL_RX_WARN, "acks: refused the "
		    "acknowledgement at seq %llu claiming node %s: %s",
		    (unsigned long long)seq, o.node[0] ? o.node : "?", why);
	}
	tl_body_free(&b);
	if (rc == 0)
		rc = tl_ctx_end(&c);
	return rc;
}

/* A report: node.reported when node's key signed it, else refused. */
static int
one_report(struct pass *ps, struct tl_txn *t, uint64_t seq)
{
	struct tl_event ev;
	struct tl_bview v;
	struct tl_bnode n;
	struct tl_ctx c;
	struct tl_body b;
	char node[64] = "", sighex[2 * TL_SIGN_LEN + 1] = "", why[256] = "";
	char k[TL_KEY_MAX], stream[TL_STREAM_MAX + 1], actor[TL_ACTOR_MAX + 1];
	char *report = NULL;
	uint8_t sig[TL_SIGN_LEN], *msg = NULL;
	const void *pk;
	const char *rp;
	size_t rl = 0, pklen, mlen;
	int rc;

	if ((rc = tl_log_get(t, seq, &ev)) != 0 ||
	    (rc = tl_bview_open(&v, ev.body, ev.body_len)) != 0)
		return rc;
	tl_bn_getstr(v.root, "node", node, sizeof(node));
	tl_bn_getstr(v.root, "sig", sighex, sizeof(sighex));
	if (tl_bn_get(v.root, "report", &n) == 0 && tl_bn_str(n, &rp, &rl) ==
	    0 && rl < 65536 && (report = malloc(rl + 1)) != NULL) {
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
	else if (tl_key(k, "nk/%s", node) != 0 ||
	    tl_kv_get(t, c.p.graph, k, strlen(k), &pk, &pklen) != 0 ||
	    pklen != TL_SIGN_PUBLEN)
		snprintf(why, sizeof(why), "node %s has no signing key", node);
	else if (unhex(sighex, sig, sizeof(sig)) != 0 ||
	    tl_report_message(node, report, &msg, &mlen) != 0 ||
	    tl_secret_verify(pk, msg, mlen, sig) != 0)
		snprintf(why, sizeof(why), "bad signature: not signed by node "
		    "%s's key", node);
	tl_body_init(&b);
	snprintf(stream, sizeof(stream), "node/%s", node[0] ? node : "?");
	tl_body_str(&b, "node", node);
	if (why[0] == '\0') {
		tl_body_str(&b, "report", report);
		rc = tl_emit(&c, TL_EV_NODE_REPORTED, stream, &b, NULL);
		ps->accepted++;
	} else {
		tl_body_str(&b, "reason", why);
		tl_body_u64(&b, "offered", seq);
		rc = tl_emit(&c, TL_EV_REPORT_REFUSED, stream, &b, NULL);
		ps->refused++;
		tl_rx_log(ps->rx, TL_RX_WARN, "acks: refused the report at seq "
		    "%llu claiming node %s: %s", (unsigned long long)seq,
		    node[0] ? node : "?", why);
	}
	tl_body_free(&b);
	if (rc == 0)
		rc = tl_ctx_end(&c);
out:
	free(msg);
	free(report);
	return rc;
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
	if ((rc = tl_ckpt_get(t, CKPT, &ck)) != 0 && rc != TL_ENOTFOUND)
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
	struct tl_txn *t;
	uint64_t ck = 0, head = 0;
	int rc;

	*accepted = *refused = 0;
	/* A read first: most passes have no offer to look at. */
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if (tl_ckpt_get(t, CKPT, &ck) != 0)
		ck = 0;
	tl_log_last(t, &head, NULL);
	if (ck < head) {
		struct tl_filter f = { 0 };
		struct tl_iter *it;
		struct tl_event ev;

		f.from = ck + 1;
		f.type = "*-offered";
		rc = tl_iter_open(t, &f, &it);
		if (rc == 0) {
			rc = tl_iter_next(it, &ev);
			tl_iter_close(it);
		}
	} else
		rc = TL_EEOF;
	tl_log_abort(t);
	/*
	 * Nothing offered since: the checkpoint can wait, but not so long
	 * that each look walks a long tail of the log again.
	 */
	if (rc == TL_EEOF && head - ck < 4096)
		return 0;
	if (rc != 0 && rc != TL_EEOF)
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
