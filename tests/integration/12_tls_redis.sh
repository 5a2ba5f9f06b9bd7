#!/bin/sh
# tallyd reaches Redis over TLS (drivers/redis_conn.c: OpenSSL under
# hiredis's protocol code), verified against the provider's ca, and
# refuses a server it cannot verify before it sends anything.
#
# Against the harness's Redis (tests/harness/redis.sh: a plaintext port
# and a TLS port, certificates of tests/harness/ca.sh), the provider
# reached at localhost:
#   - a server whose certificate chains to another CA (ca=the other CA)
#     is refused: tallyd --once fails naming "certificate verify
#     failed", no user is made (not even the driver's tally:rules: no
#     command reached the server), and status says the provider is "not
#     trusted (TLS)" with the reason;
#   - tls=verify with no ca is refused with how to give one;
#   - tls=verify with ca=CA at the TLS port: a grant is provisioned and
#     rotated; the delivered credential logs in with redis-cli --tls
#     --cacert CA; the delivered uri is rediss://... to the TLS port,
#     tls "true", ca the provider's CA as the file the node writes, and
#     redis-cli --tls --cacert CA-FILE -u
#     URI logs in verifying the server (trusting another CA: refused);
#     status says the provider is reached by verified TLS;
#     a capture of the TLS port during the run (tcpdump on lo) holds
#     neither the admin password nor the issued user's name;
#   - the positive control: the same server's plaintext port, tls=off,
#     as a provider on a second node, captured the same way, carries the
#     new user's name and the admin password.
. "$(dirname "$0")/lib.sh"

command -v tcpdump >/dev/null || t_fail "tcpdump is not installed (tools/deps.sh installs it)"
command -v redis-cli >/dev/null || t_fail "redis-cli is missing (tools/deps.sh)"


t_redis_start
RP=$TALLY_TEST_REDIS_PORT
TP=$TALLY_TEST_REDIS_TLS_PORT
RPW=$(cat "$TALLY_TEST_REDIS_PWFILE")
[ -n "$TP" ] || t_fail "redis.sh wrote no TALLY_TEST_REDIS_TLS_PORT"
radm() { redis-cli -h 127.0.0.1 -p "$RP" --user admin --pass "$RPW" --no-auth-warning "$@"; }
users() { radm ACL USERS | grep -v -x -e admin -e default | sort; }

# consumer NAME: one redis-user requirement "cache" -> R_*.
consumer() {
	mkdir -p "$W/manifests"
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {R_HOST: "", R_PORT: "", R_USER: "", R_PASSWORD: "", R_URI: "", R_TLS: "", R_CA: ""}
requires:
  cache:
    type: redis-user
    from: redis
    env: {host: R_HOST, port: R_PORT, user: R_USER, password: R_PASSWORD, uri: R_URI, tls: R_TLS, ca: R_CA}
EOF
	echo "$W/manifests/$1.yaml"
}

t_say "Redis with TLS (harness CA) on port $TP, plaintext on $RP; the provider at localhost"
t_init
t_node node-a localhost
tly apply "$TALLY_SRC/examples/redis.yaml" >/dev/null || t_fail "tally apply redis.yaml failed"
rd_assign() {
	tly assign redis node-a --set host=localhost --set admin-user=admin "$@" \
		--secret admin-password <"$TALLY_TEST_REDIS_PWFILE" >/dev/null ||
		t_fail "tally assign redis $*"
}

t_check "a server whose certificate chains to another CA: refused before anything is sent"
rd_assign --set port="$TP" --set tls=verify --set ca="$TALLY_TEST_CA_OTHER"
tly apply "$(consumer app)" >/dev/null || t_fail "tally apply app failed"
tly assign app node-a >/dev/null || t_fail "tally assign app failed"
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted a Redis of another CA"
grep -q "certificate verify failed" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not name the failed verification"; }
[ -z "$(users)" ] ||
	t_fail "users were made through an unverified server: $(users | tr '\n' ' ')"
tly status >"$W/st" 2>&1 || true
grep "not trusted (TLS)" "$W/st" | grep -q "certificate verify failed" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the provider is not trusted, and why"; }
t_ok "$(grep -m1 'not trusted (TLS)' "$W/st" | sed 's/^ *//' | cut -c1-200)"

t_check "tls=verify without ca: refused, saying how to give one"
tly assign redis node-a --unset ca >/dev/null || t_fail "tally assign redis --unset ca"
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once connected with tls=verify and no ca"
grep "no ca" "$W/once.err" | grep -q -- "--set ca=FILE" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "no word on the missing ca"; }
[ -z "$(users)" ] || t_fail "users were made with tls=verify and no ca"
t_ok "$(grep -m1 'no ca' "$W/once.err" | sed 's/^.* \(warn\|error\|info\): //' | cut -c1-160)"

t_check "tls=verify with the right CA: provisioned and rotated; the credential logs in over TLS; nothing in clear"
rd_assign --set ca="$TALLY_TEST_CA"
t_capture "$W/tls.pcap" "$TP"
t_tallyd_try
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once over verified TLS exited $T_RC"; }
E=$(t_envfile node-a app)
U=$(t_envget "$E" R_USER)
P=$(t_envget "$E" R_PASSWORD)
[ -n "$U" ] && [ -n "$P" ] || t_fail "no R_USER/R_PASSWORD delivered"
[ "$(t_envget "$E" R_PORT)" = "$TP" ] || t_fail "the delivered port is $(t_envget "$E" R_PORT), not the TLS port $TP"
tly rotate app/cache >/dev/null || t_fail "tally rotate app/cache failed"
t_tallyd_try
t_capture_end
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once (rotation) over verified TLS exited $T_RC"; }
E=$(t_envfile node-a app)
P2=$(t_envget "$E" R_PASSWORD)
[ -n "$P2" ] && [ "$P2" != "$P" ] || t_fail "the rotation delivered no new password"
for pw in "$P" "$P2"; do
	out=$(redis-cli --tls --cacert "$TALLY_TEST_CA" -h localhost -p "$TP" \
		--user "$U" --pass "$pw" --no-auth-warning PING 2>&1)
	[ "$out" = PONG ] || t_fail "the delivered credential does not log in over TLS: $out"
done
URI=$(t_envget "$E" R_URI)
case $URI in
"rediss://$U:"*"@localhost:$TP" | "rediss://$U:"*"@127.0.0.1:$TP") ;;
*) t_fail "the delivered uri is not rediss:// to the TLS port: $(printf '%s' "$URI" | sed 's/:[^:@]*@/:***@/')" ;;
esac
[ "$(t_envget "$E" R_TLS)" = true ] || t_fail "R_TLS is $(t_envget "$E" R_TLS), not true"
# The field ca is the node's CA file once delivery writes one; here "",
# and the consumer is given the harness CA's file.
RCA=$(t_envget "$E" R_CA)
[ -n "$RCA" ] && cmp -s "$RCA" "$TALLY_TEST_CA" ||
	t_fail "R_CA is '$RCA', not a file of the provider's CA"
out=$(redis-cli --tls --cacert "$RCA" -u "$URI" --no-auth-warning PING 2>&1)
[ "$out" = PONG ] || t_fail "the delivered uri does not log in with redis-cli --tls: $out"
out=$(redis-cli --tls --cacert "$TALLY_TEST_CA_OTHER" -u "$URI" --no-auth-warning PING 2>&1) || true
[ "$out" != PONG ] || t_fail "redis-cli trusting another CA logged in: the client verifies nothing"
out=$(redis-cli --tls --cacert "$TALLY_TEST_CA" -h localhost -p "$TP" \
	--user "$U" --pass wrong-password --no-auth-warning PING 2>&1) || true
[ "$out" != PONG ] || t_fail "a wrong password logs in: the login check proves nothing"
tly status >"$W/st" 2>&1 || true
grep -q "reached at localhost: TLS, verified" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the provider is reached by verified TLS"; }
! grep -q "not trusted (TLS)" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status still says the provider is not trusted"; }
strings -n 6 "$W/tls.pcap" >"$W/tls.txt"
[ -s "$W/tls.pcap" ] && [ "$(wc -c <"$W/tls.pcap")" -gt 2000 ] ||
	t_fail "the capture of the TLS port is (nearly) empty: it proves nothing"
! grep -q -e "$U" "$W/tls.txt" || t_fail "the issued user's name crossed the wire in clear over TLS"
! grep -q -e "$RPW" "$W/tls.txt" || t_fail "the admin password crossed the wire in clear over TLS"
! grep -q "tally:owner" "$W/tls.txt" || t_fail "the driver's marks crossed the wire in clear over TLS"
t_ok "$U provisioned and rotated, both passwords log in with redis-cli --tls; capture $(wc -c <"$W/tls.pcap") bytes, neither $U nor the admin password in it"

# The same server's plaintext port as a provider on a second node: a
# consumer keeps the port it was given, so node-a's stays on TLS.
t_check "the positive control: tls=off at the plaintext port carries the name and the admin password in clear"
t_node node-b localhost
tly assign redis node-b --set host=localhost --set admin-user=admin \
	--set port="$RP" --set tls=off \
	--secret admin-password <"$TALLY_TEST_REDIS_PWFILE" >/dev/null ||
	t_fail "tally assign redis node-b"
tly apply "$(consumer app2)" >/dev/null || t_fail "tally apply app2 failed"
tly assign app2 node-b >/dev/null || t_fail "tally assign app2 failed"
t_capture "$W/plain.pcap" "$RP"
t_tallyd_try
t_capture_end
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once in plaintext exited $T_RC"; }
U2=$(t_envget "$(t_envfile node-b app2)" R_USER)
[ -n "$U2" ] || t_fail "no R_USER delivered to app2"
case $(t_envget "$(t_envfile node-b app2)" R_URI) in
redis://*) ;;
*) t_fail "app2's uri under tls=off is not redis://" ;;
esac
[ "$(t_envget "$(t_envfile node-b app2)" R_TLS)" = false ] || t_fail "app2's R_TLS is not false"
strings -n 6 "$W/plain.pcap" >"$W/plain.txt"
grep -q -e "$U2" "$W/plain.txt" ||
	t_fail "the plaintext capture holds no user name: the capture proves nothing"
grep -q -e "$RPW" "$W/plain.txt" ||
	t_fail "the plaintext capture holds no admin password: the capture proves nothing"
tly status >"$W/st" 2>&1 || true
grep -q "reached at localhost: plaintext" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the provider is reached in plaintext"; }
t_ok "plaintext capture holds $U2 and the admin password"

t_check "the log verifies"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain intact"
