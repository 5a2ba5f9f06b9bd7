/*
 * cluster.c - tallyd in a cluster's home (cluster.h here; the cluster
 * itself is cluster/): following and campaigning until it leads, the
 * leader's round, and tallyd --commit, the CLI's commit.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "core/body.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/metrics.h"
#include "projections/events.h"
#include "reactors/epoch.h"
#include "tools/exit.h"
#include "tools/tallyd/cluster.h"

/* How long a follower waits for a change before it looks again. */
#define WAIT_MS		1000
/* How often a leader trims the tail. */
#define TRIM_EVERY_MS	5000
/* How often a follower marks how far it is, and tries for the key. */
#define MARK_EVERY_MS	1000
#define CAMPAIGN_EVERY_MS 250
/* How often a leader keeps its followers' marks in its home. */
#define FOLLOWERS_EVERY_MS 5000

struct prom_arg {
	uint64_t	 epoch;
	uint64_t	 seq;
};

/* control-plane.promoted at the cluster's epoch, and the standing. */
static int
promoted_cb(struct tl_txn *t, void *arg)
{
	struct prom_arg *pa = arg;
	struct tl_append a;
	struct tl_body b;
	uint8_t h[TL_HASH_LEN];
	char hex[2 * TL_HASH_LEN + 1];
	const void *body;
	uint64_t head, cur;
	size_t len, i;
	int rc;

	if ((rc = tl_ep_current(t, &cur, NULL)) != 0 ||
	    (rc = tl_log_last(t, &head, h)) != 0)
		return rc;
	/* Epochs only go up: a cluster's older than the log's is refused. */
	if (pa->epoch <= cur)
		return TL_ECONFLICT;
	for (i = 0; i < TL_HASH_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	tl_body_init(&b);
	tl_body_u64(&b, TL_F_EPOCH, pa->epoch);
	tl_body_u64(&b, TL_F_HEAD, head);
	tl_body_str(&b, TL_F_HEAD_HASH, hex);
	tl_body_str(&b, TL_F_BY, "election");
	if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
		memset(&a, 0, sizeof(a));
		a.type = TL_EV_CP_PROMOTED;
		a.stream = TL_CP_STREAM;
		a.expect = TL_VER_ANY;
		a.actor = "tallyd:election";
		a.body = body;
		a.body_len = len;
		rc = tl_append(t, &a, &pa->seq, NULL);
	}
	tl_body_free(&b);
	if (rc != 0)
		return rc;
	return tl_ep_standing_put(t, 0, pa->seq);
}

/*
 * The leader's commit hook: the cluster's (cluster.h), and a commit
 * refused because another leads deposes this tallyd at once, whatever
 * the reactor that committed makes of the error.
 */
static int
leader_commit(struct tl_txn *txn, uint64_t first,
    const uint8_t prev[TL_HASH_LEN], uint64_t last, void *arg)
{
	struct tl_tallyd_cluster *tc = arg;
	struct tl_rx *rx = tc->rx;
	int rc, zero = 0;

	rc = tl_cl_commit(txn, first, prev, last, tc->cl);
	if (rc == TL_ENOTLEADER &&
	    atomic_compare_exchange_strong(&rx->deposed, &zero, 1))
		snprintf(rx->deposed_msg, sizeof(rx->deposed_msg), "%s",
		    tl_cl_lasterr(tc->cl));
	else if (rc != 0) {
		tl_rx_log(rx, TL_RX_WARN, "%s", tl_cl_lasterr(tc->cl));
		/* Maybe committed after all, or the head moved: apply first. */
		if (rc == TL_EUNAVAIL)
			atomic_store(&tc->catch_up, 1);
	}
	return rc;
}

/* At most so many followers reported: a cluster is three or five. */
#define MARKS_MAX	32

struct mark_arg {
	char		 id[MARKS_MAX][64];
	uint64_t	 seq[MARKS_MAX];
	unsigned	 n;
};

static int
mark_one(const char *id, uint64_t seq, void *arg)
{
	struct mark_arg *ma = arg;

	if (ma->n == MARKS_MAX)
		return 0;
	snprintf(ma->id[ma->n], sizeof(ma->id[0]), "%s", id);
	ma->seq[ma->n++] = seq;
	return 0;
}

static int
standing_cb(struct tl_txn *t, void *arg)
{
	return tl_ep_cluster_put(t, arg);
}

struct followers_arg {
	struct tl_ep_follower	 f[MARKS_MAX];
	unsigned		 n;
	uint64_t		 head;
};

static int
followers_cb(struct tl_txn *t, void *arg)
{
	struct followers_arg *fa = arg;
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return tl_ep_followers_put(t, (uint64_t)now.tv_sec * 1000000000u +
	    (uint64_t)now.tv_nsec, fa->head, fa->f, fa->n);
}

/*
 * The followers' marks, kept in the home for tally status and the board
 * (the record does not hold them: a mark is no decision).  etcd away:
 * what was kept stays, with its time.
 */
static void
keep_followers(struct tl_rx *rx, struct tl_tallyd_cluster *tc, uint64_t head)
{
	struct followers_arg fa;
	struct mark_arg ma;
	unsigned i;
	int rc;

	ma.n = 0;
	if (tl_cl_marks(tc->cl, mark_one, &ma) != 0)
		return;
	memset(&fa, 0, sizeof(fa));
	for (i = 0; i < ma.n; i++) {
		snprintf(fa.f[i].id, sizeof(fa.f[i].id), "%s", ma.id[i]);
		fa.f[i].applied = ma.seq[i];
	}
	fa.n = ma.n;
	fa.head = head;
	if ((rc = tl_log_write(rx->log, followers_cb, &fa)) != 0)
		tl_rx_log(rx, TL_RX_WARN, "cannot keep the followers' marks: "
		    "%s", tl_strerror(rc));
}

/* What tally status says of this control plane. */
static void
say_standing(struct tl_rx *rx, const char *fmt, ...)
{
	char buf[900];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if ((rc = tl_log_write(rx->log, standing_cb, buf)) != 0)
		tl_rx_log(rx, TL_RX_WARN, "cannot record its standing: %s",
		    tl_strerror(rc));
}

int
tl_tallyd_cluster_open(struct tl_rx *rx, struct tl_tallyd_cluster *tc)
{
	char why[TL_WHY_MAX];
	int rc;

	memset(tc, 0, sizeof(*tc));
	tc->rx = rx;
	if ((rc = tl_cconf_load(rx->home, &tc->conf, why)) != 0) {
		tl_rx_log(rx, TL_RX_ERR, "%s", why[0] ? why :
		    tl_strerror(rc));
		return rc == TL_ENOTFOUND ? TL_EXIT_NOTFOUND :
		    TL_EXIT_REFUSED;
	}
	if ((rc = tl_cl_open(&tc->conf, &rx->key, rx->home, &tc->cl)) != 0) {
		tl_rx_log(rx, TL_RX_ERR, "cluster: %s", tl_strerror(rc));
		return TL_EXIT_FAIL;
	}
	return 0;
}

void
tl_tallyd_cluster_close(struct tl_tallyd_cluster *tc)
{
	tl_cl_close(tc->cl);
	tc->cl = NULL;
}

int
tl_tallyd_cluster_lead(struct tl_rx *rx, struct tl_tallyd_cluster *tc,
    volatile sig_atomic_t *stop)
{
	struct tl_cl *cl = tc->cl;
	struct tl_cl_leader who;
	struct prom_arg pa;
	uint64_t applied = 0, epoch = 0, said = UINT64_MAX, now;
	uint64_t next_mark = 0, next_campaign = 0;
	int rc, won = 0, was_down = 0;

	while (!*stop) {
		if ((rc = tl_cl_lease_start(cl)) != 0)
			goto wait;
		rc = tl_cl_catch_up(cl, rx->log, &applied);
		if (rc == TL_ECOMPACTED || rc == TL_ECORRUPT) {
			tl_rx_log(rx, TL_RX_ERR, "%s", tl_cl_lasterr(cl));
			return rc == TL_ECORRUPT ? TL_EXIT_CORRUPT :
			    TL_EXIT_NOTFOUND;
		}
		if (rc != 0)
			goto wait;
		if (was_down) {
			tl_rx_log(rx, TL_RX_INFO, "the cluster answers again");
			was_down = 0;
		}
		/*
		 * Only a home at the record's head may lead, and only one
		 * that holds the mesh's record: an empty home waits for the
		 * founder's (else it would found a mesh of its own).
		 */
		/*
		 * Each change wakes a follower (a commit every few ms on a
		 * busy leader): the mark and the campaign, both requests to
		 * etcd, are made at most every so often, not per change.
		 */
		now = tl_cl_now_ms();
		if (now >= next_mark) {
			if ((rc = tl_cl_register(cl, applied)) != 0)
				goto wait;
			next_mark = now + MARK_EVERY_MS;
		}
		if (applied > 0 && (now >= next_campaign || tc->once)) {
			if ((rc = tl_cl_campaign(cl, &won, &epoch)) != 0)
				goto wait;
			next_campaign = now + CAMPAIGN_EVERY_MS;
			if (won)
				break;
		}
		if (tc->once) {
			tl_rx_log(rx, TL_RX_ERR, "--once: this control plane "
			    "does not lead the cluster (%s)", applied == 0 ?
			    "its home is empty: the founding home's tallyd "
			    "leads first" : "another does: tally status there");
			return TL_EXIT_LOCKED;
		}
		if (epoch != said) {
			if (tl_cl_leader(cl, &who) == 0 && who.id[0] != '\0') {
				tl_rx_log(rx, TL_RX_INFO, "following %s (%s, "
				    "control plane %.12s) at epoch %llu, "
				    "applied through event %llu", who.name,
				    who.home, who.id,
				    (unsigned long long)who.epoch,
				    (unsigned long long)applied);
				say_standing(rx, "a follower of %s (%s, control plane "
				    "%.12s) at epoch %llu", who.name, who.home,
				    who.id, (unsigned long long)who.epoch);
			}
			said = epoch;
		}
		rc = tl_cl_wait(cl, WAIT_MS);
		if (rc == 0 || rc == TL_ETIMEDOUT)
			continue;
wait:
		if (!was_down)
			tl_rx_log(rx, TL_RX_WARN, "cluster: %s (%s); trying "
			    "again", tl_cl_lasterr(cl)[0] ? tl_cl_lasterr(cl) :
			    "unreachable", tl_strerror(rc));
		was_down = 1;
		sleep(1);
	}
	if (*stop)
		return TL_EXIT_OK;
	/*
	 * Won: what the old leader committed last is applied first, then
	 * a founding home's own events are pushed, then the promotion.
	 */
	if ((rc = tl_cl_catch_up(cl, rx->log, &applied)) != 0 ||
	    (rc = tl_cl_push(cl, rx->log)) != 0) {
		tl_rx_log(rx, TL_RX_ERR, "elected at epoch %llu but cannot "
		    "take over: %s; resigning", (unsigned long long)epoch,
		    tl_cl_lasterr(cl));
		tl_cl_resign(cl);
		return rc == TL_ECORRUPT ? TL_EXIT_CORRUPT : TL_EXIT_FAIL;
	}
	tl_log_set_commit(rx->log, leader_commit, tc);
	rx->act_until = tl_cl_act_until_ptr(cl);
	memset(&pa, 0, sizeof(pa));
	pa.epoch = epoch;
	if ((rc = tl_log_write(rx->log, promoted_cb, &pa)) != 0) {
		tl_rx_log(rx, TL_RX_ERR, "elected at epoch %llu but cannot "
		    "record it: %s%s%s; resigning", (unsigned long long)epoch,
		    rc == TL_ECONFLICT ? "the log is at a later epoch" :
		    tl_strerror(rc), tl_cl_lasterr(cl)[0] ? ": " : "",
		    tl_cl_lasterr(cl));
		tl_cl_resign(cl);
		return TL_EXIT_FAIL;
	}
	say_standing(rx, "the leader at epoch %llu (elected; from event %llu)",
	    (unsigned long long)epoch, (unsigned long long)pa.seq);
	tl_rx_log(rx, TL_RX_INFO, "leading at epoch %llu from event %llu "
	    "(control-plane.promoted is event %llu)", (unsigned long long)
	    epoch, (unsigned long long)applied, (unsigned long long)pa.seq);
	tc->next_trim = tl_cl_now_ms() + TRIM_EVERY_MS;
	return 0;
}

int
tl_tallyd_cluster_round(struct tl_rx *rx, struct tl_tallyd_cluster *tc,
    uint64_t head)
{
	struct tl_cl *cl = tc->cl;
	uint8_t chash[TL_HASH_LEN];
	uint64_t below = 0, chead;
	int rc, zero = 0;

	/*
	 * Past the margin (stopped, or etcd away): renew now, on this
	 * thread, so a lease that lapsed meanwhile is known before
	 * anything else is tried.
	 */
	if (tl_cl_now_ms() >= tl_cl_act_until(cl))
		tl_cl_renew(cl);
	if (tl_cl_lost(cl)) {
		if (atomic_compare_exchange_strong(&rx->deposed, &zero, 1))
			snprintf(rx->deposed_msg, sizeof(rx->deposed_msg),
			    "deposed: the lease of epoch %llu lapsed (another "
			    "control plane may lead now)",
			    (unsigned long long)tl_cl_epoch(cl));
		return TL_EXIT_DEPOSED;
	}
	/*
	 * A commit whose outcome etcd did not give, or that found the head
	 * moved: the record's tail is applied before anything else is
	 * committed (it holds only what this leader committed itself, each
	 * chunk checked as a follower checks it).
	 */
	if (atomic_load(&tc->catch_up)) {
		rc = tl_cl_catch_up(cl, rx->log, NULL);
		if (rc == TL_ECORRUPT || rc == TL_ECOMPACTED) {
			tl_rx_log(rx, TL_RX_ERR, "%s; stopping",
			    tl_cl_lasterr(cl));
			return TL_EXIT_CORRUPT;
		}
		if (rc == 0)
			atomic_store(&tc->catch_up, 0);
	}
	if (tl_cl_now_ms() >= tc->next_followers) {
		tc->next_followers = tl_cl_now_ms() + FOLLOWERS_EVERY_MS;
		keep_followers(rx, tc, head);
	}
	if (tl_cl_now_ms() < tc->next_trim)
		return 0;
	tc->next_trim = tl_cl_now_ms() + TRIM_EVERY_MS;
	/* A head this leader did not write: its tail is read (and checked). */
	if (tl_cl_head(cl, &chead, chash, NULL) == 0 && chead != head)
		atomic_store(&tc->catch_up, 1);
	rc = tl_cl_trim(cl, head, &below);
	if (rc == TL_ENOTLEADER) {
		if (atomic_compare_exchange_strong(&rx->deposed, &zero, 1))
			snprintf(rx->deposed_msg, sizeof(rx->deposed_msg),
			    "deposed: another control plane holds the "
			    "leader key");
		return TL_EXIT_DEPOSED;
	}
	if (rc != 0)
		tl_rx_log(rx, TL_RX_WARN, "%s", tl_cl_lasterr(cl));
	else if (below != 0)
		tl_rx_log(rx, TL_RX_DEBUG, "the cluster holds the record "
		    "from event %llu", (unsigned long long)below);
	return 0;
}

/*
 * What the CLI sends (tools/tally/cluster.c): "tlb1", the first
 * sequence (8), the hash it extends (32), the count (4), then each
 * event as a 4-byte length and its envelope; all big-endian.
 */
static int
read_all(int fd, uint8_t **bufp, size_t *lenp)
{
	uint8_t *b = NULL, *nb;
	size_t len = 0, cap = 0;
	ssize_t r;

	for (;;) {
		if (len == cap) {
			cap = cap ? 2 * cap : 65536;
			if (cap > ((size_t)1 << 30) ||
			    (nb = realloc(b, cap)) == NULL) {
				free(b);
				return ENOMEM;
			}
			b = nb;
		}
		r = read(fd, b + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(b);
			return errno;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	*bufp = b;
	*lenp = len;
	return 0;
}

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

int
tl_tallyd_commit(struct tl_rx *rx)
{
	struct tl_tallyd_cluster tc;
	const uint8_t **raws = NULL;
	size_t *lens = NULL, len = 0, off, i;
	uint8_t *in = NULL;
	uint64_t first;
	uint32_t count;
	int rc, ex;

	if ((ex = tl_tallyd_cluster_open(rx, &tc)) != 0)
		return ex;
	/*
	 * Started ahead of the CLI's transaction: connect now (a TLS
	 * handshake, who leads), while the CLI decides, not once it holds
	 * the log's write lock.
	 */
	{
		struct tl_cl_leader who;

		(void)tl_cl_leader(tc.cl, &who);
	}
	if ((rc = read_all(0, &in, &len)) != 0)
		goto out;
	/* Given nothing: the CLI's transaction appended nothing. */
	if (len == 0)
		goto out;
	rc = TL_EMALFORMED;
	if (len < 48 || memcmp(in, "tlb1", 4) != 0)
		goto out;
	first = (uint64_t)be32(in + 4) << 32 | be32(in + 8);
	count = be32(in + 44);
	if (count == 0 || count > len / 4 ||
	    (raws = calloc(count, sizeof(*raws))) == NULL ||
	    (lens = calloc(count, sizeof(*lens))) == NULL)
		goto out;
	for (i = 0, off = 48; i < count; i++) {
		if (len - off < 4 || be32(in + off) > len - off - 4)
			goto out;
		lens[i] = be32(in + off);
		raws[i] = in + off + 4;
		off += 4 + lens[i];
	}
	if (off != len)
		goto out;
	rc = tl_cl_commit_raw(tc.cl, first, in + 12, raws, lens, count);
out:
	/* One line for the CLI to say; never an event's bytes. */
	if (rc != 0)
		printf("%s\n", rc == TL_EMALFORMED ? "the commit's input does "
		    "not parse" : tl_cl_lasterr(tc.cl)[0] ?
		    tl_cl_lasterr(tc.cl) : tl_strerror(rc));
	free(raws);
	free(lens);
	free(in);
	tl_tallyd_cluster_close(&tc);
	switch (rc) {
	case 0:
		return TL_EXIT_OK;
	case TL_ENOTLEADER:
		return TL_EXIT_LOCKED;
	case TL_ETOOBIG:
	case TL_EMALFORMED:
		return TL_EXIT_REFUSED;
	default:
		return TL_EXIT_FAIL;
	}
}

void
tl_tallyd_cluster_metrics(struct tl_mx_buf *b, uint64_t head, void *arg)
{
	struct tl_tallyd_cluster *tc = arg;
	struct mark_arg ma;
	char e[512];
	unsigned i;

	ma.n = 0;
	if (tl_cl_marks(tc->cl, mark_one, &ma) != 0)
		return;	/* etcd unreachable: no figures, not old ones */
	tl_mx_head(b, "tally_cluster_followers", "gauge", "Followers whose "
	    "lease is alive.");
	tl_mx_addf(b, "tally_cluster_followers %u\n", ma.n);
	tl_mx_head(b, "tally_follower_applied_sequence", "gauge", "The last "
	    "event each live follower has applied (its mark on etcd, put "
	    "every second).");
	for (i = 0; i < ma.n; i++)
		tl_mx_addf(b, "tally_follower_applied_sequence{follower=\"%s\"} "
		    "%llu\n", tl_mx_label(ma.id[i], e),
		    (unsigned long long)ma.seq[i]);
	tl_mx_head(b, "tally_follower_lag_events", "gauge", "How many events "
	    "each live follower is behind the leader's head.");
	for (i = 0; i < ma.n; i++)
		tl_mx_addf(b, "tally_follower_lag_events{follower=\"%s\"} "
		    "%llu\n", tl_mx_label(ma.id[i], e),
		    (unsigned long long)(head > ma.seq[i] ? head - ma.seq[i] :
		    0));
}
