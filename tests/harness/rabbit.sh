#!/bin/sh
# A throwaway RabbitMQ broker for tests, on loopback only.
#
# Usage:
#   rabbit.sh start DIR PORT     start a broker, wait until it is ready,
#                                write DIR/env
#   rabbit.sh stop DIR           stop the broker and its epmd, delete
#                                everything (idempotent)
#   rabbit.sh status DIR         exit 0 if running, 3 if not
#   rabbit.sh ctl DIR ARGS...    run rabbitmqctl ARGS against that broker
#
# Ports, all on 127.0.0.1, in one block so a single free range is enough:
#   PORT      AMQP
#   PORT+1    management HTTP API
#   PORT+2    Erlang distribution (the broker node)
#   PORT+3    epmd (a private one, not the system's 4369)
#   PORT+4..PORT+13  Erlang distribution of the rabbitmqctl CLI
#   PORT+14   AMQP over TLS (amqps)
#   PORT+15   management HTTP API over TLS (https)
# (The usual "+10000/+20000" offsets overflow 65535 for ports above 45535.)
# The TLS listeners are in addition to the plaintext ones, with a
# certificate of the harness CA (tests/harness/ca.sh; subjectAltName
# localhost, 127.0.0.1).  Both listeners ask for a client certificate
# and verify what they are given against the harness CA (verify_peer)
# but let in a client that gives none (fail_if_no_peer_cert false):
# ca.sh's client.pem is let in, client-other.pem (another CA) refused in
# the handshake, and every client without a certificate works as
# before.  AMQP takes the EXTERNAL mechanism besides PLAIN (the
# rabbitmq_auth_mechanism_ssl plugin, the user the certificate's CN):
# what a login by certificate needs of a broker.
#
# DIR/env (sourceable) exports TALLY_TEST_AMQP_HOST, TALLY_TEST_AMQP_PORT,
# TALLY_TEST_AMQP_USER, TALLY_TEST_AMQP_PASSWORD, TALLY_TEST_AMQP_MGMT_PORT,
# TALLY_TEST_AMQP_TLS_PORT, TALLY_TEST_AMQP_MGMT_TLS_PORT, TALLY_TEST_AMQP_CA,
# and what ca.sh's env says (TALLY_TEST_CA = _CA: the CA that signed the
# broker's certificate; TALLY_TEST_CA_OTHER, _IMPOSTOR_*, _WRONGHOST_*). The
# CA is made in $TALLY_TEST_TLS_DIR when that is set (shared, kept by stop),
# else in DIR/tls (deleted by stop).
# guest/guest works because the broker is only reachable over loopback.
#
# stop kills the VM outright (its data is deleted anyway); set
# TALLY_TEST_AMQP_GRACEFUL_STOP=1 for a "rabbitmqctl stop" instead (~8 s).
set -eu

me=rabbit.sh
here=$(cd "$(dirname "$0")" && pwd -P)
die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }

usage() {
    cat >&2 <<EOF
usage: $me start DIR PORT
       $me stop DIR
       $me status DIR
       $me ctl DIR ARGS...
EOF
    exit 2
}

RMQ_BIN=${RABBITMQ_BIN:-/usr/lib/rabbitmq/bin}

shquote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

# The broker should not run as root; root runs it as the rabbitmq system
# user, anyone else as themselves.
SRV_USER=
if [ "$(id -u)" -eq 0 ]; then
    getent passwd rabbitmq >/dev/null 2>&1 ||
        die "running as root but there is no 'rabbitmq' system user to run the broker as"
    command -v runuser >/dev/null 2>&1 || die "running as root but runuser(1) is missing"
    SRV_USER=rabbitmq
fi

# Run a command as the server user with the broker's environment. The CLI
# tools must see the same HOME (Erlang cookie), node name and epmd port as the
# broker, so everything goes through the one env.sh.
as_srv_env() {
    envsh=$1; shift
    if [ -n "$SRV_USER" ]; then
        (cd / && runuser -u "$SRV_USER" -- sh -c '. "$0"; exec "$@"' "$envsh" "$@")
    else
        (cd / && sh -c '. "$0"; exec "$@"' "$envsh" "$@")
    fi
}

port_busy() {
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Htn state listening state established state syn-sent state close-wait "sport = :$1" 2>/dev/null)" ]
    else
        command -v bash >/dev/null 2>&1 &&
            timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
    fi
}

# pid listening on 127.0.0.1:$1, if ss can tell.
listener_pid() {
    command -v ss >/dev/null 2>&1 || return 0
    ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*pid=\([0-9][0-9]*\).*/\1/p' | head -n 1
}

realdir_of() {
    if [ -f "$1/realdir" ]; then cat "$1/realdir"; else echo "$1"; fi
}

abspath() {
    mkdir -p "$1" || die "cannot create $1"
    (cd "$1" && pwd -P)
}

# Reads the values start recorded: NODENAME PIDFILE EPMD_PORT.
load_state() {
    R=$(realdir_of "$1")
    ENVSH=$R/etc/env.sh
    NODENAME='' PIDFILE='' EPMD_PORT=''
    [ -f "$R/etc/state" ] || return 1
    . "$R/etc/state"
}

broker_pid() {
    [ -n "$PIDFILE" ] && [ -f "$PIDFILE" ] || return 0
    pid=$(tr -dc 0-9 < "$PIDFILE")
    # A stale pid file may name a recycled pid: only a beam counts.
    [ -n "$pid" ] && alive "$pid" && grep -q '^beam' "/proc/$pid/comm" 2>/dev/null && echo "$pid"
    return 0
}

# kill -0 also succeeds on a zombie, and daemons here are reparented to an
# init that may reap late; a zombie holds no ports or files, so it counts as gone.
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    [ "$st" != Z ]
}

wait_gone() {   # pid tenths
    i=0
    while alive "$1" && [ $i -lt "$2" ]; do sleep 0.1; i=$((i + 1)); done
    ! alive "$1"
}

do_stop() {
    [ -d "$1" ] || return 0
    DIR=$(cd "$1" && pwd -P)
    if load_state "$DIR"; then
        pid=$(broker_pid)
        if [ -n "$pid" ] && [ "${TALLY_TEST_AMQP_GRACEFUL_STOP:-0}" = 1 ]; then
            # rabbitmqctl stop PIDFILE returns only once the VM has exited
            # (~8 s, 5 of them the management agent winding down).
            as_srv_env "$ENVSH" timeout 90 rabbitmqctl -q stop "$PIDFILE" >/dev/null 2>&1 ||
                say "rabbitmqctl stop failed; killing broker pid $pid"
        fi
        if [ -n "$pid" ] && alive "$pid"; then
            # The broker's state is deleted right below, so there is nothing
            # a graceful shutdown would save; SIGKILL takes the VM and its
            # port programs down at once instead of in ~8 s.
            kill -KILL "$pid" 2>/dev/null || true
            wait_gone "$pid" 50 || say "broker pid $pid survived SIGKILL"
        fi
        # A broker whose pid file is missing (killed mid-start): find it by
        # the "-home R/home" argument, which is unique to this DIR.
        for p in $(pgrep -x beam.smp 2>/dev/null || true); do
            if tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline" | grep -qF -- "-home $R/home "; then
                alive "$p" || continue
                say "killing leftover broker pid $p ($NODENAME)"
                kill -KILL "$p" 2>/dev/null || true
                wait_gone "$p" 50 || true
            fi
        done
        # epmd is a separate daemon that outlives the broker.
        if [ -n "$EPMD_PORT" ] && port_busy "$EPMD_PORT"; then
            ERL_EPMD_PORT=$EPMD_PORT epmd -port "$EPMD_PORT" -kill >/dev/null 2>&1 || true
            i=0
            while port_busy "$EPMD_PORT" && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
            if port_busy "$EPMD_PORT"; then
                p=$(listener_pid "$EPMD_PORT")
                if [ -n "$p" ] && grep -q '^epmd' "/proc/$p/comm" 2>/dev/null; then
                    kill -TERM "$p" 2>/dev/null || true
                    wait_gone "$p" 30 || kill -KILL "$p" 2>/dev/null || true
                else
                    say "epmd port $EPMD_PORT still in use by something else; left alone"
                fi
            fi
        fi
    fi
    R=$(realdir_of "$DIR")
    if [ "$R" != "$DIR" ]; then
        case "$R" in
            /tmp/tally-rmq.*) rm -rf "$R" ;;
            *) say "not deleting unexpected realdir '$R' recorded in $DIR/realdir" ;;
        esac
    fi
    rm -rf "${DIR:?}/etc" "${DIR:?}/home" "${DIR:?}/mnesia" "${DIR:?}/log" \
           "${DIR:?}/env" "${DIR:?}/realdir" "${DIR:?}/tls"
    rmdir "$DIR" 2>/dev/null || true
}

do_start() {
    DIR=$1 PORT=$2
    case "$PORT" in
        ''|*[!0-9]*) die "PORT must be a number, got '$PORT'" ;;
    esac
    [ "$PORT" -ge 1024 ] && [ $((PORT + 15)) -le 65535 ] ||
        die "PORT must be in 1024..65520 (it uses PORT..PORT+15), got $PORT"
    [ -x "$RMQ_BIN/rabbitmq-server" ] ||
        die "$RMQ_BIN/rabbitmq-server not found; run tools/deps.sh (or set RABBITMQ_BIN)"
    command -v epmd >/dev/null 2>&1 || die "epmd not found (it comes with erlang-base)"

    if [ -d "$DIR" ] && load_state "$(cd "$DIR" && pwd -P)" && [ -n "$(broker_pid)" ]; then
        die "a broker is already running for $DIR (pid $(broker_pid)); run '$me stop $DIR' first"
    fi
    do_stop "$DIR"

    MGMT=$((PORT + 1)) DIST=$((PORT + 2)) EPMD=$((PORT + 3))
    CTL_MIN=$((PORT + 4)) CTL_MAX=$((PORT + 13))
    AMQPS=$((PORT + 14)) MGMTS=$((PORT + 15))
    p=$PORT
    while [ $p -le $MGMTS ]; do
        port_busy $p && die "port $p on 127.0.0.1 is already in use (the broker needs $PORT..$MGMTS)"
        p=$((p + 1))
    done

    DIR=$(abspath "$DIR")
    rm -f "$DIR/start-failed.log"

    R=$DIR
    if [ -n "$SRV_USER" ] && ! runuser -u "$SRV_USER" -- test -x "$DIR" 2>/dev/null; then
        # The broker user cannot reach DIR (e.g. a clone under /root).
        R=$(mktemp -d /tmp/tally-rmq.XXXXXX) || die "mktemp failed"
        chmod 755 "$R"
        printf '%s\n' "$R" > "$DIR/realdir"
        ln -s "$R/log" "$DIR/log"
    fi
    mkdir -p "$R/etc/conf.d" "$R/etc/tls" "$R/home" "$R/mnesia" "$R/log"
    chmod 700 "$R/home" "$R/etc/tls"
    # The broker's certificate and key (ca.sh), copied where the broker's
    # user can read them (chowned with the rest of etc below).
    TLS=${TALLY_TEST_TLS_DIR:-$DIR/tls}
    sh "$here/ca.sh" make "$TLS" rabbitmq ||
        { do_stop "$DIR"; die "cannot make the TLS certificates in $TLS (ca.sh)"; }
    TLS=$(cd "$TLS" && pwd -P)
    (umask 077 && cp "$TLS/rabbitmq.pem" "$TLS/rabbitmq.key" "$TLS/ca.pem" "$R/etc/tls/")

    NODENAME=tally-$PORT-$$@localhost
    PIDFILE=$R/mnesia/rabbit.pid
    ENVSH=$R/etc/env.sh

    # An empty env conf keeps /etc/rabbitmq/rabbitmq-env.conf out; every
    # other file the broker would read from /etc is redirected too.  The
    # disk alarm is at 1 MB, not the default 50 MB: a throwaway broker on
    # a busy CI disk must not block publishing for a reason no test is
    # about (tests that want the alarm set the limit themselves).
    : > "$R/etc/rabbitmq-env.conf"
    cat > "$R/etc/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$PORT
management.tcp.ip = 127.0.0.1
management.tcp.port = $MGMT
loopback_users.guest = true
log.file.level = warning
disk_free_limit.absolute = 1MB
log.console = false
listeners.ssl.default = 127.0.0.1:$AMQPS
ssl_options.cacertfile = $R/etc/tls/ca.pem
ssl_options.certfile = $R/etc/tls/rabbitmq.pem
ssl_options.keyfile = $R/etc/tls/rabbitmq.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
auth_mechanisms.1 = PLAIN
auth_mechanisms.2 = AMQPLAIN
auth_mechanisms.3 = EXTERNAL
ssl_cert_login_from = common_name
management.ssl.ip = 127.0.0.1
management.ssl.port = $MGMTS
management.ssl.cacertfile = $R/etc/tls/ca.pem
management.ssl.certfile = $R/etc/tls/rabbitmq.pem
management.ssl.keyfile = $R/etc/tls/rabbitmq.key
management.ssl.verify = verify_peer
management.ssl.fail_if_no_peer_cert = false
EOF
    # The EXTERNAL mechanism: a user logged in by its certificate's CN
    # (a login by certificate, credential: certificate).
    echo '[rabbitmq_management,rabbitmq_auth_mechanism_ssl].' > "$R/etc/enabled_plugins"
    # Erlang insists the cookie is private to its owner.
    (umask 077 && head -c 64 /dev/urandom | tr -dc A-Z | head -c 20 > "$R/home/.erlang.cookie")
    [ -s "$R/home/.erlang.cookie" ] || echo TALLYTESTCOOKIEXXXXX > "$R/home/.erlang.cookie"
    chmod 400 "$R/home/.erlang.cookie"

    {
        echo "export HOME=$(shquote "$R/home")"
        echo "export RABBITMQ_CONF_ENV_FILE=$(shquote "$R/etc/rabbitmq-env.conf")"
        echo "export RABBITMQ_CONFIG_FILE=$(shquote "$R/etc/rabbitmq.conf")"
        echo "export RABBITMQ_CONFIG_FILES=$(shquote "$R/etc/conf.d")"
        echo "export RABBITMQ_ADVANCED_CONFIG_FILE=$(shquote "$R/etc/advanced.config")"
        echo "export RABBITMQ_ENABLED_PLUGINS_FILE=$(shquote "$R/etc/enabled_plugins")"
        echo "export RABBITMQ_MNESIA_BASE=$(shquote "$R/mnesia")"
        echo "export RABBITMQ_LOG_BASE=$(shquote "$R/log")"
        echo "export RABBITMQ_PID_FILE=$(shquote "$PIDFILE")"
        echo "export RABBITMQ_NODENAME=$NODENAME"
        echo "unset RABBITMQ_USE_LONGNAME"
        echo "export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1"
        echo "export RABBITMQ_NODE_PORT=$PORT"
        echo "export RABBITMQ_DIST_PORT=$DIST"
        echo "export RABBITMQ_CTL_DIST_PORT_MIN=$CTL_MIN"
        echo "export RABBITMQ_CTL_DIST_PORT_MAX=$CTL_MAX"
        # +sbwt none: the schedulers sleep when idle instead of spinning
        # (the default busy-waits ~100 ms per wake-up), which on a small
        # machine running suites side by side takes CPU from the others.
        echo "export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1} +sbwt none +sbwtdcpu none +sbwtdio none'"
        echo "export RABBITMQ_CTL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}'"
        echo "export ERL_EPMD_ADDRESS=127.0.0.1"
        echo "export ERL_EPMD_PORT=$EPMD"
        echo "export ERL_CRASH_DUMP=$(shquote "$R/log/erl_crash.dump")"
        # The /usr/sbin wrappers switch user and log under /var/log.
        echo "export PATH=$(shquote "$RMQ_BIN"):\$PATH"
    } > "$ENVSH"
    {
        echo "NODENAME=$NODENAME"
        echo "PIDFILE=$(shquote "$PIDFILE")"
        echo "EPMD_PORT=$EPMD"
    } > "$R/etc/state"

    if [ -n "$SRV_USER" ]; then
        chown -R "$SRV_USER:" "$R/etc" "$R/home" "$R/mnesia" "$R/log"
        [ "$R" != "$DIR" ] && chown "$SRV_USER:" "$R"
    fi

    t0=$(date +%s)
    # Our own epmd, on loopback and a private port, so it neither touches a
    # system broker's epmd on 4369 nor listens on every interface.
    as_srv_env "$ENVSH" epmd -address 127.0.0.1 -port "$EPMD" -daemon >"$R/log/epmd.out" 2>&1 ||
        start_failed "epmd did not start" "$R/log/epmd.out"
    # In the background rather than with -detached: its output then keeps
    # what it prints before logging is set up (a bad config, say), and we see
    # at once when it dies instead of waiting out a timeout. setsid keeps it
    # out of the caller's process group, so a ^C on the test run does not
    # reach it; stop does.
    SETSID=
    command -v setsid >/dev/null 2>&1 && SETSID=setsid
    if [ -n "$SRV_USER" ]; then
        (cd / && exec $SETSID runuser -u "$SRV_USER" -- sh -c '. "$0"; exec "$@"' "$ENVSH" rabbitmq-server) \
            </dev/null >"$R/log/start.out" 2>&1 &
    else
        (cd / && exec $SETSID sh -c '. "$0"; exec "$@"' "$ENVSH" rabbitmq-server) \
            </dev/null >"$R/log/start.out" 2>&1 &
    fi
    bg=$!
    i=0
    until [ -f "$PIDFILE" ]; do
        alive "$bg" || start_failed "rabbitmq-server exited during startup" "$R/log/start.out"
        i=$((i + 1))
        [ $i -lt 600 ] || start_failed "rabbitmq-server wrote no pid file in 60 s" "$R/log/start.out"
        sleep 0.1
    done
    # Up when the management API answers: it is served by a plugin started
    # after the broker's own boot (the AMQP listener included), so it is
    # the later of the two.  Polled rather than `rabbitmqctl wait`, which
    # is an Erlang VM of its own and took as long again as the boot.
    command -v curl >/dev/null 2>&1 || die "curl not found (tools/deps.sh installs it)"
    i=0
    until curl -fsS -o /dev/null -u guest:guest "http://127.0.0.1:$MGMT/api/overview" 2>/dev/null; do
        alive "$bg" || start_failed "rabbitmq-server exited during startup" "$R/log/start.out"
        i=$((i + 1))
        [ $i -lt 900 ] || start_failed "the broker was not up (management API on 127.0.0.1:$MGMT) in 90 s" "$R/log/start.out"
        sleep 0.1
    done
    port_busy "$PORT" || start_failed "the management API answers but nothing listens on AMQP port $PORT" "$R/log/start.out"
    # Its TLS twin, verified as a client trusting the harness CA would.
    i=0
    until curl -fsS -o /dev/null --cacert "$TLS/ca.pem" -u guest:guest \
            "https://127.0.0.1:$MGMTS/api/overview" 2>"$R/log/tls-check.out"; do
        i=$((i + 1))
        [ $i -lt 50 ] || start_failed "management API over TLS on 127.0.0.1:$MGMTS did not answer" "$R/log/tls-check.out"
        sleep 0.2
    done
    # Polled too: the AMQPS listener may come up a moment after the
    # management API (seen once in a clean-clone make check: refused).
    i=0
    until openssl s_client -connect "127.0.0.1:$AMQPS" -CAfile "$TLS/ca.pem" \
            -verify_return_error </dev/null >"$R/log/tls-check.out" 2>&1; do
        i=$((i + 1))
        [ $i -lt 50 ] || start_failed "no verified TLS handshake with AMQP over TLS on 127.0.0.1:$AMQPS" "$R/log/tls-check.out"
        sleep 0.2
    done

    {
        echo "export TALLY_TEST_AMQP_HOST=127.0.0.1"
        echo "export TALLY_TEST_AMQP_PORT=$PORT"
        echo "export TALLY_TEST_AMQP_USER=guest"
        echo "export TALLY_TEST_AMQP_PASSWORD=guest"
        echo "export TALLY_TEST_AMQP_MGMT_PORT=$MGMT"
        echo "export TALLY_TEST_AMQP_TLS_PORT=$AMQPS"
        echo "export TALLY_TEST_AMQP_MGMT_TLS_PORT=$MGMTS"
        echo "export TALLY_TEST_AMQP_CA=$(shquote "$TLS/ca.pem")"
        cat "$TLS/env"   # TALLY_TEST_CA, TALLY_TEST_CA_OTHER, ... (ca.sh)
    } > "$DIR/env"
    say "RabbitMQ up on 127.0.0.1:$PORT (management $MGMT; TLS: amqps $AMQPS, https $MGMTS; node $NODENAME) in $(($(date +%s) - t0))s"
}

# Print what we know, keep the output and the broker log, and clean up so no
# half-started broker or epmd is left behind.
start_failed() {
    say "$1; output:"
    # Boot errors come first and the crash report after; show both ends.
    if [ "$(wc -l < "$2" 2>/dev/null || echo 0)" -gt 45 ]; then
        head -n 25 "$2" >&2; echo "    [...]" >&2; tail -n 10 "$2" >&2
    else
        cat "$2" >&2 2>/dev/null || true
    fi
    keep=$DIR.start-failed.$$
    cat "$2" > "$keep" 2>/dev/null || true
    for f in "$R"/log/*.log; do
        [ -f "$f" ] || continue
        say "last lines of $f:"
        tail -n 20 "$f" >&2
        { echo "==> $f <=="; cat "$f"; } >> "$keep"
    done
    do_stop "$DIR"
    mkdir -p "$DIR" && mv "$keep" "$DIR/start-failed.log" &&
        say "full output kept in $DIR/start-failed.log"
    exit 1
}

do_status() {
    if [ -d "$1" ] && load_state "$(cd "$1" && pwd -P)"; then
        pid=$(broker_pid)
        if [ -n "$pid" ]; then
            echo "running: pid $pid, node $NODENAME"
            exit 0
        fi
    fi
    echo "not running"
    exit 3
}

do_ctl() {
    [ -d "$1" ] && load_state "$(cd "$1" && pwd -P)" || die "no broker state in $1"
    shift
    as_srv_env "$ENVSH" rabbitmqctl "$@"
}

[ $# -ge 2 ] || usage
cmd=$1
case "$cmd" in
    start) [ $# -eq 3 ] || usage; do_start "$2" "$3" ;;
    stop)  [ $# -eq 2 ] || usage; do_stop "$2" ;;
    status) [ $# -eq 2 ] || usage; do_status "$2" ;;
    ctl) shift; do_ctl "$@" ;;
    *) usage ;;
esac
