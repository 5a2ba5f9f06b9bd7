#!/bin/sh
# Adopting a lost mesh's Ceph RGW objects (tally adopt --from-mesh): the
# RGW's names are keyed by the mesh's master key, so a rebuilt home
# cannot compute the lost home's user and bucket; it finds them by
# their mark ("tally mesh MESH grant GRANT", the user's display-name)
# through tallyd --find-adopt.  Home A provisions a bucket and writes to
# it; A is lost; home C, rebuilt with the same modules, adopts A's user
# and bucket, its consumer reads A's object with C's keys (A's key no
# longer opens it), the user is marked with C's mesh, and the grant
# keeps them through a rotation; A, back, is refused there; C's purge
# deletes them.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"

t_ceph_start
EP=$TALLY_TEST_RGW_ENDPOINT
AK=$TALLY_TEST_RGW_ACCESS
RADM="radosgw-admin -c $CEPH_DIR/ceph.conf -n client.rgw.a"

HA=$TALLY_HOME
HC=$W/homeC
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
	_e=$W/env-$(basename "$1")-$(date +%s%N).env
	( umask 077; th "$1" env node-a app --node-key "$W/keys-$(basename "$1")/node-a.key" \
		>"$_e" 2>/dev/null ) || t_fail "tally env node-a app on $1 failed"
	echo "$_e"
}
# get ENVFILE OBJECT: the object, read with the delivered keys.
get() {
	[ "$(s3 "$(t_envget "$1" S3_ACCESS_KEY)" "$(t_envget "$1" S3_SECRET_KEY)" GET \
		"/$(t_envget "$1" S3_BUCKET)/$2")" = 200 ] || return 1
	cat "$W/s3.out"
}
mark_of() { $RADM user info --uid="$1" 2>/dev/null | sed -n 's/.*"display_name": "\(.*\)",/\1/p'; }
mesh_of() { th "$1" mesh --json | t_jstr mesh; }

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
env: {S3_ENDPOINT: "", S3_BUCKET: "", S3_ACCESS_KEY: "", S3_SECRET_KEY: ""}
requires:
  files:
    type: s3-bucket
    from: store
    env: {endpoint: S3_ENDPOINT, bucket: S3_BUCKET, access-key: S3_ACCESS_KEY, secret-key: S3_SECRET_KEY}
EOF
# mesh HOME: a home declaring store and app on node-a, not yet reconciled.
mesh() {
	th "$1" init >/dev/null || t_fail "tally init $1 failed"
	mkdir -p "$W/keys-$(basename "$1")"
	th "$1" node add node-a --routable-name 127.0.0.1 \
		--key-out "$W/keys-$(basename "$1")/node-a.key" >/dev/null || t_fail "node add on $1"
	th "$1" apply "$W/manifests/store.yaml" >/dev/null || t_fail "tally apply store on $1 failed"
	th "$1" assign store node-a --expose network --set port="$TALLY_TEST_RGW_PORT" \
		--set admin-access-key="$AK" --secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" \
		>/dev/null || t_fail "tally assign store on $1 failed"
	th "$1" apply "$W/manifests/app.yaml" >/dev/null && th "$1" assign app node-a >/dev/null ||
		t_fail "app on $1 failed"
}

t_say "home A provisions a bucket and writes to it"
mesh "$HA"
t_tallyd_once --home "$HA"
MA=$(mesh_of "$HA")
EA=$(envof "$HA")
UA=$(th "$HA" log --json --stream grant/app/files --type grant.provisioning | head -n 1 | t_jstr user)
BA=$(t_envget "$EA" S3_BUCKET)
[ -n "$UA" ] && [ -n "$BA" ] || t_fail "A's user '$UA', bucket '$BA'"
[ "$(mark_of "$UA")" = "tally mesh $MA grant app/files" ] || t_fail "A's user's mark: $(mark_of "$UA")"
[ "$(s3 "$(t_envget "$EA" S3_ACCESS_KEY)" "$(t_envget "$EA" S3_SECRET_KEY)" PUT "/$BA/kept.txt" "a's data")" = 200 ] ||
	t_fail "A's consumer cannot write its bucket $BA"
t_ok "A (mesh $MA): user $UA, bucket $BA, one object"

t_say "home A is lost; home C, rebuilt, adopts A's user and bucket on purpose"
mesh "$HC"
MC=$(mesh_of "$HC")
[ "$MC" != "$MA" ] || t_fail "one mesh id for A and C"
t_check "tally adopt --from-mesh A --all finds A's objects by their mark"
th "$HC" adopt --from-mesh "$MA" --all >"$W/adopt.out" 2>&1 || t_fail "tally adopt on C: $(cat "$W/adopt.out")"
cat "$W/adopt.out"
grep -q "adopted from mesh $MA: 1 grant(s)" "$W/adopt.out" || t_fail "adopt does not say what it took"
grep -q "app/files (s3-bucket): takes over $BA" "$W/adopt.out" || t_fail "adopt does not name the bucket $BA"
grep -q "user \"$UA\" and bucket \"$BA\" (1 object(s)" "$W/adopt.out" || t_fail "adopt does not name A's user $UA and bucket"
th "$HC" log --json --type mesh.adopted >"$W/adopted.json"
grep -q "\"from\":\"$MA\"" "$W/adopted.json" && grep -q "\"resource\":\"$BA\"" "$W/adopted.json" &&
	grep -q "\"login\":\"$UA\"" "$W/adopted.json" || t_fail "mesh.adopted: $(cat "$W/adopted.json")"
t_expect_exit 4 "adopting the same again" th "$HC" adopt --from-mesh "$MA" app/files
t_ok "C adopted $UA and $BA"

t_check "C's grant lands on A's bucket with A's data, re-marked with mesh C"
t_tallyd_once --home "$HC"
EC=$(envof "$HC")
[ "$(t_envget "$EC" S3_BUCKET)" = "$BA" ] || t_fail "C got bucket $(t_envget "$EC" S3_BUCKET), not A's $BA"
UC=$(th "$HC" log --json --stream grant/app/files --type grant.provisioning | head -n 1 | t_jstr user)
[ "$UC" = "$UA" ] || t_fail "C's user is $UC, not A's $UA"
[ "$(t_envget "$EC" S3_ACCESS_KEY)" != "$(t_envget "$EA" S3_ACCESS_KEY)" ] || t_fail "C delivered A's key"
[ "$(get "$EC" kept.txt)" = "a's data" ] || t_fail "C's consumer does not read A's object: $(cat "$W/s3.out")"
[ "$(get "$EA" kept.txt 2>/dev/null)" != "a's data" ] || t_fail "A's delivered key still reads the adopted bucket"
[ "$(mark_of "$UA")" = "tally mesh $MC grant app/files" ] || t_fail "$UA is not re-marked with mesh C: $(mark_of "$UA")"
t_expect_exit 0 "tally check --all on C" th "$HC" check --all
t_ok "C's consumer reads A's object in $BA; $UA is marked with mesh $MC; check clean"

t_check "C's rotation keeps the adopted user and bucket"
t_tallyd_start --home "$HC" --interval 1
CPID=$T_DPID
th "$HC" rotate app/files >/dev/null || t_fail "tally rotate on C failed"
_end=$(($(t_now_ms) + 30000))
until th "$HC" log --json --stream grant/app/files --type credential.activated | grep -q '"version":2'; do
	[ "$(t_now_ms)" -lt "$_end" ] || { tail -n 20 "$T_DLOG" >&2; t_fail "C's v2 not activated in 30 s"; }
	sleep 0.2
done
th "$HC" ack node-a app 2 >/dev/null || t_fail "tally ack node-a app 2 on C failed"
_end=$(($(t_now_ms) + 30000))
until [ "$(th "$HC" log --json --type rotation.completed | grep -c .)" -ge 1 ]; do
	[ "$(t_now_ms)" -lt "$_end" ] || { tail -n 20 "$T_DLOG" >&2; t_fail "C's rotation did not complete in 30 s"; }
	sleep 0.2
done
kill -TERM "$CPID"; t_wait_exit "$CPID" 10
EC2=$(envof "$HC")
[ "$(t_envget "$EC2" S3_SECRET_KEY)" != "$(t_envget "$EC" S3_SECRET_KEY)" ] || t_fail "the rotation delivered the same key"
[ "$(t_envget "$EC2" S3_BUCKET)" = "$BA" ] || t_fail "after the rotation C's bucket is $(t_envget "$EC2" S3_BUCKET)"
[ "$(get "$EC2" kept.txt)" = "a's data" ] || t_fail "C's rotated key does not read A's object"
[ "$(get "$EC" kept.txt 2>/dev/null)" != "a's data" ] || t_fail "C's retired key still reads"
[ "$(mark_of "$UA")" = "tally mesh $MC grant app/files" ] || t_fail "the rotation changed the mark: $(mark_of "$UA")"
t_expect_exit 0 "tally check --all on C after the rotation" th "$HC" check --all
t_ok "rotated on $UA and $BA"

t_say "the lost home, back, is refused there (owned by mesh C)"
$RADM user info --uid="$UA" >"$W/u.before" 2>/dev/null
t_expect_exit 6 "tally check on A" th "$HA" check
grep -q "owned by mesh $(printf %s "$MC" | cut -c1-12)\.\.\., not this one" "$W/last.out" "$W/last.err" ||
	t_fail "A's check does not name the owner: $(cat "$W/last.out" "$W/last.err")"
th "$HA" remove app --yes >/dev/null 2>&1 || t_fail "tally remove app on A"
TALLY_HOME=$HA "$TALLY_BIN/tallyd" --once --once-timeout 20 2>>"$T_DLOG" || true
$RADM user info --uid="$UA" >"$W/u.after" 2>/dev/null
diff "$W/u.before" "$W/u.after" >&2 || t_fail "A changed C's user"
[ "$(get "$EC2" kept.txt)" = "a's data" ] || t_fail "C's consumer lost its bucket after A's attempts"
t_ok "A's check and revocation refused; C's user and bucket unchanged"

t_say "C's purge deletes the adopted user and bucket"
th "$HC" remove app --yes >/dev/null || t_fail "tally remove app on C failed"
t_tallyd_once --home "$HC"
th "$HC" purge app/files --yes >/dev/null || t_fail "tally purge app/files on C failed"
t_tallyd_once --home "$HC"
$RADM user info --uid="$UA" >/dev/null 2>&1 && t_fail "$UA survived C's purge"
$RADM bucket stats --bucket="$BA" >/dev/null 2>&1 && t_fail "$BA survived C's purge"
t_ok "C purged $UA and $BA"

t_say "done"
