#!/bin/sh
# The agent's state outlives a reboot (issue 21 item 2), so it must not
# outlive the mesh it was about: a node whose mesh is built again (a new
# home, `tally node add` again: a new control plane and new keys, the
# same grant ids from v1) takes the new mesh's deliveries, though the
# state of before held a higher version of the same grant.
. "$(dirname "$0")/lib.sh"

t_say "PostgreSQL; game/db at v2 on node-a, the agent's state kept"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
tly assign game node-a >/dev/null
t_tallyd_once
t_agent node-a
tly rotate game/db >/dev/null
t_tallyd_once
t_agent node-a
t_tallyd_once
[ "$(t_envget "$W/agent-node-a/game.env" DB_USER)" != "" ] || t_fail "no DB_USER delivered"
grep -q "version 2" "$W/agent-node-a.state/"*.state || t_fail "the state does not hold v2"
t_ok "v2 held in $W/agent-node-a.state"

t_check "the mesh built again: a new home, node-a added again, game/db at v1"
rm -rf "$TALLY_HOME" "$(t_nodekey node-a)"
t_init
t_node node-a 127.0.0.1
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
tly assign game node-a >/dev/null
t_tallyd_once
: >"$W/agent-node-a.log"
t_agent node-a
USER1=$(tly log --json --type credential.delivered | grep -c '"holder":"game@node-a"')
[ "$USER1" = 1 ] || t_fail "the new mesh delivered $USER1 times"
grep -q "v1 in .*game.env, reloaded, acknowledged" "$W/agent-node-a.log" ||
	{ tail -n 5 "$W/agent-node-a.log" >&2; t_fail "the agent did not take the new mesh's v1"; }
case $(t_envget "$W/agent-node-a/game.env" DB_USER) in
*_v1) ;;
*) t_fail "game.env holds $(t_envget "$W/agent-node-a/game.env" DB_USER), not the new mesh's v1" ;;
esac
t_env_psql "$W/agent-node-a/game.env" "SELECT 1" >/dev/null || t_fail "the new mesh's v1 does not connect"
tly log --json --type credential.ack-offered | grep -q '"version":1' || t_fail "v1 not acknowledged to the new mesh"
t_ok "the new mesh's v1 written, connects, acknowledged; the old mesh's state set aside"
