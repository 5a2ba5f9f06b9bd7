#!/bin/sh
# A fresh agent converges to the current version with one reload (issue
# 21 item 6): game/db rotated five times (each retired at a 1 s
# deadline, tallyd --once between) with no agent running, so v1..v6
# wait in the log; tally-node --once reads up to the head, keeps per
# grant the newest, writes game's files and runs its reload once, and
# acknowledges v6 only.
. "$(dirname "$0")/lib.sh"

t_say "PostgreSQL; game/db delivered, then rotated five times, no agent"
t_pg_start
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
GDB=$(t_gname game/db game-db)
t_node node-a 127.0.0.1
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
tly assign game node-a >/dev/null
t_tallyd_once
# A pass with a rotation waiting on the (absent) agent is unhealthy: 6.
pass() {
	set +e
	"$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG"
	_rc=$?
	set -e
	[ "$_rc" = 0 ] || [ "$_rc" = 6 ] || { tail -n 20 "$T_DLOG" >&2; t_fail "tallyd --once exited $_rc"; }
}
i=0
while [ $i -lt 5 ]; do
	i=$((i + 1))
	tly rotate game/db --deadline 1s >/dev/null || t_fail "tally rotate ($i)"
	pass
	sleep 1.1
	pass
done
[ "$(tly log --json --type credential.delivered | grep -c '"holder":"game@node-a"')" = 6 ] ||
	t_fail "not six deliveries: $(tly log --json --type credential.delivered | grep -c .)"
t_ok "six deliveries (v1..v6) wait in the log"

t_check "tally-node --once: one reload, the newest version, one acknowledgement"
D=$W/dir
"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$D" \
	--state "$W/state" --log "$TALLY_HOME" --once \
	--reload "game=echo \$TALLY_VERSION \$(grep ^DB_USER= \$TALLY_ENV_FILE) >>$W/reloads" \
	2>>"$W/agent.log" || { cat "$W/agent.log" >&2; t_fail "tally-node --once failed"; }
[ "$(wc -l <"$W/reloads")" = 1 ] || t_fail "the reload ran $(wc -l <"$W/reloads") times: $(cat "$W/reloads")"
[ "$(cat "$W/reloads")" = "6 DB_USER=${GDB}_v6" ] || t_fail "the reload saw $(cat "$W/reloads")"
[ "$(t_envget "$D/game.env" DB_USER)" = "${GDB}_v6" ] || t_fail "game.env holds $(t_envget "$D/game.env" DB_USER)"
t_env_psql "$D/game.env" "SELECT 1" >/dev/null || t_fail "v6 does not connect"
offers=$(tly log --json --type credential.ack-offered | grep '"holder":"game@node-a"' | sed -n 's/.*"version":\([0-9]*\).*/\1/p' | tr '\n' ' ')
[ "$offers" = "6 " ] || t_fail "acknowledgements offered for versions: $offers"
t_ok "one reload (TALLY_VERSION=6, DB_USER ..._v6); v6 connects; only v6 acknowledged"
