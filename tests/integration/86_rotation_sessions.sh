#!/bin/sh
# While a rotation waits, tally status shows the old login's sessions
# that the provider (real PostgreSQL) still has open, as the rotator
# counted them with the driver's sessions op: a holder that acked but
# still runs on the old credential is visible before retirement.
#   - game on node-a and node-b; tally rotate; node-a's agent (once)
#     acks v2, node-b does not: a psql session held open on the v1 login shows as
#     "old login (v1): 1 session(s) still open" (--json: old_sessions 1),
#     next to "waiting on node-b/game";
#   - the session ends: status says 0 (the count follows the provider);
#   - a second one opens: 1 again; node-b acks: the old login retires,
#     credential.retired records sessions_ended 1, the session is ended
#     and status no longer shows the rotation.
. "$(dirname "$0")/lib.sh"
G=game/db

# sleeper FILE: a psql session as FILE's credential, held open; T_SPID.
sleeper() {
	(
		PGPASSWORD=$(t_envget "$1" DB_PASSWORD) exec psql -X -At -q \
			-h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" -U "$(t_envget "$1" DB_USER)" \
			-d "$GDB" -c "SELECT pg_sleep(120)" >/dev/null 2>"$W/sleeper.err"
	) &
	T_SPID=$!
	_t_pids="$_t_pids $T_SPID"
	wait_sql 10 1 "the session as ${GDB}_v1"
}

# wait_sql SECONDS N WHAT: until N sessions of the v1 login run pg_sleep.
wait_sql() {
	_w_end=$(($(t_now_ms) + $1 * 1000))
	until [ "$(t_sql "SELECT count(*) FROM pg_stat_activity WHERE usename = '${GDB}_v1' AND query LIKE '%pg_sleep%'")" -eq "$2" ]; do
		[ "$(t_now_ms)" -lt "$_w_end" ] || t_fail "$3: not $2 session(s) within $1 s"
		sleep 0.05
	done
}

# wait_status SECONDS TEXT: until tally status game shows TEXT.
wait_status() {
	_w_end=$(($(t_now_ms) + $1 * 1000))
	until tly status game 2>&1 | grep -qF "$2"; do
		if [ "$(t_now_ms)" -gt "$_w_end" ]; then
			tly status game >&2 || true
			tail -n 10 "$T_DLOG" >&2
			t_fail "tally status did not show '$2' within $1 s"
		fi
		sleep 0.2
	done
}

t_say "throwaway PostgreSQL; game on node-a and node-b; tallyd --interval 1"
t_pg_start
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
GDB=$(t_gname game/db game-db)
t_node node-a 127.0.0.1
t_node node-b localhost
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
for n in node-a node-b; do tly assign game "$n" >/dev/null; done
t_tallyd_start --interval 1
t_wait_healthy 30 game
cp "$(t_envfile node-b game)" "$W/v1.env"
[ "$(t_envget "$W/v1.env" DB_USER)" = "${GDB}_v1" ] || t_fail "node-b does not hold v1"

t_check "rotation waiting on node-b, a session open on v1: status shows it"
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
end=$(($(t_now_ms) + 30000))
until [ "$(t_envget "$(t_envfile node-a game)" DB_USER)" = "${GDB}_v2" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "v2 was not delivered within 30 s"
	sleep 0.1
done
# node-a takes part: its agent, once, writes v2 and acknowledges it.
t_agent node-a --reload game=true
[ "$(t_envget "$W/agent-node-a/game.env" DB_USER)" = "${GDB}_v2" ] || t_fail "node-a's agent does not hold v2"
end=$(($(t_now_ms) + 20000))
until tly log --json --type credential.acknowledged | grep '"version":2' | grep -q game@node-a; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "node-a's agent's ack of v2 was not recorded within 20 s"
	sleep 0.1
done
sleeper "$W/v1.env"
wait_status 20 "old login (v1): 1 session(s) still open"
tly status game >"$W/st.txt" || true
grep -q "waiting on node-b/game" "$W/st.txt" || { cat "$W/st.txt" >&2; t_fail "status does not say it waits on node-b"; }
tly status game --json | grep -q '"old_sessions":1' || t_fail "status --json has no old_sessions 1"
t_ok "$(grep -o 'rotating.*' "$W/st.txt" | head -n 1)"

t_check "the session ends: the count follows the provider (0)"
kill "$T_SPID" 2>/dev/null || true
t_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '${GDB}_v1'" >/dev/null
wait_sql 10 0 "v1 sessions ended"
wait_status 20 "old login (v1): 0 session(s) still open"
t_ok "0 session(s) still open"

t_check "another session, then node-b acks: retired, the session ended, recorded"
sleeper "$W/v1.env"
wait_status 20 "old login (v1): 1 session(s) still open"
tly ack node-b game 2 >/dev/null || t_fail "tally ack node-b game 2 failed"
end=$(($(t_now_ms) + 30000))
until tly log --json --stream "grant/$G" --type credential.retired | grep -q '"version":1'; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "v1 was not retired within 30 s"
	sleep 0.1
done
tly log --json --stream "grant/$G" --type credential.retired | grep -q '"sessions_ended":1' ||
	t_fail "credential.retired does not record sessions_ended 1: $(tly log --json --type credential.retired)"
wait_sql 10 0 "the session at retirement"
t_wait_healthy 20 game
tly status game | grep -q "old login" && t_fail "status still shows the old login after retirement"
tly status game --json | grep -q '"old_sessions"' && t_fail "status --json still has old_sessions"
t_ok "credential.retired sessions_ended 1; the session ended; status clean"
t_tallyd_stop
