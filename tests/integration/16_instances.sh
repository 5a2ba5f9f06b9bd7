#!/bin/sh
# How many instances (issue 16, item 1): a module declares instances:
# one-per-mesh | one-per-node | any.  A bad value is refused naming the
# file, line and field; the value is recorded in module.declared; tally
# assign (and provider move, and a re-declaration) refuse what it
# forbids, naming what is there; status and explain show it; a real
# PostgreSQL serves the one-per-node provider, and rebuild --check is
# identical afterwards.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL, three nodes"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.1
t_node node-c 127.0.0.1
M=$W/manifests
mkdir -p "$M"

t_check "a bad instances: value is refused, naming file, line and field"
cat >"$M/bad.yaml" <<'Y'
module: bad
# comment
instances: two-per-rack
Y
t_expect_exit 4 "apply instances: two-per-rack" tly apply "$M/bad.yaml"
grep -q "bad.yaml:3:[0-9]*: instances: instances must be one-per-mesh, one-per-node or any, not 'two-per-rack'" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "the refusal does not name bad.yaml:3 and the field instances"
}
tly log --json | grep -q '"bad"' && t_fail "the bad manifest appended something"
t_ok "$(head -n 1 "$W/last.err")"

# pgpair NAME INSTANCES: a postgres provider module NAME.
pgmod() {
	{
		echo "module: $1"
		[ -n "$2" ] && echo "instances: $2"
		echo "provides:"
		echo "  postgres-database: {driver: postgres}"
	} >"$M/$1.yaml"
	echo "$M/$1.yaml"
}
asg() {
	tly assign "$1" "$2" --expose network --set port="$TALLY_TEST_PG_PORT" \
		--set admin-user="$TALLY_TEST_PG_USER" \
		--secret admin-password <"$TALLY_TEST_PG_PWFILE"
}
cat >"$M/broker.yaml" <<'Y'
module: broker
instances: one-per-mesh
Y
tly apply "$M/broker.yaml" "$(pgmod postgres one-per-node)" "$(pgmod pg-extra "")" \
	"$(t_consumer shop)" >/dev/null

t_check "module.declared records instances (and leaves it out for any)"
tly log --json | grep '"type":"module.declared"' | grep '"name":"broker"' |
	grep -q '"instances":"one-per-mesh"' || t_fail "broker's declaration has no instances: one-per-mesh"
tly log --json | grep '"type":"module.declared"' | grep '"name":"postgres"' |
	grep -q '"instances":"one-per-node"' || t_fail "postgres's declaration has no instances: one-per-node"
tly log --json | grep '"type":"module.declared"' | grep '"name":"pg-extra"' |
	grep -q '"instances"' && t_fail "pg-extra (any) records instances"
t_ok "one-per-mesh and one-per-node recorded; any is the absent default"

t_check "a second assignment of a one-per-mesh module is refused, naming the first"
tly assign broker node-a >/dev/null
n0=$(tly log --json | wc -l)
t_expect_exit 4 "assign broker node-b" tly assign broker node-b
grep -q "broker is declared instances: one-per-mesh and already runs on node-a (broker@node-a)" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "the refusal does not name broker@node-a"
}
[ "$(tly log --json | wc -l)" = "$n0" ] || t_fail "the refused assign appended events"
tly assign broker node-a >/dev/null || t_fail "assigning again where it runs (a reconfiguration) was refused"
t_ok "$(cat "$W/last.err")"

t_check "a one-per-node provider beside another of its kind is refused, both ways"
asg postgres node-a >/dev/null
t_expect_exit 4 "assign pg-extra beside postgres on node-a" asg pg-extra node-a
grep -q "postgres on node-a is declared instances: one-per-node and provides postgres-database, which pg-extra provides too: node-a already has one" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "pg-extra beside postgres: not the expected refusal"
}
asg pg-extra node-b >/dev/null || t_fail "pg-extra on node-b (no postgres there) was refused"
t_expect_exit 4 "assign postgres beside pg-extra on node-b" asg postgres node-b
grep -q "postgres is declared instances: one-per-node and node-b already has one: pg-extra@node-b provides postgres-database too" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "postgres beside pg-extra: not the expected refusal"
}
t_ok "refused on node-a and node-b; pg-extra alone on node-b is fine"

t_check "provider move is held to the same rule"
t_expect_exit 4 "move pg-extra onto node-a" tly provider move node-b/pg-extra node-a
grep -q "one-per-node" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "provider move was not refused by instances"; }
t_ok "$(cat "$W/last.err")"

t_check "a re-declaration the assignments break is refused"
sed 's/^instances: one-per-node$//' "$M/postgres.yaml" >"$M/pg2.yaml"
tly apply "$M/pg2.yaml" >/dev/null || t_fail "declaring postgres any was refused"
asg postgres node-c >/dev/null
t_expect_exit 4 "re-declare postgres one-per-mesh on two nodes" tly apply "$(pgmod postgres one-per-mesh)"
grep -q "postgres: instances: one-per-mesh, but it runs on node-a and node-c already (2 assignments)" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "the re-declaration refusal does not name the assignments"
}
tly apply "$(pgmod postgres one-per-node)" >/dev/null || t_fail "back to one-per-node was refused"
t_ok "$(cat "$W/last.err")"

t_check "the one-per-node provider serves a consumer on the real PostgreSQL"
tly assign shop node-a >/dev/null
t_tallyd_once
t_wait_healthy 10 shop
t_env_psql "$(t_envfile node-a shop)" "SELECT 1" >/dev/null || t_fail "shop cannot connect"
t_ok "shop on node-a provisioned by node-a/postgres"

t_check "status and explain show the declaration"
tly status broker >"$W/st.out" || true
grep -q "^broker: .*(instances: one-per-mesh)" "$W/st.out" || { cat "$W/st.out" >&2; t_fail "status does not show instances"; }
tly status --json broker | grep -q '"instances":"one-per-mesh"' || t_fail "status --json has no instances"
tly explain postgres >"$W/ex.out"
grep -q "^  instances: one-per-node" "$W/ex.out" || { cat "$W/ex.out" >&2; t_fail "explain does not show instances"; }
tly explain shop | grep -q "^  instances: any (the default" || t_fail "explain does not show the default"
t_ok "$(head -n 1 "$W/st.out"); explain: $(sed -n 2p "$W/ex.out")"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check differs"
t_ok "the log verifies and the projections rebuild identically"
