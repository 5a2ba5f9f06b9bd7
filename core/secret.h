/*
 * secret.h - generated credentials, encryption at rest, sealing to nodes.
 *
 * The master key (32 random bytes) lives in a file that tally init
 * creates with mode 0600; tl_secret_load refuses a key file readable
 * by group or others.  Values are encrypted with XChaCha20-Poly1305;
 * the associated data binds a ciphertext to its context (the grant's
 * stream, say) so it cannot be replayed elsewhere.  Plaintext secrets
 * live only in buffers that are wiped with tl_secret_wipe.
 */
#ifndef TL_SECRET_H
#define TL_SECRET_H

#include <stddef.h>
#include <stdint.h>

#define TL_KEY_LEN	32
#define TL_PUBKEY_LEN	32
#define TL_SECKEY_LEN	32
#define TL_BOX_OVERHEAD	(24 + 16)	/* nonce + tag */
#define TL_SEAL_OVERHEAD 48
#define TL_PASSWORD_LEN	32		/* 24 random bytes, base64url */
/* The longest password a provider's policy may ask for (its buffers). */
#define TL_PASSWORD_MAX	128

/*
 * The master key.  k points to TL_KEY_LEN bytes in libsodium's guarded
 * memory (sodium_malloc: guard pages, mlock, excluded from core dumps
 * by MADV_DONTDUMP, read-only once loaded); NULL when none is loaded.
 * A zeroed struct is valid.  Freed (wiped) with tl_secret_key_free.
 */
struct tl_key {
	uint8_t *k;
};

/*
 * The replication stream's authenticator of one event (issue 17): a MAC
 * (HMAC-SHA-512-256) of its chain hash under a subkey of the master key
 * (context "tlstream"), so that only a holder of the master key can
 * publish an event that a follower holding it accepts.  The chain hash
 * covers the event and, through its link, the whole past.  _ok compares
 * in constant time: 1 when mac is hash's, 0 otherwise.
 */
#define TL_STREAM_MAC_LEN	32
void	tl_secret_stream_mac(const struct tl_key *key, const uint8_t *hash,
	    size_t hlen, uint8_t mac[TL_STREAM_MAC_LEN]);
int	tl_secret_stream_mac_ok(const struct tl_key *key, const uint8_t *hash,
	    size_t hlen, const uint8_t mac[TL_STREAM_MAC_LEN]);

/*
 * The stream's authenticator, format TL_STREAM_AUTH_V (header "auth":
 * 2; without it a message's "mac" is format 1, above): HMAC-SHA-512-256
 * under the same subkey of the whole message, so that nothing in it can
 * be believed before it is checked and no header can be moved onto
 * another body.  The bytes it covers are defined once, in secret.c
 * (stream_auth_feed): the domain tag "tally/stream-auth" and a NUL, the
 * format (one byte), then seq, epoch (the publishing leader's), the
 * chain hash and the body's length as big-endian 64-bit integers around
 * the hash, then the body.  The leader makes it (reactors/publish.c);
 * a follower checks it first (reactors/follow.c), and so does a
 * leader reading a promotion off the stream.  body may be NULL when len
 * is 0.  _ok compares in constant time: 1 when mac is m's, 0 otherwise.
 */
#define TL_STREAM_AUTH_V	2
struct tl_stream_auth {
	uint64_t	 seq;
	uint64_t	 epoch;
	const uint8_t	*hash;		/* TL_HASH_LEN (core/log.h) bytes */
	const void	*body;
	size_t		 len;
};
void	tl_secret_stream_auth(const struct tl_key *key,
	    const struct tl_stream_auth *m, uint8_t mac[TL_STREAM_MAC_LEN]);
int	tl_secret_stream_auth_ok(const struct tl_key *key,
	    const struct tl_stream_auth *m, const uint8_t mac[TL_STREAM_MAC_LEN]);

/*
 * The mesh's naming key (KDF context "tlnaming", subkey 1): what names
 * in a namespace other tenants share are digested with
 * (drivers/naming.c, scheme 3), so that no one without the master key
 * can compute a future grant's name.  The caller wipes sub.  TL_ESECRET
 * when key holds none.
 */
#define TL_NAMING_KEY_LEN	32
int	tl_secret_naming_key(const struct tl_key *key,
	    uint8_t sub[TL_NAMING_KEY_LEN]);

/* Creates path with a fresh key; TL_EEXIST if it exists. */
int	tl_secret_keygen(const char *path);
/*
 * Reads the key into guarded memory.  TL_ESECRET (with the reason in
 * why, TL_WHY_MAX bytes) if unsafe or bad, ENOMEM; on failure key->k is NULL.
 */
int	tl_secret_load(const char *path, struct tl_key *key, char *why);
/* Wipes and frees the key's memory; accepts one never loaded (k NULL). */
void	tl_secret_key_free(struct tl_key *key);
void	tl_secret_wipe(void *p, size_t n);

/*
 * Guarded memory for whatever holds a decrypted secret (a grant's
 * password, a provider's admin password, the broker's): libsodium's
 * sodium_malloc, so the bytes sit between guard pages, are mlocked
 * (best effort: RLIMIT_MEMLOCK may refuse, the rest still holds) and
 * are excluded from core dumps (MADV_DONTDUMP; gcore honours it too).
 *
 * sodium_malloc costs a mapping of at least four pages (two guards,
 * the canary page, the data) and an mmap/mprotect/mlock per call, so
 * a secret is never allocated on its own: the reactors allocate their
 * whole per-pass arrays of works (which embed the password fields)
 * here, one mapping per array.  Arrays that grow go through
 * tl_secret_realloc, which doubles its capacity (amortised O(1), like
 * realloc) since every move is a fresh mapping and a copy.
 *
 * tl_secret_alloc: n zeroed bytes (n 0 is allowed), or NULL (ENOMEM)
 * for the caller to treat like malloc's NULL; tl_secret_calloc(nmemb,
 * size) the same for an array (NULL if the product overflows).  The pointer is aligned
 * for any type.  tl_secret_realloc(p, n): p (NULL: none yet) resized to
 * at least n bytes, the new bytes zeroed; NULL on failure with p left
 * as it was; p's old memory is wiped and freed when it moves.
 * tl_secret_free(p): wipes all of p's memory and frees it; NULL is a
 * no-op.  Only for pointers from these two; never free() them.
 */
void	*tl_secret_alloc(size_t n);
void	*tl_secret_calloc(size_t nmemb, size_t size);
void	*tl_secret_realloc(void *p, size_t n);
void	 tl_secret_free(void *p);

/*
 * For a program that holds secrets, first thing in main: makes the
 * process non-dumpable (prctl PR_SET_DUMPABLE 0) and its core limit 0.
 * 0 or an errno.
 */
int	tl_secret_harden(void);

/* out must hold len + TL_BOX_OVERHEAD bytes. */
int	tl_secret_encrypt(const struct tl_key *key, const void *ad,
	    size_t adlen, const void *in, size_t len, uint8_t *out);
/* out must hold len - TL_BOX_OVERHEAD bytes; TL_ESECRET on failure. */
int	tl_secret_decrypt(const struct tl_key *key, const void *ad,
	    size_t adlen, const void *in, size_t len, uint8_t *out);

/* A NUL-terminated URL-safe password of TL_PASSWORD_LEN characters. */
void	tl_secret_password(char out[TL_PASSWORD_LEN + 1]);
/*
 * A NUL-terminated password of len characters (1 to TL_PASSWORD_MAX;
 * out holds len + 1) drawn uniformly from chars (2 to 128 distinct
 * bytes, no NUL), by rejection so that no character is likelier than
 * another.  With every_class, drawn again until it holds at least one
 * of each class chars has (lower case, upper case, digit, other), as
 * password-complexity checks ask.  0, or TL_EINVAL for a len or chars
 * out of bounds (out is then "").
 */
int	tl_secret_password_of(char *out, size_t len, const char *chars,
	    int every_class);
/*
 * A new mesh id: 16 random bytes as 32 lowercase hex digits and a NUL.
 * Not a secret (it is in every mark and name); random so that two
 * meshes never draw the same one.
 */
void	tl_secret_mesh_id(char out[33]);

/* X25519 keys for nodes, and sealed boxes to them. */
void	tl_secret_node_keypair(uint8_t pk[TL_PUBKEY_LEN],
	    uint8_t sk[TL_SECKEY_LEN]);
/* The public key of a node's X25519 secret key. */
int	tl_secret_node_public(const uint8_t sk[TL_SECKEY_LEN],
	    uint8_t pk[TL_PUBKEY_LEN]);
/* out must hold len + TL_SEAL_OVERHEAD bytes. */
int	tl_secret_seal(const uint8_t pk[TL_PUBKEY_LEN], const void *in,
	    size_t len, uint8_t *out);
int	tl_secret_unseal(const uint8_t pk[TL_PUBKEY_LEN],
	    const uint8_t sk[TL_SECKEY_LEN], const void *in, size_t len,
	    uint8_t *out);

/*
 * Ed25519 signing keys for nodes: a node proves who acknowledges with
 * them (tally-node).  The node's key file holds the X25519 secret key
 * (TL_SECKEY_LEN bytes, the format of before) followed, for nodes added
 * or rekeyed since, by the Ed25519 secret key (TL_SIGN_SECLEN bytes),
 * and then by the control plane's Ed25519 public key (TL_SIGN_PUBLEN
 * bytes, tl_secret_cp_keypair): what the node checks the notices routed
 * to its queue against.  So 32, 96 or TL_NODE_KEYFILE_LEN (128) bytes.
 */
#define TL_SIGN_PUBLEN	32
#define TL_SIGN_SECLEN	64
#define TL_SIGN_LEN	64
#define TL_MAC_LEN	32
#define TL_NODE_KEYFILE_LEN (TL_SECKEY_LEN + TL_SIGN_SECLEN + TL_SIGN_PUBLEN)

struct tl_node_key {
	uint8_t	box_sk[TL_SECKEY_LEN];
	uint8_t	sign_sk[TL_SIGN_SECLEN];
	uint8_t	cp_pk[TL_SIGN_PUBLEN];	/* the control plane's */
	int	has_sign;		/* 0: a key file of before */
	int	has_cp;			/* 0: no control-plane key (needs has_sign) */
};

/*
 * The control plane's Ed25519 key pair, derived from the master key
 * (KDF context "tlcpsign", subkey 1): every holder of the master key (a
 * promoted standby too) signs as the same control plane, and nothing
 * but the master key is kept.  sk (TL_SIGN_SECLEN bytes) is the
 * caller's to keep in guarded memory and wipe; pk may be all it wants
 * (sk NULL).
 */
void	tl_secret_cp_keypair(const struct tl_key *key,
	    uint8_t pk[TL_SIGN_PUBLEN], uint8_t *sk);

void	tl_secret_sign_keypair(uint8_t pk[TL_SIGN_PUBLEN],
	    uint8_t sk[TL_SIGN_SECLEN]);
/* The public half of a signing secret key. */
void	tl_secret_sign_public(const uint8_t sk[TL_SIGN_SECLEN],
	    uint8_t pk[TL_SIGN_PUBLEN]);
void	tl_secret_sign(const uint8_t sk[TL_SIGN_SECLEN], const void *msg,
	    size_t len, uint8_t sig[TL_SIGN_LEN]);
/* 0 when sig is pk's signature of msg; TL_ESECRET otherwise. */
int	tl_secret_verify(const uint8_t pk[TL_SIGN_PUBLEN], const void *msg,
	    size_t len, const uint8_t sig[TL_SIGN_LEN]);
/* BLAKE2b-256 keyed by key (16-64 bytes): the proof of holding it. */
int	tl_secret_mac(const void *key, size_t keylen, const void *msg,
	    size_t len, uint8_t mac[TL_MAC_LEN]);
/*
 * Reads a node key file (either format; refused when group or others
 * can read it: TL_ESECRET with the reason in why, TL_WHY_MAX bytes).  The
 * caller wipes *k.
 */
int	tl_secret_node_key_load(const char *path, struct tl_node_key *k,
	    char *why);
/*
 * Writes k, mode 0600, atomically: 32 bytes, 96 with k->has_sign, 128
 * with has_sign and has_cp.
 */
int	tl_secret_node_key_write(const char *path, const struct tl_node_key *k);

/*
 * The stream's signature (header "sig", TL_SIGN_LEN bytes): Ed25519
 * (crypto_sign_detached) by the control plane's signing key
 * (tl_secret_cp_keypair) over exactly the bytes the authenticator of
 * format TL_STREAM_AUTH_V covers, so that a follower holding only the
 * public half -- given by the operator, never taken from the stream --
 * authenticates every message as a holder of the master key would.  A
 * follower keeps each event's signature and epoch in its log
 * (tl_log_sig_put, core/log.h), and tally promote verifies them again.
 * _sign: 0 or ENOMEM.  _verify: 0 when sig is pk's over m, TL_ESECRET
 * when it is not, ENOMEM.  Both copy the message into one buffer
 * (Ed25519 signs it whole) and free it before they return.
 */
int	tl_secret_stream_sign(const uint8_t sk[TL_SIGN_SECLEN],
	    const struct tl_stream_auth *m, uint8_t sig[TL_SIGN_LEN]);
int	tl_secret_stream_verify(const uint8_t pk[TL_SIGN_PUBLEN],
	    const struct tl_stream_auth *m, const uint8_t sig[TL_SIGN_LEN]);

/*
 * The leader's signing key as an operator hands it to a standby: the
 * public half of tl_secret_cp_keypair, 64 hex digits (what tally
 * publish status prints on the leader).  A standby keeps it in
 * HOME/TL_LEADER_KEY_FILE (tally init --standby --leader-key), one line.
 * _parse: hex (NUL-terminated; one trailing newline allowed) into pk,
 * 0 or TL_EINVAL.  _load: path's content parsed, or TL_EINVAL (why:
 * TL_WHY_MAX bytes) / the errno of reading it.
 */
#define TL_LEADER_KEY_FILE	"leader.key"
int	tl_secret_leader_key_parse(const char *hex, uint8_t pk[TL_SIGN_PUBLEN]);
int	tl_secret_leader_key_load(const char *path, uint8_t pk[TL_SIGN_PUBLEN],
	    char *why);

/*
 * Exactly 2n hex digits (s, NUL-terminated: no more, no less, nothing
 * else) into out's n bytes: 0 or TL_EINVAL, out then undefined.  What a
 * message header carries (a hash, a signature, an authenticator).
 */
int	tl_secret_unhex(const char *s, uint8_t *out, size_t n);

/* Writes data to path atomically (temporary file, fsync, rename). */
int	tl_secret_write_file(const char *path, const void *data, size_t len,
	    unsigned mode);

#endif
