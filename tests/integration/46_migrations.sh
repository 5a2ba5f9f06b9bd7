#!/bin/sh
# Consumer-owned migrations against a real PostgreSQL.  Each module's
# requirement "db" declares `migrations: mig/MODULE`; tally apply copies
# the files into the log; tallyd applies them (tallyd --once here, so
# that every step is one deterministic pass).
#
#   - shop: three files applied in order (migration.applied x3, in
#     order, each with the file's BLAKE2b-256 checksum), the tables
#     exist and are owned by the grant's owner role; status went
#     bound -> provisioned -> migrated -> ready (tally status --at each
#     step's event), assignment.ready appended once; a fourth file added
#     later (re-apply) is applied, and ready is not announced again;
#     an applied file edited (re-apply) -> tally apply refuses it (exit
#     4) naming the file, the grant and both checksums, and appends
#     nothing (the file added beside it is not stored); the original
#     restored -> accepted, the new file runs;
#   - fail: a file whose second statement fails after its first
#     succeeded -> blocked with the server's error and file:line, the
#     first statement rolled back (its table does not exist), the next
#     file not run; the file fixed -> applied; then a file with a syntax
#     error on line 3 -> blocked with file:3; then (the same file
#     changed) an error without a server position (relation already
#     exists) after a dollar-quoted function -> the failing statement's
#     line, the function rolled back;
#   - evil: a migration creating a table in shop's database
#     ("shop-db".public.x) -> blocked with the cross-database error and
#     file:line; shop's database untouched;
#   - PostgreSQL down while a file waits: no block recorded (the
#     verifier reports the outage); applied once the server is back.
. "$(dirname "$0")/lib.sh"

head_seq() { tly log --json | tail -n 1 | t_jfields seq; }

# jval KEY: the last "KEY":"VALUE" of a JSON line on stdin, escapes kept.
jval() {
	sed -n 's/.*"'"$1"'":"\(\([^"\\]\|\\.\)*\)".*/\1/p' | head -n 1
}

# t_sqldb DB SQL: as the admin, in database DB.
t_sqldb() {
	psql -X -At -q -v ON_ERROR_STOP=1 -h "$TALLY_TEST_PG_SOCK" \
		-p "$TALLY_TEST_PG_PORT" -U "$TALLY_TEST_PG_USER" -d "$1" -c "$2"
}

# The consumers' databases (reactors/names.c).

# tables DB: "name:owner" of the tables in DB's schema public.
tables() {
	t_sqldb "$1" "SELECT tablename || ':' || tableowner FROM pg_tables
	    WHERE schemaname = 'public' ORDER BY 1" | tr '\n' ' '
}

# mig_consumer NAME: a module like t_consumer's, with migrations in
# $W/manifests/mig/NAME; prints the manifest's path.
mig_consumer() {
	mkdir -p "$W/manifests/mig/$1"
	_m=$W/manifests/$1.yaml
	cat >"$_m" <<EOF
module: $1
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    scope: shared
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}
    migrations: mig/$1
EOF
	echo "$_m"
}

# once [EXIT]: one tallyd --once; it must exit EXIT (default 0).
once() {
	t_expect_exit "${1:-0}" "tallyd --once" "$TALLY_BIN/tallyd" --once \
		--once-timeout 60
	cat "$W/last.err" >>"$T_DLOG"
}

# applied GRANT: "file checksum" of each migration.applied, in log order.
applied() {
	tly log --json --stream "grant/$1" --type migration.applied |
		t_jfields file checksum
}

# state_at MODULE SEQ: the assignment's state as of SEQ (tally status --at).
state_at() {
	tly status "$1" --at "$2" --json 2>/dev/null | t_jfields state |
		cut -d' ' -f1
}

# blocked_reason GRANT: the reason of its last migration.blocked.
blocked_reason() {
	tly log --json --stream "grant/$1" --type migration.blocked |
		tail -n 1 | jval reason
}

M=$W/manifests/mig

t_say "throwaway PostgreSQL; modules shop, fail and evil with migrations"
t_pg_start
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
SHOPDB=$(t_gname shop/db shop-db)
FAILDB=$(t_gname fail/db fail-db)
EVILDB=$(t_gname evil/db evil-db)
t_node node-a 127.0.0.1
t_provider node-a local
SHOP=$(mig_consumer shop)
cat >"$M/shop/001_customers.sql" <<'EOF'
-- 001: customers
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL);
EOF
cat >"$M/shop/002_orders.sql" <<'EOF'
-- 002: orders refer to customers (fails unless 001 ran first)
CREATE TABLE orders (
	id serial PRIMARY KEY,
	customer integer NOT NULL REFERENCES customers (id)
);
EOF
cat >"$M/shop/003_items.sql" <<'EOF'
-- 003: items refer to orders (fails unless 002 ran first)
CREATE TABLE items (order_id integer REFERENCES orders (id), sku text);
INSERT INTO customers (name) VALUES ('first customer');
EOF
cp "$M/shop/002_orders.sql" "$W/002_orders.orig"
tly apply "$SHOP" >/dev/null || t_fail "tally apply shop.yaml failed"
n=$(tly log --json --type migration.stored | wc -l)
[ "$n" -eq 3 ] || t_fail "tally apply stored $n migration(s), expected 3"
t_ok "tally apply: 3 migration.stored (the files are in the log)"
tly assign shop node-a >/dev/null
t_expect_exit 6 "tally status shop before tallyd" tly status shop
grep -q 'on node-a: bound' "$W/last.out" || {
	cat "$W/last.out" >&2
	t_fail "shop is not 'bound' before tallyd ran"
}
BOUND=$(head_seq)
t_ok "before tallyd: shop on node-a: bound (exit 6)"

t_say "three files applied in order"
once
applied shop/db >"$W/applied"
[ "$(cut -d' ' -f1 "$W/applied" | tr '\n' ' ')" = \
	"001_customers.sql 002_orders.sql 003_items.sql " ] || {
	cat "$W/applied" >&2
	t_fail "migration.applied is not 001, 002, 003 in this order"
}
while read -r f sum; do
	want=$(b2sum -l 256 "$M/shop/$f" | cut -d' ' -f1)
	[ "$sum" = "$want" ] || t_fail "$f applied with checksum $sum, the file's BLAKE2b-256 is $want"
done <"$W/applied"
t_ok "migration.applied: $(cut -d' ' -f1 "$W/applied" | tr '\n' ' ')(each with the file's BLAKE2b-256)"
tb=$(tables "$SHOPDB")
[ "$tb" = "customers:$SHOPDB items:$SHOPDB orders:$SHOPDB " ] ||
	t_fail "shop-db has tables '$tb', expected customers, items, orders owned by shop-db"
t_ok "tables in shop-db (name:owner): $tb"
[ "$(t_env_psql "$(t_envfile node-a shop)" "SELECT name FROM customers")" = "first customer" ] ||
	t_fail "shop's own credential does not read the migrated data"
t_ok "shop's delivered credential reads what 003 inserted"

t_check "status went bound -> provisioned -> migrated -> ready"
PROV=$(tly log --json --stream grant/shop/db --type grant.provisioned | t_jfields seq)
MIG=$(tly log --json --stream grant/shop/db --type migration.applied | tail -n 1 | t_jfields seq)
READY=$(tly log --json --type assignment.ready --stream assignment/shop@node-a | t_jfields seq)
[ -n "$PROV" ] && [ -n "$MIG" ] && [ -n "$READY" ] ||
	t_fail "missing events (grant.provisioned '$PROV', migration.applied '$MIG', assignment.ready '$READY')"
seen=""
for s in "$BOUND" "$PROV" "$MIG" "$READY"; do
	seen="$seen$(state_at shop "$s") "
done
[ "$seen" = "bound provisioned migrated ready " ] ||
	t_fail "tally status --at seq $BOUND, $PROV, $MIG, $READY: $seen"
t_ok "tally status --at $BOUND/$PROV/$MIG/$READY: $seen"
t_expect_exit 0 "tally status shop (ready)" tly status shop
t_ok "now: $(head -n 1 "$W/last.out"), exit 0"

t_say "a fourth file added later (re-apply) is applied"
cat >"$M/shop/004_customer_email.sql" <<'EOF'
ALTER TABLE customers ADD COLUMN email text;
EOF
tly apply "$SHOP" >/dev/null || t_fail "re-applying shop.yaml with 004 failed"
once
applied shop/db >"$W/applied"
[ "$(sed -n 4p "$W/applied" | cut -d' ' -f1)" = 004_customer_email.sql ] &&
	[ "$(wc -l <"$W/applied")" -eq 4 ] || {
	cat "$W/applied" >&2
	t_fail "004 was not applied (once, after the other three)"
}
t_sqldb "$SHOPDB" "SELECT email FROM customers" >/dev/null ||
	t_fail "customers has no column email"
n=$(tly log --json --type assignment.ready | grep -c '"module":"shop"')
[ "$n" -eq 1 ] || t_fail "assignment.ready for shop appended $n times"
t_expect_exit 0 "tally status shop (4 migrations)" tly status shop
t_ok "004 applied; 001-003 not run again; assignment.ready still once; status ready"

t_say "an applied file edited (re-apply): refused by tally apply, with both checksums"
old=$(b2sum -l 256 "$M/shop/002_orders.sql" | cut -d' ' -f1)
printf -- '-- edited after it was applied\n' >>"$M/shop/002_orders.sql"
new=$(b2sum -l 256 "$M/shop/002_orders.sql" | cut -d' ' -f1)
cat >"$M/shop/005_coupons.sql" <<'EOF'
CREATE TABLE coupons (code text PRIMARY KEY);
EOF
before=$(head_seq)
t_expect_exit 4 "tally apply (002 edited after it was applied)" tly apply "$SHOP"
for w in 002_orders.sql shop/db "$old" "$new"; do
	grep -q -- "$w" "$W/last.err" || {
		cat "$W/last.err" >&2
		t_fail "tally apply's refusal does not name '$w' (the file, the grant, both checksums)"
	}
done
[ "$(head_seq)" = "$before" ] || t_fail "the refused apply appended events"
t_ok "refused (exit 4), nothing appended: $(cut -c1-160 "$W/last.err")…"
tly log --json --type migration.stored | grep -q 005_coupons &&
	t_fail "005_coupons.sql stored although the apply was refused"
once
[ "$(t_sqldb "$SHOPDB" "SELECT count(*) FROM pg_tables WHERE tablename = 'coupons'")" -eq 0 ] ||
	t_fail "005_coupons.sql ran although its apply was refused"
t_expect_exit 0 "tally status shop (the refused apply changed nothing)" tly status shop
t_ok "005 not stored, not run; shop still ready"
t_check "the original 002 restored: accepted, 005 runs"
cp "$W/002_orders.orig" "$M/shop/002_orders.sql"
tly apply "$SHOP" >/dev/null
once
tly log --json --stream grant/shop/db --type migration.applied | grep -q 005_coupons ||
	t_fail "005_coupons.sql was not applied after 002 was restored"
t_expect_exit 0 "tally status shop (005 applied)" tly status shop
t_ok "005 applied; status ready, exit 0"

t_say "a failing file: blocked with the server's error and file:line, nothing half-applied"
FAIL=$(mig_consumer fail)
cat >"$M/fail/001_base.sql" <<'EOF'
CREATE TABLE base (id int);
EOF
cat >"$M/fail/002_half.sql" <<'EOF'
-- 002: the first statement succeeds, the second fails
CREATE TABLE half (id int);
INSERT INTO no_such_table VALUES (1);
EOF
cat >"$M/fail/003_after.sql" <<'EOF'
CREATE TABLE after_half (id int);
EOF
tly apply "$FAIL" >/dev/null
tly assign fail node-a >/dev/null
once 6
why=$(blocked_reason fail/db)
case "$why" in
"002_half.sql:3: 42P01: "*no_such_table*) ;;
*) t_fail "migration.blocked for fail/db is not '002_half.sql:3: 42P01: …no_such_table…': '$why'" ;;
esac
t_ok "migration.blocked: $why"
tb=$(tables "$FAILDB")
[ "$tb" = "base:$FAILDB " ] ||
	t_fail "fail-db has tables '$tb': expected only base (002's CREATE TABLE half rolled back, 003 not run)"
[ "$(applied fail/db | cut -d' ' -f1 | tr '\n' ' ')" = "001_base.sql " ] ||
	t_fail "fail/db applied: $(applied fail/db | cut -d' ' -f1 | tr '\n' ' ')"
t_expect_exit 6 "tally status fail (blocked)" tly status fail
grep -q 'migrations blocked: 002_half.sql:3' "$W/last.out" || t_fail "tally status fail does not show the block"
t_ok "fail-db has only 'base' (002's first statement rolled back, 003 not run); status exit 6"
t_check "the failing file fixed (never applied, so it may change): applied"
cat >"$M/fail/002_half.sql" <<'EOF'
-- 002: fixed
CREATE TABLE half (id int);
INSERT INTO half VALUES (1);
EOF
tly apply "$FAIL" >/dev/null
once
[ "$(applied fail/db | cut -d' ' -f1 | tr '\n' ' ')" = "001_base.sql 002_half.sql 003_after.sql " ] ||
	t_fail "fail/db applied: $(applied fail/db | cut -d' ' -f1 | tr '\n' ' ')"
t_expect_exit 0 "tally status fail (fixed)" tly status fail
t_ok "002 and 003 applied; status exit 0"
t_check "a syntax error on line 3 of a file"
cat >"$M/fail/004_typo.sql" <<'EOF'
-- 004: a typo on line 3
CREATE TABLE typo_ok (id int);
CREATE TABLEE typo_bad (id int);
EOF
tly apply "$FAIL" >/dev/null
once 6
why=$(blocked_reason fail/db)
case "$why" in
"004_typo.sql:3: 42601: syntax error"*TABLEE*) ;;
*) t_fail "migration.blocked is not '004_typo.sql:3: 42601: syntax error … TABLEE': '$why'" ;;
esac
[ "$(t_sqldb "$FAILDB" "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'typo%'")" -eq 0 ] ||
	t_fail "004_typo.sql left a table behind"
t_ok "migration.blocked: $why; no typo_* table"
t_check "an error the server gives no position for: the line of the failing statement"
cat >"$M/fail/004_typo.sql" <<'EOF'
-- 004 (never applied, so it may change): a function with semicolons
CREATE FUNCTION answer() RETURNS int LANGUAGE plpgsql AS $body$
BEGIN
	RETURN 42; -- ; 'not a quote
END;
$body$;
/* a comment; with a semicolon */ SELECT 'a;b', E'\';', "x;y" FROM (SELECT 1 AS "x;y") q;
CREATE TABLE base (id int);
EOF
tly apply "$FAIL" >/dev/null
once 6
why=$(blocked_reason fail/db)
case "$why" in
"004_typo.sql:8: 42P07: "*base*exists*) ;;
*) t_fail "migration.blocked is not '004_typo.sql:8: 42P07: relation \"base\" already exists': '$why'" ;;
esac
[ "$(t_sqldb "$FAILDB" "SELECT count(*) FROM pg_proc WHERE proname = 'answer'")" -eq 0 ] ||
	t_fail "004's function answer() survived the failure of the file"
t_ok "migration.blocked: $why; function answer() rolled back"

t_say "a migration creating a table in another consumer's database"
EVIL=$(mig_consumer evil)
cat >"$M/evil/001_reach.sql" <<EOF
-- 001: reach into shop's database
CREATE TABLE "$SHOPDB".public.stolen (id int);
EOF
before=$(tables "$SHOPDB")
tly apply "$EVIL" >/dev/null
tly assign evil node-a >/dev/null
once 6
why=$(blocked_reason evil/db)
case "$why" in
"001_reach.sql:2: 0A000: cross-database references are not implemented"*) ;;
*) t_fail "migration.blocked for evil/db is not the cross-database error at 001_reach.sql:2: '$why'" ;;
esac
t_ok "migration.blocked: $why"
[ "$(tables "$SHOPDB")" = "$before" ] ||
	t_fail "shop-db changed: '$before' -> '$(tables "$SHOPDB")'"
[ "$(tables "$EVILDB")" = "" ] || t_fail "evil-db has tables: $(tables "$EVILDB")"
t_expect_exit 6 "tally status evil (blocked)" tly status evil
t_ok "shop-db untouched ($before); evil-db empty; tally status evil exits 6"

t_say "PostgreSQL down while a migration waits: not a block; applied once it is back"
cat >"$M/shop/006_reviews.sql" <<'EOF'
CREATE TABLE reviews (id int);
EOF
tly apply "$SHOP" >/dev/null
before=$(tly log --json --stream grant/shop/db --type migration.blocked | wc -l)
t_pg_stop_server
once 6
grep -q 'grant shop/db: migrations wait: ' "$W/last.err" || {
	cat "$W/last.err" >&2
	t_fail "tallyd --once did not say that shop/db's migrations wait"
}
[ "$(tly log --json --stream grant/shop/db --type migration.blocked | wc -l)" -eq "$before" ] ||
	t_fail "an unreachable provider was recorded as a blocked migration: $(blocked_reason shop/db)"
t_ok "tallyd --once exits 6 (provider unreachable); no migration.blocked: $(grep -m1 'shop/db: migrations wait' "$W/last.err" | sed 's/^.*warn: //' | cut -c1-120)"
t_pg_restart_server
once 6	# fail/db and evil/db are still blocked
tly log --json --stream grant/shop/db --type migration.applied | grep -q 006_reviews ||
	t_fail "006_reviews.sql was not applied after PostgreSQL came back"
t_expect_exit 0 "tally status shop (after the outage)" tly status shop
t_ok "006 applied after the restart; status exit 0"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "chain sound; projections identical"
