#!/bin/sh
# The admin's client certificate, end to end through the CLI and tallyd:
# a PostgreSQL whose pg_hba.conf lets the admin role in only by a client
# certificate of the harness CA (the cert method: no password at all).
#
#   - tally assign --secret admin-key reads the PEM key from stdin up to
#     its END line and refuses what is not one unencrypted key (a
#     certificate, an encrypted key, nothing) without recording anything;
#   - with admin-cert and admin-key, and no admin-password, tallyd
#     provisions a grant over verified TLS, the consumer logs in with
#     the delivered values, tally status says the admin presents a
#     client certificate; the key is in the log sealed only (no line of
#     it in any file of the home, nor in tallyd's log);
#   - the certificate without its key: status warns, tallyd opens no
#     session and says why; another CA's certificate (with its own key)
#     is refused by the server, and tallyd says so.
. "$(dirname "$0")/lib.sh"

t_say "PostgreSQL: the admin role in by a client certificate only"
t_pg_start
CN=$TALLY_TEST_CA_CLIENT_CN
t_sql "CREATE ROLE $CN LOGIN SUPERUSER" >/dev/null
hba=$(t_sql "SHOW hba_file")
{
	echo "hostssl all $CN 127.0.0.1/32 cert"
	echo "hostssl all $CN ::1/128 cert"
	echo "host all $CN all reject"
	cat "$hba"
} >"$W/hba.new"
cat "$W/hba.new" >"$hba"
t_sql "SELECT pg_reload_conf()" >/dev/null
# The server's own word: no password gets the role in.
PGPASSWORD=x psql -X -At -h localhost -p "$TALLY_TEST_PG_PORT" -U "$CN" \
	-d postgres -c "SELECT 1" >/dev/null 2>&1 &&
	t_fail "the admin role logs in without a client certificate: the server proves nothing"
PGSSLMODE=verify-full PGSSLROOTCERT=$TALLY_TEST_CA \
	PGSSLCERT=$TALLY_TEST_CA_CLIENT_CERT PGSSLKEY=$TALLY_TEST_CA_CLIENT_KEY \
	psql -X -At -h localhost -p "$TALLY_TEST_PG_PORT" -U "$CN" -d postgres \
	-c "SELECT 1" >/dev/null || t_fail "psql with the client certificate is refused: the server is not set up"

t_init
t_node node-a localhost
tly apply "$TALLY_SRC/examples/postgres.yaml" "$(t_consumer app)" >/dev/null
pg_assign() {
	tly assign postgres node-a --set host=localhost \
		--set port="$TALLY_TEST_PG_PORT" --set admin-user="$CN" \
		--set tls=verify --set ca="$TALLY_TEST_CA" "$@"
}

t_check "--secret admin-key refuses what is not one unencrypted PEM key"
tly log --json >"$W/ev0"
t_expect_exit 4 "a certificate as the key" pg_assign \
	--set admin-cert="$TALLY_TEST_CA_CLIENT_CERT" --secret admin-key \
	<"$TALLY_TEST_CA_CLIENT_CERT"
grep -q "not one PEM private key" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "no reason given"; }
openssl pkey -in "$TALLY_TEST_CA_CLIENT_KEY" -aes256 -passout pass:x -out "$W/enc.key" 2>/dev/null
t_expect_exit 4 "an encrypted key" pg_assign \
	--set admin-cert="$TALLY_TEST_CA_CLIENT_CERT" --secret admin-key <"$W/enc.key"
grep -q "encrypted key" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "no reason given"; }
t_expect_exit 2 "no key on stdin" pg_assign \
	--set admin-cert="$TALLY_TEST_CA_CLIENT_CERT" --secret admin-key </dev/null
grep -q "no PEM key" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "no reason given"; }
! grep -q "BEGIN\|$(sed -n 2p "$TALLY_TEST_CA_CLIENT_KEY" | cut -c1-16)" "$W/last.err" ||
	t_fail "the refusal shows the key"
tly log --json >"$W/ev1"
cmp -s "$W/ev0" "$W/ev1" || t_fail "a refused assign recorded something"
t_ok "a certificate, an encrypted key and nothing refused, nothing recorded"

t_check "admin-cert and admin-key, no password: provisioned over verified TLS"
pg_assign --set admin-cert="$TALLY_TEST_CA_CLIENT_CERT" --secret admin-key \
	<"$TALLY_TEST_CA_CLIENT_KEY" >/dev/null || t_fail "tally assign with the client certificate"
tly assign app node-a >/dev/null
t_tallyd_try
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once with the client certificate exited $T_RC"; }
t_env_psql "$(t_envfile node-a app)" "SELECT 1" >/dev/null ||
	t_fail "the consumer cannot log in with the delivered credential"
tly status >"$W/st" 2>&1 || true
grep -q "reached at localhost: TLS, verified, the admin presents a client certificate" "$W/st" ||
	{ grep "reached at" "$W/st" >&2; t_fail "status does not say the admin presents a client certificate"; }
# The key's lines (base64, 64 characters) in no file of the home.
sed -n '2,$p' "$TALLY_TEST_CA_CLIENT_KEY" | grep -v "^-----" | cut -c1-24 >"$W/keylines"
! grep -rqaF -f "$W/keylines" "$TALLY_HOME" "$T_DLOG" ||
	t_fail "a line of the admin key is in clear in the home or tallyd's log"
t_ok "grant provisioned by the certificate's admin; status names the certificate; the key only sealed"

t_check "the certificate without its key: no session, and why"
tly assign postgres node-a --unset admin-key >/dev/null || t_fail "--unset admin-key"
tly status >"$W/st" 2>&1 || true
grep -q "admin-cert is set but not admin-key" "$W/st" ||
	{ grep "reached at" "$W/st" >&2; t_fail "status does not warn of the half pair"; }
tly rotate app/db >/dev/null
t_tallyd_try
grep -q "admin-key is not" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not say the key is missing"; }
t_ok "$(grep -m1 'admin-key is not' "$W/once.err" | sed 's/^[^ ]* tallyd\[[0-9]*\] [a-z]*: //' | cut -c1-160)"

t_check "another CA's client certificate: refused by the server"
pg_assign --set admin-cert="$TALLY_TEST_CA_CLIENT_OTHER_CERT" --secret admin-key \
	<"$TALLY_TEST_CA_CLIENT_OTHER_KEY" >/dev/null || t_fail "tally assign with the other certificate"
t_tallyd_try
grep -q "refused admin-cert.*unknown ca" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not say the certificate was refused"; }
tly status >"$W/st" 2>&1 || true
grep -q "refused admin-cert" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not name the refused certificate"; }
t_ok "$(grep -m1 'refused admin-cert' "$W/once.err" | sed 's/^[^ ]* tallyd\[[0-9]*\] [a-z]*: //' | cut -c1-160)"
t_check "tally bootstrap: admin-cert a setting, admin-key {file: PATH}"
B=$W/bundle
mkdir -p "$B"
cp "$TALLY_SRC/examples/postgres.yaml" "$B/postgres.yaml"
cat >"$B/registry.yaml" <<EOF
module: registry
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    scope: shared
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}
EOF
cat >"$B/bundle.yaml" <<EOF
node:
  name: cp
  routable-name: localhost
  key-out: $W/keys/cp.key
providers:
  - manifest: postgres.yaml
    module: postgres
    expose: network
    settings:
      host: localhost
      port: "$TALLY_TEST_PG_PORT"
      admin-user: $CN
      tls: verify
      ca: $TALLY_TEST_CA
      admin-cert: $TALLY_TEST_CA_CLIENT_CERT
    secrets:
      admin-key: {file: $TALLY_TEST_CA_CLIENT_KEY}
control-plane:
  - manifest: registry.yaml
    module: registry
EOF
# A key file with its certificate after the key: refused, saying so.
cat "$TALLY_TEST_CA_CLIENT_KEY" "$TALLY_TEST_CA_CLIENT_CERT" >"$W/keycert.pem"
sed -e "s|admin-key: {file: .*}|admin-key: {file: $W/keycert.pem}|" \
	-e "s|key-out: .*|key-out: $W/keys/cp3.key|" "$B/bundle.yaml" >"$B/bundle-kc.yaml"
TALLY_HOME=$W/home3 t_expect_exit 4 "tally bootstrap with a key file that holds more" \
	"$TALLY_BIN/tally" bootstrap "$B/bundle-kc.yaml"
grep -q "not one PEM key" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "no reason given"; }
TALLY_HOME=$W/home2 t_expect_exit 0 "tally bootstrap with a client certificate" \
	"$TALLY_BIN/tally" bootstrap "$B/bundle.yaml"
TALLY_HOME=$W/home2 "$TALLY_BIN/tally" status >"$W/st2" 2>&1 || true
grep -q "the admin presents a client certificate" "$W/st2" ||
	{ cat "$W/st2" >&2; t_fail "the bootstrapped provider has no client certificate"; }
REGDB=$(TALLY_HOME=$W/home2 t_gname registry/db registry-db)
[ "$(t_sql "SELECT pg_get_userbyid(datdba) <> '' FROM pg_database WHERE datname = '$REGDB'")" = t ] ||
	t_fail "no database $REGDB on PostgreSQL: the bootstrap made nothing"
! grep -rqaF -f "$W/keylines" "$W/home2" "$W/last.out" "$W/last.err" ||
	t_fail "a line of the admin key is in clear in the bootstrapped home or its output"
t_ok "bootstrapped: the registry's grant made by the certificate's admin, the key only sealed"

t_check "the log verifies"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain intact"
