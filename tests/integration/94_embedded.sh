#!/bin/sh
# An embedded private instance (docs/manifest.md, "embedded"): tally
# generates its credential and delivers it to the module's assignment,
# and the instance stays unbindable.  A real PostgreSQL server plays
# the module's own instance: the module sets its password from what
# was delivered (as an image's POSTGRES_PASSWORD would), then connects
# with it over TCP.
#
#   the credential        VEC_PASSWORD is delivered to vec@node-a, sealed
#                         to node-a (no plaintext in the log), 32 chars;
#   the instance          logs in with it (and not with a wrong one);
#   unbindable            tally bind to it is refused, nothing appended;
#   replay                tally rebuild --check is identical.
. "$(dirname "$0")/lib.sh"

t_say "a throwaway PostgreSQL server: vec's own embedded instance"
t_pg_start emb
t_init
t_node node-a 127.0.0.1
mkdir -p "$W/manifests"
cat >"$W/manifests/vec.yaml" <<'YAML'
module: vec
env: { VEC_PASSWORD: "" }
embedded:
  vectors:
    type: postgres-database
    runs: "pgvector/pgvector:pg16"
    env: { password: VEC_PASSWORD }
YAML
tly apply "$W/manifests/vec.yaml" >/dev/null || t_fail "tally apply vec.yaml"
tly assign vec node-a >/dev/null || t_fail "tally assign vec node-a"
t_tallyd_once

t_check "the embedded instance's credential is delivered to vec@node-a"
E=$(t_envfile node-a vec)
[ -f "$E" ] || t_fail "nothing delivered to vec@node-a (tally env node-a vec is empty)"
PW=$(t_envget "$E" VEC_PASSWORD)
[ "${#PW}" -ge 24 ] || t_fail "VEC_PASSWORD is '${#PW}' characters long, expected a generated credential"
tly log --json >"$W/log.json"
grep -q -- "$PW" "$W/log.json" && t_fail "the embedded credential is in the log in plaintext"
grep -q -- "$PW" "$TALLY_HOME"/* 2>/dev/null && t_fail "the embedded credential is on disk in plaintext"
[ "$(tly log --json --type credential.delivered | grep -c '"holder":"vec@node-a"')" -ge 1 ] ||
	t_fail "no credential.delivered for vec@node-a"
t_ok "VEC_PASSWORD delivered (${#PW} characters), sealed to node-a"

t_check "the instance takes it: the module sets it and logs in with it"
t_sql "ALTER ROLE $TALLY_TEST_PG_USER PASSWORD '$PW'" >/dev/null
[ "$(PGPASSWORD=$PW psql -X -At -q -h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" \
	-U "$TALLY_TEST_PG_USER" -d postgres -c 'SELECT 1')" = 1 ] ||
	t_fail "the embedded instance refuses the delivered credential"
if PGPASSWORD=wrong-$PW psql -X -At -q -h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" \
	-U "$TALLY_TEST_PG_USER" -d postgres -c 'SELECT 1' >/dev/null 2>&1; then
	t_fail "the embedded instance takes any password: the check above proves nothing"
fi
t_ok "logged in to the embedded instance with the delivered credential"

t_check "a second pass delivers nothing new; the credential stays"
n=$(tly log --json --type credential.delivered | wc -l)
t_tallyd_once
[ "$(tly log --json --type credential.delivered | wc -l)" = "$n" ] ||
	t_fail "a second pass delivered again"
[ "$(t_envget "$E" VEC_PASSWORD)" = "$PW" ] || t_fail "the credential changed on a second pass"
t_ok "one delivery"

t_check "tally status and tally explain show it"
tly status vec >"$W/st" 2>&1 || { cat "$W/st" >&2; t_fail "tally status vec"; }
grep -q "vectors .*embedded .*its own instance (postgres-database), grant provisioned" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not show the embedded instance"; }
tly explain vec >"$W/ex" 2>&1 || t_fail "tally explain vec"
grep -q "vectors (embedded postgres-database on node-a, grant vec/vectors@node-a): its own instance" "$W/ex" ||
	{ cat "$W/ex" >&2; t_fail "tally explain does not show the embedded instance"; }
t_ok "$(grep vectors "$W/st" | sed 's/^ *//')"

t_check "the instance stays unbindable"
t_provider node-a local
tly status >"$W/st" 2>&1 || true
if tly bind vec/vectors node-a/postgres >"$W/last.out" 2>"$W/last.err"; then
	t_fail "tally bind to an embedded instance succeeded"
fi
[ "$(tly log --json --type binding.made | grep -c '"module":"vec"')" = 0 ] ||
	t_fail "vec's embedded instance got a binding"
t_ok "refused: $(head -n 1 "$W/last.err" | cut -c1-100)"

t_check "no rotation, no rebind of an embedded credential (tally assign --consolidate moves it)"
t_expect_exit 4 "tally rotate of an embedded credential" tly rotate vec/vectors@node-a
t_expect_exit 4 "tally rebind of an embedded credential" tly rebind vec/vectors@node-a node-a/postgres --migrate
grep -q -- "--consolidate vectors" "$W/last.err" || t_fail "the refusal does not point at --consolidate: $(cat "$W/last.err")"

t_check "unassigned: its credential is revoked (nothing retained); assigned again: a new one"
tly unassign vec node-a >/dev/null || t_fail "tally unassign vec node-a"
t_tallyd_once
tly log --json --stream grant/vec/vectors@node-a --type grant.revoked >"$W/revoked"
[ "$(wc -l <"$W/revoked")" = 1 ] || t_fail "the embedded credential was not revoked with its assignment"
grep -q '"policy":"drop"' "$W/revoked" || t_fail "an embedded credential revoked as retained: $(cat "$W/revoked")"
tly status --json >"$W/stj" 2>&1 || true
grep -q 'vec/vectors' "$W/stj" && grep -q '"retained":\[[^]]*vec/vectors' "$W/stj" &&
	t_fail "tally status lists the embedded credential as retained data"
tly assign vec node-a >/dev/null || t_fail "tally assign vec node-a (again)"
t_tallyd_once
PW2=$(t_envget "$E" VEC_PASSWORD)
[ "${#PW2}" -ge 24 ] && [ "$PW2" != "$PW" ] || t_fail "assigned again: no new embedded credential"
t_ok "revoked (drop) with the assignment; a new credential on the next one"

t_check "an instance withdrawn from the manifest: its credential is revoked"
printf 'module: vec\nenv: { VEC_PASSWORD: "" }\n' >"$W/manifests/vec2.yaml"
tly apply "$W/manifests/vec2.yaml" >/dev/null || t_fail "tally apply vec2.yaml"
tly log --json --stream grant/vec/vectors@node-a --type revocation.requested | tail -n 1 |
	grep -q "embedded instance withdrawn" || t_fail "no revocation when the instance was withdrawn"
t_tallyd_once
[ "$(tly log --json --stream grant/vec/vectors@node-a --type grant.revoked | wc -l)" = 2 ] ||
	t_fail "the withdrawn instance's credential was not revoked"
t_ok "revocation.requested (embedded instance withdrawn), grant.revoked"

t_check "tally rebuild --check"
tly rebuild --check >"$W/rb" 2>&1 || { cat "$W/rb" >&2; t_fail "tally rebuild --check"; }
t_ok "identical"
