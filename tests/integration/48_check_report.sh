#!/bin/sh
# tally check says what it found and what it did, and its exit code
# tells the three outcomes apart (fsck's "errors corrected"):
#   - healthy: "healthy", exit 0;
#   - a password changed out of band: the drift (credential-mismatch,
#     with the driver's reason) and the repair are printed, in words and
#     in --json ("found"), exit 8: drift found and repaired, healthy now;
#   - checked again: healthy, exit 0;
#   - the database dropped: missing, not recreated, exit 6.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL, one provisioned grant"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app)" "$(t_consumer other)" >/dev/null
tly assign app node-a >/dev/null
tly assign other node-a >/dev/null
t_tallyd_once
t_expect_exit 0 "tally check app/db (healthy)" tly check app/db
grep -q '^app/db .*healthy' "$W/last.out" || { cat "$W/last.out" >&2; t_fail "check does not say healthy"; }
t_ok "healthy: exit 0"

t_check "a changed password: the drift and the repair are printed, exit 8"
U=$(t_envget "$(t_envfile node-a app)" DB_USER)
t_sql "ALTER ROLE \"$U\" PASSWORD 'changed-out-of-band'"
t_expect_exit 8 "tally check app/db (password changed)" tly check app/db
cat "$W/last.out"
grep -q 'app/db .*credential-mismatch' "$W/last.out" ||
	t_fail "check does not name the drift it found"
grep -q 'repaired' "$W/last.out" || t_fail "check does not say it repaired it"
grep -q '1 repaired' "$W/last.out" || t_fail "the summary does not count the repair"
[ "$(t_env_psql "$(t_envfile node-a app)" "SELECT session_user")" = "$U" ] ||
	t_fail "the delivered credential does not work after the repair"
t_ok "exit 8: $(grep 'app/db' "$W/last.out" | head -n 1 | cut -c1-160)"

t_check "the same in --json: what was found and what was done"
t_sql "ALTER ROLE \"$U\" PASSWORD 'changed-again'"
t_expect_exit 8 "tally check app/db --json" tly check app/db --json
grep -q '"found":{[^}]*"drift":"credential-mismatch"' "$W/last.out" ||
	{ cat "$W/last.out" >&2; t_fail "--json has no found.drift credential-mismatch"; }
grep -q '"found":{[^}]*"repaired":true' "$W/last.out" ||
	{ cat "$W/last.out" >&2; t_fail "--json does not say it was repaired"; }
grep -q '"found":{[^}]*"action":"[^"]' "$W/last.out" ||
	{ cat "$W/last.out" >&2; t_fail "--json does not say what was done"; }
t_ok "$(cut -c1-200 "$W/last.out")"

t_check "checked again: healthy, exit 0 (a --all with a healthy neighbour too)"
t_expect_exit 0 "tally check app/db (after the repair)" tly check app/db
t_expect_exit 0 "tally check --all" tly check --all
t_ok "exit 0"

t_check "a dropped database: missing, not recreated, exit 6"
t_sql "DROP DATABASE \"$(t_gname app/db app-db)\" WITH (FORCE)"
t_expect_exit 6 "tally check --all (app's database dropped)" tly check --all
grep -q 'app/db .*missing' "$W/last.out" || { cat "$W/last.out" >&2; t_fail "check does not say missing"; }
grep -q 'other/db .*healthy' "$W/last.out" || { cat "$W/last.out" >&2; t_fail "check does not say other/db is healthy"; }
t_ok "exit 6: $(grep 'app/db' "$W/last.out" | cut -c1-160)"
