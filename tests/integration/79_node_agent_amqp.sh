#!/bin/sh
# tally-node over AMQP with a real RabbitMQ (issue 14): three agents for
# three nodes (separate directories and keys) read their queues
# tally.node.NODE and acknowledge on tally.acks.  A rotation of the
# shared grant game/db (three holders) completes with no tally ack typed,
# in order delivery -> reload -> ack -> retire; an agent that is down
# holds the rotation (visible, the old credential works) and catches up
# from its queue when it returns; a failing reload is not acknowledged
# and the rotation waits on it, visibly; forged acknowledgements (wrong
# key, no proof, proof for another version, replayed) are refused,
# acknowledging nothing: the one node-c's key signed (a proof for
# another version) is recorded once (security.ack-refused), the others
# fail authentication and are only counted (tally status: refused
# input, issue 21); the
# broker's messages hold no password (every event, and the deliveries
# queued for node-c while its agent is down, read and put back).  Unassigning a holder removes its
# files (the publisher routes assignment.removed to its queue) and the
# remaining holders get a rotation (reason holder-left, caused by the
# assignment.removed), completed by their agents.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
N=${TALLY_STREAM_EVENTS:-10000}
BATCH=500

# --- the broker ---------------------------------------------------------

drain() {
	api POST "/queues/%2F/$1/get" \
		'{"count":1000000,"ackmode":"ack_requeue_false","encoding":"base64","truncate":100000000}' |
		sed 's/},{"payload_bytes"/}\n{"payload_bytes"/g' |
		t_jfields seq message_id routing_key payload content_type
}
# peek QUEUE: its messages, put back (requeued) for their consumer.
peek() {
	api POST "/queues/%2F/$1/get" \
		'{"count":1000,"ackmode":"ack_requeue_true","encoding":"base64","truncate":100000000}' |
		sed 's/},{"payload_bytes"/}\n{"payload_bytes"/g' |
		t_jfields seq message_id routing_key payload content_type
}
b64() { base64 -d 2>/dev/null; }
# publish_ack JSON: one message on tally.acks, as anyone could send it.
publish_ack() {
	_p=$(printf '%s' "$1" | sed 's/"/\\"/g')
	api POST /exchanges/%2F/amq.default/publish \
		"{\"properties\":{},\"routing_key\":\"tally.acks\",\"payload\":\"$_p\",\"payload_encoding\":\"string\"}" |
		grep -q '"routed":true' || t_fail "cannot publish to tally.acks"
}
FORGE="python3 $TALLY_SRC/tests/harness/forge_ack.py"

wait_for() {	# SECONDS WHAT CMD...
	_e=$(($(t_now_ms) + $1 * 1000)); _what=$2; shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$(t_now_ms)" -lt "$_e" ] || {
			tail -n 20 "$T_DLOG" >&2; tail -n 5 "$W"/agent-*.log >&2
			t_fail "$_what: not within the time"; }
		sleep 0.1
	done
}
acks_of() {	# VERSION: the holders that acknowledged it
	tly log --json --type credential.acknowledged | grep "\"version\":$1" |
		sed -n 's/.*"holder":"\([^"]*\)".*/\1/p' | sort | tr '\n' ' '
}
refusals() { tly log --json --type security.ack-refused | wc -l; }

# agent NODE RELOAD: a tally-node for NODE over AMQP in the background.
agent() {
	"$TALLY_BIN/tally-node" --node "$1" --key "$W/$1.key" --dir "$W/$1" --state "$W/$1.state" \
		--amqp "$AMQP_URL" --amqp-user "$TALLY_TEST_AMQP_USER" \
		--amqp-password-file "$W/amqp.pw" --reload "game=$2" \
		2>>"$W/agent-$1.log" &
	eval "APID_$(echo "$1" | tr - _)=$!"
	_t_pids="$_t_pids $!"
}
stop_agent() {
	eval "_a=\$APID_$(echo "$1" | tr - _)"
	kill -TERM "$_a"; wait "$_a" 2>/dev/null || true
	t_forget_pid "$_a"
}
G=game/db
NODES="node-a node-b node-c"

t_say "RabbitMQ, PostgreSQL; three nodes; game's shared grant held on all three"
r_start
t_pg_start
api PUT /exchanges/%2F/tally.events '{"type":"topic","durable":true}' >/dev/null ||
	t_fail "cannot declare the exchange"
api PUT /queues/%2F/watch '{"durable":true}' >/dev/null
api POST /bindings/%2F/e/tally.events/q/watch '{"routing_key":"#"}' >/dev/null ||
	t_fail "cannot bind the watch queue"
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
GDB=$(t_gname game/db game-db)
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --exchange tally.events >/dev/null ||
	t_fail "tally publish configure failed"
t_node node-a 127.0.0.1
t_node node-b localhost
t_node node-c 127.0.0.2
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
for n in $NODES; do
	tly assign game "$n" >/dev/null
	cp "$(t_nodekey "$n")" "$W/$n.key"
done
t_tallyd_start --interval 1 --verify-interval 3600

t_say "three agents over AMQP (tally.node.NODE), separate directories and keys"
for n in $NODES; do agent "$n" "echo ok >>$W/$n.reloads"; done
for n in $NODES; do
	wait_for 30 "$n's v1" grep -q "^DB_USER=${GDB}_v1$" "$W/$n/game.env"
done
wait_for 30 "three acknowledgements of v1" sh -c "[ \"\$(\"$TALLY_BIN/tally\" log --json --type credential.acknowledged | grep -c '\"version\":1')\" = 3 ]"
t_ok "v1 on every node, acknowledged by all three over tally.acks: $(acks_of 1)"
cp "$W/node-c/game.env" "$W/v1.env"
V1PW=$(t_envget "$W/v1.env" DB_PASSWORD)

t_say "node-c's agent down, node-b's reload failing; tally rotate"
stop_agent node-c
stop_agent node-b
agent node-b "exit 3"
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
wait_for 30 "node-a's ack of v2" sh -c "\"$TALLY_BIN/tally\" log --json --type credential.acknowledged | grep '\"version\":2' | grep -q game@node-a"
wait_for 20 "node-b's reload failure" grep -q "reload of game failed" "$W/agent-node-b.log"
grep "reload of game failed" "$W/agent-node-b.log" | grep -q "old credential keeps working" ||
	t_fail "the failure does not say the old credential keeps working"
sleep 2
[ "$(acks_of 2)" = "game@node-a " ] || t_fail "v2 acknowledged by '$(acks_of 2)', expected node-a only"
tly status game >"$W/status.txt" 2>&1 || true
grep -q "waiting on" "$W/status.txt" && grep -q "node-b/game" "$W/status.txt" &&
	grep -q "node-c/game" "$W/status.txt" || { cat "$W/status.txt" >&2; t_fail "status does not show the rotation waiting on node-b and node-c"; }
wait_for 20 "node-b's report of its failed reload" sh -c "\"$TALLY_BIN/tally\" status game | grep -q 'last reload of game failed (exit 3)'"
t_env_psql "$W/v1.env" "SELECT 1" >/dev/null || t_fail "the old credential v1 no longer connects"
[ "$(t_envget "$W/node-c/game.env" DB_USER)" = ${GDB}_v1 ] || t_fail "node-c's files moved while its agent was down"
t_ok "waiting on node-b (reload failed) and node-c (agent down), visibly; v1 still connects"

t_say "forged acknowledgements claiming node-c, for the current v2"
V2PW=$(t_envget "$W/node-a/game.env" DB_PASSWORD)
[ "$V2PW" != "$V1PW" ] || t_fail "node-a has not the new password"
t_check "node-c's queue (its agent down) holds v2's delivery: sealed, no password in it"
peek tally.node.node-c >"$W/nodec.msgs"
cut -d' ' -f4 "$W/nodec.msgs" | while read -r p; do printf '%s' "$p" | b64; echo; done >"$W/nodec.bodies"
# Control: the delivery is there, the box as the publisher routes it
# (the bodies are the sealed ciphertext: larger than the password).
[ "$(wc -l <"$W/nodec.msgs")" -ge 1 ] && [ "$(wc -c <"$W/nodec.bodies")" -gt ${#V2PW} ] ||
	t_fail "control: no delivery queued on tally.node.node-c"
for s in "$V1PW" "$V2PW"; do
	grep -aF -- "$s" "$W/nodec.bodies" >/dev/null && t_fail "a queued delivery on tally.node.node-c holds a password"
done
t_ok "$(wc -l <"$W/nodec.msgs") queued message(s) for node-c (requeued): no v1 or v2 password"
r0=$(refusals)
publish_ack "$($FORGE --node node-c --grant $G --holder game@node-c --version 2 --random-key --password="$V2PW")"
publish_ack "$($FORGE --node node-c --grant $G --holder game@node-c --version 2 --no-proof)"
publish_ack "$($FORGE --node node-c --grant $G --holder game@node-c --version 2 --key "$W/node-c.key" --password="$V1PW")"
# node-a's own acknowledgement of v2, sent again as it was.
orig=$(tly log --json --type credential.ack-offered | grep '"holder":"game@node-a","version":2' | tail -n 1)
replay=$(printf '{"node":"node-a","grant":"%s","holder":"game@node-a","version":2,"nonce":"%s","sig":"%s","mac":"%s"}' \
	$G "$(printf '%s' "$orig" | t_jfields nonce)" "$(printf '%s' "$orig" | t_jfields sig)" "$(printf '%s' "$orig" | t_jfields mac)")
publish_ack "$replay"
wait_for 20 "the signed one's refusal" sh -c "[ \$(\"$TALLY_BIN/tally\" log --json --type security.ack-refused | wc -l) -ge $((r0 + 1)) ]"
wait_for 20 "three refused inputs counted" sh -c "\"$TALLY_BIN/tally\" status | grep -q 'refused input: 1 replayed or late message(s) on tally.acks claiming node-a'"
tly log --json --type security.ack-refused >"$W/refused.json"
grep '"node":"node-c"' "$W/refused.json" | grep -q 'proof does not match credential v2' || t_fail "the proof of v1 for v2 was not refused as such"
grep -q '"stream":"node/node-c"' "$W/refused.json" || t_fail "the refusal is not on the signing node's stream"
tly status >"$W/status.txt" || true
grep -q 'refused input: 1 wrongly signed message(s) on tally.acks claiming node-c, .*bad signature' "$W/status.txt" || t_fail "the wrong key was not counted as such: $(grep 'refused input' "$W/status.txt")"
grep -q 'refused input: 1 unsigned message(s) on tally.acks claiming node-c, .*no proof' "$W/status.txt" || t_fail "the ack without proof was not counted as such"
grep -q 'refused input: 1 replayed or late message(s) on tally.acks claiming node-a, .*replayed' "$W/status.txt" || t_fail "the replay was not counted as such"
[ "$(acks_of 2)" = "game@node-a " ] || t_fail "a forged ack was recorded: '$(acks_of 2)'"
[ "$(refusals)" = $((r0 + 1)) ] || t_fail "$(refusals) refusals, expected $((r0 + 1)) (the signed one, once)"
t_ok "wrong key, no proof, replayed: counted, not recorded; proof for another version: one security.ack-refused; nothing acknowledged"

t_say "node-b's reload fixed, node-c back: they catch up, the rotation completes"
stop_agent node-b
agent node-b "echo ok >>$W/node-b.reloads"
agent node-c "echo ok >>$W/node-c.reloads"
wait_for 60 "rotation.completed" sh -c "\"$TALLY_BIN/tally\" log --json --type rotation.completed | grep -q '\"version\":2'"
[ "$(acks_of 2)" = "game@node-a game@node-b game@node-c " ] || t_fail "v2 acknowledged by '$(acks_of 2)'"
for n in $NODES; do
	[ "$(t_envget "$W/$n/game.env" DB_USER)" = ${GDB}_v2 ] || t_fail "$n is not at v2"
	t_env_psql "$W/$n/game.env" "SELECT 1" >/dev/null || t_fail "$n's v2 does not connect"
done
seqs=$(tly log --json --stream "grant/$G")
del=$(printf '%s\n' "$seqs" | grep '"type":"credential.delivered"' | grep '"version":2' | tail -n 1 | t_jfields seq)
ack=$(printf '%s\n' "$seqs" | grep '"type":"credential.acknowledged"' | grep '"version":2' | tail -n 1 | t_jfields seq)
ret=$(printf '%s\n' "$seqs" | grep '"type":"credential.retired"' | t_jfields seq)
[ "$del" -lt "$ack" ] && [ "$ack" -lt "$ret" ] || t_fail "order: delivered $del, acknowledged $ack, retired $ret"
[ -z "$(tly log --json --type credential.acknowledged | grep -v '"actor":"node:')" ] ||
	t_fail "an acknowledgement not by a node's proof (no tally ack was typed)"
[ "$(t_sql "SELECT count(*) FROM pg_roles WHERE rolname = '${GDB}_v1'")" = 0 ] || t_fail "${GDB}_v1 not retired"
t_ok "delivered ($del) < last ack ($ack) < retired ($ret); no tally ack typed; ${GDB}_v1 gone"

t_say "tally unassign game node-c: its files go; the others get v3 (holder-left)"
cp "$W/node-c/game.env" "$W/v2.env"
tly unassign game node-c >/dev/null || t_fail "tally unassign failed"
rem=$(tly log --json --type assignment.removed | grep '"node":"node-c"' | t_jfields seq)
rs=$(tly log --json --stream "grant/$G" --type rotation.started | tail -n 1)
printf '%s' "$rs" | grep -q '"reason":"holder-left"' && printf '%s' "$rs" | grep -q '"holder":"game@node-c"' ||
	t_fail "no rotation.started for the holder that left: $rs"
[ "$(printf '%s' "$rs" | t_jfields cause)" = "$rem" ] || t_fail "the rotation's cause is not the assignment.removed ($rem): $rs"
wait_for 20 "node-c's files removed" sh -c "[ ! -e \"$W/node-c/game.env\" ] && [ ! -e \"$W/node-c/game\" ]"
wait_for 60 "the holder-left rotation completed" sh -c "\"$TALLY_BIN/tally\" log --json --type rotation.completed | grep -q '\"version\":3'"
[ "$(acks_of 3)" = "game@node-a game@node-b " ] || t_fail "v3 acknowledged by '$(acks_of 3)'"
for n in node-a node-b; do
	t_env_psql "$W/$n/game.env" "SELECT 1" >/dev/null || t_fail "$n's v3 does not connect"
done
if t_env_psql "$W/v2.env" "SELECT 1" >/dev/null 2>&1; then
	t_fail "the credential node-c took with it still connects"
fi
t_ok "node-c's game.env and game/ removed; rotation (cause seq $rem) to v3 acked by node-a, node-b; v2 refused"

t_check "the broker's messages hold no password"
drain watch >"$W/watch.msgs"
cut -d' ' -f4 "$W/watch.msgs" | while read -r p; do printf '%s' "$p" | b64; echo; done >"$W/bodies"
[ -s "$W/bodies" ] || t_fail "nothing to search"
V3PW=$(t_envget "$W/node-a/game.env" DB_PASSWORD)
for s in "$V1PW" "$V2PW" "$V3PW"; do
	grep -aF -- "$s" "$W/bodies" >/dev/null && t_fail "a message on the broker holds a password"
done
t_ok "$(wc -l <"$W/watch.msgs") messages searched for v1's, v2's and v3's passwords: none"
tly verify >/dev/null || t_fail "tally verify"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check"
