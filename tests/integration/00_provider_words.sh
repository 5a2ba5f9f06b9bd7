#!/bin/sh
# 00_provider_words.sh - no file outside drivers/ names a provider.
#
# Adding a provider type touches drivers/ and nothing else.  So the C
# sources of reactors/, projections/ and tools/ must not name a
# provider: this greps them for every driver's own words, as its
# declaration lists them (tl_drv_decl.words: PostgreSQL's postgres,
# 5432, database, role, pg_, libpq; MariaDB's, Redis's, RGW's, ...;
# any case), after stripping C comments (/* */ and //, which say why and may name
# the provider the way prose does).  String literals are NOT stripped:
# a "postgresql://" composed in a reactor is code, not prose.  The only
# exemptions are listed in ALLOW below, one per line as FILE:TEXT (the
# line of FILE, comments stripped, containing TEXT is not a finding),
# each with the reason; keep it short.  Shell scripts in tools/
# (deps.sh installs the test server, demo.sh drives one) are not code
# of tally and are not scanned; neither are tests.
#
# Needs no server: it runs first and fails with every finding listed.
set -eu

: "${TALLY_SRC:=$(cd "$(dirname "$0")/../.." && pwd -P)}"
cd "$TALLY_SRC"

# Every driver's own words, as its declaration lists them
# (tl_drv_decl.words: tests/tools/provider_words prints them).
words_tool=${TALLY_BIN:-build/bin}/../tests/tools/provider_words
[ -x "$words_tool" ] || { echo "FAIL 00_provider_words: $words_tool is not built (make integration builds it)" >&2; exit 1; }
WORDS=$("$words_tool") || { echo "FAIL 00_provider_words: $words_tool failed" >&2; exit 1; }
case $WORDS in *postgres*) ;; *) echo "FAIL 00_provider_words: the drivers declare no words ($WORDS)" >&2; exit 1 ;; esac

# FILE:TEXT, one per line (TEXT up to a tab and #, then the reason).
# There are two, and no help text is exempted:
# - projections/grant.h, TL_GRANT_OBJECT_KEY: grant.provisioned and
#   rebind.copied have carried a grant's resource name under "database"
#   since the first release; old events keep their field names, so the
#   key is read (and written, for readers of before) through this one
#   macro and spelled nowhere else.
# - tools/tally/manifest_parse.c, conn_fields: the manifest format's words for
#   connection fields (docs/manifest.md), accepted for a type no driver
#   declares; a type with a driver is checked against the fields the
#   driver declares.
ALLOW='
projections/grant.h:#define TL_GRANT_OBJECT_KEY	"database"	# the log: old events name the resource field so
tools/tally/manifest_parse.c:"host", "port", "database", "user", "password", "url", "vhost",	# the manifest format: its field vocabulary
'

# Prints FILE:LINE:TEXT for every line of code (comments blanked, line
# numbers kept) that names a provider word.
strip_and_grep() {
	awk -v words="$WORDS" '
	FNR == 1 { state = 0 }	# 0 code, 1 block comment
	{
		line = $0; out = ""; i = 1; n = length(line); q = ""
		while (i <= n) {
			c = substr(line, i, 1); d = substr(line, i, 2)
			if (state == 1) {
				if (d == "*/") { state = 0; i += 2; out = out " " }
				else i++
				continue
			}
			if (q != "") {
				out = out c
				if (c == "\\") { out = out substr(line, i + 1, 1); i += 2; continue }
				if (c == q) q = ""
				i++
				continue
			}
			if (d == "/*") { state = 1; i += 2; continue }
			if (d == "//") break
			if (c == "\"" || c == "'\''") q = c
			out = out c
			i++
		}
		if (tolower(out) ~ words)
			printf "%s:%d:%s\n", FILENAME, FNR, out
	}' "$@"
}

files=$(find reactors projections tools -name '*.[ch]' | sort)
found=$(strip_and_grep $files | while IFS= read -r hit; do
	f=${hit%%:*}; rest=${hit#*:}; text=${rest#*:}
	ok=0
	printf '%s\n' "$ALLOW" | while IFS= read -r a; do
		a=${a%%	#*}
		[ -n "$a" ] || continue
		af=${a%%:*}; at=${a#*:}
		[ "$af" = "$f" ] || continue
		case $text in *"$at"*) echo allowed; break ;; esac
	done | grep -q allowed && ok=1
	[ $ok = 1 ] || printf '%s\n' "$hit"
done)

if [ -n "$found" ]; then
	printf '%s\n' "$found"
	n=$(printf '%s\n' "$found" | wc -l)
	echo "FAIL 00_provider_words: $n line(s) outside drivers/ name a provider" >&2
	exit 1
fi
echo "ok 00_provider_words: $(echo $files | wc -w) files, no provider words outside comments"
