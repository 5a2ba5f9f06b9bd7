/*
 * cmd_adopt.c - tally adopt: take over, on purpose and on the record,
 * the provider objects another mesh made (a home lost and rebuilt).
 *
 * Appends mesh.adopted {from, grants[{grant, resource [owner login]}]}
 * on the stream control-plane.  Each grant named there keeps for good
 * the scheme-4 names the old mesh gave it (keyed by that mesh's id,
 * which is public: reactors/names.c), or, for a driver whose names are
 * keyed by the old mesh's master key, the names its objects were found
 * under by their mark (tallyd --find-adopt: the CLI opens no provider
 * session), recorded with owner and login; and its driver calls may
 * take over objects marked by that mesh until the grant is provisioned
 * or repaired again (projections/grants.c: adopt_from, adopt_pending,
 * adopt_login).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"
#include "core/fields.h"
#include "drivers/decl.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "reactors/epoch.h"
#include "tally.h"

static const char usage[] =
"usage: tally adopt --from-mesh ID (--all | GRANT...)\n"
"       tally adopt MODULE/REQUIREMENT [--node NODE] --resource NAME ...\n"
"                   (an object tally did not make: tally adopt --resource\n"
"                   x --help)\n"
"\n"
"Takes over the provider objects another mesh made for these grants: the\n"
"disaster-recovery step after a home was lost and rebuilt (tally init,\n"
"the same manifests and assignments), before tallyd provisions them.\n"
"ID is the lost mesh's id (32 hex digits: tally mesh showed it; it is in\n"
"every mark and in the fence files and rows the providers keep).  Every\n"
"driver refuses an object another mesh marked, so without this command\n"
"the rebuilt home makes new objects beside the old ones and never\n"
"touches them.\n"
"\n"
"Each grant adopted takes the names the lost mesh gave it: scheme-4\n"
"names are keyed by the mesh id, so they are computed from ID and the\n"
"grant id.  Names keyed by the lost mesh's master key (drivers that\n"
"declare keyed_names) cannot be computed: tallyd --find-adopt looks on\n"
"the grant's provider for the objects whose mark names ID and the grant,\n"
"and the grant takes those (their names are recorded; a grant whose\n"
"objects are not found cannot adopt).  The resource taken over is\n"
"printed.  Only grants not yet provisioned here can adopt (nothing of\n"
"this mesh's own would be left behind), not embedded ones.  --all\n"
"adopts every grant that can and lists the others; named grants that\n"
"cannot are refused, and nothing is appended.\n"
"\n"
"Recorded as mesh.adopted {from, grants[{grant, resource [owner login]}]}\n"
"(owner and login: the names found by their mark).  tallyd\n"
"then provisions each grant into the old objects, which every driver\n"
"re-marks with this mesh's id; from then on they are this mesh's.\n"
"Refused on a standby (exit 7), for this mesh's own id, and for an ID\n"
"that is not 32 hex digits (exit 4).\n";

struct took {
	char	 grant[TL_GRANT_ID_MAX + 1];
	char	 type[64];
	char	 resource[TL_DRV_NAME_MAX];
	/* Found by their mark (login not ""): recorded beside resource. */
	char	 owner[TL_DRV_NAME_MAX];
	char	 login[TL_DRV_NAME_MAX];
	char	 what[TL_WHY_MAX];		/* what was found */
	char	 why[TL_WHY_MAX + 16];	/* skipped: why */
};

/* What tallyd --find-adopt said of one grant. */
struct found {
	char	 grant[TL_GRANT_ID_MAX + 1];
	struct tl_drv_names n;
	char	 what[TL_WHY_MAX];
	int	 ok;
};

struct adopt_arg {
	const char	 *from;
	int		  all;
	char		**grants;
	size_t		  ngrants;
	struct took	 *took, *skip;
	size_t		  ntook, nskip;
	/* The grants whose objects are looked for by their mark. */
	char		**look;
	size_t		  nlook;
	struct found	 *found;
	size_t		  nfound;
	int		  bad_line;
};

/* Whether g's objects must be found by their mark (keyed names). */
static int
by_mark(const struct tl_grant *g)
{
	const struct tl_drv_decl *dd = tl_drv_decl_for_type(g->type);

	return dd != NULL && tl_drv_naming(dd) != TL_DRV_NAMING &&
	    tl_drv_can(dd, TL_DRV_CAP_FIND_MARKED, NULL);
}

static const struct found *
found_of(const struct adopt_arg *a, const char *grant)
{
	size_t i;

	for (i = 0; i < a->nfound; i++)
		if (strcmp(a->found[i].grant, grant) == 0)
			return &a->found[i];
	return NULL;
}

/* The grant's objects by their mark, as tallyd --find-adopt found them. */
static void
adopt_found(const struct adopt_arg *a, const struct tl_grant *g,
    struct took *t)
{
	const struct found *f = found_of(a, g->id);

	if (f == NULL) {
		snprintf(t->why, sizeof(t->why), "its objects were not looked "
		    "for on its provider");
		return;
	}
	if (!f->ok) {
		snprintf(t->why, sizeof(t->why), "%s", f->what);
		return;
	}
	snprintf(t->resource, sizeof(t->resource), "%s", f->n.resource);
	snprintf(t->owner, sizeof(t->owner), "%s", f->n.owner);
	snprintf(t->login, sizeof(t->login), "%s", f->n.login);
	snprintf(t->what, sizeof(t->what), "%s", f->what);
}

/*
 * Whether g can adopt as far as this home's record says (its provider
 * not asked): 1, else 0 with t->why.
 */
static int
may_adopt(const struct adopt_arg *a, const struct tl_grant *g,
    struct took *t)
{
	const struct tl_drv_decl *dd = tl_drv_decl_for_type(g->type);

	memset(t, 0, sizeof(*t));
	snprintf(t->grant, sizeof(t->grant), "%s", g->id);
	snprintf(t->type, sizeof(t->type), "%s", g->type);
	if (strchr(g->id, '~') != NULL)
		snprintf(t->why, sizeof(t->why), "the old resource of a move");
	else if (TL_GRANT_IS_EMBEDDED(g))
		snprintf(t->why, sizeof(t->why), "embedded: nothing on a "
		    "provider");
	else if (strcmp(g->adopt_from, a->from) == 0)
		snprintf(t->why, sizeof(t->why), "adopted from this mesh "
		    "already");
	else if (g->version != 0 || (strcmp(g->state, TL_GRANT_REQUESTED) != 0 &&
	    strcmp(g->state, TL_GRANT_FAILED) != 0))
		snprintf(t->why, sizeof(t->why), "%s here already (version "
		    "%llu): its objects are this mesh's", g->state,
		    (unsigned long long)g->version);
	else if (dd == NULL)
		snprintf(t->why, sizeof(t->why), "no driver for type %s",
		    g->type);
	else if (tl_drv_naming(dd) != TL_DRV_NAMING && !by_mark(g))
		snprintf(t->why, sizeof(t->why), "%s names are keyed by the "
		    "lost mesh's master key, and the driver cannot find its "
		    "objects by their mark", dd->name);
	return t->why[0] == '\0';
}

/* Whether g can adopt; the resource it takes over, else why not. */
static int
adoptable(const struct adopt_arg *a, const struct tl_grant *g,
    struct took *t)
{
	struct tl_drv_name_in in;
	struct tl_drv_names out;
	char why[TL_WHY_MAX] = "";

	if (!may_adopt(a, g, t))
		return 0;
	if (by_mark(g)) {
		adopt_found(a, g, t);
		return t->why[0] == '\0';
	}
	memset(&in, 0, sizeof(in));
	in.grant = g->id;
	in.resource = g->resource;
	in.node = g->node;
	in.recorded = "";
	in.version = 1;
	in.scheme = TL_DRV_NAMING_MESH;
	in.mesh = a->from;
	memset(&out, 0, sizeof(out));
	if (tl_drv_name(tl_drv_decl_for_type(g->type), &in, &out, why) != 0 ||
	    out.resource[0] == '\0') {
		snprintf(t->why, sizeof(t->why), "no name: %s", why);
		return 0;
	}
	snprintf(t->resource, sizeof(t->resource), "%s", out.resource);
	return 1;
}

static int
note(struct adopt_arg *a, const struct tl_grant *g)
{
	struct took t;
	int ok = adoptable(a, g, &t);
	struct took **list = ok ? &a->took : &a->skip;
	size_t *n = ok ? &a->ntook : &a->nskip;
	void *p;

	if ((p = realloc(*list, (*n + 1) * sizeof(**list))) == NULL)
		return ENOMEM;
	*list = p;
	(*list)[(*n)++] = t;
	return 0;
}

static int
each(const struct tl_grant *g, void *arg)
{
	return note(arg, g);
}

static int
do_adopt(struct tl_ctx *c, void *arg)
{
	struct adopt_arg *a = arg;
	struct tl_grant g;
	struct tl_body b;
	char mine[TL_MESH_LEN + 1];
	size_t i;
	int rc;

	/* tl_log_write may run this again: start over. */
	a->ntook = a->nskip = 0;
	if ((rc = tl_mesh_get(c->t, mine)) != 0)
		return rc;
	if (strcmp(mine, a->from) == 0)
		return tl_refuse(c, TL_EINVAL, "%s is this mesh's own id: "
		    "there is nothing to adopt from it", a->from);
	if (a->all) {
		if ((rc = tl_grant_each(c->t, &c->p, each, a)) != 0)
			return rc;
	} else
		for (i = 0; i < a->ngrants; i++) {
			if ((rc = tl_grant_find(c, a->grants[i], &g)) != 0)
				return rc;
			if ((rc = note(a, &g)) != 0)
				return rc;
			if (a->nskip > 0)
				return tl_refuse(c, TL_EREFUSED, "%s cannot "
				    "adopt: %s; nothing adopted", g.id,
				    a->skip[a->nskip - 1].why);
		}
	if (a->ntook == 0)
		return tl_refuse(c, TL_EREFUSED, "no grant here can adopt from "
		    "mesh %s (%zu looked at; tally adopt --help says which "
		    "can): nothing adopted", a->from, a->nskip);
	tl_body_init(&b);
	tl_body_str(&b, TL_F_FROM, a->from);
	tl_body_arr(&b, TL_F_GRANTS);
	for (i = 0; i < a->ntook; i++) {
		tl_body_map(&b, NULL);
		tl_body_str(&b, TL_F_GRANT, a->took[i].grant);
		tl_body_str(&b, TL_F_RESOURCE, a->took[i].resource);
		if (a->took[i].login[0] != '\0') {
			tl_body_str(&b, TL_F_OWNER, a->took[i].owner);
			tl_body_str(&b, TL_F_LOGIN, a->took[i].login);
		}
		tl_body_end(&b);
	}
	tl_body_end(&b);
	rc = tl_emit(c, TL_EV_MESH_ADOPTED, TL_CP_STREAM, &b, NULL);
	tl_body_free(&b);
	return rc;
}

static void
report(struct tl_cli *cli, const struct adopt_arg *a)
{
	json_t *doc, *gs, *ss;
	size_t i;

	if (cli->json) {
		gs = json_array();
		ss = json_array();
		for (i = 0; i < a->ntook; i++)
			json_array_append_new(gs, a->took[i].login[0] != '\0' ?
			    json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "grant",
			    a->took[i].grant, "type", a->took[i].type,
			    "resource", a->took[i].resource, "owner",
			    a->took[i].owner, "login", a->took[i].login,
			    "found", a->took[i].what) :
			    json_pack("{s:s,s:s,s:s}",
			    "grant", a->took[i].grant, "type", a->took[i].type,
			    "resource", a->took[i].resource));
		for (i = 0; i < a->nskip; i++)
			json_array_append_new(ss, json_pack("{s:s,s:s}",
			    "grant", a->skip[i].grant, "why", a->skip[i].why));
		doc = json_pack("{s:s,s:o,s:o}", "from", a->from, "grants", gs,
		    "skipped", ss);
		cli_json_done(cli, doc);
		return;
	}
	printf("adopted from mesh %s: %zu grant(s); tallyd provisions each "
	    "into the object named here and re-marks it as this mesh's\n",
	    a->from, a->ntook);
	for (i = 0; i < a->ntook; i++)
		printf("  %s (%s): takes over %s%s%s\n", a->took[i].grant,
		    a->took[i].type, a->took[i].resource,
		    a->took[i].what[0] ? ": " : "", a->took[i].what);
	for (i = 0; i < a->nskip; i++)
		printf("  not %s: %s\n", a->skip[i].grant, a->skip[i].why);
}

/* A grant whose objects tallyd --find-adopt looks for, noted. */
static int
look_for(struct adopt_arg *a, const struct tl_grant *g)
{
	struct took t;
	char **p;

	/* Refused by the record: do_adopt says why, later. */
	if (!by_mark(g) || !may_adopt(a, g, &t))
		return 0;
	if ((p = realloc(a->look, (a->nlook + 1) * sizeof(*p))) == NULL)
		return ENOMEM;
	a->look = p;
	if ((a->look[a->nlook] = strdup(g->id)) == NULL)
		return ENOMEM;
	a->nlook++;
	return 0;
}

static int
look_each(const struct tl_grant *g, void *arg)
{
	return look_for(arg, g);
}

static int
to_look(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p,
    void *arg)
{
	struct adopt_arg *a = arg;
	struct tl_grant g;
	char mine[TL_MESH_LEN + 1];
	size_t i;
	int rc;

	/* Its own id is refused by do_adopt: nothing to look for. */
	if ((rc = tl_mesh_get(t, mine)) != 0)
		return cli_fail(cli, rc, "adopt");
	if (strcmp(mine, a->from) == 0)
		return 0;
	if (a->all)
		rc = tl_grant_each(t, p, look_each, a);
	else
		for (i = 0, rc = 0; rc == 0 && i < a->ngrants; i++)
			if (tl_grant_get(t, p, a->grants[i], &g, NULL) == 0)
				rc = look_for(a, &g);
	return rc != 0 ? cli_fail(cli, rc, "adopt") : 0;
}

/* One line of tallyd --find-adopt. */
static void
found_line(const char *s, void *arg)
{
	struct adopt_arg *a = arg;
	struct found *f, *p;
	const char *g, *r, *o, *l, *w, *e;
	json_t *j;

	if ((j = json_loads(s, 0, NULL)) == NULL ||
	    (g = json_string_value(json_object_get(j, "grant"))) == NULL ||
	    strlen(g) > TL_GRANT_ID_MAX ||
	    (p = realloc(a->found, (a->nfound + 1) * sizeof(*p))) == NULL) {
		a->bad_line = 1;
		json_decref(j);
		return;
	}
	a->found = p;
	f = &a->found[a->nfound];
	memset(f, 0, sizeof(*f));
	snprintf(f->grant, sizeof(f->grant), "%s", g);
	r = json_string_value(json_object_get(j, "resource"));
	o = json_string_value(json_object_get(j, "owner"));
	l = json_string_value(json_object_get(j, "login"));
	w = json_string_value(json_object_get(j, "what"));
	e = json_string_value(json_object_get(j, "error"));
	if (r != NULL && l != NULL && *l != '\0' && strlen(r) <
	    TL_DRV_NAME_MAX && strlen(l) < TL_DRV_NAME_MAX && (o == NULL ||
	    strlen(o) < TL_DRV_NAME_MAX)) {
		f->ok = 1;
		snprintf(f->n.resource, sizeof(f->n.resource), "%s", r);
		snprintf(f->n.owner, sizeof(f->n.owner), "%s", o != NULL ? o :
		    "");
		snprintf(f->n.login, sizeof(f->n.login), "%s", l);
		snprintf(f->what, sizeof(f->what), "%s", w != NULL ? w : "");
	} else
		snprintf(f->what, sizeof(f->what), "not found by its mark: %s",
		    e != NULL ? e : "tallyd --find-adopt said nothing of it");
	a->nfound++;
	json_decref(j);
}

/*
 * The objects of the grants whose names are keyed, found by their mark
 * by tallyd --find-adopt (the CLI opens no provider session): an exit
 * code.
 */
static int
find_marked(struct tl_cli *cli, struct adopt_arg *a)
{
	/* --find-adopt MESH and the grants within cli_tallyd's 16. */
	enum { LOOK_MAX = 12 };
	const char *args[LOOK_MAX + 3];
	size_t i, n = 0;
	int ex;

	if ((ex = cli_read(cli, 0, to_look, a)) != 0 || a->nlook == 0)
		return ex;
	args[n++] = "--find-adopt";
	args[n++] = a->from;
	/* More than fit: every grant of such a driver is looked at. */
	for (i = 0; a->nlook <= LOOK_MAX && i < a->nlook; i++)
		args[n++] = a->look[i];
	args[n] = NULL;
	if ((ex = cli_tallyd(cli, args, NULL, 0, found_line, a)) != 0)
		return ex;
	if (a->bad_line) {
		cli_errx("tallyd --find-adopt said what is not a grant's line");
		return TL_EXIT_FAIL;
	}
	return 0;
}

int
cmd_adopt(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "from-mesh", required_argument, NULL, 'f' },
		{ "all", no_argument, NULL, 'a' },
		{ 0 }
	};
	struct adopt_arg a;
	int c, ex;

	/* tally adopt MODULE/REQ --resource NAME: cmd_adopt_object.c. */
	for (c = 1; c < argc; c++)
		if (strncmp(argv[c], "--resource", 10) == 0 &&
		    (argv[c][10] == '\0' || argv[c][10] == '='))
			return cmd_adopt_object(cli, argc, argv);
	memset(&a, 0, sizeof(a));
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			a.from = optarg;
			break;
		case 'a':
			a.all = 1;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	a.grants = argv + optind;
	a.ngrants = (size_t)(argc - optind);
	if (a.from == NULL || (a.all == (a.ngrants > 0))) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (!tl_mesh_ok(a.from)) {
		cli_errx("--from-mesh %s: a mesh id is 32 lowercase hex digits "
		    "(tally mesh shows one)", a.from);
		return TL_EXIT_REFUSED;
	}
	/* Refused before tallyd is asked anything. */
	if ((ex = cli_standby_refuse(cli)) != 0)
		return ex;
	if ((ex = find_marked(cli, &a)) == 0)
		ex = cli_write(cli, do_adopt, &a, NULL);
	if (ex == 0)
		report(cli, &a);
	free(a.took);
	free(a.skip);
	while (a.nlook > 0)
		free(a.look[--a.nlook]);
	free(a.look);
	free(a.found);
	return ex;
}
