#!/bin/sh
# tally adopt MODULE/REQ --resource NAME on the directory driver: a
# directory made by hand under the provider's root (a live mesh's file
# share), with files in it, taken under tally.
#   - --login is refused (a directory grant has no credential);
#   - tallyd takes it over: the same inode, every file and its checksum,
#     the directory the grant's (mode), marked as this mesh's, the path
#     delivered is ROOT/NAME; nothing to rotate (no credential);
#   - a consumer reading the share keeps working throughout (every file
#     and its checksum every 0.1 s, by the path it had until its node's
#     agent, tally-node, writes the delivered one and reloads it once,
#     then by that): the agent acknowledges v1; there is no old
#     credential to retire (no rotation, no credential.retired).  The
#     access is the directory's owner, group and mode, which the
#     takeover sets at once: the consumer runs as this script's user
#     (root, or tallyd's own unprivileged), whom the takeover leaves its
#     access; run as root, a process of another uid that read the share
#     before (mode 0755) reaches it from the takeover on only with the
#     grant's group (the one its node host starts the consumer with);
#   - verification finds it healthy; a mode changed by hand is repaired;
#   - a name that does not exist, a symbolic link, a name with the shape
#     of one tally gives its grants: grant.failed with the reason, the
#     link's target untouched;
#   - revoking the adopted grant retains it (the files stay) though the
#     provider's policy is drop (app-b's, not adopted, is dropped); tally
#     purge removes it;
#   - another mesh's directory under the same root is refused (owned by
#     mesh ...): its mark, inode, mode, files untouched, that mesh's
#     check still clean;
#   - tally verify, rebuild --check.
. "$(dirname "$0")/lib.sh"

ROOT=$W/root
mkdir -p "$ROOT"
if [ "$(id -u)" = 0 ]; then WANT=2770; else WANT=700; fi

sums() { (cd "$1" && find . -type f | sort | xargs sha256sum); }

t_say "a download provider on node-a; a share made by hand under its root"
mkdir -p "$ROOT/legacy-files/sub"
head -c 100000 /dev/urandom >"$ROOT/legacy-files/a.bin"
echo "kept" >"$ROOT/legacy-files/sub/b.txt"
chmod 0755 "$W" "$ROOT"	# a process of another uid must get to the share
chmod 0755 "$ROOT/legacy-files" "$ROOT/legacy-files/sub"
chmod 0644 "$ROOT/legacy-files/a.bin" "$ROOT/legacy-files/sub/b.txt"
SUM0=$(sums "$ROOT/legacy-files")
INO0=$(stat -c %i "$ROOT/legacy-files")
mkdir -p "$W/elsewhere"
echo "not tally's" >"$W/elsewhere/secret.txt"
ln -s "$W/elsewhere" "$ROOT/linked"
t_init
t_node node-a 127.0.0.1
# The provider drops what it revokes: an adopted directory is kept.
sed 's/revoke: retain/revoke: drop/' "$TALLY_SRC/examples/download.yaml" >"$W/download.yaml"
grep -q 'revoke: drop' "$W/download.yaml" || t_fail "no revoke: drop in the provider"
tly apply "$W/download.yaml" >/dev/null
tly assign download node-a --set root="$ROOT" >/dev/null
for m in files shaped ghost linked app-b; do tly apply "$(t_dir_consumer $m)" >/dev/null; done

t_check "--login is refused: a directory grant has no credential"
t_expect_exit 4 "adopt with --login" tly adopt files/files --resource legacy-files --login x
grep -q "no credential" "$W/last.err" || t_fail "the refusal: $(cat "$W/last.err")"
t_ok "$(sed 's/^tally: //' "$W/last.err")"

# as GID CMD...: CMD as uid nobody with GID as its only group (run as
# root); as_sums GID: the share's files and checksums as that process.
as() { _g=$1; shift; setpriv --reuid=65534 --regid="$_g" --clear-groups "$@"; }
as_sums() {
	as "$1" sh -c "cd '$ROOT/legacy-files' && find . -type f | sort | xargs sha256sum" 2>/dev/null
}
if [ "$WANT" = 2770 ]; then
	[ "$(as_sums 65534)" = "$SUM0" ] || t_fail "a process of another uid cannot read the share"
fi

tly adopt files/files --resource legacy-files >/dev/null || t_fail "tally adopt failed"
t_adopt_again_refused files/files app-b/files --resource legacy-files

t_say "the consumer: reading the share by its own path until its agent writes tally's"
# A consumer as a live mesh runs it: the share's path from its own
# configuration until its node's agent writes the delivered one (and
# reloads it), then that; every file read every round, every failure or
# changed checksum recorded.
mkdir -p "$W/agent"
: >"$W/poll.ok"
: >"$W/poll.fail"
# The reload is a request the consumer answers between two rounds (as a
# service's reload returns once it runs on the new values): the agent
# acknowledges only after it.
pdir=$ROOT/legacy-files pfrom=own
poll_files() {
	while [ ! -f "$W/poll.stop" ]; do
		if [ -f "$W/reload.req" ] && [ ! -f "$W/reload.done" ]; then
			t_envvars "$W/agent/files.env" FILES
			pdir=$FILES pfrom=delivered
			: >"$W/reload.done"
		fi
		if _s=$(sums "$pdir" 2>&1) && [ "$_s" = "$SUM0" ]; then
			echo "$pfrom $pdir" >>"$W/poll.ok"
		else
			echo "$(date +%T.%N) in $pdir: $(printf '%s' "$_s" | tr '\n' ' ' | cut -c1-200)" >>"$W/poll.fail"
		fi
		sleep 0.1
	done
}
poll_files &
POLL=$!
_t_pids="$_t_pids $POLL"
t_wait_for 10 "the consumer's first round" test -s "$W/poll.ok"

tly assign files node-a >/dev/null
t_tallyd_start --interval 1
t_wait_healthy 30 files
f=$(t_envfile node-a files)
[ "$(t_envget "$f" FILES)" = "$ROOT/legacy-files" ] ||
	t_fail "FILES is $(t_envget "$f" FILES), not $ROOT/legacy-files"
t_check "taken over as it was: the same directory, every file, the grant's mode"
[ "$(stat -c %i "$ROOT/legacy-files")" = "$INO0" ] || t_fail "the directory was made again"
[ "$(sums "$ROOT/legacy-files")" = "$SUM0" ] || t_fail "the files changed"
[ "$(stat -c %a "$ROOT/legacy-files")" = "$WANT" ] ||
	t_fail "mode $(stat -c %a "$ROOT/legacy-files"), expected $WANT"
tly log --json --stream grant/files/files --type rotation.started | grep -q . &&
	t_fail "a rotation for a grant without a credential"
M1=$(tly mesh --json | sed -n 's/.*"mesh":"\([^"]*\)".*/\1/p')
[ -n "$M1" ] && [ "$(cat "$ROOT/.tally/mesh-legacy-files")" = "$M1" ] ||
	t_fail "legacy-files is not marked as this mesh's ($M1)"
t_ok "FILES=$ROOT/legacy-files, inode $INO0, $(echo "$SUM0" | wc -l) files unchanged, mode $WANT, marked"
# The consumer reads it, taken over, on the path it had.
k=$(wc -l <"$W/poll.ok")
t_wait_for 10 "the consumer's round after the takeover" \
	sh -c "[ \$(wc -l <'$W/poll.ok') -gt $k ]"

t_say "node-a's agent writes the path, reloads the consumer and acknowledges"
t_reload_agent node-a files
t_grant_wait 30 files/files credential.acknowledged '"holder":"files@node-a"' >/dev/null
t_reloaded_once
[ "$(t_envget "$W/agent/files.env" FILES)" = "$ROOT/legacy-files" ] ||
	t_fail "the agent wrote FILES=$(t_envget "$W/agent/files.env" FILES)"
t_ok "FILES=$ROOT/legacy-files written, one reload, v1 acknowledged by files@node-a"

t_check "verification keeps it: a mode changed by hand is repaired"
chmod 0777 "$ROOT/legacy-files"
t_grant_wait 30 files/files grant.repaired >/dev/null
[ "$(stat -c %a "$ROOT/legacy-files")" = "$WANT" ] || t_fail "not repaired"
t_wait_healthy 30 files
t_ok "0777 -> $WANT (grant.repaired)"

t_check "the consumer never failed; no credential to retire"
t_consumer_done "$POLL"
n1=$(grep -cx "own $ROOT/legacy-files" "$W/poll.ok" || true)
n2=$(grep -cx "delivered $ROOT/legacy-files" "$W/poll.ok" || true)
[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] ||
	t_fail "the consumer did not run on both (its own path: $n1, the delivered one: $n2)"
[ $((n1 + n2)) -eq "$(wc -l <"$W/poll.ok")" ] || t_fail "the consumer read another path"
for t in rotation.started credential.retired; do
	tly log --json --stream grant/files/files --type $t | grep -q . &&
		t_fail "a $t for a grant without a credential"
done
if [ "$WANT" = 2770 ]; then
	GF=$(stat -c %g "$ROOT/legacy-files")
	[ "$(as_sums "$GF")" = "$SUM0" ] ||
		t_fail "a process with the grant's group $GF cannot read the share"
	as 65534 ls "$ROOT/legacy-files" >/dev/null 2>&1 &&
		t_fail "a process of another uid without the grant's group still lists the share"
	t_ok "as another uid: with the grant's group $GF every file read; without it (as before the takeover) refused"
fi
t_ok "$n1 rounds by its own path, $n2 by the delivered one after one reload, every file unchanged; no rotation, nothing retired"

t_say "what cannot be adopted"
tly adopt ghost/files --resource nothing-here >/dev/null
tly adopt linked/files --resource linked >/dev/null
tly adopt shaped/files --resource "app-a-files_0123456789abcdef" >/dev/null
mkdir "$ROOT/app-a-files_0123456789abcdef"
tly assign ghost linked shaped node-a >/dev/null
t_grant_wait 30 ghost/files grant.failed 'nothing to adopt' >/dev/null
t_grant_wait 30 linked/files grant.failed 'a symbolic link' >/dev/null
t_grant_wait 30 shaped/files grant.failed 'shape of a directory tally made' >/dev/null
[ "$(cat "$W/elsewhere/secret.txt")" = "not tally's" ] &&
	[ "$(stat -c %a "$W/elsewhere")" != 0 ] || t_fail "the link's target was touched"
t_ok "nothing-here, a link, a tally-shaped name: refused (the link's target untouched)"

t_say "revoked: retained though the provider drops; purged: gone"
tly assign app-b node-a >/dev/null
t_wait_healthy 30 app-b
tly remove app-b --yes >/dev/null || t_fail "tally remove app-b failed"
t_grant_wait 30 app-b/files grant.revoked '"policy":"drop"' >/dev/null
tly remove files --yes >/dev/null || t_fail "tally remove files failed"
t_grant_wait 30 files/files grant.revoked '"policy":"retain"' >/dev/null
[ -f "$ROOT/legacy-files/sub/b.txt" ] || t_fail "revoking dropped the files"
t_ok "app-b (made by tally): policy drop; files (adopted): policy retain, the files are there"
tly purge files/files --yes >/dev/null || t_fail "tally purge failed"
t_grant_wait 30 files/files grant.purged >/dev/null
[ ! -e "$ROOT/legacy-files" ] || t_fail "purged, but the directory is there"
t_ok "purged: $ROOT/legacy-files is gone"

t_check "another mesh's directory is refused"
# A second home (another mesh) with the same provider on the same root
# makes a directory of its own there and writes in it.
(
	export TALLY_HOME="$W/home2"
	tly init >/dev/null
	tly node add node-x --routable-name 127.0.0.1 --key-out "$(t_nodekey node-x)" \
		>/dev/null || t_fail "tally node add node-x (the other mesh) failed"
	tly apply "$W/download.yaml" >/dev/null
	tly assign download node-x --set root="$ROOT" >/dev/null ||
		t_fail "tally assign download node-x (the other mesh) failed"
	tly apply "$(t_dir_consumer alien)" >/dev/null
	tly assign alien node-x >/dev/null
	t_tallyd_once
	tly status alien >/dev/null || t_fail "the other mesh's alien is not healthy"
	t_envget "$(t_envfile node-x alien)" FILES >"$W/alien.dir"
	tly mesh --json | sed -n 's/.*"mesh":"\([^"]*\)".*/\1/p' >"$W/alien.mesh"
)
DX=$(cat "$W/alien.dir")
MX=$(cat "$W/alien.mesh")
NX=$(basename "$DX")
case $DX in "$ROOT"/?*) ;; *) t_fail "the other mesh got FILES='$DX'" ;; esac
[ -d "$DX" ] || t_fail "no directory of the other mesh's"
[ "$(cat "$ROOT/.tally/mesh-$NX")" = "$MX" ] || t_fail "$NX does not carry the other mesh's mark"
echo "the other mesh's data" >"$DX/data"
# What the other mesh's directory is, to compare after the refusal.
alien_state() {
	stat -c '%i %u:%g %a' "$DX"
	cat "$ROOT/.tally/mesh-$NX"
	sums "$DX"
	ls -A "$ROOT/.tally" | grep -e "$NX" || true
}
alien_state >"$W/alien.before"
tly apply "$(t_dir_consumer grab)" >/dev/null
tly adopt grab/files --resource "$NX" >/dev/null || t_fail "tally adopt grab/files failed"
tly assign grab node-a >/dev/null
why=$(t_grant_wait 30 grab/files grant.failed 'owned by mesh' | grep -o 'owned by mesh [0-9a-f]*' | head -n 1)
[ "$why" = "owned by mesh $(printf '%.12s' "$MX")" ] || t_fail "refused as '$why', not as the other mesh's"
alien_state >"$W/alien.after"
cmp -s "$W/alien.before" "$W/alien.after" || {
	diff "$W/alien.before" "$W/alien.after" >&2 || true
	t_fail "the other mesh's directory or its mark changed"
}
(
	export TALLY_HOME="$W/home2"
	t_tallyd_once
	tly status alien >/dev/null || t_fail "the other mesh's alien is not healthy after the refusal"
	t_expect_exit 0 "tally check alien/files (the other mesh)" tly check alien/files
)
t_ok "$NX refused ($why...); its mark, inode, mode and files untouched, its check clean"

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
