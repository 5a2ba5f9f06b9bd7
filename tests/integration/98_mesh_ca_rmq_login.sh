#!/bin/sh
# Logins by certificate on a real RabbitMQ (issue 25, item 4): a
# requirement with credential: certificate gets a user with no password
# (an empty hash); the broker's EXTERNAL mechanism (the
# rabbitmq_auth_mechanism_ssl plugin, ssl_cert_login_from = common_name,
# the harness's one-time set-up) takes the user from the certificate of
# the mesh CA made for a key born on the consumer's node.  The delivered
# url logs in over AMQPS with EXTERNAL, through pika (Debian's
# python3-pika, as a Python service would) and through the harness's own
# handshake; PLAIN with any password is refused; a renewal keeps the
# user; revocation removes it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rabbit-lib.sh"

LOGIN="python3 $TALLY_SRC/tests/harness/amqp_login.py"
PIKA="/usr/bin/python3 $TALLY_SRC/tests/harness/pika_login.py"

t_say "RabbitMQ (EXTERNAL, ssl cacertfile the harness CA = the mesh CA), a consumer on node-b"
r_start
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.2
t_mesh_ca_harness
tly apply "$TALLY_SRC/examples/rabbitmq.yaml" >/dev/null
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" >"$W/admin.pw"
tly assign rabbitmq node-a --expose network --set host=127.0.0.1 \
	--set port="$TALLY_TEST_AMQP_PORT" --set admin-user="$TALLY_TEST_AMQP_USER" \
	--set management-port="$TALLY_TEST_AMQP_MGMT_TLS_PORT" \
	--set amqps-port="$TALLY_TEST_AMQP_TLS_PORT" --set tls=verify \
	--secret admin-password <"$W/admin.pw" >/dev/null || t_fail "assign rabbitmq failed"
cat >"$W/app.yaml" <<'YAML'
module: app
env: {MQ_USER: "", MQ_PASSWORD: "", MQ_URL: "", MQ_CERT: "", MQ_KEY: "", MQ_CA: ""}
requires:
  mq:
    type: rabbitmq-vhost
    from: rabbitmq
    credential: certificate
    env: {user: MQ_USER, password: MQ_PASSWORD, url: MQ_URL, cert: MQ_CERT, key: MQ_KEY, ca: MQ_CA}
YAML
tly apply "$W/app.yaml" >/dev/null
tly assign app node-b >/dev/null
load_env() {
	t_envvars "$W/agent-node-b/app.env" MQ_USER MQ_PASSWORD MQ_URL MQ_CERT \
		MQ_KEY MQ_CA
}
esc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

t_check "the user: no password; the url: amqps with the certificate, EXTERNAL"
t_settle node-b
tly log --json --type grant.provisioned | grep -q 'app/mq' || t_fail "not provisioned: $(tail -n 5 "$T_DLOG")"
load_env
[ -z "$MQ_PASSWORD" ] || t_fail "a password was delivered"
case $MQ_URL in
amqps://"$MQ_USER"@127.0.0.1:"$TALLY_TEST_AMQP_TLS_PORT"/*certfile=*keyfile=*auth_mechanism=external) ;;
*) t_fail "the url: $MQ_URL" ;;
esac
[ "$(api GET "/users/$(esc "$MQ_USER")" | python3 -c 'import json,sys; print(json.load(sys.stdin)["password_hash"] == "")')" = True ] ||
	t_fail "the user has a password hash"
[ "$(openssl x509 -in "$MQ_CERT" -noout -subject)" = "subject=CN = $MQ_USER" ] || t_fail "CN not the user"
t_ok "user $MQ_USER, empty hash; $(printf '%s' "$MQ_URL" | sed 's/?.*//')?certfile=...&keyfile=...&auth_mechanism=external"

t_check "EXTERNAL with the delivered url logs in (pika, then the harness's handshake); PLAIN with a password is refused"
$PIKA "$MQ_URL" >"$W/pika.out" 2>&1 || t_fail "pika, EXTERNAL: $(cat "$W/pika.out")"
grep -q "^in as $MQ_USER " "$W/pika.out" || t_fail "pika: $(cat "$W/pika.out")"
$LOGIN "$MQ_URL" >"$W/login.out" 2>&1 || t_fail "EXTERNAL: $(cat "$W/login.out")"
if $LOGIN "amqps://$(esc "$MQ_USER"):guess@127.0.0.1:$TALLY_TEST_AMQP_TLS_PORT/$(esc "$(printf '%s' "$MQ_URL" | sed 's|.*/\([^?]*\)?.*|\1|')")?cacertfile=$MQ_CA" >"$W/plain.out" 2>&1; then
	t_fail "PLAIN with a guessed password logged in"
fi
t_ok "EXTERNAL: in; PLAIN: $(head -n 1 "$W/plain.out" | cut -c1-80)"

t_check "a renewal keeps the user; the new certificate logs in"
U1=$MQ_USER
S1=$(openssl x509 -in "$MQ_CERT" -noout -serial)
tly rotate app/mq >/dev/null
t_settle node-b
tly log --json --type rotation.completed | grep -q 'app/mq' || t_fail "the renewal did not complete"
load_env
[ "$MQ_USER" = "$U1" ] || t_fail "the user changed: $U1 -> $MQ_USER"
[ "$(openssl x509 -in "$MQ_CERT" -noout -serial)" != "$S1" ] || t_fail "no new certificate"
$PIKA "$MQ_URL" >"$W/pika.out" 2>&1 || t_fail "pika after the renewal: $(cat "$W/pika.out")"
$LOGIN "$MQ_URL" >"$W/login.out" 2>&1 || t_fail "EXTERNAL after the renewal: $(cat "$W/login.out")"
t_ok "user $MQ_USER, a new certificate logs in (pika: $(cat "$W/pika.out"))"

t_check "the verifier agrees; revoked, the certificate no longer logs in"
tly check app/mq >/dev/null 2>&1 || t_fail "tally check: $(tly check app/mq 2>&1 | tail -3)"
tly remove app --yes >/dev/null
t_tallyd_once
if $LOGIN "$MQ_URL" >/dev/null 2>&1; then t_fail "the revoked user logs in"; fi
if $PIKA "$MQ_URL" >"$W/pika.out" 2>&1; then t_fail "the revoked user logs in with pika"; fi
t_ok "check healthy; revoked: refused"
