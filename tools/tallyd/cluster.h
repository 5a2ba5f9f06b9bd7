/*
 * cluster.h - tallyd in a cluster's home (cluster.c): it follows the
 * record on etcd and campaigns until it leads, then runs as a leader
 * whose every commit the cluster makes first.
 */
#ifndef TALLYD_CLUSTER_H
#define TALLYD_CLUSTER_H

#include <signal.h>
#include <stdatomic.h>

#include "cluster/cluster.h"
#include "reactors/rx.h"

struct tl_tallyd_cluster {
	struct tl_cconf	 conf;
	struct tl_cl	*cl;
	uint64_t	 next_trim;	/* ms, tl_cl_now_ms */
	uint64_t	 next_followers; /* ms: their marks kept for status */
	struct tl_rx	*rx;
	atomic_int	 catch_up;	/* a commit's outcome unknown */
	int		 once;		/* tallyd --once: lead now or exit 7 */
};

/* Reads HOME/cluster.json and opens the membership; 0 or an exit code (said). */
int	tl_tallyd_cluster_open(struct tl_rx *rx, struct tl_tallyd_cluster *tc);
void	tl_tallyd_cluster_close(struct tl_tallyd_cluster *tc);

/*
 * --metrics, a leader's (reactors/metrics.h extra; arg the cluster):
 * each live follower's mark and how far it is behind head.
 */
struct tl_mx_buf;
void	tl_tallyd_cluster_metrics(struct tl_mx_buf *b, uint64_t head,
	    void *arg);

/*
 * Follows (applies the record, marks how far) and campaigns until this
 * control plane wins the leader key, then applies what is left, pushes
 * what only this home holds, sets the log's commit hook and rx's lease
 * gate, and records control-plane.promoted at the new epoch: 0.  An
 * exit code when *stop is set (0), 7 with tc->once when another leads
 * (or the home is empty), or when it cannot follow: 3 behind
 * the trimmed tail (said, with the way out), 5 a record that does not
 * verify or a home that is not its prefix.
 */
int	tl_tallyd_cluster_lead(struct tl_rx *rx, struct tl_tallyd_cluster *tc,
	    volatile sig_atomic_t *stop);

/*
 * A leader's round: TL_EXIT_DEPOSED once the lease is lost or another
 * holds the key (rx->deposed set); after a commit whose outcome etcd did
 * not give, applies the record's tail (TL_EXIT_CORRUPT when it does not
 * verify); trims the tail now and then.
 */
int	tl_tallyd_cluster_round(struct tl_rx *rx, struct tl_tallyd_cluster *tc,
	    uint64_t head);

/*
 * tallyd --commit: the CLI's commit of one write transaction's events
 * (read from stdin) under this control plane's leadership.  Prints one
 * line on failure; exit 0, 7 (not the leader: the line names it), 4
 * (too large, malformed), 1.
 */
int	tl_tallyd_commit(struct tl_rx *rx);

#endif
