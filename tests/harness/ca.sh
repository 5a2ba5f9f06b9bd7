#!/bin/sh
# A throwaway certificate authority for the test servers' TLS listeners.
#
# Usage:
#   ca.sh make DIR [NAME...]   make (or keep) the CA and the fixtures below
#                              in DIR, and a server key and certificate for
#                              each NAME; writes DIR/env; prints nothing on
#                              success
#
# Everything is ECDSA P-256 (every harness server takes it: PostgreSQL,
# MariaDB, Redis, RabbitMQ's Erlang ssl, radosgw's beast, Node), valid for
# one day from when it is made. Nothing here is ever committed: the harness
# makes it at start. Keys are 0600, certificates 0644.
#
# What DIR holds:
#   ca.pem, ca.key             the CA the servers' certificates chain to
#   NAME.pem, NAME.key         a server certificate signed by the CA, with
#                              subjectAltName DNS:localhost, IP:127.0.0.1,
#                              DNS:NAME (extendedKeyUsage serverAuth)
#   other-ca.pem, other-ca.key an unrelated CA
#   impostor.pem, impostor.key a certificate for localhost/127.0.0.1 signed by
#                              the unrelated CA (a server impersonating
#                              another: a client trusting ca.pem must refuse it)
#   wrong-host.pem, wrong-host.key
#                              a certificate of the right CA for DNS:wrong.example
#                              only (a client checking the host must refuse it)
#   client.pem, client.key     a client certificate of the CA (extendedKeyUsage
#                              clientAuth), CN tally_cert_admin: the admin a
#                              server that asks for one lets in (PostgreSQL's
#                              cert method maps the CN to the role)
#   client-other.pem, client-other.key
#                              the same CN signed by the unrelated CA: a server
#                              verifying clients must refuse it
#   env                        sourceable: exports TALLY_TEST_CA (ca.pem: a
#                              server verifies clients against it too),
#                              TALLY_TEST_CA_OTHER (other-ca.pem),
#                              TALLY_TEST_CA_IMPOSTOR_CERT/_KEY,
#                              TALLY_TEST_CA_WRONGHOST_CERT/_KEY,
#                              TALLY_TEST_CA_CLIENT_CERT/_KEY,
#                              TALLY_TEST_CA_CLIENT_OTHER_CERT/_KEY and
#                              TALLY_TEST_CA_CLIENT_CN
#
# Idempotent: what exists is kept (so servers already started with its
# certificates stay valid), what is missing is made; a CA that expires
# within the hour is replaced with everything it signed. Safe to run
# concurrently on one DIR (flock on DIR/.lock).
set -eu

me=ca.sh
die() { echo "$me: $*" >&2; exit 1; }
usage() { echo "usage: $me make DIR [NAME...]" >&2; exit 2; }

shquote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

command -v openssl >/dev/null 2>&1 || die "no openssl (tools/deps.sh installs it)"

# A certificate's serial: 16 random bytes, first bit clear (positive).
serial() { printf '0x%s' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' | sed 's/^./4/')"; }

# run CMD...: CMD's output goes to DIR/.openssl.log, shown only if it fails.
run() {
    "$@" >"$D/.openssl.log" 2>&1 || {
        cat "$D/.openssl.log" >&2
        die "failed: $*"
    }
}

# One openssl call per certificate: the key, and the certificate signed by
# CA-BASE (req -x509 -CA, OpenSSL 3) or by itself.
make_pair() { # BASE CN EXTENSIONS [CA-BASE SAN]
    [ -s "$D/$1.pem" ] && [ -s "$D/$1.key" ] && return 0
    if [ $# -gt 3 ]; then
        set -- "$@" -CA "$D/$4.pem" -CAkey "$D/$4.key" -addext "subjectAltName = $5"
        b=$1 cn=$2 ext=$3; shift 5
    else
        b=$1 cn=$2 ext=$3; shift 3
    fi
    run openssl req -x509 -config "$D/.ca.cnf" -extensions "$ext" \
        -newkey ec -pkeyopt ec_paramgen_curve:P-256 -noenc \
        -keyout "$D/$b.key.tmp" -out "$D/$b.pem.tmp" -days 1 \
        -set_serial "$(serial)" -sha256 -subj "/O=tally tests/CN=$cn" "$@"
    chmod 600 "$D/$b.key.tmp"
    chmod 644 "$D/$b.pem.tmp"
    mv -f "$D/$b.key.tmp" "$D/$b.key"
    mv -f "$D/$b.pem.tmp" "$D/$b.pem"
}

do_make() {
    D=$1; shift
    for n in "$@"; do
        case "$n" in
            ''|*[!A-Za-z0-9.-]*|-*|.*) die "a NAME is letters, digits, '.' and '-' (a DNS name), got '$n'" ;;
            ca|other-ca|impostor|wrong-host|client|client-other) die "NAME '$n' is taken by the fixtures" ;;
        esac
    done
    mkdir -p "$D" || die "cannot create $D"
    D=$(cd "$D" && pwd -P)
    chmod 755 "$D"
    umask 077
    if command -v flock >/dev/null 2>&1; then
        exec 8>"$D/.lock"
        flock 8 || die "cannot lock $D/.lock"
    fi
    # A CA about to expire (a DIR left from yesterday) is remade with all
    # it signed: its certificates would stop verifying mid-test.
    if [ -s "$D/ca.pem" ] &&
       ! openssl x509 -in "$D/ca.pem" -noout -checkend 3600 >/dev/null 2>&1; then
        for f in "$D"/*.pem "$D"/*.key; do
            [ -e "$f" ] && rm -f "$f"
        done
    fi
    cat >"$D/.ca.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[v3_ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[srv]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[cli]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
    tag=$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
    make_pair ca "tally test CA $tag" v3_ca
    make_pair other-ca "tally test other CA $tag" v3_ca
    make_pair impostor impostor srv other-ca "DNS:localhost, IP:127.0.0.1"
    make_pair wrong-host wrong.example srv ca "DNS:wrong.example"
    make_pair client tally_cert_admin cli ca "DNS:tally_cert_admin"
    make_pair client-other tally_cert_admin cli other-ca "DNS:tally_cert_admin"
    for n in "$@"; do
        make_pair "$n" "$n" srv ca "DNS:localhost, IP:127.0.0.1, DNS:$n"
    done
    rm -f "$D/.ca.cnf" "$D/.openssl.log"
    {
        echo "export TALLY_TEST_CA=$(shquote "$D/ca.pem")"
        echo "export TALLY_TEST_CA_OTHER=$(shquote "$D/other-ca.pem")"
        echo "export TALLY_TEST_CA_IMPOSTOR_CERT=$(shquote "$D/impostor.pem")"
        echo "export TALLY_TEST_CA_IMPOSTOR_KEY=$(shquote "$D/impostor.key")"
        echo "export TALLY_TEST_CA_WRONGHOST_CERT=$(shquote "$D/wrong-host.pem")"
        echo "export TALLY_TEST_CA_WRONGHOST_KEY=$(shquote "$D/wrong-host.key")"
        echo "export TALLY_TEST_CA_CLIENT_CERT=$(shquote "$D/client.pem")"
        echo "export TALLY_TEST_CA_CLIENT_KEY=$(shquote "$D/client.key")"
        echo "export TALLY_TEST_CA_CLIENT_OTHER_CERT=$(shquote "$D/client-other.pem")"
        echo "export TALLY_TEST_CA_CLIENT_OTHER_KEY=$(shquote "$D/client-other.key")"
        echo "export TALLY_TEST_CA_CLIENT_CN=tally_cert_admin"
    } >"$D/env.tmp"
    chmod 644 "$D/env.tmp"
    mv -f "$D/env.tmp" "$D/env"
}

[ $# -ge 2 ] || usage
case "$1" in
    make) shift; do_make "$@" ;;
    *) usage ;;
esac
