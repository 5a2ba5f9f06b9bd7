#!/bin/sh
# Access below ownership on PostgreSQL: a requirement with access: read
# (or read-write) and of: MODULE/REQUIREMENT gets a login of its own on
# the database another requirement's grant owns (a reporting context
# reading a game's database).
#   - the manifest: access without of, an access that is neither, and
#     migrations beside access refused, naming file, line and field;
#   - the reader logs in with its own delivered credential, SELECTs and
#     cannot INSERT, UPDATE, DELETE or CREATE; a table the owner makes
#     later is readable at once (default privileges); read-write may
#     INSERT, UPDATE and DELETE and still not CREATE;
#   - the owner's grant stays healthy beside them (its checks leave the
#     readers' group alone), and so do the readers';
#   - a privilege taken away by hand is repaired by verification;
#   - the reader's credential rotates like any (v2 delivered, v1 gone
#     after the ack, the data still readable);
#   - the owner's grant revoked: the readers' go with it (their logins
#     refused);
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

# reader NAME ACCESS: a module NAME with requirement "games", ACCESS to
# game/db; its manifest's path.
reader() {
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: ""}
requires:
  games:
    type: postgres-database
    from: postgres
    access: $2
    of: game/db
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}
EOF
	echo "$W/manifests/$1.yaml"
}

# as FILE SQL: the delivered credential in FILE runs SQL (stderr kept).
as() { t_env_psql "$1" "$2" 2>"$W/as.err"; }

t_say "throwaway PostgreSQL; game owns its database, reporting reads it, writer writes it"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a network
mkdir -p "$W/manifests"
tly apply "$(t_consumer game shared)" >/dev/null

t_check "the manifest: what goes with access: and of:"
cat >"$W/manifests/bad1.yaml" <<EOF
module: bad1
requires:
  games:
    type: postgres-database
    from: postgres
    access: read
EOF
t_expect_exit 4 "access without of" tly apply "$W/manifests/bad1.yaml"
grep -q "bad1.yaml:.*requires.games.of: access: and of: go together" "$W/last.err" ||
	t_fail "access without of: $(cat "$W/last.err")"
printf '    of: game/db\n' >>"$W/manifests/bad1.yaml"
sed -i 's/access: read/access: write/' "$W/manifests/bad1.yaml"
t_expect_exit 4 "access: write" tly apply "$W/manifests/bad1.yaml"
grep -q "requires.games.access: 'write': access is read or read-write" "$W/last.err" ||
	t_fail "access: write: $(cat "$W/last.err")"
sed -i 's/access: write/access: read/' "$W/manifests/bad1.yaml"
mkdir -p "$W/manifests/mig"
printf 'SELECT 1;\n' >"$W/manifests/mig/001.sql"
printf '    migrations: mig\n' >>"$W/manifests/bad1.yaml"
t_expect_exit 4 "migrations beside access" tly apply "$W/manifests/bad1.yaml"
grep -q "migrations: belong to the requirement that owns the resource" "$W/last.err" ||
	t_fail "migrations with access: $(cat "$W/last.err")"
t_ok "refused, each naming its file, line and field"

tly apply "$(reader reporting read)" "$(reader writer read-write)" >/dev/null ||
	t_fail "tally apply reporting writer failed"
tly assign game node-a >/dev/null
tly assign reporting node-a >/dev/null
tly assign writer node-a >/dev/null
t_tallyd_start --interval 1 --verify-interval 2
t_wait_healthy 60 game
t_wait_healthy 60 reporting
t_wait_healthy 60 writer
fg=$(t_envfile node-a game)
fr=$(t_envfile node-a reporting)
fw=$(t_envfile node-a writer)
DB=$(t_envget "$fg" DB_NAME)
[ "$(t_envget "$fr" DB_NAME)" = "$DB" ] && [ "$(t_envget "$fw" DB_NAME)" = "$DB" ] ||
	t_fail "the readers are not told game's database ($DB): $(t_envget "$fr" DB_NAME), $(t_envget "$fw" DB_NAME)"
RU=$(t_envget "$fr" DB_USER)
WU=$(t_envget "$fw" DB_USER)
[ "$RU" != "$(t_envget "$fg" DB_USER)" ] && [ "$RU" != "$WU" ] ||
	t_fail "the logins are not each its own: $RU, $WU"
t_ok "game's database $DB; reporting as $RU, writer as $WU"

t_check "read: SELECT, and nothing that writes"
as "$fg" "CREATE TABLE scores (id int PRIMARY KEY, v text);
	INSERT INTO scores SELECT g, md5(g::text) FROM generate_series(1, 100) g" >/dev/null ||
	t_fail "game cannot make its table: $(cat "$W/as.err")"
[ "$(as "$fr" "SELECT count(*) FROM scores")" = 100 ] ||
	t_fail "reporting cannot read scores: $(cat "$W/as.err")"
for q in "INSERT INTO scores VALUES (101, 'x')" "UPDATE scores SET v = 'x'" \
    "DELETE FROM scores" "TRUNCATE scores" "CREATE TABLE mine (x int)" \
    "DROP TABLE scores"; do
	if as "$fr" "$q" >/dev/null; then t_fail "reporting may: $q"; fi
	grep -q -i "permission denied\|must be owner" "$W/as.err" ||
		t_fail "reporting's $q failed otherwise: $(cat "$W/as.err")"
done
t_ok "SELECT 100 rows; INSERT, UPDATE, DELETE, TRUNCATE, CREATE, DROP denied"

t_check "a table the owner makes later is readable at once"
as "$fg" "CREATE TABLE later (x int); INSERT INTO later VALUES (7)" >/dev/null
[ "$(as "$fr" "SELECT x FROM later")" = 7 ] || t_fail "reporting cannot read later: $(cat "$W/as.err")"
t_ok "later: 7"

t_check "read-write: INSERT, UPDATE, DELETE; no CREATE"
as "$fw" "INSERT INTO scores VALUES (101, 'w'); UPDATE scores SET v = 'u' WHERE id = 1;
	DELETE FROM scores WHERE id = 2; INSERT INTO later VALUES (8)" >/dev/null ||
	t_fail "writer cannot write: $(cat "$W/as.err")"
if as "$fw" "CREATE TABLE mine (x int)" >/dev/null; then t_fail "writer may CREATE"; fi
[ "$(as "$fr" "SELECT count(*) FROM scores")" = 100 ] || t_fail "the writes are not seen"
t_ok "writer wrote (101 in, 2 out, 1 updated); CREATE denied"

t_check "every grant healthy beside the others (the owner's checks leave the groups alone)"
sleep 5	# two verification rounds at --verify-interval 2
for g in game/db reporting/games writer/games; do
	tly log --json --stream "grant/$g" --type grant.drifted | grep -q . &&
		t_fail "$g drifted: $(tly log --json --stream "grant/$g" --type grant.drifted | tail -n 1)"
done
: >"$W/status.txt"
for m in game reporting writer; do
	tly status $m >>"$W/status.txt" || {
		cat "$W/status.txt" >&2
		t_fail "$m is not healthy"
	}
done
grep -q "read access to game/db's resource" "$W/status.txt" || t_fail "status says nothing of the access"
t_ok "no drift on game/db, reporting/games, writer/games; status: read access to game/db's resource"

t_check "a privilege taken away by hand is repaired"
GRP=$(t_sql "SELECT r.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid
	JOIN pg_roles l ON l.oid = m.member WHERE l.rolname = '$RU'")
[ -n "$GRP" ] || t_fail "reporting's login is in no group"
psql -X -At -q -h "$TALLY_TEST_PG_SOCK" -p "$TALLY_TEST_PG_PORT" -U "$TALLY_TEST_PG_USER" \
	-d "$DB" -c "REVOKE SELECT ON scores FROM \"$GRP\"" >/dev/null
t_grant_wait 30 reporting/games grant.repaired >/dev/null
[ "$(as "$fr" "SELECT count(*) FROM scores")" = 100 ] || t_fail "not repaired: $(cat "$W/as.err")"
t_ok "SELECT on scores revoked from $GRP by hand: repaired"

t_say "reporting's credential rotates like any"
tly rotate reporting/games >/dev/null || t_fail "tally rotate failed"
t_grant_wait 30 reporting/games credential.activated >/dev/null
cp "$fr" "$W/v1.env"
end=$(($(t_now_ms) + 10000))
until [ "$(t_envget "$(t_envfile node-a reporting)" DB_USER)" != "$RU" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "v2 not delivered"
	sleep 0.1
done
fr=$(t_envfile node-a reporting)
[ "$(as "$fr" "SELECT count(*) FROM scores")" = 100 ] || t_fail "v2 cannot read"
tly ack node-a reporting 2 >/dev/null
t_grant_wait 30 reporting/games credential.retired >/dev/null
[ "$(t_sql "SELECT count(*) FROM pg_roles WHERE rolname = '$RU'")" = 0 ] || t_fail "v1 login still there"
if PGPASSWORD=$(t_envget "$W/v1.env" DB_PASSWORD) psql -X -At -q -h 127.0.0.1 \
    -p "$TALLY_TEST_PG_PORT" -U "$RU" -d "$DB" -c "SELECT 1" >/dev/null 2>&1; then
	t_fail "v1 still logs in"
fi
t_ok "v2 ($(t_envget "$fr" DB_USER)) reads; v1 ($RU) dropped and refused"

t_say "game's grant revoked: the readers' go with it"
# Copies: the revocation takes the values off the node (tally env).
cp "$fr" "$W/r.env"
cp "$fw" "$W/w.env"
# login FILE: logs in with the credential a copy holds; stderr in as.err.
login() {
	PGPASSWORD=$(_t_envread "$1" DB_PASSWORD) PGCONNECT_TIMEOUT=5 \
	    psql -X -At -q -h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" \
	    -U "$(_t_envread "$1" DB_USER)" -d "$DB" -c "SELECT 1" 2>"$W/as.err"
}
[ "$(login "$W/r.env")" = 1 ] && [ "$(login "$W/w.env")" = 1 ] ||
	t_fail "the copies do not log in before the revocation: $(cat "$W/as.err")"
tly remove game --yes >/dev/null || t_fail "tally remove game failed"
t_grant_wait 30 game/db grant.revoked >/dev/null
t_grant_wait 30 reporting/games grant.revoked >/dev/null
t_grant_wait 30 writer/games grant.revoked >/dev/null
tly log --json --stream grant/reporting/games --type revocation.requested |
	grep -q '"reason":"game/db was revoked"' || t_fail "no revocation.requested naming game/db"
for f in "$W/r.env" "$W/w.env"; do
	if login "$f" >/dev/null; then t_fail "$(_t_envread "$f" DB_USER) still logs in"; fi
	grep -q "not permitted to log in" "$W/as.err" ||
		t_fail "refused otherwise: $(cat "$W/as.err")"
done
t_ok "reporting/games and writer/games revoked with game/db; their logins refused"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
