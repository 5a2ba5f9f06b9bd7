#!/bin/sh
# Logins by certificate on a real MariaDB (issue 25, item 4): a
# requirement with credential: certificate gets an account with an
# empty password and REQUIRE SUBJECT '/CN=LOGIN' AND ISSUER (the mesh
# CA's subject; an admin's edit that drops it is a drift tally check
# repairs) (community editions
# keep password authentication: the empty one, with the certificate the
# server verifies against its ssl-ca, the mesh CA); the mariadb client
# logs in with the certificate made for a key born on the consumer's
# node, and without it is refused; a renewal keeps the account; a
# certificate of another CN is refused.
. "$(dirname "$0")/lib.sh"

t_say "MariaDB (ssl-ca the harness CA, which is the mesh CA), a consumer on node-b"
t_mariadb_start
MPORT=$TALLY_TEST_MARIADB_PORT
MPW=$(cat "$TALLY_TEST_MARIADB_PWFILE")
msql() {
	mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -u"$TALLY_TEST_MARIADB_USER" \
		-p"$MPW" -N -B -e "$1"
}
t_init
t_node node-a 127.0.0.1
t_node node-b 127.0.0.2
t_mesh_ca_harness
CAKEY=$(dirname "$TALLY_TEST_CA")/ca.key
cat >"$W/mariadb.yaml" <<'YAML'
module: mariadb
provides:
  mariadb-database:
    driver: mariadb
    revoke: retain
YAML
tly apply "$W/mariadb.yaml" >/dev/null
printf '%s' "$MPW" | tly assign mariadb node-a --expose network --set port="$MPORT" \
	--set admin-user="$TALLY_TEST_MARIADB_USER" --secret admin-password >/dev/null ||
	t_fail "assign mariadb failed"
cat >"$W/app.yaml" <<'YAML'
module: app
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: "", DB_CERT: "", DB_KEY: "", DB_URI: ""}
requires:
  db:
    type: mariadb-database
    from: mariadb
    credential: certificate
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD, ssl_cert: DB_CERT, ssl_key: DB_KEY, uri: DB_URI}
YAML
tly apply "$W/app.yaml" >/dev/null
tly assign app node-b >/dev/null
load_env() {
	t_envvars "$W/agent-node-b/app.env" DB_HOST DB_PORT DB_NAME DB_USER \
		DB_PASSWORD DB_CERT DB_KEY DB_URI
}

t_check "the account: an empty password, REQUIRE SUBJECT '/CN=' its name AND ISSUER the mesh CA"
t_settle node-b
tly log --json --type grant.provisioned | grep -q 'app/db' || t_fail "not provisioned: $(tail -n 5 "$T_DLOG")"
load_env
[ -z "$DB_PASSWORD" ] || t_fail "a password was delivered"
case $DB_URI in mariadb://*:*@*) t_fail "the uri carries a password: $DB_URI";; esac
[ "$(msql "SELECT JSON_VALUE(Priv, '\$.authentication_string') = '' FROM mysql.global_priv WHERE User = '$DB_USER'")" = 1 ] ||
	t_fail "the account has a password"
[ "$(msql "SELECT x509_subject FROM mysql.user WHERE User = '$DB_USER'")" = "/CN=$DB_USER" ] ||
	t_fail "REQUIRE: $(msql "SHOW CREATE USER '$DB_USER'@'%'")"
[ "$(openssl x509 -in "$DB_CERT" -noout -subject)" = "subject=CN = $DB_USER" ] || t_fail "CN not the account"
# The issuer as the server compares it: OpenSSL's one-line form.
ISSUER=$(openssl x509 -in "$TALLY_TEST_CA" -noout -subject -nameopt compat | sed 's/^subject=//')
[ "$(msql "SELECT x509_issuer FROM mysql.user WHERE User = '$DB_USER'")" = "$ISSUER" ] ||
	t_fail "REQUIRE ISSUER: $(msql "SHOW CREATE USER '$DB_USER'@'%'")"
[ "$(openssl x509 -in "$DB_CERT" -noout -issuer -nameopt compat)" = "issuer=$ISSUER" ] || t_fail "the certificate's issuer"
t_ok "account $DB_USER: no password, REQUIRE SUBJECT '/CN=$DB_USER' AND ISSUER '$ISSUER'"

mcert() {	# mcert CERT KEY SQL: the mariadb client by certificate
	mariadb --no-defaults -h127.0.0.1 -P"$DB_PORT" -u"$DB_USER" --ssl \
		--ssl-verify-server-cert --ssl-ca="$TALLY_TEST_CA" --ssl-cert="$1" \
		--ssl-key="$2" -N -B "$DB_NAME" -e "$3"
}
t_check "the mariadb client logs in by the certificate; without it, or with another CN's, refused"
[ "$(mcert "$DB_CERT" "$DB_KEY" 'SELECT CURRENT_USER()' 2>"$W/m.err")" = "$DB_USER@%" ] ||
	t_fail "by certificate: $(cat "$W/m.err")"
if mariadb --no-defaults -h127.0.0.1 -P"$DB_PORT" -u"$DB_USER" --ssl -N -B "$DB_NAME" \
	-e 'SELECT 1' >/dev/null 2>&1; then t_fail "logged in without a certificate"; fi
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/other.key" \
	-subj "/CN=someone-else" -out "$W/other.csr" 2>/dev/null
openssl x509 -req -in "$W/other.csr" -CA "$TALLY_TEST_CA" -CAkey "$CAKEY" -CAcreateserial \
	-days 1 -out "$W/other.pem" 2>/dev/null
if mcert "$W/other.pem" "$W/other.key" 'SELECT 1' >/dev/null 2>&1; then
	t_fail "a certificate of another CN logged in"
fi
t_ok "by certificate: $DB_USER@%; no certificate: refused; CN=someone-else: refused"

t_check "a renewal keeps the account; the new certificate logs in"
U1=$DB_USER
S1=$(openssl x509 -in "$DB_CERT" -noout -serial)
tly rotate app/db >/dev/null
t_settle node-b
tly log --json --type rotation.completed | grep -q 'app/db' || t_fail "the renewal did not complete"
load_env
[ "$DB_USER" = "$U1" ] || t_fail "the account changed: $U1 -> $DB_USER"
[ "$(openssl x509 -in "$DB_CERT" -noout -serial)" != "$S1" ] || t_fail "no new certificate"
[ "$(mcert "$DB_CERT" "$DB_KEY" 'SELECT 1')" = 1 ] || t_fail "the new certificate does not log in"
[ "$(msql "SELECT count(*) FROM mysql.global_priv WHERE User LIKE 'app-db%'")" -eq 1 ] ||
	t_fail "accounts: $(msql "SELECT User FROM mysql.global_priv WHERE User LIKE 'app-db%'")"
t_ok "one account, $DB_USER, a new certificate"

t_check "the issuer dropped by hand is a drift tally check repairs"
msql "ALTER USER '$DB_USER'@'%' REQUIRE SUBJECT '/CN=$DB_USER'"
[ -z "$(msql "SELECT x509_issuer FROM mysql.user WHERE User = '$DB_USER'")" ] || t_fail "the edit did not take"
t_expect_exit 8 "tally check after the edit (repaired)" tly check app/db
cat "$W/last.out" "$W/last.err" >"$W/drift.out"
grep -qF "takes certificates of issuer '(any)', tally sets the mesh CA's '$ISSUER'" "$W/drift.out" ||
	t_fail "the drift not named: $(cat "$W/drift.out")"
[ "$(msql "SELECT x509_issuer FROM mysql.user WHERE User = '$DB_USER'")" = "$ISSUER" ] ||
	t_fail "not repaired: $(msql "SHOW CREATE USER '$DB_USER'@'%'")"
[ "$(mcert "$DB_CERT" "$DB_KEY" 'SELECT 1')" = 1 ] || t_fail "the certificate no longer logs in after the repair"
t_ok "exit 8 (repaired), the issuer named; REQUIRE ISSUER back, the certificate logs in"

t_check "the verifier agrees; revoked, the account is locked"
tly check app/db >/dev/null 2>&1 || t_fail "tally check: $(tly check app/db 2>&1 | tail -3)"
tly remove app --yes >/dev/null
t_tallyd_once
if mcert "$DB_CERT" "$DB_KEY" 'SELECT 1' >/dev/null 2>&1; then t_fail "the revoked account logs in"; fi
t_ok "check healthy; revoked: refused"
