/*
 * offer_report.c - appends node.report-offered to a log as tally-node
 * --log does (tools/tally-node: append_report), for a report forged by
 * tests/harness/forge_report.py: what an agent with the node's key
 * could offer (tests/integration/98_mesh_ca.sh).  For tests only.
 *
 *   offer_report LOGDIR NODE REPORT SIGHEX
 *
 * Exits 1 with the reason when the log refuses it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"
#include "core/error.h"
#include "core/log.h"
#include "core/nodewire.h"

struct arg {
	const char	*node, *report, *sig;
};

static int
offer(struct tl_txn *t, void *p)
{
	const struct arg *a = p;
	struct tl_append ap;
	struct tl_body b;
	char stream[128], actor[96];
	const void *body;
	size_t len;
	int rc;

	snprintf(stream, sizeof(stream), "node/%s", a->node);
	snprintf(actor, sizeof(actor), "tally-node:%s", a->node);
	tl_body_init(&b);
	tl_body_str(&b, "node", a->node);
	tl_body_str(&b, "report", a->report);
	tl_body_str(&b, "sig", a->sig);
	tl_body_str(&b, "via", "log");
	if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
		memset(&ap, 0, sizeof(ap));
		ap.type = TL_NW_REPORT_OFFERED;
		ap.stream = stream;
		ap.expect = TL_VER_ANY;
		ap.actor = actor;
		ap.body = body;
		ap.body_len = len;
		rc = tl_append(t, &ap, NULL, NULL);
	}
	tl_body_free(&b);
	return rc;
}

int
main(int argc, char **argv)
{
	struct tl_log *log;
	struct arg a;
	int rc;

	if (argc != 5) {
		fprintf(stderr, "usage: offer_report LOGDIR NODE REPORT "
		    "SIGHEX\n");
		return 2;
	}
	a.node = argv[2];
	a.report = argv[3];
	a.sig = argv[4];
	if ((rc = tl_log_open(argv[1], 0, &log)) != 0) {
		fprintf(stderr, "offer_report: %s: %s\n", argv[1],
		    tl_strerror(rc));
		return 1;
	}
	rc = tl_log_write(log, offer, &a);
	tl_log_close(log);
	if (rc != 0) {
		fprintf(stderr, "offer_report: %s\n", tl_strerror(rc));
		return 1;
	}
	return 0;
}
