#!/bin/sh
# make demo: the main job on the embedded default.
#
# A throwaway PostgreSQL on loopback (data under build/), a fresh tally
# home under build/, one node, the postgres provider and
# examples/my-cool-game.yaml; tallyd reconciles until the game's grant
# exists; then the status, the delivered env file (password masked) and
# a real connection as the game with the delivered credential.
# Everything it started is stopped on the way out, failure or not.
set -eu

SRC=${TALLY_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TALLY_BIN:-$SRC/build/bin}
DEMO=$SRC/build/demo
PORT=${TALLY_DEMO_PG_PORT:-55440}
export TALLY_HOME="$DEMO/home"

say() { printf '\n== %s\n' "$*"; }

cleanup() {
	status=$?
	sh "$SRC/tests/harness/pg.sh" stop "$DEMO/pg" >/dev/null 2>&1 || true
	if [ "$status" -ne 0 ]; then
		echo "demo FAILED (exit $status); tally home kept in $TALLY_HOME" >&2
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A previous run's server and home go first: the demo starts clean.
sh "$SRC/tests/harness/pg.sh" stop "$DEMO/pg" >/dev/null 2>&1 || true
rm -rf "$DEMO"
mkdir -p "$DEMO"

# A free port: a developer's own PostgreSQL may sit on the default.
while ss -ltn 2>/dev/null | awk '{print $4}' | grep -q ":$PORT\$"; do
	PORT=$((PORT + 1))
done

say "starting a throwaway PostgreSQL on 127.0.0.1:$PORT"
sh "$SRC/tests/harness/pg.sh" start "$DEMO/pg" "$PORT"
. "$DEMO/pg/env"

say "tally init ($TALLY_HOME)"
"$BIN/tally" init

say "declaring the mesh"
# The node's secret keys go to its host, never under the tally home.
"$BIN/tally" node add node-a --routable-name 127.0.0.1 --key-out "$DEMO/node-a.key"
"$BIN/tally" apply "$SRC/examples/postgres.yaml" "$SRC/examples/my-cool-game.yaml"
# The provider's admin credential comes from standard input, never argv.
"$BIN/tally" assign postgres node-a --expose local \
	--set port="$TALLY_TEST_PG_PORT" --set admin-user="$TALLY_TEST_PG_USER" \
	--secret admin-password < "$TALLY_TEST_PG_PWFILE"
"$BIN/tally" assign my-cool-game node-a
"$BIN/tally" status || true

say "tallyd --once: reconciling"
"$BIN/tallyd" --once --once-timeout 60

say "tally status my-cool-game"
"$BIN/tally" status my-cool-game

say "tally-node --log: node-a's agent opens its delivery with the node's key"
"$BIN/tally-node" --node node-a --key "$DEMO/node-a.key" \
	--dir "$DEMO/node-a" --state "$DEMO/node-a.state" --log "$TALLY_HOME" --once \
	--reload 'my-cool-game=echo my-cool-game reloaded'
say "tallyd --once: the agent's acknowledgement verified"
"$BIN/tallyd" --once --once-timeout 60
"$BIN/tally" log --type credential.acknowledged

ENVFILE="$DEMO/node-a/my-cool-game.env"
say "delivered by the agent: $ENVFILE (mode $(stat -c %a "$ENVFILE")); the tally home keeps no plaintext"
[ ! -e "$TALLY_HOME/deliver" ] || { echo "demo: $TALLY_HOME/deliver exists" >&2; exit 1; }
sed 's/^\(DB_PASSWORD=\).*/\1********/' "$ENVFILE"

say "connecting as the game with the delivered credential"
(
	set -a
	. "$ENVFILE"
	set +a
	PGPASSWORD=$DB_PASSWORD PGCONNECT_TIMEOUT=5 psql -X -q -v ON_ERROR_STOP=1 \
		-h "$DB_HOST" -p "$DB_PORT" -U "$DB_USER" -d "$DB_NAME" -c "
		INSERT INTO scores (player, points) VALUES ('demo', 42);
		SELECT current_user AS connected_as, current_database() AS db,
		       count(*) AS scores FROM scores;"
)

say "tally log --type migration.applied"
"$BIN/tally" log --type 'migration.applied'

say "tally verify"
"$BIN/tally" verify

say "demo OK"
