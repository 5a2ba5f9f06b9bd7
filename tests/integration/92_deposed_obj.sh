#!/bin/sh
# A deposed leader on Ceph RGW and OpenID Connect (issue 22): leader A
# provisions on both; standby B is promoted and its tallyd raises B's
# fence on the RGW (tally-fence-MESH in the admin's canary bucket) and
# publishes its promotion on the stream.  Then, more than the OIDC
# driver's stated window (TL_DRV_EPOCH_CHECK_S, 10 s) later:
#   1. A, still running (its resync an hour away), is given a new grant,
#      a rotation and a removal: it makes no call (the OIDC provider is
#      fenced by the epoch check, which reads B's promotion on the
#      stream; the RGW session would read B's fence), records no
#      outcome, and exits 9 saying why;
#   2. A restarted cut off from the stream (the broker killed) exits 9
#      on the RGW's fence;
# and neither the RGW (its users, keys, buckets and the fence object, as
# the admin API lists them) nor the identity provider (its clients)
# changed at all from before the work was given.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || t_fail "node is missing (tools/deps.sh)"
command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

OIDC_DIR=$W/oidc
_o_port=$((57450 + $$ % 50))
while _t_port_busy "$_o_port"; do _o_port=$((_o_port + 1)); done
trap '_o_rc=$?; set +e; sh "$TALLY_SRC/tests/harness/oidc.sh" stop "$OIDC_DIR" >/dev/null 2>&1; _r_stop; (exit $_o_rc); _t_cleanup' EXIT

STREAM=tally.record
LH=$TALLY_HOME
FH=$W/standby
head_of() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }
pub_ck() { TALLY_HOME=$1 "$TALLY_BIN/tally" stats --json | tr '{' '\n' | sed -n 's/.*"name":"publisher","seq":\([0-9]*\).*/\1/p'; }

t_say "RabbitMQ, a Ceph RGW and an OIDC provider on loopback; leader A, standby B"
r_start
t_ceph_start
EP=$TALLY_TEST_RGW_ENDPOINT
AK=$TALLY_TEST_RGW_ACCESS
RADM="radosgw-admin -c $CEPH_DIR/ceph.conf -n client.rgw.a"
sh "$TALLY_SRC/tests/harness/oidc.sh" start "$OIDC_DIR" "$_o_port" ||
	t_fail "the OIDC provider did not start (tests/harness/oidc.sh)"
. "$OIDC_DIR/env"
STORE=$OIDC_DIR/store.json

# adm METHOD PATH: the RGW admin ops API (or S3) as the admin; the body.
adm() {
	umask 077
	printf 'user = "%s:%s"\n' "$AK" "$(cat "$TALLY_TEST_RGW_SECRETFILE")" >"$W/curl.cfg"
	curl -s -K "$W/curl.cfg" --aws-sigv4 aws:amz:default:s3 \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X "$1" "$EP$2"
	rm -f "$W/curl.cfg"
}
# What the RGW and the identity provider hold: every user with its keys,
# mark and suspension, every bucket with its owner, the fence objects,
# every client registered.
objects() {
	for u in $($RADM user list 2>/dev/null | tr -d '[]", ' | grep -v '^$' | sort); do
		echo "user $u: $(adm GET "/admin/user?uid=$u")"
	done
	echo "buckets: $(adm GET "/admin/bucket?stats=false")"
	for b in $(adm GET "/admin/bucket" | tr -d '[]"' | tr ',' ' '); do
		case $b in tally-canary-*)
			for o in $(adm GET "/$b" | grep -o '<Key>[^<]*</Key>' | sed 's/<[^>]*>//g'); do
				echo "object $b/$o: $(adm GET "/$b/$o")"
			done ;;
		esac
	done
	python3 -c "import json; st=json.load(open('$STORE')); [print(k, json.dumps(v['p'], sort_keys=True)) for k, v in sorted(st.items()) if k.startswith('Client:')]"
}

mkdir -p "$W/manifests"
cat >"$W/manifests/providers.yaml" <<EOF
module: store
provides:
  s3-bucket:
    driver: ceph-rgw
    revoke: retain
---
module: idp
provides:
  oidc-client:
    driver: oidc
    revoke: drop
EOF
consumer() {
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {S3_BUCKET: "", S3_ACCESS_KEY: "", S3_SECRET_KEY: "", O_ID: "", O_SECRET: "", O_TOKEN: ""}
requires:
  files:
    type: s3-bucket
    from: store
    env: {bucket: S3_BUCKET, access-key: S3_ACCESS_KEY, secret-key: S3_SECRET_KEY}
  login:
    type: oidc-client
    from: idp
    env: {client-id: O_ID, client-secret: O_SECRET, token-endpoint: O_TOKEN}
EOF
	echo "$W/manifests/$1.yaml"
}

printf '%s' "$TALLY_TEST_AMQP_PASSWORD" >"$W/amqp.pw"
t_init
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$AMQP_URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password --stream "$STREAM" >/dev/null ||
	t_fail "tally publish configure --stream failed"
t_node node-a 127.0.0.1
tly apply "$W/manifests/providers.yaml" >/dev/null || t_fail "tally apply providers failed"
tly assign store node-a --expose network --set port="$TALLY_TEST_RGW_PORT" \
	--set admin-access-key="$AK" --secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" \
	>/dev/null || t_fail "tally assign store failed"
tly assign idp node-a --expose network --set issuer="$TALLY_TEST_OIDC_ISSUER" \
	--secret initial-access-token <"$TALLY_TEST_OIDC_IATFILE" >/dev/null ||
	t_fail "tally assign idp failed"
for m in c1 c2; do
	tly apply "$(consumer $m)" >/dev/null && tly assign $m node-a >/dev/null || t_fail "$m failed"
done
t_tallyd_start --interval 3600 --verify-interval 3600
LPID=$T_DPID
t_wait_healthy 60
TALLY_HOME=$FH tly init --standby --leader-key "$(leader_key)" >/dev/null || t_fail "tally init --standby failed"
follow_start
_i=0
until [ "$(head_of "$FH")" = "$(head_of "$LH")" ]; do
	_i=$((_i + 1)); [ $_i -lt 300 ] || t_fail "the standby did not reach the leader's head in 60 s"
	sleep 0.2
done
kill -TERM "$FPID"; t_wait_exit "$FPID" 10

t_check "B promoted; its tallyd fences the RGW and publishes the promotion"
cp "$LH/master.key" "$FH/master.key"
chmod 600 "$FH/master.key"
TALLY_HOME=$FH tly promote --yes >/dev/null || t_fail "tally promote failed"
t_tallyd_start --home "$FH" --interval 1 --verify-interval 3600
NPID=$T_DPID
_i=0
until grep -q "tallyd\[$NPID\] info: epoch 2: fenced 1 provider" "$T_DLOG" &&
    [ "$(pub_ck "$FH")" = "$(head_of "$FH")" ]; do
	_i=$((_i + 1)); [ $_i -lt 300 ] || { tail -n 10 "$T_DLOG" >&2; t_fail "the new leader did not fence the RGW and publish in 30 s"; }
	sleep 0.1
done
kill -TERM "$NPID"; t_wait_exit "$NPID" 10
T_PUB=$(t_now_ms)
FENCE=$(objects | grep '^object tally-canary-.*/tally-fence-' || true)
printf '%s' "$FENCE" | grep -q ': 2 [0-9a-f]\{32\}$' || t_fail "the RGW's fence is not at epoch 2: '$FENCE'"
kill -0 "$LPID" 2>/dev/null || t_fail "the old leader is not running"
t_ok "fence on the RGW: ${FENCE#object }; the old leader (pid $LPID) still runs"

# Past the OIDC driver's window (TL_DRV_EPOCH_CHECK_S = 10 s) since the
# promotion reached the stream: from here no call of A may land.
_wait=$((T_PUB + 11000 - $(t_now_ms)))
[ $_wait -gt 0 ] && sleep $((_wait / 1000 + 1))
objects >"$W/objects.before"
grep -c '^user ' "$W/objects.before" | grep -q '^[1-9]' && grep -q '^Client:' "$W/objects.before" ||
	t_fail "the listing shows no user or no client: the test shows nothing"

outcomes() { tly log --json | grep -E '"type":"(grant\.provisioned|grant\.revoked|grant\.failed|credential\.activated|credential\.retired)"' | grep -c '"stream":"grant/c[123]' || true; }
O0=$(outcomes)

t_check "A, still running, given a new grant, a rotation and a removal, makes no call and exits 9"
tly apply "$(consumer c3)" >/dev/null && tly assign c3 node-a >/dev/null || t_fail "c3 failed"
tly rotate c1/files >/dev/null && tly rotate c1/login >/dev/null || t_fail "tally rotate c1 failed"
tly remove c2 --yes >/dev/null || t_fail "tally remove c2 failed"
t_wait_exit "$LPID" 60
[ "$T_RC" -eq 9 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "the old leader exited $T_RC, expected 9 (deposed)"; }
grep "tallyd\[$LPID\] error: deposed: " "$T_DLOG" >"$W/why" ||
	t_fail "the old leader does not say why it stopped: $(grep "tallyd\[$LPID\]" "$T_DLOG" | tail -n 3)"
objects >"$W/objects.after"
cmp -s "$W/objects.before" "$W/objects.after" ||
	{ diff "$W/objects.before" "$W/objects.after" >&2; t_fail "the deposed leader changed the RGW or the identity provider"; }
[ "$(outcomes)" -eq "$O0" ] || t_fail "the deposed leader recorded outcomes: $(outcomes) now, $O0 before the work"
t_ok "exit 9 ($(cut -d: -f4- "$W/why" | head -n 1 | cut -c1-120)); nothing changed on either provider"

t_check "A restarted cut off from the stream: exit 9 on the RGW's fence, nothing changed"
r_kill
t_expect_exit 9 "the old leader restarted without the broker" timeout 90 "$TALLY_BIN/tallyd" --home "$LH" --interval 1
grep -q "deposed: provider node-a/store is fenced at epoch 2" "$W/last.err" ||
	t_fail "the old leader does not say the RGW's fence deposed it: $(tail -n 3 "$W/last.err")"
objects >"$W/objects.after2"
cmp -s "$W/objects.before" "$W/objects.after2" ||
	{ diff "$W/objects.before" "$W/objects.after2" >&2; t_fail "the restarted deposed leader changed a provider"; }
st=0; tly status >"$W/old.status" 2>&1 || st=$?
[ $st -eq 6 ] && grep -q "DEPOSED" "$W/old.status" || t_fail "tally status on the old leader (exit $st): $(head -n 3 "$W/old.status")"
t_ok "exit 9: $(grep -o 'deposed: provider node-a/store[^;]*' "$W/last.err" | head -n 1 | cut -c1-100)"

t_say "done"
