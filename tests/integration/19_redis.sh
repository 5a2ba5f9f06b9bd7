#!/bin/sh
# The redis driver (drivers/redis.c) end to end through the real binaries,
# against a throwaway Redis 7 with ACLs (tests/harness/redis.sh): a
# provider module "cache" granting redis-user, consumers mapping every
# field.  The cases of the PostgreSQL scripts where they apply:
#   - provisioned and delivered (10_isolation): user, password, prefix,
#     uri; the uri logs in;
#   - exclusive (10): A cannot GET/SET B's keys, KEYS, SCAN, FLUSHALL,
#     CONFIG, ACL, nor PUBLISH/SUBSCRIBE on B's channels;
#   - verified (45_verify): healthy; rules widened -> privileges-changed,
#     repaired; password replaced -> credential-mismatch, repaired; user
#     deleted -> missing, flagged and NOT recreated, tally repair makes it;
#   - rotated with holder acks and no lockout (80_rotation): a shared
#     grant on two nodes, a poller logging in with every delivered
#     credential all along; the old password works until the last ack;
#   - revoked (82_revocation): off, its clients killed, keys retained;
#     restore; purge deletes keys and user;
#   - a kill storm (50_killstorm): tallyd SIGKILLed repeatedly while 20
#     grants are provisioned: the server's users are exactly the log's.
. "$(dirname "$0")/lib.sh"

command -v redis-cli >/dev/null 2>&1 || t_fail "redis-cli is missing (tools/deps.sh)"

t_redis_start
RP=$TALLY_TEST_REDIS_PORT
RPW=$(cat "$TALLY_TEST_REDIS_PWFILE")
# radm CMD...: as the admin; rc ENVFILE CMD...: as the env file's user.
radm() { redis-cli -h 127.0.0.1 -p "$RP" --user admin --pass "$RPW" --no-auth-warning "$@"; }
rc_as() {
	_f=$1; shift
	redis-cli -h "$(t_envget "$_f" R_HOST)" -p "$(t_envget "$_f" R_PORT)" \
		--user "$(t_envget "$_f" R_USER)" --pass "$(t_envget "$_f" R_PASSWORD)" \
		--no-auth-warning "$@"
}
users() { radm ACL USERS | grep -v -x -e admin -e default -e tally:rules | sort; }

t_wait_log() {	# SECONDS STREAM TYPE [GREP]: prints the first match
	_w_end=$(($(t_now_ms) + $1 * 1000))
	while :; do
		_w_l=$(tly log --json --stream "$2" --type "$3" |
			grep -e "${4:-.}" | head -n 1) || true
		if [ -n "$_w_l" ]; then
			printf '%s\n' "$_w_l"
			return 0
		fi
		if [ "$(t_now_ms)" -gt "$_w_end" ]; then
			tail -n 20 "$T_DLOG" >&2
			t_fail "no $3 on $2 within $1 s"
		fi
		sleep 0.1
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
# consumer NAME: one redis-user requirement "cache" -> R_*.
consumer() {
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {R_HOST: "", R_PORT: "", R_USER: "", R_PASSWORD: "", R_PREFIX: "", R_URI: ""}
requires:
  cache:
    type: redis-user
    from: cache
    env: {host: R_HOST, port: R_PORT, user: R_USER, password: R_PASSWORD, prefix: R_PREFIX, uri: R_URI}
EOF
	echo "$W/manifests/$1.yaml"
}

t_say "a Redis provider on node-a; consumers app-a, app-b, keep, trash"
t_init
t_node node-a 127.0.0.1
t_node node-b localhost
tly apply "$W/manifests/cache.yaml" >/dev/null || t_fail "tally apply cache.yaml failed"
tly assign cache node-a --expose network --set port="$RP" --set admin-user=admin \
	--secret admin-password <"$TALLY_TEST_REDIS_PWFILE" >/dev/null ||
	t_fail "tally assign cache node-a failed"
tly providers --tag cache >"$W/prov.txt" 2>&1 || t_fail "tally providers --tag cache failed: $(cat "$W/prov.txt")"
grep -q redis-user "$W/prov.txt" || t_fail "tally providers --tag cache does not list redis-user: $(cat "$W/prov.txt")"
for m in app-a app-b keep trash; do
	tly apply "$(consumer $m)" >/dev/null || t_fail "tally apply $m failed"
	tly assign $m node-a >/dev/null || t_fail "tally assign $m failed"
done
t_tallyd_once
t_wait_healthy 10

A=$(t_envfile node-a app-a)
B=$(t_envfile node-a app-b)
UA=$(t_envget "$A" R_USER)
UB=$(t_envget "$B" R_USER)
PA=$(t_envget "$A" R_PREFIX)
PB=$(t_envget "$B" R_PREFIX)
t_check "delivered: user, password, prefix and uri; the user is the grant's name"
[ "$UA" = "$(t_gname app-a/cache app-a-cache)" ] || t_fail "app-a's user is $UA, expected $(t_gname app-a/cache app-a-cache)"
[ "$PA" = "$UA:" ] || t_fail "app-a's prefix is $PA, expected $UA:"
[ "$UA" != "$UB" ] || t_fail "both consumers got user $UA"
[ "$(rc_as "$A" PING)" = PONG ] || t_fail "app-a's delivered credential does not log in"
[ "$(redis-cli --no-auth-warning -u "$(t_envget "$A" R_URI)" PING)" = PONG ] ||
	t_fail "app-a's uri does not log in"
tly log --json | grep -q "$(t_envget "$A" R_PASSWORD)" && t_fail "app-a's password is in the log"
grep -rqs "$(t_envget "$A" R_PASSWORD)" "$T_DLOG" && t_fail "app-a's password is in tallyd's log"
t_ok "app-a: $UA ($PA), app-b: $UB; both log in; the uri too; no password in the log"

t_check "exclusive: app-a reaches its own keys and channels only"
[ "$(rc_as "$A" SET "${PA}k" a-data)" = OK ] || t_fail "app-a cannot SET its own key"
[ "$(rc_as "$B" SET "${PB}secret" b-data)" = OK ] || t_fail "app-b cannot SET its own key"
for c in "GET ${PB}secret" "SET ${PB}secret x" "DEL ${PB}secret" "KEYS *" "SCAN 0" \
    "FLUSHALL" "FLUSHDB" "CONFIG GET *" "ACL LIST" "ACL SETUSER $UA ~*" \
    "PUBLISH ${PB}ch hi" "EVAL return 0" "SELECT 1" "GET tally:owner:$UA"; do
	set -f	# split the words, expand no glob
	# shellcheck disable=SC2086
	out=$(rc_as "$A" $c 2>&1)
	set +f
	case "$out" in
		*NOPERM*|*"no permissions"*|*"No permissions"*) ;;
		*) t_fail "app-a ran '$c': $out" ;;
	esac
done
out=$(rc_as "$A" SUBSCRIBE "${PB}ch" 2>&1 | head -n 1)
case "$out" in *NOPERM*|*ermission*) ;; *) t_fail "app-a subscribed to app-b's channel: $out" ;; esac
[ "$(rc_as "$A" PUBLISH "${PA}ch" hi)" = 0 ] || t_fail "app-a cannot publish on its own channel"
[ "$(rc_as "$B" GET "${PB}secret")" = b-data ] || t_fail "app-b's key changed"
t_ok "GET/SET/DEL of B's keys, KEYS, SCAN, FLUSHALL, CONFIG, ACL, EVAL, SELECT, B's channels: all NOPERM"

t_say "verification"
t_expect_exit 0 "tally check --all (healthy)" tly check --all
t_check "rules widened out of band: privileges-changed, repaired"
radm ACL SETUSER "$UA" +@all allkeys >/dev/null
[ "$(rc_as "$A" KEYS '*' 2>&1 | grep -c secret)" -ge 1 ] || t_fail "the widened rules did not take"
t_expect_exit 8 "tally check app-a/cache (rules widened)" tly check app-a/cache
grep -q privileges-changed "$W/last.out" || t_fail "not reported as privileges-changed: $(cat "$W/last.out")"
case "$(rc_as "$A" KEYS '*' 2>&1)" in *NOPERM*|*ermission*) ;; *) t_fail "KEYS works again after the repair" ;; esac
t_expect_exit 0 "tally check app-a/cache (after the repair)" tly check app-a/cache
t_ok "drifted, repaired: KEYS is NOPERM again"
t_check "password replaced out of band: credential-mismatch, repaired"
radm ACL SETUSER "$UA" resetpass ">intruder" >/dev/null
rc_as "$A" PING >/dev/null 2>&1 && [ "$(rc_as "$A" PING 2>&1)" = PONG ] && t_fail "the replaced password still logs in"
t_expect_exit 8 "tally check app-a/cache (password replaced)" tly check app-a/cache
grep -q credential-mismatch "$W/last.out" || t_fail "not reported as credential-mismatch: $(cat "$W/last.out")"
[ "$(rc_as "$A" PING)" = PONG ] || t_fail "app-a's credential does not log in after the repair"
[ "$(redis-cli -p "$RP" --user "$UA" --pass intruder --no-auth-warning PING 2>&1)" != PONG ] ||
	t_fail "the intruder's password still logs in"
t_ok "repaired: app-a logs in, the intruder's password does not"
t_check "user deleted: missing, flagged, not recreated; tally repair makes it"
radm ACL DELUSER "$UB" >/dev/null
t_expect_exit 6 "tally check app-b/cache (user deleted)" tly check app-b/cache
t_expect_exit 6 "tally check app-b/cache (again)" tly check app-b/cache
[ -z "$(radm ACL GETUSER "$UB")" ] || t_fail "the deleted user was recreated by check"
tly repair app-b/cache >"$W/repair.out" 2>&1 || t_fail "tally repair app-b/cache failed: $(cat "$W/repair.out")"
t_tallyd_once
t_wait_healthy 10
B=$(t_envfile node-a app-b)
[ "$(rc_as "$B" GET "${PB}secret")" = b-data ] || t_fail "after repair app-b does not reach its kept key"
t_ok "missing twice, user not recreated; after tally repair app-b logs in and its key is there"
