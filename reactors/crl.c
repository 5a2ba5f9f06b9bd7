/*
 * crl.c - the mesh CA's certificate revocation list, for verifiers that
 * want one (a database server's or a broker's CRL file).
 *
 * A revocation takes nothing back at the CA (a certificate is valid
 * until its not-after); the list says which certificates a verifier
 * should refuse before that.  The folds keep what it must say (graph,
 * projections/certs.c): crlr/PROVIDER/SERIAL for each certificate of a
 * grant revoked or purged on the CA, crlq/PROVIDER when a list is
 * wanted (a revocation, the CA's first certificate), crl/PROVIDER the
 * latest published.  A pass publishes a CA's list, signed by its
 * driver's crl operation in tallyd's own process, when one is wanted
 * (a list is current until its CA expires: nothing is due with time,
 * and an idle mesh appends nothing), and records it
 * (certificate.crl: its number, one more than the latest's, the
 * serials, the list in PEM) in the transaction that read what it says:
 * the number grows with every list, and a list never misses a
 * revocation folded before it.  `tally crl PROVIDER` writes it out.
 *
 * A CA that cannot sign now (its session does not open, the epoch
 * cannot be read) is tried again a few seconds later; nothing of it is
 * recorded.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"
#include "core/error.h"
#include "core/fields.h"
#include "drivers/driver.h"
#include "projections/ctx.h"
#include "projections/events.h"
#include "epoch.h"
#include "rx-internal.h"
#include "session.h"

#define PROV_MAX	130
#define RETRY_NS	(5ULL * 1000000000ULL)

/* The CAs whose list is wanted. */
struct due {
	struct tl_txn	*t;
	const struct tl_proj *p;
	char		(*id)[PROV_MAX];
	size_t		 n;
};

static int
due_add(struct due *d, const char *id)
{
	char (*nv)[PROV_MAX];
	size_t i;

	for (i = 0; i < d->n; i++)
		if (strcmp(d->id[i], id) == 0)
			return 0;
	if (strlen(id) >= PROV_MAX)
		return 0;
	if ((nv = realloc(d->id, (d->n + 1) * sizeof(*nv))) == NULL)
		return ENOMEM;
	d->id = nv;
	memcpy(d->id[d->n++], id, strlen(id) + 1);
	return 0;
}

static void list_type(struct tl_txn *, const struct tl_proj *, const char *,
    char[64]);

/* crlq/PROVIDER: wanted, while a CA is there to make it. */
static int
wanted_one(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct due *d = arg;
	char type[64];

	(void)val;
	(void)vlen;
	list_type(d->t, d->p, rest, type);
	return type[0] != '\0' ? due_add(d, rest) : 0;
}

/* What is due, read without a write transaction (most rounds: none). */
static int
due_read(struct tl_rx *rx, struct due *d)
{
	struct tl_txn *t;
	struct tl_proj p;
	int rc;

	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	d->t = t;
	d->p = &p;
	if ((rc = tl_proj_open(t, &p)) == 0)
		rc = tl_rec_scan(t, p.graph, "crlq/", wanted_one, d);
	d->t = NULL;
	d->p = NULL;
	tl_log_abort(t);
	return rc;
}

/* The serials on provider's list: its revoked grants' unexpired ones. */
struct serials {
	char		(*s)[65];
	const char	**v;
	size_t		 n;
	uint64_t	 now_s;
};

static int
serial_one(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct serials *sl = arg;
	struct tl_rec r;
	uint64_t na;
	char (*nv)[65];

	if (tl_rec_open(val, vlen, &r) != 0)
		return 0;
	na = tl_bn_getu64(r.m, "not_after", 0);
	tl_rec_close(&r);
	if (na <= sl->now_s || strlen(rest) >= 65)
		return 0;
	if ((nv = realloc(sl->s, (sl->n + 1) * sizeof(*nv))) == NULL)
		return ENOMEM;
	sl->s = nv;
	memcpy(sl->s[sl->n++], rest, strlen(rest) + 1);
	return 0;
}

/* The type of provider id whose driver makes lists; "" when none. */
static void
list_type(struct tl_txn *t, const struct tl_proj *p, const char *id,
    char type[64])
{
	struct tl_bnode types;
	struct tl_rec r;
	char k[TL_KEY_MAX];
	size_t i;

	type[0] = '\0';
	if (tl_key(k, "p/%s", id) != 0 || tl_rec_get(t, p->graph, k, &r) != 0)
		return;
	if (tl_bn_get(r.m, "types", &types) == 0)
		for (i = 0; i < tl_bn_len(types) && type[0] == '\0'; i++) {
			char ty[64] = "", drv[64] = "";
			const struct tl_drv_ops *o;

			tl_bn_getstr(tl_bn_at(types, i), "type", ty, sizeof(ty));
			tl_bn_getstr(tl_bn_at(types, i), "driver", drv,
			    sizeof(drv));
			if ((o = tl_drv_find(drv)) != NULL && o->crl != NULL)
				snprintf(type, 64, "%s", ty);
		}
	tl_rec_close(&r);
}

struct cpass {
	struct tl_rx	*rx;
	const char	*id;
	unsigned	 published;
	int		 waiting;	/* the CA cannot sign now */
};

/* One CA's list, made and recorded in the write transaction t. */
static int
publish_cb(struct tl_txn *t, void *arg)
{
	struct cpass *cp = arg;
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	struct serials sl = { NULL, NULL, 0, 0 };
	char k[TL_KEY_MAX], prefix[TL_KEY_MAX], stream[TL_KEY_MAX];
	char type[64], driver[64], why[TL_WHY_MAX] = "";
	struct tl_drv_fence fence;
	struct tl_drv_admin a;
	struct tl_drv_crl info;
	struct tl_rx_prov pv;
	struct tl_rec r;
	struct tl_body b;
	struct tl_ctx c;
	uint64_t number = 1;
	char *pem = NULL;
	void *h = NULL;
	size_t i;
	int rc, drop = 0;

	cp->waiting = 0;
	memset(&pv, 0, sizeof(pv));
	if ((rc = tl_ctx_begin(&c, t, cp->rx->actor)) != 0)
		return rc;
	sl.now_s = tl_rx_now() / 1000000000u;
	if (tl_key(k, "crl/%s", cp->id) == 0 &&
	    tl_rec_get(t, c.p.graph, k, &r) == 0) {
		number = tl_bn_getu64(r.m, "number", 0) + 1;
		tl_rec_close(&r);
	}
	list_type(t, &c.p, cp->id, type);
	if (type[0] == '\0') {
		/* No CA there any more (removed): nothing to publish. */
		rc = 0;
		goto out;
	}
	if ((rc = tl_key(prefix, "crlr/%s/", cp->id)) != 0 ||
	    (rc = tl_rec_scan(t, c.p.graph, prefix, serial_one, &sl)) != 0)
		goto out;
	if (sl.n > 0 && (sl.v = calloc(sl.n, sizeof(*sl.v))) == NULL) {
		rc = ENOMEM;
		goto out;
	}
	for (i = 0; i < sl.n; i++)
		sl.v[i] = sl.s[i];
	if ((rc = tl_rx_load_provider(t, &c.p, cp->rx, cp->id, type, &pv,
	    driver, &drop)) != 0 || pv.ops == NULL || pv.ops->crl == NULL) {
		snprintf(why, sizeof(why), "%s", rc ? tl_strerror(rc) :
		    "its driver makes no list");
		goto unable;
	}
	tl_ep_arm(cp->rx, &pv);
	if ((rc = tl_ep_check_epoch(cp->rx, &pv, why)) != 0)
		goto unable;
	tl_rx_prov_admin(&pv, sv, &fence, &a);
	if ((rc = pv.ops->open(&a, &h, why)) != 0)
		goto unable;
	rc = pv.ops->crl(h, sl.v, sl.n, number, &pem, &info, why);
	pv.ops->close(h);
	if (rc != 0)
		goto unable;
	if ((rc = tl_key(stream, "provider/%s", cp->id)) != 0)
		goto out;
	c.cause = 0;
	c.have_corr = 0;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_PROVIDER, cp->id);
	tl_body_u64(&b, TL_F_NUMBER, number);
	tl_body_u64(&b, TL_F_THIS_UPDATE, (uint64_t)info.this_update);
	tl_body_u64(&b, TL_F_NEXT_UPDATE, (uint64_t)info.next_update);
	tl_body_arr(&b, TL_F_SERIALS);
	for (i = 0; i < sl.n; i++)
		tl_body_str(&b, NULL, sl.s[i]);
	tl_body_end(&b);
	tl_body_str(&b, TL_F_CRL, pem);
	rc = tl_emit(&c, TL_EV_CERT_CRL, stream, &b, NULL);
	tl_body_free(&b);
	if (rc == 0 && (rc = tl_ctx_end(&c)) == 0) {
		cp->published++;
		tl_rx_log(cp->rx, TL_RX_INFO, "CRL %llu of %s: %zu "
		    "certificate(s) revoked", (unsigned long long)number,
		    cp->id, sl.n);
	}
	goto out;
unable:
	/* Not the record's fault: tried again in a few seconds. */
	tl_rx_log(cp->rx, TL_RX_WARN, "CRL of %s: the CA cannot sign now: %s",
	    cp->id, why[0] ? why : tl_strerror(rc));
	cp->waiting = 1;
	rc = 0;
out:
	tl_rx_prov_wipe(&pv);
	free(pem);
	free(sl.v);
	free(sl.s);
	return rc;
}

int
tl_rx_crl(struct tl_rx *rx, unsigned *published, uint64_t *wake_ns)
{
	struct due d;
	struct cpass cp;
	size_t i;
	int rc;

	*published = 0;
	*wake_ns = 0;
	memset(&d, 0, sizeof(d));
	if ((rc = due_read(rx, &d)) != 0)
		goto out;
	for (i = 0; i < d.n; i++) {
		memset(&cp, 0, sizeof(cp));
		cp.rx = rx;
		cp.id = d.id[i];
		if ((rc = tl_log_write(rx->log, publish_cb, &cp)) != 0)
			goto out;
		*published += cp.published;
		if (cp.waiting)
			*wake_ns = RETRY_NS;
	}
out:
	free(d.id);
	return rc;
}
