/*
 * window.h - when scheduled work may start: a weekly window in a time
 * zone, "DAYS HH:MM-HH:MM [ZONE]" (issue 28: rotation windows).
 *
 * DAYS is daily, or days (mon, tue, wed, thu, fri, sat, sun) and ranges
 * of them (mon-fri) separated by commas; the times are the zone's wall
 * clock, the end not included; an end at or before the start runs past
 * midnight into the next day (sat 22:00-02:00 is open from Saturday
 * 22:00 to Sunday 02:00).  ZONE is an IANA name the system's time zone
 * database holds (Europe/Berlin), or UTC, the default.  Daylight saving
 * is the database's: a window is wall-clock time, so in the hour that
 * does not exist it is shorter, in the hour that happens twice longer.
 *
 * Pure but for the zone database, which glibc reads through TZ: the
 * conversion holds a lock of this module and restores TZ, so no caller
 * sees another's zone (nothing else in tally reads local time: logs and
 * events are UTC).  TZ is put in the environment before main
 * (":/etc/localtime", what unset means, when it is not there), so that
 * setting it moves nothing another thread's getenv reads.  Errors:
 * TL_EINVAL with why (TL_WHY_MAX bytes) naming what in the spec is
 * wrong.
 */
#ifndef TL_WINDOW_H
#define TL_WINDOW_H

#include <stdint.h>

#include "error.h"

#define TL_WIN_SPEC_MAX	128	/* bytes of a spec, without the NUL */
#define TL_WIN_ZONE_MAX	64

struct tl_win {
	uint8_t	 days;			/* bit 0 Sunday ... bit 6 Saturday */
	int	 start, end;		/* minutes after local midnight */
	char	 zone[TL_WIN_ZONE_MAX];	/* "UTC" or a database name */
};

/* Parses spec into w: 0, or TL_EINVAL (why). */
int	tl_win_parse(const char *spec, struct tl_win *w, char *why);
/* 1 when w is open at now (seconds since the epoch), else 0. */
int	tl_win_open(const struct tl_win *w, int64_t now);
/*
 * When w next opens at or after now (seconds since the epoch, to the
 * minute; now itself when open), or -1 when it does not within 8 days.
 */
int64_t	tl_win_next(const struct tl_win *w, int64_t now);

#endif /* TL_WINDOW_H */
