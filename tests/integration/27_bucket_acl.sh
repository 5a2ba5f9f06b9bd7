#!/bin/sh
# A bucket ACL opened by hand (issue 21 item 22), through tally check and
# the verifier of a running tallyd, with curl as the anonymous client:
#   - the owner sets public-read (what s3cmd setacl --acl-public does):
#     an anonymous GET lists the bucket and its objects' names; tally check
#     finds privileges-changed, repairs it (exit 8), and the anonymous
#     GETs are refused (403) while the owner's keys still work;
#   - the owner grants READ to another consumer: that consumer lists the
#     bucket; a running tallyd's verification pass finds it
#     and makes the ACL private again.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"

t_ceph_start
RP=$TALLY_TEST_RGW_PORT
EP=$TALLY_TEST_RGW_ENDPOINT
AK=$TALLY_TEST_RGW_ACCESS

# as ENVFILE METHOD PATH [HEADER [HEADER]]: a SigV4 request as the env
# file's consumer (the keys through a curl config file, never argv; the
# headers, which hold no secret, on argv); the status.
as() {
	_f=$1 _m=$2 _p=$3
	shift 3
	umask 077
	printf 'user = "%s:%s"\n' "$(t_envget "$_f" S3_ACCESS_KEY)" \
		"$(t_envget "$_f" S3_SECRET_KEY)" >"$W/curl.cfg"
	curl -s -K "$W/curl.cfg" --aws-sigv4 aws:amz:default:s3 \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -H 'Content-Length: 0' \
		${1:+-H "$1"} ${2:+-H "$2"} \
		-X "$_m" -o "$W/s3.out" -w '%{http_code}' "$EP$_p"
	rm -f "$W/curl.cfg"
}
anon() { curl -s -o "$W/anon.out" -w '%{http_code}' "$EP$1"; }

mkdir -p "$W/manifests"
printf 'module: store\nprovides:\n  s3-bucket:\n    driver: ceph-rgw\n    revoke: retain\n' \
	>"$W/manifests/store.yaml"
for m in app-a app-b; do
	printf '%s\n' "module: $m" \
		'env: {S3_BUCKET: "", S3_ACCESS_KEY: "", S3_SECRET_KEY: ""}' \
		'requires:' '  files:' '    type: s3-bucket' '    from: store' \
		'    env: {bucket: S3_BUCKET, access-key: S3_ACCESS_KEY, secret-key: S3_SECRET_KEY}' \
		>"$W/manifests/$m.yaml"
done

t_say "an RGW provider, consumers app-a and app-b"
t_init
t_node node-a 127.0.0.1
tly apply "$W/manifests/store.yaml" >/dev/null || t_fail "tally apply store.yaml failed"
tly assign store node-a --expose network --set port="$RP" --set admin-access-key="$AK" \
	--secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" >/dev/null ||
	t_fail "tally assign store node-a failed"
for m in app-a app-b; do
	tly apply "$W/manifests/$m.yaml" >/dev/null && tly assign $m node-a >/dev/null ||
		t_fail "$m failed"
done
t_tallyd_once
t_wait_healthy 10
A=$(t_envfile node-a app-a)
B=$(t_envfile node-a app-b)
BA=$(t_envget "$A" S3_BUCKET)
printf 'user = "%s:%s"\n' "$(t_envget "$A" S3_ACCESS_KEY)" "$(t_envget "$A" S3_SECRET_KEY)" >"$W/a.cfg"
[ "$(curl -s -K "$W/a.cfg" --aws-sigv4 aws:amz:default:s3 -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
	-X PUT --data-binary a-data -o /dev/null -w '%{http_code}' "$EP/$BA/o.txt")" = 200 ] ||
	t_fail "app-a cannot write its bucket"
rm -f "$W/a.cfg"
[ "$(anon "/$BA")" = 403 ] || t_fail "an anonymous GET lists app-a's bucket before anything"

t_check "public-read by hand: anonymous clients list and read; tally check makes it private"
[ "$(as "$A" PUT "/$BA?acl=" 'x-amz-acl: public-read')" = 200 ] || t_fail "app-a cannot set public-read: $(cat "$W/s3.out")"
[ "$(anon "/$BA")" = 200 ] || t_fail "public-read, yet the anonymous listing is refused"
grep -q "o.txt" "$W/anon.out" || t_fail "the anonymous listing does not show the object: $(cat "$W/anon.out")"
t_expect_exit 8 "tally check" tly check
tly log --json --stream grant/app-a/files --type grant.drifted | tail -n 1 | grep -q "AllUsers" ||
	t_fail "the drift does not name the public grant: $(tly log --json --stream grant/app-a/files --type grant.drifted | tail -n 1)"
[ "$(anon "/$BA")" = 403 ] || t_fail "after tally check an anonymous GET still lists the bucket"
[ "$(as "$A" GET "/$BA/o.txt")" = 200 ] || t_fail "app-a cannot read its object after the repair"
t_expect_exit 0 "tally check after the repair" tly check
t_ok "anonymous 200 before, 403 after; the owner still reads; drifted + repaired recorded"

t_check "READ to app-b by hand: found by a running tallyd's verification, made private"
IDA=$(t_grec app-a/files user)
IDB=$(t_grec app-b/files user)
[ "$(as "$A" PUT "/$BA?acl=" "x-amz-grant-read: id=\"$IDB\"" "x-amz-grant-full-control: id=\"$IDA\"")" = 200 ] ||
	t_fail "app-a cannot grant READ to app-b: $(cat "$W/s3.out")"
[ "$(as "$B" GET "/$BA")" = 200 ] || t_fail "app-b cannot list app-a's bucket after the grant"
t_tallyd_start --verify-interval 1
_end=$(($(t_now_ms) + 20000))
until [ "$(as "$B" GET "/$BA")" = 403 ]; do
	[ "$(t_now_ms)" -lt "$_end" ] || t_fail "tallyd did not make app-a's ACL private within 20 s: $(tail -n 5 "$T_DLOG")"
	sleep 0.2
done
t_tallyd_stop
tly log --json --stream grant/app-a/files --type grant.drifted | tail -n 1 | grep -q "$IDB" ||
	t_fail "the drift does not name app-b's user: $(tly log --json --stream grant/app-a/files --type grant.drifted | tail -n 1)"
[ "$(as "$A" GET "/$BA")" = 200 ] || t_fail "app-a cannot list its bucket after the repair"
t_ok "app-b 200 before, 403 after tallyd's pass; app-a still lists it"
