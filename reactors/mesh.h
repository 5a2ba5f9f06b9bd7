/*
 * mesh.h - the mesh's identity, as the log records it.
 *
 * tally init draws a mesh id and records it as the log's first event,
 * mesh.created on the stream TL_CP_STREAM; every mark, fence and
 * derived name on a provider carries it (drivers/driver.h).  Apart
 * from epoch.h, whose fences and sessions need it, so that the session
 * loader and the epoch both stand on it without a circle.
 *
 * Nothing here allocates or keeps a pointer: ids go to the caller's
 * buffers (33 bytes).  Errors: the log's (core/log.h).
 */
#ifndef TL_RX_MESH_H
#define TL_RX_MESH_H

#include <stdint.h>

#include "core/log.h"

#define TL_CP_STREAM		"control-plane"	/* TL_EV_CP_PROMOTED's stream */

/*
 * The mesh id (33 bytes: 32 lowercase hex digits) the log records: the
 * first TL_EV_MESH_CREATED on TL_CP_STREAM (event 1 of a home tally
 * init made).  "" when it records none: a home made before meshes had
 * ids, until its first write (tl_mesh_ensure), or a standby that has
 * not copied the leader's event 1 yet.  Errors: the log's.
 */
#define TL_MESH_LEN		32
int	tl_mesh_get(struct tl_txn *txn, char *mesh);
/* tl_mesh_get, and the sequence number of that event in *seqp (0: none). */
int	tl_mesh_seq(struct tl_txn *txn, char *mesh, uint64_t *seqp);
/*
 * A leader's: in the caller's write transaction, appends mesh.created
 * with a new id (tl_secret_mesh_id) when the log records none, by
 * actor.  mesh (33 bytes) receives the id, found or drawn; *seqp (may
 * be NULL) the new event's sequence number, 0 when nothing was
 * appended.  Never on a standby's home (its event 1 is the leader's).
 * Errors: the log's.
 */
int	tl_mesh_ensure(struct tl_txn *txn, const char *actor, char *mesh,
	    uint64_t *seqp);
/* tl_mesh_get in a read transaction of its own on log. */
int	tl_mesh_load(struct tl_log *log, char *mesh);
/* Whether s is a mesh id: exactly 32 lowercase hex digits. */
int	tl_mesh_ok(const char *s);

#endif
