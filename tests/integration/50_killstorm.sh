#!/bin/sh
# Kill storm: 100 grants are requested (100 consumer modules, assigned
# one by one while it happens) and tallyd (a daemon, --workers 4) is
# killed with SIGKILL at random moments, at least 10 times, and started
# again each time.  Then a final tallyd --once, and every grant must
# exist exactly once in PostgreSQL: the databases and roles on the
# server are exactly those the log's grants name (no orphan, no
# duplicate, no second credential version), every delivered credential
# connects, tally verify passes and tally rebuild --check finds the
# projections identical.
. "$(dirname "$0")/lib.sh"

N=${TALLY_KILLSTORM_GRANTS:-100}
KILLS=${TALLY_KILLSTORM_KILLS:-12}	# at least; more while grants are in flight
STORM_S=${TALLY_KILLSTORM_SECONDS:-25}	# and on, while grants are in flight, up to this

t_say "throwaway PostgreSQL, tally home, $N consumer modules"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
mf=$W/consumers.yaml
i=1
: >"$mf"
while [ $i -le "$N" ]; do
	m=$(printf 'c%03d' $i)
	printf -- '---\n' >>"$mf"
	sed -n '1,$p' "$(t_consumer "$m")" >>"$mf"
	i=$((i + 1))
done
tly apply "$mf" >/dev/null || t_fail "tally apply of $N modules failed"
base_dbs=$(t_sql "SELECT count(*) FROM pg_database")

t_say "requesting $N grants while tallyd is SIGKILLed at random ($KILLS times at least)"
t_tallyd_start --workers 4
(
	i=1
	while [ $i -le "$N" ]; do
		tly assign "$(printf 'c%03d' $i)" node-a >/dev/null ||
			{ echo "assign c$i failed" >&2; exit 1; }
		sleep "0.0$(t_rand 6)"
		i=$((i + 1))
	done
) &
APID=$!
: >"$W/kills"
k=0
t0=$(t_now_ms)
while :; do
	# A random moment after the (re)start: mostly 50..850 ms (inside a
	# pass, usually during the driver calls), sometimes 1..3 s (after
	# passes have committed their outcomes and written files).
	if [ "$(t_rand 10)" -lt 7 ]; then
		ms=$((50 + $(t_rand 800)))
	else
		ms=$((1000 + $(t_rand 2000)))
	fi
	sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
	kill -KILL "$T_DPID" 2>/dev/null || t_fail "tallyd (pid $T_DPID) had died by itself"
	date -u +%Y-%m-%dT%H:%M:%S.%NZ >>"$W/kills"
	t_wait_exit "$T_DPID" 10
	k=$((k + 1))
	# Enough kills and every request is in; then on while grants are
	# still being provisioned, for up to STORM_S seconds in all.
	if [ $k -ge "$KILLS" ] && ! kill -0 $APID 2>/dev/null; then
		done_n=$(tly log --json --type grant.provisioned | wc -l)
		[ "$done_n" -lt "$N" ] &&
			[ $(($(t_now_ms) - t0)) -lt $((STORM_S * 1000)) ] || break
	fi
	t_tallyd_start --workers 4
done
wait $APID || t_fail "requesting the grants failed"
t1=$(t_now_ms)
t_ok "$k SIGKILLs in $((t1 - t0)) ms; $N assignments made meanwhile"
t_note "$(tly log --json --type grant.provisioned | wc -l) of $N grants provisioned during the storm"
req=$(tly log --json --type grant.requested | wc -l)
[ "$req" -eq "$N" ] || t_fail "expected $N grant.requested, found $req"

t_say "final tallyd --once"
t2=$(t_now_ms)
t_tallyd_once --workers 4
t_ok "converged in $(($(t_now_ms) - t2)) ms"
t_expect_exit 0 "tally status after the storm" tly status

t_check "each grant was provisioned exactly once, with one credential version"
tly log --json --type grant.provisioned | t_jfields grant database user >"$W/prov"
n=$(wc -l <"$W/prov")
u=$(cut -d' ' -f1 "$W/prov" | sort -u | wc -l)
[ "$n" -eq "$N" ] && [ "$u" -eq "$N" ] ||
	t_fail "$n grant.provisioned events for $u grants; expected exactly one for each of $N"
if grep -v ' [^ ]*_v1$' "$W/prov" >"$W/v2"; then
	cat "$W/v2" >&2
	t_fail "grants with a credential version other than 1 (an intent was not resumed)"
fi
tly log --json --type grant.provisioning | t_jfields grant owner user >"$W/intents"
ni=$(wc -l <"$W/intents")
[ "$ni" -eq "$N" ] || t_fail "$ni intents (grant.provisioning) for $N grants: an intent was issued twice"
t_ok "$N grants, $N intents, $N outcomes, all credential version 1"

t_check "the server holds exactly the grants' databases and roles: no orphan, no duplicate"
cut -d' ' -f2 "$W/prov" | sort >"$W/want-db"
t_sql "SELECT datname FROM pg_database
	WHERE datname NOT IN ('postgres', 'template0', 'template1') ORDER BY 1" |
	sort >"$W/have-db"
if ! cmp -s "$W/want-db" "$W/have-db"; then
	diff "$W/want-db" "$W/have-db" | head -n 20 >&2
	t_fail "databases on the server differ from the grants (< log only, > server only)"
fi
{ cut -d' ' -f2 "$W/intents"; cut -d' ' -f3 "$W/intents"; } | sort >"$W/want-role"
t_sql "SELECT rolname FROM pg_roles WHERE rolname NOT LIKE 'pg\_%'
	AND rolname <> '$TALLY_TEST_PG_USER' ORDER BY 1" | sort >"$W/have-role"
if ! cmp -s "$W/want-role" "$W/have-role"; then
	diff "$W/want-role" "$W/have-role" | head -n 20 >&2
	t_fail "roles on the server differ from the grants (< log only, > server only)"
fi
[ "$(t_sql "SELECT count(*) FROM pg_database")" -eq $((base_dbs + N)) ] ||
	t_fail "the number of databases is not $((base_dbs + N))"
t_ok "$N databases and $((2 * N)) roles, exactly those the log names"

t_check "the control plane keeps no delivery file (plaintext exists only on nodes)"
[ ! -e "$TALLY_HOME/deliver" ] || { find "$TALLY_HOME/deliver" >&2; t_fail "$TALLY_HOME/deliver exists"; }
t_ok "no $TALLY_HOME/deliver"

t_check "every delivered credential connects to its own database"
nf=0
for m in $(cut -d' ' -f1 "$W/prov" | sed 's|/db$||'); do
	f=$(t_envfile node-a "$m")
	nf=$((nf + 1))
	grep -q "^$m/db $(_t_envread "$f" DB_NAME) $(_t_envread "$f" DB_USER)\$" "$W/prov" ||
		t_fail "$f does not name its grant's database and login"
	[ "$(t_env_psql "$f" "SELECT current_database()")" = "$(t_gname "$m/db" "$m-db")" ] ||
		t_fail "the credential in $f does not connect to $m-db"
done
[ "$nf" -eq "$N" ] || t_fail "$nf env files, expected $N"
t_ok "$N env files, $N connections"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >"$W/rebuild.out" || { cat "$W/rebuild.out" >&2; t_fail "tally rebuild --check: projections differ"; }
t_ok "chain sound; projections identical"

# How many grants had their intent open across a SIGKILL (provisioning
# before the kill, provisioned after it): the resumptions exercised.
# Timestamps are fixed-width RFC 3339 (nanoseconds), so they compare as
# strings.
tly log --json --type 'grant.provision*' | t_jfields type grant ts |
	awk -v kf="$W/kills" '
	BEGIN { while ((getline l < kf) > 0) kill[++nk] = l }
	$1 == "grant.provisioning" { start[$2] = $3 }
	$1 == "grant.provisioned" { end[$2] = $3 }
	END {
		for (g in start)
			for (i = 1; i <= nk; i++)
				if (start[g] < kill[i] && kill[i] < end[g]) {
					n++
					break
				}
		print n + 0
	}' >"$W/inflight"
t_note "$(cat "$W/inflight") grant(s) had an open intent at a SIGKILL and were completed by a later tallyd"
