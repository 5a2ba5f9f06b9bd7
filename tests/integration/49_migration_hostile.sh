#!/bin/sh
# A hostile or slow migration cannot stall the daemon.
#
#   - slow: a migration that sleeps for an hour runs on tallyd (a
#     daemon); meanwhile a new consumer is assigned and its grant is
#     provisioned within 5 s (the slow file holds up only its own
#     grant); SIGTERM then stops tallyd within 5 s, and the backend
#     that ran the file is gone (pg_stat_activity); after a SIGKILL the
#     server ends the backend left behind within a few seconds;
#   - the provider's migration-timeout (2 s here): the same file is
#     cancelled on the server when the limit passes, blocked with the
#     limit in the reason, and its backend is gone;
#   - escape: statements that would lift the limit or leave the
#     consumer's session (SET statement_timeout, SET ROLE, RESET ALL,
#     set_config('statement_timeout', ...)) are refused before the file
#     runs, with file:line; nothing of the file ran.
. "$(dirname "$0")/lib.sh"

M=$W/manifests/mig

# mig_consumer NAME: t_consumer's module with migrations in $M/NAME.
mig_consumer() {
	mkdir -p "$M/$1"
	_m=$(t_consumer "$1")
	echo "    migrations: mig/$1" >>"$_m"
	echo "$_m"
}

# backends: the sessions running a migration (tally's application name).
backends() {
	t_sql "SELECT count(*) FROM pg_stat_activity
	    WHERE application_name = 'tally-migrate'"
}

# wait_for SECONDS WHAT CMD...: polls CMD until it succeeds.
wait_for() {
	_end=$(($(t_now_ms) + $1 * 1000)) _what=$2
	shift 2
	until "$@"; do
		[ "$(t_now_ms)" -lt "$_end" ] || return 1
		sleep 0.05
	done
}

sleeping() { [ "$(backends)" -ge 1 ]; }
no_backend() { [ "$(backends)" -eq 0 ]; }
provisioned() {
	tly log --json --stream "grant/$1" --type grant.provisioned | grep -q .
}

blocked_reason() {
	tly log --json --stream "grant/$1" --type migration.blocked |
		tail -n 1 | sed -n 's/.*"reason":"\(\([^"\\]\|\\.\)*\)".*/\1/p'
}

t_say "throwaway PostgreSQL; a module whose migration sleeps for an hour"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
SLOW=$(mig_consumer slow)
cat >"$M/slow/001_sleep.sql" <<'EOF'
-- an hour of nothing
SELECT pg_sleep(3600);
EOF
tly apply "$SLOW" >/dev/null || t_fail "tally apply slow.yaml failed"
tly assign slow node-a >/dev/null
QUICK=$(t_consumer quick)
tly apply "$QUICK" >/dev/null || t_fail "tally apply quick.yaml failed"

t_say "the slow file holds up only its own grant"
t_tallyd_start
wait_for 15 "the sleep" sleeping ||
	t_fail "no migration session in pg_stat_activity after 15 s"
t_ok "slow's migration runs (a session of tally-migrate in pg_stat_activity)"
t0=$(t_now_ms)
tly assign quick node-a >/dev/null
if ! wait_for 5 "quick provisioned" provisioned quick/db; then
	tail -n 5 "$T_DLOG" >&2
	t_fail "grant quick/db not provisioned 5 s after it was requested, while slow's migration runs"
fi
t1=$(t_now_ms)
sleeping || t_fail "the slow migration's session ended by itself"
t_ok "quick/db provisioned $((t1 - t0)) ms after it was requested; the sleep goes on"

t_check "SIGTERM stops tallyd within 5 s, and the backend goes with it"
t0=$(t_now_ms)
kill -TERM "$T_DPID"
t_wait_exit "$T_DPID" 5
t1=$(t_now_ms)
[ "$T_RC" -eq 0 ] || t_fail "tallyd exited $T_RC on SIGTERM"
wait_for 2 "the backend gone" no_backend ||
	t_fail "$(backends) migration session(s) still in pg_stat_activity 2 s after tallyd stopped"
t_ok "tallyd exited 0 $((t1 - t0)) ms after SIGTERM; no migration session left"
tly log --json --stream grant/slow/db --type migration.applied | grep -q . &&
	t_fail "the cancelled file was recorded as applied"
t_ok "nothing recorded as applied"

t_check "SIGKILL: the server ends the backend of the session left behind"
t_tallyd_start
wait_for 15 "the sleep" sleeping ||
	t_fail "no migration session in pg_stat_activity after 15 s (restarted)"
kill -KILL "$T_DPID"
t_wait_exit "$T_DPID" 5
t0=$(t_now_ms)
wait_for 5 "the backend gone" no_backend ||
	t_fail "$(backends) migration session(s) still in pg_stat_activity 5 s after tallyd was killed"
t_ok "backend gone $(($(t_now_ms) - t0)) ms after the SIGKILL (client_connection_check_interval)"

t_say "migration-timeout: the file is cancelled on the server at the limit"
tly assign postgres node-a --expose local --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --set migration-timeout=2 \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
	t_fail "tally assign postgres --set migration-timeout=2 failed"
t0=$(t_now_ms)
# timeout(1) only bounds a tallyd that would never come back.
t_expect_exit 6 "tallyd --once (slow blocked)" timeout 60 "$TALLY_BIN/tallyd" \
	--once --once-timeout 30
cat "$W/last.err" >>"$T_DLOG"
t1=$(t_now_ms)
why=$(blocked_reason slow/db)
case "$why" in
"001_sleep.sql:2: "*"time limit"*"2 s"*) ;;
*) t_fail "migration.blocked for slow/db does not name 001_sleep.sql:2 and the 2 s limit: '$why'" ;;
esac
[ $((t1 - t0)) -lt 15000 ] || t_fail "tallyd --once took $((t1 - t0)) ms with a 2 s limit"
no_backend || t_fail "$(backends) migration session(s) left after the limit"
t_ok "blocked in $((t1 - t0)) ms: $why; no session left"

t_say "statements that lift the limit or leave the session are refused"
ESC=$(mig_consumer escape)
cat >"$M/escape/001_ok.sql" <<'EOF'
CREATE TABLE ok (x int);
EOF
n=0
for form in "SET statement_timeout = 0;" \
	"set session statement_timeout to '1h';" \
	"RESET ALL;" \
	"SET ROLE postgres;" \
	"SELECT set_config('statement_timeout', '0', false);"; do
	printf -- '-- 002: try to escape\nCREATE TABLE esc (x int);\n%s\nSELECT pg_sleep(3600);\n' \
		"$form" >"$M/escape/002_escape.sql"
	tly apply "$ESC" >/dev/null || t_fail "tally apply escape.yaml failed"
	[ $n -gt 0 ] || tly assign escape node-a >/dev/null
	t_expect_exit 6 "tallyd --once ($form)" timeout 60 "$TALLY_BIN/tallyd" \
		--once --once-timeout 30
	cat "$W/last.err" >>"$T_DLOG"
	why=$(blocked_reason escape/db)
	case "$why" in
	"002_escape.sql:3: "*) ;;
	*) t_fail "'$form' on line 3: not refused with 002_escape.sql:3: '$why'" ;;
	esac
	[ "$(t_sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(3600)%' AND pid <> pg_backend_pid()")" -eq 0 ] ||
		t_fail "'$form': the file ran"
	t_ok "$form -> $why"
	n=$((n + 1))
done
[ "$(psql -X -At -q -h "$TALLY_TEST_PG_SOCK" -p "$TALLY_TEST_PG_PORT" \
	-U "$TALLY_TEST_PG_USER" -d "$(t_gname escape/db escape-db)" -c \
	"SELECT count(*) FROM pg_tables WHERE tablename = 'esc'")" -eq 0 ] ||
	t_fail "a refused file left its table esc behind"
t_ok "$n forms refused before running (no table esc; 001 applied)"

t_check "tally verify"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain sound"
