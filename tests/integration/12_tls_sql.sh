#!/bin/sh
# tallyd reaches PostgreSQL and MariaDB over TLS, verified against the
# provider's ca, and refuses a server it cannot verify before it logs in.
#
# Against the harness's servers (tests/harness/ca.sh makes their CA):
#   - tls=verify with ca=CA: a grant is provisioned, rotated and revoked;
#     tally status says the provider is reached by verified TLS; a
#     capture of the loopback traffic of the whole run (tcpdump) holds
#     none of the names tallyd created (but in the startup packets of
#     check's plaintext question whether a login is held to TLS, which
#     carry no secret), nor the admin password, while the same run with
#     tls=off (the positive control) holds them;
#   - a server whose certificate chains to another CA (ca=the other CA)
#     or names another host (the wrong-host certificate) is refused:
#     tallyd --once fails naming "certificate verify failed" or the host
#     name, no grant is made, and status names the reason;
#   - tls=verify with no ca is refused with how to give one;
#   - a non-loopback provider reached in plaintext is warned of.
. "$(dirname "$0")/lib.sh"

command -v tcpdump >/dev/null || t_fail "tcpdump is not installed (tools/deps.sh installs it)"


t_say "PostgreSQL with TLS (harness CA); a postgres provider reached at localhost"
t_pg_start
t_init
t_node node-a localhost
tly apply "$TALLY_SRC/examples/postgres.yaml" "$(t_consumer app)" >/dev/null
pg_assign() {
	tly assign postgres node-a --set host=localhost \
		--set port="$TALLY_TEST_PG_PORT" \
		--set admin-user="$TALLY_TEST_PG_USER" "$@" \
		--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
		t_fail "tally assign postgres $*"
}

t_check "tls=verify without ca: refused, saying how to give one"
pg_assign --set tls=verify
tly assign app node-a >/dev/null
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once connected with tls=verify and no ca"
grep -v "fence:" "$W/once.err" | grep "no ca" | grep -q -- "--set ca=FILE" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "no word on the missing ca"; }
t_ok "$(grep -v 'fence:' "$W/once.err" | grep -m1 'no ca' | sed 's/^.* \(warn\|error\|info\): //' | cut -c1-140)"

t_check "a server whose certificate chains to another CA: refused before login"
pg_assign --set ca="$TALLY_TEST_CA_OTHER"
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted a server of another CA"
grep -q "certificate verify failed" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not name the failed verification"; }
tly grants >"$W/grants" 2>&1 || true
! grep -q "provisioned" "$W/grants" ||
	{ cat "$W/grants" >&2; t_fail "a grant was provisioned through an unverified server"; }
tly status >"$W/st" 2>&1 || true
grep -q "certificate verify failed" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not name the reason"; }
t_ok "$(grep -v 'fence:' "$W/once.err" | grep -m1 'certificate verify failed' | sed 's/^.* \(warn\|error\|info\): //' | cut -c1-160)"

t_check "tls=verify with the right CA: provisioned, migrated, rotated, revoked; nothing in clear on the wire"
pg_assign --set ca="$TALLY_TEST_CA"
# A consumer with a migration: it runs as the consumer, over TLS too.
mkdir -p "$W/manifests/mig/migapp"
printf 'CREATE TABLE tls_probe_table (x int);\n' >"$W/manifests/mig/migapp/001_probe.sql"
{
	echo "module: migapp"
	echo 'env: {M_HOST: "", M_PORT: "", M_NAME: "", M_USER: "", M_PASSWORD: ""}'
	echo "requires:"
	echo "  db:"
	echo "    type: postgres-database"
	echo "    from: postgres"
	echo "    scope: shared"
	echo "    env: {host: M_HOST, port: M_PORT, database: M_NAME, user: M_USER, password: M_PASSWORD}"
	echo "    migrations: mig/migapp"
} >"$W/manifests/migapp.yaml"
tly apply "$W/manifests/migapp.yaml" >/dev/null
tly assign migapp node-a >/dev/null
t_capture "$W/tls.pcap" "$TALLY_TEST_PG_PORT"
t_tallyd_try
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once over verified TLS exited $T_RC"; }
login=$(t_envget "$(t_envfile node-a app)" DB_USER)
[ -n "$login" ] || t_fail "no DB_USER delivered"
t_env_psql "$(t_envfile node-a app)" "SELECT 1" >/dev/null ||
	t_fail "the consumer cannot log in with the delivered credential"
tly status migapp >"$W/mst" 2>&1 || true
grep -q "migrated\|ready" "$W/mst" ||
	{ cat "$W/mst" >&2; t_fail "migapp's migration did not run over verified TLS"; }
tly rotate app/db >/dev/null
t_tallyd_try
tly remove app --yes >/dev/null || t_fail "tally remove app failed"
t_tallyd_try
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "the revocation over verified TLS exited $T_RC"; }
t_capture_end
tly status >"$W/st" 2>&1 || true
grep -q "reached at localhost: TLS, verified" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "tally status does not say the provider is reached by verified TLS"; }
pw=$(cat "$TALLY_TEST_PG_PWFILE")
base=${login%_v*}
strings -n 6 "$W/tls.pcap" >"$W/tls.txt"
# The one exchange in clear is check's question whether the login can
# log in without TLS (12_tls_consumers_sql.sh): a startup packet with
# the login's and database's names and no secret, which the server
# answers before any password.  Nothing else may carry a name.
tcpdump -A -r "$W/tls.pcap" 2>/dev/null | grep -a -- "$base" >"$W/tls.names" || true
! grep -av "application_name.tally-tls-probe" "$W/tls.names" | grep -q . ||
	{ grep -av "tally-tls-probe" "$W/tls.names" | cut -c1-200 >&2
	  t_fail "the grant's role name crossed the wire in clear over TLS"; }
grep -q . "$W/tls.names" ||
	t_fail "no plaintext question of the login: the check of TLS-only logins did not run"
! grep -q -e "$pw" "$W/tls.txt" || t_fail "the admin password crossed the wire in clear over TLS"
! grep -q "tls_probe_table" "$W/tls.txt" || t_fail "the migration's SQL crossed the wire in clear"
t_ok "grant $login provisioned, rotated and revoked; capture $(wc -c <"$W/tls.pcap") bytes, $base in clear only in the TLS-only question, the admin password nowhere"

t_check "the positive control: the same with tls=off carries the names in clear"
pg_assign --set tls=off
tly apply "$(t_consumer app2)" >/dev/null
tly assign app2 node-a >/dev/null
sed 's/migapp/migapp2/g' "$W/manifests/migapp.yaml" >"$W/manifests/migapp2.yaml"
mkdir -p "$W/manifests/mig/migapp2"
printf 'CREATE TABLE tls_probe_plain (x int);\n' >"$W/manifests/mig/migapp2/001_probe.sql"
tly apply "$W/manifests/migapp2.yaml" >/dev/null
tly assign migapp2 node-a >/dev/null
t_capture "$W/plain.pcap" "$TALLY_TEST_PG_PORT"
t_tallyd_try
t_capture_end
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once in plaintext exited $T_RC"; }
login2=$(t_envget "$(t_envfile node-a app2)" DB_USER)
[ -n "$login2" ] || t_fail "no DB_USER delivered to app2"
strings -n 6 "$W/plain.pcap" | grep -q "${login2%_v*}" ||
	t_fail "the plaintext capture holds no role name: the capture proves nothing"
strings -n 6 "$W/plain.pcap" | grep -q "tls_probe_plain" ||
	t_fail "the plaintext capture holds no migration SQL: the migration check proves nothing"
t_ok "plaintext capture holds ${login2%_v*} and the migration's SQL"

t_check "a server presenting a certificate for another host: refused"
R=$(cat "$PG_DIR/realdir" 2>/dev/null || echo "$PG_DIR")
cp "$TALLY_TEST_CA_WRONGHOST_CERT" "$R/server-tls/pg.pem"
cp "$TALLY_TEST_CA_WRONGHOST_KEY" "$R/server-tls/pg.key"
psql -h "$TALLY_TEST_PG_SOCK" -p "$TALLY_TEST_PG_PORT" -U "$TALLY_TEST_PG_USER" \
	-d postgres -Atc "SELECT pg_reload_conf()" >/dev/null
sleep 1
pg_assign --set tls=verify
tly apply "$(t_consumer app3)" >/dev/null
tly assign app3 node-a >/dev/null
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted a certificate for another host"
grep -qi "does not match host name\|certificate verify failed" "$W/once.err" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not say the host name does not match"; }
t_ok "$(grep -v 'fence:' "$W/once.err" | grep -m1 -i 'host name\|verify failed' | sed 's/^.* \(warn\|error\|info\): //' | cut -c1-160)"

t_check "a provider on another address reached in plaintext is warned of"
tly assign postgres node-a --set host=db.example --set tls=off >/dev/null
tly status >"$W/st" 2>&1 || true
grep -q "reached at db.example: plaintext; warning: plaintext to db.example" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "no warning for plaintext to a non-loopback host"; }
t_ok "$(grep -m1 'reached at db.example' "$W/st")"
# Back to the loopback host in plaintext, so that what follows waits on
# nothing of PostgreSQL's.
tly assign postgres node-a --set host=localhost --set tls=off >/dev/null

t_say "MariaDB with TLS (harness CA)"
t_mariadb_start
tly apply "$TALLY_SRC/examples/mariadb.yaml" >/dev/null
mkdir -p "$W/manifests"
cat >"$W/manifests/mapp.yaml" <<EOF
module: mapp
env: {M_USER: "", M_PASSWORD: ""}
requires:
  db:
    type: mariadb-database
    from: mariadb
    env: {user: M_USER, password: M_PASSWORD}
EOF
tly apply "$W/manifests/mapp.yaml" >/dev/null
mdb_assign() {
	tly assign mariadb node-a --set host=127.0.0.1 \
		--set port="$TALLY_TEST_MARIADB_PORT" \
		--set admin-user="$TALLY_TEST_MARIADB_USER" "$@" \
		--secret admin-password <"$TALLY_TEST_MARIADB_PWFILE" >/dev/null ||
		t_fail "tally assign mariadb $*"
}

t_check "MariaDB: another CA's certificate refused, naming the reason"
mdb_assign --set tls=verify --set ca="$TALLY_TEST_CA_OTHER"
tly assign mapp node-a >/dev/null
t_tallyd_try
[ $T_RC -ne 0 ] || t_fail "tallyd --once trusted a MariaDB of another CA"
grep " warn: grant mapp" "$W/once.err" | grep -qi "certificate\|ssl" ||
	{ tail -n 5 "$W/once.err" >&2; t_fail "tallyd does not name the failed verification"; }
t_ok "$(grep -m1 ' warn: grant mapp' "$W/once.err" | sed 's/^.* \(warn\|error\|info\): //' | cut -c1-200)"

t_check "MariaDB: tls=verify with the right CA provisions; nothing in clear"
mdb_assign --set ca="$TALLY_TEST_CA"
t_capture "$W/mtls.pcap" "$TALLY_TEST_MARIADB_PORT"
t_tallyd_try
t_capture_end
[ $T_RC -eq 0 ] || { tail -n 5 "$W/once.err" >&2; t_fail "tallyd --once to MariaDB over verified TLS exited $T_RC"; }
mlogin=$(t_envget "$(t_envfile node-a mapp)" M_USER)
[ -n "$mlogin" ] || t_fail "no M_USER delivered"
! strings -n 6 "$W/mtls.pcap" | grep -q -e "${mlogin%_v*}" ||
	t_fail "the MariaDB user's name crossed the wire in clear over TLS"
# Over verified TLS: the user is REQUIRE SSL (12_tls_consumers_sql.sh).
mariadb -h 127.0.0.1 -P "$TALLY_TEST_MARIADB_PORT" -u "$mlogin" \
	--ssl --ssl-ca="$TALLY_TEST_CA" --ssl-verify-server-cert \
	-p"$(t_envget "$(t_envfile node-a mapp)" M_PASSWORD)" -e "SELECT 1" >/dev/null ||
	t_fail "the consumer cannot log in with the delivered credential"
tly status >"$W/st" 2>&1 || true
grep -q "reached at 127.0.0.1: TLS, verified" "$W/st" ||
	{ cat "$W/st" >&2; t_fail "status does not say MariaDB is reached by verified TLS"; }
t_ok "$mlogin provisioned over verified TLS; the consumer logs in"

t_check "the log verifies"
tly verify >/dev/null || t_fail "tally verify failed"
t_ok "chain intact"
