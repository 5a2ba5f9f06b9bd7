/*
 * epoch.c - the fences: tallyd arms each provider session with its
 * epoch and stops when a provider or the stream says it was deposed
 * (epoch.h).  What the log says of leadership is standing.c's.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/body.h"
#include "core/error.h"
#include "core/secret.h"
#include "core/vec.h"
#include "core/kv.h"
#include "drivers/driver.h"
#include "projections/proj.h"
#include "backoff.h"
#include "epoch.h"
#include "rx-internal.h"
#include "session.h"

#define DEPOSED_TABLE	"control-plane"
#define DEPOSED_KEY	"deposed"

struct ids {
	char	(*id)[130];
	size_t	 n, cap;
};

static int
collect(const char *rest, const void *val, size_t vlen, void *arg)
{
	struct ids *ids = arg;

	(void)val;
	(void)vlen;
	/* Provider ids are NODE/MODULE: every key under "p/" is one. */
	if (tl_vec_grow(&ids->id, &ids->cap, ids->n + 1, sizeof(*ids->id)) != 0)
		return ENOMEM;
	snprintf(ids->id[ids->n++], sizeof(ids->id[0]), "%s", rest);
	return 0;
}

/* Any type provider id grants: tl_rx_load_provider wants one. */
static int
some_type(struct tl_txn *t, const struct tl_proj *p, const char *id,
    char *type, size_t cap)
{
	struct tl_rec r;
	struct tl_bnode types;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "p/%s", id)) != 0 ||
	    (rc = tl_rec_get(t, p->graph, k, &r)) != 0)
		return rc;
	rc = TL_ENOTFOUND;
	if (tl_bn_get(r.m, "types", &types) == 0 && tl_bn_len(types) > 0)
		rc = tl_bn_getstr(tl_bn_at(types, 0), "type", type, cap);
	tl_rec_close(&r);
	return rc;
}

struct dep_arg {
	const char	*msg;
};

static int
deposed_cb(struct tl_txn *t, void *arg)
{
	struct dep_arg *da = arg;
	tl_kv kv;
	int rc;

	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0)
		return rc;
	return tl_kv_put(t, kv, DEPOSED_KEY, strlen(DEPOSED_KEY), da->msg,
	    strlen(da->msg));
}

/* The first to find us deposed says why (rx->deposed_msg). */
static void
mark(struct tl_rx *rx, const char *id, const struct tl_drv_fence_held *held,
    uint64_t epoch)
{
	int zero = 0;

	if (!atomic_compare_exchange_strong(&rx->deposed, &zero, 1))
		return;
	snprintf(rx->deposed_msg, sizeof(rx->deposed_msg), "deposed: "
	    "provider %s is fenced at epoch %llu by leader %.12s and this "
	    "control plane is at epoch %llu as leader %.12s (%s)", id,
	    (unsigned long long)held->epoch, held->leader,
	    (unsigned long long)epoch, rx->leader, held->epoch > epoch ?
	    "another one was promoted" : "another candidate won this epoch");
}

void
tl_ep_stop(struct tl_rx *rx)
{
	struct dep_arg da = { rx->deposed_msg };
	int rc;

	if (rx->deposed_msg[0] == '\0')
		snprintf(rx->deposed_msg, sizeof(rx->deposed_msg), "deposed");
	tl_rx_log(rx, TL_RX_ERR, "%s: refusing to act on it or on any "
	    "provider; stopping", rx->deposed_msg);
	if ((rc = tl_log_write(rx->log, deposed_cb, &da)) != 0)
		tl_rx_log(rx, TL_RX_WARN, "cannot record that it is deposed: "
		    "%s", tl_strerror(rc));
}

#define WON_KEY		"won"

struct won_arg {
	uint64_t	 at;
};

static int
won_cb(struct tl_txn *t, void *arg)
{
	struct won_arg *wa = arg;
	char buf[32];
	tl_kv kv;
	int rc, n;

	n = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)wa->at);
	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0)
		return rc;
	return tl_kv_put(t, kv, WON_KEY, strlen(WON_KEY), buf, (size_t)n);
}

/* The promotion already confirmed as the first (0: none). */
static uint64_t
won_get(struct tl_txn *t)
{
	char buf[32];
	const void *v;
	size_t len;
	tl_kv kv;

	if (tl_kv_open_scratch(t, DEPOSED_TABLE, &kv) != 0 ||
	    tl_kv_get(t, kv, WON_KEY, strlen(WON_KEY), &v, &len) != 0 ||
	    len >= sizeof(buf))
		return 0;
	memcpy(buf, v, len);
	buf[len] = '\0';
	return strtoull(buf, NULL, 10);
}

static void
hex16(const uint8_t *h, char out[33])
{
	static const char hx[] = "0123456789abcdef";
	int i;

	for (i = 0; i < 16; i++) {
		out[2 * i] = hx[h[i] >> 4];
		out[2 * i + 1] = hx[h[i] & 15];
	}
	out[32] = '\0';
}

int
tl_ep_arbitrate(struct tl_rx *rx, int *deposed)
{
	struct tl_txn *t;
	struct tl_event ev;
	struct won_arg wa;
	uint8_t ours[TL_HASH_LEN], first[TL_HASH_LEN];
	char where[600] = "", mine[33], theirs[33];
	uint64_t epoch = 1, at = 0, won;
	int rc, found = 0, zero = 0;

	*deposed = 0;
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if ((rc = tl_ep_current(t, &epoch, &at)) == 0 && at != 0 &&
	    (rc = tl_log_get(t, at, &ev)) == 0)
		memcpy(ours, ev.hash, TL_HASH_LEN);
	won = at != 0 && rc == 0 ? won_get(t) : 0;
	tl_log_abort(t);
	if (rc != 0 || at == 0 || won == at)
		return rc;
	rc = tl_rx_publish_arbiter(rx, at, epoch, &found, first, where,
	    sizeof(where));
	if (rc == TL_ENOTFOUND)
		return 0;	/* no stream: the fences alone */
	hex16(ours, mine);
	if (rc != 0 || !found) {
		tl_rx_log(rx, TL_RX_ERR, "epoch %llu: this promotion (event "
		    "%llu, leader %.12s) cannot be confirmed as the first in "
		    "the %s (%s): refusing to act until it can (start tallyd "
		    "again once the broker is back)", (unsigned long long)epoch,
		    (unsigned long long)at, mine, where[0] ? where :
		    "replication stream", rc != 0 ? tl_strerror(rc) :
		    "no promotion to this epoch read back");
		return TL_EUNREACH;
	}
	if (memcmp(first, ours, TL_HASH_LEN) == 0) {
		wa.at = at;
		if ((rc = tl_log_write(rx->log, won_cb, &wa)) != 0)
			return rc;
		tl_rx_log(rx, TL_RX_INFO, "epoch %llu: this promotion (event "
		    "%llu, leader %.12s) is the first to epoch %llu in the "
		    "%s: leading", (unsigned long long)epoch,
		    (unsigned long long)at, mine, (unsigned long long)epoch,
		    where);
		return 0;
	}
	hex16(first, theirs);
	if (atomic_compare_exchange_strong(&rx->deposed, &zero, 1))
		snprintf(rx->deposed_msg, sizeof(rx->deposed_msg), "deposed: "
		    "another promotion to epoch %llu (leader %.12s) came first "
		    "in the replication %s; this control plane (leader %.12s, "
		    "event %llu) lost it and stands down before any provider "
		    "call", (unsigned long long)epoch, theirs, where, mine,
		    (unsigned long long)at);
	*deposed = 1;
	tl_ep_stop(rx);
	return 0;
}

int
tl_ep_stream_check(struct tl_rx *rx, int *deposed)
{
	struct tl_txn *t;
	char where[600] = "";
	uint64_t epoch = 1, seen = 0;
	int rc, zero = 0;

	*deposed = 0;
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	rc = tl_ep_current(t, &epoch, NULL);
	tl_log_abort(t);
	if (rc != 0)
		return rc;
	rx->epoch = epoch;
	/* Not configured, or the broker away: the fences decide alone. */
	if (tl_rx_publish_epoch_seen(rx, &seen, where, sizeof(where)) != 0 ||
	    seen <= epoch) {
		if (seen > 0 || where[0])
			tl_rx_log(rx, TL_RX_DEBUG, "epoch %llu: the %s holds no "
			    "later promotion", (unsigned long long)epoch, where);
		return 0;
	}
	if (atomic_compare_exchange_strong(&rx->deposed, &zero, 1))
		snprintf(rx->deposed_msg, sizeof(rx->deposed_msg), "deposed: "
		    "the replication %s holds control-plane.promoted at epoch "
		    "%llu and this control plane is at epoch %llu (another one "
		    "was promoted)", where, (unsigned long long)seen,
		    (unsigned long long)epoch);
	*deposed = 1;
	tl_ep_stop(rx);
	return 0;
}

/*
 * A cluster's leader past its lease's margin: it may no longer hold the
 * leadership by the time a call lands, so none is made (0 then, why
 * said).  1 outside a cluster.
 */
static int
lease_holds(const struct tl_rx *rx, const char *prov, char *why)
{
	struct timespec ts;
	uint64_t now;

	if (rx == NULL || rx->act_until == NULL)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	if (now < atomic_load(rx->act_until))
		return 1;
	snprintf(why, TL_WHY_MAX, "the leadership's lease was not renewed in "
	    "time: no call made on provider %.80s (the lease may lapse before "
	    "it lands; the next pass tries again)", prov);
	return 0;
}

void
tl_ep_arm(struct tl_rx *rx, struct tl_rx_prov *pv)
{
	pv->epoch = rx->epoch;
	snprintf(pv->leader, sizeof(pv->leader), "%s", rx->leader);
	if (rx->mesh[0] != '\0')
		snprintf(pv->mesh, sizeof(pv->mesh), "%s", rx->mesh);
	pv->fence_rx = rx;
}

int
tl_ep_session(const struct tl_rx_prov *pv, void *h, char *why)
{
	struct tl_rx *rx = pv->fence_rx;
	struct tl_drv_fence want;
	struct tl_drv_fence_held held = { 0, "" };
	int rc;

	if (!lease_holds(rx, pv->id, why))
		return TL_EUNREACH;
	if (rx == NULL || pv->epoch == 0 || pv->ops == NULL ||
	    pv->ops->fence == NULL)
		return 0;
	/*
	 * A cluster's new leader learns its leader's name from its first
	 * fence check; a fence raised before, without it, would depose the
	 * leader that raises the next.
	 */
	if (rx->act_until != NULL && pv->leader[0] == '\0') {
		snprintf(why, TL_WHY_MAX, "the leader of epoch %llu is not "
		    "known yet: no call made on provider %.80s",
		    (unsigned long long)pv->epoch, pv->id);
		return TL_EUNREACH;
	}
	if (atomic_load(&rx->deposed)) {
		snprintf(why, TL_WHY_MAX, "this control plane is deposed");
		return TL_EREFUSED;
	}
	want.mesh = pv->mesh;
	want.epoch = pv->epoch;
	want.leader = pv->leader;
	if ((rc = pv->ops->fence(h, &want, &held, why)) != 0)
		return rc;
	if (tl_drv_fence_ours(&want, &held))
		return 0;
	mark(rx, pv->id, &held, pv->epoch);
	snprintf(why, TL_WHY_MAX, "deposed: provider %s is fenced at epoch "
	    "%llu by leader %.12s, this control plane is leader %.12s at epoch "
	    "%llu", pv->id, (unsigned long long)held.epoch, held.leader,
	    pv->leader, (unsigned long long)pv->epoch);
	return TL_EREFUSED;
}

/* --- the epoch, checked before calls ------------------------------ */

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
epoch_checked(const struct tl_rx_prov *pv)
{
	return pv->fence_rx != NULL && pv->epoch != 0 && pv->ops != NULL &&
	    pv->ops->decl->fencing != NULL &&
	    pv->ops->decl->fencing->kind == TL_DRV_FENCE_EPOCH_CHECK;
}

#define EPOCH_CHECK_NS	((uint64_t)TL_DRV_EPOCH_CHECK_S * 1000000000u)

int
tl_ep_check_epoch(struct tl_rx *rx, const struct tl_rx_prov *pv, char *why)
{
	char where[600] = "";
	uint64_t now = mono_ns(), last, seen = 0;
	int rc, zero = 0;

	if (!epoch_checked(pv))
		return 0;
	if (atomic_load(&rx->deposed)) {
		snprintf(why, TL_WHY_MAX, "this control plane is deposed");
		return TL_EREFUSED;
	}
	if (rx->act_until != NULL)
		return lease_holds(rx, pv->id, why) ? 0 : TL_EUNREACH;
	last = atomic_load(&rx->epoch_read_ns);
	if (last != 0 && now - last < EPOCH_CHECK_NS)
		return 0;
	rc = tl_rx_publish_epoch_seen(rx, &seen, where, sizeof(where));
	if (rc == TL_ENOTFOUND) {
		/* No stream: no standby follows, none can be promoted. */
		atomic_store(&rx->epoch_read_ns, now);
		return 0;
	}
	if (rc != 0) {
		snprintf(why, TL_WHY_MAX, "epoch %llu not confirmed: the "
		    "replication %.200s cannot be read (%.40s), and provider "
		    "%.80s is fenced only by that check: no call made",
		    (unsigned long long)rx->epoch, where, tl_strerror(rc),
		    pv->id);
		return TL_EUNREACH;
	}
	if (seen > rx->epoch) {
		if (atomic_compare_exchange_strong(&rx->deposed, &zero, 1))
			snprintf(rx->deposed_msg, sizeof(rx->deposed_msg),
			    "deposed: the replication %s holds "
			    "control-plane.promoted at epoch %llu and this "
			    "control plane is at epoch %llu (another one was "
			    "promoted)", where, (unsigned long long)seen,
			    (unsigned long long)rx->epoch);
		snprintf(why, TL_WHY_MAX, "%.500s", rx->deposed_msg);
		return TL_EREFUSED;
	}
	/* From before the reading began: the window never grows. */
	atomic_store(&rx->epoch_read_ns, now);
	return 0;
}

int
tl_ep_epoch_fresh(const struct tl_rx_prov *pv, char *why)
{
	struct tl_rx *rx = pv->fence_rx;
	uint64_t last, now;

	if (!lease_holds(rx, pv->id, why))
		return TL_EUNREACH;
	if (!epoch_checked(pv))
		return 0;
	if (atomic_load(&rx->deposed)) {
		snprintf(why, TL_WHY_MAX, "this control plane is deposed");
		return TL_EREFUSED;
	}
	/* A cluster's lease, held (above), confirms the epoch. */
	if (rx->act_until != NULL)
		return 0;
	last = atomic_load(&rx->epoch_read_ns);
	now = mono_ns();
	if (last != 0 && now - last < EPOCH_CHECK_NS)
		return 0;
	snprintf(why, TL_WHY_MAX, "epoch %llu was last confirmed on the "
	    "replication stream more than %d s ago: no call made on provider "
	    "%s (the next pass reads it again)", (unsigned long long)pv->epoch,
	    TL_DRV_EPOCH_CHECK_S, pv->id);
	return TL_EUNREACH;
}

void
tl_ep_provider_deposed(const struct tl_rx_prov *pv, const char *why)
{
	struct tl_rx *rx = pv->fence_rx;
	int zero = 0;

	if (rx == NULL ||
	    !atomic_compare_exchange_strong(&rx->deposed, &zero, 1))
		return;
	snprintf(rx->deposed_msg, sizeof(rx->deposed_msg), "deposed: provider "
	    "%s refused a call itself (%s)", pv->id, why);
}

int
tl_ep_refused(const struct tl_rx_prov *pv, char *why)
{
	if (pv->fence_rx == NULL || !atomic_load(&pv->fence_rx->deposed))
		return 0;
	snprintf(why, TL_WHY_MAX, "this control plane is deposed");
	return 1;
}

static int
catchup_cb(struct tl_txn *t, void *arg)
{
	(void)arg;
	return tl_proj_catchup(t, 0);
}

int
tl_ep_fence(struct tl_rx *rx, uint64_t *epochp, int loud, int *deposed,
    unsigned *fenced, unsigned *unfenced)
{
	int lvl = loud ? TL_RX_WARN : TL_RX_DEBUG;

	struct tl_txn *t;
	struct tl_proj p;
	struct ids ids = { NULL, 0, 0 };
	uint64_t epoch = 1;
	size_t i;
	int rc;

	*deposed = 0;
	*fenced = *unfenced = 0;
	/*
	 * The providers as of the head: a promoted standby's projections
	 * have not folded what it copied yet.
	 */
	if ((rc = tl_log_write(rx->log, catchup_cb, NULL)) != 0)
		return rc;
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if ((rc = tl_ep_leader(t, &epoch, rx->leader)) == 0 &&
	    (rc = tl_mesh_get(t, rx->mesh)) == 0 &&
	    (rc = tl_proj_open(t, &p)) == 0)
		rc = tl_rec_scan(t, p.graph, "p/", collect, &ids);
	if (rc != 0)
		goto out;
	*epochp = epoch;
	rx->epoch = epoch;
	tl_rx_log(rx, TL_RX_DEBUG, "fence: %zu provider(s) at epoch %llu",
	    ids.n, (unsigned long long)epoch);
	for (i = 0; i < ids.n && !*deposed; i++) {
		struct tl_rx_prov pv;
		/* Zeroed: a driver reads every member (settings included). */
		struct tl_drv_admin a;
		const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
		const struct tl_drv_ops *ops;
		char type[64] = "", driver[64] = "", why[TL_WHY_MAX] = "";
		struct tl_drv_fence want;
		struct tl_drv_fence_held held = { 0, "" };
		void *h = NULL;
		int drop = 0, frc;

		struct tl_rx_backoff *bo;

		/*
		 * A provider the passes are backing off from is left for
		 * later (a connection attempt to a host that does not
		 * answer would hold the loop); at start every one is tried.
		 */
		if (!loud && (bo = tl_rx_backoff_find(rx, ids.id[i], 0)) !=
		    NULL && bo->next_ns > tl_rx_now()) {
			(*unfenced)++;
			continue;
		}
		if ((frc = some_type(t, &p, ids.id[i], type,
		    sizeof(type))) != 0 ||
		    (frc = tl_rx_load_provider(t, &p, rx, ids.id[i], type, &pv,
		    driver, &drop)) != 0 ||
		    (ops = tl_drv_find(driver)) == NULL) {
			tl_rx_log(rx, lvl, "fence: provider %s: cannot "
			    "load its admin side: %s", ids.id[i],
			    frc ? tl_strerror(frc) : "no driver");
			(*unfenced)++;
			continue;
		}
		if (ops->fence == NULL) {
			(*unfenced)++;
			tl_rx_prov_wipe(&pv);
			continue;
		}
		tl_rx_prov_admin(&pv, sv, &want, &a);
		/* pv is not armed: this pass raises the fence itself. */
		want.mesh = rx->mesh;
		want.epoch = epoch;
		want.leader = rx->leader;
		a.mesh = rx->mesh;
		a.fence = &want;
		frc = ops->open(&a, &h, why);
		tl_rx_prov_wipe(&pv);
		if (frc == 0)
			frc = ops->fence(h, &want, &held, why);
		if (h != NULL)
			ops->close(h);
		if (frc != 0) {
			tl_rx_log(rx, lvl, "fence: provider %s cannot be "
			    "fenced at epoch %llu now: %s (%s)", ids.id[i],
			    (unsigned long long)epoch, tl_strerror(frc), why);
			(*unfenced)++;
			continue;
		}
		if (!tl_drv_fence_ours(&want, &held)) {
			mark(rx, ids.id[i], &held, epoch);
			*deposed = 1;
			tl_log_abort(t);
			t = NULL;
			tl_ep_stop(rx);
			break;
		}
		(*fenced)++;
	}
out:
	if (t != NULL)
		tl_log_abort(t);
	free(ids.id);
	return rc;
}
