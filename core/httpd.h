/*
 * httpd.h - a small HTTP server of documents a program's loop
 * publishes: tallyd's and tally-node's --metrics (core/metrics.h),
 * tally-board's --serve.
 *
 * The server never reads the program's state itself: the loop owns it
 * and publishes whole documents (tl_httpd_publish), which the server's
 * threads copy out under a lock.  A document may ask for freshness
 * (fresh_ms): a request finding it older asks the loop for a new one
 * (the eventfd tl_httpd_fd, which the loop polls) and waits at most
 * wait_ms, else serves the older one.  An events path, when given,
 * answers a Server-Sent Events stream: "event: change" with the number
 * of documents published so far, at once and after every publish, and
 * a comment every TL_HTTPD_BEAT_S while nothing changes (so proxies and
 * the idle timeout keep it open).  A query prefix, when given, takes
 * questions the loop answers one at a time (a page made on request).
 *
 * Hostile clients: at most TL_HTTPD_CONNS connections (an events stream
 * counts as one), TL_HTTPD_PER_IP from one address, each closed after
 * TL_HTTPD_IDLE_S without progress, a request's headers within
 * TL_HTTPD_MEM bytes (else 431), any body discarded, a thread per
 * connection so one slow client blocks no other; nothing but the
 * configured paths is served (404; a path is compared whole, so no
 * "..", query or encoding reaches anything), nothing but GET and HEAD
 * (405).  It listens on loopback unless told otherwise: put a proxy
 * with TLS and authentication in front to serve further.
 *
 * Ownership: conf and the strings it points to are borrowed for the
 * server's life; a published text is the server's from the call on.
 * Errors: TL_EINVAL (a bad address), TL_EUNREACH (it cannot listen),
 * ENOMEM; why (cap bytes) says which, naming conf->flag.
 */
#ifndef TL_HTTPD_H
#define TL_HTTPD_H

#include <stddef.h>
#include <stdint.h>

#define TL_HTTPD_CONNS		64
#define TL_HTTPD_PER_IP		16
#define TL_HTTPD_IDLE_S		10
#define TL_HTTPD_BEAT_S		4
#define TL_HTTPD_MEM		(32u << 10)
#define TL_HTTPD_DOCS		4

struct tl_httpd_doc {
	const char	*path;		/* "/metrics", "/" */
	const char	*type;		/* its Content-Type */
	unsigned	 fresh_ms;	/* 0: served as published */
	unsigned	 wait_ms;	/* for a fresh one, at most */
	/*
	 * Called with the copy being served (cap bytes free after len),
	 * its age in seconds: appends to it, returns the bytes added
	 * (tallyd's tally_metrics_age_seconds).  NULL: nothing.
	 */
	size_t		(*trailer)(char *end, size_t cap, double age_s);
	size_t		 trailer_max;
	/*
	 * Its publishes are not announced on the events stream: a
	 * document built only when asked for (fresh_ms), whose making
	 * is no change of the program's state.
	 */
	int		 quiet;
};

struct tl_httpd_conf {
	const char			*flag;	/* "--metrics": in errors */
	const struct tl_httpd_doc	*docs;
	size_t				 ndocs;	/* <= TL_HTTPD_DOCS */
	/* The answer to "/" when no document is "/" (text). */
	const char			*index;
	/* The Server-Sent Events path ("/events"), or NULL. */
	const char			*events;
	/*
	 * A path prefix ("/history/") whose requests the loop answers
	 * one at a time (tl_httpd_query, tl_httpd_answer): the rest of
	 * the path, at most TL_HTTPD_QUERY_MAX bytes, is the question.
	 * NULL: none.  A request waits query_ms for its answer, else
	 * gets 503.
	 */
	const char			*query;
	const char			*query_type;	/* Content-Type */
	unsigned			 query_ms;
};

#define TL_HTTPD_QUERY_MAX	255

struct tl_httpd;

/*
 * Listens on addr: "HOST:PORT", "[V6]:PORT", or "PORT" alone for
 * 127.0.0.1.  *out is the caller's to tl_httpd_stop.
 */
int	tl_httpd_start(const char *addr, const struct tl_httpd_conf *conf,
	    struct tl_httpd **out, char *why);
/* Whether addr is one tl_httpd_start takes (flag names it in why). */
int	tl_httpd_addr_ok(const char *flag, const char *addr, char *why);
/* Ends every connection and the events streams, and frees h. */
void	tl_httpd_stop(struct tl_httpd *h);
/* The descriptor the loop polls: readable when a request waits. */
int	tl_httpd_fd(const struct tl_httpd *h);
/* Drains tl_httpd_fd; 1 when a request wants a fresh document. */
int	tl_httpd_wanted(struct tl_httpd *h);
/* Document i's new text (malloc'd, len bytes): h owns it from now on. */
void	tl_httpd_publish(struct tl_httpd *h, size_t i, char *text,
	    size_t len);
/*
 * Document i's text is still current (nothing changed since it was
 * made): its age starts again and the requests waiting for a fresh one
 * are served it, as after a publish, without the copy.
 */
void	tl_httpd_touch(struct tl_httpd *h, size_t i);
/*
 * The question a request waits on the loop to answer (the rest of the
 * path after conf->query, NUL-terminated, into name, cap bytes): 1 when
 * one waits unanswered, else 0.  The loop answers each with
 * tl_httpd_answer: status (200, 404, ...) and text (malloc'd, len
 * bytes: h's from the call on; NULL for an empty body).
 */
int	tl_httpd_query(struct tl_httpd *h, char *name, size_t cap);
void	tl_httpd_answer(struct tl_httpd *h, unsigned status, char *text,
	    size_t len);
/* Whether a request waits for a fresh document i now. */
int	tl_httpd_waiting(struct tl_httpd *h, size_t i);
/* The events streams open now. */
unsigned	tl_httpd_streams(struct tl_httpd *h);

#endif
