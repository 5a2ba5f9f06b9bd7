#!/bin/sh
# 06_install: `make install` installs the programs, the manual pages and
# the systemd unit (naming the installed tallyd), and the pages are
# mandoc -T lint clean.  No server is needed.
. "$(dirname "$0")/lib.sh"

command -v mandoc >/dev/null 2>&1 ||
	t_fail "mandoc is missing (tools/deps.sh installs it)"

t_say "make install into a staging directory"
D=$W/stage
make -s -C "$TALLY_SRC" install DESTDIR="$D" PREFIX=/opt/tally >"$W/install.log" 2>&1 || {
	cat "$W/install.log" >&2
	t_fail "make install failed"
}
t_check "programs, pages and unit are where PREFIX puts them"
for f in bin/tally bin/tallyd bin/tally-node bin/tally-board share/man/man1/tally.1 \
    share/man/man1/tally-board.1 share/man/man8/tallyd.8 \
    share/man/man8/tally-node.8 share/man/man5/tally-manifest.5 lib/systemd/system/tallyd.service \
    lib/systemd/system/tally-node@.service; do
	[ -f "$D/opt/tally/$f" ] || t_fail "make install did not install $f"
done
t_ok "all eleven"

t_check "the unit starts the installed tallyd"
grep -qx 'ExecStart=/opt/tally/bin/tallyd $TALLYD_ARGS' "$D/opt/tally/lib/systemd/system/tallyd.service" ||
	t_fail "ExecStart is '$(grep ExecStart "$D/opt/tally/lib/systemd/system/tallyd.service")'"
grep -q '^ExecStart=/opt/tally/bin/tally-node --node %i ' "$D/opt/tally/lib/systemd/system/tally-node@.service" ||
	t_fail "tally-node@.service does not start the installed tally-node"
t_ok "ExecStart=/opt/tally/bin/tallyd \$TALLYD_ARGS; tally-node@NODE starts /opt/tally/bin/tally-node"

t_check "the pages are mandoc -T lint clean and name what --help names"
mandoc -T lint -W warning "$D"/opt/tally/share/man/man*/* ||
	t_fail "mandoc -T lint reports the pages"
for c in $("$TALLY_BIN/tally" --help | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p'); do
	grep -q "^\.It Cm $c\b\|Cm $c\b" "$D/opt/tally/share/man/man1/tally.1" ||
		t_fail "tally(1) does not describe tally $c"
done
for o in $("$TALLY_BIN/tally-node" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	grep -q "Fl ${o#-}\b" "$D/opt/tally/share/man/man8/tally-node.8" ||
		t_fail "tally-node(8) does not describe $o"
done
for o in $("$TALLY_BIN/tally-board" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	grep -q "Fl ${o#-}\b" "$D/opt/tally/share/man/man1/tally-board.1" ||
		t_fail "tally-board(1) does not describe $o"
done
t_ok "clean; tally(1) describes every command of tally --help, tally-node(8) and tally-board(1) every option of their --help"
