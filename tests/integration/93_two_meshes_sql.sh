#!/bin/sh
# Two meshes on one PostgreSQL and one MariaDB (issue 22, items 1-3, the
# SQL drivers' part): two homes declaring the same modules (app on
# PostgreSQL, mapp on MariaDB) each get their own objects (scheme-4
# names keyed by the mesh id, marks naming the whole id); the second's
# check, repair, rotation, removal and purge change nothing of the
# first's (a catalogue listing of the first's roles, databases, users,
# privileges and marks is the same before and after), and the first's
# consumers, real psql and mariadb clients, keep working throughout.
# Then a fresh tally bootstrap beside a server another mesh fenced (at
# epoch 5) works: fences are per mesh.  Last, home a "lost", a rebuilt
# home d takes its objects over on purpose (tally adopt --from-mesh),
# which says what it took; they are re-marked with d's mesh, keep their
# data, and a, back, is refused there (check, revocation).
. "$(dirname "$0")/lib.sh"

t_say "one PostgreSQL, one MariaDB"
t_pg_start
t_mariadb_start
MPORT=$TALLY_TEST_MARIADB_PORT
MPW=$(cat "$TALLY_TEST_MARIADB_PWFILE")
msql() {
	mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -u"$TALLY_TEST_MARIADB_USER" \
		-p"$MPW" -N -B -e "$1"
}

mkdir -p "$W/keys" "$W/manifests"
cat >"$W/manifests/mariadb.yaml" <<EOF
module: mariadb
provides:
  mariadb-database:
    driver: mariadb
    revoke: retain
EOF
for m in app mapp; do
	if [ $m = app ]; then ty=postgres-database fr=postgres; else ty=mariadb-database fr=mariadb; fi
	cat >"$W/manifests/$m.yaml" <<EOF
module: $m
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: ""}
requires:
  db:
    type: $ty
    from: $fr
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}
EOF
done

jget() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
on() { _h=$1; shift; TALLY_HOME=$W/$_h "$TALLY_BIN/tally" "$@"; }
once() { TALLY_HOME=$W/$1 "$TALLY_BIN/tallyd" --once --once-timeout 90 2>>"$T_DLOG" ||
	{ tail -n 20 "$T_DLOG" >&2; t_fail "tallyd --once on $1 failed"; }; }
home() {
	on "$1" init >/dev/null || t_fail "tally init $1"
	on "$1" node add node-a --routable-name 127.0.0.1 \
		--key-out "$W/keys/$1.key" >/dev/null || t_fail "node add on $1"
	on "$1" apply "$TALLY_SRC/examples/postgres.yaml" "$W/manifests/mariadb.yaml" \
		"$W/manifests/app.yaml" "$W/manifests/mapp.yaml" >/dev/null || t_fail "apply on $1"
	on "$1" assign postgres node-a --expose local --set port="$TALLY_TEST_PG_PORT" \
		--set admin-user="$TALLY_TEST_PG_USER" \
		--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
		t_fail "assign postgres on $1"
	printf '%s' "$MPW" | on "$1" assign mariadb node-a --expose local --set port="$MPORT" \
		--set admin-user="$TALLY_TEST_MARIADB_USER" --secret admin-password >/dev/null ||
		t_fail "assign mariadb on $1"
	on "$1" assign app node-a >/dev/null || t_fail "assign app on $1"
	on "$1" assign mapp node-a >/dev/null || t_fail "assign mapp on $1"
}
# val HOME MODULE KEY: a delivered value (tally env with the node's key).
val() { on "$1" env node-a "$2" --node-key "$W/keys/$1.key" | sed -n "s/^$3=//p" | tr -d "'\""; }
# pg_as HOME SQL, my_as HOME SQL: the consumer, with what was delivered.
pg_as() {
	PGPASSWORD=$(val "$1" app DB_PASSWORD) psql -X -At -q -v ON_ERROR_STOP=1 \
		-h 127.0.0.1 -p "$(val "$1" app DB_PORT)" -U "$(val "$1" app DB_USER)" \
		-d "$(val "$1" app DB_NAME)" -c "$2"
}
my_as() {
	mariadb --no-defaults -h127.0.0.1 -P"$(val "$1" mapp DB_PORT)" \
		-u"$(val "$1" mapp DB_USER)" -p"$(val "$1" mapp DB_PASSWORD)" -N -B \
		"$(val "$1" mapp DB_NAME)" -e "$2"
}
# cat_of PG-NAME MARIADB-DB MARIADB-USER MESH FILE: everything of one
# mesh's grants on both servers (roles with their password verifiers and
# marks, databases with owner and ACL; users with their whole account,
# privileges, databases, marks), each part required to be there.
cat_of() {
	: >"$5"
	for q in "pg:SELECT rolname, rolcanlogin, md5(coalesce(rolpassword, '')),
			shobj_description(oid, 'pg_authid') FROM pg_authid
			WHERE rolname LIKE '$1%' ORDER BY 1" \
		"pg:SELECT datname, pg_get_userbyid(datdba), datallowconn, datacl
			FROM pg_database WHERE datname = '$1'" \
		"my:SELECT User, Host, Priv FROM mysql.global_priv WHERE User = '$3'" \
		"my:SELECT * FROM mysql.db WHERE User = '$3' ORDER BY 1, 2, 3" \
		"my:SHOW DATABASES LIKE '$2'" \
		"my:SELECT kind, name, grant_id, mesh FROM tally.marks WHERE mesh = '$4' ORDER BY 1, 2"; do
		case $q in
		pg:*) t_sql "${q#pg:}" >"$5.part" ;;
		*) msql "${q#my:}" >"$5.part" ;;
		esac
		[ -s "$5.part" ] || t_fail "nothing listed by: ${q#??:}"
		cat "$5.part" >>"$5"
	done
}

t_say "two homes, one PostgreSQL and one MariaDB, the same modules"
home a
once a
home b
once b
MA=$(on a mesh --json | jget mesh)
MB=$(on b mesh --json | jget mesh)
[ -n "$MA" ] && [ -n "$MB" ] && [ "$MA" != "$MB" ] || t_fail "mesh ids '$MA' '$MB'"
PA=$(val a app DB_NAME) PB=$(val b app DB_NAME)
QA=$(val a mapp DB_NAME) QB=$(val b mapp DB_NAME)
[ -n "$PA" ] && [ -n "$QA" ] && [ -n "$PB" ] && [ -n "$QB" ] || t_fail "not delivered: '$PA' '$QA' '$PB' '$QB'"
[ "$PA" != "$PB" ] || t_fail "both homes got PostgreSQL database $PA"
[ "$QA" != "$QB" ] || t_fail "both homes got MariaDB database $QA"
t_check "each home's consumers connect to their own databases"
[ "$(pg_as a "SELECT current_database()")" = "$PA" ] || t_fail "a's app cannot use $PA"
[ "$(pg_as b "SELECT current_database()")" = "$PB" ] || t_fail "b's app cannot use $PB"
[ "$(my_as a "SELECT DATABASE()")" = "$QA" ] || t_fail "a's mapp cannot use $QA"
[ "$(my_as b "SELECT DATABASE()")" = "$QB" ] || t_fail "b's mapp cannot use $QB"
t_check "marks name the whole mesh id"
[ "$(t_sql "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = '$PA'")" = \
	"made by tally for grant app/db of mesh $MA; do not edit" ] ||
	t_fail "PostgreSQL mark of $PA: $(t_sql "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = '$PA'")"
[ "$(msql "SELECT mesh FROM tally.marks WHERE kind = 'd' AND name = '$QA'")" = "$MA" ] ||
	t_fail "MariaDB mark of $QA: $(msql "SELECT * FROM tally.marks")"
t_check "the fences: one row per mesh on each server"
[ "$(t_sql "SELECT count(*) FROM tally_fences WHERE mesh IN ('$MA', '$MB')")" = 2 ] ||
	t_fail "tally_fences: $(t_sql "SELECT * FROM tally_fences")"
[ "$(msql "SELECT COUNT(*) FROM tally.fences WHERE mesh IN ('$MA', '$MB')")" = 2 ] ||
	t_fail "tally.fences: $(msql "SELECT * FROM tally.fences")"
t_check "tally providers says both are fenced atomically"
on a providers >"$W/prov.out"
[ "$(grep -c "fenced: atomic with each change" "$W/prov.out")" -eq 2 ] ||
	t_fail "tally providers: $(cat "$W/prov.out")"
t_ok "a: $PA / $QA (mesh $MA); b: $PB / $QB (mesh $MB)"

pg_as a "CREATE TABLE t (v text); INSERT INTO t VALUES ('the first''s')" ||
	t_fail "a's consumer cannot write"
my_as a "CREATE TABLE t (v VARCHAR(20)); INSERT INTO t VALUES ('the first''s')" ||
	t_fail "a's mariadb consumer cannot write"
UA=$(val a mapp DB_USER)
cat_of "$PA" "$QA" "$UA" "$MA" "$W/before"
# consumers_a: a's real clients still read their rows.
consumers_a() {
	[ "$(pg_as a "SELECT v FROM t")" = "the first's" ] || t_fail "a's app lost its row or login ($1)"
	[ "$(my_as a "SELECT v FROM t")" = "the first's" ] || t_fail "a's mapp lost its row or login ($1)"
}

t_say "b's check, repair, rotation, removal and purge change nothing of a's"
on b check >/dev/null || t_fail "tally check on b: $(on b check 2>&1)"
consumers_a "b's check"
t_sql "ALTER ROLE \"$(val b app DB_USER)\" PASSWORD 'drifted'"
msql "ALTER USER '$(val b mapp DB_USER)'@'%' IDENTIFIED BY 'drifted'"
t_expect_exit 8 "tally check on b (its own drift repaired)" on b check
[ "$(pg_as b "SELECT 1")" = 1 ] || t_fail "b's app password was not repaired"
[ "$(my_as b "SELECT 1")" = 1 ] || t_fail "b's mapp password was not repaired"
consumers_a "b's repair"
on b rotate app/db >"$W/rot.out" 2>&1 || t_note "rotate app on b: $(head -n 1 "$W/rot.out")"
on b rotate mapp/db >"$W/rot.out" 2>&1 || t_note "rotate mapp on b: $(head -n 1 "$W/rot.out")"
once b
consumers_a "b's rotation"
on b remove app --yes >/dev/null || t_fail "tally remove app on b"
on b remove mapp --yes >/dev/null || t_fail "tally remove mapp on b"
once b
on b purge app/db --yes >/dev/null || t_fail "tally purge app/db on b"
on b purge mapp/db --yes >/dev/null || t_fail "tally purge mapp/db on b"
once b
[ "$(t_sql "SELECT count(*) FROM pg_database WHERE datname = '$PB'")" = 0 ] || t_fail "b's $PB survived its purge"
[ -z "$(msql "SHOW DATABASES LIKE '$QB'")" ] || t_fail "b's $QB survived its purge"
consumers_a "b's purge"
cat_of "$PA" "$QA" "$UA" "$MA" "$W/after"
diff "$W/before" "$W/after" >"$W/diff" || { cat "$W/diff" >&2; t_fail "a's objects changed"; }
on a check >/dev/null || t_fail "a is not healthy after b's work: $(on a check 2>&1)"
t_ok "$(wc -l <"$W/before") catalogue lines of a's unchanged; a's consumers and check fine"

t_say "a fresh tally bootstrap beside a server another mesh fenced at epoch 5"
t_sql "UPDATE tally_fences SET epoch = 5 WHERE mesh = '$MA'"
BD=$W/bundle
mkdir -p "$BD"
cp "$TALLY_SRC/examples/postgres.yaml" "$BD/postgres.yaml"
cat >"$BD/registry.yaml" <<EOF
module: registry
env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: ""}
requires:
  db:
    type: postgres-database
    from: postgres
    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD}
EOF
cat >"$BD/bundle.yaml" <<EOF
node:
  name: node-a
  routable-name: 127.0.0.1
  key-out: $W/keys/c.key
providers:
  - manifest: postgres.yaml
    module: postgres
    expose: local
    settings:
      port: "$TALLY_TEST_PG_PORT"
      admin-user: $TALLY_TEST_PG_USER
    secrets:
      admin-password: {file: $TALLY_TEST_PG_PWFILE}
control-plane:
  - manifest: registry.yaml
    module: registry
EOF
TALLY_HOME=$W/c t_expect_exit 0 "tally bootstrap beside mesh a's fence" tly bootstrap "$BD/bundle.yaml"
MC=$(on c mesh --json | jget mesh)
RC=$(val c registry DB_NAME)
[ -n "$RC" ] || t_fail "bootstrap delivered nothing: $(cat "$W/last.out" "$W/last.err")"
[ "$(PGPASSWORD=$(val c registry DB_PASSWORD) psql -X -At -h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" \
	-U "$(val c registry DB_USER)" -d "$RC" -c "SELECT current_database()")" = "$RC" ] ||
	t_fail "the bootstrapped credential does not connect"
[ "$(t_sql "SELECT epoch FROM tally_fences WHERE mesh = '$MA'")" = 5 ] || t_fail "a's fence changed"
consumers_a "c's bootstrap"
t_ok "mesh $MC bootstrapped $RC; mesh a's fence (epoch 5) untouched"
# Epoch 5 was this test's doing, not a promotion of a's: put it back, or
# a (at epoch 1) is deposed by its own fence, tally check included.
t_sql "UPDATE tally_fences SET epoch = 1 WHERE mesh = '$MA'" >/dev/null

t_say "home a is lost; home d, rebuilt, adopts its objects on purpose"
home d
MD=$(on d mesh --json | jget mesh)
on d adopt --from-mesh "$MA" --all >"$W/adopt.out" || t_fail "tally adopt on d: $(cat "$W/adopt.out")"
cat "$W/adopt.out"
grep -q "adopted from mesh $MA: 2 grant(s)" "$W/adopt.out" || t_fail "adopt does not say what it took"
grep -q "app/db (postgres-database): takes over $PA" "$W/adopt.out" || t_fail "adopt does not name $PA"
grep -q "mapp/db (mariadb-database): takes over $QA" "$W/adopt.out" || t_fail "adopt does not name $QA"
once d
[ "$(val d app DB_NAME)" = "$PA" ] || t_fail "d got $(val d app DB_NAME), not a's $PA"
[ "$(val d mapp DB_NAME)" = "$QA" ] || t_fail "d got $(val d mapp DB_NAME), not a's $QA"
[ "$(pg_as d "SELECT v FROM t")" = "the first's" ] || t_fail "d's app does not read a's row"
[ "$(my_as d "SELECT v FROM t")" = "the first's" ] || t_fail "d's mapp does not read a's row"
[ "$(t_sql "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = '$PA'")" = \
	"made by tally for grant app/db of mesh $MD; do not edit" ] || t_fail "$PA is not re-marked with d's mesh"
[ "$(msql "SELECT mesh FROM tally.marks WHERE kind = 'd' AND name = '$QA'")" = "$MD" ] ||
	t_fail "$QA is not re-marked with d's mesh"
on d check >/dev/null || t_fail "d is not healthy: $(on d check 2>&1)"
t_ok "d serves $PA and $QA with a's data, marked $MD"

t_check "the lost home, back, is refused there (owned by mesh d)"
cat_of "$PA" "$QA" "$UA" "$MD" "$W/before2"
t_expect_exit 6 "tally check on a" on a check
grep -q "owned by mesh $(printf %s "$MD" | cut -c1-12)\.\.\., not this one" "$W/last.out" "$W/last.err" ||
	t_fail "a's check does not name the owner: $(cat "$W/last.out" "$W/last.err")"
on a remove app --yes >/dev/null || t_fail "tally remove app on a"
on a remove mapp --yes >/dev/null || t_fail "tally remove mapp on a"
TALLY_HOME=$W/a "$TALLY_BIN/tallyd" --once --once-timeout 30 2>>"$T_DLOG" || true
cat_of "$PA" "$QA" "$UA" "$MD" "$W/after2"
diff "$W/before2" "$W/after2" >"$W/diff2" || { cat "$W/diff2" >&2; t_fail "a changed d's objects"; }
[ "$(pg_as d "SELECT v FROM t")" = "the first's" ] || t_fail "d's app lost its login after a's attempts"
[ "$(my_as d "SELECT v FROM t")" = "the first's" ] || t_fail "d's mapp lost its login after a's attempts"
t_ok "a's check and revocation refused; d's objects and consumers unchanged"
