#!/bin/sh
# Access below ownership on a Ceph RGW: a requirement with access: read
# (or read-write) and of: MODULE/REQUIREMENT gets a user and key of its
# own on the bucket another requirement's grant owns.
#   - the owner writes objects; the reader GETs and LISTs them and
#     cannot PUT or DELETE (403); the read-write user PUTs;
#   - every grant healthy beside the others (the owner's checks keep
#     its readers' policy statements), no grant.drifted;
#   - the bucket policy deleted by hand is repaired;
#   - the reader's key rotates (v2 works, v1 refused after the ack);
#   - the owner removed: the readers are revoked, their keys refused;
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"

t_ceph_start
RP=$TALLY_TEST_RGW_PORT
EP=$TALLY_TEST_RGW_ENDPOINT
AK=$TALLY_TEST_RGW_ACCESS
RADM="radosgw-admin -c $CEPH_DIR/ceph.conf -n client.rgw.a"

# s3 AK SK METHOD PATH [DATA]: the HTTP status of a SigV4 request; the
# body in $W/s3.out.  The keys go through a curl config file, never argv.
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
# as ENVFILE METHOD PATH [DATA]: as the env file's consumer.
as() {
	_f=$1; shift
	s3 "$(t_envget "$_f" S3_ACCESS_KEY)" "$(t_envget "$_f" S3_SECRET_KEY)" "$@"
}

mkdir -p "$W/manifests"
cat >"$W/manifests/store.yaml" <<EOF
module: store
provides:
  s3-bucket:
    driver: ceph-rgw
    revoke: retain
EOF
# consumer NAME [ACCESS]: requirement "files", ACCESS to game/files.
consumer() {
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {S3_ENDPOINT: "", S3_REGION: "", S3_BUCKET: "", S3_ACCESS_KEY: "", S3_SECRET_KEY: ""}
requires:
  files:
    type: s3-bucket
    from: store
EOF
	[ -n "${2:-}" ] && printf '    access: %s\n    of: game/files\n' "$2" >>"$W/manifests/$1.yaml"
	printf '    env: {endpoint: S3_ENDPOINT, region: S3_REGION, bucket: S3_BUCKET, access-key: S3_ACCESS_KEY, secret-key: S3_SECRET_KEY}\n' \
		>>"$W/manifests/$1.yaml"
	echo "$W/manifests/$1.yaml"
}

t_say "a Ceph RGW provider; game owns a bucket, reporting reads it, writer writes it"
t_init
t_node node-a 127.0.0.1
tly apply "$W/manifests/store.yaml" >/dev/null || t_fail "tally apply store.yaml failed"
tly assign store node-a --expose network --set port="$RP" --set admin-access-key="$AK" \
	--secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" >/dev/null ||
	t_fail "tally assign store node-a failed"
tly apply "$(consumer game)" >/dev/null || t_fail "tally apply game failed"
tly apply "$(consumer reporting read)" "$(consumer writer read-write)" >/dev/null ||
	t_fail "tally apply reporting writer failed"
for m in game reporting writer; do
	tly assign $m node-a >/dev/null || t_fail "tally assign $m failed"
done
t_tallyd_start --interval 1 --verify-interval 2
t_wait_healthy 90 game
t_wait_healthy 90 reporting
t_wait_healthy 90 writer
fg=$(t_envfile node-a game)
fr=$(t_envfile node-a reporting)
fw=$(t_envfile node-a writer)
B=$(t_envget "$fg" S3_BUCKET)
[ -n "$B" ] && [ "$(t_envget "$fr" S3_BUCKET)" = "$B" ] && [ "$(t_envget "$fw" S3_BUCKET)" = "$B" ] ||
	t_fail "the readers are not told game's bucket ($B): $(t_envget "$fr" S3_BUCKET), $(t_envget "$fw" S3_BUCKET)"
RK=$(t_envget "$fr" S3_ACCESS_KEY)
[ "$RK" != "$(t_envget "$fg" S3_ACCESS_KEY)" ] && [ "$RK" != "$(t_envget "$fw" S3_ACCESS_KEY)" ] ||
	t_fail "the keys are not each its own"
t_ok "game's bucket $B; reporting with key $RK"

t_check "read: GET and LIST, no PUT or DELETE"
printf 'hello %s\n' 1 >"$W/o1"
for i in 1 2 3; do
	[ "$(as "$fg" PUT "/$B/o$i" "@$W/o1")" = 200 ] || t_fail "game cannot write o$i: $(cat "$W/s3.out")"
done
[ "$(as "$fr" GET "/$B/o2")" = 200 ] || t_fail "reporting cannot GET o2: $(cat "$W/s3.out")"
cmp -s "$W/s3.out" "$W/o1" || t_fail "reporting read other bytes"
[ "$(as "$fr" GET "/$B")" = 200 ] || t_fail "reporting cannot LIST: $(cat "$W/s3.out")"
[ "$(grep -o '<Key>[^<]*</Key>' "$W/s3.out" | wc -l)" = 3 ] || t_fail "reporting does not list 3 objects"
st=$(as "$fr" PUT "/$B/mine" "@$W/o1"); [ "$st" = 403 ] || t_fail "reporting's PUT got $st, not 403"
st=$(as "$fr" DELETE "/$B/o1"); [ "$st" = 403 ] || t_fail "reporting's DELETE got $st, not 403"
[ "$(as "$fg" GET "/$B/o1")" = 200 ] || t_fail "o1 is gone"
t_ok "GET o2, LIST 3; PUT and DELETE 403"

t_check "read-write: PUT and DELETE"
[ "$(as "$fw" PUT "/$B/w1" "@$W/o1")" = 200 ] || t_fail "writer cannot PUT: $(cat "$W/s3.out")"
[ "$(as "$fw" DELETE "/$B/o3")" = 204 ] || t_fail "writer cannot DELETE: $(cat "$W/s3.out")"
[ "$(as "$fr" GET "/$B/w1")" = 200 ] || t_fail "reporting cannot read writer's object"
t_ok "writer wrote w1 and deleted o3"

t_check "every grant healthy beside the others"
sleep 5	# two verification rounds at --verify-interval 2
for g in game/files reporting/files writer/files; do
	tly log --json --stream "grant/$g" --type grant.drifted | grep -q . &&
		t_fail "$g drifted: $(tly log --json --stream "grant/$g" --type grant.drifted | tail -n 1)"
done
for m in game reporting writer; do
	tly status $m >"$W/status.txt" || { cat "$W/status.txt" >&2; t_fail "$m is not healthy"; }
done
t_ok "no drift on game/files, reporting/files, writer/files"

t_check "the bucket policy deleted by hand is repaired"
before_del=$(t_head_seq)
GU=$($RADM bucket stats --bucket="$B" 2>/dev/null | sed -n 's/.*"owner": "\(.*\)",/\1/p' | head -n 1)
[ -n "$GU" ] || t_fail "no owner of $B"
$RADM key create --uid="$GU" --key-type=s3 --access-key=HANDKEY0 --secret-key=handsecret0 >/dev/null 2>&1 ||
	t_fail "radosgw-admin key create failed"
st=$(s3 HANDKEY0 handsecret0 DELETE "/$B?policy="); case $st in 200 | 204) ;; *) t_fail "DELETE ?policy got $st" ;; esac
$RADM key rm --uid="$GU" --access-key=HANDKEY0 >/dev/null 2>&1 || t_fail "radosgw-admin key rm failed"
# The verifier (every 2 s) may repair it before the GET below: then the
# repair is on the record after the deletion, which is what counts.
st=$(as "$fr" GET "/$B/o2")
if [ "$st" != 403 ]; then
	tly log --json --stream grant/reporting/files --type grant.repaired | t_jfields seq |
		awk -v s="$before_del" '$1 > s { f = 1 } END { exit !f }' ||
		t_fail "with no policy reporting's GET got $st, and nothing was repaired"
fi
t_grant_wait 30 reporting/files grant.repaired >/dev/null
[ "$(as "$fr" GET "/$B/o2")" = 200 ] || t_fail "not repaired: $(cat "$W/s3.out")"
t_ok "policy deleted (GET 403), repaired (GET 200)"

t_say "reporting's key rotates like any"
tly rotate reporting/files >/dev/null || t_fail "tally rotate failed"
t_grant_wait 30 reporting/files credential.activated >/dev/null
cp "$fr" "$W/v1.env"
end=$(($(t_now_ms) + 10000))
until [ "$(t_envget "$(t_envfile node-a reporting)" S3_ACCESS_KEY)" != "$RK" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "v2 not delivered"
	sleep 0.1
done
fr=$(t_envfile node-a reporting)
[ "$(as "$fr" GET "/$B/o2")" = 200 ] || t_fail "v2 cannot read"
tly ack node-a reporting 2 >/dev/null
t_grant_wait 30 reporting/files credential.retired >/dev/null
st=$(as "$W/v1.env" GET "/$B/o2"); [ "$st" = 403 ] || t_fail "v1 still reads ($st)"
[ "$(as "$fr" GET "/$B/o2")" = 200 ] || t_fail "v2 cannot read after the retirement"
t_ok "v2 ($(t_envget "$fr" S3_ACCESS_KEY)) reads; v1 ($RK) refused"

t_say "game removed: the readers go with it"
# The env files go with the grants: their keys are kept to try after.
cp "$fr" "$W/r.env"; cp "$fw" "$W/w.env"; fr=$W/r.env; fw=$W/w.env
tly remove game --yes >/dev/null || t_fail "tally remove game failed"
t_grant_wait 60 game/files grant.revoked >/dev/null
t_grant_wait 60 reporting/files grant.revoked >/dev/null
t_grant_wait 60 writer/files grant.revoked >/dev/null
st=$(as "$fr" GET "/$B/o2"); [ "$st" = 403 ] || t_fail "reporting still reads ($st)"
st=$(as "$fw" GET "/$B/o2"); [ "$st" = 403 ] || t_fail "writer still reads ($st)"
t_ok "reporting/files and writer/files revoked with game/files; their keys refused"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
