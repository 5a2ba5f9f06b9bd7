#!/bin/sh
# tally-node --once does not exit 0 when it did nothing because it could
# not (issue 21 item 26):
#   - --log with a --node the mesh does not have: exit 1, saying so;
#   - --log with another node's key: exit 1, the key is not the node's
#     (its public key is not the one node.added recorded);
#   - --amqp with another node's key (the control plane's signatures
#     verify, the boxes do not open): exit 1, the key opens none of the
#     deliveries addressed to the node;
#   - and with the right key, exit 0.
. "$(dirname "$0")/lib.sh"
R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

t_say "RabbitMQ, PostgreSQL; game on node-a, delivered on the log and the queue"
r_start
t_pg_start
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password >/dev/null ||
	t_fail "tally publish configure failed"
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_node node-a 127.0.0.1
t_node node-b 127.0.0.2
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
tly assign game node-a >/dev/null
t_tallyd_once
A=$(t_nodekey node-a)
B=$(t_nodekey node-b)
logagent() {	# NODE KEY
	"$TALLY_BIN/tally-node" --node "$1" --key "$2" --dir "$W/d-$1" --state "$W/s-$1-$$" \
		--log "$TALLY_HOME" --once --reload "game=true"
}

t_check "--log, a node the mesh does not have"
t_expect_exit 1 "tally-node --node node-x --once" logagent node-x "$A"
grep -q "node-x.*not.*mesh\|no node node-x" "$W/last.err" ||
	{ cat "$W/last.err" >&2; t_fail "it does not say node-x is not in the mesh"; }
t_ok "exit 1: $(head -n 1 "$W/last.err")"

t_check "--log, node-b's key for node-a"
t_expect_exit 1 "tally-node --node node-a --key node-b's --once" logagent node-a "$B"
grep -q "not node node-a's key" "$W/last.err" ||
	{ cat "$W/last.err" >&2; t_fail "it does not say the key is not node-a's"; }
[ ! -e "$W/d-node-a/game.env" ] || t_fail "something was written"
t_ok "exit 1: $(head -n 1 "$W/last.err")"

t_check "--amqp, node-b's key for node-a: it opens none of node-a's deliveries"
t_expect_exit 1 "tally-node --amqp --node node-a --key node-b's --once" \
	"$TALLY_BIN/tally-node" --node node-a --key "$B" --dir "$W/q-a" --state "$W/q-a.state" \
	--amqp "$AMQP_URL" --amqp-user "$TALLY_TEST_AMQP_USER" --amqp-password-file "$W/amqp.pw" \
	--once --reload "game=true"
grep -q "opens none of the .* deliver.* addressed to node node-a" "$W/last.err" ||
	{ cat "$W/last.err" >&2; t_fail "it does not say the key opens none of node-a's deliveries"; }
t_ok "exit 1: $(grep 'opens none' "$W/last.err" | head -n 1)"

t_check "the right key: exit 0"
t_expect_exit 0 "tally-node --node node-a --key node-a's --once" logagent node-a "$A"
grep -q "^DB_USER=" "$W/d-node-a/game.env" || t_fail "game.env not written"
t_ok "exit 0, game.env written"
