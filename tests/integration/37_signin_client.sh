#!/bin/sh
# Sign-in clients (issue 28 item 2): a requirement of type oidc-client
# declares what a web application signing users in needs (redirect-uris,
# grant-types with authorization_code and refresh_token, response-types,
# post-logout-redirect-uris, token-endpoint-auth-method), against the
# throwaway OpenID Connect provider (tests/harness/oidc.sh):
#   - apply refuses what the provider would, naming file, line and field
#     (http to a host that is not loopback, authorization_code without a
#     redirect URI, a redirect URI without authorization_code, a value
#     not in the list), and the same keys on a type whose driver does
#     not take them;
#   - registered as declared; verified healthy although the client may
#     not use client_credentials (the token endpoint authenticates it
#     first: client_secret_post, a 400 for the grant, not a 401);
#   - an admin's edit of its redirect URIs is a drift, restored;
#   - the manifest's redirect URIs changed and applied: the provider
#     follows at the next check;
#   - a real relying party (npm openid-client) signs a user in with the
#     authorization-code flow and PKCE with the delivered values (the
#     fixture's login scripted), and a wrong PKCE verifier is refused;
#   - a rotation's new client carries the same metadata and signs users
#     in; the old one does until its retirement after the ack, then not.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"
t_oidc_start
store=$OIDC_DIR/store.json

# client ID PYTHON-EXPR: the expression on the client's record c, printed.
client() {
	python3 -c "import json; c=json.load(open('$store'))['Client:$1']['p']; print($2)"
}

mkdir -p "$W/manifests"
cat >"$W/manifests/idp.yaml" <<EOF
module: idp
provides:
  oidc-client:
    driver: oidc
    revoke: drop
EOF
# web REDIRECTS [EXTRA-LINES]: the sign-in client's manifest.
web() {
	cat >"$W/manifests/web.yaml" <<EOF
module: web
env: {O_ID: "", O_SECRET: "", O_TOKEN: ""}
requires:
  login:
    type: oidc-client
    from: idp
    env: {client-id: O_ID, client-secret: O_SECRET, token-endpoint: O_TOKEN}
    grant-types: [authorization_code, refresh_token]
    redirect-uris: [$1]
    token-endpoint-auth-method: client_secret_post
${2:-}
EOF
	echo "$W/manifests/web.yaml"
}

t_init
t_node node-a 127.0.0.1

t_check "apply refuses what the provider would refuse, naming file, line and field"
bad() {	# WHAT PATTERN FILE-BODY
	printf '%s\n' "$3" >"$W/manifests/bad.yaml"
	t_expect_exit 4 "apply: $1" tly apply "$W/manifests/bad.yaml"
	grep -q "bad.yaml:[0-9]*.*$2" "$W/last.err" ||
		t_fail "the refusal of $1 does not say '$2' with file and line: $(cat "$W/last.err")"
}
hdr='module: bad
requires:
  login:
    type: oidc-client
    from: idp'
bad "http to a remote host" "redirect-uris: http://app.example/cb is http" "$hdr
    grant-types: [authorization_code]
    redirect-uris: [http://app.example/cb]"
bad "authorization_code without redirect-uris" "authorization_code needs redirect-uris" "$hdr
    grant-types: [authorization_code]"
bad "redirect-uris without authorization_code" "redirect-uris serves only the authorization_code grant" "$hdr
    redirect-uris: [https://app.example/cb]"
bad "an unknown grant type" "grant-types: 'implicit' is not one of the values" "$hdr
    grant-types: [implicit]"
bad "a list where one value goes" "token-endpoint-auth-method.*takes one value" "$hdr
    token-endpoint-auth-method: [client_secret_post]"
bad "the keys on a postgres-database requirement" "requires.login.redirect-uris.*unknown key" "module: bad
requires:
  login:
    type: postgres-database
    from: pg
    redirect-uris: [https://app.example/cb]"
t_ok "refused: $(head -n 1 "$W/last.err")"

t_say "a sign-in client for web"
tly apply "$W/manifests/idp.yaml" >/dev/null || t_fail "tally apply idp.yaml failed"
tly assign idp node-a --set issuer="$ISS" \
	--secret initial-access-token <"$TALLY_TEST_OIDC_IATFILE" >/dev/null ||
	t_fail "tally assign idp failed"
R1="https://web.example/cb, 'http://127.0.0.1:8080/cb'"
tly apply "$(web "$R1" "    post-logout-redirect-uris: [https://web.example/bye]")" >/dev/null ||
	t_fail "tally apply web.yaml failed"
tly log --json --stream module/web --type requirement.declared | grep -q '"redirect-uris"' ||
	t_fail "the requirement's params are not in requirement.declared"
tly assign web node-a >/dev/null || t_fail "tally assign web failed"
tly explain web >"$W/explain.out" || t_fail "tally explain web failed"
grep -q "declares: grant-types authorization_code, refresh_token; post-logout-redirect-uris https://web.example/bye; redirect-uris https://web.example/cb, http://127.0.0.1:8080/cb; token-endpoint-auth-method client_secret_post" "$W/explain.out" ||
	t_fail "tally explain does not show what the requirement declares: $(cat "$W/explain.out")"
tly status web --json | python3 -c "import json,sys; d=json.load(sys.stdin); r=d['assignments'][0]['requirements'][0]; sys.exit(0 if r['params']['redirect-uris']==['https://web.example/cb','http://127.0.0.1:8080/cb'] else 1)" ||
	t_fail "tally status --json does not carry the params as lists"
t_tallyd_once
t_wait_healthy 10

t_check "registered as declared"
E=$(t_envfile node-a web)
ID=$(t_envget "$E" O_ID)
[ -n "$ID" ] || t_fail "no client id delivered"
[ "$(client "$ID" "sorted(c['grant_types'])")" = "['authorization_code', 'refresh_token']" ] ||
	t_fail "grant_types: $(client "$ID" "c['grant_types']")"
[ "$(client "$ID" "c['redirect_uris']")" = "['https://web.example/cb', 'http://127.0.0.1:8080/cb']" ] ||
	t_fail "redirect_uris: $(client "$ID" "c['redirect_uris']")"
[ "$(client "$ID" "c['response_types']")" = "['code']" ] ||
	t_fail "response_types: $(client "$ID" "c['response_types']")"
[ "$(client "$ID" "c['post_logout_redirect_uris']")" = "['https://web.example/bye']" ] ||
	t_fail "post_logout_redirect_uris: $(client "$ID" "c.get('post_logout_redirect_uris')")"
[ "$(client "$ID" "c['token_endpoint_auth_method']")" = client_secret_post ] ||
	t_fail "token_endpoint_auth_method: $(client "$ID" "c['token_endpoint_auth_method']")"
t_ok "$ID: authorization_code + refresh_token, two redirect URIs, code, client_secret_post"

t_check "the delivered secret authenticates (a 400 for the grant it may not use, not a 401)"
st=$(curl -s -o "$W/tok.json" -w '%{http_code}' -d grant_type=client_credentials \
	--data-urlencode "client_id=$ID" --data-urlencode "client_secret=$(t_envget "$E" O_SECRET)" \
	"$(t_envget "$E" O_TOKEN)")
[ "$st" = 400 ] || t_fail "the token endpoint answered $st: $(cat "$W/tok.json")"
st=$(curl -s -o "$W/tok.json" -w '%{http_code}' -d grant_type=client_credentials \
	--data-urlencode "client_id=$ID" --data-urlencode "client_secret=wrong" \
	"$(t_envget "$E" O_TOKEN)")
[ "$st" = 401 ] || t_fail "a wrong secret got $st, not 401: $(cat "$W/tok.json")"
t_expect_exit 0 "tally check web/login (healthy)" tly check web/login
t_ok "400 with the secret, 401 without; tally check healthy"

t_check "a real client (openid-client) signs a user in: authorization code with PKCE, the delivered values"
rp() {	# ENVFILE [wrong-verifier]
	node "$TALLY_SRC/tests/harness/oidc-rp.js" "$ISS" "$(t_envget "$1" O_ID)" \
		"$(t_envget "$1" O_SECRET)" "${RP_REDIRECT:-http://127.0.0.1:8080/cb}" \
		client_secret_post ${2:-}
}
out=$(rp "$E") || t_fail "the authorization-code flow failed: $out"
printf '%s' "$out" | grep -q '"sub":"alice".*"id_token":true.*"access_token":true.*"refreshed":true' ||
	t_fail "the flow's tokens (and the refresh refresh_token allows): $out"
out=$(rp "$E" wrong-verifier) && t_fail "a code was exchanged with the wrong PKCE verifier: $out"
printf '%s' "$out" | grep -q invalid_grant || t_fail "the wrong verifier was refused for another reason: $out"
t_ok "signed in as alice (ID token, access token, refreshed); the wrong verifier refused: $(printf '%s' "$out" | cut -c1-120)"

t_check "without refresh_token among its grant types, no refresh token"
cat >"$W/manifests/web2.yaml" <<EOF
module: web2
env: {O_ID: "", O_SECRET: ""}
requires:
  login:
    type: oidc-client
    from: idp
    env: {client-id: O_ID, client-secret: O_SECRET}
    grant-types: [authorization_code]
    redirect-uris: ['http://127.0.0.1:8080/cb']
    token-endpoint-auth-method: client_secret_post
EOF
tly apply "$W/manifests/web2.yaml" >/dev/null && tly assign web2 node-a >/dev/null ||
	t_fail "web2 failed"
t_tallyd_once
out=$(rp "$(t_envfile node-a web2)") || t_fail "web2's flow failed: $out"
printf '%s' "$out" | grep -q '"access_token":true,"refreshed":false' ||
	t_fail "web2 was refreshed, or got no token: $out"
t_ok "web2 signs in, and gets no refresh token"

t_check "an admin points the client elsewhere: a drift, restored"
t_oidc_edit "$ID" 'c["redirect_uris"] = ["https://evil.example/cb"]'
t_expect_exit 8 "tally check web/login (redirect URIs edited)" tly check web/login
grep -q redirect_uris "$W/last.out" || t_fail "the drift does not name redirect_uris: $(cat "$W/last.out")"
[ "$(client "$ID" "c['redirect_uris']")" = "['https://web.example/cb', 'http://127.0.0.1:8080/cb']" ] ||
	t_fail "not restored: $(client "$ID" "c['redirect_uris']")"
t_expect_exit 0 "tally check web/login (restored)" tly check web/login
t_ok "restored to the manifest's"

t_check "the manifest's redirect URIs change: the provider follows"
tly apply "$(web "https://web.example/cb2")" >/dev/null || t_fail "tally apply web.yaml (changed) failed"
t_expect_exit 8 "tally check web/login (the requirement changed)" tly check web/login
ID2=$(t_envget "$(t_envfile node-a web)" O_ID)
[ "$(client "$ID2" "c['redirect_uris']")" = "['https://web.example/cb2']" ] ||
	t_fail "redirect_uris after the change: $(client "$ID2" "c['redirect_uris']")"
[ "$(client "$ID2" "c.get('post_logout_redirect_uris', [])")" = "[]" ] ||
	t_fail "post_logout_redirect_uris left: $(client "$ID2" "c.get('post_logout_redirect_uris')")"
t_expect_exit 0 "tally check web/login (after)" tly check web/login
t_ok "$ID2: ['https://web.example/cb2'], no logout URI"

t_check "a rotation's new client carries the metadata, and signs users in; the old one until it is retired"
RP_REDIRECT=https://web.example/cb2
cp "$(t_envfile node-a web)" "$W/v1.env"
tly rotate web/login >/dev/null || t_fail "tally rotate web/login failed"
t_tallyd_once
t_tallyd_once
cp "$(t_envfile node-a web)" "$W/v2.env"
ID3=$(t_envget "$W/v2.env" O_ID)
[ "$ID3" != "$ID2" ] || t_fail "the rotation delivered no new client"
out=$(rp "$W/v2.env") || t_fail "the new client's flow failed: $out"
out=$(rp "$W/v1.env") || t_fail "the old client's flow failed before the ack: $out"
tly ack node-a web 2 >/dev/null || t_fail "tally ack node-a web 2 failed"
t_tallyd_once
t_tallyd_once
tly log --json --stream grant/web/login --type credential.retired | grep -q . ||
	t_fail "v1 was not retired after the ack"
out=$(rp "$W/v1.env") && t_fail "the retired client still signs users in: $out"
out=$(rp "$W/v2.env") || t_fail "the new client's flow failed after the retirement: $out"
[ "$(client "$ID3" "sorted(c['grant_types'])")" = "['authorization_code', 'refresh_token']" ] &&
[ "$(client "$ID3" "c['redirect_uris']")" = "['https://web.example/cb2']" ] &&
[ "$(client "$ID3" "c['token_endpoint_auth_method']")" = client_secret_post ] ||
	t_fail "the new client $ID3 is not as declared: $(client "$ID3" "c")"
t_ok "$ID3 as declared"
