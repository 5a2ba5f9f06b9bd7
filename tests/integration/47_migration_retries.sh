#!/bin/sh
# A migration that cannot succeed as it is, against a real PostgreSQL.
#
#   - a file with COMMIT inside (it would end the transaction tally runs
#     each file in, keeping half of it): refused before it runs, blocked
#     with file:line, nothing of it in the database;
#   - tallyd as a daemon while the mesh is busy (an event every 0.1 s,
#     so a pass every 0.1 s): the blocked file is tried again with
#     backoff (0.5 s doubling), a handful of times in 8 s, not at every
#     pass, and the block is recorded once;
#   - the file fixed (tally apply): the new content is not held back by
#     the old one's backoff; applied within seconds, status healthy.
. "$(dirname "$0")/lib.sh"

M=$W/manifests/mig
mkdir -p "$M/tx"
TX=$W/manifests/tx.yaml
cat >"$TX" <<EOF
module: tx
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}
    migrations: mig/tx
EOF
printf '%s\n' 'CREATE TABLE early (id int);' 'COMMIT;' \
	'CREATE TABLE late (id int REFERENCES nowhere (id));' >"$M/tx/001_tx.sql"

tables() {
	psql -X -At -q -h "$TALLY_TEST_PG_SOCK" -p "$TALLY_TEST_PG_PORT" \
		-U "$TALLY_TEST_PG_USER" -d "$(t_gname tx/db tx-db)" -c "SELECT coalesce(string_agg(
		tablename, ' ' ORDER BY tablename), '') FROM pg_tables
		WHERE schemaname = 'public'"
}
blocked_events() {
	tly log --json --stream grant/tx/db --type migration.blocked | wc -l
}
tries() {
	grep -c 'grant tx/db: migration blocked: ' "$T_DLOG" || true
}

t_say "throwaway PostgreSQL; module tx whose migration commits half way"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$TX" >/dev/null
tly assign tx node-a >/dev/null

t_check "COMMIT inside a file: refused before it runs, with file:line"
t_expect_exit 6 "tallyd --once" "$TALLY_BIN/tallyd" --once --once-timeout 60
cat "$W/last.err" >>"$T_DLOG"
why=$(tly log --json --stream grant/tx/db --type migration.blocked | tail -n 1 |
	sed -n 's/.*"reason":"\([^"]*\)".*/\1/p')
case "$why" in
"001_tx.sql:2: COMMIT inside a migration"*) ;;
*) t_fail "migration.blocked is not '001_tx.sql:2: COMMIT inside a migration…': '$why'" ;;
esac
[ -z "$(tables)" ] || t_fail "tx-db has tables after a refused file: $(tables)"
t_expect_exit 6 "tally status tx (blocked)" tly status tx
t_ok "blocked: $why; tx-db empty; status exits 6"

t_check "a busy mesh: the blocked file is retried with backoff, not at every pass"
: >"$T_DLOG"
t_tallyd_start --interval 1
n0=$(blocked_events)
i=0
end=$(($(t_now_ms) + 8000))
while [ "$(t_now_ms)" -lt "$end" ]; do
	i=$((i + 1))
	tly node add "busy-$i" --routable-name 127.0.0.1 --key-out "$W/keys/busy-$i.key" >/dev/null
	sleep 0.1
done
n=$(tries)
[ "$n" -ge 2 ] || t_fail "the file was tried $n times in 8 s: not retried"
[ "$n" -le 7 ] || t_fail "the file was tried $n times in 8 s ($i events): no backoff"
[ "$(blocked_events)" -eq "$n0" ] ||
	t_fail "the same block was recorded again ($(blocked_events) migration.blocked, $n0 before)"
t_ok "tried $n times in 8 s while $i events arrived; migration.blocked recorded once"

t_check "the file fixed: applied at once, not after the old backoff"
printf '%s\n' 'CREATE TABLE early (id int PRIMARY KEY);' \
	'CREATE TABLE late (id int REFERENCES early (id));' >"$M/tx/001_tx.sql"
t0=$(t_now_ms)
tly apply "$TX" >/dev/null
end=$(($(t_now_ms) + 3000))
until tly log --json --stream grant/tx/db --type migration.applied | grep -q 001_tx; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "the fixed file was not applied within 3 s"
	sleep 0.05
done
t1=$(t_now_ms)
t_wait_healthy 10 tx
[ "$(tables)" = "early late" ] || t_fail "tx-db has '$(tables)', not 'early late'"
t_ok "applied $((t1 - t0)) ms after tally apply; tables: $(tables); status healthy"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "chain sound; projections identical"
