#!/bin/sh
# What tally made for one grant it never hands to another, whatever the
# names: a grant whose names are taken by objects that carry tally's
# mark for another grant, or the mark of an earlier tally (which named
# no grant, and under which no grant of today was ever made), is
# refused with a reason (grant.failed, tally status), and the other
# grant's objects and data come out untouched.
#
# The objects are made at both the name the grant is given today and the
# name of the earlier scheme (RESOURCE alone), so that the script shows
# the same refusal whichever naming the tally under test uses.
. "$(dirname "$0")/lib.sh"

UNNAMED='made by tally for a grant; do not edit'
OTHER='made by tally for grant victim/db; do not edit'

# plant NAME MARK: an owner role NAME with MARK and its database NAME
# holding a row only its owner may read.
plant() {
	t_sql "CREATE ROLE \"$1\" NOLOGIN; COMMENT ON ROLE \"$1\" IS '$2'" >/dev/null
	t_sql "CREATE DATABASE \"$1\" OWNER \"$1\"" >/dev/null
	psql -X -q -v ON_ERROR_STOP=1 -h "$TALLY_TEST_PG_SOCK" -p "$TALLY_TEST_PG_PORT" \
		-U "$TALLY_TEST_PG_USER" -d "$1" -c "SET ROLE \"$1\";
		CREATE TABLE ledger (x text); INSERT INTO ledger VALUES ('victim data')" ||
		t_fail "cannot plant $1"
}

t_say "throwaway PostgreSQL holding another grant's objects"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
SQUAT=$(t_gname squat/db squat)
CLAIM=$(t_gname claim/db claim)
for n in squat "$SQUAT"; do plant "$n" "$UNNAMED"; done
for n in claim "$CLAIM"; do plant "$n" "$OTHER"; done
tly apply "$(t_consumer squat shared squat)" "$(t_consumer claim shared claim)" >/dev/null
tly assign squat node-a >/dev/null
tly assign claim node-a >/dev/null
"$TALLY_BIN/tallyd" --once --once-timeout 5 2>>"$T_DLOG" || true

t_check "neither grant is delivered; grant.failed and tally status give the reason"
for m in squat claim; do
	[ ! -e "$(t_envfile node-a $m)" ] ||
		t_fail "$m was delivered a credential for another grant's objects: $(grep DB_NAME "$(t_envfile node-a $m)")"
	t_expect_exit 6 "tally status $m" tly status $m
	grep -q 'grant failed: .*never hands one grant' "$W/last.out" || {
		cat "$W/last.out" >&2
		t_fail "tally status $m does not say the objects are another grant's"
	}
	tly log --json --stream grant/$m/db --type grant.failed >"$W/failed.$m"
	grep -q 'never hands one grant' "$W/failed.$m" ||
		t_fail "no grant.failed with the reason for $m: $(cat "$W/failed.$m")"
done
grep -q 'for grant victim/db' "$W/last.out" ||
	t_fail "the refusal of claim does not name grant victim/db: $(cat "$W/last.out")"
t_ok "refused: $(sed -n 's/.*grant failed: //p' "$W/last.out" | head -n 1)"

t_check "the other grant's objects are as they were: owner, mark, members, data"
for n in squat "$SQUAT" claim "$CLAIM"; do
	[ "$(t_sql "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '$n'")" = "$n" ] ||
		t_fail "database $n changed owner"
	[ -z "$(t_sql "SELECT u.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
		JOIN pg_roles u ON u.oid = m.member WHERE g.rolname = '$n'")" ] ||
		t_fail "role $n was given members: $(t_sql "SELECT u.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member WHERE g.rolname = '$n'")"
	[ "$(psql -X -At -h "$TALLY_TEST_PG_SOCK" -p "$TALLY_TEST_PG_PORT" \
		-U "$TALLY_TEST_PG_USER" -d "$n" -c "SELECT x FROM ledger")" = "victim data" ] ||
		t_fail "the data in $n changed"
done
for n in squat "$SQUAT"; do
	[ "$(t_sql "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = '$n'")" = "$UNNAMED" ] ||
		t_fail "the mark of $n was rewritten"
done
t_ok "owners, marks and data unchanged; nobody was made a member"

t_check "tally verify"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain sound"
