#!/bin/sh
# tally status says what is true (issue 21, item 14), against a real
# PostgreSQL and the node agents:
#   - a healthy agent's line has no "(last: (null))" (nothing refused,
#     nothing said about it);
#   - a consumer's instance on node-b, bound to node-a's provider
#     because its first instance was on node-a, is not told the
#     provider is "co-located": it is reached over the network;
#   - with the README's literal routable name db1.lan (which does not
#     resolve here) and the admin reaching the server by admin-host,
#     status says that the routable name does not resolve, and from
#     where, instead of blaming the provider (which is up: the admin
#     provisioned the grant).
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL; node-a with the provider (network), node-b"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.1
t_provider node-a network
tly apply "$(t_consumer app)" >/dev/null
tly assign app node-a >/dev/null
tly assign app node-b >/dev/null
t_tallyd_start
for n in node-a node-b; do
	"$TALLY_BIN/tally-node" --node $n --key "$(t_nodekey $n)" --dir "$W/agent-$n" --state "$W/agent-$n.state" \
		--log "$TALLY_HOME" --report-interval 1 2>>"$W/agent-$n.log" &
	_t_pids="$_t_pids $!"
done
i=0
until [ "$(tly status --json | grep -o '"acked":true' | wc -l)" -ge 2 ]; do
	i=$((i + 1))
	[ $i -lt 60 ] || t_fail "the agents did not report their acknowledgements in 30 s"
	sleep 0.5
done
t_expect_exit 0 "tally status" tly status

t_check "a healthy agent: no (null)"
! grep -q "(null)" "$W/last.out" || { cat "$W/last.out" >&2; t_fail "status prints (null)"; }
grep -q "node-a: .*reported" "$W/last.out" || { cat "$W/last.out" >&2; t_fail "no agent line for node-a"; }
t_ok "$(grep -m1 'node-a: .*reported' "$W/last.out" | sed 's/^ *//')"

t_check "node-b's instance is not told its node-a provider is co-located"
tly status app >"$W/app.out"
awk '/^  on node-b/{f=1;next} /^  on node-|^[a-z]/{f=0} f' "$W/app.out" >"$W/b.out"
grep -q "node-a/postgres" "$W/b.out" || { cat "$W/app.out" >&2; t_fail "no binding line on node-b"; }
! grep -q "(co-located)" "$W/b.out" || { cat "$W/app.out" >&2; t_fail "node-b's instance is told node-a/postgres is co-located"; }
grep -q "node-a/postgres (.*network" "$W/b.out" || { cat "$W/app.out" >&2; t_fail "node-b's line does not say the provider is reached over the network"; }
awk '/^  on node-a/{f=1;next} /^  on node-|^[a-z]/{f=0} f' "$W/app.out" | grep -q "node-a/postgres (co-located)" ||
	{ cat "$W/app.out" >&2; t_fail "node-a's instance is no longer said co-located"; }
t_ok "$(grep -m1 'node-a/postgres (.*network' "$W/b.out" | sed 's/^ *//')"

t_tallyd_stop

t_say "the README's routable name, db1.lan, which does not resolve here"
export TALLY_HOME=$W/home2
t_init
tly node add node-a --routable-name db1.lan --key-out "$W/keys/readme-a.key" >/dev/null
tly apply "$TALLY_SRC/examples/postgres.yaml" "$TALLY_SRC/examples/my-cool-game.yaml" >/dev/null
tly assign postgres node-a --expose network --set admin-host=127.0.0.1 \
	--set port="$TALLY_TEST_PG_PORT" --set admin-user="$TALLY_TEST_PG_USER" \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null
tly assign my-cool-game node-a >/dev/null
set +e
timeout 120 "$TALLY_BIN/tallyd" --once --once-timeout 30 2>>"$T_DLOG"
set -e
t_expect_exit 6 "tally status my-cool-game" tly status my-cool-game
grep -q "routable name db1.lan of node-a does not resolve" "$W/last.out" || {
	cat "$W/last.out" >&2; t_fail "status does not say the routable name does not resolve"; }
grep -q "from the control plane" "$W/last.out" || {
	cat "$W/last.out" >&2; t_fail "status does not say from where it does not resolve"; }
! grep -q "provider node-a/postgres unreachable" "$W/last.out" || {
	cat "$W/last.out" >&2; t_fail "status blames the provider"; }
t_ok "$(grep -m1 'does not resolve' "$W/last.out" | sed 's/^ *//')"
