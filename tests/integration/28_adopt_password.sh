#!/bin/sh
# tally adopt --password-stdin on PostgreSQL: the password the adopted
# login's holders use is given only to find whether they work.
#   - refused, nothing appended: with --secret-stdin, an empty line, a
#     password longer than tally's (128), a directory grant (no
#     credential to try), an OAuth client (the provider chooses the
#     credential: --secret-stdin alone), an S3 bucket (its credential is
#     a key pair);
#   - sealed: grant.adopted carries it as a secret; the plaintext is in
#     neither tally log --json nor the log's file;
#   - tried once at the takeover: a holder whose password is the
#     server's is "working", the seeds' frozen password (the holder's
#     stored one diverged from the server's) "failing", in
#     grant.provisioned, tallyd's log and tally status (text and
#     --json); never delivered (only v2 is), never the grant's;
#   - the frozen holder ends with one working credential: tally's v2
#     delivered and acknowledged, the adopted login dropped, the stale
#     password refused as before; the working holder likewise;
#   - the same verdicts on MariaDB (a user and its database), Redis (an
#     ACL user with two passwords: either is the holders' when it is one
#     of them) and RabbitMQ (a vhost and its user, tried over AMQP),
#     through each driver's own check;
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

# as LOGIN PASSWORD DB: one query over TCP.
as() {
	PGPASSWORD=$2 PGCONNECT_TIMEOUT=5 psql -X -At -q -v ON_ERROR_STOP=1 \
		-h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" -U "$1" -d "$3" \
		-c "SELECT count(*) FROM t"
}

t_say "throwaway PostgreSQL; two databases made by hand, one holder's password frozen"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a network
for x in keeper frozen; do
	t_sql "CREATE ROLE $x LOGIN PASSWORD '$x-real'" >/dev/null
	t_sql "CREATE DATABASE ${x}db OWNER $x" >/dev/null
	PGPASSWORD=$x-real psql -X -q -h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" \
		-U $x -d ${x}db -c "CREATE TABLE t AS SELECT generate_series(1, 100) g" \
		>/dev/null || t_fail "$x cannot make its table"
	tly apply "$(t_consumer $x shared)" >/dev/null || t_fail "tally apply $x failed"
done
as frozen frozen-stale frozendb >/dev/null 2>&1 && t_fail "the stale password connects"
t_ok "keeperdb (keeper/keeper-real), frozendb (frozen/frozen-real; its holder has frozen-stale)"

t_check "refusals append nothing"
cp "$TALLY_SRC/examples/download.yaml" "$W/download.yaml"
tly apply "$W/download.yaml" >/dev/null
tly apply "$(t_dir_consumer files)" >/dev/null
mkdir -p "$W/manifests"
cat >"$W/manifests/idp.yaml" <<EOF
module: idp
provides:
  oidc-client:
    driver: oidc
EOF
cat >"$W/manifests/web.yaml" <<EOF
module: web
env: {O_ID: "", O_SECRET: ""}
requires:
  login:
    type: oidc-client
    from: idp
    env: {client-id: O_ID, client-secret: O_SECRET}
EOF
printf '%s\n' 'module: store' 'provides:' '  s3-bucket:' '    driver: ceph-rgw' \
	>"$W/manifests/store.yaml"
printf '%s\n' 'module: pics' 'env: {S3_SECRET_KEY: ""}' 'requires:' '  files:' \
	'    type: s3-bucket' '    from: store' '    env: {secret-key: S3_SECRET_KEY}' \
	>"$W/manifests/pics.yaml"
tly apply "$W/manifests/store.yaml" >/dev/null || t_fail "tally apply store failed"
tly apply "$W/manifests/pics.yaml" >/dev/null || t_fail "tally apply pics failed"
tly apply "$W/manifests/idp.yaml" >/dev/null || t_fail "tally apply idp failed"
tly apply "$W/manifests/web.yaml" >/dev/null || t_fail "tally apply web failed"
before=$(t_head_seq)
# adopt_pw LINE ARGS...: tally adopt ARGS --password-stdin, LINE on stdin.
adopt_pw() {
	_l=$1
	shift
	printf '%s\n' "$_l" | "$TALLY_BIN/tally" adopt "$@" --password-stdin
}
t_expect_exit 2 "--password-stdin with --secret-stdin" \
	adopt_pw keeper-real keeper/db --resource keeperdb --login keeper --secret-stdin
t_expect_exit 2 "--password-stdin with an empty line" \
	adopt_pw "" keeper/db --resource keeperdb --login keeper
grep -q "no password on standard input" "$W/last.err" || t_fail "empty: $(cat "$W/last.err")"
t_expect_exit 2 "--password-stdin with 129 bytes" \
	adopt_pw "$(head -c 129 /dev/zero | tr '\0' x)" keeper/db --resource keeperdb --login keeper
grep -q "longer than 128 bytes" "$W/last.err" || t_fail "129 bytes: $(cat "$W/last.err")"
t_expect_exit 4 "--password-stdin for a directory grant" \
	adopt_pw x files/files --resource some-dir
grep -q "no credential to try" "$W/last.err" || t_fail "directory: $(cat "$W/last.err")"
t_expect_exit 4 "--password-stdin for an OAuth client" \
	adopt_pw x web/login --resource some-client
grep -q "driver oidc cannot try the password" "$W/last.err" || t_fail "oidc: $(cat "$W/last.err")"
t_expect_exit 4 "--password-stdin for an S3 bucket (a key pair, not a password)" \
	adopt_pw x pics/files --resource some-bucket --login some-user
grep -q "driver ceph-rgw cannot try the password" "$W/last.err" || t_fail "rgw: $(cat "$W/last.err")"
[ "$(t_head_seq)" = "$before" ] || t_fail "a refused adopt appended events"
t_ok "exit 2 (with --secret-stdin, empty, 129 bytes); exit 4 (directory, OAuth client, S3 bucket)"

t_say "tally adopt --password-stdin: keeper's holders give the server's, frozen's their stale one"
adopt_pw keeper-real keeper/db --resource keeperdb --login keeper >/dev/null ||
	t_fail "tally adopt keeper/db failed"
adopt_pw frozen-stale frozen/db --resource frozendb --login frozen >/dev/null ||
	t_fail "tally adopt frozen/db failed"
t_check "sealed: a secret of grant.adopted, in clear nowhere"
tly log --json --stream grant/keeper/db --type grant.adopted >"$W/adopted.json"
grep -q '"password"' "$W/adopted.json" || t_fail "grant.adopted has no password: $(cat "$W/adopted.json")"
tly log --json >"$W/all.json"
for p in keeper-real frozen-stale; do
	grep -q "$p" "$W/all.json" && t_fail "tally log --json shows $p"
	grep -rqa "$p" "$TALLY_HOME" && t_fail "$p is in clear under $TALLY_HOME"
done
t_ok "grant.adopted {…, password(secret)}; neither password in the log or the home"

tly assign keeper node-a >/dev/null || t_fail "tally assign keeper failed"
tly assign frozen node-a >/dev/null || t_fail "tally assign frozen failed"
t_tallyd_start --interval 1
t_grant_wait 30 keeper/db grant.provisioned '"holders":"working"' >/dev/null
t_grant_wait 30 frozen/db grant.provisioned '"holders":"failing"' >/dev/null
tly log --json --stream grant/frozen/db --type grant.provisioned |
	grep -q '"holders_why":"credential: login .*does not authenticate' ||
	t_fail "no holders_why naming the failed login: $(tly log --json --stream grant/frozen/db --type grant.provisioned)"
grep -q "grant keeper/db: the holders' password (tally adopt --password-stdin) works" "$T_DLOG" ||
	t_fail "tallyd does not say keeper's holders work"
grep -q "grant frozen/db: the holders' password (tally adopt --password-stdin) fails; they are down" "$T_DLOG" ||
	t_fail "tallyd does not say frozen's holders fail"
tly status keeper >"$W/st.keeper" 2>&1 || true
tly status frozen >"$W/st.frozen" 2>&1 || true
grep -q "the holders' password (--password-stdin) worked when it was taken over" "$W/st.keeper" || {
	cat "$W/st.keeper" >&2
	t_fail "status keeper does not say the holders worked"
}
grep -q "the holders' password (--password-stdin) failed: they are down until tally's credential reaches them" "$W/st.frozen" || {
	cat "$W/st.frozen" >&2
	t_fail "status frozen does not say the holders failed"
}
tly status frozen --json | grep -q '"adopted":{[^}]*"holders":"failing"' ||
	t_fail "status --json: $(tly status frozen --json)"
t_ok "keeper: working; frozen: failing (grant.provisioned, tallyd, status)"

t_check "never delivered, never the grant's: v2 is tally's"
for x in keeper frozen; do
	t_grant_wait 30 $x/db credential.delivered '"version":2' >/dev/null
	tly log --json --stream "grant/$x/db" --type credential.delivered |
		grep -q '"body":{[^}]*"version":1[,}]' && t_fail "a credential.delivered of $x's v1"
	f=$(t_envfile node-a $x)
	case $(t_envget "$f" DB_PASSWORD) in
	''|keeper-real|frozen-stale|frozen-real) t_fail "$x's DB_PASSWORD is not tally's" ;;
	esac
	[ "$(t_env_psql "$f" "SELECT count(*) FROM t")" = 100 ] || t_fail "$x's v2 does not read the data"
done
t_ok "only v2 delivered; it reads both databases"

t_say "the holders acknowledge v2: one working credential each"
tly ack node-a keeper 2 >/dev/null || t_fail "tally ack keeper failed"
tly ack node-a frozen 2 >/dev/null || t_fail "tally ack frozen failed"
for x in keeper frozen; do
	t_grant_wait 30 $x/db credential.retired "\"user\":\"$x\"" >/dev/null
	t_grant_wait 10 $x/db rotation.completed >/dev/null
	as $x $x-real ${x}db >/dev/null 2>&1 && t_fail "$x's adopted password still connects"
	f=$(t_envfile node-a $x)
	[ "$(t_env_psql "$f" "SELECT count(*) FROM t")" = 100 ] || t_fail "$x's v2 stopped working"
done
as frozen frozen-stale frozendb >/dev/null 2>&1 && t_fail "the stale password connects"
t_wait_healthy 30 frozen
t_ok "keeper, frozen: the adopted logins refused, v2 works; frozen-stale still refused"

t_say "MariaDB, Redis and RabbitMQ: the same verdicts through their drivers' checks"
. "$(dirname "$0")/rabbit-lib.sh"
t_mariadb_start
t_redis_start
r_start
MPW=$(cat "$TALLY_TEST_MARIADB_PWFILE")
msql() {
	mariadb --no-defaults -h127.0.0.1 -P"$TALLY_TEST_MARIADB_PORT" \
		-u"$TALLY_TEST_MARIADB_USER" -p"$MPW" -N -B -e "$1"
}
radm() {
	redis-cli --tls --cacert "$TALLY_TEST_CA" -h localhost \
		-p "$TALLY_TEST_REDIS_TLS_PORT" --user admin \
		--pass "$(cat "$TALLY_TEST_REDIS_PWFILE")" --no-auth-warning "$@"
}
printf 'module: mariadb\nprovides:\n  mariadb-database:\n    driver: mariadb\n    revoke: retain\n' \
	>"$W/manifests/mariadb.yaml"
printf 'module: cache\nprovides:\n  redis-user:\n    driver: redis\n    revoke: retain\n' \
	>"$W/manifests/cache.yaml"
tly apply "$W/manifests/mariadb.yaml" >/dev/null || t_fail "tally apply mariadb failed"
tly apply "$W/manifests/cache.yaml" >/dev/null || t_fail "tally apply cache failed"
printf '%s' "$MPW" | tly assign mariadb node-a --expose local \
	--set port="$TALLY_TEST_MARIADB_PORT" --set admin-user="$TALLY_TEST_MARIADB_USER" \
	--set tls=verify --set ca="$TALLY_TEST_CA" --secret admin-password >/dev/null ||
	t_fail "tally assign mariadb failed"
tly assign cache node-a --set host=localhost --set port="$TALLY_TEST_REDIS_TLS_PORT" \
	--set tls=verify --set ca="$TALLY_TEST_CA" --set admin-user=admin \
	--secret admin-password <"$TALLY_TEST_REDIS_PWFILE" >/dev/null ||
	t_fail "tally assign cache failed"
for x in mok mbad; do
	msql "CREATE DATABASE ${x}db; CREATE USER '$x'@'%' IDENTIFIED BY '$x-real';
		GRANT ALL PRIVILEGES ON ${x}db.* TO '$x'@'%'" || t_fail "the hand-made $x"
	printf '%s\n' "module: $x" 'env: {DB_USER: "", DB_PASSWORD: ""}' 'requires:' \
		'  db:' '    type: mariadb-database' '    from: mariadb' \
		'    env: {user: DB_USER, password: DB_PASSWORD}' >"$W/manifests/$x.yaml"
done
for x in rok rbad; do
	radm ACL SETUSER $x on ">$x-real" ">$x-two" "~$x:*" +@all >/dev/null ||
		t_fail "ACL SETUSER $x failed"
	printf '%s\n' "module: $x" 'env: {R_USER: "", R_PASSWORD: ""}' 'requires:' \
		'  cache:' '    type: redis-user' '    from: cache' \
		'    env: {user: R_USER, password: R_PASSWORD}' >"$W/manifests/$x.yaml"
done
r_provider node-a
for x in qok qbad; do
	api PUT "/vhosts/$x" '{"description":"made by hand"}' >/dev/null
	api PUT "/users/$x" "{\"password\":\"$x-real\",\"tags\":\"\"}" >/dev/null
	api PUT "/permissions/$x/$x" '{"configure":".*","write":".*","read":".*"}' >/dev/null
	printf '%s\n' "module: $x" 'env: {MQ_USER: "", MQ_PASSWORD: ""}' 'requires:' \
		'  mq:' '    type: rabbitmq-vhost' '    from: rabbitmq' \
		'    env: {user: MQ_USER, password: MQ_PASSWORD}' >"$W/manifests/$x.yaml"
done
for x in mok mbad rok rbad qok qbad; do
	tly apply "$W/manifests/$x.yaml" >/dev/null || t_fail "tally apply $x failed"
done
adopt_pw mok-real mok/db --resource mokdb --login mok >/dev/null || t_fail "adopt mok/db"
adopt_pw mbad-stale mbad/db --resource mbaddb --login mbad >/dev/null || t_fail "adopt mbad/db"
adopt_pw rok-two rok/cache --resource rok --login rok >/dev/null || t_fail "adopt rok/cache"
adopt_pw rbad-stale rbad/cache --resource rbad --login rbad >/dev/null || t_fail "adopt rbad/cache"
adopt_pw qok-real qok/mq --resource qok --login qok >/dev/null || t_fail "adopt qok/mq"
adopt_pw qbad-stale qbad/mq --resource qbad --login qbad >/dev/null || t_fail "adopt qbad/mq"
for x in mok mbad rok rbad qok qbad; do
	tly assign $x node-a >/dev/null || t_fail "tally assign $x failed"
done
t_grant_wait 30 mok/db grant.provisioned '"holders":"working"' >/dev/null
t_grant_wait 30 mbad/db grant.provisioned '"holders":"failing"' >/dev/null
t_grant_wait 30 rok/cache grant.provisioned '"holders":"working"' >/dev/null
t_grant_wait 30 rbad/cache grant.provisioned '"holders":"failing"' >/dev/null
t_grant_wait 30 qok/mq grant.provisioned '"holders":"working"' >/dev/null
t_grant_wait 30 qbad/mq grant.provisioned '"holders":"failing"' >/dev/null
for x in mok mbad rok rbad qok qbad; do
	tly status $x --json | grep -q '"adopted":{[^}]*"holders":"' ||
		t_fail "status --json of $x: no holders"
done
t_ok "MariaDB: mok working, mbad failing; Redis: rok (its second password) working, rbad failing; RabbitMQ: qok working, qbad failing"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
