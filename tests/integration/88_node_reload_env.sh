#!/bin/sh
# A reload command inherits nothing (issue 21 item 4): in both --log and
# --amqp modes, with TALLY_NODE_AMQP_PASSWORD and another variable in the
# agent's environment, the reload command
#   - has only descriptors 0, 1 and 2 open (not the log's, not the
#     broker's socket, not what the agent itself inherited);
#   - gets exactly the documented environment: PATH, TALLY_MODULE,
#     TALLY_VERSION (the delivered version), TALLY_ENV_FILE and
#     CREDENTIALS_DIRECTORY (and the PWD its shell sets), nothing else;
#   - and the agent's own environment no longer holds the password
#     (read through /proc/PPID/environ by the reload command).
. "$(dirname "$0")/lib.sh"
R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

t_say "RabbitMQ, PostgreSQL; node-a holds game's grant, delivered on the log and the queue"
r_start
t_pg_start
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password >/dev/null ||
	t_fail "tally publish configure failed"
t_node node-a 127.0.0.1
t_provider node-a network
tly apply "$(t_consumer game shared)" >/dev/null
tly assign game node-a >/dev/null
t_tallyd_once

# The agents run with only PATH, the password and UNRELATED in their
# environment (the password, "guest", is also a user name elsewhere).
# The reload records what it got: its environment, the agent's (its
# parent's) environment, and last (a shell's own redirections done) its
# descriptors, by ls on the agent's stdout ($W/MODE.fd): ls's own, on
# /proc/PID/fd, is not counted.
reload() {
	echo "game=env >$W/$1.env; tr '\\0' '\\n' </proc/\$PPID/environ >$W/$1.agentenv; exec ls -l /proc/self/fd"
}
check() {	# MODE
	[ -s "$W/$1.env" ] || t_fail "$1: the reload did not run"
	fds=$(grep -v -- '-> /proc/[0-9]*/fd$' "$W/$1.fd" | sed -n 's/^[l-].* \([0-9][0-9]*\) -> .*/\1/p' | sort -n | tr '\n' ' ')
	[ "$fds" = "0 1 2 " ] || { cat "$W/$1.fd" >&2; t_fail "$1: the reload has descriptors $fds open"; }
	names=$(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' "$W/$1.env" | sort | tr '\n' ' ')
	[ "$names" = "CREDENTIALS_DIRECTORY PATH PWD TALLY_ENV_FILE TALLY_MODULE TALLY_VERSION " ] ||
		{ cat "$W/$1.env" >&2; t_fail "$1: the reload's environment is $names"; }
	grep -qx "TALLY_MODULE=game" "$W/$1.env" || t_fail "$1: TALLY_MODULE"
	grep -qx "TALLY_VERSION=1" "$W/$1.env" || t_fail "$1: TALLY_VERSION is not 1"
	grep -qx "TALLY_ENV_FILE=$W/$1/game.env" "$W/$1.env" || t_fail "$1: TALLY_ENV_FILE"
	grep -qx "CREDENTIALS_DIRECTORY=$W/$1/game" "$W/$1.env" || t_fail "$1: CREDENTIALS_DIRECTORY"
	grep -qx "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "$W/$1.env" ||
		t_fail "$1: PATH is $(grep '^PATH=' "$W/$1.env")"
	! grep -q "$TALLY_TEST_AMQP_PASSWORD" "$W/$1.env" "$W/$1.agentenv" ||
		t_fail "$1: the broker password is in the reload's or the agent's environment"
	! grep -q "TALLY_NODE_AMQP_PASSWORD" "$W/$1.agentenv" ||
		t_fail "$1: TALLY_NODE_AMQP_PASSWORD is still in the agent's environment"
	grep -q "^UNRELATED=kept$" "$W/$1.agentenv" || t_fail "$1: the agent's environment is not the one it was given"
	grep -q "^PATH=$PATH$" "$W/$1.agentenv" || t_fail "$1: the agent's PATH is not the one it was given"
}

t_check "--log: descriptors 0-2 only, the documented environment only"
env -i PATH="$PATH" TALLY_NODE_AMQP_PASSWORD="$TALLY_TEST_AMQP_PASSWORD" UNRELATED=kept \
	"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$W/log" \
	--state "$W/log.state" --log "$TALLY_HOME" --once --reload "$(reload log)" >"$W/log.fd" 2>>"$W/agent.log" ||
	{ cat "$W/agent.log" >&2; t_fail "tally-node --log --once failed"; }
check log
t_ok "--log: fds 0 1 2; PATH TALLY_MODULE TALLY_VERSION=1 TALLY_ENV_FILE CREDENTIALS_DIRECTORY"

t_check "--amqp (password in TALLY_NODE_AMQP_PASSWORD): the same"
env -i PATH="$PATH" TALLY_NODE_AMQP_PASSWORD="$TALLY_TEST_AMQP_PASSWORD" UNRELATED=kept \
	"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$W/amqp" \
	--state "$W/amqp.state" --amqp "$AMQP_URL" --amqp-user "$TALLY_TEST_AMQP_USER" \
	--once --reload "$(reload amqp)" >"$W/amqp.fd" 2>>"$W/agent.log" ||
	{ cat "$W/agent.log" >&2; t_fail "tally-node --amqp --once failed"; }
check amqp
t_ok "--amqp: fds 0 1 2; the documented environment; the password gone from the agent's"
