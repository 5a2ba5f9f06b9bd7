# cluster-lib.sh - three control-plane homes of one cluster on a
# three-member etcd (tests/harness/etcd.sh, over TLS with a client
# certificate), for the cluster scripts (sourced after lib.sh).
#
#   c_cluster [TTL] [KEEP]  etcd, then A (the founder: $W/a, node-a,
#                        the download provider on $W/root), B and C
#                        (followers, --standby --mesh, the master key
#                        copied); TTL the lease (default 4 s)
#   c_tallyd H [ARGS]    tallyd on home H (a, b or c) in the background,
#                        stderr to $W/tallyd-H.log; its pid in C_PID_H
#   c_leader             the home (a, b or c) etcd names the leader, or ""
#   c_wait_leader S [NOT]  waits up to S seconds for a leader other than
#                        NOT; prints it
#   c_tly H ARGS         tally on home H
#   c_same_logs S        waits up to S seconds until the three homes'
#                        logs are the same, byte for byte (tally log
#                        --json), then tally verify and rebuild --check
#                        on each

c_tly() { _c_h=$1; shift; TALLY_HOME=$W/$_c_h "$TALLY_BIN/tally" "$@"; }

c_etcdctl() {
	ETCDCTL_API=3 etcdctl --endpoints "$TALLY_TEST_ETCD_ENDPOINTS" \
		--cacert "$TALLY_TEST_ETCD_CA" --cert "$TALLY_TEST_ETCD_CERT" \
		--key "$TALLY_TEST_ETCD_KEY" --command-timeout 3s "$@"
}

c_cluster() {
	C_TTL=${1:-4}
	t_etcd_start
	C_ETCD="--etcd $TALLY_TEST_ETCD_ENDPOINTS --etcd-ca $TALLY_TEST_ETCD_CA \
--etcd-cert $TALLY_TEST_ETCD_CERT --etcd-key $TALLY_TEST_ETCD_KEY \
--lease-ttl $C_TTL${2:+ --keep $2}"
	# shellcheck disable=SC2086
	c_tly a init $C_ETCD >/dev/null || t_fail "tally init --etcd (A) failed"
	C_MESH=$(c_tly a mesh --json | sed -n 's/.*"mesh":"\([0-9a-f]*\)".*/\1/p')
	[ -n "$C_MESH" ] || t_fail "no mesh id on A"
	for _c_h in b c; do
		# shellcheck disable=SC2086
		c_tly $_c_h init --standby --mesh "$C_MESH" $C_ETCD >/dev/null ||
			t_fail "tally init --standby --etcd ($_c_h) failed"
		cp "$W/a/master.key" "$W/$_c_h/master.key"
		chmod 0600 "$W/$_c_h/master.key"
	done
	mkdir -p "$W/root" "$W/keys"
	chmod 0755 "$W" "$W/root"
	export TALLY_HOME=$W/a
	T_DLOG=$W/tallyd-a.log
}

c_tallyd() {
	_c_h=$1; shift
	"$TALLY_BIN/tallyd" --home "$W/$_c_h" "$@" 2>>"$W/tallyd-$_c_h.log" &
	eval "C_PID_$_c_h=$!"
	_t_pids="$_t_pids $!"
}

c_leader() {
	_c_v=$(c_etcdctl get "/tally/$C_MESH/leader" --print-value-only 2>/dev/null) || _c_v=
	case "$_c_v" in
	*"\"home\":\"$W/a\""*) echo a ;;
	*"\"home\":\"$W/b\""*) echo b ;;
	*"\"home\":\"$W/c\""*) echo c ;;
	*) echo "" ;;
	esac
}

c_wait_leader() {
	_c_e=$(($(t_now_ms) + $1 * 1000))
	while :; do
		_c_l=$(c_leader)
		if [ -n "$_c_l" ] && [ "$_c_l" != "${2:-}" ]; then
			# Leading means promoted in its log too.
			if grep -q "info: leading at epoch" "$W/tallyd-$_c_l.log" 2>/dev/null; then
				echo "$_c_l"
				return 0
			fi
		fi
		[ "$(t_now_ms)" -lt "$_c_e" ] || {
			tail -n 5 "$W"/tallyd-*.log >&2
			t_fail "no leader other than '${2:-}' within $1 s"; }
		sleep 0.1
	done
}

c_same_logs() {
	_c_e=$(($(t_now_ms) + $1 * 1000))
	while :; do
		c_tly a log --json >"$W/log-a.json" 2>/dev/null || true
		c_tly b log --json >"$W/log-b.json" 2>/dev/null || true
		c_tly c log --json >"$W/log-c.json" 2>/dev/null || true
		if [ -s "$W/log-a.json" ] && cmp -s "$W/log-a.json" "$W/log-b.json" &&
		    cmp -s "$W/log-a.json" "$W/log-c.json"; then
			break
		fi
		[ "$(t_now_ms)" -lt "$_c_e" ] || {
			wc -l "$W"/log-?.json >&2
			t_fail "the three homes' logs differ after $1 s"; }
		sleep 0.2
	done
	for _c_h in a b c; do
		c_tly $_c_h verify >/dev/null || t_fail "tally verify on $_c_h"
		c_tly $_c_h rebuild --check >/dev/null 2>&1 ||
			t_fail "tally rebuild --check on $_c_h"
	done
	t_ok "the three homes hold the same $(wc -l <"$W/log-a.json") events; verify and rebuild --check pass on each"
}

# c_consumers N: app-1..app-N, each wanting a directory of download.
c_consumers() {
	_c_i=1
	while [ "$_c_i" -le "$1" ]; do
		t_dir_consumer "app-$_c_i" >/dev/null
		_c_i=$((_c_i + 1))
	done
}
