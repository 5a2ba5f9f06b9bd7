#!/bin/sh
# Secrets never appear in plaintext: every generated password (read
# from the sealed deliveries with the nodes' keys: plaintext is only on
# the nodes, and the control plane keeps no delivery file) and
# the provider's admin password are searched for in the LMDB files,
# everything else under the tally home, tally log (--json and text),
# the other commands' output, tallyd's stderr (with -v) and, with
# log_statement = all, PostgreSQL's own server log.  None may be found.
# Each search is paired with a positive control, so that a search that
# cannot find anything does not pass by accident.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL logging every statement, tally home, four grants"
t_pg_start
t_sql "ALTER SYSTEM SET log_statement = 'all'" >/dev/null
t_sql "SELECT pg_reload_conf()" >/dev/null
R=$PG_DIR
[ -f "$PG_DIR/realdir" ] && R=$(cat "$PG_DIR/realdir")
PGLOG=$R/log/server.log
t_init
t_node node-a 127.0.0.1
t_node node-b node-b.test
t_provider node-a network
tly apply "$(t_consumer shared-app shared)" "$(t_consumer per-app per-instance)" >/dev/null
tly assign shared-app node-a >/dev/null
tly assign per-app node-a >/dev/null
t_tallyd_start -v --workers 2
t_wait_healthy 30
tly assign shared-app node-b >/dev/null
tly assign per-app node-b >/dev/null
t_wait_healthy 30
t_tallyd_stop
t_tallyd_once -v

t_check "the secrets to look for"
: >"$W/secrets"
for h in shared-app@node-a shared-app@node-b per-app@node-a per-app@node-b; do
	t_envget "$(t_envfile "${h#*@}" "${h%@*}")" DB_PASSWORD >>"$W/secrets"
done
sort -u "$W/secrets" -o "$W/secrets"
n=$(wc -l <"$W/secrets")
[ "$n" -eq 3 ] || t_fail "expected 3 distinct generated passwords (1 shared + 2 per-instance), found $n"
while read -r pw; do
	[ ${#pw} -ge 24 ] || t_fail "a generated password is only ${#pw} characters"
done <"$W/secrets"
cat "$TALLY_TEST_PG_PWFILE" >>"$W/secrets"
echo >>"$W/secrets"
sed -i "/^\$/d" "$W/secrets"
t_ok "3 generated passwords from 4 env files, and the admin password"

# Everything to search, one file each.
O=$W/outputs
mkdir -p "$O"
tly log --json >"$O/log.json"
tly log >"$O/log.txt"
tly status --json >"$O/status.json"
tly status >"$O/status.txt"
tly graph --json >"$O/graph.json"
tly graph >"$O/graph.txt"
tly explain >"$O/explain.txt" 2>&1 || true
tly stats >"$O/stats.txt"
tly verify >"$O/verify.txt"
tly rebuild --check >"$O/rebuild.txt"
cp "$T_DLOG" "$O/tallyd.stderr"

# search WHAT FILE...: no secret in any of them (binary-safe, fixed strings).
search() {
	_what=$1
	shift
	if grep -a -F -l -f "$W/secrets" "$@" >"$W/found" 2>/dev/null; then
		t_fail "$_what: a plaintext secret is in: $(tr '\n' ' ' <"$W/found")"
	fi
}
# control WHAT STRING FILE...: the search does find what is there.
control() {
	_what=$1 _s=$2
	shift 2
	grep -a -F -q "$_s" "$@" ||
		t_fail "$_what: control string '$_s' not found: the search is blind"
}

PB=$(t_gname per-app/db@node-b per-app-db-node-b)	# reactors/names.c
t_check "the LMDB files (data.mdb, lock.mdb)"
control "data.mdb" "${PB}_v1" "$TALLY_HOME/log/data.mdb"
search "LMDB" "$TALLY_HOME/log/data.mdb" "$TALLY_HOME/log/lock.mdb"
t_ok "none in $(du -k "$TALLY_HOME/log/data.mdb" | cut -f1) KiB of data.mdb (control: the login names are there)"

t_check "every other file under the tally home (master key, lock): no deliveries"
[ ! -e "$TALLY_HOME/deliver" ] || t_fail "the control plane keeps $TALLY_HOME/deliver"
find "$TALLY_HOME" -type f >"$W/files"
# shellcheck disable=SC2046
search "tally home" $(cat "$W/files")
t_ok "none in $(wc -l <"$W/files") files"

t_check "tally log --json and the other commands' output"
control "tally log --json" '"password":"<redacted>"' "$O/log.json"
control "tally log --json" '"sealed":"<redacted>"' "$O/log.json"
search "command output" "$O"/*.json "$O"/*.txt
t_ok "none in $(ls "$O" | wc -l) outputs (control: secrets show as <redacted>)"

t_check "tallyd's stderr (-v)"
control "tallyd stderr" "per-app/db@node-b" "$O/tallyd.stderr"
search "tallyd stderr" "$O/tallyd.stderr"
t_ok "none in $(wc -l <"$O/tallyd.stderr") lines"

t_check "PostgreSQL's server log, with every statement logged"
control "server log" "CREATE DATABASE \"$PB\"" "$PGLOG"
control "server log" "CREATE ROLE \"${PB}_v1\"" "$PGLOG"
search "PostgreSQL server log" "$PGLOG"
t_ok "none in $(wc -l <"$PGLOG") lines (control: the CREATE ROLE statements are there)"

t_check "the role's stored verifier is SCRAM, not a plaintext or MD5 password"
bad=$(t_sql "SELECT rolname FROM pg_authid WHERE rolname LIKE '%\_v1'
	AND rolpassword NOT LIKE 'SCRAM-SHA-256\$%'")
[ -z "$bad" ] || t_fail "roles without a SCRAM verifier: $bad"
t_ok "SCRAM-SHA-256 verifiers only"
