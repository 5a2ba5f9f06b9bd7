#!/bin/sh
# tallyd reaches a Ceph RGW over https, verified against the provider's
# ca, and refuses an RGW it cannot verify before it sends a signed
# request.
#
# Against the harness's radosgw (tests/harness/ceph.sh: beast's
# ssl_endpoint, a certificate of tests/harness/ca.sh's CA):
#   - tls=verify with no ca is refused with how to give one;
#   - ca=another CA: refused naming "certificate verify failed", no
#     bucket made, tally status says "not trusted (TLS)" and the reason;
#   - an impostor on the port, its certificate of another CA for
#     127.0.0.1, or of the right CA for another host name, with
#     tls=verify and the right ca: refused naming "certificate verify
#     failed" (and the host name), the impostor received nothing (no
#     request, not the admin's access key), status says "not trusted
#     (TLS)" and why;
#   - tls=verify with ca=CA on the TLS port: a bucket is provisioned and
#     delivered with an https endpoint and the field ca (the provider's
#     CA as the file the node writes), whose keys write and read it (curl --cacert,
#     SigV4), and a consumer trusting another CA is refused by curl;
#     status says "TLS, verified"; a capture of
#     the TLS port holds neither the admin's access key nor the
#     consumer's secret key, nor the bucket's name;
#   - the positive control: a second provider on the plaintext port
#     (tls off) carries the admin's access key and the bucket's name in
#     clear;
#   - an https endpoint setting alone (tls unset) is verified TLS.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"

t_ceph_start
AK=$TALLY_TEST_RGW_ACCESS
TP=$TALLY_TEST_RGW_TLS_PORT

# s3 ENVFILE METHOD PATH [DATA]: the HTTP status of a SigV4 request as
# the env file's consumer, at its delivered endpoint, trusting the
# harness CA (or $S3CA); the keys go through a curl config file, never
# argv.
s3() {
	umask 077
	printf 'user = "%s:%s"\n' "$(t_envget "$1" S3_ACCESS_KEY)" \
		"$(t_envget "$1" S3_SECRET_KEY)" >"$W/curl.cfg"
	curl -s -K "$W/curl.cfg" --cacert "${S3CA:-$TALLY_TEST_CA}" \
		--aws-sigv4 aws:amz:default:s3 \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X "$2" \
		${4:+--data-binary "$4"} -o "$W/s3.out" -w '%{http_code}' \
		"$(t_envget "$1" S3_ENDPOINT)$3"
	rm -f "$W/curl.cfg"
}

mkdir -p "$W/manifests"
for p in store store2; do
	cat >"$W/manifests/$p.yaml" <<EOF
module: $p
provides:
  s3-bucket:
    driver: ceph-rgw
EOF
done
consumer() {	# NAME [PROVIDER]
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {S3_ENDPOINT: "", S3_BUCKET: "", S3_ACCESS_KEY: "", S3_SECRET_KEY: "", S3_CA: ""}
requires:
  files:
    type: s3-bucket
    from: ${2:-store}
    env: {endpoint: S3_ENDPOINT, bucket: S3_BUCKET, access-key: S3_ACCESS_KEY, secret-key: S3_SECRET_KEY, ca: S3_CA}
EOF
	echo "$W/manifests/$1.yaml"
}
msg() { grep -v 'fence:' "$W/once.err" | grep -m1 "$1" | sed 's/^.* \(warn\|error\|info\): //' | cut -c1-220; }
store_assign() {	# MODULE SETTINGS...
	_m=$1; shift
	tly assign "$_m" node-a --expose network --set host=127.0.0.1 \
		--set admin-access-key="$AK" "$@" \
		--secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" >/dev/null ||
		t_fail "tally assign $_m $*"
}

t_say "a Ceph RGW with an https endpoint on $TP; the provider store on node-a"
t_init
t_node node-a 127.0.0.1
tly apply "$W/manifests/store.yaml" >/dev/null
tly apply "$(consumer app)" >/dev/null

t_check "tls=verify without ca: refused, saying how to give one"
store_assign store --set port="$TP" --set tls=verify
tly assign app node-a >/dev/null
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once connected with tls=verify and no ca"
grep -v "fence:" "$W/once.err" | grep "no ca" | grep -q -- "--set ca=FILE" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "no word on the missing ca"; }
t_ok "$(msg 'no ca')"

t_check "an RGW whose certificate chains to another CA: refused before a signed request"
store_assign store --set ca="$TALLY_TEST_CA_OTHER"
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted an RGW of another CA"
grep -q "certificate verify failed" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not name the failed verification"; }
tly grants >"$W/grants" 2>&1 || true
! grep -q "provisioned" "$W/grants" ||
	{ cat "$W/grants" >&2; t_fail "a bucket was provisioned through an unverified RGW"; }
tly status >"$W/st" 2>&1 || true
grep "not trusted (TLS)" "$W/st" | grep -q "certificate verify failed" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the RGW is not trusted, with the reason"; }
t_ok "$(msg 'certificate verify failed')"

# impostor WHAT CERT KEY: the RGW's port at an impostor presenting CERT,
# with tls=verify and the harness CA.
impostor() {
	t_impostor "$2" "$3"
	store_assign store --set port="$T_IMP_PORT" --set ca="$TALLY_TEST_CA"
	t_tallyd_try
	t_impostor_end
	[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted $1"
	grep -q "certificate verify failed" "$W/once.err" ||
		{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not name the failed verification of $1"; }
	t_impostor_seen ||
		{ cat "$W/impostor.out" >&2; t_fail "the impostor saw no handshake: the test proves nothing"; }
	! grep -qi -e "authorization" -e "HTTP/1" "$W/impostor.out" ||
		t_fail "$1 received a request"
	! grep -qF -e "$AK" "$W/impostor.out" || t_fail "$1 received the admin's access key"
	tly grants >"$W/grants" 2>&1 || true
	! grep -q "provisioned" "$W/grants" ||
		{ cat "$W/grants" >&2; t_fail "a bucket was provisioned through $1"; }
	tly status >"$W/st" 2>&1 || true
	grep "not trusted (TLS)" "$W/st" | grep -q "certificate verify failed" ||
		{ cat "$W/st" >&2; t_fail "tally status does not say the RGW is not trusted, with the reason"; }
}

t_check "an impostor presenting another CA's certificate for 127.0.0.1: refused, it gets nothing"
impostor "an impostor of another CA" "$TALLY_TEST_CA_IMPOSTOR_CERT" "$TALLY_TEST_CA_IMPOSTOR_KEY"
t_ok "$(msg 'certificate verify failed')"

t_check "a server presenting the right CA's certificate for another host: refused, it gets nothing"
impostor "a certificate for another host" "$TALLY_TEST_CA_WRONGHOST_CERT" "$TALLY_TEST_CA_WRONGHOST_KEY"
grep -qi "certificate verify failed.*\(host name\|hostname\|subject name\)" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not say the host name does not match"; }
t_ok "$(msg 'certificate verify failed')"

t_check "tls=verify with the right CA: provisioned at an https endpoint; nothing in clear on the wire"
store_assign store --set port="$TP" --set ca="$TALLY_TEST_CA"
t_capture "$W/tls.pcap" "$TP"
t_tallyd_try
[ $T_RC -eq 0 ] || { t_capture_end; tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once over verified TLS exited $T_RC"; }
F=$(t_envfile node-a app)
B=$(t_envget "$F" S3_BUCKET)
[ "$(t_envget "$F" S3_ENDPOINT)" = "https://127.0.0.1:$TP" ] ||
	t_fail "app's endpoint is $(t_envget "$F" S3_ENDPOINT), expected https://127.0.0.1:$TP"
# The field ca is the node's CA file once delivery writes one; here "",
# and the consumer is given the harness CA's file.
S3CA=$(t_envget "$F" S3_CA)
[ -n "$S3CA" ] && cmp -s "$S3CA" "$TALLY_TEST_CA" ||
	t_fail "S3_CA is '$S3CA', not a file of the provider's CA"
[ "$(s3 "$F" PUT "/$B/hello" hello-over-tls)" = 200 ] || t_fail "the consumer cannot write its bucket over TLS: $(cat "$W/s3.out")"
# No HTTP answer (000) for a consumer trusting another CA: curl refused
# the gateway it just reached with the right one.
_s=$(S3CA=$TALLY_TEST_CA_OTHER s3 "$F" GET "/$B/hello" || true)
[ "$_s" = 000 ] || t_fail "a consumer trusting another CA was not refused by curl (status $_s)"
[ "$(s3 "$F" GET "/$B/hello")" = 200 ] && grep -q hello-over-tls "$W/s3.out" ||
	t_fail "the consumer cannot read its bucket over TLS: $(cat "$W/s3.out")"
t_capture_end
tly status >"$W/st" 2>&1 || true
grep -q "reached at 127.0.0.1: TLS, verified" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the RGW is reached by verified TLS"; }
[ "$(t_captured "$W/tls.pcap")" -ge 10 ] ||
	t_fail "the capture holds $(t_captured "$W/tls.pcap") packets: it proves nothing"
strings -n 6 "$W/tls.pcap" >"$W/tls.txt"
! grep -qF -e "$AK" "$W/tls.txt" || t_fail "the admin's access key crossed the wire in clear over TLS"
! grep -qF -e "$(cat "$TALLY_TEST_RGW_SECRETFILE")" "$W/tls.txt" || t_fail "the admin's secret key crossed the wire in clear over TLS"
! grep -qF -e "$(t_envget "$F" S3_SECRET_KEY)" "$W/tls.txt" || t_fail "the consumer's secret key crossed the wire in clear over TLS"
! grep -qF -e "$B" "$W/tls.txt" || t_fail "the bucket's name crossed the wire in clear over TLS"
t_ok "bucket $B at https://127.0.0.1:$TP, written and read by its keys; capture of $(t_captured "$W/tls.pcap") packets, none of the keys or $B in it"

t_check "the positive control: a provider on the plaintext port carries the access key and the names in clear"
tly apply "$W/manifests/store2.yaml" >/dev/null
store_assign store2 --set port="$TALLY_TEST_RGW_PORT"
tly apply "$(consumer app2 store2)" >/dev/null
tly assign app2 node-a >/dev/null
t_capture "$W/plain.pcap" "$TALLY_TEST_RGW_PORT"
t_tallyd_try
t_capture_end
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once in plaintext exited $T_RC"; }
F2=$(t_envfile node-a app2)
[ "$(t_envget "$F2" S3_ENDPOINT)" = "http://127.0.0.1:$TALLY_TEST_RGW_PORT" ] ||
	t_fail "app2's endpoint is $(t_envget "$F2" S3_ENDPOINT): the plaintext endpoint changed"
strings -n 6 "$W/plain.pcap" >"$W/plain.txt"
grep -qF -e "$AK" "$W/plain.txt" ||
	t_fail "the plaintext capture holds no admin access key: the capture proves nothing"
grep -qF -e "$(t_envget "$F2" S3_BUCKET)" "$W/plain.txt" ||
	t_fail "the plaintext capture holds no bucket name: the capture proves nothing"
t_ok "plaintext capture holds $AK and $(t_envget "$F2" S3_BUCKET); app2's endpoint stays http"

t_check "an https endpoint setting alone is verified TLS"
store_assign store2 --set endpoint="$TALLY_TEST_RGW_TLS_ENDPOINT" --set ca="$TALLY_TEST_CA_OTHER"
t_tallyd_try
[ $T_RC -ne 0 ] && grep -q "certificate verify failed" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "an https endpoint was not verified against ca"; }
store_assign store2 --set ca="$TALLY_TEST_CA"
t_tallyd_try
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once at the https endpoint exited $T_RC"; }
tly status >"$W/st" 2>&1 || true
grep "store2" "$W/st" | grep -q "reached at localhost: TLS, verified" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say store2 is reached at localhost by verified TLS"; }
t_ok "another CA refused at $TALLY_TEST_RGW_TLS_ENDPOINT, the harness CA verified"

t_check "the log verifies"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain intact"
