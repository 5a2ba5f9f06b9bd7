#!/bin/sh
# The delivery directory on a full filesystem (a real 256 KiB tmpfs
# mounted over HOME/deliver and filled up): tallyd must not spin.
#   - tallyd --once --once-timeout 4 ends within the timeout (+ slack)
#     with exit 6, and says so once, not thousands of times;
#   - tallyd as a daemon for 4 s: the failure is logged once, retries
#     back off (a handful of attempts, little CPU);
#   - tally status says the env file cannot be written and exits 6;
#   - when space is freed, the daemon writes the file, says once that
#     delivery files are writable again, and status exits 0.
. "$(dirname "$0")/lib.sh"

MNT=$TALLY_HOME/deliver
_df_cleanup() {
	_df_rc=$?
	umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	(exit $_df_rc)
	_t_cleanup
}
trap _df_cleanup EXIT

t_say "throwaway PostgreSQL, a tally home whose deliver/ is a full tmpfs"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app)" >/dev/null
tly assign app node-a >/dev/null
mkdir -p "$MNT"
mount -t tmpfs -o size=256k,mode=0700 tmpfs "$MNT" ||
	t_fail "cannot mount a tmpfs on $MNT (the test needs root)"
dd if=/dev/zero of="$MNT/filler" bs=4k 2>/dev/null || true
[ "$(df -P "$MNT" | awk 'NR==2 {print $4}')" -eq 0 ] ||
	t_fail "the tmpfs on $MNT is not full"
t_ok "$MNT: $(df -P "$MNT" | awk 'NR==2 {print $2 " KiB, " $4 " KiB free"}')"

t_check "tallyd --once --once-timeout 4 ends by its timeout, exit 6"
lines0=0
[ -f "$T_DLOG" ] && lines0=$(wc -l <"$T_DLOG")
t0=$(t_now_ms)
set +e
timeout 30 "$TALLY_BIN/tallyd" --once --once-timeout 4 2>>"$T_DLOG"
rc=$?
set -e
t1=$(t_now_ms)
[ $rc -ne 124 ] || t_fail "tallyd --once --once-timeout 4 still ran after 30 s"
[ $((t1 - t0)) -lt 10000 ] || t_fail "tallyd --once took $((t1 - t0)) ms (timeout 4 s)"
[ $rc -eq 6 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "tallyd --once exited $rc, not 6"; }
n=$(tail -n +$((lines0 + 1)) "$T_DLOG" | grep -c 'delivery files' || true)
[ "$n" -ge 1 ] && [ "$n" -le 2 ] ||
	t_fail "tallyd --once logged the delivery failure $n times (want once)"
t_ok "exit 6 after $((t1 - t0)) ms; the failure logged $n time(s)"

t_check "tally status says the env file cannot be written, exit 6"
t_expect_exit 6 "tally status app (deliver/ full)" tly status app
grep -qi 'env file' "$W/last.out" || { cat "$W/last.out" >&2; t_fail "status does not mention the env file"; }
grep -q 'No space left on device' "$W/last.out" || { cat "$W/last.out" >&2; t_fail "status does not say why"; }
t_ok "$(grep -i 'env file' "$W/last.out" | head -n 1 | sed 's/^ *//')"
t_expect_exit 6 "tally status (whole mesh, deliver/ full)" tly status

t_check "tallyd as a daemon for 4 s: logged once, backs off, little CPU"
lines0=$(wc -l <"$T_DLOG")
t_tallyd_start --interval 1
sleep 4
ticks=$(awk '{print $14 + $15}' "/proc/$T_DPID/stat")
n=$(tail -n +$((lines0 + 1)) "$T_DLOG" | grep -c 'delivery files' || true)
[ "$n" -eq 1 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "the daemon logged the delivery failure $n times in 4 s (want once)"; }
hz=$(getconf CLK_TCK)
[ "$ticks" -lt $((hz / 2)) ] || t_fail "the daemon used $ticks ticks of CPU in 4 s (spinning)"
t_ok "one warning, $ticks/$hz s of CPU in 4 s"

t_check "space freed: the env file is written, said once, status exits 0"
rm -f "$MNT/filler"
f=$(t_envfile node-a app)
end=$(($(t_now_ms) + 90000))
until [ -f "$f" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "the env file did not appear within 90 s of freeing space"
	sleep 0.1
done
t_wait_healthy 10 app
n=$(tail -n +$((lines0 + 1)) "$T_DLOG" | grep -c 'delivery files.*writable again' || true)
[ "$n" -eq 1 ] || t_fail "the recovery was logged $n times (want once)"
[ "$(t_env_psql "$f" "SELECT current_database()")" = "$(t_gname app/db app-db)" ] ||
	t_fail "the delivered credential does not reach app-db"
t_tallyd_stop
t_ok "delivered after the space came back; status healthy"

t_check "an env file deleted while tallyd is stopped: status exit 6, then rewritten"
rm -f "$f"
t_expect_exit 6 "tally status app (env file deleted)" tly status app
grep -q 'env file not written: missing' "$W/last.out" || { cat "$W/last.out" >&2; t_fail "status does not say the env file is missing"; }
t_tallyd_once
[ -f "$f" ] || t_fail "tallyd --once did not rewrite the env file"
t_expect_exit 0 "tally status app (rewritten)" tly status app
t_ok "missing file reported, rewritten by tallyd --once"
