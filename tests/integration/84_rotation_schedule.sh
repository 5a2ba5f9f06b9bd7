#!/bin/sh
# Scheduled rotation.  Three consumers (s1, s2, s3) of the postgres
# provider on node-a, each requirement with max-credential-age: 5s
# (the manifest takes s, m, h, d, w: docs/manifest.md).  tallyd runs as
# a daemon with --max-rotations 1: once the credentials are 5 s old all
# three are due, but only one rotation runs at a time on the provider;
# the others start as each completes (acknowledged by a background
# acker).  Every start is recorded with reason "schedule" by tallyd.
# Then tallyd again with --max-rotations 2: two run at once, never three.
# Replaying rotation.started / rotation.completed from the log gives the
# number running at every moment.
. "$(dirname "$0")/lib.sh"

MODS="s1 s2 s3"

# running: how many rotations were running after each event, at most.
max_running() {
	tly log --json --type 'rotation.*' | t_jfields type |
		awk '$1 == "rotation.started" { n++ }
		     $1 == "rotation.completed" || $1 == "rotation.abandoned" { n-- }
		     n > m { m = n } END { print m + 0 }'
}
now_running() {
	tly log --json --type 'rotation.*' | t_jfields type |
		awk '$1 == "rotation.started" { n++ }
		     $1 == "rotation.completed" || $1 == "rotation.abandoned" { n-- }
		     END { print n + 0 }'
}
# ack_active: every holder acknowledges every activated credential.
ack_active() {
	for m in $MODS; do
		v=$(tly log --json --stream "grant/$m/db" --type credential.activated |
			tail -n 1 | sed -n 's/.*"body":{"grant":"[^"]*","version":\([0-9]*\).*/\1/p')
		[ -n "$v" ] && tly ack node-a "$m" "$v" >/dev/null 2>&1
	done
	return 0
}

t_say "throwaway PostgreSQL; s1, s2, s3 with max-credential-age: 5s"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
for m in $MODS; do
	f=$(t_consumer "$m")
	printf '    max-credential-age: 5s\n' >>"$f"
	tly apply "$f" >/dev/null || t_fail "tally apply $m (max-credential-age: 5s) refused"
	tly assign "$m" node-a >/dev/null || t_fail "tally assign $m failed"
done
t_ok "manifests with max-credential-age: 5s accepted"
t_tallyd_start --interval 1 --max-rotations 1
t_wait_healthy 30

t_check "when due, one rotation starts, and only one runs (--max-rotations 1)"
end=$(($(t_now_ms) + 15000))
until tly log --json --type rotation.started | grep -q .; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "no scheduled rotation within 15 s of provisioning"
	sleep 0.1
done
first=$(tly log --json --type rotation.started | head -n 1)
printf '%s' "$first" | grep -q '"reason":"schedule"' || t_fail "the rotation was not started by the schedule: $first"
[ "$(printf '%s' "$first" | t_jstr actor)" = tallyd ] || t_fail "the scheduled rotation's actor is not tallyd: $first"
t_ok "$(printf '%s' "$first" | t_jfields stream) started by tallyd, reason schedule"
sleep 3	# all three are due now; nothing is acknowledged
[ "$(now_running)" -eq 1 ] || t_fail "$(now_running) rotations running with --max-rotations 1"
n=$(tly log --json --type rotation.started | wc -l)
[ "$n" -eq 1 ] || t_fail "$n rotations started while the first waits for its acknowledgement"
tly status --json >"$W/status.json" || true
r=$(grep -o '"rotation":' "$W/status.json" | wc -l)
[ "$r" -eq 1 ] || t_fail "status shows $r rotations, expected 1"
t_ok "after 3 s, still 1 running (the others due, waiting)"

t_check "as each completes the next starts, never more than one at a time"
end=$(($(t_now_ms) + 30000))
while :; do
	ack_active
	done_all=1
	for m in $MODS; do
		tly log --json --stream "grant/$m/db" --type rotation.completed | grep -q . ||
			done_all=0
	done
	[ $done_all -eq 1 ] && break
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "not every grant was rotated within 30 s: $(tly log --json --type 'rotation.*' | t_jfields type stream | tr '\n' ';')"
	sleep 0.2
done
[ "$(max_running)" -eq 1 ] || t_fail "$(max_running) rotations ran at once with --max-rotations 1"
tly log --json --type rotation.started | grep -v '"reason":"schedule"' | grep -q . &&
	t_fail "a rotation was started for another reason than the schedule"
t_ok "s1, s2, s3 each rotated; at most 1 running at any moment; $(tly log --json --type rotation.started | wc -l) scheduled starts"
t_tallyd_stop
ack_active

t_check "--max-rotations 2: two at once, never three"
t_tallyd_start --interval 1 --max-rotations 2
end=$(($(t_now_ms) + 15000))
until [ "$(now_running)" -ge 2 ]; do
	[ "$(t_now_ms)" -lt "$end" ] || t_fail "two rotations never ran at once with --max-rotations 2 (running: $(now_running))"
	sleep 0.1
done
sleep 3	# the third is due too; nothing is acknowledged
[ "$(now_running)" -eq 2 ] || t_fail "$(now_running) rotations running with --max-rotations 2"
[ "$(max_running)" -le 2 ] || t_fail "$(max_running) rotations ran at once"
t_ok "2 running after 3 s, the third waiting"
t_tallyd_stop

t_check "the delivered credentials work (rotated, or mid-rotation: the new one)"
for m in $MODS; do
	u=$(t_env_psql "$(t_envfile node-a "$m")" "SELECT session_user") ||
		t_fail "$m's delivered credential does not connect"
	case "$u" in
		"$(t_gname "$m/db" "$m-db")_v1") t_fail "$m still runs with v1" ;;
	esac
done
t_ok "s1, s2, s3 connect with their rotated credentials ($u for s3)"

tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check: projections differ"
t_ok "tally verify, tally rebuild --check"
