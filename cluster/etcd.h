/*
 * etcd.h - a small client of etcd's v3 JSON gateway (etcd 3.4,
 * /v3/...) over libcurl: what cluster mode needs and nothing more
 * (ranges, conditional transactions, leases, a one-shot watch,
 * compaction).  Keys and values are bytes; the gateway's base64 and
 * JSON are this file's business (libsodium's base64, jansson).
 *
 * A handle holds one libcurl easy handle (its connection is reused)
 * and is used by one thread at a time: a program that renews a lease
 * on its own thread opens a second handle.
 *
 * Endpoints are tried in the order given; the first that answers is
 * kept until it fails to, then the next is tried.  A request that
 * fails before a member answered it (refused, reset, TLS, time out)
 * moves on to the next endpoint only when it changes nothing (range,
 * lease keepalive, watch, status); a transaction, a lease grant or a
 * compaction whose outcome is unknown is not sent twice: it returns
 * TL_EUNAVAIL and the caller reads the state again.  Its outcome is
 * known when nothing of it was sent (connection refused, the TLS
 * handshake failed, not a byte written): then it goes to the next
 * member too.  A member that answers that it cannot serve a request
 * (gRPC 4 or 14: no leader on its side of a partition) counts as not
 * answering for the requests that change nothing.
 *
 * Errors (every function): TL_EUNAVAIL when no member answered within
 * the timeout, or the member answered that it cannot serve the request
 * (no leader, no quorum, request timed out: gRPC codes 4 and 14);
 * TL_EUNTRUSTED when a member's certificate does not verify against
 * the CA; TL_EAUTH when a member refused our client certificate (under
 * TLS 1.3 a refusal can also show as a bare reset: TL_EUNAVAIL then);
 * TL_ECOMPACTED when a revision asked for was compacted; TL_ETOOBIG
 * when etcd refuses a request as too large or with too many
 * operations, or an answer passes 256 MiB; TL_EMALFORMED when an
 * answer cannot be parsed; TL_EINVAL for bad arguments (a revision not
 * yet written among them); ENOMEM.  tl_etcd_lasterr() then says which
 * endpoints were tried and what each answered, cut to printable ASCII
 * (no value or key bytes in it; etcd's messages carry none).  Every
 * buffer of ours that held a request or an answer is wiped before it
 * is freed or reused; jansson's own copies are freed as it frees them.
 */
#ifndef TL_ETCD_H
#define TL_ETCD_H

#include <stddef.h>
#include <stdint.h>

struct tl_etcd;

struct tl_etcd_conf {
	const char	*endpoints;	/* "https://127.0.0.1:2379,https://..." */
	const char	*ca;		/* PEM file the members chain to; NULL: system */
	const char	*cert;		/* client certificate (PEM); NULL: none */
	const char	*key;		/* its key (PEM) */
	long		 timeout_ms;	/* per request; 0: 5000 */
};

/* Copies what it needs of c; connects lazily.  TL_EINVAL, ENOMEM. */
int	tl_etcd_open(const struct tl_etcd_conf *c, struct tl_etcd **out);
void	tl_etcd_close(struct tl_etcd *e);
/* What the last failure was, for a message; never NULL.  A member that
 * failed before another answered is a failure too. */
const char *tl_etcd_lasterr(const struct tl_etcd *e);
/* The endpoint that answered last (NULL before any). */
const char *tl_etcd_endpoint(const struct tl_etcd *e);

struct tl_etcd_kv {
	uint8_t		*key;		/* NUL-terminated too (key[key_len]) */
	size_t		 key_len;
	uint8_t		*val;		/* NUL-terminated too */
	size_t		 val_len;
	int64_t		 create_rev;
	int64_t		 mod_rev;
	int64_t		 version;
	int64_t		 lease;
};

struct tl_etcd_range {
	int64_t		 rev;		/* the store's revision when read */
	struct tl_etcd_kv *kvs;		/* n of them, in key order */
	size_t		 n;
	int		 more;		/* limit cut it short */
};

/*
 * Keys [key, end) -- end NULL: key alone; end "\0" (len 1, a single
 * NUL byte): every key >= key -- at most limit of them (0: no limit),
 * at revision rev (0: the latest).  keys_only leaves val NULL.
 * *r is the caller's to free with tl_etcd_range_free, also after an
 * error (it is zeroed first).
 */
int	tl_etcd_range(struct tl_etcd *e, const void *key, size_t key_len,
	    const void *end, size_t end_len, int64_t limit, int64_t rev,
	    int keys_only, struct tl_etcd_range *r);
void	tl_etcd_range_free(struct tl_etcd_range *r);

/* The end of the range of every key starting with prefix, into end
 * (room for len bytes, at least 1): "\0" when prefix is empty or all
 * 0xff bytes, every key from it on. */
void	tl_etcd_prefix_end(const void *prefix, size_t len, uint8_t *end,
	    size_t *end_len);

enum tl_etcd_target {
	TL_ETCD_VALUE,
	TL_ETCD_CREATE,		/* create_revision: 0 when the key is absent */
	TL_ETCD_MOD,
	TL_ETCD_VERSION
};
enum tl_etcd_result { TL_ETCD_EQ, TL_ETCD_NE, TL_ETCD_LT, TL_ETCD_GT };

struct tl_etcd_cmp {
	const void	*key;
	size_t		 key_len;
	enum tl_etcd_target target;
	enum tl_etcd_result result;
	const void	*val;		/* TL_ETCD_VALUE */
	size_t		 val_len;
	int64_t		 num;		/* the other targets */
};

enum tl_etcd_opkind { TL_ETCD_PUT, TL_ETCD_DEL };

struct tl_etcd_op {
	enum tl_etcd_opkind kind;
	const void	*key;
	size_t		 key_len;
	const void	*end;		/* DEL: the range's end, NULL: key alone */
	size_t		 end_len;
	const void	*val;		/* PUT */
	size_t		 val_len;
	int64_t		 lease;		/* PUT: 0 for none */
};

/*
 * One transaction: if every comparison holds, the success operations,
 * else the failure ones (either list may be empty).  *ok says which
 * ran; *revp (may be NULL) receives the revision after it (the
 * revision of its puts when it wrote).
 */
int	tl_etcd_txn(struct tl_etcd *e, const struct tl_etcd_cmp *cmp,
	    size_t ncmp, const struct tl_etcd_op *succ, size_t nsucc,
	    const struct tl_etcd_op *fail, size_t nfail, int *ok,
	    int64_t *revp);

/* A lease of ttl seconds: *idp its id, *ttlp (may be NULL) the TTL
 * granted, which etcd raises to its minimum (1.5 election timeouts). */
int	tl_etcd_lease_grant(struct tl_etcd *e, int64_t ttl, int64_t *idp,
	    int64_t *ttlp);
/* Renews it: *ttlp the TTL left; TL_ENOTFOUND when it has expired. */
int	tl_etcd_lease_keepalive(struct tl_etcd *e, int64_t id, int64_t *ttlp);
/* Ends it now (its keys are deleted); an unknown lease is not an error. */
int	tl_etcd_lease_revoke(struct tl_etcd *e, int64_t id);

/*
 * Waits up to wait_ms for a change to [key, end) (end as in
 * tl_etcd_range) at or after revision start (0: after now): 0 and
 * *revp the revision of the first change seen, TL_ETIMEDOUT when none
 * came, TL_ECOMPACTED when start was compacted away, TL_EUNAVAIL when
 * the member canceled the watch for another reason.  wait_ms (> 0)
 * bounds the whole call, the members tried included.  The caller
 * reads what changed with tl_etcd_range.
 */
int	tl_etcd_watch(struct tl_etcd *e, const void *key, size_t key_len,
	    const void *end, size_t end_len, int64_t start, long wait_ms,
	    int64_t *revp);

/* Compacts the history below rev (physical: waits until it is done);
 * TL_ECOMPACTED when rev is below an earlier compaction. */
int	tl_etcd_compact(struct tl_etcd *e, int64_t rev, int physical);

/* The answering member's status: its version string, the store's
 * size in bytes, the cluster's leader member id and the revision. */
struct tl_etcd_status {
	char		 version[32];
	int64_t		 db_size;
	uint64_t	 leader;
	uint64_t	 member;
	int64_t		 rev;
};
int	tl_etcd_status(struct tl_etcd *e, struct tl_etcd_status *st);

#endif
