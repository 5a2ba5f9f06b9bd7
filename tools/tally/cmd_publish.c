/*
 * cmd_publish.c - tally publish: where tallyd publishes the record.
 *
 * The configuration is an event (publisher.configured on the stream
 * publisher/amqp), so it is recorded, replayable and published itself
 * (the password as a secret: encrypted under the master key, shown as
 * "<redacted>").  tallyd's publisher (reactors/publish.c) follows the
 * last one.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fields.h"
#include "core/json.h"
#include "core/kv.h"
#include "core/secret.h"
#include "core/amqp.h"
#include "projections/events.h"
#include "tally.h"

static const char usage[] =
"usage: tally publish configure --url amqp[s]://HOST[:PORT][/VHOST]\n"
"                               --user USER [--secret password]\n"
"                               [--exchange NAME] [--format json|msgpack]\n"
"                               [--tls] [--ca FILE] [--no-verify]\n"
"                               [--acks QUEUE | --no-acks] [--no-node-queues]\n"
"                               [--stream NAME]\n"
"       tally publish disable\n"
"       tally publish rewind SEQ\n"
"       tally publish status [--json]\n"
"\n"
"tallyd publishes every event to a topic exchange (default tally.events;\n"
"routing key: the event type) as a persistent message with publisher\n"
"confirms: message id = the event id, header \"seq\" = its sequence\n"
"number, body = the JSON of `tally tail --json` (or msgpack), secrets\n"
"redacted.  The checkpoint \"publisher\" moves only over what the broker\n"
"confirmed (at least once, in order; `tally stats` shows its lag).\n"
"Sealed credential deliveries also go to the durable queue\n"
"tally.node.NODE (the sealed bytes only), and the messages tally-node\n"
"sends on the acks queue (default tally.acks) become\n"
"credential.ack-offered, recorded as credential.acknowledged only when\n"
"the node's signature and proof verify (else security.ack-refused).\n"
"\n"
"--stream NAME also publishes every event to the broker's stream NAME\n"
"(x-queue-type: stream, declared durable): the whole envelope, the bytes\n"
"of the log (secrets in it stay ciphertext), headers \"seq\", \"hash\"\n"
"(its chain hash, hex) and \"mac\" (the chain hash's HMAC under a subkey\n"
"of the master key).  A standby follows it (tallyd --follow).\n"
"\n"
"--secret password reads the broker password from standard input; it is\n"
"stored encrypted with the master key.  amqps:// (or --tls) connects over\n"
"TLS, verifying the broker against --ca FILE (or the system's CAs)\n"
"unless --no-verify.  The configuration is itself an event\n"
"(publisher.configured): the last one counts.\n"
"\n"
"rewind SEQ has tallyd publish everything again from event SEQ (1: the\n"
"whole record), for a consumer that starts later and wants the history;\n"
"consumers see those events again, with the same message ids.\n";

struct rewind_arg {
	uint64_t	seq;
};

static int
rewind_cb(struct tl_txn *t, void *arg)
{
	struct rewind_arg *ra = arg;
	uint64_t cur = 0;

	if (tl_ckpt_get(t, "publisher", &cur) != 0 || cur < ra->seq)
		return 0;	/* not there yet: nothing to rewind */
	return tl_ckpt_set(t, "publisher", ra->seq);
}

static int
rewind_(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	struct rewind_arg ra;
	uint64_t seq;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 1 != argc || cli_parse_u64(argv[optind], &seq) != 0 ||
	    seq == 0) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if ((rc = cli_standby_refuse(cli)) != 0 ||
	    (rc = cli_open_log(cli, 0)) != 0)
		return rc;
	ra.seq = seq - 1;
	if ((rc = tl_log_write(cli->log, rewind_cb, &ra)) != 0)
		return cli_fail(cli, rc, "checkpoint");
	if (cli->json)
		cli_json_done(cli, json_pack("{s:I}", "from",
		    (json_int_t)seq));
	else
		printf("tallyd publishes again from event %llu\n",
		    (unsigned long long)seq);
	return TL_EXIT_OK;
}

struct pub_arg {
	struct tl_body	 b;
	const char	*type;
};

static int
do_append(struct tl_ctx *c, void *arg)
{
	struct pub_arg *pa = arg;

	return tl_emit(c, pa->type, TL_PUBLISHER_STREAM, &pa->b, NULL);
}

static int
configure(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "url", required_argument, NULL, 'u' },
		{ "user", required_argument, NULL, 'U' },
		{ "secret", required_argument, NULL, 'S' },
		{ "exchange", required_argument, NULL, 'x' },
		{ "format", required_argument, NULL, 'f' },
		{ "tls", no_argument, NULL, 't' },
		{ "ca", required_argument, NULL, 'c' },
		{ "no-verify", no_argument, NULL, 'n' },
		{ "acks", required_argument, NULL, 'a' },
		{ "no-acks", no_argument, NULL, 'A' },
		{ "no-node-queues", no_argument, NULL, 'N' },
		{ "stream", required_argument, NULL, 's' },
		{ 0 }
	};
	struct tl_amqp_conf conf;
	struct pub_arg pa;
	const char *url = NULL, *user = NULL, *exchange = "tally.events";
	const char *format = "json", *ca = NULL, *acks = "tally.acks";
	const char *stream = "";
	int c, tls = 0, verify = 1, nodeq = 1, secret = 0, ex;
	uint8_t *ct = NULL;
	size_t ctlen = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			url = optarg;
			break;
		case 'U':
			user = optarg;
			break;
		case 'S':
			if (strcmp(optarg, "password") != 0) {
				cli_errx("--secret: the only secret is "
				    "'password'");
				return TL_EXIT_USAGE;
			}
			secret = 1;
			break;
		case 'x':
			exchange = optarg;
			break;
		case 'f':
			format = optarg;
			break;
		case 't':
			tls = 1;
			break;
		case 'c':
			ca = optarg;
			break;
		case 'n':
			verify = 0;
			break;
		case 'a':
			acks = optarg;
			break;
		case 'A':
			acks = "";
			break;
		case 'N':
			nodeq = 0;
			break;
		case 's':
			stream = optarg;
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind != argc || url == NULL || user == NULL) {
		cli_errx("publish configure: --url and --user are required");
		return TL_EXIT_USAGE;
	}
	memset(&conf, 0, sizeof(conf));
	conf.tls = tls;
	if (tl_amqp_parse_url(url, &conf) != 0) {
		cli_errx("--url %s: expected amqp[s]://HOST[:PORT][/VHOST] "
		    "without credentials (the password is --secret password)",
		    url);
		return TL_EXIT_USAGE;
	}
	if (strcmp(format, "json") != 0 && strcmp(format, "msgpack") != 0) {
		cli_errx("--format: json or msgpack");
		return TL_EXIT_USAGE;
	}
	if (*exchange == '\0' || strlen(exchange) > 200 ||
	    strlen(acks) > 200 || strlen(stream) > 200 || strlen(user) >= sizeof(conf.user)) {
		cli_errx("exchange, queue and user names are 1-200 bytes");
		return TL_EXIT_USAGE;
	}
	if (secret) {
		struct tl_key key;
		char why[TL_WHY_MAX] = "", path[1200], pw[256];
		const char *ad = TL_PUBLISHER_STREAM ":password";
		size_t n;

		snprintf(path, sizeof(path), "%s/master.key", cli->home);
		if (tl_secret_load(path, &key, why) != 0) {
			cli_errx("master key: %s", why);
			return TL_EXIT_FAIL;
		}
		if (cli_read_secret("broker password", pw, sizeof(pw)) != 0) {
			cli_errx("--secret password: no value on standard "
			    "input");
			tl_secret_key_free(&key);
			return TL_EXIT_USAGE;
		}
		n = strlen(pw);
		if ((ct = malloc(n + TL_BOX_OVERHEAD)) == NULL) {
			tl_secret_wipe(pw, sizeof(pw));
			tl_secret_key_free(&key);
			return TL_EXIT_FAIL;
		}
		tl_secret_encrypt(&key, ad, strlen(ad), pw, n, ct);
		ctlen = n + TL_BOX_OVERHEAD;
		tl_secret_wipe(pw, sizeof(pw));
		tl_secret_key_free(&key);
	}
	tl_body_init(&pa.b);
	pa.type = TL_EV_PUBLISHER_CONFIGURED;
	tl_body_str(&pa.b, TL_F_URL, url);
	tl_body_str(&pa.b, TL_F_HOST, conf.host);
	tl_body_u64(&pa.b, TL_F_PORT, (uint64_t)(conf.port ? conf.port :
	    conf.tls ? 5671 : 5672));
	tl_body_str(&pa.b, TL_F_VHOST, conf.vhost[0] ? conf.vhost : "/");
	tl_body_str(&pa.b, TL_F_USER, user);
	if (ct != NULL)
		tl_body_secret(&pa.b, TL_F_PASSWORD, ct, ctlen);
	tl_body_str(&pa.b, TL_F_EXCHANGE, exchange);
	tl_body_str(&pa.b, TL_F_FORMAT, format);
	tl_body_bool(&pa.b, TL_F_TLS, conf.tls);
	if (ca != NULL)
		tl_body_str(&pa.b, TL_F_CA, ca);
	tl_body_bool(&pa.b, TL_F_VERIFY, verify);
	tl_body_bool(&pa.b, TL_F_NODE_QUEUES, nodeq);
	tl_body_str(&pa.b, TL_F_ACKS, acks);
	if (*stream != '\0')
		tl_body_str(&pa.b, TL_F_STREAM, stream);
	ex = cli_write(cli, do_append, &pa, NULL);
	tl_body_free(&pa.b);
	free(ct);
	if (ex == TL_EXIT_OK && !cli->json)
		printf("tallyd publishes to %s, exchange %s (%s)\n", url,
		    exchange, format);
	return ex;
}

static int
disable(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	struct pub_arg pa;
	int c, ex;

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
	tl_body_init(&pa.b);
	pa.type = TL_EV_PUBLISHER_DISABLED;
	ex = cli_write(cli, do_append, &pa, NULL);
	tl_body_free(&pa.b);
	if (ex == TL_EXIT_OK && !cli->json)
		printf("publishing disabled\n");
	return ex;
}

/*
 * What reactors/publish.c recorded of the publisher's condition (the
 * scratch table "publisher", key "state"), times as RFC 3339; NULL when
 * it never failed.
 */
static json_t *
pub_state(struct tl_txn *t)
{
	const void *v;
	size_t n;
	tl_kv kv;
	json_t *j;
	const char *k[] = { "since", "at" };
	size_t i;

	if (tl_kv_open_scratch(t, "publisher", &kv) != 0 ||
	    tl_kv_get(t, kv, "state", 5, &v, &n) != 0 ||
	    (j = tl_json_body(v, n)) == NULL)
		return NULL;
	for (i = 0; i < 2; i++) {
		char ts[64];

		tl_json_time((uint64_t)json_integer_value(json_object_get(j,
		    k[i])), ts);
		json_object_set_new(j, k[i], json_string(ts));
	}
	return j;
}

static int
status(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	struct tl_filter f = { 0 };
	struct tl_txn *t = NULL;
	struct tl_iter *it = NULL;
	struct tl_event ev;
	json_t *cfg = NULL, *out, *state;
	struct tl_key key = { NULL };
	char kpath[1200], kwhy[TL_WHY_MAX], pkhex[2 * TL_SIGN_PUBLEN + 1] = "";
	uint64_t ck = 0, last = 0, cfgseq = 0;
	int c, rc, have_ck;

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
	if ((rc = cli_open_log(cli, TL_LOG_RDONLY)) != 0)
		return rc;
	if ((rc = tl_log_begin(cli->log, TL_TXN_RDONLY, &t)) != 0)
		return cli_fail(cli, rc, "read the log");
	f.stream = TL_PUBLISHER_STREAM;
	if ((rc = tl_iter_open(t, &f, &it)) != 0) {
		tl_log_abort(t);
		return cli_fail(cli, rc, "read the log");
	}
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		json_decref(cfg);
		cfg = NULL;
		cfgseq = ev.seq;
		if (strcmp(ev.type, TL_EV_PUBLISHER_CONFIGURED) == 0)
			cfg = tl_json_body(ev.body, ev.body_len);
	}
	tl_iter_close(it);
	have_ck = tl_ckpt_get(t, "publisher", &ck) == 0;
	tl_log_last(t, &last, NULL);
	state = pub_state(t);
	tl_log_abort(t);
	if (rc != TL_EEOF) {
		json_decref(cfg);
		return cli_fail(cli, rc, "read the log");
	}
	out = json_pack("{s:b,s:I,s:I,s:I}", "enabled", cfg != NULL,
	    "configured_seq", (json_int_t)cfgseq, "checkpoint",
	    (json_int_t)ck, "lag", (json_int_t)(last > ck ? last - ck : 0));
	if (cfg != NULL)
		json_object_set(out, "config", cfg);
	if (state != NULL)
		json_object_set_new(out, "state", state);
	/* What a standby checks the stream's signatures with. */
	snprintf(kpath, sizeof(kpath), "%s/master.key", cli->home);
	if (tl_secret_load(kpath, &key, kwhy) == 0) {
		uint8_t pk[TL_SIGN_PUBLEN];
		size_t i;

		tl_secret_cp_keypair(&key, pk, NULL);
		tl_secret_key_free(&key);
		for (i = 0; i < TL_SIGN_PUBLEN; i++)
			snprintf(pkhex + 2 * i, 3, "%02x", pk[i]);
		json_object_set_new(out, "signing_key", json_string(pkhex));
	}
	if (cli->json) {
		json_dumpf(out, stdout, JSON_COMPACT | JSON_SORT_KEYS);
		putchar('\n');
	} else if (cfg == NULL)
		printf("publishing: %s\n", cfgseq ? "disabled" :
		    "not configured (tally publish configure)");
	else {
		json_t *v = json_object_get(cfg, "acks");

		printf("publishing to %s as %s, exchange %s (%s)%s",
		    json_string_value(json_object_get(cfg, "url")),
		    json_string_value(json_object_get(cfg, "user")),
		    json_string_value(json_object_get(cfg, "exchange")),
		    json_string_value(json_object_get(cfg, "format")),
		    json_is_true(json_object_get(cfg, "node_queues")) ?
		    ", node queues tally.node.NODE" : "");
		if (json_string_length(v))
			printf(", acks from %s", json_string_value(v));
		printf("\nconfigured at event %llu; ", (unsigned long long)cfgseq);
		if (have_ck)
			printf("published up to seq %llu, lag %llu\n",
			    (unsigned long long)ck, (unsigned long long)
			    (last > ck ? last - ck : 0));
		else
			printf("nothing published yet (is tallyd running?)\n");
		if (state != NULL && json_is_true(json_object_get(state,
		    "failing")))
			printf("failing since %s: %s\n",
			    json_string_value(json_object_get(state, "since")),
			    json_string_value(json_object_get(state, "error")));
		else if (state != NULL)
			printf("last failure %s: %s; publishing again since "
			    "%s\n",
			    json_string_value(json_object_get(state, "since")),
			    json_string_value(json_object_get(state, "error")),
			    json_string_value(json_object_get(state, "at")));
		if (pkhex[0] != '\0' && json_string_length(json_object_get(cfg,
		    "stream")))
			printf("the stream is signed with %s (a standby without "
			    "the master key: tally init --standby --leader-key "
			    "%s)\n", pkhex, pkhex);
	}
	json_decref(out);
	json_decref(cfg);
	return TL_EXIT_OK;
}

int
cmd_publish(struct tl_cli *cli, int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "configure") == 0)
		return configure(cli, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "disable") == 0)
		return disable(cli, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "status") == 0)
		return status(cli, argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "rewind") == 0)
		return rewind_(cli, argc - 1, argv + 1);
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0)) {
		fputs(usage, stdout);
		return TL_EXIT_OK;
	}
	fputs(usage, stderr);
	return TL_EXIT_USAGE;
}
