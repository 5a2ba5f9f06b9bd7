#!/bin/sh
# Exclusive ownership: consumer A's delivered credential reaches A's
# database and nothing of B's (and the reverse), against a real
# PostgreSQL.  Two shared consumers on one node beside the provider;
# tallyd --once provisions both; the checks use the delivered env files
# and psql over TCP, exactly as the consumers would.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL, tally home, two consumers"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app-a)" "$(t_consumer app-b)" >/dev/null
tly assign app-a node-a >/dev/null
tly assign app-b node-a >/dev/null
t_tallyd_once
t_wait_healthy 5

A=$(t_envfile node-a app-a)
B=$(t_envfile node-a app-b)
DBA=$(t_envget "$A" DB_NAME)
DBB=$(t_envget "$B" DB_NAME)
UA=$(t_envget "$A" DB_USER)
UB=$(t_envget "$B" DB_USER)

t_check "the env files are private (mode 600) and name distinct databases and logins"
for f in "$A" "$B"; do
	m=$(stat -c %a "$f")
	[ "$m" = 600 ] || t_fail "$f has mode $m, expected 600"
done
[ -n "$DBA" ] && [ -n "$DBB" ] && [ "$DBA" != "$DBB" ] ||
	t_fail "databases '$DBA' and '$DBB' are not two distinct names"
[ "$UA" != "$UB" ] || t_fail "both consumers got the login $UA"
t_ok "A: $UA -> $DBA; B: $UB -> $DBB"

t_check "each credential connects to its own database and can create there"
for f in "$A" "$B"; do
	got=$(t_env_psql "$f" "CREATE TABLE t (x int); INSERT INTO t VALUES (1);
		SELECT session_user || ' ' || current_database() || ' ' || count(*) FROM t") ||
		t_fail "the credential in $f does not connect to its own database"
	want="$(t_envget "$f" DB_USER) $(t_envget "$f" DB_NAME) 1"
	[ "$got" = "$want" ] || t_fail "in $f: got '$got', expected '$want'"
done
t_ok "both connect, as themselves, to their own databases"

# deny FILE DB: connecting with FILE's credential to DB must be refused
# by the privilege check (not by a wrong password or a missing database).
deny() {
	if t_env_psql "$1" "$2" "SELECT 1" >"$W/deny.out" 2>&1; then
		t_fail "$(t_envget "$1" DB_USER) connected to database $2"
	fi
	grep -q "permission denied for database \"$2\"" "$W/deny.out" || {
		cat "$W/deny.out" >&2
		t_fail "$(t_envget "$1" DB_USER) -> $2 failed, but not with 'permission denied for database'"
	}
}

t_check "A's credential cannot connect to B's database, nor B's to A's"
deny "$A" "$DBB"
deny "$B" "$DBA"
t_ok "refused both ways: permission denied for database"

t_check "(information) what else PUBLIC lets a login reach on this server"
for f in "$A" "$B"; do
	if t_env_psql "$f" template1 "SELECT 1" >/dev/null 2>&1; then
		t_note "$(t_envget "$f" DB_USER) can connect to template1 (PostgreSQL default: PUBLIC has CONNECT there; not a grant)"
	fi
done

t_check "A cannot reach B's roles or data from A's own session"
if t_env_psql "$A" "ALTER ROLE \"$UB\" PASSWORD 'stolen'" >"$W/alter.out" 2>&1; then
	t_fail "$UA could change $UB's password"
fi
if t_env_psql "$A" "SET ROLE \"$(t_envget "$B" DB_NAME)\"" >"$W/setrole.out" 2>&1; then
	t_fail "$UA could SET ROLE to B's owner role"
fi
if t_env_psql "$A" "GRANT \"$DBB\" TO \"$UA\"" >"$W/grant.out" 2>&1; then
	t_fail "$UA could grant itself B's owner role"
fi
t_ok "ALTER ROLE, SET ROLE and GRANT against B's roles are all refused"

t_check "the logins are ordinary roles: no superuser, createdb, createrole, bypassrls"
row=$(t_sql "SELECT string_agg(rolname, ',') FROM pg_roles
	WHERE rolname IN ('$UA', '$UB', '$DBA', '$DBB')
	AND (rolsuper OR rolcreatedb OR rolcreaterole OR rolbypassrls OR rolreplication)")
[ -z "$row" ] || t_fail "privileged grant roles: $row"
t_ok "none has an elevated attribute"

t_check "PUBLIC holds no privilege on either database"
row=$(t_sql "SELECT d.datname FROM pg_database d,
	aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
	WHERE d.datname IN ('$DBA', '$DBB') AND a.grantee = 0")
[ -z "$row" ] || t_fail "PUBLIC has privileges on: $row"
t_ok "no PUBLIC privilege"

t_check "tally verify"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain sound"
