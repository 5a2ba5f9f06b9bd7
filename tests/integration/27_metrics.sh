#!/bin/sh
# tallyd --metrics and tally-node --metrics (issue 27, item 3): the
# Prometheus text format on loopback, checked by promtool, scraped by a
# real Prometheus (Debian's) whose HTTP API returns the grant counts,
# the node's grants held and reloads, and sees the provider go
# unreachable and come back; hostile clients (a path outside /metrics,
# another method, an oversized header, slow clients that never finish
# their request, a burst of connections) neither crash nor block tallyd
# nor the scrapes that follow.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL, three grants, tallyd --metrics"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app-1)" "$(t_consumer app-2)" "$(t_consumer app-3)" >/dev/null
for m in app-1 app-2 app-3; do tly assign $m node-a >/dev/null; done
MP=$(t_free_port)
t_tallyd_start --metrics "127.0.0.1:$MP" --interval 1 --verify-interval 1
DPID=$T_DPID
t_wait_healthy 60
URL=http://127.0.0.1:$MP/metrics
scrape() { curl -fsS --max-time 5 "$URL"; }
# The node's agent, a daemon, with a reload command per module.
NP=$(t_free_port)
"$TALLY_BIN/tally-node" --node node-a --key "$(t_nodekey node-a)" --dir "$W/agent-node-a" \
	--state "$W/agent-node-a.state" --log "$TALLY_HOME" --metrics "127.0.0.1:$NP" \
	--reload app-1=true --reload app-2=true --reload app-3=false 2>>"$W/agent-node-a.log" &
APID=$!
_t_pids="$_t_pids $APID"
NURL=http://127.0.0.1:$NP/metrics

t_check "GET /metrics: the text format (promtool), the grants by provider and state"
loghead() { tly log --json | tail -n 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])'; }
H0=$(loghead)
sleep 1.2	# figures are at most a second old: these are after H0
scrape >"$W/m1.txt" || t_fail "scrape: $(tail -n 3 "$T_DLOG")"
HEAD=$(loghead)
promtool check metrics <"$W/m1.txt" >"$W/promtool.out" 2>&1 ||
	t_fail "promtool: $(cat "$W/promtool.out")"
grep -qx 'tally_grants{provider="node-a/postgres",state="provisioned"} 3' "$W/m1.txt" ||
	t_fail "grants: $(grep '^tally_grants' "$W/m1.txt")"
grep -qx 'tally_provider_up{provider="node-a/postgres"} 1' "$W/m1.txt" ||
	t_fail "provider_up: $(grep '^tally_provider_up' "$W/m1.txt")"
n=$(sed -n 's/^tally_log_head_sequence //p' "$W/m1.txt")
[ "$n" -le "$HEAD" ] && [ "$n" -ge "$H0" ] || t_fail "head $n, the log's $H0 then $HEAD"
c=$(sed -n 's/^tally_pass_duration_seconds_count{reactor="provision"} //p' "$W/m1.txt")
[ "${c:-0}" -gt 0 ] || t_fail "no provision pass counted"
grep -q '^tally_leader_epoch 1$' "$W/m1.txt" || t_fail "epoch: $(grep epoch "$W/m1.txt")"
if grep -q 'grant="' "$W/m1.txt"; then t_fail "a grant id as a label"; fi
t_ok "promtool: clean; 3 provisioned on node-a/postgres; provider up; head $n; $c provision passes"

t_check "tally-node's GET /metrics: grants held, reloads and their failures"
t_wait_for 30 "the agent's reloads" sh -c "curl -fsS --max-time 5 '$NURL' | grep -qx 'tally_node_reloads_total 3'"
curl -fsS --max-time 5 "$NURL" >"$W/n1.txt" || t_fail "node scrape"
promtool check metrics <"$W/n1.txt" >"$W/promtool.out" 2>&1 ||
	t_fail "promtool (node): $(cat "$W/promtool.out")"
grep -qx 'tally_node_grants{state="current"} 2' "$W/n1.txt" &&
	grep -qx 'tally_node_grants{state="unreloaded"} 1' "$W/n1.txt" ||
	t_fail "node grants: $(grep '^tally_node_grants' "$W/n1.txt")"
grep -qx 'tally_node_reload_failures_total 1' "$W/n1.txt" || t_fail "reload failures: $(grep failures "$W/n1.txt")"
grep -qx 'tally_node_deliveries_total{opened="yes"} 3' "$W/n1.txt" || t_fail "deliveries: $(grep deliveries "$W/n1.txt")"
t_ok "2 current, 1 whose reload failed (app-3's false), 3 reloads, 1 failure, 3 deliveries opened"

t_check "Prometheus scrapes it: its API returns the grant count"
t_prometheus_start "127.0.0.1:$MP" "127.0.0.1:$NP"
t_wait_for 30 "Prometheus has the grants" sh -c \
	"sh '$TALLY_SRC/tests/harness/prometheus.sh' query '$T_PROM_DIR' '$T_PROM_PORT' \
	'tally_grants{state=\"provisioned\"}' | grep -q ' 3\$'"
t_wait_for 30 "Prometheus has the node's grants" sh -c \
	"sh '$TALLY_SRC/tests/harness/prometheus.sh' query '$T_PROM_DIR' '$T_PROM_PORT' \
	'sum(tally_node_grants)' | grep -q ' 3\$'"
[ "$(t_prom_query 'count(up{job="tally"} == 1)' | sed 's/.* //')" = 2 ] ||
	t_fail "both targets are not up in Prometheus: $(t_prom_query 'up')"
t_ok "$(t_prom_query 'tally_grants{state="provisioned"}'); the node holds $(t_prom_query 'sum(tally_node_grants)' | sed 's/.* //')"

t_check "the provider goes unreachable and comes back: Prometheus sees both"
t_pg_stop_server
t_wait_for 60 "provider_up 0 in Prometheus" sh -c \
	"sh '$TALLY_SRC/tests/harness/prometheus.sh' query '$T_PROM_DIR' '$T_PROM_PORT' \
	'tally_provider_up{provider=\"node-a/postgres\"}' | grep -q ' 0\$'"
t_pg_restart_server
t_wait_for 90 "provider_up 1 in Prometheus" sh -c \
	"sh '$TALLY_SRC/tests/harness/prometheus.sh' query '$T_PROM_DIR' '$T_PROM_PORT' \
	'tally_provider_up{provider=\"node-a/postgres\"}' | grep -q ' 1\$'"
t_prom_query 'max_over_time(tally_provider_up{provider="node-a/postgres"}[5m])' | grep -q ' 1$' ||
	t_fail "no up in the range"
t_prom_query 'min_over_time(tally_provider_up{provider="node-a/postgres"}[5m])' | grep -q ' 0$' ||
	t_fail "no down in the range"
t_ok "tally_provider_up 1 -> 0 -> 1 in Prometheus"

t_check "hostile clients: other paths and methods, an oversized header, slow and many clients"
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
[ "$(code "http://127.0.0.1:$MP/../../etc/passwd")" = 404 ] || t_fail "traversal not 404"
[ "$(code --path-as-is "http://127.0.0.1:$MP/metrics/../../etc/passwd")" = 404 ] || t_fail "traversal (as is) not 404"
[ "$(code -X POST --data x "$URL")" = 405 ] || t_fail "POST not 405"
[ "$(code -X DELETE "$URL")" = 405 ] || t_fail "DELETE not 405"
big=$(head -c 100000 /dev/zero | tr '\0' a)
c=$(code -H "X-Big: $big" "$URL")
case $c in 4*|000) ;; *) t_fail "a 100 KB header answered $c" ;; esac
# Slow clients: connections that send half a request and wait.
python3 - "$MP" 12 8 <<'PY' &
import socket, sys, time
port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    socks.append(s)
time.sleep(hold)
PY
SLOW=$!
sleep 1
t0=$(t_now_ms)
scrape >/dev/null || t_fail "a scrape beside 12 slow clients failed"
t1=$(t_now_ms)
[ $((t1 - t0)) -lt 3000 ] || t_fail "a scrape beside slow clients took $((t1 - t0)) ms"
wait $SLOW || true
# A burst: 300 connections at once, then an ordinary scrape.
python3 - "$MP" 300 <<'PY'
import socket, sys, threading
port, n = int(sys.argv[1]), int(sys.argv[2])
def one():
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        while s.recv(65536):
            pass
        s.close()
    except OSError:
        pass
ts = [threading.Thread(target=one) for _ in range(n)]
for t in ts: t.start()
for t in ts: t.join()
PY
kill -0 "$DPID" 2>/dev/null || t_fail "tallyd died"
scrape >"$W/m2.txt" || t_fail "no scrape after the burst"
grep -q '^tally_grants{provider="node-a/postgres",state="provisioned"} 3$' "$W/m2.txt" ||
	t_fail "after the burst: $(grep '^tally_grants' "$W/m2.txt")"
tly status >/dev/null || t_fail "tally status after the burst: exit $?"
t_ok "404, 404, 405, 405; a 100 KB header: $c; a scrape beside 12 slow clients in $((t1 - t0)) ms; 300 at once, then a clean scrape; tallyd up"

t_check "a bad --metrics address: refused at start"
t_expect_exit 2 "tallyd --metrics nonsense" "$TALLY_BIN/tallyd" --home "$W/none" --once --metrics 127.0.0.1:http
t_tallyd_stop
t_ok "exit 2"
