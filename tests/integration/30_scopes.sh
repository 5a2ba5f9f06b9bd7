#!/bin/sh
# Scopes and routable names, against a real PostgreSQL.
#
#   per-instance on two nodes -> two databases, two credentials;
#   shared on two nodes       -> one database, two holders (two env files
#                                with the same DB_NAME/DB_USER/DB_PASSWORD).
#
# The provider runs on node-a with exposure network: it serves node-b
# too (a local one serves only node-a: 33_exposure), and every holder,
# node-a's as well, is given node-a's routable name, never loopback
# (loopback is for a local provider's own node).  For that to be
# visible and still testable on one machine, node-a's routable name is
# "localhost": a different string from 127.0.0.1 that still resolves to
# the loopback the test server listens on.
# node-b's routable name is never given to anyone here: it is the
# consumer's node, and its name must not leak into the env files.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL; node-a (localhost) hosts postgres, node-b (node-b.test)"
t_pg_start
t_init
t_node node-a localhost
t_node node-b node-b.test
t_provider node-a network
tly apply "$(t_consumer per-app per-instance)" "$(t_consumer shared-app shared)" >/dev/null
base=$(t_sql "SELECT count(*) FROM pg_database")
tly assign per-app node-a >/dev/null
tly assign per-app node-b >/dev/null
tly assign shared-app node-a >/dev/null
t_tallyd_once
t_wait_healthy 5

t_say "per-instance on two nodes"
PA=$(t_envfile node-a per-app)
PB=$(t_envfile node-b per-app)
DA=$(t_gname per-app/db@node-a per-app-db-node-a)
DB=$(t_gname per-app/db@node-b per-app-db-node-b)
DS=$(t_gname shared-app/db shared-app-db)
t_check "two env files, two databases, two logins, two passwords"
[ "$(t_envget "$PA" DB_NAME)" = "$DA" ] ||
	t_fail "node-a's DB_NAME is '$(t_envget "$PA" DB_NAME)', expected $DA"
[ "$(t_envget "$PB" DB_NAME)" = "$DB" ] ||
	t_fail "node-b's DB_NAME is '$(t_envget "$PB" DB_NAME)', expected $DB"
[ "$(t_envget "$PA" DB_USER)" != "$(t_envget "$PB" DB_USER)" ] ||
	t_fail "both instances got the login $(t_envget "$PA" DB_USER)"
[ "$(t_envget "$PA" DB_PASSWORD)" != "$(t_envget "$PB" DB_PASSWORD)" ] ||
	t_fail "both instances got the same password"
n=$(t_sql "SELECT count(*) FROM pg_database WHERE datname IN ('$DA', '$DB')")
[ "$n" = 2 ] || t_fail "expected 2 per-instance databases on the server, found $n"
t_ok "per-app-db-node-a / per-app-db-node-b, distinct credentials"

t_check "hosts: both instances get node-a's routable name (the provider is exposed network)"
[ "$(t_envget "$PA" DB_HOST)" = localhost ] ||
	t_fail "node-a's DB_HOST is '$(t_envget "$PA" DB_HOST)', expected localhost (node-a's routable name)"
[ "$(t_envget "$PB" DB_HOST)" = localhost ] ||
	t_fail "node-b's DB_HOST is '$(t_envget "$PB" DB_HOST)', expected localhost (node-a's routable name)"
[ "$(t_envget "$PA" DB_PORT)" = "$TALLY_TEST_PG_PORT" ] &&
	[ "$(t_envget "$PB" DB_PORT)" = "$TALLY_TEST_PG_PORT" ] ||
	t_fail "DB_PORT is not the provider's port $TALLY_TEST_PG_PORT"
t_ok "node-a: localhost, node-b: localhost"

t_check "each instance's credential connects to its own database, and not to the other's"
for f in "$PA" "$PB"; do
	[ "$(t_env_psql "$f" "SELECT current_database()")" = "$(t_envget "$f" DB_NAME)" ] ||
		t_fail "the credential in $f does not reach $(t_envget "$f" DB_NAME)"
done
if t_env_psql "$PA" "$DB" "SELECT 1" >/dev/null 2>&1; then
	t_fail "node-a's instance credential connects to node-b's database"
fi
if t_env_psql "$PB" "$DA" "SELECT 1" >/dev/null 2>&1; then
	t_fail "node-b's instance credential connects to node-a's database"
fi
t_ok "both connect over TCP (node-b's via the name localhost); neither crosses"

t_say "shared on two nodes"
t_check "a second holder added later gets the same grant delivered, and nothing new is created"
before=$(t_sql "SELECT count(*) FROM pg_database")
tly assign shared-app node-b >/dev/null
t_tallyd_once
t_wait_healthy 5
after=$(t_sql "SELECT count(*) FROM pg_database")
[ "$before" = "$after" ] || t_fail "adding a holder changed the number of databases ($before -> $after)"
n=$(tly log --json --stream grant/shared-app/db --type grant.provisioned | wc -l)
[ "$n" -eq 1 ] || t_fail "shared-app/db was provisioned $n times, expected once"
holders=$(tly log --json --stream grant/shared-app/db --type credential.delivered |
	t_jstr holder | sort | tr '\n' ' ')
[ "$holders" = "shared-app@node-a shared-app@node-b " ] ||
	t_fail "deliveries went to: $holders"
t_ok "provisioned once; delivered to shared-app@node-a and shared-app@node-b"

SA=$(t_envfile node-a shared-app)
SB=$(t_envfile node-b shared-app)
t_check "two env files, one database: the same DB_NAME, DB_USER, DB_PASSWORD, DB_PORT"
for k in DB_NAME DB_USER DB_PASSWORD DB_PORT; do
	[ -n "$(t_envget "$SA" $k)" ] || t_fail "$k is empty in $SA"
	[ "$(t_envget "$SA" $k)" = "$(t_envget "$SB" $k)" ] ||
		t_fail "$k differs between the two holders"
done
[ "$(t_envget "$SA" DB_NAME)" = "$DS" ] ||
	t_fail "DB_NAME is '$(t_envget "$SA" DB_NAME)', expected $DS"
n=$(t_sql "SELECT count(*) FROM pg_database WHERE datname LIKE 'shared-app%'")
[ "$n" = 1 ] || t_fail "expected one shared-app database, found $n"
t_ok "one database shared-app-db, one credential, two holders"

t_check "hosts: both holders get localhost, node-a's routable name"
[ "$(t_envget "$SA" DB_HOST)" = localhost ] ||
	t_fail "node-a's DB_HOST is '$(t_envget "$SA" DB_HOST)', expected localhost"
[ "$(t_envget "$SB" DB_HOST)" = localhost ] ||
	t_fail "node-b's DB_HOST is '$(t_envget "$SB" DB_HOST)', expected localhost"
if grep -q node-b.test "$SA" "$SB" "$PA" "$PB"; then
	t_fail "the consumer node's own routable name leaked into an env file"
fi
t_ok "node-a: localhost, node-b: localhost"

t_check "both holders connect and see the same data"
t_env_psql "$SA" "CREATE TABLE shared_t (who text); INSERT INTO shared_t VALUES ('node-a')" ||
	t_fail "node-a's holder cannot write"
[ "$(t_env_psql "$SB" "SELECT who FROM shared_t")" = node-a ] ||
	t_fail "node-b's holder does not see node-a's row"
t_ok "a row written through node-a is read through node-b"

t_check "tally env (sealed delivery, opened with the node's key) matches the file"
for n in node-a node-b; do
	tly env "$n" shared-app --node-key "$(t_nodekey "$n")" | sort >"$W/env.$n"
	sort "$(t_envfile $n shared-app)" | cmp -s - "$W/env.$n" ||
		t_fail "tally env $n shared-app differs from the delivered file"
done
if tly env node-a shared-app --node-key "$(t_nodekey node-b)" >/dev/null 2>&1; then
	t_fail "node-b's key opens node-a's sealed delivery"
fi
t_ok "identical on both nodes; node-b's key cannot open node-a's delivery"

t_check "exactly three grant databases on the server"
[ "$(t_sql "SELECT count(*) FROM pg_database")" = $((base + 3)) ] ||
	t_fail "expected $((base + 3)) databases: $(t_sql "SELECT string_agg(datname, ' ') FROM pg_database")"
t_ok "per-app-db-node-a, per-app-db-node-b, shared-app-db"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "chain sound; projections identical"
