#!/bin/sh
# Bucket names cannot be squatted (issue 21 item 29).  RGW buckets are
# global to the gateway and any user may create one, so a bucket name a
# consumer can compute is one it can take first: the ceph-rgw driver's
# names carry a digest keyed by the mesh's naming key (scheme 3,
# drivers/naming.c), derived from the master key in the home.
#   - the bucket (and user) of a grant is not the unkeyed digest of its id
#     (what anyone computes with b2sum), and the grant records scheme 3;
#   - two homes (two meshes) on one RGW, the same module: two buckets,
#     both provisioned (with unkeyed names the second mesh would meet the
#     first mesh's bucket, "not touched", for ever);
#   - stable: tally rebuild, then tallyd: the same bucket, healthy, no
#     second bucket on the RGW.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"
command -v b2sum >/dev/null 2>&1 || t_fail "b2sum is missing (coreutils)"

t_ceph_start
RP=$TALLY_TEST_RGW_PORT
AK=$TALLY_TEST_RGW_ACCESS
RADM="radosgw-admin -c $CEPH_DIR/ceph.conf -n client.rgw.a"
buckets() { $RADM bucket list 2>/dev/null | tr -d '[]", ' | grep -v -e '^$' -e '^tally-canary-' | sort; }

mkdir -p "$W/manifests"
cat >"$W/manifests/store.yaml" <<EOF
module: store
provides:
  s3-bucket:
    driver: ceph-rgw
    revoke: retain
EOF
cat >"$W/manifests/app.yaml" <<EOF
module: app
env: {S3_BUCKET: "", S3_ACCESS_KEY: "", S3_SECRET_KEY: ""}
requires:
  files:
    type: s3-bucket
    from: store
    env: {bucket: S3_BUCKET, access-key: S3_ACCESS_KEY, secret-key: S3_SECRET_KEY}
EOF

# mesh NODE: in $TALLY_HOME, a new mesh with the store and app on NODE.
mesh() {
	t_init
	t_node "$1" 127.0.0.1
	tly apply "$W/manifests/store.yaml" >/dev/null || t_fail "tally apply store.yaml failed"
	tly assign store "$1" --expose network --set port="$RP" --set admin-access-key="$AK" \
		--secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" >/dev/null ||
		t_fail "tally assign store $1 failed"
	tly apply "$W/manifests/app.yaml" >/dev/null || t_fail "tally apply app.yaml failed"
	tly assign app "$1" >/dev/null || t_fail "tally assign app $1 failed"
	t_tallyd_once
	t_wait_healthy 10
}

# The digest anyone can compute of the grant id (scheme 2's).
UNKEYED=$(printf '%s' app/files | b2sum -l 128 | cut -c1-16)
# unkeyed NAME: fails when NAME carries the unkeyed digest.
unkeyed() {
	case $1 in *"$UNKEYED"*) t_fail "$2 $1 carries the unkeyed digest $UNKEYED of app/files" ;; esac
}

t_say "mesh one: app's bucket on a shared RGW"
mesh node-a
B1=$(t_envget "$(t_envfile node-a app)" S3_BUCKET)
U1=$(t_grec app/files user)
t_check "the bucket is not the unkeyed digest of the grant id"
[ -n "$B1" ] || t_fail "app got no bucket"
[ "$B1" = "$(t_grec app/files resource)" ] || t_fail "delivered bucket $B1 is not the recorded $(t_grec app/files resource)"
unkeyed "$B1" "app's bucket"
unkeyed "$U1" "app's RGW user"
tly log --json --stream grant/app/files --type grant.provisioning | grep -q '"naming":3' ||
	t_fail "app's grant does not record scheme 3: $(tly log --json --stream grant/app/files --type grant.provisioning)"
t_ok "bucket $B1, user $U1 (the unkeyed digest is $UNKEYED), scheme 3 recorded"

t_check "stable across rebuild: the same bucket, healthy, nothing new on the RGW"
buckets >"$W/buckets.before"
tly rebuild >/dev/null 2>&1 || t_fail "tally rebuild failed"
t_tallyd_once
t_wait_healthy 10
tly check >"$W/check.out" 2>&1 || t_fail "tally check after rebuild: $(cat "$W/check.out")"
[ "$(t_envget "$(t_envfile node-a app)" S3_BUCKET)" = "$B1" ] || t_fail "app's bucket changed across rebuild"
buckets >"$W/buckets.after"
cmp -s "$W/buckets.before" "$W/buckets.after" ||
	t_fail "the RGW's buckets changed across rebuild: $(diff "$W/buckets.before" "$W/buckets.after")"
t_ok "still $B1 after tally rebuild and a pass"

t_say "mesh two: a second home, the same module, the same RGW"
export TALLY_HOME="$W/home2"
mesh node-b
B2=$(t_envget "$(t_envfile node-b app)" S3_BUCKET)
t_check "the two meshes name the same grant differently, and both are served"
[ -n "$B2" ] || t_fail "mesh two's app got no bucket"
[ "$B2" != "$B1" ] || t_fail "both meshes named app's bucket $B1"
unkeyed "$B2" "mesh two's bucket"
buckets | grep -qx "$B1" || t_fail "mesh one's bucket $B1 is gone"
buckets | grep -qx "$B2" || t_fail "mesh two's bucket $B2 is not on the RGW"
t_ok "mesh one $B1, mesh two $B2"

