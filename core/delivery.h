/*
 * delivery.h - the node's wire format of a delivery: the plaintext
 * inside the sealed box of a credential.delivered event, written by
 * reactors/deliver.c, read by tally-node and tally env.
 *
 * It is framed by length, so no byte of a value (a provider's, which a
 * hostile or buggy identity provider controls) can change what the
 * delivery says it is.  Format 3 (TL_DLV_FORMAT); every integer
 * big-endian, nothing after the last item:
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
 * Format 4 (TL_DLV_FORMAT_FILES, magic "\0TD4") is format 3 with two
 * more kinds of item; the encoder writes it only when a delivery holds
 * one of them, so an agent that knows format 3 alone keeps reading
 * every other delivery and refuses (fails closed on) one it could not
 * write whole:
 *   'f' a file the node writes beside the variables:
 *       u16 len, name, u32 len, content
 *       name: [a-z0-9][a-z0-9-]*\.pem, at most TL_DLV_FILE_NAME_MAX
 *       bytes (never an env variable's name, never a '/'); content any
 *       bytes, at most TL_DLV_FILE_MAX; no two files of one delivery
 *       share a name; at most TL_DLV_FILES_MAX files.
 *   'r' a value with references to files:
 *       u16 len, name, u32 len, value, u16 nrefs,
 *       nrefs x { u32 offset, u16 len, file }
 *       1..65535 references, offsets non-decreasing and <= the value's
 *       length; each file is the name of an 'f' item of the same
 *       delivery (before or after it).  The variable's value is value
 *       with, inserted at each offset (of value as sent), the absolute
 *       path of that file where the reader wrote it (tl_dlv_resolve).
 *   'k' a private key the node makes itself and the certificate it
 *       will be given for it (a grant whose credential is a certificate):
 *       u16 len, key file; u16 len, certificate file (file names as an
 *       'f' item's, the two different and no 'f' item's); u16 len, cn
 *       (1..TL_DLV_CN_MAX bytes, no control character); u8 nsans
 *       (<= TL_DLV_SANS_MAX), nsans x { u16 len, san (1..253 bytes of
 *       [A-Za-z0-9.:*-]) }.  At most one per delivery.  Neither file's
 *       bytes are in the delivery: the reader makes the key (kept for
 *       this grant and version, never sent anywhere), asks for a
 *       certificate of exactly cn and sans, and writes the one the
 *       control plane issues under the certificate file's name.  An 'r'
 *       item may reference either file.
 *   'n' a variable whose value is when that certificate expires:
 *       u16 len, name, u32 0 (the framing of a 'v' item with no value;
 *       any other length is malformed); only in a delivery with a 'k'
 *       item.  The reader writes the not-after of the certificate it
 *       holds for the 'k' item as RFC 3339 UTC, YYYY-MM-DDTHH:MM:SSZ
 *       (a renewal's new certificate, a new value).
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
#define TL_DLV_FORMAT_FILES	4
#define TL_DLV_PROOF_LEN	32
#define TL_DLV_GRANT_MAX	200
#define TL_DLV_HOLDER_MAX	139
#define TL_DLV_NAME_MAX		255
#define TL_DLV_MAX		(1u << 20)	/* a whole delivery */
#define TL_DLV_FILE_NAME_MAX	64
#define TL_DLV_FILE_MAX		(64u << 10)	/* a file's content */
#define TL_DLV_FILES_MAX	16		/* files in one delivery */
#define TL_DLV_REFS_MAX		65535		/* references in one value */
#define TL_DLV_CN_MAX		64		/* X.509's ub-common-name */
#define TL_DLV_SANS_MAX		16
#define TL_DLV_SAN_MAX		253

/* The kinds of variable (the wire's kind byte). */
#define TL_DLV_DEFAULT		'd'	/* a module's declared env default */
#define TL_DLV_VALUE		'v'	/* a value, as it is */
#define TL_DLV_REFS		'r'	/* a value with references to files */
#define TL_DLV_NOT_AFTER	'n'	/* the 'k' certificate's not-after */

/*
 * Where a file's path goes in a variable's value: at offset (bytes of
 * the value as sent, before any insertion), the path of the delivery's
 * file named file (not NUL-terminated; points into the plaintext).
 */
struct tl_dlv_ref {
	size_t		 offset;
	const char	*file;
	size_t		 file_len;
};

/*
 * One variable; name, value and refs point into the decoded delivery.
 * kind TL_DLV_REFS: value is not what the variable holds until
 * resolved (tl_dlv_resolve); refs has nrefs >= 1 entries, offsets
 * non-decreasing, each file one of the delivery's files.  Kind
 * TL_DLV_NOT_AFTER: value empty, the reader fills it (the 'n' item).
 * Other kinds: refs NULL, nrefs 0.
 */
struct tl_dlv_var {
	const char	*name;		/* not NUL-terminated */
	size_t		 name_len;
	const uint8_t	*value;
	size_t		 value_len;
	int		 is_default;	/* kind == TL_DLV_DEFAULT */
	int		 kind;		/* TL_DLV_DEFAULT, _VALUE, _REFS,
					   _NOT_AFTER */
	const struct tl_dlv_ref *refs;
	size_t		 nrefs;
};

/* One file ('f'); name (a valid file name) and content borrow likewise. */
struct tl_dlv_file {
	const char	*name;		/* not NUL-terminated */
	size_t		 name_len;
	const uint8_t	*content;
	size_t		 content_len;
};

/* A 'k' item: the key the node makes and what it asks a CA for. */
struct tl_dlv_keyreq {
	const char	*key_file;	/* not NUL-terminated */
	size_t		 key_file_len;
	const char	*cert_file;
	size_t		 cert_file_len;
	const char	*cn;
	size_t		 cn_len;
	const char	*sans[TL_DLV_SANS_MAX];
	size_t		 san_len[TL_DLV_SANS_MAX];
	size_t		 nsans;
};

/*
 * A decoded delivery.  vars borrow from the plaintext given to
 * tl_dlv_decode: valid while it is, and as secret as it is.  A zeroed
 * struct is valid; tl_dlv_free wipes the proof and frees vars.
 */
struct tl_dlv {
	int		   format;	/* 2, 3 or 4 */
	char		   grant[TL_DLV_GRANT_MAX + 1];
	char		   holder[TL_DLV_HOLDER_MAX + 1];
	uint64_t	   version;
	uint8_t		   proof[TL_DLV_PROOF_LEN];
	struct tl_dlv_var *vars;
	size_t		   nvars;
	struct tl_dlv_file *files;	/* format 4 only */
	size_t		   nfiles;
	struct tl_dlv_ref *refs;	/* every var's refs, owned */
	size_t		   nrefs;
	int		   has_keyreq;	/* format 4: a 'k' item */
	struct tl_dlv_keyreq keyreq;
};

/*
 * Decodes len bytes of plaintext (either format) into d.  0;
 * TL_EMALFORMED for anything truncated, overlong, out of order or not
 * a delivery (d is then zeroed); ENOMEM.  Nothing is half-read: a
 * reference to a file the delivery lacks, a bad file name, offsets out
 * of order or past the value make the whole delivery TL_EMALFORMED.
 */
int	tl_dlv_decode(const void *plain, size_t len, struct tl_dlv *d);
void	tl_dlv_free(struct tl_dlv *d);

/*
 * Encoding, format 3 (4 when a file or a reference is encoded), into
 * guarded memory (core/secret.h: the plaintext holds the credential).
 * begin, then an item for each variable and file, then finish, which
 * yields the bytes (owned by e, valid until tl_dlv_enc_restart or
 * tl_dlv_enc_free, which wipe them).  restart is begin on an encoder
 * begun before (or TL_DLV_ENC_INIT): it keeps the guarded buffer, since
 * allocating guarded memory costs system calls and a pass makes many
 * deliveries; tl_dlv_enc_free ends it.  Errors are sticky: finish
 * returns the first (TL_EINVAL for a field that cannot be framed, a
 * file name that is not one, references out of order or past the
 * value, a reference to a file the delivery does not hold; TL_ETOOBIG
 * past TL_DLV_MAX, TL_DLV_FILE_MAX or TL_DLV_FILES_MAX; ENOMEM).  What
 * finish yields, tl_dlv_decode reads back.
 *
 *   var: a 'd' (is_default) or 'v' item.
 *   file: an 'f' item; name NUL-terminated.
 *   refs: an 'r' item: value (as sent) with refs[0..nrefs) (1 or more;
 *	ref.file need not be NUL-terminated), copied.
 *   not_after: an 'n' item (finish refuses it, TL_EINVAL, without a
 *	'k' item).
 *   subst: the value a compose wrote with token (an unguessable string,
 *	not empty) wherever the path of the delivery's file named file
 *	belongs: each occurrence becomes a reference to file, and the
 *	token's bytes go; an 'r' item when the token occurs, else a 'v'
 *	item (the value as it is).
 */
struct tl_dlv_enc {
	uint8_t		*p;
	size_t		 len, cap;
	size_t		 count_at;	/* where the count goes */
	uint32_t	 count;
	int		 err;
	int		 files;		/* files encoded */
	int		 refs;		/* a reference encoded */
};
#define TL_DLV_ENC_INIT	{ NULL, 0, 0, 0, 0, 0, 0, 0 }

void	tl_dlv_enc_begin(struct tl_dlv_enc *e, const char *grant,
	    const char *holder, uint64_t version,
	    const uint8_t proof[TL_DLV_PROOF_LEN]);
void	tl_dlv_enc_restart(struct tl_dlv_enc *e, const char *grant,
	    const char *holder, uint64_t version,
	    const uint8_t proof[TL_DLV_PROOF_LEN]);
void	tl_dlv_enc_var(struct tl_dlv_enc *e, int is_default, const char *name,
	    size_t name_len, const void *value, size_t value_len);
void	tl_dlv_enc_file(struct tl_dlv_enc *e, const char *name,
	    const void *content, size_t len);
void	tl_dlv_enc_refs(struct tl_dlv_enc *e, const char *name,
	    size_t name_len, const void *value, size_t value_len,
	    const struct tl_dlv_ref *refs, size_t nrefs);
/*
 * keyreq: a 'k' item (at most one): files, cn and sans NUL-terminated;
 * TL_EINVAL for a bad name, cn or san, TL_ETOOBIG past TL_DLV_SANS_MAX.
 */
void	tl_dlv_enc_keyreq(struct tl_dlv_enc *e, const char *key_file,
	    const char *cert_file, const char *cn, const char *const *sans,
	    size_t nsans);
void	tl_dlv_enc_not_after(struct tl_dlv_enc *e, const char *name,
	    size_t name_len);
void	tl_dlv_enc_subst(struct tl_dlv_enc *e, const char *name,
	    size_t name_len, const void *value, size_t value_len,
	    const char *token, const char *file);
/*
 * subst_n: the same with nt tokens, each standing for the file of the
 * same index: every occurrence of any of them becomes a reference to
 * its file (a value that names a certificate, its key and a CA).
 */
void	tl_dlv_enc_subst_n(struct tl_dlv_enc *e, const char *name,
	    size_t name_len, const void *value, size_t value_len,
	    const char *const *tokens, const char *const *files, size_t nt);
int	tl_dlv_enc_finish(struct tl_dlv_enc *e, const uint8_t **p,
	    size_t *len);
void	tl_dlv_enc_free(struct tl_dlv_enc *e);

/*
 * Resolving a variable (any kind): tl_dlv_resolved_len is the length
 * of x's value with dir_len + 1 + the file's name inserted at each
 * reference; tl_dlv_resolve writes it into out (that many bytes, not
 * NUL-terminated): at each reference, dir, '/', the file's name.  dir
 * is where the reader wrote the delivery's files (absolute, no
 * trailing '/').  A value of kind 'd' or 'v' is copied as it is.
 *
 * tl_dlv_path_ok: 1 when the path (len bytes) is not empty and only of
 * [A-Za-z0-9/._-]: a path that goes unquoted into a URI or an env
 * file; 0 otherwise (a reader refuses to insert such a path).
 *
 * tl_dlv_file_name_ok: 1 when name (len bytes) is a file name format 4
 * carries ([a-z0-9][a-z0-9-]*\.pem, at most TL_DLV_FILE_NAME_MAX).
 */
size_t	tl_dlv_resolved_len(const struct tl_dlv_var *x, size_t dir_len);
void	tl_dlv_resolve(const struct tl_dlv_var *x, const char *dir,
	    size_t dir_len, void *out);
int	tl_dlv_path_ok(const char *path, size_t len);
int	tl_dlv_file_name_ok(const char *name, size_t len);

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
