#!/bin/sh
# The consumer's endpoint is one rule (issue 21 item 16): an RGW given by
# its endpoint setting alone (--set endpoint=http://127.0.0.1:PORT, the
# port setting left at its default 7480, where nothing listens) is
# delivered that endpoint, recorded with it, and verified "as the
# consumer" at it: tally check and tally status say healthy, and the
# delivered endpoint is the recorded one (reactors/session.c:
# tl_rx_consumer_endpoint, which the deliverer, the provisioner's record
# and the verifier all call).
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"

t_ceph_start
RP=$TALLY_TEST_RGW_PORT
AK=$TALLY_TEST_RGW_ACCESS
[ "$RP" != 7480 ] || t_fail "the RGW is on 7480: the case needs another port"
_t_port_busy 7480 && t_note "something listens on 7480 here; it is not the RGW of this script"

mkdir -p "$W/manifests"
cat >"$W/manifests/store.yaml" <<EOF2
module: store
provides:
  s3-bucket:
    driver: ceph-rgw
    revoke: retain
EOF2
cat >"$W/manifests/app.yaml" <<EOF2
module: app
env: {S3_ENDPOINT: "", S3_BUCKET: "", S3_ACCESS_KEY: "", S3_SECRET_KEY: ""}
requires:
  files:
    type: s3-bucket
    from: store
    env: {endpoint: S3_ENDPOINT, bucket: S3_BUCKET, access-key: S3_ACCESS_KEY, secret-key: S3_SECRET_KEY}
EOF2

t_say "an RGW known by its endpoint setting only, on port $RP"
t_init
t_node node-a 127.0.0.1
tly apply "$W/manifests/store.yaml" >/dev/null || t_fail "tally apply store.yaml failed"
tly assign store node-a --expose network --set endpoint="http://127.0.0.1:$RP" \
	--set admin-access-key="$AK" --secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" \
	>/dev/null || t_fail "tally assign store node-a failed"
tly apply "$W/manifests/app.yaml" >/dev/null || t_fail "tally apply app.yaml failed"
tly assign app node-a >/dev/null || t_fail "tally assign app failed"
t_tallyd_once

t_check "delivered and recorded: the endpoint setting"
F=$(t_envfile node-a app)
[ "$(t_envget "$F" S3_ENDPOINT)" = "http://127.0.0.1:$RP" ] ||
	t_fail "app was delivered endpoint $(t_envget "$F" S3_ENDPOINT)"
tly log --json --stream grant/app/files --type grant.provisioned | grep -q "\"endpoint\":\"http://127.0.0.1:$RP\"" ||
	t_fail "grant.provisioned does not record the endpoint: $(tly log --json --stream grant/app/files --type grant.provisioned)"
t_ok "http://127.0.0.1:$RP, delivered and recorded"

t_check "verified at that endpoint: tally check and tally status are healthy"
t_expect_exit 0 "tally check" tly check
grep -q "7480" "$W/last.out" "$W/last.err" && t_fail "tally check went to port 7480: $(cat "$W/last.out" "$W/last.err")"
t_expect_exit 0 "tally status" tly status
t_tallyd_once
t_expect_exit 0 "tally status after a verifier pass" tly status
tly log --json --stream grant/app/files | grep -q 'grant.drifted' &&
	t_fail "the grant drifted: $(tly log --json --stream grant/app/files --type grant.drifted)"
tly log --json | grep -q 'provider.unreachable' &&
	t_fail "the provider was reported unreachable: $(tly log --json --type provider.unreachable)"
t_ok "healthy, never unreachable, no drift"
