/*
 * error.h - tally's error codes.
 *
 * Every tally function that can fail returns int: 0 for success, a
 * positive errno value passed through from the system, or one of the
 * negative TL_E* codes below (tally's reserved range, like LMDB's).
 * tl_strerror() describes any of them; its strings start with the
 * code's name so that a log line can be grepped back to the source.
 * They are static storage (or strerror's, for an errno value): valid
 * for the life of the program, never freed by the caller.
 */
#ifndef TL_ERROR_H
#define TL_ERROR_H

#define TL_EFIRST	(-31000)
#define TL_ENOTFOUND	(-31000)	/* no such log, key, stream or event */
#define TL_ENOTLOG	(-31001)	/* directory is not a tally log */
#define TL_ENEWER	(-31002)	/* written by a newer tally format */
#define TL_ECONFLICT	(-31003)	/* stream version did not match */
#define TL_ECORRUPT	(-31004)	/* record or chain does not verify */
#define TL_EMALFORMED	(-31005)	/* envelope or body cannot be decoded */
#define TL_ETOOBIG	(-31006)	/* a field exceeds its limit */
#define TL_EINVAL	(-31007)	/* invalid argument */
#define TL_EEXIST	(-31008)	/* already exists */
#define TL_ELMDB	(-31009)	/* LMDB failed; details in the log */
#define TL_EEOF		(-31010)	/* iteration finished */
#define TL_ELOCKED	(-31011)	/* held by another process */
#define TL_ESECRET	(-31012)	/* key missing, unsafe or wrong */
#define TL_EREFUSED	(-31013)	/* a decider refused the command */
#define TL_EDRIVER	(-31014)	/* a provider's driver failed */
#define TL_EUNREACH	(-31015)	/* provider unreachable */
#define TL_EAUTH	(-31016)	/* provider refused our credential */
#define TL_ETIMEDOUT	(-31017)	/* deadline passed */
#define TL_EMANIFEST	(-31018)	/* manifest invalid */
#define TL_EUNTRUSTED	(-31019)	/* provider's certificate not verified */
#define TL_ENOTLEADER	(-31020)	/* this control plane does not lead */
#define TL_EUNAVAIL	(-31021)	/* the cluster cannot commit now */
#define TL_ECOMPACTED	(-31022)	/* the cluster no longer holds it */
#define TL_ELAST	(-31022)

/*
 * A why: one line for a person saying what failed, beside the code.
 * Every function that takes "char *why" (and no length) writes at most
 * TL_WHY_MAX bytes there, its NUL included; its header says when why
 * may be NULL.  One size everywhere, so a caller's buffer fits every
 * callee and a message passed up is never cut short on the way.
 */
#define TL_WHY_MAX	512

const char *tl_strerror(int err);

/*
 * Whether err says the log's file is damaged: TL_ECORRUPT,
 * TL_EMALFORMED, or one of LMDB's codes for pages that do not hold
 * together (MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_BAD_TXN after one of
 * them, ...) that reached a caller untranslated.  Callers map it to
 * the "log does not verify" exit status.
 */
int	tl_err_corrupt(int err);

#endif
