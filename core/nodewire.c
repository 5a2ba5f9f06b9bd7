/*
 * nodewire.c - the node's wire format (see nodewire.h).
 */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "error.h"
#include "kv.h"
#include "nodewire.h"

#define ACK_TAG		"tally-ack/1"
/* The personalisation of the proof key: 16 bytes, generichash's least. */
#define PROOF_KEY	"tally-ack-proof1"

int
tl_nw_ack_message(const char *grant, const char *holder, uint64_t version,
    const uint8_t nonce[TL_NW_NONCE_LEN], uint8_t out[TL_NW_MSG_MAX],
    size_t *len)
{
	size_t gl = strlen(grant), hl = strlen(holder), n = 0;
	int i;

	if (sizeof(ACK_TAG) + gl + 1 + hl + 1 + 8 + TL_NW_NONCE_LEN >
	    TL_NW_MSG_MAX)
		return TL_EINVAL;
	memcpy(out, ACK_TAG, sizeof(ACK_TAG));
	n = sizeof(ACK_TAG);
	memcpy(out + n, grant, gl + 1);
	n += gl + 1;
	memcpy(out + n, holder, hl + 1);
	n += hl + 1;
	for (i = 7; i >= 0; i--)
		out[n++] = (uint8_t)(version >> (8 * i));
	memcpy(out + n, nonce, TL_NW_NONCE_LEN);
	*len = n + TL_NW_NONCE_LEN;
	return 0;
}

int
tl_nw_report_message(const char *node, const char *report, uint8_t **out,
    size_t *len)
{
	static const char tag[] = "tally-report/1";
	size_t nl = strlen(node), rl = strlen(report);
	uint8_t *p;

	if ((p = malloc(sizeof(tag) + nl + 1 + rl)) == NULL)
		return ENOMEM;
	memcpy(p, tag, sizeof(tag));
	memcpy(p + sizeof(tag), node, nl + 1);
	memcpy(p + sizeof(tag) + nl + 1, report, rl);
	*out = p;
	*len = sizeof(tag) + nl + 1 + rl;
	return 0;
}

int
tl_nw_cp_message(const char *node, const char *type, uint64_t seq,
    const void *body, size_t blen, uint8_t **out, size_t *len)
{
	static const char tag[] = "tally-cp/1";
	size_t nl = strlen(node), tl = strlen(type), n;
	uint8_t *p;

	n = sizeof(tag) + nl + 1 + tl + 1 + 8 + blen;
	if ((p = malloc(n)) == NULL)
		return ENOMEM;
	memcpy(p, tag, sizeof(tag));
	memcpy(p + sizeof(tag), node, nl + 1);
	memcpy(p + sizeof(tag) + nl + 1, type, tl + 1);
	tl_put_be64(p + sizeof(tag) + nl + 1 + tl + 1, seq);
	if (blen > 0)
		memcpy(p + n - blen, body, blen);
	*out = p;
	*len = n;
	return 0;
}

void
tl_nw_proof_key(const char *password, uint8_t key[TL_MAC_LEN])
{
	crypto_generichash(key, TL_MAC_LEN, (const uint8_t *)password,
	    strlen(password), (const uint8_t *)PROOF_KEY, strlen(PROOF_KEY));
}

int
tl_nw_seen(struct tl_txn *t, const char *node, uint64_t now_ns)
{
	uint8_t v[8];
	tl_kv kv;
	int rc;

	if ((rc = tl_kv_open_scratch(t, TL_NW_SEEN_TABLE, &kv)) != 0)
		return rc;
	tl_put_be64(v, now_ns);
	return tl_kv_put(t, kv, node, strlen(node), v, sizeof(v));
}

int
tl_nw_seen_get(struct tl_txn *t, const char *node, uint64_t *ns)
{
	const void *v;
	size_t vl;
	tl_kv kv;

	*ns = 0;
	if (tl_kv_open_scratch(t, TL_NW_SEEN_TABLE, &kv) != 0 ||
	    tl_kv_get(t, kv, node, strlen(node), &v, &vl) != 0 || vl != 8)
		return TL_ENOTFOUND;
	*ns = tl_get_be64(v);
	return 0;
}
