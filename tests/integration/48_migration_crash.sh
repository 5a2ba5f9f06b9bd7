#!/bin/sh
# Migrations run exactly once, even across a crash.  20 consumer modules
# (20 grants) declare the same three migrations, two of them
# non-idempotent (002 and 003 INSERT a row; 001 creates the table if
# it is missing).  tallyd (a daemon) is SIGKILLed at random
# moments of its migration passes, 20 times, and started again each
# time; then a final tallyd --once.  Afterwards, in every database:
#   - each file's effect is there exactly once (one row from 002, one
#     from 003: counted);
#   - nothing is blocked (tally status exits 0);
#   - the log and the database agree: three migration.applied per grant,
#     one per file, and the database's own record of applied files
#     (tally.schema_history) holds the same three files with the same
#     checksums.
. "$(dirname "$0")/lib.sh"

N=${TALLY_MIGCRASH_GRANTS:-20}
KILLS=${TALLY_MIGCRASH_KILLS:-20}

t_say "throwaway PostgreSQL, $N consumers with 3 migrations each"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
mkdir -p "$W/manifests/mig/common"
# Each file also sleeps a little, so that a pass of 60 files takes long
# enough for the kills to land inside it.
cat >"$W/manifests/mig/common/001_marks.sql" <<'EOF'
CREATE TABLE IF NOT EXISTS marks (file text NOT NULL, at timestamptz DEFAULT now());
SELECT pg_sleep(0.02);
EOF
cat >"$W/manifests/mig/common/002_first.sql" <<'EOF'
INSERT INTO marks (file) VALUES ('002');
SELECT pg_sleep(0.02);
EOF
cat >"$W/manifests/mig/common/003_second.sql" <<'EOF'
INSERT INTO marks (file) VALUES ('003');
SELECT pg_sleep(0.02);
EOF
mf=$W/manifests/consumers.yaml
: >"$mf"
i=1
while [ $i -le "$N" ]; do
	m=$(printf 'c%02d' $i)
	printf -- '---\n' >>"$mf"
	cat "$(t_consumer "$m")" >>"$mf"
	echo "    migrations: mig/common" >>"$mf"
	i=$((i + 1))
done
tly apply "$mf" >/dev/null || t_fail "tally apply of $N modules failed"
i=1
while [ $i -le "$N" ]; do
	tly assign "$(printf 'c%02d' $i)" node-a >/dev/null ||
		t_fail "tally assign c$i failed"
	i=$((i + 1))
done
t_ok "$N modules applied and assigned (3 migration.stored)"

t_say "tallyd SIGKILLed at random moments of its passes, $KILLS times"
k=0
t0=$(t_now_ms)
while [ $k -lt "$KILLS" ]; do
	t_tallyd_start --workers 4
	# Inside a migration pass: once a file runs (a session of
	# tally-migrate; up to 3 s, while the log lacks some), a random
	# moment of the next 0..700 ms.
	end=$(($(t_now_ms) + 3000))
	[ "$(tly log --json --type migration.applied | wc -l)" -lt $((N * 3)) ] || end=0
	while [ "$(t_sql "SELECT count(*) FROM pg_stat_activity
	    WHERE application_name = 'tally-migrate'")" -eq 0 ] &&
	    [ "$(t_now_ms)" -lt "$end" ]; do
		sleep 0.01
	done
	ms=$(t_rand 700)
	sleep "0.$(printf '%03d' "$ms")"
	kill -KILL "$T_DPID" 2>/dev/null || t_fail "tallyd (pid $T_DPID) had died by itself"
	t_wait_exit "$T_DPID" 10
	k=$((k + 1))
done
t_ok "$k SIGKILLs in $(($(t_now_ms) - t0)) ms"
t_note "$(tly log --json --type migration.applied | wc -l) of $((N * 3)) migration.applied during the storm"

t_say "final tallyd --once"
# Its exit is checked after the rows are counted: a twice-applied file
# is the worse defect, and the one to report first.
set +e
"$TALLY_BIN/tallyd" --once --once-timeout 120 2>>"$T_DLOG"
once_rc=$?
set -e

t_check "every file applied exactly once in every database"
i=1
bad=""
while [ $i -le "$N" ]; do
	m=$(printf 'c%02d' $i)
	got=$(psql -X -At -q -h "$TALLY_TEST_PG_SOCK" -p "$TALLY_TEST_PG_PORT" \
		-U "$TALLY_TEST_PG_USER" -d "$(t_gname "$m/db" "$m-db")" -c \
		"SELECT string_agg(file || 'x' || n, ' ' ORDER BY file) FROM
		    (SELECT file, count(*) AS n FROM marks GROUP BY file) q" 2>&1) ||
		got="no table marks ($got)"
	[ "$got" = "002x1 003x1" ] || bad="$bad $m-db: '$got';"
	i=$((i + 1))
done
[ -z "$bad" ] || t_fail "rows per file (expected 002x1 003x1):$bad"
t_ok "$N databases: one row from 002, one from 003 in each"

t_note "$(grep -c 'applied already (the resource records it)' "$T_DLOG" || true) file(s) found applied in the resource and not in the log (a kill between the two), recorded without running again"

t_check "nothing blocked"
[ "$once_rc" -eq 0 ] || {
	grep 'migration blocked' "$T_DLOG" | tail -n 5 >&2
	t_fail "the final tallyd --once exited $once_rc (blocked above)"
}
n=$(tly log --json --type migration.blocked | wc -l)
t_expect_exit 0 "tally status (after the storm)" tly status
t_ok "tally status exits 0 ($n migration.blocked recorded on the way)"

t_check "the log and the databases agree"
i=1
while [ $i -le "$N" ]; do
	m=$(printf 'c%02d' $i)
	tly log --json --stream "grant/$m/db" --type migration.applied |
		t_jfields file checksum >"$W/log.$m"
	[ "$(cut -d' ' -f1 "$W/log.$m" | tr '\n' ' ')" = \
		"001_marks.sql 002_first.sql 003_second.sql " ] || {
		cat "$W/log.$m" >&2
		t_fail "grant $m/db: migration.applied is not 001, 002, 003 once each"
	}
	psql -X -At -q -F ' ' -h "$TALLY_TEST_PG_SOCK" -p "$TALLY_TEST_PG_PORT" \
		-U "$TALLY_TEST_PG_USER" -d "$(t_gname "$m/db" "$m-db")" -c \
		"SELECT file, checksum FROM tally.schema_history ORDER BY file" \
		>"$W/db.$m" 2>&1 || {
		cat "$W/db.$m" >&2
		t_fail "$m-db: no tally.schema_history"
	}
	cmp -s "$W/log.$m" "$W/db.$m" || {
		echo "--- log:" >&2; cat "$W/log.$m" >&2
		echo "--- database:" >&2; cat "$W/db.$m" >&2
		t_fail "grant $m/db: the log and tally.schema_history disagree"
	}
	i=$((i + 1))
done
t_ok "$N grants: 3 migration.applied each, the same files and checksums as tally.schema_history"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "chain sound; projections identical"
