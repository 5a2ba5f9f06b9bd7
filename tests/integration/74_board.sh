#!/bin/sh
# tally-board, the example reporting context, on a known log: its HTML
# page holds the expected counts (nodes, modules, assignments,
# providers, grants by state, problems), it catches up incrementally
# from its own store, rebuilds the same page from scratch, refuses a
# store built from another log, and neither includes nor links any of
# tally's projection code.  No server needed.
. "$(dirname "$0")/lib.sh"

BOARD=$TALLY_BIN/tally-board
[ -x "$BOARD" ] || t_fail "$BOARD is missing (run make)"

# has FILE ID N: the page shows N in the element with that id.
has() {
	grep -q "id=\"$2\">$3<" "$1" || {
		grep -o "id=\"$2\">[^<]*<" "$1" >&2 || echo "(no element $2)" >&2
		t_fail "$1: $2 is not $3"
	}
}

t_say "a known mesh: 3 nodes, 2 providers, a co-located consumer, an ambiguous one, a static module"
t_init
t_node node-a 127.0.0.1
t_node node-b 10.0.0.2
t_node node-c 10.0.0.3
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
for n in node-a node-b; do
	echo pw | tly assign postgres "$n" --expose network --set port=5432 --set admin-user=postgres \
		--secret admin-password >/dev/null || t_fail "assign postgres $n"
done
mkdir -p "$W/manifests"
printf 'module: web\n' >"$W/manifests/web.yaml"
tly apply "$(t_consumer app1)" "$(t_consumer app2)" "$W/manifests/web.yaml" >/dev/null
tly assign app1 node-a >/dev/null
tly assign app2 node-c >/dev/null
tly assign web node-b >/dev/null
tly status app2 | grep -q ambiguous || t_fail "app2 is not ambiguous: $(tly status app2)"

t_check "the page has the expected counts"
"$BOARD" --store "$W/store" --html "$W/one.html" >"$W/one.txt" || t_fail "tally-board exited $?"
has "$W/one.html" count-nodes 3
has "$W/one.html" count-modules 4
has "$W/one.html" count-assignments 5
has "$W/one.html" count-providers 2
has "$W/one.html" count-grants 2
has "$W/one.html" grants-requested 1
has "$W/one.html" grants-ambiguous 1
has "$W/one.html" count-problems 1
has "$W/one.html" count-rotations 0
has "$W/one.html" pos "$(tly stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p')"
grep -q "app2/db is ambiguous" "$W/one.html" || t_fail "the problem is not named"
grep -q "nodes 3   modules 4   assignments 5 (.* ready)   providers 2 (0 unreachable)   grants 2" "$W/one.txt" ||
	t_fail "the text page: $(head -n 4 "$W/one.txt")"
if command -v dot >/dev/null 2>&1; then
	grep -q "<svg" "$W/one.html" || t_fail "dot is installed but the page has no SVG"
	grep -q "app1" "$W/one.html" || t_fail "the graph does not show app1"
fi
t_ok "nodes 3, modules 4, assignments 5, providers 2, grants: requested 1, ambiguous 1; problem named"

t_check "a second run applies only what is new, from its own store"
tly bind app2/db node-b/postgres >/dev/null || t_fail "tally bind failed"
"$BOARD" --store "$W/store" --html "$W/two.html" --print --quiet >"$W/two.print" ||
	t_fail "tally-board exited $?"
[ "$(wc -l <"$W/two.print")" -eq 2 ] || t_fail "the second run received $(wc -l <"$W/two.print") events, expected 2 (binding.made, grant.requested)"
has "$W/two.html" grants-requested 2
has "$W/two.html" count-problems 0
grep -q 'grants-ambiguous' "$W/two.html" && t_fail "an ambiguous grant is still counted"
t_ok "2 new events; grants requested 2, no problem left"

t_check "the store is derived: deleted and rebuilt, the same page"
"$BOARD" --store "$W/store2" --html "$W/three.html" --quiet || t_fail "tally-board exited $?"
cmp -s "$W/two.html" "$W/three.html" || t_fail "a rebuilt store renders another page"
"$BOARD" --store "$W/store2" --json >"$W/snap.json"
grep -q '"grants_by_state":{"requested":2}' "$W/snap.json" || t_fail "--json: $(cat "$W/snap.json" | head -c 300)"
t_ok "identical"

t_check "a store built from another log is refused"
mkdir -p "$W/other"
TALLY_HOME="$W/other/home" "$TALLY_BIN/tally" init >/dev/null
TALLY_HOME="$W/other/home" "$TALLY_BIN/tally" node add x --routable-name x.lan --key-out "$W/other/x.key" >/dev/null
t_expect_exit 1 "the board on another log" env TALLY_HOME="$W/other/home" "$BOARD" --store "$W/store" --quiet
grep -q "another log" "$W/last.err" || t_fail "the refusal does not say why: $(cat "$W/last.err")"
t_ok "refused, with the reason"

t_check "tally-board reads no table of tally's; projection code only over its own copy, no reactor pass, no provider client"
# mirror.c folds the projections over the board's copy of the log (its
# states are tally status's); nothing else of the board includes them.
# Of reactors/ it links the readers tally status shares (each provider's
# fence and transport, the mesh CA they may be verified against), no
# pass.
if grep -n '#include "projections/' "$TALLY_SRC"/tools/tally-board/*.[ch] | grep -v '/mirror\.c:'; then
	t_fail "tally-board includes a projection header outside mirror.c"
fi
if command -v nm >/dev/null 2>&1; then
	n=$(nm "$BOARD" | grep -E ' T tl_rx_' | grep -c -v -E ' T tl_rx_(fencing|mesh_ca)' || true)
	[ "$n" -eq 0 ] || t_fail "tally-board links $n reactor functions: $(nm "$BOARD" | grep -E ' T tl_rx_' | head -n 5 | tr '\n' ' ')"
fi
! ldd "$BOARD" | grep -E 'libpq|libmariadb|libhiredis|libcurl' ||
	t_fail "tally-board links a provider's client"
[ -d "$W/store/mirror" ] || t_fail "no copy of the log in the board's store"
t_ok "projection code only in mirror.c, over its own copy; no reactor pass, no provider client"
