/*
 * check_vec.c - growing arrays (core/vec.h): contents kept across
 * moves, capacity doubled, sizes that overflow refused with the array
 * left as it was, and the guarded-memory variant zeroing what it adds.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/secret.h"
#include "core/vec.h"

struct rec {
	uint64_t	n;
	char		name[24];
};

START_TEST(test_contents_kept)
{
	struct rec *v = NULL;
	size_t cap = 0, n, i, grows = 0, last = 0;

	/* One element at a time, as the callers append. */
	for (n = 0; n < 10000; n++) {
		ck_assert_int_eq(tl_vec_grow(&v, &cap, n + 1, sizeof(*v)), 0);
		ck_assert_uint_ge(cap, n + 1);
		if (cap != last) {
			grows++;
			last = cap;
		}
		v[n].n = n * 7;
		snprintf(v[n].name, sizeof(v[n].name), "rec-%zu", n);
	}
	for (i = 0; i < n; i++) {
		char want[24];

		snprintf(want, sizeof(want), "rec-%zu", i);
		ck_assert_uint_eq(v[i].n, i * 7);
		ck_assert_str_eq(v[i].name, want);
	}
	/* Doubling from TL_VEC_MIN: 8, 16, ..., 16384 is 12 capacities. */
	ck_assert_uint_eq(cap, 16384);
	ck_assert_uint_eq(grows, 12);
	/* Asking for what it holds changes nothing. */
	ck_assert_int_eq(tl_vec_grow(&v, &cap, 5, sizeof(*v)), 0);
	ck_assert_uint_eq(cap, 16384);
	free(v);
}
END_TEST

START_TEST(test_jump)
{
	int *v = NULL;
	size_t cap = 0;

	/* A need past double the capacity is met at once. */
	ck_assert_int_eq(tl_vec_grow(&v, &cap, 1000, sizeof(*v)), 0);
	ck_assert_uint_ge(cap, 1000);
	v[999] = 42;
	ck_assert_int_eq(tl_vec_grow(&v, &cap, cap + 1, sizeof(*v)), 0);
	ck_assert_int_eq(v[999], 42);
	free(v);
}
END_TEST

START_TEST(test_overflow_refused)
{
	struct rec *v = NULL, *was;
	size_t cap = 0, capwas;

	ck_assert_int_eq(tl_vec_grow(&v, &cap, 3, sizeof(*v)), 0);
	v[2].n = 99;
	was = v;
	capwas = cap;
	/* need * elsize past SIZE_MAX: refused before any allocation. */
	ck_assert_int_eq(tl_vec_grow(&v, &cap, SIZE_MAX / sizeof(*v) + 1,
	    sizeof(*v)), ENOMEM);
	ck_assert_ptr_eq(v, was);
	ck_assert_uint_eq(cap, capwas);
	ck_assert_int_eq(tl_vec_grow(&v, &cap, SIZE_MAX, 2), ENOMEM);
	ck_assert_ptr_eq(v, was);
	ck_assert_uint_eq(v[2].n, 99);
	free(v);
}
END_TEST

START_TEST(test_secret)
{
	struct rec *v = NULL;
	size_t cap = 0, n, i;

	for (n = 0; n < 100; n++) {
		ck_assert_int_eq(tl_vec_grow_secret(&v, &cap, n + 1,
		    sizeof(*v)), 0);
		/* What it added is zeroed (the guarded allocator's rule). */
		for (i = n; i < cap; i++)
			ck_assert_uint_eq(v[i].n, 0);
		v[n].n = n + 1;
	}
	for (i = 0; i < n; i++)
		ck_assert_uint_eq(v[i].n, i + 1);
	ck_assert_int_eq(tl_vec_grow_secret(&v, &cap, SIZE_MAX, sizeof(*v)),
	    ENOMEM);
	ck_assert_uint_eq(v[99].n, 100);
	tl_secret_free(v);
}
END_TEST

static Suite *
vec_suite(void)
{
	Suite *s = suite_create("vec");
	TCase *tc = tcase_create("grow");

	tcase_add_test(tc, test_contents_kept);
	tcase_add_test(tc, test_jump);
	tcase_add_test(tc, test_overflow_refused);
	tcase_add_test(tc, test_secret);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(vec_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
