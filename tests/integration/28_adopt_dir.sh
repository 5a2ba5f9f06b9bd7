#!/bin/sh
# tally adopt MODULE/REQ --resource NAME on the directory driver: a
# directory made by hand under the provider's root (a live mesh's file
# share), with files in it, taken under tally.
#   - --login is refused (a directory grant has no credential);
#   - tallyd takes it over: the same inode, every file and its checksum,
#     the directory the grant's (mode), marked as this mesh's, the path
#     delivered is ROOT/NAME; nothing to rotate (no credential);
#   - verification finds it healthy; a mode changed by hand is repaired;
#   - a name that does not exist, a symbolic link, a name with the shape
#     of one tally gives its grants: grant.failed with the reason, the
#     link's target untouched;
#   - revoking the adopted grant retains it (the files stay) though the
#     provider's policy is drop (app-b's, not adopted, is dropped); tally
#     purge removes it;
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
chmod 0755 "$ROOT/legacy-files"
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

tly adopt files/files --resource legacy-files >/dev/null || t_fail "tally adopt failed"
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
t_ok "FILES=$ROOT/legacy-files, inode $INO0, $(echo "$SUM0" | wc -l) files unchanged, mode $WANT"

t_check "verification keeps it: a mode changed by hand is repaired"
chmod 0777 "$ROOT/legacy-files"
t_grant_wait 30 files/files grant.repaired >/dev/null
[ "$(stat -c %a "$ROOT/legacy-files")" = "$WANT" ] || t_fail "not repaired"
t_wait_healthy 30 files
t_ok "0777 -> $WANT (grant.repaired)"

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

t_tallyd_stop
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "tally verify; rebuild --check"
