/*
 * tl_pemtest.h - what the suites of the admin's client certificate
 * share: the process's open descriptors, whether a key's bytes show in
 * a text, a key encrypted, a file read whole.
 *
 * Nothing here depends on Check (failures abort, which a forked Check
 * test reports as an error), but ck_no_key, for a suite that includes
 * check.h first.  Tests only.
 */
#ifndef TL_PEMTEST_H
#define TL_PEMTEST_H

#include <stddef.h>

/* The open descriptors of the process (the listing's own not counted). */
int	 tl_test_fds(void);
/*
 * The open descriptors whose target starts with pfx ("/memfd:admin-key":
 * a memfd's name, a file on no file system).
 */
int	 tl_test_fds_named(const char *pfx);
/*
 * 1 when any 16 characters in a row of key's body (the lines between its
 * BEGIN and END lines, at any offset) are in text, else 0.
 */
int	 tl_test_key_in(const char *text, const char *key);
/* key (PEM) encrypted with a passphrase, PKCS#8 (malloc'd, never NULL). */
char	*tl_test_key_encrypted(const char *key);
/* The whole of file path, NUL-ended (malloc'd, never NULL). */
char	*tl_test_slurp(const char *path);

#ifdef CHECK_H
#define ck_no_key(why, key)						\
	ck_assert_msg(!tl_test_key_in((why), (key)), "key bytes in why: %s", \
	    (why))
#endif

#endif /* TL_PEMTEST_H */
