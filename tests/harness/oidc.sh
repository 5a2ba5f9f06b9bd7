#!/bin/sh
# A throwaway OpenID Connect provider (oidc-provider 8 on Node) for tests.
#
# Usage:
#   oidc.sh start DIR [PORT [TLSPORT]]
#                             tests/harness/oidc-server.js on 127.0.0.1:PORT
#                             (default 18480), issuer http://127.0.0.1:PORT,
#                             and over https on 127.0.0.1:TLSPORT (issuer
#                             https://127.0.0.1:TLSPORT; the same clients;
#                             a certificate of the harness CA,
#                             tests/harness/ca.sh); without TLSPORT (or
#                             with 0) a port the kernel picks when the
#                             server binds, so no other socket holds it;
#                             a fresh initial access token in DIR/iat and a
#                             signing key in DIR/jwks.json (both kept, with
#                             DIR/store.json, by a restart: stop DIR keep);
#                             writes DIR/env
#   oidc.sh stop DIR [keep]   SIGTERM (then SIGKILL); without keep, delete
#                             DIR's files (idempotent)
#   oidc.sh status DIR        exit 0 if running, 3 if not
#
# DIR/env (sourceable) exports TALLY_TEST_OIDC_ISSUER, TALLY_TEST_OIDC_PORT,
# TALLY_TEST_OIDC_IATFILE (the initial access token's file, 0600),
# TALLY_TEST_OIDC_TLS_PORT, TALLY_TEST_OIDC_TLS_ISSUER, TALLY_TEST_OIDC_CA,
# and what ca.sh's env says (TALLY_TEST_CA = _CA: the CA that signed the
# server's certificate, for curl --cacert; TALLY_TEST_CA_OTHER,
# _IMPOSTOR_*, _WRONGHOST_*). The CA is made in $TALLY_TEST_TLS_DIR when
# that is set (shared, kept by stop), else in DIR/tls (kept by stop DIR
# keep, deleted by stop).
# The package comes from tests/harness/oidc/node_modules (tools/deps.sh runs
# npm ci there); nothing is fetched here: a missing one fails the start.
set -eu

me=oidc.sh
here=$(cd "$(dirname "$0")" && pwd -P)
die() { echo "$me: $*" >&2; exit 1; }

usage() {
    echo "usage: $me start DIR [PORT [TLSPORT]] | stop DIR [keep] | status DIR" >&2
    exit 2
}

shquote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

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
       grep -q node "/proc/$pid/comm" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        i=0
        while alive "$pid" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        if alive "$pid"; then
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
    fi
    rm -f "$1/pid" "$1/ready" "$1/env"
    [ "${2:-}" = keep ] && return 0
    rm -f "$1/iat" "$1/jwks.json" "$1/store.json" "$1/store.json.tmp" "$1/log"
    rm -rf "$1/tls"
    rmdir "$1" 2>/dev/null || true
}

do_start() {
    D=$1 PORT=${2:-18480}; [ -n "$PORT" ] || PORT=18480
    TLSPORT=${3:-0}
    command -v node >/dev/null 2>&1 || die "no node (tools/deps.sh installs nodejs)"
    [ -f "$here/oidc/node_modules/oidc-provider/package.json" ] ||
        die "no oidc-provider in $here/oidc/node_modules (run tools/deps.sh)"
    mkdir -p "$D" || die "cannot create $D"
    D=$(cd "$D" && pwd -P)
    is_running "$D" && die "a server is already running in $D"
    umask 077
    [ -s "$D/iat" ] ||
        head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$D/iat"
    [ -s "$D/jwks.json" ] || node -e '
        const c = require("crypto");
        const { privateKey } = c.generateKeyPairSync("rsa", { modulusLength: 2048 });
        const k = privateKey.export({ format: "jwk" });
        k.use = "sig"; k.alg = "RS256"; k.kid = "t1";
        process.stdout.write(JSON.stringify({ keys: [k] }));' >"$D/jwks.json"
    TLS=${TALLY_TEST_TLS_DIR:-$D/tls}
    sh "$here/ca.sh" make "$TLS" oidc || die "cannot make the TLS certificates in $TLS (ca.sh)"
    TLS=$(cd "$TLS" && pwd -P)
    rm -f "$D/ready"
    nohup node "$here/oidc-server.js" "$D" "$PORT" "$TLSPORT" "$TLS/oidc.pem" \
        "$TLS/oidc.key" >>"$D/log" 2>&1 </dev/null &
    echo $! >"$D/pid"
    i=0
    while [ $i -lt 100 ]; do
        if [ -s "$D/ready" ] && [ "$(grep -c . "$D/ready")" -ge 2 ]; then
            TLSPORT=$(sed -n 2p "$D/ready")
            cat >"$D/env" <<EOF
export TALLY_TEST_OIDC_ISSUER=http://127.0.0.1:$PORT
export TALLY_TEST_OIDC_PORT=$PORT
export TALLY_TEST_OIDC_IATFILE=$(shquote "$D/iat")
export TALLY_TEST_OIDC_TLS_PORT=$TLSPORT
export TALLY_TEST_OIDC_TLS_ISSUER=https://127.0.0.1:$TLSPORT
export TALLY_TEST_OIDC_CA=$(shquote "$TLS/ca.pem")
EOF
            cat "$TLS/env" >>"$D/env"   # TALLY_TEST_CA, ... (ca.sh)
            return 0
        fi
        is_running "$D" || break
        sleep 0.05
        i=$((i + 1))
    done
    tail -n 20 "$D/log" >&2 2>/dev/null || true
    # PORT taken between the caller's look and the listen: exit 4, so the
    # caller may choose another (lib.sh's t_oidc_start does).
    if grep -qs "EADDRINUSE.*127.0.0.1:$PORT\$" "$D/log"; then
        do_stop "$D" keep
        rm -f "$D/log"
        echo "$me: port $PORT was taken meanwhile" >&2
        exit 4
    fi
    do_stop "$D" keep
    die "the OIDC provider on port $PORT (https $TLSPORT) did not start within 5 s"
}

[ $# -ge 2 ] || usage
case "$1" in
    start) [ $# -le 4 ] || usage; do_start "$2" "${3:-}" "${4:-}" ;;
    stop) do_stop "$2" "${3:-}" ;;
    status) if is_running "$2"; then exit 0; else exit 3; fi ;;
    *) usage ;;
esac
