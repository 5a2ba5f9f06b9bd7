/*
 * tally-node - the node host's agent: delivers, reloads, acknowledges.
 *
 *   tally-node --node NODE --key FILE --dir DIR [--state DIR]
 *       (--log HOME | --amqp URL
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
 *                         (KEY=VALUE lines, atomically);
 *   DIR/MODULE/VARIABLE   one file per value, for programs that read
 *                         credentials as files;
 *   DIR/MODULE/NAME.pem   each file the deliveries carry (a provider's
 *                         CA); a value that references one holds its
 *                         absolute path (core/delivery.h, format 4);
 * all written through held directory descriptors, never through a link
 * (files.c); with --user read-only to that user, who can write nothing
 * there (tally-node(8), FILES AND OWNERS).
 *   the reload action     sh -c COMMAND, after the files are in place;
 *   the acknowledgement   only when the reload succeeded: signed by the
 *                         node's Ed25519 key, with a MAC keyed by the
 *                         delivered credential's proof key
 *                         (core/nodewire.h), to tally.acks (--amqp) or
 *                         appended to the log as credential.ack-offered
 *                         (--log, the control plane's own machine).
 * A failed reload is reported and not acknowledged: the rotation waits
 * on this holder and the old credential keeps working.
 *
 * Its state is --state DIR (mode 0700; default $STATE_DIRECTORY, else
 * /var/lib/tally-node/NODE: it must outlive a reboot): per grant the
 * version held, whether it was reloaded and acknowledged, and the
 * delivery as it came (still sealed); with --log the last sequence
 * number read.
 *
 * Exit codes: 0, 1 failure (with --log a node not in the mesh or a key
 * not the node's; a key that opens none of the deliveries addressed to
 * the node), 2 usage, 6 (--once) a reload failed or a value was refused.
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
#include "core/delivery.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/secret.h"
#include "core/sub.h"
#include "core/version.h"
#include "core/x509.h"
#include "core/amqp.h"
#include "core/nodewire.h"
#include "node-internal.h"

#define EXIT_OK		0
#define EXIT_FAIL	1
#define EXIT_USAGE	2
#define EXIT_UNHEALTHY	6
#define MAXMOD		4096	/* modules configured (--reload, --user) */
#define PWMAX		256

static const char usage[] =
"usage: tally-node --node NODE --key FILE --dir DIR [--state DIR]\n"
"           (--log HOME | --amqp URL [--amqp-user USER]\n"
"            [--amqp-password-file FILE] [--amqp-ca FILE]\n"
"            [--acks QUEUE])\n"
"           [--reload MODULE=COMMAND]... [--user MODULE=USER]...\n"
"           [--report-interval SECONDS] [--metrics ADDR] [--once]\n"
"\n"
"The node's agent: opens the deliveries sealed to NODE with its key\n"
"FILE, writes DIR/MODULE.env, DIR/MODULE/VARIABLE and the files the\n"
"deliveries carry, DIR/MODULE/NAME.pem (read-only to\n"
"--user's USER; never through a link), runs MODULE's reload COMMAND\n"
"(sh -c) and, when it succeeds, acknowledges the version with the\n"
"node's signature and a proof that it holds the credential.  --log\n"
"follows the log of the control plane's HOME (the same machine);\n"
"--amqp reads the queue\n"
"tally.node.NODE and acknowledges on QUEUE (default tally.acks), the\n"
"password from FILE or $TALLY_NODE_AMQP_PASSWORD; an amqps:// URL is\n"
"TLS, the broker verified against --amqp-ca FILE (else the system's\n"
"CAs) and its host name.  It reports what it\n"
"holds (signed) after each reload and every SECONDS (default 60): tally\n"
"status shows it, and an agent silent too long.  --state: where it keeps\n"
"the versions it holds (default $STATE_DIRECTORY, else\n"
"/var/lib/tally-node/NODE).  --once: what is there, then exit.\n"
"--metrics ADDR: GET /metrics in the Prometheus text format on ADDR\n"
"(HOST:PORT, or PORT for 127.0.0.1): grants held, deliveries opened,\n"
"reloads and their failures and durations, values and messages refused.\n"
"\n"
"Exit: 0 done; 1 failure (with --log a NODE not in the mesh or a key not\n"
"NODE's; a key that opens none of the deliveries addressed to NODE);\n"
"2 usage; 6 (--once) a reload failed or a value was refused.\n";

struct modconf {
	char	 name[64];
	char	*reload;
	char	 user[64];
};

struct agent {
	const char		*node;
	const char		*dir;
	const char		*state;
	/*
	 * DIR as an absolute path (realpath at start): what a reference to
	 * a delivered file becomes, DIR/MODULE/NAME (core/delivery.h).
	 */
	char			 absdir[4096];
	int			 dirfd;		/* DIR, held open */
	int			 statefd;	/* the state directory, held open */
	/*
	 * The node's secret keys and the broker's password, in one block of
	 * guarded memory (tl_secret_alloc: mlocked, MADV_DONTDUMP): never in
	 * a core.
	 */
	struct tl_node_key	*key;
	uint8_t			 pk[TL_PUBKEY_LEN];
	struct modconf		 mods[MAXMOD];
	size_t			 nmods;
	int			 once;
	int			 reload_failed;
	int			 value_refused;	/* --once: exit 6 */
	/*
	 * Modules delivered to and not yet written (pend): while batching,
	 * what waits is taken first and each module written and reloaded
	 * once for the newest versions.
	 */
	int			 batching;
	char			 pending[64][64];
	size_t			 npending;
	uint64_t		 pending_since;	/* tl_sub_clock() ns */
	/* Deliveries addressed to the node: opened, or not by its key. */
	unsigned		 opened, unopened;
	/* Values refused for an env file (note_refused), for the reports. */
	struct refusal {
		char		grant[201];
		char		module[64];
		char		variable[TL_DLV_NAME_MAX + 1];
		uint64_t	version;
		const char	*why;	/* static text */
	}			 refusals[8];
	size_t			 nrefusals;
	/* What was refused from the queue (--amqp), for the reports. */
	unsigned		 refused;
	char			 refused_last[200];
	uint64_t		 cp_seq;	/* the last notice taken (amqp-seq) */
	/* What the reports say: the last reload, and when one is due. */
	char			 last_module[64];
	int			 last_status;	/* -1: none yet */
	unsigned		 report_every;	/* seconds */
	uint64_t		 report_due;	/* tl_sub_clock() ns */
	/*
	 * Which module each grant held is of (the state files say it; read
	 * once, kept as held_save writes them): a module's grants are
	 * visited without reading every grant's state (held_each_module),
	 * so writing one module costs what its own grants cost, however
	 * many the node holds.
	 */
	struct held_ix {
		char	grant[201];
		char	module[64];
	}			*ix;
	size_t			 nix, capix;
	int			 ix_built;
	uint64_t		 report_last;	/* the last one sent, the same */
	/* --log */
	const char		*home;
	struct tl_log		*log;
	/* --amqp */
	const char		*url;
	struct tl_amqp_conf	 conf;
	char			*password;	/* PWMAX bytes, in the block */
	const char		*acks;
	struct tl_amqp		*a;
	/* --metrics: the server, and the counters only it reports. */
	struct tl_mx		*mx;
	uint64_t		 reloads, reload_failures, values_refused;
	struct tl_mx_hist	 reload_time;
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

/* A file of the state directory, through its descriptor. */
static FILE *
state_fopen(struct agent *ag, const char *name)
{
	FILE *fp = NULL;

	return tn_file_open(ag->statefd, name, &fp) == 0 ? fp : NULL;
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
	/*
	 * A certificate grant's version whose certificate has not come:
	 * nothing is written or acknowledged, the reports carry its
	 * request (certs.c).
	 */
	int		awaiting;
	/*
	 * While a renewal awaits its certificate: the version whose files
	 * the module keeps meanwhile (its delivery GRANT.shown.sealed, its
	 * key and certificate in certs.c), so that a renewal never takes
	 * a holder's certificate away before the next one is here; 0: none.
	 */
	uint64_t	shown;
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
	char f[200], path[220], line[400];
	FILE *fp;
	unsigned long long v = 0;
	int rc;

	memset(h, 0, sizeof(*h));
	fname(grant, f, sizeof(f));
	snprintf(path, sizeof(path), "%s.state", f);
	if ((rc = tn_file_open(ag->statefd, path, &fp)) != 0)
		return rc == ENOENT ? TL_ENOTFOUND : rc;
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
		else if (strcmp(line, "awaiting 1") == 0)
			h->awaiting = 1;
		else if (sscanf(line, "shown %llu", &v) == 1)
			h->shown = v;
	}
	fclose(fp);
	return 0;
}

static int ix_note(struct agent *, const char *, const char *);

static int
held_save(struct agent *ag, const struct held *h)
{
	char f[200], path[220], buf[850];
	int n, rc;

	fname(h->grant, f, sizeof(f));
	snprintf(path, sizeof(path), "%s.state", f);
	n = snprintf(buf, sizeof(buf), "grant %s\nholder %s\nmodule %s\n"
	    "version %llu\nreloaded %d\nacked %d\nrevoked %d\nawaiting %d\n"
	    "shown %llu\n", h->grant, h->holder, h->module,
	    (unsigned long long)h->version, h->reloaded, h->acked, h->revoked,
	    h->awaiting, (unsigned long long)h->shown);
	if ((rc = tn_file_put(ag->statefd, path, buf, (size_t)n, NULL)) != 0)
		return rc;
	return ix_note(ag, h->grant, h->module);
}

/*
 * Visits the held state of every grant kept (the state directory's
 * GRANT.state files; a file name is the grant's, escaped, so the grant
 * is read inside) until fn returns non-zero, which is returned.  An
 * entry that cannot be read is passed over.  fn may delete the entry
 * it is given.  errno's value when the directory cannot be listed.
 */
typedef int (*held_fn)(struct agent *, struct held *, void *);

static int
held_each(struct agent *ag, held_fn fn, void *arg)
{
	struct dirent *de;
	DIR *d = NULL;
	int rc = 0;

	if ((rc = tn_dir_list(ag->statefd, &d)) != 0)
		return rc;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		size_t nl = strlen(de->d_name);
		char line[400], grant[201] = "";
		struct held h;
		FILE *fp;

		if (nl < 7 || strcmp(de->d_name + nl - 6, ".state") != 0 ||
		    (fp = state_fopen(ag, de->d_name)) == NULL)
			continue;
		if (fgets(line, sizeof(line), fp) != NULL &&
		    strncmp(line, "grant ", 6) == 0) {
			line[strcspn(line, "\n")] = '\0';
			cpy(grant, sizeof(grant), line + 6);
		}
		fclose(fp);
		if (grant[0] != '\0' && held_load(ag, grant, &h) == 0)
			rc = fn(ag, &h, arg);
	}
	closedir(d);
	return rc;
}

/* The index: grant -> module (struct agent: ix).  ENOMEM. */
static int
ix_note(struct agent *ag, const char *grant, const char *module)
{
	size_t i;

	if (!ag->ix_built)
		return 0;	/* built from the files when first read */
	for (i = 0; i < ag->nix; i++)
		if (strcmp(ag->ix[i].grant, grant) == 0) {
			cpy(ag->ix[i].module, sizeof(ag->ix[i].module), module);
			return 0;
		}
	if (ag->nix == ag->capix) {
		size_t cap = ag->capix ? 2 * ag->capix : 64;
		void *n = realloc(ag->ix, cap * sizeof(*ag->ix));

		if (n == NULL)
			return ENOMEM;
		ag->ix = n;
		ag->capix = cap;
	}
	cpy(ag->ix[ag->nix].grant, sizeof(ag->ix[0].grant), grant);
	cpy(ag->ix[ag->nix].module, sizeof(ag->ix[0].module), module);
	ag->nix++;
	return 0;
}

static int
ix_add(struct agent *ag, struct held *h, void *arg)
{
	(void)arg;
	return ix_note(ag, h->grant, h->module);
}

/*
 * held_each for module's grants alone (through the index, built by one
 * held_each the first time).  fn may save or delete the entry it is
 * given.
 */
static int
held_each_module(struct agent *ag, const char *module, held_fn fn,
    void *arg)
{
	char grant[201];
	struct held h;
	size_t i;
	int rc;

	if (!ag->ix_built) {
		ag->ix_built = 1;
		if ((rc = held_each(ag, ix_add, NULL)) != 0) {
			ag->ix_built = 0;
			ag->nix = 0;
			return rc;
		}
	}
	for (i = 0; i < ag->nix; i++) {
		if (strcmp(ag->ix[i].module, module) != 0)
			continue;
		/* fn may grow the index: the name is copied first. */
		cpy(grant, sizeof(grant), ag->ix[i].grant);
		if (held_load(ag, grant, &h) == 0 &&
		    strcmp(h.module, module) == 0 && (rc = fn(ag, &h, arg)) != 0)
			return rc;
	}
	return 0;
}

/* --- opening a delivery ---------------------------------------------- */

struct opened {
	uint8_t		*plain;	/* guarded memory; opened_free wipes it */
	size_t		 len;
	struct tl_dlv	 d;	/* borrows from plain */
	/* The first value refused for an env file (refuse_unsafe). */
	char		 bad_var[TL_DLV_NAME_MAX + 1];
	const char	*bad_why;
};

static void
opened_free(struct opened *o)
{
	tl_dlv_free(&o->d);
	tl_secret_free(o->plain);
	o->plain = NULL;
}

/*
 * Opens a sealed delivery and decodes it (core/delivery.h: framed by
 * length, or a format 2 text read strictly).  TL_ESECRET when this
 * node's key does not open it, TL_EMALFORMED when it is no delivery.
 */
static int
open_sealed(struct agent *ag, const void *sealed, size_t slen,
    struct opened *o)
{
	int rc;

	memset(o, 0, sizeof(*o));
	if (slen <= TL_SEAL_OVERHEAD)
		return TL_ESECRET;
	o->len = slen - TL_SEAL_OVERHEAD;
	if ((o->plain = tl_secret_alloc(o->len)) == NULL)
		return ENOMEM;
	if (tl_secret_unseal(ag->pk, ag->key->box_sk, sealed, slen,
	    o->plain) != 0) {
		opened_free(o);
		return TL_ESECRET;
	}
	if ((rc = tl_dlv_decode(o->plain, o->len, &o->d)) != 0) {
		opened_free(o);
		return rc;
	}
	return 0;
}

/*
 * Where module's files are, as references resolve to them (dir, its
 * length): ABSDIR/MODULE.  0, or TL_EINVAL (and *why) when that path
 * cannot go unquoted into a URI or an env file.
 */
static int
files_dir(const struct agent *ag, const char *module, size_t module_len,
    char *dir, size_t cap, size_t *len, const char **why)
{
	int n = snprintf(dir, cap, "%s/%.*s", ag->absdir, (int)module_len,
	    module);

	if (n < 0 || (size_t)n >= cap) {
		*why = "the path of its file is too long";
		return TL_EINVAL;
	}
	*len = (size_t)n;
	if (!tl_dlv_path_ok(dir, *len)) {
		*why = "the path of its file (DIR/MODULE/NAME) has a byte "
		    "outside [A-Za-z0-9/._-], and a path goes unquoted into "
		    "URIs and env files";
		return TL_EINVAL;
	}
	return 0;
}

/*
 * x's value as the module reads it (references to the delivery's files
 * resolved against dir, dlen bytes: core/delivery.h), in guarded memory
 * the caller frees with tl_secret_free; *len its length.  0 or ENOMEM.
 */
static int
resolve_var(const struct tl_dlv_var *x, const char *dir, size_t dlen,
    uint8_t **v, size_t *len)
{
	*len = tl_dlv_resolved_len(x, dlen);
	if ((*v = tl_secret_alloc(*len + 1)) == NULL)
		return ENOMEM;
	tl_dlv_resolve(x, dir, dlen, *v);
	return 0;
}

/*
 * Whether x can be written in an env file once resolved
 * (tl_dlv_env_check; a reference resolved only where its path is safe:
 * files_dir); 0, else TL_EINVAL and *why, or ENOMEM.
 */
static int
var_check(const struct agent *ag, const char *module, size_t module_len,
    const struct tl_dlv_var *x, const char **why)
{
	char dir[4200];
	uint8_t *v;
	size_t dlen, vl;
	int rc;

	if (x->kind != TL_DLV_REFS)
		return tl_dlv_env_check(x->name, x->name_len, x->value,
		    x->value_len, why);
	if ((rc = files_dir(ag, module, module_len, dir, sizeof(dir), &dlen,
	    why)) != 0)
		return rc;
	if ((rc = resolve_var(x, dir, dlen, &v, &vl)) != 0) {
		*why = "out of memory";
		return rc;
	}
	rc = tl_dlv_env_check(x->name, x->name_len, v, vl, why);
	tl_secret_free(v);
	return rc;
}

/*
 * A value that cannot be written in an env file (var_check) makes the
 * whole delivery refused: its name and the reason in o (the value is
 * never shown), TL_EINVAL.
 */
static int
refuse_unsafe(const struct agent *ag, struct opened *o, const char *module)
{
	size_t i;

	for (i = 0; i < o->d.nvars; i++) {
		const struct tl_dlv_var *x = &o->d.vars[i];

		if (var_check(ag, module, strlen(module), x, &o->bad_why) !=
		    0) {
			size_t n = x->name_len < sizeof(o->bad_var) ?
			    x->name_len : sizeof(o->bad_var) - 1;
			size_t k;

			/* The name as it can be shown: bytes, not controls. */
			for (k = 0; k < n; k++)
				o->bad_var[k] = (x->name[k] > 0x20 &&
				    x->name[k] < 0x7f) ? x->name[k] : '?';
			o->bad_var[n] = '\0';
			return TL_EINVAL;
		}
	}
	return 0;
}

/* --- files ----------------------------------------------------------- */

/* Who owns module's files: --user's USER and its group, or the agent. */
static int
owner(const struct modconf *mc, struct tn_owner *o)
{
	struct passwd *pw;

	o->uid = (uid_t)-1;
	o->gid = (gid_t)-1;
	if (mc == NULL || mc->user[0] == '\0')
		return 0;
	if ((pw = getpwnam(mc->user)) == NULL)
		return ENOENT;
	o->uid = pw->pw_uid;
	o->gid = pw->pw_gid;
	return 0;
}

/*
 * The variables of one delivery of module into vars (defaults into
 * defs), references resolved: only those an env file can hold;
 * refuse_unsafe kept the others out when the delivery came.  Its files
 * into files (name: content): one file a grant's delivery names is the
 * same file another's names (its name is the digest of its bytes).
 */
/*
 * The not-after of the certificate d's 'k' item names, from files
 * (key_files put it there), as RFC 3339 UTC into out; 0, else -1 (no
 * such certificate, or not one: the variable is left out).
 */
static int
not_after(json_t *files, const struct tl_dlv *d, char out[21])
{
	char cn[TL_DLV_FILE_NAME_MAX + 1], why[TL_WHY_MAX];
	struct tl_x509_info info;
	const char *pem;
	struct tm tm;
	time_t t;

	memcpy(cn, d->keyreq.cert_file, d->keyreq.cert_file_len);
	cn[d->keyreq.cert_file_len] = '\0';
	if ((pem = json_string_value(json_object_get(files, cn))) == NULL ||
	    tl_x509_info(pem, &info, why) != 0)
		return -1;
	t = (time_t)info.not_after;
	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(out, 21, "%Y-%m-%dT%H:%M:%SZ", &tm) != 20)
		return -1;
	return 0;
}

static void
collect(const struct agent *ag, const char *module, json_t *vars,
    json_t *defs, json_t *files, const struct tl_dlv *d)
{
	char na[21];
	int na_ok = d->has_keyreq && not_after(files, d, na) == 0;

	char dir[4200];
	size_t i, dlen = 0;
	const char *why;
	int dir_ok;

	dir_ok = files_dir(ag, module, strlen(module), dir, sizeof(dir), &dlen,
	    &why) == 0;
	for (i = 0; i < d->nvars; i++) {
		const struct tl_dlv_var *x = &d->vars[i];
		char name[TL_DLV_NAME_MAX + 1];
		uint8_t *buf = NULL;
		const uint8_t *v = x->value;
		size_t vl = x->value_len;

		/* Only a value with references is copied (resolved). */
		if (x->kind == TL_DLV_REFS && (!dir_ok ||
		    resolve_var(x, dir, dlen, &buf, &vl) != 0))
			continue;
		if (x->kind == TL_DLV_NOT_AFTER) {
			if (!na_ok)
				continue;
			v = (const uint8_t *)na;
			vl = strlen(na);
		}
		if (buf != NULL)
			v = buf;
		/*
		 * A variable declared with "" is filled by a requirement, not
		 * defaulted: written empty it would outlive its grant.
		 */
		if (tl_dlv_env_check(x->name, x->name_len, v, vl, &why) == 0 &&
		    !(x->is_default && vl == 0)) {
			memcpy(name, x->name, x->name_len);
			name[x->name_len] = '\0';
			json_object_set_new(x->is_default ? defs : vars, name,
			    json_stringn((const char *)v, vl));
		}
		tl_secret_free(buf);
	}
	for (i = 0; i < d->nfiles; i++) {
		const struct tl_dlv_file *f = &d->files[i];
		char name[TL_DLV_FILE_NAME_MAX + 1];

		memcpy(name, f->name, f->name_len);
		name[f->name_len] = '\0';
		if (json_object_get(files, name) == NULL)
			json_object_set_new(files, name, json_stringn_nocheck(
			    (const char *)f->content, f->content_len));
	}
}

static int
read_sealed(struct agent *ag, const char *grant, int shown, uint8_t **out,
    size_t *len)
{
	char f[200], path[220];
	struct stat st;
	FILE *fp;
	int rc;

	fname(grant, f, sizeof(f));
	snprintf(path, sizeof(path), "%s.%ssealed", f, shown ? "shown." : "");
	if ((rc = tn_file_open(ag->statefd, path, &fp)) != 0)
		return rc;
	if (fstat(fileno(fp), &st) != 0 || (*out = malloc((size_t)st.st_size +
	    1)) == NULL) {
		fclose(fp);
		return ENOMEM;
	}
	rc = fread(*out, 1, (size_t)st.st_size, fp) == (size_t)st.st_size ? 0 :
	    EIO;
	*len = (size_t)st.st_size;
	fclose(fp);
	if (rc != 0)
		free(*out);
	return rc;
}

/* Removes DIR/MODULE.env and DIR/MODULE/; the number of files removed. */
static int
remove_files(struct agent *ag, const char *module)
{
	char path[80];
	struct stat st;
	int n = 0;

	tn_dir_del(ag->dirfd, module, &n);
	snprintf(path, sizeof(path), "%s.env", module);
	if (fstatat(ag->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    tn_file_del(ag->dirfd, path) == 0)
		n++;
	return n;
}

/*
 * A certificate grant's key and certificate (certs.c), into files under
 * the names its delivery's 'k' item gives them; an error: not both.
 */
static int
key_files(struct agent *ag, const struct held *h, uint64_t version,
    const struct tl_dlv *d, json_t *files)
{
	char f[200], kn[TL_DLV_FILE_NAME_MAX + 1], cn[TL_DLV_FILE_NAME_MAX + 1];
	char *key, *cert;
	int rc;

	fname(h->grant, f, sizeof(f));
	if ((rc = tn_cert_files(ag->statefd, f, version, &key, &cert)) != 0)
		return rc;
	memcpy(kn, d->keyreq.key_file, d->keyreq.key_file_len);
	kn[d->keyreq.key_file_len] = '\0';
	memcpy(cn, d->keyreq.cert_file, d->keyreq.cert_file_len);
	cn[d->keyreq.cert_file_len] = '\0';
	json_object_set_new(files, kn, json_string(key));
	json_object_set_new(files, cn, json_string(cert));
	tl_secret_free(key);
	free(cert);
	return 0;
}

/* The values of every grant of one module held (write_module). */
struct module_values {
	const char	*module;
	json_t		*vars, *defs, *files;
	int		 ngrants;
};

static int
module_values(struct agent *ag, struct held *h, void *arg)
{
	struct module_values *mv = arg;
	struct opened o;
	uint8_t *sealed;
	size_t slen;

	/* A renewal awaiting its certificate: the version before it. */
	int shown = h->awaiting && h->shown != 0;

	if (strcmp(h->module, mv->module) != 0 || h->revoked ||
	    (h->awaiting && !shown) ||
	    read_sealed(ag, h->grant, shown, &sealed, &slen) != 0)
		return 0;
	if (open_sealed(ag, sealed, slen, &o) == 0) {
		if (o.d.has_keyreq && key_files(ag, h, shown ? h->shown :
		    h->version, &o.d, mv->files) != 0) {
			/* Its files are not here: nothing of it is written. */
			opened_free(&o);
			free(sealed);
			return 0;
		}
		collect(ag, mv->module, mv->vars, mv->defs, mv->files, &o.d);
		opened_free(&o);
		mv->ngrants++;
	}
	free(sealed);
	return 0;
}

/*
 * Writes DIR/MODULE.env and DIR/MODULE/ from every grant of module the
 * agent holds: the files are derived from the sealed deliveries kept.
 * DIR/MODULE/ holds a file per variable and each file the deliveries
 * carry (a CA: NAME.pem, never a variable's name).  A value or file no
 * grant gives any more (a grant revoked) leaves; when no grant is left,
 * so do the files.
 */
static int
write_module(struct agent *ag, const char *module)
{
	struct modconf *mc = mod(ag, module, 0);
	json_t *vars = json_object(), *defs = json_object();
	json_t *files = json_object();
	char path[80];
	struct tn_owner ow;
	struct module_values mv;
	DIR *d;
	struct dirent *de;
	const char *k;
	json_t *v;
	char *buf = NULL;
	size_t blen = 0;
	FILE *mem;
	int rc = 0, sub = -1;

	if (!tn_name_ok(module) || module[0] == '.' || strlen(module) > 63) {
		rc = TL_EINVAL;
		goto out;
	}
	if ((rc = owner(mc, &ow)) != 0)
		goto out;
	mv.module = module;
	mv.vars = vars;
	mv.defs = defs;
	mv.files = files;
	if ((rc = held_each_module(ag, module, module_values, &mv)) != 0)
		goto out;
	if (mv.ngrants == 0) {
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
	json_object_foreach(vars, k, v) {
		size_t kl = strlen(k), vl = json_string_length(v);
		char *line = tl_secret_alloc(tl_dlv_env_size(kl, vl));

		if (line == NULL) {
			fclose(mem);
			rc = ENOMEM;
			goto out;
		}
		/* Quoted as systemd's EnvironmentFile= reads it back. */
		fwrite(line, 1, tl_dlv_env_format(k, kl, json_string_value(v),
		    vl, line), mem);
		tl_secret_free(line);
	}
	fclose(mem);
	if ((rc = tn_dir_module(ag->dirfd, module, &ow, &sub)) != 0)
		goto out;
	/*
	 * What no grant gives any more goes first, and whatever else is
	 * there (a temporary file a crash left): only the agent writes here.
	 */
	if (tn_dir_list(sub, &d) == 0) {
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name,
			    "..") != 0 && (de->d_name[0] == '.' ||
			    (json_object_get(vars, de->d_name) == NULL &&
			    json_object_get(files, de->d_name) == NULL)))
				tn_file_del(sub, de->d_name);
		closedir(d);
	}
	json_object_foreach(vars, k, v) {
		const char *s = json_string_value(v);

		if (!tn_name_ok(k) || k[0] == '.')
			continue;
		if ((rc = tn_file_put(sub, k, s, json_string_length(v), &ow)) !=
		    0)
			goto out;
	}
	/* Before the env file whose values name them. */
	json_object_foreach(files, k, v) {
		if (!tl_dlv_file_name_ok(k, strlen(k)))
			continue;
		if ((rc = tn_file_put(sub, k, json_string_value(v),
		    json_string_length(v), &ow)) != 0)
			goto out;
	}
	snprintf(path, sizeof(path), "%s.env", module);
	rc = tn_file_put(ag->dirfd, path, buf, blen, &ow);
out:
	if (sub >= 0)
		close(sub);
	if (buf != NULL) {
		tl_secret_wipe(buf, blen);
		free(buf);
	}
	json_decref(vars);
	json_decref(defs);
	json_decref(files);
	return rc;
}

/* --- reload and acknowledgement -------------------------------------- */

/*
 * Every descriptor the agent holds (the log's, the broker's socket,
 * whatever it inherited) close-on-exec; libraries open some without.
 */
static void
cloexec_all(void)
{
	DIR *d;
	struct dirent *de;

	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	/* A kernel before 5.11: one by one. */
	if ((d = opendir("/proc/self/fd")) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		int fd = atoi(de->d_name);

		if (fd > 2 && fd != dirfd(d))
			fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
	}
	closedir(d);
}

/*
 * The reload command: sh -c COMMAND with descriptors 0-2 only and an
 * environment of its own, documented in tally-node(8): PATH (fixed),
 * TALLY_MODULE, TALLY_VERSION (the version that caused the reload),
 * TALLY_ENV_FILE and CREDENTIALS_DIRECTORY.  Nothing of the agent's
 * environment reaches it.
 */
static int
run_reload(struct agent *ag, const char *module, uint64_t version,
    int *status)
{
	struct modconf *mc = mod(ag, module, 0);
	char envpath[1600], dirpath[1600], vmod[128], vver[40];
	char venv[1700], vcred[1700];
	char *const envp[] = {
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:"
		    "/bin", vmod, vver, venv, vcred, NULL
	};
	pid_t pid;
	int st;
	uint64_t t0 = tl_sub_clock();

	*status = 0;
	if (mc == NULL || mc->reload == NULL)
		return 0;	/* nothing to reload: the files are the delivery */
	snprintf(envpath, sizeof(envpath), "%s/%s.env", ag->dir, module);
	snprintf(dirpath, sizeof(dirpath), "%s/%s", ag->dir, module);
	snprintf(vmod, sizeof(vmod), "TALLY_MODULE=%s", module);
	snprintf(vver, sizeof(vver), "TALLY_VERSION=%llu",
	    (unsigned long long)version);
	snprintf(venv, sizeof(venv), "TALLY_ENV_FILE=%s", envpath);
	snprintf(vcred, sizeof(vcred), "CREDENTIALS_DIRECTORY=%s", dirpath);
	cloexec_all();
	fflush(NULL);
	if ((pid = fork()) < 0)
		return errno;
	if (pid == 0) {
		char *const argv[] = { "sh", "-c", mc->reload, NULL };

		/* Belt and braces: nothing above 2 survives the exec. */
		if (close_range(3, ~0U, 0) != 0) {
			long fd, max = sysconf(_SC_OPEN_MAX);

			for (fd = 3; fd < (max > 0 ? max : 1024); fd++)
				close((int)fd);
		}
		execve("/bin/sh", argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return errno;
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	ag->reloads++;
	if (*status != 0)
		ag->reload_failures++;
	tl_mx_observe(&ag->reload_time, (double)(tl_sub_clock() - t0) / 1e9);
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
	char		 nonce[2 * TL_NW_NONCE_LEN + 1];
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
	tl_body_str(&b, TL_F_NODE, o->node);
	tl_body_str(&b, TL_F_GRANT, o->grant);
	tl_body_str(&b, TL_F_HOLDER, o->holder);
	tl_body_u64(&b, TL_F_VERSION, o->version);
	tl_body_str(&b, TL_F_NONCE, o->nonce);
	tl_body_str(&b, TL_F_SIG, o->sig);
	tl_body_str(&b, TL_F_MAC, o->mac);
	tl_body_str(&b, TL_F_VIA, "log");
	if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
		memset(&a, 0, sizeof(a));
		a.type = TL_NW_ACK_OFFERED;
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
	uint8_t nonce[TL_NW_NONCE_LEN], sig[TL_SIGN_LEN], mac[TL_MAC_LEN];
	uint8_t msg[TL_NW_MSG_MAX];
	size_t mlen;
	int rc;

	if (!ag->key->has_sign) {
		say("error", "%s has no signing key (a key file of before: "
		    "tally node rekey %s): cannot acknowledge", o->d.grant,
		    ag->node);
		return TL_ESECRET;
	}
	randombytes_buf(nonce, sizeof(nonce));
	if ((rc = tl_nw_ack_message(o->d.grant, o->d.holder, o->d.version, nonce,
	    msg, &mlen)) != 0)
		return rc;
	tl_secret_sign(ag->key->sign_sk, msg, mlen, sig);
	if ((rc = tl_secret_mac(o->d.proof, sizeof(o->d.proof), msg, mlen,
	    mac)) != 0)
		return rc;
	memset(&of, 0, sizeof(of));
	of.node = ag->node;
	of.grant = o->d.grant;
	of.holder = o->d.holder;
	of.version = o->d.version;
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
 * node's key (tl_nw_report_message) and offered like an acknowledgement.
 * It is also the agent's heartbeat: with --log the agent puts its
 * last-seen time in the scratch table TL_NW_SEEN_TABLE (core/nodewire.h)
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
	if ((rc = tl_nw_seen(t, w->node, (uint64_t)now.tv_sec * 1000000000u +
	    (uint64_t)now.tv_nsec)) != 0 || !w->append)
		return rc;
	snprintf(stream, sizeof(stream), "node/%s", w->node);
	snprintf(actor, sizeof(actor), "tally-node:%s", w->node);
	tl_body_init(&b);
	tl_body_str(&b, TL_F_NODE, w->node);
	tl_body_str(&b, TL_F_REPORT, w->report);
	tl_body_str(&b, TL_F_SIG, w->sig);
	tl_body_str(&b, TL_F_VIA, "log");
	if ((rc = tl_body_finish(&b, &body, &len)) == 0) {
		memset(&a, 0, sizeof(a));
		a.type = TL_NW_REPORT_OFFERED;
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

/* A number kept in the state directory (0 when absent or unreadable). */
static uint64_t
state_u64(struct agent *ag, const char *name)
{
	char buf[32] = "";
	uint64_t v = 0;
	FILE *fp;

	if ((fp = state_fopen(ag, name)) == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), fp) != NULL)
		v = strtoull(buf, NULL, 10);
	fclose(fp);
	return v;
}

static int
state_u64_put(struct agent *ag, const char *name, uint64_t v)
{
	char buf[32];
	int n;

	n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)v);
	return tn_file_put(ag->statefd, name, buf, (size_t)n, NULL);
}

/*
 * The requests of versions awaiting their certificates, REPORT_CSRS
 * bytes of them at most in one report (well within TL_NW_REPORT_MAX
 * with the grants held listed beside them): the others go in the
 * reports that follow, as certificates come.
 */
#define REPORT_CSRS	(128u << 10)
struct csrs_w {
	json_t	*a;
	size_t	 bytes;
};

static int
report_csr(struct agent *ag, struct held *h, void *arg)
{
	struct csrs_w *w = arg;
	char f[200], *csr;
	size_t n;

	if (h->revoked || !h->awaiting)
		return 0;
	fname(h->grant, f, sizeof(f));
	if (tn_cert_csr(ag->statefd, f, h->version, &csr) != 0)
		return 0;
	/* The request's PEM escaped ("\n"), its grant, holder, keys. */
	n = strlen(csr) + strlen(h->grant) + strlen(h->holder) + 128;
	if (w->bytes + n <= REPORT_CSRS) {
		w->bytes += n;
		json_array_append_new(w->a, json_pack("{s:s,s:s,s:I,s:s}",
		    "grant", h->grant, "holder", h->holder, "version",
		    (json_int_t)h->version, "csr", csr));
	}
	free(csr);
	return 0;
}

/* What the report lists: each grant held and not revoked. */
static int
report_held(struct agent *ag, struct held *h, void *arg)
{
	json_t *e;

	(void)ag;
	if (h->revoked)
		return 0;
	e = json_pack("{s:s,s:s,s:I,s:b,s:b}", "grant", h->grant, "holder",
	    h->holder, "version", (json_int_t)h->version, "reloaded",
	    h->reloaded, "acked", h->acked);
	/* Its key made, its certificate asked for and not come yet. */
	if (e != NULL && h->awaiting)
		json_object_set_new(e, "awaiting_certificate", json_true());
	json_array_append_new(arg, e);
	return 0;
}

static int
send_report(struct agent *ag)
{
	json_t *r, *held;
	char *js = NULL, sighex[2 * TL_SIGN_LEN + 1];
	uint8_t *msg = NULL, sig[TL_SIGN_LEN];
	size_t mlen;
	int rc;

	if (!ag->key->has_sign)
		return 0;
	held = json_array();
	held_each(ag, report_held, held);
	r = json_pack("{s:s,s:o}", "agent", "tally-node " TL_VERSION, "held",
	    held);
	if (r != NULL && ag->last_status >= 0)
		json_object_set_new(r, "last_reload", json_pack("{s:s,s:b,s:i}",
		    "module", ag->last_module, "ok", ag->last_status == 0,
		    "status", ag->last_status));
	if (r != NULL && ag->nrefusals > 0) {
		json_t *rv = json_array();
		size_t i;

		for (i = 0; i < ag->nrefusals; i++)
			json_array_append_new(rv, json_pack("{s:s,s:s,s:s,s:I,"
			    "s:s}", "grant", ag->refusals[i].grant, "module",
			    ag->refusals[i].module, "variable",
			    ag->refusals[i].variable, "version",
			    (json_int_t)ag->refusals[i].version, "why",
			    ag->refusals[i].why));
		json_object_set_new(r, "refused_values", rv);
	}
	if (r != NULL) {
		struct csrs_w w = { json_array(), 0 };

		held_each(ag, report_csr, &w);
		if (json_array_size(w.a) > 0)
			json_object_set_new(r, "csrs", w.a);
		else
			json_decref(w.a);
	}
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
	 * older than the one it recorded (a report sent again).  It never
	 * goes back, though the clock may (a node booting with its clock
	 * behind): the last one is kept in the state, which survives.
	 */
	{
		static uint8_t content[32];
		static uint64_t since;
		uint8_t dg[32];
		struct timespec now;

		crypto_generichash(dg, sizeof(dg), (const uint8_t *)js,
		    strlen(js), NULL, 0);
		if (since == 0 || sodium_memcmp(dg, content, sizeof(dg)) != 0) {
			uint64_t last = state_u64(ag, "report-since");

			clock_gettime(CLOCK_REALTIME, &now);
			since = (uint64_t)now.tv_sec * 1000000000u +
			    (uint64_t)now.tv_nsec;
			if (since <= last)
				since = last + 1;
			state_u64_put(ag, "report-since", since);
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
	if ((rc = tl_nw_report_message(ag->node, js, &msg, &mlen)) != 0)
		goto out;
	tl_secret_sign(ag->key->sign_sk, msg, mlen, sig);
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
	ag->report_last = tl_sub_clock();
	if (rc == 0)
		ag->report_due = tl_sub_clock() + (uint64_t)ag->report_every *
		    1000000000u;
	else
		say("warning", "the report could not be sent: %s",
		    tl_strerror(rc));
	return 0;
}

/*
 * A report when one is due, but at most one per REPORT_GAP_NS while
 * messages keep coming: a burst of changes (a thousand certificates
 * taken) is a few reports, not one per change, each of which lists
 * every grant held.  force: now if due (the agent is caught up, or
 * leaving with --once).
 */
#define REPORT_GAP_NS	250000000ull
static void
maybe_report(struct agent *ag, int force)
{
	uint64_t now = tl_sub_clock();

	if (now >= ag->report_due && (force || ag->report_last == 0 ||
	    now - ag->report_last >= REPORT_GAP_NS))
		send_report(ag);
}

/* --- one delivery ---------------------------------------------------- */

static int
save_sealed(struct agent *ag, const char *grant, const void *sealed,
    size_t len)
{
	char f[200], path[220];

	fname(grant, f, sizeof(f));
	snprintf(path, sizeof(path), "%s.sealed", f);
	return tn_file_put(ag->statefd, path, sealed, len, NULL);
}

/* The version a renewal kept showing, gone: its delivery, key, cert. */
static void
shown_forget(struct agent *ag, const char *f, uint64_t version)
{
	char path[220];

	snprintf(path, sizeof(path), "%s.shown.sealed", f);
	tn_file_del(ag->statefd, path);
	tn_cert_forget(ag->statefd, f, version);
}

/*
 * A certificate grant's newer version h came after prev: awaiting its
 * certificate, it keeps showing what prev showed (held.shown; a copy
 * of prev's delivery, made before the new one replaces it); with its
 * certificate here already, nothing of before stays.
 */
static int
renewal_keep(struct agent *ag, const struct held *prev, struct held *h)
{
	char f[200], path[220];
	uint8_t *sealed;
	size_t slen;
	int rc;

	fname(h->grant, f, sizeof(f));
	if (!h->awaiting) {
		if (prev->shown != 0)
			shown_forget(ag, f, prev->shown);
		tn_cert_forget(ag->statefd, f, prev->version);
		return 0;
	}
	if (prev->awaiting) {
		/* Its key never had a certificate: the one shown stays. */
		h->shown = prev->shown;
		tn_cert_forget(ag->statefd, f, prev->version);
		return 0;
	}
	if ((rc = read_sealed(ag, h->grant, 0, &sealed, &slen)) != 0)
		return rc == ENOENT ? 0 : rc;
	snprintf(path, sizeof(path), "%s.shown.sealed", f);
	rc = tn_file_put(ag->statefd, path, sealed, slen, NULL);
	free(sealed);
	if (rc == 0)
		h->shown = prev->version;
	return rc;
}

/*
 * Files, one reload, acknowledgements, for module: every grant of it
 * delivered but not acknowledged yet is acknowledged at the version held
 * (the newest that came) after one write of the files and one reload.
 * A fresh agent catching up on its queue thus writes and reloads once
 * per module, whatever number of versions was waiting.
 */
/* The grants of one module delivered and not acknowledged yet. */
struct unacked_w {
	const char	*module;
	char		(*grants)[201];
	size_t		 n, cap;
	uint64_t	 newest;
};

static int
unacked(struct agent *ag, struct held *h, void *arg)
{
	struct unacked_w *uw = arg;

	(void)ag;
	if (strcmp(h->module, uw->module) != 0 || h->acked || h->revoked ||
	    h->awaiting)
		return 0;
	if (uw->n == uw->cap) {
		size_t cap = uw->cap ? 2 * uw->cap : 8;
		void *ng = realloc(uw->grants, cap * sizeof(*uw->grants));

		if (ng == NULL)
			return ENOMEM;
		uw->grants = ng;
		uw->cap = cap;
	}
	memcpy(uw->grants[uw->n++], h->grant, sizeof(h->grant));
	if (h->version > uw->newest)
		uw->newest = h->version;
	return 0;
}

static int
flush_module(struct agent *ag, const char *module)
{
	struct unacked_w uw = { 0 };
	size_t i;
	int rc, status = 0;

	if ((rc = write_module(ag, module)) != 0) {
		say("error", "cannot write %s/%s.env: %s", ag->dir, module,
		    tl_strerror(rc));
		return rc;
	}
	uw.module = module;
	if ((rc = held_each_module(ag, module, unacked, &uw)) != 0) {
		free(uw.grants);
		return rc;
	}
	if (uw.n == 0)
		goto out;	/* all acknowledged already */
	rc = run_reload(ag, module, uw.newest, &status);
	cpy(ag->last_module, sizeof(ag->last_module), module);
	ag->last_status = rc != 0 ? 127 : status;
	ag->report_due = 0;	/* a report follows at once */
	for (i = 0; i < uw.n; i++) {
		struct held h;
		struct opened o;
		uint8_t *sealed;
		size_t slen;
		int r;

		if (held_load(ag, uw.grants[i], &h) != 0)
			continue;
		if (rc != 0 || status != 0) {
			say("error", "%s: the reload of %s failed (%s %d): v%llu "
			    "not acknowledged, the old credential keeps working",
			    h.grant, module, rc ? tl_strerror(rc) : "exit",
			    rc ? rc : status, (unsigned long long)h.version);
			ag->reload_failed = 1;
			h.reloaded = 0;
			held_save(ag, &h);
			continue;
		}
		h.reloaded = 1;
		held_save(ag, &h);
		if ((r = read_sealed(ag, h.grant, 0, &sealed, &slen)) != 0)
			continue;
		r = open_sealed(ag, sealed, slen, &o);
		free(sealed);
		if (r != 0)
			continue;
		if ((r = acknowledge(ag, &o)) != 0) {
			say("error", "%s: acknowledging v%llu failed: %s",
			    h.grant, (unsigned long long)h.version,
			    tl_strerror(r));
			opened_free(&o);
			free(uw.grants);
			return r;
		}
		opened_free(&o);
		h.acked = 1;
		held_save(ag, &h);
		say("info", "%s: v%llu in %s/%s.env, reloaded, acknowledged",
		    h.grant, (unsigned long long)h.version, ag->dir, module);
	}
	rc = 0;
out:
	free(uw.grants);
	return rc;
}

/* What deliver took is written and reloaded later (flush_pending). */
static int
pend(struct agent *ag, const char *module)
{
	size_t i;

	for (i = 0; i < ag->npending; i++)
		if (strcmp(ag->pending[i], module) == 0)
			return 0;
	if (ag->npending == 0)
		ag->pending_since = tl_sub_clock();
	cpy(ag->pending[ag->npending++], sizeof(ag->pending[0]), module);
	return 0;
}

/* Every module pend named: once each. */
static int
flush_pending(struct agent *ag)
{
	size_t i;
	int rc = 0, r;

	for (i = 0; i < ag->npending; i++)
		if ((r = flush_module(ag, ag->pending[i])) != 0 && rc == 0)
			rc = r;
	ag->npending = 0;
	return rc;
}

/* Kept for the reports: the newest per grant, 8 grants at most. */
static void
note_refused(struct agent *ag, const struct held *h, const char *var,
    const char *why)
{
	struct refusal *r = NULL;
	size_t i;

	for (i = 0; i < ag->nrefusals; i++)
		if (strcmp(ag->refusals[i].grant, h->grant) == 0)
			r = &ag->refusals[i];
	if (r == NULL) {
		if (ag->nrefusals == sizeof(ag->refusals) /
		    sizeof(ag->refusals[0]))
			memmove(ag->refusals, ag->refusals + 1,
			    --ag->nrefusals * sizeof(ag->refusals[0]));
		r = &ag->refusals[ag->nrefusals++];
	}
	cpy(r->grant, sizeof(r->grant), h->grant);
	cpy(r->module, sizeof(r->module), h->module);
	cpy(r->variable, sizeof(r->variable), var);
	r->version = h->version;
	r->why = why;
	ag->value_refused = 1;
	ag->values_refused++;
	ag->report_due = 0;
}

static int
deliver(struct agent *ag, const void *sealed, size_t slen)
{
	struct opened o;
	struct held h, prev;
	const char *at;
	size_t ml;
	int rc, had;

	if ((rc = open_sealed(ag, sealed, slen, &o)) != 0) {
		if (rc == TL_ESECRET)
			ag->unopened++;
		say("warning", "a delivery that this node's key %s: ignored",
		    rc == TL_ESECRET ? "does not open" : "opens but that is no "
		    "delivery (framing refused)");
		return 0;
	}
	ag->opened++;
	if ((at = strchr(o.d.holder, '@')) == NULL || strcmp(at + 1,
	    ag->node) != 0 || (ml = (size_t)(at - o.d.holder)) >= 64) {
		say("warning", "a delivery for %s, not for node %s: ignored",
		    o.d.holder, ag->node);
		goto out;
	}
	if ((had = held_load(ag, o.d.grant, &prev) == 0) &&
	    prev.version >= o.d.version) {
		/* Replayed or reordered: versions only move forward. */
		say("debug", "%s: v%llu is not newer than v%llu: nothing to do",
		    o.d.grant, (unsigned long long)o.d.version,
		    (unsigned long long)prev.version);
		goto out;
	}
	memset(&h, 0, sizeof(h));
	snprintf(h.grant, sizeof(h.grant), "%s", o.d.grant);
	snprintf(h.holder, sizeof(h.holder), "%s", o.d.holder);
	memcpy(h.module, o.d.holder, ml);
	h.module[ml] = '\0';
	h.version = o.d.version;
	if (refuse_unsafe(ag, &o, h.module) != 0) {
		/*
		 * Not kept, not written, not acknowledged: the rotation waits
		 * on this holder, visibly, and the report says why.
		 */
		say("error", "%s v%llu for module %s: variable %s refused: %s; "
		    "%s/%s.env not written from it, v%llu not acknowledged",
		    h.grant, (unsigned long long)h.version, h.module,
		    o.bad_var, o.bad_why, ag->dir, h.module,
		    (unsigned long long)h.version);
		note_refused(ag, &h, o.bad_var, o.bad_why);
		goto out;
	}
	if (o.d.has_keyreq) {
		char f[200], why[TL_WHY_MAX] = "";
		int have = 0;

		/* The key, made here; its request waits in the reports. */
		fname(h.grant, f, sizeof(f));
		if ((rc = tn_cert_prepare(ag->statefd, f, h.version,
		    &o.d.keyreq, &have, why)) != 0) {
			say("error", "%s v%llu: cannot make its key and request: "
			    "%s", h.grant, (unsigned long long)h.version,
			    why[0] ? why : tl_strerror(rc));
			goto out;
		}
		h.awaiting = !have;
		if (had && !prev.revoked &&
		    (rc = renewal_keep(ag, &prev, &h)) != 0) {
			say("error", "cannot keep the state in %s: %s",
			    ag->state, tl_strerror(rc));
			goto out;
		}
	}
	if ((rc = save_sealed(ag, o.d.grant, sealed, slen)) != 0 ||
	    (rc = held_save(ag, &h)) != 0) {
		say("error", "cannot keep the state in %s: %s", ag->state,
		    tl_strerror(rc));
		goto out;
	}
	if (h.awaiting) {
		say("info", "%s v%llu: key made on this node; its certificate "
		    "is asked for in the report", h.grant,
		    (unsigned long long)h.version);
		ag->report_due = 0;
		goto out;
	}
	/* Batching, only the newest of what waits is written and reloaded. */
	if ((rc = pend(ag, h.module)) == 0 && (!ag->batching ||
	    ag->npending == sizeof(ag->pending) / sizeof(ag->pending[0])))
		rc = flush_pending(ag);
out:
	opened_free(&o);
	return rc;
}

/*
 * A certificate issued for a version awaiting one: kept when it is for
 * the key made here (another key's, or one for a version not awaited,
 * is passed over, said), then the module's files are written and the
 * version acknowledged like any delivery.
 */
static int
certificate(struct agent *ag, const char *grant, uint64_t version,
    const char *cert)
{
	char f[200], why[TL_WHY_MAX] = "";
	struct held h;
	int rc;

	if (held_load(ag, grant, &h) != 0 || h.revoked || !h.awaiting ||
	    h.version != version) {
		say("debug", "%s: a certificate for v%llu, not awaited: passed "
		    "over", grant, (unsigned long long)version);
		return 0;
	}
	fname(grant, f, sizeof(f));
	if ((rc = tn_cert_take(ag->statefd, f, version, cert, why)) != 0) {
		say("warning", "%s v%llu: a certificate refused: %s", grant,
		    (unsigned long long)version, why[0] ? why :
		    tl_strerror(rc));
		return rc == TL_EREFUSED || rc == TL_EINVAL ? 0 : rc;
	}
	h.awaiting = 0;
	if (h.shown != 0) {
		/* Renewed: the certificate before is left to expire. */
		shown_forget(ag, f, h.shown);
		h.shown = 0;
	}
	if ((rc = held_save(ag, &h)) != 0)
		return rc;
	say("info", "%s v%llu: certificate received for the key made here",
	    grant, (unsigned long long)version);
	ag->report_due = 0;
	/* Batched as deliveries are: written and reloaded once per module. */
	if ((rc = pend(ag, h.module)) == 0 && (!ag->batching ||
	    ag->npending == sizeof(ag->pending) / sizeof(ag->pending[0])))
		rc = flush_pending(ag);
	return rc;
}

/*
 * At start: what was delivered but not reloaded or acknowledged is
 * applied; what was acknowledged but whose files are gone is written
 * back.
 */
static int
resume_one(struct agent *ag, struct held *h, void *arg)
{
	char envname[80];
	struct stat st;
	int rc;

	(void)arg;
	if (h->revoked)
		return 0;
	if (!h->acked)
		return pend(ag, h->module);
	/*
	 * DIR wiped (a reboot clearing /run), the state kept: the versions
	 * held are written back, no reload (each was reloaded and
	 * acknowledged).
	 */
	snprintf(envname, sizeof(envname), "%s.env", h->module);
	if (fstatat(ag->dirfd, envname, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
	    errno != ENOENT)
		return 0;
	if ((rc = write_module(ag, h->module)) == 0)
		say("info", "%s: v%llu written back to %s/%s.env", h->grant,
		    (unsigned long long)h->version, ag->dir, h->module);
	return rc;
}

static int
resume(struct agent *ag)
{
	int rc;

	if ((rc = held_each(ag, resume_one, NULL)) == 0)
		rc = flush_pending(ag);
	return rc;
}

/*
 * The module is no longer on this node (unassigned, or the module
 * removed): its files and the state of its grants go.
 */
/* The state of one grant of a module that left the node goes. */
static int
forget_one(struct agent *ag, struct held *h, void *arg)
{
	char sp[220], fn[200];

	if (strcmp(h->module, arg) != 0)
		return 0;
	fname(h->grant, fn, sizeof(fn));
	snprintf(sp, sizeof(sp), "%s.sealed", fn);
	tn_file_del(ag->statefd, sp);
	snprintf(sp, sizeof(sp), "%s.state", fn);
	tn_file_del(ag->statefd, sp);
	/* A key made here goes with it (certs.c), and one kept showing. */
	tn_cert_forget(ag->statefd, fn, h->version);
	if (h->shown != 0)
		shown_forget(ag, fn, h->shown);
	return 0;
}

static int
remove_module(struct agent *ag, const char *module)
{
	int n;

	if (module[0] == '\0' || module[0] == '.' || strchr(module, '/'))
		return 0;	/* not a module's name: nothing of it here */
	n = remove_files(ag, module);
	held_each_module(ag, module, forget_one, (void *)module);
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
	struct stat st;
	char f[200], path[220];
	int rc, status = 0;

	if (held_load(ag, grant, &h) != 0 || h.revoked)
		return 0;	/* not held here */
	h.revoked = 1;
	h.reloaded = h.acked = 0;
	if ((rc = held_save(ag, &h)) != 0)
		return rc;
	ag->report_due = 0;	/* it holds less: say so now */
	fname(grant, f, sizeof(f));
	snprintf(path, sizeof(path), "%s.sealed", f);
	tn_file_del(ag->statefd, path);
	tn_cert_forget(ag->statefd, f, h.version);
	if (h.shown != 0)
		shown_forget(ag, f, h.shown);
	if ((rc = write_module(ag, h.module)) != 0) {
		say("error", "%s %s: cannot rewrite %s/%s.env: %s", grant, what,
		    ag->dir, h.module, tl_strerror(rc));
		return rc;
	}
	say("info", "%s %s: its values left %s/%s.env and %s/%s/", grant,
	    what, ag->dir, h.module, ag->dir, h.module);
	snprintf(path, sizeof(path), "%s.env", h.module);
	if (fstatat(ag->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0;	/* nothing left to reload with */
	rc = run_reload(ag, h.module, h.version, &status);
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
	*pos = state_u64(ag, "position");
	return 0;
}

static int
write_pos(struct agent *ag, uint64_t pos)
{
	return state_u64_put(ag, "position", pos);
}

/* --- --metrics ------------------------------------------------------- */

/* What the node holds, by where each grant stands. */
struct held_count {
	uint64_t	current, unreloaded, unacked, awaiting, revoked;
};

static int
held_count_one(struct agent *ag, struct held *h, void *arg)
{
	struct held_count *c = arg;

	(void)ag;
	if (h->revoked)
		c->revoked++;
	else if (h->awaiting)
		c->awaiting++;
	else if (!h->reloaded)
		c->unreloaded++;
	else if (!h->acked)
		c->unacked++;
	else
		c->current++;
	return 0;
}

/*
 * A scrape waits (core/metrics.h): the figures, from this thread, which
 * alone touches the agent's state.  At most one a second (the loops
 * wake that often).
 */
static void
node_metrics(struct agent *ag)
{
	struct tl_mx_buf b = TL_MX_BUF_INIT;
	struct held_count c = { 0, 0, 0, 0, 0 };
	char e[512];

	if (ag->mx == NULL || !tl_mx_wanted(ag->mx))
		return;
	if (held_each(ag, held_count_one, &c) != 0)
		return;
	tl_mx_head(&b, "tally_node_info", "gauge", "This agent: its version "
	    "and node.");
	tl_mx_addf(&b, "tally_node_info{version=\"%s\",node=\"%s\"} 1\n",
	    TL_VERSION, tl_mx_label(ag->node, e));
	tl_mx_head(&b, "tally_node_grants", "gauge", "Grants this node holds, "
	    "by where their newest version stands: current (written, "
	    "reloaded, acknowledged), unreloaded (its reload has not "
	    "succeeded), unacknowledged, awaiting_certificate, revoked.");
	tl_mx_addf(&b, "tally_node_grants{state=\"current\"} %llu\n"
	    "tally_node_grants{state=\"unreloaded\"} %llu\n"
	    "tally_node_grants{state=\"unacknowledged\"} %llu\n"
	    "tally_node_grants{state=\"awaiting_certificate\"} %llu\n"
	    "tally_node_grants{state=\"revoked\"} %llu\n",
	    (unsigned long long)c.current, (unsigned long long)c.unreloaded,
	    (unsigned long long)c.unacked, (unsigned long long)c.awaiting,
	    (unsigned long long)c.revoked);
	tl_mx_head(&b, "tally_node_deliveries_total", "counter", "Deliveries "
	    "addressed to this node since it started, by whether its key "
	    "opened them.");
	tl_mx_addf(&b, "tally_node_deliveries_total{opened=\"yes\"} %u\n"
	    "tally_node_deliveries_total{opened=\"no\"} %u\n", ag->opened,
	    ag->unopened);
	tl_mx_head(&b, "tally_node_reloads_total", "counter", "Reload commands "
	    "run since the agent started.");
	tl_mx_addf(&b, "tally_node_reloads_total %llu\n",
	    (unsigned long long)ag->reloads);
	tl_mx_head(&b, "tally_node_reload_failures_total", "counter", "Reload "
	    "commands that did not exit 0.");
	tl_mx_addf(&b, "tally_node_reload_failures_total %llu\n",
	    (unsigned long long)ag->reload_failures);
	tl_mx_head(&b, "tally_node_reload_duration_seconds", "histogram",
	    "How long reload commands took.");
	tl_mx_hist_write(&b, "tally_node_reload_duration_seconds", "node",
	    ag->node, &ag->reload_time);
	tl_mx_head(&b, "tally_node_values_refused_total", "counter", "Values "
	    "refused for an env file (the delivery not written).");
	tl_mx_addf(&b, "tally_node_values_refused_total %llu\n",
	    (unsigned long long)ag->values_refused);
	tl_mx_head(&b, "tally_node_messages_refused_total", "counter",
	    "Messages from the broker refused (not signed by the control "
	    "plane, malformed).");
	tl_mx_addf(&b, "tally_node_messages_refused_total %u\n",
	    ag->refused);
	if (b.err != 0) {
		free(b.p);
		return;
	}
	tl_mx_publish(ag->mx, b.p, b.len);
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
	ag->batching = 1;
	so.from = pos + 1;
	/*
	 * credential.delivered|withdrawn, assignment.removed,
	 * grant.revoked|purged, certificate.issued (the glob lets a few
	 * others through, which the exact checks below pass over)
	 */
	so.type = "[acg][ers]*.[diprw][eisu]*";
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
			maybe_report(ag, 0);
		}
		node_metrics(ag);
		/*
		 * With deliveries taken and not yet written, only what is
		 * there already is read: caught up, they are written at once
		 * (a 1 s wait here delayed every live delivery by a second).
		 */
		rc = tl_sub_next(s, ag->once || ag->npending > 0 ?
		    TL_SUB_NOWAIT : tl_sub_deadline(1000), &ev);
		if (rc == TL_ETIMEDOUT || rc == EINTR) {
			rc = 0;
			/* Caught up: what waited is written, once per module. */
			if (ag->npending > 0) {
				tl_sub_release(s);
				if ((rc = flush_pending(ag)) != 0)
					break;
			}
			if (tl_sub_position(s) > pos)
				write_pos(ag, pos = tl_sub_position(s));
			tl_sub_release(s);
			maybe_report(ag, 1);
			if (ag->once)
				break;
			continue;
		}
		if (rc != 0)
			break;
		if (tl_bview_open(&v, ev.body, ev.body_len) != 0)
			continue;
		if (strcmp(ev.type, TL_NW_ASSIGN_REMOVED) == 0) {
			char module[64] = "";

			if (tl_bn_getstr(v.root, "node", node, sizeof(node)) ==
			    0 && strcmp(node, ag->node) == 0 &&
			    tl_bn_getstr(v.root, "module", module,
			    sizeof(module)) == 0) {
				tl_bview_close(&v);
				tl_sub_release(s);
				/* In the order of the log: what came first first. */
				if ((rc = flush_pending(ag)) != 0)
					break;
				remove_module(ag, module);
				write_pos(ag, pos = ev.seq);
				continue;
			}
			tl_bview_close(&v);
			continue;
		}
		if (strcmp(ev.type, TL_NW_GRANT_REVOKED) == 0 ||
		    strcmp(ev.type, TL_NW_GRANT_PURGED) == 0 ||
		    strcmp(ev.type, TL_NW_CRED_WITHDRAWN) == 0) {
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
			if ((rc = flush_pending(ag)) != 0 ||
			    (rc = drop_grant(ag, grant, wd ? "withdrawn" :
			    ev.type[6] == 'r' ? "revoked" : "purged")) != 0)
				break;
			write_pos(ag, pos = ev.seq);
			continue;
		}
		if (strcmp(ev.type, TL_NW_CERT_ISSUED) == 0) {
			char grant[201] = "";
			uint64_t version = tl_bn_getu64(v.root, "version", 0);
			char *cert = NULL;
			struct tl_bnode cn;
			const char *cp;
			size_t cl;

			if (tl_bn_getstr(v.root, "node", node, sizeof(node)) ==
			    0 && strcmp(node, ag->node) == 0 &&
			    tl_bn_getstr(v.root, "grant", grant,
			    sizeof(grant)) == 0 && tl_bn_get(v.root, "cert",
			    &cn) == 0 && tl_bn_str(cn, &cp, &cl) == 0 &&
			    cl < 16384)
				cert = strndup(cp, cl);
			tl_bview_close(&v);
			if (cert == NULL)
				continue;
			tl_sub_release(s);
			rc = certificate(ag, grant, version, cert);
			free(cert);
			if (rc != 0)
				break;
			write_pos(ag, pos = ev.seq);
			continue;
		}
		if (strcmp(ev.type, TL_NW_CRED_DELIVERED) != 0) {
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
				/* A log that never pauses still gets its files. */
				if (rc == 0 && ag->npending > 0 && tl_sub_clock() -
				    ag->pending_since > 1000000000u)
					rc = flush_pending(ag);
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
	char buf[32] = "";
	FILE *fp;

	ag->cp_seq = 0;
	if ((fp = state_fopen(ag, "amqp-seq")) == NULL)
		return;
	if (fgets(buf, sizeof(buf), fp) != NULL)
		ag->cp_seq = strtoull(buf, NULL, 10);
	fclose(fp);
}

static int
write_cp_seq(struct agent *ag, uint64_t seq)
{
	char buf[32];
	int n;

	ag->cp_seq = seq;
	n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)seq);
	return tn_file_put(ag->statefd, "amqp-seq", buf, (size_t)n, NULL);
}

/*
 * Is d signed by the control plane for this node (core/nodewire.h,
 * tl_nw_cp_message)?  0, or TL_ESECRET with the reason in why (200).
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
		snprintf(why, TL_WHY_MAX, "unsigned (no \"sig\" header): not "
		    "from the control plane");
		return TL_ESECRET;
	}
	if (d->seq <= 0) {
		snprintf(why, TL_WHY_MAX, "no \"seq\" header");
		return TL_ESECRET;
	}
	if (sodium_hex2bin(sig, sizeof(sig), d->sig, strlen(d->sig), NULL,
	    &got, NULL) != 0 || got != sizeof(sig)) {
		snprintf(why, TL_WHY_MAX, "bad signature: not %d bytes of hex",
		    TL_SIGN_LEN);
		return TL_ESECRET;
	}
	if ((rc = tl_nw_cp_message(ag->node, d->type, (uint64_t)d->seq, d->body,
	    d->len, &msg, &mlen)) != 0) {
		snprintf(why, TL_WHY_MAX, "%s", tl_strerror(rc));
		return rc;
	}
	rc = tl_secret_verify(ag->key->cp_pk, msg, mlen, sig);
	free(msg);
	if (rc != 0)
		snprintf(why, TL_WHY_MAX, "bad signature: not the control "
		    "plane's key (the one in the node's key file)");
	return rc;
}

/* One message of the node's queue, signed: what it says is done. */
static int
handle_notice(struct agent *ag, const struct tl_amqp_delivery *d)
{
	json_t *j;
	const char *m = NULL, *n = NULL, *g = NULL;
	int rc = 0;

	if (strcmp(d->type, TL_NW_CRED_DELIVERED) == 0)
		return deliver(ag, d->body, d->len);
	if ((j = json_loadb(d->body, d->len, 0, NULL)) == NULL)
		return 0;
	/* In the order of the queue: what came first first. */
	if ((rc = flush_pending(ag)) != 0) {
		json_decref(j);
		return rc;
	}
	if (strcmp(d->type, TL_NW_ASSIGN_REMOVED) == 0) {
		if (json_unpack(j, "{s:s,s:s}", "module", &m, "node", &n) ==
		    0 && strcmp(n, ag->node) == 0 && strchr(m, '/') == NULL &&
		    m[0] != '.')
			rc = remove_module(ag, m);
	} else if (strcmp(d->type, TL_NW_GRANT_REVOKED) == 0 ||
	    strcmp(d->type, TL_NW_GRANT_PURGED) == 0) {
		if (json_unpack(j, "{s:s}", "grant", &g) == 0)
			rc = drop_grant(ag, g, d->type[6] == 'r' ? "revoked" :
			    "purged");
	} else if (strcmp(d->type, TL_NW_CRED_WITHDRAWN) == 0) {
		if (json_unpack(j, "{s:s,s:s}", "grant", &g, "node", &n) == 0 &&
		    strcmp(n, ag->node) == 0)
			rc = drop_grant(ag, g, "withdrawn");
	} else if (strcmp(d->type, TL_NW_CERT_ISSUED) == 0) {
		const char *c = NULL;
		json_int_t v = 0;

		if (json_unpack(j, "{s:s,s:s,s:I,s:s}", "grant", &g, "node",
		    &n, "version", &v, "cert", &c) == 0 &&
		    strcmp(n, ag->node) == 0 && v > 0)
			rc = certificate(ag, g, (uint64_t)v, c);
	}
	json_decref(j);
	return rc;
}

static int
from_amqp(struct agent *ag)
{
	struct tl_amqp_delivery d;
	char why[TL_WHY_MAX] = "", q[96];
	int rc;

	snprintf(q, sizeof(q), "tally.node.%s", ag->node);
	read_cp_seq(ag);
	ag->conf.password = ag->password;
	if ((rc = tl_amqp_connect(&ag->conf, &ag->a, why)) != 0) {
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
	 * What waits on the queue is taken first, one message at a time
	 * (basic.get), until it is empty; only then is each module written
	 * and reloaded, once, at the newest versions (flush_pending).
	 */
	ag->batching = 1;
	while (!stop) {
		maybe_report(ag, 0);
		node_metrics(ag);
		rc = ag->batching ? tl_amqp_get(ag->a, q, &d) :
		    tl_amqp_next(ag->a, tl_sub_deadline(1000), &d);
		if (rc == TL_ENOTFOUND && ag->batching) {
			if ((rc = flush_pending(ag)) != 0)
				break;
			ag->batching = 0;
			if (ag->once) {
				maybe_report(ag, 1);
				rc = tl_amqp_wait_confirms(ag->a,
				    tl_amqp_published(ag->a),
				    tl_sub_deadline(5000));
				break;
			}
			/*
			 * Then one message at a time: the acknowledgement
			 * waits for its confirm on the same connection, and a
			 * delivery arriving meanwhile would be read as a stray
			 * frame and lost (two grants of a module at once broke
			 * the consumer: "consume: a socket error occurred").
			 */
			if ((rc = tl_amqp_consume(ag->a, q, 1)) != 0)
				break;
			continue;
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
			/* Cut to fit: the log line above has it whole. */
			snprintf(ag->refused_last, sizeof(ag->refused_last),
			    "%.60s: %.130s", d.type[0] ? d.type : "untyped",
			    why);
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

/*
 * The state is about one mesh: it outlives a reboot, but not the mesh
 * it was kept for.  A node whose mesh is built again (a new control
 * plane, new keys, grants from v1 again) would otherwise refuse every
 * delivery as older than what it held.  The mesh is named by the
 * control plane's key in the node's key file (a key file of before
 * without one: the node's sealing key); a state of another mesh is
 * cleared, and said so.  A state of before this mark is adopted.
 */
static int
state_claim(struct agent *ag)
{
	char id[8 + 2 * TL_SIGN_PUBLEN + 2], held[sizeof(id)] = "";
	struct dirent *de;
	DIR *d = NULL;
	FILE *fp;
	int rc, n = 0;

	if (ag->key->has_cp) {
		memcpy(id, "cp:", 3);
		hex(ag->key->cp_pk, TL_SIGN_PUBLEN, id + 3);
	} else {
		memcpy(id, "box:", 4);
		hex(ag->pk, TL_PUBKEY_LEN, id + 4);
	}
	if ((fp = state_fopen(ag, "mesh")) != NULL) {
		if (fgets(held, sizeof(held), fp) == NULL)
			held[0] = '\0';
		held[strcspn(held, "\n")] = '\0';
		fclose(fp);
	}
	if (held[0] != '\0' && strcmp(held, id) != 0) {
		if ((rc = tn_dir_list(ag->statefd, &d)) != 0)
			return rc;
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") != 0 &&
			    strcmp(de->d_name, "..") != 0 &&
			    tn_file_del(ag->statefd, de->d_name) == 0)
				n++;
		closedir(d);
		say("info", "%s: the state of another mesh (%.20s…, not "
		    "%.20s…) is cleared (%d files): its versions are not "
		    "this mesh's", ag->state, held, id, n);
	}
	if (strcmp(held, id) == 0)
		return 0;
	strcat(id, "\n");
	return tn_file_put(ag->statefd, "mesh", id, strlen(id), NULL);
}

/*
 * With --log: is the node in the mesh, and is the key its own?  The
 * node's stream says: node.added (its public sealing key) and
 * node.removed.  0, or an error said.
 */
static int
check_node(struct agent *ag, const char *keyfile)
{
	struct tl_filter f = { 0 };
	struct tl_txn *t;
	struct tl_iter *it;
	struct tl_event ev;
	char stream[96];
	uint8_t pk[TL_PUBKEY_LEN];
	int rc, have = 0, haspk = 0;

	snprintf(stream, sizeof(stream), "node/%s", ag->node);
	f.stream = stream;
	if ((rc = tl_log_begin(ag->log, TL_TXN_RDONLY, &t)) != 0)
		return rc;
	if ((rc = tl_iter_open(t, &f, &it)) != 0) {
		tl_log_abort(t);
		return rc;
	}
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		struct tl_bview v;
		struct tl_bnode n;
		const void *p;
		size_t len;

		if (strcmp(ev.type, TL_NW_NODE_REMOVED) == 0)
			have = haspk = 0;
		if (strcmp(ev.type, TL_NW_NODE_ADDED) != 0 ||
		    tl_bview_open(&v, ev.body, ev.body_len) != 0)
			continue;
		have = 1;
		if (tl_bn_get(v.root, "pubkey", &n) == 0 && tl_bn_bin(n, &p,
		    &len) == 0 && len == TL_PUBKEY_LEN) {
			memcpy(pk, p, TL_PUBKEY_LEN);
			haspk = 1;
		}
		tl_bview_close(&v);
	}
	tl_iter_close(it);
	tl_log_abort(t);
	if (rc != TL_EEOF)
		return rc;
	if (!have) {
		say("error", "no node %s in the mesh of %s (tally nodes lists "
		    "them): nothing is delivered to it", ag->node, ag->home);
		return TL_ENOTFOUND;
	}
	if (haspk && sodium_memcmp(pk, ag->pk, TL_PUBKEY_LEN) != 0) {
		say("error", "%s is not node %s's key: its public key is not "
		    "the one node.added recorded", keyfile, ag->node);
		return TL_ESECRET;
	}
	return 0;
}

#define PWVAR	"TALLY_NODE_AMQP_PASSWORD"

/*
 * $TALLY_NODE_AMQP_PASSWORD into buf (cap bytes), first thing: then
 * unset, and wiped where it lay, name and all (the bytes that
 * /proc/PID/environ shows): no reload command, no reader of the agent's
 * environment sees it, in either mode.
 */
static void
take_env_password(char *buf, size_t cap)
{
	char *v = getenv(PWVAR);
	size_t n;

	buf[0] = '\0';
	if (v == NULL)
		return;
	snprintf(buf, cap, "%s", v);
	n = strlen(v);
	unsetenv(PWVAR);
	tl_secret_wipe(v - (sizeof(PWVAR "=") - 1), sizeof(PWVAR "=") - 1 + n);
}

/* The broker password: from file when given, else the environment's. */
static int
read_password(const char *file, char *buf, size_t cap)
{
	FILE *fp;
	size_t n;

	if (file != NULL) {
		if ((fp = fopen(file, "re")) == NULL)
			return errno;
		if (fgets(buf, (int)cap, fp) == NULL)
			buf[0] = '\0';
		fclose(fp);
	}
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
		{ "state", required_argument, NULL, 'S' },
		{ "log", required_argument, NULL, 'l' },
		{ "amqp", required_argument, NULL, 'a' },
		{ "amqp-user", required_argument, NULL, 'u' },
		{ "amqp-password-file", required_argument, NULL, 'P' },
		{ "amqp-ca", required_argument, NULL, 'C' },
		{ "acks", required_argument, NULL, 'A' },
		{ "reload", required_argument, NULL, 'r' },
		{ "user", required_argument, NULL, 'U' },
		{ "once", no_argument, NULL, 'o' },
		{ "report-interval", required_argument, NULL, 'R' },
		{ "metrics", required_argument, NULL, 'M' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static struct agent ag;
	struct sigaction sa;
	const char *keyfile = NULL, *pwfile = NULL, *user = NULL;
	const char *amqp_ca = NULL, *maddr = NULL;
	char why[TL_WHY_MAX] = "", statebuf[300];
	void *secrets;
	int c, rc, ex = EXIT_OK, search = 0;

	/* First: the keys and the password are not read before this. */
	tl_secret_harden();
	if (sodium_init() < 0 || (secrets = tl_secret_alloc(sizeof(*ag.key) +
	    PWMAX)) == NULL) {
		say("error", "no guarded memory for the keys");
		return EXIT_FAIL;
	}
	ag.key = (struct tl_node_key *)secrets;
	ag.password = (char *)secrets + sizeof(*ag.key);
	take_env_password(ag.password, PWMAX);
	ag.acks = "tally.acks";
	ag.dirfd = ag.statefd = -1;
	ag.last_status = -1;
	ag.report_every = 60;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': ag.node = optarg; break;
		case 'k': keyfile = optarg; break;
		case 'd': ag.dir = optarg; break;
		case 'S': ag.state = optarg; break;
		case 'l': ag.home = optarg; break;
		case 'a': ag.url = optarg; break;
		case 'u': user = optarg; break;
		case 'P': pwfile = optarg; break;
		case 'C': amqp_ca = optarg; break;
		case 'A': ag.acks = optarg; break;
		case 'o': ag.once = 1; break;
		case 'M':
			if (tl_mx_addr_ok(optarg, why) != 0) {
				fprintf(stderr, "tally-node: %s\n", why);
				ex = EXIT_USAGE;
				goto out;
			}
			maddr = optarg;
			break;
		case 'R':
			ag.report_every = (unsigned)strtoul(optarg, NULL, 10);
			if (ag.report_every == 0) {
				fprintf(stderr, "tally-node: --report-interval "
				    "wants seconds (1 or more)\n");
				ex = EXIT_USAGE;
				goto out;
			}
			break;
		case 'r':
		case 'U':
			if (mod_opt(&ag, optarg, c == 'r') != 0) {
				fprintf(stderr, "tally-node: --%s wants "
				    "MODULE=%s\n", c == 'r' ? "reload" : "user",
				    c == 'r' ? "COMMAND" : "USER");
				ex = EXIT_USAGE;
				goto out;
			}
			break;
		case 'V':
			printf("tally-node %s\n", TL_VERSION);
			ex = EXIT_OK;
			goto out;
		case 'h':
			fputs(usage, stdout);
			ex = EXIT_OK;
			goto out;
		default:
			fputs(usage, stderr);
			ex = EXIT_USAGE;
			goto out;
		}
	}
	if (optind != argc || ag.node == NULL || keyfile == NULL ||
	    ag.dir == NULL || (ag.home == NULL) == (ag.url == NULL)) {
		fputs(usage, stderr);
		ex = EXIT_USAGE;
		goto out;
	}
	if ((rc = tl_secret_node_key_load(keyfile, ag.key, why)) != 0 ||
	    tl_secret_node_public(ag.key->box_sk, ag.pk) != 0) {
		say("error", "%s", why[0] ? why : "the node key is unusable");
		ex = EXIT_FAIL;
		goto out;
	}
	if (ag.url != NULL && !ag.key->has_cp) {
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
		/* amqps: the broker verified, against this CA or the system's. */
		ag.conf.cafile = amqp_ca;
		if (amqp_ca != NULL && !ag.conf.tls) {
			say("error", "--amqp-ca goes with an amqps:// URL");
			ex = EXIT_USAGE;
			goto out;
		}
		if (read_password(pwfile, ag.password, PWMAX)
		    != 0) {
			say("error", "%s: cannot read the password", pwfile);
			ex = EXIT_FAIL;
			goto out;
		}
	}
	umask(077);
	if (ag.state == NULL) {
		const char *sd = getenv("STATE_DIRECTORY");

		/* systemd's StateDirectory= (one directory: no ':'). */
		if (sd != NULL && sd[0] == '/' && strchr(sd, ':') == NULL)
			ag.state = sd;
		else {
			snprintf(statebuf, sizeof(statebuf),
			    "/var/lib/tally-node/%s", ag.node);
			mkdir("/var/lib/tally-node", 0755);
			ag.state = statebuf;
		}
	}
	for (c = 0; c < (int)ag.nmods; c++)
		if (ag.mods[c].user[0] != '\0')
			search = 1;
	if ((rc = tn_dir_top(ag.dir, 0711, search, &ag.dirfd, why)) != 0 ||
	    (rc = tn_dir_top(ag.state, 0700, 0, &ag.statefd, why)) != 0) {
		say("error", "%s", why);
		ex = EXIT_FAIL;
		goto out;
	}
	if (realpath(ag.dir, ag.absdir) == NULL) {
		say("error", "%s: %s", ag.dir, strerror(errno));
		ex = EXIT_FAIL;
		goto out;
	}
	if ((rc = state_claim(&ag)) != 0) {
		say("error", "%s: %s", ag.state, tl_strerror(rc));
		ex = EXIT_FAIL;
		goto out;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (maddr != NULL) {
		if (tl_mx_start(maddr, &ag.mx, why) != 0) {
			say("error", "%s", why);
			ex = EXIT_FAIL;
			goto out;
		}
		say("info", "metrics on http://%s/metrics", maddr);
	}
	if (ag.home != NULL) {
		char logdir[1200];

		snprintf(logdir, sizeof(logdir), "%s/log", ag.home);
		/* Opened for writing only to append this node's offers. */
		if ((rc = tl_log_open(logdir, 0, &ag.log)) != 0) {
			say("error", "%s: %s", logdir, tl_strerror(rc));
			ex = EXIT_FAIL;
			goto out;
		}
		if ((rc = check_node(&ag, keyfile)) != 0) {
			ex = EXIT_FAIL;
			goto out;
		}
		/* What was delivered but not reloaded or acked goes first. */
		if ((rc = resume(&ag)) == 0)
			rc = from_log(&ag);
	} else {
		rc = from_amqp(&ag);
	}
	if (rc == 0 && ag.unopened > 0 && ag.opened == 0) {
		/* Deliveries for the node, and this key opens none of them. */
		say("error", "%s opens none of the %u deliveries addressed to "
		    "node %s: it is not this node's key", keyfile, ag.unopened,
		    ag.node);
		if (ag.once)
			rc = TL_ESECRET;
	}
	if (rc != 0)
		ex = EXIT_FAIL;
	else if (ag.once && (ag.reload_failed || ag.value_refused))
		ex = EXIT_UNHEALTHY;
out:
	tl_mx_stop(ag.mx);
	if (ag.dirfd >= 0)
		close(ag.dirfd);
	if (ag.statefd >= 0)
		close(ag.statefd);
	tl_log_close(ag.log);
	tl_secret_free(secrets);
	free(ag.ix);
	return ex;
}
