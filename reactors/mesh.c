/*
 * mesh.c - the mesh's identity, as the log records it (mesh.h).
 */
#include <string.h>

#include "core/body.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/secret.h"
#include "projections/events.h"
#include "mesh.h"

int
tl_mesh_ok(const char *s)
{
	return strlen(s) == TL_MESH_LEN &&
	    strspn(s, "0123456789abcdef") == TL_MESH_LEN;
}

/* ev's mesh into mesh when it is a mesh.created with a valid id. */
static int
mesh_of(const struct tl_event *ev, char *mesh)
{
	struct tl_bview v;
	char id[TL_MESH_LEN + 8] = "";

	if (strcmp(ev->type, TL_EV_MESH_CREATED) != 0 ||
	    strcmp(ev->stream, TL_CP_STREAM) != 0 ||
	    tl_bview_open(&v, ev->body, ev->body_len) != 0)
		return 0;
	(void)tl_bn_getstr(v.root, "mesh", id, sizeof(id));
	tl_bview_close(&v);
	if (!tl_mesh_ok(id))
		return 0;
	memcpy(mesh, id, TL_MESH_LEN + 1);
	return 1;
}

int
tl_mesh_get(struct tl_txn *t, char *mesh)
{
	return tl_mesh_seq(t, mesh, NULL);
}

int
tl_mesh_seq(struct tl_txn *t, char *mesh, uint64_t *seqp)
{
	struct tl_filter f = { 0 };
	struct tl_iter *it = NULL;
	struct tl_event ev;
	int rc;

	mesh[0] = '\0';
	if (seqp != NULL)
		*seqp = 0;
	/* A home tally init made: event 1, one read. */
	rc = tl_log_get(t, 1, &ev);
	if (rc == TL_ENOTFOUND) {
		uint64_t last = 0;

		/* Not there in a log that is not empty: a damaged index. */
		if ((rc = tl_log_last(t, &last, NULL)) != 0)
			return rc;
		return last == 0 ? 0 : TL_ECORRUPT;
	}
	if (rc != 0)
		return rc;
	if (mesh_of(&ev, mesh)) {
		if (seqp != NULL)
			*seqp = ev.seq;
		return 0;
	}
	/* An older home: its own stream holds a handful of events. */
	f.stream = TL_CP_STREAM;
	f.type = TL_EV_MESH_CREATED;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	while ((rc = tl_iter_next(it, &ev)) == 0)
		if (mesh_of(&ev, mesh)) {
			if (seqp != NULL)
				*seqp = ev.seq;
			break;
		}
	tl_iter_close(it);
	if (rc != 0 && rc != TL_EEOF && rc != TL_ENOTFOUND)
		return rc;
	return 0;
}

int
tl_mesh_load(struct tl_log *log, char *mesh)
{
	struct tl_txn *t;
	int rc;

	mesh[0] = '\0';
	if ((rc = tl_log_begin(log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	rc = tl_mesh_get(t, mesh);
	tl_log_abort(t);
	return rc;
}

int
tl_mesh_ensure(struct tl_txn *t, const char *actor, char *mesh,
    uint64_t *seqp)
{
	struct tl_append a;
	struct tl_body b;
	const void *body;
	size_t len;
	int rc;

	if (seqp != NULL)
		*seqp = 0;
	if ((rc = tl_mesh_get(t, mesh)) != 0 || mesh[0] != '\0')
		return rc;
	tl_secret_mesh_id(mesh);
	tl_body_init(&b);
	tl_body_str(&b, TL_F_MESH, mesh);
	if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
		memset(&a, 0, sizeof(a));
		a.type = TL_EV_MESH_CREATED;
		a.stream = TL_CP_STREAM;
		a.expect = TL_VER_ANY;
		a.actor = actor;
		a.body = body;
		a.body_len = len;
		rc = tl_append(t, &a, seqp, NULL);
	}
	tl_body_free(&b);
	if (rc != 0)
		mesh[0] = '\0';
	/* An append finds nothing missing unless an index is damaged. */
	return rc == TL_ENOTFOUND ? TL_ECORRUPT : rc;
}

