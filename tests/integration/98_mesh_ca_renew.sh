#!/bin/sh
# Renewal of the mesh CA's certificates (issue 25, item 3): at the CA's
# renewal point the rotator starts a rotation that keeps the name; the
# node makes a new key and asks for it while the module keeps the old
# certificate; the new certificate is written and acknowledged and the
# old one is left to expire, never revoked.  A holder that does not take
# its renewal is shown before its certificate expires.
. "$(dirname "$0")/lib.sh"

t_say "a home, two nodes, a CA whose certificates live 60 s, renewed at half"
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.2
tly apply "$TALLY_SRC/examples/mesh-ca.yaml" >/dev/null
tly assign mesh-ca node-a --expose network --set lifetime=60s --set renew-at=50 >/dev/null ||
	t_fail "assign mesh-ca failed"
cat >"$W/app.yaml" <<'YAML'
module: app
env: {TLS_CERT: "", TLS_KEY: "", TLS_CA: "", TLS_NOT_AFTER: ""}
requires:
  tls:
    type: x509-certificate
    from: mesh-ca
    sans: [app.mesh.test]
    env: {certificate: TLS_CERT, private-key: TLS_KEY, ca-cert: TLS_CA, not-after: TLS_NOT_AFTER}
YAML
tly apply "$W/app.yaml" >/dev/null
tly assign app node-b >/dev/null
G=app/tls
CN=$(t_gname app/tls app-tls)
ST=$W/agent-node-b.state

issued_line() {	# issued_line VERSION: the certificate.issued of that version
	tly log --json --type certificate.issued | grep "\"version\":$1[,}]" | tail -n 1
}

t_check "v1: key made on node-b, certificate issued, written, acknowledged"
t_tallyd_once
t_agent node-b
t_tallyd_once
t_agent node-b
t_tallyd_once
issued_line 1 >"$W/v1.json"
[ -s "$W/v1.json" ] || t_fail "no certificate for v1"
S1=$(t_jstr serial <"$W/v1.json")
. "$W/agent-node-b/app.env"
cp "$TLS_CERT" "$W/v1.pem"
cp "$TLS_CA" "$W/ca.pem"
NOTAFTER1=$TLS_NOT_AFTER
[ "$NOTAFTER1" = "$(date -u -d "$(openssl x509 -in "$W/v1.pem" -noout -enddate | cut -d= -f2)" +%Y-%m-%dT%H:%M:%SZ)" ] || t_fail "v1's not-after: $NOTAFTER1"
openssl verify -CAfile "$W/ca.pem" "$W/v1.pem" >/dev/null || t_fail "v1 does not verify"
K1=$(openssl x509 -in "$W/v1.pem" -noout -pubkey)
RENEW=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["body"]["renew_at"])' <"$W/v1.json")
NA1=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["body"]["not_after"])' <"$W/v1.json")
[ $((NA1 - RENEW)) -ge 28 ] && [ $((NA1 - RENEW)) -le 32 ] ||
	t_fail "renew_at $RENEW is not half-way to not_after $NA1"
tly log --json --type credential.acknowledged | grep -q '"version":1' || t_fail "v1 not acknowledged"
tly crl node-a/mesh-ca >"$W/crl1.pem" || t_fail "no CRL after the CA's first certificate"
openssl crl -in "$W/crl1.pem" -CAfile "$W/ca.pem" -noout 2>"$W/crl.err" || t_fail "the CRL does not verify: $(cat "$W/crl.err")"
openssl crl -in "$W/crl1.pem" -noout -text >"$W/crl1.txt"
grep -q "No Revoked Certificates" "$W/crl1.txt" || t_fail "CRL 1: $(cat "$W/crl1.txt")"
grep -A1 "X509v3 CRL Number" "$W/crl1.txt" | grep -q "^ *1$" || t_fail "CRL 1's number: $(cat "$W/crl1.txt")"
# Current until the CA expires: a copied file does not lapse, and an
# idle mesh has nothing to republish.
[ "$(openssl crl -in "$W/crl1.pem" -noout -nextupdate | cut -d= -f2)" = \
  "$(openssl x509 -in "$W/ca.pem" -noout -enddate | cut -d= -f2)" ] ||
	t_fail "CRL 1's next update is not the CA's not-after"
t_ok "serial $S1, renewal recorded at not_after - $((NA1 - RENEW)) s; CRL 1 published, empty, signed by the CA"

t_check "before the renewal point nothing starts"
t_tallyd_once
if tly log --json --type rotation.started | grep -q "$G"; then t_fail "a rotation before the renewal point"; fi
t_ok "no rotation"

t_check "at the renewal point the rotator starts it; the node keeps v1's files while v2 awaits"
NOW=$(date +%s)
[ "$NOW" -lt "$RENEW" ] && sleep $((RENEW - NOW + 1))
t_tallyd_once
tly log --json --type rotation.started | grep -q '"reason":"schedule"' ||
	t_fail "no scheduled rotation: $(tly log --json --type rotation.started)"
tly log --json --type credential.delivered | grep -q '"version":2' || t_fail "v2 not delivered"
t_agent node-b
ls "$ST"/*.v2.key >/dev/null 2>&1 || t_fail "no v2 key on node-b: $(ls "$ST")"
ls "$ST"/*.v1.cert >/dev/null 2>&1 || t_fail "v1's certificate gone while v2 awaits"
. "$W/agent-node-b/app.env"
cmp -s "$TLS_CERT" "$W/v1.pem" || t_fail "the module's certificate changed before v2's came"
[ -f "$TLS_KEY" ] || t_fail "the module's key is gone while v2 awaits"
# Another write of the module meanwhile (a restart's catch-up) keeps it.
rm -f "$W/agent-node-b/app.env"
t_agent node-b
[ -f "$W/agent-node-b/app.env" ] || t_fail "app.env not written back while v2 awaits"
. "$W/agent-node-b/app.env"
cmp -s "$TLS_CERT" "$W/v1.pem" || t_fail "written back without v1's certificate"
grep -q "app/tls v2: key made on this node; its certificate is asked for in the report" "$W/agent-node-b.log" ||
	t_fail "agent: $(tail -n 5 "$W/agent-node-b.log")"
t_ok "v2's key made, v1's certificate still the module's (also when written again)"

t_check "v2 is signed for the same name, written, acknowledged; the rotation completes"
# Signed through the fault-injecting wrapper (a rule on another
# operation): the CA's handle is the wrapper's there.
TALLY_FAULT="revoke:fail" "$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG" ||
	{ tail -n 5 "$T_DLOG" >&2; t_fail "tallyd --once under TALLY_FAULT failed"; }
issued_line 2 >"$W/v2.json"
[ -s "$W/v2.json" ] || t_fail "no certificate for v2"
S2=$(t_jstr serial <"$W/v2.json")
[ "$S2" != "$S1" ] || t_fail "the same serial twice"
t_agent node-b
t_tallyd_once
. "$W/agent-node-b/app.env"
cp "$TLS_CERT" "$W/v2.pem"
[ "$(openssl x509 -in "$W/v2.pem" -noout -serial | cut -d= -f2)" = "$S2" ] || t_fail "the module's certificate is not v2's"
[ "$TLS_NOT_AFTER" = "$(date -u -d "$(openssl x509 -in "$W/v2.pem" -noout -enddate | cut -d= -f2)" +%Y-%m-%dT%H:%M:%SZ)" ] && [ "$TLS_NOT_AFTER" != "$NOTAFTER1" ] ||
	t_fail "not-after after the renewal: $TLS_NOT_AFTER (v1's $NOTAFTER1)"
[ "$(openssl x509 -in "$W/v2.pem" -noout -subject)" = "subject=CN = $CN" ] || t_fail "the name changed: $(openssl x509 -in "$W/v2.pem" -noout -subject)"
[ "$(openssl x509 -in "$W/v2.pem" -noout -pubkey)" != "$K1" ] || t_fail "v2 is for v1's key"
[ "$(openssl pkey -in "$TLS_KEY" -pubout)" = "$(openssl x509 -in "$W/v2.pem" -noout -pubkey)" ] || t_fail "the key is not v2's"
openssl verify -CAfile "$W/ca.pem" "$W/v2.pem" >/dev/null || t_fail "v2 does not verify"
openssl verify -CAfile "$W/ca.pem" "$W/v1.pem" >/dev/null || t_fail "v1 no longer verifies before its not-after"
tly log --json --type rotation.completed | grep -q "$G" || t_fail "the rotation did not complete"
tly log --json --type credential.retired | grep -q '"version":1' || t_fail "v1 not retired"
if ls "$ST"/*.v1.* >/dev/null 2>&1; then t_fail "v1's key or certificate left in the agent's state: $(ls "$ST")"; fi
if ls "$ST"/*.shown.sealed >/dev/null 2>&1; then t_fail "the shown delivery left in the agent's state"; fi
t_ok "serial $S2 for CN=$CN, a new key; v1 still verifies; v1's state gone from the node"

t_check "a holder that does not take its renewal is shown before its certificate expires"
tly rotate "$G" >/dev/null
t_tallyd_once
NA2=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["body"]["not_after"])' <"$W/v2.json")
tly status >"$W/status.out" || true
grep -q "certificate of app@node-b for $G (serial $S2, v2) expires at .*: it has not taken v3" "$W/status.out" ||
	t_fail "status: $(cat "$W/status.out")"
tly status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
e = [c for c in d["attention"]["certificates"] if c["holder"] == "app@node-b"]
assert e and e[0]["serial"] == sys.argv[1] and e[0]["not_after"] == int(sys.argv[2]) and e[0]["wanted"] == 3, e' "$S2" "$NA2" ||
	t_fail "status --json: no such entry"
t_ok "tally status names holder, serial and expiry"

t_check "the holder takes v3; then nothing is shown"
t_agent node-b
t_tallyd_once
t_agent node-b
t_tallyd_once
S3=$(issued_line 3 | t_jstr serial)
[ -n "$S3" ] || t_fail "no certificate for v3"
tly status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert not d["attention"].get("certificates"), d["attention"]' || t_fail "still shown after v3 was taken"
t_ok "serial $S3 taken; nothing shown"

t_check "a revocation lists the certificates that stay valid until their not-after"
tly remove app --yes >/dev/null || t_fail "tally remove app failed"
t_tallyd_once
t_agent node-b
tly status >"$W/status.out" || true
grep -q "revoked $G on node-a/mesh-ca: the certificates already issued stay valid until they expire" "$W/status.out" ||
	t_fail "no residual: $(cat "$W/status.out")"
for s in "$S2" "$S3"; do
	grep -q "serial $s (app@node-b, v[23]) valid until" "$W/status.out" || t_fail "serial $s not listed: $(cat "$W/status.out")"
done
if grep -q "serial $S1 " "$W/status.out"; then
	NOW=$(date +%s)
	[ "$NOW" -lt "$NA1" ] || t_fail "serial $S1 listed after its not-after"
fi
[ ! -e "$W/agent-node-b/app.env" ] || t_fail "app.env left after the revocation"
if ls "$ST"/*.key "$ST"/*.cert >/dev/null 2>&1; then t_fail "keys or certificates left in the agent's state: $(ls "$ST")"; fi
t_ok "serials $S2 and $S3 listed with their not-after; the node forgot its keys"

t_check "the CRL lists them at once: openssl refuses them with it, not without"
tly crl node-a/mesh-ca >"$W/crl2.pem" || t_fail "no CRL"
openssl crl -in "$W/crl2.pem" -CAfile "$W/ca.pem" -noout 2>"$W/crl.err" || t_fail "the CRL does not verify: $(cat "$W/crl.err")"
openssl crl -in "$W/crl2.pem" -noout -text >"$W/crl2.txt"
for s in "$S2" "$S3"; do
	grep -q "Serial Number: $s" "$W/crl2.txt" || t_fail "serial $s not in the CRL: $(cat "$W/crl2.txt")"
done
grep -A1 "X509v3 CRL Number" "$W/crl2.txt" | grep -q "^ *2$" || t_fail "CRL 2's number: $(cat "$W/crl2.txt")"
tly log --json --type certificate.crl | tail -n 1 | grep -q '"serials":\[' || t_fail "certificate.crl without serials"
openssl verify -CAfile "$W/ca.pem" "$W/v2.pem" >/dev/null || t_fail "v2 does not verify without the CRL"
cat "$W/ca.pem" "$W/crl2.pem" >"$W/chain-crl.pem"
if openssl verify -crl_check -CAfile "$W/chain-crl.pem" "$W/v2.pem" >"$W/crlv.out" 2>&1; then
	t_fail "v2 verified against the CRL"
fi
grep -q "certificate revoked" "$W/crlv.out" || t_fail "openssl: $(cat "$W/crlv.out")"
t_tallyd_once
[ "$(tly log --json --type certificate.crl | wc -l)" -eq 2 ] || t_fail "a CRL published again with nothing new"
t_ok "CRL 2 lists $S2 and $S3; openssl -crl_check: certificate revoked; nothing republished idle"

t_check "no list for what is not a CA; the record rebuilds to the same projections"
t_expect_exit 3 "tally crl of no CA" tly crl node-b/nothing
grep -q "no revocation list for node-b/nothing" "$W/last.err" || t_fail "crl: $(cat "$W/last.err")"
tly verify >/dev/null || t_fail "tally verify"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: the folds are not the record's"
t_ok "exit 3, said; verify and rebuild --check hold"
