#!/bin/sh
# The deposed-leader case on PostgreSQL and MariaDB (issue 22, item 3):
# leader A provisions app-1 (PostgreSQL) and mapp-1 (MariaDB); B, a
# standby of A promoted to epoch 2, raises both servers' fences with its
# first tallyd.  B followed A's stream on a real RabbitMQ to A's head
# (so every event it holds is signed by A), then tally promote --yes.
# A, still running (its resync an hour away), is given new grants (a
# new module on each server): no object changes and A exits 9.
# Restarted (cut off from any stream) with a rotation and a removal
# waiting, it exits 9 at its start.  The catalogue listings of both
# servers (roles with their verifiers and marks, databases, users with
# their whole accounts, privileges, tally's marks) are the same before
# and after, and A's consumers, real psql and mariadb clients, still log
# in.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rabbit-lib.sh"

# rabbit-lib.sh's cleanup, then lib.sh's (which stops MariaDB).
trap '_m_rc=$?; set +e; _r_stop
	if [ "$_m_rc" -ne 0 ]; then (exit "$_m_rc"); fi; _t_cleanup' EXIT

t_say "one PostgreSQL, one MariaDB"
t_pg_start
t_mariadb_start
MPORT=$TALLY_TEST_MARIADB_PORT
MPW=$(cat "$TALLY_TEST_MARIADB_PWFILE")
msql() {
	mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -u"$TALLY_TEST_MARIADB_USER" \
		-p"$MPW" -N -B -e "$1"
}
mkdir -p "$W/manifests"
cat >"$W/manifests/mariadb.yaml" <<EOF
module: mariadb
provides:
  mariadb-database:
    driver: mariadb
    revoke: retain
EOF
consumer() {	# NAME TYPE FROM
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: ""}
requires:
  db:
    type: $2
    from: $3
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}
EOF
	echo "$W/manifests/$1.yaml"
}
my_env() {
	_f=$1; shift
	mariadb --no-defaults -h127.0.0.1 -P"$(t_envget "$_f" DB_PORT)" \
		-u"$(t_envget "$_f" DB_USER)" -p"$(t_envget "$_f" DB_PASSWORD)" -N -B \
		"$(t_envget "$_f" DB_NAME)" -e "$1"
}
# snap FILE: both servers' catalogues, tally's fence rows aside.
snap() {
	{
		t_sql "SELECT rolname, rolcanlogin, md5(coalesce(rolpassword, '')),
			shobj_description(oid, 'pg_authid') FROM pg_authid ORDER BY 1"
		t_sql "SELECT datname, pg_get_userbyid(datdba), datallowconn, datacl
			FROM pg_database ORDER BY 1"
		t_sql "SELECT r.rolname, m.rolname FROM pg_auth_members a
			JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member ORDER BY 1, 2"
		msql "SELECT User, Host, Priv FROM mysql.global_priv ORDER BY 1, 2"
		msql "SELECT * FROM mysql.db ORDER BY 1, 2, 3"
		msql "SHOW DATABASES"
		msql "SELECT * FROM tally.marks ORDER BY 1, 2"
	} >"$1"
}

t_say "leader A provisions app-1 on PostgreSQL and mapp-1 on MariaDB"
r_start
STREAM=tally.record
printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/postgres.yaml" "$W/manifests/mariadb.yaml" \
	"$(consumer app-1 postgres-database postgres)" \
	"$(consumer mapp-1 mariadb-database mariadb)" >/dev/null || t_fail "apply on A"
t_provider node-a
printf '%s' "$MPW" | tly assign mariadb node-a --expose local --set port="$MPORT" \
	--set admin-user="$TALLY_TEST_MARIADB_USER" --secret admin-password >/dev/null ||
	t_fail "assign mariadb"
tly assign app-1 node-a >/dev/null
tly assign mapp-1 node-a >/dev/null
t_tallyd_once
t_wait_healthy 10 app-1
t_wait_healthy 10 mapp-1
MESH=$(tly mesh --json | sed -n 's/.*"mesh":"\([0-9a-f]*\)".*/\1/p')
# Kept apart (t_envfile's files follow what is delivered now).
cp "$(t_envfile node-a app-1)" "$W/app-1.env"
cp "$(t_envfile node-a mapp-1)" "$W/mapp-1.env"
E1=$W/app-1.env
E2=$W/mapp-1.env
[ "$(t_env_psql "$E1" "SELECT 1")" = 1 ] || t_fail "app-1 cannot log in"
[ "$(my_env "$E2" "SELECT 1")" = 1 ] || t_fail "mapp-1 cannot log in"
t_ok "app-1 and mapp-1 provisioned, mesh $MESH"

t_say "B: a standby that followed A's stream, promoted to epoch 2"
B=$W/b
LH=$TALLY_HOME
standby_promoted "$B"
t_tallyd_start --interval 3600 --verify-interval 3600
APID=$T_DPID
# A fences at epoch 1 first (else it is deposed before it ever runs).
_n=0
until grep -q "tallyd\[$APID\] info: epoch 1: fenced 2 provider" "$T_DLOG"; do
	_n=$((_n + 1))
	[ $_n -lt 300 ] || t_fail "A did not fence: $(tail -n 5 "$T_DLOG")"
	sleep 0.1
done
"$TALLY_BIN/tallyd" --home "$B" --once --once-timeout 60 2>>"$T_DLOG" ||
	t_fail "B's tallyd --once failed: $(tail -n 5 "$T_DLOG")"
grep -q "info: epoch 2: fenced 2 provider" "$T_DLOG" || t_fail "B did not fence both: $(tail -n 5 "$T_DLOG")"
[ "$(t_sql "SELECT epoch FROM tally_fences WHERE mesh = '$MESH'")" = 2 ] ||
	t_fail "PostgreSQL's fence: $(t_sql "SELECT * FROM tally_fences")"
[ "$(msql "SELECT epoch FROM tally.fences WHERE mesh = '$MESH'")" = 2 ] ||
	t_fail "MariaDB's fence: $(msql "SELECT * FROM tally.fences")"
kill -0 "$APID" 2>/dev/null || t_fail "A is not running"
t_ok "both fences at epoch 2; A (pid $APID) still runs"

t_say "A, running, is given new grants on both servers"
snap "$W/before"
tly apply "$(consumer app-2 postgres-database postgres)" \
	"$(consumer mapp-2 mariadb-database mariadb)" >/dev/null || t_fail "apply app-2 mapp-2"
tly assign app-2 node-a >/dev/null
tly assign mapp-2 node-a >/dev/null
t_wait_exit "$APID" 30
[ "$T_RC" -eq 9 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "A exited $T_RC, expected 9 (deposed)"; }
grep "tallyd\[$APID\] error: deposed: " "$T_DLOG" | grep -q "epoch 2" ||
	t_fail "A does not say why it stopped: $(grep "tallyd\[$APID\]" "$T_DLOG" | tail -n 3)"
snap "$W/after"
diff "$W/before" "$W/after" >"$W/diff" || { cat "$W/diff" >&2; t_fail "the deposed leader changed a server"; }
t_ok "exit 9: $(grep "tallyd\[$APID\] error: deposed" "$T_DLOG" | head -n 1 | sed 's/.*error: //' | cut -c1-120)"

t_say "A restarted, cut off from the stream, with a rotation and a removal waiting"
# A broker that does not answer: only the fence can depose A now.
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "amqp://127.0.0.1:1/" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure (a broker that does not answer) failed"
tly rotate app-1/db >/dev/null 2>&1 || true
tly rotate mapp-1/db >/dev/null 2>&1 || true
tly remove app-1 --yes >/dev/null || t_fail "tally remove app-1 on A"
tly remove mapp-1 --yes >/dev/null || t_fail "tally remove mapp-1 on A"
set +e
"$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG"
rc=$?
set -e
[ "$rc" -eq 9 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "A restarted exited $rc, expected 9"; }
tail -n 3 "$T_DLOG" | grep -q "deposed: provider node-a/[a-z]* is fenced at epoch 2" ||
	t_fail "A restarted does not name the fence: $(tail -n 3 "$T_DLOG")"
snap "$W/after2"
diff "$W/before" "$W/after2" >"$W/diff2" || { cat "$W/diff2" >&2; t_fail "the restarted deposed leader changed a server"; }
[ "$(t_env_psql "$E1" "SELECT 1")" = 1 ] || t_fail "app-1 cannot log in any more"
[ "$(my_env "$E2" "SELECT 1")" = 1 ] || t_fail "mapp-1 cannot log in any more"
t_ok "exit 9 at start; $(wc -l <"$W/before") catalogue lines the same; the consumers still log in"
