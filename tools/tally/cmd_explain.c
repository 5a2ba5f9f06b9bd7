/*
 * cmd_explain.c - tally explain: why each requirement is bound where it
 * is, with the event that decided it.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "projections/grant.h"
#include "projections/status.h"
#include "tally.h"

static const char usage[] =
"usage: tally explain MODULE [--at SEQ] [--json]\n"
"\n"
"For every requirement of MODULE and every instance of it: the\n"
"provider it is bound to and why (named in the manifest, tally bind,\n"
"co-located, only candidate), the sequence number, time and actor of\n"
"the event that decided it; or why it is not bound yet.\n";

static void
decided_by(struct tl_txn *t, uint64_t seq, json_t *into)
{
	struct tl_event ev;
	char ts[64];

	if (seq == 0 || tl_log_get(t, seq, &ev) != 0)
		return;
	tl_json_time(ev.ts, ts);
	json_object_set_new(into, "decided_by", json_pack("{s:I,s:s,s:s,s:s}",
	    "seq", (json_int_t)seq, "type", ev.type, "actor", ev.actor, "ts",
	    ts));
}

static const char *
str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

/*
 * The settings composed from each assignment's node inventory: the
 * value, how it was derived, and the operator's value that won.
 */
static void
print_derived(const json_t *out)
{
	const json_t *a, *d, *v;
	const char *key;
	size_t i;

	json_array_foreach(json_object_get(out, "assignments"), i, a) {
		if ((d = json_object_get(a, "derived")) == NULL)
			continue;
		printf("  derived from %s's inventory (seq %lld):\n",
		    str(a, "node"), json_integer_value(json_object_get(d,
		    "inventory")));
		if (json_object_size(json_object_get(d, "settings")) == 0)
			printf("    nothing yet: no inventory (tally node report "
			    "%s --inventory FILE.json)\n", str(a, "node"));
		json_object_foreach(json_object_get(d, "settings"), key, v) {
			const json_t *ov = json_object_get(json_object_get(d,
			    "overridden"), key);

			printf("    %s = %s (%s)", key, json_string_value(v),
			    json_string_value(json_object_get(
			    json_object_get(d, "from"), key)));
			if (ov != NULL)
				printf(": set on the assignment, which wins "
				    "over the derived %s", json_string_value(ov));
			putchar('\n');
		}
		json_object_foreach(json_object_get(d, "refused"), key, v)
			printf("    %s: derived %s, which the driver refuses (%s): "
			    "not handed to it, its default stands\n", key,
			    json_string_value(json_object_get(json_object_get(d,
			    "from"), key)), json_string_value(v));
	}
}

/* The declared parts, which each assignment installs, and what it skips. */
static void
print_parts(const json_t *out)
{
	const json_t *a, *x, *r;
	size_t i, j;

	if (json_object_get(out, "parts") == NULL)
		return;
	printf("  parts:");
	json_array_foreach(json_object_get(out, "parts"), i, x)
		printf("%s%s", i ? ", " : " ", json_string_value(x));
	putchar('\n');
	json_array_foreach(json_object_get(out, "assignments"), i, a) {
		printf("    on %s installs", str(a, "node"));
		json_array_foreach(json_object_get(a, "parts"), j, x)
			printf("%s%s", j ? ", " : " ", json_string_value(x));
		putchar('\n');
		json_array_foreach(json_object_get(a, "not_installed"), j, r)
			printf("      %s (part %s) is not provisioned there: the "
			    "part is not installed\n", str(r, "name"),
			    str(r, "part"));
	}
}

static int
show(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p, void *arg)
{
	const char *module = arg;
	json_t *st, *a, *r, *out;
	size_t i, j;
	int rc;

	if ((rc = tl_status_module(t, p, module, &st)) == TL_ENOTFOUND) {
		cli_errx("no module %s", module);
		return TL_EXIT_NOTFOUND;
	}
	if (rc != 0)
		return cli_fail(cli, rc, "explain");
	out = json_pack("{s:s,s:s,s:[]}", "module", module, "instances",
	    str(st, "instances"), "requirements");
	if (json_object_get(st, "parts") != NULL)
		json_object_set(out, "parts", json_object_get(st, "parts"));
	json_object_set_new(out, "assignments", json_array());
	json_array_foreach(json_object_get(st, "assignments"), i, a) {
		json_t *o = json_pack("{s:s}", "node", str(a, "node"));

		json_object_set(o, "parts", json_object_get(a, "parts") ?
		    json_object_get(a, "parts") : json_object_get(st, "parts"));
		if (json_object_get(a, "not_installed") != NULL)
			json_object_set(o, "not_installed", json_object_get(a,
			    "not_installed"));
		if (json_object_get(a, "derived") != NULL)
			json_object_set(o, "derived", json_object_get(a,
			    "derived"));
		json_array_append_new(json_object_get(out, "assignments"), o);
		json_array_foreach(json_object_get(a, "requirements"), j, r) {
			const json_t *seen, *e;
			size_t k;
			int dup = 0;

			/* A shared grant shows once, not once per node. */
			seen = json_object_get(out, "requirements");
			json_array_foreach(seen, k, e)
				if (*str(r, "grant") && !strcmp(str(e, "grant"),
				    str(r, "grant")))
					dup = 1;
				else if (!*str(r, "grant") &&
				    !strcmp(str(e, "name"), str(r, "name")))
					dup = 1;
			if (dup)
				continue;
			e = json_deep_copy(r);
			json_object_set_new((json_t *)e, "node",
			    json_string(str(a, "node")));
			decided_by(t, (uint64_t)json_integer_value(
			    json_object_get(r, "bound_seq")), (json_t *)e);
			json_array_append_new(json_object_get(out,
			    "requirements"), (json_t *)e);
		}
	}
	/* Embedded instances, per assignment (status.c). */
	json_object_set_new(out, "embedded", json_array());
	json_array_foreach(json_object_get(st, "assignments"), i, a)
		json_array_foreach(json_object_get(a, "embedded"), j, r) {
			json_t *e = json_deep_copy(r);

			json_object_set_new(e, "node", json_string(str(a,
			    "node")));
			json_array_append_new(json_object_get(out, "embedded"),
			    e);
		}
	if (json_array_size(json_object_get(st, "assignments")) == 0)
		json_object_set_new(out, "note", json_string("not assigned to "
		    "any node: nothing is bound until it is"));
	if (cli->json) {
		json_dumpf(out, stdout, JSON_COMPACT);
		putchar('\n');
	} else {
		printf("%s\n  instances: %s%s\n", module, str(out,
		    "instances"), strcmp(str(out, "instances"), "any") == 0 ?
		    " (the default: one per assignment, on any number of "
		    "nodes)" : "");
		if (json_object_get(out, "note"))
			printf("  %s\n", str(out, "note"));
		print_parts(out);
		print_derived(out);
		json_array_foreach(json_object_get(out, "requirements"), i, r) {
			const json_t *d = json_object_get(r, "decided_by");

			if (!strcmp(str(r, "kind"), "presence")) {
				printf("  %s: presence of %s: %s%s%s\n",
				    str(r, "name"), str(r, "target"),
				    str(r, "state"), *str(r, "reason") ?
				    " — " : "", str(r, "reason"));
				continue;
			}
			printf("  %s (grant %s%s%s):", str(r, "name"),
			    str(r, "grant"), *str(r, "part") ? ", part " : "",
			    str(r, "part"));
			if (*str(r, "provider"))
				printf(" bound to %s because %s%s%s%s",
				    str(r, "provider"), str(r, "bound_by"),
				    *str(r, "provider_expose") ? " (exposed " :
				    "", str(r, "provider_expose"),
				    *str(r, "provider_expose") ? ")" : "");
			else
				printf(" not bound: %s", str(r, "reason"));
			if (d != NULL)
				printf("\n      decided by seq %lld (%s, by %s, "
				    "%s)", json_integer_value(json_object_get(d,
				    "seq")), str(d, "type"), str(d, "actor"),
				    str(d, "ts"));
			if (*str(r, "grant_state"))
				printf("\n      grant %s", str(r,
				    "grant_state"));
			if (json_object_get(r, "question") != NULL)
				printf("\n      %s", str(r, "reason"));
			if (json_object_size(json_object_get(r, "params"))) {
				const char *pk;
				const json_t *pa, *pi;
				size_t n;
				int first = 1;

				printf("\n      declares:");
				json_object_foreach(json_object_get(r,
				    "params"), pk, pa) {
					printf("%s %s", first ? "" : ";", pk);
					first = 0;
					json_array_foreach(pa, n, pi)
						printf("%s%s", n ? ", " : " ",
						    json_string_value(pi));
				}
			}
			if (*str(r, "isolation_note"))
				printf("\n      note: %s", str(r,
				    "isolation_note"));
			putchar('\n');
		}
		json_array_foreach(json_object_get(out, "embedded"), i, r) {
			printf("  %s (embedded %s on %s, grant %s): %s", str(r,
			    "name"), str(r, "type"), str(r, "node"), str(r,
			    "grant"), str(r, "serves"));
			if (*str(r, "provider"))
				printf("\n      by tally assign --consolidate; "
				    "going back is another move (tally rebind %s "
				    "PROVIDER --migrate)", str(r, "grant"));
			else
				printf("\n      the module runs it; tally "
				    "generates its credential, nothing binds to "
				    "it (tally assign %s %s --consolidate %s "
				    "moves it onto the node's provider)",
				    str(out, "module"), str(r, "node"),
				    str(r, "name"));
			printf("\n      credential: grant %s", str(r,
			    "grant_state"));
			putchar('\n');
		}
	}
	json_decref(out);
	json_decref(st);
	return TL_EXIT_OK;
}

int
cmd_explain(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "at", required_argument, NULL, 'a' },
		{ 0 }
	};
	uint64_t at = 0;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (cli_parse_u64(optarg, &at) != 0 || at == 0) {
				cli_errx("--at: not a sequence number: %s",
				    optarg);
				return TL_EXIT_USAGE;
			}
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 1 != argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	return cli_read(cli, at, show, argv[optind]);
}
