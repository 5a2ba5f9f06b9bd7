/*
 * scratch.c - scratch tables: operational state kept beside the log.
 */
#include <string.h>

#include "error.h"
#include "kv.h"
#include "log-internal.h"

/* "x:" never matches the projections' "p:" prefix. */
int
tl_kv_open_scratch(struct tl_txn *t, const char *name, tl_kv *out)
{
	char full[TL_KV_NAME_MAX + 3];
	MDB_dbi dbi;
	size_t n = strlen(name);
	int rc;

	if (n == 0 || n > TL_KV_NAME_MAX)
		return TL_EINVAL;
	memcpy(full, "x:", 2);
	memcpy(full + 2, name, n + 1);
	rc = mdb_dbi_open(t->txn, full,
	    (t->flags & TL_TXN_RDONLY) ? 0 : MDB_CREATE, &dbi);
	if (rc == MDB_MAP_FULL)
		return rc;
	if (rc != 0)
		return tl_log_mdberr(t->log, rc, "open scratch table");
	*out = dbi;
	return 0;
}
