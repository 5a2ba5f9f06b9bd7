#!/bin/sh
# Rotation with fan-out, without lockout.  A shared grant (game/db) is
# held by three assignments, game on node-a, node-b and node-c (a shared
# grant belongs to one module, whose holders are that module's
# assignments, one per node: three holders need three nodes).  node-a
# runs the provider (exposure network, routable name 127.0.0.1; node-b
# is "localhost", node-c 127.0.0.2: every holder is told to connect to
# the provider's routable name, 127.0.0.1, where the server listens).
#
# tallyd runs as a daemon (--interval 1).  While a background poller
# connects with every holder's delivered credential (re-reading each
# env file, which tallyd replaces atomically) and records any failure,
# the grant is rotated: node-a and node-b acknowledge v2, node-c does
# not.  Then:
#   - the old login stays LOGIN and connects while node-c has not
#     acknowledged; status says "rotating v1 → v2: waiting on node-c/game";
#   - a session open on the old credential keeps running meanwhile;
#   - a second rotation is refused (exit 4, "already rotating"), and
#     appends nothing;
#   - node-c acknowledges: only then is the old login retired (gone
#     from pg_roles; in the log every credential.acknowledged comes
#     before credential.retired), and the session on it is ended;
#   - the poller recorded zero failures; tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"
# The grants' databases (reactors/names.c).

G=game/db
NODES="node-a node-b node-c"

# t_wait_log SECONDS TYPE [GREP]: until grant/game/db has an event of
# TYPE (whose JSON line matches GREP); prints that line.
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

head_seq() { tly log --json | tail -n 1 | t_jfields seq; }

# conn_file FILE: connects with a copy of an env file's credential.
conn_file() {
	t_env_psql "$1" "SELECT session_user" 2>"$W/conn.err"
}

roles() {
	t_sql "SELECT rolname || ':' || rolcanlogin::int FROM pg_roles
	       WHERE rolname LIKE '${GDB}%' ORDER BY 1" | tr '\n' ' '
}

t_say "throwaway PostgreSQL; nodes node-a (provider), node-b, node-c"
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
for n in $NODES; do
	f=$(t_envfile "$n" game)
	[ "$(t_envget "$f" DB_USER)" = ${GDB}_v1 ] ||
		t_fail "$n holds $(t_envget "$f" DB_USER), expected ${GDB}_v1"
	[ "$(t_envget "$f" DB_HOST)" = 127.0.0.1 ] ||
		t_fail "$n is told DB_HOST=$(t_envget "$f" DB_HOST), expected 127.0.0.1"
done
t_ok "game/db v1 delivered to node-a, node-b, node-c (DB_HOST 127.0.0.1 for all)"
cp "$(t_envfile node-c game)" "$W/v1.env"

t_say "background poller: every holder's delivered credential, all the time"
: >"$W/poll.fail"
: >"$W/poll.ok"
poller() {
	while [ ! -f "$W/poll.stop" ]; do
		for n in $NODES; do
			# One read of the file: it is replaced atomically, so
			# the fields below all come from the same version.
			c=$(cat "$(t_envfile "$n" game)" 2>/dev/null) || {
				echo "$(date +%T.%N) $n: no env file" >>"$W/poll.fail"
				continue
			}
			u=$(printf '%s\n' "$c" | sed -n 's/^DB_USER=//p')
			if PGPASSWORD=$(printf '%s\n' "$c" | sed -n 's/^DB_PASSWORD=//p') \
			    PGCONNECT_TIMEOUT=3 psql -X -At -q \
			    -h "$(printf '%s\n' "$c" | sed -n 's/^DB_HOST=//p')" \
			    -p "$(printf '%s\n' "$c" | sed -n 's/^DB_PORT=//p')" \
			    -U "$u" -d "$(printf '%s\n' "$c" | sed -n 's/^DB_NAME=//p')" \
			    -c "SELECT 1" >/dev/null 2>"$W/poll.err.$n"; then
				echo "$n $u" >>"$W/poll.ok"
			else
				echo "$(date +%T.%N) $n as $u: $(tr '\n' ' ' <"$W/poll.err.$n")" \
					>>"$W/poll.fail"
			fi
		done
	done
}
poller &
PPID_POLL=$!
_t_pids="$_t_pids $PPID_POLL"	# lib.sh's cleanup kills it on failure
# Its first round (a tally env and a psql per holder) on a loaded machine
# may take seconds; what matters is that it connects and nothing fails.
_p_end=$(($(t_now_ms) + 15000))
while [ ! -s "$W/poll.ok" ] && [ ! -s "$W/poll.fail" ] &&
    [ "$(t_now_ms)" -lt "$_p_end" ]; do
	sleep 0.1
done
[ -s "$W/poll.ok" ] || t_fail "the poller connected nowhere in 15 s: $(cat "$W/poll.fail")"
t_ok "poller running (pid $PPID_POLL)"

t_say "a session held open on the old credential (node-c's v1)"
(
	PGPASSWORD=$(t_envget "$W/v1.env" DB_PASSWORD) exec psql -X -At -q \
		-h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" -U ${GDB}_v1 -d ${GDB} \
		-c "SELECT pg_sleep(60)" >"$W/sleeper.out" 2>"$W/sleeper.err"
) &
SLEEPER=$!
_t_pids="$_t_pids $SLEEPER"
end=$(($(t_now_ms) + 10000))
until [ "$(t_sql "SELECT count(*) FROM pg_stat_activity WHERE usename = '${GDB}_v1' AND query LIKE '%pg_sleep%'")" -ge 1 ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "the session as ${GDB}_v1 did not start"
	sleep 0.05
done
t_ok "psql (pid $SLEEPER) sleeping as ${GDB}_v1"

t_say "tally rotate $G"
tly rotate "$G" >/dev/null || t_fail "tally rotate $G failed"
act=$(t_wait_log 20 credential.activated)
t_ok "credential.activated: $(printf '%s' "$act" | t_jfields seq user)"
for n in $NODES; do
	t_wait_log 10 credential.delivered "\"holder\":\"game@$n\",\"node\":\"$n\",\"version\":2" >/dev/null
done
end=$(($(t_now_ms) + 10000))
for n in $NODES; do
	until [ "$(t_envget "$(t_envfile "$n" game)" DB_USER)" = ${GDB}_v2 ]; do
		[ "$(t_now_ms)" -lt "$end" ] || t_fail "$n's env file does not hold v2"
		sleep 0.05
	done
done
t_ok "v2 delivered to all three holders (log and env files)"

t_check "both logins work while the rotation waits: $(roles)"
for r in ${GDB}_v1 ${GDB}_v2; do
	case " $(roles)" in
		*" $r:1 "*) ;;
		*) t_fail "expected ${GDB}_v1 and ${GDB}_v2 both LOGIN, found: $(roles)" ;;
	esac
done
t_ok "${GDB}_v1 and ${GDB}_v2 both rolcanlogin"

t_say "node-a and node-b acknowledge v2; node-c does not"
tly ack node-a game 2 >/dev/null || t_fail "tally ack node-a game 2 failed"
tly ack node-b game 2 >/dev/null || t_fail "tally ack node-b game 2 failed"
sleep 3	# three resync periods: tallyd has had every chance to retire
t_check "the old login is still LOGIN-able while node-c has not acknowledged"
[ "$(t_sql "SELECT rolcanlogin FROM pg_roles WHERE rolname = '${GDB}_v1'")" = t ] ||
	t_fail "${GDB}_v1 is no longer LOGIN ($(roles)) though node-c has not acknowledged"
[ "$(conn_file "$W/v1.env")" = ${GDB}_v1 ] ||
	t_fail "node-c's v1 credential no longer connects: $(cat "$W/conn.err")"
tly log --json --stream "grant/$G" --type credential.retired | grep -q . &&
	t_fail "credential.retired was recorded before node-c acknowledged"
kill -0 "$SLEEPER" 2>/dev/null || t_fail "the session on ${GDB}_v1 ended before retirement: $(cat "$W/sleeper.err")"
t_ok "rolcanlogin t; node-c's v1 credential connects; its open session runs; no credential.retired"

t_check "status names the holder it waits on"
tly status game >"$W/status.txt" 2>&1 || true
grep -q "rotating v1 → v2: waiting on node-c/game" "$W/status.txt" || {
	cat "$W/status.txt" >&2
	t_fail "status does not say 'rotating v1 → v2: waiting on node-c/game'"
}
t_ok "$(grep -m1 'rotating' "$W/status.txt" | sed 's/^ *//')"

t_check "an acknowledgement of a version the holder does not have is refused"
before=$(head_seq)
t_expect_exit 4 "tally ack node-c game 1 (the old version)" tly ack node-c game 1
grep -q "holds no credential v1" "$W/last.err" || t_fail "the refusal does not say why: $(cat "$W/last.err")"
t_expect_exit 4 "tally ack node-c game 3 (a version not issued)" tly ack node-c game 3
why=$(sed 's/^tally: //' "$W/last.err" | head -n 1)
t_expect_exit 3 "tally ack node-d game 2 (not assigned)" tly ack node-d game 2
[ "$(head_seq)" = "$before" ] || t_fail "a refused acknowledgement appended events"
t_ok "v1, v3: exit 4 ($why); node-d: exit 3"

t_check "a second rotation while this one runs is refused, with the reason"
before=$(head_seq)
t_expect_exit 4 "a second tally rotate $G" tly rotate "$G"
grep -q "already rotating" "$W/last.err" || {
	cat "$W/last.err" >&2
	t_fail "the refusal does not say 'already rotating'"
}
[ "$(head_seq)" = "$before" ] || t_fail "the refused rotation appended events"
t_ok "exit 4: $(sed 's/^tally: //' "$W/last.err")"
# --provider rotates every grant of the provider: one already rotating
# is skipped with the same reason (a warning; the others would start).
t_expect_exit 0 "tally rotate --provider node-a/postgres" \
	tly rotate --provider node-a/postgres
grep -q "already rotating" "$W/last.err" || t_fail "--provider: no 'already rotating' warning"
grep -q "^0 rotation(s) started" "$W/last.out" ||
	t_fail "tally rotate --provider started something: $(cat "$W/last.out")"
[ "$(head_seq)" = "$before" ] || t_fail "tally rotate --provider appended events"
t_ok "--provider skips it with the same reason: $(cat "$W/last.out")"

t_say "node-c acknowledges: the old login goes"
tly ack node-c game 2 >/dev/null || t_fail "tally ack node-c game 2 failed"
ret=$(t_wait_log 20 credential.retired)
t_wait_log 10 rotation.completed >/dev/null
rseq=$(printf '%s' "$ret" | t_jfields seq)
printf '%s' "$ret" | grep -q '"forced":false' || t_fail "retirement recorded as forced: $ret"
printf '%s' "$ret" | grep -q "\"user\":\"${GDB}_v1\"" || t_fail "credential.retired names another login: $ret"
tly log --json --stream "grant/$G" --type credential.acknowledged | t_jfields seq holder >"$W/acks"
[ "$(wc -l <"$W/acks")" -eq 3 ] || t_fail "expected 3 acknowledgements, found: $(cat "$W/acks")"
while read -r s h; do
	[ "$s" -lt "$rseq" ] || t_fail "credential.acknowledged of $h (seq $s) is after credential.retired (seq $rseq)"
done <"$W/acks"
t_ok "acks at seq $(cut -d' ' -f1 "$W/acks" | tr '\n' ' ')< credential.retired at seq $rseq (forced false)"
case " $(roles)" in
	*" ${GDB}_v1:"*) t_fail "${GDB}_v1 still exists after retirement: $(roles)" ;;
esac
t_ok "pg_roles: $(roles)"
if conn_file "$W/v1.env" >/dev/null; then t_fail "the retired v1 credential still connects"; fi
t_ok "the v1 credential is refused: $(head -n 1 "$W/conn.err" | sed 's/^psql: error: //')"

t_check "the session open on the old credential was ended at retirement"
t_wait_exit "$SLEEPER" 15
[ "$T_RC" -ne 0 ] || t_fail "the pg_sleep(60) session as ${GDB}_v1 ended normally (exit 0)"
[ "$(t_sql "SELECT count(*) FROM pg_stat_activity WHERE usename = '${GDB}_v1'")" -eq 0 ] ||
	t_fail "pg_stat_activity still shows sessions of ${GDB}_v1"
t_ok "psql exited $T_RC: $(grep -m1 -i 'terminat' "$W/sleeper.err" || head -n 1 "$W/sleeper.err")"

t_check "the poller never failed"
sleep 1
touch "$W/poll.stop"
t_wait_exit "$PPID_POLL" 15
if [ -s "$W/poll.fail" ]; then
	cat "$W/poll.fail" >&2
	t_fail "$(wc -l <"$W/poll.fail") delivered-credential connection(s) failed during the rotation"
fi
v1n=$(grep -c "${GDB}_v1\$" "$W/poll.ok" || true)
v2n=$(grep -c "${GDB}_v2\$" "$W/poll.ok" || true)
[ "$v1n" -gt 0 ] && [ "$v2n" -gt 0 ] ||
	t_fail "the poller did not see both versions (v1: $v1n, v2: $v2n connections)"
t_ok "0 failures in $(wc -l <"$W/poll.ok") connections (v1: $v1n, v2: $v2n)"

t_check "status healthy, no rotation shown; every holder's credential connects"
t_wait_healthy 10 game
grep -q rotating "$W/status.out" && t_fail "status still shows a rotation"
for n in $NODES; do
	[ "$(t_env_psql "$(t_envfile "$n" game)" "SELECT session_user")" = ${GDB}_v2 ] ||
		t_fail "$n's delivered credential does not connect as ${GDB}_v2"
done
t_ok "healthy; node-a, node-b, node-c connect as ${GDB}_v2"

t_check "a rotation after completion is accepted again"
tly rotate "$G" >/dev/null || t_fail "a new rotation after completion was refused"
t_wait_log 20 credential.activated '"body":{"grant":"game/db","version":3,' >/dev/null
for n in $NODES; do tly ack "$n" game 3 >/dev/null; done
t_wait_log 20 rotation.completed '"body":{"grant":"game/db","version":3[,}]' >/dev/null
t_ok "v2 → v3 completed"

t_tallyd_stop
t_check "tally history $G"
if tly history "$G" >"$W/history.txt" 2>&1; then
	sed 's/^/      /' "$W/history.txt" | grep -E 'rotat|retired|acknowledged|activated|issued' | head -n 30
	t_ok "tally history printed $(wc -l <"$W/history.txt") line(s)"
else
	t_note "tally history $G: $(head -n 1 "$W/history.txt")"
fi

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "chain sound; projections identical"
