/*
 * log.c - the append-only event log over LMDB.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "log-internal.h"

#define TL_LOG_MAGIC	"tally-log"
#define TL_LOG_FORMAT	1
#define TL_MAP_DEFAULT	((size_t)64 << 20)
#define TL_MAX_DBS	64

static void
put_be64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t
get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

int
tl_log_mdberr(struct tl_log *log, int rc, const char *what)
{
	if (rc == 0)
		return 0;
	if (rc == MDB_NOTFOUND)
		return TL_ENOTFOUND;
	snprintf(log->lasterr, sizeof(log->lasterr), "%s: %s", what,
	    mdb_strerror(rc));
	if (rc > 0)
		return rc;	/* an errno */
	return TL_ELMDB;
}

const char *
tl_log_lasterr(const struct tl_log *log)
{
	return log->lasterr;
}

const char *
tl_log_dir(const struct tl_log *log)
{
	return log->dir;
}

static int
file_exists(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >=
	    sizeof(path))
		return 0;
	return stat(path, &st) == 0;
}

/* Reads or, for a new log, writes the identity of the log. */
static int
check_meta(struct tl_log *log, int create)
{
	MDB_txn *txn = NULL;
	MDB_val k, v;
	uint8_t fmt[4];
	int rc;
	unsigned dbflags = create ? MDB_CREATE : 0;

	rc = mdb_txn_begin(log->env, NULL,
	    (log->flags & TL_LOG_RDONLY) ? MDB_RDONLY : 0, &txn);
	if (rc != 0)
		return tl_log_mdberr(log, rc, "begin");

	rc = mdb_dbi_open(txn, "meta", dbflags, &log->meta);
	if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
		rc = TL_ENOTLOG;
		goto abort;
	}
	if (rc != 0)
		goto mdberr;
	k.mv_data = "magic";
	k.mv_size = 5;
	if (create) {
		v.mv_data = TL_LOG_MAGIC;
		v.mv_size = sizeof(TL_LOG_MAGIC);
		if ((rc = mdb_put(txn, log->meta, &k, &v,
		    MDB_NOOVERWRITE)) != 0) {
			if (rc == MDB_KEYEXIST) {
				rc = TL_EEXIST;
				goto abort;
			}
			goto mdberr;
		}
	} else {
		rc = mdb_get(txn, log->meta, &k, &v);
		if (rc == MDB_NOTFOUND || v.mv_size != sizeof(TL_LOG_MAGIC) ||
		    memcmp(v.mv_data, TL_LOG_MAGIC, v.mv_size) != 0) {
			rc = TL_ENOTLOG;
			goto abort;
		}
		if (rc != 0)
			goto mdberr;
	}

	k.mv_data = "format";
	k.mv_size = 6;
	if (create) {
		fmt[0] = fmt[1] = fmt[2] = 0;
		fmt[3] = TL_LOG_FORMAT;
		v.mv_data = fmt;
		v.mv_size = 4;
		if ((rc = mdb_put(txn, log->meta, &k, &v, 0)) != 0)
			goto mdberr;
	} else {
		const uint8_t *p;
		uint32_t f;

		if ((rc = mdb_get(txn, log->meta, &k, &v)) != 0 ||
		    v.mv_size != 4) {
			rc = TL_ENOTLOG;
			goto abort;
		}
		p = v.mv_data;
		f = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		    (uint32_t)p[2] << 8 | p[3];
		if (f > TL_LOG_FORMAT) {
			snprintf(log->lasterr, sizeof(log->lasterr),
			    "log format %u is newer than this tally reads "
			    "(%d): upgrade tally", f, TL_LOG_FORMAT);
			rc = TL_ENEWER;
			goto abort;
		}
	}
	if (create) {
		uint8_t ts[8];
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		put_be64(ts, (uint64_t)now.tv_sec * 1000000000u +
		    (uint64_t)now.tv_nsec);
		k.mv_data = "created";
		k.mv_size = 7;
		v.mv_data = ts;
		v.mv_size = 8;
		if ((rc = mdb_put(txn, log->meta, &k, &v, 0)) != 0)
			goto mdberr;
	}

	if ((rc = mdb_dbi_open(txn, "events", dbflags,
	    &log->events)) != 0)
		goto dbi;
	if ((rc = mdb_dbi_open(txn, "streams",
	    dbflags | MDB_DUPSORT | MDB_DUPFIXED, &log->streams)) != 0)
		goto dbi;
	if ((rc = mdb_dbi_open(txn, "checkpoints", dbflags,
	    &log->ckpts)) != 0)
		goto dbi;

	if ((rc = mdb_txn_commit(txn)) != 0)
		return tl_log_mdberr(log, rc, "commit");
	return 0;
dbi:
	if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
		rc = TL_ENOTLOG;
		goto abort;
	}
mdberr:
	rc = tl_log_mdberr(log, rc, "meta");
abort:
	mdb_txn_abort(txn);
	return rc;
}

int
tl_log_open(const char *dir, unsigned flags, struct tl_log **out)
{
	return tl_log_open_ex(dir, flags, 0, out);
}

int
tl_log_open_ex(const char *dir, unsigned flags, size_t mapsize,
    struct tl_log **out)
{
	struct tl_log *log;
	struct stat st;
	unsigned eflags = MDB_NOTLS;
	int rc, dead;

	*out = NULL;
	if (sodium_init() < 0)
		return TL_ESECRET;
	if (stat(dir, &st) != 0) {
		if (errno == ENOENT)
			return TL_ENOTFOUND;
		return errno;
	}
	if (!S_ISDIR(st.st_mode))
		return TL_ENOTLOG;
	if (flags & TL_LOG_CREATE) {
		if (file_exists(dir, "data.mdb"))
			return TL_EEXIST;
	} else if (!file_exists(dir, "data.mdb"))
		return TL_ENOTFOUND;

	if ((log = calloc(1, sizeof(*log))) == NULL)
		return ENOMEM;
	log->flags = flags;
	log->rpos = TL_RAND_POOL;
	log->mapsize = mapsize ? mapsize : TL_MAP_DEFAULT;
	if ((log->dir = strdup(dir)) == NULL) {
		rc = ENOMEM;
		goto free;
	}
	if ((rc = mdb_env_create(&log->env)) != 0)
		goto mdberr;
	mdb_env_set_maxdbs(log->env, TL_MAX_DBS);
	mdb_env_set_maxreaders(log->env, 254);
	if ((rc = mdb_env_set_mapsize(log->env, log->mapsize)) != 0)
		goto mdberr;
	if (flags & TL_LOG_RDONLY)
		eflags |= MDB_RDONLY;
	if (flags & TL_LOG_NOSYNC)
		eflags |= MDB_NOSYNC;
	rc = mdb_env_open(log->env, dir, eflags, 0600);
	if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH) {
		rc = TL_ENOTLOG;
		goto close;
	}
	if (rc != 0)
		goto mdberr;
	/*
	 * Another process may have grown the map: adopt the file's size
	 * if it is larger than ours.
	 */
	{
		MDB_envinfo ei;
		MDB_stat ms;

		mdb_env_info(log->env, &ei);
		log->mapsize = ei.me_mapsize;
		/*
		 * LMDB maps a larger file at exactly its size, which leaves a
		 * writer no room: the first write would fill the map and be
		 * run again.  Leave room for the log to double.
		 */
		if (!(flags & TL_LOG_RDONLY) && mdb_env_stat(log->env,
		    &ms) == 0) {
			size_t used = (size_t)(ei.me_last_pgno + 1) *
			    ms.ms_psize;

			if (log->mapsize < used * 2 &&
			    mdb_env_set_mapsize(log->env, used * 2) == 0)
				log->mapsize = used * 2;
		}
	}
	/* Reader slots of processes that died would pin old pages. */
	mdb_reader_check(log->env, &dead);
	if ((rc = check_meta(log, (flags & TL_LOG_CREATE) != 0)) != 0)
		goto close;
	*out = log;
	return 0;
mdberr:
	rc = tl_log_mdberr(log, rc, "open");
close:
	if (log->env != NULL)
		mdb_env_close(log->env);
free:
	free(log->dir);
	free(log);
	return rc;
}

void
tl_log_close(struct tl_log *log)
{
	if (log == NULL)
		return;
	mdb_env_close(log->env);
	sodium_memzero(log->rpool, sizeof(log->rpool));
	free(log->dir);
	free(log);
}

int
tl_log_size(struct tl_log *log, uint64_t *usedp, uint64_t *mapp)
{
	MDB_envinfo ei;
	MDB_stat st;
	int rc;

	if ((rc = mdb_env_info(log->env, &ei)) != 0 ||
	    (rc = mdb_env_stat(log->env, &st)) != 0)
		return tl_log_mdberr(log, rc, "info");
	*usedp = (uint64_t)(ei.me_last_pgno + 1) * st.ms_psize;
	*mapp = ei.me_mapsize;
	return 0;
}

/* Grows the map; only safe with no transaction open in this process. */
static int
grow(struct tl_log *log)
{
	size_t want = log->mapsize * 2;
	int rc;

	if (want < log->mapsize)
		return ENOSPC;
	if ((rc = mdb_env_set_mapsize(log->env, want)) != 0)
		return tl_log_mdberr(log, rc, "grow map");
	log->mapsize = want;
	return 0;
}

static int
begin(struct tl_log *log, unsigned flags, struct tl_txn **out)
{
	struct tl_txn *t;
	int rc, tries;

	*out = NULL;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return ENOMEM;
	t->log = log;
	t->flags = flags;
	for (tries = 0;; tries++) {
		rc = mdb_txn_begin(log->env, NULL,
		    (flags & TL_TXN_RDONLY) ? MDB_RDONLY : 0, &t->txn);
		if (rc != MDB_MAP_RESIZED || tries > 3)
			break;
		/* Another process grew the map: adopt its size. */
		mdb_env_set_mapsize(log->env, 0);
		{
			MDB_envinfo ei;

			mdb_env_info(log->env, &ei);
			log->mapsize = ei.me_mapsize;
		}
	}
	if (rc != 0) {
		free(t);
		return tl_log_mdberr(log, rc, "begin");
	}
	*out = t;
	return 0;
}

int
tl_log_begin(struct tl_log *log, unsigned flags, struct tl_txn **out)
{
	if ((log->flags & TL_LOG_RDONLY) && !(flags & TL_TXN_RDONLY))
		return TL_EINVAL;
	return begin(log, flags, out);
}

static void
txn_free(struct tl_txn *t)
{
	free(t->buf);
	free(t);
}

int
tl_log_commit(struct tl_txn *t)
{
	struct tl_log *log = t->log;
	int rc;

	rc = mdb_txn_commit(t->txn);
	txn_free(t);
	if (rc == MDB_MAP_FULL)
		return rc;	/* tl_log_write grows and retries */
	return tl_log_mdberr(log, rc, "commit");
}

struct tl_log *
tl_txn_log(struct tl_txn *t)
{
	return t->log;
}

void
tl_log_abort(struct tl_txn *t)
{
	if (t == NULL)
		return;
	mdb_txn_abort(t->txn);
	txn_free(t);
}

int
tl_log_write(struct tl_log *log, tl_write_fn fn, void *arg)
{
	struct tl_txn *t;
	int rc;

	for (;;) {
		if ((rc = tl_log_begin(log, 0, &t)) != 0)
			return rc;
		rc = fn(t, arg);
		if (rc == 0)
			rc = tl_log_commit(t);
		else
			tl_log_abort(t);
		if (rc != MDB_MAP_FULL)
			return rc;
		if ((rc = grow(log)) != 0)
			return rc;
	}
}

static int
load_head(struct tl_txn *t)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	if ((rc = mdb_cursor_open(t->txn, t->log->events, &c)) != 0)
		return tl_log_mdberr(t->log, rc, "cursor");
	rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
	if (rc == MDB_NOTFOUND) {
		t->head_seq = 0;
		memset(t->head_hash, 0, TL_HASH_LEN);
		rc = 0;
	} else if (rc == 0) {
		if (k.mv_size != 8 || v.mv_size < TL_HASH_LEN) {
			rc = TL_ECORRUPT;
		} else {
			t->head_seq = get_be64(k.mv_data);
			memcpy(t->head_hash, v.mv_data, TL_HASH_LEN);
		}
	} else
		rc = tl_log_mdberr(t->log, rc, "last");
	mdb_cursor_close(c);
	if (rc == 0)
		t->have_head = 1;
	return rc;
}

int
tl_log_last(struct tl_txn *t, uint64_t *seqp, uint8_t hash[TL_HASH_LEN])
{
	int rc;

	if (!t->have_head && (rc = load_head(t)) != 0)
		return rc;
	*seqp = t->head_seq;
	if (hash != NULL)
		memcpy(hash, t->head_hash, TL_HASH_LEN);
	return 0;
}

int
tl_stream_version(struct tl_txn *t, const char *stream, uint64_t *verp)
{
	MDB_cursor *c;
	MDB_val k, v;
	size_t n = 0;
	int rc;

	if (t->last_stream[0] != '\0' && strcmp(t->last_stream, stream) == 0) {
		*verp = t->last_ver;
		return 0;
	}
	k.mv_data = (void *)stream;
	k.mv_size = strlen(stream);
	if (k.mv_size == 0 || k.mv_size > TL_STREAM_MAX)
		return TL_EINVAL;
	if ((rc = mdb_cursor_open(t->txn, t->log->streams, &c)) != 0)
		return tl_log_mdberr(t->log, rc, "cursor");
	rc = mdb_cursor_get(c, &k, &v, MDB_SET);
	if (rc == 0)
		rc = mdb_cursor_count(c, &n);
	else if (rc == MDB_NOTFOUND)
		rc = 0;
	mdb_cursor_close(c);
	if (rc != 0)
		return tl_log_mdberr(t->log, rc, "stream");
	*verp = n;
	return 0;
}

static void
fresh_id(struct tl_log *log, uint8_t id[TL_ID_LEN])
{
	if (log->rpos + TL_ID_LEN > TL_RAND_POOL) {
		randombytes_buf(log->rpool, TL_RAND_POOL);
		log->rpos = 0;
	}
	memcpy(id, log->rpool + log->rpos, TL_ID_LEN);
	log->rpos += TL_ID_LEN;
}

int
tl_append(struct tl_txn *t, const struct tl_append *a, uint64_t *seqp,
    uint64_t *verp)
{
	struct tl_log *log = t->log;
	struct tl_event ev;
	struct timespec now;
	MDB_val k, v;
	uint8_t key[8], h[TL_HASH_LEN];
	uint64_t ver;
	size_t need, n;
	int rc;

	if (t->flags & TL_TXN_RDONLY)
		return TL_EINVAL;
	if (a->type == NULL || a->stream == NULL)
		return TL_EINVAL;
	if (a->body != NULL && (rc = tl_env_check_map(a->body,
	    a->body_len)) != 0)
		return rc;
	if (!t->have_head && (rc = load_head(t)) != 0)
		return rc;
	if ((rc = tl_stream_version(t, a->stream, &ver)) != 0)
		return rc;
	if (a->expect != TL_VER_ANY && a->expect != ver)
		return TL_ECONFLICT;
	if (a->cause > t->head_seq)
		return TL_EINVAL;

	memset(&ev, 0, sizeof(ev));
	ev.format = TL_ENV_FORMAT;
	ev.seq = t->head_seq + 1;
	clock_gettime(CLOCK_REALTIME, &now);
	ev.ts = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	ev.version = ver + 1;
	ev.cause = a->cause;
	fresh_id(log, ev.id);
	memcpy(ev.corr, a->corr != NULL ? a->corr : ev.id, TL_ID_LEN);
	memcpy(ev.prev, t->head_hash, TL_HASH_LEN);
	n = strlen(a->type);
	if (n == 0 || n > TL_TYPE_MAX)
		return n ? TL_ETOOBIG : TL_EINVAL;
	memcpy(ev.type, a->type, n + 1);
	n = strlen(a->stream);
	if (n > TL_STREAM_MAX)
		return TL_ETOOBIG;
	memcpy(ev.stream, a->stream, n + 1);
	n = a->actor != NULL ? strlen(a->actor) : 0;
	if (n > TL_ACTOR_MAX)
		return TL_ETOOBIG;
	memcpy(ev.actor, a->actor != NULL ? a->actor : "", n + 1);

	/* Encode after the hash slot so the record is written in one put. */
	for (;;) {
		rc = tl_env_encode(&ev, a->body, a->body_len,
		    t->buf ? t->buf + TL_HASH_LEN : NULL,
		    t->bufcap > TL_HASH_LEN ? t->bufcap - TL_HASH_LEN : 0,
		    &need);
		if (rc == 0)
			break;
		if (rc != TL_ETOOBIG || need + TL_HASH_LEN <= t->bufcap)
			return rc;
		{
			size_t cap = t->bufcap ? t->bufcap : 1024;
			uint8_t *nb;

			while (cap < need + TL_HASH_LEN)
				cap *= 2;
			if ((nb = realloc(t->buf, cap)) == NULL)
				return ENOMEM;
			t->buf = nb;
			t->bufcap = cap;
		}
	}
	/*
	 * The link: hash(prev || encoding).  With prev in the hash slot
	 * for a moment, one call covers both (cheaper than update twice).
	 */
	memcpy(t->buf, t->head_hash, TL_HASH_LEN);
	crypto_generichash_blake2b(h, TL_HASH_LEN, t->buf, TL_HASH_LEN + need,
	    NULL, 0);
	memcpy(t->buf, h, TL_HASH_LEN);

	if (t->ecur == NULL &&
	    (rc = mdb_cursor_open(t->txn, log->events, &t->ecur)) != 0)
		return tl_log_mdberr(log, rc, "cursor");
	if (t->scur == NULL &&
	    (rc = mdb_cursor_open(t->txn, log->streams, &t->scur)) != 0)
		return tl_log_mdberr(log, rc, "cursor");

	put_be64(key, ev.seq);
	k.mv_data = key;
	k.mv_size = 8;
	v.mv_data = t->buf;
	v.mv_size = need + TL_HASH_LEN;
	if ((rc = mdb_cursor_put(t->ecur, &k, &v, MDB_APPEND)) != 0)
		goto mdberr;
	k.mv_data = ev.stream;
	k.mv_size = strlen(ev.stream);
	v.mv_data = key;
	v.mv_size = 8;
	if ((rc = mdb_cursor_put(t->scur, &k, &v, MDB_NODUPDATA)) != 0)
		goto mdberr;

	t->head_seq = ev.seq;
	memcpy(t->head_hash, t->buf, TL_HASH_LEN);
	memcpy(t->last_stream, ev.stream, k.mv_size + 1);
	t->last_ver = ev.version;
	if (seqp != NULL)
		*seqp = ev.seq;
	if (verp != NULL)
		*verp = ev.version;
	return 0;
mdberr:
	if (rc == MDB_MAP_FULL)
		return rc;
	return tl_log_mdberr(log, rc, "append");
}

static int
record_decode(struct tl_log *log, const MDB_val *k, const MDB_val *v,
    struct tl_event *ev, char *why)
{
	int rc;

	(void)log;
	if (k->mv_size != 8 || v->mv_size <= TL_HASH_LEN) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "record of %zu bytes is "
			    "too short", (size_t)v->mv_size);
		return TL_ECORRUPT;
	}
	rc = tl_env_decode((const uint8_t *)v->mv_data + TL_HASH_LEN,
	    v->mv_size - TL_HASH_LEN, ev, why);
	if (rc != 0)
		return rc;
	memcpy(ev->hash, v->mv_data, TL_HASH_LEN);
	if (ev->seq != get_be64(k->mv_data)) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "record says seq %llu",
			    (unsigned long long)ev->seq);
		return TL_ECORRUPT;
	}
	return 0;
}

int
tl_log_get(struct tl_txn *t, uint64_t seq, struct tl_event *ev)
{
	MDB_val k, v;
	uint8_t key[8];
	int rc;

	put_be64(key, seq);
	k.mv_data = key;
	k.mv_size = 8;
	if ((rc = mdb_get(t->txn, t->log->events, &k, &v)) != 0)
		return tl_log_mdberr(t->log, rc, "get");
	return record_decode(t->log, &k, &v, ev, NULL);
}

struct tl_iter {
	struct tl_txn	*t;
	MDB_cursor	*cur;
	struct tl_filter f;
	char		*stream;
	char		*type;
	int		 started;
	int		 done;
	uint64_t	 errseq;
};

int
tl_iter_open(struct tl_txn *t, const struct tl_filter *f, struct tl_iter **out)
{
	struct tl_iter *it;
	int rc;

	*out = NULL;
	if ((it = calloc(1, sizeof(*it))) == NULL)
		return ENOMEM;
	it->t = t;
	if (f != NULL)
		it->f = *f;
	if (it->f.stream != NULL && (it->stream = strdup(it->f.stream)) == NULL)
		goto nomem;
	if (it->f.type != NULL && (it->type = strdup(it->f.type)) == NULL)
		goto nomem;
	rc = mdb_cursor_open(t->txn, it->stream ? t->log->streams :
	    t->log->events, &it->cur);
	if (rc != 0) {
		rc = tl_log_mdberr(t->log, rc, "cursor");
		tl_iter_close(it);
		return rc;
	}
	*out = it;
	return 0;
nomem:
	tl_iter_close(it);
	return ENOMEM;
}

void
tl_iter_close(struct tl_iter *it)
{
	if (it == NULL)
		return;
	if (it->cur != NULL)
		mdb_cursor_close(it->cur);
	free(it->stream);
	free(it->type);
	free(it);
}

uint64_t
tl_iter_errseq(const struct tl_iter *it)
{
	return it->errseq;
}

/* Positions on the next candidate record; fills k and v of the event. */
static int
iter_step(struct tl_iter *it, MDB_val *k, MDB_val *v)
{
	struct tl_log *log = it->t->log;
	uint8_t key[8];
	int rc;

	if (it->stream == NULL) {
		if (!it->started) {
			put_be64(key, it->f.from);
			k->mv_data = key;
			k->mv_size = 8;
			rc = mdb_cursor_get(it->cur, k, v, MDB_SET_RANGE);
		} else
			rc = mdb_cursor_get(it->cur, k, v, MDB_NEXT);
		it->started = 1;
		return rc;
	}

	/* By stream: walk the stream's duplicates, fetch each event. */
	for (;;) {
		MDB_val sk, sv;

		if (!it->started) {
			sk.mv_data = it->stream;
			sk.mv_size = strlen(it->stream);
			rc = mdb_cursor_get(it->cur, &sk, &sv, MDB_SET);
			if (rc == 0 && it->f.from > 0) {
				put_be64(key, it->f.from);
				sv.mv_data = key;
				sv.mv_size = 8;
				rc = mdb_cursor_get(it->cur, &sk, &sv,
				    MDB_GET_BOTH_RANGE);
			}
		} else
			rc = mdb_cursor_get(it->cur, &sk, &sv, MDB_NEXT_DUP);
		it->started = 1;
		if (rc != 0)
			return rc;
		if (sv.mv_size != 8)
			return MDB_CORRUPTED;
		k->mv_data = sv.mv_data;
		k->mv_size = 8;
		rc = mdb_get(it->t->txn, log->events, k, v);
		return rc == MDB_NOTFOUND ? MDB_CORRUPTED : rc;
	}
}

int
tl_iter_next(struct tl_iter *it, struct tl_event *ev)
{
	MDB_val k, v;
	int rc;

	if (it->done)
		return TL_EEOF;
	for (;;) {
		rc = iter_step(it, &k, &v);
		if (rc == MDB_NOTFOUND) {
			it->done = 1;
			return TL_EEOF;
		}
		if (rc != 0)
			return tl_log_mdberr(it->t->log, rc, "iterate");
		if (k.mv_size == 8 && it->f.to != 0 &&
		    get_be64(k.mv_data) > it->f.to) {
			it->done = 1;
			return TL_EEOF;
		}
		if ((rc = record_decode(it->t->log, &k, &v, ev, NULL)) != 0) {
			it->errseq = k.mv_size == 8 ? get_be64(k.mv_data) : 0;
			return rc;
		}
		if (it->type != NULL && fnmatch(it->type, ev->type, 0) != 0)
			continue;
		return 0;
	}
}

/* hash(prev || raw), as tl_append computes it. */
static void
chain_hash(const uint8_t prev[TL_HASH_LEN], const uint8_t *raw, size_t len,
    uint8_t out[TL_HASH_LEN])
{
	crypto_generichash_blake2b_state hs;
	uint8_t one[4096];

	/* One call over a copy beats two updates for the usual sizes. */
	if (len <= sizeof(one) - TL_HASH_LEN) {
		memcpy(one, prev, TL_HASH_LEN);
		memcpy(one + TL_HASH_LEN, raw, len);
		crypto_generichash_blake2b(out, TL_HASH_LEN, one,
		    TL_HASH_LEN + len, NULL, 0);
		return;
	}
	crypto_generichash_blake2b_init(&hs, NULL, 0, TL_HASH_LEN);
	crypto_generichash_blake2b_update(&hs, prev, TL_HASH_LEN);
	crypto_generichash_blake2b_update(&hs, raw, len);
	crypto_generichash_blake2b_final(&hs, out, TL_HASH_LEN);
}

/*
 * Verification hashes in parallel.  Every record stores its own hash,
 * so hash(stored hash of i-1 || encoding of i) can be checked for any i
 * independently; the links (prev == stored hash of i-1) are checked in
 * order, and together they are exactly the sequential chain check.  The
 * cursor and decoding stay on this thread (a transaction belongs to one
 * thread); helpers only read the map, which stays put for the
 * transaction.  Blake2b is most of the cost of a replay.
 */
#define VERIFY_BATCH	4096
#define VERIFY_THREADS	4

struct vjob {
	const uint8_t	*prev;		/* the stored hash before, in the map */
	const uint8_t	*raw;
	size_t		 len;
	const uint8_t	*hash;		/* stored */
	int		 ok;
};

struct vslice {
	struct vjob	*jobs;
	size_t		 n;
};

static void *
vhash(void *arg)
{
	struct vslice *s = arg;
	uint8_t h[TL_HASH_LEN];
	size_t i;

	for (i = 0; i < s->n; i++) {
		chain_hash(s->jobs[i].prev, s->jobs[i].raw, s->jobs[i].len, h);
		s->jobs[i].ok = memcmp(h, s->jobs[i].hash, TL_HASH_LEN) == 0;
	}
	return NULL;
}

/* Hashes jobs[0..n) on up to nthr threads, this one included. */
static void
vhash_all(struct vjob *jobs, size_t n, int nthr)
{
	struct vslice sl[VERIFY_THREADS];
	pthread_t tid[VERIFY_THREADS];
	int started[VERIFY_THREADS];
	size_t per, at = 0;
	int i;

	if (n < 256)
		nthr = 1;
	per = (n + (size_t)nthr - 1) / (size_t)nthr;
	for (i = 0; i < nthr; i++) {
		sl[i].jobs = jobs + at;
		sl[i].n = n - at < per ? n - at : per;
		at += sl[i].n;
		started[i] = i > 0 &&
		    pthread_create(&tid[i], NULL, vhash, &sl[i]) == 0;
	}
	vhash(&sl[0]);
	for (i = 1; i < nthr; i++) {
		if (started[i])
			pthread_join(tid[i], NULL);
		else
			vhash(&sl[i]);
	}
}

int
tl_log_verify(struct tl_txn *t, uint64_t *countp, uint64_t *badp, char *why)
{
	static const uint8_t zero[TL_HASH_LEN];
	MDB_cursor *c;
	MDB_val k, v;
	struct tl_event ev;
	struct vjob *jobs;
	const uint8_t *prev = zero;
	char ewhy[TL_WHY_MAX];
	uint64_t expect = 1, n = 0, ebad = 0;
	size_t nj, i;
	long ncpu;
	int rc, erc = 0, op = MDB_FIRST, nthr, done = 0;

	*badp = 0;
	if (why != NULL)
		why[0] = '\0';
	ewhy[0] = '\0';
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	nthr = ncpu < 1 ? 1 : ncpu > VERIFY_THREADS ? VERIFY_THREADS :
	    (int)ncpu;
	if ((jobs = malloc(VERIFY_BATCH * sizeof(*jobs))) == NULL)
		return ENOMEM;
	if ((rc = mdb_cursor_open(t->txn, t->log->events, &c)) != 0) {
		free(jobs);
		return tl_log_mdberr(t->log, rc, "cursor");
	}
	while (!done) {
		/* A batch: read, decode and link in order. */
		for (nj = 0; nj < VERIFY_BATCH; nj++, op = MDB_NEXT) {
			rc = mdb_cursor_get(c, &k, &v, op);
			if (rc == MDB_NOTFOUND) {
				done = 1;
				break;
			}
			ebad = expect + nj;
			if (rc != 0) {
				erc = tl_log_mdberr(t->log, rc, "verify");
				break;
			}
			if (k.mv_size != 8 || get_be64(k.mv_data) != ebad) {
				snprintf(ewhy, sizeof(ewhy), "sequence gap: "
				    "expected %llu", (unsigned long long)ebad);
				erc = TL_ECORRUPT;
				break;
			}
			if ((erc = record_decode(t->log, &k, &v, &ev,
			    ewhy)) != 0)
				break;
			if (memcmp(ev.prev, prev, TL_HASH_LEN) != 0) {
				snprintf(ewhy, sizeof(ewhy), "link to the "
				    "previous event does not match");
				erc = TL_ECORRUPT;
				break;
			}
			jobs[nj].prev = prev;
			jobs[nj].raw = ev.raw;
			jobs[nj].len = ev.raw_len;
			jobs[nj].hash = v.mv_data;
			prev = v.mv_data;
		}
		if (erc != 0)
			done = 1;
		/* Then the hashes; the first failure, in order, wins. */
		vhash_all(jobs, nj, nthr);
		for (i = 0; i < nj && jobs[i].ok; i++)
			;
		n += i;
		if (i < nj) {
			*badp = expect + i;
			if (why != NULL)
				snprintf(why, TL_WHY_MAX, "hash does not match "
				    "the content");
			rc = TL_ECORRUPT;
			goto out;
		}
		expect += nj;
	}
	rc = erc;
	if (rc != 0) {
		*badp = ebad;
		if (why != NULL)
			memcpy(why, ewhy, TL_WHY_MAX);
	}
out:
	mdb_cursor_close(c);
	free(jobs);
	if (countp != NULL)
		*countp = n;
	return rc;
}

int
tl_ckpt_get(struct tl_txn *t, const char *name, uint64_t *seqp)
{
	MDB_val k, v;
	int rc;

	k.mv_data = (void *)name;
	k.mv_size = strlen(name);
	if (k.mv_size == 0 || k.mv_size > TL_CKPT_NAME_MAX)
		return TL_EINVAL;
	rc = mdb_get(t->txn, t->log->ckpts, &k, &v);
	if (rc == MDB_NOTFOUND) {
		*seqp = 0;
		return TL_ENOTFOUND;
	}
	if (rc != 0)
		return tl_log_mdberr(t->log, rc, "checkpoint");
	if (v.mv_size != 8)
		return TL_ECORRUPT;
	*seqp = get_be64(v.mv_data);
	return 0;
}

int
tl_ckpt_set(struct tl_txn *t, const char *name, uint64_t seq)
{
	MDB_val k, v;
	uint8_t val[8];
	int rc;

	k.mv_data = (void *)name;
	k.mv_size = strlen(name);
	if (k.mv_size == 0 || k.mv_size > TL_CKPT_NAME_MAX)
		return TL_EINVAL;
	put_be64(val, seq);
	v.mv_data = val;
	v.mv_size = 8;
	rc = mdb_put(t->txn, t->log->ckpts, &k, &v, 0);
	if (rc == MDB_MAP_FULL)
		return rc;
	return tl_log_mdberr(t->log, rc, "checkpoint");
}

int
tl_ckpt_del(struct tl_txn *t, const char *name)
{
	MDB_val k;

	k.mv_data = (void *)name;
	k.mv_size = strlen(name);
	return tl_log_mdberr(t->log, mdb_del(t->txn, t->log->ckpts, &k, NULL),
	    "checkpoint");
}

int
tl_ckpt_each(struct tl_txn *t, tl_ckpt_fn fn, void *arg)
{
	MDB_cursor *c;
	MDB_val k, v;
	char name[TL_CKPT_NAME_MAX + 1];
	int rc, mrc, op = MDB_FIRST;

	if ((rc = mdb_cursor_open(t->txn, t->log->ckpts, &c)) != 0)
		return tl_log_mdberr(t->log, rc, "cursor");
	for (rc = 0;; op = MDB_NEXT) {
		if ((mrc = mdb_cursor_get(c, &k, &v, op)) != 0)
			break;
		if (k.mv_size > TL_CKPT_NAME_MAX || v.mv_size != 8) {
			rc = TL_ECORRUPT;
			break;
		}
		memcpy(name, k.mv_data, k.mv_size);
		name[k.mv_size] = '\0';
		if ((rc = fn(name, get_be64(v.mv_data), arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	if (rc == 0 && mrc != 0 && mrc != MDB_NOTFOUND)
		rc = tl_log_mdberr(t->log, mrc, "checkpoints");
	return rc;
}
