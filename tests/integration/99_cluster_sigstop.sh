#!/bin/sh
# Cluster mode (issue 26): SIGSTOP the leader past its lease, let a
# follower take over, SIGCONT.  Just before the stop a grant is
# committed through A (its lease still held) that A has not acted on;
# the new leader provisions it.  Continued, A finds work its projections
# say is due: it makes no provider call (the directory root is byte for
# byte what the new leader left), appends nothing (its log stays a
# prefix of the record) and exits 9.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

snap() {
	find "$W/root" | sort | while read -r p; do
		if [ -f "$p" ] && [ ! -L "$p" ]; then c=$(sha256sum <"$p" | cut -c1-64)
		else c=-; fi
		echo "$p $(stat -c '%u:%g %a %F %s %Y' "$p") $c"
	done
}

t_say "a cluster of three homes, A leading with one grant"
c_cluster 4
c_tallyd a
[ "$(c_wait_leader 20)" = a ] || t_fail "A does not lead"
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/download.yaml" >/dev/null
tly assign download node-a --set root="$W/root" >/dev/null
c_consumers 2
tly apply "$W"/manifests/app-*.yaml >/dev/null
tly assign app-1 node-a >/dev/null
t_wait_healthy 30 app-1
c_tallyd b
c_tallyd c
t_wait_for 20 "B following" grep -q "info: following" "$W/tallyd-b.log"
t_wait_for 20 "C following" grep -q "info: following" "$W/tallyd-c.log"
t_ok "A leads, app-1 provisioned; B and C follow"

t_say "A stopped; a grant committed through A before its lease lapses"
kill -STOP "$C_PID_a"
STOPPED=$(t_now_ms)
tly assign app-2 node-a >/dev/null || t_fail "tally assign app-2 on A (its lease still held)"
t_ok "app-2 committed at etcd through A; A's tallyd, stopped, has not acted on it"
NEW=$(c_wait_leader 30 a)
t_ok "$NEW leads $(($(t_now_ms) - STOPPED)) ms after the stop"
t_wait_for 60 "app-2 provisioned by $NEW" sh -c \
	"TALLY_HOME=$W/$NEW '$TALLY_BIN/tally' status app-2 >/dev/null"
t_ok "$NEW provisioned app-2"
snap >"$W/before"
c_tly "$NEW" log --json >"$W/record.json"
HEAD_A=$(c_tly a log --json | wc -l)

t_say "A continued"
kill -CONT "$C_PID_a"
t_wait_exit "$C_PID_a" 30
[ "$T_RC" -eq 9 ] || { tail -n 10 "$W/tallyd-a.log" >&2; t_fail "A exited $T_RC, expected 9"; }
grep "error: deposed" "$W/tallyd-a.log" | tail -n 1
grep -q "error: deposed: the lease of epoch [0-9]* lapsed" "$W/tallyd-a.log" ||
	t_fail "A did not stop on its lease (it went as far as a provider's fence?)"
t_ok "A exited 9 on its lapsed lease, before any provider session"
snap >"$W/after"
cmp -s "$W/before" "$W/after" || { diff "$W/before" "$W/after" >&2; t_fail "the deposed leader changed the provider"; }
t_ok "the directory root is byte for byte as $NEW left it"
c_tly a log --json >"$W/a.json"
[ "$(wc -l <"$W/a.json")" -eq "$HEAD_A" ] || t_fail "A's log grew after the takeover"
head -n "$HEAD_A" "$W/record.json" | cmp -s - "$W/a.json" ||
	t_fail "A's log is not a prefix of the record"
! grep -q '"type":"grant.provisioning".*app-2' "$W/a.json" ||
	t_fail "A recorded an intent for app-2"
t_ok "A appended nothing: its $HEAD_A events are a prefix of the record ($(wc -l <"$W/record.json"))"

t_check "A restarted follows and catches up"
c_tallyd a
c_same_logs 60
c_tly a status >"$W/st-a" 2>&1 || true
grep -q "control plane: one of a cluster .*: a follower of .*$W/$NEW" "$W/st-a" ||
	t_fail "A's status: $(grep 'control plane' "$W/st-a")"
c_tly "$NEW" status >"$W/st-new" 2>&1 || true
grep -q "control plane: one of a cluster .*: the leader at epoch" "$W/st-new" ||
	t_fail "$NEW's status: $(grep 'control plane' "$W/st-new")"
t_ok "tally status: A $(grep -o 'a follower of [^(]*' "$W/st-a"); $NEW $(grep -o 'the leader at epoch [0-9]*' "$W/st-new")"

t_check "the leader keeps its followers' marks: tally status and the board show both"
cid() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$W/$1/cluster.json"; }
WANT=$(for h in a b c; do [ "$h" = "$NEW" ] || cid "$h"; done | sort | tr '\n' ' ')
t_wait_for 20 "$NEW's status names A and the other follower" sh -c "
	TALLY_HOME=$W/$NEW '$TALLY_BIN/tally' status --json 2>/dev/null |
	python3 -c 'import json,sys; d=json.load(sys.stdin); print(\" \".join(sorted(f[\"id\"] for f in d[\"cluster\"][\"followers\"][\"followers\"])) + \" \")' |
	grep -qx '$WANT'"
c_tly "$NEW" status --json >"$W/st-new.json" 2>/dev/null || true
python3 - "$W/st-new.json" <<'PY' || t_fail "the followers' marks in $NEW's status"
import json, sys
fo = json.load(open(sys.argv[1]))["cluster"]["followers"]
assert fo["head"] > 0 and fo["as_of"], fo
for f in fo["followers"]:
    # Both caught up (c_same_logs): within what a mark's second allows.
    assert f["applied"] <= fo["head"] and f["behind"] == fo["head"] - f["applied"], f
    assert f["behind"] < 50, f
PY
c_tly "$NEW" status >"$W/st-new" 2>&1 || true
grep -q "^  2 live follower(s) as of " "$W/st-new" ||
	t_fail "$NEW's status text: $(grep -A3 'control plane' "$W/st-new")"
c_tly a status --json 2>/dev/null | python3 -c 'import json,sys; assert "followers" not in json.load(sys.stdin)["cluster"]' ||
	t_fail "A, a follower, shows followers (kept from when it led?)"
t_ok "$NEW's status: $(grep 'live follower' "$W/st-new"); A's shows none"
"$TALLY_BIN/tally-board" --home "$W/$NEW" --store "$W/board" --html "$W/board.html" --json \
	--quiet >"$W/board.json" 2>"$W/board.err" || t_fail "tally-board: $(cat "$W/board.err")"
python3 - "$W/board.json" "$WANT" <<'PY' || t_fail "the board's standbys"
import json, sys
sb = json.load(open(sys.argv[1]))["standbys"]
assert " ".join(sorted(f["id"] for f in sb["followers"])) + " " == sys.argv[2], sb
PY
for id in $WANT; do
	grep -q "<tr><td>$id</td><td>event [0-9]*</td><td class=\"behind\">[0-9]*</td>" "$W/board.html" ||
		t_fail "the board's page has no row for standby $id"
done
t_ok "the board following $NEW's home lists both standbys with their lag"
