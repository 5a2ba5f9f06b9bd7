/*
 * cmd_init.c - tally init: a new home with an empty log and a master key.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/secret.h"
#include "projections/proj.h"
#include "reactors/epoch.h"
#include "tally.h"

static const char usage[] =
"usage: tally init [--home DIR] [--standby [--leader-key FILE|HEX]]\n"
"\n"
"Creates the tally home (mode 0700): the event log in DIR/log and the\n"
"master key that encrypts every secret at rest in DIR/master.key (0600).\n"
"The log's first event, mesh.created, records the new mesh's id (16\n"
"random bytes, 32 hex digits: tally mesh shows it), which every mark,\n"
"fence and derived name on a provider carries.\n"
"Refuses to touch an existing log or key, and a directory that holds\n"
"anything else (dotfiles aside): DIR must be new, or empty.\n"
"\n"
"--standby makes a follower's home: an empty log that tallyd --follow\n"
"fills from the leader's replication stream, and no master key (the\n"
"leader's key is the one that decrypts the record) and no mesh id of its\n"
"own: the leader's mesh.created is the first event it copies.  To be\n"
"able to take over (tally promote), copy the leader's DIR/master.key here yourself,\n"
"out of band (scp over ssh, a sealed backup; never over the broker),\n"
"mode 0600, owned by the user tallyd runs as.  DIR/standby marks the home\n"
"until it is promoted.\n"
"\n"
"--leader-key gives the standby the leader's signing key (64 hex digits,\n"
"or a file holding them: what tally publish status prints on the\n"
"leader), kept in DIR/leader.key: tallyd --follow then checks every\n"
"message's signature without the master key, and keeps it with each\n"
"event for tally promote.  It is never taken from the stream.\n";

static int
mkdir_p(const char *path, mode_t mode)
{
	char buf[1024], *p;

	if (strlen(path) >= sizeof(buf))
		return ENAMETOOLONG;
	strcpy(buf, path);
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return errno;
		*p = '/';
	}
	if (mkdir(buf, mode) != 0 && errno != EEXIST)
		return errno;
	return 0;
}

/*
 * The first entry of dir that is neither a dotfile nor "log" (a home a
 * failed init left behind), into what; 0 when there is none or no dir.
 */
static int
foreign_entry(const char *dir, char *what, size_t cap)
{
	struct dirent *e;
	DIR *d;
	int found = 0;

	if ((d = opendir(dir)) == NULL)
		return 0;
	while (!found && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || strcmp(e->d_name, "log") == 0)
			continue;
		snprintf(what, cap, "%s", e->d_name);
		found = 1;
	}
	closedir(d);
	return found;
}

struct init_arg {
	int		 standby;
	char		 mesh[TL_MESH_LEN + 1];
	uint64_t	 seq;		/* mesh.created's */
};

static int
standby_standing(struct tl_txn *t, void *arg)
{
	(void)arg;
	return tl_ep_standing_put(t, 1, 0);
}

static int
make_tables(struct tl_txn *t, void *arg)
{
	struct init_arg *ia = arg;
	int rc;

	/* A leader's mesh is born here; a standby copies the leader's. */
	if (!ia->standby && (rc = tl_mesh_ensure(t, "cli:init", ia->mesh,
	    &ia->seq)) != 0)
		return rc;
	return tl_proj_catchup(t, 0);
}

int
cmd_init(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "standby", no_argument, NULL, 's' },
		{ "leader-key", required_argument, NULL, 'k' },
		{ 0 }
	};
	struct init_arg ia;
	struct tl_log *log;
	char keypath[1100], what[256], mark[1100];
	struct stat st;
	int c, rc, standby = 0;
	const char *lkey = NULL;
	uint8_t lpk[TL_SIGN_PUBLEN];
	FILE *f;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			standby = 1;
			break;
		case 'k':
			lkey = optarg;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc || (lkey != NULL && !standby)) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (lkey != NULL && tl_secret_leader_key_parse(lkey, lpk) != 0) {
		char why[160];

		if ((rc = tl_secret_leader_key_load(lkey, lpk, why)) != 0) {
			cli_errx("--leader-key %s: neither 64 hex digits nor a "
			    "file holding them (%s)", lkey, why);
			return TL_EXIT_USAGE;
		}
	}
	snprintf(keypath, sizeof(keypath), "%s/master.key", cli->home);
	if (stat(keypath, &st) == 0) {
		cli_errx("%s already holds a tally home (%s exists): refusing "
		    "to overwrite it", cli->home, keypath);
		return TL_EXIT_REFUSED;
	}
	if (foreign_entry(cli->home, what, sizeof(what))) {
		cli_errx("%s is not empty (it holds %s) and is not a tally "
		    "home: refusing to create one there (choose a new or "
		    "empty directory)", cli->home, what);
		return TL_EXIT_REFUSED;
	}
	if ((rc = mkdir_p(cli->home, 0700)) != 0 ||
	    (rc = mkdir_p(cli->logdir, 0700)) != 0) {
		cli_errx("cannot create %s: %s", cli->logdir, strerror(rc));
		return TL_EXIT_FAIL;
	}
	rc = tl_log_open(cli->logdir, TL_LOG_CREATE, &log);
	if (rc == TL_EEXIST) {
		cli_errx("a log already exists in %s: refusing to overwrite it",
		    cli->logdir);
		return TL_EXIT_REFUSED;
	}
	if (rc != 0)
		return cli_fail(cli, rc, "create the log");
	memset(&ia, 0, sizeof(ia));
	ia.standby = standby;
	rc = tl_log_write(log, make_tables, &ia);
	tl_log_close(log);
	if (rc != 0) {
		cli_errx("cannot create the projection tables: %s",
		    tl_strerror(rc));
		return TL_EXIT_FAIL;
	}
	if (standby) {
		/* The marker tallyd and tally promote read (tally.h). */
		snprintf(mark, sizeof(mark), "%s/" TL_STANDBY_FILE, cli->home);
		if ((f = fopen(mark, "wx")) == NULL ||
		    fputs("a standby: tallyd --follow fills this log; tally "
		    "promote makes it the leader\n", f) == EOF ||
		    fclose(f) != 0) {
			cli_errx("cannot create %s: %s", mark, strerror(errno));
			return TL_EXIT_FAIL;
		}
		/* After the marker: a home without it is never a standby. */
		if ((rc = tl_log_open(cli->logdir, 0, &log)) == 0) {
			rc = tl_log_write(log, standby_standing, NULL);
			tl_log_close(log);
		}
		if (rc != 0) {
			cli_errx("cannot record the standby's standing: %s",
			    tl_strerror(rc));
			return TL_EXIT_FAIL;
		}
		if (lkey != NULL) {
			char hexk[2 * TL_SIGN_PUBLEN + 2];
			size_t i;

			for (i = 0; i < TL_SIGN_PUBLEN; i++)
				snprintf(hexk + 2 * i, 3, "%02x", lpk[i]);
			hexk[2 * TL_SIGN_PUBLEN] = '\n';
			hexk[2 * TL_SIGN_PUBLEN + 1] = '\0';
			snprintf(mark, sizeof(mark), "%s/" TL_LEADER_KEY_FILE,
			    cli->home);
			if ((rc = tl_secret_write_file(mark, hexk,
			    strlen(hexk), 0644)) != 0) {
				cli_errx("cannot write %s: %s", mark,
				    tl_strerror(rc));
				return TL_EXIT_FAIL;
			}
		}
		if (cli->json)
			cli_json_done(cli, json_pack("{s:s,s:b,s:b}", "home",
			    cli->home, "created", 1, "standby", 1));
		else
			printf("initialised standby home %s (no master key%s)\n"
			    "follow the leader:  tallyd --home %s --follow "
			    "--amqp URL --stream NAME\n"
			    "before tally promote, copy the leader's "
			    "master.key to %s out of band (e.g. scp), mode "
			    "0600\n", cli->home, lkey != NULL ? "; the "
			    "leader's signing key in " TL_LEADER_KEY_FILE :
			    "", cli->home, keypath);
		return TL_EXIT_OK;
	}
	if ((rc = tl_secret_keygen(keypath)) != 0) {
		cli_errx("cannot create %s: %s", keypath, tl_strerror(rc));
		return TL_EXIT_FAIL;
	}
	if (cli->json) {
		if (ia.seq != 0 && (cli->appended = json_array()) != NULL)
			json_array_append_new(cli->appended, json_pack(
			    "{s:I,s:s,s:s}", "seq", (json_int_t)ia.seq, "type",
			    TL_EV_MESH_CREATED, "stream", TL_CP_STREAM));
		cli_json_done(cli, json_pack("{s:s,s:b,s:s}", "home",
		    cli->home, "created", 1, "mesh", ia.mesh));
	}
	else
		printf("initialised tally home %s (mesh %s)\n", cli->home,
		    ia.mesh);
	return TL_EXIT_OK;
}
