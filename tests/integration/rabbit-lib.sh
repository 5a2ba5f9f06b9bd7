# rabbit-lib.sh - a throwaway RabbitMQ for tests/integration/*.sh (POSIX
# sh; sourced after lib.sh):
#
#   . "$(dirname "$0")/lib.sh"
#   . "$(dirname "$0")/rabbit-lib.sh"
#   r_start
#
# r_start starts a broker under $R_DIR ($W/rmq unless set before) on a
# free block of 16 ports (PORT+14, PORT+15: its TLS listeners) and exports what tests/harness/rabbit.sh's env
# says (TALLY_TEST_AMQP_*), plus AMQP_URL; r_kill kills it as in a crash
# and r_restart brings the same broker back; api calls the management
# HTTP API.  The broker is stopped on exit, its logs kept in
# $W/rabbit-logs.  A broker that cannot start fails the script.

RMQSH=$TALLY_SRC/tests/harness/rabbit.sh
: "${R_DIR:=$W/rmq}"

_r_stop() {
	[ -d "$R_DIR" ] || { _r_unlock; return 0; }
	_r_r=$R_DIR
	[ -f "$R_DIR/realdir" ] && _r_r=$(cat "$R_DIR/realdir")
	mkdir -p "$W/rabbit-logs"
	cp "$_r_r"/log/*.log "$_r_r"/log/*.out "$W/rabbit-logs/" 2>/dev/null || true
	sh "$RMQSH" stop "$R_DIR" >/dev/null 2>&1 ||
		echo "WARNING $T_NAME: stopping RabbitMQ in $R_DIR failed" >&2
	_r_unlock
}
_r_unlock() {
	[ "${_r_locked:-no}" = yes ] || return 0
	rm -rf "$_r_lock"
	_r_locked=no
}
trap '_r_rc=$?; set +e; _r_stop; (exit $_r_rc); _t_cleanup' EXIT

_r_free() {	# PORT: are PORT..PORT+15 all free?
	_r_q=$1
	while [ "$_r_q" -lt $(($1 + 16)) ]; do
		_t_port_busy "$_r_q" && return 1
		_r_q=$((_r_q + 1))
	done
	return 0
}

# Scripts run side by side (run.sh), and so do their brokers, but they
# start and restart one at a time: two booting together failed to bind
# their distribution ports ("dist_port_already_used") even on blocks
# found free.  The lock is held for a boot only (the whole script once
# held it, which made every broker script wait for the others); it is a
# directory holding its owner's pid (a dead owner's is taken over), so
# no child of the script can keep it, and _r_stop gives it back.
_r_lock=$TALLY_TMP/.rabbit.lock
_r_locked=no
r_lock() {
	[ "$_r_locked" = yes ] && return 0
	_r_end=$(($(t_now_ms) + 900000))
	until mkdir "$_r_lock" 2>/dev/null; do
		_r_o=$(cat "$_r_lock/pid" 2>/dev/null || true)
		if [ -n "$_r_o" ] && ! kill -0 "$_r_o" 2>/dev/null; then
			rm -rf "$_r_lock"
			continue
		fi
		[ "$(t_now_ms)" -lt "$_r_end" ] ||
			t_fail "another script's broker held $_r_lock for 15 minutes"
		sleep 0.5
	done
	echo $$ >"$_r_lock/pid"
	_r_locked=yes
}

r_start() {
	r_lock
	# Above the ephemeral range (32768-60999 by default): a restart
	# must find its ports free again, and a client's outgoing socket
	# can take any port in that range while the broker is down.
	_r_p=$((61000 + ($$ % 40) * 20))
	_r_try=0
	while :; do
		while ! _r_free "$_r_p"; do _r_p=$((_r_p + 20)); done
		sh "$RMQSH" start "$R_DIR" "$_r_p" && break
		# A port taken meanwhile by a run of another directory:
		# the next block, at most three times; else the failure.
		_r_try=$((_r_try + 1))
		if [ $_r_try -ge 3 ] || ! grep -qs 'could not bind\|already in use\|already_used' \
		    "$R_DIR/start-failed.log"; then
			t_fail "RabbitMQ could not be started on $_r_p (see above)"
		fi
		t_note "RabbitMQ's ports from $_r_p were taken meanwhile: trying the next block"
		_r_p=$((_r_p + 20))
	done
	_r_unlock
	. "$R_DIR/env"
	R_REAL=$R_DIR
	[ -f "$R_DIR/realdir" ] && R_REAL=$(cat "$R_DIR/realdir")
	. "$R_REAL/etc/state"	# NODENAME PIDFILE EPMD_PORT
	AMQP_URL="amqp://127.0.0.1:$TALLY_TEST_AMQP_PORT/"
}

# The broker dies at once, as in a crash: SIGKILL to the VM.  The boot
# lock is held from here to r_restart, so no other script's broker boots
# on this one's ports while they are free.
r_kill() {
	r_lock
	_r_pid=$(tr -dc 0-9 <"$PIDFILE")
	[ -n "$_r_pid" ] || t_fail "no broker pid in $PIDFILE"
	kill -KILL "$_r_pid"
	_r_i=0
	while kill -0 "$_r_pid" 2>/dev/null &&
	    [ "$(sed 's/^.*) //' "/proc/$_r_pid/stat" 2>/dev/null | cut -c1)" != Z ]; do
		_r_i=$((_r_i + 1))
		[ $_r_i -lt 500 ] || t_fail "broker pid $_r_pid survived SIGKILL"
		sleep 0.01
	done
}

# The same broker again: same data, ports, epmd; as rabbit.sh starts it.
# A boot that fails is shown (its output and log tails) and tried once
# more: on a loaded CI machine one restart in many did not come back,
# and a second boot is what an operator's supervisor would do.
_r_boot() {
	rm -f "$PIDFILE"
	if [ "$(id -u)" -eq 0 ]; then
		(cd / && exec setsid runuser -u rabbitmq -- sh -c '. "$0"; exec rabbitmq-server' \
			"$R_REAL/etc/env.sh") </dev/null >>"$R_REAL/log/restart.out" 2>&1 &
	else
		(cd / && exec setsid sh -c '. "$0"; exec rabbitmq-server' \
			"$R_REAL/etc/env.sh") </dev/null >>"$R_REAL/log/restart.out" 2>&1 &
	fi
	_r_i=0
	until [ -s "$PIDFILE" ]; do
		_r_i=$((_r_i + 1))
		[ $_r_i -lt 600 ] || return 1
		sleep 0.1
	done
	sh "$RMQSH" ctl "$R_DIR" -q wait --timeout 90 "$PIDFILE" >>"$R_REAL/log/restart.out" 2>&1
}
_r_show() {
	echo "--- $T_NAME: the broker's restart output and log (tails)" >&2
	tail -n 20 "$R_REAL/log/restart.out" >&2 2>/dev/null || true
	for _r_f in "$R_REAL"/log/*.log; do
		[ -f "$_r_f" ] && { echo "--- $_r_f" >&2; tail -n 20 "$_r_f" >&2; }
	done
	echo "--- listeners on the broker's ports" >&2
	ss -Htanp 2>/dev/null | grep ":$((TALLY_TEST_AMQP_PORT))\b\|:$((TALLY_TEST_AMQP_PORT + 1))\b\|:$((TALLY_TEST_AMQP_PORT + 2))\b\|:$((TALLY_TEST_AMQP_PORT + 3))\b" >&2 || true
}
r_restart() {
	r_lock
	if ! _r_boot; then
		_r_show
		t_note "the broker did not come back at once: killing what is left and booting it again"
		[ -s "$PIDFILE" ] && kill -KILL "$(tr -dc 0-9 <"$PIDFILE")" 2>/dev/null || true
		sleep 2
		_r_boot || { _r_show; t_fail "the broker did not come back (twice; see above)"; }
	fi
	_r_unlock
	_r_i=0
	until api GET /overview >/dev/null 2>&1; do
		_r_i=$((_r_i + 1))
		[ $_r_i -lt 300 ] || t_fail "the management API did not come back"
		sleep 0.1
	done
}

# api METHOD PATH [JSON]: the management HTTP API.
# r_provider NODE: examples/rabbitmq.yaml applied and assigned to NODE
# on this broker, through its TLS listeners verified against the
# harness CA, as the broker's admin.
r_provider() {
	tly apply "$TALLY_SRC/examples/rabbitmq.yaml" >/dev/null ||
		t_fail "tally apply examples/rabbitmq.yaml failed"
	printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" >"$W/admin.pw"
	tly assign rabbitmq "$1" --expose network --set host=127.0.0.1 \
		--set port="$TALLY_TEST_AMQP_PORT" --set amqps-port="$TALLY_TEST_AMQP_TLS_PORT" \
		--set management-port="$TALLY_TEST_AMQP_MGMT_TLS_PORT" \
		--set tls=verify --set ca="$TALLY_TEST_CA" \
		--set admin-user="$TALLY_TEST_AMQP_USER" \
		--secret admin-password <"$W/admin.pw" >/dev/null ||
		t_fail "tally assign rabbitmq $1 failed"
}

api() {
	curl -fsS -u "$TALLY_TEST_AMQP_USER:$TALLY_TEST_AMQP_PASSWORD" -X "$1" \
		-H 'content-type: application/json' ${3:+-d "$3"} \
		"http://127.0.0.1:$TALLY_TEST_AMQP_MGMT_PORT/api$2"
}

# r_alarms: the broker's resource alarms and what they measure, one
# line, for a failure's message (a blocked broker confirms nothing).
r_alarms() {
	sh "$RMQSH" ctl "$R_DIR" -q eval '{alarms, rabbit_alarm:get_alarms(),
		disk_free, rabbit_disk_monitor:get_disk_free(), disk_limit,
		rabbit_disk_monitor:get_disk_free_limit(), mem_limit,
		vm_memory_monitor:get_memory_limit(), mem_used,
		erlang:memory(total)}.' 2>&1 | tr -s '\n\t ' ' '
}

# follow_start: tallyd --follow on the standby's home $FH, following
# $STREAM at $AMQP_URL (the password in $W/amqp.pw), into $T_DLOG; waits
# until it says it started (5 s), its pid in $FPID.
follow_start() {
	_f_lines=0
	[ -f "$T_DLOG" ] && _f_lines=$(wc -l <"$T_DLOG")
	"$TALLY_BIN/tallyd" --home "$FH" --follow --amqp "$AMQP_URL" --stream "$STREAM" \
		--user "$TALLY_TEST_AMQP_USER" --secret password <"$W/amqp.pw" 2>>"$T_DLOG" &
	FPID=$!
	_t_pids="$_t_pids $FPID"
	_f_i=0
	until tail -n +$((_f_lines + 1)) "$T_DLOG" | grep -q "tallyd\[$FPID\] info: started"; do
		kill -0 "$FPID" 2>/dev/null || { tail -n 5 "$T_DLOG" >&2; t_fail "tallyd --follow exited at start"; }
		_f_i=$((_f_i + 1))
		[ $_f_i -lt 500 ] || t_fail "tallyd --follow did not start within 5 s"
		sleep 0.01
	done
}

# leader_key: the leader's ($LH) public signing key, as tally publish
# status prints it: what tally init --standby --leader-key takes.
leader_key() {
	TALLY_HOME=$LH "$TALLY_BIN/tally" publish status --json |
		sed -n 's/.*"signing_key":"\([0-9a-f]*\)".*/\1/p'
}

# standby_promoted DIR: a standby of the leader $LH in DIR that followed
# its stream ($STREAM at $AMQP_URL, the password in $W/amqp.pw) to the
# leader's head, was given the master key out of band and promoted
# (tally promote --yes): what an operator does.  The leader's record is
# published first (tallyd --once on $LH).  $FH is DIR afterwards.
standby_promoted() {
	FH=$1
	"$TALLY_BIN/tallyd" --home "$LH" --once --once-timeout 60 2>>"$T_DLOG" ||
		t_fail "the leader's tallyd --once (publishing its record) failed"
	TALLY_HOME=$FH "$TALLY_BIN/tally" init --standby --leader-key "$(leader_key)" \
		>/dev/null || t_fail "tally init --standby failed"
	follow_start
	_s_i=0
	until [ "$(_s_head "$FH")" = "$(_s_head "$LH")" ]; do
		_s_i=$((_s_i + 1))
		[ $_s_i -lt 600 ] || t_fail "the standby did not reach the leader's head in 60 s"
		sleep 0.1
	done
	kill -TERM "$FPID"
	t_wait_exit "$FPID" 10
	cp "$LH/master.key" "$FH/master.key"
	chmod 600 "$FH/master.key"
	TALLY_HOME=$FH "$TALLY_BIN/tally" promote --yes >/dev/null ||
		t_fail "tally promote on the standby failed"
}
_s_head() {
	TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'
}
