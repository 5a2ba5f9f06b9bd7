#!/bin/sh
# Install the Debian packages tally needs to build and test.
#
# Usage: tools/deps.sh [--check]
#   --check   only report missing packages (exit 1 if any), install nothing
#
# Also Node (Debian's nodejs and npm, only when `node` or `npm` is absent:
# a Node build with its own npm conflicts with Debian's npm package) and the
# npm packages of tests/harness/oidc (the OIDC provider fixture and the
# relying party that signs a user in against it, pinned by
# its package-lock.json), installed there by `npm ci` when its node_modules
# is missing, so no test fetches anything.
#
# Fast no-op when everything is installed, so build scripts and CI can call it
# unconditionally; apt-get update only runs when something actually has to be
# installed.
set -eu

PACKAGES="liblmdb-dev lmdb-utils libmsgpack-dev libsodium-dev libpq-dev
librabbitmq-dev check libyaml-dev libjansson-dev pkg-config gcc make clang-14
libclang-rt-14-dev postgresql rabbitmq-server graphviz curl procps mandoc gdb
python3 python3-cryptography libcurl4-openssl-dev libmariadb-dev
mariadb-server mariadb-client libhiredis-dev redis-server redis-tools libssl-dev
ceph-mon ceph-osd radosgw ceph-common openssl tcpdump binutils tzdata
etcd-server etcd-client python3-pika libmicrohttpd-dev prometheus
dpkg-dev debhelper lintian systemd util-linux adduser man-db git
chromium python3-websocket"

die() { echo "deps.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")/.." && pwd -P)
for tool in node npm; do
    command -v "$tool" >/dev/null 2>&1 || {
        PACKAGES="$PACKAGES nodejs npm"
        break
    }
done
oidc_dir=$here/tests/harness/oidc
npm_ready() {
    [ -f "$oidc_dir/node_modules/oidc-provider/package.json" ] &&
    [ -f "$oidc_dir/node_modules/openid-client/package.json" ]
}
npm_install() {
    npm_ready && return 0
    if [ "$check_only" = yes ]; then
        echo "deps.sh: missing: npm packages of $oidc_dir (npm ci)" >&2
        return 1
    fi
    echo "deps.sh: npm ci in $oidc_dir" >&2
    (cd "$oidc_dir" && npm ci --no-audit --no-fund) ||
        die "npm ci failed in $oidc_dir"
}

check_only=no
case "${1:-}" in
    --check) check_only=yes ;;
    "") ;;
    *) die "usage: tools/deps.sh [--check]" ;;
esac

command -v dpkg-query >/dev/null 2>&1 ||
    die "dpkg-query not found: this script only knows Debian/Ubuntu; install the equivalents of: $(printf '%s ' $PACKAGES)"

# One dpkg-query for all of them (it exits non-zero if any is unknown, hence
# the || true). "install ok installed" is the only state in which the files
# are really there; half-configured or removed-with-config packages count as
# missing.
# shellcheck disable=SC2086  # $PACKAGES is a word list on purpose
installed=$(dpkg-query -W -f='${Package} ${Status}\n' $PACKAGES 2>/dev/null |
    sed -n 's/ install ok installed$//p' || true)
missing=
for p in $PACKAGES; do
    printf '%s\n' "$installed" | grep -qx -- "$p" || missing="$missing $p"
done

if [ -z "$missing" ]; then
    npm_install || exit 1
    exit 0
fi

if [ "$check_only" = yes ]; then
    echo "deps.sh: missing:$missing" >&2
    npm_install || true
    exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
else
    die "missing packages:$missing; run this script as root or install sudo"
fi

echo "deps.sh: installing:$missing" >&2

# The test suite runs its own throwaway PostgreSQL/RabbitMQ on private ports;
# the distribution services that the postinst scripts would start are not
# needed and would hold ports and data we do not want. Debian's policy-rc.d
# (exit 101) tells invoke-rc.d/deb-systemd-invoke not to start them. Only add
# one for the duration of the install, and only if the admin has none.
policy=/usr/sbin/policy-rc.d
made_policy=no
case " $missing " in
    *" postgresql "*|*" rabbitmq-server "*|*" mariadb-server "*|*" redis-server "*|*" ceph-mon "*|*" ceph-osd "*|*" radosgw "*|*" etcd-server "*)
        if [ ! -e "$policy" ]; then
            printf '#!/bin/sh\n# temporary, from tally tools/deps.sh\nexit 101\n' |
                $SUDO tee "$policy" >/dev/null
            $SUDO chmod 755 "$policy"
            made_policy=yes
        fi
        ;;
esac
cleanup() {
    if [ "$made_policy" = yes ]; then
        $SUDO rm -f "$policy" || echo "deps.sh: could not remove $policy, remove it by hand" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

$SUDO apt-get update || die "apt-get update failed"
# shellcheck disable=SC2086  # $missing is a word list on purpose
$SUDO env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends $missing ||
    die "apt-get install failed for:$missing"

npm_install
