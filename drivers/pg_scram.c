/*
 * pg_scram.c - SCRAM-SHA-256 verifiers compared on tally's side, with a
 * cache of the answers (pg_scram.h says why and what it holds).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "pg_scram.h"

#define SCRAM_PREFIX	"SCRAM-SHA-256$"
#define SCRAM_ITER_MAX	1000000		/* more: not one tally computed */
#define SCRAM_SALT_MAX	64
#define DIGEST_LEN	16

static pthread_mutex_t	cache_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t		(*cache)[DIGEST_LEN];	/* all-zero: empty slot */
static size_t		cache_n;
static uint8_t		cache_key[crypto_generichash_KEYBYTES];

/* The digest of (login, password, verifier) under the process key. */
static void
digest(const char *verifier, const char *login, const char *password,
    uint8_t out[DIGEST_LEN])
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, cache_key, sizeof(cache_key), DIGEST_LEN);
	crypto_generichash_update(&st, (const uint8_t *)login,
	    strlen(login) + 1);
	crypto_generichash_update(&st, (const uint8_t *)password,
	    strlen(password) + 1);
	crypto_generichash_update(&st, (const uint8_t *)verifier,
	    strlen(verifier));
	crypto_generichash_final(&st, out, DIGEST_LEN);
	sodium_memzero(&st, sizeof(st));
	/* All-zero marks an empty slot: never a digest. */
	out[0] |= 1;
}

/* With cache_mu held: the table, made on first use. */
static int
cache_ready(void)
{
	if (cache != NULL)
		return 0;
	if (sodium_init() < 0)
		return ENOMEM;
	if ((cache = calloc(TL_PG_SCRAM_CACHE, DIGEST_LEN)) == NULL)
		return ENOMEM;
	randombytes_buf(cache_key, sizeof(cache_key));
	cache_n = 0;
	return 0;
}

/* With cache_mu held: whether d is there; add: put it there. */
static int
cache_probe(const uint8_t d[DIGEST_LEN], int add)
{
	static const uint8_t zero[DIGEST_LEN];
	size_t i, mask = TL_PG_SCRAM_CACHE - 1;
	uint64_t h;

	memcpy(&h, d, sizeof(h));
	for (i = (size_t)h & mask;; i = (i + 1) & mask) {
		if (memcmp(cache[i], d, DIGEST_LEN) == 0)
			return 1;
		if (memcmp(cache[i], zero, DIGEST_LEN) == 0)
			break;
	}
	if (!add)
		return 0;
	/* Three quarters full: start again rather than probe long runs. */
	if (cache_n >= TL_PG_SCRAM_CACHE / 4 * 3) {
		memset(cache, 0, (size_t)TL_PG_SCRAM_CACHE * DIGEST_LEN);
		cache_n = 0;
		return cache_probe(d, 1);
	}
	memcpy(cache[i], d, DIGEST_LEN);
	cache_n++;
	return 0;
}

static int
cached(const char *verifier, const char *login, const char *password,
    int add)
{
	uint8_t d[DIGEST_LEN];
	int rc;

	pthread_mutex_lock(&cache_mu);
	if ((rc = cache_ready()) == 0) {
		digest(verifier, login, password, d);
		rc = cache_probe(d, add);
	} else
		rc = -rc;
	pthread_mutex_unlock(&cache_mu);
	return rc;
}

/* HMAC-SHA-256(key, msg) */
static void
hmac(const uint8_t *key, size_t kn, const void *msg, size_t mn, uint8_t out[32])
{
	crypto_auth_hmacsha256_state st;

	crypto_auth_hmacsha256_init(&st, key, kn);
	crypto_auth_hmacsha256_update(&st, msg, mn);
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

/* RFC 5802 Hi(): PBKDF2-HMAC-SHA-256 with one 32-byte block. */
static void
scram_hi(const char *password, const uint8_t *salt, size_t sn,
    unsigned long iter, uint8_t out[32])
{
	crypto_auth_hmacsha256_state key, st;
	uint8_t u[32], one[4] = { 0, 0, 0, 1 };
	unsigned long i;
	int k;

	crypto_auth_hmacsha256_init(&key, (const uint8_t *)password,
	    strlen(password));
	st = key;
	crypto_auth_hmacsha256_update(&st, salt, sn);
	crypto_auth_hmacsha256_update(&st, one, sizeof(one));
	crypto_auth_hmacsha256_final(&st, u);
	memcpy(out, u, 32);
	for (i = 1; i < iter; i++) {
		st = key;	/* the key's pads once, not per iteration */
		crypto_auth_hmacsha256_update(&st, u, 32);
		crypto_auth_hmacsha256_final(&st, u);
		for (k = 0; k < 32; k++)
			out[k] ^= u[k];
	}
	sodium_memzero(&key, sizeof(key));
	sodium_memzero(&st, sizeof(st));
	sodium_memzero(u, sizeof(u));
}

/* Decodes standard base64 of [s, end) into exactly want bytes (or up to max). */
static int
b64(const char *s, const char *end, uint8_t *out, size_t max, size_t *n)
{
	return sodium_base642bin(out, max, s, (size_t)(end - s), NULL, n,
	    NULL, sodium_base64_VARIANT_ORIGINAL);
}

/* 1: password's verifier, 0: not (or not a SCRAM-SHA-256 verifier). */
static int
compute_match(const char *v, const char *password)
{
	uint8_t salt[SCRAM_SALT_MAX], stored[32], server[32], salted[32],
	    ck[32], sk[32], h[32];
	const char *p, *colon, *dollar, *colon2;
	unsigned long iter;
	char *e;
	size_t sn, n;
	int ok = 0;

	if (strncmp(v, SCRAM_PREFIX, sizeof(SCRAM_PREFIX) - 1) != 0)
		return 0;
	p = v + sizeof(SCRAM_PREFIX) - 1;
	iter = strtoul(p, &e, 10);
	if (e == p || *e != ':' || iter == 0 || iter > SCRAM_ITER_MAX)
		return 0;
	colon = e;
	if ((dollar = strchr(colon + 1, '$')) == NULL ||
	    (colon2 = strchr(dollar + 1, ':')) == NULL)
		return 0;
	if (b64(colon + 1, dollar, salt, sizeof(salt), &sn) != 0 ||
	    b64(dollar + 1, colon2, stored, sizeof(stored), &n) != 0 ||
	    n != 32 ||
	    b64(colon2 + 1, colon2 + 1 + strlen(colon2 + 1), server,
	    sizeof(server), &n) != 0 || n != 32)
		return 0;
	/* tally's passwords are ASCII: SASLprep leaves them as they are. */
	scram_hi(password, salt, sn, iter, salted);
	hmac(salted, 32, "Client Key", 10, ck);
	crypto_hash_sha256(h, ck, 32);
	hmac(salted, 32, "Server Key", 10, sk);
	ok = sodium_memcmp(h, stored, 32) == 0 &&
	    sodium_memcmp(sk, server, 32) == 0;
	sodium_memzero(salted, sizeof(salted));
	sodium_memzero(ck, sizeof(ck));
	sodium_memzero(sk, sizeof(sk));
	sodium_memzero(h, sizeof(h));
	return ok;
}

int
tl_pg_scram_match(const char *verifier, const char *login,
    const char *password)
{
	if (verifier == NULL || password == NULL || login == NULL)
		return 0;
	/* Without memory for the cache the answer is computed each time. */
	if (cached(verifier, login, password, 0) == 1)
		return 1;
	if (!compute_match(verifier, password))
		return 0;	/* a mismatch is not cached: it is repaired */
	(void)cached(verifier, login, password, 1);
	return 1;
}

void
tl_pg_scram_remember(const char *verifier, const char *login,
    const char *password)
{
	if (verifier != NULL && login != NULL && password != NULL)
		(void)cached(verifier, login, password, 1);
}

void
tl_pg_scram_forget(void)
{
	pthread_mutex_lock(&cache_mu);
	if (cache != NULL) {
		memset(cache, 0, (size_t)TL_PG_SCRAM_CACHE * DIGEST_LEN);
		cache_n = 0;
	}
	pthread_mutex_unlock(&cache_mu);
}
