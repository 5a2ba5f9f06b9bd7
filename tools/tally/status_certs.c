/*
 * status_certs.c - what tally status says of certificates (the mesh
 * CA's, reactors/issue.c): holders that have not taken their renewal,
 * before the certificate they still use expires, and the certificates
 * a revocation leaves valid until their not-after.
 *
 * Read from the graph: ci/GRANT/HOLDER (the latest certificate issued
 * to a holder) and cs/GRANT/SERIAL (every certificate of the grant not
 * yet expired when the grant last had one issued: projections/graph.c).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "projections/grant.h"
#include "projections/record.h"
#include "projections/rotation.h"
#include "tally.h"

/* The record at prefix + rest (a key tl_rec_keys collected). */
static int
get_at(struct tl_txn *t, const struct tl_proj *p, const char *prefix,
    const char *rest, struct tl_rec *r)
{
	char k[TL_KEY_MAX];
	int rc;

	if ((rc = tl_key(k, "%s%s", prefix, rest)) != 0)
		return rc;
	return tl_rec_get(t, p->graph, k, r);
}

/*
 * The certificate holder runs with: of grant's certificates for holder
 * (cs/), the newest of a version it acknowledged.  0 and *out set; 1:
 * none.
 */
static int
in_use(struct tl_txn *t, const struct tl_proj *p, const char *grant,
    const char *holder, char serial[65], uint64_t *version,
    uint64_t *not_after)
{
	char prefix[TL_KEY_MAX];
	struct tl_rec_keys ks = { NULL, 0, 0 };
	size_t i;
	int found = 0;

	*version = 0;
	if (tl_key(prefix, "cs/%s/", grant) != 0 ||
	    tl_rec_keys(t, p->graph, prefix, &ks) != 0) {
		tl_rec_keys_free(&ks);
		return 1;
	}
	for (i = 0; i < ks.n; i++) {
		struct tl_rec r;
		char h[140] = "";
		uint64_t v;

		if (get_at(t, p, prefix, ks.v[i], &r) != 0)
			continue;
		tl_bn_getstr(r.m, "holder", h, sizeof(h));
		v = tl_bn_getu64(r.m, "version", 0);
		if (strcmp(h, holder) == 0 && v > *version &&
		    tl_rot_acked(t, p, grant, v, holder)) {
			*version = v;
			*not_after = tl_bn_getu64(r.m, "not_after", 0);
			snprintf(serial, 65, "%s", ks.v[i]);
			found = 1;
		}
		tl_rec_close(&r);
	}
	tl_rec_keys_free(&ks);
	return found ? 0 : 1;
}

int
st_certs_lagging(struct tl_txn *t, const struct tl_proj *p, uint64_t now_ns,
    json_t *out)
{
	struct tl_rec_keys ks = { NULL, 0, 0 };
	size_t i;
	int rc;

	if ((rc = tl_rec_keys(t, p->graph, "ci/", &ks)) != 0) {
		tl_rec_keys_free(&ks);
		return rc;
	}
	for (i = 0; i < ks.n; i++) {
		char grant[TL_GRANT_ID_MAX + 1] = "", holder[140] = "";
		char serial[65];
		struct tl_grant g;
		struct tl_rec r;
		uint64_t v, renew, na, uv;

		if (get_at(t, p, "ci/", ks.v[i], &r) != 0)
			continue;
		tl_bn_getstr(r.m, "grant", grant, sizeof(grant));
		tl_bn_getstr(r.m, "holder", holder, sizeof(holder));
		v = tl_bn_getu64(r.m, "version", 0);
		renew = tl_bn_getu64(r.m, "renew_at", 0);
		tl_rec_close(&r);
		if (tl_grant_get(t, p, grant, &g, NULL) != 0 ||
		    strcmp(g.state, TL_GRANT_PROVISIONED) != 0)
			continue;
		/*
		 * Behind: its newest certificate is not the grant's version,
		 * or it has not acknowledged it, or the renewal point passed
		 * and no renewal started (tallyd not running?).
		 */
		if (v == g.version && tl_rot_acked(t, p, grant, v, holder) &&
		    (renew == 0 || now_ns < renew * 1000000000u))
			continue;
		if (in_use(t, p, grant, holder, serial, &uv, &na) != 0)
			continue;	/* none yet: the agents' lines say so */
		json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:I,s:I,"
		    "s:I,s:b}", "grant", grant, "holder", holder, "serial",
		    serial, "version", (json_int_t)uv, "not_after",
		    (json_int_t)na, "wanted", (json_int_t)g.version, "expired",
		    na * 1000000000u <= now_ns));
	}
	tl_rec_keys_free(&ks);
	return 0;
}

int
st_certs_valid(struct tl_txn *t, const struct tl_proj *p, const char *grant,
    uint64_t now_ns, json_t *out, uint64_t *until_s)
{
	char prefix[TL_KEY_MAX];
	struct tl_rec_keys ks = { NULL, 0, 0 };
	size_t i;
	int rc;

	*until_s = 0;
	if ((rc = tl_key(prefix, "cs/%s/", grant)) != 0 ||
	    (rc = tl_rec_keys(t, p->graph, prefix, &ks)) != 0) {
		tl_rec_keys_free(&ks);
		return rc;
	}
	for (i = 0; i < ks.n; i++) {
		struct tl_rec r;
		char h[140] = "";
		uint64_t na;

		if (get_at(t, p, prefix, ks.v[i], &r) != 0)
			continue;
		tl_bn_getstr(r.m, "holder", h, sizeof(h));
		na = tl_bn_getu64(r.m, "not_after", 0);
		if (na * 1000000000u > now_ns) {
			json_array_append_new(out, json_pack("{s:s,s:s,s:I,"
			    "s:I}", "serial", ks.v[i],
			    "holder", h, "version", (json_int_t)
			    tl_bn_getu64(r.m, "version", 0), "not_after",
			    (json_int_t)na));
			if (na > *until_s)
				*until_s = na;
		}
		tl_rec_close(&r);
	}
	tl_rec_keys_free(&ks);
	return 0;
}

static void
utc(uint64_t s, char out[32])
{
	time_t u = (time_t)s;
	struct tm tm;

	snprintf(out, 32, "?");
	if (gmtime_r(&u, &tm) != NULL)
		strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void
st_certs_print_lagging(const json_t *arr)
{
	const json_t *e;
	size_t i;

	json_array_foreach(arr, i, e) {
		char when[32];

		utc((uint64_t)json_integer_value(json_object_get(e,
		    "not_after")), when);
		printf("  certificate of %s for %s (serial %s, v%lld) %s %s: "
		    "it has not taken v%lld\n", json_string_value(
		    json_object_get(e, "holder")), json_string_value(
		    json_object_get(e, "grant")), json_string_value(
		    json_object_get(e, "serial")), json_integer_value(
		    json_object_get(e, "version")), json_is_true(
		    json_object_get(e, "expired")) ? "EXPIRED at" :
		    "expires at", when, json_integer_value(json_object_get(e,
		    "wanted")));
	}
}

void
st_certs_print_valid(const json_t *arr)
{
	const json_t *e;
	size_t i;

	json_array_foreach(arr, i, e) {
		char when[32];

		utc((uint64_t)json_integer_value(json_object_get(e,
		    "not_after")), when);
		printf("    serial %s (%s, v%lld) valid until %s\n",
		    json_string_value(json_object_get(e, "serial")),
		    json_string_value(json_object_get(e, "holder")),
		    json_integer_value(json_object_get(e, "version")), when);
	}
}
