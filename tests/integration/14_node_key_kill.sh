#!/bin/sh
# A node's secret keys survive a kill of tally node add at any point,
# and a retry finishes what the kill left (issue 21, item 34).  The
# key file is written and synced (FILE.new, then renamed to FILE, the
# directory synced) before node.added is committed, so a kill leaves
# either nothing declared or a key file that opens the node's
# deliveries.  TALLY_FAULT_AT=POINT makes tally SIGKILL itself at POINT:
# node-key-written (FILE.new synced, not yet renamed), node-key-placed
# (FILE in place, node.added not committed), node-added (committed,
# nothing printed).  A FILE.new beside a declared node (what a tally of
# before left when killed between its commit and its rename) is found
# and moved into place, never deleted.  Each retried node then holds the
# grant of a real PostgreSQL, and its key file opens the delivery.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL; the provider on node-a"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a network
tly apply "$(t_consumer app)" >/dev/null
mkdir -p "$W/keys"

# holds NODE: app assigned to NODE, a pass, and NODE's key file opens
# the delivery (the credential reaches the database).
holds() {
	tly assign app "$1" >/dev/null || t_fail "tally assign app $1 failed"
	t_tallyd_once
	_db=$(t_env_psql "$(t_envfile "$1" app)" "SELECT current_database()" 2>/dev/null || true)
	[ "$_db" = "$(t_gname app/db app-db)" ] ||
		t_fail "$1's key file does not open its delivery (got '$_db')"
	t_ok "$1's key $(t_nodekey "$1") opens its delivery: app reaches $_db"
}

t_check "a FILE.new beside a declared node (killed between commit and rename) is finished by a retry"
k=$(t_nodekey node-b)
tly node add node-b --routable-name 127.0.0.1 --key-out "$k" >/dev/null
mv "$k" "$k.new"	# the state a kill between node.added and the rename left
t_expect_exit 0 "retried tally node add node-b" \
	tly node add node-b --routable-name 127.0.0.1 --key-out "$k"
[ -f "$k" ] || { cat "$W/last.err" >&2; t_fail "no $k after the retry (the retry said: $(cat "$W/last.err"))"; }
[ ! -e "$k.new" ] || t_fail "$k.new is still there after the retry"
t_ok "$(cat "$W/last.out")"
holds node-b

n=0
for point in node-key-written node-key-placed node-added; do
	n=$((n + 1))
	node=node-k$n
	k=$(t_nodekey $node)
	t_check "killed at $point, then retried: $node is declared once and its key opens its deliveries"
	set +e
	TALLY_FAULT_AT=$point "$TALLY_BIN/tally" node add $node --routable-name 127.0.0.1 \
		--key-out "$k" >"$W/last.out" 2>"$W/last.err"
	rc=$?
	set -e
	[ $rc -eq 137 ] || t_fail "tally node add with TALLY_FAULT_AT=$point exited $rc, not 137 (SIGKILL)"
	case $point in
	node-key-written) [ -f "$k.new" ] && [ ! -e "$k" ] || t_fail "after $point: expected $k.new alone" ;;
	*) [ -f "$k" ] && [ ! -e "$k.new" ] || t_fail "after $point: expected $k alone" ;;
	esac
	declared=$(tly log --json --stream node/$node --type node.added | grep -c node.added || true)
	case $point in
	node-added) [ "$declared" -eq 1 ] || t_fail "after $point: $declared node.added" ;;
	*) [ "$declared" -eq 0 ] || t_fail "after $point: $declared node.added before the commit point" ;;
	esac
	t_expect_exit 0 "retried tally node add $node" \
		tly node add $node --routable-name 127.0.0.1 --key-out "$k"
	[ -f "$k" ] && [ ! -e "$k.new" ] || t_fail "after the retry: expected $k alone"
	[ "$(tly log --json --stream node/$node --type node.added | grep -c node.added)" -eq 1 ] ||
		t_fail "$node is not declared exactly once"
	t_ok "retry: $(cat "$W/last.out")"
	holds $node
done

t_check "a key file of another node is not taken for a new one"
cp "$(t_nodekey node-b)" "$W/b-before.key"
t_expect_exit 4 "tally node add node-x --key-out node-b's key" \
	tly node add node-x --routable-name 127.0.0.1 --key-out "$(t_nodekey node-b)"
grep -q "node-b" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "the refusal does not name node-b"; }
cmp -s "$W/b-before.key" "$(t_nodekey node-b)" || t_fail "the refused add changed node-b's key file"
t_ok "$(head -n 1 "$W/last.err")"

t_check "a retry against a node declared with another key is refused, and the file is kept"
set +e	# a key file no node declares: a kill left it
TALLY_FAULT_AT=node-key-placed "$TALLY_BIN/tally" node add node-y --routable-name 127.0.0.1 \
	--key-out "$W/keys/y.key" >/dev/null 2>&1
set -e
cp "$W/keys/y.key" "$W/y-before.key"
t_expect_exit 4 "tally node add node-b --key-out y.key" \
	tly node add node-b --routable-name 127.0.0.1 --key-out "$W/keys/y.key"
grep -q "another key" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "the refusal does not say the node has another key"; }
cmp -s "$W/y-before.key" "$W/keys/y.key" || t_fail "the refused add changed the file"
t_ok "$(head -n 1 "$W/last.err")"

t_check "tally bootstrap killed in its node add, then rerun, finishes the node and its key"
export TALLY_HOME=$W/home-bs
for point in node-key-written node-key-placed node-added legacy; do
	k=$W/keys/bs-$point.key
	cat >"$W/bs-$point.yaml" <<YAML
node:
  name: cp-$point
  routable-name: 127.0.0.1
  key-out: $k
YAML
	if [ $point = legacy ]; then
		tly bootstrap "$W/bs-$point.yaml" >/dev/null 2>&1 || t_fail "bootstrap failed"
		mv "$k" "$k.new"
	else
		set +e
		TALLY_FAULT_AT=$point "$TALLY_BIN/tally" bootstrap "$W/bs-$point.yaml" >/dev/null 2>&1
		rc=$?
		set -e
		[ $rc -eq 137 ] || t_fail "bootstrap with TALLY_FAULT_AT=$point exited $rc, not 137"
	fi
	t_expect_exit 0 "bootstrap rerun after $point" tly bootstrap "$W/bs-$point.yaml"
	! grep -q "declared elsewhere" "$W/last.err" || t_fail "after $point: $(cat "$W/last.err")"
	[ -f "$k" ] && [ ! -e "$k.new" ] || t_fail "after $point and a rerun: expected $k alone"
	pk=$(tly log --json --stream node/cp-$point --type node.added | grep -c node.added)
	[ "$pk" -eq 1 ] || t_fail "after $point: cp-$point declared $pk times"
	# The key file is the declared node's: tally node add finds it so.
	t_expect_exit 0 "node add cp-$point again" tly node add cp-$point \
		--routable-name 127.0.0.1 --key-out "$k"
	grep -q "added already" "$W/last.out" || t_fail "after $point: the key file is not the declared node's: $(cat "$W/last.out")"
	t_ok "$point: rerun finished cp-$point, its key $k is the declared one"
done
