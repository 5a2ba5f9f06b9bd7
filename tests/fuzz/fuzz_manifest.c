/*
 * fuzz_manifest.c - libFuzzer target for the manifest loader.
 *
 *   clang-14 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
 *       tools/tally/manifest*.c tests/fuzz/fuzz_manifest.c \
 *       $(pkg-config --cflags --libs yaml-0.1) -o fuzz_manifest
 *   ./fuzz_manifest -max_total_time=300 tests/fuzz/corpus/manifest
 *
 * Beyond "does not crash", it checks the promises manifest.h makes,
 * trapping when one is broken: a result xor errors, errors with a
 * position and sorted, arrays sorted and findable, every string
 * terminated.  A crashing input belongs in tests/data/manifests/crash-*,
 * where the Check suite parses it on every run.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "tools/tally/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)	do { if (!(x)) __builtin_trap(); } while (0)

static const char *const drivers[] = {
	"postgres", "amqp-vhost", "directory", NULL
};

/* strlen reads every byte: ASan sees a missing terminator or a stale pointer. */
static void
touch(const char *s)
{
	CHECK(s != NULL);
	(void)strlen(s);
}

static void
check_maps(const struct tl_mf_map *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		touch(v[i].field);
		touch(v[i].var);
		CHECK(i == 0 || strcmp(v[i - 1].field, v[i].field) < 0);
	}
}

static void
check_module(const struct tl_mf_set *set, const struct tl_mf_module *m)
{
	size_t i;

	touch(m->name);
	touch(m->file);
	CHECK(m->line >= 1);
	CHECK(tl_mf_set_find(set, m->name) == m);
	CHECK(tl_mf_module_equal(m, m));
	for (i = 0; i < m->nenv; i++) {
		touch(m->env[i].name);
		touch(m->env[i].def);
		CHECK(i == 0 || strcmp(m->env[i - 1].name, m->env[i].name) < 0);
	}
	for (i = 0; i < m->nreqs; i++) {
		const struct tl_mf_req *r = &m->reqs[i];

		touch(r->name);
		touch(r->target);
		CHECK(tl_mf_module_req(m, r->name) == r);
		CHECK(r->kind == TL_MF_PRESENCE ||
		    r->kind == TL_MF_INSTANTIATION);
		if (r->kind == TL_MF_INSTANTIATION) {
			touch(r->type);
			touch(r->resource);
		}
		if (r->provider_node != NULL) {
			touch(r->provider_node);
			touch(r->provider_module);
		}
		if (r->migrations != NULL)
			CHECK(r->migrations[0] == '/');
		CHECK(r->max_credential_age >= 0 &&
		    r->max_credential_age <= TL_MF_MAX_AGE);
		check_maps(r->env, r->nenv);
	}
	for (i = 0; i < m->nprovides; i++) {
		touch(m->provides[i].type);
		touch(m->provides[i].driver);
	}
	for (i = 0; i < m->nembedded; i++) {
		touch(m->embedded[i].name);
		touch(m->embedded[i].type);
		if (m->embedded[i].runs != NULL)
			touch(m->embedded[i].runs);
		check_maps(m->embedded[i].env, m->embedded[i].nenv);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tl_mf_errors errs = TL_MF_ERRORS_INIT;
	struct tl_mf_set *set = NULL;
	char line[1024];
	size_t i;
	int rc;

	rc = tl_mf_parse_buffer("fuzz.yaml", data, size, "/fuzz", drivers,
	    &set, &errs);
	CHECK(rc == 0 || rc == TL_EMANIFEST || rc == TL_ETOOBIG);
	CHECK((rc == 0) == (set != NULL));
	CHECK(rc != TL_EMANIFEST || errs.n > 0);
	CHECK(rc != 0 || (errs.n == 0 && errs.dropped == 0));
	CHECK(errs.n <= TL_MF_ERRORS_MAX);
	for (i = 0; i < errs.n; i++) {
		const struct tl_mf_error *e = &errs.v[i];

		CHECK(e->line >= 1 && e->col >= 1);
		CHECK(i == 0 || e[-1].line < e->line ||
		    (e[-1].line == e->line && e[-1].col <= e->col));
		CHECK(memchr(e->field, '\0', sizeof e->field) != NULL);
		CHECK(memchr(e->msg, '\0', sizeof e->msg) != NULL);
		CHECK(tl_mf_error_format(e, line, sizeof line) > 0);
	}
	for (i = 0; i < tl_mf_set_count(set); i++)
		check_module(set, tl_mf_set_module(set, i));
	tl_mf_set_free(set);
	tl_mf_errors_free(&errs);
	return 0;
}
