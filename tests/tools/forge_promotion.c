/*
 * forge_promotion.c - appends a control-plane.promoted to EPOCH to the
 * log at LOGDIR, as nobody but tally promote may: the bytes a test
 * publishes as a third party's forged promotion
 * (tests/integration/78_failover.sh).  For tests only.
 *
 *   forge_promotion LOGDIR EPOCH
 *
 * Prints the event's sequence number.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/body.h"
#include "core/error.h"
#include "core/log.h"

static int
append_cb(struct tl_txn *t, void *p)
{
	uint64_t *v = p, head = 0;
	struct tl_append a = { 0 };
	struct tl_body b;
	const void *body;
	size_t len;
	int rc;

	if ((rc = tl_log_last(t, &head, NULL)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_u64(&b, "epoch", v[0]);
	tl_body_u64(&b, "head", head);
	tl_body_str(&b, "head_hash", "forged");
	if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
		a.type = "control-plane.promoted";
		a.stream = "control-plane";
		a.expect = TL_VER_ANY;
		a.actor = "cli:promote";
		a.body = body;
		a.body_len = len;
		rc = tl_append(t, &a, &v[1], NULL);
	}
	tl_body_free(&b);
	return rc;
}

int
main(int argc, char **argv)
{
	struct tl_log *log = NULL;
	uint64_t v[2] = { 0, 0 };
	int rc;

	if (argc != 3 || (v[0] = strtoull(argv[2], NULL, 10)) == 0) {
		fprintf(stderr, "usage: forge_promotion LOGDIR EPOCH\n");
		return 2;
	}
	if ((rc = tl_log_open(argv[1], 0, &log)) == 0) {
		rc = tl_log_write(log, append_cb, v);
		tl_log_close(log);
	}
	if (rc != 0) {
		fprintf(stderr, "forge_promotion: %s\n", tl_strerror(rc));
		return 1;
	}
	printf("%llu\n", (unsigned long long)v[1]);
	return 0;
}
