#!/bin/sh
# One consumer's OIDC client introspecting another's token (issue 21 item
# 32).  Against the fixture configured as oidc-provider 8 ships (its
# default features.introspection.allowedPolicy, as a real deployment
# that did not change it; Keycloak behaves alike), with two consumers
# registered by the driver:
#   - app-b's client introspects app-a's token: what the provider answers
#     is recorded here (active, with app-a's client_id: nothing the
#     driver registers through RFC 7591/7592 can limit it: oidc-provider
#     8 has no per-client introspection setting, its one client auth
#     method is the token endpoint's, which client_credentials needs);
#   - so the driver declares it (isolation_note), and tally status,
#     tally status --json and tally explain show it beside each grant.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"
t_oidc_start

mkdir -p "$W/manifests"
cat >"$W/manifests/idp.yaml" <<EOF2
module: idp
provides:
  oidc-client:
    driver: oidc
    revoke: drop
EOF2
consumer() {
	cat >"$W/manifests/$1.yaml" <<EOF2
module: $1
env: {O_ID: "", O_SECRET: "", O_TOKEN: ""}
requires:
  login:
    type: oidc-client
    from: idp
    env: {client-id: O_ID, client-secret: O_SECRET, token-endpoint: O_TOKEN}
EOF2
	echo "$W/manifests/$1.yaml"
}

t_say "two consumers of one identity provider"
t_init
t_node node-a 127.0.0.1
tly apply "$W/manifests/idp.yaml" >/dev/null || t_fail "tally apply idp.yaml failed"
tly assign idp node-a --expose network --set issuer="$ISS" \
	--secret initial-access-token <"$TALLY_TEST_OIDC_IATFILE" >/dev/null ||
	t_fail "tally assign idp node-a failed"
for m in app-a app-b; do
	tly apply "$(consumer $m)" >/dev/null && tly assign $m node-a >/dev/null ||
		t_fail "$m failed"
done
t_tallyd_once
t_wait_healthy 10
A=$(t_envfile node-a app-a)
B=$(t_envfile node-a app-b)
IA=$(t_envget "$A" O_ID)
TOK=$(curl -s -u "$IA:$(t_envget "$A" O_SECRET)" -d grant_type=client_credentials \
	"$(t_envget "$A" O_TOKEN)" | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')
[ -n "$TOK" ] || t_fail "app-a gets no token"
INTRO=$(curl -s "$ISS/.well-known/openid-configuration" |
	sed -n 's/.*"introspection_endpoint":"\([^"]*\)".*/\1/p')
[ -n "$INTRO" ] || t_fail "the provider names no introspection endpoint"

t_check "what the provider lets app-b do with app-a's token"
curl -s -u "$(t_envget "$B" O_ID):$(t_envget "$B" O_SECRET)" --data-urlencode "token=$TOK" \
	"$INTRO" >"$W/intro.json"
if grep -q '"active":false' "$W/intro.json"; then
	t_ok "refused: app-b sees active:false for app-a's token"
elif grep -q '"active":true' "$W/intro.json" && grep -q "\"client_id\":\"$IA\"" "$W/intro.json"; then
	t_note "the provider lets app-b introspect app-a's token ($(cat "$W/intro.json")): its default policy, which no registration changes"
else
	t_fail "unexpected introspection answer: $(cat "$W/intro.json")"
fi

t_check "the driver declares what stays possible; status and explain show it"
t_expect_exit 0 "tally status" tly status
grep -q "note: any client of the identity provider may introspect" "$W/last.out" ||
	t_fail "tally status does not show the introspection note: $(cat "$W/last.out")"
[ "$(grep -c 'note: any client of the identity provider may introspect' "$W/last.out")" -eq 2 ] ||
	t_fail "tally status does not show the note beside both grants: $(cat "$W/last.out")"
t_expect_exit 0 "tally status --json" tly status --json
grep -q '"isolation_note":"any client of the identity provider may introspect' "$W/last.out" ||
	t_fail "tally status --json has no isolation_note: $(cat "$W/last.out")"
t_expect_exit 0 "tally explain app-a" tly explain app-a
grep -q "note: any client of the identity provider may introspect" "$W/last.out" ||
	t_fail "tally explain does not show the note: $(cat "$W/last.out")"
grep -q "features.introspection.allowedPolicy" "$W/last.out" ||
	t_fail "the note does not say where the provider limits it: $(cat "$W/last.out")"
t_ok "status (both grants), status --json and explain name it, and where to limit it"
