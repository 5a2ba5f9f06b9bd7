#!/bin/sh
# Cluster mode (issue 26): nothing unauthenticated is applied.  A holder
# of etcd's client certificate (not of the master key) puts a chunk of
# events after the head, and moves the head to it: a follower refuses it
# (its signature does not verify), applies nothing of it and exits 5
# naming it; so does the leader, once its next commit finds the head
# moved and it reads the tail.  Every home's log still verifies.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

t_say "a cluster of two homes, A leading, B following"
c_cluster 4
# B first: an empty home never leads (it would found a mesh of its own).
c_tallyd b
sleep 3
[ -z "$(c_leader)" ] || t_fail "the empty home B took the leader key"
t_expect_exit 7 "tallyd --once on the empty B" "$TALLY_BIN/tallyd" --home "$W/c" --once
grep -q "its home is empty" "$W/last.err" || t_fail "C's --once: $(cat "$W/last.err")"
t_ok "B, empty, waits; tallyd --once on C, empty, exits 7"
c_tallyd a
[ "$(c_wait_leader 20)" = a ] || t_fail "A does not lead"
t_node node-a 127.0.0.1
t_wait_for 20 "B following" grep -q "info: following" "$W/tallyd-b.log"
t_wait_for 20 "B at A's head" sh -c "[ \$(TALLY_HOME=$W/b '$TALLY_BIN/tally' log --json | wc -l) -eq \$(TALLY_HOME=$W/a '$TALLY_BIN/tally' log --json | wc -l) ]"
HEAD=$(tly log --json | wc -l)
t_ok "both at event $HEAD"

t_say "a forged chunk after the head, and the head moved to it"
# The gateway's own put, with etcd's client certificate: a chunk that
# is well formed (magic, sequence, one event copied from the log) but
# signed by no control plane.
python3 - "$W/forged.json" "$C_MESH" "$HEAD" <<'EOF'
import base64, json, struct, sys, os
out, mesh, head = sys.argv[1], sys.argv[2], int(sys.argv[3])
ev = os.urandom(120)
chunk = b"tlc1" + struct.pack(">QQI", 3, head + 1, 1) + os.urandom(64) + struct.pack(">I", len(ev)) + ev
hd = struct.pack(">Q", head + 1) + os.urandom(32)
b = lambda x: base64.b64encode(x if isinstance(x, bytes) else x.encode()).decode()
txn = {"success": [
    {"requestPut": {"key": b("/tally/%s/log/%020d" % (mesh, head + 1)), "value": b(chunk)}},
    {"requestPut": {"key": b("/tally/%s/head" % mesh), "value": b(hd)}}]}
json.dump(txn, open(out, "w"))
EOF
EP=${TALLY_TEST_ETCD_ENDPOINTS%%,*}
curl -sS --cacert "$TALLY_TEST_ETCD_CA" --cert "$TALLY_TEST_ETCD_CERT" --key "$TALLY_TEST_ETCD_KEY" \
	-X POST "$EP/v3/kv/txn" -d @"$W/forged.json" >"$W/put.out" || t_fail "the gateway refused the forged put"
grep -q '"succeeded":true' "$W/put.out" || t_fail "forged put: $(cat "$W/put.out")"
t_ok "event $((HEAD + 1)) forged on etcd"

t_check "B refuses it"
t_wait_exit "$C_PID_b" 30
[ "$T_RC" -eq 5 ] || { tail -n 5 "$W/tallyd-b.log" >&2; t_fail "B exited $T_RC, expected 5"; }
grep -q "does not carry the control plane's signature: nothing of it is applied" "$W/tallyd-b.log" ||
	t_fail "B does not say why: $(tail -n 2 "$W/tallyd-b.log")"
t_ok "B exit 5: $(grep -o "the cluster's chunk.*applied" "$W/tallyd-b.log" | head -n 1)"

t_check "A refuses it at its next commit"
set +e
tly node add node-b --routable-name 127.0.0.2 --key-out "$W/keys/node-b.key" >"$W/w.out" 2>"$W/w.err"
RC=$?
set -e
[ "$RC" -ne 0 ] || t_fail "a commit over a forged head succeeded"
t_ok "the write refused (exit $RC): $(head -n 1 "$W/w.err" | cut -c1-120)"
t_wait_exit "$C_PID_a" 30
[ "$T_RC" -eq 5 ] || { tail -n 5 "$W/tallyd-a.log" >&2; t_fail "A exited $T_RC, expected 5"; }
t_ok "A exit 5 once it reads the tail: $(grep -o "does not carry.*applied" "$W/tallyd-a.log" | head -n 1)"

for h in a b; do
	[ "$(c_tly $h log --json | wc -l)" -eq "$HEAD" ] || t_fail "$h applied something past event $HEAD"
	c_tly $h verify >/dev/null || t_fail "tally verify on $h"
done
t_ok "A and B hold their $HEAD events, and they verify"
