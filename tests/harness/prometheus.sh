#!/bin/sh
# A throwaway Prometheus (Debian's prometheus) for tests: scrapes the
# given targets every second.
#
# Usage:
#   prometheus.sh start DIR PORT TARGET...
#                        listens on 127.0.0.1:PORT, data in DIR/data, log
#                        DIR/prometheus.log, pid DIR/prometheus.pid; each
#                        TARGET is HOST:PORT serving /metrics (job
#                        "tally", instance the target); waits (30 s) for
#                        /-/ready, else prints the log's tail and exits 1
#   prometheus.sh query DIR PORT PROMQL
#                        prints the instant query's result as
#                        "LABELS VALUE" lines (labels sorted, k=v joined
#                        by ','), nothing when it is empty; exit 1 if
#                        Prometheus refuses the query
#   prometheus.sh stop DIR
#                        SIGTERM (then SIGKILL), DIR's files deleted
set -eu

die() { echo "prometheus.sh: $*" >&2; exit 1; }

cmd=${1:?usage: prometheus.sh start|query|stop DIR ...}
D=${2:?DIR}

case $cmd in
start)
	port=${3:?PORT}
	shift 3
	command -v prometheus >/dev/null || die "prometheus is not installed (tools/deps.sh)"
	mkdir -p "$D/data"
	{
		echo "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}"
		echo "scrape_configs:"
		echo "  - job_name: tally"
		echo "    static_configs:"
		printf '      - targets: ['
		sep=
		for t in "$@"; do printf '%s"%s"' "$sep" "$t"; sep=', '; done
		echo ']'
	} >"$D/prometheus.yml"
	prometheus --config.file="$D/prometheus.yml" --storage.tsdb.path="$D/data" \
		--web.listen-address="127.0.0.1:$port" --log.level=warn \
		>"$D/prometheus.log" 2>&1 &
	echo $! >"$D/prometheus.pid"
	i=0
	until curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1; do
		kill -0 "$(cat "$D/prometheus.pid")" 2>/dev/null ||
			{ tail -n 20 "$D/prometheus.log" >&2; die "prometheus exited"; }
		i=$((i + 1))
		[ $i -lt 300 ] || { tail -n 20 "$D/prometheus.log" >&2; die "not ready in 30 s"; }
		sleep 0.1
	done
	echo "prometheus.sh: Prometheus up on 127.0.0.1:$port scraping $*"
	;;
query)
	port=${3:?PORT}
	q=${4:?PROMQL}
	curl -fsS -G "http://127.0.0.1:$port/api/v1/query" --data-urlencode "query=$q" |
		python3 -c '
import json, sys
r = json.load(sys.stdin)
if r.get("status") != "success":
    sys.exit(1)
for s in r["data"]["result"]:
    m = ",".join("%s=%s" % kv for kv in sorted(s["metric"].items()))
    print(m, s["value"][1])
'
	;;
stop)
	if [ -f "$D/prometheus.pid" ]; then
		pid=$(cat "$D/prometheus.pid")
		kill "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -rf "$D/data" "$D/prometheus.pid"
	;;
*)
	die "unknown command $cmd"
	;;
esac
