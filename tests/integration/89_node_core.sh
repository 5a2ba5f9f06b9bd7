#!/bin/sh
# The node's secret keys stay out of tally-node's core dump (issue 21
# item 3), as tallyd's secrets do (61_core_secrets): the agent is not
# dumpable and has RLIMIT_CORE 0 (tl_secret_harden), and holds the
# sealing and the signing key (and the broker password) in libsodium's
# guarded memory (mlocked, MADV_DONTDUMP).  A core taken by gcore (root
# lifts what the agent refused itself) after the agent opened a delivery
# and signed its acknowledgement holds neither key's bytes.  Control:
# the node's public sealing key, which the agent keeps in ordinary
# memory, is found in the same core, so the scan can see 32 bytes.
. "$(dirname "$0")/lib.sh"
command -v gcore >/dev/null 2>&1 || t_fail "gcore is missing (gdb)"

t_say "PostgreSQL; node-a holds game's grant; its agent acknowledged"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
tly assign game node-a >/dev/null
t_tallyd_once
K=$(t_nodekey node-a)
"$TALLY_BIN/tally-node" --node node-a --key "$K" --dir "$W/dir" --state "$W/state" \
	--log "$TALLY_HOME" --reload "game=true" 2>>"$W/agent.log" &
APID=$!
_t_pids="$_t_pids $APID"
end=$(($(t_now_ms) + 30000))
until tly log --json --type credential.ack-offered | grep -q '"holder":"game@node-a"'; do
	[ "$(t_now_ms)" -lt "$end" ] || { cat "$W/agent.log" >&2; t_fail "the agent did not acknowledge"; }
	sleep 0.1
done
t_ok "delivered, reloaded, acknowledgement offered (signed)"

LIMITS=$(grep '^Max core file size' "/proc/$APID/limits")
t_check "a core of the agent (gcore) holds neither secret key"
CORE=$W/core
( ulimit -f 4194304; gcore -o "$CORE" "$APID" >"$W/gcore.out" 2>&1 ) ||
	{ cat "$W/gcore.out" >&2; t_fail "gcore of tally-node $APID failed"; }
C=$CORE.$APID
[ -s "$C" ] || t_fail "no core at $C"
kill -TERM "$APID" 2>/dev/null || true
wait "$APID" 2>/dev/null || true
t_forget_pid "$APID"
# count CORE KEYFILE OFFSET LENGTH: how often those bytes of the key file
# are in the core; pub: the public key of the first 32 (the control).
count() {
	python3 - "$@" <<'P'
import sys
core, key, what = sys.argv[1], open(sys.argv[2], 'rb').read(), sys.argv[3]
if what == 'pub':
    from ctypes import CDLL, create_string_buffer
    s = CDLL('libsodium.so.23'); pk = create_string_buffer(32)
    s.crypto_scalarmult_curve25519_base(pk, key[:32]); pat = pk.raw
else:
    o, n = map(int, what.split(':')); pat = key[o:o + n]
data = open(core, 'rb').read()
print(data.count(pat))
P
}
pub=$(count "$C" "$K" pub)
box=$(count "$C" "$K" 0:32)
seed=$(count "$C" "$K" 32:32)
sign=$(count "$C" "$K" 32:64)
rm -f "$C"
[ "$pub" -gt 0 ] || t_fail "control: the public sealing key is not in the core: the scan is blind"
[ "$box" = 0 ] || t_fail "the sealing key (X25519) is $box time(s) in the core"
[ "$seed" = 0 ] && [ "$sign" = 0 ] || t_fail "the signing key (Ed25519) is in the core: seed $seed, whole $sign time(s)"
t_ok "control: the public key $pub time(s); the sealing key 0, the signing key 0 times"

t_check "the agent's own limits: RLIMIT_CORE 0 (soft and hard)"
printf '%s\n' "$LIMITS" | grep -q '^Max core file size *0 *0 ' ||
	t_fail "the agent's core limit: $LIMITS"
t_ok "$LIMITS"
