/*
 * agents.c - what each node's agent says it holds, against the record
 * (status.h: tl_status_agents).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/bytes.h"
#include "core/nodewire.h"
#include "grant.h"
#include "record.h"
#include "rotation.h"
#include "status.h"

struct agents_arg {
	struct tl_txn		*t;
	const struct tl_proj	*p;
	const char		*module;	/* NULL: every holder */
	uint64_t		 now_ns, silence_ns;
	int			 live;		/* last seen from the scratch table */
	json_t			*out;
	json_t			*wrong;		/* holders off the record */
	int			 silent;
	int			 withdrawn;	/* held, though withdrawn from it */
};

/*
 * What a node's agent says it holds against the record: "" when it
 * may hold it, else why not (a version retired, or one the record
 * never delivered to that holder).  A version a running rotation
 * still keeps working (its from) is not retired yet.
 */
static void
held_vs_record(struct agents_arg *aa, const char *node, const char *grant,
    const char *holder, uint64_t v, char *why, size_t wl, uint64_t *cur)
{
	struct tl_grant g;
	struct tl_rotation r;
	uint64_t delivered;

	why[0] = '\0';
	*cur = 0;
	if (tl_grant_get(aa->t, aa->p, grant, &g, NULL) != 0 ||
	    strcmp(g.state, TL_GRANT_PROVISIONED) != 0)
		return;
	*cur = g.version;
	delivered = tl_grant_delivered(aa->t, aa->p, grant, holder);
	if (v > delivered)
		snprintf(why, wl, "%s holds v%llu of grant/%s, which the record "
		    "never delivered to %s; the record says v%llu", node,
		    (unsigned long long)v, grant, holder,
		    (unsigned long long)g.version);
	else if (v < g.version && !(tl_rot_get(aa->t, aa->p, grant, &r) == 0 &&
	    r.from == v))
		snprintf(why, wl, "%s holds v%llu of grant/%s, retired; the "
		    "record says v%llu", node, (unsigned long long)v, grant,
		    (unsigned long long)g.version);
}

/* nr/NODE: u64be ts of the latest node.reported, then its JSON. */
static int
one_agent(const char *node, const void *val, size_t vlen, void *arg)
{
	struct agents_arg *aa = arg;
	const uint8_t *v = val;
	uint64_t ts = 0, age, seen, recorded;
	json_t *rep, *held, *h, *mine;
	size_t i, ml = aa->module ? strlen(aa->module) : 0;

	if (vlen < 8)
		return 0;
	ts = recorded = tl_get_be64(v);
	/*
	 * The report is recorded when it changes; the agent's heartbeat
	 * (every --report-interval) only moves its last-seen time.
	 */
	if (aa->live && tl_nw_seen_get(aa->t, node, &seen) == 0 && seen > ts)
		ts = seen;
	if ((rep = json_loadb((const char *)v + 8, vlen - 8, 0, NULL)) == NULL)
		return 0;
	held = json_object_get(rep, "held");
	mine = json_array();
	json_array_foreach(held, i, h) {
		const char *hd = json_string_value(json_object_get(h,
		    "holder"));
		const char *gr = json_string_value(json_object_get(h,
		    "grant"));
		char why[TL_WHY_MAX];
		uint64_t cur;

		if (hd == NULL || gr == NULL || (aa->module != NULL &&
		    (strncmp(hd, aa->module, ml) != 0 || hd[ml] != '@')))
			continue;
		/*
		 * The record delivers it nothing (credential.withdrawn) while
		 * the agent still reports it: not healthy until it drops it.
		 */
		if (tl_grant_delivered(aa->t, aa->p, gr, hd) == 0) {
			json_object_set_new(h, "withdrawn", json_true());
			aa->withdrawn++;
			json_array_append(mine, h);
			continue;
		}
		held_vs_record(aa, node, gr, hd, (uint64_t)json_integer_value(
		    json_object_get(h, "version")), why, sizeof(why), &cur);
		if (why[0] != '\0') {
			const char *at = strchr(hd, '@');

			json_object_set_new(h, "off_record", json_string(why));
			json_array_append_new(aa->wrong, json_pack("{s:s,s:s%,"
			    "s:s,s:s,s:O,s:I,s:s}", "node", node, "module", hd,
			    (size_t)(at ? at - hd : (ptrdiff_t)strlen(hd)),
			    "holder", hd, "grant", gr, "holds", json_object_get(h,
			    "version"), "record", (json_int_t)cur, "reason",
			    why));
		}
		json_array_append(mine, h);
	}
	if (aa->module != NULL && json_array_size(mine) == 0) {
		json_decref(mine);
		json_decref(rep);
		return 0;
	}
	age = aa->now_ns > ts ? aa->now_ns - ts : 0;
	if (age > aa->silence_ns)
		aa->silent++;
	json_array_append_new(aa->out, json_pack("{s:s,s:O,s:I,s:I,s:I,s:o,"
	    "s:O?,s:b,s:O?}", "node", node, "agent", json_object_get(rep,
	    "agent"), "reported_ns", (json_int_t)ts, "recorded_ns",
	    (json_int_t)recorded, "age_ns", (json_int_t)age, "held",
	    mine, "last_reload", json_object_get(rep, "last_reload"),
	    "silent", age > aa->silence_ns, "refused", json_object_get(rep,
	    "refused")));
	json_decref(rep);
	return 0;
}

int
tl_status_agents(struct tl_txn *t, const struct tl_proj *p,
    const char *module, uint64_t now_ns, uint64_t silence_ns, int live,
    struct tl_status_agents *out)
{
	struct agents_arg aa;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(&aa, 0, sizeof(aa));
	aa.t = t;
	aa.p = p;
	aa.module = module;
	aa.now_ns = now_ns;
	aa.silence_ns = silence_ns;
	aa.live = live;
	if ((aa.out = json_array()) == NULL ||
	    (aa.wrong = json_array()) == NULL) {
		json_decref(aa.out);
		return ENOMEM;
	}
	if ((rc = tl_rec_scan(t, p->graph, "nr/", one_agent, &aa)) != 0) {
		json_decref(aa.out);
		json_decref(aa.wrong);
		return rc;
	}
	out->agents = aa.out;
	out->wrong = aa.wrong;
	out->silent = aa.silent;
	out->withdrawn = aa.withdrawn;
	return 0;
}

/*
 * A holder whose agent holds what the record says it must not (a
 * retired version, one never delivered): its module is not ready, and
 * says why (tally status exits 6).
 */
void
tl_status_off_record(json_t *doc, const json_t *wrong)
{
	const json_t *w;
	json_t *mods = json_object_get(doc, "modules"), *m, *one[1];
	size_t i, j, n;

	one[0] = doc;
	n = mods != NULL ? json_array_size(mods) : 1;
	for (j = 0; j < n; j++) {
		m = mods != NULL ? json_array_get(mods, j) : one[0];
		json_array_foreach(wrong, i, w) {
			const char *mn = json_string_value(json_object_get(m,
			    "module"));
			json_t *l;

			if (mn == NULL || strcmp(mn, json_string_value(
			    json_object_get(w, "module"))) != 0)
				continue;
			if ((l = json_object_get(m, "off_record")) == NULL) {
				l = json_array();
				json_object_set_new(m, "off_record", l);
			}
			json_array_append(l, json_object_get(w, "reason"));
			json_object_set_new(m, "state",
			    json_string("unhealthy"));
		}
	}
}
