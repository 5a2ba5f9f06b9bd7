/*
 * helper.c - tallyd's one-shot helper modes (helper.h).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
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
