#!/bin/sh
# Failover (issue 17): a leader publishing to the stream tally.record and
# a standby following it, one real RabbitMQ, one real PostgreSQL.
#
#   1. the leader (its creates slowed by TALLY_FAULT=create:delay) is
#      SIGKILLed in the middle of a pass's driver calls: intents are on
#      the stream (they go out before the calls), their outcomes are
#      not, and some of those grants' objects already exist on
#      PostgreSQL; every event the broker had confirmed (the leader's
#      publisher checkpoint) is in the standby's log, byte for byte;
#   2. tally promote refuses without the master key; with it (copied,
#      0600) it appends control-plane.promoted at epoch 2; tallyd there
#      fences the provider (tally_fences = 2), re-verifies every grant
#      before its first pass, completes the half-done grants exactly
#      once (one grant.provisioned each; PostgreSQL holds one database
#      and one login per grant, nothing the promoted log does not name),
#      and a new grant is provisioned;
#   3. the old leader restarted (with new work in its log) while
#      PostgreSQL is down (no fence to read) exits 9, deposed by the
#      promotion it reads in the stream, and publishes nothing; with
#      PostgreSQL up it exits 9 on the fence; it touches no provider (no
#      database or role appears), and tally status there shows it
#      deposed; a forged control-plane.promoted (epoch 3, a valid
#      envelope with its chain hash, no mac) injected into the stream
#      deposes nobody.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

# --- the broker ---------------------------------------------------------

STREAM=tally.record
LH=$TALLY_HOME
fly() { TALLY_HOME=$FH "$TALLY_BIN/tally" "$@"; }
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

N=${TALLY_FAILOVER_GRANTS:-60}
LH=$TALLY_HOME

pub_ck() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | tr '{' '\n' | sed -n 's/.*"name":"publisher","seq":\([0-9]*\).*/\1/p'; }
pg_objects() {
	t_sql "SELECT datname FROM pg_database ORDER BY 1"
	t_sql "SELECT rolname || ' ' || rolcanlogin FROM pg_roles ORDER BY 1"
}

t_say "RabbitMQ and PostgreSQL on loopback; a leader, a standby following it"
r_start
t_pg_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
t_provider node-a local
TALLY_HOME=$FH tly init --standby --leader-key "$(leader_key)" >/dev/null || t_fail "tally init --standby failed"
follow_start
# One driver session, each create 300 ms: the kill comes in the middle
# of a pass's calls.
export TALLY_FAULT=create:delay=300
t_tallyd_start --interval 1 --verify-interval 3600 --workers 1
unset TALLY_FAULT
LPID=$T_DPID

t_say "$N grants; the leader SIGKILLed while provisioning them"
mf=$W/consumers.yaml
: >"$mf"
i=1
while [ $i -le "$N" ]; do
	m=$(printf 'c%03d' $i)
	printf -- '---\n' >>"$mf"
	cat "$(t_consumer "$m")" >>"$mf"
	i=$((i + 1))
done
tly apply "$mf" >/dev/null || t_fail "tally apply failed"
i=1
while [ $i -le "$N" ]; do
	tly assign "$(printf 'c%03d' $i)" node-a >/dev/null || t_fail "tally assign failed"
	i=$((i + 1))
done
# The kill comes once the leader has provisioned 3 grants and the
# standby holds intents whose outcome the leader has not recorded (a
# pass in its calls: its intents went out first), 1.2 s into them.
intents_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" log --json --type grant.provisioning | t_jfields stream | sort -u; }
outcomes_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" log --json --type grant.provisioned | t_jfields stream | sort -u; }
_i=0
until [ "$(tly log --json --type grant.provisioned | wc -l)" -ge 3 ] &&
    intents_of "$FH" >"$W/fi" && outcomes_of "$LH" >"$W/lo" && [ -n "$(comm -23 "$W/fi" "$W/lo")" ]; do
	_i=$((_i + 1)); [ $_i -lt 1200 ] || t_fail "no pass in its calls with its intents on the standby in 120 s"
	sleep 0.05
done
sleep 1.2
kill -KILL "$LPID"
t_wait_exit "$LPID" 10
CK=$(pub_ck "$LH")
LPROV=$(tly log --json --type grant.provisioned | wc -l)
LHEAD=$(head_of "$LH")
t_note "leader killed at head $LHEAD, confirmed (publisher checkpoint) $CK, $LPROV of $N grants provisioned"

t_check "every event the broker confirmed is on the standby, byte for byte"
# The standby goes on until the stream is drained: its head stops moving.
prev=-1
until [ "$(head_of "$FH")" = "$prev" ]; do prev=$(head_of "$FH"); sleep 1.5; done
FHEAD=$(head_of "$FH")
[ "$FHEAD" -ge "$CK" ] || t_fail "the standby has $FHEAD events, the broker confirmed $CK"
events_dump "$LH" | head -n $((2 * FHEAD)) >"$W/l.dump"
events_dump "$FH" >"$W/f.dump"
cmp -s "$W/l.dump" "$W/f.dump" || t_fail "the standby's $FHEAD events differ from the leader's first $FHEAD"
t_ok "standby at $FHEAD >= confirmed $CK (leader had $LHEAD), identical records"

t_check "tally promote refuses without the master key, then promotes at epoch 2"
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
t_expect_exit 4 "promote without the key" env TALLY_HOME="$FH" "$TALLY_BIN/tally" promote --yes
grep -q "master key" "$W/last.err" || t_fail "promote without the key does not say why: $(cat "$W/last.err")"
cp "$LH/master.key" "$FH/master.key"
chmod 600 "$FH/master.key"
TALLY_HOME=$FH tly promote --yes >"$W/promote.out" || t_fail "tally promote failed: $(cat "$W/promote.out")"
grep -q "epoch 2" "$W/promote.out" || t_fail "promote: $(cat "$W/promote.out")"
[ ! -e "$FH/standby" ] || t_fail "the standby marker is still there"
# Half done: an intent (grant.provisioning) and no outcome yet.
fly log --json --type grant.provisioning | t_jfields stream | sort -u >"$W/intents"
fly log --json --type grant.provisioned | t_jfields stream | sort -u >"$W/outcomes"
comm -23 "$W/intents" "$W/outcomes" >"$W/half"
HALF=$(wc -l <"$W/half")
REQ=$(fly log --json --type grant.requested | t_jfields stream | sort -u | comm -23 - "$W/intents" | wc -l)
[ "$HALF" -ge 1 ] || t_fail "no intent half done in the promoted log: the test shows nothing"
# Half done and already made: the old leader's call ran, its outcome
# was never recorded (the role named by the intent exists).
MADE=0
for g in $(cat "$W/half"); do
	u=$(fly log --json --type grant.provisioning | grep "\"stream\":\"$g\"" | t_jfields user | tail -n 1)
	[ "$(t_sql "SELECT count(*) FROM pg_roles WHERE rolname = '$u'")" = 1 ] && MADE=$((MADE + 1))
done
[ "$MADE" -ge 1 ] || t_fail "no half-done grant whose objects the old leader had made: the test shows nothing"
t_ok "$(cat "$W/promote.out"); $HALF intent(s) half done, $MADE of them already made on PostgreSQL"

t_check "the new leader fences the provider, re-verifies, completes every grant, provisions a new one"
export TALLY_HOME=$FH
T0=$(t_now_ms)
t_tallyd_start --interval 1 --verify-interval 3600
t_wait_healthy 120
T1=$(t_now_ms)
[ "$(t_sql "SELECT max(epoch) FROM tally_fences")" = 2 ] || t_fail "tally_fences is '$(t_sql "SELECT max(epoch) FROM tally_fences")', expected 2"
grep -q "tallyd\[$T_DPID\] info: epoch 2: fenced 1 provider" "$T_DLOG" || t_fail "the new leader did not say it fenced the provider"
grep -q "tallyd\[$T_DPID\] info: epoch 2: re-verified" "$T_DLOG" || t_fail "the new leader did not re-verify before its first pass"
tly log --json --type grant.requested | t_jfields stream | sort -u >"$W/known"
tly log --json --type grant.provisioned | t_jfields stream | sort -u >"$W/done"
KNOWN=$(wc -l <"$W/known")
[ "$KNOWN" -ge 5 ] || t_fail "the standby knew only $KNOWN grants at promotion: the test shows nothing"
[ -z "$(comm -23 "$W/known" "$W/done")" ] || t_fail "grants not provisioned after the failover: $(comm -23 "$W/known" "$W/done" | head -n 3)"
tly apply "$(t_consumer late)" >/dev/null
tly assign late node-a >/dev/null
t_wait_healthy 60 late
f=$(t_envfile node-a late)
[ "$(t_env_psql "$f" "SELECT 1")" = 1 ] || t_fail "the new grant's credential does not connect"
# Exactly once: one outcome per grant, one login and one database per
# grant on PostgreSQL, and nothing there that the promoted log does not
# name (the old leader's intents all reached the stream before it acted).
dup=$(tly log --json --type grant.provisioned | t_jfields stream | sort | uniq -d)
[ -z "$dup" ] || t_fail "grants provisioned twice: $dup"
G=$(tly log --json --type grant.requested | t_jfields stream | sort -u | wc -l)
tly log --json --type grant.provisioning | t_jfields user | sort -u >"$W/log.users"
tly log --json --type grant.provisioning | t_jfields resource | sort -u >"$W/log.dbs"
tly log --json --type grant.provisioning | t_jfields owner user | tr ' ' '\n' | sort -u >"$W/log.roles"
t_sql "SELECT rolname FROM pg_roles WHERE rolname NOT LIKE 'pg\\_%' AND rolname <> current_user ORDER BY 1" | sort >"$W/pg.roles"
t_sql "SELECT datname FROM pg_database WHERE datname NOT IN ('postgres', 'template0', 'template1')" | sort >"$W/pg.dbs"
[ "$(wc -l <"$W/log.users")" -eq "$G" ] || t_fail "$G grants, $(wc -l <"$W/log.users") logins in the intents"
cmp -s "$W/log.roles" "$W/pg.roles" || { diff "$W/log.roles" "$W/pg.roles" | head >&2; t_fail "PostgreSQL's roles are not the promoted log's"; }
cmp -s "$W/log.dbs" "$W/pg.dbs" || { diff "$W/log.dbs" "$W/pg.dbs" | head >&2; t_fail "PostgreSQL's databases are not the promoted log's"; }
# Every intent carries the epoch of the leader that made it: 1 before
# the promotion, 2 (the promoted one) for late's.
tly log --json --type grant.provisioning | t_jfields stream epoch >"$W/intent.epochs"
grep -q '^grant/late/db 2$' "$W/intent.epochs" || t_fail "late's intent does not carry epoch 2: $(grep late "$W/intent.epochs")"
awk '$2 != 1 && $2 != 2 { bad = 1 } END { exit bad }' "$W/intent.epochs" ||
	t_fail "an intent without the epoch 1 or 2: $(awk '$2 != 1 && $2 != 2' "$W/intent.epochs" | head -n 3)"
grep -q ' 1$' "$W/intent.epochs" || t_fail "no intent of the old leader carries epoch 1"
t_ok "all $KNOWN grants the standby knew ready, each provisioned once, $(wc -l <"$W/pg.dbs") databases and $(wc -l <"$W/pg.roles") roles on PostgreSQL, all named by the promoted log ($HALF half done and $REQ only requested at promotion; the old leader had provisioned $LPROV) and late provisioned, $((T1 - T0)) ms from start to healthy"

t_check "the old leader, restarted with work to do, is deposed and touches no provider"
kill -TERM "$T_DPID"; t_wait_exit "$T_DPID" 10
export TALLY_HOME=$LH
tly apply "$(t_consumer stale)" >/dev/null
tly assign stale node-a >/dev/null
pg_objects >"$W/pg.before"
# PostgreSQL down: no fence to read; the stream says it.
CK0=$(pub_ck "$LH")
t_pg_stop_server
t_expect_exit 9 "the old leader, PostgreSQL down" timeout 60 "$TALLY_BIN/tallyd" --home "$LH" --interval 1
grep -q "deposed: the replication stream $STREAM at .* holds control-plane.promoted at epoch 2 and this control plane is at epoch 1" "$W/last.err" ||
	t_fail "the old leader does not say the stream deposed it: $(tail -n 3 "$W/last.err")"
t_pg_restart_server
[ "$(pub_ck "$LH")" = "$CK0" ] || t_fail "the deposed leader published (checkpoint $CK0, now $(pub_ck "$LH"))"
t_ok "exit 9, read from the stream; its publisher checkpoint stays at $CK0"

t_check "a forged promotion injected into the stream deposes nobody"
# A well-formed control-plane.promoted at epoch 3 following the new
# leader's head (appended to a copy of its log by tests/tools/
# forge_promotion), published by a third party: no mac, no sig.
cp -a "$FH" "$W/fx"
X=$("$TALLY_BIN/../tests/tools/forge_promotion" "$W/fx/log" 3) || t_fail "forging the promotion failed"
events_dump "$W/fx" >"$W/fx.dump"
REC=$(awk -v k=" $(printf '%016x' "$X")" '$0 == k { getline; print; exit }' "$W/fx.dump" | tr -d ' ')
[ -n "$REC" ] || t_fail "the copy's promotion not found"
P=$(printf '%s' "$REC" | cut -c65- | xxd -r -p | base64 -w0)
api POST /exchanges/%2F/amq.default/publish \
	"{\"properties\":{\"type\":\"control-plane.promoted\",\"headers\":{\"seq\":$X,\"hash\":\"$(printf '%s' "$REC" | cut -c1-64)\"}},\"routing_key\":\"$STREAM\",\"payload\":\"$P\",\"payload_encoding\":\"base64\"}" |
	grep -q '"routed":true' || t_fail "the forged promotion was not routed"
t_expect_exit 0 "the new leader with a forged later promotion in the stream" \
	"$TALLY_BIN/tallyd" --home "$FH" --once --once-timeout 60
grep -q "control-plane.promoted at offset [0-9]* of the stream $STREAM at .* is not authenticated by the master key: ignored" "$W/last.err" ||
	t_fail "the new leader does not say it ignored the forged promotion: $(grep -i epoch "$W/last.err" | tail -n 3)"
t_ok "epoch 3 forged at event $X: ignored, the new leader ran (exit 0)"

# The broker down: no stream to read; the fence says it.
r_kill
t_expect_exit 9 "the old leader" timeout 60 "$TALLY_BIN/tallyd" --home "$LH" --interval 1
grep -q "deposed: provider .* is fenced at epoch 2 by leader [0-9a-f]* and this control plane is at epoch 1" "$W/last.err" ||
	t_fail "the old leader does not say why it stops: $(tail -n 3 "$W/last.err")"
pg_objects >"$W/pg.after"
cmp -s "$W/pg.before" "$W/pg.after" || { diff "$W/pg.before" "$W/pg.after" >&2; t_fail "the deposed leader changed the provider"; }
[ "$(t_sql "SELECT max(epoch) FROM tally_fences")" = 2 ] || t_fail "the deposed leader lowered the fence"
st=0; tly status >"$W/old.status" 2>&1 || st=$?
[ $st -eq 6 ] && grep -q "DEPOSED" "$W/old.status" || t_fail "tally status on the old leader (exit $st): $(head -n 3 "$W/old.status")"
t_ok "exit 9; no database or role changed; status: $(grep DEPOSED "$W/old.status" | cut -c1-100)"

t_check "tally check on the deposed leader's home repairs nothing (the fence holds for it too)"
# A login made unable to log in: a check would repair it (fix_privileges).
LOGIN=$(t_sql "SELECT rolname FROM pg_roles WHERE rolcanlogin AND rolname LIKE '%\_v_' ORDER BY 1 LIMIT 1")
[ -n "$LOGIN" ] || t_fail "no tally login to break"
t_sql "ALTER ROLE \"$LOGIN\" NOLOGIN" >/dev/null
pg_objects >"$W/pg.before2"
t_expect_exit 9 "tally check --all on the deposed leader" tly check --all
pg_objects >"$W/pg.after2"
cmp -s "$W/pg.before2" "$W/pg.after2" || { diff "$W/pg.before2" "$W/pg.after2" >&2; t_fail "the deposed leader's tally check changed the provider"; }
grep -q "deposed" "$W/last.err" || t_fail "tally check does not say it is deposed: $(tail -n 2 "$W/last.err")"
t_ok "exit 9, $LOGIN left as it was: $(grep -m1 deposed "$W/last.err" | cut -c1-120)"

t_say "done"
