#!/bin/sh
# A throwaway Redis 7 with ACLs for tests.
#
# Usage:
#   redis.sh start DIR PORT [TLSPORT]
#                             redis-server on 127.0.0.1:PORT, its users in
#                             DIR/users.acl (--aclfile): the default user
#                             off, an admin user with +@all on ~* &*;
#                             writes DIR/env and DIR/admin.pw. It also
#                             speaks TLS on 127.0.0.1:TLSPORT (tls-port,
#                             tls-auth-clients no: no client certificate
#                             asked for; tls-ca-cert-file the harness CA,
#                             what a client's certificate is verified
#                             against once a test sets tls-auth-clients
#                             yes or optional, as check_drv_redis's
#                             client_cert case does and puts back);
#                             without TLSPORT, the first free
#                             port above PORT (the next one if a start
#                             fails on it, three times); exit 4 when
#                             PORT itself was taken before the bind
#   redis.sh stop DIR         SIGTERM (then SIGKILL), delete DIR's files
#                             (idempotent)
#   redis.sh status DIR       exit 0 if running, 3 if not
#
# DIR/env (sourceable) exports TALLY_TEST_REDIS_HOST, TALLY_TEST_REDIS_PORT,
# TALLY_TEST_REDIS_USER, TALLY_TEST_REDIS_PWFILE, TALLY_TEST_REDIS_TLS_PORT,
# TALLY_TEST_REDIS_CA, and what tests/harness/ca.sh's env says
# (TALLY_TEST_CA = _CA: the CA that signed the server's certificate, for
# redis-cli --tls --cacert; TALLY_TEST_CA_OTHER, _IMPOSTOR_*, _WRONGHOST_*).
# The CA is made in $TALLY_TEST_TLS_DIR when that is set (shared by every
# server started with it, kept by stop), else in DIR/tls (deleted by stop).
# Nothing is saved to disk
# (--save '' --appendonly no): the data lives in the server's memory only.
set -eu

me=redis.sh
here=$(cd "$(dirname "$0")" && pwd -P)
die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }

usage() {
    cat >&2 <<EOF
usage: $me start DIR PORT [TLSPORT]
       $me stop DIR
       $me status DIR
EOF
    exit 2
}

shquote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

# A zombie holds no port: it counts as gone (the init here reaps late).
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    [ "$st" != Z ]
}

pid_of() { [ -f "$1/pid" ] && head -n 1 "$1/pid" 2>/dev/null || true; }

is_running() {
    pid=$(pid_of "$1")
    [ -n "$pid" ] && alive "$pid"
}

do_stop() {
    [ -d "$1" ] || return 0
    pid=$(pid_of "$1")
    if [ -n "$pid" ] && alive "$pid" &&
       grep -q redis "/proc/$pid/comm" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        i=0
        while alive "$pid" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        if alive "$pid"; then
            say "redis-server $pid ignored SIGTERM; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.3
        fi
    fi
    rm -f "$1/pid" "$1/users.acl" "$1/admin.pw" "$1/env" "$1/log"
    rm -rf "$1/tls"
    rmdir "$1" 2>/dev/null || true
}

port_busy() {
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Htn state listening state established state syn-sent state close-wait "sport = :$1" 2>/dev/null)" ]
    else
        command -v bash >/dev/null 2>&1 &&
            timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
    fi
}

free_above() {
    p=$(($1 + 1))
    while port_busy "$p"; do p=$((p + 1)); done
    [ "$p" -le 65535 ] || die "no free port above $1 for TLS"
    echo "$p"
}

do_start() {
    D=$1 PORT=$2 TLSPORT=${3:-}
    tries=1
    [ -n "$TLSPORT" ] || { TLSPORT=$(free_above "$PORT"); tries=3; }
    command -v redis-server >/dev/null 2>&1 ||
        die "no redis-server (tools/deps.sh installs redis-server)"
    mkdir -p "$D" || die "cannot create $D"
    D=$(cd "$D" && pwd -P)
    is_running "$D" && die "a server is already running in $D"
    umask 077
    PW=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
    printf '%s\n' "$PW" >"$D/admin.pw"
    printf 'user default off\nuser admin on >%s ~* &* +@all\n' "$PW" >"$D/users.acl"
    TLS=${TALLY_TEST_TLS_DIR:-$D/tls}
    sh "$here/ca.sh" make "$TLS" redis ||
        { do_stop "$D"; die "cannot make the TLS certificates in $TLS (ca.sh)"; }
    TLS=$(cd "$TLS" && pwd -P)
    while :; do
        try_start && return 0
        tries=$((tries - 1))
        # A TLS port taken between the look and the bind: the next one.
        if [ $tries -gt 0 ] && grep -qs "$TLSPORT" "$D/log"; then
            say "the TLS port $TLSPORT was taken meanwhile; trying the next free one"
            rm -f "$D/log"
            TLSPORT=$(free_above "$TLSPORT")
            continue
        fi
        tail -n 20 "$D/log" >&2 2>/dev/null || true
        # PORT itself taken between the look and the bind: the caller
        # chose it, and may choose again (exit 4; lib.sh does).
        if grep -qs "listening socket 127.0.0.1:$PORT: bind: Address already in use" "$D/log"; then
            do_stop "$D"
            echo "$me: port $PORT was taken meanwhile" >&2
            exit 4
        fi
        do_stop "$D"
        die "redis-server on port $PORT (TLS $TLSPORT) did not come up (see above)"
    done
}

try_start() {
    redis-server --port "$PORT" --bind 127.0.0.1 --dir "$D" --save '' \
        --appendonly no --aclfile "$D/users.acl" --daemonize yes \
        --pidfile "$D/pid" --logfile "$D/log" \
        --tls-port "$TLSPORT" --tls-cert-file "$TLS/redis.pem" \
        --tls-key-file "$TLS/redis.key" --tls-ca-cert-file "$TLS/ca.pem" \
        --tls-auth-clients no >/dev/null ||
        die "redis-server did not start on port $PORT (see $D/log)"
    i=0
    while [ $i -lt 100 ]; do
        # Both listeners: the plaintext one, and TLS verified as a client
        # trusting the harness CA would.
        if redis-cli -h 127.0.0.1 -p "$PORT" --user admin --pass "$PW" \
            --no-auth-warning ping 2>/dev/null | grep -q PONG &&
           redis-cli -h 127.0.0.1 -p "$TLSPORT" --tls --cacert "$TLS/ca.pem" \
            --user admin --pass "$PW" --no-auth-warning ping 2>/dev/null | grep -q PONG; then
            cat >"$D/env" <<EOF
export TALLY_TEST_REDIS_HOST=127.0.0.1
export TALLY_TEST_REDIS_PORT=$PORT
export TALLY_TEST_REDIS_USER=admin
export TALLY_TEST_REDIS_PWFILE=$(shquote "$D/admin.pw")
export TALLY_TEST_REDIS_TLS_PORT=$TLSPORT
export TALLY_TEST_REDIS_CA=$(shquote "$TLS/ca.pem")
EOF
            # TALLY_TEST_CA, TALLY_TEST_CA_OTHER, ... (ca.sh)
            cat "$TLS/env" >>"$D/env"
            return 0
        fi
        # Gone (a port it could not bind): no use waiting out the 5 s.
        if [ $i -gt 10 ] && ! is_running "$D"; then return 1; fi
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}

[ $# -ge 2 ] || usage
case "$1" in
    start) [ $# -eq 3 ] || [ $# -eq 4 ] || usage; do_start "$2" "$3" "${4:-}" ;;
    stop) do_stop "$2" ;;
    status) if is_running "$2"; then exit 0; else exit 3; fi ;;
    *) usage ;;
esac
