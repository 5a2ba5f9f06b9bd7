#!/bin/sh
# A consumer gets its provider's CA as a file on its node (issue 24 item
# 2): a postgres provider assigned with --set ca=CA (the harness's), a
# module mapping the field sslrootcert (compose: ep->ca_path, a token
# reactors/deliver.c turns into a reference to the CA's file):
#   - tally-node writes DIR/app/ca-HEX.pem (HEX: BLAKE2b-128 of the
#     CA's bytes) with exactly the CA's bytes, nobody:nogroup 0400 with
#     --user app=nobody; DIR/app.env holds PGSSLROOTCERT=ABSDIR/app/ca-
#     HEX.pem; the delivery is format 4 ("\0TD4"), acknowledged; psql
#     as nobody with that env and sslmode=verify-full logs in over TLS
#     (and fails with another CA: the file is what verifies);
#   - a module that maps no such field still gets format 3;
#   - tally env refuses the variable without --files DIR, naming it and
#     --files; with it, writes DIR/ca-HEX.pem 0600 and the path;
#   - an agent whose DIR has a space or a quote refuses the reference
#     (reported, not written, not acknowledged: exit 6);
#   - a grant withdrawn leaves the CA file that another grant of the
#     module still names; the module removed, the file goes.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || t_fail "this test runs as root (the agent's user)"

t_say "PostgreSQL with TLS (harness CA); postgres --set ca=CA; app maps sslrootcert twice"
t_pg_start
t_init
t_node node-a localhost
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null
tly assign postgres node-a --set host=localhost --set port="$TALLY_TEST_PG_PORT" \
	--set admin-user="$TALLY_TEST_PG_USER" --set tls=verify --set ca="$TALLY_TEST_CA" \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null || t_fail "assign postgres"
mkdir -p "$W/manifests"
app_manifest() {	# [logs]: with the second requirement
	echo "module: app"
	printf 'env: {DB_HOST: "", DB_PORT: "", DB_NAME: "", DB_USER: "", DB_PASSWORD: "", PGSSLROOTCERT: ""'
	[ "${1:-}" = logs ] && printf ', LOG_USER: "", LOG_SSLROOTCERT: ""'
	echo "}"
	echo "requires:"
	echo "  db:"
	echo "    type: postgres-database"
	echo "    from: postgres"
	echo "    scope: shared"
	echo "    env: {host: DB_HOST, port: DB_PORT, database: DB_NAME, user: DB_USER, password: DB_PASSWORD, sslrootcert: PGSSLROOTCERT}"
	if [ "${1:-}" = logs ]; then
		echo "  logs:"
		echo "    type: postgres-database"
		echo "    from: postgres"
		echo "    scope: shared"
		echo "    env: {user: LOG_USER, sslrootcert: LOG_SSLROOTCERT}"
	fi
}
app_manifest logs >"$W/manifests/app.yaml"
tly apply "$W/manifests/app.yaml" >/dev/null || t_fail "apply app"
tly apply "$(t_consumer plain)" >/dev/null || t_fail "apply plain"
tly assign app node-a >/dev/null || t_fail "assign app"
tly assign plain node-a >/dev/null || t_fail "assign plain"
t_tallyd_once

K=$(t_nodekey node-a)
D=$W/dir
HEX=$(b2sum -l 128 "$TALLY_TEST_CA" | cut -c1-32)
CAF=ca-$HEX.pem
agent() {	# DIR STATE [ARGS]: one pass
	_d=$1 _s=$2
	shift 2
	"$TALLY_BIN/tally-node" --node node-a --key "$K" --dir "$_d" --state "$_s" \
		--log "$TALLY_HOME" --once --user app=nobody --reload app=true \
		--reload plain=true "$@" 2>>"$W/agent.log"
}
# fmt GRANT: the magic of the delivery the agent keeps for GRANT, unsealed.
fmt() {
	python3 - "$W/state/$(printf '%s' "$1" | sed 's,/,%2F,g').sealed" "$K" <<'P'
import sys
from ctypes import CDLL, create_string_buffer
s = CDLL('libsodium.so.23')
c = open(sys.argv[1], 'rb').read(); sk = open(sys.argv[2], 'rb').read()[:32]
pk = create_string_buffer(32); s.crypto_scalarmult_curve25519_base(pk, sk)
m = create_string_buffer(len(c) - 48)
assert s.crypto_box_seal_open(m, c, len(c), pk, sk) == 0, "does not open"
print(repr(m.raw[:4])[2:-1])
P
}

t_check "the agent writes DIR/app/$CAF: the CA's bytes, nobody's, 0400; the env names it"
set +e; agent "$D" "$W/state"; rc=$?; set -e
[ "$rc" = 0 ] || { cat "$W/agent.log" >&2; t_fail "the agent exited $rc"; }
ABS=$(realpath "$D")
[ -f "$D/app/$CAF" ] && [ ! -L "$D/app/$CAF" ] || { ls -la "$D/app" >&2; t_fail "no $D/app/$CAF"; }
cmp -s "$D/app/$CAF" "$TALLY_TEST_CA" || t_fail "$D/app/$CAF is not the CA's bytes"
[ "$(stat -c '%U:%G %a %h' "$D/app/$CAF")" = "nobody:nogroup 400 1" ] ||
	t_fail "$D/app/$CAF is $(stat -c '%U:%G %a %h' "$D/app/$CAF")"
[ "$(ls "$D/app" | grep -c '\.pem$')" = 1 ] || t_fail "not one CA file: $(ls "$D/app")"
grep -qx "PGSSLROOTCERT=$ABS/app/$CAF" "$D/app.env" ||
	{ grep SSLROOT "$D/app.env" >&2; t_fail "app.env lacks PGSSLROOTCERT=$ABS/app/$CAF"; }
grep -qx "LOG_SSLROOTCERT=$ABS/app/$CAF" "$D/app.env" || t_fail "app.env lacks LOG_SSLROOTCERT"
[ "$(cat "$D/app/PGSSLROOTCERT")" = "$ABS/app/$CAF" ] || t_fail "DIR/app/PGSSLROOTCERT is not the path"
! ls "$D/plain" | grep -q '\.pem$' || t_fail "plain, which maps no sslrootcert, got a CA file"
[ "$(fmt app/db)" = '\x00TD4' ] || t_fail "app/db's delivery is $(fmt app/db), not format 4"
[ "$(fmt plain/db)" = '\x00TD3' ] || t_fail "plain/db's delivery is $(fmt plain/db), not format 3"
tly log --json --type credential.ack-offered >"$W/acks"
grep -q '"holder":"app@node-a"' "$W/acks" || t_fail "app's format 4 delivery was not acknowledged"
grep -q '"holder":"plain@node-a"' "$W/acks" || t_fail "plain's format 3 delivery was not acknowledged"
t_ok "$CAF ($(stat -c %s "$D/app/$CAF") bytes) nobody:nogroup 0400; app format 4, plain format 3, both acknowledged"

t_check "psql as nobody, with the env's PGSSLROOTCERT and sslmode=verify-full, over TLS"
pq() {	# CAFILE: psql as nobody with app's credential (as the login role,
	# which alone sees its own session in pg_stat_ssl; its default role is
	# the owner, and RESET ROLE goes back to that)
	_ca=$1
	setpriv --reuid=nobody --regid=nogroup --clear-groups env -i PATH="$PATH" \
		PGSSLROOTCERT="$_ca" PGSSLMODE=verify-full PGCONNECT_TIMEOUT=10 \
		PGPASSWORD="$(t_envget "$D/app.env" DB_PASSWORD)" \
		psql -X -At -q -h "$(t_envget "$D/app.env" DB_HOST)" \
		-p "$(t_envget "$D/app.env" DB_PORT)" -U "$(t_envget "$D/app.env" DB_USER)" \
		-d "$(t_envget "$D/app.env" DB_NAME)" \
		-c "select set_config('role', session_user, false)" -c "select ssl from pg_stat_ssl where pid = pg_backend_pid()"
}
out=$(pq "$(t_envget "$D/app.env" PGSSLROOTCERT)" 2>"$W/pq.err") ||
	{ cat "$W/pq.err" >&2; t_fail "psql with the delivered CA file failed"; }
[ "$(echo "$out" | tail -n 1)" = t ] || t_fail "the session is not TLS: $out"
! pq "$TALLY_TEST_CA_OTHER" >/dev/null 2>"$W/pq2.err" || t_fail "psql verified the server with another CA"
grep -q "certificate verify failed" "$W/pq2.err" || { cat "$W/pq2.err" >&2; t_fail "the control failed for another reason"; }
t_ok "ssl = $(echo "$out" | tail -n 1) at $(t_envget "$D/app.env" DB_HOST); with another CA: certificate verify failed"

t_check "tally env: refused without --files (naming the variable); with it, the file and the path"
t_expect_exit 1 "tally env without --files" tly env node-a app --node-key "$K"
grep -q "PGSSLROOTCERT" "$W/last.err" && grep -q -- "--files DIR" "$W/last.err" ||
	{ cat "$W/last.err" >&2; t_fail "the refusal names neither the variable nor --files"; }
! grep -q "SSLROOTCERT" "$W/last.out" || t_fail "an unresolved value was printed"
t_expect_exit 0 "tally env --files" tly env node-a app --node-key "$K" --files "$W/files"
FA=$(realpath "$W/files")
grep -qx "PGSSLROOTCERT=$FA/$CAF" "$W/last.out" || { cat "$W/last.out" >&2; t_fail "no PGSSLROOTCERT=$FA/$CAF"; }
cmp -s "$W/files/$CAF" "$TALLY_TEST_CA" || t_fail "$W/files/$CAF is not the CA"
[ "$(stat -c '%a' "$W/files/$CAF")" = 600 ] || t_fail "$W/files/$CAF is mode $(stat -c %a "$W/files/$CAF")"
t_expect_exit 0 "tally env --files, again (the file there)" tly env node-a app --node-key "$K" --files "$W/files"
mkdir -m 0700 "$W/files2"; printf 'other\n' >"$W/files2/$CAF"
t_expect_exit 1 "tally env --files over another file" tly env node-a app --node-key "$K" --files "$W/files2"
[ "$(cat "$W/files2/$CAF")" = other ] || t_fail "tally env wrote over another file"
t_ok "$(head -n 1 "$W/last.err" | cut -c1-120)"

t_check "an agent whose DIR has a space, or a quote: the reference refused, not written, exit 6"
for bad in "$W/bad dir" "$W/bad'dir"; do
	mkdir -m 0755 "$bad"
	: >"$W/agent.log"
	set +e; agent "$bad" "$W/state-bad"; rc=$?; set -e
	rm -rf "$W/state-bad"
	[ "$rc" = 6 ] || { cat "$W/agent.log" >&2; t_fail "the agent in '$bad' exited $rc, not 6"; }
	grep -q "variable PGSSLROOTCERT refused: the path of its file" "$W/agent.log" ||
		{ cat "$W/agent.log" >&2; t_fail "no refusal naming PGSSLROOTCERT"; }
	grep -q "not acknowledged" "$W/agent.log" || t_fail "the refusal does not say not acknowledged"
	[ ! -e "$bad/app.env" ] && [ ! -e "$bad/app" ] || t_fail "files written in '$bad': $(ls -A "$bad")"
	[ -e "$bad/plain.env" ] || t_fail "plain (no reference) not written in '$bad'"
done
t_ok "$(grep -m1 'refused' "$W/agent.log" | sed 's/^.*error: //' | cut -c1-150)"

t_check "logs withdrawn: the CA file stays (db still names it); app removed: it goes"
app_manifest >"$W/manifests/app.yaml"
tly apply "$W/manifests/app.yaml" >/dev/null || t_fail "re-apply app without logs"
t_tallyd_once
set +e; agent "$D" "$W/state"; rc=$?; set -e
[ "$rc" = 0 ] || { cat "$W/agent.log" >&2; t_fail "the agent exited $rc"; }
! grep -q "^LOG_" "$D/app.env" || t_fail "LOG_* outlived the withdrawn grant"
[ -f "$D/app/$CAF" ] || t_fail "the CA file left with logs, though db still names it"
grep -qx "PGSSLROOTCERT=$ABS/app/$CAF" "$D/app.env" || t_fail "PGSSLROOTCERT left"
tly remove app --yes >/dev/null || t_fail "tally remove app"
t_tallyd_once
set +e; agent "$D" "$W/state"; rc=$?; set -e
[ ! -e "$D/app/$CAF" ] || t_fail "$D/app/$CAF outlived app's grants"
[ ! -e "$D/app.env" ] || t_fail "$D/app.env outlived app's grants"
t_ok "withdrawn: $CAF kept for db; removed: DIR/app/ is $(ls -A "$D/app" 2>/dev/null | wc -l) file(s)"
