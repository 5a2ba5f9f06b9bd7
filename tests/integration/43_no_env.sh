#!/bin/sh
# A requirement that maps no env field is delivered as nothing, and no
# pass loops on it: tallyd --once finishes promptly (exit 0, well
# before its --once-timeout), the daemon idles (little CPU), and no env
# file is written for it while the other consumer's is.  A mapping of
# a field the type never produces (vhost on postgres-database) is
# refused by tally apply (exit 4), naming the field and the fields the
# driver produces.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL; a consumer that maps nothing, one that maps all"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
mkdir -p "$W/manifests"
cat >"$W/manifests/bare.yaml" <<'YAML'
module: bare
requires:
  db:
    type: postgres-database
    from: postgres
YAML
cat >"$W/manifests/vhost.yaml" <<'YAML'
module: vhost
env: {V: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    env: {vhost: V}
YAML

t_check "tally apply refuses a field the type does not produce"
t_expect_exit 4 "tally apply vhost.yaml" tly apply "$W/manifests/vhost.yaml"
grep -q "vhost.yaml:7:.*requires.db.env.vhost.*does not produce connection field 'vhost'; it produces host, port, database, user, password, url" "$W/last.err" || {
	cat "$W/last.err" >&2
	t_fail "the refusal does not name the file:line, the field and the fields produced"
}
t_ok "$(head -n 1 "$W/last.err")"

tly apply "$W/manifests/bare.yaml" "$(t_consumer app)" >/dev/null
tly assign bare node-a >/dev/null
tly assign app node-a >/dev/null

t_check "tallyd --once finishes promptly (--once-timeout 30), exit 0"
t0=$(t_now_ms)
set +e
timeout 60 "$TALLY_BIN/tallyd" --once --once-timeout 30 2>>"$T_DLOG"
rc=$?
set -e
t1=$(t_now_ms)
[ $rc -eq 0 ] || { tail -n 5 "$T_DLOG" >&2; t_fail "tallyd --once exited $rc after $((t1 - t0)) ms"; }
[ $((t1 - t0)) -lt 10000 ] || t_fail "tallyd --once took $((t1 - t0)) ms"
t_ok "exit 0 after $((t1 - t0)) ms"
[ ! -e "$(t_envfile node-a bare)" ] || t_fail "bare, which maps nothing, has an env file"
[ "$(t_env_psql "$(t_envfile node-a app)" "SELECT current_database()")" = "$(t_gname app/db app-db)" ] ||
	t_fail "app's credential does not reach app-db"
tly log --json --stream grant/bare/db --type grant.provisioned | grep -q provisioned ||
	t_fail "bare's grant was not provisioned"
t_ok "bare's grant provisioned, delivered as nothing; app's env file works"
t_expect_exit 0 "tally status bare" tly status bare

t_check "tallyd as a daemon idles"
t_tallyd_start --interval 1
sleep 3
ticks=$(awk '{print $14 + $15}' "/proc/$T_DPID/stat")
hz=$(getconf CLK_TCK)
[ "$ticks" -lt $((hz / 2)) ] || t_fail "the daemon used $ticks/$hz s of CPU in 3 s"
t_tallyd_stop
t_ok "$ticks/$hz s of CPU in 3 s"
