#!/bin/sh
# Debian's systemd as the init of a throwaway PID, mount, UTS and IPC
# namespace, for tests of the units the package installs: the machine's
# own init is not systemd (a CI VM or container), so the units are
# started by a real systemd all the same, with their users, directories
# and sandboxing.
#
# The manager loads units from UNITDIR only ($SYSTEMD_UNIT_PATH): the
# test's stub targets and the units under test, nothing of the host's
# (no tmpfiles, udev or sysctl units run, so the host is not touched).
# /run and /tmp are fresh tmpfs in the namespace; the network is the
# host's.  A unit's output goes where its drop-in says (StandardOutput=
# append:FILE): there is no journal.
#
# Usage:
#   systemd.sh start DIR UNITDIR
#                        boots it (--unit=tally-test.target, which UNITDIR
#                        must hold with sysinit, basic, shutdown and
#                        network-online targets); pid in
#                        DIR/pid; waits (30 s) until it is running
#   systemd.sh ctl DIR ARG...
#                        systemctl ARG... in the namespace
#   systemd.sh run DIR CMD...
#                        CMD in the namespace (its /run)
#   systemd.sh stop DIR  SIGKILL to its init: the kernel ends the rest
set -eu

die() { echo "systemd.sh: $*" >&2; exit 1; }

cmd=${1:?usage: systemd.sh start|ctl|run|stop DIR ...}
D=${2:?DIR}

in_ns() {
	p=$(cat "$D/pid" 2>/dev/null) || die "no manager in $D"
	nsenter -t "$p" -m -p -u -i "$@"
}

case $cmd in
start)
	U=${3:?UNITDIR}
	[ -x /lib/systemd/systemd ] || die "systemd is not installed"
	command -v unshare >/dev/null && command -v nsenter >/dev/null ||
		die "unshare and nsenter (util-linux) are needed"
	mkdir -p "$D"
	cat >"$D/boot.sh" <<EOF
#!/bin/sh
mount --make-rprivate /
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
exec env -i container=tally-test SYSTEMD_UNIT_PATH='$U' \
    /lib/systemd/systemd --system --unit=tally-test.target \
    --log-target=console --show-status=no
EOF
	chmod 0755 "$D/boot.sh"
	unshare --pid --mount --uts --ipc --fork --mount-proc "$D/boot.sh" \
		</dev/null >"$D/systemd.log" 2>&1 &
	# The namespace's init is unshare's child: found by its command line.
	i=0
	while :; do
		p=$(pgrep -P $! -f "systemd --system --unit=tally-test" || true)
		[ -n "$p" ] && break
		i=$((i + 1))
		[ $i -lt 300 ] || { cat "$D/systemd.log" >&2; die "systemd did not start"; }
		sleep 0.1
	done
	echo "$p" >"$D/pid"
	i=0
	until s=$(nsenter -t "$p" -m -p systemctl is-system-running 2>/dev/null) &&
	    { [ "$s" = running ] || [ "$s" = degraded ]; }; do
		i=$((i + 1))
		[ $i -lt 300 ] || { cat "$D/systemd.log" >&2; die "systemd is not running (${s:-no answer})"; }
		sleep 0.1
	done
	echo "systemd.sh: systemd $(/lib/systemd/systemd --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p') running as pid 1 of its namespace (host pid $p)"
	;;
ctl)
	shift 2
	in_ns systemctl "$@"
	;;
run)
	shift 2
	in_ns "$@"
	;;
stop)
	p=$(cat "$D/pid" 2>/dev/null || true)
	[ -n "$p" ] || exit 0
	kill -9 "$p" 2>/dev/null || true
	i=0
	while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	rm -f "$D/pid"
	;;
*)
	die "unknown command $cmd"
	;;
esac
