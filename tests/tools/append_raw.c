/*
 * append_raw.c - appends one encoded event to a log through
 * tl_log_append_raw, as a follower does, but without any signature
 * beside it: what a home holding an event nobody authenticated looks
 * like (tests/integration/91_forged_event.sh, which tally promote must
 * refuse).  For tests only.
 *
 *   append_raw LOGDIR ENVELOPE_FILE
 *
 * Prints the event's sequence number; exits 1 with the reason when the
 * log refuses it (a gap, a broken link, a version that does not follow).
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/log.h"

struct arg {
	const void	*raw;
	size_t		 len;
	uint64_t	 seq;
	char		 why[TL_WHY_MAX];
};

static int
append_cb(struct tl_txn *t, void *p)
{
	struct arg *a = p;

	return tl_log_append_raw(t, a->raw, a->len, NULL, &a->seq, a->why);
}

int
main(int argc, char **argv)
{
	struct tl_log *log = NULL;
	struct arg a = { NULL, 0, 0, "" };
	static char buf[1 << 20];
	FILE *f;
	int rc;

	if (argc != 3) {
		fprintf(stderr, "usage: append_raw LOGDIR ENVELOPE_FILE\n");
		return 2;
	}
	if ((f = fopen(argv[2], "rb")) == NULL) {
		perror(argv[2]);
		return 1;
	}
	a.len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	a.raw = buf;
	if ((rc = tl_log_open(argv[1], 0, &log)) != 0) {
		fprintf(stderr, "append_raw: %s: %s\n", argv[1],
		    tl_strerror(rc));
		return 1;
	}
	rc = tl_log_write(log, append_cb, &a);
	tl_log_close(log);
	if (rc != 0) {
		fprintf(stderr, "append_raw: %s (%s)\n", tl_strerror(rc),
		    a.why);
		return 1;
	}
	printf("%llu\n", (unsigned long long)a.seq);
	return 0;
}
