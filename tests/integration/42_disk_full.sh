#!/bin/sh
# A full disk where the credentials are written: since the control plane
# keeps no plaintext (issue 14) that is the node's, under its agent's
# --dir (a real 256 KiB tmpfs mounted there and filled up).
#   - tallyd writes nothing under its home for a delivery: no deliver/;
#   - tally-node --once on the full disk fails (exit non-zero), says why,
#     leaves no half-written env file and acknowledges nothing;
#   - when space is freed, the next tally-node --once writes the env
#     file (0600), whose credential connects, and acknowledges it
#     (credential.acknowledged, proof verified, after tallyd's pass);
#   - the control plane's own log on a full disk (its home copied onto a
#     tmpfs filled to its last page): a write that LMDB can only half
#     write (a short write, which LMDB reports as EIO) fails with exit 1
#     saying "no space left on device" and naming the log's data file,
#     appends nothing, and works once space is freed.
. "$(dirname "$0")/lib.sh"

MNT=$W/agent-node-a
HMNT=$W/full-home
_df_cleanup() {
	_df_rc=$?
	umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	umount "$HMNT" 2>/dev/null || umount -l "$HMNT" 2>/dev/null || true
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

t_say "the control plane's log on a full disk"
mkdir -p "$HMNT"
mount -t tmpfs -o size=4m,mode=0700 tmpfs "$HMNT" ||
	t_fail "cannot mount a tmpfs on $HMNT (the test needs root)"
cp -a "$TALLY_HOME" "$HMNT/home"
FH=$HMNT/home
# A manifest whose write takes several pages: with one page left, LMDB
# writes part of it and gets a short write.
{
	echo "module: big"
	printf 'env: {'
	for k in $(seq 1 300); do printf 'VARIABLE_NUMBER_%d_OF_MANY: "", ' "$k"; done
	echo 'LAST: ""}'
} >"$W/big.yaml"
h0=$(TALLY_HOME=$FH tly log --json | tail -n 1 | t_jfields seq)
free_kb=$(df -Pk "$HMNT" | awk 'NR==2 {print $4}')
dd if=/dev/zero of="$HMNT/filler" bs=4k count=$((free_kb / 4 - 1)) 2>/dev/null || true
t_ok "$HMNT: $(df -Pk "$HMNT" | awk 'NR==2 {print $4}') KiB free"
t_check "tally apply on the full disk: exit 1, 'no space left on device', the log's path"
TALLY_HOME=$FH t_expect_exit 1 "tally apply (log on a full disk)" tly apply "$W/big.yaml"
grep -qi 'no space left on device' "$W/last.err" || {
	cat "$W/last.err" >&2
	t_fail "tally apply on a full disk does not say 'no space left on device'"
}
grep -q "$FH/log/data.mdb" "$W/last.err" || {
	cat "$W/last.err" >&2
	t_fail "tally apply on a full disk does not name $FH/log/data.mdb"
}
grep -qi 'input/output error' "$W/last.err" &&
	t_fail "a full disk is still called an I/O error: $(cat "$W/last.err")"
h1=$(TALLY_HOME=$FH tly log --json | tail -n 1 | t_jfields seq)
[ "$h1" = "$h0" ] || t_fail "the log grew from $h0 to $h1 on a failed write"
t_ok "exit 1: $(head -n 1 "$W/last.err")"
rm -f "$HMNT/filler"
TALLY_HOME=$FH tly apply "$W/big.yaml" >/dev/null || t_fail "tally apply failed after space was freed"
TALLY_HOME=$FH tly verify >/dev/null || t_fail "tally verify failed after the full disk"
t_ok "space freed: the same apply works, the log verifies"
umount "$HMNT"
