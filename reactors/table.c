/*
 * table.c - every reactor behind one signature (tl_rx_run_fn), so that
 * tallyd runs them from one table on one clock.  Each wrapper calls the
 * reactor's pass and turns what it reports into a struct tl_rx_result;
 * a wall-clock wish (a backoff's end, a grant's verification slot) is
 * turned into a delay here, once.  Above every reactor, it also holds
 * what they share (struct tl_rx): its defaults, its end (each reactor's
 * kept state, the pool, the backoffs, the master key) and the health
 * tallyd --once reports.
 */
#include <stdlib.h>
#include <string.h>

#include "core/vec.h"
#include "projections/status.h"
#include "ack.h"
#include "deliver.h"
#include "pass.h"
#include "rx.h"

/* A copy or a migration's end is no event: look again this soon. */
#define RUNNING_WAKE_NS	250000000u

/* The delay until wall-clock time at (0: none; 1 ns: now). */
static uint64_t
until(uint64_t at)
{
	uint64_t now;

	if (at == 0)
		return 0;
	now = tl_rx_now();
	return at > now ? at - now : 1;
}

int
tl_rx_run_provision(struct tl_rx *rx, struct tl_rx_result *res)
{
	uint64_t next = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = tl_rx_provision(rx, &res->done, &res->pending, &next);
	res->wake_ns = until(next);
	return rc;
}

int
tl_rx_run_acks(struct tl_rx *rx, struct tl_rx_result *res)
{
	unsigned accepted = 0, refused = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = tl_rx_acks(rx, &accepted, &refused);
	res->done = accepted + refused;
	return rc;
}

int
tl_rx_run_issue(struct tl_rx *rx, struct tl_rx_result *res)
{
	unsigned issued = 0, refused = 0;
	int rc, waiting = 0;

	memset(res, 0, sizeof(*res));
	rc = tl_rx_issue(rx, &issued, &refused, &waiting);
	res->done = issued + refused;
	if (waiting) {
		res->pending = 1;
		res->wake_ns = 5ULL * 1000000000ULL;	/* the CA, again */
	}
	return rc;
}

int
tl_rx_run_crl(struct tl_rx *rx, struct tl_rx_result *res)
{
	unsigned published = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = tl_rx_crl(rx, &published, &res->wake_ns);
	res->done = published;
	return rc;
}

int
tl_rx_run_migrate(struct tl_rx *rx, struct tl_rx_result *res)
{
	int rc;

	memset(res, 0, sizeof(*res));
	rc = tl_rx_migrate(rx, &res->done, &res->blocked, &res->running);
	if (res->running > 0)
		res->wake_ns = RUNNING_WAKE_NS;
	return rc;
}

int
tl_rx_run_rotate(struct tl_rx *rx, struct tl_rx_result *res)
{
	unsigned waiting = 0;

	memset(res, 0, sizeof(*res));
	/* A rotation waiting on holders waits for their acks: events. */
	return tl_rx_rotate(rx, &res->done, &waiting);
}

int
tl_rx_run_rotate_admin(struct tl_rx *rx, struct tl_rx_result *res)
{
	memset(res, 0, sizeof(*res));
	return tl_rx_rotate_admin(rx, &res->done);
}

int
tl_rx_run_rebind(struct tl_rx *rx, struct tl_rx_result *res)
{
	int rc;

	memset(res, 0, sizeof(*res));
	rc = tl_rx_rebind(rx, &res->done, &res->running);
	if (res->running > 0)
		res->wake_ns = RUNNING_WAKE_NS;
	return rc;
}

int
tl_rx_run_verify(struct tl_rx *rx, struct tl_rx_result *res)
{
	struct tl_rx_verify_opts vo;
	uint64_t next = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	memset(&vo, 0, sizeof(vo));
	vo.interval_ns = rx->verify_interval_ns;
	vo.login_every = rx->verify_login_every;
	vo.max_checks = TL_RX_VERIFY_RUN_CHECKS;
	vo.max_logins = TL_RX_VERIFY_RUN_LOGINS;
	rc = tl_rx_verify_aside(rx, &vo, &res->checked, &res->unhealthy, &next,
	    &res->running);
	res->wake_ns = until(next);
	return rc;
}

int
tl_rx_run_publish(struct tl_rx *rx, struct tl_rx_result *res)
{
	uint64_t next = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = tl_rx_publish(rx, &res->done, &next);
	res->wake_ns = until(next);
	return rc;
}

void
tl_rx_init(struct tl_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
	rx->actor = "tallyd";
	rx->workers = 4;
	rx->max_rotations = 4;
	rx->verify_interval_ns = 30000000000u;
}

void
tl_rx_free(struct tl_rx *rx)
{
	tl_rx_verify_free(rx);
	tl_rx_migs_free(rx);
	free(rx->verify_resume);
	rx->verify_resume = NULL;
	tl_rx_copies_free(rx);
	tl_rx_pool_free(rx);
	tl_rx_deliver_free(rx);
	tl_rx_provision_free(rx);
	free(rx->bo);
	rx->bo = NULL;
	rx->nbo = rx->capbo = 0;
	tl_secret_key_free(&rx->key);
}

int
tl_rx_healthy(struct tl_rx *rx, int *healthy)
{
	struct tl_txn *t;
	struct tl_proj p;
	json_t *doc = NULL;
	int rc;

	*healthy = 0;
	if ((rc = tl_log_begin(rx->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if ((rc = tl_proj_open(t, &p)) == 0 &&
	    (rc = tl_status_all(t, &p, &doc)) == 0)
		*healthy = tl_status_healthy(doc);
	json_decref(doc);
	tl_log_abort(t);
	return rc;
}
