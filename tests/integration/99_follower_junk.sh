#!/bin/sh
# One message cannot stop a follower (issue 22, item 5 without the
# public key).  Real RabbitMQ and PostgreSQL; a leader publishing to the
# stream tally.record; a standby holding the master key that follows it.
# While the follower is stopped, a third party who may publish to the
# stream adds, between the leader's genuine messages:
#   - 8 oversized messages (20 MB each, over the log's largest event),
#   - a headerless copy of a genuine envelope,
#   - a genuine event's seq/hash/mac headers on another body, in the
#     authenticator's format 1 (an older leader's) and format 2,
#   - random bytes with random headers,
#   - duplicates of genuine messages, in reverse order (reordered), with
#     their genuine format-2 authenticators (computed apart from tally by
#     tests/harness/stream_auth.py from what core/secret.h documents).
# The follower, started again, keeps following (through the leader's new
# events), ends byte-identical to the leader (events tables compared,
# verify passes), its peak memory (VmHWM) stays under 100 MB, tally
# status counts exactly the 12 messages it passed over (duplicates are
# not counted: they are the leader's), its log says so at most a few
# times (rate-limited), and a restart does not count them again.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
STREAM=tally.record
LH=$TALLY_HOME
FH=$W/standby
PUB="python3 $TALLY_SRC/tests/harness/amqp_publish.py"
AUTH="python3 $TALLY_SRC/tests/harness/stream_auth.py"

head_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
events_dump() { mdb_dump -s events "$1/log" >"$W/dump.tmp" && sed '1,/^HEADER=END/d; /^DATA=END/d' "$W/dump.tmp"; }
fly() { TALLY_HOME=$FH "$TALLY_BIN/tally" "$@"; }
# wait_follow SECONDS: until the follower's head is the leader's; fails
# at once when the follower exits.
wait_follow() {
	_w_end=$(($(t_now_ms) + $1 * 1000))
	until [ "$(head_of "$FH")" = "$(head_of "$LH")" ]; do
		kill -0 "$FPID" 2>/dev/null && [ "$(sed 's/^.*) //' "/proc/$FPID/stat" 2>/dev/null | cut -c1)" != Z ] || {
			t_wait_exit "$FPID" 5
			tail -n 5 "$T_DLOG" >&2
			t_fail "the follower exited $T_RC at $(head_of "$FH") (the leader at $(head_of "$LH"))"
		}
		[ "$(t_now_ms)" -lt "$_w_end" ] || {
			tail -n 20 "$T_DLOG" >&2
			t_fail "the follower is at $(head_of "$FH"), the leader at $(head_of "$LH"), after $1 s"
		}
		sleep 0.2
	done
}
# rec SEQ: the follower's record SEQ (chain hash || envelope), in hex.
rec() {
	events_dump "$FH" >"$W/rec.dump"
	awk -v k=" $(printf '%016x' "$1")" '$0 == k { getline; print; exit }' "$W/rec.dump" | tr -d ' '
}
# body SEQ FILE: event SEQ's envelope bytes into FILE; prints its hash.
body() {
	_r=$(rec "$1")
	[ -n "$_r" ] || t_fail "event $1 not found in the follower's log"
	printf '%s' "$_r" | cut -c65- | xxd -r -p >"$2"
	printf '%s' "$_r" | cut -c1-64
}
pub() {
	$PUB --port "$TALLY_TEST_AMQP_PORT" --user "$TALLY_TEST_AMQP_USER" \
		--password="$TALLY_TEST_AMQP_PASSWORD" --queue "$STREAM" "$@" ||
		t_fail "publishing to $STREAM failed ($*)"
}
# sig_of SEQ: the leader's signature of event SEQ, as the follower kept
# it (core/log.h: the record is 01, the epoch in 8 bytes, the signature).
sig_of() {
	mdb_dump -s signatures "$FH/log" >"$W/sig.dump"
	sed '1,/^HEADER=END/d; /^DATA=END/d' "$W/sig.dump" |
		awk -v k=" $(printf '%016x' "$1")" '$0 == k { getline; print; exit }' | tr -d ' ' | cut -c19-
}
# genuine SEQ: event SEQ published again with its genuine format-2 headers.
genuine() {
	_h=$(body "$1" "$W/g.bin")
	_m=$($AUTH "$FH/master.key" "$1" 1 "$_h" "$W/g.bin" | cut -d' ' -f2)
	_g=$(sig_of "$1")
	[ ${#_g} -eq 128 ] || t_fail "the follower keeps no signature of event $1"
	pub --body-file "$W/g.bin" --int seq="$1" --header hash="$_h" --header mac="$_m" \
		--header sig="$_g" --int auth=2 --int epoch=1
}

t_say "RabbitMQ, PostgreSQL; a leader publishing to $STREAM, a standby with the key following it"
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
TALLY_HOME=$FH tly init --standby >/dev/null || t_fail "tally init --standby failed"
cp "$LH/master.key" "$FH/master.key"; chmod 600 "$FH/master.key"
t_tallyd_start --interval 1 --verify-interval 3600
t_wait_healthy 60 app
follow_start
wait_follow 60
H0=$(head_of "$FH")
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
t_ok "the follower holds the leader's $H0 events; stopped"

t_say "a third party publishes junk between the leader's messages"
K=3
pub --random $((20 * 1024 * 1024)) --count 8 --int seq=$((H0 + 1)) \
	--header hash="$(head -c 32 /dev/urandom | xxd -p -c 64)" \
	--header mac="$(head -c 32 /dev/urandom | xxd -p -c 64)" --int auth=2 --int epoch=1
HK=$(body $K "$W/k.bin")
HK1=$(body $((K + 1)) "$W/k1.bin")
pub --body-file "$W/k.bin"
set -- $($AUTH "$FH/master.key" $K 1 "$HK" "$W/k.bin")
MAC1=$1 MAC2=$2
pub --body-file "$W/k1.bin" --int seq=$K --header hash="$HK" --header mac="$MAC1"
pub --body-file "$W/k1.bin" --int seq=$K --header hash="$HK" --header mac="$MAC2" --int auth=2 --int epoch=1
pub --random 300 --int seq=$((H0 + 1)) --header hash="$(head -c 32 /dev/urandom | xxd -p -c 64)" \
	--header mac="$(head -c 32 /dev/urandom | xxd -p -c 64)"
for s in $((K + 3)) $((K + 2)) $((K + 1)) $K; do genuine $s; done
JUNK=12
t_ok "8 x 20 MB, a headerless envelope, format-1 and format-2 headers of event $K on event $((K + 1))'s body, random bytes: $JUNK; 4 genuine duplicates, reordered"

t_check "the follower, started again, keeps following while the leader goes on"
follow_start
tly apply "$(t_consumer app2)" >/dev/null || t_fail "apply app2"
tly assign app2 node-a >/dev/null || t_fail "assign app2"
t_wait_healthy 60 app2
wait_follow 90
kill -0 "$FPID" || t_fail "the follower stopped"
HWM=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$FPID/status")
t_note "the follower's peak resident memory: $HWM kB"
[ "$HWM" -lt 102400 ] || t_fail "the follower's peak memory is $HWM kB: the oversized messages were held"
events_dump "$LH" >"$W/leader.dump"
events_dump "$FH" >"$W/follower.dump"
cmp -s "$W/leader.dump" "$W/follower.dump" || {
	diff "$W/leader.dump" "$W/follower.dump" | head -n 6 >&2
	t_fail "the follower's events table differs from the leader's"
}
fly verify >"$W/fverify.out" 2>&1 || t_fail "tally verify on the follower: $(cat "$W/fverify.out")"
t_ok "head $(head_of "$FH") as the leader's, byte-identical, verify passes, VmHWM $HWM kB"

t_check "tally status on the standby counts what it passed over"
st=0; fly status >"$W/fstatus.out" 2>&1 || st=$?
[ $st -eq 0 ] || [ $st -eq 6 ] || t_fail "tally status on the follower exited $st"
grep -q "$JUNK stream message(s) passed over" "$W/fstatus.out" ||
	t_fail "tally status does not count $JUNK messages passed over: $(grep -i -A1 standby "$W/fstatus.out")"
fly status --json >"$W/fstatus.json" 2>/dev/null || true
grep -q "\"passed_over\":$JUNK" "$W/fstatus.json" || t_fail "status --json: $(grep -o '"standby":{[^}]*}' "$W/fstatus.json")"
N=$(grep -c "tallyd\[$FPID\] error: refusing" "$T_DLOG" || true)
[ "$N" -ge 1 ] && [ "$N" -le 3 ] || t_fail "the follower logged $N refusal lines: $(grep "tallyd\[$FPID\] error" "$T_DLOG" | head -n 5)"
t_ok "$(grep 'passed over' "$W/fstatus.out" | sed 's/^ *//'); $N log line(s): $(grep "tallyd\[$FPID\] error: refusing" "$T_DLOG" | head -n 1 | sed 's/.*error: //' | cut -c1-160)"

t_check "a restart resumes past them: nothing counted twice"
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
[ "$T_RC" -eq 0 ] || t_fail "the follower exited $T_RC on SIGTERM"
follow_start
tly apply "$(t_consumer app3)" >/dev/null || t_fail "apply app3"
wait_follow 60
fly status --json >"$W/fstatus.json" 2>/dev/null || true
grep -q "\"passed_over\":$JUNK" "$W/fstatus.json" || t_fail "after a restart: $(grep -o '"standby":{[^}]*}' "$W/fstatus.json")"
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
t_ok "still $JUNK, head $(head_of "$FH")"

t_say "done"
