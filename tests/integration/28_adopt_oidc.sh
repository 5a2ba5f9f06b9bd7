#!/bin/sh
# tally adopt MODULE/REQ --resource CLIENT_ID --secret-stdin on the oidc
# driver: an OAuth client registered by hand at the identity provider
# (tests/harness/oidc.sh at its https issuer, verified against the
# harness CA), whose secret a consumer uses today, taken under tally
# with its registration access token.
#   - the CLI: adopt without --secret-stdin refused, nothing appended;
#     the claim recorded (grant.adopted) with the token sealed, in clear
#     nowhere;
#   - tallyd takes it over: the same client, marked as the grant's (its
#     software_id), its name, grant types, redirect URIs and
#     authentication as they were; the token given is dead (the PUT
#     rotated it); nothing of it delivered (no credential.delivered of
#     v1); the rotation delivers a client of tally's (v2) whose id and
#     secret differ and get a token;
#   - a consumer on the adopted client keeps getting tokens throughout:
#     its node's agent (tally-node) writes v2, reloads it once and
#     acknowledges, and only then is the adopted client deleted
#     (credential.retired; it got tokens until then, status names the
#     wait), then refused;
#   - a client id that does not exist, a wrong token: grant.failed with
#     the driver's reason, the client given untouched;
#   - another mesh's clients (a second home at the same provider), even
#     with their real registration access tokens (read from the
#     provider's store: the other mesh's are sealed in its log): refused,
#     for another grant (made by tally for grant ... of mesh ..., not
#     this one) and for the same grant id (owned by mesh ...); their
#     marks, tokens and secrets untouched, the other mesh's check clean;
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"
t_oidc_start
ISS=$TALLY_TEST_OIDC_TLS_ISSUER
CA=$TALLY_TEST_CA
IAT=$(cat "$TALLY_TEST_OIDC_IATFILE")
store=$OIDC_DIR/store.json
G=billing/login

# jget KEY: KEY of the JSON object on stdin ("" when absent).
jget() {
	python3 -c 'import json, sys
v = json.load(sys.stdin).get(sys.argv[1], "")
print(json.dumps(v) if isinstance(v, (list, dict)) else v)' "$1"
}

# hand_register JSON: an RFC 7591 registration with the initial access
# token, as the provider's admin makes one; the answer on stdout.
hand_register() {
	curl -s --cacert "$CA" -H "Authorization: Bearer $IAT" \
		-H 'Content-Type: application/json' -d "$1" "$REG"
}

# reg_status ID RAT: the HTTP status of an RFC 7592 read of client ID.
reg_status() {
	curl -s -o /dev/null -w '%{http_code}' --cacert "$CA" \
		-H "Authorization: Bearer $2" "$REG/$1"
}

# tok_post ID SECRET: a client_credentials token, the secret in the form
# (client_secret_post, as the hand-made client was registered).
tok_post() {
	curl -s --cacert "$CA" -d grant_type=client_credentials \
		--data-urlencode "client_id=$1" --data-urlencode "client_secret=$2" \
		"$TOKEN_EP"
}

# tok_env ENVFILE: a token with the delivered values, as the consumer
# asks for one (HTTP Basic, the delivered CA file).
tok_env() {
	curl -s --cacert "$(t_envget "$1" O_CA)" \
		-u "$(t_envget "$1" O_ID):$(t_envget "$1" O_SECRET)" \
		-d grant_type=client_credentials "$(t_envget "$1" O_TOKEN)"
}

# client ID PYTHON-EXPR: the expression on the client's record c, printed.
client() {
	python3 -c "import json; c=json.load(open('$store'))['Client:$1']['p']; print($2)"
}
gone() {
	python3 -c "import json,sys; sys.exit(1 if 'Client:$1' in json.load(open('$store')) else 0)"
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
env: {O_ISSUER: "", O_ID: "", O_SECRET: "", O_TOKEN: "", O_CA: ""}
requires:
  login:
    type: oidc-client
    from: idp
    env: {issuer: O_ISSUER, client-id: O_ID, client-secret: O_SECRET, token-endpoint: O_TOKEN, ca: O_CA}
EOF
	echo "$W/manifests/$1.yaml"
}

t_say "an identity provider at $ISS on node-a; a client registered there by hand"
t_init
t_node node-a 127.0.0.1
tly apply "$W/manifests/idp.yaml" >/dev/null || t_fail "tally apply idp.yaml failed"
tly assign idp node-a --set issuer="$ISS" --set ca="$CA" --set token-lifetime=600s \
	--secret initial-access-token <"$TALLY_TEST_OIDC_IATFILE" >/dev/null ||
	t_fail "tally assign idp node-a failed"
curl -s --cacert "$CA" "$ISS/.well-known/openid-configuration" >"$W/disco.json" ||
	t_fail "no discovery document at $ISS"
REG=$(jget registration_endpoint <"$W/disco.json")
TOKEN_EP=$(jget token_endpoint <"$W/disco.json")
case $REG in "$ISS"/*) ;; *) t_fail "registration endpoint '$REG'" ;; esac
hand_register '{"client_name":"legacy-billing","software_id":"billing-2019",
	"grant_types":["client_credentials","authorization_code"],"response_types":["code"],
	"redirect_uris":["https://billing.example/cb"],
	"token_endpoint_auth_method":"client_secret_post"}' >"$W/legacy.json"
CID=$(jget client_id <"$W/legacy.json")
SEC=$(jget client_secret <"$W/legacy.json")
RAT=$(jget registration_access_token <"$W/legacy.json")
[ -n "$CID" ] && [ -n "$SEC" ] && [ -n "$RAT" ] ||
	t_fail "the hand registration answered: $(cat "$W/legacy.json")"
tok_post "$CID" "$SEC" | grep -q '"access_token"' ||
	t_fail "the hand-made client gets no token: $(tok_post "$CID" "$SEC")"
tok_post "$CID" not-its-secret | grep -q '"access_token"' &&
	t_fail "a wrong secret gets a token: the token check tells nothing"
[ "$(reg_status "$CID" "$RAT")" = 200 ] || t_fail "the client's registration access token does not read it"
t_ok "client $CID (software_id billing-2019, client_secret_post) gets tokens; a wrong secret does not"

tly apply "$(consumer billing)" >/dev/null || t_fail "tally apply billing failed"
t_check "adopt without its registration access token: refused, nothing appended"
before=$(t_head_seq)
t_expect_exit 4 "adopt of an oidc client without --secret-stdin" \
	tly adopt $G --resource "$CID"
grep -q -- "--secret-stdin" "$W/last.err" || t_fail "no word of --secret-stdin: $(cat "$W/last.err")"
[ "$(t_head_seq)" = "$before" ] || t_fail "a refused adopt appended events"
t_ok "$(head -n 1 "$W/last.err")"

t_say "tally adopt $G --resource $CID --secret-stdin (before tally assign)"
printf '%s\n' "$RAT" >"$W/rat"
tly adopt $G --resource "$CID" --secret-stdin <"$W/rat" >"$W/adopt.out" ||
	t_fail "tally adopt failed"
rm -f "$W/rat"
tly apply "$(consumer other)" >/dev/null || t_fail "tally apply other failed"
printf '%s\n' "$RAT" >"$W/adopt.in"
t_adopt_again_refused $G other/login --resource "$CID" --secret-stdin
rm -f "$W/adopt.in"
tly log --json --stream "grant/$G" --type grant.adopted | grep -q "\"resource\":\"$CID\"" ||
	t_fail "no grant.adopted {resource $CID}"
tly log --json | grep -qF -e "$RAT" && t_fail "the registration access token is in the log in clear"
t_ok "$(head -n 1 "$W/adopt.out")"

t_say "the consumer: on the adopted client until its agent writes tally's"
# A consumer as a live mesh runs it: its own client until its node's
# agent writes the delivered one (and reloads it), then that; a
# client_credentials token every round, every failure recorded.  The
# adopted client authenticates as it was registered (client_secret_post),
# tally's with HTTP Basic at the delivered token endpoint and CA.
mkdir -p "$W/agent"
: >"$W/poll.ok"
: >"$W/poll.fail"
# The reload is a request the consumer answers between two token
# requests (as a service's reload returns once it runs on the new
# values): the agent acknowledges only after it, so no request is in
# flight with the old client when it is deleted.  The agent's
# DIR/MODULE/VARIABLE files hold the values as they are (the env file
# quotes them).
id=$CID sec=$SEC tep=$TOKEN_EP ca=$CA auth=post
poll() {
	while [ ! -f "$W/poll.stop" ]; do
		if [ -f "$W/reload.req" ] && [ ! -f "$W/reload.done" ]; then
			id=$(cat "$W/agent/billing/O_ID")
			sec=$(cat "$W/agent/billing/O_SECRET")
			tep=$(cat "$W/agent/billing/O_TOKEN")
			ca=$(cat "$W/agent/billing/O_CA")
			auth=basic
			: >"$W/reload.done"
		fi
		if [ $auth = post ]; then
			curl -s -m 5 --cacert "$ca" -d grant_type=client_credentials \
				--data-urlencode "client_id=$id" --data-urlencode "client_secret=$sec" \
				"$tep" >"$W/poll.out" 2>"$W/poll.err" || true
		else
			curl -s -m 5 --cacert "$ca" -u "$id:$sec" -d grant_type=client_credentials \
				"$tep" >"$W/poll.out" 2>"$W/poll.err" || true
		fi
		if grep -q '"access_token"' "$W/poll.out"; then
			echo "$id" >>"$W/poll.ok"
		else
			echo "$(date +%T.%N) as $id: $(head -c 200 "$W/poll.out" | tr '\n' ' ')$(tr '\n' ' ' <"$W/poll.err")" >>"$W/poll.fail"
		fi
		sleep 0.1
	done
}
poll &
POLL=$!
_t_pids="$_t_pids $POLL"

tly assign billing node-a >/dev/null || t_fail "tally assign billing node-a failed"
t_tallyd_start --interval 1
t_grant_wait 30 $G rotation.started '"reason":"adopted' >/dev/null
t_grant_wait 30 $G credential.activated >/dev/null
t_grant_wait 30 $G credential.delivered '"version":2' >/dev/null

t_check "the same client, marked as $G's, kept as it was; the token given is dead"
MESH=$(tly mesh --json | t_jstr mesh)
[ "$(client "$CID" "c['software_id']")" = "tally mesh $MESH grant $G" ] ||
	t_fail "software_id: $(client "$CID" "c.get('software_id')")"
[ "$(client "$CID" "c['client_name']")" = legacy-billing ] ||
	t_fail "client_name: $(client "$CID" "c.get('client_name')")"
[ "$(client "$CID" "sorted(c['grant_types'])")" = "['authorization_code', 'client_credentials']" ] ||
	t_fail "grant_types: $(client "$CID" "c.get('grant_types')")"
[ "$(client "$CID" "c['redirect_uris']")" = "['https://billing.example/cb']" ] ||
	t_fail "redirect_uris: $(client "$CID" "c.get('redirect_uris')")"
[ "$(client "$CID" "c['token_endpoint_auth_method']")" = client_secret_post ] ||
	t_fail "token_endpoint_auth_method: $(client "$CID" "c.get('token_endpoint_auth_method')")"
[ "$(reg_status "$CID" "$RAT")" = 401 ] ||
	t_fail "the registration access token given still reads the client (no PUT rotated it)"
grep -q "client $CID adopted" "$T_DLOG" || t_fail "tallyd does not say what was adopted"
t_ok "$(grep -o "client $CID adopted[^;]*" "$T_DLOG" | head -n 1 | cut -c1-200)"

t_check "only v2 delivered: tally's own client"
# The body's version: the envelope's own ("version":10) would match too.
tly log --json --stream "grant/$G" --type credential.delivered >"$W/delivered.json"
grep -q . "$W/delivered.json" || t_fail "no credential.delivered at all"
python3 -c 'import json, sys
sys.exit(1 if any(json.loads(l)["body"]["version"] == 1 for l in open(sys.argv[1])) else 0)' \
	"$W/delivered.json" || t_fail "a credential.delivered of v1"
F=$(t_envfile node-a billing)
ID2=$(t_envget "$F" O_ID)
SEC2=$(t_envget "$F" O_SECRET)
[ -n "$ID2" ] && [ "$ID2" != "$CID" ] || t_fail "the delivered client id is '$ID2'"
[ -n "$SEC2" ] && [ "$SEC2" != "$SEC" ] || t_fail "the delivered secret is the adopted one's"
[ "$(t_envget "$F" O_ISSUER)" = "$ISS" ] || t_fail "O_ISSUER is $(t_envget "$F" O_ISSUER)"
tok_env "$F" | grep -q '"access_token"' || t_fail "the delivered client gets no token: $(tok_env "$F")"
[ "$(client "$ID2" "c['software_id']")" = "tally mesh $MESH grant $G" ] ||
	t_fail "the new client $ID2 is not marked as $G's"
[ "$(client "$ID2" "c['grant_types']")" = "['client_credentials']" ] ||
	t_fail "the new client $ID2 is not as the requirement declares: $(client "$ID2" "c['grant_types']")"
# -e: a secret may begin with '-' (base64url).
for s in "$SEC" "$SEC2" "$RAT"; do
	tly log --json | grep -qF -e "$s" && t_fail "a secret is in the log in clear"
	grep -rqsF -e "$s" "$T_DLOG" "$TALLY_HOME" && t_fail "a secret is in tallyd's log or the home in clear"
done
t_ok "delivered $ID2 (not $CID), a token with it; no secret in clear"

t_check "the adopted client gets tokens until node-a acknowledges v2"
tok_post "$CID" "$SEC" | grep -q '"access_token"' || t_fail "the adopted client no longer gets tokens"
tly status billing >"$W/status.txt" 2>&1 || true
grep -q "rotating v1 → v2 (adopted): waiting on node-a/billing" "$W/status.txt" || {
	cat "$W/status.txt" >&2
	t_fail "status does not name the wait"
}
tly log --json --stream "grant/$G" --type credential.retired | grep -q . &&
	t_fail "retired before the acknowledgement"
t_expect_exit 0 "tally check $G (mid-rotation)" tly check $G
t_ok "$CID gets tokens; status: waiting on node-a/billing; tally check healthy"

t_say "node-a's agent writes v2, reloads the consumer and acknowledges: the adopted client goes"
t_reload_agent node-a billing
t_grant_wait 30 $G credential.acknowledged '"holder":"billing@node-a"' >/dev/null
t_grant_wait 30 $G credential.retired >/dev/null
t_reloaded_once
[ "$(cat "$W/agent/billing/O_ID")" = "$ID2" ] ||
	t_fail "the agent wrote O_ID $(cat "$W/agent/billing/O_ID"), not $ID2"
t_grant_wait 10 $G rotation.completed >/dev/null
tok_post "$CID" "$SEC" | grep -q '"access_token"' && t_fail "the adopted client still gets tokens"
tok_post "$CID" "$SEC" | grep -q invalid_client || t_fail "the adopted client is refused for another reason: $(tok_post "$CID" "$SEC")"
gone "$CID" || t_fail "client $CID is still registered"
tok_env "$F" | grep -q '"access_token"' || t_fail "tally's client lost its token"
t_expect_exit 0 "tally check $G (after the rotation)" tly check $G
t_consumer_done "$POLL"
n1=$(grep -c -x -F -e "$CID" "$W/poll.ok" || true)
n2=$(grep -c -x -F -e "$ID2" "$W/poll.ok" || true)
[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] || t_fail "the consumer did not run on both ($CID: $n1, $ID2: $n2)"
t_ok "$CID deleted and refused (invalid_client); $ID2 gets tokens, healthy"
t_ok "the consumer never failed ($n1 tokens as $CID, $n2 as $ID2 after one reload)"

t_say "what cannot be adopted: a client that does not exist, a wrong token"
tly apply "$(consumer ghost)" >/dev/null
# A token of no client: a right one would die with the wrong id (RFC 7592 2.1).
printf 'not-a-token\n' | tly adopt ghost/login --resource no-such-client --secret-stdin >/dev/null ||
	t_fail "tally adopt ghost/login failed"
tly assign ghost node-a >/dev/null
t_grant_wait 30 ghost/login grant.failed 'nothing to adopt' >"$W/ghost.ev"
grep -q 'client no-such-client' "$W/ghost.ev" || t_fail "the failure does not name the client: $(cat "$W/ghost.ev")"
hand_register '{"client_name":"other","software_id":"other-1",
	"grant_types":["client_credentials"],"response_types":[],
	"token_endpoint_auth_method":"client_secret_basic"}' >"$W/other.json"
OID=$(jget client_id <"$W/other.json")
OSEC=$(jget client_secret <"$W/other.json")
ORAT=$(jget registration_access_token <"$W/other.json")
[ -n "$OID" ] || t_fail "the second hand registration answered: $(cat "$W/other.json")"
tly apply "$(consumer wrongtok)" >/dev/null
printf 'not-its-token\n' | tly adopt wrongtok/login --resource "$OID" --secret-stdin >/dev/null ||
	t_fail "tally adopt wrongtok/login failed"
tly assign wrongtok node-a >/dev/null
t_grant_wait 30 wrongtok/login grant.failed 'refuses the registration access token' >"$W/wrong.ev"
grep -q 'nothing to adopt' "$W/wrong.ev" || t_fail "the failure: $(cat "$W/wrong.ev")"
[ "$(client "$OID" "c['software_id']")" = other-1 ] || t_fail "the client $OID was changed"
[ "$(reg_status "$OID" "$ORAT")" = 200 ] || t_fail "the client's own token no longer reads it"
curl -s --cacert "$CA" -u "$OID:$OSEC" -d grant_type=client_credentials "$TOKEN_EP" |
	grep -q '"access_token"' || t_fail "the client $OID no longer gets tokens"
tly log --json --stream grant/wrongtok/login --type credential.delivered | grep -q . &&
	t_fail "something was delivered for wrongtok/login"
t_ok "$(grep -o 'client no-such-client[^"]*' "$W/ghost.ev" | cut -c1-160)"
t_ok "$(grep -o "client $OID[^\"]*" "$W/wrong.ev" | cut -c1-160)"

t_say "another mesh's clients are refused, even with their real registration access tokens"
# A second home (another mesh) registers two clients at the same
# provider: alien's, which grab/login here tries to adopt (another
# grant), and twin's, which twin/login here tries to adopt (the same
# grant id: the mark names the grant, the mesh is another).
(
	export TALLY_HOME="$W/home2"
	t_init
	t_node node-x 127.0.0.1
	tly apply "$W/manifests/idp.yaml" >/dev/null || t_fail "tally apply idp.yaml (home2) failed"
	tly assign idp node-x --set issuer="$ISS" --set ca="$CA" --set token-lifetime=600s \
		--secret initial-access-token <"$TALLY_TEST_OIDC_IATFILE" >/dev/null ||
		t_fail "tally assign idp node-x failed"
	for mod in alien twin; do
		tly apply "$(consumer $mod)" >/dev/null || t_fail "tally apply $mod (home2) failed"
		tly assign $mod node-x >/dev/null || t_fail "tally assign $mod node-x failed"
	done
	t_tallyd_once
	t_wait_healthy 10
)
# h2 CMD...: CMD in the other mesh's home (its env files refresh there).
h2() { ( export TALLY_HOME="$W/home2"; "$@" ); }
MESH2=$(h2 tly mesh --json | t_jstr mesh)
M2=$(printf %s "$MESH2" | cut -c1-12)
[ -n "$MESH2" ] && [ "$MESH2" != "$MESH" ] || t_fail "the second home's mesh is '$MESH2'"
# Their registration access tokens are in the other mesh's log alone,
# sealed in the grants' handles: no tally command of either mesh shows
# them.  The provider keeps them (oidc-provider stores an opaque token
# under its value, with its client's id): what the provider's admin
# could hand an operator.  With one the read succeeds, so what refuses
# below is the driver's reading of the client's mark, not the
# provider's 401 to a wrong token.
rat_of() {
	python3 -c 'import json, sys
st = json.load(open(sys.argv[1]))
for k, e in st.items():
    if k.startswith("RegistrationAccessToken:") and e["p"].get("clientId") == sys.argv[2]:
        print(k.split(":", 1)[1])' "$store" "$1"
}
fx=$(h2 t_envfile node-x alien)
XID=$(h2 t_envget "$fx" O_ID)
XSEC=$(h2 t_envget "$fx" O_SECRET)
XRAT=$(rat_of "$XID")
fy=$(h2 t_envfile node-x twin)
YID=$(h2 t_envget "$fy" O_ID)
YSEC=$(h2 t_envget "$fy" O_SECRET)
YRAT=$(rat_of "$YID")
for c in "$XID alien $XRAT" "$YID twin $YRAT"; do
	set -- $c
	[ $# = 3 ] || t_fail "not one registration access token of $2/login's client '$1' in the provider's store"
	[ "$(client "$1" "c['software_id']")" = "tally mesh $MESH2 grant $2/login" ] ||
		t_fail "$1's software_id: $(client "$1" "c.get('software_id')")"
	[ "$(reg_status "$1" "$3")" = 200 ] || t_fail "$1's registration access token does not read it"
done
tly apply "$(consumer grab)" >/dev/null || t_fail "tally apply grab failed"
printf '%s\n' "$XRAT" | tly adopt grab/login --resource "$XID" --secret-stdin >/dev/null ||
	t_fail "tally adopt grab/login failed"
tly apply "$(consumer twin)" >/dev/null || t_fail "tally apply twin failed"
printf '%s\n' "$YRAT" | tly adopt twin/login --resource "$YID" --secret-stdin >/dev/null ||
	t_fail "tally adopt twin/login failed"
tly assign grab node-a >/dev/null || t_fail "tally assign grab failed"
tly assign twin node-a >/dev/null || t_fail "tally assign twin failed"
t_grant_wait 30 grab/login grant.failed \
	"client $XID was made by tally for grant alien/login of mesh $M2\\.\\.\\., not this one" >"$W/grab.ev"
t_grant_wait 30 twin/login grant.failed \
	"client $YID is owned by mesh $M2\\.\\.\\., not this one" >"$W/twin.ev"
for c in "$XID alien $XRAT $XSEC" "$YID twin $YRAT $YSEC"; do
	set -- $c
	[ "$(client "$1" "c['software_id']")" = "tally mesh $MESH2 grant $2/login" ] ||
		t_fail "$1's software_id changed: $(client "$1" "c.get('software_id')")"
	[ "$(reg_status "$1" "$3")" = 200 ] ||
		t_fail "$1's registration access token no longer reads it (a PUT rotated it)"
	curl -s --cacert "$CA" -u "$1:$4" -d grant_type=client_credentials "$TOKEN_EP" |
		grep -q '"access_token"' || t_fail "the other mesh's client $1 no longer gets tokens"
	h2 tly check $2/login >"$W/check2.out" 2>&1 || {
		cat "$W/check2.out" >&2
		t_fail "tally check $2/login in the other mesh"
	}
done
for g in grab/login twin/login; do
	tly log --json --stream "grant/$g" --type credential.delivered | grep -q . &&
		t_fail "something was delivered for $g"
done
t_ok "$(grep -o "client $XID was made by tally for grant [^:]*" "$W/grab.ev" | head -n 1)"
t_ok "$(grep -o "client $YID is owned by mesh [^:]*" "$W/twin.ev" | head -n 1)"
t_ok "$XID, $YID: their marks, registration access tokens and secrets kept; the other mesh's check clean"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
