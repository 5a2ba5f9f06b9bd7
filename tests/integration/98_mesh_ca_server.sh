#!/bin/sh
# The mesh CA closes the loop with TLS (issue 25, item 5): a provider's
# node is given its server certificate by the mesh CA (the provider
# module requires an x509-certificate with its host's names as SANs and
# server-auth), the server is started on it, and the provider assigned
# tls=verify with no ca of its own is verified against the mesh CA:
# tallyd provisions through verify-full, a consumer gets the mesh CA as
# its sslrootcert and connects with psql verify-full.  A server whose
# certificate another CA signed is refused.
. "$(dirname "$0")/lib.sh"

t_say "PostgreSQL, a mesh whose CA is the harness's (an organisation's pair)"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.2
t_mesh_ca_harness

t_check "the provider's node is given its server certificate by the mesh CA"
{
	sed -n '/^module:/,$p' "$TALLY_SRC/examples/postgres.yaml"
	cat <<'YAML'
env: {PG_CERT: "", PG_KEY: ""}
requires:
  server-tls:
    type: x509-certificate
    from: mesh-ca
    sans: [127.0.0.1, localhost]
    server-auth: "yes"
    env: {certificate: PG_CERT, private-key: PG_KEY}
YAML
} >"$W/postgres.yaml"
tly apply "$W/postgres.yaml" >/dev/null || t_fail "apply of the provider with its certificate failed"
tly assign postgres node-a --expose network --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --set tls=verify \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
	t_fail "assign postgres with tls=verify and no ca failed"
t_tallyd_once
t_agent node-a
t_tallyd_once
t_agent node-a
unset PG_CERT PG_KEY
. "$W/agent-node-a/postgres.env"
[ -f "$PG_CERT" ] && [ -f "$PG_KEY" ] || t_fail "no server certificate on node-a"
openssl x509 -in "$PG_CERT" -noout -text >"$W/srv.txt"
grep -q "TLS Web Server Authentication" "$W/srv.txt" || t_fail "no serverAuth"
grep -q "IP Address:127.0.0.1" "$W/srv.txt" || t_fail "SANs: $(grep -A1 Alternative "$W/srv.txt")"
openssl verify -CAfile "$TALLY_TEST_CA" "$PG_CERT" >/dev/null || t_fail "the server certificate does not chain to the mesh CA"
SSERIAL=$(openssl x509 -in "$PG_CERT" -noout -serial | cut -d= -f2)
t_ok "serial $SSERIAL for 127.0.0.1 and localhost, serverAuth, key made on node-a"

t_check "the server runs on it (the harness installs it as PostgreSQL's)"
R=$(cat "$PG_DIR/realdir" 2>/dev/null || echo "$PG_DIR")
cp "$PG_CERT" "$R/server-tls/pg.pem"
cp "$PG_KEY" "$R/server-tls/pg.key"
chmod 600 "$R/server-tls/pg.key"
t_sql "SELECT pg_reload_conf()" >/dev/null
sleep 1
echo | openssl s_client -connect "127.0.0.1:$TALLY_TEST_PG_PORT" -starttls postgres 2>/dev/null |
	openssl x509 -noout -serial >"$W/presented" 2>/dev/null || true
grep -q "$SSERIAL" "$W/presented" || t_fail "PostgreSQL presents $(cat "$W/presented"), not $SSERIAL"
t_ok "PostgreSQL presents serial $SSERIAL"

t_check "tls=verify with no ca: verified against the mesh CA; the consumer is given it"
tly status >"$W/status.out" || true
grep -q "provider node-a/postgres (postgres) reached at .*: TLS, verified" "$W/status.out" ||
	t_fail "status: $(grep 'reached at' "$W/status.out")"
if grep -q "no ca is set" "$W/status.out"; then t_fail "status warns of no ca: $(grep 'no ca' "$W/status.out")"; fi
tly apply "$(t_consumer app)" >/dev/null
cat >"$W/app.yaml" <<'YAML'
module: app
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: "", DB_SSLMODE: "", DB_CA: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD, sslmode: DB_SSLMODE, sslrootcert: DB_CA}
YAML
tly apply "$W/app.yaml" >/dev/null
tly assign app node-b >/dev/null
t_tallyd_once
tly log --json --type grant.provisioned | grep -q 'app/db' || t_fail "not provisioned: $(tail -n 5 "$T_DLOG")"
t_agent node-b
unset DB_HOST DB_PORT DB_NAME DB_USER DB_PASSWORD DB_SSLMODE DB_CA
. "$W/agent-node-b/app.env"
[ "$DB_SSLMODE" = verify-full ] || t_fail "sslmode $DB_SSLMODE"
cmp -s "$DB_CA" "$TALLY_TEST_CA" || t_fail "the consumer's sslrootcert is not the mesh CA"
# verify-full: libpq checks the chain to DB_CA and the host name.
PGPASSWORD=$DB_PASSWORD psql -X -At "host=$DB_HOST port=$DB_PORT dbname=$DB_NAME user=$DB_USER sslmode=verify-full sslrootcert=$DB_CA" \
	-c 'SELECT 1' >"$W/psql.out" 2>&1 || true
[ "$(cat "$W/psql.out")" = 1 ] || t_fail "psql verify-full with the delivered CA: $(cat "$W/psql.out")"
if PGPASSWORD=$DB_PASSWORD psql -X -At "host=$DB_HOST port=$DB_PORT dbname=$DB_NAME user=$DB_USER sslmode=verify-full sslrootcert=$TALLY_TEST_CA_OTHER" \
	-c 'SELECT 1' >"$W/psql.out" 2>&1; then
	t_fail "psql verify-full trusted another CA"
fi
t_ok "provisioned through verify-full; psql verify-full with the delivered mesh CA"

t_check "a server whose certificate another CA signed is refused"
cp "$TALLY_TEST_CA_IMPOSTOR_CERT" "$R/server-tls/pg.pem"
cp "$TALLY_TEST_CA_IMPOSTOR_KEY" "$R/server-tls/pg.key"
chmod 600 "$R/server-tls/pg.key"
t_sql "SELECT pg_reload_conf()" >/dev/null
sleep 1
tly rotate app/db >/dev/null
t_tallyd_try
tly log --json --type credential.activated | grep -q 'app/db' &&
	t_fail "a rotation went through to an impostor"
grep -q "certificate verify failed\|does not verify\|TL_EUNTRUSTED" "$W/once.err" ||
	t_fail "tallyd did not refuse the impostor: $(tail -n 5 "$W/once.err")"
t_ok "refused: $(grep -o 'certificate verify failed\|does not verify' "$W/once.err" | head -1)"
