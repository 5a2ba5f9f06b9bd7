#!/bin/sh
# The second relational vendor: MariaDB (drivers/mariadb.c), end to end
# through the real binaries against a throwaway MariaDB 10.11 of this
# script's (tests/harness/mariadb.sh, stopped on exit whatever happens).
# The cases of the PostgreSQL scripts where they apply:
#   - provisioned and delivered (10_isolation), the uri field included;
#     a postgres-database requirement is never bound to it;
#   - exclusive: a consumer cannot reach another's database;
#   - migrations applied as the consumer, recorded per statement (46);
#     tallyd killed -9 in the middle of a file: it resumes at the
#     statement it was in, none runs twice (48_migration_crash); killed
#     during a DDL (which MariaDB commits by itself), the file is blocked
#     at that statement's line, never repeated, and resumes once the
#     operator marks the statement;
#   - verified: privileges widened repaired, password changed repaired,
#     a dropped database flagged and never recreated silently (45);
#   - rotated beside with the holder's ack and no lockout (80);
#   - revoked: user locked, its session killed, data retained; restore;
#     purge (82);
#   - a kill storm: tallyd killed -9 repeatedly while 20 grants are
#     provisioned, then exactly those databases and users exist (50);
#   - tally rotate --admin (85).
. "$(dirname "$0")/lib.sh"

t_mariadb_start
MPORT=$TALLY_TEST_MARIADB_PORT
MPW=$(cat "$TALLY_TEST_MARIADB_PWFILE")

# msql SQL: as the admin, rows tab-separated, no header.
msql() {
	mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -u"$TALLY_TEST_MARIADB_USER" \
		-p"$MPW" -N -B -e "$1"
}
# as_env FILE SQL: as the consumer whose delivery FILE is.
as_env() {
	mariadb --no-defaults -h"$(t_envget "$1" DB_HOST)" -P"$(t_envget "$1" DB_PORT)" \
		-u"$(t_envget "$1" DB_USER)" -p"$(t_envget "$1" DB_PASSWORD)" \
		-N -B "$(t_envget "$1" DB_NAME)" -e "$2"
}

consumer() {
	mkdir -p "$W/manifests"
	{
		echo "module: $1"
		echo "env: {DB_HOST: \"\", DB_PORT: \"\", DB_NAME: \"\", DB_USER: \"\", DB_PASSWORD: \"\", DB_URI: \"\"}"
		echo "requires:"
		echo "  db:"
		echo "    type: mariadb-database"
		echo "    from: mariadb"
		echo "    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD, uri: DB_URI}"
		[ -n "${2:-}" ] && echo "    migrations: $2"
	} >"$W/manifests/$1.yaml"
	echo "$W/manifests/$1.yaml"
}

t_say "tally home, a mariadb provider on node-a, consumers app-a and app-b"
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
	--set admin-user="$TALLY_TEST_MARIADB_USER" --secret admin-password >/dev/null ||
	t_fail "tally assign mariadb node-a failed"
mkdir -p "$W/manifests/mig/app-a"
cat >"$W/manifests/mig/app-a/001_init.sql" <<'EOF'
-- the first migration; a ; in a comment
CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40));
INSERT INTO items VALUES (1, 'it''s; one');
CREATE TABLE `odd;name` (v INT);
EOF
tly apply "$(consumer app-a "mig/app-a")" "$(consumer app-b)" >/dev/null ||
	t_fail "tally apply app-a app-b failed"
tly assign app-a node-a >/dev/null
tly assign app-b node-a >/dev/null

t_tallyd_once
t_wait_healthy 10 app-a
t_wait_healthy 10 app-b

A=$(t_envfile node-a app-a)
B=$(t_envfile node-a app-b)
t_check "delivered: each consumer connects to its own database"
DA=$(t_envget "$A" DB_NAME)
DB=$(t_envget "$B" DB_NAME)
[ "$DA" = "$(t_gname app-a/db app-a-db)" ] || t_fail "app-a's database is '$DA'"
[ "$DA" != "$DB" ] || t_fail "both consumers got $DA"
[ "$(as_env "$A" "SELECT DATABASE()")" = "$DA" ] || t_fail "app-a cannot use $DA"
[ "$(as_env "$B" "SELECT DATABASE()")" = "$DB" ] || t_fail "app-b cannot use $DB"
U=$(t_envget "$A" DB_USER)
P=$(t_envget "$A" DB_PASSWORD)
[ "$(t_envget "$A" DB_URI)" = "mariadb://$U:$P@127.0.0.1:$MPORT/$DA" ] ||
	t_fail "app-a's uri is not mariadb://USER:PASSWORD@HOST:PORT/DB"
tly log --json | grep -qF "$P" && t_fail "a password reached the log"
t_ok "app-a: $DA as $U; app-b: $DB; uri composed; no password in the log"

t_check "exclusive: app-a cannot reach app-b's database"
as_env "$B" "CREATE TABLE mine (v INT)"
as_env "$A" "SELECT * FROM \`$DB\`.mine" >/dev/null 2>&1 && t_fail "app-a read app-b's table"
mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -u"$U" -p"$P" "$DB" -e "SELECT 1" >/dev/null 2>&1 &&
	t_fail "app-a connected to app-b's database"
t_ok "refused both ways"

t_check "app-a's migration ran as app-a, statement by statement"
[ "$(as_env "$A" "SELECT name FROM items WHERE id = 1")" = "it's; one" ] ||
	t_fail "items does not hold the migrated row"
as_env "$A" 'SELECT COUNT(*) FROM `odd;name`' >/dev/null || t_fail "odd;name is missing"
[ "$(as_env "$A" "SELECT COUNT(*) FROM tally_schema_history WHERE file = '001_init.sql' AND state = 'done'")" = 4 ] ||
	t_fail "tally_schema_history: $(as_env "$A" "SELECT * FROM tally_schema_history")"
tly log --json --type migration.applied | grep -q 001_init.sql || t_fail "no migration.applied"
t_ok "3 statements + the file recorded in tally_schema_history; migration.applied"

t_say "verification"
t_expect_exit 0 "tally check --all (healthy)" tly check --all
t_check "widened privileges are repaired"
msql "GRANT SELECT ON mysql.* TO '$U'@'%'"
t_expect_exit 8 "tally check app-a/db (drifted, repaired)" tly check app-a/db
[ "$(msql "SELECT COUNT(*) FROM mysql.db WHERE User = '$U' AND Db = 'mysql'")" = 0 ] ||
	t_fail "the extra grant is still there"
t_ok "repaired"
t_check "a password changed out of band is repaired"
msql "SET PASSWORD FOR '$U'@'%' = PASSWORD('changed-by-hand')"
as_env "$A" "SELECT 1" >/dev/null 2>&1 && t_fail "the old password still works?"
t_expect_exit 8 "tally check app-a/db (credential, repaired)" tly check app-a/db
as_env "$A" "SELECT 1" >/dev/null || t_fail "app-a's delivered password does not work after the repair"
t_ok "repaired: the delivered password works again"
t_check "a dropped database is flagged and not recreated by tallyd"
msql "DROP DATABASE \`$DB\`"
t_expect_exit 6 "tally check app-b/db (missing)" tly check app-b/db
grep -q "missing-resource" "$W/last.out" || t_fail "check did not say missing: $(cat "$W/last.out")"
t_expect_exit 6 "tallyd --once with app-b's database missing" "$TALLY_BIN/tallyd" --once --once-timeout 30
[ "$(msql "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '$DB'")" = 0 ] ||
	t_fail "$DB was recreated without tally repair"
tly repair app-b/db >/dev/null || t_fail "tally repair app-b/db failed"
t_tallyd_once
t_wait_healthy 10 app-b
t_ok "missing: exit 6, not recreated by tallyd; tally repair recreated it"

t_say "rotation beside, with the holder's ack, no lockout"
t_tallyd_start --interval 1
: >"$W/fails"
# The poller's copy of the environment can still name the old user when the
# holder acknowledges the new one (here the test acks for it) and the old user
# is retired: refused then, it was superseded, not locked out.
superseded() {
	[ -f "$W/acked" ] && [ "$(t_envget "$1" DB_USER)" != "$(t_envget "$A" DB_USER)" ]
}
(
	while [ ! -f "$W/stop-poll" ]; do
		cp "$A" "$W/poll.env" 2>/dev/null || continue
		# TALLY_TEST_SLOW_POLL: seconds between the copy and its use
		# (the test's own test: a slow poller on a loaded machine).
		[ -n "${TALLY_TEST_SLOW_POLL:-}" ] && sleep "$TALLY_TEST_SLOW_POLL"
		# A lockout is a refused credential (1045); a connection the
		# loaded server drops mid-handshake is tried again.
		as_env "$W/poll.env" "SELECT 1" >/dev/null 2>"$W/poll.err" ||
			as_env "$W/poll.env" "SELECT 1" >/dev/null 2>"$W/poll.err" ||
			! grep -q "1045\|Access denied" "$W/poll.err" ||
			superseded "$W/poll.env" ||
			{ date +%T.%N; cat "$W/poll.err"; } >>"$W/fails"
		sleep 0.05
	done
) &
POLL=$!
mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -u"$U" -p"$P" "$DA" \
	-e "SELECT SLEEP(600)" >/dev/null 2>&1 &
OLDSESS=$!
sleep 0.5
tly rotate app-a/db >/dev/null || t_fail "tally rotate app-a/db failed"
i=0
until [ "$(t_envget "$A" DB_USER)" != "$U" ]; do
	i=$((i + 1)); [ $i -lt 300 ] || t_fail "v2 was not delivered within 30 s"
	sleep 0.1
done
U2=$(t_envget "$A" DB_USER)
[ "$(msql "SELECT COUNT(*) FROM mysql.global_priv WHERE User IN ('$U', '$U2')")" = 2 ] ||
	t_fail "the two users are not side by side"
kill -0 $OLDSESS 2>/dev/null || t_fail "the session on the old user ended before the ack"
: >"$W/acked"
tly ack node-a app-a 2 >/dev/null || t_fail "tally ack node-a app-a 2 failed"
i=0
until [ "$(msql "SELECT COUNT(*) FROM mysql.global_priv WHERE User = '$U'")" = 0 ]; do
	i=$((i + 1)); [ $i -lt 300 ] || t_fail "the old user was not retired within 30 s after the ack"
	sleep 0.1
done
i=0
while kill -0 $OLDSESS 2>/dev/null; do
	i=$((i + 1)); [ $i -lt 50 ] || t_fail "the old user's session survived its retirement"
	sleep 0.1
done
touch "$W/stop-poll"
wait $POLL 2>/dev/null || true
[ -s "$W/fails" ] && t_fail "the holder was locked out: $(head -n 3 "$W/fails")"
[ "$(as_env "$A" "SELECT COUNT(*) FROM items")" = 1 ] || t_fail "v2 does not see app-a's data"
t_tallyd_stop
t_ok "$U -> $U2 beside; old user dropped after the ack, its session killed; no failed connection"

t_say "revocation: retain (locked, sessions killed), restore, purge"
UB=$(t_envget "$B" DB_USER)
as_env "$B" "CREATE TABLE kept (v INT); INSERT INTO kept VALUES (42)"
cp "$B" "$W/b.env"
mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -u"$UB" -p"$(t_envget "$B" DB_PASSWORD)" "$DB" \
	-e "SELECT SLEEP(600)" >/dev/null 2>&1 &
SESS=$!
sleep 0.5
tly remove app-b >/dev/null || t_fail "tally remove app-b failed"
t_tallyd_once
[ "$(msql "SELECT JSON_VALUE(Priv, '\$.account_locked') FROM mysql.global_priv WHERE User = '$UB'")" = 1 ] ||
	t_fail "app-b's user is not locked"
i=0
while kill -0 $SESS 2>/dev/null; do
	i=$((i + 1)); [ $i -lt 50 ] || t_fail "app-b's session survived the revocation"
	sleep 0.1
done
as_env "$W/b.env" "SELECT 1" >/dev/null 2>&1 && t_fail "app-b can still log in"
[ "$(msql "SELECT v FROM \`$DB\`.kept")" = 42 ] || t_fail "the retained data is gone"
t_ok "locked, session killed, login refused, data kept"
tly apply "$W/manifests/app-b.yaml" >/dev/null
tly assign app-b node-a >/dev/null
tly restore app-b/db >/dev/null || t_fail "tally restore app-b/db failed"
t_tallyd_once
t_wait_healthy 10 app-b
[ "$(as_env "$B" "SELECT v FROM kept")" = 42 ] || t_fail "the restored grant does not see its data"
t_ok "restored: unlocked, same database, data there"
tly remove app-b >/dev/null
t_tallyd_once
tly purge app-b/db --yes >/dev/null || t_fail "tally purge app-b/db failed"
t_tallyd_once
[ "$(msql "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '$DB'")" = 0 ] ||
	t_fail "$DB survived the purge"
[ "$(msql "SELECT COUNT(*) FROM mysql.global_priv WHERE User LIKE '${DB}%'")" = 0 ] ||
	t_fail "app-b's users survived the purge"
t_ok "purged: database and users gone"

t_say "a migration crash half way resumes at the right statement, never repeating one"
mkdir -p "$W/manifests/mig/app-m"
cat >"$W/manifests/mig/app-m/001_crash.sql" <<'EOF'
CREATE TABLE c1 (v INT);
INSERT INTO c1 VALUES (1);
INSERT INTO c1 SELECT SLEEP(4);
CREATE TABLE c2 (v INT);
EOF
tly apply "$(consumer app-m "mig/app-m")" >/dev/null || t_fail "tally apply app-m failed"
tly assign app-m node-a >/dev/null
DM=$(t_gname app-m/db app-m-db)
t_tallyd_start --interval 1
i=0
until [ "$(msql "SELECT COUNT(*) FROM \`$DM\`.tally_schema_history WHERE stmt = 2 AND state = 'done'" 2>/dev/null)" = 1 ]; do
	i=$((i + 1)); [ $i -lt 300 ] || t_fail "app-m's migration did not reach its third statement within 30 s"
	sleep 0.05
done
kill -KILL "$T_DPID"
wait "$T_DPID" 2>/dev/null || true
t_forget_pid "$T_DPID"
[ "$(msql "SELECT COUNT(*) FROM \`$DM\`.tally_schema_history WHERE stmt IN (0, 3, 4)")" = 0 ] ||
	t_fail "statements after the second were recorded before the kill"
t_tallyd_once
t_wait_healthy 20 app-m
[ "$(msql "SELECT COUNT(*) FROM \`$DM\`.c1")" = 2 ] ||
	t_fail "c1 has $(msql "SELECT COUNT(*) FROM \`$DM\`.c1") rows: a statement ran twice or not at all"
msql "SELECT COUNT(*) FROM \`$DM\`.c2" >/dev/null || t_fail "the last statement did not run"
[ "$(msql "SELECT COUNT(*) FROM \`$DM\`.tally_schema_history WHERE file = '001_crash.sql' AND state = 'done'")" = 5 ] ||
	t_fail "history: $(msql "SELECT stmt, state FROM \`$DM\`.tally_schema_history")"
[ "$(tly log --json --type migration.applied | grep -c 001_crash.sql)" = 1 ] ||
	t_fail "001_crash.sql applied $(tly log --json --type migration.applied | grep -c 001_crash.sql) times in the log"
t_ok "killed during statement 3; resumed there: CREATE TABLE c1 once, each INSERT once, c2 made, one migration.applied"

t_check "a DDL interrupted by a crash is refused at its line, never run twice"
cat >"$W/manifests/mig/app-m/002_ddl.sql" <<'EOF'
CREATE TABLE d1 (v INT);

CREATE TABLE d2 AS SELECT SLEEP(3) AS s;
CREATE TABLE d3 (v INT);
EOF
tly apply "$W/manifests/app-m.yaml" >/dev/null || t_fail "tally apply app-m (002) failed"
t_tallyd_start --interval 1
i=0
until [ "$(msql "SELECT COUNT(*) FROM \`$DM\`.tally_schema_history WHERE file = '002_ddl.sql' AND stmt = 2 AND state = 'started'" 2>/dev/null)" = 1 ]; do
	i=$((i + 1)); [ $i -lt 300 ] || t_fail "002_ddl.sql did not start its second statement within 30 s"
	sleep 0.05
done
kill -KILL "$T_DPID"
wait "$T_DPID" 2>/dev/null || true
t_forget_pid "$T_DPID"
sleep 4	# the server finishes the orphaned CREATE ... SELECT
t_expect_exit 6 "tallyd --once with 002_ddl.sql interrupted in a DDL" \
	"$TALLY_BIN/tallyd" --once --once-timeout 30
tly log --json --type migration.blocked | grep 002_ddl.sql | grep -q interrupted ||
	t_fail "no migration.blocked saying the DDL was interrupted: $(tly log --json --type migration.blocked | tail -n 1)"
tly status app-m >"$W/status.m" 2>&1 || true
grep -q '002_ddl.sql:3' "$W/status.m" || t_fail "tally status app-m does not point at 002_ddl.sql:3: $(cat "$W/status.m")"
msql "SELECT COUNT(*) FROM \`$DM\`.d3" >/dev/null 2>&1 && t_fail "the statement after the interrupted one ran"
# The operator looks: d2 exists, so the statement did run; marks it done.
msql "SELECT COUNT(*) FROM \`$DM\`.d2" >/dev/null || t_fail "d2 is not there"
msql "UPDATE \`$DM\`.tally_schema_history SET state = 'done' WHERE file = '002_ddl.sql' AND stmt = 2"
t_tallyd_once
t_wait_healthy 20 app-m
msql "SELECT COUNT(*) FROM \`$DM\`.d3" >/dev/null || t_fail "002_ddl.sql did not resume after the operator's mark"
t_ok "blocked at 002_ddl.sql:3 (interrupted DDL), nothing after it ran; marked done by hand, it resumed at the next statement"

t_say "kill storm: 20 grants while tallyd is killed -9 again and again"
N=20
mf=$W/storm.yaml
: >"$mf"
i=1
while [ $i -le $N ]; do
	printf -- '---\n' >>"$mf"
	cat "$(consumer "$(printf 'k%02d' $i)")" >>"$mf"
	i=$((i + 1))
done
tly apply "$mf" >/dev/null || t_fail "tally apply of the storm's modules failed"
(
	i=1
	while [ $i -le $N ]; do
		tly assign "$(printf 'k%02d' $i)" node-a >/dev/null 2>&1
		i=$((i + 1))
		sleep 0.05
	done
) &
APID=$!
k=0
while [ $k -lt 8 ] || kill -0 $APID 2>/dev/null; do
	t_tallyd_start --interval 1 --workers 4
	sleep "0.$(t_rand 9)$(t_rand 9)"
	kill -KILL "$T_DPID" 2>/dev/null || t_fail "tallyd died by itself"
	wait "$T_DPID" 2>/dev/null || true
	t_forget_pid "$T_DPID"
	k=$((k + 1))
	[ $k -lt 40 ] || break
done
wait $APID 2>/dev/null || true
t_tallyd_once
i=1
want_db=
want_u=
while [ $i -le $N ]; do
	m=$(printf 'k%02d' $i)
	d=$(t_gname "$m/db" "$m-db")
	want_db="$want_db $d"
	want_u="$want_u ${d}_v1"
	as_env "$(t_envfile node-a "$m")" "SELECT 1" >/dev/null ||
		t_fail "$m's delivered credential does not connect"
	i=$((i + 1))
done
got_db=$(msql "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys', 'tally')" | sort | tr '\n' ' ')
exp_db=$(printf '%s\n' $want_db "$DA" "$DM" | sort | tr '\n' ' ')
[ "$got_db" = "$exp_db" ] || t_fail "databases on the server: $got_db; expected $exp_db"
got_u=$(msql "SELECT User FROM mysql.global_priv WHERE User NOT IN ('root', 'mysql', 'mariadb.sys', '$TALLY_TEST_MARIADB_USER')" | sort | tr '\n' ' ')
exp_u=$(printf '%s\n' $want_u "$U2" "${DM}_v1" | sort | tr '\n' ' ')
[ "$got_u" = "$exp_u" ] || t_fail "users on the server: $got_u; expected $exp_u"
[ "$(msql "SELECT COUNT(*) FROM tally.marks k WHERE (k.kind = 'd' AND k.name NOT IN
	(SELECT SCHEMA_NAME FROM information_schema.SCHEMATA)) OR (k.kind = 'u' AND k.name NOT IN
	(SELECT User FROM mysql.global_priv))")" = 0 ] ||
	t_fail "tally.marks names objects that do not exist: $(msql "SELECT * FROM tally.marks")"
t_ok "$k kills; exactly $N databases and $N users of the storm (plus app-a's), each credential connects; no orphan mark"

t_say "tally rotate --admin: the provider's admin password, rotated by hash"
t_expect_exit 0 "tally check --all (a purged grant among them: not checked, not bad)" tly check --all
tly rotate --admin node-a/mariadb >/dev/null || t_fail "tally rotate --admin node-a/mariadb failed"
t_tallyd_once
msql "SELECT 1" >/dev/null 2>&1 && t_fail "the old admin password still logs in"
tly log --json --type admin.rotation.completed | grep -q . || t_fail "no admin.rotation.completed"
t_expect_exit 0 "tally check --all with the new admin password" tly check --all
tly apply "$(consumer app-n)" >/dev/null && tly assign app-n node-a >/dev/null || t_fail "app-n"
t_tallyd_once
as_env "$(t_envfile node-a app-n)" "SELECT 1" >/dev/null || t_fail "a grant made after the admin rotation does not connect"
t_ok "old admin password refused; checks and a new grant go through the new one"

t_check "a postgres-database requirement is not satisfied by the mariadb provider"
cat >"$W/pgwant.yaml" <<EOF
module: pgwant
env: {DB: ""}
requires:
  db:
    type: postgres-database
    from: mariadb
    env: {database: DB}
EOF
if tly apply "$W/pgwant.yaml" >"$W/pgwant.out" 2>&1; then
	tly assign pgwant node-a >/dev/null 2>&1 || true
	"$TALLY_BIN/tallyd" --once --once-timeout 30 2>>"$T_DLOG" &&
		t_fail "tallyd --once says all is healthy with pgwant unbound"
	[ -f "$(t_envfile node-a pgwant)" ] && t_fail "pgwant got a delivery from the mariadb provider"
	tly status pgwant >/dev/null 2>&1 && t_fail "pgwant is healthy with only a mariadb provider"
	t_ok "accepted, never bound or delivered: $(tly status pgwant 2>&1 | grep -m1 -i 'db' | cut -c1-100)"
else
	t_ok "refused: $(head -n 1 "$W/pgwant.out")"
fi
t_check "the log verifies, and the tables rebuild byte for byte"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >"$W/rebuild.out" 2>&1 || t_fail "tally rebuild --check: $(cat "$W/rebuild.out")"
t_ok "chain intact"
