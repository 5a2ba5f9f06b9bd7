#!/bin/sh
# Logins by certificate on a real PostgreSQL (issue 25, item 4): a
# requirement with credential: certificate gets a login role with no
# password, a member of tally_cert, which the server's one-time
# 'hostssl all +tally_cert ... cert' line lets in by a certificate of
# the mesh CA whose CN is the role; the key is made on the consumer's
# node.  A renewal keeps the role (a pool's user never changes), never
# breaks a session opened before it, and the next session uses the new
# certificate; the old one no longer logs in after its not-after; a
# revocation disables the role.  A type whose driver cannot (Redis) is
# refused at apply.
. "$(dirname "$0")/lib.sh"

t_say "PostgreSQL with the one-time set-up; the mesh CA is the harness's (ssl_ca_file)"
t_pg_start
hba=$(t_sql "SHOW hba_file")
{ echo "hostssl all +tally_cert 127.0.0.1/32 cert"; cat "$hba"; } >"$W/hba.new"
cat "$W/hba.new" >"$hba"
t_sql "SELECT pg_reload_conf()" >/dev/null
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.2
t_mesh_ca_harness --set lifetime=60s --set renew-at=50
# Verified against the mesh CA (tls=verify, no ca of its own).
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
tly assign postgres node-a --expose network --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --set tls=verify \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
	t_fail "assign postgres failed"

t_check "credential: certificate is refused at apply where the driver cannot"
cat >"$W/cache.yaml" <<'YAML'
module: cache-user
env: {R: ""}
requires:
  cache:
    type: redis-user
    from: redis
    credential: certificate
    env: {url: R}
YAML
t_expect_exit 4 "apply of a Redis login by certificate" tly apply "$W/cache.yaml"
grep -q "cache.yaml:7:.*credential: type redis-user has no certificate logins: Redis 7 cannot map" "$W/last.err" ||
	t_fail "refusal: $(cat "$W/last.err")"
t_ok "refused at the line and field, with the driver's reason"

t_check "the grant: a login role with no password, a member of tally_cert"
cat >"$W/app.yaml" <<'YAML'
module: app
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: "", DB_CERT: "", DB_KEY: "", DB_URL: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    credential: certificate
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD, sslcert: DB_CERT, sslkey: DB_KEY, url: DB_URL}
YAML
tly apply "$W/app.yaml" >/dev/null
tly assign app node-b >/dev/null
t_settle node-b
tly log --json --type grant.provisioned | grep -q 'app/db' || t_fail "not provisioned: $(tail -n 5 "$T_DLOG")"
load_env() {
	t_envvars "$W/agent-node-b/app.env" DB_HOST DB_PORT DB_NAME DB_USER \
		DB_PASSWORD DB_CERT DB_KEY DB_URL
}
load_env
[ -z "$DB_PASSWORD" ] || t_fail "a password was delivered"
case $DB_URL in postgresql://*:*@*) t_fail "the url carries a password: $DB_URL";; esac
[ "$(t_sql "SELECT rolpassword IS NULL FROM pg_authid WHERE rolname = '$DB_USER'")" = t ] ||
	t_fail "role $DB_USER has a password"
[ "$(t_sql "SELECT pg_has_role('$DB_USER', 'tally_cert', 'MEMBER')")" = t ] || t_fail "not a member of tally_cert"
[ "$(openssl x509 -in "$DB_CERT" -noout -subject)" = "subject=CN = $DB_USER" ] ||
	t_fail "the certificate's CN is not the role: $(openssl x509 -in "$DB_CERT" -noout -subject)"
U1=$DB_USER
cp "$DB_CERT" "$W/v1.pem"; cp "$DB_KEY" "$W/v1.key"; chmod 600 "$W/v1.key"
S1=$(openssl x509 -in "$W/v1.pem" -noout -serial | cut -d= -f2)
NA1=$(tly log --json --type certificate.issued | tail -n 1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["body"]["not_after"])')
t_ok "role $DB_USER: no password, in tally_cert; certificate serial $S1, CN the role"

cpsql() {	# cpsql CERT KEY SQL: psql by certificate only
	psql -X -At "host=127.0.0.1 port=$DB_PORT dbname=$DB_NAME user=$DB_USER sslmode=verify-full sslrootcert=$TALLY_TEST_CA sslcert=$1 sslkey=$2" -c "$3"
}
t_check "psql logs in by the certificate alone; no password gets in"
[ "$(cpsql "$DB_CERT" "$DB_KEY" 'SELECT session_user' 2>"$W/c.err")" = "$DB_USER" ] || t_fail "psql by certificate failed: $(cat "$W/c.err")"
[ "$(psql -X -At "$DB_URL" -c 'SELECT 1')" = 1 ] || t_fail "the delivered url does not log in"
if PGPASSWORD=guess psql -X -At "host=127.0.0.1 port=$DB_PORT dbname=$DB_NAME user=$DB_USER sslmode=require sslcert=/nonexistent sslkey=/nonexistent" -c 'SELECT 1' >/dev/null 2>&1; then
	t_fail "a login without the certificate"
fi
t_ok "psql by certificate and by the delivered url; refused without it"

t_check "a session opened before the renewal survives it; the role is the same"
cpsql "$W/v1.pem" "$W/v1.key" "SELECT pg_sleep(40); SELECT 'alive'" >"$W/long.out" 2>&1 &
LONG=$!
RENEW=$(tly log --json --type certificate.issued | tail -n 1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["body"]["renew_at"])')
NOW=$(date +%s)
[ "$NOW" -lt "$RENEW" ] && sleep $((RENEW - NOW + 1))
t_settle node-b
tly log --json --type rotation.completed | grep -q 'app/db' || t_fail "the renewal did not complete: $(tail -n 5 "$T_DLOG")"
load_env
[ "$DB_USER" = "$U1" ] || t_fail "the login changed: $U1 -> $DB_USER"
S2=$(openssl x509 -in "$DB_CERT" -noout -serial | cut -d= -f2)
[ "$S2" != "$S1" ] || t_fail "no new certificate"
[ "$(cpsql "$DB_CERT" "$DB_KEY" 'SELECT session_user')" = "$DB_USER" ] || t_fail "a new session with the new certificate failed"
[ "$(t_sql "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'app-db%'")" -eq 2 ] ||
	t_fail "roles: $(t_sql "SELECT string_agg(rolname, ' ') FROM pg_roles WHERE rolname LIKE 'app-db%'")"
wait $LONG || true
grep -q '^alive$' "$W/long.out" || t_fail "the session opened before the renewal: $(cat "$W/long.out")"
t_ok "same role $DB_USER, serial $S2; the 40 s session opened on v1 finished; a new session on v2"

t_check "after its not-after the old certificate no longer logs in"
NOW=$(date +%s)
[ "$NOW" -le "$NA1" ] && sleep $((NA1 - NOW + 2))
if cpsql "$W/v1.pem" "$W/v1.key" 'SELECT 1' >"$W/old.out" 2>&1; then t_fail "the expired certificate logged in"; fi
t_ok "refused: $(head -n 1 "$W/old.out" | cut -c1-120)"

t_check "the key never left the node"
KEYB64=$(sed -n '2p' "$DB_KEY")
if grep -rqaF "$KEYB64" "$TALLY_HOME"; then t_fail "the node's key is in the home"; fi
if tly log --json | grep -qF "$KEYB64"; then t_fail "the node's key is in the log"; fi
t_ok "not in the home, not in the log"

t_check "tally check: healthy, no plaintext warning (nothing logs in without the key)"
tly check app/db >"$W/check.out" 2>&1 || t_fail "tally check: $(tail -n 3 "$W/check.out")"
if grep -qi "plaintext" "$W/check.out"; then t_fail "check warns: $(cat "$W/check.out")"; fi
t_ok "$(head -n 1 "$W/check.out" | cut -c1-100)"

t_check "revoked: the role no longer logs in, whatever certificate"
tly remove app --yes >/dev/null
t_tallyd_once
if cpsql "$DB_CERT" "$DB_KEY" 'SELECT 1' >/dev/null 2>&1; then t_fail "the revoked login still logs in"; fi
tly verify >/dev/null && tly rebuild --check >/dev/null || t_fail "verify / rebuild --check"
t_ok "refused; verify and rebuild --check hold"

t_check "a server whose ssl_ca_file is not the mesh CA: the grant refused, saying so; set up, provisioned"
CAFILE=$(t_sql "SHOW ssl_ca_file")
t_sql "ALTER SYSTEM SET ssl_ca_file = '$(dirname "$TALLY_TEST_CA")/other-ca.pem'" >/dev/null
t_sql "SELECT pg_reload_conf()" >/dev/null
sed 's/^module: app$/module: app2/' "$W/app.yaml" >"$W/app2.yaml"
tly apply "$W/app2.yaml" >/dev/null
tly assign app2 node-b >/dev/null
t_expect_exit 6 "tallyd --once against another CA" "$TALLY_BIN/tallyd" --once --once-timeout 5
tly status app2 >"$W/status2.out" 2>&1 || true
grep -q "ssl_ca_file ($(dirname "$TALLY_TEST_CA")/other-ca.pem) does not hold the mesh CA" "$W/status2.out" ||
	t_fail "not refused for its ssl_ca_file: $(cat "$W/status2.out")"
if tly log --json --type grant.provisioned | grep -q 'app2/db'; then t_fail "provisioned against another CA"; fi
t_sql "ALTER SYSTEM RESET ssl_ca_file" >/dev/null
t_sql "SELECT pg_reload_conf()" >/dev/null
[ "$(t_sql "SHOW ssl_ca_file")" = "$CAFILE" ] || t_fail "ssl_ca_file not restored"
t_settle node-b
tly log --json --type grant.provisioned | grep -q 'app2/db' ||
	t_fail "not provisioned once set up: $(tail -n 3 "$T_DLOG")"
t_ok "refused naming ssl_ca_file; provisioned once it holds the mesh CA"
