/*
 * describe.c - an event in domain words (describe.h): what tally
 * history, diff and replay print, and tally-board's history page.
 */
#define _POSIX_C_SOURCE 200809L

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "describe.h"

static const char *
js(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s != NULL ? s : "?";
}

static long long
ji(const json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

/* "a, b, c" from an array of strings (or of objects with key). */
static void
join(const json_t *arr, const char *key, char *buf, size_t cap)
{
	const json_t *v;
	size_t i, n = 0;

	buf[0] = '\0';
	json_array_foreach(arr, i, v) {
		const char *s = key ? json_string_value(json_object_get(v,
		    key)) : json_string_value(v);

		if (s == NULL)
			continue;
		n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s",
		    i ? ", " : "", s);
		if (n >= cap)
			break;
	}
}

static void
say(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
say(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, cap, fmt, ap);
	va_end(ap);
}

void
tl_describe(const struct tl_event *ev, char *buf, size_t cap)
{
	json_t *b = tl_json_body(ev->body, ev->body_len);
	const char *t = ev->type, *g = b ? js(b, "grant") : "?";
	char list[512];

	if (b == NULL) {
		say(buf, cap, "%s on %s (body unreadable)", t, ev->stream);
		return;
	}
	if (strcmp(t, "node.added") == 0)
		say(buf, cap, "node %s added (routable name %s)", js(b, "name"),
		    js(b, "routable"));
	else if (strcmp(t, "node.removed") == 0)
		say(buf, cap, "node %s removed", js(b, "name"));
	else if (strcmp(t, "node.lost") == 0)
		say(buf, cap, "node %s lost for good (tally node lost)",
		    js(b, "name"));
	else if (strcmp(t, "module.declared") == 0) {
		join(json_object_get(b, "provides"), "type", list,
		    sizeof(list));
		say(buf, cap, "module %s declared%s%s%s", js(b, "name"),
		    list[0] ? " (provides " : "", list, list[0] ? ")" : "");
	} else if (strcmp(t, "module.removed") == 0)
		say(buf, cap, "module %s removed", js(b, "name"));
	else if (strcmp(t, "module.removal-held") == 0)
		say(buf, cap, "the removal of module %s held for a confirmation: "
		    "%s", js(b, "module"), js(b, "what"));
	else if (strcmp(t, "module.removal-cancelled") == 0)
		say(buf, cap, "the removal of module %s withdrawn",
		    js(b, "module"));
	else if (strcmp(t, "requirement.declared") == 0)
		say(buf, cap, "module %s requires %s: %s %s%s%s", js(b, "module"),
		    js(b, "name"), js(b, "kind"), json_object_get(b, "type") ?
		    js(b, "type") : js(b, "target"), json_object_get(b,
		    "scope") ? ", " : "", json_object_get(b, "scope") ?
		    js(b, "scope") : "");
	else if (strcmp(t, "requirement.withdrawn") == 0)
		say(buf, cap, "module %s no longer requires %s", js(b, "module"),
		    js(b, "name"));
	else if (strcmp(t, "assignment.created") == 0)
		say(buf, cap, "assignment %s@%s created (exposure %s)",
		    js(b, "module"), js(b, "node"), js(b, "expose"));
	else if (strcmp(t, "assignment.configured") == 0)
		say(buf, cap, "assignment %s@%s reconfigured (exposure %s)",
		    js(b, "module"), js(b, "node"), js(b, "expose"));
	else if (strcmp(t, "assignment.removed") == 0)
		say(buf, cap, "assignment %s@%s removed", js(b, "module"),
		    js(b, "node"));
	else if (strcmp(t, "assignment.ready") == 0)
		say(buf, cap, "assignment %s@%s ready", js(b, "module"),
		    js(b, "node"));
	else if (strcmp(t, "provider.registered") == 0) {
		join(json_object_get(b, "types"), "type", list, sizeof(list));
		say(buf, cap, "provider %s registered (%s)", js(b, "id"), list);
	} else if (strcmp(t, "provider.retired") == 0)
		say(buf, cap, "provider %s retired", js(b, "id"));
	else if (strcmp(t, "provider.unreachable") == 0)
		say(buf, cap, "provider %s unreachable: %s", js(b, "id"),
		    js(b, "reason"));
	else if (strcmp(t, "provider.recovered") == 0)
		say(buf, cap, "provider %s reachable again", js(b, "id"));
	else if (strcmp(t, "provider.moved") == 0)
		say(buf, cap, "provider %s moved", js(b, "id"));
	else if (strcmp(t, "binding.made") == 0)
		say(buf, cap, "%s bound to %s (%s)", g, js(b, "provider"),
		    js(b, "reason"));
	else if (strcmp(t, "binding.ambiguous") == 0) {
		join(json_object_get(b, "candidates"), NULL, list,
		    sizeof(list));
		say(buf, cap, "%s ambiguous: candidates %s (tally bind)", g,
		    list);
	} else if (strcmp(t, "binding.moved") == 0)
		say(buf, cap, "%s moved to %s", g, js(b, "provider"));
	else if (strcmp(t, "grant.requested") == 0)
		say(buf, cap, "grant %s requested from %s", g,
		    js(b, "provider"));
	else if (strcmp(t, "grant.provisioning") == 0)
		say(buf, cap, "grant %s: provisioning v%lld on %s", g,
		    ji(b, "version"), js(b, "provider"));
	else if (strcmp(t, "grant.provisioned") == 0)
		say(buf, cap, "grant %s provisioned (v%lld)", g,
		    ji(b, "version"));
	else if (strcmp(t, "grant.failed") == 0)
		say(buf, cap, "grant %s failed: %s", g, js(b, "reason"));
	else if (strcmp(t, "revocation.requested") == 0)
		say(buf, cap, "grant %s: revocation requested (%s)", g,
		    js(b, "reason"));
	else if (strcmp(t, "grant.revoked") == 0)
		say(buf, cap, "grant %s revoked (%s)", g, js(b, "policy"));
	else if (strcmp(t, "grant.purged") == 0)
		say(buf, cap, "grant %s purged: its data dropped", g);
	else if (strcmp(t, "grant.lost") == 0)
		say(buf, cap, "grant %s lost: its data on %s went with node %s",
		    g, js(b, "provider"), js(b, "node"));
	else if (strcmp(t, "grant.restored") == 0)
		say(buf, cap, "grant %s restored", g);
	else if (strcmp(t, "grant.drifted") == 0)
		say(buf, cap, "grant %s drifted: %s — %s", g, js(b, "kind"),
		    js(b, "reason"));
	else if (strcmp(t, "grant.repaired") == 0)
		say(buf, cap, "grant %s repaired (%s: %s)", g, js(b, "kind"),
		    js(b, "how"));
	else if (strcmp(t, "grant.missing") == 0)
		say(buf, cap, "grant %s missing: %s", g, js(b, "reason"));
	else if (strcmp(t, "repair.requested") == 0)
		say(buf, cap, "grant %s: repair requested", g);
	else if (strcmp(t, "migration.stored") == 0)
		say(buf, cap, "module %s: migration %s stored (%.12s)",
		    js(b, "module"), js(b, "file"), js(b, "checksum"));
	else if (strcmp(t, "migration.applied") == 0)
		say(buf, cap, "grant %s: migration %s applied", g, js(b, "file"));
	else if (strcmp(t, "migration.blocked") == 0)
		say(buf, cap, "grant %s: migration %s blocked: %s", g,
		    js(b, "file"), js(b, "reason"));
	else if (strcmp(t, "credential.delivered") == 0)
		say(buf, cap, "grant %s v%lld delivered to %s (sealed to node "
		    "%s)", g, ji(b, "version"), js(b, "holder"), js(b, "node"));
	else if (strcmp(t, "credential.issued") == 0)
		say(buf, cap, "grant %s: credential v%lld issued", g,
		    ji(b, "version"));
	else if (strcmp(t, "credential.activated") == 0)
		say(buf, cap, "grant %s: credential v%lld active beside the "
		    "old one", g, ji(b, "version"));
	else if (strcmp(t, "credential.acknowledged") == 0)
		say(buf, cap, "%s acknowledged grant %s v%lld", js(b, "holder"),
		    g, ji(b, "version"));
	else if (strcmp(t, "credential.retired") == 0) {
		int forced = json_is_true(json_object_get(b, "forced"));

		join(json_object_get(b, "cut_off"), NULL, list, sizeof(list));
		if (forced && list[0])
			say(buf, cap, "grant %s: credential v%lld retired "
			    "(forced at the deadline, cut off %s)", g,
			    ji(b, "version"), list);
		else
			say(buf, cap, "grant %s: credential v%lld retired%s", g,
			    ji(b, "version"), forced ?
			    " (forced at the deadline)" : "");
	} else if (strcmp(t, "rotation.started") == 0)
		say(buf, cap, "grant %s rotation started v%lld → v%lld (%s)", g,
		    ji(b, "from"), ji(b, "to"), js(b, "reason"));
	else if (strcmp(t, "rotation.completed") == 0)
		say(buf, cap, "grant %s rotated v%lld → v%lld", g,
		    ji(b, "version") - 1, ji(b, "version"));
	else if (strcmp(t, "publisher.configured") == 0)
		say(buf, cap, "publishing to %s, exchange %s (%s)", js(b, "url"),
		    js(b, "exchange"), js(b, "format"));
	else if (strcmp(t, "publisher.disabled") == 0)
		say(buf, cap, "publishing disabled");
	else
		say(buf, cap, "%s on %s", t, ev->stream);
	json_decref(b);
}


/* --- points in the log --------------------------------------------- */

