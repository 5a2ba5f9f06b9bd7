#!/bin/sh
# The record and the node's deliveries over amqps, verified: tallyd
# publishes to the broker's TLS listener (tally publish configure
# amqps://localhost:TLSPORT --ca CA), tally-node reads its queue over
# amqps with --amqp-ca CA, delivers and acknowledges; an agent given
# another CA refuses the broker before it logs in (peer certificate
# verification failed) and writes nothing; a capture of the TLS port holds neither
# the broker password nor the delivered user's name, while the plaintext
# port's does (the positive control).
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"
command -v tcpdump >/dev/null || t_fail "tcpdump is not installed (tools/deps.sh installs it)"

wait_for() {	# SECONDS WHAT CMD...
	_e=$(($(t_now_ms) + $1 * 1000)); _what=$2; shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$(t_now_ms)" -lt "$_e" ] || {
			tail -n 20 "$T_DLOG" >&2; tail -n 5 "$W"/agent-*.log >&2
			t_fail "$_what: not within the time"; }
		sleep 0.1
	done
}


t_say "RabbitMQ with TLS listeners (harness CA), PostgreSQL; node-a's agent over amqps"
r_start
t_pg_start
[ -n "${TALLY_TEST_AMQP_TLS_PORT:-}" ] || t_fail "rabbit.sh exports no TALLY_TEST_AMQP_TLS_PORT"
TLS_URL="amqps://localhost:$TALLY_TEST_AMQP_TLS_PORT/"
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$TLS_URL" \
	--ca "$TALLY_TEST_CA" --user "$TALLY_TEST_AMQP_USER" --secret password \
	--exchange tally.events >/dev/null || t_fail "tally publish configure amqps failed"
t_node node-a 127.0.0.1
t_provider node-a
tly apply "$(t_consumer game shared)" >/dev/null
tly assign game node-a >/dev/null
t_capture "$W/tls.pcap" "$TALLY_TEST_AMQP_TLS_PORT"
t_tallyd_start --interval 1 --verify-interval 3600

agent() {	# NAME CA: node-a's agent over amqps, in the background
	"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" \
		--dir "$W/$1" --state "$W/$1.state" --amqp "$TLS_URL" \
		--amqp-ca "$2" --amqp-user "$TALLY_TEST_AMQP_USER" \
		--amqp-password-file "$W/amqp.pw" --reload "game=true" \
		2>>"$W/agent-$1.log" &
	_apid=$!
	_t_pids="$_t_pids $_apid"
}

t_check "an agent that trusts another CA: refuses the broker, writes nothing"
mkdir -p "$W/bad"
agent bad "$TALLY_TEST_CA_OTHER"
wait_for 30 "the agent's refusal" grep -qi "verif" "$W/agent-bad.log"
kill -TERM "$_apid" 2>/dev/null || true; wait "$_apid" 2>/dev/null || true
t_forget_pid "$_apid"
[ ! -f "$W/bad/game.env" ] || t_fail "an agent that could not verify the broker wrote game.env"
t_ok "$(grep -m1 -i verif "$W/agent-bad.log" | cut -c1-160)"

t_check "the agent with the right CA: delivered and acknowledged over amqps"
mkdir -p "$W/good"
agent good "$TALLY_TEST_CA"
wait_for 60 "game's values on node-a" grep -q "^DB_USER=" "$W/good/game.env"
wait_for 30 "the acknowledgement of v1" sh -c "\"$TALLY_BIN/tally\" log --json --type credential.acknowledged | grep -q game@node-a"
t_capture_end
user=$(t_envget "$W/good/game.env" DB_USER)
t_env_psql "$W/good/game.env" "SELECT 1" >/dev/null || t_fail "the delivered credential does not connect"
t_ok "$user delivered over amqps and acknowledged"

t_check "nothing of it in clear on the TLS port; the plaintext port is the positive control"
strings -n 6 "$W/tls.pcap" >"$W/tls.txt"
[ -s "$W/tls.pcap" ] || t_fail "the capture is empty"
! grep -q "$TALLY_TEST_AMQP_PASSWORD" "$W/tls.txt" || t_fail "the broker password crossed the wire in clear"
! grep -q "${user%_v*}" "$W/tls.txt" || t_fail "the delivered user's name crossed the wire in clear"
t_capture "$W/plain.pcap" "$TALLY_TEST_AMQP_PORT"
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --exchange tally.events \
	>/dev/null || t_fail "tally publish configure amqp failed"
tly apply "$(t_consumer game2 shared)" >/dev/null
tly assign game2 node-a >/dev/null
wait_for 60 "game2 published in clear" sh -c "strings -n 6 '$W/plain.pcap' | grep -q game2"
t_capture_end
strings -n 6 "$W/plain.pcap" | grep -q "game2" ||
	t_fail "the plaintext capture holds nothing of the record: the capture proves nothing"
t_ok "TLS capture $(wc -c <"$W/tls.pcap") bytes without the password or $user; the plaintext one names game2"
