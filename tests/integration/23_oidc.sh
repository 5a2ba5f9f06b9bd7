#!/bin/sh
# The oidc driver (drivers/oidc.c) end to end through the real binaries,
# against a throwaway OpenID Connect provider (tests/harness/oidc.sh,
# oidc-provider 8): a provider module "idp" granting oidc-client, one
# consumer on the provider's node and one on another node (so the
# provider is exposed to the network).  What runs through tally today:
#   - provisioned and delivered: issuer, client-id, client-secret,
#     token-endpoint; a client_credentials token with the delivered
#     values; the client's software_id is the mark (mesh and grant); no secret (client
#     secret, registration access token) in the log or tallyd's log;
#   - verified: healthy; metadata changed at the provider -> restored by
#     a PUT, whose new registration access token is recorded
#     (credential.handle) and used by the next check, also after a
#     restart of the provider; client deleted -> missing, flagged and
#     not registered again;
#   - revoked: tally remove deletes the client, its secret gets no token;
#     tally status says that the tokens already issued stay valid until
#     they expire, with the lifetime (the provider's token-lifetime).
#   - rotated beside with acks (80_rotation): a shared grant on two
#     nodes; the second client is delivered, both get tokens until the
#     last ack, then the first is deleted.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"
t_oidc_start

# token ENVFILE: a client_credentials token with the delivered values.
token() {
	curl -s -u "$(t_envget "$1" O_ID):$(t_envget "$1" O_SECRET)" \
		-d grant_type=client_credentials "$(t_envget "$1" O_TOKEN)"
}
mkdir -p "$W/manifests"
cat >"$W/manifests/idp.yaml" <<EOF
module: idp
provides:
  oidc-client:
    driver: oidc
    revoke: drop
EOF
consumer() {
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {O_ISSUER: "", O_ID: "", O_SECRET: "", O_TOKEN: ""}
requires:
  login:
    type: oidc-client
    from: idp
    env: {issuer: O_ISSUER, client-id: O_ID, client-secret: O_SECRET, token-endpoint: O_TOKEN}
EOF
	echo "$W/manifests/$1.yaml"
}

t_say "an identity provider on node-a; consumers app-a (node-a), app-b (node-b)"
t_init
t_node node-a 127.0.0.1
t_node node-b localhost
tly apply "$W/manifests/idp.yaml" >/dev/null || t_fail "tally apply idp.yaml failed"
# token-lifetime: the fixture's access-token TTL (600 s, oidc-server.js).
tly assign idp node-a --expose network --set issuer="$ISS" --set token-lifetime=600s \
	--secret initial-access-token <"$TALLY_TEST_OIDC_IATFILE" >/dev/null ||
	t_fail "tally assign idp node-a failed"
tly providers --tag identity >"$W/prov.txt" 2>&1 || t_fail "tally providers --tag identity failed: $(cat "$W/prov.txt")"
grep -q oidc-client "$W/prov.txt" || t_fail "tally providers --tag identity does not list oidc-client: $(cat "$W/prov.txt")"
grep -q "until they expire" "$W/prov.txt" || t_fail "tally providers does not say that issued tokens outlive a revocation: $(cat "$W/prov.txt")"
tly apply "$(consumer app-a)" >/dev/null && tly assign app-a node-a >/dev/null ||
	t_fail "app-a failed"
tly apply "$(consumer app-b)" >/dev/null && tly assign app-b node-b >/dev/null ||
	t_fail "app-b failed"
t_tallyd_once
t_wait_healthy 10

t_check "delivered: issuer, client-id, client-secret, token-endpoint; a token with them"
A=$(t_envfile node-a app-a)
B=$(t_envfile node-b app-b)
cp "$A" "$W/a.env"
cp "$B" "$W/b.env"
[ "$(t_envget "$A" O_ISSUER)" = "$ISS" ] || t_fail "app-a's issuer is '$(t_envget "$A" O_ISSUER)'"
IA=$(t_envget "$A" O_ID)
IB=$(t_envget "$B" O_ID)
[ -n "$IA" ] && [ -n "$IB" ] && [ "$IA" != "$IB" ] || t_fail "client ids '$IA' '$IB'"
token "$A" | grep -q '"access_token"' || t_fail "app-a gets no token: $(token "$A")"
token "$B" | grep -q '"access_token"' || t_fail "app-b gets no token: $(token "$B")"
SA=$(t_envget "$A" O_SECRET)
tly log --json | grep -q "$SA" && t_fail "app-a's client secret is in the log"
grep -rqs "$SA" "$T_DLOG" && t_fail "app-a's client secret is in tallyd's log"
grep -rqs "$SA" "$TALLY_HOME" && t_fail "app-a's client secret is in the tally home in plaintext"
tly log --json --stream grant/app-a/login --type credential.handle | grep -q . ||
	t_fail "no credential.handle recorded for app-a/login"
t_ok "app-a: $IA, app-b: $IB; both get tokens; the secret is nowhere in plaintext"

t_check "the client is the grant's: software_id names the mesh and app-a/login, client_name the grant's name"
MESH=$(tly mesh --json | t_jstr mesh)
store=$OIDC_DIR/store.json
python3 -c "import json,sys; c=json.load(open('$store'))['Client:$IA']['p']; sys.exit(0 if c['software_id']=='tally mesh $MESH grant app-a/login' and c['client_name']=='$(t_gname app-a/login app-a-login _v1)' else 1)" ||
	t_fail "client $IA is not marked as app-a/login's"
t_ok "software_id 'tally mesh $MESH grant app-a/login', client_name $(t_gname app-a/login app-a-login _v1)"

t_say "verification"
t_expect_exit 0 "tally check --all (healthy)" tly check --all
t_check "metadata changed at the provider: repaired by a PUT, the new registration access token recorded"
t_oidc_edit "$IA" 'c["client_name"] = "renamed-by-admin"; c["token_endpoint_auth_method"] = "client_secret_post"'
t_expect_exit 8 "tally check app-a/login (client renamed)" tly check app-a/login
grep -q "client_name" "$W/last.out" || t_fail "the drift does not name client_name: $(cat "$W/last.out")"
python3 -c "import json,sys; c=json.load(open('$store'))['Client:$IA']['p']; sys.exit(0 if c['client_name']=='$(t_gname app-a/login app-a-login _v1)' and c['token_endpoint_auth_method']=='client_secret_basic' else 1)" ||
	t_fail "client $IA was not restored"
[ "$(tly log --json --stream grant/app-a/login --type credential.handle | grep -c .)" -eq 2 ] ||
	t_fail "the repair's new registration access token was not recorded"
t_expect_exit 0 "tally check app-a/login (after the repair, with the new token)" tly check app-a/login
sh "$TALLY_SRC/tests/harness/oidc.sh" stop "$OIDC_DIR" keep
sh "$TALLY_SRC/tests/harness/oidc.sh" start "$OIDC_DIR" "$_t_oidc_port" || t_fail "the OIDC provider did not restart"
t_expect_exit 0 "tally check app-a/login (after a restart of the provider)" tly check app-a/login
token "$A" | grep -q '"access_token"' || t_fail "app-a gets no token after the repair"
t_ok "restored; the second credential.handle is what tally manages the client with, also after a restart"
t_check "client deleted at the provider: missing, flagged, not registered again"
nclients() { python3 -c "import json; print(sum(1 for k in json.load(open('$store')) if k.startswith('Client:')))"; }
before=$(nclients)
t_oidc_edit "$IB" 'del st["Client:" + cid]'
t_expect_exit 6 "tally check app-b/login (client deleted)" tly check app-b/login
t_expect_exit 6 "tally check app-b/login (again)" tly check app-b/login
[ "$(nclients)" -eq $((before - 1)) ] || t_fail "clients: $(nclients), expected $((before - 1)): check registered one"
token "$W/b.env" | grep -q '"access_token"' && t_fail "the deleted client still gets tokens"
t_ok "missing twice, nothing registered"

t_say "rotation beside: a shared grant held on node-a and node-b, a second client, acks"
t_wait_log() {	# SECONDS STREAM TYPE [GREP]: prints the first match
	_w_end=$(($(t_now_ms) + $1 * 1000))
	while :; do
		_w_l=$(tly log --json --stream "$2" --type "$3" | grep -e "${4:-.}" | head -n 1) || true
		[ -n "$_w_l" ] && { printf '%s\n' "$_w_l"; return 0; }
		[ "$(t_now_ms)" -le "$_w_end" ] || { tail -n 20 "$T_DLOG" >&2; t_fail "no $3 on $2 within $1 s"; }
		sleep 0.1
	done
}
tly apply "$(consumer game)" >/dev/null || t_fail "tally apply game failed"
tly assign game node-a >/dev/null && tly assign game node-b >/dev/null || t_fail "tally assign game failed"
G=game/login
t_tallyd_start --interval 1
t_wait_healthy 30 game
GA=$(t_envfile node-a game)
cp "$GA" "$W/v1.env"
token "$W/v1.env" | grep -q '"access_token"' || t_fail "game's v1 gets no token"
tly rotate "$G" >/dev/null || t_fail "tally rotate $G failed"
t_wait_log 20 "grant/$G" credential.activated >/dev/null
end=$(($(t_now_ms) + 10000))
for n in node-a node-b; do
	until [ "$(t_envget "$(t_envfile "$n" game)" O_ID)" != "$(t_envget "$W/v1.env" O_ID)" ]; do
		[ "$(t_now_ms)" -lt "$end" ] || t_fail "$n's env file does not hold v2's client"
		sleep 0.05
	done
done
cp "$(t_envfile node-a game)" "$W/v2.env"
t_check "between add and retire both clients get tokens; the client-id changed"
token "$W/v1.env" | grep -q '"access_token"' || t_fail "v1 gets no token before any ack"
token "$W/v2.env" | grep -q '"access_token"' || t_fail "v2 gets no token"
t_expect_exit 0 "tally check $G (mid-rotation)" tly check "$G"
tly ack node-a game 2 >/dev/null || t_fail "tally ack node-a game 2 failed"
sleep 2
token "$W/v1.env" | grep -q '"access_token"' || t_fail "v1 stopped working while node-b has not acknowledged"
tly ack node-b game 2 >/dev/null || t_fail "tally ack node-b game 2 failed"
ret=$(t_wait_log 20 "grant/$G" credential.retired)
t_wait_log 10 "grant/$G" rotation.completed >/dev/null
printf '%s' "$ret" | grep -q '"forced":false' || t_fail "retirement forced: $ret"
token "$W/v1.env" | grep -q '"access_token"' && t_fail "the retired v1 client still gets tokens"
token "$W/v2.env" | grep -q '"access_token"' || t_fail "v2 gets no token after the retirement"
python3 -c "import json,sys; sys.exit(1 if 'Client:$(t_envget "$W/v1.env" O_ID)' in json.load(open('$store')) else 0)" ||
	t_fail "v1's client is still registered"
t_ok "v1 $(t_envget "$W/v1.env" O_ID) deleted after the last ack, v2 $(t_envget "$W/v2.env" O_ID) works"
t_tallyd_stop
t_check "a second rotation with the registration's reply lost (TALLY_FAULT=create:lost-first=1): one new client"
gclients() { python3 -c "import json; print(sum(1 for k, v in json.load(open('$store')).items() if k.startswith('Client:') and v['p'].get('software_id') == 'tally mesh $MESH grant game/login'))"; }
[ "$(gclients)" -eq 1 ] || t_fail "game has $(gclients) clients before v3"
TALLY_FAULT=create:lost-first=1 t_tallyd_start --interval 1
tly rotate "$G" >/dev/null || t_fail "tally rotate $G (v3) failed"
t_wait_log 20 "grant/$G" credential.activated '"version":3' >/dev/null
grep -q "fault injected: create:lost-first=1" "$T_DLOG" || t_fail "the add's reply was not lost (no fault in tallyd's log)"
[ "$(gclients)" -eq 2 ] || t_fail "game has $(gclients) clients after the lost add of v3 (expected v2's and v3's)"
tly ack node-a game 3 >/dev/null && tly ack node-b game 3 >/dev/null || t_fail "tally ack of v3 failed"
t_wait_log 20 "grant/$G" rotation.completed '"version":3' >/dev/null
[ "$(gclients)" -eq 1 ] || t_fail "game has $(gclients) clients after v3's rotation completed"
token "$(t_envfile node-a game)" | grep -q '"access_token"' || t_fail "v3 gets no token"
token "$W/v2.env" | grep -q '"access_token"' && t_fail "the retired v2 client still gets tokens"
t_tallyd_stop
t_ok "the lost reply's client was recorded and reused: 2 clients during, 1 after; v3 works, v2 refused"


t_say "a small kill storm: 10 grants while tallyd is SIGKILLed"
mf=$W/storm.yaml
: >"$mf"
i=1
while [ $i -le 10 ]; do
	printf -- '---\n' >>"$mf"
	cat "$(consumer "s$i")" >>"$mf"
	i=$((i + 1))
done
tly apply "$mf" >/dev/null || t_fail "tally apply of the storm's modules failed"
t_tallyd_start --workers 4
i=1
while [ $i -le 10 ]; do tly assign "s$i" node-a >/dev/null || t_fail "assign s$i failed"; i=$((i + 1)); done
k=0
while [ $k -lt 8 ]; do
	sleep "0.$((1 + $(t_rand 4)))"
	kill -KILL "$T_DPID" 2>/dev/null || t_fail "tallyd had died by itself"
	t_wait_exit "$T_DPID" 10
	k=$((k + 1))
	t_tallyd_start --workers 4
done
end=$(($(t_now_ms) + 30000))
until [ "$(tly log --json --type grant.provisioned | grep -c '"grant":"s[0-9]*/login"')" -ge 10 ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "the storm's grants were not all provisioned within 30 s"
	sleep 0.2
done
t_tallyd_stop
t_check "every storm grant has one client, delivered and getting tokens; no orphan client"
i=1
while [ $i -le 10 ]; do
	f=$(t_envfile node-a "s$i")
	token "$f" | grep -q '"access_token"' || t_fail "s$i gets no token after the storm"
	i=$((i + 1))
done
orphans=$(python3 - "$store" "$W" <<'EOF2'
import json, sys, os, re
st = json.load(open(sys.argv[1]))
ids = set()
for i in range(1, 11):
    for l in open(os.path.join(sys.argv[2], "env/node-a/s%d.env" % i)):
        if l.startswith("O_ID="):
            ids.add(l.strip()[5:])
n = 0
for k, v in st.items():
    sid = v.get("p", {}).get("software_id", "") if isinstance(v.get("p"), dict) else ""
    if k.startswith("Client:") and re.match(r"^tally mesh [0-9a-f]{32} grant s[0-9]+/login$", sid) and k[7:] not in ids:
        n += 1
        print("orphan", k[7:], sid, file=sys.stderr)
print(n)
EOF2
)
[ "$orphans" -eq 0 ] || t_fail "$orphans orphan client(s) after the storm (a kill between the registration's answer and its record)"
t_ok "8 kills; 10 grants, 10 clients, all getting tokens, 0 orphans"

t_say "revocation (app-b's client is gone already: nothing to delete)"
for m in app-a app-b game s1 s2 s3 s4 s5 s6 s7 s8 s9 s10; do
	tly remove $m --yes >"$W/remove.out" 2>&1 ||
		t_fail "tally remove $m failed: $(cat "$W/remove.out")"
done
t_tallyd_once
tly log --json --stream grant/app-b/login --type grant.revoked | grep -q . ||
	t_fail "app-b/login (client gone) is not revoked"
python3 -c "import json,sys; sys.exit(1 if 'Client:$IA' in json.load(open('$store')) else 0)" ||
	t_fail "client $IA is still registered after tally remove"
token "$W/a.env" | grep -q '"access_token"' && t_fail "app-a's removed client still gets tokens"
t_ok "client $IA deleted; its secret gets no token"
left=$(python3 -c "
import json, re
st = json.load(open('$store'))
print(sum(1 for k, v in st.items() if k.startswith('Client:') and re.match(r'^tally mesh [0-9a-f]{32} grant (s[0-9]+|app-a|app-b|game)/login$', v['p'].get('software_id', ''))))")
[ "$left" -eq 0 ] || t_fail "$left client(s) of removed grants are still registered"
t_ok "no client of a removed grant is left"
t_check "tally status: issued tokens stay valid until they expire, the lifetime named"
now_s=$(date +%s)
tly status >"$W/status.out" 2>&1 || true
grep '^  revoked [^ ]*/login on node-a/idp: ' "$W/status.out" >"$W/residual.out" ||
	t_fail "status does not name the revoked clients' residual tokens: $(cat "$W/status.out")"
[ "$(grep -c . "$W/residual.out")" -eq 13 ] ||
	t_fail "status names $(grep -c . "$W/residual.out") revoked clients, expected 13: $(cat "$W/residual.out")"
grep -v 'stay valid until they expire.*(lifetime 600s, setting token-lifetime), until ' "$W/residual.out" | grep -q . &&
	t_fail "a residual line lacks the validity or the lifetime: $(cat "$W/residual.out")"
tly status --json >"$W/status.json" 2>/dev/null || true
python3 - "$W/status.json" "$now_s" <<'EOF2' || t_fail "the residual's until is not the revocation + 600 s"
import json, sys
d = json.load(open(sys.argv[1])); now = int(sys.argv[2])
r = [e for e in d["attention"]["residual"] if e["grant"] == "app-a/login"]
assert len(r) == 1 and r[0]["lifetime"] == "600s", r
u = r[0]["until_ns"] // 10**9
assert now + 600 - 120 <= u <= now + 601, (u, now)
EOF2
t_ok "$(head -n 1 "$W/residual.out" | sed 's/^ *//')"

t_say "faults on the PUT that rotates the registration access token"
tly apply "$(consumer keep)" >/dev/null && tly assign keep node-a >/dev/null || t_fail "keep failed"
t_tallyd_once
K=$(t_envfile node-a keep)
IK=$(t_envget "$K" O_ID)
nh() { tly log --json --stream grant/keep/login --type credential.handle | grep -c .; }
t_check "the PUT's reply lost (TALLY_FAULT=fix_privileges:lost): the new token is recorded anyway"
t_oidc_edit "$IK" 'c["client_name"] = "renamed"'
h0=$(nh)
set +e
TALLY_FAULT=fix_privileges:lost tly check keep/login >"$W/last.out" 2>&1
set -e
grep -q "fault injected" "$W/last.out" || t_fail "no fault injected: $(cat "$W/last.out")"
[ "$(nh)" -eq $((h0 + 1)) ] || t_fail "the rotated registration access token was not recorded after a lost reply"
t_expect_exit 0 "tally check keep/login (after the lost reply)" tly check keep/login
t_ok "recorded before the outcome: the next check manages the client"
t_check "the process killed right after the PUT (TALLY_FAULT=fix_privileges:crash)"
t_oidc_edit "$IK" 'c["client_name"] = "renamed-again"'
h0=$(nh)
set +e
TALLY_FAULT=fix_privileges:crash tly check keep/login >"$W/last.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 137 ] || t_fail "tally check did not crash (exit $rc): $(cat "$W/last.out")"
[ "$(nh)" -eq "$h0" ] || t_fail "a handle was recorded by a process that crashed before its outcome"
set +e
tly check keep/login >"$W/last.out" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || t_fail "tally check is healthy with the registration access token lost"
grep -q "registration access token is refused" "$W/last.out" && grep -q "admin of the identity provider" "$W/last.out" ||
	t_fail "the lost registration access token is not reported with the admin's recovery: $(cat "$W/last.out")"
token "$K" | grep -q '"access_token"' || t_fail "the consumer lost its client with the token"
t_ok "exit $rc, reported: $(grep -o 'registration access token is refused[^;]*' "$W/last.out" | head -n 1); the consumer still gets tokens"
t_note "a kill between the provider's answer to a PUT and the outcome's commit loses the new registration access token: the protocol returns it only in that answer; tally then reports the drift with the admin's recovery (issue a new token at the provider, or delete the client and tally repair)"
