#!/bin/sh
# A promotion is atomic (issue 22, item 5): tally promote killed at any
# point has either done nothing or done it once.  Real RabbitMQ; a leader
# publishing to the stream tally.record, a standby holding the master
# key that follows it to its head and is stopped.  Twenty copies of the
# standby's home are each promoted with `tally promote --yes` under the
# debugging hook TALLY_TEST_PROMOTE_PAUSE_MS (a pause between each of its
# steps: after the lock, after the checks, after the append before the
# commit, after the commit, after removing the marker) and SIGKILLed at
# a random moment of it; then promoted again without the hook.  Each
# copy must end with exactly one control-plane.promoted (epoch 2), no
# marker file, a status that says leader, and accept a write; a third
# promote says there is nothing to promote and appends nothing.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
STREAM=tally.record
LH=$TALLY_HOME
FH=$W/standby
ROUNDS=20
PAUSE=60	# ms per step; five steps

head_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
promotions() { TALLY_HOME=$1 "$TALLY_BIN/tally" log --type control-plane.promoted --json | grep -c '"seq"' || true; }

t_say "RabbitMQ; a leader publishing to $STREAM, a standby with the key following it"
r_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
t_node node-b 127.0.0.1
TALLY_HOME=$FH tly init --standby >/dev/null || t_fail "tally init --standby failed"
cp "$LH/master.key" "$FH/master.key"; chmod 600 "$FH/master.key"
t_tallyd_start --interval 1 --verify-interval 3600
follow_start
_end=$(($(t_now_ms) + 60000))
until [ "$(head_of "$FH")" = "$(head_of "$LH")" ]; do
	[ "$(t_now_ms)" -lt "$_end" ] || t_fail "the follower is at $(head_of "$FH"), the leader at $(head_of "$LH")"
	sleep 0.2
done
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
t_tallyd_stop
H=$(head_of "$FH")
t_ok "the standby holds the leader's $H events; both stopped"

t_check "$ROUNDS promotions, each SIGKILLed at a random point, then run again"
i=0 killed=0 early=0
while [ $i -lt $ROUNDS ]; do
	i=$((i + 1))
	C=$W/copy$i
	rm -rf "$C"; cp -a "$FH" "$C"
	TALLY_HOME=$C TALLY_TEST_PROMOTE_PAUSE_MS=$PAUSE "$TALLY_BIN/tally" promote --yes \
		>"$W/p1.out" 2>"$W/p1.err" &
	P=$!
	# Anywhere from before the lock to after the marker is gone.
	d=$(t_rand $((6 * PAUSE)))
	sleep "$(printf '0.%03d' "$d")"
	if kill -KILL "$P" 2>/dev/null; then killed=$((killed + 1)); else early=$((early + 1)); fi
	wait "$P" 2>/dev/null || true
	st=0
	TALLY_HOME=$C "$TALLY_BIN/tally" promote --yes >"$W/p2.out" 2>"$W/p2.err" || st=$?
	n=$(promotions "$C")
	[ "$n" -eq 1 ] || t_fail "round $i (killed after $d ms): $n control-plane.promoted in the log (second promote exited $st: $(cat "$W/p2.out" "$W/p2.err"); epochs: $(TALLY_HOME=$C tly log --type control-plane.promoted --json | grep -o '"epoch":[0-9]*' | tr '\n' ' '))"
	[ ! -e "$C/standby" ] || t_fail "round $i (killed after $d ms): $C/standby is still there after the second promote ($(cat "$W/p2.out" "$W/p2.err"))"
	TALLY_HOME=$C tly log --type control-plane.promoted --json | grep -q '"epoch":2' ||
		t_fail "round $i: the promotion is not at epoch 2"
	t_expect_exit 4 "round $i: a third promote" env TALLY_HOME="$C" "$TALLY_BIN/tally" promote --yes
	grep -q "is not a standby" "$W/last.err" || t_fail "round $i: the third promote says $(cat "$W/last.err")"
	[ "$(promotions "$C")" -eq 1 ] || t_fail "round $i: the third promote appended"
	TALLY_HOME=$C tly node add node-c$i --routable-name 127.0.0.1 --key-out "$W/keys/c$i.key" >/dev/null 2>"$W/w.err" ||
		t_fail "round $i: a write on the promoted home was refused: $(cat "$W/w.err")"
	TALLY_HOME=$C tly verify >/dev/null 2>&1 || t_fail "round $i: tally verify fails"
	st=0; TALLY_HOME=$C tly status >"$W/st.out" 2>&1 || st=$?
	grep -q "control plane: the leader at epoch 2" "$W/st.out" ||
		t_fail "round $i: tally status does not say leader: $(grep -i 'control plane' "$W/st.out")"
	[ $i -gt 3 ] && rm -rf "$C"
done
t_ok "$ROUNDS rounds ($killed killed mid-way, $early finished before the kill): one promotion each, epoch 2, leader, writable"
t_say "done"
