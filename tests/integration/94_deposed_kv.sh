#!/bin/sh
# A deposed leader changes nothing on Redis or RabbitMQ (issue 22): leader
# A provisions on both; standby B is promoted.
#
#   1. A, still running, has driver sessions open from before the
#      promotion (its creates slowed by TALLY_FAULT=create:delay) when
#      B's tallyd raises the fences (Redis: tally:fence:MESH, RabbitMQ:
#      the global parameter tally-fence-MESH); it is then also given a
#      rotation and a removal.  The calls it still makes in those
#      sessions are refused by the drivers themselves ("deposed: ...":
#      Redis's WATCH/MULTI/EXEC, RabbitMQ's read before each changing
#      request), and it exits 9 naming the fence.
#   2. A restarted cut off from the stream (its stream's broker address
#      unreachable), given the same work: exits 9 on the fences at
#      start.
# Throughout, every object on both servers (ACL LIST, the marks and
# fences, the management API's vhosts, users, permissions and global
# parameters) is what it was once B had fenced them.
. "$(dirname "$0")/lib.sh"
R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

command -v redis-cli >/dev/null 2>&1 || t_fail "redis-cli is missing (tools/deps.sh)"

STREAM=tally.record
LH=$TALLY_HOME
FH=$W/standby
head_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }

r_start
t_redis_start
RP=$TALLY_TEST_REDIS_PORT
RPW=$(cat "$TALLY_TEST_REDIS_PWFILE")
radm() { redis-cli -h 127.0.0.1 -p "$RP" --user admin --pass "$RPW" --no-auth-warning "$@"; }
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"

# Every object tally could have touched, on both servers, as text.
objects() {
	radm ACL LIST | sort
	for k in $(radm --scan --pattern 'tally:*' | sort); do
		case $(radm TYPE "$k") in
		string) echo "$k = $(radm GET "$k")" ;;
		set) echo "$k = $(radm SMEMBERS "$k" | sort | tr '\n' ' ')" ;;
		hash) echo "$k = $(radm HGETALL "$k" | tr '\n' ' ')" ;;
		*) echo "$k ?" ;;
		esac
	done
	for p in "/vhosts?columns=name,description,tags" \
	    "/users?columns=name,password_hash,hashing_algorithm,tags" \
	    /permissions /global-parameters; do
		api GET "$p" | python3 -c 'import json, sys
for o in sorted(json.load(sys.stdin), key=lambda o: json.dumps(o, sort_keys=True)):
    print(json.dumps(o, sort_keys=True))'
	done
}

mkdir -p "$W/manifests"
cat >"$W/manifests/cache.yaml" <<EOF
module: cache
provides:
  redis-user:
    driver: redis
    revoke: retain
EOF
# consumer NAME: a redis-user and a rabbitmq-vhost.
consumer() {
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {R_USER: "", R_PASSWORD: "", MQ_VHOST: "", MQ_USER: "", MQ_PASSWORD: ""}
requires:
  cache:
    type: redis-user
    from: cache
    env: {user: R_USER, password: R_PASSWORD}
  mq:
    type: rabbitmq-vhost
    from: rabbitmq
    env: {vhost: MQ_VHOST, user: MQ_USER, password: MQ_PASSWORD}
EOF
	echo "$W/manifests/$1.yaml"
}

t_say "leader A provisions on Redis and RabbitMQ; standby B follows it"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node na 127.0.0.1
tly apply "$W/manifests/cache.yaml" "$TALLY_SRC/examples/rabbitmq.yaml" >/dev/null ||
	t_fail "tally apply the providers failed"
tly assign cache na --expose network --set port="$RP" --set admin-user=admin \
	--secret admin-password <"$TALLY_TEST_REDIS_PWFILE" >/dev/null || t_fail "tally assign cache failed"
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly assign rabbitmq na --expose network \
	--set port="$TALLY_TEST_AMQP_PORT" --set management-port="$TALLY_TEST_AMQP_MGMT_PORT" \
	--set admin-user="$TALLY_TEST_AMQP_USER" --secret admin-password >/dev/null ||
	t_fail "tally assign rabbitmq failed"
tly apply "$(consumer app)" "$(consumer old)" >/dev/null || t_fail "tally apply app old failed"
tly assign app na >/dev/null && tly assign old na >/dev/null || t_fail "tally assign app old failed"
t_tallyd_once
t_wait_healthy 30
MESH=$(tly mesh --json | t_jstr mesh)
[ -n "$MESH" ] || t_fail "the home has no mesh id"
TALLY_HOME=$FH tly init --standby --leader-key "$(leader_key)" >/dev/null || t_fail "tally init --standby failed"
follow_start
# A, its creates slow: sessions opened before the promotion stay open.
export TALLY_FAULT=create:delay=1500
t_tallyd_start --interval 1 --verify-interval 3600 --workers 1
unset TALLY_FAULT
LPID=$T_DPID
_i=0
until [ "$(head_of "$FH")" = "$(head_of "$LH")" ]; do
	_i=$((_i + 1)); [ $_i -lt 300 ] || t_fail "the standby did not reach the leader's head in 60 s"
	sleep 0.2
done
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
cp "$LH/master.key" "$FH/master.key"
chmod 600 "$FH/master.key"
TALLY_HOME=$FH tly promote --yes >/dev/null || t_fail "tally promote failed"
t_ok "A provisioned app and old; B promoted (epoch 2), not fenced yet"

t_say "A, still running, mid-session when B fences both providers"
i=1
while [ $i -le 6 ]; do
	tly apply "$(consumer "new$i")" >/dev/null && tly assign "new$i" na >/dev/null ||
		t_fail "tally apply/assign new$i failed"
	i=$((i + 1))
done
# A pass records its outcomes at its end: its first objects on the
# server say it is in its calls (each 1.5 s, 6 of them per session).
_i=0
until radm ACL USERS | grep -q '^new'; do
	_i=$((_i + 1)); [ $_i -lt 600 ] || { tail -n 20 "$T_DLOG" >&2; t_fail "A made none of the new grants' objects in 60 s"; }
	sleep 0.1
done
kill -0 "$LPID" 2>/dev/null || t_fail "A stopped before the fences were raised"
"$TALLY_BIN/tallyd" --home "$FH" --once --once-timeout 60 2>>"$T_DLOG" ||
	{ tail -n 20 "$T_DLOG" >&2; t_fail "B's tallyd --once failed"; }
[ "$(radm HGET "tally:fence:$MESH" epoch)" = 2 ] || t_fail "Redis's fence of mesh $MESH is '$(radm HGET "tally:fence:$MESH" epoch)', not 2"
api GET "/global-parameters/tally-fence-$MESH" | grep -q '"epoch":"2"' ||
	t_fail "RabbitMQ's fence: $(api GET "/global-parameters/tally-fence-$MESH" 2>&1)"
objects >"$W/objects.fenced"
t_check "A is also given a rotation and a removal; it stops, deposed"
tly rotate app/cache >/dev/null && tly rotate app/mq >/dev/null || t_fail "tally rotate failed"
tly remove old --yes >/dev/null || t_fail "tally remove old failed"
t_wait_exit "$LPID" 60
[ "$T_RC" -eq 9 ] || { tail -n 10 "$T_DLOG" >&2; t_fail "A exited $T_RC, expected 9 (deposed)"; }
grep "tallyd\[$LPID\]" "$T_DLOG" | grep -q "error: deposed: provider na/\(cache\|rabbitmq\) \(is fenced at epoch 2\|refused a call itself (deposed: \)" ||
	t_fail "A does not say why it stopped: $(grep "tallyd\[$LPID\]" "$T_DLOG" | tail -n 3)"
objects >"$W/objects.after1"
cmp -s "$W/objects.fenced" "$W/objects.after1" || {
	diff "$W/objects.fenced" "$W/objects.after1" >&2
	t_fail "the deposed leader changed objects on Redis or RabbitMQ"
}
# Calls A made in its sessions opened before the fence: refused by the
# drivers themselves, and that deposes A as a fenced session does: no
# outcome of the pass is recorded (no grant.failed), A stops.
grep "tallyd\[$LPID\]" "$T_DLOG" | grep -q "refused a call itself (deposed: \(tally:fence:$MESH holds epoch 2\|the broker's fence tally-fence-$MESH holds epoch 2\)" ||
	t_fail "no call of A's was refused by a driver's fence: $(grep "tallyd\[$LPID\]" "$T_DLOG" | tail -n 3)"
tly log --json --type grant.failed >"$W/failed"
grep -q 'deposed: ' "$W/failed" && t_fail "A recorded a refusal as a failure after it was deposed: $(grep -m1 'deposed: ' "$W/failed" | head -c 300)"
t_ok "exit 9; $(grep "tallyd\[$LPID\]" "$T_DLOG" | grep -m1 -o 'refused a call itself (deposed: [^)]*' | cut -c1-100); nothing recorded after; no object changed"

t_say "A restarted, cut off from the stream, with the same work"
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "amqp://127.0.0.1:1/" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure (a broker that does not answer) failed"
t_expect_exit 9 "A restarted" timeout 60 "$TALLY_BIN/tallyd" --home "$LH" --interval 1
grep -q "deposed: provider na/\(cache\|rabbitmq\) is fenced at epoch 2 by leader [0-9a-f]* and this control plane is at epoch 1" "$W/last.err" ||
	t_fail "A does not say why it stops: $(tail -n 3 "$W/last.err")"
objects >"$W/objects.after2"
cmp -s "$W/objects.fenced" "$W/objects.after2" || {
	diff "$W/objects.fenced" "$W/objects.after2" >&2
	t_fail "the restarted deposed leader changed objects on Redis or RabbitMQ"
}
st=0; tly status >"$W/old.status" 2>&1 || st=$?
[ $st -eq 6 ] && grep -q "DEPOSED" "$W/old.status" || t_fail "tally status on A (exit $st): $(head -n 3 "$W/old.status")"
t_ok "exit 9 on the fences; no object changed; status DEPOSED"

t_say "done"
