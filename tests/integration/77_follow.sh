#!/bin/sh
# A standby that follows the record over a RabbitMQ stream (issue 17),
# against a real RabbitMQ and a real PostgreSQL:
#
#   1. the leader publishes to the stream tally.record; a standby home
#      (tally init --standby) follows it with tallyd --follow while
#      10,000 events are appended (a sustained stream, in the
#      background); the follower is SIGKILLed while it is appending
#      and restarted while the stream goes on, then the broker is
#      killed while the follower appends, and restarted: the follower's
#      events table is byte-identical to the leader's (same head hash),
#      tally verify and tally rebuild --check pass on it, and read
#      commands work there;
#   2. an altered copy of an event injected into the stream is refused
#      by the follower, naming its sequence number, and nothing is
#      appended past it.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

# --- the broker ---------------------------------------------------------

STREAM=tally.record
N=${TALLY_FOLLOW_EVENTS:-10000}
BATCH=500
LH=$TALLY_HOME
FH=$W/standby

fly() { TALLY_HOME=$FH "$TALLY_BIN/tally" "$@"; }
head_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
# The events table, record by record (hash || envelope), in hex.
events_dump() { mdb_dump -s events "$1/log" >"$W/dump.tmp" && sed '1,/^HEADER=END/d; /^DATA=END/d' "$W/dump.tmp"; }

wait_follow() {
	_w_end=$(($(t_now_ms) + $1 * 1000))
	until [ "$(head_of "$FH")" = "$(head_of "$LH")" ]; do
		[ "$(t_now_ms)" -lt "$_w_end" ] || {
			tail -n 20 "$T_DLOG" >&2
			t_fail "the follower is at $(head_of "$FH"), the leader at $(head_of "$LH"), after $1 s"
		}
		sleep 0.2
	done
}

t_say "RabbitMQ and PostgreSQL on loopback; a leader publishing to the stream $STREAM"
r_start
t_pg_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app)" >/dev/null
tly assign app node-a >/dev/null
t_tallyd_start --interval 1 --verify-interval 3600
t_wait_healthy 30 app

t_check "tally init --standby: a home without a master key, that says how to copy it"
TALLY_HOME=$FH tly init --standby >"$W/standby.out" || t_fail "tally init --standby failed"
[ ! -e "$FH/master.key" ] || t_fail "tally init --standby generated a master key"
grep -q "master.key" "$W/standby.out" && grep -q "0600" "$W/standby.out" ||
	t_fail "tally init --standby does not say how the key is copied: $(cat "$W/standby.out")"
t_expect_exit 4 "plain tallyd on a standby" "$TALLY_BIN/tallyd" --home "$FH" --once
grep -q "standby" "$W/last.err" || t_fail "tallyd on a standby does not say why: $(cat "$W/last.err")"
t_ok "no key; tallyd without --follow refuses there"

t_say "$N events; the follower SIGKILLed and restarted, then the broker killed and restarted"
mkdir -p "$W/mods"
seq 1 "$N" | awk -v d="$W/mods" -v b="$BATCH" '{
	k = int(($1 - 1) / b)
	dir = sprintf("%s/b%03d", d, k); f = sprintf("%s/m-%06d.yaml", dir, $1)
	if (!(dir in made)) { system("mkdir -p " dir); made[dir] = 1 }
	print "module: m-" sprintf("%06d", $1) > f; close(f) }'
follow_start
# The applies run on in the background: a sustained stream.  Each
# interruption comes while the follower is appending (its head moved
# since the last look and is still behind the leader's).
( for b in "$W"/mods/b*; do
	tly apply "$b"/*.yaml >/dev/null || { echo "tally apply $b failed" >"$W/apply.err"; exit 1; }
done ) &
APID=$!
_t_pids="$_t_pids $APID"
# mid_stream FROM: waits until the leader is past event FROM and the
# follower is appending; sets F and L to their heads then.
mid_stream() {
	_m_prev=$(head_of "$FH")
	_m_i=0
	while :; do
		kill -0 "$APID" 2>/dev/null || t_fail "the stream ended before the follower was caught appending past $1"
		F=$(head_of "$FH"); L=$(head_of "$LH")
		[ "$L" -gt "$1" ] && [ "$F" -gt "$_m_prev" ] && [ "$F" -lt "$L" ] && return 0
		_m_prev=$F
		_m_i=$((_m_i + 1)); [ $_m_i -lt 3000 ] || t_fail "the follower was never caught appending past $1"
		sleep 0.02
	done
}
mid_stream $((N / 5))
kill -KILL "$FPID"
t_wait_exit "$FPID" 10
FK=$(head_of "$FH")
t_note "follower SIGKILLed while appending: at its event $F (leader at $L), $FK after the kill"
until [ "$(head_of "$LH")" -gt $((L + N / 10)) ]; do
	kill -0 "$APID" 2>/dev/null || t_fail "the stream ended while the follower was down"
	sleep 0.05
done
follow_start
mid_stream $((N / 2))
r_kill
t_note "broker killed while the follower was appending: follower at $F, leader at $L"
sleep 1
r_restart
t_note "broker back: follower at $(head_of "$FH"), leader at $(head_of "$LH")"
wait "$APID" || t_fail "$(cat "$W/apply.err" 2>/dev/null)"
[ "$(head_of "$LH")" -ge "$N" ] || t_fail "the leader holds $(head_of "$LH") events, expected $N at least"
wait_follow 120
t_ok "the follower reached the leader's head, $(head_of "$LH")"

t_check "byte-identical: every record (hash and envelope) of both logs"
events_dump "$LH" >"$W/leader.dump"
events_dump "$FH" >"$W/follower.dump"
cmp -s "$W/leader.dump" "$W/follower.dump" || {
	diff "$W/leader.dump" "$W/follower.dump" | head -n 6 >&2
	t_fail "the follower's events table differs from the leader's"
}
fly verify >"$W/fverify.out" || t_fail "tally verify on the follower: $(cat "$W/fverify.out")"
fly rebuild --check >/dev/null || t_fail "tally rebuild --check on the follower failed"
tly log --json | t_jfields seq id >"$W/l.ids"
fly log --json | t_jfields seq id >"$W/f.ids"
cmp -s "$W/l.ids" "$W/f.ids" || t_fail "tally log differs between the homes"
fly history app >/dev/null || t_fail "tally history on the follower failed"
tly grants --json >"$W/l.grants"; fly grants --json >"$W/f.grants"
[ -s "$W/f.grants" ] && cmp -s "$W/l.grants" "$W/f.grants" || t_fail "tally grants differs on the follower: $(head -c 300 "$W/f.grants")"
tly replay --until 100 --status --json >"$W/l.replay"; fly replay --until 100 --status --json >"$W/f.replay"
[ -s "$W/f.replay" ] && cmp -s "$W/l.replay" "$W/f.replay" || t_fail "tally replay differs on the follower"
st=0; fly status >"$W/fstatus.out" 2>&1 || st=$?
[ $st -eq 0 ] || [ $st -eq 6 ] || t_fail "tally status on the follower exited $st"
grep -q "refusing the record" "$T_DLOG" && t_fail "the follower refused something: $(grep refusing "$T_DLOG")"
t_ok "$(wc -l <"$W/leader.dump") dump lines identical; verify, rebuild --check, log, history, grants, replay, status work"

t_say "a tampered event injected into the stream"
kill -TERM "$T_DPID"; t_wait_exit "$T_DPID" 10
K=5
# Event K as the follower holds it: hash (32 bytes) then the envelope;
# the copy has its actor altered, keeps its seq and its hash header.
KEY=$(printf '%016x' $K)
events_dump "$FH" >"$W/f5.dump"
REC=$(awk -v k=" $KEY" '$0 == k { getline; print; exit }' "$W/f5.dump" | tr -d ' ')
[ -n "$REC" ] || t_fail "event $K not found in the follower's dump"
HASH=$(printf '%s' "$REC" | cut -c1-64)
ENV=$(printf '%s' "$REC" | cut -c65-)
# "cli:" becomes "clj:" in the actor (every CLI event's actor starts so).
BAD=$(printf '%s' "$ENV" | sed 's/636c693a/636c6a3a/')
[ "$BAD" != "$ENV" ] || t_fail "no actor to alter in event $K"
P=$(printf '%s' "$BAD" | xxd -r -p | base64 -w0)
api POST /exchanges/%2F/amq.default/publish \
	"{\"properties\":{\"headers\":{\"seq\":$K,\"hash\":\"$HASH\"}},\"routing_key\":\"$STREAM\",\"payload\":\"$P\",\"payload_encoding\":\"base64\"}" |
	grep -q '"routed":true' || t_fail "the tampered message was not routed to the stream"
FH0=$(head_of "$FH")
t_wait_exit "$FPID" 30
[ "$T_RC" -eq 5 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "the follower exited $T_RC on a tampered event, expected 5"; }
grep -q "refusing the record at event $K:" "$T_DLOG" ||
	t_fail "the refusal does not name event $K: $(grep -i refus "$T_DLOG" | tail -n 2)"
[ "$(head_of "$FH")" = "$FH0" ] || t_fail "the follower appended past the tampered event"
fly verify >/dev/null || t_fail "the follower's log does not verify after the refusal"
t_ok "refused at event $K ($(grep "refusing the record" "$T_DLOG" | tail -n 1 | sed 's/.*: refusing/refusing/' | cut -c1-140))"

t_say "an authenticated record: a forged next event, the leader's log rewritten and republished"
# The whole record again, on a second stream, with every message's
# authenticator (the leader's master key).
pub_ck() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | tr '{' '\n' | sed -n 's/.*"name":"publisher","seq":\([0-9]*\).*/\1/p'; }
# publish_all HOME: tallyd on HOME until its publisher has the head.
publish_all() {
	TALLY_HOME=$1 t_tallyd_start --home "$1" --interval 1 --verify-interval 3600
	_p_i=0
	until [ "$(pub_ck "$1")" = "$(head_of "$1")" ]; do
		_p_i=$((_p_i + 1)); [ $_p_i -lt 600 ] || t_fail "$1 did not publish its record in 60 s"
		sleep 0.1
	done
	kill -TERM "$T_DPID"; t_wait_exit "$T_DPID" 10
}
S2=tally.record2
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$S2" >/dev/null
tly publish rewind 1 >/dev/null || t_fail "tally publish rewind 1 failed"
publish_all "$LH"
H=$(head_of "$LH")
# LX: the leader's home as it is now; its future will differ.
cp -a "$LH" "$W/lx"
# FK holds the master key (copied, 0600), FN does not.
FK=$W/standby-key FN=$W/standby-nokey
for h in "$FK" "$FN"; do TALLY_HOME=$h tly init --standby >/dev/null; done
cp "$LH/master.key" "$FK/master.key"; chmod 600 "$FK/master.key"
STREAM=$S2
FH=$FK; follow_start; KPID=$FPID; wait_follow 60
grep "tallyd\[$KPID\] info: started" "$T_DLOG" | grep -q "every message authenticated" ||
	t_fail "the follower with the key does not say it authenticates"
FH=$FN; follow_start; NPID=$FPID; wait_follow 60

t_check "a third party publishes event $((H + 1)): a valid envelope, its correct chain hash, no authenticator"
TALLY_HOME=$W/lx tly apply "$(t_consumer forged)" >/dev/null
events_dump "$W/lx" >"$W/lx.dump"
KEY=$(printf '%016x' $((H + 1)))
REC=$(awk -v k=" $KEY" '$0 == k { getline; print; exit }' "$W/lx.dump" | tr -d ' ')
[ -n "$REC" ] || t_fail "event $((H + 1)) not found in the copy's dump"
P=$(printf '%s' "$REC" | cut -c65- | xxd -r -p | base64 -w0)
api POST /exchanges/%2F/amq.default/publish \
	"{\"properties\":{\"headers\":{\"seq\":$((H + 1)),\"hash\":\"$(printf '%s' "$REC" | cut -c1-64)\"}},\"routing_key\":\"$S2\",\"payload\":\"$P\",\"payload_encoding\":\"base64\"}" |
	grep -q '"routed":true' || t_fail "the forged message was not routed to $S2"
_i=0
until grep -q "tallyd\[$KPID\] error: refusing 1 message(s) not published by a holder of the master key, the first at event $((H + 1))" "$T_DLOG"; do
	_i=$((_i + 1)); [ $_i -lt 300 ] || t_fail "the follower with the key did not refuse the forged event: $(grep "tallyd\[$KPID\]" "$T_DLOG" | tail -n 2)"
	sleep 0.1
done
[ "$(head_of "$FK")" = "$H" ] || t_fail "the follower with the key appended the forged event"
kill -0 "$KPID" || t_fail "the follower with the key stopped on a forged message"
_i=0
until [ "$(head_of "$FN")" = $((H + 1)) ]; do
	_i=$((_i + 1)); [ $_i -lt 300 ] || t_fail "the follower without the key is at $(head_of "$FN")"
	sleep 0.1
done
t_ok "refused and passed over with the key (head $H, still following); appended without it (head $((H + 1)): the limit docs/standby.md states)"

t_check "the leader goes on: the keyed follower takes the genuine event $((H + 1)), the other refuses it"
tly apply "$(t_consumer genuine)" >/dev/null
publish_all "$LH"
FH=$FK; wait_follow 60
events_dump "$LH" >"$W/leader.dump"
events_dump "$FK" >"$W/fk.dump"
cmp -s "$W/leader.dump" "$W/fk.dump" || t_fail "the keyed follower's log differs from the leader's"
t_wait_exit "$NPID" 30
[ "$T_RC" -eq 5 ] || t_fail "the follower without the key exited $T_RC, expected 5"
grep -q "tallyd\[$NPID\] error: refusing the record at event $((H + 1)):" "$T_DLOG" ||
	t_fail "the follower without the key does not name event $((H + 1)): $(grep "tallyd\[$NPID\]" "$T_DLOG" | tail -n 2)"
t_ok "keyed: byte-identical at $(head_of "$FK"); without the key: stopped at event $((H + 1)), which it had taken forged"

t_check "the leader's log rewritten from event $((H + 1)) (a holder of the key) and republished"
FK0=$(head_of "$FK")
TALLY_HOME=$W/lx tly publish rewind 1 >/dev/null || t_fail "rewind on the copy failed"
publish_all "$W/lx"
t_wait_exit "$KPID" 60
[ "$T_RC" -eq 5 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "the keyed follower exited $T_RC on a rewritten past, expected 5"; }
grep -q "tallyd\[$KPID\] error: refusing the record at event $((H + 1)): event $((H + 1)) was published again with different bytes" "$T_DLOG" ||
	t_fail "the refusal does not name event $((H + 1)): $(grep "tallyd\[$KPID\]" "$T_DLOG" | tail -n 2)"
[ "$(head_of "$FK")" = "$FK0" ] || t_fail "the keyed follower appended from the rewritten past"
TALLY_HOME=$FK "$TALLY_BIN/tally" verify >/dev/null || t_fail "the keyed follower's log does not verify"
t_ok "refused at event $((H + 1)), head $FK0 kept, verify passes"

t_say "done"
