#!/bin/sh
# A tampered log is never acted on (issue 21, item 9).  A provider's
# address is changed in place in the data file (its port, in the event
# that recorded it and in the tables derived from it) to the port of a
# listener that records every connection.  Then:
#   - every writer (apply, assign, node add) and every reader that acts
#     (status, env, explain, check) exits 5 naming the first bad event,
#     and appends nothing;
#   - tallyd --once exits 5 naming it and makes no connection to the
#     address the tampered event names (not even to fence it);
#   - the inspection commands (log, verify) still read it: verify exits
#     5 naming the same event;
#   - put back, the same commands work, and a write checks only what
#     was appended since the last check (the verified record moves).
# No server is needed: nothing may connect anywhere.
. "$(dirname "$0")/lib.sh"

# Two free ports with as many digits, so the tamper keeps every length.
set -- $(python3 -c '
import socket
def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
while True:
    a, b = free(), free()
    if a != b and len(str(a)) == len(str(b)): print(a, b); break
')
PORT=$1 LPORT=$2

head_seq() { tly log --json | tail -n 1 | t_jfields seq; }

t_say "a mesh whose provider is at 127.0.0.1:$PORT; a listener on $LPORT"
t_init
t_node node-a 127.0.0.1
tly apply "$(t_consumer app)" >/dev/null
tly apply "$(t_consumer app2)" >/dev/null
tly assign app node-a >/dev/null
M3=$(t_consumer app3)	# applied only after the tamper
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
echo "not-a-real-password" >"$W/pw"
tly assign postgres node-a --expose local --set port="$PORT" \
	--set admin-user=postgres --secret admin-password <"$W/pw" >/dev/null
tly log --json >"$W/before.jsonl"
H=$(head_seq)
BAD=$(grep -n "\"$PORT\"" "$W/before.jsonl" | head -n 1 | t_jfields seq)
[ -n "$BAD" ] || t_fail "no event names port $PORT"
BAD0=$BAD
t_ok "head $H; event $BAD is the first to name port $PORT"

python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
while True:
    c, a = s.accept()
    with open(sys.argv[2], "a") as f: f.write("%s:%d\n" % a)
    c.close()
' "$LPORT" "$W/connects" &
LPID=$!
_t_pids="$_t_pids $LPID"
: >"$W/connects"
sleep 0.3

t_say "the port changed in place in data.mdb: $PORT -> $LPORT"
DATA=$TALLY_HOME/log/data.mdb
cp "$DATA" "$W/data.mdb.orig"
n=$(python3 -c '
import sys
p, a, b = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
d = open(p, "rb").read(); n = d.count(a)
open(p, "r+b").write(d.replace(a, b)); print(n)
' "$DATA" "$PORT" "$LPORT")
[ "$n" -ge 1 ] || t_fail "port $PORT is not in $DATA"
t_ok "$n occurrence(s) changed"

refused() {
	_r_what=$1
	shift
	t_expect_exit 5 "$_r_what on the tampered log" "$@"
	grep -q "\(event\|seq\) $BAD\b" "$W/last.err" || {
		cat "$W/last.err" >&2
		t_fail "$_r_what does not name event $BAD"
	}
	t_ok "$_r_what: exit 5, $(grep -m1 "\(event\|seq\) $BAD\b" "$W/last.err" | sed 's/^.*does not verify/does not verify/' | cut -c1-110)"
}

t_check "writers refuse, naming event $BAD"
refused "tally apply" tly apply "$M3"
refused "tally assign" tly assign app2 node-a
refused "tally node add" tly node add node-b --routable-name 127.0.0.2 \
	--key-out "$W/keys/node-b.key"
t_check "readers that act refuse, naming event $BAD"
refused "tally status" tly status
refused "tally env" tly env node-a app --node-key "$(t_nodekey node-a)"
refused "tally explain" tly explain app
refused "tally check" tly check --all
t_check "tallyd --once refuses before its first provider call"
refused "tallyd --once" "$TALLY_BIN/tallyd" --once --once-timeout 10
[ ! -s "$W/connects" ] || t_fail "something connected to the tampered address 127.0.0.1:$LPORT: $(cat "$W/connects")"
t_ok "no connection to 127.0.0.1:$LPORT"
t_check "nothing was appended; tally verify names the same event"
[ "$(head_seq)" = "$H" ] || t_fail "the log grew from $H to $(head_seq)"
refused "tally verify" tly verify
t_ok "head still $H"

t_say "put back: the commands work, and a write checks only the tail"
cp "$W/data.mdb.orig" "$DATA"
# Not healthy (no tallyd has run: exit 6), but no longer refused.
t_expect_exit 6 "tally status (sound log)" tly status
tly assign app2 node-a >/dev/null || t_fail "tally assign app2 failed on the sound log"
tly node add node-b --routable-name 127.0.0.2 --key-out "$W/keys/node-b.key" \
	>/dev/null || t_fail "tally node add node-b failed on the sound log"
# The event the last write appended is after the verified record: a
# change to it is found by the next command, whichever it is.
H2=$(head_seq)
cp "$DATA" "$W/data.mdb.orig"
python3 -c '
import sys
p = sys.argv[1]; d = open(p, "rb").read()
assert d.count(b"127.0.0.2") >= 1
open(p, "r+b").write(d.replace(b"127.0.0.2", b"127.0.0.9"))
' "$DATA"
BAD=$H2
refused "tally status (the last write's event changed)" tly status
refused "tally apply (the last write's event changed)" tly apply "$M3"
cp "$W/data.mdb.orig" "$DATA"
t_expect_exit 6 "tally status (put back)" tly status
[ ! -s "$W/connects" ] || t_fail "something connected to 127.0.0.1:$LPORT: $(cat "$W/connects")"
t_ok "sound again; never a connection to 127.0.0.1:$LPORT"

t_say "a change before the verified record: the full walks find it"
# Event $BAD0 (the provider's port) has been checked by later writes:
# the cheap check no longer reads it (core/log.h); tallyd, which walks
# the whole log when it starts, and tally verify do.
cp "$DATA" "$W/data.mdb.orig"
python3 -c '
import sys
p, a, b = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
d = open(p, "rb").read(); open(p, "r+b").write(d.replace(a, b))
' "$DATA" "$PORT" "$LPORT"
BAD=$BAD0
refused "tallyd --once (a change before the record)" "$TALLY_BIN/tallyd" --once --once-timeout 10
[ ! -s "$W/connects" ] || t_fail "something connected to the tampered address 127.0.0.1:$LPORT: $(cat "$W/connects")"
refused "tally verify (a change before the record)" tly verify
t_ok "no connection to 127.0.0.1:$LPORT"
cp "$W/data.mdb.orig" "$DATA"
