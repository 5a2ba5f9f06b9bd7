#!/bin/sh
# A resource limit set by hand on a MariaDB grant's user (issue 21 item
# 21).  MAX_USER_CONNECTIONS 1 while the consumer holds a session: the
# check's own login is refused with 1226, which is not a wrong password.
# tally check must say privileges (not credential), reset the limit (not
# the password), record the repair, and afterwards the consumer opens a
# second session; the hourly limits are found and reset too.
. "$(dirname "$0")/lib.sh"

command -v mariadb >/dev/null 2>&1 || t_fail "the mariadb client is missing (tools/deps.sh)"

MSH=$TALLY_SRC/tests/harness/mariadb.sh
MDB=$W/mariadb
_m_port=$((57400 + $$ % 97))
HOLD=
trap '_m_rc=$?; set +e; [ -n "$HOLD" ] && kill $HOLD 2>/dev/null; sh "$MSH" stop "$MDB" >/dev/null 2>&1
	if [ "$_m_rc" -ne 0 ]; then (exit "$_m_rc"); fi; _t_cleanup' EXIT
_m_try=0
until { while _t_port_busy "$_m_port"; do _m_port=$((_m_port + 1)); done
	sh "$MSH" start "$MDB" "$_m_port" 2>>"$W/mariadb.start"; }; do
	_m_try=$((_m_try + 1))
	[ $_m_try -lt 5 ] || t_fail "no MariaDB: $(tail -n 5 "$W/mariadb.start")"
	_m_port=$((_m_port + 1))
done
. "$MDB/env"
MPORT=$TALLY_TEST_MARIADB_PORT
MPW=$(cat "$TALLY_TEST_MARIADB_PWFILE")
msql() {
	mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -u"$TALLY_TEST_MARIADB_USER" \
		-p"$MPW" -N -B -e "$1"
}
as_env() {
	mariadb --no-defaults -h"$(t_envget "$1" DB_HOST)" -P"$(t_envget "$1" DB_PORT)" \
		-u"$(t_envget "$1" DB_USER)" -p"$(t_envget "$1" DB_PASSWORD)" \
		-N -B "$(t_envget "$1" DB_NAME)" -e "$2"
}
# priv USER KEY: KEY of USER's account JSON (mysql.global_priv).
priv() {
	msql "SELECT JSON_VALUE(Priv, '\$.$2') FROM mysql.global_priv WHERE User = '$1' AND Host = '%'"
}
# last_drift: the grant's last grant.drifted, as JSON.
last_drift() { tly log --json --stream grant/app/db --type grant.drifted | tail -n 1; }

t_say "a mariadb provider, one consumer"
t_init
t_node node-a 127.0.0.1
mkdir -p "$W/manifests"
printf 'module: mariadb\nprovides:\n  mariadb-database:\n    driver: mariadb\n    revoke: retain\n' \
	>"$W/manifests/mariadb.yaml"
printf '%s\n' 'module: app' \
	'env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: ""}' \
	'requires:' '  db:' '    type: mariadb-database' '    from: mariadb' \
	'    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}' \
	>"$W/manifests/app.yaml"
tly apply "$W/manifests/mariadb.yaml" >/dev/null || t_fail "tally apply mariadb failed"
printf '%s' "$MPW" | tly assign mariadb node-a --expose local --set port="$MPORT" \
	--set admin-user="$TALLY_TEST_MARIADB_USER" --secret admin-password >/dev/null ||
	t_fail "tally assign mariadb failed"
tly apply "$W/manifests/app.yaml" >/dev/null && tly assign app node-a >/dev/null ||
	t_fail "app failed"
t_tallyd_once
t_wait_healthy 10
F=$(t_envfile node-a app)
U=$(t_envget "$F" DB_USER)
as_env "$F" "SELECT 1" >/dev/null || t_fail "the consumer cannot log in"
AUTH0=$(priv "$U" authentication_string)

t_check "MAX_USER_CONNECTIONS 1 with a session held: privileges, the limit reset, not the password"
msql "ALTER USER '$U'@'%' WITH MAX_USER_CONNECTIONS 1"
as_env "$F" "SELECT SLEEP(60)" >/dev/null 2>&1 &
HOLD=$!
sleep 1
as_env "$F" "SELECT 1" >"$W/second.out" 2>&1 && t_fail "a second session got in under MAX_USER_CONNECTIONS 1"
grep -q 1226 "$W/second.out" || t_fail "the second session was not refused with 1226: $(cat "$W/second.out")"
t_expect_exit 8 "tally check" tly check
last_drift | grep -q "privileges-changed" ||
	t_fail "not recorded as privileges-changed: $(last_drift)"
last_drift | grep -q "MAX_USER_CONNECTIONS" || t_fail "the drift does not name the limit: $(last_drift)"
[ "$(priv "$U" max_user_connections)" = 0 ] || t_fail "the limit stayed: $(priv "$U" max_user_connections)"
[ "$(priv "$U" authentication_string)" = "$AUTH0" ] || t_fail "the password was reset for a resource limit"
as_env "$F" "SELECT 1" >/dev/null || t_fail "no second session after the repair"
kill $HOLD 2>/dev/null || true
wait $HOLD 2>/dev/null || true
HOLD=
t_expect_exit 0 "tally check after the repair" tly check
t_ok "privileges-changed naming MAX_USER_CONNECTIONS; limit 0, password unchanged, a second session works"

t_check "the hourly limits are found and reset"
for l in MAX_QUERIES_PER_HOUR MAX_UPDATES_PER_HOUR MAX_CONNECTIONS_PER_HOUR; do
	msql "ALTER USER '$U'@'%' WITH $l 50"
	t_expect_exit 8 "tally check after $l" tly check
	last_drift | grep -q "$l 50" || t_fail "$l not named: $(last_drift)"
	t_expect_exit 0 "tally check after repairing $l" tly check
done
t_ok "MAX_QUERIES_PER_HOUR, MAX_UPDATES_PER_HOUR, MAX_CONNECTIONS_PER_HOUR"
