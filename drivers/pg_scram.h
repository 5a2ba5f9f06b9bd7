/*
 * pg_scram.h - comparing a PostgreSQL SCRAM-SHA-256 verifier with a
 * password, for the bulk check (drivers/postgres.c only).
 *
 * The server keeps SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
 * (RFC 5802/7677) in pg_authid.rolpassword.  Whether a password is the
 * one behind it is decided by recomputing both keys with the stored
 * salt: 4096 PBKDF2 iterations, the cost of a login on tally's side,
 * so the answer is cached in memory (never on disk), and the verifiers
 * the driver computes itself when it sets a password are cached when
 * they are sent.  The cache holds keyed BLAKE2b digests of (login,
 * password, verifier) under a random per-process key: it holds no
 * password and lets nobody test one.  It is lost at exit (the first
 * pass after a start pays the PBKDF2 once per grant) and emptied when
 * full (TL_PG_SCRAM_CACHE entries).
 *
 * All functions are thread-safe (one mutex around the cache); the
 * strings are borrowed for the call.
 */
#ifndef TL_PG_SCRAM_H
#define TL_PG_SCRAM_H

#define TL_PG_SCRAM_CACHE	(1u << 16)	/* entries, 16 bytes each */

/*
 * 1 when verifier is a SCRAM-SHA-256 verifier of password for login, 0
 * when it is not (another password, another method, NULL: no password).
 * Never fails: without memory for the cache it computes every time.
 */
int	tl_pg_scram_match(const char *verifier, const char *login,
	    const char *password);
/* Caches that verifier is password's (a verifier the driver computed). */
void	tl_pg_scram_remember(const char *verifier, const char *login,
	    const char *password);
/* Empties the cache (tests: the next match recomputes). */
void	tl_pg_scram_forget(void);

#endif
