# lib.sh - shared helpers for tests/integration/*.sh (POSIX sh; sourced).
#
#   . "$(dirname "$0")/lib.sh"
#
# Environment (set by `make integration`; defaults for running a script
# by hand from the repository): TALLY_BIN (directory of tally and
# tallyd), TALLY_SRC (repository root), TALLY_TMP (scratch directory).
#
# Every script gets a fresh work directory $W ($TALLY_TMP/it-NAME), its
# own tally home ($TALLY_HOME=$W/home) and, through t_pg_start, its own
# throwaway PostgreSQL on a free port.  On exit, success or not, every
# tallyd the script started (by pid) and every server are stopped; $W
# is deleted on success and kept (with the server log) on failure.  A
# server that cannot start fails the script: nothing is ever skipped.
#
# Assertions print what they check and exit 1 on the first failure with
# a message saying what was expected and what was found.
set -eu

: "${TALLY_SRC:=$(cd "$(dirname "$0")/../.." && pwd -P)}"
: "${TALLY_BIN:=$TALLY_SRC/build/bin}"
: "${TALLY_TMP:=$TALLY_SRC/build/tmp}"
export TALLY_SRC TALLY_BIN TALLY_TMP

T_NAME=$(basename "$0" .sh)
mkdir -p "$TALLY_TMP"
W=$(cd "$TALLY_TMP" && pwd -P)/it-$T_NAME
T_PGSH=$TALLY_SRC/tests/harness/pg.sh

for _t_b in tally tallyd; do
	[ -x "$TALLY_BIN/$_t_b" ] || {
		echo "FAIL $T_NAME: $TALLY_BIN/$_t_b is missing (run make)" >&2
		exit 1
	}
done
command -v psql >/dev/null 2>&1 || {
	echo "FAIL $T_NAME: psql is missing (tools/deps.sh installs postgresql)" >&2
	exit 1
}

# --- reporting ----------------------------------------------------------

t_say() { printf '\n== %s: %s\n' "$T_NAME" "$*"; }
t_check() { printf '  check: %s\n' "$*"; }
t_ok() { printf '    ok: %s\n' "$*"; }
t_note() { printf '    note: %s\n' "$*"; }
t_fail() {
	printf 'FAIL %s: %s\n' "$T_NAME" "$*" >&2
	exit 1
}

# --- cleanup ------------------------------------------------------------

_t_pids=""	# tallyd processes this script started and has not reaped
_t_blport=""	# the port of t_board_follow's board
_t_pgs=""	# PostgreSQL directories this script started
_t_redises=""	# Redis directories this script started (t_redis_start)
_t_mariadbs=""	# MariaDB directories this script started (t_mariadb_start)
_t_cephs=""	# Ceph directories this script started (t_ceph_start)
_t_oidcs=""	# OIDC provider directories this script started (t_oidc_start)
_t_etcds=""	# etcd cluster directories this script started (t_etcd_start)
_t_proms=""	# Prometheus directories this script started (t_prometheus_start)
_t_atexit=""	# commands t_atexit registered, run first at exit, last first

# t_atexit CMD: CMD (a shell command line) runs when the script ends,
# whatever its end, before the servers stop; the last registered first.
t_atexit() { _t_atexit="$1
$_t_atexit"; }

t_forget_pid() {
	_t_new=""
	for _t_p in $_t_pids; do
		[ "$_t_p" = "$1" ] || _t_new="$_t_new $_t_p"
	done
	_t_pids=$_t_new
}

_t_cleanup() {
	_t_rc=$?
	trap - EXIT INT TERM
	set +e
	[ -z "$_t_atexit" ] || eval "$_t_atexit"
	for _t_p in $_t_pids; do
		kill -KILL "$_t_p" 2>/dev/null
		wait "$_t_p" 2>/dev/null
	done
	for _t_d in $_t_pgs; do
		_t_r=$_t_d
		[ -f "$_t_d/realdir" ] && _t_r=$(cat "$_t_d/realdir")
		if [ "$_t_rc" -ne 0 ] && [ -f "$_t_r/log/server.log" ]; then
			cp "$_t_r/log/server.log" \
				"$W/postgresql-$(basename "$_t_d").log" 2>/dev/null
		fi
		sh "$T_PGSH" stop "$_t_d" >/dev/null 2>&1 ||
			echo "WARNING $T_NAME: stopping PostgreSQL in $_t_d failed" >&2
	done
	for _t_d in $_t_mariadbs; do
		sh "$TALLY_SRC/tests/harness/mariadb.sh" stop "$_t_d" >/dev/null 2>&1 ||
			echo "WARNING $T_NAME: stopping MariaDB in $_t_d failed" >&2
	done
	for _t_d in $_t_redises; do
		[ "$_t_rc" -ne 0 ] && cp "$_t_d/log" "$W/redis-$(basename "$_t_d").log" 2>/dev/null
		sh "$TALLY_SRC/tests/harness/redis.sh" stop "$_t_d" >/dev/null 2>&1 ||
			echo "WARNING $T_NAME: stopping Redis in $_t_d failed" >&2
	done
	for _t_d in $_t_cephs; do
		[ "$_t_rc" -ne 0 ] && cp "$_t_d/log/client.rgw.a.log" "$W/rgw-$(basename "$_t_d").log" 2>/dev/null
		sh "$TALLY_SRC/tests/harness/ceph.sh" stop "$_t_d" >/dev/null 2>&1 ||
			echo "WARNING $T_NAME: stopping Ceph in $_t_d failed" >&2
	done
	for _t_d in $_t_oidcs; do
		sh "$TALLY_SRC/tests/harness/oidc.sh" stop "$_t_d" >/dev/null 2>&1 ||
			echo "WARNING $T_NAME: stopping the OIDC provider in $_t_d failed" >&2
	done
	for _t_d in $_t_etcds; do
		if [ "$_t_rc" -ne 0 ]; then
			for _t_k in 1 2 3; do
				cp "$_t_d/n$_t_k.log" \
					"$W/etcd-$(basename "$_t_d")-n$_t_k.log" 2>/dev/null
			done
		fi
		sh "$TALLY_SRC/tests/harness/etcd.sh" stop "$_t_d" >/dev/null 2>&1 ||
			echo "WARNING $T_NAME: stopping etcd in $_t_d failed" >&2
	done
	for _t_d in $_t_proms; do
		[ "$_t_rc" -ne 0 ] && cp "$_t_d/prometheus.log" "$W/prometheus.log" 2>/dev/null
		sh "$TALLY_SRC/tests/harness/prometheus.sh" stop "$_t_d" >/dev/null 2>&1
	done
	if [ "$_t_rc" -eq 0 ]; then
		rm -rf "$W"
		printf '\nPASS %s\n' "$T_NAME"
	else
		printf '\nFAIL %s (exit %s); work directory kept: %s\n' \
			"$T_NAME" "$_t_rc" "$W" >&2
	fi
	exit "$_t_rc"
}
trap _t_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A fresh work directory; a previous run's servers there are stopped.
if [ -d "$W" ]; then
	for _t_d in "$W"/pg*; do
		[ -d "$_t_d" ] && sh "$T_PGSH" stop "$_t_d" >/dev/null 2>&1
	done
	for _t_d in "$W"/redis*; do
		[ -d "$_t_d" ] && sh "$TALLY_SRC/tests/harness/redis.sh" stop "$_t_d" >/dev/null 2>&1
	done
	for _t_d in "$W"/etcd*; do
		[ -d "$_t_d" ] && sh "$TALLY_SRC/tests/harness/etcd.sh" stop "$_t_d" >/dev/null 2>&1
	done
	rm -rf "$W"
fi
mkdir -p "$W"

# One throwaway CA for every server of the run (each also offers TLS:
# tests/harness/ca.sh, which makes what is missing under a lock and keeps
# what exists, so scripts running side by side share it); a server's env
# file names it in TALLY_TEST_CA.
: "${TALLY_TEST_TLS_DIR:=$TALLY_TMP/ca}"
export TALLY_TEST_TLS_DIR
# The suites' PostgreSQL servers run without fsync (tests/harness/pg.sh):
# a test kills processes, never the machine, so nothing is lost, and
# every CREATE DATABASE's checkpoint stops waiting for the disk.
: "${TALLY_TEST_PG_FSYNC:=off}"
# ...and are copies of one cluster made once per run (no initdb each).
: "${TALLY_TEST_PG_TEMPLATE:=$TALLY_TMP/pg-template}"
export TALLY_TEST_PG_FSYNC TALLY_TEST_PG_TEMPLATE

# --- time ---------------------------------------------------------------

t_now_ms() { echo $(($(date +%s%N) / 1000000)); }
t_now_ns() { date +%s%N; }

# RFC 3339 (as tally log --json prints it) -> nanoseconds since the epoch.
t_ts_ns() {
	_t_s=$(date -u -d "$(printf '%s' "$1" | sed 's/\.[0-9]*Z$/Z/')" +%s) ||
		t_fail "cannot parse timestamp '$1'"
	_t_f=$(printf '%s' "$1" | sed -n 's/.*\.\([0-9]*\)Z$/\1/p')
	_t_f=$(printf '%s000000000' "$_t_f" | cut -c1-9 | sed 's/^0*//')
	echo $((_t_s * 1000000000 + ${_t_f:-0}))
}

# --- PostgreSQL ---------------------------------------------------------

# Busy: a listener, or a client's socket on that port (an ephemeral port is
# one too, and bind fails on it), not a dead server's closing sockets.
_t_port_busy() {
	if command -v ss >/dev/null 2>&1; then
		[ -n "$(ss -Htn state listening state established state syn-sent state close-wait "sport = :$1" 2>/dev/null)" ]
	else
		timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
	fi
}

# t_pg_start [NAME]: a throwaway server in $W/NAME (default pg) on the
# first free port from a base that depends on the script; exports
# TALLY_TEST_PG_* (see tests/harness/pg.sh) and PG_DIR.
t_pg_start() {
	PG_DIR=$W/${1:-pg}
	# The script's number without leading zeros: $((08)) is an error (octal).
	_t_n=$(printf '%s' "$T_NAME" | sed -n 's/^0*\([0-9][0-9]*\).*/\1/p')
	_t_port=$((56100 + ${_t_n:-0} * 10 + $$ % 7))
	_t_tries=0
	while :; do
		while _t_port_busy "$_t_port"; do _t_port=$((_t_port + 1)); done
		_t_pgs="$_t_pgs $PG_DIR"
		if sh "$T_PGSH" start "$PG_DIR" "$_t_port"; then
			break
		fi
		_t_tries=$((_t_tries + 1))
		# Only a port taken between the check and the start is
		# worth another try; anything else fails the test.
		if [ $_t_tries -ge 3 ] || { ! _t_port_busy "$_t_port" &&
		    ! grep -qs 'Address already in use' \
		    "$PG_DIR/start-failed.log" "$PG_DIR/log/server.log"; }; then
			t_fail "PostgreSQL could not be started in $PG_DIR (port $_t_port): see above"
		fi
		_t_port=$((_t_port + 1))
	done
	. "$PG_DIR/env"
	export PG_DIR PGCONNECT_TIMEOUT=5
}

# t_redis_start [NAME]: a throwaway Redis 7 with ACLs in $W/NAME (default
# redis) on a free port (tests/harness/redis.sh), stopped at exit; exports
# TALLY_TEST_REDIS_* and REDIS_DIR.
t_redis_start() {
	REDIS_DIR=$W/${1:-redis}
	_t_n=$(printf '%s' "$T_NAME" | sed -n 's/^0*\([0-9][0-9]*\).*/\1/p')
	_t_port=$((57100 + ${_t_n:-0} * 10 + $$ % 7))
	_t_tries=0
	while :; do
		while _t_port_busy "$_t_port"; do _t_port=$((_t_port + 1)); done
		_t_redises="$_t_redises $REDIS_DIR"
		_t_rc=0
		sh "$TALLY_SRC/tests/harness/redis.sh" start "$REDIS_DIR" "$_t_port" || _t_rc=$?
		[ $_t_rc -eq 0 ] && break
		_t_tries=$((_t_tries + 1))
		# Only a port taken between the look and the bind (exit 4, or
		# still busy) is worth another try.
		[ $_t_tries -lt 3 ] && { [ $_t_rc -eq 4 ] || _t_port_busy "$_t_port"; } ||
			t_fail "Redis could not be started in $REDIS_DIR (port $_t_port): see above"
		_t_port=$((_t_port + 1))
	done
	. "$REDIS_DIR/env"
	export REDIS_DIR
}

# t_mariadb_start [NAME]: a throwaway MariaDB in $W/NAME (default mariadb)
# on a free port (tests/harness/mariadb.sh), stopped at exit; exports
# TALLY_TEST_MARIADB_* and MDB.  A port taken between the look and the
# bind: the next one, five times at most.
t_mariadb_start() {
	MDB=$W/${1:-mariadb}
	_t_n=$(printf '%s' "$T_NAME" | sed -n 's/^0*\([0-9][0-9]*\).*/\1/p')
	_t_port=$((57300 + ${_t_n:-0} % 50 * 20 + $$ % 17))
	_t_tries=0
	_t_mariadbs="$_t_mariadbs $MDB"
	until { while _t_port_busy "$_t_port"; do _t_port=$((_t_port + 1)); done
		sh "$TALLY_SRC/tests/harness/mariadb.sh" start "$MDB" "$_t_port" \
		    2>>"$W/mariadb.start"; }; do
		_t_tries=$((_t_tries + 1))
		[ $_t_tries -lt 5 ] || t_fail "no MariaDB: $(tail -n 5 "$W/mariadb.start")"
		_t_port=$((_t_port + 1))
	done
	. "$MDB/env"
	export MDB
}

# t_ceph_start [NAME]: a throwaway single-node Ceph RGW in $W/NAME (default
# ceph) on free ports (tests/harness/ceph.sh: PORT..PORT+6, and PORT+7 for
# radosgw's TLS endpoint), stopped at exit; exports TALLY_TEST_RGW_* and
# CEPH_DIR.
t_ceph_start() {
	CEPH_DIR=$W/${1:-ceph}
	_t_n=$(printf '%s' "$T_NAME" | sed -n 's/^0*\([0-9][0-9]*\).*/\1/p')
	# A block of 96 ports per script number: the block's 8-port steps
	# (ceph.sh takes PORT..PORT+7) never reach another script's, and
	# below the ephemeral range (32768-), where no client's connection
	# takes them.  (Blocks of 20 let 21_ceph and 22_bucket_names, started
	# together, land 4 apart and fail each other on every try.)
	_t_port=$((12000 + ${_t_n:-0} % 100 * 96 + $$ % 7 * 8))
	_t_tries=0
	while :; do
		while _t_port_busy "$_t_port" || _t_port_busy $((_t_port + 1)) ||
		    _t_port_busy $((_t_port + 2)) || _t_port_busy $((_t_port + 7)); do
			_t_port=$((_t_port + 8))
		done
		_t_cephs="$_t_cephs $CEPH_DIR"
		sh "$TALLY_SRC/tests/harness/ceph.sh" start "$CEPH_DIR" "$_t_port" && break
		_t_tries=$((_t_tries + 1))
		[ $_t_tries -lt 3 ] ||
			t_fail "Ceph RGW could not be started in $CEPH_DIR (port $_t_port): see above"
		_t_port=$((_t_port + 8))
	done
	. "$CEPH_DIR/env"
	export CEPH_DIR
}

# t_oidc_start [NAME]: a throwaway OpenID Connect provider in $W/NAME
# (default oidc) on a free port (tests/harness/oidc.sh), stopped at exit;
# exports TALLY_TEST_OIDC_*, OIDC_DIR and ISS (its issuer).
t_oidc_start() {
	OIDC_DIR=$W/${1:-oidc}
	command -v node >/dev/null 2>&1 || t_fail "node is missing (tools/deps.sh)"
	_t_n=$(printf '%s' "$T_NAME" | sed -n 's/^0*\([0-9][0-9]*\).*/\1/p')
	_t_oidc_port=$((56100 + ${_t_n:-0} * 10 + $$ % 7))
	_t_oidcs="$_t_oidcs $OIDC_DIR"
	_t_tries=0
	while :; do
		while _t_port_busy "$_t_oidc_port"; do _t_oidc_port=$((_t_oidc_port + 1)); done
		_t_rc=0
		sh "$TALLY_SRC/tests/harness/oidc.sh" start "$OIDC_DIR" "$_t_oidc_port" || _t_rc=$?
		[ $_t_rc -eq 0 ] && break
		_t_tries=$((_t_tries + 1))
		# Only its port taken before the listen (exit 4) is retried.
		[ $_t_rc -eq 4 ] && [ $_t_tries -lt 3 ] ||
			t_fail "the OIDC provider did not start (tests/harness/oidc.sh)"
		_t_oidc_port=$((_t_oidc_port + 1))
	done
	. "$OIDC_DIR/env"
	ISS=$TALLY_TEST_OIDC_ISSUER
	export OIDC_DIR ISS
}

# t_etcd_start [NAME]: a throwaway three-member etcd 3.4 cluster, TLS
# with client certificates, in $W/NAME (default etcd) on free ports
# (tests/harness/etcd.sh: client ports PORT..PORT+2, peer ports
# PORT+10..PORT+12), stopped at exit (its members' logs kept in $W when
# the script fails); exports TALLY_TEST_ETCD_* (ENDPOINTS, CA, CERT, KEY,
# DIR) and ETCD_DIR.  Members are killed and restarted with
# `sh "$TALLY_SRC/tests/harness/etcd.sh" kill|restart "$ETCD_DIR" K`.
_t_etcd_busy() {
	for _t_o in 0 1 2 10 11 12; do
		_t_port_busy $(($1 + _t_o)) && return 0
	done
	return 1
}
t_etcd_start() {
	ETCD_DIR=$W/${1:-etcd}
	command -v etcd >/dev/null 2>&1 ||
		t_fail "etcd is missing (tools/deps.sh installs etcd-server)"
	# By the whole name (the cluster scripts share their number, 99), and
	# below the ephemeral range (32768-): a member killed and restarted
	# must find its ports still free, not taken by a client's connection.
	_t_n=$(printf '%s' "$T_NAME" | cksum | cut -d' ' -f1)
	_t_port=$((26000 + _t_n % 290 * 20 + $$ % 7))
	_t_etcds="$_t_etcds $ETCD_DIR"
	_t_tries=0
	while :; do
		while _t_etcd_busy "$_t_port"; do _t_port=$((_t_port + 13)); done
		_t_rc=0
		sh "$TALLY_SRC/tests/harness/etcd.sh" start "$ETCD_DIR" "$_t_port" || _t_rc=$?
		[ $_t_rc -eq 0 ] && break
		_t_tries=$((_t_tries + 1))
		# Only a port taken between the look and the bind (exit 4) is
		# retried; a cluster that does not come up fails the script.
		[ $_t_rc -eq 4 ] && [ $_t_tries -lt 3 ] ||
			t_fail "etcd could not be started in $ETCD_DIR (ports $_t_port..): see above"
		_t_port=$((_t_port + 13))
	done
	. "$ETCD_DIR/env"
	export ETCD_DIR
}

# t_oidc_edit CLIENT_ID PYTHON: runs PYTHON on the OIDC provider's store
# while it is stopped (st: the store, c: the client's record), then starts
# it again on its port.
t_oidc_edit() {
	sh "$TALLY_SRC/tests/harness/oidc.sh" stop "$OIDC_DIR" keep
	python3 - "$OIDC_DIR/store.json" "$1" "$2" <<'EOF'
import json, sys
path, cid, code = sys.argv[1:4]
st = json.load(open(path))
c = st["Client:" + cid]["p"]
exec(code)
json.dump(st, open(path, "w"))
EOF
	sh "$TALLY_SRC/tests/harness/oidc.sh" start "$OIDC_DIR" "$_t_oidc_port" ||
		t_fail "the OIDC provider did not restart"
}

# pg_ctl as the server's user (pg.sh runs the server as postgres when
# we are root), from / so that it is not left in an unreadable cwd.
_t_pgctl() {
	_t_r=$PG_DIR
	[ -f "$PG_DIR/realdir" ] && _t_r=$(cat "$PG_DIR/realdir")
	if [ "$(id -u)" -eq 0 ]; then
		(cd / && runuser -u postgres -- "$(_t_pgbin)/pg_ctl" -D "$_t_r/data" "$@")
	else
		(cd / && "$(_t_pgbin)/pg_ctl" -D "$_t_r/data" "$@")
	fi
}

_t_pgbin() {
	if [ -n "${PG_BINDIR:-}" ]; then echo "$PG_BINDIR"; return; fi
	if [ -x /usr/lib/postgresql/15/bin/pg_ctl ]; then
		echo /usr/lib/postgresql/15/bin; return
	fi
	ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n | tail -n 1
}

# Stops the server, keeping its data (for t_pg_restart_server).
t_pg_stop_server() {
	_t_pgctl -m fast -w -t 60 -s stop >/dev/null 2>&1 ||
		t_fail "cannot stop PostgreSQL in $PG_DIR"
}

# The same server again, on the same port and data.
t_pg_restart_server() {
	_t_r=$PG_DIR
	[ -f "$PG_DIR/realdir" ] && _t_r=$(cat "$PG_DIR/realdir")
	_t_pgctl -l "$_t_r/log/server.log" -w -t 60 -s start >/dev/null 2>&1 ||
		t_fail "PostgreSQL in $PG_DIR did not start again"
}

# t_sql SQL: runs SQL as the admin over the unix socket (trusted); prints
# unaligned rows, one per line, fields separated by '|'.
t_sql() {
	psql -X -At -q -v ON_ERROR_STOP=1 -h "$TALLY_TEST_PG_SOCK" \
		-p "$TALLY_TEST_PG_PORT" -U "$TALLY_TEST_PG_USER" -d postgres \
		-c "$1"
}

# --- env files ----------------------------------------------------------

# t_envget FILE KEY: the value of KEY in a delivered env file (never
# sourced: the file is data).
t_envget() {
	_t_envfresh "$1"
	_t_envread "$1" "$2"
}

# _t_envread FILE KEY: t_envget without the refresh (a caller that read
# several values of one refresh: one snapshot, one tally env).
_t_envread() {
	[ -f "$1" ] || t_fail "env file $1 does not exist"
	sed -n "s/^$2=//p" "$1" | tail -n 1
}

# t_env_psql FILE [DB] SQL: connects with the credential in FILE, over
# TCP to DB_HOST:DB_PORT as DB_USER, to DB (default DB_NAME); prints
# the rows.  Fails (non-zero) when the connection or the query fails.
t_env_psql() {
	_t_f=$1
	_t_envfresh "$_t_f"
	if [ $# -eq 3 ]; then _t_db=$2; _t_q=$3; else
		_t_db=$(_t_envread "$_t_f" DB_NAME); _t_q=$2
	fi
	PGPASSWORD=$(_t_envread "$_t_f" DB_PASSWORD) psql -X -At -q \
		-v ON_ERROR_STOP=1 -h "$(_t_envread "$_t_f" DB_HOST)" \
		-p "$(_t_envread "$_t_f" DB_PORT)" -U "$(_t_envread "$_t_f" DB_USER)" \
		-d "$_t_db" -c "$_t_q"
}

# --- tally --------------------------------------------------------------

export TALLY_HOME="$W/home"

tly() { "$TALLY_BIN/tally" "$@"; }

# t_expect_exit N WHAT CMD...: runs CMD, output to $W/last.out/.err,
# fails unless it exits N.
t_expect_exit() {
	_t_want=$1 _t_what=$2
	shift 2
	set +e
	"$@" >"$W/last.out" 2>"$W/last.err"
	_t_got=$?
	set -e
	if [ "$_t_got" -ne "$_t_want" ]; then
		echo "--- stdout:" >&2; cat "$W/last.out" >&2
		echo "--- stderr:" >&2; cat "$W/last.err" >&2
		t_fail "$_t_what: expected exit $_t_want, got $_t_got ($*)"
	fi
}

# t_init: a fresh tally home.
t_init() {
	tly init >/dev/null || t_fail "tally init failed"
}

# t_nodekey NAME: where t_node wrote node NAME's secret keys (outside
# the tally home, as a node's host would keep them).
t_nodekey() { echo "$W/keys/$1.key"; }

# t_node NAME ROUTABLE
t_node() {
	mkdir -p "$W/keys"
	tly node add "$1" --routable-name "$2" --key-out "$(t_nodekey "$1")" \
		>/dev/null || t_fail "tally node add $1 failed"
}

# t_provider NODE [EXPOSE]: the postgres provider module on NODE, with
# this script's server's admin credential (the password on stdin).
t_provider() {
	tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null ||
		t_fail "tally apply examples/postgres.yaml failed"
	tly assign postgres "$1" --expose "${2:-local}" \
		--set port="$TALLY_TEST_PG_PORT" \
		--set admin-user="$TALLY_TEST_PG_USER" \
		--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
		t_fail "tally assign postgres $1 failed"
}

# t_dir_consumer NAME: a module NAME with one directory requirement
# "files" from download (examples/download.yaml), mapped to FILES; its
# manifest is written under $W/manifests and its path printed.
t_dir_consumer() {
	mkdir -p "$W/manifests"
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {FILES: ""}
requires:
  files:
    type: directory
    from: download
    env: {path: FILES}
EOF
	echo "$W/manifests/$1.yaml"
}

# t_consumer NAME [SCOPE [RESOURCE]]: writes $W/manifests/NAME.yaml, a
# module with one postgres-database requirement "db" mapped to
# DB_HOST DB_PORT DB_NAME DB_USER DB_PASSWORD; prints the path.
t_consumer() {
	mkdir -p "$W/manifests"
	_t_m=$W/manifests/$1.yaml
	{
		echo "module: $1"
		echo "env: {DB_HOST: \"\", DB_PORT: \"\", DB_NAME: \"\", DB_USER: \"\", DB_PASSWORD: \"\"}"
		echo "requires:"
		echo "  db:"
		echo "    type: postgres-database"
		echo "    from: postgres"
		echo "    scope: ${2:-shared}"
		[ -n "${3:-}" ] && echo "    name: $3"
		echo "    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}"
	} >"$_t_m"
	echo "$_t_m"
}

# t_envfile NODE MODULE: MODULE's environment on NODE as the node sees
# it, opened from the sealed deliveries with the node's key (tally env:
# the control plane keeps no plaintext, and tally env acknowledges
# nothing), into $W/env/NODE/MODULE.env (0600; removed when nothing is
# delivered); prints the path.  t_envget and t_env_psql refresh such a
# file before reading it; a script that reads it otherwise calls
# t_envfile again.  Where a holder takes part (acks), see t_agent.
t_envfile() {
	_t_ef=$W/env/$1/$2.env
	mkdir -p "$W/env/$1"
	chmod 700 "$W/env" "$W/env/$1"
	# A temporary file of its own: a poller in the background may be
	# refreshing the same file at the same time.
	_t_et=$(mktemp "$W/env/$1/.$2.XXXXXX")
	# The files the deliveries carry (a provider's CA) beside it, so that
	# a value that names one holds its real path.
	( umask 077; "$TALLY_BIN/tally" env "$1" "$2" --node-key "$(t_nodekey "$1")" \
		--files "$W/env/$1/files" >"$_t_et" 2>/dev/null ) || true
	if [ -s "$_t_et" ]; then mv -f "$_t_et" "$_t_ef"
	else rm -f "$_t_et" "$_t_ef"; fi
	echo "$_t_ef"
}

# _t_envfresh FILE: refreshes FILE when it is a t_envfile path.
_t_envfresh() {
	case $1 in
	"$W"/env/*/*.env)
		_t_r=${1#"$W"/env/}
		t_envfile "${_t_r%%/*}" "$(basename "$_t_r" .env)" >/dev/null ;;
	esac
}

# t_agent NODE [ARGS]: the node's agent, once, following the log
# (tally-node --log --once): writes $W/agent-NODE/MODULE.env and
# acknowledges what it delivered (ARGS: --reload MODULE=CMD ...).
t_agent() {
	_t_an=$1
	shift
	"$TALLY_BIN/tally-node" --node "$_t_an" --key "$(t_nodekey "$_t_an")" \
		--dir "$W/agent-$_t_an" --state "$W/agent-$_t_an.state" --log "$TALLY_HOME" --once "$@" \
		2>>"$W/agent-$_t_an.log" || {
		tail -n 5 "$W/agent-$_t_an.log" >&2
		t_fail "tally-node --node $_t_an --once failed"
	}
}

# t_envvars FILE VAR...: each VAR from FILE's NAME=VALUE lines, as an
# agent writes MODULE.env (not shell: a value may hold & or ;), "" when
# absent.
t_envvars() {
	_t_ef=$1
	shift
	for _t_v in "$@"; do
		eval "$_t_v=\$(sed -n 's/^$_t_v=//p' \"\$_t_ef\")"
	done
}

# t_settle NODE: tallyd --once and NODE's agent in turn until a grant
# whose key is made on the node is provisioned, signed, written and
# acknowledged (three passes of tallyd, two of the agent).
t_settle() {
	t_tallyd_once
	t_agent "$1"
	t_tallyd_once
	t_agent "$1"
	t_tallyd_once
}

# t_mesh_ca_harness [ARG...]: the mesh CA module, assigned on node-a
# (exposed to the network) with the harness CA's pair, the CA the test
# servers' certificates chain to and their ssl CA files name: an
# organisation's CA, as a mesh may sit under one; ARGs go to tally
# assign (--set lifetime=60s ...).
t_mesh_ca_harness() {
	tly apply "$TALLY_SRC/examples/mesh-ca.yaml" >/dev/null ||
		t_fail "apply examples/mesh-ca.yaml failed"
	tly assign mesh-ca node-a --expose network --set ca-cert="$TALLY_TEST_CA" \
		"$@" --secret ca-key <"$(dirname "$TALLY_TEST_CA")/ca.key" >/dev/null ||
		t_fail "assign mesh-ca with the harness CA failed"
}

# t_grec GRANT FIELD: what GRANT's first intent (grant.provisioning)
# recorded as FIELD: resource, owner, user (its names on the provider;
# the only way to learn a keyed name, scheme 3: drivers/naming.c).
t_grec() {
	tly log --json --stream "grant/$1" --type grant.provisioning |
		head -n 1 | t_jstr "$2"
}

# t_gname GRANT READABLE [SUFFIX]: the provider name tally gives a new
# grant GRANT (MODULE/REQ, or MODULE/REQ@NODE per instance) of the home
# $TALLY_HOME whose readable part is READABLE (its resource name, or
# RESOURCE-NODE per instance), when the whole fits in 63 bytes
# (reactors/names.c, drivers/naming.c): READABLE, "_", 16 hex digits of
# BLAKE2b-128 of GRANT keyed by the home's mesh id (scheme 4: its 16
# bytes, then 16 zero bytes; unkeyed, scheme 2, in a home without an
# id), then SUFFIX ("_v1": its first login).  Not for a driver with
# keyed names (ceph-rgw): t_grec reads those.
t_gname() {
	_t_mesh=$("$TALLY_BIN/tally" mesh --json 2>/dev/null |
		sed -n 's/.*"mesh":"\([0-9a-f]\{32\}\)".*/\1/p')
	if [ -n "$_t_mesh" ]; then
		_t_dg=$(python3 -c 'import hashlib, sys
k = bytes.fromhex(sys.argv[2]) + bytes(16)
print(hashlib.blake2b(sys.argv[1].encode(), digest_size=16, key=k).hexdigest()[:16])' "$1" "$_t_mesh") ||
			t_fail "t_gname: cannot compute the digest (python3)"
	else
		_t_dg=$(printf '%s' "$1" | b2sum -l 128 | cut -c1-16)
	fi
	printf '%s_%s%s' "$2" "$_t_dg" "${3:-}"
}

# --- tallyd -------------------------------------------------------------

T_DLOG=$W/tallyd.log	# every tallyd's stderr, appended

# t_tallyd_once [ARGS]: tallyd --once; fails unless it exits 0.
t_tallyd_once() {
	"$TALLY_BIN/tallyd" --once --once-timeout 120 "$@" 2>>"$T_DLOG" || {
		tail -n 20 "$T_DLOG" >&2
		t_fail "tallyd --once $* did not finish cleanly"
	}
}

# t_tallyd_try: tallyd --once that may fail; its exit code in $T_RC, its
# stderr in $W/once.err (and appended to $T_DLOG).
t_tallyd_try() {
	set +e
	timeout 120 "$TALLY_BIN/tallyd" --once --once-timeout 30 2>"$W/once.err"
	T_RC=$?
	set -e
	cat "$W/once.err" >>"$T_DLOG"
}

# t_tallyd_start [ARGS]: tallyd as a daemon in the background; sets
# T_DPID and waits until it has announced itself.
t_tallyd_start() {
	_t_lines=0
	[ -f "$T_DLOG" ] && _t_lines=$(wc -l <"$T_DLOG")
	"$TALLY_BIN/tallyd" "$@" 2>>"$T_DLOG" &
	T_DPID=$!
	_t_pids="$_t_pids $T_DPID"
	_t_i=0
	while ! tail -n +$((_t_lines + 1)) "$T_DLOG" 2>/dev/null |
	    grep -q "tallyd\[$T_DPID\] info: started"; do
		kill -0 "$T_DPID" 2>/dev/null || {
			tail -n 5 "$T_DLOG" >&2
			t_fail "tallyd $* exited at start"
		}
		_t_i=$((_t_i + 1))
		[ $_t_i -lt 500 ] || t_fail "tallyd $* did not start within 5 s"
		sleep 0.01
	done
}

# t_wait_exit PID SECONDS: waits for PID to end; sets T_RC to its status.
t_wait_exit() {
	_t_i=0
	while kill -0 "$1" 2>/dev/null &&
	    [ "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" != Z ]; do
		_t_i=$((_t_i + 1))
		[ $_t_i -lt $(($2 * 100)) ] ||
			t_fail "process $1 still running after $2 s"
		sleep 0.01
	done
	set +e
	wait "$1" 2>/dev/null
	T_RC=$?
	set -e
	t_forget_pid "$1"
}

# t_adopt_again_refused GRANT OTHER ARGS...: after tally adopt GRANT
# ARGS recorded its claim, tally adopt of GRANT again and of OTHER (a
# grant of a declared requirement of the same type) with the same ARGS
# are refused (exit 4, the second naming GRANT), appending nothing;
# standard input from $W/adopt.in when it exists (--secret-stdin).
t_adopt_again_refused() {
	_ta_g=$1 _ta_o=$2
	shift 2
	_ta_in=/dev/null
	[ -f "$W/adopt.in" ] && _ta_in=$W/adopt.in
	_ta_before=$(t_head_seq)
	t_expect_exit 4 "a second adopt of $_ta_g" \
		sh -c 'b=$0 in=$1; shift; "$b" adopt "$@" <"$in"' "$TALLY_BIN/tally" "$_ta_in" "$_ta_g" "$@"
	t_expect_exit 4 "$_ta_o adopting what $_ta_g adopts" \
		sh -c 'b=$0 in=$1; shift; "$b" adopt "$@" <"$in"' "$TALLY_BIN/tally" "$_ta_in" "$_ta_o" "$@"
	grep -q "adopted by grant $_ta_g" "$W/last.err" ||
		t_fail "no word of $_ta_g: $(cat "$W/last.err")"
	[ "$(t_head_seq)" = "$_ta_before" ] || t_fail "a refused adopt appended events"
}

# t_reload_agent NODE MODULE: NODE's agent (tally-node, its files under
# $W/agent) whose reload of MODULE is a request a test's consumer loop
# answers between two uses of its credential, as a service's reload
# returns once it runs on the new values: the agent writes
# $W/reload.req and waits (10 s at most) for $W/reload.done, so it
# acknowledges only then, and no use is in flight on the old credential
# when it is retired.  Each reload appends a line to $W/reloads.  Sets
# AGENT (stopped at exit).
t_reload_agent() {
	"$TALLY_BIN/tally-node" --node "$1" --key "$(t_nodekey "$1")" \
		--dir "$W/agent" --state "$W/agent.state" --log "$TALLY_HOME" \
		--reload "$2=echo reloaded >>$W/reloads; : >$W/reload.req; i=0; while [ ! -f $W/reload.done ] && [ \$i -lt 200 ]; do sleep 0.05; i=\$((i + 1)); done" \
		2>>"$W/agent.log" &
	AGENT=$!
	_t_pids="$_t_pids $AGENT"
}

# t_reloaded_once: t_reload_agent's agent reloaded its module once.
t_reloaded_once() {
	[ "$(grep -c reloaded "$W/reloads" 2>/dev/null)" = 1 ] ||
		t_fail "the agent reloaded the consumer $(grep -c reloaded "$W/reloads" 2>/dev/null) time(s)"
}

# t_consumer_done PID: a second more of a consumer loop (PID, running
# until $W/poll.stop appears), then it and t_reload_agent's agent
# stopped; a failure it recorded ($W/poll.fail, a line each) fails the
# script.
t_consumer_done() {
	sleep 1
	touch "$W/poll.stop"
	t_wait_exit "$1" 15
	kill "$AGENT" 2>/dev/null || true
	t_wait_exit "$AGENT" 10
	if [ -s "$W/poll.fail" ]; then
		cat "$W/poll.fail" >&2
		t_fail "the consumer failed $(wc -l <"$W/poll.fail") time(s) through the adoption"
	fi
}

# t_tallyd_stop: SIGTERM, and the daemon must exit 0 within 10 s.
t_tallyd_stop() {
	kill -TERM "$T_DPID" 2>/dev/null || true
	t_wait_exit "$T_DPID" 10
	[ "$T_RC" -eq 0 ] || t_fail "tallyd (pid $T_DPID) exited $T_RC on SIGTERM"
}

# t_wait_for SECONDS WHAT CMD...: runs CMD every 0.1 s until it succeeds;
# fails the script (with tallyd's and the agents' last lines) naming
# WHAT when SECONDS pass first.
t_wait_for() {
	_tw_e=$(($(t_now_ms) + $1 * 1000)); _tw_what=$2; shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$(t_now_ms)" -lt "$_tw_e" ] || {
			tail -n 20 "$T_DLOG" >&2; tail -n 5 "$W"/agent-*.log >&2 2>/dev/null
			t_fail "$_tw_what: not within the time"; }
		sleep 0.1
	done
}

# t_wait_healthy SECONDS [MODULE]: polls tally status until it exits 0.
t_wait_healthy() {
	_t_end=$(($(t_now_ms) + $1 * 1000))
	while :; do
		if tly status ${2:-} >"$W/status.out" 2>&1; then return 0; fi
		if [ "$(t_now_ms)" -gt "$_t_end" ]; then
			cat "$W/status.out" >&2
			tail -n 20 "$T_DLOG" >&2 2>/dev/null || true
			t_fail "not healthy after $1 s (tally status above)"
		fi
		sleep 0.1
	done
}

# t_grant_wait SECONDS GRANT TYPE [GREP]: until grant/GRANT has an event
# of TYPE (whose JSON line matches GREP); prints that line; fails after
# SECONDS with tallyd's last lines.
t_grant_wait() {
	_w_end=$(($(t_now_ms) + $1 * 1000))
	while :; do
		_w_l=$(tly log --json --stream "grant/$2" --type "$3" |
			grep -e "${4:-.}" | head -n 1) || true
		if [ -n "$_w_l" ]; then
			printf '%s\n' "$_w_l"
			return 0
		fi
		if [ "$(t_now_ms)" -gt "$_w_end" ]; then
			tail -n 20 "$T_DLOG" >&2
			t_fail "no $3 ${4:+matching '$4' }on grant/$2 within $1 s"
		fi
		sleep 0.1
	done
}

# t_head_seq: the sequence number of the log's last event.
t_head_seq() { tly log --json | tail -n 1 | t_jfields seq; }

# --- JSON lines (tally log --json) without a JSON tool ------------------

# t_jstr KEY: from each line on stdin that has it, the first (leftmost:
# the envelope's, before the body's) "KEY":"VALUE" string.  Only for
# values without quotes or backslashes (names, states, times).
t_jstr() {
	awk -v k="$1" '{
		kl = length(k)
		if (match($0, "\"" k "\":\"[^\"\\\\]*\""))
			print substr($0, RSTART + kl + 4, RLENGTH - kl - 5)
	}'
}

# t_jfields KEY...: from each line on stdin, the first value of each KEY
# (a string without quotes, or a number), separated by spaces ("" when
# absent: the columns then shift, so only ask for keys every line has).
t_jfields() {
	awk -v keys="$*" 'BEGIN { n = split(keys, k, " ") }
	{
		out = ""
		for (i = 1; i <= n; i++) {
			v = ""
			kl = length(k[i])
			if (match($0, "\"" k[i] "\":\"[^\"]*\""))
				v = substr($0, RSTART + kl + 4, RLENGTH - kl - 5)
			else if (match($0, "\"" k[i] "\":[0-9]+"))
				v = substr($0, RSTART + kl + 3, RLENGTH - kl - 3)
			out = out (i > 1 ? " " : "") v
		}
		print out
	}'
}

# t_rand N: a random number in 0..N-1.
t_rand() {
	echo $(($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % $1))
}

# --- captures of the loopback traffic (TLS tests) ---------------------------

# t_capture FILE PORT: tcpdump on lo for PORT into FILE, in the background,
# once it is live; t_capture_end stops it; t_captured FILE counts the
# packets it holds.  --immediate-mode: without it libpcap hands packets
# over a block at a time (a second's timeout), and a capture stopped sooner
# holds none of a short exchange; the filter is attached a moment after
# "listening on" is said.
t_capture() {
	command -v tcpdump >/dev/null ||
		t_fail "tcpdump is not installed (tools/deps.sh installs it)"
	tcpdump -i lo --immediate-mode -U -s 0 -w "$1" "tcp port $2" >"$1.log" 2>&1 &
	_t_cap=$!
	_t_capf=$1
	_t_pids="$_t_pids $_t_cap"
	# tcpdump says "listening on" once the capture is live.
	for _t_i in $(seq 1 50); do
		if grep -q "listening on" "$1.log" 2>/dev/null; then
			sleep 0.5
			return 0
		fi
		sleep 0.1
	done
	t_fail "tcpdump did not start: $(cat "$1.log")"
}
t_captured() { tcpdump -nr "$1" 2>/dev/null | wc -l; }
# t_capture_end: once the file has stopped growing for a second (a loaded
# machine runs tcpdump late; at most 10 s), tcpdump ends.
t_capture_end() {
	_t_prev=-1 _t_same=0
	for _t_i in $(seq 1 20); do
		sleep 0.5
		_t_sz=$(wc -c <"$_t_capf")
		if [ "$_t_sz" = "$_t_prev" ]; then
			_t_same=$((_t_same + 1))
			[ $_t_same -lt 2 ] || break
		else
			_t_same=0
		fi
		_t_prev=$_t_sz
	done
	kill "$_t_cap" 2>/dev/null || true
	wait "$_t_cap" 2>/dev/null || true
	t_forget_pid "$_t_cap"
}

# --- an impostor server (TLS tests) ------------------------------------------

# _t_listening PORT PID: whether process PID listens on PORT (not another
# that took the port first).
_t_listening() {
	ss -Htlnp "sport = :$1" 2>/dev/null | grep -q "pid=$2,"
}

# t_s_server OUT CERT KEY [OPTION...]: openssl s_server presenting CERT on
# a loopback port the kernel chose ($T_SRV_PORT, pid $T_SRV_PID), its
# output in OUT.  A port free when chosen can be taken before s_server
# binds it (suites run in parallel, and a closing connection holds its
# port), so a server that dies of EADDRINUSE is started again on another.
t_s_server() {
	_t_so=$1 _t_sc=$2 _t_sk=$3
	shift 3
	_t_try=0
	while :; do
		T_SRV_PORT=$(t_free_port)
		openssl s_server -accept "127.0.0.1:$T_SRV_PORT" -cert "$_t_sc" \
			-key "$_t_sk" "$@" </dev/null >"$_t_so" 2>&1 &
		T_SRV_PID=$!
		_t_pids="$_t_pids $T_SRV_PID"
		_t_i=0
		while ! _t_listening "$T_SRV_PORT" "$T_SRV_PID" && kill -0 "$T_SRV_PID" 2>/dev/null; do
			_t_i=$((_t_i + 1))
			[ $_t_i -lt 200 ] || { cat "$_t_so" >&2; t_fail "openssl s_server did not listen on $T_SRV_PORT"; }
			sleep 0.05
		done
		kill -0 "$T_SRV_PID" 2>/dev/null && return 0
		wait "$T_SRV_PID" 2>/dev/null || true
		t_forget_pid "$T_SRV_PID"
		_t_try=$((_t_try + 1))
		grep -q "Address already in use" "$_t_so" && [ $_t_try -lt 10 ] ||
			{ cat "$_t_so" >&2; t_fail "openssl s_server did not listen"; }
	done
}


# t_impostor CERT KEY: openssl s_server presenting CERT on a free loopback
# port ($T_IMP_PORT), in the background, writing what it receives and its
# handshake errors to $W/impostor.out: a server a client trusting the
# harness CA must refuse (the other CA's certificate, or the right CA's for
# another host) before it sends anything (-msg: the handshake's messages
# are written too).  t_impostor_seen: whether a client reached it (a
# ClientHello).  t_impostor_end stops it.
t_impostor() {
	t_s_server "$W/impostor.out" "$1" "$2" -quiet -msg
	T_IMP_PORT=$T_SRV_PORT
	_t_imp=$T_SRV_PID
}
t_impostor_seen() { grep -q "ClientHello" "$W/impostor.out"; }
t_impostor_end() {
	kill "$_t_imp" 2>/dev/null || true
	wait "$_t_imp" 2>/dev/null || true
	t_forget_pid "$_t_imp"
}

# t_board_follow [SOURCE...]: a tally-board that follows this home's log
# (or SOURCE: --record URL ...) from now on (--serve, its own store
# $W/board-live), with TALLY_BOARD_CHECK=1: it keeps each module's state
# and asks again only the modules a change can reach, and checks that
# against asking every module, dying on a difference.  t_board_agrees
# then compares it too.
t_board_follow() {
	_t_blport=$(t_free_port)
	[ $# -gt 0 ] || set -- --home "$TALLY_HOME"
	TALLY_BOARD_CHECK=1 "$TALLY_BIN/tally-board" "$@" \
		--store "$W/board-live" --serve "127.0.0.1:$_t_blport" --quiet \
		>"$W/board-live.log" 2>&1 &
	_t_blpid=$!
	_t_pids="$_t_pids $_t_blpid"
	t_wait_for 30 "the following board's page" \
		curl -fsS --max-time 2 -o /dev/null "http://127.0.0.1:$_t_blport/"
}

# t_board_agrees LABEL: tally-board (catching up in $W/board-agree, the
# same store each time) and tally status --json say the same of every
# module, assignment and requirement (state, reason, grant, provider,
# rotation, ...), at one head of the log (taken again if tallyd appended
# in between); so does the following board of t_board_follow when one
# runs (its /view.json once at that head; it is alive and has found no
# difference between its kept states and status's).  Left out: what the
# verifier observed beside the log, not in the record (last_verified,
# checks, old_sessions).  Prints the count of requirements compared.
t_board_agrees() {
	_t_try=0
	while :; do
		_t_h1=$(tly log --json | tail -n 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
		"$TALLY_BIN/tally-board" --home "$TALLY_HOME" --store "$W/board-agree" \
			--json --quiet >"$W/board-agree.json" 2>"$W/board-agree.err" ||
			t_fail "$1: tally-board failed: $(cat "$W/board-agree.err")"
		tly status --json >"$W/status-agree.json" 2>/dev/null || true
		_t_h2=$(tly log --json | tail -n 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
		if [ "$_t_h1" = "$_t_h2" ] && [ -n "$_t_blport" ]; then
			_t_i=0
			while :; do
				curl -fsS --max-time 15 "http://127.0.0.1:$_t_blport/view.json" \
					>"$W/board-live.json" 2>/dev/null &&
					[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["meta"]["pos"])' \
						"$W/board-live.json" 2>/dev/null)" = "$_t_h1" ] && break
				kill -0 "$_t_blpid" 2>/dev/null ||
					t_fail "$1: the following board died: $(tail -n 5 "$W/board-live.log")"
				_t_i=$((_t_i + 1))
				[ $_t_i -lt 50 ] || break
				sleep 0.2
			done
			_t_h2=$(tly log --json | tail -n 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])')
		fi
		[ "$_t_h1" != "$_t_h2" ] || break
		_t_try=$((_t_try + 1))
		[ $_t_try -lt 20 ] || t_fail "$1: the log never stood still for a comparison"
		sleep 0.2
	done
	if [ -n "$_t_blport" ]; then
		! grep -E 'differs|kept states' "$W/board-live.log" >&2 ||
			t_fail "$1: the following board's kept states differ from status's"
		_t_live=$W/board-live.json
	else
		_t_live=
	fi
	python3 - "$1" "$_t_h1" "$W/status-agree.json" "$W/board-agree.json" $_t_live <<'PY' || t_fail "$1: the board and tally status disagree (above)"
import json, sys
label, head = sys.argv[1], int(sys.argv[2])
status = json.load(open(sys.argv[3]))
OPS = ("last_verified", "checks", "old_sessions")
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items() if k not in OPS}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x
s = clean(status.get("modules"))
for path in sys.argv[4:]:
    board = json.load(open(path))
    who = "the following board" if "live" in path else "the board"
    if board["meta"]["pos"] != head:
        sys.exit("%s: %s is at %s, the log at %s" % (label, who, board["meta"]["pos"], head))
    # Questions from the record: the same on both (the same code).
    sh, bh = status.get("attention", {}).get("removals_held"), board.get("attention", {}).get("removals_held")
    if sh != bh:
        sys.exit("%s: removals held: %s %s, tally status %s" % (label, who, bh, sh))
    b = clean(board.get("status", {}).get("modules"))
    if b != s:
        bm = {m["module"]: m for m in b or []}
        for m in s or []:
            if bm.get(m["module"]) != m:
                print("%s: module %s\n  %s:  %s\n  status: %s" % (label, m["module"], who,
                      json.dumps(bm.get(m["module"]), sort_keys=True)[:800],
                      json.dumps(m, sort_keys=True)[:800]), file=sys.stderr)
                break
        sys.exit(1)
n = sum(len(a.get("requirements", [])) for m in s for a in m.get("assignments", []))
print(n)
PY
}

t_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# t_prometheus_start TARGET...: Debian's Prometheus scraping TARGETs
# (HOST:PORT) every second; sets T_PROM_DIR and T_PROM_PORT.
t_prometheus_start() {
	T_PROM_DIR=$W/prometheus
	T_PROM_PORT=$(t_free_port)
	_t_proms="$_t_proms $T_PROM_DIR"
	sh "$TALLY_SRC/tests/harness/prometheus.sh" start "$T_PROM_DIR" \
		"$T_PROM_PORT" "$@" || t_fail "Prometheus did not start"
}

# t_prom_query PROMQL: the query's result ("LABELS VALUE" lines).
t_prom_query() {
	sh "$TALLY_SRC/tests/harness/prometheus.sh" query "$T_PROM_DIR" \
		"$T_PROM_PORT" "$1"
}
