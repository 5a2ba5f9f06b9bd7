#!/bin/sh
# The fence on every provider session (issue 17): a leader that keeps
# running while a standby is promoted is not deposed only at its next
# resync.  The old leader runs with --interval 3600 (its periodic fence
# check an hour away); once the standby is promoted and its tallyd has
# raised its tally_fences row to 2, the old leader is given a new grant: its pass
# writes the intent, then the session it opens on PostgreSQL reads the
# fence before any driver call, finds epoch 2, makes no call, records no
# outcome, and it exits 9; PostgreSQL's catalogue is unchanged.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

STREAM=tally.record
LH=$TALLY_HOME
FH=$W/standby
fly() { TALLY_HOME=$FH "$TALLY_BIN/tally" "$@"; }
head_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
pg_objects() {
	t_sql "SELECT datname FROM pg_database ORDER BY 1"
	t_sql "SELECT rolname || ' ' || rolcanlogin FROM pg_roles ORDER BY 1"
}

t_say "RabbitMQ and PostgreSQL on loopback; a leader that resyncs once an hour, a standby"
r_start
t_pg_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer first)" >/dev/null
tly assign first node-a >/dev/null
t_tallyd_start --interval 3600 --verify-interval 3600
LPID=$T_DPID
t_wait_healthy 60 first
TALLY_HOME=$FH tly init --standby --leader-key "$(leader_key)" >/dev/null || t_fail "tally init --standby failed"
"$TALLY_BIN/tallyd" --home "$FH" --follow --amqp "$AMQP_URL" --stream "$STREAM" \
	--user "$TALLY_TEST_AMQP_USER" --secret password <"$W/amqp.pw" 2>>"$T_DLOG" &
FPID=$!
_t_pids="$_t_pids $FPID"
_i=0
until [ "$(head_of "$FH")" = "$(head_of "$LH")" ]; do
	_i=$((_i + 1)); [ $_i -lt 300 ] || t_fail "the standby did not reach the leader's head in 60 s"
	sleep 0.2
done
kill -TERM "$FPID"; t_wait_exit "$FPID" 10

t_check "the standby promoted while the old leader runs; the new leader fences PostgreSQL"
cp "$LH/master.key" "$FH/master.key"
chmod 600 "$FH/master.key"
TALLY_HOME=$FH tly promote --yes >/dev/null || t_fail "tally promote failed"
t_tallyd_start --home "$FH" --interval 1 --verify-interval 3600
NPID=$T_DPID
_i=0
until grep -q "tallyd\[$NPID\] info: epoch 2: fenced 1 provider" "$T_DLOG"; do
	_i=$((_i + 1)); [ $_i -lt 300 ] || t_fail "the new leader did not fence PostgreSQL in 30 s"
	sleep 0.1
done
[ "$(t_sql "SELECT max(epoch) FROM tally_fences")" = 2 ] || t_fail "tally_fences is not 2"
kill -TERM "$NPID"; t_wait_exit "$NPID" 10
kill -0 "$LPID" 2>/dev/null || t_fail "the old leader is not running"
t_ok "tally_fences = 2; the old leader (pid $LPID) still runs, its next resync an hour away"

t_check "the old leader, still running, given a new grant, makes no call and stops"
pg_objects >"$W/pg.before"
tly apply "$(t_consumer stale)" >/dev/null
tly assign stale node-a >/dev/null
t_wait_exit "$LPID" 30
[ "$T_RC" -eq 9 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "the old leader exited $T_RC, expected 9 (deposed)"; }
grep -q "tallyd\[$LPID\] error: deposed: provider node-a/postgres is fenced at epoch 2 by leader [0-9a-f]* and this control plane is at epoch 1" "$T_DLOG" ||
	t_fail "the old leader does not say why it stopped: $(grep "tallyd\[$LPID\]" "$T_DLOG" | tail -n 3)"
pg_objects >"$W/pg.after"
cmp -s "$W/pg.before" "$W/pg.after" || { diff "$W/pg.before" "$W/pg.after" >&2; t_fail "the deposed leader changed PostgreSQL"; }
# Its intent stays half done in its own log: no outcome was recorded.
G=$(tly log --json --type grant.provisioning | grep -c '"stream":"grant/[^"]*stale' || true)
O=$(tly log --json | grep -E '"type":"grant\.(provisioned|failed)"' | grep -c 'stale' || true)
[ "$G" -ge 1 ] && [ "$O" -eq 0 ] || t_fail "the stale grant: $G intent(s), $O outcome(s) in the old leader's log"
st=0; tly status >"$W/old.status" 2>&1 || st=$?
[ $st -eq 6 ] && grep -q "DEPOSED" "$W/old.status" || t_fail "tally status on the old leader (exit $st): $(head -n 3 "$W/old.status")"
t_ok "exit 9 within a pass; PostgreSQL unchanged; its intent has no outcome; status DEPOSED"

t_say "done"
