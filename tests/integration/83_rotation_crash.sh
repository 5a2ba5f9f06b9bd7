#!/bin/sh
# A rotation survives tallyd being killed (SIGKILL) at every step.  One
# shared grant, game/db, held by game on node-a and node-b; tallyd as a
# daemon (--interval 1), killed and started again.  Each round is one
# rotation vN → vN+1 with a kill at a different moment:
#   1. right after rotation.started (tallyd down when it is appended:
#      the log then holds exactly what a crash right after it leaves);
#   2. as soon as credential.issued appears (racing the driver call);
#   3. credential.issued recorded, the new login not created (the
#      server is stopped, so the create fails; killed there; the resumed
#      create must use the intent's password: one credential.issued);
#   4. as soon as credential.activated appears;
#   5. killed once credential.activated appears: every holder's sealed
#      delivery of the new version is already in the log (one commit),
#      so no holder can be left naming the old login at retirement;
#   6. right after the last acknowledgement (racing the retirement);
#   7. after the driver retired the old login, before credential.retired
#      was recorded (simulated: the admin disables and drops it while
#      tallyd is down);
#   8. at random moments, four kills in one rotation.
# Every rotation completes; the log has each step of each version
# exactly once; the server has only the owner role and the last login;
# every delivered credential connects; tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"
# The grants' databases (reactors/names.c).

G=game/db
NODES="node-a node-b"
V=1	# the grant's current credential version

t_wait_log() {	# SECONDS TYPE [GREP]: prints the first match
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
		sleep 0.05
	done
}
# bv N: matches an event body of grant/game/db whose version is N (the
# envelope's "version" is the stream's: never match that one).
bv() { printf '"body":{"grant":"%s","version":%s[,}]' "$G" "$1"; }
last_type() { tly log --json --stream "grant/$G" | tail -n 1 | t_jstr type; }
kill_daemon() {
	kill -KILL "$T_DPID" 2>/dev/null || true
	t_wait_exit "$T_DPID" 10
}
# spin_kill TYPE GREP: SIGKILL tallyd the moment TYPE (matching GREP) is
# in the log; prints the step the saga had reached when it died.
spin_kill() {
	_s_end=$(($(t_now_ms) + 20000))
	until tly log --json --stream "grant/$G" --type "$1" | grep -q -e "$2"; do
		[ "$(t_now_ms)" -lt "$_s_end" ] || t_fail "no $1 ($2) within 20 s"
	done
	kill_daemon
	last_type
}
ack_all() {
	for n in $NODES; do
		tly ack "$n" game "$1" >/dev/null || t_fail "tally ack $n game $1 failed"
	done
}
# finish: the rotation to V+1 completes, acknowledged by every holder.
finish() {
	_to=$((V + 1))
	t_wait_log 30 credential.activated "$(bv $_to)" >/dev/null
	ack_all "$_to"
	t_wait_log 30 rotation.completed "$(bv $_to)" >/dev/null
	V=$_to
	end=$(($(t_now_ms) + 10000))
	for n in $NODES; do
		until [ "$(t_envget "$(t_envfile "$n" game)" DB_USER)" = "${GDB}_v$V" ]; do
			[ "$(t_now_ms)" -lt "$end" ] || t_fail "$n's env file does not hold v$V"
			sleep 0.05
		done
		[ "$(t_env_psql "$(t_envfile "$n" game)" "SELECT session_user")" = "${GDB}_v$V" ] ||
			t_fail "$n's delivered credential does not connect as ${GDB}_v$V"
	done
}
roles() {
	t_sql "SELECT rolname || ':' || rolcanlogin::int FROM pg_roles
	       WHERE rolname LIKE '${GDB}%' ORDER BY 1" | tr '\n' ' '
}

t_say "throwaway PostgreSQL; game on node-a (provider) and node-b"
t_pg_start
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
GDB=$(t_gname game/db game-db)
t_node node-a 127.0.0.1
t_node node-b localhost
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
for n in $NODES; do tly assign game "$n" >/dev/null; done
t_tallyd_start --interval 1
t_wait_healthy 30 game
t_env_psql "$(t_envfile node-a game)" "CREATE TABLE t (x int); INSERT INTO t VALUES (1)" ||
	t_fail "game cannot write its database"
t_ok "game/db v1 on node-a and node-b"

t_say "1. killed right after rotation.started"
kill_daemon
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
[ "$(last_type)" = rotation.started ] || t_fail "unexpected last event $(last_type)"
t_tallyd_start --interval 1
finish
t_ok "v$V: resumed from rotation.started and completed"

t_say "2. killed as soon as credential.issued appears"
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
at=$(spin_kill credential.issued "$(bv $((V + 1)))")
t_tallyd_start --interval 1
finish
t_ok "v$V: killed at $at; completed"

t_say "3. credential.issued recorded, the new login not created (server down)"
t_pg_stop_server
lines=$(wc -l <"$T_DLOG")
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
t_wait_log 10 credential.issued "$(bv $((V + 1)))" >/dev/null
end=$(($(t_now_ms) + 15000))
until tail -n +$((lines + 1)) "$T_DLOG" | grep -q "warn: rotation of $G:"; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "tallyd did not try (and fail) to create the new login"
	sleep 0.05
done
kill_daemon
[ "$(last_type)" = credential.issued ] || t_fail "expected the saga at credential.issued, found $(last_type)"
t_note "tallyd: $(tail -n +$((lines + 1)) "$T_DLOG" | grep -m1 "rotation of $G:" | sed 's/^.*warn: //')"
t_pg_restart_server
t_tallyd_start --interval 1
finish
n=$(tly log --json --stream "grant/$G" --type credential.issued | grep -c "$(bv $V)")
[ "$n" -eq 1 ] || t_fail "v$V was issued $n times"
t_ok "v$V: created from the recorded intent after the restart (one credential.issued), completed"

t_say "4. killed as soon as credential.activated appears"
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
at=$(spin_kill credential.activated "$(bv $((V + 1)))")
t_tallyd_start --interval 1
finish
t_ok "v$V: killed at $at; completed"

t_say "5. killed once activated: the deliveries came in the same commit"
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
t_wait_log 20 credential.activated "$(bv $((V + 1)))" >/dev/null
kill_daemon
t_note "the log at $(last_type) v$((V + 1)), tallyd down"
for n in $NODES; do
	[ "$(t_envget "$(t_envfile "$n" game)" DB_USER)" = "${GDB}_v$((V + 1))" ] ||
		t_fail "$n's sealed delivery does not name v$((V + 1)) once it is active: it would be locked out at retirement"
done
t_ok "both holders' sealed deliveries name v$((V + 1)) with tallyd down"
t_tallyd_start --interval 1
finish
t_ok "v$V: completed; both holders connect with v$V"

t_say "6. killed right after the last acknowledgement"
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
t_wait_log 20 credential.activated "$(bv $((V + 1)))" >/dev/null
tly ack node-a game $((V + 1)) >/dev/null
tly ack node-b game $((V + 1)) >/dev/null
kill_daemon
at=$(last_type)
t_tallyd_start --interval 1
finish
t_ok "v$V: killed at $at; completed"

t_say "7. the old login retired on the server, credential.retired not recorded"
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
t_wait_log 20 credential.activated "$(bv $((V + 1)))" >/dev/null
kill_daemon
ack_all $((V + 1))
t_sql "ALTER ROLE \"${GDB}_v$V\" NOLOGIN" >/dev/null
t_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '${GDB}_v$V'" >/dev/null
t_sql "DROP ROLE \"${GDB}_v$V\"" >/dev/null
t_tallyd_start --interval 1
finish
t_ok "v$V: the retirement found the login gone and was recorded"

t_say "8. four kills at random moments in one rotation"
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
k=0
seen=""
while [ $k -lt 4 ]; do
	sleep "0.$(t_rand 2)$(t_rand 10)"
	kill_daemon
	seen="$seen $(last_type)"
	# After two kills, acknowledge once the new credential is out, so
	# the last kills land around the retirement.
	if [ $k -ge 1 ] && tly log --json --stream "grant/$G" \
	    --type credential.activated | grep -q "$(bv $((V + 1)))"; then
		ack_all $((V + 1))
	fi
	t_tallyd_start --interval 1
	k=$((k + 1))
done
finish
t_ok "v$V: killed at$seen; completed"

t_check "each step of each rotation is in the log exactly once"
tly log --json --stream "grant/$G" >"$W/stream.json"
v=2
while [ $v -le $V ]; do
	for spec in "rotation.started \"from\":$((v - 1)),\"to\":$v," \
	    "credential.issued $(bv $v)" "credential.activated $(bv $v)" \
	    "credential.retired $(bv $((v - 1)))" "rotation.completed $(bv $v)"; do
		ty=${spec%% *}
		pat=${spec#* }
		c=$(grep "\"type\":\"$ty\"" "$W/stream.json" | grep -c -e "$pat" || true)
		[ "$c" -eq 1 ] || t_fail "$ty for v$v appears $c times"
	done
	v=$((v + 1))
done
t_ok "v2..v$V: rotation.started, credential.issued, credential.activated, credential.retired, rotation.completed once each"

t_check "the server holds the owner role and the last login only"
[ "$(roles)" = "${GDB}:0 ${GDB}_v$V:1 " ] || t_fail "pg_roles: $(roles) (expected ${GDB}:0 ${GDB}_v$V:1)"
[ "$(t_env_psql "$(t_envfile node-b game)" "SELECT x FROM t")" = 1 ] || t_fail "the data did not survive"
t_ok "pg_roles: $(roles); the row written as v1 is still there"

t_tallyd_stop
t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "chain sound; projections identical"
