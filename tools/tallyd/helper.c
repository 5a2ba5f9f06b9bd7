/*
 * helper.c - tallyd's one-shot helper modes (helper.h).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "drivers/driver.h"
#include "projections/grant.h"
#include "projections/proj.h"
#include "reactors/epoch.h"
#include "reactors/rx.h"
#include "tools/exit.h"
#include "helper.h"

static void
finding(void *arg, const struct tl_rx_finding *f)
{
	json_t *o;

	(void)arg;
	/* Healthy; or unchecked, which the provider's outage line says. */
	if (f->drift[0] == '\0' || strcmp(f->drift, "unchecked") == 0)
		return;
	o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:b}", "grant", f->grant,
	    "provider", f->provider != NULL ? f->provider : "", "drift",
	    f->drift, "reason", f->reason, "action", f->action, "repaired",
	    f->repaired);
	if (o == NULL)
		return;
	json_dumpf(o, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(o);
}

int
tl_tallyd_check(struct tl_rx *rx, const char *grant, const char *provider)
{
	struct tl_rx_verify_opts o;
	unsigned checked = 0, bad = 0;
	uint64_t next;
	int rc;

	memset(&o, 0, sizeof(o));
	o.grant = grant;
	o.provider = provider;
	o.force = 1;
	o.login_all = 1;	/* the operator's check logs in */
	o.interval_ns = 30000000000u;
	o.report = finding;
	if ((rc = tl_rx_verify(rx, &o, &checked, &bad, &next)) != 0) {
		fprintf(stderr, "tallyd: check: %s\n", tl_strerror(rc));
		return TL_EXIT_FAIL;
	}
	printf("{\"checked\":%u,\"unhealthy\":%u}\n", checked, bad);
	return fflush(stdout) == 0 ? TL_EXIT_OK : TL_EXIT_FAIL;
}

struct loss_arg {
	struct tl_rx		*rx;
	struct tl_txn		*t;
	const struct tl_proj	*p;
};

static int
loss_one(const struct tl_grant *g, void *arg)
{
	struct loss_arg *la = arg;
	char what[TL_WHY_MAX] = "";
	int loses = 0, drop = 0, rc;
	json_t *o;

	rc = tl_rx_loss(la->rx, la->t, la->p, g, 0, &loses, &drop, what);
	if (rc == TL_ENOTFOUND)
		return 0;	/* the driver cannot tell */
	o = rc == 0 ? json_pack("{s:s,s:b,s:b,s:s}", "grant", g->id, "loses",
	    loses, "drop", drop, "what", what) : json_pack("{s:s,s:s}",
	    "grant", g->id, "error", what[0] ? what : tl_strerror(rc));
	if (o != NULL) {
		json_dumpf(o, stdout, JSON_COMPACT);
		putchar('\n');
		json_decref(o);
	}
	return 0;
}

int
tl_tallyd_loss(struct tl_rx *rx, const char *module)
{
	struct loss_arg la = { rx, NULL, NULL };
	struct tl_proj p;
	char why[TL_WHY_MAX] = "";
	uint64_t bad = 0;
	int rc;

	/* The names it asks about are this mesh's (scheme 4). */
	if ((rc = tl_mesh_load(rx->log, rx->mesh)) != 0 ||
	    (rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &la.t)) != 0) {
		fprintf(stderr, "tallyd: loss: %s\n", tl_strerror(rc));
		return TL_EXIT_FAIL;
	}
	if ((rc = tl_log_check(la.t, NULL, &bad, why)) != 0) {
		fprintf(stderr, "tallyd: the log (%s/data.mdb) does not verify "
		    "at event %llu (%s): refusing to act on it; see tally "
		    "verify\n", tl_log_dir(rx->log), (unsigned long long)bad,
		    why[0] ? why : tl_strerror(rc));
		tl_log_abort(la.t);
		return rc == TL_ECORRUPT || rc == TL_EMALFORMED ?
		    TL_EXIT_CORRUPT : TL_EXIT_FAIL;
	}
	if ((rc = tl_proj_open(la.t, &p)) == 0) {
		la.p = &p;
		rc = tl_grant_each_of_module(la.t, &p, module, loss_one, &la);
	}
	tl_log_abort(la.t);
	if (rc != 0 && rc != TL_ENOTFOUND) {
		fprintf(stderr, "tallyd: loss: %s\n", tl_strerror(rc));
		return TL_EXIT_FAIL;
	}
	return fflush(stdout) == 0 ? TL_EXIT_OK : TL_EXIT_FAIL;
}

struct find_arg {
	struct tl_rx		*rx;
	struct tl_txn		*t;
	const struct tl_proj	*p;
	const char		*mesh;
	int			 all;	/* grants of drivers that can only */
};

static void
find_line(json_t *o)
{
	if (o == NULL)
		return;
	json_dumpf(o, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(o);
}

static int
find_one(const struct tl_grant *g, void *arg)
{
	struct find_arg *fa = arg;
	const struct tl_drv_decl *dd = tl_drv_decl_for_type(g->type);
	struct tl_drv_names n;
	char what[TL_WHY_MAX] = "";
	int rc;

	if (fa->all && (dd == NULL || TL_GRANT_IS_EMBEDDED(g) ||
	    strchr(g->id, '~') != NULL ||
	    !tl_drv_can(dd, TL_DRV_CAP_FIND_MARKED, NULL)))
		return 0;
	rc = tl_rx_find_marked(fa->rx, fa->t, fa->p, g, fa->mesh, &n, what);
	if (rc == 0)
		find_line(json_pack("{s:s,s:s,s:s,s:s,s:s}", "grant", g->id,
		    "resource", n.resource, "owner", n.owner, "login", n.login,
		    "what", what));
	else
		find_line(json_pack("{s:s,s:s,s:b}", "grant", g->id, "error",
		    what[0] ? what : tl_strerror(rc), "missing",
		    rc == TL_ENOTFOUND));
	return 0;
}

int
tl_tallyd_find_adopt(struct tl_rx *rx, const char *mesh, char *const *grants,
    size_t ngrants)
{
	struct find_arg fa = { rx, NULL, NULL, mesh, ngrants == 0 };
	struct tl_grant g;
	struct tl_proj p;
	char why[TL_WHY_MAX] = "";
	uint64_t bad = 0;
	size_t i;
	int rc;

	/* The sessions are this mesh's: the driver refuses its own id. */
	if ((rc = tl_mesh_load(rx->log, rx->mesh)) != 0 ||
	    (rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &fa.t)) != 0) {
		fprintf(stderr, "tallyd: find-adopt: %s\n", tl_strerror(rc));
		return TL_EXIT_FAIL;
	}
	if ((rc = tl_log_check(fa.t, NULL, &bad, why)) != 0) {
		fprintf(stderr, "tallyd: the log (%s/data.mdb) does not verify "
		    "at event %llu (%s): refusing to act on it; see tally "
		    "verify\n", tl_log_dir(rx->log), (unsigned long long)bad,
		    why[0] ? why : tl_strerror(rc));
		tl_log_abort(fa.t);
		return rc == TL_ECORRUPT || rc == TL_EMALFORMED ?
		    TL_EXIT_CORRUPT : TL_EXIT_FAIL;
	}
	if ((rc = tl_proj_open(fa.t, &p)) == 0) {
		fa.p = &p;
		if (fa.all)
			rc = tl_grant_each(fa.t, &p, find_one, &fa);
		for (i = 0; rc == 0 && i < ngrants; i++) {
			if ((rc = tl_grant_get(fa.t, &p, grants[i], &g,
			    NULL)) == TL_ENOTFOUND) {
				find_line(json_pack("{s:s,s:s,s:b}", "grant",
				    grants[i], "error", "no such grant",
				    "missing", 0));
				rc = 0;
				continue;
			}
			if (rc == 0)
				rc = find_one(&g, &fa);
		}
	}
	tl_log_abort(fa.t);
	if (rc != 0) {
		fprintf(stderr, "tallyd: find-adopt: %s\n", tl_strerror(rc));
		return TL_EXIT_FAIL;
	}
	return fflush(stdout) == 0 ? TL_EXIT_OK : TL_EXIT_FAIL;
}
