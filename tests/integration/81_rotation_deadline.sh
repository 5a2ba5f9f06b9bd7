#!/bin/sh
# A rotation with a deadline: tally rotate game/db --deadline 5s.  Three
# holders (game on node-a, node-b, node-c); node-a and node-b
# acknowledge, node-c never does.  Until the deadline the old login
# works (and status counts the deadline down); once it passes, tallyd
# retires the old login anyway: credential.retired with forced true and
# cut_off naming game@node-c, not before 5 s after rotation.started,
# and the session node-c still had open on the old credential is ended.
# Bad deadlines are refused on the command line (exit 2).
. "$(dirname "$0")/lib.sh"
# The grants' databases (reactors/names.c).

G=game/db
NODES="node-a node-b node-c"

t_wait_log() {
	_w_end=$(($(t_now_ms) + $1 * 1000))
	while :; do
		_w_l=$(tly log --json --stream "grant/$G" --type "$2" |
			grep -e "${3:-.}" | head -n 1) || true
		if [ -n "$_w_l" ]; then
			printf '%s\n' "$_w_l"
			return 0
		fi
		if [ "$(t_now_ms)" -gt "$_w_end" ]; then
			tail -n 20 "$T_DLOG" >&2
			t_fail "no $2 ${3:+matching '$3' }on grant/$G within $1 s"
		fi
		sleep 0.1
	done
}

t_say "throwaway PostgreSQL; game on node-a, node-b, node-c"
t_pg_start
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
GDB=$(t_gname game/db game-db)
t_node node-a 127.0.0.1
t_node node-b localhost
t_node node-c 127.0.0.2
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
for n in $NODES; do
	tly assign game "$n" >/dev/null || t_fail "tally assign game $n failed"
done
t_tallyd_start --interval 1
t_wait_healthy 30 game
cp "$(t_envfile node-c game)" "$W/v1.env"
t_ok "game/db v1 delivered to three holders"

t_check "bad deadlines are refused on the command line"
for d in 0 0s 5x 5ms -1 " 5" "" 18446744074s 213500d 36501d; do
	t_expect_exit 2 "tally rotate --deadline '$d'" tly rotate "$G" --deadline "$d"
done
tly log --json --stream "grant/$G" --type rotation.started | grep -q . &&
	t_fail "a refused --deadline started a rotation"
# 18446744074 s in ns wraps 2^64 to 0.29 s, and started + 213500 d
# wraps too: either would cut holders off at once.  100 years at most.
t_ok "0, 0s, 5x, 5ms, -1, ' 5', '', 18446744074s, 213500d, 36501d: exit 2, nothing started ($(head -n 1 "$W/last.err"))"

t_say "node-c holds a session open on the old credential"
(
	PGPASSWORD=$(t_envget "$W/v1.env" DB_PASSWORD) exec psql -X -At -q \
		-h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" -U ${GDB}_v1 -d ${GDB} \
		-c "SELECT pg_sleep(60)" >"$W/sleeper.out" 2>"$W/sleeper.err"
) &
SLEEPER=$!
_t_pids="$_t_pids $SLEEPER"	# lib.sh's cleanup kills it on failure
end=$(($(t_now_ms) + 10000))
until [ "$(t_sql "SELECT count(*) FROM pg_stat_activity WHERE usename = '${GDB}_v1' AND query LIKE '%pg_sleep%'")" -ge 1 ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "the session as ${GDB}_v1 did not start"
	sleep 0.05
done
t_ok "psql (pid $SLEEPER) sleeping as ${GDB}_v1"

t_say "tally rotate $G --deadline 5s; node-a and node-b acknowledge"
tly rotate "$G" --deadline 5s >/dev/null || t_fail "tally rotate --deadline 5s failed"
st=$(t_wait_log 5 rotation.started)
printf '%s' "$st" | grep -q '"deadline_ns":5000000000' ||
	t_fail "rotation.started does not carry deadline_ns 5000000000: $st"
t_wait_log 15 credential.activated >/dev/null
tly ack node-a game 2 >/dev/null || t_fail "tally ack node-a failed"
tly ack node-b game 2 >/dev/null || t_fail "tally ack node-b failed"
tly status game >"$W/status.txt" 2>&1 || true
grep -q "rotating v1 → v2: waiting on node-c/game for .* (deadline in " "$W/status.txt" || {
	cat "$W/status.txt" >&2
	t_fail "status does not show the rotation waiting on node-c with its deadline"
}
t_ok "$(grep -m1 rotating "$W/status.txt" | sed 's/^ *//')"

t_check "before the deadline, the old login still works"
started_ns=$(t_ts_ns "$(printf '%s' "$st" | t_jstr ts)")
[ $(($(t_now_ns) - started_ns)) -lt 4000000000 ] ||
	t_note "already $((($(t_now_ns) - started_ns) / 1000000)) ms since rotation.started"
[ "$(t_env_psql "$W/v1.env" "SELECT session_user")" = ${GDB}_v1 ] ||
	t_fail "node-c's v1 credential stopped working before the deadline"
kill -0 "$SLEEPER" 2>/dev/null || t_fail "the session on ${GDB}_v1 ended before the deadline"
t_ok "v1 connects, the session on it runs"

t_check "at the deadline: forced retirement, cut_off names game@node-c"
ret=$(t_wait_log 20 credential.retired)
t_wait_log 5 rotation.completed >/dev/null
printf '%s' "$ret" | grep -q '"forced":true' || t_fail "credential.retired not forced: $ret"
printf '%s' "$ret" | grep -q '"cut_off":\["game@node-c"\]' ||
	t_fail "cut_off does not name exactly game@node-c: $ret"
retired_ns=$(t_ts_ns "$(printf '%s' "$ret" | t_jstr ts)")
waited=$(((retired_ns - started_ns) / 1000000))
[ "$waited" -ge 5000 ] || t_fail "retired $waited ms after rotation.started, before the 5 s deadline"
[ "$waited" -lt 10000 ] || t_fail "retired only $waited ms after rotation.started (deadline 5 s, resync 1 s)"
t_ok "$(printf '%s' "$ret" | sed 's/.*"body"://') after $waited ms"
grep -q "retired v1 (forced by deadline)" "$T_DLOG" || t_fail "tallyd's log does not say the retirement was forced"
t_ok "tallyd: $(grep -m1 'forced by deadline' "$T_DLOG" | sed 's/^.*info: //')"

t_check "the old login is gone and its session ended"
[ -z "$(t_sql "SELECT 1 FROM pg_roles WHERE rolname = '${GDB}_v1'")" ] ||
	t_fail "${GDB}_v1 still exists after the forced retirement"
if t_env_psql "$W/v1.env" "SELECT 1" >/dev/null 2>&1; then
	t_fail "the v1 credential still connects after the forced retirement"
fi
t_wait_exit "$SLEEPER" 15
[ "$T_RC" -ne 0 ] || t_fail "the session as ${GDB}_v1 ended normally"
t_ok "${GDB}_v1 dropped; psql exited $T_RC: $(grep -m1 -i terminat "$W/sleeper.err" || head -n 1 "$W/sleeper.err")"

t_check "node-c, cut off, still has v2 delivered: its file works, it can ack late"
[ "$(t_env_psql "$(t_envfile node-c game)" "SELECT session_user")" = ${GDB}_v2 ] ||
	t_fail "node-c's delivered file does not connect as ${GDB}_v2"
tly ack node-c game 2 >/dev/null || t_fail "a late ack of node-c failed"
t_wait_healthy 10 game
t_ok "node-c connects as ${GDB}_v2; status healthy"

if tly history "$G" >"$W/history.txt" 2>&1; then
	t_note "tally history: $(grep -m1 'forced' "$W/history.txt" | sed 's/^ *//')"
fi
t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "tally verify, tally rebuild --check"
