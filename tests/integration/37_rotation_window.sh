#!/bin/sh
# Rotation windows (issue 28, item 6), on the directory driver: a
# requirement, or a provider for its type, declares when scheduled
# rotations may start (rotation-window: DAYS HH:MM-HH:MM [ZONE],
# core/window.h); a rotation asked for by hand is never held.
#   - a window tallyd could not read is refused by apply, naming the
#     file, line and field;
#   - a due credential whose window is closed is not rotated; tally
#     status says it is held and when the window opens;
#   - tally rotate starts it all the same;
#   - a window open now: the schedule starts it (reason schedule);
#   - a provider's window holds its consumers' that declare none, and a
#     requirement's own wins over it.
. "$(dirname "$0")/lib.sh"
ROOT=$W/root
mkdir -p "$ROOT" "$W/manifests"

# A window of an hour that starts OFFSET minutes from now (UTC), as
# HH:MM-HH:MM (past midnight when it must).
hm() { date -u -d "@$(($(date +%s) + $1 * 60))" +%H:%M; }
closed="daily $(hm 120)-$(hm 180) UTC"
open_now="daily $(hm -30)-$(hm 30) UTC"
# Europe/Berlin, closed as well: the zone's database is used.
closed_berlin="daily $(TZ=Europe/Berlin date -d "@$(($(date +%s) + 7200))" +%H:%M)-$(TZ=Europe/Berlin date -d "@$(($(date +%s) + 10800))" +%H:%M) Europe/Berlin"

# consumer NAME [WINDOW]: max-credential-age 2s, and the window if any.
consumer() {
	f=$(t_dir_consumer "$1")
	printf '    max-credential-age: 2s\n' >>"$f"
	[ -z "${2:-}" ] || printf '    rotation-window: "%s"\n' "$2" >>"$f"
	echo "$f"
}
started() { tly log --json --stream "grant/$1/files" --type rotation.started | grep -c . || true; }

t_init
t_node node-a 127.0.0.1

t_check "a window tallyd could not read is refused, naming where"
for bad in "daily 25:00-01:00" "weekends 02:00-04:00" "daily 02:00-04:00 Mars/Olympus" "daily 02:00-02:00"; do
	f=$(consumer bad "$bad")
	t_expect_exit 4 "apply rotation-window: $bad" tly apply "$f"
	grep -q "bad.yaml:[0-9]*.*requires.files.rotation-window" "$W/last.err" ||
		t_fail "the refusal of '$bad' does not name the file, line and field: $(cat "$W/last.err")"
done
t_ok "refused: $(head -n 1 "$W/last.err")"

t_say "a provider whose type declares a closed window; four consumers"
cat >"$W/manifests/download.yaml" <<YAML
module: download
provides:
  directory:
    driver: directory
    max-credential-age: 2s
    rotation-window: "$closed"
YAML
tly apply "$W/manifests/download.yaml" >/dev/null || t_fail "apply download with a window"
tly assign download node-a --set root="$ROOT" >/dev/null
tly apply "$(consumer held "$closed_berlin")" >/dev/null || t_fail "apply held"
tly apply "$(consumer byhand "$closed")" >/dev/null || t_fail "apply byhand"
tly apply "$(consumer opened "$open_now")" >/dev/null || t_fail "apply opened"
f=$(t_dir_consumer inherits)	# the provider's age and window
tly apply "$f" >/dev/null || t_fail "apply inherits"
for m in held byhand opened inherits; do tly assign "$m" node-a >/dev/null; done
t_tallyd_once
sleep 3	# every credential is 2 s old now: due

t_check "due, window closed: not rotated; status says held, and when it opens"
t_tallyd_once
[ "$(started held)" -eq 0 ] || t_fail "held (window $closed_berlin) was rotated outside its window"
[ "$(started inherits)" -eq 0 ] || t_fail "inherits (the provider's window $closed) was rotated outside it"
tly status >"$W/st.out" 2>&1 || true
grep -q "rotation overdue: held/files.*held for its rotation window ($closed_berlin), which opens at " "$W/st.out" ||
	t_fail "status does not say held/files is held: $(cat "$W/st.out")"
grep -q "inherits/files.*held for its rotation window ($closed)" "$W/st.out" ||
	t_fail "status does not say inherits/files is held by the provider's window: $(cat "$W/st.out")"
t_ok "$(grep 'held/files' "$W/st.out" | sed 's/^ *//')"

t_check "a rotation by hand is never held"
tly rotate byhand/files >/dev/null || t_fail "tally rotate byhand/files"
t_tallyd_once
[ "$(started byhand)" -eq 1 ] || t_fail "the rotation by hand did not start"
t_ok "byhand/files: rotation.started"

t_check "a window open now (the requirement's own, over the provider's closed one)"
[ "$(started opened)" -eq 1 ] || t_fail "opened (window $open_now) was not rotated by the schedule"
tly log --json --stream grant/opened/files --type rotation.started | grep -q '"reason":"schedule"' ||
	t_fail "opened's rotation was not the schedule's"
t_ok "opened/files: rotation.started, reason schedule"
