#!/bin/sh
# Consolidating an embedded instance onto its node's provider (tally
# assign M N --consolidate INSTANCE; docs/manifest.md, seed 001), with
# two real PostgreSQL servers: emb plays vec's own embedded instance,
# pg node-a's provider.
#
#   refused up front     no such instance; no --from; a type whose driver
#                        cannot move data (directory): the reason, exit 4,
#                        nothing appended;
#   the move             the rows the module wrote into its own instance
#                        (with the credential tally delivered to it) are
#                        read back from pg with the credential delivered
#                        after the move; rebind.copied counts them; the
#                        binding says consolidated; the instance is left
#                        read-only with its data, nothing revoked there;
#   shown                tally status and tally explain say where it went;
#   not an undo          a second --consolidate is refused: another move;
#   replay               tally verify passes, tally rebuild --check too.
. "$(dirname "$0")/lib.sh"

t_say "two throwaway PostgreSQL servers: emb (vec's own) and pg (node-a's provider)"
t_pg_start emb
EP=$TALLY_TEST_PG_PORT ES=$TALLY_TEST_PG_SOCK EU=$TALLY_TEST_PG_USER
t_pg_start pg
[ "$EP" != "$TALLY_TEST_PG_PORT" ] || t_fail "both servers on port $EP"
esql() { psql -X -At -q -v ON_ERROR_STOP=1 -h "$ES" -p "$EP" -U "$EU" -d "${2:-postgres}" -c "$1"; }

t_init
t_node node-a 127.0.0.1
mkdir -p "$W/manifests"
cat >"$W/manifests/vec.yaml" <<'YAML'
module: vec
env: { VEC_HOST: "", VEC_PORT: "", VEC_DB: "", VEC_USER: "", VEC_PASSWORD: "" }
embedded:
  vectors:
    type: postgres-database
    runs: "pgvector/pgvector:pg16"
    env: { host: VEC_HOST, port: VEC_PORT, database: VEC_DB, user: VEC_USER, password: VEC_PASSWORD }
YAML
cat >"$W/manifests/files.yaml" <<'YAML'
module: files
env: { FILES_DIR: "" }
embedded:
  store:
    type: directory
    env: { path: FILES_DIR }
YAML
tly apply "$W/manifests/vec.yaml" >/dev/null || t_fail "tally apply vec.yaml"
tly apply "$W/manifests/files.yaml" >/dev/null || t_fail "tally apply files.yaml"
tly assign vec node-a >/dev/null || t_fail "tally assign vec node-a"
tly assign files node-a >/dev/null || t_fail "tally assign files node-a"
t_tallyd_once
E=$(t_envfile node-a vec)
PW=$(t_envget "$E" VEC_PASSWORD)
[ "${#PW}" -ge 24 ] || t_fail "no embedded credential delivered to vec@node-a"
[ -z "$(t_envget "$E" VEC_HOST)" ] || t_fail "an embedded instance's host is the module's own, yet one was delivered"

t_check "the module runs its own instance with the delivered credential and writes into it"
esql "ALTER ROLE $EU PASSWORD '$PW'" >/dev/null
esql "CREATE DATABASE vecdb" >/dev/null
PGPASSWORD=$PW psql -X -At -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$EP" -U "$EU" -d vecdb -c "
	CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);
	INSERT INTO items SELECT g, md5(g::text) FROM generate_series(1, 1000) g;
	CREATE TABLE notes (item int REFERENCES items (id), body text);
	INSERT INTO notes VALUES (1, 'first'), (2, 'second');" >/dev/null ||
	t_fail "cannot write the embedded instance with the delivered credential"
SUM=$(esql "SELECT md5(string_agg(v, ',' ORDER BY id)) FROM items" vecdb)
t_ok "items: 1000 rows, notes: 2 rows in vecdb on emb (port $EP)"

t_say "refused up front"
t_provider node-a local
t_tallyd_once
t_check "no such embedded instance"
t_expect_exit 3 "--consolidate nosuch" tly assign vec node-a --consolidate nosuch \
	--from "127.0.0.1:$EP" --from-resource vecdb --from-user "$EU"
grep -q "no embedded instance nosuch" "$W/last.err" || t_fail "the refusal does not say why: $(cat "$W/last.err")"
t_check "without --from: tally cannot reach the instance"
t_expect_exit 4 "--consolidate without --from" tly assign vec node-a --consolidate vectors
grep -q -- "--from HOST:PORT" "$W/last.err" || t_fail "the refusal does not say what is missing: $(cat "$W/last.err")"
t_check "a driver that cannot move data (directory)"
t_expect_exit 4 "--consolidate a directory" tly assign files node-a --consolidate store \
	--from 127.0.0.1:1 --from-resource x --from-user y
grep -q "moves the instance's data" "$W/last.err" || t_fail "the refusal does not give the reason: $(cat "$W/last.err")"
t_ok "$(cut -c1-140 "$W/last.err")"
[ "$(tly log --json --type rebind.started | wc -l)" = 0 ] || t_fail "a refused --consolidate appended rebind.started"

t_say "a consolidation that cannot reach the instance (a wrong --from)"
tly assign vec node-a --consolidate vectors --from 127.0.0.1:1 --from-resource vecdb \
	--from-user "$EU" >/dev/null || t_fail "tally assign --consolidate (wrong --from)"
t_tallyd_once
t_tallyd_once
t_check "rebind.failed then rebind.reverted; the partial copy is dropped; the module keeps its own"
[ "$(tly log --json --type rebind.failed | wc -l)" = 1 ] || t_fail "expected one rebind.failed"
tly log --json --type rebind.reverted >"$W/rev1"
[ "$(wc -l <"$W/rev1")" = 1 ] || { tail -n 20 "$T_DLOG" >&2; t_fail "expected one rebind.reverted"; }
grep -q 'never frozen\|NOT made writable' "$W/rev1" || t_fail "rebind.reverted does not say what became of the instance: $(cat "$W/rev1")"
[ "$(tly log --json --type binding.moved | wc -l)" = 0 ] || t_fail "the binding moved after a failed consolidation"
[ "$(t_envget "$E" VEC_PASSWORD)" = "$PW" ] && [ -z "$(t_envget "$E" VEC_HOST)" ] ||
	t_fail "the module's delivery changed after a failed consolidation"
[ "$(t_sql "SELECT count(*) FROM pg_database WHERE datname LIKE 'vectors-node-a%'")" = 0 ] ||
	t_fail "the partial copy is left on pg: $(t_sql "SELECT datname FROM pg_database")"
tly status vec >"$W/st" 2>&1 || true
grep -q "consolidation onto node-a/postgres failed (freeze): .*it stays on its own instance" "$W/st" || {
	cat "$W/st" >&2; t_fail "tally status does not say the consolidation failed"; }
t_ok "$(grep 'failed' "$W/st" | head -n 1 | sed 's/^ *//' | cut -c1-130)…"

t_say "tally assign vec node-a --consolidate vectors"
tly assign vec node-a --consolidate vectors --from "127.0.0.1:$EP" --from-resource vecdb \
	--from-user "$EU" >"$W/out" || t_fail "tally assign --consolidate"
grep -q "consolidating vectors" "$W/out" || t_fail "tally assign does not say what it starts: $(cat "$W/out")"
tly log --json --type rebind.started >"$W/started"
[ "$(wc -l <"$W/started")" = 2 ] || t_fail "expected two rebind.started (the failed one, this one)"
tail -n 1 "$W/started" | grep -q '"consolidate":"vectors"' || t_fail "rebind.started does not record the consolidation"
tly status vec >"$W/st" 2>&1 || true
grep -q "consolidating onto node-a/postgres (started)" "$W/st" || { cat "$W/st" >&2; t_fail "tally status does not show the consolidation running"; }
grep -q -- "$PW" "$W/started" && t_fail "the credential is in the event"
t_check "a second one while it runs is refused"
t_expect_exit 4 "--consolidate twice" tly assign vec node-a --consolidate vectors \
	--from "127.0.0.1:$EP" --from-resource vecdb --from-user "$EU"
t_tallyd_once
t_tallyd_once

t_check "the binding moved, the copy was counted"
tly log --json --type binding.moved >"$W/moved"
[ "$(wc -l <"$W/moved")" = 1 ] || { tail -n 20 "$T_DLOG" >&2; t_fail "no binding.moved after tallyd"; }
grep -q '"reason":"consolidated (tally assign --consolidate)"' "$W/moved" || t_fail "binding.moved does not say consolidated: $(cat "$W/moved")"
grep -q '"provider":"node-a/postgres"' "$W/moved" || t_fail "not moved onto node-a/postgres"
tly log --json --type rebind.copied >"$W/copied"
grep -q '"public.items":1000' "$W/copied" && grep -q '"public.notes":2' "$W/copied" ||
	t_fail "rebind.copied does not count the rows: $(cat "$W/copied")"
t_ok "binding.moved (consolidated); rebind.copied: items 1000, notes 2"

t_check "the module reads its rows back from the node's provider with the new credential"
NPW=$(t_envget "$E" VEC_PASSWORD)
[ "$NPW" != "$PW" ] || t_fail "the credential did not change with the move"
[ "$(t_envget "$E" VEC_PORT)" = "$TALLY_TEST_PG_PORT" ] || t_fail "VEC_PORT is $(t_envget "$E" VEC_PORT), not pg's $TALLY_TEST_PG_PORT"
[ "$(t_envget "$E" VEC_HOST)" = 127.0.0.1 ] || t_fail "VEC_HOST is not the local provider's loopback"
vq() { PGPASSWORD=$(t_envget "$E" VEC_PASSWORD) psql -X -At -q -v ON_ERROR_STOP=1 \
	-h "$(t_envget "$E" VEC_HOST)" -p "$(t_envget "$E" VEC_PORT)" \
	-U "$(t_envget "$E" VEC_USER)" -d "$(t_envget "$E" VEC_DB)" -c "$1"; }
[ "$(vq "SELECT count(*) FROM items")" = 1000 ] || t_fail "items on pg: not 1000 rows"
[ "$(vq "SELECT md5(string_agg(v, ',' ORDER BY id)) FROM items")" = "$SUM" ] || t_fail "items on pg differ from the embedded instance's"
[ "$(vq "SELECT body FROM notes WHERE item = 2")" = second ] || t_fail "notes did not move"
vq "INSERT INTO notes VALUES (3, 'after')" >/dev/null || t_fail "the consolidated database is not writable"
t_ok "1000 items (same digest) and the notes, writable, on pg as $(t_envget "$E" VEC_USER)"

t_check "the embedded instance is left read-only, its data kept, its login untouched"
[ "$(esql "SELECT count(*) FROM items" vecdb)" = 1000 ] || t_fail "the embedded instance lost its data"
[ "$(PGPASSWORD=$PW psql -X -At -q -h 127.0.0.1 -p "$EP" -U "$EU" -d vecdb -c 'SHOW default_transaction_read_only')" = on ] ||
	t_fail "the embedded instance's database is not read-only after the move"

t_check "after the ack the move completes; no retained grant on the embedded instance"
t_agent node-a
t_tallyd_once
[ "$(tly log --json --type rebind.completed | wc -l)" = 1 ] || t_fail "no rebind.completed after the ack"
tly log --json --type rebind.completed | grep -q "the module's own" || t_fail "rebind.completed does not say the instance was left alone"
[ "$(PGPASSWORD=$PW psql -X -At -q -h 127.0.0.1 -p "$EP" -U "$EU" -d postgres -c 'SELECT 1')" = 1 ] ||
	t_fail "the embedded instance's login was revoked"
tly grants --revoked >"$W/rev" 2>&1 || true
grep -q 'vec/vectors' "$W/rev" && t_fail "a retained grant was listed for the embedded instance: $(cat "$W/rev")"
t_ok "rebind.completed; the instance's login still works"

t_say "shown"
tly status vec >"$W/st" 2>&1 || { cat "$W/st" >&2; t_fail "tally status vec is not healthy"; }
grep -q "vectors .*consolidated onto node-a/postgres" "$W/st" || { cat "$W/st" >&2; t_fail "tally status does not show the consolidation"; }
t_ok "$(grep vectors "$W/st" | head -n 1 | sed 's/^ *//' | cut -c1-120)"
tly explain vec >"$W/ex" 2>&1 || t_fail "tally explain vec"
grep -q "vectors.*consolidated onto node-a/postgres" "$W/ex" || { cat "$W/ex" >&2; t_fail "tally explain does not show the consolidation"; }
t_ok "$(grep vectors "$W/ex" | head -n 1 | sed 's/^ *//' | cut -c1-120)"

t_check "not an undo: a second --consolidate is refused; going back is another move"
t_expect_exit 4 "--consolidate again" tly assign vec node-a --consolidate vectors \
	--from "127.0.0.1:$EP" --from-resource vecdb --from-user "$EU"
grep -q "already consolidated onto node-a/postgres.*another move" "$W/last.err" || t_fail "the refusal does not say so: $(cat "$W/last.err")"

t_check "tally verify; tally rebuild --check"
tly verify >"$W/v" 2>&1 || { cat "$W/v" >&2; t_fail "tally verify after the consolidation"; }
tly rebuild --check >"$W/rb" 2>&1 || { cat "$W/rb" >&2; t_fail "tally rebuild --check"; }
t_ok "verified; rebuild identical"
