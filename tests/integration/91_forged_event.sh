#!/bin/sh
# Every follower authenticates without the master key (issue 22, item 5).
# Real RabbitMQ; a leader publishing to the stream tally.record; a
# standby given only the leader's public signing key (tally init
# --standby --leader-key, the key tally publish status prints), never
# the master key, follows it.  While the follower is stopped, a third
# party who may publish to the stream publishes a forged event: a
# well-formed envelope (a node.added for node "evil", made in a copy of
# the leader's log, so its sequence, link, stream version and chain hash
# are all correct) with authentic-looking headers but no valid signature:
# once with random "sig" and "mac", once without "sig".  Then the leader
# appends its own next event (same sequence number).  The follower,
# started again, passes both forgeries over and counts them, keeps
# following and ends byte-identical to the leader, every event's
# signature kept beside it.  Then a copy of the standby (the master key
# copied in for the promotion) gets an event nobody signed, appended
# through tl_log_append_raw by tests/tools/append_raw: tally promote
# refuses it, naming the event, and appends nothing; a copy without it
# is promoted.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
STREAM=tally.record
LH=$TALLY_HOME
FH=$W/standby
PUB="python3 $TALLY_SRC/tests/harness/amqp_publish.py"
APPEND=$TALLY_BIN/../tests/tools/append_raw
[ -x "$APPEND" ] || t_fail "$APPEND is missing (make build/tests/tools/append_raw)"

head_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
events_dump() { mdb_dump -s "${2:-events}" "$1/log" >"$W/dump.tmp" && sed '1,/^HEADER=END/d; /^DATA=END/d' "$W/dump.tmp"; }
fly() { TALLY_HOME=$FH "$TALLY_BIN/tally" "$@"; }
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
pub() {
	$PUB --port "$TALLY_TEST_AMQP_PORT" --user "$TALLY_TEST_AMQP_USER" \
		--password="$TALLY_TEST_AMQP_PASSWORD" --queue "$STREAM" "$@" ||
		t_fail "publishing to $STREAM failed ($*)"
}
# forge HOME NAME OUT: in a copy of HOME's log, node NAME added (the
# bytes a forger would make: a correct link, sequence, stream version);
# its envelope into OUT, its chain hash printed.  The copy holds the
# master key only because tally node add wants one: nothing of the
# forgery is signed with it.
forge() {
	_e=$W/evil-$2
	rm -rf "$_e"; mkdir -p "$_e/log"
	mdb_copy "$1/log" "$_e/log" || t_fail "mdb_copy $1/log"
	cp "$LH/master.key" "$_e/master.key"; chmod 600 "$_e/master.key"
	rm -f "$_e/standby"
	TALLY_HOME=$_e tly node add "$2" --routable-name 10.6.6.6 --key-out "$W/keys/$2.key" >/dev/null ||
		t_fail "forging node.added $2"
	_s=$(head_of "$_e")
	events_dump "$_e" >"$W/evil.dump"
	_r=$(awk -v k=" $(printf '%016x' "$_s")" '$0 == k { getline; print; exit }' "$W/evil.dump" | tr -d ' ')
	[ -n "$_r" ] || t_fail "the forged event $_s is not in $_e"
	printf '%s' "$_r" | cut -c65- | xxd -r -p >"$3"
	printf '%s' "$_r" | cut -c1-64
}

t_say "RabbitMQ; a leader publishing to $STREAM; a standby with only its public key"
r_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
KEY=$(tly publish status --json | sed -n 's/.*"signing_key":"\([0-9a-f]*\)".*/\1/p')
[ ${#KEY} -eq 64 ] || t_fail "tally publish status --json gives no signing_key: $(tly publish status --json)"
tly publish status | grep -q "signed with $KEY" || t_fail "tally publish status does not print the signing key"
t_check "tally init --standby --leader-key: the key kept, no master key"
t_expect_exit 2 "--leader-key of 63 hex digits" env TALLY_HOME="$W/bad" "$TALLY_BIN/tally" init --standby --leader-key "$(printf '%s' "$KEY" | cut -c2-)"
TALLY_HOME=$FH tly init --standby --leader-key "$KEY" >/dev/null || t_fail "tally init --standby --leader-key failed"
[ ! -e "$FH/master.key" ] || t_fail "the standby holds a master key"
grep -qx "$KEY" "$FH/leader.key" || t_fail "$FH/leader.key does not hold the key: $(cat "$FH/leader.key")"
t_ok "leader.key holds $(printf '%.16s' "$KEY")..."
t_tallyd_start --interval 1 --verify-interval 3600
follow_start
grep -q "tallyd\[$FPID\] info: started on $FH: following stream $STREAM at .*every message's signature checked with the leader's key" "$T_DLOG" ||
	t_fail "the follower does not say it checks signatures: $(grep "tallyd\[$FPID\]" "$T_DLOG" | head -n 3)"
wait_follow 60
H=$(head_of "$FH")
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
t_ok "the follower holds the leader's $H events; stopped"

t_say "a third party publishes a forged event $((H + 1)) (correct chain hash), unsigned"
HF=$(forge "$LH" evil "$W/forged.bin")
pub --body-file "$W/forged.bin" --int seq=$((H + 1)) --header hash="$HF" --int epoch=1 --int auth=2 \
	--header mac="$(head -c 32 /dev/urandom | xxd -p -c 64)" \
	--header sig="$(head -c 64 /dev/urandom | xxd -p -c 128)"
pub --body-file "$W/forged.bin" --int seq=$((H + 1)) --header hash="$HF" --int epoch=1 --int auth=2 \
	--header mac="$(head -c 32 /dev/urandom | xxd -p -c 64)"
t_node node-b 127.0.0.1
t_ok "forged node.added evil at $((H + 1)), random sig and no sig; then the leader's own event $((H + 1)) (node-b)"

t_check "the follower passes the forgeries over and keeps following"
follow_start
wait_follow 60
tly apply "$(t_consumer app)" >/dev/null || t_fail "apply app"
wait_follow 60
kill -0 "$FPID" || t_fail "the follower stopped"
events_dump "$LH" >"$W/leader.dump"
events_dump "$FH" >"$W/follower.dump"
cmp -s "$W/leader.dump" "$W/follower.dump" || {
	diff "$W/leader.dump" "$W/follower.dump" | head -n 6 >&2
	t_fail "the follower's events table differs from the leader's"
}
fly log --json | grep -q '"node/evil"' && t_fail "the forged node.added evil is in the follower's log"
fly verify >"$W/fverify.out" 2>&1 || t_fail "tally verify on the follower: $(cat "$W/fverify.out")"
NS=$(events_dump "$FH" signatures | grep -c '^ ' || true)
[ "$NS" -eq $((2 * $(head_of "$FH"))) ] || t_fail "the follower keeps $((NS / 2)) signature(s) for $(head_of "$FH") events"
st=0; fly status >"$W/fstatus.out" 2>&1 || st=$?
grep -q "2 stream message(s) passed over" "$W/fstatus.out" ||
	t_fail "tally status does not count 2 messages passed over: $(grep -i -A1 standby "$W/fstatus.out")"
grep -q "tallyd\[$FPID\] error: refusing [0-9]* message(s) not signed by the leader's key, the first at event $((H + 1))" "$T_DLOG" ||
	t_fail "the follower does not log the refusal: $(grep "tallyd\[$FPID\] error" "$T_DLOG" | head -n 3)"
t_ok "head $(head_of "$FH") as the leader's, byte-identical, a signature per event; $(grep 'passed over' "$W/fstatus.out" | sed 's/^ *//')"

t_check "the standby reports its position; the leader checks it and shows it"
SBY="$(hostname):$FH"
HL=$(head_of "$LH")
t_wait_for 30 "the leader's status showing $SBY at event $HL" sh -c "[ \"\$(TALLY_HOME='$LH' '$TALLY_BIN/tally' status --json 2>/dev/null | python3 -c 'import json,sys; print([s[\"applied\"] for s in json.load(sys.stdin).get(\"standbys\", []) if s[\"name\"] == sys.argv[1]])' '$SBY')\" = '[$HL]' ]"
tly status >"$W/lstatus.out" 2>&1 || true
grep -q "^  standby $SBY: applied through event $HL, 0 behind (its report of " "$W/lstatus.out" ||
	t_fail "the leader's tally status: $(grep standby "$W/lstatus.out")"
"$TALLY_BIN/tally-board" --home "$LH" --store "$W/board" --html "$W/board.html" --quiet || t_fail "tally-board failed"
grep -q "<table id=\"stream-standbys\">.*" "$W/board.html" && grep -qF "<tr><td>$SBY</td><td>event $HL</td><td class=\"behind\">0</td>" "$W/board.html" ||
	t_fail "the board does not list the standby: $(grep -A3 stream-standbys "$W/board.html" | head -n 4)"
# A report of a position the leader's log does not have is refused.
pub_acks() {
	$PUB --port "$TALLY_TEST_AMQP_PORT" --user "$TALLY_TEST_AMQP_USER" \
		--password="$TALLY_TEST_AMQP_PASSWORD" --queue tally.acks --body-file "$1" ||
		t_fail "publishing to tally.acks failed"
}
printf '{"standby":"forger:/x","seq":%s,"hash":"%s"}' "$HL" "$(head -c 32 /dev/urandom | xxd -p -c 64)" >"$W/fake.json"
pub_acks "$W/fake.json"
t_wait_for 30 "the forged report refused" sh -c "TALLY_HOME='$LH' '$TALLY_BIN/tally' status --json 2>/dev/null | grep -q 'is not this log'"
tly status --json 2>/dev/null | grep -q '"name":"forger:/x"' && t_fail "a report with a wrong hash is shown"
t_ok "$SBY at $HL on the leader's status and the board; a report with another hash refused, not shown"
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
# A standby whose broker user may read the stream but not write to the
# acks queue follows all the same, and says once that it cannot report.
sh "$RMQSH" ctl "$R_DIR" add_user reader readerpw >/dev/null 2>&1 &&
	sh "$RMQSH" ctl "$R_DIR" set_permissions -p / reader '^$' '^$' '.*' >/dev/null 2>&1 ||
	t_fail "cannot make a read-only broker user"
rm -rf "$W/ro"; cp -a "$FH" "$W/ro"
tly node add node-c --routable-name 127.0.0.1 --key-out "$W/keys/node-c.key" >/dev/null || t_fail "node add node-c"
printf 'readerpw\n' | "$TALLY_BIN/tallyd" --home "$W/ro" --follow --amqp "$AMQP_URL" --stream "$STREAM" \
	--user reader --secret password 2>"$W/ro.log" &
ROPID=$!
_t_pids="$_t_pids $ROPID"
t_wait_for 30 "the read-only standby at the leader's head" sh -c "[ \"\$(TALLY_HOME='$W/ro' '$TALLY_BIN/tally' stats --json | sed -n 's/.*\"last_seq\":\\([0-9]*\\).*/\\1/p')\" = '$(head_of "$LH")' ]"
sleep 6
kill -0 "$ROPID" || t_fail "the read-only standby stopped: $(tail -n 3 "$W/ro.log")"
[ "$(grep -c 'following without reporting' "$W/ro.log")" = 1 ] ||
	t_fail "the read-only standby does not say once that it cannot report: $(grep -i report "$W/ro.log" | head -n 3)"
[ "$(grep -c 'reconnecting' "$W/ro.log")" -le 1 ] ||
	t_fail "the read-only standby reconnects again and again: $(grep -c reconnecting "$W/ro.log")"
kill -TERM "$ROPID"; t_wait_exit "$ROPID" 10
t_ok "a standby without write permission follows to the head, says once it cannot report, reconnects once"
[ "$T_RC" -eq 0 ] || t_fail "the follower exited $T_RC on SIGTERM"

t_say "tally promote refuses a log with an event nobody signed"
H2=$(head_of "$FH")
for c in bad good; do
	rm -rf "$W/$c"; cp -a "$FH" "$W/$c"
	cp "$LH/master.key" "$W/$c/master.key"; chmod 600 "$W/$c/master.key"
done
forge "$FH" evil2 "$W/unsigned.bin" >/dev/null
S=$("$APPEND" "$W/bad/log" "$W/unsigned.bin") || t_fail "append_raw refused the event"
[ "$S" -eq $((H2 + 1)) ] || t_fail "append_raw appended event $S, not $((H2 + 1))"
TALLY_HOME=$W/bad tly verify >/dev/null 2>&1 || t_fail "the chain of the copy does not verify (the test's own error)"
t_expect_exit 4 "tally promote of a log with an unsigned event" env TALLY_HOME="$W/bad" "$TALLY_BIN/tally" promote --yes
grep -q "event $S (node.added on node/evil2) is not authenticated" "$W/last.err" ||
	t_fail "tally promote does not name event $S: $(cat "$W/last.err")"
[ "$(TALLY_HOME=$W/bad tly log --type control-plane.promoted --json | grep -c '"seq"' || true)" -eq 0 ] ||
	t_fail "the refused promote appended"
[ -e "$W/bad/standby" ] || t_fail "the refused promote removed the marker"
t_ok "$(cat "$W/last.err" | cut -c1-200)"
TALLY_HOME=$W/good tly promote --yes >"$W/good.out" 2>&1 || t_fail "tally promote of the genuine copy: $(cat "$W/good.out")"
grep -q "$H2 event(s) verified" "$W/good.out" || t_fail "promote does not say it verified $H2 events: $(cat "$W/good.out")"
t_ok "the copy without it: $(cat "$W/good.out")"

t_say "done"
