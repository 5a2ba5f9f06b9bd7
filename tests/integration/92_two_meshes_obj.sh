#!/bin/sh
# Two meshes on ONE Ceph RGW and ONE OpenID Connect provider (issue 22):
# homes A and B, each with its own mesh id, declare the same provider
# modules (store: s3-bucket, idp: oidc-client) and the same consumer
# module app on a node of the same name.  Each gets its own objects,
# marked with its own mesh id (the RGW user's display-name, the client's
# software_id); then B checks, repairs, rotates and purges its grants
# while A's user, keys, bucket and client stay byte for byte as they were
# and A's consumer keeps reading its bucket and getting tokens.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || t_fail "node is missing (tools/deps.sh)"
command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"

t_ceph_start
EP=$TALLY_TEST_RGW_ENDPOINT
AK=$TALLY_TEST_RGW_ACCESS
RADM="radosgw-admin -c $CEPH_DIR/ceph.conf -n client.rgw.a"

OIDC_DIR=$W/oidc
_o_port=$((57400 + $$ % 50))
while _t_port_busy "$_o_port"; do _o_port=$((_o_port + 1)); done
_o_cleanup() {
	_o_rc=$?
	set +e
	sh "$TALLY_SRC/tests/harness/oidc.sh" stop "$OIDC_DIR" >/dev/null 2>&1
	(exit $_o_rc)
	_t_cleanup
}
trap _o_cleanup EXIT
sh "$TALLY_SRC/tests/harness/oidc.sh" start "$OIDC_DIR" "$_o_port" ||
	t_fail "the OIDC provider did not start (tests/harness/oidc.sh)"
. "$OIDC_DIR/env"
ISS=$TALLY_TEST_OIDC_ISSUER
STORE=$OIDC_DIR/store.json

HA=$TALLY_HOME
HB=$W/homeB
# th HOME ARGS: tally on HOME.
th() { _h=$1; shift; TALLY_HOME=$_h "$TALLY_BIN/tally" "$@"; }

# s3 AK SK METHOD PATH [DATA]: the HTTP status (keys through a config file).
s3() {
	umask 077
	printf 'user = "%s:%s"\n' "$1" "$2" >"$W/curl.cfg"
	if [ $# -ge 5 ]; then
		curl -s -K "$W/curl.cfg" --aws-sigv4 aws:amz:default:s3 \
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X "$3" \
			--data-binary "$5" -o "$W/s3.out" -w '%{http_code}' "$EP$4"
	else
		curl -s -K "$W/curl.cfg" --aws-sigv4 aws:amz:default:s3 \
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X "$3" \
			-o "$W/s3.out" -w '%{http_code}' "$EP$4"
	fi
	rm -f "$W/curl.cfg"
}
# envof HOME: app's environment on node-a in HOME, opened with its key.
envof() {
	_e=$W/env-$(basename "$1").env
	( umask 077; th "$1" env node-a app --node-key "$W/keys-$(basename "$1")/node-a.key" \
		>"$_e" 2>/dev/null ) || t_fail "tally env node-a app on $1 failed"
	echo "$_e"
}
token() {
	curl -s -u "$(t_envget "$1" O_ID):$(t_envget "$1" O_SECRET)" \
		-d grant_type=client_credentials "$(t_envget "$1" O_TOKEN)"
}
# consumer_ok ENVFILE WHAT: its keys write and read its bucket, its client
# gets a token.
consumer_ok() {
	_b=$(t_envget "$1" S3_BUCKET)
	_ak=$(t_envget "$1" S3_ACCESS_KEY)
	_sk=$(t_envget "$1" S3_SECRET_KEY)
	[ "$(s3 "$_ak" "$_sk" PUT "/$_b/probe.txt" "$2")" = 200 ] ||
		t_fail "$2: the consumer cannot write its bucket $_b"
	[ "$(s3 "$_ak" "$_sk" GET "/$_b/probe.txt")" = 200 ] &&
		[ "$(cat "$W/s3.out")" = "$2" ] || t_fail "$2: the consumer cannot read its bucket $_b"
	token "$1" | grep -q '"access_token"' || t_fail "$2: the consumer's client gets no token"
}
# objects UID CLIENT: what the RGW and the identity provider hold of one
# home's grants (user with keys and mark, bucket owner, the client).
objects() {
	$RADM user info --uid="$1" 2>/dev/null
	$RADM bucket stats --bucket="$(echo "$1" | tr _ -)" 2>/dev/null | grep -e '"owner"' -e '"bucket"'
	python3 -c "import json,sys; print(json.dumps(json.load(open('$STORE')).get('Client:$2'), sort_keys=True))"
}
mesh_of() { th "$1" mesh --json | t_jstr mesh; }

mkdir -p "$W/manifests"
cat >"$W/manifests/store.yaml" <<EOF
module: store
provides:
  s3-bucket:
    driver: ceph-rgw
    revoke: retain
EOF
cat >"$W/manifests/idp.yaml" <<EOF
module: idp
provides:
  oidc-client:
    driver: oidc
    revoke: drop
EOF
cat >"$W/manifests/app.yaml" <<EOF
module: app
env: {S3_ENDPOINT: "", S3_BUCKET: "", S3_ACCESS_KEY: "", S3_SECRET_KEY: "", O_ID: "", O_SECRET: "", O_TOKEN: ""}
requires:
  files:
    type: s3-bucket
    from: store
    env: {endpoint: S3_ENDPOINT, bucket: S3_BUCKET, access-key: S3_ACCESS_KEY, secret-key: S3_SECRET_KEY}
  login:
    type: oidc-client
    from: idp
    env: {client-id: O_ID, client-secret: O_SECRET, token-endpoint: O_TOKEN}
EOF
# mesh HOME: a home declaring store, idp and app on node-a.
mesh() {
	th "$1" init >/dev/null || t_fail "tally init $1 failed"
	mkdir -p "$W/keys-$(basename "$1")"
	th "$1" node add node-a --routable-name 127.0.0.1 \
		--key-out "$W/keys-$(basename "$1")/node-a.key" >/dev/null || t_fail "node add on $1"
	th "$1" apply "$W/manifests/store.yaml" >/dev/null && th "$1" apply "$W/manifests/idp.yaml" >/dev/null ||
		t_fail "tally apply store/idp on $1 failed"
	th "$1" assign store node-a --expose network --set port="$TALLY_TEST_RGW_PORT" \
		--set admin-access-key="$AK" --secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" \
		>/dev/null || t_fail "tally assign store on $1 failed"
	th "$1" assign idp node-a --expose network --set issuer="$ISS" \
		--secret initial-access-token <"$TALLY_TEST_OIDC_IATFILE" >/dev/null ||
		t_fail "tally assign idp on $1 failed"
	th "$1" apply "$W/manifests/app.yaml" >/dev/null && th "$1" assign app node-a >/dev/null ||
		t_fail "app on $1 failed"
	t_tallyd_once --home "$1"
}

t_say "homes A and B, one RGW, one identity provider, the same modules"
mesh "$HA"
mesh "$HB"
MA=$(mesh_of "$HA")
MB=$(mesh_of "$HB")
[ ${#MA} -eq 32 ] && [ ${#MB} -eq 32 ] && [ "$MA" != "$MB" ] || t_fail "mesh ids '$MA' '$MB'"
EA=$(envof "$HA"); cp "$EA" "$W/a.env"; EA=$W/a.env
EB=$(envof "$HB"); cp "$EB" "$W/b.env"; EB=$W/b.env
UA=$(th "$HA" log --json --stream grant/app/files --type grant.provisioning | head -n 1 | t_jstr user)
UB=$(th "$HB" log --json --stream grant/app/files --type grant.provisioning | head -n 1 | t_jstr user)
CA=$(t_envget "$EA" O_ID)
CB=$(t_envget "$EB" O_ID)

t_check "each has its own objects, marked with its own mesh id"
[ -n "$UA" ] && [ -n "$UB" ] && [ "$UA" != "$UB" ] || t_fail "RGW users '$UA' '$UB'"
[ "$(t_envget "$EA" S3_BUCKET)" != "$(t_envget "$EB" S3_BUCKET)" ] || t_fail "one bucket for both meshes"
[ -n "$CA" ] && [ -n "$CB" ] && [ "$CA" != "$CB" ] || t_fail "clients '$CA' '$CB'"
$RADM user info --uid="$UA" | grep -q "\"display_name\": \"tally mesh $MA grant app/files\"" ||
	t_fail "A's user is not marked with A's mesh: $($RADM user info --uid="$UA" | grep display_name)"
$RADM user info --uid="$UB" | grep -q "\"display_name\": \"tally mesh $MB grant app/files\"" ||
	t_fail "B's user is not marked with B's mesh"
for p in "$CA:$MA" "$CB:$MB"; do
	python3 -c "import json,sys; c=json.load(open('$STORE'))['Client:${p%%:*}']['p']; sys.exit(0 if c['software_id']=='tally mesh ${p#*:} grant app/login' else 1)" ||
		t_fail "client ${p%%:*} is not marked with mesh ${p#*:}"
done
consumer_ok "$EA" "a-1"
consumer_ok "$EB" "b-1"
t_ok "A: user $UA, client $CA (mesh $MA); B: user $UB, client $CB (mesh $MB)"

objects "$UA" "$CA" >"$W/a.before"
# unchanged WHAT: A's objects as they were, and A's consumer works.
unchanged() {
	objects "$UA" "$CA" >"$W/a.now"
	cmp -s "$W/a.before" "$W/a.now" || { diff "$W/a.before" "$W/a.now" >&2; t_fail "B's $1 changed A's objects"; }
	consumer_ok "$EA" "a-$1"
}

t_check "B's check leaves A's objects alone"
t_expect_exit 0 "tally check --all on B" th "$HB" check --all
t_expect_exit 0 "tally check --all on A" th "$HA" check --all
unchanged check

t_check "B's repair: B's user suspended out of band, repaired; A's untouched"
$RADM user suspend --uid="$UB" >/dev/null 2>&1 || t_fail "radosgw-admin user suspend failed"
t_expect_exit 8 "tally check app/files on B (suspended)" th "$HB" check app/files
t_expect_exit 0 "tally check app/files on B (repaired)" th "$HB" check app/files
unchanged repair

t_check "B's rotation of both grants, acknowledged; A's untouched"
t_tallyd_start --home "$HB" --interval 1
BPID=$T_DPID
th "$HB" rotate app/files >/dev/null && th "$HB" rotate app/login >/dev/null || t_fail "tally rotate on B failed"
_end=$(($(t_now_ms) + 30000))
until th "$HB" log --json --stream grant/app/login --type credential.activated | grep -q '"version":2' &&
    th "$HB" log --json --stream grant/app/files --type credential.activated | grep -q '"version":2'; do
	[ "$(t_now_ms)" -lt "$_end" ] || { tail -n 20 "$T_DLOG" >&2; t_fail "B's v2 not activated in 30 s"; }
	sleep 0.2
done
th "$HB" ack node-a app 2 >/dev/null || t_fail "tally ack node-a app 2 on B failed"
_end=$(($(t_now_ms) + 30000))
until [ "$(th "$HB" log --json --type rotation.completed | grep -c .)" -ge 2 ]; do
	[ "$(t_now_ms)" -lt "$_end" ] || { tail -n 20 "$T_DLOG" >&2; t_fail "B's rotations did not complete in 30 s"; }
	sleep 0.2
done
kill -TERM "$BPID"; t_wait_exit "$BPID" 10
EB2=$(envof "$HB")
[ "$(t_envget "$EB2" O_ID)" != "$CB" ] || t_fail "B's client did not change with the rotation"
consumer_ok "$EB2" "b-2"
unchanged rotation

t_check "B's removal and purge; A's untouched"
th "$HB" remove app --yes >/dev/null || t_fail "tally remove app on B failed"
t_tallyd_once --home "$HB"
th "$HB" purge app/files --yes >/dev/null || t_fail "tally purge app/files on B failed"
t_tallyd_once --home "$HB"
$RADM user info --uid="$UB" >/dev/null 2>&1 && t_fail "B's user is still there after its purge"
python3 -c "import json,sys; sys.exit(1 if 'Client:$(t_envget "$EB2" O_ID)' in json.load(open('$STORE')) else 0)" ||
	t_fail "B's client is still registered after its removal"
unchanged purge
t_expect_exit 0 "tally check --all on A at the end" th "$HA" check --all
t_ok "A's user, keys, bucket and client are as they were; its consumer works"

t_say "done"
