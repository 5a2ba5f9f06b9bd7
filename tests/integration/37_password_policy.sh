#!/bin/sh
# A provider's password policy (issue 28, item 4): password-length and
# password-alphabet are provider settings that every driver whose
# credential tally generates declares (drivers/decl.h,
# TL_DRV_PASSWORD_SETTINGS), and the generator keeps to them for every
# password it makes for the provider: a grant's first, a rotation's, the
# admin's own.  On a real PostgreSQL and a real Redis:
#   - a policy out of bounds (too short, too long, an unknown alphabet)
#     is refused by assign, naming the range, and nothing is appended;
#   - hex of 40 on PostgreSQL: the delivered password is 40 hex digits
#     and psql logs in with it; a rotation's is too, and logs in;
#   - the admin's own rotation under that policy keeps tally in;
#   - symbols of 24 on Redis: 24 characters of the alphabet, one of each
#     class, and redis-cli logs in with it;
#   - a provider without a policy keeps the default (32, base64url).
. "$(dirname "$0")/lib.sh"

command -v redis-cli >/dev/null 2>&1 || t_fail "redis-cli is missing (tools/deps.sh)"

t_pg_start
t_redis_start
t_init
t_node node-a 127.0.0.1
tly apply "$TALLY_SRC/examples/postgres.yaml" >/dev/null

t_check "a policy assign would not keep to is refused, naming the range; nothing appended"
before=$(tly log --json | wc -l)
for bad in "password-length=23" "password-length=129" "password-length=x" \
    "password-alphabet=emoji"; do
	t_expect_exit 4 "assign --set $bad" tly assign postgres node-a --set "$bad"
	case $bad in
	password-length=*) grep -q "expected an integer, 24-128" "$W/last.err" ;;
	*) grep -q "expected base64url, alnum, hex or symbols" "$W/last.err" ;;
	esac || t_fail "the refusal of $bad does not say what is expected: $(cat "$W/last.err")"
done
[ "$(tly log --json | wc -l)" -eq "$before" ] || t_fail "a refused assign appended"
t_ok "23, 129, x and emoji refused with the range or the alphabets"

t_check "hex of 40 on PostgreSQL: the password delivered, and the rotation's"
tly assign postgres node-a --set host=127.0.0.1 \
	--set port="$TALLY_TEST_PG_PORT" --set admin-user="$TALLY_TEST_PG_USER" \
	--set password-length=40 --set password-alphabet=hex \
	--secret admin-password <"$TALLY_TEST_PG_PWFILE" >/dev/null ||
	t_fail "assign postgres with a policy failed"
tly apply "$(t_consumer app)" >/dev/null
tly assign app node-a >/dev/null
t_tallyd_once
F=$(t_envfile node-a app)
pw=$(t_envget "$F" DB_PASSWORD)
printf '%s' "$pw" | grep -qx '[0-9a-f]\{40\}' ||
	t_fail "the delivered password is not 40 hex digits: ${#pw} characters"
t_env_psql "$F" "SELECT 1" >/dev/null || t_fail "the policy's password does not log in"
tly rotate app/db >/dev/null
t_tallyd_once
F=$(t_envfile node-a app)
pw2=$(t_envget "$F" DB_PASSWORD)
[ "$pw2" != "$pw" ] || t_fail "the rotation delivered the same password"
printf '%s' "$pw2" | grep -qx '[0-9a-f]\{40\}' ||
	t_fail "the rotation's password is not 40 hex digits: ${#pw2} characters"
t_env_psql "$F" "SELECT 1" >/dev/null || t_fail "the rotation's password does not log in"
t_ok "40 hex digits, logs in; the rotation's too"

t_check "the admin's own rotation under the policy: tally keeps its provider"
tly rotate --admin node-a/postgres >/dev/null || t_fail "rotate --admin"
t_tallyd_once
tly log --json --type admin.rotation.completed | grep -q . || t_fail "the admin rotation did not complete"
PGPASSWORD=$(cat "$TALLY_TEST_PG_PWFILE") psql -X -At -q -h 127.0.0.1 -p "$TALLY_TEST_PG_PORT" \
	-U "$TALLY_TEST_PG_USER" -d postgres -c 'select 1' >/dev/null 2>&1 &&
	t_fail "the old admin password still logs in"
t_expect_exit 0 "tally check --all (the policy's admin password)" tly check --all
t_ok "admin.rotation.completed; tally check --all passes with the new one"

t_check "symbols of 24 on Redis: one of each class, and it logs in"
mkdir -p "$W/manifests"
cat >"$W/manifests/cache.yaml" <<YAML
module: cache
provides:
  redis-user:
    driver: redis
YAML
cat >"$W/manifests/web.yaml" <<YAML
module: web
env: {R_HOST: "", R_PORT: "", R_USER: "", R_PASSWORD: ""}
requires:
  cache:
    type: redis-user
    from: cache
    env: {host: R_HOST, port: R_PORT, user: R_USER, password: R_PASSWORD}
YAML
tly apply "$W/manifests/cache.yaml" >/dev/null
tly assign cache node-a --set host=127.0.0.1 --set port="$TALLY_TEST_REDIS_PORT" \
	--set admin-user=admin --set password-length=24 --set password-alphabet=symbols \
	--secret admin-password <"$TALLY_TEST_REDIS_PWFILE" >/dev/null ||
	t_fail "assign cache with a policy failed"
tly apply "$W/manifests/web.yaml" >/dev/null
tly assign web node-a >/dev/null
t_tallyd_once
F=$(t_envfile node-a web)
pw=$(t_envget "$F" R_PASSWORD)
printf '%s' "$pw" | grep -qx '[A-Za-z0-9._~-]\{24\}' ||
	t_fail "the Redis password is not 24 of the symbols alphabet: ${#pw} characters"
for cls in '[a-z]' '[A-Z]' '[0-9]' '[._~-]'; do
	printf '%s' "$pw" | grep -q "$cls" || t_fail "the Redis password has no $cls"
done
[ "$(redis-cli -h 127.0.0.1 -p "$TALLY_TEST_REDIS_PORT" --user "$(t_envget "$F" R_USER)" \
	--pass "$pw" --no-auth-warning PING)" = PONG ] || t_fail "the symbols password does not log in"
t_ok "24 characters, every class, PONG"

t_check "a provider without a policy: the default, 32 of base64url"
tly assign postgres node-a --unset password-length --unset password-alphabet >/dev/null
tly apply "$(t_consumer app2)" >/dev/null
tly assign app2 node-a >/dev/null
t_tallyd_once
F=$(t_envfile node-a app2)
pw=$(t_envget "$F" DB_PASSWORD)
printf '%s' "$pw" | grep -qx '[A-Za-z0-9_-]\{32\}' ||
	t_fail "the default password is not 32 of base64url: ${#pw} characters"
t_env_psql "$F" "SELECT 1" >/dev/null || t_fail "the default password does not log in"
t_ok "32 of base64url, logs in"

