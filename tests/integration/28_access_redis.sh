#!/bin/sh
# Access below ownership on Redis (drivers/redis.c): a requirement with
# access: read (or read-write) and of: MODULE/REQUIREMENT gets an ACL
# user of its own on the key prefix another requirement's grant owns,
# tallyd reaching the server over TLS verified against the harness CA.
#   - the reader logs in with its own delivered credential (a user that
#     is not the owner's), GETs the owner's keys and cannot SET, DEL or
#     reach keys outside the prefix; read-write may SET under it;
#   - every grant healthy beside the others (two verification rounds,
#     no grant.drifted), the owner's user as create made it;
#   - a rule given by hand to the reader's user is repaired;
#   - the reader's credential rotates like any (v2 works, v1 refused
#     after the ack);
#   - the owner removed: the readers are revoked with it, their
#     passwords refused;
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

command -v redis-cli >/dev/null 2>&1 || t_fail "redis-cli is missing (tools/deps.sh)"

t_redis_start
TP=$TALLY_TEST_REDIS_TLS_PORT
RPW=$(cat "$TALLY_TEST_REDIS_PWFILE")
[ -n "$TP" ] || t_fail "redis.sh wrote no TALLY_TEST_REDIS_TLS_PORT"
# rtls USER PASSWORD CMD...: over TLS, verifying the server.
rtls() {
	_u=$1 _p=$2
	shift 2
	redis-cli --tls --cacert "$TALLY_TEST_CA" -h localhost -p "$TP" \
		--user "$_u" --pass "$_p" --no-auth-warning "$@"
}
radm() { rtls admin "$RPW" "$@"; }
# as ENVFILE CMD...: as the delivered credential, with its CA file.
as() {
	_f=$1
	shift
	redis-cli --tls --cacert "$(t_envget "$_f" R_CA)" \
		-h "$(t_envget "$_f" R_HOST)" -p "$(t_envget "$_f" R_PORT)" \
		--user "$(t_envget "$_f" R_USER)" --pass "$(t_envget "$_f" R_PASSWORD)" \
		--no-auth-warning "$@"
}
# denied ENVFILE CMD...: the server refuses CMD for want of permission.
denied() {
	_o=$(as "$@" 2>&1) || true
	case $_o in *NOPERM*|*"o permissions"*) return 0 ;; esac
	printf '%s\n' "$_o" >&2
	return 1
}
# logs_in ENVFILE: PING answered PONG.
logs_in() { [ "$(as "$1" PING 2>&1)" = PONG ]; }

mkdir -p "$W/manifests"
cat >"$W/manifests/cache.yaml" <<EOF
module: cache
provides:
  redis-user:
    driver: redis
    revoke: retain
EOF
# consumer NAME [ACCESS]: requirement "cache" -> R_*; with ACCESS, to game/cache.
consumer() {
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {R_HOST: "", R_PORT: "", R_USER: "", R_PASSWORD: "", R_PREFIX: "", R_TLS: "", R_CA: ""}
requires:
  cache:
    type: redis-user
    from: cache
EOF
	[ -z "${2:-}" ] || printf '    access: %s\n    of: game/cache\n' "$2" >>"$W/manifests/$1.yaml"
	cat >>"$W/manifests/$1.yaml" <<EOF
    env: {host: R_HOST, port: R_PORT, user: R_USER, password: R_PASSWORD, prefix: R_PREFIX, tls: R_TLS, ca: R_CA}
EOF
	echo "$W/manifests/$1.yaml"
}

t_say "Redis with TLS on port $TP; game owns a prefix, reporting reads it, writer writes it"
t_init
t_node node-a localhost
tly apply "$W/manifests/cache.yaml" >/dev/null || t_fail "tally apply cache.yaml failed"
tly assign cache node-a --set host=localhost --set port="$TP" --set tls=verify \
	--set ca="$TALLY_TEST_CA" --set admin-user=admin \
	--secret admin-password <"$TALLY_TEST_REDIS_PWFILE" >/dev/null ||
	t_fail "tally assign cache node-a failed"
tly apply "$(consumer game)" "$(consumer reporting read)" "$(consumer writer read-write)" >/dev/null ||
	t_fail "tally apply game reporting writer failed"
for m in game reporting writer; do
	tly assign $m node-a >/dev/null || t_fail "tally assign $m failed"
done
t_tallyd_start --interval 1 --verify-interval 2
t_wait_healthy 60 game
t_wait_healthy 60 reporting
t_wait_healthy 60 writer
fg=$(t_envfile node-a game)
fr=$(t_envfile node-a reporting)
fw=$(t_envfile node-a writer)
GU=$(t_envget "$fg" R_USER)
RU=$(t_envget "$fr" R_USER)
WU=$(t_envget "$fw" R_USER)
PFX=$(t_envget "$fg" R_PREFIX)
[ "$PFX" = "$GU:" ] || t_fail "game's prefix is '$PFX', not its user's ($GU:)"
[ "$(t_envget "$fr" R_PREFIX)" = "$PFX" ] && [ "$(t_envget "$fw" R_PREFIX)" = "$PFX" ] ||
	t_fail "the readers are not told game's prefix ($PFX): $(t_envget "$fr" R_PREFIX), $(t_envget "$fw" R_PREFIX)"
[ "$RU" != "$GU" ] && [ "$WU" != "$GU" ] && [ "$RU" != "$WU" ] ||
	t_fail "the users are not each its own: $GU, $RU, $WU"
[ "$(radm GET "tally:owner:$RU")" = reporting/cache ] || t_fail "reporting's user is marked '$(radm GET "tally:owner:$RU")'"
[ "$(radm GET "tally:owner:$GU")" = game/cache ] || t_fail "game's mark is '$(radm GET "tally:owner:$GU")'"
t_ok "game's prefix $PFX; reporting as $RU, writer as $WU, each marked for its grant"

t_check "read: GET the owner's keys, and nothing that writes or reaches further"
[ "$(as "$fg" SET "${PFX}score" 42)" = OK ] || t_fail "game cannot SET"
as "$fg" HSET "${PFX}h" a 1 b 2 >/dev/null
radm SET outside:x secret >/dev/null
[ "$(as "$fr" GET "${PFX}score")" = 42 ] || t_fail "reporting cannot GET ${PFX}score"
[ "$(as "$fr" HGET "${PFX}h" b)" = 2 ] || t_fail "reporting cannot HGET ${PFX}h"
denied "$fr" GET "${PFX}score" 2>/dev/null && t_fail "denied says a permitted GET is refused"
denied "$fr" SET "${PFX}score" 1 || t_fail "reporting may SET"
denied "$fr" DEL "${PFX}score" || t_fail "reporting may DEL"
denied "$fr" HSET "${PFX}h" c 3 || t_fail "reporting may HSET"
denied "$fr" GET outside:x || t_fail "reporting reaches outside:x"
denied "$fr" GET "tally:owner:$RU" || t_fail "reporting reads the marks"
denied "$fr" KEYS '*' || t_fail "reporting may KEYS"
denied "$fr" PUBLISH "${PFX}c" hi || t_fail "reporting may PUBLISH"
denied "$fr" CONFIG GET port || t_fail "reporting may CONFIG"
[ "$(radm GET "${PFX}score")" = 42 ] && [ "$(radm HLEN "${PFX}h")" = 2 ] || t_fail "the owner's keys changed"
t_ok "GET, HGET; SET, DEL, HSET, outside:x, the marks, KEYS, PUBLISH, CONFIG refused"

t_check "read-write: SET and DEL under the prefix only"
[ "$(as "$fw" SET "${PFX}w" 1)" = OK ] || t_fail "writer cannot SET"
[ "$(as "$fw" GET "${PFX}score")" = 42 ] || t_fail "writer cannot GET"
[ "$(as "$fg" GET "${PFX}w")" = 1 ] || t_fail "game does not see what writer wrote"
[ "$(as "$fr" GET "${PFX}w")" = 1 ] || t_fail "reporting does not see what writer wrote"
[ "$(as "$fw" DEL "${PFX}w")" = 1 ] || t_fail "writer cannot DEL"
denied "$fw" SET outside:x 1 || t_fail "writer writes outside:x"
denied "$fw" CONFIG GET port || t_fail "writer may CONFIG"
t_ok "SET, GET, DEL ${PFX}w; outside:x and CONFIG refused"

t_check "every grant healthy beside the others"
sleep 5	# two verification rounds at --verify-interval 2
# drifted NAME: its drifts but the harness's plaintext port (a warning
# on the server's listeners, which the harness keeps open for 19_redis).
drifted() {
	tly log --json --stream "grant/$1" --type grant.drifted |
		grep -v '"kind":"plaintext-login"'
}
for g in game/cache reporting/cache writer/cache; do
	drifted $g | grep -q . && t_fail "$g drifted: $(drifted $g | tail -n 1)"
done
for m in game reporting writer; do
	tly status $m >"$W/status.txt" 2>&1 || {
		cat "$W/status.txt" >&2
		t_fail "$m is not healthy"
	}
done
radm ACL GETUSER "$GU" >"$W/getuser"
grep -qx "~$GU:\*" "$W/getuser" || t_fail "game's keys are not ~$GU:*: $(tr '\n' ' ' <"$W/getuser")"
radm ACL GETUSER "$RU" >"$W/getuser"
grep -qx "%R~$GU:\*" "$W/getuser" || t_fail "reporting's keys are not %R~$GU:*: $(tr '\n' ' ' <"$W/getuser")"
t_ok "no drift on game/cache, reporting/cache, writer/cache; game ~$GU:*, reporting %R~$GU:*"

t_check "a rule given by hand to the reader's user is repaired"
repairs() { tly log --json --stream grant/reporting/cache --type grant.repaired | grep -c . || :; }
rep0=$(repairs)
radm ACL SETUSER "$RU" '~outside:*' +config >/dev/null || t_fail "ACL SETUSER $RU failed"
# The verifier (every 2 s) may repair the rule between the SETUSER and
# the GET: the rule took if the GET reached outside:x or a repair of it
# is on the log after the SETUSER.
took=$(as "$fr" GET outside:x 2>&1)
end=$(($(t_now_ms) + 30000))
until [ "$(repairs)" -gt "$rep0" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || {
		[ "$took" = secret ] ||
			t_fail "the hand-made rule did not take (the repair below would prove nothing)"
		t_fail "no grant.repaired for reporting/cache after the hand-made rule"
	}
	sleep 0.2
done
denied "$fr" GET outside:x || t_fail "reporting still reaches outside:x after the repair"
denied "$fr" CONFIG GET port || t_fail "reporting may still CONFIG after the repair"
denied "$fr" SET "${PFX}score" 1 || t_fail "reporting may SET after the repair"
[ "$(as "$fr" GET "${PFX}score")" = 42 ] || t_fail "reporting cannot GET after the repair"
drifted game/cache | grep -q . && t_fail "game/cache drifted with the reader"
t_ok "~outside:* +config on $RU: repaired, outside:x and CONFIG refused again, GET works; game untouched"

t_say "reporting's credential rotates like any"
P1=$(t_envget "$fr" R_PASSWORD)
cp "$fr" "$W/v1.env"
tly rotate reporting/cache >/dev/null || t_fail "tally rotate failed"
t_grant_wait 30 reporting/cache credential.activated >/dev/null
end=$(($(t_now_ms) + 10000))
until [ "$(t_envget "$(t_envfile node-a reporting)" R_PASSWORD)" != "$P1" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "v2 not delivered"
	sleep 0.1
done
fr=$(t_envfile node-a reporting)
[ "$(t_envget "$fr" R_USER)" = "$RU" ] || t_fail "v2's user is $(t_envget "$fr" R_USER), not $RU"
[ "$(as "$fr" GET "${PFX}score")" = 42 ] || t_fail "v2 cannot read"
logs_in "$W/v1.env" || t_fail "v1 refused before the ack"
tly ack node-a reporting 2 >/dev/null
t_grant_wait 30 reporting/cache credential.retired >/dev/null
logs_in "$W/v1.env" && t_fail "v1 still logs in"
[ "$(as "$fr" GET "${PFX}score")" = 42 ] || t_fail "v2 cannot read after the retirement"
t_ok "v2 reads; v1 refused after the ack"

t_say "game removed: the readers' grants go with it"
tly remove game --yes >/dev/null || t_fail "tally remove game failed"
t_grant_wait 30 game/cache grant.revoked >/dev/null
t_grant_wait 30 reporting/cache grant.revoked >/dev/null
t_grant_wait 30 writer/cache grant.revoked >/dev/null
logs_in "$fr" && t_fail "reporting still logs in"
logs_in "$fw" && t_fail "writer still logs in"
logs_in "$fg" && t_fail "game still logs in"
[ "$(radm GET "${PFX}score")" = 42 ] || t_fail "the readers' revocation took the owner's keys (retain)"
t_ok "reporting/cache and writer/cache revoked with game/cache; their passwords refused"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
