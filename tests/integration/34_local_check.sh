#!/bin/sh
# A provider exposed local is reached by its consumers over loopback on
# its own node, and by nobody through its node's routable name.  The
# check that logs in as the consumer must then take the path tallyd
# administers the provider by (its setting host, which every driver
# declares, as issue 13 names it), not the routable name: a
# local PostgreSQL that listens on 127.0.0.1 only, on a node whose
# routable name is another address, is healthy, and its grant is not
# reported as a credential that fails.  (Found by 95_mesh_example, whose
# third node had to be given a loopback routable name.)
. "$(dirname "$0")/lib.sh"

t_say "a PostgreSQL on 127.0.0.1 only; node-a's routable name is 127.0.0.2"
t_pg_start
t_init
t_node node-a 127.0.0.2
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
tly assign postgres node-a --expose local --set host=127.0.0.1 \
	--set port="$TALLY_TEST_PG_PORT" --set admin-user="$TALLY_TEST_PG_USER" \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
	t_fail "tally assign postgres node-a failed"
tly apply "$(t_consumer app)" >/dev/null
tly assign app node-a >/dev/null
t_tallyd_once

t_check "delivered over loopback, and the consumer connects"
F=$(t_envfile node-a app)
[ "$(t_envget "$F" DB_HOST)" = 127.0.0.1 ] || t_fail "DB_HOST is '$(t_envget "$F" DB_HOST)', not 127.0.0.1"
t_env_psql "$F" "SELECT 1" >/dev/null || t_fail "the delivered credential does not connect"
t_ok "DB_HOST=127.0.0.1; connects"

t_check "tally check logs in where the provider is administered: healthy, exit 0"
t_expect_exit 0 "tally check app/db" tly check app/db
grep -q "credential-mismatch\|does not answer" "$W/last.out" &&
	t_fail "the check tried the routable name: $(cat "$W/last.out")"
t_ok "$(head -n 1 "$W/last.out")"
