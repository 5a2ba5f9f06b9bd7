#!/bin/sh
# The Debian packages built from the tree (issue 27, item 4), installed
# the way operators install daemons: dpkg-buildpackage builds tally (the
# control plane: tally, tallyd, tally-board) and tally-node; lintian
# finds no error; the units verify and score as hardened; dpkg installs
# them on this machine (the system user tally, the man pages, the
# units); a real systemd (Debian's, init of a namespace of its own:
# tests/harness/systemd.sh) starts tallyd.service and
# tally-node@node-a.service, which provision one grant on a throwaway
# PostgreSQL and deliver it, the consumer's login working; each runs as
# its unit says (user, no core, no new privileges, no capabilities for
# tallyd); dpkg -r removes the programs and leaves the state
# directories, whose log still verifies.
#
# It changes the machine (a package, a user, /var/lib/tally,
# /var/lib/tally-node, /etc/tally/node-node-a.*) and undoes that at its
# end; it refuses to run where tally is installed or /var/lib/tally
# exists already (not its own).
. "$(dirname "$0")/lib.sh"

MARK=/var/lib/tally/.tally-package-test
[ "$(id -u)" -eq 0 ] || t_fail "needs root: it installs packages and boots systemd in a namespace"
for p in tally tally-node; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' &&
	    [ ! -e "$MARK" ]; then
		t_fail "package $p is installed on this machine: not touching it"
	fi
done
[ ! -e /var/lib/tally ] || [ -e "$MARK" ] ||
	t_fail "/var/lib/tally exists and is not this test's: not touching it"
[ ! -e /etc/tally/node-node-a.conf ] || [ -e "$MARK" ] ||
	t_fail "/etc/tally/node-node-a.conf exists and is not this test's"

SD=$W/systemd
undo() (
	set +e
	sh "$TALLY_SRC/tests/harness/systemd.sh" stop "$SD" 2>/dev/null
	dpkg --purge tally tally-node >/dev/null 2>&1
	rm -rf /var/lib/tally /var/lib/tally-node /etc/tally/node-node-a.conf \
		/etc/tally/node-node-a.key
	rmdir /etc/tally 2>/dev/null
	if id tally >/dev/null 2>&1; then
		deluser --system --quiet tally >/dev/null 2>&1 ||
			userdel tally 2>/dev/null
	fi
	getent group tally >/dev/null && groupdel tally 2>/dev/null
	true
)
undo	# a previous run of this test that was killed
t_atexit undo

t_say "the packages, built from the tree"
t_check "make deb (dpkg-buildpackage -us -uc -b): tally and tally-node"
make -C "$TALLY_SRC" --no-print-directory deb DEBDIR="$W" >"$W/build.log" 2>&1 ||
	{ tail -n 30 "$W/build.log" >&2; t_fail "make deb failed"; }
V=$(sed -n '1s/^tally (\([^)]*\)).*/\1/p' "$TALLY_SRC/debian/changelog")
A=$(dpkg --print-architecture)
DEB=$W/tally_${V}_$A.deb NDEB=$W/tally-node_${V}_$A.deb
[ -f "$DEB" ] && [ -f "$NDEB" ] || t_fail "no $DEB and $NDEB"
dpkg-deb -c "$DEB" >"$W/tally.list"
dpkg-deb -c "$NDEB" >"$W/tally-node.list"
for f in usr/bin/tally usr/bin/tallyd usr/bin/tally-board \
    usr/share/man/man1/tally.1.gz usr/share/man/man1/tally-board.1.gz \
    usr/share/man/man5/tally-manifest.5.gz usr/share/man/man8/tallyd.8.gz \
    lib/systemd/system/tallyd.service; do
	grep -q " \./$f\$" "$W/tally.list" || t_fail "the tally package has no /$f"
done
for f in usr/bin/tally-node usr/share/man/man8/tally-node.8.gz \
    lib/systemd/system/tally-node@.service; do
	grep -q " \./$f\$" "$W/tally-node.list" || t_fail "the tally-node package has no /$f"
done
! grep -q "usr/bin/tallyd\$" "$W/tally-node.list" || t_fail "the node's package carries tallyd"
# Only tallyd links a provider's client: the node's package needs none
# (librabbitmq is its transport, the mesh's AMQP stream).
dpkg-deb -f "$NDEB" Depends >"$W/node.depends"
for lib in libpq libmariadb libhiredis libcurl; do
	! grep -q "$lib" "$W/node.depends" ||
		t_fail "tally-node depends on $lib: $(cat "$W/node.depends")"
done
t_ok "$(basename "$DEB") ($(du -k "$DEB" | cut -f1) KiB), $(basename "$NDEB") ($(du -k "$NDEB" | cut -f1) KiB); the node's depends on no provider client"

t_check "lintian: no error (make deb ran it)"
lintian "$W"/tally_"$V"_"$A".changes >"$W/lintian.out" 2>&1 || true
! grep -q '^E:' "$W/lintian.out" || { cat "$W/lintian.out" >&2; t_fail "lintian found errors"; }
t_ok "lintian: 0 errors, $(grep -c '^W:' "$W/lintian.out") warning(s)$(grep '^W:' "$W/lintian.out" | head -n 3 | sed 's/^/; /' | tr -d '\n')"

t_say "installed on this machine"
t_check "dpkg -i: the programs, the user tally, the man pages, the units"
dpkg -i "$DEB" "$NDEB" >"$W/dpkg.out" 2>&1 ||
	{ cat "$W/dpkg.out" >&2; t_fail "dpkg -i failed"; }
touch "$MARK"
for b in tally tallyd tally-node tally-board; do
	[ -x "/usr/bin/$b" ] || t_fail "/usr/bin/$b is not installed"
done
/usr/bin/tally --version | grep -q "$V" || t_fail "tally --version: $(/usr/bin/tally --version)"
U=$(id -u tally) || t_fail "no user tally"
[ "$U" -lt 1000 ] || t_fail "tally is not a system user (uid $U)"
[ "$(stat -c '%U %a' /var/lib/tally)" = "tally 700" ] ||
	t_fail "/var/lib/tally is $(stat -c '%U %a' /var/lib/tally), not the user tally's, 0700"
for m in tally tally-board tallyd tally-node tally-manifest; do
	man -w "$m" >/dev/null 2>&1 || t_fail "man $m: no page installed"
done
t_ok "tally $V; user tally (uid $U, home /var/lib/tally 0700); five man pages"

t_check "the units verify (systemd-analyze) and are hardened"
# verify resolves ExecStart and Documentation= (the man pages) too.
for u in tallyd.service tally-node@node-a.service; do
	f=/lib/systemd/system/$u
	[ "$u" = tallyd.service ] || f=/lib/systemd/system/tally-node@.service
	systemd-analyze verify "$f" >"$W/verify.out" 2>&1 ||
		{ cat "$W/verify.out" >&2; t_fail "systemd-analyze verify $u"; }
	[ ! -s "$W/verify.out" ] || { cat "$W/verify.out" >&2; t_fail "systemd-analyze verify $u warned"; }
done
exposure() {
	systemd-analyze security --offline=yes "$1" 2>/dev/null |
		sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p'
}
XD=$(exposure /lib/systemd/system/tallyd.service)
XN=$(exposure /lib/systemd/system/tally-node@.service)
[ -n "$XD" ] && [ -n "$XN" ] || t_fail "systemd-analyze security gave no exposure level"
# tallyd needs nothing of the machine's: 2 is "OK"'s upper part.
awk -v x="$XD" 'BEGIN { exit !(x <= 2.0) }' ||
	t_fail "tallyd.service's exposure level is $XD (> 2.0)"
# The agent is root (it owns the modules' files), held to what it needs.
awk -v x="$XN" 'BEGIN { exit !(x <= 5.0) }' ||
	t_fail "tally-node@.service's exposure level is $XN (> 5.0)"
t_ok "verified; exposure level (systemd-analyze security, 0 best, 10 worst): tallyd $XD, tally-node@ $XN (root: it owns the modules' files)"

t_say "started by systemd"
t_pg_start
KD=$W/keys
install -d -o tally -g tally -m 0700 "$KD"
itly() { runuser -u tally -- env TALLY_HOME=/var/lib/tally /usr/bin/tally "$@"; }
itly init >/dev/null || t_fail "tally init as tally failed"
itly node add node-a --routable-name 127.0.0.1 --key-out "$KD/node-a.key" >/dev/null ||
	t_fail "tally node add failed"
install -d -m 0755 /etc/tally
install -m 0600 "$KD/node-a.key" /etc/tally/node-node-a.key
rm -f "$KD/node-a.key"
itly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null || t_fail "tally apply postgres failed"
itly assign postgres node-a --expose local --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
	t_fail "tally assign postgres failed"
itly apply "$(t_consumer app)" >/dev/null || t_fail "tally apply app failed"
itly assign app node-a >/dev/null || t_fail "tally assign app failed"
printf 'TALLY_NODE_ARGS=--log /var/lib/tally --reload app=true --user app=nobody\n' >/etc/tally/node-node-a.conf

# The manager's units: the installed ones, stub targets, and drop-ins
# sending their output to files (no journal here).
UD=$W/units
mkdir -p "$UD"
for t in sysinit basic shutdown network-online multi-user tally-test; do
	printf '[Unit]\nDescription=%s (a stub of the test)\n' "$t" >"$UD/$t.target"
done
for u in tallyd.service tally-node@.service; do
	ln -s "/lib/systemd/system/$u" "$UD/$u"
	mkdir -p "$UD/$u.d"
	printf '[Service]\nStandardOutput=append:%s\nStandardError=append:%s\n' \
		"$W/${u%%.*}.log" "$W/${u%%.*}.log" >"$UD/$u.d/test.conf"
done
sh "$TALLY_SRC/tests/harness/systemd.sh" start "$SD" "$UD" >"$W/sd.out" 2>&1 ||
	{ cat "$W/sd.out" >&2; t_fail "systemd did not start"; }
sctl() { sh "$TALLY_SRC/tests/harness/systemd.sh" ctl "$SD" "$@"; }
inns() { sh "$TALLY_SRC/tests/harness/systemd.sh" run "$SD" "$@"; }

t_check "systemctl start tallyd tally-node@node-a: the grant provisioned and delivered"
sctl start tallyd.service tally-node@node-a.service ||
	{ sctl status --no-pager tallyd.service tally-node@node-a.service >&2; cat "$W"/tally*.log >&2; t_fail "systemctl start failed"; }
end=$(($(t_now_ms) + 60000))
until itly status app >"$W/status.out" 2>&1; do
	[ "$(t_now_ms)" -lt "$end" ] || {
		cat "$W/status.out" "$W"/tally*.log >&2
		sctl status --no-pager tallyd.service tally-node@node-a.service >&2
		t_fail "app is not healthy 60 s after the units started"
	}
	sleep 0.2
done
# The agent's file is in the namespace's /run (the unit's
# RuntimeDirectory=): read there.
end=$(($(t_now_ms) + 30000))
until inns test -s /run/tally/node-a/app.env; do
	[ "$(t_now_ms)" -lt "$end" ] || { cat "$W/tally-node@.log" >&2; t_fail "no /run/tally/node-a/app.env"; }
	sleep 0.2
done
o=$(inns stat -c '%U %a' /run/tally/node-a/app.env)
[ "$o" = "nobody 400" ] || t_fail "app.env is $o, not the module's user's (--user app=nobody), 0400"
inns cat /run/tally/node-a/app.env >"$W/app.env"
chmod 0600 "$W/app.env"
q=$(
	set -a
	. "$W/app.env"
	set +a
	PGPASSWORD=$DB_PASSWORD PGCONNECT_TIMEOUT=5 psql -X -q -At -v ON_ERROR_STOP=1 \
		-h "$DB_HOST" -p "$DB_PORT" -U "$DB_USER" -d "$DB_NAME" \
		-c "CREATE TABLE t (x int); INSERT INTO t VALUES (42); SELECT session_user || ' ' || sum(x) FROM t" 2>&1
) || t_fail "the delivered credential does not log in: $q"
[ "$q" = "$(t_envget "$W/app.env" DB_USER) 42" ] || t_fail "psql said: $q"
end=$(($(t_now_ms) + 30000))
until [ -n "$(itly log --type credential.acknowledged 2>/dev/null)" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || { cat "$W/tally-node@.log" >&2; t_fail "no credential.acknowledged"; }
	sleep 0.2
done
t_ok "app ready; /run/tally/node-a/app.env nobody's, 0400; its credential logs in (psql as $(t_envget "$W/app.env" DB_USER)); the agent's acknowledgement is on the record"

t_check "each runs as its unit says"
# procstat UNIT FIELD: a field of the unit's main process's status.
procstat() {
	_p=$(sctl show -p MainPID --value "$1")
	[ -n "$_p" ] && [ "$_p" != 0 ] || t_fail "$1 has no main process"
	inns sh -c "sed -n 's/^$2:[[:space:]]*//p' /proc/$_p/status; true"
}
limcore() {
	_p=$(sctl show -p MainPID --value "$1")
	inns sh -c "awk '/^Max core file size/ { print \$5 }' /proc/$_p/limits"
}
[ "$(procstat tallyd.service Uid | awk '{ print $1 }')" = "$U" ] ||
	t_fail "tallyd does not run as tally: Uid $(procstat tallyd.service Uid)"
[ "$(procstat tallyd.service NoNewPrivs)" = 1 ] || t_fail "tallyd may gain privileges"
[ "$(procstat tallyd.service CapBnd)" = 0000000000000000 ] ||
	t_fail "tallyd's capability bounding set is $(procstat tallyd.service CapBnd)"
[ "$(procstat tallyd.service Seccomp)" = 2 ] || t_fail "tallyd has no system call filter"
[ "$(limcore tallyd.service)" = 0 ] || t_fail "tallyd may dump core ($(limcore tallyd.service))"
[ "$(procstat tally-node@node-a.service Uid | awk '{ print $1 }')" = 0 ] ||
	t_fail "tally-node does not run as root"
[ "$(procstat tally-node@node-a.service NoNewPrivs)" = 1 ] || t_fail "tally-node may gain privileges"
[ "$(limcore tally-node@node-a.service)" = 0 ] || t_fail "tally-node may dump core"
[ "$(stat -c '%U %a' /var/lib/tally-node/node-a)" = "root 700" ] ||
	t_fail "the agent's state directory is $(stat -c '%U %a' /var/lib/tally-node/node-a 2>&1)"
t_ok "tallyd: uid $U, no new privileges, no capabilities, a system call filter, no core; tally-node: root, no new privileges, no core, state in /var/lib/tally-node/node-a (0700)"

t_check "systemctl stop: both end cleanly"
sctl stop tallyd.service tally-node@node-a.service ||
	t_fail "systemctl stop failed"
for u in tallyd.service tally-node@node-a.service; do
	r=$(sctl show -p Result --value "$u")
	[ "$r" = success ] || { cat "$W"/tally*.log >&2; t_fail "$u stopped with result $r"; }
done
t_ok "both stopped, result success"
sh "$TALLY_SRC/tests/harness/systemd.sh" stop "$SD"

t_say "removed"
t_check "dpkg -r: the programs go, the state directories and the log stay"
dpkg -r tally tally-node >"$W/dpkg-r.out" 2>&1 || { cat "$W/dpkg-r.out" >&2; t_fail "dpkg -r failed"; }
for b in tally tallyd tally-node tally-board; do
	[ ! -e "/usr/bin/$b" ] || t_fail "/usr/bin/$b is left after dpkg -r"
done
[ ! -e /lib/systemd/system/tallyd.service ] || t_fail "the unit is left"
[ -d /var/lib/tally-node/node-a ] || t_fail "dpkg -r removed the agent's state"
runuser -u tally -- env TALLY_HOME=/var/lib/tally "$TALLY_BIN/tally" verify >"$W/verify.log" 2>&1 ||
	{ cat "$W/verify.log" >&2; t_fail "the log left in /var/lib/tally does not verify"; }
N=$(runuser -u tally -- env TALLY_HOME=/var/lib/tally "$TALLY_BIN/tally" log | wc -l)
t_ok "programs and units gone; /var/lib/tally ($N events, verified) and /var/lib/tally-node/node-a kept"

