/*
 * migrate.c - the migrator: consumer-owned migrations, then readiness.
 *
 * A requirement's migrations were copied into the log when its manifest
 * was applied (migration.stored, content-addressed by checksum), so a
 * migration runs from what was declared, not from a working tree that
 * may have moved on.  After the grant is provisioned, each file not yet
 * applied runs in order, in its own transaction, with the consumer's
 * own credential; migration.applied records it with its checksum.  A
 * file applied earlier whose content changed, or a file that fails,
 * blocks the grant with the reason (both checksums; or the server's
 * message with file:line) and nothing after it runs.
 *
 * Exactly once, across a crash: the driver records each file in the
 * grant's own database (tally.schema_history for PostgreSQL) in the
 * transaction that runs it, and looks there before running one.  The
 * log's migration.applied is appended later, in another transaction, so
 * a crash in between leaves a file applied in the database and not in
 * the log: the next pass finds it recorded there, does not run it
 * again, and appends migration.applied from what the database says.
 *
 * Off the main loop: a grant's files run on a thread of their own (at
 * most rx->workers per provider), with the file's time limit (the
 * provider's migration-timeout) enforced by the server; a slow file
 * holds up only its own grant.  The pass that finds a thread finished
 * records its outcome; tallyd stopping cancels what runs (the server
 * rolls the file back) and the next tallyd runs it again.
 *
 * Then readiness: an assignment whose every requirement is satisfied,
 * provisioned and migrated gets assignment.ready, the event a node's
 * host starts the module on.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/fields.h"
#include "core/vec.h"
#include "drivers/util.h"
#include "projections/decide.h"
#include "projections/events.h"
#include "projections/rebind.h"
#include "projections/status.h"
#include "backoff.h"
#include "credential.h"
#include "deliver.h"
#include "pass.h"
#include "rx-internal.h"
#include "session.h"

struct mfile {
	char	 file[64];
	char	 checksum[65];
	char	*content;
	size_t	 len;
	int	 rc;		/* 0 applied, else failed */
	int	 already;	/* the database had it applied */
	int	 adopted;	/* held before tally adopted the resource */
	char	 why[TL_WHY_MAX];
	int	 line;
};

struct mgrant {
	struct tl_grant	 g;
	char		 db[64], owner[64], login[64];
	char		 password[TL_PASSWORD_MAX + 1];
	char		 host[256], port[8];
	/*
	 * The provider's setting tls ("": not set) and its ca as a file
	 * ("": none): the migration logs in as the consumer, over TLS as
	 * they say (decl.h: TL_DRV_TLS_SETTINGS).
	 */
	char		 tls[16], ca_file[1200];
	unsigned	 timeout_s;	/* per file: migration-timeout */
	const struct tl_drv_ops *ops;
	struct mfile	*f;
	size_t		 nf, capf;
	char		 block[TL_WHY_MAX + 200];	/* set: blocked */
	char		 retry[256];	/* its backoff key (retry_key) */
	int		 ran;		/* f[].rc are a run's outcomes */
	int		 failed;	/* a file failed: back off (retry) */
	int		 unreach;	/* no session: the files wait */
	int		 skip;		/* nothing to record this pass */
};

/*
 * A grant's files running on a thread of their own, with its own copy
 * of the grant (files, credential): the pass that finds it done takes
 * the outcome.
 */
struct tl_rx_mig {
	struct tl_rx_job	 job;		/* first: on the pool's long lane */
	struct mgrant		 mg;
	atomic_int		 cancel;	/* tallyd is stopping */
	int			 taken;		/* by this pass */
	struct tl_rx_mig	*next;
};

struct mpass {
	struct tl_rx	*rx;
	struct mgrant	*g;
	size_t		 ng, capg;
	char		(*mods)[64];	/* modules that may have become ready */
	size_t		 nmods, capmods;
	unsigned	 resting;	/* blocked, waiting out a backoff */
	unsigned	 applied, blocked, running;	/* what the pass says */
};

/* The backoff of a file that failed: a changed file is another key. */
static void
retry_key(char out[256], const char *checksum, const char *grant)
{
	snprintf(out, 256, "migration/%.16s/%s", checksum, grant);
}

/*
 * A module that may have become ready, once: grants come in id order,
 * so a module's are together and the last one added is the one to
 * compare with; mods_unique settles the rest after the gather.  (A scan
 * of the list for each grant was quadratic: a first pass over a
 * million provisioned grants did not end in half an hour.)
 */
static int
add_module(struct mpass *ps, const char *m)
{
	if (ps->nmods > 0 && strcmp(ps->mods[ps->nmods - 1], m) == 0)
		return 0;
	if (tl_vec_grow(&ps->mods, &ps->capmods, ps->nmods + 1,
	    sizeof(ps->mods[0])) != 0)
		return ENOMEM;
	snprintf(ps->mods[ps->nmods++], 64, "%s", m);
	return 0;
}

static int
mod_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Each module once, in name order. */
static void
mods_unique(struct mpass *ps)
{
	size_t i, k = 0;

	if (ps->nmods < 2)
		return;
	qsort(ps->mods, ps->nmods, sizeof(ps->mods[0]), mod_cmp);
	for (i = 1; i < ps->nmods; i++)
		if (strcmp(ps->mods[i], ps->mods[k]) != 0 && ++k != i)
			memcpy(ps->mods[k], ps->mods[i], sizeof(ps->mods[0]));
	ps->nmods = k + 1;
}

/* Copies the stored content of checksum out of the log. */
static int
stored(struct tl_txn *t, const struct tl_proj *p, const char *sum,
    char **out, size_t *len)
{
	const void *v, *bin;
	size_t n, bl;
	struct tl_event ev;
	struct tl_bview bv;
	struct tl_bnode c;
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "ms/%s", sum)) != 0)
		return rc;
	if ((rc = tl_kv_get(t, p->graph, k, strlen(k), &v, &n)) != 0)
		return rc;
	if (n != 8)
		return TL_ECORRUPT;
	if ((rc = tl_log_get(t, tl_get_be64(v), &ev)) != 0)
		return rc;
	if ((rc = tl_bview_open(&bv, ev.body, ev.body_len)) != 0)
		return rc;
	rc = TL_EMALFORMED;
	if (tl_bn_get(bv.root, "content", &c) == 0 &&
	    tl_bn_bin(c, &bin, &bl) == 0) {
		rc = ENOMEM;
		if ((*out = malloc(bl + 1)) != NULL) {
			memcpy(*out, bin, bl);
			(*out)[bl] = '\0';
			*len = bl;
			rc = 0;
		}
	}
	tl_bview_close(&bv);
	return rc;
}

struct gather_arg {
	struct mpass		*ps;
	struct tl_txn		*t;
	const struct tl_proj	*p;
	int			 rc;
};

static int
gather_one(const struct tl_grant *g, void *arg)
{
	struct gather_arg *ga = arg;
	struct mpass *ps = ga->ps;
	struct tl_rec r;
	struct tl_bnode list;
	struct mgrant *mg;
	char k[TL_KEY_MAX];
	size_t i;
	int rc, held;

	ps->rx->gathered++;
	/*
	 * An adopted login's password is not tally's: the files run with
	 * the credential the rotation delivers, and the holders are ready
	 * only then.
	 */
	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0 || g->drift[0] != '\0' ||
	    tl_rx_grant_adopted_login(g))
		return 0;
	{
		struct tl_nodelist nl;

		/* A holder not yet marked ready may have become so. */
		if (tl_rx_grant_holders(ga->t, ga->p, g, &nl) == 0) {
			for (i = 0; i < nl.n; i++)
				if (tl_key(k, "ar/%s@%s", g->module,
				    nl.v[i]) == 0 &&
				    !tl_rec_exists(ga->t, ga->p->graph, k)) {
					rc = add_module(ps, g->module);
					break;
				}
			tl_nodelist_free(&nl);
		}
	}
	{
		struct tl_rebind mv;

		/* Moving (tally rebind): the old database is read-only. */
		if (tl_mv_get(ga->t, ga->p, g->id, &mv) == 0 &&
		    strcmp(mv.state, TL_MV_MOVED) != 0)
			return 0;
	}
	if ((rc = tl_key(k, "r/%s/%s", g->module, g->req)) != 0)
		return rc;
	if (tl_rec_get(ga->t, ga->p->graph, k, &r) != 0)
		return 0;
	if (tl_bn_get(r.m, "migrations", &list) != 0 ||
	    tl_bn_len(list) == 0) {
		tl_rec_close(&r);
		return 0;
	}
	if (tl_vec_grow_secret(&ps->g, &ps->capg, ps->ng + 1,
	    sizeof(ps->g[0])) != 0) {
		tl_rec_close(&r);
		return ENOMEM;
	}
	mg = &ps->g[ps->ng];
	memset(mg, 0, sizeof(*mg));
	mg->g = *g;
	/* tally adopt --migrated-through: that file and those before it. */
	held = g->adopt_migrated[0] != '\0';
	for (i = 0; i < tl_bn_len(list) && mg->block[0] == '\0'; i++) {
		struct tl_bnode e = tl_bn_at(list, i);
		char file[64] = "", sum[65] = "", applied[80] = "";
		const void *v;
		size_t n;
		int adopted = held;

		tl_bn_getstr(e, "file", file, sizeof(file));
		tl_bn_getstr(e, "checksum", sum, sizeof(sum));
		if (held && strcmp(file, g->adopt_migrated) == 0)
			held = 0;
		if (tl_key(k, "ma/%s/%s", g->id, file) == 0 &&
		    tl_kv_get(ga->t, ga->p->grants, k, strlen(k), &v,
		    &n) == 0 && n < sizeof(applied)) {
			memcpy(applied, v, n);
			applied[n] = '\0';
			if (strcmp(applied, sum) == 0)
				continue;
			snprintf(mg->block, sizeof(mg->block), "%s was applied "
			    "with checksum %.16s… but the manifest now has "
			    "%.16s…: an applied migration must not change; add "
			    "a new file instead", file, applied, sum);
			break;
		}
		if (tl_vec_grow(&mg->f, &mg->capf, mg->nf + 1,
		    sizeof(mg->f[0])) != 0) {
			tl_rec_close(&r);
			ps->ng++;
			return ENOMEM;
		}
		memset(&mg->f[mg->nf], 0, sizeof(mg->f[0]));
		mg->f[mg->nf].adopted = adopted;
		snprintf(mg->f[mg->nf].file, sizeof(mg->f[0].file), "%s", file);
		snprintf(mg->f[mg->nf].checksum, sizeof(mg->f[0].checksum),
		    "%s", sum);
		if ((rc = stored(ga->t, ga->p, sum, &mg->f[mg->nf].content,
		    &mg->f[mg->nf].len)) != 0) {
			snprintf(mg->block, sizeof(mg->block), "%s: its "
			    "content is not in the log (%s): re-apply the "
			    "manifest", file, tl_strerror(rc));
			break;
		}
		mg->nf++;
	}
	tl_rec_close(&r);
	ps->ng++;
	if (mg->nf == 0 && mg->block[0] == '\0') {
		ps->ng--;	/* everything applied */
		free(mg->f);
		return 0;
	}
	if (mg->block[0] == '\0') {
		struct tl_rx_backoff *bo;

		/* The first file to run is the one that failed, if any. */
		retry_key(mg->retry, mg->f[0].checksum, g->id);
		if ((bo = tl_rx_backoff_find(ps->rx, mg->retry, 0)) != NULL &&
		    bo->next_ns > tl_rx_now()) {
			/* Failed lately, unchanged: still blocked. */
			ps->resting++;
			ps->ng--;
			for (i = 0; i < mg->nf; i++)
				free(mg->f[i].content);
			free(mg->f);
			return 0;
		}
	}
	if (mg->block[0] == '\0') {
		struct tl_rx_prov pv;
		char driver[64];
		int drop;

		tl_rx_grant_names(ps->rx, g, g->version, mg->db, mg->owner, mg->login);
		if (tl_rx_intent_password(ps->rx, ga->t, g, mg->password) != 0 ||
		    tl_rx_load_provider(ga->t, ga->p, ps->rx, g->provider,
		    g->type, &pv, driver, &drop) != 0) {
			snprintf(mg->block, sizeof(mg->block), "cannot read "
			    "the grant's credential or provider");
		} else {
			const char *sv[2 * TL_RX_SETTINGS_MAX + 1];
			const char *tls;

			snprintf(mg->host, sizeof(mg->host), "%s", pv.host);
			snprintf(mg->port, sizeof(mg->port), "%s", pv.port);
			tls = tl_drv_setting_get(tl_rx_prov_settings(&pv, sv),
			    "tls");
			snprintf(mg->tls, sizeof(mg->tls), "%s", tls != NULL ?
			    tls : "");
			snprintf(mg->ca_file, sizeof(mg->ca_file), "%s",
			    pv.ca_file);
			mg->timeout_s = pv.mig_timeout;
			mg->ops = tl_drv_find(driver);
		}
		tl_rx_prov_wipe(&pv);
	}
	return 0;
}

/*
 * Runs mg's files in order, on a migration thread: touches nothing but
 * mg (no log, no rx).  Stops at the first file that fails, or at one
 * that cannot run (no session: not the file's fault, not a block).
 */
static void
run_one(struct mgrant *mg, atomic_int *cancel)
{
	const char *sv[3] = { "tls", mg->tls, NULL };
	struct tl_drv_endpoint ep = { mg->host, mg->port,
	    mg->tls[0] != '\0' ? sv : NULL,
	    mg->ca_file[0] != '\0' ? mg->ca_file : NULL };
	struct tl_drv_grant dg = { mg->db, mg->owner, mg->login,
	    mg->password };
	size_t j;

	mg->ran = 1;
	for (j = 0; j < mg->nf; j++) {
		struct mfile *f = &mg->f[j];
		struct tl_drv_migration m = { f->file, f->checksum, f->content,
		    f->len, mg->timeout_s, cancel };

		if (f->adopted) {
			/* Recorded as the resource's already, not run. */
			f->rc = 0;
			f->already = 1;
		} else if (mg->ops == NULL || mg->ops->migrate == NULL) {
			f->rc = TL_EDRIVER;
			snprintf(f->why, sizeof(f->why), "driver %s does not "
			    "run migrations", mg->ops ? mg->ops->decl->name :
			    "(none)");
		} else
			f->rc = mg->ops->migrate(&ep, &dg, &m, &f->already,
			    f->why, &f->line);
		if (f->rc != 0 && atomic_load(cancel)) {
			/* Stopped, not failed: the next tallyd runs it. */
			f->rc = TL_EUNREACH;
			snprintf(f->why, sizeof(f->why), "stopped: tallyd is "
			    "stopping");
		}
		if (f->rc == TL_EUNREACH) {
			/*
			 * No session (the provider is down, the database or
			 * the login is gone): not the file's fault, so not a
			 * block.  The verifier records what is wrong; the
			 * files wait for a later pass.
			 */
			mg->unreach = 1;
			snprintf(mg->block, sizeof(mg->block), "%s", f->why);
			for (; j < mg->nf; j++)
				mg->f[j].rc = -1;	/* not run */
			break;
		}
		if (f->rc != 0) {
			/*
			 * Not again each pass: the same file fails the same
			 * way.  Changed, it is another key and runs at once.
			 */
			retry_key(mg->retry, f->checksum, mg->g.id);
			mg->failed = 1;
			if (f->line > 0)
				snprintf(mg->block, sizeof(mg->block),
				    "%s:%d: %s", f->file, f->line, f->why);
			else
				snprintf(mg->block, sizeof(mg->block), "%s: %s",
				    f->file, f->why);
			for (j++; j < mg->nf; j++)
				mg->f[j].rc = -1;	/* not run */
			break;
		}
	}
}

static void
mgrant_free(struct mgrant *mg)
{
	size_t j;

	for (j = 0; j < mg->nf; j++)
		free(mg->f[j].content);
	free(mg->f);
	mg->f = NULL;
	mg->nf = 0;
	tl_secret_wipe(mg->password, sizeof(mg->password));
}

/* A grant's files, as a job on the pool's long lane (pass.h). */
static void
mig_run(struct tl_rx_job *j)
{
	struct tl_rx_mig *jb = (struct tl_rx_mig *)j;

	run_one(&jb->mg, &jb->cancel);
}

/* Unlinks jb (its thread joined) and frees it, its secrets wiped. */
static void
mig_drop(struct tl_rx *rx, struct tl_rx_mig *jb)
{
	struct tl_rx_mig **pp;

	for (pp = &rx->migs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == jb) {
			*pp = jb->next;
			break;
		}
	mgrant_free(&jb->mg);
	tl_secret_free(jb);
}

/* What a finished run did, said once, by the pass that records it. */
static unsigned
report(struct tl_rx *rx, struct mgrant *mg)
{
	size_t j;
	unsigned n = 0;

	for (j = 0; j < mg->nf && mg->f[j].rc == 0; j++) {
		n++;
		if (mg->f[j].adopted)
			tl_rx_log(rx, TL_RX_INFO, "grant %s: %s was applied "
			    "before tally adopted the resource (tally adopt "
			    "--migrated-through): recorded, not run",
			    mg->g.id, mg->f[j].file);
		else if (mg->f[j].already)
			tl_rx_log(rx, TL_RX_INFO, "grant %s: %s was applied "
			    "already (the resource records it): recorded, "
			    "not run again", mg->g.id, mg->f[j].file);
		else
			tl_rx_log(rx, TL_RX_INFO, "grant %s: applied %s",
			    mg->g.id, mg->f[j].file);
	}
	if (mg->unreach) {
		tl_rx_log(rx, TL_RX_WARN, "grant %s: migrations wait: %s",
		    mg->g.id, mg->block);
		mg->block[0] = '\0';	/* not a block */
	} else if (mg->failed) {
		tl_rx_backoff_fail(rx, mg->retry);
		tl_rx_log(rx, TL_RX_WARN, "grant %s: migration blocked: %s",
		    mg->g.id, mg->block);
	}
	return n;
}

/* Running jobs of provider. */
static unsigned
busy(struct tl_rx *rx, const char *provider)
{
	struct tl_rx_mig *jb;
	unsigned n = 0;

	for (jb = rx->migs; jb != NULL; jb = jb->next)
		if (!tl_rx_job_done(&jb->job) &&
		    strcmp(jb->mg.g.provider, provider) == 0)
			n++;
	return n;
}

/*
 * This pass's grants: one whose files run goes on waiting; one whose
 * run finished takes its outcome (recorded by this pass); otherwise a
 * thread is started for its files, if its provider has a worker free.
 * *running: grants whose files are still under way or waiting for a
 * worker.  Returns the files applied.
 */
static unsigned
start_or_collect(struct mpass *ps, unsigned *running)
{
	struct tl_rx *rx = ps->rx;
	struct tl_rx_mig *jb, *next;
	unsigned n = 0;
	size_t i;

	for (jb = rx->migs; jb != NULL; jb = jb->next)
		jb->taken = 0;
	for (i = 0; i < ps->ng; i++) {
		struct mgrant *mg = &ps->g[i];

		for (jb = rx->migs; jb != NULL; jb = jb->next)
			if (strcmp(jb->mg.g.id, mg->g.id) == 0)
				break;
		if (jb != NULL && !tl_rx_job_done(&jb->job)) {
			jb->taken = 1;
			mg->skip = 1;
			(*running)++;
			continue;
		}
		if (jb != NULL) {
			/* Finished: its outcome is the grant's now. */
			mgrant_free(mg);
			*mg = jb->mg;
			mg->skip = 0;	/* this pass records it */
			jb->mg.f = NULL;
			jb->mg.nf = 0;
			mig_drop(rx, jb);
			n += report(rx, mg);
			continue;
		}
		if (mg->block[0] != '\0' || mg->nf == 0)
			continue;	/* blocked as gathered: recorded */
		mg->skip = 1;
		if (busy(rx, mg->g.provider) >= (unsigned)(rx->workers > 0 ?
		    rx->workers : 1)) {
			(*running)++;	/* waits for a worker */
			continue;
		}
		if ((jb = tl_secret_calloc(1, sizeof(*jb))) == NULL) {
			(*running)++;
			continue;
		}
		jb->mg = *mg;
		atomic_init(&jb->cancel, 0);
		jb->job.run = mig_run;
		jb->job.lane = TL_RX_LANE_LONG;
		snprintf(jb->job.key, sizeof(jb->job.key), "%s", mg->g.provider);
		if (tl_rx_pool_submit(rx, &jb->job) != 0) {
			tl_secret_wipe(jb->mg.password,
			    sizeof(jb->mg.password));
			tl_secret_free(jb);
			(*running)++;
			continue;
		}
		/* The files and the credential are the thread's now. */
		mg->f = NULL;
		mg->nf = 0;
		tl_secret_wipe(mg->password, sizeof(mg->password));
		jb->taken = 1;
		jb->next = rx->migs;
		rx->migs = jb;
		(*running)++;
	}
	/* Finished runs no grant asks for any more (revoked, moving). */
	for (jb = rx->migs; jb != NULL; jb = next) {
		next = jb->next;
		if (!jb->taken && tl_rx_job_done(&jb->job))
			mig_drop(rx, jb);
	}
	return n;
}

void
tl_rx_migs_free(struct tl_rx *rx)
{
	struct tl_rx_mig *jb, *next;
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	int i, left;

	for (jb = rx->migs; jb != NULL; jb = jb->next) {
		if (!tl_rx_job_done(&jb->job))
			tl_rx_log(rx, TL_RX_INFO, "grant %s: cancelling its "
			    "migration (rolled back; the next tallyd runs it "
			    "again)", jb->mg.g.id);
		atomic_store(&jb->cancel, 1);
	}
	/* The drivers look at cancel every 100 ms; the server then stops. */
	for (i = 0; i < 150; i++) {
		left = 0;
		for (jb = rx->migs; jb != NULL; jb = jb->next)
			if (!tl_rx_job_done(&jb->job))
				left++;
		if (left == 0)
			break;
		nanosleep(&ts, NULL);
	}
	for (jb = rx->migs; jb != NULL; jb = next) {
		next = jb->next;
		if (tl_rx_job_done(&jb->job))
			mig_drop(rx, jb);
		else {
			/*
			 * Stuck in a connect: the process's exit ends it.  The
			 * pool's thread still uses jb, so it is not freed.
			 */
			tl_rx_log(rx, TL_RX_WARN, "grant %s: migration still "
			    "running at exit", jb->mg.g.id);
		}
	}
	rx->migs = NULL;
}

struct ready_arg {
	struct tl_ctx	*c;
	int		 rc;
};

/* assignment.ready for every assignment that just became ready. */
static int
readiness(struct tl_ctx *c, const char *module)
{
	json_t *st, *a;
	size_t i;
	int rc;

	if ((rc = tl_status_module(c->t, &c->p, module, &st)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	json_array_foreach(json_object_get(st, "assignments"), i, a) {
		const char *state = json_string_value(json_object_get(a,
		    "state"));
		const char *node = json_string_value(json_object_get(a,
		    "node"));
		struct tl_body b;
		char k[TL_KEY_MAX];
		char stream[TL_KEY_MAX];

		if (state == NULL || node == NULL ||
		    strcmp(state, TL_ST_MIGRATED) != 0)
			continue;
		if ((rc = tl_key(k, "ar/%s@%s", module, node)) != 0 ||
		    (rc = tl_key(stream, "assignment/%s@%s", module,
		    node)) != 0)
			break;
		if (tl_rec_exists(c->t, c->p.graph, k))
			continue;
		tl_body_init(&b);
		tl_body_str(&b, TL_F_MODULE, module);
		tl_body_str(&b, TL_F_NODE, node);
		rc = tl_emit(c, TL_EV_ASSIGN_READY, stream, &b, NULL);
		tl_body_free(&b);
		if (rc != 0)
			break;
	}
	json_decref(st);
	return rc;
}

struct mod_arg {
	struct tl_ctx	*c;
	int		 rc;
};

static int
outcomes(void *arg, struct tl_ctx *cp)
{
	struct mpass *ps = arg;
	struct tl_ctx c = *cp;
	struct tl_txn *t = c.t;
	struct mod_arg ma;
	size_t i, j;
	int rc;

	for (i = 0; i < ps->ng; i++) {
		struct mgrant *mg = &ps->g[i];
		struct tl_grant cur;
		char stream[TL_KEY_MAX];

		if (mg->skip)
			continue;
		if ((rc = tl_grant_get(t, &c.p, mg->g.id, &cur, NULL)) != 0 ||
		    (rc = tl_key(stream, "grant/%s", mg->g.id)) != 0)
			return rc;
		c.cause = cur.state_seq;
		c.have_corr = 0;
		for (j = 0; mg->ran && j < mg->nf; j++) {
			struct tl_body b;
			char k[TL_KEY_MAX];

			if (mg->f[j].rc != 0)
				break;
			/* Recorded meanwhile (another process): once. */
			if ((rc = tl_key(k, "ma/%s/%s", mg->g.id,
			    mg->f[j].file)) != 0)
				return rc;
			if (tl_rec_exists(t, c.p.grants, k))
				continue;
			tl_body_init(&b);
			tl_body_str(&b, TL_F_GRANT, mg->g.id);
			tl_body_str(&b, TL_F_FILE, mg->f[j].file);
			tl_body_str(&b, TL_F_CHECKSUM, mg->f[j].checksum);
			rc = tl_emit(&c, TL_EV_MIGRATION_APPLIED, stream, &b,
			    NULL);
			tl_body_free(&b);
			if (rc != 0)
				return rc;
		}
		if (mg->block[0] != '\0' && strcmp(cur.blocked,
		    mg->block) != 0) {
			struct tl_body b;

			tl_body_init(&b);
			tl_body_str(&b, TL_F_GRANT, mg->g.id);
			tl_body_str(&b, TL_F_REASON, mg->block);
			rc = tl_emit(&c, TL_EV_MIGRATION_BLOCKED, stream, &b,
			    NULL);
			tl_body_free(&b);
			if (rc != 0)
				return rc;
		}
	}
	(void)ma;
	for (i = 0; i < ps->nmods; i++)
		if ((rc = readiness(&c, ps->mods[i])) != 0)
			return rc;
	*cp = c;
	return 0;
}

/*
 * Phase 1 (pass.h): provisioned grants with files not yet applied, or
 * a holder not yet ready.  The folds index exactly those (gmw/,
 * projections/grant.h), so a pass reads its work and no grant at rest;
 * projections an older tally built lack the index until tally rebuild,
 * and every grant is read meanwhile.
 */
static int
gather(void *arg, struct tl_txn *t, const struct tl_proj *p,
    unsigned *phases)
{
	struct mpass *ps = arg;
	struct gather_arg ga = { ps, t, p, 0 };
	int rc;

	if (tl_grant_due_indexed(t, p))
		rc = tl_grant_each_migrating(t, p, gather_one, &ga);
	else {
		tl_rx_unindexed(ps->rx);
		rc = tl_grant_each(t, p, gather_one, &ga);
	}
	if (rc != 0)
		return rc;
	mods_unique(ps);
	/* Always: finished runs are collected even when no grant asks. */
	*phases = TL_RX_CALLS | TL_RX_OUTCOMES;
	return 0;
}

/*
 * Phase 3: files start on the pool's long lane (a slow one holds up
 * only its grant); runs that finished hand over their outcomes.
 */
static void
calls(void *arg, unsigned *phases)
{
	struct mpass *ps = arg;
	size_t i;
	int work = 0;

	ps->applied = start_or_collect(ps, &ps->running);
	ps->blocked = ps->resting;
	for (i = 0; i < ps->ng; i++) {
		if (ps->g[i].skip)
			continue;
		work = 1;
		if (ps->g[i].block[0] != '\0')
			ps->blocked++;
	}
	if (!work && ps->nmods == 0)
		*phases &= ~TL_RX_OUTCOMES;
}

static const struct tl_rx_pass_def migrate_pass = {
	gather, NULL, calls, outcomes
};

int
tl_rx_migrate(struct tl_rx *rx, unsigned *applied, unsigned *blocked,
    unsigned *running)
{
	struct mpass ps;
	size_t i;
	int rc;

	memset(&ps, 0, sizeof(ps));
	ps.rx = rx;
	rc = tl_rx_pass_run(rx, &migrate_pass, &ps);
	*applied = ps.applied;
	*blocked = ps.blocked;
	*running = ps.running;
	for (i = 0; i < ps.ng; i++)
		mgrant_free(&ps.g[i]);
	tl_secret_free(ps.g);
	free(ps.mods);
	return rc;
}
