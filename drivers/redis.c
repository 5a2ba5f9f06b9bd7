/*
 * redis.c - the redis driver: a cache, one ACL user per consumer.
 * These are its operations; its declaration (type, settings, fields,
 * revocation, fencing, names, compose) is redis_decl.c's.
 *
 * A grant (type redis-user) is an ACL user on a Redis 7 server and the
 * key and channel space under its prefix:
 *
 *   name	the shared scheme (drivers/naming.c) at 63 bytes:
 *		PREFIX_DIGEST, [a-z0-9_-] only (anything else is refused
 *		by names and again by every operation, so no byte of a
 *		grant id can become an ACL rule or a glob character).  The
 *		user and the prefix are that one name, for every credential
 *		version: the credential model is MULTI_PASSWORD.  A user
 *		tally adopt took over keeps its name and its prefix, which
 *		may differ; the prefix "tally" is refused (tally:* is the
 *		marks').
 *   rules	reset on #SHA256 ~NAME:* &NAME:* and the command rules of
 *		RULES below: reads and writes of keys, pub/sub, MULTI, the
 *		connection commands; never a dangerous or admin command
 *		(KEYS, FLUSHALL, FLUSHDB, CONFIG, ACL, DEBUG, MONITOR ...),
 *		no scripting or functions (shared by every user), and none
 *		of the commands that see the whole key or channel space
 *		whatever the patterns say (SCAN, RANDOMKEY, DBSIZE, PUBSUB,
 *		SELECT, CLIENT TRACKING).  Data lives in database 0.
 *   password	by its hash only (#hex: SHA-256, what Redis stores), so the
 *		plaintext never crosses the admin session.  A rotation adds
 *		the new hash beside the old (add_credential) and removes the
 *		old one (retire_credential, given the old password).
 *   marks	three keys of the admin's, out of every consumer's patterns
 *		(a grant's prefix never starts with "tally:"):
 *		tally:owner:USER holds the grant id ("" before marks named
 *		grants), tally:mesh:USER the mesh id (absent before marks
 *		named meshes, or for a home without one), tally:pw:USER the
 *		set of hashes tally set (and an adopted user's own, until
 *		the rotation that follows its adoption retires them).  A
 *		user without the first is not tally's and is refused; a
 *		user marked for another grant is refused; one whose mesh
 *		mark names another mesh is refused by every change
 *		(TL_EREFUSED, "owned by mesh ...") and is a drift to
 *		check, unless g->adopt_mesh names that mesh; a user
 *		without a mesh mark is taken as this mesh's.  Every change
 *		writes this mesh's mark.  A password hash the user has
 *		that is not in the third is a drift.
 *
 * Commands are built with hiredis's argv form (tl_drv_rd_append, over
 * redisAppendCommandArgv or redisFormatCommandArgv): every name, rule
 * and value is one argument, nothing is interpolated.  Every command
 * and reply goes through the connection of redis_conn-internal.h
 * (tl_drv_rd_append, tl_drv_rd_reply, tl_drv_rd_command), plaintext or
 * TLS as the setting tls says, the admin's session and the consumer's
 * login of check alike; the logic here is the same for both.
 *
 * The admin's client certificate (admin-cert, admin-key: for a server
 * with tls-auth-clients yes or optional) is checked when a session
 * opens (a pair that cannot be presented, or one with tls off, is
 * TL_EINVAL before any connection), kept in the handle's guarded memory
 * and presented by every connection of the admin's, a reconnection's
 * too; a consumer's login never presents it.  A server that refuses it
 * (another CA, say), or asks for one the admin does not have, makes
 * the session TL_EAUTH, why saying so.  A consumer's login refused for
 * want of a certificate of its own leaves the login unjudged (check
 * says so; the consumers' certificates are not tally's).
 *
 * The server's normal form of the command rules (ACL GETUSER's
 * "commands" is the server's own rewriting of what was set) is read
 * from a user of tally's, "tally:rules", off and without a password
 * (nobody logs in as it), set with RULES when a session opens: check
 * compares each grant's rules with it, so what is compared is what this
 * server makes of RULES.
 *
 * check_bulk: one pipeline of ACL GETUSER + the three marks for every
 * grant (one round trip); check adds a login as the consumer at the
 * endpoint.  A user that is gone is TL_DRIFT_MISSING: flagged, never
 * recreated by check, set_password or fix_privileges (the keys may
 * still be there; tally repair's create makes the user again).
 *
 * revoke: ACL SETUSER off, CLIENT KILL USER; retain keeps the keys
 * (restore is create: on, rules and password again); purge then
 * deletes the keys (SCAN MATCH NAME:* COUNT 1000 + UNLINK per batch),
 * then the user (ACL DELUSER) and the marks in one transaction, so a
 * purge cut short leaves the owner mark and is finished by the next.  Sessions cannot be told apart by
 * the password they used: retire_credential ends none (the holders
 * acknowledged the new one), and sessions counts the user's.
 *
 * Access below ownership (g->access, a requirement's access: and of:):
 * a login of its own, marked for its grant like any (the marks are keyed
 * by user, so they never touch the owner's), on the prefix g->resource
 * of another grant's user, which is never changed here.  read: keys
 * %R~PREFIX:* (Redis 7's read-only pattern) and the command rules of
 * RULES_R, the read commands and the subscribing side of pub/sub, so
 * the owner's channels can be followed but not published to; its
 * server normal form comes from a user "tally:rules:read" like
 * tally:rules's, made the first time a reader is checked (a server
 * without readers never has it).  read-write: ~PREFIX:* and RULES, as
 * the owner's user.  Both &PREFIX:*.  Every operation acts on the login
 * alone: a purge deletes the user and its marks but never a key (the
 * keys are the owner's, purged with it), and the owner's check sees
 * its own user only, so the readers beside it are no drift of its.
 *
 * tally adopt (g->adopting in create): an ACL user someone else made,
 * and the keys under its prefix, become a grant's.  The user must exist,
 * log in by password (on, not nopass), carry no mark of another grant
 * or mesh, and be neither default nor the admin; the prefix must not be
 * another tally user's.  create marks it and sets a grant's rules for
 * the prefix without reset: its passwords stay (their hashes join the
 * passwords mark, so a check before the retirement takes them for
 * tally's and a repair keeps them), no key is read or deleted.  The
 * rotation that follows adds the new version's password beside them
 * (add_credential, as any rotation); retire_credential, told adopting,
 * then keeps that one password only (resetpass and its hash in one ACL
 * SETUSER: whatever was added meanwhile goes too).
 *
 * Every change of a user is followed by ACL SAVE (setting acl-save,
 * default yes), so the users survive a restart of a server run with
 * --aclfile (the file holds hashes only); a server without a file says
 * so and is not asked again in the session.  The keys (the marks too)
 * survive as the server's persistence (RDB, AOF) says.
 *
 * The fence is a hash per mesh, tally:fence:MESH {epoch, leader},
 * raised by a small Lua script in one EVAL (atomic on the server).
 * ACL commands are refused in scripts but not in MULTI, so every
 * change is one transaction (tx_begin): WATCH the fence and the user's
 * owner and mesh marks, read and compare them (refused "deposed: ..."
 * when the fence held is not the session's, tl_drv_fence_ours), MULTI,
 * the commands, EXEC; a fence raised or a mark changed after the WATCH
 * aborts the EXEC, and the change starts again from the reads.  ACL
 * SAVE follows the EXEC (it writes what the server holds; it changes
 * no object).  A purge is one transaction per SCAN batch, then one for
 * the user and its marks.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#include <sodium.h>

#include "core/error.h"
#include "driver.h"
#include "redis.h"
#include "redis-internal.h"
#include "redis_conn-internal.h"
#include "tlsclient.h"
#include "util.h"

#define RD_HASH_HEX	64
#define RD_RULES_USER	"tally:rules"
#define RD_RULES_R_USER	"tally:rules:read"
#define RD_OWNER_PFX	"tally:owner:"
#define RD_PW_PFX	"tally:pw:"
#define RD_MESH_PFX	"tally:mesh:"
#define RD_KEY_MAX	96
#define RD_MESH_MAX	64
/* EXEC aborted by a concurrent change of a watched key: once more. */
#define RD_AGAIN	1
#define RD_LOOKUP	4	/* GETUSER and three marks, per grant */
#define RD_TRIES	8
#define RD_FENCE	"tally:fence"
#define RD_TIMEOUT_S	5
#define RD_SCAN_COUNT	"1000"

/* The command rules of every grant's user (see the top). */
static const char *const rules[] = {
	"-@all", "+@read", "+@write", "+@pubsub", "+@transaction",
	"+@connection", "-@dangerous", "-@admin", "-@scripting",
	"-function", "-scan", "-randomkey", "-dbsize", "-pubsub", "-select",
	"-client|tracking", "-keys", "-move", "-swapdb", "-flushall",
	"-flushdb", NULL
};
#define RD_NRULES	(sizeof(rules) / sizeof(rules[0]) - 1)

/*
 * A reader's (access: read, see the top): RULES's reads and the
 * subscribing half of pub/sub; no MULTI (reads need no transaction),
 * and the same exclusions, since +@read alone would let KEYS, SCAN and
 * RANDOMKEY see the whole key space whatever %R~ says.
 */
static const char *const rules_r[] = {
	"-@all", "+@read", "+@connection", "+subscribe", "+psubscribe",
	"+ssubscribe", "+unsubscribe", "+punsubscribe", "+sunsubscribe",
	"-@dangerous", "-@admin", "-@scripting", "-function", "-scan",
	"-randomkey", "-dbsize", "-pubsub", "-select", "-client|tracking",
	"-keys", NULL
};
#define RD_NRULES_R	(sizeof(rules_r) / sizeof(rules_r[0]) - 1)
#define RD_NRULES_MAX	(RD_NRULES > RD_NRULES_R ? RD_NRULES : RD_NRULES_R)

struct tl_drv_redis {
	struct tl_drv_rd_conn *c;
	char		 host[256];
	char		 port[8];
	char		 user[TL_DRV_SETTING_MAX + 1];
	char		 password[512];
	/* How the sessions are protected (decl.h: tl_drv_tls_mode). */
	enum tl_drv_tls	 tls;
	char		*ca_file;
	/*
	 * The admin's client certificate (admin-cert, public) and its key
	 * (admin-key: here, in the guarded memory of the handle, wiped by
	 * rd_close; never on a disk), presented by every admin connection
	 * (a reconnection too), never by a consumer's login; NULL and ""
	 * when there is none.  subject: the certificate's, for open's why.
	 */
	char		*client_cert;
	char		 client_key[TL_DRV_KEY_MAX + 1];
	char		 subject[256];
	/* The server's normal form of rules, and its flags (off aside). */
	char		*ref_cmds;
	/* rules_r's; NULL until a reader is checked. */
	char		*ref_rcmds;
	char		 ref_flags[256];
	/* ACL SAVE after a change (acl-save); 0 once the server has no file. */
	int		 acl_save;
	/* The mesh (tl_drv_admin.mesh; "" before ids) and the fence. */
	char		 mesh[RD_MESH_MAX + 1];
	int		 fenced;
	uint64_t	 epoch;
	char		 leader[TL_DRV_LEADER_MAX];
	char		 fence_key[128];
	/* Inside WATCH .. EXEC: the connection is never replaced then. */
	int		 in_tx, in_multi;
	/* Appended since MULTI (itself included), replies not read yet. */
	int		 queued;
};

/*
 * A server message without what might be a credential: the server
 * echoes a modifier it refuses ('#hash', '>password'), so a quoted part
 * goes.
 */
static void
scrub(const char *msg, char *out, size_t cap)
{
	const char *q = strchr(msg, '\'');

	if (q != NULL && strchr(q + 1, '\'') != NULL)
		snprintf(out, cap, "%.*s'...'%s", (int)(q - msg), msg,
		    strchr(q + 1, '\'') + 1);
	else
		snprintf(out, cap, "%s", msg);
}

/*
 * The grant's user and prefix, refused unless they are names the driver
 * may send.  They differ only for a user tally adopt took over, whose
 * prefix the operator named: "tally" would give it every mark and
 * fence.
 */
static int
grant_ok(const struct tl_drv_grant *g, char *why)
{
	if (!tl_drv_rd_valid_name(g->resource) ||
	    !tl_drv_rd_valid_name(g->login) ||
	    (!g->adopted && !g->adopting && !g->access &&
	    strcmp(g->resource, g->login) != 0))
		return tl_drv_why(why, TL_EINVAL, "not a redis grant's names "
		    "(a user and a prefix of [a-z0-9_-], at most 63 bytes, one "
		    "name unless tally adopt took the user over)");
	/* The owner's user is the prefix's: a reader as it would change it. */
	if (g->access && (strcmp(g->resource, g->login) == 0 ||
	    (g->owner != NULL && strcmp(g->owner, g->login) == 0)))
		return tl_drv_why(why, TL_EINVAL, "user %s: a login with access "
		    "to prefix %s is a user of its own, not its owner's",
		    g->login, g->resource);
	if (strcmp(g->resource, "tally") == 0)
		return tl_drv_why(why, TL_EINVAL, "prefix tally: its keys are "
		    "tally's marks and fences; refused");
	return 0;
}

/*
 * g's key and channel patterns (80 bytes each) and command rules: a
 * reader's %R~ and RULES_R, else RULES (see the top).
 */
static const char *const *
grant_rules(const struct tl_drv_grant *g, char *keys, char *chans,
    size_t *n)
{
	int r = g->access == TL_DRV_ACCESS_READ;

	snprintf(keys, 80, "%s~%s:*", r ? "%R" : "", g->resource);
	snprintf(chans, 80, "&%s:*", g->resource);
	*n = r ? RD_NRULES_R : RD_NRULES;
	return r ? rules_r : rules;
}

static void
sha256hex(const char *pw, char out[RD_HASH_HEX + 1])
{
	unsigned char h[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(h, (const unsigned char *)pw, strlen(pw));
	sodium_bin2hex(out, RD_HASH_HEX + 1, h, sizeof(h));
	sodium_memzero(h, sizeof(h));
}

/*
 * A connection to host:port within RD_TIMEOUT_S, protected as the
 * session's setting tls says (redis_conn-internal.h): TL_EUNTRUSTED
 * when a certificate does not verify, before anything is sent.  admin:
 * the admin's (its client certificate presented when the server asks),
 * else a consumer's login (none).
 */
static int
dial(const struct tl_drv_redis *h, const char *host, const char *port,
    int admin, struct tl_drv_rd_conn **cp, char *why)
{
	struct tl_drv_rd_dial d = TL_DRV_RD_DIAL_INIT;

	d.host = host;
	d.port = port;
	d.tls = h->tls;
	d.ca_file = h->ca_file;
	d.timeout_s = RD_TIMEOUT_S;
	if (admin && h->client_cert != NULL) {
		d.client_cert = h->client_cert;
		d.client_key = h->client_key;
	}
	return tl_drv_rd_connect(&d, cp, why);
}

/* Said when the admin, presenting no certificate, is refused for it. */
#define RD_CERT_HINT	"; give the admin one: tally assign ... --set " \
	"admin-cert=FILE --secret admin-key"

/*
 * What a failed command on c is, why "what: the connection's error":
 * TL_EAUTH when the server refused the connection for its client
 * certificate (refused, or none presented: hint, when not NULL, follows
 * then), else TL_EUNREACH.
 */
static int
lost(const struct tl_drv_rd_conn *c, const char *hint, const char *what,
    char *why)
{
	if (tl_drv_rd_cert_refused(c))
		return tl_drv_why(why, TL_EAUTH, "%s: %s%s", what,
		    tl_drv_rd_errstr(c), hint != NULL ? hint : "");
	return tl_drv_why(why, TL_EUNREACH, "%s: %s", what,
	    tl_drv_rd_errstr(c));
}

/* lost, for the admin's session. */
static int
admin_lost(const struct tl_drv_redis *h, const char *what, char *why)
{
	return lost(h->c, h->client_cert == NULL ? RD_CERT_HINT : NULL, what,
	    why);
}

/*
 * AUTH user password on c: 0; TL_EAUTH when the server refuses the
 * credential (*refused 1 when refused is not NULL: the caller decides
 * what that means) or the connection for its client certificate
 * (*refused 0; hint as lost's); TL_EUNREACH when the connection fails.
 */
static int
auth(struct tl_drv_rd_conn *c, const char *user, const char *password,
    int *refused, const char *hint, char *why)
{
	const char *argv[3] = { "AUTH", user, password };
	redisReply *r;
	int rc = 0;
	char what[128];

	if (refused != NULL)
		*refused = 0;
	r = tl_drv_rd_command(c, 3, argv);
	if (r == NULL) {
		snprintf(what, sizeof(what), "AUTH as %s", user);
		return lost(c, hint, what, why);
	}
	if (r->type == REDIS_REPLY_ERROR) {
		char m[256];

		scrub(r->str, m, sizeof(m));
		rc = tl_drv_why(why, TL_EAUTH, "AUTH as %s refused: %s", user,
		    m);
		if (refused != NULL)
			*refused = 1;
	}
	freeReplyObject(r);
	return rc;
}

static void rd_close(void *hv);

/* The session, connected again if the last command lost it. */
static int
ensure(struct tl_drv_redis *h, char *why)
{
	int rc;

	if (h->c != NULL && tl_drv_rd_err(h->c) == 0)
		return 0;
	/* A new connection would not be watching: the change fails. */
	if (h->in_tx)
		return tl_drv_why(why, TL_EUNREACH, "the session was lost "
		    "inside a transaction: %s", h->c != NULL ?
		    tl_drv_rd_errstr(h->c) : "closed");
	if (h->c != NULL) {
		tl_drv_rd_conn_free(h->c);
		h->c = NULL;
	}
	if ((rc = dial(h, h->host, h->port, 1, &h->c, why)) != 0)
		return rc;
	if (h->password[0] != '\0' &&
	    (rc = auth(h->c, h->user, h->password, NULL, h->client_cert ==
	    NULL ? RD_CERT_HINT : NULL, why)) != 0) {
		tl_drv_rd_conn_free(h->c);
		h->c = NULL;
		return rc;
	}
	return 0;
}

/*
 * One command: 0 and *rp (the caller frees it) unless the server
 * answered an error (TL_EDRIVER, the message scrubbed, what naming the
 * step) or the connection failed (TL_EUNREACH).  A session the server
 * closed (a restart, ACL LOAD, a client kill) is opened again and the
 * command sent once more: every command here may be repeated.
 */
static int
cmd(struct tl_drv_redis *h, int argc, const char **argv, redisReply **rp,
    const char *what, char *why)
{
	redisReply *r;
	char m[256];
	int rc, tries = 0;

	*rp = NULL;
again:
	if ((rc = ensure(h, why)) != 0)
		return rc;
	if ((r = tl_drv_rd_command(h->c, argc, argv)) == NULL) {
		if (!h->in_tx && tries++ == 0 &&
		    (tl_drv_rd_err(h->c) == REDIS_ERR_EOF ||
		    tl_drv_rd_err(h->c) == REDIS_ERR_IO))
			goto again;
		return admin_lost(h, what, why);
	}
	if (r->type == REDIS_REPLY_ERROR) {
		scrub(r->str, m, sizeof(m));
		rc = tl_drv_why(why, strncmp(r->str, "NOPERM", 6) == 0 ?
		    TL_EAUTH : TL_EDRIVER, "%s: %s", what, m);
		freeReplyObject(r);
		return rc;
	}
	*rp = r;
	return 0;
}

/*
 * cmd without a reply to read.  Inside MULTI the command is only
 * appended to the pipeline: tx_exec sends it with EXEC and reads what
 * the server said of it.
 */
static int
run(struct tl_drv_redis *h, int argc, const char **argv, const char *what,
    char *why)
{
	redisReply *r;
	int rc;

	if (h->in_multi) {
		if (tl_drv_rd_append(h->c, argc, argv) != REDIS_OK)
			return tl_drv_why(why, ENOMEM, "%s: out of memory",
			    what);
		h->queued++;
		return 0;
	}
	if ((rc = cmd(h, argc, argv, &r, what, why)) == 0)
		freeReplyObject(r);
	return rc;
}

/*
 * Writes the server's users to its ACL file (--aclfile), so what tally
 * changed survives a restart of the server; a server without one says
 * so once, and the session stops asking (its users then live in memory
 * or in a configuration file the operator rewrites).
 */
static int
persist(struct tl_drv_redis *h, char *why)
{
	const char *argv[2] = { "ACL", "SAVE" };
	redisReply *r;
	int rc;

	if (!h->acl_save)
		return 0;
	if ((rc = ensure(h, why)) != 0)
		return rc;
	if ((r = tl_drv_rd_command(h->c, 2, argv)) == NULL)
		return admin_lost(h, "ACL SAVE", why);
	if (r->type == REDIS_REPLY_ERROR) {
		if (strstr(r->str, "not configured to use an ACL file") !=
		    NULL)
			h->acl_save = 0;
		else
			rc = tl_drv_why(why, strncmp(r->str, "NOPERM", 6) == 0 ?
			    TL_EAUTH : TL_EDRIVER, "ACL SAVE: %.200s", r->str);
	}
	freeReplyObject(r);
	return rc;
}

/* The value of name in a flat ACL GETUSER reply; NULL if absent. */
static const redisReply *
field(const redisReply *u, const char *name)
{
	size_t i;

	if (u == NULL || u->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (i = 0; i + 1 < u->elements; i += 2)
		if (u->element[i]->type == REDIS_REPLY_STRING &&
		    strcmp(u->element[i]->str, name) == 0)
			return u->element[i + 1];
	return NULL;
}

static const char *
field_str(const redisReply *u, const char *name)
{
	const redisReply *f = field(u, name);

	return f != NULL && (f->type == REDIS_REPLY_STRING ||
	    f->type == REDIS_REPLY_STATUS) ? f->str : NULL;
}

static int
has_elem(const redisReply *arr, const char *s)
{
	size_t i;

	if (arr == NULL || arr->type != REDIS_REPLY_ARRAY)
		return 0;
	for (i = 0; i < arr->elements; i++)
		if (arr->element[i]->type == REDIS_REPLY_STRING &&
		    strcmp(arr->element[i]->str, s) == 0)
			return 1;
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* rules's words, sorted, into a malloc'd array (*n of them); NULL: no memory. */
static char **
words(const char *rules_s, char **buf, size_t *n)
{
	char **v, *p, *save = NULL;
	size_t cap = 1;

	*n = 0;
	if ((*buf = strdup(rules_s)) == NULL)
		return NULL;
	for (p = *buf; *p != '\0'; p++)
		if (*p == ' ')
			cap++;
	if ((v = calloc(cap, sizeof(*v))) == NULL) {
		free(*buf);
		return NULL;
	}
	for (p = strtok_r(*buf, " ", &save); p != NULL;
	    p = strtok_r(NULL, " ", &save))
		v[(*n)++] = p;
	qsort(v, *n, sizeof(*v), cmp_str);
	return v;
}

/*
 * Whether two of the server's descriptions of command rules say the
 * same: its normal form is the categories, then each command that
 * differs from them, in an order that changes from one server process
 * to the next (ACL LOAD, a restart), and each word stands for a
 * distinct category or command, so the words are compared as a set.
 */
static int
same_rules(const char *a, const char *b)
{
	char *ba = NULL, *bb = NULL, **va, **vb;
	size_t na, nb, i;
	int same = 0;

	if (strcmp(a, b) == 0)
		return 1;
	va = words(a, &ba, &na);
	vb = words(b, &bb, &nb);
	if (va != NULL && vb != NULL && na == nb) {
		for (i = 0; i < na && strcmp(va[i], vb[i]) == 0; i++)
			;
		same = i == na;
	}
	if (va != NULL) {
		free(va);
		free(ba);
	}
	if (vb != NULL) {
		free(vb);
		free(bb);
	}
	return same;
}

/* The flags of u but on and off, space-separated, into out. */
static void
other_flags(const redisReply *u, char *out, size_t cap)
{
	const redisReply *f = field(u, "flags");
	size_t i, off = 0;

	out[0] = '\0';
	if (f == NULL || f->type != REDIS_REPLY_ARRAY)
		return;
	for (i = 0; i < f->elements && off < cap; i++) {
		const char *s = f->element[i]->str;

		if (f->element[i]->type != REDIS_REPLY_STRING ||
		    strcmp(s, "on") == 0 || strcmp(s, "off") == 0)
			continue;
		off += (size_t)snprintf(out + off, cap - off, "%s%s",
		    off ? " " : "", s);
	}
}

/*
 * A rules user (user, set with rl, nr of them): the server's normal form
 * of rl into *out, once a session; its flags into flags unless NULL.
 */
static int
load_reference(struct tl_drv_redis *h, const char *user,
    const char *const *rl, size_t nr, char **out, char *flags, char *why)
{
	const char *argv[8 + RD_NRULES_MAX];
	const char *get[3] = { "ACL", "GETUSER", user };
	const char *cmds;
	redisReply *r;
	char what[64];
	size_t i;
	int n = 0, rc;

	argv[n++] = "ACL";
	argv[n++] = "SETUSER";
	argv[n++] = user;
	argv[n++] = "reset";
	argv[n++] = "off";
	for (i = 0; i < nr; i++)
		argv[n++] = rl[i];
	snprintf(what, sizeof(what), "ACL SETUSER %s", user);
	if ((rc = run(h, n, argv, what, why)) != 0)
		return rc;
	snprintf(what, sizeof(what), "ACL GETUSER %s", user);
	if ((rc = cmd(h, 3, get, &r, what, why)) != 0)
		return rc;
	cmds = field_str(r, "commands");
	if (cmds == NULL || (*out = strdup(cmds)) == NULL) {
		freeReplyObject(r);
		return tl_drv_why(why, TL_EDRIVER, "%s: no commands in the "
		    "reply (not Redis 7?)", what);
	}
	if (flags != NULL)
		other_flags(r, flags, sizeof(h->ref_flags));
	freeReplyObject(r);
	return 0;
}

static int
rd_open(const struct tl_drv_admin *a, void **hp, char *why)
{
	struct tl_drv_redis *h;
	const char *port;
	int rc, have;

	*hp = NULL;
	/* A certificate that cannot be presented: refused before dialling. */
	if ((rc = tl_drv_client_cert_check(a->client_cert, a->client_key,
	    &have, why)) != 0)
		return rc;
	if (have && tl_drv_tls_mode(a->settings, a->host) == TL_DRV_TLS_OFF)
		return tl_drv_why(why, TL_EINVAL, "admin-cert needs tls verify "
		    "or require (a certificate is presented in a TLS "
		    "handshake; tls is off)");
	if (have && strlen(a->client_key) > TL_DRV_KEY_MAX)
		return tl_drv_why(why, TL_EINVAL, "admin-key: longer than %d "
		    "bytes", TL_DRV_KEY_MAX);
	if ((h = sodium_malloc(sizeof(*h))) == NULL)
		return tl_drv_why(why, TL_EDRIVER, "out of memory");
	memset(h, 0, sizeof(*h));
	port = a->port != NULL && *a->port != '\0' ? a->port :
	    tl_drv_setting_get(a->settings, "port");
	if (a->host == NULL || *a->host == '\0' || port == NULL ||
	    strlen(a->host) >= sizeof(h->host) ||
	    strlen(port) >= sizeof(h->port) ||
	    (a->user != NULL && strlen(a->user) >= sizeof(h->user)) ||
	    (a->password != NULL &&
	    strlen(a->password) >= sizeof(h->password)) ||
	    (a->mesh != NULL && strlen(a->mesh) > RD_MESH_MAX) ||
	    (a->fence != NULL && a->fence->mesh != NULL &&
	    strlen(a->fence->mesh) > RD_MESH_MAX)) {
		rc = tl_drv_why(why, TL_EINVAL, "a redis provider needs a host "
		    "and a port (and an admin-user and admin-password of at "
		    "most 255 and 511 bytes)");
		goto err;
	}
	{
		const char *v = tl_drv_setting_get(a->settings, "acl-save");

		h->acl_save = v == NULL || strcmp(v, "yes") == 0 ||
		    strcmp(v, "true") == 0 || strcmp(v, "on") == 0 ||
		    strcmp(v, "1") == 0;
	}
	snprintf(h->host, sizeof(h->host), "%s", a->host);
	snprintf(h->port, sizeof(h->port), "%s", port);
	h->tls = tl_drv_tls_mode(a->settings, a->host);
	if (a->ca_file != NULL && (h->ca_file = strdup(a->ca_file)) == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto err;
	}
	if (have) {
		if ((h->client_cert = strdup(a->client_cert)) == NULL) {
			rc = tl_drv_why(why, ENOMEM, "out of memory");
			goto err;
		}
		memcpy(h->client_key, a->client_key, strlen(a->client_key) + 1);
		(void)tl_drv_client_cert_subject(h->client_cert, h->subject,
		    sizeof(h->subject));
	}
	snprintf(h->user, sizeof(h->user), "%s",
	    a->user != NULL && *a->user != '\0' ? a->user : "default");
	if (a->password != NULL)
		snprintf(h->password, sizeof(h->password), "%s", a->password);
	snprintf(h->mesh, sizeof(h->mesh), "%s", a->mesh != NULL ? a->mesh :
	    "");
	if (a->fence != NULL) {
		h->fenced = 1;
		h->epoch = a->fence->epoch;
		snprintf(h->leader, sizeof(h->leader), "%s",
		    a->fence->leader != NULL ? a->fence->leader : "");
		snprintf(h->fence_key, sizeof(h->fence_key), RD_FENCE ":%s",
		    a->fence->mesh != NULL ? a->fence->mesh : h->mesh);
	}
	if ((rc = ensure(h, why)) != 0 || (rc = load_reference(h, RD_RULES_USER, rules, RD_NRULES,
	    &h->ref_cmds, h->ref_flags, why)) != 0)
		goto err;
	/* The certificate's subject is public; nothing of the key is said. */
	tl_drv_why(why, 0, "connected to Redis at %s:%s as \"%s\" (%s%s%s)",
	    h->host, h->port, h->user, tl_drv_rd_protection(h->c),
	    h->client_cert != NULL ? ", client certificate " : "",
	    h->client_cert != NULL ? h->subject : "");
	*hp = h;
	return 0;
err:
	rd_close(h);
	return rc;
}

static void
rd_close(void *hv)
{
	struct tl_drv_redis *h = hv;

	if (h == NULL)
		return;
	tl_drv_rd_conn_free(h->c);
	free(h->ref_cmds);
	free(h->ref_rcmds);
	free(h->ca_file);
	free(h->client_cert);
	sodium_free(h);	/* wipes the admin password and client key */
}

/* The mark keys of user. */
static void
mark_keys(const char *user, char owner[RD_KEY_MAX], char pw[RD_KEY_MAX],
    char mesh[RD_KEY_MAX])
{
	snprintf(owner, RD_KEY_MAX, RD_OWNER_PFX "%s", user);
	snprintf(pw, RD_KEY_MAX, RD_PW_PFX "%s", user);
	snprintf(mesh, RD_KEY_MAX, RD_MESH_PFX "%s", user);
}

/* What g's user and its marks say, as a change or a check reads them. */
struct rd_owner {
	int	exists;		/* the ACL user is there */
	int	marked;		/* -1: no owner mark, 0: another grant's, 1: g's */
	int	foreign;	/* the mesh mark names another mesh */
	int	remesh;		/* the mesh mark is to be written (or dropped) */
	char	mark[256];	/* the owner mark's grant id */
	char	mesh[RD_MESH_MAX + 1];	/* the mesh mark; "": none */
};

/*
 * Reads om (GET of the owner mark) and mm (of the mesh mark) for g: a
 * mesh mark is ours when it names this session's mesh or g->adopt_mesh;
 * none at all (marked before marks named a mesh) is ours too.  Both are
 * then marked with this mesh by the next change.
 */
static void
judge(const struct tl_drv_redis *h, const struct tl_drv_grant *g,
    const redisReply *om, const redisReply *mm, struct rd_owner *o)
{
	const char *gr = g->grant != NULL ? g->grant : "";
	const char *am = g->adopt_mesh != NULL ? g->adopt_mesh : "";

	o->mark[0] = o->mesh[0] = '\0';
	if (om == NULL || om->type != REDIS_REPLY_STRING)
		o->marked = -1;
	else {
		snprintf(o->mark, sizeof(o->mark), "%s", om->str);
		o->marked = strcmp(om->str, gr) == 0 ||
		    (om->str[0] == '\0' && g->adopt_unnamed) ? 1 : 0;
	}
	if (mm != NULL && mm->type == REDIS_REPLY_STRING)
		snprintf(o->mesh, sizeof(o->mesh), "%s", mm->str);
	o->foreign = o->mesh[0] != '\0' && strcmp(o->mesh, h->mesh) != 0 &&
	    (am[0] == '\0' || strcmp(o->mesh, am) != 0);
	o->remesh = strcmp(o->mesh, h->mesh) != 0;
}

/* Refuses what tally did not make for g, or made for another mesh. */
static int
owned(const struct tl_drv_grant *g, const struct rd_owner *o, char *why)
{
	if (o->foreign)
		return tl_drv_why(why, TL_EREFUSED, "user %s is owned by mesh "
		    "%.12s..., not this one (tally adopt --from-mesh takes it "
		    "over); refused", g->login, o->mesh);
	if (o->marked == 0)
		return tl_drv_why(why, TL_EINVAL, "user %s is marked for "
		    "another grant (%.200s); refused", g->login,
		    o->mark[0] ? o->mark : "unnamed");
	if (o->marked < 0 && o->exists)
		return tl_drv_why(why, TL_EINVAL, "user %s exists but was not "
		    "made by tally (no " RD_OWNER_PFX "%s); refused", g->login,
		    g->login);
	return 0;
}

/* owned, and the user must be there with a mark of tally's. */
static int
existing(const struct tl_drv_grant *g, const struct rd_owner *o, char *why)
{
	int rc;

	if ((rc = owned(g, o, why)) != 0)
		return rc;
	if (o->marked < 0)
		return tl_drv_why(why, TL_EINVAL, "user %s has no mark of "
		    "tally's", g->login);
	if (!o->exists)
		return tl_drv_why(why, TL_EDRIVER, "user %s is missing; not "
		    "recreated (tally repair does that)", g->login);
	return 0;
}

/*
 * Every change runs as one transaction (tx_begin, tx_multi, queued
 * commands, tx_exec): WATCH on the mesh's fence and the user's marks,
 * the fence read and compared with the session's, the marks read and
 * judged, then MULTI .. EXEC.  A promotion that raises the fence (or
 * anyone who changes a mark) after the WATCH makes EXEC run nothing
 * (RD_AGAIN: the caller reads everything again, and is then refused).
 * ACL commands cannot run in a script, but they can in MULTI.
 */
static void
tx_end(struct tl_drv_redis *h)
{
	const char *argv[1];

	if (!h->in_tx)
		return;
	argv[0] = h->in_multi ? "DISCARD" : "UNWATCH";
	if (h->c != NULL && tl_drv_rd_err(h->c) == 0 &&
	    tl_drv_rd_append(h->c, 1, argv) == REDIS_OK) {
		/* What was queued is answered first, then DISCARD. */
		for (h->queued++; h->queued > 0 && tl_drv_rd_err(h->c) == 0;
		    h->queued--) {
			redisReply *v = NULL;

			if (tl_drv_rd_reply(h->c, &v) != REDIS_OK)
				break;
			freeReplyObject(v);
		}
	}
	h->in_tx = h->in_multi = 0;
	h->queued = 0;
}

/*
 * n commands in one round trip, their replies into r[] (the caller
 * frees them): 0, or the first error reply's (TL_EDRIVER, TL_EAUTH),
 * every reply read all the same; TL_EUNREACH when the connection fails
 * (a session the server closed before answering any is opened again
 * and the commands sent once more, as cmd does).
 */
static int
pipeline(struct tl_drv_redis *h, int n, const int *argc,
    const char **const *argv, redisReply **r, const char *what, char *why)
{
	char m[256];
	int i, rc, tries = 0;

again:
	for (i = 0; i < n; i++)
		r[i] = NULL;
	if ((rc = ensure(h, why)) != 0)
		return rc;
	for (i = 0; i < n; i++)
		if (tl_drv_rd_append(h->c, argc[i], argv[i]) !=
		    REDIS_OK)
			return tl_drv_why(why, ENOMEM, "%s: out of memory",
			    what);
	for (i = 0; i < n; i++) {
		redisReply *v = NULL;

		if (tl_drv_rd_reply(h->c, &v) != REDIS_OK) {
			while (i > 0)
				freeReplyObject(r[--i]);
			if (!h->in_tx && tries++ == 0 &&
			    (tl_drv_rd_err(h->c) == REDIS_ERR_EOF ||
			    tl_drv_rd_err(h->c) == REDIS_ERR_IO))
				goto again;
			return admin_lost(h, what, why);
		}
		r[i] = v;
		if (rc == 0 && r[i]->type == REDIS_REPLY_ERROR) {
			scrub(r[i]->str, m, sizeof(m));
			rc = tl_drv_why(why, strncmp(m, "NOPERM", 6) == 0 ?
			    TL_EAUTH : TL_EDRIVER, "%s: %s", what, m);
		}
	}
	return rc;
}

/*
 * WATCH and read, in one round trip: 0 with o (and *u, GETUSER, when u
 * is not NULL: the caller frees it; NULL when the user is gone) and the
 * transaction open; TL_EREFUSED ("deposed: ...") when the fence held for
 * the mesh is not this session's; else the error, the transaction
 * ended.
 */
static int
tx_begin(struct tl_drv_redis *h, const struct tl_drv_grant *g,
    struct rd_owner *o, redisReply **u, char *why)
{
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX];
	const char *watch[4] = { "WATCH", ok, mk, h->fence_key };
	const char *hm[4] = { "HMGET", h->fence_key, "epoch", "leader" };
	const char *gom[2] = { "GET", ok }, *gmm[2] = { "GET", mk };
	const char *gu[3] = { "ACL", "GETUSER", g->login };
	const char **const argv[5] = { watch, gom, gmm, gu, hm };
	const int argc[5] = { h->fenced ? 4 : 3, 2, 2, 3, 4 };
	redisReply *r[5] = { NULL };
	int i, n = h->fenced ? 5 : 4, rc;

	if (u != NULL)
		*u = NULL;
	mark_keys(g->login, ok, pk, mk);
	rc = pipeline(h, n, argc, argv, r, "read the fence and the marks",
	    why);
	/* Watching from here (unless WATCH itself failed). */
	h->in_tx = r[0] != NULL && r[0]->type != REDIS_REPLY_ERROR;
	if (rc != 0)
		goto out;
	if (h->fenced) {
		struct tl_drv_fence want = { h->mesh, h->epoch, h->leader };
		struct tl_drv_fence_held held = { 0, "" };
		const redisReply *f = r[4];

		if (f->type != REDIS_REPLY_ARRAY || f->elements != 2) {
			rc = tl_drv_why(why, TL_EDRIVER, "read the fence: "
			    "unexpected reply");
			goto out;
		}
		if (f->element[0]->type == REDIS_REPLY_STRING)
			held.epoch = strtoull(f->element[0]->str, NULL, 10);
		if (f->element[1]->type == REDIS_REPLY_STRING)
			snprintf(held.leader, sizeof(held.leader), "%s",
			    f->element[1]->str);
		if (!tl_drv_fence_ours(&want, &held)) {
			rc = tl_drv_why(why, TL_EREFUSED, "deposed: %s holds "
			    "epoch %llu (leader %.12s), this session acts for "
			    "epoch %llu (leader %.12s); user %s not changed",
			    h->fence_key, (unsigned long long)held.epoch,
			    held.leader, (unsigned long long)h->epoch,
			    h->leader, g->login);
			goto out;
		}
	}
	judge(h, g, r[1], r[2], o);
	o->exists = r[3]->type == REDIS_REPLY_ARRAY;
	if (u != NULL && o->exists) {
		*u = r[3];
		r[3] = NULL;
	}
out:
	for (i = 0; i < n; i++)
		freeReplyObject(r[i]);
	if (rc != 0)
		tx_end(h);
	return rc;
}

static int
tx_multi(struct tl_drv_redis *h, char *why)
{
	const char *m[1] = { "MULTI" };

	if (tl_drv_rd_append(h->c, 1, m) != REDIS_OK)
		return tl_drv_why(why, ENOMEM, "MULTI: out of memory");
	h->in_multi = 1;
	h->queued = 1;
	return 0;
}

/* Queues the mesh mark's change, if the judge asked for one. */
static int
tx_remesh(struct tl_drv_redis *h, const struct tl_drv_grant *g,
    const struct rd_owner *o, char *why)
{
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX];
	const char *set[3] = { "SET", mk, h->mesh }, *del[2] = { "DEL", mk };

	if (!o->remesh)
		return 0;
	mark_keys(g->login, ok, pk, mk);
	return h->mesh[0] != '\0' ? run(h, 3, set, "SET mesh mark", why) :
	    run(h, 2, del, "DEL mesh mark", why);
}

/*
 * EXEC: 0; RD_AGAIN when a watched key changed since WATCH (nothing
 * ran); else the first queued command's error.
 */
static int
tx_exec(struct tl_drv_redis *h, const char *what, char *why)
{
	const char *e[1] = { "EXEC" };
	redisReply *r = NULL;
	char m[256];
	size_t i;
	int rc = 0;

	if (tl_drv_rd_append(h->c, 1, e) != REDIS_OK) {
		rc = tl_drv_why(why, ENOMEM, "%s: out of memory", what);
		tx_end(h);
		return rc;
	}
	/* MULTI's OK and a QUEUED per command, then EXEC's answer. */
	for (; h->queued > 0; h->queued--) {
		redisReply *v = NULL;

		if (tl_drv_rd_reply(h->c, &v) != REDIS_OK)
			break;
		r = v;
		if (rc == 0 && r->type == REDIS_REPLY_ERROR) {
			scrub(r->str, m, sizeof(m));
			rc = tl_drv_why(why, strncmp(m, "NOPERM", 6) == 0 ?
			    TL_EAUTH : TL_EDRIVER, "%s: %s", what, m);
		}
		freeReplyObject(r);
		r = NULL;
	}
	if (h->queued == 0 && tl_drv_rd_reply(h->c, &r) != REDIS_OK)
		r = NULL;
	h->in_tx = h->in_multi = 0;
	h->queued = 0;
	if (r == NULL)
		return tl_drv_why(why, TL_EUNREACH, "%s: EXEC: %s", what,
		    tl_drv_rd_errstr(h->c));
	if (rc != 0) {
		/* Refused when queued: EXEC ran nothing (EXECABORT). */
		freeReplyObject(r);
		return rc;
	}
	if (r->type == REDIS_REPLY_NIL) {
		freeReplyObject(r);
		return RD_AGAIN;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		scrub(r->str, m, sizeof(m));
		rc = tl_drv_why(why, TL_EDRIVER, "%s: EXEC: %s", what, m);
	}
	for (i = 0; rc == 0 && r->type == REDIS_REPLY_ARRAY &&
	    i < r->elements; i++)
		if (r->element[i]->type == REDIS_REPLY_ERROR) {
			scrub(r->element[i]->str, m, sizeof(m));
			rc = tl_drv_why(why, strncmp(m, "NOPERM", 6) == 0 ?
			    TL_EAUTH : TL_EDRIVER, "%s: %s", what, m);
		}
	freeReplyObject(r);
	return rc;
}

typedef int rd_once(struct tl_drv_redis *h, const struct tl_drv_grant *g,
	    int arg, char *why);

/* once, again while a concurrent change of a watched key aborts it. */
static int
retrying(struct tl_drv_redis *h, const struct tl_drv_grant *g, int arg,
    rd_once *once, char *why)
{
	int i, rc;

	for (i = 0; i < RD_TRIES; i++)
		if ((rc = once(h, g, arg, why)) != RD_AGAIN)
			return rc;
	return tl_drv_why(why, TL_EDRIVER, "user %s: the fence or the marks "
	    "changed under every one of %d attempts", g->login, RD_TRIES);
}

/* The mark, the mesh mark and the user, in one transaction. */
static int
create_once(struct tl_drv_redis *h, const struct tl_drv_grant *g, int arg,
    char *why)
{
	const char *argv[12 + RD_NRULES_MAX];
	const char *const *rl;
	char hash[RD_HASH_HEX + 2], keys[80], chans[80];
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX];
	const char *set[3] = { "SET", ok, g->grant != NULL ? g->grant : "" };
	const char *del[2] = { "DEL", pk };
	const char *sadd[3] = { "SADD", pk, hash + 1 };
	struct rd_owner o;
	size_t nr;
	int n = 0, rc;

	(void)arg;
	if ((rc = tx_begin(h, g, &o, NULL, why)) != 0)
		return rc;
	if ((rc = owned(g, &o, why)) != 0)
		goto fail;
	mark_keys(g->login, ok, pk, mk);
	hash[0] = '#';
	sha256hex(g->password, hash + 1);
	rl = grant_rules(g, keys, chans, &nr);
	argv[n++] = "ACL";
	argv[n++] = "SETUSER";
	argv[n++] = g->login;
	argv[n++] = "reset";
	argv[n++] = "on";
	argv[n++] = hash;
	argv[n++] = keys;
	argv[n++] = chans;
	for (size_t i = 0; i < nr; i++)
		argv[n++] = rl[i];
	if ((rc = tx_multi(h, why)) != 0 ||
	    (rc = run(h, 3, set, "SET mark", why)) != 0 ||
	    (rc = tx_remesh(h, g, &o, why)) != 0 ||
	    (rc = run(h, n, argv, "ACL SETUSER", why)) != 0 ||
	    (rc = run(h, 2, del, "DEL passwords mark", why)) != 0 ||
	    (rc = run(h, 3, sadd, "SADD passwords mark", why)) != 0)
		goto fail;
	if ((rc = tx_exec(h, "create", why)) != 0 ||
	    (rc = persist(h, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user %s on, keys and channels %s:*%s",
	    g->login, g->resource, g->access == TL_DRV_ACCESS_READ ? " (read)" :
	    g->access ? " (read-write)" : "");
fail:
	tx_end(h);
	return rc;
}

/*
 * The start of an ACL SETUSER that gives g's user a grant's keys,
 * channels and commands for its prefix (keys and chans, 80 bytes each,
 * hold the patterns argv points at): the number of argv entries filled,
 * at most 10 + RD_NRULES_MAX.
 */
static int
setuser_rules(const struct tl_drv_grant *g, const char **argv, char *keys,
    char *chans)
{
	const char *const *rl;
	int n = 0;
	size_t i, nr;

	rl = grant_rules(g, keys, chans, &nr);
	argv[n++] = "ACL";
	argv[n++] = "SETUSER";
	argv[n++] = g->login;
	argv[n++] = "on";
	argv[n++] = "resetkeys";
	argv[n++] = "resetchannels";
	argv[n++] = "clearselectors";
	argv[n++] = "sanitize-payload";
	argv[n++] = keys;
	argv[n++] = chans;
	for (i = 0; i < nr; i++)
		argv[n++] = rl[i];
	return n;
}

/*
 * TL_EDRIVER (why) unless g->resource is free for an adopted user: a
 * prefix that is the name of a user tally made is that grant's key
 * space (its own user's prefix is the one name of both).
 */
static int
prefix_free(struct tl_drv_redis *h, const struct tl_drv_grant *g,
    char *why)
{
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX];
	const char *get[2] = { "GET", ok };
	redisReply *r;
	int rc;

	if (strcmp(g->resource, g->login) == 0)
		return 0;
	mark_keys(g->resource, ok, pk, mk);
	if ((rc = cmd(h, 2, get, &r, "GET the prefix's owner mark", why)) != 0)
		return rc;
	if (r->type == REDIS_REPLY_STRING)
		rc = tl_drv_why(why, TL_EDRIVER, "prefix %s: the keys of user "
		    "%s, made by tally for %s%.200s; refused", g->resource,
		    g->resource, r->str[0] != '\0' ? "grant " :
		    "another grant", r->str);
	freeReplyObject(r);
	return rc;
}

/*
 * tally adopt (g->adopting, see the top): the user g->login becomes
 * g's, its passwords kept (g->password is not set: the rotation that
 * follows adds tally's beside them).  A user already marked for g (a
 * create resumed) is taken over again as it is.
 */
static int
adopt_once(struct tl_drv_redis *h, const struct tl_drv_grant *g, int arg,
    char *why)
{
	const char *argv[16 + RD_NRULES_MAX];
	char keys[80], chans[80];
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX];
	const char *set[3] = { "SET", ok, g->grant != NULL ? g->grant : "" };
	const char *del[2] = { "DEL", pk };
	const char **sadd = NULL;
	const redisReply *pw, *fl;
	const char *had;
	redisReply *u = NULL;
	struct rd_owner o;
	size_t i, npw = 0;
	int n = 0, rc;

	(void)arg;
	if ((rc = tx_begin(h, g, &o, &u, why)) != 0)
		return rc;
	if (!o.exists) {
		rc = tl_drv_why(why, TL_EDRIVER, "ACL user \"%s\" does not "
		    "exist on this server: nothing to adopt", g->login);
		goto out;
	}
	if (o.foreign) {
		rc = owned(g, &o, why);
		goto out;
	}
	if (o.marked == 0) {
		rc = tl_drv_why(why, TL_EDRIVER, "user %s was made by tally "
		    "for %s%.200s: tally adopt takes over only what tally did "
		    "not make", g->login, o.mark[0] != '\0' ? "grant " :
		    "another grant", o.mark);
		goto out;
	}
	/*
	 * A user nobody logs in as (off) would be turned on, and a nopass
	 * one would be a credential drift the verifier repairs, locking out
	 * its holders before they have the new version.
	 */
	fl = field(u, "flags");
	if (has_elem(fl, "nopass") || (o.marked < 0 && !has_elem(fl, "on"))) {
		rc = tl_drv_why(why, TL_EDRIVER, "user %s %s: tally adopt "
		    "takes over a user that is on and logs in by password",
		    g->login, has_elem(fl, "nopass") ? "has nopass (any "
		    "password logs in)" : "is off");
		goto out;
	}
	if ((rc = prefix_free(h, g, why)) != 0)
		goto out;
	pw = field(u, "passwords");
	if (pw != NULL && pw->type == REDIS_REPLY_ARRAY &&
	    (sadd = calloc(pw->elements + 2, sizeof(*sadd))) == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; sadd != NULL && i < pw->elements; i++)
		if (pw->element[i]->type == REDIS_REPLY_STRING &&
		    strlen(pw->element[i]->str) == RD_HASH_HEX)
			sadd[2 + npw++] = pw->element[i]->str;
	mark_keys(g->login, ok, pk, mk);
	n = setuser_rules(g, argv, keys, chans);
	if ((rc = tx_multi(h, why)) != 0 ||
	    (rc = run(h, 3, set, "SET mark", why)) != 0 ||
	    (rc = tx_remesh(h, g, &o, why)) != 0 ||
	    (rc = run(h, n, argv, "ACL SETUSER", why)) != 0 ||
	    (rc = run(h, 2, del, "DEL passwords mark", why)) != 0)
		goto out;
	if (npw > 0) {
		sadd[0] = "SADD";
		sadd[1] = pk;
		if ((rc = run(h, (int)npw + 2, sadd, "SADD passwords mark",
		    why)) != 0)
			goto out;
	}
	if ((rc = tx_exec(h, "adopt", why)) != 0 ||
	    (rc = persist(h, why)) != 0)
		goto out;
	had = field_str(u, "keys");
	tl_drv_why(why, 0, "user %s adopted: keys and channels %s:* and a "
	    "grant's commands (it had keys \"%.60s\"), its %zu password%s "
	    "kept until the rotation retires %s; no key touched", g->login,
	    g->resource, had != NULL ? had : "?", npw, npw == 1 ? "" : "s",
	    npw == 1 ? "it" : "them");
out:
	tx_end(h);
	free(sadd);
	freeReplyObject(u);
	return rc;
}

static int
rd_create(void *hv, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_redis *h = hv;
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->adopting) {
		if (strcmp(g->login, "default") == 0 ||
		    strcmp(g->login, h->user) == 0)
			return tl_drv_why(why, TL_EDRIVER, "user %s is %s: tally "
			    "adopt takes over a consumer's user", g->login,
			    strcmp(g->login, "default") == 0 ? "the default "
			    "user (every connection is it before AUTH)" :
			    "the admin user tallyd logs in as");
		return retrying(h, g, 0, adopt_once, why);
	}
	if (g->password == NULL || *g->password == '\0')
		return tl_drv_why(why, TL_EINVAL, "user %s: no password",
		    g->login);
	return retrying(h, g, 0, create_once, why);
}

/*
 * What one grant's GETUSER and marks say, into *drift and why.  u:
 * GETUSER (nil: gone), mark: GET of the owner mark, mm: of the mesh
 * mark, pws: SMEMBERS of the passwords mark.  TL_EINVAL for a user that
 * is not g's; one another mesh owns is a drift (missing: none of ours).
 */
static int
evaluate(const struct tl_drv_redis *h, const struct tl_drv_grant *g,
    const redisReply *u, const redisReply *mark, const redisReply *mm,
    const redisReply *pws, enum tl_drv_drift *drift, char *why)
{
	char msg[TL_WHY_MAX], keys[80], chans[80], flags[256],
	    hash[RD_HASH_HEX + 1];
	const redisReply *pw, *sel, *fl;
	const char *s, *ref;
	struct rd_owner o;
	size_t off = 0, i;
	int cred = 0, priv = 0;

	*drift = TL_DRIFT_NONE;
	judge(h, g, mark, mm, &o);
	o.exists = u != NULL && u->type == REDIS_REPLY_ARRAY;
	if (o.foreign) {
		*drift = TL_DRIFT_MISSING;
		owned(g, &o, why);
		return 0;
	}
	if (owned(g, &o, why) != 0)
		return TL_EINVAL;
	if (!o.exists) {
		*drift = TL_DRIFT_MISSING;
		return tl_drv_why(why, 0, "missing: user %s is gone (not "
		    "recreated: tally repair does that; its keys %s:* are left "
		    "as they are)", g->login, g->resource);
	}
#define ADD(...) do { if (off < sizeof(msg)) off += (size_t)snprintf( \
    msg + off, sizeof(msg) - off, __VA_ARGS__); } while (0)
	msg[0] = '\0';
	fl = field(u, "flags");
	pw = field(u, "passwords");
	if (has_elem(fl, "nopass")) {
		cred = 1;
		ADD("%suser %s has nopass (any password logs in)", off ? "; " :
		    "", g->login);
	}
	if (g->password != NULL && *g->password != '\0') {
		sha256hex(g->password, hash);
		if (!has_elem(pw, hash)) {
			cred = 1;
			ADD("%suser %s does not have the recorded password",
			    off ? "; " : "", g->login);
		}
	}
	for (i = 0; pw != NULL && pw->type == REDIS_REPLY_ARRAY &&
	    i < pw->elements; i++)
		if (pw->element[i]->type == REDIS_REPLY_STRING &&
		    !has_elem(pws, pw->element[i]->str)) {
			cred = 1;
			ADD("%suser %s has a password tally did not set",
			    off ? "; " : "", g->login);
			break;
		}
	if (!has_elem(fl, "on")) {
		priv = 1;
		ADD("%suser %s is off", off ? "; " : "", g->login);
	}
	other_flags(u, flags, sizeof(flags));
	if (strcmp(flags, h->ref_flags) != 0) {
		priv = 1;
		ADD("%suser %s has flags \"%s\", not \"%s\"", off ? "; " : "",
		    g->login, flags, h->ref_flags);
	}
	/* bulk loaded the readers' before it asked. */
	ref = g->access == TL_DRV_ACCESS_READ ? h->ref_rcmds : h->ref_cmds;
	(void)grant_rules(g, keys, chans, &i);
	if ((s = field_str(u, "commands")) == NULL || ref == NULL ||
	    !same_rules(s, ref)) {
		priv = 1;
		ADD("%suser %s's command rules were changed", off ? "; " : "",
		    g->login);
	}
	if ((s = field_str(u, "keys")) == NULL || strcmp(s, keys) != 0) {
		priv = 1;
		ADD("%suser %s reaches keys \"%.80s\", not \"%s\"",
		    off ? "; " : "", g->login, s != NULL ? s : "?", keys);
	}
	if ((s = field_str(u, "channels")) == NULL || strcmp(s, chans) != 0) {
		priv = 1;
		ADD("%suser %s reaches channels \"%.80s\", not \"%s\"",
		    off ? "; " : "", g->login, s != NULL ? s : "?", chans);
	}
	sel = field(u, "selectors");
	if (sel != NULL && sel->type == REDIS_REPLY_ARRAY &&
	    sel->elements > 0) {
		priv = 1;
		ADD("%suser %s has selectors", off ? "; " : "", g->login);
	}
#undef ADD
	if (cred) {
		*drift = TL_DRIFT_CREDENTIAL;
		return tl_drv_why(why, 0, "credential: %s", msg);
	}
	if (priv) {
		*drift = TL_DRIFT_PRIVILEGES;
		return tl_drv_why(why, 0, "privileges: %s", msg);
	}
	return tl_drv_why(why, 0, "user %s on, its password, keys and channels "
	    "%s:* only%s", g->login, g->resource, g->access ==
	    TL_DRV_ACCESS_READ ? ", read commands only" : "");
}

/* Appends GETUSER and the three marks of g to the pipeline. */
static int
append_lookup(struct tl_drv_redis *h, const struct tl_drv_grant *g)
{
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX];
	const char *gu[3] = { "ACL", "GETUSER", g->login };
	const char *get[2] = { "GET", ok }, *gm[2] = { "GET", mk };
	const char *sm[2] = { "SMEMBERS", pk };

	mark_keys(g->login, ok, pk, mk);
	if (tl_drv_rd_append(h->c, 3, gu) != REDIS_OK ||
	    tl_drv_rd_append(h->c, 2, get) != REDIS_OK ||
	    tl_drv_rd_append(h->c, 2, gm) != REDIS_OK ||
	    tl_drv_rd_append(h->c, 2, sm) != REDIS_OK)
		return ENOMEM;
	return 0;
}

/*
 * Checks gs[0..n) in one pipeline: RD_LOOKUP commands per grant
 * written, as many replies read.  Every reply is read even after a refusal, so the session stays
 * in step.
 */
static int
bulk(struct tl_drv_redis *h, const struct tl_drv_grant *gs, size_t n,
    enum tl_drv_drift *drift, char (*why)[TL_WHY_MAX])
{
	redisReply *r[RD_LOOKUP];
	size_t i, j;
	int rc = 0, erc, tries = 0;

	for (i = 0; i < n; i++) {
		if ((erc = grant_ok(&gs[i], why[i])) != 0)
			return erc;
		if (gs[i].access == TL_DRV_ACCESS_READ &&
		    h->ref_rcmds == NULL &&
		    (erc = load_reference(h, RD_RULES_R_USER, rules_r,
		    RD_NRULES_R, &h->ref_rcmds, NULL, why[0])) != 0)
			return erc;
	}
again:
	if ((erc = ensure(h, why[0])) != 0)
		return erc;
	for (i = 0; i < n; i++)
		if (append_lookup(h, &gs[i]) != 0)
			return tl_drv_why(why[0], TL_EUNREACH, "pipeline: out "
			    "of memory");
	for (i = 0; i < n; i++) {
		for (j = 0; j < RD_LOOKUP; j++) {
			redisReply *v = NULL;

			if (tl_drv_rd_reply(h->c, &v) != REDIS_OK) {
				while (j > 0)
					freeReplyObject(r[--j]);
				/* Closed before any answer: once more. */
				if (i == 0 && tries++ == 0 &&
				    (tl_drv_rd_err(h->c) == REDIS_ERR_EOF ||
				    tl_drv_rd_err(h->c) == REDIS_ERR_IO))
					goto again;
				return admin_lost(h, "check", why[0]);
			}
			r[j] = v;
		}
		if (rc == 0) {
			const redisReply *e = NULL;

			for (j = 0; j < RD_LOOKUP && e == NULL; j++)
				if (r[j]->type == REDIS_REPLY_ERROR)
					e = r[j];
			if (e != NULL) {
				char m[256];

				scrub(e->str, m, sizeof(m));
				rc = tl_drv_why(why[0], strncmp(e->str,
				    "NOPERM", 6) == 0 ? TL_EAUTH : TL_EDRIVER,
				    "check: %s", m);
			} else if ((erc = evaluate(h, &gs[i], r[0], r[1],
			    r[2], r[3], &drift[i], why[i])) != 0)
				rc = erc;
		}
		for (j = 0; j < RD_LOOKUP; j++)
			freeReplyObject(r[j]);
	}
	return rc;
}

static int
rd_check_bulk(void *hv, const struct tl_drv_grant *gs, size_t n,
    enum tl_drv_drift *drift, char (*why)[TL_WHY_MAX])
{
	return n == 0 ? 0 : bulk(hv, gs, n, drift, why);
}

static int
rd_check(void *hv, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	struct tl_drv_redis *h = hv;
	char w[1][TL_WHY_MAX], detail[TL_WHY_MAX];
	struct tl_drv_rd_conn *c;
	int rc, refused;

	*drift = TL_DRIFT_NONE;
	if ((rc = bulk(h, g, 1, drift, w)) != 0) {
		tl_drv_why(why, rc, "%s", w[0]);
		return rc;
	}
	/*
	 * A login as the consumer, at the routable name, when it could,
	 * over the admin session's protection (a consumer's, TLS verified
	 * against the host it dials, when the provider's is).
	 */
	if (*drift == TL_DRIFT_MISSING || g->password == NULL ||
	    *g->password == '\0') {
		tl_drv_why(why, 0, "%s", w[0]);
		return 0;
	}
	refused = 0;
	rc = dial(h, ep != NULL && ep->host != NULL ? ep->host : h->host,
	    ep != NULL && ep->port != NULL ? ep->port : h->port, 0, &c,
	    detail);
	if (rc == 0) {
		rc = auth(c, g->login, g->password, &refused, NULL, detail);
		tl_drv_rd_conn_free(c);
	} else if (rc != TL_EAUTH)
		return tl_drv_why(why, rc, "user %s %s: %s", g->login,
		    rc == TL_EUNTRUSTED ? "not logged in" :
		    "cannot reach the server", detail);
	if (rc == TL_EUNREACH)
		return tl_drv_why(why, rc, "user %s: %s", g->login, detail);
	/*
	 * Refused for want of a client certificate (tls-auth-clients yes):
	 * consumers bring their own, and the admin's would prove nothing
	 * of theirs, so the login is not judged.
	 */
	if (rc == TL_EAUTH && !refused)
		return tl_drv_why(why, 0, "%s; the login is not judged: %s",
		    w[0], detail);
	if (refused && *drift == TL_DRIFT_NONE) {
		*drift = TL_DRIFT_CREDENTIAL;
		return tl_drv_why(why, 0, "credential: %s", detail);
	}
	tl_drv_why(why, 0, "%s%s", w[0], refused ? "; the login is refused" :
	    "; logs in");
	/*
	 * Consumers that get TLS but could connect without it: a warning
	 * (TL_DRIFT_PLAINTEXT, never repaired: the listeners are the
	 * operator's), asked only when the login found nothing worse.
	 */
	if (*drift == TL_DRIFT_NONE && !refused && g->posture &&
	    tl_drv_consumer_tls(&tl_drv_redis_decl, ep) != TL_DRV_TLS_OFF) {
		int open = 0;

		if (tl_drv_rd_plaintext(h, &open, detail) == 0 && open) {
			*drift = TL_DRIFT_PLAINTEXT;
			tl_drv_why(why, 0, "plaintext: %s", detail);
		}
	}
	return 0;
}

/*
 * The passwords back to tally's: the hashes of the passwords mark and
 * g's own, nothing else (a nopass or a stranger's password goes).
 */
static int
set_password_once(struct tl_drv_redis *h, const struct tl_drv_grant *g,
    int arg, char *why)
{
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX];
	char hash[RD_HASH_HEX + 2];
	const char *sm[2] = { "SMEMBERS", pk };
	const char *sadd[3] = { "SADD", pk, hash + 1 };
	const char **argv = NULL;
	char **hv2 = NULL;
	redisReply *r = NULL;
	struct rd_owner o;
	size_t i, n = 0, nh = 0;
	int rc, mine = 0;

	(void)arg;
	if ((rc = tx_begin(h, g, &o, NULL, why)) != 0)
		return rc;
	if ((rc = existing(g, &o, why)) != 0)
		goto out;
	mark_keys(g->login, ok, pk, mk);
	hash[0] = '#';
	sha256hex(g->password, hash + 1);
	if ((rc = cmd(h, 2, sm, &r, "SMEMBERS passwords mark", why)) != 0)
		goto out;
	if (r->type != REDIS_REPLY_ARRAY) {
		rc = tl_drv_why(why, TL_EDRIVER, "passwords mark of %s: not a "
		    "set", g->login);
		goto out;
	}
	if ((argv = calloc(r->elements + 5, sizeof(*argv))) == NULL ||
	    (hv2 = calloc(r->elements + 1, sizeof(*hv2))) == NULL) {
		rc = tl_drv_why(why, ENOMEM, "out of memory");
		goto out;
	}
	argv[n++] = "ACL";
	argv[n++] = "SETUSER";
	argv[n++] = g->login;
	argv[n++] = "resetpass";
	for (i = 0; i < r->elements; i++) {
		if (r->element[i]->type != REDIS_REPLY_STRING ||
		    strlen(r->element[i]->str) != RD_HASH_HEX)
			continue;
		if ((hv2[nh] = malloc(RD_HASH_HEX + 2)) == NULL) {
			rc = tl_drv_why(why, ENOMEM, "out of memory");
			goto out;
		}
		snprintf(hv2[nh], RD_HASH_HEX + 2, "#%s", r->element[i]->str);
		mine |= strcmp(hv2[nh], hash) == 0;
		argv[n++] = hv2[nh++];
	}
	if (!mine)
		argv[n++] = hash;
	if ((rc = tx_multi(h, why)) != 0 ||
	    (rc = tx_remesh(h, g, &o, why)) != 0 ||
	    (rc = run(h, 3, sadd, "SADD passwords mark", why)) != 0 ||
	    (rc = run(h, (int)n, argv, "ACL SETUSER resetpass", why)) != 0)
		goto out;
	if ((rc = tx_exec(h, "set the password", why)) == 0 &&
	    (rc = persist(h, why)) == 0)
		tl_drv_why(why, 0, "user %s: passwords set again (%zu)",
		    g->login, nh + !mine);
out:
	tx_end(h);
	for (i = 0; hv2 != NULL && i < nh; i++)
		free(hv2[i]);
	free(hv2);
	free(argv);
	freeReplyObject(r);
	return rc;
}

static int
rd_set_password(void *hv, const struct tl_drv_grant *g, char *why)
{
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->password == NULL || *g->password == '\0')
		return tl_drv_why(why, TL_EINVAL, "user %s: no password",
		    g->login);
	return retrying(hv, g, 0, set_password_once, why);
}

/* Rules, patterns and flags back to create's, the passwords kept. */
static int
fix_once(struct tl_drv_redis *h, const struct tl_drv_grant *g, int arg,
    char *why)
{
	const char *argv[16 + RD_NRULES_MAX];
	char keys[80], chans[80];
	struct rd_owner o;
	int n = 0, rc;

	(void)arg;
	if ((rc = tx_begin(h, g, &o, NULL, why)) != 0)
		return rc;
	if ((rc = existing(g, &o, why)) != 0)
		goto fail;
	n = setuser_rules(g, argv, keys, chans);
	if ((rc = tx_multi(h, why)) != 0 ||
	    (rc = tx_remesh(h, g, &o, why)) != 0 ||
	    (rc = run(h, n, argv, "ACL SETUSER", why)) != 0)
		goto fail;
	if ((rc = tx_exec(h, "fix the privileges", why)) != 0 ||
	    (rc = persist(h, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user %s: rules and patterns set again",
	    g->login);
fail:
	tx_end(h);
	return rc;
}

static int
rd_fix_privileges(void *hv, const struct tl_drv_grant *g, char *why)
{
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	return retrying(hv, g, 0, fix_once, why);
}

/* A rotation's new password beside the old, the mark with it. */
static int
add_once(struct tl_drv_redis *h, const struct tl_drv_grant *g, int arg,
    char *why)
{
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX];
	char hash[RD_HASH_HEX + 2];
	const char *sadd[3] = { "SADD", pk, hash + 1 };
	const char *set[4] = { "ACL", "SETUSER", g->login, hash };
	struct rd_owner o;
	int rc;

	(void)arg;
	if ((rc = tx_begin(h, g, &o, NULL, why)) != 0)
		return rc;
	if ((rc = existing(g, &o, why)) != 0)
		goto fail;
	mark_keys(g->login, ok, pk, mk);
	hash[0] = '#';
	sha256hex(g->password, hash + 1);
	if ((rc = tx_multi(h, why)) != 0 ||
	    (rc = tx_remesh(h, g, &o, why)) != 0 ||
	    (rc = run(h, 3, sadd, "SADD passwords mark", why)) != 0 ||
	    (rc = run(h, 4, set, "ACL SETUSER (add a password)", why)) != 0)
		goto fail;
	if ((rc = tx_exec(h, "add a password", why)) != 0 ||
	    (rc = persist(h, why)) != 0)
		return rc;
	return tl_drv_why(why, 0, "user %s: a password added beside the others",
	    g->login);
fail:
	tx_end(h);
	return rc;
}

static int
rd_add_credential(void *hv, const struct tl_drv_grant *g, char *why)
{
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->password == NULL || *g->password == '\0')
		return tl_drv_why(why, TL_EINVAL, "user %s: no password to add",
		    g->login);
	return retrying(hv, g, 0, add_once, why);
}

/*
 * Removes the retired version's password (g->password, see decl.h)
 * from the user and from the mark.  Already gone: 0.
 */
static int
retire_once(struct tl_drv_redis *h, const struct tl_drv_grant *g, int arg,
    char *why)
{
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX];
	char hash[RD_HASH_HEX + 2];
	const char *set[4] = { "ACL", "SETUSER", g->login, hash };
	const char *srem[3] = { "SREM", pk, hash + 1 };
	redisReply *u = NULL;
	struct rd_owner o;
	int rc, acl;

	(void)arg;
	if ((rc = tx_begin(h, g, &o, &u, why)) != 0)
		return rc;
	if ((rc = owned(g, &o, why)) != 0)
		goto fail;
	if (o.marked < 0) {
		tx_end(h);
		freeReplyObject(u);
		return tl_drv_why(why, 0, "user %s is gone: nothing to retire",
		    g->login);
	}
	mark_keys(g->login, ok, pk, mk);
	hash[0] = '!';
	sha256hex(g->password, hash + 1);
	acl = o.exists && has_elem(field(u, "passwords"), hash + 1);
	if ((rc = tx_multi(h, why)) != 0 ||
	    (rc = tx_remesh(h, g, &o, why)) != 0 ||
	    (acl && (rc = run(h, 4, set, "ACL SETUSER (remove a password)",
	    why)) != 0) ||
	    (rc = run(h, 3, srem, "SREM passwords mark", why)) != 0)
		goto fail;
	freeReplyObject(u);
	u = NULL;
	if ((rc = tx_exec(h, "retire a password", why)) != 0 ||
	    (acl && (rc = persist(h, why)) != 0))
		return rc;
	return tl_drv_why(why, 0, "user %s: the retired password removed",
	    g->login);
fail:
	tx_end(h);
	freeReplyObject(u);
	return rc;
}

/*
 * The retirement of an adopted user's own passwords (g->adopting):
 * every password goes but g->password, the new version's, in one ACL
 * SETUSER (resetpass, then that hash: one added meanwhile goes too, and
 * the user is never without the one its holders acknowledged); the
 * passwords mark becomes that hash.  A user that lacks it is left as it
 * is: nobody can be logging in with it there, and what it has is all
 * that logs in.
 */
static int
retire_adopted_once(struct tl_drv_redis *h, const struct tl_drv_grant *g,
    int arg, char *why)
{
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX];
	char hash[RD_HASH_HEX + 2];
	const char *set[5] = { "ACL", "SETUSER", g->login, "resetpass", hash };
	const char *del[2] = { "DEL", pk };
	const char *sadd[3] = { "SADD", pk, hash + 1 };
	const redisReply *pw;
	redisReply *u = NULL;
	struct rd_owner o;
	size_t gone = 0;
	int rc;

	(void)arg;
	if ((rc = tx_begin(h, g, &o, &u, why)) != 0)
		return rc;
	if ((rc = owned(g, &o, why)) != 0)
		goto out;
	if (o.marked < 0 || !o.exists) {
		rc = tl_drv_why(why, 0, "user %s is gone: nothing to retire",
		    g->login);
		goto out;
	}
	mark_keys(g->login, ok, pk, mk);
	hash[0] = '#';
	sha256hex(g->password, hash + 1);
	pw = field(u, "passwords");
	if (!has_elem(pw, hash + 1)) {
		rc = tl_drv_why(why, TL_EDRIVER, "user %s does not have the new "
		    "version's password: its own are kept (removing them would "
		    "leave it nothing that logs in)", g->login);
		goto out;
	}
	gone = pw->elements - 1;
	if ((rc = tx_multi(h, why)) != 0 ||
	    (rc = tx_remesh(h, g, &o, why)) != 0 ||
	    (rc = run(h, 5, set, "ACL SETUSER resetpass", why)) != 0 ||
	    (rc = run(h, 2, del, "DEL passwords mark", why)) != 0 ||
	    (rc = run(h, 3, sadd, "SADD passwords mark", why)) != 0)
		goto out;
	if ((rc = tx_exec(h, "retire the adopted passwords", why)) != 0 ||
	    (rc = persist(h, why)) != 0)
		goto out;
	tl_drv_why(why, 0, "user %s: its %zu adopted password%s removed, the "
	    "new version's kept", g->login, gone, gone == 1 ? "" : "s");
out:
	tx_end(h);
	freeReplyObject(u);
	return rc;
}

static int
rd_retire_credential(void *hv, const struct tl_drv_grant *g, char *why)
{
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	if (g->password == NULL || *g->password == '\0')
		return tl_drv_why(why, TL_EINVAL, "user %s: retiring needs the "
		    "%s password", g->login, g->adopting ? "kept" : "retired");
	return retrying(hv, g, 0, g->adopting ? retire_adopted_once :
	    retire_once, why);
}

/*
 * Deletes one SCAN batch of the keys under g's prefix from *cursor, in
 * a transaction of its own (the fence and the marks read again);
 * *cursor then moves on.
 */
static int
purge_batch(struct tl_drv_redis *h, const struct tl_drv_grant *g,
    char cursor[32], unsigned long long *count, char *why)
{
	char match[80];
	const char *scan[6] = { "SCAN", cursor, "MATCH", match, "COUNT",
	    RD_SCAN_COUNT };
	const char **argv = NULL;
	const redisReply *ks;
	redisReply *r = NULL;
	struct rd_owner o;
	size_t i;
	int rc;

	snprintf(match, sizeof(match), "%s:*", g->resource);
	if ((rc = tx_begin(h, g, &o, NULL, why)) != 0)
		return rc;
	if ((rc = owned(g, &o, why)) != 0 ||
	    (rc = cmd(h, 6, scan, &r, "SCAN", why)) != 0)
		goto out;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_ARRAY) {
		rc = tl_drv_why(why, TL_EDRIVER, "SCAN: unexpected reply");
		goto out;
	}
	ks = r->element[1];
	if (ks->elements > 0) {
		if ((argv = calloc(ks->elements + 1, sizeof(*argv))) == NULL) {
			rc = tl_drv_why(why, ENOMEM, "out of memory");
			goto out;
		}
		argv[0] = "UNLINK";
		for (i = 0; i < ks->elements; i++)
			argv[i + 1] = ks->element[i]->str;
		if ((rc = tx_multi(h, why)) != 0 ||
		    (rc = run(h, (int)ks->elements + 1, argv, "UNLINK",
		    why)) != 0 || (rc = tx_exec(h, "purge the keys", why)) != 0)
			goto out;
		*count += ks->elements;
	}
	snprintf(cursor, 32, "%s", r->element[0]->str);
out:
	tx_end(h);
	free(argv);
	freeReplyObject(r);
	return rc;
}

/* Off with its clients killed; drop: its keys, the user, the marks. */
static int
revoke_once(struct tl_drv_redis *h, const struct tl_drv_grant *g, int drop,
    char *why)
{
	const char *off[4] = { "ACL", "SETUSER", g->login, "off" };
	const char *kill[4] = { "CLIENT", "KILL", "USER", g->login };
	const char *del[3] = { "ACL", "DELUSER", g->login };
	char ok[RD_KEY_MAX], pk[RD_KEY_MAX], mk[RD_KEY_MAX], cursor[32] = "0";
	const char *dm[4] = { "DEL", pk, mk, ok };
	unsigned long long keys = 0;
	struct rd_owner o;
	int rc;

	mark_keys(g->login, ok, pk, mk);
	if ((rc = tx_begin(h, g, &o, NULL, why)) != 0)
		return rc;
	if ((rc = owned(g, &o, why)) != 0)
		goto fail;
	if (o.marked < 0) {
		tx_end(h);
		return tl_drv_why(why, 0, "user %s is gone: nothing to revoke",
		    g->login);
	}
	if (o.exists) {
		if ((rc = tx_multi(h, why)) != 0 ||
		    (rc = tx_remesh(h, g, &o, why)) != 0 ||
		    (rc = run(h, 4, off, "ACL SETUSER off", why)) != 0 ||
		    (rc = run(h, 4, kill, "CLIENT KILL USER", why)) != 0)
			goto fail;
		if ((rc = tx_exec(h, "revoke", why)) != 0 ||
		    (rc = persist(h, why)) != 0)
			return rc;
	} else
		tx_end(h);
	if (!drop)
		return tl_drv_why(why, 0, "user %s off, its clients killed, "
		    "%s %s:* kept", g->login, g->access ? "the owner's keys" :
		    "its keys", g->resource);
	/* A reader's prefix is its owner's: only the owner's purge empties it. */
	while (!g->access) {
		if ((rc = purge_batch(h, g, cursor, &keys, why)) != 0)
			return rc;
		if (strcmp(cursor, "0") == 0)
			break;
	}
	/* The user and every mark at once: a purge cut short is redone. */
	if ((rc = tx_begin(h, g, &o, NULL, why)) != 0)
		return rc;
	if ((rc = owned(g, &o, why)) != 0 || (rc = tx_multi(h, why)) != 0 ||
	    (o.exists && (rc = run(h, 3, del, "ACL DELUSER", why)) != 0) ||
	    (rc = run(h, 4, dm, "DEL marks", why)) != 0)
		goto fail;
	if ((rc = tx_exec(h, "purge", why)) != 0 ||
	    (rc = persist(h, why)) != 0)
		return rc;
	if (g->access)
		return tl_drv_why(why, 0, "user %s deleted, the owner's keys "
		    "%s:* left to it", g->login, g->resource);
	return tl_drv_why(why, 0, "user %s deleted with its %llu keys",
	    g->login, keys);
fail:
	tx_end(h);
	return rc;
}

static int
rd_revoke(void *hv, const struct tl_drv_grant *g, int drop, char *why)
{
	int rc;

	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	return retrying(hv, g, drop, revoke_once, why);
}

/* CLIENT LIST's lines of the user (every session, whatever password). */
static int
rd_sessions(void *hv, const struct tl_drv_grant *g, unsigned *count,
    char *why)
{
	struct tl_drv_redis *h = hv;
	const char *argv[2] = { "CLIENT", "LIST" };
	char needle[80];
	const char *p;
	redisReply *r;
	int rc;

	*count = 0;
	if ((rc = grant_ok(g, why)) != 0 ||
	    (rc = cmd(h, 2, argv, &r, "CLIENT LIST", why)) != 0)
		return rc;
	snprintf(needle, sizeof(needle), " user=%s ", g->login);
	for (p = r->type == REDIS_REPLY_STRING ? r->str : ""; (p = strstr(p,
	    needle)) != NULL; p++)
		(*count)++;
	freeReplyObject(r);
	return 0;
}

/* MEMORY USAGE of every key under the prefix, a SCAN batch pipelined. */
static int
rd_size(void *hv, const struct tl_drv_grant *g, uint64_t *bytes, char *why)
{
	struct tl_drv_redis *h = hv;
	char cursor[32] = "0", match[80];
	redisReply *r = NULL;
	size_t i;
	int rc;

	*bytes = 0;
	if ((rc = grant_ok(g, why)) != 0)
		return rc;
	snprintf(match, sizeof(match), "%s:*", g->resource);
	do {
		const char *scan[6] = { "SCAN", cursor, "MATCH", match,
		    "COUNT", RD_SCAN_COUNT };
		const redisReply *ks;

		if ((rc = cmd(h, 6, scan, &r, "SCAN", why)) != 0)
			return rc;
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[1]->type != REDIS_REPLY_ARRAY) {
			freeReplyObject(r);
			return tl_drv_why(why, TL_EDRIVER, "SCAN: unexpected "
			    "reply");
		}
		snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
		ks = r->element[1];
		for (i = 0; i < ks->elements; i++) {
			const char *mu[3] = { "MEMORY", "USAGE",
			    ks->element[i]->str };

			if (tl_drv_rd_append(h->c, 3, mu) !=
			    REDIS_OK) {
				freeReplyObject(r);
				return tl_drv_why(why, ENOMEM, "out of memory");
			}
		}
		for (i = 0; i < ks->elements; i++) {
			redisReply *v = NULL;

			if (tl_drv_rd_reply(h->c, &v) != REDIS_OK) {
				freeReplyObject(r);
				return tl_drv_why(why, TL_EUNREACH, "MEMORY "
				    "USAGE: %s", tl_drv_rd_errstr(h->c));
			}
			if (((redisReply *)v)->type == REDIS_REPLY_INTEGER)
				*bytes += (uint64_t)((redisReply *)v)->integer;
			freeReplyObject(v);
		}
		freeReplyObject(r);
		r = NULL;
	} while (strcmp(cursor, "0") != 0);
	return 0;
}

/*
 * The fence: one hash per mesh, tally:fence:MESH {epoch, leader}; the
 * script is the compare-and-set (it raises only when ARGV[1] is
 * strictly greater, compared as decimal strings without leading zeros
 * so no float of Lua's rounds a large epoch) and returns what is held
 * after.  A script runs atomically on the server.  The key of earlier
 * releases (tally:fence, no mesh) is no longer read.
 */
static int
rd_fence(void *hv, const struct tl_drv_fence *want,
    struct tl_drv_fence_held *held, char *why)
{
	static const char script[] =
	    "local c = redis.call('HGET', KEYS[1], 'epoch') or '0' "
	    "local e = ARGV[1] "
	    "if e ~= '0' and (#e > #c or (#e == #c and e > c)) then "
	    "redis.call('HSET', KEYS[1], 'epoch', e, 'leader', ARGV[2]) end "
	    "return {redis.call('HGET', KEYS[1], 'epoch') or '0', "
	    "redis.call('HGET', KEYS[1], 'leader') or ''}";
	struct tl_drv_redis *h = hv;
	const char *mesh = want->mesh != NULL ? want->mesh : "";
	char e[24], key[128];
	const char *argv[6] = { "EVAL", script, "1", key, e,
	    want->leader != NULL ? want->leader : "" };
	redisReply *r;
	int rc;

	held->epoch = 0;
	held->leader[0] = '\0';
	snprintf(key, sizeof(key), RD_FENCE ":%s", mesh);
	snprintf(e, sizeof(e), "%llu", (unsigned long long)want->epoch);
	if ((rc = cmd(h, 6, argv, &r, "raise the fence", why)) != 0)
		return rc;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING) {
		freeReplyObject(r);
		return tl_drv_why(why, TL_EDRIVER, "fence: unexpected reply");
	}
	held->epoch = strtoull(r->element[0]->str, NULL, 10);
	snprintf(held->leader, sizeof(held->leader), "%s",
	    r->element[1]->str);
	freeReplyObject(r);
	return 0;
}

int
tl_drv_rd_plaintext(void *hv, int *open, char *why)
{
	struct tl_drv_redis *h = hv;
	const char *argv[3] = { "CONFIG", "GET", "port" };
	const char *port;
	redisReply *r;
	int rc;

	*open = 0;
	if ((rc = cmd(h, 3, argv, &r, "CONFIG GET port", why)) != 0)
		return rc;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[1]->type != REDIS_REPLY_STRING) {
		freeReplyObject(r);
		return tl_drv_why(why, TL_EDRIVER, "CONFIG GET port: "
		    "unexpected reply");
	}
	port = r->element[1]->str;
	*open = strcmp(port, "0") != 0;
	if (*open)
		tl_drv_why(why, 0, "consumers can connect without TLS on port "
		    "%.16s: set port 0 in redis.conf", port);
	else
		tl_drv_why(why, 0, "no plaintext port: consumers connect by "
		    "TLS only");
	freeReplyObject(r);
	return 0;
}

const struct tl_drv_ops tl_drv_redis = {
	.decl = &tl_drv_redis_decl,
	.open = rd_open,
	.close = rd_close,
	.create = rd_create,
	.check = rd_check,
	.check_bulk = rd_check_bulk,
	.set_password = rd_set_password,
	.fix_privileges = rd_fix_privileges,
	.revoke = rd_revoke,
	.size = rd_size,
	.add_credential = rd_add_credential,
	.retire_credential = rd_retire_credential,
	.sessions = rd_sessions,
	.fence = rd_fence,
};
