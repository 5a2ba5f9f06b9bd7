/*
 * follow.h - a copy of the leader's record from its RabbitMQ replication
 * stream, screened and appended to a log of its own (follow.c): what
 * tallyd --follow runs on a standby's home, and tally-board --record in
 * its store.
 */
#ifndef TALLYD_FOLLOW_H
#define TALLYD_FOLLOW_H

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>

struct tl_follow_opts {
	const char	*home;
	const char	*url;		/* amqp[s]://HOST[:PORT][/VHOST] */
	const char	*stream;
	const char	*user;		/* NULL: guest */
	const char	*ca;		/* amqps: the broker's CA; NULL: system */
	int		 secret;	/* read the password from stdin */
	const char	*password;	/* or this one (secret 0, user set) */
	const uint8_t	*leader_pk;	/* the leader's signing key, or NULL:
					 * HOME/leader.key, the master key's */
	const char	*report_to;	/* the leader's acks queue, where its
					 * position is reported (epoch.h,
					 * tl_ep_standby_put); NULL: not */
	const char	*name;		/* the standby's, in the report */
	unsigned	 idle_ms;	/* 0, or: return 0 once nothing came
					 * for so long (1 if the broker could
					 * not be reached by then) */
	void		(*logf)(int level, const char *fmt, va_list ap);
};

/*
 * Follows until *stop is set (0) or the record cannot be trusted: a gap,
 * a broken link, an event that does not hash to its hash, or a past
 * that differs from this log's (5, the sequence named) -- with the
 * master key in the home, only in messages that carry the leader's
 * authenticator; any other message is passed over, counted, never a
 * reason to stop (follow.c).  1 on other failures.  Reconnects with
 * backoff while the broker is away.
 */
/*
 * Whether home is a standby's (reactors/epoch.h, tl_ep_standing: the standing
 * its log records; the marker file for a home of before) into
 * *standby.  Opens the log read-only and closes it: call it before
 * anything else in the process opens that log.  Errors: the log's.
 */
int	tl_follow_is_standby(const char *home, int *standby);

int	tl_follow_run(const struct tl_follow_opts *o,
	    volatile sig_atomic_t *stop);

#endif
