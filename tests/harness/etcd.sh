#!/bin/sh
# A throwaway three-member etcd 3.4 cluster for tests, TLS everywhere.
#
# Usage:
#   etcd.sh start DIR BASEPORT
#                             members n1, n2, n3 on 127.0.0.1: client
#                             ports BASEPORT, +1, +2, peer ports
#                             BASEPORT+10, +11, +12; data in DIR/nK (or, where
#                             /dev/shm is writable, a directory there
#                             that stop removes: fsync on tmpfs), log
#                             DIR/nK.log, pid DIR/nK.pid; waits (60 s)
#                             until all three answer etcdctl endpoint
#                             health, else prints the logs' tails and
#                             exits 1; exit 4 when one of the six ports
#                             was taken before the bind (the caller
#                             chooses again)
#   etcd.sh kill DIR K [SIG]  signals member K (default KILL) and, unless
#                             SIG is STOP or CONT, waits until it is gone
#   etcd.sh restart DIR K     starts member K again on its data dir
#                             (--initial-cluster-state existing), waits
#                             until it is healthy
#   etcd.sh leader DIR        prints the K of the current leader
#   etcd.sh stop DIR          SIGTERM (then SIGKILL) every member, delete
#                             DIR's files (idempotent)
#   etcd.sh status DIR        one line per member; exit 0 if all three
#                             run, 3 if not
#
# Clients must present a certificate of the harness CA
# (--client-cert-auth; ca.sh's client.pem), and so must peers
# (--peer-client-cert-auth).  The CA is tests/harness/ca.sh's, made in
# $TALLY_TEST_TLS_DIR when that is set (shared, kept by stop), else in
# DIR/tls (deleted by stop).  The members' certificate is not ca.sh's
# server certificate: etcd's JSON gateway dials its own gRPC port with
# the member's certificate as a client certificate, and a peer presents
# it as one too, so it needs clientAuth beside serverAuth; it is made
# here (DIR/member.pem, .key, signed by the harness CA, SAN IP:127.0.0.1
# and DNS:localhost).
#
# Limits: --max-txn-ops 1024, --max-request-bytes 4194304 (headroom over
# what tally packs in one transaction); no auto-compaction.
# --heartbeat-interval 250 --election-timeout 2500: a loaded two-core
# machine must not see elections for nothing.
#
# DIR/env (sourceable) exports TALLY_TEST_ETCD_ENDPOINTS (comma-separated
# https URLs, n1 first), TALLY_TEST_ETCD_CA, TALLY_TEST_ETCD_CERT,
# TALLY_TEST_ETCD_KEY (the client's certificate and key),
# TALLY_TEST_ETCD_DIR, TALLY_TEST_ETCD_MAX_TXN_OPS,
# TALLY_TEST_ETCD_MAX_REQUEST_BYTES, and what ca.sh's env says
# (TALLY_TEST_CA, TALLY_TEST_CA_OTHER, TALLY_TEST_CA_CLIENT_OTHER_*, ...).
set -eu

me=etcd.sh
here=$(cd "$(dirname "$0")" && pwd -P)
die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }

MAX_TXN_OPS=1024
MAX_REQUEST_BYTES=4194304

usage() {
    cat >&2 <<EOF
usage: $me start DIR BASEPORT
       $me kill DIR K [SIG]
       $me restart DIR K
       $me leader DIR
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

pid_of() { [ -f "$1/n$2.pid" ] && head -n 1 "$1/n$2.pid" 2>/dev/null || true; }

# Member K of DIR runs: its pid is alive and is an etcd (not a pid reused).
running() {
    p=$(pid_of "$1" "$2")
    [ -n "$p" ] && alive "$p" && grep -q etcd "/proc/$p/comm" 2>/dev/null
}

port_busy() {
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Htn state listening state established state syn-sent state close-wait "sport = :$1" 2>/dev/null)" ]
    else
        command -v bash >/dev/null 2>&1 &&
            timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
    fi
}

# DIR/conf: what start decided, for kill, restart, leader and stop.
load_conf() {
    [ -f "$1/conf" ] || die "no cluster in $1 ($1/conf missing)"
    . "$1/conf"
}

etcdctl_() {
    ETCDCTL_API=3 etcdctl --cacert "$CA" --cert "$TLS/client.pem" \
        --key "$TLS/client.key" --dial-timeout 2s --command-timeout 3s "$@"
}

client_url() { echo "https://127.0.0.1:$((BASE + $1 - 1))"; }
peer_url() { echo "https://127.0.0.1:$((BASE + $1 + 9))"; }

# start_member DIR K STATE: etcd in its own session, stdin closed.
start_member() {
    D=$1 k=$2
    cu=$(client_url "$k") pu=$(peer_url "$k")
    setsid etcd --name "n$k" --data-dir "${DATA:-$D}/n$k" \
        --listen-client-urls "$cu" --advertise-client-urls "$cu" \
        --listen-peer-urls "$pu" --initial-advertise-peer-urls "$pu" \
        --initial-cluster "$CLUSTER" --initial-cluster-state "$3" \
        --initial-cluster-token "$TOKEN" \
        --cert-file "$D/member.pem" --key-file "$D/member.key" \
        --trusted-ca-file "$CA" --client-cert-auth \
        --peer-cert-file "$D/member.pem" --peer-key-file "$D/member.key" \
        --peer-trusted-ca-file "$CA" --peer-client-cert-auth \
        --max-txn-ops "$MAX_TXN_OPS" --max-request-bytes "$MAX_REQUEST_BYTES" \
        --heartbeat-interval 250 --election-timeout 2500 \
        </dev/null >>"$D/n$k.log" 2>&1 &
    echo $! >"$D/n$k.pid"
}

tails() {
    for k in 1 2 3; do
        [ -f "$1/n$k.log" ] || continue
        echo "--- $1/n$k.log (tail)" >&2
        tail -n 15 "$1/n$k.log" >&2 || true
    done
}

# wait_healthy DIR K...: until every member K answers endpoint health, 60 s.
wait_healthy() {
    D=$1; shift
    eps=
    for k in "$@"; do eps="$eps${eps:+,}$(client_url "$k")"; done
    end=$(($(date +%s) + 60))
    while :; do
        etcdctl_ --endpoints "$eps" endpoint health >/dev/null 2>&1 && return 0
        for k in "$@"; do
            running "$D" "$k" || { say "member n$k exited"; return 1; }
        done
        [ "$(date +%s)" -lt "$end" ] || { say "not healthy after 60 s: $eps"; return 1; }
        sleep 0.3
    done
}

# The members' certificate: serverAuth and clientAuth (see above).
make_member_cert() {
    [ -s "$1/member.pem" ] && [ -s "$1/member.key" ] && return 0
    cat >"$1/.member.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[m]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:localhost, IP:127.0.0.1, DNS:etcd
EOF
    serial=0x4$(head -c 15 /dev/urandom | od -An -tx1 | tr -d ' \n')
    openssl req -x509 -config "$1/.member.cnf" -extensions m \
        -newkey ec -pkeyopt ec_paramgen_curve:P-256 -noenc \
        -keyout "$1/member.key" -out "$1/member.pem" -days 1 \
        -set_serial "$serial" -sha256 -subj "/O=tally tests/CN=etcd" \
        -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" >"$1/.openssl.log" 2>&1 || {
        cat "$1/.openssl.log" >&2
        return 1
    }
    chmod 600 "$1/member.key"
    rm -f "$1/.member.cnf" "$1/.openssl.log"
}

do_start() {
    D=$1 BASE=$2
    case "$BASE" in ''|*[!0-9]*) die "BASEPORT must be a number, got '$BASE'" ;; esac
    [ "$BASE" -ge 1024 ] && [ $((BASE + 12)) -le 65535 ] ||
        die "BASEPORT $BASE: the ports BASEPORT..BASEPORT+12 must be in 1024..65535"
    command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1 ||
        die "no etcd or etcdctl (tools/deps.sh installs etcd-server and etcd-client)"
    mkdir -p "$D" || die "cannot create $D"
    D=$(cd "$D" && pwd -P)
    for k in 1 2 3; do running "$D" "$k" && die "member n$k already runs in $D"; done
    for p in $BASE $((BASE + 1)) $((BASE + 2)) $((BASE + 10)) $((BASE + 11)) $((BASE + 12)); do
        port_busy "$p" && { echo "$me: port $p is taken" >&2; exit 4; }
    done
    umask 077
    TLS=${TALLY_TEST_TLS_DIR:-$D/tls}
    sh "$here/ca.sh" make "$TLS" ||
        { do_stop "$D"; die "cannot make the TLS certificates in $TLS (ca.sh)"; }
    TLS=$(cd "$TLS" && pwd -P)
    CA=$TLS/ca.pem
    make_member_cert "$D" ||
        { do_stop "$D"; die "cannot make the members' certificate in $D"; }
    CLUSTER="n1=$(peer_url 1),n2=$(peer_url 2),n3=$(peer_url 3)"
    TOKEN=tally-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
    # The members' data on tmpfs when there is one: their fsyncs are then
    # nearly free on a loaded test machine (a test kills processes, never
    # the machine, so nothing is lost); DIR otherwise.
    # Each member preallocates a 64 MiB WAL: only with 1 GiB free there.
    DATA=$D
    shm_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
    if [ "${shm_kb:-0}" -ge 1048576 ] && [ -w /dev/shm ] &&
        DATA=$(mktemp -d /dev/shm/tally-etcd.XXXXXX 2>/dev/null); then :; else DATA=$D; fi
    cat >"$D/conf" <<EOF
BASE=$BASE
TLS=$(shquote "$TLS")
CA=$(shquote "$CA")
CLUSTER=$(shquote "$CLUSTER")
TOKEN=$TOKEN
DATA=$(shquote "$DATA")
EOF
    for k in 1 2 3; do start_member "$D" "$k" new; done
    if ! wait_healthy "$D" 1 2 3; then
        tails "$D"
        if grep -qs 'address already in use' "$D"/n[123].log; then
            do_stop "$D"
            echo "$me: a port of $BASE..$((BASE + 12)) was taken meanwhile" >&2
            exit 4
        fi
        do_stop "$D"
        die "the etcd cluster on ports $BASE.. did not come up (see above)"
    fi
    {
        echo "export TALLY_TEST_ETCD_ENDPOINTS=$(client_url 1),$(client_url 2),$(client_url 3)"
        echo "export TALLY_TEST_ETCD_CA=$(shquote "$CA")"
        echo "export TALLY_TEST_ETCD_CERT=$(shquote "$TLS/client.pem")"
        echo "export TALLY_TEST_ETCD_KEY=$(shquote "$TLS/client.key")"
        echo "export TALLY_TEST_ETCD_DIR=$(shquote "$D")"
        echo "export TALLY_TEST_ETCD_MAX_TXN_OPS=$MAX_TXN_OPS"
        echo "export TALLY_TEST_ETCD_MAX_REQUEST_BYTES=$MAX_REQUEST_BYTES"
        cat "$TLS/env"
    } >"$D/env"
}

member_arg() {
    case "$1" in 1|2|3) ;; *) die "K is 1, 2 or 3, got '$1'" ;; esac
}

do_kill() {
    D=$1 k=$2 sig=${3:-KILL}
    member_arg "$k"
    load_conf "$D"
    running "$D" "$k" || die "member n$k does not run in $D"
    p=$(pid_of "$D" "$k")
    kill -s "$sig" "$p" || die "kill -s $sig $p failed"
    case "$sig" in STOP|CONT|SIGSTOP|SIGCONT) return 0 ;; esac
    i=0
    while alive "$p"; do
        [ $i -lt 200 ] || die "member n$k (pid $p) still there 20 s after SIG$sig"
        sleep 0.1
        i=$((i + 1))
    done
}

do_restart() {
    D=$1 k=$2
    member_arg "$k"
    load_conf "$D"
    running "$D" "$k" && die "member n$k already runs in $D"
    start_member "$D" "$k" existing
    wait_healthy "$D" "$k" || { tails "$D"; die "member n$k did not come back"; }
}

do_leader() {
    load_conf "$1"
    eps="$(client_url 1),$(client_url 2),$(client_url 3)"
    # A member that is down makes etcdctl fail but print the others.
    out=$(etcdctl_ --endpoints "$eps" endpoint status -w simple 2>/dev/null || true)
    # ENDPOINT, ID, VERSION, DB SIZE, IS LEADER, ...
    ep=$(printf '%s\n' "$out" | awk -F', ' '$5 == "true" { print $1; exit }')
    [ -n "$ep" ] || die "no member says it leads"
    for k in 1 2 3; do
        [ "$ep" = "$(client_url "$k")" ] && { echo "$k"; return 0; }
    done
    die "the leader $ep is not a member of $1"
}

do_stop() {
    [ -d "$1" ] || return 0
    DATA=
    [ -f "$1/conf" ] && . "$1/conf"
    for k in 1 2 3; do
        running "$1" "$k" || continue
        kill -TERM "$(pid_of "$1" "$k")" 2>/dev/null || true
    done
    for k in 1 2 3; do
        p=$(pid_of "$1" "$k")
        [ -n "$p" ] || continue
        i=0
        while alive "$p" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        if alive "$p" && grep -q etcd "/proc/$p/comm" 2>/dev/null; then
            say "etcd $p ignored SIGTERM; SIGKILL"
            kill -KILL "$p" 2>/dev/null || true
            sleep 0.3
        fi
    done
    for k in 1 2 3; do
        rm -rf "$1/n$k"
        rm -f "$1/n$k.pid" "$1/n$k.log"
    done
    case "${DATA:-}" in
    /dev/shm/tally-etcd.*) rm -rf "$DATA" ;;
    esac
    rm -f "$1/env" "$1/conf" "$1/member.pem" "$1/member.key" \
        "$1/.member.cnf" "$1/.openssl.log"
    rm -rf "$1/tls"
    rmdir "$1" 2>/dev/null || true
}

do_status() {
    n=0
    for k in 1 2 3; do
        if running "$1" "$k"; then
            echo "n$k: running (pid $(pid_of "$1" "$k"))"
            n=$((n + 1))
        else
            echo "n$k: not running"
        fi
    done
    [ $n -eq 3 ]
}

[ $# -ge 2 ] || usage
case "$1" in
    start) [ $# -eq 3 ] || usage; do_start "$2" "$3" ;;
    kill) [ $# -eq 3 ] || [ $# -eq 4 ] || usage; do_kill "$2" "$3" "${4:-KILL}" ;;
    restart) [ $# -eq 3 ] || usage; do_restart "$2" "$3" ;;
    leader) [ $# -eq 2 ] || usage; do_leader "$2" ;;
    stop) [ $# -eq 2 ] || usage; do_stop "$2" ;;
    status) [ $# -eq 2 ] || usage; if do_status "$2"; then exit 0; else exit 3; fi ;;
    *) usage ;;
esac
