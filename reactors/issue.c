/*
 * issue.c - certificates for holders' requests (a grant whose driver's
 * credential is TL_DRV_CRED_CERTIFICATE: the mesh CA).
 *
 * A holder's node makes the key a delivery's 'k' item asks for and puts
 * a signing request for it in its report ("csrs": [{grant, holder,
 * version, csr}]), which its node's key signs; the ack pass (ack.c) or
 * the publisher records node.reported only once that signature holds.
 * This pass reads each node.reported after its checkpoint and, for each
 * request, records certificate.issued (serial, cn, not-after, the
 * request's digest, the certificate) or certificate.refused (why):
 *
 *   - the holder is MODULE@NODE of the node that signed the report, and
 *     holds the grant (a shared grant's holders: tl_rx_grant_holders);
 *   - the grant is provisioned, at exactly the version asked for (a
 *     request for an older version is a replay: refused);
 *   - its provider's driver issues certificates, and its sign operation
 *     finds the request's signature good and its subject exactly the
 *     grant's (CN the login, SANs the requirement's, nothing more);
 *   - one certificate per holder and version: the same request again
 *     (a report repeats its requests until the certificate arrives) is
 *     passed over, another request for a version already issued is
 *     refused (graph ci/GRANT/HOLDER keeps the latest issued).
 *
 * The checkpoint moves in the transaction that records the outcomes,
 * so a crash repeats a pass whole or not at all: no request is signed
 * twice on the record.  A CA that cannot sign now (its session does not
 * open, the epoch cannot be read) aborts the pass: nothing of it is
 * recorded, and the next pass reads it all again.  A request refused is
 * refused once (graph cr/GRANT/HOLDER), however many reports repeat it.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "core/body.h"
#include "core/error.h"
#include "core/fields.h"
#include "drivers/driver.h"
#include "drivers/util.h"
#include "projections/ctx.h"
#include "projections/events.h"
#include "projections/graph.h"
#include "deliver.h"
#include "epoch.h"
#include "mesh_ca.h"
#include "rx-internal.h"
#include "session.h"

#define CKPT		"issue"
#define PER_PASS	64

/*
 * The CA sessions of one tl_rx_issue, kept from request to request (a
 * session parses the CA's key once), closed at its end.
 */
#define SESSIONS	8
struct isession {
	struct tl_rx_prov *pv;
	void		*h;
};

struct ipass {
	struct tl_rx	*rx;
	unsigned	 issued, refused;
	int		 more;
	int		 stop;		/* the CA cannot sign now */
	struct isession	 s[SESSIONS];
	size_t		 ns;
	/*
	 * The mesh CA (provider id, type) for logins by certificate, found
	 * once per tl_rx_issue (a walk of the providers); mesh_ca_rc: 0
	 * found, TL_ENOTFOUND none, -1 not looked for yet.
	 */
	char		 mesh_ca[130], mesh_ca_type[64];
	int		 mesh_ca_rc;
};

static void
sessions_close(struct ipass *ps)
{
	size_t i;

	for (i = 0; i < ps->ns; i++) {
		ps->s[i].pv->ops->close(ps->s[i].h);
		tl_rx_prov_wipe(ps->s[i].pv);
		free(ps->s[i].pv);
	}
	ps->ns = 0;
}

/*
 * Records certificate.refused for one request (digest: its BLAKE2b-256,
 * hex; "" for one without a request): graph cr/GRANT/HOLDER keeps the
 * latest, so the same request in the reports that follow is refused
 * once (refused_before).
 */
static int
refuse(struct ipass *ps, struct tl_ctx *c, const char *grant,
    const char *holder, const char *node, uint64_t version,
    const char *digest, const char *why)
{
	char stream[TL_KEY_MAX];
	struct tl_body b;
	int rc;

	ps->refused++;
	tl_rx_log(ps->rx, TL_RX_WARN, "certificate for %s (%s v%llu) "
	    "refused: %s", holder, grant, (unsigned long long)version, why);
	/* A grant id that makes no stream is no grant's: logged only. */
	if (tl_key(stream, "grant/%s", grant) != 0)
		return 0;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, grant);
	tl_body_str(&b, TL_F_HOLDER, holder);
	tl_body_str(&b, TL_F_NODE, node);
	tl_body_u64(&b, TL_F_VERSION, version);
	tl_body_str(&b, TL_F_CSR_DIGEST, digest);
	tl_body_str(&b, TL_F_REASON, why);
	rc = tl_emit(c, TL_EV_CERT_REFUSED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

/* Is node one of g's holders' nodes, and module g's module? */
static int
holds(struct tl_ctx *c, const struct tl_grant *g, const char *module,
    const char *node)
{
	struct tl_nodelist nl;
	size_t i;
	int found = 0;

	if (strcmp(module, g->module) != 0 ||
	    tl_rx_grant_holders(c->t, &c->p, g, &nl) != 0)
		return 0;
	for (i = 0; i < nl.n && !found; i++)
		found = strcmp(nl.v[i], node) == 0;
	tl_nodelist_free(&nl);
	return found;
}

/* Was this very request (version, digest) the latest one refused? */
static int
refused_before(struct tl_ctx *c, const char *grant, const char *holder,
    uint64_t version, const char *digest)
{
	char k[TL_KEY_MAX], had[65] = "";
	struct tl_rec r;
	uint64_t v;

	if (tl_key(k, "cr/%s/%s", grant, holder) != 0 ||
	    tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return 0;
	v = tl_bn_getu64(r.m, "version", 0);
	tl_bn_getstr(r.m, "csr_digest", had, sizeof(had));
	tl_rec_close(&r);
	return v == version && strcmp(had, digest) == 0;
}

/* The latest certificate issued to holder of grant: its version, digest. */
static int
issued(struct tl_ctx *c, const char *grant, const char *holder,
    uint64_t *version, char digest[65], char serial[65])
{
	char k[TL_KEY_MAX];
	struct tl_rec r;

	*version = 0;
	if (tl_key(k, "ci/%s/%s", grant, holder) != 0 ||
	    tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return 0;
	*version = tl_bn_getu64(r.m, "version", 0);
	tl_bn_getstr(r.m, "csr_digest", digest, 65);
	tl_bn_getstr(r.m, "serial", serial, 65);
	tl_rec_close(&r);
	return 1;
}

/*
 * The session on the CA that signs g's certificates, opened once per
 * tl_rx_issue: g's provider, or for a login by certificate on another
 * provider (g->cert_login) the mesh CA.  0 with *sp; TL_EREFUSED (why)
 * when that driver issues no certificates or the mesh has no CA; any
 * other error: the CA cannot sign now.
 */
static int
session(struct ipass *ps, struct tl_ctx *c, const struct tl_grant *g,
    struct isession **sp, char *driver, char *why)
{
	const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
	struct tl_drv_fence fence;
	struct tl_drv_admin a;
	struct isession *is;
	struct tl_rx_prov *pv;
	char id[130], type[64];
	size_t i;
	int rc, drop = 0;

	snprintf(id, sizeof(id), "%s", g->provider);
	snprintf(type, sizeof(type), "%s", g->type);
	if (g->cert_login != 0) {
		if (ps->mesh_ca_rc < 0)
			ps->mesh_ca_rc = tl_rx_mesh_ca_provider(c->t, &c->p,
			    ps->mesh_ca, ps->mesh_ca_type);
		if ((rc = ps->mesh_ca_rc) != 0) {
			snprintf(why, TL_WHY_MAX, rc == TL_ENOTFOUND ?
			    "a login by certificate, and the mesh has no CA "
			    "(tally assign of a ca provider)" : "cannot find "
			    "the mesh CA: %s", tl_strerror(rc));
			return rc == TL_ENOTFOUND ? TL_EREFUSED : rc;
		}
		snprintf(id, sizeof(id), "%s", ps->mesh_ca);
		snprintf(type, sizeof(type), "%s", ps->mesh_ca_type);
	}
	for (i = 0; i < ps->ns; i++)
		if (strcmp(ps->s[i].pv->id, id) == 0) {
			*sp = &ps->s[i];
			snprintf(driver, 64, "%s", ps->s[i].pv->decl->name);
			return 0;
		}
	if ((pv = calloc(1, sizeof(*pv))) == NULL)
		return ENOMEM;
	if ((rc = tl_rx_load_provider(c->t, &c->p, ps->rx, id, type, pv,
	    driver, &drop)) != 0) {
		snprintf(why, TL_WHY_MAX, "provider %s: %s", id,
		    tl_strerror(rc));
		goto bad;
	}
	if (pv->ops == NULL || pv->ops->sign == NULL || pv->decl == NULL ||
	    pv->decl->credential.kind != TL_DRV_CRED_CERTIFICATE) {
		snprintf(why, TL_WHY_MAX, "the grant's provider issues no "
		    "certificates");
		rc = TL_EREFUSED;
		goto bad;
	}
	tl_ep_arm(ps->rx, pv);
	if ((rc = tl_ep_check_epoch(ps->rx, pv, why)) != 0)
		goto bad;
	tl_rx_prov_admin(pv, sv, &fence, &a);
	if (ps->ns == SESSIONS)
		sessions_close(ps);
	is = &ps->s[ps->ns];
	if ((rc = pv->ops->open(&a, &is->h, why)) != 0)
		goto bad;
	is->pv = pv;
	ps->ns++;
	*sp = is;
	return 0;
bad:
	tl_rx_prov_wipe(pv);
	free(pv);
	return rc;
}

/*
 * Signs csr on g's provider; 0 with *cert, TL_EREFUSED / TL_EINVAL with
 * why for the request, anything else: the CA cannot sign now.
 */
static int
sign(struct ipass *ps, struct tl_ctx *c, const struct tl_grant *g,
    const char *csr, char **cert, struct tl_drv_cert *ci, char *login,
    char ca[130], char *why)
{
	const char *pvv[TL_RX_PARAMS_SV];
	char res[64], own[64], driver[64], *params = NULL;
	struct tl_drv_grant dg;
	struct isession *is;
	int rc;

	if ((rc = session(ps, c, g, &is, driver, why)) != 0)
		return rc;
	if ((rc = tl_ep_epoch_fresh(is->pv, why)) != 0)
		return rc;
	if ((rc = tl_rx_grant_params(c->t, &c->p, g, driver, &params)) != 0) {
		snprintf(why, TL_WHY_MAX, "cannot read the requirement's "
		    "params: %s", tl_strerror(rc));
		return rc;
	}
	tl_rx_grant_names(ps->rx, g, g->version, res, own, login);
	if (g->user[0] != '\0')
		snprintf(login, 64, "%s", g->user);
	memset(&dg, 0, sizeof(dg));
	dg.resource = g->object[0] != '\0' ? g->object : res;
	dg.owner = own;
	dg.login = login;
	dg.grant = g->id;
	/* A login's certificate: its name alone, for a client. */
	dg.params = params != NULL && g->cert_login == 0 ?
	    tl_drv_params_unpack(params, pvv, TL_RX_PARAMS_SV) : NULL;
	rc = is->pv->ops->sign(is->h, &dg, csr, cert, ci, why);
	snprintf(ca, 130, "%s", is->pv->id);
	free(params);
	return rc;
}

static int
one_csr(struct ipass *ps, struct tl_ctx *c, const char *node, json_t *e)
{
	const char *grant = json_string_value(json_object_get(e, "grant"));
	const char *holder = json_string_value(json_object_get(e, "holder"));
	const char *csr = json_string_value(json_object_get(e, "csr"));
	json_t *vj = json_object_get(e, "version");
	uint64_t version = json_is_integer(vj) && json_integer_value(vj) > 0 ?
	    (uint64_t)json_integer_value(vj) : 0, had;
	char why[TL_WHY_MAX] = "", module[64], digest[65], had_digest[65];
	char serial[65] = "", stream[TL_KEY_MAX], login[64] = "", ca[130] = "";
	uint8_t d[32];
	struct tl_drv_cert ci;
	struct tl_grant g;
	struct tl_body b;
	const char *at;
	char *cert = NULL;
	int rc;

	if (grant == NULL || holder == NULL || csr == NULL || version == 0 ||
	    strlen(grant) > TL_GRANT_ID_MAX || strlen(holder) > 139)
		return refuse(ps, c, grant != NULL && strlen(grant) <=
		    TL_GRANT_ID_MAX ? grant : "?", holder != NULL &&
		    strlen(holder) <= 139 ? holder : "?", node, version, "",
		    "a request without grant, holder, version and csr");
	crypto_generichash(d, sizeof(d), (const uint8_t *)csr, strlen(csr),
	    NULL, 0);
	sodium_bin2hex(digest, sizeof(digest), d, sizeof(d));
	/* A report repeats its requests: one refused is refused once. */
	if (refused_before(c, grant, holder, version, digest))
		return 0;
	at = strchr(holder, '@');
	if (at == NULL || strcmp(at + 1, node) != 0 ||
	    (size_t)(at - holder) >= sizeof(module))
		return refuse(ps, c, grant, holder, node, version, digest,
		    "the holder is not on the node that signed the report");
	memcpy(module, holder, (size_t)(at - holder));
	module[at - holder] = '\0';
	/* No grant of that name: no stream of its is made for the words. */
	if ((rc = tl_grant_get(c->t, &c->p, grant, &g, NULL)) ==
	    TL_ENOTFOUND) {
		ps->refused++;
		tl_rx_log(ps->rx, TL_RX_WARN, "certificate for %s refused: no "
		    "grant %s", holder, grant);
		return 0;
	}
	if (rc != 0)
		return rc;
	if (strcmp(g.state, TL_GRANT_PROVISIONED) != 0) {
		snprintf(why, sizeof(why), "the grant is %s, not provisioned",
		    g.state);
		return refuse(ps, c, grant, holder, node, version, digest,
		    why);
	}
	if (version != g.version) {
		snprintf(why, sizeof(why), "a request for v%llu; the grant is "
		    "at v%llu (an old request, replayed?)",
		    (unsigned long long)version,
		    (unsigned long long)g.version);
		return refuse(ps, c, grant, holder, node, version, digest,
		    why);
	}
	if (!holds(c, &g, module, node))
		return refuse(ps, c, grant, holder, node, version, digest,
		    "not a holder of the grant");
	if (issued(c, grant, holder, &had, had_digest, serial) &&
	    had == version) {
		if (strcmp(had_digest, digest) == 0)
			return 0;	/* asked again until it arrives */
		snprintf(why, sizeof(why), "a second request for v%llu (serial "
		    "%s was issued for it)", (unsigned long long)version,
		    serial);
		return refuse(ps, c, grant, holder, node, version, digest,
		    why);
	}
	rc = sign(ps, c, &g, csr, &cert, &ci, login, ca, why);
	if (rc == TL_EREFUSED || rc == TL_EINVAL) {
		rc = refuse(ps, c, grant, holder, node, version, digest,
		    why);
		goto out;
	}
	if (rc != 0) {
		/* Not the request's fault: this report is read again. */
		tl_rx_log(ps->rx, TL_RX_WARN, "certificate for %s (%s): the "
		    "CA %s cannot sign now: %s", holder, grant, g.provider,
		    why[0] ? why : tl_strerror(rc));
		ps->stop = 1;
		rc = 0;
		goto out;
	}
	if ((rc = tl_key(stream, "grant/%s", grant)) != 0)
		goto out;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, grant);
	tl_body_str(&b, TL_F_HOLDER, holder);
	tl_body_str(&b, TL_F_NODE, node);
	tl_body_u64(&b, TL_F_VERSION, version);
	tl_body_str(&b, TL_F_SERIAL, ci.serial);
	tl_body_str(&b, TL_F_CN, login);
	tl_body_i64(&b, TL_F_NOT_AFTER, ci.not_after);
	tl_body_u64(&b, TL_F_RENEW_AT, ci.renew_at > 0 ? (uint64_t)ci.renew_at :
	    0);
	tl_body_str(&b, TL_F_CSR_DIGEST, digest);
	tl_body_str(&b, TL_F_CERT, cert);
	tl_body_str(&b, TL_F_CA, ca);
	rc = tl_emit(c, TL_EV_CERT_ISSUED, stream, &b, NULL);
	tl_body_free(&b);
	if (rc == 0) {
		ps->issued++;
		tl_rx_log(ps->rx, TL_RX_INFO, "certificate serial %s issued to "
		    "%s for %s v%llu", ci.serial, holder, grant,
		    (unsigned long long)version);
	}
out:
	free(cert);
	return rc;
}

/* One node.reported: each of its requests, in one context. */
static int
one_report(struct ipass *ps, struct tl_txn *t, uint64_t seq)
{
	struct tl_event ev;
	struct tl_bview v;
	struct tl_bnode n;
	struct tl_ctx c;
	json_t *doc = NULL, *csrs, *e;
	char node[64] = "";
	const char *rp;
	size_t rl, i;
	int rc;

	if ((rc = tl_log_get(t, seq, &ev)) != 0 ||
	    (rc = tl_bview_open(&v, ev.body, ev.body_len)) != 0)
		return rc;
	tl_bn_getstr(v.root, "node", node, sizeof(node));
	if (tl_bn_get(v.root, "report", &n) == 0 && tl_bn_str(n, &rp,
	    &rl) == 0)
		doc = json_loadb(rp, rl, 0, NULL);
	tl_bview_close(&v);
	if (doc == NULL || !json_is_array(csrs = json_object_get(doc,
	    "csrs")) || json_array_size(csrs) == 0) {
		json_decref(doc);
		return 0;
	}
	if ((rc = tl_ctx_begin(&c, t, ps->rx->actor)) != 0) {
		json_decref(doc);
		return rc;
	}
	c.cause = seq;
	json_array_foreach(csrs, i, e) {
		if (!json_is_object(e))
			continue;
		if ((rc = one_csr(ps, &c, node, e)) != 0 || ps->stop)
			break;
	}
	json_decref(doc);
	if (rc == 0)
		rc = tl_ctx_end(&c);
	return rc;
}

static int
pass_cb(struct tl_txn *t, void *arg)
{
	struct ipass *ps = arg;
	struct tl_filter f = { 0 };
	struct tl_iter *it;
	struct tl_event ev;
	uint64_t ck = 0, head = 0, seqs[PER_PASS];
	size_t n = 0, i;
	int rc;

	ps->more = ps->stop = 0;
	if ((rc = tl_proj_catchup(t, 0)) != 0)
		return rc;
	if ((rc = tl_ckpt_get(t, CKPT, &ck)) != 0 && rc != TL_ENOTFOUND)
		return rc;
	tl_log_last(t, &head, NULL);
	if (ck >= head)
		return 0;
	f.from = ck + 1;
	f.type = TL_EV_NODE_REPORTED;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc;
	while (n < PER_PASS && (rc = tl_iter_next(it, &ev)) == 0)
		seqs[n++] = ev.seq;
	tl_iter_close(it);
	if (rc != 0 && rc != TL_EEOF)
		return rc;
	if (n == PER_PASS) {
		ps->more = 1;
		head = seqs[n - 1];
	}
	for (i = 0; i < n; i++) {
		if ((rc = one_report(ps, t, seqs[i])) != 0)
			return rc;
		/*
		 * The CA cannot sign now: nothing of this pass is kept (the
		 * transaction is aborted), and the next reads it again.
		 */
		if (ps->stop)
			return TL_EUNREACH;
	}
	return tl_ckpt_set(t, CKPT, head);
}

int
tl_rx_issue(struct tl_rx *rx, unsigned *issued_n, unsigned *refused_n,
    int *waiting)
{
	struct ipass ps;
	int rc, due;

	*issued_n = *refused_n = 0;
	*waiting = 0;
	/* A read first: most rounds have no report to look at. */
	if ((rc = tl_rx_due_since(rx, CKPT, TL_EV_NODE_REPORTED, &due)) !=
	    0 || !due)
		return rc;
	memset(&ps, 0, sizeof(ps));
	ps.rx = rx;
	ps.mesh_ca_rc = -1;
	do {
		if ((rc = tl_log_write(rx->log, pass_cb, &ps)) != 0) {
			sessions_close(&ps);
			*waiting = ps.stop;
			return ps.stop ? 0 : rc;
		}
		*issued_n += ps.issued;
		*refused_n += ps.refused;
		ps.issued = ps.refused = 0;
	} while (ps.more);
	sessions_close(&ps);
	*waiting = ps.stop;
	return 0;
}
