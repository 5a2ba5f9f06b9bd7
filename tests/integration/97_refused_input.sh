#!/bin/sh
# Nothing that fails authentication is appended (issue 21, item 8;
# DESIGN.md rule 11).  Real RabbitMQ and PostgreSQL: 100 unsigned and
# 100 wrongly signed acknowledgements published to tally.acks (anyone
# who may publish to the broker can), and a few that are not even JSON,
# append no event at all; they are counted per claimed node and reason
# in the scratch table "refused" (not the record) and `tally status`
# shows the counts ("refused input: 100 unsigned message(s) on
# tally.acks, last at …, last reason …"); tallyd logs them rate-limited
# (a handful of lines, with a count of what it suppressed), not 200.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
FORGE="python3 $TALLY_SRC/tests/harness/forge_ack.py"

head_seq() { tly stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
queued() { api GET /queues/%2F/tally.acks | sed -n 's/.*"messages":\([0-9]*\).*/\1/p'; }
publish_ack() {
	_p=$(printf '%s' "$1" | sed 's/"/\\"/g')
	api POST /exchanges/%2F/amq.default/publish \
		"{\"properties\":{},\"routing_key\":\"tally.acks\",\"payload\":\"$_p\",\"payload_encoding\":\"string\"}" |
		grep -q '"routed":true' || t_fail "cannot publish to tally.acks"
}

t_say "RabbitMQ, PostgreSQL; app on node-a, its grant provisioned; tallyd publishing"
r_start
t_pg_start
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password >/dev/null ||
	t_fail "tally publish configure failed"
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app)" >/dev/null
tly assign app node-a >/dev/null
t_tallyd_start --interval 1 --verify-interval 3600
t_wait_healthy 30 app
G=app/db
e=$(($(t_now_ms) + 20000))
until [ "$(queued)" = 0 ]; do
	[ "$(t_now_ms)" -lt "$e" ] || t_fail "tally.acks is not consumed"
	sleep 0.2
done
sleep 2
H0=$(head_seq)
t_ok "healthy at event $H0"

t_say "100 unsigned, 100 wrongly signed, 3 malformed messages on tally.acks"
T0=$(t_now_ms)
$FORGE --node node-a --grant $G --holder app@node-a --version 1 --no-proof --count 100 >"$W/unsigned"
$FORGE --node node-a --grant $G --holder app@node-a --version 1 --random-key --password x --count 100 >"$W/badsig"
[ "$(cat "$W/unsigned" "$W/badsig" | sort -u | wc -l)" = 200 ] || t_fail "forge_ack.py gave fewer than 200 distinct messages"
cat "$W/unsigned" "$W/badsig" | while read -r m; do publish_ack "$m"; done
for p in 'not json' '{"node":"node-a"}' '[1,2,3]'; do
	publish_ack "$p"
done
e=$(($(t_now_ms) + 30000))
until [ "$(queued)" = 0 ]; do
	[ "$(t_now_ms)" -lt "$e" ] || t_fail "tally.acks still holds $(queued) message(s) after 30 s"
	sleep 0.2
done
sleep 3	# an ack pass or two after the last one
SECS=$((($(t_now_ms) - T0) / 1000 + 1))

t_check "no event appended"
H1=$(head_seq)
[ "$H1" = "$H0" ] || {
	tly log --json --from $((H0 + 1)) | t_jfields seq type | sort -k2 | uniq -c -f1 | head >&2
	t_fail "$((H1 - H0)) event(s) appended by 203 unauthenticated messages (head $H0 -> $H1)"
}
t_ok "head still $H1"

t_check "tally status shows the counts, per node and reason"
tly status >"$W/status.txt" 2>&1 || true
grep -q "refused input: 100 unsigned message(s) on tally.acks claiming node-a, last at .*, last reason: no proof" "$W/status.txt" ||
	{ cat "$W/status.txt" >&2; t_fail "status does not show the 100 unsigned messages"; }
grep -q "refused input: 100 wrongly signed message(s) on tally.acks claiming node-a, last at .*, last reason: bad signature" "$W/status.txt" ||
	{ cat "$W/status.txt" >&2; t_fail "status does not show the 100 wrongly signed messages"; }
grep -q "refused input: 3 malformed message(s) on tally.acks" "$W/status.txt" ||
	{ cat "$W/status.txt" >&2; t_fail "status does not show the 3 malformed messages"; }
tly status --json | grep -q '"refused_input":\[' || t_fail "status --json has no refused_input"
t_ok "$(grep -c 'refused input' "$W/status.txt") line(s): $(grep 'refused input' "$W/status.txt" | head -n 1 | cut -c1-90)…"

t_check "tallyd's log: rate-limited (a line per 10 s at most)"
n=$(grep -c "refused input" "$T_DLOG" || true)
max=$((SECS / 10 + 2))
[ "$n" -ge 1 ] && [ "$n" -le "$max" ] || t_fail "tallyd logged $n refusal line(s) for 203 messages in $SECS s (want 1..$max)"
e=$(($(t_now_ms) + 15000))	# what was held back is said within 10 s
until grep "refused input" "$T_DLOG" | grep -q "[1-9][0-9]* more suppressed"; do
	[ "$(t_now_ms)" -lt "$e" ] ||
		t_fail "no line says how many it suppressed: $(grep refused "$T_DLOG" | tail -n 3)"
	sleep 0.5
done
SECS=$((($(t_now_ms) - T0) / 1000 + 1))
n=$(grep -c "refused input" "$T_DLOG" || true)
max=$((SECS / 10 + 2))
[ "$n" -le "$max" ] || t_fail "tallyd logged $n refusal line(s) for 203 messages in $SECS s (want 1..$max)"
t_ok "$n line(s) in $SECS s: $(grep 'refused input' "$T_DLOG" | tail -n 1 | cut -c1-120)…"

t_check "a good acknowledgement still goes through the queue (control)"
PW=$(t_envget "$(t_envfile node-a app)" DB_PASSWORD)
tly rotate $G >/dev/null || t_fail "tally rotate"
e=$(($(t_now_ms) + 30000))
until tly log --json --type credential.delivered | grep -q '"version":2'; do
	[ "$(t_now_ms)" -lt "$e" ] || t_fail "v2 not delivered"
	sleep 0.2
done
PW2=$(t_envget "$(t_envfile node-a app)" DB_PASSWORD)
[ "$PW2" != "$PW" ] || t_fail "no new password"
publish_ack "$($FORGE --node node-a --grant $G --holder app@node-a --version 2 --key "$(t_nodekey node-a)" --password="$PW2")"
e=$(($(t_now_ms) + 30000))
until tly log --json --type rotation.completed | grep -q '"version":2'; do
	[ "$(t_now_ms)" -lt "$e" ] || { tail -n 20 "$T_DLOG" >&2; t_fail "the signed acknowledgement did not complete the rotation"; }
	sleep 0.2
done
tly log --json --type credential.acknowledged | grep -q '"actor":"node:node-a"' ||
	t_fail "no credential.acknowledged by node:node-a"
t_ok "a signed acknowledgement with its proof completes the rotation"
