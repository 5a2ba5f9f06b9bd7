#!/bin/sh
# The small traps of a first hour (issue 21, item 28), each said plainly:
#   - a tab in a manifest's indentation: "tabs are not allowed in YAML
#     indentation", with its line (not libyaml's "cannot start any
#     token");
#   - a requirement that maps no field to env: applied, with a warning
#     that nothing will be delivered for it;
#   - tallyd on a home that does not exist: "no tally home at …; tally
#     init first" (exit 3), not a lock file's error, and nothing created;
#   - --set (or --secret) on a module that provides nothing: refused,
#     saying why (nothing reads it);
#   - HOST:PORT as a node's routable name: refused, saying the port is
#     each provider's setting.
# No server is needed.
. "$(dirname "$0")/lib.sh"

mkdir -p "$W/manifests" "$W/keys"
t_say "a tally home with node-a"
t_init
t_node node-a 127.0.0.1

t_check "a tab in the indentation"
printf 'module: app\nrequires:\n  db:\n\ttype: postgres-database\n' >"$W/manifests/tab.yaml"
t_expect_exit 4 "tally apply tab.yaml" tly apply "$W/manifests/tab.yaml"
grep -q "tab.yaml:4:.*tabs are not allowed in YAML indentation" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "the refusal does not say tabs are not allowed, at line 4"; }
! grep -q "cannot start any token" "$W/last.err" || t_fail "libyaml's words are still what it says"
t_ok "$(head -n 1 "$W/last.err")"

t_check "a requirement that maps nothing to env: a warning"
cat >"$W/manifests/bare.yaml" <<'YAML'
module: bare
requires:
  db:
    type: postgres-database
    from: postgres
YAML
t_expect_exit 0 "tally apply bare.yaml" tly apply "$TALLY_SRC/examples/postgres.yaml" "$W/manifests/bare.yaml"
grep -q "bare.yaml:3: requires.db: .*maps no connection field to env: nothing will be delivered" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "no warning that nothing will be delivered for bare's db"; }
t_ok "$(grep -m1 'nothing will be delivered' "$W/last.err")"
t_expect_exit 0 "tally apply a consumer that maps its fields" tly apply "$(t_consumer app)"
! grep -q "nothing will be delivered" "$W/last.err" || t_fail "a warning for a requirement that maps its fields"

t_check "tallyd without a home"
t_expect_exit 3 "tallyd --once on a home that does not exist" \
	env TALLY_HOME="$W/nohome" "$TALLY_BIN/tallyd" --once
grep -q "no tally home at $W/nohome; tally init first" "$W/last.err" || {
	cat "$W/last.err" >&2; t_fail "tallyd does not say there is no home and to tally init first"; }
! grep -q "lock" "$W/last.err" || t_fail "tallyd still speaks of its lock file"
[ ! -e "$W/nohome" ] || t_fail "tallyd created $W/nohome"
t_ok "$(head -n 1 "$W/last.err" | sed 's/^.*error: //')"

t_check "--set on a module that provides nothing"
t_expect_exit 4 "tally assign app node-a --set note=x" tly assign app node-a --set note=x
grep -q "app provides nothing" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "the refusal does not say why"; }
t_ok "$(head -n 1 "$W/last.err")"
[ "$(tly log --json --type assignment.created | grep -c app@node-a || true)" -eq 0 ] ||
	t_fail "the refused assign recorded app@node-a"

t_check "HOST:PORT as a routable name"
t_expect_exit 4 "tally node add node-b --routable-name db1.lan:5432" \
	tly node add node-b --routable-name db1.lan:5432 --key-out "$W/keys/node-b.key"
grep -q "HOST:PORT" "$W/last.err" || { cat "$W/last.err" >&2; t_fail "the refusal does not say why"; }
[ ! -e "$W/keys/node-b.key" ] || t_fail "a key file was written for the refused node"
t_ok "$(head -n 1 "$W/last.err")"
t_expect_exit 0 "an IPv6 address is a routable name" \
	tly node add node-c --routable-name ::1 --key-out "$W/keys/node-c.key"
t_ok "::1 (an IPv6 address) is accepted"
