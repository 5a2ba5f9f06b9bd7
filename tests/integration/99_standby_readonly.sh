#!/bin/sh
# A standby never writes (issue 22, item 6).  Real RabbitMQ and
# PostgreSQL; a leader publishing to the stream tally.record, a standby
# (tally init --standby) that has followed it to its head and holds the
# leader's master key (as docs/standby.md tells the operator to copy it).
# On the standby's home every writing command (apply, assign, rotate,
# remove, node add, bind, check, repair, publish configure and rewind,
# bootstrap) exits 7,
# names the leader it follows (the stream and the broker URL) and says
# `tally promote`, and appends nothing (same head, same events table);
# status and verify work there.  After tally promote, apply works.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
STREAM=tally.record
LH=$TALLY_HOME
FH=$W/standby

head_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
events_dump() { mdb_dump -s events "$1/log" >"$W/dump.tmp" && sed '1,/^HEADER=END/d; /^DATA=END/d' "$W/dump.tmp"; }
fly() { TALLY_HOME=$FH "$TALLY_BIN/tally" "$@"; }
t_say "RabbitMQ, PostgreSQL; a leader publishing to $STREAM, a standby following it"
r_start
t_pg_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app)" >/dev/null || t_fail "apply app"
tly assign app node-a >/dev/null || t_fail "assign app"
TALLY_HOME=$FH tly init --standby >/dev/null || t_fail "tally init --standby failed"
cp "$LH/master.key" "$FH/master.key"; chmod 600 "$FH/master.key"
follow_start
t_tallyd_start --interval 1 --verify-interval 3600
t_wait_healthy 60 app
_i=0
until [ "$(head_of "$FH")" = "$(head_of "$LH")" ]; do
	_i=$((_i + 1)); [ $_i -lt 600 ] || t_fail "the standby is at $(head_of "$FH"), the leader at $(head_of "$LH")"
	sleep 0.1
done
t_tallyd_stop
kill -TERM "$FPID"; t_wait_exit "$FPID" 10
H=$(head_of "$FH")
events_dump "$FH" >"$W/before.dump"
t_ok "the standby holds the leader's $H events"

# refused WHAT CMD...: on the standby, exit 7, the leader named, nothing appended.
refused() {
	_what=$1; shift
	t_check "$_what on the standby"
	t_expect_exit 7 "$_what on the standby" env TALLY_HOME="$FH" "$@"
	grep -q "standby" "$W/last.err" && grep -q "stream $STREAM" "$W/last.err" &&
		grep -q "$AMQP_URL" "$W/last.err" && grep -q "tally promote" "$W/last.err" ||
		t_fail "$_what: the refusal does not name the leader ($STREAM at $AMQP_URL) and tally promote: $(cat "$W/last.err")"
	[ "$(head_of "$FH")" = "$H" ] || t_fail "$_what appended on the standby (head $(head_of "$FH"), was $H)"
	events_dump "$FH" >"$W/after.dump"
	cmp -s "$W/before.dump" "$W/after.dump" || t_fail "$_what changed the standby's events table"
	t_ok "exit 7, head $H: $(head -n 1 "$W/last.err" | cut -c1-150)"
}
T=$TALLY_BIN/tally
refused "tally apply" "$T" apply "$(t_consumer other)"
refused "tally assign" "$T" assign app node-b
refused "tally rotate" "$T" rotate app/db
refused "tally remove" "$T" remove app --yes
refused "tally node add" "$T" node add node-b --routable-name 127.0.0.2 --key-out "$W/keys/node-b.key"
[ ! -e "$W/keys/node-b.key" ] || t_fail "tally node add on the standby wrote a node key"
refused "tally bind" "$T" bind app/db node-a/postgres
refused "tally check" "$T" check
refused "tally repair" "$T" repair app/db
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" >"$W/pw.in"
refused "tally publish configure" sh -c "\"$T\" publish configure --url \"$AMQP_URL\" --user u --secret password --stream s2 <\"$W/pw.in\""
refused "tally publish rewind" "$T" publish rewind 1
mkdir -p "$W/bundle"
cp "$TALLY_SRC/examples/postgres.yaml" "$W/bundle/postgres.yaml"
cat >"$W/bundle/bundle.yaml" <<EOF
node:
  name: cp
  routable-name: 127.0.0.1
  key-out: $W/keys/cp.key
providers:
  - manifest: postgres.yaml
    module: postgres
    expose: local
    settings:
      port: "$TALLY_TEST_PG_PORT"
      admin-user: $TALLY_TEST_PG_USER
    secrets:
      admin-password: {file: $TALLY_TEST_PG_PWFILE}
EOF
refused "tally bootstrap" "$T" bootstrap "$W/bundle/bundle.yaml"
[ ! -e "$W/keys/cp.key" ] || t_fail "tally bootstrap on the standby wrote a node key"

t_check "reading commands work on the standby"
st=0; fly status >"$W/fstatus.out" 2>&1 || st=$?
[ $st -eq 0 ] || [ $st -eq 6 ] || t_fail "tally status on the standby exited $st: $(cat "$W/fstatus.out")"
grep -q "standby" "$W/fstatus.out" && grep -q "$STREAM" "$W/fstatus.out" ||
	t_fail "tally status on the standby does not say whom it follows: $(cat "$W/fstatus.out")"
fly verify >"$W/fverify.out" 2>&1 || t_fail "tally verify on the standby: $(cat "$W/fverify.out")"
fly graph >/dev/null || t_fail "tally graph on the standby"
fly history app >/dev/null || t_fail "tally history on the standby"
fly grants >/dev/null || t_fail "tally grants on the standby"
fly explain app >/dev/null || t_fail "tally explain on the standby"
t_ok "status ($(grep standby "$W/fstatus.out" | head -n 1 | cut -c1-120)), verify, graph, history, grants, explain"

t_check "after tally promote the home writes"
fly promote --yes >/dev/null || t_fail "tally promote on the standby failed"
fly apply "$(t_consumer other)" >/dev/null || t_fail "tally apply after the promotion failed"
[ "$(head_of "$FH")" -gt $((H + 1)) ] || t_fail "nothing appended after the promotion"
t_ok "promoted and applied: head $(head_of "$FH")"

t_say "done"
