/*
 * cmd_rotate.c - tally rotate: a new credential beside the old one,
 * delivered to every holder; tally ack: a holder runs with it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/vec.h"
#include "projections/grant.h"
#include "tally.h"

static const char rotate_usage[] =
"usage: tally rotate GRANT [--deadline DURATION]\n"
"       tally rotate --provider NODE/MODULE [--deadline DURATION]\n"
"       tally rotate --admin NODE/MODULE\n"
"\n"
"Starts a rotation: tallyd creates a new credential beside the old one\n"
"(both log in), delivers it to every holder of the grant on every node,\n"
"and retires the old one only when every holder has acknowledged the new\n"
"one (tally ack).  A holder that never acknowledges keeps a working\n"
"credential.  --deadline (e.g. 30m, 2h, 1d) retires the old credential\n"
"anyway once that long has passed, recorded as forced, with the holders\n"
"it cut off.  A rotation already running is never doubled: refused.\n"
"--admin rotates the provider's own admin credential: the new password\n"
"is recorded (encrypted) first, then set on the provider with the old\n"
"one, then becomes the assignment's secret.\n";

static const char ack_usage[] =
"usage: tally ack NODE MODULE VERSION\n"
"\n"
"Records that MODULE on NODE now runs with credential VERSION of the\n"
"grants it holds (what a node's host calls once the module restarted\n"
"with the delivered values).  The last acknowledgement lets the old\n"
"credential be retired.\n";

int	cli_parse_duration(const char *s, uint64_t *ns);

int
cli_parse_duration(const char *s, uint64_t *ns)
{
	char *end;
	unsigned long long v;
	uint64_t mul;

	/* strtoull takes "-1" (as ULLONG_MAX) and leading blanks: digits only. */
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	switch (*end) {
	case 's': case '\0':	mul = 1; break;
	case 'm':		mul = 60; break;
	case 'h':		mul = 3600; break;
	case 'd':		mul = 86400; break;
	default:		return -1;
	}
	if (*end != '\0' && end[1] != '\0')
		return -1;
	/*
	 * At most 100 years, the limit of max-credential-age: a product
	 * that wrapped would make a huge deadline a tiny one.
	 */
	if (v > 36500ull * 86400 / mul)
		return -1;
	*ns = (uint64_t)v * mul * 1000000000u;
	return 0;
}

struct rot_arg {
	const char	*grant;
	const char	*provider;
	const char	*admin;
	uint64_t	 deadline;
	size_t		 started;
};

struct each_arg {
	struct tl_ctx	*c;
	struct rot_arg	*ra;
	char		(*ids)[TL_GRANT_ID_MAX + 1];
	size_t		 n, cap;
};

static int
collect(const struct tl_grant *g, void *arg)
{
	struct each_arg *ea = arg;

	if (strcmp(g->state, TL_GRANT_PROVISIONED) != 0)
		return 0;
	if (tl_vec_grow(&ea->ids, &ea->cap, ea->n + 1,
	    sizeof(ea->ids[0])) != 0)
		return ENOMEM;
	snprintf(ea->ids[ea->n++], TL_GRANT_ID_MAX + 1, "%s", g->id);
	return 0;
}

static int
do_rotate(struct tl_ctx *c, void *arg)
{
	struct rot_arg *ra = arg;
	struct each_arg ea = { c, ra, NULL, 0, 0 };
	size_t i;
	int rc;

	ra->started = 0;
	if (ra->grant != NULL) {
		if ((rc = tl_dec_rotate(c, ra->grant, ra->deadline,
		    "operator")) == 0)
			ra->started = 1;
		return rc;
	}
	if ((rc = tl_grant_each_of_provider(c->t, &c->p, ra->provider,
	    collect, &ea)) != 0)
		goto out;
	for (i = 0; i < ea.n; i++) {
		c->cause = 0;
		c->have_corr = 0;
		rc = tl_dec_rotate(c, ea.ids[i], ra->deadline, "operator");
		if (rc == TL_EREFUSED) {
			cli_warnx("%s", c->why);
			c->why[0] = '\0';
			continue;
		}
		if (rc != 0)
			goto out;
		ra->started++;
	}
	rc = 0;
out:
	free(ea.ids);
	return rc;
}

static int
do_rotate_admin(struct tl_ctx *c, void *arg)
{
	return tl_dec_rotate_admin(c, arg);
}

int
cmd_rotate(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "deadline", required_argument, NULL, 'd' },
		{ "provider", required_argument, NULL, 'p' },
		{ "admin", required_argument, NULL, 'a' },
		{ 0 }
	};
	struct rot_arg ra = { NULL, NULL, NULL, 0, 0 };
	int c, ex;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (cli_parse_duration(optarg, &ra.deadline) != 0 ||
			    ra.deadline == 0) {
				cli_errx("--deadline %s: expected a duration "
				    "such as 90s, 30m, 2h, 1d (more than zero, "
				    "at most 36500d)", optarg);
				return TL_EXIT_USAGE;
			}
			break;
		case 'p':
			ra.provider = optarg;
			break;
		case 'a':
			ra.admin = optarg;
			break;
		CLI_COMMON_CASES(cli, rotate_usage);
		}
	}
	if (ra.admin != NULL) {
		if (optind != argc || ra.provider != NULL || ra.deadline) {
			fputs(rotate_usage, stderr);
			return TL_EXIT_USAGE;
		}
		ex = cli_write(cli, do_rotate_admin, (void *)ra.admin, NULL);
		if (ex == 0 && !cli->json)
			printf("rotation of %s's admin credential started: "
			    "tallyd sets the new password, then records it\n",
			    ra.admin);
		return ex;
	}
	if ((ra.provider == NULL) == (optind == argc) || optind + 1 < argc) {
		fputs(rotate_usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (optind < argc)
		ra.grant = argv[optind];
	ex = cli_write(cli, do_rotate, &ra, NULL);
	if (ex == 0 && !cli->json)
		printf("%zu rotation(s) started: tallyd issues and delivers "
		    "the new credential; tally ack NODE MODULE VERSION as each "
		    "holder switches\n", ra.started);
	return ex;
}

struct ack_arg {
	const char	*node, *module;
	uint64_t	 version;
	size_t		 acked;
};

static int
do_ack(struct tl_ctx *c, void *arg)
{
	struct ack_arg *a = arg;

	return tl_dec_ack(c, a->node, a->module, a->version, &a->acked);
}

int
cmd_ack(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	struct ack_arg a = { NULL, NULL, 0, 0 };
	int c, ex;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, ack_usage);
		}
	}
	if (optind + 3 != argc || cli_parse_u64(argv[optind + 2],
	    &a.version) != 0) {
		fputs(ack_usage, stderr);
		return TL_EXIT_USAGE;
	}
	a.node = argv[optind];
	a.module = argv[optind + 1];
	ex = cli_write(cli, do_ack, &a, NULL);
	if (ex == 0 && !cli->json)
		printf("%s on %s: %zu credential(s) acknowledged at v%llu\n",
		    a.module, a.node, a.acked, (unsigned long long)a.version);
	return ex;
}
