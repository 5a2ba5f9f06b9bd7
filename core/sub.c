/*
 * sub.c - subscriptions: read the log in order, wait on inotify.
 *
 * Each tl_sub_next() reads from a read transaction kept between calls
 * (so a burst of events costs one transaction per SUB_BATCH), and at
 * the end of what that snapshot shows it ends the transaction: a new
 * one is begun at once when the old one predates this call, and
 * otherwise the subscriber sleeps until the log directory is modified.
 * The inotify watch exists before any transaction is begun, so a
 * commit that a snapshot did not see always leaves an event behind
 * it: no wakeup is lost, at worst one is spurious.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "sub.h"

/* Events read per read transaction before it is renewed. */
#define SUB_BATCH	4096
/* Polling period when inotify is unavailable, ms. */
#define SUB_POLL_MS	50
/* Looks after a wakeup that showed nothing yet: 50 us, 100 us, … 100 ms. */
#define SUB_SETTLE	12
#define SUB_SETTLE_US	50
/* The longest sleep on inotify before looking anyway, ms. */
#define SUB_SAFETY_MS	1000

struct tl_sub {
	struct tl_log	*log;
	int		 own_log;
	struct tl_txn	*t;
	struct tl_iter	*it;
	unsigned	 batch;		/* events read in t */
	uint64_t	 pos;		/* last seq examined */
	uint64_t	 head;
	uint8_t		 hash[TL_HASH_LEN];	/* of event pos */
	int		 have_hash;
	char		*type;
	char		 ckpt[TL_CKPT_NAME_MAX + 1];	/* "" if none */
	int		 ino;
	int		 settle;	/* looks left after a wakeup */
	unsigned	 settle_us;
};

uint64_t
tl_sub_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
tl_sub_deadline(uint64_t ms)
{
	uint64_t now = tl_sub_clock();

	if (ms > (UINT64_MAX - now) / 1000000u)
		return TL_SUB_FOREVER;
	return now + ms * 1000000u;
}

static int
name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > TL_SUB_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '@' || c == '/'))
			return 0;
	}
	return 1;
}

static void
end_txn(struct tl_sub *s)
{
	tl_iter_close(s->it);
	s->it = NULL;
	tl_log_abort(s->t);
	s->t = NULL;
	s->batch = 0;
}

static int
begin_txn(struct tl_sub *s)
{
	struct tl_filter f = { 0 };
	int rc;

	if ((rc = tl_log_begin(s->log, TL_TXN_RDONLY, &s->t)) != 0)
		return rc;
	tl_log_last(s->t, &s->head, NULL);
	f.from = s->pos + 1;
	if ((rc = tl_iter_open(s->t, &f, &s->it)) != 0) {
		end_txn(s);
		return rc;
	}
	s->batch = 0;
	return 0;
}

static int
setup(struct tl_sub *s, const struct tl_sub_opts *o)
{
	struct tl_txn *t;
	uint64_t seq = 0;
	int rc;

	if (o->from > 1)
		s->pos = o->from - 1;
	if (o->type != NULL && (s->type = strdup(o->type)) == NULL)
		return ENOMEM;
	/* The watch first: no commit after it can go unnoticed. */
	if ((s->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) >= 0 &&
	    inotify_add_watch(s->ino, tl_log_dir(s->log), IN_MODIFY) < 0) {
		close(s->ino);
		s->ino = -1;
	}
	if (o->checkpoint == NULL)
		return 0;
	if (!name_ok(o->checkpoint))
		return TL_EINVAL;
	snprintf(s->ckpt, sizeof(s->ckpt), "%s%s", TL_SUB_CKPT_PREFIX,
	    o->checkpoint);
	if ((rc = tl_log_begin(s->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	rc = tl_ckpt_get(t, s->ckpt, &seq);
	tl_log_abort(t);
	if (rc == 0)
		s->pos = seq;
	else if (rc != TL_ENOTFOUND)
		return rc;
	return 0;
}

int
tl_sub_attach(struct tl_log *log, const struct tl_sub_opts *o,
    struct tl_sub **out)
{
	static const struct tl_sub_opts none = TL_SUB_OPTS_INIT;
	struct tl_sub *s;
	int rc;

	*out = NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return ENOMEM;
	s->log = log;
	s->ino = -1;
	if ((rc = setup(s, o ? o : &none)) != 0) {
		tl_sub_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

int
tl_sub_open(const char *logdir, const struct tl_sub_opts *o,
    struct tl_sub **out)
{
	struct tl_log *log;
	int rc;

	*out = NULL;
	rc = tl_log_open(logdir, (o && (o->flags & TL_SUB_RDONLY)) ?
	    TL_LOG_RDONLY : 0, &log);
	if (rc != 0)
		return rc;
	if ((rc = tl_sub_attach(log, o, out)) != 0) {
		tl_log_close(log);
		return rc;
	}
	(*out)->own_log = 1;
	return 0;
}

void
tl_sub_close(struct tl_sub *s)
{
	if (s == NULL)
		return;
	end_txn(s);
	if (s->ino >= 0)
		close(s->ino);
	if (s->own_log)
		tl_log_close(s->log);
	free(s->type);
	free(s);
}

/*
 * Sleeps until the log directory changes or the deadline passes, and at
 * most SUB_SAFETY_MS: returning 0 means "look again".
 */
static int
wait_change(struct tl_sub *s, uint64_t deadline, int *woke)
{
	struct pollfd pf;
	uint64_t now;
	int ms, r;
	char buf[4096];

	*woke = 0;
	for (;;) {
		now = tl_sub_clock();
		if (deadline == TL_SUB_NOWAIT || now >= deadline)
			return TL_ETIMEDOUT;
		if (deadline == TL_SUB_FOREVER)
			ms = -1;
		else {
			uint64_t left = (deadline - now + 999999u) / 1000000u;

			ms = left > INT_MAX ? INT_MAX : (int)left;
		}
		if (s->ino < 0) {
			if (ms < 0 || ms > SUB_POLL_MS)
				ms = SUB_POLL_MS;
			r = poll(NULL, 0, ms);
			if (r < 0 && errno == EINTR)
				return EINTR;
			return 0;
		}
		if (ms < 0 || ms > SUB_SAFETY_MS)
			ms = SUB_SAFETY_MS;
		pf.fd = s->ino;
		pf.events = POLLIN;
		pf.revents = 0;
		r = poll(&pf, 1, ms);
		if (r < 0)
			return errno == EINTR ? EINTR : errno;
		if (r == 0)
			return 0;	/* a look now and then, whatever */
		while (read(s->ino, buf, sizeof(buf)) > 0)
			;
		*woke = 1;
		return 0;
	}
}

/* Checks that ev follows the position with no gap and a sound link. */
static int
follows(struct tl_sub *s, const struct tl_event *ev)
{
	struct tl_event prev;

	if (ev->seq != s->pos + 1)
		return TL_ECORRUPT;
	if (!s->have_hash && ev->seq > 1) {
		if (tl_log_get(s->t, ev->seq - 1, &prev) != 0)
			return TL_ECORRUPT;
		memcpy(s->hash, prev.hash, TL_HASH_LEN);
		s->have_hash = 1;
	}
	if (ev->seq == 1) {
		static const uint8_t zero[TL_HASH_LEN];

		return memcmp(ev->prev, zero, TL_HASH_LEN) == 0 ? 0 :
		    TL_ECORRUPT;
	}
	return memcmp(ev->prev, s->hash, TL_HASH_LEN) == 0 ? 0 : TL_ECORRUPT;
}

int
tl_sub_next(struct tl_sub *s, uint64_t deadline, struct tl_event *ev)
{
	int rc, fresh = 0, woke;

	if (s->t != NULL && s->batch >= SUB_BATCH)
		end_txn(s);
	for (;;) {
		if (s->t == NULL) {
			if ((rc = begin_txn(s)) != 0)
				return rc;
			fresh = 1;
		}
		rc = tl_iter_next(s->it, ev);
		if (rc == 0) {
			s->batch++;
			if ((rc = follows(s, ev)) != 0) {
				end_txn(s);
				return rc;
			}
			s->pos = ev->seq;
			memcpy(s->hash, ev->hash, TL_HASH_LEN);
			s->have_hash = 1;
			if (ev->seq > s->head)
				s->head = ev->seq;
			s->settle = 0;
			if (s->type != NULL && fnmatch(s->type, ev->type, 0) != 0)
				continue;
			return 0;
		}
		end_txn(s);
		if (rc != TL_EEOF)
			return rc;
		/* A snapshot older than this call: look again first. */
		if (!fresh)
			continue;
		/*
		 * LMDB writes the meta page (our wakeup) a moment before it
		 * publishes the new transaction id to readers: a wakeup that
		 * showed nothing is followed by a few quick looks.
		 */
		if (s->settle > 0) {
			uint64_t now = tl_sub_clock(), until;
			struct timespec ts;
			struct pollfd pf;
			char buf[4096];
			int r;

			if (deadline == TL_SUB_NOWAIT || now >= deadline)
				return TL_ETIMEDOUT;
			until = now + (uint64_t)s->settle_us * 1000u;
			if (until > deadline)
				until = deadline;
			s->settle--;
			s->settle_us *= 2;
			ts.tv_sec = (time_t)((until - now) / 1000000000u);
			ts.tv_nsec = (long)((until - now) % 1000000000u);
			/* The next write of the commit (its meta page) ends it. */
			pf.fd = s->ino;
			pf.events = POLLIN;
			pf.revents = 0;
			r = ppoll(&pf, s->ino >= 0 ? 1 : 0, &ts, NULL);
			if (r < 0 && errno == EINTR)
				return EINTR;
			if (r > 0) {
				while (read(s->ino, buf, sizeof(buf)) > 0)
					;
				s->settle_us = SUB_SETTLE_US;
			}
			continue;
		}
		if ((rc = wait_change(s, deadline, &woke)) != 0)
			return rc;
		if (woke) {
			s->settle = SUB_SETTLE;
			s->settle_us = SUB_SETTLE_US;
		}
		fresh = 0;
	}
}

static int
commit_cb(struct tl_txn *t, void *arg)
{
	struct tl_sub *s = arg;

	return tl_ckpt_set(t, s->ckpt, s->pos);
}

int
tl_sub_commit(struct tl_sub *s)
{
	if (s->ckpt[0] == '\0')
		return TL_EINVAL;
	/* The map may be grown by the write: no read txn may be open. */
	end_txn(s);
	return tl_log_write(s->log, commit_cb, s);
}

void
tl_sub_release(struct tl_sub *s)
{
	end_txn(s);
}

uint64_t
tl_sub_position(const struct tl_sub *s)
{
	return s->pos;
}

uint64_t
tl_sub_head(const struct tl_sub *s)
{
	return s->head > s->pos ? s->head : s->pos;
}

int
tl_sub_fd(const struct tl_sub *s)
{
	return s->ino;
}
