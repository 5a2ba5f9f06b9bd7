#!/bin/sh
# A full disk where the credentials are written: since the control plane
# keeps no plaintext (issue 14) that is the node's, under its agent's
# --dir (a real 256 KiB tmpfs mounted there and filled up).
#   - tallyd writes nothing under its home for a delivery: no deliver/;
#   - tally-node --once on the full disk fails (exit non-zero), says why,
#     leaves no half-written env file and acknowledges nothing;
#   - when space is freed, the next tally-node --once writes the env
#     file (0600), whose credential connects, and acknowledges it
#     (credential.acknowledged, proof verified, after tallyd's pass).
. "$(dirname "$0")/lib.sh"

MNT=$W/agent-node-a
_df_cleanup() {
	_df_rc=$?
	umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	(exit $_df_rc)
	_t_cleanup
}
trap _df_cleanup EXIT

acks() {
	tly log --json --type credential.acknowledged | grep -c '"holder":"app@node-a"' || true
}

t_say "throwaway PostgreSQL; app on node-a; the agent's directory a full tmpfs"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app)" >/dev/null
tly assign app node-a >/dev/null
t_tallyd_once
[ ! -e "$TALLY_HOME/deliver" ] || t_fail "tallyd wrote $TALLY_HOME/deliver"
mkdir -p "$MNT"
mount -t tmpfs -o size=256k,mode=0700 tmpfs "$MNT" ||
	t_fail "cannot mount a tmpfs on $MNT (the test needs root)"
dd if=/dev/zero of="$MNT/filler" bs=4k 2>/dev/null || true
[ "$(df -P "$MNT" | awk 'NR==2 {print $4}')" -eq 0 ] ||
	t_fail "the tmpfs on $MNT is not full"
t_ok "$MNT: $(df -P "$MNT" | awk 'NR==2 {print $2 " KiB, " $4 " KiB free"}')"

t_check "tally-node --once on the full disk fails, says why, acknowledges nothing"
set +e
"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$MNT" --state "$MNT.state" \
	--log "$TALLY_HOME" --once --reload app=true 2>"$W/agent.err"
rc=$?
set -e
[ $rc -ne 0 ] || { cat "$W/agent.err" >&2; t_fail "tally-node --once exited 0 on a full disk"; }
grep -q 'No space left on device' "$W/agent.err" || { cat "$W/agent.err" >&2; t_fail "tally-node does not say why"; }
[ ! -s "$MNT/app.env" ] || t_fail "an env file was left on the full disk"
find "$MNT" -name '*.tmp.*' | grep -q . && t_fail "a half-written file was left: $(find "$MNT" -name '*.tmp.*')"
t_tallyd_once
[ "$(acks)" -eq 0 ] || t_fail "a credential the node could not write was acknowledged"
t_ok "exit $rc: $(grep -m1 'No space' "$W/agent.err" | sed 's/^.*: //')"

t_check "space freed: the next run writes the env file and acknowledges it"
rm -f "$MNT/filler"
t_agent node-a --reload app=true
f=$MNT/app.env
[ -f "$f" ] || t_fail "no $f after the space came back"
[ "$(stat -c %a "$f")" = 600 ] || t_fail "$f is mode $(stat -c %a "$f")"
[ "$(t_env_psql "$f" "SELECT current_database()")" = "$(t_gname app/db app-db)" ] ||
	t_fail "the delivered credential does not reach app-db"
t_tallyd_once
[ "$(acks)" -eq 1 ] || t_fail "$(acks) acknowledgement(s) of app@node-a, expected 1"
tly log --json --type credential.acknowledged | grep '"holder":"app@node-a"' | grep -q '"proof":"verified"' ||
	t_fail "the acknowledgement's proof was not verified"
t_ok "written (0600), connects, acknowledged with proof"
