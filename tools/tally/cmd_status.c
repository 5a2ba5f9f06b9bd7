/*
 * cmd_status.c - tally status: what each assignment is waiting for.
 */
#include <getopt.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "drivers/decl.h"
#include "drivers/util.h"
#include "projections/events.h"
#include "projections/grant.h"
#include "projections/record.h"
#include "projections/rotation.h"
#include "projections/status.h"
#include "reactors/ack.h"
#include "reactors/epoch.h"
#include "reactors/fencing.h"
#include "reactors/mesh_ca.h"
#include "tally.h"

/* A cluster leader's followers, as its tallyd last kept them. */
static void
st_followers_print(const json_t *fo)
{
	const json_t *f, *arr = json_object_get(fo, "followers");
	size_t i;

	printf("  %zu live follower(s) as of %s (the leader's head then: "
	    "event %lld)\n", json_array_size(arr), json_string_value(
	    json_object_get(fo, "as_of")), (long long)json_integer_value(
	    json_object_get(fo, "head")));
	json_array_foreach(arr, i, f)
		printf("    %s applied through event %lld, %lld behind\n",
		    json_string_value(json_object_get(f, "id")),
		    (long long)json_integer_value(json_object_get(f,
		    "applied")), (long long)json_integer_value(
		    json_object_get(f, "behind")));
}

static const char usage[] =
"usage: tally status [MODULE] [--at SEQ] [--agent-silence SECONDS] [--json]\n"
"\n"
"Shows each assignment's state: ready (nothing required), pending (with\n"
"the reason for every unsatisfied requirement), bound, provisioned,\n"
"ready; unhealthy (a grant failed, is missing, its provider is\n"
"unreachable, a holder was cut off, …: the worst of its grants).\n"
"Without MODULE it ends with what must not be forgotten: retained data\n"
"of revoked grants, rotations waiting and on whom, holders cut off,\n"
"scheduled rotations overdue, revoked grants whose issued credentials\n"
"stay valid until they expire (with the driver's lifetime, and until\n"
"when), removals held for a confirmation (tally remove without --yes).\n"
"--at SEQ shows the state as it was after\n"
"event SEQ.  The agents (tally-node) that reported are listed with what\n"
"each holds: per holder the version delivered, reloaded (or the reload\n"
"failed), acknowledged; an agent silent for more than SECONDS (default\n"
"300) is unhealthy.  Exits 6 when anything is not healthy.\n";

struct status_arg {
	const char	*module;
	uint64_t	 at;
	uint64_t	 silence_s;
};

static void	print_duration(uint64_t ns);

/* Refused input (reactors/ack.h, the scratch table "refused"). */
static int
one_refused(const char *via, const char *node, const char *kind,
    uint64_t count, uint64_t last_ns, const char *why, void *arg)
{
	json_array_append_new(arg, json_pack("{s:s,s:s,s:s,s:I,s:I,s:s}",
	    "via", via, "node", node, "kind", kind, "count",
	    (json_int_t)count, "last_ns", (json_int_t)last_ns, "last_reason",
	    why));
	return 0;
}

static const char *
refused_words(const char *kind)
{
	static const struct { const char *kind, *words; } w[] = {
		{ TL_REFUSED_UNSIGNED, "unsigned message(s)" },
		{ TL_REFUSED_BADSIG, "wrongly signed message(s)" },
		{ TL_REFUSED_NOKEY, "message(s) claiming a node with no "
		  "signing key" },
		{ TL_REFUSED_MALFORMED, "malformed message(s)" },
		{ TL_REFUSED_REPLAYED, "replayed or late message(s)" },
	};
	size_t i;

	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		if (strcmp(w[i].kind, kind) == 0)
			return w[i].words;
	return kind;
}

static void
print_refused(const json_t *rf)
{
	const json_t *e;
	size_t i;

	json_array_foreach(rf, i, e) {
		const char *node = json_string_value(json_object_get(e,
		    "node"));
		time_t u = (time_t)(json_integer_value(json_object_get(e,
		    "last_ns")) / 1000000000);
		char when[32] = "?";
		struct tm tm;

		if (gmtime_r(&u, &tm) != NULL)
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		printf("refused input: %lld %s on %s%s%s, last at %s, last "
		    "reason: %s\n", json_integer_value(json_object_get(e,
		    "count")), refused_words(json_string_value(
		    json_object_get(e, "kind"))), json_string_value(
		    json_object_get(e, "via")), strcmp(node, "?") != 0 ?
		    " claiming " : "", strcmp(node, "?") != 0 ? node : "", when,
		    json_string_value(json_object_get(e, "last_reason")));
	}
}

/*
 * "co-located" is why the binding was made (the provider beside the
 * module's first instance): true of that instance, not of one on
 * another node, which reaches the provider over the network.
 */
static void
print_binding(const char *prov, const char *why, const char *node)
{
	const char *slash = strchr(prov, '/');
	size_t nl = node != NULL ? strlen(node) : 0;

	if (why != NULL && strcmp(why, TL_BIND_COLOCATED) == 0 &&
	    slash != NULL && node != NULL && ((size_t)(slash - prov) != nl ||
	    strncmp(prov, node, nl) != 0))
		printf(" %s (on %.*s, over the network: bound co-located with "
		    "the module's instance there)", prov, (int)(slash - prov),
		    prov);
	else
		printf(" %s (%s)", prov, why != NULL ? why : "?");
}

static void
print_agents(const json_t *ag)
{
	const json_t *a, *h, *lr;
	size_t i, j;

	if (json_array_size(ag) == 0)
		return;
	printf("agents:\n");
	json_array_foreach(ag, i, a) {
		printf("  %s: %s, reported ", json_string_value(
		    json_object_get(a, "node")), json_string_value(
		    json_object_get(a, "agent")));
		print_duration((uint64_t)json_integer_value(json_object_get(a,
		    "age_ns")));
		printf(" ago%s\n", json_is_true(json_object_get(a, "silent")) ?
		    " (silent: unhealthy)" : "");
		lr = json_object_get(a, "last_reload");
		json_array_foreach(json_object_get(a, "held"), j, h)
			if (json_is_true(json_object_get(h,
			    "awaiting_certificate")))
				printf("    %s %s: v%lld delivered, its key made "
				    "on the node, awaiting its certificate\n",
				    json_string_value(json_object_get(h,
				    "holder")), json_string_value(
				    json_object_get(h, "grant")),
				    json_integer_value(json_object_get(h,
				    "version")));
			else
				printf("    %s %s: v%lld delivered, %s, %s\n",
				    json_string_value(json_object_get(h,
				    "holder")), json_string_value(
				    json_object_get(h, "grant")),
				    json_integer_value(json_object_get(h,
				    "version")), json_is_true(json_object_get(h,
				    "reloaded")) ? "reloaded" : "not reloaded",
				    json_is_true(json_object_get(h, "acked")) ?
				    "acknowledged" : "not acknowledged");
		json_array_foreach(json_object_get(a, "held"), j, h)
			if (json_object_get(h, "off_record") != NULL)
				printf("    OFF THE RECORD: %s\n",
				    json_string_value(json_object_get(h,
				    "off_record")));
			else if (json_is_true(json_object_get(h, "withdrawn")))
				printf("    %s %s: withdrawn from it, still held "
				    "by the agent: not healthy until it drops "
				    "the values\n", json_string_value(
				    json_object_get(h, "holder")),
				    json_string_value(json_object_get(h,
				    "grant")));
		/* Absent from a report, these are JSON null here: nothing. */
		lr = json_object_get(a, "refused");
		if (json_is_object(lr) && json_integer_value(json_object_get(lr,
		    "count")) > 0) {
			const char *last = json_string_value(
			    json_object_get(lr, "last"));

			printf("    refused %lld message(s) on its queue not "
			    "signed by the control plane%s%s%s\n",
			    json_integer_value(json_object_get(lr, "count")),
			    last != NULL ? " (last: " : "", last != NULL ? last :
			    "", last != NULL ? ")" : "");
		}
		lr = json_object_get(a, "last_reload");
		if (json_is_object(lr) && !json_is_true(json_object_get(lr, "ok")))
			printf("    last reload of %s failed (exit %lld)\n",
			    json_string_value(json_object_get(lr, "module")),
			    json_integer_value(json_object_get(lr, "status")));
	}
}

static void
print_duration(uint64_t ns)
{
	uint64_t s = ns / 1000000000u;

	if (s >= 86400)
		printf("%llud%lluh", (unsigned long long)(s / 86400),
		    (unsigned long long)(s % 86400 / 3600));
	else if (s >= 3600)
		printf("%lluh%llum", (unsigned long long)(s / 3600),
		    (unsigned long long)(s % 3600 / 60));
	else if (s >= 60)
		printf("%llum%llus", (unsigned long long)(s / 60),
		    (unsigned long long)(s % 60));
	else
		printf("%llus", (unsigned long long)s);
}

/* What tally adopt took over (its login: the credential of v1). */
static void
print_adopted(const json_t *a)
{
	const char *login = json_string_value(json_object_get(a, "login"));
	const char *mig = json_string_value(json_object_get(a,
	    "migrated_through"));
	const char *hold = json_string_value(json_object_get(a, "holders"));

	printf("\n      adopted %s (tally adopt)", json_string_value(
	    json_object_get(a, "resource")));
	if (login != NULL)
		printf(", its login %s as v%lld", login, json_integer_value(
		    json_object_get(a, "version")));
	if (mig != NULL)
		printf(", migrated through %s before", mig);
	if (hold != NULL)
		printf("; the holders' password (--password-stdin) %s when it "
		    "was taken over", strcmp(hold, "working") == 0 ?
		    "worked" : "failed: they are down until tally's credential "
		    "reaches them");
}

static void
print_rotation(const json_t *rot)
{
	const json_t *w = json_object_get(rot, "waiting_on"), *h;
	uint64_t started = (uint64_t)json_integer_value(json_object_get(rot,
	    "started_ns")), deadline = (uint64_t)json_integer_value(
	    json_object_get(rot, "deadline_ns"));
	struct timespec now;
	uint64_t nowns;
	size_t i;

	const char *reason = json_string_value(json_object_get(rot, "reason"));

	clock_gettime(CLOCK_REALTIME, &now);
	nowns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	printf("\n      rotating v%lld → v%lld", json_integer_value(
	    json_object_get(rot, "from")), json_integer_value(
	    json_object_get(rot, "to")));
	if (reason != NULL && strcmp(reason, "operator") != 0)
		printf(" (%s)", reason);
	printf(": ");
	if (json_array_size(w) == 0)
		printf("%s", json_string_value(json_object_get(rot, "step")));
	else {
		printf("waiting on ");
		json_array_foreach(w, i, h)
			printf("%s%s", i ? ", " : "", json_string_value(h));
	}
	printf(" for ");
	print_duration(nowns > started ? nowns - started : 0);
	if (deadline != 0) {
		printf(" (deadline in ");
		print_duration(started + deadline > nowns ? started + deadline -
		    nowns : 0);
		printf(")");
	}
	/* What the provider says of the old login (the rotator's count). */
	if (json_object_get(rot, "old_sessions") != NULL)
		printf("; old login (v%lld): %lld session(s) still open",
		    json_integer_value(json_object_get(rot, "from")),
		    json_integer_value(json_object_get(rot, "old_sessions")));
}

/* "moving to P: copying" / "waiting on NODE/MODULE"; or a failed move. */
static void
print_rebind(const json_t *r)
{
	const json_t *mv = json_object_get(r, "rebind"), *w, *h;
	size_t i;

	if (mv == NULL) {
		if ((mv = json_object_get(r, "rebind_failed")) != NULL)
			printf("\n      move to %s failed (%s): %s — the grant "
			    "stays on %s", json_string_value(json_object_get(mv,
			    "to")), json_string_value(json_object_get(mv,
			    "step")), json_string_value(json_object_get(mv,
			    "reason")), json_string_value(json_object_get(mv,
			    "from")));
		return;
	}
	w = json_object_get(mv, "waiting_on");
	printf("\n      moving to %s (v%lld): ", json_string_value(
	    json_object_get(mv, "to")), json_integer_value(json_object_get(mv,
	    "version")));
	if (json_array_size(w) > 0) {
		printf("waiting on ");
		json_array_foreach(w, i, h)
			printf("%s%s", i ? ", " : "", json_string_value(h));
	} else
		printf("%s", json_string_value(json_object_get(mv, "step")));
	if (json_object_get(mv, "tables") != NULL)
		printf(" (copied %lld table(s), %lld row(s), counts match)",
		    json_integer_value(json_object_get(mv, "tables")),
		    json_integer_value(json_object_get(mv, "rows")));
	if (json_object_get(mv, "reason") != NULL)
		printf(": %s", json_string_value(json_object_get(mv,
		    "reason")));
}

static void
print_module(const json_t *m)
{
	const json_t *a, *r;
	size_t i, j;

	const char *inst = json_string_value(json_object_get(m, "instances"));

	printf("%s: %s", json_string_value(json_object_get(m, "module")),
	    json_string_value(json_object_get(m, "state")));
	if (inst != NULL && strcmp(inst, "any") != 0)
		printf(" (instances: %s)", inst);
	putchar('\n');
	json_array_foreach(json_object_get(m, "off_record"), i, a)
		printf("  not ready: %s\n", json_string_value(a));
	json_array_foreach(json_object_get(m, "assignments"), i, a) {
		const json_t *pa = json_object_get(a, "parts"), *x;

		printf("  on %s: %s",
		    json_string_value(json_object_get(a, "node")),
		    json_string_value(json_object_get(a, "state")));
		if (pa != NULL) {
			printf(" (parts:");
			json_array_foreach(pa, j, x)
				printf("%s%s", j ? "," : " ",
				    json_string_value(x));
			putchar(')');
		}
		putchar('\n');
		json_array_foreach(json_object_get(a, "not_installed"), j, x)
			printf("    %-14s not provisioned here: part %s is not "
			    "installed on %s\n", json_string_value(
			    json_object_get(x, "name")), json_string_value(
			    json_object_get(x, "part")), json_string_value(
			    json_object_get(a, "node")));
		if (json_is_string(json_object_get(a, "settings_note")))
			printf("    %s\n", json_string_value(json_object_get(a,
			    "settings_note")));
		json_array_foreach(json_object_get(a, "embedded"), j, r) {
			const json_t *mv = json_object_get(r, "consolidating");
			const json_t *f = json_object_get(r,
			    "consolidation_failed");

			printf("    %-14s %-13s %s (%s), grant %s",
			    json_string_value(json_object_get(r, "name")),
			    "embedded", json_string_value(json_object_get(r,
			    "serves")), json_string_value(json_object_get(r,
			    "type")), json_string_value(json_object_get(r,
			    "grant_state")));
			if (mv != NULL)
				printf("\n      consolidating onto %s (%s)",
				    json_string_value(json_object_get(mv, "to")),
				    json_string_value(json_object_get(mv,
				    "state")));
			if (f != NULL)
				printf("\n      consolidation onto %s failed (%s): "
				    "%s; it stays on its own instance",
				    json_string_value(json_object_get(f, "to")),
				    json_string_value(json_object_get(f, "step")),
				    json_string_value(json_object_get(f,
				    "reason")));
			putchar('\n');
		}
		json_array_foreach(json_object_get(a, "requirements"), j, r) {
			const char *prov = json_string_value(
			    json_object_get(r, "provider"));
			const char *gs = json_string_value(
			    json_object_get(r, "grant_state"));
			const char *why = json_string_value(
			    json_object_get(r, "reason"));
			const char *tgt = json_string_value(
			    json_object_get(r, "target"));

			printf("    %-14s %-13s %-11s",
			    json_string_value(json_object_get(r, "name")),
			    json_string_value(json_object_get(r, "kind")),
			    json_string_value(json_object_get(r, "state")));
			if (prov != NULL)
				print_binding(prov, json_string_value(
				    json_object_get(r, "bound_by")),
				    json_string_value(json_object_get(a,
				    "node")));
			else if (tgt != NULL && why == NULL)
				printf(" %s", tgt);
			if (gs != NULL)
				printf(", grant %s", gs);
			if (why != NULL)
				printf("%s%s", prov ? ": " : " ", why);
			if (json_object_get(r, "drift") != NULL)
				printf("\n      DRIFT %s: %s", json_string_value(
				    json_object_get(r, "drift")),
				    json_string_value(json_object_get(r,
				    "drift_reason")));
			if (json_object_get(r, "warning") != NULL)
				printf("\n      WARNING %s", json_string_value(
				    json_object_get(r, "warning")));
			if (json_object_get(r, "isolation_note") != NULL)
				printf("\n      note: %s", json_string_value(
				    json_object_get(r, "isolation_note")));
			if (json_object_get(r, "access") != NULL)
				printf("\n      %s access to %s's resource",
				    json_string_value(json_object_get(
				    json_object_get(r, "access"), "access")),
				    json_string_value(json_object_get(
				    json_object_get(r, "access"), "of")));
			if (json_object_get(r, "adopted") != NULL)
				print_adopted(json_object_get(r, "adopted"));
			if (json_object_get(r, "migrations_blocked") != NULL)
				printf("\n      migrations blocked: %s",
				    json_string_value(json_object_get(r,
				    "migrations_blocked")));
			if (json_object_get(r, "rotation") != NULL)
				print_rotation(json_object_get(r, "rotation"));
			print_rebind(r);
			if (json_object_get(r, "last_verified") != NULL)
				printf("\n      verified %s (%lld checks)",
				    json_string_value(json_object_get(r,
				    "last_verified")), json_integer_value(
				    json_object_get(r, "checks")));
			putchar('\n');
		}
	}
}

/* The mesh-wide reminders (tl_status_attention); nothing when none. */
static void
print_attention(const json_t *at)
{
	const json_t *e, *h;
	size_t i, j, n = 0;
	const char *const keys[] = { "retained", "rotations_waiting",
	    "cut_off", "rotations_overdue", "residual", "certificates",
	    "removals_held" };

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		n += json_array_size(json_object_get(at, keys[i]));
	if (n == 0)
		return;
	printf("\nnot to forget:\n");
	json_array_foreach(json_object_get(at, "removals_held"), i, e)
		printf("  the removal of %s waits for a confirmation since %s "
		    "(event %lld): %s; tally remove %s --yes removes it, "
		    "--cancel withdraws it\n",
		    json_string_value(json_object_get(e, "module")),
		    json_string_value(json_object_get(e, "since")),
		    json_integer_value(json_object_get(e, "seq")),
		    json_string_value(json_object_get(e, "what")),
		    json_string_value(json_object_get(e, "module")));
	json_array_foreach(json_object_get(at, "retained"), i, e)
		printf("  retained data: %s on %s (resource %s, %.1f MiB)%s\n",
		    json_string_value(json_object_get(e, "grant")),
		    json_string_value(json_object_get(e, "provider")),
		    json_string_value(json_object_get(e,
			    TL_GRANT_OBJECT_KEY)),
		    (double)json_integer_value(json_object_get(e, "bytes")) /
		    1048576.0, strcmp(json_string_value(json_object_get(e,
		    "state")), "purging") == 0 ? ": being purged" :
		    ": tally purge destroys it");
	json_array_foreach(json_object_get(at, "rotations_waiting"), i, e) {
		printf("  rotation of %s (v%lld → v%lld) waiting on ",
		    json_string_value(json_object_get(e, "grant")),
		    json_integer_value(json_object_get(e, "from")),
		    json_integer_value(json_object_get(e, "to")));
		json_array_foreach(json_object_get(e, "waiting_on"), j, h)
			printf("%s%s", j ? ", " : "", json_string_value(h));
		putchar('\n');
	}
	json_array_foreach(json_object_get(at, "cut_off"), i, e)
		printf("  cut off: %s from %s (has not acknowledged v%lld)\n",
		    json_string_value(json_object_get(e, "holder")),
		    json_string_value(json_object_get(e, "grant")),
		    json_integer_value(json_object_get(e, "version")));
	json_array_foreach(json_object_get(at, "residual"), i, e) {
		const char *set = json_string_value(json_object_get(e,
		    "setting"));
		char when[32] = "?";
		time_t u = (time_t)(json_integer_value(json_object_get(e,
		    "until_ns")) / 1000000000);
		struct tm tm;

		if (gmtime_r(&u, &tm) != NULL)
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		printf("  revoked %s on %s: %s (lifetime %s%s%s), until %s\n",
		    json_string_value(json_object_get(e, "grant")),
		    json_string_value(json_object_get(e, "provider")),
		    json_string_value(json_object_get(e, "residual")),
		    json_string_value(json_object_get(e, "lifetime")),
		    set != NULL && set[0] != '\0' ? ", setting " : "",
		    set != NULL ? set : "", when);
		st_certs_print_valid(json_object_get(e, "certificates"));
	}
	st_certs_print_lagging(json_object_get(at, "certificates"));
	json_array_foreach(json_object_get(at, "rotations_overdue"), i, e) {
		printf("  rotation overdue: %s's credential is ",
		    json_string_value(json_object_get(e, "grant")));
		print_duration((uint64_t)json_integer_value(json_object_get(e,
		    "age_s")) * 1000000000u);
		printf(" old (max-credential-age ");
		print_duration((uint64_t)json_integer_value(json_object_get(e,
		    "max_age_s")) * 1000000000u);
		if (json_object_get(e, "window_opens_s") != NULL) {
			char when[32] = "?";
			time_t u = (time_t)json_integer_value(json_object_get(e,
			    "window_opens_s"));
			struct tm tm;

			if (gmtime_r(&u, &tm) != NULL)
				strftime(when, sizeof(when),
				    "%Y-%m-%dT%H:%M:%SZ", &tm);
			printf("); held for its rotation window (%s), which "
			    "opens at %s\n", json_string_value(json_object_get(
			    e, "window")), when);
		} else
			printf("); is tallyd running?\n");
	}
}


void
cli_status_fencing(struct tl_cli *cli, struct tl_txn *t,
    const struct tl_proj *p, json_t *doc, int print)
{
	json_t *all, *one, *e, *tr;
	const char *pid;
	size_t i;

	if (tl_rx_fencing(t, p, &all) != 0)
		return;
	json_object_foreach(all, pid, one)
		json_array_foreach(one, i, e) {
			const char *driver = json_string_value(json_object_get(e,
			    "driver")), *m;

			if (!print || cli->json)
				continue;
			printf("provider %s (%s) fenced: %s; window: %s\n", pid,
			    driver, json_string_value(json_object_get(e,
			    "kind")), strcmp(json_string_value(json_object_get(e,
			    "kind")), "none") == 0 ? "unbounded (no fence)" :
			    json_string_value(json_object_get(e, "window")));
			if ((tr = json_object_get(e, "transport")) == NULL)
				continue;
			m = json_string_value(json_object_get(tr, "tls"));
			printf("provider %s (%s) reached at %s: %s%s%s%s\n", pid,
			    driver, json_string_value(json_object_get(tr,
			    "host")), strcmp(m, "verify") == 0 ?
			    "TLS, verified" : strcmp(m, "require") == 0 ?
			    "TLS, not verified" : "plaintext",
			    json_is_true(json_object_get(tr, "client_cert")) ?
			    ", the admin presents a client certificate" : "",
			    json_object_get(tr, "warning") ? "; warning: " : "",
			    json_object_get(tr, "warning") ? json_string_value(
			    json_object_get(tr, "warning")) : "");
		}
	if (json_object_size(all) > 0)
		json_object_set(doc, "fencing", all);
	json_decref(all);
}

static int
show(struct tl_cli *cli, struct tl_txn *t, const struct tl_proj *p, void *arg)
{
	struct status_arg *sa = arg;
	json_t *doc, *m;
	size_t i;
	int rc, healthy;

	if (sa->module != NULL)
		rc = tl_status_module(t, p, sa->module, &doc);
	else
		rc = tl_status_all(t, p, &doc);
	if (rc == TL_ENOTFOUND) {
		cli_errx("no module %s", sa->module);
		return TL_EXIT_NOTFOUND;
	}
	if (rc != 0)
		return cli_fail(cli, rc, "status");
	healthy = tl_status_healthy(doc);
	{
		struct tl_status_agents sa2;
		struct timespec now;
		uint64_t now_ns;

		clock_gettime(CLOCK_REALTIME, &now);
		now_ns = (uint64_t)now.tv_sec * 1000000000u +
		    (uint64_t)now.tv_nsec;
		if ((rc = tl_status_agents(t, p, sa->module, now_ns,
		    sa->silence_s * 1000000000u, sa->at == 0, &sa2)) != 0) {
			json_decref(doc);
			return cli_fail(cli, rc, "status: agents");
		}
		if (json_array_size(sa2.agents) > 0)
			json_object_set(doc, "agents", sa2.agents);
		/* --at: the past has no "silent now". */
		if (sa2.silent > 0 && sa->at == 0)
			healthy = 0;
		if (json_array_size(sa2.wrong) > 0) {
			tl_status_off_record(doc, sa2.wrong);
			healthy = 0;
		}
		if (sa2.withdrawn > 0)
			healthy = 0;
		json_decref(sa2.agents);
		json_decref(sa2.wrong);
	}
	{
		char mesh[TL_MESH_LEN + 1];
		uint64_t mseq = 0;

		/* The mesh, in a replay too once its event is behind at. */
		if (tl_mesh_seq(t, mesh, &mseq) == 0 && mesh[0] != '\0' &&
		    (sa->at == 0 || mseq <= sa->at)) {
			json_object_set_new(doc, "mesh", json_string(mesh));
			if (!cli->json && sa->at == 0)
				printf("mesh %s\n", mesh);
		}
	}
	/* How each provider is fenced: this build's drivers, in a replay too. */
	cli_status_fencing(cli, t, p, doc, sa->at == 0);
	if (sa->at == 0) {
		char dep[512];
		uint64_t epoch = 1;

		/* The control plane itself (reactors/epoch.h). */
		/*
		 * Only once there was a promotion: the epoch is 1 until then,
		 * and a status of before is the same document as a replay's.
		 */
		if (tl_ep_current(t, &epoch, NULL) == 0 && epoch > 1)
			json_object_set_new(doc, "epoch",
			    json_integer((json_int_t)epoch));
		if (tl_ep_deposed(t, dep, sizeof(dep)) == 1) {
			json_object_set_new(doc, "deposed", json_string(dep));
			healthy = 0;
			if (!cli->json)
				printf("control plane DEPOSED at epoch %llu: "
				    "%s; this tallyd refuses to act\n",
				    (unsigned long long)epoch, dep);
		}
		int standby = 0;
		uint64_t promoted = 0;
		char cstanding[900];

		/* A cluster's: what its tallyd last said; etcd elects. */
		if (tl_log_clustered(cli->log)) {
			if (tl_ep_cluster_get(t, cstanding, sizeof(cstanding)) != 0)
				snprintf(cstanding, sizeof(cstanding), "no tallyd has "
				    "run here yet");
			json_t *cl = json_pack("{s:s}", "standing", cstanding);
			json_t *fo = tl_ep_followers_doc(t);

			if (!cli->json)
				printf("control plane: one of a cluster (etcd; "
				    "%s/cluster.json): %s\n", cli->home, cstanding);
			if (fo != NULL && !cli->json)
				st_followers_print(fo);
			if (cl != NULL && fo != NULL)
				json_object_set(cl, "followers", fo);
			json_decref(fo);
			json_object_set_new(doc, "cluster", cl);
		} else if (tl_ep_standing(t, cli->home, &standby,
		    &promoted) == 0 && !standby && epoch > 1 && !cli->json)
			printf("control plane: the leader at epoch %llu\n",
			    (unsigned long long)epoch);
		/* Stream standbys, as their reports said (epoch.h). */
		if (!tl_log_clustered(cli->log) && !standby) {
			json_t *sb = tl_ep_standbys_doc(t), *e;
			size_t si;

			if (sb != NULL) {
				json_object_set(doc, "standbys",
				    json_object_get(sb, "standbys"));
				json_array_foreach(json_object_get(sb,
				    "standbys"), si, e)
					if (!cli->json)
						printf("  standby %s: applied "
						    "through event %lld, %lld "
						    "behind (its report of %s)\n",
						    json_string_value(
						    json_object_get(e, "name")),
						    json_integer_value(
						    json_object_get(e, "applied")),
						    json_integer_value(
						    json_object_get(e, "behind")),
						    json_string_value(
						    json_object_get(e, "heard")));
				json_decref(sb);
			}
		}
		if (standby) {
			struct tl_ep_follow f;
			char leader[900];
			json_t *sb;

			cli_standby_leader(t, leader, sizeof(leader));
			if (tl_ep_follow_get(t, &f) != 0)
				memset(&f, 0, sizeof(f));
			sb = json_pack("{s:s,s:I}", "follows", leader,
			    "passed_over", (json_int_t)f.passed);
			if (sb != NULL && f.passed > 0)
				json_object_set_new(sb, "last_passed_over",
				    json_pack("{s:I,s:s}", "stream_offset",
				    (json_int_t)f.last_offset, "why",
				    f.last_why));
			if (sb != NULL)
				json_object_set_new(doc, "standby", sb);
			if (!cli->json) {
				printf("control plane: a standby at epoch %llu: "
				    "it follows %s and never writes (tallyd "
				    "--follow; tally promote makes it the "
				    "leader)\n", (unsigned long long)epoch,
				    leader);
				if (f.passed > 0)
					printf("  %llu stream message(s) passed "
					    "over, not appended; the last at "
					    "stream offset %lld: %s\n",
					    (unsigned long long)f.passed,
					    (long long)f.last_offset,
					    f.last_why);
			}
		}
	}
	if (sa->module == NULL && sa->at == 0) {
		json_t *rf = json_array();

		if (rf != NULL && tl_ack_refused_each(t, one_refused, rf) == 0 &&
		    json_array_size(rf) > 0)
			json_object_set(doc, "refused_input", rf);
		json_decref(rf);
	}
	if (sa->module == NULL) {
		struct timespec now;
		json_t *at;

		clock_gettime(CLOCK_REALTIME, &now);
		/* With what depends on the clock: replay --status has none. */
		if (tl_status_attention(t, p, (uint64_t)now.tv_sec *
		    1000000000u + (uint64_t)now.tv_nsec, TL_ATTN_CLOCK,
		    &at) == 0)
			json_object_set_new(doc, "attention", at);
	}
	if (cli->json) {
		json_dumpf(doc, stdout, JSON_COMPACT);
		putchar('\n');
	} else if (sa->module != NULL) {
		print_module(doc);
		print_agents(json_object_get(doc, "agents"));
	} else {
		json_array_foreach(json_object_get(doc, "modules"), i, m)
			print_module(m);
		if (json_array_size(json_object_get(doc, "modules")) == 0)
			printf("no modules declared\n");
		print_attention(json_object_get(doc, "attention"));
		print_agents(json_object_get(doc, "agents"));
		print_refused(json_object_get(doc, "refused_input"));
	}
	json_decref(doc);
	return healthy ? TL_EXIT_OK : TL_EXIT_UNHEALTHY;
}

int
cmd_status(struct tl_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_COMMON_OPTS,
		{ "at", required_argument, NULL, 'a' },
		{ "agent-silence", required_argument, NULL, 's' },
		{ 0 }
	};
	struct status_arg sa = { NULL, 0, 300 };
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
		case 's':
			if (cli_parse_u64(optarg, &sa.silence_s) != 0 ||
			    sa.silence_s == 0) {
				cli_errx("--agent-silence: not a number of "
				    "seconds: %s", optarg);
				return TL_EXIT_USAGE;
			}
			break;
		CLI_COMMON_CASES(cli, usage);
		}
	}
	if (optind + 1 < argc) {
		fputs(usage, stderr);
		return TL_EXIT_USAGE;
	}
	if (optind < argc)
		sa.module = argv[optind];
	sa.at = at;
	return cli_read(cli, at, show, &sa);
}
