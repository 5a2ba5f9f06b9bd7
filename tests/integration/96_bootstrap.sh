#!/bin/sh
# tally bootstrap BUNDLE.yaml on a machine with nothing (issue 16 item
# 6; seed 000: "steps 2 and 3 happen before there is a mesh to do
# them"), against a real PostgreSQL:
#   - malformed bundles (an unknown key, a secret written in the bundle,
#     a missing node name, a manifest that is not there) are refused
#     with exit 4 naming the file, the line and the field, and leave no
#     home behind;
#   - from an empty directory: the home exists, the node is declared
#     with its key written outside the home, the provider is assigned
#     with its settings and its secret (read from a file), the control
#     plane's module has its database on PostgreSQL, its delivered
#     credential connects (tally env --node-key), and its migration ran;
#   - tallyd --once then appends nothing bootstrap should have done,
#     a second bootstrap appends nothing and changes nothing on the
#     provider (the log's head and PostgreSQL's roles and databases
#     compared), and tally verify + tally rebuild --check pass.
. "$(dirname "$0")/lib.sh"

head_seq() { tly log --json | tail -n 1 | t_jfields seq; }
catalogue() {
	t_sql "SELECT string_agg(rolname || ':' || rolcanlogin, ',' ORDER BY rolname) FROM pg_roles" 
	t_sql "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database"
}

t_say "a real PostgreSQL"
t_pg_start

B=$W/bundle
mkdir -p "$B/mig/registry"
cat >"$B/registry.yaml" <<EOF
module: registry
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    scope: shared
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}
    migrations: mig/registry
EOF
cat >"$B/mig/registry/001_nodes.sql" <<EOF
CREATE TABLE nodes (name text PRIMARY KEY, seen timestamptz);
EOF
cp "$TALLY_SRC/examples/postgres.yaml" "$B/postgres.yaml"

# bundle [SECRETS-LINE]: the bundle, its provider's secret as given.
bundle() {
	cat <<EOF
# The control plane of a mesh, from nothing.
node:
  name: cp
  routable-name: 127.0.0.1
  key-out: $W/keys/cp.key
providers:
  - manifest: postgres.yaml
    module: postgres
    expose: network
    settings:
      port: "$TALLY_TEST_PG_PORT"
      admin-user: $TALLY_TEST_PG_USER
    secrets:
      ${1:-"admin-password: {file: $TALLY_TEST_PG_PWFILE}"}
control-plane:
  - manifest: registry.yaml
    module: registry
EOF
}

t_say "malformed bundles are refused, naming file, line and field"
refused() {	# WHAT FILE PATTERN
	t_expect_exit 4 "$1" tly bootstrap "$2"
	grep -q "$3" "$W/last.err" ||
		t_fail "$1: expected '$3' in: $(cat "$W/last.err")"
	[ ! -e "$TALLY_HOME" ] || t_fail "$1: a home was created ($TALLY_HOME)"
	t_ok "$1: $(head -n 1 "$W/last.err")"
}
bundle | sed 's/^  routable-name:/  routable:/' >"$B/bad1.yaml"
refused "an unknown key" "$B/bad1.yaml" "bad1.yaml:4: node: unknown key 'routable'"
bundle "admin-password: hunter2" >"$B/bad2.yaml"
refused "a secret in the bundle" "$B/bad2.yaml" "bad2.yaml:14: providers\[0\].secrets.admin-password: a secret is never written"
grep -q hunter2 "$W/last.err" && t_fail "the plaintext secret was printed"
bundle | sed '/^  name: cp$/d' >"$B/bad3.yaml"
refused "a missing node name" "$B/bad3.yaml" "bad3.yaml:3: node.name: missing"
bundle | sed 's/registry.yaml/nowhere.yaml/' >"$B/bad4.yaml"
refused "a manifest that is not there" "$B/bad4.yaml" "bad4.yaml:16: control-plane\[0\].manifest: cannot read"
printf 'node: [\n' >"$B/bad5.yaml"
refused "not YAML" "$B/bad5.yaml" "bad5.yaml:2: not YAML"

t_say "bootstrap into an empty directory"
bundle >"$B/bundle.yaml"
cat0=$(catalogue)
t_expect_exit 0 "tally bootstrap" tly bootstrap "$B/bundle.yaml"
cat "$W/last.out"
grep -q "events 1\.\." "$W/last.out" || t_fail "bootstrap said: $(cat "$W/last.out")"
[ -f "$TALLY_HOME/master.key" ] || t_fail "no master key in the home"
[ -f "$W/keys/cp.key" ] || t_fail "the node's key was not written"
t_ok "the home and the node's key (outside it)"
tly nodes | grep -q "^cp " || tly nodes | grep -q "cp" || t_fail "node cp not declared: $(tly nodes)"
tly --json log | grep '"type":"node.added"' | grep -q '127.0.0.1' ||
	t_fail "node.added does not carry the routable name"
t_ok "node cp declared with its routable name"
tly providers | grep -q postgres || t_fail "no provider: $(tly providers)"
tly --json log | grep '"type":"assignment.created"' | grep '"module":"postgres"' |
	grep -q "\"port\":\"$TALLY_TEST_PG_PORT\"" ||
	t_fail "the provider's settings were not recorded: $(tly --json log | grep assignment)"
t_ok "provider postgres on cp with its settings"
pw=$(cat "$TALLY_TEST_PG_PWFILE")
if grep -rqs -- "$pw" "$TALLY_HOME" "$W/last.out" "$W/last.err"; then
	t_fail "the admin password is in plaintext in the home or the output"
fi
t_ok "the admin password is nowhere in plaintext"
REGDB=$(t_gname registry/db registry-db)
[ "$(t_sql "SELECT count(*) FROM pg_database WHERE datname = '$REGDB'")" = 1 ] ||
	t_fail "no database $REGDB on PostgreSQL"
t_ok "the control plane's database $REGDB exists"
envf=$(t_envfile cp registry)
[ "$(t_env_psql "$envf" "SELECT current_database()")" = "$REGDB" ] ||
	t_fail "the delivered credential does not connect to $REGDB"
[ "$(t_env_psql "$envf" "SELECT count(*) FROM nodes")" = 0 ] ||
	t_fail "migration 001_nodes.sql did not run"
tly --json log | grep -q '"type":"migration.applied"' || t_fail "no migration.applied"
t_ok "tally env cp registry connects; the migration ran"
tly status registry >"$W/status" || t_fail "tally status registry: $(cat "$W/status")"
grep -q ready "$W/status" || t_fail "registry is not ready: $(cat "$W/status")"
t_ok "registry is ready"

t_say "tallyd --once continues: nothing bootstrap should have done"
h1=$(head_seq)
cat1=$(catalogue)
[ "$cat1" != "$cat0" ] || t_fail "the provider's catalogue did not change"
t_tallyd_once
h2=$(head_seq)
if [ "$h2" != "$h1" ]; then
	tly --json log | awk -v h="$h1" -F'"seq":' '{ split($2, a, ","); if (a[1] + 0 > h + 0) print }' >&2
	t_fail "tallyd --once appended events $h1..$h2 after bootstrap"
fi
t_ok "tallyd --once appended nothing (head $h1)"

t_say "a second bootstrap appends nothing and changes nothing"
t_expect_exit 0 "tally bootstrap again" tly --json bootstrap "$B/bundle.yaml"
[ "$(wc -l <"$W/last.out")" -eq 1 ] && grep -q '"appended_from":0' "$W/last.out" &&
	grep -q '"healthy":true' "$W/last.out" ||
	t_fail "second run (--json) said: $(cat "$W/last.out")"
h3=$(head_seq)
[ "$h3" = "$h1" ] || t_fail "the second bootstrap appended: head $h1 -> $h3"
[ "$(catalogue)" = "$cat1" ] || t_fail "the second bootstrap changed the provider's catalogue"
t_ok "head $h3 and the provider's roles and databases unchanged"

t_say "a running tallyd holds the home: bootstrap is refused (exit 7)"
# A bundle that would declare one more module: nothing of it is.
sed 's/^module: registry/module: audit/; /migrations:/d' "$B/registry.yaml" >"$B/audit.yaml"
{ bundle; printf '  - manifest: audit.yaml\n    module: audit\n'; } >"$B/more.yaml"
t_tallyd_start
t_expect_exit 7 "tally bootstrap beside a tallyd" tly bootstrap "$B/more.yaml"
grep -q "tallyd" "$W/last.err" || t_fail "the refusal does not name tallyd: $(cat "$W/last.err")"
t_tallyd_stop
[ "$(head_seq)" = "$h1" ] || t_fail "tallyd or the refused bootstrap appended"
tly modules | grep -q audit && t_fail "the refused bootstrap declared module audit"
t_ok "$(head -n 1 "$W/last.err")"

t_say "a secret given as stdin is read from standard input"
bundle "admin-password: stdin" | sed "s|key-out: .*|key-out: $W/keys2/cp.key|" >"$B/stdin.yaml"
t_expect_exit 4 "bootstrap with no line on stdin" \
	tly --home "$W/home2" bootstrap "$B/stdin.yaml" </dev/null
grep -q "admin-password of postgres: no line on standard input" "$W/last.err" ||
	t_fail "expected the missing stdin line named: $(cat "$W/last.err")"
tly --home "$W/home2" --json log | grep -q assignment.created &&
	t_fail "postgres was assigned without its secret"
t_ok "refused, nothing assigned: $(head -n 1 "$W/last.err")"
# The providers alone (no grant of home2's may collide with home's).
sed '/^control-plane:/,$d' "$B/stdin.yaml" >"$B/stdin2.yaml"
t_expect_exit 0 "bootstrap with the secret on stdin" \
	tly --home "$W/home2" bootstrap "$B/stdin2.yaml" <"$TALLY_TEST_PG_PWFILE"
cat "$W/last.err"
tly --home "$W/home2" --json log | grep '"type":"assignment.created"' |
	grep -q admin-password || t_fail "postgres was not assigned with its secret"
t_ok "postgres assigned in home2 with the secret read from stdin"

t_say "the log verifies and rebuilds to the same projections"
tly verify >/dev/null || t_fail "tally verify"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check"
t_ok "tally verify, tally rebuild --check"
