/*
 * cmd_env.c - tally env: an assignment's environment, for its node.
 *
 * What a node's host runs to start a module: the values delivered to
 * the assignment, opened with the node's own secret key from the sealed
 * credential.delivered events (the host needs no master key).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/delivery.h"
#include "core/secret.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "tally.h"

static const char usage[] =
"usage: tally env NODE MODULE --node-key FILE [--files DIR] [--json]\n"
"\n"
"Prints the environment of MODULE's assignment on NODE (KEY=VALUE\n"
"lines), opened from the sealed deliveries with the node's secret key\n"
"(the FILE written by tally node add --key-out).  The values include the\n"
"credential: the output is for the node's host, not for a terminal.\n"
"--files DIR: writes the files the deliveries carry (a provider's CA)\n"
"into DIR (mode 0600, never over another file) and resolves the values\n"
"that name them to DIR/NAME; without it such a value is refused.\n";

struct env_arg {
	const char	*node;
	const char	*module;
	uint8_t		 sk[TL_SECKEY_LEN];
	uint8_t		 pk[TL_PUBKEY_LEN];
	json_t		*vars;
	/* --files DIR: held open, its absolute path; the files written. */
	const char	*files;
	int		 filesfd;
	char		 filesabs[PATH_MAX];
	json_t		*written;
	int		 missing;
	int		 bad;	/* deliveries or values refused */
	int		 json;
};

/*
 * One file of a delivery as DIR/NAME (--files): created O_EXCL, never
 * through a link; one already there with these bytes (a run before, a
 * CA two grants share) is kept.  0, else cli_errx said why: -1.
 */
static int
put_file(struct env_arg *ea, const struct tl_dlv_file *f)
{
	char name[TL_DLV_FILE_NAME_MAX + 1];
	struct stat st;
	uint8_t *old;
	size_t off = 0;
	ssize_t n;
	int fd, same;

	memcpy(name, f->name, f->name_len);
	name[f->name_len] = '\0';
	if (json_object_get(ea->written, name) != NULL)
		return 0;
	if ((fd = openat(ea->filesfd, name, O_WRONLY | O_CREAT | O_EXCL |
	    O_NOFOLLOW | O_CLOEXEC, 0600)) >= 0) {
		while (off < f->content_len && (n = write(fd, f->content + off,
		    f->content_len - off)) > 0)
			off += (size_t)n;
		if (off < f->content_len || fsync(fd) != 0) {
			cli_errx("%s/%s: %s", ea->files, name, strerror(errno));
			close(fd);
			unlinkat(ea->filesfd, name, 0);
			return -1;
		}
		close(fd);
		json_object_set_new(ea->written, name, json_true());
		return 0;
	}
	if (errno != EEXIST) {
		cli_errx("%s/%s: %s", ea->files, name, strerror(errno));
		return -1;
	}
	/* There already: the same bytes (a run before), or refused. */
	same = 0;
	if ((fd = openat(ea->filesfd, name, O_RDONLY | O_NOFOLLOW |
	    O_CLOEXEC | O_NONBLOCK)) >= 0 && fstat(fd, &st) == 0 &&
	    S_ISREG(st.st_mode) && (size_t)st.st_size == f->content_len &&
	    (old = malloc(f->content_len + 1)) != NULL) {
		same = read(fd, old, f->content_len + 1) ==
		    (ssize_t)f->content_len && memcmp(old, f->content,
		    f->content_len) == 0;
		free(old);
	}
	if (fd >= 0)
		close(fd);
	if (!same) {
		cli_errx("%s/%s exists and is not this file: not written "
		    "over", ea->files, name);
		return -1;
	}
	json_object_set_new(ea->written, name, json_true());
	return 0;
}

/* Opens the latest delivery of g to this holder. */
static int
open_delivery(struct tl_txn *t, const struct tl_grant *g, struct env_arg *ea)
{
	struct tl_filter f = { 0 };
	struct tl_iter *it;
	struct tl_event ev;
	char stream[TL_STREAM_MAX + 1], holder[140], want[140];
	uint8_t *best = NULL, *plain = NULL;
	size_t bestlen = 0;
	int rc;

	snprintf(stream, sizeof(stream), "grant/%s", g->id);
	snprintf(want, sizeof(want), "%s@%s", g->module, ea->node);
	f.stream = stream;
	/* credential.delivered, and credential.withdrawn that undoes it. */
	f.type = "credential.[dw]*";
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		struct tl_bview v;
		struct tl_bnode n;
		const void *ct;
		size_t len;

		if (tl_bview_open(&v, ev.body, ev.body_len) != 0)
			continue;
		if (strcmp(ev.type, TL_EV_CRED_WITHDRAWN) == 0) {
			/* Withdrawn from it: nothing until delivered again. */
			if (tl_bn_getstr(v.root, "holder", holder,
			    sizeof(holder)) == 0 && strcmp(holder, want) == 0) {
				free(best);
				best = NULL;
				bestlen = 0;
			}
		} else if (tl_bn_getstr(v.root, "holder", holder,
		    sizeof(holder)) == 0 && strcmp(holder, want) == 0 &&
		    tl_bn_get(v.root, "sealed", &n) == 0 &&
		    tl_bn_secret(n, &ct, &len) == 0) {
			uint8_t *nb = realloc(best, len);

			if (nb != NULL) {
				best = nb;
				memcpy(best, ct, len);
				bestlen = len;
			}
		}
		tl_bview_close(&v);
	}
	tl_iter_close(it);
	if (rc != TL_EEOF) {
		free(best);
		return rc;
	}
	if (best == NULL) {
		ea->missing++;
		return 0;
	}
	rc = TL_ESECRET;
	if (bestlen > TL_SEAL_OVERHEAD &&
	    (plain = tl_secret_alloc(bestlen - TL_SEAL_OVERHEAD)) != NULL &&
	    tl_secret_unseal(ea->pk, ea->sk, best, bestlen, plain) == 0) {
		struct tl_dlv d;
		size_t i;

		/* Framed by length (core/delivery.h): no value is a header. */
		if ((rc = tl_dlv_decode(plain, bestlen - TL_SEAL_OVERHEAD,
		    &d)) != 0) {
			cli_errx("the delivery of %s to %s is malformed: "
			    "ignored", g->id, want);
			ea->bad++;
			rc = 0;
		}
		for (i = 0; rc == 0 && i < d.nfiles && ea->files != NULL; i++)
			if (put_file(ea, &d.files[i]) != 0)
				ea->bad++;
		for (i = 0; rc == 0 && i < d.nvars; i++) {
			const struct tl_dlv_var *x = &d.vars[i];
			char name[TL_DLV_NAME_MAX + 1];
			const char *why;
			size_t vl, dl = strlen(ea->filesabs);
			char *v;

			/* Defaults are tally-node's (the module's env:). */
			if (x->is_default)
				continue;
			memcpy(name, x->name, x->name_len);
			name[x->name_len] = '\0';
			if (x->kind == TL_DLV_NOT_AFTER) {
				cli_errx("%s: variable %s is when a certificate "
				    "made for a key on the node expires: only "
				    "its tally-node knows; left out", g->id,
				    name);
				ea->bad++;
				continue;
			}
			if (x->kind == TL_DLV_REFS && ea->files == NULL) {
				cli_errx("%s: variable %s names a file the "
				    "delivery carries (%.*s): give --files DIR "
				    "to write it there and the path in the "
				    "value; left out", g->id, name,
				    (int)x->refs[0].file_len, x->refs[0].file);
				ea->bad++;
				continue;
			}
			vl = tl_dlv_resolved_len(x, dl);
			if ((v = tl_secret_alloc(vl + 1)) == NULL) {
				rc = ENOMEM;
				break;
			}
			tl_dlv_resolve(x, ea->filesabs, dl, v);
			json_object_set_new(ea->vars, name, json_stringn(v,
			    vl));
			/* NULL when not UTF-8: not even JSON can carry it. */
			if (json_object_get(ea->vars, name) == NULL ||
			    (!ea->json && tl_dlv_env_check(x->name,
			    x->name_len, v, vl, &why) != 0)) {
				if (json_object_get(ea->vars, name) == NULL)
					why = "the value is not UTF-8";
				cli_errx("%s: variable %s cannot be written as "
				    "an env line (%s): left out", g->id, name,
				    why);
				json_object_del(ea->vars, name);
				ea->bad++;
			}
			tl_secret_free(v);
		}
		tl_dlv_free(&d);
	}
	tl_secret_free(plain);
	free(best);
	return rc;
}

struct collect {
	struct tl_txn	*t;
	struct env_arg	*ea;
	int		 rc;
};

static int
one_grant(const struct tl_grant *g, void *arg)
{
	struct collect *c = arg;

	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0)
		return 0;
	if (g->node[0] != '\0' && strcmp(g->node, c->ea->node) != 0)
		return 0;
	return open_delivery(c->t, g, c->ea);
}

static int
show(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p, void *arg)
{
	struct env_arg *ea = arg;
	struct collect c = { t, ea, 0 };
	struct tl_rec r;
	char key[TL_KEY_MAX];
	const char *k;
	json_t *v;
	int rc;

	if (tl_key(key, "n/%s", ea->node) != 0 ||
	    tl_rec_get(t, p->graph, key, &r) != 0) {
		cli_errx("no node %s", ea->node);
		return TL_EXIT_NOTFOUND;
	}
	{
		struct tl_bnode n;
		const void *pk;
		size_t len;

		if (tl_bn_get(r.m, "pubkey", &n) != 0 ||
		    tl_bn_bin(n, &pk, &len) != 0 || len != TL_PUBKEY_LEN) {
			tl_rec_close(&r);
			cli_errx("node %s has no public key", ea->node);
			return TL_EXIT_FAIL;
		}
		memcpy(ea->pk, pk, TL_PUBKEY_LEN);
	}
	tl_rec_close(&r);
	if (tl_key(key, "a/%s@%s", ea->module, ea->node) != 0 ||
	    !tl_rec_exists(t, p->graph, key)) {
		cli_errx("%s is not assigned to %s", ea->module, ea->node);
		return TL_EXIT_NOTFOUND;
	}
	ea->vars = json_object();
	ea->json = cli->json;
	rc = tl_grant_each_of_module(t, p, ea->module, one_grant, &c);
	if (rc == TL_ESECRET) {
		cli_errx("cannot open the deliveries with this key: is it %s's "
		    "key?", ea->node);
		json_decref(ea->vars);
		return TL_EXIT_FAIL;
	}
	if (rc != 0) {
		json_decref(ea->vars);
		return cli_fail(cli, rc, "env");
	}
	if (cli->json) {
		json_dumpf(ea->vars, stdout, JSON_COMPACT | JSON_SORT_KEYS);
		putchar('\n');
	} else
		json_object_foreach(ea->vars, k, v) {
			size_t kl = strlen(k), vl = json_string_length(v);
			char *line = tl_secret_alloc(tl_dlv_env_size(kl, vl));

			if (line == NULL) {
				json_decref(ea->vars);
				return cli_fail(cli, ENOMEM, "env");
			}
			/* Quoted as systemd's EnvironmentFile= reads it. */
			fwrite(line, 1, tl_dlv_env_format(k, kl,
			    json_string_value(v), vl, line), stdout);
			tl_secret_free(line);
		}
	json_decref(ea->vars);
	if (ea->bad > 0)
		return TL_EXIT_FAIL;
	if (ea->missing > 0) {
		cli_warnx("%d grant(s) not delivered to %s yet", ea->missing,
		    ea->node);
		return TL_EXIT_UNHEALTHY;
	}
	return TL_EXIT_OK;
}

int
cmd_env(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "node-key", required_argument, NULL, 'k' },
		{ "files", required_argument, NULL, 'f' },
		{ 0 }
	};
	struct env_arg ea;
	const char *keyfile = NULL;
	ssize_t n;
	int c, fd, ex;

	memset(&ea, 0, sizeof(ea));
	ea.filesfd = -1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			keyfile = optarg;
			break;
		case 'f':
			ea.files = optarg;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 2 != argc || keyfile == NULL) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	ea.node = argv[optind];
	ea.module = argv[optind + 1];
	if ((fd = open(keyfile, O_RDONLY | O_CLOEXEC)) < 0) {
		cli_errx("%s: cannot open the node key", keyfile);
		return TL_EXIT_FAIL;
	}
	n = read(fd, ea.sk, sizeof(ea.sk));
	close(fd);
	if (n != (ssize_t)sizeof(ea.sk)) {
		cli_errx("%s is not a node key", keyfile);
		tl_secret_wipe(ea.sk, sizeof(ea.sk));
		return TL_EXIT_FAIL;
	}
	if (ea.files != NULL) {
		/* The path goes unquoted into URIs: tally-node's rule. */
		if ((mkdir(ea.files, 0700) != 0 && errno != EEXIST) ||
		    (ea.filesfd = open(ea.files, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) < 0 ||
		    realpath(ea.files, ea.filesabs) == NULL) {
			cli_errx("%s: %s", ea.files, strerror(errno));
			ex = TL_EXIT_FAIL;
			goto out;
		}
		if (!tl_dlv_path_ok(ea.filesabs, strlen(ea.filesabs))) {
			cli_errx("%s: a path with a byte outside "
			    "[A-Za-z0-9/._-] cannot go unquoted into a URI or "
			    "an env file", ea.filesabs);
			ex = TL_EXIT_USAGE;
			goto out;
		}
	}
	ea.written = json_object();
	ex = cli_read(cli, 0, show, &ea);
out:
	json_decref(ea.written);
	if (ea.filesfd >= 0)
		close(ea.filesfd);
	tl_secret_wipe(ea.sk, sizeof(ea.sk));
	return ex;
}
