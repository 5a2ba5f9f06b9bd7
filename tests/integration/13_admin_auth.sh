#!/bin/sh
# A provider assigned without its admin secret (or with a wrong one) is
# an authentication failure of the admin, not an outage (issue 21, item
# 25): against a real PostgreSQL whose role needs a password, tallyd
# --once says that the admin secret is missing or refused and how to
# give it (tally assign PROVIDER NODE --secret admin-password < FILE),
# does not retry it as an outage for its whole --once-timeout, and
# exits 6; tally status says the same; given the secret, the grant is
# provisioned.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL (password required); postgres assigned without --secret admin-password"
t_pg_start
t_init
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/postgres.yaml" "$(t_consumer app)" >/dev/null
tly assign postgres node-a --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" >/dev/null
tly assign app node-a >/dev/null

t_check "tallyd --once: exit 6 well before its --once-timeout, naming the admin secret"
t0=$(t_now_ms)
set +e
timeout 120 "$TALLY_BIN/tallyd" --once --once-timeout 60 2>"$W/once.err"
rc=$?
set -e
t1=$(t_now_ms)
cat "$W/once.err" >>"$T_DLOG"
[ $rc -eq 6 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once exited $rc, not 6"; }
[ $((t1 - t0)) -lt 20000 ] || t_fail "tallyd --once took $((t1 - t0)) ms: the missing secret was retried as an outage"
grep -q "unreachable" "$W/once.err" && {
	grep "unreachable" "$W/once.err" >&2
	t_fail "tallyd calls a refused admin login unreachable"
}
grep -q "admin secret is missing or refused" "$W/once.err" &&
	grep -q "tally assign postgres node-a --secret admin-password" "$W/once.err" || {
	tail -n 5 "$W/once.err" >&2
	t_fail "tallyd does not say the admin secret is missing or refused and how to give it"
}
t_ok "exit 6 after $((t1 - t0)) ms: $(grep -m1 'admin secret' "$W/once.err" | sed 's/^.*: \(warn\|error\|info\): //')"

t_check "tally status says the same (exit 6)"
t_expect_exit 6 "tally status" tly status
grep -q "admin secret is missing or refused" "$W/last.out" &&
	grep -q "tally assign postgres node-a --secret admin-password" "$W/last.out" || {
	cat "$W/last.out" >&2
	t_fail "tally status does not name the admin secret and how to give it"
}
! grep -q "unreachable" "$W/last.out" || { cat "$W/last.out" >&2; t_fail "tally status says unreachable"; }
t_ok "$(grep -m1 'admin secret' "$W/last.out" | sed 's/^ *//')"

t_check "a wrong admin secret: the same, refused"
printf 'not-the-password\n' >"$W/wrong.pw"
tly assign postgres node-a --secret admin-password <"$W/wrong.pw" >/dev/null
set +e
timeout 120 "$TALLY_BIN/tallyd" --once --once-timeout 60 2>"$W/once2.err"
rc=$?
set -e
cat "$W/once2.err" >>"$T_DLOG"
[ $rc -eq 6 ] || t_fail "tallyd --once with a wrong secret exited $rc, not 6"
grep -q "admin secret is missing or refused" "$W/once2.err" || {
	tail -n 5 "$W/once2.err" >&2
	t_fail "a wrong admin secret is not said to be refused"
}
t_ok "$(grep -m1 'admin secret' "$W/once2.err" | sed 's/^.*: \(warn\|error\|info\): //')"

t_check "given the secret, the grant is provisioned"
tly assign postgres node-a --secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null
t_tallyd_once
[ "$(t_env_psql "$(t_envfile node-a app)" "SELECT current_database()")" = "$(t_gname app/db app-db)" ] ||
	t_fail "app's credential does not reach its database"
t_expect_exit 0 "tally status" tly status
t_ok "provisioned; status exit 0"
