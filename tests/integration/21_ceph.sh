#!/bin/sh
# The ceph-rgw driver (drivers/ceph_rgw.c) end to end through the real
# binaries, against a throwaway single-node Ceph RGW (tests/harness/ceph.sh):
# a provider module "store" granting s3-bucket, consumers mapping every
# field.  The cases of the other drivers' scripts where they apply:
#   - provisioned and delivered: endpoint, region, bucket, access-key,
#     secret-key; the keys read and write the bucket; no secret in the log;
#   - exclusive: A's keys on B's bucket: read, list, write, delete all 403;
#   - verified: healthy; user suspended -> privileges-changed, repaired;
#     key removed -> credential-mismatch, repaired; bucket deleted ->
#     missing, flagged twice and NOT recreated;
#   - rotated with holder acks and no lockout: a shared grant on two
#     nodes, a poller reading the bucket with every delivered key all
#     along; the old key works until the last ack, then 403;
#     a second rotation with the add's reply lost (TALLY_FAULT) and a
#     retirement done on the RGW but not recorded (tallyd killed): each
#     step once, no lockout;
#   - revoked: retain suspends the user and keeps the bucket and its
#     object; purge deletes the objects, the bucket and the user;
#   - a kill storm: tallyd SIGKILLed repeatedly while 10 grants are
#     provisioned: the RGW's users and buckets are exactly the grants'.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"

t_ceph_start
RP=$TALLY_TEST_RGW_PORT
EP=$TALLY_TEST_RGW_ENDPOINT
AK=$TALLY_TEST_RGW_ACCESS
RADM="radosgw-admin -c $CEPH_DIR/ceph.conf -n client.rgw.a"

# s3 AK SK METHOD PATH [DATA]: the HTTP status of a SigV4 request; the body
# in $W/s3.out.  The keys go through a curl config file, never argv.
s3() {
	umask 077
	printf 'user = "%s:%s"\n' "$1" "$2" >"$W/curl.cfg"
	_s_d=
	[ $# -ge 5 ] && _s_d=$5
	if [ -n "$_s_d" ]; then
		curl -s -K "$W/curl.cfg" --aws-sigv4 aws:amz:default:s3 \
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X "$3" \
			--data-binary "$_s_d" -o "$W/s3.out" -w '%{http_code}' "$EP$4"
	elif [ "$3" = HEAD ]; then
		curl -s -K "$W/curl.cfg" --aws-sigv4 aws:amz:default:s3 \
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -I \
			-o "$W/s3.out" -w '%{http_code}' "$EP$4"
	else
		curl -s -K "$W/curl.cfg" --aws-sigv4 aws:amz:default:s3 \
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X "$3" \
			-o "$W/s3.out" -w '%{http_code}' "$EP$4"
	fi
	rm -f "$W/curl.cfg"
}
adm() { s3 "$AK" "$(cat "$TALLY_TEST_RGW_SECRETFILE")" "$@"; }
# as ENVFILE METHOD PATH [DATA]: as the env file's consumer.
as() {
	_f=$1; shift
	s3 "$(t_envget "$_f" S3_ACCESS_KEY)" "$(t_envget "$_f" S3_SECRET_KEY)" "$@"
}
users() { $RADM user list 2>/dev/null | tr -d '[]", ' | grep -v -x -e '' -e tally-admin | sort; }
buckets() { $RADM bucket list 2>/dev/null | tr -d '[]", ' | grep -v -e '^$' -e '^tally-canary-' | sort; }

# ugname MODULE: the RGW user of MODULE's requirement "files", as its
# first intent recorded it (the name is keyed by the mesh: t_grec).
ugname() { printf '%s' "$(t_grec "$1/files" user)"; }

t_wait_log() {	# SECONDS STREAM TYPE [GREP]: prints the first match
	_w_end=$(($(t_now_ms) + $1 * 1000))
	while :; do
		_w_l=$(tly log --json --stream "$2" --type "$3" |
			grep -e "${4:-.}" | head -n 1) || true
		if [ -n "$_w_l" ]; then
			printf '%s\n' "$_w_l"
			return 0
		fi
		if [ "$(t_now_ms)" -gt "$_w_end" ]; then
			tail -n 20 "$T_DLOG" >&2
			t_fail "no $3 on $2 within $1 s"
		fi
		sleep 0.1
	done
}

mkdir -p "$W/manifests"
cat >"$W/manifests/store.yaml" <<EOF
module: store
provides:
  s3-bucket:
    driver: ceph-rgw
    revoke: retain
EOF
# consumer NAME: one s3-bucket requirement "files" -> S3_*.
consumer() {
	cat >"$W/manifests/$1.yaml" <<EOF
module: $1
env: {S3_ENDPOINT: "", S3_REGION: "", S3_BUCKET: "", S3_ACCESS_KEY: "", S3_SECRET_KEY: ""}
requires:
  files:
    type: s3-bucket
    from: store
    env: {endpoint: S3_ENDPOINT, region: S3_REGION, bucket: S3_BUCKET, access-key: S3_ACCESS_KEY, secret-key: S3_SECRET_KEY}
EOF
	echo "$W/manifests/$1.yaml"
}

t_say "a Ceph RGW provider on node-a; consumers app-a, app-b, keep, trash"
t_init
t_node node-a 127.0.0.1
t_node node-b localhost
tly apply "$W/manifests/store.yaml" >/dev/null || t_fail "tally apply store.yaml failed"
tly assign store node-a --expose network --set port="$RP" --set admin-access-key="$AK" \
	--secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" >/dev/null ||
	t_fail "tally assign store node-a failed"
tly providers --tag object-store >"$W/prov.txt" 2>&1 || t_fail "tally providers --tag object-store failed: $(cat "$W/prov.txt")"
grep -q s3-bucket "$W/prov.txt" || t_fail "tally providers --tag object-store does not list s3-bucket: $(cat "$W/prov.txt")"
for m in app-a app-b keep trash; do
	tly apply "$(consumer $m)" >/dev/null || t_fail "tally apply $m failed"
	tly assign $m node-a >/dev/null || t_fail "tally assign $m failed"
done
t_tallyd_once
t_wait_healthy 10

A=$(t_envfile node-a app-a)
B=$(t_envfile node-a app-b)
BA=$(t_envget "$A" S3_BUCKET)
BB=$(t_envget "$B" S3_BUCKET)
UA=$(ugname app-a)
t_check "delivered: endpoint, region, bucket, keys; the bucket is the grant's name"
[ "$BA" = "$(printf '%s' "$UA" | tr _ -)" ] || t_fail "app-a's bucket is $BA, expected $(printf '%s' "$UA" | tr _ -)"
[ "$(t_envget "$A" S3_ENDPOINT)" = "http://127.0.0.1:$RP" ] || t_fail "app-a's endpoint is $(t_envget "$A" S3_ENDPOINT)"
[ "$(t_envget "$A" S3_REGION)" = default ] || t_fail "app-a's region is $(t_envget "$A" S3_REGION)"
[ "$BA" != "$BB" ] || t_fail "both consumers got bucket $BA"
[ "$(as "$A" PUT "/$BA/hello.txt" a-data)" = 200 ] || t_fail "app-a cannot write its bucket: $(cat "$W/s3.out")"
[ "$(as "$A" GET "/$BA/hello.txt")" = 200 ] && [ "$(cat "$W/s3.out")" = a-data ] ||
	t_fail "app-a cannot read back its object"
MESH=$(tly mesh --json | t_jstr mesh)
$RADM user info --uid="$UA" 2>/dev/null | grep -q "\"display_name\": \"tally mesh $MESH grant app-a/files\"" ||
	t_fail "user $UA does not carry the grant's mark (with the mesh $MESH)"
SKA=$(t_envget "$A" S3_SECRET_KEY)
tly log --json | grep -q "$SKA" && t_fail "app-a's secret key is in the log"
grep -rqs "$SKA" "$T_DLOG" && t_fail "app-a's secret key is in tallyd's log"
grep -rqs "$SKA" "$CEPH_DIR/log" && t_fail "app-a's secret key is in the RGW's logs"
t_ok "app-a: bucket $BA as user $UA, writes and reads; app-b: $BB; no secret in the logs"

t_check "exclusive: app-a's keys on app-b's bucket are refused"
[ "$(as "$B" PUT "/$BB/secret" b-data)" = 200 ] || t_fail "app-b cannot write its bucket"
[ "$(as "$A" PUT "/$BB/secret" overwritten)" = 403 ] || t_fail "app-a could write app-b's object"
for c in "GET /$BB/secret" "DELETE /$BB/secret" "GET /$BB" "HEAD /$BB" "DELETE /$BB"; do
	# shellcheck disable=SC2086
	st=$(as "$A" $c)
	[ "$st" = 403 ] || t_fail "app-a: $c got $st"
done
[ "$(as "$B" GET "/$BB/secret")" = 200 ] && [ "$(cat "$W/s3.out")" = b-data ] || t_fail "app-b's object changed"
t_ok "GET, PUT, DELETE of B's object, list, HEAD and DELETE of B's bucket: all 403"

t_say "verification"
t_expect_exit 0 "tally check --all (healthy)" tly check --all
t_check "user suspended out of band: privileges-changed, repaired"
$RADM user suspend --uid="$UA" >/dev/null 2>&1 || t_fail "radosgw-admin user suspend failed"
[ "$(as "$A" HEAD "/$BA")" = 403 ] || t_fail "the suspension did not take"
t_expect_exit 8 "tally check app-a/files (suspended)" tly check app-a/files
grep -q privileges-changed "$W/last.out" || t_fail "not reported as privileges-changed: $(cat "$W/last.out")"
[ "$(as "$A" HEAD "/$BA")" = 200 ] || t_fail "app-a's key does not work after the repair"
t_expect_exit 0 "tally check app-a/files (after the repair)" tly check app-a/files
t_ok "suspended, repaired: app-a reads its bucket again"
t_check "key removed out of band: credential-mismatch, re-added"
$RADM key rm --uid="$UA" --access-key="$(t_envget "$A" S3_ACCESS_KEY)" >/dev/null 2>&1 || t_fail "radosgw-admin key rm failed"
[ "$(as "$A" HEAD "/$BA")" = 403 ] || t_fail "the removed key still works"
t_expect_exit 8 "tally check app-a/files (key removed)" tly check app-a/files
grep -q credential-mismatch "$W/last.out" || t_fail "not reported as credential-mismatch: $(cat "$W/last.out")"
[ "$(as "$A" GET "/$BA/hello.txt")" = 200 ] || t_fail "app-a's key does not work after the repair"
t_ok "repaired: the delivered key reads app-a's object again"
t_check "bucket deleted: missing, flagged, never recreated"
$RADM bucket rm --bucket="$BB" --purge-objects >/dev/null 2>&1 || t_fail "radosgw-admin bucket rm failed"
t_expect_exit 6 "tally check app-b/files (bucket deleted)" tly check app-b/files
t_expect_exit 6 "tally check app-b/files (again)" tly check app-b/files
buckets | grep -qx "$BB" && t_fail "the deleted bucket was recreated"
t_ok "missing twice; bucket $BB not recreated"
# What an operator does with it (a restore would make it again empty).
tly remove app-b --yes >/dev/null || t_fail "tally remove app-b failed"

t_say "rotation: a shared grant held on node-a and node-b, acks, no lockout"
tly apply "$(consumer game)" >/dev/null || t_fail "tally apply game failed"
tly assign game node-a >/dev/null && tly assign game node-b >/dev/null ||
	t_fail "tally assign game failed"
G=game/files
t_tallyd_start --interval 1
t_wait_healthy 30 game
GA=$(t_envfile node-a game)
GB=$(t_envget "$GA" S3_BUCKET)
cp "$GA" "$W/v1.env"
[ "$(as "$W/v1.env" PUT "/$GB/k" v1)" = 200 ] || t_fail "game cannot write its bucket"
: >"$W/poll.fail"
: >"$W/poll.ok"
poller() {
	while [ ! -f "$W/poll.stop" ]; do
		for n in node-a node-b; do
			c=$(cat "$(t_envfile "$n" game)" 2>/dev/null) || {
				echo "$n: no env file" >>"$W/poll.fail"; continue; }
			printf '%s\n' "$c" >"$W/poll.$n.env"
			ak=$(t_envget "$W/poll.$n.env" S3_ACCESS_KEY)
			sk=$(t_envget "$W/poll.$n.env" S3_SECRET_KEY)
			umask 077
			printf 'user = "%s:%s"\n' "$ak" "$sk" >"$W/poll.cfg"
			o=$(curl -s -K "$W/poll.cfg" --aws-sigv4 aws:amz:default:s3 \
				-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -o /dev/null \
				-w '%{http_code}' "$EP/$GB/k")
			if [ "$o" = 200 ]; then
				echo "$n $ak" >>"$W/poll.ok"
			else
				echo "$(date +%T.%N) $n: $o" >>"$W/poll.fail"
			fi
		done
	done
}
poller &
PPOLL=$!
_t_pids="$_t_pids $PPOLL"
sleep 0.5
[ -s "$W/poll.ok" ] || t_fail "the poller read nowhere: $(cat "$W/poll.fail")"
tly rotate "$G" >/dev/null || t_fail "tally rotate $G failed"
t_wait_log 20 "grant/$G" credential.activated >/dev/null
end=$(($(t_now_ms) + 10000))
for n in node-a node-b; do
	until [ "$(t_envget "$(t_envfile "$n" game)" S3_SECRET_KEY)" != "$(t_envget "$W/v1.env" S3_SECRET_KEY)" ]; do
		[ "$(t_now_ms)" -lt "$end" ] || t_fail "$n's env file does not hold v2"
		sleep 0.05
	done
done
cp "$GA" "$W/v2.env"
[ "$(t_envget "$W/v2.env" S3_BUCKET)" = "$GB" ] || t_fail "v2 names another bucket"
[ "$(t_envget "$W/v2.env" S3_ACCESS_KEY)" != "$(t_envget "$W/v1.env" S3_ACCESS_KEY)" ] || t_fail "v2 has v1's access key"
t_check "between add and retire both keys work, on the same user"
[ "$(as "$W/v1.env" GET "/$GB/k")" = 200 ] || t_fail "v1 no longer works before any ack"
[ "$(as "$W/v2.env" GET "/$GB/k")" = 200 ] || t_fail "v2 does not work"
GU=$(ugname game)
[ "$($RADM user info --uid="$GU" 2>/dev/null | grep -c '"access_key"')" -eq 2 ] ||
	t_fail "user $GU does not hold two keys"
t_ok "user $GU: two keys, both read the bucket"
tly ack node-a game 2 >/dev/null || t_fail "tally ack node-a game 2 failed"
sleep 3
[ "$(as "$W/v1.env" GET "/$GB/k")" = 200 ] || t_fail "v1 stopped working while node-b has not acknowledged"
tly log --json --stream "grant/$G" --type credential.retired | grep -q . &&
	t_fail "credential.retired before node-b acknowledged"
t_expect_exit 0 "tally check $G (mid-rotation)" tly check "$G"
t_ok "after node-a's ack only: v1 still works, nothing retired, the grant checks clean"
tly ack node-b game 2 >/dev/null || t_fail "tally ack node-b game 2 failed"
ret=$(t_wait_log 20 "grant/$G" credential.retired)
t_wait_log 10 "grant/$G" rotation.completed >/dev/null
printf '%s' "$ret" | grep -q '"forced":false' || t_fail "retirement forced: $ret"
[ "$(as "$W/v1.env" GET "/$GB/k")" = 403 ] || t_fail "the retired v1 key still works"
[ "$(as "$W/v2.env" GET "/$GB/k")" = 200 ] && [ "$(cat "$W/s3.out")" = v1 ] || t_fail "v2 does not read the data"
[ "$($RADM user info --uid="$GU" 2>/dev/null | grep -c '"access_key"')" -eq 1 ] || t_fail "the user still holds two keys"
touch "$W/poll.stop"
t_wait_exit "$PPOLL" 15
if [ -s "$W/poll.fail" ]; then
	cat "$W/poll.fail" >&2
	t_fail "$(wc -l <"$W/poll.fail") reads with delivered keys failed during the rotation"
fi
[ "$(cut -d' ' -f2 "$W/poll.ok" | sort -u | wc -l)" -ge 2 ] || t_fail "the poller did not see both keys"
t_ok "retired after the last ack (not forced); v1 403, v2 works; 0 failures in $(wc -l <"$W/poll.ok") reads"
t_tallyd_stop

t_say "a second rotation through crashes: the add's reply lost, the retirement done but not recorded"
TALLY_FAULT=create:lost-first=1 t_tallyd_start --interval 1
tly rotate "$G" >/dev/null || t_fail "tally rotate $G (v3) failed"
t_wait_log 20 "grant/$G" credential.activated '"version":3' >/dev/null
[ "$(tly log --json --stream "grant/$G" --type credential.issued | grep -c '"version":3')" -eq 1 ] ||
	t_fail "v3 was issued more than once"
grep -q "rotation of $G: fault injected: create:lost-first=1" "$T_DLOG" ||
	t_fail "the add's reply was not lost (no fault in tallyd's log)"
end=$(($(t_now_ms) + 10000))
until [ "$(t_envget "$GA" S3_SECRET_KEY)" != "$(t_envget "$W/v2.env" S3_SECRET_KEY)" ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "node-a's env file does not hold v3"
	sleep 0.05
done
cp "$GA" "$W/v3.env"
kill -KILL "$T_DPID"
t_wait_exit "$T_DPID" 10
[ "$(as "$W/v2.env" GET "/$GB/k")" = 200 ] && [ "$(as "$W/v3.env" GET "/$GB/k")" = 200 ] ||
	t_fail "v2 and v3 do not both work after the lost add"
tly ack node-a game 3 >/dev/null && tly ack node-b game 3 >/dev/null || t_fail "tally ack of v3 failed"
# What a crash after the driver retired v2, before credential.retired: gone on the RGW.
$RADM key rm --uid="$GU" --access-key="$(t_envget "$W/v2.env" S3_ACCESS_KEY)" >/dev/null 2>&1 ||
	t_fail "radosgw-admin key rm of v2 failed"
t_tallyd_start --interval 1
t_wait_log 20 "grant/$G" rotation.completed '"version":3' >/dev/null
[ "$(tly log --json --stream "grant/$G" --type credential.retired | grep -c '"version":2')" -eq 1 ] ||
	t_fail "v2 not retired exactly once"
[ "$(as "$W/v2.env" GET "/$GB/k")" = 403 ] || t_fail "v2 still works"
[ "$(as "$W/v3.env" GET "/$GB/k")" = 200 ] || t_fail "v3 does not work"
t_tallyd_stop
t_expect_exit 0 "tally check $G (after the crashes)" tly check "$G"
t_ok "v3 issued and activated once despite the lost reply; the resumed retirement found v2 gone and completed"

t_say "revocation: retain, purge"
K=$(t_envfile node-a keep)
KB=$(t_envget "$K" S3_BUCKET)
KU=$(ugname keep)
TF=$(t_envfile node-a trash)
TB=$(t_envget "$TF" S3_BUCKET)
TU=$(ugname trash)
[ "$(as "$K" PUT "/$KB/row" kept)" = 200 ] || t_fail "keep cannot write"
for i in 1 2 3; do as "$TF" PUT "/$TB/r$i" x >/dev/null; done
cp "$K" "$W/keep.env"
tly remove keep --yes >"$W/rm.out" 2>&1 && tly remove trash --yes >>"$W/rm.out" 2>&1 || t_fail "tally remove failed: $(cat "$W/rm.out")"
t_tallyd_once
t_check "keep revoked: user suspended, bucket and object kept"
$RADM user info --uid="$KU" 2>/dev/null | grep -q '"suspended": 1' || t_fail "$KU is not suspended"
[ "$(as "$W/keep.env" GET "/$KB/row")" = 403 ] || t_fail "keep's key still works"
$RADM bucket stats --bucket="$KB" 2>/dev/null | grep -q '"num_objects": 1' || t_fail "keep's object is gone after a retain revocation"
[ ! -f "$(t_envfile node-a keep)" ] || t_fail "keep's delivery file is still there"
t_ok "suspended; the key refused; $KB kept with its object"
t_check "tally purge trash/files: objects, bucket and user deleted"
buckets | grep -qx "$TB" || t_fail "trash's bucket went before the purge"
tly purge trash/files --yes >/dev/null || t_fail "tally purge trash/files failed"
t_tallyd_once
buckets | grep -qx "$TB" && t_fail "$TB still exists after the purge"
users | grep -qx "$TU" && t_fail "$TU still exists after the purge"
buckets | grep -qx "$KB" || t_fail "the purge touched keep's bucket"
t_ok "bucket and user of trash gone; keep untouched"

t_say "kill storm: 10 grants while tallyd is SIGKILLed at random"
N=10
mf=$W/storm.yaml
: >"$mf"
i=1
while [ $i -le $N ]; do
	printf -- '---\n' >>"$mf"
	cat "$(consumer "$(printf 's%02d' $i)")" >>"$mf"
	i=$((i + 1))
done
tly apply "$mf" >/dev/null || t_fail "tally apply of the storm's modules failed"
t_tallyd_start --workers 2
(
	i=1
	while [ $i -le $N ]; do
		tly assign "$(printf 's%02d' $i)" node-a >/dev/null || exit 1
		sleep "0.0$(t_rand 6)"
		i=$((i + 1))
	done
) &
APID=$!
k=0
while :; do
	ms=$((30 + $(t_rand 400)))
	sleep "0.$(printf '%03d' $ms)"
	kill -KILL "$T_DPID" 2>/dev/null || t_fail "tallyd had died by itself"
	t_wait_exit "$T_DPID" 10
	k=$((k + 1))
	if [ $k -ge 6 ] && ! kill -0 $APID 2>/dev/null; then break; fi
	t_tallyd_start --workers 2
done
wait $APID || t_fail "assigning the storm's modules failed"
t_tallyd_once
t_wait_healthy 30
t_check "each grant provisioned once; the RGW's users and buckets are exactly the grants'"
[ "$(tly log --json --type grant.provisioned | grep -c '"grant":"s[0-9]*/files"')" -eq $N ] ||
	t_fail "not exactly one grant.provisioned per storm grant"
: >"$W/want.u"
: >"$W/want.b"
for m in app-a app-b game keep; do
	ugname $m >>"$W/want.u"; echo >>"$W/want.u"
done
for m in app-a game keep; do ugname $m | tr _ - >>"$W/want.b"; echo >>"$W/want.b"; done
i=1
while [ $i -le $N ]; do
	m=$(printf 's%02d' $i)
	f=$(t_envfile node-a $m)
	[ "$(as "$f" HEAD "/$(t_envget "$f" S3_BUCKET)")" = 200 ] || t_fail "$m's delivered keys do not reach its bucket"
	ugname $m >>"$W/want.u"; echo >>"$W/want.u"
	t_envget "$f" S3_BUCKET >>"$W/want.b"
	i=$((i + 1))
done
sort -o "$W/want.u" "$W/want.u"
sort -o "$W/want.b" "$W/want.b"
users >"$W/have.u"
buckets >"$W/have.b"
diff "$W/want.u" "$W/have.u" >"$W/u.diff" || { cat "$W/u.diff" >&2; t_fail "the RGW's users differ from the grants' (above)"; }
diff "$W/want.b" "$W/have.b" >"$W/b.diff" || { cat "$W/b.diff" >&2; t_fail "the RGW's buckets differ from the grants' (above)"; }
t_ok "$k SIGKILLs; $(wc -l <"$W/have.u") users and $(wc -l <"$W/have.b") buckets, exactly the grants'; all reach their buckets"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "tally verify, rebuild --check"
