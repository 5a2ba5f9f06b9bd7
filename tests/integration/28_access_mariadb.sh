#!/bin/sh
# Access below ownership on MariaDB (drivers/mariadb.c: access_create):
# a requirement with access: read (or read-write) and of: MODULE/REQ
# gets a user of its own with SELECT (read-write: and INSERT, UPDATE,
# DELETE) on `db`.* of the database another requirement's grant owns;
# 28_access_pg.sh is the same for PostgreSQL.
#   - over verified TLS (tls verify, REQUIRE SSL), with the real client:
#     the reader SELECTs and cannot INSERT, UPDATE, DELETE, CREATE or
#     DROP; a table the owner makes later is readable at once; read-write
#     may INSERT, UPDATE and DELETE and still not CREATE;
#   - the owner's grant stays healthy beside them, and so do the
#     readers' (two verification rounds, no grant.drifted);
#   - a privilege revoked by hand is repaired by verification;
#   - the reader's credential rotates like any (v2 delivered, v1 dropped
#     after the ack and refused);
#   - the owner's module removed: the readers' grants revoked with it
#     (their users locked, their logins refused);
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

t_mariadb_start
MPORT=$TALLY_TEST_MARIADB_PORT
MPW=$(cat "$TALLY_TEST_MARIADB_PWFILE")

# msql SQL: as the admin, rows tab-separated, no header.
msql() {
	mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -u"$TALLY_TEST_MARIADB_USER" \
		-p"$MPW" -N -B -e "$1"
}
# as FILE SQL: with the credential delivered in FILE, over TLS verified
# with the CA file delivered beside it (stderr kept in $W/as.err).
as() {
	mariadb --no-defaults -h"$(t_envget "$1" DB_HOST)" -P"$(t_envget "$1" DB_PORT)" \
		-u"$(t_envget "$1" DB_USER)" -p"$(t_envget "$1" DB_PASSWORD)" \
		--ssl --ssl-ca="$(t_envget "$1" DB_SSL_CA)" --ssl-verify-server-cert \
		-N -B "$(t_envget "$1" DB_NAME)" -e "$2" 2>"$W/as.err"
}
# module NAME [ACCESS]: a manifest of NAME requiring "db" from mariadb,
# ACCESS to game/db when given; its path.
module() {
	mkdir -p "$W/manifests"
	{
		echo "module: $1"
		echo "env: {DB_HOST: \"\", DB_PORT: \"\", DB_NAME: \"\", DB_USER: \"\", DB_PASSWORD: \"\", DB_SSL_CA: \"\"}"
		echo "requires:"
		echo "  db:"
		echo "    type: mariadb-database"
		echo "    from: mariadb"
		if [ -n "${2:-}" ]; then
			echo "    access: $2"
			echo "    of: game/db"
		fi
		echo "    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD, ssl_ca: DB_SSL_CA}"
	} >"$W/manifests/$1.yaml"
	echo "$W/manifests/$1.yaml"
}
# users NAME: how many accounts named NAME the server has.
users() { msql "SELECT COUNT(*) FROM mysql.global_priv WHERE User = '$1'"; }

t_say "throwaway MariaDB, a mariadb provider (tls verify); game owns its database, reporting reads it, writer writes it"
t_init
t_node node-a 127.0.0.1
cat >"$W/mariadb.yaml" <<EOF
module: mariadb
provides:
  mariadb-database:
    driver: mariadb
    revoke: retain
EOF
tly apply "$W/mariadb.yaml" >/dev/null || t_fail "tally apply of the mariadb provider failed"
printf '%s' "$MPW" | tly assign mariadb node-a --expose local --set port="$MPORT" \
	--set admin-user="$TALLY_TEST_MARIADB_USER" --set tls=verify \
	--set ca="$TALLY_TEST_CA" --secret admin-password >/dev/null ||
	t_fail "tally assign mariadb node-a failed"
tly apply "$(module game)" >/dev/null || t_fail "tally apply game failed"
tly apply "$(module reporting read)" "$(module writer read-write)" >/dev/null ||
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
GU=$(t_envget "$fg" DB_USER)
RU=$(t_envget "$fr" DB_USER)
WU=$(t_envget "$fw" DB_USER)
[ -n "$DB" ] && [ "$(t_envget "$fr" DB_NAME)" = "$DB" ] && [ "$(t_envget "$fw" DB_NAME)" = "$DB" ] ||
	t_fail "the readers are not told game's database ($DB): $(t_envget "$fr" DB_NAME), $(t_envget "$fw" DB_NAME)"
[ -n "$RU" ] && [ "$RU" != "$GU" ] && [ "$RU" != "$WU" ] && [ "$WU" != "$GU" ] ||
	t_fail "the logins are not each its own: $GU, $RU, $WU"
t_ok "game's database $DB (user $GU); reporting as $RU, writer as $WU"

t_check "each user is marked for its grant and held to TLS"
for u in "$RU" "$WU"; do
	[ "$(msql "SELECT IFNULL(JSON_VALUE(Priv, '\$.ssl_type'), 0) FROM mysql.global_priv
		WHERE User = '$u' AND Host = '%'")" = 1 ] || t_fail "$u is not REQUIRE SSL"
done
[ "$(msql "SELECT grant_id FROM tally.marks WHERE kind = 'u' AND name = '$RU'")" = reporting/db ] ||
	t_fail "$RU's mark: $(msql "SELECT * FROM tally.marks WHERE name = '$RU'")"
[ "$(msql "SELECT grant_id FROM tally.marks WHERE kind = 'u' AND name = '$WU'")" = writer/db ] ||
	t_fail "$WU's mark: $(msql "SELECT * FROM tally.marks WHERE name = '$WU'")"
[ "$(msql "SELECT grant_id FROM tally.marks WHERE kind = 'd' AND name = '$DB'")" = game/db ] ||
	t_fail "$DB is not game/db's any more: $(msql "SELECT * FROM tally.marks WHERE name = '$DB'")"
t_ok "REQUIRE SSL; $RU reporting/db's, $WU writer/db's, $DB still game/db's"

t_check "read: SELECT, and nothing that writes"
as "$fg" "CREATE TABLE scores (id INT PRIMARY KEY, v VARCHAR(40));
	INSERT INTO scores SELECT seq, MD5(seq) FROM seq_1_to_100" ||
	t_fail "game cannot make its table: $(cat "$W/as.err")"
[ "$(as "$fr" "SELECT COUNT(*) FROM scores")" = 100 ] ||
	t_fail "reporting cannot read scores: $(cat "$W/as.err")"
for q in "INSERT INTO scores VALUES (101, 'x')" "UPDATE scores SET v = 'x'" \
    "DELETE FROM scores" "TRUNCATE scores" "CREATE TABLE mine (x INT)" \
    "DROP TABLE scores" "ALTER TABLE scores ADD COLUMN w INT"; do
	if as "$fr" "$q" >/dev/null; then t_fail "reporting may: $q"; fi
	grep -q "denied" "$W/as.err" || t_fail "reporting's $q failed otherwise: $(cat "$W/as.err")"
done
[ "$(as "$fg" "SELECT COUNT(*) FROM scores WHERE v = 'x'")" = 0 ] || t_fail "reporting's writes landed"
t_ok "SELECT 100 rows; INSERT, UPDATE, DELETE, TRUNCATE, CREATE, DROP, ALTER denied"

t_check "a table the owner makes later is readable at once"
as "$fg" "CREATE TABLE later (x INT); INSERT INTO later VALUES (7)" ||
	t_fail "game cannot make later: $(cat "$W/as.err")"
[ "$(as "$fr" "SELECT x FROM later")" = 7 ] || t_fail "reporting cannot read later: $(cat "$W/as.err")"
t_ok "later: 7"

t_check "read-write: INSERT, UPDATE, DELETE; no CREATE"
as "$fw" "INSERT INTO scores VALUES (101, 'w'); UPDATE scores SET v = 'u' WHERE id = 1;
	DELETE FROM scores WHERE id = 2; INSERT INTO later VALUES (8)" >/dev/null ||
	t_fail "writer cannot write: $(cat "$W/as.err")"
if as "$fw" "CREATE TABLE mine (x INT)" >/dev/null; then t_fail "writer may CREATE"; fi
grep -q "denied" "$W/as.err" || t_fail "writer's CREATE failed otherwise: $(cat "$W/as.err")"
[ "$(as "$fr" "SELECT CONCAT(COUNT(*), ':', SUM(id = 101), ':', SUM(id = 2), ':',
	(SELECT v FROM scores WHERE id = 1)) FROM scores")" = "100:1:0:u" ] ||
	t_fail "the writes are not seen: $(as "$fr" "SELECT COUNT(*) FROM scores")"
t_ok "writer wrote (101 in, 2 out, 1 updated); CREATE denied"

t_check "every grant healthy beside the others"
sleep 5	# two verification rounds at --verify-interval 2
for g in game/db reporting/db writer/db; do
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
for g in game/db reporting/db writer/db; do
	t_expect_exit 0 "tally check $g" tly check $g
done
t_ok "no drift on game/db, reporting/db, writer/db; status: read access to game/db's resource"

t_check "a privilege revoked by hand is repaired"
PAT=$(printf '%s' "$DB" | sed 's/_/\\_/g')
msql "REVOKE SELECT ON \`$PAT\`.* FROM '$RU'@'%'" || t_fail "REVOKE SELECT by hand failed"
[ "$(msql "SELECT COUNT(*) FROM mysql.db WHERE User = '$RU' AND Select_priv = 'Y'")" = 0 ] ||
	t_fail "the REVOKE by hand took nothing away"
t_grant_wait 30 reporting/db grant.repaired >/dev/null
[ "$(as "$fr" "SELECT COUNT(*) FROM scores")" = 100 ] || t_fail "not repaired: $(cat "$W/as.err")"
if as "$fr" "INSERT INTO scores VALUES (102, 'x')" >/dev/null; then t_fail "the repair gave reporting more"; fi
t_ok "SELECT on $DB revoked from $RU by hand: repaired, and no more"

t_say "reporting's credential rotates like any"
tly rotate reporting/db >/dev/null || t_fail "tally rotate failed"
t_grant_wait 30 reporting/db credential.activated >/dev/null
cp "$fr" "$W/v1.env"
end=$(($(t_now_ms) + 10000))
until [ "$(t_envget "$(t_envfile node-a reporting)" DB_USER)" != "$RU" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "v2 not delivered"
	sleep 0.1
done
fr=$(t_envfile node-a reporting)
RU2=$(t_envget "$fr" DB_USER)
[ "$(as "$fr" "SELECT COUNT(*) FROM scores")" = 100 ] || t_fail "v2 cannot read: $(cat "$W/as.err")"
if as "$fr" "DELETE FROM scores" >/dev/null; then t_fail "v2 may DELETE"; fi
tly ack node-a reporting 2 >/dev/null || t_fail "tally ack failed"
t_grant_wait 30 reporting/db credential.retired >/dev/null
[ "$(users "$RU")" = 0 ] || t_fail "v1 user $RU still there"
if as "$W/v1.env" "SELECT 1" >/dev/null; then t_fail "v1 still logs in"; fi
grep -q "denied" "$W/as.err" || t_fail "v1 refused otherwise: $(cat "$W/as.err")"
[ "$(as "$fg" "SELECT COUNT(*) FROM scores")" = 100 ] || t_fail "game lost its data"
t_ok "v2 ($RU2) reads; v1 ($RU) dropped and refused"

t_say "game removed: the readers' grants go with it"
# Revoked, a consumer's env file goes: the credentials are kept here.
cp "$fr" "$W/reporting.env"
cp "$fw" "$W/writer.env"
as "$W/reporting.env" "SELECT 1" >/dev/null || t_fail "reporting cannot log in before: $(cat "$W/as.err")"
as "$W/writer.env" "SELECT 1" >/dev/null || t_fail "writer cannot log in before: $(cat "$W/as.err")"
tly remove game --yes >/dev/null || t_fail "tally remove game failed"
t_grant_wait 30 game/db grant.revoked >/dev/null
t_grant_wait 30 reporting/db grant.revoked >/dev/null
t_grant_wait 30 writer/db grant.revoked >/dev/null
tly log --json --stream grant/reporting/db --type revocation.requested |
	grep -q '"reason":"game/db was revoked"' || t_fail "no revocation.requested naming game/db"
for m in reporting writer; do
	if as "$W/$m.env" "SELECT 1" >/dev/null; then t_fail "$m still logs in"; fi
	grep -q "locked\|denied" "$W/as.err" || t_fail "$m refused otherwise: $(cat "$W/as.err")"
done
t_ok "reporting/db and writer/db revoked with game/db; their logins refused"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
