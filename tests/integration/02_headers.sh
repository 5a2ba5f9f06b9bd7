#!/bin/sh
# 02_headers.sh - `make headers` covers every header of the tree.
#
# Issue 12: each header compiles on its own (`make headers`), and that
# check must reach every header, tools/ and tests/lib included: a glob
# that misses a directory lets a header that needs an earlier include
# slip by.  This lists the headers the target would compile (make -n
# expands its wildcard) and fails naming every header of the tree
# (build/ aside) that is not among them.
#
# Needs no server.
set -eu

: "${TALLY_SRC:=$(cd "$(dirname "$0")/../.." && pwd -P)}"
cd "$TALLY_SRC"

covered=$(make -s -n headers 2>/dev/null)
missing=
for h in $(find . -path ./build -prune -o -name '*.h' -print | sed 's|^\./||' | sort); do
	case " $(printf '%s' "$covered" | tr '\n\t' '  ') " in
	*" $h "*|*" $h;"*) ;;
	*) missing="$missing $h" ;;
	esac
done
if [ -n "$missing" ]; then
	echo "FAIL: make headers does not compile:$missing"
	exit 1
fi
echo "ok 02_headers: make headers covers every header"
