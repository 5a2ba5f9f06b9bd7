#!/bin/sh
# A throwaway PostgreSQL for tests.
#
# Usage:
#   pg.sh start DIR PORT   initdb + start, listening on 127.0.0.1:PORT and a
#                          unix socket; writes DIR/env and DIR/admin.pw.
#                          TLS is offered on the same port (ssl = on; the
#                          client chooses: sslmode=disable stays plaintext,
#                          libpq's default "prefer" takes TLS unverified);
#                          ssl_ca_file is the test CA, so a client
#                          certificate of that CA is verified (what the
#                          cert method of a pg_hba.conf line a test adds
#                          needs) and one of another CA is refused in the
#                          handshake
#   pg.sh stop DIR         fast shutdown, then delete everything (idempotent)
#   pg.sh status DIR       exit 0 if running, 3 if not
#
# DIR/env (sourceable) exports TALLY_TEST_PG_HOST, TALLY_TEST_PG_PORT,
# TALLY_TEST_PG_SOCK, TALLY_TEST_PG_USER, TALLY_TEST_PG_PWFILE,
# TALLY_TEST_PG_CA, and what tests/harness/ca.sh's env says (TALLY_TEST_CA
# = _CA: the CA that signed the server's certificate, subjectAltName
# localhost and 127.0.0.1, for sslmode=verify-full sslrootcert=...;
# TALLY_TEST_CA_OTHER, _IMPOSTOR_*, _WRONGHOST_*). The CA is made in
# $TALLY_TEST_TLS_DIR when that is set (shared by every server started with
# it, kept by stop), else in DIR/tls (deleted by stop).
# The admin role is "postgres"; TCP needs the password in DIR/admin.pw
# (scram-sha-256), the unix socket is trusted. Use TALLY_TEST_PG_SOCK rather
# than DIR/sock: when the postgres user cannot reach DIR, or DIR/sock would be
# too long for a socket path, the server lives in /tmp/tally-pg.* (named in
# DIR/realdir) and DIR/sock is only a symlink to it.
#
# Env: PG_BINDIR overrides where initdb/pg_ctl are looked for;
# TALLY_TEST_PG_TEMPLATE=DIR copies a cluster made once in DIR instead of
# running initdb at every start (lib.sh: one per run);
# TALLY_TEST_PG_FSYNC=off starts the server with fsync off (the suites:
# their data is thrown away and no test crashes the machine, only
# processes, which loses nothing the kernel holds), default on (the
# benches measure a durable server); with it off initdb does not sync
# either (--no-sync), while with it on the new cluster is synced as
# initdb does by default, so no bench pays for another's writeback.
set -eu

me=pg.sh
here=$(cd "$(dirname "$0")" && pwd -P)
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

# Quote for sh: the env file is sourced, and DIR may contain anything.
shquote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
# Quote for postgresql.conf string values.
pgquote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/''/g")"; }

find_bindir() {
    if [ -n "${PG_BINDIR:-}" ]; then
        [ -x "$PG_BINDIR/initdb" ] || die "PG_BINDIR=$PG_BINDIR has no initdb"
        echo "$PG_BINDIR"; return
    fi
    if [ -x /usr/lib/postgresql/15/bin/initdb ]; then
        echo /usr/lib/postgresql/15/bin; return
    fi
    # Debian keeps one directory per major version; take the newest.
    b=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n | tail -n 1)
    if [ -n "$b" ] && [ -x "$b/initdb" ]; then echo "$b"; return; fi
    if command -v pg_config >/dev/null 2>&1; then
        b=$(pg_config --bindir)
        if [ -x "$b/initdb" ]; then echo "$b"; return; fi
    fi
    die "no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin); run tools/deps.sh"
}

# initdb and postgres refuse to run as root, so root runs the server as the
# postgres system user; anyone else runs it as themselves.
NOSYNC=
[ "${TALLY_TEST_PG_FSYNC:-on}" = off ] && NOSYNC=--no-sync
SRV_USER=
if [ "$(id -u)" -eq 0 ]; then
    getent passwd postgres >/dev/null 2>&1 ||
        die "running as root but there is no 'postgres' system user to run the server as"
    command -v runuser >/dev/null 2>&1 || die "running as root but runuser(1) is missing"
    SRV_USER=postgres
fi

# cd / so the server user is not left in a directory it cannot read
# (initdb/pg_ctl warn or fail about an inaccessible cwd).
as_srv() {
    if [ -n "$SRV_USER" ]; then
        (cd / && runuser -u "$SRV_USER" -- "$@")
    else
        (cd / && "$@")
    fi
}

port_busy() {
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Htn state listening state established state syn-sent state close-wait "sport = :$1" 2>/dev/null)" ]
    else
        # No ss: a successful connect means something listens there.
        command -v bash >/dev/null 2>&1 &&
            timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
    fi
}

# Where the server's files really live: DIR itself, or a /tmp directory when
# the server user cannot reach DIR (e.g. a clone under /root) or the socket
# path would exceed the 107-byte sun_path limit.
realdir_of() {
    if [ -f "$1/realdir" ]; then cat "$1/realdir"; else echo "$1"; fi
}

abspath() {
    mkdir -p "$1" || die "cannot create $1"
    (cd "$1" && pwd -P)
}

# kill -0 also succeeds on a zombie, and daemons here are reparented to an
# init that may reap late; a zombie holds no ports or files, so it counts as gone.
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    [ "$st" != Z ]
}

pid_of() {
    [ -f "$1/data/postmaster.pid" ] && head -n 1 "$1/data/postmaster.pid" 2>/dev/null || true
}

is_running() {
    R=$(realdir_of "$1")
    [ -d "$R/data" ] || return 1
    pid=$(pid_of "$R")
    [ -n "$pid" ] && alive "$pid"
}

do_stop() {
    [ -d "$1" ] || return 0
    # as_srv runs from /, so relative paths would point elsewhere.
    DIR=$(cd "$1" && pwd -P)
    R=$(realdir_of "$DIR")
    if [ -f "$R/data/postmaster.pid" ]; then
        B=$(find_bindir)
        if ! as_srv "$B/pg_ctl" -D "$R/data" -m fast -w -t 60 -s stop >/dev/null 2>&1; then
            # pg_ctl gives up if the pid file is stale or the server hangs:
            # fall back to the postmaster's pid, and only if it is a postgres.
            pid=$(pid_of "$R")
            if [ -n "$pid" ] && alive "$pid" &&
               grep -q postgres "/proc/$pid/comm" 2>/dev/null; then
                say "pg_ctl stop failed; sending SIGQUIT to postmaster $pid"
                kill -QUIT "$pid" 2>/dev/null || true
                i=0
                while alive "$pid" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
                if alive "$pid"; then
                    say "postmaster $pid ignored SIGQUIT; SIGKILL"
                    kill -KILL "$pid" 2>/dev/null || true
                    sleep 0.5
                fi
            fi
        fi
    fi
    if [ "$R" != "$DIR" ]; then
        # Only ever delete a directory this script made.
        case "$R" in
            /tmp/tally-pg.*) rm -rf "$R" ;;
            *) say "not deleting unexpected realdir '$R' recorded in $DIR/realdir" ;;
        esac
    fi
    rm -rf "${DIR:?}/data" "${DIR:?}/sock" "${DIR:?}/log" "${DIR:?}/server.log" \
           "${DIR:?}/env" "${DIR:?}/admin.pw" "${DIR:?}/realdir" \
           "${DIR:?}/tls" "${DIR:?}/server-tls"
    rmdir "$DIR" 2>/dev/null || true
}

# TPL: a pristine cluster that starts copy instead of running initdb each
# time (initdb is most of a start): $TALLY_TEST_PG_TEMPLATE/data, made once
# under a lock by the first start that needs it, remade for another
# major version.  Fails (and the caller runs initdb) when unset or when
# the server user cannot reach it.
template() {
    TPL=${TALLY_TEST_PG_TEMPLATE:-}
    [ -n "$TPL" ] || return 1
    mkdir -p "$TPL" 2>/dev/null || return 1
    TPL=$(cd "$TPL" && pwd -P)
    [ -z "$SRV_USER" ] || chown "$SRV_USER:" "$TPL" 2>/dev/null || return 1
    [ -z "$SRV_USER" ] || runuser -u "$SRV_USER" -- test -w "$TPL" 2>/dev/null || return 1
    major=$("$1/initdb" --version | sed -n 's/.* \([0-9][0-9]*\)[.0-9]*.*/\1/p')
    (
        flock 9
        if [ "$(cat "$TPL/data/PG_VERSION" 2>/dev/null)" != "$major" ]; then
            rm -rf "$TPL/data" "$TPL/data.new"
            as_srv "$1/initdb" -D "$TPL/data.new" -U postgres --auth-local=trust \
                --auth-host=scram-sha-256 -E UTF8 --no-locale --no-instructions \
                $NOSYNC >"$TPL/initdb.log" 2>&1 || exit 1
            mv "$TPL/data.new" "$TPL/data"
        fi
    ) 9>"$TPL/.lock"
}

do_start() {
    DIR=$1
    PORT=$2
    case "$PORT" in
        ''|*[!0-9]*) die "PORT must be a number, got '$PORT'" ;;
    esac
    [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65535 ] || die "PORT must be in 1024..65535, got $PORT"

    if [ -d "$DIR" ] && is_running "$DIR"; then
        die "a server is already running for $DIR (pid $(pid_of "$(realdir_of "$DIR")")); run '$me stop $DIR' first"
    fi
    # Leftovers of a crashed run would make initdb refuse the data directory.
    do_stop "$DIR"
    port_busy "$PORT" && die "port $PORT on 127.0.0.1 is already in use"
    DIR=$(abspath "$DIR")
    rm -f "$DIR/start-failed.log"

    B=$(find_bindir)

    R=$DIR
    sock_len=$((${#DIR} + ${#PORT} + 18))   # DIR/sock/.s.PGSQL.PORT
    reachable=yes
    if [ -n "$SRV_USER" ] && ! runuser -u "$SRV_USER" -- test -x "$DIR" 2>/dev/null; then
        reachable=no
    fi
    if [ "$reachable" = no ] || [ "$sock_len" -gt 100 ]; then
        R=$(mktemp -d /tmp/tally-pg.XXXXXX) || die "mktemp failed"
        chmod 755 "$R"
        printf '%s\n' "$R" > "$DIR/realdir"
        ln -s "$R/sock" "$DIR/sock"
        ln -s "$R/log/server.log" "$DIR/server.log"
    fi

    # The server's certificate and key (ca.sh), copied where the server
    # user owns them: PostgreSQL refuses a key that others can read.
    TLS=${TALLY_TEST_TLS_DIR:-$DIR/tls}
    sh "$here/ca.sh" make "$TLS" pg || die "cannot make the TLS certificates in $TLS (ca.sh)"
    TLS=$(cd "$TLS" && pwd -P)
    mkdir -p "$R/data" "$R/sock" "$R/log" "$R/server-tls"
    chmod 700 "$R/data" "$R/server-tls"
    (umask 077 && cp "$TLS/pg.pem" "$TLS/pg.key" "$TLS/ca.pem" "$R/server-tls/")
    chmod 755 "$R/sock"
    (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DIR/admin.pw")
    # initdb reads the password as the server user; give it a private copy
    # rather than opening up the invoking user's file.
    (umask 077 && cp "$DIR/admin.pw" "$R/initpw")
    if [ -n "$SRV_USER" ]; then
        chown "$SRV_USER:" "$R/data" "$R/sock" "$R/log" "$R/initpw"
        chown -R "$SRV_USER:" "$R/server-tls"
        [ "$R" != "$DIR" ] && chown "$SRV_USER:" "$R"
    fi

    if template "$B" && cp -a "$TPL/data/." "$R/data/"; then
        # The template has no password: set below, once the server is up.
        setpw=yes
    else
        setpw=
        if ! as_srv "$B/initdb" -D "$R/data" -U postgres --auth-local=trust \
                --auth-host=scram-sha-256 --pwfile="$R/initpw" -E UTF8 --no-locale \
                --no-instructions $NOSYNC >"$R/log/initdb.log" 2>&1; then
            cat "$R/log/initdb.log" >&2
            rm -f "$R/initpw"
            die "initdb failed (see above)"
        fi
    fi
    rm -f "$R/initpw"

    # In postgresql.conf rather than on the command line so that paths with
    # spaces survive, and so a manual pg_ctl restart keeps the settings.
    cat >> "$R/data/postgresql.conf" <<EOF

# --- tally test harness (tests/harness/pg.sh) ---
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = $(pgquote "$R/sock")
fsync = ${TALLY_TEST_PG_FSYNC:-on}
max_connections = 200
log_min_messages = warning
ssl = on
ssl_cert_file = $(pgquote "$R/server-tls/pg.pem")
ssl_key_file = $(pgquote "$R/server-tls/pg.key")
ssl_ca_file = $(pgquote "$R/server-tls/ca.pem")
EOF

    log=$R/log/server.log
    if ! as_srv "$B/pg_ctl" -D "$R/data" -l "$log" -w -t 60 -s start >/dev/null 2>&1 ||
       ! "$B/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 10 2>/dev/null; then
        say "PostgreSQL did not come up on 127.0.0.1:$PORT; last lines of $log:"
        tail -n 30 "$log" >&2 2>/dev/null || true
        cp "$log" "$DIR/start-failed.log" 2>/dev/null &&
            say "full log kept in $DIR/start-failed.log"
        do_stop "$DIR"
        exit 1
    fi

    if [ -n "$setpw" ] && ! printf "ALTER ROLE postgres PASSWORD '%s';\n" "$(cat "$DIR/admin.pw")" |
            as_srv "$B/psql" -X -q -v ON_ERROR_STOP=1 -h "$R/sock" -p "$PORT" \
            -U postgres -d postgres -f - >/dev/null 2>"$R/log/setpw.log"; then
        cat "$R/log/setpw.log" >&2
        do_stop "$DIR"
        die "cannot set the admin password"
    fi

    {
        echo "export TALLY_TEST_PG_HOST=127.0.0.1"
        echo "export TALLY_TEST_PG_PORT=$PORT"
        echo "export TALLY_TEST_PG_SOCK=$(shquote "$R/sock")"
        echo "export TALLY_TEST_PG_USER=postgres"
        echo "export TALLY_TEST_PG_PWFILE=$(shquote "$DIR/admin.pw")"
        echo "export TALLY_TEST_PG_CA=$(shquote "$TLS/ca.pem")"
        cat "$TLS/env"   # TALLY_TEST_CA, TALLY_TEST_CA_OTHER, ... (ca.sh)
    } > "$DIR/env"
    say "PostgreSQL up on 127.0.0.1:$PORT, TLS on the same port (data in $R/data)"
}

do_status() {
    DIR=$1
    [ -d "$DIR" ] && DIR=$(cd "$DIR" && pwd -P)
    if [ -d "$DIR" ] && is_running "$DIR"; then
        R=$(realdir_of "$DIR")
        port=$(sed -n 4p "$R/data/postmaster.pid" 2>/dev/null)
        echo "running: pid $(pid_of "$R"), port $port, data $R/data"
        exit 0
    fi
    echo "not running"
    exit 3
}

[ $# -ge 2 ] || usage
cmd=$1
case "$cmd" in
    start) [ $# -eq 3 ] || usage; do_start "$2" "$3" ;;
    stop)  [ $# -eq 2 ] || usage; do_stop "$2" ;;
    status) [ $# -eq 2 ] || usage; do_status "$2" ;;
    *) usage ;;
esac
