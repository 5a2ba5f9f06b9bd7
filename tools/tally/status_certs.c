/*
 * status_certs.c - how tally status prints certificates: the holders
 * behind on their renewal and the certificates a revocation leaves
 * valid, as tl_status_attention (projections/reminders.c) found them.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tally.h"

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
