#!/bin/sh
# tally-board --html on a fresh machine (issue 21, item 24): its default
# store, $XDG_STATE_HOME/tally-board or ~/.local/state/tally-board, is
# created with its missing parents, mode 0700, as the XDG Base
# Directory specification says, instead of failing with "No such file
# or directory".  No server needed.
. "$(dirname "$0")/lib.sh"

BOARD=$TALLY_BIN/tally-board
[ -x "$BOARD" ] || t_fail "$BOARD is missing (run make)"

t_say "a home with one node"
t_init
t_node node-a 127.0.0.1

mode() { stat -c %a "$1"; }

t_check "HOME with no .local: ~/.local/state/tally-board is made, 0700"
mkdir -p "$W/fresh"
( cd "$W" && env -u XDG_STATE_HOME HOME="$W/fresh" "$BOARD" --html "$W/board.html" ) \
	>"$W/one.txt" 2>"$W/one.err" || { cat "$W/one.err" >&2; t_fail "tally-board --html exited $?"; }
[ -s "$W/board.html" ] || t_fail "no board.html"
for d in .local .local/state .local/state/tally-board; do
	[ -d "$W/fresh/$d" ] || t_fail "~/$d was not created"
	[ "$(mode "$W/fresh/$d")" = 700 ] || t_fail "~/$d is mode $(mode "$W/fresh/$d"), not 700"
done
t_ok "board.html written; ~/.local, ~/.local/state, ~/.local/state/tally-board all 0700"

t_check "XDG_STATE_HOME that does not exist yet: made, 0700"
( cd "$W" && XDG_STATE_HOME="$W/xdg/state" HOME="$W/fresh" "$BOARD" --html "$W/board2.html" ) \
	>/dev/null 2>"$W/two.err" || { cat "$W/two.err" >&2; t_fail "tally-board exited $?"; }
[ "$(mode "$W/xdg/state/tally-board")" = 700 ] || t_fail "\$XDG_STATE_HOME/tally-board is not 0700"
[ "$(mode "$W/xdg/state")" = 700 ] || t_fail "\$XDG_STATE_HOME is not 0700"
t_ok "\$XDG_STATE_HOME/tally-board made, 0700"

t_check "a directory that exists keeps its mode"
mkdir -p "$W/shared" && chmod 755 "$W/shared"
"$BOARD" --store "$W/shared/board" --html "$W/board3.html" >/dev/null 2>&1 || t_fail "tally-board --store exited $?"
[ "$(mode "$W/shared")" = 755 ] || t_fail "an existing parent's mode was changed"
[ "$(mode "$W/shared/board")" = 700 ] || t_fail "the store is not 0700"
t_ok "existing parent left 755; the store 0700"
