/*
 * board.h - tally-board's private header: an example reporting context.
 *
 * tally-board follows the record (locally through core/sub.h, or over
 * AMQP from the publisher's exchange), keeps its own store built from
 * the events alone, and renders the mesh.  It reads no table of
 * tally's.  Following the local log it also keeps a copy of it with the
 * projections folded over it (mirror.c), so that the states it shows
 * come from the code tally status runs.  docs/reporting.md describes
 * the pattern.
 *
 * The model is a set of JSON documents, one per entity, under keys:
 *
 *   n/NODE      {name routable since}
 *   m/MODULE    {name provides[] requirements{REQ:{kind type target scope}}}
 *   a/M@N       {module node expose ready}
 *   p/ID        {id module node types[] reachable reason}
 *   g/GRANT     {grant module req node type provider bound_by state
 *                version reason drift{kind reason seq} candidates[]
 *                holders{HOLDER:{node delivered acked}}
 *                rotation{from to seq ts deadline_ns reason}}
 *   meta        {pos applied duplicates gaps origin last_ts types{}}
 *
 * Events are applied in sequence order; one already applied (seq <=
 * pos: a redelivery) is counted and skipped, so the store is exactly
 * once over an at-least-once stream.
 *
 * Ownership: the store is the board's, one transaction at a time
 * (bd_store_begin .. commit or abort) on one thread.  bd_get and
 * bd_snapshot return new references the caller releases with
 * json_decref; bd_meta's document is the store's, valid until the
 * transaction ends; bd_each's doc is borrowed for the call of fn, and
 * fn's first non-zero return stops the walk and is returned;
 * bd_render_dot's string is malloc'd for the caller to free.  Errors
 * are errno values, ENOMEM, or LMDB's (MDB_*) as LMDB returns them;
 * why (TL_WHY_MAX bytes) says what failed where the signature has it.
 */
#ifndef TALLY_BOARD_H
#define TALLY_BOARD_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/error.h"

/* store.c: an LMDB environment of the board's own. */
/* dir and its missing parents, each made 0700: 0 or an errno value. */
int	bd_mkdirs(const char *dir);
struct bd_store;
int	bd_store_open(const char *dir, struct bd_store **out, char *why);
void	bd_store_close(struct bd_store *st);
int	bd_store_begin(struct bd_store *st, int rdonly);
int	bd_store_commit(struct bd_store *st);
void	bd_store_abort(struct bd_store *st);
/* A new reference, or NULL when absent. */
json_t	*bd_get(struct bd_store *st, const char *key);
int	bd_put(struct bd_store *st, const char *key, const json_t *doc);
int	bd_del(struct bd_store *st, const char *key);
/* Visits every document whose key starts with prefix, in key order. */
typedef int (*bd_each_fn)(const char *key, json_t *doc, void *arg);
int	bd_each(struct bd_store *st, const char *prefix, bd_each_fn fn,
	    void *arg);

/* view.c: folding one event (the JSON of tally tail --json) in. */
enum { BD_APPLIED, BD_DUPLICATE, BD_GAP };
int	bd_apply(struct bd_store *st, const json_t *ev, int *what);
/* The meta document (never NULL inside a transaction). */
json_t	*bd_meta(struct bd_store *st);

/*
 * mirror.c: a copy of the log the board follows, in DIR/mirror of its
 * store, with the projections folded over it, so that its states are
 * the ones tally status derives (projections/status.c).  Between
 * bd_mirror_begin and _commit, bd_mirror_add takes events (their
 * encoding copied; one at or before the head is skipped: a restart
 * after a crash between the board's two commits); _commit appends them
 * as they are (links and hashes checked again), folds them and
 * commits, growing the map when it is full; why (TL_WHY_MAX bytes) says
 * which check an event failed.  _abort drops the batch.  Errors are
 * core/error.h codes, ENOMEM.
 */
struct bd_mirror;
struct tl_event;
int	bd_mirror_open(const char *store, struct bd_mirror **out, char *why);
void	bd_mirror_close(struct bd_mirror *m);
uint64_t	bd_mirror_head(const struct bd_mirror *m);
int	bd_mirror_begin(struct bd_mirror *m);
int	bd_mirror_add(struct bd_mirror *m, const struct tl_event *ev);
int	bd_mirror_commit(struct bd_mirror *m, char *why);
void	bd_mirror_abort(struct bd_mirror *m);
json_t	*bd_mirror_status(struct bd_mirror *m, uint64_t now_ns);
/*
 * A module's history as tally history tells it, over the copy: the
 * events of its stream, its assignments' (on the nodes the graph has),
 * its grants' and their bindings', in order, the newest HISTORY_MAX
 * (2,000) of them: {module, events (all), shown: [{seq, ts, actor,
 * type, stream, what, cause?: {seq, type, what}}]}.  NULL for a name
 * that is none, a module with no event, or an error.
 */
json_t	*bd_mirror_history(struct bd_mirror *m, const char *module);

/*
 * store.c: the keys bd_put and bd_del touched since the set was last
 * cleared (the store's; made at the first call, kept from then on).
 */
json_t	*bd_store_touched(struct bd_store *st);

/*
 * kept.c: the documents a snapshot draws, kept in memory by a board
 * that follows: bd_kept_load reads them (in a transaction of st), and
 * bd_kept_update reads again the keys touched names (in a transaction
 * after the one that touched them) and clears it.  bd_kept_docs gives
 * one kind's documents in key order: a new array, sharing documents
 * that nobody may change.  Errors are LMDB's or ENOMEM; after one, the
 * kept documents are to be freed and loaded again.
 */
enum { BD_KEPT_NODES, BD_KEPT_MODULES, BD_KEPT_ASSIGNMENTS,
    BD_KEPT_PROVIDERS, BD_KEPT_GRANTS, BD_KEPT_KINDS };
struct bd_kept;
int	bd_kept_load(struct bd_store *st, struct bd_kept **out);
void	bd_kept_free(struct bd_kept *k);
int	bd_kept_update(struct bd_kept *k, struct bd_store *st,
	    json_t *touched);
json_t	*bd_kept_docs(const struct bd_kept *k, int kind);

/* render.c */
/*
 * A document of everything the renderers show (a new reference), from
 * the kept documents when kept is not NULL, else from the store (in a
 * transaction of st either way: the meta document is the store's).
 */
json_t	*bd_snapshot(struct bd_store *st, const struct bd_kept *kept);
/*
 * Puts status's states (st, taken over) into snap (mirror.c); for a
 * page (page), only on the rows it shows.
 */
void	bd_with_status(json_t *snap, json_t *st, int page);
/*
 * A module's status document (tl_status_module): how many of its
 * assignments are ready, returned, and each unhealthy requirement
 * appended to bad ({module node requirement reason question?}).
 */
size_t	bd_module_summary(const json_t *m, json_t *bad);
void	bd_render_text(FILE *fp, const json_t *snap, int ansi);
int	bd_render_html(const char *path, const json_t *snap,
	    const char *source, char *why);
/*
 * The page as --serve serves it (it follows the events stream), *len
 * bytes, malloc'd for the caller; NULL when out of memory.
 */
char	*bd_render_page(const json_t *snap, const char *source, size_t *len);
/* A module's history page (bd_mirror_history's h), as bd_render_page. */
char	*bd_render_history(const json_t *h, size_t *len);
/* Graphviz source of the mesh, malloc'd. */
char	*bd_render_dot(const json_t *snap);

/*
 * record.c: the leader's replication stream, screened into STORE/record
 * (a log the board then follows).  The caller fills url .. pk and owns
 * the strings; _prepare makes the directory; _catch_up copies in this
 * process until nothing came for idle_s seconds (0, or EIO when the
 * copy failed: said on stderr); _start forks the copy, to call before
 * any thread or environment exists; _alive is 1 while it runs, else 0
 * with why; _stop ends it and waits.
 */
struct bd_record {
	const char	*url, *stream, *user, *password, *ca;
	uint8_t		 pk[32];		/* TL_SIGN_PUBLEN */
	char		 home[1200];
	pid_t		 pid;
};
int	bd_record_prepare(struct bd_record *r, const char *store, char *why);
int	bd_record_catch_up(struct bd_record *r, unsigned idle_s,
	    volatile sig_atomic_t *stop);
int	bd_record_start(struct bd_record *r);
int	bd_record_alive(struct bd_record *r, char *why);
void	bd_record_stop(struct bd_record *r);

#endif
