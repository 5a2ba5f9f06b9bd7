#!/bin/sh
# tally provider move, against two real PostgreSQL servers: pg1 is the
# provider node-a/postgres, pg2 the provider node-b/postgres.  pg1's
# machine moves to node-c (the server itself stays where it is: what
# changes is the name consumers reach it by).
#
#   the provider keeps its id and its bindings; its assignment moves
#   (settings and secrets with it: the rotation at the new address can
#   only log in as admin if they did);
#   every grant it serves is re-delivered to every holder with node-c's
#   routable name (a rotation, reason "provider moved"), acknowledged,
#   the old credential retired; pg2's consumers are untouched;
#   re-registering the provider keeps its id; refusals: the module
#   already on the node, no such node, the old node again under the
#   moved id, a move while a grant rotates;
#   afterwards tally verify and tally rebuild --check pass.
#
# Routable names: node-a and node-b are 127.0.0.1, node-c is localhost
# (both the loopback the servers listen on).
. "$(dirname "$0")/lib.sh"
# The grants' databases (reactors/names.c).

t_say "two throwaway PostgreSQL servers; node-a, node-b (127.0.0.1), node-c (localhost)"
t_pg_start pg1
P1=$TALLY_TEST_PG_PORT S1=$TALLY_TEST_PG_SOCK W1=$TALLY_TEST_PG_PWFILE
t_pg_start pg2
P2=$TALLY_TEST_PG_PORT W2=$TALLY_TEST_PG_PWFILE
[ "$P1" != "$P2" ] || t_fail "both servers on port $P1"
sql1() { psql -X -At -q -v ON_ERROR_STOP=1 -h "$S1" -p "$P1" -U postgres -d postgres -c "$1"; }

t_init
# The grants' names, from the mesh id tally init drew (t_gname).
SHOP=$(t_gname shop/db shop-db)
t_node node-a 127.0.0.1
t_node node-b 127.0.0.1
t_node node-c localhost
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
tly assign postgres node-a --expose network --set port="$P1" --set admin-user=postgres \
	--secret admin-password <"$W1" >/dev/null || t_fail "assign postgres node-a"
tly assign postgres node-b --expose network --set port="$P2" --set admin-user=postgres \
	--secret admin-password <"$W2" >/dev/null || t_fail "assign postgres node-b"
tly apply "$(t_consumer shop shared)" "$(t_consumer blog per-instance)" >/dev/null
tly assign shop node-a >/dev/null
tly assign shop node-b >/dev/null
tly assign blog node-b >/dev/null
t_tallyd_once
t_wait_healthy 10
EA=$(t_envfile node-a shop)
EB=$(t_envfile node-b shop)
BB=$(t_envfile node-b blog)
for f in "$EA" "$EB"; do
	[ "$(t_envget "$f" DB_HOST)" = 127.0.0.1 ] && [ "$(t_envget "$f" DB_PORT)" = "$P1" ] ||
		t_fail "$f: expected 127.0.0.1:$P1 before the move"
done
[ "$(t_envget "$BB" DB_PORT)" = "$P2" ] || t_fail "blog is not on pg2"
t_env_psql "$EA" "CREATE TABLE t (x int); INSERT INTO t VALUES (1), (2)" >/dev/null ||
	t_fail "the consumer cannot write"
cp "$BB" "$W/blog.before"
OLDPW=$(t_envget "$EA" DB_PASSWORD)
t_ok "shop/db on node-a/postgres (holders node-a, node-b), blog/db@node-b on node-b/postgres"

t_say "refusals"
t_expect_exit 4 "move onto a node that runs postgres" tly provider move node-a/postgres node-b
grep -q "already runs on node-b" "$W/last.err" || t_fail "the refusal does not say why: $(cat "$W/last.err")"
t_expect_exit 3 "move to no node" tly provider move node-a/postgres node-z
t_expect_exit 3 "move of no provider" tly provider move node-z/postgres node-c
t_expect_exit 2 "no arguments" tly provider move node-a/postgres
[ "$(tly log --json --type provider.moved | wc -l)" = 0 ] || t_fail "a refused move appended"
t_ok "exit 4 (module already there), 3 (no node, no provider), 2 (usage)"

t_say "tally provider move node-a/postgres node-c"
regs=$(tly log --json --type provider.registered | wc -l)
tly provider move node-a/postgres node-c >"$W/mv" || t_fail "tally provider move failed"
t_ok "$(cat "$W/mv")"
t_check "one provider.moved; the assignment moved; one rotation, reason provider moved"
tly log --json --type provider.moved >"$W/pm"
[ "$(wc -l <"$W/pm")" = 1 ] && grep -q '"stream":"provider/node-a/postgres"' "$W/pm" &&
	grep -q '"from":"node-a"' "$W/pm" && grep -q '"to":"node-c"' "$W/pm" ||
	{ cat "$W/pm" >&2; t_fail "provider.moved is not as expected"; }
[ "$(tly log --json --stream assignment/postgres@node-a --type assignment.removed | wc -l)" = 1 ] ||
	t_fail "postgres@node-a was not removed"
[ "$(tly log --json --stream assignment/postgres@node-c --type assignment.created | wc -l)" = 1 ] ||
	t_fail "postgres@node-c was not created"
tly log --json --type rotation.started >"$W/rs"
[ "$(wc -l <"$W/rs")" = 1 ] && grep -q '"grant/shop/db"' "$W/rs" &&
	grep -q '"reason":"provider moved"' "$W/rs" || { cat "$W/rs" >&2; t_fail "expected one rotation of shop/db"; }
[ "$(tly log --json --type binding.made | wc -l)" = 2 ] && [ "$(tly log --json --type binding.moved | wc -l)" = 0 ] ||
	t_fail "bindings changed"
tly graph --json >"$W/graph"
grep -q '"id":"node-a/postgres"[^}]*"node":"node-c"\|"node":"node-c"[^}]*"id":"node-a/postgres"' "$W/graph" ||
	t_fail "the graph does not show node-a/postgres on node-c"
[ "$(tly log --json --type provider.registered | wc -l)" = "$regs" ] || t_fail "a provider was registered"
t_ok "same id, same bindings; shop/db rotating"

t_check "a second move is refused while its grant rotates"
t_expect_exit 4 "move during the rotation" tly provider move node-a/postgres node-a
grep -q "rotating" "$W/last.err" || t_fail "the refusal does not say a grant rotates: $(cat "$W/last.err")"

t_say "tallyd re-delivers the new routable name"
t_tallyd_once
t_check "every holder of shop gets node-c's routable name, with a new credential that works"
for f in "$EA" "$EB"; do
	[ "$(t_envget "$f" DB_HOST)" = localhost ] || t_fail "$f: DB_HOST $(t_envget "$f" DB_HOST), expected localhost"
	[ "$(t_envget "$f" DB_PORT)" = "$P1" ] || t_fail "$f: DB_PORT changed"
	[ "$(t_envget "$f" DB_USER)" = ${SHOP}_v2 ] || t_fail "$f: DB_USER $(t_envget "$f" DB_USER), expected ${SHOP}_v2"
	[ "$(t_env_psql "$f" "SELECT count(*) FROM t")" = 2 ] || t_fail "$f: the credential does not reach the data"
done
n=$(tly log --json --stream grant/shop/db --type credential.delivered | grep -c '"version":2[,}]')
[ "$n" = 2 ] || t_fail "expected 2 deliveries of v2, found $n"
t_envfile node-b blog >/dev/null
cmp -s "$W/blog.before" "$BB" || t_fail "blog's env file changed (it is pg2's)"
tly status shop >"$W/st" 2>&1 || true
grep -q "rotating v1 → v2 (provider moved): waiting on node-a/shop, node-b/shop" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "status does not show the rotation waiting on both holders"; }
t_ok "node-a and node-b: localhost:$P1 as ${SHOP}_v2; blog untouched"

t_check "after both acks the old credential is retired"
tly ack node-a shop 2 >/dev/null && tly ack node-b shop 2 >/dev/null || t_fail "tally ack"
t_tallyd_once
[ "$(tly log --json --stream grant/shop/db --type rotation.completed | wc -l)" = 1 ] ||
	t_fail "the rotation did not complete"
[ "$(sql1 "SELECT count(*) FROM pg_roles WHERE rolname = '${SHOP}_v1'")" = 0 ] ||
	t_fail "the old login ${SHOP}_v1 still exists"
t_wait_healthy 10
t_ok "rotation.completed; ${SHOP}_v1 dropped; healthy"

t_say "the moved provider stays itself"
t_check "re-configuring postgres on node-c keeps the id node-a/postgres"
tly assign postgres node-c --expose network --set port="$P1" --set admin-user=postgres --set admin-db=postgres \
	--secret admin-password <"$W1" >/dev/null || t_fail "re-assign postgres node-c"
[ "$(tly log --json --type provider.registered | wc -l)" = "$regs" ] ||
	t_fail "re-configuring registered a provider: $(tly log --json --type provider.registered | tail -n 1)"
t_check "postgres on node-a again is refused: the id is the moved provider's"
t_expect_exit 4 "assign postgres node-a" tly assign postgres node-a --set port="$P1"
grep -q "belongs to the provider that moved" "$W/last.err" || t_fail "unexpected refusal: $(cat "$W/last.err")"
t_ok "no new provider; $(cut -c1-90 "$W/last.err")…"

t_check "tallyd still verifies the moved provider's grant at its new address"
t_tallyd_once
tly check shop/db >/dev/null 2>&1 || { tly check shop/db >&2 || true; t_fail "tally check shop/db"; }

t_say "the log and the projections"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >"$W/rb" 2>&1 || { cat "$W/rb" >&2; t_fail "tally rebuild --check failed"; }
t_ok "$(tail -n 1 "$W/rb")"
NEWPW=$(t_envget "$EA" DB_PASSWORD)
for pw in "$OLDPW" "$NEWPW" "$(cat "$W1")"; do
	if grep -q -- "$pw" "$T_DLOG" || tly log --json | grep -q -- "$pw"; then
		t_fail "a password in tallyd's output or in the log"
	fi
done
t_ok "no password in the log or in tallyd's output"
