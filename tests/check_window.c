/*
 * check_window.c - rotation windows (core/window.h): what a spec may
 * say, and when a window is open, in UTC and across a zone's daylight
 * saving changes.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/window.h"

/* Seconds since the epoch of a UTC date and time. */
static int64_t
utc(int y, int mo, int d, int h, int mi)
{
	struct tm tm = { 0 };

	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	return (int64_t)timegm(&tm);
}

START_TEST(test_parse)
{
	static const char *const good[] = {
		"daily 02:00-04:00", "sat,sun 02:00-05:00 Europe/Berlin",
		"mon-fri 22:00-02:00 UTC", "fri-mon 00:00-23:59",
		"  tue   01:30-01:31  America/New_York ",
	};
	static const struct {
		const char *spec, *says;
	} bad[] = {
		{ "", "expected DAYS" },
		{ "daily", "expected DAYS" },
		{ "weekends 02:00-04:00", "the days are" },
		{ "mon,,tue 02:00-04:00", "the days are" },
		{ "mon, 02:00-04:00", "the days are" },
		{ "mon-funday 02:00-04:00", "the days are" },
		{ "daily 2:00-4:00", "the times are" },
		{ "daily 24:00-01:00", "the times are" },
		{ "daily 02:60-04:00", "the times are" },
		{ "daily 02:00-02:00", "is empty" },
		{ "daily 02:00-04:00 Mars/Olympus", "no such time zone" },
		{ "daily 02:00-04:00 ../../etc/passwd", "no such time zone" },
		{ "daily 02:00-04:00 /etc/localtime", "no such time zone" },
		{ "daily 02:00-04:00 UTC extra", "something after" },
	};
	struct tl_win w;
	char why[TL_WHY_MAX];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(tl_win_parse(good[i], &w, why) == 0, "%s: %s",
		    good[i], why);
	ck_assert_int_eq(tl_win_parse("sat,sun 02:00-05:00 Europe/Berlin", &w,
	    why), 0);
	ck_assert_int_eq(w.days, 0x41);
	ck_assert_int_eq(w.start, 120);
	ck_assert_int_eq(w.end, 300);
	ck_assert_str_eq(w.zone, "Europe/Berlin");
	ck_assert_int_eq(tl_win_parse("fri-mon 00:00-23:59", &w, why), 0);
	ck_assert_int_eq(w.days, 0x63);		/* fri sat sun mon */
	ck_assert_str_eq(w.zone, "UTC");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(tl_win_parse(bad[i].spec, &w, why) == TL_EINVAL,
		    "'%s' taken", bad[i].spec);
		ck_assert_msg(strstr(why, bad[i].says) != NULL, "'%s': %s",
		    bad[i].spec, why);
	}
}
END_TEST

START_TEST(test_open_utc)
{
	struct tl_win w;
	char why[TL_WHY_MAX];

	/* 2026-12-05 is a Saturday. */
	ck_assert_int_eq(tl_win_parse("sat 02:00-04:00", &w, why), 0);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 5, 1, 59)), 0);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 5, 2, 0)), 1);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 5, 3, 59)), 1);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 5, 4, 0)), 0);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 6, 3, 0)), 0);
	ck_assert_int_eq(tl_win_next(&w, utc(2026, 12, 3, 12, 0)),
	    utc(2026, 12, 5, 2, 0));
	ck_assert_int_eq(tl_win_next(&w, utc(2026, 12, 5, 3, 0)),
	    utc(2026, 12, 5, 3, 0));

	/* Past midnight: Saturday evening into Sunday morning only. */
	ck_assert_int_eq(tl_win_parse("sat 22:00-02:00", &w, why), 0);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 5, 23, 0)), 1);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 6, 1, 59)), 1);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 6, 2, 0)), 0);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 6, 23, 0)), 0);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 5, 1, 0)), 0);
}
END_TEST

START_TEST(test_open_zone)
{
	struct tl_win w;
	char why[TL_WHY_MAX];

	/* Berlin: UTC+1 in winter, UTC+2 in summer. */
	ck_assert_int_eq(tl_win_parse("daily 02:00-03:00 Europe/Berlin", &w,
	    why), 0);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 3, 1, 30)), 1);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 3, 2, 30)), 0);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 7, 3, 0, 30)), 1);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 7, 3, 1, 30)), 0);
	/*
	 * 2026-03-29, 02:00 Berlin time does not exist (01:00 UTC is
	 * 03:00 CEST): the window is empty that night.
	 */
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 3, 29, 0, 59)), 0);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 3, 29, 1, 0)), 0);
	ck_assert_int_eq(tl_win_next(&w, utc(2026, 3, 28, 23, 0)),
	    utc(2026, 3, 30, 0, 0));
	/* 2026-10-25, 02:00-03:00 Berlin happens twice: two hours open. */
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 10, 25, 0, 0)), 1);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 10, 25, 1, 59)), 1);
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 10, 25, 2, 0)), 0);
	/* Present from before main (window.c), and what it was after. */
	ck_assert_ptr_nonnull(getenv("TZ"));
	setenv("TZ", "Asia/Tokyo", 1);
	tzset();
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 3, 1, 30)), 1);
	ck_assert_str_eq(getenv("TZ"), "Asia/Tokyo");
	unsetenv("TZ");
	ck_assert_int_eq(tl_win_open(&w, utc(2026, 12, 3, 1, 30)), 1);
	ck_assert_ptr_null(getenv("TZ"));
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("window");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_parse);
	tcase_add_test(tc, test_open_utc);
	tcase_add_test(tc, test_open_zone);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
