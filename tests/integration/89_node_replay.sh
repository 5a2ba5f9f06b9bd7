#!/bin/sh
# The agent's state outlives its delivery directory (issue 21 item 2,
# the agent's half): --state (the unit's StateDirectory=, which a reboot
# keeps) holds the versions; --dir (in /run in the unit) may be wiped.
# v1 delivered and acknowledged, rotated to v2 (acknowledged, v1
# retired); then --dir is wiped (a reboot clearing /run) and every
# delivery is read again from the start of the log (v1 replayed): the
# agent writes no version it has already passed, runs no reload for
# them, and writes the version it holds (v2) back into the wiped --dir.
. "$(dirname "$0")/lib.sh"

t_say "PostgreSQL; node-a holds game/db; v1, then v2 by a rotation"
t_pg_start
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
GDB=$(t_gname game/db game-db)
t_node node-a 127.0.0.1
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
tly assign game node-a >/dev/null
t_tallyd_once
D=$W/run/node-a
S=$W/lib/node-a
mkdir -p "$W/run" "$W/lib"
agent() {
	"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$D" \
		--state "$S" --log "$TALLY_HOME" --once \
		--reload "game=grep ^DB_USER= \$TALLY_ENV_FILE >>$W/reloads" 2>>"$W/agent.log" ||
		{ cat "$W/agent.log" >&2; t_fail "tally-node --once failed"; }
}
agent
[ "$(t_envget "$D/game.env" DB_USER)" = "${GDB}_v1" ] || t_fail "v1 not written"
tly rotate game/db >/dev/null || t_fail "tally rotate"
t_tallyd_once
agent
t_tallyd_once
[ "$(t_envget "$D/game.env" DB_USER)" = "${GDB}_v2" ] || t_fail "v2 not written"
tly log --json --type credential.retired | grep -q '"version":1' || t_fail "v1 was not retired"
[ "$(cat "$W/reloads")" = "$(printf 'DB_USER=%s_v1\nDB_USER=%s_v2' "$GDB" "$GDB")" ] ||
	t_fail "reloads: $(cat "$W/reloads")"
t_ok "v1 then v2 written, reloaded and acknowledged; v1 retired"

t_check "--dir wiped, the log read again from its start (v1 replayed)"
rm -rf "$D"
rm -f "$S/position"
: >"$W/reloads"
agent
[ ! -s "$W/reloads" ] || t_fail "a reload ran for a version already passed: $(cat "$W/reloads")"
[ "$(t_envget "$D/game.env" DB_USER)" = "${GDB}_v2" ] ||
	t_fail "the wiped --dir holds $(t_envget "$D/game.env" DB_USER 2>/dev/null), not v2 written back"
t_env_psql "$D/game.env" "SELECT 1" >/dev/null || t_fail "the written-back v2 does not connect"
grep -q "^version 2$" "$S"/*.state || t_fail "the state holds $(grep '^version' "$S"/*.state)"
t_ok "no reload, nothing of v1 written; v2 written back and it connects"
