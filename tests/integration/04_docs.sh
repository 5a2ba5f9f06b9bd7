#!/bin/sh
# The pages cannot drift from the code (issue 21, items 23 and 27):
#   - exit codes: README.md's table, tally(1)'s and tallyd(8)'s EXIT
#     STATUS list exactly the codes `tally --help` and `tallyd --help`
#     print (one table, tools/exit.h), and each entry says what the
#     code's meaning says (its words up to the first ':', ',', ';', '(');
#   - settings tables: every <!-- settings:DRIVER:begin --> block of
#     README.md and docs/*.md is what `tally providers --settings DRIVER`
#     prints from the driver's declaration;
#   - docs/manifest.md's Errors: for every yaml example followed by its
#     report, tally apply of that file (as game.yaml) prints each line of
#     the report exactly;
#   - tally(1)'s EXAMPLES run as written (with this script's settings)
#     against a throwaway PostgreSQL, ending with a credential that
#     connects;
#   - docs/bootstrap.md's sample bundle is examples/bootstrap/bundle.yaml,
#     and every manifest it names is shipped (and parses).
. "$(dirname "$0")/lib.sh"

S=$TALLY_SRC
mkdir -p "$W/d"

# --- exit codes -----------------------------------------------------------

# help_codes PROGRAM: "CODE<TAB>PHRASE" from PROGRAM --help's table.
help_codes() {
	"$TALLY_BIN/$1" --help | sed -n '/^Exit codes:$/,$p' | sed -n 's/^  \([0-9]\)  \(.*\)$/\1	\2/p' |
		while IFS='	' read -r c m; do
			printf '%s\t%s\n' "$c" "$(printf '%s' "$m" | sed 's/[:,;(].*//; s/ *$//')"
		done
}
# man_codes PAGE: "CODE<TAB>TEXT" of each .It N entry of EXIT STATUS.
man_codes() {
	awk '/^\.Sh EXIT STATUS/{on=1; next} on && /^\.Sh /{on=0} !on{next}
	     /^\.It [0-9]$/{if (c != "") print c "\t" t; c=$2; t=""; next}
	     /^\.El/{if (c != "") print c "\t" t; c=""; next}
	     c != "" {sub(/^\.[A-Z][a-z] /, ""); t = t " " $0}' "$1"
}
# readme_codes: "CODE<TAB>TEXT" of README.md's exit code table.
readme_codes() {
	awk '/^### Exit codes/{on=1; next} on && /^##/{on=0} !on{next}
	     /^\| [0-9] \|/{c=$2; sub(/^\| [0-9] \| /, ""); print c "\t" $0}' "$S/README.md"
}
# same_codes WHAT WANT GOT: the pages' codes are the program's, each
# entry saying its phrase.
same_codes() {
	cut -f1 "$2" >"$W/d/want.c"
	cut -f1 "$3" >"$W/d/got.c"
	cmp -s "$W/d/want.c" "$W/d/got.c" ||
		t_fail "$1 lists exit codes $(tr '\n' ' ' <"$W/d/got.c"), the code has $(tr '\n' ' ' <"$W/d/want.c")"
	while IFS='	' read -r c p; do
		grep "^$c	" "$3" | grep -qiF -- "$p" ||
			t_fail "$1: exit $c does not say '$p' (the code's meaning): $(grep "^$c	" "$3" | cut -f2-)"
	done <"$2"
}

t_say "exit codes: one table, every page"
help_codes tally >"$W/d/tally.codes"
help_codes tallyd >"$W/d/tallyd.codes"
[ -s "$W/d/tally.codes" ] && [ -s "$W/d/tallyd.codes" ] || t_fail "tally or tallyd --help prints no exit codes"
sort -u -k1,1 "$W/d/tally.codes" "$W/d/tallyd.codes" >"$W/d/all.codes"
man_codes "$S/docs/man/tally.1" >"$W/d/tally1.codes"
man_codes "$S/docs/man/tallyd.8" >"$W/d/tallyd8.codes"
readme_codes >"$W/d/readme.codes"
same_codes "tally(1)" "$W/d/tally.codes" "$W/d/tally1.codes"
same_codes "tallyd(8)" "$W/d/tallyd.codes" "$W/d/tallyd8.codes"
same_codes "README.md" "$W/d/all.codes" "$W/d/readme.codes"
t_ok "tally $(cut -f1 "$W/d/tally.codes" | tr -d '\n'), tallyd $(cut -f1 "$W/d/tallyd.codes" | tr -d '\n'): README.md, tally(1), tallyd(8) agree"

# --- settings tables --------------------------------------------------------

t_say "settings tables are the drivers' declarations"
n=0
for f in "$S/README.md" "$S"/docs/*.md; do
	for drv in $(sed -n 's/^<!-- settings:\([a-z0-9-]*\):begin -->$/\1/p' "$f"); do
		sed -n "/^<!-- settings:$drv:begin -->\$/,/^<!-- settings:$drv:end -->\$/p" "$f" |
			sed '1d;$d' >"$W/d/page.tbl"
		tly providers --settings "$drv" >"$W/d/decl.tbl" || t_fail "tally providers --settings $drv failed"
		diff -u "$W/d/decl.tbl" "$W/d/page.tbl" >"$W/d/tbl.diff" || {
			cat "$W/d/tbl.diff" >&2
			t_fail "$(basename "$f")'s $drv settings table is not its declaration (tally providers --settings $drv)"
		}
		n=$((n + 1))
	done
done
[ $n -ge 1 ] || t_fail "README.md has no settings table block"
t_ok "$n table(s) match"

# --- docs/manifest.md's error reports --------------------------------------

t_say "docs/manifest.md's quoted errors are what tally apply prints"
mkdir -p "$W/mf"
awk -v dir="$W/mf" '
/^## Errors/{on=1; next}
on && /^## /{on=0}
!on{next}
/^```yaml$/{inb=1; n++; f=dir "/case" n ".yaml"; printf "" > f; next}
/^```$/ { if (inb) { inb=0; close(f) }
	  else if (ine) { ine=0; if (e != "") close(e) }
	  else if (n > 0 && !got[n]) { ine=1; got[n]=1; e=dir "/case" n ".expect"; printf "" > e }
	  else { ine=1; e="" }
	  next }
/^```/ {next}
inb{print > f; next}
ine && e != "" {print >> e; next}
' "$S/docs/manifest.md"
export TALLY_HOME=$W/mf-home
t_init
cases=0 lines=0
for y in "$W"/mf/case*.yaml; do
	c=$(basename "$y" .yaml)
	[ -s "$W/mf/$c.expect" ] || continue
	mkdir -p "$W/mf/$c"
	cp "$y" "$W/mf/$c/game.yaml"
	(cd "$W/mf/$c" && "$TALLY_BIN/tally" apply game.yaml >out 2>err) || true
	while IFS= read -r l; do
		grep -qFx -e "$l" -e "tally: $l" "$W/mf/$c/err" || {
			echo "--- the example:" >&2; cat "$y" >&2
			echo "--- tally apply printed:" >&2; cat "$W/mf/$c/err" >&2
			t_fail "docs/manifest.md quotes '$l', which tally apply does not print"
		}
		lines=$((lines + 1))
	done <"$W/mf/$c.expect"
	cases=$((cases + 1))
done
[ $cases -ge 20 ] || t_fail "only $cases examples with a report found in docs/manifest.md's Errors"
t_ok "$cases examples, $lines quoted lines: each printed exactly"

# --- tally(1) EXAMPLES ------------------------------------------------------

t_say "tally(1)'s EXAMPLES, as written, against a throwaway PostgreSQL"
# blk N: the Nth literal block of EXAMPLES, roff escapes undone.
blk() {
	awk -v want="$1" '/^\.Sh EXAMPLES/{on=1; next} on && /^\.Sh /{on=0} !on{next}
	     /^\.Bd -literal/{k++; inb=(k == want); next} /^\.Ed/{inb=0; next} inb' \
		"$S/docs/man/tally.1" | sed 's/\\e/\\/g'
}
blk 1 >"$W/d/ex-settings.txt"
blk 2 >"$W/d/ex-commands.sh"
vars=$(sed -n 's/^\([A-Z_][A-Z_0-9]*\)=.*/\1/p' "$W/d/ex-settings.txt" | sort | tr '\n' ' ')
[ "$vars" = "NODE_A_HOST PG_ADMIN_HOST PG_ADMIN_USER PG_PORT " ] ||
	t_fail "tally(1)'s EXAMPLES settings are '$vars': teach this test the new ones"
[ -s "$W/d/ex-commands.sh" ] || t_fail "tally(1) has no EXAMPLES commands"
t_pg_start
mkdir -p "$W/ex"
ln -s "$S/examples" "$W/ex/examples"
cp "$TALLY_TEST_PG_PWFILE" "$W/ex/admin.pw"
chmod 600 "$W/ex/admin.pw"
{
	echo "export PATH='$TALLY_BIN':\$PATH"
	echo "export TALLY_HOME='$W/ex-home'"
	echo "NODE_A_HOST=127.0.0.1"
	echo "PG_ADMIN_HOST=127.0.0.1"
	echo "PG_PORT=$TALLY_TEST_PG_PORT"
	echo "PG_ADMIN_USER=$TALLY_TEST_PG_USER"
	echo "set -x"
	cat "$W/d/ex-commands.sh"
} >"$W/ex/run.sh"
(cd "$W/ex" && sh -eu ./run.sh >"$W/ex/out" 2>"$W/ex/err") || {
	tail -n 15 "$W/ex/err" >&2
	t_fail "tally(1)'s EXAMPLES failed (trace above)"
}
grep -q '^DB_PASSWORD=' "$W/ex/out" || t_fail "the EXAMPLES' tally env printed no DB_PASSWORD"
sed -n 's/^\([A-Z_]*\)=\(.*\)$/\1=\2/p' "$W/ex/out" >"$W/ex/app.env"
[ "$(t_env_psql "$W/ex/app.env" "SELECT 1")" = 1 ] || t_fail "the EXAMPLES' credential does not connect"
t_ok "$(grep -c . "$W/d/ex-commands.sh") lines ran; the delivered credential connects"

# --- docs/bootstrap.md's sample bundle -------------------------------------

t_say "docs/bootstrap.md's sample bundle is shipped, and names only shipped files"
sed -n '/^## The format/,/^## /p' "$S/docs/bootstrap.md" | sed -n '/^```yaml$/,/^```$/p' | sed '1d;$d' >"$W/d/bundle.doc"
[ -s "$W/d/bundle.doc" ] || t_fail "docs/bootstrap.md has no sample bundle"
sed '/^#/d' "$S/examples/bootstrap/bundle.yaml" | diff -u "$W/d/bundle.doc" - >&2 ||
	t_fail "docs/bootstrap.md's sample is not examples/bootstrap/bundle.yaml"
for m in $(sed -n 's/^ *- manifest: *\([^ #]*\).*/\1/p' "$W/d/bundle.doc"); do
	f=$S/examples/bootstrap/$m
	[ -f "$f" ] || t_fail "the sample bundle names $m: $f is not shipped"
	(cd "$W" && TALLY_HOME=$W/bs-home "$TALLY_BIN/tally" init >/dev/null 2>&1 || true
	 TALLY_HOME=$W/bs-home "$TALLY_BIN/tally" apply --dry-run "$f" >/dev/null) ||
		t_fail "$m (shipped) does not parse"
done
t_ok "examples/bootstrap/bundle.yaml; its manifests shipped and valid"
