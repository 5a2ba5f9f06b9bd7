/*
 * epoch.c - the epoch in force, from the log (epoch.h).
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/body.h"
#include "core/error.h"
#include "epoch.h"

int
tl_ep_current(struct tl_txn *t, uint64_t *epochp, uint64_t *atp)
{
	struct tl_filter f = { 0 };
	struct tl_iter *it = NULL;
	struct tl_event ev;
	struct tl_bview v;
	uint64_t epoch = 1, at = 0, e;
	int rc;

	f.stream = TL_CP_STREAM;
	f.type = TL_EV_CP_PROMOTED;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		if (tl_bview_open(&v, ev.body, ev.body_len) != 0)
			continue;
		e = tl_bn_getu64(v.root, "epoch", 0);
		tl_bview_close(&v);
		/* Only ever up: a promotion to a lower epoch is ignored. */
		if (e > epoch) {
			epoch = e;
			at = ev.seq;
		}
	}
	tl_iter_close(it);
	if (rc != TL_EEOF && rc != TL_ENOTFOUND)
		return rc;
	*epochp = epoch;
	if (atp != NULL)
		*atp = at;
	return 0;
}

int
tl_ep_is_standby(const char *home)
{
	char path[1200];
	struct stat st;

	snprintf(path, sizeof(path), "%s/" TL_STANDBY_FILE, home);
	return stat(path, &st) == 0;
}
