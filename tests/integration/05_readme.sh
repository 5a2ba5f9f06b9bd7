#!/bin/sh
# 05_readme: README.md's "Using it" section works as written.
#
# The section has two marked blocks: the settings a user changes
# (readme-settings) and the commands (readme-commands).  This script
# takes both from README.md itself, so the text cannot drift from what
# works: it checks that the settings block sets exactly the variables it
# knows, replaces their values with its own (a throwaway PostgreSQL on
# loopback, a home under $W), writes admin.pw as the README says, and
# runs the commands block verbatim.  The module must end ready and
# `tally env` must print a credential that connects.
. "$(dirname "$0")/lib.sh"

README=$TALLY_SRC/README.md

# block NAME: the lines of README's NAME block, without the fences.
block() {
	sed -n "/<!-- readme-$1:begin -->/,/<!-- readme-$1:end -->/p" "$README" |
		sed -e '/<!-- readme-/d' -e '/^```/d'
}

t_say "README.md's blocks"
t_check "README.md marks a settings block and a commands block"
block settings >"$W/settings.txt"
block commands >"$W/commands.sh"
[ -s "$W/settings.txt" ] || t_fail "README.md has no readme-settings block"
[ -s "$W/commands.sh" ] || t_fail "README.md has no readme-commands block"
t_ok "$(wc -l <"$W/settings.txt") settings lines, $(wc -l <"$W/commands.sh") command lines"

t_check "the settings block sets exactly PATH TALLY_HOME NODE_A_HOST PG_ADMIN_HOST PG_PORT PG_ADMIN_USER"
vars=$(sed -n 's/^\(export \)\{0,1\}\([A-Z_][A-Z_0-9]*\)=.*/\2/p' "$W/settings.txt" | sort | tr '\n' ' ')
[ "$vars" = "NODE_A_HOST PATH PG_ADMIN_HOST PG_ADMIN_USER PG_PORT TALLY_HOME " ] ||
	t_fail "the README's settings are '$vars': teach this test the new ones"
grep -q 'admin\.pw' "$README" || t_fail "README.md does not explain admin.pw"
t_ok "$vars"

t_say "the commands, against a throwaway PostgreSQL"
t_pg_start
mkdir -p "$W/run"
ln -s "$TALLY_SRC/examples" "$W/run/examples"
cp "$TALLY_TEST_PG_PWFILE" "$W/run/admin.pw"
chmod 0600 "$W/run/admin.pw"
# The values this script gives the README's settings: the node's
# routable name and the admin host are loopback, where the server is.
{
	echo "export PATH='$TALLY_BIN':\$PATH"
	echo "export TALLY_HOME='$W/readme-home'"
	echo "NODE_A_HOST=127.0.0.1"
	echo "PG_ADMIN_HOST=127.0.0.1"
	echo "PG_PORT=$TALLY_TEST_PG_PORT"
	echo "PG_ADMIN_USER=$TALLY_TEST_PG_USER"
	echo "set -x"
	cat "$W/commands.sh"
} >"$W/run/readme.sh"
t_check "every command of the block succeeds, in $W/run"
(cd "$W/run" && sh -eu ./readme.sh >"$W/readme.out" 2>"$W/readme.err") || {
	cat "$W/readme.err" >&2
	t_fail "the README's commands failed (trace above)"
}
t_ok "all ran; tally status my-cool-game exited 0"

export TALLY_HOME="$W/readme-home"
t_check "my-cool-game is ready"
tly status my-cool-game --json >"$W/st.json" || t_fail "status is not healthy"
grep -q '"module":"my-cool-game","state":"ready"' "$W/st.json" ||
	t_fail "not ready: $(cat "$W/st.json")"
t_ok "ready"

t_check "tally env printed a credential that connects"
grep '^DB_' "$W/readme.out" >"$W/env" || t_fail "tally env printed no DB_ variables"
for k in DB_HOST DB_PORT DB_NAME DB_USER DB_PASSWORD; do
	[ -n "$(t_envget "$W/env" $k)" ] || t_fail "tally env printed no $k"
done
[ "$(t_envget "$W/env" DB_HOST)" = 127.0.0.1 ] ||
	t_fail "DB_HOST is '$(t_envget "$W/env" DB_HOST)', not node-a's routable name"
[ "$(t_env_psql "$W/env" "SELECT count(*) FROM information_schema.tables WHERE table_name = 'scores'")" = 1 ] ||
	t_fail "the credential does not reach a migrated my-cool-game database"
t_ok "connected as $(t_envget "$W/env" DB_USER) to $(t_envget "$W/env" DB_NAME); the migrations ran"

