#!/bin/sh
# A consolidation under SIGKILL (issue 21, item 30): each step of a move
# runs once whatever is killed when.  Five storms, one module each
# (vec1..vec5, each with its own database on emb, the embedded instance
# they run): the consolidation onto node-a's provider (pg) is started,
# tallyd runs as a daemon and is killed with SIGKILL again and again,
# the first kill of each storm while pg_restore is writing into the
# target (seen in pg_stat_activity: a killed tallyd's copy must not go
# on beside the restarted one's, two restores into one target), the
# others at random moments; then tallyd runs at once until the move is
# done.
# Each storm ends with the move done once (one binding.moved, one
# rebind.completed, no rebind.failed) and the rows intact on pg.
. "$(dirname "$0")/lib.sh"

STORMS=${STORMS:-5}
KILLS=${KILLS:-6}
ROWS=${ROWS:-100000}

t_say "two throwaway PostgreSQL servers: emb (the modules' own) and pg (node-a's provider)"
t_pg_start emb
EP=$TALLY_TEST_PG_PORT ES=$TALLY_TEST_PG_SOCK EU=$TALLY_TEST_PG_USER
t_pg_start pg
esql() { psql -X -At -q -v ON_ERROR_STOP=1 -h "$ES" -p "$EP" -U "$EU" -d "${2:-postgres}" -c "$1"; }

t_init
t_node node-a 127.0.0.1
t_provider node-a local
mkdir -p "$W/manifests"
for s in $(seq 1 "$STORMS"); do
	cat >"$W/manifests/vec$s.yaml" <<YAML
module: vec$s
env: { VEC_HOST: "", VEC_PORT: "", VEC_DB: "", VEC_USER: "", VEC_PASSWORD: "" }
embedded:
  vectors:
    type: postgres-database
    runs: "pgvector/pgvector:pg16"
    env: { host: VEC_HOST, port: VEC_PORT, database: VEC_DB, user: VEC_USER, password: VEC_PASSWORD }
YAML
	tly apply "$W/manifests/vec$s.yaml" >/dev/null
	tly assign "vec$s" node-a >/dev/null
done
t_tallyd_once
# The instances are one server here: its admin, not each delivered login.
for s in $(seq 1 "$STORMS"); do
	esql "CREATE DATABASE vecdb$s" >/dev/null
	esql "CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);
	      INSERT INTO items SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, $ROWS) g;
	      CREATE TYPE mood AS ENUM ('ok', 'not');
	      CREATE TABLE notes (item int REFERENCES items (id), m mood, body text);
	      INSERT INTO notes VALUES (1, 'ok', 'first'), (2, 'not', 'second');
	      CREATE INDEX items_v ON items (v);
	      CREATE INDEX items_v2 ON items (md5(v), v);
	      CREATE INDEX items_v3 ON items (reverse(v));" "vecdb$s" >/dev/null
done
SUM=$(esql "SELECT md5(string_agg(v, ',' ORDER BY id)) FROM items" vecdb1)
t_ok "$STORMS instances of $ROWS rows each on emb"

# restoring DB: is a tally copy's session on pg past the data, building
# the indexes into DB now?  (pg_dump has ended by then: nothing on the
# source side stops the restore when its tallyd is killed.)
restoring() {
	[ "$(t_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tally-copy'
		AND datname LIKE '$1%' AND state = 'active' AND query ~ 'CREATE INDEX|ADD CONSTRAINT'")" != 0 ]
}

for s in $(seq 1 "$STORMS"); do
	t_check "storm $s: vec$s consolidated while tallyd is killed $KILLS times"
	tly assign "vec$s" node-a --consolidate vectors --from "127.0.0.1:$EP" \
		--from-resource "vecdb$s" --from-user "$EU" >/dev/null ||
		t_fail "tally assign vec$s --consolidate"
	# The instance's login is the server's admin: its password is the delivered one.
	esql "ALTER ROLE $EU PASSWORD '$(t_envget "$(t_envfile node-a "vec$s")" VEC_PASSWORD)'" >/dev/null
	k=0 mid=0
	while [ $k -lt "$KILLS" ]; do
		t_tallyd_start --interval 1
		# The last kill while pg_restore writes; tallyd --once follows at once.
		if [ $k = $((KILLS - 1)) ]; then
			# Wait for the restore to be under way, then kill.
			i=0
			while ! restoring "vectors-node-a" && [ $i -lt 1000 ]; do
				sleep 0.01; i=$((i + 1))
			done
			restoring "vectors-node-a" && mid=1
		else
			sleep "0.$(t_rand 8)$(t_rand 10)"
		fi
		kill -KILL "$T_DPID" 2>/dev/null || true
		t_wait_exit "$T_DPID" 10
		k=$((k + 1))
	done
	[ $mid = 1 ] || t_note "storm $s: the restore was not seen running at the last kill"
	# Then tallyd until the move is done (the ack by the node's agent).
	i=0
	while [ "$(tly log --json --stream "grant/vec$s/vectors@node-a" --type rebind.completed | wc -l)" = 0 ]; do
		t_tallyd_once
		t_agent node-a
		i=$((i + 1))
		[ $i -lt 10 ] || { tly status "vec$s" >&2 || true; tail -n 20 "$T_DLOG" >&2; t_fail "storm $s: the move did not complete"; }
	done
	tly log --json --stream "grant/vec$s/vectors@node-a" >"$W/ev$s"
	nf=$(grep -c '"type":"rebind.failed"' "$W/ev$s" || true)
	[ "$nf" = 0 ] || { grep '"type":"rebind.failed"' "$W/ev$s" | cut -c1-600 >&2; t_fail "storm $s: the move failed $nf time(s)"; }
	[ "$(tly log --json --type binding.moved | grep -c "\"grant\":\"vec$s/vectors@node-a\"")" = 1 ] ||
		t_fail "storm $s: not one binding.moved"
	[ "$(grep -c '"type":"rebind.copied"' "$W/ev$s")" = 1 ] || t_fail "storm $s: not one rebind.copied"
	[ "$(grep -c '"type":"rebind.completed"' "$W/ev$s")" = 1 ] || t_fail "storm $s: not one rebind.completed"
	E=$(t_envfile node-a "vec$s")
	vq() { PGPASSWORD=$(t_envget "$E" VEC_PASSWORD) psql -X -At -q -v ON_ERROR_STOP=1 \
		-h "$(t_envget "$E" VEC_HOST)" -p "$(t_envget "$E" VEC_PORT)" \
		-U "$(t_envget "$E" VEC_USER)" -d "$(t_envget "$E" VEC_DB)" -c "$1"; }
	[ "$(vq "SELECT count(*) FROM items")" = "$ROWS" ] || t_fail "storm $s: items on pg is not $ROWS rows"
	[ "$(vq "SELECT md5(string_agg(v, ',' ORDER BY id)) FROM items")" = "$SUM" ] ||
		t_fail "storm $s: items on pg differ from the instance's"
	[ "$(vq "SELECT m FROM notes WHERE item = 2")" = not ] || t_fail "storm $s: notes did not move"
	t_ok "storm $s: $KILLS kills (the last mid-restore: $mid); moved once, $ROWS rows intact"
done

t_check "tally verify; tally rebuild --check"
tly verify >/dev/null || t_fail "tally verify failed"
tly rebuild --check >/dev/null || t_fail "tally rebuild --check differs"
t_ok "verified; rebuild identical"
