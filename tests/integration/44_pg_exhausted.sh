#!/bin/sh
# PostgreSQL out of connection slots (SQLSTATE 53300): the consumer's
# login cannot get a slot, which says nothing about the grant.  tally
# check must record it as the provider being unavailable, once per
# outage (one provider.unreachable, however many checks), and never as
# drift: no grant.drifted, no grant.repaired.  When the slots come back,
# provider.recovered and exit 0.  The server has max_connections 6 (3
# reserved for superusers, so tally's admin still gets in); the 3 other
# slots are held by psql sessions of a role "hog".
. "$(dirname "$0")/lib.sh"

_hogs=""
_ex_cleanup() {
	_ex_rc=$?
	for _p in $_hogs; do kill "$_p" 2>/dev/null; wait "$_p" 2>/dev/null; done
	(exit $_ex_rc)
	_t_cleanup
}
trap _ex_cleanup EXIT

head_seq() { tly log --json | tail -n 1 | t_jfields seq; }
count_since() { tly log --json --from $(($1 + 1)) --type "$2" | grep -c . || true; }

t_say "throwaway PostgreSQL with max_connections 6, two provisioned grants"
t_pg_start
t_sql "ALTER SYSTEM SET max_connections = 6"
t_sql "ALTER SYSTEM SET superuser_reserved_connections = 3"
t_pg_stop_server
t_pg_restart_server
[ "$(t_sql 'SHOW max_connections')" = 6 ] || t_fail "max_connections is not 6"
t_sql "CREATE ROLE hog LOGIN"
# The provider revokes CONNECT on postgres from PUBLIC (revoke-public-connect).
t_sql "GRANT CONNECT ON DATABASE postgres TO hog"
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app-1)" "$(t_consumer app-2)" >/dev/null
tly assign app-1 node-a >/dev/null
tly assign app-2 node-a >/dev/null
t_tallyd_once
t_expect_exit 0 "tally check --all (healthy)" tly check --all
t_ok "provisioned and healthy"

t_check "every non-superuser slot taken: a consumer's login gets 53300"
# A hog can be refused: this script's own superuser sessions (t_sql,
# polling) take slots from the same pool while the hogs connect.  A hog
# that exited is started again until three hold their slots.
start_hog() {
	psql -X -q -h "$TALLY_TEST_PG_SOCK" -p "$TALLY_TEST_PG_PORT" -U hog \
		-d postgres -c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
	_hogs="$_hogs $!"
}
hogs_alive() {
	_n=0
	# An exited hog not yet reaped is a zombie: not alive.
	for _p in $_hogs; do
		kill -0 "$_p" 2>/dev/null &&
			[ "$(sed 's/^.*) //' "/proc/$_p/stat" 2>/dev/null | cut -c1)" != Z ] &&
			_n=$((_n + 1))
	done
	echo $_n
}
for i in 1 2 3; do start_hog; done
end=$(($(t_now_ms) + 20000))
until [ "$(t_sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'hog'")" -eq 3 ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "the hog sessions did not connect"
	[ "$(hogs_alive)" -lt 3 ] && start_hog
	sleep 0.2
done
set +e
t_env_psql "$(t_envfile node-a app-1)" "SELECT 1" >"$W/full.out" 2>&1
rc=$?
set -e
[ $rc -ne 0 ] && grep -q 'too many\|reserved' "$W/full.out" ||
	{ cat "$W/full.out" >&2; t_fail "a consumer could still connect with every slot held"; }
t_ok "$(head -n 1 "$W/full.out")"

t_check "tally check, three times: one provider.unreachable, no drift, no repair"
SINCE=$(head_seq)
for i in 1 2 3; do
	t_expect_exit 6 "tally check --all #$i (no slots)" tly check --all
done
cat "$W/last.out"
d=$(count_since "$SINCE" grant.drifted)
r=$(count_since "$SINCE" grant.repaired)
u=$(count_since "$SINCE" provider.unreachable)
[ "$d" -eq 0 ] && [ "$r" -eq 0 ] || {
	tly log --from $((SINCE + 1)) >&2
	t_fail "out of connection slots recorded as drift: $d grant.drifted, $r grant.repaired"
}
[ "$u" -eq 1 ] || { tly log --from $((SINCE + 1)) >&2; t_fail "provider.unreachable recorded $u times (want 1)"; }
tly log --json --from $((SINCE + 1)) --type provider.unreachable | grep -q '53300' ||
	t_fail "provider.unreachable does not give SQLSTATE 53300"
t_expect_exit 6 "tally status app-1 (no slots)" tly status app-1
grep -q 'unreachable' "$W/last.out" || { cat "$W/last.out" >&2; t_fail "status does not say the provider is unavailable"; }
t_ok "0 drifted, 0 repaired, 1 provider.unreachable (53300)"

t_check "slots free again: provider.recovered, check exit 0"
t_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'hog'" >/dev/null
for _p in $_hogs; do wait "$_p" 2>/dev/null || true; done
_hogs=""
end=$(($(t_now_ms) + 10000))
until [ "$(t_sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'hog'")" -eq 0 ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "the hog sessions did not end"
	sleep 0.1
done
t_expect_exit 0 "tally check --all (slots free)" tly check --all
[ "$(count_since "$SINCE" provider.recovered)" -eq 1 ] || t_fail "provider.recovered not recorded once"
[ "$(count_since "$SINCE" grant.drifted)" -eq 0 ] || t_fail "drift recorded after the outage"
t_ok "recovered; still no drift"
