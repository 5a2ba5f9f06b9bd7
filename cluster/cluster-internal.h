/*
 * cluster-internal.h - what record.c and lead.c share of a tl_cl.
 */
#ifndef TL_CLUSTER_INTERNAL_H
#define TL_CLUSTER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "cluster/cluster.h"
#include "cluster/etcd.h"

#define TL_CL_KEY_MAX	160

struct tl_cl {
	const struct tl_cconf	*c;
	const struct tl_key	*key;
	char			 home[512];
	char			 name[256];
	struct tl_etcd		*e;	/* under mu */
	pthread_mutex_t		 mu;	/* recursive */
	struct tl_etcd		*ka;	/* the renewing thread's */
	uint8_t			*sign_sk;	/* guarded memory */
	uint8_t			 sign_pk[TL_SIGN_PUBLEN];
	char			 prefix[64];	/* "/tally/MESH/" */
	size_t			 plen;
	_Atomic uint64_t	 epoch;		/* led at; 0: not leading */
	int64_t			 rev;		/* the last revision read */
	uint64_t		 registered;	/* the last mark put */
	int64_t			 reg_lease;	/* under this lease */
	_Atomic int64_t		 lease;
	_Atomic uint64_t	 act_until;
	atomic_int		 lost;
	atomic_int		 stop;
	int			 thr_started;
	pthread_t		 thr;
	char			 lasterr[512];
};

/* P + rest into buf (TL_CL_KEY_MAX); its length. */
size_t	tl_cl_key(const struct tl_cl *cl, const char *rest, char *buf);
/* P log/SEQ. */
size_t	tl_cl_log_key(const struct tl_cl *cl, uint64_t seq, char *buf);
/* A message into cl->lasterr, with etcd's last error when rc is one. */
void	tl_cl_err(struct tl_cl *cl, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

#endif
