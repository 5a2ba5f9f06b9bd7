#!/bin/sh
# Cluster mode (issue 26): etcd holds the head and a tail, not the whole
# record.  With --keep 10 the leader deletes the chunks every live
# follower has applied and compacts; a follower stopped meanwhile (its
# mark gone with its lease) is then behind the trimmed tail: restarted,
# its tallyd says so and how to restore (exit 3), and it catches up from
# a peer's snapshot (tally snapshot, tally init --from-snapshot).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

t_say "a cluster of three homes keeping 10 events below its followers"
c_cluster 4 10
MP=$(t_free_port)
c_tallyd a --metrics "127.0.0.1:$MP"
[ "$(c_wait_leader 20)" = a ] || t_fail "A does not lead"
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/download.yaml" >/dev/null
tly assign download node-a --set root="$W/root" >/dev/null
c_tallyd b
c_tallyd c
t_wait_for 20 "C following" grep -q "info: following" "$W/tallyd-c.log"
c_same_logs 30
# The leader's --metrics: each follower's mark and lag (issue 27).
t_wait_for 20 "two followers in A's metrics" sh -c \
	"curl -fsS --max-time 5 http://127.0.0.1:$MP/metrics | grep -qx 'tally_cluster_followers 2'"
curl -fsS --max-time 5 "http://127.0.0.1:$MP/metrics" >"$W/m.txt"
promtool check metrics <"$W/m.txt" >"$W/promtool.out" 2>&1 || t_fail "promtool: $(cat "$W/promtool.out")"
[ "$(grep -c '^tally_follower_lag_events{follower="' "$W/m.txt")" -eq 2 ] ||
	t_fail "lag lines: $(grep follower "$W/m.txt")"
t_ok "A's metrics: 2 followers, $(grep '^tally_follower_lag_events' "$W/m.txt" | tr '\n' ' ')"

t_say "C stopped; the record grows on"
kill -TERM "$C_PID_c"
t_wait_exit "$C_PID_c" 10
t_wait_for 30 "one follower in A's metrics once C's lease lapsed" sh -c \
	"curl -fsS --max-time 5 http://127.0.0.1:$MP/metrics | grep -qx 'tally_cluster_followers 1'"
CHEAD=$(c_tly c log --json | wc -l)
c_consumers 30
i=1
while [ $i -le 30 ]; do
	tly apply "$W/manifests/app-$i.yaml" >/dev/null
	tly assign "app-$i" node-a >/dev/null
	i=$((i + 1))
done
t_wait_healthy 60 >/dev/null
HEAD=$(tly log --json | wc -l)
first_held() {
	c_etcdctl get "/tally/$C_MESH/log/" --prefix --keys-only 2>/dev/null |
		sed -n 's|.*/log/0*\([0-9][0-9]*\)$|\1|p' | head -n 1
}
t_wait_for 30 "the tail trimmed past C ($CHEAD)" sh -c \
	"[ \"\$(ETCDCTL_API=3 etcdctl --endpoints '$TALLY_TEST_ETCD_ENDPOINTS' --cacert '$TALLY_TEST_ETCD_CA' --cert '$TALLY_TEST_ETCD_CERT' --key '$TALLY_TEST_ETCD_KEY' get /tally/$C_MESH/log/ --prefix --keys-only | sed -n 's|.*/log/0*\([0-9][0-9]*\)\$|\1|p' | head -n 1)\" -gt $((CHEAD + 1)) ]"
KEYS=$(c_etcdctl get "/tally/$C_MESH/log/" --prefix --keys-only | grep -c /log/)
t_ok "the record has $HEAD events; etcd holds $KEYS chunk(s), from event $(first_held) (C stopped at $CHEAD)"

t_say "C restarted behind the trimmed tail"
set +e
timeout 60 "$TALLY_BIN/tallyd" --home "$W/c" 2>"$W/c-behind.err"
RC=$?
set -e
[ "$RC" -eq 3 ] || { cat "$W/c-behind.err" >&2; t_fail "C's tallyd exited $RC, expected 3"; }
grep -q "behind the trimmed tail.*tally snapshot" "$W/c-behind.err" ||
	t_fail "C does not say how to restore: $(cat "$W/c-behind.err")"
t_ok "exit 3: $(grep -o 'this home is behind.*' "$W/c-behind.err" | head -n 1 | cut -c1-160)"

t_say "C restored from B's snapshot"
c_tly b snapshot "$W/b.snap" >/dev/null || t_fail "tally snapshot on B"
[ "$(stat -c %a "$W/b.snap")" = 600 ] || t_fail "the snapshot is not 0600"
mv "$W/c" "$W/c.old"
# shellcheck disable=SC2086
c_tly c init --standby $C_ETCD --from-snapshot "$W/b.snap" >/dev/null ||
	t_fail "tally init --from-snapshot"
cp "$W/a/master.key" "$W/c/master.key"
c_tallyd c
c_same_logs 60
