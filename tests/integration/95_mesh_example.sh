#!/bin/sh
# examples/mesh/ for real (issue 13, "End to end"): seed 001's topology on
# three nodes, each with its own PostgreSQL, MariaDB, Redis and download
# root (instances: one-per-node, exposed local), one RabbitMQ for the mesh
# (instances: one-per-mesh, exposed network), and as one-per-mesh too a
# Ceph RGW (s3-bucket) and an OIDC provider (oidc-client); consumers shop
# and stock, each with seven requirements, on all three nodes.  Every
# server is a throwaway one of this script's (15 of them), stopped on exit
# whatever happens.  Shown, with assertions:
#   - provisioned and delivered on each node by its agent (tally-node
#     --log --once), each consumer's four stores from its own node's
#     servers and the vhost, bucket and client from the mesh's; every
#     delivered value connects (psql, mariadb, amqp_login.py, redis-cli,
#     the directory, a signed S3 PUT/GET, a client_credentials token),
#     and a node's credential does not open another node's server;
#   - verified: tally check --all healthy;
#   - rotated with acks: the shared vhost (three holders) and one store
#     per kind on different nodes; the agents ack with proof, the old
#     credential is retired, the new one logs in and the old is refused;
#   - stock removed: tally remove shows its vhost's queue and messages
#     and refuses without --yes; then --yes; purged: its objects gone on
#     every server (bucket, RGW user and OIDC client included), shop's
#     untouched;
#   - tally verify and tally rebuild --check at the end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rabbit-lib.sh"

NODES="node-a node-b node-c"
MESH=$TALLY_SRC/examples/mesh
MSH=$TALLY_SRC/tests/harness/mariadb.sh
LOGIN="python3 $TALLY_SRC/tests/harness/amqp_login.py"
MDBS=""
OIDC_DIR=$W/oidc
for c in mariadb redis-cli curl node; do
	command -v $c >/dev/null 2>&1 || t_fail "$c is missing (tools/deps.sh)"
done
# lib.sh's and rabbit-lib.sh's cleanup, after this script's MariaDBs.
trap '_x_rc=$?; set +e; for _x_d in $MDBS; do sh "$MSH" stop "$_x_d" >/dev/null 2>&1 ||
	echo "WARNING $T_NAME: stopping MariaDB in $_x_d failed" >&2; done
	sh "$TALLY_SRC/tests/harness/oidc.sh" stop "$OIDC_DIR" >/dev/null 2>&1 ||
	echo "WARNING $T_NAME: stopping the OIDC provider failed" >&2
	_r_stop; (exit $_x_rc); _t_cleanup' EXIT

# n NODE: its letter (the suffix of this script's per-node variables).
n() { echo "${1#node-}"; }
# get VAR: the value of the variable named VAR.
get() { eval "echo \"\$$1\""; }

t_say "fifteen throwaway servers: per node PostgreSQL, MariaDB, Redis, a root; one RabbitMQ, Ceph RGW, OIDC provider"
S0=$(t_now_ms)
r_start
t_ceph_start	# stopped by lib.sh's cleanup
RP=$TALLY_TEST_RGW_PORT
RADM="radosgw-admin -c $CEPH_DIR/ceph.conf -n client.rgw.a"
_o_port=$((57350 + $$ % 50))
_o_try=0
# Node loading oidc-provider can miss the harness's 5 s on a busy
# machine: a failed start tries again on the next port, as for MariaDB.
until { while _t_port_busy "$_o_port"; do _o_port=$((_o_port + 1)); done
	sh "$TALLY_SRC/tests/harness/oidc.sh" start "$OIDC_DIR" "$_o_port" 2>>"$W/oidc.start"; }; do
	_o_try=$((_o_try + 1))
	[ $_o_try -lt 3 ] || t_fail "the OIDC provider did not start (tests/harness/oidc.sh): $(tail -n 5 "$W/oidc.start")"
	_o_port=$((_o_port + 1))
done
. "$OIDC_DIR/env"
_m_port=$((57600 + $$ % 97))
_r_port=$((58100 + $$ % 97))
for node in $NODES; do
	x=$(n $node)
	t_pg_start "pg-$x"
	eval "PG_PORT_$x=\$TALLY_TEST_PG_PORT PG_SOCK_$x=\$TALLY_TEST_PG_SOCK"
	eval "PG_USER_$x=\$TALLY_TEST_PG_USER PG_PW_$x=\$TALLY_TEST_PG_PWFILE"
	# Not t_redis_start: a port free to look at can still refuse the
	# bind (an outgoing connection's local port), so any failed start
	# tries the next port, as for MariaDB below.
	_t_redises="$_t_redises $W/redis-$x"
	_r_try=0
	until { while _t_port_busy "$_r_port"; do _r_port=$((_r_port + 1)); done
		sh "$TALLY_SRC/tests/harness/redis.sh" start "$W/redis-$x" "$_r_port" \
			>>"$W/redis.start" 2>&1; }; do
		_r_try=$((_r_try + 1))
		[ $_r_try -lt 5 ] || t_fail "no Redis for $node: $(tail -n 5 "$W/redis.start")"
		_r_port=$((_r_port + 1))
	done
	. "$W/redis-$x/env"
	eval "R_PORT_$x=\$TALLY_TEST_REDIS_PORT R_PW_$x=\$TALLY_TEST_REDIS_PWFILE"
	_r_port=$((_r_port + 1))
	MDBS="$MDBS $W/mariadb-$x"
	_m_try=0
	until { while _t_port_busy "$_m_port"; do _m_port=$((_m_port + 1)); done
		sh "$MSH" start "$W/mariadb-$x" "$_m_port" 2>>"$W/mariadb.start"; }; do
		_m_try=$((_m_try + 1))
		[ $_m_try -lt 5 ] || t_fail "no MariaDB for $node: $(tail -n 5 "$W/mariadb.start")"
		_m_port=$((_m_port + 1))
	done
	. "$W/mariadb-$x/env"
	eval "M_PORT_$x=\$TALLY_TEST_MARIADB_PORT M_USER_$x=\$TALLY_TEST_MARIADB_USER"
	eval "M_PW_$x=\$TALLY_TEST_MARIADB_PWFILE"
	_m_port=$((_m_port + 1))
	mkdir -p "$W/root-$x"
done
t_ok "up in $(($(t_now_ms) - S0)) ms"

# Admin access to node X's servers.
pg_adm() {	# X SQL
	psql -X -At -q -v ON_ERROR_STOP=1 -h "$(get PG_SOCK_$1)" -p "$(get PG_PORT_$1)" \
		-U "$(get PG_USER_$1)" -d postgres -c "$2"
}
my_adm() {	# X SQL
	mariadb --no-defaults -h127.0.0.1 -P"$(get M_PORT_$1)" -u"$(get M_USER_$1)" \
		-p"$(cat "$(get M_PW_$1)")" -N -B -e "$2"
}
r_adm() {	# X CMD...
	_x=$1; shift
	redis-cli -h 127.0.0.1 -p "$(get R_PORT_$_x)" --user admin \
		--pass "$(cat "$(get R_PW_$_x)")" --no-auth-warning "$@"
}
esc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

# As the holder of the env file F (an agent's MODULE.env).
as_pg() {	# F SQL
	PGPASSWORD=$(t_envget "$1" PG_PASSWORD) psql -X -At -q -v ON_ERROR_STOP=1 \
		-h "$(t_envget "$1" PG_HOST)" -p "$(t_envget "$1" PG_PORT)" \
		-U "$(t_envget "$1" PG_USER)" -d "$(t_envget "$1" PG_DB)" -c "$2"
}
as_my() {	# F SQL
	mariadb --no-defaults -h"$(t_envget "$1" MY_HOST)" -P"$(t_envget "$1" MY_PORT)" \
		-u"$(t_envget "$1" MY_USER)" -p"$(t_envget "$1" MY_PASSWORD)" \
		-N -B "$(t_envget "$1" MY_DB)" -e "$2"
}
as_mq() { $LOGIN "$(t_envget "$1" MQ_URL)"; }	# F
as_r() {	# F CMD...
	_f=$1; shift
	redis-cli --no-auth-warning -u "$(t_envget "$_f" REDIS_URI)" "$@"
}
envf() { echo "$W/agent-$1/$2.env"; }	# NODE MODULE: what its agent wrote
# as_s3 F METHOD PATH [DATA]: the HTTP status of a SigV4 request with F's
# keys (through a curl config file, never argv); the body in $W/s3.out.
as_s3() {
	umask 077
	printf 'user = "%s:%s"\n' "$(t_envget "$1" S3_ACCESS_KEY)" "$(t_envget "$1" S3_SECRET_KEY)" >"$W/curl.cfg"
	if [ $# -ge 4 ]; then
		curl -s -K "$W/curl.cfg" --aws-sigv4 aws:amz:default:s3 \
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X "$2" \
			--data-binary "$4" -o "$W/s3.out" -w '%{http_code}' "$(t_envget "$1" S3_ENDPOINT)$3"
	else
		curl -s -K "$W/curl.cfg" --aws-sigv4 aws:amz:default:s3 \
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X "$2" \
			-o "$W/s3.out" -w '%{http_code}' "$(t_envget "$1" S3_ENDPOINT)$3"
	fi
	rm -f "$W/curl.cfg"
}
# as_oidc F: a client_credentials token request with F's client.
as_oidc() {
	umask 077
	printf 'user = "%s:%s"\n' "$(t_envget "$1" OIDC_CLIENT_ID)" "$(t_envget "$1" OIDC_CLIENT_SECRET)" >"$W/curl.cfg"
	curl -s -K "$W/curl.cfg" -d grant_type=client_credentials "$(t_envget "$1" OIDC_TOKEN_ENDPOINT)"
	rm -f "$W/curl.cfg"
}
oidc_has() {	# CLIENT_ID: registered at the provider
	python3 -c "import json,sys; sys.exit(0 if 'Client:'+sys.argv[2] in json.load(open(sys.argv[1])) else 1)" \
		"$OIDC_DIR/store.json" "$1"
}

t_say "tally home, three nodes, examples/mesh/*.yaml"
t_init
t_node node-a 127.0.0.1
t_node node-b localhost
# Every node's servers listen on this machine's loopback: the routable
# names must lead there (tallyd checks a grant at its node's name).
t_node node-c localhost
tly apply "$MESH"/*.yaml >"$W/apply.out" || t_fail "tally apply examples/mesh/*.yaml: $(cat "$W/apply.out")"
for node in $NODES; do
	x=$(n $node)
	tly assign postgres $node --set port="$(get PG_PORT_$x)" --set admin-user="$(get PG_USER_$x)" \
		--secret admin-password <"$(get PG_PW_$x)" >/dev/null || t_fail "assign postgres $node"
	tly assign mariadb $node --set port="$(get M_PORT_$x)" --set admin-user="$(get M_USER_$x)" \
		--secret admin-password <"$(get M_PW_$x)" >/dev/null || t_fail "assign mariadb $node"
	tly assign redis $node --set port="$(get R_PORT_$x)" --set admin-user=admin \
		--secret admin-password <"$(get R_PW_$x)" >/dev/null || t_fail "assign redis $node"
	tly assign download $node --set root="$W/root-$x" >/dev/null || t_fail "assign download $node"
done
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
tly assign rabbitmq node-a --expose network --set port="$TALLY_TEST_AMQP_PORT" \
	--set management-port="$TALLY_TEST_AMQP_MGMT_PORT" --set admin-user="$TALLY_TEST_AMQP_USER" \
	--secret admin-password <"$W/amqp.pw" >/dev/null || t_fail "assign rabbitmq node-a"
t_check "the broker is one per mesh"
t_expect_exit 4 "a second broker on node-b" tly assign rabbitmq node-b --expose network \
	--set port=1 --set management-port=2 --set admin-user=x
grep -q "one-per-mesh" "$W/last.err" || t_fail "the refusal does not say one-per-mesh: $(cat "$W/last.err")"
t_ok "$(head -n 1 "$W/last.err")"
tly assign objects node-a --expose network --set port="$RP" --set admin-access-key="$TALLY_TEST_RGW_ACCESS" \
	--secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" >/dev/null || t_fail "assign objects node-a"
tly assign idp node-a --expose network --set issuer="$TALLY_TEST_OIDC_ISSUER" \
	--secret initial-access-token <"$TALLY_TEST_OIDC_IATFILE" >/dev/null || t_fail "assign idp node-a"
for m in shop stock; do
	for node in $NODES; do tly assign $m $node >/dev/null || t_fail "assign $m $node"; done
done

# agree STEP: the board (tally-board, its own store, catching up with
# this log; and one that follows it all along, keeping each module's
# state and checking it) and tally status --json say the same of every
# module, assignment and requirement after STEP (issue 27: one truth).
t_board_follow
agree() {
	t_check "tally-board and tally status --json agree: $1"
	_n=$(t_board_agrees "$1")
	t_ok "$_n requirement(s): the same states, reasons, grants and providers"
}
agree "declared and assigned"

t_say "provisioned, and delivered on each node by its agent"
S1=$(t_now_ms)
"$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG" || {
	tly status >&2 || true
	t_fail "tallyd --once did not provision the mesh"
}
for node in $NODES; do t_agent $node; done
t_wait_healthy 20
t_ok "tallyd --once and three agents: $(($(t_now_ms) - S1)) ms for 30 grants"
agree "provisioned and delivered"
for m in shop stock; do
	for node in $NODES; do
		x=$(n $node)
		f=$(envf $node $m)
		[ -f "$f" ] || t_fail "the agent of $node wrote no $f"
		[ "$(stat -c %a "$f")" = 600 ] || t_fail "$f is mode $(stat -c %a "$f")"
		t_check "$m@$node: its node's stores and the mesh's broker"
		[ "$(t_envget "$f" PG_PORT)" = "$(get PG_PORT_$x)" ] ||
			t_fail "$m@$node's postgres is on port $(t_envget "$f" PG_PORT), not $node's $(get PG_PORT_$x)"
		[ "$(t_envget "$f" PG_DB)" = "$(t_gname "$m/pg@$node" "$m-pg-$node")" ] ||
			t_fail "$m@$node's database is $(t_envget "$f" PG_DB)"
		[ "$(t_envget "$f" MY_PORT)" = "$(get M_PORT_$x)" ] ||
			t_fail "$m@$node's mariadb is on port $(t_envget "$f" MY_PORT), not $node's"
		t_envget "$f" REDIS_URI | grep -q ":$(get R_PORT_$x)\$" ||
			t_fail "$m@$node's redis is not $node's: $(t_envget "$f" REDIS_URI | sed 's/:[^:@]*@/:***@/')"
		d=$(t_envget "$f" FILES_DIR)
		case $d in "$W/root-$x"/?*) ;; *) t_fail "$m@$node's directory $d is not under $node's root" ;; esac
		[ "$(t_envget "$f" MQ_VHOST)" = "$(t_gname "$m/mq" "$m-mq")" ] ||
			t_fail "$m@$node's vhost is $(t_envget "$f" MQ_VHOST)"
		as_pg "$f" "CREATE TABLE IF NOT EXISTS orders (id int); INSERT INTO orders VALUES (1)" ||
			t_fail "$m@$node cannot use its postgres database"
		as_my "$f" "CREATE TABLE IF NOT EXISTS items (id INT); INSERT INTO items VALUES (1)" ||
			t_fail "$m@$node cannot use its mariadb database"
		as_mq "$f" >"$W/login.out" || t_fail "$m@$node's MQ_URL does not log in: $(cat "$W/login.out")"
		p=$(t_envget "$f" REDIS_PREFIX)
		[ "$(as_r "$f" SET "${p}seen" "$node")" = OK ] || t_fail "$m@$node cannot SET ${p}seen"
		[ "$(r_adm $x GET "${p}seen")" = "$node" ] || t_fail "$m@$node's key is not on $node's redis"
		echo "$m@$node" >"$d/hello" || t_fail "$m@$node cannot write in $d"
		b=$(t_envget "$f" S3_BUCKET)
		[ "$b" = "$(t_grec "$m/bucket" resource)" ] || t_fail "$m@$node's bucket is $b"
		[ "$(as_s3 "$f" PUT "/$b/$node.txt" "$m@$node")" = 200 ] ||
			t_fail "$m@$node cannot PUT into its bucket: $(cat "$W/s3.out")"
		[ "$(as_s3 "$f" GET "/$b/$node.txt")" = 200 ] && [ "$(cat "$W/s3.out")" = "$m@$node" ] ||
			t_fail "$m@$node cannot GET its object back"
		[ "$(t_envget "$f" OIDC_ISSUER)" = "$TALLY_TEST_OIDC_ISSUER" ] || t_fail "$m@$node's issuer is $(t_envget "$f" OIDC_ISSUER)"
		as_oidc "$f" | grep -q '"access_token"' || t_fail "$m@$node's OIDC client gets no token"
		t_ok "postgres :$(get PG_PORT_$x), mariadb :$(get M_PORT_$x), redis :$(get R_PORT_$x), $d, vhost $(t_envget "$f" MQ_VHOST), bucket $b, client $(t_envget "$f" OIDC_CLIENT_ID): all seven used"
	done
	cmp -s "$(envf node-a $m)" "$(envf node-b $m)" && t_fail "$m on node-a and node-b got the same delivery"
	[ "$(t_envget "$(envf node-a $m)" MQ_URL)" = "$(t_envget "$(envf node-c $m)" MQ_URL)" ] ||
		t_fail "$m's shared vhost credential differs between node-a and node-c"
	[ "$(grep -e ^S3_ -e ^OIDC_ "$(envf node-a $m)")" = "$(grep -e ^S3_ -e ^OIDC_ "$(envf node-c $m)")" ] ||
		t_fail "$m's shared bucket or client differs between node-a and node-c"
done
t_check "local means local: node-a's credentials do not open node-b's servers"
fa=$(envf node-a shop)
PGPASSWORD=$(t_envget "$fa" PG_PASSWORD) psql -X -At -q -h 127.0.0.1 -p "$PG_PORT_b" \
	-U "$(t_envget "$fa" PG_USER)" -d "$(t_envget "$fa" PG_DB)" -c "SELECT 1" >/dev/null 2>&1 &&
	t_fail "shop@node-a's postgres credential opens node-b's server"
mariadb --no-defaults -h127.0.0.1 -P"$M_PORT_b" -u"$(t_envget "$fa" MY_USER)" \
	-p"$(t_envget "$fa" MY_PASSWORD)" -e "SELECT 1" >/dev/null 2>&1 &&
	t_fail "shop@node-a's mariadb credential opens node-b's server"
redis-cli --no-auth-warning -h 127.0.0.1 -p "$R_PORT_b" --user "$(t_envget "$fa" REDIS_USER)" \
	--pass "$(t_envget "$fa" REDIS_PASSWORD)" PING 2>&1 | grep -q PONG &&
	t_fail "shop@node-a's redis credential opens node-b's server"
[ "$(as_s3 "$fa" GET "/$(t_envget "$(envf node-a stock)" S3_BUCKET)/node-a.txt")" = 403 ] ||
	t_fail "shop's keys read stock's bucket"
t_expect_exit 4 "binding shop/pg@node-b to node-a's local postgres" \
	tly bind shop/pg@node-b node-a/postgres
grep -q "local" "$W/last.err" || t_fail "the refusal does not say why: $(cat "$W/last.err")"
t_ok "refused by node-b's postgres, mariadb and redis; binding node-b's grant to node-a/postgres refused: $(head -n 1 "$W/last.err" | cut -c1-120)"
tly log --json >"$W/log.json"
for v in PG_PASSWORD MY_PASSWORD REDIS_PASSWORD S3_SECRET_KEY OIDC_CLIENT_SECRET; do
	grep -qF "$(t_envget "$fa" $v)" "$W/log.json" "$T_DLOG" && t_fail "$v of shop@node-a is in a log"
done

t_say "verified"
t_expect_exit 0 "tally check --all (30 grants on 15 servers)" tly check --all
t_ok "$(tail -n 1 "$W/last.out")"
agree "verified"

t_say "rotated with the agents' acks: shop/mq (3 holders), pg@node-a, my@node-b, cache@node-c"
for node in $NODES; do cp "$(envf $node shop)" "$W/old-$node.env"; done
ROT="shop/mq shop/pg@node-a shop/my@node-b shop/cache@node-c"
t_tallyd_start --interval 1
S2=$(t_now_ms)
for g in $ROT; do tly rotate "$g" >/dev/null || t_fail "tally rotate $g failed"; done
agree "rotations asked for, under way"
end=$(($(t_now_ms) + 45000))
while :; do
	for node in $NODES; do t_agent $node; done
	done_n=0
	for g in $ROT; do
		tly log --json --stream "grant/$g" --type rotation.completed | grep -q '"version":2' &&
			done_n=$((done_n + 1))
	done
	[ $done_n -eq 4 ] && break
	[ "$(t_now_ms)" -lt "$end" ] || { tail -n 20 "$T_DLOG" >&2; t_fail "only $done_n of 4 rotations completed in 45 s"; }
	sleep 0.3
done
t_ok "4 rotations completed in $(($(t_now_ms) - S2)) ms"
t_tallyd_stop
agree "rotated"
t_check "each holder acknowledged v2 with proof, before the old credential was retired"
for g in $ROT; do
	case $g in *@*) holders=${g#*@} ;; *) holders=$NODES ;; esac
	for node in $holders; do
		tly log --json --stream "grant/$g" --type credential.acknowledged | grep '"version":2' |
			grep "\"actor\":\"node:$node\"" | grep -q '"proof":"verified"' ||
			t_fail "no verified ack of $g v2 by node:$node"
	done
	a=$(tly log --json --stream "grant/$g" --type credential.acknowledged | grep '"version":2' | tail -n 1 | t_jfields seq)
	r=$(tly log --json --stream "grant/$g" --type credential.retired | tail -n 1 | t_jfields seq)
	[ -n "$r" ] && [ "$a" -lt "$r" ] || t_fail "$g: last ack $a, retired '$r'"
done
t_ok "credential.acknowledged v2 (actor node:NODE, proof verified) < credential.retired, per grant"
t_check "new credentials log in, old ones are refused"
for node in $NODES; do
	f=$(envf $node shop)
	[ "$(t_envget "$f" MQ_URL)" != "$(t_envget "$W/old-$node.env" MQ_URL)" ] || t_fail "$node still holds the old MQ_URL"
	as_mq "$f" >"$W/login.out" || t_fail "shop@$node's new MQ_URL does not log in: $(cat "$W/login.out")"
	as_mq "$W/old-$node.env" >"$W/login.out" && t_fail "the retired vhost user still logs in"
done
as_pg "$(envf node-a shop)" "SELECT count(*) FROM orders" >/dev/null || t_fail "pg@node-a's v2 does not connect"
as_pg "$W/old-node-a.env" "SELECT 1" >/dev/null 2>&1 && t_fail "pg@node-a's v1 still connects"
as_my "$(envf node-b shop)" "SELECT count(*) FROM items" >/dev/null || t_fail "my@node-b's v2 does not connect"
as_my "$W/old-node-b.env" "SELECT 1" >/dev/null 2>&1 && t_fail "my@node-b's v1 still connects"
[ "$(as_r "$(envf node-c shop)" GET "$(t_envget "$(envf node-c shop)" REDIS_PREFIX)seen")" = node-c ] ||
	t_fail "cache@node-c's v2 does not read its key"
as_r "$W/old-node-c.env" PING 2>&1 | grep -q PONG && t_fail "cache@node-c's old password still works"
[ "$(grep ^PG_ "$(envf node-b shop)")" = "$(grep ^PG_ "$W/old-node-b.env")" ] ||
	t_fail "pg@node-b changed though it was not rotated"
t_ok "vhost v2 x3 nodes, pg@node-a, my@node-b, cache@node-c: new in, old refused; others unchanged"

t_say "stock removed: the vhost's loss shown, --yes wanted; then purged everywhere"
VS=$(t_envget "$(envf node-a stock)" MQ_VHOST)
api PUT "/queues/$(esc "$VS")/work" '{"durable":true}' >/dev/null
for i in 1 2; do
	api POST "/exchanges/$(esc "$VS")/amq.default/publish" \
		'{"properties":{"delivery_mode":2},"routing_key":"work","payload":"m","payload_encoding":"string"}' >/dev/null
done
end=$(($(t_now_ms) + 15000))
until api GET "/queues/$(esc "$VS")/work" | grep -q '"messages":2'; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "the queue did not report its 2 messages"
	sleep 0.2
done
for node in $NODES; do cp "$(envf $node stock)" "$W/stock-$node.env"; done
before=$(tly log --json | wc -l)
t_expect_exit 4 "tally remove stock without --yes" tly remove stock
grep -q "^revoking stock/mq on node-a/rabbitmq .*(this destroys data)" "$W/last.out" ||
	t_fail "remove did not say revoking stock/mq destroys data: $(cat "$W/last.out")"
grep -qF "vhost \"$VS\" (1 queue(s), 2 message(s)" "$W/last.out" ||
	t_fail "remove did not count the vhost's queue and messages: $(cat "$W/last.out")"
[ "$(grep -c '^revoking stock/' "$W/last.out")" = 15 ] ||
	t_fail "remove did not list stock's 15 grants: $(cat "$W/last.out")"
grep -q -- "--yes" "$W/last.err" || t_fail "the refusal does not say --yes: $(cat "$W/last.err")"
tly log --json | tail -n +$((before + 1)) >"$W/held.json"
[ "$(wc -l <"$W/held.json")" = 1 ] && grep -q '"type":"module.removal-held"' "$W/held.json" ||
	t_fail "a refused remove appended other than its question: $(cut -c1-200 "$W/held.json")"
agree "stock's removal held for a confirmation"
t_ok "$(grep 'lost now' "$W/last.out" | sed 's/^ *//'); held (module.removal-held)"
tly remove stock --yes >/dev/null || t_fail "tally remove stock --yes failed"
agree "stock removed, not yet revoked"
t_tallyd_once
for node in $NODES; do t_agent $node; done
for node in $NODES; do
	[ -f "$(envf $node stock)" ] && t_fail "stock's env file on $node survived its removal"
	as_pg "$W/stock-$node.env" "SELECT 1" >/dev/null 2>&1 && t_fail "stock@$node's postgres login survived"
done
api GET "/queues/$(esc "$VS")/work" | grep -q '"messages":2' ||
	t_fail "retain lost the vhost's messages before the purge"
SF=$W/stock-node-a.env
SB=$(t_envget "$SF" S3_BUCKET)
SU=$(t_grec stock/bucket user)
[ "$(as_s3 "$SF" GET "/$SB/node-a.txt")" = 403 ] || t_fail "stock's S3 keys still work after the removal"
$RADM bucket stats --bucket="$SB" 2>/dev/null | grep -q '"num_objects": 3' ||
	t_fail "retain lost stock's 3 objects before the purge"
oidc_has "$(t_envget "$SF" OIDC_CLIENT_ID)" && t_fail "stock's OIDC client is still registered after the removal"
as_oidc "$SF" | grep -q '"access_token"' && t_fail "stock's removed OIDC client still gets tokens"
# No token-lifetime set on idp: the lifetime is the driver's default.
tly status >"$W/status.out" 2>&1 || true
grep -q '^  revoked stock/login on node-a/idp: .*until they expire.*(lifetime 10m, setting token-lifetime)' "$W/status.out" ||
	t_fail "status does not say that stock's issued tokens outlive the revocation: $(cat "$W/status.out")"
t_ok "revoked: env files gone, logins refused; the vhost kept with its 2 messages and the bucket with its 3 objects until the purge; the OIDC client deleted"
for g in mq bucket pg@node-a pg@node-b pg@node-c my@node-a my@node-b my@node-c \
    cache@node-a cache@node-b cache@node-c files@node-a files@node-b files@node-c; do
	tly purge "stock/$g" --yes >/dev/null || t_fail "tally purge stock/$g failed"
done
t_tallyd_once
t_check "stock's objects are gone on every server, shop's are there"
api GET "/vhosts/$(esc "$VS")" >/dev/null 2>&1 && t_fail "stock's vhost $VS survived the purge"
$RADM bucket list 2>/dev/null | tr -d '[]", ' | grep -qx "$SB" && t_fail "stock's bucket $SB survived the purge"
$RADM user list 2>/dev/null | tr -d '[]", ' | grep -qx "$SU" && t_fail "stock's RGW user $SU survived the purge"
oidc_has "$(t_envget "$SF" OIDC_CLIENT_ID)" && t_fail "stock's OIDC client survived the purge"
s=$(envf node-a shop)
[ "$(as_s3 "$s" GET "/$(t_envget "$s" S3_BUCKET)/node-b.txt")" = 200 ] || t_fail "the purge of stock touched shop's bucket"
oidc_has "$(t_envget "$s" OIDC_CLIENT_ID)" && as_oidc "$s" | grep -q '"access_token"' ||
	t_fail "the purge of stock touched shop's OIDC client"
api GET "/vhosts/$(esc "$(t_envget "$(envf node-a shop)" MQ_VHOST)")" >/dev/null || t_fail "shop's vhost is gone"
for node in $NODES; do
	x=$(n $node)
	f=$W/stock-$node.env
	db=$(t_envget "$f" PG_DB)
	[ "$(pg_adm $x "SELECT count(*) FROM pg_database WHERE datname = '$db'")" = 0 ] ||
		t_fail "$db survived on $node's postgres"
	[ "$(pg_adm $x "SELECT count(*) FROM pg_roles WHERE rolname LIKE '${db}%'")" = 0 ] ||
		t_fail "stock's roles survived on $node's postgres"
	db=$(t_envget "$f" MY_DB)
	[ "$(my_adm $x "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '$db'")" = 0 ] ||
		t_fail "$db survived on $node's mariadb"
	[ "$(my_adm $x "SELECT COUNT(*) FROM mysql.global_priv WHERE User LIKE '${db}%'")" = 0 ] ||
		t_fail "stock's users survived on $node's mariadb"
	u=$(t_envget "$f" REDIS_USER)
	r_adm $x ACL USERS | grep -qx "$u" && t_fail "$u survived on $node's redis"
	[ -z "$(r_adm $x --scan --pattern "$(t_envget "$f" REDIS_PREFIX)*")" ] ||
		t_fail "stock's keys survived on $node's redis"
	[ -e "$(t_envget "$f" FILES_DIR)" ] && t_fail "stock's directory survived on $node"
	s=$(envf $node shop)
	as_pg "$s" "SELECT 1" >/dev/null && as_my "$s" "SELECT 1" >/dev/null &&
		[ "$(as_r "$s" GET "$(t_envget "$s" REDIS_PREFIX)seen")" = "$node" ] &&
		[ -f "$(t_envget "$s" FILES_DIR)/hello" ] || t_fail "the purge of stock touched shop@$node"
done
t_ok "vhost, bucket + RGW user, OIDC client, 3 databases + roles, 3 databases + users, 3 redis users + keys, 3 directories: gone; shop intact"
agree "stock purged"

t_say "the end: healthy, the log verifies and rebuilds identically"
t_expect_exit 0 "tally check --all" tly check --all
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >"$W/rebuild.out" 2>&1 || t_fail "tally rebuild --check: $(cat "$W/rebuild.out")"
t_ok "check, verify and rebuild --check; $(($(t_now_ms) - S0)) ms since the servers started"
agree "the end"

t_say "a holder leaves, a node is lost: the board still agrees"
tly unassign shop node-c >/dev/null || t_fail "tally unassign shop node-c failed"
agree "shop taken off node-c"
"$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG" || true
agree "shop's grants on node-c revoked"
tly node lost node-b --yes >/dev/null || t_fail "tally node lost node-b failed"
agree "node-b lost"
"$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG" || true
agree "after node-b was lost, a pass"
