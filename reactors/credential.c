/*
 * credential.c - a grant's credential: a fresh password encrypted for
 * its intent event, and reading it back (credential.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fields.h"
#include "drivers/driver.h"
#include "projections/ctx.h"
#include "projections/events.h"
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
tl_rx_seal_credential(struct tl_rx *rx, const char *grant, uint64_t version,
    const char *pw, uint8_t ct[TL_PASSWORD_MAX + TL_BOX_OVERHEAD])
{
	char ad[TL_KEY_MAX];
	size_t n;

	n = strlen(pw);
	grant_ad(ad, grant, version);
	tl_secret_encrypt(&rx->key, ad, strlen(ad), pw, n, ct);
	return n + TL_BOX_OVERHEAD;
}

/* Decrypts the password of g's intent (out: TL_PASSWORD_MAX + 1). */
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
	    len - TL_BOX_OVERHEAD <= TL_PASSWORD_MAX) {
		grant_ad(ad, g->id, g->version);
		rc = tl_secret_decrypt(&rx->key, ad, strlen(ad), ct, len,
		    (uint8_t *)out);
		if (rc == 0)
			out[len - TL_BOX_OVERHEAD] = '\0';
	}
	tl_bview_close(&v);
	return rc;
}

int
tl_rx_adopt_secret(struct tl_rx *rx, struct tl_txn *t, const struct tl_grant *g,
    const char *field, char *out, size_t cap)
{
	struct tl_event ev;
	struct tl_bview v;
	struct tl_bnode n;
	const void *ct;
	size_t len;
	char ad[TL_KEY_MAX];
	int rc;

	out[0] = '\0';
	if (g->adopt_seq == 0)
		return TL_ENOTFOUND;
	if ((rc = tl_log_get(t, g->adopt_seq, &ev)) != 0)
		return rc;
	if ((rc = tl_bview_open(&v, ev.body, ev.body_len)) != 0)
		return rc;
	if (tl_bn_get(v.root, field, &n) != 0)
		rc = TL_ENOTFOUND;
	else if (tl_bn_secret(n, &ct, &len) != 0 || len <= TL_BOX_OVERHEAD ||
	    len - TL_BOX_OVERHEAD >= cap)
		rc = TL_EMALFORMED;
	else {
		tl_grant_adopt_ad(ad, g->id, field);
		rc = tl_secret_decrypt(&rx->key, ad, strlen(ad), ct, len,
		    (uint8_t *)out);
		if (rc == 0)
			out[len - TL_BOX_OVERHEAD] = '\0';
	}
	tl_bview_close(&v);
	return rc;
}

/* The associated data of a handle: its grant, version and kind. */
static void
handle_ad(char ad[TL_KEY_MAX], const char *grant, uint64_t version)
{
	snprintf(ad, TL_KEY_MAX, "grant/%s:v%llu:handle", grant,
	    (unsigned long long)version);
}

int
tl_rx_record_handle(struct tl_rx *rx, struct tl_ctx *c, const char *grant,
    uint64_t version, const char *handle)
{
	uint8_t *ct;
	struct tl_body b;
	char ad[TL_KEY_MAX], stream[TL_KEY_MAX];
	size_t n = strlen(handle);
	int rc;

	if (n == 0 || n >= TL_DRV_HANDLE_MAX)
		return TL_EINVAL;
	if ((rc = tl_key(stream, "grant/%s", grant)) != 0)
		return rc;
	if ((ct = malloc(n + TL_BOX_OVERHEAD)) == NULL)
		return ENOMEM;
	handle_ad(ad, grant, version);
	if ((rc = tl_secret_encrypt(&rx->key, ad, strlen(ad), handle, n,
	    ct)) == 0) {
		tl_body_init(&b);
		tl_body_str(&b, TL_F_GRANT, grant);
		tl_body_u64(&b, TL_F_VERSION, version);
		tl_body_secret(&b, TL_F_HANDLE, ct, n + TL_BOX_OVERHEAD);
		rc = tl_emit(c, TL_EV_CRED_HANDLE, stream, &b, NULL);
		tl_body_free(&b);
	}
	free(ct);
	return rc;
}

int
tl_rx_grant_handle(struct tl_rx *rx, struct tl_txn *t, const char *grant,
    uint64_t version, char *out)
{
	struct tl_filter f;
	struct tl_iter *it;
	struct tl_event ev;
	struct tl_bview v;
	struct tl_bnode n;
	const void *ct;
	size_t len;
	uint64_t ver, last = 0;
	char ad[TL_KEY_MAX], stream[TL_KEY_MAX];
	int rc;

	out[0] = '\0';
	if ((rc = tl_key(stream, "grant/%s", grant)) != 0)
		return rc;
	memset(&f, 0, sizeof(f));
	f.stream = stream;
	f.type = TL_EV_CRED_HANDLE;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		if (tl_bview_open(&v, ev.body, ev.body_len) != 0)
			continue;
		ver = tl_bn_getu64(v.root, "version", 0);
		if (ver == version)
			last = ev.seq;
		tl_bview_close(&v);
	}
	tl_iter_close(it);
	if (rc != TL_EEOF)
		return rc;
	if (last == 0)
		return TL_ENOTFOUND;
	if ((rc = tl_log_get(t, last, &ev)) != 0 ||
	    (rc = tl_bview_open(&v, ev.body, ev.body_len)) != 0)
		return rc;
	rc = TL_EMALFORMED;
	if (tl_bn_get(v.root, "handle", &n) == 0 &&
	    tl_bn_secret(n, &ct, &len) == 0 && len > TL_BOX_OVERHEAD &&
	    len - TL_BOX_OVERHEAD < TL_DRV_HANDLE_MAX) {
		handle_ad(ad, grant, version);
		rc = tl_secret_decrypt(&rx->key, ad, strlen(ad), ct, len,
		    (uint8_t *)out);
		if (rc == 0)
			out[len - TL_BOX_OVERHEAD] = '\0';
	}
	tl_bview_close(&v);
	return rc;
}
