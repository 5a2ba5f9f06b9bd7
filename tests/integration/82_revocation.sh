#!/bin/sh
# Revocation, purge and restore.  Two providers on node-a, both of
# PostgreSQL: postgres (revoke: retain, examples/postgres.yaml) and
# pgdrop (revoke: drop).  Consumers, each with one shared grant:
#   keep   (postgres)  removed: login disabled, its open session ended,
#                      delivery file removed, data retained; re-added
#                      under the same name it is not handed its old
#                      database (status exit 6, "a retained grant
#                      exists"); tally restore takes it back with a new
#                      credential, the old row still there;
#   gone   (pgdrop)    removed: the database is dropped;
#   trash, trash2      removed, then purged: a wrong retyped name or none
#                      is refused (exit 4, nothing appended), the name
#                      retyped or --yes purges; purge.requested records
#                      who; the database is gone only then;
#   mid    (postgres)  removed in the middle of a rotation (v2 active,
#                      not acknowledged): neither v1 nor v2 may still log
#                      in, the session on v1 is ended, the rotation is
#                      recorded as abandoned;
#   live   (postgres)  never removed: purge and restore are refused.
. "$(dirname "$0")/lib.sh"
# The grants' databases (reactors/names.c).

t_wait_log() {	# SECONDS STREAM TYPE [GREP]: prints the first match
	_w_end=$(($(t_now_ms) + $1 * 1000))
	while :; do
		_w_l=$(tly log --json --stream "$2" --type "$3" |
			grep -e "${4:-.}" | head -n 1) || true
		if [ -n "$_w_l" ]; then
			printf '%s\n' "$_w_l"
			return 0
		fi
		if [ "$(t_now_ms)" -gt "$_w_end" ]; then
			tail -n 20 "$T_DLOG" >&2
			t_fail "no $3 on $2 within $1 s"
		fi
		sleep 0.1
	done
}

head_seq() { tly log --json | tail -n 1 | t_jfields seq; }
db_exists() { [ -n "$(t_sql "SELECT 1 FROM pg_database WHERE datname = '$1'")" ]; }
can_login() { t_sql "SELECT rolcanlogin::int FROM pg_roles WHERE rolname = '$1'"; }
admin_in() {	# DB SQL
	psql -X -At -q -v ON_ERROR_STOP=1 -h "$TALLY_TEST_PG_SOCK" \
		-p "$TALLY_TEST_PG_PORT" -U "$TALLY_TEST_PG_USER" -d "$1" -c "$2"
}
# sleeper NAME ENVFILE: a session held open with the credential in ENVFILE.
sleeper() {
	u=$(t_envget "$2" DB_USER)
	(
		PGPASSWORD=$(t_envget "$2" DB_PASSWORD) exec psql -X -At -q \
			-h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" -U "$u" \
			-d "$(t_envget "$2" DB_NAME)" -c "SELECT pg_sleep(60)" \
			>"$W/$1.out" 2>"$W/$1.err"
	) &
	_s=$!
	_t_pids="$_t_pids $_s"	# lib.sh's cleanup kills it on failure
	end=$(($(t_now_ms) + 10000))
	until [ "$(t_sql "SELECT count(*) FROM pg_stat_activity WHERE usename = '$u' AND query LIKE '%pg_sleep%'")" -ge 1 ]; do
		[ "$(t_now_ms)" -lt "$end" ] || t_fail "the session as $u did not start"
		sleep 0.05
	done
	eval "SLEEPER_$1=$_s"
}
# ended NAME: the sleeper's session was ended by tallyd (not by itself).
ended() {
	eval "_p=\$SLEEPER_$1"
	t_wait_exit "$_p" 15
	[ "$T_RC" -ne 0 ] || t_fail "the session of $1 ended normally: it was not terminated"
	grep -qi "terminat" "$W/$1.err" || t_fail "the session of $1 ended, but not terminated: $(cat "$W/$1.err")"
}
refused() {	# ENVFILE: the credential no longer connects
	if t_env_psql "$1" "SELECT 1" >/dev/null 2>"$W/conn.err"; then
		t_fail "the credential in $1 ($(t_envget "$1" DB_USER)) still connects"
	fi
}

t_say "throwaway PostgreSQL; providers postgres (retain) and pgdrop (drop) on node-a"
t_pg_start
t_init
# The grants' names, from the mesh id tally init drew (t_gname).
GONEDB=$(t_gname gone/db gone-db)
KEEPDB=$(t_gname keep/db keep-db)
MIDDB=$(t_gname mid/db mid-db)
TRASHDB=$(t_gname trash/db trash-db)
TRASH2DB=$(t_gname trash2/db trash2-db)
t_node node-a 127.0.0.1
t_provider node-a network
mkdir -p "$W/manifests"
cat >"$W/manifests/pgdrop.yaml" <<EOF
module: pgdrop
provides:
  postgres-database:
    driver: postgres
    revoke: drop
EOF
tly apply "$W/manifests/pgdrop.yaml" >/dev/null || t_fail "tally apply pgdrop.yaml failed"
tly assign pgdrop node-a --expose network --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --secret admin-password \
	<"$TALLY_TEST_PG_PWFILE" >/dev/null || t_fail "tally assign pgdrop failed"
for m in keep trash trash2 mid live; do
	tly apply "$(t_consumer $m)" >/dev/null || t_fail "tally apply $m failed"
done
sed 's/from: postgres/from: pgdrop/' "$(t_consumer gone)" >"$W/manifests/gone2.yaml"
mv "$W/manifests/gone2.yaml" "$W/manifests/gone.yaml"
tly apply "$W/manifests/gone.yaml" >/dev/null || t_fail "tally apply gone failed"
for m in keep trash trash2 mid live gone; do
	tly assign $m node-a >/dev/null || t_fail "tally assign $m failed"
done
t_tallyd_start --interval 1
t_wait_healthy 30
tly explain gone | grep -q pgdrop || t_fail "gone is not bound to pgdrop: $(tly explain gone)"
for m in keep trash trash2 gone live; do
	t_env_psql "$(t_envfile node-a $m)" "CREATE TABLE t (x text); INSERT INTO t VALUES ('$m row')" ||
		t_fail "$m cannot write its database"
	cp "$(t_envfile node-a $m)" "$W/$m.v1.env"
done
cp "$(t_envfile node-a mid)" "$W/mid.v1.env"
t_ok "6 grants provisioned; keep, trash, trash2, gone, live wrote a row as themselves"

t_say "mid: a rotation v1 → v2, activated, not acknowledged"
tly rotate mid/db >/dev/null || t_fail "tally rotate mid/db failed"
t_wait_log 20 grant/mid/db credential.activated >/dev/null
[ "$(can_login ${MIDDB}_v1)$(can_login ${MIDDB}_v2)" = 11 ] || t_fail "mid: v1 and v2 are not both LOGIN"
t_ok "${MIDDB}_v1 and ${MIDDB}_v2 both LOGIN"

t_say "sessions held open: keep (v1), mid (v1, the old credential)"
sleeper keep "$W/keep.v1.env"
sleeper mid "$W/mid.v1.env"
t_ok "psql sleeping as ${KEEPDB}_v1 and ${MIDDB}_v1"

t_say "tally remove keep gone trash trash2 mid"
for m in keep gone trash trash2 mid; do
	tly remove $m >/dev/null || t_fail "tally remove $m failed"
done
for m in keep gone trash trash2 mid; do
	t_wait_log 20 "grant/$m/db" grant.revoked >/dev/null
done
t_ok "grant.revoked recorded for all five"

t_check "keep: login disabled, session ended, delivery file removed, data retained"
[ "$(can_login ${KEEPDB}_v1)" = 0 ] || t_fail "${KEEPDB}_v1 can still log in ($(can_login ${KEEPDB}_v1))"
refused "$W/keep.v1.env"
ended keep
end=$(($(t_now_ms) + 5000))
while [ -e "$(t_envfile node-a keep)" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "keep's delivery file is still there"
	sleep 0.05
done
tly grants --revoked >"$W/grants.txt" || t_fail "tally grants --revoked failed"
grep -q '^keep/db  *revoked (data retained, [0-9][0-9.]* MiB)' \
    "$W/grants.txt" || {
	cat "$W/grants.txt" >&2
	t_fail "tally grants --revoked does not show keep/db as 'revoked (data retained, SIZE)'"
}
grep -q '^live/db' "$W/grants.txt" && t_fail "tally grants --revoked lists live/db"
db_exists ${KEEPDB} || t_fail "database ${KEEPDB} is gone after a retain revocation"
[ "$(admin_in ${KEEPDB} "SELECT x FROM t")" = "keep row" ] || t_fail "keep's row is gone"
t_ok "NOLOGIN; connection refused ($(head -n 1 "$W/conn.err" | sed 's/.*FATAL: *//')); session terminated; no env file"
t_ok "$(grep '^keep/db' "$W/grants.txt" | tr -s ' ')"
t_ok "database ${KEEPDB} still holds 'keep row'"

t_check "gone (revoke: drop): the database is gone"
grep -q '^gone/db  *revoked (data dropped)' "$W/grants.txt" ||
	t_fail "tally grants --revoked does not show gone/db as 'revoked (data dropped)'"
t_wait_log 1 grant/gone/db grant.revoked '"policy":"drop"' >/dev/null
db_exists ${GONEDB} && t_fail "database ${GONEDB} still exists after a drop revocation"
[ -z "$(t_sql "SELECT rolname FROM pg_roles WHERE rolname LIKE '${GONEDB}%'")" ] ||
	t_fail "roles of ${GONEDB} remain: $(t_sql "SELECT rolname FROM pg_roles WHERE rolname LIKE '${GONEDB}%'")"
refused "$W/gone.v1.env"
t_ok "${GONEDB} and its roles dropped; grant.revoked policy drop"

t_check "mid, revoked during its rotation: neither credential logs in any more"
[ "$(can_login ${MIDDB}_v2)" = 0 ] || t_fail "${MIDDB}_v2 (the revoked grant's current login) can log in"
end=$(($(t_now_ms) + 5000))
while [ "$(can_login ${MIDDB}_v1)" = 1 ]; do
	[ "$(t_now_ms)" -lt "$end" ] ||
		t_fail "${MIDDB}_v1 (the rotation's old login) can still log in 5 s after the grant was revoked"
	sleep 0.05
done
refused "$W/mid.v1.env"
ended mid
t_ok "${MIDDB}_v1 $( [ -z "$(can_login ${MIDDB}_v1)" ] && echo dropped || echo NOLOGIN), ${MIDDB}_v2 NOLOGIN, session on v1 terminated"
ab=$(t_wait_log 5 grant/mid/db rotation.abandoned)
ret=$(t_wait_log 1 grant/mid/db credential.retired)
printf '%s' "$ret" | grep -q "\"user\":\"${MIDDB}_v1\"" || t_fail "credential.retired does not name ${MIDDB}_v1: $ret"
t_ok "credential.retired $(printf '%s' "$ret" | sed 's/.*"body"://')"
t_ok "rotation.abandoned $(printf '%s' "$ab" | sed 's/.*"body"://')"
db_exists ${MIDDB} || t_fail "database ${MIDDB} is gone (policy retain)"

t_say "tally purge: the only way retained data is destroyed"
t_check "refusals append nothing and destroy nothing"
before=$(head_seq)
echo trash/dbx | t_expect_exit 4 "purge with a wrongly retyped name" tly purge trash/db
grep -q "not confirmed" "$W/last.err" || t_fail "no 'not confirmed' in: $(cat "$W/last.err")"
t_expect_exit 4 "purge with nothing retyped" tly purge trash/db </dev/null
t_expect_exit 4 "purge of a provisioned grant" tly purge live/db --yes
grep -q "only a revoked grant" "$W/last.err" || t_fail "purge of live/db: $(cat "$W/last.err")"
t_expect_exit 4 "purge of a grant revoked with policy drop" tly purge gone/db --yes
t_expect_exit 3 "purge of no such grant" tly purge nosuch/db --yes
t_expect_exit 2 "purge without a grant" tly purge --yes
[ "$(head_seq)" = "$before" ] || t_fail "a refused purge appended events"
db_exists ${TRASHDB} || t_fail "${TRASHDB} is gone after refused purges"
db_exists ${KEEPDB} && db_exists ${MIDDB} && db_exists ${TRASH2DB} ||
	t_fail "a retained database disappeared without a purge"
t_ok "wrong name, no name, live/db, gone/db: exit 4; nosuch: 3; nothing appended; data intact"

t_check "purge with the name retyped"
echo trash/db | tly purge trash/db >/dev/null 2>"$W/purge.err" || t_fail "tally purge trash/db (retyped) failed: $(cat "$W/purge.err")"
pr=$(t_wait_log 5 grant/trash/db purge.requested)
actor=$(printf '%s' "$pr" | t_jstr actor)
case "$actor" in
	cli:?*) ;;
	*) t_fail "purge.requested does not record who: actor '$actor'" ;;
esac
t_wait_log 20 grant/trash/db grant.purged >/dev/null
db_exists ${TRASHDB} && t_fail "${TRASHDB} still exists after grant.purged"
t_ok "purge.requested by $actor; grant.purged; ${TRASHDB} gone"

t_check "purge --yes"
tly purge trash2/db --yes >/dev/null || t_fail "tally purge trash2/db --yes failed"
t_wait_log 20 grant/trash2/db grant.purged >/dev/null
db_exists ${TRASH2DB} && t_fail "${TRASH2DB} still exists after grant.purged"
[ -z "$(t_sql "SELECT rolname FROM pg_roles WHERE rolname LIKE 'trash%'")" ] ||
	t_fail "roles of the purged grants remain: $(t_sql "SELECT rolname FROM pg_roles WHERE rolname LIKE 'trash%'")"
t_expect_exit 4 "purge of a purged grant" tly purge trash2/db --yes
t_ok "${TRASH2DB} and every trash role gone; a second purge is refused"

t_say "keep re-added under the same name"
tly apply "$W/manifests/keep.yaml" >/dev/null || t_fail "re-applying keep failed"
tly assign keep node-a >/dev/null || t_fail "re-assigning keep failed"
sleep 2	# two resync periods: tallyd must not hand it anything
t_expect_exit 6 "tally status keep (a retained grant)" tly status keep
grep -q "a retained grant exists" "$W/last.out" || {
	cat "$W/last.out" >&2
	t_fail "status does not say a retained grant exists"
}
[ -e "$(t_envfile node-a keep)" ] && t_fail "keep was handed a delivery file before restore"
[ "$(can_login ${KEEPDB}_v1)" = 0 ] || t_fail "${KEEPDB}_v1 was re-enabled"
t_ok "exit 6: $(grep -o 'a retained grant exists[^;]*' "$W/last.out")"

t_check "restore refused where there is nothing retained"
t_expect_exit 4 "restore of a dropped grant" tly restore gone/db
t_expect_exit 4 "restore of a purged grant" tly restore trash/db
t_expect_exit 4 "restore of a provisioned grant" tly restore live/db
t_ok "gone/db, trash/db, live/db: exit 4"

t_check "tally restore keep/db: a new credential, the old data"
tly restore keep/db >/dev/null || t_fail "tally restore keep/db failed"
t_wait_log 20 grant/keep/db grant.restored >/dev/null
t_wait_healthy 15 keep
f=$(t_envfile node-a keep)
[ "$(t_envget "$f" DB_USER)" = ${KEEPDB}_v2 ] || t_fail "restored keep holds $(t_envget "$f" DB_USER), expected ${KEEPDB}_v2"
[ "$(t_env_psql "$f" "SELECT x FROM t")" = "keep row" ] || t_fail "restored keep does not see its old row"
refused "$W/keep.v1.env"
t_ok "DB_USER ${KEEPDB}_v2 reads 'keep row'; the v1 credential stays refused"

t_check "live never lost anything"
[ "$(t_env_psql "$(t_envfile node-a live)" "SELECT x FROM t")" = "live row" ] || t_fail "live lost its row"
t_ok "live row"

if tly history keep/db >"$W/history.txt" 2>&1; then
	t_note "tally history keep/db:"
	sed 's/^/      /' "$W/history.txt" | grep -E 'revo|purg|restor|provisioned' | head -n 12
fi
t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "tally verify, tally rebuild --check"
