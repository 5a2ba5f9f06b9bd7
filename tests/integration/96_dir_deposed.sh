#!/bin/sh
# The deposed-leader case on a directory root (issue 22, item 3): leader
# A provisions on the root; B, a standby of A promoted to epoch 2,
# raises the root's fence (ROOT/.tally-fence-MESH) with its first
# tallyd.  B followed A's stream on a real RabbitMQ to A's head (so
# every event it holds is signed by A), then tally promote --yes.
# A, still running (its resync an hour away), is given a new grant: its
# session reads the fence under the root's lock before any change, makes
# none and A exits 9.  Restarted (cut off from any stream), with a
# rotation and a removal waiting, it exits 9 at its start.  The root is
# byte for byte what it was (a listing with owners, modes, sizes and
# every file's content).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rabbit-lib.sh"

ROOT=$W/root
mkdir -p "$ROOT" "$W/manifests"
chmod 0755 "$W" "$ROOT"
snap() {
	find "$ROOT" | sort | while read -r p; do
		if [ -f "$p" ] && [ ! -L "$p" ]; then c=$(sha256sum <"$p" | cut -c1-64)
		else c=-; fi
		echo "$p $(stat -c '%u:%g %a %F %s' "$p") $c"
	done
}

t_say "leader A provisions app-1 on the root"
r_start
STREAM=tally.record
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/download.yaml" "$(t_dir_consumer app-1)" >/dev/null
tly assign download node-a --set root="$ROOT" >/dev/null
tly assign app-1 node-a >/dev/null
t_tallyd_once
t_wait_healthy 10 app-1
MESH=$(tly mesh --json | sed -n 's/.*"mesh":"\([0-9a-f]*\)".*/\1/p')
D1=$(t_envget "$(t_envfile node-a app-1)" FILES)
[ -d "$D1" ] || t_fail "app-1's directory $D1 is missing"
echo "app-1's data" >"$D1/data"
t_ok "app-1 in $D1, mesh $MESH"

t_say "B: a standby that followed A's stream, promoted to epoch 2"
B=$W/b
LH=$TALLY_HOME
standby_promoted "$B"
t_tallyd_start --interval 3600 --verify-interval 3600
APID=$T_DPID
"$TALLY_BIN/tallyd" --home "$B" --once --once-timeout 30 2>>"$T_DLOG" ||
	t_fail "B's tallyd --once failed: $(tail -n 5 "$T_DLOG")"
grep -q "info: epoch 2: fenced 1 provider" "$T_DLOG" || t_fail "B did not fence the root: $(tail -n 5 "$T_DLOG")"
F=$ROOT/.tally-fence-$MESH
[ "$(cut -d' ' -f1-2 "$F")" = "tally-fence/1 2" ] || t_fail "the root's fence: $(cat "$F")"
kill -0 "$APID" 2>/dev/null || t_fail "A is not running"
t_ok "the root's fence at epoch 2 ($(cat "$F")); A (pid $APID) still runs"

t_say "A, running, is given a new grant"
snap >"$W/before"
tly apply "$(t_dir_consumer app-2)" >/dev/null
tly assign app-2 node-a >/dev/null
t_wait_exit "$APID" 30
[ "$T_RC" -eq 9 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "A exited $T_RC, expected 9 (deposed)"; }
grep "tallyd\[$APID\] error: deposed: " "$T_DLOG" | grep -q "epoch 2" ||
	t_fail "A does not say why it stopped: $(grep "tallyd\[$APID\]" "$T_DLOG" | tail -n 3)"
snap >"$W/after"
cmp -s "$W/before" "$W/after" || { diff "$W/before" "$W/after" >&2; t_fail "the deposed leader changed the root"; }
t_ok "exit 9: $(grep "tallyd\[$APID\] error: deposed" "$T_DLOG" | head -n 1 | sed 's/.*error: //' | cut -c1-120)"

t_say "A restarted, cut off from the stream, with a rotation and a removal waiting"
# A broker that does not answer: only the fence can depose A now.
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "amqp://127.0.0.1:1/" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure (a broker that does not answer) failed"
tly rotate app-1/files >/dev/null 2>&1 || true
tly remove app-1 --yes >/dev/null || t_fail "tally remove app-1 on A"
set +e
"$TALLY_BIN/tallyd" --once --once-timeout 30 2>>"$T_DLOG"
rc=$?
set -e
[ "$rc" -eq 9 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "A restarted exited $rc, expected 9"; }
tail -n 3 "$T_DLOG" | grep -q "deposed: provider node-a/download is fenced at epoch 2" ||
	t_fail "A restarted does not name the fence: $(tail -n 3 "$T_DLOG")"
snap >"$W/after2"
cmp -s "$W/before" "$W/after2" || { diff "$W/before" "$W/after2" >&2; t_fail "the restarted deposed leader changed the root"; }
[ "$(cat "$D1/data")" = "app-1's data" ] || t_fail "app-1's data changed"
tly status >"$W/st.out" 2>&1 || true
grep -q "DEPOSED" "$W/st.out" || t_fail "tally status does not say A is deposed"
t_ok "exit 9 at start; the root byte for byte the same; status says DEPOSED"
