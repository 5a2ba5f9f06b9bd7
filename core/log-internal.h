/*
 * log-internal.h - what core's own modules (kv, subscription) share
 * about a log and its transactions.  Not for use outside core/.
 *
 * The structs are log.c's: the handles and buffers in them are owned
 * and freed there (tl_log_close, the end of a transaction); the other
 * modules read them and never free or keep them past the transaction.
 */
#ifndef TL_LOG_INTERNAL_H
#define TL_LOG_INTERNAL_H

#include <lmdb.h>

#include "log.h"

#define TL_RAND_POOL	4096

struct tl_log {
	MDB_env		*env;
	MDB_dbi		 events;
	MDB_dbi		 streams;
	MDB_dbi		 ckpts;
	MDB_dbi		 meta;
	unsigned	 flags;
	size_t		 mapsize;
	char		*dir;
	char		 lasterr[TL_WHY_MAX];
	/* Where the map is, for the fault guard (log.c). */
	uintptr_t	 map_lo, map_hi;
	unsigned	 psize;
	MDB_txn		*mtxn;		/* check_meta's, while it runs */
	/* Random bytes drawn in bulk: one getrandom per 256 event ids. */
	uint8_t		 rpool[TL_RAND_POOL];
	size_t		 rpos;
	/* Cluster mode (log.h, tl_log_set_commit). */
	int		 clustered;	/* HOME/cluster.json exists */
	tl_commit_fn	 commit_fn;
	void		*commit_arg;
};

struct tl_txn {
	struct tl_log	*log;
	MDB_txn		*txn;
	unsigned	 flags;
	/* The end of the pages committed when it began, in the map. */
	uintptr_t	 map_end;
	MDB_cursor	*ecur;		/* events, write txns */
	MDB_cursor	*scur;		/* streams, write txns */
	MDB_cursor	*hcur;		/* load_head's, while it runs */
	/* The head, known after the first append in this transaction. */
	int		 have_head;
	uint64_t	 head_seq;
	uint8_t		 head_hash[TL_HASH_LEN];
	/* The last stream appended to, so a run of events skips a lookup. */
	char		 last_stream[TL_STREAM_MAX + 1];
	uint64_t	 last_ver;
	uint8_t		*buf;		/* encoding scratch */
	size_t		 bufcap;
	/* What tl_append (not tl_log_append_raw) added: first..head_seq. */
	uint64_t	 own_first;	/* 0: nothing */
	uint8_t		 own_prev[TL_HASH_LEN];
};

/* Translates an LMDB result, keeping its message in log->lasterr. */
int	tl_log_mdberr(struct tl_log *log, int rc, const char *what);

#endif
