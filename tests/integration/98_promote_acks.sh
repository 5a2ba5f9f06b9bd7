#!/bin/sh
# A promoted standby takes over the ack pass where the old leader left
# it (issue 21, item 17).  Real RabbitMQ and PostgreSQL; a leader
# publishing to the stream tally.record and a standby following it;
# app on node-a with its agent over AMQP (--report-interval 1): its
# acknowledgements of v1 and v2 (a rotation) and its reports are
# decided by the leader, and one acknowledgement signed by node-a for a
# holder that does not hold the grant is refused (security.ack-refused).
# After tally promote, the new leader's tallyd decides nothing again:
# 0 new security.ack-refused, 0 new credential.acknowledged, 0 new
# node.reported (the agent is stopped: nothing new is offered); and a
# new acknowledgement after the promotion (a rotation to v3) is decided
# once.  A tally-board follows the standby's log all along (issue 27):
# after the promotion and after v3 it agrees with the new leader's
# tally status, and its page shows the new epoch and the refusal.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
FORGE="python3 $TALLY_SRC/tests/harness/forge_ack.py"
STREAM=tally.record
LH=$TALLY_HOME
FH=$W/standby

head_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
count() {	# HOME TYPE
	TALLY_HOME=$1 "$TALLY_BIN/tally" log --json --type "$2" | wc -l
}
wait_for() {	# SECONDS WHAT CMD...
	_e=$(($(t_now_ms) + $1 * 1000)); _what=$2; shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$(t_now_ms)" -lt "$_e" ] || {
			tail -n 20 "$T_DLOG" >&2; tail -n 20 "$W"/agent-*.log >&2
			t_fail "$_what: not within the time"; }
		sleep 0.2
	done
}
publish_ack() {
	_p=$(printf '%s' "$1" | sed 's/"/\\"/g')
	api POST /exchanges/%2F/amq.default/publish \
		"{\"properties\":{},\"routing_key\":\"tally.acks\",\"payload\":\"$_p\",\"payload_encoding\":\"string\"}" |
		grep -q '"routed":true' || t_fail "cannot publish to tally.acks"
}
agent_start() {
	"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$W/node-a" --state "$W/node-a.state" \
		--amqp "$AMQP_URL" --amqp-user "$TALLY_TEST_AMQP_USER" --amqp-password-file "$W/amqp.pw" \
		--report-interval 1 --reload "app=echo ok >>$W/reloads" 2>>"$W/agent-node-a.log" &
	APID=$!
	_t_pids="$_t_pids $APID"
}
agent_stop() { kill -TERM "$APID"; t_wait_exit "$APID" 10; }

t_say "RabbitMQ, PostgreSQL; a leader publishing to $STREAM, a standby following it"
r_start
t_pg_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app)" >/dev/null || t_fail "apply app"
tly assign app node-a >/dev/null || t_fail "assign app"
TALLY_HOME=$FH tly init --standby --leader-key "$(leader_key)" >/dev/null || t_fail "tally init --standby failed"
follow_start
_lh=$TALLY_HOME; TALLY_HOME=$FH; t_board_follow; TALLY_HOME=$_lh
t_tallyd_start --interval 1 --verify-interval 3600
LPID=$T_DPID

t_say "the leader decides node-a's acknowledgements and reports"
agent_start
wait_for 60 "v1 acknowledged" sh -c "\"$TALLY_BIN/tally\" log --json --type credential.acknowledged | grep -q '\"version\":1'"
tly rotate app/db >/dev/null || t_fail "tally rotate"
wait_for 60 "rotation to v2 completed" sh -c "\"$TALLY_BIN/tally\" log --json --type rotation.completed | grep -q '\"version\":2'"
V2PW=$(t_envget "$W/node-a/app.env" DB_PASSWORD)
wait_for 30 "node-a's report of v2" sh -c "\"$TALLY_BIN/tally\" status app | grep -q 'app@node-a app/db: v2 delivered, reloaded, acknowledged'"
sleep 3	# reports every second, each one decided
agent_stop
# Signed by node-a, for a holder of node-a that does not hold the grant:
# a fact about node-a, recorded.
r0=$(count "$LH" security.ack-refused)
publish_ack "$($FORGE --node node-a --grant app/db --holder other@node-a --version 2 --key "$(t_nodekey node-a)" --password="$V2PW")"
wait_for 20 "the refusal" sh -c "[ \$(\"$TALLY_BIN/tally\" log --json --type security.ack-refused | wc -l) -gt $r0 ]"
OFFERS=$(($(count "$LH" credential.ack-offered) + $(count "$LH" node.report-offered)))
t_ok "$(count "$LH" credential.acknowledged) acknowledged, $(count "$LH" security.ack-refused) refused, $(count "$LH" node.reported) node.reported; $OFFERS offers in the log"

t_say "the leader stops; the standby has everything; tally promote"
sleep 2
kill -TERM "$LPID"; t_wait_exit "$LPID" 10
e=$(($(t_now_ms) + 60000))
until [ "$(head_of "$FH")" = "$(head_of "$LH")" ]; do
	[ "$(t_now_ms)" -lt "$e" ] || t_fail "the standby is at $(head_of "$FH"), the leader at $(head_of "$LH")"
	sleep 0.2
done
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
cp "$LH/master.key" "$FH/master.key"
chmod 600 "$FH/master.key"
TALLY_HOME=$FH tly promote --yes >"$W/promote.out" || t_fail "tally promote failed: $(cat "$W/promote.out")"
A0=$(count "$FH" credential.acknowledged)
R0=$(count "$FH" security.ack-refused)
N0=$(count "$FH" node.reported)
t_ok "$(cat "$W/promote.out"); at promotion: $A0 acknowledged, $R0 refused, $N0 node.reported"

t_check "tally-board, following the standby through the promotion, agrees with it"
n=$(TALLY_HOME=$FH t_board_agrees "promoted")
EPOCH=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["control_plane"]["epoch"])' "$W/board-live.json")
[ "$EPOCH" -ge 2 ] || t_fail "the board's control plane says epoch $EPOCH after the promotion"
curl -fsS --max-time 5 "http://127.0.0.1:$_t_blport/" >"$W/page.html" || t_fail "GET / of the following board"
grep -q "<td id=\"epoch\">$EPOCH</td>" "$W/page.html" || t_fail "the page does not show epoch $EPOCH"
grep -q 'data-kind="refused">[0-9]* security.ack-refused' "$W/page.html" ||
	t_fail "the page's 'Needs a person' does not list the refused acknowledgement"
t_ok "$n requirement(s) the same; epoch $EPOCH on the page; '$(sed -n 's/.*data-kind="refused">\([^<]*\).*/\1/p' "$W/page.html" | head -n 1)'"

t_say "the new leader decides nothing again"
export TALLY_HOME=$FH
t_tallyd_start --interval 1 --verify-interval 3600
t_wait_healthy 60
sleep 5
A1=$(count "$FH" credential.acknowledged)
R1=$(count "$FH" security.ack-refused)
N1=$(count "$FH" node.reported)
[ "$R1" = "$R0" ] || { tly log --json --type security.ack-refused | tail -n 3 >&2; t_fail "$((R1 - R0)) new security.ack-refused after the promotion"; }
[ "$N1" = "$N0" ] || t_fail "$((N1 - N0)) new node.reported after the promotion (no agent ran)"
[ "$A1" = "$A0" ] || t_fail "$((A1 - A0)) new credential.acknowledged after the promotion"
t_ok "0 new security.ack-refused, 0 new node.reported, 0 new credential.acknowledged"

t_say "a new acknowledgement is decided once"
agent_start
tly rotate app/db >/dev/null || t_fail "tally rotate on the new leader"
wait_for 60 "rotation to v3 completed" sh -c "\"$TALLY_BIN/tally\" log --json --type rotation.completed | grep -q '\"version\":3'"
[ "$(tly log --json --type credential.acknowledged | grep -c '"version":3')" = 1 ] || t_fail "v3 acknowledged $(tly log --json --type credential.acknowledged | grep -c '"version":3') times"
[ "$(count "$FH" security.ack-refused)" = "$R0" ] || t_fail "a refusal after the promotion"
t_ok "v3 acknowledged once by node-a's agent on the new leader"
t_check "and after v3, on the new leader"
t_ok "$(t_board_agrees "v3 on the new leader") requirement(s) the same"
