/*
 * follow.h - tallyd --follow: a standby that copies the leader's record
 * from its RabbitMQ replication stream into its own log (follow.c).
 */
#ifndef TALLYD_FOLLOW_H
#define TALLYD_FOLLOW_H

#include <signal.h>
#include <stdarg.h>

struct tl_follow_opts {
	const char	*home;
	const char	*url;		/* amqp[s]://HOST[:PORT][/VHOST] */
	const char	*stream;
	const char	*user;		/* NULL: guest */
	const char	*ca;		/* amqps: the broker's CA; NULL: system */
	int		 secret;	/* read the password from stdin */
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
