#!/bin/sh
# The server's maintenance databases (postgres, template1) are nobody's
# grant: PostgreSQL's default lets PUBLIC connect to them, so every
# consumer's login could.  The provider setting revoke-public-connect
# (yes | no, default yes) revokes CONNECT there from PUBLIC, the admin
# keeping it; the verifier finds it granted again and repairs it like
# any grant's privileges; when the setting is no, tally leaves it and
# tally status says so for that provider.
. "$(dirname "$0")/lib.sh"

public_connect() {
	t_sql "SELECT coalesce(string_agg(d.datname, ',' ORDER BY d.datname), '') FROM pg_database d,
		aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
		WHERE d.datname IN ('postgres', 'template1') AND a.grantee = 0
		AND a.privilege_type = 'CONNECT'"
}
head_seq() { tly log --json | tail -n 1 | t_jfields seq; }

t_say "throwaway PostgreSQL; a provider with the default settings"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app-a)" >/dev/null
tly assign app-a node-a >/dev/null
t_tallyd_once
t_wait_healthy 5
A=$(t_envfile node-a app-a)

t_check "the consumer's login cannot connect to postgres or template1; the admin can"
for db in postgres template1; do
	if t_env_psql "$A" $db "SELECT 1" >"$W/deny.out" 2>&1; then
		t_fail "$(t_envget "$A" DB_USER) connected to the maintenance database $db"
	fi
	grep -q "permission denied for database \"$db\"" "$W/deny.out" || {
		cat "$W/deny.out" >&2
		t_fail "connecting to $db failed, but not with 'permission denied for database'"
	}
done
[ -z "$(public_connect)" ] || t_fail "PUBLIC can still connect to: $(public_connect)"
[ "$(PGPASSWORD=$(cat "$TALLY_TEST_PG_PWFILE") psql -X -At -h 127.0.0.1 \
	-p "$TALLY_TEST_PG_PORT" -U "$TALLY_TEST_PG_USER" -d postgres -c "SELECT 1")" = 1 ] ||
	t_fail "the admin cannot connect to postgres any more"
t_ok "permission denied on both; PUBLIC has no CONNECT there; the admin connects"
if tly status postgres | grep -q 'revoke-public-connect'; then
	t_fail "tally status mentions revoke-public-connect while it is on"
fi

t_check "CONNECT granted to PUBLIC again: tally check finds the drift and repairs it"
t_sql "GRANT CONNECT ON DATABASE postgres TO PUBLIC" >/dev/null
since=$(head_seq)
# Exit 8: drift was found and everything repaired (tally check).
set +e
tly check --all >"$W/check.out" 2>&1
rc=$?
set -e
[ $rc -eq 8 ] || { cat "$W/check.out" >&2; t_fail "tally check did not repair (exit $rc, not 8)"; }
tly log --json --from "$((since + 1))" --stream grant/app-a/db >"$W/ev"
grep '"type":"grant.drifted"' "$W/ev" | grep -q 'PUBLIC can connect to postgres' || {
	cat "$W/ev" >&2
	t_fail "no grant.drifted naming PUBLIC's CONNECT on postgres"
}
grep -q '"type":"grant.repaired"' "$W/ev" || t_fail "no grant.repaired"
[ -z "$(public_connect)" ] || t_fail "after the repair PUBLIC can still connect to: $(public_connect)"
t_env_psql "$A" postgres "SELECT 1" >/dev/null 2>&1 &&
	t_fail "the consumer connects to postgres after the repair"
t_ok "grant.drifted privileges-changed + grant.repaired; PUBLIC has no CONNECT again"

t_say "revoke-public-connect=no"
tly assign postgres node-a --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --set revoke-public-connect=no \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
	t_fail "tally assign postgres with revoke-public-connect=no failed"
t_check "tally status says so for the provider"
tly status postgres >"$W/st" 2>&1 || true
grep -q 'revoke-public-connect is off' "$W/st" || { cat "$W/st" >&2; t_fail "tally status does not say revoke-public-connect is off"; }
tly status --json postgres | grep -q '"settings_note": *"revoke-public-connect is off' ||
	t_fail "tally status --json has no settings_note saying revoke-public-connect is off"
t_ok "$(grep 'revoke-public-connect' "$W/st" | sed 's/^ *//')"

t_check "tally leaves PUBLIC's CONNECT alone: no drift, no repair"
t_sql "GRANT CONNECT ON DATABASE postgres TO PUBLIC" >/dev/null
since=$(head_seq)
t_expect_exit 0 "tally check --all (setting off)" tly check --all
t_tallyd_once
! tly log --json --from "$((since + 1))" | grep -q '"type":"grant.\(drifted\|repaired\)"' ||
	t_fail "tally drifted or repaired with revoke-public-connect=no"
[ "$(public_connect)" = postgres ] || t_fail "PUBLIC's CONNECT is '$(public_connect)'"
t_ok "healthy; PUBLIC keeps CONNECT on postgres"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check differs"
t_ok "chain sound; projections rebuild identically"
