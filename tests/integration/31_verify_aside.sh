#!/bin/sh
# tallyd's verification never holds up a request: its checks run beside
# the loop, which goes on provisioning and delivering while they are in
# flight.  The fault driver delays every check by 4 s (TALLY_FAULT) on
# a directory provider with two grants, so with --verify-interval 1 a
# pass of checks is in flight for 8 s; a module assigned meanwhile must
# have its grant delivered within 1.5 s, and the pass still ends with
# its grants verified (tallyd's log).  On main before this, the loop
# waited for the checks: the new grant took 5 s or more.  Then the same
# with --workers 1: the checks' session held the provider's one slot,
# and the request waited for every check it had queued (8 s); requests
# go first now (reactors/pass.h: the verify lane yields to the pass lane).
. "$(dirname "$0")/lib.sh"

ROOT=$W/root
mkdir -p "$ROOT"

t_say "a download provider on node-a, two grants provisioned"
t_init
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/download.yaml" "$(t_dir_consumer app-a)" \
	"$(t_dir_consumer app-b)" "$(t_dir_consumer app-c)" \
	"$(t_dir_consumer app-d)" >/dev/null
tly assign download node-a --set root="$ROOT" >/dev/null
tly assign app-a app-b node-a >/dev/null
t_tallyd_once
t_ok "app-a and app-b provisioned"

# request_during_checks MODULE TALLYD-ARGS...: tallyd with every check
# delayed 4 s; MODULE assigned while a pass of checks is in flight must
# be delivered within 1.5 s, and the pass must still end, recorded.
request_during_checks() {
	_m=$1
	shift
	: >"$T_DLOG"
	TALLY_FAULT="check:delay=4000" t_tallyd_start -v --verify-interval 1 --interval 1 "$@"
	# The first pass of checks starts within a second and lasts 8 s.
	_i=0
	until grep -q "fault injected: check\|check.*delay" "$T_DLOG" 2>/dev/null ||
	    [ $_i -ge 30 ]; do sleep 0.1; _i=$((_i + 1)); done
	sleep 1.5
	t0=$(t_now_ms)
	tly assign "$_m" node-a >/dev/null
	until tly log --json --type credential.delivered 2>/dev/null |
	    grep -q "\"stream\":\"grant/$_m/files\""; do
		[ $(($(t_now_ms) - t0)) -lt 15000 ] || t_fail "$_m's grant not delivered in 15 s"
		sleep 0.02
	done
	dt=$(($(t_now_ms) - t0))
	[ "$dt" -le 1500 ] || t_fail "$_m's grant was delivered $dt ms after the request: it waited for the checks in flight"
	t_ok "delivered $dt ms after the request, checks in flight"

	t_check "the checks in flight still end, recorded"
	_i=0
	until grep -q "verified [1-9][0-9]* grant(s), 0 not healthy" "$T_DLOG"; do
		_i=$((_i + 1))
		[ $_i -lt 300 ] || { tail -n 20 "$T_DLOG" >&2; t_fail "no verification pass ended in 30 s"; }
		sleep 0.1
	done
	t_ok "$(grep -o "verified [0-9]* grant(s), 0 not healthy" "$T_DLOG" | head -n 1)"
	t_tallyd_stop
}

t_check "a request while the checks are in flight"
request_during_checks app-c
t_wait_healthy 5
t_ok "tallyd stopped cleanly (SIGTERM while checks may be in flight); all healthy"

t_check "--workers 1: the checks' session holds the provider's one slot; a request goes first"
request_during_checks app-d --workers 1
t_wait_healthy 5
t_ok "all healthy"
