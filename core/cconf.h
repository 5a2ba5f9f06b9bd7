/*
 * cconf.h - a cluster home's configuration: HOME/cluster.json
 * (TL_CLUSTER_FILE, core/log.h), written once by tally init --etcd and
 * read by tally, tallyd and tallyd's helpers.  Its presence is what
 * makes a home a cluster's (core/log.h: tl_log_clustered).  It holds
 * no secret: the client key it names is a file of its own.
 */
#ifndef TL_CCONF_H
#define TL_CCONF_H

#include <stdint.h>

#define TL_CCONF_ID_LEN		32	/* hex of 16 random bytes */

struct tl_cconf {
	char		 endpoints[1024];	/* "https://h:p,https://..." */
	char		 ca[512];		/* "" : the system's */
	char		 cert[512];		/* "" : no client certificate */
	char		 key[512];
	char		 mesh[33];		/* the mesh's id */
	char		 id[TL_CCONF_ID_LEN + 1];	/* this control plane's */
	unsigned	 ttl;		/* the leader's lease, s (default 10) */
	unsigned	 margin_ms;	/* stop calling providers this long
					   before the lease can lapse */
	uint64_t	 keep;		/* events kept below every follower */
	unsigned	 max_request;	/* etcd's --max-request-bytes */
	unsigned	 max_ops;	/* etcd's --max-txn-ops */
};

#define TL_CCONF_TTL		10
#define TL_CCONF_MARGIN_MS	3000
#define TL_CCONF_KEEP		10000
#define TL_CCONF_MAX_REQUEST	1572864	/* etcd 3.4's default */
#define TL_CCONF_MAX_OPS	128	/* etcd 3.4's default */

/* The defaults, an empty endpoint list and a fresh id. */
void	tl_cconf_init(struct tl_cconf *c);
/*
 * Reads HOME/cluster.json into *c.  TL_ENOTFOUND when there is none
 * (not a cluster's home); TL_EMANIFEST when it does not parse or a
 * field is out of range, why (TL_WHY_MAX bytes) naming the file and the
 * field; errno.
 */
int	tl_cconf_load(const char *home, struct tl_cconf *c, char *why);
/* Writes it, mode 0600, never over an existing one (TL_EEXIST). */
int	tl_cconf_write(const char *home, const struct tl_cconf *c);
/* Whether a TTL and margin hold together: 0, or TL_EINVAL and why. */
int	tl_cconf_check(const struct tl_cconf *c, char *why);

#endif
