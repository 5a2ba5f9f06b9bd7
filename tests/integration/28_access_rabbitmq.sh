#!/bin/sh
# Access below ownership on RabbitMQ: a requirement with access: read (or
# read-write) and of: MODULE/REQUIREMENT gets a user of its own on the
# vhost another requirement's grant owns (a reporting context reading a
# game's queues).
#   - the reader logs in with its own delivered credential over AMQPS,
#     gets game's messages, and cannot publish or declare (access
#     refused); read-write publishes and still cannot declare;
#   - every grant stays healthy beside the others (the owner's checks
#     leave the readers' permissions on its vhost alone);
#   - a permission changed by hand on the reader is repaired;
#   - the reader's credential rotates (v2 works, v1 deleted after ack);
#   - game removed: the readers go with it (their logins refused);
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rabbit-lib.sh"

# module NAME [ACCESS]: requirement "mq", owning a vhost or ACCESS to game/mq.
module() {
	mkdir -p "$W/manifests"
	{
		cat <<EOF
module: $1
env: {MQ_VHOST: "", MQ_USER: "", MQ_PASSWORD: "", MQ_URL: "", MQ_CA: ""}
requires:
  mq:
    type: rabbitmq-vhost
    from: rabbitmq
EOF
		[ -z "${2-}" ] || printf '    access: %s\n    of: game/mq\n' "$2"
		printf '    env: {vhost: MQ_VHOST, user: MQ_USER, password: MQ_PASSWORD, url: MQ_URL, ca: MQ_CA}\n'
	} >"$W/manifests/$1.yaml"
	echo "$W/manifests/$1.yaml"
}
esc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
has_user() { api GET "/users/$(esc "$1")" >/dev/null 2>&1; }

# a.py URL OP QUEUE: as the url's user (pika, amqps verified against its
# cacertfile=), OP one of count (passive declare: the message count),
# get (basic.get one message: its body), publish (one confirmed,
# persistent message), declare (a queue of that name).  Exit 0 done,
# 1 the login refused, 3 access refused (403) on the channel.
cat >"$W/a.py" <<'EOF'
import ssl, sys
from urllib.parse import parse_qs, unquote, urlsplit
import pika
u = urlsplit(sys.argv[1])
op, queue = sys.argv[2], sys.argv[3]
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
        pika.exceptions.ConnectionClosedByBroker,
        pika.exceptions.AMQPConnectionError) as e:
    print("refused: %r" % (e,))
    sys.exit(1)
ch = conn.channel()
try:
    if op == "count":
        print(ch.queue_declare(queue, passive=True).method.message_count)
    elif op == "get":
        m, p, body = ch.basic_get(queue, auto_ack=True)
        print(body.decode() if body is not None else "")
    elif op == "publish":
        ch.confirm_delivery()
        ch.basic_publish("", queue, b"written", pika.BasicProperties(delivery_mode=2),
                         mandatory=True)
        print("published")
    elif op == "declare":
        ch.queue_declare(queue, durable=True)
        print("declared")
except pika.exceptions.ChannelClosedByBroker as e:
    print("access refused: %r" % (e,))
    sys.exit(3 if e.reply_code == 403 else 2)
conn.close()
EOF
A="/usr/bin/python3 $W/a.py"

t_say "a throwaway RabbitMQ over TLS; game owns a vhost, reporting reads it, writer writes it"
r_start
t_init
t_node node-a 127.0.0.1
r_provider node-a
tly apply "$(module game)" "$(module reporting read)" "$(module writer read-write)" >/dev/null ||
	t_fail "tally apply game reporting writer failed"
for m in game reporting writer; do tly assign $m node-a >/dev/null; done
t_tallyd_start --interval 1 --verify-interval 2
t_wait_healthy 60 game
t_wait_healthy 60 reporting
t_wait_healthy 60 writer
fg=$(t_envfile node-a game)
fr=$(t_envfile node-a reporting)
fw=$(t_envfile node-a writer)
VH=$(t_envget "$fg" MQ_VHOST)
[ "$(t_envget "$fr" MQ_VHOST)" = "$VH" ] && [ "$(t_envget "$fw" MQ_VHOST)" = "$VH" ] ||
	t_fail "the readers are not told game's vhost ($VH): $(t_envget "$fr" MQ_VHOST), $(t_envget "$fw" MQ_VHOST)"
RU=$(t_envget "$fr" MQ_USER)
WU=$(t_envget "$fw" MQ_USER)
[ "$RU" != "$(t_envget "$fg" MQ_USER)" ] && [ "$RU" != "$WU" ] ||
	t_fail "the users are not each its own: $RU, $WU"
UG=$(t_envget "$fg" MQ_URL)
UR=$(t_envget "$fr" MQ_URL)
UW=$(t_envget "$fw" MQ_URL)
t_ok "game's vhost $VH; reporting as $RU, writer as $WU"

t_check "the users: tag tally-reader, exactly their access on the vhost"
api GET "/users/$(esc "$RU")" | grep -q '"tags":\["tally-reader"\]' ||
	t_fail "$RU's tags: $(api GET "/users/$(esc "$RU")")"
api GET "/permissions/$(esc "$VH")/$(esc "$RU")" | grep -q '"configure":"^\$","write":"^\$","read":".\*"' ||
	t_fail "$RU's permission: $(api GET "/permissions/$(esc "$VH")/$(esc "$RU")")"
api GET "/permissions/$(esc "$VH")/$(esc "$WU")" | grep -q '"configure":"^\$","write":".\*","read":".\*"' ||
	t_fail "$WU's permission: $(api GET "/permissions/$(esc "$VH")/$(esc "$WU")")"
t_ok "tally-reader; read ^\$ ^\$ .*, read-write ^\$ .* .*"

t_check "read: get and consume game's messages, never publish or declare"
$A "$UG" declare scores >/dev/null || t_fail "game cannot declare its queue"
for i in 1 2 3; do $A "$UG" publish scores >/dev/null || t_fail "game cannot publish"; done
[ "$($A "$UR" count scores)" = 3 ] || t_fail "reporting does not count 3 messages"
[ "$($A "$UR" get scores)" = written ] || t_fail "reporting cannot get a message"
[ "$($A "$UR" count scores)" = 2 ] || t_fail "reporting's get did not take the message"
rc=0; $A "$UR" publish scores >"$W/a.out" 2>&1 || rc=$?
[ $rc = 3 ] || t_fail "reporting's publish: exit $rc, $(cat "$W/a.out")"
rc=0; $A "$UR" declare mine >"$W/a.out" 2>&1 || rc=$?
[ $rc = 3 ] || t_fail "reporting's declare: exit $rc, $(cat "$W/a.out")"
[ "$($A "$UG" count scores)" = 2 ] || t_fail "reporting's refused publish was routed"
t_ok "3 messages counted, one got; publish and declare: access refused"

t_check "read-write: publish; never declare"
[ "$($A "$UW" publish scores)" = published ] || t_fail "writer cannot publish"
[ "$($A "$UR" count scores)" = 3 ] || t_fail "writer's message is not seen"
rc=0; $A "$UW" declare mine >"$W/a.out" 2>&1 || rc=$?
[ $rc = 3 ] || t_fail "writer's declare: exit $rc, $(cat "$W/a.out")"
t_ok "writer published a 4th message; declare refused"

t_check "every grant healthy beside the others"
sleep 5	# two verification rounds at --verify-interval 2
# The test broker's plain AMQP listener is a warning (plaintext-login)
# about the broker, not about a grant: every other kind counts.
for g in game/mq reporting/mq writer/mq; do
	tly log --json --stream "grant/$g" --type grant.drifted |
		grep -v '"kind":"plaintext-login"' >"$W/drift.out" || :
	[ -s "$W/drift.out" ] && t_fail "$g drifted: $(tail -n 1 "$W/drift.out")"
done
for m in game reporting writer; do tly status $m >/dev/null || t_fail "$m is not healthy"; done
api GET "/permissions/$(esc "$VH")/$(esc "$RU")" | grep -q '"read":".\*"' ||
	t_fail "the owner's verification took $RU's permission"
t_ok "no drift on game/mq, reporting/mq, writer/mq; the readers' permissions stay"

t_check "a permission changed by hand on the reader is repaired"
api PUT "/permissions/$(esc "$VH")/$(esc "$RU")" '{"configure":".*","write":".*","read":".*"}' >/dev/null
t_grant_wait 30 reporting/mq grant.repaired >/dev/null
api GET "/permissions/$(esc "$VH")/$(esc "$RU")" | grep -q '"configure":"^\$","write":"^\$","read":".\*"' ||
	t_fail "not repaired: $(api GET "/permissions/$(esc "$VH")/$(esc "$RU")")"
$A "$UR" declare mine >/dev/null 2>&1 && t_fail "reporting declares after the repair"
t_ok "configure/write .* given by hand: back to ^\$ ^\$ .*"

t_say "reporting's credential rotates like any"
tly rotate reporting/mq >/dev/null || t_fail "tally rotate failed"
t_grant_wait 30 reporting/mq credential.activated >/dev/null
end=$(($(t_now_ms) + 10000))
until [ "$(t_envget "$(t_envfile node-a reporting)" MQ_USER)" != "$RU" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "v2 not delivered"
	sleep 0.1
done
fr2=$(t_envfile node-a reporting)
RU2=$(t_envget "$fr2" MQ_USER)
UR2=$(t_envget "$fr2" MQ_URL)
[ "$($A "$UR2" count scores)" = 3 ] || t_fail "v2 cannot read"
tly ack node-a reporting 2 >/dev/null
t_grant_wait 30 reporting/mq credential.retired >/dev/null
has_user "$RU" && t_fail "v1 user $RU still there"
rc=0; $A "$UR" count scores >/dev/null 2>&1 || rc=$?
[ $rc = 1 ] || t_fail "v1 still logs in (exit $rc)"
t_ok "v2 ($RU2) reads; v1 ($RU) deleted and refused"

t_say "game removed: the readers go with it"
tly remove game --yes >/dev/null || t_fail "tally remove game failed"
t_grant_wait 60 game/mq grant.revoked >/dev/null
t_grant_wait 60 reporting/mq grant.revoked >/dev/null
t_grant_wait 60 writer/mq grant.revoked >/dev/null
tly log --json --stream grant/reporting/mq --type revocation.requested |
	grep -q '"reason":"game/mq was revoked"' || t_fail "no revocation.requested naming game/mq"
rc=0; $A "$UR2" count scores >/dev/null 2>&1 || rc=$?
[ $rc = 1 ] || t_fail "reporting still logs in (exit $rc)"
rc=0; $A "$UW" count scores >/dev/null 2>&1 || rc=$?
[ $rc = 1 ] || t_fail "writer still logs in (exit $rc)"
has_user "$RU2" && t_fail "$RU2 still there"
has_user "$WU" && t_fail "$WU still there"
t_ok "reporting/mq and writer/mq revoked with game/mq; their users gone, logins refused"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
