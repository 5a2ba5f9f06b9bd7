#!/bin/sh
# The verifier against a real PostgreSQL, with tallyd running as a
# daemon with a short verification interval (--verify-interval 2: the
# default is 30 s) and out-of-band changes made as the admin:
#
#   - healthy checks append NO events: over several intervals the log
#     does not grow while tally status shows the check count and the
#     last-verified time advancing;
#   - a consumer's password changed (ALTER ROLE ... PASSWORD) is found
#     within one interval and repaired: grant.drifted
#     (credential-mismatch) + grant.repaired, and the delivered
#     credential works again (tally log --json, tally history);
#   - CONNECT granted to PUBLIC on a consumer's database: repaired
#     (privileges-changed drifted + repaired), PUBLIC has nothing again;
#   - a consumer's database dropped: the grant becomes missing (status
#     says so in words, exit 6; tally check exits 6), is NOT recreated
#     over several intervals, and is recreated only after tally repair,
#     recorded with who asked (the actor of repair.requested);
#   - PostgreSQL stopped: provider-unreachable on every grant it serves
#     (tally status on each module, exit 6; tally check exit 6), and
#     healthy again after the restart with no operator action (same
#     daemon);
#   - the provider's admin password changed: provider-auth-failed with a
#     message naming the likely cause and how to record the new one;
#     recording it (tally assign ... --secret admin-password) recovers;
#   - tally check and tally status exit 0 when all is well;
#   - tallyd --once runs one verification pass and its repairs before it
#     exits (0 after a repair, 6 with a grant missing).
. "$(dirname "$0")/lib.sh"

VI=2		# tallyd --verify-interval (seconds)
APPS="app-1 app-2 app-3"

head_seq() { tly log --json | tail -n 1 | t_jfields seq; }

# jval KEY: the last "KEY":"VALUE" of a JSON line on stdin (the body's),
# escapes kept.
jval() {
	sed -n 's/.*"'"$1"'":"\(\([^"\\]\|\\.\)*\)".*/\1/p' | head -n 1
}

# wait_ev SECONDS STREAM TYPE [GREP]: the first event of TYPE on STREAM
# after sequence $SINCE (matching GREP); prints its JSON line.
wait_ev() {
	_w_end=$(($(t_now_ms) + $1 * 1000))
	while :; do
		_w_l=$(tly log --json --from $((SINCE + 1)) --stream "$2" \
			--type "$3" | grep -e "${4:-.}" | head -n 1) || true
		if [ -n "$_w_l" ]; then
			printf '%s\n' "$_w_l"
			return 0
		fi
		if [ "$(t_now_ms)" -gt "$_w_end" ]; then
			tly log --from $((SINCE + 1)) >&2 || true
			tail -n 20 "$T_DLOG" >&2
			t_fail "no $3 ${4:+matching '$4' }on $2 within $1 s"
		fi
		sleep 0.1
	done
}

# checks_of MODULE: "COUNT LAST_VERIFIED" of the module's grant (status).
checks_of() {
	tly status "$1" --json >"$W/st.json" 2>/dev/null || true
	printf '%s %s\n' \
		"$(grep -o '"checks":[0-9]*' "$W/st.json" | head -n 1 | cut -d: -f2)" \
		"$(t_jstr last_verified <"$W/st.json" | head -n 1)"
}

# all_checked: every app's grant has been verified at least once.
all_checked() {
	for _a in $APPS; do
		set -- $(checks_of "$_a")
		[ "${1:-0}" -ge 1 ] || return 1
	done
}

t_say "throwaway PostgreSQL; tallyd as a daemon, --verify-interval $VI (default 30)"
t_pg_start
t_init
A2=$(t_gname app-2/db app-2-db)	# the grants' databases (reactors/names.c)
A3=$(t_gname app-3/db app-3-db)
t_node node-a 127.0.0.1
t_provider node-a local
for a in $APPS; do tly apply "$(t_consumer "$a")" >/dev/null; done
for a in $APPS; do tly assign "$a" node-a >/dev/null; done
t_tallyd_start --interval 1 --verify-interval $VI
DPID=$T_DPID
t_wait_healthy 30
end=$(($(t_now_ms) + (VI * 2 + 5) * 1000))
until all_checked; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "not every grant was verified within $((VI * 2 + 5)) s"
	sleep 0.2
done
t_ok "app-1, app-2, app-3 provisioned and verified at least once (tallyd pid $DPID)"

t_say "healthy checks append no events"
t_check "tally check --all and tally status exit 0 when all is well"
t_expect_exit 0 "tally check --all (healthy)" tly check --all
said=$(tail -n 1 "$W/last.out")
[ "$said" = "checked 3 grant(s): 0 repaired, 0 not healthy" ] ||
	t_fail "tally check --all says: $said"
t_expect_exit 0 "tally status (healthy)" tly status
t_ok "tally check --all: exit 0, $said; tally status: exit 0"
sleep 0.5
h0=$(head_seq)
set -- $(checks_of app-1)
c0=$1 l0=$2
sleep $((VI * 3 + 1))
h1=$(head_seq)
set -- $(checks_of app-1)
c1=$1 l1=$2
[ "$h1" = "$h0" ] || {
	tly log --from $((h0 + 1)) >&2
	t_fail "the log grew from seq $h0 to $h1 over $((VI * 3 + 1)) s of healthy checks"
}
[ "$c1" -ge $((c0 + 2)) ] ||
	t_fail "app-1/db's check count went from $c0 to $c1 in $((VI * 3 + 1)) s (interval $VI s)"
[ "$(t_ts_ns "$l1")" -gt "$(t_ts_ns "$l0")" ] ||
	t_fail "app-1/db's last-verified time did not advance ($l0 -> $l1)"
t_ok "log head stays at seq $h0; app-1/db checks $c0 -> $c1, last verified $l0 -> $l1"
tly status app-1 | grep -q "verified .* ([0-9]* checks)" ||
	t_fail "tally status does not print the last-verified time and check count"
t_ok "tally status: $(tly status app-1 | grep -m1 'verified' | sed 's/^ *//')"

t_say "a consumer's password changed out of band (credential-mismatch)"
f1=$(t_envfile node-a app-1)
U1=$(t_envget "$f1" DB_USER)
SINCE=$(head_seq)
t0=$(t_now_ns)
t_sql "ALTER ROLE \"$U1\" PASSWORD 'changed-out-of-band'"
dr=$(wait_ev $((VI * 3)) grant/app-1/db grant.drifted '"kind":"credential-mismatch"')
rp=$(wait_ev 5 grant/app-1/db grant.repaired '"kind":"credential-mismatch"')
dt=$((($(t_ts_ns "$(printf '%s' "$dr" | t_jstr ts)") - t0) / 1000000))
t_note "detected $dt ms after ALTER ROLE (interval $VI s)"
[ "$dt" -le $((VI * 1000 + 500)) ] ||
	t_fail "the changed password was detected after $dt ms: more than one interval ($VI s)"
t_ok "grant.drifted credential-mismatch within one interval ($dt ms): $(printf '%s' "$dr" | jval message | cut -c1-200)"
t_ok "grant.repaired: $(printf '%s' "$rp" | jval how)"
[ "$(t_env_psql "$f1" "SELECT session_user")" = "$U1" ] ||
	t_fail "app-1's delivered credential does not work after the repair"
t_ok "app-1's delivered credential connects again as $U1"
if tly history app-1/db >"$W/hist" 2>&1; then
	grep -q 'drift' "$W/hist" && grep -q 'repair' "$W/hist" || {
		cat "$W/hist" >&2
		t_fail "tally history app-1/db does not show the drift and the repair"
	}
	t_ok "tally history app-1/db: $(grep -i -m1 'drift' "$W/hist" | cut -c1-140)"
	t_ok "                        $(grep -i -m1 'repair' "$W/hist" | cut -c1-140)"
else
	t_fail "tally history app-1/db failed: $(head -n 1 "$W/hist")"
fi

t_say "CONNECT on a consumer's database granted to PUBLIC (privileges-changed)"
public_privs() {
	t_sql "SELECT count(*) FROM pg_database d,
	       aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
	       WHERE d.datname = '$A2' AND a.grantee = 0"
}
SINCE=$(head_seq)
# The grant and its read-back in one transaction: tallyd's verifier may
# repair it as soon as it is committed.
[ "$(t_sql "GRANT CONNECT ON DATABASE \"$A2\" TO PUBLIC;
	SELECT count(*) FROM pg_database d,
	       aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
	       WHERE d.datname = '$A2' AND a.grantee = 0")" -ge 1 ] ||
	t_fail "the GRANT to PUBLIC did not take"
dr=$(wait_ev $((VI * 3)) grant/app-2/db grant.drifted '"kind":"privileges-changed"')
wait_ev 5 grant/app-2/db grant.repaired '"kind":"privileges-changed"' >/dev/null
printf '%s' "$dr" | grep -q 'PUBLIC has CONNECT' || t_fail "the drift does not name the privilege: $dr"
[ "$(public_privs)" -eq 0 ] || t_fail "PUBLIC still has privileges on app-2-db after the repair"
t_ok "grant.drifted privileges-changed ($(printf '%s' "$dr" | jval reason)) + grant.repaired; PUBLIC has nothing on app-2-db"
t_wait_healthy 10

t_say "a consumer's database dropped (missing-resource)"
SINCE=$(head_seq)
t_sql "DROP DATABASE \"$A3\" WITH (FORCE)"
ms=$(wait_ev $((VI * 3)) grant/app-3/db grant.missing)
MSEQ=$(printf '%s' "$ms" | t_jfields seq)
t_ok "grant.missing (seq $MSEQ): $(printf '%s' "$ms" | jval reason)"
t_check "tally status app-3 says so in words and exits 6"
t_expect_exit 6 "tally status app-3 (database dropped)" tly status app-3
grep -q 'grant missing' "$W/last.out" && grep -q 'not recreated' "$W/last.out" &&
	grep -q 'tally repair app-3/db' "$W/last.out" || {
	cat "$W/last.out" >&2
	t_fail "tally status app-3 does not say the grant is missing, not recreated, and how to repair it"
}
t_ok "exit 6: $(grep -m1 'grant missing' "$W/last.out" | sed 's/^ *//' | cut -c1-200)"
t_expect_exit 6 "tally check app-3/db (missing)" tly check app-3/db
t_expect_exit 6 "tally status (whole mesh, one grant missing)" tly status
t_ok "tally check app-3/db and tally status (all) exit 6"
t_check "not recreated over $((VI * 3)) s ($((VI * 3 / VI)) intervals)"
sleep $((VI * 3))
[ "$(t_sql "SELECT count(*) FROM pg_database WHERE datname = '$A3'")" -eq 0 ] ||
	t_fail "app-3-db was recreated without tally repair"
n=$(tly log --json --from $((MSEQ + 1)) --stream grant/app-3/db | wc -l)
[ "$n" -eq 0 ] || {
	tly log --from $((MSEQ + 1)) --stream grant/app-3/db >&2
	t_fail "$n event(s) on grant/app-3/db after grant.missing without tally repair"
}
t_expect_exit 6 "tally status app-3 (still missing)" tly status app-3
t_ok "no database app-3-db, no event after grant.missing, status still exit 6"
t_check "tally repair app-3/db recreates it, recorded with who asked"
SINCE=$(head_seq)
tly repair app-3/db >"$W/repair.out" || t_fail "tally repair app-3/db failed"
rq=$(wait_ev 5 grant/app-3/db repair.requested)
actor=$(printf '%s' "$rq" | t_jstr actor)
[ "$actor" = "cli:$(id -un)@$(hostname)" ] ||
	t_fail "repair.requested was recorded with actor '$actor', expected cli:$(id -un)@$(hostname)"
rp=$(wait_ev 20 grant/app-3/db grant.repaired '"kind":"missing-resource"')
t_ok "repair.requested by $actor; grant.repaired: $(printf '%s' "$rp" | jval how)"
[ "$(t_sql "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '$A3'")" = "$A3" ] ||
	t_fail "app-3-db is not back, owned by app-3-db"
t_wait_healthy 10
[ "$(t_env_psql "$(t_envfile node-a app-3)" "SELECT current_database()")" = "$A3" ] ||
	t_fail "app-3's delivered credential does not reach the recreated database"
t_ok "app-3-db recreated (owner app-3-db); app-3's credential connects; status healthy"

t_say "PostgreSQL stops (provider-unreachable), then starts again"
SINCE=$(head_seq)
t_pg_stop_server
pu=$(wait_ev $((VI * 3 + 5)) provider/node-a/postgres provider.unreachable)
printf '%s' "$pu" | grep -q '"kind":"provider-unreachable"' ||
	t_fail "provider.unreachable is not of kind provider-unreachable: $pu"
t_ok "provider.unreachable (provider-unreachable): $(printf '%s' "$pu" | jval reason | cut -c1-200)"
t_check "tally status shows it on every grant of the provider, exit 6"
for a in $APPS; do
	t_expect_exit 6 "tally status $a (PostgreSQL down)" tly status "$a"
	grep -q 'provider node-a/postgres unreachable: ' "$W/last.out" || {
		cat "$W/last.out" >&2
		t_fail "tally status $a does not say the provider is unreachable"
	}
done
t_ok "app-1, app-2, app-3: exit 6, 'provider node-a/postgres unreachable: …'"
t_expect_exit 6 "tally check --all (PostgreSQL down)" tly check --all
[ "$(grep -c 'provider unreachable' "$W/last.out")" -eq 3 ] || {
	cat "$W/last.out" >&2
	t_fail "tally check --all does not name the provider on each of the 3 grants"
}
t_ok "tally check --all: exit 6, $(tail -n 1 "$W/last.out")"
n=$(tly log --json --from $((SINCE + 1)) --type provider.unreachable | wc -l)
sleep $((VI * 2))
n2=$(tly log --json --from $((SINCE + 1)) --type provider.unreachable | wc -l)
[ "$n2" -eq "$n" ] && [ "$n" -eq 1 ] ||
	t_fail "provider.unreachable recorded $n2 times in one outage (expected once)"
t_ok "provider.unreachable recorded once for the outage"
t_pg_restart_server
SINCE=$(head_seq)
wait_ev $((VI * 3 + 5)) provider/node-a/postgres provider.recovered >/dev/null
t_wait_healthy 10
t_expect_exit 0 "tally check --all (after the restart)" tly check --all
kill -0 "$DPID" 2>/dev/null || t_fail "tallyd (pid $DPID) is gone"
[ "$(grep -c 'info: started' "$T_DLOG")" -eq 1 ] || t_fail "tallyd was restarted"
t_ok "provider.recovered; status and check exit 0; the same tallyd (pid $DPID)"

t_say "the provider's admin password changed (provider-auth-failed)"
SINCE=$(head_seq)
head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$W/admin2.pw"
t_sql "ALTER ROLE postgres PASSWORD '$(cat "$W/admin2.pw")'"
pu=$(wait_ev $((VI * 3 + 5)) provider/node-a/postgres provider.unreachable)
printf '%s' "$pu" | grep -q '"kind":"provider-auth-failed"' ||
	t_fail "provider.unreachable is not of kind provider-auth-failed: $pu"
t_expect_exit 6 "tally status app-1 (admin password changed)" tly status app-1
grep -q 'refused tally.s admin login: the admin secret is missing or refused' "$W/last.out" &&
	grep -q 'tally assign postgres node-a --secret admin-password' "$W/last.out" || {
	cat "$W/last.out" >&2
	t_fail "status does not say the admin secret is refused and how to record the new one"
}
t_ok "exit 6: $(grep -m1 'admin login' "$W/last.out" | sed 's/^.*admin login: //')"
sleep $((VI * 2))
n=$(tly log --json --from $((SINCE + 1)) --type provider.unreachable | wc -l)
[ "$n" -eq 1 ] || t_fail "provider.unreachable recorded $n times while the admin password is refused (expected once)"
t_ok "recorded once over $((VI * 2)) s"
t_check "recording the new admin password recovers, no other action"
tly assign postgres node-a --expose local --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --secret admin-password \
	<"$W/admin2.pw" >/dev/null || t_fail "recording the new admin password failed"
wait_ev $((VI * 3 + 5)) provider/node-a/postgres provider.recovered >/dev/null
t_wait_healthy 10
t_ok "provider.recovered after tally assign postgres node-a --secret admin-password"

t_say "tallyd --once: one verification pass and its repairs"
t_tallyd_stop
SINCE=$(head_seq)
t_sql "ALTER ROLE \"$U1\" PASSWORD 'changed-again'"
if t_env_psql "$f1" "SELECT 1" >/dev/null 2>&1; then
	t_fail "app-1's credential still works after ALTER ROLE (nothing to repair)"
fi
t_tallyd_once
wait_ev 0 grant/app-1/db grant.drifted '"kind":"credential-mismatch"' >/dev/null
wait_ev 0 grant/app-1/db grant.repaired '"kind":"credential-mismatch"' >/dev/null
[ "$(t_env_psql "$f1" "SELECT session_user")" = "$U1" ] ||
	t_fail "app-1's credential does not work after tallyd --once"
t_ok "exit 0; drifted + repaired in the log before it exited; app-1 connects"
SINCE=$(head_seq)
t_sql "DROP DATABASE \"$A2\" WITH (FORCE)"
t_expect_exit 6 "tallyd --once with a database dropped" \
	"$TALLY_BIN/tallyd" --once --once-timeout 60
wait_ev 0 grant/app-2/db grant.missing >/dev/null
t_ok "tallyd --once exits 6: $(grep 'not healthy' "$W/last.err" | tail -n 1 | sed 's/^.*info: //')"
tly repair app-2/db >/dev/null
t_tallyd_once
wait_ev 0 grant/app-2/db grant.repaired '"kind":"missing-resource"' >/dev/null
t_expect_exit 0 "tally status after repair with tallyd --once" tly status
t_ok "tally repair + tallyd --once: recreated; tally status exit 0"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "chain sound; projections identical"
