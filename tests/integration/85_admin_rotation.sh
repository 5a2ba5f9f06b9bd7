#!/bin/sh
# tally rotate --admin: the provider's own admin credential, rotated
# without ever locking tally out of its provider.
#
#   - the new password is recorded (encrypted) before it is set;
#   - afterwards the old admin password is refused by the server, the new
#     one (recorded as the assignment's secret) works: tally check and a
#     new grant go through tallyd with it;
#   - grants requested beside the rotation are provisioned in the same
#     tallyd run, and work;
#   - a second admin rotation while one runs is refused;
#   - the reply to the change lost (set on the server, not recorded):
#     the next tallyd finds the old password refused, logs in with the
#     intent's and records the rotation without changing it again;
#   - neither password appears in the log, its JSON or tallyd's output.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL; postgres provider on node-a; one consumer"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a
tly apply "$(t_consumer app)" >/dev/null || t_fail "apply app"
tly assign app node-a >/dev/null || t_fail "assign app"
t_tallyd_once
OLD=$(cat "$TALLY_TEST_PG_PWFILE")

# admin_login PASSWORD: can the admin log in over TCP with it?
admin_login() {
	PGPASSWORD=$1 PGCONNECT_TIMEOUT=5 psql -X -At -q -h 127.0.0.1 \
		-p "$TALLY_TEST_PG_PORT" -U "$TALLY_TEST_PG_USER" -d postgres \
		-c 'select 1' >/dev/null 2>&1
}

t_say "tally rotate --admin node-a/postgres, while five grants wait to be provisioned"
admin_login "$OLD" || t_fail "the admin password does not work to begin with"
for i in 1 2 3 4 5; do
	tly apply "$(t_consumer busy-$i)" >/dev/null &&
	    tly assign busy-$i node-a >/dev/null || t_fail "busy-$i"
done
tly rotate --admin node-a/postgres >/dev/null || t_fail "rotate --admin"
t_check "a second admin rotation while one runs is refused"
t_expect_exit 4 "second rotate --admin" tly rotate --admin node-a/postgres
grep -q "already rotating" "$W/last.err" || t_fail "no reason given"
t_ok "refused: $(cat "$W/last.err")"
t_tallyd_once
t_check "the old admin password is refused, the recorded one is in use"
admin_login "$OLD" && t_fail "the old admin password still logs in"
tly log --json --type 'admin.*' >"$W/adm.json"
grep -q '"admin.credential.issued"' "$W/adm.json" || t_fail "no intent"
grep -q '"admin.rotation.completed"' "$W/adm.json" || t_fail "not completed"
t_ok "admin.credential.issued before admin.rotation.completed"
for i in 1 2 3 4 5; do
	t_env_psql "$(t_envfile node-a busy-$i)" 'select 1' >/dev/null ||
		t_fail "busy-$i, provisioned in the same pass, does not connect"
done
t_ok "the five grants requested beside the rotation connect"
t_expect_exit 0 "tally check --all" tly check --all
t_ok "tally check --all with the new admin credential: exit 0"
tly apply "$(t_consumer app2)" >/dev/null && tly assign app2 node-a \
	>/dev/null || t_fail "app2"
t_tallyd_once
t_env_psql "$(t_envfile node-a app2)" 'select 1' >/dev/null ||
	t_fail "a grant made after the admin rotation does not connect"
t_ok "a new grant is provisioned through the new admin credential"

t_say "a second rotation later goes through the same way"
tly rotate --admin node-a/postgres >/dev/null || t_fail "rotate --admin"
t_tallyd_once
[ "$(tly log --json --type admin.rotation.completed | wc -l)" -eq 2 ] ||
	t_fail "the second admin rotation did not complete"
t_expect_exit 0 "tally check --all after the second rotation" tly check --all
t_ok "healthy after a second rotation"

t_say "the reply to the change is lost: set on the server, nothing recorded"
# TALLY_FAULT=set_admin_password:lost: the real ALTER ROLE runs, then
# tallyd is told it failed -- what a crash right after it looks like.
issued0=$(tly log --json --type admin.credential.issued | wc -l)
done0=$(tly log --json --type admin.rotation.completed | wc -l)
tly rotate --admin node-a/postgres >/dev/null || t_fail "rotate --admin"
set +e
TALLY_FAULT=set_admin_password:lost "$TALLY_BIN/tallyd" --once \
	--once-timeout 20 2>>"$T_DLOG"
set -e
[ "$(tly log --json --type admin.rotation.completed | wc -l)" -eq "$done0" ] ||
	t_fail "a lost reply was recorded as a completed rotation"
[ "$(tly log --json --type admin.credential.issued | wc -l)" -eq $((issued0 + 1)) ] ||
	t_fail "not exactly one new intent"
t_ok "the server has the new password, the log does not say so yet"
t_tallyd_once
[ "$(tly log --json --type admin.rotation.completed | wc -l)" -eq $((done0 + 1)) ] ||
	t_fail "the next tallyd did not complete the rotation"
[ "$(tly log --json --type admin.credential.issued | wc -l)" -eq $((issued0 + 1)) ] ||
	t_fail "the next tallyd issued another password instead of using the intent's"
grep -q "the new admin password was already set" "$T_DLOG" ||
	t_fail "tallyd did not find the password already set"
t_expect_exit 0 "tally check --all after the lost reply" tly check --all
tly apply "$(t_consumer app3)" >/dev/null && tly assign app3 node-a \
	>/dev/null || t_fail "app3"
t_tallyd_once
t_env_psql "$(t_envfile node-a app3)" 'select 1' >/dev/null ||
	t_fail "a grant made after the recovered rotation does not connect"
t_ok "completed from the intent by the next tallyd, no second change; new grants work"

t_say "no admin password in the log or tallyd's output"
for f in "$TALLY_HOME/log/data.mdb" "$T_DLOG"; do
	grep -qF "$OLD" "$f" && t_fail "the old admin password is in $f"
done
tly log --json | grep -qF "$OLD" && t_fail "the old admin password is in log --json"
t_ok "none found"
t_expect_exit 0 "tally verify" tly verify
t_expect_exit 0 "tally rebuild --check" tly rebuild --check
t_ok "chain sound; projections identical"
