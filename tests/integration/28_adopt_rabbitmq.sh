#!/bin/sh
# tally adopt MODULE/REQ --resource VHOST --login USER on RabbitMQ: a
# virtual host made by hand (a live mesh's), a durable queue with
# messages in it and the user its consumer logs in as, taken under tally
# over the management API's TLS listener (verified).
#   - the CLI: adopt before assign records the claim (grant.adopted); a
#     second adopt of the grant and another grant adopting the same
#     vhost are refused, nothing appended;
#   - tallyd takes them over: the vhost is marked, never made again (its
#     queue keeps its messages), the user keeps its password hash (the
#     old password still logs in) and loses its management tag, another
#     user's permission on the vhost goes; nothing of the adopted user is
#     delivered (no credential.delivered of v1), the delivered credential
#     is tally's (v2): it logs in over AMQPS, reads the queue's count
#     and publishes to it;
#   - while the rotation waits, a check of v2 (tally check, and the
#     daemon's own verification every second) finds the adopted user no
#     intruder: its permission stays and it still works;
#   - a consumer (pika, AMQPS) on the adopted user keeps working
#     throughout: its node's agent (tally-node) writes v2, reloads it
#     once (the consumer then logs in with the delivered url) and
#     acknowledges, and only then is the adopted user retired (status
#     names the wait), then it is gone and refused; not one of its
#     logins failed, and it ran on both users;
#   - a call cut short after marking the vhost: the next one goes on;
#   - what cannot be adopted: a vhost that does not exist, one tally made
#     for another grant, a user with permissions on another vhost
#     (grant.failed with the driver's reason, nothing changed); another
#     mesh's vhost and user on the same broker (owned by mesh ...: its
#     mark, user and messages untouched, its credential works);
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rabbit-lib.sh"

G=legacy/mq
LOGIN="python3 $TALLY_SRC/tests/harness/amqp_login.py"

# consumer NAME: a module with one vhost requirement "mq".
consumer() {
	mkdir -p "$W/manifests"
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {MQ_VHOST: "", MQ_USER: "", MQ_PASSWORD: "", MQ_URL: "", MQ_CA: ""}
requires:
  mq:
    type: rabbitmq-vhost
    from: rabbitmq
    env: {vhost: MQ_VHOST, user: MQ_USER, password: MQ_PASSWORD, url: MQ_URL, ca: MQ_CA}
EOF
	echo "$W/manifests/$1.yaml"
}
esc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
has_vhost() { api GET "/vhosts/$(esc "$1")" >/dev/null 2>&1; }
has_user() { api GET "/users/$(esc "$1")" >/dev/null 2>&1; }
# field JSON KEY: a top-level value of one object (strings bare, the
# rest as JSON).
field() {
	printf '%s' "$1" | python3 -c 'import json, sys
v = json.load(sys.stdin).get(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))' "$2"
}
perm_users() {	# VHOST: who has a permission on it, sorted, one line
	api GET "/vhosts/$(esc "$1")/permissions" | python3 -c 'import json, sys
print(" ".join(sorted(p["user"] for p in json.load(sys.stdin))))'
}
publish() {	# VHOST QUEUE N: as the admin, through the management API
	api PUT "/queues/$(esc "$1")/$2" '{"durable":true}' >/dev/null
	_p=0
	while [ $_p -lt "$3" ]; do
		api POST "/exchanges/$(esc "$1")/amq.default/publish" \
			"{\"properties\":{\"delivery_mode\":2},\"routing_key\":\"$2\",\"payload\":\"m$_p\",\"payload_encoding\":\"string\"}" |
			grep -q '"routed":true' || t_fail "message $_p was not routed to $1/$2"
		_p=$((_p + 1))
	done
}

# q.py URL QUEUE [publish]: a consumer with pika over the url (amqps:
# verified against its cacertfile=): the queue's message count, read by
# a passive declare (after publishing one persistent, confirmed message
# with publish).  Exit 1 when the broker refuses the login or the vhost.
cat >"$W/q.py" <<'EOF'
import ssl, sys
from urllib.parse import parse_qs, unquote, urlsplit
import pika
u = urlsplit(sys.argv[1])
q = {k: v[0] for k, v in parse_qs(u.query).items()}
ssl_options = None
if u.scheme == "amqps":
    ctx = ssl.create_default_context(cafile=q["cacertfile"])
    ssl_options = pika.SSLOptions(ctx, u.hostname)
params = pika.ConnectionParameters(
    host=u.hostname, port=u.port, virtual_host=unquote(u.path[1:]),
    credentials=pika.PlainCredentials(unquote(u.username), unquote(u.password)),
    ssl_options=ssl_options, connection_attempts=1, socket_timeout=5)
try:
    conn = pika.BlockingConnection(params)
except (pika.exceptions.ProbableAuthenticationError,
        pika.exceptions.ProbableAccessDeniedError,
        pika.exceptions.ConnectionClosedByBroker) as e:
    print("refused: %r" % (e,))
    sys.exit(1)
ch = conn.channel()
if len(sys.argv) > 3 and sys.argv[3] == "publish":
    ch.confirm_delivery()
    ch.basic_publish("", sys.argv[2], b"from tally's credential",
                     pika.BasicProperties(delivery_mode=2), mandatory=True)
print(ch.queue_declare(sys.argv[2], passive=True).method.message_count)
conn.close()
EOF
Q="/usr/bin/python3 $W/q.py"

t_say "a throwaway RabbitMQ; the rabbitmq provider on node-a over the TLS management listener, verified"
r_start
t_init
t_node node-a 127.0.0.1
r_provider node-a
MESH=$(tly mesh --json | t_jstr mesh)
LURL="amqps://legacy:frozen-real@127.0.0.1:$TALLY_TEST_AMQP_TLS_PORT/legacy?cacertfile=$TALLY_TEST_CA"

t_say "a vhost made by hand, a durable queue with 5 messages, the user its consumer logs in as"
api PUT /vhosts/legacy '{"description":"billing, made by hand","tags":"billing"}' >/dev/null
api PUT /users/legacy '{"password":"frozen-real","tags":"management"}' >/dev/null
api PUT /permissions/legacy/legacy '{"configure":"^$","write":".*","read":".*"}' >/dev/null
# Someone else who may read the vhost: no grant's login may share it.
api PUT /users/peeker '{"password":"peek","tags":""}' >/dev/null
api PUT /permissions/legacy/peeker '{"configure":"","write":"","read":".*"}' >/dev/null
publish legacy invoices 5
[ "$($Q "$LURL" invoices)" = 5 ] || t_fail "the hand-made user does not see its 5 messages"
HASH0=$(field "$(api GET /users/legacy)" password_hash)
[ -n "$HASH0" ] || t_fail "no password hash for legacy"
t_check "the stale password is refused (the control of every login below)"
$Q "amqps://legacy:frozen-stale@127.0.0.1:$TALLY_TEST_AMQP_TLS_PORT/legacy?cacertfile=$TALLY_TEST_CA" \
	invoices >"$W/q.out" 2>&1 && t_fail "a wrong password logs in"
grep -q refused "$W/q.out" || t_fail "a wrong password: $(cat "$W/q.out")"
t_ok "legacy logs in over AMQPS and counts 5 messages in invoices; a wrong password is refused"

tly apply "$(consumer legacy)" >/dev/null
tly apply "$(consumer other)" >/dev/null

t_say "tally adopt $G --resource legacy --login legacy (before tally assign)"
tly adopt $G --resource legacy --login legacy >"$W/adopt.out" ||
	t_fail "tally adopt failed"
grep -q "retires legacy" "$W/adopt.out" || t_fail "adopt says: $(cat "$W/adopt.out")"
tly log --json --stream "grant/$G" --type grant.adopted |
	grep -q '"resource":"legacy","login":"legacy"' ||
	t_fail "no grant.adopted {resource legacy, login legacy}"
before=$(t_head_seq)
t_expect_exit 4 "a second adopt of $G" tly adopt $G --resource legacy --login legacy
t_expect_exit 4 "other/mq adopting legacy too" \
	tly adopt other/mq --resource legacy --login legacy
grep -q "adopted by grant $G" "$W/last.err" || t_fail "no word of $G: $(cat "$W/last.err")"
[ "$(t_head_seq)" = "$before" ] || t_fail "a refused adopt appended events"
t_ok "$(cat "$W/adopt.out")"

t_say "the consumer: on the adopted user until its agent writes tally's"
# A consumer as a live mesh runs it: its own stored url (legacy's) until
# its node's agent writes the delivered one (and reloads it), then that;
# a login and a look at the queue every round, every failure recorded.
mkdir -p "$W/agent"
: >"$W/poll.ok"
: >"$W/poll.fail"
# The reload is a request the consumer answers between two logins (as a
# service's reload returns once it runs on the new values): the agent
# acknowledges only after it, so no connection is open on the old
# credential when it is retired.
agentvar() { sed -n "s/^$1=//p" "$W/agent/legacy.env" | tr -d "'\""; }
u=legacy url=$LURL
app() {
	while [ ! -f "$W/poll.stop" ]; do
		if [ -f "$W/reload.req" ] && [ ! -f "$W/reload.done" ]; then
			u=$(agentvar MQ_USER) url=$(agentvar MQ_URL)
			: >"$W/reload.done"
		fi
		if $Q "$url" invoices >"$W/poll.out" 2>&1; then
			echo "$u" >>"$W/poll.ok"
		else
			echo "$(date +%T.%N) as $u: $(tr '\n' ' ' <"$W/poll.out")" >>"$W/poll.fail"
		fi
		sleep 0.1
	done
}
app &
POLL=$!
_t_pids="$_t_pids $POLL"

tly assign legacy node-a >/dev/null || t_fail "tally assign legacy node-a failed"
# Every grant verified each second: the waiting rotation meets it.
t_tallyd_start --interval 1 --verify-interval 1
t_grant_wait 30 $G grant.provisioned >/dev/null
t_grant_wait 30 $G rotation.started '"reason":"adopted' >/dev/null
t_grant_wait 30 $G credential.activated >/dev/null
t_grant_wait 30 $G credential.delivered '"version":2' >/dev/null
f=$(t_envfile node-a legacy)
USER2=$(t_envget "$f" MQ_USER)
URL2=$(t_envget "$f" MQ_URL)
[ "$(t_envget "$f" MQ_VHOST)" = legacy ] || t_fail "MQ_VHOST is $(t_envget "$f" MQ_VHOST)"
[ "$USER2" = "$(t_gname $G legacy-mq _v2)" ] || t_fail "MQ_USER is '$USER2', not the scheme's v2"
case $URL2 in
amqps://*@127.0.0.1:"$TALLY_TEST_AMQP_TLS_PORT"/legacy\?cacertfile=*) ;;
*) t_fail "the delivered url is not amqps to the vhost legacy: $(printf '%s' "$URL2" | sed 's/:[^:@]*@/:***@/')" ;;
esac
t_ok "delivered: MQ_VHOST legacy, MQ_USER $USER2 (tally's), an amqps url"

t_check "nothing of the adopted user was delivered"
tly log --json --stream "grant/$G" --type credential.delivered |
	grep -q '"body":{[^}]*"version":1[,}]' && t_fail "a credential.delivered of v1"
tly log --json --stream "grant/$G" --type credential.delivered |
	grep -q '"version":2' || t_fail "no credential.delivered of v2"
t_ok "only v2 delivered"

t_check "the vhost was taken over as it was: marked, its queue and messages kept"
V=$(api GET /vhosts/legacy)
[ "$(field "$V" description)" = "made by tally for grant $G in mesh $MESH; do not edit" ] ||
	t_fail "the vhost's description: $(field "$V" description)"
[ "$(field "$V" tags)" = '["tally"]' ] || t_fail "the vhost's tags: $(field "$V" tags)"
[ "$($Q "$URL2" invoices)" = 5 ] || t_fail "the delivered credential does not count 5 messages"
[ "$($Q "$URL2" invoices publish)" = 6 ] || t_fail "the delivered credential cannot publish to invoices"
$LOGIN "$URL2" >"$W/login.out" 2>&1 || t_fail "the delivered url does not log in: $(cat "$W/login.out")"
t_ok "the vhost carries the grant's mark; $USER2 counts 5 messages and publishes a 6th"

t_check "the adopted user: its hash kept, tag tally, .* on the vhost; peeker's permission gone"
L=$(api GET /users/legacy)
[ "$(field "$L" password_hash)" = "$HASH0" ] || t_fail "legacy's password hash changed"
[ "$(field "$L" tags)" = '["tally"]' ] || t_fail "legacy's tags: $(field "$L" tags)"
api GET /permissions/legacy/legacy | grep -q '"configure":".\*","write":".\*","read":".\*"' ||
	t_fail "legacy's permission: $(api GET /permissions/legacy/legacy)"
[ "$(perm_users legacy)" = "$(printf '%s\n' "$TALLY_TEST_AMQP_USER" "$USER2" legacy | sort | tr '\n' ' ' | sed 's/ $//')" ] ||
	t_fail "who may use the vhost: $(perm_users legacy)"
curl -fsS -u legacy:frozen-real "http://127.0.0.1:$TALLY_TEST_AMQP_MGMT_PORT/api/whoami" >/dev/null 2>&1 &&
	t_fail "legacy still has management access"
t_ok "hash unchanged, tags [tally], .* on legacy; only $TALLY_TEST_AMQP_USER, $USER2 and legacy have permissions"

t_check "the adopted user works until the holder acknowledges v2, checks of v2 notwithstanding"
t_expect_exit 0 "tally check $G while the rotation waits" tly check $G
grep -q "checked 1 grant(s): 0 repaired, 0 not healthy" "$W/last.out" ||
	t_fail "tally check while the rotation waits: $(cat "$W/last.out")"
sleep 3		# three of the daemon's own verification passes
[ "$($Q "$LURL" invoices)" = 6 ] || t_fail "the adopted user no longer reads the queue"
api GET /permissions/legacy/legacy >/dev/null || t_fail "a check took legacy's permission"
# (The harness's broker has a plain AMQP listener too: a warning, not
# the grant's drift.)
tly log --json --stream "grant/$G" | grep '"type":"grant.\(drifted\|repaired\)"' |
	grep -v '"kind":"plaintext-login"' >"$W/drift.json" || true
[ -s "$W/drift.json" ] && t_fail "a check of v2 found a drift: $(head -n 1 "$W/drift.json")"
tly status legacy >"$W/status.txt" 2>&1 || true
grep -q "rotating v1 → v2 (adopted): waiting on node-a/legacy" "$W/status.txt" || {
	cat "$W/status.txt" >&2
	t_fail "status does not name the wait"
}
tly log --json --stream "grant/$G" --type credential.retired | grep -q . &&
	t_fail "retired before the acknowledgement"
t_ok "tally check: healthy; legacy counts 6 messages; status: waiting on node-a/legacy"

t_say "node-a's agent writes v2, reloads the consumer and acknowledges: the adopted user goes"
t_reload_agent node-a legacy
t_grant_wait 30 $G credential.acknowledged '"holder":"legacy@node-a"' >/dev/null
t_grant_wait 30 $G credential.retired '"user":"legacy"' >/dev/null
t_reloaded_once
t_grant_wait 10 $G rotation.completed >/dev/null
has_user legacy && t_fail "the user legacy is still there"
$Q "$LURL" invoices >"$W/q.out" 2>&1 && t_fail "the adopted user still logs in"
grep -q refused "$W/q.out" || t_fail "the adopted user: $(cat "$W/q.out")"
has_user peeker || t_fail "peeker, never the grant's, was deleted"
[ "$($Q "$URL2" invoices)" = 6 ] || t_fail "tally's credential lost the messages"
t_expect_exit 0 "tally check $G after the rotation" tly check $G
t_consumer_done "$POLL"
n1=$(grep -c '^legacy$' "$W/poll.ok" || true)
n2=$(grep -c "^$USER2\$" "$W/poll.ok" || true)
[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] || t_fail "the consumer did not run on both (legacy: $n1, $USER2: $n2)"
t_ok "legacy deleted and refused; $USER2 counts 6 messages; the consumer never failed ($n1 logins as legacy, $n2 as $USER2 after one reload)"

t_say "a call cut short after it marked the vhost: the next one goes on"
tly apply "$(consumer resumed)" >/dev/null
api PUT /vhosts/half "{\"description\":\"made by tally for grant resumed/mq in mesh $MESH; do not edit\",\"tags\":\"tally\"}" >/dev/null
api PUT /users/halfuser '{"password":"half-pw","tags":""}' >/dev/null
api PUT /permissions/half/halfuser '{"configure":".*","write":".*","read":".*"}' >/dev/null
publish half jobs 2
tly adopt resumed/mq --resource half --login halfuser >/dev/null || t_fail "tally adopt resumed/mq failed"
tly assign resumed node-a >/dev/null
t_grant_wait 30 resumed/mq rotation.started '"reason":"adopted' >/dev/null
[ "$(field "$(api GET /users/halfuser)" tags)" = '["tally"]' ] || t_fail "halfuser was not tagged"
[ "$($Q "amqps://halfuser:half-pw@127.0.0.1:$TALLY_TEST_AMQP_TLS_PORT/half?cacertfile=$TALLY_TEST_CA" jobs)" = 2 ] ||
	t_fail "halfuser no longer reads its 2 messages"
t_ok "resumed/mq provisioned into half; halfuser tagged and still reading its 2 messages"

t_say "what cannot be adopted"
tly apply "$(consumer ghost)" >/dev/null
tly adopt ghost/mq --resource nosuchvhost --login peeker >/dev/null ||
	t_fail "tally adopt ghost/mq failed"
tly assign ghost node-a >/dev/null
t_grant_wait 30 ghost/mq grant.failed 'nothing to adopt' >/dev/null
has_vhost nosuchvhost && t_fail "nosuchvhost was made"
# A vhost tally made for a grant (not adopted): refused, the grant's
# credential untouched.
tly assign other node-a >/dev/null
t_wait_healthy 30 other
f4=$(t_envfile node-a other)
V4=$(t_envget "$f4" MQ_VHOST)
tly apply "$(consumer fourth)" >/dev/null
tly adopt fourth/mq --resource "$V4" --login "$(t_envget "$f4" MQ_USER)" >/dev/null ||
	t_fail "tally adopt fourth/mq failed"
tly assign fourth node-a >/dev/null
t_grant_wait 30 fourth/mq grant.failed 'made by tally for grant other/mq' >/dev/null
$LOGIN "$(t_envget "$f4" MQ_URL)" >"$W/login.out" 2>&1 || t_fail "other/mq's credential broke: $(cat "$W/login.out")"
# A user with a permission on another vhost: deleting it after the
# rotation would cut that off; nothing is changed.
api PUT /vhosts/spare '{"description":"spare, made by hand"}' >/dev/null
api PUT /users/shared '{"password":"shared-pw","tags":""}' >/dev/null
api PUT /permissions/spare/shared '{"configure":".*","write":".*","read":".*"}' >/dev/null
api PUT /permissions/%2F/shared '{"configure":".*","write":".*","read":".*"}' >/dev/null
tly apply "$(consumer fifth)" >/dev/null
tly adopt fifth/mq --resource spare --login shared >/dev/null || t_fail "tally adopt fifth/mq failed"
tly assign fifth node-a >/dev/null
t_grant_wait 30 fifth/mq grant.failed 'also has permissions on vhost' >/dev/null
[ "$(field "$(api GET /vhosts/spare)" description)" = "spare, made by hand" ] ||
	t_fail "the refused adoption marked spare"
[ "$(field "$(api GET /users/shared)" tags)" = '[]' ] || t_fail "the refused adoption tagged shared"
t_ok "nosuchvhost: nothing to adopt; $V4: tally's for other/mq (its credential works); shared: a permission on /, nothing changed"

t_check "another mesh's vhost and user on the same broker"
# A second home (another mesh) with the same provider on the same broker
# provisions a vhost there: its mark names that mesh.
(
	export TALLY_HOME="$W/home2"
	t_init
	t_node node-x 127.0.0.1
	r_provider node-x
	tly apply "$(consumer alien)" >/dev/null
	tly assign alien node-x >/dev/null
	t_tallyd_once
	tly status alien >/dev/null || t_fail "the other mesh's alien is not healthy"
	# Outside $W/env: t_envget would refresh it from this mesh's home.
	cp "$(t_envfile node-x alien)" "$W/alien.env"
	tly mesh --json | t_jstr mesh >"$W/mesh2"
)
MESH2=$(cat "$W/mesh2")
VX=$(t_envget "$W/alien.env" MQ_VHOST)
UX=$(t_envget "$W/alien.env" MQ_USER)
URLX=$(t_envget "$W/alien.env" MQ_URL)
[ -n "$VX" ] && [ -n "$UX" ] || t_fail "no vhost or user of the other mesh's"
[ "$(field "$(api GET "/vhosts/$(esc "$VX")")" description)" = "made by tally for grant alien/mq in mesh $MESH2; do not edit" ] ||
	t_fail "the other mesh's vhost: $(api GET "/vhosts/$(esc "$VX")")"
publish "$VX" jobs 2
[ "$($Q "$URLX" jobs publish)" = 3 ] || t_fail "the other mesh's credential does not count and publish"
UXJ0=$(api GET "/users/$(esc "$UX")")
PX0=$(perm_users "$VX")
tly apply "$(consumer grab)" >/dev/null
tly adopt grab/mq --resource "$VX" --login "$UX" >/dev/null ||
	t_fail "tally adopt grab/mq failed"
tly assign grab node-a >/dev/null
t_grant_wait 30 grab/mq grant.failed "owned by mesh $(printf '%.12s' "$MESH2")" >/dev/null
tly log --json --stream grant/grab/mq --type grant.provisioned | grep -q . &&
	t_fail "grab/mq was provisioned"
[ "$(field "$(api GET "/vhosts/$(esc "$VX")")" description)" = "made by tally for grant alien/mq in mesh $MESH2; do not edit" ] ||
	t_fail "the refused adoption marked $VX"
UXJ=$(api GET "/users/$(esc "$UX")")
[ "$(field "$UXJ" password_hash)" = "$(field "$UXJ0" password_hash)" ] &&
	[ "$(field "$UXJ" tags)" = "$(field "$UXJ0" tags)" ] ||
	t_fail "the refused adoption changed $UX: $UXJ"
[ "$(perm_users "$VX")" = "$PX0" ] || t_fail "who may use $VX: $(perm_users "$VX"), was $PX0"
[ "$($Q "$URLX" jobs)" = 3 ] || t_fail "the other mesh's credential no longer counts its 3 messages"
t_ok "$VX, $UX (mesh $(printf '%.12s' "$MESH2")...): refused, owned by mesh; mark, user and permissions untouched, its credential counts its 3 messages"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >"$W/rebuild.out" 2>&1 || t_fail "tally rebuild --check: $(cat "$W/rebuild.out")"
t_ok "tally verify; rebuild --check"
