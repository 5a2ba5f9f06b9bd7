#!/bin/sh
# Configuration derived from the node (issue 16, item 5; seed 000: "a
# declaration is composed per node from what the node reported").  A
# provider's manifest derives settings from its node's inventory as
# YAML structure (from-node, times, unit, min, max); tally node report
# --inventory records node.inventoried; every assignment on the node is
# composed again (assignment.derived), shown by tally explain; the same
# inventory twice appends nothing; the operator's --set wins, recorded
# as overridden; the provider still serves a consumer on a real
# PostgreSQL (the driver does not declare shared_buffers, so it is only
# shown); rebuild --check is identical.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL, one node"
t_pg_start
t_init
t_node node-a 127.0.0.1
M=$W/manifests
mkdir -p "$M"

t_check "a derivation from something no inventory has is refused, naming file, line and field"
cat >"$M/bad.yaml" <<'Y'
module: bad
provides:
  postgres-database:
    driver: postgres
    settings:
      shared_buffers: {from-node: swap, times: 0.25}
Y
t_expect_exit 4 "apply from-node: swap" tly apply "$M/bad.yaml"
grep -q "bad.yaml:6:[0-9]*: provides.postgres-database.settings.shared_buffers.from-node: 'swap' is not in a node's inventory; it has memory, cpus, disk" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "the refusal does not name bad.yaml:6 and the field"
}
sed 's/from-node: swap, times: 0.25/from-node: memory, times: -1/' "$M/bad.yaml" >"$M/bad2.yaml"
t_expect_exit 4 "apply times: -1" tly apply "$M/bad2.yaml"
grep -q "settings.shared_buffers.times: '-1' is not a factor" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "times: -1 not refused"; }
tly log --json | grep -q '"bad' && t_fail "a refused manifest appended something"
t_ok "$(head -n 1 "$W/last.err")"

cat >"$M/postgres.yaml" <<'Y'
module: postgres
instances: one-per-node
provides:
  postgres-database:
    driver: postgres
    settings:
      shared_buffers: {from-node: memory, times: 0.25, unit: MB, min: 128MB}
      effective_io_concurrency: {from-node: cpus, times: 2, max: 16}
Y
tly apply "$M/postgres.yaml" "$(t_consumer shop)" >/dev/null
tly log --json | grep '"type":"module.declared"' | grep '"name":"postgres"' |
	grep -q '"shared_buffers":{"from":"memory","times":"0.25","unit":"MB","min":134217728,"max":0}' ||
	t_fail "module.declared does not carry the derivation"
tly assign postgres node-a --expose network --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null

t_check "no inventory yet: explain says so"
tly explain postgres >"$W/ex.out"
grep -q "nothing yet: no inventory (tally node report node-a --inventory FILE.json)" "$W/ex.out" ||
	{ cat "$W/ex.out" >&2; t_fail "explain does not say there is no inventory"; }
t_ok "$(grep 'nothing yet' "$W/ex.out" | sed 's/^ *//')"

t_check "node report --inventory: node.inventoried, and the values composed per assignment"
cat >"$W/inv.json" <<'J'
{"memory": "8GB", "cpus": 4, "disks": [{"path": "/", "size": "100GB"}, {"path": "/data", "size": 1073741824}]}
J
tly node report node-a --inventory "$W/inv.json" >/dev/null
tly log --json | grep '"type":"node.inventoried"' | grep '"node":"node-a"' |
	grep -q '"memory":8589934592,"cpus":4' || t_fail "node.inventoried does not record memory and cpus"
tly log --json | grep '"type":"assignment.derived"' | tail -n 1 |
	grep -q '"settings":{"effective_io_concurrency":"8","shared_buffers":"2048MB"}' ||
	{ tly log --json | grep assignment.derived >&2; t_fail "assignment.derived is not 2048MB and 8"; }
tly explain postgres >"$W/ex.out"
grep -q "shared_buffers = 2048MB (memory 8589934592 x 0.25)" "$W/ex.out" &&
	grep -q "effective_io_concurrency = 8 (cpus 4 x 2)" "$W/ex.out" ||
	{ cat "$W/ex.out" >&2; t_fail "explain does not show the composed values"; }
n0=$(tly log --json | wc -l)
tly node report node-a --inventory "$W/inv.json" >/dev/null
[ "$(tly log --json | wc -l)" = "$n0" ] || t_fail "the same inventory again appended events"
t_ok "$(grep 'shared_buffers =' "$W/ex.out" | sed 's/^ *//')"

t_check "a new inventory recomposes: a small node gets the min, many cpus the max"
printf '{"memory": "256MB", "cpus": 64}\n' >"$W/inv2.json"
tly node report node-a --inventory "$W/inv2.json" >/dev/null
tly explain postgres >"$W/ex.out"
grep -q "shared_buffers = 128MB (memory 268435456 x 0.25, raised to min)" "$W/ex.out" &&
	grep -q "effective_io_concurrency = 16 (cpus 64 x 2, cut to max)" "$W/ex.out" ||
	{ cat "$W/ex.out" >&2; t_fail "explain does not show the recomposed values"; }
printf '{"memory": "lots", "cpus": 4}\n' >"$W/inv3.json"
t_expect_exit 4 "report memory: lots" tly node report node-a --inventory "$W/inv3.json"
grep -q "memory: expected a size" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "a bad inventory is not refused"; }
t_ok "$(grep 'shared_buffers =' "$W/ex.out" | sed 's/^ *//')"

t_check "the operator's --set wins over the derived value, recorded as overridden"
tly assign postgres node-a --set shared_buffers=512MB >/dev/null
tly log --json | grep '"type":"assignment.derived"' | tail -n 1 |
	grep '"shared_buffers":"512MB"' | grep -q '"overridden":{"shared_buffers":"128MB"}' ||
	{ tly log --json | grep assignment.derived | tail -n 1 >&2; t_fail "the override is not recorded"; }
tly explain postgres >"$W/ex.out"
grep -q "shared_buffers = 512MB (memory 268435456 x 0.25, raised to min): set on the assignment, which wins over the derived 128MB" "$W/ex.out" ||
	{ cat "$W/ex.out" >&2; t_fail "explain does not show the override"; }
t_ok "$(grep 'shared_buffers =' "$W/ex.out" | sed 's/^ *//')"

t_check "the provider still serves a consumer on the real PostgreSQL"
tly assign shop node-a >/dev/null
t_tallyd_once
t_wait_healthy 10 shop
t_env_psql "$(t_envfile node-a shop)" "SELECT 1" >/dev/null || t_fail "shop cannot connect"
t_ok "shop provisioned by node-a/postgres"

t_check "a derived setting the driver declares reaches it: the directory driver's group numbers follow the node's cpus"
cat >"$M/files.yaml" <<'Y'
module: files
provides:
  directory:
    driver: directory
    settings:
      gid-base: {from-node: cpus, times: 1000000}
      gid-range: {from-node: cpus, times: 1000}
      cache_size: {from-node: memory, times: 0.5, unit: MB}
Y
cat >"$M/game.yaml" <<'Y'
module: game
env: {FILES: ""}
requires:
  files:
    type: directory
    from: files
    env: {path: FILES}
Y
mkdir -p "$W/files"
tly apply "$M/files.yaml" "$M/game.yaml" >/dev/null
tly assign files node-a --set root="$W/files" >/dev/null
tly explain files >"$W/ex.out"
grep -q "gid-base = 64000000 (cpus 64 x 1000000)" "$W/ex.out" &&
	grep -q "gid-range = 64000 (cpus 64 x 1000)" "$W/ex.out" &&
	grep -q "cache_size = 128MB (memory 268435456 x 0.5)" "$W/ex.out" ||
	{ cat "$W/ex.out" >&2; t_fail "explain does not show the directory provider's derived settings"; }
tly assign game node-a >/dev/null
t_tallyd_once
t_wait_healthy 10 game
ls "$W/files/.tally" >"$W/gids"
g=$(sed -n 's/^gid-\([0-9]*\)$/\1/p' "$W/gids" | head -n 1)
[ -n "$g" ] || { cat "$W/gids" >&2; t_fail "no group claim under the provider's root"; }
[ "$g" -ge 64000000 ] && [ "$g" -lt 64064000 ] ||
	t_fail "the grant's group $g is not in the derived [64000000, 64064000) (the default is 1000000000 and up)"
t_ok "group $g from gid-base 64000000 and gid-range 64000 (derived); cache_size shown only"

t_check "a derived value the driver would refuse is recorded as refused and never handed to it"
sed 's/gid-range: {from-node: cpus, times: 1000}/gid-range: {from-node: memory}/' "$M/files.yaml" >"$M/files2.yaml"
tly apply "$M/files2.yaml" >/dev/null
tly log --json | grep '"type":"assignment.derived"' | grep '"module":"files"' | tail -n 1 >"$W/d.json"
grep -q '"refused":{"gid-range":' "$W/d.json" && ! grep -q '"settings":{[^}]*"gid-range"' "$W/d.json" ||
	{ cat "$W/d.json" >&2; t_fail "gid-range 268435456B was not refused"; }
tly explain files >"$W/ex.out"
grep -q "gid-range: derived memory 268435456 x 1, which the driver refuses" "$W/ex.out" ||
	{ cat "$W/ex.out" >&2; t_fail "explain does not show the refused value"; }
t_ok "$(grep 'gid-range:' "$W/ex.out" | sed 's/^ *//')"

t_check "a derived value past the driver's declared limits (cpus 4294967295: gid-base=4294967295) is refused and the default stands"
sed 's/gid-base: {from-node: cpus, times: 1000000}/gid-base: {from-node: cpus}/' "$M/files2.yaml" >"$M/files3.yaml"
tly apply "$M/files3.yaml" >/dev/null
printf '{"memory": "256MB", "cpus": 4294967295}\n' >"$W/inv4.json"
tly node report node-a --inventory "$W/inv4.json" >/dev/null
tly log --json | grep '"type":"assignment.derived"' | grep '"module":"files"' | tail -n 1 >"$W/d.json"
grep -q '"refused":{[^}]*"gid-base":"gid-base=4294967295: expected an integer, 1-4294967294"' "$W/d.json" &&
	! grep -q '"settings":{[^}]*"gid-base"' "$W/d.json" ||
	{ cat "$W/d.json" >&2; t_fail "gid-base=4294967295 was not refused by the driver's declared limit"; }
tly explain files >"$W/ex.out"
grep -q "gid-base: derived cpus 4294967295 x 1, which the driver refuses (gid-base=4294967295: expected an integer, 1-4294967294): not handed to it, its default stands" "$W/ex.out" ||
	{ cat "$W/ex.out" >&2; t_fail "explain does not show gid-base refused with the default standing"; }
tly unassign game node-a >/dev/null
t_tallyd_once
tly assign game node-a >/dev/null
t_tallyd_once
t_wait_healthy 10 game
t_ok "$(grep 'gid-base:' "$W/ex.out" | sed 's/^ *//'); game's grant still provisioned"

t_check "derived values each within limits but not together (gid-base 4000000000 + the default gid-range) are refused, the defaults stand"
cat >"$M/files4.yaml" <<'Y'
module: files
provides:
  directory:
    driver: directory
    settings:
      gid-base: {from-node: cpus, times: 1000000}
Y
tly apply "$M/files4.yaml" >/dev/null
printf '{"memory": "256MB", "cpus": 4000}\n' >"$W/inv6.json"
tly node report node-a --inventory "$W/inv6.json" >/dev/null
tly log --json | grep '"type":"assignment.derived"' | grep '"module":"files"' | tail -n 1 >"$W/d.json"
grep -q '"refused":{"gid-base":"gid-base 4000000000 + gid-range 1000000000 pass 4294967295"}' "$W/d.json" ||
	{ cat "$W/d.json" >&2; t_fail "gid-base=4000000000 with the default gid-range was not refused"; }
tly unassign game node-a >/dev/null
t_tallyd_once
tly assign game node-a >/dev/null
t_tallyd_once
t_wait_healthy 10 game
t_ok "gid-base 4000000000 refused taken with gid-range; game's grant still provisioned"

t_check "the inventory's disk total never wraps: two 8 EiB disks are refused, naming the overflow"
printf '{"memory": "8GB", "cpus": 4, "disks": [{"path": "/a", "size": "8388608TB"}, {"path": "/b", "size": "8388608TB"}]}\n' >"$W/inv5.json"
n0=$(tly log --json | wc -l)
t_expect_exit 4 "report two 8 EiB disks" tly node report node-a --inventory "$W/inv5.json"
grep -q "disks: the sizes add up past 18446744073709551615 bytes (16 EiB)" "$W/last.err" ||
	{ cat "$W/last.err" >&2; t_fail "the overflowing disk total is not refused"; }
[ "$(tly log --json | wc -l)" = "$n0" ] || t_fail "a refused inventory appended events"
tly log --json | grep '"type":"node.inventoried"' | grep -q '"disk":5' &&
	t_fail "a wrapped disk total was recorded"
t_ok "$(head -n 1 "$W/last.err")"

t_check "tally verify and tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check differs"
t_ok "the log verifies and the projections rebuild identically"
