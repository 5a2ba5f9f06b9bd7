/*
 * cluster.c - the CLI in a cluster's home (tally.h: cli_cluster_commit).
 *
 * tally links no HTTP or TLS library, so its commits go through
 * tallyd --commit, as its provider sessions go through tallyd's other
 * helpers: the hook sends the transaction's events (tools/tallyd/
 * cluster.c says the framing) and LMDB commits only once tallyd says
 * etcd did.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/envelope.h"
#include "tally.h"

struct reply {
	char	 line[600];
};

static void
reply_line(const char *s, void *arg)
{
	struct reply *r = arg;

	if (r->line[0] == '\0')
		snprintf(r->line, sizeof(r->line), "%s", s);
}

static void
be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

int
cli_cluster_commit(struct tl_txn *t, uint64_t first, const uint8_t prev[TL_HASH_LEN],
    uint64_t last, void *arg)
{
	static const char *const args[] = { "--commit", NULL };
	struct tl_cli *cli = arg;
	struct tl_event ev;
	struct reply r;
	uint8_t *buf = NULL, *nb;
	size_t len = 48, cap = 0;
	uint64_t s;
	int rc, ex;

	for (s = first; s <= last; s++) {
		if ((rc = tl_log_get(t, s, &ev)) != 0)
			goto out;
		if (len + 4 + ev.raw_len > cap) {
			cap = (len + 4 + ev.raw_len) * 2;
			if ((nb = realloc(buf, cap)) == NULL) {
				rc = ENOMEM;
				goto out;
			}
			buf = nb;
		}
		be32(buf + len, (uint32_t)ev.raw_len);
		memcpy(buf + len + 4, ev.raw, ev.raw_len);
		len += 4 + ev.raw_len;
	}
	if (buf == NULL)
		return 0;
	memcpy(buf, "tlb1", 4);
	be32(buf + 4, (uint32_t)(first >> 32));
	be32(buf + 8, (uint32_t)first);
	memcpy(buf + 12, prev, TL_HASH_LEN);
	be32(buf + 44, (uint32_t)(last - first + 1));
	memset(&r, 0, sizeof(r));
	ex = cli_tallyd(cli, args, buf, len, reply_line, &r);
	if (ex == TL_EXIT_OK) {
		rc = 0;
		goto out;
	}
	if (r.line[0] != '\0')
		cli_errx("%s", r.line);
	rc = ex == TL_EXIT_LOCKED ? TL_ENOTLEADER : ex == TL_EXIT_REFUSED ?
	    TL_ETOOBIG : TL_EUNAVAIL;
out:
	free(buf);
	return rc;
}
