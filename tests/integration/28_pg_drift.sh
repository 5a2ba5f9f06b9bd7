#!/bin/sh
# Drift of a PostgreSQL grant that verification used to miss (issue 21
# items 19, 20), end to end through tally check, with psql as the
# consumer (the delivered credential):
#   - a role setting put on the login by hand (statement_timeout = 1ms,
#     search_path) or on its database: tally check finds it
#     (privileges-changed, exit 8 after the repair), grant.drifted and
#     grant.repaired are recorded, and the consumer's queries run again;
#   - each database privilege of the owner revoked by hand (CREATE,
#     TEMPORARY, CONNECT), and schema public's: found and repaired, and
#     then every privilege is back: the consumer creates a schema, a
#     temporary table and a table in public.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL; one consumer"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a network
tly apply "$(t_consumer app)" >/dev/null || t_fail "tally apply app failed"
tly assign app node-a >/dev/null || t_fail "tally assign app failed"
t_tallyd_once
t_wait_healthy 10
F=$(t_envfile node-a app)
DB=$(t_envget "$F" DB_NAME)
LOGIN=$(t_envget "$F" DB_USER)
OWNER=$(t_grec app/db owner)
t_env_psql "$F" "SELECT 1" >/dev/null || t_fail "the consumer cannot log in"
# sqlin DB SQL: as the admin, in database DB.
sqlin() {
	psql -X -At -q -v ON_ERROR_STOP=1 -h "$TALLY_TEST_PG_SOCK" \
		-p "$TALLY_TEST_PG_PORT" -U "$TALLY_TEST_PG_USER" -d "$1" -c "$2"
}

# drifted WHAT SQL [DB]: SQL by hand as the admin; tally check must find
# it (exit 8: found and repaired), record drifted + repaired, and be
# healthy again (exit 0).
drifted() {
	_d_before=$(tly log --json --stream grant/app/db --type grant.repaired | wc -l)
	sqlin "${3:-postgres}" "$2" || t_fail "$1: $2 failed"
	t_expect_exit 8 "tally check after $1" tly check
	grep -q "privileges" "$W/last.out" "$W/last.err" ||
		t_fail "$1: tally check does not say privileges: $(cat "$W/last.out" "$W/last.err")"
	[ "$(tly log --json --stream grant/app/db --type grant.repaired | wc -l)" -gt "$_d_before" ] ||
		t_fail "$1: no grant.repaired recorded"
	t_expect_exit 0 "tally check after repairing $1" tly check
}

t_check "role settings tally did not set are found and reset"
drifted "statement_timeout on the login" "ALTER ROLE \"$LOGIN\" SET statement_timeout = '1ms'"
tly log --json --stream grant/app/db --type grant.drifted | tail -n 1 | grep -q "statement_timeout=1ms" ||
	t_fail "grant.drifted does not name the setting: $(tly log --json --stream grant/app/db --type grant.drifted | tail -n 1)"
[ "$(t_env_psql "$F" "SHOW statement_timeout")" = 0 ] || t_fail "the consumer's statement_timeout is $(t_env_psql "$F" "SHOW statement_timeout")"
t_env_psql "$F" "SELECT pg_sleep(0.05)" >/dev/null || t_fail "the consumer's query is cancelled after the repair"
drifted "search_path on the login" "ALTER ROLE \"$LOGIN\" SET search_path = 'nowhere'"
[ "$(t_env_psql "$F" "SHOW search_path")" = '"$user", public' ] || t_fail "search_path is $(t_env_psql "$F" "SHOW search_path")"
drifted "a setting in the database" "ALTER ROLE \"$LOGIN\" IN DATABASE \"$DB\" SET statement_timeout = '1ms'"
drifted "a database-wide setting" "ALTER DATABASE \"$DB\" SET statement_timeout = '1ms'"
t_env_psql "$F" "SELECT pg_sleep(0.05)" >/dev/null || t_fail "the consumer's query is cancelled after the repairs"
t_ok "login, in-database and database-wide settings: found, reset, queries run"

t_check "each privilege of the owner revoked by hand is found and given back"
i=0
for p in CREATE TEMPORARY CONNECT ALL; do
	drifted "REVOKE $p ON DATABASE" "REVOKE $p ON DATABASE \"$DB\" FROM \"$OWNER\""
	i=$((i + 1))
	t_env_psql "$F" "CREATE SCHEMA s$i; CREATE TEMP TABLE t$i (x int); CREATE TABLE public.p$i (x int)" ||
		t_fail "after REVOKE $p and the repair, the consumer cannot create a schema, a temp table, a table"
done
for p in CREATE ALL; do
	drifted "REVOKE $p ON SCHEMA public" "REVOKE $p ON SCHEMA public FROM \"$OWNER\"" "$DB"
	i=$((i + 1))
	t_env_psql "$F" "CREATE TABLE public.p$i (x int); SELECT count(*) FROM public.p$i" >/dev/null ||
		t_fail "after REVOKE $p ON SCHEMA public and the repair, the consumer cannot use public"
done
t_ok "CREATE, TEMPORARY, CONNECT, ALL on the database and schema public: all back, as the consumer proves"
