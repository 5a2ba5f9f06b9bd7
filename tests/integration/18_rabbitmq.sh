#!/bin/sh
# RabbitMQ virtual hosts (drivers/rabbitmq.c), end to end through the real
# binaries against a throwaway broker (rabbit-lib.sh, the management
# plugin on): the cases of the PostgreSQL scripts where they apply.
#   - provisioned and delivered: host, port, vhost, user, password, url;
#     the delivered url logs in over AMQP (tests/harness/amqp_login.py);
#   - exclusive: one consumer's credential does not open another's vhost;
#   - verified: widened permissions and a deleted user are repaired, a
#     deleted vhost is flagged and never recreated empty (15_directory,
#     45_verify);
#   - rotated beside with holder acks (80_rotation): both users work
#     until both holders ack, a poller logging in with the holders'
#     files never fails, and then the old user goes with its connection;
#   - tally remove says what revoking loses (queues, messages) and
#     removes nothing without --yes: the removal is held (recorded,
#     asked by tally status and the board) until --yes or --cancel;
#     retain keeps the vhost and its
#     messages, restore makes the user again, purge deletes the vhost
#     (82_revocation);
#   - a kill storm (50_killstorm): tallyd SIGKILLed while 20 grants are
#     requested, and then every vhost and user on the broker belongs to
#     exactly one grant.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rabbit-lib.sh"

LOGIN="python3 $TALLY_SRC/tests/harness/amqp_login.py"
STORM=${TALLY_RMQ_STORM_GRANTS:-20}

# consumer NAME: a module with one vhost requirement "mq".
consumer() {
	mkdir -p "$W/manifests"
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {MQ_HOST: "", MQ_PORT: "", MQ_VHOST: "", MQ_USER: "", MQ_PASSWORD: "", MQ_URL: ""}
requires:
  mq:
    type: rabbitmq-vhost
    from: rabbitmq
    env: {host: MQ_HOST, port: MQ_PORT, vhost: MQ_VHOST, user: MQ_USER, password: MQ_PASSWORD, url: MQ_URL}
EOF
	echo "$W/manifests/$1.yaml"
}
esc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
vhost_of() { t_gname "$1/mq" "$1-mq"; }
has_vhost() { api GET "/vhosts/$(esc "$1")" >/dev/null 2>&1; }
has_user() { api GET "/users/$(esc "$1")" >/dev/null 2>&1; }
# messages VHOST QUEUE WANT: the queue's message count once it reaches
# WANT, else what it is after 15 s.  The management API's counts are
# statistics, updated every few seconds: a first figure may be short.
messages() {
	_m_end=$(($(t_now_ms) + 15000))
	while :; do
		_m=$(api GET "/queues/$(esc "$1")/$2" 2>/dev/null |
			sed -n 's/.*"messages":\([0-9]*\).*/\1/p')
		[ "${_m:-0}" -ge "$3" ] && { echo "$_m"; return 0; }
		[ "$(t_now_ms)" -lt "$_m_end" ] || { echo "${_m:-0}"; return 0; }
		sleep 0.2
	done
}
publish() {	# VHOST QUEUE N
	api PUT "/queues/$(esc "$1")/$2" '{"durable":true}' >/dev/null
	_p=0
	while [ $_p -lt "$3" ]; do
		api POST "/exchanges/$(esc "$1")/amq.default/publish" \
			"{\"properties\":{\"delivery_mode\":2},\"routing_key\":\"$2\",\"payload\":\"m$_p\",\"payload_encoding\":\"string\"}" >/dev/null
		_p=$((_p + 1))
	done
}

t_say "a throwaway RabbitMQ, tally home, the rabbitmq provider on node-a"
r_start
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.1
tly apply "$TALLY_SRC/examples/rabbitmq.yaml" >/dev/null ||
	t_fail "tally apply examples/rabbitmq.yaml failed"
t_expect_exit 4 "assign with a misspelt setting" \
	tly assign rabbitmq node-a --set managment-port=1
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" >"$W/admin.pw"
tly assign rabbitmq node-a --expose network --set port="$TALLY_TEST_AMQP_PORT" \
	--set management-port="$TALLY_TEST_AMQP_MGMT_PORT" \
	--set admin-user="$TALLY_TEST_AMQP_USER" \
	--secret admin-password <"$W/admin.pw" >/dev/null ||
	t_fail "tally assign rabbitmq node-a failed"
t_ok "a misspelt setting refused; port, management-port, admin-user, admin-password accepted"

t_say "provisioned and delivered"
tly apply "$(consumer app-a)" "$(consumer app-b)" >/dev/null
tly assign app-a node-a >/dev/null
tly assign app-a node-b >/dev/null
tly assign app-b node-a >/dev/null
t_tallyd_once
t_wait_healthy 10
VA=$(vhost_of app-a)
VB=$(vhost_of app-b)
A=$(t_envfile node-a app-a)
A2=$(t_envfile node-b app-a)
B=$(t_envfile node-a app-b)
[ "$(t_envget "$A" MQ_VHOST)" = "$VA" ] || t_fail "app-a got MQ_VHOST=$(t_envget "$A" MQ_VHOST), expected $VA"
[ "$(t_envget "$A" MQ_USER)" = "${VA}_v1" ] || t_fail "app-a got MQ_USER=$(t_envget "$A" MQ_USER)"
[ "$(t_envget "$A" MQ_PORT)" = "$TALLY_TEST_AMQP_PORT" ] || t_fail "app-a got MQ_PORT=$(t_envget "$A" MQ_PORT)"
[ "$(t_envget "$A" MQ_HOST)" = 127.0.0.1 ] || t_fail "app-a got MQ_HOST=$(t_envget "$A" MQ_HOST)"
PA=$(t_envget "$A" MQ_PASSWORD)
[ "$(t_envget "$A" MQ_URL)" = "amqp://${VA}_v1:$PA@127.0.0.1:$TALLY_TEST_AMQP_PORT/$VA" ] ||
	t_fail "app-a's url: $(t_envget "$A" MQ_URL)"
cmp -s "$A" "$A2" || t_fail "node-a and node-b hold different credentials for app-a"
$LOGIN "$(t_envget "$A" MQ_URL)" >"$W/login.out" || t_fail "app-a's delivered url does not log in: $(cat "$W/login.out")"
$LOGIN "$(t_envget "$B" MQ_URL)" >"$W/login.out" || t_fail "app-b's delivered url does not log in: $(cat "$W/login.out")"
api GET "/users/$(esc "${VA}_v1")" >"$W/user.json"
grep -q '"tags":\[\]' "$W/user.json" || t_fail "app-a's user has tags: $(cat "$W/user.json")"
grep -q '"hashing_algorithm":"rabbit_password_hashing_sha256"' "$W/user.json" ||
	t_fail "app-a's user: $(cat "$W/user.json")"
MESH=$(tly mesh --json | t_jstr mesh)
api GET "/vhosts/$(esc "$VA")" | grep -q "\"description\":\"made by tally for grant app-a/mq in mesh $MESH; do not edit\"" ||
	t_fail "app-a's vhost does not carry its grant's mark: $(api GET "/vhosts/$(esc "$VA")")"
tly log --json >"$W/log.json"
grep -qF "$PA" "$W/log.json" && t_fail "app-a's password is in the log in plaintext"
grep -qF "$PA" "$T_DLOG" && t_fail "app-a's password is in tallyd's output"
t_ok "vhost $VA, user ${VA}_v1 (no tags, sha256 hash), marked; the url logs in; no plaintext in the log"

t_check "exclusive: app-a's credential does not open app-b's vhost"
$LOGIN "amqp://${VA}_v1:$PA@127.0.0.1:$TALLY_TEST_AMQP_PORT/$VB" >"$W/login.out" &&
	t_fail "app-a's user opened app-b's vhost $VB"
grep -q NOT_ALLOWED "$W/login.out" || t_fail "unexpected refusal: $(cat "$W/login.out")"
$LOGIN "amqp://${VA}_v1:$PA@127.0.0.1:$TALLY_TEST_AMQP_PORT/%2F" >/dev/null &&
	t_fail "app-a's user opened the default vhost"
t_ok "refused: $(cat "$W/login.out")"

t_say "verification: drift repaired or flagged"
t_expect_exit 0 "tally check --all (healthy)" tly check --all
api PUT "/permissions/%2F/$(esc "${VA}_v1")" '{"configure":".*","write":".*","read":".*"}' >/dev/null
t_expect_exit 8 "tally check app-a/mq (widened, repaired)" tly check app-a/mq
grep -q "privileges-changed" "$W/last.out" || t_fail "check did not report the drift: $(cat "$W/last.out")"
$LOGIN "amqp://${VA}_v1:$PA@127.0.0.1:$TALLY_TEST_AMQP_PORT/%2F" >/dev/null &&
	t_fail "the widened permission on / is still there"
api DELETE "/users/$(esc "${VA}_v1")" >/dev/null
t_expect_exit 8 "tally check app-a/mq (user deleted, repaired)" tly check app-a/mq
$LOGIN "$(t_envget "$A" MQ_URL)" >"$W/login.out" ||
	t_fail "the recreated user does not log in with the delivered url: $(cat "$W/login.out")"
tly log --json | grep -q '"type":"grant.repaired"' || t_fail "no grant.repaired in the log"
t_expect_exit 0 "tally check --all (repaired)" tly check --all
t_ok "widened permission and deleted user repaired, the delivered credential works again"

t_say "rotation beside, with holder acks and no lockout"
: >"$W/poll.fail"
: >"$W/poll.ok"
poller() {
	while [ ! -f "$W/poll.stop" ]; do
		for f in "$A" "$A2"; do
			u=$(sed -n 's/^MQ_URL=//p' "$f" 2>/dev/null)
			if [ -z "$u" ]; then
				echo "$(date +%T.%N) $f: no url" >>"$W/poll.fail"
			elif $LOGIN "$u" >"$W/poll.err" 2>&1; then
				echo "$f" >>"$W/poll.ok"
			else
				echo "$(date +%T.%N) $f: $(cat "$W/poll.err")" >>"$W/poll.fail"
			fi
		done
	done
}
poller &
PPOLL=$!
_t_pids="$_t_pids $PPOLL"
# A holder of v1 stays connected until its user goes.
$LOGIN "$(t_envget "$A" MQ_URL)" 120 >"$W/held.out" 2>&1 &
HELD=$!
_t_pids="$_t_pids $HELD"
t_tallyd_start --interval 1
tly rotate app-a/mq >/dev/null || t_fail "tally rotate app-a/mq failed"
end=$(($(t_now_ms) + 20000))
for f in "$A" "$A2"; do
	until [ "$(t_envget "$f" MQ_USER)" = "${VA}_v2" ]; do
		[ "$(t_now_ms)" -lt "$end" ] || t_fail "$f does not hold v2: $(cat "$f")"
		sleep 0.1
	done
done
has_user "${VA}_v1" && has_user "${VA}_v2" || t_fail "expected both ${VA}_v1 and ${VA}_v2 on the broker"
tly ack node-a app-a 2 >/dev/null || t_fail "tally ack node-a app-a 2 failed"
sleep 2
has_user "${VA}_v1" || t_fail "${VA}_v1 went before node-b acknowledged"
kill -0 "$HELD" 2>/dev/null || t_fail "the v1 connection ended before node-b acknowledged: $(cat "$W/held.out")"
tly ack node-b app-a 2 >/dev/null || t_fail "tally ack node-b app-a 2 failed"
end=$(($(t_now_ms) + 20000))
while has_user "${VA}_v1"; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "${VA}_v1 still there 20 s after the last ack"
	sleep 0.1
done
t_wait_exit "$HELD" 20
grep -q "^closed" "$W/held.out" || t_fail "the v1 connection was not closed by the broker: $(cat "$W/held.out")"
touch "$W/poll.stop"
wait "$PPOLL" 2>/dev/null || true
t_forget_pid "$PPOLL"
t_tallyd_stop
[ -s "$W/poll.fail" ] && t_fail "a holder was locked out during the rotation: $(head -n 3 "$W/poll.fail")"
[ "$(wc -l <"$W/poll.ok")" -ge 4 ] || t_fail "the poller logged in only $(wc -l <"$W/poll.ok") times"
tly log --json --stream grant/app-a/mq --type credential.retired | grep -q '"forced":false' ||
	t_fail "no unforced credential.retired"
t_ok "v2 delivered to both holders, v1 kept until both acks, then deleted and its connection closed ($(cut -c1-60 "$W/held.out")); $(wc -l <"$W/poll.ok") poller logins, none refused"

t_say "tally remove shows what is lost, and wants --yes"
VA_USER=$(t_envget "$A" MQ_USER)
VA_PW=$(t_envget "$A" MQ_PASSWORD)
publish "$VA" work 3
[ "$(messages "$VA" work 3)" = 3 ] || t_fail "the queue did not get its 3 messages"
before=$(tly log --json | wc -l)
t_expect_exit 4 "tally remove app-a without --yes" tly remove app-a
grep -q "destroys data" "$W/last.out" || t_fail "remove did not say revoking destroys data: $(cat "$W/last.out")"
grep -q "lost now: .*1 queue(s), 3 message(s)" "$W/last.out" ||
	t_fail "remove did not count the vhost's queues and messages: $(cat "$W/last.out")"
grep -q -- "--yes" "$W/last.err" || t_fail "the refusal does not say --yes: $(cat "$W/last.err")"
# Nothing removed: only the question is recorded, for status and the board.
tly log --json | tail -n +$((before + 1)) >"$W/held.json"
[ "$(wc -l <"$W/held.json")" = 1 ] && grep -q '"type":"module.removal-held"' "$W/held.json" ||
	t_fail "a held remove appended other than module.removal-held: $(cat "$W/held.json")"
tly status --json 2>/dev/null | python3 -c '
import json, sys
h = json.load(sys.stdin)["attention"]["removals_held"]
assert [x["module"] for x in h] == ["app-a"] and h[0]["what"].startswith("app-a/mq on node-a/rabbitmq: the vhost"), h' ||
	t_fail "tally status --json does not ask the held removal"
tly status >"$W/st.out" 2>&1 || true
grep -q "the removal of app-a waits for a confirmation since .*tally remove app-a --yes removes it" "$W/st.out" ||
	t_fail "tally status does not ask the held removal: $(grep -A3 'not to forget' "$W/st.out")"
"$TALLY_BIN/tally-board" --home "$TALLY_HOME" --store "$W/board" --html "$W/board.html" --quiet ||
	t_fail "tally-board failed"
grep -q 'data-kind="removal">the removal of app-a waits for a confirmation since .*tally remove app-a --yes' "$W/board.html" ||
	t_fail "the board does not ask the held removal"
tly remove app-a --cancel >/dev/null || t_fail "tally remove app-a --cancel failed"
tly status --json 2>/dev/null | python3 -c 'import json,sys; assert json.load(sys.stdin)["attention"]["removals_held"] == []' ||
	t_fail "the cancelled removal is still asked"
t_expect_exit 3 "a second --cancel" tly remove app-a --cancel
grep -q "no removal of app-a is held" "$W/last.err" || t_fail "a second cancel: $(cat "$W/last.err")"
t_expect_exit 4 "tally remove app-a without --yes, again" tly remove app-a
t_ok "$(grep 'lost now' "$W/last.out" | sed 's/^ *//'); held (status and the board ask it), withdrawn, held again"
tly remove app-a --yes >/dev/null || t_fail "tally remove app-a --yes failed"
tly status --json 2>/dev/null | python3 -c 'import json,sys; assert json.load(sys.stdin)["attention"]["removals_held"] == []' ||
	t_fail "the removal is still asked after tally remove --yes"
t_tallyd_once
has_user "$VA_USER" && t_fail "the revoked grant's user $VA_USER is still there"
has_vhost "$VA" || t_fail "retain deleted the vhost $VA"
[ "$(messages "$VA" work 3)" = 3 ] || t_fail "the retained vhost lost its messages"
[ -f "$(t_envfile node-a app-a)" ] && t_fail "the revoked grant's env file $A is still there"
$LOGIN "amqp://$VA_USER:$VA_PW@127.0.0.1:$TALLY_TEST_AMQP_PORT/$VA" >/dev/null &&
	t_fail "the revoked credential still logs in"
tly grants --revoked | grep -q '^app-a/mq  *revoked (data retained' ||
	t_fail "tally grants --revoked: $(tly grants --revoked)"
t_ok "retain: user gone, vhost and its 3 messages kept"

t_check "restore makes the user again on the kept vhost"
tly apply "$W/manifests/app-a.yaml" >/dev/null
tly assign app-a node-a >/dev/null
tly restore app-a/mq >/dev/null || t_fail "tally restore app-a/mq failed"
t_tallyd_once
t_wait_healthy 10 app-a
[ "$(t_envget "$A" MQ_VHOST)" = "$VA" ] || t_fail "the restored grant's vhost changed: $(cat "$A")"
$LOGIN "$(t_envget "$A" MQ_URL)" >"$W/login.out" || t_fail "the restored credential does not log in: $(cat "$W/login.out")"
[ "$(messages "$VA" work 3)" = 3 ] || t_fail "the restored vhost lost its messages"
t_ok "restored: $(t_envget "$A" MQ_USER) logs in to $VA, 3 messages there"

t_check "purge deletes the vhost"
tly remove app-a --yes >/dev/null
t_tallyd_once
tly purge app-a/mq --yes >/dev/null || t_fail "tally purge app-a/mq failed"
t_tallyd_once
has_vhost "$VA" && t_fail "$VA still exists after the purge"
has_vhost "$VB" || t_fail "the purge touched app-b's vhost"
t_ok "purged: $VA gone, $VB untouched"

t_check "a deleted vhost is flagged, never recreated empty"
api DELETE "/vhosts/$(esc "$VB")" >/dev/null
t_expect_exit 6 "tally check app-b/mq (vhost deleted)" tly check app-b/mq
grep -q "missing-resource" "$W/last.out" || t_fail "check did not say missing: $(cat "$W/last.out")"
t_expect_exit 6 "tallyd --once with app-b's vhost gone" "$TALLY_BIN/tallyd" --once --once-timeout 20
has_vhost "$VB" && t_fail "$VB was recreated empty"
t_ok "missing: exit 6, not recreated"
tly remove app-b --yes >/dev/null
t_tallyd_once
tly purge app-b/mq --yes >/dev/null
t_tallyd_once

t_say "kill storm: $STORM grants requested while tallyd is SIGKILLed"
mf=$W/storm.yaml
: >"$mf"
i=1
while [ $i -le "$STORM" ]; do
	printf -- '---\n' >>"$mf"
	cat "$(consumer "$(printf 's%02d' $i)")" >>"$mf"
	i=$((i + 1))
done
tly apply "$mf" >/dev/null || t_fail "tally apply of $STORM modules failed"
t_tallyd_start --workers 4
(
	i=1
	while [ $i -le "$STORM" ]; do
		tly assign "$(printf 's%02d' $i)" node-a >/dev/null || exit 1
		sleep "0.0$(t_rand 9)"
		i=$((i + 1))
	done
) &
APID=$!
k=0
while :; do
	ms=$((100 + $(t_rand 900)))
	sleep "0.$(printf '%03d' "$ms" | cut -c1-3)"
	kill -KILL "$T_DPID" 2>/dev/null || t_fail "tallyd (pid $T_DPID) had died by itself"
	t_wait_exit "$T_DPID" 10
	t_forget_pid "$T_DPID"
	k=$((k + 1))
	if [ $k -ge 8 ] && ! kill -0 $APID 2>/dev/null; then
		[ "$(tly log --json --type grant.provisioned | grep -c '"grant":"s')" -lt "$STORM" ] &&
			[ $k -lt 30 ] || break
	fi
	t_tallyd_start --workers 4
done
wait $APID || t_fail "requesting the grants failed"
t_note "$(tly log --json --type grant.provisioned | grep -c '"grant":"s') of $STORM provisioned during the storm"
t_tallyd_once --workers 4
tly log --json --type grant.provisioning | grep '"grant":"s' | t_jfields grant user >"$W/intents"
[ "$(wc -l <"$W/intents")" -eq "$STORM" ] ||
	t_fail "$(wc -l <"$W/intents") intents for $STORM grants: an intent was issued twice"
grep -v ' [^ ]*_v1$' "$W/intents" && t_fail "a storm grant has a credential version other than 1"
t_expect_exit 0 "tally status after the storm" tly status
api GET "/vhosts?columns=name" | python3 -c 'import json, sys; [print(v["name"]) for v in json.load(sys.stdin) if v["name"] != "/"]' | sort >"$W/vhosts"
api GET "/users" | python3 -c 'import json, sys; [print(u["name"]) for u in json.load(sys.stdin) if u["name"] != sys.argv[1]]' "$TALLY_TEST_AMQP_USER" | sort >"$W/users"
: >"$W/want.v"
: >"$W/want.u"
i=1
while [ $i -le "$STORM" ]; do
	v=$(vhost_of "$(printf 's%02d' $i)")
	echo "$v" >>"$W/want.v"
	echo "${v}_v1" >>"$W/want.u"
	i=$((i + 1))
done
sort -o "$W/want.v" "$W/want.v"
sort -o "$W/want.u" "$W/want.u"
diff "$W/want.v" "$W/vhosts" >"$W/diff" || t_fail "the broker's vhosts are not exactly the grants': $(cat "$W/diff")"
diff "$W/want.u" "$W/users" >"$W/diff" || t_fail "the broker's users are not exactly the grants': $(cat "$W/diff")"
i=1
while [ $i -le "$STORM" ]; do
	f=$(t_envfile node-a "$(printf 's%02d' $i)")
	$LOGIN "$(t_envget "$f" MQ_URL)" >"$W/login.out" || t_fail "$f does not log in: $(cat "$W/login.out")"
	i=$((i + 1))
done
t_ok "$k SIGKILLs; $STORM vhosts and $STORM users on the broker, each exactly one grant's; every delivered url logs in"

t_check "the log verifies, and the tables rebuild byte for byte"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >"$W/rebuild.out" 2>&1 || t_fail "tally rebuild --check: $(cat "$W/rebuild.out")"
t_ok "chain intact; $(tail -n 1 "$W/rebuild.out")"
