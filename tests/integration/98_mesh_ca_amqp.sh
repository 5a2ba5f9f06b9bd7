#!/bin/sh
# A holder's certificate over AMQP with a real RabbitMQ: tallyd as a
# daemon publishing to the node queues, tally-node --amqp on node-b.
# The delivery's key request reaches the agent on tally.node.node-b, its
# signed report with the request goes back on tally.acks, the control
# plane signs, certificate.issued is routed to tally.node.node-b (signed
# by the control plane like every notice), the agent writes key,
# certificate and CA and acknowledges: no command typed after assign.
# Nothing on the broker holds the node's key (every queue read and put
# back while the agent is stopped).
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

t_say "RabbitMQ; the mesh CA on node-a; app on node-b wants a certificate"
r_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password >/dev/null ||
	t_fail "tally publish configure failed"
t_node node-a 127.0.0.1
t_node node-b 127.0.0.2
tly apply "$TALLY_SRC/examples/mesh-ca.yaml" >/dev/null
tly assign mesh-ca node-a --expose network >/dev/null || t_fail "assign mesh-ca failed"
cat >"$W/app.yaml" <<'YAML'
module: app
env: {TLS_CERT: "", TLS_KEY: "", TLS_CA: ""}
requires:
  tls:
    type: x509-certificate
    from: mesh-ca
    sans: [app.mesh.test]
    server-auth: "yes"
    env: {certificate: TLS_CERT, private-key: TLS_KEY, ca-cert: TLS_CA}
YAML
tly apply "$W/app.yaml" >/dev/null || t_fail "apply app.yaml failed"
tly assign app node-b >/dev/null || t_fail "assign app failed"
t_tallyd_start --interval 1 --verify-interval 3600

t_check "the agent over AMQP gets its certificate and acknowledges, nobody typing"
"$TALLY_BIN/tally-node" --node node-b --key "$(t_nodekey node-b)" --dir "$W/agent-node-b" \
	--state "$W/agent-node-b.state" --amqp "$AMQP_URL" --amqp-user "$TALLY_TEST_AMQP_USER" \
	--amqp-password-file "$W/amqp.pw" --report-interval 1 2>>"$W/agent-node-b.log" &
APID=$!
_t_pids="$_t_pids $APID"
t_wait_for 60 "app@node-b's acknowledgement" sh -c "\"$TALLY_BIN/tally\" log --json --type credential.acknowledged | grep -q '\"holder\":\"app@node-b\"'"
. "$W/agent-node-b/app.env"
openssl verify -CAfile "$TLS_CA" "$TLS_CERT" >/dev/null || t_fail "openssl verify"
openssl x509 -in "$TLS_CERT" -noout -text | grep -q "TLS Web Client Authentication, TLS Web Server Authentication" ||
	t_fail "server-auth: yes did not give serverAuth"
[ "$(openssl pkey -in "$TLS_KEY" -pubout)" = "$(openssl x509 -in "$TLS_CERT" -noout -pubkey)" ] ||
	t_fail "the key written is not the certificate's"
t_ok "certificate for the key made on node-b, serverAuth as asked, verified against the mesh CA; acknowledged over tally.acks"

t_check "nothing on the broker or in the home holds the node's key"
kill -TERM "$APID"; wait "$APID" 2>/dev/null || true
t_forget_pid "$APID"
KEYB64=$(sed -n '2p' "$TLS_KEY")
for q in $(api GET "/queues/%2F" | python3 -c 'import json,sys; print(" ".join(q["name"] for q in json.load(sys.stdin)))'); do
	api POST "/queues/%2F/$q/get" \
		'{"count":100000,"ackmode":"ack_requeue_true","encoding":"auto","truncate":100000000}' >>"$W/queues.txt"
done
if grep -qF "$KEYB64" "$W/queues.txt"; then t_fail "the node's key is on the broker"; fi
if grep -rqaF "$KEYB64" "$TALLY_HOME"; then t_fail "the node's key is in the home"; fi
t_ok "every queue read and put back: no key; none in the home"
t_tallyd_stop
