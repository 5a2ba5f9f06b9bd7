#!/bin/sh
# The control plane compares what each node reports holding with the
# record (issue 21, item 2, the control plane's half).  Real RabbitMQ
# and PostgreSQL; app on node-a, its agent over AMQP; a rotation of
# app/db to v2 completes (v1 retired).  Then a report signed with
# node-a's key (as a node rolled back, or an agent replaying an old
# state, would send) says node-a holds v1: tally status names the node,
# the grant and both versions ("node-a holds v1 of grant/app/db,
# retired; the record says v2"), app is not ready, status exits 6; a
# report of v9 (never delivered) is shown as such; node-a's report of
# v2 older than the one recorded (a report sent again) and one signed by
# another key change nothing; once node-a's agent reports v2 again,
# status exits 0.
. "$(dirname "$0")/lib.sh"
PY3=/usr/bin/python3

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
REPORT="python3 $TALLY_SRC/tests/harness/forge_report.py"

wait_for() {	# SECONDS WHAT CMD...
	_e=$(($(t_now_ms) + $1 * 1000)); _what=$2; shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$(t_now_ms)" -lt "$_e" ] || {
			tail -n 20 "$T_DLOG" >&2; tail -n 20 "$W"/agent-*.log >&2
			"$TALLY_BIN/tally" status >&2 || true
			t_fail "$_what: not within the time"; }
		sleep 0.2
	done
}
publish_ack() {
	_p=$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')
	api POST /exchanges/%2F/amq.default/publish \
		"{\"properties\":{},\"routing_key\":\"tally.acks\",\"payload\":\"$_p\",\"payload_encoding\":\"string\"}" |
		grep -q '"routed":true' || t_fail "cannot publish to tally.acks"
}
status_exit() {	# WANT: tally status exits WANT
	set +e; "$TALLY_BIN/tally" status >"$W/status.txt" 2>&1; _rc=$?; set -e
	[ "$_rc" = "$1" ]
}
agent_start() {
	"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$W/node-a" --state "$W/node-a.state" \
		--amqp "$AMQP_URL" --amqp-user "$TALLY_TEST_AMQP_USER" --amqp-password-file "$W/amqp.pw" \
		--report-interval 1 --reload "app=true" 2>>"$W/agent-node-a.log" &
	APID=$!
	_t_pids="$_t_pids $APID"
}
agent_stop() { kill -TERM "$APID"; t_wait_exit "$APID" 10; }

t_say "RabbitMQ, PostgreSQL; app on node-a (AMQP agent); app/db rotated to v2"
r_start
t_pg_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password >/dev/null ||
	t_fail "tally publish configure failed"
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app)" >/dev/null || t_fail "apply app"
tly assign app node-a >/dev/null || t_fail "assign app"
t_tallyd_start --interval 1 --verify-interval 3600
agent_start
wait_for 60 "v1 acknowledged" sh -c "\"$TALLY_BIN/tally\" log --json --type credential.acknowledged | grep -q '\"version\":1'"
tly rotate app/db >/dev/null || t_fail "tally rotate"
wait_for 60 "rotation to v2 completed" sh -c "\"$TALLY_BIN/tally\" log --json --type rotation.completed | grep -q '\"version\":2'"
wait_for 30 "node-a's report of v2" sh -c "\"$TALLY_BIN/tally\" status app | grep -q 'app@node-a app/db: v2 delivered, reloaded, acknowledged'"
agent_stop
wait_for 20 "status exits 0" status_exit 0
t_ok "v1 retired, node-a holds v2: status exits 0"

t_say "node-a's signed report says it holds v1 (retired)"
publish_ack "$($REPORT --node node-a --key "$(t_nodekey node-a)" --held app/db=app@node-a=1)"
wait_for 20 "status exits 6" status_exit 6
grep -q "node-a holds v1 of grant/app/db, retired; the record says v2" "$W/status.txt" ||
	{ cat "$W/status.txt" >&2; t_fail "status does not say node-a holds the retired v1"; }
grep -q "^app: unhealthy" "$W/status.txt" || { cat "$W/status.txt" >&2; t_fail "app is not shown not ready"; }
tly status --json | grep -q '"off_record":\["node-a holds v1 of grant/app/db, retired' ||
	t_fail "status --json has no off_record for app"
t_ok "exit 6: $(grep -m1 'holds v1' "$W/status.txt" | sed 's/^ *//')"
t_check "tally-board says the same: app unhealthy, off the record"
n=$(t_board_agrees "node-a holds v1")
$PY3 -c 'import json,sys; b=json.load(open(sys.argv[1])); m=[x for x in b["status"]["modules"] if x["module"]=="app"][0]; sys.exit(0 if m["state"]=="unhealthy" and any("retired" in r for r in m.get("off_record",[])) and b["off_record"] else 1)' "$W/board-agree.json" ||
	t_fail "the board does not show app unhealthy with the off-record holding"
t_ok "$n requirement(s) agree; the board lists the holding off the record"

t_say "node-a's signed report says it holds v9 (never delivered)"
publish_ack "$($REPORT --node node-a --key "$(t_nodekey node-a)" --held app/db=app@node-a=9)"
wait_for 20 "status names v9" sh -c "\"$TALLY_BIN/tally\" status | grep -q 'node-a holds v9 of grant/app/db, which the record never delivered to app@node-a; the record says v2'"
status_exit 6 || t_fail "status exits 6 expected for v9"
t_ok "exit 6: never delivered"

t_say "node-a's own report of v2, but older than the one recorded (sent again): refused"
publish_ack "$($REPORT --node node-a --key "$(t_nodekey node-a)" --held app/db=app@node-a=2 --since 1000)"
wait_for 20 "the replay counted" sh -c "\"$TALLY_BIN/tally\" status | grep -q 'refused input: 1 replayed or late message(s) on tally.acks claiming node-a'"
status_exit 6 || t_fail "a replayed old report was believed"
grep -q "node-a holds v9 of grant/app/db" "$W/status.txt" || t_fail "the replay replaced the recorded report"
t_ok "still exit 6, the replay counted: $(grep -m1 'replayed or late' "$W/status.txt" | cut -c1-100)…"

t_say "a report signed by another key changes nothing"
publish_ack "$($REPORT --node node-a --random-key --held app/db=app@node-a=2)"
sleep 3
status_exit 6 || t_fail "a report not signed by node-a's key was believed"
t_ok "still exit 6"

t_say "node-a holds v2 again"
agent_start
wait_for 30 "status exits 0" status_exit 0
grep -q "holds v" "$W/status.txt" && { cat "$W/status.txt" >&2; t_fail "status still names a wrong version"; }
t_ok "exit 0 once node-a reports v2"

t_say "node-a's clock goes back an hour: its next report still counts"
# Its last report went out while its clock was an hour ahead (recorded,
# and kept in its state as report-since); now the clock is right again.
agent_stop
AHEAD=$(($(date +%s) * 1000000000 + 3600000000000))
publish_ack "$($REPORT --node node-a --key "$(t_nodekey node-a)" --held app/db=app@node-a=2 --since "$AHEAD")"
printf '%s\n' "$AHEAD" >"$W/node-a.state/report-since"
sleep 2
tly rotate app/db >/dev/null || t_fail "tally rotate"
agent_start
wait_for 60 "node-a's report of v3, made with its clock behind the recorded one" sh -c "\"$TALLY_BIN/tally\" status app | grep -q 'app@node-a app/db: v3 delivered, reloaded, acknowledged'"
wait_for 20 "status exits 0" status_exit 0
t_ok "v3 reported and recorded: a report's since never goes back"
