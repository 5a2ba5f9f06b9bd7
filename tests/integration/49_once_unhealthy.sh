#!/bin/sh
# tallyd --once exits 6 when, at its end, anything is unhealthy, as
# tally status does: a grant whose database was dropped is missing
# (never recreated empty); every later tallyd --once still exits 6
# (the grant is no longer checked, but it is still missing), and the
# headline of the module says unhealthy.  After tally repair, --once
# exits 0 again.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL, two consumers"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app)" "$(t_consumer other)" >/dev/null
tly assign app node-a >/dev/null
tly assign other node-a >/dev/null
t_tallyd_once
t_ok "provisioned; tallyd --once exit 0"

t_check "app's database dropped: every tallyd --once exits 6"
t_sql "DROP DATABASE \"$(t_gname app/db app-db)\" WITH (FORCE)"
for i in 1 2 3; do
	set +e
	"$TALLY_BIN/tallyd" --once --once-timeout 20 2>>"$T_DLOG"
	rc=$?
	set -e
	[ $rc -eq 6 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "tallyd --once #$i exited $rc with app/db missing"; }
done
t_expect_exit 6 "tally status app" tly status app
grep -q '^app: unhealthy' "$W/last.out" || { cat "$W/last.out" >&2; t_fail "the headline is not unhealthy"; }
grep -q 'on node-a: unhealthy' "$W/last.out" || { cat "$W/last.out" >&2; t_fail "the assignment is not unhealthy"; }
t_expect_exit 0 "tally status other" tly status other
t_ok "exit 6 three times; app: unhealthy; other: healthy"

t_check "after tally repair, tallyd --once exits 0"
tly repair app/db >/dev/null
t_tallyd_once
t_expect_exit 0 "tally status (repaired)" tly status
t_ok "exit 0"
