#!/bin/sh
# 03_include_cycles.sh - no include circles among the units of a directory.
#
# Issue 12 ("The house after it"): a file that holds two concerns
# shows as a circle, its lower half included by files it includes.
# Within each of core/ projections/ reactors/ drivers/ tools/*, a unit
# is a stem: X.c, X.h and X's private header X-internal.h together.
# Unit X depends on unit Y when one of X's files includes Y.h or
# Y-internal.h of the same directory ("Y.h" or "DIR/Y.h"); a unit's
# own files including each other is no dependency.  The graph must be
# acyclic: this fails naming every circle a depth-first walk meets
# (one per back edge, as X -> Y -> ... -> X).
#
# A header shared by several files (one that declares functions of
# three .c files) hides a circle among them from that graph, so the same
# is asked of the calls: within each directory, file X depends on file Y
# when X's object uses a symbol Y's object defines (nm on the objects
# `make all` built).  drivers/ is the one to watch: registry.c's table
# names every driver, so nothing a driver calls may call the registry
# (the settings helpers are settings.c, not registry.c, for that).
#
# Needs no server.
set -eu

: "${TALLY_SRC:=$(cd "$(dirname "$0")/../.." && pwd -P)}"
cd "$TALLY_SRC"

# Prints each circle of the graph whose edges ("FROM TO", one a line)
# come on stdin: a depth-first walk in sorted order, one per back edge.
circles() {
	awk -v dir="$1" '
	function visit(u,   i, v, k, path) {
		color[u] = 1
		stack[++sp] = u
		for (i = 1; i <= nadj[u]; i++) {
			v = adj[u, i]
			if (color[v] == 1) {
				path = v
				for (k = sp; k >= 1 && stack[k] != v; k--)
					;
				for (k++; k <= sp; k++)
					path = path " -> " stack[k]
				print dir ": " path " -> " v
			} else if (color[v] == 0)
				visit(v)
		}
		sp--
		color[u] = 2
	}
	{
		units[$1] = 1; units[$2] = 1
		if ($1 == $2 || seen[$1, $2]++)
			next
		adj[$1, ++nadj[$1]] = $2
	}
	END {
		n = 0
		for (u in units)
			order[++n] = u
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && order[j - 1] > order[j]; j--) {
				t = order[j]; order[j] = order[j - 1]; order[j - 1] = t
			}
		for (i = 1; i <= n; i++) {
			# Edges in sorted order too, so a circle reads the same.
			for (a = 2; a <= nadj[order[i]]; a++)
				for (b = a; b > 1 && adj[order[i], b - 1] > adj[order[i], b]; b--) {
					t = adj[order[i], b]
					adj[order[i], b] = adj[order[i], b - 1]
					adj[order[i], b - 1] = t
				}
		}
		for (i = 1; i <= n; i++)
			if (color[order[i]] == 0)
				visit(order[i])
	}'
}

# The unit of a file: its stem, X-internal.h being X's.
stem() {
	printf '%s\n' "$1" | sed -e 's|^.*/||' -e 's/\.[ch]$//' -e 's/-internal$//'
}

fail=0
for d in core projections reactors drivers tools/*; do
	[ -d "$d" ] || continue
	edges=$(for f in "$d"/*.c "$d"/*.h; do
		[ -f "$f" ] || continue
		u=$(stem "$f")
		sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
		while read -r inc; do
			case "$inc" in
			"$d"/*) inc=${inc#"$d"/} ;;
			*/*) continue ;;	# another directory
			esac
			[ -f "$d/$inc" ] || continue
			printf '%s %s\n' "$u" "$(stem "$inc")"
		done
	done)
	out=$(printf '%s\n' "$edges" | grep . | circles "$d" || true)
	if [ -n "$out" ]; then
		printf '%s\n' "$out" | sed 's/^/FAIL: include circle /'
		fail=1
	fi
done

# The calls, from the objects of the tree as built now.
make -s -C "$TALLY_SRC" all >/dev/null
obj=${TALLY_OBJ:-"$TALLY_SRC/build/obj"}
for d in core projections reactors drivers; do
	if ! ls "$obj/$d"/*.o >/dev/null 2>&1; then
		echo "FAIL: no objects in $obj/$d (a build elsewhere: set TALLY_OBJ)"
		exit 1
	fi
done
for d in core projections reactors drivers tools/*; do
	[ -d "$obj/$d" ] || continue
	ls "$obj/$d"/*.o >/dev/null 2>&1 || continue
	edges=$(for o in "$obj/$d"/*.o; do
		u=$(basename "$o" .o)
		nm "$o" | awk -v u="$u" '
		    NF == 3 && $2 ~ /^[TDBR]$/ { print "D", u, $3 }
		    NF == 2 && $1 == "U" { print "U", u, $2 }'
	done | awk '
	    $1 == "D" { def[$3] = $2; next }
	    { use[++n] = $2 " " $3 }
	    END {
		for (i = 1; i <= n; i++) {
			split(use[i], a, " ")
			if (a[2] in def)
				print a[1], def[a[2]]
		}
	    }')
	out=$(printf '%s\n' "$edges" | grep . | circles "$d" || true)
	[ -n "$out" ] || continue
	printf '%s\n' "$out" | sed 's/^/FAIL: call circle /'
	fail=1
done

[ "$fail" -eq 0 ] || exit 1
echo "ok 03_include_cycles: no include circle, no call circle"
