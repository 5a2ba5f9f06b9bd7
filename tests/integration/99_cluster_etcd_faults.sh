#!/bin/sh
# Cluster mode (issue 26): etcd's own faults.  kill -9 of etcd's leader
# in the middle of a burst of assigns: writes resume once etcd has
# elected another, nothing acknowledged is lost, the chain verifies on
# every home.  Two of three members down: a write is refused with a
# clear error (exit 1, the cluster named) and commits nothing, reads
# and status still answer; back up, it carries on.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

ETCDSH=$TALLY_SRC/tests/harness/etcd.sh
N=60
t_say "a cluster of three homes, A leading"
c_cluster 4
c_tallyd a
[ "$(c_wait_leader 20)" = a ] || t_fail "A does not lead"
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/download.yaml" >/dev/null
tly assign download node-a --set root="$W/root" >/dev/null
c_consumers $((N + 2))
tly apply "$W"/manifests/app-*.yaml >/dev/null
c_tallyd b
c_tallyd c
t_ok "A leads; B and C follow"

t_say "kill -9 of etcd's leader in a burst of $N assigns"
(
	i=1 tries=0
	while [ $i -le $N ]; do
		if tly assign "app-$i" node-a >/dev/null 2>"$W/burst.err"; then
			echo "app-$i" >>"$W/acked"
			i=$((i + 1))
		else
			echo "app-$i: $(head -n 1 "$W/burst.err")" >>"$W/refused"
			tries=$((tries + 1))
			[ $tries -lt 200 ] || exit 1
			sleep 0.2
		fi
	done
) &
BURST=$!
_t_pids="$_t_pids $BURST"	# stopped at exit, whatever happens
t_wait_for 60 "10 assigns acknowledged" sh -c "[ \$(wc -l <'$W/acked' 2>/dev/null || echo 0) -ge 10 ]"
EL=$(sh "$ETCDSH" leader "$ETCD_DIR")
sh "$ETCDSH" kill "$ETCD_DIR" "$EL"
t_ok "etcd member n$EL (its leader) killed after $(wc -l <"$W/acked") acknowledged assigns"
t_wait_exit "$BURST" 240
[ "$T_RC" -eq 0 ] || t_fail "the burst gave up: $(tail -n 3 "$W/refused")"
touch "$W/refused"
t_ok "$N acknowledged ($(wc -l <"$W/refused") attempts refused meanwhile$(head -n 1 "$W/refused" | cut -c1-100 | sed 's/^/: /'))"
[ "$(c_leader)" = a ] || t_fail "A no longer leads"
tly log --json --type assignment.created >"$W/created.json"
while read -r m; do
	grep -q "\"module\":\"$m\"" "$W/created.json" || t_fail "$m was acknowledged and is not in the log"
done <"$W/acked"
t_ok "every acknowledged assign is in the leader's log"
sh "$ETCDSH" restart "$ETCD_DIR" "$EL"
t_wait_healthy 120
c_same_logs 60

t_say "two of three etcd members down"
K1=1 K2=2
sh "$ETCDSH" kill "$ETCD_DIR" $K1
sh "$ETCDSH" kill "$ETCD_DIR" $K2
BEFORE=$(tly log --json | wc -l)
set +e
timeout 60 "$TALLY_BIN/tally" assign "app-$((N + 1))" node-a >"$W/w.out" 2>"$W/w.err"
RC=$?
set -e
[ "$RC" -eq 1 ] || { cat "$W/w.err" >&2; t_fail "a write with two members down exited $RC, expected 1"; }
grep -qi "cluster" "$W/w.err" || t_fail "the refusal does not say the cluster: $(cat "$W/w.err")"
t_ok "refused, exit 1: $(head -n 1 "$W/w.err" | cut -c1-150)"
[ "$(tly log --json | wc -l)" -eq "$BEFORE" ] || t_fail "something was appended"
set +e
tly status >"$W/st.out" 2>&1
SRC=$?
set -e
[ "$SRC" -eq 0 ] || [ "$SRC" -eq 6 ] || t_fail "tally status exited $SRC with two members down"
grep -q "app-1" "$W/st.out" || t_fail "tally status does not show the mesh"
tly log --json --type assignment.created | grep -q '"module":"app-1"' || t_fail "tally log"
t_ok "nothing appended; tally status (exit $SRC) and tally log answer"

t_say "both back"
sh "$ETCDSH" restart "$ETCD_DIR" $K1
sh "$ETCDSH" restart "$ETCD_DIR" $K2
t_wait_for 60 "a write accepted again" "$TALLY_BIN/tally" assign "app-$((N + 1))" node-a
t_ok "assign accepted once etcd has its quorum again"
tly assign "app-$((N + 2))" node-a >/dev/null
t_wait_healthy 120
[ "$(c_leader)" = a ] || t_fail "A no longer leads"
t_ok "A still leads; every module healthy"
c_same_logs 60
