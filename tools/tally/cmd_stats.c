/*
 * cmd_stats.c - tally stats: the log's size, content and readers' lag.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "tally.h"

static const char usage[] =
"usage: tally stats [--home DIR] [--json]\n"
"\n"
"Prints the number of events, the bytes the log uses, the count per\n"
"event type, the last sequence number, and every checkpoint (reactors,\n"
"publishers, subscribers) with its lag behind the head.\n";

struct ckarg {
	json_t		*arr;
	uint64_t	 last;
};

static int
add_ckpt(const char *name, uint64_t seq, void *arg)
{
	struct ckarg *a = arg;

	return json_array_append_new(a->arr, json_pack("{s:s,s:I,s:I}",
	    "name", name, "seq", (json_int_t)seq, "lag",
	    (json_int_t)(a->last > seq ? a->last - seq : 0))) == 0 ? 0 : ENOMEM;
}

int
cmd_stats(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { CLI_COMMON_OPTS, { 0 } };
	struct tl_txn *t = NULL;
	struct tl_iter *it = NULL;
	struct tl_event ev;
	struct ckarg ck;
	json_t *types, *out = NULL;
	uint64_t n = 0, last = 0, used = 0, map = 0;
	int c, rc, ex = TL_EXIT_OK;

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
	types = json_object();
	if ((rc = tl_iter_open(t, NULL, &it)) != 0) {
		ex = cli_fail(cli, rc, "read the log");
		goto out;
	}
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		json_t *cnt = json_object_get(types, ev.type);

		n++;
		if (cnt != NULL)
			json_integer_set(cnt, json_integer_value(cnt) + 1);
		else
			json_object_set_new(types, ev.type, json_integer(1));
	}
	if (rc != TL_EEOF) {
		cli_errx("event %llu: %s (run `tally verify`)",
		    (unsigned long long)tl_iter_errseq(it), tl_strerror(rc));
		ex = cli_exit_for(rc);
		goto out;
	}
	tl_log_last(t, &last, NULL);
	tl_log_size(cli->log, &used, &map);
	ck.arr = json_array();
	ck.last = last;
	tl_ckpt_each(t, add_ckpt, &ck);
	out = json_pack("{s:I,s:I,s:I,s:I,s:o,s:o}", "events", (json_int_t)n,
	    "last_seq", (json_int_t)last, "bytes", (json_int_t)used,
	    "map_bytes", (json_int_t)map, "types", json_incref(types),
	    "checkpoints", ck.arr);
	if (cli->json) {
		json_dumpf(out, stdout, JSON_COMPACT | JSON_SORT_KEYS);
		putchar('\n');
	} else {
		const char *k;
		json_t *v;
		size_t i;

		printf("events      %llu\nlast seq    %llu\n"
		    "bytes       %llu (map %llu)\n", (unsigned long long)n,
		    (unsigned long long)last, (unsigned long long)used,
		    (unsigned long long)map);
		printf("types:\n");
		json_object_foreach(types, k, v)
			printf("  %-28s %lld\n", k, json_integer_value(v));
		printf("checkpoints:\n");
		if (json_array_size(ck.arr) == 0)
			printf("  (none)\n");
		json_array_foreach(ck.arr, i, v)
			printf("  %-28s seq %lld  lag %lld\n",
			    json_string_value(json_object_get(v, "name")),
			    json_integer_value(json_object_get(v, "seq")),
			    json_integer_value(json_object_get(v, "lag")));
	}
out:
	json_decref(out);
	json_decref(types);
	tl_iter_close(it);
	tl_log_abort(t);
	return ex;
}
