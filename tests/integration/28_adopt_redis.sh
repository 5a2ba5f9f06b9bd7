#!/bin/sh
# tally adopt MODULE/REQ --resource PREFIX --login USER on Redis
# (drivers/redis.c): an ACL user made by hand (a live mesh's), with data
# under its key prefix and two passwords its consumers use, taken under
# tally, tallyd reaching the server over TLS verified against the
# harness CA (tests/harness/redis.sh).
#   - the CLI: adopt before assign records grant.adopted; --login
#     missing is refused, nothing appended;
#   - tallyd takes it over: the user is marked and gets a grant's rules
#     for the prefix (what it could reach beyond them, KEYS, CONFIG:
#     refused from then on), no key touched (a digest of the values),
#     its passwords kept while the rotation waits; nothing of v1 is
#     delivered; v2 is a password of tally's on the same user, which
#     reads and writes the keys; a check in the middle finds no drift
#     (a repair would lock the holders out);
#   - a consumer on the adopted user keeps working throughout (a GET
#     every 0.1 s, on its own password until its node's agent,
#     tally-node, writes v2 and reloads it once; told apart by the
#     password, the user being the same): the agent acknowledges, and
#     only then are the adopted passwords retired: refused from then
#     on, the delivered one still works, the user holds its hash only,
#     the values as they were; the grant is healthy (tally status,
#     tally check);
#   - what cannot be adopted: a user that does not exist, one tally
#     made for another grant (its credential untouched), the default
#     user, the prefix tally (the marks' key space), another mesh's user
#     on the same server (owned by mesh ...; its credential, marks and
#     keys untouched): grant.failed with the driver's reason;
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

command -v redis-cli >/dev/null 2>&1 || t_fail "redis-cli is missing (tools/deps.sh)"

G=legacy/cache

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
# rc_as ENVFILE CMD...: as the delivered credential, with its CA file.
rc_as() {
	_f=$1
	shift
	redis-cli --tls --cacert "$(t_envget "$_f" R_CA)" \
		-h "$(t_envget "$_f" R_HOST)" -p "$(t_envget "$_f" R_PORT)" \
		--user "$(t_envget "$_f" R_USER)" --pass "$(t_envget "$_f" R_PASSWORD)" \
		--no-auth-warning "$@"
}
# logs_in USER PASSWORD: PING answered PONG.
logs_in() { [ "$(rtls "$1" "$2" PING 2>&1)" = PONG ]; }
# digest USER PASSWORD: the values under legacy:, read as that user.
digest() {
	{
		# shellcheck disable=SC2086 # one argument per key
		rtls "$1" "$2" MGET $KEYS
		rtls "$1" "$2" HGETALL legacy:h
		rtls "$1" "$2" LRANGE legacy:l 0 -1
	} | sha256sum | cut -c1-16
}
# hashes USER: the SHA-256 hashes of USER's passwords, sorted.
hashes() { radm ACL GETUSER "$1" | grep -x '[0-9a-f]\{64\}' | sort; }
sha() { printf '%s' "$1" | sha256sum | cut -c1-64; }
denied() {	# USER PASSWORD CMD...: the server refuses CMD
	_o=$(rtls "$@" 2>&1) || true
	case $_o in *NOPERM*|*"o permissions"*) return 0 ;; esac
	printf '%s\n' "$_o" >&2
	return 1
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
env: {R_HOST: "", R_PORT: "", R_USER: "", R_PASSWORD: "", R_PREFIX: "", R_TLS: "", R_CA: ""}
requires:
  cache:
    type: redis-user
    from: cache
    env: {host: R_HOST, port: R_PORT, user: R_USER, password: R_PASSWORD, prefix: R_PREFIX, tls: R_TLS, ca: R_CA}
EOF
	echo "$W/manifests/$1.yaml"
}

t_say "Redis with TLS on port $TP; node-a runs it; a user made by hand"
t_init
t_node node-a localhost
tly apply "$W/manifests/cache.yaml" >/dev/null || t_fail "tally apply cache.yaml failed"
tly assign cache node-a --set host=localhost --set port="$TP" --set tls=verify \
	--set ca="$TALLY_TEST_CA" --set admin-user=admin \
	--secret admin-password <"$TALLY_TEST_REDIS_PWFILE" >/dev/null ||
	t_fail "tally assign cache node-a failed"
radm ACL SETUSER legacy on '>frozen-real' '>frozen-two' '~legacy:*' '~shared:*' \
	'&legacy:*' +@all >/dev/null || t_fail "ACL SETUSER legacy failed"
radm SET shared:x outside >/dev/null
KEYS=$(seq -f 'legacy:k%g' 1 300 | tr '\n' ' ')
for k in $KEYS; do
	printf 'SET %s %s\n' "$k" "$(printf '%s' "$k" | sha256sum | cut -c1-12)"
done | rtls legacy frozen-real >/dev/null || t_fail "legacy cannot write its keys"
rtls legacy frozen-two HSET legacy:h a 1 b 2 c 3 >/dev/null
rtls legacy frozen-two RPUSH legacy:l x y z >/dev/null
SUM0=$(digest legacy frozen-real)
N0=$(radm --scan --pattern 'legacy:*' | wc -l)
[ "$N0" -eq 302 ] || t_fail "$N0 keys under legacy:, not 302"
H0=$(hashes legacy)
[ "$(printf '%s\n' "$H0" | wc -l)" -eq 2 ] || t_fail "legacy holds $(printf '%s\n' "$H0" | wc -l) hashes, not 2"
t_check "what legacy can do before the adoption (the controls of the refusals below)"
[ "$(rtls legacy frozen-real GET shared:x)" = outside ] || t_fail "legacy cannot read shared:x"
[ "$(rtls legacy frozen-real KEYS 'legacy:k1' 2>&1)" = legacy:k1 ] || t_fail "legacy cannot run KEYS"
denied legacy frozen-real GET shared:x 2>/dev/null && t_fail "denied says a permitted GET is refused"
logs_in legacy frozen-stale && t_fail "a stale password logs in"
t_ok "$N0 keys under legacy: ($SUM0); GET shared:x, KEYS work; two passwords, a stale one refused"

tly apply "$(consumer legacy)" >/dev/null || t_fail "tally apply legacy failed"

t_check "refusals append nothing"
before=$(t_head_seq)
t_expect_exit 4 "adopt without --login" tly adopt $G --resource legacy
grep -q -- "--login" "$W/last.err" || t_fail "no word of --login: $(cat "$W/last.err")"
[ "$(t_head_seq)" = "$before" ] || t_fail "a refused adopt appended events"
t_ok "no --login: exit 4"

t_say "tally adopt $G --resource legacy --login legacy (before tally assign)"
tly adopt $G --resource legacy --login legacy >"$W/adopt.out" ||
	t_fail "tally adopt failed"
grep -q "retires legacy" "$W/adopt.out" || t_fail "adopt says: $(cat "$W/adopt.out")"
tly log --json --stream "grant/$G" --type grant.adopted |
	grep -q '"resource":"legacy","login":"legacy"' ||
	t_fail "no grant.adopted {resource legacy, login legacy}"
tly apply "$(consumer other)" >/dev/null || t_fail "tally apply other failed"
t_adopt_again_refused $G other/cache --resource legacy --login legacy
t_ok "$(cat "$W/adopt.out"); a second adopt of $G or of legacy by other/cache: refused"

t_say "the consumer: on an adopted password until its agent writes tally's"
# A consumer as a live mesh runs it: its own stored password until its
# node's agent writes the delivered values (and reloads it), then those;
# a GET every round over TLS, every failure recorded.  v2 is a password
# of the same user, so what it ran on is told by the password (its
# SHA-256, as the server keeps it).
V7=$(printf '%s' legacy:k7 | sha256sum | cut -c1-12)
mkdir -p "$W/agent"
: >"$W/poll.ok"
: >"$W/poll.fail"
# The reload is a request the consumer answers between two GETs (as a
# service's reload returns once it runs on the new values): the agent
# acknowledges only after it, so no GET is in flight on an adopted
# password when they are retired.
ph=localhost pp=$TP pca=$TALLY_TEST_CA pu=legacy ppw=frozen-real
poll_cache() {
	while [ ! -f "$W/poll.stop" ]; do
		if [ -f "$W/reload.req" ] && [ ! -f "$W/reload.done" ]; then
			# Values as the agent writes them: NAME=VALUE, unquoted.
			t_envvars "$W/agent/legacy.env" R_HOST R_PORT R_CA R_USER R_PASSWORD
			ph=$R_HOST pp=$R_PORT pca=$R_CA pu=$R_USER ppw=$R_PASSWORD
			: >"$W/reload.done"
		fi
		_o=$(timeout 5 redis-cli --tls --cacert "$pca" -h "$ph" -p "$pp" \
			--user "$pu" --pass "$ppw" --no-auth-warning GET legacy:k7 2>&1) || true
		if [ "$_o" = "$V7" ]; then
			echo "$pu $(sha "$ppw")" >>"$W/poll.ok"
		else
			echo "$(date +%T.%N) as $pu: $(printf '%s' "$_o" | tr '\n' ' ')" >>"$W/poll.fail"
		fi
		sleep 0.1
	done
}
poll_cache &
POLL=$!
_t_pids="$_t_pids $POLL"
t_wait_for 10 "the consumer's first round" test -s "$W/poll.ok"

tly assign legacy node-a >/dev/null || t_fail "tally assign legacy node-a failed"
t_tallyd_start --interval 1
t_grant_wait 30 $G grant.provisioned >/dev/null
t_grant_wait 30 $G rotation.started '"reason":"adopted' >/dev/null
t_grant_wait 30 $G credential.activated >/dev/null
t_grant_wait 30 $G credential.delivered '"version":2' >/dev/null
f=$(t_envfile node-a legacy)
P2=$(t_envget "$f" R_PASSWORD)
[ "$(t_envget "$f" R_USER)" = legacy ] ||
	t_fail "R_USER is '$(t_envget "$f" R_USER)': v2 is a password of the same user"
[ "$(t_envget "$f" R_PREFIX)" = legacy: ] || t_fail "R_PREFIX is '$(t_envget "$f" R_PREFIX)'"
[ "$(t_envget "$f" R_TLS)" = true ] || t_fail "R_TLS is '$(t_envget "$f" R_TLS)'"
case $P2 in ''|frozen-*) t_fail "R_PASSWORD is '$P2', not tally's" ;; esac
t_ok "delivered: R_USER legacy, R_PREFIX legacy:, a password of tally's, TLS"

t_check "nothing of the adopted user was delivered"
tly log --json --stream "grant/$G" --type credential.delivered |
	grep -q '"body":{[^}]*"version":1[,}]' && t_fail "a credential.delivered of v1"
t_ok "only v2 delivered"

t_check "taken over: marked, a grant's rules, its passwords and keys as they were"
[ "$(radm GET tally:owner:legacy)" = $G ] || t_fail "the owner mark is '$(radm GET tally:owner:legacy)'"
radm ACL GETUSER legacy >"$W/getuser"
grep -qx '~legacy:\*' "$W/getuser" || t_fail "legacy's keys are not ~legacy:* only: $(tr '\n' ' ' <"$W/getuser")"
grep -qx '&legacy:\*' "$W/getuser" || t_fail "legacy's channels are not &legacy:*: $(tr '\n' ' ' <"$W/getuser")"
printf '%s\n%s\n' "$H0" "$(sha "$P2")" | sort >"$W/want.h"
hashes legacy >"$W/have.h"
cmp -s "$W/want.h" "$W/have.h" || t_fail "legacy's hashes are not its two and v2's: $(tr '\n' ' ' <"$W/have.h")"
denied legacy frozen-real GET shared:x || t_fail "legacy still reaches shared:x"
denied legacy frozen-real KEYS '*' || t_fail "legacy still runs KEYS"
denied legacy frozen-two CONFIG GET port || t_fail "legacy still runs CONFIG"
[ "$(radm GET shared:x)" = outside ] || t_fail "shared:x changed"
[ "$(radm --scan --pattern 'legacy:*' | wc -l)" -eq "$N0" ] || t_fail "keys under legacy: were added or deleted"
t_ok "tally:owner:legacy = $G; ~legacy:* &legacy:*; GET shared:x, KEYS, CONFIG refused; 3 hashes; $N0 keys"

t_check "the delivered credential reads the data unchanged and writes"
[ "$(digest legacy "$P2")" = "$SUM0" ] || t_fail "the values under legacy: changed (or v2 cannot read them)"
[ "$(rc_as "$f" SET legacy:from-tally v2)" = OK ] || t_fail "the delivered credential cannot write"
[ "$(rc_as "$f" GET legacy:k7)" = "$(rtls legacy frozen-real GET legacy:k7)" ] ||
	t_fail "the delivered credential reads another value"
denied legacy "$P2" GET shared:x || t_fail "v2 reaches shared:x"
t_ok "digest $SUM0 as v2; SET legacy:from-tally"

t_check "the adopted passwords work until the holder acknowledges v2"
if ! logs_in legacy frozen-real || ! logs_in legacy frozen-two; then
	t_fail "an adopted password no longer logs in"
fi
[ "$(rtls legacy frozen-two GET legacy:from-tally)" = v2 ] || t_fail "the adopted login does not read what v2 wrote"
t_expect_exit 0 "tally check $G (mid-rotation: the adopted passwords are not a drift)" tly check $G
logs_in legacy frozen-real || t_fail "tally check removed an adopted password"
tly status legacy >"$W/status.txt" 2>&1 || true
grep -q "rotating v1 → v2 (adopted): waiting on node-a/legacy" "$W/status.txt" || {
	cat "$W/status.txt" >&2
	t_fail "status does not name the wait"
}
sleep 2
tly log --json --stream "grant/$G" --type credential.retired | grep -q . &&
	t_fail "retired before the acknowledgement"
logs_in legacy frozen-real || t_fail "an adopted password stopped working before the ack"
t_ok "both adopted passwords log in; tally check clean; status: waiting on node-a/legacy"

t_say "node-a's agent writes v2, reloads the consumer and acknowledges: the adopted passwords go, the user stays"
t_reload_agent node-a legacy
t_grant_wait 30 $G credential.acknowledged '"holder":"legacy@node-a"' >/dev/null
t_grant_wait 30 $G credential.retired '"user":"legacy"' >/dev/null
t_reloaded_once
[ "$(t_envget "$W/agent/legacy.env" R_PASSWORD)" = "$P2" ] ||
	t_fail "the agent wrote another password than the one delivered"
t_grant_wait 10 $G rotation.completed >/dev/null
logs_in legacy frozen-real && t_fail "frozen-real still logs in"
logs_in legacy frozen-two && t_fail "frozen-two still logs in"
[ "$(rc_as "$f" PING)" = PONG ] || t_fail "the delivered credential no longer logs in"
[ "$(hashes legacy)" = "$(sha "$P2")" ] || t_fail "legacy's hashes: $(hashes legacy | tr '\n' ' ')"
[ "$(radm SMEMBERS tally:pw:legacy)" = "$(sha "$P2")" ] ||
	t_fail "the passwords mark: $(radm SMEMBERS tally:pw:legacy | tr '\n' ' ')"
[ "$(digest legacy "$P2")" = "$SUM0" ] || t_fail "the values changed with the retirement"
t_consumer_done "$POLL"
n1=$(grep -cx "legacy $(sha frozen-real)" "$W/poll.ok" || true)
n2=$(grep -cx "legacy $(sha "$P2")" "$W/poll.ok" || true)
[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] ||
	t_fail "the consumer did not run on both (frozen-real: $n1, v2: $n2)"
[ $((n1 + n2)) -eq "$(wc -l <"$W/poll.ok")" ] || t_fail "the consumer ran on a third password"
t_ok "both adopted passwords refused; legacy holds v2's hash only; digest $SUM0"
t_ok "the consumer never failed ($n1 GETs on frozen-real, $n2 on v2 after one reload)"

t_check "verification judges the adopted user healthy"
t_wait_healthy 30 legacy
t_expect_exit 0 "tally check $G (after the rotation)" tly check $G
t_ok "tally status legacy: healthy; tally check $G: clean"

t_say "what cannot be adopted"
for m in ghost other fourth fifth sixth; do
	tly apply "$(consumer $m)" >/dev/null || t_fail "tally apply $m failed"
done
tly adopt ghost/cache --resource ghost --login nosuchuser >/dev/null ||
	t_fail "tally adopt ghost/cache failed"
tly assign ghost node-a >/dev/null
t_grant_wait 30 ghost/cache grant.failed 'nothing to adopt' >/dev/null
[ -z "$(radm ACL GETUSER nosuchuser)" ] || t_fail "nosuchuser was made"
# A user tally made for a grant (not adopted): refused, untouched.
tly assign other node-a >/dev/null
t_wait_healthy 30 other
fo=$(t_envfile node-a other)
UO=$(t_envget "$fo" R_USER)
tly adopt fourth/cache --resource "$UO" --login "$UO" >/dev/null ||
	t_fail "tally adopt fourth/cache failed"
tly assign fourth node-a >/dev/null
t_grant_wait 30 fourth/cache grant.failed 'made by tally for grant other/cache' >/dev/null
[ "$(rc_as "$fo" PING)" = PONG ] || t_fail "other/cache's credential broke"
[ "$(radm GET "tally:owner:$UO")" = other/cache ] || t_fail "other/cache's mark changed"
# The default user (off here, as on any server with ACLs in use).
tly adopt fifth/cache --resource fifth --login default >/dev/null ||
	t_fail "tally adopt fifth/cache failed"
tly assign fifth node-a >/dev/null
t_grant_wait 30 fifth/cache grant.failed 'the default user' >/dev/null
radm ACL GETUSER default | grep -qx off || t_fail "the default user changed"
# The prefix tally: the user would reach every mark and fence.
radm ACL SETUSER prey on '>prey-pw' '~prey:*' +@all >/dev/null
tly adopt sixth/cache --resource tally --login prey >/dev/null ||
	t_fail "tally adopt sixth/cache failed"
tly assign sixth node-a >/dev/null
t_grant_wait 30 sixth/cache grant.failed 'prefix tally' >/dev/null
[ -z "$(radm GET tally:owner:prey)" ] || t_fail "prey was marked"
[ "$(rtls prey prey-pw KEYS 'prey:*' 2>&1)" = "" ] || t_fail "prey's rules changed"
t_ok "nosuchuser: nothing to adopt; $UO: tally's for other/cache (its credential works); default; prefix tally"

t_check "another mesh's user is refused"
# A second home (another mesh) makes a user of its own on the same
# server, with the same admin, and writes under its prefix.
(
	export TALLY_HOME="$W/home2"
	tly init >/dev/null
	tly node add node-x --routable-name localhost --key-out "$(t_nodekey node-x)" \
		>/dev/null || t_fail "tally node add node-x (the other mesh) failed"
	tly apply "$W/manifests/cache.yaml" >/dev/null
	tly assign cache node-x --set host=localhost --set port="$TP" --set tls=verify \
		--set ca="$TALLY_TEST_CA" --set admin-user=admin \
		--secret admin-password <"$TALLY_TEST_REDIS_PWFILE" >/dev/null ||
		t_fail "tally assign cache node-x (the other mesh) failed"
	tly apply "$(consumer alien)" >/dev/null
	tly assign alien node-x >/dev/null
	t_tallyd_once
	tly status alien >/dev/null || t_fail "the other mesh's alien is not healthy"
	fx=$(t_envfile node-x alien)
	[ "$(rc_as "$fx" SET "$(t_envget "$fx" R_PREFIX)data" alien-data)" = OK ] ||
		t_fail "the other mesh's credential cannot write"
	t_envget "$fx" R_USER >"$W/alien.user"
)
UX=$(cat "$W/alien.user")
[ -n "$UX" ] && [ -n "$(radm ACL GETUSER "$UX")" ] || t_fail "no user of the other mesh's"
MX=$(radm GET "tally:mesh:$UX")
[ -n "$MX" ] || t_fail "the other mesh's user has no mesh mark"
# What the other mesh's user is, to compare after the refusal.
alien_state() {
	radm ACL GETUSER "$UX"
	radm GET "tally:owner:$UX"
	radm GET "tally:mesh:$UX"
	radm SMEMBERS "tally:pw:$UX" | sort
	radm GET "${UX}:data"
}
alien_state >"$W/alien.before"
tly apply "$(consumer grab)" >/dev/null || t_fail "tally apply grab failed"
tly adopt grab/cache --resource "$UX" --login "$UX" >/dev/null ||
	t_fail "tally adopt grab/cache failed"
tly assign grab node-a >/dev/null
why=$(t_grant_wait 30 grab/cache grant.failed 'owned by mesh' | grep -o 'owned by mesh [0-9a-f]*' | head -n 1)
[ "$why" = "owned by mesh $(printf '%.12s' "$MX")" ] || t_fail "refused as '$why', not as the other mesh's"
alien_state >"$W/alien.after"
cmp -s "$W/alien.before" "$W/alien.after" || {
	diff "$W/alien.before" "$W/alien.after" >&2 || true
	t_fail "the other mesh's user or its marks changed"
}
(
	export TALLY_HOME="$W/home2"
	fx=$(t_envfile node-x alien)
	[ "$(rc_as "$fx" GET "$(t_envget "$fx" R_PREFIX)data")" = alien-data ] ||
		t_fail "the other mesh's credential no longer reads its key"
	t_tallyd_once
	tly status alien >/dev/null || t_fail "the other mesh's alien is not healthy after the refusal"
	t_expect_exit 0 "tally check alien/cache (the other mesh)" tly check alien/cache
)
t_ok "$UX refused ($why...); its user, marks and key untouched, its credential works"

t_wait_healthy 10 legacy
t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
