/*
 * credential.h - a grant's credential, in its intent event.
 *
 * The password is made and encrypted under the master key (rx->key),
 * bound to the grant and its version, so the intent's ciphertext can
 * neither be moved to another grant nor replayed for another version.
 * Plaintext goes only into the caller's buffers, which the caller
 * wipes (tl_secret_wipe).  tl_rx_intent_password: TL_ENOTFOUND when g
 * has no intent, TL_EMALFORMED for an intent without a usable password,
 * the secret module's error when it does not decrypt, LMDB's.
 */
#ifndef TL_RX_CREDENTIAL_H
#define TL_RX_CREDENTIAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/secret.h"
#include "projections/grant.h"
#include "rx.h"

/*
 * The ciphertext of pw (a fresh password: tl_rx_prov_password), grant's
 * credential version, for the intent event into ct; returns the
 * ciphertext's length.  tl_rx_intent_password reads it back.
 */
size_t	tl_rx_seal_credential(struct tl_rx *rx, const char *grant,
	    uint64_t version, const char *pw,
	    uint8_t ct[TL_PASSWORD_MAX + TL_BOX_OVERHEAD]);
int	tl_rx_intent_password(struct tl_rx *rx, struct tl_txn *t,
	    const struct tl_grant *g, char *out);
/*
 * A secret tally adopt gave for g's object (its grant.adopted,
 * g->adopt_seq) by field: "secret" (--secret-stdin: what the driver takes
 * the object over with) or "password" (--password-stdin: what the
 * holders use), into out (cap bytes, NUL-terminated; the caller wipes
 * it): 0; TL_ENOTFOUND when none was given; TL_EMALFORMED for one that
 * does not fit; the log's or the box's errors.
 */
int	tl_rx_adopt_secret(struct tl_rx *rx, struct tl_txn *t,
	    const struct tl_grant *g, const char *field, char *out, size_t cap);

/*
 * A driver's secret handle (drivers/driver.h, handle_model) for grant's
 * credential version: tl_rx_record_handle appends credential.handle
 * with it encrypted under the master key (bound to grant, version and
 * the word "handle"), in c's transaction; tl_rx_grant_handle decrypts
 * the latest one recorded for that version into out (TL_DRV_HANDLE_MAX
 * bytes, the caller wipes it): 0, TL_ENOTFOUND when none is, the
 * secret module's error or LMDB's.
 */
struct tl_ctx;
int	tl_rx_record_handle(struct tl_rx *rx, struct tl_ctx *c,
	    const char *grant, uint64_t version, const char *handle);
int	tl_rx_grant_handle(struct tl_rx *rx, struct tl_txn *t,
	    const char *grant, uint64_t version, char *out);

#endif
