#!/bin/sh
# The second kind of provider: directories (drivers/directory.c), end to
# end through the real binaries.  The cases of the PostgreSQL scripts
# where they apply: provision and deliver (10_isolation), exclusive
# ownership (10), verify, drift repaired and missing flagged (45_verify),
# revoke with retain, restore and purge (82_revocation).  No server: the
# provider is a directory of this script's ($W/root), the download
# module of examples/download.yaml, assigned with --set root=.
#
# Run as root, each grant's directory has a group of its own (mode 2770)
# and a process of another uid holding one consumer's group reaches that
# consumer's directory and not the other's (setpriv); unprivileged, the
# directories are tallyd's alone (mode 0700).
. "$(dirname "$0")/lib.sh"

ROOT=$W/root
mkdir -p "$ROOT"
chmod 0755 "$W" "$ROOT"	# a consumer of another uid must get to its own
if [ "$(id -u)" = 0 ]; then WANT=2770; else WANT=700; fi

t_say "tally home, a download provider on node-a, two consumers"
t_init
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/download.yaml" >/dev/null ||
	t_fail "tally apply examples/download.yaml failed"
t_check "the provider's settings are the driver's: root is required and checked"
t_expect_exit 4 "assign with a misspelt setting" tly assign download node-a --set rot="$ROOT"
t_expect_exit 4 "assign without root" tly assign download node-a
grep -q "needs the setting root" "$W/last.err" || t_fail "no root: $(cat "$W/last.err")"
t_expect_exit 4 "assign with a relative root" tly assign download node-a --set root=srv/files
t_expect_exit 4 "assign with a root with .." tly assign download node-a --set root=/srv/../etc
t_expect_exit 4 "assign with gid-base + gid-range past 2^32" tly assign download node-a --set root="$ROOT" --set gid-base=4000000000 --set gid-range=1000000000
grep -q "gid-base 4000000000 + gid-range 1000000000 pass 4294967295" "$W/last.err" ||
	t_fail "gid range: $(cat "$W/last.err")"
tly assign download node-a --set root="$ROOT" >/dev/null ||
	t_fail "tally assign download node-a --set root=$ROOT failed"
t_ok "rot=, no root, a relative root, .. and a group range past 2^32 refused; root= accepted"
t_check "a manifest mapping a field a directory does not have is refused"
cat >"$W/bad.yaml" <<EOF
module: bad
env: {P: ""}
requires:
  files:
    type: directory
    from: download
    env: {password: P}
EOF
t_expect_exit 4 "apply of a directory requirement mapping password" tly apply "$W/bad.yaml"
grep -q "password" "$W/last.err" || t_fail "the refusal does not name the field: $(cat "$W/last.err")"
t_ok "refused: $(head -n 1 "$W/last.err")"

tly apply "$(t_dir_consumer app-a)" "$(t_dir_consumer app-b)" >/dev/null
t_check "several modules in one tally assign: one transaction, all or none"
h0=$(tly log --json | wc -l)
t_expect_exit 3 "assign app-a and an undeclared module" tly assign app-a ghost node-a
grep -q "ghost" "$W/last.err" || t_fail "the refusal does not name ghost: $(cat "$W/last.err")"
[ "$(tly log --json | wc -l)" -eq "$h0" ] || t_fail "a refused batch appended events"
t_expect_exit 2 "several modules with --set" tly assign app-a app-b node-a --set x=y
tly assign app-a app-b node-a --json >"$W/assign.json" ||
	t_fail "tally assign app-a app-b node-a failed: $(cat "$W/assign.json")"
[ "$(jq -r '[.node, (.assigned | map(.module) | join(","))] | join(" ")' "$W/assign.json")" = "node-a app-a,app-b" ] ||
	t_fail "tally assign --json of two: $(cat "$W/assign.json")"
# One command: one correlation, and neither assignment the other's cause.
tly log --json | jq -c 'select(.type == "assignment.created" and
    (.body.module | startswith("app-"))) | [.stream, .cause, .corr]' >"$W/created"
[ "$(cut -d, -f1,2 "$W/created" | tr '\n' ' ')" = '["assignment/app-a@node-a",0 ["assignment/app-b@node-a",0 ' ] &&
	[ "$(cut -d, -f3 "$W/created" | sort -u | wc -l)" -eq 1 ] ||
	t_fail "assignment.created events: $(cat "$W/created")"
t_ok "a refusal records nothing; settings refused with several; both assigned in one command"
t_tallyd_once
t_wait_healthy 5

A=$(t_envfile node-a app-a)
B=$(t_envfile node-a app-b)
DA=$(t_envget "$A" FILES)
DB=$(t_envget "$B" FILES)

t_check "delivered: each env file holds its directory's path, and only that"
case "$DA" in "$ROOT"/?*) ;; *) t_fail "app-a got FILES='$DA', not under $ROOT" ;; esac
case "$DB" in "$ROOT"/?*) ;; *) t_fail "app-b got FILES='$DB', not under $ROOT" ;; esac
[ "$DA" != "$DB" ] || t_fail "both consumers got $DA"
t_envfile node-a app-a >/dev/null
[ "$(wc -l <"$A")" -eq 1 ] || t_fail "$A has more than the path: $(cat "$A")"
for d in "$DA" "$DB"; do
	[ -d "$d" ] && [ ! -L "$d" ] || t_fail "$d is not a directory"
	m=$(stat -c %a "$d")
	[ "$m" = "$WANT" ] || t_fail "$d has mode $m, expected $WANT"
done
tly env node-a app-a --node-key "$(t_nodekey node-a)" >"$W/env.out" ||
	t_fail "tally env node-a app-a failed"
grep -qx "FILES=$DA" "$W/env.out" || t_fail "the sealed delivery does not hold FILES=$DA: $(cat "$W/env.out")"
t_ok "app-a: $DA; app-b: $DB; mode $WANT; sealed delivery agrees"

t_check "exclusive ownership"
if [ "$(id -u)" = 0 ]; then
	GA=$(stat -c %g "$DA")
	GB=$(stat -c %g "$DB")
	[ "$GA" != "$GB" ] || t_fail "both directories have group $GA"
	[ "$(stat -c %u "$DA")" = 0 ] || t_fail "$DA is not root's"
	# as GID CMD...: CMD as uid nobody with GID as its only group.
	as() { _g=$1; shift; setpriv --reuid=65534 --regid="$_g" --clear-groups "$@"; }
	as "$GA" touch "$DA/by-a" || t_fail "a process with app-a's group cannot write in $DA"
	as "$GB" touch "$DB/by-b" || t_fail "a process with app-b's group cannot write in $DB"
	as "$GA" touch "$DB/by-a" 2>/dev/null && t_fail "app-a's group wrote in app-b's $DB"
	as "$GB" ls "$DA" >/dev/null 2>&1 && t_fail "app-b's group can list app-a's $DA"
	as 65534 ls "$DA" >/dev/null 2>&1 && t_fail "a third group can list $DA"
	[ "$(stat -c %g "$DA/by-a")" = "$GA" ] || t_fail "a file made in $DA does not inherit its group"
	t_ok "groups $GA and $GB; each reaches its own directory only; new files inherit the group"
else
	t_ok "unprivileged: both mode 700, tallyd's own (no other uid can enter)"
fi

t_say "verification"
t_expect_exit 0 "tally check --all (healthy)" tly check --all
t_check "mode drift is repaired"
chmod 0777 "$DA"
t_expect_exit 8 "tally check app-a/files (drifted, repaired)" tly check app-a/files
grep -q "privileges-changed" "$W/last.out" || t_fail "check did not report the drift: $(cat "$W/last.out")"
[ "$(stat -c %a "$DA")" = "$WANT" ] || t_fail "$DA still has mode $(stat -c %a "$DA")"
if [ "$(id -u)" = 0 ]; then
	chgrp 65534 "$DA"
	t_expect_exit 8 "tally check app-a/files (group changed, repaired)" tly check app-a/files
	[ "$(stat -c %g "$DA")" = "$GA" ] || t_fail "$DA's group was not given back ($(stat -c %g "$DA"))"
fi
tly log --json | grep -q '"type":"grant.repaired"' || t_fail "no grant.repaired in the log"
t_ok "drift found, repaired, recorded: $(grep -o 'privileges-changed[^;]*' "$W/last.out" | head -n 1)"

t_check "a missing directory is flagged, never recreated silently"
rm -r "$DB"
t_expect_exit 6 "tally check app-b/files (missing)" tly check app-b/files
grep -q "missing-resource" "$W/last.out" || t_fail "check did not say missing: $(cat "$W/last.out")"
t_expect_exit 6 "tallyd --once with app-b/files missing" \
	"$TALLY_BIN/tallyd" --once --once-timeout 20
[ -e "$DB" ] && t_fail "$DB was recreated without tally repair"
t_expect_exit 6 "tally status app-b (missing)" tly status app-b
tly repair app-b/files >/dev/null || t_fail "tally repair app-b/files failed"
t_tallyd_once
[ -d "$DB" ] || t_fail "tally repair did not recreate $DB"
[ "$(stat -c %a "$DB")" = "$WANT" ] || t_fail "the recreated $DB has mode $(stat -c %a "$DB")"
t_ok "missing: exit 6, not recreated by tallyd; tally repair recreated it"

t_say "revocation: retain, restore, purge"
echo kept >"$DA/data.txt"
tly remove app-a >/dev/null || t_fail "tally remove app-a failed"
t_tallyd_once
[ "$(stat -c %a "$DA")" = 0 ] || t_fail "revoked $DA has mode $(stat -c %a "$DA"), expected 0"
[ "$(cat "$DA/data.txt")" = kept ] || t_fail "the retained data is gone"
tly grants --revoked >"$W/grants.txt" || t_fail "tally grants --revoked failed"
grep -q '^app-a/files  *revoked (data retained' "$W/grants.txt" ||
	t_fail "tally grants --revoked: $(cat "$W/grants.txt")"
if [ "$(id -u)" = 0 ]; then
	as "$GA" ls "$DA" >/dev/null 2>&1 && t_fail "app-a's group still reaches its revoked directory"
fi
t_ok "revoked: mode 0, data kept, shown as retained"

t_check "restore reopens the same directory"
tly apply "$W/manifests/app-a.yaml" >/dev/null
tly assign app-a node-a >/dev/null
tly restore app-a/files >/dev/null || t_fail "tally restore app-a/files failed"
t_tallyd_once
t_wait_healthy 5
[ "$(stat -c %a "$DA")" = "$WANT" ] || t_fail "restored $DA has mode $(stat -c %a "$DA")"
[ "$(t_envget "$A" FILES)" = "$DA" ] || t_fail "the restored grant's path changed: $(cat "$A")"
[ "$(cat "$DA/data.txt")" = kept ] || t_fail "the restored directory lost its data"
t_ok "restored: mode $WANT, same path, data there"

t_check "purge deletes the tree and nothing a link in it points at"
mkdir -p "$W/outside"
echo precious >"$W/outside/file"
ln -s "$W/outside" "$DA/escape"
ln -s "$W/outside/file" "$DA/file-link"
mkdir "$DA/closed" && chmod 0 "$DA/closed"
tly remove app-a >/dev/null
t_tallyd_once
tly purge app-a/files --yes >/dev/null || t_fail "tally purge app-a/files failed"
t_tallyd_once
[ -e "$DA" ] && t_fail "$DA still exists after the purge"
[ "$(cat "$W/outside/file")" = precious ] || t_fail "the purge followed a link out of root"
tly log --json | grep '"type":"grant.purged"' | grep -q 'app-a/files' || t_fail "no grant.purged for app-a/files"
[ -d "$DB" ] || t_fail "the purge touched app-b's $DB"
t_expect_exit 4 "restore of a purged grant" tly restore app-a/files
t_ok "gone, outside untouched, grant.purged; restore refused"

t_check "the log verifies, and the tables (paths included) rebuild byte for byte"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >"$W/rebuild.out" 2>&1 || t_fail "tally rebuild --check: $(cat "$W/rebuild.out")"
t_ok "chain intact; $(tail -n 1 "$W/rebuild.out")"
