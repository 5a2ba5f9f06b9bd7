#!/bin/sh
# Two meshes on one Redis and one RabbitMQ (issue 22): two tally homes,
# each with its own mesh id, declare the same provider modules and the
# same consumer module "app" (a redis-user and a rabbitmq-vhost).  Each
# gets its own ACL user and its own vhost (names keyed by the mesh id,
# marks naming the mesh), and nothing home B does -- tally check, a
# repair of drifted objects, a rotation with acks, a removal and a purge
# -- changes any object of home A's: A's ACL user, its marks, its vhost,
# its users and permissions are byte for byte what they were (ACL LIST,
# the management API's listings), and A's consumers (redis-cli
# SUBSCRIBEd, an AMQP connection held open by tests/harness/
# amqp_login.py) stay connected and keep logging in throughout.  Then
# home A is lost and home C, rebuilt from the same manifests, takes
# A's objects over on purpose (tally adopt --from-mesh): its grants land
# in A's user and vhost (their data kept), re-marked with C's mesh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rabbit-lib.sh"

command -v redis-cli >/dev/null 2>&1 || t_fail "redis-cli is missing (tools/deps.sh)"
LOGIN="python3 $TALLY_SRC/tests/harness/amqp_login.py"

r_start
t_redis_start
RP=$TALLY_TEST_REDIS_PORT
RPW=$(cat "$TALLY_TEST_REDIS_PWFILE")
radm() { redis-cli -h 127.0.0.1 -p "$RP" --user admin --pass "$RPW" --no-auth-warning "$@"; }
rc_as() {
	_f=$1; shift
	redis-cli -h 127.0.0.1 -p "$RP" --user "$(t_envget "$_f" R_USER)" \
		--pass "$(t_envget "$_f" R_PASSWORD)" --no-auth-warning "$@"
}
esc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
use() { TALLY_HOME=$W/home$1; export TALLY_HOME; }

mkdir -p "$W/manifests"
cat >"$W/manifests/cache.yaml" <<EOF
module: cache
provides:
  redis-user:
    driver: redis
    revoke: retain
EOF
cat >"$W/manifests/app.yaml" <<EOF
module: app
env: {R_USER: "", R_PASSWORD: "", R_PREFIX: "", MQ_VHOST: "", MQ_USER: "", MQ_URL: ""}
requires:
  cache:
    type: redis-user
    from: cache
    env: {user: R_USER, password: R_PASSWORD, prefix: R_PREFIX}
  mq:
    type: rabbitmq-vhost
    from: rabbitmq
    env: {vhost: MQ_VHOST, user: MQ_USER, url: MQ_URL}
EOF
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"

# home X [adopt]: a mesh with node nX running the two providers and
# app, provisioned (with "adopt": assigned only).
home() {
	use "$1"
	tly init >/dev/null || t_fail "tally init ($1) failed"
	t_node "n$1" 127.0.0.1
	tly apply "$W/manifests/cache.yaml" "$TALLY_SRC/examples/rabbitmq.yaml" \
		"$W/manifests/app.yaml" >/dev/null || t_fail "tally apply ($1) failed"
	tly assign cache "n$1" --expose network --set port="$RP" --set admin-user=admin \
		--secret admin-password <"$TALLY_TEST_REDIS_PWFILE" >/dev/null ||
		t_fail "tally assign cache ($1) failed"
	tly assign rabbitmq "n$1" --expose network --set port="$TALLY_TEST_AMQP_PORT" \
		--set management-port="$TALLY_TEST_AMQP_MGMT_PORT" \
		--set admin-user="$TALLY_TEST_AMQP_USER" \
		--secret admin-password <"$W/amqp.pw" >/dev/null ||
		t_fail "tally assign rabbitmq ($1) failed"
	tly assign app "n$1" >/dev/null || t_fail "tally assign app ($1) failed"
	[ "${2:-}" = adopt ] && return 0
	t_tallyd_once
	t_wait_healthy 20 app
}

# objects ENVFILE: every object of that consumer's grants on both
# servers, as the servers list them (ACL LIST, the marks, the vhost,
# its users' records and the vhost's permissions).
objects() {
	_u=$(t_envget "$1" R_USER)
	_v=$(t_envget "$1" MQ_VHOST)
	radm ACL LIST | grep "^user $_u " || echo "no ACL user $_u"
	echo "owner $(radm GET "tally:owner:$_u") mesh $(radm GET "tally:mesh:$_u")"
	radm SMEMBERS "tally:pw:$_u" | sort
	api GET "/vhosts/$(esc "$_v")?columns=name,description,tags" || echo "no vhost $_v"
	echo
	api GET "/users?columns=name,password_hash,hashing_algorithm,tags" |
		python3 -c 'import json, sys
for u in sorted(json.load(sys.stdin), key=lambda u: u["name"]):
    if u["name"].startswith(sys.argv[1] + "_"):
        print(json.dumps(u, sort_keys=True))' "$_v"
	api GET "/vhosts/$(esc "$_v")/permissions" | python3 -c 'import json, sys
for p in sorted(json.load(sys.stdin), key=lambda p: p["user"]):
    print(json.dumps(p, sort_keys=True))'
}

# a_unchanged STEP: A's objects are as they were, its consumers in.
a_unchanged() {
	objects "$A" >"$W/a.now"
	cmp -s "$W/a.0" "$W/a.now" || {
		diff "$W/a.0" "$W/a.now" >&2
		t_fail "$1 changed home A's objects"
	}
	[ "$(rc_as "$A" GET "${PA}k")" = a-data ] || t_fail "after $1, A's consumer cannot read its key"
	$LOGIN "$(t_envget "$A" MQ_URL)" >/dev/null || t_fail "after $1, A's AMQP credential is refused"
	kill -0 "$SUBA" 2>/dev/null || t_fail "after $1, A's SUBSCRIBEd client is gone: $(cat "$W/suba.out")"
	kill -0 "$HOLDA" 2>/dev/null || t_fail "after $1, A's AMQP connection was closed: $(cat "$W/holda.out")"
	t_ok "$1: A's ACL user, marks, vhost, users and permissions unchanged; its consumers in"
}

t_say "two homes (two meshes) on one Redis and one RabbitMQ, the same modules"
home a
MA=$(tly mesh --json | t_jstr mesh)
A=$(t_envfile na app)
cp "$A" "$W/a.env"
A=$W/a.env
home b
MB=$(tly mesh --json | t_jstr mesh)
B=$(t_envfile nb app)
[ -n "$MA" ] && [ -n "$MB" ] && [ "$MA" != "$MB" ] || t_fail "the homes' mesh ids: '$MA' '$MB'"
UA=$(t_envget "$A" R_USER); UB=$(t_envget "$B" R_USER)
VA=$(t_envget "$A" MQ_VHOST); VB=$(t_envget "$B" MQ_VHOST)
PA=$(t_envget "$A" R_PREFIX); PB=$(t_envget "$B" R_PREFIX)

t_check "each mesh has its own objects, marked with its mesh"
[ -n "$UA" ] && [ -n "$UB" ] && [ "$UA" != "$UB" ] || t_fail "redis users: A $UA, B $UB"
[ -n "$VA" ] && [ -n "$VB" ] && [ "$VA" != "$VB" ] || t_fail "vhosts: A $VA, B $VB"
[ "$(radm GET "tally:mesh:$UA")" = "$MA" ] || t_fail "$UA's mesh mark is $(radm GET "tally:mesh:$UA"), not $MA"
[ "$(radm GET "tally:mesh:$UB")" = "$MB" ] || t_fail "$UB's mesh mark is $(radm GET "tally:mesh:$UB"), not $MB"
api GET "/vhosts/$(esc "$VA")" | grep -q "in mesh $MA" || t_fail "vhost $VA's mark does not name mesh $MA"
api GET "/vhosts/$(esc "$VB")" | grep -q "in mesh $MB" || t_fail "vhost $VB's mark does not name mesh $MB"
[ "$(rc_as "$A" SET "${PA}k" a-data)" = OK ] || t_fail "A's consumer cannot write its key"
[ "$(rc_as "$B" SET "${PB}k" b-data)" = OK ] || t_fail "B's consumer cannot write its key"
$LOGIN "$(t_envget "$A" MQ_URL)" >/dev/null || t_fail "A's AMQP credential is refused"
$LOGIN "$(t_envget "$B" MQ_URL)" >/dev/null || t_fail "B's AMQP credential is refused"
t_ok "A: $UA, $VA (mesh ${MA%????????????????????}...); B: $UB, $VB; all four log in"

# A's consumers, connected for the rest of the script.
rc_as "$A" SUBSCRIBE "${PA}ch" >"$W/suba.out" 2>&1 &
SUBA=$!
$LOGIN "$(t_envget "$A" MQ_URL)" 900 >"$W/holda.out" 2>&1 &
HOLDA=$!
_t_pids="$_t_pids $SUBA $HOLDA"
sleep 1
objects "$A" >"$W/a.0"
grep -q "^user $UA " "$W/a.0" && grep -q "\"$VA\"" "$W/a.0" ||
	t_fail "A's objects are not listed: $(cat "$W/a.0")"

t_say "home B's check, repair, rotation, removal and purge"
use b
t_expect_exit 0 "tally check --all in home B" tly check --all
a_unchanged "B's check"

t_check "B's objects drift; B's tally check repairs them"
radm ACL SETUSER "$UB" +@all allkeys >/dev/null
api PUT "/permissions/$(esc "$VB")/$(esc "${VB}_v1")" \
	'{"configure":"","write":".*","read":".*"}' >/dev/null
t_expect_exit 8 "tally check --all in home B (drifted)" tly check --all
t_expect_exit 0 "tally check --all in home B (repaired)" tly check --all
a_unchanged "B's repair"

t_check "B rotates both grants; its holder acknowledges"
t_tallyd_start --interval 1 --verify-interval 3600
for g in app/cache app/mq; do
	tly rotate "$g" >/dev/null || t_fail "tally rotate $g (B) failed"
done
for g in app/cache app/mq; do
	_end=$(($(t_now_ms) + 30000))
	until tly log --json --stream "grant/$g" --type credential.activated | grep -q .; do
		[ "$(t_now_ms)" -lt "$_end" ] || t_fail "$g: no credential.activated in home B"
		sleep 0.2
	done
done
tly ack nb app 2 >/dev/null || t_fail "tally ack nb app 2 failed"
for g in app/cache app/mq; do
	_end=$(($(t_now_ms) + 30000))
	until tly log --json --stream "grant/$g" --type rotation.completed | grep -q .; do
		[ "$(t_now_ms)" -lt "$_end" ] || { tail -n 20 "$T_DLOG" >&2; t_fail "$g: the rotation did not complete in home B"; }
		sleep 0.2
	done
done
t_tallyd_stop
B=$(t_envfile nb app)
[ "$(rc_as "$B" GET "${PB}k")" = b-data ] || t_fail "B's rotated credential does not reach its key"
$LOGIN "$(t_envget "$B" MQ_URL)" >/dev/null || t_fail "B's rotated AMQP credential is refused"
a_unchanged "B's rotation"

t_check "B removes app, then purges its grants"
tly remove app --yes >/dev/null || t_fail "tally remove app (B) failed"
t_tallyd_once
tly purge app/cache --yes >/dev/null || t_fail "tally purge app/cache (B) failed"
tly purge app/mq --yes >/dev/null || t_fail "tally purge app/mq (B) failed"
t_tallyd_once
[ -z "$(radm ACL GETUSER "$UB")" ] || t_fail "B's user $UB survived B's purge"
[ -z "$(radm GET "${PB}k")" ] || t_fail "B's key survived B's purge"
api GET "/vhosts/$(esc "$VB")" >/dev/null 2>&1 && t_fail "B's vhost $VB survived B's purge"
a_unchanged "B's removal and purge"

t_check "home A still checks clean"
use a
t_expect_exit 0 "tally check --all in home A" tly check --all
a_unchanged "A's own check"

t_say "home A is lost; home C, rebuilt, adopts A's objects on purpose"
kill -TERM "$SUBA" "$HOLDA" 2>/dev/null || true
home c adopt
MC=$(tly mesh --json | t_jstr mesh)
tly adopt --from-mesh "$MA" --all >"$W/adopt.out" || t_fail "tally adopt on c: $(cat "$W/adopt.out")"
grep -q "adopted from mesh $MA: 2 grant(s)" "$W/adopt.out" || t_fail "adopt does not say what it took: $(cat "$W/adopt.out")"
grep -q "app/cache (redis-user): takes over $UA" "$W/adopt.out" || t_fail "adopt does not name $UA: $(cat "$W/adopt.out")"
grep -q "app/mq (rabbitmq-vhost): takes over $VA" "$W/adopt.out" || t_fail "adopt does not name $VA: $(cat "$W/adopt.out")"
t_tallyd_once
t_wait_healthy 20 app
C=$(t_envfile nc app)
[ "$(t_envget "$C" R_USER)" = "$UA" ] && [ "$(t_envget "$C" MQ_VHOST)" = "$VA" ] ||
	t_fail "home C got $(t_envget "$C" R_USER) and $(t_envget "$C" MQ_VHOST), not A's $UA and $VA"
[ "$(radm GET "tally:mesh:$UA")" = "$MC" ] || t_fail "$UA is not re-marked with mesh $MC: $(radm GET "tally:mesh:$UA")"
api GET "/vhosts/$(esc "$VA")" | grep -q "in mesh $MC" || t_fail "vhost $VA is not re-marked with mesh $MC"
[ "$(rc_as "$C" GET "${PA}k")" = a-data ] || t_fail "home C's credential does not reach A's kept key"
$LOGIN "$(t_envget "$C" MQ_URL)" >/dev/null || t_fail "home C's AMQP credential is refused"
t_expect_exit 0 "tally check --all in home C" tly check --all
t_ok "adopt took $UA and $VA; C's grants are in them, A's data kept, re-marked with mesh C"

t_say "done"
