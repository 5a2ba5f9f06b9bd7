#!/bin/sh
# A throwaway Redis 7 with ACLs for tests.
#
# Usage:
#   redis.sh start DIR PORT   redis-server on 127.0.0.1:PORT, its users in
#                             DIR/users.acl (--aclfile): the default user
#                             off, an admin user with +@all on ~* &*;
#                             writes DIR/env and DIR/admin.pw
#   redis.sh stop DIR         SIGTERM (then SIGKILL), delete DIR's files
#                             (idempotent)
#   redis.sh status DIR       exit 0 if running, 3 if not
#
# DIR/env (sourceable) exports TALLY_TEST_REDIS_HOST, TALLY_TEST_REDIS_PORT,
# TALLY_TEST_REDIS_USER, TALLY_TEST_REDIS_PWFILE.  Nothing is saved to disk
# (--save '' --appendonly no): the data lives in the server's memory only.
set -eu

me=redis.sh
die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }

usage() {
    cat >&2 <<EOF
usage: $me start DIR PORT
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
    rmdir "$1" 2>/dev/null || true
}

do_start() {
    D=$1 PORT=$2
    command -v redis-server >/dev/null 2>&1 ||
        die "no redis-server (tools/deps.sh installs redis-server)"
    mkdir -p "$D" || die "cannot create $D"
    D=$(cd "$D" && pwd -P)
    is_running "$D" && die "a server is already running in $D"
    umask 077
    PW=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
    printf '%s\n' "$PW" >"$D/admin.pw"
    printf 'user default off\nuser admin on >%s ~* &* +@all\n' "$PW" >"$D/users.acl"
    redis-server --port "$PORT" --bind 127.0.0.1 --dir "$D" --save '' \
        --appendonly no --aclfile "$D/users.acl" --daemonize yes \
        --pidfile "$D/pid" --logfile "$D/log" >/dev/null ||
        die "redis-server did not start on port $PORT (see $D/log)"
    i=0
    while [ $i -lt 100 ]; do
        if redis-cli -h 127.0.0.1 -p "$PORT" --user admin --pass "$PW" \
            --no-auth-warning ping 2>/dev/null | grep -q PONG; then
            cat >"$D/env" <<EOF
export TALLY_TEST_REDIS_HOST=127.0.0.1
export TALLY_TEST_REDIS_PORT=$PORT
export TALLY_TEST_REDIS_USER=admin
export TALLY_TEST_REDIS_PWFILE=$(shquote "$D/admin.pw")
EOF
            return 0
        fi
        sleep 0.05
        i=$((i + 1))
    done
    tail -n 20 "$D/log" >&2 2>/dev/null || true
    do_stop "$D"
    die "redis-server on port $PORT did not answer within 5 s"
}

[ $# -ge 2 ] || usage
case "$1" in
    start) [ $# -eq 3 ] || usage; do_start "$2" "$3" ;;
    stop) do_stop "$2" ;;
    status) if is_running "$2"; then exit 0; else exit 3; fi ;;
    *) usage ;;
esac
