#!/bin/sh
# The test servers offer TLS beside what they did before (the harness part
# of "TLS to every provider"): one throwaway CA (tests/harness/ca.sh, the
# run's: lib.sh's TALLY_TEST_TLS_DIR) and every harness server started one after
# the other -- PostgreSQL, MariaDB, Redis, RabbitMQ (AMQP and management),
# Ceph radosgw, the OIDC provider -- each stopped before the next starts.
# For each:
#   - its TLS listener presents a certificate that verifies against the
#     harness CA for localhost and 127.0.0.1 (openssl s_client
#     -verify_return_error -verify_hostname localhost / -verify_ip,
#     -starttls postgres / mysql where the protocol upgrades in-band);
#   - a real client connects with verification (psql sslmode=verify-full,
#     mariadb --ssl-verify-server-cert, redis-cli --tls --cacert, an AMQP
#     login over amqps, curl --cacert for the management API, RGW, the
#     OIDC discovery document) and the server says the session is TLS
#     where it can (pg_stat_ssl, Ssl_version);
#   - the same clients refuse the server when given the other CA (the
#     positive control that verification is real);
#   - plaintext still works where it did (sslmode=disable, --skip-ssl, the
#     plain ports).
# First, the fixtures themselves: a server presenting the impostor
# certificate (the unrelated CA's, for localhost) and one presenting the
# wrong-host certificate (the right CA's, for wrong.example) are refused by
# a client trusting the harness CA (openssl s_server as the server).
# A server that cannot start with TLS fails the script, naming it.
. "$(dirname "$0")/lib.sh"

for _x_b in openssl curl redis-cli mariadb node python3; do
	command -v $_x_b >/dev/null 2>&1 || t_fail "$_x_b is missing (tools/deps.sh)"
done

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

MSH=$TALLY_SRC/tests/harness/mariadb.sh
OSH=$TALLY_SRC/tests/harness/oidc.sh
MDB=$W/mariadb
OIDC_DIR=$W/oidc
S_PID= _held_pid=
trap '_x_rc=$?; set +e
	[ -n "$S_PID" ] && kill "$S_PID" 2>/dev/null
	[ -n "$_held_pid" ] && kill "$_held_pid" 2>/dev/null
	sh "$OSH" stop "$OIDC_DIR" >/dev/null 2>&1
	sh "$MSH" stop "$MDB" >/dev/null 2>&1
	_r_stop; (exit $_x_rc); _t_cleanup' EXIT

# What every env file must name: the one CA of this script (the servers
# name it by its physical path).
mkdir -p "$TALLY_TEST_TLS_DIR"
CA=$(cd "$TALLY_TEST_TLS_DIR" && pwd -P)/ca.pem

# env_ca SERVER: the env file just sourced names the script's CA, and the
# other CA for the controls.
env_ca() {
	[ "${TALLY_TEST_CA:-}" = "$CA" ] ||
		t_fail "$1: its env file's TALLY_TEST_CA is '${TALLY_TEST_CA:-}', not $CA"
	[ -s "${TALLY_TEST_CA_OTHER:-}" ] ||
		t_fail "$1: its env file names no other CA (TALLY_TEST_CA_OTHER)"
	OTHER=$TALLY_TEST_CA_OTHER
}

# s_client SERVER PORT [STARTTLS]: a verified handshake with
# 127.0.0.1:PORT, once checking the name localhost and once the address
# 127.0.0.1, trusting the harness CA; then the same with the other CA
# must fail.
s_client() {
	_s_what=$1 _s_port=$2 _s_st=${3:-}
	set -- -connect "127.0.0.1:$_s_port" ${_s_st:+-starttls "$_s_st"} -verify_return_error
	openssl s_client "$@" -CAfile "$CA" -verify_hostname localhost \
		</dev/null >"$W/s_client.out" 2>&1 ||
		{ cat "$W/s_client.out" >&2; t_fail "$_s_what: no verified TLS handshake on port $_s_port for localhost"; }
	grep -q '^Verification: OK' "$W/s_client.out" &&
		grep -q '^Verified peername: localhost' "$W/s_client.out" ||
		{ cat "$W/s_client.out" >&2; t_fail "$_s_what: s_client did not report the verification for localhost"; }
	_s_ver=$(sed -n 's/^ *Protocol *: *//p; s/^New, \(TLSv[0-9.]*\),.*/\1/p' "$W/s_client.out" | head -n 1)
	openssl s_client "$@" -CAfile "$CA" -verify_ip 127.0.0.1 \
		</dev/null >"$W/s_client.out" 2>&1 ||
		{ cat "$W/s_client.out" >&2; t_fail "$_s_what: no verified TLS handshake on port $_s_port for 127.0.0.1"; }
	t_ok "$_s_what: port $_s_port${_s_st:+ (starttls $_s_st)}: $_s_ver, chain verified against the harness CA, for localhost and for 127.0.0.1"
	if openssl s_client "$@" -CAfile "$OTHER" -verify_hostname localhost \
		</dev/null >"$W/s_client.out" 2>&1; then
		t_fail "$_s_what: s_client trusting the other CA accepted port $_s_port"
	fi
	grep -q 'unable to get local issuer certificate\|self-signed certificate in certificate chain' \
		"$W/s_client.out" ||
		{ cat "$W/s_client.out" >&2; t_fail "$_s_what: s_client trusting the other CA failed, but not on the chain"; }
	t_ok "$_s_what: port $_s_port: refused when trusting the other CA ($(grep -o 'unable to get local issuer certificate\|self-signed certificate in certificate chain' "$W/s_client.out" | head -n 1))"
}

# refused WHAT PATTERN CMD...: CMD must fail, its output matching PATTERN
# (the reason: a certificate that does not verify, not anything else).
refused() {
	_f_what=$1 _f_pat=$2
	shift 2
	if "$@" >"$W/refused.out" 2>&1; then
		cat "$W/refused.out" >&2
		t_fail "$_f_what: accepted although the client trusts only the other CA"
	fi
	grep -q -i -e "$_f_pat" "$W/refused.out" ||
		{ cat "$W/refused.out" >&2; t_fail "$_f_what: failed, but not on the certificate (expected /$_f_pat/)"; }
	t_ok "$_f_what: refused with the other CA: $(grep -i -o -e "$_f_pat" "$W/refused.out" | head -n 1)"
}

t_say "the harness CA's fixtures: an impostor and a wrong host are refused"
t_check "ca.sh make made the CA, its fixtures and nothing on stdout; keys 0600"
_x_out=$(sh "$TALLY_SRC/tests/harness/ca.sh" make "$TALLY_TEST_TLS_DIR" fixture 2>&1) ||
	t_fail "ca.sh make failed: $_x_out"
[ -z "$_x_out" ] || t_fail "ca.sh make printed something: $_x_out"
. "$TALLY_TEST_TLS_DIR/env"
env_ca "ca.sh"
for _x_k in "$TALLY_TEST_TLS_DIR"/*.key; do
	[ "$(stat -c %a "$_x_k")" = 600 ] || t_fail "$_x_k is mode $(stat -c %a "$_x_k"), not 0600"
done
openssl x509 -in "$CA" -noout -checkend 0 >/dev/null &&
	! openssl x509 -in "$CA" -noout -checkend 90000 >/dev/null ||
	t_fail "the CA is not valid for at most a day from now"
_x_sum=$(cat "$TALLY_TEST_TLS_DIR"/*.pem | cksum)
sh "$TALLY_SRC/tests/harness/ca.sh" make "$TALLY_TEST_TLS_DIR" fixture ||
	t_fail "ca.sh make failed the second time"
[ "$(cat "$TALLY_TEST_TLS_DIR"/*.pem | cksum)" = "$_x_sum" ] ||
	t_fail "ca.sh make is not idempotent: the certificates changed"
t_ok "CA $(openssl x509 -in "$CA" -noout -subject | sed 's/^subject= *//'), valid until $(openssl x509 -in "$CA" -noout -enddate | cut -d= -f2); a second make changed nothing"

# s_server_with CERT KEY: openssl s_server on a free port ($S_PORT).
s_server_with() {
	t_s_server "$W/s_server.out" "$1" "$2" -naccept 2 -quiet
	S_PORT=$T_SRV_PORT S_PID=$T_SRV_PID
}
s_server_done() { kill "$S_PID" 2>/dev/null || true; wait "$S_PID" 2>/dev/null || true; S_PID=; }

t_check "a server presenting the unrelated CA's certificate for localhost"
s_server_with "$TALLY_TEST_CA_IMPOSTOR_CERT" "$TALLY_TEST_CA_IMPOSTOR_KEY"
if openssl s_client -connect "127.0.0.1:$S_PORT" -CAfile "$CA" -verify_return_error \
	-verify_hostname localhost </dev/null >"$W/s_client.out" 2>&1; then
	t_fail "a client trusting the harness CA accepted the impostor"
fi
grep -q 'unable to get local issuer certificate' "$W/s_client.out" ||
	{ cat "$W/s_client.out" >&2; t_fail "the impostor was refused, but not for its chain"; }
openssl s_client -connect "127.0.0.1:$S_PORT" -CAfile "$OTHER" -verify_return_error \
	-verify_hostname localhost </dev/null >"$W/s_client.out" 2>&1 ||
	{ cat "$W/s_client.out" >&2; t_fail "the impostor does not even verify against its own CA"; }
s_server_done
t_ok "refused (unable to get local issuer certificate); it does verify against the other CA"

t_check "a server presenting the right CA's certificate for wrong.example"
s_server_with "$TALLY_TEST_CA_WRONGHOST_CERT" "$TALLY_TEST_CA_WRONGHOST_KEY"
if openssl s_client -connect "127.0.0.1:$S_PORT" -CAfile "$CA" -verify_return_error \
	-verify_hostname localhost </dev/null >"$W/s_client.out" 2>&1; then
	t_fail "a client checking the name localhost accepted the wrong-host certificate"
fi
grep -q 'hostname mismatch' "$W/s_client.out" ||
	{ cat "$W/s_client.out" >&2; t_fail "the wrong host was refused, but not for its name"; }
openssl s_client -connect "127.0.0.1:$S_PORT" -CAfile "$CA" -verify_return_error \
	-verify_hostname wrong.example </dev/null >"$W/s_client.out" 2>&1 ||
	{ cat "$W/s_client.out" >&2; t_fail "the wrong-host certificate does not verify for wrong.example"; }
s_server_done
t_ok "refused for localhost (hostname mismatch); it verifies for wrong.example"

# --- PostgreSQL ----------------------------------------------------------

t_say "PostgreSQL: TLS on its port beside plaintext"
t_pg_start
env_ca PostgreSQL
[ "$TALLY_TEST_PG_CA" = "$CA" ] || t_fail "PostgreSQL: TALLY_TEST_PG_CA is $TALLY_TEST_PG_CA"
PGPASSWORD=$(cat "$TALLY_TEST_PG_PWFILE")
export PGPASSWORD
t_check "openssl s_client -starttls postgres"
s_client PostgreSQL "$TALLY_TEST_PG_PORT" postgres
pgq() {	# CONNINFO: what the server says of this session's TLS
	psql -X -At -v ON_ERROR_STOP=1 "$1 port=$TALLY_TEST_PG_PORT user=$TALLY_TEST_PG_USER dbname=postgres" \
		-c "select ssl, coalesce(version, '') from pg_stat_ssl where pid = pg_backend_pid()"
}
t_check "psql sslmode=verify-full sslrootcert=CA, by name and by address"
for _x_h in "host=localhost" "host=127.0.0.1"; do
	_x_r=$(pgq "sslmode=verify-full sslrootcert=$CA $_x_h" 2>"$W/psql.err") ||
		{ cat "$W/psql.err" >&2; t_fail "PostgreSQL: psql verify-full ($_x_h) did not connect"; }
	case $_x_r in t\|TLS*) ;; *) t_fail "PostgreSQL: psql verify-full ($_x_h): pg_stat_ssl says '$_x_r'" ;; esac
	t_ok "PostgreSQL: $_x_h verify-full: pg_stat_ssl ssl=t, $(echo "$_x_r" | cut -d'|' -f2)"
done
refused "PostgreSQL: psql verify-full" "certificate verify failed" \
	pgq "sslmode=verify-full sslrootcert=$OTHER host=localhost"
t_check "plaintext still works (sslmode=disable)"
_x_r=$(pgq "sslmode=disable host=127.0.0.1") || t_fail "PostgreSQL: plaintext (sslmode=disable) did not connect"
[ "$_x_r" = "f|" ] || t_fail "PostgreSQL: sslmode=disable: pg_stat_ssl says '$_x_r'"
t_ok "PostgreSQL: sslmode=disable connects; pg_stat_ssl ssl=f"
unset PGPASSWORD
sh "$T_PGSH" stop "$PG_DIR" || t_fail "PostgreSQL: stop failed"

# --- MariaDB -------------------------------------------------------------

t_say "MariaDB: TLS on its port beside plaintext"
_m_port=$((57380 + $$ % 97))
_m_try=0
until { while _t_port_busy "$_m_port"; do _m_port=$((_m_port + 1)); done
	sh "$MSH" start "$MDB" "$_m_port" 2>>"$W/mariadb.start"; }; do
	_m_try=$((_m_try + 1))
	[ $_m_try -lt 5 ] || { cat "$W/mariadb.start" >&2; t_fail "MariaDB could not be started with TLS (see above)"; }
	_m_port=$((_m_port + 1))
done
. "$MDB/env"
env_ca MariaDB
[ "$TALLY_TEST_MARIADB_CA" = "$CA" ] || t_fail "MariaDB: TALLY_TEST_MARIADB_CA is $TALLY_TEST_MARIADB_CA"
MPW=$(cat "$TALLY_TEST_MARIADB_PWFILE")
t_check "openssl s_client -starttls mysql"
s_client MariaDB "$TALLY_TEST_MARIADB_PORT" mysql
mq() {	# HOST OPTIONS...: Ssl_version of this session
	_q_h=$1; shift
	_q_o=$(mariadb --no-defaults --protocol=tcp -h "$_q_h" -P "$TALLY_TEST_MARIADB_PORT" \
		-u "$TALLY_TEST_MARIADB_USER" -p"$MPW" "$@" -N -B \
		-e "show session status like 'Ssl_version'") || return 1
	printf '%s\n' "$_q_o" | cut -f2
}
t_check "mariadb --ssl-verify-server-cert --ssl-ca=CA, by name and by address"
for _x_h in localhost 127.0.0.1; do
	_x_r=$(mq "$_x_h" --ssl --ssl-verify-server-cert --ssl-ca="$CA" 2>"$W/mariadb.err") ||
		{ cat "$W/mariadb.err" >&2; t_fail "MariaDB: verified connection to $_x_h failed"; }
	case $_x_r in TLS*) ;; *) t_fail "MariaDB: verified connection to $_x_h: Ssl_version '$_x_r'" ;; esac
	t_ok "MariaDB: $_x_h, server certificate verified: Ssl_version $_x_r"
done
refused "MariaDB: mariadb --ssl-verify-server-cert" "TLS/SSL error: .*certificate.*" \
	mq localhost --ssl --ssl-verify-server-cert --ssl-ca="$OTHER"
t_check "plaintext still works (--skip-ssl)"
_x_r=$(mq 127.0.0.1 --skip-ssl) || t_fail "MariaDB: plaintext (--skip-ssl) did not connect"
[ -z "$_x_r" ] || t_fail "MariaDB: --skip-ssl: Ssl_version '$_x_r'"
t_ok "MariaDB: --skip-ssl connects; Ssl_version empty"
sh "$MSH" stop "$MDB" || t_fail "MariaDB: stop failed"

# --- Redis ---------------------------------------------------------------

t_say "Redis: a TLS port beside the plaintext one"
t_redis_start
env_ca Redis
[ -n "${TALLY_TEST_REDIS_TLS_PORT:-}" ] || t_fail "Redis: its env file has no TALLY_TEST_REDIS_TLS_PORT"
[ "$TALLY_TEST_REDIS_CA" = "$CA" ] || t_fail "Redis: TALLY_TEST_REDIS_CA is $TALLY_TEST_REDIS_CA"
RPW=$(cat "$TALLY_TEST_REDIS_PWFILE")
t_check "openssl s_client"
s_client Redis "$TALLY_TEST_REDIS_TLS_PORT"
rping() {	# HOST PORT OPTIONS...
	_q_h=$1 _q_p=$2; shift 2
	redis-cli -h "$_q_h" -p "$_q_p" "$@" --user "$TALLY_TEST_REDIS_USER" --pass "$RPW" \
		--no-auth-warning ping
}
t_check "redis-cli --tls --cacert CA, by name and by address"
for _x_h in localhost 127.0.0.1; do
	_x_r=$(rping "$_x_h" "$TALLY_TEST_REDIS_TLS_PORT" --tls --cacert "$CA" 2>&1) || true
	[ "$_x_r" = PONG ] || t_fail "Redis: redis-cli --tls to $_x_h:$TALLY_TEST_REDIS_TLS_PORT: '$_x_r'"
	t_ok "Redis: $_x_h:$TALLY_TEST_REDIS_TLS_PORT over verified TLS: PONG"
done
refused "Redis: redis-cli --tls" "certificate verify failed" \
	rping localhost "$TALLY_TEST_REDIS_TLS_PORT" --tls --cacert "$OTHER"
t_check "plaintext still works on the plain port"
[ "$(rping 127.0.0.1 "$TALLY_TEST_REDIS_PORT")" = PONG ] ||
	t_fail "Redis: plaintext on $TALLY_TEST_REDIS_PORT does not answer"
t_ok "Redis: plaintext on $TALLY_TEST_REDIS_PORT: PONG"
sh "$TALLY_SRC/tests/harness/redis.sh" stop "$REDIS_DIR" || t_fail "Redis: stop failed"

# --- RabbitMQ ------------------------------------------------------------

t_say "RabbitMQ: amqps and https management beside AMQP and http"
r_start
env_ca RabbitMQ
[ -n "${TALLY_TEST_AMQP_TLS_PORT:-}" ] && [ -n "${TALLY_TEST_AMQP_MGMT_TLS_PORT:-}" ] ||
	t_fail "RabbitMQ: its env file lacks TALLY_TEST_AMQP_TLS_PORT or _MGMT_TLS_PORT"
[ "$TALLY_TEST_AMQP_CA" = "$CA" ] || t_fail "RabbitMQ: TALLY_TEST_AMQP_CA is $TALLY_TEST_AMQP_CA"
[ "$TALLY_TEST_AMQP_TLS_PORT" -ge 61000 ] && [ "$TALLY_TEST_AMQP_MGMT_TLS_PORT" -ge 61000 ] ||
	t_fail "RabbitMQ: TLS ports below 61000 (a restart could find them taken)"
t_check "openssl s_client on amqps and on https"
s_client "RabbitMQ amqps" "$TALLY_TEST_AMQP_TLS_PORT"
s_client "RabbitMQ management https" "$TALLY_TEST_AMQP_MGMT_TLS_PORT"
AL=$TALLY_SRC/tests/harness/amqp_login.py
t_check "an AMQP login over amqps, verified, by name and by address"
for _x_h in localhost 127.0.0.1; do
	AMQP_LOGIN_CAFILE=$CA python3 "$AL" \
		"amqps://$TALLY_TEST_AMQP_USER:$TALLY_TEST_AMQP_PASSWORD@$_x_h:$TALLY_TEST_AMQP_TLS_PORT/%2f" \
		>"$W/amqp.out" 2>&1 || { cat "$W/amqp.out" >&2; t_fail "RabbitMQ: amqps login to $_x_h failed"; }
	t_ok "RabbitMQ: amqps://$_x_h:$TALLY_TEST_AMQP_TLS_PORT: verified, logged in, vhost / opened"
done
refused "RabbitMQ: amqps login" "certificate verify failed" env AMQP_LOGIN_CAFILE="$OTHER" python3 "$AL" \
	"amqps://$TALLY_TEST_AMQP_USER:$TALLY_TEST_AMQP_PASSWORD@localhost:$TALLY_TEST_AMQP_TLS_PORT/%2f"
t_check "curl --cacert CA on the management API over https"
for _x_h in localhost 127.0.0.1; do
	_x_r=$(curl -fsS --cacert "$CA" -u "$TALLY_TEST_AMQP_USER:$TALLY_TEST_AMQP_PASSWORD" \
		"https://$_x_h:$TALLY_TEST_AMQP_MGMT_TLS_PORT/api/overview" 2>&1) ||
		t_fail "RabbitMQ: https management on $_x_h: $_x_r"
	_x_v=$(printf '%s' "$_x_r" | sed -n 's/.*"rabbitmq_version":"\([^"]*\)".*/\1/p')
	[ -n "$_x_v" ] || t_fail "RabbitMQ: https management on $_x_h answered no overview: $_x_r"
	t_ok "RabbitMQ: https://$_x_h:$TALLY_TEST_AMQP_MGMT_TLS_PORT/api/overview: rabbitmq_version $_x_v"
done
refused "RabbitMQ: curl https management" "SSL certificate problem: .*" \
	curl -fsS --cacert "$OTHER" -u "$TALLY_TEST_AMQP_USER:$TALLY_TEST_AMQP_PASSWORD" \
	"https://localhost:$TALLY_TEST_AMQP_MGMT_TLS_PORT/api/overview"
t_check "plaintext still works: AMQP and the http management API"
python3 "$AL" "amqp://$TALLY_TEST_AMQP_USER:$TALLY_TEST_AMQP_PASSWORD@127.0.0.1:$TALLY_TEST_AMQP_PORT/%2f" \
	>"$W/amqp.out" 2>&1 || { cat "$W/amqp.out" >&2; t_fail "RabbitMQ: plaintext AMQP login failed"; }
api GET /overview >/dev/null || t_fail "RabbitMQ: the http management API does not answer"
t_ok "RabbitMQ: amqp://127.0.0.1:$TALLY_TEST_AMQP_PORT login and http://127.0.0.1:$TALLY_TEST_AMQP_MGMT_PORT/api/overview"
_r_stop

# --- Ceph radosgw --------------------------------------------------------

t_say "Ceph radosgw: beast's ssl_endpoint beside the plain endpoint"
_x_t0=$(date +%s)
t_ceph_start
t_note "Ceph started in $(($(date +%s) - _x_t0)) s"
env_ca "Ceph radosgw"
[ -n "${TALLY_TEST_RGW_TLS_PORT:-}" ] || t_fail "Ceph radosgw: its env file has no TALLY_TEST_RGW_TLS_PORT"
[ "$TALLY_TEST_RGW_CA" = "$CA" ] || t_fail "Ceph radosgw: TALLY_TEST_RGW_CA is $TALLY_TEST_RGW_CA"
t_check "openssl s_client"
s_client "Ceph radosgw" "$TALLY_TEST_RGW_TLS_PORT"
RSK=$(cat "$TALLY_TEST_RGW_SECRETFILE")
t_check "curl --cacert CA: an S3 request signed by the admin (SigV4), by name and by address"
for _x_h in localhost 127.0.0.1; do
	_x_r=$(curl -fsS --cacert "$CA" --aws-sigv4 "aws:amz:default:s3" \
		--user "$TALLY_TEST_RGW_ACCESS:$RSK" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
		"https://$_x_h:$TALLY_TEST_RGW_TLS_PORT/" 2>&1) ||
		t_fail "Ceph radosgw: https S3 request to $_x_h: $_x_r"
	printf '%s' "$_x_r" | grep -q '<ID>tally-admin</ID>' ||
		t_fail "Ceph radosgw: https S3 request to $_x_h did not list the admin's buckets: $_x_r"
	t_ok "Ceph radosgw: https://$_x_h:$TALLY_TEST_RGW_TLS_PORT/ ListAllMyBuckets as tally-admin"
done
refused "Ceph radosgw: curl https" "SSL certificate problem: .*" \
	curl -fsS --cacert "$OTHER" "https://localhost:$TALLY_TEST_RGW_TLS_PORT/"
t_check "plaintext still works on the plain endpoint"
curl -fsS --aws-sigv4 "aws:amz:default:s3" --user "$TALLY_TEST_RGW_ACCESS:$RSK" \
	-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$TALLY_TEST_RGW_ENDPOINT/" |
	grep -q '<ID>tally-admin</ID>' || t_fail "Ceph radosgw: the plain endpoint does not answer"
t_ok "Ceph radosgw: $TALLY_TEST_RGW_ENDPOINT/ ListAllMyBuckets as tally-admin"
sh "$TALLY_SRC/tests/harness/ceph.sh" stop "$CEPH_DIR" || t_fail "Ceph radosgw: stop failed"

# --- the OIDC provider ---------------------------------------------------

t_say "the OIDC provider: https beside http"
# Below the ephemeral range (32768-) and the other harnesses' blocks
# (Ceph 12000-21599, etcd 26000-31799): a client's connection in another
# script took 57534 between the check and node's listen once (make check).
_o_port=$((23500 + $$ % 50))
while _t_port_busy "$_o_port" || _t_port_busy $((_o_port + 1)); do _o_port=$((_o_port + 1)); done
# The port above the plain one is held by a connected socket that does not
# listen (an ephemeral port some client got): the harness must not take it
# for free (CI: "listen EADDRINUSE" on the https port, no OIDC provider).
python3 - "$_o_port" "$W/held" <<'PYEOF' &
import socket, sys, time
p = int(sys.argv[1]) + 1
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.socket(); c.bind(("127.0.0.1", p)); c.connect(l.getsockname())
a, _ = l.accept()
open(sys.argv[2], "w").write("%d\n" % p)
time.sleep(120)
PYEOF
_held_pid=$!
i=0; while [ ! -s "$W/held" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -s "$W/held" ] || t_fail "could not hold port $((_o_port + 1)) with a connected socket"
sh "$OSH" start "$OIDC_DIR" "$_o_port" ||
	t_fail "the OIDC provider could not be started with TLS (tests/harness/oidc.sh, see above), port $((_o_port + 1)) held by a client"
kill "$_held_pid" 2>/dev/null; wait "$_held_pid" 2>/dev/null || :; _held_pid=
. "$OIDC_DIR/env"
[ "$TALLY_TEST_OIDC_TLS_PORT" != $((_o_port + 1)) ] ||
	t_fail "OIDC provider: https on $TALLY_TEST_OIDC_TLS_PORT, a port a client held"
env_ca "OIDC provider"
[ -n "${TALLY_TEST_OIDC_TLS_PORT:-}" ] || t_fail "OIDC provider: its env file has no TALLY_TEST_OIDC_TLS_PORT"
[ "$TALLY_TEST_OIDC_CA" = "$CA" ] || t_fail "OIDC provider: TALLY_TEST_OIDC_CA is $TALLY_TEST_OIDC_CA"
t_check "openssl s_client"
s_client "OIDC provider" "$TALLY_TEST_OIDC_TLS_PORT"
issuer_of() { sed -n 's/.*"issuer":"\([^"]*\)".*/\1/p'; }
t_check "curl --cacert CA: the discovery document over https, by name and by address"
for _x_h in localhost 127.0.0.1; do
	_x_r=$(curl -fsS --cacert "$CA" \
		"https://$_x_h:$TALLY_TEST_OIDC_TLS_PORT/.well-known/openid-configuration" 2>&1) ||
		t_fail "OIDC provider: https discovery on $_x_h: $_x_r"
	[ "$(printf '%s' "$_x_r" | issuer_of)" = "$TALLY_TEST_OIDC_TLS_ISSUER" ] ||
		t_fail "OIDC provider: https discovery's issuer is not $TALLY_TEST_OIDC_TLS_ISSUER: $_x_r"
	t_ok "OIDC provider: https://$_x_h:$TALLY_TEST_OIDC_TLS_PORT/.well-known/openid-configuration: issuer $TALLY_TEST_OIDC_TLS_ISSUER"
done
t_check "a client registered over https (RFC 7591, the initial access token)"
_x_r=$(curl -fsS --cacert "$CA" -X POST -H "authorization: Bearer $(cat "$TALLY_TEST_OIDC_IATFILE")" \
	-H 'content-type: application/json' \
	-d '{"client_name":"tls","grant_types":["client_credentials"],"response_types":[],"token_endpoint_auth_method":"client_secret_basic"}' \
	"https://localhost:$TALLY_TEST_OIDC_TLS_PORT/reg" 2>&1) || t_fail "OIDC provider: registration over https: $_x_r"
printf '%s' "$_x_r" | grep -q '"client_secret":"' ||
	t_fail "OIDC provider: registration over https returned no client: $_x_r"
t_ok "OIDC provider: 201 with a client_id and client_secret"
refused "OIDC provider: curl https" "SSL certificate problem: .*" \
	curl -fsS --cacert "$OTHER" "https://localhost:$TALLY_TEST_OIDC_TLS_PORT/.well-known/openid-configuration"
t_check "plaintext still works on the http port"
_x_r=$(curl -fsS "$TALLY_TEST_OIDC_ISSUER/.well-known/openid-configuration") ||
	t_fail "OIDC provider: http discovery failed"
[ "$(printf '%s' "$_x_r" | issuer_of)" = "$TALLY_TEST_OIDC_ISSUER" ] ||
	t_fail "OIDC provider: http discovery's issuer is not $TALLY_TEST_OIDC_ISSUER"
t_ok "OIDC provider: $TALLY_TEST_OIDC_ISSUER/.well-known/openid-configuration: issuer $TALLY_TEST_OIDC_ISSUER"
sh "$OSH" stop "$OIDC_DIR" || t_fail "OIDC provider: stop failed"
