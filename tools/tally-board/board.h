/*
 * board.h - tally-board's private header: an example reporting context.
 *
 * tally-board follows the record (locally through core/sub.h, or over
 * AMQP from the publisher's exchange), keeps its own store built from
 * the events alone, and renders the mesh.  It reads no table of
 * tally's and links no projection code: only core/ (the log, JSON) and
 * the AMQP client.  docs/reporting.md describes the pattern.
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
 * why (whylen bytes) says what failed where the signature has it.
 */
#ifndef TALLY_BOARD_H
#define TALLY_BOARD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* store.c: an LMDB environment of the board's own. */
struct bd_store;
int	bd_store_open(const char *dir, struct bd_store **out, char *why,
	    size_t whylen);
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

/* render.c */
/* A document of everything the renderers show (a new reference). */
json_t	*bd_snapshot(struct bd_store *st);
void	bd_render_text(FILE *fp, const json_t *snap, int ansi);
int	bd_render_html(const char *path, const json_t *snap,
	    const char *source, char *why, size_t whylen);
/*
 * The page as --serve serves it (it follows the events stream), *len
 * bytes, malloc'd for the caller; NULL when out of memory.
 */
char	*bd_render_page(const json_t *snap, const char *source, size_t *len);
/* Graphviz source of the mesh, malloc'd. */
char	*bd_render_dot(const json_t *snap);

#endif
