#!/bin/sh
# Exclusive ownership against the naming scheme itself: pairs of grants
# built so that a scheme deriving provider names by joining names with a
# separator, or by cutting them to PostgreSQL's 63-byte limit, gives both
# the same database, owner and login.  Each pair must still be two
# resources: each consumer connects with its own delivered credential
# (tally env --node-key), cannot connect to the other's database, the
# two do not reset each other's password across tally check, and purging
# one leaves the other's database and data.
#
#   sep-shared / sep-inst   shared name "x-node-a" / per-instance "x" on
#                           node-a (a separator)
#   type-a / type-b         the same name "dup" under two resource types
#                           of one provider
#   long-inst / long-shared a per-instance name longer than the limit
#                           once the node is added / a 63-character shared
#                           name equal to its shortened (hashed) form
#
# Case cannot collide: every name is lowercase [a-z0-9-] (checked here:
# an uppercase resource name is refused when the manifest is applied).
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL; a provider with two resource types"
t_pg_start
t_init
t_node node-a 127.0.0.1
mkdir -p "$W/manifests"
cat >"$W/manifests/pgx.yaml" <<'EOF'
module: pgx
provides:
  postgres-database:
    driver: postgres
  analytics-database:
    driver: postgres
EOF
tly apply "$W/manifests/pgx.yaml" >/dev/null || t_fail "tally apply pgx failed"
tly assign pgx node-a --expose local \
	--set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
	t_fail "tally assign pgx node-a failed"

# consumer MODULE SCOPE TYPE RESOURCE
consumer() {
	{
		echo "module: $1"
		echo "env: {DB_HOST: \"\", DB_PORT: \"\", DB_NAME: \"\", DB_USER: \"\", DB_PASSWORD: \"\"}"
		echo "requires:"
		echo "  db:"
		echo "    type: $3"
		echo "    from: pgx"
		echo "    scope: $2"
		echo "    name: $4"
		echo "    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}"
	} >"$W/manifests/$1.yaml"
	echo "$W/manifests/$1.yaml"
}

# The shortened form today's scheme gives a per-instance name: the first
# 54 bytes of "RESOURCE-NODE", "-", the FNV-1a hash of it in hex.
fnv1a() {
	_h=2166136261
	for _b in $(printf '%s' "$1" | od -An -v -tu1); do
		_h=$(( ((_h ^ _b) * 16777619) & 0xffffffff ))
	done
	printf '%08x' "$_h"
}
LONG=$(printf 'l%.0s' $(seq 1 58))-res			# 62 characters
LBASE=$LONG-node-a
LSHORT=$(printf '%s' "$LBASE" | cut -c1-54)-$(fnv1a "$LBASE")
[ ${#LSHORT} -eq 63 ] || t_fail "the shortened name is ${#LSHORT} characters"

t_check "case cannot make a collision: an uppercase resource name is refused"
t_expect_exit 4 "apply with an uppercase name" tly apply \
	"$(consumer upper shared postgres-database X-Node-A)"
t_ok "refused (names are lowercase)"

PAIRS="sep-shared:sep-inst type-a:type-b long-inst:long-shared"
tly apply "$(consumer sep-shared shared postgres-database x-node-a)" \
	"$(consumer sep-inst per-instance postgres-database x)" \
	"$(consumer type-a shared postgres-database dup)" \
	"$(consumer type-b shared analytics-database dup)" \
	"$(consumer long-inst per-instance postgres-database "$LONG")" \
	"$(consumer long-shared shared postgres-database "$LSHORT")" >/dev/null ||
	t_fail "tally apply of the colliding consumers was refused"
for m in sep-shared sep-inst type-a type-b long-inst long-shared; do
	tly assign $m node-a >/dev/null || t_fail "tally assign $m failed"
done
"$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG" || true

t_check "every grant is provisioned and delivered (tally env with the node's key)"
for m in sep-shared sep-inst type-a type-b long-inst long-shared; do
	tly env node-a $m --node-key "$(t_nodekey node-a)" >"$W/$m.env" 2>"$W/$m.env.err" || {
		tly status $m >&2 || true
		cat "$W/$m.env.err" >&2
		t_fail "no delivered credential for $m"
	}
done
t_ok "six credentials"

# deny FILE DB: FILE's credential must be refused at DB by privileges.
deny() {
	if t_env_psql "$1" "$2" "SELECT 1" >"$W/deny.out" 2>&1; then
		t_fail "$(t_envget "$1" DB_USER) connected to database $2"
	fi
	grep -q "permission denied for database \"$2\"" "$W/deny.out" || {
		cat "$W/deny.out" >&2
		t_fail "$(t_envget "$1" DB_USER) -> $2 failed, but not with 'permission denied for database'"
	}
}

for pair in $PAIRS; do
	a=${pair%%:*} b=${pair##*:}
	A=$W/$a.env B=$W/$b.env
	t_check "$a / $b: distinct databases and logins"
	DA=$(t_envget "$A" DB_NAME) DB=$(t_envget "$B" DB_NAME)
	UA=$(t_envget "$A" DB_USER) UB=$(t_envget "$B" DB_USER)
	[ "$DA" != "$DB" ] || t_fail "$a and $b were both given database $DA"
	[ "$UA" != "$UB" ] || t_fail "$a and $b were both given login $UA"
	for u in "$UA" "$UB"; do
		[ ${#u} -le 63 ] || t_fail "login $u is longer than 63 bytes"
	done
	t_ok "$a: $UA -> $DA; $b: $UB -> $DB"

	t_check "$a / $b: each writes its own row, sees only its own, cannot connect to the other's"
	for f in "$A" "$B"; do
		t_env_psql "$f" "CREATE TABLE mine (who text); INSERT INTO mine VALUES ('$(basename "$f" .env)')" ||
			t_fail "the credential of $f cannot write in its own database"
	done
	[ "$(t_env_psql "$A" "SELECT string_agg(who, ',') FROM mine")" = "$a" ] ||
		t_fail "$a reads '$(t_env_psql "$A" "SELECT string_agg(who, ',') FROM mine")'"
	[ "$(t_env_psql "$B" "SELECT string_agg(who, ',') FROM mine")" = "$b" ] ||
		t_fail "$b reads '$(t_env_psql "$B" "SELECT string_agg(who, ',') FROM mine")'"
	deny "$A" "$DB"
	deny "$B" "$DA"
	t_ok "own rows only; refused both ways"
done

t_check "tally check twice: nobody's password is reset, every credential still logs in"
before=$(tly log --json | grep -c '"type":"grant.repaired"' || true)
tly check --all >"$W/check1.out" 2>&1 || { cat "$W/check1.out" >&2; t_fail "tally check (1) is not healthy"; }
tly check --all >"$W/check2.out" 2>&1 || { cat "$W/check2.out" >&2; t_fail "tally check (2) is not healthy"; }
after=$(tly log --json | grep -c '"type":"grant.repaired"' || true)
[ "$before" = "$after" ] || t_fail "tally check repaired $((after - before)) grant(s): $(tly log --json | grep '"type":"grant.repaired"' | tail -n 3)"
for m in sep-shared sep-inst type-a type-b long-inst long-shared; do
	[ "$(t_env_psql "$W/$m.env" "SELECT who FROM mine")" = $m ] ||
		t_fail "$m's credential no longer reads its own row after tally check"
done
t_ok "no repair; all six log in and read their own rows"

t_check "purge of one of each pair leaves the other's database and data"
for m in sep-inst type-b long-inst; do
	tly remove $m >/dev/null || t_fail "tally remove $m failed"
done
t_tallyd_once
for g in sep-inst/db@node-a type-b/db long-inst/db@node-a; do
	tly purge $g --yes >/dev/null || t_fail "tally purge $g failed"
done
t_tallyd_once
for m in sep-inst type-b long-inst; do
	db=$(t_envget "$W/$m.env" DB_NAME)
	[ -z "$(t_sql "SELECT 1 FROM pg_database WHERE datname = '$db'")" ] ||
		t_fail "$m's database $db survived its purge"
done
for m in sep-shared type-a long-shared; do
	db=$(t_envget "$W/$m.env" DB_NAME)
	[ "$(t_sql "SELECT 1 FROM pg_database WHERE datname = '$db'")" = 1 ] ||
		t_fail "$m's database $db is gone after the other's purge"
	[ "$(t_env_psql "$W/$m.env" "SELECT who FROM mine")" = $m ] ||
		t_fail "$m can no longer read its own row after the other's purge"
done
t_ok "purged ones gone; the others connect and read their own rows"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check differs"
t_ok "chain sound; projections rebuild identically"
