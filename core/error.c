/*
 * error.c - tl_strerror.
 */
#include <lmdb.h>
#include <string.h>

#include "error.h"

static const char *const msgs[] = {
	"TL_ENOTFOUND: not found",
	"TL_ENOTLOG: not a tally log",
	"TL_ENEWER: written by a newer version of tally",
	"TL_ECONFLICT: stream version conflict (re-read and retry)",
	"TL_ECORRUPT: the log does not verify",
	"TL_EMALFORMED: malformed event",
	"TL_ETOOBIG: a field exceeds its limit",
	"TL_EINVAL: invalid argument",
	"TL_EEXIST: already exists",
	"TL_ELMDB: LMDB error",
	"TL_EEOF: end of the log",
	"TL_ELOCKED: held by another process",
	"TL_ESECRET: secret key missing, unsafe or wrong",
	"TL_EREFUSED: refused",
	"TL_EDRIVER: provider driver failed",
	"TL_EUNREACH: provider unreachable",
	"TL_EAUTH: provider refused the credential",
	"TL_ETIMEDOUT: deadline passed",
	"TL_EMANIFEST: invalid manifest",
	"TL_EUNTRUSTED: the provider's certificate does not verify",
	"TL_ENOTLEADER: this control plane does not hold the leadership",
	"TL_EUNAVAIL: the cluster cannot commit (no quorum, or unreachable)",
	"TL_ECOMPACTED: the cluster no longer holds that part of the record",
};

const char *
tl_strerror(int err)
{
	if (err == 0)
		return "success";
	if (err <= TL_EFIRST && err >= TL_ELAST)
		return msgs[TL_EFIRST - err];
	if (err > 0)
		return strerror(err);
	/* An LMDB code that reached the top untranslated: its words. */
	if (err >= MDB_KEYEXIST && err <= MDB_LAST_ERRCODE)
		return mdb_strerror(err);
	return "unknown error";
}

int
tl_err_corrupt(int err)
{
	switch (err) {
	case TL_ECORRUPT:
	case TL_EMALFORMED:
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_PAGE_FULL:
	case MDB_CURSOR_FULL:
	case MDB_INVALID:
	case MDB_BAD_TXN:
	case MDB_BAD_VALSIZE:
		return 1;
	default:
		return 0;
	}
}

_Static_assert(sizeof(msgs) / sizeof(msgs[0]) == TL_EFIRST - TL_ELAST + 1,
    "one message per error code");
