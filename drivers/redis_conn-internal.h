/*
 * redis_conn-internal.h - the redis driver's connection to a server
 * (drivers/redis_conn.c), for drivers/redis.c alone.
 *
 * One connection, whichever way it is protected (the setting tls):
 * off is hiredis's own blocking context; require and verify are TLS by
 * OpenSSL (hiredis 0.14 has none), the bytes of a command made by
 * redisFormatCommandArgv and the replies parsed by a redisReader, so
 * the protocol is hiredis's either way.  The driver appends commands
 * and reads their replies through the calls below and never knows
 * which transport it has.
 *
 * Errors of the connection are hiredis's codes (REDIS_ERR_IO,
 * REDIS_ERR_EOF, REDIS_ERR_PROTOCOL, REDIS_ERR_OOM) with a message; a
 * connection in error stays so (the driver dials again).
 */
#ifndef TL_DRV_REDIS_CONN_INTERNAL_H
#define TL_DRV_REDIS_CONN_INTERNAL_H

#include <hiredis/hiredis.h>

#include "decl.h"

struct tl_drv_rd_conn;

/* Where to connect, and how. */
struct tl_drv_rd_dial {
	const char	*host;
	const char	*port;		/* 1-65535 */
	enum tl_drv_tls	 tls;
	/* verify: the PEM file of the CAs the server's chain ends in. */
	const char	*ca_file;
	/* The connection and the handshake, then each wait for I/O. */
	int		 timeout_s;
	/*
	 * TLS: the client certificate (PEM, chain leaf first) and its key
	 * presented when the server asks for one; both NULL: none.  The
	 * caller's, borrowed for the call (the admin's session has them,
	 * a consumer's login never).
	 */
	const char	*client_cert;
	const char	*client_key;
};
#define TL_DRV_RD_DIAL_INIT { NULL, NULL, TL_DRV_TLS_OFF, NULL, 5, NULL, NULL }

/*
 * Connects (and, with TLS, completes the handshake and the checks of
 * the server's certificate, before anything is sent): 0 and *out;
 * TL_EINVAL for a bad port or a client certificate OpenSSL refuses;
 * TL_EUNTRUSTED when tls is verify and the server's certificate does
 * not chain to ca_file or does not name host (or there is no ca_file),
 * or the handshake fails; TL_EAUTH when the server ends the handshake
 * with an alert about the client's certificate (TLS 1.2: refused, or
 * asked for and none presented); TL_EUNREACH when the server does not
 * answer.  why says which.  Under TLS 1.3 the server judges the
 * client's certificate after the client's handshake is done: its alert
 * is the first reply's error (tl_drv_rd_cert_refused).
 */
int	tl_drv_rd_connect(const struct tl_drv_rd_dial *d,
	    struct tl_drv_rd_conn **out, char *why);
/* Closes c (NULL: nothing). */
void	tl_drv_rd_conn_free(struct tl_drv_rd_conn *c);

/*
 * Adds a command (each argv[i] one argument, nothing interpolated) to
 * what is sent at the next tl_drv_rd_reply: 0, or REDIS_ERR (out of
 * memory, or the connection is in error).
 */
int	tl_drv_rd_append(struct tl_drv_rd_conn *c, int argc,
	    const char **argv);
/*
 * Sends what was appended, then the next reply into *r (the caller
 * frees it, freeReplyObject): REDIS_OK, or REDIS_ERR with the
 * connection in error (tl_drv_rd_err).
 */
int	tl_drv_rd_reply(struct tl_drv_rd_conn *c, redisReply **r);
/* tl_drv_rd_append then tl_drv_rd_reply: the reply, or NULL. */
redisReply *tl_drv_rd_command(struct tl_drv_rd_conn *c, int argc,
	    const char **argv);

/* The connection's error (0: none) and its message. */
int	tl_drv_rd_err(const struct tl_drv_rd_conn *c);
const char *tl_drv_rd_errstr(const struct tl_drv_rd_conn *c);
/*
 * 1 when the server ended the connection (in error now) with an alert
 * about the client's certificate: unknown CA, bad, expired, revoked,
 * unknown, unsupported, access denied, or a certificate required and
 * none presented; tl_drv_rd_errstr says which, tl_drv_rd_err is
 * REDIS_ERR_OTHER (not an I/O error: a new connection would be refused
 * again).  Else 0.
 */
int	tl_drv_rd_cert_refused(const struct tl_drv_rd_conn *c);
/* "plaintext", "TLS, not verified" or "TLS, verified". */
const char *tl_drv_rd_protection(const struct tl_drv_rd_conn *c);

#endif /* TL_DRV_REDIS_CONN_INTERNAL_H */
