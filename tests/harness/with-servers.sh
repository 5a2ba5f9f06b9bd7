#!/bin/sh
# Run a command with throwaway test servers around it.
#
# Usage: with-servers.sh [--pg] [--amqp] [--redis] -- CMD [ARGS...]
#
# Starts the requested servers under ${TALLY_TEST_DIR:-build/test-servers}/
# (pg/, amqp/, redis/), exports their variables (see pg.sh, rabbit.sh and
# redis.sh: TALLY_TEST_PG_*, TALLY_TEST_AMQP_*, TALLY_TEST_REDIS_*), runs
# CMD, stops the servers whatever
# happens, and exits with CMD's status. Every server also offers TLS with a
# certificate of one throwaway CA made in $TALLY_TEST_TLS_DIR (default
# TD/ca, remade per run; tests/harness/ca.sh): TALLY_TEST_CA names it. A server that cannot start is an
# error, never a skip: tests that need a server must not pass without one.
#
# Ports: the first free one from ${TALLY_TEST_PG_PORT_BASE:-55432} and the
# first free block of 16 from ${TALLY_TEST_AMQP_PORT_BASE:-55672}, the first
# free one from ${TALLY_TEST_REDIS_PORT_BASE:-56379} for Redis, so a stray
# server elsewhere does not break the run. One run per TALLY_TEST_DIR at a
# time (a lock enforces it); servers a crashed run left there are stopped first.
set -eu

me=with-servers.sh
die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }
usage() {
    echo "usage: $me [--pg] [--amqp] [--redis] -- CMD [ARGS...]" >&2
    exit 2
}

here=$(cd "$(dirname "$0")" && pwd -P)

want_pg=no want_amqp=no want_redis=no
while [ $# -gt 0 ]; do
    case "$1" in
        --pg) want_pg=yes ;;
        --amqp) want_amqp=yes ;;
        --redis) want_redis=yes ;;
        --) shift; break ;;
        -h|--help) usage ;;
        *) echo "$me: unknown option '$1'" >&2; usage ;;
    esac
    shift
done
[ $# -gt 0 ] || usage

TD=${TALLY_TEST_DIR:-build/test-servers}
mkdir -p "$TD" || die "cannot create $TD"
TD=$(cd "$TD" && pwd -P)

# Two runs sharing a directory would each treat the other's servers as stale
# and stop them. fd 9 is closed for everything started below so that a
# leaked server cannot keep the lock after this script is gone.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$TD/.lock"
    flock -n 9 || die "another $me run is using $TD; wait for it or set TALLY_TEST_DIR to another directory"
fi

port_busy() {
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Htn state listening state established state syn-sent state close-wait "sport = :$1" 2>/dev/null)" ]
    else
        command -v bash >/dev/null 2>&1 &&
            timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
    fi
}

# pick_port BASE SPAN STEP: first P = BASE + k*STEP with P..P+SPAN-1 all free.
pick_port() {
    p=$1 k=0
    while [ $k -lt 50 ]; do
        q=$p ok=yes
        while [ $q -lt $((p + $2)) ]; do
            if [ $q -gt 65535 ] || port_busy $q; then ok=no; break; fi
            q=$((q + 1))
        done
        if [ $ok = yes ]; then echo $p; return 0; fi
        p=$((p + $3)) k=$((k + 1))
    done
    return 1
}

started_pg=no started_amqp=no started_redis=no
cleanup() {
    rc=$?
    trap - EXIT INT TERM
    if [ $started_amqp = yes ]; then
        "$here/rabbit.sh" stop "$TD/amqp" 9>&- ||
            say "WARNING: stopping RabbitMQ in $TD/amqp failed; a broker may be left running"
    fi
    if [ $started_redis = yes ]; then
        "$here/redis.sh" stop "$TD/redis" 9>&- ||
            say "WARNING: stopping Redis in $TD/redis failed; a server may be left running"
    fi
    if [ $started_pg = yes ]; then
        "$here/pg.sh" stop "$TD/pg" 9>&- ||
            say "WARNING: stopping PostgreSQL in $TD/pg failed; a server may be left running"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The lock is ours, so anything still in these directories is from a run
# that died before its cleanup.
"$here/rabbit.sh" stop "$TD/amqp" 9>&-
"$here/pg.sh" stop "$TD/pg" 9>&-
"$here/redis.sh" stop "$TD/redis" 9>&-

# One CA for every server of the run (ca.sh).
if [ -z "${TALLY_TEST_TLS_DIR:-}" ]; then
    rm -rf "$TD/ca"
    TALLY_TEST_TLS_DIR=$TD/ca
fi
export TALLY_TEST_TLS_DIR

if [ $want_pg = yes ]; then
    base=${TALLY_TEST_PG_PORT_BASE:-55432}
    port=$(pick_port "$base" 1 1) || die "no free port for PostgreSQL in $base..$((base + 49))"
    started_pg=yes
    "$here/pg.sh" start "$TD/pg" "$port" 9>&- ||
        die "PostgreSQL could not be started (see above); not running: $*"
    . "$TD/pg/env"
fi

if [ $want_amqp = yes ]; then
    base=${TALLY_TEST_AMQP_PORT_BASE:-55672}
    port=$(pick_port "$base" 16 20) ||
        die "no free block of 16 ports for RabbitMQ from $base"
    started_amqp=yes
    "$here/rabbit.sh" start "$TD/amqp" "$port" 9>&- ||
        die "RabbitMQ could not be started (see above); not running: $*"
    . "$TD/amqp/env"
fi

if [ $want_redis = yes ]; then
    base=${TALLY_TEST_REDIS_PORT_BASE:-56379}
    port=$(pick_port "$base" 1 1) || die "no free port for Redis in $base..$((base + 49))"
    started_redis=yes
    "$here/redis.sh" start "$TD/redis" "$port" 9>&- ||
        die "Redis could not be started (see above); not running: $*"
    . "$TD/redis/env"
fi

# Foreground, not "&"+wait: a non-interactive sh starts background commands
# with SIGINT ignored and stdin on /dev/null, which would make ^C miss the
# tests. The cost: a SIGTERM sent to this script alone is acted on once CMD
# returns, and if this script is SIGKILLed the next run stops what it left.
# The servers run in their own sessions, so ^C reaches them only via cleanup.
set +e
"$@" 9>&-
rc=$?
set -e
exit $rc
