#!/bin/sh
# After tally rebind --migrate, the old resource (kept, read-only, its
# login disabled) is not orphaned: tally grants --revoked lists it with
# its provider, database and size; tally purge destroys it (and only
# it: the moved grant keeps serving); while the purge is under way it
# stays listed (purging), and is listed as purged once done.
. "$(dirname "$0")/lib.sh"

t_say "two throwaway PostgreSQL servers; shop on node-a's, moved to node-b's"
t_pg_start pg1
P1=$TALLY_TEST_PG_PORT S1=$TALLY_TEST_PG_SOCK W1=$TALLY_TEST_PG_PWFILE
t_pg_start pg2
P2=$TALLY_TEST_PG_PORT W2=$TALLY_TEST_PG_PWFILE
sql1() { psql -X -At -q -v ON_ERROR_STOP=1 -h "$S1" -p "$P1" -U postgres -d "${2:-postgres}" -c "$1"; }

t_init
t_node node-a 127.0.0.1
t_node node-b localhost
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
tly assign postgres node-a --expose network --set port="$P1" --set admin-user=postgres \
	--secret admin-password <"$W1" >/dev/null || t_fail "assign postgres node-a"
tly assign postgres node-b --expose network --set port="$P2" --set admin-user=postgres \
	--secret admin-password <"$W2" >/dev/null || t_fail "assign postgres node-b"
tly apply "$(t_consumer shop shared)" >/dev/null
tly assign shop node-a >/dev/null
# A neighbour on pg1 that the purge of shop's old resource must not touch.
tly apply "$(t_consumer cart shared)" >/dev/null
tly assign cart node-a >/dev/null
t_tallyd_once
OLDDB=$(t_gname shop/db shop-db)
CART=$(t_gname cart/db cart-db)
EA=$(t_envfile node-a shop)
t_env_psql "$EA" "CREATE TABLE bulk (n int PRIMARY KEY, v text NOT NULL);
	INSERT INTO bulk SELECT g, md5(g::text) FROM generate_series(1, 20000) g;" \
	>/dev/null || t_fail "the consumer cannot write its database"
tly rebind shop/db node-b/postgres --migrate >/dev/null || t_fail "tally rebind --migrate"
t_tallyd_once
V=$(tly log --json --stream grant/shop/db --type rebind.started | tail -n 1 |
	sed -n 's/.*"version":\([0-9]*\)[,}].*/\1/p')
tly ack node-a shop "$V" >/dev/null || t_fail "tally ack node-a"
t_tallyd_once
[ "$(tly log --json --stream grant/shop/db --type rebind.completed | wc -l)" = 1 ] ||
	t_fail "no rebind.completed after the acknowledgement"
[ "$(t_env_psql "$EA" "SELECT count(*) FROM bulk")" = 20000 ] || t_fail "the moved grant lost rows"
[ "$(sql1 "SELECT count(*) FROM pg_database WHERE datname = '$OLDDB'")" = 1 ] ||
	t_fail "the old database is gone"
t_ok "moved to node-b/postgres (v$V); $OLDDB kept on pg1"

t_check "tally grants --revoked lists the old resource, with its size"
tly grants --revoked >"$W/g.txt" || t_fail "tally grants --revoked failed"
cat "$W/g.txt"
line=$(grep 'node-a/postgres' "$W/g.txt" | grep "$OLDDB" | head -n 1)
[ -n "$line" ] || t_fail "tally grants --revoked does not list $OLDDB on node-a/postgres"
printf '%s\n' "$line" | grep -q 'revoked (data retained, [0-9.]* MiB)' ||
	t_fail "the old resource is not listed as retained with a size: $line"
OLD=$(printf '%s\n' "$line" | awk '{print $1}')
tly grants --revoked --json | grep -q "\"grant\":\"$OLD\"[^}]*\"retained_bytes\":[1-9]" ||
	t_fail "--json does not give the old resource's retained_bytes"
t_ok "$line"

t_expect_exit 4 "tally restore $OLD (the old resource of a move)" tly restore "$OLD"
grep -q 'can only be purged' "$W/last.err" || { cat "$W/last.err" >&2; t_fail "the restore refusal does not say why"; }
t_ok "restore refused: $(head -n 1 "$W/last.err" | cut -c1-120)"

t_check "tally purge $OLD: listed as purging until done, then the old database is gone"
tly purge "$OLD" --yes >/dev/null || t_fail "tally purge $OLD"
tly grants --revoked >"$W/g2.txt"
grep -q "^$OLD .*purging" "$W/g2.txt" || { cat "$W/g2.txt" >&2; t_fail "$OLD is not listed while it is being purged"; }
t_tallyd_once
[ "$(sql1 "SELECT count(*) FROM pg_database WHERE datname = '$OLDDB'")" = 0 ] ||
	t_fail "tally purge said purged but $OLDDB is still on pg1"
[ "$(sql1 "SELECT count(*) FROM pg_roles WHERE rolname LIKE '$OLDDB%'")" = 0 ] ||
	t_fail "the old roles are left on pg1: $(sql1 "SELECT string_agg(rolname, ' ') FROM pg_roles WHERE rolname LIKE '$OLDDB%'")"
tly grants --revoked | grep -q "^$OLD .*purged" || t_fail "$OLD is not listed as purged"
[ "$(t_env_psql "$EA" "SELECT count(*) FROM bulk")" = 20000 ] ||
	t_fail "the purge of the old resource touched the moved grant"
[ "$(sql1 "SELECT count(*) FROM pg_database WHERE datname = '$CART'")" = 1 ] &&
	[ "$(sql1 "SELECT count(*) FROM pg_roles WHERE rolname IN ('$CART', '$CART""_v1')")" = 2 ] &&
	t_env_psql "$(t_envfile node-a cart)" "SELECT 1" >/dev/null ||
	t_fail "the purge of shop's old resource touched cart's database or roles"
t_expect_exit 0 "tally status shop" tly status shop
tly verify >/dev/null || t_fail "tally verify"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: the fold of the left-behind grant is not deterministic"
t_ok "$OLDDB and its roles gone from pg1; shop/db on pg2 serves 20000 rows"
