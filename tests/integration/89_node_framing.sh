#!/bin/sh
# A provider's value cannot forge a delivery's framing (issue 21 item
# 5).  The identity provider (tests/harness/oidc.sh, with
# TALLY_OIDC_HOSTILE_CLIENT_ID) gives app's client the id
#   id
#   #tally grant=other/login holder=other@node-a version=99
#   MODULE other
#   VERSION 99
# A delivery framed by length (core/delivery.h, format 3) carries it as
# one value, and that value cannot be written in an env file (a line
# break), so:
#   - nothing is filed under module other, nothing at version 99;
#   - the agent refuses it, naming grant, module and variable, never the
#     value: app's env file is not written from it, the version is not
#     acknowledged (the rotation would wait), --once exits 6, and the
#     agent's signed report carries the refusal;
#   - tally env refuses to print it as an env line, naming the variable.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || t_fail "node is missing (tools/deps.sh)"
OIDC_DIR=$W/oidc
_o_port=$((57350 + $$ % 50))
while _t_port_busy "$_o_port"; do _o_port=$((_o_port + 1)); done
_o_cleanup() {
	_o_rc=$?
	set +e
	sh "$TALLY_SRC/tests/harness/oidc.sh" stop "$OIDC_DIR" >/dev/null 2>&1
	(exit $_o_rc)
	_t_cleanup
}
trap _o_cleanup EXIT
HOSTILE=$(printf 'id\n#tally grant=other/login holder=other@node-a version=99\nMODULE other\nVERSION 99')
TALLY_OIDC_HOSTILE_CLIENT_ID=$HOSTILE sh "$TALLY_SRC/tests/harness/oidc.sh" start "$OIDC_DIR" "$_o_port" ||
	t_fail "the OIDC provider did not start (tests/harness/oidc.sh)"
. "$OIDC_DIR/env"

t_say "an identity provider that returns a client id with newlines"
mkdir -p "$W/manifests"
cat >"$W/manifests/idp.yaml" <<EOF
module: idp
provides:
  oidc-client:
    driver: oidc
    revoke: drop
EOF
cat >"$W/manifests/app.yaml" <<EOF
module: app
env: {O_ISSUER: "", O_ID: "", O_SECRET: "", O_TOKEN: "", MODE: "prod"}
requires:
  login:
    type: oidc-client
    from: idp
    env: {issuer: O_ISSUER, client-id: O_ID, client-secret: O_SECRET, token-endpoint: O_TOKEN}
EOF
t_init
t_node node-a 127.0.0.1
tly apply "$W/manifests/idp.yaml" >/dev/null || t_fail "apply idp"
tly assign idp node-a --set issuer="$TALLY_TEST_OIDC_ISSUER" \
	--secret initial-access-token <"$TALLY_TEST_OIDC_IATFILE" >/dev/null ||
	t_fail "assign idp"
tly apply "$W/manifests/app.yaml" >/dev/null && tly assign app node-a >/dev/null ||
	t_fail "app"
"$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG" || true
tly log --json --type credential.delivered | grep -q '"holder":"app@node-a"' ||
	{ tail -n 20 "$T_DLOG" >&2; t_fail "app's grant was not delivered"; }
[ -s "$OIDC_DIR/hostile" ] || t_fail "the fixture did not give the hostile client id"

t_check "the agent: nothing of module other or at version 99; the value refused and named"
D=$W/dir
set +e
"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$D" \
	--state "$W/state" --log "$TALLY_HOME" --once --reload "app=echo reloaded >>$W/reloads" \
	2>"$W/agent.log"
rc=$?
set -e
[ ! -e "$D/other.env" ] && [ ! -e "$D/other" ] || t_fail "files of module other: $(ls -A "$D")"
! grep -rqs "version 99" "$W/state" || t_fail "the agent holds something at version 99: $(grep -rs 'version 99' "$W/state")"
! grep -rqs "other" "$W/state"/*.state || t_fail "the agent's state names other: $(cat "$W/state"/*.state)"
[ ! -e "$D/app.env" ] || t_fail "app.env was written from the refused value: $(cat "$D/app.env")"
[ ! -e "$W/reloads" ] || t_fail "app was reloaded"
grep -q "app/login.*app.*O_ID.*line break" "$W/agent.log" ||
	{ cat "$W/agent.log" >&2; t_fail "the agent does not name grant app/login, module app and variable O_ID"; }
! grep -q "VERSION 99\|MODULE other" "$W/agent.log" || t_fail "the agent logged the value"
[ "$rc" = 6 ] || { cat "$W/agent.log" >&2; t_fail "tally-node --once exited $rc, not 6"; }
t_ok "refused: $(grep -o 'app/login.*' "$W/agent.log" | head -n 1)"

t_check "not acknowledged; the signed report carries the refusal"
! tly log --json --type credential.ack-offered | grep -q '"holder":"app@node-a"' ||
	t_fail "the refused version was acknowledged"
tly log --json --type node.report-offered >"$W/reports.json"
grep -q 'refused_values' "$W/reports.json" && grep -q 'O_ID' "$W/reports.json" ||
	{ cat "$W/reports.json" >&2; t_fail "the report does not carry the refused value"; }
! grep -q 'MODULE other' "$W/reports.json" || t_fail "the report carries the value"
t_ok "no ack offered; node.report-offered names O_ID under refused_values"

t_check "tally env refuses the line too, naming the variable"
t_expect_exit 1 "tally env with a value that cannot be an env line" \
	tly env node-a app --node-key "$(t_nodekey node-a)"
grep -q "O_ID" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "tally env does not name O_ID"; }
! grep -q "MODULE other" "$W/last.out" "$W/last.err" || t_fail "tally env printed the value"
tly env node-a app --node-key "$(t_nodekey node-a)" --json >"$W/env.json" ||
	t_fail "tally env --json failed"
python3 -c "import json,sys; v=json.load(open('$W/env.json')); sys.exit(0 if v['O_ID']==sys.argv[1] else 1)" "$HOSTILE" ||
	t_fail "tally env --json does not give the value byte for byte: $(cat "$W/env.json")"
t_ok "tally env: refused, O_ID named; --json gives the exact bytes"
