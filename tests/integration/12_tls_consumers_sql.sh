#!/bin/sh
# What PostgreSQL and MariaDB consumers get to verify their provider, and
# consumers held to TLS (issue 24, items 2 and 3).
#
# Against the harness's servers (tests/harness/ca.sh makes their CA), a
# provider with tls=verify and ca=CA:
#   - PostgreSQL: the delivered url carries sslmode=verify-full and
#     sslrootcert= the CA's file as the node writes it (the field
#     sslrootcert names the same file, holding the provider's ca); psql
#     with that url reaches the server over verified TLS, and without its
#     sslrootcert refuses it;
#   - the harness's pg_hba.conf lets the login in without TLS: tallyd's
#     check says so, tally status and tally check show it as a warning
#     with the pg_hba.conf line to add, the grant stays healthy and
#     nothing is repaired; with the line added and reloaded the next
#     check clears it and a plaintext login is refused;
#   - MariaDB: the delivered uri carries ssl_mode=VERIFY_IDENTITY and
#     ssl_ca= the CA's file (and ssl_mode, ssl_ca, tls); the mariadb client with --ssl-ca
#     --ssl-verify-server-cert logs in over TLS, a plaintext login of the
#     same user is refused (REQUIRE SSL); REQUIRE NONE set by hand is
#     drift that tally check repairs.
. "$(dirname "$0")/lib.sh"

t_say "PostgreSQL: the consumer's url verifies; not held to TLS is reported"
t_pg_start
t_init
t_node node-a localhost
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
mkdir -p "$W/manifests"
cat >"$W/manifests/app.yaml" <<EOF
module: app
env: {DB_URL: "", DB_SSLMODE: "", DB_SSLROOTCERT: "", DB_USER: "", DB_PASSWORD: "", DB_NAME: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    env: {url: DB_URL, sslmode: DB_SSLMODE, sslrootcert: DB_SSLROOTCERT, user: DB_USER, password: DB_PASSWORD, database: DB_NAME}
EOF
tly apply "$W/manifests/app.yaml" >/dev/null
tly assign postgres node-a --set host=localhost --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --set tls=verify \
	--set ca="$TALLY_TEST_CA" \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
	t_fail "tally assign postgres"
tly assign app node-a >/dev/null
t_tallyd_try
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once exited $T_RC"; }
EF=$(t_envfile node-a app)
url=$(t_envget "$EF" DB_URL)
login=$(t_envget "$EF" DB_USER)

t_check "the delivered values ask for a verified server"
[ "$(t_envget "$EF" DB_SSLMODE)" = verify-full ] ||
	t_fail "DB_SSLMODE is '$(t_envget "$EF" DB_SSLMODE)', not verify-full"
case $url in
postgresql://*":$TALLY_TEST_PG_PORT/"*"?sslmode=verify-full"*) ;;
*) t_fail "the url does not carry sslmode=verify-full: ${url%%:*}://...${url##*@}" ;;
esac
# The provider's CA as a file on the node (here tally env --files, as
# tally-node writes it), named by DB_SSLROOTCERT and by the url.
rootcert=$(t_envget "$EF" DB_SSLROOTCERT)
[ -n "$rootcert" ] && [ -f "$rootcert" ] ||
	t_fail "DB_SSLROOTCERT is '$rootcert', not the CA's file"
cmp -s "$rootcert" "$TALLY_TEST_CA" || t_fail "$rootcert is not the provider's CA"
case $url in
*"sslrootcert=$rootcert"*) ;;
*) t_fail "the url does not name the CA file: ...${url##*@}" ;;
esac
t_ok "DB_SSLMODE verify-full; url ...${url##*@}"

t_check "psql with the url: over verified TLS; refused without the CA"
mkdir -p "$W/emptyhome"
# The same url less its sslrootcert: libpq has no root certificate.
nurl=$(printf '%s' "$url" | sed 's/&sslrootcert=[^&]*//')
if HOME=$W/emptyhome psql -X -At "$nurl" -c "SELECT 1" >"$W/psql.out" 2>&1; then
	t_fail "psql took the server with no CA to verify it by"
fi
grep -q "root certificate" "$W/psql.out" ||
	{ cat "$W/psql.out" >&2; t_fail "psql did not refuse for want of a root certificate"; }
vurl=$url
# The login SETs its owner role, which may not see its session's row.
ssl=$(HOME=$W/emptyhome psql -X -At -q "$vurl" -c "SET ROLE NONE" \
	-c "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") ||
	t_fail "psql with the url and the CA could not log in"
[ "$ssl" = t ] || t_fail "the consumer's session is not over TLS ($ssl)"
t_ok "without the CA: $(grep -m1 'root certificate' "$W/psql.out" | cut -c1-90); with it: TLS"

t_check "the login can still log in without TLS: a warning with the line to add"
PGPASSWORD=$(t_envget "$EF" DB_PASSWORD) psql -X -At "host=127.0.0.1 port=$TALLY_TEST_PG_PORT user=$login dbname=$(t_envget "$EF" DB_NAME) sslmode=disable" \
	-c "SELECT 1" >/dev/null 2>&1 ||
	t_fail "the harness's pg_hba.conf refuses plaintext already: this check proves nothing"
line="hostnossl all $login all reject"
tly status app >"$W/st" 2>&1 ||
	{ cat "$W/st" >&2; t_fail "tally status app is not healthy with the warning (exit $?)"; }
grep -q "WARNING plaintext: login \"$login\" can still log in without TLS" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status shows no warning"; }
grep -q "'$line'" "$W/st" || { cat "$W/st" >&2; t_fail "tally status does not give the line to add"; }
grep -q "DRIFT" "$W/st" && { cat "$W/st" >&2; t_fail "the warning is shown as drift"; }
set +e
tly check app/db >"$W/check.out" 2>&1
rc=$?
set -e
[ $rc -eq 0 ] || { cat "$W/check.out" >&2; t_fail "tally check exited $rc for a warning"; }
grep -q "found plaintext-login: .*'$line'.*not repaired" "$W/check.out" ||
	{ cat "$W/check.out" >&2; t_fail "tally check does not report the finding with the line"; }
n=$(tly log --json 2>/dev/null | grep -c '"grant.drifted"' || true)
[ "$n" -eq 1 ] || { tly log >&2; t_fail "$n grant.drifted events: the warning is recorded once, not per check"; }
! tly log --json 2>/dev/null | grep '"grant.repaired"' | grep -q . ||
	t_fail "something was repaired for a warning"
t_ok "$(grep -m1 'WARNING' "$W/st" | sed 's/^ *//' | cut -c1-150)..."

t_check "the line added to pg_hba.conf: held to TLS, the warning gone"
hba=$(t_sql "SHOW hba_file")
{ echo "$line"; cat "$hba"; } >"$W/hba.new"
cat "$W/hba.new" >"$hba"
t_sql "SELECT pg_reload_conf()" >/dev/null
sleep 1
if PGPASSWORD=$(t_envget "$EF" DB_PASSWORD) psql -X -At "host=127.0.0.1 port=$TALLY_TEST_PG_PORT user=$login dbname=$(t_envget "$EF" DB_NAME) sslmode=disable" \
	-c "SELECT 1" >"$W/plain.out" 2>&1; then
	t_fail "a plaintext login after the line was added"
fi
tly check app/db >"$W/check2.out" 2>&1 || { cat "$W/check2.out" >&2; t_fail "tally check after the line"; }
tly status app >"$W/st2" 2>&1 || { cat "$W/st2" >&2; t_fail "tally status after the line"; }
! grep -q "WARNING" "$W/st2" || { cat "$W/st2" >&2; t_fail "the warning stayed after the line was added"; }
HOME=$W/emptyhome psql -X -At "$vurl" -c "SELECT 1" >/dev/null ||
	t_fail "the consumer cannot log in over TLS after the line"
t_ok "plaintext: $(grep -m1 -o 'no encryption\|rejects connection' "$W/plain.out" | head -n 1); status has no warning"

t_say "MariaDB: the consumer's values verify; users REQUIRE SSL"
t_mariadb_start
tly apply "$TALLY_SRC/examples/mariadb.yaml" >/dev/null
cat >"$W/manifests/mapp.yaml" <<EOF
module: mapp
env: {M_URI: "", M_SSL_MODE: "", M_SSL_CA: "", M_TLS: "", M_HOST: "", M_PORT: "", M_USER: "", M_PASSWORD: "", M_DB: ""}
requires:
  db:
    type: mariadb-database
    from: mariadb
    env: {uri: M_URI, ssl_mode: M_SSL_MODE, ssl_ca: M_SSL_CA, tls: M_TLS, host: M_HOST, port: M_PORT, user: M_USER, password: M_PASSWORD, database: M_DB}
EOF
tly apply "$W/manifests/mapp.yaml" >/dev/null
tly assign mariadb node-a --set host=127.0.0.1 --set port="$TALLY_TEST_MARIADB_PORT" \
	--set admin-user="$TALLY_TEST_MARIADB_USER" --set tls=verify \
	--set ca="$TALLY_TEST_CA" \
	--secret admin-password <"$TALLY_TEST_MARIADB_PWFILE" >/dev/null ||
	t_fail "tally assign mariadb"
tly assign mapp node-a >/dev/null
t_tallyd_try
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once exited $T_RC"; }
MF=$(t_envfile node-a mapp)
mlogin=$(t_envget "$MF" M_USER)
mpw=$(t_envget "$MF" M_PASSWORD)
mhost=$(t_envget "$MF" M_HOST)
mport=$(t_envget "$MF" M_PORT)
mdb=$(t_envget "$MF" M_DB)
# The admin, on the server's socket.
madmin() {
	mariadb --no-defaults -S "$TALLY_TEST_MARIADB_SOCK" -u"$TALLY_TEST_MARIADB_USER" \
		-p"$(cat "$TALLY_TEST_MARIADB_PWFILE")" -N -B -e "$1"
}
ssl_type() {
	madmin "SELECT JSON_VALUE(Priv, '\$.ssl_type') FROM mysql.global_priv WHERE User = '$mlogin' AND Host = '%'"
}

t_check "the delivered values ask for a verified server"
[ "$(t_envget "$MF" M_SSL_MODE)" = VERIFY_IDENTITY ] ||
	t_fail "M_SSL_MODE is '$(t_envget "$MF" M_SSL_MODE)'"
[ "$(t_envget "$MF" M_TLS)" = true ] || t_fail "M_TLS is '$(t_envget "$MF" M_TLS)'"
muri=$(t_envget "$MF" M_URI)
case $muri in
mariadb://*"@$mhost:$mport/$mdb?ssl_mode=VERIFY_IDENTITY"*) ;;
*) t_fail "the uri does not carry ssl_mode=VERIFY_IDENTITY: ...${muri##*@}" ;;
esac
t_ok "M_SSL_MODE VERIFY_IDENTITY, M_TLS true; uri ...${muri##*@}"

t_check "the mariadb client verifies the server and logs in over TLS"
mca=$(t_envget "$MF" M_SSL_CA)
[ -n "$mca" ] && cmp -s "$mca" "$TALLY_TEST_CA" ||
	t_fail "M_SSL_CA is '$mca', not a file of the provider's CA"
case $muri in
*"ssl_ca=$mca"*) ;;
*) t_fail "the uri does not name the CA file: ...${muri##*@}" ;;
esac
cipher=$(mariadb --no-defaults -h "$mhost" -P "$mport" -u "$mlogin" -p"$mpw" \
	--ssl --ssl-ca="$mca" --ssl-verify-server-cert -N -B "$mdb" \
	-e "SHOW STATUS LIKE 'Ssl_cipher'" 2>"$W/m.err") ||
	{ cat "$W/m.err" >&2; t_fail "the consumer cannot log in over verified TLS"; }
[ -n "$(echo "$cipher" | cut -f2)" ] || t_fail "the consumer's session has no cipher: $cipher"
if mariadb --no-defaults -h "$mhost" -P "$mport" -u "$mlogin" -p"$mpw" \
	--ssl-ca="$TALLY_TEST_CA_OTHER" --ssl-verify-server-cert "$mdb" -e "SELECT 1" >/dev/null 2>&1; then
	t_fail "the client took the server with another CA's root: the check proves nothing"
fi
t_ok "TLS: $(echo "$cipher" | cut -f2)"

t_check "a plaintext login of the user is refused (REQUIRE SSL)"
[ "$(ssl_type)" = 1 ] || t_fail "ssl_type of $mlogin is '$(ssl_type)', not 1 (REQUIRE SSL)"
if mariadb --no-defaults -h "$mhost" -P "$mport" -u "$mlogin" -p"$mpw" \
	--skip-ssl "$mdb" -e "SELECT 1" >/dev/null 2>"$W/mplain.err"; then
	t_fail "a plaintext login of a REQUIRE SSL user"
fi
grep -q "1045" "$W/mplain.err" || { cat "$W/mplain.err" >&2; t_fail "refused, but not for the credential's TLS"; }
t_ok "$(cut -c1-100 "$W/mplain.err")"

t_check "REQUIRE NONE set by hand: drift, repaired by tally check"
madmin "ALTER USER '$mlogin'@'%' REQUIRE NONE"
[ "$(ssl_type)" = 0 ] || t_fail "the ALTER did not take"
set +e
tly check mapp/db >"$W/mcheck.out" 2>&1
rc=$?
set -e
[ $rc -eq 8 ] || { cat "$W/mcheck.out" >&2; t_fail "tally check exited $rc, not 8 (repaired)"; }
grep -q "without TLS" "$W/mcheck.out" || { cat "$W/mcheck.out" >&2; t_fail "tally check does not say why"; }
[ "$(ssl_type)" = 1 ] || t_fail "REQUIRE SSL was not restored"
if mariadb --no-defaults -h "$mhost" -P "$mport" -u "$mlogin" -p"$mpw" \
	--skip-ssl "$mdb" -e "SELECT 1" >/dev/null 2>&1; then
	t_fail "a plaintext login after the repair"
fi
t_ok "$(grep -m1 -o 'found privileges-changed: [^;]*' "$W/mcheck.out" | cut -c1-120)"

t_check "the log verifies"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain intact"
