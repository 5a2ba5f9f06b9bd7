#!/bin/sh
# run.sh - runs integration scripts, JOBS at a time, and lists failures.
#
# Usage: run.sh JOBS SCRIPT...
#
# Each script starts its own servers on free ports and works in its own
# directory (lib.sh), so scripts are independent.  A script's output
# goes to $TALLY_TMP/log-NAME and is printed whole when it ends, so the
# output of scripts running side by side never interleaves.  Every
# script runs whatever the others do; exit 1 if any failed.
set -u

if [ "${1:-}" = --one ]; then
	t=$2 name=$(basename "$2" .sh)
	log=$TALLY_TMP/log-$name
	start=$(date +%s)
	if sh "$t" >"$log" 2>&1; then rc=0; else rc=$?; fi
	secs=$(($(date +%s) - start))
	if [ $rc -eq 0 ]; then tail="-- $name passed (${secs} s)"
	else tail="-- $name FAILED (exit $rc, ${secs} s)"; fi
	# One write of the whole log, so parallel scripts' logs do not mix.
	{ echo "== $t"; cat "$log"; echo "$tail"; } >"$log.done"
	cat "$log.done"
	rm -f "$log" "$log.done"
	[ $rc -eq 0 ] || echo "$t" >>"$RUN_SH_FAILED"
	exit 0
fi

jobs=${1:?usage: run.sh JOBS SCRIPT...}
shift
: "${TALLY_TMP:?TALLY_TMP is not set}"
mkdir -p "$TALLY_TMP"
RUN_SH_FAILED=$TALLY_TMP/failed.$$
export RUN_SH_FAILED
: >"$RUN_SH_FAILED"
start=$(date +%s)
printf '%s\n' "$@" | xargs -P "$jobs" -n 1 sh "$0" --one
failed=$(cat "$RUN_SH_FAILED")
rm -f "$RUN_SH_FAILED"
if [ -n "$failed" ]; then
	echo "FAILED:" $failed
	exit 1
fi
echo "integration: $# scripts passed in $(($(date +%s) - start)) s ($jobs at a time)"
