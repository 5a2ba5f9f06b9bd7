#!/bin/sh
# A throwaway MariaDB for tests (RECIPES.md "A throwaway MariaDB 10.11").
#
# Usage:
#   mariadb.sh start DIR PORT  mariadb-install-db + mariadbd on 127.0.0.1:PORT
#                              and a unix socket; writes DIR/env, DIR/admin.pw.
#                              TLS is offered on the same port (--ssl-cert,
#                              --ssl-key, --ssl-ca; optional: a client that
#                              asks for none stays plaintext)
#   mariadb.sh stop DIR        TERM (then KILL), delete everything (idempotent)
#   mariadb.sh status DIR      exit 0 if running, 3 if not
#
# DIR/env (sourceable) exports TALLY_TEST_MARIADB_HOST, _PORT, _SOCK, _USER,
# _PWFILE, _CA, and what tests/harness/ca.sh's env says (TALLY_TEST_CA =
# _CA: the CA that signed the server's certificate, for
# --ssl-verify-server-cert --ssl-ca=...; TALLY_TEST_CA_OTHER, _IMPOSTOR_*,
# _WRONGHOST_*). The CA is made in $TALLY_TEST_TLS_DIR when that is set
# (shared, kept by stop), else in DIR/tls (deleted by stop). Note that the
# mariadb CLI takes TLS (unverified) by default when the server offers it:
# --skip-ssl for plaintext; libmariadb asks for none unless told.
# The admin is 'tally_admin'@'%' with every privilege WITH GRANT
# OPTION and the password in DIR/admin.pw (for TCP); root is reachable over
# the socket only (unix_socket authentication). The anonymous users the
# installer makes are dropped: they would shadow 'name'@'%' for connections
# from 127.0.0.1. As root the server runs as the mysql user; when that user
# cannot reach DIR, or the socket path would be too long, the server's files
# live in /tmp/tally-mariadb.* (named in DIR/realdir).
set -eu

me=mariadb.sh
here=$(cd "$(dirname "$0")" && pwd -P)
die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }
usage() {
    echo "usage: $me start DIR PORT | stop DIR | status DIR" >&2
    exit 2
}

shquote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

SRV_USER=
if [ "$(id -u)" -eq 0 ]; then
    getent passwd mysql >/dev/null 2>&1 ||
        die "running as root but there is no 'mysql' system user to run the server as"
    SRV_USER=mysql
fi
PATH=$PATH:/usr/sbin

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
        command -v bash >/dev/null 2>&1 &&
            timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
    fi
}

realdir_of() {
    if [ -f "$1/realdir" ]; then cat "$1/realdir"; else echo "$1"; fi
}

alive() {
    kill -0 "$1" 2>/dev/null || return 1
    st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    [ "$st" != Z ]
}

pid_of() {
    [ -f "$1/pid" ] && head -n 1 "$1/pid" 2>/dev/null || true
}

is_running() {
    R=$(realdir_of "$1")
    pid=$(pid_of "$R")
    [ -n "$pid" ] && alive "$pid"
}

do_stop() {
    [ -d "$1" ] || return 0
    DIR=$(cd "$1" && pwd -P)
    R=$(realdir_of "$DIR")
    pid=$(pid_of "$R")
    if [ -n "$pid" ] && alive "$pid" &&
       grep -q mariadbd "/proc/$pid/comm" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        i=0
        while alive "$pid" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
        if alive "$pid"; then
            say "mariadbd $pid ignored TERM for 30 s; KILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.5
        fi
    fi
    if [ "$R" != "$DIR" ]; then
        case "$R" in
            /tmp/tally-mariadb.*) rm -rf "$R" ;;
            *) say "not deleting unexpected realdir '$R' recorded in $DIR/realdir" ;;
        esac
    fi
    rm -rf "${DIR:?}/data" "${DIR:?}/sock" "${DIR:?}/pid" "${DIR:?}/server.log" \
           "${DIR:?}/env" "${DIR:?}/admin.pw" "${DIR:?}/realdir" \
           "${DIR:?}/install.log" "${DIR:?}/tls" "${DIR:?}/server-tls"
    rmdir "$DIR" 2>/dev/null || true
}

do_start() {
    DIR=$1
    PORT=$2
    case "$PORT" in
        ''|*[!0-9]*) die "PORT must be a number, got '$PORT'" ;;
    esac
    [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65535 ] || die "PORT must be in 1024..65535, got $PORT"
    if [ -d "$DIR" ] && is_running "$DIR"; then
        die "a server is already running for $DIR; run '$me stop $DIR' first"
    fi
    do_stop "$DIR"
    port_busy "$PORT" && die "port $PORT on 127.0.0.1 is already in use"
    command -v mariadbd >/dev/null 2>&1 ||
        die "no mariadbd (Debian's mariadb-server); run tools/deps.sh"
    mkdir -p "$DIR" || die "cannot create $DIR"
    DIR=$(cd "$DIR" && pwd -P)

    R=$DIR
    reachable=yes
    if [ -n "$SRV_USER" ] && ! runuser -u "$SRV_USER" -- test -x "$DIR" 2>/dev/null; then
        reachable=no
    fi
    if [ "$reachable" = no ] || [ ${#DIR} -gt 90 ]; then
        R=$(mktemp -d /tmp/tally-mariadb.XXXXXX) || die "mktemp failed"
        chmod 755 "$R"
        printf '%s\n' "$R" > "$DIR/realdir"
    fi
    # The server's certificate and key (ca.sh), copied where the server
    # user can read them.
    TLS=${TALLY_TEST_TLS_DIR:-$DIR/tls}
    sh "$here/ca.sh" make "$TLS" mariadb ||
        { do_stop "$DIR"; die "cannot make the TLS certificates in $TLS (ca.sh)"; }
    TLS=$(cd "$TLS" && pwd -P)
    mkdir -p "$R/data" "$R/server-tls"
    chmod 700 "$R/data" "$R/server-tls"
    (umask 077 && cp "$TLS/mariadb.pem" "$TLS/mariadb.key" "$TLS/ca.pem" "$R/server-tls/")
    if [ -n "$SRV_USER" ]; then
        chown -R "$SRV_USER:" "$R/data" "$R/server-tls"
        chown "$SRV_USER:" "$R"
    fi
    (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DIR/admin.pw")

    if ! as_srv mariadb-install-db --no-defaults --user="${SRV_USER:-$(id -un)}" \
            --datadir="$R/data" --auth-root-authentication-method=socket \
            --skip-test-db >"$R/install.log" 2>&1; then
        cat "$R/install.log" >&2
        do_stop "$DIR"
        die "mariadb-install-db failed (see above)"
    fi
    # setsid: the server is not in the caller's process group (a test's
    # kill of its group leaves it for the trap's stop).
    as_srv setsid mariadbd --no-defaults --datadir="$R/data" --socket="$R/sock" \
        --port="$PORT" --bind-address=127.0.0.1 --skip-name-resolve \
        --pid-file="$R/pid" --skip-log-bin --log-error="$R/server.log" \
        --max-connections=300 --innodb-buffer-pool-size=32M \
        --performance-schema=off --innodb-flush-log-at-trx-commit=2 \
        --ssl-cert="$R/server-tls/mariadb.pem" --ssl-key="$R/server-tls/mariadb.key" \
        --ssl-ca="$R/server-tls/ca.pem" \
        </dev/null >/dev/null 2>&1 &
    i=0
    # The installer's socket-authenticated account is the OS user's own.
    me_sql=$(id -un)
    until mariadb --no-defaults -u"$me_sql" -S "$R/sock" -e "select 1" >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 300 ]; then
            say "MariaDB did not come up on 127.0.0.1:$PORT; last lines of its log:"
            tail -n 30 "$R/server.log" >&2 2>/dev/null || true
            do_stop "$DIR"
            exit 1
        fi
        sleep 0.1
    done
    # mariadbd starts without TLS when it cannot load the certificate: a
    # server without it is a failed start.
    ssl=$(mariadb --no-defaults -u"$me_sql" -S "$R/sock" -N -B \
        -e "SELECT @@have_ssl" 2>/dev/null || true)
    if [ "$ssl" != YES ]; then
        say "MariaDB on 127.0.0.1:$PORT runs without TLS (have_ssl '$ssl'); its log:"
        grep -i 'ssl\|tls' "$R/server.log" >&2 2>/dev/null || tail -n 20 "$R/server.log" >&2 || true
        do_stop "$DIR"
        exit 1
    fi
    pw=$(cat "$DIR/admin.pw")
    if ! mariadb --no-defaults -u"$me_sql" -S "$R/sock" <<SQL
DELETE FROM mysql.global_priv WHERE User = '';
FLUSH PRIVILEGES;
CREATE USER 'tally_admin'@'%' IDENTIFIED BY '$pw';
GRANT ALL PRIVILEGES ON *.* TO 'tally_admin'@'%' WITH GRANT OPTION;
SQL
    then
        do_stop "$DIR"
        die "setting up the admin failed"
    fi
    {
        echo "export TALLY_TEST_MARIADB_HOST=127.0.0.1"
        echo "export TALLY_TEST_MARIADB_PORT=$PORT"
        echo "export TALLY_TEST_MARIADB_SOCK=$(shquote "$R/sock")"
        echo "export TALLY_TEST_MARIADB_USER=tally_admin"
        echo "export TALLY_TEST_MARIADB_PWFILE=$(shquote "$DIR/admin.pw")"
        echo "export TALLY_TEST_MARIADB_CA=$(shquote "$TLS/ca.pem")"
        cat "$TLS/env"   # TALLY_TEST_CA, TALLY_TEST_CA_OTHER, ... (ca.sh)
    } > "$DIR/env"
    say "MariaDB up on 127.0.0.1:$PORT, TLS on the same port (data in $R/data)"
}

do_status() {
    DIR=$1
    [ -d "$DIR" ] && DIR=$(cd "$DIR" && pwd -P)
    if [ -d "$DIR" ] && is_running "$DIR"; then
        echo "running: pid $(pid_of "$(realdir_of "$DIR")")"
        exit 0
    fi
    echo "not running"
    exit 3
}

[ $# -ge 2 ] || usage
case "$1" in
    start) [ $# -eq 3 ] || usage; do_start "$2" "$3" ;;
    stop)  [ $# -eq 2 ] || usage; do_stop "$2" ;;
    status) [ $# -eq 2 ] || usage; do_status "$2" ;;
    *) usage ;;
esac
