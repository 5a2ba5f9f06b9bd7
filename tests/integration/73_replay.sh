#!/bin/sh
# Replay for audit: at each step of a real run (declare, assign,
# provision, rotate, acknowledge, revoke) the status that `tally status
# --json` printed is recorded with the sequence number it was printed
# at; afterwards `tally replay --until SEQ --status --json` must give
# exactly that document back — the only difference allowed is the
# verifier's last check time and count, which are kept beside the log,
# not in it, and which replay therefore leaves out.  Replay by time,
# diff between two points in domain words, and history of the grant.
. "$(dirname "$0")/lib.sh"

G=app/db

head_seq() { tly stats --json | sed -n 's/.*"last_seq":\([0-9]*\).*/\1/p'; }

# record NAME: the status and the seq it belongs to, read together (a
# second look at the head makes sure nothing was appended in between).
record() {
	while :; do
		_a=$(head_seq)
		tly status --json >"$W/st.tmp" || true
		_b=$(head_seq)
		[ "$_a" = "$_b" ] && break
	done
	mv "$W/st.tmp" "$W/st.$1.json"
	eval "P_$1=$_a"
	echo "$1 $_a" >>"$W/points"
	t_note "recorded '$1' at event $_a"
}

# The verifier's check time and count, the rotator's count of the old
# login's sessions: operational, not in the log.
no_checks() { sed -e 's/,"last_verified":"[^"]*","checks":[0-9]*//g' -e 's/,"old_sessions":[0-9]*//g' "$1"; }

t_wait_type() {	# SECONDS TYPE [GREP]
	_w_end=$(($(t_now_ms) + $1 * 1000))
	until tly log --json --type "$2" | grep -q -e "${3:-.}"; do
		[ "$(t_now_ms)" -lt "$_w_end" ] || {
			tail -n 20 "$T_DLOG" >&2
			t_fail "no $2 ${3:+matching $3 }within $1 s"
		}
		sleep 0.1
	done
}

t_say "a run, recorded step by step"
t_pg_start
t_init
t_node node-a 127.0.0.1
record node
t_provider node-a local
record provider
tly apply "$(t_consumer app)" >/dev/null
record declared
tly assign app node-a >/dev/null
record assigned
sleep 0.05
T_ASSIGNED=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
sleep 0.05
t_tallyd_start --interval 1 --verify-interval 3600
t_wait_healthy 30 app
record ready
tly rotate "$G" >/dev/null || t_fail "tally rotate $G failed"
t_wait_type 30 credential.delivered '"version":2'
t_wait_type 10 credential.activated
sleep 0.3
record rotating
# The reporting context sees the rotation and who it waits on.
"$TALLY_BIN/tally-board" --store "$W/board" --html "$W/rot.html" --quiet ||
	t_fail "tally-board failed"
grep -q 'id="count-rotations">1<' "$W/rot.html" || t_fail "tally-board shows no rotation in progress"
grep -q '<td class="waiting">app@node-a </td>' "$W/rot.html" ||
	t_fail "tally-board does not show app@node-a as still to acknowledge"
tly ack node-a app 2 >/dev/null || t_fail "tally ack node-a app 2 failed"
t_wait_type 30 rotation.completed
sleep 0.3
record rotated
"$TALLY_BIN/tally-board" --store "$W/board" --html "$W/rot.html" --quiet ||
	t_fail "tally-board failed"
grep -q 'id="count-rotations">0<' "$W/rot.html" || t_fail "tally-board still shows the rotation"
tly remove app >/dev/null || t_fail "tally remove app failed"
t_wait_type 30 grant.revoked
sleep 0.3
record revoked
t_tallyd_stop

t_check "replay --until SEQ --status --json is the status printed at SEQ"
while read -r name seq; do
	tly replay --until "$seq" --status --json >"$W/re.$name.json" ||
		t_fail "tally replay --until $seq failed"
	if ! no_checks "$W/st.$name.json" | cmp -s - "$W/re.$name.json"; then
		echo "--- recorded at $seq:" >&2; cat "$W/st.$name.json" >&2
		echo "--- replayed:" >&2; cat "$W/re.$name.json" >&2
		t_fail "replay at $seq ($name) differs from what tally status printed"
	fi
	# The recorded documents really differ from one another.
	echo "$(cksum <"$W/re.$name.json") $name" >>"$W/sums"
done <"$W/points"
[ "$(cut -d' ' -f1 "$W/sums" | sort -u | wc -l)" -ge 6 ] ||
	t_fail "the recorded statuses are not different enough to mean anything: $(cat "$W/sums")"
grep -q '"state":"ready"' "$W/re.ready.json" || t_fail "the replayed 'ready' status is not ready"
grep -q 'rotat' "$W/re.rotating.json" || t_fail "the replayed 'rotating' status shows no rotation"
t_ok "$(wc -l <"$W/points") points, every one reproduced"

t_check "replay --until TIME: the last event at or before it"
tly replay --until "$T_ASSIGNED" --status --json >"$W/re.time.json"
cmp -s "$W/re.time.json" "$W/re.assigned.json" ||
	t_fail "replay at $T_ASSIGNED is not the status after event $P_assigned"
t_expect_exit 2 "a time that is not one" tly replay --until yesterday
t_expect_exit 3 "a seq past the end" tly replay --until 999999
t_expect_exit 3 "a time before the first event" tly replay --until 2001-01-01T00:00:00Z
t_ok "by time as by sequence number"

t_check "replay (text) shows status, grants and graph as they were"
tly replay --until "$P_ready" >"$W/re.txt"
grep -q "^as of event $P_ready " "$W/re.txt" || t_fail "no header: $(head -n 1 "$W/re.txt")"
grep -q "app/db *provisioned *v1 from node-a/postgres" "$W/re.txt" ||
	t_fail "the grant is not shown provisioned v1: $(cat "$W/re.txt")"
grep -q "graph: 1 node(s), 2 module(s), 2 assignment(s), 1 provider(s), 1 binding(s)" "$W/re.txt" ||
	t_fail "the graph summary: $(grep graph: "$W/re.txt")"
tly replay --until "$P_rotated" --grants | grep -q "app/db *provisioned *v2" ||
	t_fail "after the rotation the grant is not at v2"
tly replay --until "$P_assigned" --grants | grep -q "app/db *requested" ||
	t_fail "before tallyd the grant is not requested"
t_ok "text replay reads right"

t_check "diff: what happened between two points, in domain words"
tly diff "$P_assigned" "$P_rotated" >"$W/diff.txt" || t_fail "tally diff failed"
for want in "grant $G provisioned (v1)" "grant $G rotation started v1 → v2" \
    "grant $G v2 delivered to app@node-a" "app@node-a acknowledged grant $G v2" \
    "grant $G rotated v1 → v2" "app on node-a: bound → ready"; do
	grep -qF "$want" "$W/diff.txt" || {
		cat "$W/diff.txt" >&2
		t_fail "the diff lacks \"$want\""
	}
done
n=$(grep -c '^  #' "$W/diff.txt")
[ "$n" -eq $((P_rotated - P_assigned)) ] ||
	t_fail "the diff lists $n events for ($P_assigned, $P_rotated]"
tly diff 0 "$P_declared" | grep -qF "module app requires db: instantiation postgres-database, shared" ||
	t_fail "diff from 0 lacks the requirement"
tly diff "$P_rotated" "$P_revoked" --json >"$W/diff.json"
grep -q '"summary":"grant app/db revoked' "$W/diff.json" || t_fail "diff --json lacks the revocation"
grep -q '"what":"app on node-a","from":"ready","to":"(gone)"' "$W/diff.json" ||
	t_fail "diff --json lacks the assignment's end: $(cat "$W/diff.json")"
t_expect_exit 2 "TO before FROM" tly diff "$P_rotated" "$P_assigned"
t_ok "$n events and the state changes"

t_check "history of the grant: actors (cli and tallyd), causes, times"
tly history "$G" >"$W/hist.txt"
grep -q "tallyd" "$W/hist.txt" || t_fail "no tallyd actor in the history"
grep -q "cli:" "$W/hist.txt" || t_fail "no cli actor in the history"
grep -q "grant $G revoked" "$W/hist.txt" || t_fail "the history lacks the revocation"
grep -q "because of #" "$W/hist.txt" || t_fail "the history names no cause"
nh=$(tly history "$G" --json | wc -l)
ng=$(($(tly log --json --stream "grant/$G" | wc -l) + $(tly log --json --stream "binding/$G" | wc -l)))
[ "$nh" -eq "$ng" ] || t_fail "history --json has $nh lines; the grant and binding streams $ng events"
t_ok "$(grep -c '^20' "$W/hist.txt") events"

t_check "the replays changed nothing: the log verifies, the tables rebuild the same"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check failed"
t_ok "unchanged"
