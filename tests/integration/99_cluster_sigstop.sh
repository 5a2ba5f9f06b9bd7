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
