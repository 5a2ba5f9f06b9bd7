/*
 * credential.c - a grant's credential: a fresh password encrypted for
 * its intent event, and reading it back (credential.h).
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "credential.h"
#include "rx.h"

/*
 * The associated data binding an intent's ciphertext to its grant and
 * credential version: the one format every writer and the reader use.
 */
static void
grant_ad(char ad[TL_KEY_MAX], const char *grant, uint64_t version)
{
	snprintf(ad, TL_KEY_MAX, "grant/%s:v%llu", grant,
	    (unsigned long long)version);
}

size_t
tl_rx_new_credential(struct tl_rx *rx, const char *grant, uint64_t version,
    char pw[TL_PASSWORD_LEN + 1], uint8_t ct[TL_PASSWORD_LEN +
    TL_BOX_OVERHEAD])
{
	char ad[TL_KEY_MAX];
	size_t n;

	tl_secret_password(pw);
	n = strlen(pw);
	grant_ad(ad, grant, version);
	tl_secret_encrypt(&rx->key, ad, strlen(ad), pw, n, ct);
	return n + TL_BOX_OVERHEAD;
}

/* Decrypts the password of g's intent (out: TL_PASSWORD_LEN + 1). */
int
tl_rx_intent_password(struct tl_rx *rx, struct tl_txn *t,
    const struct tl_grant *g, char *out)
{
	struct tl_event ev;
	struct tl_bview v;
	struct tl_bnode n;
	const void *ct;
	size_t len;
	char ad[TL_KEY_MAX];
	int rc;

	if (g->intent_seq == 0)
		return TL_ENOTFOUND;
	if ((rc = tl_log_get(t, g->intent_seq, &ev)) != 0)
		return rc;
	if ((rc = tl_bview_open(&v, ev.body, ev.body_len)) != 0)
		return rc;
	rc = TL_EMALFORMED;
	if (tl_bn_get(v.root, "password", &n) == 0 &&
	    tl_bn_secret(n, &ct, &len) == 0 && len > TL_BOX_OVERHEAD &&
	    len - TL_BOX_OVERHEAD <= TL_PASSWORD_LEN) {
		grant_ad(ad, g->id, g->version);
		rc = tl_secret_decrypt(&rx->key, ad, strlen(ad), ct, len,
		    (uint8_t *)out);
		if (rc == 0)
			out[len - TL_BOX_OVERHEAD] = '\0';
	}
	tl_bview_close(&v);
	return rc;
}
