/*
 * cmd_adopt_object.c - tally adopt MODULE/REQ --resource NAME: an
 * object on the provider that tally did not make (a live mesh's, and
 * the login its consumers use) becomes a requirement's resource.
 *
 * Appends grant.adopted {grant type resource [login]} on grant/GRANT, before
 * the grant is first provisioned: before tally assign makes it (the
 * grants fold keeps the claim until then), or while it waits.  tallyd
 * then provisions the grant into that object (the driver takes it over:
 * tl_drv_grant.adopting), delivers nothing of the login it found, whose
 * password tally never knew, and rotates at once to a credential of its
 * own, retiring the adopted login once every holder acknowledged the
 * new one (reactors/provision.c).  The CLI opens no provider session:
 * what is on the provider is the driver's to check when it takes over.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"
#include "core/fields.h"
#include "core/secret.h"
#include "drivers/decl.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "projections/graph.h"
#include "tally.h"

static const char usage[] =
"usage: tally adopt MODULE/REQUIREMENT [--node NODE] --resource NAME\n"
"                   [--login USER] [--migrated-through FILE]\n"
"                   [--secret-stdin | --password-stdin]\n"
"\n"
"Takes under tally an object that exists on the requirement's provider\n"
"and that tally did not make: a live mesh's, with the login its consumers\n"
"use today.  Run it after tally apply declared the module and before the\n"
"grant is first provisioned (before tally assign, or while the grant\n"
"waits): a grant tally already provisioned has its own object.\n"
"\n"
"  --node NODE      the instance's node (a per-instance requirement)\n"
"  --resource NAME  the object's name on the provider\n"
"  --login USER     the login its consumers use today; required by\n"
"                   drivers whose grants have a credential, except those\n"
"                   whose provider chooses it (the object is the login)\n"
"  --secret-stdin   one line on standard input: what the driver takes the\n"
"                   object over with, where the provider chooses the\n"
"                   credential (an OAuth client's registration access\n"
"                   token); required by those drivers, refused by others;\n"
"                   kept sealed under the master key, never printed\n"
"  --password-stdin one line on standard input: the password the login's\n"
"                   holders use today, tried once when tallyd takes the\n"
"                   object over, to tell whether they work until tally's\n"
"                   credential reaches them (tally status); never\n"
"                   delivered, verified or set; sealed like --secret-stdin\n"
"  --migrated-through FILE\n"
"                   the last of the requirement's migration files the\n"
"                   object holds already: it and the files before it are\n"
"                   recorded as applied and never run; the files after it\n"
"                   run as usual (default: every file the object does not\n"
"                   record itself runs)\n"
"\n"
"When tallyd provisions the grant its driver checks that the object and\n"
"the login exist and are not tally's or another mesh's, and takes them\n"
"over: nothing is dropped or made again, the data stays\n"
"(docs/manifest.md says what each driver does).  The adopted login's\n"
"password is never tally's: it is not delivered or verified; tallyd\n"
"rotates at once to a credential it made, delivers it to every holder\n"
"and retires the adopted login only when all of them acknowledged it.\n"
"Revoking an adopted grant retains the object whatever the provider's\n"
"policy; tally purge drops it.\n"
"\n"
"Recorded as grant.adopted {grant, type, resource, login, migrated,\n"
"secret, password}.\n"
"Refused (exit 4) for a requirement whose driver cannot adopt, a grant\n"
"already provisioned or already adopting, an object another grant\n"
"adopts and a file that is not one of the requirement's migrations;\n"
"exit 3 for a requirement that is not declared.\n";

struct obj_arg {
	char		 module[64];
	char		 req[64];
	const char	*node;
	const char	*resource;
	const char	*login;
	const char	*migrated;
	int		 secret_in;		/* --secret-stdin */
	int		 password_in;		/* --password-stdin */
	char		 secret[TL_DRV_HANDLE_MAX];	/* wiped after */
	char		 home[1024];
	char		 grant[TL_GRANT_ID_MAX + 1];
	char		 type[64];
	int		 waiting;	/* the grant exists, not provisioned */
};

/* Another grant (or claim) adopting resource for type: its id in by. */
struct taken_arg {
	const struct obj_arg	*a;
	char			 by[TL_GRANT_ID_MAX + 1];
};

static int
taken_one(const struct tl_grant *g, void *arg)
{
	struct taken_arg *ta = arg;

	if (g->adopt_version == 0 || strcmp(g->id, ta->a->grant) == 0 ||
	    strcmp(g->type, ta->a->type) != 0 ||
	    (strcmp(g->adopt_resource, ta->a->resource) != 0 &&
	    (ta->a->login == NULL || g->adopt_login[0] == '\0' ||
	    strcmp(g->adopt_login, ta->a->login) != 0)) ||
	    strcmp(g->state, TL_GRANT_REVOKED) == 0 ||
	    strcmp(g->state, TL_GRANT_PURGED) == 0)
		return 0;
	snprintf(ta->by, sizeof(ta->by), "%s", g->id);
	return 1;
}

/* A claim adp/GRANT (grants.c) of a grant not yet requested. */
static int
claim_one(const void *key, size_t klen, const void *val, size_t vlen,
    void *arg)
{
	struct taken_arg *ta = arg;
	struct tl_rec r;
	char type[64] = "", res[TL_DRV_NAME_MAX] = "";
	char login[TL_DRV_NAME_MAX] = "";

	if (tl_rec_open(val, vlen, &r) != 0)
		return TL_ECORRUPT;
	tl_bn_getstr(r.m, "type", type, sizeof(type));
	tl_bn_getstr(r.m, "resource", res, sizeof(res));
	tl_bn_getstr(r.m, "login", login, sizeof(login));
	tl_rec_close(&r);
	if (strcmp(type, ta->a->type) != 0 ||
	    (strcmp(res, ta->a->resource) != 0 && (ta->a->login == NULL ||
	    login[0] == '\0' || strcmp(login, ta->a->login) != 0)) ||
	    klen <= 4 ||
	    (klen - 4 == strlen(ta->a->grant) &&
	    memcmp((const char *)key + 4, ta->a->grant, klen - 4) == 0))
		return 0;
	snprintf(ta->by, sizeof(ta->by), "%.*s", (int)(klen - 4),
	    (const char *)key + 4);
	return 1;
}

/* --migrated-through names one of the requirement's files. */
static int
migration_named(struct tl_ctx *c, const struct obj_arg *a, struct tl_bnode req)
{
	struct tl_bnode list;
	char file[64], names[256] = "";
	size_t i, o = 0;

	if (tl_bn_get(req, "migrations", &list) != 0 || tl_bn_len(list) == 0)
		return tl_refuse(c, TL_EINVAL, "--migrated-through: %s/%s "
		    "declares no migrations", a->module, a->req);
	for (i = 0; i < tl_bn_len(list); i++) {
		file[0] = '\0';
		tl_bn_getstr(tl_bn_at(list, i), "file", file, sizeof(file));
		if (strcmp(file, a->migrated) == 0)
			return 0;
		if (o < sizeof(names))
			o += (size_t)snprintf(names + o, sizeof(names) - o,
			    "%s%s", i ? ", " : "", file);
	}
	return tl_refuse(c, TL_EINVAL, "--migrated-through %s: not one of "
	    "%s/%s's migrations (%s)", a->migrated, a->module, a->req, names);
}

/* The requirement's type, and the grant id of the instance meant. */
static int
requirement(struct tl_ctx *c, struct obj_arg *a)
{
	struct tl_rec r;
	char k[TL_KEY_MAX], kind[32] = "", scope[32] = "", cred[16] = "";
	int rc;

	if ((rc = tl_key(k, "r/%s/%s", a->module, a->req)) != 0)
		return rc;
	if (tl_rec_get(c->t, c->p.graph, k, &r) != 0)
		return tl_refuse(c, TL_ENOTFOUND, "no requirement %s/%s: tally "
		    "apply declares the module first", a->module, a->req);
	tl_bn_getstr(r.m, "kind", kind, sizeof(kind));
	tl_bn_getstr(r.m, "scope", scope, sizeof(scope));
	tl_bn_getstr(r.m, "type", a->type, sizeof(a->type));
	tl_bn_getstr(r.m, "credential", cred, sizeof(cred));
	rc = a->migrated != NULL ? migration_named(c, a, r.m) : 0;
	tl_rec_close(&r);
	if (rc != 0)
		return rc;
	if (strcmp(kind, "instantiation") != 0)
		return tl_refuse(c, TL_EREFUSED, "%s/%s is not a resource of "
		    "its own (kind %s): nothing to adopt", a->module, a->req,
		    kind);
	/* Its versions keep one login and are never retired beside. */
	if (strcmp(cred, "certificate") == 0)
		return tl_refuse(c, TL_EREFUSED, "%s/%s logs in by certificate "
		    "(credential: certificate): an adopted login's password "
		    "would never be retired, so tally adopt takes over logins "
		    "by password only", a->module, a->req);
	if (strcmp(scope, "per-instance") == 0 && a->node == NULL)
		return tl_refuse(c, TL_EINVAL, "%s/%s is per instance: --node "
		    "names the instance's node", a->module, a->req);
	if (strcmp(scope, "per-instance") != 0 && a->node != NULL)
		return tl_refuse(c, TL_EINVAL, "%s/%s is shared by every "
		    "instance: no --node", a->module, a->req);
	return tl_grant_key(a->grant, a->module, a->req, a->node);
}

/*
 * The secret read from standard input, sealed under the master key
 * (tl_grant_adopt_ad: only this grant's grant.adopted opens it, as
 * field) into b's field.
 */
static int
seal_secret(struct tl_ctx *c, const struct obj_arg *a, const char *field,
    struct tl_body *b)
{
	struct tl_key key;
	uint8_t *ct;
	char path[1100], ad[TL_KEY_MAX], why[TL_WHY_MAX] = "";
	size_t n = strlen(a->secret);
	int rc;

	snprintf(path, sizeof(path), "%s/master.key", a->home);
	if (tl_secret_load(path, &key, why) != 0)
		return tl_refuse(c, TL_EINVAL, "master key: %s", why);
	if ((ct = malloc(n + TL_BOX_OVERHEAD)) == NULL) {
		tl_secret_wipe(&key, sizeof(key));
		return ENOMEM;
	}
	tl_grant_adopt_ad(ad, a->grant, field);
	rc = tl_secret_encrypt(&key, ad, strlen(ad), a->secret, n, ct);
	tl_secret_wipe(&key, sizeof(key));
	if (rc == 0)
		tl_body_secret(b, field, ct, n + TL_BOX_OVERHEAD);
	free(ct);
	return rc;
}

static int
do_adopt_object(struct tl_ctx *c, void *arg)
{
	struct obj_arg *a = arg;
	const struct tl_drv_decl *dd;
	struct taken_arg ta = { a, "" };
	struct tl_grant g;
	struct tl_body b;
	char why[TL_WHY_MAX], k[TL_KEY_MAX], stream[TL_KEY_MAX];
	int rc;

	a->waiting = 0;
	if ((rc = requirement(c, a)) != 0)
		return rc;
	if ((dd = tl_drv_decl_for_type(a->type)) == NULL)
		return tl_refuse(c, TL_EREFUSED, "no driver for type %s",
		    a->type);
	if (!tl_drv_can(dd, TL_DRV_CAP_ADOPT, why))
		return tl_refuse(c, TL_EREFUSED, "%s: %s/%s cannot adopt an "
		    "object", why, a->module, a->req);
	/* The provider's own credential: the object is its login. */
	if (dd->credential.handle_model && a->login == NULL)
		a->login = a->resource;
	/*
	 * The holders' password is tried as the login's: where the
	 * provider chooses the credential, or it is more than a login and
	 * a password (a key pair), there is none to try.
	 */
	if (a->password_in && !tl_drv_can(dd, TL_DRV_CAP_TRY_PASSWORD, why))
		return tl_refuse(c, TL_EINVAL, "--password-stdin: %s",
		    dd->credential.kind == TL_DRV_CRED_NONE ? "the grants "
		    "have no credential to try" : why);
	if (dd->credential.handle_model != a->secret_in)
		return tl_refuse(c, TL_EINVAL, "--secret-stdin: %s", a->secret_in ?
		    "this driver takes nothing but the object's name and login" :
		    "the driver takes the object over with a secret of the "
		    "provider's (an OAuth client's registration access token)");
	if (dd->credential.kind != TL_DRV_CRED_NONE && a->login == NULL)
		return tl_refuse(c, TL_EINVAL, "--login: the login %s's "
		    "consumers use today (its grants have a credential)",
		    a->resource);
	if (dd->credential.kind == TL_DRV_CRED_NONE && a->login != NULL)
		return tl_refuse(c, TL_EINVAL, "--login: %s grants have no "
		    "credential", dd->name);
	if ((rc = tl_grant_get(c->t, &c->p, a->grant, &g, NULL)) == 0) {
		if (g.adopt_version != 0)
			return tl_refuse(c, TL_EREFUSED, "%s adopts %s already",
			    a->grant, g.adopt_resource);
		if (g.version != 0 || g.adopt_from[0] != '\0' ||
		    (strcmp(g.state, TL_GRANT_REQUESTED) != 0 &&
		    strcmp(g.state, TL_GRANT_FAILED) != 0))
			return tl_refuse(c, TL_EREFUSED, "%s is %s (version "
			    "%llu): tally made its own object for it, and "
			    "adopts only before a grant's first provisioning",
			    a->grant, g.state, (unsigned long long)g.version);
		a->waiting = 1;
	} else if (rc != TL_ENOTFOUND)
		return rc;
	else {
		if ((rc = tl_key(k, "adp/%s", a->grant)) != 0)
			return rc;
		if (tl_rec_exists(c->t, c->p.grants, k))
			return tl_refuse(c, TL_EREFUSED, "%s adopts an object "
			    "already (tally log --stream grant/%s)", a->grant,
			    a->grant);
	}
	if ((rc = tl_grant_each(c->t, &c->p, taken_one, &ta)) != 0 && rc != 1)
		return rc;
	if (ta.by[0] == '\0' && (rc = tl_kv_scan(c->t, c->p.grants, "adp/", 4,
	    claim_one, &ta)) != 0 && rc != 1)
		return rc;
	if (ta.by[0] != '\0')
		return tl_refuse(c, TL_EREFUSED, "%s %s%s%s is adopted by grant "
		    "%s already (the object or the login): one object, one "
		    "grant", a->type, a->resource, a->login != NULL ?
		    ", login " : "", a->login != NULL ? a->login : "", ta.by);
	if ((rc = tl_key(stream, "grant/%s", a->grant)) != 0)
		return rc;
	tl_body_init(&b);
	tl_body_str(&b, TL_F_GRANT, a->grant);
	tl_body_str(&b, TL_F_TYPE, a->type);
	tl_body_str(&b, TL_F_RESOURCE, a->resource);
	if (a->login != NULL)
		tl_body_str(&b, TL_F_LOGIN, a->login);
	if (a->migrated != NULL)
		tl_body_str(&b, TL_F_MIGRATED, a->migrated);
	if ((a->secret_in || a->password_in) && (rc = seal_secret(c, a,
	    a->secret_in ? "secret" : "password", &b)) != 0) {
		tl_body_free(&b);
		return rc;
	}
	rc = tl_emit(c, TL_EV_GRANT_ADOPTED, stream, &b, NULL);
	tl_body_free(&b);
	return rc;
}

/* A name the provider will see: 1-63 printable bytes. */
static int
name_ok(const char *what, const char *s)
{
	const unsigned char *p;

	if (*s == '\0' || strlen(s) >= TL_DRV_NAME_MAX) {
		cli_errx("%s: 1 to %d bytes", what, TL_DRV_NAME_MAX - 1);
		return 0;
	}
	for (p = (const unsigned char *)s; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f) {
			cli_errx("%s: a control character (byte %zu)", what,
			    (size_t)(p - (const unsigned char *)s));
			return 0;
		}
	return 1;
}

int
cmd_adopt_object(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "node", required_argument, NULL, 'n' },
		{ "resource", required_argument, NULL, 'r' },
		{ "login", required_argument, NULL, 'l' },
		{ "migrated-through", required_argument, NULL, 'm' },
		{ "secret-stdin", no_argument, NULL, 's' },
		{ "password-stdin", no_argument, NULL, 'p' },
		{ 0 }
	};
	struct obj_arg a;
	const char *slash;
	int c, ex;

	memset(&a, 0, sizeof(a));
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			a.node = optarg;
			break;
		case 'r':
			a.resource = optarg;
			break;
		case 'l':
			a.login = optarg;
			break;
		case 'm':
			a.migrated = optarg;
			break;
		case 's':
			a.secret_in = 1;
			break;
		case 'p':
			a.password_in = 1;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (argc - optind != 1 || a.resource == NULL ||
	    (a.secret_in && a.password_in) ||
	    (slash = strchr(argv[optind], '/')) == NULL) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if ((size_t)(slash - argv[optind]) >= sizeof(a.module) ||
	    strlen(slash + 1) >= sizeof(a.req)) {
		cli_errx("%s: not MODULE/REQUIREMENT", argv[optind]);
		return TL_EXIT_USAGE;
	}
	memcpy(a.module, argv[optind], (size_t)(slash - argv[optind]));
	snprintf(a.req, sizeof(a.req), "%s", slash + 1);
	if (!tl_name_ok(a.module) || !tl_name_ok(a.req) ||
	    (a.node != NULL && !tl_name_ok(a.node))) {
		cli_errx("%s%s%s: module, requirement and node names are "
		    "[a-z0-9-]", argv[optind], a.node != NULL ? " --node " : "",
		    a.node != NULL ? a.node : "");
		return TL_EXIT_USAGE;
	}
	if (!name_ok("--resource", a.resource) ||
	    (a.login != NULL && !name_ok("--login", a.login)))
		return TL_EXIT_USAGE;
	snprintf(a.home, sizeof(a.home), "%s", cli->home);
	if ((a.secret_in || a.password_in) && cli_read_secret(a.secret_in ?
	    "the object's secret" : "the holders' password", a.secret,
	    a.secret_in ? sizeof(a.secret) : TL_PASSWORD_MAX + 2) != 0) {
		tl_secret_wipe(a.secret, sizeof(a.secret));
		cli_errx("--%s-stdin: no %s on standard input (one line)",
		    a.secret_in ? "secret" : "password", a.secret_in ?
		    "secret" : "password");
		return TL_EXIT_USAGE;
	}
	/* A byte more than a password of tally's was read: a longer one. */
	if (a.password_in && strlen(a.secret) > TL_PASSWORD_MAX) {
		tl_secret_wipe(a.secret, sizeof(a.secret));
		cli_errx("--password-stdin: longer than %d bytes (a password "
		    "of tally's is at most that)", TL_PASSWORD_MAX);
		return TL_EXIT_USAGE;
	}
	ex = cli_write(cli, do_adopt_object, &a, NULL);
	tl_secret_wipe(a.secret, sizeof(a.secret));
	if (ex != 0)
		return ex;
	if (cli->json) {
		cli_json_done(cli, json_pack("{s:s,s:s,s:s?,s:b}", "grant",
		    a.grant, "resource", a.resource, "login", a.login,
		    "waiting", a.waiting));
		return 0;
	}
	printf("%s adopts %s %s%s%s: tallyd takes it over when it provisions "
	    "the grant%s, then rotates to a credential of its own and "
	    "retires %s once every holder acknowledged it\n", a.grant, a.type,
	    a.resource, a.login != NULL ? ", login " : "",
	    a.login != NULL ? a.login : "", a.waiting ? "" :
	    " (tally assign makes it)", a.login != NULL ? a.login :
	    "nothing");
	return 0;
}
