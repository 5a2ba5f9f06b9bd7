#!/bin/sh
# The mesh CA as a provider (issue 25, item 1; drivers/ca.c): tally
# assign makes the CA through tallyd --prepare (tally links no libcrypto)
# or checks an organisation's pair; what is recorded is what openssl
# takes for a CA marked with the mesh id; the key is sealed in the log
# and nowhere in clear in the home; a second assignment, a manifest that
# does not say one-per-mesh, half a pair, another CA's key and a leaf
# are refused; a re-assign keeps the CA; a requirement of the type is
# refused at apply until certificates are issued.
. "$(dirname "$0")/lib.sh"

cert_of() {	# the ca-cert the log's last assignment event for $1 records
	tly log --json | python3 -c '
import json, sys
c = None
for l in sys.stdin:
    e = json.loads(l)
    if e["type"].startswith("assignment.") and e["body"].get("module") == sys.argv[1]:
        c = e["body"].get("settings", {}).get("ca-cert", c)
print(c or "", end="")' "$1"
}

t_say "a home, two nodes, the mesh CA module"
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.2
MESH=$(tly mesh | sed -n 's/^mesh \([0-9a-f]\{32\}\).*/\1/p')
[ ${#MESH} -eq 32 ] || t_fail "no mesh id: $(tly mesh)"

t_check "a module of driver ca must declare instances: one-per-mesh"
cat >"$W/loose.yaml" <<'YAML'
module: loose-ca
provides:
  x509-certificate:
    driver: ca
YAML
t_expect_exit 4 "apply of a ca module without instances" tly apply "$W/loose.yaml"
grep -q "loose.yaml:4:13: provides.x509-certificate.driver: driver ca is declared instances: one-per-mesh" "$W/last.err" ||
	t_fail "refusal: $(cat "$W/last.err")"
tly apply "$TALLY_SRC/examples/mesh-ca.yaml" >/dev/null
t_ok "refused at the line and field; examples/mesh-ca.yaml applied"

t_check "tally assign makes the CA: a P-256 CA named with the mesh id"
tly assign mesh-ca node-a >"$W/assign.out" || t_fail "assign mesh-ca failed"
grep -q "made the mesh CA CN=tally mesh CA $MESH, ECDSA P-256" "$W/assign.out" ||
	t_fail "assign said: $(cat "$W/assign.out")"
grep -q "ca-key: set (secret)" "$W/assign.out" || t_fail "no ca-key: $(cat "$W/assign.out")"
cert_of mesh-ca >"$W/ca.pem"
openssl x509 -in "$W/ca.pem" -noout -text >"$W/ca.txt" || t_fail "the recorded ca-cert does not parse"
grep -q "Subject: CN = tally mesh CA $MESH" "$W/ca.txt" || t_fail "subject: $(grep Subject: "$W/ca.txt")"
grep -q "CA:TRUE, pathlen:0" "$W/ca.txt" || t_fail "not a CA: $(cat "$W/ca.txt")"
grep -q "Certificate Sign, CRL Sign" "$W/ca.txt" || t_fail "key usage: $(cat "$W/ca.txt")"
grep -q "prime256v1" "$W/ca.txt" || t_fail "not P-256"
openssl verify -CAfile "$W/ca.pem" "$W/ca.pem" >/dev/null || t_fail "openssl verify of the CA"
t_ok "recorded; openssl: CA:TRUE pathlen 0, keyCertSign, P-256, self-verified"

t_check "its key is sealed: nowhere in clear in the home, redacted in the log"
if grep -rqa "PRIVATE KEY" "$TALLY_HOME"; then t_fail "a private key in clear in the home"; fi
tly log --json | grep -q '"ca-key":"<redacted>"' || t_fail "ca-key not redacted in tally log --json"
t_ok "no PEM key in the home; the log shows <redacted>"

t_check "a re-assign keeps the CA; a second one elsewhere is refused"
tly assign mesh-ca node-a --set lifetime=12h >"$W/re.out" || t_fail "re-assign failed"
grep -q "lifetime: set to 12h" "$W/re.out" || t_fail "re-assign: $(cat "$W/re.out")"
if grep -q "ca-cert\|ca-key\|made" "$W/re.out"; then t_fail "re-assign touched the CA: $(cat "$W/re.out")"; fi
cert_of mesh-ca | cmp -s - "$W/ca.pem" || t_fail "the CA changed on re-assign"
t_expect_exit 4 "a second mesh CA" tly assign mesh-ca node-b
grep -q "one-per-mesh and already runs on node-a" "$W/last.err" || t_fail "second: $(cat "$W/last.err")"
t_expect_exit 4 "lifetime past the driver's range" tly assign mesh-ca node-a --set lifetime=500d
t_expect_exit 4 "another key type" tly assign mesh-ca node-a --set key-type=rsa-2048
grep -q "ecdsa-p256" "$W/last.err" || t_fail "key-type: $(cat "$W/last.err")"
t_ok "kept, byte for byte; node-b refused; lifetime 500d and rsa-2048 refused"

t_check "a requirement of x509-certificate is refused until certificates are issued"
cat >"$W/app.yaml" <<'YAML'
module: app
requires:
  tls:
    type: x509-certificate
    from: mesh-ca
YAML
t_expect_exit 4 "apply of a certificate requirement" tly apply "$W/app.yaml"
grep -q "app.yaml:4:11: requires.tls.type: type x509-certificate cannot be required yet" "$W/last.err" ||
	t_fail "refusal: $(cat "$W/last.err")"
t_ok "refused at the line and field, saying why"

t_say "a mesh under an organisation's CA"
TALLY_HOME=$W/org-home
export TALLY_HOME
t_init
t_node org-a 127.0.0.1
tly apply "$TALLY_SRC/examples/mesh-ca.yaml" >/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$W/org.key" -out "$W/org.pem" \
	-days 30 -subj "/O=Example/CN=Example Org CA" \
	-addext basicConstraints=critical,CA:TRUE \
	-addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$W/other.key" -out "$W/other.pem" \
	-days 30 -subj "/CN=other" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$W/leaf.key" -out "$W/leaf.pem" \
	-days 30 -subj "/CN=leaf" -addext basicConstraints=critical,CA:FALSE 2>/dev/null

t_check "half a pair, another CA's key, a leaf are refused and nothing is recorded"
t_expect_exit 4 "ca-cert alone" tly assign mesh-ca org-a --set ca-cert="$W/org.pem"
grep -q "go together" "$W/last.err" || t_fail "half: $(cat "$W/last.err")"
t_expect_exit 4 "another key" sh -c "\"$TALLY_BIN/tally\" assign mesh-ca org-a --set ca-cert=\"$W/org.pem\" --secret ca-key <\"$W/other.key\""
grep -q "not the key of the CA certificate (CN=Example Org CA)" "$W/last.err" || t_fail "other: $(cat "$W/last.err")"
t_expect_exit 4 "a leaf" sh -c "\"$TALLY_BIN/tally\" assign mesh-ca org-a --set ca-cert=\"$W/leaf.pem\" --secret ca-key <\"$W/leaf.key\""
grep -q "is not a CA's" "$W/last.err" || t_fail "leaf: $(cat "$W/last.err")"
if tly log --json | grep -q '"assignment\.'; then t_fail "a refused assign recorded something"; fi
t_ok "each refused with why; no assignment event"

t_check "the organisation's pair is taken as given"
tly assign mesh-ca org-a --set ca-cert="$W/org.pem" --secret ca-key <"$W/org.key" >"$W/org.out" ||
	t_fail "assign with the organisation's CA failed"
grep -q "the CA CN=Example Org CA, valid until .*, as given" "$W/org.out" || t_fail "org: $(cat "$W/org.out")"
cert_of mesh-ca | openssl x509 -noout -fingerprint -sha256 >"$W/got.fp"
openssl x509 -in "$W/org.pem" -noout -fingerprint -sha256 | cmp -s - "$W/got.fp" ||
	t_fail "the recorded CA is not the organisation's"
if grep -rqa "PRIVATE KEY" "$TALLY_HOME"; then t_fail "a private key in clear in the home"; fi
t_expect_exit 0 "tallyd --once" "$TALLY_BIN/tallyd" --once
t_ok "recorded as given (same fingerprint), key sealed; tallyd --once exits 0"
