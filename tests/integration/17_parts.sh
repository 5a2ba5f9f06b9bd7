#!/bin/sh
# Requirements of a module's parts (issue 16, item 2; research 007: "a
# part-scoped requirement means a database is not provisioned where the
# part that needs it is not installed").  A module declares parts:, a
# requirement may belong to one (part:); tally assign --parts installs
# some; a part's requirement is provisioned (on a real PostgreSQL) only
# for assignments that install it; taking the part away from an
# assignment leaves what only it needed: a holder-left rotation while
# another assignment still installs it, a revocation once none does.
# Refusals name file, line and field; events carry the parts;
# status/explain show them; rebuild --check is identical.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL, two nodes"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.1
t_provider node-a network
M=$W/manifests
mkdir -p "$M"

t_check "a requirement of an undeclared part is refused, naming file, line and field"
cat >"$M/bad.yaml" <<'Y'
module: bad
parts: [web]
env: {J: ""}
requires:
  jobs:
    type: postgres-database
    from: postgres
    part: worker
    env: {database: J}
Y
t_expect_exit 4 "apply part: worker" tly apply "$M/bad.yaml"
grep -q "bad.yaml:8:[0-9]*: requires.jobs.part: 'worker' is not one of the module's parts" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "the refusal does not name bad.yaml:8 requires.jobs.part"
}
printf 'module: bad2\nparts: web\n' >"$M/bad2.yaml"
t_expect_exit 4 "apply parts: web (not a list)" tly apply "$M/bad2.yaml"
grep -q "bad2.yaml:2:[0-9]*: parts: expected a list of part names" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "parts: as a scalar is not refused at bad2.yaml:2"
}
printf 'module: bad3\nparts: [web, web]\n' >"$M/bad3.yaml"
t_expect_exit 4 "apply parts: [web, web]" tly apply "$M/bad3.yaml"
grep -q "bad3.yaml:2:[0-9]*: parts: part 'web' is listed twice" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "a part listed twice is not refused"
}
tly log --json | grep -q '"bad' && t_fail "a refused manifest appended something"
t_ok "$(head -n 1 "$W/last.err")"

# app: db for every part (shared), jobs for the worker (shared), scratch
# for the web part (one per instance).
cat >"$M/app.yaml" <<'Y'
module: app
parts: [worker, web]
env: {DB_NAME: "", JOBS_NAME: "", JOBS_USER: "", JOBS_PASSWORD: "", SCR_NAME: ""}
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
  scratch:
    type: postgres-database
    from: postgres
    scope: per-instance
    part: web
    env: {database: SCR_NAME}
Y
tly apply "$M/app.yaml" >/dev/null

t_check "module.declared records the parts, requirement.declared the part"
tly log --json | grep '"type":"module.declared"' | grep '"name":"app"' |
	grep -q '"parts":\["web","worker"\]' || t_fail "app's declaration has no parts [web, worker]"
tly log --json | grep '"type":"requirement.declared"' | grep '"name":"jobs"' |
	grep -q '"part":"worker"' || t_fail "jobs is not recorded as the worker's"
tly log --json | grep '"type":"requirement.declared"' | grep '"name":"db"' |
	grep -q '"part"' && t_fail "db (every part) records a part"
tly apply "$M/app.yaml" >"$W/again.out"
n0=$(tly log --json | wc -l)
tly apply "$M/app.yaml" >/dev/null
[ "$(tly log --json | wc -l)" = "$n0" ] || t_fail "re-applying the same manifest appended events"
t_ok "parts recorded; re-applying appends nothing"

t_check "--parts naming an unknown part, or on a module without parts, is refused"
t_expect_exit 4 "assign app --parts cron" tly assign app node-a --parts web,cron
grep -q "app has no part cron; its parts are web,worker" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "the refusal does not name the parts"
}
t_expect_exit 4 "assign postgres --parts web" tly assign postgres node-a --parts web
grep -q "postgres declares no parts" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "no refusal for a module without parts"; }
[ "$(tly log --json | wc -l)" = "$n0" ] || t_fail "a refused assign appended events"
t_ok "$(cat "$W/last.err")"

t_check "two assignments installing only web: jobs is not provisioned anywhere"
tly assign app node-a --parts web >/dev/null
tly assign app node-b --parts web >/dev/null
tly log --json | grep '"type":"assignment.created"' | grep '"node":"node-b"' |
	grep -q '"parts":\["web"\]' || t_fail "assignment.created has no parts [web]"
t_tallyd_once
t_wait_healthy 10 app
tly log --json | grep '"type":"grant.requested"' | grep -q '"grant":"app/jobs"' &&
	t_fail "app/jobs was requested although no assignment installs worker"
for g in app/db app/scratch@node-a app/scratch@node-b; do
	tly log --json | grep '"type":"grant.provisioned"' | grep -q "\"grant\":\"$g\"" ||
		t_fail "$g was not provisioned"
done
t_sql "SELECT datname FROM pg_database" >"$W/dbs"
grep -q '^app-jobs' "$W/dbs" && t_fail "a database for app-jobs exists on the server"
grep -q '^app-scratch-node-b' "$W/dbs" || { cat "$W/dbs" >&2; t_fail "no scratch database for node-b"; }
[ -z "$(t_envget "$(t_envfile node-a app)" JOBS_NAME)" ] || t_fail "node-a got JOBS_NAME"
tly status app >"$W/st.out"
grep -q "^  on node-a: ready (parts: web)" "$W/st.out" &&
	grep -q "jobs *not provisioned here: part worker is not installed on node-a" "$W/st.out" ||
	{ cat "$W/st.out" >&2; t_fail "status does not say jobs is not provisioned on node-a"; }
t_ok "$(sed -n 2,3p "$W/st.out" | tr -s ' ' | tr '\n' ';')"

t_check "installing worker on node-b later: jobs is provisioned and delivered there only"
tly assign app node-b --parts web,worker >"$W/asg.out"
grep -q "parts: web -> web,worker" "$W/asg.out" || { cat "$W/asg.out" >&2; t_fail "assign did not say what changed"; }
tly log --json | grep '"type":"assignment.configured"' | grep '"node":"node-b"' |
	grep -q '"parts":\["web","worker"\]' || t_fail "assignment.configured has no parts [web, worker]"
t_tallyd_once
t_wait_healthy 10 app
tly log --json | grep '"type":"grant.provisioned"' | grep -q '"grant":"app/jobs"' ||
	t_fail "app/jobs was not provisioned once node-b installs worker"
jobs=$(t_envget "$(t_envfile node-b app)" JOBS_NAME)
[ -n "$jobs" ] || t_fail "node-b has no JOBS_NAME"
PGPASSWORD=$(t_envget "$(t_envfile node-b app)" JOBS_PASSWORD) psql -X -At -q \
	-h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" -U "$(t_envget "$(t_envfile node-b app)" JOBS_USER)" \
	-d "$jobs" -c "CREATE TABLE t(x int)" || t_fail "node-b cannot use the jobs database"
[ -z "$(t_envget "$(t_envfile node-a app)" JOBS_NAME)" ] || t_fail "node-a (web only) got JOBS_NAME"
tly explain app >"$W/ex.out"
grep -q "^  parts: web, worker" "$W/ex.out" && grep -q "^    on node-a installs web$" "$W/ex.out" &&
	grep -q "^    on node-b installs web, worker$" "$W/ex.out" &&
	grep -q "jobs (part worker) is not provisioned there" "$W/ex.out" ||
	{ cat "$W/ex.out" >&2; t_fail "explain does not show the parts"; }
t_ok "jobs database $jobs used by node-b; node-a has none"

t_check "node-a installs worker too, then node-b drops it: node-b leaves the grant (holder-left)"
tly assign app node-a --parts worker,web >/dev/null
t_tallyd_once
tly assign app node-b --parts web >/dev/null
tly log --json | grep '"type":"rotation.started"' | grep '"grant":"app/jobs"' |
	grep '"reason":"holder-left"' | grep -q '"holder":"app@node-b"' ||
	t_fail "no holder-left rotation of app/jobs for app@node-b"
tly log --json | grep '"type":"revocation.requested"' | grep -q '"grant":"app/jobs"' &&
	t_fail "app/jobs was revoked although node-a still installs worker"
t_ok "rotation.started holder-left app@node-b"

t_check "no assignment installs worker any more: app/jobs is revoked; web's scratch stays"
t_tallyd_once
tly assign app node-a --parts web >/dev/null
tly log --json | grep '"type":"revocation.requested"' | grep '"grant":"app/jobs"' |
	grep -q '"reason":"part worker no longer installed on node-a"' ||
	t_fail "no revocation of app/jobs naming the part"
t_tallyd_once
tly log --json | grep '"type":"grant.revoked"' | grep -q '"grant":"app/jobs"' ||
	t_fail "app/jobs was not revoked"
tly log --json | grep '"type":"revocation.requested"' | grep -q '"grant":"app/scratch' &&
	t_fail "a scratch grant was revoked"
t_ok "app/jobs revoked; the scratch grants kept"

t_check "node-b: web out, worker back: its scratch is revoked; the retained jobs is a question (restore)"
tly assign app node-b --parts worker >/dev/null
tly log --json | grep '"type":"revocation.requested"' | grep -q '"grant":"app/scratch@node-b"' ||
	t_fail "app/scratch@node-b was not revoked"
tly log --json | grep '"type":"revocation.requested"' | grep -q '"grant":"app/scratch@node-a"' &&
	t_fail "app/scratch@node-a was revoked"
tly log --json | grep '"type":"grant.requested"' | grep -c '"grant":"app/jobs"' >"$W/n"
[ "$(cat "$W/n")" = 1 ] || t_fail "retained app/jobs was handed back silently (requested again)"
"$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG" || true
tly status app >"$W/st.out" || true
grep -q "jobs .*tally restore app/jobs" "$W/st.out" || { cat "$W/st.out" >&2; t_fail "status does not point at tally restore app/jobs"; }
tly restore app/jobs >/dev/null || t_fail "tally restore app/jobs failed"
t_tallyd_once
t_wait_healthy 10 app
PGPASSWORD=$(t_envget "$(t_envfile node-b app)" JOBS_PASSWORD) psql -X -At -q \
	-h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" -U "$(t_envget "$(t_envfile node-b app)" JOBS_USER)" \
	-d "$jobs" -c "SELECT count(*) FROM t" >/dev/null || t_fail "the restored jobs database lost its table"
t_ok "scratch@node-b revoked, scratch@node-a kept; jobs restored with its table"

t_check "a requirement declared again of another part: the grant no installing assignment holds is revoked"
sed 's/^    part: web$/    part: worker/' "$M/app.yaml" >"$M/app2.yaml"
grep -c 'part: worker' "$M/app2.yaml" | grep -q 2 || t_fail "the test manifest was not rewritten"
tly apply "$M/app2.yaml" >/dev/null
tly log --json | grep '"type":"revocation.requested"' | grep '"grant":"app/scratch@node-a"' |
	grep -q '"reason":"part worker is not installed on node-a"' ||
	t_fail "app/scratch@node-a (node-a installs web only) was not revoked"
tly log --json | grep '"type":"revocation.requested"' | grep '"grant":"app/db"' &&
	t_fail "app/db (every part) was revoked"
tly status app >"$W/st.out" || true
grep -q "scratch *not provisioned here: part worker is not installed on node-a" "$W/st.out" ||
	{ cat "$W/st.out" >&2; t_fail "status does not show scratch as not provisioned on node-a"; }
t_ok "scratch@node-a revoked: part worker is not installed on node-a"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check differs"
t_ok "the log verifies and the projections rebuild identically"
