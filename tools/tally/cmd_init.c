/*
 * cmd_init.c - tally init: a new home with an empty log and a master key.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cconf.h"
#include "core/secret.h"
#include "projections/proj.h"
#include "reactors/mesh.h"
#include "reactors/epoch.h"
#include "tally.h"

static const char usage[] =
"usage: tally init [--home DIR] [--standby [--leader-key FILE|HEX]]\n"
"       tally init [--home DIR] [--standby --mesh ID] --etcd URL[,URL...]\n"
"                  [--etcd-ca FILE] [--etcd-cert FILE --etcd-key FILE]\n"
"                  [--lease-ttl S] [--keep N] [--from-snapshot FILE]\n"
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
"event for tally promote.  It is never taken from the stream.\n"
"\n"
"--etcd makes a cluster's home (DIR/cluster.json): its record is\n"
"committed on etcd first (the v3 JSON gateway at each URL, https with\n"
"--etcd-ca and a client certificate), tallyd campaigns for the leader\n"
"key and takes over by itself (docs/standby.md).  Without --standby it\n"
"founds the mesh (its first tallyd pushes the home's record to etcd);\n"
"with --standby --mesh ID (tally mesh on the founder prints it) the\n"
"home starts empty and its tallyd applies the record from etcd.  Every\n"
"home of a cluster needs the mesh's master key: copy it out of band.\n"
"--lease-ttl (default 10 s) is the leader's lease; --keep (default\n"
"10000) the events etcd keeps below every follower.\n"
"--from-snapshot FILE starts the home's log from a peer's snapshot\n"
"(tally snapshot): a follower that fell behind the tail etcd holds.\n";

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

/* An absolute path of a file that exists, into out; 0 (said) if not. */
static int
abs_path(const char *p, char *out, size_t cap)
{
	char *r = realpath(p, NULL);

	if (r == NULL || strlen(r) >= cap) {
		cli_errx("%s: %s", p, r == NULL ? strerror(errno) :
		    "path too long");
		free(r);
		return 0;
	}
	snprintf(out, cap, "%s", r);
	free(r);
	return 1;
}

/* Copies the snapshot into DIR/log/data.mdb: a new file, 0600. */
static int
copy_snapshot(const char *from, const char *logdir)
{
	char to[1200], buf[65536];
	ssize_t r;
	int in, out, rc = 0;

	snprintf(to, sizeof(to), "%s/data.mdb", logdir);
	if ((in = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return errno;
	if ((out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0) {
		rc = errno;
		close(in);
		return rc;
	}
	while ((r = read(in, buf, sizeof(buf))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || write(out, buf, (size_t)r) != r) {
			rc = errno ? errno : EIO;
			break;
		}
	}
	if (rc == 0 && fsync(out) != 0)
		rc = errno;
	close(in);
	if (close(out) != 0 && rc == 0)
		rc = errno;
	if (rc != 0)
		unlink(to);
	return rc;
}

/*
 * A cluster's home: the founder's log with its mesh and master key, or
 * a follower's empty log (or a peer's snapshot), and cluster.json last:
 * a home without it is not a cluster's, and nothing of the founder's
 * first events needed etcd.
 */
static int
init_cluster(struct tl_cli *cli, struct tl_cconf *cc, int standby,
    const char *snap)
{
	struct init_arg ia;
	struct tl_log *log;
	char keypath[1100], what[256], mesh[TL_MESH_LEN + 1] = "";
	int rc;

	snprintf(keypath, sizeof(keypath), "%s/master.key", cli->home);
	if (access(keypath, F_OK) == 0 || foreign_entry(cli->home, what,
	    sizeof(what))) {
		cli_errx("%s is not a new or empty directory: refusing to "
		    "make a home there", cli->home);
		return TL_EXIT_REFUSED;
	}
	if ((rc = mkdir_p(cli->home, 0700)) != 0 ||
	    (rc = mkdir_p(cli->logdir, 0700)) != 0) {
		cli_errx("cannot create %s: %s", cli->logdir, strerror(rc));
		return TL_EXIT_FAIL;
	}
	if (snap != NULL) {
		if ((rc = copy_snapshot(snap, cli->logdir)) != 0) {
			cli_errx("cannot copy %s into %s: %s", snap,
			    cli->logdir, strerror(rc));
			return rc == EEXIST ? TL_EXIT_REFUSED : TL_EXIT_FAIL;
		}
		if ((rc = tl_log_open(cli->logdir, 0, &log)) == 0) {
			rc = tl_mesh_load(log, mesh);
			tl_log_close(log);
		}
		if (rc != 0 || !tl_mesh_ok(mesh)) {
			cli_errx("%s is not a snapshot of a tally home with a "
			    "mesh id (%s)", snap, rc ? tl_strerror(rc) :
			    "none");
			return TL_EXIT_REFUSED;
		}
		if (cc->mesh[0] != '\0' && strcmp(cc->mesh, mesh) != 0) {
			cli_errx("%s is mesh %s's, not %s's", snap, mesh,
			    cc->mesh);
			return TL_EXIT_REFUSED;
		}
		snprintf(cc->mesh, sizeof(cc->mesh), "%s", mesh);
	} else {
		if ((rc = tl_log_open(cli->logdir, TL_LOG_CREATE, &log)) != 0)
			return cli_fail(cli, rc, "create the log");
		memset(&ia, 0, sizeof(ia));
		ia.standby = standby;
		rc = tl_log_write(log, make_tables, &ia);
		tl_log_close(log);
		if (rc != 0)
			return cli_fail(cli, rc, "create the projection tables");
		if (!standby)
			snprintf(cc->mesh, sizeof(cc->mesh), "%s", ia.mesh);
	}
	if (!standby && snap == NULL &&
	    (rc = tl_secret_keygen(keypath)) != 0) {
		cli_errx("cannot create %s: %s", keypath, tl_strerror(rc));
		return TL_EXIT_FAIL;
	}
	if ((rc = tl_cconf_write(cli->home, cc)) != 0)
		return cli_fail(cli, rc, "write " TL_CLUSTER_FILE);
	if (cli->json)
		cli_json_done(cli, json_pack("{s:s,s:b,s:s,s:s,s:b}", "home",
		    cli->home, "created", 1, "mesh", cc->mesh,
		    "control_plane", cc->id, "founder", !standby && !snap));
	else
		printf("initialised cluster home %s (mesh %s, control plane "
		    "%s)\n%s", cli->home, cc->mesh, cc->id, !standby &&
		    !snap ? "start tallyd: it pushes this home's record to "
		    "etcd and leads\n" : "copy the mesh's master.key here "
		    "(mode 0600, out of band), then start tallyd: it follows "
		    "and takes over by itself\n");
	return TL_EXIT_OK;
}

int
cmd_init(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "standby", no_argument, NULL, 's' },
		{ "leader-key", required_argument, NULL, 'k' },
		{ "etcd", required_argument, NULL, 'E' },
		{ "etcd-ca", required_argument, NULL, 'A' },
		{ "etcd-cert", required_argument, NULL, 'C' },
		{ "etcd-key", required_argument, NULL, 'K' },
		{ "lease-ttl", required_argument, NULL, 'T' },
		{ "keep", required_argument, NULL, 'P' },
		{ "mesh", required_argument, NULL, 'M' },
		{ "from-snapshot", required_argument, NULL, 'S' },
		{ 0 }
	};
	struct tl_cconf cc;
	const char *etcd = NULL, *cmesh = NULL, *snap = NULL;
	char cwhy[TL_WHY_MAX];
	uint64_t u;
	struct init_arg ia;
	struct tl_log *log;
	char keypath[1100], what[256], mark[1100];
	struct stat st;
	int c, rc, standby = 0;
	const char *lkey = NULL;
	uint8_t lpk[TL_SIGN_PUBLEN];
	FILE *f;

	tl_cconf_init(&cc);
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			standby = 1;
			break;
		case 'k':
			lkey = optarg;
			break;
		case 'E':
			etcd = optarg;
			break;
		case 'A':
		case 'C':
		case 'K':
			if (!abs_path(optarg, c == 'A' ? cc.ca : c == 'C' ?
			    cc.cert : cc.key, sizeof(cc.ca)))
				return TL_EXIT_USAGE;
			break;
		case 'T':
			if (cli_parse_u64(optarg, &u) != 0 || u > 300) {
				cli_errx("--lease-ttl %s: seconds, 2 to 300",
				    optarg);
				return TL_EXIT_USAGE;
			}
			cc.ttl = (unsigned)u;
			/* The margin scales with a short lease. */
			if (cc.margin_ms * 2 >= cc.ttl * 1000u)
				cc.margin_ms = cc.ttl * 1000u / 3;
			break;
		case 'P':
			if (cli_parse_u64(optarg, &cc.keep) != 0) {
				cli_errx("--keep %s: a count of events", optarg);
				return TL_EXIT_USAGE;
			}
			break;
		case 'M':
			cmesh = optarg;
			break;
		case 'S':
			snap = optarg;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc || (lkey != NULL && !standby) ||
	    (etcd == NULL && (cmesh != NULL || cc.ca[0] || cc.cert[0] ||
	    snap != NULL)) || (lkey != NULL && etcd != NULL)) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (etcd != NULL) {
		snprintf(cc.endpoints, sizeof(cc.endpoints), "%s", etcd);
		if (tl_cconf_check(&cc, cwhy) != 0) {
			cli_errx("%s", cwhy);
			return TL_EXIT_USAGE;
		}
		if (!!cc.cert[0] != !!cc.key[0]) {
			cli_errx("--etcd-cert and --etcd-key go together");
			return TL_EXIT_USAGE;
		}
		if (standby && snap == NULL && (cmesh == NULL ||
		    !tl_mesh_ok(cmesh))) {
			cli_errx("--standby --etcd needs --mesh ID, the mesh's "
			    "32 hex digits (tally mesh on its founding home "
			    "prints it)");
			return TL_EXIT_USAGE;
		}
		if (cmesh != NULL)
			snprintf(cc.mesh, sizeof(cc.mesh), "%s", cmesh);
		return init_cluster(cli, &cc, standby, snap);
	}
	if (lkey != NULL && tl_secret_leader_key_parse(lkey, lpk) != 0) {
		char why[TL_WHY_MAX];

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
