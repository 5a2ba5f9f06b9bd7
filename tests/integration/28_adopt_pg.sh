#!/bin/sh
# tally adopt MODULE/REQ --resource NAME --login USER on PostgreSQL: a
# database made by hand (a live mesh's), with data and the login its
# consumer uses, taken under tally.
#   - the CLI: adopt before assign records the claim (grant.adopted); a
#     second adopt of the grant, another grant adopting the same
#     database, --login missing, an undeclared requirement, a
#     --migrated-through file the requirement does not declare, a
#     --secret-stdin the driver does not take: refused, nothing appended;
#   - migrations: the file the database holds already (--migrated-through
#     001) is recorded as applied and never run (it would fail: the table
#     exists); the next one runs with tally's credential once delivered;
#   - tallyd takes it over: nothing dropped or made again (same oid, the
#     rows and their checksum), the old login keeps working while the
#     rotation waits, nothing of the adopted login is delivered (no
#     credential.delivered of v1), the delivered credential is tally's
#     (v2) and reads and writes the data;
#   - the seeds' frozen password: the consumer's stored password had
#     diverged from the server's (it fails); the delivered one works;
#   - the takeover makes the login the owner role's member before it
#     moves what the database holds (the server's log of statements);
#   - a consumer on the adopted login keeps working throughout: its
#     node's agent (tally-node) writes v2, reloads it once and
#     acknowledges, and only then is the adopted login retired (status
#     names the wait), then refused;
#   - another mesh's database is refused (owned by mesh ...);
#   - adopting a database that does not exist, or one tally made for
#     another grant: grant.failed with the driver's reason, the other
#     grant's database untouched;
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

G=legacy/db

# as_legacy PASSWORD SQL: over TCP as the hand-made login.
as_legacy() {
	PGPASSWORD=$1 PGCONNECT_TIMEOUT=5 psql -X -At -q -v ON_ERROR_STOP=1 \
		-h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" -U legacy -d legacydb \
		-c "$2"
}

sum_sql="SELECT count(*) || ':' || md5(string_agg(id || '=' || v, ',' ORDER BY id)) FROM scores"

t_say "throwaway PostgreSQL; node-a runs it; a database made by hand"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a network
t_sql "CREATE ROLE legacy LOGIN PASSWORD 'frozen-real'" >/dev/null
t_sql "CREATE DATABASE legacydb OWNER legacy" >/dev/null
as_legacy frozen-real "CREATE TABLE scores (id int PRIMARY KEY, v text);
	INSERT INTO scores SELECT g, md5(g::text) FROM generate_series(1, 5000) g" \
	>/dev/null || t_fail "the hand-made login cannot create its table"
SUM0=$(as_legacy frozen-real "$sum_sql")
OID0=$(t_sql "SELECT oid FROM pg_database WHERE datname = 'legacydb'")
t_ok "legacydb (oid $OID0) owned by legacy: $SUM0"
t_check "the consumer's stored password diverged from the server's (frozen)"
if as_legacy frozen-stale "SELECT 1" >/dev/null 2>&1; then
	t_fail "the stale password connects"
fi
t_ok "the stale password is refused"

# legacy declares two migrations: 001 made the table the database holds.
mkdir -p "$W/manifests/mig/legacy"
printf 'CREATE TABLE scores (id int PRIMARY KEY, v text);\n' \
	>"$W/manifests/mig/legacy/001_scores.sql"
printf "ALTER TABLE scores ADD COLUMN note text DEFAULT 'n';\n" \
	>"$W/manifests/mig/legacy/002_note.sql"
m=$(t_consumer legacy shared)
echo "    migrations: mig/legacy" >>"$m"
tly apply "$m" >/dev/null || t_fail "tally apply legacy failed"
tly apply "$(t_consumer other shared)" >/dev/null

t_check "refusals append nothing"
before=$(t_head_seq)
t_expect_exit 4 "adopt without --login" tly adopt $G --resource legacydb
grep -q -- "--login" "$W/last.err" || t_fail "no word of --login: $(cat "$W/last.err")"
t_expect_exit 3 "adopt of an undeclared requirement" \
	tly adopt nosuch/db --resource legacydb --login legacy
t_expect_exit 4 "adopt with --node of a shared requirement" \
	tly adopt $G --node node-a --resource legacydb --login legacy
t_expect_exit 4 "--migrated-through a file legacy/db does not declare" \
	tly adopt $G --resource legacydb --login legacy --migrated-through 009_x.sql
grep -q "001_scores.sql, 002_note.sql" "$W/last.err" ||
	t_fail "the refusal does not list the files: $(cat "$W/last.err")"
echo frozen-real >"$W/pw"
t_expect_exit 4 "--secret-stdin for a driver that takes none" \
	sh -c "\"\$TALLY_BIN/tally\" adopt $G --resource legacydb --login legacy --secret-stdin <\"$W/pw\""
grep -q "takes nothing but" "$W/last.err" || t_fail "--secret-stdin: $(cat "$W/last.err")"
[ "$(t_head_seq)" = "$before" ] || t_fail "a refused adopt appended events"
t_ok "no --login: exit 4; undeclared: exit 3; --node of shared: exit 4"

t_say "tally adopt $G --resource legacydb --login legacy (before tally assign)"
tly adopt $G --resource legacydb --login legacy \
	--migrated-through 001_scores.sql >"$W/adopt.out" ||
	t_fail "tally adopt failed"
grep -q "retires legacy" "$W/adopt.out" || t_fail "adopt says: $(cat "$W/adopt.out")"
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

t_say "the consumer: on the adopted login until its agent writes tally's"
# A consumer as a live mesh runs it: its own stored credential until its
# node's agent writes the delivered one (and reloads it), then that; a
# query every round, every failure recorded.
mkdir -p "$W/agent"
: >"$W/poll.ok"
: >"$W/poll.fail"
# The reload is a request the consumer answers between two queries (as
# a service's reload returns once it runs on the new values): the agent
# acknowledges only after it, so no query is in flight on the old
# credential when it is retired.
u=legacy pw=frozen-real
consumer() {
	while [ ! -f "$W/poll.stop" ]; do
		if [ -f "$W/reload.req" ] && [ ! -f "$W/reload.done" ]; then
			c=$(cat "$W/agent/legacy.env")
			u=$(printf '%s\n' "$c" | sed -n "s/^DB_USER=//p" | tr -d "'\"")
			pw=$(printf '%s\n' "$c" | sed -n "s/^DB_PASSWORD=//p" | tr -d "'\"")
			: >"$W/reload.done"
		fi
		if PGPASSWORD=$pw PGCONNECT_TIMEOUT=3 psql -X -At -q -h 127.0.0.1 \
		    -p "$TALLY_TEST_PG_PORT" -U "$u" -d legacydb \
		    -c "SELECT count(*) FROM scores" >/dev/null 2>"$W/poll.err"; then
			echo "$u" >>"$W/poll.ok"
		else
			echo "$(date +%T.%N) as $u: $(tr '\n' ' ' <"$W/poll.err")" >>"$W/poll.fail"
		fi
		sleep 0.1
	done
}
consumer &
POLL=$!
_t_pids="$_t_pids $POLL"

# The server's own record of the takeover's statements, in order.
t_sql "ALTER SYSTEM SET log_statement = 'ddl'" >/dev/null
t_sql "SELECT pg_reload_conf()" >/dev/null
tly assign legacy node-a >/dev/null || t_fail "tally assign legacy node-a failed"
t_tallyd_start --interval 1
t_grant_wait 30 $G grant.provisioned >/dev/null
t_sql "ALTER SYSTEM RESET log_statement" >/dev/null
t_sql "SELECT pg_reload_conf()" >/dev/null
t_check "legacy is the owner role's member before what the database holds moves"
# Else its consumer is refused between the two (permission denied for
# table scores): no longer the tables' owner, not yet the owner's member.
grep -o 'statement: \(GRANT "legacy-db_[0-9a-f]*" TO "legacy"$\|REASSIGN OWNED BY "legacy" TO .*\)' \
	"$(cat "$PG_DIR/realdir" 2>/dev/null || echo "$PG_DIR")/log/server.log" \
	>"$W/takeover.sql" || true
head -n 1 "$W/takeover.sql" | grep -q '^statement: GRANT' || {
	cat "$W/takeover.sql" >&2
	t_fail "the takeover moved the objects before legacy was the owner's member"
}
grep -q REASSIGN "$W/takeover.sql" || t_fail "no REASSIGN OWNED in the server's log"
t_ok "$(tr '\n' ';' <"$W/takeover.sql" | cut -c1-160)"
t_grant_wait 30 $G rotation.started '"reason":"adopted' >/dev/null
t_grant_wait 30 $G credential.activated >/dev/null
t_grant_wait 30 $G credential.delivered '"version":2' >/dev/null
f=$(t_envfile node-a legacy)
USER2=$(t_envget "$f" DB_USER)
[ "$(t_envget "$f" DB_NAME)" = legacydb ] || t_fail "DB_NAME is $(t_envget "$f" DB_NAME)"
[ -n "$USER2" ] && [ "$USER2" != legacy ] || t_fail "DB_USER is '$USER2'"
grep -q "provisioned grant $G on node-a/postgres by adopting: database \"legacydb\" adopted" "$T_DLOG" ||
	t_fail "tallyd does not say what it adopted"
t_ok "delivered: DB_NAME legacydb, DB_USER $USER2 (tally's)"

t_check "nothing of the adopted login was delivered"
tly log --json --stream "grant/$G" --type credential.delivered |
	grep -q '"body":{[^}]*"version":1[,}]' && t_fail "a credential.delivered of v1"
t_ok "only v2 delivered"

t_check "the data is intact and the delivered credential reads and writes it"
[ "$(t_sql "SELECT oid FROM pg_database WHERE datname = 'legacydb'")" = "$OID0" ] ||
	t_fail "legacydb was made again"
[ "$(t_env_psql "$f" "$sum_sql")" = "$SUM0" ] || t_fail "the rows changed"
t_env_psql "$f" "INSERT INTO scores VALUES (5001, 'tally')" >/dev/null ||
	t_fail "the delivered credential cannot write"
t_env_psql "$f" "CREATE TABLE later (x int)" >/dev/null ||
	t_fail "the delivered credential cannot create a table"
t_ok "oid $OID0, $SUM0; insert and create as $USER2"

t_check "001 recorded, not run; 002 ran as tally's login"
t_grant_wait 30 $G migration.applied '"file":"002_note.sql"' >/dev/null
tly log --json --stream "grant/$G" --type migration.applied | grep -q '"file":"001_scores.sql"' ||
	t_fail "001_scores.sql is not recorded as applied"
grep -q "001_scores.sql was applied before tally adopted" "$T_DLOG" ||
	t_fail "tallyd does not say 001 was recorded, not run"
[ "$(t_env_psql "$f" "SELECT count(*) FROM scores WHERE note = 'n'")" = 5001 ] ||
	t_fail "002_note.sql did not run"
[ "$(t_env_psql "$f" "SELECT count(*) FROM tally.schema_history")" = 1 ] ||
	t_fail "the database's history is not 002 alone"
t_ok "migration.applied 001 (recorded) and 002 (run: every row has note 'n')"

t_check "the adopted login works until the holder acknowledges v2"
[ "$(as_legacy frozen-real "SELECT count(*) FROM scores")" = 5001 ] ||
	t_fail "the adopted login no longer reads"
as_legacy frozen-real "SELECT count(*) FROM later" >/dev/null ||
	t_fail "the adopted login cannot read what tally's login made"
tly status legacy >"$W/status.txt" 2>&1 || true
grep -q "adopted legacydb (tally adopt), its login legacy as v1, migrated through 001_scores.sql before" "$W/status.txt" || {
	cat "$W/status.txt" >&2
	t_fail "status does not say what was adopted"
}
tly status legacy --json | grep -q '"adopted":{"resource":"legacydb","version":1,"login":"legacy","migrated_through":"001_scores.sql"}' ||
	t_fail "status --json: no adopted: $(tly status legacy --json)"
grep -q "rotating v1 → v2 (adopted): waiting on node-a/legacy" "$W/status.txt" || {
	cat "$W/status.txt" >&2
	t_fail "status does not name the wait"
}
tly log --json --stream "grant/$G" --type credential.retired | grep -q . &&
	t_fail "retired before the acknowledgement"
t_ok "legacy reads; status: waiting on node-a/legacy"

t_say "node-a's agent writes v2, reloads the consumer and acknowledges: the adopted login goes"
echo "$(date +%s)" >"$W/agent.started"
t_reload_agent node-a legacy
t_grant_wait 30 $G credential.acknowledged '"holder":"legacy@node-a"' >/dev/null
t_grant_wait 30 $G credential.retired '"user":"legacy"' >/dev/null
t_reloaded_once
t_grant_wait 10 $G rotation.completed >/dev/null
[ "$(t_sql "SELECT count(*) FROM pg_roles WHERE rolname = 'legacy'")" = 0 ] ||
	t_fail "the role legacy is still there"
if as_legacy frozen-real "SELECT 1" >/dev/null 2>&1; then
	t_fail "the adopted login still connects"
fi
[ "$(t_env_psql "$f" "SELECT count(*) FROM scores")" = 5001 ] ||
	t_fail "tally's credential lost the data"
t_consumer_done "$POLL"
n1=$(grep -c '^legacy$' "$W/poll.ok" || true)
n2=$(grep -c "^$USER2\$" "$W/poll.ok" || true)
[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] || t_fail "the consumer did not run on both (legacy: $n1, $USER2: $n2)"
t_ok "legacy dropped and refused; the consumer never failed ($n1 queries as legacy, $n2 as $USER2 after one reload)"

t_say "what cannot be adopted: a database that does not exist, one of tally's"
tly apply "$(t_consumer ghost shared)" >/dev/null
tly adopt ghost/db --resource nosuchdb --login "$USER2" >/dev/null ||
	t_fail "tally adopt ghost/db failed"
tly assign ghost node-a >/dev/null
t_grant_wait 30 ghost/db grant.failed 'nothing to adopt' >/dev/null
tly adopt other/db --resource legacydb --login "$USER2" >/dev/null 2>&1 &&
	t_fail "other/db may adopt what legacy/db adopted"
tly apply "$(t_consumer third shared)" >/dev/null
tly adopt third/db --resource legacydb --login "$USER2" >/dev/null 2>&1 &&
	t_fail "third/db may adopt legacydb"
# A database tally made for a grant (not adopted): legacy's owner role
# is tally's now, so the driver refuses it.
tly apply "$(t_consumer fourth shared)" >/dev/null
tly assign other node-a >/dev/null
t_wait_healthy 30 other
f4=$(t_envfile node-a other)
DB4=$(t_envget "$f4" DB_NAME)
tly adopt fourth/db --resource "$DB4" --login "$(t_envget "$f4" DB_USER)" >/dev/null ||
	t_fail "tally adopt fourth/db failed"
tly assign fourth node-a >/dev/null
t_grant_wait 30 fourth/db grant.failed 'made by tally for grant other/db' >/dev/null
[ "$(t_env_psql "$f4" "SELECT 1")" = 1 ] || t_fail "other/db's credential broke"
t_ok "nosuchdb: nothing to adopt; $DB4: tally's for other/db (its credential works)"

t_check "another mesh's database is refused"
# A second home (another mesh) provisions a database on the same server.
(
	export TALLY_HOME="$W/home2"
	tly init >/dev/null
	tly node add node-x --routable-name 127.0.0.1 --key-out "$W/keys/node-x.key" >/dev/null
	t_provider node-x network
	tly apply "$(t_consumer alien shared)" >/dev/null
	tly assign alien node-x >/dev/null
	t_tallyd_once
	tly status alien >/dev/null || t_fail "the other mesh's alien is not healthy"
)
DBX=$(TALLY_HOME="$W/home2" tly status alien --json |
	sed -n 's/.*"resource":"\([^"]*\)".*/\1/p' | head -n 1)
[ -z "$DBX" ] && DBX=$(t_sql "SELECT datname FROM pg_database WHERE datname LIKE 'alien-db_%'")
[ -n "$DBX" ] || t_fail "no database of the other mesh's"
tly apply "$(t_consumer grab shared)" >/dev/null
tly adopt grab/db --resource "$DBX" --login "${DBX}_v1" >/dev/null ||
	t_fail "tally adopt grab/db failed"
tly assign grab node-a >/dev/null
t_grant_wait 30 grab/db grant.failed 'owned by mesh' >/dev/null
t_ok "$DBX (another mesh's): refused, owned by mesh …"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"

