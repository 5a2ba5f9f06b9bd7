#!/bin/sh
# tallyd reaches an OpenID Connect provider at an https issuer verified
# against the provider's ca (or the system's CAs), and refuses an issuer
# it cannot verify before it sends the initial access token.
#
# Against the harness's provider (tests/harness/oidc.sh: the same
# clients at an https issuer, a certificate of tests/harness/ca.sh's CA):
#   - an https issuer with no ca: verified against the system's CAs,
#     which do not know the harness CA: refused, "certificate verify
#     failed";
#   - ca=another CA: refused the same way, nothing registered, tally
#     status says "not trusted (TLS)" and the reason;
#   - ca=CA: a client is registered and its delivered values get a
#     token (curl --cacert); status says "TLS, verified"; a capture of
#     the TLS port holds neither the initial access token, nor the
#     client's secret, nor its name;
#   - the positive control: a second provider at the http issuer
#     (loopback, tls off) carries the initial access token and the
#     client's name in clear;
#   - an https issuer with tls=off is refused as a contradiction;
#   - a plaintext port behind an https issuer, and a certificate of the
#     right CA for another host name, are refused.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || t_fail "node is missing (tools/deps.sh)"

OIDC_DIR=$W/oidc
_o_port=$((57350 + $$ % 50))
while _t_port_busy "$_o_port" || _t_port_busy $((_o_port + 1)); do _o_port=$((_o_port + 2)); done
_o_cleanup() {
	_o_rc=$?
	set +e
	sh "$TALLY_SRC/tests/harness/oidc.sh" stop "$OIDC_DIR" >/dev/null 2>&1
	(exit $_o_rc)
	_t_cleanup
}
trap _o_cleanup EXIT
sh "$TALLY_SRC/tests/harness/oidc.sh" start "$OIDC_DIR" "$_o_port" ||
	t_fail "the OIDC provider did not start (tests/harness/oidc.sh)"
. "$OIDC_DIR/env"
IAT=$(cat "$TALLY_TEST_OIDC_IATFILE")

mkdir -p "$W/manifests"
cat >"$W/manifests/idp.yaml" <<EOF
module: idp
provides:
  oidc-client:
    driver: oidc
    revoke: drop
EOF
cat >"$W/manifests/idp2.yaml" <<EOF
module: idp2
provides:
  oidc-client:
    driver: oidc
    revoke: drop
EOF
consumer() {	# NAME [PROVIDER]
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {O_ISSUER: "", O_ID: "", O_SECRET: "", O_TOKEN: "", O_CA: ""}
requires:
  login:
    type: oidc-client
    from: ${2:-idp}
    env: {issuer: O_ISSUER, client-id: O_ID, client-secret: O_SECRET, token-endpoint: O_TOKEN, ca: O_CA}
EOF
	echo "$W/manifests/$1.yaml"
}
msg() { grep -v 'fence:' "$W/once.err" | grep -m1 "$1" | sed 's/^.* \(warn\|error\|info\): //' | cut -c1-220; }
idp_assign() {	# [--module M] SETTINGS...
	_m=idp
	[ "$1" != --module ] || { _m=$2; shift 2; }
	tly assign "$_m" node-a --set token-lifetime=600s "$@" \
		--secret initial-access-token <"$TALLY_TEST_OIDC_IATFILE" >/dev/null ||
		t_fail "tally assign idp $*"
}

t_say "an identity provider with an https issuer ($TALLY_TEST_OIDC_TLS_ISSUER)"
t_init
t_node node-a 127.0.0.1
tly apply "$W/manifests/idp.yaml" >/dev/null
idp_assign --set issuer="$TALLY_TEST_OIDC_TLS_ISSUER"
tly apply "$(consumer app)" >/dev/null
tly assign app node-a >/dev/null

t_check "an https issuer and no ca: the system's CAs do not know it, refused"
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted an issuer the system's CAs do not know"
grep -q "certificate verify failed" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not name the failed verification"; }
t_ok "$(msg 'certificate verify failed')"

t_check "ca=another CA: refused before the initial access token is sent"
idp_assign --set ca="$TALLY_TEST_CA_OTHER"
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted an issuer of another CA"
grep -q "certificate verify failed" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not name the failed verification"; }
tly grants >"$W/grants" 2>&1 || true
! grep -q "provisioned" "$W/grants" ||
	{ cat "$W/grants" >&2; t_fail "a client was registered through an unverified issuer"; }
tly status >"$W/st" 2>&1 || true
grep "not trusted (TLS)" "$W/st" | grep -q "certificate verify failed" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the issuer is not trusted, with the reason"; }
t_ok "$(msg 'certificate verify failed')"

t_check "ca=CA: registered, the delivered values get a token; nothing in clear on the wire"
idp_assign --set ca="$TALLY_TEST_CA"
t_capture "$W/tls.pcap" "$TALLY_TEST_OIDC_TLS_PORT"
t_tallyd_try
t_capture_end
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once over verified TLS exited $T_RC"; }
F=$(t_envfile node-a app)
[ "$(t_envget "$F" O_ISSUER)" = "$TALLY_TEST_OIDC_TLS_ISSUER" ] ||
	t_fail "app's issuer is '$(t_envget "$F" O_ISSUER)'"
case $(t_envget "$F" O_TOKEN) in
"$TALLY_TEST_OIDC_TLS_ISSUER"/*) ;;
*) t_fail "the token endpoint $(t_envget "$F" O_TOKEN) is not the https issuer's" ;;
esac
# The field ca is the node's CA file once delivery writes one; here "",
# and the consumer is given the harness CA's file.
OCA=$(t_envget "$F" O_CA)
[ -n "$OCA" ] && cmp -s "$OCA" "$TALLY_TEST_CA" ||
	t_fail "O_CA is '$OCA', not a file of the provider's CA"
tok() {	# CAFILE: a token request with the delivered values, curl verifying
	umask 077
	printf 'user = "%s:%s"\n' "$(t_envget "$F" O_ID)" "$(t_envget "$F" O_SECRET)" >"$W/curl.cfg"
	curl -s -K "$W/curl.cfg" --cacert "$1" -d grant_type=client_credentials \
		"$(t_envget "$F" O_TOKEN)" >"$W/token.json"
	_rc=$?
	rm -f "$W/curl.cfg"
	return $_rc
}
tok "$OCA"
grep -q '"access_token"' "$W/token.json" || t_fail "the delivered values get no token: $(cat "$W/token.json")"
set +e; tok "$TALLY_TEST_CA_OTHER"; _c=$?; set -e
[ $_c -eq 60 ] || t_fail "a consumer trusting another CA was not refused by curl (exit $_c)"
tly status >"$W/st" 2>&1 || true
grep -q "reached at 127.0.0.1: TLS, verified" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the issuer is reached by verified TLS"; }
NAME=$(t_gname app/login app-login)
SECRET=$(t_envget "$F" O_SECRET)
[ "$(t_captured "$W/tls.pcap")" -ge 10 ] ||
	t_fail "the capture holds $(t_captured "$W/tls.pcap") packets: it proves nothing"
strings -n 6 "$W/tls.pcap" >"$W/tls.txt"
! grep -qF -e "$IAT" "$W/tls.txt" || t_fail "the initial access token crossed the wire in clear over TLS"
! grep -qF -e "$SECRET" "$W/tls.txt" || t_fail "the client secret crossed the wire in clear over TLS"
! grep -qF -e "$NAME" "$W/tls.txt" || t_fail "the client's name crossed the wire in clear over TLS"
t_ok "client $(t_envget "$F" O_ID) registered; capture of $(t_captured "$W/tls.pcap") packets, none of the token, the secret or $NAME in it"

t_check "the positive control: the http issuer carries the initial access token in clear"
tly apply "$W/manifests/idp2.yaml" >/dev/null
idp_assign --module idp2 --set issuer="$TALLY_TEST_OIDC_ISSUER"
tly apply "$(consumer app2 idp2)" >/dev/null
tly assign app2 node-a >/dev/null
t_capture "$W/plain.pcap" "$TALLY_TEST_OIDC_PORT"
t_tallyd_try
t_capture_end
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once in plaintext exited $T_RC"; }
strings -n 6 "$W/plain.pcap" >"$W/plain.txt"
grep -qF -e "$IAT" "$W/plain.txt" ||
	t_fail "the plaintext capture holds no initial access token: the capture proves nothing"
grep -qF -e "$(t_gname app2/login app2-login)" "$W/plain.txt" ||
	t_fail "the plaintext capture holds no client name: the capture proves nothing"
tly status >"$W/st" 2>&1 || true
grep "idp2" "$W/st" | grep -q "reached at 127.0.0.1: plaintext" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the issuer is reached in plaintext"; }
t_ok "plaintext capture holds the initial access token and $(t_gname app2/login app2-login)"

t_check "an https issuer with tls=off: refused as a contradiction"
idp_assign --set issuer="$TALLY_TEST_OIDC_TLS_ISSUER" --set tls=off
tly apply "$(consumer app3)" >/dev/null
tly assign app3 node-a >/dev/null
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once took an https issuer with tls=off"
grep -q "with tls=off" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not say why"; }
t_ok "$(msg 'with tls=off')"

t_check "an https issuer on the plaintext port: refused, the handshake failed"
idp_assign --set issuer="https://127.0.0.1:$TALLY_TEST_OIDC_PORT" --set tls=verify --set ca="$TALLY_TEST_CA"
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once took a plaintext port for TLS"
grep -q "not trusted (TLS): the TLS handshake failed" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not say the handshake failed"; }
t_ok "$(msg 'handshake failed')"

t_check "an issuer presenting a certificate for another host: refused"
# The provider again, its certificate the harness CA's for wrong.example
# (a private copy of the CA's directory: a shared one stays as it is).
OT=$(dirname "$TALLY_TEST_CA")
mkdir -p "$W/wrong-tls"
cp "$OT"/ca.pem "$OT"/ca.key "$OT"/other-ca.pem "$OT"/other-ca.key \
	"$OT"/impostor.pem "$OT"/impostor.key "$W/wrong-tls/"
cp "$TALLY_TEST_CA_WRONGHOST_CERT" "$W/wrong-tls/wrong-host.pem"
cp "$TALLY_TEST_CA_WRONGHOST_KEY" "$W/wrong-tls/wrong-host.key"
cp "$TALLY_TEST_CA_WRONGHOST_CERT" "$W/wrong-tls/oidc.pem"
cp "$TALLY_TEST_CA_WRONGHOST_KEY" "$W/wrong-tls/oidc.key"
sh "$TALLY_SRC/tests/harness/oidc.sh" stop "$OIDC_DIR" keep
TALLY_TEST_TLS_DIR=$W/wrong-tls sh "$TALLY_SRC/tests/harness/oidc.sh" start \
	"$OIDC_DIR" "$_o_port" "$TALLY_TEST_OIDC_TLS_PORT" ||
	t_fail "the OIDC provider did not restart with the wrong host's certificate"
idp_assign --set issuer="$TALLY_TEST_OIDC_TLS_ISSUER" --set tls=verify --set ca="$TALLY_TEST_CA"
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted a certificate for another host"
grep -qi "certificate verify failed.*host name\|certificate verify failed.*hostname" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not say the host name does not match"; }
t_ok "$(msg 'host')"

t_check "the log verifies"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain intact"
