/*
 * exit.h - the exit codes of tally and tallyd, in one table: both
 * programs' --help print it (tl_exit_print), and
 * tests/integration/04_docs.sh checks README.md, tally(1) and tallyd(8)
 * against what --help prints, so the pages cannot say otherwise.
 * Stable: scripts test them.  Header-only (each program links its own
 * copy of nothing: the table is a function's static data).
 */
#ifndef TL_EXIT_H
#define TL_EXIT_H

#include <stdio.h>

#define TL_EXIT_OK		0	/* success; everything healthy */
#define TL_EXIT_FAIL		1	/* the operation failed */
#define TL_EXIT_USAGE		2	/* bad command line */
#define TL_EXIT_NOTFOUND	3	/* no home, no log, no such module, … */
#define TL_EXIT_REFUSED		4	/* invalid input or a refused command */
#define TL_EXIT_CORRUPT		5	/* the log does not verify */
#define TL_EXIT_UNHEALTHY	6	/* something is not healthy */
#define TL_EXIT_LOCKED		7	/* held by another process */
#define TL_EXIT_REPAIRED	8	/* check: drift found, all repaired */
#define TL_EXIT_DEPOSED		9	/* tallyd: another leader promoted */

/* Who exits with a code (tl_exit_desc.who). */
#define TL_EXIT_BY_TALLY	1u
#define TL_EXIT_BY_TALLYD	2u

struct tl_exit_desc {
	int		 code;		/* -1 ends the table */
	unsigned	 who;		/* TL_EXIT_BY_* */
	/*
	 * One line, as --help prints it; its words up to the first ':',
	 * ',', ';' or '(' are what every page's entry for the code says.
	 */
	const char	*meaning;
};

static inline const struct tl_exit_desc *
tl_exit_table(void)
{
	static const struct tl_exit_desc t[] = {
	{ TL_EXIT_OK, 3, "success (for status, check and tallyd "
	    "--once: everything healthy; tallyd: stopped by a signal)" },
	{ TL_EXIT_FAIL, 3, "the operation failed "
	    "(a system error, a master key that cannot be read, a cluster "
	    "whose etcd has no quorum)" },
	{ TL_EXIT_USAGE, 3, "bad command line" },
	{ TL_EXIT_NOTFOUND, 3, "not found: no tally home or "
	    "no log at it, no such module, node or grant (tallyd: a "
	    "cluster's follower behind the tail etcd still holds)" },
	{ TL_EXIT_REFUSED, 3, "refused: invalid input, a "
	    "conflict, or a command the graph refuses (tallyd: a standby's "
	    "home without --follow, or --follow on a leader's)" },
	{ TL_EXIT_CORRUPT, 3, "the log does not "
	    "verify (the first bad sequence number is printed), or its data "
	    "file is damaged" },
	{ TL_EXIT_UNHEALTHY, 3, "something is not healthy, or "
	    "work remains (status, check, bootstrap, tallyd --once)" },
	{ TL_EXIT_LOCKED, 3, "held by another "
	    "process (a running tallyd on the same home), or a write on a "
	    "standby's home (it never writes: tally promote), or on a "
	    "cluster's home whose control plane does not lead" },
	{ TL_EXIT_REPAIRED, 1, "drift was found and repaired "
	    "(check); everything is healthy now" },
	{ TL_EXIT_DEPOSED, 2, "deposed: another control plane "
	    "was promoted (tallyd: a provider fenced at a higher epoch, "
	    "or another promotion to its epoch first in the stream, or its "
	    "cluster lease lapsed)" },
	{ -1, 0, NULL }
	};

	return t;
}

/* Prints "Exit codes:" and the rows of who, one "  N  meaning" each. */
static inline void
tl_exit_print(FILE *fp, unsigned who)
{
	const struct tl_exit_desc *e;

	fputs("Exit codes:\n", fp);
	for (e = tl_exit_table(); e->code >= 0; e++)
		if (e->who & who)
			fprintf(fp, "  %d  %s\n", e->code, e->meaning);
}

#endif
