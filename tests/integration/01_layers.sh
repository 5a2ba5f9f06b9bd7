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
	grep -v -e '^core/amqp\.c$' -e '^core/amqp_url\.c$' -e '^bench/bench_publish\.c$' || true)
if [ -n "$found" ]; then
	echo "FAIL: files other than core/amqp.c include <amqp.h>:"
	echo "$found"
	fail=1
fi

# The node agent links core/ alone (DESIGN.md rule 9; issue 23 item 2):
# tools/tally-node/ includes no header of projections/, reactors/,
# drivers/ or another tool (the node's wire format is core/nodewire.h),
# and its link line, plain and sanitized, names only its own objects and
# core's (no libtally.a, which carries the projections and reactors).
found=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' \
	tools/tally-node/*.c tools/tally-node/*.h |
	grep -vE '#[[:space:]]*include[[:space:]]*"(core/[a-z0-9_-]+\.h|[a-z0-9_-]+\.h)"' || true)
local_inc=$(grep -hoE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z0-9_-]+\.h"' \
	tools/tally-node/*.c tools/tally-node/*.h | sed 's/.*"\(.*\)"/\1/' | sort -u)
for h in $local_inc; do
	[ -f "tools/tally-node/$h" ] ||
		found="$found
tools/tally-node: includes \"$h\", which is not the agent's own"
done
if [ -n "$found" ]; then
	echo "FAIL: tally-node includes headers from outside core/:"
	echo "$found"
	fail=1
fi
B=${B:-build}
for bin in "$B/bin/tally-node" "$B/asan/bin/tally-node"; do
	case $bin in
	*/asan/*) obj="$B/asan/obj" ;;
	*) obj="$B/obj" ;;
	esac
	line=$(make -s -n -B "$bin" 2>/dev/null | grep -E -- "-o $bin( |\$)" || true)
	if [ -z "$line" ]; then
		echo "FAIL: make -n -B $bin prints no link line"
		fail=1
		continue
	fi
	bad=
	for w in $line; do
		case $w in
		"$obj"/core/*.o|"$obj"/tools/tally-node/*.o) ;;
		*.o|*.a|*.so) bad="$bad $w" ;;
		esac
	done
	if [ -n "$bad" ]; then
		echo "FAIL: $bin links more than core/ and its own objects:$bad"
		fail=1
	fi
done

# A driver is its declaration and its operations (DESIGN.md rule 9):
# projections/ and the CLI read the declarations (drivers/decl.h) and
# never include the operations (drivers/driver.h); a declaration
# (drivers/NAME_decl.c), with every header it includes, names no provider
# client, no TLS library and not driver.h.
found=$(grep -lE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"drivers/driver\.h"' \
	projections/*.c projections/*.h tools/tally/*.c tools/tally/*.h || true)
if [ -n "$found" ]; then
	echo "FAIL: include the drivers' operations (drivers/driver.h):"
	echo "$found"
	fail=1
fi
for f in drivers/decl.c drivers/*_decl.c; do
	deps=$(cc -std=c11 -D_DEFAULT_SOURCE -I. $(pkg-config --cflags libpq \
		libmariadb hiredis libcurl librabbitmq 2>/dev/null) -M "$f" |
		tr ' \\' '\n\n' | grep -E '(^/usr/.*(libpq|postgresql|mysql|mariadb|hiredis|curl|amqp|openssl)|driver\.h$)' || true)
	if [ -n "$deps" ]; then
		echo "FAIL: the declaration $f includes a client or the operations:"
		echo "$deps"
		fail=1
	fi
done
# tally links no provider client, no TLS library and no operations:
# its link line names no libtallyops.a, ldd lists none of the clients'
# libraries, nm finds none of their symbols.
for bin in "$B/bin/tally" "$B/asan/bin/tally"; do
	line=$(make -s -n -B "$bin" 2>/dev/null | grep -E -- "-o $bin( |\$)" || true)
	case $line in
	"") echo "FAIL: make -n -B $bin prints no link line"; fail=1 ;;
	*libtallyops.a*) echo "FAIL: $bin links the drivers' operations"; fail=1 ;;
	esac
done
if [ -x "$B/bin/tally" ]; then
	libs=$(ldd "$B/bin/tally" | grep -E 'lib(pq|mariadb|mysqlclient|hiredis|curl|crypto|ssl|rabbitmq)\.' || true)
	if [ -n "$libs" ]; then
		echo "FAIL: $B/bin/tally loads provider or TLS libraries:"
		echo "$libs"
		fail=1
	fi
	syms=$(nm "$B/bin/tally" | grep -E ' [TU] (PQ|mysql_|mariadb_|redis[A-Z]|curl_|SSL_|EVP_|amqp_(login|new_connection|ssl))' | head -5 || true)
	if [ -n "$syms" ]; then
		echo "FAIL: $B/bin/tally carries provider client symbols:"
		echo "$syms"
		fail=1
	fi
else
	echo "FAIL: $B/bin/tally is not built"
	fail=1
fi

[ "$fail" -eq 0 ] || exit 1
echo "ok: the AMQP client is core/amqp.[ch], the only includer of <amqp.h>"
echo "ok: tally-node includes and links core/ alone (plain and ASan)"
echo "ok: tally links the drivers' declarations and no provider client"
