/*
 * delivery.h - the node's wire format of a delivery: the plaintext
 * inside the sealed box of a credential.delivered event, written by
 * reactors/deliver.c, read by tally-node and tally env.
 *
 * It is framed by length, so no byte of a value (a provider's, which a
 * hostile or buggy identity provider controls) can change what the
 * delivery says it is.  Format 3 (TL_DLV_FORMAT); every integer
 * big-endian, nothing after the last variable:
 *
 *   "\0TD3"                              magic (a format 2 text starts '#')
 *   u16 len, grant                       the grant's id
 *   u16 len, holder                      MODULE@NODE
 *   u64 version                          the credential's version, >= 1
 *   TL_DLV_PROOF_LEN bytes               the proof key (reactors/ack.h)
 *   u32 count
 *   count x { u8 kind ('d' an env default, 'v' a value),
 *             u16 len, name, u32 len, value }
 *
 * grant, holder and names hold no NUL; names are 1..TL_DLV_NAME_MAX
 * bytes.  Values are any bytes.
 *
 * Format 2 (deliveries of before, rule 4) is text and is read strictly:
 * the first line "#tally grant=G holder=H version=N", the second
 * "#proof HEX" (2 * TL_DLV_PROOF_LEN hex digits), then only lines
 * "#default NAME=VALUE" and "NAME=VALUE", each ended by '\n'.
 * Anything else (a header line further down, a line without '=') makes
 * the whole delivery TL_EMALFORMED: such a line is a value that had a
 * newline in it, and what the rest means cannot be known.
 */
#ifndef TL_DELIVERY_H
#define TL_DELIVERY_H

#include <stddef.h>
#include <stdint.h>

#define TL_DLV_FORMAT		3
#define TL_DLV_PROOF_LEN	32
#define TL_DLV_GRANT_MAX	200
#define TL_DLV_HOLDER_MAX	139
#define TL_DLV_NAME_MAX		255
#define TL_DLV_MAX		(1u << 20)	/* a whole delivery */

/* One variable; name and value point into the decoded plaintext. */
struct tl_dlv_var {
	const char	*name;		/* not NUL-terminated */
	size_t		 name_len;
	const uint8_t	*value;
	size_t		 value_len;
	int		 is_default;	/* a module's declared env default */
};

/*
 * A decoded delivery.  vars borrow from the plaintext given to
 * tl_dlv_decode: valid while it is, and as secret as it is.  A zeroed
 * struct is valid; tl_dlv_free wipes the proof and frees vars.
 */
struct tl_dlv {
	int		   format;	/* 2 or 3 */
	char		   grant[TL_DLV_GRANT_MAX + 1];
	char		   holder[TL_DLV_HOLDER_MAX + 1];
	uint64_t	   version;
	uint8_t		   proof[TL_DLV_PROOF_LEN];
	struct tl_dlv_var *vars;
	size_t		   nvars;
};

/*
 * Decodes len bytes of plaintext (either format) into d.  0;
 * TL_EMALFORMED for anything truncated, overlong, out of order or not
 * a delivery (d is then zeroed); ENOMEM.
 */
int	tl_dlv_decode(const void *plain, size_t len, struct tl_dlv *d);
void	tl_dlv_free(struct tl_dlv *d);

/*
 * Encoding, format 3, into guarded memory (core/secret.h: the
 * plaintext holds the credential).  begin, then var for each variable,
 * then finish, which yields the bytes (owned by e, valid until
 * tl_dlv_enc_restart or tl_dlv_enc_free, which wipe them).  restart is
 * begin on an encoder begun before (or TL_DLV_ENC_INIT): it keeps the
 * guarded buffer, since allocating guarded memory costs system calls
 * and a pass makes many deliveries; tl_dlv_enc_free ends it.  Errors
 * are sticky: finish
 * returns the first (TL_EINVAL for a field that cannot be framed,
 * TL_ETOOBIG past TL_DLV_MAX, ENOMEM).
 */
struct tl_dlv_enc {
	uint8_t		*p;
	size_t		 len, cap;
	size_t		 count_at;	/* where the count goes */
	uint32_t	 count;
	int		 err;
};
#define TL_DLV_ENC_INIT	{ NULL, 0, 0, 0, 0, 0 }

void	tl_dlv_enc_begin(struct tl_dlv_enc *e, const char *grant,
	    const char *holder, uint64_t version,
	    const uint8_t proof[TL_DLV_PROOF_LEN]);
void	tl_dlv_enc_restart(struct tl_dlv_enc *e, const char *grant,
	    const char *holder, uint64_t version,
	    const uint8_t proof[TL_DLV_PROOF_LEN]);
void	tl_dlv_enc_var(struct tl_dlv_enc *e, int is_default, const char *name,
	    size_t name_len, const void *value, size_t value_len);
int	tl_dlv_enc_finish(struct tl_dlv_enc *e, const uint8_t **p,
	    size_t *len);
void	tl_dlv_enc_free(struct tl_dlv_enc *e);

/*
 * Env files, as systemd's EnvironmentFile= reads them (systemd.exec(5)):
 * one NAME=VALUE line per variable.
 *
 * tl_dlv_env_check: 0 when the line can be written so that systemd
 * reads back exactly these bytes; else TL_EINVAL and *why (static text)
 * says what is wrong.  Refused: a name that is not [A-Za-z_][A-Za-z0-9_]*
 * (at most TL_DLV_NAME_MAX bytes); a value with a NUL, a newline, a
 * carriage return or any other control character but TAB (a line
 * reader anywhere would cut or join it), or that is not UTF-8 made of
 * Unicode scalar values other than noncharacters and U+FEFF (systemd
 * refuses such a file whole).
 *
 * tl_dlv_env_format: writes the line, ended by '\n', into out (which
 * holds tl_dlv_env_size(name_len, value_len) bytes; NUL-terminated) and
 * returns its length.  A value of only ASCII letters, digits and
 * !#%&()*+,-./:;<=>?@[]^_{|}~ (or empty) is written as it is; any other
 * is written in double quotes with '\', '"', '`' and '$' preceded by a
 * backslash, which systemd's double-quoted values take back off.  For a
 * line that tl_dlv_env_check accepted only.
 */
int	tl_dlv_env_check(const char *name, size_t name_len, const void *value,
	    size_t value_len, const char **why);
size_t	tl_dlv_env_size(size_t name_len, size_t value_len);
size_t	tl_dlv_env_format(const char *name, size_t name_len,
	    const void *value, size_t value_len, char *out);

#endif
