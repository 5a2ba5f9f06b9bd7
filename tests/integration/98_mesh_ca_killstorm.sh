#!/bin/sh
# A kill storm through issuance and renewal (issue 25): 24 holders on
# one node ask for certificates whose lifetime is 90 s, renewed at a
# third, while tallyd and the node's agent are each SIGKILLed at random
# moments and started again, for about 45 s (so every holder renews at
# least once in the storm).  Then both settle.  Every holder must end
# with exactly one current certificate (its files, its key's, the one
# the record issued for the version it acknowledged), every serial on
# the record once, one certificate per holder and version, nothing left
# in the agent's state of versions before, and the record must verify
# and rebuild to the same projections.
. "$(dirname "$0")/lib.sh"

N=${TALLY_CA_STORM_HOLDERS:-24}
STORM_S=${TALLY_CA_STORM_SECONDS:-45}

t_say "a mesh CA (90 s certificates, renewed at 30 %), $N holders on node-b"
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.2
tly apply "$TALLY_SRC/examples/mesh-ca.yaml" >/dev/null
tly assign mesh-ca node-a --expose network --set lifetime=90s --set renew-at=30 >/dev/null
mf=$W/holders.yaml
: >"$mf"
i=1
while [ $i -le "$N" ]; do
	m=$(printf 'h%03d' $i)
	cat >>"$mf" <<YAML
---
module: $m
env: {TLS_CERT: "", TLS_KEY: ""}
requires:
  tls:
    type: x509-certificate
    from: mesh-ca
    sans: [$m.mesh.test]
    env: {certificate: TLS_CERT, private-key: TLS_KEY}
YAML
	i=$((i + 1))
done
tly apply "$mf" >/dev/null
mods=$(i=1; while [ $i -le "$N" ]; do printf 'h%03d ' $i; i=$((i + 1)); done)
# shellcheck disable=SC2086
tly assign $mods node-b >/dev/null

A_PID=
agent_start() {
	"$TALLY_BIN/tally-node" --node node-b --key "$(t_nodekey node-b)" \
		--dir "$W/agent-node-b" --state "$W/agent-node-b.state" \
		--log "$TALLY_HOME" --report-interval 1 2>>"$W/agent-node-b.log" &
	A_PID=$!
	_t_pids="$_t_pids $A_PID"
}

t_check "the storm: tallyd and the agent SIGKILLed at random, started again"
t_tallyd_start --interval 1
agent_start
t0=$(t_now_ms)
kd=0 ka=0
while [ $(($(t_now_ms) - t0)) -lt $((STORM_S * 1000)) ]; do
	ms=$((100 + $(t_rand 1400)))
	sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
	if [ "$(t_rand 2)" -eq 0 ]; then
		kill -KILL "$T_DPID" 2>/dev/null || t_fail "tallyd had died by itself"
		t_wait_exit "$T_DPID" 10
		kd=$((kd + 1))
		t_tallyd_start --interval 1
	else
		kill -KILL "$A_PID" 2>/dev/null || { tail -n 5 "$W/agent-node-b.log" >&2; t_fail "the agent had died by itself"; }
		t_wait_exit "$A_PID" 10
		ka=$((ka + 1))
		agent_start
	fi
done
[ $kd -ge 5 ] && [ $ka -ge 5 ] || t_fail "only $kd kills of tallyd and $ka of the agent"
t_ok "$kd SIGKILLs of tallyd, $ka of the agent in $STORM_S s"

t_check "settled: every holder at its grant's version, no rotation running"
settled() {
	tly status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
at = d.get("attention", {})
if at.get("rotations_waiting") or at.get("certificates"):
    sys.exit(1)
held = [h for a in d.get("agents", []) for h in a["held"]]
if len(held) != int(sys.argv[1]) or not all(h.get("acked") and not h.get("awaiting_certificate") for h in held):
    sys.exit(1)' "$N" &&
	[ "$(tly log --json --type rotation.started | wc -l)" -eq \
	  "$(tly log --json --type rotation.completed | wc -l)" ]
}
t_wait_for 60 "holders settled" settled
kill -TERM "$A_PID" 2>/dev/null; t_wait_exit "$A_PID" 10
t_tallyd_stop
R=$(tly log --json --type rotation.completed | wc -l)
[ "$R" -ge "$N" ] || t_fail "only $R renewals completed for $N holders"
t_ok "$R renewals completed; every holder acknowledged its grant's version"

t_check "one certificate per holder and version, every serial once"
tly log --json --type certificate.issued >"$W/issued.json"
python3 - "$W/issued.json" <<'PY' || t_fail "duplicate issuance"
import json, sys
seen, serials = set(), set()
for l in open(sys.argv[1]):
    b = json.loads(l)["body"]
    k = (b["grant"], b["holder"], b["version"])
    if k in seen:
        sys.exit("two certificates for %s" % (k,))
    if b["serial"] in serials:
        sys.exit("serial %s twice" % b["serial"])
    seen.add(k); serials.add(b["serial"])
PY
t_ok "$(wc -l <"$W/issued.json") certificates, each for its own (grant, holder, version), serials distinct"

t_check "each holder runs on exactly the certificate the record issued for its version, and nothing older is kept"
tly log --json --type certificate.issued | python3 -c '
import json, sys
last = {}
for l in sys.stdin:
    b = json.loads(l)["body"]
    k = b["holder"]
    if k not in last or b["version"] > last[k][0]:
        last[k] = (b["version"], b["serial"])
for h, (v, s) in sorted(last.items()):
    print(h.split("@")[0], v, s)' >"$W/current"
[ "$(wc -l <"$W/current")" -eq "$N" ] || t_fail "$(wc -l <"$W/current") holders have certificates"
CA=$W/ca.pem
tly log --json | python3 -c '
import json, sys
c = None
for l in sys.stdin:
    e = json.loads(l)
    if e["type"].startswith("assignment.") and e["body"].get("module") == "mesh-ca":
        c = e["body"].get("settings", {}).get("ca-cert", c)
print(c, end="")' >"$CA"
while read -r m v s; do
	unset TLS_CERT TLS_KEY
	. "$W/agent-node-b/$m.env"
	[ "$(openssl x509 -in "$TLS_CERT" -noout -serial | cut -d= -f2)" = "$s" ] ||
		t_fail "$m runs on $(openssl x509 -in "$TLS_CERT" -noout -serial), the record's v$v is $s"
	[ "$(openssl pkey -in "$TLS_KEY" -pubout)" = "$(openssl x509 -in "$TLS_CERT" -noout -pubkey)" ] ||
		t_fail "$m's key is not its certificate's"
	openssl verify -CAfile "$CA" "$TLS_CERT" >/dev/null || t_fail "$m's certificate does not verify"
	[ "$(ls "$W/agent-node-b/$m" | grep -c '^cert-')" -eq 1 ] || t_fail "$m's directory: $(ls "$W/agent-node-b/$m")"
done <"$W/current"
keys=$(ls "$W/agent-node-b.state" | grep -c '\.key$')
[ "$keys" -eq "$N" ] || t_fail "$keys keys in the agent's state for $N holders: $(ls "$W/agent-node-b.state" | grep -v '\.v[0-9]*\.\(key\|cert\)$' | head)"
if ls "$W/agent-node-b.state" | grep -q 'shown\.sealed$\|\.csr$'; then t_fail "leftovers in the agent's state"; fi
t_ok "each holder's files are its current certificate and key; one key per holder in the agent's state"

t_check "the record verifies and rebuilds to the same projections"
tly verify >/dev/null || t_fail "tally verify"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check"
t_ok "verify and rebuild --check hold"
