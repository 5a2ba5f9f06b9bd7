#!/bin/sh
# tally-board --serve (issue 27, item 2, in part): the page over HTTP
# on loopback, following the log, pushing each change to open pages
# (Server-Sent Events on /events), with nothing external; checked in a
# real browser (Debian's Chromium, headless, over the DevTools protocol:
# tests/harness/cdp.py): "Needs a person" comes first and says
# "Nothing." on a healthy mesh, then names the provider that went
# unreachable within 2 s of the event's commit, without a reload (a
# mark left on the page's window survives), and again when it is back;
# screenshots are written for a person (build/tmp/screenshots/).
# Hostile clients (other paths, traversal, other methods, an oversized
# header, a burst of connections, streams left open) neither crash nor
# block it.
. "$(dirname "$0")/lib.sh"

PY3=/usr/bin/python3	# Debian's, with python3-websocket
CDP="$PY3 $TALLY_SRC/tests/harness/cdp.py"
SHOTS=$TALLY_TMP/screenshots
mkdir -p "$SHOTS"

t_say "throwaway PostgreSQL, two grants, tallyd, tally-board --serve"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app-1)" "$(t_consumer app-2)" >/dev/null
for m in app-1 app-2; do tly assign $m node-a >/dev/null; done
t_tallyd_start --interval 1 --verify-interval 1
t_wait_healthy 60
# The node's agent delivers and reports once; tallyd records the acks.
t_agent node-a --reload app-1=true --reload app-2=true
t_wait_for 30 "the agent's report recorded" sh -c \
	"'$TALLY_BIN/tally' --home '$TALLY_HOME' log --type node.reported --json 2>/dev/null | grep -q '\"seq\"'"
t_wait_healthy 60
BP=$(t_free_port)
"$TALLY_BIN/tally-board" --home "$TALLY_HOME" --store "$W/board" \
	--serve "127.0.0.1:$BP" 2>"$W/board.log" &
BPID=$!
_t_pids="$_t_pids $BPID"
URL=http://127.0.0.1:$BP
t_wait_for 10 "the board serving" curl -fsS -o /dev/null --max-time 2 "$URL/"
head_seq() { tly log --json | tail -n 1 | $PY3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])'; }
view_pos() { curl -fsS --max-time 2 "$URL/view.json" | $PY3 -c 'import json,sys; print(json.load(sys.stdin)["meta"]["pos"])'; }
H=$(head_seq)
t_wait_for 10 "the board at the log's head ($H)" sh -c "[ \"\$(curl -fsS --max-time 2 '$URL/view.json' | $PY3 -c 'import json,sys; print(json.load(sys.stdin)[\"meta\"][\"pos\"])')\" -ge $H ]"

t_check "GET /, /view.json, /events: the page, the view, a stream of changes"
curl -fsS --max-time 5 -D "$W/h1" "$URL/" >"$W/page.html" || t_fail "GET / failed"
grep -qi '^content-type: text/html' "$W/h1" || t_fail "/ is not text/html: $(cat "$W/h1")"
grep -q '<h2>Needs a person</h2>' "$W/page.html" || t_fail "no 'Needs a person' on the page"
# Nothing external: no src= or href= to anything but this page's own.
! grep -Eiq '(src|href)="?(https?:)?//' "$W/page.html" ||
	t_fail "the page loads something external: $(grep -Eio '(src|href)="?(https?:)?//[^" ]*' "$W/page.html" | head -n 3)"
# The page's first section is "Needs a person".
[ "$(grep -o '<h2>[^<]*</h2>' "$W/page.html" | head -n 1)" = "<h2>Needs a person</h2>" ] ||
	t_fail "the first section is $(grep -o '<h2>[^<]*</h2>' "$W/page.html" | head -n 1)"
curl -fsS --max-time 5 "$URL/view.json" >"$W/view.json" || t_fail "GET /view.json failed"
G=$($PY3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counts"]["grants"])' "$W/view.json")
[ "$G" = 2 ] || t_fail "the view counts $G grants, not app-1's and app-2's"
curl -sS -N --max-time 2 "$URL/events" >"$W/events.txt" 2>/dev/null || true
grep -q '^event: change$' "$W/events.txt" && grep -q '^data: [0-9]' "$W/events.txt" ||
	t_fail "/events did not stream a change event: $(head -c 200 "$W/events.txt")"
t_ok "text/html, 'Needs a person' first, nothing external; /view.json: $G grants; /events: $(grep -c '^event: change' "$W/events.txt") change event(s) at once"

t_check "in Chromium: the page, 'Needs a person' says nothing needs one"
CP=$(t_free_port)
$CDP start "$W/chromium" "$CP" || t_fail "Chromium did not start"
t_atexit "$CDP stop '$W/chromium'"
$CDP open "$CP" "$URL/" || t_fail "Chromium did not load the page"
n=$($CDP eval "$CP" "document.querySelectorAll('#needs li').length")
k=$($CDP eval "$CP" "document.querySelector('#needs li').dataset.kind")
[ "$n" = 1 ] && [ "$k" = '"none"' ] ||
	t_fail "the healthy mesh's 'Needs a person': $($CDP eval "$CP" "document.getElementById('needs').innerText")"
[ "$($CDP eval "$CP" "document.getElementById('count-grants').textContent")" = "\"$G\"" ] ||
	t_fail "the grants tile says $($CDP eval "$CP" "document.getElementById('count-grants').textContent")"
# The agents, as tally status lists them: node-a holds both grants.
ag=$($CDP eval "$CP" "Array.from(document.querySelectorAll('#agents tr')).slice(1).map(function (r) { return r.cells[0].textContent + ':' + r.cells[3].querySelectorAll('span.ok').length; }).join(' ')")
[ "$ag" = '"node-a:2"' ] || t_fail "the agents table says $ag, not node-a holding 2"
# Modules' states are tally status's.
for m in app-1 app-2; do
	want=$(tly status --json | $PY3 -c 'import json,sys; print([x["state"] for x in json.load(sys.stdin)["modules"] if x["module"] == sys.argv[1]][0])' $m)
	got=$($CDP eval "$CP" "Array.from(document.querySelectorAll('#modules tr')).filter(function (r) { return r.cells[0].textContent === '$m'; })[0].cells[1].textContent")
	[ "$got" = "\"$want\"" ] || t_fail "the page says $m is $got, tally status says $want"
done
# The control plane and the day, from the record.
tly --json mesh >"$W/mesh.json" 2>/dev/null || tly mesh >"$W/mesh.json"
MESH=$(grep -o '[0-9a-f]\{32\}' "$W/mesh.json" | head -n 1)
cpt=$($CDP eval "$CP" "document.getElementById('control').innerText")
case $cpt in *"$MESH"*) ;; *) t_fail "the control plane section does not name mesh $MESH: $cpt" ;; esac
[ "$($CDP eval "$CP" "document.getElementById('epoch').textContent")" = '"1"' ] ||
	t_fail "the epoch shown is $($CDP eval "$CP" "document.getElementById('epoch').textContent")"
since=$($CDP eval "$CP" "parseInt(document.getElementById('since').textContent, 10)")
pos=$($CDP eval "$CP" "parseInt(document.getElementById('pos').textContent, 10)")
[ "$since" = "$pos" ] || t_fail "since yesterday counts $since events, the page is at event $pos (all of them today)"
# Providers: reached and fenced as tally status says.
tly status --json | $PY3 -c 'import json,sys; f=json.load(sys.stdin)["fencing"]["node-a/postgres"][0]; t=f["transport"]["tls"]; print({"verify": "TLS, verified", "require": "TLS, not verified"}.get(t, "plaintext")); print(f["kind"])' >"$W/fence.txt" ||
	t_fail "tally status --json has no fencing for node-a/postgres"
row="Array.from(document.querySelectorAll('#providers tr')).filter(function (r) { return r.cells[0].textContent === 'node-a/postgres'; })[0]"
tls=$($CDP eval "$CP" "$row.cells[3].textContent")
fence=$($CDP eval "$CP" "$row.cells[4].textContent")
case $tls in "\"$(sed -n 1p "$W/fence.txt") to "*) ;; *) t_fail "the page says node-a/postgres is reached $tls, tally status: $(sed -n 1p "$W/fence.txt")" ;; esac
[ "$fence" = "\"$(sed -n 2p "$W/fence.txt")\"" ] || t_fail "the page says node-a/postgres is fenced $fence, tally status: $(sed -n 2p "$W/fence.txt")"
$CDP eval "$CP" "window.tallyMark = 42" >/dev/null
$CDP shot "$CP" "$SHOTS/27_board_serve-1-healthy.png" || t_fail "no screenshot"
t_ok "one item, 'Nothing.'; the grants tile: $G; agents: node-a holding 2; app-1 and app-2 '$want' as tally status says; mesh $MESH, epoch 1; $since event(s) since yesterday; node-a/postgres $tls, fenced $fence; $SHOTS/27_board_serve-1-healthy.png"

# watch NAME COND: the page's own clock records when COND first holds
# (window.tallySeen[NAME], ms since the epoch), checked every 10 ms.
watch() {
	$CDP eval "$CP" "(window.tallySeen = window.tallySeen || {}), window.tallySeen['$1'] = null, setInterval(function () { if (window.tallySeen['$1'] === null && ($2)) window.tallySeen['$1'] = Date.now(); }, 10), true" >/dev/null
}
# latency NAME TYPE: ms from the last TYPE event's time to when the page
# showed it.
latency() {
	tly log --type "$2" --json | tail -n 1 >"$W/ev.json"
	$PY3 - "$W/ev.json" "$($CDP eval "$CP" "window.tallySeen['$1']")" <<'PY'
import datetime, json, sys
ev = json.load(open(sys.argv[1]))
ts = ev["ts"]
sec, frac = ts.rstrip("Z").split(".")
t = datetime.datetime.strptime(sec, "%Y-%m-%dT%H:%M:%S").replace(
    tzinfo=datetime.timezone.utc).timestamp() + float("0." + frac)
print(int(float(sys.argv[2]) - t * 1000))
PY
}

t_check "the provider goes unreachable: on the open page within 2 s of the commit, no reload"
watch down "Array.from(document.querySelectorAll('#needs li')).some(function (l) { return l.dataset.kind === 'unreachable' && l.textContent.indexOf('node-a/postgres') >= 0; })"
t_pg_stop_server
$CDP wait "$CP" "window.tallySeen.down !== null" 60 >/dev/null ||
	t_fail "the open page does not show the provider unreachable: $($CDP eval "$CP" "document.getElementById('needs').innerText")"
[ "$($CDP eval "$CP" "window.tallyMark")" = 42 ] || t_fail "the page was reloaded (the window's mark is gone)"
ms=$(latency down provider.unreachable)
[ "$ms" -le 2000 ] || t_fail "the change reached the open page $ms ms after the event (> 2 s)"
$CDP shot "$CP" "$SHOTS/27_board_serve-2-unreachable.png"
t_ok "$($CDP eval "$CP" "document.querySelector('#needs li[data-kind=unreachable]').textContent" | cut -c 1-90)…: on the page $ms ms after the event, same window; $SHOTS/27_board_serve-2-unreachable.png"

t_check "and back: the item leaves the open page"
watch back "document.querySelector('#needs li').dataset.kind === 'none'"
t_pg_restart_server
$CDP wait "$CP" "window.tallySeen.back !== null" 90 >/dev/null ||
	t_fail "the open page still shows: $($CDP eval "$CP" "document.getElementById('needs').innerText")"
[ "$($CDP eval "$CP" "window.tallyMark")" = 42 ] || t_fail "the page was reloaded"
ms=$(latency back provider.recovered)
[ "$ms" -le 2000 ] || t_fail "the recovery reached the open page $ms ms after the event (> 2 s)"
$CDP shot "$CP" "$SHOTS/27_board_serve-3-back.png"
t_ok "'Nothing.' again $ms ms after provider.recovered; same window"

code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
t_check "each module links to its history: tally history as a page, in Chromium"
$CDP eval "$CP" "document.querySelector('#modules a[href=\"/history/app-1\"]').click(), true" >/dev/null ||
	t_fail "app-1 has no link to its history"
$CDP wait "$CP" "location.pathname === '/history/app-1' && document.getElementById('history') !== null" 20 >/dev/null ||
	t_fail "the history page did not open: $($CDP eval "$CP" "location.href")"
rows=$($CDP eval "$CP" "document.querySelectorAll('#history tr').length - 1")
want=$(tly log --json | $PY3 -c '
import json, sys
m = "app-1"
def mine(s):
    return s == "module/" + m or s.startswith("assignment/" + m + "@") or \
        s.startswith("grant/" + m + "/") or s.startswith("binding/" + m + "/")
print(sum(1 for l in sys.stdin if mine(json.loads(l)["stream"])))')
[ "$rows" = "$want" ] || t_fail "the history page shows $rows event(s), the log has $want of app-1's streams"
$CDP eval "$CP" "document.getElementById('history').innerText" | grep -q 'provisioned' ||
	t_fail "the history does not say app-1's grant was provisioned"
$CDP shot "$CP" "$SHOTS/27_board_serve-4-history.png"
[ "$(code "$URL/history/nope")" = 404 ] && [ "$(code --path-as-is "$URL/history/../view.json")" = 404 ] &&
	[ "$(code "$URL/history/APP")" = 404 ] || t_fail "a history of no module is not 404"
$CDP open "$CP" "$URL/" || t_fail "Chromium did not load the page again"
t_ok "$rows event(s), as the log has them for app-1; no module, a traversal: 404; $SHOTS/27_board_serve-4-history.png"

t_check "hostile clients: other paths and methods, an oversized header, many connections, streams left open"
[ "$(code "$URL/../../etc/passwd")" = 404 ] || t_fail "traversal not 404"
[ "$(code --path-as-is "$URL/view.json/../../../etc/passwd")" = 404 ] || t_fail "traversal (as is) not 404"
[ "$(code "$URL/index.html")" = 404 ] || t_fail "another path not 404"
[ "$(code -X POST --data x "$URL/")" = 405 ] || t_fail "POST not 405"
big=$(head -c 100000 /dev/zero | tr '\0' a)
c=$(code -H "X-Big: $big" "$URL/")
case $c in 4*|000) ;; *) t_fail "a 100 KB header answered $c" ;; esac
# Ten streams held open, then a burst of 300 connections.
for i in 1 2 3 4 5 6 7 8 9 10; do
	curl -sS -N --max-time 8 "$URL/events" >/dev/null 2>&1 &
done
$PY3 - "$BP" 300 <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
socks = []
for _ in range(n):
    try:
        socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except OSError:
        pass
for s in socks:
    s.close()
PY
# Connections past the limits are refused while they last; once the
# burst is gone the next request is answered.
t0=$(t_now_ms)
until curl -fsS --max-time 5 "$URL/" >/dev/null 2>&1; do
	[ $(($(t_now_ms) - t0)) -lt 5000 ] || t_fail "GET / still refused 5 s after the burst"
	sleep 0.1
done
t1=$(t_now_ms)
kill -0 "$BPID" 2>/dev/null || t_fail "tally-board died: $(tail -n 5 "$W/board.log")"
$CDP eval "$CP" "1" >/dev/null || t_fail "the browser's page is gone"
t_ok "404, 404, 404, 405; a 100 KB header: $c; 10 streams open and 300 connections, then / in $((t1 - t0)) ms; tally-board up"

t_check "SIGTERM: tally-board ends cleanly, streams closed"
kill -TERM "$BPID"
i=0
while kill -0 "$BPID" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
! kill -0 "$BPID" 2>/dev/null || t_fail "tally-board did not end within 10 s of SIGTERM"
wait "$BPID"
rc=$?
t_forget_pid "$BPID"
[ "$rc" = 0 ] || t_fail "tally-board exited $rc: $(tail -n 5 "$W/board.log")"
t_ok "exit 0 within $((i / 10)).$((i % 10)) s"

t_check "a bad --serve address: refused at start"
t_expect_exit 2 "tally-board --serve nonsense" "$TALLY_BIN/tally-board" --home "$TALLY_HOME" \
	--store "$W/board2" --serve 127.0.0.1:http
t_ok "exit 2"
