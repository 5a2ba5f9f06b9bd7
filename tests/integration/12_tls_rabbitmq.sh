#!/bin/sh
# tallyd reaches RabbitMQ's management API over https, verified against
# the provider's ca, and refuses a broker it cannot verify before it
# sends the admin's credentials.
#
# Against the harness's broker (tests/harness/rabbit.sh: its TLS
# management listener, a certificate of tests/harness/ca.sh's CA):
#   - tls=verify with no ca is refused with how to give one;
#   - ca=another CA: refused naming "certificate verify failed", no
#     vhost made, tally status says "not trusted (TLS)" and the reason;
#   - an impostor on the management port, its certificate of another CA
#     for 127.0.0.1, or of the right CA for another host name, with
#     tls=verify and the right ca: refused naming "certificate verify
#     failed" (and the host name), the impostor received nothing of the
#     admin's (no request, no Basic credentials), status says "not
#     trusted (TLS)" and why;
#   - tls=verify with ca=CA on the TLS management port: a vhost is
#     provisioned; the consumer gets url amqps://...:AMQPS-PORT/...
#     ?cacertfile=CA-FILE&verify=verify_peer, port the AMQPS port, tls
#     "true", ca the same CA file as the node writes it, and the url
#     logs in over AMQPS,
#     verifying the broker (and a consumer trusting another CA cannot);
#     status says
#     "TLS, verified"; a capture of the TLS port holds neither the
#     admin's Basic credentials (base64 of user:password), nor the
#     password, nor the vhost's name;
#   - the positive control: the same with tls=off on the plaintext
#     port carries the Basic credentials and the vhost's name in clear;
#   - tls=require reaches the TLS port without verifying (another
#     CA's ca is then no obstacle).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rabbit-lib.sh"

LOGIN="python3 $TALLY_SRC/tests/harness/amqp_login.py"

consumer() {
	mkdir -p "$W/manifests"
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {MQ_VHOST: "", MQ_USER: "", MQ_URL: "", MQ_PORT: "", MQ_TLS: "", MQ_CA: ""}
requires:
  mq:
    type: rabbitmq-vhost
    from: rabbitmq
    env: {vhost: MQ_VHOST, user: MQ_USER, url: MQ_URL, port: MQ_PORT, tls: MQ_TLS, ca: MQ_CA}
EOF
	echo "$W/manifests/$1.yaml"
}
esc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
has_vhost() { api GET "/vhosts/$(esc "$1")" >/dev/null 2>&1; }
msg() { grep -v 'fence:' "$W/once.err" | grep -m1 "$1" | sed 's/^.* \(warn\|error\|info\): //' | cut -c1-200; }

t_say "a throwaway RabbitMQ with an https management listener; the rabbitmq provider on node-a"
r_start
B64=$(printf '%s:%s' "$TALLY_TEST_AMQP_USER" "$TALLY_TEST_AMQP_PASSWORD" | base64 -w0)
t_init
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/rabbitmq.yaml" >/dev/null
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" >"$W/admin.pw"
rmq_assign() {
	tly assign rabbitmq node-a --expose network --set host=127.0.0.1 \
		--set port="$TALLY_TEST_AMQP_PORT" \
		--set admin-user="$TALLY_TEST_AMQP_USER" "$@" \
		--secret admin-password <"$W/admin.pw" >/dev/null ||
		t_fail "tally assign rabbitmq $*"
}

t_check "tls=verify without ca: refused, saying how to give one"
rmq_assign --set management-port="$TALLY_TEST_AMQP_MGMT_TLS_PORT" --set tls=verify
tly apply "$(consumer app)" >/dev/null
tly assign app node-a >/dev/null
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once connected with tls=verify and no ca"
grep -v "fence:" "$W/once.err" | grep "no ca" | grep -q -- "--set ca=FILE" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "no word on the missing ca"; }
t_ok "$(msg 'no ca')"

t_check "a broker whose certificate chains to another CA: refused before the admin logs in"
rmq_assign --set ca="$TALLY_TEST_CA_OTHER"
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted a broker of another CA"
grep -q "certificate verify failed" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not name the failed verification"; }
VA=$(t_gname app/mq app-mq)
! has_vhost "$VA" || t_fail "vhost $VA was made through an unverified broker"
tly status >"$W/st" 2>&1 || true
grep "not trusted (TLS)" "$W/st" | grep -q "certificate verify failed" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the provider is not trusted, with the reason"; }
t_ok "$(msg 'certificate verify failed')"

# impostor WHAT CERT KEY: the management API at an impostor presenting
# CERT, with tls=verify and the harness CA.
impostor() {
	t_impostor "$2" "$3"
	rmq_assign --set management-port="$T_IMP_PORT" --set ca="$TALLY_TEST_CA"
	t_tallyd_try
	t_impostor_end
	[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted $1"
	grep -q "certificate verify failed" "$W/once.err" ||
		{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not name the failed verification of $1"; }
	t_impostor_seen ||
		{ cat "$W/impostor.out" >&2; t_fail "the impostor saw no handshake: the test proves nothing"; }
	! grep -qi -e "authorization" -e "HTTP/1" "$W/impostor.out" ||
		t_fail "$1 received a request"
	! grep -qF -e "$B64" -e "$TALLY_TEST_AMQP_PASSWORD" "$W/impostor.out" ||
		t_fail "$1 received the admin's credentials"
	! has_vhost "$VA" || t_fail "vhost $VA was made through $1"
	tly status >"$W/st" 2>&1 || true
	grep "not trusted (TLS)" "$W/st" | grep -q "certificate verify failed" ||
		{ cat "$W/st" >&2; t_fail "tally status does not say the provider is not trusted, with the reason"; }
}

t_check "an impostor presenting another CA's certificate for 127.0.0.1: refused, it gets nothing"
impostor "an impostor of another CA" "$TALLY_TEST_CA_IMPOSTOR_CERT" "$TALLY_TEST_CA_IMPOSTOR_KEY"
t_ok "$(msg 'certificate verify failed')"

t_check "a server presenting the right CA's certificate for another host: refused, it gets nothing"
impostor "a certificate for another host" "$TALLY_TEST_CA_WRONGHOST_CERT" "$TALLY_TEST_CA_WRONGHOST_KEY"
grep -qi "certificate verify failed.*\(host name\|hostname\|subject name\)" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not say the host name does not match"; }
t_ok "$(msg 'certificate verify failed')"

t_check "tls=verify with the right CA: provisioned, the url logs in over AMQPS, verified; nothing in clear on the wire"
rmq_assign --set management-port="$TALLY_TEST_AMQP_MGMT_TLS_PORT" \
	--set amqps-port="$TALLY_TEST_AMQP_TLS_PORT" --set ca="$TALLY_TEST_CA"
t_capture "$W/tls.pcap" "$TALLY_TEST_AMQP_MGMT_TLS_PORT"
t_tallyd_try
t_capture_end
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once over verified TLS exited $T_RC"; }
F=$(t_envfile node-a app)
[ "$(t_envget "$F" MQ_VHOST)" = "$VA" ] || t_fail "app got MQ_VHOST=$(t_envget "$F" MQ_VHOST), expected $VA"
U=$(t_envget "$F" MQ_URL)
case $U in
amqps://*@127.0.0.1:"$TALLY_TEST_AMQP_TLS_PORT"/*"?cacertfile=$(t_envget "$F" MQ_CA)&verify=verify_peer") ;;
*) t_fail "the delivered url is not amqps:// to the AMQPS port, cacertfile=MQ_CA, verify_peer: $(printf '%s' "$U" | sed 's/:[^:@]*@/:***@/')" ;;
esac
[ "$(t_envget "$F" MQ_PORT)" = "$TALLY_TEST_AMQP_TLS_PORT" ] || t_fail "MQ_PORT is $(t_envget "$F" MQ_PORT), not the AMQPS port"
[ "$(t_envget "$F" MQ_TLS)" = true ] || t_fail "MQ_TLS is $(t_envget "$F" MQ_TLS), not true"
# The field ca and the url's cacertfile= name the CA file as the node
# writes it (here tally env --files).
CAF=$(t_envget "$F" MQ_CA)
[ -n "$CAF" ] && cmp -s "$CAF" "$TALLY_TEST_CA" ||
	t_fail "MQ_CA is '$CAF', not a file of the provider's CA"
AMQP_LOGIN_CAFILE=$CAF $LOGIN "$U" >"$W/login.out" 2>&1 ||
	t_fail "the delivered url does not log in over AMQPS: $(cat "$W/login.out")"
# The same url trusting another CA instead (the url's cacertfile= wins).
if AMQP_LOGIN_CAFILE=$TALLY_TEST_CA_OTHER $LOGIN "$(printf '%s' "$U" |
    sed 's/cacertfile=[^&]*&//')" >"$W/login.out" 2>&1; then
	t_fail "a consumer trusting another CA logged in: the client verifies nothing"
fi
grep -q "^tls:" "$W/login.out" || t_fail "the consumer was refused, but not for TLS: $(cat "$W/login.out")"
has_vhost "$VA" || t_fail "no vhost $VA on the broker"
tly status >"$W/st" 2>&1 || true
grep -q "reached at 127.0.0.1: TLS, verified" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the broker is reached by verified TLS"; }
! grep -q "not trusted (TLS)" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status still says the broker is not trusted"; }
# tallyd's check logged in as the consumer over AMQPS, verified.
grep -q "verified [1-9][0-9]* grant" "$W/once.err" || t_fail "tallyd verified no grant"
! grep -q -e "^app: unhealthy" -e "cannot log in" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "the check's consumer login over AMQPS failed"; }
[ "$(t_captured "$W/tls.pcap")" -ge 10 ] ||
	t_fail "the capture holds $(t_captured "$W/tls.pcap") packets: it proves nothing"
strings -n 6 "$W/tls.pcap" >"$W/tls.txt"
! grep -qF -e "$B64" "$W/tls.txt" || t_fail "the admin's Basic credentials crossed the wire in clear over TLS"
! grep -qF -e "$TALLY_TEST_AMQP_PASSWORD" "$W/tls.txt" || t_fail "the admin password crossed the wire in clear over TLS"
! grep -qF -e "$VA" "$W/tls.txt" || t_fail "the vhost's name crossed the wire in clear over TLS"
t_ok "vhost $VA provisioned, its amqps url logs in verified (another CA refused); capture of $(t_captured "$W/tls.pcap") packets, none of the Basic credentials, the password or $VA in it"

t_check "the positive control: tls=off on the plaintext port carries the credentials in clear"
rmq_assign --set management-port="$TALLY_TEST_AMQP_MGMT_PORT" --set tls=off
tly apply "$(consumer app2)" >/dev/null
tly assign app2 node-a >/dev/null
t_capture "$W/plain.pcap" "$TALLY_TEST_AMQP_MGMT_PORT"
t_tallyd_try
t_capture_end
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once in plaintext exited $T_RC"; }
VB=$(t_gname app2/mq app2-mq)
strings -n 6 "$W/plain.pcap" >"$W/plain.txt"
grep -qF -e "$B64" "$W/plain.txt" ||
	t_fail "the plaintext capture holds no Basic credentials: the capture proves nothing"
grep -qF -e "$VB" "$W/plain.txt" ||
	t_fail "the plaintext capture holds no vhost name: the capture proves nothing"
tly status >"$W/st" 2>&1 || true
grep -q "reached at 127.0.0.1: plaintext" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the broker is reached in plaintext"; }
t_ok "plaintext capture holds the Basic credentials and $VB"

t_check "tls=require: the TLS port, not verified"
rmq_assign --set management-port="$TALLY_TEST_AMQP_MGMT_TLS_PORT" --set tls=require \
	--set ca="$TALLY_TEST_CA_OTHER"
tly apply "$(consumer app3)" >/dev/null
tly assign app3 node-a >/dev/null
t_tallyd_try
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once with tls=require exited $T_RC"; }
has_vhost "$(t_gname app3/mq app3-mq)" || t_fail "no vhost for app3 with tls=require"
tly status >"$W/st" 2>&1 || true
grep -q "reached at 127.0.0.1: TLS, not verified" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say TLS, not verified"; }
t_ok "app3 provisioned over TLS without verification; status says so"

t_check "the log verifies"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain intact"
