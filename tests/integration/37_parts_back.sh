#!/bin/sh
# A part taken from every assignment and given back before a pass (issue
# 21, item 33): the revocation asked for is a fact once recorded, so it
# runs; the part installed again then asks for the grant again, as a
# consumer back after any revocation does: a fresh grant where the data
# is gone (policy drop), or `tally restore` where it is retained.  It is
# never "revoked (data dropped)" for good, and tallyd --once and status
# end 0 once the grant is back.  No kill is needed.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL, one node, a provider that drops on revocation"
t_pg_start
t_init
t_node node-a 127.0.0.1
M=$W/manifests
mkdir -p "$M"
sed 's/^    revoke: retain$/    revoke: drop/' "$TALLY_SRC/examples/postgres.yaml" >"$M/postgres.yaml"
grep -q '^    revoke: drop$' "$M/postgres.yaml" || t_fail "the provider manifest was not rewritten"
tly apply "$M/postgres.yaml" >/dev/null
tly assign postgres node-a --expose network --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --secret admin-password \
	<"$TALLY_TEST_PG_PWFILE" >/dev/null
cat >"$M/app.yaml" <<'Y'
module: app
parts: [worker, web]
env: {DB_NAME: "", JOBS_NAME: "", JOBS_USER: "", JOBS_PASSWORD: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    env: {database: DB_NAME}
  jobs:
    type: postgres-database
    from: postgres
    part: worker
    env: {database: JOBS_NAME, user: JOBS_USER, password: JOBS_PASSWORD}
Y
tly apply "$M/app.yaml" >/dev/null
tly assign app node-a --parts web,worker >/dev/null
t_tallyd_once
t_wait_healthy 10 app
[ -n "$(t_envget "$(t_envfile node-a app)" JOBS_NAME)" ] || t_fail "node-a has no JOBS_NAME"

for round in 1 2; do
	t_check "round $round: worker taken from every assignment and given back before a pass"
	n_req=$(tly log --json | grep '"type":"grant.requested"' | grep -c '"grant":"app/jobs"' || true)
	tly assign app node-a --parts web >/dev/null
	tly assign app node-a --parts web,worker >/dev/null
	tly log --json | grep '"type":"revocation.requested"' | grep '"grant":"app/jobs"' |
		grep -q 'part worker no longer installed' || t_fail "no revocation of app/jobs was asked"
	set +e
	"$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG"
	rc=$?
	set -e
	tly status app >"$W/st.out" 2>&1 && src=0 || src=$?
	[ "$rc" = 0 ] && [ "$src" = 0 ] || {
		cat "$W/st.out" >&2
		t_fail "round $round: tallyd --once exit $rc, status exit $src after worker came back"
	}
	tly log --json | grep '"type":"grant.revoked"' | grep -c '"grant":"app/jobs"' >"$W/n"
	[ "$(cat "$W/n")" = "$round" ] || t_fail "round $round: $(cat "$W/n") revocations of app/jobs, want $round (a recorded request is a fact: it runs)"
	[ "$(tly log --json | grep '"type":"grant.requested"' | grep -c '"grant":"app/jobs"')" = $((n_req + 1)) ] ||
		t_fail "round $round: app/jobs was not requested again once worker was back"
	jobs=$(t_envget "$(t_envfile node-a app)" JOBS_NAME)
	[ -n "$jobs" ] || t_fail "round $round: node-a has no JOBS_NAME"
	PGPASSWORD=$(t_envget "$(t_envfile node-a app)" JOBS_PASSWORD) psql -X -At -q \
		-h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" -U "$(t_envget "$(t_envfile node-a app)" JOBS_USER)" \
		-d "$jobs" -c "SELECT 1" >/dev/null || t_fail "round $round: node-a cannot use the jobs database"
	t_ok "round $round: revoked as recorded, then requested again and usable; tallyd --once and status exit 0"
done

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check differs"
t_ok "the log verifies and the projections rebuild identically"
