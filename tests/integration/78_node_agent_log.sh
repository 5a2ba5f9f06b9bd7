#!/bin/sh
# tally-node following the log on the control plane's own machine
# (--log, the embedded default), issue 14 items 1-3:
#   - node add records an Ed25519 signing key beside the sealing key
#     (node.added signkey), the key file holds both and the control
#     plane's public key (node.added cpkey; 128 bytes, 0600); a key file
#     of before (32 bytes) gets both with tally node rekey
#     (node.key-added) and the agent with it is believed;
#   - three agents, three nodes, separate directories and keys: each
#     writes DIR/game.env (0600; the mapped fields and the manifest's
#     env default LOG_LEVEL=info) and DIR/game/VARIABLE files, runs its
#     reload, and acknowledges with proof: credential.acknowledged
#     (actor node:NODE, proof verified) with no tally ack typed;
#   - tally rotate: delivery -> reload -> ack -> retire, completed by
#     the agents alone; the new credential connects from the agent's
#     files; the agents never needed the master key.
. "$(dirname "$0")/lib.sh"
G=game/db
NODES="node-a node-b node-c"

wait_for() {	# SECONDS WHAT CMD...
	_e=$(($(t_now_ms) + $1 * 1000)); _what=$2; shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$(t_now_ms)" -lt "$_e" ] || {
			tail -n 20 "$T_DLOG" >&2; cat "$W"/agent-*.log >&2
			t_fail "$_what: not within the time"; }
		sleep 0.1
	done
}

t_say "PostgreSQL; three nodes with signing keys; a shared grant held on all three"
t_pg_start
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
GDB=$(t_gname game/db game-db)
t_node node-a 127.0.0.1
t_node node-b localhost
t_node node-c 127.0.0.2
t_check "node.added carries the signing key; the key file holds both keys, 0600"
tly log --json --type node.added | grep -q '"signkey"' ||
	t_fail "node.added has no signkey"
tly log --json --type node.added | grep -q '"cpkey"' ||
	t_fail "node.added has no cpkey"
for n in $NODES; do
	k=$(t_nodekey "$n")
	[ "$(stat -c %s "$k")" = 128 ] || t_fail "$k is $(stat -c %s "$k") bytes, not 128"
	[ "$(stat -c %a "$k")" = 600 ] || t_fail "$k is mode $(stat -c %a "$k")"
done
t_ok "signkey and cpkey in node.added; 128-byte key files"

t_check "a key file of before (32 bytes): tally node rekey adds a signing key"
tly node add node-d --routable-name 127.0.0.4 --key-out "$(t_nodekey node-d)" >/dev/null
head -c 32 "$(t_nodekey node-d)" >"$W/d.key" && chmod 600 "$W/d.key"
tly node rekey node-d --key "$W/d.key" >/dev/null || t_fail "tally node rekey failed"
[ "$(stat -c %s "$W/d.key")" = 128 ] || t_fail "rekey did not grow the key file to 128 bytes"
cmp -s -i 96:96 "$W/d.key" "$(t_nodekey node-d)" || t_fail "rekey wrote another control-plane key than node add"
cmp -s -n 32 "$W/d.key" "$(t_nodekey node-d)" || t_fail "rekey changed the sealing key"
tly log --json --type node.key-added | grep -q '"name":"node-d"' ||
	t_fail "no node.key-added for node-d"
t_expect_exit 4 "a second rekey" tly node rekey node-d --key "$W/d.key"
tly node rm node-d >/dev/null
t_ok "node.key-added; the sealing key kept; a second rekey refused"

t_provider node-a network
mkdir -p "$W/manifests"
cat >"$W/manifests/game.yaml" <<'M'
module: game
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: "", LOG_LEVEL: info}
requires:
  db:
    type: postgres-database
    from: postgres
    scope: shared
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}
M
tly apply "$W/manifests/game.yaml" >/dev/null || t_fail "apply game"
for n in $NODES; do tly assign game "$n" >/dev/null; done
t_tallyd_start --interval 1

t_say "three agents (--log), separate directories and keys"
APIDS=""
for n in $NODES; do
	cp "$(t_nodekey "$n")" "$W/$n.key"
	"$TALLY_BIN/tally-node" --node "$n" --key "$W/$n.key" --dir "$W/$n" --state "$W/$n.state" \
		--log "$TALLY_HOME" --reload "game=echo \$TALLY_MODULE >>$W/$n.reloads" \
		2>>"$W/agent-$n.log" &
	_t_pids="$_t_pids $!"
	APIDS="$APIDS $!"
done
for n in $NODES; do
	wait_for 30 "$n's env file" grep -q "^DB_USER=${GDB}_v1$" "$W/$n/game.env"
	f=$W/$n/game.env
	[ "$(stat -c %a "$f")" = 600 ] || t_fail "$f is mode $(stat -c %a "$f")"
	[ "$(t_envget "$f" LOG_LEVEL)" = info ] || t_fail "$f lacks the default LOG_LEVEL=info"
	[ "$(cat "$W/$n/game/DB_PASSWORD")" = "$(t_envget "$f" DB_PASSWORD)" ] ||
		t_fail "$W/$n/game/DB_PASSWORD is not the env file's"
	[ "$(stat -c %a "$W/$n/game/DB_PASSWORD")" = 600 ] || t_fail "DB_PASSWORD file mode"
	t_env_psql "$f" "SELECT 1" >/dev/null || t_fail "$n's v1 does not connect"
done
t_ok "game.env (0600, LOG_LEVEL=info) and game/VARIABLE files on every node; v1 connects"

t_check "each agent acknowledged v1 with proof, no tally ack typed"
for n in $NODES; do
	wait_for 20 "$n's ack of v1" sh -c "\"$TALLY_BIN/tally\" log --json --type credential.acknowledged |
		grep '\"holder\":\"game@$n\"' | grep -q '\"actor\":\"node:$n\"'"
done
tly log --json --type credential.acknowledged | grep -q '"proof":"verified"' ||
	t_fail "the acknowledgement does not say its proof was verified"
t_ok "credential.acknowledged v1 x3, actor node:NODE, proof verified"

t_check "the agents report what they hold; tally status shows it per holder"
wait_for 20 "three agents' reports" sh -c "[ \$(\"$TALLY_BIN/tally\" status --json | grep -o '\"acked\":true' | wc -l) -ge 3 ]"
t_expect_exit 0 "tally status with three agents reporting" tly status
for n in $NODES; do
	grep -q "^  $n: tally-node .* reported .* ago$" "$W/last.out" ||
		{ cat "$W/last.out" >&2; t_fail "status has no agent line for $n"; }
	grep -q "game@$n game/db: v1 delivered, reloaded, acknowledged" "$W/last.out" ||
		{ cat "$W/last.out" >&2; t_fail "status lacks game@$n's state"; }
done
tly log --json --type node.reported | grep -q '"actor":"node:node-a"' || t_fail "no node.reported by node:node-a"
t_ok "node.reported (signature verified); status: v1 delivered, reloaded, acknowledged per holder"

t_say "tally rotate $G: completed by the agents alone"
# A session left open on v1 (as a holder that did not really reload would).
(
	PGPASSWORD=$(t_envget "$W/node-c/game.env" DB_PASSWORD) exec psql -X -At -q \
		-h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" -U ${GDB}_v1 -d ${GDB} \
		-c "SELECT pg_sleep(60)" >/dev/null 2>"$W/sleeper.err"
) &
SLEEPER=$!
_t_pids="$_t_pids $SLEEPER"
end=$(($(t_now_ms) + 10000))
until [ "$(t_sql "SELECT count(*) FROM pg_stat_activity WHERE usename = '${GDB}_v1' AND query LIKE '%pg_sleep%'")" -ge 1 ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "the session as ${GDB}_v1 did not start"
	sleep 0.05
done
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
wait_for 60 "rotation.completed" sh -c "\"$TALLY_BIN/tally\" log --json --type rotation.completed | grep -q '\"version\":2'"
for n in $NODES; do
	[ "$(t_envget "$W/$n/game.env" DB_USER)" = ${GDB}_v2 ] ||
		t_fail "$n holds $(t_envget "$W/$n/game.env" DB_USER)"
	t_env_psql "$W/$n/game.env" "SELECT 1" >/dev/null || t_fail "$n's v2 does not connect"
	[ "$(wc -l <"$W/$n.reloads")" -ge 2 ] || t_fail "$n reloaded $(wc -l <"$W/$n.reloads") time(s)"
done
seqs=$(tly log --json --stream "grant/$G" | sed -n 's/.*"seq":\([0-9]*\).*"type":"\([^"]*\)".*/\1 \2/p')
last_del=$(printf '%s\n' "$seqs" | awk '$2=="credential.delivered"{s=$1} END{print s}')
first_ack2=$(tly log --json --type credential.acknowledged | grep '"version":2' | head -n 1 | t_jfields seq)
last_ack2=$(tly log --json --type credential.acknowledged | grep '"version":2' | tail -n 1 | t_jfields seq)
ret=$(printf '%s\n' "$seqs" | awk '$2=="credential.retired"{print $1}' | tail -n 1)
[ -n "$ret" ] && [ "$last_del" -lt "$first_ack2" ] && [ "$last_ack2" -lt "$ret" ] ||
	t_fail "order: last delivery $last_del, acks $first_ack2..$last_ack2, retired $ret"
[ "$(tly log --json --type credential.acknowledged | grep -c '"version":2')" = 3 ] ||
	t_fail "not three acknowledgements of v2"
[ "$(t_sql "SELECT count(*) FROM pg_roles WHERE rolname = '${GDB}_v1'")" = 0 ] ||
	t_fail "the old login ${GDB}_v1 is still there"
t_ok "delivered ($last_del) < acknowledged v2 x3 ($first_ack2..$last_ack2) < retired ($ret); ${GDB}_v1 gone"

t_check "retirement corroborated on the provider: the session left on v1 counted and ended"
tly log --json --type credential.retired | grep -q '"sessions_ended":1' ||
	t_fail "credential.retired does not record the one session of ${GDB}_v1: $(tly log --json --type credential.retired)"
wait_for 10 "the v1 session ended" sh -c "! kill -0 $SLEEPER 2>/dev/null"
t_forget_pid "$SLEEPER"
t_ok "credential.retired: sessions_ended 1; the psql on v1 ended"

t_check "a delivery replayed changes nothing (versions only move forward)"
before=$(cat "$W/node-a.reloads" | wc -l)
rm -f "$W/node-a.state/position"
"$TALLY_BIN/tally-node" --node node-a --key "$W/node-a.key" --dir "$W/node-a" --state "$W/node-a.state" \
	--log "$TALLY_HOME" --once --reload "game=echo again >>$W/node-a.reloads" 2>>"$W/agent-once.log" ||
	t_fail "tally-node --once failed: $(cat "$W/agent-once.log")"
[ "$(wc -l <"$W/node-a.reloads")" = "$before" ] || t_fail "a replay reloaded again"
[ "$(t_envget "$W/node-a/game.env" DB_USER)" = ${GDB}_v2 ] || t_fail "a replay moved node-a back"
t_ok "every delivery read again from seq 1: no reload, still v2"

t_check "an agent silent past --agent-silence is unhealthy (exit 6)"
eval "kill -TERM $APIDS"
sleep 2.2
t_expect_exit 6 "status with agents silent for 2 s" tly status --agent-silence 2
grep -q "node-c: tally-node .* (silent: unhealthy)" "$W/last.out" || t_fail "status does not say node-c's agent is silent"
t_expect_exit 0 "status with the default silence (300 s)" tly status
t_ok "silent for 2 s with --agent-silence 2: exit 6, named; within 300 s: exit 0"

tly verify >/dev/null || t_fail "tally verify"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check"
