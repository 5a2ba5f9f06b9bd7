#!/bin/sh
# A throwaway single-node Ceph with radosgw (an S3 object store) for tests.
#
# Usage:
#   ceph.sh start DIR [PORT [TLSPORT]]
#                             one ceph-mon, one ceph-osd on memstore and
#                             radosgw on 127.0.0.1:PORT (default 7480),
#                             and with TLS on 127.0.0.1:TLSPORT (default
#                             PORT+7; beast's ssl_endpoint, a certificate
#                             of the harness CA, tests/harness/ca.sh),
#                             everything under DIR (ceph.conf, data, logs,
#                             sockets, pids); the seven RGW pools made
#                             first; an admin user with caps
#                             users=*;buckets=*; writes DIR/env
#   ceph.sh stop DIR          SIGTERM rgw, osd, mon (then SIGKILL), delete
#                             DIR's files (idempotent)
#   ceph.sh status DIR        exit 0 if radosgw runs, 3 if not
#
# DIR/env (sourceable) exports TALLY_TEST_RGW_ENDPOINT (http://127.0.0.1:PORT),
# TALLY_TEST_RGW_HOST, TALLY_TEST_RGW_PORT, TALLY_TEST_RGW_ACCESS (the admin's
# access key), TALLY_TEST_RGW_SECRETFILE (a file holding its secret key),
# TALLY_TEST_RGW_TLS_PORT, TALLY_TEST_RGW_TLS_ENDPOINT
# (https://localhost:TLSPORT), TALLY_TEST_RGW_CA, and what ca.sh's env says
# (TALLY_TEST_CA = _CA: the CA that signed radosgw's certificate, for curl
# --cacert; TALLY_TEST_CA_OTHER, _IMPOSTOR_*, _WRONGHOST_*). The CA is made
# in $TALLY_TEST_TLS_DIR when that is set (shared, kept by stop), else in
# DIR/tls (deleted by stop).
# The mon and the osd take PORT+1..PORT+6 on loopback.  The data lives in
# the osd's memory (memstore): nothing survives a stop.
# The recipe and its pitfalls: ../shared/RECIPES.md (single-node Ceph RGW).
# beast runs with tcp_nodelay=1: without it every request after the first
# on a kept-alive connection waits ~40 ms (Nagle against delayed ACKs).
# debug rgw = 0: at 1 (the default) beast's access log records every query
# string, and the admin API takes a key's secret-key in the query.
set -eu

me=ceph.sh
here=$(cd "$(dirname "$0")" && pwd -P)
die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }

usage() {
    cat >&2 <<EOF
usage: $me start DIR [PORT [TLSPORT]]
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

pid_in() { [ -f "$1" ] && head -n 1 "$1" 2>/dev/null || true; }

stop_one() { # PIDFILE COMM
    pid=$(pid_in "$1")
    [ -n "$pid" ] || return 0
    if alive "$pid" && grep -q "$2" "/proc/$pid/comm" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        i=0
        while alive "$pid" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
        if alive "$pid"; then
            say "$2 $pid ignored SIGTERM; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
    fi
    rm -f "$1"
}

do_stop() {
    [ -d "$1" ] || return 0
    [ -f "$1/ceph.conf" ] || [ -f "$1/env" ] || [ -d "$1/run" ] ||
        die "$1 does not look like a ceph.sh directory; not deleting it"
    stop_one "$1/run/rgw.pid" radosgw
    stop_one "$1/run/osd.pid" ceph-osd
    stop_one "$1/run/mon.pid" ceph-mon
    rm -rf "$1/run" "$1/mon" "$1/osd" "$1/rgw" "$1/log" "$1/monmap" \
        "$1/ceph.conf" "$1/env" "$1/admin.secret" "$1/admin.json" "$1/tls"
    rmdir "$1" 2>/dev/null || true
}

uuid() { cat /proc/sys/kernel/random/uuid; }

do_start() {
    D=$1 PORT=$2 TLSPORT=${3:-$(($2 + 7))}
    for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph; do
        command -v $b >/dev/null 2>&1 ||
            die "no $b (tools/deps.sh installs ceph-mon ceph-osd radosgw ceph-common)"
    done
    mkdir -p "$D" || die "cannot create $D"
    D=$(cd "$D" && pwd -P)
    [ -f "$D/run/rgw.pid" ] && alive "$(pid_in "$D/run/rgw.pid")" &&
        die "a radosgw is already running in $D"
    umask 077
    mkdir -p "$D/run" "$D/mon" "$D/osd/ceph-0" "$D/rgw" "$D/log"
    MONP=$((PORT + 1)) OSDLO=$((PORT + 2)) OSDHI=$((PORT + 6))
    TLS=${TALLY_TEST_TLS_DIR:-$D/tls}
    sh "$here/ca.sh" make "$TLS" rgw ||
        { do_stop "$D"; die "cannot make the TLS certificates in $TLS (ca.sh)"; }
    TLS=$(cd "$TLS" && pwd -P)
    FSID=$(uuid)
    cat >"$D/ceph.conf" <<EOF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$MONP]
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind port min = $OSDLO
ms bind port max = $OSDHI
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc secure
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
paxos propose interval = 0.01
mon cluster log to file = false
mon warn on pool no redundancy = false
run dir = $D/run
admin socket = $D/run/\$name.asok
log file = $D/log/\$name.log
keyring = $D/run/keyring
[mon.a]
mon data = $D/mon
pid file = $D/run/mon.pid
[osd]
osd objectstore = memstore
osd data = $D/osd/ceph-\$id
pid file = $D/run/osd.pid
osd max object name len = 256
osd max object namespace len = 64
[client.rgw.a]
rgw data = $D/rgw
pid file = $D/run/rgw.pid
rgw frontends = beast endpoint=127.0.0.1:$PORT ssl_endpoint=127.0.0.1:$TLSPORT ssl_certificate=$TLS/rgw.pem ssl_private_key=$TLS/rgw.key tcp_nodelay=1
debug rgw = 0/0
EOF
    C="-c $D/ceph.conf"
    monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MONP]" \
        "$D/monmap" >/dev/null 2>&1 || die "monmaptool failed"
    ceph-mon $C --mkfs -i a --monmap "$D/monmap" >"$D/log/mkfs.out" 2>&1 ||
        { cat "$D/log/mkfs.out" >&2; do_stop "$D"; die "ceph-mon --mkfs failed"; }
    ceph-mon $C -i a >>"$D/log/mkfs.out" 2>&1 ||
        { tail "$D/log/mon.a.log" >&2 || true; do_stop "$D"; die "ceph-mon did not start"; }
    OU=$(uuid)
    ID=$(timeout 30 ceph $C osd new "$OU" 2>>"$D/log/mkfs.out") ||
        { do_stop "$D"; die "ceph osd new failed (mon not answering?)"; }
    [ "$ID" = 0 ] || { do_stop "$D"; die "unexpected osd id $ID"; }
    ceph-osd $C -i "$ID" --mkfs --osd-uuid "$OU" >>"$D/log/mkfs.out" 2>&1 ||
        { do_stop "$D"; die "ceph-osd --mkfs failed (see $D/log)"; }
    ceph-osd $C -i "$ID" >>"$D/log/mkfs.out" 2>&1 ||
        { do_stop "$D"; die "ceph-osd did not start"; }
    i=0
    until timeout 10 ceph $C osd stat 2>/dev/null | grep -q '1 up'; do
        i=$((i + 1))
        [ $i -lt 200 ] || { do_stop "$D"; die "the osd did not come up in 20 s"; }
        sleep 0.1
    done
    # Made up front: left to radosgw, each pool costs its first request ~2 s.
    # One client for all of them (Debian's python3-rados, which the ceph
    # CLI itself runs on): fourteen ceph processes took ~10 s.
    timeout 60 /usr/bin/python3 - "$D/ceph.conf" >>"$D/log/mkfs.out" 2>&1 <<'PY' ||
import json, sys, rados
c = rados.Rados(conffile=sys.argv[1])
c.connect(timeout=30)
for p in (".rgw.root", "default.rgw.control", "default.rgw.meta",
          "default.rgw.log", "default.rgw.buckets.index",
          "default.rgw.buckets.data", "default.rgw.buckets.non-ec"):
    for cmd in ({"prefix": "osd pool create", "pool": p, "pg_num": 8,
                 "pgp_num": 8},
                {"prefix": "osd pool application enable", "pool": p,
                 "app": "rgw"}):
        rc, out, err = c.mon_command(json.dumps(cmd), b"", timeout=30)
        if rc != 0:
            sys.exit("%s %s: %s" % (cmd["prefix"], p, err))
c.shutdown()
PY
        { tail -n 3 "$D/log/mkfs.out" >&2; do_stop "$D"; die "creating the pools failed"; }
    radosgw $C -n client.rgw.a >>"$D/log/mkfs.out" 2>&1 ||
        { do_stop "$D"; die "radosgw did not start"; }
    i=0
    until curl -s -o /dev/null -m 2 "http://127.0.0.1:$PORT/"; do
        i=$((i + 1))
        [ $i -lt 200 ] || { tail -n 20 "$D/log/client.rgw.a.log" >&2 || true
            do_stop "$D"; die "radosgw on port $PORT did not answer in 20 s"; }
        sleep 0.1
    done
    # The TLS endpoint, verified as a client trusting the harness CA would.
    i=0
    until curl -s -o /dev/null -m 2 --cacert "$TLS/ca.pem" "https://localhost:$TLSPORT/"; do
        i=$((i + 1))
        [ $i -lt 50 ] || { grep -i 'ssl\|tls\|frontend' "$D/log/client.rgw.a.log" >&2 || true
            curl -sS -o /dev/null -m 2 --cacert "$TLS/ca.pem" "https://localhost:$TLSPORT/" || true
            do_stop "$D"; die "radosgw's TLS endpoint on port $TLSPORT did not answer (verified) in 5 s"; }
        sleep 0.1
    done
    AK=TLADMIN$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F)
    SK=$(head -c 30 /dev/urandom | od -An -tx1 | tr -d ' \n')
    timeout 60 radosgw-admin $C -n client.rgw.a user create --uid=tally-admin \
        --display-name="tally test admin" --access-key="$AK" \
        --secret-key="$SK" --caps="users=*;buckets=*" >"$D/admin.json" 2>>"$D/log/mkfs.out" ||
        { tail -n 5 "$D/log/mkfs.out" >&2; do_stop "$D"; die "radosgw-admin user create failed"; }
    rm -f "$D/admin.json"
    printf '%s\n' "$SK" >"$D/admin.secret"
    cat >"$D/env" <<EOF
export TALLY_TEST_RGW_ENDPOINT=http://127.0.0.1:$PORT
export TALLY_TEST_RGW_HOST=127.0.0.1
export TALLY_TEST_RGW_PORT=$PORT
export TALLY_TEST_RGW_ACCESS=$AK
export TALLY_TEST_RGW_SECRETFILE=$(shquote "$D/admin.secret")
export TALLY_TEST_RGW_TLS_PORT=$TLSPORT
export TALLY_TEST_RGW_TLS_ENDPOINT=https://localhost:$TLSPORT
export TALLY_TEST_RGW_CA=$(shquote "$TLS/ca.pem")
EOF
    cat "$TLS/env" >>"$D/env"   # TALLY_TEST_CA, TALLY_TEST_CA_OTHER, ... (ca.sh)
}

[ $# -ge 2 ] || usage
case "$1" in
    start) [ $# -le 4 ] || usage; do_start "$2" "${3:-7480}" "${4:-}" ;;
    stop) [ $# -eq 2 ] || usage; do_stop "$2" ;;
    status) p=$(pid_in "$2/run/rgw.pid")
        if [ -n "$p" ] && alive "$p"; then exit 0; else exit 3; fi ;;
    *) usage ;;
esac
