/*
 * certs.c - the certificates fold: what the graph keeps of the mesh
 * CA's certificates beyond the latest per holder (graph.c: ci/, cr/).
 *
 *   cs/GRANT/SERIAL       every certificate of GRANT that may still be
 *                         valid ({holder version not_after ca});
 *   crlr/CA/SERIAL        a certificate of a grant revoked or purged,
 *                         until a list published after its not-after;
 *   crlq/CA               a revocation list is wanted;
 *   crl/CA                the latest list published (certificate.crl).
 *
 * Apart from graph.c because it reads the grants table (which CA, a
 * grant's provider) while grants.c reads the graph: one fold each way
 * would be a call circle.  Pure as every fold: the event's time, never
 * the clock.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "events.h"
#include "grant.h"
#include "graph.h"
#include "record.h"

static int
del(struct tl_txn *t, tl_kv kv, const char *key)
{
	return tl_kv_del(t, kv, key, strlen(key));
}

static int
mark(struct tl_txn *t, tl_kv kv, const char *key)
{
	return tl_kv_put(t, kv, key, strlen(key), "", 0);
}

static int
put_body(struct tl_txn *t, tl_kv kv, const char *key,
    const struct tl_event *ev)
{
	return tl_rec_put(t, kv, key, ev->seq, ev->body, ev->body_len);
}

/* A list is wanted from CA (a revocation, or its first certificate). */
static int
crl_want(struct tl_txn *t, const struct tl_proj *p, const char *provider)
{
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "crlq/%s", provider)) != 0)
		return rc;
	return mark(t, p->graph, k);
}

/* The records under prefix whose not_after passed by ev's time, gone. */
static int
drop_expired(struct tl_txn *t, const struct tl_proj *p, const char *prefix,
    const struct tl_event *ev)
{
	struct tl_rec_keys ks = { NULL, 0, 0 };
	char k[TL_KEY_MAX];
	size_t i;
	int rc;

	if ((rc = tl_rec_keys(t, p->graph, prefix, &ks)) != 0)
		goto out;
	for (i = 0; i < ks.n && rc == 0; i++) {
		struct tl_rec r;
		uint64_t na;

		if ((rc = tl_key(k, "%s%s", prefix, ks.v[i])) != 0 ||
		    tl_rec_get(t, p->graph, k, &r) != 0)
			continue;
		na = tl_bn_getu64(r.m, "not_after", 0);
		tl_rec_close(&r);
		if (na < ev->ts / 1000000000u)
			rc = del(t, p->graph, k);
	}
out:
	tl_rec_keys_free(&ks);
	return rc;
}

/* A grant revoked or purged: its certificates go on its CA's list. */
static int
crl_revoked(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	char grant[TL_GRANT_ID_MAX + 1], prefix[TL_KEY_MAX], k[TL_KEY_MAX];
	char ca[130], rk[TL_KEY_MAX];
	struct tl_rec_keys ks = { NULL, 0, 0 };
	struct tl_grant g;
	size_t i;
	int rc;

	if (tl_bn_getstr(body, "grant", grant, sizeof(grant)) != 0)
		return TL_EMALFORMED;
	if ((rc = tl_key(prefix, "cs/%s/", grant)) != 0)
		return rc;
	if ((rc = tl_rec_keys(t, p->graph, prefix, &ks)) != 0 || ks.n == 0)
		goto out;	/* no certificate: not a CA's grant */
	if ((rc = tl_grant_get(t, p, grant, &g, NULL)) != 0) {
		rc = rc == TL_ENOTFOUND ? 0 : rc;
		goto out;
	}
	for (i = 0; i < ks.n; i++) {
		struct tl_rec r;
		struct tl_body b;
		const void *enc;
		size_t len;

		if ((rc = tl_key(rk, "%s%s", prefix, ks.v[i])) != 0)
			goto out;
		if (tl_rec_get(t, p->graph, rk, &r) != 0)
			continue;
		/* Expired already: no verifier accepts it anyway. */
		if (tl_bn_getu64(r.m, "not_after", 0) <= ev->ts / 1000000000u) {
			tl_rec_close(&r);
			continue;
		}
		ca[0] = '\0';
		if (tl_bn_getstr(r.m, "ca", ca, sizeof(ca)) != 0 ||
		    ca[0] == '\0')
			snprintf(ca, sizeof(ca), "%s", g.provider);
		if ((rc = tl_key(k, "crlr/%s/%s", ca, ks.v[i])) == 0 &&
		    !tl_rec_exists(t, p->graph, k)) {
			tl_body_init(&b);
			tl_body_str(&b, TL_F_GRANT, grant);
			tl_body_u64(&b, TL_F_NOT_AFTER, tl_bn_getu64(r.m,
			    "not_after", 0));
			if ((rc = tl_body_finish(&b, &enc, &len)) == 0)
				rc = tl_rec_put(t, p->graph, k, ev->seq, enc,
				    len);
			tl_body_free(&b);
			if (rc == 0)
				rc = crl_want(t, p, ca);
		}
		tl_rec_close(&r);
		if (rc != 0)
			goto out;
	}
out:
	tl_rec_keys_free(&ks);
	return rc;
}

/* A list published: the latest kept, what expired before it dropped. */
static int
crl_published(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	char provider[130], prefix[TL_KEY_MAX], k[TL_KEY_MAX];
	int rc;

	if (tl_bn_getstr(body, "provider", provider, sizeof(provider)) != 0)
		return TL_EMALFORMED;
	if ((rc = tl_key(k, "crl/%s", provider)) != 0 ||
	    (rc = put_body(t, p->graph, k, ev)) != 0 ||
	    (rc = tl_key(k, "crlq/%s", provider)) != 0 ||
	    (rc = del(t, p->graph, k)) != 0 ||
	    (rc = tl_key(prefix, "crlr/%s/", provider)) != 0)
		return rc;
	return drop_expired(t, p, prefix, ev);
}

/*
 * cs/GRANT/SERIAL: every certificate issued for GRANT while it may be
 * valid ({holder version not_after ca}, for what a revocation leaves
 * valid: tally status).  Those whose not_after has passed by the
 * event's time go at the grant's next issue, so the index keeps about
 * two per holder (the current one and the one it renewed).
 */
static int
cert_index(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body, const char *grant,
    const char *holder)
{
	char k[TL_KEY_MAX], prefix[TL_KEY_MAX], serial[65], ca[130];
	struct tl_grant g;
	struct tl_body b;
	const void *enc;
	size_t len;
	int rc;

	if (tl_bn_getstr(body, "serial", serial, sizeof(serial)) != 0)
		return TL_EMALFORMED;
	if ((rc = tl_key(prefix, "cs/%s/", grant)) != 0 ||
	    (rc = drop_expired(t, p, prefix, ev)) != 0 ||
	    (rc = tl_key(k, "cs/%s/%s", grant, serial)) != 0)
		return rc;
	/* The CA that signed it: the grant's provider unless said. */
	if (tl_bn_getstr(body, "ca", ca, sizeof(ca)) != 0 || ca[0] == '\0') {
		ca[0] = '\0';
		if (tl_grant_get(t, p, grant, &g, NULL) == 0)
			snprintf(ca, sizeof(ca), "%s", g.provider);
	}
	tl_body_init(&b);
	tl_body_str(&b, TL_F_HOLDER, holder);
	tl_body_u64(&b, TL_F_VERSION, tl_bn_getu64(body, "version", 0));
	tl_body_u64(&b, TL_F_NOT_AFTER, tl_bn_getu64(body, "not_after", 0));
	tl_body_str(&b, TL_F_CA, ca);
	if ((rc = tl_body_finish(&b, &enc, &len)) == 0)
		rc = tl_rec_put(t, p->graph, k, ev->seq, enc, len);
	tl_body_free(&b);
	/* A CA's first certificate: verifiers may want its list now. */
	if (rc == 0 && ca[0] != '\0' && tl_key(k, "crl/%s", ca) == 0 &&
	    !tl_rec_exists(t, p->graph, k))
		rc = crl_want(t, p, ca);
	return rc;
}

int
tl_fold_certs(struct tl_txn *t, const struct tl_proj *p,
    const struct tl_event *ev, struct tl_bnode body)
{
	char grant[TL_GRANT_ID_MAX + 1], holder[140];

	if (strcmp(ev->type, TL_EV_REVOCATION_REQUESTED) == 0 ||
	    strcmp(ev->type, TL_EV_GRANT_REVOKED) == 0 ||
	    strcmp(ev->type, TL_EV_GRANT_PURGED) == 0)
		return crl_revoked(t, p, ev, body);
	if (strcmp(ev->type, TL_EV_CERT_CRL) == 0)
		return crl_published(t, p, ev, body);
	if (strcmp(ev->type, TL_EV_CERT_ISSUED) != 0)
		return 0;
	if (tl_bn_getstr(body, "grant", grant, sizeof(grant)) != 0 ||
	    tl_bn_getstr(body, "holder", holder, sizeof(holder)) != 0)
		return TL_EMALFORMED;
	return cert_index(t, p, ev, body, grant, holder);
}
