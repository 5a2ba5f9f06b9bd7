#!/bin/sh
# The publisher against a real RabbitMQ (one throwaway broker on
# loopback for the whole script, with its own epmd, stopped at the end):
#
#   1. every event reaches a queue bound to the exchange, in order, as
#      the JSON of tally tail --json, with message id = event id and the
#      sequence number in a header; the sealed delivery reaches
#      tally.node.NODE as the exact ciphertext of the log; nothing on the
#      broker contains a generated password (nor the provider's admin
#      password); an acknowledgement on tally.acks without the node's
#      signature and proof is refused (issue 14), counted and appended
#      nowhere (issue 21: nothing unauthenticated is appended);
#      tally-board over AMQP renders the counts.
#   2. the broker is killed (SIGKILL) and restarted in the middle of a
#      10,000-event stream while tallyd keeps reconciling: a queue bound
#      to the exchange gets every event in order, with duplicates only
#      in one run around the restart, each identifiable by its id; a
#      tally-board following through the restart misses nothing.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
N=${TALLY_STREAM_EVENTS:-10000}
BATCH=500

# --- the broker ---------------------------------------------------------

# drain QUEUE: every message, removed from the queue, one per line:
# "SEQ MESSAGE_ID ROUTING_KEY PAYLOAD_BASE64 CONTENT_TYPE" in delivery
# order.
drain() {
	api POST "/queues/%2F/$1/get" \
		'{"count":1000000,"ackmode":"ack_requeue_false","encoding":"base64","truncate":100000000}' |
		sed 's/},{"payload_bytes"/}\n{"payload_bytes"/g' |
		t_jfields seq message_id routing_key payload content_type
}

b64() { base64 -d 2>/dev/null; }
hex() { od -An -v -tx1 | tr -d ' \n'; }
head_seq() { tly stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
pub_lag() {
	tly stats --json | tr '{' '\n' |
		sed -n 's/.*"lag":\([0-9]*\),"name":"publisher".*/\1/p'
}

# t_wait_lag0 SECONDS: until the publisher's checkpoint is the head.
t_wait_lag0() {
	_w_end=$(($(t_now_ms) + $1 * 1000))
	until [ "$(pub_lag)" = 0 ]; do
		[ "$(t_now_ms)" -lt "$_w_end" ] || {
			tail -n 20 "$T_DLOG" >&2
			echo "the broker: $(r_alarms)" >&2
			t_fail "the publisher's lag is '$(pub_lag)' after $1 s"
		}
		sleep 0.1
	done
}

BOARD=$TALLY_BIN/tally-board
[ -x "$BOARD" ] || t_fail "$BOARD is missing (run make)"

t_say "RabbitMQ and PostgreSQL on loopback; a mesh; queues bound before anything is published"
r_start
t_pg_start
api PUT /exchanges/%2F/tally.events '{"type":"topic","durable":true}' >/dev/null ||
	t_fail "cannot declare the exchange"
api PUT /queues/%2F/watch '{"durable":true}' >/dev/null
api POST /bindings/%2F/e/tally.events/q/watch '{"routing_key":"#"}' >/dev/null ||
	t_fail "cannot bind the watch queue"
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
export TALLY_BOARD_AMQP_PASSWORD="$TALLY_TEST_AMQP_PASSWORD"
# The board's queue exists from the start: it will see everything.
"$BOARD" --amqp "$AMQP_URL" --user "$TALLY_TEST_AMQP_USER" --store "$W/board1" \
	--queue board1 --idle 0 --quiet || t_fail "tally-board could not declare its queue"

t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --exchange tally.events >/dev/null ||
	t_fail "tally publish configure failed"
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app)" >/dev/null
tly assign app node-a >/dev/null
t_tallyd_start --interval 1 --verify-interval 3600 -v
t_wait_healthy 30 app
t_wait_lag0 20
ENVF=$(t_envfile node-a app)
DBPW=$(t_envget "$ENVF" DB_PASSWORD)
ADMINPW=$(cat "$TALLY_TEST_PG_PWFILE")
[ ${#DBPW} -ge 16 ] || t_fail "no generated password in $ENVF"

t_check "tally publish status and tally stats show the publisher caught up"
tly publish status | grep -q "published up to seq $(head_seq), lag 0" ||
	t_fail "publish status: $(tly publish status)"
tly stats | grep -q "publisher .*lag 0" || t_fail "tally stats has no publisher with lag 0"
t_ok "lag 0 at event $(head_seq)"

t_check "the watch queue holds every event, in order, as tally tail --json prints it"
drain watch >"$W/watch.msgs"
H=$(head_seq)
[ "$(wc -l <"$W/watch.msgs")" -eq "$H" ] || t_fail "watch has $(wc -l <"$W/watch.msgs") messages for $H events"
[ "$(cut -d' ' -f1 "$W/watch.msgs" | tr '\n' ' ')" = "$(seq 1 "$H" | tr '\n' ' ')" ] ||
	t_fail "the seq headers are not 1..$H in order: $(cut -d' ' -f1 "$W/watch.msgs" | tr '\n' ' ')"
tly log --json | t_jfields seq id type >"$W/log.ids"
cut -d' ' -f1-3 "$W/watch.msgs" | cmp -s - "$W/log.ids" ||
	t_fail "message ids or routing keys differ from the events' ids and types"
tly tail --from 1 --json >"$W/tail.json"
cut -d' ' -f4 "$W/watch.msgs" | while read -r p; do printf '%s' "$p" | b64; echo; done >"$W/watch.json"
cmp -s "$W/watch.json" "$W/tail.json" || {
	diff "$W/watch.json" "$W/tail.json" | head -n 6 >&2
	t_fail "the message bodies are not the lines of tally tail --json"
}
t_ok "$H messages: ids, seq headers, routing keys and bodies as in the log"

t_check "the sealed delivery is on tally.node.node-a: the log's ciphertext, nothing else"
drain tally.node.node-a >"$W/node.msgs"
[ "$(wc -l <"$W/node.msgs")" -eq 1 ] || t_fail "tally.node.node-a has $(wc -l <"$W/node.msgs") messages, expected 1"
dseq=$(tly log --json --type credential.delivered | t_jfields seq)
did=$(tly log --json --type credential.delivered | t_jfields id)
read -r s id rk p ct <"$W/node.msgs"
[ "$ct" = application/octet-stream ] || t_fail "the node message's content type is $ct"
[ "$s $id" = "$dseq $did" ] || t_fail "node message '$s $id', credential.delivered is '$dseq $did'"
sealed=$(printf '%s' "$p" | b64 | hex)
[ ${#sealed} -gt 96 ] || t_fail "the node message is too short to be sealed values"
mdb_dump -s events "$TALLY_HOME/log" | tr -d ' \n' | grep -q "$sealed" ||
	t_fail "the node message is not the sealed ciphertext stored in the log"
t_ok "message $id = the sealed bytes of event $dseq"

t_check "no message on the broker contains a generated password"
: >"$W/bodies"
for f in "$W/watch.msgs" "$W/node.msgs"; do
	cut -d' ' -f4 "$f" | while read -r p; do printf '%s' "$p" | b64; echo; done >>"$W/bodies"
done
[ -s "$W/bodies" ] || t_fail "nothing to search"
for secret in "$DBPW" "$ADMINPW" "$TALLY_TEST_AMQP_PASSWORD:$DBPW"; do
	if grep -aF -- "$secret" "$W/bodies" >/dev/null; then
		t_fail "a message body contains a password"
	fi
	if grep -aF -- "$(printf '%s' "$secret" | hex)" "$W/bodies" >/dev/null; then
		t_fail "a message body contains a password in hex"
	fi
done
grep -q '"password":"<redacted>"' "$W/watch.json" || t_fail "no redacted password in the record"
t_ok "searched $(wc -c <"$W/bodies") bytes of $(($(wc -l <"$W/watch.msgs") + 1)) bodies"

t_check "an acknowledgement on tally.acks without proof is refused and counted, not recorded (issues 14, 21)"
H0=$(head_seq)
api POST /exchanges/%2F/amq.default/publish \
	'{"properties":{},"routing_key":"tally.acks","payload":"not json","payload_encoding":"string"}' |
	grep -q '"routed":true' || t_fail "cannot publish to tally.acks"
api POST /exchanges/%2F/amq.default/publish \
	'{"properties":{},"routing_key":"tally.acks","payload":"{\"node\":\"node-a\",\"module\":\"app\",\"grant\":\"app/db\",\"version\":1}","payload_encoding":"string"}' |
	grep -q '"routed":true' || t_fail "cannot publish to tally.acks"
t0=$(t_now_ms)
until tly status 2>/dev/null | grep -q 'refused input: 1 unsigned message(s) on tally.acks claiming node-a, .*no proof'; do
	[ $(($(t_now_ms) - t0)) -lt 10000 ] || { tail -n 5 "$T_DLOG" >&2; tly status >&2; t_fail "the unsigned acknowledgement was not counted within 10 s"; }
	sleep 0.1
done
tly status 2>/dev/null | grep -q 'refused input: 1 malformed message(s) on tally.acks' ||
	t_fail "the malformed message was not counted"
[ -z "$(tly log --json --type security.ack-refused)" ] && [ -z "$(tly log --json --type credential.ack-offered)" ] ||
	t_fail "an unauthenticated message was recorded"
[ -z "$(tly log --json --type credential.acknowledged)" ] ||
	t_fail "an acknowledgement without proof was recorded"
[ "$(head_seq)" = "$H0" ] || t_fail "$(($(head_seq) - H0)) event(s) appended for two unauthenticated messages"
grep -q "refused input on tally.acks" "$T_DLOG" || t_fail "the refusal was not logged"
t_ok "refused and counted in $(($(t_now_ms) - t0)) ms; nothing appended"

t_check "tally-board over AMQP: its own store, the expected counts in its HTML"
t_wait_lag0 20
"$BOARD" --amqp "$AMQP_URL" --user "$TALLY_TEST_AMQP_USER" --store "$W/board1" \
	--queue board1 --idle 1 --html "$W/board1.html" --quiet ||
	t_fail "tally-board --amqp failed"
for want in 'count-nodes">1<' 'count-modules">2<' 'count-assignments">2<' \
    'count-providers">1<' 'count-grants">1<' 'grants-provisioned">1<' \
    "id=\"pos\">$(head_seq)<" 'count-problems">0<'; do
	grep -q "$want" "$W/board1.html" || t_fail "board1.html lacks $want"
done
grep -q "<svg" "$W/board1.html" || t_fail "board1.html has no graph"
t_ok "nodes 1, modules 2, assignments 2, providers 1, grant provisioned 1, graph drawn"

t_check "--format msgpack: the same document in msgpack, secrets redacted; then back to JSON"
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --format msgpack >/dev/null ||
	t_fail "tally publish configure --format msgpack failed"
t_node node-m m.lan
t_wait_lag0 20
drain watch >"$W/mp.msgs"
tail -n 1 "$W/mp.msgs" >"$W/mp.last"
read -r s id rk p ct <"$W/mp.last"
[ "$rk $ct" = "node.added application/msgpack" ] || t_fail "the last message is '$rk $ct'"
[ "$(printf '%s' "$p" | b64 | head -c 1 | hex)" = 8a ] || t_fail "the body is not a 10-entry msgpack map"
printf '%s' "$p" | b64 | grep -aq "node-m" || t_fail "the msgpack body lacks the node's name"
grep ' publisher.configured [^ ]* application/msgpack$' "$W/mp.msgs" | cut -d' ' -f4 | b64 |
	grep -aq '<redacted>' || t_fail "the configuration's password is not redacted in msgpack"
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password >/dev/null
t_node node-j j.lan
t_wait_lag0 20
drain watch | tail -n 1 | grep -q ' node.added .* application/json$' || t_fail "not back to JSON"
t_expect_exit 2 "credentials in the URL" tly publish configure \
	--url "amqp://u:secret@127.0.0.1/" --user u
t_ok "msgpack map of 10, <redacted> inside; JSON again; a URL with credentials refused"

t_say "$N events in batches of $BATCH; the broker is killed and restarted in the middle"
# Batches of 500, but a big one in the middle (30% of the stream): the
# broker is killed shortly after it is appended, while the publisher is
# most likely still publishing it with confirms outstanding.  Five
# batches go in while the broker is down; then it comes back.
mkdir -p "$W/mods"
seq 1 "$N" | awk -v d="$W/mods" -v b="$BATCH" -v n="$N" '{
	q = int(n / 4); big = q + int(n * 3 / 10)
	if ($1 <= q) k = int(($1 - 1) / b)
	else if ($1 <= big) k = 100
	else k = 101 + int(($1 - big - 1) / b)
	dir = sprintf("%s/b%03d", d, k); f = sprintf("%s/m-%06d.yaml", dir, $1)
	if (!(dir in made)) { system("mkdir -p " dir); made[dir] = 1 }
	print "module: m-" sprintf("%06d", $1) > f; close(f) }'
H0=$(head_seq)
api PUT /queues/%2F/stream '{"durable":true}' >/dev/null
api POST /bindings/%2F/e/tally.events/q/stream '{"routing_key":"#"}' >/dev/null ||
	t_fail "cannot bind the stream queue"
# A board that joins late: built from the local log up to now, then
# following the exchange from there (docs/reporting.md).
"$BOARD" --store "$W/board2" --quiet || t_fail "tally-board (local) failed"
"$BOARD" --amqp "$AMQP_URL" --user "$TALLY_TEST_AMQP_USER" --store "$W/board2" \
	--queue board2 --follow --print >"$W/board2.out" 2>"$W/board2.err" &
BP=$!
_t_pids="$_t_pids $BP"
sleep 0.5
# While the broker is down: the publisher falls behind, tallyd goes on
# provisioning; then the broker comes back.
outage_end() {
	lag=$(pub_lag)
	[ "$lag" -ge "$BATCH" ] || t_fail "with the broker down the publisher's lag is $lag"
	tly apply "$(t_consumer late)" >/dev/null
	tly assign late node-a >/dev/null
	t_wait_healthy 30 late
	t_note "meanwhile tallyd provisioned late/db; publisher lag $(pub_lag)"
	r_restart
	t_note "broker back"
	down=-1
}
down=0
for d in "$W"/mods/b*; do
	tly apply "$d"/*.yaml >/dev/null || t_fail "tally apply $d failed"
	case "$d" in
	*/b100)
		sleep 0.03
		r_kill
		down=1
		t_note "broker killed right after the big batch (publisher at lag $(pub_lag))"
		;;
	esac
	if [ $down -ge 1 ]; then
		down=$((down + 1))
		[ $down -eq 7 ] && outage_end
	fi
	sleep 0.1
done
[ $down -ge 1 ] && outage_end
HN=$(head_seq)
t_wait_lag0 120
grep -q "publisher: .*retrying in" "$T_DLOG" || t_fail "tallyd did not report the broker's absence"
grep -q "publisher: connected to .* again" "$T_DLOG" || t_fail "tallyd did not report reconnecting"

t_check "the stream queue: every event from $((H0 + 1)) to $HN, new ones in order, duplicates only around the restart"
drain stream | cut -d' ' -f1,2 >"$W/stream.msgs"
tly log --json --from $((H0 + 1)) | t_jfields seq id >"$W/stream.log"
awk -v lo=$((H0 + 1)) -v hi="$HN" '
	NR == FNR { id[$1] = $2; next }
	{
		n++
		if (!($1 in id)) { print "unknown seq " $1; bad = 1; exit }
		if ($2 != id[$1]) { print "seq " $1 " came with id " $2 ", the event is " id[$1]; bad = 1; exit }
		if ($1 in seen) {
			dups++
			if (first_dup == 0) first_dup = n
			if (n != last_dup + 1 && last_dup != 0) runs++
			last_dup = n
			if (prevdup != 0 && $1 != prevdup + 1) { print "duplicates not one run at " $1; bad = 1; exit }
			prevdup = $1
			if (seen[$1] > 1) { print "seq " $1 " three times"; bad = 1; exit }
			seen[$1]++
			next
		}
		if ($1 != expect && expect != 0) { print "new seq " $1 " where " expect " was due"; bad = 1; exit }
		if (expect == 0 && $1 != lo) { print "first seq " $1 ", expected " lo; bad = 1; exit }
		seen[$1] = 1
		expect = $1 + 1
	}
	END {
		if (bad) exit 1
		if (expect != hi + 1) { print "last new seq " expect - 1 ", expected " hi; exit 1 }
		if (runs > 0) { print "duplicates in " runs + 1 " runs"; exit 1 }
		printf "%d messages, %d events, %d duplicate(s)", n, hi - lo + 1, dups
		if (dups) printf " (seqs %d..%d, deliveries %d..%d)", prevdup - dups + 1, prevdup, first_dup, last_dup
		print ""
	}' "$W/stream.log" "$W/stream.msgs" >"$W/stream.check" || {
	cat "$W/stream.check" >&2
	t_fail "the stream queue is not every event in order"
}
t_ok "$(cat "$W/stream.check")"

t_check "a tally-board following through the restart missed nothing"
t0=$(t_now_ms)
until [ "$(tail -n 1 "$W/board2.out" | cut -d' ' -f1)" = "$HN" ]; do
	[ $(($(t_now_ms) - t0)) -lt 30000 ] || t_fail "board2 stopped at $(tail -n 1 "$W/board2.out")"
	sleep 0.1
done
kill -TERM "$BP"
t_wait_exit "$BP" 10
[ "$T_RC" -eq 0 ] || t_fail "tally-board --follow exited $T_RC on SIGTERM"
grep -q ' gap$' "$W/board2.out" && t_fail "board2 saw a gap"
# Every event received at least once (a batch received but not yet
# committed when the broker died is received again: --print shows
# receipts), and the store holds each exactly once.
cut -d' ' -f1 "$W/board2.out" | sort -n -u >"$W/board2.seqs"
seq $((H0 + 1)) "$HN" | cmp -s - "$W/board2.seqs" || t_fail "board2 did not receive every event $((H0 + 1))..$HN"
grep -q reconnecting "$W/board2.err" || t_fail "board2 never had to reconnect"
"$BOARD" --store "$W/board2" --amqp "$AMQP_URL" --user "$TALLY_TEST_AMQP_USER" \
	--queue board2 --idle 0 --json >"$W/board2.json"
for want in "\"pos\":$HN" "\"applied\":$HN" '"gaps":0' "\"modules\":$((N + 3))"; do
	grep -q "$want" "$W/board2.json" || t_fail "board2's store lacks $want"
done
t_ok "$HN events in its store, each once, no gap; $(wc -l <"$W/board2.out") receipts, $(grep -c ' duplicate$' "$W/board2.out") redelivery(ies) skipped"

t_check "tally verify"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain sound"
t_tallyd_stop
