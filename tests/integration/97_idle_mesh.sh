#!/bin/sh
# An idle mesh appends nothing (issue 21, item 7; DESIGN.md rule 11).
# Real RabbitMQ and PostgreSQL; module app (one shared grant) on node-a,
# whose agent reads its queue over AMQP, and on node-b, whose agent
# follows the log; both at --report-interval 1.  Once converged, 10 s
# of idling append no event at all (each agent still sends its signed
# report every second: its heartbeat), while `tally status` shows each
# agent's last seen moving (the scratch table "agents-seen", written in
# place by the publisher for node-a and by the agent itself for
# node-b).  A change is still recorded: after a rotation each node's
# report of the new version is a node.reported.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

head_seq() { tly stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
wait_for() {	# SECONDS WHAT CMD...
	_e=$(($(t_now_ms) + $1 * 1000)); _what=$2; shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$(t_now_ms)" -lt "$_e" ] || {
			tail -n 20 "$T_DLOG" >&2; tail -n 20 "$W"/agent-*.log >&2
			t_fail "$_what: not within the time"; }
		sleep 0.2
	done
}
# seen NODE: the agent's last-seen time (ns) as tally status --json says.
seen() {
	tly status --json | tr '{' '\n' | grep "\"node\":\"$1\"" | grep reported_ns |
		sed -n 's/.*"reported_ns":\([0-9]*\).*/\1/p' | head -n 1
}
reports() { tly log --json --type node.reported | grep -c "\"node\":\"$1\"" || true; }

t_say "RabbitMQ, PostgreSQL; app on node-a (AMQP agent) and node-b (log agent)"
r_start
t_pg_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password >/dev/null ||
	t_fail "tally publish configure failed"
t_node node-a 127.0.0.1
t_node node-b localhost
t_provider node-a network
tly apply "$(t_consumer app)" >/dev/null || t_fail "apply app"
tly assign app node-a >/dev/null && tly assign app node-b >/dev/null || t_fail "assign app"
t_tallyd_start --interval 1 --verify-interval 3600
"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$W/node-a" --state "$W/node-a.state" \
	--amqp "$AMQP_URL" --amqp-user "$TALLY_TEST_AMQP_USER" --amqp-password-file "$W/amqp.pw" \
	--report-interval 1 --reload "app=true" 2>>"$W/agent-node-a.log" &
_t_pids="$_t_pids $!"
"$TALLY_BIN/tally-node" --node node-b --key "$(t_nodekey node-b)" --dir "$W/node-b" --state "$W/node-b.state" \
	--log "$TALLY_HOME" --report-interval 1 --reload "app=true" 2>>"$W/agent-node-b.log" &
_t_pids="$_t_pids $!"
wait_for 60 "both holders acknowledged v1" sh -c "[ \$(\"$TALLY_BIN/tally\" log --json --type credential.acknowledged | grep -c '\"version\":1') -ge 2 ]"
wait_for 30 "both agents reported holding v1, acknowledged" sh -c "\"$TALLY_BIN/tally\" status app | grep -q 'app@node-a app/db: v1 delivered, reloaded, acknowledged' && \"$TALLY_BIN/tally\" status app | grep -q 'app@node-b app/db: v1 delivered, reloaded, acknowledged'"
t_wait_healthy 30
sleep 3	# the last change's reports recorded
t_ok "converged: both agents hold v1, acknowledged"

t_say "10 s idle at --report-interval 1"
H0=$(head_seq)
sa0=$(seen node-a); sb0=$(seen node-b)
[ -n "$sa0" ] && [ -n "$sb0" ] || t_fail "status shows no last seen for node-a ('$sa0') or node-b ('$sb0')"
sleep 10
H1=$(head_seq)
sa1=$(seen node-a); sb1=$(seen node-b)
t_check "no event appended"
[ "$H1" = "$H0" ] || {
	tly log --json --from $((H0 + 1)) | t_jfields type | sort | uniq -c >&2
	t_fail "$((H1 - H0)) event(s) appended in 10 s of idling (head $H0 -> $H1)"
}
t_ok "head still $H1"
t_check "each agent's last seen moved"
[ "$sa1" -gt "$((sa0 + 5000000000))" ] || t_fail "node-a's last seen moved from $sa0 to $sa1 in 10 s"
[ "$sb1" -gt "$((sb0 + 5000000000))" ] || t_fail "node-b's last seen moved from $sb0 to $sb1 in 10 s"
tly status >"$W/status.txt" || { cat "$W/status.txt" >&2; t_fail "status not healthy while idle"; }
grep -q "node-a: tally-node .*, reported [0-3]s ago" "$W/status.txt" || { cat "$W/status.txt" >&2; t_fail "node-a not seen lately"; }
grep -q "node-b: tally-node .*, reported [0-3]s ago" "$W/status.txt" || { cat "$W/status.txt" >&2; t_fail "node-b not seen lately"; }
t_ok "node-a +$(((sa1 - sa0) / 1000000)) ms, node-b +$(((sb1 - sb0) / 1000000)) ms; status healthy"

t_say "a change is recorded: tally rotate app/db"
ra=$(reports node-a); rb=$(reports node-b)
tly rotate app/db >/dev/null || t_fail "tally rotate"
wait_for 60 "rotation.completed" sh -c "\"$TALLY_BIN/tally\" log --json --type rotation.completed | grep -q '\"version\":2'"
wait_for 30 "both agents' reports of v2" sh -c "\"$TALLY_BIN/tally\" status app | grep -q 'app@node-a app/db: v2 delivered, reloaded, acknowledged' && \"$TALLY_BIN/tally\" status app | grep -q 'app@node-b app/db: v2 delivered, reloaded, acknowledged'"
[ "$(reports node-a)" -gt "$ra" ] && [ "$(reports node-b)" -gt "$rb" ] ||
	t_fail "node.reported: node-a $ra -> $(reports node-a), node-b $rb -> $(reports node-b)"
t_ok "node.reported: node-a $ra -> $(reports node-a), node-b $rb -> $(reports node-b)"
t_say "idle again: nothing appended"
sleep 3
H2=$(head_seq)
sleep 5
[ "$(head_seq)" = "$H2" ] || {
	tly log --json --from $((H2 + 1)) | t_jfields type | sort | uniq -c >&2
	t_fail "$(($(head_seq) - H2)) event(s) appended in 5 s of idling after the rotation"
}
t_ok "head still $H2"
