#!/bin/sh
# Names and values crafted to inject SQL (or libpq connection strings)
# are either rejected by validation, naming the field, or used literally
# and harmlessly.  Afterwards every database and role the server had is
# still there and nothing is owned by anyone new.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL, tally home, provider"
t_pg_start
t_init
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null

# What the server holds before tally touches it.
snapshot() {
	t_sql "SELECT 'db ' || datname || ' ' || pg_get_userbyid(datdba) FROM pg_database
	       UNION ALL SELECT 'role ' || rolname || ' super=' || rolsuper::int || ' login=' || rolcanlogin::int FROM pg_roles
	       ORDER BY 1"
}
snapshot >"$W/before"

M=$W/manifests
mkdir -p "$M"

# reject FILE FIELD: tally apply FILE exits 4 and reports FILE:L:C: FIELD:
reject() {
	t_expect_exit 4 "tally apply $(basename "$1")" tly apply "$1"
	grep -q "^$1:[0-9]*:[0-9]*: $2: " "$W/last.err" || {
		cat "$W/last.err" >&2
		t_fail "$(basename "$1"): the error does not name the field '$2'"
	}
	grep -q 'nothing applied' "$W/last.err" ||
		t_fail "$(basename "$1"): no 'nothing applied'"
}

t_check "manifests with SQL in names are refused (exit 4), naming the field"
cat >"$M/res-name.yaml" <<'EOF'
module: evil
env: {DB_NAME: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    name: "x\"; DROP DATABASE postgres; --"
    env: {database: DB_NAME}
EOF
reject "$M/res-name.yaml" requires.db.name
cat >"$M/res-name2.yaml" <<'EOF'
module: evil
requires:
  db:
    type: postgres-database
    from: postgres
    name: "x'); DROP ROLE postgres; --"
EOF
reject "$M/res-name2.yaml" requires.db.name
cat >"$M/module.yaml" <<'EOF'
module: "evil\"; DROP ROLE postgres; --"
EOF
reject "$M/module.yaml" module
cat >"$M/req.yaml" <<'EOF'
module: evil
requires:
  "db' OR '1'='1":
    type: postgres-database
    from: postgres
EOF
reject "$M/req.yaml" "requires.db' OR '1'='1"
cat >"$M/type.yaml" <<'EOF'
module: evil
requires:
  db:
    type: "postgres-database; DROP DATABASE postgres"
    from: postgres
EOF
reject "$M/type.yaml" requires.db.type
cat >"$M/from.yaml" <<'EOF'
module: evil
requires:
  db:
    type: postgres-database
    from: "postgres\" CASCADE"
EOF
reject "$M/from.yaml" requires.db.from
cat >"$M/provider.yaml" <<'EOF'
module: evil
requires:
  db:
    type: postgres-database
    from: postgres
    provider: "node-a'/postgres"
EOF
reject "$M/provider.yaml" requires.db.provider
cat >"$M/envvar.yaml" <<'EOF'
module: evil
env: {"X; psql -c 'DROP DATABASE postgres'": ""}
EOF
reject "$M/envvar.yaml" "env.X; psql -c 'DROP DATABASE postgres'"
cat >"$M/provides.yaml" <<'EOF'
module: evil-provider
provides:
  "pg'; DROP TABLE x; --": {driver: postgres}
EOF
reject "$M/provides.yaml" "provides.pg'; DROP TABLE x; --"
t_ok "9 manifests refused, each naming its field; nothing applied"

t_check "the CLI refuses hostile node, module and host names (exit 4) and setting keys (exit 2)"
t_expect_exit 4 "node add with a quote in the name" \
	tly node add "n'; DROP DATABASE postgres; --" --routable-name 127.0.0.1
t_expect_exit 4 "node add with SQL in --routable-name" \
	tly node add node-x --routable-name "127.0.0.1' OR '1'='1"
grep -q 'routable-name' "$W/last.err" || t_fail "the refusal does not name --routable-name"
t_expect_exit 4 "assign a hostile module name" tly assign "postgres\"; --" node-a
t_expect_exit 4 "assign to a hostile node name" tly assign postgres "node-a'; --"
t_expect_exit 2 "a hostile --set key" tly assign postgres node-a --set "port'; --=1"
n=$(tly log --json | grep -c '"type":"node.added"')
[ "$n" -eq 1 ] || t_fail "expected 1 node.added, found $n"
t_ok "refused; the log holds only what was valid"

t_say "hostile provider settings are connection parameters, never SQL or a conninfo string"
tly apply "$(t_consumer app-a)" >/dev/null
# The admin user name carries a quote: it must reach the server as a name.
tly assign postgres node-a --set port="$TALLY_TEST_PG_PORT" \
	--set "admin-user=postgres' OR '1'='1" \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null
tly assign app-a node-a >/dev/null
"$TALLY_BIN/tallyd" --once --once-timeout 2 2>>"$T_DLOG" && t_fail "tallyd --once succeeded with a bogus admin user"

t_check "the quoted admin user is refused by the server as that literal name"
t_expect_exit 6 "tally status with a rejected admin login" tly status app-a
grep -q "refused tally's admin login: .*admin login as \"postgres' OR '1'='1\" rejected" "$W/last.out" || {
	cat "$W/last.out" >&2
	t_fail "status does not report the admin login rejected under the literal name"
}
grep -q "28P01" "$W/last.out" || t_fail "status does not give the server's SQLSTATE 28P01"
t_ok "status (exit 6): admin login as \"postgres' OR '1'='1\" rejected (28P01)"

t_check "an admin-db that reads like a conninfo string is a database name, not options"
tly assign postgres node-a --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" \
	--set "admin-db=postgres host=192.0.2.1 user=mallory" \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null
"$TALLY_BIN/tallyd" --once --once-timeout 2 2>>"$T_DLOG" && t_fail "tallyd --once succeeded with a bogus admin-db"
t_expect_exit 6 "tally status with a bogus admin-db" tly status app-a
grep -q 'database "postgres host=192.0.2.1 user=mallory" does not exist' "$W/last.out" || {
	cat "$W/last.out" >&2
	t_fail "the admin-db value was not used literally as a database name"
}
t_ok "the server was asked for a database literally named 'postgres host=192.0.2.1 user=mallory'"

t_check "a hostile setting on a module that provides nothing is refused, and recorded nowhere"
t_expect_exit 4 "a --set on a consumer" tly assign app-a node-a --set "note='; DROP DATABASE postgres; --"
grep -q "app-a provides nothing" "$W/last.err" || t_fail "the refusal does not say why: $(cat "$W/last.err")"
! tly log --json | grep -qF "DROP DATABASE" || t_fail "the hostile setting reached the log"
t_ok "refused (nothing reads it); not in the log"

t_say "correct settings: the same consumer converges"
# Assigning again keeps what it is not given: the bogus admin-db goes
# with --unset.
tly assign postgres node-a --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --unset admin-db \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null
t_tallyd_once
t_expect_exit 0 "tally status after fixing the settings" tly status app-a
t_env_psql "$(t_envfile node-a app-a)" "SELECT 1" >/dev/null ||
	t_fail "app-a's credential does not connect"
t_ok "provisioned; the credential connects"

t_say "valid names that spell SQL or name the server's own objects"
# A name of [a-z0-9-] may still hold "--" or read like SQL: quoted, it is
# an ordinary identifier.
tly apply "$(t_consumer sqlish shared a--drop-database-postgres)" >/dev/null
tly assign sqlish node-a >/dev/null
t_tallyd_once
t_check "a resource named a--drop-database-postgres is created under that name (and its digest)"
F=$(t_envfile node-a sqlish)
SQLISH=$(t_gname sqlish/db a--drop-database-postgres)
[ "$(t_envget "$F" DB_NAME)" = "$SQLISH" ] ||
	t_fail "DB_NAME is '$(t_envget "$F" DB_NAME)', expected $SQLISH"
[ "$(t_sql "SELECT count(*) FROM pg_database WHERE datname = '$SQLISH'")" = 1 ] ||
	t_fail "no database literally named $SQLISH"
[ "$(t_env_psql "$F" "SELECT current_database()")" = "$SQLISH" ] ||
	t_fail "the credential does not reach $SQLISH"
t_ok "created literally; the credential connects to it"

# A resource name is only the readable part of a name that also
# carries a digest of the grant: naming the admin role, its database
# or a template gives the grant its own objects, never those (the
# driver would refuse them anyway).
t_check "resources named after the admin role, its database or a template get objects of their own"
tly apply "$(t_consumer grab-admin shared postgres)" \
	"$(t_consumer grab-template shared template1)" >/dev/null
tly assign grab-admin node-a >/dev/null
tly assign grab-template node-a >/dev/null
t_tallyd_once
GADMIN=$(t_gname grab-admin/db postgres)
GTEMPL=$(t_gname grab-template/db template1)
[ "$(t_envget "$(t_envfile node-a grab-admin)" DB_NAME)" = "$GADMIN" ] &&
[ "$(t_envget "$(t_envfile node-a grab-template)" DB_NAME)" = "$GTEMPL" ] ||
	t_fail "grab-admin / grab-template were not given $GADMIN / $GTEMPL"
for m in grab-admin grab-template; do
	[ "$(t_env_psql "$(t_envfile node-a $m)" "SELECT session_user <> 'postgres' AND current_database() NOT IN ('postgres', 'template1')")" = t ] ||
		t_fail "$m's credential is the admin or reaches postgres/template1"
done
t_ok "$GADMIN and $GTEMPL; neither is the admin's role, its database or a template"

t_check "the admin still logs in with its password over TCP, as a superuser"
[ "$(PGPASSWORD=$(cat "$TALLY_TEST_PG_PWFILE") psql -X -At -h 127.0.0.1 \
	-p "$TALLY_TEST_PG_PORT" -U postgres -d postgres \
	-c "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")" = t ] ||
	t_fail "the admin can no longer log in as a superuser"
t_ok "postgres: login and superuser intact"

t_check "every database and role the server had is still there, unchanged"
snapshot >"$W/after"
if ! grep -vxF -f "$W/after" "$W/before" >"$W/lost"; then :; fi
[ ! -s "$W/lost" ] || { cat "$W/lost" >&2; t_fail "changed or gone since the start (above)"; }
grep -vxF -f "$W/before" "$W/after" >"$W/new" || true
# The only new objects: the two grants' databases and roles.
APPA=$(t_gname app-a/db app-a-db)
want=$(for n in "$SQLISH" "$APPA" "$GADMIN" "$GTEMPL"; do
	echo "db $n $n"
	echo "role $n super=0 login=0"
	echo "role ${n}_v1 super=0 login=1"
done | sort)
[ "$(sort "$W/new")" = "$want" ] || {
	echo "new objects:" >&2; cat "$W/new" >&2
	t_fail "unexpected objects on the server"
}
t_ok "$(wc -l <"$W/before") objects unchanged; only the 4 grants' databases and roles are new"

t_check "tally verify"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain sound"
