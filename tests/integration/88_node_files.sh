#!/bin/sh
# tally-node writes as root into directories a module's user must not
# be able to turn against it (issue 21 item 1):
#   - links planted as root in DIR before the first delivery (MODULE.env
#     -> a root-owned canary, MODULE -> a directory like /etc) are
#     replaced, never followed;
#   - with --user game=nobody, DIR/game/ is root-owned and not writable
#     by nobody, the files are nobody's, read-only;
#   - a process running as nobody races the agent for 1,000 tries (and
#     as many more as it makes in five of the agent's passes) with
#     symlinks and hard links to the canary (at the files' names, at
#     the temporary names the agent of before used, and at the module's
#     directory) while the agent rewrites the module's files again and
#     again: the canary keeps its content, owner and mode.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || t_fail "this test runs as root (the agent's user)"
G=game/db

t_say "PostgreSQL; node-a; game holds a postgres grant, delivered"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a network
t_consumer game >/dev/null
tly apply "$W/manifests/game.yaml" >/dev/null || t_fail "apply game"
tly assign game node-a >/dev/null || t_fail "assign game"
t_tallyd_once

# Everything nobody may reach: $W is root's; DIR is traversable (the
# module's user reads its files there), as an operator would make it.
D=$W/dir
mkdir -m 0755 "$D"
printf 'canary\n' >"$W/canary"
chmod 0644 "$W/canary"
canary_state() { printf '%s %s ' "$(stat -c '%U:%G %a %h' "$W/canary")" "$(cat "$W/canary")"; }
BEFORE=$(canary_state)
mkdir -m 0755 "$W/etc"
printf 'root:x:0:0\n' >"$W/etc/passwd"

agent() {	# one pass; the reload fails, so every pass rewrites the files
	"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" \
		--dir "$D" --state "$W/state" --log "$TALLY_HOME" --once \
		--user game=nobody --reload "game=exit 1" "$@" 2>>"$W/agent.log"
}

t_check "links planted in DIR before the first delivery are replaced, not followed"
ln -s "$W/canary" "$D/game.env"
ln -s "$W/etc" "$D/game"
set +e; agent; rc=$?; set -e
[ "$rc" = 6 ] || { cat "$W/agent.log" >&2; t_fail "the agent exited $rc, not 6 (a reload failed)"; }
[ "$(canary_state)" = "$BEFORE" ] || t_fail "the canary changed: $(canary_state) (was $BEFORE)"
[ "$(ls "$W/etc")" = passwd ] || t_fail "files were written into the directory game pointed to: $(ls "$W/etc")"
[ "$(cat "$W/etc/passwd")" = "root:x:0:0" ] || t_fail "$W/etc/passwd changed"
[ -f "$D/game.env" ] && [ ! -L "$D/game.env" ] || t_fail "$D/game.env is not a regular file"
[ -d "$D/game" ] && [ ! -L "$D/game" ] || t_fail "$D/game is not a directory"
grep -q "^DB_USER=" "$D/game.env" || t_fail "$D/game.env lacks DB_USER"
t_ok "game.env and game/ are the agent's own; the canary and $W/etc untouched"

t_check "owners and modes: DIR/game/ root:nogroup 0750, files nobody:nogroup 0400"
[ "$(stat -c '%U:%G %a' "$D/game")" = "root:nogroup 750" ] ||
	t_fail "$D/game is $(stat -c '%U:%G %a' "$D/game")"
for f in "$D/game.env" "$D/game/DB_PASSWORD" "$D/game/DB_USER"; do
	[ "$(stat -c '%U:%G %a %h' "$f")" = "nobody:nogroup 400 1" ] ||
		t_fail "$f is $(stat -c '%U:%G %a %h' "$f")"
done
setpriv --reuid=nobody --regid=nogroup --clear-groups cat "$D/game/DB_PASSWORD" >/dev/null ||
	t_fail "nobody cannot read its own DB_PASSWORD"
! setpriv --reuid=nobody --regid=nogroup --clear-groups touch "$D/game/x" 2>/dev/null ||
	t_fail "nobody can create files in $D/game"
t_ok "nobody reads its files and cannot create any beside them"

t_check "1,000 tries and more by nobody with symlinks and hard links while the agent rewrites"
# The racer is one process making the system calls (tests/tools/
# race_links.c): copied where nobody can run it.
cp "$TALLY_BIN/../tests/tools/race_links" "$W/race_links" ||
	t_fail "no tests/tools/race_links (make builds it)"
chmod 0755 "$W/race_links"
# The racer's own proof it can plant: in a directory nobody may write,
# one try takes.
mkdir -p "$W/ctl/game" && touch "$W/ctl/game.env" "$W/ctl/game/DB_USER" "$W/race.stop"
chown -R nobody:nogroup "$W/ctl"
setpriv --reuid=nobody --regid=nogroup --clear-groups "$W/race_links" "$W/ctl" game \
	"$W/canary" "$W/race.stop" 1 >"$W/race.ctl" || t_fail "the racer failed"
[ "$(cut -d' ' -f2 "$W/race.ctl")" -gt 0 ] ||
	t_fail "the racer planted nothing where nobody may write: it proves nothing"
rm -rf "$W/ctl"
rm -f "$W/race.stop"
setpriv --reuid=nobody --regid=nogroup --clear-groups "$W/race_links" "$D" game \
	"$W/canary" "$W/race.stop" 1000 >"$W/race.out" &
RACER=$!
_t_pids="$_t_pids $RACER"
passes=0
while kill -0 "$RACER" 2>/dev/null; do
	set +e; agent; rc=$?; set -e
	[ "$rc" = 6 ] || { cat "$W/agent.log" >&2; t_fail "a pass exited $rc"; }
	passes=$((passes + 1))
	# Five rewrites under fire, then the racer stops once it has made
	# its 1,000 tries.
	[ "$passes" -lt 5 ] || touch "$W/race.stop"
done
wait "$RACER" || t_fail "the racer failed"
t_forget_pid "$RACER"
tries=$(cut -d' ' -f1 "$W/race.out")
[ "${tries:-0}" -ge 1000 ] || t_fail "the racer made only ${tries:-0} tries"
echo "$(cut -d' ' -f2 "$W/race.out")" >"$W/race.won"
won=$(cat "$W/race.won" 2>/dev/null || echo "?")
[ "$(canary_state)" = "$BEFORE" ] || t_fail "the canary changed after $passes passes: $(canary_state) (was $BEFORE); nobody planted $won link(s)"
[ "$passes" -ge 3 ] || t_fail "the agent rewrote the files only $passes time(s) during the race"
[ "$won" = 0 ] || t_fail "nobody planted $won link(s) under $D"
for f in "$D/game.env" "$D/game/DB_PASSWORD"; do
	[ "$(stat -c '%U:%G %a %h' "$f")" = "nobody:nogroup 400 1" ] && [ ! -L "$f" ] ||
		t_fail "$f is $(stat -c '%U:%G %a %h' "$f") after the race"
done
[ -z "$(ls -A "$D/game" | grep -v '^DB_')" ] || t_fail "stray files in $D/game: $(ls -A "$D/game")"
t_ok "$passes passes, $tries tries: the canary is $(canary_state| cut -d' ' -f1-3), nothing planted"
