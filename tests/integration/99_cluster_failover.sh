#!/bin/sh
# Cluster mode (issue 26): kill -9 of the leading tallyd in the middle of
# a burst of 200 tally assign.  Three homes on a three-member etcd over
# TLS; A founds the mesh and leads, B and C follow.  Every assign that
# returned success is in the new leader's log (RPO 0 for what was
# acknowledged); a follower leads within TTL + 5 s with nobody typing;
# every grant is provisioned exactly once on the directory provider
# (one directory each, one grant.provisioned each); a write on a
# follower's home is refused naming the leader; A restarted follows;
# the three logs end byte for byte the same.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

N=200
t_say "a cluster of three homes, A leading"
c_cluster 4
c_tallyd a
[ "$(c_wait_leader 20)" = a ] || t_fail "A does not lead"
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/download.yaml" >/dev/null
tly assign download node-a --set root="$W/root" >/dev/null
c_consumers $N
tly apply "$W"/manifests/app-*.yaml >/dev/null || t_fail "tally apply of $N consumers"
c_tallyd b
c_tallyd c
t_ok "A leads; B and C follow"

t_check "a write on a follower's home is refused, naming the leader"
t_wait_for 20 "B following" grep -q "info: following" "$W/tallyd-b.log"
t_expect_exit 7 "assign on B" c_tly b assign app-1 node-a
grep -q "the leader is .*home $W/a" "$W/last.err" || t_fail "B's refusal: $(cat "$W/last.err")"
t_ok "$(head -n 1 "$W/last.err" | cut -c1-140)"

t_say "a burst of $N assigns on A; A's tallyd killed in the middle"
(
	i=1 h=a
	while [ $i -le $N ]; do
		if c_tly $h assign "app-$i" node-a >/dev/null 2>"$W/burst.err"; then
			echo "app-$i" >>"$W/acked"
			i=$((i + 1))
		else
			# Refused or not committed: never acknowledged; ask again
			# where the leader is now.
			echo "app-$i $h $(head -n 1 "$W/burst.err")" >>"$W/refused"
			sleep 0.2
			l=$(c_leader)
			[ -n "$l" ] && h=$l
		fi
	done
) &
BURST=$!
_t_pids="$_t_pids $BURST"	# stopped at exit, whatever happens
START=$(t_now_ms)
t_wait_for 300 "30 assigns acknowledged" sh -c "[ \$(wc -l <'$W/acked' 2>/dev/null || echo 0) -ge 30 ]"
KILLED=$(t_now_ms)
kill -KILL "$C_PID_a"
t_wait_exit "$C_PID_a" 10
t_ok "A's tallyd killed after $(wc -l <"$W/acked") acknowledged assigns ($((KILLED - START)) ms)"
NEW=$(c_wait_leader 30 a)
LED=$(t_now_ms)
grep "info: leading at epoch" "$W/tallyd-$NEW.log" | head -n 1
[ $((LED - KILLED)) -le $(((4 + 5) * 1000)) ] ||
	t_fail "$NEW led $((LED - KILLED)) ms after the kill: more than TTL + 5 s"
t_ok "$NEW leads $((LED - KILLED)) ms after the kill (TTL 4 s), nobody typed anything"
t_wait_exit "$BURST" 900
[ "$(wc -l <"$W/acked")" -eq $N ] || t_fail "the burst acknowledged $(wc -l <"$W/acked") of $N"
t_ok "$N acknowledged ($(wc -l <"$W/refused" 2>/dev/null || echo 0) attempts refused on the way and asked again)"

t_check "every acknowledged assign is in the new leader's log"
c_tly "$NEW" log --json --type assignment.created >"$W/created.json"
while read -r m; do
	grep -q "\"module\":\"$m\"" "$W/created.json" || t_fail "$m was acknowledged and is not in $NEW's log"
done <"$W/acked"
t_ok "all $N"

t_check "every grant provisioned exactly once"
t_wait_for 180 "every grant provisioned" sh -c \
	"[ \$(TALLY_HOME=$W/$NEW '$TALLY_BIN/tally' log --json --type grant.provisioned | grep -c '\"grant\":\"app-') -ge $N ]"
c_tly "$NEW" log --json --type grant.provisioned | grep -o '"grant":"app-[0-9]*/files"' |
	sort | uniq -c | awk '$1 != 1 { print; bad = 1 } END { exit bad }' ||
	t_fail "a grant provisioned more than once"
DIRS=$(find "$W/root" -mindepth 1 -maxdepth 1 -type d -name 'app-*' | wc -l)
[ "$DIRS" -eq $N ] || t_fail "$DIRS directories under the root for $N grants"
t_ok "$N grant.provisioned, one each; $DIRS directories on the provider"

t_check "A, restarted, follows"
c_tallyd a
t_wait_for 30 "A following" grep -q "info: following" "$W/tallyd-a.log"
c_same_logs 60
