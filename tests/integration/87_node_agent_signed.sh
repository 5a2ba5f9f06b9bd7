#!/bin/sh
# What the control plane routes to a node is signed (issue 14), and a
# revoked grant leaves the node.  Real RabbitMQ and PostgreSQL; module
# game with two shared grants (game/db: DB_*, game/cache: CACHE_*) on
# node-a (agent over AMQP, its queue tally.node.node-a) and node-b
# (agent following the log).
#   - Anyone who may publish to the broker and knows node-a's public key
#     (it is in the record) can seal a delivery to it: a forged delivery
#     (a newer version, an attacker's DB_HOST and password) and a forged
#     assignment.removed, unsigned or signed by a key that is not the
#     control plane's, are refused by the agent, with the reason logged
#     and reported (signed): node-a's files do not change.
#   - node-b's files are read-only to --user game=nobody (when run as root),
#     in a directory it cannot write.
#   - An agent whose key file has no control-plane key refuses to start
#     over AMQP (tally node rekey gives it one).
#   - game's requirement cache withdrawn (its grant revoked): on both
#     nodes the CACHE_* values leave game.env and game/, the DB_* stay
#     and connect; over AMQP that took a notice signed by the control
#     plane.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
FORGE="python3 $TALLY_SRC/tests/harness/forge_delivery.py"

wait_for() {	# SECONDS WHAT CMD...
	_e=$(($(t_now_ms) + $1 * 1000)); _what=$2; shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$(t_now_ms)" -lt "$_e" ] || {
			tail -n 20 "$T_DLOG" >&2; tail -n 20 "$W"/agent-*.log >&2
			t_fail "$_what: not within the time"; }
		sleep 0.1
	done
}
publish() {	# the management API's publish request, as anyone may send it
	api POST /exchanges/%2F/amq.default/publish "$1" | grep -q '"routed":true' ||
		t_fail "cannot publish to tally.node.node-a"
}
manifest() {	# [cache]: game's manifest, with the cache requirement or not
	mkdir -p "$W/manifests"
	{
		echo "module: game"
		printf 'env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: ""'
		[ -n "${1:-}" ] && printf ', CACHE_HOST: "", CACHE_NAME: "", CACHE_USER: "", CACHE_PASSWORD: ""'
		echo ', LOG_LEVEL: info}'
		echo "requires:"
		echo "  db:"
		echo "    type: postgres-database"
		echo "    from: postgres"
		echo "    scope: shared"
		echo "    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}"
		if [ -n "${1:-}" ]; then
			echo "  cache:"
			echo "    type: postgres-database"
			echo "    from: postgres"
			echo "    scope: shared"
			echo "    env: {host: CACHE_HOST, database: CACHE_NAME, user: CACHE_USER, password: CACHE_PASSWORD}"
		fi
	} >"$W/manifests/game.yaml"
	echo "$W/manifests/game.yaml"
}
# As root, node-b's agent writes game's files for the user nobody.
OWNER= OWNED=
[ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && OWNER="--user game=nobody"

t_say "RabbitMQ, PostgreSQL; game (db and cache) on node-a (AMQP agent) and node-b (log agent)"
r_start
t_pg_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
GDB=$(t_gname game/db game-db)
GCACHE=$(t_gname game/cache game-cache)
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password >/dev/null ||
	t_fail "tally publish configure failed"
t_node node-a 127.0.0.1
t_node node-b localhost
t_provider node-a network
tly apply "$(manifest cache)" >/dev/null || t_fail "apply game"
tly assign game node-a >/dev/null && tly assign game node-b >/dev/null || t_fail "assign game"
t_tallyd_start --interval 1 --verify-interval 3600

t_check "the node's key file holds the control plane's public key, recorded in node.added"
cpk=$(tly log --json --type node.added | grep '"name":"node-a"' | t_jfields cpkey)
[ ${#cpk} = 64 ] || t_fail "node.added has no cpkey: $(tly log --json --type node.added)"
[ "$(stat -c %s "$(t_nodekey node-a)")" = 128 ] || t_fail "the key file is $(stat -c %s "$(t_nodekey node-a)") bytes, not 128"
[ "$(tail -c 32 "$(t_nodekey node-a)" | od -An -tx1 | tr -d ' \n')" = "$cpk" ] ||
	t_fail "the key file's control-plane key is not node.added's"
cpkb=$(tly log --json --type node.added | grep '"name":"node-b"' | t_jfields cpkey)
[ "$cpkb" = "$cpk" ] || t_fail "node-b was given another control-plane key"
t_ok "cpkey $(printf '%.16s' "$cpk")… in node.added and in both key files (128 bytes)"

t_check "a key file without the control plane's key: the agent refuses --amqp"
head -c 96 "$(t_nodekey node-a)" >"$W/old.key" && chmod 600 "$W/old.key"
if "$TALLY_BIN/tally-node" --node node-a --key "$W/old.key" --dir "$W/old" --state "$W/old.state" --once \
    --amqp "$AMQP_URL" --amqp-user "$TALLY_TEST_AMQP_USER" \
    --amqp-password-file "$W/amqp.pw" 2>"$W/old.err"; then
	t_fail "an agent without the control plane's key ran over AMQP"
fi
grep -q "rekey" "$W/old.err" || t_fail "the refusal does not say how: $(cat "$W/old.err")"
[ ! -e "$W/old/game.env" ] || t_fail "it wrote game.env"
tly node rekey node-a --key "$W/old.key" >/dev/null || t_fail "tally node rekey of a 96-byte key file failed"
cmp -s "$W/old.key" "$(t_nodekey node-a)" || t_fail "rekey did not give the 96-byte file the control plane's key"
t_expect_exit 4 "a second rekey" tly node rekey node-a --key "$W/old.key"
t_ok "refused ($(head -n 1 "$W/old.err" | cut -c1-70)…); rekey added the key"

t_say "the agents"
"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$W/node-a" --state "$W/node-a.state" \
	--amqp "$AMQP_URL" --amqp-user "$TALLY_TEST_AMQP_USER" --amqp-password-file "$W/amqp.pw" \
	--report-interval 1 --reload "game=echo ok >>$W/node-a.reloads" 2>>"$W/agent-node-a.log" &
_t_pids="$_t_pids $!"
"$TALLY_BIN/tally-node" --node node-b --key "$(t_nodekey node-b)" --dir "$W/node-b" --state "$W/node-b.state" \
	--log "$TALLY_HOME" --reload "game=echo ok >>$W/node-b.reloads" $OWNER 2>>"$W/agent-node-b.log" &
_t_pids="$_t_pids $!"
for n in node-a node-b; do
	wait_for 40 "$n's db and cache" sh -c "grep -q '^DB_USER=${GDB}_v1$' '$W/$n/game.env' &&
		grep -q '^CACHE_USER=${GCACHE}_v1$' '$W/$n/game.env'"
	t_env_psql "$W/$n/game.env" "SELECT 1" >/dev/null || t_fail "$n's db does not connect"
done
wait_for 20 "node-a's acknowledgements" sh -c "[ \$(\"$TALLY_BIN/tally\" log --json --type credential.acknowledged | grep -c '\"actor\":\"node:node-a\"') -ge 2 ]"
if [ -n "$OWNER" ]; then
	# Readable by the user, and nothing there writable by it (88_node_files).
	for f in "$W/node-b/game.env" "$W/node-b/game/DB_PASSWORD"; do
		[ "$(stat -c '%U %a' "$f")" = "nobody 400" ] || t_fail "$f is $(stat -c '%U %a' "$f"), not nobody 400 (--user game=nobody)"
	done
	[ "$(stat -c '%U:%G %a' "$W/node-b/game")" = "root:$(id -gn nobody) 750" ] ||
		t_fail "node-b's game/ is $(stat -c '%U:%G %a' "$W/node-b/game")"
	OWNED="; node-b's game.env and game/DB_PASSWORD nobody's 0400, game/ root's 0750 (--user)"
fi
t_ok "both grants on both nodes; node-a's (signed) deliveries acknowledged$OWNED"

t_say "forged messages on tally.node.node-a"
cp "$W/node-a/game.env" "$W/before.env"
ls -l "$W/node-a/game" | sort >"$W/before.ls"
r0=$(grep -c "refused" "$W/agent-node-a.log" || true)
pk=$(tly log --json --type node.added | grep '"name":"node-a"' | t_jfields pubkey)
[ ${#pk} = 64 ] || t_fail "no pubkey for node-a in node.added"
for sig in none random; do
	publish "$($FORGE delivery --node node-a --pubkey "$pk" --grant game/db --holder game@node-a \
		--version 99 --var DB_HOST=evil.example --var DB_USER=attacker --var DB_PASSWORD=forged --sig $sig)"
	publish "$($FORGE removal --node node-a --module game --sig $sig)"
done
wait_for 20 "four refusals in node-a's log" sh -c "[ \$(grep -c 'refused' '$W/agent-node-a.log') -ge $((r0 + 4)) ]"
grep "refused" "$W/agent-node-a.log" | grep -q "unsigned" || t_fail "no refusal says unsigned: $(grep refused "$W/agent-node-a.log")"
grep "refused" "$W/agent-node-a.log" | grep -q "bad signature" || t_fail "no refusal says bad signature"
grep "refused" "$W/agent-node-a.log" | grep -q "assignment.removed" || t_fail "the removal's refusal does not name it"
sleep 1
cmp -s "$W/before.env" "$W/node-a/game.env" || t_fail "node-a's game.env changed: $(grep -c evil "$W/node-a/game.env") evil line(s)"
ls -l "$W/node-a/game" | sort | cmp -s - "$W/before.ls" || t_fail "node-a's game/ changed"
grep -rq "evil.example\|forged" "$W/node-a" && t_fail "a forged value reached node-a's directory"
wait_for 20 "the refusals in node-a's (signed) report" sh -c "\"$TALLY_BIN/tally\" status | grep -q 'refused 4 message'"
tly log --json --type node.reported | tail -n 1 | grep -q 'bad signature' ||
	t_fail "node.reported does not carry the last refusal's reason"
t_ok "unsigned and wrongly signed delivery and removal: refused, logged, reported; node-a's files unchanged"

t_say "cache withdrawn: game/cache revoked; its values leave both nodes"
tly apply "$(manifest)" >/dev/null || t_fail "re-applying game without cache"
wait_for 30 "grant.revoked of game/cache" sh -c "\"$TALLY_BIN/tally\" log --json --type grant.revoked | grep -q '\"grant\":\"game/cache\"'"
for n in node-a node-b; do
	wait_for 20 "$n's CACHE_* gone" sh -c "! grep -q '^CACHE_' '$W/$n/game.env'"
	for v in CACHE_HOST CACHE_NAME CACHE_USER CACHE_PASSWORD; do
		[ ! -e "$W/$n/game/$v" ] || t_fail "$W/$n/game/$v is still there"
	done
	[ "$(t_envget "$W/$n/game.env" DB_USER)" = ${GDB}_v1 ] || t_fail "$n lost DB_USER"
	[ "$(cat "$W/$n/game/DB_PASSWORD")" = "$(t_envget "$W/$n/game.env" DB_PASSWORD)" ] ||
		t_fail "$n's game/DB_PASSWORD is not the env file's"
	[ "$(t_envget "$W/$n/game.env" LOG_LEVEL)" = info ] || t_fail "$n lost LOG_LEVEL"
	t_env_psql "$W/$n/game.env" "SELECT 1" >/dev/null || t_fail "$n's db no longer connects"
done
grep -q "game/cache.*revoked" "$W/agent-node-a.log" || t_fail "node-a's agent did not say it dropped game/cache"
t_ok "CACHE_* gone from game.env and game/ on node-a (signed notice) and node-b (log); DB_* remain and connect"

tly verify >/dev/null || t_fail "tally verify"
