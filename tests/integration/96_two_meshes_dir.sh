#!/bin/sh
# Two meshes on one directory root (issue 22, items 1-4, the directory's
# part): two homes declaring the same module each get their own
# directory (scheme-4 names keyed by the mesh id, marks with the whole
# id); the second's check, repair, rotation and purge change nothing of
# the first's (a listing of the root with owners, modes, sizes and
# contents, the second's own entries aside, is the same before and
# after; the first's consumer file is untouched); then a third home
# (the first one "lost" and rebuilt) takes the first's directory over on
# purpose with tally adopt --from-mesh, which says what it took, and the
# first is from then on refused there ("owned by mesh ...").  No server:
# the real directory driver, real tally homes and tallyd --once.
. "$(dirname "$0")/lib.sh"

ROOT=$W/root
mkdir -p "$ROOT" "$W/keys" "$W/manifests"
chmod 0755 "$W" "$ROOT"

t_dir_consumer app >/dev/null

jget() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
# on HOME CMD...: tally CMD on $W/HOME
on() { _h=$1; shift; TALLY_HOME=$W/$_h "$TALLY_BIN/tally" "$@"; }
once() { TALLY_HOME=$W/$1 "$TALLY_BIN/tallyd" --once --once-timeout 60 2>>"$T_DLOG" ||
	{ tail -n 20 "$T_DLOG" >&2; t_fail "tallyd --once on $1 failed"; }; }
# home NAME: a home with node-a, the download provider on $ROOT and app.
home() {
	on "$1" init >/dev/null || t_fail "tally init $1"
	on "$1" node add node-a --routable-name 127.0.0.1 \
		--key-out "$W/keys/$1.key" >/dev/null || t_fail "node add on $1"
	on "$1" apply "$TALLY_SRC/examples/download.yaml" "$W/manifests/app.yaml" >/dev/null ||
		t_fail "apply on $1"
	on "$1" assign download node-a --set root="$ROOT" >/dev/null || t_fail "assign download on $1"
	on "$1" assign app node-a >/dev/null || t_fail "assign app on $1"
}
files() { on "$1" env node-a app --node-key "$W/keys/$1.key" | sed -n 's/^FILES=//p' | tr -d "'\""; }
# snap FILE [EXCLUDE...]: every entry under $ROOT (path, owner, mode,
# size, and a regular file's content digest and first line), the lines
# naming an EXCLUDE left out.
snap() {
	_out=$1
	shift
	find "$ROOT" -mindepth 1 | sort | while read -r p; do
		if [ -f "$p" ] && [ ! -L "$p" ]; then
			c="$(sha256sum <"$p" | cut -c1-16) $(head -n 1 "$p")"
		else
			c=-
		fi
		echo "${p#"$ROOT"/} $(stat -c '%u:%g %a %F %s' "$p") $c"
	done >"$_out.all"
	cp "$_out.all" "$_out"
	for x in "$@"; do grep -v -e "$x" "$_out" >"$_out.t" || true; mv "$_out.t" "$_out"; done
}

t_say "two homes, one root, the same module"
home a
once a
home b
once b
DA=$(files a)
DB=$(files b)
case "$DA" in "$ROOT"/?*) ;; *) t_fail "home a got FILES='$DA'" ;; esac
case "$DB" in "$ROOT"/?*) ;; *) t_fail "home b got FILES='$DB'" ;; esac
[ "$DA" != "$DB" ] || t_fail "both homes got the same directory $DA"
[ -d "$DA" ] && [ -d "$DB" ] || t_fail "a directory is missing: $(ls -la "$ROOT")"
MA=$(on a mesh --json | jget mesh)
MB=$(on b mesh --json | jget mesh)
NA=$(basename "$DA")
NB=$(basename "$DB")
t_check "each directory carries its mesh's whole id as its mark"
[ "$(cat "$ROOT/.tally/mesh-$NA")" = "$MA" ] || t_fail "mark of $NA: $(cat "$ROOT/.tally/mesh-$NA" 2>&1)"
[ "$(cat "$ROOT/.tally/mesh-$NB")" = "$MB" ] || t_fail "mark of $NB"
t_check "each mesh has its own fence file, 0600"
for m in "$MA" "$MB"; do
	[ "$(stat -c '%a %F' "$ROOT/.tally-fence-$m")" = "600 regular file" ] ||
		t_fail "fence file of $m: $(ls -la "$ROOT")"
done
t_ok "a: $NA (mesh $MA), b: $NB (mesh $MB)"

t_check "tally providers and tally status say how the root is fenced"
on a providers >"$W/prov.out"
grep -q "^    fenced: atomic with each change (a file per mesh under the root" "$W/prov.out" ||
	t_fail "tally providers: $(cat "$W/prov.out")"
grep -q "^    window: none: " "$W/prov.out" || t_fail "tally providers: no window"
on a providers --json | grep -q '"fencing":{"kind":"atomic with each change"' ||
	t_fail "tally providers --json: no fencing"
on a status >"$W/st.out" || true
grep -q "^provider node-a/download (directory) fenced: atomic with each change; window: none: " "$W/st.out" ||
	t_fail "tally status: $(cat "$W/st.out")"
on a status --json | grep -q '"fencing":{"node-a/download":\[{"driver":"directory","kind":"atomic with each change"' ||
	t_fail "tally status --json: no fencing"
t_ok "atomic with each change, window none (providers, status, --json)"

echo "the first's data" >"$DA/data"
# Run as root each grant claims a group (ROOT/.tally/gid-N, emptied by
# its purge): b's claim is b's own entry.
BCLAIM=$(grep -lx "$NB" "$ROOT"/.tally/gid-* 2>/dev/null | sed 's|.*/||' | head -n 1)
BCLAIM=${BCLAIM:-$NB}
snap "$W/before" "$NB" "$MB" "$BCLAIM "

t_say "the second's check, repair, rotation and purge change nothing of the first's"
on b check >/dev/null || t_fail "tally check on b: $(on b check 2>&1)"
chmod 0755 "$DB"
t_expect_exit 8 "tally check on b (its own drift repaired)" on b check
[ "$(stat -c %a "$DB")" != 755 ] || t_fail "b's drift was not repaired"
on b rotate app/files >"$W/rot.out" 2>&1 || t_note "rotate on b: $(head -n 1 "$W/rot.out")"
once b
on b remove app --yes >/dev/null || t_fail "tally remove app on b"
once b
on b purge app/files --yes >/dev/null || t_fail "tally purge on b"
once b
[ ! -e "$DB" ] || t_fail "b's directory survived its purge"
snap "$W/after" "$NB" "$MB" "$BCLAIM "
diff "$W/before" "$W/after" >"$W/diff" || { cat "$W/diff" >&2; t_fail "the root changed outside b's own entries"; }
[ "$(cat "$DA/data")" = "the first's data" ] || t_fail "a's consumer file changed"
on a check >/dev/null || t_fail "a is not healthy after b's work: $(on a check 2>&1)"
t_ok "$(wc -l <"$W/before") entries of a's unchanged; a's check healthy"

t_say "home a is lost; home c, rebuilt, adopts its directory on purpose"
home c
MC=$(on c mesh --json | jget mesh)
t_check "refusals: its own id, not an id, no grant named"
t_expect_exit 4 "adopt from its own mesh" on c adopt --from-mesh "$MC" --all
t_expect_exit 4 "adopt from a non-id" on c adopt --from-mesh 12345 --all
t_expect_exit 4 "adopt from an upper-case id" on c adopt --from-mesh "$(printf %s "$MA" | tr a-f A-F)" --all
t_expect_exit 2 "adopt with neither --all nor a grant" on c adopt --from-mesh "$MA"
[ "$(on c log --json --type mesh.adopted | wc -l)" -eq 0 ] || t_fail "a refused adopt appended"
t_check "a standby refuses it"
on s init --standby >/dev/null
t_expect_exit 7 "adopt on a standby" on s adopt --from-mesh "$MA" --all
on c adopt --from-mesh "$MA" --all >"$W/adopt.out" || t_fail "tally adopt on c: $(cat "$W/adopt.out")"
cat "$W/adopt.out"
grep -q "adopted from mesh $MA: 1 grant(s)" "$W/adopt.out" || t_fail "adopt does not say what it took"
grep -q "app/files (directory): takes over $NA" "$W/adopt.out" || t_fail "adopt does not name $NA"
on c log --json --type mesh.adopted >"$W/adopted.json"
[ "$(wc -l <"$W/adopted.json")" -eq 1 ] || t_fail "mesh.adopted appended $(wc -l <"$W/adopted.json") times"
grep -q "\"from\":\"$MA\"" "$W/adopted.json" && grep -q "\"resource\":\"$NA\"" "$W/adopted.json" ||
	t_fail "mesh.adopted: $(cat "$W/adopted.json")"
t_expect_exit 4 "adopting the same again" on c adopt --from-mesh "$MA" app/files
once c
DC=$(files c)
[ "$DC" = "$DA" ] || t_fail "c got $DC, not a's $DA"
[ "$(cat "$DC/data")" = "the first's data" ] || t_fail "the adopted directory lost its data"
[ "$(cat "$ROOT/.tally/mesh-$NA")" = "$MC" ] || t_fail "the adopted directory is not re-marked: $(cat "$ROOT/.tally/mesh-$NA")"
on c check >/dev/null || t_fail "c is not healthy: $(on c check 2>&1)"
t_ok "c serves $DC with a's data, marked $MC"

t_check "the lost home, back, is refused there (owned by mesh c)"
snap "$W/before2" "$MA"
t_expect_exit 6 "tally check on a" on a check
grep -q "owned by mesh $(printf %s "$MC" | cut -c1-12)\.\.\., not this one" "$W/last.out" "$W/last.err" ||
	t_fail "a's check does not name the owner: $(cat "$W/last.out" "$W/last.err")"
on a remove app --yes >/dev/null || t_fail "tally remove app on a"
TALLY_HOME=$W/a "$TALLY_BIN/tallyd" --once --once-timeout 20 2>>"$T_DLOG" || true
snap "$W/after2" "$MA"
diff "$W/before2" "$W/after2" >"$W/diff2" || { cat "$W/diff2" >&2; t_fail "a changed c's directory"; }
[ "$(stat -c %a "$DA")" != 0 ] || t_fail "a revoked c's directory"
t_ok "a's check and revocation refused; the root unchanged"
