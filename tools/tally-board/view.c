/*
 * view.c - the board's fold: one event of the record into its own view.
 *
 * Written from the event catalogue (ARCHITECTURE.md, the bodies of
 * `tally log --json`), not from tally's projections: a reporting
 * context decides for itself what it keeps, and keeps only that.
 * Types it does not know are counted and otherwise ignored, so a newer
 * tally does not break it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "board.h"

static const char *
str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s != NULL ? s : "";
}

/* The document at key, or a new empty one (a new reference). */
static json_t *
doc(struct bd_store *st, const char *key)
{
	json_t *d = bd_get(st, key);

	return d != NULL ? d : json_object();
}

static void
copy(json_t *d, const json_t *b, const char *k)
{
	json_t *v = json_object_get(b, k);

	if (v != NULL)
		json_object_set(d, k, v);
}

static int
put(struct bd_store *st, const char *key, json_t *d)
{
	int rc = bd_put(st, key, d);

	json_decref(d);
	return rc;
}

static void
set_state(json_t *g, const char *state, json_int_t seq)
{
	json_object_set_new(g, "state", json_string(state));
	json_object_set_new(g, "state_seq", json_integer(seq));
}

/* A revocation is sticky: late outcomes of earlier work do not undo it. */
static int
revoking(const json_t *g)
{
	return strcmp(str(g, "state"), "revoking") == 0;
}

static int
grant_event(struct bd_store *st, const char *type, const json_t *b,
    json_int_t seq, const char *ts)
{
	char key[512];
	json_t *g, *h, *hs;
	const char *id = str(b, "grant");

	if (*id == '\0' || strlen(id) > 400)
		return 0;
	snprintf(key, sizeof(key), "g/%s", id);
	g = doc(st, key);
	json_object_set_new(g, "grant", json_string(id));
	if (strcmp(type, "binding.made") == 0) {
		copy(g, b, "module");
		copy(g, b, "req");
		copy(g, b, "node");
		copy(g, b, "type");
		copy(g, b, "provider");
		json_object_set(g, "bound_by", json_object_get(b, "reason"));
		json_object_del(g, "candidates");
		if (json_object_get(g, "state") == NULL ||
		    strcmp(str(g, "state"), "ambiguous") == 0)
			set_state(g, "bound", seq);
	} else if (strcmp(type, "binding.ambiguous") == 0) {
		copy(g, b, "module");
		copy(g, b, "req");
		copy(g, b, "node");
		copy(g, b, "type");
		copy(g, b, "candidates");
		set_state(g, "ambiguous", seq);
	} else if (strcmp(type, "grant.requested") == 0) {
		copy(g, b, "module");
		copy(g, b, "req");
		copy(g, b, "node");
		copy(g, b, "scope");
		copy(g, b, "type");
		copy(g, b, "provider");
		copy(g, b, "resource");
		json_object_del(g, "reason");
		set_state(g, "requested", seq);
	} else if (strcmp(type, "grant.provisioning") == 0) {
		if (!revoking(g))
			set_state(g, "provisioning", seq);
	} else if (strcmp(type, "grant.provisioned") == 0) {
		if (!revoking(g))
			set_state(g, "provisioned", seq);
		copy(g, b, "version");
		json_object_del(g, "reason");
		json_object_del(g, "drift");
	} else if (strcmp(type, "grant.failed") == 0) {
		copy(g, b, "reason");
		if (!revoking(g) && strcmp(str(b, "op"), "revoke") != 0)
			set_state(g, "failed", seq);
	} else if (strcmp(type, "revocation.requested") == 0) {
		copy(g, b, "reason");
		set_state(g, "revoking", seq);
	} else if (strcmp(type, "grant.revoked") == 0) {
		set_state(g, "revoked", seq);
		json_object_del(g, "rotation");
	} else if (strcmp(type, "purge.requested") == 0)
		set_state(g, "purging", seq);
	else if (strcmp(type, "grant.purged") == 0)
		set_state(g, "purged", seq);
	else if (strcmp(type, "restore.requested") == 0)
		set_state(g, "restoring", seq);
	else if (strcmp(type, "grant.drifted") == 0 ||
	    strcmp(type, "grant.missing") == 0) {
		json_object_set_new(g, "drift", json_pack("{s:s,s:s,s:I,s:s}",
		    "kind", *str(b, "kind") ? str(b, "kind") :
		    "missing-resource", "reason", str(b, "reason"), "seq", seq,
		    "since", ts));
		if (strcmp(type, "grant.missing") == 0)
			set_state(g, "missing", seq);
	} else if (strcmp(type, "grant.repaired") == 0)
		json_object_del(g, "drift");
	else if (strcmp(type, "repair.requested") == 0)
		set_state(g, "repairing", seq);
	else if (strcmp(type, "migration.applied") == 0) {
		json_object_del(g, "blocked");
		copy(g, b, "file");
	} else if (strcmp(type, "migration.blocked") == 0)
		json_object_set_new(g, "blocked", json_sprintf("%s: %s",
		    str(b, "file"), str(b, "reason")));
	else if (strcmp(type, "credential.delivered") == 0 ||
	    strcmp(type, "credential.acknowledged") == 0) {
		const char *holder = str(b, "holder");

		if ((hs = json_object_get(g, "holders")) == NULL) {
			hs = json_object();
			json_object_set_new(g, "holders", hs);
		}
		if ((h = json_object_get(hs, holder)) == NULL) {
			h = json_object();
			json_object_set_new(hs, holder, h);
		}
		if (strcmp(type, "credential.delivered") == 0) {
			copy(h, b, "node");
			json_object_set(h, "delivered", json_object_get(b,
			    "version"));
		} else
			json_object_set(h, "acked", json_object_get(b,
			    "version"));
	} else if (strcmp(type, "rotation.started") == 0)
		json_object_set_new(g, "rotation", json_pack("{s:O?,s:O?,s:I,"
		    "s:s,s:O?,s:O?}", "from", json_object_get(b, "from"), "to",
		    json_object_get(b, "to"), "seq", seq, "since", ts,
		    "deadline_ns", json_object_get(b, "deadline_ns"), "reason",
		    json_object_get(b, "reason")));
	else if (strcmp(type, "credential.activated") == 0) {
		copy(g, b, "version");
		if ((h = json_object_get(g, "rotation")) != NULL)
			json_object_set_new(h, "active", json_true());
	} else if (strcmp(type, "rotation.completed") == 0)
		json_object_del(g, "rotation");
	else if (strcmp(type, "grant.restored") != 0 &&
	    strcmp(type, "credential.issued") != 0 &&
	    strcmp(type, "credential.retired") != 0) {
		json_decref(g);
		return 0;
	}
	return put(st, key, g);
}

static int
fold(struct bd_store *st, const char *type, const json_t *b, json_int_t seq,
    const char *ts)
{
	char key[512];
	json_t *d;

	if (strncmp(type, "node.", 5) == 0) {
		snprintf(key, sizeof(key), "n/%s", str(b, "name"));
		if (strcmp(type, "node.removed") == 0)
			return bd_del(st, key);
		if (strcmp(type, "node.added") != 0)
			return 0;
		return put(st, key, json_pack("{s:s,s:s,s:s}", "name",
		    str(b, "name"), "routable", str(b, "routable"), "since",
		    ts));
	}
	if (strcmp(type, "module.declared") == 0 ||
	    strcmp(type, "module.removed") == 0) {
		json_t *provides, *p;
		size_t i;

		snprintf(key, sizeof(key), "m/%s", str(b, "name"));
		if (strcmp(type, "module.removed") == 0)
			return bd_del(st, key);
		d = doc(st, key);
		json_object_set_new(d, "name", json_string(str(b, "name")));
		provides = json_array();
		json_array_foreach(json_object_get(b, "provides"), i, p)
			json_array_append_new(provides, json_string(
			    str(p, "type")));
		json_object_set_new(d, "provides", provides);
		if (json_object_get(d, "requirements") == NULL)
			json_object_set_new(d, "requirements", json_object());
		json_object_set_new(d, "embedded", json_boolean(
		    json_array_size(json_object_get(b, "embedded")) > 0));
		return put(st, key, d);
	}
	if (strncmp(type, "requirement.", 12) == 0) {
		json_t *reqs;

		snprintf(key, sizeof(key), "m/%s", str(b, "module"));
		d = doc(st, key);
		if ((reqs = json_object_get(d, "requirements")) == NULL) {
			reqs = json_object();
			json_object_set_new(d, "requirements", reqs);
		}
		if (strcmp(type, "requirement.declared") == 0)
			json_object_set_new(reqs, str(b, "name"), json_pack(
			    "{s:s,s:s,s:s,s:s}", "kind", str(b, "kind"),
			    "type", str(b, "type"), "target", str(b, "target"),
			    "scope", str(b, "scope")));
		else
			json_object_del(reqs, str(b, "name"));
		return put(st, key, d);
	}
	if (strncmp(type, "assignment.", 11) == 0) {
		snprintf(key, sizeof(key), "a/%s@%s", str(b, "module"),
		    str(b, "node"));
		if (strcmp(type, "assignment.removed") == 0)
			return bd_del(st, key);
		d = doc(st, key);
		json_object_set_new(d, "module", json_string(str(b, "module")));
		json_object_set_new(d, "node", json_string(str(b, "node")));
		if (strcmp(type, "assignment.ready") == 0)
			json_object_set_new(d, "ready", json_true());
		else {
			copy(d, b, "expose");
			if (json_object_get(d, "ready") == NULL)
				json_object_set_new(d, "ready", json_false());
		}
		return put(st, key, d);
	}
	if (strncmp(type, "provider.", 9) == 0) {
		snprintf(key, sizeof(key), "p/%s", str(b, "id"));
		if (strcmp(type, "provider.retired") == 0)
			return bd_del(st, key);
		d = doc(st, key);
		if (strcmp(type, "provider.registered") == 0) {
			json_t *types = json_array(), *p;
			size_t i;

			json_object_set_new(d, "id", json_string(str(b, "id")));
			copy(d, b, "module");
			copy(d, b, "node");
			json_array_foreach(json_object_get(b, "types"), i, p)
				json_array_append_new(types, json_string(
				    str(p, "type")));
			json_object_set_new(d, "types", types);
			if (json_object_get(d, "reachable") == NULL)
				json_object_set_new(d, "reachable",
				    json_true());
		} else if (strcmp(type, "provider.unreachable") == 0) {
			json_object_set_new(d, "reachable", json_false());
			copy(d, b, "reason");
			json_object_set_new(d, "since", json_string(ts));
		} else if (strcmp(type, "provider.recovered") == 0) {
			json_object_set_new(d, "reachable", json_true());
			json_object_del(d, "reason");
		}
		return put(st, key, d);
	}
	if (strncmp(type, "grant.", 6) == 0 ||
	    strncmp(type, "binding.", 8) == 0 ||
	    strncmp(type, "credential.", 11) == 0 ||
	    strncmp(type, "rotation.", 9) == 0 ||
	    strncmp(type, "migration.", 10) == 0 ||
	    strcmp(type, "revocation.requested") == 0 ||
	    strcmp(type, "repair.requested") == 0 ||
	    strcmp(type, "purge.requested") == 0 ||
	    strcmp(type, "restore.requested") == 0)
		return grant_event(st, type, b, seq, ts);
	return 0;
}

int
bd_apply(struct bd_store *st, const json_t *ev, int *what)
{
	json_t *meta = bd_meta(st), *types, *n;
	json_int_t seq, pos;
	const char *type, *ts;
	int rc;

	*what = BD_APPLIED;
	seq = json_integer_value(json_object_get(ev, "seq"));
	type = json_string_value(json_object_get(ev, "type"));
	ts = json_string_value(json_object_get(ev, "ts"));
	if (seq <= 0 || type == NULL || ts == NULL ||
	    !json_is_object(json_object_get(ev, "body")))
		return EINVAL;
	pos = json_integer_value(json_object_get(meta, "pos"));
	if (seq <= pos) {
		*what = BD_DUPLICATE;
		json_object_set_new(meta, "duplicates", json_integer(
		    json_integer_value(json_object_get(meta,
		    "duplicates")) + 1));
		return 0;
	}
	if (seq != pos + 1) {
		*what = BD_GAP;
		json_object_set_new(meta, "gaps", json_integer(
		    json_integer_value(json_object_get(meta, "gaps")) + 1));
	}
	if (seq == 1)
		json_object_set(meta, "origin", json_object_get(ev, "id"));
	if ((rc = fold(st, type, json_object_get(ev, "body"), seq, ts)) != 0)
		return rc;
	json_object_set_new(meta, "pos", json_integer(seq));
	json_object_set_new(meta, "applied", json_integer(json_integer_value(
	    json_object_get(meta, "applied")) + 1));
	json_object_set_new(meta, "last_ts", json_string(ts));
	if ((types = json_object_get(meta, "types")) == NULL) {
		types = json_object();
		json_object_set_new(meta, "types", types);
	}
	n = json_object_get(types, type);
	json_object_set_new(types, type, json_integer(json_integer_value(n) +
	    1));
	return 0;
}
