#!/bin/sh
# Exposure is honoured (issue 16, item 3).  The defect as the issue
# states it: a provider assigned --expose local on node-c was bound to,
# and provisioned for, a consumer on node-a.  Now local serves only its
# own node, network (and public) the mesh, none nobody: the binder's
# candidates, tally bind, explain and status's reasons say so, a change
# of exposure that would strand a grant is refused, and the delivered
# host is loopback for local and the routable name otherwise.  Real
# PostgreSQL; rebuild --check identical at the end.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL; node-c's routable name is localhost"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.1
t_node node-c localhost
t_node node-d localhost
t_provider node-c local
tly apply "$(t_consumer shop)" "$(t_consumer local-app)" "$(t_consumer third)" \
	"$(t_consumer fourth)" >/dev/null
tly assign shop node-a >/dev/null

# once: tallyd --once, which exits 6 while a consumer waits unbound.
once() {
	set +e
	"$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG"
	_rc=$?
	set -e
	[ $_rc -eq 0 ] || [ $_rc -eq 6 ] || { tail -n 20 "$T_DLOG" >&2; t_fail "tallyd --once exited $_rc"; }
}

t_check "a local provider on node-c is not bound to a consumer on node-a"
tly log --json | grep '"type":"binding.made"' | grep -q '"grant":"shop/db"' && {
	tly log --json | grep '"grant":"shop/db"' >&2
	t_fail "shop/db (on node-a) was bound to node-c/postgres, exposed local"
}
once
tly log --json | grep '"type":"grant.provisioned"' | grep -q '"grant":"shop/db"' &&
	t_fail "shop/db was provisioned on node-c/postgres, exposed local"
tly status shop >"$W/st.out" || true
grep -q "no provider of type postgres-database from postgres serves it (1 registered, none whose exposure reaches it): node-c/postgres is exposed local: it serves only consumers on node-c, and shop runs on node-a" "$W/st.out" || {
	cat "$W/st.out" >&2; t_fail "status does not say why shop/db is unbound"
}
tly explain shop >"$W/ex.out"
grep -q "not bound: no provider .* node-c/postgres is exposed local" "$W/ex.out" || {
	cat "$W/ex.out" >&2; t_fail "explain does not say why shop/db is unbound"
}
t_ok "unbound, not provisioned; $(grep -o 'node-c/postgres is exposed local.*' "$W/st.out" | head -n 1)"

t_check "tally bind to it is refused, naming the exposure"
t_expect_exit 4 "bind shop/db to a local provider elsewhere" tly bind shop/db node-c/postgres
grep -q "shop/db cannot be bound to node-c/postgres: node-c/postgres is exposed local: it serves only consumers on node-c, and shop runs on node-a" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "bind: not the expected refusal"
}
t_ok "$(cat "$W/last.err")"

t_check "a consumer on node-c is served by it, over loopback"
tly assign local-app node-c >/dev/null
once
E=$(t_envfile node-c local-app)
[ "$(t_envget "$E" DB_HOST)" = 127.0.0.1 ] || t_fail "local-app's DB_HOST is $(t_envget "$E" DB_HOST), expected 127.0.0.1"
t_env_psql "$E" "SELECT 1" >/dev/null || t_fail "local-app cannot connect"
tly explain local-app | grep -q "bound to node-c/postgres because co-located.* (exposed local)" ||
	t_fail "explain does not show the exposure of local-app's provider"
t_expect_exit 4 "a shared consumer of a local provider on a second node" tly assign local-app node-a
grep -q "grant local-app/db would no longer be served: node-c/postgres is exposed local: it serves only consumers on node-c, and local-app runs on node-a" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "second node for local-app: not the expected refusal"
}
t_ok "local-app: DB_HOST=127.0.0.1, connects; a second node for it is refused"

t_check "exposed network, the waiting consumer on node-a is bound and gets the routable name"
tly assign postgres node-c --expose network >/dev/null
tly log --json | grep '"type":"binding.made"' | grep '"grant":"shop/db"' |
	grep -q '"provider":"node-c/postgres"' || t_fail "shop/db was not bound once node-c/postgres is network"
once
S=$(t_envfile node-a shop)
[ "$(t_envget "$S" DB_HOST)" = localhost ] || t_fail "shop's DB_HOST is $(t_envget "$S" DB_HOST), expected node-c's routable name localhost"
t_env_psql "$S" "SELECT 1" >/dev/null || t_fail "shop cannot connect"
tly explain shop | grep -q "bound to node-c/postgres because only candidate.* (exposed network)" || {
	tly explain shop >&2; t_fail "explain does not show shop/db bound to the network provider"
}
t_ok "shop: DB_HOST=localhost, connects"

t_check "narrowing it to local again is refused: shop/db would be stranded"
n0=$(tly log --json | wc -l)
t_expect_exit 4 "assign postgres node-c --expose local" tly assign postgres node-c --expose local
grep -q "grant shop/db would no longer be served: node-c/postgres is exposed local: it serves only consumers on node-c, and shop runs on node-a" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "narrowing: not the expected refusal"
}
[ "$(tly log --json | wc -l)" = "$n0" ] || t_fail "the refused assign appended events"
t_ok "$(cat "$W/last.err")"

t_check "exposed none serves nobody, not even its own node; ambiguity lists only those that serve"
tly assign postgres node-b --expose none --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null
tly assign third node-b >/dev/null
tly explain third | grep -q "bound to node-c/postgres because only candidate.* (exposed network)" || {
	tly explain third >&2; t_fail "third (on node-b) is not bound to node-c/postgres past node-b's none"
}
t_expect_exit 4 "bind third/db to a provider exposed none" tly bind third/db node-b/postgres
grep -q "node-b/postgres is exposed none: it serves no consumer" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "bind to none: not the expected refusal"
}
tly assign postgres node-d --expose public --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null
tly assign fourth node-a >/dev/null
tly status fourth >"$W/st4.out" || true
grep -q "ambiguous: candidates node-c/postgres, node-d/postgres — run tally bind fourth/db PROVIDER" "$W/st4.out" || {
	cat "$W/st4.out" >&2; t_fail "fourth is not ambiguous between node-c and node-d alone"
}
t_ok "none skipped; $(grep -o 'ambiguous: [^—]*' "$W/st4.out")"

t_check "rebind to a provider that does not serve the consumer is refused"
t_expect_exit 4 "rebind shop/db to node-b/postgres (none)" tly rebind shop/db node-b/postgres --migrate
grep -q "shop/db cannot move to node-b/postgres: node-b/postgres is exposed none" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "rebind: not the expected refusal"
}
t_ok "$(cat "$W/last.err")"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check differs"
t_ok "the log verifies and the projections rebuild identically"
