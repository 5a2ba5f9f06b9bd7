#!/bin/sh
# tally-board --record (issue 27, item 1 over the wire): the board
# follows the leader's replication stream itself, each message's
# signature checked with the leader's key as a standby checks it
# (reactors/follow.c), into a log of its own in its store, and its
# states come from tally status's code: after every step the following
# board (TALLY_BOARD_CHECK=1) and tally status --json agree.  A message
# a third party publishes to the stream with a signature that does not
# verify is passed over and counted; a board given another key copies
# nothing; the copy dies with the board.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
STREAM=tally.record
PUB="python3 $TALLY_SRC/tests/harness/amqp_publish.py"
head_seq() { tly log --json | tail -n 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])'; }

t_say "RabbitMQ; a leader publishing its record to $STREAM; two directory grants"
r_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
chmod 600 "$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
KEY=$(tly publish status --json | sed -n 's/.*"signing_key":"\([0-9a-f]*\)".*/\1/p')
[ ${#KEY} -eq 64 ] || t_fail "no signing key in tally publish status --json"
mkdir -p "$W/root"
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/download.yaml" >/dev/null
tly assign download node-a --set root="$W/root" >/dev/null
tly apply "$(t_dir_consumer app-1)" "$(t_dir_consumer app-2)" >/dev/null
for m in app-1 app-2; do tly assign $m node-a >/dev/null; done
t_tallyd_start --interval 1 --verify-interval 3600
t_wait_healthy 60
SRC="--record $AMQP_URL --stream $STREAM --leader-key $KEY --user $TALLY_TEST_AMQP_USER --password-file $W/amqp.pw"
# shellcheck disable=SC2086
t_board_follow $SRC
t_ok "a board following $STREAM on port $_t_blport"

t_check "the board over the record agrees with tally status"
N=$(t_board_agrees "provisioned")
t_ok "$N requirement(s) the same on the board and in tally status"
grep -q "following stream $STREAM at .*every message's signature checked with the leader's key" "$W/board-live.log" ||
	t_fail "the board's copy does not say it checks signatures: $(head -n 3 "$W/board-live.log")"
curl -fsS --max-time 5 "http://127.0.0.1:$_t_blport/" | grep -q "the record of stream $STREAM at " ||
	t_fail "the page does not name the record as its source"
t_ok "its copy checks every signature; the page names the stream"

t_check "a change, a removal: the board follows the record"
tly apply "$(t_dir_consumer app-3)" >/dev/null
tly assign app-3 node-a >/dev/null
t_wait_healthy 60 app-3
N=$(t_board_agrees "app-3 added")
tly remove app-1 --yes >/dev/null || t_fail "tally remove app-1"
t_wait_for 60 "app-1's grant revoked" sh -c "'$TALLY_BIN/tally' --home '$TALLY_HOME' log --type grant.revoked --json | grep -q app-1"
N=$(t_board_agrees "app-1 removed")
t_ok "agreed after app-3 was added and app-1 removed ($N requirement(s))"

t_check "a message signed by no one is passed over; the board follows on"
H=$(head_seq)
head -c 300 /dev/urandom >"$W/forged.bin"
$PUB --port "$TALLY_TEST_AMQP_PORT" --user "$TALLY_TEST_AMQP_USER" \
	--password="$TALLY_TEST_AMQP_PASSWORD" --queue "$STREAM" --body-file "$W/forged.bin" \
	--int seq=$((H + 1)) --header hash="$(head -c 32 /dev/urandom | xxd -p -c 64)" \
	--int epoch=1 --int auth=2 --header sig="$(head -c 64 /dev/urandom | xxd -p -c 128)" ||
	t_fail "publishing the forgery failed"
t_wait_for 20 "the board's copy refusing it" grep -q "refusing 1 message(s) not signed by the leader's key, the first at event $((H + 1))" "$W/board-live.log"
t_wait_for 10 "the refusal under Needs a person" sh -c "curl -fsS --max-time 5 http://127.0.0.1:$_t_blport/ |
	grep -q '<li class=\"bad\" data-kind=\"stream-refused\">1 message(s) on the stream refused by this board.s copy of the record, the last at offset [0-9]*: its signature (sig) does not verify'"
tly apply "$(t_dir_consumer app-4)" >/dev/null
tly assign app-4 node-a >/dev/null
t_wait_healthy 60 app-4
N=$(t_board_agrees "after the forgery")
t_ok "the forgery refused, nothing of it shown; the board agrees after app-4 ($N requirement(s))"

t_check "once, without --follow: caught up; with another key: nothing copied"
H=$(head_seq)
# shellcheck disable=SC2086
"$TALLY_BIN/tally-board" $SRC --store "$W/board-once" --json --quiet --idle 3 >"$W/once.json" 2>"$W/once.err" ||
	t_fail "tally-board --record once: $(cat "$W/once.err")"
P=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["meta"]["pos"])' "$W/once.json")
[ "$P" -ge "$H" ] || t_fail "the board caught up to $P, the log at $H"
OTHER=$(head -c 32 /dev/urandom | xxd -p -c 64)
"$TALLY_BIN/tally-board" --record "$AMQP_URL" --stream "$STREAM" --leader-key "$OTHER" \
	--user "$TALLY_TEST_AMQP_USER" --password-file "$W/amqp.pw" --store "$W/board-other" \
	--json --quiet --idle 3 >"$W/other.json" 2>"$W/other.err" ||
	t_fail "tally-board with another key: $(cat "$W/other.err")"
P=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["meta"].get("pos", 0))' "$W/other.json")
[ "$P" = 0 ] || t_fail "a board given another key shows the record up to $P"
grep -q "refusing [0-9]* message(s) not signed by the leader's key" "$W/other.err" ||
	t_fail "the board given another key does not say it refuses: $(cat "$W/other.err")"
t_expect_exit 2 "--record without --leader-key" "$TALLY_BIN/tally-board" --record "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --password-file "$W/amqp.pw" --store "$W/board-nokey" --json
t_ok "caught up once to $H; another key: nothing shown, every message refused; no key: refused"

t_check "the copy dies with the board"
CHILD=$(pgrep -P "$_t_blpid" | head -n 1)
[ -n "$CHILD" ] || t_fail "no copy process under the board"
kill -TERM "$_t_blpid"
t_wait_exit "$_t_blpid" 10
[ "$T_RC" -eq 0 ] || t_fail "the board exited $T_RC on SIGTERM"
t_forget_pid "$_t_blpid"
_t_blport=""
t_wait_for 10 "the copy gone" sh -c "! kill -0 $CHILD"
t_ok "the board exited 0 on SIGTERM, its copy ($CHILD) with it"
