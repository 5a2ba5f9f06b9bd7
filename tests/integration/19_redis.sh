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
#     a second rotation with the add's reply lost (TALLY_FAULT) and a
#     retirement done on the server but not recorded (tallyd killed):
#     each step once, no lockout;
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

t_say "rotation: a shared grant held on node-a and node-b, acks, no lockout"
tly apply "$(consumer game)" >/dev/null || t_fail "tally apply game failed"
tly assign game node-a >/dev/null && tly assign game node-b >/dev/null ||
	t_fail "tally assign game failed"
G=game/cache
t_tallyd_start --interval 1
t_wait_healthy 30 game
GA=$(t_envfile node-a game)
GU=$(t_envget "$GA" R_USER)
cp "$GA" "$W/v1.env"
[ "$(rc_as "$W/v1.env" SET "$(t_envget "$GA" R_PREFIX)k" v1)" = OK ] || t_fail "game cannot write its key"
: >"$W/poll.fail"
: >"$W/poll.ok"
poller() {
	while [ ! -f "$W/poll.stop" ]; do
		for n in node-a node-b; do
			c=$(cat "$(t_envfile "$n" game)" 2>/dev/null) || {
				echo "$n: no env file" >>"$W/poll.fail"; continue; }
			printf '%s\n' "$c" >"$W/poll.$n.env"
			o=$(rc_as "$W/poll.$n.env" PING 2>&1)
			if [ "$o" = PONG ]; then
				echo "$n $(printf '%s\n' "$c" | sed -n 's/^R_PASSWORD=//p' | cut -c1-6)" >>"$W/poll.ok"
			else
				echo "$(date +%T.%N) $n: $o" >>"$W/poll.fail"
			fi
		done
	done
}
poller &
PPOLL=$!
_t_pids="$_t_pids $PPOLL"
# Its first round (tally env, redis-cli) within 10 s, however loaded.
for _i in $(seq 1 100); do [ -s "$W/poll.ok" ] && break; sleep 0.1; done
[ -s "$W/poll.ok" ] || t_fail "the poller logged in nowhere: $(cat "$W/poll.fail")"
tly rotate "$G" >/dev/null || t_fail "tally rotate $G failed"
t_wait_log 20 "grant/$G" credential.activated >/dev/null
end=$(($(t_now_ms) + 10000))
for n in node-a node-b; do
	until [ "$(t_envget "$(t_envfile "$n" game)" R_PASSWORD)" != "$(t_envget "$W/v1.env" R_PASSWORD)" ]; do
		[ "$(t_now_ms)" -lt "$end" ] || t_fail "$n's env file does not hold v2"
		sleep 0.05
	done
done
[ "$(t_envget "$GA" R_USER)" = "$GU" ] || t_fail "v2's user is $(t_envget "$GA" R_USER), not $GU: the versions share one user"
cp "$GA" "$W/v2.env"
t_check "between add and retire both passwords log in, as the same user"
[ "$(rc_as "$W/v1.env" PING)" = PONG ] || t_fail "v1 no longer logs in before any ack"
[ "$(rc_as "$W/v2.env" PING)" = PONG ] || t_fail "v2 does not log in"
[ "$(radm ACL GETUSER "$GU" | grep -c '^[0-9a-f]\{64\}$')" -eq 2 ] ||
	t_fail "the user does not hold two password hashes: $(radm ACL GETUSER "$GU" | tr '\n' ' ')"
t_ok "user $GU: two hashes, both passwords log in"
tly ack node-a game 2 >/dev/null || t_fail "tally ack node-a game 2 failed"
sleep 3
[ "$(rc_as "$W/v1.env" PING)" = PONG ] || t_fail "v1 stopped working while node-b has not acknowledged"
tly log --json --stream "grant/$G" --type credential.retired | grep -q . &&
	t_fail "credential.retired before node-b acknowledged"
t_expect_exit 0 "tally check $G (mid-rotation: both hashes are tally's)" tly check "$G"
t_ok "after node-a's ack only: v1 still logs in, nothing retired, the grant checks clean"
tly ack node-b game 2 >/dev/null || t_fail "tally ack node-b game 2 failed"
ret=$(t_wait_log 20 "grant/$G" credential.retired)
t_wait_log 10 "grant/$G" rotation.completed >/dev/null
printf '%s' "$ret" | grep -q '"forced":false' || t_fail "retirement forced: $ret"
[ "$(rc_as "$W/v1.env" PING 2>&1)" != PONG ] || t_fail "the retired v1 password still logs in"
[ "$(rc_as "$W/v2.env" GET "$(t_envget "$GA" R_PREFIX)k")" = v1 ] || t_fail "v2 does not reach the data"
[ "$(radm ACL GETUSER "$GU" | grep -c '^[0-9a-f]\{64\}$')" -eq 1 ] || t_fail "the user still holds two hashes"
touch "$W/poll.stop"
t_wait_exit "$PPOLL" 15
if [ -s "$W/poll.fail" ]; then
	cat "$W/poll.fail" >&2
	t_fail "$(wc -l <"$W/poll.fail") delivered-credential logins failed during the rotation"
fi
[ "$(cut -d' ' -f2 "$W/poll.ok" | sort -u | wc -l)" -ge 2 ] || t_fail "the poller did not see both versions"
t_ok "retired after the last ack (not forced); v1 refused, v2 works; 0 failures in $(wc -l <"$W/poll.ok") logins"
t_tallyd_stop

t_say "a second rotation through crashes: the add's reply lost, the retirement done but not recorded"
TALLY_FAULT=create:lost-first=1 t_tallyd_start --interval 1
tly rotate "$G" >/dev/null || t_fail "tally rotate $G (v3) failed"
t_wait_log 20 "grant/$G" credential.activated '"version":3' >/dev/null
[ "$(tly log --json --stream "grant/$G" --type credential.issued | grep -c '"version":3')" -eq 1 ] ||
	t_fail "v3 was issued more than once"
grep -q "rotation of $G: fault injected: create:lost-first=1" "$T_DLOG" ||
	t_fail "the add's reply was not lost (no fault in tallyd's log)"
end=$(($(t_now_ms) + 10000))
until [ "$(t_envget "$GA" R_PASSWORD)" != "$(t_envget "$W/v2.env" R_PASSWORD)" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "node-a's env file does not hold v3"
	sleep 0.05
done
cp "$GA" "$W/v3.env"
kill -KILL "$T_DPID"
t_wait_exit "$T_DPID" 10
[ "$(rc_as "$W/v2.env" PING)" = PONG ] && [ "$(rc_as "$W/v3.env" PING)" = PONG ] ||
	t_fail "v2 and v3 do not both log in after the lost add"
tly ack node-a game 3 >/dev/null && tly ack node-b game 3 >/dev/null || t_fail "tally ack of v3 failed"
# What a crash after the driver retired v2, before credential.retired: gone on the server.
H2=$(printf '%s' "$(t_envget "$W/v2.env" R_PASSWORD)" | sha256sum | cut -c1-64)
radm ACL SETUSER "$GU" "!$H2" >/dev/null
radm SREM "tally:pw:$GU" "$H2" >/dev/null
t_tallyd_start --interval 1
t_wait_log 20 "grant/$G" rotation.completed '"version":3' >/dev/null
[ "$(tly log --json --stream "grant/$G" --type credential.retired | grep -c '"version":2')" -eq 1 ] ||
	t_fail "v2 not retired exactly once"
[ "$(rc_as "$W/v2.env" PING 2>&1)" != PONG ] || t_fail "v2 still logs in"
[ "$(rc_as "$W/v3.env" PING)" = PONG ] || t_fail "v3 does not log in"
t_tallyd_stop
t_expect_exit 0 "tally check $G (after the crashes)" tly check "$G"
t_ok "v3 issued and activated once despite the lost reply; the resumed retirement found v2 gone and completed"

t_say "revocation: retain, restore, purge"
K=$(t_envfile node-a keep)
KU=$(t_envget "$K" R_USER)
KP=$(t_envget "$K" R_PREFIX)
TU=$(t_envget "$(t_envfile node-a trash)" R_USER)
TP=$(t_envget "$(t_envfile node-a trash)" R_PREFIX)
[ "$(rc_as "$K" SET "${KP}row" kept)" = OK ] || t_fail "keep cannot write"
for i in 1 2 3; do rc_as "$(t_envfile node-a trash)" SET "${TP}r$i" x >/dev/null; done
cp "$K" "$W/keep.env"
# A client held open as keep (SUBSCRIBE blocks until it is killed).
rc_as "$K" SUBSCRIBE "${KP}ch" >"$W/sub.out" 2>&1 &
SUB=$!
_t_pids="$_t_pids $SUB"
# redis-cli takes a while to start on a loaded machine.
_end=$(($(t_now_ms) + 10000))
until [ "$(radm CLIENT LIST | grep -c "user=$KU ")" -ge 1 ]; do
	[ "$(t_now_ms)" -lt "$_end" ] || t_fail "the held-open client of $KU is not connected"
	sleep 0.1
done
tly remove keep >/dev/null && tly remove trash >/dev/null || t_fail "tally remove failed"
t_tallyd_once
t_check "keep revoked: off, its client killed, its keys kept"
radm ACL GETUSER "$KU" | grep -qx off || t_fail "$KU is not off: $(radm ACL GETUSER "$KU" | tr '\n' ' ')"
t_wait_exit "$SUB" 10
[ "$(radm CLIENT LIST | grep -c "user=$KU ")" -eq 0 ] || t_fail "$KU still has clients"
[ "$(rc_as "$W/keep.env" PING 2>&1)" != PONG ] || t_fail "keep's credential still logs in"
[ "$(radm GET "${KP}row")" = kept ] || t_fail "keep's key is gone after a retain revocation"
[ ! -f "$(t_envfile node-a keep)" ] || t_fail "keep's delivery file is still there"
t_ok "off; the SUBSCRIBE client ended; login refused; ${KP}row kept"
t_check "tally restore keep/cache: on again with a new credential, the key there"
tly apply "$W/manifests/keep.yaml" >/dev/null && tly assign keep node-a >/dev/null ||
	t_fail "re-adding keep failed"
tly restore keep/cache >/dev/null || t_fail "tally restore keep/cache failed"
t_tallyd_once
t_wait_healthy 10 keep
[ "$(rc_as "$K" GET "${KP}row")" = kept ] || t_fail "the restored grant does not reach its key"
t_ok "restored: $(t_envget "$K" R_USER) logs in, ${KP}row = kept"
t_check "tally purge trash/cache: its keys and user deleted"
[ "$(radm GET "${TP}r1")" = x ] || t_fail "trash's key went before the purge"
tly purge trash/cache --yes >/dev/null || t_fail "tally purge trash/cache failed"
t_tallyd_once
[ -z "$(radm ACL GETUSER "$TU")" ] || t_fail "$TU still exists after the purge"
[ -z "$(radm --scan --pattern "${TP}*")" ] || t_fail "keys of trash survived the purge"
[ -z "$(radm GET "tally:owner:$TU")" ] || t_fail "the owner mark of $TU survived the purge"
[ "$(radm GET "${KP}row")" = kept ] || t_fail "the purge touched keep's key"
t_ok "user, keys and marks of trash gone; keep untouched"

t_say "kill storm: 20 grants while tallyd is SIGKILLed at random"
N=20
mf=$W/storm.yaml
: >"$mf"
i=1
while [ $i -le $N ]; do
	printf -- '---\n' >>"$mf"
	cat "$(consumer "$(printf 's%02d' $i)")" >>"$mf"
	i=$((i + 1))
done
tly apply "$mf" >/dev/null || t_fail "tally apply of the storm's modules failed"
t_tallyd_start --workers 2
(
	i=1
	while [ $i -le $N ]; do
		tly assign "$(printf 's%02d' $i)" node-a >/dev/null || exit 1
		sleep "0.0$(t_rand 6)"
		i=$((i + 1))
	done
) &
APID=$!
k=0
while :; do
	ms=$((30 + $(t_rand 400)))
	sleep "0.$(printf '%03d' $ms)"
	kill -KILL "$T_DPID" 2>/dev/null || t_fail "tallyd had died by itself"
	t_wait_exit "$T_DPID" 10
	k=$((k + 1))
	if [ $k -ge 10 ] && ! kill -0 $APID 2>/dev/null; then break; fi
	t_tallyd_start --workers 2
done
wait $APID || t_fail "assigning the storm's modules failed"
t_tallyd_once
t_wait_healthy 20
t_check "each grant provisioned once; the server's users are exactly the grants'"
[ "$(tly log --json --type grant.provisioned | grep -c '"grant":"s[0-9]*/cache"')" -eq $N ] ||
	t_fail "not exactly one grant.provisioned per storm grant: $(tly log --json --type grant.provisioned | grep -c '"grant":"s')"
: >"$W/want"
for m in app-a app-b game keep; do t_envget "$(t_envfile node-a $m)" R_USER >>"$W/want"; done
i=1
while [ $i -le $N ]; do
	m=$(printf 's%02d' $i)
	f=$(t_envfile node-a $m)
	[ "$(rc_as "$f" PING)" = PONG ] || t_fail "$m's delivered credential does not log in"
	t_envget "$f" R_USER >>"$W/want"
	i=$((i + 1))
done
sort -o "$W/want" "$W/want"
users >"$W/have"
diff "$W/want" "$W/have" >"$W/users.diff" || { cat "$W/users.diff" >&2; t_fail "the server's users differ from the grants' (above)"; }
[ "$(radm --scan --pattern 'tally:owner:*' | wc -l)" -eq "$(wc -l <"$W/have")" ] ||
	t_fail "owner marks without a user, or users without a mark"
t_ok "$k SIGKILLs; $(wc -l <"$W/have") users, exactly the grants' (+ keep), each with one mark; all log in"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "tally verify, rebuild --check"
