#!/bin/sh
# tally tail, the subscription API from the command line: the same JSON
# as tally log --json, secrets redacted, -n/--from/--type, a follower in
# another process woken promptly by an append, checkpoints that resume
# without a repeat or a gap (also after kill -9), and clean ends on
# SIGINT and when the reader goes away (SIGPIPE).  No server needed:
# nothing here provisions.
. "$(dirname "$0")/lib.sh"

ADMIN_PW="admin-Sekr1t-$(date +%s%N)"

head_seq() { tly stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }

# ckpt NAME: the seq of checkpoint NAME in tally stats --json.
ckpt() {
	tly stats --json | tr '{' '\n' |
		sed -n "s/.*\"lag\":[0-9]*,\"name\":\"$1\",\"seq\":\([0-9]*\).*/\1/p"
}

t_say "a home with two nodes, a provider (with a secret), a consumer"
t_init
t_node node-a 127.0.0.1
t_node node-b 10.0.0.2
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
printf '%s\n' "$ADMIN_PW" | tly assign postgres node-a --set port=5432 \
	--set admin-user=postgres --secret admin-password >/dev/null ||
	t_fail "tally assign postgres failed"
tly apply "$(t_consumer app)" >/dev/null
tly assign app node-a >/dev/null
H=$(head_seq)
[ "$H" -gt 8 ] || t_fail "only $H events"

t_check "tail --from 1 --json prints exactly what tally log --json prints"
tly log --json >"$W/log.json"
tly tail --from 1 --json >"$W/tail.json" || t_fail "tally tail exited $?"
cmp -s "$W/log.json" "$W/tail.json" || {
	diff "$W/log.json" "$W/tail.json" | head >&2
	t_fail "tail --json and log --json differ"
}
[ "$(wc -l <"$W/tail.json")" -eq "$H" ] || t_fail "tail printed $(wc -l <"$W/tail.json") lines for $H events"
t_ok "$H identical JSON lines"

t_check "secrets never appear: the admin password is <redacted> in text and JSON"
tly tail --from 1 >"$W/tail.txt"
if grep -F -- "$ADMIN_PW" "$W/tail.json" "$W/tail.txt" >/dev/null; then
	t_fail "the admin password appears in tally tail's output"
fi
grep -q '"admin-password":"<redacted>"' "$W/tail.json" ||
	t_fail "the secret is not shown as <redacted>"
t_ok "redacted"

t_check "-n 3, --from, --type"
n=$(tly tail -n 3 | wc -l)
[ "$n" -eq 3 ] || t_fail "-n 3 printed $n lines"
last=$(tly tail -n 1 --json | t_jfields seq)
[ "$last" = "$H" ] || t_fail "-n 1 printed seq $last, expected $H"
first=$(tly tail --from 5 --json | head -n 1 | t_jfields seq)
[ "$first" = 5 ] || t_fail "--from 5 started at $first"
tly tail --from 1 --type 'node.*' --json | t_jfields type | sort -u >"$W/types"
[ "$(cat "$W/types")" = node.added ] || t_fail "--type node.* printed: $(cat "$W/types")"
NB=$(tly log --json --stream node/node-b | head -n 1 | t_jfields seq)
[ "$(tly tail -n 1 --type 'node.*' --json | t_jfields seq)" = "$NB" ] ||
	t_fail "-n 1 --type node.* is not event $NB (node-b's node.added)"
t_ok "as asked"

t_check "--follow in another process gets a new event promptly, then ends 0 on SIGINT"
"$TALLY_BIN/tally" tail --follow --json --from $((H + 1)) >"$W/follow.json" 2>"$W/follow.err" &
FP=$!
_t_pids="$_t_pids $FP"
sleep 0.3
t0=$(t_now_ms)
t_node node-c 10.0.0.3
while ! grep -q '"name":"node-c"' "$W/follow.json" 2>/dev/null; do
	[ $(($(t_now_ms) - t0)) -lt 3000 ] || t_fail "the follower did not print node-c within 3 s"
	sleep 0.01
done
dt=$(($(t_now_ms) - t0))
kill -INT "$FP"
t_wait_exit "$FP" 3
[ "$T_RC" -eq 0 ] || t_fail "tail --follow exited $T_RC on SIGINT ($(cat "$W/follow.err"))"
[ "$(wc -l <"$W/follow.json")" -eq 1 ] || t_fail "the follower printed $(wc -l <"$W/follow.json") lines"
t_ok "seen ${dt} ms after the append began (CLI start included); exit 0 on SIGINT"

t_check "the reader going away ends tail --follow with status 0 (SIGPIPE)"
t0=$(t_now_ms)
( "$TALLY_BIN/tally" tail --follow --from 1 2>"$W/pipe.err"; echo $? >"$W/pipe.rc" ) |
	head -n 2 >"$W/head.out"
dt=$(($(t_now_ms) - t0))
[ "$(cat "$W/pipe.rc")" = 0 ] || t_fail "tail | head -n 2: tail exited $(cat "$W/pipe.rc") ($(cat "$W/pipe.err"))"
[ "$(wc -l <"$W/head.out")" -eq 2 ] || t_fail "head got $(wc -l <"$W/head.out") lines"
[ "$dt" -lt 5000 ] || t_fail "tail took $dt ms to notice"
t_ok "ended in $dt ms, status 0, nothing on stderr: '$(cat "$W/pipe.err")'"

t_check "--checkpoint: everything once, then only what is new, lag 0 in tally stats"
tly tail --checkpoint c1 --json >"$W/c1.a" || t_fail "tail --checkpoint exited $?"
H=$(head_seq)
[ "$(wc -l <"$W/c1.a")" -eq "$H" ] || t_fail "the first run printed $(wc -l <"$W/c1.a") of $H"
[ "$(ckpt sub:c1)" = "$H" ] || t_fail "checkpoint sub:c1 is '$(ckpt sub:c1)', expected $H"
tly tail --checkpoint c1 --json >"$W/c1.b"
[ ! -s "$W/c1.b" ] || t_fail "a second run repeated $(wc -l <"$W/c1.b") events"
t_node node-d 10.0.0.4
t_node node-e 10.0.0.5
tly tail --checkpoint c1 --json | t_jfields seq | tr '\n' ' ' >"$W/c1.c"
[ "$(cat "$W/c1.c")" = "$((H + 1)) $((H + 2)) " ] || t_fail "the third run printed seqs '$(cat "$W/c1.c")', expected $((H + 1)) $((H + 2))"
tly stats | grep -q "sub:c1 .*lag 0" || t_fail "tally stats does not show sub:c1 with lag 0"
t_ok "first run $H events, then none, then exactly the 2 new ones"

t_check "--checkpoint --follow killed with SIGKILL: the next one starts after the checkpoint"
H=$(head_seq)
"$TALLY_BIN/tally" tail --checkpoint c2 --follow --json >"$W/c2.a" 2>&1 &
FP=$!
_t_pids="$_t_pids $FP"
t0=$(t_now_ms)
until [ "$(ckpt sub:c2)" = "$H" ]; do
	[ $(($(t_now_ms) - t0)) -lt 5000 ] || t_fail "sub:c2 did not reach $H"
	sleep 0.02
done
for n in f g h; do t_node "node-$n" "$n.lan"; done
sleep 0.3
kill -KILL "$FP"
t_wait_exit "$FP" 3
C=$(ckpt sub:c2)
got=$(t_jfields seq <"$W/c2.a" | tail -n 1)
[ "$C" -le "$got" ] || t_fail "checkpoint $C is past the last line written ($got)"
t_node node-i 10.0.2.1
tly tail --checkpoint c2 --json >"$W/c2.b"
first=$(head -n 1 "$W/c2.b" | t_jfields seq)
[ "$first" = $((C + 1)) ] || t_fail "after the kill the tail began at $first, checkpoint $C"
# Together: every event once up to the checkpoint, then the rest.
{ t_jfields seq <"$W/c2.a" | awk -v c="$C" '$1 <= c'; t_jfields seq <"$W/c2.b"; } >"$W/c2.seqs"
[ "$(tr '\n' ' ' <"$W/c2.seqs")" = "$(seq 1 "$(head_seq)" | tr '\n' ' ')" ] ||
	t_fail "the two runs do not add up to 1..$(head_seq) without repeats"
t_ok "checkpoint $C after the kill; the restart began at $first; nothing missed, nothing repeated"

t_check "bad arguments"
t_expect_exit 2 "a bad --from" tly tail --from x
t_expect_exit 2 "a bad checkpoint name" tly tail --checkpoint "two words"
t_expect_exit 3 "no log" env TALLY_HOME="$W/none" "$TALLY_BIN/tally" tail
t_ok "usage errors exit 2, no log exits 3"

t_check "tally history: a grant's streams with actors and causes, text and JSON"
tly history app/db >"$W/hist.txt" || t_fail "tally history app/db exited $?"
grep -q "app/db bound to node-a/postgres (co-located)" "$W/hist.txt" ||
	t_fail "history lacks the binding: $(cat "$W/hist.txt")"
grep -q "grant app/db requested from node-a/postgres" "$W/hist.txt" ||
	t_fail "history lacks the request"
grep -q "because of #[0-9]* assignment.created" "$W/hist.txt" ||
	t_fail "history does not name the cause"
grep -q "cli:" "$W/hist.txt" || t_fail "history does not name the actor"
tly history app/db --json >"$W/hist.json"
[ "$(wc -l <"$W/hist.json")" -eq 2 ] || t_fail "history --json printed $(wc -l <"$W/hist.json") lines"
grep -q '"summary":"app/db bound to node-a/postgres (co-located)"' "$W/hist.json" ||
	t_fail "history --json lacks the summary"
grep -q '"cause_type":"assignment.created"' "$W/hist.json" || t_fail "history --json lacks cause_type"
tly history node/node-a | grep -q "node node-a added (routable name 127.0.0.1)" ||
	t_fail "history node/node-a"
tly history app@node-a | grep -q "assignment app@node-a created" ||
	t_fail "history app@node-a"
t_expect_exit 3 "history of nothing" tly history nothing/here
t_ok "history reads like a story"

t_check "tally verify"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain sound"
