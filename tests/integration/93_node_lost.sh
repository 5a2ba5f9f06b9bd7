#!/bin/sh
# A node that is gone for good (issue 16, item 7).  Before: a dead node
# could never be removed (node rm refused), rebind could not freeze its
# side, revocation against its provider retried forever.  Now: node rm
# of a live node names every module on it and every grant bound to its
# providers; tally node lost NODE --yes (refused without) records
# node.lost with its actor, marks the grants on its providers lost,
# ends its assignments, stops the revocation retries, and node rm then
# works; each consumer of a lost grant is a question in status and
# explain with the commands that answer it, and tally rebind --empty
# answers it: a new, empty database on another real PostgreSQL.
. "$(dirname "$0")/lib.sh"

t_say "two throwaway PostgreSQL servers: pg1 for node-a, pg2 for node-c"
t_pg_start pg1
P1=$TALLY_TEST_PG_PORT W1=$TALLY_TEST_PG_PWFILE D1=$PG_DIR
t_pg_start pg2
P2=$TALLY_TEST_PG_PORT W2=$TALLY_TEST_PG_PWFILE D2=$PG_DIR
[ "$P1" != "$P2" ] || t_fail "both servers on port $P1"
t_init
t_board_follow
t_node node-a 127.0.0.1
t_node node-c localhost
tly apply "$TALLY_SRC/examples/postgres.yaml" "$(t_consumer shop)" \
	"$(t_consumer gone-app)" "$(t_consumer worker per-instance)" >/dev/null
tly assign postgres node-c --expose network --set port="$P2" --set admin-user=postgres \
	--secret admin-password <"$W2" >/dev/null || t_fail "assign postgres node-c"
tly assign shop node-a >/dev/null	# node-c/postgres: the only candidate
tly assign gone-app node-a >/dev/null
tly assign worker node-c >/dev/null
tly assign postgres node-a --expose network --set port="$P1" --set admin-user=postgres \
	--secret admin-password <"$W1" >/dev/null || t_fail "assign postgres node-a"

# once: tallyd --once, which exits 6 while something is unhealthy.
# once [SECONDS]: the limit, default 60 (--once waits for pending work).
once() {
	set +e
	"$TALLY_BIN/tallyd" --once --once-timeout "${1:-60}" 2>>"$T_DLOG"
	_rc=$?
	set -e
	[ $_rc -eq 0 ] || [ $_rc -eq 6 ] || { tail -n 20 "$T_DLOG" >&2; t_fail "tallyd --once exited $_rc"; }
}
once
t_wait_healthy 10 shop
S=$(t_envfile node-a shop)
[ "$(t_envget "$S" DB_PORT)" = "$P2" ] || t_fail "shop is not on pg2 (node-c)"
t_env_psql "$S" "CREATE TABLE orders (n int); INSERT INTO orders VALUES (1), (2)" >/dev/null ||
	t_fail "cannot write shop's data on pg2"

t_check "node rm of a live node names every module on it and every grant bound to its providers"
t_expect_exit 4 "node rm node-c (live)" tly node rm node-c
grep -q "node node-c still runs postgres, worker (2 module(s)); grants bound to its providers: 3 (gone-app/db, shop/db, worker/db@node-c)" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "node rm does not name every module and grant"
}
t_ok "$(cat "$W/last.err")"

t_check "node-c dies: revocation against its provider cannot complete and stays pending"
PG_DIR=$D2 t_pg_stop_server
tly remove gone-app >/dev/null
t0=$(t_now_ms)
once 5
once 5
t1=$(t_now_ms)
tly log --json --stream grant/gone-app/db --type revocation.requested | grep -q . ||
	t_fail "gone-app/db's revocation was not requested"
tly log --json --stream grant/gone-app/db --type grant.revoked | grep -q . &&
	t_fail "gone-app/db was revoked on a dead server"
tly grants --json >"$W/grants.json"
grep -q '"id":"gone-app/db"[^}]*"state":"revoking"\|"state":"revoking"[^}]*"id":"gone-app/db"' "$W/grants.json" ||
	grep -o '.\{0,200\}gone-app/db.\{0,200\}' "$W/grants.json" | grep -q '"revoking"' || {
	cat "$W/grants.json" >&2; t_fail "gone-app/db is not waiting to be revoked"
}
nf=$(tly log --json --stream grant/gone-app/db | wc -l)
t_ok "gone-app/db revoking, not revoked ($nf events on its stream)"

t_check "node lost asks for confirmation, and appends nothing without it"
n0=$(tly log --json | wc -l)
t_expect_exit 4 "node lost without --yes" tly node lost node-c
grep -q "Confirm with tally node lost node-c --yes" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "no confirmation asked"; }
[ "$(tly log --json | wc -l)" = "$n0" ] || t_fail "node lost without --yes appended events"
t_ok "$(cat "$W/last.err")"

t_check "node lost --yes: node.lost with its actor, grants lost, assignments ended, provider retired"
tly node lost node-c --yes >/dev/null || t_fail "tally node lost node-c --yes failed"
tly log --json --type node.lost | grep '"stream":"node/node-c"' | grep -q '"actor":"cli:' ||
	t_fail "node.lost is not recorded with its actor"
for g in shop/db gone-app/db worker/db@node-c; do
	tly log --json --stream "grant/$g" --type grant.lost | grep -q '"provider":"node-c/postgres"' ||
		t_fail "$g has no grant.lost"
done
for a in postgres@node-c worker@node-c; do
	tly log --json --stream "assignment/$a" --type assignment.removed | grep -q . ||
		t_fail "assignment $a did not end"
done
tly log --json --stream provider/node-c/postgres --type provider.retired | grep -q . ||
	t_fail "node-c/postgres was not retired"
tly log --json --type revocation.requested | grep -q '"grant":"shop/db"' &&
	t_fail "a lost grant was sent to revocation"
tly grants --json | grep -o '.\{0,200\}gone-app/db.\{0,200\}' | grep -q '"lost"' ||
	t_fail "gone-app/db (revoking when the node was lost) is not lost"
t_ok "node.lost, 3 x grant.lost, 2 assignments ended, node-c/postgres retired"

t_check "the revocation against the lost node is not retried"
nl=$(tly log --json --stream grant/gone-app/db | wc -l)
ll=$(wc -l <"$T_DLOG")
grep -q "node-c/postgres" "$T_DLOG" || t_fail "tallyd never reached for node-c/postgres before (the check below could not fail)"
t2=$(t_now_ms)
once 5
once 5
t3=$(t_now_ms)
[ "$(tly log --json --stream grant/gone-app/db | wc -l)" = "$nl" ] ||
	t_fail "tallyd acted on gone-app/db again after node lost"
tail -n +$((ll + 1)) "$T_DLOG" | grep "node-c/postgres" && 
	t_fail "tallyd still reaches for node-c/postgres after node lost"
t_ok "no event on gone-app/db's stream and no attempt at node-c/postgres in two passes ($((t3 - t2)) ms, against $((t1 - t0)) ms for the two passes that waited on the dead node)"

t_check "status and explain ask the question, with the commands that answer it"
tly status shop >"$W/st.out" && t_fail "status of shop is healthy with its data lost"
grep -q "lost: node node-c is lost (tally node lost): the data on node-c/postgres is not reachable.  A question for you, not a failure: give it a new, EMPTY resource elsewhere (the old data is not copied: it is gone): tally rebind shop/db node-a/postgres --empty" "$W/st.out" || {
	cat "$W/st.out" >&2; t_fail "status does not ask the question"
}
tly status --json shop | grep -q '"question":{"lost":"node node-c is lost[^}]*"commands":\["tally rebind shop/db node-a/postgres --empty"\]' ||
	t_fail "status --json has no question with its commands"
tly explain shop | grep -q "tally rebind shop/db node-a/postgres --empty" || {
	tly explain shop >&2; t_fail "explain does not ask the question"
}
t_ok "$(grep -o 'lost: node node-c is lost[^;]*' "$W/st.out" | head -n 1 | cut -c1-80)…"

t_check "tally-board, following all along, agrees and asks the same question on its page, with the answer"
n=$(t_board_agrees "node-c lost")
curl -fsS --max-time 5 "http://127.0.0.1:$_t_blport/" >"$W/page.html" || t_fail "GET / of the following board"
grep 'data-kind="question">shop@node-a: db lost (node node-c is lost' "$W/page.html" |
	grep -q '<code>tally rebind shop/db node-a/postgres --empty</code>' || {
	grep -o 'data-kind="[a-z-]*">[^<]*' "$W/page.html" >&2; t_fail "the board's page does not ask shop's question with its answer"
}
t_ok "$n requirement(s) the same; on the page: $(grep -o 'data-kind="question">[^<]*' "$W/page.html" | head -n 1 | cut -c 24-110)…"

t_check "rebind --migrate of a lost grant is refused, pointing at --empty"
t_expect_exit 4 "rebind shop/db --migrate" tly rebind shop/db node-a/postgres --migrate
grep -q "grant shop/db is lost: its data was on node-c/postgres, whose node is gone for good, so there is nothing to copy; tally rebind shop/db node-a/postgres --empty" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "rebind --migrate: not the expected refusal"
}
t_ok "$(cat "$W/last.err")"

t_check "node rm now works; a lost node takes no new assignment meanwhile"
t_expect_exit 4 "assign worker on the lost node" tly assign worker node-c
grep -q "node node-c is lost (tally node lost): nothing is placed on it again" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "assign on a lost node: not the expected refusal"
}
tly node rm node-c >/dev/null || t_fail "node rm node-c after node lost failed"
tly log --json --type node.removed | grep -q '"stream":"node/node-c"' || t_fail "no node.removed"
t_ok "node-c removed"

t_check "rebind --empty: a new, empty database on pg1, delivered, connectable"
tly rebind shop/db node-a/postgres --empty >"$W/rb.out" || t_fail "rebind --empty failed"
grep -q "a new, EMPTY resource" "$W/rb.out" || t_fail "rebind --empty does not say plainly that it is empty"
tly log --json --stream binding/shop/db --type binding.made | tail -n 1 |
	grep -q '"reason":"empty (tally rebind --empty)"' || t_fail "no binding.made with reason empty"
once
t_wait_healthy 10 shop
[ "$(t_envget "$S" DB_PORT)" = "$P1" ] || t_fail "shop's env file does not point at pg1"
t_env_psql "$S" "SELECT 1" >/dev/null || t_fail "shop cannot connect to its new database"
t_env_psql "$S" "SELECT to_regclass('orders') IS NULL" | grep -q '^t$' ||
	t_fail "the new database is not empty (orders exists)"
t_ok "shop on pg1, empty (no orders table), healthy"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check differs"
t_ok "the log verifies and the projections rebuild identically"
