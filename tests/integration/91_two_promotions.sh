#!/bin/sh
# A promotion is won once (issue 22, item 4).  One RabbitMQ for the whole
# script, a directory provider.  A leader publishing to the stream
# tally.record holds a grant it could not provision (the provider's root
# did not exist: grant.failed after its intent); two standbys followed it
# to its head.  Twenty rounds: from copies of the two standbys' homes,
# the stream made afresh (deleted and declared again by the test, so
# each round's promotions are the first to epoch 2 in it), the root
# created, both promoted at the same moment and their tallyds started at
# once.  Exactly one leads: it says so and provisions the grant (the
# directory is made); the other exits 9, says it lost, is DEPOSED in
# tally status, and its log holds nothing after its own promotion (it
# made no call: the grant's outcome is recorded under the winner's
# epoch and leader only).
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
STREAM=tally.record
LH=$TALLY_HOME
ROOT=$W/root
ROUNDS=20

head_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
promo_seq() { TALLY_HOME=$1 "$TALLY_BIN/tally" log --type control-plane.promoted --json | sed -n 's/^{"seq":\([0-9]*\).*/\1/p' | tail -n 1; }
provisioned() { TALLY_HOME=$1 "$TALLY_BIN/tally" log --type grant.provisioned --json | grep -c '"seq"' || true; }
alive() { kill -0 "$1" 2>/dev/null && [ "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" != Z ]; }

t_say "RabbitMQ; a leader with a grant it could not provision; two standbys following it"
r_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/download.yaml" >/dev/null || t_fail "apply download"
tly assign download node-a --set root="$ROOT" >/dev/null || t_fail "assign download"
mkdir -p "$W/manifests"
printf 'module: app\nenv: {FILES: ""}\nrequires:\n  files:\n    type: directory\n    from: download\n    env: {path: FILES}\n' >"$W/manifests/app.yaml"
tly apply "$W/manifests/app.yaml" >/dev/null || t_fail "apply app"
tly assign app node-a >/dev/null || t_fail "assign app"
for s in s1 s2 s3; do
	TALLY_HOME=$W/$s tly init --standby --leader-key "$(leader_key)" >/dev/null || t_fail "init --standby $s"
	cp "$LH/master.key" "$W/$s/master.key"; chmod 600 "$W/$s/master.key"
done
t_tallyd_start --interval 1 --verify-interval 3600
_end=$(($(t_now_ms) + 60000))
until tly log --type grant.failed --json | grep -q '"seq"'; do
	[ "$(t_now_ms)" -lt "$_end" ] || t_fail "the leader recorded no grant.failed"
	sleep 0.2
done
t_tallyd_stop
for s in s1 s2 s3; do
	FH=$W/$s
	follow_start
	_end=$(($(t_now_ms) + 60000))
	until [ "$(head_of "$FH")" = "$(head_of "$LH")" ]; do
		[ "$(t_now_ms)" -lt "$_end" ] || t_fail "$s is at $(head_of "$FH"), the leader at $(head_of "$LH")"
		sleep 0.2
	done
	kill -TERM "$FPID"; t_wait_exit "$FPID" 10
done
H=$(head_of "$LH")
t_ok "three standbys hold the leader's $H events (grant.failed: root missing); the leader is down"

t_check "on the leader's own stream: s1 and s2 promoted at once; s3 follows the one that won"
mkdir -p "$ROOT"; chmod 0755 "$W" "$ROOT"
for s in s1 s2; do rm -rf "$W/r0$s"; cp -a "$W/$s" "$W/r0$s"; done
TALLY_HOME=$W/r0s1 "$TALLY_BIN/tally" promote --yes >"$W/p1.out" 2>&1 & P1=$!
TALLY_HOME=$W/r0s2 "$TALLY_BIN/tally" promote --yes >"$W/p2.out" 2>&1 & P2=$!
wait "$P1" && wait "$P2" || t_fail "promote: $(cat "$W/p1.out" "$W/p2.out")"
"$TALLY_BIN/tallyd" --home "$W/r0s1" --interval 1 --verify-interval 3600 2>"$W/d1.log" & D1=$!
"$TALLY_BIN/tallyd" --home "$W/r0s2" --interval 1 --verify-interval 3600 2>"$W/d2.log" & D2=$!
_t_pids="$_t_pids $D1 $D2"
_end=$(($(t_now_ms) + 60000))
while alive "$D1" && alive "$D2"; do
	[ "$(t_now_ms)" -lt "$_end" ] || t_fail "both tallyds still run after 60 s: both lead"
	sleep 0.1
done
if alive "$D1"; then WH=$W/r0s1 WP=$D1 LP=$D2; else WH=$W/r0s2 WP=$D2 LP=$D1; fi
t_wait_exit "$LP" 10
[ "$T_RC" -eq 9 ] || t_fail "the loser exited $T_RC, not 9"
_end=$(($(t_now_ms) + 60000))
until [ "$(provisioned "$WH")" -ge 1 ]; do
	[ "$(t_now_ms)" -lt "$_end" ] || t_fail "the winner did not provision the grant"
	sleep 0.2
done
FH=$W/s3
follow_start
_end=$(($(t_now_ms) + 60000))
until [ "$(head_of "$FH")" = "$(head_of "$WH")" ]; do
	alive "$FPID" || { t_wait_exit "$FPID" 5; t_fail "s3 exited $T_RC at $(head_of "$FH"): $(grep "tallyd\[$FPID\]" "$T_DLOG" | tail -n 2)"; }
	[ "$(t_now_ms)" -lt "$_end" ] || t_fail "s3 is at $(head_of "$FH"), the winner at $(head_of "$WH")"
	sleep 0.2
done
mdb_dump -s events "$WH/log" | sed '1,/^HEADER=END/d' >"$W/w.dump"
mdb_dump -s events "$FH/log" | sed '1,/^HEADER=END/d' >"$W/f.dump"
cmp -s "$W/w.dump" "$W/f.dump" || t_fail "s3's events differ from the winner's"
TALLY_HOME=$FH tly status >"$W/s3.out" 2>&1 || true
grep -q "1 stream message(s) passed over.*a promotion that lost" "$W/s3.out" ||
	t_fail "s3 does not count the losing promotion: $(grep -i 'passed over' "$W/s3.out")"
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
kill -TERM "$WP"; t_wait_exit "$WP" 15
t_ok "one led, the other exited 9; s3 took the first promotion, passed over the other and holds the winner's log byte for byte"

t_check "$ROUNDS rounds: two standbys promoted at once, their tallyds started at once"
i=0
while [ $i -lt $ROUNDS ]; do
	i=$((i + 1))
	api DELETE "/queues/%2F/$STREAM" >/dev/null 2>&1 || true
	api PUT "/queues/%2F/$STREAM" '{"durable":true,"arguments":{"x-queue-type":"stream"}}' >/dev/null ||
		t_fail "round $i: declaring $STREAM again failed"
	rm -rf "$ROOT"; mkdir -p "$ROOT"; chmod 0755 "$W" "$ROOT"
	for s in s1 s2; do rm -rf "$W/r$i$s"; cp -a "$W/$s" "$W/r$i$s"; done
	TALLY_HOME=$W/r${i}s1 "$TALLY_BIN/tally" promote --yes >"$W/p1.out" 2>&1 & P1=$!
	TALLY_HOME=$W/r${i}s2 "$TALLY_BIN/tally" promote --yes >"$W/p2.out" 2>&1 & P2=$!
	wait "$P1" || t_fail "round $i: promote s1: $(cat "$W/p1.out")"
	wait "$P2" || t_fail "round $i: promote s2: $(cat "$W/p2.out")"
	: >"$W/d1.log"; : >"$W/d2.log"
	"$TALLY_BIN/tallyd" --home "$W/r${i}s1" --interval 1 --verify-interval 3600 2>"$W/d1.log" & D1=$!
	"$TALLY_BIN/tallyd" --home "$W/r${i}s2" --interval 1 --verify-interval 3600 2>"$W/d2.log" & D2=$!
	_t_pids="$_t_pids $D1 $D2"
	_end=$(($(t_now_ms) + 60000))
	while alive "$D1" && alive "$D2"; do
		[ "$(t_now_ms)" -lt "$_end" ] || t_fail "round $i: both tallyds still run after 60 s: both lead ($(grep -h 'epoch 2' "$W/d1.log" "$W/d2.log" | head -n 4))"
		sleep 0.1
	done
	if alive "$D1"; then WIN=1 LOSE=2 WP=$D1 LP=$D2; else WIN=2 LOSE=1 WP=$D2 LP=$D1; fi
	t_wait_exit "$LP" 10
	[ "$T_RC" -eq 9 ] || t_fail "round $i: tallyd of s$LOSE exited $T_RC, not 9: $(tail -n 5 "$W/d$LOSE.log")"
	grep -q "lost it and stands down before any provider call" "$W/d$LOSE.log" ||
		t_fail "round $i: the loser does not say it lost: $(tail -n 3 "$W/d$LOSE.log")"
	LH2=$W/r$i"s"$LOSE WH=$W/r$i"s"$WIN
	[ "$(head_of "$LH2")" = "$(promo_seq "$LH2")" ] ||
		t_fail "round $i: the loser appended after its promotion: head $(head_of "$LH2"), promotion $(promo_seq "$LH2")"
	st=0; TALLY_HOME=$LH2 tly status >"$W/ls.out" 2>&1 || st=$?
	grep -q "DEPOSED" "$W/ls.out" || t_fail "round $i: the loser's status is not DEPOSED: $(grep -i 'control plane' "$W/ls.out")"
	_end=$(($(t_now_ms) + 60000))
	until [ "$(provisioned "$WH")" -ge 1 ]; do
		alive "$WP" || { t_wait_exit "$WP" 5; t_fail "round $i: the winner exited $T_RC: $(tail -n 5 "$W/d$WIN.log")"; }
		[ "$(t_now_ms)" -lt "$_end" ] || t_fail "round $i: the winner did not provision the grant: $(tail -n 5 "$W/d$WIN.log")"
		sleep 0.2
	done
	grep -q "is the first to epoch 2 in the stream $STREAM.*: leading" "$W/d$WIN.log" ||
		t_fail "round $i: the winner does not say it leads: $(grep 'epoch' "$W/d$WIN.log" | head -n 3)"
	[ "$(ls "$ROOT" | wc -l)" -eq 1 ] ||
		t_fail "round $i: the root holds $(ls "$ROOT" | tr '\n' ' ')"
	kill -TERM "$WP"; t_wait_exit "$WP" 15
	[ "$T_RC" -eq 0 ] || t_fail "round $i: the winner exited $T_RC on SIGTERM"
	[ "$(provisioned "$LH2")" -eq 0 ] || t_fail "round $i: the loser recorded a grant.provisioned"
	t_note "round $i: s$WIN leads, s$LOSE exited 9"
	rm -rf "$LH2" "$WH"
done
t_ok "$ROUNDS rounds: one leader each time, the other exited 9 before any provider call"

t_say "done"
