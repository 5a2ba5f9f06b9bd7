/*
 * cmd_adopt.c - tally adopt: take over, on purpose and on the record,
 * the provider objects another mesh made (a home lost and rebuilt).
 *
 * Appends mesh.adopted {from, grants[{grant, resource}]} on the stream
 * control-plane.  Each grant named there keeps for good the scheme-4
 * names the old mesh gave it (keyed by that mesh's id, which is public:
 * reactors/names.c), and its driver calls may take over objects marked
 * by that mesh until the grant is provisioned or repaired again
 * (projections/grants.c: adopt_from, adopt_pending).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"
#include "drivers/decl.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "reactors/epoch.h"
#include "tally.h"

static const char usage[] =
"usage: tally adopt --from-mesh ID (--all | GRANT...)\n"
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
"grant id (the resource name taken over is printed and recorded).  Only\n"
"grants not yet provisioned here can adopt (nothing of this mesh's own\n"
"would be left behind); grants of drivers whose names are keyed by the\n"
"lost mesh's master key (drivers that declare keyed_names) cannot, nor\n"
"embedded ones.  --all adopts every grant that can and lists the others;\n"
"named grants that cannot are refused, and nothing is appended.\n"
"\n"
"Recorded as mesh.adopted {from, grants[{grant, resource}]}.  tallyd\n"
"then provisions each grant into the old objects, which every driver\n"
"re-marks with this mesh's id; from then on they are this mesh's.\n"
"Refused on a standby (exit 7), for this mesh's own id, and for an ID\n"
"that is not 32 hex digits (exit 4).\n";

struct took {
	char	 grant[TL_GRANT_ID_MAX + 1];
	char	 type[64];
	char	 resource[TL_DRV_NAME_MAX];
	char	 why[TL_DRV_WHY_MAX + 16];	/* skipped: why */
};

struct adopt_arg {
	const char	 *from;
	int		  all;
	char		**grants;
	size_t		  ngrants;
	struct took	 *took, *skip;
	size_t		  ntook, nskip;
};

/* Whether g can adopt; the resource it takes over, else why not. */
static int
adoptable(const struct adopt_arg *a, const struct tl_grant *g,
    struct took *t)
{
	const struct tl_drv_decl *dd = tl_drv_decl_for_type(g->type);
	struct tl_drv_name_in in;
	struct tl_drv_names out;
	char why[TL_DRV_WHY_MAX] = "";

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
	else if (tl_drv_naming(dd) != TL_DRV_NAMING)
		snprintf(t->why, sizeof(t->why), "%s names are keyed by the "
		    "lost mesh's master key: they cannot be computed here",
		    dd->name);
	if (t->why[0] != '\0')
		return 0;
	memset(&in, 0, sizeof(in));
	in.grant = g->id;
	in.resource = g->resource;
	in.node = g->node;
	in.recorded = "";
	in.version = 1;
	in.scheme = TL_DRV_NAMING_MESH;
	in.mesh = a->from;
	memset(&out, 0, sizeof(out));
	if (tl_drv_name(dd, &in, &out, why) != 0 || out.resource[0] == '\0') {
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
	tl_body_str(&b, "from", a->from);
	tl_body_arr(&b, "grants");
	for (i = 0; i < a->ntook; i++) {
		tl_body_map(&b, NULL);
		tl_body_str(&b, "grant", a->took[i].grant);
		tl_body_str(&b, "resource", a->took[i].resource);
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
			json_array_append_new(gs, json_pack("{s:s,s:s,s:s}",
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
		printf("  %s (%s): takes over %s\n", a->took[i].grant,
		    a->took[i].type, a->took[i].resource);
	for (i = 0; i < a->nskip; i++)
		printf("  not %s: %s\n", a->skip[i].grant, a->skip[i].why);
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
	ex = cli_write(cli, do_adopt, &a, NULL);
	if (ex == 0)
		report(cli, &a);
	free(a.took);
	free(a.skip);
	return ex;
}
