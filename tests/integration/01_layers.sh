#!/bin/sh
# 01_layers.sh - each client library stays in the module that wraps it.
#
# Issue 12: drivers/ holds provider drivers only.  The AMQP client
# carries the record to a broker and knows nothing of providers, so it
# lives in core/ (core/amqp.[ch]), and core/amqp.c is the only file of
# tally that includes librabbitmq-c's headers (<amqp.h>, <amqp_*.h>).
# bench/bench_publish.c is exempt: it measures the bare library against
# tally's client in the same run, so it must call it directly.
#
# Needs no server.
set -eu

: "${TALLY_SRC:=$(cd "$(dirname "$0")/../.." && pwd -P)}"
cd "$TALLY_SRC"

fail=0

# The client itself is in core/, and not in drivers/.
for f in core/amqp.c core/amqp.h; do
	if [ ! -f "$f" ]; then
		echo "FAIL: $f is missing (the AMQP client belongs to core/)"
		fail=1
	fi
done
for f in drivers/amqp.c drivers/amqp.h; do
	if [ -e "$f" ]; then
		echo "FAIL: $f exists: drivers/ is for provider drivers"
		fail=1
	fi
done

# Nobody includes the old path.
found=$(grep -rn '"drivers/amqp\.h"' core projections reactors drivers \
	tools tests bench --include='*.c' --include='*.h' || true)
if [ -n "$found" ]; then
	echo "FAIL: includes of drivers/amqp.h:"
	echo "$found"
	fail=1
fi

# Only core/amqp.c includes librabbitmq-c (bench_publish.c: see above).
found=$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<amqp' \
	core projections reactors drivers tools tests bench \
	--include='*.c' --include='*.h' |
	grep -v -e '^core/amqp\.c$' -e '^bench/bench_publish\.c$' || true)
if [ -n "$found" ]; then
	echo "FAIL: files other than core/amqp.c include <amqp.h>:"
	echo "$found"
	fail=1
fi

[ "$fail" -eq 0 ] || exit 1
echo "ok: the AMQP client is core/amqp.[ch], the only includer of <amqp.h>"
