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
tly assign mesh-ca node-a --expose network >"$W/assign.out" || t_fail "assign mesh-ca failed"
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

t_say "a certificate for a holder: its key made on its node, never sent"
cat >"$W/app.yaml" <<'YAML'
module: app
env: {TLS_CERT: "", TLS_KEY: "", TLS_CA: "", TLS_NOT_AFTER: ""}
requires:
  tls:
    type: x509-certificate
    from: mesh-ca
    sans: [app.mesh.test, 10.0.0.7]
    env: {certificate: TLS_CERT, private-key: TLS_KEY, ca-cert: TLS_CA, not-after: TLS_NOT_AFTER}
YAML
t_check "a hostile alternative name is refused at apply"
sed 's/10.0.0.7/"a,DNS:evil.example"/' "$W/app.yaml" >"$W/evil.yaml"
t_expect_exit 4 "apply of a san with a comma" tly apply "$W/evil.yaml"
grep -q "evil.yaml:.*sans" "$W/last.err" || t_fail "evil san: $(cat "$W/last.err")"
tly apply "$W/app.yaml" >/dev/null || t_fail "apply app.yaml failed"
tly assign app node-b >/dev/null || t_fail "assign app node-b failed"
t_ok "refused at the key; the requirement applied and assigned"

t_check "tallyd provisions and delivers"
t_tallyd_once
tly log --json --type credential.delivered | grep -q '"holder":"app@node-b"' ||
	t_fail "not delivered to app@node-b"
t_ok "provisioned (the CA keeps nothing per grant), delivered to node-b"
t_check "requests the record does not allow are refused and shown"
# Each in a report signed by node-b's own key (forge_report.py), offered
# on the log as the agent offers it (offer_report).
offer() {	# offer CSRSPEC...: one report with these requests
	_o_args=""
	for _o in "$@"; do _o_args="$_o_args --csr $_o"; done
	# shellcheck disable=SC2086
	python3 "$TALLY_SRC/tests/harness/forge_report.py" --node node-b \
		--key "$(t_nodekey node-b)" $_o_args >"$W/forged.json"
	python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(m["report"])
open(sys.argv[3], "w").write(m["sig"])' "$W/forged.json" "$W/forged.report" "$W/forged.sig"
	"$TALLY_PLAIN_BIN/../tests/tools/offer_report" "$TALLY_HOME/log" node-b \
		"$(cat "$W/forged.report")" "$(cat "$W/forged.sig")" ||
		t_fail "offer_report failed"
}
csr() {	# csr FILE CN [SAN...]: a request for a new key
	_c_f=$1 _c_cn=$2
	shift 2
	_c_ext=""
	if [ $# -gt 0 ]; then
		_c_ext="subjectAltName="
		for _c_s in "$@"; do
			case $_c_s in *[!0-9.]*) _c_ext="${_c_ext}DNS:$_c_s,";; *) _c_ext="${_c_ext}IP:$_c_s,";; esac
		done
		_c_ext=${_c_ext%,}
	fi
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$_c_f.key" -subj "/CN=$_c_cn" ${_c_ext:+-addext "$_c_ext"} \
		-out "$_c_f" 2>/dev/null || t_fail "openssl req for $_c_f"
}
refused_with() {	# refused_with TEXT: the newest certificate.refused says it
	tly log --json --type certificate.refused | tail -n 1 | grep -qF "$1" ||
		t_fail "no refusal saying '$1': $(tly log --json --type certificate.refused | tail -n 2)"
}
G=app/tls
CNOK=$(t_gname app/tls app-tls)
csr "$W/other-cn.csr" other-login app.mesh.test 10.0.0.7
csr "$W/extra-san.csr" "$CNOK" app.mesh.test 10.0.0.7 evil.example
csr "$W/second.csr" "$CNOK" app.mesh.test 10.0.0.7
# A request whose signature is not its key's: one byte of it changed.
python3 - "$W/second.csr" "$W/forged-sig.csr" <<'PY'
import base64, sys
pem = open(sys.argv[1]).read().split("\n")
der = bytearray(base64.b64decode("".join(l for l in pem if l and not l.startswith("-----"))))
der[-3] ^= 0x01
b = base64.b64encode(bytes(der)).decode()
open(sys.argv[2], "w").write("-----BEGIN CERTIFICATE REQUEST-----\n" +
    "\n".join(b[i:i+64] for i in range(0, len(b), 64)) +
    "\n-----END CERTIFICATE REQUEST-----\n")
PY
N0=$(tly log --json --type certificate.refused | wc -l)
offer "$G=app@node-b=1=$W/other-cn.csr"
t_tallyd_once
refused_with "the request's subject is not CN=$CNOK alone"
offer "$G=app@node-b=1=$W/extra-san.csr"
t_tallyd_once
refused_with "an alternative name the record does not give (name 3)"
offer "$G=app@node-a=1=$W/second.csr"
t_tallyd_once
refused_with "not on the node that signed the report"
offer "$G=app@node-b=7=$W/second.csr"
t_tallyd_once
refused_with "a request for v7; the grant is at v1"
offer "$G=app@node-b=1=$W/forged-sig.csr"
t_tallyd_once
refused_with "the request's signature does not verify with its key"
N1=$(tly log --json --type certificate.refused | wc -l)
[ $((N1 - N0)) -eq 5 ] || t_fail "$((N1 - N0)) refusals recorded, expected 5"
# A report repeats its request: the same one refused again is not news.
offer "$G=app@node-b=1=$W/forged-sig.csr"
t_tallyd_once
[ "$(tly log --json --type certificate.refused | wc -l)" -eq "$N1" ] ||
	t_fail "the same request refused twice on the record"
[ "$(tly log --json --type certificate.issued | wc -l)" -eq 0 ] ||
	t_fail "a forged request was signed: $(tly log --json --type certificate.issued)"
t_ok "another CN, an extra SAN, another node's holder, a version not the grant's, a forged signature: refused and recorded once each; none issued"

t_check "the node makes its key and asks in its report"
t_agent node-b
ST=$W/agent-node-b.state
ls "$ST"/*.v1.key >/dev/null 2>&1 || t_fail "no key made on node-b: $(ls "$ST")"
ls "$ST"/*.v1.csr >/dev/null 2>&1 || t_fail "no request kept on node-b"
[ "$(stat -c %a "$ST"/*.v1.key)" = 600 ] || t_fail "the key's mode is $(stat -c %a "$ST"/*.v1.key)"
[ ! -e "$W/agent-node-b/app.env" ] || t_fail "app.env written before the certificate came"
tly log --json --type node.report-offered | grep -q 'csrs' || t_fail "no request in an offered report"
t_ok "key 0600 in the agent's state, request in the signed report, nothing written yet"

t_check "a CA that cannot sign now leaves the request waiting, shown, and signs it later"
set +e
TALLY_FAULT="open:unreach" timeout 60 "$TALLY_BIN/tallyd" --once --once-timeout 3 2>"$W/nosign.err"
RC=$?
set -e
[ $RC -eq 6 ] || { cat "$W/nosign.err" >&2; t_fail "tallyd --once with the CA unreachable exited $RC, expected 6 (still waiting)"; }
grep -q "cannot sign now" "$W/nosign.err" || t_fail "no word of the CA: $(tail -3 "$W/nosign.err")"
[ "$(tly log --json --type certificate.issued | wc -l)" -eq 0 ] || t_fail "issued while the CA was unreachable"
tly status app | grep -q "app@node-b app/tls: v1 delivered, its key made on the node, awaiting its certificate" ||
	t_fail "status: $(tly status app)"
t_ok "exit 6 (still waiting), nothing issued; status: awaiting its certificate"

t_check "the control plane signs it; the node writes key, certificate and CA, and acknowledges"
t_tallyd_once
tly log --json --type certificate.issued >"$W/issued.json"
[ "$(wc -l <"$W/issued.json")" -eq 1 ] || t_fail "certificate.issued: $(cat "$W/issued.json")"
SERIAL=$(t_jstr serial <"$W/issued.json")
t_agent node-b
t_tallyd_once
. "$W/agent-node-b/app.env"
for f in "$TLS_CERT" "$TLS_KEY" "$TLS_CA"; do
	[ -f "$f" ] || t_fail "app.env names $f, which is not there"
done
openssl verify -CAfile "$TLS_CA" "$TLS_CERT" >/dev/null || t_fail "openssl verify of the holder's certificate"
cmp -s "$TLS_CA" "$W/ca.pem" || t_fail "the delivered CA is not the mesh CA"
openssl x509 -in "$TLS_CERT" -noout -text >"$W/leaf.txt"
grep -q "DNS:app.mesh.test, IP Address:10.0.0.7" "$W/leaf.txt" || t_fail "SANs: $(grep -A1 'Alternative' "$W/leaf.txt")"
grep -q "TLS Web Client Authentication" "$W/leaf.txt" || t_fail "no clientAuth"
if grep -q "TLS Web Server Authentication" "$W/leaf.txt"; then t_fail "serverAuth not asked for"; fi
grep -q "Issuer: CN = tally mesh CA $MESH" "$W/leaf.txt" || t_fail "issuer: $(grep Issuer "$W/leaf.txt")"
CN=$(openssl x509 -in "$TLS_CERT" -noout -subject | sed 's/^subject=CN = //')
[ "$CN" = "$(t_gname app/tls app-tls)" ] || t_fail "CN $CN, expected $(t_gname app/tls app-tls)"
[ "$(openssl x509 -in "$TLS_CERT" -noout -serial | cut -d= -f2)" = "$SERIAL" ] || t_fail "serial not the recorded one"
# not-after: the node's own certificate's, as RFC 3339 UTC.
[ "$TLS_NOT_AFTER" = "$(date -u -d "$(openssl x509 -in "$TLS_CERT" -noout -enddate | cut -d= -f2)" +%Y-%m-%dT%H:%M:%SZ)" ] ||
	t_fail "not-after $TLS_NOT_AFTER, the certificate says $(openssl x509 -in "$TLS_CERT" -noout -enddate)"
# The key in the module's directory is the one in the certificate.
[ "$(openssl pkey -in "$TLS_KEY" -pubout)" = "$(openssl x509 -in "$TLS_CERT" -noout -pubkey)" ] ||
	t_fail "the key written is not the certificate's"
tly log --json --type credential.acknowledged | grep -q '"holder":"app@node-b"' ||
	t_fail "not acknowledged: $(tly log --json --type credential.acknowledged)"
t_ok "serial $SERIAL: CN the grant's name, SANs as declared, clientAuth, chains to the mesh CA, not-after $TLS_NOT_AFTER; acknowledged"

t_check "the key never left the node: not in the home, the log or any event"
KEYB64=$(sed -n '2p' "$TLS_KEY")
if grep -rqaF "$KEYB64" "$TALLY_HOME"; then t_fail "the node's key is in the home"; fi
if tly log --json | grep -qF "$KEYB64"; then t_fail "the node's key is in the log"; fi
t_ok "the key's bytes are nowhere in the control plane's home or record"

t_check "a node holding many grants still reports (a report past 64 KiB)"
HELD=""
i=0
while [ $i -lt 800 ]; do HELD="$HELD --held app/x$i=app@node-b=1"; i=$((i + 1)); done
# shellcheck disable=SC2086
python3 "$TALLY_SRC/tests/harness/forge_report.py" --node node-b \
	--key "$(t_nodekey node-b)" $HELD >"$W/forged.json"
python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
assert len(m["report"]) > 65536, len(m["report"])
open(sys.argv[2], "w").write(m["report"])
open(sys.argv[3], "w").write(m["sig"])' "$W/forged.json" "$W/forged.report" "$W/forged.sig"
NR=$(tly log --json --type node.reported | wc -l)
"$TALLY_PLAIN_BIN/../tests/tools/offer_report" "$TALLY_HOME/log" node-b \
	"$(cat "$W/forged.report")" "$(cat "$W/forged.sig")" || t_fail "offer_report failed"
t_tallyd_once
[ "$(tly log --json --type node.reported | wc -l)" -eq $((NR + 1)) ] ||
	t_fail "the report of 800 grants was not recorded: $(grep 'refused input' "$T_DLOG" | tail -1)"
t_ok "a signed report of $(wc -c <"$W/forged.report") bytes (800 grants held) recorded"

t_check "a second request for a version already issued is refused"
offer "$G=app@node-b=1=$W/second.csr"
t_tallyd_once
refused_with "a second request for v1 (serial $SERIAL was issued for it)"
[ "$(tly log --json --type certificate.issued | wc -l)" -eq 1 ] ||
	t_fail "a forged request was signed: $(tly log --json --type certificate.issued)"
t_ok "refused, naming the serial issued; one certificate issued in all"


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
