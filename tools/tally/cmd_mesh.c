/*
 * cmd_mesh.c - tally mesh: which mesh this home belongs to, who leads
 * it, and the replication stream that joins its leader and standbys.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "projections/events.h"
#include "reactors/epoch.h"
#include "tally.h"

static const char usage[] =
"usage: tally mesh [--home DIR] [--json]\n"
"\n"
"The mesh this home belongs to: its id (drawn by tally init, recorded in\n"
"the log's mesh.created; every mark, fence and derived name on a provider\n"
"carries it), the epoch in force and its leader (the first 16 bytes of\n"
"the chain hash of the event that started the epoch), whether this home\n"
"is the leader or a standby, and the replication stream it publishes\n"
"(leader: tally publish configure --stream) or follows (standby: tallyd\n"
"--follow).  How each provider is fenced is tally providers' and tally\n"
"status's.  --json prints one object: mesh, epoch, leader, standing, stream\n"
"{name, url, direction} or null.\n";

/* The last publisher configuration's stream and URL, if any. */
static int
published(struct tl_txn *t, char *name, size_t ncap, char *url, size_t ucap)
{
	struct tl_filter f = { 0 };
	struct tl_iter *it = NULL;
	struct tl_event ev;
	json_t *cfg;
	int rc;

	name[0] = url[0] = '\0';
	f.stream = TL_PUBLISHER_STREAM;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		/* The last configuration counts; disabled clears it. */
		name[0] = url[0] = '\0';
		if (strcmp(ev.type, TL_EV_PUBLISHER_CONFIGURED) != 0 ||
		    (cfg = tl_json_body(ev.body, ev.body_len)) == NULL)
			continue;
		if (json_string_length(json_object_get(cfg, "stream")) > 0) {
			snprintf(name, ncap, "%s", json_string_value(
			    json_object_get(cfg, "stream")));
			snprintf(url, ucap, "%s", json_string_value(
			    json_object_get(cfg, "url")));
		}
		json_decref(cfg);
	}
	tl_iter_close(it);
	return rc == TL_EEOF || rc == TL_ENOTFOUND ? 0 : rc;
}

static int
show(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p,
    void *arg)
{
	char mesh[TL_MESH_LEN + 1], leader[TL_MESH_LEN + 1];
	char name[256] = "", url[512] = "";
	struct tl_ep_follow fo;
	uint64_t epoch = 1;
	int standby = tl_ep_is_standby(cli->home), rc;
	json_t *doc, *st = NULL;

	(void)p;
	(void)arg;
	if ((rc = tl_mesh_get(t, mesh)) != 0 ||
	    (rc = tl_ep_leader(t, &epoch, leader)) != 0)
		return cli_fail(cli, rc, "read the log");
	if (standby) {
		if (tl_ep_follow_get(t, &fo) == 0) {
			snprintf(name, sizeof(name), "%s", fo.stream);
			snprintf(url, sizeof(url), "%s", fo.url);
		}
	} else if ((rc = published(t, name, sizeof(name), url,
	    sizeof(url))) != 0)
		return cli_fail(cli, rc, "read the log");
	if (cli->json) {
		if (name[0] != '\0')
			st = json_pack("{s:s,s:s,s:s}", "name", name, "url", url,
			    "direction", standby ? "follows" : "publishes");
		doc = json_pack("{s:s?,s:I,s:s?,s:s,s:o?}", "mesh",
		    mesh[0] ? mesh : NULL, "epoch", (json_int_t)epoch,
		    "leader", leader[0] ? leader : NULL, "standing",
		    standby ? "standby" : "leader", "stream",
		    st ? st : json_null());
		json_dumpf(doc, stdout, JSON_COMPACT);
		putchar('\n');
		json_decref(doc);
		return TL_EXIT_OK;
	}
	if (mesh[0] != '\0')
		printf("mesh %s\n", mesh);
	else if (standby)
		printf("mesh: not known yet (the leader's mesh.created is the "
		    "first event tallyd --follow copies)\n");
	else
		printf("mesh: none recorded (a home made before mesh ids: its "
		    "next write, or tallyd, records one)\n");
	printf("epoch %llu, leader %s\n", (unsigned long long)epoch,
	    leader[0] ? leader : "(none yet: an empty log)");
	printf("standing %s\n", standby ? "standby (never writes; tally promote "
	    "makes it the leader)" : "leader");
	if (name[0] != '\0')
		printf("%s stream %s at %s\n", standby ? "follows" :
		    "publishes", name, url[0] ? url : "(broker not known yet)");
	else
		printf("%s\n", standby ? "follows no stream yet (tallyd --follow "
		    "--stream NAME)" : "publishes no replication stream (tally "
		    "publish configure --stream NAME)");
	return TL_EXIT_OK;
}

int
cmd_mesh(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ 0 }
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	return cli_read(cli, 0, show, NULL);
}
