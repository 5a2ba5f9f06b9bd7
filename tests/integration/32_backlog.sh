#!/bin/sh
# A backlog on two providers: 40 grants requested on node-a's postgres,
# then 40 on node-b's, tallyd --workers 1 (so at most 1 x 32 driver
# calls per provider in one provisioning pass).
#
#   - the backlog is worked off in passes, each recorded as it ends: the
#     intents of a pass are followed by its outcomes before the next
#     pass's intents;
#   - the cap is per provider, oldest first: the first pass takes the
#     first 32 requested of each provider, node-b's included although
#     all of its requests are newer than node-a's;
#   - every grant is provisioned, delivered and connects.
. "$(dirname "$0")/lib.sh"

N=40

t_say "two throwaway PostgreSQL servers; $N consumers on each, requested at once"
t_pg_start pg1
t_init
t_node node-a 127.0.0.1
t_node node-b localhost
t_provider node-a local
t_pg_start pg2
t_provider node-b local
for n in a b; do
	i=1
	ms=""
	while [ $i -le $N ]; do
		ms="$ms $(t_consumer "$n$i")"
		i=$((i + 1))
	done
	# shellcheck disable=SC2086
	tly apply $ms >/dev/null
	i=1
	while [ $i -le $N ]; do
		tly assign "$n$i" "node-$n" >/dev/null || t_fail "assign $n$i"
		i=$((i + 1))
	done
done
t_tallyd_once --workers 1

t_check "worked off in passes, each recorded as it ends"
tly log --json --type 'grant.provision*' | t_jfields type >"$W/types"
[ "$(grep -c '^grant.provisioned$' "$W/types")" -eq $((2 * N)) ] ||
	t_fail "$(grep -c '^grant.provisioned$' "$W/types") of $((2 * N)) grants provisioned"
# Rounds: runs of intents, each ended by outcomes.
rounds=$(awk '$1 == "grant.provisioning" && last != $1 { n++ } { last = $1 }
	END { print n + 0 }' "$W/types")
first=$(awk '$1 == "grant.provisioning" { n++; next } n > 0 { print n; exit }' "$W/types")
[ "$rounds" -ge 2 ] || t_fail "$rounds round(s) of intents for $((2 * N)) grants: not capped"
[ "$first" -eq 64 ] || t_fail "the first pass made $first intents, not 32 per provider"
t_ok "$rounds rounds; the first of $first intents, its outcomes recorded before the next"

t_check "per provider, oldest first: the first 32 requested of each"
tly log --json --type grant.provisioning | head -n 64 | t_jfields provider grant >"$W/round1"
for p in node-a/postgres node-b/postgres; do
	grep "^$p " "$W/round1" | cut -d' ' -f2 | sort >"$W/int"
	tly log --json --type grant.requested | t_jfields provider grant |
		grep "^$p " | head -n 32 | cut -d' ' -f2 | sort >"$W/req"
	[ "$(wc -l <"$W/int")" -eq 32 ] || t_fail "$p: $(wc -l <"$W/int") intents in the first pass"
	cmp -s "$W/req" "$W/int" || {
		diff "$W/req" "$W/int" >&2 || true
		t_fail "$p: the first pass is not its first 32 requests"
	}
done
t_ok "32 each, the oldest 32 of each provider"

t_check "every grant delivered and connecting"
for n in a b; do
	i=1
	while [ $i -le $N ]; do
		[ "$(t_env_psql "$(t_envfile "node-$n" "$n$i")" "SELECT current_database()")" = "$(t_gname "$n$i/db" "$n$i-db")" ] ||
			t_fail "$n$i's credential does not reach $n$i-db"
		i=$((i + 1))
	done
done
t_expect_exit 0 "tally status" tly status
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "$((2 * N)) connect; status healthy; chain sound; projections identical"
