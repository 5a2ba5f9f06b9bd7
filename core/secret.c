/*
 * secret.c - libsodium behind tally's secret handling.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "secret.h"

_Static_assert(TL_BOX_OVERHEAD == crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
    + crypto_aead_xchacha20poly1305_ietf_ABYTES, "box overhead");
_Static_assert(TL_SEAL_OVERHEAD == crypto_box_SEALBYTES, "seal overhead");

int
tl_secret_harden(void)
{
	struct rlimit rl = { 0, 0 };
	int rc = 0;

	/*
	 * Not dumpable: no core file, no ptrace by the same user, and
	 * /proc/PID/mem and environ closed to others.  The core limit too,
	 * for the case a handler re-enables dumping.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		rc = errno;
	if (setrlimit(RLIMIT_CORE, &rl) != 0 && rc == 0)
		rc = errno;
	return rc;
}

void
tl_secret_wipe(void *p, size_t n)
{
	sodium_memzero(p, n);
}

/*
 * Each block starts with a header that records its capacity (what
 * tl_secret_realloc may grow into without moving); the header is 16
 * bytes and the capacity a multiple of 16, which keeps the caller's
 * pointer aligned (sodium_malloc aligns the end of the block to its
 * guard page, so the start is only as aligned as the size).
 */
#define GUARD_HDR	16

void *
tl_secret_alloc(size_t n)
{
	size_t cap;
	uint8_t *b;

	if (n > SIZE_MAX / 2 - GUARD_HDR || sodium_init() < 0)
		return NULL;
	cap = (n + 15) & ~(size_t)15;
	if ((b = sodium_malloc(GUARD_HDR + cap)) == NULL)
		return NULL;
	/* sodium_malloc fills with 0xdb; callers count on calloc's zeros. */
	memset(b, 0, GUARD_HDR + cap);
	memcpy(b, &cap, sizeof(cap));
	return b + GUARD_HDR;
}

void *
tl_secret_calloc(size_t nmemb, size_t size)
{
	if (size != 0 && nmemb > SIZE_MAX / size)
		return NULL;
	return tl_secret_alloc(nmemb * size);
}

void *
tl_secret_realloc(void *p, size_t n)
{
	size_t cap, want;
	uint8_t *q;

	if (p == NULL)
		return tl_secret_alloc(n);
	memcpy(&cap, (uint8_t *)p - GUARD_HDR, sizeof(cap));
	if (n <= cap)
		return p;
	want = cap > SIZE_MAX / 4 ? n : cap * 2;
	if (want < n)
		want = n;
	if ((q = tl_secret_alloc(want)) == NULL)
		return NULL;
	memcpy(q, p, cap);
	tl_secret_free(p);
	return q;
}

void
tl_secret_free(void *p)
{
	/* sodium_free wipes the whole block before unmapping it. */
	if (p != NULL)
		sodium_free((uint8_t *)p - GUARD_HDR);
}

int
tl_secret_write_file(const char *path, const void *data, size_t len,
    unsigned mode)
{
	char tmp[4096];
	const uint8_t *p = data;
	int fd, rc = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path,
	    (long)getpid()) >= sizeof(tmp))
		return ENAMETOOLONG;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    (mode_t)mode)) < 0)
		return errno;
	/* umask may have narrowed it; the mode is part of the contract. */
	if (fchmod(fd, (mode_t)mode) != 0)
		rc = errno;
	while (rc == 0 && len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			rc = errno;
			break;
		}
		p += w;
		len -= (size_t)w;
	}
	if (rc == 0 && fsync(fd) != 0)
		rc = errno;
	if (close(fd) != 0 && rc == 0)
		rc = errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = errno;
	if (rc != 0)
		unlink(tmp);
	return rc;
}

int
tl_secret_keygen(const char *path)
{
	uint8_t k[TL_KEY_LEN];
	struct stat st;
	int rc;

	if (sodium_init() < 0)
		return TL_ESECRET;
	if (stat(path, &st) == 0)
		return TL_EEXIST;
	randombytes_buf(k, sizeof(k));
	rc = tl_secret_write_file(path, k, sizeof(k), 0600);
	sodium_memzero(k, sizeof(k));
	return rc;
}

int
tl_secret_load(const char *path, struct tl_key *key, char *why)
{
	struct stat st;
	ssize_t n;
	uint8_t *k = NULL;
	int fd, rc = 0;

	key->k = NULL;
	if (sodium_init() < 0)
		return TL_ESECRET;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		rc = errno;
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "%s: %s", path, strerror(rc));
		return rc == ENOENT ? TL_ESECRET : rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = errno;
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "%s is accessible by group "
			    "or others (mode %03o): chmod 600 it", path,
			    (unsigned)(st.st_mode & 0777));
		rc = TL_ESECRET;
		goto out;
	}
	/*
	 * Straight from the file into guarded memory with read(2): no
	 * stdio buffer or stack copy is left behind with the key in it.
	 */
	if ((k = sodium_malloc(TL_KEY_LEN)) == NULL) {
		rc = ENOMEM;
		goto out;
	}
	n = read(fd, k, TL_KEY_LEN);
	if (n != TL_KEY_LEN || st.st_size != TL_KEY_LEN) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "%s is not a %d-byte key",
			    path, TL_KEY_LEN);
		sodium_free(k);		/* wipes it */
		k = NULL;
		rc = TL_ESECRET;
		goto out;
	}
	sodium_mprotect_readonly(k);
	key->k = k;
out:
	close(fd);
	return rc;
}

void
tl_secret_key_free(struct tl_key *key)
{
	if (key == NULL || key->k == NULL)
		return;
	sodium_free(key->k);	/* zeroes the bytes, then unmaps */
	key->k = NULL;
}

int
tl_secret_encrypt(const struct tl_key *key, const void *ad, size_t adlen,
    const void *in, size_t len, uint8_t *out)
{
	uint8_t *nonce = out;

	randombytes_buf(nonce, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
	crypto_aead_xchacha20poly1305_ietf_encrypt(
	    out + crypto_aead_xchacha20poly1305_ietf_NPUBBYTES, NULL, in, len,
	    ad, adlen, NULL, nonce, key->k);
	return 0;
}

int
tl_secret_decrypt(const struct tl_key *key, const void *ad, size_t adlen,
    const void *in, size_t len, uint8_t *out)
{
	const uint8_t *p = in;

	if (len < TL_BOX_OVERHEAD)
		return TL_ESECRET;
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(out, NULL, NULL,
	    p + crypto_aead_xchacha20poly1305_ietf_NPUBBYTES,
	    len - crypto_aead_xchacha20poly1305_ietf_NPUBBYTES, ad, adlen, p,
	    key->k) != 0)
		return TL_ESECRET;
	return 0;
}

void
tl_secret_password(char out[TL_PASSWORD_LEN + 1])
{
	uint8_t raw[24];

	randombytes_buf(raw, sizeof(raw));
	sodium_bin2base64(out, TL_PASSWORD_LEN + 1, raw, sizeof(raw),
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof(raw));
}

/* The class of c: 1 lower case, 2 upper case, 4 digit, 8 other. */
static unsigned
char_class(unsigned char c)
{
	if (c >= 'a' && c <= 'z')
		return 1;
	if (c >= 'A' && c <= 'Z')
		return 2;
	if (c >= '0' && c <= '9')
		return 4;
	return 8;
}

int
tl_secret_password_of(char *out, size_t len, const char *chars,
    int every_class)
{
	uint8_t raw[64];
	size_t n, i, got, avail, tries;
	unsigned want = 0, have;
	unsigned limit;

	if (out == NULL)
		return TL_EINVAL;
	out[0] = '\0';
	n = chars != NULL ? strlen(chars) : 0;
	if (len == 0 || len > TL_PASSWORD_MAX || n < 2 || n > 128)
		return TL_EINVAL;
	for (i = 0; i < n; i++) {
		if (memchr(chars, chars[i], i) != NULL)
			return TL_EINVAL;	/* a repeat would weigh it double */
		want |= char_class((unsigned char)chars[i]);
	}
	/* Bytes at or past limit would favour the first 256 % n chars. */
	limit = 256 - 256 % (unsigned)n;
	for (tries = 0; tries < 1000; tries++) {
		got = 0;
		have = 0;
		avail = 0;
		i = 0;
		while (got < len) {
			if (i == avail) {
				randombytes_buf(raw, sizeof(raw));
				avail = sizeof(raw);
				i = 0;
			}
			if (raw[i] < limit) {
				out[got] = chars[raw[i] % n];
				have |= char_class((unsigned char)out[got]);
				got++;
			}
			i++;
		}
		out[len] = '\0';
		if (!every_class || have == want ||
		    len < (size_t)__builtin_popcount(want))
			break;
	}
	sodium_memzero(raw, sizeof(raw));
	return 0;
}

void
tl_secret_mesh_id(char out[33])
{
	uint8_t raw[16];

	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(out, 33, raw, sizeof(raw));
}

void
tl_secret_node_keypair(uint8_t pk[TL_PUBKEY_LEN], uint8_t sk[TL_SECKEY_LEN])
{
	crypto_box_keypair(pk, sk);
}

int
tl_secret_seal(const uint8_t pk[TL_PUBKEY_LEN], const void *in, size_t len,
    uint8_t *out)
{
	return crypto_box_seal(out, in, len, pk) == 0 ? 0 : TL_ESECRET;
}

int
tl_secret_unseal(const uint8_t pk[TL_PUBKEY_LEN],
    const uint8_t sk[TL_SECKEY_LEN], const void *in, size_t len, uint8_t *out)
{
	if (len < TL_SEAL_OVERHEAD ||
	    crypto_box_seal_open(out, in, len, pk, sk) != 0)
		return TL_ESECRET;
	return 0;
}

void
tl_secret_sign_keypair(uint8_t pk[TL_SIGN_PUBLEN], uint8_t sk[TL_SIGN_SECLEN])
{
	crypto_sign_keypair(pk, sk);
}

void
tl_secret_sign_public(const uint8_t sk[TL_SIGN_SECLEN],
    uint8_t pk[TL_SIGN_PUBLEN])
{
	crypto_sign_ed25519_sk_to_pk(pk, sk);
}

void
tl_secret_sign(const uint8_t sk[TL_SIGN_SECLEN], const void *msg, size_t len,
    uint8_t sig[TL_SIGN_LEN])
{
	crypto_sign_detached(sig, NULL, msg, len, sk);
}

int
tl_secret_verify(const uint8_t pk[TL_SIGN_PUBLEN], const void *msg,
    size_t len, const uint8_t sig[TL_SIGN_LEN])
{
	return crypto_sign_verify_detached(sig, msg, len, pk) == 0 ? 0 :
	    TL_ESECRET;
}

int
tl_secret_mac(const void *key, size_t keylen, const void *msg, size_t len,
    uint8_t mac[TL_MAC_LEN])
{
	if (keylen < crypto_generichash_KEYBYTES_MIN ||
	    keylen > crypto_generichash_KEYBYTES_MAX)
		return TL_EINVAL;
	return crypto_generichash(mac, TL_MAC_LEN, msg, len, key, keylen) == 0 ?
	    0 : TL_ESECRET;
}

int
tl_secret_node_key_load(const char *path, struct tl_node_key *k, char *why)
{
	uint8_t buf[TL_NODE_KEYFILE_LEN + 1];
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	memset(k, 0, sizeof(*k));
	if (sodium_init() < 0)
		return TL_ESECRET;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		rc = errno;
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "%s: %s", path, strerror(rc));
		return TL_ESECRET;
	}
	if (fstat(fd, &st) != 0 || (st.st_mode & (S_IRWXG | S_IRWXO))) {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "%s is accessible by group "
			    "or others (mode %03o): chmod 600 it", path,
			    (unsigned)(st.st_mode & 0777));
		close(fd);
		return TL_ESECRET;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n == TL_SECKEY_LEN || n == TL_SECKEY_LEN + TL_SIGN_SECLEN ||
	    n == TL_NODE_KEYFILE_LEN) {
		memcpy(k->box_sk, buf, TL_SECKEY_LEN);
		if (n > TL_SECKEY_LEN) {
			memcpy(k->sign_sk, buf + TL_SECKEY_LEN, TL_SIGN_SECLEN);
			k->has_sign = 1;
		}
		if (n == TL_NODE_KEYFILE_LEN) {
			memcpy(k->cp_pk, buf + TL_SECKEY_LEN + TL_SIGN_SECLEN,
			    TL_SIGN_PUBLEN);
			k->has_cp = 1;
		}
	} else {
		if (why != NULL)
			snprintf(why, TL_WHY_MAX, "%s is not a node key (%zd "
			    "bytes)", path, n);
		rc = TL_ESECRET;
	}
	sodium_memzero(buf, sizeof(buf));
	return rc;
}

int
tl_secret_node_key_write(const char *path, const struct tl_node_key *k)
{
	uint8_t buf[TL_NODE_KEYFILE_LEN];
	int rc;

	memcpy(buf, k->box_sk, TL_SECKEY_LEN);
	memcpy(buf + TL_SECKEY_LEN, k->sign_sk, TL_SIGN_SECLEN);
	memcpy(buf + TL_SECKEY_LEN + TL_SIGN_SECLEN, k->cp_pk, TL_SIGN_PUBLEN);
	rc = tl_secret_write_file(path, buf, !k->has_sign ? TL_SECKEY_LEN :
	    !k->has_cp ? TL_SECKEY_LEN + TL_SIGN_SECLEN : sizeof(buf), 0600);
	sodium_memzero(buf, sizeof(buf));
	return rc;
}

int
tl_secret_node_public(const uint8_t sk[TL_SECKEY_LEN],
    uint8_t pk[TL_PUBKEY_LEN])
{
	return crypto_scalarmult_base(pk, sk) == 0 ? 0 : TL_ESECRET;
}

_Static_assert(TL_KEY_LEN == crypto_kdf_KEYBYTES, "the master key is a kdf key");
_Static_assert(TL_STREAM_MAC_LEN == crypto_auth_BYTES, "one HMAC");

_Static_assert(TL_SIGN_SECLEN == crypto_sign_SECRETKEYBYTES, "ed25519");

void
tl_secret_cp_keypair(const struct tl_key *key, uint8_t pk[TL_SIGN_PUBLEN],
    uint8_t *sk)
{
	uint8_t seed[crypto_sign_SEEDBYTES], tsk[TL_SIGN_SECLEN];

	crypto_kdf_derive_from_key(seed, sizeof(seed), 1, "tlcpsign", key->k);
	crypto_sign_seed_keypair(pk, sk != NULL ? sk : tsk, seed);
	sodium_memzero(seed, sizeof(seed));
	sodium_memzero(tsk, sizeof(tsk));
}

int
tl_secret_naming_key(const struct tl_key *key, uint8_t sub[TL_NAMING_KEY_LEN])
{
	if (key == NULL || key->k == NULL)
		return TL_ESECRET;
	crypto_kdf_derive_from_key(sub, TL_NAMING_KEY_LEN, 1, "tlnaming",
	    key->k);
	return 0;
}

/* The stream's subkey: derived on each use, wiped after. */
static void
stream_subkey(const struct tl_key *key, uint8_t sub[crypto_auth_KEYBYTES])
{
	crypto_kdf_derive_from_key(sub, crypto_auth_KEYBYTES, 1, "tlstream",
	    key->k);
}

void
tl_secret_stream_mac(const struct tl_key *key, const uint8_t *hash,
    size_t hlen, uint8_t mac[TL_STREAM_MAC_LEN])
{
	uint8_t sub[crypto_auth_KEYBYTES];

	stream_subkey(key, sub);
	crypto_auth(mac, hash, hlen, sub);
	sodium_memzero(sub, sizeof(sub));
}

static void
be64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/*
 * The bytes format 2 covers (secret.h), before the body: the one
 * definition of them, for the authenticator and the signature alike.
 */
#define STREAM_PREFIX_LEN	(sizeof("tally/stream-auth") + 1 + 8 + 8 + \
	    32 + 8)

static void
stream_auth_prefix(const struct tl_stream_auth *m,
    uint8_t out[STREAM_PREFIX_LEN])
{
	static const char tag[] = "tally/stream-auth";
	uint8_t *p = out;

	memcpy(p, tag, sizeof(tag));	/* its NUL included */
	p += sizeof(tag);
	*p++ = TL_STREAM_AUTH_V;
	be64(p, m->seq);
	p += 8;
	be64(p, m->epoch);
	p += 8;
	memcpy(p, m->hash, 32);
	p += 32;
	be64(p, (uint64_t)m->len);
}

static void
stream_auth_feed(crypto_auth_hmacsha512256_state *st,
    const struct tl_stream_auth *m)
{
	uint8_t pre[STREAM_PREFIX_LEN];

	stream_auth_prefix(m, pre);
	crypto_auth_hmacsha512256_update(st, pre, sizeof(pre));
	if (m->len > 0)
		crypto_auth_hmacsha512256_update(st, m->body, m->len);
}

/* The prefix and the body in one buffer: Ed25519 signs it whole. */
static uint8_t *
stream_auth_bytes(const struct tl_stream_auth *m, size_t *lenp)
{
	uint8_t *buf;

	if (m->len > SIZE_MAX - STREAM_PREFIX_LEN ||
	    (buf = malloc(STREAM_PREFIX_LEN + m->len)) == NULL)
		return NULL;
	stream_auth_prefix(m, buf);
	if (m->len > 0)
		memcpy(buf + STREAM_PREFIX_LEN, m->body, m->len);
	*lenp = STREAM_PREFIX_LEN + m->len;
	return buf;
}

int
tl_secret_stream_sign(const uint8_t sk[TL_SIGN_SECLEN],
    const struct tl_stream_auth *m, uint8_t sig[TL_SIGN_LEN])
{
	uint8_t *buf;
	size_t len;

	if ((buf = stream_auth_bytes(m, &len)) == NULL)
		return ENOMEM;
	crypto_sign_detached(sig, NULL, buf, len, sk);
	free(buf);
	return 0;
}

int
tl_secret_stream_verify(const uint8_t pk[TL_SIGN_PUBLEN],
    const struct tl_stream_auth *m, const uint8_t sig[TL_SIGN_LEN])
{
	uint8_t *buf;
	size_t len;
	int rc;

	if ((buf = stream_auth_bytes(m, &len)) == NULL)
		return ENOMEM;
	rc = crypto_sign_verify_detached(sig, buf, len, pk) == 0 ? 0 :
	    TL_ESECRET;
	free(buf);
	return rc;
}

void
tl_secret_stream_auth(const struct tl_key *key,
    const struct tl_stream_auth *m, uint8_t mac[TL_STREAM_MAC_LEN])
{
	crypto_auth_hmacsha512256_state st;
	uint8_t sub[crypto_auth_KEYBYTES];

	stream_subkey(key, sub);
	crypto_auth_hmacsha512256_init(&st, sub, sizeof(sub));
	stream_auth_feed(&st, m);
	crypto_auth_hmacsha512256_final(&st, mac);
	sodium_memzero(sub, sizeof(sub));
	sodium_memzero(&st, sizeof(st));
}

int
tl_secret_stream_auth_ok(const struct tl_key *key,
    const struct tl_stream_auth *m, const uint8_t mac[TL_STREAM_MAC_LEN])
{
	uint8_t want[TL_STREAM_MAC_LEN];
	int ok;

	tl_secret_stream_auth(key, m, want);
	ok = sodium_memcmp(want, mac, sizeof(want)) == 0;
	sodium_memzero(want, sizeof(want));
	return ok;
}

int
tl_secret_stream_mac_ok(const struct tl_key *key, const uint8_t *hash,
    size_t hlen, const uint8_t mac[TL_STREAM_MAC_LEN])
{
	uint8_t sub[crypto_auth_KEYBYTES];
	int ok;

	stream_subkey(key, sub);
	ok = crypto_auth_verify(mac, hash, hlen, sub) == 0;
	sodium_memzero(sub, sizeof(sub));
	return ok;
}

int
tl_secret_unhex(const char *s, uint8_t *out, size_t n)
{
	size_t got = 0;

	if (strlen(s) != 2 * n ||
	    sodium_hex2bin(out, n, s, 2 * n, NULL, &got, NULL) != 0 ||
	    got != n)
		return TL_EINVAL;
	return 0;
}

int
tl_secret_leader_key_parse(const char *hex, uint8_t pk[TL_SIGN_PUBLEN])
{
	size_t n = strlen(hex), bin = 0;

	if (n > 0 && hex[n - 1] == '\n')
		n--;
	if (n != 2 * TL_SIGN_PUBLEN ||
	    sodium_hex2bin(pk, TL_SIGN_PUBLEN, hex, n, NULL, &bin,
	    NULL) != 0 || bin != TL_SIGN_PUBLEN)
		return TL_EINVAL;
	return 0;
}

int
tl_secret_leader_key_load(const char *path, uint8_t pk[TL_SIGN_PUBLEN],
    char *why)
{
	char buf[2 * TL_SIGN_PUBLEN + 8];
	size_t n;
	FILE *f;
	int rc;

	why[0] = '\0';
	if ((f = fopen(path, "r")) == NULL) {
		rc = errno;
		snprintf(why, TL_WHY_MAX, "%s: %s", path, strerror(rc));
		return rc;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (tl_secret_leader_key_parse(buf, pk) != 0) {
		snprintf(why, TL_WHY_MAX, "%s does not hold a signing key (64 "
		    "hex digits)", path);
		return TL_EINVAL;
	}
	return 0;
}
