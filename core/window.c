/*
 * window.c - weekly windows in a time zone (window.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "window.h"

static const char *const day_names[7] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat"
};

static int
refuse(char *why, const char *fmt, const char *arg)
{
	if (why != NULL)
		snprintf(why, TL_WHY_MAX, fmt, arg);
	return TL_EINVAL;
}

static int
day_of(const char *s, size_t n)
{
	int i;

	for (i = 0; i < 7; i++)
		if (n == 3 && strncmp(s, day_names[i], 3) == 0)
			return i;
	return -1;
}

/* "mon,wed-fri" or "daily" into a mask; -1 when it is not one. */
static int
parse_days(const char *s, size_t n)
{
	int mask = 0, a, b;
	size_t i = 0, j;

	if (n == 5 && strncmp(s, "daily", 5) == 0)
		return 0x7f;
	while (i < n) {
		for (j = i; j < n && s[j] != ','; j++)
			;
		if (j - i == 3 && (a = day_of(s + i, 3)) >= 0)
			mask |= 1 << a;
		else if (j - i == 7 && s[i + 3] == '-' &&
		    (a = day_of(s + i, 3)) >= 0 &&
		    (b = day_of(s + i + 4, 3)) >= 0) {
			for (;; a = (a + 1) % 7) {
				mask |= 1 << a;
				if (a == b)
					break;
			}
		} else
			return -1;
		i = j + 1;
		if (j < n && i == n)
			return -1;	/* a trailing comma */
	}
	return mask;
}

/* "HH:MM" into minutes; -1 when it is not a time of day. */
static int
parse_hm(const char *s, size_t n)
{
	int h, m;

	if (n != 5 || s[2] != ':' || s[0] < '0' || s[0] > '2' ||
	    s[1] < '0' || s[1] > '9' || s[3] < '0' || s[3] > '5' ||
	    s[4] < '0' || s[4] > '9')
		return -1;
	h = (s[0] - '0') * 10 + (s[1] - '0');
	m = (s[3] - '0') * 10 + (s[4] - '0');
	return h > 23 ? -1 : h * 60 + m;
}

/* Whether the system's zone database holds name (a TZif file). */
static int
zone_known(const char *name)
{
	char path[TL_WIN_ZONE_MAX + 32], magic[4];
	size_t i, n = strlen(name);
	int fd, ok;

	if (n == 0 || n >= TL_WIN_ZONE_MAX || name[0] == '/' ||
	    strstr(name, "..") != NULL)
		return 0;
	for (i = 0; i < n; i++)
		if (!((name[i] >= 'A' && name[i] <= 'Z') ||
		    (name[i] >= 'a' && name[i] <= 'z') ||
		    (name[i] >= '0' && name[i] <= '9') || name[i] == '/' ||
		    name[i] == '_' || name[i] == '-' || name[i] == '+'))
			return 0;
	snprintf(path, sizeof(path), "/usr/share/zoneinfo/%s", name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 &&
	    (errno != ELOOP || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0))
		return 0;
	ok = read(fd, magic, 4) == 4 && memcmp(magic, "TZif", 4) == 0;
	close(fd);
	return ok;
}

int
tl_win_parse(const char *spec, struct tl_win *w, char *why)
{
	const char *p[4];
	size_t len[4], n = 0, i = 0, k;
	int days, st, en;

	memset(w, 0, sizeof(*w));
	if (spec == NULL || strlen(spec) > TL_WIN_SPEC_MAX)
		return refuse(why, "%s", "a rotation window is at most 128 "
		    "bytes");
	while (spec[i] != '\0') {
		if (spec[i] == ' ' || spec[i] == '\t') {
			i++;
			continue;
		}
		if (n == 3)
			return refuse(why, "'%.128s': expected DAYS HH:MM-HH:MM "
			    "[ZONE], and something after the zone", spec);
		p[n] = spec + i;
		for (k = i; spec[k] != '\0' && spec[k] != ' ' &&
		    spec[k] != '\t'; k++)
			;
		len[n++] = k - i;
		i = k;
	}
	if (n < 2)
		return refuse(why, "'%.128s': expected DAYS HH:MM-HH:MM [ZONE] "
		    "(e.g. sat,sun 02:00-05:00 Europe/Berlin)", spec);
	if ((days = parse_days(p[0], len[0])) <= 0)
		return refuse(why, "'%.128s': the days are daily, or mon ... sun "
		    "and ranges such as mon-fri, separated by commas", spec);
	if (len[1] != 11 || p[1][5] != '-' ||
	    (st = parse_hm(p[1], 5)) < 0 || (en = parse_hm(p[1] + 6, 5)) < 0)
		return refuse(why, "'%.128s': the times are HH:MM-HH:MM, 00:00 "
		    "to 23:59", spec);
	if (st == en)
		return refuse(why, "'%.128s': a window that ends where it starts "
		    "is empty (daily 00:00-23:59 is the whole day)", spec);
	w->days = (uint8_t)days;
	w->start = st;
	w->end = en;
	snprintf(w->zone, sizeof(w->zone), "UTC");
	if (n == 3) {
		if (len[2] >= TL_WIN_ZONE_MAX)
			return refuse(why, "'%.128s': the zone's name is too long",
			    spec);
		memcpy(w->zone, p[2], len[2]);
		w->zone[len[2]] = '\0';
		if (strcmp(w->zone, "UTC") != 0 && !zone_known(w->zone))
			return refuse(why, "'%.128s': no such time zone in the "
			    "system's database (/usr/share/zoneinfo; an IANA "
			    "name such as Europe/Berlin, or UTC)", spec);
	}
	return 0;
}

static pthread_mutex_t tz_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * TZ present in the environment from before main, so that setting it
 * later replaces one pointer in place and never moves the environment
 * another thread's getenv (libpq's, libcurl's) may be reading; glibc
 * keeps every value it set.  ":/etc/localtime" is what an unset TZ
 * means.
 */
__attribute__((constructor)) static void
tz_present(void)
{
	if (getenv("TZ") == NULL)
		setenv("TZ", ":/etc/localtime", 0);
}

/*
 * Into w's zone (the lock held and TZ set, unless it is UTC) and back
 * out: every conversion in between reads the zone glibc loaded once.
 * saved: what TZ was, for zone_leave.
 */
static void
zone_enter(const struct tl_win *w, char **saved)
{
	const char *old;

	*saved = NULL;
	if (strcmp(w->zone, "UTC") == 0)
		return;
	pthread_mutex_lock(&tz_lock);
	if ((old = getenv("TZ")) != NULL)
		*saved = strdup(old);
	setenv("TZ", w->zone, 1);
	tzset();
}

static void
zone_leave(const struct tl_win *w, char *saved)
{
	if (strcmp(w->zone, "UTC") == 0)
		return;
	if (saved != NULL)
		setenv("TZ", saved, 1);
	else
		unsetenv("TZ");	/* a caller removed it: as it was */
	tzset();
	pthread_mutex_unlock(&tz_lock);
	free(saved);
}

/* Whether w is open at now; inside zone_enter. */
static int
open_at(const struct tl_win *w, int64_t now)
{
	time_t t = (time_t)now;
	struct tm tm;
	int d, m, prev;

	if ((strcmp(w->zone, "UTC") == 0 ? gmtime_r(&t, &tm) :
	    localtime_r(&t, &tm)) == NULL)
		return 0;
	d = tm.tm_wday;
	m = tm.tm_hour * 60 + tm.tm_min;
	prev = (d + 6) % 7;
	if (w->start < w->end)
		return (w->days >> d & 1) && m >= w->start && m < w->end;
	/* Past midnight: the evening of a listed day, or the next morning. */
	return ((w->days >> d & 1) && m >= w->start) ||
	    ((w->days >> prev & 1) && m < w->end);
}

int
tl_win_open(const struct tl_win *w, int64_t now)
{
	char *saved;
	int open;

	zone_enter(w, &saved);
	open = open_at(w, now);
	zone_leave(w, saved);
	return open;
}

int64_t
tl_win_next(const struct tl_win *w, int64_t now)
{
	int64_t t, next = -1;
	char *saved;

	zone_enter(w, &saved);
	if (open_at(w, now))
		next = now;
	/* Minute by minute: the zone's offsets change on any minute. */
	for (t = now - now % 60 + 60; next < 0 && t <= now + 8 * 86400;
	    t += 60)
		if (open_at(w, t))
			next = t;
	zone_leave(w, saved);
	return next;
}
