#!/bin/sh
# Moving a binding is a migration (tally rebind --migrate), against two
# real PostgreSQL servers: pg1 is node-a's provider, pg2 node-b's.
#
#   without --migrate          refused (exit 4), saying what it would do;
#   a fault in the copy        rebind.failed + rebind.reverted: the old
#                              grant keeps serving (writable again), the
#                              partial copy is dropped, status says why;
#   the new provider down      the same, the reason names it;
#   SIGKILL in the copy        the next tallyd resumes from the intent
#                              (one rebind.issued), copies, switches;
#   the move                   rows written before it are on pg2, the
#                              counts are in rebind.copied, every holder's
#                              env file points at pg2; after every ack the
#                              old database is kept but its login is off;
#   a long copy                (4 s, injected) runs on its own thread: a
#                              grant requested meanwhile is provisioned
#                              before the move switches;
#   afterwards                 tally verify and tally rebuild --check pass.
#
# Routable names: node-a is 127.0.0.1 and node-b is localhost, both the
# loopback the servers listen on, so the env files tell them apart.
. "$(dirname "$0")/lib.sh"

t_say "two throwaway PostgreSQL servers; node-a (127.0.0.1) and node-b (localhost)"
t_pg_start pg1
P1=$TALLY_TEST_PG_PORT S1=$TALLY_TEST_PG_SOCK W1=$TALLY_TEST_PG_PWFILE D1=$PG_DIR
t_pg_start pg2
P2=$TALLY_TEST_PG_PORT S2=$TALLY_TEST_PG_SOCK W2=$TALLY_TEST_PG_PWFILE D2=$PG_DIR
[ "$P1" != "$P2" ] || t_fail "both servers on port $P1"

sql1() { psql -X -At -q -v ON_ERROR_STOP=1 -h "$S1" -p "$P1" -U postgres -d "${2:-postgres}" -c "$1"; }
sql2() { psql -X -At -q -v ON_ERROR_STOP=1 -h "$S2" -p "$P2" -U postgres -d "${2:-postgres}" -c "$1"; }
# The body's "version" (the envelope's comes first; .* takes the last).
bodyver() { sed -n 's/.*"version":\([0-9]*\)[,}].*/\1/p'; }
use_pg1() { PG_DIR=$D1 TALLY_TEST_PG_PORT=$P1; }
use_pg2() { PG_DIR=$D2 TALLY_TEST_PG_PORT=$P2; }

t_init
t_node node-a 127.0.0.1
t_node node-b localhost
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
tly assign postgres node-a --expose network --set port="$P1" --set admin-user=postgres \
	--secret admin-password <"$W1" >/dev/null || t_fail "assign postgres node-a"
tly assign postgres node-b --expose network --set port="$P2" --set admin-user=postgres \
	--secret admin-password <"$W2" >/dev/null || t_fail "assign postgres node-b"
# One migration: its record in the database (tally.schema_history) must
# move with the data.
SHOPM=$(t_consumer shop shared)
echo "    migrations: mig/shop" >>"$SHOPM"
mkdir -p "$W/manifests/mig/shop"
echo "CREATE TABLE marks (n int); INSERT INTO marks VALUES (1);" \
	>"$W/manifests/mig/shop/001_marks.sql"
tly apply "$SHOPM" >/dev/null
tly assign shop node-a >/dev/null
tly assign shop node-b >/dev/null
t_tallyd_once
t_wait_healthy 10
EA=$(t_envfile node-a shop)
SHOP=$(t_gname shop/db shop-db)	# shop/db's database (reactors/names.c)
EB=$(t_envfile node-b shop)
[ "$(t_envget "$EA" DB_PORT)" = "$P1" ] || t_fail "shop is not on pg1 (port $(t_envget "$EA" DB_PORT))"
t_ok "shop/db bound to node-a/postgres (co-located), held on node-a and node-b"

t_check "the consumer writes rows with its own credential"
t_env_psql "$EA" "CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL);
	INSERT INTO items (name) VALUES ('a'), ('b'), ('c');
	CREATE TABLE notes (item int REFERENCES items (id), body text);
	INSERT INTO notes VALUES (1, 'x'), (2, 'y');
	CREATE TABLE bulk (n int PRIMARY KEY, v text NOT NULL);
	INSERT INTO bulk SELECT g, md5(g::text) FROM generate_series(1, 10000) g;" \
	>/dev/null || t_fail "the consumer cannot write its database"
OLDPW=$(t_envget "$EA" DB_PASSWORD)
t_ok "items: 3 rows, notes: 2 rows, bulk: 10,000 rows in shop-db on pg1"

# --- refused without --migrate ----------------------------------------

t_say "without --migrate"
t_check "refused with exit 4, explaining what a move does"
t_expect_exit 4 "tally rebind without --migrate" tly rebind shop/db node-b/postgres
for w in "--migrate" "read-only" "row count" "acknowledged" "retained"; do
	grep -q -- "$w" "$W/last.err" || {
		cat "$W/last.err" >&2
		t_fail "the refusal does not mention '$w'"
	}
done
[ "$(tly log --json --type rebind.started | wc -l)" = 0 ] ||
	t_fail "a refused rebind appended an event"
t_ok "$(cut -c1-110 "$W/last.err")…"
t_expect_exit 4 "rebind to its own provider" tly rebind shop/db node-a/postgres --migrate
t_expect_exit 3 "rebind to no provider" tly rebind shop/db node-c/postgres --migrate

# --- a fault in the copy ----------------------------------------------

t_say "a failure mid-way: the copy fails (TALLY_FAULT=copy:fail)"
tly rebind shop/db node-b/postgres --migrate >/dev/null || t_fail "tally rebind --migrate"
t_check "a rotation is refused while the grant moves"
t_expect_exit 4 "tally rotate during a move" tly rotate shop/db
grep -q "moving" "$W/last.err" || t_fail "the refusal does not say the grant moves: $(cat "$W/last.err")"
export TALLY_FAULT=copy:fail
t_tallyd_once
unset TALLY_FAULT
t_check "rebind.failed says why, rebind.reverted follows; the grant stays on pg1"
tly log --json --stream grant/shop/db --type rebind.failed >"$W/failed"
[ "$(wc -l <"$W/failed")" = 1 ] || t_fail "expected one rebind.failed, got $(wc -l <"$W/failed")"
grep -q "fault injected" "$W/failed" || t_fail "rebind.failed does not carry the reason: $(cat "$W/failed")"
[ "$(tly log --json --stream grant/shop/db --type rebind.reverted | wc -l)" = 1 ] ||
	t_fail "no rebind.reverted"
[ "$(tly log --json --type binding.moved | wc -l)" = 0 ] || t_fail "the binding moved after a failed copy"
[ "$(t_envget "$EA" DB_PORT)" = "$P1" ] && [ "$(t_envget "$EA" DB_PASSWORD)" = "$OLDPW" ] ||
	t_fail "the env file changed after a failed move"
tly status shop >"$W/st" 2>&1 || true
grep -q "move to node-b/postgres failed (copy): .*fault injected.*stays on node-a/postgres" "$W/st" || {
	cat "$W/st" >&2
	t_fail "tally status does not say why the move failed"
}
t_check "the old database is writable again; the partial copy is gone"
t_env_psql "$EA" "INSERT INTO items (name) VALUES ('d')" >/dev/null ||
	t_fail "the old grant is not writable after the failed move"
[ "$(sql1 "SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = '$SHOP'")" = 0 ] ||
	t_fail "shop-db still carries the read-only setting"
[ "$(sql2 "SELECT count(*) FROM pg_database WHERE datname LIKE '$SHOP%'")" = 0 ] ||
	t_fail "the partial copy is left on pg2: $(sql2 "SELECT datname FROM pg_database")"
t_ok "$(sed -n 's/^ *move to/move to/p' "$W/st" | head -n 1 | cut -c1-120)"

# --- the new provider down --------------------------------------------

t_say "a failure mid-way: the new provider is down"
use_pg2
t_pg_stop_server
tly rebind shop/db node-b/postgres --migrate >/dev/null || t_fail "tally rebind --migrate (2)"
n=$(tly log --json --stream grant/shop/db --type rebind.started | tail -n 1 | bodyver)
[ "$n" = 3 ] || t_fail "a retry after a failed v2 should issue v3, got v$n"
t_tallyd_once
tly status shop >"$W/st" 2>&1 || true
grep -q "move to node-b/postgres failed (create): .*cannot reach PostgreSQL" "$W/st" || {
	cat "$W/st" >&2
	t_fail "tally status does not say the new provider was unreachable"
}
t_env_psql "$EA" "SELECT count(*) FROM items" >/dev/null || t_fail "the old grant stopped serving"
t_ok "$(sed -n 's/^ *move to/move to/p' "$W/st" | head -n 1 | cut -c1-120)"
t_pg_restart_server
use_pg1

# --- a crash in the copy, then the move -------------------------------

t_say "SIGKILL in the middle of the copy; the next tallyd resumes"
tly rebind shop/db node-b/postgres --migrate >/dev/null || t_fail "tally rebind --migrate (3)"
V=$(tly log --json --stream grant/shop/db --type rebind.started | tail -n 1 | bodyver)
export TALLY_FAULT=copy:delay=60000
t_tallyd_start --interval 60
unset TALLY_FAULT
end=$(($(t_now_ms) + 20000))
until grep -q "move of shop/db to node-b/postgres: creating" "$T_DLOG"; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "tallyd did not start the copy within 20 s"
	sleep 0.05
done
# The copy is held for 60 s: the freeze before it must show within 20 s
# (a fixed sleep here failed on a loaded machine, the create being slow).
end=$(($(t_now_ms) + 20000))
while :; do
	ro=$(sql1 "SELECT array_to_string(s.setconfig, ',') FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = '$SHOP'")
	[ "$ro" = "default_transaction_read_only=on" ] && break
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "the old database is not frozen during the copy ($ro)"
	sleep 0.05
done
kill -KILL "$T_DPID"
t_wait_exit "$T_DPID" 10
t_check "killed after the intent, the create and the freeze: nothing switched"
[ "$(tly log --json --stream grant/shop/db --type rebind.issued | wc -l)" = 3 ] ||
	t_fail "expected the third move's intent"
[ "$(tly log --json --type binding.moved | wc -l)" = 0 ] || t_fail "switched before the copy"
t_ok "shop-db on pg1 is read-only for new sessions; pg2 has $(sql2 "SELECT datname FROM pg_database WHERE datname LIKE '$SHOP%'")"
if t_env_psql "$EA" "INSERT INTO items (name) VALUES ('lost')" >/dev/null 2>&1; then
	t_fail "a write to the frozen database succeeded"
fi
t_ok "a write to the frozen source is refused (read-only transaction)"

t_tallyd_once
t_check "resumed: one intent, the copy counted, the binding moved"
[ "$(tly log --json --stream grant/shop/db --type rebind.issued | wc -l)" = 3 ] ||
	t_fail "the resumed move issued a new intent"
tly log --json --stream grant/shop/db --type rebind.copied >"$W/copied"
[ "$(wc -l <"$W/copied")" = 1 ] || t_fail "expected one rebind.copied"
grep -q '"public.items":4' "$W/copied" && grep -q '"public.notes":2' "$W/copied" &&
    grep -q '"public.bulk":10000' "$W/copied" || {
	cat "$W/copied" >&2
	t_fail "rebind.copied does not hold the row counts (items 4, notes 2)"
}
grep -q '"tally.schema_history":1' "$W/copied" && grep -q '"public.marks":1' "$W/copied" || {
	cat "$W/copied" >&2
	t_fail "rebind.copied does not count the migration's record (tally.schema_history: 1)"
}
[ "$(tly log --json --stream binding/shop/db --type binding.moved | wc -l)" = 1 ] ||
	t_fail "no binding.moved"
t_ok "$(sed 's/.*"tables":\({[^}]*}\).*/tables \1/' "$W/copied")"

t_check "every holder's env file points at pg2, and the data came along"
for f in "$EA" "$EB"; do
	[ "$(t_envget "$f" DB_PORT)" = "$P2" ] || t_fail "$f: DB_PORT $(t_envget "$f" DB_PORT), expected pg2's $P2"
	[ "$(t_envget "$f" DB_NAME)" = "${SHOP}_m$V" ] || t_fail "$f: DB_NAME $(t_envget "$f" DB_NAME), expected ${SHOP}_m$V"
	[ "$(t_env_psql "$f" "SELECT count(*) FROM items")" = 4 ] || t_fail "$f: the rows did not come along"
	[ "$(t_env_psql "$f" "SELECT count(*) || ':' || sum(length(v)) FROM bulk")" = "10000:320000" ] ||
		t_fail "$f: the 10,000 bulk rows did not come along intact"
done
[ "$(t_envget "$EA" DB_HOST)" = localhost ] || t_fail "node-a's holder should reach node-b's routable name, got $(t_envget "$EA" DB_HOST)"
[ "$(t_envget "$EB" DB_HOST)" = localhost ] || t_fail "node-b's holder: node-b's routable name localhost (the provider is exposed network), got $(t_envget "$EB" DB_HOST)"
t_env_psql "$EA" "INSERT INTO items (name) VALUES ('e'); SELECT setval('items_id_seq', (SELECT max(id) FROM items))" >/dev/null ||
	t_fail "the new grant is not writable"
[ "$(sql2 "SELECT file || ' ' || tableowner FROM tally.schema_history, pg_tables WHERE schemaname = 'tally'" "${SHOP}_m$V")" = "001_marks.sql ${SHOP}_m$V" ] ||
	t_fail "the migration's record did not come along to ${SHOP}_m$V (or is not the owner role's)"
[ "$(tly log --json --stream grant/shop/db --type migration.applied | wc -l)" = 1 ] &&
	[ "$(sql2 "SELECT count(*) FROM marks" "${SHOP}_m$V")" = 1 ] ||
	t_fail "001_marks.sql ran again after the move"
owner=$(sql2 "SELECT tableowner FROM pg_tables WHERE tablename = 'items'" "${SHOP}_m$V")
[ "$owner" = "${SHOP}_m$V" ] || t_fail "restored tables are owned by $owner, not the owner role"
t_ok "node-a: localhost:$P2, node-b: 127.0.0.1:$P2, database ${SHOP}_m$V owned by its owner role"

t_check "until every holder acknowledges, the old grant stays (disabled only after)"
tly status shop >"$W/st" 2>&1 || true
grep -q "moving to node-b/postgres (v$V): waiting on node-a/shop, node-b/shop" "$W/st" || {
	cat "$W/st" >&2
	t_fail "status does not say the move waits on both holders"
}
[ "$(sql1 "SELECT rolcanlogin FROM pg_roles WHERE rolname = '${SHOP}_v1'")" = t ] ||
	t_fail "the old login was disabled before the acknowledgements"
tly ack node-a shop "$V" >/dev/null || t_fail "tally ack node-a"
t_tallyd_once
[ "$(tly log --json --type rebind.completed | wc -l)" = 0 ] || t_fail "completed with a holder not acknowledged"
tly status shop >"$W/st" 2>&1 || true
grep -q "moving to node-b/postgres (v$V): waiting on node-b/shop (copied" "$W/st" || {
	cat "$W/st" >&2
	t_fail "status does not say the move waits on node-b/shop alone"
}
tly ack node-b shop "$V" >/dev/null || t_fail "tally ack node-b"
t_tallyd_once
[ "$(tly log --json --stream grant/shop/db --type rebind.completed | wc -l)" = 1 ] ||
	t_fail "no rebind.completed after every acknowledgement"
t_ok "rebind.completed after the second ack"

t_check "the old database is retained, its login disabled"
[ "$(sql1 "SELECT count(*) FROM pg_database WHERE datname = '$SHOP'")" = 1 ] || t_fail "the old database is gone"
[ "$(sql1 "SELECT count(*) FROM items" "$SHOP")" = 4 ] || t_fail "the old database lost its rows"
[ "$(sql1 "SELECT rolcanlogin FROM pg_roles WHERE rolname = '${SHOP}_v1'")" = f ] ||
	t_fail "the old login still logs in"
if PGPASSWORD=$OLDPW psql -X -At -h 127.0.0.1 -p "$P1" -U "${SHOP}_v1" -d "$SHOP" -c "SELECT 1" >/dev/null 2>&1; then
	t_fail "the old credential still connects"
fi
t_ok "shop-db on pg1: kept (4 rows), login shop-db_v1 NOLOGIN"

t_check "status is healthy again, the grant on node-b/postgres"
t_wait_healthy 10 shop
tly status shop --json | grep -q '"provider":"node-b/postgres"' || t_fail "status does not show the new provider"
tly status shop | grep -q "moved (tally rebind --migrate)" || t_fail "status does not say why it is bound there"
t_ok "$(tly status shop | sed -n 's/^ *db *//p' | head -n 1 | cut -c1-100)"

t_say "a long copy does not hold up tallyd's other work"
tly apply "$(t_consumer cart)" >/dev/null && tly assign cart node-a >/dev/null ||
	t_fail "cart"
t_tallyd_once
t_env_psql "$(t_envfile node-a cart)" "CREATE TABLE c (x int); INSERT INTO c VALUES (1)" \
	>/dev/null || t_fail "cart's table"
tly rebind cart/db node-b/postgres --migrate >/dev/null || t_fail "tally rebind cart/db"
export TALLY_FAULT=copy:delay=4000
t_tallyd_start --interval 60
unset TALLY_FAULT
end=$(($(t_now_ms) + 20000))
until grep -q "move of cart/db to node-b/postgres: creating" "$T_DLOG"; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "tallyd did not start cart's copy within 20 s"
	sleep 0.05
done
t0=$(t_now_ms)
tly apply "$(t_consumer late)" >/dev/null && tly assign late node-a >/dev/null ||
	t_fail "late"
until tly log --json --stream grant/late/db --type grant.provisioned | grep -q .; do
	[ "$(t_now_ms)" -lt $((t0 + 3000)) ] ||
		t_fail "a grant requested during a 4 s copy waited for it"
	sleep 0.05
done
t1=$(t_now_ms)
[ "$(tly log --json --stream binding/cart/db --type binding.moved | wc -l)" = 0 ] ||
	t_fail "the copy was over before the other grant: nothing shown"
until tly log --json --stream binding/cart/db --type binding.moved | grep -q .; do
	[ "$(t_now_ms)" -lt $((t0 + 20000)) ] || t_fail "cart's move did not switch after its copy"
	sleep 0.05
done
t2=$(t_now_ms)
t_tallyd_stop
[ "$(t_env_psql "$(t_envfile node-a cart)" "SELECT count(*) FROM c")" = 1 ] ||
	t_fail "cart's row did not come along"
t_ok "late provisioned $((t1 - t0)) ms into cart's copy; the move switched $((t2 - t0)) ms in, with its row"

t_say "the log and the projections"
t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >"$W/rb" 2>&1 || { cat "$W/rb" >&2; t_fail "tally rebuild --check failed"; }
t_ok "$(tail -n 1 "$W/rb")"
NEWPW=$(t_envget "$EA" DB_PASSWORD)
for pw in "$OLDPW" "$NEWPW"; do
	if grep -q -- "$pw" "$T_DLOG" || tly log --json | grep -q -- "$pw"; then
		t_fail "a password in tallyd's output or in the log"
	fi
done
t_ok "no password in the log or in tallyd's output"
