#!/bin/sh
# A backlog: 70 grants requested at once, tallyd --workers 1 (so at most
# 1 x 32 driver calls per provider in one provisioning pass).
#
#   - the backlog is worked off in passes, each recorded as it ends: the
#     intents of the first pass are followed by its outcomes before the
#     next pass's intents (three rounds for 70 grants);
#   - oldest first: the first pass takes the first 32 requested;
#   - every grant is provisioned, delivered and connects.
. "$(dirname "$0")/lib.sh"

N=70

t_say "throwaway PostgreSQL; $N consumers requested at once"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
i=1
ms=""
while [ $i -le $N ]; do
	ms="$ms $(t_consumer "b$i")"
	i=$((i + 1))
done
# shellcheck disable=SC2086
tly apply $ms >/dev/null
i=1
while [ $i -le $N ]; do
	tly assign "b$i" node-a >/dev/null || t_fail "assign b$i"
	i=$((i + 1))
done
t_tallyd_once --workers 1

t_check "worked off in passes of at most 32, each recorded as it ends"
tly log --json --type 'grant.provision*' | t_jfields type >"$W/types"
[ "$(grep -c '^grant.provisioned$' "$W/types")" -eq $N ] ||
	t_fail "$(grep -c '^grant.provisioned$' "$W/types") of $N grants provisioned"
# Rounds: runs of intents, each ended by outcomes.
rounds=$(awk '$1 == "grant.provisioning" && last != $1 { n++ } { last = $1 }
	END { print n + 0 }' "$W/types")
[ "$rounds" -ge 3 ] || t_fail "$rounds round(s) of intents for $N grants: not capped at 32"
biggest=$(awk '$1 == "grant.provisioning" { run++ } $1 != "grant.provisioning" {
	if (run > m) m = run; run = 0 } END { if (run > m) m = run; print m + 0 }' "$W/types")
[ "$biggest" -le 32 ] || t_fail "a pass made $biggest intents (cap 32)"
t_ok "$rounds rounds, at most $biggest intents each, every outcome recorded before the next round"

t_check "oldest first: the first round is the first 32 requested"
tly log --json --type grant.requested | t_jfields grant | head -n 32 |
	sort >"$W/first-req"
tly log --json --type grant.provisioning | t_jfields grant | head -n 32 |
	sort >"$W/first-int"
[ "$(wc -l <"$W/first-req")" -eq 32 ] || t_fail "could not read the requests"
cmp -s "$W/first-req" "$W/first-int" || {
	diff "$W/first-req" "$W/first-int" >&2 || true
	t_fail "the first round is not the first 32 requested"
}
t_ok "the first 32 intents are for the first 32 requests"

t_check "every grant delivered and connecting"
i=1
while [ $i -le $N ]; do
	[ "$(t_env_psql "$(t_envfile node-a "b$i")" "SELECT current_database()")" = "b$i-db" ] ||
		t_fail "b$i's credential does not reach b$i-db"
	i=$((i + 1))
done
t_expect_exit 0 "tally status" tly status
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "$N connect; status healthy; chain sound; projections identical"
