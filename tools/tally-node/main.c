/*
 * tally-node - the node host's agent: delivers, reloads, acknowledges.
 *
 *   tally-node --node NODE --key FILE --dir DIR (--log HOME | --amqp URL
 *       [--amqp-user U --amqp-password-file F]) [--reload MODULE=COMMAND]…
 *       [--user MODULE=USER]… [--once]
 *
 * It holds the node's secret keys only (FILE, written by tally node
 * add): never the master key.  Each sealed delivery addressed to the
 * node (credential.delivered followed in the log with --log, read
 * from the node's own queue tally.node.NODE with --amqp) is opened
 * with the node's key and checked: the box's "#tally" line names the
 * grant, the holder and the version, the holder must be on this node,
 * and the version must be newer than the one held (versions only move
 * forward: a replayed or reordered delivery changes nothing).  Then:
 *   DIR/MODULE.env        the module's declared env defaults, then the
 *                         mapped connection fields of all its grants
 *                         (KEY=VALUE lines, mode 0600, atomically);
 *   DIR/MODULE/VARIABLE   one file per value (mode 0600), for programs
 *                         that read credentials as files;
 *   the reload action     sh -c COMMAND, after the files are in place;
 *   the acknowledgement   only when the reload succeeded: signed by the
 *                         node's Ed25519 key, with a MAC keyed by the
 *                         delivered credential's proof key
 *                         (reactors/ack.h), to tally.acks (--amqp) or
 *                         appended to the log as credential.ack-offered
 *                         (--log, the control plane's own machine).
 * A failed reload is reported and not acknowledged: the rotation waits
 * on this holder and the old credential keeps working.
 *
 * Its state is DIR/.tally-node/ (mode 0700): per grant the version
 * held, whether it was reloaded and acknowledged, and the delivery as
 * it came (still sealed); with --log the last sequence number read.
 *
 * Exit codes: 0, 1 failure, 2 usage, 6 (--once) a reload failed.
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <jansson.h>
#include <pwd.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/body.h"
#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "core/sub.h"
#include "core/version.h"
#include "core/amqp.h"
#include "projections/events.h"
#include "reactors/ack.h"

#define EXIT_OK		0
#define EXIT_FAIL	1
#define EXIT_USAGE	2
#define EXIT_UNHEALTHY	6
#define MAXMOD		4096	/* modules configured (--reload, --user) */

static const char usage[] =
"usage: tally-node --node NODE --key FILE --dir DIR\n"
"           (--log HOME | --amqp URL [--amqp-user USER]\n"
"            [--amqp-password-file FILE] [--acks QUEUE])\n"
"           [--reload MODULE=COMMAND]... [--user MODULE=USER]...\n"
"           [--report-interval SECONDS] [--once]\n"
"\n"
"The node's agent: opens the deliveries sealed to NODE with its key\n"
"FILE, writes DIR/MODULE.env and DIR/MODULE/VARIABLE (mode 0600, owned\n"
"by --user's USER), runs MODULE's reload COMMAND (sh -c) and, when it\n"
"succeeds, acknowledges the version with the node's signature and a\n"
"proof that it holds the credential.  --log follows the log of the\n"
"control plane's HOME (the same machine); --amqp reads the queue\n"
"tally.node.NODE and acknowledges on QUEUE (default tally.acks), the\n"
"password from FILE or $TALLY_NODE_AMQP_PASSWORD.  It reports what it\n"
"holds (signed) after each reload and every SECONDS (default 60): tally\n"
"status shows it, and an agent silent too long.  --once: what is there,\n"
"then exit.\n";

struct modconf {
	char	 name[64];
	char	*reload;
	char	 user[64];
};

struct agent {
	const char		*node;
	const char		*dir;
	char			 state[1200];
	struct tl_node_key	 key;
	uint8_t			 pk[TL_PUBKEY_LEN];
	struct modconf		 mods[MAXMOD];
	size_t			 nmods;
	int			 once;
	int			 reload_failed;
	/* What was refused from the queue (--amqp), for the reports. */
	unsigned		 refused;
	char			 refused_last[200];
	uint64_t		 cp_seq;	/* the last notice taken (amqp-seq) */
	/* What the reports say: the last reload, and when one is due. */
	char			 last_module[64];
	int			 last_status;	/* -1: none yet */
	unsigned		 report_every;	/* seconds */
	uint64_t		 report_due;	/* tl_sub_clock() ns */
	/* --log */
	const char		*home;
	struct tl_log		*log;
	/* --amqp */
	const char		*url;
	struct tl_amqp_conf	 conf;
	char			 password[256];
	const char		*acks;
	struct tl_amqp		*a;
};

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void __attribute__((format(printf, 2, 3)))
say(const char *level, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tally-node: %s: ", level);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A copy cut to fit (the lines it reads are bounded anyway). */
static void
cpy(char *dst, size_t n, const char *src)
{
	size_t l = strnlen(src, n - 1);

	memcpy(dst, src, l);
	dst[l] = '\0';
}

static struct modconf *
mod(struct agent *ag, const char *name, int create)
{
	size_t i;

	for (i = 0; i < ag->nmods; i++)
		if (strcmp(ag->mods[i].name, name) == 0)
			return &ag->mods[i];
	if (!create || ag->nmods == MAXMOD || strlen(name) >= 64)
		return NULL;
	memset(&ag->mods[ag->nmods], 0, sizeof(ag->mods[0]));
	snprintf(ag->mods[ag->nmods].name, 64, "%s", name);
	return &ag->mods[ag->nmods++];
}

/* --- the state of one grant ------------------------------------------ */

struct held {
	char		grant[201];
	char		holder[140];
	char		module[64];
	uint64_t	version;
	int		reloaded;
	int		acked;
	int		revoked;	/* dropped: what is kept stops replays */
};

/* A grant id as a file name: '/' and '@' are not kept. */
static void
fname(const char *grant, char *out, size_t n)
{
	size_t i, j = 0;

	for (i = 0; grant[i] != '\0' && j + 4 < n; i++) {
		char ch = grant[i];

		if (ch == '/' || ch == '@' || ch == '%')
			j += (size_t)snprintf(out + j, n - j, "%%%02X",
			    (unsigned char)ch);
		else
			out[j++] = ch;
	}
	out[j] = '\0';
}

static int
held_load(struct agent *ag, const char *grant, struct held *h)
{
	char f[200], path[1600], line[400];
	FILE *fp;
	unsigned long long v = 0;

	memset(h, 0, sizeof(*h));
	fname(grant, f, sizeof(f));
	snprintf(path, sizeof(path), "%s/%s.state", ag->state, f);
	if ((fp = fopen(path, "r")) == NULL)
		return errno == ENOENT ? TL_ENOTFOUND : errno;
	while (fgets(line, sizeof(line), fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "grant ", 6) == 0)
			cpy(h->grant, sizeof(h->grant), line + 6);
		else if (strncmp(line, "holder ", 7) == 0)
			cpy(h->holder, sizeof(h->holder), line + 7);
		else if (strncmp(line, "module ", 7) == 0)
			cpy(h->module, sizeof(h->module), line + 7);
		else if (sscanf(line, "version %llu", &v) == 1)
			h->version = v;
		else if (strcmp(line, "reloaded 1") == 0)
			h->reloaded = 1;
		else if (strcmp(line, "acked 1") == 0)
			h->acked = 1;
		else if (strcmp(line, "revoked 1") == 0)
			h->revoked = 1;
	}
	fclose(fp);
	return 0;
}

static int
held_save(struct agent *ag, const struct held *h)
{
	char f[200], path[1600], buf[800];
	int n;

	fname(h->grant, f, sizeof(f));
	snprintf(path, sizeof(path), "%s/%s.state", ag->state, f);
	n = snprintf(buf, sizeof(buf), "grant %s\nholder %s\nmodule %s\n"
	    "version %llu\nreloaded %d\nacked %d\nrevoked %d\n", h->grant,
	    h->holder, h->module, (unsigned long long)h->version, h->reloaded,
	    h->acked, h->revoked);
	return tl_secret_write_file(path, buf, (size_t)n, 0600);
}

/* --- opening a delivery ---------------------------------------------- */

struct opened {
	char	*plain;		/* NUL-terminated; wiped and freed by the caller */
	size_t	 len;
	char	 grant[201];
	char	 holder[140];
	uint64_t version;
	char	 proof[2 * TL_MAC_LEN + 1];
};

static void
opened_free(struct opened *o)
{
	if (o->plain != NULL) {
		tl_secret_wipe(o->plain, o->len);
		free(o->plain);
	}
	tl_secret_wipe(o->proof, sizeof(o->proof));
	o->plain = NULL;
}

static int
open_sealed(struct agent *ag, const void *sealed, size_t slen,
    struct opened *o)
{
	char *p, *end;
	unsigned long long v;

	memset(o, 0, sizeof(*o));
	if (slen <= TL_SEAL_OVERHEAD)
		return TL_ESECRET;
	o->len = slen - TL_SEAL_OVERHEAD;
	if ((o->plain = malloc(o->len + 1)) == NULL)
		return ENOMEM;
	if (tl_secret_unseal(ag->pk, ag->key.box_sk, sealed, slen,
	    (uint8_t *)o->plain) != 0) {
		opened_free(o);
		return TL_ESECRET;
	}
	o->plain[o->len] = '\0';
	for (p = o->plain; *p != '\0'; p = *end ? end + 1 : end) {
		end = p + strcspn(p, "\n");
		if (strncmp(p, "#tally ", 7) == 0 && sscanf(p,
		    "#tally grant=%200s holder=%139s version=%llu", o->grant,
		    o->holder, &v) == 3)
			o->version = v;
		else if (strncmp(p, "#proof ", 7) == 0 && end - p - 7 ==
		    2 * TL_MAC_LEN)
			memcpy(o->proof, p + 7, 2 * TL_MAC_LEN);
	}
	if (o->version == 0 || o->proof[0] == '\0') {
		opened_free(o);
		return TL_EMALFORMED;	/* a delivery of before: no "#tally" */
	}
	return 0;
}

/* --- files ----------------------------------------------------------- */

static int
own(const char *path, const struct modconf *mc)
{
	struct passwd *pw;

	if (mc == NULL || mc->user[0] == '\0')
		return 0;
	if ((pw = getpwnam(mc->user)) == NULL)
		return ENOENT;
	return chown(path, pw->pw_uid, pw->pw_gid) == 0 ? 0 : errno;
}

/* The values of one line list into vars (defaults only where unset). */
static void
collect(json_t *vars, json_t *defs, const char *plain)
{
	const char *p, *end;

	for (p = plain; *p != '\0'; p = *end ? end + 1 : end) {
		const char *eq;
		char name[256];
		size_t nl;
		json_t *into = vars;

		end = p + strcspn(p, "\n");
		if (strncmp(p, "#default ", 9) == 0) {
			p += 9;
			into = defs;
		} else if (*p == '#')
			continue;
		if ((eq = memchr(p, '=', (size_t)(end - p))) == NULL ||
		    (nl = (size_t)(eq - p)) == 0 || nl >= sizeof(name))
			continue;
		/*
		 * A variable declared with "" is filled by a requirement, not
		 * defaulted: written empty it would outlive its grant.
		 */
		if (into == defs && eq + 1 == end)
			continue;
		memcpy(name, p, nl);
		name[nl] = '\0';
		json_object_set_new(into, name, json_stringn(eq + 1,
		    (size_t)(end - eq - 1)));
	}
}

static int
read_sealed(struct agent *ag, const char *grant, uint8_t **out, size_t *len)
{
	char f[200], path[1600];
	struct stat st;
	int fd, rc = 0;
	ssize_t n;

	fname(grant, f, sizeof(f));
	snprintf(path, sizeof(path), "%s/%s.sealed", ag->state, f);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno;
	if (fstat(fd, &st) != 0 || (*out = malloc((size_t)st.st_size + 1)) ==
	    NULL) {
		close(fd);
		return ENOMEM;
	}
	n = read(fd, *out, (size_t)st.st_size);
	if (n != st.st_size)
		rc = EIO;
	*len = (size_t)st.st_size;
	close(fd);
	if (rc != 0)
		free(*out);
	return rc;
}

/* Removes DIR/MODULE.env and DIR/MODULE/; the number of files removed. */
static int
remove_files(struct agent *ag, const char *module)
{
	char path[2100];
	DIR *d;
	struct dirent *de;
	int n = 0;

	snprintf(path, sizeof(path), "%s/%s", ag->dir, module);
	if ((d = opendir(path)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			char f[2400];

			if (de->d_name[0] == '.')
				continue;
			snprintf(f, sizeof(f), "%s/%s", path, de->d_name);
			if (unlink(f) == 0)
				n++;
		}
		closedir(d);
		rmdir(path);
	}
	snprintf(path, sizeof(path), "%s/%s.env", ag->dir, module);
	if (unlink(path) == 0)
		n++;
	return n;
}

/*
 * Writes DIR/MODULE.env and DIR/MODULE/ from every grant of module the
 * agent holds: the files are derived from the sealed deliveries kept.
 * A value no grant gives any more (a grant revoked) leaves both; when
 * no grant is left, so do the files.
 */
static int
write_module(struct agent *ag, const char *module)
{
	struct modconf *mc = mod(ag, module, 0);
	json_t *vars = json_object(), *defs = json_object();
	char path[2100], sub[1600];
	DIR *d;
	struct dirent *de;
	const char *k;
	json_t *v;
	char *buf = NULL;
	size_t blen = 0;
	FILE *mem;
	int rc = 0, ngrants = 0;

	if ((d = opendir(ag->state)) == NULL) {
		rc = errno;
		goto out;
	}
	while ((de = readdir(d)) != NULL) {
		size_t nl = strlen(de->d_name);
		struct held h;
		struct opened o;
		uint8_t *sealed;
		size_t slen;
		char grant[201];

		if (nl < 7 || strcmp(de->d_name + nl - 6, ".state") != 0)
			continue;
		/* The file name is the grant's, escaped: read it inside. */
		{
			char sp[1600], line[400];
			FILE *fp;

			snprintf(sp, sizeof(sp), "%s/%s", ag->state,
			    de->d_name);
			grant[0] = '\0';
			if ((fp = fopen(sp, "r")) == NULL)
				continue;
			if (fgets(line, sizeof(line), fp) != NULL &&
			    strncmp(line, "grant ", 6) == 0) {
				line[strcspn(line, "\n")] = '\0';
				cpy(grant, sizeof(grant), line + 6);
			}
			fclose(fp);
		}
		if (grant[0] == '\0' || held_load(ag, grant, &h) != 0 ||
		    strcmp(h.module, module) != 0 || h.revoked)
			continue;
		if (read_sealed(ag, grant, &sealed, &slen) != 0)
			continue;
		if (open_sealed(ag, sealed, slen, &o) == 0) {
			collect(vars, defs, o.plain);
			opened_free(&o);
			ngrants++;
		}
		free(sealed);
	}
	closedir(d);
	if (ngrants == 0) {
		remove_files(ag, module);
		goto out;
	}
	json_object_foreach(defs, k, v)
		if (json_object_get(vars, k) == NULL)
			json_object_set(vars, k, v);
	if ((mem = open_memstream(&buf, &blen)) == NULL) {
		rc = errno;
		goto out;
	}
	json_object_foreach(vars, k, v)
		fprintf(mem, "%s=%s\n", k, json_string_value(v));
	fclose(mem);
	snprintf(sub, sizeof(sub), "%s/%s", ag->dir, module);
	if (mkdir(sub, 0700) != 0 && errno != EEXIST) {
		rc = errno;
		goto out;
	}
	own(sub, mc);
	/* What no grant gives any more goes first. */
	if ((d = opendir(sub)) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (de->d_name[0] != '.' && json_object_get(vars,
			    de->d_name) == NULL) {
				snprintf(path, sizeof(path), "%s/%s", sub,
				    de->d_name);
				unlink(path);
			}
		closedir(d);
	}
	json_object_foreach(vars, k, v) {
		const char *s = json_string_value(v);

		if (strchr(k, '/') != NULL || k[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", sub, k);
		if ((rc = tl_secret_write_file(path, s, strlen(s), 0600)) != 0 ||
		    (rc = own(path, mc)) != 0)
			goto out;
	}
	snprintf(path, sizeof(path), "%s/%s.env", ag->dir, module);
	/* Owned before it is in place: the temporary file is 0600 too. */
	if ((rc = tl_secret_write_file(path, buf, blen, 0600)) == 0)
		rc = own(path, mc);
out:
	if (buf != NULL) {
		tl_secret_wipe(buf, blen);
		free(buf);
	}
	json_decref(vars);
	json_decref(defs);
	return rc;
}

/* --- reload and acknowledgement -------------------------------------- */

static int
run_reload(struct agent *ag, const char *module, int *status)
{
	struct modconf *mc = mod(ag, module, 0);
	char envpath[1600], dirpath[1600];
	pid_t pid;
	int st;

	*status = 0;
	if (mc == NULL || mc->reload == NULL)
		return 0;	/* nothing to reload: the files are the delivery */
	snprintf(envpath, sizeof(envpath), "%s/%s.env", ag->dir, module);
	snprintf(dirpath, sizeof(dirpath), "%s/%s", ag->dir, module);
	if ((pid = fork()) < 0)
		return errno;
	if (pid == 0) {
		setenv("TALLY_MODULE", module, 1);
		setenv("TALLY_ENV_FILE", envpath, 1);
		setenv("CREDENTIALS_DIRECTORY", dirpath, 1);
		execl("/bin/sh", "sh", "-c", mc->reload, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return errno;
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
}

static void
hex(const uint8_t *p, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", p[i]);
}

struct offer {
	const char	*node, *grant, *holder;
	uint64_t	 version;
	char		 nonce[2 * TL_ACK_NONCE_LEN + 1];
	char		 sig[2 * TL_SIGN_LEN + 1];
	char		 mac[2 * TL_MAC_LEN + 1];
};

static int
append_offer(struct tl_txn *t, void *arg)
{
	struct offer *o = arg;
	struct tl_body b;
	struct tl_append a;
	char stream[128], actor[96];
	const void *body;
	size_t len;
	int rc;

	snprintf(stream, sizeof(stream), "node/%s", o->node);
	snprintf(actor, sizeof(actor), "tally-node:%s", o->node);
	tl_body_init(&b);
	tl_body_str(&b, "node", o->node);
	tl_body_str(&b, "grant", o->grant);
	tl_body_str(&b, "holder", o->holder);
	tl_body_u64(&b, "version", o->version);
	tl_body_str(&b, "nonce", o->nonce);
	tl_body_str(&b, "sig", o->sig);
	tl_body_str(&b, "mac", o->mac);
	tl_body_str(&b, "via", "log");
	if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
		memset(&a, 0, sizeof(a));
		a.type = TL_EV_ACK_OFFERED;
		a.stream = stream;
		a.expect = TL_VER_ANY;
		a.actor = actor;
		a.body = body;
		a.body_len = len;
		/* A bare append: tallyd's projections catch up with it. */
		rc = tl_append(t, &a, NULL, NULL);
	}
	tl_body_free(&b);
	return rc;
}

static int
acknowledge(struct agent *ag, const struct opened *o)
{
	struct offer of;
	uint8_t nonce[TL_ACK_NONCE_LEN], sig[TL_SIGN_LEN], mac[TL_MAC_LEN];
	uint8_t msg[TL_ACK_MSG_MAX], pkey[TL_MAC_LEN];
	size_t mlen, got = 0;
	int rc;

	if (!ag->key.has_sign) {
		say("error", "%s has no signing key (a key file of before: "
		    "tally node rekey %s): cannot acknowledge", o->grant,
		    ag->node);
		return TL_ESECRET;
	}
	randombytes_buf(nonce, sizeof(nonce));
	if ((rc = tl_ack_message(o->grant, o->holder, o->version, nonce, msg,
	    &mlen)) != 0)
		return rc;
	tl_secret_sign(ag->key.sign_sk, msg, mlen, sig);
	if (sodium_hex2bin(pkey, sizeof(pkey), o->proof, strlen(o->proof),
	    NULL, &got, NULL) != 0 || got != sizeof(pkey))
		return TL_EMALFORMED;
	rc = tl_secret_mac(pkey, sizeof(pkey), msg, mlen, mac);
	tl_secret_wipe(pkey, sizeof(pkey));
	if (rc != 0)
		return rc;
	memset(&of, 0, sizeof(of));
	of.node = ag->node;
	of.grant = o->grant;
	of.holder = o->holder;
	of.version = o->version;
	hex(nonce, sizeof(nonce), of.nonce);
	hex(sig, sizeof(sig), of.sig);
	hex(mac, sizeof(mac), of.mac);
	if (ag->log != NULL)
		return tl_log_write(ag->log, append_offer, &of);
	{
		struct tl_amqp_msg m;
		json_t *j;
		char *js;

		j = json_pack("{s:s,s:s,s:s,s:I,s:s,s:s,s:s}", "node", of.node,
		    "grant", of.grant, "holder", of.holder, "version",
		    (json_int_t)of.version, "nonce", of.nonce, "sig", of.sig,
		    "mac", of.mac);
		if (j == NULL || (js = json_dumps(j, JSON_COMPACT)) == NULL) {
			json_decref(j);
			return ENOMEM;
		}
		json_decref(j);
		memset(&m, 0, sizeof(m));
		m.exchange = "";
		m.routing_key = ag->acks;
		m.body = js;
		m.len = strlen(js);
		m.content_type = "application/json";
		m.persistent = 1;
		rc = tl_amqp_publish(ag->a, &m, NULL);
		if (rc == 0)
			rc = tl_amqp_wait_confirms(ag->a,
			    tl_amqp_published(ag->a), tl_sub_deadline(5000));
		free(js);
		return rc;
	}
}

/*
 * The report: {"agent","held":[{"grant","holder","version","reloaded",
 * "acked"}],"last_reload":{"module","ok","status"}}, signed by the
 * node's key (tl_report_message) and offered like an acknowledgement.
 * It is also the agent's heartbeat: with --log the agent puts its
 * last-seen time in the scratch table TL_SEEN_TABLE (reactors/ack.h)
 * each time, in place, and appends node.report-offered only when the
 * report differs from the last one it appended, so an idle node
 * appends nothing.
 */
struct report_w {
	const char	*node, *report, *sig;
	int		 append;
};

static int
append_report(struct tl_txn *t, void *arg)
{
	const struct report_w *w = arg;
	struct tl_body b;
	struct tl_append a;
	struct timespec now;
	char stream[128], actor[96];
	const void *body;
	size_t len;
	int rc;

	clock_gettime(CLOCK_REALTIME, &now);
	if ((rc = tl_ack_seen(t, w->node, (uint64_t)now.tv_sec * 1000000000u +
	    (uint64_t)now.tv_nsec)) != 0 || !w->append)
		return rc;
	snprintf(stream, sizeof(stream), "node/%s", w->node);
	snprintf(actor, sizeof(actor), "tally-node:%s", w->node);
	tl_body_init(&b);
	tl_body_str(&b, "node", w->node);
	tl_body_str(&b, "report", w->report);
	tl_body_str(&b, "sig", w->sig);
	tl_body_str(&b, "via", "log");
	if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
		memset(&a, 0, sizeof(a));
		a.type = TL_EV_REPORT_OFFERED;
		a.stream = stream;
		a.expect = TL_VER_ANY;
		a.actor = actor;
		a.body = body;
		a.body_len = len;
		rc = tl_append(t, &a, NULL, NULL);
	}
	tl_body_free(&b);
	return rc;
}

/* One order for "held" whatever the directory's: grant, then holder. */
static int
held_cmp(const void *a, const void *b)
{
	json_t *const *x = a, *const *y = b;
	int c = strcmp(json_string_value(json_object_get(*x, "grant")),
	    json_string_value(json_object_get(*y, "grant")));

	return c != 0 ? c : strcmp(json_string_value(json_object_get(*x,
	    "holder")), json_string_value(json_object_get(*y, "holder")));
}

static int
sort_held(json_t *held)
{
	size_t n = json_array_size(held), i;
	json_t **v;

	if (n < 2)
		return 0;
	if ((v = calloc(n, sizeof(*v))) == NULL)
		return ENOMEM;
	for (i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(held, i));
	qsort(v, n, sizeof(*v), held_cmp);
	json_array_clear(held);
	for (i = 0; i < n; i++)
		json_array_append_new(held, v[i]);
	free(v);
	return 0;
}

static int
send_report(struct agent *ag)
{
	json_t *r, *held;
	DIR *d;
	struct dirent *de;
	char *js = NULL, sighex[2 * TL_SIGN_LEN + 1];
	uint8_t *msg = NULL, sig[TL_SIGN_LEN];
	size_t mlen;
	int rc;

	if (!ag->key.has_sign)
		return 0;
	held = json_array();
	if ((d = opendir(ag->state)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			size_t nl = strlen(de->d_name);
			char sp[1600], line[400], grant[201] = "";
			struct held h;
			FILE *fp;

			if (nl < 7 || strcmp(de->d_name + nl - 6, ".state") != 0)
				continue;
			snprintf(sp, sizeof(sp), "%s/%s", ag->state,
			    de->d_name);
			if ((fp = fopen(sp, "r")) == NULL)
				continue;
			if (fgets(line, sizeof(line), fp) != NULL &&
			    strncmp(line, "grant ", 6) == 0) {
				line[strcspn(line, "\n")] = '\0';
				cpy(grant, sizeof(grant), line + 6);
			}
			fclose(fp);
			if (grant[0] == '\0' || held_load(ag, grant, &h) != 0 ||
			    h.revoked)
				continue;
			json_array_append_new(held, json_pack("{s:s,s:s,s:I,"
			    "s:b,s:b}", "grant", h.grant, "holder", h.holder,
			    "version", (json_int_t)h.version, "reloaded",
			    h.reloaded, "acked", h.acked));
		}
		closedir(d);
	}
	r = json_pack("{s:s,s:o}", "agent", "tally-node " TL_VERSION, "held",
	    held);
	if (r != NULL && ag->last_status >= 0)
		json_object_set_new(r, "last_reload", json_pack("{s:s,s:b,s:i}",
		    "module", ag->last_module, "ok", ag->last_status == 0,
		    "status", ag->last_status));
	if (r != NULL && ag->refused > 0)
		json_object_set_new(r, "refused", json_pack("{s:I,s:s}",
		    "count", (json_int_t)ag->refused, "last", ag->refused_last));
	if (r == NULL || sort_held(held) != 0 ||
	    (js = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS)) == NULL) {
		json_decref(r);
		return ENOMEM;
	}
	/*
	 * "since": when this content first appeared (wall clock, ns).  It
	 * stays while nothing changes, so an unchanged report is the same
	 * bytes, and it orders the reports: the control plane refuses one
	 * older than the one it recorded (a report sent again).
	 */
	{
		static uint8_t content[32];
		static uint64_t since;
		uint8_t dg[32];
		struct timespec now;

		crypto_generichash(dg, sizeof(dg), (const uint8_t *)js,
		    strlen(js), NULL, 0);
		if (since == 0 || sodium_memcmp(dg, content, sizeof(dg)) != 0) {
			clock_gettime(CLOCK_REALTIME, &now);
			since = (uint64_t)now.tv_sec * 1000000000u +
			    (uint64_t)now.tv_nsec;
			memcpy(content, dg, sizeof(content));
		}
		free(js);
		js = NULL;
		if (json_object_set_new(r, "since", json_integer((json_int_t)
		    since)) != 0 || (js = json_dumps(r, JSON_COMPACT |
		    JSON_SORT_KEYS)) == NULL) {
			json_decref(r);
			return ENOMEM;
		}
	}
	json_decref(r);
	if ((rc = tl_report_message(ag->node, js, &msg, &mlen)) != 0)
		goto out;
	tl_secret_sign(ag->key.sign_sk, msg, mlen, sig);
	hex(sig, sizeof(sig), sighex);
	if (ag->log != NULL) {
		/* One agent per process: the digest of the last appended. */
		static uint8_t last[32];
		static int have;
		uint8_t dg[32];
		struct report_w w = { ag->node, js, sighex, 1 };

		crypto_generichash(dg, sizeof(dg), (const uint8_t *)js,
		    strlen(js), NULL, 0);
		w.append = !have || sodium_memcmp(dg, last, sizeof(dg)) != 0;
		if ((rc = tl_log_write(ag->log, append_report, &w)) == 0 &&
		    w.append) {
			memcpy(last, dg, sizeof(last));
			have = 1;
		}
	} else {
		struct tl_amqp_msg m;
		json_t *j = json_pack("{s:s,s:s,s:s}", "node", ag->node,
		    "report", js, "sig", sighex);
		char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;

		json_decref(j);
		if (body == NULL) {
			rc = ENOMEM;
			goto out;
		}
		memset(&m, 0, sizeof(m));
		m.exchange = "";
		m.routing_key = ag->acks;
		m.body = body;
		m.len = strlen(body);
		m.content_type = "application/json";
		m.persistent = 1;
		rc = tl_amqp_publish(ag->a, &m, NULL);
		free(body);
	}
out:
	free(msg);
	free(js);
	if (rc == 0)
		ag->report_due = tl_sub_clock() + (uint64_t)ag->report_every *
		    1000000000u;
	else
		say("warning", "the report could not be sent: %s",
		    tl_strerror(rc));
	return 0;
}

static void
maybe_report(struct agent *ag)
{
	if (tl_sub_clock() >= ag->report_due)
		send_report(ag);
}

/* --- one delivery ---------------------------------------------------- */

static int
save_sealed(struct agent *ag, const char *grant, const void *sealed,
    size_t len)
{
	char f[200], path[1600];

	fname(grant, f, sizeof(f));
	snprintf(path, sizeof(path), "%s/%s.sealed", ag->state, f);
	return tl_secret_write_file(path, sealed, len, 0600);
}

/* Files, reload, acknowledgement for the version held in h. */
static int
apply(struct agent *ag, struct held *h, const struct opened *o)
{
	int rc, status = 0;

	if ((rc = write_module(ag, h->module)) != 0) {
		say("error", "%s: cannot write %s/%s.env: %s", h->grant,
		    ag->dir, h->module, tl_strerror(rc));
		return rc;
	}
	rc = run_reload(ag, h->module, &status);
	cpy(ag->last_module, sizeof(ag->last_module), h->module);
	ag->last_status = rc != 0 ? 127 : status;
	ag->report_due = 0;	/* a report follows at once */
	if (rc != 0 || status != 0) {
		say("error", "%s: the reload of %s failed (%s %d): v%llu not "
		    "acknowledged, the old credential keeps working",
		    h->grant, h->module, rc ? tl_strerror(rc) : "exit",
		    rc ? rc : status, (unsigned long long)h->version);
		ag->reload_failed = 1;
		h->reloaded = 0;
		held_save(ag, h);
		return 0;
	}
	h->reloaded = 1;
	held_save(ag, h);
	if ((rc = acknowledge(ag, o)) != 0) {
		say("error", "%s: acknowledging v%llu failed: %s", h->grant,
		    (unsigned long long)h->version, tl_strerror(rc));
		return rc;
	}
	h->acked = 1;
	held_save(ag, h);
	say("info", "%s: v%llu in %s/%s.env, reloaded, acknowledged",
	    h->grant, (unsigned long long)h->version, ag->dir, h->module);
	return 0;
}

static int
deliver(struct agent *ag, const void *sealed, size_t slen)
{
	struct opened o;
	struct held h;
	const char *at;
	size_t ml;
	int rc;

	if ((rc = open_sealed(ag, sealed, slen, &o)) != 0) {
		say("warning", "a delivery that this node's key does not open "
		    "(or without its \"#tally\" line): ignored");
		return 0;
	}
	if ((at = strchr(o.holder, '@')) == NULL || strcmp(at + 1,
	    ag->node) != 0 || (ml = (size_t)(at - o.holder)) >= 64) {
		say("warning", "a delivery for %s, not for node %s: ignored",
		    o.holder, ag->node);
		goto out;
	}
	if (held_load(ag, o.grant, &h) == 0 && h.version >= o.version) {
		/* Replayed or reordered: versions only move forward. */
		say("debug", "%s: v%llu is not newer than v%llu: nothing to do",
		    o.grant, (unsigned long long)o.version,
		    (unsigned long long)h.version);
		goto out;
	}
	memset(&h, 0, sizeof(h));
	snprintf(h.grant, sizeof(h.grant), "%s", o.grant);
	snprintf(h.holder, sizeof(h.holder), "%s", o.holder);
	memcpy(h.module, o.holder, ml);
	h.module[ml] = '\0';
	h.version = o.version;
	if ((rc = save_sealed(ag, o.grant, sealed, slen)) != 0 ||
	    (rc = held_save(ag, &h)) != 0) {
		say("error", "cannot keep the state in %s: %s", ag->state,
		    tl_strerror(rc));
		goto out;
	}
	rc = apply(ag, &h, &o);
out:
	opened_free(&o);
	return rc;
}

/* At start: what was delivered but not reloaded or acknowledged. */
static int
resume(struct agent *ag)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if ((d = opendir(ag->state)) == NULL)
		return errno;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		size_t nl = strlen(de->d_name);
		char sp[1600], line[400], grant[201] = "";
		struct held h;
		struct opened o;
		uint8_t *sealed;
		size_t slen;
		FILE *fp;

		if (nl < 7 || strcmp(de->d_name + nl - 6, ".state") != 0)
			continue;
		snprintf(sp, sizeof(sp), "%s/%s", ag->state, de->d_name);
		if ((fp = fopen(sp, "r")) == NULL)
			continue;
		if (fgets(line, sizeof(line), fp) != NULL &&
		    strncmp(line, "grant ", 6) == 0) {
			line[strcspn(line, "\n")] = '\0';
			cpy(grant, sizeof(grant), line + 6);
		}
		fclose(fp);
		if (grant[0] == '\0' || held_load(ag, grant, &h) != 0 ||
		    h.acked || h.revoked)
			continue;
		if (read_sealed(ag, grant, &sealed, &slen) != 0)
			continue;
		if (open_sealed(ag, sealed, slen, &o) == 0) {
			rc = apply(ag, &h, &o);
			opened_free(&o);
		}
		free(sealed);
	}
	closedir(d);
	return rc;
}

/*
 * The module is no longer on this node (unassigned, or the module
 * removed): its files and the state of its grants go.
 */
static int
remove_module(struct agent *ag, const char *module)
{
	DIR *d;
	struct dirent *de;
	int n;

	if (module[0] == '\0' || module[0] == '.' || strchr(module, '/'))
		return 0;	/* not a module's name: nothing of it here */
	n = remove_files(ag, module);
	if ((d = opendir(ag->state)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			size_t nl = strlen(de->d_name);
			char sp[1600], line[400], grant[201] = "", fn[200];
			struct held h;
			FILE *fp;

			if (nl < 7 || strcmp(de->d_name + nl - 6, ".state") != 0)
				continue;
			snprintf(sp, sizeof(sp), "%s/%s", ag->state,
			    de->d_name);
			if ((fp = fopen(sp, "r")) == NULL)
				continue;
			if (fgets(line, sizeof(line), fp) != NULL &&
			    strncmp(line, "grant ", 6) == 0) {
				line[strcspn(line, "\n")] = '\0';
				cpy(grant, sizeof(grant), line + 6);
			}
			fclose(fp);
			if (grant[0] == '\0' || held_load(ag, grant, &h) != 0 ||
			    strcmp(h.module, module) != 0)
				continue;
			fname(grant, fn, sizeof(fn));
			snprintf(sp, sizeof(sp), "%s/%s.sealed", ag->state, fn);
			unlink(sp);
			snprintf(sp, sizeof(sp), "%s/%s.state", ag->state, fn);
			unlink(sp);
		}
		closedir(d);
	}
	say("info", "%s is no longer on %s: its files are removed (%d)",
	    module, ag->node, n);
	return 0;
}

/*
 * A grant revoked or purged: its values leave its module's files (the
 * others' stay; no grant left, no files), the module is reloaded, and
 * what is kept of it (the version, marked revoked) makes a delivery of
 * before, replayed, change nothing.
 */
static int
drop_grant(struct agent *ag, const char *grant, const char *what)
{
	struct held h;
	char f[200], path[1600];
	int rc, status = 0;

	if (held_load(ag, grant, &h) != 0 || h.revoked)
		return 0;	/* not held here */
	h.revoked = 1;
	h.reloaded = h.acked = 0;
	if ((rc = held_save(ag, &h)) != 0)
		return rc;
	ag->report_due = 0;	/* it holds less: say so now */
	fname(grant, f, sizeof(f));
	snprintf(path, sizeof(path), "%s/%s.sealed", ag->state, f);
	unlink(path);
	if ((rc = write_module(ag, h.module)) != 0) {
		say("error", "%s %s: cannot rewrite %s/%s.env: %s", grant, what,
		    ag->dir, h.module, tl_strerror(rc));
		return rc;
	}
	say("info", "%s %s: its values left %s/%s.env and %s/%s/", grant,
	    what, ag->dir, h.module, ag->dir, h.module);
	snprintf(path, sizeof(path), "%s/%s.env", ag->dir, h.module);
	if (access(path, F_OK) != 0)
		return 0;	/* nothing left to reload with */
	rc = run_reload(ag, h.module, &status);
	cpy(ag->last_module, sizeof(ag->last_module), h.module);
	ag->last_status = rc != 0 ? 127 : status;
	ag->report_due = 0;
	if (rc != 0 || status != 0)
		say("error", "the reload of %s after %s left failed (%s %d)",
		    h.module, grant, rc ? tl_strerror(rc) : "exit",
		    rc ? rc : status);
	return 0;
}

/* --- sources --------------------------------------------------------- */

static int
read_pos(struct agent *ag, uint64_t *pos)
{
	char path[1600], buf[32] = "";
	FILE *fp;

	*pos = 0;
	snprintf(path, sizeof(path), "%s/position", ag->state);
	if ((fp = fopen(path, "r")) == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), fp) != NULL)
		*pos = strtoull(buf, NULL, 10);
	fclose(fp);
	return 0;
}

static int
write_pos(struct agent *ag, uint64_t pos)
{
	char path[1600], buf[32];
	int n;

	snprintf(path, sizeof(path), "%s/position", ag->state);
	n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)pos);
	return tl_secret_write_file(path, buf, (size_t)n, 0600);
}

static int
from_log(struct agent *ag)
{
	struct tl_sub_opts so = TL_SUB_OPTS_INIT;
	struct tl_sub *s = NULL;
	struct tl_event ev;
	char logdir[1200];
	uint64_t pos;
	int rc;

	snprintf(logdir, sizeof(logdir), "%s/log", ag->home);
	read_pos(ag, &pos);
	so.from = pos + 1;
	/*
	 * credential.delivered|withdrawn, assignment.removed,
	 * grant.revoked|purged
	 */
	so.type = "[acg][sr]*.[dprw][eui]*";
	if ((rc = tl_sub_attach(ag->log, &so, &s)) != 0)
		goto out;
	while (!stop) {
		struct tl_bview v;
		struct tl_bnode n;
		const void *sealed;
		size_t slen;
		char node[64] = "";

		if (tl_sub_clock() >= ag->report_due) {
			tl_sub_release(s);	/* the report is a write */
			send_report(ag);
		}
		rc = tl_sub_next(s, ag->once ? TL_SUB_NOWAIT :
		    tl_sub_deadline(1000), &ev);
		if (rc == TL_ETIMEDOUT || rc == EINTR) {
			rc = 0;
			if (tl_sub_position(s) > pos)
				write_pos(ag, pos = tl_sub_position(s));
			if (ag->once) {
				tl_sub_release(s);
				maybe_report(ag);
				break;
			}
			continue;
		}
		if (rc != 0)
			break;
		if (tl_bview_open(&v, ev.body, ev.body_len) != 0)
			continue;
		if (strcmp(ev.type, TL_EV_ASSIGN_REMOVED) == 0) {
			char module[64] = "";

			if (tl_bn_getstr(v.root, "node", node, sizeof(node)) ==
			    0 && strcmp(node, ag->node) == 0 &&
			    tl_bn_getstr(v.root, "module", module,
			    sizeof(module)) == 0) {
				tl_bview_close(&v);
				tl_sub_release(s);
				remove_module(ag, module);
				write_pos(ag, pos = ev.seq);
				continue;
			}
			tl_bview_close(&v);
			continue;
		}
		if (strcmp(ev.type, TL_EV_GRANT_REVOKED) == 0 ||
		    strcmp(ev.type, TL_EV_GRANT_PURGED) == 0 ||
		    strcmp(ev.type, TL_EV_CRED_WITHDRAWN) == 0) {
			char grant[201] = "";
			int wd = ev.type[0] == 'c';

			rc = tl_bn_getstr(v.root, "grant", grant,
			    sizeof(grant));
			/* A withdrawal is from one node: the one it names. */
			if (rc == 0 && wd && (tl_bn_getstr(v.root, "node",
			    node, sizeof(node)) != 0 ||
			    strcmp(node, ag->node) != 0))
				rc = TL_ENOTFOUND;
			tl_bview_close(&v);
			if (rc != 0) {
				rc = 0;
				continue;
			}
			tl_sub_release(s);
			if ((rc = drop_grant(ag, grant, wd ? "withdrawn" :
			    ev.type[6] == 'r' ? "revoked" : "purged")) != 0)
				break;
			write_pos(ag, pos = ev.seq);
			continue;
		}
		if (strcmp(ev.type, TL_EV_CRED_DELIVERED) != 0) {
			tl_bview_close(&v);
			continue;
		}
		if (tl_bn_getstr(v.root, "node", node, sizeof(node)) == 0 &&
		    strcmp(node, ag->node) == 0 &&
		    tl_bn_get(v.root, "sealed", &n) == 0 &&
		    tl_bn_secret(n, &sealed, &slen) == 0) {
			uint8_t *copy = malloc(slen);

			/* The event is valid until the next call: a copy. */
			if (copy != NULL) {
				memcpy(copy, sealed, slen);
				tl_bview_close(&v);
				/*
				 * The offer is a write on the same log: no read
				 * transaction may be open when it grows the map
				 * (another process may have grown it: SIGBUS).
				 */
				tl_sub_release(s);
				rc = deliver(ag, copy, slen);
				free(copy);
				if (rc != 0)
					break;
				write_pos(ag, pos = ev.seq);
				continue;
			}
		}
		tl_bview_close(&v);
	}
out:
	tl_sub_close(s);
	if (rc != 0)
		say("error", "following %s: %s", logdir, tl_strerror(rc));
	return rc;
}

static void
read_cp_seq(struct agent *ag)
{
	char path[1600], buf[32] = "";
	FILE *fp;

	ag->cp_seq = 0;
	snprintf(path, sizeof(path), "%s/amqp-seq", ag->state);
	if ((fp = fopen(path, "r")) == NULL)
		return;
	if (fgets(buf, sizeof(buf), fp) != NULL)
		ag->cp_seq = strtoull(buf, NULL, 10);
	fclose(fp);
}

static int
write_cp_seq(struct agent *ag, uint64_t seq)
{
	char path[1600], buf[32];
	int n;

	ag->cp_seq = seq;
	snprintf(path, sizeof(path), "%s/amqp-seq", ag->state);
	n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)seq);
	return tl_secret_write_file(path, buf, (size_t)n, 0600);
}

/*
 * Is d signed by the control plane for this node (reactors/ack.h,
 * tl_cp_message)?  0, or TL_ESECRET with the reason in why (200).
 * Anyone who may publish to the broker can put a message on the
 * node's queue, and a sealed box says nothing of who sealed it: only
 * the control plane's signature does.
 */
static int
cp_signed(struct agent *ag, const struct tl_amqp_delivery *d, char *why)
{
	uint8_t sig[TL_SIGN_LEN], *msg;
	size_t got = 0, mlen;
	int rc;

	if (d->sig[0] == '\0') {
		snprintf(why, 200, "unsigned (no \"sig\" header): not from "
		    "the control plane");
		return TL_ESECRET;
	}
	if (d->seq <= 0) {
		snprintf(why, 200, "no \"seq\" header");
		return TL_ESECRET;
	}
	if (sodium_hex2bin(sig, sizeof(sig), d->sig, strlen(d->sig), NULL,
	    &got, NULL) != 0 || got != sizeof(sig)) {
		snprintf(why, 200, "bad signature: not %d bytes of hex",
		    TL_SIGN_LEN);
		return TL_ESECRET;
	}
	if ((rc = tl_cp_message(ag->node, d->type, (uint64_t)d->seq, d->body,
	    d->len, &msg, &mlen)) != 0) {
		snprintf(why, 200, "%s", tl_strerror(rc));
		return rc;
	}
	rc = tl_secret_verify(ag->key.cp_pk, msg, mlen, sig);
	free(msg);
	if (rc != 0)
		snprintf(why, 200, "bad signature: not the control plane's "
		    "key (the one in the node's key file)");
	return rc;
}

/* One message of the node's queue, signed: what it says is done. */
static int
handle_notice(struct agent *ag, const struct tl_amqp_delivery *d)
{
	json_t *j;
	const char *m = NULL, *n = NULL, *g = NULL;
	int rc = 0;

	if (strcmp(d->type, TL_EV_CRED_DELIVERED) == 0)
		return deliver(ag, d->body, d->len);
	if ((j = json_loadb(d->body, d->len, 0, NULL)) == NULL)
		return 0;
	if (strcmp(d->type, TL_EV_ASSIGN_REMOVED) == 0) {
		if (json_unpack(j, "{s:s,s:s}", "module", &m, "node", &n) ==
		    0 && strcmp(n, ag->node) == 0 && strchr(m, '/') == NULL &&
		    m[0] != '.')
			rc = remove_module(ag, m);
	} else if (strcmp(d->type, TL_EV_GRANT_REVOKED) == 0 ||
	    strcmp(d->type, TL_EV_GRANT_PURGED) == 0) {
		if (json_unpack(j, "{s:s}", "grant", &g) == 0)
			rc = drop_grant(ag, g, d->type[6] == 'r' ? "revoked" :
			    "purged");
	} else if (strcmp(d->type, TL_EV_CRED_WITHDRAWN) == 0) {
		if (json_unpack(j, "{s:s,s:s}", "grant", &g, "node", &n) == 0 &&
		    strcmp(n, ag->node) == 0)
			rc = drop_grant(ag, g, "withdrawn");
	}
	json_decref(j);
	return rc;
}

static int
from_amqp(struct agent *ag)
{
	struct tl_amqp_delivery d;
	char why[512] = "", q[96];
	int rc;

	snprintf(q, sizeof(q), "tally.node.%s", ag->node);
	read_cp_seq(ag);
	ag->conf.password = ag->password;
	if ((rc = tl_amqp_connect(&ag->conf, &ag->a, why, sizeof(why))) != 0) {
		say("error", "%s: %s", ag->url, why[0] ? why : tl_strerror(rc));
		return rc;
	}
	if ((rc = tl_amqp_queue(ag->a, q, 1)) != 0 ||
	    (rc = tl_amqp_queue(ag->a, ag->acks, 1)) != 0)
		goto out;
	/* What was delivered but not reloaded or acked goes first. */
	if ((rc = resume(ag)) != 0)
		goto out;
	/*
	 * One message at a time: the acknowledgement waits for its confirm
	 * on the same connection, and a delivery arriving meanwhile would be
	 * read as a stray frame and lost (two grants of a module at once
	 * broke the consumer: "consume: a socket error occurred").
	 */
	if (!ag->once && (rc = tl_amqp_consume(ag->a, q, 1)) != 0)
		goto out;
	while (!stop) {
		maybe_report(ag);
		rc = ag->once ? tl_amqp_get(ag->a, q, &d) :
		    tl_amqp_next(ag->a, tl_sub_deadline(1000), &d);
		if (rc == TL_ENOTFOUND && ag->once) {
			maybe_report(ag);
			rc = tl_amqp_wait_confirms(ag->a,
			    tl_amqp_published(ag->a), tl_sub_deadline(5000));
			break;
		}
		if (rc == TL_ETIMEDOUT) {
			rc = 0;
			continue;
		}
		if (rc != 0)
			break;
		if (cp_signed(ag, &d, why) != 0) {
			/* Taken off the queue, counted and reported: no more. */
			say("warning", "refused a %s message on %s (id %s): %s",
			    d.type[0] ? d.type : "untyped", q,
			    d.message_id[0] ? d.message_id : "none", why);
			ag->refused++;
			snprintf(ag->refused_last, sizeof(ag->refused_last),
			    "%s: %s", d.type[0] ? d.type : "untyped", why);
			ag->report_due = 0;
			rc = 0;
		} else if ((uint64_t)d.seq <= ag->cp_seq) {
			/* Sent again (at least once), or replayed: done. */
			say("debug", "%s of seq %lld: already taken (at %llu)",
			    d.type, (long long)d.seq,
			    (unsigned long long)ag->cp_seq);
			rc = 0;
		} else if ((rc = handle_notice(ag, &d)) == 0)
			rc = write_cp_seq(ag, (uint64_t)d.seq);
		tl_amqp_delivery_free(&d);
		/* Not taken off the queue unless it was handled. */
		if (rc != 0 || (rc = tl_amqp_ack(ag->a, d.tag, 0)) != 0)
			break;
	}
out:
	if (rc != 0)
		say("error", "%s: %s (%s)", ag->url, tl_strerror(rc),
		    tl_amqp_lasterr(ag->a));
	tl_amqp_close(ag->a);
	ag->a = NULL;
	return rc;
}

/* --- main ------------------------------------------------------------ */

static int
read_password(const char *file, char *buf, size_t cap)
{
	const char *env = getenv("TALLY_NODE_AMQP_PASSWORD");
	FILE *fp;
	size_t n;

	buf[0] = '\0';
	if (file != NULL) {
		if ((fp = fopen(file, "r")) == NULL)
			return errno;
		if (fgets(buf, (int)cap, fp) == NULL)
			buf[0] = '\0';
		fclose(fp);
	} else if (env != NULL)
		snprintf(buf, cap, "%s", env);
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	return 0;
}

static int
mod_opt(struct agent *ag, const char *arg, int reload)
{
	const char *eq = strchr(arg, '=');
	char name[64];
	struct modconf *mc;

	if (eq == NULL || eq == arg || (size_t)(eq - arg) >= sizeof(name))
		return -1;
	memcpy(name, arg, (size_t)(eq - arg));
	name[eq - arg] = '\0';
	if ((mc = mod(ag, name, 1)) == NULL)
		return -1;
	if (reload)
		mc->reload = (char *)eq + 1;
	else
		snprintf(mc->user, sizeof(mc->user), "%s", eq + 1);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "key", required_argument, NULL, 'k' },
		{ "dir", required_argument, NULL, 'd' },
		{ "log", required_argument, NULL, 'l' },
		{ "amqp", required_argument, NULL, 'a' },
		{ "amqp-user", required_argument, NULL, 'u' },
		{ "amqp-password-file", required_argument, NULL, 'P' },
		{ "acks", required_argument, NULL, 'A' },
		{ "reload", required_argument, NULL, 'r' },
		{ "user", required_argument, NULL, 'U' },
		{ "once", no_argument, NULL, 'o' },
		{ "report-interval", required_argument, NULL, 'R' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static struct agent ag;
	struct sigaction sa;
	const char *keyfile = NULL, *pwfile = NULL, *user = NULL;
	char why[160] = "";
	int c, rc, ex = EXIT_OK;

	ag.acks = "tally.acks";
	ag.last_status = -1;
	ag.report_every = 60;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': ag.node = optarg; break;
		case 'k': keyfile = optarg; break;
		case 'd': ag.dir = optarg; break;
		case 'l': ag.home = optarg; break;
		case 'a': ag.url = optarg; break;
		case 'u': user = optarg; break;
		case 'P': pwfile = optarg; break;
		case 'A': ag.acks = optarg; break;
		case 'o': ag.once = 1; break;
		case 'R':
			ag.report_every = (unsigned)strtoul(optarg, NULL, 10);
			if (ag.report_every == 0) {
				fprintf(stderr, "tally-node: --report-interval "
				    "wants seconds (1 or more)\n");
				return EXIT_USAGE;
			}
			break;
		case 'r':
		case 'U':
			if (mod_opt(&ag, optarg, c == 'r') != 0) {
				fprintf(stderr, "tally-node: --%s wants "
				    "MODULE=%s\n", c == 'r' ? "reload" : "user",
				    c == 'r' ? "COMMAND" : "USER");
				return EXIT_USAGE;
			}
			break;
		case 'V':
			printf("tally-node %s\n", TL_VERSION);
			return EXIT_OK;
		case 'h':
			fputs(usage, stdout);
			return EXIT_OK;
		default:
			fputs(usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc || ag.node == NULL || keyfile == NULL ||
	    ag.dir == NULL || (ag.home == NULL) == (ag.url == NULL)) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	if (sodium_init() < 0)
		return EXIT_FAIL;
	if ((rc = tl_secret_node_key_load(keyfile, &ag.key, why)) != 0 ||
	    tl_secret_node_public(ag.key.box_sk, ag.pk) != 0) {
		say("error", "%s", why[0] ? why : "the node key is unusable");
		return EXIT_FAIL;
	}
	if (ag.url != NULL && !ag.key.has_cp) {
		/* Without it, nothing on the queue could be told from a forgery. */
		say("error", "%s holds no control-plane key: over --amqp the "
		    "agent takes only what the control plane signed (tally "
		    "node rekey %s --key %s, on the control plane, adds it)",
		    keyfile, ag.node, keyfile);
		ex = EXIT_FAIL;
		goto out;
	}
	if (ag.url != NULL) {
		if (tl_amqp_parse_url(ag.url, &ag.conf) != 0) {
			say("error", "%s: not amqp[s]://host[:port][/vhost] "
			    "(the password goes in --amqp-password-file)",
			    ag.url);
			ex = EXIT_USAGE;
			goto out;
		}
		snprintf(ag.conf.user, sizeof(ag.conf.user), "%s", user ?
		    user : "guest");
		if (read_password(pwfile, ag.password, sizeof(ag.password))
		    != 0) {
			say("error", "%s: cannot read the password", pwfile);
			ex = EXIT_FAIL;
			goto out;
		}
	}
	umask(077);
	snprintf(ag.state, sizeof(ag.state), "%s/.tally-node", ag.dir);
	if ((mkdir(ag.dir, 0700) != 0 && errno != EEXIST) ||
	    (mkdir(ag.state, 0700) != 0 && errno != EEXIST)) {
		say("error", "%s: %s", ag.state, strerror(errno));
		ex = EXIT_FAIL;
		goto out;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (ag.home != NULL) {
		char logdir[1200];

		snprintf(logdir, sizeof(logdir), "%s/log", ag.home);
		/* Opened for writing only to append this node's offers. */
		if ((rc = tl_log_open(logdir, 0, &ag.log)) != 0) {
			say("error", "%s: %s", logdir, tl_strerror(rc));
			ex = EXIT_FAIL;
			goto out;
		}
		/* What was delivered but not reloaded or acked goes first. */
		if ((rc = resume(&ag)) == 0)
			rc = from_log(&ag);
	} else {
		rc = from_amqp(&ag);
	}
	if (rc != 0)
		ex = EXIT_FAIL;
	else if (ag.once && ag.reload_failed)
		ex = EXIT_UNHEALTHY;
out:
	tl_log_close(ag.log);
	tl_secret_wipe(&ag.key, sizeof(ag.key));
	tl_secret_wipe(ag.password, sizeof(ag.password));
	return ex;
}
