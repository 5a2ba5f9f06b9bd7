#!/bin/sh
# An expiry at the provider as a backstop (issue 28, item 5), on a real
# PostgreSQL: with expiry-backstop, every login's VALID UNTIL is the
# server's now plus the backstop when it is made or repaired, and
# verification moves it on once less than half is left, so a credential
# outlives a dead control plane by at most the backstop.
#   - out of bounds (under two verification intervals, over a year) is
#     refused by assign;
#   - a new grant's login is valid for the backstop ahead, by the
#     server's clock; tally status says what it costs;
#   - less than half left (set by hand): tally check reports it and
#     repairs it, the login valid for the backstop again, and it logs in;
#   - a rotation's new login carries it too;
#   - the backstop removed: a finite VALID UNTIL is drift, repaired to
#     no expiry.
. "$(dirname "$0")/lib.sh"

t_pg_start
t_init
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
adm() {
	PGPASSWORD=$(cat "$TALLY_TEST_PG_PWFILE") psql -X -At -q -h 127.0.0.1 \
		-p "$TALLY_TEST_PG_PORT" -U "$TALLY_TEST_PG_USER" -d postgres -c "$1"
}
# left ROLE: seconds to its VALID UNTIL by the server's clock, or "none".
left() {
	adm "SELECT coalesce(floor(extract(epoch FROM rolvaliduntil) - extract(epoch FROM now()))::text, 'none') FROM pg_roles WHERE rolname = '$1' AND rolvaliduntil IS DISTINCT FROM 'infinity' UNION ALL SELECT 'none' LIMIT 1"
}

t_check "a backstop out of bounds is refused"
for bad in 60s 2y 400d; do
	t_expect_exit 4 "assign --set expiry-backstop=$bad" tly assign postgres node-a --set "expiry-backstop=$bad"
	grep -q "expiry-backstop=$bad" "$W/last.err" || t_fail "the refusal does not name expiry-backstop=$bad: $(cat "$W/last.err")"
done
t_ok "60s, 2y and 400d refused"

t_check "a new grant's login is valid for the backstop ahead"
tly assign postgres node-a --set host=127.0.0.1 \
	--set port="$TALLY_TEST_PG_PORT" --set admin-user="$TALLY_TEST_PG_USER" \
	--set expiry-backstop=1h \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
	t_fail "assign postgres with expiry-backstop=1h failed"
tly apply "$(t_consumer app)" >/dev/null
tly assign app node-a >/dev/null
t_tallyd_once
F=$(t_envfile node-a app)
U=$(t_envget "$F" DB_USER)
l=$(left "$U")
[ "$l" != none ] && [ "$l" -gt 3500 ] && [ "$l" -le 3600 ] ||
	t_fail "login $U is valid for $l s, not about 3600"
t_env_psql "$F" "SELECT 1" >/dev/null || t_fail "the login does not log in"
tly status postgres >"$W/st.out" 2>&1 || true
grep -q "expiry backstop 1h: each login's VALID UNTIL is kept that far ahead" "$W/st.out" ||
	t_fail "tally status does not say what the backstop costs: $(cat "$W/st.out")"
t_ok "valid for $l s; status: $(grep -o 'expiry backstop 1h[^;]*' "$W/st.out" | head -n 1)"

t_check "less than half left: reported, and moved on by the repair"
adm "ALTER ROLE \"$U\" VALID UNTIL '$(adm "SELECT (now() + interval '10 minutes')::text")'" >/dev/null
l=$(left "$U")
[ "$l" -le 600 ] || t_fail "the hand-set VALID UNTIL did not take: $l"
t_expect_exit 8 "tally check app/db (10 minutes left)" tly check app/db
grep -q "not the expiry backstop's 3600 s ahead" "$W/last.out" ||
	t_fail "the check does not say the backstop is short: $(cat "$W/last.out")"
l=$(left "$U")
[ "$l" -gt 3500 ] && [ "$l" -le 3600 ] || t_fail "after the repair, valid for $l s"
t_expect_exit 0 "tally check app/db (after the repair)" tly check app/db
t_env_psql "$F" "SELECT 1" >/dev/null || t_fail "the login does not log in after the repair"
t_ok "reported, valid for $l s again, logs in"

t_check "a rotation's new login carries the backstop"
tly rotate app/db >/dev/null
t_tallyd_once
F=$(t_envfile node-a app)
U2=$(t_envget "$F" DB_USER)
[ "$U2" != "$U" ] || t_fail "the rotation kept the login"
l=$(left "$U2")
[ "$l" != none ] && [ "$l" -gt 3500 ] && [ "$l" -le 3600 ] || t_fail "the new login $U2 is valid for $l s"
t_env_psql "$F" "SELECT 1" >/dev/null || t_fail "the new login does not log in"
t_ok "$U2 valid for $l s"

t_check "the backstop removed: a finite VALID UNTIL is drift, repaired to none"
tly assign postgres node-a --unset expiry-backstop >/dev/null
t_expect_exit 8 "tally check app/db (no backstop, a finite VALID UNTIL)" tly check app/db
grep -q "has no expiry backstop" "$W/last.out" || t_fail "not reported: $(cat "$W/last.out")"
[ "$(left "$U2")" = none ] || t_fail "still valid for $(left "$U2") s only"
t_expect_exit 0 "tally check app/db (after)" tly check app/db
t_ok "repaired to no expiry"
