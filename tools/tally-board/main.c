/*
 * tally-board - an example reporting context.
 *
 * It follows tally's record — locally through the subscription API
 * (core/sub.h) or over AMQP from the publisher's exchange — and keeps
 * a store of its own (tools/tally-board/store.c), built from the events
 * alone and committed together with the position it was built to.  It
 * renders the mesh as a live terminal page or a static HTML page with
 * the graph drawn by Graphviz.  See docs/reporting.md.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/envelope.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "core/secret.h"
#include "core/sub.h"
#include "core/amqp.h"
#include "core/httpd.h"
#include "reactors/epoch.h"
#include "board.h"

#define EXIT_OK		0
#define EXIT_FAIL	1
#define EXIT_USAGE	2

static const char usage[] =
"usage: tally-board [--home DIR] [options]            follow the local log\n"
"       tally-board --amqp URL --user USER [options]   follow the exchange\n"
"       tally-board --record URL --leader-key KEY --user USER [options]\n"
"                                                      follow the record\n"
"\n"
"Builds its own view of the mesh from tally's events and renders it.\n"
"\n"
"  --store DIR         the board's own store (default\n"
"                      $XDG_STATE_HOME/tally-board or\n"
"                      ~/.local/state/tally-board; made 0700 with its\n"
"                      missing parents); delete it to rebuild\n"
"  --follow            keep following: a live page on a terminal (and\n"
"                      --html rewritten on changes, at most once a second);\n"
"                      SIGINT or SIGTERM end it\n"
"  --html FILE         write a static HTML page (the graph as SVG when\n"
"                      Graphviz's dot is installed)\n"
"  --serve ADDR        serve the page over HTTP at ADDR (HOST:PORT, or PORT\n"
"                      for 127.0.0.1): /, /view.json, and /events, whose\n"
"                      Server-Sent Events bring each change to open pages;\n"
"                      implies --follow\n"
"  --json              print the view as one JSON document\n"
"  --dot               print the mesh as Graphviz source\n"
"  --print             print each event received: SEQ ID TYPE, and\n"
"                      \"duplicate\" or \"gap\" when it is one\n"
"  --quiet             no page on standard output\n"
"Local source:\n"
"  --home DIR          tally's home (default $TALLY_HOME, …); the board only\n"
"                      reads the log\n"
"AMQP source (the publisher's JSON format):\n"
"  --amqp URL          amqp[s]://HOST[:PORT][/VHOST]\n"
"  --user USER         with the password from --password-file FILE or\n"
"                      $TALLY_BOARD_AMQP_PASSWORD\n"
"  --exchange NAME     default tally.events\n"
"  --queue NAME        the board's durable queue (default tally.board),\n"
"                      bound to every routing key\n"
"  --ca FILE, --no-verify   TLS (amqps://)\n"
"Record source (the leader's replication stream, each message's signature\n"
"checked; the states are tally status's, as with the local log):\n"
"  --record URL        amqp[s]://HOST[:PORT][/VHOST]; copied into\n"
"                      STORE/record (--user, --password-file, --ca as above)\n"
"  --stream NAME       default tally.record\n"
"  --leader-key KEY    the leader's signing key: 64 hex digits or a file\n"
"                      holding them (tally publish status prints it)\n"
"Without --follow, the AMQP and record sources stop once nothing came:\n"
"  --idle SECONDS      that long (default 2)\n";

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct board {
	struct bd_store	*st;
	const char	*store;
	struct tl_httpd	*srv;		/* --serve */
	struct bd_mirror *mirror;	/* the local source: status's states */
	struct bd_kept	*kept;		/* following: the documents, kept */
	int		 follow, json, dot, print, quiet, tty;
	const char	*html;
	char		 source[1400];
	uint64_t	 last_render;
	int		 changed;	/* since the last rendering */
	uint64_t	 changes;	/* batches applied, ever */
	uint64_t	 view_at;	/* changes when /view.json was made */
	struct bd_record *record;	/* --record: the copy, or NULL */
	json_t		*standbys;	/* the home's tl_ep_followers_doc */
	uint64_t	 copy_passed;	/* --record: messages passed over */
	json_t		*record_copy;	/* and the last one's why */
	uint64_t	 standbys_ms;	/* when it was last shown */
};

static void
mark_changed(struct board *bd)
{
	bd->changed = 1;
	bd->changes++;
}

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
warnx_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
warnx_(const char *fmt, ...)
{
	va_list ap;

	fputs("tally-board: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * The served documents (--serve): the page, published on every change
 * (throttled), and the view, which holds every document and is made
 * only when a request asks for it (its making costs what the mesh
 * weighs; the page is bounded): a request finds it stale at once
 * (fresh_ms 1) and waits for the loop, which makes it again when
 * something changed since and otherwise says the last one is current.
 */
enum { DOC_PAGE, DOC_VIEW };
static const struct tl_httpd_doc serve_docs[] = {
	{ "/", "text/html; charset=utf-8", 0, 0, NULL, 0, 0 },
	{ "/view.json", "application/json", 1, 10000, NULL, 0, 1 },
};
static const struct tl_httpd_conf serve_conf = {
	"--serve", serve_docs, 2, NULL, "/events", "/history/",
	"text/html; charset=utf-8", 10000
};

/*
 * The store's documents with status's states (a new reference); a page
 * gets states on the rows it shows only.  A following board keeps the
 * documents, reading again only what the batches since touched.
 */
static json_t *
snapshot(struct board *bd, int page)
{
	struct timespec now;
	uint64_t now_ns;
	json_t *snap, *st;

	if (bd_store_begin(bd->st, 1) != 0)
		return NULL;
	if (bd->follow) {
		json_t *touched = bd_store_touched(bd->st);

		if (bd->kept != NULL && bd_kept_update(bd->kept, bd->st,
		    touched) != 0) {
			bd_kept_free(bd->kept);
			bd->kept = NULL;
		}
		if (bd->kept == NULL) {
			json_object_clear(touched);
			if (bd_kept_load(bd->st, &bd->kept) != 0)
				bd->kept = NULL;
		}
	}
	snap = bd_snapshot(bd->st, bd->kept);
	bd_store_abort(bd->st);
	if (snap == NULL || bd->mirror == NULL)
		return snap;
	clock_gettime(CLOCK_REALTIME, &now);
	now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	if ((st = bd_mirror_status(bd->mirror, now_ns)) == NULL)
		warnx_("status over the copy of the log failed");
	else
		bd_with_status(snap, st, page);
	json_object_set_new(snap, "now_ns", json_integer((json_int_t)now_ns));
	if (bd->standbys != NULL)
		json_object_set(snap, "standbys", bd->standbys);
	if (bd->record_copy != NULL)
		json_object_set(snap, "record_copy", bd->record_copy);
	return snap;
}

static void
publish_view(struct board *bd, const json_t *snap)
{
	char *view;

	if ((view = json_dumps(snap, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		return;
	tl_httpd_publish(bd->srv, DOC_VIEW, view, strlen(view));
	bd->view_at = bd->changes;
}

/*
 * A request waits for /history/MODULE: the module's history from the
 * copy of the log (following the exchange, the board has none).
 */
static void
serve_history(struct board *bd)
{
	char name[TL_HTTPD_QUERY_MAX + 1];
	json_t *h;
	char *page = NULL;
	size_t len = 0;

	if (!tl_httpd_query(bd->srv, name, sizeof(name)))
		return;
	h = bd->mirror != NULL ? bd_mirror_history(bd->mirror, name) : NULL;
	if (h != NULL)
		page = bd_render_history(h, &len);
	json_decref(h);
	tl_httpd_answer(bd->srv, page != NULL ? 200 : 404, page, len);
}

/*
 * What requests wait on the loop for: a module's history, and
 * /view.json, made again or said current.
 */
static void
serve_requests(struct board *bd)
{
	json_t *snap;

	if (bd->srv == NULL)
		return;
	(void)tl_httpd_wanted(bd->srv);	/* drained: the loop looks anyway */
	serve_history(bd);
	if (!tl_httpd_waiting(bd->srv, DOC_VIEW))
		return;
	if (bd->view_at == bd->changes && bd->changes > 0) {
		tl_httpd_touch(bd->srv, DOC_VIEW);
		return;
	}
	if ((snap = snapshot(bd, 0)) != NULL)
		publish_view(bd, snap);
	json_decref(snap);
}

/* Renders what was asked for; force ignores the throttle. */
static int
render(struct board *bd, int force)
{
	json_t *snap;
	char why[TL_WHY_MAX];
	int rc = 0;

	serve_requests(bd);
	if (!force && (!bd->changed || mono_ms() - bd->last_render <
	    (bd->html && !bd->srv ? 1000u : 250u)))
		return 0;
	if ((snap = snapshot(bd, bd->srv != NULL && !bd->json && !bd->html))
	    == NULL)
		return ENOMEM;
	if (bd->html != NULL && (rc = bd_render_html(bd->html, snap,
	    bd->source, why)) != 0)
		warnx_("html: %s", why);
	if (bd->srv != NULL) {
		char *page;
		size_t len;

		if ((page = bd_render_page(snap, bd->source, &len)) != NULL)
			tl_httpd_publish(bd->srv, DOC_PAGE, page, len);
	}
	if (bd->json && !bd->follow) {
		json_dumpf(snap, stdout, JSON_COMPACT | JSON_SORT_KEYS);
		putchar('\n');
	} else if (bd->dot && !bd->follow) {
		char *dot = bd_render_dot(snap);

		if (dot != NULL)
			fputs(dot, stdout);
		free(dot);
	} else if (!bd->quiet && !bd->print && (bd->tty || !bd->follow))
		bd_render_text(stdout, snap, bd->tty && bd->follow);
	json_decref(snap);
	bd->last_render = mono_ms();
	bd->changed = 0;
	return rc;
}

static void
printed(struct board *bd, const json_t *ev, int what)
{
	if (!bd->print)
		return;
	printf("%lld %s %s%s\n", (long long)json_integer_value(
	    json_object_get(ev, "seq")), json_string_value(json_object_get(ev,
	    "id")), json_string_value(json_object_get(ev, "type")),
	    what == BD_DUPLICATE ? " duplicate" : what == BD_GAP ? " gap" : "");
}

/* --- the local source --------------------------------------------------- */

/* The ids of a standbys document's followers and standbys, in order. */
static json_t *
follower_ids(const json_t *doc)
{
	const json_t *f;
	json_t *ids = json_array();
	size_t i;

	json_array_foreach(json_object_get(doc, "followers"), i, f)
		json_array_append(ids, json_object_get(f, "id"));
	json_array_foreach(json_object_get(doc, "standbys"), i, f)
		json_array_append(ids, json_object_get(f, "name"));
	return ids;
}

/*
 * What the followed home keeps beside its log, not in it (the copy does
 * not have it): a cluster leader's followers, as its tallyd keeps them,
 * shown again when the set changes and otherwise at most every
 * STANDBYS_MS (their lag moves with every commit, which renders the
 * page anyway); and with --record, the messages the copy passed over.
 */
#define STANDBYS_MS	10000
static void
read_home(struct board *bd, struct tl_log *log)
{
	struct tl_ep_follow f;
	struct tl_txn *t;
	json_t *doc, *sby, *was, *now;
	int same;

	if (tl_log_begin(log, TL_TXN_RDONLY, &t) != 0)
		return;
	/*
	 * A cluster's followers (tl_ep_followers_doc) and the stream
	 * standbys that reported (tl_ep_standbys_doc), in one document.
	 */
	doc = tl_ep_followers_doc(t);
	if ((sby = tl_ep_standbys_doc(t)) != NULL) {
		if (doc == NULL)
			doc = json_object();
		if (doc != NULL)
			json_object_set(doc, "standbys", json_object_get(sby,
			    "standbys"));
		json_decref(sby);
	}
	/* --record: what the copy passed over, counted in its log. */
	if (bd->record != NULL && tl_ep_follow_get(t, &f) == 0 &&
	    f.passed != bd->copy_passed) {
		json_decref(bd->record_copy);
		bd->record_copy = json_pack("{s:I,s:I,s:s}", "passed",
		    (json_int_t)f.passed, "last_offset",
		    (json_int_t)f.last_offset, "last_why", f.last_why);
		bd->copy_passed = f.passed;
		mark_changed(bd);
	}
	tl_log_abort(t);
	if (doc == NULL && bd->standbys == NULL)
		return;
	was = follower_ids(bd->standbys);
	now = follower_ids(doc);
	same = (doc == NULL) == (bd->standbys == NULL) && json_equal(was, now);
	json_decref(was);
	json_decref(now);
	if (same && mono_ms() - bd->standbys_ms < STANDBYS_MS) {
		json_decref(doc);
		return;
	}
	json_decref(bd->standbys);
	bd->standbys = doc;
	bd->standbys_ms = mono_ms();
	mark_changed(bd);
}

static int
check_origin(struct board *bd, struct tl_log *log)
{
	struct tl_txn *t;
	struct tl_event ev;
	json_t *meta, *ej;
	const char *origin, *id;
	int rc, ok = 1;

	if ((rc = bd_store_begin(bd->st, 1)) != 0)
		return rc;
	meta = bd_meta(bd->st);
	origin = json_string_value(json_object_get(meta, "origin"));
	if (origin != NULL && tl_log_begin(log, TL_TXN_RDONLY, &t) == 0) {
		if (tl_log_get(t, 1, &ev) == 0 &&
		    (ej = tl_json_event(&ev)) != NULL) {
			id = json_string_value(json_object_get(ej, "id"));
			ok = id != NULL && strcmp(id, origin) == 0;
			json_decref(ej);
		}
		tl_log_abort(t);
	}
	bd_store_abort(bd->st);
	if (!ok) {
		warnx_("the store was built from another log (its event 1 "
		    "differs): use another --store, or delete this one");
		return TL_ECONFLICT;
	}
	return 0;
}

static int
run_local(struct board *bd, const char *home)
{
	struct tl_sub_opts so = TL_SUB_OPTS_INIT;
	struct tl_sub *sub = NULL;
	struct tl_log *log = NULL;
	struct tl_event ev;
	char logdir[1300], why[TL_WHY_MAX], cwhy[TL_WHY_MAX];
	int rc, what, n;
	json_int_t pos;
	uint64_t viewpos;

	snprintf(logdir, sizeof(logdir), "%s/log", home);
	if (bd->source[0] == '\0')
		snprintf(bd->source, sizeof(bd->source), "the log at %s",
		    logdir);
	if ((rc = tl_log_open(logdir, TL_LOG_RDONLY, &log)) != 0) {
		warnx_("cannot open the log at %s: %s", logdir,
		    tl_strerror(rc));
		return rc;
	}
	if ((rc = check_origin(bd, log)) != 0)
		goto out;
	if ((rc = bd_store_begin(bd->st, 1)) != 0)
		goto out;
	pos = json_integer_value(json_object_get(bd_meta(bd->st), "pos"));
	bd_store_abort(bd->st);
	if ((rc = bd_mirror_open(bd->store, &bd->mirror, why)) != 0) {
		warnx_("copy of the log: %s", why);
		goto out;
	}
	/*
	 * The two commit apart: the one behind says where to resume (a
	 * store made before the copy existed: from event 1).  What the
	 * view has already is not given to it again (it would count as
	 * redelivered).
	 */
	viewpos = (uint64_t)pos;
	if (bd_mirror_head(bd->mirror) < (uint64_t)pos)
		pos = (json_int_t)bd_mirror_head(bd->mirror);
	so.from = (uint64_t)pos + 1;
	if ((rc = tl_sub_attach(log, &so, &sub)) != 0)
		goto out;
	mark_changed(bd);
	while (!stop) {
		if (bd->record != NULL && !bd_record_alive(bd->record, why)) {
			warnx_("%s", why);
			rc = EIO;
			break;
		}
		if ((rc = bd_store_begin(bd->st, 0)) != 0)
			break;
		if ((rc = bd_mirror_begin(bd->mirror)) != 0) {
			bd_store_abort(bd->st);
			break;
		}
		for (n = 0; n < 2000; n++) {
			json_t *ej;

			rc = tl_sub_next(sub, n == 0 && bd->follow ?
			    tl_sub_deadline(500) : TL_SUB_NOWAIT, &ev);
			if (rc != 0)
				break;
			if ((rc = bd_mirror_add(bd->mirror, &ev)) != 0)
				break;
			if (ev.seq <= viewpos)
				continue;
			if ((ej = tl_json_event(&ev)) == NULL) {
				rc = TL_EMALFORMED;
				break;
			}
			rc = bd_apply(bd->st, ej, &what);
			printed(bd, ej, what);
			json_decref(ej);
			if (rc != 0)
				break;
		}
		if (rc != 0 && rc != TL_ETIMEDOUT && rc != EINTR) {
			bd_mirror_abort(bd->mirror);
			bd_store_abort(bd->st);
			warnx_("after event %llu: %s", (unsigned long long)
			    tl_sub_position(sub), tl_strerror(rc));
			break;
		}
		if ((rc = bd_mirror_commit(bd->mirror, cwhy)) != 0) {
			bd_store_abort(bd->st);
			warnx_("copy of the log: %s", cwhy[0] ? cwhy :
			    tl_strerror(rc));
			break;
		}
		if ((rc = bd_store_commit(bd->st)) != 0) {
			warnx_("store: %s", tl_strerror(rc));
			break;
		}
		if (n > 0)
			mark_changed(bd);
		read_home(bd, log);
		if (bd->print)
			fflush(stdout);
		if (n == 0 && !bd->follow)
			break;		/* caught up */
		if (bd->follow)
			render(bd, 0);
	}
out:
	tl_sub_close(sub);
	tl_log_close(log);
	return rc;
}

/* --- the AMQP source ---------------------------------------------------- */

struct amqp_src {
	struct tl_amqp_conf	 conf;
	char			 password[256];
	const char		*exchange;
	const char		*queue;
	unsigned		 idle;
};

static int
amqp_session(struct board *bd, struct amqp_src *src, int *progress)
{
	struct tl_amqp *a = NULL;
	struct tl_amqp_delivery d;
	char why[TL_WHY_MAX];
	uint64_t last_msg = mono_ms(), tag = 0;
	int rc, n, what;

	*progress = 0;
	if ((rc = tl_amqp_connect(&src->conf, &a, why)) != 0) {
		warnx_("%s: %s", bd->source, why);
		return rc;
	}
	if ((rc = tl_amqp_exchange(a, src->exchange, "topic", 1)) != 0 ||
	    (rc = tl_amqp_queue(a, src->queue, 1)) != 0 ||
	    (rc = tl_amqp_bind(a, src->queue, src->exchange, "#")) != 0 ||
	    (rc = tl_amqp_consume(a, src->queue, 2000)) != 0) {
		warnx_("%s: %s", bd->source, tl_amqp_lasterr(a));
		tl_amqp_close(a);
		return rc;
	}
	while (!stop) {
		if ((rc = bd_store_begin(bd->st, 0)) != 0)
			break;
		for (n = 0; n < 1000; n++) {
			json_t *ej;
			json_error_t je;

			rc = tl_amqp_next(a, n == 0 ? tl_sub_deadline(250) :
			    tl_sub_deadline(20), &d);
			if (rc != 0)
				break;
			last_msg = mono_ms();
			tag = d.tag;
			if (strcmp(d.content_type, "application/json") != 0 ||
			    (ej = json_loadb(d.body, d.len, 0, &je)) == NULL) {
				warnx_("message %s is not the JSON of an event "
				    "(the board reads --format json)",
				    d.message_id);
				tl_amqp_delivery_free(&d);
				rc = TL_EMALFORMED;
				break;
			}
			tl_amqp_delivery_free(&d);
			rc = bd_apply(bd->st, ej, &what);
			printed(bd, ej, what);
			json_decref(ej);
			if (rc != 0)
				break;
		}
		if (rc != 0 && rc != TL_ETIMEDOUT) {
			bd_store_abort(bd->st);
			if (rc != TL_EMALFORMED)
				warnx_("%s: %s", bd->source,
				    tl_amqp_lasterr(a));
			break;
		}
		/* The view first, then the broker may forget the messages. */
		if ((rc = bd_store_commit(bd->st)) != 0) {
			warnx_("store: %s", tl_strerror(rc));
			break;
		}
		if (n > 0) {
			mark_changed(bd);
			*progress = 1;
			if ((rc = tl_amqp_ack(a, tag, 1)) != 0) {
				warnx_("%s: %s", bd->source,
				    tl_amqp_lasterr(a));
				break;
			}
		}
		if (bd->print)
			fflush(stdout);
		if (!bd->follow && mono_ms() - last_msg >= src->idle * 1000u) {
			rc = 0;
			break;
		}
		if (bd->follow)
			render(bd, 0);
	}
	if (stop)
		rc = 0;
	tl_amqp_close(a);
	return rc;
}

static int
run_amqp(struct board *bd, struct amqp_src *src)
{
	unsigned delay = 250;
	int rc, progress;

	snprintf(bd->source, sizeof(bd->source), "amqp://%s:%d%s%s, exchange "
	    "%s, queue %s", src->conf.host, src->conf.port, src->conf.vhost[0]
	    == '/' ? "" : "/", src->conf.vhost, src->exchange, src->queue);
	mark_changed(bd);
	for (;;) {
		rc = amqp_session(bd, src, &progress);
		if (rc == 0 || stop || !bd->follow || rc == TL_EMALFORMED ||
		    rc == TL_EAUTH)
			return rc;
		/* The broker went away: again, with backoff. */
		if (progress)
			delay = 250;
		warnx_("reconnecting in %u ms", delay);
		poll(NULL, 0, (int)delay);
		if (delay < 10000)
			delay *= 2;
	}
}

/* --- main ----------------------------------------------------------------- */

static int
read_password(const char *file, char *buf, size_t cap)
{
	const char *env = getenv("TALLY_BOARD_AMQP_PASSWORD");
	FILE *fp;
	size_t n;

	buf[0] = '\0';
	if (file != NULL) {
		if ((fp = fopen(file, "r")) == NULL)
			return errno;
		if (fgets(buf, (int)cap, fp) == NULL)
			buf[0] = '\0';
		fclose(fp);
	} else if (env != NULL)
		snprintf(buf, cap, "%s", env);
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "home", required_argument, NULL, 'H' },
		{ "store", required_argument, NULL, 's' },
		{ "follow", no_argument, NULL, 'f' },
		{ "once", no_argument, NULL, 'o' },
		{ "html", required_argument, NULL, 'w' },
		{ "serve", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "dot", no_argument, NULL, 'D' },
		{ "print", no_argument, NULL, 'p' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "amqp", required_argument, NULL, 'a' },
		{ "user", required_argument, NULL, 'u' },
		{ "password-file", required_argument, NULL, 'P' },
		{ "exchange", required_argument, NULL, 'x' },
		{ "queue", required_argument, NULL, 'Q' },
		{ "ca", required_argument, NULL, 'c' },
		{ "no-verify", no_argument, NULL, 'n' },
		{ "idle", required_argument, NULL, 'i' },
		{ "record", required_argument, NULL, 'R' },
		{ "stream", required_argument, NULL, 'T' },
		{ "leader-key", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct board bd;
	struct amqp_src src;
	struct bd_record rec;
	const char *rurl = NULL, *lkey = NULL;
	struct sigaction sa;
	const char *home = getenv("TALLY_HOME"), *store = NULL, *url = NULL;
	const char *pwfile = NULL, *serve = NULL;
	char storebuf[1100], homebuf[1100], why[TL_WHY_MAX];
	int c, rc, ex = EXIT_OK;

	memset(&bd, 0, sizeof(bd));
	memset(&src, 0, sizeof(src));
	memset(&rec, 0, sizeof(rec));
	rec.stream = "tally.record";
	rec.pid = -1;
	src.exchange = "tally.events";
	src.queue = "tally.board";
	src.idle = 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			home = optarg;
			break;
		case 's':
			store = optarg;
			break;
		case 'f':
			bd.follow = 1;
			break;
		case 'o':
			bd.follow = 0;
			break;
		case 'w':
			bd.html = optarg;
			break;
		case 'S':
			serve = optarg;
			bd.follow = 1;
			break;
		case 'j':
			bd.json = 1;
			break;
		case 'D':
			bd.dot = 1;
			break;
		case 'p':
			bd.print = 1;
			break;
		case 'q':
			bd.quiet = 1;
			break;
		case 'a':
			url = optarg;
			break;
		case 'u':
			snprintf(src.conf.user, sizeof(src.conf.user), "%s",
			    optarg);
			break;
		case 'P':
			pwfile = optarg;
			break;
		case 'x':
			src.exchange = optarg;
			break;
		case 'Q':
			src.queue = optarg;
			break;
		case 'c':
			src.conf.cafile = optarg;
			break;
		case 'n':
			src.conf.noverify = 1;
			break;
		case 'i':
			src.idle = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'R':
			rurl = optarg;
			break;
		case 'T':
			rec.stream = optarg;
			break;
		case 'K':
			lkey = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return EXIT_OK;
		default:
			fputs(usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	if (store == NULL) {
		const char *x = getenv("XDG_STATE_HOME"), *h = getenv("HOME");

		if (x != NULL && *x)
			snprintf(storebuf, sizeof(storebuf), "%s/tally-board",
			    x);
		else
			snprintf(storebuf, sizeof(storebuf),
			    "%s/.local/state/tally-board", h ? h : ".");
		store = storebuf;
	}
	if (rurl != NULL && url != NULL) {
		warnx_("--record and --amqp: one source at a time");
		return EXIT_USAGE;
	}
	if (rurl != NULL && (lkey == NULL || src.conf.user[0] == '\0' ||
	    *rec.stream == '\0' || src.conf.noverify)) {
		warnx_("--record needs --leader-key (a board shows no record "
		    "it cannot authenticate), --user and a --stream; "
		    "--no-verify is --amqp's only");
		return EXIT_USAGE;
	}
	if (rurl != NULL) {
		struct tl_amqp_conf chk;

		memset(&chk, 0, sizeof(chk));
		if (tl_amqp_parse_url(rurl, &chk) != 0) {
			warnx_("--record %s: expected amqp[s]://HOST[:PORT]"
			    "[/VHOST] without credentials", rurl);
			return EXIT_USAGE;
		}
		if (tl_secret_leader_key_parse(lkey, rec.pk) != 0 &&
		    tl_secret_leader_key_load(lkey, rec.pk, why) != 0) {
			warnx_("--leader-key %s: neither 64 hex digits nor a "
			    "file holding them", lkey);
			return EXIT_USAGE;
		}
		if ((rc = read_password(pwfile, src.password,
		    sizeof(src.password))) != 0) {
			warnx_("%s: %s", pwfile, strerror(rc));
			return EXIT_FAIL;
		}
		rec.url = rurl;
		rec.user = src.conf.user;
		rec.password = src.password;
		rec.ca = src.conf.cafile;
		if ((rc = bd_record_prepare(&rec, store, why)) != 0) {
			warnx_("store: %s", why);
			return EXIT_FAIL;
		}
		bd.record = &rec;
		home = rec.home;
		snprintf(bd.source, sizeof(bd.source), "the record of stream %s "
		    "at %s", rec.stream, rurl);
	}
	if (url == NULL && (home == NULL || *home == '\0')) {
		const char *h = getenv("HOME");

		if (geteuid() == 0)
			home = "/var/lib/tally";
		else {
			snprintf(homebuf, sizeof(homebuf),
			    "%s/.local/share/tally", h ? h : ".");
			home = homebuf;
		}
	}
	if (url != NULL) {
		if (tl_amqp_parse_url(url, &src.conf) != 0) {
			warnx_("--amqp %s: expected amqp[s]://HOST[:PORT]"
			    "[/VHOST] without credentials", url);
			return EXIT_USAGE;
		}
		if (src.conf.user[0] == '\0') {
			warnx_("--amqp needs --user");
			return EXIT_USAGE;
		}
		if ((rc = read_password(pwfile, src.password,
		    sizeof(src.password))) != 0) {
			warnx_("%s: %s", pwfile, strerror(rc));
			return EXIT_FAIL;
		}
		src.conf.password = src.password;
		src.conf.heartbeat = 30;
	}
	if (serve != NULL && tl_httpd_addr_ok("--serve", serve, why) != 0) {
		warnx_("%s", why);
		return EXIT_USAGE;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* The copy first: before any thread or environment (record.c). */
	if (bd.record != NULL) {
		rc = bd.follow ? bd_record_start(&rec) :
		    bd_record_catch_up(&rec, src.idle, &stop);
		if (rc != 0) {
			if (bd.follow)
				warnx_("cannot start the copy of the record: %s",
				    strerror(rc));
			tl_secret_wipe(src.password, sizeof(src.password));
			return EXIT_FAIL;
		}
		/* The copy has it (its own process, or it is done). */
		tl_secret_wipe(src.password, sizeof(src.password));
	}
	bd.tty = isatty(STDOUT_FILENO);
	bd.store = store;
	if ((rc = bd_store_open(store, &bd.st, why)) != 0) {
		warnx_("store: %s", why);
		bd_record_stop(&rec);
		return EXIT_FAIL;
	}
	if (serve != NULL) {
		if (tl_httpd_start(serve, &serve_conf, &bd.srv, why) != 0) {
			warnx_("%s", why);
			bd_store_close(bd.st);
			bd_record_stop(&rec);
			return EXIT_FAIL;
		}
		render(&bd, 1);		/* the page from the store at once */
	}

	rc = url != NULL ? run_amqp(&bd, &src) : run_local(&bd, home);
	if (rc != 0 && rc != TL_ETIMEDOUT && rc != EINTR)
		ex = EXIT_FAIL;
	if (render(&bd, 1) != 0)
		ex = EXIT_FAIL;
	if (fflush(stdout) != 0)
		ex = EXIT_FAIL;
	tl_secret_wipe(src.password, sizeof(src.password));
	bd_record_stop(&rec);
	tl_httpd_stop(bd.srv);
	bd_mirror_close(bd.mirror);
	bd_kept_free(bd.kept);
	json_decref(bd.standbys);
	json_decref(bd.record_copy);
	bd_store_close(bd.st);
	return ex;
}
