#!/bin/sh
# tally adopt MODULE/REQ --resource NAME --login USER on MariaDB
# (drivers/mariadb.c: adopt_takeover): a database made by hand, with
# data and the user 'legacy'@'%' its consumer logs in as today, taken
# under tally; 28_adopt_pg.sh is the same for PostgreSQL.
#   - the CLI: adopt before assign records the claim (grant.adopted);
#     --login missing, a second adopt of the grant and another grant
#     adopting the same database are refused, nothing appended;
#   - tallyd takes it over: nothing dropped or made again (the table's
#     creation time, the rows and their checksum), the user's password
#     and REQUIRE are not touched (its authentication string; it still
#     logs in in plaintext), it keeps ALL on the database and loses what
#     it held elsewhere, both are marked as the grant's in tally.marks;
#     nothing of the adopted user is delivered (no credential.delivered
#     of v1), the delivered credential is tally's (v2), REQUIRE SSL, and
#     reads and writes the data over verified TLS;
#   - a consumer on the adopted user (in plaintext, as today) keeps
#     working from before the takeover (which grants the database
#     before it revokes what the user held elsewhere: the server's
#     general log) on: its node's agent (tally-node) writes
#     v2, reloads it once (the consumer then logs in as tally's user
#     over verified TLS) and acknowledges, and only then is the adopted
#     user retired (status names the wait), then dropped and refused;
#     not one of its queries failed, and it ran on both users;
#   - what cannot be adopted, each a grant.failed with the driver's
#     reason and nothing on the server changed: a database that does not
#     exist; one tally made for another grant; a user on another host
#     than '%'; a database whose trigger runs as the user (DEFINER);
#     another mesh's database and user on the same server (owned by mesh
#     ...: its marks, password and data untouched, its credential works);
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

G=legacy/db

t_mariadb_start
MPORT=$TALLY_TEST_MARIADB_PORT
MPW=$(cat "$TALLY_TEST_MARIADB_PWFILE")

# msql SQL: as the admin, rows tab-separated, no header.
msql() {
	mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -u"$TALLY_TEST_MARIADB_USER" \
		-p"$MPW" -N -B -e "$1"
}
# as_legacy PASSWORD SQL: as the hand-made user, in plaintext (as its
# consumer connects today).
as_legacy() {
	mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -ulegacy -p"$1" --skip-ssl \
		-N -B legacydb -e "$2"
}
# as_env FILE SQL: with the credential delivered in FILE, over TLS
# verified with the CA file delivered beside it.
as_env() {
	mariadb --no-defaults -h"$(t_envget "$1" DB_HOST)" -P"$(t_envget "$1" DB_PORT)" \
		-u"$(t_envget "$1" DB_USER)" -p"$(t_envget "$1" DB_PASSWORD)" \
		--ssl --ssl-ca="$(t_envget "$1" DB_SSL_CA)" --ssl-verify-server-cert \
		-N -B "$(t_envget "$1" DB_NAME)" -e "$2"
}
# consumer MODULE: a manifest of MODULE requiring db from mariadb.
consumer() {
	mkdir -p "$W/manifests"
	{
		echo "module: $1"
		echo "env: {DB_HOST: \"\", DB_PORT: \"\", DB_NAME: \"\", DB_USER: \"\", DB_PASSWORD: \"\", DB_SSL_CA: \"\"}"
		echo "requires:"
		echo "  db:"
		echo "    type: mariadb-database"
		echo "    from: mariadb"
		echo "    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD, ssl_ca: DB_SSL_CA}"
	} >"$W/manifests/$1.yaml"
	echo "$W/manifests/$1.yaml"
}
# priv USER KEY: KEY of 'USER'@'%''s account (mysql.global_priv's JSON).
priv() {
	msql "SELECT JSON_VALUE(Priv, '\$.$2') FROM mysql.global_priv WHERE User = '$1' AND Host = '%'"
}
# ssl_type USER: 0 REQUIRE NONE, 1 REQUIRE SSL (unset in the JSON: none).
ssl_type() {
	msql "SELECT IFNULL(JSON_VALUE(Priv, '\$.ssl_type'), 0) FROM mysql.global_priv WHERE User = '$1' AND Host = '%'"
}
# mark KIND NAME: the grant tally.marks names for the object, "" if none.
mark() { msql "SELECT grant_id FROM tally.marks WHERE kind = '$1' AND name = '$2'" 2>/dev/null || true; }

sum_sql="SELECT CONCAT(COUNT(*), ':', MD5(GROUP_CONCAT(id, '=', v ORDER BY id SEPARATOR ','))) FROM scores"
ctime_sql="SELECT CREATE_TIME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'legacydb' AND TABLE_NAME = 'scores'"

t_say "throwaway MariaDB; a mariadb provider (tls verify) on node-a; a database made by hand"
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
msql "CREATE DATABASE legacydb; CREATE USER 'legacy'@'%' IDENTIFIED BY 'frozen-real';
	GRANT ALL PRIVILEGES ON legacydb.* TO 'legacy'@'%';
	CREATE DATABASE sidedb; CREATE TABLE sidedb.notes (v INT); INSERT INTO sidedb.notes VALUES (7);
	GRANT SELECT ON sidedb.* TO 'legacy'@'%'" || t_fail "the hand-made database and user"
as_legacy frozen-real "CREATE TABLE scores (id INT PRIMARY KEY, v VARCHAR(40));
	SET SESSION max_recursive_iterations = 10000; INSERT INTO scores WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 5000)
	SELECT i, MD5(i) FROM s" || t_fail "the hand-made user cannot create its table"
SUM0=$(as_legacy frozen-real "$sum_sql")
CT0=$(msql "$ctime_sql")
AUTH0=$(priv legacy authentication_string)
[ "${SUM0%%:*}" = 5000 ] || t_fail "scores holds '$SUM0'"
[ "$(as_legacy frozen-real "SELECT v FROM sidedb.notes")" = 7 ] ||
	t_fail "legacy cannot read sidedb.notes"
t_ok "legacydb.scores (created $CT0): $SUM0; legacy also reads sidedb"
t_check "the hand-made user's check can fail: a wrong password is refused"
if as_legacy frozen-stale "SELECT 1" >/dev/null 2>&1; then
	t_fail "a wrong password connects"
fi
t_ok "frozen-stale refused"

tly apply "$(consumer legacy)" "$(consumer other)" >/dev/null ||
	t_fail "tally apply legacy other failed"

t_check "refusals append nothing"
before=$(t_head_seq)
t_expect_exit 4 "adopt without --login" tly adopt $G --resource legacydb
grep -q -- "--login" "$W/last.err" || t_fail "no word of --login: $(cat "$W/last.err")"
[ "$(t_head_seq)" = "$before" ] || t_fail "a refused adopt appended events"
t_ok "no --login: exit 4"

t_say "tally adopt $G --resource legacydb --login legacy (before tally assign)"
tly adopt $G --resource legacydb --login legacy >"$W/adopt.out" ||
	t_fail "tally adopt failed"
tly log --json --stream "grant/$G" --type grant.adopted |
	grep -q '"resource":"legacydb","login":"legacy"' ||
	t_fail "no grant.adopted {resource legacydb, login legacy}"
before=$(t_head_seq)
t_expect_exit 4 "a second adopt of $G" tly adopt $G --resource legacydb --login legacy
t_expect_exit 4 "other/db adopting legacydb too" \
	tly adopt other/db --resource legacydb --login legacy
grep -q "adopted by grant $G" "$W/last.err" || t_fail "no word of $G: $(cat "$W/last.err")"
[ "$(t_head_seq)" = "$before" ] || t_fail "a refused adopt appended events"
t_ok "$(cat "$W/adopt.out")"

t_say "the consumer: on the adopted user until its agent writes tally's"
# A consumer as a live mesh runs it: its own stored credential (legacy,
# in plaintext) until its node's agent writes the delivered one (and
# reloads it), then that, over TLS verified with the CA file the agent
# wrote; a query every round, every failure recorded.  It runs through
# the takeover too: legacy holds a privilege on sidedb, which the
# takeover revokes only after granting legacydb (drivers/mariadb.c:
# grant_database), so that no login in between is refused (1044).
mkdir -p "$W/agent"
: >"$W/poll.ok"
: >"$W/poll.fail"
# The reload is a request the consumer answers between two queries (as
# a service's reload returns once it runs on the new values): the agent
# acknowledges only after it, so no query is in flight on the old
# credential when it is retired.
agentvar() { sed -n "s/^$1=//p" "$W/agent/legacy.env" | tr -d "'\""; }
host=127.0.0.1 port=$MPORT u=legacy pw=frozen-real db=legacydb ca=
app() {
	while [ ! -f "$W/poll.stop" ]; do
		if [ -f "$W/reload.req" ] && [ ! -f "$W/reload.done" ]; then
			host=$(agentvar DB_HOST) port=$(agentvar DB_PORT)
			u=$(agentvar DB_USER) pw=$(agentvar DB_PASSWORD)
			db=$(agentvar DB_NAME) ca=$(agentvar DB_SSL_CA)
			: >"$W/reload.done"
		fi
		if [ -n "$ca" ]; then
			set -- --ssl --ssl-ca="$ca" --ssl-verify-server-cert
		else
			set -- --skip-ssl
		fi
		if mariadb --no-defaults --connect-timeout=3 -h"$host" -P"$port" \
		    -u"$u" -p"$pw" "$@" -N -B "$db" \
		    -e "SELECT COUNT(*) FROM scores" >/dev/null 2>"$W/poll.err"; then
			echo "$u" >>"$W/poll.ok"
		else
			echo "$(date +%T.%N) as $u: $(tr '\n' ' ' <"$W/poll.err")" >>"$W/poll.fail"
		fi
		sleep 0.1
	done
}

app &
POLL=$!
_t_pids="$_t_pids $POLL"
# The server's own record of the takeover's statements, in order.
msql "SET GLOBAL log_output = 'TABLE'; TRUNCATE mysql.general_log; SET GLOBAL general_log = 1"
tly assign legacy node-a >/dev/null || t_fail "tally assign legacy node-a failed"
t_tallyd_start --interval 1
t_grant_wait 30 $G grant.provisioned >/dev/null
msql "SET GLOBAL general_log = 0; SET GLOBAL log_output = 'FILE'"
t_check "the takeover grants legacydb before it revokes anything of legacy's"
msql "SELECT argument FROM mysql.general_log WHERE command_type = 'Query' AND
	(argument LIKE 'GRANT %legacydb%TO ''legacy''@%' OR argument LIKE 'REVOKE %FROM ''legacy''@%')
	ORDER BY event_time, thread_id" >"$W/takeover.sql"
head -n 1 "$W/takeover.sql" | grep -q '^GRANT ALL PRIVILEGES ON `legacydb`' || {
	cat "$W/takeover.sql" >&2
	t_fail "the takeover revoked before it granted legacydb"
}
grep -q '^REVOKE .*`sidedb`' "$W/takeover.sql" || t_fail "sidedb was not revoked: $(cat "$W/takeover.sql")"
t_ok "$(tr '\n' ';' <"$W/takeover.sql" | cut -c1-200)"
t_grant_wait 30 $G rotation.started '"reason":"adopted' >/dev/null
t_grant_wait 30 $G credential.activated >/dev/null
t_grant_wait 30 $G credential.delivered '"version":2' >/dev/null
f=$(t_envfile node-a legacy)
USER2=$(t_envget "$f" DB_USER)
[ "$(t_envget "$f" DB_NAME)" = legacydb ] || t_fail "DB_NAME is $(t_envget "$f" DB_NAME)"
[ -n "$USER2" ] && [ "$USER2" != legacy ] || t_fail "DB_USER is '$USER2'"
t_ok "delivered: DB_NAME legacydb, DB_USER $USER2 (tally's)"

t_check "nothing of the adopted user was delivered"
tly log --json --stream "grant/$G" --type credential.delivered |
	grep -q '"body":{[^}]*"version":1[,}]' && t_fail "a credential.delivered of v1"
t_ok "only v2 delivered"

t_check "taken over: marked as $G's, nothing made again, its password and REQUIRE untouched"
[ "$(mark d legacydb)" = $G ] || t_fail "legacydb's mark is '$(mark d legacydb)'"
[ "$(mark u legacy)" = $G ] || t_fail "legacy's mark is '$(mark u legacy)'"
[ "$(msql "$ctime_sql")" = "$CT0" ] || t_fail "scores was made again ($(msql "$ctime_sql"))"
[ "$(priv legacy authentication_string)" = "$AUTH0" ] || t_fail "legacy's password was changed"
[ "$(ssl_type legacy)" = 0 ] || t_fail "legacy's REQUIRE was changed: ssl_type $(ssl_type legacy)"
[ "$(ssl_type "$USER2")" = 1 ] || t_fail "$USER2 is not REQUIRE SSL: ssl_type $(ssl_type "$USER2")"
t_ok "tally.marks: d legacydb, u legacy -> $G; scores created $CT0; legacy's hash and REQUIRE NONE kept"

t_check "the adopted user has ALL on legacydb and nothing else"
[ "$(msql "SELECT COUNT(*) FROM mysql.db WHERE User = 'legacy' AND Db = 'sidedb'")" = 0 ] ||
	t_fail "legacy kept its privilege on sidedb"
if as_legacy frozen-real "SELECT v FROM sidedb.notes" >"$W/side.out" 2>&1; then
	t_fail "legacy still reads sidedb.notes"
fi
grep -q 1142 "$W/side.out" || t_fail "sidedb.notes refused, but not as denied: $(cat "$W/side.out")"
[ "$(msql "SELECT COUNT(*) FROM mysql.db WHERE User = 'legacy' AND Db = 'legacydb' AND Grant_priv = 'N'
	AND Select_priv = 'Y' AND Insert_priv = 'Y' AND Drop_priv = 'Y' AND Create_priv = 'Y'")" = 1 ] ||
	t_fail "legacy's privileges on legacydb: $(msql "SELECT * FROM mysql.db WHERE User = 'legacy'")"
[ "$(priv legacy access)" = 0 ] || t_fail "legacy has global privileges: $(priv legacy access)"
t_ok "sidedb revoked: $(grep -o 'ERROR 1142[^:]*' "$W/side.out")"

t_check "the data is intact and the delivered credential reads and writes it over verified TLS"
[ "$(as_env "$f" "$sum_sql")" = "$SUM0" ] || t_fail "the rows changed: $(as_env "$f" "$sum_sql")"
[ "$(as_env "$f" "SHOW STATUS LIKE 'Ssl_cipher'" | cut -f2)" != "" ] ||
	t_fail "the delivered credential's session is not over TLS"
as_env "$f" "INSERT INTO scores VALUES (5001, 'tally')" ||
	t_fail "the delivered credential cannot write"
as_env "$f" "CREATE TABLE later (x INT); INSERT INTO later VALUES (1)" ||
	t_fail "the delivered credential cannot create a table"
t_ok "$SUM0; insert and create as $USER2"

t_check "the adopted user works until the holder acknowledges v2"
[ "$(as_legacy frozen-real "SELECT COUNT(*) FROM scores")" = 5001 ] ||
	t_fail "the adopted user no longer reads"
[ "$(as_legacy frozen-real "SELECT x FROM later")" = 1 ] ||
	t_fail "the adopted user cannot read what tally's user made"
tly status legacy >"$W/status.txt" 2>&1 || true
grep -q "rotating v1 → v2 (adopted): waiting on node-a/legacy" "$W/status.txt" || {
	cat "$W/status.txt" >&2
	t_fail "status does not name the wait"
}
tly log --json --stream "grant/$G" --type credential.retired | grep -q . &&
	t_fail "retired before the acknowledgement"
[ "$(msql "SELECT COUNT(*) FROM mysql.global_priv WHERE User IN ('legacy', '$USER2') AND Host = '%'")" = 2 ] ||
	t_fail "legacy and $USER2 are not side by side"
t_ok "legacy reads 5001 rows and later; status: waiting on node-a/legacy"

t_say "node-a's agent writes v2, reloads the consumer and acknowledges: the adopted user goes"
t_reload_agent node-a legacy
t_grant_wait 30 $G credential.acknowledged '"holder":"legacy@node-a"' >/dev/null
t_grant_wait 30 $G credential.retired '"user":"legacy"' >/dev/null
t_reloaded_once
t_grant_wait 10 $G rotation.completed >/dev/null
[ "$(msql "SELECT COUNT(*) FROM mysql.global_priv WHERE User = 'legacy'")" = 0 ] ||
	t_fail "the user legacy is still there"
[ -z "$(mark u legacy)" ] || t_fail "legacy's mark outlived it"
if as_legacy frozen-real "SELECT 1" >"$W/gone.out" 2>&1; then
	t_fail "the adopted user still connects"
fi
grep -q 1045 "$W/gone.out" || t_fail "refused, but not as an unknown user: $(cat "$W/gone.out")"
[ "$(as_env "$f" "SELECT COUNT(*) FROM scores")" = 5001 ] ||
	t_fail "tally's credential lost the data"
[ "$(mark d legacydb)" = $G ] || t_fail "legacydb's mark is '$(mark d legacydb)' after the rotation"
t_consumer_done "$POLL"
n1=$(grep -c '^legacy$' "$W/poll.ok" || true)
n2=$(grep -c "^$USER2\$" "$W/poll.ok" || true)
[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] || t_fail "the consumer did not run on both (legacy: $n1, $USER2: $n2)"
t_ok "legacy dropped (1045), its mark gone; $USER2 reads 5001 rows; the consumer never failed ($n1 queries as legacy, $n2 as $USER2 over TLS after one reload)"

t_say "what cannot be adopted"
t_check "a database that does not exist: nothing to adopt"
tly apply "$(consumer ghost)" >/dev/null
tly adopt ghost/db --resource nosuchdb --login "$USER2" >/dev/null ||
	t_fail "tally adopt ghost/db failed"
tly assign ghost node-a >/dev/null
t_grant_wait 30 ghost/db grant.failed 'nothing to adopt' >/dev/null
[ "$(mark u "$USER2")" = $G ] || t_fail "$USER2's mark is '$(mark u "$USER2")'"
t_ok "nosuchdb: nothing to adopt; $USER2 still $G's"

t_check "a database tally made for another grant"
tly assign other node-a >/dev/null
t_wait_healthy 30 other
f4=$(t_envfile node-a other)
DB4=$(t_envget "$f4" DB_NAME)
tly apply "$(consumer fourth)" >/dev/null
tly adopt fourth/db --resource "$DB4" --login "$(t_envget "$f4" DB_USER)" >/dev/null ||
	t_fail "tally adopt fourth/db failed"
tly assign fourth node-a >/dev/null
t_grant_wait 30 fourth/db grant.failed 'made by tally for grant other/db' >/dev/null
[ "$(as_env "$f4" "SELECT 1")" = 1 ] || t_fail "other/db's credential broke"
[ "$(mark d "$DB4")" = other/db ] || t_fail "$DB4's mark is '$(mark d "$DB4")'"
t_ok "$DB4: tally's for other/db (its credential works)"

t_check "a user whose account is not of every host ('%')"
msql "CREATE DATABASE hostdb; CREATE USER 'hosted'@'localhost' IDENTIFIED BY 'hosted-pw';
	GRANT ALL PRIVILEGES ON hostdb.* TO 'hosted'@'localhost'"
tly apply "$(consumer hosted)" >/dev/null
tly adopt hosted/db --resource hostdb --login hosted >/dev/null ||
	t_fail "tally adopt hosted/db failed"
tly assign hosted node-a >/dev/null
t_grant_wait 30 hosted/db grant.failed 'RENAME USER' >/dev/null
[ "$(msql "SELECT COUNT(*) FROM mysql.global_priv WHERE User = 'hosted' AND Host = 'localhost'")" = 1 ] ||
	t_fail "'hosted'@'localhost' was touched"
[ -z "$(mark d hostdb)" ] || t_fail "hostdb was marked: $(mark d hostdb)"
t_ok "$(tly log --json --stream grant/hosted/db --type grant.failed |
	head -n 1 | grep -o "user 'hosted'@'%' does not exist[^)]*)" | head -n 1); hostdb unmarked"

t_check "a database whose trigger runs as the user (its DEFINER)"
msql "CREATE DATABASE trigdb; CREATE USER 'trig'@'%' IDENTIFIED BY 'trig-pw';
	GRANT ALL PRIVILEGES ON trigdb.* TO 'trig'@'%'"
mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -utrig -ptrig-pw --skip-ssl trigdb -e "
	CREATE TABLE t (v INT); CREATE TABLE audit (v INT);
	CREATE TRIGGER t_ai AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES (NEW.v)" ||
	t_fail "trig cannot make its trigger"
tly apply "$(consumer trig)" >/dev/null
tly adopt trig/db --resource trigdb --login trig >/dev/null ||
	t_fail "tally adopt trig/db failed"
tly assign trig node-a >/dev/null
t_grant_wait 30 trig/db grant.failed 'DEFINER' >/dev/null
[ -z "$(mark u trig)" ] || t_fail "trig was marked: $(mark u trig)"
t_ok "trigdb: refused before anything changed (trig unmarked)"

t_check "another mesh's database and user on the same server"
# A second home (another mesh) with the same provider on the same
# server provisions a database there: its marks name that mesh.
(
	export TALLY_HOME="$W/home2"
	t_init
	t_node node-x 127.0.0.1
	tly apply "$W/mariadb.yaml" >/dev/null || t_fail "the other mesh's mariadb provider"
	printf '%s' "$MPW" | tly assign mariadb node-x --expose local --set port="$MPORT" \
		--set admin-user="$TALLY_TEST_MARIADB_USER" --set tls=verify \
		--set ca="$TALLY_TEST_CA" --secret admin-password >/dev/null ||
		t_fail "tally assign mariadb node-x (the other mesh) failed"
	tly apply "$(consumer alien)" >/dev/null
	tly assign alien node-x >/dev/null
	t_tallyd_once
	tly status alien >/dev/null || t_fail "the other mesh's alien is not healthy"
	# Outside $W/env: t_envget would refresh it from this mesh's home.
	cp "$(t_envfile node-x alien)" "$W/alien.env"
	tly mesh --json | t_jstr mesh >"$W/mesh2"
)
MESH2=$(cat "$W/mesh2")
DBX=$(t_envget "$W/alien.env" DB_NAME)
UX=$(t_envget "$W/alien.env" DB_USER)
[ -n "$DBX" ] && [ -n "$UX" ] || t_fail "no database or user of the other mesh's"
marks_x="SELECT CONCAT(kind, ' ', grant_id, ' ', mesh) FROM tally.marks WHERE name IN ('$DBX', '$UX') ORDER BY kind"
MARKSX=$(msql "$marks_x")
[ "$MARKSX" = "d alien/db $MESH2
u alien/db $MESH2" ] || t_fail "the other mesh's marks: $MARKSX"
AUTHX=$(priv "$UX" authentication_string)
as_env "$W/alien.env" "CREATE TABLE t (v INT); INSERT INTO t VALUES (42)" ||
	t_fail "the other mesh's credential cannot write"
tly apply "$(consumer grab)" >/dev/null
tly adopt grab/db --resource "$DBX" --login "$UX" >/dev/null ||
	t_fail "tally adopt grab/db failed"
tly assign grab node-a >/dev/null
t_grant_wait 30 grab/db grant.failed "owned by mesh $(printf '%.12s' "$MESH2")" >/dev/null
tly log --json --stream grant/grab/db --type grant.provisioned | grep -q . &&
	t_fail "grab/db was provisioned"
[ "$(msql "$marks_x")" = "$MARKSX" ] || t_fail "the other mesh's marks changed: $(msql "$marks_x")"
[ "$(priv "$UX" authentication_string)" = "$AUTHX" ] || t_fail "$UX's password was changed"
[ "$(as_env "$W/alien.env" "SELECT v FROM t")" = 42 ] ||
	t_fail "the other mesh's credential no longer reads its data"
t_ok "$DBX, $UX (mesh $(printf '%.12s' "$MESH2")...): refused, owned by mesh; marks, password and data untouched, its credential works"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >"$W/rebuild.out" 2>&1 || t_fail "tally rebuild --check: $(cat "$W/rebuild.out")"
t_ok "tally verify; rebuild --check"
