#!/bin/sh
# tally adopt MODULE/REQ --resource BUCKET --login UID on a Ceph RGW: a
# bucket made by hand (a live mesh's), with objects, and the user its
# consumer signs with, taken under tally.
#   - the CLI: adopt before assign records the claim (grant.adopted);
#   - tallyd takes them over and says what it took: nothing deleted or
#     made again (the objects and their checksums), the user marked as
#     the grant's, the hand-made key keeps working while the rotation
#     waits, nothing of the adopted user's key is delivered (no
#     credential.delivered of v1); the delivered key is tally's (v2), on
#     the same user and bucket, reads every object and writes one;
#   - a consumer on the adopted key keeps reading an object (its
#     checksum) throughout: its node's agent (tally-node) writes v2,
#     reloads it once and acknowledges, and only then is the adopted key
#     retired (status names the wait), then refused while the delivered
#     one works; the user and the bucket stay, the user with v2's key
#     alone;
#   - adopting a bucket that does not exist, or one tally made for
#     another grant: grant.failed with the driver's reason, the other
#     grant's bucket untouched;
#   - another mesh's bucket and user (a second home on the same
#     gateway): refused (owned by mesh ...), its user's mark and key, its
#     objects and its grant's health untouched;
#   - tally check, verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null 2>&1 || t_fail "curl is missing (tools/deps.sh)"

G=legacy/files
LU=legacy-app
LB=legacy-data

t_ceph_start
RP=$TALLY_TEST_RGW_PORT
EP=$TALLY_TEST_RGW_ENDPOINT
AK=$TALLY_TEST_RGW_ACCESS
RADM="radosgw-admin -c $CEPH_DIR/ceph.conf -n client.rgw.a"

# s3 AK SK METHOD PATH [DATA]: the HTTP status of a SigV4 request (DATA
# as curl's --data-binary: @FILE sends a file); the body in $W/s3.out.
# The keys go through a curl config file, never argv.
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
# sums AK SK: "NAME SHA256" of every object in $W/names, read from the
# bucket with that key; fails on a read that is not 200.
sums() {
	while read -r _n; do
		_st=$(s3 "$1" "$2" GET "/$LB/$_n")
		[ "$_st" = 200 ] || { echo "GET /$LB/$_n: $_st" >&2; return 1; }
		printf '%s %s\n' "$_n" "$(sha256sum <"$W/s3.out" | cut -d' ' -f1)"
	done <"$W/names"
}
# listed AK SK: how many keys the bucket lists for that key.
listed() {
	[ "$(s3 "$1" "$2" GET "/$LB")" = 200 ] || return 1
	grep -o '<Key>[^<]*</Key>' "$W/s3.out" | wc -l
}
ukeys() { $RADM user info --uid="$1" 2>/dev/null | grep -c '"access_key"'; }
mark_of() { $RADM user info --uid="$1" 2>/dev/null | sed -n 's/.*"display_name": "\(.*\)",/\1/p'; }

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

t_say "a Ceph RGW provider on node-a; a bucket and its user made by hand"
t_init
t_node node-a 127.0.0.1
tly apply "$W/manifests/store.yaml" >/dev/null || t_fail "tally apply store.yaml failed"
tly assign store node-a --expose network --set port="$RP" --set admin-access-key="$AK" \
	--secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" >/dev/null ||
	t_fail "tally assign store node-a failed"
$RADM user create --uid="$LU" --display-name="legacy app" >"$W/lu.json" 2>/dev/null ||
	t_fail "radosgw-admin user create $LU failed"
LAK=$(sed -n 's/.*"access_key": "\(.*\)",/\1/p' "$W/lu.json" | head -n 1)
LSK=$(sed -n 's/.*"secret_key": "\(.*\)"/\1/p' "$W/lu.json" | head -n 1)
rm -f "$W/lu.json"
[ -n "$LAK" ] && [ -n "$LSK" ] || t_fail "no key for $LU in radosgw-admin's answer"
[ "$(s3 "$LAK" "$LSK" PUT "/$LB")" = 200 ] || t_fail "$LU cannot make bucket $LB: $(cat "$W/s3.out")"
mkdir -p "$W/objs"
: >"$W/names"
i=1
while [ $i -le 20 ]; do
	head -c $((1000 + i * 517)) /dev/urandom >"$W/objs/o$i"
	[ "$(s3 "$LAK" "$LSK" PUT "/$LB/dir/o$i.bin" "@$W/objs/o$i")" = 200 ] ||
		t_fail "$LU cannot write object $i: $(cat "$W/s3.out")"
	echo "dir/o$i.bin" >>"$W/names"
	printf 'dir/o%s.bin %s\n' $i "$(sha256sum <"$W/objs/o$i" | cut -d' ' -f1)" >>"$W/sums0"
	i=$((i + 1))
done
t_check "the hand-made key reads the objects back"
sums "$LAK" "$LSK" >"$W/sums1" || t_fail "the hand-made key cannot read its objects"
cmp -s "$W/sums0" "$W/sums1" || t_fail "the objects read back differ from what was written"
[ "$(listed "$LAK" "$LSK")" = 20 ] || t_fail "the bucket does not list 20 objects"
[ "$(ukeys "$LU")" = 1 ] || t_fail "$LU does not have exactly one key"
t_ok "$LU owns $LB with 20 objects, checksums equal; key $LAK"

tly apply "$(consumer legacy)" >/dev/null || t_fail "tally apply legacy failed"
tly apply "$(consumer other)" >/dev/null || t_fail "tally apply other failed"

t_say "tally adopt $G --resource $LB --login $LU (before tally assign)"
before=$(t_head_seq)
t_expect_exit 4 "adopt without --login" tly adopt $G --resource "$LB"
grep -q -- "--login" "$W/last.err" || t_fail "no word of --login: $(cat "$W/last.err")"
[ "$(t_head_seq)" = "$before" ] || t_fail "a refused adopt appended events"
tly adopt $G --resource "$LB" --login "$LU" >"$W/adopt.out" ||
	t_fail "tally adopt failed"
grep -q "retires $LU" "$W/adopt.out" || t_fail "adopt says: $(cat "$W/adopt.out")"
tly log --json --stream "grant/$G" --type grant.adopted |
	grep -q "\"resource\":\"$LB\",\"login\":\"$LU\"" ||
	t_fail "no grant.adopted {resource $LB, login $LU}"
t_adopt_again_refused $G other/files --resource "$LB" --login "$LU"
t_ok "$(cat "$W/adopt.out")"

t_say "the consumer: on the adopted key until its agent writes tally's"
# A consumer as a live mesh runs it: its own key until its node's agent
# writes the delivered one (and reloads it), then that; a signed GET of
# one object every round, its checksum compared, every failure recorded.
# Its own files: the script's s3 uses $W/curl.cfg and $W/s3.out meanwhile.
mkdir -p "$W/agent"
: >"$W/poll.ok"
: >"$W/poll.fail"
O1=$(sed -n 's|^dir/o1\.bin ||p' "$W/sums0")
# The reload is a request the consumer answers between two reads (as a
# service's reload returns once it runs on the new values): the agent
# acknowledges only after it, so no read is in flight on the old key
# when it is retired.  The agent's DIR/MODULE/VARIABLE files hold the
# values as they are (the env file quotes them).
ak=$LAK sk=$LSK
poll() {
	while [ ! -f "$W/poll.stop" ]; do
		if [ -f "$W/reload.req" ] && [ ! -f "$W/reload.done" ]; then
			ak=$(cat "$W/agent/legacy/S3_ACCESS_KEY")
			sk=$(cat "$W/agent/legacy/S3_SECRET_KEY")
			: >"$W/reload.done"
		fi
		( umask 077; printf 'user = "%s:%s"\n' "$ak" "$sk" >"$W/poll.cfg" )
		st=$(curl -s -m 5 -K "$W/poll.cfg" --aws-sigv4 aws:amz:default:s3 \
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -o "$W/poll.out" \
			-w '%{http_code}' "$EP/$LB/dir/o1.bin" 2>"$W/poll.err") || st="curl $?"
		if [ "$st" = 200 ] &&
		    [ "$(sha256sum <"$W/poll.out" | cut -d' ' -f1)" = "$O1" ]; then
			echo "$ak" >>"$W/poll.ok"
		else
			echo "$(date +%T.%N) as $ak: $st $(head -c 200 "$W/poll.out" 2>/dev/null | tr '\n' ' ')$(tr '\n' ' ' <"$W/poll.err")" >>"$W/poll.fail"
		fi
		sleep 0.1
	done
}
poll &
POLL=$!
_t_pids="$_t_pids $POLL"

tly assign legacy node-a >/dev/null || t_fail "tally assign legacy node-a failed"
t_tallyd_start --interval 1
t_grant_wait 30 $G grant.provisioned >/dev/null
t_check "taken over: the user marked as the grant's, its objects and key kept"
grep -q "provisioned grant $G on [^ ]* by adopting: bucket \"$LB\" (20 object(s), [0-9]* bytes) and user \"$LU\" adopted" "$T_DLOG" || {
	grep "by adopting" "$T_DLOG" >&2 || true
	t_fail "tallyd does not say what it adopted"
}
MESH=$(tly mesh --json | t_jstr mesh)
[ "$(mark_of "$LU")" = "tally mesh $MESH grant $G" ] || t_fail "$LU's mark: $(mark_of "$LU")"
t_grant_wait 30 $G rotation.started '"reason":"adopted' >/dev/null
t_grant_wait 30 $G credential.activated >/dev/null
t_grant_wait 30 $G credential.delivered '"version":2' >/dev/null
sums "$LAK" "$LSK" >"$W/sums1" || t_fail "the adopted key no longer reads after the takeover"
cmp -s "$W/sums0" "$W/sums1" || t_fail "the objects changed at the takeover"
t_ok "marked 'tally mesh $MESH grant $G'; 20 checksums equal; rotating to v2"

f=$(t_envfile node-a legacy)
DAK=$(t_envget "$f" S3_ACCESS_KEY)
DSK=$(t_envget "$f" S3_SECRET_KEY)
t_check "only v2 delivered: tally's key, on the same user and bucket"
tly log --json --stream "grant/$G" --type credential.delivered |
	grep -q '"body":{[^}]*"version":1[,}]' && t_fail "a credential.delivered of v1"
[ "$(t_envget "$f" S3_BUCKET)" = "$LB" ] || t_fail "S3_BUCKET is $(t_envget "$f" S3_BUCKET)"
[ -n "$DAK" ] && [ "$DAK" != "$LAK" ] || t_fail "S3_ACCESS_KEY is '$DAK'"
[ -n "$DSK" ] && [ "$DSK" != "$LSK" ] || t_fail "the adopted secret key was delivered"
$RADM user info --uid="$LU" 2>/dev/null | grep -q "\"access_key\": \"$DAK\"" ||
	t_fail "the delivered key $DAK is not $LU's"
[ "$(ukeys "$LU")" = 2 ] || t_fail "$LU does not hold two keys (its own and v2's)"
tly log --json | grep -q "$DSK" && t_fail "the delivered secret key is in the log"
t_ok "S3_BUCKET $LB, key $DAK on $LU beside $LAK"

t_check "the delivered key reads every object (checksums) and writes one"
sums "$DAK" "$DSK" >"$W/sums2" || t_fail "the delivered key cannot read the objects"
cmp -s "$W/sums0" "$W/sums2" || t_fail "the objects changed"
[ "$(as "$f" PUT "/$LB/from-tally.txt" tally-data)" = 200 ] ||
	t_fail "the delivered key cannot write: $(cat "$W/s3.out")"
[ "$(s3 "$LAK" "$LSK" GET "/$LB/from-tally.txt")" = 200 ] && [ "$(cat "$W/s3.out")" = tally-data ] ||
	t_fail "the object written with the delivered key does not read back"
[ "$(listed "$DAK" "$DSK")" = 21 ] || t_fail "the bucket does not list 21 objects"
t_ok "20 checksums equal; from-tally.txt written; 21 listed"

t_check "the adopted key works until the holder acknowledges v2"
sleep 2
sums "$LAK" "$LSK" >"$W/sums3" || t_fail "the adopted key no longer reads"
cmp -s "$W/sums0" "$W/sums3" || t_fail "the adopted key reads other objects"
tly status legacy >"$W/status.txt" 2>&1 || true
grep -q "rotating v1 → v2 (adopted): waiting on node-a/legacy" "$W/status.txt" || {
	cat "$W/status.txt" >&2
	t_fail "status does not name the wait"
}
tly log --json --stream "grant/$G" --type credential.retired | grep -q . &&
	t_fail "retired before the acknowledgement"
t_ok "$LAK reads; status: waiting on node-a/legacy"

t_say "node-a's agent writes v2, reloads the consumer and acknowledges: the adopted key goes, the user and bucket stay"
t_reload_agent node-a legacy
t_grant_wait 30 $G credential.acknowledged '"holder":"legacy@node-a"' >/dev/null
t_grant_wait 30 $G credential.retired "\"user\":\"$LU\"" >/dev/null
t_reloaded_once
[ "$(cat "$W/agent/legacy/S3_ACCESS_KEY")" = "$DAK" ] ||
	t_fail "the agent wrote S3_ACCESS_KEY $(cat "$W/agent/legacy/S3_ACCESS_KEY"), not $DAK"
t_grant_wait 10 $G rotation.completed >/dev/null
[ "$(s3 "$LAK" "$LSK" GET "/$LB/dir/o1.bin")" = 403 ] || t_fail "the adopted key still reads"
[ "$(s3 "$LAK" "$LSK" PUT "/$LB/late.txt" late)" = 403 ] || t_fail "the adopted key still writes"
sums "$DAK" "$DSK" >"$W/sums4" || t_fail "the delivered key no longer reads"
cmp -s "$W/sums0" "$W/sums4" || t_fail "the objects changed at the retirement"
[ "$(ukeys "$LU")" = 1 ] || t_fail "$LU does not hold v2's key alone"
$RADM user info --uid="$LU" 2>/dev/null | grep -q "\"access_key\": \"$DAK\"" ||
	t_fail "v2's key is not the one left"
$RADM bucket stats --bucket="$LB" 2>/dev/null | grep -q "\"owner\": \"$LU\"" ||
	t_fail "$LB is no longer $LU's"
t_expect_exit 0 "tally check $G" tly check $G
t_consumer_done "$POLL"
n1=$(grep -c "^$LAK\$" "$W/poll.ok" || true)
n2=$(grep -c "^$DAK\$" "$W/poll.ok" || true)
[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] || t_fail "the consumer did not run on both ($LAK: $n1, $DAK: $n2)"
t_ok "$LAK refused; $DAK reads 20 checksums; $LU keeps v2's key alone; check clean"
t_ok "the consumer never failed ($n1 reads as $LAK, $n2 as $DAK after one reload)"

t_say "what cannot be adopted: a bucket that does not exist, one of tally's"
tly apply "$(consumer ghost)" >/dev/null || t_fail "tally apply ghost failed"
tly adopt ghost/files --resource nosuch-bucket --login ghost-user >/dev/null ||
	t_fail "tally adopt ghost/files failed"
tly assign ghost node-a >/dev/null || t_fail "tally assign ghost failed"
t_grant_wait 30 ghost/files grant.failed 'nothing to adopt' >/dev/null
$RADM bucket stats --bucket=nosuch-bucket >/dev/null 2>&1 && t_fail "nosuch-bucket was made"
# A bucket tally made for a grant (not adopted): its user carries that
# grant's mark, so the driver refuses it.
tly apply "$(consumer fourth)" >/dev/null || t_fail "tally apply fourth failed"
tly assign other node-a >/dev/null || t_fail "tally assign other failed"
t_wait_healthy 30 other
f4=$(t_envfile node-a other)
B4=$(t_envget "$f4" S3_BUCKET)
U4=$(t_grec other/files user)
[ -n "$B4" ] && [ -n "$U4" ] || t_fail "other/files: bucket '$B4', user '$U4'"
[ "$(as "$f4" PUT "/$B4/mine.txt" other-data)" = 200 ] || t_fail "other cannot write its bucket"
tly adopt fourth/files --resource "$B4" --login "$U4" >/dev/null ||
	t_fail "tally adopt fourth/files failed"
tly assign fourth node-a >/dev/null || t_fail "tally assign fourth failed"
t_grant_wait 30 fourth/files grant.failed 'made by tally for grant other/files' >/dev/null
[ "$(as "$f4" GET "/$B4/mine.txt")" = 200 ] && [ "$(cat "$W/s3.out")" = other-data ] ||
	t_fail "other/files' key no longer reads its object"
[ "$(mark_of "$U4")" = "tally mesh $MESH grant other/files" ] || t_fail "$U4's mark changed: $(mark_of "$U4")"
t_ok "nosuch-bucket: nothing to adopt; $B4: tally's for other/files (its key works, its mark kept)"

t_check "another mesh's bucket and user are refused"
# A second home (another mesh) provisions a bucket on the same gateway.
(
	export TALLY_HOME="$W/home2"
	t_init
	t_node node-x 127.0.0.1
	tly apply "$W/manifests/store.yaml" >/dev/null || t_fail "tally apply store.yaml (home2) failed"
	tly assign store node-x --expose network --set port="$RP" --set admin-access-key="$AK" \
		--secret admin-secret-key <"$TALLY_TEST_RGW_SECRETFILE" >/dev/null ||
		t_fail "tally assign store node-x failed"
	tly apply "$(consumer alien)" >/dev/null || t_fail "tally apply alien (home2) failed"
	tly assign alien node-x >/dev/null || t_fail "tally assign alien node-x failed"
	t_tallyd_once
	t_wait_healthy 10 alien
)
# h2 CMD...: CMD in the other mesh's home (its env files refresh there).
h2() { ( export TALLY_HOME="$W/home2"; "$@" ); }
MESH2=$(h2 tly mesh --json | t_jstr mesh)
M2=$(printf %s "$MESH2" | cut -c1-12)
BX=$(h2 t_grec alien/files resource)
UX=$(h2 t_grec alien/files user)
fx=$(h2 t_envfile node-x alien)
XAK=$(h2 t_envget "$fx" S3_ACCESS_KEY)
XSK=$(h2 t_envget "$fx" S3_SECRET_KEY)
[ -n "$MESH2" ] && [ "$MESH2" != "$MESH" ] || t_fail "the second home's mesh is '$MESH2'"
[ -n "$BX" ] && [ -n "$UX" ] && [ -n "$XAK" ] || t_fail "alien/files: bucket '$BX', user '$UX', key '$XAK'"
[ "$(s3 "$XAK" "$XSK" PUT "/$BX/theirs.txt" alien-data)" = 200 ] ||
	t_fail "the other mesh's key cannot write its bucket: $(cat "$W/s3.out")"
[ "$(mark_of "$UX")" = "tally mesh $MESH2 grant alien/files" ] || t_fail "$UX's mark: $(mark_of "$UX")"
tly apply "$(consumer grab)" >/dev/null || t_fail "tally apply grab failed"
tly adopt grab/files --resource "$BX" --login "$UX" >/dev/null ||
	t_fail "tally adopt grab/files failed"
tly assign grab node-a >/dev/null || t_fail "tally assign grab failed"
t_grant_wait 30 grab/files grant.failed "owned by mesh $M2\\.\\.\\., not this one" >"$W/grab.ev"
tly log --json --stream grant/grab/files --type credential.delivered | grep -q . &&
	t_fail "something was delivered for grab/files"
[ "$(mark_of "$UX")" = "tally mesh $MESH2 grant alien/files" ] || t_fail "$UX's mark changed: $(mark_of "$UX")"
[ "$(ukeys "$UX")" = 1 ] || t_fail "$UX does not hold its one key"
$RADM bucket stats --bucket="$BX" 2>/dev/null | grep -q "\"owner\": \"$UX\"" ||
	t_fail "$BX is no longer $UX's"
[ "$(s3 "$XAK" "$XSK" GET "/$BX/theirs.txt")" = 200 ] && [ "$(cat "$W/s3.out")" = alien-data ] ||
	t_fail "the other mesh's key no longer reads its object"
h2 tly check alien/files >"$W/check2.out" 2>&1 || {
	cat "$W/check2.out" >&2
	t_fail "tally check alien/files in the other mesh"
}
t_ok "$(grep -o 'user [^ ]* is owned by mesh [^:]*' "$W/grab.ev" | head -n 1 | tr -d '\\')"
t_ok "$BX: $UX's mark, key and object kept; the other mesh's check clean"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
