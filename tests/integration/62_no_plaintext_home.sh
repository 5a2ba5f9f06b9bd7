#!/bin/sh
# After a full run (provision, rotate, revoke) with two agents following
# the log (tally-node --log, the embedded default), no plaintext secret
# exists anywhere on the control plane's disk: every file under the
# tally home, LMDB data file included, is searched for every password
# ever issued (read from the agents' files on the nodes and from tally
# env, which opens the sealed deliveries with the node's key) and for
# the nodes' secret keys (which would open every delivery).  There is
# no HOME/deliver.  Each search has a positive control (the login
# names are in data.mdb; the agents' own files do hold the passwords).
. "$(dirname "$0")/lib.sh"
G=game/db
NODES="node-a node-b"

# wait_for SECONDS WHAT CMD...: until CMD succeeds.
wait_for() {
	_w_end=$(($(t_now_ms) + $1 * 1000))
	_w_s=$1 _w_what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		if [ "$(t_now_ms)" -gt "$_w_end" ]; then
			tail -n 10 "$T_DLOG" >&2
			t_fail "$_w_what: not within $_w_s s"
		fi
		sleep 0.1
	done
}

# collect: every password the agents hold now, and tally env's.
collect() {
	for n in $NODES; do
		for f in "$W/agent-$n"/*.env; do
			[ -f "$f" ] && sed -n 's/^DB_PASSWORD=//p' "$f" >>"$W/secrets"
		done
		for m in game solo; do
			tly env "$n" "$m" --node-key "$(t_nodekey "$n")" 2>/dev/null |
				sed -n 's/^DB_PASSWORD=//p' >>"$W/secrets" || true
		done
	done
	sort -u "$W/secrets" -o "$W/secrets"
	sed -i '/^$/d' "$W/secrets"
}

t_say "throwaway PostgreSQL; game (shared) on node-a and node-b, solo on node-a"
t_pg_start
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
GDB=$(t_gname game/db game-db)
t_node node-a 127.0.0.1
t_node node-b localhost
t_provider node-a network
tly apply "$(t_consumer game shared)" "$(t_consumer solo per-instance)" >/dev/null
for n in $NODES; do tly assign game "$n" >/dev/null; done
tly assign solo node-a >/dev/null
t_tallyd_start --interval 1
for n in $NODES; do
	"$TALLY_BIN/tally-node" --node "$n" --key "$(t_nodekey "$n")" \
		--dir "$W/agent-$n" --state "$W/agent-$n.state" --log "$TALLY_HOME" --reload game=true \
		--reload solo=true 2>>"$W/agent-$n.log" &
	_t_pids="$_t_pids $!"
done
: >"$W/secrets"

t_check "provisioned and delivered: the agents hold v1"
for n in $NODES; do
	wait_for 30 "$n's game v1" grep -q "^DB_USER=${GDB}_v1$" "$W/agent-$n/game.env"
done
wait_for 30 "solo on node-a" grep -q "^DB_PASSWORD=" "$W/agent-node-a/solo.env"
collect
t_ok "$(wc -l <"$W/secrets") password(s) so far"

t_check "rotated by the agents' acks alone: v2 everywhere, v1 retired"
tly rotate "$G" >/dev/null || t_fail "tally rotate failed"
wait_for 60 "rotation.completed" sh -c "\"$TALLY_BIN/tally\" log --json --type rotation.completed | grep -q '\"version\":2'"
for n in $NODES; do
	wait_for 10 "$n's game v2" grep -q "^DB_USER=${GDB}_v2$" "$W/agent-$n/game.env"
done
collect
t_ok "$(wc -l <"$W/secrets") password(s) so far"

t_check "revoked: solo removed, its files gone from node-a"
tly remove solo >/dev/null || t_fail "tally remove solo failed"
wait_for 30 "solo revoked" sh -c "\"$TALLY_BIN/tally\" log --json --type grant.revoked | grep -q solo"
wait_for 30 "solo's files removed by the agent" test ! -e "$W/agent-node-a/solo.env"
t_tallyd_stop
n=$(wc -l <"$W/secrets")
[ "$n" -eq 3 ] || t_fail "expected 3 distinct passwords (game v1, v2, solo v1), found $n"
while read -r pw; do
	[ ${#pw} -ge 24 ] || t_fail "a generated password is only ${#pw} characters"
done <"$W/secrets"
cat "$TALLY_TEST_PG_PWFILE" >>"$W/secrets"
echo >>"$W/secrets"
sed -i '/^$/d' "$W/secrets"
t_ok "3 generated passwords and the admin password to look for"

t_check "no HOME/deliver; every file under the home holds none of them"
[ ! -e "$TALLY_HOME/deliver" ] || t_fail "the control plane keeps $TALLY_HOME/deliver"
grep -a -q -F "${GDB}_v2" "$TALLY_HOME/log/data.mdb" ||
	t_fail "control: the login name ${GDB}_v2 is not in data.mdb: the search is blind"
grep -a -q -F -f "$W/secrets" "$W/agent-node-a/game.env" ||
	t_fail "control: the agent's own file holds none of the passwords: the search is blind"
find "$TALLY_HOME" -type f >"$W/files"
[ "$(wc -l <"$W/files")" -ge 3 ] || t_fail "only $(wc -l <"$W/files") files under the home?"
while read -r f; do
	if grep -a -q -F -f "$W/secrets" "$f"; then
		t_fail "a plaintext secret is in $f"
	fi
done <"$W/files"
t_ok "none in $(wc -l <"$W/files") files ($(du -k "$TALLY_HOME/log/data.mdb" | cut -f1) KiB of data.mdb)"

t_check "nor the nodes' secret keys (hex of each key in every file's bytes)"
for n in $NODES; do
	k=$(od -An -v -tx1 "$(t_nodekey "$n")" | tr -d ' \n')
	for part in "$(printf '%s' "$k" | cut -c1-64)" "$(printf '%s' "$k" | cut -c65-192)"; do
		[ ${#part} -ge 64 ] || t_fail "$n's key file is too short"
		while read -r f; do
			od -An -v -tx1 "$f" | tr -d ' \n' | grep -q -F "$part" &&
				t_fail "$n's secret key is in $f"
		done <"$W/files"
	done
done
od -An -v -tx1 "$(t_nodekey node-a)" | tr -d ' \n' |
	grep -q -F "$(od -An -v -tx1 "$(t_nodekey node-a)" | tr -d ' \n' | cut -c1-64)" ||
	t_fail "control: the hex search does not find a key in its own file"
t_ok "no node key under the home (they are in $W/keys, the nodes' side)"
