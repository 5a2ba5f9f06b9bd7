#!/bin/sh
# The verifier's bulk check (reactors/verify.c, drivers/postgres.c's
# check_bulk), with tallyd as a daemon and a short interval
# (--verify-interval 1) against a real PostgreSQL that logs every
# connection (log_connections: the consumers' logins made by the
# verifier carry application_name=tally-check):
#
#   - each credential is logged into once after it is issued (its
#     first check), so reachability at the routable name is proven;
#   - after that, checks are answered from the admin side in one bulk
#     call per pass: over several intervals there are far fewer consumer
#     logins than checks (one check in --verify-login-every 5: the sample);
#   - the rotating sample: every grant is logged into again within 5
#     intervals plus slack;
#   - a password changed out of band is still found by the bulk check
#     (the stored verifier differs) and repaired, events as before.
. "$(dirname "$0")/lib.sh"

VI=1
LE=5		# tallyd --verify-login-every (default 30)
APPS="app-1 app-2 app-3 app-4"

head_seq() { tly log --json | tail -n 1 | t_jfields seq; }

checks_of() {
	tly status "$1" --json 2>/dev/null | grep -o '"checks":[0-9]*' |
		head -n 1 | cut -d: -f2
}
# all checks of all apps, summed
checks_sum() {
	_s=0
	for _a in $APPS; do _s=$((_s + $(checks_of "$_a"))); done
	echo $_s
}
# logins_of USER: the verifier's logins as USER in the server log
logins_of() {
	_r=$PG_DIR
	[ -f "$PG_DIR/realdir" ] && _r=$(cat "$PG_DIR/realdir")
	grep -c "connection authorized: user=$1 .*application_name=tally-check" \
		"$_r/log/server.log" || true
}
logins_sum() {
	_s=0
	for _u in $USERS; do _s=$((_s + $(logins_of "$_u"))); done
	echo $_s
}

t_say "throwaway PostgreSQL logging connections; tallyd --verify-interval $VI"
t_pg_start
t_sql "ALTER SYSTEM SET log_connections = on" >/dev/null
t_sql "SELECT pg_reload_conf()" >/dev/null
t_init
t_node node-a 127.0.0.1
t_provider node-a local
for a in $APPS; do tly apply "$(t_consumer "$a")" >/dev/null; done
for a in $APPS; do tly assign "$a" node-a >/dev/null; done
t_tallyd_start --interval 1 --verify-interval $VI --verify-login-every $LE
t_wait_healthy 30
end=$(($(t_now_ms) + 15000))
for a in $APPS; do
	until [ "$(checks_of "$a")" -ge 1 ] 2>/dev/null; do
		[ "$(t_now_ms)" -lt "$end" ] || t_fail "$a's grant was not verified within 15 s"
		sleep 0.2
	done
done
USERS=
for a in $APPS; do
	USERS="$USERS $(t_envget "$(t_envfile node-a "$a")" DB_USER)"
done
t_ok "provisioned and verified:$USERS"

t_check "each credential logged into after it was issued (its first check)"
for u in $USERS; do
	[ "$(logins_of "$u")" -ge 1 ] || {
		tail -n 20 "$PG_DIR/log/server.log" >&2
		t_fail "no login as $u by the verifier after its first check"
	}
done
t_ok "every consumer logged in at least once (application_name=tally-check)"

t_check "then checks in bulk: fewer logins than checks"
c0=$(checks_sum) l0=$(logins_sum)
sleep 6
c1=$(checks_sum) l1=$(logins_sum)
dc=$((c1 - c0)) dl=$((l1 - l0))
t_note "$dc checks, $dl consumer logins in 6 s"
[ "$dc" -ge 12 ] || t_fail "only $dc checks of 4 grants in 6 s (interval $VI s)"
[ $((dl * 2)) -lt "$dc" ] ||
	t_fail "$dl consumer logins for $dc checks: the checks are not in bulk"
t_ok "$dc checks made $dl logins (bulk, with the sample)"

t_check "the rotating sample logs into every grant within $LE intervals"
set --
for u in $USERS; do set -- "$@" "$(logins_of "$u")"; done
end=$(($(t_now_ms) + (LE * 2 + 4) * 1000))
for u in $USERS; do
	b=$1
	shift
	until [ "$(logins_of "$u")" -gt "$b" ]; do
		[ "$(t_now_ms)" -lt "$end" ] ||
			t_fail "no sample login as $u within $((LE * 2 + 4)) s ($LE intervals of $VI s, and slack)"
		sleep 0.5
	done
done
t_ok "every grant logged into again"

t_check "a password changed out of band: found in bulk, repaired"
SINCE=$(head_seq)
U1=$(t_envget "$(t_envfile node-a app-1)" DB_USER)
t_sql "ALTER ROLE \"$U1\" PASSWORD 'changed-out-of-band'" >/dev/null
end=$(($(t_now_ms) + 8000))
until tly log --json --from $((SINCE + 1)) --stream grant/app-1/db \
    --type grant.repaired | grep -q credential-mismatch; do
	[ "$(t_now_ms)" -lt "$end" ] || {
		tly log --from $((SINCE + 1)) >&2
		t_fail "no grant.repaired credential-mismatch within 8 s"
	}
	sleep 0.2
done
tly log --json --from $((SINCE + 1)) --stream grant/app-1/db \
    --type grant.drifted | grep -q credential-mismatch ||
	t_fail "no grant.drifted before the repair"
[ "$(t_env_psql "$(t_envfile node-a app-1)" "SELECT session_user")" = "$U1" ] ||
	t_fail "app-1's credential does not work after the repair"
t_ok "grant.drifted + grant.repaired; app-1 connects again"
t_tallyd_stop
t_ok "done"
