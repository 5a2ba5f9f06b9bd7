#!/bin/sh
# A resource name is only a name: a consumer whose (valid) resource name
# happens to match a database or a role that already exists on the
# server, and that tally did not make, must not take it over.  Exclusive
# ownership cuts both ways: a grant never shares, and never captures,
# someone else's object.  The other side's login and data must come out
# untouched, and the grant must be refused with a reason in tally status.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL with objects tally did not make"
t_pg_start
t_init
# The names the two grants would be given (reactors/names.c: scheme 4,
# from the mesh id tally init drew, which is public).
PRECIOUS=$(t_gname thief/db precious)
BOB=$(t_gname lockout/db bob)
t_sql "CREATE ROLE alice LOGIN PASSWORD 'alice-pw'" >/dev/null
t_sql "CREATE DATABASE \"$PRECIOUS\" OWNER alice" >/dev/null
PGPASSWORD=alice-pw psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" \
	-U alice -d "$PRECIOUS" -c "CREATE TABLE ledger (x int); INSERT INTO ledger VALUES (42)" ||
	t_fail "cannot set up alice's database"
t_sql "CREATE ROLE \"$BOB\" LOGIN PASSWORD 'bob-pw'" >/dev/null
# bob uses the maintenance database: granted explicitly, as PUBLIC may not
# connect there (the provider setting revoke-public-connect).
t_sql "GRANT CONNECT ON DATABASE postgres TO \"$BOB\"" >/dev/null
t_node node-a 127.0.0.1
t_provider node-a local
# thief's database would be $PRECIOUS; lockout's owner role would be $BOB.
tly apply "$(t_consumer thief shared precious)" "$(t_consumer lockout shared bob)" >/dev/null
tly assign thief node-a >/dev/null
tly assign lockout node-a >/dev/null
"$TALLY_BIN/tallyd" --once --once-timeout 5 2>>"$T_DLOG" || true

t_check "alice's database is still alice's, with her privileges and data"
[ "$(t_sql "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '$PRECIOUS'")" = alice ] ||
	t_fail "database $PRECIOUS now belongs to $(t_sql "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '$PRECIOUS'") (taken over by a grant)"
got=$(PGPASSWORD=alice-pw psql -X -At -h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" \
	-U alice -d "$PRECIOUS" -c "SELECT x FROM ledger" 2>&1) ||
	t_fail "alice can no longer use her database: $got"
[ "$got" = 42 ] || t_fail "alice's ledger reads '$got'"
t_ok "owned by alice; alice connects and reads her data"

t_check "bob can still log in"
got=$(PGPASSWORD=bob-pw psql -X -At -h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" \
	-U "$BOB" -d postgres -c "SELECT current_user" 2>&1) ||
	t_fail "bob is locked out: $got"
t_ok "bob logs in"

t_check "neither grant was delivered; tally status says why (exit 6)"
for m in thief lockout; do
	[ ! -e "$(t_envfile node-a $m)" ] || t_fail "$m received a credential for an object it does not own"
	t_expect_exit 6 "tally status $m" tly status $m
	grep -q 'grant failed: .' "$W/last.out" || {
		cat "$W/last.out" >&2
		t_fail "tally status $m gives no reason"
	}
done
t_ok "refused, with reasons"
